/*
 * Scripted harness for the pure Raft core (tests/raft only).
 *
 * It owns N cores (node ids 1..N, voters first, then observers), each driven by the
 * production Raft host (kq/raft_host.h) over an in-memory disk: a log of batches (base
 * offset, epoch, count, payload id), a durable quorum state and snapshots; the host's sends go
 * onto the harness's queue. Messages wait in one queue until the test delivers, drops or lets
 * h_run deliver them; every request gets exactly one response (the peer's, or a synthesized
 * REQUEST_TIMED_OUT when the request or its response was lost or the peer is down).
 *
 * Ownership: the harness owns everything it allocates; free with h_free. Pointers returned by
 * h_last / h_msg stay valid until the next call that steps a core or changes the queue.
 */
#ifndef KQ_RAFT_HARNESS_H
#define KQ_RAFT_HARNESS_H

#include "kq/raft.h"
#include "kq/raft_host.h"
#include "kq/voters.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define H_MAX_NODES 8
#define H_MAX_OUTSTANDING 1024
#define H_REQUEST_TIMEOUT_MS 2000 /* the host's request timeout (cfg.request_timeout_ms) */
#define H_LEADER_CHANGE_PAYLOAD 0xffffffff00000000ull
#define H_MAX_CHUNK 64   /* FetchSnapshot chunk bytes a queued message can carry */
#define H_MAX_ANSWERS 64 /* voter change answers kept (harness.answers) */

typedef struct h_batch {
    int64_t base;
    int32_t epoch;
    int32_t count;
    uint64_t payload; /* harness-assigned id; LEADER_CHANGE: H_LEADER_CHANGE_PAYLOAD | epoch */
} h_batch;

/* The quorum records of one batch a leader wrote (its payload id names them), kept by the
 * harness for every node's log and snapshot: followers get them with fetched batches, START and
 * installs with what the node holds. */
typedef struct h_control {
    uint64_t payload;
    kq_raft_control c[2];
    size_t n;
    kq_voter_set set;
} h_control;

typedef struct h_qmsg {
    kq_raft_msg m;
    uint64_t deliver_at;
    kq_raft_batch batches[KQ_RAFT_MAX_BATCHES]; /* fetch response: filled at send time */
    uint64_t payloads[KQ_RAFT_MAX_BATCHES];
    size_t n_batches;
    uint8_t chunk[H_MAX_CHUNK]; /* FetchSnapshot response bytes, filled at send time */
    kq_voter voter;             /* a voter change request's voter, copied: the sender may be gone */
} h_qmsg;

typedef struct h_node {
    int32_t id;
    bool voter;
    bool up;
    bool no_initial; /* formatted with --no-initial-controllers: no bootstrap records */
    kq_raft_config cfg;
    kq_raft *r;
    /* disk */
    h_batch *log;
    size_t n_log, cap_log;
    size_t n_durable; /* batches that survive a crash */
    kq_raft_qstate qs;
    int n_qstate_writes;
    /* snapshots (disk): the latest one; its bytes are the "image": the payload ids of every
     * batch below its end, 8 bytes each. The log starts at log_start. */
    int64_t log_start;
    int32_t log_start_epoch;
    kq_raft_snapshot_id snap;
    uint8_t *snap_bytes;
    size_t snap_len;
    /* FetchSnapshot .part file (lost on a crash) */
    uint8_t *part;
    size_t part_len;
    kq_raft_snapshot_id part_id;
    int chunks_written, chunk_errors, installs, install_failures, aborts, compactions;
    bool corrupt_next_install; /* the host reports the next install as failed */
    bool hold_install;         /* do not step SNAPSHOT_INSTALLED until h_finish_install */
    bool install_pending;
    kq_raft_snapshot_id pending_id;
    int pending_err;
    /* host: the production Raft host over this node's disk (harness.c) */
    struct harness *owner;
    kq_raft_host host;
    bool open;               /* a batch is being written */
    uint64_t commit_started; /* the host's last batch number */
    size_t n_log_started;    /* log batches written when that batch started syncing */
    int64_t part_size;       /* the fetched snapshot's size, from the install update */
    bool hold_persist;       /* do not report batches durable automatically (h_persist does) */
    bool merging;            /* inside the automatic PERSISTED step */
    int64_t hw;
    int64_t max_hw; /* highest HW ever reported */
    uint64_t deadline;
    bool fatal;
    const char *fatal_reason;
    int step_errors;                    /* kq_raft_step returned non-zero */
    int append_errors;                  /* non-contiguous append asked by the core */
    int truncate_errors;                /* truncation inside a batch asked by the core */
    int sent[KQ_RAFT_MSG_TYPE_MAX + 1]; /* messages emitted, by type (tests may reset) */
    /* the last update, with its messages copied */
    kq_raft_update last;
    kq_raft_msg last_msgs[KQ_RAFT_MAX_MSGS];
} h_node;

