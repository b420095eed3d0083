/*
 * ACL control: CreateAcls, DescribeAcls, DeleteAcls. Contract: acl_control.h.
 */
#include "acl_control.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/ctl_codec.h"
#include "kq/error.h"
#include "kq/image.h"

static bool same_binding(const kq_acl *a, const kq_acl *b)
{
    return a->resource_type == b->resource_type && a->pattern_type == b->pattern_type &&
           a->operation == b->operation && a->permission == b->permission &&
           !strcmp(a->resource_name, b->resource_name) && !strcmp(a->principal, b->principal) &&
           !strcmp(a->host, b->host);
}

static bool id_in_use(const kq_acl *acls, size_t n, const uint8_t id[16])
{
    for (size_t i = 0; i < n; i++)
        if (!memcmp(acls[i].id, id, 16))
            return true;
    return false;
}

int kq_acl_create(const kq_image *img, const kq_acl *binding, kq_prng *prng, kq_reclist *out,
                  kq_simple_result *res)
{
    size_t n;
    const kq_acl *acls = kq_image_acls(img, &n);
    kq_record r = {.type = KQ_REC_ACL}, copy;

    memset(res, 0, sizeof *res);
    if (kq_acl_binding_check(binding, res->message, sizeof res->message)) {
        res->error = KQ_ERR_INVALID_REQUEST;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (same_binding(&acls[i], binding))
            return 0;
    if (n >= KQ_ACL_MAX_BINDINGS) {
        res->error = KQ_ERR_POLICY_VIOLATION;
        snprintf(res->message, sizeof res->message,
                 "the cluster holds %d ACL bindings, the most it may hold", KQ_ACL_MAX_BINDINGS);
        return 0;
    }
    r.acl = *binding;
    do {
        uint64_t a = kq_prng_next(prng), b = kq_prng_next(prng);

        memcpy(r.acl.id, &a, 8);
        memcpy(r.acl.id + 8, &b, 8);
    } while (kq_uuid_is_zero(r.acl.id) || id_in_use(acls, n, r.acl.id));
    if (kq_record_copy(&copy, &r))
        return KQ_ERR_NOMEM;
    return kq_reclist_push(out, &copy);
}

static int cmp_str(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "");
}

static int cmp_binding(const void *x, const void *y)
{
    const kq_acl *a = x, *b = y;
    int d;

    if (a->resource_type != b->resource_type)
        return a->resource_type - b->resource_type;
    if ((d = cmp_str(a->resource_name, b->resource_name)))
        return d;
    if (a->pattern_type != b->pattern_type)
        return a->pattern_type - b->pattern_type;
    if ((d = cmp_str(a->principal, b->principal)) || (d = cmp_str(a->host, b->host)))
        return d;
    if (a->operation != b->operation)
        return a->operation - b->operation;
    return a->permission - b->permission;
}

/* The bindings f selects, sorted; *v malloc'd (the strings borrowed from the image). With
 * `removed` (one flag per image binding), a RemoveAccessControlEntry record goes to `out` for
 * each selected binding not yet flagged, which is then flagged. */
static int select_bindings(const kq_image *img, const kq_acl_filter *f, bool *removed,
                           kq_reclist *out, kq_acl **v, int32_t *nv)
{
    size_t n;
    const kq_acl *acls = kq_image_acls(img, &n);
    int rc = 0;

    *nv = 0;
    if (!(*v = malloc((n ? n : 1) * sizeof **v)))
        return KQ_ERR_NOMEM;
    for (size_t i = 0; i < n && !rc; i++) {
        if (!kq_acl_filter_matches(f, &acls[i]))
            continue;
        (*v)[(*nv)++] = acls[i];
        if (removed && !removed[i]) {
            kq_record r = {.type = KQ_REC_REMOVE_ACL};

            removed[i] = true;
            memcpy(r.remove_acl.id, acls[i].id, 16);
            rc = kq_reclist_push(out, &r);
        }
    }
    qsort(*v, (size_t)*nv, sizeof **v, cmp_binding);
    return rc;
}

int kq_acl_describe(const kq_image *img, const kq_acl_filter *filter, kq_buf *resp, char *errbuf,
                    size_t errlen)
{
    kq_ctl_acls_desc d = {0};
    int rc;

    if (kq_acl_filter_check(filter, errbuf, errlen))
        return KQ_ERR_INVALID_REQUEST;
    if ((rc = select_bindings(img, filter, NULL, NULL, &d.acls, &d.n))) {
        free(d.acls);
        return rc;
    }
    rc = kq_ctl_encode_answer(KQ_API_DESCRIBE_ACLS, &d, resp);
    free(d.acls);
    return rc;
}

int kq_acl_delete(const kq_image *img, const kq_acl_filter *filters, int32_t n, kq_reclist *out,
                  kq_buf *resp)
{
    size_t n_acls;
    bool *taken;
    kq_ctl_delete_acls_desc d = {0};
    int rc = 0;

    kq_image_acls(img, &n_acls);
    taken = calloc(n_acls ? n_acls : 1, sizeof *taken);
    d.results = calloc(n > 0 ? (size_t)n : 1, sizeof *d.results);
    if (!taken || !d.results) {
        free(taken);
        free(d.results);
        return KQ_ERR_NOMEM;
    }
    d.n = n;
    char(*msgs)[KQ_CTL_MAX_MESSAGE + 1] = calloc(n > 0 ? (size_t)n : 1, sizeof *msgs);

    for (int32_t i = 0; i < n && !rc && msgs; i++) {
        kq_ctl_delete_acls_result *res = &d.results[i];

        if (kq_acl_filter_check(&filters[i], msgs[i], sizeof msgs[i])) {
            res->error = KQ_ERR_INVALID_REQUEST;
            res->message = msgs[i];
            continue;
        }
        rc = select_bindings(img, &filters[i], taken, out, &res->acls, &res->n);
    }
    if (!msgs)
        rc = KQ_ERR_NOMEM;
    if (!rc)
        rc = kq_ctl_encode_answer(KQ_API_DELETE_ACLS, &d, resp);
    for (int32_t i = 0; i < n; i++)
        free(d.results[i].acls);
    free(d.results);
    free(msgs);
    free(taken);
    return rc;
}
