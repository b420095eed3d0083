/*
 * Deterministic simulator for kq_raft. See sim.h for the model; this file is organised as:
 * trace, event scheduling (the queue is evheap.h, the PRNG kq_prng), logs, packets (wire round
 * trip), host (one per node: the production Raft host, kq/raft_host.h, over a simulated
 * asynchronous disk and network, with checks on everything it writes and sends), network,
 * checkers, faults and workload, phases, kq_sim_run. Controller mode runs the production
 * controller node (controller/node.h) on every voter.
 */
#include "sim.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kq/codec.h"
#include "kq/ctl_codec.h"
#include "kq/data_codec.h"
#include "kq/error.h"
#include "kq/log.h"
#include "kq/raft.h"
#include "kq/raft_host.h"
#include "kq/records.h"
#include "kq/voters.h"
#include "kq/util.h"
#include "evheap.h"
#include "lifecycle.h"
#include "data_plane.h"
#include "metadata.h"
#include "plog_mem.h"
#include "node.h"
#include "sim_inv.h"

/* Controller mode: the observers are the brokers' metadata observers. */
#define MAX_NODES (KQ_SIM_MAX_VOTERS + KQ_SIM_MAX_BROKERS)
#define SESSION_TIMEOUT_MS 9000 /* broker.session.timeout.ms of the simulated cluster */
#define BROKER_ID_BASE 100      /* broker i (from 0) has id BROKER_ID_BASE + 1 + i */
#define TRACE_LINE 240
#define MAX_EVENTS 20000000ull
#define MAX_SAME_MS_TICKS 2000
#define UNANSWERED_MAX_MS 20000 /* a request the core never answers is a contract breach */
#define CLUSTER_ID "kq-sim-cluster"
#define LIVENESS_MAX_FACTOR 5 /* a cluster that keeps progressing gets up to 5 budgets */

/* One PRNG (kq/util.h, splitmix64) per stream of decisions: net, disk, work, fault, core, ctl. */

/* ---------------------------------------------------------------- data types */

typedef struct sim_batch {
    int64_t base;
    int32_t epoch;
    int32_t count;
    uint32_t crc;
    size_t len;
    uint8_t *data; /* owned */
} sim_batch;

typedef struct sim_log {
    sim_batch *b;
    size_t n;
    size_t cap;
    int64_t start;       /* log start offset: below it the records are in the snapshot */
    int32_t start_epoch; /* epoch of the record at start - 1 (0 when start is 0) */
} sim_log;

/* A snapshot file on the simulated disk: a header (SNAP_HDR bytes: the payload's CRC-32C and
 * length; the store's own header also carries a magic, the id and a header CRC) and the payload
 * (the image, kq_image_snapshot_write). */
typedef struct sim_snap {
    kq_raft_snapshot_id id; /* end_offset 0: none */
    uint8_t *data;          /* owned: the whole file */
    size_t len, cap;
} sim_snap;
#define SNAP_HDR 12

/* A message on the simulated wire. Exactly one of (msg, batches) or wire is used. */
typedef struct sim_packet {
    int from; /* node index */
    int to;   /* node index */
    uint64_t req_id;
    bool is_req;
    bool synthetic; /* a transport error produced by the sender's own host */
    kq_raft_msg msg;
    sim_batch *batches; /* owned copies (FETCH_RESP) */
    size_t n_batches;
    uint8_t *chunk; /* owned copy of a FETCH_SNAPSHOT_RESP's bytes */
    uint8_t *wire;  /* owned encoded bytes (codec build) */
    size_t wire_len;
    uint8_t sender_dir[16]; /* the sender's directory id when it sent it (voter_changes) */
} sim_packet;

enum { OP_QSTATE, OP_TRUNCATE, OP_APPEND, OP_PREFIX };

typedef struct sim_op {
    int kind;
    kq_raft_qstate q;
    int64_t off;
    sim_batch b; /* owned payload */
} sim_op;

/* One batch of the Raft host's writes (kq_raft_disk): open while a step writes, then syncing
 * (its number is the host's commit number) until EV_DISK makes it durable. */
typedef struct sim_group {
    uint64_t id;
    sim_op *ops;
    size_t n_ops, cap_ops;
    struct sim_group *next;
} sim_group;

typedef struct sim_out { /* a request this node's core has in flight */
    uint64_t req_id;
    kq_raft_msg_type type;
    int peer;
    int32_t epoch;
    int32_t alias; /* the bootstrap id it was sent to (KQ_RAFT_BOOTSTRAP_ID), 0: none */
    bool pre_vote; /* a VOTE_REQ: a pre-vote */
} sim_out;

#define ADMIN_FROM (-1) /* sim_in.from of a request from the admin client (not a node) */

typedef struct sim_in { /* a request this node's core received and has not answered */
    uint64_t token;
    kq_raft_msg_type type;
    int from;        /* node index, or ADMIN_FROM */
    int admin_actor; /* ADMIN_FROM: the admin's actor index, id and request id */
    int32_t admin_id;
    uint64_t admin_req;
    uint64_t at_ms;
    uint64_t paused_at; /* the node's paused time (pause_time) when it arrived */
} sim_in;

/* Controller mode: the controller node (controller/node.h) around one node's core. */
typedef struct ctl_host {
    bool on;
    bool busy; /* inside a call into the node */
    kq_ctl_node node;
    kq_raft_status view; /* the status the node reads (ctl_view_sync) */
    kq_sim_epochs *committed_epochs, *active_epochs;
    uint64_t timer_gen;                   /* of the EV_CTL_TIMER in force */
    uint64_t timer_at;                    /* its time, 0: none */
    uint64_t activated_at;                /* when it last became the active controller, 0: never */
    uint64_t last_hb[KQ_SIM_MAX_BROKERS]; /* a heartbeat it answered, by broker index */
    int64_t ready_applied;                /* readiness: the applied offset, and since when */
    uint64_t ready_since;
    struct sim *s;
    struct sim_node *n;
} ctl_host;

typedef struct sim_node {
    int idx;
    int32_t id;
    bool voter;
    kq_raft_config cfg;
    uint64_t core_seed;

    kq_raft *r; /* NULL while down */
    bool up;
    bool stopping; /* RESIGNed, waiting for the graceful stop */
    uint64_t inc;  /* incarnation, bumped at every start */

    kq_raft_qstate dq; /* durable */
    sim_log dlog;
    kq_raft_qstate mq; /* written (durable or pending) */
    sim_log mlog;
    /* durable snapshots (written synchronously, as kq_store_snapshot_write): the two newest
     * (KQ_STORE_SNAPSHOTS_KEPT), [0] the latest */
    sim_snap snaps[2];
    sim_snap part;         /* the snapshot being fetched (its .part file; a crash loses it) */
    int64_t bm_seen_end;   /* the broker image's applied end last checked (-1: check again) */
    sim_group *open;       /* the batch being written */
    sim_group *gh, *gt;    /* batches syncing, in order */
    uint64_t disk_free_ms; /* the simulated disk completes writes in order */
    /* Timing faults: the process is stopped (SIGSTOP, a VM pause, a synchronous fsync that
     * takes long) until then: what arrives for it waits (simulated time; 0: running). */
    uint64_t paused_until;
    uint64_t pause_from; /* when the current (or last) pause began, 0: none yet */
    uint64_t paused_ms;  /* the time of the pauses before it */
    int32_t drift_pm;    /* a voter's clock runs (1000 + drift_pm) / 1000 as fast */
    kq_raft_host host;   /* the production Raft host (kq/raft_host.h) over this disk */
    struct sim *s;
    int depth;               /* nested node_step calls */
    kq_raft_event_type step; /* the event being stepped */
    int32_t step_count;      /* its propose count */

    sim_out *outs;
    size_t n_outs, cap_outs;
    sim_in *ins;
    size_t n_ins, cap_ins;

    uint64_t timer_gen;
    uint64_t timer_at;
    uint64_t tick_ms;
    int ticks_same_ms;

    const uint8_t *propose_data; /* payload for the PROPOSE being stepped */
    size_t propose_len;
    uint64_t propose_seq;

    kq_raft_status st;
    int32_t max_epoch;         /* this incarnation */
    int64_t max_hw;            /* this incarnation, known values only */
    int64_t oracle_end;        /* offsets below this were checked against the oracle */
    int64_t last_propose_base; /* result of the last PROPOSE step */
    int32_t last_propose_epoch;
    int last_propose_err;
    ctl_host ch;
    /* controller mode, a broker's metadata observer: the broker agent's image (metadata.h) */
    int actor; /* the broker (index in s->actors), -1 for a voter */
    bool bm_on;
    kq_bmeta bm;
    /* voter_changes (KIP-853): the directory id is cfg.directory_id */
    bool boot;      /* formatted with the initial voters (the bootstrap records at -1) */
    bool was_voter; /* this directory was in a voter set it held (a removed voter when not now) */
    /* the VotersRecords its log holds (bootstrap, snapshot head, log), ascending: the simulator's
     * own reading of "the last one in the log is in force" */
    struct vx_entry *vx;
    size_t n_vx, cap_vx;
    kq_control_list fetched, installed; /* for the Raft host's ops, as the daemons keep them */
    int32_t grant_epoch;                /* granted (non-pre-)votes it received in this epoch */
    kq_voter_key grants[MAX_NODES];
    int n_grants;
    int32_t elect_checked; /* the epoch whose election was checked */
    int64_t hw_checked;    /* leader: its high watermark was checked up to here */
} sim_node;

typedef struct vx_entry {
    int64_t offset;
    kq_voter_set set;
} vx_entry;

enum ev_type {
    EV_START = 1,
    EV_TIMER,
    EV_DISK,
    EV_NET,
    EV_REQ_TIMEOUT,
    EV_WORKLOAD,
    EV_FAULT,
    EV_GRACE_STOP,
    EV_HEAL,
    EV_PHASE_LIVENESS,
    EV_LIVE_CHECK,
    EV_LIVE_DEADLINE,
    EV_FAKE_PERSIST,
    EV_CTL_NET,        /* controller-API packet between an actor and a controller node */
    EV_CTL_TIMER,      /* active controller: fencing, leaderless scan, rebalance */
    EV_ACTOR_TICK,     /* broker: register / heartbeat; admin: create topics */
    EV_ACTOR_AP,       /* broker: maybe send an AlterPartition */
    EV_ACTOR_TIMEOUT,  /* an actor's request got no answer */
    EV_ACTOR_START,    /* a crashed broker restarts (new incarnation) */
    EV_DP_TIMER,       /* a broker's data plane asked to be ticked */
    EV_DP_TIMEOUT,     /* something a broker's data plane sent got no answer */
    EV_ACTOR_DIE,      /* a broker exits on a disk error */
    EV_CLIENT_TICK,    /* a producer or consumer: its next request */
    EV_CLIENT_TIMEOUT, /* a producer's or consumer's request got no answer */
    EV_KILL_LEADER     /* voter_changes: the leader crashes with a change in flight */
};

typedef struct sim_ev {
    uint64_t t;
    uint64_t seq;
    int type;
    int node;
    uint64_t inc;
    uint64_t a;
    sim_packet *pkt;    /* owned by the event while queued */
    struct ctl_pkt *cp; /* owned by the event while queued */
    int actor;
} sim_ev;
KQ_EV_KEY_FIRST(sim_ev);

typedef struct oracle_entry {
    int32_t epoch;
    uint64_t hash;
} oracle_entry;

typedef struct lm_slot { /* every (epoch, batch hash) ever written at one offset */
    oracle_entry *e;
    size_t n, cap;
} lm_slot;

struct ref_hash {
    uint64_t hash;
    bool set;
};

typedef struct link {
    uint32_t lat_min_ms;
    uint32_t lat_spread_ms;
    uint32_t loss_pm; /* permille */
    uint32_t dup_pm;
    uint32_t reorder_pm;
    uint64_t clog_until;
    bool blocked;
} link;

typedef struct sim {
    kq_sim_opts o;
    kq_sim_result *res;
    FILE *out;
    kq_prng net, disk, work, fault, core;
    kq_prng timing; /* pauses, slow syncs, torn writes and clock drift (seeds without them
                     * keep the schedules they had before these faults existed) */

    int n_nodes, n_voters, n_observers;
    sim_node nodes[MAX_NODES];
    link links[MAX_NODES][MAX_NODES];

    /* swarm options */
    uint32_t disk_lat_min, disk_lat_spread;
    uint32_t fault_every_ms;
    uint32_t p_crash, p_restart, p_graceful, p_partition, p_heal, p_clog;
    uint32_t p_rdisk_err; /* per 10,000 metadata-log disk writes: the write fails (EIO) */
    uint32_t p_pause;     /* per 1,000 fault ticks: a process is paused */
    uint32_t p_slow_sync; /* per 1,000 syncs (metadata-log batches, partition-log commits) */
    uint32_t p_torn;      /* per 1,000 crashes: some in-flight writes reach the disk anyway */
    uint32_t workload_every_ms;
    uint32_t fetch_cap_batches; /* max batches per Fetch response (>= 1) */
    uint32_t fetch_cap_bytes;
    uint32_t base_loss_pm, base_dup_pm, base_reorder_pm;
    uint64_t safety_ms, liveness_ms;

    kq_evheap heap; /* of sim_ev (evheap.h) */
    uint64_t seq;
    uint64_t now;
    uint64_t next_req_id;
    uint64_t events;

    char ring[KQ_SIM_TRACE_KEEP][TRACE_LINE];
    size_t ring_n; /* total lines ever */
    uint64_t hash;

    bool failed;
    bool done;
    bool liveness;
    int live_leader;
    int32_t live_epoch;
    int64_t probe_end; /* exclusive end of the liveness probe batch; -1 none */
    uint64_t live_start_ms;
    int64_t live_progress; /* sum of HWs and LEOs at the last deadline */

    int32_t *epoch_leader; /* epoch -> leader id, -1 unknown */
    size_t n_epoch_leader;
    oracle_entry *committed; /* offset -> committed entry */
    bool *committed_set;
    size_t n_committed, cap_committed;
    lm_slot *lm;
    size_t n_lm;
    bool oom;

    /* voter_changes: a dynamic quorum (opts.voter_changes) */
    bool dynamic;
    kq_prng memb;      /* its decisions (formatting, directory ids, changes, wipes) */
    int n_initial;     /* controllers formatted as the initial voters (the first ones) */
    kq_voter_set boot; /* their set: the bootstrap records of kq storage format */
    uint32_t p_change; /* per 1,000 admin rounds: a voter change instead of another op */
    uint32_t p_wipe;   /* per 1,000 removals answered: the controller is wiped and re-formatted */
    uint32_t p_kill_leader; /* per 1,000 changes sent: the leader crashes soon after */

    /* controller mode */
    kq_prng ctl;
    uint32_t lat_min, lat_spread;
    int n_brokers, n_actors; /* actors: the brokers, then the admin client */
    struct sim_actor *actors;
    bool bblocked[KQ_SIM_MAX_BROKERS + 1][MAX_NODES];
    uint32_t p_bcrash, p_bisolate;
    uint32_t p_disk_err; /* per 10,000 data-plane loops: the next partition-log commit fails */
    uint32_t n_topics_target;
    size_t ctl_max_batch;
    int64_t snapshot_max_bytes; /* the controllers' snapshot settings */
    kq_prng snapr;              /* snapshot faults: damaged .part files */
    uint32_t p_part_damage;     /* per 1,000 installs: the fetched .part is damaged */
    int64_t snapshot_interval_ms;
    kq_decide_settings settings;
    kq_image *ref; /* reference: the committed log replayed with checks before each record */
    int64_t ref_end;
    struct ref_hash *ref_hash; /* image hash after applying [0, end), indexed by end */
    size_t cap_ref_hash;
    kq_sim_epochs *ref_epochs;
    struct ap_ack *acks;
    size_t n_acks, cap_acks;
    /* data clients: producers (acks all/1/0) and a consumer of topic t0 */
    struct sim_client *clients;
    int n_clients;
    struct data_rec *acked, *consumed; /* records acknowledged with acks=all / read */
    bool unclean[64]; /* partitions of the client topic that had an unclean election */
    /* what any leader replica of a client partition exposed below its high watermark (readable
     * by consumers): record hashes [0, end); every later leader must hold them */
    struct readable {
        uint8_t topic[16];
        int64_t end;
        int32_t epoch; /* the newest leader epoch that exposed some of it */
        uint64_t *hash;
        size_t cap;
    } readable[64];
    kq_sim_leaders *leaders; /* which broker led each leader epoch of every partition */
    int32_t t0_pepoch[64], t0_lepoch[64]; /* traced: its partitions' last committed epochs */
    bool t0_seen[64];
    size_t n_acked, cap_acked, n_consumed, cap_consumed;
} sim;

/* ---------------------------------------------------------------- trace */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

__attribute__((format(printf, 2, 3))) static void trace(sim *s, const char *fmt, ...)
{
    char *line = s->ring[s->ring_n % KQ_SIM_TRACE_KEEP];
    int k = snprintf(line, TRACE_LINE, "[%7" PRIu64 "] ", s->now);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + k, TRACE_LINE - (size_t)k, fmt, ap);
    va_end(ap);
    s->ring_n++;
    s->hash = fnv1a(s->hash, line, strlen(line) + 1);
    if (s->o.trace)
        fprintf(s->out, "%s\n", line);
}

__attribute__((format(printf, 2, 3))) static void fail(sim *s, const char *fmt, ...)
{
    if (s->failed)
        return;
    s->failed = true;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(s->res->reason, sizeof s->res->reason, "t=%" PRIu64 "ms: %s", s->now, msg);
    trace(s, "VIOLATION %s", msg);
}

static void dump_trace(sim *s)
{
    size_t first = s->ring_n > KQ_SIM_TRACE_KEEP ? s->ring_n - KQ_SIM_TRACE_KEEP : 0;
    fprintf(s->out, "--- seed %" PRIu64 ": last %zu trace lines ---\n", s->o.seed,
            s->ring_n - first);
    for (size_t i = first; i < s->ring_n; i++)
        fprintf(s->out, "%s\n", s->ring[i % KQ_SIM_TRACE_KEEP]);
    fprintf(s->out, "--- end of trace ---\n");
}

static void *xcalloc(sim *s, size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p && !s->oom) {
        s->oom = true;
        fail(s, "out of memory");
    }
    return p;
}

/* Grow *arr (of elements of size sz) so that it holds at least need elements. */
static bool grow(sim *s, void **arr, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap * 2 : 8;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*arr, nc * sz);
    if (!p) {
        if (!s->oom) {
            s->oom = true;
            fail(s, "out of memory");
        }
        return false;
    }
    memset((char *)p + *cap * sz, 0, (nc - *cap) * sz);
    *arr = p;
    *cap = nc;
    return true;
}

/* ---------------------------------------------------------------- event heap */

static void ctl_pkt_free(struct ctl_pkt *p);
static void pkt_free(sim_packet *p);

static void sched_ev(sim *s, uint64_t t, int type, int node, uint64_t inc, uint64_t a,
                     sim_packet *pkt, struct ctl_pkt *cp, int actor)
{
    sim_ev ev = {.t = t < s->now ? s->now : t,
                 .seq = s->seq++,
                 .type = type,
                 .node = node,
                 .inc = inc,
                 .a = a,
                 .pkt = pkt,
                 .cp = cp,
                 .actor = actor};
    if (!kq_evheap_push(&s->heap, &ev)) {
        pkt_free(pkt);
        ctl_pkt_free(cp);
        if (!s->oom) {
            s->oom = true;
            fail(s, "out of memory");
        }
    }
}

static void sched(sim *s, uint64_t t, int type, int node, uint64_t inc, uint64_t a, sim_packet *pkt)
{
    sched_ev(s, t, type, node, inc, a, pkt, NULL, -1);
}

/* A node's own clock (what its Raft host and controller node read): simulated time, drifting
 * on voters of some seeds; and the simulated time a reading of it falls on. */
static uint64_t node_clock(const sim *s, const sim_node *n)
{
    return n->drift_pm ? (uint64_t)((int64_t)s->now * (1000 + n->drift_pm) / 1000) : s->now;
}

static uint64_t node_sim_time(const sim_node *n, uint64_t local)
{
    if (!n->drift_pm || local == UINT64_MAX)
        return local;
    uint64_t rate = (uint64_t)(1000 + n->drift_pm);
    return (local * 1000 + rate - 1) / rate; /* the first ms whose reading is >= local */
}

/* ---------------------------------------------------------------- logs */

static int64_t log_end(const sim_log *l)
{
    return l->n ? l->b[l->n - 1].base + l->b[l->n - 1].count : l->start;
}

/* Index of the batch holding offset off, or -1. */
static long log_find(const sim_log *l, int64_t off)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const sim_batch *b = &l->b[mid];
        if (off < b->base)
            hi = mid;
        else if (off >= b->base + b->count)
            lo = mid + 1;
        else
            return (long)mid;
    }
    return -1;
}

static uint64_t batch_hash(const sim_batch *b)
{
    uint64_t h = 0xCBF29CE484222325ull;
    h = fnv1a(h, &b->base, sizeof b->base);
    h = fnv1a(h, &b->count, sizeof b->count);
    return fnv1a(h, b->data, b->len);
}

static bool batch_dup(sim *s, sim_batch *dst, const sim_batch *src)
{
    *dst = *src;
    dst->data = xcalloc(s, src->len, 1);
    if (!dst->data)
        return false;
    if (src->len)
        memcpy(dst->data, src->data, src->len);
    return true;
}

static bool log_append(sim *s, sim_log *l, const sim_batch *b)
{
    if (!grow(s, (void **)&l->b, &l->cap, l->n + 1, sizeof(sim_batch)))
        return false;
    if (!batch_dup(s, &l->b[l->n], b))
        return false;
    l->n++;
    return true;
}

/* Remove every entry at offset >= off; false if off falls inside a batch. */
static bool log_truncate(sim_log *l, int64_t off)
{
    bool aligned = true;
    while (l->n && l->b[l->n - 1].base + l->b[l->n - 1].count > off) {
        sim_batch *b = &l->b[l->n - 1];
        if (b->base < off)
            aligned = false;
        free(b->data);
        l->n--;
    }
    return aligned;
}

static void log_free(sim_log *l)
{
    log_truncate(l, 0);
    free(l->b);
    memset(l, 0, sizeof *l);
}

/* Empty, starting at start (a snapshot's end, or 0). */
static void log_reset(sim_log *l, int64_t start, int32_t start_epoch)
{
    log_truncate(l, 0);
    l->start = start;
    l->start_epoch = start_epoch;
}

static bool log_copy(sim *s, sim_log *dst, const sim_log *src)
{
    log_reset(dst, src->start, src->start_epoch);
    for (size_t i = 0; i < src->n; i++)
        if (!log_append(s, dst, &src->b[i]))
            return false;
    return true;
}

/* The epoch of the record at off: -1 when the log does not hold it (the record just below the
 * log start has the log start's epoch). */
static int32_t log_epoch_at(const sim_log *l, int64_t off)
{
    if (off < l->start)
        return off == l->start - 1 ? l->start_epoch : -1;
    long i = log_find(l, off);
    return i < 0 ? -1 : l->b[i].epoch;
}

/* The log holds the record at off with epoch, or a snapshot covers it (below the log start:
 * snapshots hold committed records only, checked by the image hashes). */
static bool log_holds(const sim_log *l, int64_t off, int32_t epoch)
{
    return off < l->start - 1 || log_epoch_at(l, off) == epoch;
}

/* Drop the batches below start (a snapshot's end, on a batch boundary). */
static void log_remove_prefix(sim_log *l, int64_t start)
{
    if (start <= l->start)
        return;
    int32_t epoch = log_epoch_at(l, start - 1);
    size_t k = 0;
    while (k < l->n && l->b[k].base + l->b[k].count <= start)
        free(l->b[k++].data);
    memmove(l->b, l->b + k, (l->n - k) * sizeof *l->b);
    l->n -= k;
    l->start = start;
    l->start_epoch = epoch;
}

static void snap_free(sim_snap *sn)
{
    free(sn->data);
    memset(sn, 0, sizeof *sn);
}

static bool snap_is(const sim_snap *sn, kq_raft_snapshot_id id)
{
    return sn->id.end_offset > 0 && sn->id.end_offset == id.end_offset && sn->id.epoch == id.epoch;
}

/* The kept snapshot id, or NULL (replaced by newer ones, or never written here). */
static const sim_snap *snap_find(const sim_node *n, kq_raft_snapshot_id id)
{
    for (int i = 0; i < 2; i++)
        if (snap_is(&n->snaps[i], id))
            return &n->snaps[i];
    return NULL;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* sn's file: the header, then the payload. */
static bool snap_file(sim *s, sim_snap *sn, const uint8_t *payload, size_t len)
{
    sn->data = xcalloc(s, SNAP_HDR + len, 1);
    if (!sn->data)
        return false;
    sn->len = sn->cap = SNAP_HDR + len;
    put_u32(sn->data, kq_crc32c(0, payload, len));
    put_u32(sn->data + 4, (uint32_t)((uint64_t)len >> 32));
    put_u32(sn->data + 8, (uint32_t)len);
    if (len)
        memcpy(sn->data + SNAP_HDR, payload, len);
    return true;
}

/* A file whose header matches its payload (kq_store_install_snapshot's verification). */
static bool snap_valid(const sim_snap *sn)
{
    if (sn->len < SNAP_HDR)
        return false;
    uint64_t len = (uint64_t)get_u32(sn->data + 4) << 32 | get_u32(sn->data + 8);
    return len == sn->len - SNAP_HDR &&
           get_u32(sn->data) == kq_crc32c(0, sn->data + SNAP_HDR, sn->len - SNAP_HDR);
}

/* A new latest snapshot (taking *sn's bytes); the oldest of the two kept goes. */
static void snap_keep(sim_node *n, sim_snap *sn)
{
    snap_free(&n->snaps[1]);
    n->snaps[1] = n->snaps[0];
    n->snaps[0] = *sn;
    memset(sn, 0, sizeof *sn);
}

/* ---------------------------------------------------------------- packets */

static void pkt_free(sim_packet *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_batches; i++)
        free(p->batches[i].data);
    free(p->batches);
    free(p->wire);
    free(p->chunk);
    free(p);
}

static sim_packet *pkt_dup(sim *s, const sim_packet *src)
{
    sim_packet *p = xcalloc(s, 1, sizeof *p);
    if (!p)
        return NULL;
    *p = *src;
    p->batches = NULL;
    p->n_batches = 0;
    p->wire = NULL;
    p->chunk = NULL;
    if (src->chunk) {
        size_t len = src->msg.u.fetch_snapshot_resp.len;
        p->chunk = xcalloc(s, len ? len : 1, 1);
        if (!p->chunk)
            goto fail;
        memcpy(p->chunk, src->chunk, len);
        p->msg.u.fetch_snapshot_resp.data = p->chunk;
    }
    if (src->n_batches) {
        p->batches = xcalloc(s, src->n_batches, sizeof(sim_batch));
        if (!p->batches)
            goto fail;
        for (size_t i = 0; i < src->n_batches; i++) {
            if (!batch_dup(s, &p->batches[i], &src->batches[i]))
                goto fail;
            p->n_batches++;
        }
    }
    if (src->wire) {
        p->wire = xcalloc(s, src->wire_len, 1);
        if (!p->wire)
            goto fail;
        memcpy(p->wire, src->wire, src->wire_len);
    }
    return p;
fail:
    pkt_free(p);
    return NULL;
}

static bool is_request(kq_raft_msg_type t)
{
    return kq_raft_msg_is_request(t);
}

static const char *msg_name(kq_raft_msg_type t)
{
    switch (t) {
    case KQ_RAFT_VOTE_REQ:
        return "VoteReq";
    case KQ_RAFT_VOTE_RESP:
        return "VoteResp";
    case KQ_RAFT_BEGIN_EPOCH_REQ:
        return "BeginReq";
    case KQ_RAFT_BEGIN_EPOCH_RESP:
        return "BeginResp";
    case KQ_RAFT_END_EPOCH_REQ:
        return "EndReq";
    case KQ_RAFT_END_EPOCH_RESP:
        return "EndResp";
    case KQ_RAFT_FETCH_REQ:
        return "FetchReq";
    case KQ_RAFT_FETCH_RESP:
        return "FetchResp";
    }
    if (t == KQ_RAFT_FETCH_SNAPSHOT_REQ)
        return "FetchSnapshotReq";
    if (t == KQ_RAFT_FETCH_SNAPSHOT_RESP)
        return "FetchSnapshotResp";
    static const char *voter[] = {"AddVoterReq",     "AddVoterResp",   "RemoveVoterReq",
                                  "RemoveVoterResp", "UpdateVoterReq", "UpdateVoterResp"};
    if ((int)t >= (int)KQ_RAFT_ADD_VOTER_REQ && (int)t <= (int)KQ_RAFT_UPDATE_VOTER_RESP)
        return voter[(int)t - (int)KQ_RAFT_ADD_VOTER_REQ];
    return "?";
}

/* One-line rendering of a message for the trace. */
static void msg_str(const kq_raft_msg *m, size_t n_batches, char *buf, size_t len)
{
    int k = snprintf(buf, len, "%s e%d l%d", msg_name(m->type), m->epoch, m->leader_id);
    if (k < 0 || (size_t)k >= len)
        return;
    buf += k;
    len -= (size_t)k;
    if (m->error)
        k = snprintf(buf, len, " err=%s", kq_err_name(m->error));
    else if (m->type == KQ_RAFT_VOTE_REQ)
        k = snprintf(buf, len, " cand=%d last=%d/%" PRId64 "%s", m->u.vote_req.candidate_id,
                     m->u.vote_req.last_epoch, m->u.vote_req.last_offset,
                     m->u.vote_req.pre_vote ? " pre" : "");
    else if (m->type == KQ_RAFT_VOTE_RESP)
        k = snprintf(buf, len, " granted=%d", m->u.vote_resp.granted);
    else if (m->type == KQ_RAFT_FETCH_REQ)
        k = snprintf(buf, len, " off=%" PRId64 " lfe=%d", m->u.fetch_req.fetch_offset,
                     m->u.fetch_req.last_fetched_epoch);
    else if (m->type == KQ_RAFT_FETCH_RESP && m->u.fetch_resp.snapshot)
        k = snprintf(buf, len, " hw=%" PRId64 " snapshot=%" PRId64 "/%d",
                     m->u.fetch_resp.high_watermark, m->u.fetch_resp.snapshot_id.end_offset,
                     m->u.fetch_resp.snapshot_id.epoch);
    else if (m->type == KQ_RAFT_FETCH_RESP)
        k = snprintf(buf, len,
                     " hw=%" PRId64 " div=%d(%d,%" PRId64 ") rec=[%" PRId64 ",%" PRId64 ") nb=%zu",
                     m->u.fetch_resp.high_watermark, m->u.fetch_resp.diverging,
                     m->u.fetch_resp.diverging_epoch, m->u.fetch_resp.diverging_end_offset,
                     m->u.fetch_resp.records_from, m->u.fetch_resp.records_to, n_batches);
    else if (m->type == KQ_RAFT_FETCH_SNAPSHOT_REQ)
        k = snprintf(buf, len, " snapshot=%" PRId64 "/%d pos=%" PRId64,
                     m->u.fetch_snapshot_req.snapshot_id.end_offset,
                     m->u.fetch_snapshot_req.snapshot_id.epoch, m->u.fetch_snapshot_req.position);
    else if (m->type == KQ_RAFT_FETCH_SNAPSHOT_RESP)
        k = snprintf(buf, len, " snapshot=%" PRId64 "/%d [%" PRId64 "+%zu of %" PRId64 "]",
                     m->u.fetch_snapshot_resp.snapshot_id.end_offset,
                     m->u.fetch_snapshot_resp.snapshot_id.epoch, m->u.fetch_snapshot_resp.position,
                     m->u.fetch_snapshot_resp.len, m->u.fetch_snapshot_resp.size);
    (void)k;
}

#ifdef KQ_SIM_CODEC
/* Encode into p->wire. Fetch responses carry the batches gathered by the host. */
static bool pkt_encode(sim *s, sim_packet *p)
{
    kq_buf buf = {0};
    kq_codec_batch cb[KQ_RAFT_MAX_BATCHES];
    int rc;
    if (p->is_req) {
        rc = kq_codec_encode_raft_request(&p->msg, CLUSTER_ID, &buf);
    } else {
        for (size_t i = 0; i < p->n_batches; i++) {
            cb[i].base_offset = p->batches[i].base;
            cb[i].epoch = p->batches[i].epoch;
            cb[i].count = p->batches[i].count;
            cb[i].crc32c = p->batches[i].crc;
            cb[i].records = p->batches[i].data;
            cb[i].len = p->batches[i].len;
        }
        rc = kq_codec_encode_raft_response(&p->msg, cb, p->n_batches, &buf);
    }
    if (rc) {
        char m[160];
        msg_str(&p->msg, p->n_batches, m, sizeof m);
        fail(s, "codec: encoding %s failed: %s", m, kq_err_name(rc));
        return false;
    }
    p->wire = buf.data;
    p->wire_len = buf.len;
    for (size_t i = 0; i < p->n_batches; i++)
        free(p->batches[i].data);
    free(p->batches);
    p->batches = NULL;
    p->n_batches = 0;
    return true;
}
#endif

/* A decoded packet, ready to be stepped: msg points into it. */
typedef struct sim_decoded {
    kq_raft_msg msg;
    kq_raft_batch batches[KQ_RAFT_MAX_BATCHES];
#ifdef KQ_SIM_CODEC
    kq_request req;
    kq_response resp;
    bool have_req, have_resp;
#endif
} sim_decoded;

static void decoded_free(sim_decoded *d)
{
#ifdef KQ_SIM_CODEC
    if (d->have_req)
        kq_request_free(&d->req);
    if (d->have_resp)
        kq_response_free(&d->resp);
    d->have_req = d->have_resp = false;
#else
    (void)d;
#endif
}

