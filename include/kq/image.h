/*
 * kq_image: the cluster metadata image (brokers, topics, partitions, configs, features, ACLs) built
 * by replaying metadata records (include/kq/records.h). Pure: no I/O, no clock, no protobuf.
 * Not thread-safe: one owner thread (the controller loop) applies and reads.
 *
 * Apply is deterministic and total: kq_image_apply either applies a record completely or
 * returns an error and leaves the image exactly as it was. An error means the record cannot
 * apply to this image (unknown topic in a PartitionChange, duplicate topic id, partition index
 * out of order, epoch mismatch on a broker change, ...); the caller treats it as corruption.
 * kq_image_error() names the problem.
 *
 * Uncommitted state: every apply keeps an undo entry. kq_image_commit(img, off) drops the
 * entries at offsets <= off; kq_image_rollback(img, off) undoes every record applied after off
 * and restores the exact prior state. A standby that applies only committed records simply
 * calls kq_image_commit after each apply (or batch).
 *
 * Scale: partitions are stored per topic in an array indexed by partition id; each partition
 * has one small allocation holding its replica lists. Topics are found through hash indexes by
 * id and by name. A broker -> partitions index (replica of, leader of) and per-broker ISR/ELR
 * counts are kept up to date on every apply and rollback.
 *
 * Ownership: the image owns everything it holds. Every const pointer returned (brokers,
 * topics, partitions, strings) is owned by the image and stays valid only until the next
 * kq_image_apply, kq_image_rollback, kq_image_commit or kq_image_free.
 */
#ifndef KQ_IMAGE_H
#define KQ_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kq/records.h"

typedef struct kq_image kq_image;

/* A registered broker. */
typedef struct kq_broker {
    int32_t id;
    uint8_t incarnation_id[16];
    int64_t epoch;
    kq_rec_endpoint *endpoints;
    int32_t n_endpoints;
    char *rack; /* NULL = none */
    bool fenced;
    bool in_controlled_shutdown;
    int64_t registration_offset; /* offset of the RegisterBroker record that created it */
} kq_broker;

/* One partition (32 bytes). Read the lists with the accessors below; `ids` also holds
 * private index positions after the four lists. */
typedef struct kq_partition {
    int32_t *ids;
    int32_t leader; /* KQ_NO_LEADER (-1) when none */
    int32_t leader_epoch;
    int32_t partition_epoch;
    uint16_t n_replicas, n_isr, n_elr, n_last_known_elr;
    int8_t leader_recovery_state; /* KQ_RECOVERY_RECOVERED / KQ_RECOVERY_RECOVERING */
} kq_partition;

