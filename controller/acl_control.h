/*
 * ACL control (Kafka's AclControlManager): the decisions of CreateAcls, DescribeAcls and
 * DeleteAcls over the image's ACL bindings (include/kq/image.h, kq_image_acls).
 *
 * Pure: the image is read, never changed. Records to write go to `out`; answers are encoded
 * from the image as it is when called (the caller adds the records afterwards).
 *
 * Ownership: requests and the image are borrowed; `out` receives records that own their
 * memory; *resp is filled with malloc'd bytes (kq_buf_free).
 */
#ifndef KQ_ACL_CONTROL_H
#define KQ_ACL_CONTROL_H

#include <stdint.h>

#include "decide.h"
#include "kq/codec.h"
#include "kq/ctlapi.h"
#include "kq/util.h"

/* At most this many ACL bindings in the cluster: every authorization reads them all. */
#define KQ_ACL_MAX_BINDINGS 10000

/* Creations one CreateAcls may carry (each is checked against every binding). */
#define KQ_ACL_MAX_CREATIONS 1000

/* CreateAcls, one creation (later creations see the records of earlier ones only once they
 * are applied: call, add the records, call for the next). An AccessControlEntry record with a
 * fresh id from `prng`, or nothing when the same binding exists (Kafka: success). Errors in
 * *res: INVALID_REQUEST (kq_acl_binding_check's message), POLICY_VIOLATION (the cluster
 * holds KQ_ACL_MAX_BINDINGS). 0 or KQ_ERR_NOMEM. */
int kq_acl_create(const kq_image *img, const kq_acl *binding, kq_prng *prng, kq_reclist *out,
                  kq_simple_result *res);

/* DescribeAcls: encodes the bindings the filter selects, sorted by resource type, resource
 * name, pattern type, principal, host, operation and permission. A filter that is not valid
 * (kq_acl_filter_check) is a top-level INVALID_REQUEST with errbuf set. */
int kq_acl_describe(const kq_image *img, const kq_acl_filter *filter, kq_buf *resp, char *errbuf,
                    size_t errlen);

/* DeleteAcls: per filter, the bindings it selects (as Kafka, a binding several filters select
 * is reported under each); one RemoveAccessControlEntry record per binding selected goes to
 * `out` and the answer is encoded into *resp. An invalid filter is answered INVALID_REQUEST in
 * its own result. 0 or KQ_ERR_NOMEM. */
int kq_acl_delete(const kq_image *img, const kq_acl_filter *filters, int32_t n, kq_reclist *out,
                  kq_buf *resp);

#endif
