/*
 * kq_raft_host: drives the Raft core (kq/raft.h) against a disk and a network, and owns the
 * rules of a host loop (DESIGN.md section 3):
 *   - an update's writes go to the disk in the core's order (quorum state, truncation, appends,
 *     then the log prefix and the snapshot transfer) and stay in one open batch until commit;
 *   - nothing the core releases is sent before the writes it depends on are durable: messages
 *     wait in the outbox until kq_raft_host_flush has committed, except a leader's Fetch
 *     answers, which depend on nothing this node still has to make durable
 *     (kq_raft_host_send_fetch_answers: followers then write while the leader syncs);
 *   - after each commit the core hears PERSISTED with the durable end;
 *   - a fetched snapshot is installed after the writes before it are committed, then the core
 *     hears SNAPSHOT_INSTALLED.
 * Used by kq-controller (a voter) and kq-broker-agent (an observer of the metadata log).
 *
 * Pure: no I/O and no clock of its own; the disk, the network and the node's own reactions are
 * the caller's callbacks, and the time is the caller's (`now`, set before each step).
 *
 * A disk is synchronous (commit returns once the batch is durable: the LMDB store) or
 * asynchronous (commit_start, then kq_raft_host_durable: the simulator's disk, whose syncs
 * take simulated time); every message waits for the batches written before it was released.
 *
 * Ownership: the host borrows the core, and owns its outbox (kq_raft_host_init allocates it,
 * kq_raft_host_free frees it). Callbacks receive borrowed pointers valid for the call. One
 * thread (the node's loop) uses a host.
 */
#ifndef KQ_RAFT_HOST_H
#define KQ_RAFT_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kq/raft.h"

/* The durable log and quorum state. Every write joins one open batch (opened by the first
 * write) that only commit makes durable. Each returns 0 or a kq error (then the host calls
 * ops.fatal: a node that cannot write its log must stop). */
typedef struct kq_raft_disk {
    void *ctx;
    int (*put_qstate)(void *ctx, const kq_raft_qstate *qs);
    int (*truncate)(void *ctx, int64_t end_offset); /* drop every batch at or above it */
    int (*append)(void *ctx, int64_t base_offset, int32_t epoch, int32_t count,
                  const uint8_t *records, size_t len);
    int (*remove_prefix)(void *ctx, int64_t log_start); /* below a snapshot's end */
    int (*snapshot_chunk)(void *ctx, kq_raft_snapshot_id id, int64_t position, const uint8_t *data,
                          size_t len);
    void (*snapshot_abort)(void *ctx, kq_raft_snapshot_id id);
    bool (*pending)(void *ctx); /* a batch is open */
    int (*commit)(void *ctx);   /* the open batch, synced; 0 only once durable */
    /* Optional: an asynchronous disk (the simulator's). Closes the open batch as number seq
     * and makes it durable later, in order, telling the host with kq_raft_host_durable; then
     * commit is not used. Messages that depend on a batch wait for it. With
     * KQ_RAFT_HOST_MAX_INFLIGHT batches syncing, the next stays open until one is durable. */
    int (*commit_start)(void *ctx, uint64_t seq);
} kq_raft_disk;

/* What differs between the nodes that host a core. Required: send_request, fatal. */
typedef struct kq_raft_host_ops {
    void *ctx;
    /* A Raft request to a peer (Vote, Begin/EndQuorumEpoch, Fetch, FetchSnapshot); its answer
     * comes back as a RECEIVE event. Non-zero: the host cannot go on (fatal). */
    int (*send_request)(void *ctx, const kq_raft_msg *m);
    /* The answer to a request this node received (m->token names it). NULL: the node serves
     * no Raft requests (an observer), and answers are dropped. */
    void (*send_response)(void *ctx, const kq_raft_msg *m);
    /* Write this node's own batch (KQ_RAFT_BATCH_LEADER_CHANGE or _PROPOSED) with disk.append:
     * only the node knows its records. NULL: it never has one (an observer; fatal if asked). */
    void (*append_own)(void *ctx, const kq_raft_batch *b);
    /* After every step, with the update applied and the host's status, high watermark and
     * deadline current (role changes, proposals' results). May be NULL. */
    void (*after_step)(void *ctx, const kq_raft_update *u);
    /* After a commit, before the core hears PERSISTED: everything up to durable_end is on
     * disk. May be NULL. */
    void (*persisted)(void *ctx, int64_t durable_end);
    /* Install the fetched snapshot id (complete on disk): make it the log start and load the
     * node's state from it. 0, KQ_ERR_CORRUPT_MESSAGE (damaged: the core fetches it again) or
     * any other error (then fatal); KQ_RAFT_HOST_LATER: it goes on in the background, and the
     * caller reports its result with kq_raft_host_installed. NULL: never (fatal if asked). */
    int (*install_snapshot)(void *ctx, kq_raft_snapshot_id id, char *err, size_t errlen);
    /* The quorum records (KIP-853) of the snapshot just installed, for the core; borrowed until
     * it has heard SNAPSHOT_INSTALLED. Returns how many. NULL: none (static voters). */
    size_t (*installed_control)(void *ctx, const kq_raft_control **out);
    /* The quorum records (KIP-853) of the batches of a Fetch answer, read before the core
     * hears it: fill each batch's control and n_control (memory the node keeps until its
     * next call; kq_control_list_add_batch, include/kq/records.h). Non-zero: a batch cannot
     * be read, and the core hears the answer as a failed Fetch (it retries). NULL: none. */
    int (*fetched_control)(void *ctx, kq_raft_batch *batches, size_t n);
    /* Stop the node: a safety violation or a failed write. Must not return. */
    void (*fatal)(void *ctx, const char *what, const char *detail);
} kq_raft_host_ops;