static inline const int32_t *kq_partition_replicas(const kq_partition *p)
{
    return p->ids;
}
static inline const int32_t *kq_partition_isr(const kq_partition *p)
{
    return p->ids + p->n_replicas;
}
static inline const int32_t *kq_partition_elr(const kq_partition *p)
{
    return p->ids + p->n_replicas + p->n_isr;
}
static inline const int32_t *kq_partition_last_known_elr(const kq_partition *p)
{
    return p->ids + p->n_replicas + p->n_isr + p->n_elr;
}
/* 1 if id is in ids[0..n). */
static inline bool kq_ids_contain(const int32_t *ids, int n, int32_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

typedef struct kq_topic {
    uint8_t id[16];
    char *name;
    kq_partition *partitions; /* indexed by partition id, [0, n_partitions) */
    int32_t n_partitions;
    int32_t cap_partitions_; /* private */
    uint32_t slot_;          /* private */
} kq_topic;

/* Create an empty image (offset -1). NULL on out of memory. */
kq_image *kq_image_new(void);
void kq_image_free(kq_image *img);
/* Drop all content and the undo log: the image becomes like a new one (offset -1). */
void kq_image_clear(kq_image *img);

/* Apply the record at log offset `offset` (> the last applied offset). 0 on success; otherwise
 * a kq error (KQ_ERR_INVALID_REQUEST, _UNKNOWN_TOPIC_ID, _UNKNOWN_TOPIC_OR_PARTITION,
 * _TOPIC_ALREADY_EXISTS, _BROKER_ID_NOT_REGISTERED, _STALE_BROKER_EPOCH, _NOMEM) and the image
 * is unchanged. LeaderChange, KRaftVersion, Voters (the Raft layer's quorum records), NoOp and
 * Opaque records only advance the offset. */
int kq_image_apply(kq_image *img, int64_t offset, const kq_record *r);
/* Message for the last failed apply/rollback/commit/load ("" if none). Owned by the image. */
const char *kq_image_error(const kq_image *img);

int64_t kq_image_offset(const kq_image *img);           /* last applied, -1 when none */
int64_t kq_image_committed_offset(const kq_image *img); /* -1 when none */
/* Mark everything up to `offset` committed (clamped to the last applied offset; never moves
 * back) and drop its undo entries. Always 0. */
int kq_image_commit(kq_image *img, int64_t offset);
/* Undo every record applied after `offset` (>= the committed offset, else
 * KQ_ERR_INVALID_REQUEST and nothing changes). Afterwards kq_image_offset() == offset (when it
 * was larger). Needs no allocation. */
int kq_image_rollback(kq_image *img, int64_t offset);
/* Undo entries currently held (records applied and not committed that changed something). */
size_t kq_image_undo_depth(const kq_image *img);

/* ---- brokers ----------------------------------------------------------------------------- */
const kq_broker *kq_image_broker(const kq_image *img, int32_t id); /* NULL if not registered */
/* Registered brokers in id order: start with prev = NULL; NULL after the last. */
const kq_broker *kq_image_broker_next(const kq_image *img, const kq_broker *prev);

/* Index roles for the broker -> partitions index. */
typedef enum kq_image_role {
    KQ_ROLE_LEADER = 0,  /* partitions the broker leads */
    KQ_ROLE_REPLICA = 1, /* partitions listing it in replicas */
    KQ_ROLE_ISR = 2,
    KQ_ROLE_ELR = 3,
    KQ_ROLE_LAST_KNOWN_ELR = 4,
} kq_image_role;

/* Number of partitions in which broker `id` has `role` (registered or not; 0 for unknown).
 * O(1) for LEADER, REPLICA, ISR and ELR. */
uint32_t kq_image_broker_count(const kq_image *img, int32_t id, kq_image_role role);

/* Callback for partition iteration; return non-zero to stop (that value is returned). The
 * callback must not modify the image. */
typedef int (*kq_image_partition_cb)(void *arg, const kq_topic *t, int32_t partition_id,
                                     const kq_partition *p);
/* Every partition where broker `id` has `role`, in unspecified (but deterministic for a given
 * apply history) order. Cost: O(partitions of the broker). */
int kq_image_foreach_broker_partition(const kq_image *img, int32_t id, kq_image_role role,
                                      kq_image_partition_cb cb, void *arg);
/* Every partition of every topic (topics in unspecified order, partitions in id order). */
int kq_image_foreach_partition(const kq_image *img, kq_image_partition_cb cb, void *arg);

/* (topic id, partition) pairs, e.g. to collect the partitions a broker leads and then apply
 * changes to them. */
typedef struct kq_tp {
    uint8_t topic_id[16];
    int32_t partition;
} kq_tp;
/* Same selection as kq_image_foreach_broker_partition, as a malloc'd array the caller frees
 * (*out NULL when *n == 0). 0 or KQ_ERR_NOMEM. */
int kq_image_broker_partitions(const kq_image *img, int32_t id, kq_image_role role, kq_tp **out,
                               size_t *n);

/* ---- topics and partitions --------------------------------------------------------------- */
const kq_topic *kq_image_topic_by_name(const kq_image *img, const char *name);
const kq_topic *kq_image_topic_by_id(const kq_image *img, const uint8_t id[16]);
/* All topics in unspecified order: start with prev = NULL. */
const kq_topic *kq_image_topic_next(const kq_image *img, const kq_topic *prev);
/* NULL when the topic or partition does not exist. */
const kq_partition *kq_image_partition(const kq_image *img, const uint8_t topic_id[16],
                                       int32_t partition_id);

/* ---- configs and features ---------------------------------------------------------------- */
/* Value of a config key (NULL if unset). resource "" = cluster default. */
const char *kq_image_config(const kq_image *img, int resource_type, const char *resource,
                            const char *name);
typedef int (*kq_image_config_cb)(void *arg, int resource_type, const char *resource,
                                  const char *name, const char *value);
/* Configs sorted by (type, resource, name); resource_type 0 = every type, resource NULL = every
 * resource of that type. */
int kq_image_foreach_config(const kq_image *img, int resource_type, const char *resource,
                            kq_image_config_cb cb, void *arg);
int16_t kq_image_feature(const kq_image *img, const char *name); /* 0 if not set */
/* The configured min.insync.replicas of a topic: the topic's config, else the cluster default
 * (broker resource ""), else dflt. A value that is not a whole number in 1..INT32_MAX is
 * skipped (the controller refuses those). A per-broker value is not read (the controller
 * refuses it: the describe filters and the ELR decisions could not agree with one broker's
 * own minimum). Not capped: the effective minimum is kq_min_isr_effective (util.h), which
 * every user of the rule goes through. */
int32_t kq_image_min_isr(const kq_image *img, const char *topic, int32_t dflt);
typedef int (*kq_image_feature_cb)(void *arg, const char *name, int16_t level);
int kq_image_foreach_feature(const kq_image *img, kq_image_feature_cb cb, void *arg);

/* ---- ACLs -------------------------------------------------------------------------------- */
/* The ACL bindings (AccessControlEntry records not removed), sorted by id: the list
 * kq_authorize (include/kq/authorizer.h) decides over. *n receives the count; NULL img: none. */
const kq_acl *kq_image_acls(const kq_image *img, size_t *n);
/* The bindings as of the committed offset (what an authorizer decides with: Kafka's
 * StandardAuthorizer sees committed metadata only): *out, *n; in no particular order. While no
 * ACL record is uncommitted they are kq_image_acls' (*scratch NULL); otherwise a list built in
 * *scratch (malloc'd, the caller frees it; its strings are the image's). Valid until the next
 * apply, commit, rollback or free. 0, or KQ_ERR_NOMEM (deny, then). */
int kq_image_committed_acls(const kq_image *img, const kq_acl **out, size_t *n, kq_acl **scratch);

/* ---- counts, hash, snapshot -------------------------------------------------------------- */
typedef struct kq_image_counts {
    uint32_t brokers; /* registered */
    uint32_t fenced_brokers;
    uint32_t controlled_shutdown_brokers;
    uint32_t topics;
    uint64_t partitions;
    uint64_t offline_partitions;  /* leader == -1 */
    uint64_t preferred_imbalance; /* leader != replicas[0] */
    uint64_t under_replicated;    /* isr size < replicas size */
    uint32_t configs;
    uint32_t features;
    uint32_t acls;
} kq_image_counts;
void kq_image_get_counts(const kq_image *img, kq_image_counts *out);

/* Canonical 64-bit hash of the content (brokers, topics, partitions, configs, features, ACLs; not
 * the offsets or the undo log). Independent of hash-table layout and of apply history: two images
 * with equal content have equal hashes. */
uint64_t kq_image_hash(const kq_image *img);

/* Bytes the image has allocated (requested sizes; malloc overhead not included). */
size_t kq_image_memory_bytes(const kq_image *img);

/* The image as records, in canonical order: FeatureLevel (by name), RegisterBroker (by id),
 * per topic (by name) Topic then Partition 0..n-1, then Config (by type, resource, name), then
 * AccessControlEntry (by id).
 * Replaying them into an empty image yields an image with the same hash. The records passed
 * to cb borrow the image's memory (valid during the call). Returns cb's non-zero value,
 * KQ_ERR_NOMEM, or 0. */
typedef int (*kq_image_record_cb)(void *arg, const kq_record *r);
int kq_image_foreach_record(const kq_image *img, kq_image_record_cb cb, void *arg);

/* Internal, for the snapshot loader in kq_recordcodec only: apply without an undo entry and
 * without touching the offsets; then set offset and committed offset at once. */
int kq_image_apply_noundo_(kq_image *img, int64_t offset, const kq_record *r);
void kq_image_set_offsets_(kq_image *img, int64_t offset);

/* ---- kq_recordcodec (common/wire/record_codec.c): protobuf-backed helpers over the image ---- */
struct kq_buf;
/* Append the image as length-prefixed kq.Record bytes (kq_image_foreach_record order) to out.
 * *n_records (may be NULL) receives the number appended. */
int kq_image_snapshot_write(const kq_image *img, struct kq_buf *out, int32_t *n_records);
/* Load a snapshot written by kq_image_snapshot_write into an EMPTY image (else
 * KQ_ERR_INVALID_REQUEST): replays it, then sets offset and committed offset to end_offset - 1
 * (end_offset is the snapshot id's exclusive end offset). On error the image is left empty. */
int kq_image_snapshot_load(kq_image *img, const uint8_t *buf, size_t len, int64_t end_offset,
                           char *errbuf, size_t errlen);
/* Decode and apply `count` length-prefixed records of a batch payload at offsets base_offset,
 * base_offset + 1, ... Stops at the first error (records before it stay applied). */
int kq_image_replay(kq_image *img, const uint8_t *records, size_t len, int64_t base_offset,
                    int32_t count, char *errbuf, size_t errlen);

#endif
