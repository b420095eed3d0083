/*
 * The broker agent's replica manager (skeleton, no data-plane networking yet).
 *
 * After each committed metadata batch the broker calls kq_rm_on_metadata(): it computes which
 * partitions this broker now hosts (kq_rm_compute, a pure function of the image and the
 * previous hosted set), creates their partition logs (kq_plog) and kq_replica instances, and
 * steps a DELTA event into each replica whose metadata changed. Rules (kraft-semantics 4.7):
 * a partition whose image entry has an older partition epoch than the one already acted on is
 * ignored; one this broker is no longer a replica of (reassigned, or topic deleted) is stopped
 * and its log deleted; at the first call, logs of partitions not hosted are deleted too.
 *
 * The data plane (data_plane.h) steps the same replicas for Produce, Fetch, AlterPartition
 * answers and timers, through kq_rm_find / kq_rm_replica_mut and the kq_rm_log_* helpers, and
 * sees every metadata step's update through the update callback.
 *
 * Log lines (INFO, component "replica"): "Became leader of T-P at leader epoch E",
 * "Became follower of T-P at leader epoch E (leader L)", "Stopped replica of T-P".
 *
 * Ownership: kq_rm_compute's *next and *changes are malloc'd and the caller's (free()).
 * A kq_rm borrows its kq_plog (the caller closes it after kq_rm_free) and owns its replicas.
 */
#ifndef KQ_BROKER_REPLICA_MANAGER_H
#define KQ_BROKER_REPLICA_MANAGER_H

#include <stddef.h>
#include <stdint.h>

#include "kq/image.h"
#include "kq/plog.h"
#include "kq/replica.h"

#define KQ_RM_TOPIC_LEN 250 /* topic names are at most 249 characters */

/* One hosted partition as the metadata describes it. */
typedef struct kq_rm_partition {
    uint8_t topic_id[16];
    char topic[KQ_RM_TOPIC_LEN];
    int32_t partition;
    kq_replica_role role; /* LEADER if leader == this broker, else FOLLOWER */
    int32_t leader;       /* -1: none */
    int32_t leader_epoch;
    int32_t partition_epoch;
    int32_t replicas[KQ_REPLICA_MAX_REPLICAS];
    int n_replicas;
    int32_t isr[KQ_REPLICA_MAX_REPLICAS];
    int n_isr;
    /* configured min.insync.replicas (kq_image_min_isr: the topic's, else the cluster
     * default); 0: none set, the static min.insync.replicas applies */
    int32_t min_isr;
} kq_rm_partition;

typedef enum kq_rm_change_kind {
    KQ_RM_BECOME_LEADER = 1, /* new, or a new leader epoch, with this broker as leader */
    KQ_RM_BECOME_FOLLOWER,   /* new, or a new leader epoch, with another (or no) leader */
    KQ_RM_UPDATE,            /* same leader epoch, newer partition epoch (ISR, replicas) or a
                              * changed min.insync.replicas (a Config record at any level) */
    KQ_RM_STOP,              /* no longer a replica here (reassigned or topic deleted) */
} kq_rm_change_kind;

/* "become-leader", "become-follower", "update", "stop"; static. */
const char *kq_rm_change_name(kq_rm_change_kind kind);

typedef struct kq_rm_change {
    kq_rm_change_kind kind;
    kq_rm_partition p; /* the new state; for STOP the last one acted on */
} kq_rm_change;

/*
 * Pure delta: the partitions of `img` that list `node_id` among their replicas, compared with
 * `prev` (the previous *next, sorted by topic id then partition; NULL when n_prev == 0).
 * *next: the new hosted set, sorted the same way (a partition whose image entry has an older
 * partition epoch than prev's keeps prev's entry and yields no change). *changes: in the same
 * order, then the STOPs. *skipped: partitions with more than KQ_REPLICA_MAX_REPLICAS replicas
 * (not hosted); *stale: image entries ignored for an older partition epoch. Returns 0,
 * KQ_ERR_NOMEM or KQ_ERR_INVALID_REQUEST (prev not sorted or with duplicates).
 */
int kq_rm_compute(const kq_image *img, int32_t node_id, const kq_rm_partition *prev, size_t n_prev,
                  kq_rm_partition **next, size_t *n_next, kq_rm_change **changes, size_t *n_changes,
                  size_t *skipped, size_t *stale);

/* ---- the manager (does I/O through kq_plog) ---- */

typedef struct kq_rm kq_rm;

typedef struct kq_rm_config {
    int32_t node_id;
    uint32_t replica_lag_time_max_ms;
    int32_t min_insync_replicas; /* cluster default; a topic's config overrides it */
} kq_rm_config;

typedef struct kq_rm_counts {
    size_t leaders;
    size_t followers;
    size_t skipped;   /* partitions not hosted: replication factor over the limit */
    uint64_t changes; /* become-leader, become-follower, update and stop changes applied */
    uint64_t stale;   /* image entries ignored for an older partition epoch (cumulative) */
} kq_rm_counts;

/* NULL on out of memory. plog is borrowed. */
kq_rm *kq_rm_new(const kq_rm_config *cfg, kq_plog *plog);
void kq_rm_free(kq_rm *rm);

/* Act on the committed image: create / step / stop replicas, in one kq_plog transaction.
 * Returns 0, or a kq error with a message in errbuf; the caller treats any error as fatal
 * (replicas may have been stepped although the transaction was aborted). */
int kq_rm_on_metadata(kq_rm *rm, const kq_image *img, uint64_t now_ms, char *errbuf, size_t errlen);

void kq_rm_get_counts(const kq_rm *rm, kq_rm_counts *out);

/* The hosted set (sorted) and the replica of entry i; valid until the next on_metadata. */
const kq_rm_partition *kq_rm_partitions(const kq_rm *rm, size_t *n);
const kq_replica *kq_rm_replica(const kq_rm *rm, size_t i);

/* ---- for the data plane ---- */

/* Called for every DELTA stepped by kq_rm_on_metadata, after its log instructions were applied
 * (inside the manager's open plog transaction: the callback must not begin or commit one).
 * p and u are borrowed for the call; r is the replica (owned by the manager). */
typedef void (*kq_rm_update_cb)(void *arg, const kq_rm_partition *p, kq_replica *r,
                                const kq_replica_update *u);
void kq_rm_set_update_cb(kq_rm *rm, kq_rm_update_cb cb, void *arg);

/* Index of the hosted partition, or SIZE_MAX. Indexes change at each on_metadata. */
size_t kq_rm_find(const kq_rm *rm, const uint8_t topic_id[16], int32_t partition);
/* The replica of entry i (owned by the manager), NULL if out of range. */
kq_replica *kq_rm_replica_mut(kq_rm *rm, size_t i);
/* The borrowed plog. */
kq_plog *kq_rm_plog(kq_rm *rm);
/* Steps 1-2 of replica.h's update order (reset, truncate) and step 4 plus the log lines, for
 * hosted entry i, inside a plog transaction the caller opened. 0 or a kq error (errbuf). */
int kq_rm_log_prepare(kq_rm *rm, size_t i, const kq_replica_update *u, char *errbuf, size_t errlen);
int kq_rm_log_finish(kq_rm *rm, size_t i, const kq_replica_update *u, char *errbuf, size_t errlen);
/* Registration state of p's replicas in img; out has room for KQ_REPLICA_MAX_REPLICAS. */
int kq_rm_brokers_of(const kq_image *img, const kq_rm_partition *p, kq_replica_broker *out);

#endif