static bool pkt_decode(sim *s, const sim_packet *p, sim_decoded *d)
{
    memset(d, 0, sizeof *d);
#ifdef KQ_SIM_CODEC
    if (p->wire) {
        char err[256] = "";
        int rc;
        if (p->is_req) {
            rc = kq_codec_decode_request(p->wire, p->wire_len, &d->req, err, sizeof err);
            d->have_req = rc == 0;
            if (rc == 0)
                d->msg = d->req.raft;
        } else {
            rc = kq_codec_decode_response(p->wire, p->wire_len, s->nodes[p->from].id, &d->resp, err,
                                          sizeof err);
            d->have_resp = rc == 0;
            if (rc == 0)
                d->msg = d->resp.raft;
        }
        if (rc) {
            fail(s, "codec: decoding a %s from n%d failed: %s: %s", msg_name(p->msg.type),
                 s->nodes[p->from].id, kq_err_name(rc), err);
            return false;
        }
        if (d->msg.type != p->msg.type) {
            fail(s, "codec: %s decoded as %s", msg_name(p->msg.type), msg_name(d->msg.type));
            return false;
        }
        d->msg.from = s->nodes[p->from].id;
        d->msg.to = s->nodes[p->to].id;
        d->msg.token = p->req_id;
        return true;
    }
#endif
    d->msg = p->msg;
    d->msg.to = s->nodes[p->to].id; /* (a request to a bootstrap id reached this node) */
    d->msg.token = p->req_id;
    if (p->msg.type == KQ_RAFT_FETCH_RESP) {
        for (size_t i = 0; i < p->n_batches; i++) {
            kq_raft_batch *b = &d->batches[i];
            b->base_offset = p->batches[i].base;
            b->epoch = p->batches[i].epoch;
            b->count = p->batches[i].count;
            b->kind = KQ_RAFT_BATCH_FETCHED;
            b->data = p->batches[i].data;
            b->len = p->batches[i].len;
            b->crc32c = p->batches[i].crc;
        }
        d->msg.u.fetch_resp.batches = p->n_batches ? d->batches : NULL;
        d->msg.u.fetch_resp.n_batches = p->n_batches;
    }
    (void)s;
    return true;
}

/* ---------------------------------------------------------------- dynamic voters (KIP-853) */

/* Controller n as a voter: its key (id, directory id), listener and kraft.version range. */
static void voter_of(const sim_node *n, kq_voter *v)
{
    memset(v, 0, sizeof *v);
    v->key.id = n->id;
    memcpy(v->key.dir, n->cfg.directory_id, sizeof v->key.dir);
    snprintf(v->host, sizeof v->host, "n%d", n->id);
    v->port = 9093;
    v->kraft_min = 0;
    v->kraft_max = 1;
}

/* kq storage format: a new directory id for controller n. */
static void new_directory(sim *s, sim_node *n)
{
    do
        for (int i = 0; i < 16; i += 8) {
            uint64_t v = kq_prng_next(&s->memb);
            memcpy(n->cfg.directory_id + i, &v, 8);
        }
    while (n->cfg.directory_id[0] == 0);
}

static bool key_is_node(const kq_voter_key *k, const sim_node *n)
{
    return k->id == n->id && memcmp(k->dir, n->cfg.directory_id, sizeof k->dir) == 0;
}

static const kq_voter_set *vx_top(const sim_node *n, int64_t *at);

/* Node n is a voter: a controller of the static set, or in a dynamic quorum one in the voter
 * set its log holds now (the others are observers). */
static bool is_voter_now(const sim_node *n)
{
    int64_t at;
    const kq_voter_set *set = vx_top(n, &at);
    if (!n->s->dynamic || !n->voter)
        return n->voter;
    for (int i = 0; set && i < set->n; i++)
        if (key_is_node(&set->v[i].key, n))
            return true;
    return false;
}

static void set_str(const kq_voter_set *v, char *buf, size_t len)
{
    int k = snprintf(buf, len, "{");
    for (int i = 0; v && i < v->n && k > 0 && (size_t)k < len; i++)
        k += snprintf(buf + k, len - (size_t)k, "%s%d/%02x", i ? " " : "", v->v[i].key.id,
                      v->v[i].key.dir[0]);
    if (k > 0 && (size_t)k < len)
        snprintf(buf + k, len - (size_t)k, "}");
}

static bool sets_equal(const kq_voter_set *a, const kq_voter_set *b)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++)
        if (!kq_voter_key_equal(&a->v[i].key, &b->v[i].key) || strcmp(a->v[i].host, b->v[i].host) ||
            a->v[i].port != b->v[i].port || a->v[i].kraft_min != b->v[i].kraft_min ||
            a->v[i].kraft_max != b->v[i].kraft_max)
            return false;
    return true;
}

/* The voter set of the last VotersRecord node n holds (its offset in *at; NULL and -2: none). */
static const kq_voter_set *vx_top(const sim_node *n, int64_t *at)
{
    *at = n->n_vx ? n->vx[n->n_vx - 1].offset : -2;
    return n->n_vx ? &n->vx[n->n_vx - 1].set : NULL;
}

static void vx_push(sim *s, sim_node *n, int64_t off, const kq_voter_set *set)
{
    if (n->n_vx && off <= n->vx[n->n_vx - 1].offset)
        return; /* below what it holds already: a log that still holds a snapshot's records */
    if (!grow(s, (void **)&n->vx, &n->cap_vx, n->n_vx + 1, sizeof(vx_entry)))
        return;
    n->vx[n->n_vx++] = (vx_entry){.offset = off, .set = *set};
    char b[160];
    set_str(set, b, sizeof b);
    trace(s, "  n%d holds voters %s from offset %" PRId64, n->id, b, off);
}

/* The VotersRecords among a batch's records (or a snapshot's head: base is its end). */
static void vx_scan(sim *s, sim_node *n, int64_t base, int32_t count, const uint8_t *data,
                    size_t len, bool snapshot)
{
    kq_control_list l = {0};
    char err[200];
    int rc = snapshot ? kq_control_list_add_snapshot(&l, base, data, len, err, sizeof err)
                      : kq_control_list_add_batch(&l, base, count, data, len, err, sizeof err);
    if (rc)
        fail(s, "n%d: the quorum records at %" PRId64 " do not decode: %s", n->id, base, err);
    for (size_t i = 0; i < l.n && !s->failed; i++)
        if (l.c[i].voters)
            vx_push(s, n, l.c[i].offset, l.c[i].voters);
    kq_control_list_free(&l);
}

static void vx_truncate(sim_node *n, int64_t end)
{
    while (n->n_vx && n->vx[n->n_vx - 1].offset >= end)
        n->n_vx--;
}

/* What node n holds, read again: the bootstrap's, its snapshot's, its log's. */
static void vx_rebuild(sim *s, sim_node *n)
{
    n->n_vx = 0;
    if (n->boot)
        vx_push(s, n, -1, &s->boot);
    const sim_snap *sn = &n->snaps[0];
    if (sn->id.end_offset > 0)
        vx_scan(s, n, sn->id.end_offset, 0, sn->data + SNAP_HDR, sn->len - SNAP_HDR, true);
    for (size_t i = 0; i < n->mlog.n && !s->failed; i++)
        vx_scan(s, n, n->mlog.b[i].base, n->mlog.b[i].count, n->mlog.b[i].data, n->mlog.b[i].len,
                false);
}

/* The quorum records a daemon gives its core at start (controller/main.c, broker-agent/main.c):
 * the bootstrap records kq storage format wrote, the latest snapshot's head, the log's. */
static bool start_control(sim *s, sim_node *n, kq_control_list *l)
{
    char err[200] = "";
    int rc = 0;
    if (n->boot) {
        kq_buf b = {0};
        kq_raft_control kv = {.offset = -1, .kraft_version = 1};
        kq_raft_control vs = {.offset = -1, .kraft_version = -1, .voters = &s->boot};
        rc = kq_control_append(&b, &kv, err, sizeof err);
        if (!rc)
            rc = kq_control_append(&b, &vs, err, sizeof err);
        if (!rc)
            rc = kq_control_list_add_batch(l, -1, 2, b.data, b.len, err, sizeof err);
        kq_buf_free(&b);
    }
    const sim_snap *sn = &n->snaps[0];
    if (!rc && sn->id.end_offset > 0)
        rc = kq_control_list_add_snapshot(l, sn->id.end_offset, sn->data + SNAP_HDR,
                                          sn->len - SNAP_HDR, err, sizeof err);
    for (size_t i = 0; !rc && i < n->dlog.n; i++)
        rc = kq_control_list_add_batch(l, n->dlog.b[i].base, n->dlog.b[i].count, n->dlog.b[i].data,
                                       n->dlog.b[i].len, err, sizeof err);
    if (rc)
        fail(s, "n%d: its quorum records do not read back at start: %s", n->id, err);
    return !rc;
}

/* kq_raft_host_ops of a dynamic quorum's daemons */
static int host_fetched_control(void *ctx, kq_raft_batch *batches, size_t nb)
{
    sim_node *n = ctx;
    int rc = kq_control_list_read_fetched(&n->fetched, batches, nb);
    if (rc)
        fail(n->s, "n%d: fetched quorum records do not decode: %s", n->id, kq_err_name(rc));
    for (size_t i = 0; n->s->o.bug == KQ_SIM_BUG_HOST_DROPS_VOTERS && i < nb; i++) {
        batches[i].control = NULL; /* the self-test: the core never hears of them */
        batches[i].n_control = 0;
    }
    return rc;
}

static size_t host_installed_control(void *ctx, const kq_raft_control **out)
{
    sim_node *n = ctx;
    *out = n->installed.c;
    return n->installed.n;
}

/* A granted vote (not a pre-vote) node n received for epoch e from key k. */
static void vx_grant(sim_node *n, int32_t e, const kq_voter_key *k)
{
    if (e < n->grant_epoch)
        return; /* late, for an earlier candidacy */
    if (n->grant_epoch != e) {
        n->grant_epoch = e;
        n->n_grants = 0;
    }
    for (int i = 0; i < n->n_grants; i++)
        if (kq_voter_key_equal(&n->grants[i], k))
            return;
    if (n->n_grants < MAX_NODES)
        n->grants[n->n_grants++] = *k;
}

/* After every step of node n of a dynamic quorum: its voter set in force is the one of the last
 * VotersRecord it holds; a candidate is a voter of it; a new leader had the votes of a majority
 * of it; a high watermark the leader advances is durable on a majority of it. Nobody outside
 * the set (a removed voter, a wiped controller's old directory) counts. */
static void vx_check(sim *s, sim_node *n)
{
    int64_t at, want_at;
    const kq_voter_set *got = kq_raft_voters(n->r, &at);
    const kq_voter_set *want = vx_top(n, &want_at);
    char g[160], w[160];
    if (at != want_at || (want ? !sets_equal(got, want) : got->n != 0)) {
        set_str(got, g, sizeof g);
        set_str(want, w, sizeof w);
        fail(s,
             "n%d: voter set in force %s from offset %" PRId64 ", but the last VotersRecord it "
             "holds is %s at %" PRId64,
             n->id, g, at, w, want_at);
        return;
    }
    kq_voter me;
    voter_of(n, &me);
    if (want && kq_voters_find(want, &me.key) >= 0)
        n->was_voter = true;
    int majority = want ? want->n / 2 + 1 : 1;
    kq_raft_role role = n->st.role;
    /* a candidate is a voter of its set, or was one of the set before the last VotersRecord
     * it holds, which removed it and which it does not know to be committed */
    bool removed_uncommitted = n->n_vx >= 2 && n->st.high_watermark <= want_at &&
                               kq_voters_find(&n->vx[n->n_vx - 2].set, &me.key) >= 0;
    if ((role == KQ_RAFT_CANDIDATE || role == KQ_RAFT_PROSPECTIVE) &&
        (!want || kq_voters_find(want, &me.key) < 0) && !removed_uncommitted) {
        set_str(want, w, sizeof w);
        fail(s, "n%d: %s in epoch %d but not a voter of its set %s", n->id, kq_raft_role_name(role),
             n->st.epoch, w);
        return;
    }
    /* the leader, or one that led this epoch and resigned in this step (the commit of its own
     * removal) */
    bool led =
        role == KQ_RAFT_LEADER || (role == KQ_RAFT_RESIGNED && n->elect_checked == n->st.epoch);
    if (!led || !want)
        return;
    if (role == KQ_RAFT_LEADER && n->elect_checked != n->st.epoch) { /* who elected it */
        n->elect_checked = n->st.epoch;
        int votes = kq_voters_find(want, &me.key) >= 0 ? 1 : 0;
        for (int i = 0; n->grant_epoch == n->st.epoch && i < n->n_grants; i++)
            votes += kq_voters_find(want, &n->grants[i]) >= 0 && !key_is_node(&n->grants[i], n);
        if (votes < majority) {
            set_str(want, w, sizeof w);
            fail(s, "n%d: leader of epoch %d with %d votes of its voter set %s (needs %d)", n->id,
                 n->st.epoch, votes, w, majority);
            return;
        }
        n->hw_checked = n->st.high_watermark;
    }
    int64_t hw = n->st.high_watermark;
    if (hw <= 0 || hw <= n->hw_checked)
        return;
    n->hw_checked = hw;
    int32_t e = log_epoch_at(&n->mlog, hw - 1);
    int have = 0;
    for (int i = 0; i < s->n_nodes; i++)
        for (int j = 0; j < want->n; j++)
            have += key_is_node(&want->v[j].key, &s->nodes[i]) &&
                    log_holds(&s->nodes[i].dlog, hw - 1, e);
    if (have < majority) {
        set_str(want, w, sizeof w);
        fail(s,
             "n%d: leader of epoch %d advanced its HW to %" PRId64 " but only %d of its voters %s "
             "durably store offset %" PRId64 " (epoch %d)",
             n->id, n->st.epoch, hw, have, w, hw - 1, e);
    }
}

/* ---------------------------------------------------------------- forward declarations */

static void node_step(sim *s, sim_node *n, kq_raft_event *ev);
static void host_flush(sim *s, sim_node *n);
static void host_timer(sim *s, sim_node *n, uint64_t deadline);
static void net_send(sim *s, sim_packet *p);
static void check_node(sim *s, sim_node *n);
static void check_leaders(sim *s);
static void lm_record(sim *s, sim_node *n, const sim_batch *b);
static void ctl_after_step(sim *s, sim_node *n, const kq_raft_update *u);
static void ctl_leader_change(sim *s, sim_node *n, int64_t base, kq_buf *payload);
static void ref_advance(sim *s, sim_node *n);
static bool ctl_host_start(sim *s, sim_node *n);
static void ctl_host_free(ctl_host *h);
static void ctl_noop(sim *s, sim_node *n);
static void ctl_maybe_snapshot(sim *s, sim_node *n);
static void ctl_heal(sim *s);
static void ctl_faults(sim *s);
static void ctl_liveness_begin(sim *s);
static void ctl_live_status(sim *s, char *why, size_t len);
static void ctl_final_check(sim *s);
struct ctl_pkt;
static void client_answer(sim *s, const struct ctl_pkt *p);
static bool admin_answer(sim *s, sim_node *n, const kq_raft_msg *m);
struct sim_actor;
static void broker_start(sim *s, struct sim_actor *a);
static void broker_stop(sim *s, struct sim_actor *a, bool graceful, const char *why);
static void broker_meta(sim *s, sim_node *n);

/* How long the process has been stopped in all (its pauses so far, the current one too). */
static uint64_t pause_time(const sim *s, const sim_node *n)
{
    uint64_t cur = 0;
    if (n->pause_from) {
        uint64_t end = n->paused_until < s->now ? n->paused_until : s->now;
        cur = end > n->pause_from ? end - n->pause_from : 0;
    }
    return n->paused_ms + cur;
}

/* The process stops until `until` (a longer stop if it is stopped already). */
static void pause_until(sim *s, sim_node *n, uint64_t until)
{
    if (n->paused_until > s->now) { /* stopped already: the pause lasts longer */
        if (until > n->paused_until)
            n->paused_until = until;
        return;
    }
    n->paused_ms = pause_time(s, n); /* the last pause is over: fold it in */
    n->pause_from = s->now;
    n->paused_until = until;
}

/* A crash ends any pause. */
static void pause_end(sim *s, sim_node *n)
{
    n->paused_ms = pause_time(s, n);
    n->pause_from = 0;
    n->paused_until = 0;
}

static sim_node *node_by_id(sim *s, int32_t id)
{
    for (int i = 0; i < s->n_nodes; i++)
        if (s->nodes[i].id == id)
            return &s->nodes[i];
    return NULL;
}

/* ---------------------------------------------------------------- host: disk */

static void group_free(sim_group *g)
{
    for (size_t i = 0; i < g->n_ops; i++)
        free(g->ops[i].b.data);
    free(g->ops);
    free(g);
}

static void apply_op(sim *s, sim_node *n, const sim_op *op)
{
    switch (op->kind) {
    case OP_QSTATE:
        if (op->q.epoch < n->dq.epoch)
            fail(s, "n%d: durable epoch would go down from %d to %d", n->id, n->dq.epoch,
                 op->q.epoch);
        n->dq = op->q;
        break;
    case OP_TRUNCATE:
        log_truncate(&n->dlog, op->off);
        break;
    case OP_APPEND: /* only durable batches can ever be seen by another node */
        lm_record(s, n, &op->b);
        log_append(s, &n->dlog, &op->b);
        break;
    case OP_PREFIX:
        log_remove_prefix(&n->dlog, op->off);
        break;
    }
}

/* Length of the prefix of the host's current log that is durable: the durable end, capped by
 * any truncation still pending (whose old entries are durable but no longer in the log). */
static void cap_by_truncations(const sim_group *g, int64_t *end)
{
    for (size_t i = 0; g && i < g->n_ops; i++)
        if (g->ops[i].kind == OP_TRUNCATE && g->ops[i].off < *end)
            *end = g->ops[i].off;
}

static int64_t durable_prefix(const sim_node *n)
{
    int64_t end = log_end(&n->dlog);
    for (const sim_group *g = n->gh; g; g = g->next)
        cap_by_truncations(g, &end);
    cap_by_truncations(n->open, &end); /* written since, not synced yet */
    if (end > log_end(&n->mlog))
        end = log_end(&n->mlog);
    return end;
}

/* Batch gid reached the disk: apply it to the durable state, then tell the host (which steps
 * PERSISTED). The host never claims more durable than the disk holds. */
static void disk_done(sim *s, sim_node *n, uint64_t gid)
{
    sim_group *g = n->gh;
    if (!g || g->id != gid) {
        fail(s, "sim: n%d disk completion out of order", n->id);
        return;
    }
    n->gh = g->next;
    if (!n->gh)
        n->gt = NULL;
    for (size_t i = 0; i < g->n_ops; i++)
        apply_op(s, n, &g->ops[i]);
    group_free(g);
    if (s->o.bug == KQ_SIM_BUG_EARLY_ACK)
        return;                     /* already acknowledged by fake_persisted */
    n->host.now = node_clock(s, n); /* the host steps PERSISTED now */
    n->depth++;
    kq_raft_host_durable(&n->host, gid);
    n->depth--;
    trace(s, "n%d > persisted end=%" PRId64, n->id, n->host.durable_end);
    if (n->host.durable_end > durable_prefix(n))
        fail(s, "n%d: the Raft host claims %" PRId64 " durable, the disk holds %" PRId64, n->id,
             n->host.durable_end, durable_prefix(n));
    host_flush(s, n);
}

/* KQ_SIM_BUG_EARLY_ACK: a disk whose sync reports batch gid durable before it is. */
static void fake_persisted(sim *s, sim_node *n, uint64_t gid)
{
    n->host.now = node_clock(s, n);
    n->depth++;
    kq_raft_host_durable(&n->host, gid);
    n->depth--;
    trace(s, "n%d > persisted end=%" PRId64 " (early ack)", n->id, n->host.durable_end);
    host_flush(s, n);
}

/* ---------------------------------------------------------------- host: requests */

static void make_error_resp(kq_raft_msg *m, kq_raft_msg_type req_type, int32_t from, int32_t to,
                            int32_t epoch, int err)
{
    memset(m, 0, sizeof *m);
    m->type = (kq_raft_msg_type)(req_type + 1);
    m->from = from;
    m->to = to;
    m->error = err;
    m->epoch = epoch;
    m->leader_id = KQ_RAFT_NO_ID;
    if (req_type == KQ_RAFT_FETCH_REQ) {
        m->u.fetch_resp.high_watermark = -1;
        m->u.fetch_resp.diverging_epoch = -1;
        m->u.fetch_resp.diverging_end_offset = -1;
    }
}

static long out_find(const sim_node *n, uint64_t req_id)
{
    for (size_t i = 0; i < n->n_outs; i++)
        if (n->outs[i].req_id == req_id)
            return (long)i;
    return -1;
}

static void out_remove(sim_node *n, long i)
{
    n->outs[i] = n->outs[--n->n_outs];
}

/* A response reached the requester's host: deliver it unless the request is already done. */
static void deliver_response(sim *s, sim_node *n, const sim_packet *p)
{
    long i = out_find(n, p->req_id);
    if (i < 0) {
        trace(s, "n%d < %s #%" PRIu64 " from n%d dropped (request already answered)", n->id,
              msg_name(p->msg.type), p->req_id, s->nodes[p->from].id);
        return;
    }
    if ((int)n->outs[i].type + 1 != (int)p->msg.type) {
        fail(s, "sim: n%d got %s for a %s", n->id, msg_name(p->msg.type),
             msg_name(n->outs[i].type));
        return;
    }
    sim_out o = n->outs[i];
    out_remove(n, i);
    sim_decoded d;
    if (!pkt_decode(s, p, &d))
        return;
    if (o.alias)
        d.msg.from = o.alias; /* answered as the bootstrap server the request named */
    if (s->dynamic && d.msg.type == KQ_RAFT_VOTE_RESP && !o.pre_vote && d.msg.error == 0 &&
        d.msg.u.vote_resp.granted) {
        kq_voter_key k = {.id = s->nodes[p->from].id};
        memcpy(k.dir, p->sender_dir, sizeof k.dir);
        vx_grant(n, o.epoch, &k);
    }
    char m[200];
    msg_str(&d.msg, d.msg.type == KQ_RAFT_FETCH_RESP ? d.msg.u.fetch_resp.n_batches : 0, m,
            sizeof m);
    trace(s, "n%d < n%d #%" PRIu64 " %s", n->id, s->nodes[p->from].id, p->req_id, m);
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE};
    ev.u.msg = &d.msg;
    node_step(s, n, &ev);
    decoded_free(&d);
}

static void deliver_request(sim *s, sim_node *n, const sim_packet *p)
{
    sim_decoded d;
    if (!pkt_decode(s, p, &d))
        return;
    if (!grow(s, (void **)&n->ins, &n->cap_ins, n->n_ins + 1, sizeof(sim_in)))
        goto out;
    n->ins[n->n_ins++] = (sim_in){.token = p->req_id,
                                  .type = p->msg.type,
                                  .from = p->from,
                                  .at_ms = s->now,
                                  .paused_at = pause_time(s, n)};
    char m[200];
    msg_str(&d.msg, 0, m, sizeof m);
    trace(s, "n%d < n%d #%" PRIu64 " %s", n->id, s->nodes[p->from].id, p->req_id, m);
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE};
    ev.u.msg = &d.msg;
    node_step(s, n, &ev);
out:
    decoded_free(&d);
}

static void req_timeout(sim *s, sim_node *n, uint64_t req_id)
{
    long i = out_find(n, req_id);
    if (i < 0)
        return;
    sim_out o = n->outs[i];
    out_remove(n, i);
    kq_raft_msg m;
    make_error_resp(&m, o.type, o.alias ? o.alias : s->nodes[o.peer].id, n->id, o.epoch,
                    KQ_ERR_REQUEST_TIMED_OUT);
    trace(s, "n%d < n%d #%" PRIu64 " %s timed out", n->id, s->nodes[o.peer].id, req_id,
          msg_name(o.type));
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE};
    ev.u.msg = &m;
    node_step(s, n, &ev);
}

/* ---------------------------------------------------------------- host: applying an update */

static void payload_leader_change(const sim_node *n, int32_t epoch, uint8_t *buf, size_t *len)
{
    int k = snprintf((char *)buf, 64, "LC leader=n%d epoch=%d", n->id, epoch);
    *len = (size_t)k;
}

/* Gather whole batches in [from, to) from the leader's log into p, within random caps. */
static void fill_fetch(sim *s, sim_node *n, sim_packet *p)
{
    int64_t from = p->msg.u.fetch_resp.records_from, to = p->msg.u.fetch_resp.records_to;
    if (from >= to)
        return;
    long i = log_find(&n->mlog, from);
    if (i < 0 || n->mlog.b[i].base != from) {
        fail(s,
             "n%d: Fetch response records_from=%" PRId64 " is not a batch start in its log "
             "(LEO %" PRId64 ")",
             n->id, from, log_end(&n->mlog));
        return;
    }
    if (to > log_end(&n->mlog)) {
        fail(s, "n%d: Fetch response records_to=%" PRId64 " is beyond its log end %" PRId64, n->id,
             to, log_end(&n->mlog));
        return;
    }
    size_t max_n = (size_t)kq_prng_range(&s->net, 1, s->fetch_cap_batches);
    if (max_n > KQ_RAFT_MAX_BATCHES)
        max_n = KQ_RAFT_MAX_BATCHES;
    p->batches = xcalloc(s, max_n, sizeof(sim_batch));
    if (!p->batches)
        return;
    size_t bytes = 0;
    for (size_t j = (size_t)i; j < n->mlog.n && p->n_batches < max_n; j++) {
        const sim_batch *b = &n->mlog.b[j];
        if (b->base + b->count > to)
            break;
        if (p->n_batches > 0 && bytes + b->len > s->fetch_cap_bytes)
            break;
        if (!batch_dup(s, &p->batches[p->n_batches], b))
            return;
        p->n_batches++;
        bytes += b->len;
    }
}

/* A leader's FetchSnapshot answer names a byte range of one of its snapshots: the bytes, read
 * from the simulated disk (kq-controller's send_snapshot_chunk). A snapshot replaced since is
 * SNAPSHOT_NOT_FOUND, as kq_store_snapshot_read answers. */
static bool fill_snapshot_chunk(sim *s, sim_node *n, sim_packet *p)
{
    if (p->msg.error)
        return true;
    kq_raft_snapshot_id id = p->msg.u.fetch_snapshot_resp.snapshot_id;
    int64_t pos = p->msg.u.fetch_snapshot_resp.position, size = p->msg.u.fetch_snapshot_resp.size;
    size_t len = p->msg.u.fetch_snapshot_resp.len;
    const sim_snap *sn = snap_find(n, id);
    if (!sn) {
        trace(s, "  n%d no longer has snapshot %" PRId64 "/%d", n->id, id.end_offset, id.epoch);
        make_error_resp(&p->msg, KQ_RAFT_FETCH_SNAPSHOT_REQ, n->id, p->msg.to, p->msg.epoch,
                        KQ_ERR_SNAPSHOT_NOT_FOUND);
        p->msg.token = p->req_id;
        return true;
    }
    if (pos < 0 || (size_t)pos + len > sn->len || size != (int64_t)sn->len) {
        fail(s,
             "n%d: FetchSnapshot answer for %" PRId64 "/%d names bytes [%" PRId64 ", +%zu) of "
             "%" PRId64 ", the file has %zu",
             n->id, id.end_offset, id.epoch, pos, len, size, sn->len);
        return false;
    }
    p->chunk = xcalloc(s, len ? len : 1, 1);
    if (!p->chunk)
        return false;
    if (len)
        memcpy(p->chunk, sn->data + pos, len);
    p->msg.u.fetch_snapshot_resp.data = p->chunk;
    return true;
}

static void ins_answer(sim *s, sim_node *n, const kq_raft_msg *m)
{
    for (size_t i = 0; i < n->n_ins; i++) {
        if (n->ins[i].token != m->token)
            continue;
        if ((int)n->ins[i].type + 1 != (int)m->type)
            fail(s, "n%d answered %s #%" PRIu64 " with a %s", n->id, msg_name(n->ins[i].type),
                 m->token, msg_name(m->type));
        int32_t want =
            n->ins[i].from == ADMIN_FROM ? n->ins[i].admin_id : s->nodes[n->ins[i].from].id;
        if (want != m->to)
            fail(s, "n%d sent the response to #%" PRIu64 " to %d, not the requester %d", n->id,
                 m->token, m->to, want);
        n->ins[i] = n->ins[--n->n_ins];
        return;
    }
    fail(s, "n%d emitted a %s with token #%" PRIu64 " that answers no pending request", n->id,
         msg_name(m->type), m->token);
}

/* A message the Raft host sends (after the writes it depends on are durable, or a leader's
 * Fetch answer): checked, encoded, onto the network. */
static void host_emit(sim *s, sim_node *n, const kq_raft_msg *m)
{
    {
        if (s->failed)
            return;
        sim_node *peer = node_by_id(s, m->to);
        int32_t alias = 0; /* a request to bootstrap server i goes to controller i */
        if (!peer && s->dynamic && is_request(m->type) && m->to <= KQ_RAFT_BOOTSTRAP_ID(0) &&
            KQ_RAFT_BOOTSTRAP_ID(0) - m->to < s->n_voters) {
            alias = m->to;
            peer = &s->nodes[KQ_RAFT_BOOTSTRAP_ID(0) - m->to];
        }
        if (!peer && !is_request(m->type) && admin_answer(s, n, m))
            return;
        if (!peer || (peer == n && !alias)) {
            fail(s, "n%d emitted a %s to unknown or own id %d", n->id, msg_name(m->type), m->to);
            return;
        }
        if (m->from != n->id) {
            fail(s, "n%d emitted a %s with from=%d", n->id, msg_name(m->type), m->from);
            return;
        }
        if (m->type == KQ_RAFT_VOTE_REQ &&
            (m->u.vote_req.last_epoch >= m->epoch || m->u.vote_req.last_offset < 0 ||
             m->u.vote_req.candidate_id != n->id)) {
            fail(s,
                 "n%d emitted an invalid VoteReq: epoch %d, candidate %d, last epoch %d, "
                 "last offset %" PRId64 " (needs last epoch < epoch)",
                 n->id, m->epoch, m->u.vote_req.candidate_id, m->u.vote_req.last_epoch,
                 m->u.vote_req.last_offset);
            return;
        }
        sim_packet *p = xcalloc(s, 1, sizeof *p);
        if (!p)
            return;
        p->from = n->idx;
        p->to = peer->idx;
        p->msg = *m;
        p->is_req = is_request(m->type);
        memcpy(p->sender_dir, n->cfg.directory_id, sizeof p->sender_dir);
        if (p->is_req) {
            for (size_t j = 0; j < n->n_outs; j++)
                if (n->outs[j].peer == peer->idx && n->outs[j].type == m->type &&
                    n->outs[j].alias == alias)
                    fail(s, "n%d sent a second %s to n%d while #%" PRIu64 " is in flight", n->id,
                         msg_name(m->type), peer->id, n->outs[j].req_id);
            p->req_id = ++s->next_req_id;
            if (!grow(s, (void **)&n->outs, &n->cap_outs, n->n_outs + 1, sizeof(sim_out))) {
                pkt_free(p);
                return;
            }
            n->outs[n->n_outs++] =
                (sim_out){.req_id = p->req_id,
                          .type = m->type,
                          .peer = peer->idx,
                          .epoch = m->epoch,
                          .alias = alias,
                          .pre_vote = m->type == KQ_RAFT_VOTE_REQ && m->u.vote_req.pre_vote};
            if (peer == n) { /* its own listener, as a bootstrap server: nothing useful */
                p->synthetic = true;
                make_error_resp(&p->msg, m->type, alias, n->id, m->epoch, KQ_ERR_NETWORK_EXCEPTION);
                p->is_req = false;
                trace(s, "  n%d > bootstrap %d is itself #%" PRIu64, n->id, alias, p->req_id);
                sched(s, s->now + kq_prng_range(&s->net, 1, 10), EV_NET, n->idx, 0, 0, p);
                return;
            }
        } else {
            ins_answer(s, n, m);
            p->req_id = m->token;
            if (m->type == KQ_RAFT_FETCH_RESP) {
                p->msg.u.fetch_resp.batches = NULL;
                p->msg.u.fetch_resp.n_batches = 0;
                fill_fetch(s, n, p);
            } else if (m->type == KQ_RAFT_FETCH_SNAPSHOT_RESP && !fill_snapshot_chunk(s, n, p)) {
                pkt_free(p);
                return;
            }
        }
        char str[200];
        msg_str(&p->msg, p->n_batches, str, sizeof str);
        trace(s, "  n%d > n%d #%" PRIu64 " %s", n->id, peer->id, p->req_id, str);
#ifdef KQ_SIM_CODEC
        if (!pkt_encode(s, p)) {
            pkt_free(p);
            return;
        }
#endif
        net_send(s, p);
    }
}

/* Log-matching oracle: the same (offset, epoch) must always carry the same durable batch. */
static void lm_record(sim *s, sim_node *n, const sim_batch *b)
{
    uint64_t h = batch_hash(b);
    for (int64_t off = b->base; off < b->base + b->count; off++) {
        if ((size_t)off >= s->n_lm) {
            size_t need = (size_t)off + 1;
            if (!grow(s, (void **)&s->lm, &s->n_lm, need, sizeof(lm_slot)))
                return;
        }
        lm_slot *sl = &s->lm[off];
        bool found = false;
        for (size_t i = 0; i < sl->n; i++) {
            if (sl->e[i].epoch != b->epoch)
                continue;
            found = true;
            if (sl->e[i].hash != h)
                fail(s,
                     "log matching: n%d wrote offset %" PRId64 " epoch %d with a different "
                     "batch than another node (batch base %" PRId64 ")",
                     n->id, off, b->epoch, b->base);
        }
        if (!found) {
            if (!grow(s, (void **)&sl->e, &sl->cap, sl->n + 1, sizeof(oracle_entry)))
                return;
            sl->e[sl->n++] = (oracle_entry){.epoch = b->epoch, .hash = h};
        }
    }
}

static void host_timer(sim *s, sim_node *n, uint64_t deadline)
{
    if (deadline == 0 || deadline == UINT64_MAX || deadline == n->timer_at)
        return;
    n->timer_at = deadline;
    n->timer_gen++;
    sched(s, node_sim_time(n, deadline), EV_TIMER, n->idx, n->inc, n->timer_gen, NULL);
}

/* ---------------------------------------------------------------- host: the simulated disk */

/* The simulated disk under the Raft host (kq_raft_disk): writes go to the written state (mq,
 * mlog) and into the open batch; commit_start queues the batch, which EV_DISK makes durable
 * (dq, dlog) after the disk's latency, in order. A crash loses what is not durable. */

static sim_op *disk_op(sim *s, sim_node *n)
{
    if (!n->open && !(n->open = xcalloc(s, 1, sizeof *n->open)))
        return NULL;
    sim_group *g = n->open;
    if (!grow(s, (void **)&g->ops, &g->cap_ops, g->n_ops + 1, sizeof(sim_op)))
        return NULL;
    sim_op *op = &g->ops[g->n_ops++];
    memset(op, 0, sizeof *op);
    return op;
}

