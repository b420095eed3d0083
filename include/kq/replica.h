/*
 * kq_replica: one partition replica on a broker (leader or follower), a pure state machine.
 *
 * No I/O, no clock, no nng, no LMDB, no protobuf. The broker agent's replica manager keeps one
 * kq_replica per (topic, partition) it hosts, drives it with events that carry the time, and
 * acts on the update each step returns, in this order:
 *
 *     kq_replica_update u;
 *     kq_replica_step(r, &ev, &u);
 *     1. if u.reset_log_start >= 0: delete the whole log and restart it empty at that offset;
 *     2. if u.truncate_to >= 0: remove every record at offset >= u.truncate_to;
 *     3. for each of u.append[0..n_append): write the batch (APPEND: the producer's records
 *        from the event; FETCH_RESPONSE: the fetched batch, payload borrowed from the event);
 *     4. if u.epochs_changed: rewrite the leader-epoch checkpoint from kq_replica_epochs();
 *     5. once 1.-3. are durable, step PERSISTED with the new durable log end;
 *     6. answer u.produce (APPEND) and u.fetch (FOLLOWER_FETCH); for acks=all the produce
 *        answer is one of u.completions[] of this or a later step (matched by token);
 *     7. send u.alter (AlterPartition) to the active controller if u.send_alter;
 *     8. print u.log[0..n_log) (INFO), remember u.high_watermark;
 *     9. if u.restart_fetcher: (re)start fetching from u.leader_id at the LEO; a follower's
 *        next Fetch is built by kq_replica_next_fetch() after each FETCH_RESPONSE step, and
 *        sent only once the log is durable up to that fetch offset (the leader counts it for
 *        the HW; kq-sim --bug broker-disk-lies shows the loss otherwise);
 *    10. arm a timer for u.next_deadline_ms (UINT64_MAX: none) and step TICK when it fires.
 *
 * Rules: ../shared/reference/kraft-semantics.md section 4 and DESIGN.md section 9.
 * - ISR shrink (4.1): every replica.lag.time.max.ms/2 (from becoming leader), a follower in the
 *   ISR that is not caught up (leader LEO == its LEO, or now - lastCaughtUp <= lag) is removed
 *   through AlterPartition. lastCaughtUp follows the fetch-offset rules of 4.1.
 * - ISR expansion (4.2): a follower that is eligible (registered, unfenced, not shutting
 *   down, broker epoch from its Fetch == cached or -1) and whose LEO >= HW and >= the start of
 *   the current leader epoch is added through AlterPartition.
 * - KIP-497 (4.3): at most one AlterPartition in flight; the maximal ISR (committed + added for
 *   an expand, the old ISR for a shrink) is used for the HW; the 4.3 answer table.
 * - HW (4.4) = min over the leader's durable LEO and the LEO of every follower in the maximal
 *   ISR or caught up and eligible; never decreases; frozen while the committed ISR is smaller
 *   than min(min.insync.replicas, RF).
 * - acks (4.5): acks=all with ISR < effective min ISR -> NOT_ENOUGH_REPLICAS, nothing written;
 *   a parked acks=all completes NONE when the HW passes its end (NOT_ENOUGH_REPLICAS_AFTER_APPEND
 *   if the maximal ISR is then below the min), NOT_LEADER_OR_FOLLOWER when leadership is lost,
 *   REQUEST_TIMED_OUT at its timeout. Deliberate choice: because the HW is frozen below min ISR
 *   (KAFKA-15583), a parked acks=all that is not yet covered by the HW when the committed ISR
 *   drops below the min completes at once with NOT_ENOUGH_REPLICAS_AFTER_APPEND (its records
 *   are written but cannot be committed while the ISR is that small) instead of timing out.
 *   More than KQ_REPLICA_MAX_PARKED waiting acks=all: the next one gets REQUEST_TIMED_OUT at
 *   once, nothing written (retriable).
 * - Truncation (4.6): leader epoch cache; the leader answers a follower Fetch with a diverging
 *   epoch when the follower's last fetched epoch is unknown or ends before its fetch offset; the
 *   follower truncates to min(leader end, its own end for that epoch, LEO); when it does not
 *   know that epoch, to its own end of the largest smaller epoch (not by the leader's end,
 *   which need not be a batch boundary of its log), and asks again. Never by its HW.
 * - Metadata (4.7): a delta with an older partition epoch is ignored; one with the leader's
 *   current partition epoch keeps a pending AlterPartition and its maximal ISR (the request
 *   carries that epoch and may still be accepted).
 *
 * Offsets are per record; LEO is exclusive. The core keeps offsets and epochs only, never
 * payloads. Time: now_ms of events, monotonic, never decreasing.
 *
 * Ownership: the kq_replica object owns everything it allocates (its epoch cache and its parked
 * produce / completion arrays grow with realloc). Pointers inside an update (completions) point
 * into the object and stay valid until the next kq_replica_step or kq_replica_free. Pointers
 * inside an event are borrowed for the duration of the step only.
 */
