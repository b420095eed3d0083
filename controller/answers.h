/*
 * The controller's answers: the describe answers built from the metadata image
 * (DescribeCluster, DescribeTopics, DescribeConfigs, DescribeFeatures: which topics, which
 * configs from which source, sorted how), and the per-item answers built from its decisions'
 * results (which name, which topic id, what an error leaves out). Pure: reads the image and
 * the results, does no I/O; the bytes come from kq_ctl_encode_answer (kq/ctl_codec.h).
 *
 * Ownership: every function borrows its inputs for the call; *out is malloc'd and the
 * caller's (kq_buf_free), and is empty unless the function returns 0. Errors:
 * KQ_ERR_INVALID_REQUEST (bad arguments), KQ_ERR_NOMEM.
 */
#ifndef KQ_CONTROLLER_ANSWERS_H
#define KQ_CONTROLLER_ANSWERS_H

#include <stdint.h>

#include "kq/codec.h"
#include "kq/ctlapi.h"
#include "kq/image.h"

/* Per-item authorization of a describe answer (Kafka answers per item): check returns 0, or
 * the error (TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED) with msg set, for a
 * resource of config resource type `type` (KQ_CONFIG_RESOURCE_TOPIC or _BROKER) named `name`;
 * `filtering`: asked while listing every topic (leaving one out is no refusal to count).
 * A NULL kq_item_authz allows everything. */
typedef struct kq_item_authz {
    int (*check)(void *arg, int8_t type, const char *name, bool filtering, char *msg, size_t cap);
    void *arg;
} kq_item_authz;

/* The topics named (n > 0; unknown names get UNKNOWN_TOPIC_OR_PARTITION, names authz refuses
 * its error, duplicates are listed once), or every topic authz allows (n == 0), sorted by
 * name, with their partitions, dynamic topic configs and effective min.insync.replicas (topic
 * config, else the cluster default config in the image, else default_min_isr). */
int kq_ctl_encode_describe_topics(const kq_image *img, const char *const *names, int32_t n,
                                  int32_t default_min_isr, const kq_item_authz *authz, kq_buf *out);
/* For each resource: a topic's dynamic configs (DYNAMIC_TOPIC), then the cluster defaults of
 * the image (DYNAMIC_DEFAULT_BROKER) and then `static_defaults` (DEFAULT) for keys not set
 * above; a broker's ("<id>") dynamic configs (DYNAMIC_BROKER), then the same fallbacks; ""
 * (brokers): the cluster defaults only. Restricted to keys[] when given. Per-resource errors:
 * UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (bad type or broker name), and authz's. */
int kq_ctl_encode_describe_configs(const kq_image *img, const kq_describe_config_resource *reqs,
                                   int32_t n, const kq_config_kv *static_defaults, int32_t n_static,
                                   const kq_item_authz *authz, kq_buf *out);

typedef struct kq_ctl_feature_range {
    const char *name;
    int16_t min_version, max_version;
    int16_t finalized; /* > 0: the finalized level of a feature kept outside the image
                        * (kraft.version, the Raft layer's) */
} kq_ctl_feature_range;
/* Features the controller supports (their finalized level from the image, or the range's
 * `finalized`, 0 if unset) plus
 * any finalized in the image but not listed (supported 0..0), sorted by name. Epoch: the
 * image's committed offset. */
int kq_ctl_encode_describe_features(const kq_image *img, const kq_ctl_feature_range *supported,
                                    int32_t n, kq_buf *out);

/* ---- per-item answers from the decisions' results ---------------------------------------- */

/* reqs[i] <-> res[i], n of each; each result's message NUL-terminated (else
 * KQ_ERR_INVALID_REQUEST), "" for none. */
int kq_ctl_encode_create_topics_response(const kq_create_topic *reqs,
                                         const kq_create_topic_result *res, int32_t n, kq_buf *out);
int kq_ctl_encode_delete_topics_response(const kq_delete_topic *reqs, const kq_simple_result *res,
                                         int32_t n, kq_buf *out);
int kq_ctl_encode_create_partitions_response(const kq_create_partitions *reqs,
                                             const kq_simple_result *res, int32_t n, kq_buf *out);
/* results from kq_rc_elect_leaders for `req`; topic names come from req->targets[index], or
 * from `img` (by topic id) for an all-partitions election. */
int kq_ctl_encode_elect_leaders_response(const kq_image *img, const kq_elect_leaders *req,
                                         const kq_elect_result *res, int32_t n_res, kq_buf *out);
int kq_ctl_encode_alter_configs_response(const kq_alter_config_resource *reqs,
                                         const kq_simple_result *res, int32_t n, kq_buf *out);
int kq_ctl_encode_update_features_response(const kq_feature_update *reqs,
                                           const kq_simple_result *res, int32_t n, kq_buf *out);

/* Every registered broker in id order. controller_id: the active controller (-1 unknown). */
int kq_ctl_encode_describe_cluster(const kq_image *img, const char *cluster_id,
                                   int32_t controller_id, kq_buf *out);

/* CreateAcls: one result per creation, in request order. */
int kq_ctl_encode_create_acls_response(const kq_simple_result *res, int32_t n, kq_buf *out);

#endif