static int disk_put_qstate(void *ctx, const kq_raft_qstate *q)
{
    sim_node *n = ctx;
    sim *s = n->s;
    if (q->epoch < n->mq.epoch)
        fail(s, "n%d: persists epoch %d below the written epoch %d", n->id, q->epoch, n->mq.epoch);
    if (q->epoch == n->mq.epoch && n->mq.voted_id >= 0 && q->voted_id >= 0 &&
        q->voted_id != n->mq.voted_id)
        fail(s, "n%d: changes its vote in epoch %d from n%d to n%d", n->id, q->epoch,
             n->mq.voted_id, q->voted_id);
    if (q->epoch == n->mq.epoch && n->mq.leader_id >= 0 && q->leader_id >= 0 &&
        q->leader_id != n->mq.leader_id)
        fail(s, "n%d: changes the leader of epoch %d from n%d to n%d", n->id, q->epoch,
             n->mq.leader_id, q->leader_id);
    /* KRaft leaves a known leader's epoch only for a higher epoch (observers excepted: they
     * may drop the leader to rediscover it) */
    if (is_voter_now(n) && q->epoch == n->mq.epoch && n->mq.leader_id >= 0 && q->leader_id < 0)
        fail(s,
             "n%d: persists epoch %d without its leader n%d (a voter may leave a known leader "
             "only for a higher epoch)",
             n->id, q->epoch, n->mq.leader_id);
    trace(s, "  n%d write qstate e%d vote=%d leader=%d", n->id, q->epoch, q->voted_id,
          q->leader_id);
    n->mq = *q;
    sim_op *op = disk_op(s, n);
    if (!op)
        return KQ_ERR_NOMEM;
    *op = (sim_op){.kind = OP_QSTATE, .q = *q};
    return 0;
}

static int disk_truncate(void *ctx, int64_t t)
{
    sim_node *n = ctx;
    sim *s = n->s;
    if (n->max_hw >= 0 && t < n->max_hw)
        fail(s, "n%d: truncates to %" PRId64 ", below its high watermark %" PRId64, n->id, t,
             n->max_hw);
    trace(s, "  n%d write truncate to %" PRId64 " (LEO %" PRId64 ")", n->id, t, log_end(&n->mlog));
    if (!log_truncate(&n->mlog, t))
        fail(s, "n%d: truncation to %" PRId64 " falls inside a batch", n->id, t);
    if (n->oracle_end > t)
        n->oracle_end = t;
    if (s->dynamic)
        vx_truncate(n, t);
    sim_op *op = disk_op(s, n);
    if (!op)
        return KQ_ERR_NOMEM;
    *op = (sim_op){.kind = OP_TRUNCATE, .off = t};
    return 0;
}

static int disk_append(void *ctx, int64_t base, int32_t epoch, int32_t count, const uint8_t *data,
                       size_t len)
{
    sim_node *n = ctx;
    sim *s = n->s;
    int32_t last = n->mlog.n ? n->mlog.b[n->mlog.n - 1].epoch : n->mlog.start_epoch;
    if (base != log_end(&n->mlog))
        fail(s, "n%d: append at %" PRId64 " but the log ends at %" PRId64, n->id, base,
             log_end(&n->mlog));
    else if (count < 1)
        fail(s, "n%d: append of a batch with count %d", n->id, count);
    else if (epoch < last)
        fail(s, "n%d: append of epoch %d after epoch %d", n->id, epoch, last);
    if (s->failed)
        return 0;
    sim_op *op = disk_op(s, n);
    if (!op)
        return KQ_ERR_NOMEM;
    op->kind = OP_APPEND;
    op->b = (sim_batch){.base = base,
                        .epoch = epoch,
                        .count = count,
                        .crc = kq_crc32c(0, data, len),
                        .len = len,
                        .data = xcalloc(s, len ? len : 1, 1)};
    if (!op->b.data)
        return KQ_ERR_NOMEM;
    if (len)
        memcpy(op->b.data, data, len);
    trace(s, "  n%d write batch %" PRId64 "+%d e%d %.*s", n->id, base, count, epoch,
          (int)(len < 24 ? len : 24), (const char *)op->b.data);
    log_append(s, &n->mlog, &op->b);
    if (s->dynamic)
        vx_scan(s, n, base, count, data, len, false);
    return 0;
}

/* The log below a snapshot's end goes (kq_store_delete_prefix): only ever to the latest
 * snapshot on this disk, at a batch boundary. */
static int disk_remove_prefix(void *ctx, int64_t start)
{
    sim_node *n = ctx;
    sim *s = n->s;
    if (!n->voter) /* kq-broker-agent's observer refuses (refuse_compaction): it writes none */
        fail(s, "n%d: an observer is asked to remove its log below %" PRId64, n->id, start);
    else if (start > log_end(&n->mlog))
        fail(s, "n%d: removes the log below %" PRId64 ", beyond its end %" PRId64, n->id, start,
             log_end(&n->mlog));
    else if (start != n->snaps[0].id.end_offset)
        fail(s, "n%d: removes the log below %" PRId64 ", but its latest snapshot ends at %" PRId64,
             n->id, start, n->snaps[0].id.end_offset);
    else if (start > n->mlog.start && log_find(&n->mlog, start) >= 0 &&
             n->mlog.b[log_find(&n->mlog, start)].base != start)
        fail(s, "n%d: removes the log below %" PRId64 ", inside a batch", n->id, start);
    if (s->failed)
        return 0;
    trace(s, "  n%d write remove the log below %" PRId64, n->id, start);
    log_remove_prefix(&n->mlog, start);
    if (n->oracle_end < start)
        n->oracle_end = start;
    sim_op *op = disk_op(s, n);
    if (!op)
        return KQ_ERR_NOMEM;
    *op = (sim_op){.kind = OP_PREFIX, .off = start};
    return 0;
}

/* A fetched chunk of snapshot id, at pos of its .part file (0: a fresh file). */
static int disk_snapshot_chunk(void *ctx, kq_raft_snapshot_id id, int64_t pos, const uint8_t *data,
                               size_t len)
{
    sim_node *n = ctx;
    sim *s = n->s;
    if (pos == 0) {
        snap_free(&n->part);
        n->part.id = id;
    } else if (n->part.id.end_offset != id.end_offset || n->part.id.epoch != id.epoch ||
               (size_t)pos != n->part.len) {
        fail(s,
             "n%d: snapshot chunk of %" PRId64 "/%d at %" PRId64 ", but its .part is %" PRId64
             "/%d with %zu bytes",
             n->id, id.end_offset, id.epoch, pos, n->part.id.end_offset, n->part.id.epoch,
             n->part.len);
        return KQ_ERR_IO;
    }
    if (!grow(s, (void **)&n->part.data, &n->part.cap, n->part.len + len + 1, 1))
        return KQ_ERR_NOMEM;
    if (len)
        memcpy(n->part.data + n->part.len, data, len);
    n->part.len += len;
    trace(s, "  n%d write snapshot %" PRId64 "/%d chunk at %" PRId64 " (%zu bytes)", n->id,
          id.end_offset, id.epoch, pos, len);
    return 0;
}

static void disk_snapshot_abort(void *ctx, kq_raft_snapshot_id id)
{
    sim_node *n = ctx;
    if (n->part.id.end_offset == id.end_offset && n->part.id.epoch == id.epoch) {
        trace(n->s, "  n%d discard snapshot %" PRId64 "/%d .part", n->id, id.end_offset, id.epoch);
        snap_free(&n->part);
    }
}

static bool disk_pending(void *ctx)
{
    return ((sim_node *)ctx)->open != NULL;
}

static int disk_commit(void *ctx)
{
    sim_node *n = ctx;
    fail(n->s, "n%d: a synchronous commit on the asynchronous disk", n->id);
    return KQ_ERR_IO;
}

/* The open batch, number seq, starts syncing: durable after the disk's latency, in order. */
static int disk_commit_start(void *ctx, uint64_t seq)
{
    sim_node *n = ctx;
    sim *s = n->s;
    sim_group *g = n->open;
    n->open = NULL;
    g->id = seq;
    uint64_t lat = s->disk_lat_min + kq_prng_below(&s->disk, s->disk_lat_spread + 1);
    if (!s->liveness && s->p_slow_sync && kq_prng_below(&s->timing, 1000) < s->p_slow_sync) {
        uint64_t slow = kq_prng_range(&s->timing, 200, 3000);
        trace(s, "n%d: a slow sync (+%" PRIu64 " ms)", n->id, slow);
        lat += slow;
    }
    uint64_t at = s->now + lat;
    if (at < n->disk_free_ms)
        at = n->disk_free_ms;
    n->disk_free_ms = at;
    if (n->gt)
        n->gt->next = g;
    else
        n->gh = g;
    n->gt = g;
    sched(s, at, EV_DISK, n->idx, n->inc, seq, NULL);
    if (s->o.bug == KQ_SIM_BUG_EARLY_ACK)
        sched(s, s->now, EV_FAKE_PERSIST, n->idx, n->inc, seq, NULL);
    return 0;
}

/* ---------------------------------------------------------------- host: the Raft host's ops */

static int host_send_request(void *ctx, const kq_raft_msg *m)
{
    sim_node *n = ctx;
    host_emit(n->s, n, m);
    return 0;
}

static void host_send_response(void *ctx, const kq_raft_msg *m)
{
    sim_node *n = ctx;
    host_emit(n->s, n, m);
}

/* This node's own batch: a proposal's payload, or its LeaderChange record. */
static void host_append_own(void *ctx, const kq_raft_batch *b)
{
    sim_node *n = ctx;
    sim *s = n->s;
    uint8_t lc[64];
    kq_buf lcb = {0};
    const uint8_t *data = NULL;
    size_t len = 0;
    switch (b->kind) {
    case KQ_RAFT_BATCH_PROPOSED:
        if (!n->propose_data) {
            fail(s, "n%d: PROPOSED batch outside a PROPOSE step", n->id);
            return;
        }
        data = n->propose_data;
        len = n->propose_len;
        n->propose_data = NULL;
        break;
    case KQ_RAFT_BATCH_LEADER_CHANGE:
    case KQ_RAFT_BATCH_VOTERS:
        if (s->o.controller) { /* the LeaderChange record, then the quorum records (main.c) */
            char why[200];
            if (b->kind == KQ_RAFT_BATCH_LEADER_CHANGE)
                ctl_leader_change(s, n, b->base_offset, &lcb);
            if (!s->failed && kq_control_append_batch(&lcb, b, why, sizeof why) != 0)
                fail(s, "n%d: cannot encode its quorum records: %s", n->id, why);
            data = lcb.data;
            len = lcb.len;
        } else if (b->kind == KQ_RAFT_BATCH_VOTERS) {
            fail(s, "n%d: a Voters batch in a quorum of static voters", n->id);
            return;
        } else {
            payload_leader_change(n, b->epoch, lc, &len);
            data = lc;
        }
        break;
    default:
        fail(s, "n%d: asked to write its own batch of kind %d", n->id, (int)b->kind);
        return;
    }
    if (!s->failed)
        n->host.disk.append(n->host.disk.ctx, b->base_offset, b->epoch, b->count, data, len);
    kq_buf_free(&lcb);
}

static void host_fatal(void *ctx, const char *what, const char *detail)
{
    sim_node *n = ctx;
    fail(n->s, "n%d: %s: %s", n->id, what, detail ? detail : "(no reason)");
}

static bool ctl_load_snapshot(sim *s, sim_node *n, const sim_snap *sn, char *err, size_t errlen);
static bool bm_load_snapshot(sim *s, sim_node *n, const sim_snap *sn, char *err, size_t errlen);

/* A fetched snapshot is complete (kq_store_install_snapshot, then the node loads it): the
 * .part becomes the latest snapshot, the log is reset to start and end at its end, and the
 * controller's or broker's image is replaced by it. Synchronous, like the store's. */
static int host_install_snapshot(void *ctx, kq_raft_snapshot_id id, char *err, size_t errlen)
{
    sim_node *n = ctx;
    sim *s = n->s;
    if (!snap_is(&n->part, id)) {
        fail(s, "n%d: installs snapshot %" PRId64 "/%d, but its .part is %" PRId64 "/%d", n->id,
             id.end_offset, id.epoch, n->part.id.end_offset, n->part.id.epoch);
        return KQ_ERR_IO;
    }
    if (n->open || n->gh)
        fail(s, "n%d: installs snapshot %" PRId64 "/%d while log writes are not durable", n->id,
             id.end_offset, id.epoch);
    if (!s->failed && n->part.len > SNAP_HDR && kq_prng_permille(&s->snapr, s->p_part_damage)) {
        size_t at = (size_t)kq_prng_below(&s->snapr, n->part.len);
        n->part.data[at] ^= 0x5A; /* a damaged .part (a bad disk sector, a torn write) */
        trace(s, "  n%d: its .part of %" PRId64 "/%d is damaged at byte %zu", n->id, id.end_offset,
              id.epoch, at);
    }
    if (!s->failed && !snap_valid(&n->part)) {
        trace(s, "  n%d snapshot %" PRId64 "/%d .part is damaged: discarded", n->id, id.end_offset,
              id.epoch);
        snprintf(err, errlen, "snapshot %" PRId64 "-%d: damaged", id.end_offset, id.epoch);
        snap_free(&n->part);
        return KQ_ERR_CORRUPT_MESSAGE;
    }
    if (n->max_hw > id.end_offset)
        fail(s, "n%d: installs snapshot %" PRId64 "/%d below its high watermark %" PRId64, n->id,
             id.end_offset, id.epoch, n->max_hw);
    if (s->failed)
        return KQ_ERR_IO;
    trace(s, "  n%d install snapshot %" PRId64 "/%d (%zu bytes): the log starts and ends there",
          n->id, id.end_offset, id.epoch, n->part.len);
    s->res->snapshots_installed++;
    snap_keep(n, &n->part);
    log_reset(&n->mlog, id.end_offset, id.epoch);
    log_reset(&n->dlog, id.end_offset, id.epoch);
    if (n->oracle_end < id.end_offset)
        n->oracle_end = id.end_offset;
    bool ok = n->voter ? ctl_load_snapshot(s, n, &n->snaps[0], err, errlen)
                       : bm_load_snapshot(s, n, &n->snaps[0], err, errlen);
    if (!ok)
        fail(s, "n%d: cannot load the snapshot it installed: %s", n->id, err);
    if (ok && s->dynamic) { /* its quorum records, for the core (installed_control) */
        const sim_snap *sn = &n->snaps[0];
        kq_control_list_free(&n->installed);
        if (kq_control_list_add_snapshot(&n->installed, id.end_offset, sn->data + SNAP_HDR,
                                         sn->len - SNAP_HDR, err, errlen) != 0)
            fail(s, "n%d: the quorum records of the snapshot it installed: %s", n->id, err);
        vx_rebuild(s, n);
    }
    return s->failed ? KQ_ERR_CORRUPT_MESSAGE : 0;
}

static void host_after_step(void *ctx, const kq_raft_update *u);

static kq_raft_disk sim_disk(sim_node *n)
{
    return (kq_raft_disk){.ctx = n,
                          .put_qstate = disk_put_qstate,
                          .truncate = disk_truncate,
                          .append = disk_append,
                          .remove_prefix = disk_remove_prefix,
                          .snapshot_chunk = disk_snapshot_chunk,
                          .snapshot_abort = disk_snapshot_abort,
                          .pending = disk_pending,
                          .commit = disk_commit,
                          .commit_start = disk_commit_start};
}

static kq_raft_host_ops sim_host_ops(sim_node *n)
{
    return (kq_raft_host_ops){.ctx = n,
                              .send_request = host_send_request,
                              .send_response = host_send_response,
                              .append_own = host_append_own,
                              .after_step = host_after_step,
                              .install_snapshot = host_install_snapshot,
                              .fetched_control = n->s->dynamic ? host_fetched_control : NULL,
                              .installed_control = n->s->dynamic ? host_installed_control : NULL,
                              .fatal = host_fatal};
}

/* After every step of the core, with its update applied by the host: the checks. */
static void host_after_step(void *ctx, const kq_raft_update *u)
{
    sim_node *n = ctx;
    sim *s = n->s;
    if (s->failed)
        return;
    if (u->role_changed)
        trace(s, "  n%d role %s e%d leader=%d", n->id, kq_raft_role_name(u->role), u->epoch,
              u->leader_id);
    if (u->hw_changed)
        trace(s, "  n%d hw %" PRId64, n->id, u->high_watermark);
    if (n->step == KQ_RAFT_EV_PROPOSE) {
        bool leader = n->st.role == KQ_RAFT_LEADER; /* before the step (check_node follows) */
        n->step = KQ_RAFT_EV_TICK;                  /* checked once */
        n->last_propose_base = u->propose_base_offset;
        n->last_propose_epoch = u->propose_epoch;
        n->last_propose_err = u->propose_error;
        if (u->propose_error == 0) {
            bool found = false;
            for (size_t i = 0; i < u->n_append; i++)
                found |= u->append[i].kind == KQ_RAFT_BATCH_PROPOSED &&
                         u->append[i].base_offset == u->propose_base_offset &&
                         u->append[i].epoch == u->propose_epoch &&
                         u->append[i].count == n->step_count;
            if (!found)
                fail(s, "n%d: PROPOSE accepted at %" PRId64 " e%d without appending the batch",
                     n->id, u->propose_base_offset, u->propose_epoch);
            else
                trace(s, "  n%d proposed at %" PRId64 " e%d", n->id, u->propose_base_offset,
                      u->propose_epoch);
        } else {
            trace(s, "  n%d propose refused: %s", n->id, kq_err_name(u->propose_error));
        }
        if (!leader && u->propose_error == 0)
            fail(s, "n%d: accepted a proposal as %s", n->id, kq_raft_role_name(n->st.role));
        if (leader && u->propose_error != 0)
            fail(s, "n%d: leader refused a proposal: %s", n->id, kq_err_name(u->propose_error));
    }
    host_timer(s, n, u->next_deadline_ms);
    check_node(s, n);
    if (s->dynamic && !s->failed)
        vx_check(s, n);
    check_leaders(s);
    if (s->o.controller && !s->failed)
        ctl_after_step(s, n, u);
    if (n->actor >= 0 && !s->failed)
        broker_meta(s, n);
}

/* After an event: the leader's Fetch answers, then commit and send what is durable (the
 * order of controller/main.c's loop). Not inside a step. */
static void host_flush(sim *s, sim_node *n)
{
    if (n->depth > 0 || s->failed || !n->up)
        return;
    n->depth++;
    kq_raft_host_send_fetch_answers(&n->host);
    kq_raft_host_flush(&n->host);
    n->depth--;
    if (s->o.controller && n->voter)
        ctl_maybe_snapshot(s, n);
}

static void node_step(sim *s, sim_node *n, kq_raft_event *ev)
{
    if (s->failed || !n->up)
        return;
    n->host.now = node_clock(s, n);
    n->step = ev->type;
    n->step_count = ev->type == KQ_RAFT_EV_PROPOSE ? ev->u.propose_count : 0;
    n->depth++;
    int rc = kq_raft_host_step(&n->host, ev, NULL);
    n->depth--;
    n->propose_data = NULL;
    if (rc) {
        fail(s, "n%d: kq_raft_step rejected event %d: %s", n->id, (int)ev->type, kq_err_name(rc));
        return;
    }
    host_flush(s, n);
}

/* ---------------------------------------------------------------- network */

static void net_send(sim *s, sim_packet *p)
{
    link *l = &s->links[p->from][p->to];
    const char *why = NULL;
    if (p->is_req) { /* the request leaves the host: its timeout starts now */
        sim_node *n = &s->nodes[p->from];
        sched(s, s->now + n->cfg.request_timeout_ms, EV_REQ_TIMEOUT, n->idx, n->inc, p->req_id,
              NULL);
    }
    if (l->blocked)
        why = "partition";
    else if (kq_prng_permille(&s->net, l->loss_pm))
        why = "loss";
    if (why) {
        trace(s, "  net drop n%d>n%d #%" PRIu64 " %s (%s)", s->nodes[p->from].id,
              s->nodes[p->to].id, p->req_id, msg_name(p->msg.type), why);
        pkt_free(p);
        return;
    }
    int copies = kq_prng_permille(&s->net, l->dup_pm) ? 2 : 1;
    for (int c = 0; c < copies; c++) {
        sim_packet *q = c == 0 ? p : pkt_dup(s, p);
        if (!q)
            return;
        uint64_t t = s->now + l->lat_min_ms + kq_prng_below(&s->net, l->lat_spread_ms + 1);
        if (kq_prng_permille(&s->net, l->reorder_pm))
            t += kq_prng_below(&s->net, 300);
        if (t < l->clog_until)
            t = l->clog_until + kq_prng_below(&s->net, 20);
        sched(s, t, EV_NET, p->to, 0, 0, q);
    }
}

static void net_deliver(sim *s, sim_packet *p)
{
    sim_node *n = &s->nodes[p->to];
    if (!n->up) {
        if (p->is_req && kq_prng_permille(&s->net, 500)) {
            /* the sender's transport notices the dead peer */
            sim_packet *e = xcalloc(s, 1, sizeof *e);
            if (!e)
                return;
            e->from = p->to;
            e->to = p->from;
            e->req_id = p->req_id;
            e->synthetic = true;
            make_error_resp(&e->msg, p->msg.type, n->id, s->nodes[p->from].id, p->msg.epoch,
                            KQ_ERR_NETWORK_EXCEPTION);
            sched(s, s->now + kq_prng_range(&s->net, 1, 10), EV_NET, e->to, 0, 0, e);
        }
        trace(s, "net n%d>n%d #%" PRIu64 " %s: n%d is down", s->nodes[p->from].id, n->id, p->req_id,
              msg_name(p->msg.type), n->id);
        return;
    }
    if (p->synthetic) {
        long i = out_find(n, p->req_id);
        if (i < 0)
            return;
        if (n->outs[i].alias)
            p->msg.from = n->outs[i].alias;
        out_remove(n, i);
        trace(s, "n%d < n%d #%" PRIu64 " %s", n->id, s->nodes[p->from].id, p->req_id,
              "network exception");
        kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE};
        ev.u.msg = &p->msg;
        node_step(s, n, &ev);
        return;
    }
    if (p->is_req)
        deliver_request(s, n, p);
    else
        deliver_response(s, n, p);
}

/* ---------------------------------------------------------------- checkers */

static bool oracle_put(sim *s, sim_node *n, int64_t off, int32_t epoch, uint64_t h)
{
    if ((size_t)off >= s->n_committed) {
        size_t old = s->cap_committed;
        if (!grow(s, (void **)&s->committed, &s->cap_committed, (size_t)off + 1,
                  sizeof(oracle_entry)))
            return false;
        size_t cap = old;
        if (!grow(s, (void **)&s->committed_set, &cap, s->cap_committed, sizeof(bool)))
            return false;
        s->n_committed = s->cap_committed;
    }
    if (!s->committed_set[off]) {
        s->committed_set[off] = true;
        s->committed[off] = (oracle_entry){.epoch = epoch, .hash = h};
        s->res->commits_checked++;
        return true;
    }
    if (s->committed[off].epoch != epoch || s->committed[off].hash != h) {
        fail(s,
             "committed prefix changed: n%d has offset %" PRId64 " below its HW as epoch %d, "
             "but epoch %d was committed there first",
             n->id, off, epoch, s->committed[off].epoch);
        return false;
    }
    return true;
}

static void check_node(sim *s, sim_node *n)
{
    if (!n->up || s->failed)
        return;
    kq_raft_status *st = &n->st;
    kq_raft_get_status(n->r, st);
    if (st->epoch > s->res->last_epoch)
        s->res->last_epoch = st->epoch;
    if (st->epoch < n->max_epoch)
        fail(s, "n%d: epoch went down from %d to %d", n->id, n->max_epoch, st->epoch);
    n->max_epoch = st->epoch;
    if (st->role != KQ_RAFT_RESIGNED && st->role != KQ_RAFT_PROSPECTIVE && st->epoch != n->mq.epoch)
        fail(s, "n%d: in-memory epoch %d differs from the persisted epoch %d as %s", n->id,
             st->epoch, n->mq.epoch, kq_raft_role_name(st->role));
    if (st->log_end_offset != log_end(&n->mlog))
        fail(s, "n%d: core LEO %" PRId64 " differs from the host log end %" PRId64, n->id,
             st->log_end_offset, log_end(&n->mlog));
    /* (skipped when the host itself lies about durability: the protocol checks must fire) */
    if (st->durable_end_offset > log_end(&n->dlog) && s->o.bug != KQ_SIM_BUG_EARLY_ACK)
        fail(s, "n%d: core thinks %" PRId64 " is durable, the disk holds %" PRId64, n->id,
             st->durable_end_offset, log_end(&n->dlog));
    if ((st->role == KQ_RAFT_LEADER || st->role == KQ_RAFT_CANDIDATE ||
         st->role == KQ_RAFT_PROSPECTIVE) &&
        !n->voter)
        fail(s, "n%d: an observer became %s", n->id, kq_raft_role_name(st->role));
    /* one leader per epoch, and everyone agrees who it is */
    int32_t claimed = st->role == KQ_RAFT_LEADER ? n->id : st->leader_id;
    if (st->role == KQ_RAFT_LEADER && st->leader_id != n->id && st->leader_id != KQ_RAFT_NO_ID)
        fail(s, "n%d: leader of epoch %d names n%d as leader", n->id, st->epoch, st->leader_id);
    if (claimed != KQ_RAFT_NO_ID && st->epoch >= 0) {
        size_t e = (size_t)st->epoch;
        if (e >= s->n_epoch_leader) {
            size_t old = s->n_epoch_leader;
            if (!grow(s, (void **)&s->epoch_leader, &s->n_epoch_leader, e + 1, sizeof(int32_t)))
                return;
            for (size_t i = old; i < s->n_epoch_leader; i++)
                s->epoch_leader[i] = KQ_RAFT_NO_ID;
        }
        if (s->epoch_leader[e] == KQ_RAFT_NO_ID) {
            s->epoch_leader[e] = claimed;
        } else if (s->epoch_leader[e] != claimed) {
            fail(s, "two leaders in epoch %d: n%d and n%d (seen by n%d as %s)", st->epoch,
                 s->epoch_leader[e], claimed, n->id, kq_raft_role_name(st->role));
            return;
        }
    }
    /* high watermark: monotonic per incarnation, never above the log, prefix never changes */
    int64_t hw = st->high_watermark;
    if (hw >= 0) {
        if (hw < n->max_hw)
            fail(s, "n%d: high watermark went down from %" PRId64 " to %" PRId64 " as %s", n->id,
                 n->max_hw, hw, kq_raft_role_name(st->role));
        n->max_hw = hw;
        if (hw > log_end(&n->mlog)) {
            fail(s, "n%d: high watermark %" PRId64 " above its log end %" PRId64, n->id, hw,
                 log_end(&n->mlog));
            return;
        }
        while (n->oracle_end < hw && !s->failed) {
            long i = log_find(&n->mlog, n->oracle_end);
            if (i < 0) {
                fail(s, "n%d: offset %" PRId64 " below HW %" PRId64 " is missing", n->id,
                     n->oracle_end, hw);
                return;
            }
            const sim_batch *b = &n->mlog.b[i];
            uint64_t h = batch_hash(b);
            for (int64_t off = n->oracle_end; off < b->base + b->count && off < hw; off++)
                if (!oracle_put(s, n, off, b->epoch, h))
                    return;
            n->oracle_end = b->base + b->count < hw ? b->base + b->count : hw;
        }
    }
    if (s->o.controller)
        ref_advance(s, n);
}

/* Every node that believes it leads: a majority of voters durably holds all below its HW. */
static void check_leaders(sim *s)
{
    if (s->dynamic)
        return; /* the voter set changes: vx_check, at every advance of a high watermark */
    for (int i = 0; i < s->n_nodes && !s->failed; i++) {
        sim_node *l = &s->nodes[i];
        if (!l->up || l->st.role != KQ_RAFT_LEADER || l->st.high_watermark <= 0)
            continue;
        int64_t last = l->st.high_watermark - 1;
        int32_t e = log_epoch_at(&l->mlog, last);
        int have = 0;
        for (int v = 0; v < s->n_nodes; v++)
            if (s->nodes[v].voter && log_holds(&s->nodes[v].dlog, last, e))
                have++;
        if (have < s->n_voters / 2 + 1)
            fail(s,
                 "n%d: leader of epoch %d has HW %" PRId64 " but only %d of %d voters durably "
                 "store offset %" PRId64 " (epoch %d)",
                 l->id, l->st.epoch, l->st.high_watermark, have, s->n_voters, last, e);
    }
}

/* Requests a core has sat on for too long break "exactly one response" (the time its process
 * was stopped does not count: a paused process answers nothing). */
static void check_unanswered(sim *s)
{
    for (int i = 0; i < s->n_nodes; i++) {
        sim_node *n = &s->nodes[i];
        for (size_t j = 0; n->up && j < n->n_ins; j++)
            if (s->now - n->ins[j].at_ms - (pause_time(s, n) - n->ins[j].paused_at) >
                UNANSWERED_MAX_MS)
                fail(s, "n%d never answered %s #%" PRIu64 " from %d received at %" PRIu64 "ms",
                     n->id, msg_name(n->ins[j].type), n->ins[j].token,
                     n->ins[j].from == ADMIN_FROM ? n->ins[j].admin_id
                                                  : s->nodes[n->ins[j].from].id,
                     n->ins[j].at_ms);
    }
}

/* ---------------------------------------------------------------- node lifecycle */

static void node_clear_volatile(sim_node *n)
{
    if (n->open)
        group_free(n->open);
    n->open = NULL;
    while (n->gh) {
        sim_group *g = n->gh;
        n->gh = g->next;
        group_free(g);
    }
    n->gt = NULL;
    n->n_outs = 0;
    n->n_ins = 0;
    if (n->r) {
        kq_raft_host_free(&n->host);
        kq_raft_free(n->r);
    }
    n->r = NULL;
    ctl_host_free(&n->ch);
    if (n->bm_on)
        kq_bmeta_free(&n->bm);
    n->bm_on = false;
    n->up = false;
    n->stopping = false;
}

static void node_start(sim *s, sim_node *n)
{
    if (n->up)
        return;
    /* kq_store_open's snapshot fix-up: a durable log that ends below the latest snapshot (a
     * crash that lost synced batches, --bug lose-synced) is reset to start at the snapshot */
    if (n->snaps[0].id.end_offset > log_end(&n->dlog)) {
        trace(s, "n%d: log ends at %" PRId64 ", below snapshot %" PRId64 "/%d: reset to it", n->id,
              log_end(&n->dlog), n->snaps[0].id.end_offset, n->snaps[0].id.epoch);
        log_reset(&n->dlog, n->snaps[0].id.end_offset, n->snaps[0].id.epoch);
    }
    char err[200] = "";
    kq_raft_config cfg = n->cfg;
    n->inc++;
    cfg.seed = n->core_seed ^ (n->inc * 0x9E3779B97F4A7C15ull);
    n->r = kq_raft_new(&cfg, err, sizeof err);
    if (!n->r) {
        fail(s, "n%d: kq_raft_new failed: %s", n->id, err);
        return;
    }
    kq_raft_disk disk = sim_disk(n);
    kq_raft_host_ops ops = sim_host_ops(n);
    if (kq_raft_host_init(&n->host, n->r, &disk, &ops) != 0) {
        kq_raft_free(n->r);
        n->r = NULL;
        fail(s, "n%d: out of memory", n->id);
        return;
    }
    n->host.durable_end = log_end(&n->dlog);
    n->up = true;
    n->mq = n->dq;
    if (!log_copy(s, &n->mlog, &n->dlog))
        return;
    n->disk_free_ms = s->now;
    n->timer_at = 0;
    n->timer_gen++;
    n->max_epoch = -1;
    n->max_hw = -1;
    n->oracle_end = n->dlog.start; /* below it: the snapshot's, checked by the image hashes */
    n->ticks_same_ms = 0;
    memset(&n->st, 0, sizeof n->st);
    n->st.role = KQ_RAFT_UNATTACHED;

    /* the epoch cache as kq_store_recover reads it: an empty log that starts at a snapshot
     * has the snapshot's epoch at its start. (After an install or a compaction the store can
     * also keep that entry in front of a newer epoch starting at the same offset; the core
     * answers the same either way.) */
    kq_epoch_entry *epochs = xcalloc(s, n->dlog.n + 1, sizeof *epochs);
    if (!epochs)
        return;
    size_t ne = 0;
    if (n->dlog.n == 0 && n->dlog.start > 0)
        epochs[ne++] =
            (kq_epoch_entry){.epoch = n->dlog.start_epoch, .start_offset = n->dlog.start};
    for (size_t i = 0; i < n->dlog.n; i++)
        if (ne == 0 || epochs[ne - 1].epoch != n->dlog.b[i].epoch)
            epochs[ne++] =
                (kq_epoch_entry){.epoch = n->dlog.b[i].epoch, .start_offset = n->dlog.b[i].base};
    if (s->o.controller && n->voter && !ctl_host_start(s, n)) {
        free(epochs);
        return;
    }
    if (n->actor >= 0) { /* a broker process starts with an empty image, replayed from its log */
        if (kq_bmeta_init(&n->bm) != 0) {
            free(epochs);
            fail(s, "out of memory");
            return;
        }
        n->bm_on = true;
        n->bm_seen_end = 0;
    }
    /* the latest snapshot on disk is the image's start (kq-controller's and kq-broker-agent's
     * recovery); a log that starts above it would leave a gap: they refuse to start */
    const sim_snap *sn = &n->snaps[0];
    if (sn->id.end_offset > 0) {
        err[0] = 0;
        bool ok = n->voter ? !s->o.controller || ctl_load_snapshot(s, n, sn, err, sizeof err)
                           : !n->bm_on || bm_load_snapshot(s, n, sn, err, sizeof err);
        if (!ok)
            fail(s, "n%d: cannot load its snapshot %" PRId64 "/%d at start: %s", n->id,
                 sn->id.end_offset, sn->id.epoch, err);
    }
    if (n->dlog.start > sn->id.end_offset)
        fail(s, "n%d: its log starts at %" PRId64 " but its latest snapshot ends at %" PRId64,
             n->id, n->dlog.start, sn->id.end_offset);
    if (s->failed) {
        free(epochs);
        return;
    }
    kq_raft_event ev = {.type = KQ_RAFT_EV_START};
    ev.u.start.qstate = n->dq;
    ev.u.start.log_start_offset = n->dlog.start;
    ev.u.start.log_start_epoch = n->dlog.start_epoch;
    ev.u.start.log_end_offset = log_end(&n->dlog);
    ev.u.start.epochs = epochs;
    ev.u.start.n_epochs = ne;
    ev.u.start.snapshot = sn->id;
    ev.u.start.snapshot_size = (int64_t)sn->len;
    kq_control_list control = {0};
    if (s->dynamic && n->voter && n->was_voter) { /* a removed voter back, older epoch */
        for (int i = 0; i < s->n_voters; i++) {
            const sim_node *l = &s->nodes[i];
            int64_t lat;
            const kq_voter_set *ls = l->up ? vx_top(l, &lat) : NULL;
            kq_voter me;
            voter_of(n, &me);
            if (l != n && ls && l->st.role == KQ_RAFT_LEADER && l->st.epoch > n->dq.epoch &&
                kq_voters_find(ls, &me.key) < 0) {
                trace(s, "n%d: a removed voter starts at epoch %d, leader n%d is at e%d", n->id,
                      n->dq.epoch, l->id, l->st.epoch);
                s->res->removed_starts++;
            }
        }
    }
    if (s->dynamic) {
        n->grant_epoch = -1;
        n->n_grants = 0;
        n->elect_checked = -1;
        n->hw_checked = -1;
        vx_rebuild(s, n);
        if (!start_control(s, n, &control)) {
            kq_control_list_free(&control);
            free(epochs);
            return;
        }
        ev.u.start.control = control.c;
        ev.u.start.n_control = control.n;
    }
    trace(s, "n%d > start #%" PRIu64 " qstate e%d vote=%d leader=%d LEO %" PRId64 " epochs %zu",
          n->id, n->inc, n->dq.epoch, n->dq.voted_id, n->dq.leader_id, log_end(&n->dlog), ne);
    node_step(s, n, &ev);
    kq_control_list_free(&control);
    free(epochs);
}