#ifndef KQ_REPLICA_H
#define KQ_REPLICA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kq/epoch_cache.h"

#define KQ_REPLICA_MAX_REPLICAS 16  /* replication factor limit */
#define KQ_REPLICA_MAX_BATCHES 64   /* batches per FETCH_RESPONSE */
#define KQ_REPLICA_MAX_PARKED 4096  /* acks=all produces waiting for the HW */
#define KQ_REPLICA_MAX_EPOCHS 65536 /* epoch cache entries */
#define KQ_REPLICA_MAX_LOG 8        /* log lines per step */
#define KQ_REPLICA_LOG_LEN 512
#define KQ_REPLICA_NO_ID (-1)
#define KQ_REPLICA_NO_DEADLINE UINT64_MAX

typedef struct kq_replica kq_replica;

typedef enum kq_replica_role {
    KQ_REPLICA_NONE = 0, /* not started, or not a replica of the partition (any more) */
    KQ_REPLICA_LEADER,
    KQ_REPLICA_FOLLOWER, /* leader_id may be -1: no leader, no fetching */
} kq_replica_role;

/* "none", "leader", "follower"; static. */
const char *kq_replica_role_name(kq_replica_role role);

typedef struct kq_replica_config {
    int32_t node_id;                  /* this broker */
    char topic[250];                  /* for log lines only */
    int32_t partition;                /* for log lines only */
    uint32_t replica_lag_time_max_ms; /* 30000 */
    int32_t min_insync_replicas;      /* topic's min.insync.replicas, 1 */
    uint32_t request_timeout_ms;      /* acks=all wait when an APPEND gives 0, 30000 */
    uint32_t alter_retry_ms;          /* AlterPartition retry back-off, 50 */
} kq_replica_config;

/* Fill cfg with Kafka's defaults (node_id -1, topic "", partition 0). */
void kq_replica_config_defaults(kq_replica_config *cfg);

/* Registration state of a broker as the metadata image knows it (ISR eligibility, 4.2). */
typedef struct kq_replica_broker {
    int32_t id;
    int64_t broker_epoch;
    bool fenced;
    bool in_controlled_shutdown;
} kq_replica_broker;

/* A record batch: records base_offset .. base_offset+count-1, all stamped with `epoch`. */
typedef struct kq_replica_batch {
    int64_t base_offset;
    int32_t epoch;
    int32_t count;
    const uint8_t *data; /* FETCH_RESPONSE: borrowed payload, passed through; APPEND: NULL */
    size_t len;
} kq_replica_batch;

typedef enum kq_replica_event_type {
    KQ_REPLICA_EV_START = 1,      /* once, first: the log as recovered from disk */
    KQ_REPLICA_EV_DELTA,          /* metadata: the partition's leader, epochs, replicas, ISR */
    KQ_REPLICA_EV_BROKERS,        /* metadata: registration state of some brokers */
    KQ_REPLICA_EV_APPEND,         /* leader: a Produce for `count` records */
    KQ_REPLICA_EV_PERSISTED,      /* the local log is durable up to `persisted_end` */
    KQ_REPLICA_EV_FOLLOWER_FETCH, /* leader: a follower's Fetch arrived */
    KQ_REPLICA_EV_FETCH_RESPONSE, /* follower: the leader's answer to our Fetch */
    KQ_REPLICA_EV_ALTER_RESPONSE, /* leader: the controller's answer to our AlterPartition */
    KQ_REPLICA_EV_TICK,           /* time passed (at or after next_deadline_ms) */
} kq_replica_event_type;

typedef struct kq_replica_start {
    int64_t log_start_offset;
    int64_t log_end_offset;       /* durable LEO */
    int64_t high_watermark;       /* checkpointed HW (clamped to the LEO), 0 if none */
    const kq_epoch_entry *epochs; /* leader-epoch checkpoint, ascending; borrowed */
    size_t n_epochs;
} kq_replica_start;

typedef struct kq_replica_delta {
    int32_t leader_id; /* -1: no leader */
    int32_t leader_epoch;
    int32_t partition_epoch;
    const int32_t *replicas; /* borrowed; this node not among them: role NONE */
    int n_replicas;
    const int32_t *isr; /* borrowed */
    int n_isr;
    int32_t min_insync_replicas; /* > 0: topic's new value; 0: unchanged */
    /* Optional registration state of the replicas (the same as a BROKERS event). A replica
     * without known state is ineligible for the ISR until a BROKERS event names it. */
    const kq_replica_broker *brokers;
    int n_brokers;
} kq_replica_delta;

