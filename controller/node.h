/*
 * kq_ctl_node: the controller around its Raft host, the part kq-controller and kq-sim both run.
 * It owns the metadata image (controller/meta.h) and decides, for one voter:
 *   - the proposal being built: client Writes and the records of controller APIs
 *     (controller/ops.h) go into one batch, proposed by kq_ctl_node_flush;
 *   - the answers parked until the records they depend on commit (the high watermark passes
 *     the offset they wait for), answered in offset order, failed with NOT_CONTROLLER when
 *     leadership is lost;
 *   - activation (the leader replays everything committed, then becomes the active
 *     controller and finalizes a new cluster's feature levels) and deactivation (the image
 *     rolls back to the committed offset);
 *   - the active controller's timers (fence expired sessions, elect leaders for leaderless
 *     partitions, move leadership back to preferred replicas) and the idle NoOp;
 *   - when a snapshot of the committed image is due.
 *
 * Pure: no I/O and no clock. The caller (the daemon's loop, or the simulator) gives the time to
 * every call, steps the Raft core (ops.propose), reads committed batches (ops.read_committed),
 * sends the answers (ops.reply, ops.reply_error) and writes snapshots. Requests are opaque
 * handles (`void *req`) that the node hands back to exactly one of reply, reply_error or drop.
 *
 * Ownership: the node owns its image, its batch and every parked answer; it borrows the Raft
 * status `st` (the host's, current after every step) and copies cfg and ops. One thread uses a
 * node.
 */
#ifndef KQ_CTL_NODE_H
#define KQ_CTL_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decide.h"
#include "kq/authorizer.h"
#include "kq/codec.h"
#include "kq/raft.h"
#include "meta.h"

typedef struct kq_ctl_node_config {
    int32_t node_id;
    int32_t voters[KQ_RAFT_MAX_VOTERS]; /* the LeaderChange record lists them */
    int n_voters;
    const char *cluster_id; /* copied into the image */
    kq_decide_settings decide;
    uint32_t idle_interval_ms;      /* leader: a NoOp after this long without an append; 0 off */
    uint32_t rebalance_interval_ms; /* preferred-leader check */
    uint32_t unclean_interval_ms;   /* leaderless-partition check */
    int64_t snapshot_max_bytes;     /* a snapshot after this many bytes of applied records */
    int64_t snapshot_interval_ms;   /* ... or this long after the last one (0: off) */
    size_t max_write_bytes;         /* one Write request's records */
    size_t max_batch_bytes;         /* one proposed batch */
    size_t max_waiting;             /* writes and answers waiting for a commit */
    uint64_t seed;                  /* the image's PRNG (placement) */
    /* node.principal.template ("User:CN=node-{id}"), borrowed: a request that speaks for a
     * broker (BrokerRegistration, BrokerHeartbeat, AlterPartition) is accepted only from the
     * principal of the broker id it claims. NULL: no identity checks (plaintext, or TLS
     * without required client certificates). */
    const char *node_principal_template;
    /* authorizer.class.name, super.users, allow.everyone.if.no.acl.found, borrowed: with
     * authorizer->enabled, every admin API is authorized for the principal that sent it
     * (User:ANONYMOUS when nobody is identified). NULL: no authorizer. */
    const kq_authorizer_config *authorizer;
} kq_ctl_node_config;

/* What the node reports, for logs, metrics and the simulator's checks. */
typedef enum kq_ctl_node_event {
    KQ_CTL_NODE_ACTIVATED,          /* became the active controller */
    KQ_CTL_NODE_DEACTIVATED,        /* was active, leadership lost; image rolled back */
    KQ_CTL_NODE_FEATURES_FINALIZED, /* activation wrote a new cluster's feature levels */
    KQ_CTL_NODE_ELR_OFF,            /* activation: ELR configured, its feature level is 0 */
    KQ_CTL_NODE_FENCED,             /* arg: the broker whose session expired */
    KQ_CTL_NODE_APPLIED,            /* a standby applied a committed batch; arg: applied end */
} kq_ctl_node_event;

/* One committed batch (the shape of kq_store_batch_cb, kq/store.h). Non-zero stops the read. */
typedef int (*kq_ctl_batch_fn)(void *arg, int64_t base_offset, int32_t epoch, int32_t count,
                               uint32_t crc32c, const uint8_t *records, size_t len);

