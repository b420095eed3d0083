/*
 * Shared pieces of the controller's pure decisions (cluster_control.h, replication_control.h,
 * placement.h, partition_change.h): the list of records an operation produces, the static
 * settings the decisions read, and effective-config lookups over the image.
 *
 * Pure: no I/O, no clock (time is always an argument), no nng, LMDB or protobuf.
 *
 * Ownership: a kq_reclist OWNS every record in it and everything those records point to
 * (malloc'd lists and strings); kq_reclist_free releases them. The records may be applied to an
 * image (kq_image_apply copies what it keeps) or encoded, in order, as one batch.
 */
#ifndef KQ_DECIDE_H
#define KQ_DECIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kq/error.h"
#include "kq/image.h"
#include "kq/records.h"

/* Records to append, in order. */
typedef struct kq_reclist {
    kq_record *v;
    size_t n, cap;
} kq_reclist;

void kq_reclist_init(kq_reclist *l);
/* Free every record and the array; l becomes empty (reusable). NULL is fine. */
void kq_reclist_free(kq_reclist *l);
/* Move *r (whose pointers must be malloc'd or NULL) into the list; *r becomes {KQ_REC_NONE}.
 * On KQ_ERR_NOMEM *r is freed. */
int kq_reclist_push(kq_reclist *l, kq_record *r);
/* Drop (and free) the records at index >= n: used to undo a partial operation. */
void kq_reclist_truncate(kq_reclist *l, size_t n);

/* Static settings (the controller's .properties); dynamic cluster configs in the image
 * (ConfigRecord with resource type broker and resource "") override the topic-level ones. */
typedef struct kq_decide_settings {
    const char *cluster_id;             /* borrowed; NULL skips the cluster id check */
    int64_t session_timeout_ms;         /* broker.session.timeout.ms (9000) */
    int32_t num_partitions;             /* num.partitions (1) */
    int32_t default_replication_factor; /* default.replication.factor (1) */
    int32_t min_insync_replicas;        /* min.insync.replicas (1) */
    bool unclean_leader_election;       /* unclean.leader.election.enable (false) */
    bool elr_enabled;                   /* eligible.leader.replicas.enable (true in kq) */
    bool auto_leader_rebalance;         /* auto.leader.rebalance.enable (true) */
} kq_decide_settings;

/* Fill the defaults listed above (cluster_id NULL). */
void kq_decide_settings_default(kq_decide_settings *s);

/* Effective values for one topic: topic config, else the cluster default config in the image,
 * else the static setting. min ISR is also capped at the replication factor `rf` (>= 1). */
int32_t kq_decide_min_isr(const kq_decide_settings *s, const kq_image *img, const char *topic,
                          int32_t rf);
bool kq_decide_unclean_enabled(const kq_decide_settings *s, const kq_image *img, const char *topic);
/* Cluster-wide, as in Kafka: ELR (KIP-966) is on while the finalized feature
 * eligible.leader.replicas.version is >= 1; before the levels are finalized (no
 * metadata.version yet), kq_decide_elr_bootstrap. */
bool kq_decide_elr_enabled(const kq_decide_settings *s, const kq_image *img);
/* The ELR level a new cluster is finalized at: the static eligible.leader.replicas.enable
 * (a cluster-default config of that name left by an earlier kq wins). */
bool kq_decide_elr_bootstrap(const kq_decide_settings *s, const kq_image *img);
bool kq_decide_auto_rebalance(const kq_decide_settings *s, const kq_image *img);

/* 1 if broker `id` is registered, unfenced and not in controlled shutdown ("active"). */
bool kq_decide_broker_active(const kq_image *img, int32_t id);

/* Parse helpers for config values (strict: whole string, no spaces). */
bool kq_decide_parse_bool(const char *v, bool *out);
bool kq_decide_parse_i64(const char *v, int64_t *out);

#endif