typedef struct kq_replica_append {
    int16_t acks; /* -1 (all), 0 or 1 */
    int32_t count;
    uint64_t token;      /* host's id for the Produce; echoed in the completion */
    uint32_t timeout_ms; /* acks=all wait (Produce timeout); 0: config request_timeout_ms */
} kq_replica_append;

typedef struct kq_replica_follower_fetch {
    int32_t replica_id;
    int64_t fetch_offset;
    int32_t last_fetched_epoch;   /* -1: none (empty log) */
    int32_t current_leader_epoch; /* follower's view, -1: not checked */
    int64_t broker_epoch;         /* -1: unknown */
} kq_replica_follower_fetch;

typedef struct kq_replica_fetch_response {
    int error;            /* kq_err of the partition; non-zero: nothing else is read */
    int64_t fetch_offset; /* the request's fetch offset: an answer for another one is stale */
    int32_t leader_epoch; /* the leader's epoch; an answer for an older epoch is stale */
    int64_t high_watermark;
    int64_t log_start_offset;
    bool diverging;
    int32_t diverging_epoch;
    int64_t diverging_end_offset;
    const kq_replica_batch *batches; /* borrowed; contiguous from fetch_offset */
    size_t n_batches;
} kq_replica_fetch_response;

typedef struct kq_replica_alter_response {
    uint64_t request_id; /* the id of the request being answered */
    int error;           /* top-level or partition error, kq_err */
    int32_t leader_id;
    int32_t leader_epoch;
    int32_t partition_epoch;
    const int32_t *isr; /* borrowed */
    int n_isr;
} kq_replica_alter_response;

typedef struct kq_replica_event {
    kq_replica_event_type type;
    uint64_t now_ms;
    union {
        kq_replica_start start;
        kq_replica_delta delta;
        struct {
            const kq_replica_broker *brokers; /* borrowed */
            int n_brokers;
        } brokers;
        kq_replica_append append;
        int64_t persisted_end;
        kq_replica_follower_fetch fetch;
        kq_replica_fetch_response fetch_resp;
        kq_replica_alter_response alter_resp;
    } u;
} kq_replica_event;

/* The answer to a Produce. */
typedef struct kq_replica_completion {
    uint64_t token;
    int error; /* kq_err: NONE, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), NOT_LEADER_OR_FOLLOWER, ... */
    int64_t base_offset; /* -1 if nothing was written */
} kq_replica_completion;

/* AlterPartition to send (kraft-semantics 3.6, v3: ISR with broker epochs). */
typedef struct kq_replica_alter_request {
    uint64_t request_id; /* echo it in the ALTER_RESPONSE event */
    int32_t leader_epoch;
    int32_t partition_epoch;
    int32_t new_isr[KQ_REPLICA_MAX_REPLICAS];
    int64_t new_isr_broker_epochs[KQ_REPLICA_MAX_REPLICAS]; /* -1: unknown (the leader's own:
                                                             * the host fills its epoch) */
    int n_new_isr;
} kq_replica_alter_request;

/* The leader's answer to a FOLLOWER_FETCH. */
typedef struct kq_replica_fetch_answer {
    int error; /* kq_err; non-zero: send only the error */
    int32_t leader_epoch;
    int64_t high_watermark;
    int64_t log_start_offset;
    bool diverging;
    int32_t diverging_epoch; /* -1: the follower's epoch predates every cached one */
    int64_t diverging_end_offset;
    /* Send the whole batches in [records_from, records_to), up to the host's byte limit.
     * records_from == records_to: none. */
    int64_t records_from;
    int64_t records_to;
} kq_replica_fetch_answer;

typedef struct kq_replica_update {
    int64_t reset_log_start; /* -1: none; else empty the log and restart it here */
    int64_t truncate_to;     /* -1: none */
    kq_replica_batch append[KQ_REPLICA_MAX_BATCHES];
    size_t n_append;
    bool epochs_changed;

    bool has_produce; /* APPEND: u.produce answers it now (error, or acks 0/1 accepted) */
    kq_replica_completion produce;
    bool produce_parked; /* APPEND: acks=all accepted and written; answered by a completion */

    const kq_replica_completion *completions; /* parked acks=all answered in this step */
    size_t n_completions;

    bool has_fetch; /* FOLLOWER_FETCH */
    kq_replica_fetch_answer fetch;

    bool send_alter;
    kq_replica_alter_request alter;

    bool hw_changed;
    int64_t high_watermark;

    bool role_changed;
    bool restart_fetcher; /* follower: leader or leader epoch changed */
    kq_replica_role role;
    int32_t leader_id;
    int32_t leader_epoch;

    /* ISR changes this leader asked the controller for in this step (AlterPartition sent):
     * what kq_broker_isr_shrinks_total / _expands_total count, whatever the log lines say. */
    int isr_shrinks, isr_expands;

    char log[KQ_REPLICA_MAX_LOG][KQ_REPLICA_LOG_LEN];
    int n_log;

    /* Non-zero step result: why, naming the problem. */
    char reason[160];

    uint64_t next_deadline_ms; /* KQ_REPLICA_NO_DEADLINE: none */
} kq_replica_update;