typedef struct kq_ctl_node_ops {
    void *ctx;
    /* Step the Raft core with PROPOSE now: payload (count records) becomes this node's batch.
     * Returns 0 with *base and *epoch set, or the core's refusal (NOT_LEADER, ...). */
    int (*propose)(void *ctx, const kq_buf *payload, int32_t count, int64_t *base, int32_t *epoch);
    /* Committed batches from `from` (a batch boundary) below `to`, in order, through fn (the
     * kq_store_read contract). 0 or an error. */
    int (*read_committed)(void *ctx, int64_t from, int64_t to, kq_ctl_batch_fn fn, void *arg);
    /* Answer req with resp (taken). wait_offset: the offset it waited for (-1: none). */
    void (*reply)(void *ctx, void *req, kq_buf *resp, int64_t wait_offset);
    /* Answer req for api with an error (the caller adds the leader hint). */
    void (*reply_error)(void *ctx, void *req, uint32_t api, int err, const char *msg);
    /* Release req without an answer (the client times out). */
    void (*drop)(void *ctx, void *req);
    /* May be NULL. */
    void (*event)(void *ctx, kq_ctl_node_event ev, int64_t arg);
    /* UpdateFeatures of kraft.version (kq_op_ctx.upgrade_kraft). May be NULL. */
    int (*upgrade_kraft)(void *ctx, int16_t level, bool validate_only, char *msg, size_t msglen);
    /* Items of one request answered TOPIC_/CLUSTER_AUTHORIZATION_FAILED (the request went on
     * for the others): count them, log msg (the last refusal's). May be NULL. */
    void (*refused)(void *ctx, const char *principal, int32_t items, const char *msg);
    /* A record that cannot apply, a store that cannot be read: the node is broken. kq-controller
     * exits; a simulator that returns gets a node that does nothing more (`failed`). */
    void (*fatal)(void *ctx, const char *what, const char *detail);
} kq_ctl_node_ops;

struct kq_ctl_parked;
struct kq_ctl_pending;

typedef struct kq_ctl_node {
    kq_ctl_node_config cfg;
    kq_ctl_node_ops ops;
    const kq_raft_status *st;
    kq_meta meta;
    uint64_t now; /* the time of the current call */
    /* the proposal being built, and the writes whose records are in it */
    kq_buf batch;
    int32_t batch_count;
    struct kq_ctl_pending *pending;
    size_t n_pending, cap_pending;
    struct kq_ctl_parked *parked_head, *parked_tail; /* by offset */
    size_t n_parked;
    /* snapshots */
    int64_t bytes_since_snapshot;
    uint64_t last_snapshot_ms;
    int32_t last_applied_epoch; /* a snapshot's epoch */
    int64_t snapshot_end;       /* end offset of the latest snapshot, 0 if none */
    /* the active controller's timers */
    uint64_t next_fence_ms, next_leaderless_ms, next_rebalance_ms;
    uint64_t last_append_ms;
    bool stopping; /* shutting down: no timers, no NoOps */
    bool failed;   /* ops.fatal returned */
} kq_ctl_node;

/* 0 or KQ_ERR_NOMEM. now: start-up time (the snapshot interval counts from it). */
int kq_ctl_node_init(kq_ctl_node *n, const kq_ctl_node_config *cfg, const kq_raft_status *st,
                     const kq_ctl_node_ops *ops, uint64_t now);
/* Drops every request still held (ops.drop). */
void kq_ctl_node_free(kq_ctl_node *n);

/* A Write or a controller API (env decoded and checked by the caller; borrowed). Answers
 * at once (not the active controller, overloaded, refused) or parks the answer. principal:
 * who sent it ("User:CN=node-1", User:ANONYMOUS), when cfg.node_principal_template is set.
 * Returns KQ_ERR_INVALID_REQUEST when the body did not decode (answered; the caller counts
 * it), else 0. */
int kq_ctl_node_request(kq_ctl_node *n, void *req, const kq_request *env, const char *principal,
                        uint64_t now);