static void node_crash(sim *s, sim_node *n, bool graceful)
{
    if (!n->up)
        return;
    if (graceful) { /* a clean shutdown lets the disk finish, the open batch too */
        if (n->open) {
            if (n->gt)
                n->gt->next = n->open;
            else
                n->gh = n->open;
            n->gt = n->open;
            n->open = NULL;
        }
        while (n->gh) {
            sim_group *g = n->gh;
            n->gh = g->next;
            for (size_t i = 0; i < g->n_ops; i++)
                apply_op(s, n, &g->ops[i]);
            group_free(g);
        }
    } else {
        size_t in_flight = 0;
        for (const sim_group *g = n->gh; g; g = g->next)
            in_flight++;
        if (in_flight && s->p_torn && kq_prng_below(&s->timing, 1000) < s->p_torn) {
            /* the disk had written some of what was in flight, in order, though no sync had
             * returned (LMDB: a transaction is all there or not at all) */
            size_t keep = (size_t)kq_prng_range(&s->timing, 1, in_flight);
            for (size_t k = 0; k < keep; k++) {
                sim_group *g = n->gh;
                n->gh = g->next;
                for (size_t i = 0; i < g->n_ops; i++)
                    apply_op(s, n, &g->ops[i]);
                group_free(g);
            }
            if (!n->gh)
                n->gt = NULL;
            trace(s, "n%d: %zu of %zu writes in flight reached the disk before the crash", n->id,
                  keep, in_flight);
        }
        if (s->o.bug == KQ_SIM_BUG_LOSE_SYNCED && n->dlog.n)
            log_truncate(&n->dlog, n->dlog.b[n->dlog.n - 1].base);
    }
    snap_free(&n->part); /* kq_store_open removes .part files: the fetch starts again */
    pause_end(s, n);
    trace(s, "n%d > %s (pending writes dropped: %s)", n->id, graceful ? "stop" : "CRASH",
          n->gh ? "yes" : "none");
    node_clear_volatile(n);
    log_truncate(&n->mlog, 0);
    s->res->crashes++;
    if (!s->liveness && n->actor < 0) /* a broker's observer restarts with the broker */
        sched(s, s->now + kq_prng_range(&s->fault, 200, 8000), EV_START, n->idx, 0, 0, NULL);
}

/* ---------------------------------------------------------------- workload and faults */

static void propose(sim *s, sim_node *n)
{
    if (s->o.controller) {
        ctl_noop(s, n);
        return;
    }
    uint8_t buf[160];
    int32_t count = (int32_t)kq_prng_range(&s->work, 1, 5);
    int k = snprintf((char *)buf, sizeof buf, "P n%d s%" PRIu64 " c%d ", n->id, ++n->propose_seq,
                     count);
    size_t len = (size_t)k + kq_prng_below(&s->work, 64);
    for (size_t i = (size_t)k; i < len; i++)
        buf[i] = (uint8_t)('a' + (i * 7 + n->propose_seq) % 26);
    n->propose_data = buf;
    n->propose_len = len;
    trace(s, "n%d > propose %d records (%s)", n->id, count, kq_raft_role_name(n->st.role));
    kq_raft_event ev = {.type = KQ_RAFT_EV_PROPOSE};
    ev.u.propose_count = count;
    node_step(s, n, &ev);
    n->propose_data = NULL;
}

static void workload(sim *s)
{
    if (s->o.controller)
        return; /* the brokers and the admin client are the workload */
    for (int i = 0; i < s->n_nodes && !s->failed; i++) {
        sim_node *n = &s->nodes[i];
        if (!n->up)
            continue;
        if (n->st.role == KQ_RAFT_LEADER ? kq_prng_permille(&s->work, 800)
                                         : kq_prng_permille(&s->work, 20))
            propose(s, n);
    }
    sched(s, s->now + kq_prng_range(&s->work, 1, 2 * s->workload_every_ms), EV_WORKLOAD, -1, 0, 0,
          NULL);
}

static void heal(sim *s)
{
    for (int a = 0; a < s->n_nodes; a++)
        for (int b = 0; b < s->n_nodes; b++) {
            s->links[a][b].blocked = false;
            s->links[a][b].clog_until = 0;
        }
    if (s->o.controller)
        ctl_heal(s);
    trace(s, "net heal");
}

static void partition(sim *s)
{
    heal(s);
    int mode = (int)kq_prng_below(&s->fault, 4);
    int victim = (int)kq_prng_below(&s->fault, (uint64_t)s->n_nodes);
    bool side[MAX_NODES];
    for (int i = 0; i < s->n_nodes; i++)
        side[i] = kq_prng_permille(&s->fault, 500);
    char desc[64];
    for (int a = 0; a < s->n_nodes; a++)
        for (int b = 0; b < s->n_nodes; b++) {
            bool block = false;
            switch (mode) {
            case 0: /* split in two groups */
                block = side[a] != side[b];
                break;
            case 1: /* isolate one node */
                block = a == victim || b == victim;
                break;
            case 2: /* one node can send but not receive */
                block = b == victim;
                break;
            default: /* one-way: group A cannot reach group B */
                block = side[a] && !side[b];
                break;
            }
            if (a != b)
                s->links[a][b].blocked = block;
        }
    static const char *names[] = {"split", "isolate", "deaf", "one-way"};
    int k = snprintf(desc, sizeof desc, "%s n%d {", names[mode], s->nodes[victim].id);
    for (int i = 0; i < s->n_nodes && k < (int)sizeof desc - 4; i++)
        if (side[i])
            k += snprintf(desc + k, sizeof desc - (size_t)k, " n%d", s->nodes[i].id);
    trace(s, "net partition %s }", desc);
    sched(s, s->now + kq_prng_range(&s->fault, 500, 10000), EV_HEAL, -1, 0, 0, NULL);
}

static int pick_node(sim *s, bool up)
{
    int cand[MAX_NODES], n = 0;
    for (int i = 0; i < s->n_nodes; i++) /* brokers crash as processes (ctl_faults) */
        if (s->nodes[i].up == up && !s->nodes[i].stopping && s->nodes[i].actor < 0)
            cand[n++] = i;
    return n ? cand[kq_prng_below(&s->fault, (uint64_t)n)] : -1;
}

/* A process stops (SIGSTOP, a VM pause, a long GC-like stall) for a while, sometimes longer
 * than the broker session timeout: what arrives for it waits until it runs again. */
static void pause_process(sim *s)
{
    int cand[MAX_NODES], k = 0;
    for (int i = 0; i < s->n_nodes; i++)
        if (s->nodes[i].up && s->nodes[i].paused_until <= s->now)
            cand[k++] = i;
    if (!k)
        return;
    sim_node *n = &s->nodes[cand[kq_prng_below(&s->timing, (uint64_t)k)]];
    uint64_t d = kq_prng_permille(&s->timing, 500)
                     ? kq_prng_range(&s->timing, 50, 2000)
                     : kq_prng_range(&s->timing, SESSION_TIMEOUT_MS, 2 * SESSION_TIMEOUT_MS);
    pause_until(s, n, s->now + d);
    trace(s, "%s%d > PAUSE for %" PRIu64 " ms", n->actor >= 0 ? "b" : "n", n->id, d);
}

static void fault_tick(sim *s)
{
    uint32_t r = (uint32_t)kq_prng_below(&s->fault, 1000);
    int i;
    if (r < s->p_crash) {
        if ((i = pick_node(s, true)) >= 0)
            node_crash(s, &s->nodes[i], false);
    } else if ((r -= s->p_crash) < s->p_restart) {
        if ((i = pick_node(s, false)) >= 0)
            node_start(s, &s->nodes[i]);
    } else if ((r -= s->p_restart) < s->p_graceful) {
        /* prefer the leader: graceful resignation is what EndQuorumEpoch is for */
        i = -1;
        for (int j = 0; j < s->n_voters; j++)
            if (s->nodes[j].up && !s->nodes[j].stopping && s->nodes[j].st.role == KQ_RAFT_LEADER)
                i = j;
        if (i < 0)
            i = pick_node(s, true);
        if (i >= 0) {
            sim_node *n = &s->nodes[i];
            n->stopping = true;
            trace(s, "n%d > resign (graceful shutdown)", n->id);
            kq_raft_event ev = {.type = KQ_RAFT_EV_RESIGN};
            node_step(s, n, &ev);
            sched(s, s->now + kq_prng_range(&s->fault, 50, 1500), EV_GRACE_STOP, n->idx, n->inc, 0,
                  NULL);
        }
    } else if ((r -= s->p_graceful) < s->p_partition) {
        partition(s);
    } else if ((r -= s->p_partition) < s->p_heal) {
        heal(s);
    } else if ((r -= s->p_heal) < s->p_clog) {
        int a = (int)kq_prng_below(&s->fault, (uint64_t)s->n_nodes);
        int b = (int)kq_prng_below(&s->fault, (uint64_t)s->n_nodes);
        uint64_t d = kq_prng_range(&s->fault, 100, 3000);
        s->links[a][b].clog_until = s->now + d;
        trace(s, "net clog n%d>n%d for %" PRIu64 "ms", s->nodes[a].id, s->nodes[b].id, d);
    }
    if (s->o.controller)
        ctl_faults(s);
    if (s->p_pause && kq_prng_below(&s->timing, 1000) < s->p_pause)
        pause_process(s);
    sched(s, s->now + kq_prng_range(&s->fault, 1, 2 * s->fault_every_ms), EV_FAULT, -1, 0, 0, NULL);
}

/* ---------------------------------------------------------------- liveness phase */

static void liveness_begin(sim *s)
{
    s->liveness = true;
    trace(s, "=== liveness phase: faults stop, network heals, crashed nodes restart ===");
    heal(s);
    for (int a = 0; a < s->n_nodes; a++)
        for (int b = 0; b < s->n_nodes; b++) {
            s->links[a][b].loss_pm = 0;
            s->links[a][b].dup_pm = 0;
        }
    for (int i = 0; i < s->n_nodes; i++) {
        sim_node *n = &s->nodes[i];
        if (n->up && n->stopping)
            node_crash(s, n, true);
        if (!n->up)
            sched(s, s->now + kq_prng_range(&s->fault, 0, 500), EV_START, i, 0, 0, NULL);
    }
    if (s->o.controller)
        ctl_liveness_begin(s);
    s->live_leader = -1;
    s->probe_end = -1;
    s->live_start_ms = s->now;
    s->live_progress = -1;
    sched(s, s->now + 100, EV_LIVE_CHECK, -1, 0, 0, NULL);
    sched(s, s->now + s->liveness_ms, EV_LIVE_DEADLINE, -1, 0, 0, NULL);
}

/* The same end and the same batches where both logs hold them (above the later log start:
 * below it, one of them has a snapshot instead, checked by the image hashes). */
static bool logs_equal(const sim_log *a, const sim_log *b)
{
    if (log_end(a) != log_end(b))
        return false;
    int64_t from = a->start > b->start ? a->start : b->start;
    size_t i = 0, j = 0;
    while (i < a->n && a->b[i].base < from)
        i++;
    while (j < b->n && b->b[j].base < from)
        j++;
    if (a->n - i != b->n - j)
        return false;
    for (; i < a->n; i++, j++)
        if (a->b[i].base != b->b[j].base || a->b[i].epoch != b->b[j].epoch ||
            a->b[i].count != b->b[j].count || batch_hash(&a->b[i]) != batch_hash(&b->b[j]))
            return false;
    return true;
}

/* Why the cluster has not converged yet ("" when it has). */
static void live_status(sim *s, char *why, size_t len)
{
    why[0] = 0;
    int leader = -1, leaders = 0;
    for (int i = 0; i < s->n_nodes; i++) {
        if (!s->nodes[i].up) {
            snprintf(why, len, "n%d is down", s->nodes[i].id);
            return;
        }
        if (s->nodes[i].st.role == KQ_RAFT_LEADER) {
            leader = i;
            leaders++;
        }
    }
    if (leaders != 1) {
        snprintf(why, len, "%d leaders", leaders);
        return;
    }
    sim_node *l = &s->nodes[leader];
    for (int i = 0; i < s->n_nodes; i++) {
        sim_node *n = &s->nodes[i];
        if (n->st.epoch != l->st.epoch || n->st.leader_id != l->id) {
            snprintf(why, len, "n%d is %s at e%d with leader %d; leader n%d is at e%d", n->id,
                     kq_raft_role_name(n->st.role), n->st.epoch, n->st.leader_id, l->id,
                     l->st.epoch);
            return;
        }
    }
    if (s->live_leader != leader || s->live_epoch != l->st.epoch || s->probe_end < 0) {
        s->live_leader = leader;
        s->live_epoch = l->st.epoch;
        int64_t before = log_end(&l->mlog);
        propose(s, l);
        s->probe_end = log_end(&l->mlog);
        if (s->probe_end <= before)
            s->probe_end = -1;
        snprintf(why, len, "probe proposed on n%d", l->id);
        return;
    }
    int64_t leo = log_end(&l->mlog);
    if (l->st.high_watermark < s->probe_end || l->st.high_watermark != leo) {
        snprintf(why, len, "leader n%d HW %" PRId64 ", LEO %" PRId64 ", probe end %" PRId64, l->id,
                 l->st.high_watermark, leo, s->probe_end);
        return;
    }
    for (int i = 0; i < s->n_nodes; i++) {
        sim_node *n = &s->nodes[i];
        if (n->st.high_watermark != leo || !logs_equal(&n->mlog, &l->mlog)) {
            snprintf(why, len, "n%d HW %" PRId64 " LEO %" PRId64 " vs leader n%d HW/LEO %" PRId64,
                     n->id, n->st.high_watermark, log_end(&n->mlog), l->id, leo);
            return;
        }
    }
    if (s->o.controller)
        ctl_live_status(s, why, len);
}

static void live_check(sim *s)
{
    char why[200];
    live_status(s, why, sizeof why);
    if (!why[0] && !s->failed) {
        if (s->o.controller)
            ctl_final_check(s);
        if (s->failed)
            return;
        sim_node *l = &s->nodes[s->live_leader];
        if (s->dynamic) { /* equal logs: the same voter set in force everywhere */
            int64_t at, lat;
            const kq_voter_set *lv = kq_raft_voters(l->r, &lat);
            for (int i = 0; i < s->n_nodes && !s->failed; i++) {
                const kq_voter_set *v = kq_raft_voters(s->nodes[i].r, &at);
                char a[160], b[160];
                set_str(v, a, sizeof a);
                set_str(lv, b, sizeof b);
                if (!sets_equal(v, lv)) /* (the offset: a snapshot's head stands for it) */
                    fail(s,
                         "n%d: voter set %s from offset %" PRId64 " at the end, the leader n%d's "
                         "is %s from %" PRId64,
                         s->nodes[i].id, a, at, l->id, b, lat);
            }
            s->res->final_voters = lv->n;
            if (s->failed)
                return;
        }
        s->res->high_watermark = l->st.high_watermark;
        trace(s, "=== converged: leader n%d e%d, HW %" PRId64 " on all %d nodes ===", l->id,
              l->st.epoch, l->st.high_watermark, s->n_nodes);
        s->done = true;
        return;
    }
    sched(s, s->now + 100, EV_LIVE_CHECK, -1, 0, 0, NULL);
}

/* At the deadline: a cluster still catching up (logs or HWs moving) gets more time, up to
 * LIVENESS_MAX_FACTOR budgets; a stuck one fails. */
static void live_deadline(sim *s)
{
    int64_t progress = 0;
    for (int i = 0; i < s->n_nodes; i++)
        progress += s->nodes[i].st.high_watermark + log_end(&s->nodes[i].mlog);
    char why[200];
    live_status(s, why, sizeof why);
    if (progress > s->live_progress &&
        s->now - s->live_start_ms < LIVENESS_MAX_FACTOR * s->liveness_ms) {
        trace(s, "liveness: still catching up (%s), extending", why);
        s->live_progress = progress;
        sched(s, s->now + s->liveness_ms / 4, EV_LIVE_DEADLINE, -1, 0, 0, NULL);
        return;
    }
    fail(s, "liveness: no convergence %" PRIu64 "ms after healing: %s", s->now - s->live_start_ms,
         why);
}

/* ---------------------------------------------------------------- controller mode */

#define ADMIN_ACTOR KQ_SIM_MAX_BROKERS /* index of the admin client in s->actors */
#define ACTOR_REQ_TIMEOUT_MS 5000
#define ADMIN_TIMEOUT_MS                                                                           \
    60000                  /* the admin client gives an operation up (default.api.timeout.ms)      \
                            */
#define ADMIN_RETRY_MS 100 /* and retries it after this (retry.backoff.ms) */
#define HEARTBEAT_INTERVAL_MS 2000
#define AP_MAX_ISR 16

enum { CHAN_MAIN = 0, CHAN_AP = 1 }; /* one request in flight per channel and actor */

enum { PKT_CTL = 0, PKT_DATA_REQ, PKT_DATA_ANSWER };

/* A message on the wire: controller API between an actor and a controller node (PKT_CTL), or
 * data plane between two actors (a follower Fetch from actor to to_actor, and its answer). */
typedef struct ctl_pkt {
    int kind;
    int actor;
    int to_actor; /* PKT_DATA_*: the receiver */
    bool dp;      /* PKT_CTL: sent by the broker's data plane (its AlterPartition) */
    int node;
    bool to_ctl;
    uint64_t req_id;
    uint32_t api;
    int64_t wait; /* bookkeeping only (not on the wire): the offset the answer waited for */
    uint64_t at;  /* a request handle: when the controller node took the request */
    kq_buf wire;
} ctl_pkt;

/* A simulated broker (or the admin client). */
typedef struct sim_actor {
    int idx;
    int32_t id;
    bool admin;
    bool up;
    uint64_t inc;
    uint64_t tick_gen;
    uint8_t incarnation[16];
    int64_t epoch; /* -1: not registered */
    bool fenced;
    int ctl; /* node index it believes is the active controller */
    uint64_t req_id[2];
    uint32_t req_api[2];
    int32_t drift_pm; /* its clock runs (1000 + drift_pm) / 1000 as fast */
    int node;         /* its metadata observer (index in s->nodes), -1 for the admin client */
    uint32_t ap_every_ms;
    const char *rack;
    /* the AlterPartition in flight */
    uint8_t ap_topic[16];
    int32_t ap_part;
    /* admin */
    uint32_t topics_done;
    uint32_t admin_rounds;
    /* the admin operation in progress: resent as it was first encoded, as a client retries
     * (NOT_CONTROLLER, timeouts, transport errors), until answered or ADMIN_TIMEOUT_MS */
    kq_buf op_wire;
    uint32_t op_api;
    uint64_t op_start;
    uint32_t op_tries;
    bool op_pending;
    bool op_live; /* submitted after the faults stopped */
    bool live_op_done;
    /* voter_changes: the change in progress (op_api AddRaftVoter or RemoveRaftVoter) is about
     * this controller (node index) and this voter (its key for a removal) */
    int memb_node;
    kq_voter memb_voter;
    /* a broker: the production lifecycle (broker-agent/lifecycle.h) on the actor's clock */
    kq_bl bl;
    /* a broker: the production data plane (data_plane.h) and replica manager over the
     * simulated partition-log disk (plog_mem.h), which survives the process */
    kq_plog_mem_disk *disk;
    kq_plog *plog;
    kq_rm *rm;
    kq_dp *dp;
    int64_t rm_applied_end;
    uint64_t dp_timer_gen, dp_timer_at;
    struct dp_out *outs; /* what its data plane sent and waits for */
    size_t n_outs, cap_outs;
    int dp_same_ms; /* loop iterations asked for at once, at the same time */
    uint64_t dp_same_at;
    bool disk_armed;     /* its partition-log disk will fail a commit (an injected fault) */
    bool dying;          /* its data plane hit that fault: the process exits */
    struct hw_seen *hws; /* what its leader replicas looked like after the last loop */
    size_t n_hws, cap_hws;
} sim_actor;

/* A leader replica as the last data-plane loop left it. */
typedef struct hw_seen {
    uint8_t topic[16];
    int32_t part;
    int32_t leader_epoch, partition_epoch, min_isr;
    int n_isr;
    int64_t hw;
} hw_seen;

/* Something a broker's data plane sent (net.send): its answer or a timeout gives token back. */
typedef struct dp_out {
    uint64_t req_id;
    void *token;
    bool ap; /* an AlterPartition: of this partition */
    uint8_t topic[16];
    int32_t part;
} dp_out;

/* A request a broker's data plane holds (the kq_dp_net request handle). */
typedef struct dp_req {
    int from; /* the sender: an actor index, or CLIENT_BASE + a client index */
    uint64_t req_id;
} dp_req;

#define CLIENT_BASE 1000 /* data-plane party numbers of the clients */
#define MAX_CLIENTS 3
#define CLIENT_TOPIC "t0" /* what the clients use; the brokers' model AlterPartitions do not */
#define CLIENT_MAX_BATCH 4

/* A producer or consumer of one partition of CLIENT_TOPIC, speaking the data-plane API to
 * the brokers (Metadata to find the leader, then Produce or Fetch). */
typedef struct sim_client {
    int idx;
    bool consumer;
    int acks;    /* producer: -1 (all), 1 or 0 */
    int64_t pid; /* idempotent (acks all) producers, else KQ_DATA_NO_PRODUCER_ID */
    uint64_t tick_gen;
    uint32_t part_pick;
    bool have_topic;
    uint8_t topic[16];
    int32_t part;
    int32_t leader, leader_epoch; /* -1: look it up (Metadata) */
    uint64_t req_id;              /* in flight, 0 none */
    uint32_t req_api;
    int32_t seq;  /* producer: the next record's sequence */
    int n_batch;  /* producer: the batch being sent until acknowledged (0 none) */
    int64_t next; /* consumer: the next offset */
    uint64_t sent, acked, read;
} sim_client;

/* A record a producer saw acknowledged with acks=all, or a consumer read. */
typedef struct data_rec {
    int32_t part;
    int64_t offset;
    uint64_t hash;
    int client;
    int32_t seq;
} data_rec;

/* An AlterPartition result a broker saw acknowledged: it must stay in the committed state. */
typedef struct ap_ack {
    uint8_t topic[16];
    int32_t part;
    int32_t partition_epoch;
    int32_t isr[AP_MAX_ISR];
    int n_isr;
    int64_t offset; /* the answer was sent once everything up to here committed */
    int32_t broker;
} ap_ack;

static void ctl_pkt_free(ctl_pkt *p)
{
    if (!p)
        return;
    kq_buf_free(&p->wire);
    free(p);
}

static const char *api_name(uint32_t api)
{
    const kq_api_info *info = kq_api_find(api);

    return info ? info->name : "unknown API";
}

static uint64_t actor_ms(const sim_actor *a, uint64_t ms)
{
    return (uint64_t)((int64_t)ms * (1000 + a->drift_pm) / 1000);
}

/* ---- transport ---- */

static void ctl_send(sim *s, ctl_pkt *p)
{
    const char *why = NULL;
    if (s->bblocked[p->actor][p->node])
        why = "partition";
    else if (!s->liveness && kq_prng_permille(&s->ctl, s->base_loss_pm))
        why = "loss";
    if (why) {
        trace(s, "  net drop %s%d%sn%d #%" PRIu64 " %s (%s)", p->to_ctl ? "b" : "n",
              p->to_ctl ? s->actors[p->actor].id : s->nodes[p->node].id, ">",
              p->to_ctl ? s->nodes[p->node].id : s->actors[p->actor].id, p->req_id,
              api_name(p->api), why);
        ctl_pkt_free(p);
        return;
    }
    uint64_t t = s->now + s->lat_min + kq_prng_below(&s->ctl, s->lat_spread + 1);
    sched_ev(s, t, EV_CTL_NET, -1, 0, 0, NULL, p, p->actor);
}

/* Send an encoded response (takes resp). */
static void ctl_reply(sim *s, sim_node *n, const ctl_pkt *req, kq_buf *resp, int64_t wait)
{
    ctl_pkt *p = xcalloc(s, 1, sizeof *p);
    if (!p) {
        kq_buf_free(resp);
        return;
    }
    *p = (ctl_pkt){.actor = req->actor,
                   .node = n->idx,
                   .to_ctl = false,
                   .req_id = req->req_id,
                   .api = req->api,
                   .wait = wait,
                   .wire = *resp};
    *resp = (kq_buf){0};
    ctl_send(s, p);
}

/* An error answer with the leader hint, as controller/main.c reply_error. */
static void ctl_reply_error(sim *s, sim_node *n, const ctl_pkt *req, int err, const char *msg)
{
    kq_buf b = {0};
    int32_t leader = n->st.role == KQ_RAFT_LEADER ? n->id : n->st.leader_id;
    char ep[32];
    snprintf(ep, sizeof ep, "n%d:9093", leader);
    if (kq_codec_encode_error_response(req->api, err, msg, leader, n->st.epoch,
                                       leader >= 0 ? ep : NULL, &b) != 0) {
        fail(s, "codec: n%d cannot encode a %s error response", n->id, kq_err_name(err));
        return;
    }
    ctl_reply(s, n, req, &b, -1);
}

/* ---- the controller host: the controller node (controller/node.c) on the simulated node ---- */

#define CTL_UNCLEAN_INTERVAL_MS 500
#define CTL_REBALANCE_INTERVAL_MS 5000

/* The clock the controller node reads: the simulated one, except that the ctl-clock-jump
 * self-test makes it jump forward by a session timeout one second after activation (as a
 * wall clock can; kq-controller reads the monotonic clock). */
static uint64_t ctl_jump(const sim *s, const sim_node *n)
{
    const ctl_host *h = &n->ch;
    if (s->o.bug != KQ_SIM_BUG_CTL_CLOCK_JUMP || h->activated_at == 0 ||
        node_clock(s, n) < h->activated_at + 1000)
        return 0;
    return SESSION_TIMEOUT_MS;
}

static uint64_t ctl_now(const sim *s, const sim_node *n)
{
    return node_clock(s, n) + ctl_jump(s, n);
}

/* What the node sees of its core: n->st, except that the ctl-early-reply self-test shows the
 * active controller its whole log as committed (it then answers before records commit). */
static void ctl_view_sync(sim *s, sim_node *n)
{
    ctl_host *h = &n->ch;
    h->view = n->st;
    if (s->o.bug == KQ_SIM_BUG_CTL_EARLY_REPLY && n->st.role == KQ_RAFT_LEADER && h->on &&
        h->node.meta.active)
        h->view.high_watermark = n->st.log_end_offset;
}

static int ctl_op_propose(void *arg, const kq_buf *payload, int32_t count, int64_t *base,
                          int32_t *epoch)
{
    ctl_host *h = arg;
    sim *s = h->s;
    sim_node *n = h->n;
    trace(s, "n%d > propose %d controller records (%zu bytes)", n->id, count, payload->len);
    n->propose_data = payload->data;
    n->propose_len = payload->len;
    n->last_propose_err = KQ_ERR_NOT_CONTROLLER; /* unless the step runs */
    kq_raft_event ev = {.type = KQ_RAFT_EV_PROPOSE};
    ev.u.propose_count = count;
    node_step(s, n, &ev);
    n->propose_data = NULL;
    *base = n->last_propose_base;
    *epoch = n->last_propose_epoch;
    return n->last_propose_err;
}

/* As kq_store_read: whole batches with base offsets in [from, to), from a batch boundary. */
static int ctl_op_read(void *arg, int64_t from, int64_t to, kq_ctl_batch_fn fn, void *fn_arg)
{
    ctl_host *h = arg;
    sim_node *n = h->n;
    long i = log_find(&n->mlog, from);
    if (i < 0) {
        fail(h->s, "n%d: committed offset %" PRId64 " is not in its log", n->id, from);
        return KQ_ERR_OFFSET_OUT_OF_RANGE;
    }
    for (; (size_t)i < n->mlog.n && n->mlog.b[i].base < to; i++) {
        const sim_batch *b = &n->mlog.b[i];
        if (fn(fn_arg, b->base, b->epoch, b->count, b->crc, b->data, b->len) != 0)
            break;
    }
    return 0;
}

/* The error code of an encoded answer (0: success). */
static int answer_error(const kq_buf *b, int32_t from)
{
    kq_response env;
    char err[64];
    memset(&env, 0, sizeof env);
    int rc = kq_codec_decode_response(b->data, b->len, from, &env, err, sizeof err);
    int e = rc ? rc : env.error;
    kq_response_free(&env);
    return e;
}

/* The index of broker id in s->actors, -1 for another id. */
static int broker_index(const sim *s, int64_t id)
{
    int64_t i = id - BROKER_ID_BASE - 1;
    return i >= 0 && i < s->n_brokers ? (int)i : -1;
}

static void ctl_op_reply(void *arg, void *req, kq_buf *resp, int64_t wait_offset)
{
    ctl_host *h = arg;
    ctl_pkt *q = req;
    int b = broker_index(h->s, h->s->actors[q->actor].id);
    if (q->api == KQ_API_BROKER_HEARTBEAT && b >= 0 && q->at > h->last_hb[b] &&
        answer_error(resp, h->n->id) == 0)
        h->last_hb[b] = q->at;
    ctl_reply(h->s, h->n, req, resp, wait_offset);
    ctl_pkt_free(req);
}

static void ctl_op_reply_error(void *arg, void *req, uint32_t api, int err, const char *msg)
{
    ctl_host *h = arg;
    ctl_pkt *p = req;
    p->api = api;
    ctl_reply_error(h->s, h->n, p, err, msg);
    ctl_pkt_free(p);
}

static void ctl_op_drop(void *arg, void *req)
{
    (void)arg;
    ctl_pkt_free(req);
}

static void ctl_check_committed(sim *s, sim_node *n);

static void ctl_op_event(void *arg, kq_ctl_node_event ev, int64_t value)
{
    ctl_host *h = arg;
    sim *s = h->s;
    sim_node *n = h->n;
    switch (ev) {
    case KQ_CTL_NODE_ACTIVATED:
        s->res->activations++;
        h->activated_at = node_clock(s, n);
        trace(s, "  n%d became the active controller at e%d (applied to %" PRId64 ")", n->id,
              n->st.epoch, h->node.meta.applied_end);
        ctl_check_committed(s, n);
        kq_sim_epochs_free(h->active_epochs);
        h->active_epochs = kq_sim_epochs_new();
        break;
    case KQ_CTL_NODE_DEACTIVATED:
        trace(s, "  n%d no longer the active controller (image back to %" PRId64 ")", n->id,
              h->node.meta.applied_end);
        break;
    case KQ_CTL_NODE_FENCED: {
        /* A broker that heartbeats to the active controller is never fenced: a fence needs a
         * whole session timeout (on this node's clock, which may drift but does not jump)
         * since this node's activation, which starts every session afresh, and since the last
         * heartbeat it answered for that broker. */
        uint64_t since = h->activated_at;
        int b = broker_index(s, value);
        if (b >= 0 && h->last_hb[b] > since)
            since = h->last_hb[b];
        trace(s, "  n%d fences broker %d (session expired)", n->id, (int)value);
        uint64_t now = node_clock(s, n);
        if (now < since + SESSION_TIMEOUT_MS)
            fail(s,
                 "n%d fenced broker %d only %" PRIu64 " ms after its activation or the last "
                 "heartbeat it answered (session timeout %d ms)",
                 n->id, (int)value, now - since, SESSION_TIMEOUT_MS);
        break;
    }
    case KQ_CTL_NODE_APPLIED:
        ctl_check_committed(s, n);
        break;
    case KQ_CTL_NODE_FEATURES_FINALIZED:
    case KQ_CTL_NODE_ELR_OFF:
        break;
    }
}

static void ctl_op_fatal(void *arg, const char *what, const char *detail)
{
    ctl_host *h = arg;
    fail(h->s, "n%d: controller node: %s: %s", h->n->id, what, detail ? detail : "");
}

static bool ctl_host_start(sim *s, sim_node *n)
{
    ctl_host *h = &n->ch;
    memset(h, 0, sizeof *h);
    h->s = s;
    h->n = n;
    kq_ctl_node_config cfg = {.node_id = n->id,
                              .n_voters = s->n_voters,
                              .cluster_id = CLUSTER_ID,
                              .decide = s->settings,
                              .rebalance_interval_ms = CTL_REBALANCE_INTERVAL_MS,
                              .unclean_interval_ms = CTL_UNCLEAN_INTERVAL_MS,
                              .snapshot_max_bytes = s->snapshot_max_bytes,
                              .snapshot_interval_ms = s->snapshot_interval_ms,
                              .max_write_bytes = s->ctl_max_batch,
                              .max_batch_bytes = s->ctl_max_batch,
                              .max_waiting = 1024,
                              .seed = kq_prng_next(&s->ctl)};
    for (int i = 0; i < s->n_voters; i++)
        cfg.voters[i] = s->nodes[i].id;
    kq_ctl_node_ops ops = {.ctx = h,
                           .propose = ctl_op_propose,
                           .read_committed = ctl_op_read,
                           .reply = ctl_op_reply,
                           .reply_error = ctl_op_reply_error,
                           .drop = ctl_op_drop,
                           .event = ctl_op_event,
                           .fatal = ctl_op_fatal};
    ctl_view_sync(s, n);
    if (kq_ctl_node_init(&h->node, &cfg, &h->view, &ops, node_clock(s, n)) != 0) {
        fail(s, "n%d: kq_ctl_node_init failed", n->id);
        return false;
    }
    h->committed_epochs = kq_sim_epochs_new();
    if (!h->committed_epochs) {
        kq_ctl_node_free(&h->node);
        fail(s, "out of memory");
        return false;
    }
    h->on = true;
    return true;
}

static void ctl_host_free(ctl_host *h)
{
    if (!h->on)
        return;
    kq_ctl_node_free(&h->node);
    kq_sim_epochs_free(h->committed_epochs);
    kq_sim_epochs_free(h->active_epochs);
    memset(h, 0, sizeof *h);
}

/* A snapshot replaces the node's image (at start, or installed from the leader's): checked
 * against the reference image at its end. */