typedef struct h_outstanding {
    bool used;
    uint64_t token;
    int32_t requester, responder;
    int32_t alias; /* the bootstrap id the request was sent to (0: none); the answer's from */
    kq_raft_msg_type type;
    uint64_t sent_at;
} h_outstanding;

typedef struct harness {
    h_node nodes[H_MAX_NODES];
    int n, n_voters;
    uint64_t now;
    h_qmsg *q;
    size_t nq, capq;
    bool cut[H_MAX_NODES + 1][H_MAX_NODES + 1]; /* by node id: messages a -> b are lost */
    uint64_t next_token, next_payload;
    h_outstanding out[H_MAX_OUTSTANDING];
    size_t max_fetch_batches; /* batches a leader's host puts in one Fetch response */
    h_control **ctl;          /* every batch's quorum records, by payload id */
    size_t n_ctl, cap_ctl;
    kq_raft_control *installed; /* the last install's records (installed_control) */
    size_t n_installed;
    kq_raft_msg answers[H_MAX_ANSWERS]; /* voter change answers, in order */
    size_t n_answers;
    bool dynamic; /* h_bootstrap_dynamic: every disk holds the bootstrap's records */
    kq_voter_set boot;
    kq_raft_control boot_ctl;
    /* controller.quorum.bootstrap.servers: KQ_RAFT_BOOTSTRAP_ID(i) reaches node bootstrap[i] */
    int32_t bootstrap[KQ_RAFT_MAX_VOTERS];
    int n_bootstrap;
} harness;

/* Set up n_voters voters and n_observers observers with test timeouts (election 1000,
 * fetch 2000, backoff max 1000, request 2000, retry 20, max wait 500). Nodes are not started. */
void h_init(harness *h, int n_voters, int n_observers, uint64_t seed);
void h_free(harness *h);

/* Start (or restart after h_crash) node id from its disk. */
void h_start(harness *h, int32_t id);
void h_start_all(harness *h);
/* Crash: the core is freed, unflushed batches are lost, requests to it time out. */
void h_crash(harness *h, int32_t id);
/* Crash and wipe the node's disk (log, quorum state, snapshots). Restart with h_start. */
void h_wipe(harness *h, int32_t id);
/* The host writes a snapshot ending at `end` (a batch boundary <= its HW) and steps
 * SNAPSHOT_TAKEN; returns the core's code. */
int h_take_snapshot(harness *h, int32_t id, int64_t end);
/* The "image" of a node: its snapshot bytes followed by the payloads of its log batches below
 * `end` (malloc'd, caller frees; *len bytes). NULL if the node cannot rebuild it. */
uint8_t *h_image(const harness *h, int32_t id, int64_t end, size_t *len);
/* Step the SNAPSHOT_INSTALLED held back by hold_install; returns the core's code. */
int h_finish_install(harness *h, int32_t id);

/* Step one event on node id at the current time and act on the update as a host. Returns the
 * core's return code. */
int h_step(harness *h, int32_t id, kq_raft_event *ev);
int h_tick(harness *h, int32_t id);
int h_propose(harness *h, int32_t id, int32_t count);
int h_resign(harness *h, int32_t id);
/* Release held persistence: step PERSISTED with the current log end. */
int h_persist(harness *h, int32_t id);
/* Hand a message to node `to` directly (requests get a fresh token; their response is queued
 * to m->from). */