#define KQ_RAFT_HOST_MAX_OUTBOX 4096
#define KQ_RAFT_HOST_LATER 1         /* install_snapshot: finishing in the background */
#define KQ_RAFT_HOST_MAX_INFLIGHT 64 /* batches committing at once (commit_start) */

/* A batch being made durable by an asynchronous disk: the log below end is durable with it. */
typedef struct kq_raft_host_commit_inflight {
    uint64_t seq;
    int64_t end;
} kq_raft_host_commit_inflight;

typedef struct kq_raft_host {
    kq_raft *raft;
    kq_raft_disk disk;
    kq_raft_host_ops ops;
    uint64_t now;         /* the caller's clock (ms), given to every step */
    kq_raft_status st;    /* refreshed after every step */
    int64_t hw;           /* the core's high watermark, -1 unknown */
    int64_t durable_end;  /* the log is on disk below this offset */
    uint64_t deadline;    /* step TICK at this time at the latest */
    bool pending_install; /* a fetched snapshot waits for kq_raft_host_flush */
    bool installing;      /* install_snapshot answered KQ_RAFT_HOST_LATER */
    kq_raft_snapshot_id install_id;
    kq_raft_msg *outbox;  /* released by the core, not sent yet */
    uint64_t *outbox_dep; /* each waits until batch number outbox_dep[i] is durable */
    size_t n_outbox;
    uint64_t commits_started, commits_durable; /* batch numbers, from 1 */
    kq_raft_host_commit_inflight inflight[KQ_RAFT_HOST_MAX_INFLIGHT];
    size_t n_inflight;
} kq_raft_host;

/* Fills h for core r (its status read now), copying disk and ops. 0 or KQ_ERR_NOMEM. */
int kq_raft_host_init(kq_raft_host *h, kq_raft *r, const kq_raft_disk *disk,
                      const kq_raft_host_ops *ops);
void kq_raft_host_free(kq_raft_host *h);

/* Steps the core with ev at h->now and applies its update (the disk writes, the outbox, the
 * status, ops.after_step). Returns 0, or the core's error for an event it rejected (nothing
 * applied; *u is then empty). u may be NULL; when given, it holds the update (its messages
 * valid until the next step). */
int kq_raft_host_step(kq_raft_host *h, kq_raft_event *ev, kq_raft_update *u);

/* Leader only (else nothing): sends the Fetch answers in the outbox now, before the commit. */
void kq_raft_host_send_fetch_answers(kq_raft_host *h);

/* Commits while a batch is open: ops.persisted, then PERSISTED to the core (whose update may
 * open another batch). An asynchronous disk: starts committing the open batch. */
void kq_raft_host_commit(kq_raft_host *h);

/* The background install of h->install_id finished with rc (0, KQ_ERR_CORRUPT_MESSAGE, or
 * another error: fatal); the core hears SNAPSHOT_INSTALLED. Returns the core's answer, or
 * KQ_ERR_INVALID_REQUEST when no background install was in progress. */
int kq_raft_host_installed(kq_raft_host *h, int rc);

/* The lowest offset a Fetch answer waiting in the outbox will read from the log when it is
 * sent (the host fills answers at send time), INT64_MAX when none will: the log below it must
 * stay until then, so a snapshot that would compact it waits (kq_ctl_node_snapshot_ready). */
int64_t kq_raft_host_outbox_reads_from(const kq_raft_host *h);

/* The end of what a replica of this log may apply: committed (below the high watermark) and
 * durable here; -1 while the high watermark is unknown. */
int64_t kq_raft_host_applicable_end(const kq_raft_host *h);

/* An asynchronous disk made batch seq (and every one before it) durable: ops.persisted and
 * one PERSISTED with the end of the last; then call kq_raft_host_flush to send what waited. */
void kq_raft_host_durable(kq_raft_host *h, uint64_t seq);

/* Commit, install a fetched snapshot, send the outbox, and again while something is left
 * (a failed send steps the core, which may release more), at most 8 rounds per call: the
 * rest waits for the next iteration. */
void kq_raft_host_flush(kq_raft_host *h);

#endif