static bool ctl_load_snapshot(sim *s, sim_node *n, const sim_snap *sn, char *err, size_t errlen)
{
    ctl_host *h = &n->ch;
    if (!h->on) {
        snprintf(err, errlen, "no controller node on n%d", n->id);
        return false;
    }
    if (kq_ctl_node_load_snapshot(&h->node, sn->id, sn->data + SNAP_HDR, sn->len - SNAP_HDR,
                                  ctl_now(s, n), err, errlen) != 0)
        return false;
    int64_t end = sn->id.end_offset;
    if ((size_t)end >= s->cap_ref_hash || !s->ref_hash[end].set)
        fail(s, "n%d loaded snapshot %" PRId64 "/%d, which does not end at a committed batch end",
             n->id, end, sn->id.epoch);
    ctl_check_committed(s, n);
    return true;
}

/* KQ_SIM_BUG_SNAPSHOT_DROPS_RECORD: a snapshot encoder that loses the image's last record. */
static void snap_drop_last_record(sim *s, sim_snap *sn)
{
    const uint8_t *payload = sn->data + SNAP_HDR;
    size_t len = sn->len - SNAP_HDR, pos = 0, last = 0;
    char err[200];
    while (pos < len) {
        kq_record r;
        last = pos;
        if (kq_record_decode_next(payload, len, &pos, &r, err, sizeof err) != 0) {
            fail(s, "sim: a snapshot it wrote does not decode: %s", err);
            return;
        }
        kq_record_free(&r);
    }
    sim_snap cut = {.id = sn->id};
    if (!snap_file(s, &cut, payload, last))
        return;
    snap_free(sn);
    *sn = cut;
}

/* kq-controller's maybe_snapshot, once per loop iteration (outside any step or call into the
 * node): when the node says one is due, a snapshot of the committed image, written
 * synchronously, then SNAPSHOT_TAKEN (the core may release the log prefix below it). */
static void ctl_maybe_snapshot(sim *s, sim_node *n)
{
    ctl_host *h = &n->ch;
    kq_raft_snapshot_id id;
    /* ctl-early-reply shows the node uncommitted records as committed: its snapshots would
     * be refused by the core before the early answers are caught */
    if (s->o.bug == KQ_SIM_BUG_CTL_EARLY_REPLY)
        return;
    if (s->failed || !n->up || !h->on || h->busy || n->depth > 0 ||
        !kq_ctl_node_snapshot_ready(&h->node, &n->host.st, n->host.pending_install,
                                    kq_raft_host_outbox_reads_from(&n->host), ctl_now(s, n), &id))
        return;
    kq_buf b = {0};
    int32_t records = 0;
    sim_snap sn = {.id = id};
    /* a dynamic quorum's snapshot starts with the quorum records in force at its end (main.c) */
    int16_t kraft_version;
    const kq_voter_set *set = kq_raft_voters_at(n->r, id.end_offset - 1, &kraft_version);
    char why[200];
    if (set && kq_control_append_snapshot_head(&b, kraft_version, set, why, sizeof why) != 0) {
        fail(s, "n%d: cannot encode its snapshot's quorum records: %s", n->id, why);
        return;
    }
    if (kq_image_snapshot_write(h->node.meta.img, &b, &records) != 0 ||
        !snap_file(s, &sn, b.data, b.len)) {
        kq_buf_free(&b);
        fail(s, "n%d: cannot write a snapshot of its image", n->id);
        return;
    }
    kq_buf_free(&b);
    if (s->o.bug == KQ_SIM_BUG_SNAPSHOT_DROPS_RECORD)
        snap_drop_last_record(s, &sn);
    trace(s, "n%d > snapshot %" PRId64 "/%d written (%d records, %zu bytes)", n->id, id.end_offset,
          id.epoch, records, sn.len);
    int64_t size = (int64_t)sn.len;
    snap_keep(n, &sn);
    s->res->snapshots_taken++;
    kq_ctl_node_snapshot_taken(&h->node, id, ctl_now(s, n));
    kq_raft_event ev = {.type = KQ_RAFT_EV_SNAPSHOT_TAKEN};
    ev.u.snapshot.id = id;
    ev.u.snapshot.size = size;
    node_step(s, n, &ev);
}

/* host_batch: the LeaderChange record of a new leader, from the node. */
static void ctl_leader_change(sim *s, sim_node *n, int64_t base, kq_buf *payload)
{
    if (!n->ch.on || kq_ctl_node_leader_change(&n->ch.node, base, ctl_now(s, n), payload) != 0)
        fail(s, "n%d: cannot encode its LeaderChange record", n->id);
}

/* The active controller's (uncommitted) image: well formed, epochs monotonic while active. */
static void ctl_check_active(sim *s, sim_node *n)
{
    char why[400];
    ctl_host *h = &n->ch;
    if (s->failed || !h->node.meta.active)
        return;
    if (kq_sim_check_partitions(h->node.meta.img, why, sizeof why))
        fail(s, "n%d (active controller, applied to %" PRId64 "): %s", n->id,
             h->node.meta.applied_end, why);
    else if (h->active_epochs &&
             kq_sim_epochs_check(h->active_epochs, h->node.meta.img, why, sizeof why))
        fail(s, "n%d (active controller): %s", n->id, why);
}

static void ack_check_image(sim *s, const kq_image *img, int64_t end, const char *who)
{
    for (size_t i = 0; i < s->n_acks && !s->failed; i++) {
        const ap_ack *a = &s->acks[i];
        if (a->offset >= end)
            continue;
        const kq_partition *p = kq_image_partition(img, a->topic, a->part);
        const kq_topic *t = kq_image_topic_by_id(img, a->topic);
        const char *name = t && t->name ? t->name : "?";
        if (!t && !kq_image_topic_by_id(s->ref, a->topic))
            continue; /* the topic was deleted (DeleteTopics): nothing of it is kept */
        if (!p) {
            fail(s,
                 "%s: AlterPartition acknowledged to b%d (partition %d, partition epoch %d, "
                 "offset %" PRId64 ") lost: the partition is gone",
                 who, a->broker, a->part, a->partition_epoch, a->offset);
        } else if (p->partition_epoch < a->partition_epoch) {
            fail(s,
                 "%s: AlterPartition acknowledged to b%d for %s-%d lost: partition epoch %d "
                 "below the acknowledged %d (offset %" PRId64 ")",
                 who, a->broker, name, a->part, p->partition_epoch, a->partition_epoch, a->offset);
        } else if (p->partition_epoch == a->partition_epoch &&
                   !kq_sim_same_set(kq_partition_isr(p), p->n_isr, a->isr, a->n_isr)) {
            fail(s,
                 "%s: AlterPartition acknowledged to b%d for %s-%d lost: ISR differs at the "
                 "acknowledged partition epoch %d",
                 who, a->broker, name, a->part, a->partition_epoch);
        }
    }
}

/* A committed image (a standby's, or a leader's at activation) covering [0, applied_end). */
static void ctl_check_committed(sim *s, sim_node *n)
{
    ctl_host *h = &n->ch;
    char why[400], who[64];
    int64_t end = h->node.meta.applied_end;
    snprintf(who, sizeof who, "n%d committed image at offset %" PRId64, n->id, end);
    if (kq_sim_check_partitions(h->node.meta.img, why, sizeof why)) {
        fail(s, "%s: %s", who, why);
        return;
    }
    if (kq_sim_epochs_check(h->committed_epochs, h->node.meta.img, why, sizeof why)) {
        fail(s, "%s: %s", who, why);
        return;
    }
    if (end > 0 && (size_t)end < s->cap_ref_hash && s->ref_hash[end].set) {
        uint64_t mine = kq_image_hash(h->node.meta.img);
        s->res->image_checks++;
        if (mine != s->ref_hash[end].hash) {
            fail(s,
                 "%s: image hash %016" PRIx64 " differs from the committed reference %016" PRIx64
                 " at the same offset",
                 who, mine, s->ref_hash[end].hash);
            return;
        }
    }
    ack_check_image(s, h->node.meta.img, end, who);
}

/* The node's deadline, as an EV_CTL_TIMER (a new one replaces the last). */
static void ctl_arm(sim *s, sim_node *n)
{
    ctl_host *h = &n->ch;
    uint64_t d = kq_ctl_node_deadline(&h->node), jump = ctl_jump(s, n);
    if (d != UINT64_MAX)
        d = node_sim_time(n, d > jump ? d - jump : 0); /* the node's clock to simulated time */
    if (s->failed || !n->up || d == h->timer_at)
        return;
    h->timer_at = d;
    h->timer_gen++;
    if (d != UINT64_MAX)
        sched(s, d > s->now ? d : s->now, EV_CTL_TIMER, n->idx, n->inc, h->timer_gen, NULL);
}

/* After a call into the node: propose what it built, check its image, arm its timer. */
static void ctl_settle(sim *s, sim_node *n)
{
    ctl_host *h = &n->ch;
    kq_ctl_node_committed(&h->node, ctl_now(s, n));
    kq_ctl_node_flush(&h->node);
    int64_t applied = h->node.meta.applied_end < n->host.hw ? h->node.meta.applied_end : n->host.hw;
    if (applied != h->ready_applied) { /* as kq-controller's metrics_update */
        h->ready_applied = applied;
        h->ready_since = node_clock(s, n);
    }
    if (!h->node.meta.active && h->node.meta.applied_end > log_end(&n->mlog) && !s->failed)
        fail(s, "n%d applied its committed image to %" PRId64 ", beyond its log end %" PRId64,
             n->id, h->node.meta.applied_end, log_end(&n->mlog));
    ctl_check_active(s, n);
    ctl_arm(s, n);
}

/* After every core step (the host's after_step in controller/main.c, plus what its loop does
 * next: answers, replay, activation, the proposal). */
static void ctl_after_step(sim *s, sim_node *n, const kq_raft_update *u)
{
    ctl_host *h = &n->ch;
    if (!n->up || !h->on)
        return;
    ctl_view_sync(s, n);
    bool lost = u->role_changed && u->role != KQ_RAFT_LEADER;
    if (lost && s->o.bug == KQ_SIM_BUG_CTL_NO_ROLLBACK) {
        h->node.meta.active = false; /* so the node's deactivation rolls nothing back */
        h->node.meta.epoch_start = -1;
    }
    kq_ctl_node_after_step(&h->node, u, ctl_now(s, n));
    if (lost) {
        kq_sim_epochs_free(h->active_epochs);
        h->active_epochs = NULL;
    }
    if (h->busy)
        return; /* a step the node itself made (a proposal): the outer call settles */
    h->busy = true;
    ctl_settle(s, n);
    h->busy = false;
}

/* A NoOp (the liveness probe; the idle NoOp of kq-controller). */
static void ctl_noop(sim *s, sim_node *n)
{
    ctl_host *h = &n->ch;
    if (!h->on)
        return;
    trace(s, "n%d > NoOp (%s)", n->id, kq_raft_role_name(n->st.role));
    h->busy = true;
    kq_ctl_node_noop(&h->node, ctl_now(s, n));
    ctl_settle(s, n);
    h->busy = false;
    ctl_maybe_snapshot(s, n);
}

/* A controller-API request reached node n: decoded as controller/main.c handle_request does,
 * then the node's. */
/* AddRaftVoter / RemoveRaftVoter from the admin client: to the core, as controller/main.c
 * hands them over (to_core); the core's answer comes back through admin_answer. */
static void voter_request(sim *s, sim_node *n, const ctl_pkt *p, const kq_request *env)
{
    if (!grow(s, (void **)&n->ins, &n->cap_ins, n->n_ins + 1, sizeof(sim_in)))
        return;
    uint64_t token = ++s->next_req_id;
    n->ins[n->n_ins++] = (sim_in){.token = token,
                                  .type = env->raft.type,
                                  .from = ADMIN_FROM,
                                  .admin_actor = p->actor,
                                  .admin_id = s->actors[p->actor].id,
                                  .admin_req = p->req_id,
                                  .at_ms = s->now,
                                  .paused_at = pause_time(s, n)};
    kq_raft_msg m = env->raft;
    m.token = token;
    m.to = n->id;
    char str[200];
    msg_str(&m, 0, str, sizeof str);
    trace(s, "n%d < admin #%" PRIu64 " %s voter %d", n->id, p->req_id, str,
          m.u.voter_req.voter ? m.u.voter_req.voter->key.id : -1);
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE};
    ev.u.msg = &m;
    node_step(s, n, &ev);
}

/* The core's answer to a voter change from the admin client (m->to is the admin's id): encoded
 * and sent back on the admin's connection. False: not such an answer. */
static bool admin_answer(sim *s, sim_node *n, const kq_raft_msg *m)
{
    size_t i = 0;
    while (i < n->n_ins && n->ins[i].token != m->token)
        i++;
    if (i == n->n_ins || n->ins[i].from != ADMIN_FROM)
        return false;
    sim_in in = n->ins[i];
    ins_answer(s, n, m);
    ctl_pkt req = {.actor = in.admin_actor,
                   .req_id = in.admin_req,
                   .api = (int)m->type == (int)KQ_RAFT_ADD_VOTER_RESP ? KQ_API_ADD_RAFT_VOTER
                                                                      : KQ_API_REMOVE_RAFT_VOTER};
    kq_buf b = {0};
    if (kq_codec_encode_raft_response(m, NULL, 0, &b) != 0) {
        kq_buf_free(&b);
        fail(s, "codec: n%d cannot encode a %s", n->id, msg_name(m->type));
        return true;
    }
    trace(s, "  n%d > admin #%" PRIu64 " %s: %s", n->id, req.req_id, msg_name(m->type),
          m->error ? kq_err_name(m->error) : "NONE");
    ctl_reply(s, n, &req, &b, -1);
    return true;
}

static void ctl_on_request(sim *s, sim_node *n, const ctl_pkt *p)
{
    ctl_host *h = &n->ch;
    char err[512] = "";
    kq_request env;
    memset(&env, 0, sizeof env);
    int rc = kq_codec_decode_request(p->wire.data, p->wire.len, &env, err, sizeof err);
    if (rc) {
        fail(s, "codec: n%d cannot decode a %s envelope: %s: %s", n->id, api_name(p->api),
             kq_err_name(rc), err);
        return;
    }
    if (env.api_key == p->api &&
        (p->api == KQ_API_ADD_RAFT_VOTER || p->api == KQ_API_REMOVE_RAFT_VOTER)) {
        voter_request(s, n, p, &env); /* kq metadata-quorum add-controller / remove-controller */
        kq_request_free(&env);
        return;
    }
    if (env.api_key != p->api || !kq_ctl_is_controller_api(env.api_key)) {
        kq_request_free(&env);
        fail(s, "codec: a %s decoded as another api", api_name(p->api));
        return;
    }
    bool admin_api = p->api == KQ_API_CREATE_TOPICS || p->api == KQ_API_DELETE_TOPICS ||
                     p->api == KQ_API_INCREMENTAL_ALTER_CONFIGS || p->api == KQ_API_ELECT_LEADERS;
    if (s->o.bug == KQ_SIM_BUG_CTL_REFUSES_ADMIN && admin_api && h->on && h->node.meta.active) {
        kq_request_free(&env);
        ctl_reply_error(s, n, p, KQ_ERR_NOT_CONTROLLER, "refused (ctl-refuses-admin)");
        return;
    }
    ctl_pkt *req = xcalloc(s, 1, sizeof *req); /* the handle the node answers */
    if (!req || !h->on) {
        kq_request_free(&env);
        free(req);
        return;
    }
    *req = (ctl_pkt){.actor = p->actor,
                     .node = n->idx,
                     .req_id = p->req_id,
                     .api = p->api,
                     .at = node_clock(s, n)};
    if (h->node.meta.active)
        s->res->ctl_requests++;
    trace(s, "n%d < b%d #%" PRIu64 " %s%s", n->id, s->actors[p->actor].id, p->req_id,
          api_name(p->api), h->node.meta.active ? "" : " (not the active controller)");
    h->busy = true;
    rc = kq_ctl_node_request(&h->node, req, &env, NULL, ctl_now(s, n));
    kq_request_free(&env);
    if (rc)
        fail(s, "codec: n%d cannot decode a %s body", n->id, api_name(p->api));
    ctl_settle(s, n);
    h->busy = false;
    ctl_maybe_snapshot(s, n);
}

/* The node's timers: session expiry, leaderless partitions, preferred leaders. */
static void ctl_timer(sim *s, sim_node *n)
{
    ctl_host *h = &n->ch;
    if (!h->on)
        return;
    h->timer_at = 0; /* fired */
    h->busy = true;
    kq_ctl_node_run(&h->node, ctl_now(s, n));
    ctl_settle(s, n);
    h->busy = false;
    ctl_maybe_snapshot(s, n);
}

/* ---- the reference image ---- */

static void ids_str(const int32_t *ids, int n, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = 0;
    for (int j = 0; j < n && k + 12 < len; j++)
        k += (size_t)snprintf(buf + k, len - k, "%s%d", j ? "," : "", ids[j]);
}

/* The clients' partitions as committed: each change traced, unclean elections noted (acked
 * records may then be lost). */
static void ref_note_client_topic(sim *s, int64_t off)
{
    const kq_topic *t = kq_image_topic_by_name(s->ref, CLIENT_TOPIC);
    for (int32_t k = 0; t && k < t->n_partitions && k < 64; k++) {
        const kq_partition *p = &t->partitions[k];
        if (p->partition_epoch != s->t0_pepoch[k] || p->leader_epoch != s->t0_lepoch[k] ||
            !s->t0_seen[k]) {
            char isr[64], elr[64];
            ids_str(kq_partition_isr(p), p->n_isr, isr, sizeof isr);
            ids_str(kq_partition_elr(p), p->n_elr, elr, sizeof elr);
            trace(s,
                  "data: %s-%d committed at %" PRId64 ": leader %d epoch %d, partition epoch %d, "
                  "ISR {%s} ELR {%s}",
                  CLIENT_TOPIC, k, off, p->leader, p->leader_epoch, p->partition_epoch, isr, elr);
            s->t0_pepoch[k] = p->partition_epoch;
            s->t0_lepoch[k] = p->leader_epoch;
            s->t0_seen[k] = true;
        }
        if (p->leader_recovery_state == KQ_RECOVERY_RECOVERING && !s->unclean[k]) {
            s->unclean[k] = true;
            trace(s, "data: unclean leader election of %s-%d (leader %d) at offset %" PRId64,
                  CLIENT_TOPIC, k, p->leader, off);
        }
    }
}

static void ref_apply(sim *s, const sim_batch *b)
{
    size_t pos = 0;
    char why[400];
    for (int32_t i = 0; i < b->count && !s->failed; i++) {
        kq_record r;
        memset(&r, 0, sizeof r);
        int64_t off = b->base + i;
        if (kq_record_decode_next(b->data, b->len, &pos, &r, why, sizeof why) != 0) {
            fail(s, "committed record at %" PRId64 " does not decode: %s", off, why);
            return;
        }
        if (kq_sim_check_isr_additions(s->ref, &r, why, sizeof why))
            fail(s, "committed record at %" PRId64 ": %s", off, why);
        else if (kq_image_apply(s->ref, off, &r) != 0)
            fail(s, "committed record at %" PRId64 " cannot apply to the reference image: %s", off,
                 kq_image_error(s->ref));
        kq_record_free(&r);
        ref_note_client_topic(s, off);
    }
    if (s->failed)
        return;
    if (pos != b->len) {
        fail(s, "committed batch at %" PRId64 " has %zu bytes after its %d records", b->base,
             b->len - pos, b->count);
        return;
    }
    int64_t end = b->base + b->count;
    kq_image_commit(s->ref, end - 1);
    s->ref_end = end;
    if (!grow(s, (void **)&s->ref_hash, &s->cap_ref_hash, (size_t)end + 1, sizeof(struct ref_hash)))
        return;
    s->ref_hash[end] = (struct ref_hash){.hash = kq_image_hash(s->ref), .set = true};
    if (kq_sim_check_partitions(s->ref, why, sizeof why))
        fail(s, "committed state at offset %" PRId64 ": %s", end, why);
    else if (kq_sim_epochs_check(s->ref_epochs, s->ref, why, sizeof why))
        fail(s, "committed state at offset %" PRId64 ": %s", end, why);
    else
        ack_check_image(s, s->ref, end, "committed state");
}

/* Apply the batches the committed oracle now holds, read from node n's log. */
static void ref_advance(sim *s, sim_node *n)
{
    while (!s->failed && (size_t)s->ref_end < s->n_committed && s->committed_set[s->ref_end]) {
        long i = log_find(&n->mlog, s->ref_end);
        if (i < 0)
            return;
        const sim_batch *b = &n->mlog.b[i];
        int64_t end = b->base + b->count;
        if (b->base != s->ref_end) {
            fail(s, "committed offset %" PRId64 " is inside n%d's batch at %" PRId64, s->ref_end,
                 n->id, b->base);
            return;
        }
        if ((size_t)end > s->n_committed || !s->committed_set[end - 1])
            return;
        ref_apply(s, b);
    }
}

/* ---- actors ---- */

static void actor_tick_at(sim *s, sim_actor *a, uint64_t at)
{
    a->tick_gen++;
    sched_ev(s, at, EV_ACTOR_TICK, -1, a->inc, a->tick_gen, NULL, NULL, a->idx);
}

/* An encoded request (b, taken) to the controller the actor believes active. */
static void actor_send_wire(sim *s, sim_actor *a, int chan, uint32_t api, kq_buf b)
{
    ctl_pkt *p = xcalloc(s, 1, sizeof *p);
    if (!p) {
        kq_buf_free(&b);
        return;
    }
    *p = (ctl_pkt){.actor = a->idx,
                   .node = a->ctl,
                   .to_ctl = true,
                   .req_id = ++s->next_req_id,
                   .api = api,
                   .wait = -1,
                   .wire = b};
    a->req_id[chan] = p->req_id;
    a->req_api[chan] = api;
    trace(s, "  %s%d > n%d #%" PRIu64 " %s", a->admin ? "admin" : "b", a->id, s->nodes[a->ctl].id,
          p->req_id, api_name(api));
    sched_ev(s, s->now + ACTOR_REQ_TIMEOUT_MS, EV_ACTOR_TIMEOUT, -1, a->inc, p->req_id, NULL, NULL,
             a->idx);
    ctl_send(s, p);
}

static void actor_send(sim *s, sim_actor *a, int chan, const kq_ctl_request *req)
{
    kq_buf b = {0};
    int rc = kq_ctl_encode_request(CLUSTER_ID, a->id, req, &b);
    if (rc) {
        fail(s, "codec: b%d cannot encode a %s: %s", a->id, api_name(req->api_key),
             kq_err_name(rc));
        return;
    }
    actor_send_wire(s, a, chan, req->api_key, b);
}

static void actor_other_ctl(sim *s, sim_actor *a)
{
    if (s->n_voters > 1)
        a->ctl =
            (a->ctl + 1 + (int)kq_prng_below(&s->ctl, (uint64_t)s->n_voters - 1)) % s->n_voters;
}

static void broker_register(sim *s, sim_actor *a)
{
    char host[32];
    snprintf(host, sizeof host, "broker%d", a->id);
    kq_rec_endpoint ep = {.name = "PLAINTEXT", .host = host, .port = 9092};
    kq_ctl_request r;
    memset(&r, 0, sizeof r);
    r.api_key = KQ_API_BROKER_REGISTRATION;
    r.broker_registration.broker_id = a->id;
    r.broker_registration.cluster_id = CLUSTER_ID;
    memcpy(r.broker_registration.incarnation_id, a->incarnation, 16);
    r.broker_registration.endpoints = &ep;
    r.broker_registration.n_endpoints = 1;
    r.broker_registration.rack = a->rack;
    actor_send(s, a, CHAN_MAIN, &r);
}

static void broker_heartbeat(sim *s, sim_actor *a, const kq_heartbeat *hb)
{
    kq_ctl_request r;
    memset(&r, 0, sizeof r);
    r.api_key = KQ_API_BROKER_HEARTBEAT;
    r.broker_heartbeat = *hb;
    actor_send(s, a, CHAN_MAIN, &r);
}

/* The broker's own clock (it drifts), and the simulated time a reading of it falls on. */
static uint64_t broker_clock(const sim *s, const sim_actor *a)
{
    return actor_ms(a, s->now);
}

static uint64_t broker_sim_time(const sim *s, const sim_actor *a, uint64_t local)
{
    uint64_t t = local * 1000 / (uint64_t)(1000 + a->drift_pm);
    return t > s->now ? t : s->now + 1;
}

static void broker_sync(sim_actor *a)
{
    a->epoch = a->bl.broker_epoch;
    a->fenced = a->bl.fenced;
}

/* ---- a broker's data host: the production replica manager and data plane (data_plane.h) on
 * the simulated partition-log disk (plog_mem.h), reached over the simulated network ---- */

#define DP_REQUEST_TIMEOUT_MS 3000
#define DP_FETCH_WAIT_MS 500
#define DP_LAG_MAX_MS 4000
#define DP_MAX_AT_ONCE 5000 /* loop iterations a data plane may ask for back to back */

static _Thread_local sim *g_sim; /* the run in progress: dp_fatal has no context argument */
static _Thread_local int g_dp_actor = -1; /* the broker whose data plane is being called */

/* Every partition broker a's log holds: log start, end, HW checkpoint and epochs. */
static void dp_trace_logs(sim *s, sim_actor *a)
{
    kq_plog_tp *tps = NULL;
    size_t n = 0;
    if (!a->plog || kq_plog_list(a->plog, &tps, &n) != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        kq_plog_state st;
        kq_epoch_entry *e = NULL;
        size_t ne = 0;
        char eps[160];
        int k = 0;
        eps[0] = 0;
        if (kq_plog_state_of(a->plog, &tps[i], &st) != 0 ||
            kq_plog_epochs(a->plog, &tps[i], &e, &ne) != 0)
            continue;
        for (size_t j = 0; j < ne && k < (int)sizeof eps - 24; j++)
            k += snprintf(eps + k, sizeof eps - (size_t)k, " e%d@%" PRId64, e[j].epoch,
                          e[j].start_offset);
        const kq_topic *t = kq_image_topic_by_id(s->ref, tps[i].topic_id);
        trace(s, "  b%d log %s-%d: [%" PRId64 ", %" PRId64 ") hw %" PRId64 " epochs%s", a->id,
              t && t->name ? t->name : "?", tps[i].partition, st.log_start_offset,
              st.log_end_offset, st.high_watermark, eps);
        free(e);
    }
    free(tps);
}

static void dp_fatal(const char *what, const char *detail)
{
    sim *s = g_sim;
    if (!s || s->failed)
        return;
    if (g_dp_actor >= 0 && s->actors[g_dp_actor].disk_armed) {
        sim_actor *a = &s->actors[g_dp_actor];
        if (!a->dying)
            trace(s, "b%d: exits on its disk error (kq-broker-agent does): %s: %s", a->id, what,
                  detail ? detail : "");
        a->dying = true; /* the caller stops the process before anything else leaves it */
        return;
    }
    if (g_dp_actor >= 0)
        dp_trace_logs(s, &s->actors[g_dp_actor]);
    fail(s, "b%d: data plane: %s: %s", g_dp_actor >= 0 ? s->actors[g_dp_actor].id : -1, what,
         detail ? detail : "");
}

static void dp_loop(sim *s, sim_actor *a);
static void ap_answered(sim *s, sim_actor *a, const uint8_t topic[16], int32_t part,
                        const kq_ap_result *r, int64_t wait);

/* Data-plane traffic between brokers: latency and loss, no partitions (yet). */
/* The id of a data-plane party: a broker, or a client (CLIENT_BASE + its index). */
static int32_t party_id(const sim *s, int who)
{
    return who >= CLIENT_BASE ? 1000 + (who - CLIENT_BASE) : s->actors[who].id;
}

static void dp_pkt_send(sim *s, ctl_pkt *p)
{
    if (!s->liveness && kq_prng_permille(&s->ctl, s->base_loss_pm)) {
        trace(s, "  net drop %d>%d #%" PRIu64 " data %s (loss)", party_id(s, p->actor),
              party_id(s, p->to_actor), p->req_id, p->kind == PKT_DATA_REQ ? "request" : "answer");
        ctl_pkt_free(p);
        return;
    }
    uint64_t t = s->now + s->lat_min + kq_prng_below(&s->ctl, s->lat_spread + 1);
    sched_ev(s, t, EV_CTL_NET, -1, 0, 0, NULL, p, -1);
}

static bool buf_copy(sim *s, kq_buf *dst, const uint8_t *data, size_t len)
{
    dst->data = xcalloc(s, len ? len : 1, 1);
    dst->len = len;
    if (dst->data && len)
        memcpy(dst->data, data, len);
    return dst->data != NULL;
}

/* kq_dp_net.reply: the answer goes back to the requesting broker. */
static void dp_net_reply(void *ctx, void *req, kq_buf *answer)
{
    sim_actor *a = ctx;
    sim *s = g_sim;
    dp_req *q = req;
    if (a->dying) { /* its fatal() does not return in kq-broker-agent: nothing else leaves */
        kq_buf_free(answer);
        free(q);
        return;
    }
    ctl_pkt *p = xcalloc(s, 1, sizeof *p);
    if (p) {
        *p = (ctl_pkt){.kind = PKT_DATA_ANSWER,
                       .actor = a->idx,
                       .to_actor = q->from,
                       .node = -1,
                       .req_id = q->req_id,
                       .wire = *answer};
        *answer = (kq_buf){0};
        dp_pkt_send(s, p);
    }
    kq_buf_free(answer);
    free(q);
}

static void dp_net_drop(void *ctx, void *req)
{
    (void)ctx;
    free(req);
}

/* kq_dp_net.send: a follower Fetch to another broker, or an AlterPartition to a controller
 * (over the controller-API path, with its partitions and losses). */
static int dp_net_send(void *ctx, kq_dp_peer peer, int32_t node, const char *url,
                       const uint8_t *data, size_t len, uint32_t timeout_ms, void *token)
{
    sim_actor *a = ctx;
    sim *s = g_sim;
    (void)url;
    if (a->dying) /* kq-broker-agent's fatal() does not return: nothing else leaves it */
        return KQ_ERR_NETWORK_EXCEPTION;
    int to = peer == KQ_DP_PEER_BROKER ? broker_index(s, node) : -1;
    sim_node *n = peer == KQ_DP_PEER_CONTROLLER ? node_by_id(s, node) : NULL;
    if (to < 0 && (!n || !n->voter))
        return KQ_ERR_NETWORK_EXCEPTION;
    if (!grow(s, (void **)&a->outs, &a->cap_outs, a->n_outs + 1, sizeof(dp_out)))
        return KQ_ERR_NOMEM;
    ctl_pkt *p = xcalloc(s, 1, sizeof *p);
    if (!p || !buf_copy(s, &p->wire, data, len)) {
        free(p);
        return KQ_ERR_NOMEM;
    }
    uint64_t id = ++s->next_req_id;
    dp_out o = {.req_id = id, .token = token};
    if (n) {
        kq_ctl_request r;
        char err[200];
        memset(&r, 0, sizeof r);
        if (kq_ctl_decode_request(data, len, &r, err, sizeof err) != 0 ||
            r.api_key != KQ_API_ALTER_PARTITION || r.alter_partition.n_topics != 1 ||
            r.alter_partition.topics[0].n_partitions != 1) {
            fail(s,
                 "b%d: its data plane sent a controller request that is not one "
                 "AlterPartition: %s",
                 a->id, err);
            kq_ctl_request_free(&r);
            ctl_pkt_free(p);
            return KQ_ERR_INVALID_REQUEST;
        }
        o.ap = true;
        memcpy(o.topic, r.alter_partition.topics[0].topic_id, 16);
        o.part = r.alter_partition.topics[0].partitions[0].partition_index;
        {
            const kq_ap_partition *ap = &r.alter_partition.topics[0].partitions[0];
            const kq_topic *t = kq_image_topic_by_id(s->ref, o.topic);
            char isr[64];
            int k = 0;
            isr[0] = 0;
            for (int j = 0; j < ap->n_new_isr && k < (int)sizeof isr - 8; j++)
                k += snprintf(isr + k, sizeof isr - (size_t)k, "%s%d", j ? "," : "",
                              ap->new_isr[j].broker_id);
            trace(s,
                  "  b%d > n%d #%" PRIu64 " AlterPartition from its replica of %s-%d: ISR {%s} "
                  "epochs %d/%d",
                  a->id, n->id, id, t && t->name ? t->name : "?", o.part, isr, ap->leader_epoch,
                  ap->partition_epoch);
        }
        kq_ctl_request_free(&r);
        p->kind = PKT_CTL;
        p->dp = true;
        p->actor = a->idx;
        p->node = n->idx;
        p->to_ctl = true;
        p->req_id = id;
        p->api = KQ_API_ALTER_PARTITION;
        p->wait = -1;
        a->outs[a->n_outs++] = o;
        ctl_send(s, p);
    } else {
        p->kind = PKT_DATA_REQ;
        p->actor = a->idx;
        p->to_actor = to;
        p->node = -1;
        p->req_id = id;
        a->outs[a->n_outs++] = o;
        dp_pkt_send(s, p);
    }
    sched_ev(s, broker_sim_time(s, a, broker_clock(s, a) + timeout_ms), EV_DP_TIMEOUT, -1, a->inc,
             id, NULL, NULL, a->idx);
    return 0;
}

static long dp_out_find(const sim_actor *a, uint64_t req_id)
{
    for (size_t i = 0; i < a->n_outs; i++)
        if (a->outs[i].req_id == req_id)
            return (long)i;
    return -1;
}

/* The answer (err 0) or the failure of something broker a's data plane sent: its token back,
 * exactly once. */
static void dp_answer(sim *s, sim_actor *a, long k, int err, const uint8_t *data, size_t len)
{
    void *token = a->outs[k].token;
    a->outs[k] = a->outs[--a->n_outs];
    if (a->dying)
        return;
    g_dp_actor = a->idx;
    kq_dp_on_answer(a->dp, token, err, data, len, broker_clock(s, a));
    dp_loop(s, a);
}

/* An AlterPartition answer for broker a's data plane: checked as any acknowledged change. */
static void dp_ap_answer(sim *s, sim_actor *a, long k, const ctl_pkt *p)
{
    kq_response env;
    kq_alter_partition_result res;
    char err[200];
    memset(&env, 0, sizeof env);
    memset(&res, 0, sizeof res);
    if (kq_codec_decode_response(p->wire.data, p->wire.len, s->nodes[p->node].id, &env, err,
                                 sizeof err) == 0 &&
        env.error == 0 &&
        kq_ctl_decode_alter_partition_response(&env, &res, err, sizeof err) == 0 &&
        res.error == 0 && res.n_results == 1)
        ap_answered(s, a, a->outs[k].topic, a->outs[k].part, &res.results[0], p->wait);
    kq_ctl_alter_partition_response_free(&res);
    kq_response_free(&env);
    if (!s->failed)
        dp_answer(s, a, k, 0, p->wire.data, p->wire.len);
}

