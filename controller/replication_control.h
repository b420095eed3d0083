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
#include "kq/ctlapi.h" /* request and result types */
#include "kq/util.h"
#include "partition_change.h"

#define KQ_RC_SCAN_MAX 1000 /* partitions per rebalance / leaderless pass (3.5) */

/* ---- topics ------------------------------------------------------------------------------ */
/* Create n topics (res has n entries). Per topic: TopicRecord, ConfigRecords, then one
 * PartitionRecord per partition (ISR = active replicas in replica order, leader = first ISR
 * member, epochs 0, RECOVERED). Topic ids and placement come from `prng`. `refused` (NULL,
 * or one per request): a request whose refused[i].error is set is answered refused[i] and
 * writes nothing, once the request-wide checks (duplicate names and ids, which Kafka answers
 * INVALID_REQUEST first) have passed. Returns 0 or KQ_ERR_NOMEM. */
int kq_rc_create_topics(const kq_decide_settings *s, const kq_image *img,
                        const kq_create_topic *reqs, int32_t n,
                        const kq_create_topic_result *refused, kq_prng *prng, kq_reclist *out,
                        kq_create_topic_result *res);

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
/* Validate one key/value for a resource (type and name: a topic, "" for the cluster default,
 * a broker id): 0 or KQ_ERR_INVALID_CONFIG (msg names it). value NULL checks the name only (a
 * DELETE); a value for a key kq does not enforce at that scope is refused as not supported
 * yet. */
int kq_rc_validate_config(int resource_type, const char *resource, const char *name,
                          const char *value, char *msg, size_t cap);

/* IncrementalAlterConfigs for one resource: ConfigRecords (value NULL = delete). Errors:
 * INVALID_REQUEST (resource type/name, duplicate key, bad op), UNKNOWN_TOPIC_OR_PARTITION,
 * INVALID_CONFIG. */
int kq_rc_alter_configs(const kq_image *img, int8_t resource_type, const char *resource_name,
                        const kq_config_op *ops, int32_t n_ops, kq_reclist *out,
                        kq_simple_result *res);

#endif
