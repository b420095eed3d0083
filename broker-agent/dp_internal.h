/*
 * Internal to the data plane (broker-agent): the state behind kq_dp and the functions its files
 * share. data_plane.c holds the partitions, the replies, applying a replica's update, the
 * request dispatch, and the timers, commit and metadata hooks; dp_producer.c the producer
 * state (idempotence); dp_produce.c serving Produce; dp_serve.c serving Fetch, ListOffsets and
 * Metadata; dp_fetcher.c the follower fetcher; dp_alter.c the AlterPartition client.
 *
 * Ownership: as in data_plane.h; one loop thread uses a kq_dp.
 */
#ifndef KQ_BROKER_DP_INTERNAL_H
#define KQ_BROKER_DP_INTERNAL_H

#include "data_plane.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kq/codec.h"
#include "kq/ctl_codec.h"
#include "kq/data_codec.h"
#include "kq/error.h"
#include "kq/log.h"
#include "kq/plog.h"
#include "kq/replica.h"
#include "kq/util.h"

#define DP_RECENT 5                /* batches remembered per producer for duplicates */
#define DP_MAX_PRODUCERS 10000     /* producer ids remembered per partition */
#define DP_MAX_FETCHERS 64         /* leaders fetched from at once */
#define DP_MAX_WAIT_MS 30000u      /* longest long-poll a client may ask for */
#define DP_FETCH_BACKOFF_MS 100u   /* after a failed fetch */
#define DP_READ_CHUNK (1u << 20)   /* producer-state rebuild reads */
#define DP_METADATA_LISTENER_MAX 8 /* endpoints copied per broker */

enum { DP_NET_FETCH = 1, DP_NET_ALTER };

typedef struct dp_recent {
    int32_t base_seq;
    int32_t count;
    int64_t base_offset;
} dp_recent;

typedef struct dp_producer {
    int64_t pid;
    int16_t epoch;
    int32_t last_seq; /* sequence of the last record written */
    int64_t last_offset;
    dp_recent recent[DP_RECENT];
    int n_recent, next_recent;
} dp_producer;

/* Data-plane state of one hosted partition (kept while hosted; looked up by topic id). */
typedef struct dp_part {
    uint8_t topic_id[16];
    int32_t partition;
    uint64_t deadline;
    bool dirty; /* written in the open transaction: step PERSISTED after the commit */
    int64_t hw;
    int64_t hw_ckpt;
    bool producers_loaded;
    dp_producer *producers;
    size_t n_producers, cap_producers;
    bool alter_pending; /* an AlterPartition to send */
    kq_replica_alter_request alter;
} dp_part;

typedef struct dp_parked_produce {
    uint64_t token;
    void *req;
    uint8_t topic_id[16];
    int32_t partition;
} dp_parked_produce;

typedef struct dp_parked_fetch {
    void *req;
    kq_data_request r;
    bool *denied; /* per partition: the client may not Read its topic (NULL: none); owned */
    uint64_t deadline;
} dp_parked_fetch;

typedef struct dp_reply {
    void *req;
    kq_buf buf;
} dp_reply;

/* One partition of a follower Fetch in flight: its answer is matched against what was asked
 * (a stale answer, for another offset or leader epoch, is dropped by the replica). */
typedef struct dp_sent {
    uint8_t topic_id[16];
    int32_t partition;
    int64_t fetch_offset;
    int32_t leader_epoch;
} dp_sent;

typedef struct dp_fetcher {
    int32_t leader;
    bool in_flight;
    uint64_t backoff_until;
} dp_fetcher;

/* What a request sent through net.send was (its token), to match its answer against; the
 * data plane keeps every one in flight on a list (kq_dp_free frees them). */
typedef struct dp_net_ev {
    struct dp_net_ev *prev, *next;
    int kind;
    int32_t leader; /* FETCH */
    dp_sent *sent;  /* FETCH: what was asked, per partition (owned) */
    size_t n_sent;
    uint8_t topic_id[16]; /* ALTER */
    int32_t partition;    /* ALTER */
    uint64_t request_id;  /* ALTER */
} dp_net_ev;

struct kq_dp {
    kq_dp_config cfg;
    kq_rm *rm;
    kq_plog *plog;
    dp_part *parts;
    size_t n_parts, cap_parts;
    dp_parked_produce *parked;
    size_t n_parked, cap_parked;
    dp_parked_fetch *fetches;
    size_t n_fetches, cap_fetches;
    dp_reply *replies;
    size_t n_replies, cap_replies;
    uint64_t unmapped_logged_ms; /* last "listener has no protocol here" warning */
    dp_fetcher fetchers[DP_MAX_FETCHERS];
    int n_fetchers;
    uint64_t token;
    bool wake;            /* some partition changed: retry parked fetches */
    uint64_t brokers_sig; /* registrations last passed to the leaders (kq_dp_after_metadata) */
    dp_net_ev *inflight;  /* tokens given to net.send, not answered yet */
    kq_dp_counts counts;
};