/* A data-plane packet arrives. */
static void dp_deliver(sim *s, const ctl_pkt *p)
{
    if (p->to_actor >= CLIENT_BASE) {
        client_answer(s, p);
        return;
    }
    sim_actor *t = &s->actors[p->to_actor];
    if (!t->up || !t->dp || t->dying) {
        trace(s, "net %d>b%d #%" PRIu64 ": b%d is down", party_id(s, p->actor), t->id, p->req_id,
              t->id);
        return;
    }
    if (p->kind == PKT_DATA_ANSWER) {
        long k = dp_out_find(t, p->req_id);
        if (k >= 0)
            dp_answer(s, t, k, 0, p->wire.data, p->wire.len);
        return;
    }
    dp_req *q = xcalloc(s, 1, sizeof *q);
    if (!q)
        return;
    *q = (dp_req){.from = p->actor, .req_id = p->req_id};
    const kq_image *img = s->nodes[t->node].bm.img;
    g_dp_actor = t->idx;
    if (!kq_dp_on_request(t->dp, q, p->wire.data, p->wire.len, img, NULL, broker_clock(s, t))) {
        free(q);
        fail(s, "b%d: its data plane refused a request from %d as not a data-plane API", t->id,
             party_id(s, p->actor));
        return;
    }
    dp_loop(s, t);
}

/* The data plane's deadline as an EV_DP_TIMER (a new one replaces the last). */
static void dp_arm(sim *s, sim_actor *a, uint64_t now)
{
    uint64_t d = kq_dp_deadline(a->dp, now), t;
    if (d == KQ_REPLICA_NO_DEADLINE)
        return;
    if (d <= now) {
        if (++a->dp_same_ms > DP_MAX_AT_ONCE) {
            fail(s, "b%d: its data plane asked to run again at once %d times in a row", a->id,
                 a->dp_same_ms);
            return;
        }
        t = s->now + 1;
    } else {
        a->dp_same_ms = 0;
        t = broker_sim_time(s, a, d);
    }
    if (t == a->dp_timer_at)
        return;
    a->dp_timer_at = t;
    a->dp_timer_gen++;
    sched_ev(s, t, EV_DP_TIMER, -1, a->inc, a->dp_timer_gen, NULL, NULL, a->idx);
}

/* A broker's log of a partition as record hashes (view_load). */
typedef struct log_view {
    int64_t start, end, hw;
    uint64_t *hash;
    bool bad;
    char why[200];
} log_view;
static bool view_load(sim *s, sim_actor *a, const uint8_t topic[16], int32_t part, int64_t from,
                      log_view *v);

/* Partitions of the client topic that had an unclean election are exempt from the data
 * checks (Kafka's trade: unclean.leader.election.enable), except in the unclean self-test. */
static bool data_exempt(const sim *s, int32_t part)
{
    return part >= 64 || (s->unclean[part] && s->o.bug != KQ_SIM_BUG_UNCLEAN);
}

/* Leader replica a of a client partition (its status st): what it exposes below its high
 * watermark (what consumers may read) is what any leader exposed there before, and extends
 * what is known. A leader of the newest epoch that exposed records also holds all of them (a
 * new leader holds every committed record; checked once per leadership); a stale leader (of
 * an older epoch, not yet told) need not hold what its successors exposed. */
static void dp_check_readable(sim *s, sim_actor *a, const kq_rm_partition *hp,
                              const kq_replica_status *st, bool new_leadership)
{
    int32_t k = hp->partition;
    if (strcmp(hp->topic, CLIENT_TOPIC) != 0 || data_exempt(s, k))
        return;
    struct readable *r = &s->readable[k];
    if (memcmp(r->topic, hp->topic_id, 16) != 0) { /* a new topic of that name */
        memcpy(r->topic, hp->topic_id, 16);
        r->end = 0;
        r->epoch = -1;
    }
    if (!new_leadership && st->high_watermark <= r->end)
        return;
    log_view v;
    if (!view_load(s, a, hp->topic_id, k, new_leadership ? 0 : r->end, &v)) {
        free(v.hash);
        return;
    }
    bool newest = st->leader_epoch >= r->epoch;
    if (new_leadership && newest && v.end < r->end && v.start < r->end) {
        fail(s,
             "data: leader b%d of %s-%d (epoch %d) ends its log at %" PRId64
             ", but records up to %" PRId64 " were below an earlier leader's high watermark",
             a->id, CLIENT_TOPIC, k, st->leader_epoch, v.end, r->end);
        free(v.hash);
        return;
    }
    int64_t upto = st->high_watermark < v.end ? st->high_watermark : v.end;
    int64_t compare_to = newest ? v.end : upto;
    for (int64_t o = v.start; o < r->end && o < compare_to; o++)
        if (v.hash[o - v.start] != r->hash[o]) {
            fail(s,
                 "data: leader b%d of %s-%d (epoch %d) holds another record at offset %" PRId64
                 " than an earlier leader exposed below its high watermark",
                 a->id, CLIENT_TOPIC, k, st->leader_epoch, o);
            free(v.hash);
            return;
        }
    if (upto > r->end && v.start <= r->end &&
        grow(s, (void **)&r->hash, &r->cap, (size_t)upto, sizeof(uint64_t))) {
        for (int64_t o = r->end; o < upto; o++)
            r->hash[o] = v.hash[o - v.start];
        trace(s, "data: %s-%d readable up to %" PRId64 " (leader b%d epoch %d, ISR %d)",
              CLIENT_TOPIC, k, upto, a->id, st->leader_epoch, st->n_isr);
        r->end = upto;
        if (st->leader_epoch > r->epoch)
            r->epoch = st->leader_epoch;
    }
    free(v.hash);
}

/* The high watermark stays frozen while the committed ISR is below the min.insync.replicas in
 * force (capped by the replication factor): checked between two loops that saw the same
 * leader epoch, partition epoch and min.insync.replicas on a leader replica. */
static void dp_check_hw(sim *s, sim_actor *a)
{
    size_t n = 0;
    const kq_rm_partition *hp = kq_rm_partitions(a->rm, &n);
    for (size_t i = 0; i < n && !s->failed; i++) {
        kq_replica_status st;
        kq_replica_get_status(kq_rm_replica(a->rm, i), &st);
        if (st.role != KQ_REPLICA_LEADER)
            continue;
        hw_seen *h = NULL;
        for (size_t k = 0; k < a->n_hws && !h; k++)
            if (a->hws[k].part == hp[i].partition && !memcmp(a->hws[k].topic, hp[i].topic_id, 16))
                h = &a->hws[k];
        if (!h) {
            if (!grow(s, (void **)&a->hws, &a->cap_hws, a->n_hws + 1, sizeof(hw_seen)))
                return;
            h = &a->hws[a->n_hws++];
            memset(h, 0, sizeof *h);
            memcpy(h->topic, hp[i].topic_id, 16);
            h->part = hp[i].partition;
            h->leader_epoch = -1;
        }
        /* the seam: the min.insync.replicas of the broker's image is in force on its leader
         * replica once the replica manager has acted on that image (this loop) */
        const kq_image *img = s->nodes[a->node].bm.img;
        int32_t conf = kq_image_min_isr(img, hp[i].topic, 0);
        int32_t want = conf > 0 ? conf : s->settings.min_insync_replicas;
        if (st.min_insync_replicas != want) {
            fail(s,
                 "b%d: its leader replica of %s-%d enforces min.insync.replicas %d, its metadata "
                 "(applied to %" PRId64 ") says %d",
                 a->id, hp[i].topic, hp[i].partition, st.min_insync_replicas,
                 s->nodes[a->node].bm.applied_end, want);
            return;
        }
        int32_t need =
            st.min_insync_replicas < st.n_replicas ? st.min_insync_replicas : st.n_replicas;
        char why[200];
        int rc = kq_sim_leaders_note(s->leaders, hp[i].topic_id, hp[i].partition, st.leader_epoch,
                                     a->id, why, sizeof why);
        if (rc) {
            fail(s, "b%d: %s: %s", a->id, hp[i].topic, rc == KQ_ERR_NOMEM ? "out of memory" : why);
            return;
        }
        if (h->leader_epoch == st.leader_epoch && st.high_watermark < h->hw) {
            fail(s,
                 "b%d: high watermark of %s-%d went back from %" PRId64 " to %" PRId64
                 " in leader epoch %d",
                 a->id, hp[i].topic, hp[i].partition, h->hw, st.high_watermark, st.leader_epoch);
            return;
        }
        dp_check_readable(s, a, &hp[i], &st, h->leader_epoch != st.leader_epoch);
        if (s->failed)
            return;
        if (h->leader_epoch == st.leader_epoch && h->partition_epoch == st.partition_epoch &&
            h->min_isr == st.min_insync_replicas && st.n_isr < need && st.high_watermark > h->hw) {
            const kq_topic *t = kq_image_topic_by_id(s->ref, hp[i].topic_id);
            fail(s,
                 "b%d: high watermark of %s-%d went from %" PRId64 " to %" PRId64
                 " with %d ISR members, below min.insync.replicas %d",
                 a->id, t && t->name ? t->name : "?", hp[i].partition, h->hw, st.high_watermark,
                 st.n_isr, st.min_insync_replicas);
        }
        h->leader_epoch = st.leader_epoch;
        h->partition_epoch = st.partition_epoch;
        h->min_isr = st.min_insync_replicas;
        h->n_isr = st.n_isr;
        h->hw = st.high_watermark;
    }
}

/* One iteration of kq-broker-agent's loop for the data plane, in its order: timers, commit
 * (then PERSISTED), the replica manager on new metadata, sends and answers. */
/* The process exits on its disk error: at once, but not from inside another host's step (a
 * loop may run inside its observer's); until then its data plane is not called again, so
 * nothing it queued after the failed commit leaves it. */
static void dp_die(sim *s, sim_actor *a)
{
    sched_ev(s, s->now, EV_ACTOR_DIE, -1, a->inc, 0, NULL, NULL, a->idx);
}

static void dp_loop(sim *s, sim_actor *a)
{
    if (!a->up || !a->dp || s->failed || a->dying)
        return;
    uint64_t now = broker_clock(s, a);
    sim_node *n = &s->nodes[a->node];
    const kq_image *img = n->bm.img;
    g_dp_actor = a->idx;
    kq_dp_tick(a->dp, img, now);
    if (!s->liveness && !a->disk_armed && s->p_disk_err &&
        kq_prng_below(&s->fault, 10000) < s->p_disk_err) {
        int rc = kq_prng_permille(&s->fault, 300) ? KQ_ERR_FULL : KQ_ERR_IO;
        trace(s, "b%d: its partition-log disk will fail the next commit (%s)", a->id,
              kq_err_name(rc));
        kq_plog_mem_fail_next_commit(a->disk, rc);
        a->disk_armed = true;
    }
    bool slow = !s->liveness && s->p_slow_sync && kq_plog_in_txn(a->plog) &&
                kq_prng_below(&s->timing, 1000) < s->p_slow_sync;
    kq_dp_commit(a->dp, img, now);
    if (a->dying) {
        dp_die(s, a);
        return;
    }
    if (slow) { /* kq-broker-agent's loop waits in the commit's fsync: nothing runs meanwhile */
        uint64_t d = kq_prng_range(&s->timing, 200, 3000);
        trace(s, "b%d: a slow partition-log commit stalls its loop for %" PRIu64 " ms", a->id, d);
        pause_until(s, n, s->now + d);
    }
    if (n->bm.applied_end != a->rm_applied_end && /* as kq-broker-agent */
        kq_bmeta_publishable(&n->bm, n->st.leader_high_watermark, a->bl.caught_up)) {
        char why[512];
        a->rm_applied_end = n->bm.applied_end;
        int rc = kq_rm_on_metadata(a->rm, img, now, why, sizeof why);
        if (rc != 0 && a->disk_armed && (rc == KQ_ERR_IO || rc == KQ_ERR_FULL)) {
            trace(s, "b%d: exits on its disk error (kq-broker-agent does): %s", a->id, why);
            a->dying = true;
        }
        if (a->dying) {
            dp_die(s, a);
            return;
        }
        if (rc != 0) {
            fail(s, "b%d: replica manager: %s", a->id, why);
            return;
        }
        kq_dp_after_metadata(a->dp, img, now);
    }
    sim_node *l = node_by_id(s, n->st.leader_id);
    kq_dp_pump(a->dp, img, l && l->voter ? l->id : -1, a->bl.broker_epoch, now);
    dp_check_hw(s, a);
    if (!s->failed)
        dp_arm(s, a, now);
}

/* A broker process starts: its partition logs as the disk kept them, a new replica manager and
 * data plane. */
static void dp_start(sim *s, sim_actor *a)
{
    if (!a->disk) {
        kq_store_identity id = {.node_id = a->id};
        snprintf(id.cluster_id, sizeof id.cluster_id, "%s", CLUSTER_ID);
        a->disk = kq_plog_mem_disk_new(&id);
        if (a->disk && s->o.bug == KQ_SIM_BUG_BROKER_DISK_LIES)
            kq_plog_mem_lie(a->disk, true);
    }
    kq_rm_config rmc = {.node_id = a->id,
                        .replica_lag_time_max_ms = DP_LAG_MAX_MS,
                        .min_insync_replicas = s->settings.min_insync_replicas};
    kq_dp_config dc = {
        .node_id = a->id,
        .cluster_id = CLUSTER_ID,
        .replica_fetch_wait_max_ms = DP_FETCH_WAIT_MS,
        .replica_fetch_max_bytes = 1u << 20,
        .request_timeout_ms = DP_REQUEST_TIMEOUT_MS,
        .max_msg_bytes = 16u << 20,
        .max_waiting = 1024,
        .net = {.ctx = a, .reply = dp_net_reply, .drop = dp_net_drop, .send = dp_net_send},
        .fatal = dp_fatal};
    if (!a->disk || kq_plog_mem_open(a->disk, &a->plog) != 0 ||
        !(a->rm = kq_rm_new(&rmc, a->plog)) || !(a->dp = kq_dp_new(&dc, a->rm))) {
        fail(s, "b%d: cannot start its data plane (out of memory)", a->id);
        return;
    }
    dp_trace_logs(s, a); /* what survived */
    a->rm_applied_end = 0;
    a->n_outs = 0;
    a->dp_timer_at = 0;
    a->dp_same_ms = 0;
    a->dying = false;
}

/* A broker process stops (a crash): what its partition logs did not commit is lost. */
static void dp_stop(sim_actor *a)
{
    kq_dp_free(a->dp);
    kq_rm_free(a->rm);
    kq_plog_close(a->plog);
    a->dp = NULL;
    a->rm = NULL;
    a->plog = NULL;
    a->n_outs = 0;
    a->n_hws = 0;
    a->dp_timer_gen++;
    a->dp_timer_at = 0;
}

/* ---- data clients: producers and a consumer of CLIENT_TOPIC, over the data-plane API ---- */

#define CLIENT_TIMEOUT_MS 3000

static void client_tick_at(sim *s, sim_client *c, uint64_t at)
{
    c->tick_gen++;
    sched_ev(s, at, EV_CLIENT_TICK, -1, (uint64_t)c->idx, c->tick_gen, NULL, NULL, -1);
}

/* Send a data-plane request (takes buf) to broker actor b. */
static void client_send(sim *s, sim_client *c, int b, uint32_t api, kq_buf *buf)
{
    ctl_pkt *p = xcalloc(s, 1, sizeof *p);
    if (!p) {
        kq_buf_free(buf);
        return;
    }
    *p = (ctl_pkt){.kind = PKT_DATA_REQ,
                   .actor = CLIENT_BASE + c->idx,
                   .to_actor = b,
                   .node = -1,
                   .req_id = ++s->next_req_id,
                   .api = api,
                   .wire = *buf};
    *buf = (kq_buf){0};
    c->req_id = p->req_id;
    c->req_api = api;
    c->sent++;
    trace(s, "  c%d > b%d #%" PRIu64 " %s", c->idx, s->actors[b].id, p->req_id, api_name(api));
    sched_ev(s, s->now + CLIENT_TIMEOUT_MS, EV_CLIENT_TIMEOUT, -1, (uint64_t)c->idx, p->req_id,
             NULL, NULL, -1);
    dp_pkt_send(s, p);
}

/* The value of record k of a producer's batch: unique per producer and sequence. */
static size_t client_value(const sim_client *c, int32_t seq, char *buf, size_t len)
{
    return (size_t)snprintf(buf, len, "%c%d.%d", c->pid >= 0 ? 'i' : 'n', c->idx, seq);
}

static void client_metadata(sim *s, sim_client *c)
{
    const char *topics[] = {CLIENT_TOPIC};
    kq_data_metadata_request mr = {.topics = topics, .n_topics = 1};
    kq_buf buf = {0};
    int b = (int)kq_prng_below(&s->work, (uint64_t)s->n_brokers);
    if (kq_data_encode_metadata_request(CLUSTER_ID, -1, &mr, &buf) != 0) {
        fail(s, "codec: c%d cannot encode a Metadata request", c->idx);
        return;
    }
    client_send(s, c, b, KQ_API_METADATA, &buf);
}

static void client_produce(sim *s, sim_client *c)
{
    if (c->n_batch == 0) {
        if (s->liveness)
            return; /* no new records once the faults stop; a batch in flight is retried */
        c->n_batch = (int)kq_prng_range(&s->work, 1, CLIENT_MAX_BATCH);
    }
    char vals[CLIENT_MAX_BATCH][32];
    const uint8_t *recs[CLIENT_MAX_BATCH];
    size_t lens[CLIENT_MAX_BATCH];
    for (int i = 0; i < c->n_batch; i++) {
        lens[i] = client_value(c, c->seq + i, vals[i], sizeof vals[i]);
        recs[i] = (const uint8_t *)vals[i];
    }
    kq_produce_request pr = {.partition = c->part,
                             .acks = s->o.bug == KQ_SIM_BUG_ACKS_ONE_AS_ALL ? 1 : c->acks,
                             .timeout_ms = 2000,
                             .producer_id = c->pid,
                             .producer_epoch = c->pid >= 0 ? 0 : -1,
                             .base_sequence = c->pid >= 0 ? c->seq : -1,
                             .records = recs,
                             .record_lens = lens,
                             .n_records = (size_t)c->n_batch};
    memcpy(pr.topic_id, c->topic, 16);
    kq_buf buf = {0};
    if (kq_data_encode_produce_request(CLUSTER_ID, -1, &pr, &buf) != 0) {
        fail(s, "codec: c%d cannot encode a Produce request", c->idx);
        return;
    }
    client_send(s, c, broker_index(s, c->leader), KQ_API_PRODUCE, &buf);
}

static void client_fetch(sim *s, sim_client *c)
{
    kq_data_fetch_partition fp = {.partition = c->part,
                                  .current_leader_epoch = c->leader_epoch,
                                  .fetch_offset = c->next,
                                  .last_fetched_epoch = -1,
                                  .log_start_offset = -1,
                                  .partition_max_bytes = 1 << 16};
    memcpy(fp.topic_id, c->topic, 16);
    kq_data_fetch_request fr = {.replica_id = KQ_DATA_CONSUMER_REPLICA_ID,
                                .broker_epoch = -1,
                                .max_wait_ms = 200,
                                .min_bytes = 1,
                                .max_bytes = 1 << 20,
                                .partitions = &fp,
                                .n_partitions = 1};
    kq_buf buf = {0};
    if (kq_data_encode_fetch_request(CLUSTER_ID, -1, &fr, &buf) != 0) {
        fail(s, "codec: c%d cannot encode a Fetch request", c->idx);
        return;
    }
    client_send(s, c, broker_index(s, c->leader), KQ_API_DATA_FETCH, &buf);
}

static void client_tick(sim *s, sim_client *c)
{
    if (c->req_id == 0) {
        if (!c->have_topic || c->leader < 0 || broker_index(s, c->leader) < 0)
            client_metadata(s, c);
        else if (c->consumer)
            client_fetch(s, c);
        else
            client_produce(s, c);
    }
    client_tick_at(s, c, s->now + kq_prng_range(&s->work, 20, 300));
}

static bool rec_push(sim *s, data_rec **v, size_t *n, size_t *cap, data_rec r)
{
    if (!grow(s, (void **)v, cap, *n + 1, sizeof(data_rec)))
        return false;
    (*v)[(*n)++] = r;
    return true;
}

static void client_on_metadata(sim *s, sim_client *c, const ctl_pkt *p)
{
    kq_data_metadata_response mr;
    char err[200];
    memset(&mr, 0, sizeof mr);
    if (kq_data_decode_metadata_response(p->wire.data, p->wire.len, &mr, err, sizeof err) != 0) {
        fail(s, "codec: c%d cannot decode a Metadata answer: %s", c->idx, err);
        return;
    }
    if (mr.error)
        trace(s, "c%d < Metadata: %s", c->idx, kq_err_name(mr.error));
    for (size_t i = 0; i < mr.n_topics; i++) {
        const kq_data_metadata_topic *t = &mr.topics[i];
        if (t->error || strcmp(t->name, CLIENT_TOPIC) != 0 || t->n_partitions == 0)
            continue;
        memcpy(c->topic, t->topic_id, 16);
        c->have_topic = true;
        const kq_data_metadata_partition *mp = &t->partitions[c->part_pick % t->n_partitions];
        c->part = mp->partition;
        c->leader = mp->leader_id;
        c->leader_epoch = mp->leader_epoch;
    }
    trace(s, "c%d < Metadata: %s-%d leader %d epoch %d", c->idx, CLIENT_TOPIC, c->part, c->leader,
          c->leader_epoch);
    kq_data_metadata_response_free(&mr);
}

static bool client_retriable(int e)
{
    return e == KQ_ERR_NOT_LEADER_OR_FOLLOWER || e == KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION ||
           e == KQ_ERR_NOT_ENOUGH_REPLICAS || e == KQ_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND ||
           e == KQ_ERR_REQUEST_TIMED_OUT || e == KQ_ERR_LEADER_NOT_AVAILABLE ||
           e == KQ_ERR_FENCED_LEADER_EPOCH || e == KQ_ERR_UNKNOWN_LEADER_EPOCH ||
           e == KQ_ERR_NETWORK_EXCEPTION || e == KQ_ERR_OFFSET_OUT_OF_RANGE;
}

static void client_on_produce(sim *s, sim_client *c, const ctl_pkt *p)
{
    kq_produce_response pr;
    char err[200];
    memset(&pr, 0, sizeof pr);
    if (kq_data_decode_produce_response(p->wire.data, p->wire.len, &pr, err, sizeof err) != 0) {
        fail(s, "codec: c%d cannot decode a Produce answer: %s", c->idx, err);
        return;
    }
    trace(s, "c%d < Produce %s-%d seq %d x%d acks %d: %s at %" PRId64, c->idx, CLIENT_TOPIC,
          c->part, c->seq, c->n_batch, c->acks, pr.error ? kq_err_name(pr.error) : "ok",
          pr.base_offset);
    if (pr.error == 0) {
        for (int i = 0; c->acks == KQ_DATA_ACKS_ALL && i < c->n_batch; i++) {
            char v[32];
            size_t len = client_value(c, c->seq + i, v, sizeof v);
            data_rec r = {.part = c->part,
                          .offset = pr.base_offset + i,
                          .hash = fnv1a(0xCBF29CE484222325ull, v, len),
                          .client = c->idx,
                          .seq = c->seq + i};
            if (!rec_push(s, &s->acked, &s->n_acked, &s->cap_acked, r))
                return;
        }
        c->acked += (uint64_t)c->n_batch;
        c->seq += c->n_batch;
        c->n_batch = 0;
        return;
    }
    if (pr.error == KQ_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER) {
        /* a leader acting on stale metadata (a zombie: it was replaced, its image lags) may not
         * have the records the new leader acknowledged; what was acknowledged is checked at
         * the end */
        trace(s, "c%d: %s from b%d: %s", c->idx, kq_err_name(pr.error), c->leader,
              pr.error_message);
        c->leader = -1;
        return;
    }
    if (!client_retriable(pr.error)) {
        fail(s, "c%d: Produce to b%d refused with %s: %s", c->idx, c->leader, kq_err_name(pr.error),
             pr.error_message);
        return;
    }
    if (pr.error != KQ_ERR_NOT_ENOUGH_REPLICAS && pr.error != KQ_ERR_REQUEST_TIMED_OUT)
        c->leader = -1; /* look the leader up again */
}

static int consume_rec(void *arg, int64_t offset, const uint8_t *value, size_t len)
{
    sim_client *c = arg;
    sim *s = g_sim;
    data_rec r = {.part = c->part,
                  .offset = offset,
                  .hash = fnv1a(0xCBF29CE484222325ull, value, len),
                  .client = c->idx};
    return rec_push(s, &s->consumed, &s->n_consumed, &s->cap_consumed, r) ? 0 : KQ_ERR_NOMEM;
}

static void client_on_fetch(sim *s, sim_client *c, const ctl_pkt *p)
{
    kq_data_fetch_response fr;
    char err[200];
    memset(&fr, 0, sizeof fr);
    if (kq_data_decode_fetch_response(p->wire.data, p->wire.len, &fr, err, sizeof err) != 0) {
        fail(s, "codec: c%d cannot decode a Fetch answer: %s", c->idx, err);
        return;
    }
    int e = fr.error               ? fr.error
            : fr.n_partitions == 1 ? fr.partitions[0].error
                                   : KQ_ERR_INVALID_REQUEST;
    if (e) {
        trace(s, "c%d < Fetch %s-%d at %" PRId64 ": %s", c->idx, CLIENT_TOPIC, c->part, c->next,
              kq_err_name(e));
        if (!client_retriable(e))
            fail(s, "c%d: Fetch refused with %s", c->idx, kq_err_name(e));
        c->leader = -1;
        kq_data_fetch_response_free(&fr);
        return;
    }
    const kq_data_fetch_partition_result *r = &fr.partitions[0];
    for (size_t i = 0; i < r->n_batches && !s->failed; i++) {
        const kq_data_batch *b = &r->batches[i];
        if (b->base_offset + b->count <= c->next)
            continue;
        if (b->base_offset + b->count > r->high_watermark) {
            fail(s,
                 "c%d: a consumer Fetch of %s-%d returned offsets up to %" PRId64
                 ", above the high watermark %" PRId64,
                 c->idx, CLIENT_TOPIC, c->part, b->base_offset + b->count, r->high_watermark);
            break;
        }
        if (kq_data_records_walk(b->records, b->len, b->base_offset, b->count, consume_rec, c, err,
                                 sizeof err) != 0) {
            fail(s, "c%d: fetched batch at %" PRId64 " does not walk: %s", c->idx, b->base_offset,
                 err);
            break;
        }
        c->read += (uint64_t)b->count;
        c->next = b->base_offset + b->count;
    }
    kq_data_fetch_response_free(&fr);
}

static void client_answer(sim *s, const ctl_pkt *p)
{
    sim_client *c = &s->clients[p->to_actor - CLIENT_BASE];
    if (c->req_id != p->req_id)
        return; /* timed out already */
    c->req_id = 0;
    if (c->req_api == KQ_API_METADATA)
        client_on_metadata(s, c, p);
    else if (c->req_api == KQ_API_PRODUCE)
        client_on_produce(s, c, p);
    else
        client_on_fetch(s, c, p);
}

static void client_timeout(sim *s, sim_client *c, uint64_t req_id)
{
    if (c->req_id != req_id)
        return;
    c->req_id = 0;
    c->leader = -1;
    trace(s, "c%d: #%" PRIu64 " %s timed out", c->idx, req_id, api_name(c->req_api));
}

static void clients_setup(sim *s)
{
    s->n_clients = 1 + (int)kq_prng_range(&s->ctl, 1, MAX_CLIENTS - 1);
    s->clients = xcalloc(s, MAX_CLIENTS, sizeof(sim_client));
    if (!s->clients)
        return;
    for (int i = 0; i < s->n_clients; i++) {
        sim_client *c = &s->clients[i];
        c->idx = i;
        c->consumer = i == s->n_clients - 1;
        uint32_t r = (uint32_t)kq_prng_below(&s->ctl, 10);
        c->acks = r < 7 ? KQ_DATA_ACKS_ALL : r < 9 ? 1 : 0;
        c->pid = !c->consumer && c->acks == KQ_DATA_ACKS_ALL
                     ? (int64_t)kq_prng_range(&s->ctl, 1, 1u << 30)
                     : KQ_DATA_NO_PRODUCER_ID;
        c->part_pick = (uint32_t)kq_prng_below(&s->ctl, 4);
        c->leader = -1;
        c->leader_epoch = -1;
        client_tick_at(s, c, 2000 + kq_prng_below(&s->ctl, 2000));
    }
}

/* After every step of a broker's metadata observer (kq-broker-agent's apply_committed and
 * the lifecycle calls of its loop): replay what is committed and durable into the image,
 * compare it with the reference at the same offset, then tell the lifecycle the observer's
 * leader and whether the image reached the first high watermark (ready to unfence). */
/* A snapshot replaces the broker's image (at start, or fetched from the leader):
 * broker_meta checks it against the reference and hands it to the replica manager. */
static bool bm_load_snapshot(sim *s, sim_node *n, const sim_snap *sn, char *err, size_t errlen)
{
    (void)s;
    if (!n->bm_on) {
        snprintf(err, errlen, "b%d has no metadata image", n->id);
        return false;
    }
    if (kq_bmeta_load_snapshot(&n->bm, sn->data + SNAP_HDR, sn->len - SNAP_HDR, sn->id.end_offset,
                               err, errlen) != 0)
        return false;
    n->bm_seen_end = -1;
    return true;
}

static void broker_meta(sim *s, sim_node *n)
{
    sim_actor *a = &s->actors[n->actor];
    char why[400];
    if (!n->bm_on || !a->up)
        return;
    int64_t upto = s->o.bug == KQ_SIM_BUG_BROKER_UNCOMMITTED
                       ? log_end(&n->mlog)
                       : kq_raft_host_applicable_end(&n->host);
    int64_t before = n->bm_seen_end; /* -1 after a snapshot replaced the image */
    while (n->bm.applied_end < upto && !s->failed) {
        long i = log_find(&n->mlog, n->bm.applied_end);
        if (i < 0) {
            fail(s, "b%d: committed offset %" PRId64 " is not in its log", n->id,
                 n->bm.applied_end);
            return;
        }
        const sim_batch *b = &n->mlog.b[i];
        if (kq_bmeta_apply_batch(&n->bm, b->base, b->count, b->data, b->len, why, sizeof why)) {
            fail(s, "b%d: committed batch at %" PRId64 " cannot apply to its image: %s", n->id,
                 b->base, why);
            return;
        }
    }
    int64_t end = n->bm.applied_end;
    n->bm_seen_end = end;
    if (end != before) {
        if (end > s->ref_end) {
            fail(s, "b%d applied its image to %" PRId64 ", beyond the committed end %" PRId64,
                 n->id, end, s->ref_end);
            return;
        }
        if ((size_t)end >= s->cap_ref_hash || !s->ref_hash[end].set) {
            fail(s, "b%d applied its image to %" PRId64 ", inside a committed batch", n->id, end);
            return;
        }
        uint64_t mine = kq_image_hash(n->bm.img);
        s->res->image_checks++;
        if (mine != s->ref_hash[end].hash) {
            fail(s,
                 "b%d image at offset %" PRId64 ": hash %016" PRIx64 " differs from the "
                 "committed reference %016" PRIx64,
                 n->id, end, mine, s->ref_hash[end].hash);
            return;
        }
    }
    int32_t seen = a->bl.observed;
    kq_bl_set_leader(&a->bl, n->st.leader_id);
    if (kq_bmeta_caught_up(&n->bm, n->st.leader_high_watermark) && !a->bl.ready_to_unfence) {
        trace(s, "b%d: metadata replayed to %" PRId64 "; ready to unfence", n->id, end - 1);
        kq_bl_set_ready(&a->bl);
    }
    if (a->bl.observed != seen && n->st.leader_id >= 0)
        actor_tick_at(s, a, s->now); /* the loop polls the lifecycle at once */
    if (end != before || a->bl.observed != seen)
        dp_loop(s, a);
}

/* The lifecycle's next step: register or heartbeat to the controller it picks (the leader hint
 * of the last NOT_CONTROLLER, else the leader its metadata observer follows, else the voters in
 * turn), on its own schedule, with the offset its image has applied. */
static void broker_tick(sim *s, sim_actor *a)
{
    kq_bl_action act;
    kq_bl_poll(&a->bl, broker_clock(s, a), s->nodes[a->node].bm.applied_end - 1, &act);
    if (act.exit && act.exit_code == 0) {
        broker_stop(s, a, true, act.exit_reason);
        return;
    }
    if (act.exit) {
        fail(s, "b%d: its lifecycle stopped it (exit %d): %s", a->id, act.exit_code,
             act.exit_reason ? act.exit_reason : "");
        return;
    }
    if (act.send != KQ_BL_SEND_NONE) {
        sim_node *n = node_by_id(s, act.target);
        if (!n) {
            fail(s, "b%d: its lifecycle picked controller %d, not a voter", a->id, act.target);
            return;
        }
        a->ctl = n->idx;
        if (act.send == KQ_BL_SEND_REGISTRATION)
            broker_register(s, a);
        else
            broker_heartbeat(s, a, &act.hb);
    }
    actor_tick_at(s, a, broker_sim_time(s, a, act.next_ms));
}

/* The answer (or the timeout, error REQUEST_TIMED_OUT) of the lifecycle's request. */
static void broker_answer(sim *s, sim_actor *a, uint32_t api, int error, int64_t epoch,
                          const kq_heartbeat_result *hr, int32_t hint)
{
    bool was_fenced = a->fenced;
    if (api == KQ_API_BROKER_REGISTRATION)
        kq_bl_on_registration(&a->bl, broker_clock(s, a), error, epoch, hint);
    else
        kq_bl_on_heartbeat(&a->bl, broker_clock(s, a), error, hr, hint);
    broker_sync(a);
    if (a->fenced != was_fenced)
        trace(s, "b%d: now %s (%s)", a->id, a->fenced ? "fenced" : "unfenced",
              kq_bl_state_name(a->bl.state));
    actor_tick_at(s, a, s->now + 1);
    dp_loop(s, a);
}

/* A random topic of the committed state (not the clients' when not_clients). */
static const kq_topic *admin_pick_topic(sim *s, bool not_clients)
{
    const kq_topic *pick = NULL, *t = NULL;
    uint64_t seen = 0;
    while ((t = kq_image_topic_next(s->ref, t)) != NULL) {
        if (!t->name || (not_clients && strcmp(t->name, CLIENT_TOPIC) == 0))
            continue;
        if (kq_prng_below(&s->ctl, ++seen) == 0)
            pick = t;
    }
    return pick;
}

/* The admin operation in progress goes (again) to the controller the client believes
 * active, unless the client's timeout has passed: then it gives the operation up, which is a
 * failure for one submitted after the faults stopped (a healthy cluster answers well within). */