int h_inject(harness *h, int32_t to, const kq_raft_msg *m);

/* Queue access. h_find: index of the first queued message matching (type, from, to), -1 for
 * none; from/to of 0 match anything. */
int h_find(const harness *h, kq_raft_msg_type type, int32_t from, int32_t to);
int h_count(const harness *h, kq_raft_msg_type type, int32_t from, int32_t to);
const kq_raft_msg *h_msg(const harness *h, int idx);
void h_deliver(harness *h, int idx);
void h_drop(harness *h, int idx);
/* Deliver everything due (and what that produces) until the queue holds nothing due. */
void h_deliver_all(harness *h);

/* Advance time by ms: deliver due messages, tick nodes at their deadlines, time out requests. */
void h_run(harness *h, uint64_t ms);
/* Run until pred(h) holds or ms pass; returns whether it held. */
bool h_run_until(harness *h, uint64_t ms, bool (*pred)(harness *h));

void h_isolate(harness *h, int32_t id);
void h_cut(harness *h, int32_t a, int32_t b); /* both directions */
void h_heal(harness *h);

h_node *h_node_of(harness *h, int32_t id);
const kq_raft_update *h_last(const harness *h, int32_t id);
kq_raft_role h_role(const harness *h, int32_t id);
int32_t h_epoch(const harness *h, int32_t id);
int64_t h_leo(const harness *h, int32_t id);
/* The leader with the highest epoch among up nodes, 0 for none. */
int32_t h_leader(const harness *h);
/* h_run_until predicate: some up node leads (h_leader != 0). */
bool h_has_leader(harness *h);
/* Moves the clock to node id's deadline (if later) and ticks it: its timer fires. */
void h_expire(harness *h, int32_t id);
/* Writes a batch of `count` records at `epoch` straight onto node id's disk (durable), after
 * its last batch; for nodes that are down. */
void h_disk_append(harness *h, int32_t id, int32_t epoch, int32_t count);
/* h_disk_append for a batch of quorum records (their offsets are set to the batch's), as
 * kq metadata-quorum unsafe-recover writes one on a stopped node. */
void h_disk_append_control(harness *h, int32_t id, int32_t epoch, kq_raft_control *c, size_t n);
/* Number of up nodes in the Leader role at `epoch`. */
int h_leaders_in_epoch(const harness *h, int32_t epoch);
/* Every pair of nodes agrees on every batch below the lower of their HWs. */
bool h_committed_prefix_matches(const harness *h);
/* Find a message of `type` in node id's last update, NULL if none. */
const kq_raft_msg *h_last_msg(const harness *h, int32_t id, kq_raft_msg_type type, int32_t to);

/* The quorum records of the batch with this payload id, NULL when it has none. */
const h_control *h_control_of(const harness *h, uint64_t payload);
/* Start every node with the bootstrap of `kq storage format --initial-controllers` for the
 * voters 1..n_voters (kraft.version 1, directory ids id * 0x11): call before h_start. Nodes
 * keep cfg.voters, which the bootstrap overrides. */
void h_bootstrap_dynamic(harness *h);
/* A voter change request from `from` (a client: -1 is not routable, use an observer's id). */
int h_voter_req(harness *h, int32_t leader, int32_t from, kq_raft_msg_type type, const kq_voter *v);
/* Voter `id` as h_bootstrap_dynamic describes it. */
kq_voter h_voter(int32_t id);
/* The voter set in force on node id. */
const kq_voter_set *h_voters(const harness *h, int32_t id);

/* Convenience request builders. */
kq_raft_msg h_vote_req(int32_t from, int32_t to, int32_t cand_epoch, int32_t last_epoch,
                       int64_t last_offset, bool pre_vote);
kq_raft_msg h_fetch_req(int32_t from, int32_t to, int32_t epoch, int64_t offset, int32_t last_epoch,
                        int32_t max_wait);

#endif
