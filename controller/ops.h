/*
 * The controller APIs on the active controller: run the pure decision for one decoded
 * request, append its records to the proposal being built (applying them to the image at
 * once, controller/meta.h) and encode the response. The daemon sends the response once the
 * high watermark passes `*wait_offset` (everything the answer depends on has committed).
 *
 * Ownership: the context is borrowed; *resp is filled with malloc'd bytes (kq_buf_free).
 */
#ifndef KQ_CTL_OPS_H
#define KQ_CTL_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kq/codec.h"
#include "kq/ctl_codec.h"
#include "meta.h"

/* Records one client operation may write (kraft-semantics 3.1: Kafka's limit). */
#define KQ_OP_MAX_RECORDS 10000

typedef struct kq_op_ctx {
    kq_meta *meta;
    kq_buf *batch;             /* the proposal being built this loop iteration */
    const int64_t *batch_base; /* offset its first record will get (the log end offset) */
    int32_t *batch_count;      /* records in it so far */
    int64_t now_ms;
    int32_t controller_id; /* this node */
    /* Called when the proposal reaches max_batch_bytes: the daemon proposes it and starts a
     * new one (updating *batch_base and *batch_count). One operation's records may so span
     * several batches. */
    void (*flush)(void *arg);
    void *flush_arg;
    size_t max_batch_bytes;
    /* Per-item authorization of a client's request (Kafka's rules, answered per topic or
     * resource): NULL or disabled = everything allowed (the controller's own timers). */
    const kq_authorizer_config *authz;
    const char *principal; /* the client's (NULL: User:ANONYMOUS) */
    /* kraft.version (KIP-853) is the Raft layer's, not a FeatureLevelRecord: UpdateFeatures of
     * it asks the core, after the proposal being built is flushed. Returns 0 or a kq error with
     * msg set. NULL: kraft.version stays 0. */
    int (*upgrade_kraft)(void *arg, int16_t level, bool validate_only, char *msg, size_t msglen);
    void *upgrade_arg;
    int16_t kraft_version; /* in force (kq_raft_status.kraft_version), for DescribeFeatures */
    /* May be NULL: the items refused (their count, and the last refusal's message), and the
     * committed ACLs as the operation's checks read them (built once per kq_op_run, freed at
     * its end). */
    struct kq_op_refusals {
        int32_t items;
        char msg[512];
        bool have_view;
        const kq_acl *acls;
        size_t n_acls;
        kq_acl *scratch;
    } * refusals;
} kq_op_ctx;

/* Run one controller API (the caller checked that this node is the active controller and the
 * request-level authorization: the cluster operations). Items (topics, config resources) the
 * principal may not touch are answered TOPIC_AUTHORIZATION_FAILED (CLUSTER_... for broker and
 * cluster-default configs) in their own result, as Kafka does, and the others go ahead.
 * Returns 0 with *resp and *wait_offset set (-1: nothing to wait for), or a top-level error
 * code with errbuf set (nothing appended, *resp empty). KQ_ERR_NOT_CONTROLLER: leadership was
 * lost in a flush in the middle of the operation (what was proposed before may commit; the
 * rest was not written). A record that cannot apply to the image is a bug: KQ_ERR_FATAL, the
 * daemon stops. */
int kq_op_run(const kq_op_ctx *ctx, const kq_ctl_request *req, kq_buf *resp, int64_t *wait_offset,
              char *errbuf, size_t errlen);

/* May principal (NULL: User:ANONYMOUS) do op on the resource, by the image's committed ACLs
 * (kq_image_committed_acls)? 0 (also
 * when authz is NULL or disabled), or TOPIC_AUTHORIZATION_FAILED (a topic) /
 * CLUSTER_AUTHORIZATION_FAILED with msg naming principal, operation and resource. */
int kq_op_authorize(const kq_authorizer_config *authz, const kq_image *img, const char *principal,
                    kq_acl_operation op, kq_acl_resource_type type, const char *name, char *msg,
                    size_t cap);

/* On activation: a cluster whose feature levels are not finalized yet (a new cluster, or one
 * made by a kq that did not finalize them) gets a FeatureLevel record for each level it runs at
 * (metadata.version at its highest, eligible.leader.replicas.version 1 when ELR is on), as
 * `kafka-storage format` bootstraps them in Kafka. *wrote: records were appended. Returns
 * KQ_ERR_FATAL only when a record cannot apply. */
int kq_op_bootstrap_features(const kq_op_ctx *ctx, bool *wrote, char *errbuf, size_t errlen);

/* Timers of the active controller. Each appends records (if any) like kq_op_run and returns
 * KQ_ERR_FATAL only when a record cannot apply, KQ_ERR_NOT_CONTROLLER when leadership was
 * lost in a flush (stop: the node is no longer active). kq_op_bootstrap_features too. */
/* Fence brokers whose session expired, one per call; *next_ms: when to call again. */
int kq_op_fence_stale(const kq_op_ctx *ctx, int64_t *next_ms, int32_t *fenced_id, char *errbuf,
                      size_t errlen);
/* Leaderless-partition scan and preferred-leader rebalance (at most 1000 changes each);
 * *more: call again soon. */
int kq_op_elect_leaderless(const kq_op_ctx *ctx, bool *more, char *errbuf, size_t errlen);
int kq_op_rebalance(const kq_op_ctx *ctx, bool *more, char *errbuf, size_t errlen);

#endif
