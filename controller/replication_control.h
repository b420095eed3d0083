/*
 * Replication control (kraft-semantics.md 3.4-3.6): topic creation with placement,
 * CreatePartitions, DeleteTopics, AlterPartition (compare-and-swap on the partition epoch, with
 * Kafka's validation order), ElectLeaders, the periodic preferred-leader rebalance and
 * leaderless-partition scan, and IncrementalAlterConfigs validation.
 *
 * Pure: the image is read, never changed. Records to write go to `out` (in order); results
 * are filled for the response sent once the records commit. An item that fails appends
 * nothing. Functions return 0 or a top-level error (KQ_ERR_NOMEM, or the top-level codes of
 * AlterPartition); per-item errors are in the result arrays.
 *
 * Ownership: requests are borrowed. Result arrays passed in are caller-owned; results that
 * this module allocates say so and have a *_free function.
 */
#ifndef KQ_REPLICATION_CONTROL_H
#define KQ_REPLICATION_CONTROL_H

#include <stdbool.h>
#include <stdint.h>

#include "decide.h"
#include "kq/util.h"
#include "partition_change.h"

#define KQ_RC_SCAN_MAX 1000 /* partitions per rebalance / leaderless pass (3.5) */

/* ---- topics ------------------------------------------------------------------------------ */
typedef struct kq_partition_assignment {
    int32_t partition_index;
    const int32_t *broker_ids;
    int32_t n_broker_ids;
} kq_partition_assignment;

typedef struct kq_config_kv {
    const char *name;
    const char *value;
} kq_config_kv;

typedef struct kq_create_topic {
    const char *name;
    int32_t num_partitions;                     /* -1: num.partitions */
    int32_t replication_factor;                 /* -1: default.replication.factor */
    const kq_partition_assignment *assignments; /* manual assignment (then both must be -1) */
    int32_t n_assignments;
    const kq_config_kv *configs;
    int32_t n_configs;
} kq_create_topic;

typedef struct kq_create_topic_result {
    int error; /* 0, INVALID_REQUEST, INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS,
                  INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT,
                  INVALID_CONFIG */
    char message[256];
    uint8_t topic_id[16];
    int32_t num_partitions;
    int32_t replication_factor;
} kq_create_topic_result;

/* Create n topics (res has n entries). Per topic: TopicRecord, ConfigRecords, then one
 * PartitionRecord per partition (ISR = active replicas in replica order, leader = first ISR
 * member, epochs 0, RECOVERED). Topic ids and placement come from `prng`. Returns 0 or
 * KQ_ERR_NOMEM. */
int kq_rc_create_topics(const kq_decide_settings *s, const kq_image *img,
                        const kq_create_topic *reqs, int32_t n, kq_prng *prng, kq_reclist *out,
                        kq_create_topic_result *res);

typedef struct kq_create_partitions {
    const char *topic;
    int32_t count;                              /* new total */
    const kq_partition_assignment *assignments; /* for the new partitions, or none */
    int32_t n_assignments;
} kq_create_partitions;

typedef struct kq_simple_result {
    int error;
    char message[256];
} kq_simple_result;

/* Errors: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (not larger), INVALID_REPLICA_ASSIGNMENT,
 * INVALID_REPLICATION_FACTOR (placement). Returns 0 or KQ_ERR_NOMEM. */
int kq_rc_create_partitions(const kq_decide_settings *s, const kq_image *img,
                            const kq_create_partitions *reqs, int32_t n, kq_prng *prng,
                            kq_reclist *out, kq_simple_result *res);

/* RemoveTopic for the topic named `name`, or with id `topic_id` when name is NULL. Errors:
 * UNKNOWN_TOPIC_OR_PARTITION (name), UNKNOWN_TOPIC_ID (id). */
int kq_rc_delete_topic(const kq_image *img, const char *name, const uint8_t topic_id[16],
                       kq_reclist *out, kq_simple_result *res);

/* ---- AlterPartition ---------------------------------------------------------------------- */
typedef struct kq_ap_isr_member {
    int32_t broker_id;
    int64_t broker_epoch; /* -1: not checked */
} kq_ap_isr_member;

typedef struct kq_ap_partition {
    int32_t partition_index;
    int32_t leader_epoch;
    int32_t partition_epoch;
    int8_t leader_recovery_state; /* KQ_RECOVERY_RECOVERED (v0) or _RECOVERING */
    const kq_ap_isr_member *new_isr;
    int32_t n_new_isr;
} kq_ap_partition;

typedef struct kq_ap_topic {
    uint8_t topic_id[16]; /* v > 1 */
    const char *name;     /* v <= 1 */
    const kq_ap_partition *partitions;
    int32_t n_partitions;
} kq_ap_topic;