/* Where the records of an update's appends come from. */
typedef struct dp_src {
    /* APPEND: the Produce's packed records and producer fields */
    const uint8_t *payload;
    size_t payload_len;
    int64_t pid;
    int16_t pepoch;
    int32_t base_seq;
    /* FETCH_RESPONSE: the leader's batches */
    const kq_data_batch *batches;
    size_t n_batches;
} dp_src;

/* ---- shared between the files of this module */

/* data_plane.c */
int dp_grow(void **v, size_t *cap, size_t n, size_t elem);
void dp_oom(kq_dp *dp, const char *what);
void dp_drop(kq_dp *dp, void *req); /* net.drop */
/* A token for net.send, on the in-flight list (NULL on out of memory), and its release. */
dp_net_ev *dp_net_ev_new(kq_dp *dp, int kind);
void dp_net_ev_free(kq_dp *dp, dp_net_ev *ev);
dp_part *dp_part_get(kq_dp *dp, const uint8_t topic_id[16], int32_t partition);
kq_plog_tp dp_tp_make(const uint8_t topic_id[16], int32_t partition);
void dp_reply_error(kq_dp *dp, void *req, uint32_t api, int err, const char *msg);
void dp_queue_answer(kq_dp *dp, void *req, uint32_t api, int rc, kq_buf *out);
void dp_reply_produce(kq_dp *dp, void *req, int err, int64_t base_offset, int64_t log_start,
                      const char *msg);
void dp_apply(kq_dp *dp, size_t i, kq_replica *r, const kq_replica_update *u, const dp_src *src);
int dp_step(kq_dp *dp, size_t i, const kq_replica_event *ev, kq_replica_update *u,
            const dp_src *src);

/* dp_producer.c */
dp_producer *dp_producer_find(dp_part *p, int64_t pid);
void dp_producer_note(kq_dp *dp, dp_part *p, int64_t pid, int16_t epoch, int32_t base_seq,
                      int32_t count, int64_t base_offset);
int dp_producers_load(kq_dp *dp, dp_part *p);

/* dp_produce.c */
int32_t dp_image_leader(const kq_image *img, const uint8_t topic_id[16], int32_t partition,
                        int32_t *epoch);
int dp_not_hosted_error(const kq_image *img, const uint8_t topic_id[16], int32_t partition);
void dp_handle_produce(kq_dp *dp, void *req, const kq_produce_request *pr, const kq_image *img,
                       uint64_t now);

/* dp_serve.c */
/* Per-item authorization (Kafka answers per partition or topic): `denied` marks the partitions
 * (of a Fetch or ListOffsets) answered TOPIC_AUTHORIZATION_FAILED, NULL none; Fetch takes it
 * (freed with the request). Metadata asks dp_topic_allowed per topic for principal. */
void dp_handle_fetch(kq_dp *dp, void *req, kq_data_request *r, const kq_image *img, uint64_t now,
                     bool *denied);
void dp_retry_parked_fetches(kq_dp *dp, const kq_image *img, uint64_t now, bool all);
void dp_handle_list_offsets(kq_dp *dp, void *req, const kq_list_offsets_request *lr,
                            const kq_image *img, const bool *denied);
void dp_handle_metadata(kq_dp *dp, void *req, const kq_data_metadata_request *mr,
                        const kq_image *img, const char *principal);
/* data_plane.c: may principal do op on the topic (by id, or by name)? 0 (also with no
 * authorizer, and for an unknown id: the handler answers that), or TOPIC_AUTHORIZATION_FAILED
 * with msg set. */
int dp_topic_allowed(kq_dp *dp, const kq_image *img, const char *principal, kq_acl_operation op,
                     const uint8_t *id, const char *name, char *msg, size_t len);

/* dp_fetcher.c */
void dp_pump_fetchers(kq_dp *dp, const kq_image *img, int64_t broker_epoch, uint64_t now);
void dp_handle_fetch_answer(kq_dp *dp, dp_net_ev *ev, int err, const uint8_t *data, size_t len,
                            uint64_t now);

/* dp_alter.c */
void dp_pump_alters(kq_dp *dp, int32_t controller, int64_t broker_epoch);
void dp_handle_alter_answer(kq_dp *dp, dp_net_ev *ev, int err, const uint8_t *data, size_t len,
                            uint64_t now);

#endif