/* From the host's after_step, for every step: a role change (lost leadership deactivates). */
void kq_ctl_node_after_step(kq_ctl_node *n, const kq_raft_update *u, uint64_t now);
/* The host is writing this node's LeaderChange batch at base: appends its record to *record
 * (the caller writes it) and starts the leader's bookkeeping. 0 or an error. */
int kq_ctl_node_leader_change(kq_ctl_node *n, int64_t base, uint64_t now, kq_buf *record);

/* Answer what committed, replay committed batches into the image, activate once caught up.
 * Call after the high watermark may have moved. Activation may add records (a new cluster's
 * feature levels): kq_ctl_node_deadline is then 0 until a flush or run proposes them. */
void kq_ctl_node_committed(kq_ctl_node *n, uint64_t now);
/* The active controller's timers when due, then flush, then the idle NoOp when due. */
void kq_ctl_node_run(kq_ctl_node *n, uint64_t now);
/* Propose the batch being built (if any); its writes' answers park until it commits. */
void kq_ctl_node_flush(kq_ctl_node *n);
/* Propose a NoOp now (leader only; else the core refuses it). */
void kq_ctl_node_noop(kq_ctl_node *n, uint64_t now);
/* When kq_ctl_node_run has work: 0 when a batch waits, UINT64_MAX when nothing is timed. */
uint64_t kq_ctl_node_deadline(const kq_ctl_node *n);
/* Shutting down: fail every waiting answer with NOT_CONTROLLER; no timers from now on. */
void kq_ctl_node_stop(kq_ctl_node *n);

/* A snapshot of the committed image is due (the caller checked that no snapshot is being
 * fetched or installed): *id is the one to write. */
bool kq_ctl_node_snapshot_due(const kq_ctl_node *n, uint64_t now, kq_raft_snapshot_id *id);
/* kq_ctl_node_snapshot_due, and the host can write one now: no fetched snapshot waits to be
 * installed (install_pending: kq_raft_host.pending_install), the core (its status st) is
 * neither fetching nor installing one, its log is durable up to the snapshot's end (a
 * leader's high watermark can run ahead of its own sync), and no answer the host still has to
 * send reads the log below that end (log_read_from: kq_raft_host_outbox_reads_from; the
 * snapshot lets the core compact the log). */
bool kq_ctl_node_snapshot_ready(const kq_ctl_node *n, const kq_raft_status *st,
                                bool install_pending, int64_t log_read_from, uint64_t now,
                                kq_raft_snapshot_id *id);
/* The caller wrote snapshot id. */
void kq_ctl_node_snapshot_taken(kq_ctl_node *n, kq_raft_snapshot_id id, uint64_t now);
/* Replace the image with a snapshot's records (start-up, or one fetched from the leader).
 * 0, or an error with errbuf set (kq_meta_load_snapshot). */
int kq_ctl_node_load_snapshot(kq_ctl_node *n, kq_raft_snapshot_id id, const uint8_t *payload,
                              size_t len, uint64_t now, char *errbuf, size_t errlen);

/* Writes and answers waiting for a commit. */
size_t kq_ctl_node_waiting(const kq_ctl_node *n);

/* ---- readiness: the rule behind a controller's /readyz (docs/metrics.md) ----
 * Ready when this node is the leader, or a follower whose leader answered a Fetch within
 * fetch_timeout_ms, the high watermark is known, and the applied offset is not stuck (behind
 * the high watermark and unchanged for KQ_CTL_READY_STUCK_MS). */
#define KQ_CTL_READY_STUCK_MS 5000

typedef struct kq_ctl_ready_state {
    kq_raft_role role;
    int32_t leader_id;
    int32_t epoch;
    bool leader_answered; /* kq_raft_status.leader_answered */
    uint64_t leader_answer_ms;
    int64_t hw;                /* -1 unknown */
    int64_t applied;           /* committed and applied: min(image applied end, hw) */
    uint64_t applied_since_ms; /* when applied last changed */
} kq_ctl_ready_state;

/* 1 ready, or 0 with the reason written (without "not ready: "). now: the clock of
 * leader_answer_ms and applied_since_ms. Pure. */
int kq_ctl_readiness(const kq_ctl_ready_state *r, uint64_t now, uint32_t fetch_timeout_ms,
                     char *reason, size_t len);

#endif