typedef struct kq_alter_partition {
    int16_t version; /* 0..3 */
    int32_t broker_id;
    int64_t broker_epoch;
    const kq_ap_topic *topics;
    int32_t n_topics;
} kq_alter_partition;

typedef struct kq_ap_result {
    int error;
    int32_t leader_id;
    int32_t leader_epoch;
    int32_t *isr; /* malloc'd, freed by kq_alter_partition_result_free */
    int32_t n_isr;
    int8_t leader_recovery_state;
    int32_t partition_epoch;
} kq_ap_result;

typedef struct kq_alter_partition_result {
    int error; /* top level: 0, NOT_CONTROLLER, STALE_BROKER_EPOCH, NOMEM */
    char message[256];
    kq_ap_result *results; /* one per request partition, in request order (malloc'd) */
    int32_t n_results;
} kq_alter_partition_result;

void kq_alter_partition_result_free(kq_alter_partition_result *r);

/* Reassignment target replicas of a partition (NULL: none). Borrowed. */
typedef const int32_t *(*kq_target_replicas_fn)(void *arg, const uint8_t topic_id[16],
                                                int32_t partition, int32_t *n);

typedef struct kq_ap_ctx {
    const kq_decide_settings *s;
    bool active;                           /* false: NOT_CONTROLLER */
    kq_target_replicas_fn target_replicas; /* may be NULL */
    void *target_arg;
} kq_ap_ctx;

/* AlterPartition with the validation order of 3.6. Returns res->error (top level). Partition
 * errors: UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER (request epochs ahead),
 * FENCED_LEADER_EPOCH, INVALID_REQUEST, INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA (v > 1;
 * OPERATION_NOT_ATTEMPTED v <= 1), NEW_LEADER_ELECTED (v > 1; FENCED_LEADER_EPOCH v <= 1). */
int kq_rc_alter_partition(const kq_ap_ctx *ctx, const kq_image *img, const kq_alter_partition *req,
                          kq_reclist *out, kq_alter_partition_result *res);

/* ---- elections --------------------------------------------------------------------------- */
typedef struct kq_elect_target {
    const char *topic;
    int32_t partition;
} kq_elect_target;

typedef struct kq_elect_result {
    uint8_t topic_id[16]; /* zero for an unknown topic */
    int32_t index;        /* index into the request's targets (-1 for "all") */
    int32_t partition;
    int error; /* 0, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
                  ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION */
} kq_elect_result;

/* ElectLeaders. election_type 0 PREFERRED, 1 UNCLEAN, anything else -> returns
 * KQ_ERR_INVALID_REQUEST. targets == NULL means every partition; then ELECTION_NOT_NEEDED
 * partitions are left out. *results (malloc'd, caller frees) gets one entry per target. */
int kq_rc_elect_leaders(const kq_decide_settings *s, const kq_image *img, int election_type,
                        const kq_elect_target *targets, int32_t n_targets, kq_reclist *out,
                        kq_elect_result **results, int32_t *n_results);

/* Preferred-leader rebalance: a PREFERRED election for partitions whose leader is not
 * replicas[0], writing at most `max` records (KQ_RC_SCAN_MAX). *more: stopped at the limit.
 * Does nothing when auto.leader.rebalance.enable is false. */
int kq_rc_preferred_rebalance(const kq_decide_settings *s, const kq_image *img, int32_t max,
                              kq_reclist *out, bool *more);

/* Leaderless scan: an ONLINE (or, where enabled, UNCLEAN) election for partitions without a
 * leader, at most `max` records; *more as above. */
int kq_rc_elect_leaderless(const kq_decide_settings *s, const kq_image *img, int32_t max,
                           kq_reclist *out, bool *more);

/* ---- configs ----------------------------------------------------------------------------- */
#define KQ_CONFIG_OP_SET 0
#define KQ_CONFIG_OP_DELETE 1
#define KQ_CONFIG_OP_APPEND 2
#define KQ_CONFIG_OP_SUBTRACT 3

typedef struct kq_config_op {
    const char *name;
    const char *value;
    int8_t op;
} kq_config_op;

/* Validate one key/value for a resource type: 0 or KQ_ERR_INVALID_CONFIG (msg names it). */
int kq_rc_validate_config(int resource_type, const char *name, const char *value, char *msg,
                          size_t cap);

/* IncrementalAlterConfigs for one resource: ConfigRecords (value NULL = delete). Errors:
 * INVALID_REQUEST (resource type/name, duplicate key, bad op), UNKNOWN_TOPIC_OR_PARTITION,
 * INVALID_CONFIG. */
int kq_rc_alter_configs(const kq_image *img, int8_t resource_type, const char *resource_name,
                        const kq_config_op *ops, int32_t n_ops, kq_reclist *out,
                        kq_simple_result *res);

#endif