static void admin_retry(sim *s, sim_actor *a)
{
    if (!a->op_pending || a->req_id[CHAN_MAIN] != 0)
        return;
    if (s->now - a->op_start >= ADMIN_TIMEOUT_MS) {
        trace(s, "admin: %s given up after %u tries in %" PRIu64 " ms", api_name(a->op_api),
              a->op_tries, s->now - a->op_start);
        if (a->op_live)
            fail(s,
                 "admin: %s submitted after the faults stopped got no answer in %u tries within "
                 "the client's timeout (%d ms)",
                 api_name(a->op_api), a->op_tries, ADMIN_TIMEOUT_MS);
        a->op_pending = false;
        kq_buf_free(&a->op_wire);
        return;
    }
    kq_buf b = {.data = xcalloc(s, a->op_wire.len, 1), .len = a->op_wire.len};
    if (!b.data)
        return;
    memcpy(b.data, a->op_wire.data, a->op_wire.len);
    a->op_tries++;
    actor_send_wire(s, a, CHAN_MAIN, a->op_api, b);
}

static void admin_start(sim *s, sim_actor *a, uint32_t api);

/* A new admin operation (encoded once, resent unchanged on every retry). */
static void admin_submit(sim *s, sim_actor *a, const kq_ctl_request *r)
{
    kq_buf_free(&a->op_wire);
    int rc = kq_ctl_encode_request(CLUSTER_ID, a->id, r, &a->op_wire);
    if (rc) {
        fail(s, "codec: the admin client cannot encode a %s: %s", api_name(r->api_key),
             kq_err_name(rc));
        return;
    }
    admin_start(s, a, r->api_key);
}

/* The operation encoded in a->op_wire: its first try. */
static void admin_start(sim *s, sim_actor *a, uint32_t api)
{
    a->op_api = api;
    a->op_start = s->now;
    a->op_tries = 0;
    a->op_pending = true;
    a->op_live = s->liveness;
    admin_retry(s, a);
}

/* The controller answered the operation in progress (per-item results, each the final word). */
static void admin_done(sim *s, sim_actor *a)
{
    if (!a->op_pending)
        return;
    trace(s, "admin: %s answered after %u tries in %" PRIu64 " ms", api_name(a->op_api),
          a->op_tries, s->now - a->op_start);
    if (a->op_tries > 1)
        s->res->admin_retried++;
    a->op_pending = false;
    if (a->op_live)
        a->live_op_done = true;
    kq_buf_free(&a->op_wire);
}

/* The voter set the operator sees (kq metadata-quorum describe --status): the leader's. */
static const kq_voter_set *admin_voters(const sim *s)
{
    int64_t at;
    for (int i = 0; i < s->n_voters; i++)
        if (s->nodes[i].up && s->nodes[i].st.role == KQ_RAFT_LEADER)
            return vx_top(&s->nodes[i], &at);
    return NULL;
}

/* kq metadata-quorum add-controller / remove-controller for a controller drawn at random:
 * added when it is not a voter, removed when it is (sometimes the other way round, which
 * the leader must refuse), sometimes with the leader crashing while the change is in flight. */
static void admin_voter_change(sim *s, sim_actor *a)
{
    sim_node *c = &s->nodes[kq_prng_below(&s->memb, (uint64_t)s->n_voters)];
    const kq_voter_set *set = admin_voters(s);
    kq_voter v;
    voter_of(c, &v);
    bool member = false;
    for (int i = 0; set && i < set->n; i++)
        member |= kq_voter_key_equal(&set->v[i].key, &v.key);
    if (kq_prng_permille(&s->memb, 100))
        member = !member; /* a change the leader refuses */
    kq_raft_msg m;
    memset(&m, 0, sizeof m);
    m.type = member ? KQ_RAFT_REMOVE_VOTER_REQ : KQ_RAFT_ADD_VOTER_REQ;
    m.from = a->id;
    m.to = c->id;
    m.leader_id = KQ_RAFT_NO_ID;
    m.u.voter_req.voter = &v;
    kq_buf_free(&a->op_wire);
    int rc = kq_codec_encode_raft_request(&m, CLUSTER_ID, &a->op_wire);
    if (rc) {
        fail(s, "codec: the admin client cannot encode a %s: %s", msg_name(m.type),
             kq_err_name(rc));
        return;
    }
    a->memb_node = c->idx;
    a->memb_voter = v;
    trace(s, "admin > %s voter n%d/%02x", member ? "remove" : "add", c->id, v.key.dir[0]);
    admin_start(s, a, member ? KQ_API_REMOVE_RAFT_VOTER : KQ_API_ADD_RAFT_VOTER);
    if (kq_prng_permille(&s->memb, s->p_kill_leader))
        sched(s, s->now + kq_prng_range(&s->memb, 1, 300), EV_KILL_LEADER, -1, 0, 0, NULL);
}

/* kq storage format again after the controller was removed from the voters (the runbook's
 * replacement of a controller whose disk died): everything on its disk goes, a new directory
 * id, no initial voters; it restarts as an observer that the admin client may add again. */
static void controller_wipe(sim *s, sim_node *c)
{
    trace(s,
          "n%d > WIPE: removed from the voters, its directory is formatted again "
          "(--no-initial-controllers, a new directory id)",
          c->id);
    if (c->up)
        node_crash(s, c, false);
    log_reset(&c->dlog, 0, 0);
    log_reset(&c->mlog, 0, 0);
    c->dq = (kq_raft_qstate){.epoch = 0, .voted_id = -1, .leader_id = -1};
    snap_free(&c->snaps[0]);
    snap_free(&c->snaps[1]);
    snap_free(&c->part);
    c->boot = false;
    c->was_voter = false;
    c->n_vx = 0;
    new_directory(s, c);
    s->res->controllers_wiped++;
}

/* The answer to a voter change: retried after NOT_LEADER_OR_FOLLOWER (to the leader it names)
 * and REQUEST_TIMED_OUT, else the final word; a removal that committed sometimes goes on to
 * wipe the controller. */
static void admin_voter_answer(sim *s, sim_actor *a, const kq_response *env)
{
    int e = env->error;
    if (e == KQ_ERR_NOT_LEADER_OR_FOLLOWER || e == KQ_ERR_NOT_CONTROLLER) {
        int32_t lid = env->leader_id >= 0 ? env->leader_id : env->raft.leader_id;
        sim_node *l = lid >= 0 ? node_by_id(s, lid) : NULL;
        if (l && l->actor < 0 && l->idx != a->ctl)
            a->ctl = l->idx;
        else
            actor_other_ctl(s, a);
        actor_tick_at(s, a, s->now + 20 + kq_prng_below(&s->ctl, 80));
        return;
    }
    if (e == KQ_ERR_REQUEST_TIMED_OUT) {
        actor_tick_at(s, a, s->now + ADMIN_RETRY_MS);
        return;
    }
    bool add = a->op_api == KQ_API_ADD_RAFT_VOTER;
    sim_node *c = &s->nodes[a->memb_node];
    trace(s, "admin < %s voter n%d/%02x: %s%s%s", add ? "add" : "remove", c->id,
          a->memb_voter.key.dir[0], e ? kq_err_name(e) : "NONE", e ? ": " : "",
          e ? env->error_message : "");
    if (e == 0 && add)
        s->res->voters_added++;
    else if (e == 0)
        s->res->voters_removed++;
    else
        s->res->voter_refusals++;
    admin_done(s, a);
    if (e == 0 && !add && !s->liveness && key_is_node(&a->memb_voter.key, c) &&
        kq_prng_permille(&s->memb, s->p_wipe))
        controller_wipe(s, c);
}

static void admin_tick(sim *s, sim_actor *a)
{
    kq_ctl_request r;
    memset(&r, 0, sizeof r);
    char name[32];
    if (a->topics_done < s->n_topics_target) {
        snprintf(name, sizeof name, "t%u", a->topics_done);
        kq_config_kv cfg = {"min.insync.replicas", "2"};
        int32_t rf =
            (int32_t)kq_prng_range(&s->ctl, 1, s->n_brokers < 3 ? (uint64_t)s->n_brokers : 3);
        kq_create_topic t = {.name = name,
                             .num_partitions = (int32_t)kq_prng_range(&s->ctl, 1, 4),
                             .replication_factor = rf,
                             .configs = &cfg,
                             .n_configs = rf == 3 && kq_prng_permille(&s->ctl, 300) ? 1 : 0};
        r.api_key = KQ_API_CREATE_TOPICS;
        r.create_topics.topics = &t;
        r.create_topics.n = 1;
        admin_submit(s, a, &r);
        return;
    }
    a->admin_rounds++;
    if (s->dynamic && !s->liveness && kq_prng_permille(&s->memb, s->p_change)) {
        admin_voter_change(s, a);
        return;
    }
    if (s->liveness) { /* after the faults: an operation that changes nothing the checks exempt */
        r.api_key = KQ_API_ELECT_LEADERS;
        r.elect_leaders.election_type = KQ_ELECTION_TYPE_PREFERRED;
        r.elect_leaders.all_partitions = true;
        trace(s, "admin > preferred leader election (after the faults)");
        admin_submit(s, a, &r);
        return;
    }
    uint32_t what = (uint32_t)kq_prng_below(&s->ctl, 16);
    const kq_topic *t = admin_pick_topic(s, what == 6);
    kq_config_op op = {.op = KQ_CONFIG_OP_SET};
    kq_alter_config_resource res = {
        .resource_type = KQ_CONFIG_RESOURCE_TOPIC, .ops = &op, .n_ops = 1};
    kq_delete_topic del = {0};
    if (what <= 2 && t) { /* min.insync.replicas: set or back to the default */
        static const char *vals[] = {"1", "2", "3"};
        op.name = "min.insync.replicas";
        op.value = vals[kq_prng_below(&s->ctl, 3)];
        if (kq_prng_permille(&s->ctl, 250)) {
            op.op = KQ_CONFIG_OP_DELETE;
            op.value = NULL;
        }
        res.resource_name = t->name;
        r.api_key = KQ_API_INCREMENTAL_ALTER_CONFIGS;
        r.alter_configs.resources = &res;
        r.alter_configs.n = 1;
        trace(s, "admin > %s %s of %s%s%s", op.op == KQ_CONFIG_OP_SET ? "set" : "delete", op.name,
              t->name, op.value ? " to " : "", op.value ? op.value : "");
    } else if (what == 3 && t) { /* unclean.leader.election.enable */
        op.name = "unclean.leader.election.enable";
        op.value = kq_prng_permille(&s->ctl, 500) ? "true" : "false";
        res.resource_name = t->name;
        r.api_key = KQ_API_INCREMENTAL_ALTER_CONFIGS;
        r.alter_configs.resources = &res;
        r.alter_configs.n = 1;
        trace(s, "admin > set %s of %s to %s", op.name, t->name, op.value);
    } else if (what == 4) {
        r.api_key = KQ_API_ELECT_LEADERS;
        r.elect_leaders.election_type = KQ_ELECTION_TYPE_UNCLEAN;
        r.elect_leaders.all_partitions = true;
    } else if (what == 5) { /* a controlled shutdown of a running broker */
        sim_actor *b = &s->actors[kq_prng_below(&s->ctl, (uint64_t)s->n_brokers)];
        if (b->up && b->bl.state == KQ_BL_RUNNING &&
            kq_bl_request_shutdown(&b->bl, broker_clock(s, b))) {
            trace(s, "admin > controlled shutdown of b%d", b->id);
            actor_tick_at(s, b, s->now);
        }
        return;
    } else if (what == 6 && t) { /* delete a topic the clients do not use */
        del.name = t->name;
        r.api_key = KQ_API_DELETE_TOPICS;
        r.delete_topics.topics = &del;
        r.delete_topics.n = 1;
        trace(s, "admin > delete topic %s", t->name);
    } else if (what <= 9) {
        r.api_key = KQ_API_ELECT_LEADERS;
        r.elect_leaders.election_type = KQ_ELECTION_TYPE_PREFERRED;
        r.elect_leaders.all_partitions = true;
    } else {
        return;
    }
    admin_submit(s, a, &r);
}

static void actor_tick(sim *s, sim_actor *a)
{
    uint64_t next = HEARTBEAT_INTERVAL_MS;
    if (a->admin) {
        if (a->op_pending) { /* a retry */
            admin_retry(s, a);
            actor_tick_at(s, a, s->now + ADMIN_RETRY_MS);
            return;
        }
        /* during the faults a new operation every 1-2 s; after them one more, which must be
         * answered before the cluster counts as converged */
        if (a->req_id[CHAN_MAIN] == 0 && (!s->liveness || !a->live_op_done))
            admin_tick(s, a);
        next = 1000 + kq_prng_below(&s->ctl, 1000);
    } else {
        broker_tick(s, a);
        return;
    }
    actor_tick_at(s, a, s->now + actor_ms(a, next));
}

typedef struct led_pick {
    sim *s;
    int seen;
    uint8_t topic[16];
    int32_t part;
} led_pick;

static int pick_led(void *arg, const kq_topic *t, int32_t pid, const kq_partition *p)
{
    led_pick *lp = arg;
    (void)p;
    if (t->name && strcmp(t->name, CLIENT_TOPIC) == 0)
        return 0; /* its ISR is the replicas' own: a made-up one could lose acknowledged data */
    if (kq_prng_below(&lp->s->ctl, (uint64_t)++lp->seen) == 0) {
        memcpy(lp->topic, t->id, 16);
        lp->part = pid;
    }
    return 0;
}

/* A partition leader changes its ISR: shrink or expand, usually with the current epochs. */
static void broker_alter_partition(sim *s, sim_actor *a)
{
    const kq_image *img = s->nodes[a->node].bm.img; /* what the broker knows */
    led_pick lp = {.s = s};
    kq_image_foreach_broker_partition(img, a->id, KQ_ROLE_LEADER, pick_led, &lp);
    if (!lp.seen)
        return;
    const kq_partition *p = kq_image_partition(img, lp.topic, lp.part);
    if (!p || p->n_isr > AP_MAX_ISR - 1)
        return;
    int32_t isr[AP_MAX_ISR];
    int n = 0;
    const int32_t *cur = kq_partition_isr(p), *rep = kq_partition_replicas(p);
    int32_t out_of_isr[AP_MAX_ISR];
    int n_out = 0;
    for (int i = 0; i < p->n_replicas && n_out < AP_MAX_ISR; i++)
        if (!kq_ids_contain(cur, p->n_isr, rep[i]))
            out_of_isr[n_out++] = rep[i];
    bool shrink = p->n_isr > 1 && (n_out == 0 || kq_prng_permille(&s->ctl, 500));
    if (shrink) {
        int victim;
        do
            victim = (int)kq_prng_below(&s->ctl, p->n_isr);
        while (cur[victim] == a->id);
        for (int i = 0; i < p->n_isr; i++)
            if (i != victim)
                isr[n++] = cur[i];
    } else if (n_out > 0) {
        for (int i = 0; i < p->n_isr; i++)
            isr[n++] = cur[i];
        isr[n++] = out_of_isr[kq_prng_below(&s->ctl, (uint64_t)n_out)];
    } else {
        return;
    }
    int16_t version = kq_prng_permille(&s->ctl, 700) ? 3 : 2;
    kq_ap_isr_member members[AP_MAX_ISR];
    for (int i = 0; i < n; i++) {
        const kq_broker *b = kq_image_broker(img, isr[i]);
        members[i].broker_id = isr[i];
        members[i].broker_epoch = version >= 3 && b ? b->epoch : -1;
    }
    kq_ap_partition part = {.partition_index = lp.part,
                            .leader_epoch = p->leader_epoch,
                            .partition_epoch = p->partition_epoch,
                            .leader_recovery_state = KQ_RECOVERY_RECOVERED,
                            .new_isr = members,
                            .n_new_isr = n};
    const char *stale = "";
    uint32_t r = (uint32_t)kq_prng_below(&s->ctl, 1000);
    if (r < 80 && part.partition_epoch > 0) {
        part.partition_epoch--;
        stale = " (stale partition epoch)";
    } else if (r < 130 && part.leader_epoch > 0) {
        part.leader_epoch--;
        stale = " (stale leader epoch)";
    }
    kq_ap_topic topic = {.partitions = &part, .n_partitions = 1};
    memcpy(topic.topic_id, lp.topic, 16);
    kq_ctl_request req;
    memset(&req, 0, sizeof req);
    req.api_key = KQ_API_ALTER_PARTITION;
    req.alter_partition = (kq_alter_partition){.version = version,
                                               .broker_id = a->id,
                                               .broker_epoch = a->epoch,
                                               .topics = &topic,
                                               .n_topics = 1};
    memcpy(a->ap_topic, lp.topic, 16);
    a->ap_part = lp.part;
    const kq_topic *t = kq_image_topic_by_id(img, lp.topic);
    trace(s, "b%d > %s ISR of %s-%d: %d -> %d members, epochs %d/%d%s", a->id,
          shrink ? "shrink" : "expand", t && t->name ? t->name : "?", lp.part, p->n_isr, n,
          part.leader_epoch, part.partition_epoch, stale);
    actor_send(s, a, CHAN_AP, &req);
}

static void actor_ap_tick(sim *s, sim_actor *a)
{
    if (!s->liveness && a->epoch >= 0 && !a->fenced && a->req_id[CHAN_AP] == 0)
        broker_alter_partition(s, a);
    sched_ev(s, s->now + actor_ms(a, a->ap_every_ms / 2 + kq_prng_below(&s->ctl, a->ap_every_ms)),
             EV_ACTOR_AP, -1, a->inc, 0, NULL, NULL, a->idx);
}

static void actor_follow(sim *s, sim_actor *a, const kq_response *env)
{
    sim_node *l = env->leader_id >= 0 ? node_by_id(s, env->leader_id) : NULL;
    if (l && l->idx != a->ctl)
        a->ctl = l->idx;
    else
        actor_other_ctl(s, a);
}

/* The controller's answer for one partition of an AlterPartition from broker a (the answer
 * waited for offset wait to commit): an acknowledged change must stay in the committed state. */
static void ap_answered(sim *s, sim_actor *a, const uint8_t topic[16], int32_t part,
                        const kq_ap_result *r, int64_t wait)
{
    if (r->error) {
        s->res->ap_rejected++;
        trace(s, "b%d < AlterPartition partition %d: %s", a->id, part, kq_err_name(r->error));
        return;
    }
    if (r->n_isr > AP_MAX_ISR) {
        fail(s, "b%d: AlterPartition answered with %d ISR members", a->id, r->n_isr);
        return;
    }
    ap_ack k = {.part = part,
                .partition_epoch = r->partition_epoch,
                .n_isr = r->n_isr,
                .offset = wait,
                .broker = a->id};
    memcpy(k.topic, topic, 16);
    memcpy(k.isr, r->isr, (size_t)r->n_isr * sizeof(int32_t));
    s->res->ap_acked++;
    trace(s,
          "b%d < AlterPartition partition %d acknowledged: partition epoch %d, ISR size %d, "
          "leader %d, offset %" PRId64,
          a->id, part, r->partition_epoch, r->n_isr, r->leader_id, wait);
    if (wait >= s->ref_end)
        fail(s,
             "b%d: AlterPartition acknowledged before its records committed (answer waited for "
             "offset %" PRId64 ", committed end %" PRId64 ")",
             a->id, wait, s->ref_end);
    else if (grow(s, (void **)&s->acks, &s->cap_acks, s->n_acks + 1, sizeof(ap_ack))) {
        s->acks[s->n_acks++] = k;
        ack_check_image(s, s->ref, s->ref_end, "committed state");
    }
}

static void on_ap_response(sim *s, sim_actor *a, const ctl_pkt *p, const kq_response *env)
{
    kq_alter_partition_result res;
    char err[256];
    memset(&res, 0, sizeof res);
    int rc = kq_ctl_decode_alter_partition_response(env, &res, err, sizeof err);
    if (rc || res.n_results != 1) {
        fail(s, "codec: b%d cannot decode an AlterPartition response: %s (%d results)", a->id,
             rc ? err : "ok", res.n_results);
        kq_ctl_alter_partition_response_free(&res);
        return;
    }
    ap_answered(s, a, a->ap_topic, a->ap_part, &res.results[0], p->wait);
    kq_ctl_alter_partition_response_free(&res);
}

static void on_main_response(sim *s, sim_actor *a, const kq_response *env)
{
    char err[256];
    int rc = 0;
    if (a->req_api[CHAN_MAIN] == KQ_API_BROKER_REGISTRATION) {
        int64_t epoch = -1;
        rc = kq_ctl_decode_broker_registration_response(env, &epoch, err, sizeof err);
        if (!rc) {
            trace(s, "b%d < registered with epoch %" PRId64, a->id, epoch);
            broker_answer(s, a, KQ_API_BROKER_REGISTRATION, 0, epoch, NULL, -1);
        }
    } else if (a->req_api[CHAN_MAIN] == KQ_API_BROKER_HEARTBEAT) {
        kq_heartbeat_result hr;
        memset(&hr, 0, sizeof hr);
        rc = kq_ctl_decode_broker_heartbeat_response(env, &hr, err, sizeof err);
        if (!rc)
            broker_answer(s, a, KQ_API_BROKER_HEARTBEAT, 0, -1, &hr, -1);
    } else {
        kq_ctl_item_results ir;
        memset(&ir, 0, sizeof ir);
        rc = kq_ctl_decode_item_results(env, &ir, err, sizeof err);
        if (!rc && a->req_api[CHAN_MAIN] == KQ_API_CREATE_TOPICS && ir.n == 1) {
            int e = ir.items[0].error;
            trace(s, "admin < CreateTopics %s: %s", ir.items[0].name, e ? kq_err_name(e) : "ok");
            if (e == 0 || e == KQ_ERR_TOPIC_ALREADY_EXISTS)
                a->topics_done++;
        } else if (!rc) {
            trace(s, "admin < %s: %d results", api_name(a->req_api[CHAN_MAIN]), ir.n);
        }
        kq_ctl_item_results_free(&ir);
        if (!rc)
            admin_done(s, a);
    }
    if (rc)
        fail(s, "codec: %s%d cannot decode a %s response: %s: %s", a->admin ? "admin" : "b", a->id,
             api_name(a->req_api[CHAN_MAIN]), kq_err_name(rc), err);
}

static void ctl_on_response(sim *s, sim_actor *a, const ctl_pkt *p)
{
    long k = a->up && !a->admin ? dp_out_find(a, p->req_id) : -1;
    if (k >= 0) { /* an answer for the broker's data plane */
        dp_ap_answer(s, a, k, p);
        return;
    }
    int chan = a->req_id[CHAN_MAIN] == p->req_id ? CHAN_MAIN
               : a->req_id[CHAN_AP] == p->req_id ? CHAN_AP
                                                 : -1;
    if (!a->up || chan < 0) {
        trace(s, "b%d < #%" PRIu64 " %s dropped (not waiting for it)", a->id, p->req_id,
              api_name(p->api));
        return;
    }
    a->req_id[chan] = 0;
    kq_response env;
    char err[256];
    memset(&env, 0, sizeof env);
    int rc = kq_codec_decode_response(p->wire.data, p->wire.len, s->nodes[p->node].id, &env, err,
                                      sizeof err);
    if (rc) {
        fail(s, "codec: b%d cannot decode a %s response: %s: %s", a->id, api_name(p->api),
             kq_err_name(rc), err);
        return;
    }
    if (env.api_key != p->api) {
        fail(s, "codec: a %s response decoded as api %u", api_name(p->api), env.api_key);
    } else if (env.error) {
        trace(s, "b%d < n%d #%" PRIu64 " %s: %s (leader hint %d)", a->id, s->nodes[p->node].id,
              p->req_id, api_name(p->api), kq_err_name(env.error), env.leader_id);
        if (env.error == KQ_ERR_INCONSISTENT_CLUSTER_ID) {
            fail(s, "b%d: controller rejected the cluster id: %s", a->id, env.error_message);
        } else if (chan == CHAN_MAIN && a->admin &&
                   (p->api == KQ_API_ADD_RAFT_VOTER || p->api == KQ_API_REMOVE_RAFT_VOTER)) {
            admin_voter_answer(s, a, &env);
        } else if (chan == CHAN_MAIN && !a->admin) {
            broker_answer(s, a, p->api, env.error, -1, NULL, env.leader_id);
        } else if (env.error == KQ_ERR_NOT_CONTROLLER) {
            actor_follow(s, a, &env);
            if (chan == CHAN_MAIN)
                actor_tick_at(s, a, s->now + 20 + kq_prng_below(&s->ctl, 80));
        } else if (chan == CHAN_MAIN && a->admin &&
                   (env.error == KQ_ERR_REQUEST_TIMED_OUT ||
                    env.error == KQ_ERR_BROKER_NOT_AVAILABLE)) {
            actor_tick_at(s, a, s->now + ADMIN_RETRY_MS); /* retriable: again after the back-off */
        } else if (chan == CHAN_MAIN && a->admin) {
            fail(s, "admin: a valid %s was refused: %s (%s)", api_name(p->api),
                 kq_err_name(env.error), env.error_message);
        }
    } else {
        if (chan == CHAN_AP)
            on_ap_response(s, a, p, &env);
        else if (a->admin &&
                 (p->api == KQ_API_ADD_RAFT_VOTER || p->api == KQ_API_REMOVE_RAFT_VOTER))
            admin_voter_answer(s, a, &env);
        else
            on_main_response(s, a, &env);
    }
    kq_response_free(&env);
}

static void ctl_deliver(sim *s, const ctl_pkt *p)
{
    if (p->kind != PKT_CTL) {
        dp_deliver(s, p);
        return;
    }
    if (p->to_ctl) {
        sim_node *n = &s->nodes[p->node];
        if (!n->up) {
            trace(s, "net b%d>n%d #%" PRIu64 " %s: n%d is down", s->actors[p->actor].id, n->id,
                  p->req_id, api_name(p->api), n->id);
            return;
        }
        ctl_on_request(s, n, p);
        return;
    }
    ctl_on_response(s, &s->actors[p->actor], p);
}

static void actor_timeout(sim *s, sim_actor *a, uint64_t req_id)
{
    for (int c = 0; c < 2; c++) {
        if (a->req_id[c] != req_id)
            continue;
        a->req_id[c] = 0;
        trace(s, "%s%d: #%" PRIu64 " %s timed out at n%d", a->admin ? "admin" : "b", a->id, req_id,
              api_name(a->req_api[c]), s->nodes[a->ctl].id);
        if (c == CHAN_MAIN && !a->admin)
            broker_answer(s, a, a->req_api[c], KQ_ERR_REQUEST_TIMED_OUT, -1, NULL, -1);
        else if (kq_prng_permille(&s->ctl, 500))
            actor_other_ctl(s, a);
        if (c == CHAN_MAIN && a->admin && a->op_pending)
            actor_tick_at(s, a, s->now + ADMIN_RETRY_MS);
    }
}

static void broker_start(sim *s, sim_actor *a)
{
    if (a->up)
        return;
    a->up = true;
    a->inc++;
    do
        for (int i = 0; i < 16; i += 8) {
            uint64_t v = kq_prng_next(&s->ctl);
            memcpy(a->incarnation + i, &v, 8);
        }
    while (a->incarnation[0] == 0);
    a->epoch = -1;
    a->fenced = true;
    a->req_id[0] = a->req_id[1] = 0;
    a->ctl = (int)kq_prng_below(&s->ctl, (uint64_t)s->n_voters);
    if (!a->admin) { /* a new process: a new lifecycle (and incarnation) */
        kq_bl_config bc = {.broker_id = a->id,
                           .n_controllers = s->n_voters,
                           .heartbeat_interval_ms = HEARTBEAT_INTERVAL_MS,
                           .session_timeout_ms = SESSION_TIMEOUT_MS,
                           .registration_timeout_ms = 3600u * 1000u,
                           .shutdown_timeout_ms = 30000,
                           .seed = kq_prng_next(&s->ctl)};
        for (int i = 0; i < s->n_voters; i++)
            bc.controllers[i] = s->nodes[i].id;
        kq_bl_init(&a->bl, &bc, broker_clock(s, a));
    }
    trace(s, "%s%d > start #%" PRIu64, a->admin ? "admin" : "b", a->id, a->inc);
    if (!a->admin) {
        dp_start(s, a);
        node_start(s, &s->nodes[a->node]);
    }
    actor_tick_at(s, a, s->now + kq_prng_below(&s->ctl, 200));
    if (!a->admin)
        sched_ev(s, s->now + actor_ms(a, a->ap_every_ms), EV_ACTOR_AP, -1, a->inc, 0, NULL, NULL,
                 a->idx);
}

/* The broker process ends: a crash (its observer's unsynced writes lost) or, graceful, the
 * end of a controlled shutdown; it starts again later as a new incarnation. */
static void broker_stop(sim *s, sim_actor *a, bool graceful, const char *why)
{
    if (!a->up)
        return;
    a->up = false;
    a->inc++;
    uint64_t down = kq_prng_range(&s->fault, 500, 15000);
    trace(s, "b%d > %s (back in %" PRIu64 "ms)%s%s", a->id, graceful ? "stop" : "CRASH", down,
          why ? ": " : "", why ? why : "");
    node_crash(s, &s->nodes[a->node], graceful);
    dp_trace_logs(s, a); /* what its partition logs hold (committed and not) */
    dp_stop(a);
    if (a->dying)
        a->disk_armed = false; /* the fault was the commit that failed */
    sched_ev(s, s->now + down, EV_ACTOR_START, -1, 0, 0, NULL, NULL, a->idx);
}

static void broker_crash(sim *s, sim_actor *a)
{
    broker_stop(s, a, false, NULL);
}

static void ctl_heal(sim *s)
{
    memset(s->bblocked, 0, sizeof s->bblocked);
}

static void ctl_faults(sim *s)
{
    uint32_t r = (uint32_t)kq_prng_below(&s->fault, 1000);
    int b = (int)kq_prng_below(&s->fault, (uint64_t)s->n_brokers);
    if (r < s->p_bcrash) {
        broker_crash(s, &s->actors[b]);
    } else if ((r -= s->p_bcrash) < s->p_bisolate) {
        int k = 0;
        for (int n = 0; n < s->n_voters; n++) {
            s->bblocked[b][n] = kq_prng_permille(&s->fault, 700);
            k += s->bblocked[b][n];
        }
        trace(s, "net isolate b%d from %d of %d controllers", s->actors[b].id, k, s->n_voters);
    }
}

static void ctl_liveness_begin(sim *s)
{
    for (int i = 0; i < s->n_actors; i++)
        if (!s->actors[i].up)
            broker_start(s, &s->actors[i]);
}

typedef struct live_partition {
    char *why;
    size_t len;
} live_partition;

/* Every partition with an ISR or ELR member (all brokers are live by now) has a leader. */
static int live_partition_cb(void *arg, const kq_topic *t, int32_t pid, const kq_partition *p)
{
    live_partition *lp = arg;
    if (p->leader < 0 && (p->n_isr > 0 || p->n_elr > 0)) {
        snprintf(lp->why, lp->len, "%s-%d has no leader (ISR %d, ELR %d members)",
                 t->name ? t->name : "?", pid, p->n_isr, p->n_elr);
        return 1;
    }
    return 0;
}

/* Controller-mode convergence: every node applied its whole log, one of them is active, every
 * broker is running unfenced, every partition that can have a leader has one. */
static void ctl_live_status(sim *s, char *why, size_t len)
{
    int active = 0;
    for (int i = 0; i < s->n_nodes; i++) {
        sim_node *n = &s->nodes[i];
        int64_t applied = n->voter ? n->ch.node.meta.applied_end : n->bm.applied_end;
        if ((n->voter ? !n->ch.on : !n->bm_on) || applied != log_end(&n->mlog)) {
            snprintf(why, len, "n%d applied %" PRId64 " of %" PRId64, n->id, applied,
                     log_end(&n->mlog));
            return;
        }
        active += n->voter && n->ch.node.meta.active;
    }
    if (active != 1) {
        snprintf(why, len, "%d active controllers", active);
        return;
    }
    for (int i = 0; i < s->n_voters; i++) { /* /readyz agrees: every controller is ready */
        sim_node *n = &s->nodes[i];
        kq_ctl_ready_state r = {.role = n->st.role,
                                .leader_id = n->st.leader_id,
                                .epoch = n->st.epoch,
                                .leader_answered = n->st.leader_answered,
                                .leader_answer_ms = n->st.leader_answer_ms,
                                .hw = n->host.hw,
                                .applied = n->ch.ready_applied,
                                .applied_since_ms = n->ch.ready_since};
        char reason[200];
        if (!kq_ctl_readiness(&r, node_clock(s, n), n->cfg.fetch_timeout_ms, reason,
                              sizeof reason)) {
            snprintf(why, len, "n%d not ready: %.120s", n->id, reason);
            return;
        }
    }
    for (int i = 0; i < s->n_brokers; i++) { /* every live broker unfenced */
        const sim_actor *a = &s->actors[i];
        if (!a->up || a->bl.state != KQ_BL_RUNNING || a->bl.fenced) {
            snprintf(why, len, "b%d is %s%s", a->id, a->up ? kq_bl_state_name(a->bl.state) : "down",
                     a->up && a->bl.fenced ? " (fenced)" : "");
            return;
        }
    }
    const sim_actor *ad = &s->actors[s->n_brokers];
    if (ad->op_pending || !ad->live_op_done) { /* retried until the controller answered */
        if (ad->op_pending)
            snprintf(why, len, "admin %s not answered yet (%u tries)", api_name(ad->op_api),
                     ad->op_tries);
        else
            snprintf(why, len, "admin operation not submitted yet");
        return;
    }
    live_partition lp = {.why = why, .len = len};
    kq_image_foreach_partition(s->ref, live_partition_cb, &lp);
}

/* ---- the data checks at the end: acknowledged records, consumed records, replicas ---- */

/* A partition log as record hashes by offset (0: no record read there). */
static int view_rec(void *arg, int64_t offset, const uint8_t *value, size_t len)
{
    log_view *v = arg;
    if (offset >= v->start && offset < v->end)
        v->hash[offset - v->start] = fnv1a(0xCBF29CE484222325ull, value, len);
    return 0;
}

static int view_batch(void *arg, const kq_plog_batch *b)
{
    log_view *v = arg;
    if (kq_data_records_walk(b->records, b->len, b->base_offset, b->count, view_rec, v, v->why,
                             sizeof v->why) != 0) {
        v->bad = true;
        return 1;
    }
    return 0;
}

/* Broker a's log of (topic, part) from offset `from` on (or its log start, if later) and its
 * replica's high watermark. False when it hosts no replica of it (or the log does not read
 * back, which fails the run). */