/* A follower's next Fetch (built from the replica's state). */
typedef struct kq_replica_fetch_request {
    int32_t leader_id;
    int64_t fetch_offset; /* the LEO */
    int32_t last_fetched_epoch;
    int32_t current_leader_epoch;
} kq_replica_fetch_request;

/* Follower state on the leader. Times in the event clock; -1: never. */
typedef struct kq_replica_follower {
    int32_t id;
    int64_t log_end_offset; /* -1: unknown (no fetch in this leader epoch) */
    int64_t last_fetch_ms;
    int64_t last_caught_up_ms;
    int64_t broker_epoch; /* from its last Fetch, -1 unknown */
} kq_replica_follower;

typedef enum kq_replica_pending {
    KQ_REPLICA_PENDING_NONE = 0,
    KQ_REPLICA_PENDING_EXPAND,
    KQ_REPLICA_PENDING_SHRINK,
} kq_replica_pending;

typedef struct kq_replica_status {
    kq_replica_role role;
    int32_t node_id;
    int32_t leader_id;
    int32_t leader_epoch;
    int32_t partition_epoch;
    int32_t replicas[KQ_REPLICA_MAX_REPLICAS];
    int n_replicas;
    int32_t isr[KQ_REPLICA_MAX_REPLICAS]; /* committed */
    int n_isr;
    int32_t maximal_isr[KQ_REPLICA_MAX_REPLICAS];
    int n_maximal_isr;
    kq_replica_pending pending;
    bool alter_in_flight; /* pending and sent or waiting for a retry (not parked for metadata) */
    int32_t min_insync_replicas;
    int64_t log_start_offset;
    int64_t log_end_offset;
    int64_t durable_end_offset;
    int64_t high_watermark;
    size_t n_parked;
    kq_replica_follower followers[KQ_REPLICA_MAX_REPLICAS]; /* leader only */
    int n_followers;
} kq_replica_status;

/* Create a replica; it accepts only START until started. NULL on bad config (errbuf says why)
 * or out of memory. Caller owns the result; free with kq_replica_free (NULL is fine). */
kq_replica *kq_replica_new(const kq_replica_config *cfg, char *errbuf, size_t errlen);
void kq_replica_free(kq_replica *r);

/* Step one event. Always fills *u (reset first). Returns 0, or KQ_ERR_INVALID_REQUEST for a
 * malformed event (u.reason says why; the state is unchanged and u carries no instruction),
 * or KQ_ERR_NOMEM. Protocol outcomes (NOT_ENOUGH_REPLICAS, a stale Fetch, ...) are not step
 * errors: they are in u.produce / u.fetch. */
int kq_replica_step(kq_replica *r, const kq_replica_event *ev, kq_replica_update *u);

void kq_replica_get_status(const kq_replica *r, kq_replica_status *out);

/* Consumers read only below the HW: the exclusive end of what a consumer may read. */
int64_t kq_replica_readable_end(const kq_replica *r);

/* A consumer Fetch (replica id -1) at `offset`: 0 and [*from, *to) to send (possibly empty),
 * NOT_LEADER_OR_FOLLOWER if not leader, OFFSET_OUT_OF_RANGE outside [log start, LEO]. */
int kq_replica_consumer_read(const kq_replica *r, int64_t offset, int64_t *from, int64_t *to);

/* Follower with a known leader: fill *req and return true; otherwise false. */
bool kq_replica_next_fetch(const kq_replica *r, kq_replica_fetch_request *req);

/* The epoch cache (ascending), valid until the next step; *n = its length. */
const kq_epoch_entry *kq_replica_epochs(const kq_replica *r, size_t *n);

/* endOffsetFor(epoch) (4.6): the largest cached epoch <= epoch and its end (start of the next
 * one, or the LEO). False when no cached epoch is <= epoch. */
bool kq_replica_end_offset_for_epoch(const kq_replica *r, int32_t epoch, int32_t *out_epoch,
                                     int64_t *out_end);

#endif