static bool view_load(sim *s, sim_actor *a, const uint8_t topic[16], int32_t part, int64_t from,
                      log_view *v)
{
    memset(v, 0, sizeof *v);
    kq_plog_tp tp;
    memcpy(tp.topic_id, topic, 16);
    tp.partition = part;
    kq_plog_state st;
    size_t i = a->rm ? kq_rm_find(a->rm, topic, part) : SIZE_MAX;
    const kq_replica *r = i == SIZE_MAX ? NULL : kq_rm_replica(a->rm, i);
    if (!a->plog || !r || kq_plog_state_of(a->plog, &tp, &st) != 0)
        return false;
    kq_replica_status rs;
    kq_replica_get_status(r, &rs);
    v->start = st.log_start_offset > from ? st.log_start_offset : from;
    v->end = st.log_end_offset > v->start ? st.log_end_offset : v->start;
    v->hw = rs.high_watermark;
    v->hash = xcalloc(s, (size_t)(v->end - v->start) + 1, sizeof(uint64_t));
    if (!v->hash)
        return false;
    int rc = v->end > v->start
                 ? kq_plog_read(a->plog, &tp, v->start, INT64_MAX, SIZE_MAX, view_batch, v)
                 : 0;
    if (rc || v->bad) {
        fail(s, "b%d: its log of %s-%d does not read back: %s", a->id, CLIENT_TOPIC, part,
             rc ? kq_err_name(rc) : v->why);
        return false;
    }
    return true;
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void data_check_partition(sim *s, const kq_topic *t, int32_t part)
{
    const kq_partition *p = &t->partitions[part];
    int li = broker_index(s, p->leader);
    if (li < 0) {
        trace(s, "data: %s-%d has no leader at the end; not checked", CLIENT_TOPIC, part);
        return;
    }
    sim_actor *l = &s->actors[li];
    log_view lv;
    if (!view_load(s, l, t->id, part, 0, &lv)) {
        if (!s->failed)
            fail(s, "data: leader b%d of %s-%d hosts no replica of it at the end", l->id,
                 CLIENT_TOPIC, part);
        free(lv.hash);
        return;
    }
    size_t n = (size_t)(lv.end - lv.start);
    uint64_t *sorted = xcalloc(s, n + 1, sizeof(uint64_t));
    if (sorted && n)
        memcpy(sorted, lv.hash, n * sizeof(uint64_t));
    if (sorted)
        qsort(sorted, n, sizeof(uint64_t), u64_cmp);
    int64_t last[MAX_CLIENTS];
    for (int i = 0; i < MAX_CLIENTS; i++)
        last[i] = -1;
    size_t checked = 0;
    if (data_exempt(s, part)) {
        /* and a follower keeps its high watermark above the divergence until its next fetch
         * truncates it: replicas are not compared either */
        trace(s,
              "data: %s-%d had an unclean election: acknowledged and consumed records and "
              "replicas not checked",
              CLIENT_TOPIC, part);
        goto done;
    }
    for (size_t i = 0; i < s->n_acked && !s->failed && sorted; i++) {
        const data_rec *r = &s->acked[i];
        if (r->part != part)
            continue;
        checked++;
        if (r->offset < lv.start || r->offset >= lv.end ||
            lv.hash[r->offset - lv.start] != r->hash) {
            fail(s,
                 "data: record c%d.%d of %s-%d acknowledged with acks=all at offset %" PRId64
                 " is not there in leader b%d's log [%" PRId64 ", %" PRId64 ")",
                 r->client, r->seq, CLIENT_TOPIC, part, r->offset, l->id, lv.start, lv.end);
            break;
        }
        if (r->offset <= last[r->client]) {
            fail(s, "data: c%d's acknowledged records of %s-%d are out of order at offset %" PRId64,
                 r->client, CLIENT_TOPIC, part, r->offset);
            break;
        }
        last[r->client] = r->offset;
        uint64_t *hit = bsearch(&r->hash, sorted, n, sizeof(uint64_t), u64_cmp);
        if (hit &&
            ((hit > sorted && hit[-1] == r->hash) || (hit + 1 < sorted + n && hit[1] == r->hash)))
            fail(s, "data: idempotent record c%d.%d of %s-%d is in leader b%d's log twice",
                 r->client, r->seq, CLIENT_TOPIC, part, l->id);
    }
    for (size_t i = 0; i < s->n_consumed && !s->failed; i++) {
        const data_rec *r = &s->consumed[i];
        if (r->part == part && (r->offset < lv.start || r->offset >= lv.end ||
                                lv.hash[r->offset - lv.start] != r->hash))
            fail(s,
                 "data: a consumer read offset %" PRId64 " of %s-%d, which leader b%d's log no "
                 "longer holds as read",
                 r->offset, CLIENT_TOPIC, part, l->id);
    }
    /* every other replica agrees with the leader below both high watermarks */
    for (int k = 0; k < p->n_replicas && !s->failed; k++) {
        int ri = broker_index(s, kq_partition_replicas(p)[k]);
        log_view rv;
        if (ri < 0 || ri == li || !view_load(s, &s->actors[ri], t->id, part, 0, &rv)) {
            if (ri >= 0 && ri != li)
                free(rv.hash);
            continue;
        }
        int64_t from = lv.start > rv.start ? lv.start : rv.start;
        int64_t to = lv.hw < rv.hw ? lv.hw : rv.hw;
        for (int64_t o = from; o < to && o < rv.end && o < lv.end; o++)
            if (rv.hash[o - rv.start] != lv.hash[o - lv.start]) {
                fail(s,
                     "data: replicas b%d and b%d of %s-%d differ at offset %" PRId64
                     ", below both high watermarks (%" PRId64 ", %" PRId64 ")",
                     l->id, s->actors[ri].id, CLIENT_TOPIC, part, o, lv.hw, rv.hw);
                break;
            }
        free(rv.hash);
    }
done:
    trace(s,
          "data: %s-%d leader b%d log [%" PRId64 ", %" PRId64 ") hw %" PRId64
          ", %zu acknowledged records checked",
          CLIENT_TOPIC, part, l->id, lv.start, lv.end, lv.hw, checked);
    free(sorted);
    free(lv.hash);
}

static void data_final_check(sim *s)
{
    const kq_topic *t = kq_image_topic_by_name(s->ref, CLIENT_TOPIC);
    for (int32_t i = 0; t && i < t->n_partitions && !s->failed; i++)
        data_check_partition(s, t, i);
    uint64_t acked = 0, read = 0;
    for (int i = 0; i < s->n_clients; i++) {
        acked += s->clients[i].acked;
        read += s->clients[i].read;
    }
    s->res->records_acked = acked;
    s->res->records_read = read;
}

/* End of a run: every image identical to the reference, every acknowledged change in it. */
static void ctl_final_check(sim *s)
{
    uint64_t ref = kq_image_hash(s->ref);
    for (int i = 0; i < s->n_nodes && !s->failed; i++) {
        sim_node *n = &s->nodes[i];
        const kq_image *img = n->voter ? n->ch.node.meta.img : n->bm.img;
        int64_t applied = n->voter ? n->ch.node.meta.applied_end : n->bm.applied_end;
        uint64_t h = kq_image_hash(img);
        if (applied != s->ref_end || h != ref)
            fail(s,
                 "end: %s%d image (applied to %" PRId64 ", hash %016" PRIx64 ") differs from "
                 "the committed state (%" PRId64 ", hash %016" PRIx64 ")",
                 n->voter ? "n" : "b", n->id, applied, h, s->ref_end, ref);
    }
    ack_check_image(s, s->ref, s->ref_end, "end");
    if (!s->failed)
        data_final_check(s);
    kq_image_counts c;
    kq_image_get_counts(s->ref, &c);
    s->res->topics_created = c.topics;
    trace(s,
          "=== controller: %u brokers (%u fenced), %u topics, %" PRIu64 " partitions, %zu acks ===",
          c.brokers, c.fenced_brokers, c.topics, c.partitions, s->n_acks);
}

static void ctl_setup(sim *s, kq_prng *master)
{
    s->ctl.s = kq_prng_next(master);
    kq_decide_settings_default(&s->settings);
    s->settings.session_timeout_ms = SESSION_TIMEOUT_MS;
    s->settings.elr_enabled = kq_prng_permille(&s->ctl, 800);
    s->settings.unclean_leader_election = kq_prng_permille(&s->ctl, 200);
    if (s->o.bug == KQ_SIM_BUG_UNCLEAN) { /* and without the ELR, which makes them rare */
        s->settings.unclean_leader_election = true;
        s->settings.elr_enabled = false;
    }
    s->settings.min_insync_replicas = kq_prng_permille(&s->ctl, 300) ? 2 : 1;
    s->n_actors = s->n_brokers + 1;
    s->p_bcrash = (uint32_t)kq_prng_range(&s->ctl, 20, 120);
    s->p_bisolate = kq_prng_permille(&s->ctl, 600) ? (uint32_t)kq_prng_range(&s->ctl, 10, 80) : 0;
    s->p_disk_err = kq_prng_permille(&s->ctl, 500) ? (uint32_t)kq_prng_range(&s->ctl, 1, 30) : 0;
    s->n_topics_target = (uint32_t)kq_prng_range(&s->ctl, 1, 4);
    s->ctl_max_batch =
        kq_prng_permille(&s->ctl, 300) ? (size_t)kq_prng_range(&s->ctl, 64, 512) : 1u << 20;
    /* Snapshots in about half of the seeds, every few KB of records or seconds (a stream of
     * its own: the other decisions of a seed stay as they were before snapshots existed). */
    kq_prng snap = {s->o.seed ^ 0x736E617073686F74ull};
    snap.s = kq_prng_next(&snap);
    s->snapshot_max_bytes = INT64_MAX;
    s->snapshot_interval_ms = 0;
    if (kq_prng_permille(&snap, 500)) {
        s->snapshot_max_bytes = (int64_t)kq_prng_range(&snap, 256, 8192);
        if (kq_prng_permille(&snap, 300))
            s->snapshot_interval_ms = (int64_t)kq_prng_range(&snap, 1000, 10000);
    }
    if (s->o.bug == KQ_SIM_BUG_SNAPSHOT_DROPS_RECORD && s->snapshot_max_bytes == INT64_MAX)
        s->snapshot_max_bytes = 256; /* the self-test needs snapshots in every seed */
    s->p_part_damage = kq_prng_permille(&snap, 500) ? 100 : 0;
    s->snapr.s = kq_prng_next(&snap);
    s->res->brokers = s->n_brokers;
    s->actors = xcalloc(s, KQ_SIM_MAX_BROKERS + 1, sizeof(sim_actor));
    s->ref = kq_image_new();
    s->ref_epochs = kq_sim_epochs_new();
    s->leaders = kq_sim_leaders_new();
    if (!s->actors || !s->ref || !s->ref_epochs || !s->leaders) {
        fail(s, "out of memory");
        return;
    }
    static const char *racks[] = {"r0", "r1", "r2"};
    bool use_racks = kq_prng_permille(&s->ctl, 500);
    for (int i = 0; i < s->n_actors; i++) {
        sim_actor *a = &s->actors[i];
        a->idx = i;
        a->admin = i == s->n_brokers;
        a->id = a->admin ? 0 : BROKER_ID_BASE + 1 + i;
        a->node = a->admin ? -1 : s->n_voters + i;
        a->epoch = -1;
        a->drift_pm = (int32_t)kq_prng_range(&s->ctl, 0, 100) - 50;
        a->ap_every_ms = (uint32_t)kq_prng_range(&s->ctl, 100, 1500);
        a->rack = use_racks ? racks[i % 3] : NULL;
        sched_ev(s, kq_prng_below(&s->ctl, 1500), EV_ACTOR_START, -1, 0, 0, NULL, NULL, i);
    }
    clients_setup(s);
    trace(s,
          "controller: %d brokers, %u topics, elr %d, unclean %d, min isr %d, batch cap %zu, "
          "broker crash %u isolate %u, partition-log disk errors %u/10000, metadata disk "
          "errors %u/10000, snapshot every %" PRId64 " bytes or %" PRId64 " ms, damaged .part "
          "%u/1000",
          s->n_brokers, s->n_topics_target, s->settings.elr_enabled,
          s->settings.unclean_leader_election, s->settings.min_insync_replicas, s->ctl_max_batch,
          s->p_bcrash, s->p_bisolate, s->p_disk_err, s->p_rdisk_err, s->snapshot_max_bytes,
          s->snapshot_interval_ms, s->p_part_damage);
}

static void ctl_dispatch(sim *s, sim_ev *ev)
{
    sim_actor *a = ev->actor >= 0 && s->actors ? &s->actors[ev->actor] : NULL;
    switch (ev->type) {
    case EV_CTL_NET:
        ctl_deliver(s, ev->cp);
        break;
    case EV_CTL_TIMER: {
        sim_node *n = &s->nodes[ev->node];
        if (n->up && ev->inc == n->inc && ev->a == n->ch.timer_gen)
            ctl_timer(s, n);
        break;
    }
    case EV_ACTOR_TICK:
        if (a->up && ev->inc == a->inc && ev->a == a->tick_gen)
            actor_tick(s, a);
        break;
    case EV_ACTOR_AP:
        if (a->up && ev->inc == a->inc)
            actor_ap_tick(s, a);
        break;
    case EV_ACTOR_TIMEOUT:
        if (a->up && ev->inc == a->inc)
            actor_timeout(s, a, ev->a);
        break;
    case EV_ACTOR_START:
        broker_start(s, a);
        break;
    case EV_ACTOR_DIE:
        if (a->up && ev->inc == a->inc && a->dying)
            broker_stop(s, a, false, "its partition-log disk failed a commit");
        break;
    case EV_DP_TIMER:
        if (a->up && ev->inc == a->inc && ev->a == a->dp_timer_gen) {
            a->dp_timer_at = 0;
            dp_loop(s, a);
        }
        break;
    case EV_CLIENT_TICK:
        if (ev->a == s->clients[ev->inc].tick_gen)
            client_tick(s, &s->clients[ev->inc]);
        break;
    case EV_CLIENT_TIMEOUT:
        client_timeout(s, &s->clients[ev->inc], ev->a);
        break;
    case EV_KILL_LEADER: /* while the admin's change is not answered yet */
        for (int i = 0; i < s->n_voters && !s->liveness && s->actors[s->n_brokers].op_pending &&
                        (s->actors[s->n_brokers].op_api == KQ_API_ADD_RAFT_VOTER ||
                         s->actors[s->n_brokers].op_api == KQ_API_REMOVE_RAFT_VOTER);
             i++)
            if (s->nodes[i].up && s->nodes[i].st.role == KQ_RAFT_LEADER) {
                trace(s, "n%d > the leader crashes with a voter change in flight", s->nodes[i].id);
                node_crash(s, &s->nodes[i], false);
                s->res->leader_kills++;
                break;
            }
        break;
    case EV_DP_TIMEOUT:
        if (a->up && ev->inc == a->inc) {
            long k = dp_out_find(a, ev->a);
            if (k >= 0)
                dp_answer(s, a, k, KQ_ERR_REQUEST_TIMED_OUT, NULL, 0);
        }
        break;
    }
}

static void ctl_free(sim *s)
{
    for (int i = 0; s->actors && i < s->n_actors; i++) {
        dp_stop(&s->actors[i]);
        kq_plog_mem_disk_free(s->actors[i].disk);
        free(s->actors[i].outs);
        free(s->actors[i].hws);
        kq_buf_free(&s->actors[i].op_wire);
    }
    free(s->actors);
    free(s->clients);
    free(s->acked);
    free(s->consumed);
    kq_image_free(s->ref);
    kq_sim_epochs_free(s->ref_epochs);
    kq_sim_leaders_free(s->leaders);
    for (int i = 0; i < 64; i++)
        free(s->readable[i].hash);
    free(s->ref_hash);
    free(s->acks);
}

/* ---------------------------------------------------------------- setup */

void kq_sim_opts_defaults(kq_sim_opts *o)
{
    memset(o, 0, sizeof *o);
    o->controller = true; /* the whole cluster */
    o->observers = -1;
    o->dump_on_failure = true;
}

static const struct {
    const char *name;
    bool controller;
} bug_table[KQ_SIM_BUG_COUNT] = {[KQ_SIM_BUG_NONE] = {"none", false},
#define KQ_SIM_BUG_ROW(e, n, ctl, what) [KQ_SIM_BUG_##e] = {n, ctl},
                                 KQ_SIM_BUGS(KQ_SIM_BUG_ROW)
#undef KQ_SIM_BUG_ROW
};

int kq_sim_bug_from_name(const char *name)
{
    for (int b = 0; b < KQ_SIM_BUG_COUNT; b++)
        if (!strcmp(name, bug_table[b].name))
            return b;
    return -1;
}

const char *kq_sim_bug_name(kq_sim_bug b)
{
    return (int)b >= 0 && b < KQ_SIM_BUG_COUNT ? bug_table[b].name : NULL;
}

bool kq_sim_bug_needs_controller(kq_sim_bug b)
{
    return (int)b >= 0 && b < KQ_SIM_BUG_COUNT && bug_table[b].controller;
}

static uint32_t vary(kq_prng *r, uint32_t base, uint32_t pct)
{
    uint32_t d = base * pct / 100;
    return base - d + (uint32_t)kq_prng_below(r, 2 * (uint64_t)d + 1);
}

/* The timing faults, from their own stream (drawn last, so the other streams are unchanged). */
static void timing_setup(sim *s, kq_prng *master)
{
    s->timing.s = kq_prng_next(master);
    kq_prng *t = &s->timing;
    s->p_pause = kq_prng_permille(t, 500) ? (uint32_t)kq_prng_range(t, 20, 150) : 0;
    s->p_slow_sync = kq_prng_permille(t, 400) ? (uint32_t)kq_prng_range(t, 1, 20) : 0;
    s->p_torn = kq_prng_permille(t, 500) ? (uint32_t)kq_prng_range(t, 100, 1000) : 0;
    bool drift = kq_prng_permille(t, 500);
    for (int i = 0; i < s->n_voters; i++)
        s->nodes[i].drift_pm = drift ? (int32_t)kq_prng_range(t, 0, 100) - 50 : 0;
    trace(s, "timing: pause %u slow sync %u torn %u (permille), voter clocks drift %s", s->p_pause,
          s->p_slow_sync, s->p_torn, drift ? "up to 5%" : "none");
}

/* voter_changes: a dynamic quorum, from its own stream (drawn last: the other streams are
 * those of the same seed with static voters). The first n_initial controllers are formatted
 * with --initial-controllers (one: --standalone), the others --no-initial-controllers; every
 * node (the brokers' observers too) has controller.quorum.bootstrap.servers = all controllers. */
static void memb_setup(sim *s, kq_prng *master)
{
    s->memb.s = kq_prng_next(master);
    if (!s->o.voter_changes)
        return;
    kq_prng *m = &s->memb;
    s->dynamic = true;
    s->n_initial = (int)kq_prng_range(m, 1, (uint64_t)s->n_voters);
    s->p_change = (uint32_t)kq_prng_range(m, 200, 700);
    s->p_wipe = (uint32_t)kq_prng_range(m, 200, 800);
    s->p_kill_leader = kq_prng_permille(m, 500) ? (uint32_t)kq_prng_range(m, 50, 300) : 0;
    s->boot.n = 0;
    for (int i = 0; i < s->n_nodes; i++) {
        sim_node *n = &s->nodes[i];
        n->cfg.n_voters = 0;
        n->cfg.n_bootstrap = s->n_voters;
        if (n->actor >= 0)
            continue;
        new_directory(s, n);
        snprintf(n->cfg.host, sizeof n->cfg.host, "n%d", n->id);
        n->cfg.port = 9093;
        n->cfg.kraft_min = 0;
        n->cfg.kraft_max = 1;
        n->boot = i < s->n_initial;
        if (n->boot)
            voter_of(n, &s->boot.v[s->boot.n++]);
    }
    trace(s,
          "voter changes: %d controllers, the first %d formatted as the voters | change %u wipe "
          "%u kill the leader %u (permille)",
          s->n_voters, s->n_initial, s->p_change, s->p_wipe, s->p_kill_leader);
}

static void setup(sim *s)
{
    kq_prng master = {s->o.seed};
    kq_prng cfg = {kq_prng_next(&master)};
    s->net.s = kq_prng_next(&master);
    s->disk.s = kq_prng_next(&master);
    s->work.s = kq_prng_next(&master);
    s->fault.s = kq_prng_next(&master);
    s->core.s = kq_prng_next(&master);

    s->n_voters = s->o.voters ? s->o.voters : (int)kq_prng_range(&cfg, 1, KQ_SIM_MAX_VOTERS);
    s->n_observers =
        s->o.observers >= 0 ? s->o.observers : (int)kq_prng_range(&cfg, 0, KQ_SIM_MAX_OBSERVERS);
    if (s->o.controller) { /* the observers are the brokers' */
        s->n_brokers =
            s->o.brokers ? s->o.brokers : (int)kq_prng_range(&cfg, 3, KQ_SIM_MAX_BROKERS);
        s->n_observers = s->n_brokers;
    }
    s->n_nodes = s->n_voters + s->n_observers;
    s->safety_ms = s->o.safety_ms ? s->o.safety_ms : kq_prng_range(&cfg, 10000, 25000);
    if (s->o.controller && !s->o.safety_ms)
        s->safety_ms *= 2; /* brokers need a few commits to register and unfence */
    s->liveness_ms = s->o.liveness_ms ? s->o.liveness_ms : 60000;

    kq_raft_config base;
    kq_raft_config_defaults(&base);
    base.election_timeout_ms = vary(&cfg, 1000, 20);
    base.fetch_timeout_ms = vary(&cfg, 2000, 20);
    base.election_backoff_max_ms = vary(&cfg, 1000, 20);
    base.request_timeout_ms = vary(&cfg, 2000, 20);
    base.retry_backoff_ms = vary(&cfg, 20, 50);
    base.fetch_max_wait_ms = vary(&cfg, 500, 20);
    base.n_voters = s->n_voters;
    for (int i = 0; i < s->n_voters; i++)
        base.voters[i] = i + 1;

    /* swarm: which faults this seed uses, and how hard */
    bool net_faults = kq_prng_permille(&cfg, 800);
    s->base_loss_pm = net_faults ? (uint32_t)kq_prng_below(&cfg, 150) : 0;
    s->base_dup_pm = net_faults ? (uint32_t)kq_prng_below(&cfg, 50) : 0;
    s->base_reorder_pm = net_faults ? (uint32_t)kq_prng_below(&cfg, 100) : 0;
    uint32_t lat_min = (uint32_t)kq_prng_range(&cfg, 1, 10);
    uint32_t lat_spread = (uint32_t)kq_prng_range(&cfg, 0, 60);
    s->lat_min = lat_min;
    s->lat_spread = lat_spread;
    s->disk_lat_min = (uint32_t)kq_prng_range(&cfg, 0, 5);
    s->disk_lat_spread = (uint32_t)kq_prng_range(&cfg, 0, 40);
    s->fault_every_ms = (uint32_t)kq_prng_range(&cfg, 200, 2000);
    if (s->o.controller)
        s->fault_every_ms *= 2; /* leave the active controller some time between failovers */
    s->p_crash = kq_prng_permille(&cfg, 700) ? (uint32_t)kq_prng_range(&cfg, 20, 150) : 0;
    s->p_restart = (uint32_t)kq_prng_range(&cfg, 20, 150);
    s->p_graceful = kq_prng_permille(&cfg, 500) ? (uint32_t)kq_prng_range(&cfg, 10, 100) : 0;
    s->p_partition = kq_prng_permille(&cfg, 700) ? (uint32_t)kq_prng_range(&cfg, 20, 150) : 0;
    s->p_heal = (uint32_t)kq_prng_range(&cfg, 20, 150);
    s->p_clog = kq_prng_permille(&cfg, 500) ? (uint32_t)kq_prng_range(&cfg, 10, 100) : 0;
    s->p_rdisk_err = kq_prng_permille(&cfg, 400) ? (uint32_t)kq_prng_range(&cfg, 1, 20) : 0;
    s->workload_every_ms = (uint32_t)kq_prng_range(&cfg, 20, 400);
    s->fetch_cap_batches = kq_prng_permille(&cfg, 300) ? 1 : (uint32_t)kq_prng_range(&cfg, 1, 64);
    s->fetch_cap_bytes = (uint32_t)kq_prng_range(&cfg, 64, 4096);

    for (int a = 0; a < s->n_nodes; a++)
        for (int b = 0; b < s->n_nodes; b++)
            s->links[a][b] = (link){.lat_min_ms = lat_min,
                                    .lat_spread_ms = lat_spread,
                                    .loss_pm = s->base_loss_pm,
                                    .dup_pm = s->base_dup_pm,
                                    .reorder_pm = s->base_reorder_pm};

    for (int i = 0; i < s->n_nodes; i++) {
        sim_node *n = &s->nodes[i];
        n->idx = i;
        n->s = s;
        n->id = i + 1;
        n->voter = i < s->n_voters;
        n->actor = -1;
        if (s->o.controller && !n->voter) {
            n->actor = i - s->n_voters;
            n->id = BROKER_ID_BASE + 1 + n->actor;
        }
        n->cfg = base;
        n->cfg.node_id = n->id;
        n->core_seed = kq_prng_next(&s->core);
        n->dq = (kq_raft_qstate){.epoch = 0, .voted_id = -1, .leader_id = -1};
        n->max_hw = -1;
    }
    s->res->voters = s->n_voters;
    s->res->observers = s->n_observers;
    trace(s,
          "seed %" PRIu64 ": voters %d observers %d safety %" PRIu64 "ms | election %u fetch %u "
          "request %u backoff %u retry %u wait %u",
          s->o.seed, s->n_voters, s->n_observers, s->safety_ms, base.election_timeout_ms,
          base.fetch_timeout_ms, base.request_timeout_ms, base.election_backoff_max_ms,
          base.retry_backoff_ms, base.fetch_max_wait_ms);
    trace(s,
          "swarm: net lat %u+%u loss %u dup %u reorder %u (permille) | disk %u+%u | faults every "
          "%u: crash %u restart %u graceful %u partition %u heal %u clog %u | workload %u | "
          "fetch cap %u batches %u bytes",
          lat_min, lat_spread, s->base_loss_pm, s->base_dup_pm, s->base_reorder_pm, s->disk_lat_min,
          s->disk_lat_spread, s->fault_every_ms, s->p_crash, s->p_restart, s->p_graceful,
          s->p_partition, s->p_heal, s->p_clog, s->workload_every_ms, s->fetch_cap_batches,
          s->fetch_cap_bytes);

    if (s->o.controller)
        ctl_setup(s, &master);
    timing_setup(s, &master);
    memb_setup(s, &master);
    for (int i = 0; i < s->n_nodes; i++) /* (brokers start with their processes) */
        if (s->nodes[i].actor < 0)
            sched(s, kq_prng_below(&s->fault, 100), EV_START, i, 0, 0, NULL);
    sched(s, 100, EV_WORKLOAD, -1, 0, 0, NULL);
    sched(s, 1000, EV_FAULT, -1, 0, 0, NULL);
    sched(s, s->safety_ms, EV_PHASE_LIVENESS, -1, 0, 0, NULL);
}

static void dispatch(sim *s, sim_ev *ev)
{
    sim_node *n = ev->node >= 0 ? &s->nodes[ev->node] : NULL;
    switch (ev->type) {
    case EV_START:
        if (n->actor >= 0)
            broker_start(s, &s->actors[n->actor]); /* the process, its observer with it */
        else
            node_start(s, n);
        break;
    case EV_TIMER:
        if (!n->up || ev->inc != n->inc || ev->a != n->timer_gen)
            break;
        n->timer_at = 0;
        if (n->tick_ms == s->now) {
            if (++n->ticks_same_ms > MAX_SAME_MS_TICKS) {
                fail(s, "n%d: the core asked for %d TICKs at the same time", n->id,
                     n->ticks_same_ms);
                break;
            }
        } else {
            n->tick_ms = s->now;
            n->ticks_same_ms = 0;
        }
        {
            kq_raft_event tev = {.type = KQ_RAFT_EV_TICK};
            node_step(s, n, &tev);
        }
        break;
    case EV_DISK:
        if (!n->up || ev->inc != n->inc)
            break;
        if (!s->liveness && s->p_rdisk_err && kq_prng_below(&s->fault, 10000) < s->p_rdisk_err) {
            /* fsync fails (EIO, or ENOSPC on the write): kq-controller and kq-broker-agent exit,
             * and nothing of the batch is durable */
            trace(s, "n%d: its metadata-log disk fails a write: the process exits", n->id);
            if (n->actor >= 0)
                broker_stop(s, &s->actors[n->actor], false, "its metadata-log disk failed");
            else
                node_crash(s, n, false);
            break;
        }
        disk_done(s, n, ev->a);
        break;
    case EV_FAKE_PERSIST:
        if (n->up && ev->inc == n->inc)
            fake_persisted(s, n, ev->a);
        break;
    case EV_NET:
        net_deliver(s, ev->pkt);
        break;
    case EV_REQ_TIMEOUT:
        if (n->up && ev->inc == n->inc)
            req_timeout(s, n, ev->a);
        break;
    case EV_WORKLOAD:
        if (!s->liveness)
            workload(s);
        break;
    case EV_FAULT:
        if (!s->liveness) {
            fault_tick(s);
            check_unanswered(s);
        }
        break;
    case EV_GRACE_STOP:
        if (n->up && ev->inc == n->inc && !s->liveness)
            node_crash(s, n, true);
        break;
    case EV_HEAL:
        if (!s->liveness)
            heal(s);
        break;
    case EV_PHASE_LIVENESS:
        liveness_begin(s);
        break;
    case EV_LIVE_CHECK:
        check_unanswered(s);
        live_check(s);
        break;
    case EV_LIVE_DEADLINE:
        live_deadline(s);
        break;
    default:
        ctl_dispatch(s, ev);
        break;
    }
}

static void sim_free(sim *s)
{
    sim_ev ev;
    while (kq_evheap_pop(&s->heap, &ev)) {
        pkt_free(ev.pkt);
        ctl_pkt_free(ev.cp);
    }
    kq_evheap_free(&s->heap);
    for (int i = 0; i < s->n_nodes; i++) {
        sim_node *n = &s->nodes[i];
        node_clear_volatile(n);
        log_free(&n->mlog);
        log_free(&n->dlog);
        snap_free(&n->snaps[0]);
        snap_free(&n->snaps[1]);
        snap_free(&n->part);
        free(n->outs);
        free(n->ins);
        free(n->vx);
        kq_control_list_free(&n->fetched);
        kq_control_list_free(&n->installed);
    }
    for (size_t i = 0; i < s->n_lm; i++)
        free(s->lm[i].e);
    free(s->lm);
    free(s->committed);
    free(s->committed_set);
    free(s->epoch_leader);
    ctl_free(s);
}

/* The process an event is for (a node index; a broker's is its observer's), or -1 for the
 * harness's own events, clients and process starts. */
static int ev_process(const sim *s, const sim_ev *ev)
{
    const sim_actor *a = NULL;
    switch (ev->type) {
    case EV_TIMER:
    case EV_DISK:
    case EV_FAKE_PERSIST:
    case EV_REQ_TIMEOUT:
    case EV_CTL_TIMER:
        return ev->node;
    case EV_NET:
        return ev->pkt ? ev->pkt->to : -1;
    case EV_CTL_NET:
        if (!ev->cp)
            return -1;
        if (ev->cp->kind == PKT_CTL)
            return ev->cp->to_ctl ? ev->cp->node : s->actors[ev->cp->actor].node;
        if (ev->cp->to_actor >= CLIENT_BASE)
            return -1;
        a = &s->actors[ev->cp->to_actor];
        break;
    case EV_ACTOR_TICK:
    case EV_ACTOR_AP:
    case EV_ACTOR_TIMEOUT:
    case EV_DP_TIMER:
    case EV_DP_TIMEOUT:
        a = ev->actor >= 0 ? &s->actors[ev->actor] : NULL;
        break;
    default:
        return -1;
    }
    return a ? a->node : -1;
}

/* 1 when ev is for a paused process: it is queued again for when the process runs. */
static bool ev_wait_for_pause(sim *s, sim_ev *ev)
{
    int p = ev_process(s, ev);
    if (p < 0 || s->nodes[p].paused_until <= ev->t)
        return false;
    ev->t = s->nodes[p].paused_until;
    ev->seq = s->seq++;
    if (!kq_evheap_push(&s->heap, ev)) {
        pkt_free(ev->pkt);
        ctl_pkt_free(ev->cp);
        s->oom = true;
        fail(s, "out of memory");
    }
    return true;
}

int kq_sim_run(const kq_sim_opts *o, kq_sim_result *res)
{
    memset(res, 0, sizeof *res);
    if (o->voters < 0 || o->voters > KQ_SIM_MAX_VOTERS) {
        snprintf(res->reason, sizeof res->reason, "voters must be 1..%d, got %d", KQ_SIM_MAX_VOTERS,
                 o->voters);
        return KQ_ERR_INVALID_CONFIG;
    }
    if (o->observers < -1 || o->observers > KQ_SIM_MAX_OBSERVERS) {
        snprintf(res->reason, sizeof res->reason, "observers must be 0..%d, got %d",
                 KQ_SIM_MAX_OBSERVERS, o->observers);
        return KQ_ERR_INVALID_CONFIG;
    }
    if (o->controller && (o->brokers < 0 || o->brokers > KQ_SIM_MAX_BROKERS)) {
        snprintf(res->reason, sizeof res->reason, "brokers must be 1..%d, got %d",
                 KQ_SIM_MAX_BROKERS, o->brokers);
        return KQ_ERR_INVALID_CONFIG;
    }
    if (o->voter_changes && !o->controller) {
        snprintf(res->reason, sizeof res->reason,
                 "voter changes need the whole cluster (its records), not the quorum alone");
        return KQ_ERR_INVALID_CONFIG;
    }
    sim *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(res->reason, sizeof res->reason, "out of memory");
        return KQ_ERR_NOMEM;
    }
    s->o = *o;
    s->res = res;
    if (o->bug == KQ_SIM_BUG_HOST_DROPS_VOTERS)
        s->o.voter_changes = true;
    s->out = o->out ? o->out : stderr;
    s->hash = 0xCBF29CE484222325ull;
    g_sim = s;
    kq_log_set_level(
        getenv("KQ_SIM_LOG")
            ? KQ_LOG_DEBUG
            : KQ_LOG_ERROR); /* the trace tells the story; the hosts' logs stay quiet */
    kq_evheap_init(&s->heap, sizeof(sim_ev));
    setup(s);
    sim_ev ev;
    while (!s->failed && !s->done && kq_evheap_pop(&s->heap, &ev)) {
        s->now = ev.t;
        if (ev_wait_for_pause(s, &ev))
            continue;
        if (++s->events > MAX_EVENTS) {
            fail(s, "event budget of %llu exhausted", MAX_EVENTS);
            pkt_free(ev.pkt);
            ctl_pkt_free(ev.cp);
            break;
        }
        dispatch(s, &ev);
        pkt_free(ev.pkt);
        ctl_pkt_free(ev.cp);
    }
    if (!s->failed && !s->done)
        fail(s, "sim: the event queue ran dry");
    res->failed = s->failed;
    res->trace_hash = s->hash;
    res->events = s->events;
    res->end_ms = s->now;
    if (s->failed && o->dump_on_failure)
        dump_trace(s);
    int rc = s->oom ? KQ_ERR_NOMEM : 0;
    sim_free(s);
    g_sim = NULL;
    free(s);
    return rc;
}
