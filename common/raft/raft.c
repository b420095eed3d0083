/*
 * kq_raft: the KRaft core (see include/kq/raft.h for the contract).
 *
 * Pure state machine: no I/O, no clock, no global state. Time comes from the events,
 * randomness from a splitmix64 generator seeded by cfg.seed.
 *
 * Ownership: struct kq_raft owns its epoch cache (heap, grows with realloc as epochs are added)
 * and the message buffer that kq_raft_update.msgs points into.
 */
#include "kq/raft.h"
#include "kq/error.h"
#include "kq/quorum.h"
#include "kq/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDLE_DEADLINE_MS 60000u
#define OBSERVER_EXPIRY_MS 300000u
#define BACKOFF_UNIT_MS 100u
#define MAX_TIMER_ROUNDS 16

typedef struct peer {
    int32_t id;
    /* requests this node emitted to the peer and not yet answered */
    bool vote_inflight;
    bool vote_inflight_pre;
    uint32_t vote_inflight_round;
    bool begin_inflight;
    bool end_inflight;
    bool fetch_inflight;
    bool snap_inflight; /* FETCH_SNAPSHOT_REQ */
    /* election round */
    int8_t vote; /* 0 unrecorded, 1 granted, -1 rejected */
    /* resigned: END_EPOCH answered */
    bool end_acked;
    /* leader-side replica state */
    int64_t end_offset;
    uint64_t last_fetch_ms;
    uint64_t last_caught_up_ms;
    uint64_t prev_fetch_ms;
    int64_t prev_fetch_leo;
    int64_t hw_sent; /* high watermark in the last records answer sent to it (-1: none) */
    bool cq_fetched;
} peer;

typedef struct observer {
    bool used;
    int32_t id;
    int64_t end_offset;
    uint64_t last_fetch_ms;
    uint64_t last_caught_up_ms;
    uint64_t prev_fetch_ms;
    int64_t prev_fetch_leo;
    int64_t hw_sent; /* as peer.hw_sent */
} observer;

typedef struct parked {
    bool used;
    uint64_t token;
    int32_t from;
    int64_t fetch_offset;
    int64_t hw_at_park;
    uint64_t deadline;
} parked;

struct kq_raft {
    kq_raft_config cfg;
    int self_idx; /* index in cfg.voters, -1 for an observer */
    bool started;
    bool shutdown; /* EV_RESIGN seen: never campaign, never grant */
    kq_prng prng;
    uint64_t now;

    kq_raft_role role;
    int32_t epoch;
    int32_t voted_id;
    int32_t leader_id;

    /* log */
    int64_t log_start;
    int32_t start_epoch; /* epoch of the record at log_start - 1 (0 when log_start is 0) */
    int64_t leo;
    int64_t durable_end;
    kq_raft_epoch_entry *epochs;
    size_t n_epochs;
    size_t cap_epochs;
    int64_t hw;
    /* Highest HW this node has known since it started, kept when a new leader's HW goes back
     * to unknown: committed, so never truncated and a batch boundary. -1 unknown. */
    int64_t committed;

    /* elections */
    uint32_t round;
    int retries;
    uint64_t election_deadline;
    uint64_t backoff_deadline; /* 0: not backing off */
    uint64_t vote_retry_at;

    /* follower / observer */
    uint64_t fetch_deadline;
    uint64_t fetch_retry_at;
    bool fetched_ok; /* a successful Fetch response since becoming follower */
    /* The latest Fetch to the leader failed in transport (refused, reset, timed out): the
     * leader may be gone, so a pre-vote need not be refused on its behalf. */
    bool fetch_failing;
    uint64_t last_fetch_ok_ms;
    int64_t leader_hw; /* latest HW the leader reported, -1 unknown */
    int discovery_idx; /* observer without leader: voter index fetched from */

    /* leader */
    int64_t epoch_start;
    uint64_t cq_deadline;
    uint64_t begin_resend_at;
    observer observers[KQ_RAFT_MAX_OBSERVERS];
    parked parked[KQ_RAFT_MAX_PARKED];
    size_t n_parked;

    /* snapshots: [0] latest, [1] the one before (end_offset 0: none) */
    kq_raft_snapshot_id snaps[2];
    int64_t snap_sizes[2];
    uint32_t chunk_bytes;
    /* follower snapshot transfer */
    bool snap_fetching;   /* sending FETCH_SNAPSHOT_REQ for snap_fetch_id */
    bool snap_installing; /* install_snapshot emitted, waiting for SNAPSHOT_INSTALLED */
    kq_raft_snapshot_id snap_fetch_id;
    int64_t snap_fetch_pos;
    int64_t snap_fetch_size; /* -1 until the first answer */

    /* resigned */
    uint64_t end_retry_at;
    int32_t preferred[KQ_RAFT_MAX_VOTERS];
    int n_preferred;

    peer peers[KQ_RAFT_MAX_VOTERS];

    /* the current step */
    kq_raft_update *u;
    kq_raft_msg msgs[KQ_RAFT_MAX_MSGS];
};

/* ---------------------------------------------------------------- helpers */

const char *kq_raft_role_name(kq_raft_role role)
{
    switch (role) {
    case KQ_RAFT_UNATTACHED:
        return "unattached";
    case KQ_RAFT_PROSPECTIVE:
        return "prospective";
    case KQ_RAFT_CANDIDATE:
        return "candidate";
    case KQ_RAFT_LEADER:
        return "leader";
    case KQ_RAFT_RESIGNED:
        return "resigned";
    case KQ_RAFT_FOLLOWER:
        return "follower";
    }
    return "unknown";
}

void kq_raft_config_defaults(kq_raft_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->node_id = KQ_RAFT_NO_ID;
    cfg->n_voters = 0;
    cfg->election_timeout_ms = 1000;
    cfg->fetch_timeout_ms = 2000;
    cfg->election_backoff_max_ms = 1000;
    cfg->request_timeout_ms = 2000;
    cfg->retry_backoff_ms = 20;
    cfg->fetch_max_wait_ms = 500;
    cfg->seed = 0;
    cfg->snapshot_chunk_bytes = KQ_RAFT_SNAPSHOT_CHUNK_DEFAULT;
}

/* Uniform in [0, n); 0 when n == 0 (without drawing). */
static uint64_t prng_below(kq_raft *r, uint64_t n)
{
    return n ? kq_prng_below(&r->prng, n) : 0;
}

static bool is_voter(const kq_raft *r)
{
    return r->self_idx >= 0;
}

static int voter_index(const kq_raft *r, int32_t id)
{
    for (int i = 0; i < r->cfg.n_voters; i++)
        if (r->cfg.voters[i] == id)
            return i;
    return -1;
}

/* Epoch of the last entry: of the log, or of the snapshot at the log start when the log holds
 * nothing above it. */
static int32_t last_epoch(const kq_raft *r)
{
    for (size_t i = r->n_epochs; i > 0; i--)
        if (r->epochs[i - 1].start_offset < r->leo)
            return r->epochs[i - 1].epoch;
    return r->log_start > 0 ? r->start_epoch : 0;
}

static bool log_up_to_date(const kq_raft *r, int32_t cand_epoch, int64_t cand_end)
{
    int32_t le = last_epoch(r);
    if (cand_epoch != le)
        return cand_epoch > le;
    return cand_end >= r->leo;
}

/* The snapshot at the log start acts as an entry {start_epoch: log_start} below the cache (the
 * cache may have lost it to a truncation down to the log start). */
static bool end_offset_for_epoch(const kq_raft *r, int32_t epoch, int32_t *out_epoch,
                                 int64_t *out_end)
{
    for (size_t i = r->n_epochs; i > 0; i--) {
        if (r->epochs[i - 1].epoch <= epoch) {
            *out_epoch = r->epochs[i - 1].epoch;
            *out_end = i < r->n_epochs ? r->epochs[i].start_offset : r->leo;
            return true;
        }
    }
    if (r->log_start > 0 && r->start_epoch > 0 && r->start_epoch <= epoch) {
        *out_epoch = r->start_epoch;
        *out_end = r->n_epochs > 0 ? r->epochs[0].start_offset : r->leo;
        return true;
    }
    return false;
}

/* Epoch of the record at `off` (log_start - 1 <= off < leo), -1 if unknown. */
static int32_t epoch_at(const kq_raft *r, int64_t off)
{
    for (size_t i = r->n_epochs; i > 0; i--)
        if (r->epochs[i - 1].start_offset <= off)
            return r->epochs[i - 1].epoch;
    if (r->log_start > 0 && off >= r->log_start - 1)
        return r->start_epoch; /* below the first cached epoch: the snapshot's epoch */
    return -1;
}

static bool snap_id_eq(kq_raft_snapshot_id a, kq_raft_snapshot_id b)
{
    return a.end_offset == b.end_offset && a.epoch == b.epoch;
}

bool kq_raft_end_offset_for_epoch(const kq_raft *r, int32_t epoch, int32_t *out_epoch,
                                  int64_t *out_end)
{
    return end_offset_for_epoch(r, epoch, out_epoch, out_end);
}

static void set_fatal(kq_raft *r, const char *reason)
{
    if (!r->u->fatal) {
        r->u->fatal = true;
        r->u->fatal_reason = reason;
    }
}

/* Record that `epoch` starts at `start`. Entries at or after `start` are dropped first. */
static void add_epoch(kq_raft *r, int32_t epoch, int64_t start)
{
    while (r->n_epochs > 0 && r->epochs[r->n_epochs - 1].start_offset >= start &&
           r->epochs[r->n_epochs - 1].epoch <= epoch)
        r->n_epochs--;
    if (r->n_epochs > 0 && r->epochs[r->n_epochs - 1].epoch >= epoch)
        return; /* already covered */
    if (r->n_epochs == r->cap_epochs) {
        size_t cap = r->cap_epochs ? r->cap_epochs * 2 : 16;
        kq_raft_epoch_entry *e = realloc(r->epochs, cap * sizeof(*e));
        if (!e) {
            set_fatal(r, "out of memory growing the epoch cache");
            return;
        }
        r->epochs = e;
        r->cap_epochs = cap;
    }
    r->epochs[r->n_epochs].epoch = epoch;
    r->epochs[r->n_epochs].start_offset = start;
    r->n_epochs++;
}

static void truncate_epochs(kq_raft *r, int64_t end)
{
    while (r->n_epochs > 0 && r->epochs[r->n_epochs - 1].start_offset >= end)
        r->n_epochs--;
}

static uint64_t random_election_timeout(kq_raft *r)
{
    uint64_t t = r->cfg.election_timeout_ms;
    return t + prng_below(r, t);
}

/* The leader this node names in messages and status. A node that led its epoch and stepped
 * down (Resigned, or Prospective after that) keeps leader_id == self internally, so it never
 * grants a vote or follows another node in that epoch, but it no longer claims to lead. */
/* The leader this node names to others (messages, status, NOT_CONTROLLER hints). A prospective
 * or candidate node keeps the leader it left only to refuse votes in that epoch: it no longer
 * follows it, and naming it would send observers and clients to a leader that is most likely
 * gone (they would follow it for a whole fetch timeout, again and again). */
static int32_t advertised_leader(const kq_raft *r)
{
    if (r->role == KQ_RAFT_LEADER)
        return r->leader_id;
    if (r->role == KQ_RAFT_RESIGNED || r->role == KQ_RAFT_PROSPECTIVE ||
        r->role == KQ_RAFT_CANDIDATE || r->leader_id == r->cfg.node_id)
        return KQ_RAFT_NO_ID;
    return r->leader_id;
}

/* May this node follow `leader` in its current epoch? Only a voter other than itself, and only
 * if it knows no other leader of the epoch (a voter leaves a known leader only for a higher
 * epoch). */
static bool can_follow_in_epoch(const kq_raft *r, int32_t leader)
{
    return leader >= 0 && leader != r->cfg.node_id && voter_index(r, leader) >= 0 &&
           (r->leader_id < 0 || r->leader_id == leader);
}

static kq_raft_msg *emit(kq_raft *r, kq_raft_msg_type type, int32_t to)
{
    kq_raft_update *u = r->u;
    if (u->n_msgs >= KQ_RAFT_MAX_MSGS)
        return NULL;
    kq_raft_msg *m = &r->msgs[u->n_msgs++];
    memset(m, 0, sizeof(*m));
    m->type = type;
    m->from = r->cfg.node_id;
    m->to = to;
    m->error = KQ_ERR_NONE;
    m->epoch = r->epoch;
    m->leader_id = advertised_leader(r);
    return m;
}

static kq_raft_msg *emit_resp(kq_raft *r, const kq_raft_msg *req, kq_raft_msg_type type, int err)
{
    kq_raft_msg *m = emit(r, type, req->from);
    if (m) {
        m->token = req->token;
        m->error = err;
    }
    return m;
}

static void persist(kq_raft *r)
{
    r->u->persist_qstate = true;
    r->u->qstate.epoch = r->epoch;
    r->u->qstate.voted_id = r->voted_id;
    r->u->qstate.leader_id = r->leader_id;
}

static void reset_round(kq_raft *r)
{
    r->round++;
    for (int i = 0; i < r->cfg.n_voters; i++)
        r->peers[i].vote = 0;
    if (is_voter(r))
        r->peers[r->self_idx].vote = 1;
    r->backoff_deadline = 0;
    r->vote_retry_at = 0;
}

/* ---------------------------------------------------------------- leader helpers */

/* Where the leader remembers the high watermark it last sent a replica (NULL: not a replica it
 * tracks). A fetcher whose last answer carried an older high watermark than the leader's is
 * answered at once instead of parked: it cannot know what has committed since (a parked fetch
 * is completed when the high watermark moves, but this one arrived after it moved). */
static int64_t *hw_sent_of(kq_raft *r, int32_t id)
{
    int vi = voter_index(r, id);
    if (vi >= 0)
        return vi == r->self_idx ? NULL : &r->peers[vi].hw_sent;
    for (int i = 0; i < KQ_RAFT_MAX_OBSERVERS; i++)
        if (r->observers[i].used && r->observers[i].id == id)
            return &r->observers[i].hw_sent;
    return NULL;
}

/* delivered: false when the fetcher has given this request up (a newer Fetch superseded it),
 * so the answer does not count as what the fetcher knows. */
static void send_fetch_resp_records(kq_raft *r, int32_t to, uint64_t token, int64_t from_off,
                                    bool delivered)
{
    kq_raft_msg *m = emit(r, KQ_RAFT_FETCH_RESP, to);
    if (!m)
        return;
    int64_t *sent = delivered ? hw_sent_of(r, to) : NULL;
    if (sent)
        *sent = r->hw;
    m->token = token;
    m->u.fetch_resp.high_watermark = r->hw;
    m->u.fetch_resp.log_start_offset = r->log_start;
    m->u.fetch_resp.records_from = from_off;
    m->u.fetch_resp.records_to = r->leo > from_off ? r->leo : from_off;
}

static void send_fetch_error(kq_raft *r, int32_t to, uint64_t token, int err)
{
    kq_raft_msg *m = emit(r, KQ_RAFT_FETCH_RESP, to);
    if (!m)
        return;
    m->token = token;
    m->error = err;
    m->u.fetch_resp.high_watermark = -1;
    m->u.fetch_resp.log_start_offset = r->log_start;
}

/* Complete every parked Fetch: with records/HW when `err` is 0, else with `err`. */
static void complete_all_parked(kq_raft *r, int err)
{
    for (int i = 0; i < KQ_RAFT_MAX_PARKED && r->n_parked > 0; i++) {
        parked *p = &r->parked[i];
        if (!p->used)
            continue;
        if (r->u->n_msgs >= KQ_RAFT_MAX_MSGS)
            return;
        if (err)
            send_fetch_error(r, p->from, p->token, err);
        else
            send_fetch_resp_records(r, p->from, p->token, p->fetch_offset, true);
        p->used = false;
        r->n_parked--;
    }
}

/* Stop a FetchSnapshot transfer (not an install the host is doing): the host drops the .part. */
static void abort_snapshot_fetch(kq_raft *r)
{
    if (!r->snap_fetching)
        return;
    r->snap_fetching = false;
    r->u->snapshot_abort = true;
    r->u->snapshot_id = r->snap_fetch_id;
}

static void leave_role(kq_raft *r)
{
    if (r->role == KQ_RAFT_LEADER)
        complete_all_parked(r, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    abort_snapshot_fetch(r);
}

static void leader_update_hw(kq_raft *r)
{
    if (r->role != KQ_RAFT_LEADER)
        return;
    int64_t ends[KQ_RAFT_MAX_VOTERS];
    int n = r->cfg.n_voters;
    for (int i = 0; i < n; i++)
        ends[i] = i == r->self_idx ? r->durable_end : r->peers[i].end_offset;
    r->hw = kq_quorum_high_watermark(ends, n, r->leo, r->epoch_start, r->hw);
    if (r->hw > r->committed)
        r->committed = r->hw;
}

/* ---------------------------------------------------------------- transitions */

static void become_leader(kq_raft *r);
static void become_candidate(kq_raft *r);

static void start_backoff(kq_raft *r)
{
    r->retries++;
    int exp = r->retries < 20 ? r->retries : 20;
    uint64_t span = (uint64_t)1 << exp; /* random(0 .. 2^retries - 1) */
    uint64_t b = BACKOFF_UNIT_MS * prng_below(r, span);
    if (b > r->cfg.election_backoff_max_ms)
        b = r->cfg.election_backoff_max_ms;
    r->backoff_deadline = r->now + b;
    if (r->backoff_deadline == 0)
        r->backoff_deadline = 1;
}

/* Won, lost or still open? Called after any vote is recorded. */
static void check_votes(kq_raft *r)
{
    if (r->role != KQ_RAFT_PROSPECTIVE && r->role != KQ_RAFT_CANDIDATE)
        return;
    int granted = 0, rejected = 0;
    for (int i = 0; i < r->cfg.n_voters; i++) {
        if (r->peers[i].vote > 0)
            granted++;
        else if (r->peers[i].vote < 0)
            rejected++;
    }
    switch (kq_quorum_tally(granted, rejected, r->cfg.n_voters)) {
    case KQ_VOTE_WON:
        if (r->role == KQ_RAFT_PROSPECTIVE)
            become_candidate(r);
        else
            become_leader(r);
        return;
    case KQ_VOTE_LOST:
        if (r->backoff_deadline == 0)
            start_backoff(r);
        return;
    case KQ_VOTE_OPEN:
        return;
    }
}

static void become_unattached(kq_raft *r, int32_t epoch, int32_t voted)
{
    leave_role(r);
    r->role = KQ_RAFT_UNATTACHED;
    r->epoch = epoch;
    r->voted_id = voted;
    r->leader_id = KQ_RAFT_NO_ID;
    r->leader_hw = -1;
    r->backoff_deadline = 0;
    persist(r);
    if (is_voter(r)) {
        r->election_deadline = r->now + random_election_timeout(r);
    } else {
        r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;
        r->fetch_retry_at = 0;
        r->discovery_idx = -1;
    }
}

static void become_follower(kq_raft *r, int32_t epoch, int32_t leader)
{
    leave_role(r);
    r->role = KQ_RAFT_FOLLOWER;
    r->epoch = epoch;
    r->voted_id = KQ_RAFT_NO_ID;
    r->leader_id = leader;
    r->leader_hw = -1;
    r->backoff_deadline = 0;
    r->retries = 0;
    r->fetched_ok = false;
    r->fetch_failing = false;
    r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;
    r->fetch_retry_at = 0;
    persist(r);
}

static void become_prospective(kq_raft *r)
{
    if (!is_voter(r) || r->shutdown || r->snap_installing)
        return; /* a node installing a snapshot never campaigns: a leader never installs */
    leave_role(r);
    r->role = KQ_RAFT_PROSPECTIVE; /* same epoch, not durable; keeps vote and leader hint */
    reset_round(r);
    r->election_deadline = r->now + random_election_timeout(r);
    check_votes(r);
}

static void become_candidate(kq_raft *r)
{
    int32_t le = last_epoch(r);
    r->role = KQ_RAFT_CANDIDATE;
    r->epoch++;
    if (r->epoch <= le)
        r->epoch = le + 1; /* a candidate epoch is always above the last log epoch */
    r->voted_id = r->cfg.node_id;
    r->leader_id = KQ_RAFT_NO_ID;
    persist(r);
    reset_round(r);
    r->election_deadline = r->now + random_election_timeout(r);
    check_votes(r);
}

static void become_leader(kq_raft *r)
{
    kq_raft_update *u = r->u;
    r->role = KQ_RAFT_LEADER;
    r->leader_id = r->cfg.node_id;
    r->voted_id = r->cfg.node_id;
    r->retries = 0;
    r->backoff_deadline = 0;
    persist(r);
    r->epoch_start = r->leo;
    add_epoch(r, r->epoch, r->leo);
    if (u->n_append < KQ_RAFT_MAX_BATCHES) {
        kq_raft_batch *b = &u->append[u->n_append++];
        memset(b, 0, sizeof(*b));
        b->base_offset = r->leo;
        b->epoch = r->epoch;
        b->count = 1;
        b->kind = KQ_RAFT_BATCH_LEADER_CHANGE;
    }
    r->leo += 1;
    r->hw = -1;
    for (int i = 0; i < r->cfg.n_voters; i++) {
        peer *p = &r->peers[i];
        p->end_offset = -1;
        p->last_fetch_ms = 0;
        p->last_caught_up_ms = 0;
        p->prev_fetch_ms = 0;
        p->prev_fetch_leo = -1;
        p->hw_sent = -1;
        p->cq_fetched = false;
    }
    memset(r->observers, 0, sizeof(r->observers));
    r->cq_deadline = r->now + (uint64_t)r->cfg.fetch_timeout_ms * 3 / 2;
    r->begin_resend_at = r->now; /* send BEGIN_EPOCH now */
    leader_update_hw(r);
}

static int cmp_pref(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* {end_offset, id} pairs */
    if (x[0] != y[0])
        return x[0] < y[0] ? 1 : -1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static void become_resigned(kq_raft *r)
{
    int64_t pairs[KQ_RAFT_MAX_VOTERS][2];
    int n = 0;
    for (int i = 0; i < r->cfg.n_voters; i++) {
        if (i == r->self_idx)
            continue;
        pairs[n][0] = r->peers[i].end_offset;
        pairs[n][1] = r->peers[i].id;
        n++;
    }
    qsort(pairs, (size_t)n, sizeof(pairs[0]), cmp_pref);
    r->n_preferred = n;
    for (int i = 0; i < n; i++)
        r->preferred[i] = (int32_t)pairs[i][1];

    leave_role(r);
    r->role = KQ_RAFT_RESIGNED;    /* in memory only: qstate keeps leader = self, and so does */
    r->leader_id = r->cfg.node_id; /* leader_id (advertised as none, see advertised_leader) */
    for (int i = 0; i < r->cfg.n_voters; i++)
        r->peers[i].end_acked = (i == r->self_idx);
    r->end_retry_at = 0;
    r->election_deadline = r->now + random_election_timeout(r);
}

/* A message showed a higher epoch: follow its leader if it names one, else Unattached. */
static void on_higher_epoch(kq_raft *r, int32_t epoch, int32_t leader)
{
    if (leader >= 0 && leader != r->cfg.node_id && voter_index(r, leader) >= 0)
        become_follower(r, epoch, leader);
    else
        become_unattached(r, epoch, KQ_RAFT_NO_ID);
}

/* ---------------------------------------------------------------- Vote */

static bool prevote_grant(kq_raft *r, const kq_raft_msg *m)
{
    const __typeof__(m->u.vote_req) *v = &m->u.vote_req;
    if (m->epoch <= r->epoch)
        return false;
    if (!is_voter(r) || r->shutdown || voter_index(r, v->candidate_id) < 0)
        return false;
    if (!log_up_to_date(r, v->last_epoch, v->last_offset))
        return false;
    switch (r->role) {
    case KQ_RAFT_LEADER:
        return false;
    case KQ_RAFT_FOLLOWER:
        /* a live leader: a successful Fetch response within fetch_timeout, and the latest
         * Fetch did not fail in transport (a crashed leader refuses connections at once) */
        if (r->fetched_ok && !r->fetch_failing &&
            r->now - r->last_fetch_ok_ms < r->cfg.fetch_timeout_ms)
            return false;
        return true;
    default:
        return true;
    }
}

static bool vote_grant(kq_raft *r, const kq_raft_msg *m)
{
    const __typeof__(m->u.vote_req) *v = &m->u.vote_req;
    if (!is_voter(r) || r->shutdown || voter_index(r, v->candidate_id) < 0)
        return false;
    switch (r->role) {
    case KQ_RAFT_UNATTACHED:
    case KQ_RAFT_PROSPECTIVE:
        if (r->leader_id >= 0)
            return false;
        if (r->voted_id == v->candidate_id)
            return true;
        if (r->voted_id >= 0)
            return false;
        return log_up_to_date(r, v->last_epoch, v->last_offset);
    default:
        return false;
    }
}

static void on_vote_req(kq_raft *r, const kq_raft_msg *m)
{
    const __typeof__(m->u.vote_req) *v = &m->u.vote_req;
    int err = KQ_ERR_NONE;
    bool granted = false;

    if (v->last_offset < 0 || v->last_epoch < 0 || v->last_epoch >= m->epoch)
        err = KQ_ERR_INVALID_REQUEST;
    else if (m->epoch < r->epoch)
        err = KQ_ERR_FENCED_LEADER_EPOCH;
    else if (v->candidate_id < 0 || v->candidate_id == r->cfg.node_id)
        err = KQ_ERR_INVALID_REQUEST;
    else if (v->pre_vote) {
        granted = prevote_grant(r, m); /* never changes state or epoch */
    } else {
        if (m->epoch > r->epoch)
            become_unattached(r, m->epoch, KQ_RAFT_NO_ID);
        granted = vote_grant(r, m);
        if (granted && (r->role != KQ_RAFT_UNATTACHED || r->voted_id != v->candidate_id))
            become_unattached(r, r->epoch, v->candidate_id); /* durable, same update */
    }
    kq_raft_msg *resp = emit_resp(r, m, KQ_RAFT_VOTE_RESP, err);
    if (resp)
        resp->u.vote_resp.granted = granted;
}

static void on_vote_resp(kq_raft *r, const kq_raft_msg *m)
{
    int i = voter_index(r, m->from);
    if (i < 0 || i == r->self_idx || !r->peers[i].vote_inflight)
        return;
    peer *p = &r->peers[i];
    bool was_pre = p->vote_inflight_pre;
    uint32_t round = p->vote_inflight_round;
    p->vote_inflight = false;

    if (m->error == KQ_ERR_REQUEST_TIMED_OUT || m->error == KQ_ERR_NETWORK_EXCEPTION ||
        m->error == KQ_ERR_BROKER_NOT_AVAILABLE) {
        r->vote_retry_at = r->now + r->cfg.retry_backoff_ms;
        return;
    }
    if (m->epoch > r->epoch) {
        on_higher_epoch(r, m->epoch, m->leader_id);
        return;
    }
    if (round != r->round)
        return; /* an earlier round: the current round's request goes out in this step */
    bool match =
        (r->role == KQ_RAFT_PROSPECTIVE && was_pre) || (r->role == KQ_RAFT_CANDIDATE && !was_pre);
    if (!match)
        return;
    /* A pre-vote never moves the receiver's epoch, so its answer may carry a lower epoch; a
     * real vote is only granted at our epoch. Anything else counts as a rejection (ignoring it
     * would re-send the same request at once). */
    bool granted =
        m->error == KQ_ERR_NONE && m->u.vote_resp.granted && (was_pre || m->epoch == r->epoch);
    p->vote = granted ? 1 : -1;
    if (!granted && m->epoch == r->epoch && can_follow_in_epoch(r, m->leader_id)) {
        become_follower(r, r->epoch, m->leader_id); /* a leader at our epoch is alive */
        return;
    }
    check_votes(r);
}

/* ---------------------------------------------------------------- Begin/EndQuorumEpoch */

static void on_begin_req(kq_raft *r, const kq_raft_msg *m)
{
    int32_t leader = m->leader_id >= 0 ? m->leader_id : m->from;
    int err = KQ_ERR_NONE;
    if (leader != m->from || leader == r->cfg.node_id || voter_index(r, leader) < 0)
        err = KQ_ERR_INVALID_REQUEST;
    else if (m->epoch < r->epoch)
        err = KQ_ERR_FENCED_LEADER_EPOCH;
    else if (m->epoch > r->epoch)
        become_follower(r, m->epoch, leader);
    else if (r->role == KQ_RAFT_LEADER || r->role == KQ_RAFT_RESIGNED ||
             !can_follow_in_epoch(r, leader))
        err = KQ_ERR_INVALID_REQUEST; /* two leaders in one epoch: a bug somewhere */
    else if (r->role != KQ_RAFT_FOLLOWER)
        become_follower(r, m->epoch, leader);
    emit_resp(r, m, KQ_RAFT_BEGIN_EPOCH_RESP, err);
}

static void on_begin_resp(kq_raft *r, const kq_raft_msg *m)
{
    int i = voter_index(r, m->from);
    if (i < 0 || i == r->self_idx || !r->peers[i].begin_inflight)
        return;
    r->peers[i].begin_inflight = false;
    if (m->epoch > r->epoch)
        on_higher_epoch(r, m->epoch, m->leader_id);
}

static uint64_t end_epoch_backoff(kq_raft *r, const kq_raft_msg *m)
{
    uint64_t max = r->cfg.election_backoff_max_ms;
    int n = m->u.end_req.n_preferred;
    if (n < 0 || n > KQ_RAFT_MAX_VOTERS)
        return max;
    for (int p = 0; p < n; p++) {
        if (m->u.end_req.preferred[p] != r->cfg.node_id)
            continue;
        if (p == 0)
            return 0;
        uint64_t b = (max >> (n - 1)) << (p - 1);
        return b < max ? b : max;
    }
    return max;
}

static void on_end_req(kq_raft *r, const kq_raft_msg *m)
{
    int32_t leader = m->leader_id >= 0 ? m->leader_id : m->from;
    int err = KQ_ERR_NONE;
    if (leader != m->from || leader == r->cfg.node_id || voter_index(r, leader) < 0 ||
        m->u.end_req.n_preferred < 0 || m->u.end_req.n_preferred > KQ_RAFT_MAX_VOTERS) {
        err = KQ_ERR_INVALID_REQUEST;
    } else if (m->epoch < r->epoch) {
        err = KQ_ERR_FENCED_LEADER_EPOCH;
    } else {
        if (m->epoch > r->epoch)
            become_follower(r, m->epoch, leader);
        if (is_voter(r)) {
            uint64_t at = r->now + end_epoch_backoff(r, m);
            if (r->role == KQ_RAFT_FOLLOWER && r->leader_id == leader) {
                if (at < r->fetch_deadline)
                    r->fetch_deadline = at;
            } else if (r->role == KQ_RAFT_UNATTACHED) {
                if (at < r->election_deadline)
                    r->election_deadline = at;
            }
        }
    }
    emit_resp(r, m, KQ_RAFT_END_EPOCH_RESP, err);
}

static void on_end_resp(kq_raft *r, const kq_raft_msg *m)
{
    int i = voter_index(r, m->from);
    if (i < 0 || i == r->self_idx || !r->peers[i].end_inflight)
        return;
    r->peers[i].end_inflight = false;
    if (m->epoch > r->epoch) {
        on_higher_epoch(r, m->epoch, m->leader_id);
        return;
    }
    if (m->error == KQ_ERR_REQUEST_TIMED_OUT || m->error == KQ_ERR_NETWORK_EXCEPTION ||
        m->error == KQ_ERR_BROKER_NOT_AVAILABLE) {
        r->end_retry_at = r->now + r->cfg.retry_backoff_ms;
        return;
    }
    r->peers[i].end_acked = true;
}

/* ---------------------------------------------------------------- Fetch (leader side) */

static observer *observer_slot(kq_raft *r, int32_t id)
{
    observer *free_slot = NULL, *oldest = NULL;
    for (int i = 0; i < KQ_RAFT_MAX_OBSERVERS; i++) {
        observer *o = &r->observers[i];
        if (o->used && o->id == id)
            return o;
        if (!o->used) {
            if (!free_slot)
                free_slot = o;
        } else if (!oldest || o->last_fetch_ms < oldest->last_fetch_ms) {
            oldest = o;
        }
    }
    observer *o = free_slot ? free_slot : oldest;
    memset(o, 0, sizeof(*o));
    o->used = true;
    o->id = id;
    o->end_offset = -1;
    o->prev_fetch_leo = -1;
    o->hw_sent = -1;
    return o;
}

static void record_fetch(kq_raft *r, int64_t *end, uint64_t *last_fetch, uint64_t *caught_up,
                         uint64_t *prev_fetch, int64_t *prev_leo, int64_t fetch_offset)
{
    *end = fetch_offset;
    if (fetch_offset >= r->leo)
        *caught_up = r->now;
    else if (*prev_leo >= 0 && fetch_offset >= *prev_leo && *prev_fetch > *caught_up)
        *caught_up = *prev_fetch;
    *last_fetch = r->now;
    *prev_fetch = r->now;
    *prev_leo = r->leo;
}

static void check_quorum_mark(kq_raft *r, int i)
{
    r->peers[i].cq_fetched = true;
    int n = 1;
    for (int j = 0; j < r->cfg.n_voters; j++)
        if (j != r->self_idx && r->peers[j].cq_fetched)
            n++;
    if (kq_quorum_heard(n, r->cfg.n_voters)) {
        for (int j = 0; j < r->cfg.n_voters; j++)
            r->peers[j].cq_fetched = false;
        r->cq_deadline = r->now + (uint64_t)r->cfg.fetch_timeout_ms * 3 / 2;
    }
}

static void on_fetch_req(kq_raft *r, const kq_raft_msg *m)
{
    const __typeof__(m->u.fetch_req) *f = &m->u.fetch_req;
    if (f->max_wait_ms < 0 || f->fetch_offset < 0 || f->last_fetched_epoch < 0 ||
        f->last_fetched_epoch > m->epoch) {
        send_fetch_error(r, m->from, m->token, KQ_ERR_INVALID_REQUEST);
        return;
    }
    if (m->epoch < r->epoch) {
        send_fetch_error(r, m->from, m->token, KQ_ERR_FENCED_LEADER_EPOCH);
        return;
    }
    if (m->epoch > r->epoch) {
        send_fetch_error(r, m->from, m->token, KQ_ERR_UNKNOWN_LEADER_EPOCH);
        return;
    }
    if (r->role != KQ_RAFT_LEADER) {
        send_fetch_error(r, m->from, m->token, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
        return;
    }
    if (r->shutdown) {
        send_fetch_error(r, m->from, m->token, KQ_ERR_BROKER_NOT_AVAILABLE);
        return;
    }
    /* A new Fetch from a replica supersedes one it left parked. */
    for (int i = 0; i < KQ_RAFT_MAX_PARKED && r->n_parked > 0; i++) {
        parked *p = &r->parked[i];
        if (p->used && p->from == m->from) {
            send_fetch_resp_records(r, p->from, p->token, p->fetch_offset, false);
            p->used = false;
            r->n_parked--;
        }
    }

    int vi = voter_index(r, m->from);
    if (vi >= 0)
        check_quorum_mark(r, vi);

    /* validateOffsetAndEpoch (kraft-semantics.md 1.5). Item 5 (KAFKA-15078): a fetch from
     * offset 0 gets the snapshot whenever one exists. Item 2: with a snapshot at the log start
     * (log_start > 0, epoch start_epoch), an offset below it, at it with another epoch, or a
     * last fetched epoch older than it gets the latest snapshot. */
    if (r->snaps[0].end_offset > 0 &&
        (f->fetch_offset == 0 || (r->log_start > 0 && (f->fetch_offset < r->log_start ||
                                                       (f->fetch_offset == r->log_start &&
                                                        f->last_fetched_epoch != r->start_epoch) ||
                                                       f->last_fetched_epoch < r->start_epoch)))) {
        kq_raft_msg *resp = emit_resp(r, m, KQ_RAFT_FETCH_RESP, KQ_ERR_NONE);
        if (resp) {
            resp->u.fetch_resp.high_watermark = r->hw;
            resp->u.fetch_resp.log_start_offset = r->log_start;
            resp->u.fetch_resp.snapshot = true;
            resp->u.fetch_resp.snapshot_id = r->snaps[0];
            resp->u.fetch_resp.records_from = f->fetch_offset;
            resp->u.fetch_resp.records_to = f->fetch_offset;
        }
        return;
    }
    bool valid;
    int32_t div_epoch = 0;
    int64_t div_end = r->log_start;
    if (f->fetch_offset == 0 && r->log_start == 0) {
        valid = true;
    } else if (f->fetch_offset < r->log_start) {
        send_fetch_error(r, m->from, m->token, KQ_ERR_OFFSET_OUT_OF_RANGE);
        return;
    } else if (!end_offset_for_epoch(r, f->last_fetched_epoch, &div_epoch, &div_end)) {
        valid = false;
        div_epoch = 0;
        div_end = r->log_start;
    } else {
        valid = div_epoch == f->last_fetched_epoch && div_end >= f->fetch_offset;
    }
    if (!valid) {
        kq_raft_msg *resp = emit_resp(r, m, KQ_RAFT_FETCH_RESP, KQ_ERR_NONE);
        if (resp) {
            resp->u.fetch_resp.high_watermark = r->hw;
            resp->u.fetch_resp.log_start_offset = r->log_start;
            resp->u.fetch_resp.diverging = true;
            resp->u.fetch_resp.diverging_epoch = div_epoch;
            resp->u.fetch_resp.diverging_end_offset = div_end;
            resp->u.fetch_resp.records_from = f->fetch_offset;
            resp->u.fetch_resp.records_to = f->fetch_offset;
        }
        return;
    }

    int64_t old_hw = r->hw;
    if (vi >= 0 && vi != r->self_idx) {
        peer *p = &r->peers[vi];
        record_fetch(r, &p->end_offset, &p->last_fetch_ms, &p->last_caught_up_ms, &p->prev_fetch_ms,
                     &p->prev_fetch_leo, f->fetch_offset);
        leader_update_hw(r);
    } else if (vi < 0) {
        observer *o = observer_slot(r, m->from);
        record_fetch(r, &o->end_offset, &o->last_fetch_ms, &o->last_caught_up_ms, &o->prev_fetch_ms,
                     &o->prev_fetch_leo, f->fetch_offset);
    }

    const int64_t *sent = hw_sent_of(r, m->from);
    bool knows_hw = sent == NULL || *sent == r->hw;
    if (f->fetch_offset >= r->leo && f->max_wait_ms > 0 && r->hw == old_hw && knows_hw &&
        r->n_parked < KQ_RAFT_MAX_PARKED) {
        for (int i = 0; i < KQ_RAFT_MAX_PARKED; i++) {
            parked *p = &r->parked[i];
            if (p->used)
                continue;
            uint64_t wait = (uint64_t)f->max_wait_ms;
            uint64_t cap = r->cfg.fetch_timeout_ms / 2 ? r->cfg.fetch_timeout_ms / 2 : 1;
            p->used = true;
            p->token = m->token;
            p->from = m->from;
            p->fetch_offset = f->fetch_offset;
            p->hw_at_park = r->hw;
            p->deadline = r->now + (wait < cap ? wait : cap);
            r->n_parked++;
            return;
        }
    }
    send_fetch_resp_records(r, m->from, m->token, f->fetch_offset, true);
}

/* ---------------------------------------------------------------- FetchSnapshot (leader side) */

static void send_fetch_snapshot_error(kq_raft *r, const kq_raft_msg *m, int err)
{
    kq_raft_msg *resp = emit_resp(r, m, KQ_RAFT_FETCH_SNAPSHOT_RESP, err);
    if (resp) {
        resp->u.fetch_snapshot_resp.snapshot_id = m->u.fetch_snapshot_req.snapshot_id;
        resp->u.fetch_snapshot_resp.size = -1;
        resp->u.fetch_snapshot_resp.position = m->u.fetch_snapshot_req.position;
    }
}

static void on_fetch_snapshot_req(kq_raft *r, const kq_raft_msg *m)
{
    const __typeof__(m->u.fetch_snapshot_req) *f = &m->u.fetch_snapshot_req;
    if (f->max_bytes < 0 || f->snapshot_id.end_offset < 0 || f->snapshot_id.epoch < 0) {
        send_fetch_snapshot_error(r, m, KQ_ERR_INVALID_REQUEST);
        return;
    }
    if (m->epoch < r->epoch) {
        send_fetch_snapshot_error(r, m, KQ_ERR_FENCED_LEADER_EPOCH);
        return;
    }
    if (m->epoch > r->epoch) {
        send_fetch_snapshot_error(r, m, KQ_ERR_UNKNOWN_LEADER_EPOCH);
        return;
    }
    if (r->role != KQ_RAFT_LEADER) {
        send_fetch_snapshot_error(r, m, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
        return;
    }
    if (r->shutdown) {
        send_fetch_snapshot_error(r, m, KQ_ERR_BROKER_NOT_AVAILABLE);
        return;
    }
    int vi = voter_index(r, m->from);
    if (vi >= 0)
        check_quorum_mark(r, vi); /* FetchSnapshot counts toward check-quorum (1.7) */
    else
        observer_slot(r, m->from)->last_fetch_ms = r->now;

    /* Any snapshot this node still has (the latest or the one before), never the bootstrap
     * id {0, 0}. */
    int k = -1;
    for (int i = 0; i < 2; i++)
        if (r->snaps[i].end_offset > 0 && snap_id_eq(r->snaps[i], f->snapshot_id))
            k = i;
    if (k < 0) {
        send_fetch_snapshot_error(r, m, KQ_ERR_SNAPSHOT_NOT_FOUND);
        return;
    }
    int64_t size = r->snap_sizes[k];
    if (f->position < 0 || f->position >= size) {
        send_fetch_snapshot_error(r, m, KQ_ERR_POSITION_OUT_OF_RANGE);
        return;
    }
    int64_t len = size - f->position;
    if (len > (int64_t)r->chunk_bytes)
        len = r->chunk_bytes;
    if (f->max_bytes > 0 && len > f->max_bytes)
        len = f->max_bytes;
    kq_raft_msg *resp = emit_resp(r, m, KQ_RAFT_FETCH_SNAPSHOT_RESP, KQ_ERR_NONE);
    if (resp) {
        resp->u.fetch_snapshot_resp.snapshot_id = r->snaps[k];
        resp->u.fetch_snapshot_resp.size = size;
        resp->u.fetch_snapshot_resp.position = f->position;
        resp->u.fetch_snapshot_resp.data = NULL;
        resp->u.fetch_snapshot_resp.len = (size_t)len;
    }
}

/* ---------------------------------------------------------------- Fetch (follower side) */

static void follower_update_hw(kq_raft *r)
{
    if (r->role != KQ_RAFT_FOLLOWER || r->leader_hw < 0)
        return;
    int64_t h = r->leader_hw < r->durable_end ? r->leader_hw : r->durable_end;
    if (h > r->hw)
        r->hw = h;
    if (r->hw > r->committed)
        r->committed = r->hw;
}

/* Is `t` an offset this node knows is a batch boundary of its own log: its LEO, its log start,
 * a start offset in its epoch cache, or its high watermark (a committed boundary; the highest
 * HW it has known since it started, which it keeps when a new leader's HW is unknown again)? */
static bool known_boundary(const kq_raft *r, int64_t t)
{
    if (t == r->leo || t == r->log_start || (r->hw >= 0 && t == r->hw) ||
        (r->committed >= 0 && t == r->committed))
        return true;
    for (size_t i = 0; i < r->n_epochs; i++)
        if (r->epochs[i].start_offset == t)
            return true;
    return false;
}

/*
 * Where a follower truncates on DivergingEpoch(epoch, end): T = min(end, own end for epoch,
 * LEO), where the own end is per the epoch cache (the largest own epoch E' <= epoch, ending at
 * the start of its next epoch or the LEO) or, when no cached epoch is <= epoch, the start of
 * its first cached epoch (its log start: nothing it holds belongs to `epoch` or earlier).
 *
 * The store truncates only at batch boundaries, so the result is always a boundary:
 * - T in the known set (known_boundary) is used as is;
 * - E' == epoch: T is a boundary of both logs. Every replica's epoch-E' entries are a prefix
 *   of the one sequence of batches that epoch's leader wrote, so the leader's end of E' (its
 *   next epoch's start or its LEO, both its batch boundaries) and ours are boundaries of it;
 * - E' < epoch: T (the leader's end of `epoch`) may fall inside one of our epoch-E' batches.
 *   We truncate to our own end of E' instead, the start of our next epoch: a known boundary,
 *   and every entry above it is of an epoch in (epoch, last fetched epoch] that the leader does
 *   not hold (its largest epoch <= our last fetched epoch is `epoch`), so none is committed.
 *   The next Fetch carries last epoch E' and the leader answers the exact end of E'.
 * Truncating deeper than T to the start of our epoch segment would not be safe: entries there
 * may be committed by the leader although this node has not learnt the HW yet.
 */
static int64_t truncation_point(const kq_raft *r, int32_t epoch, int64_t leader_end)
{
    int32_t own_epoch = -1;
    int64_t own_end;
    bool holds = end_offset_for_epoch(r, epoch, &own_epoch, &own_end);
    if (!holds) {
        own_end = r->n_epochs > 0 ? r->epochs[0].start_offset : r->log_start;
        if (own_end < r->log_start)
            own_end = r->log_start;
    }
    int64_t t = leader_end < own_end ? leader_end : own_end;
    if (t > r->leo)
        t = r->leo;
    if (t < r->log_start)
        t = r->log_start;
    if (known_boundary(r, t) || (holds && own_epoch == epoch))
        return t;
    return own_end < r->leo ? own_end : r->leo; /* E' < epoch: own end of E', see above */
}

static bool is_transport_error(int err)
{
    return err == KQ_ERR_REQUEST_TIMED_OUT || err == KQ_ERR_NETWORK_EXCEPTION ||
           err == KQ_ERR_BROKER_NOT_AVAILABLE;
}

static void fetch_backoff(kq_raft *r)
{
    r->fetch_retry_at = r->now + r->cfg.retry_backoff_ms;
}

static void follower_append(kq_raft *r, const kq_raft_msg *m)
{
    const __typeof__(m->u.fetch_resp) *f = &m->u.fetch_resp;
    size_t n = f->n_batches < KQ_RAFT_MAX_BATCHES ? f->n_batches : KQ_RAFT_MAX_BATCHES;
    int64_t next = r->leo;
    int32_t ep = last_epoch(r);
    /* validate all first: a bad response changes nothing */
    for (size_t i = 0; i < n; i++) {
        const kq_raft_batch *b = &f->batches[i];
        if (b->base_offset != next || b->count <= 0 || b->epoch < ep || b->epoch > m->epoch ||
            b->epoch <= 0) {
            fetch_backoff(r);
            return;
        }
        next = b->base_offset + b->count;
        ep = b->epoch;
    }
    kq_raft_update *u = r->u;
    for (size_t i = 0; i < n && u->n_append < KQ_RAFT_MAX_BATCHES; i++) {
        const kq_raft_batch *b = &f->batches[i];
        if (b->epoch > last_epoch(r) || r->n_epochs == 0)
            add_epoch(r, b->epoch, b->base_offset);
        kq_raft_batch *a = &u->append[u->n_append++];
        *a = *b;
        a->kind = KQ_RAFT_BATCH_FETCHED;
        r->leo = b->base_offset + b->count;
    }
}

/* The leader answered SNAPSHOT: switch to FetchSnapshot (1.5, follower side). */
static void begin_snapshot_fetch(kq_raft *r, kq_raft_snapshot_id id, int32_t leader_epoch)
{
    if (id.end_offset <= 0 || id.epoch <= 0 || id.epoch > leader_epoch) {
        fetch_backoff(r); /* malformed */
        return;
    }
    if (id.end_offset < r->committed || id.end_offset < r->hw ||
        (r->snaps[0].end_offset > 0 && id.end_offset <= r->snaps[0].end_offset &&
         id.end_offset <= r->leo)) {
        /* Never go back below what this node knows is committed or already holds: a
         * correct leader does not ask for that (our offset would have been valid). */
        fetch_backoff(r);
        return;
    }
    r->snap_fetching = true;
    r->snap_fetch_id = id;
    r->snap_fetch_pos = 0;
    r->snap_fetch_size = -1;
}

static void on_fetch_snapshot_resp(kq_raft *r, const kq_raft_msg *m)
{
    int i = voter_index(r, m->from);
    if (i < 0 || i == r->self_idx || !r->peers[i].snap_inflight)
        return;
    r->peers[i].snap_inflight = false;
    const __typeof__(m->u.fetch_snapshot_resp) *f = &m->u.fetch_snapshot_resp;

    if (is_transport_error(m->error)) {
        fetch_backoff(r);
        return;
    }
    if (m->epoch > r->epoch) {
        on_higher_epoch(r, m->epoch, m->leader_id); /* aborts the transfer */
        return;
    }
    if (m->epoch < r->epoch || r->role != KQ_RAFT_FOLLOWER || m->from != r->leader_id ||
        !r->snap_fetching) {
        fetch_backoff(r); /* stale */
        return;
    }
    if (m->error == KQ_ERR_SNAPSHOT_NOT_FOUND || m->error == KQ_ERR_POSITION_OUT_OF_RANGE) {
        /* The leader dropped that snapshot (a newer one exists) or our position is off:
         * start over with a Fetch, which names the leader's latest snapshot. */
        abort_snapshot_fetch(r);
        return;
    }
    if (m->error != KQ_ERR_NONE) {
        fetch_backoff(r);
        return;
    }
    if (!snap_id_eq(f->snapshot_id, r->snap_fetch_id) || f->size <= 0 ||
        (r->snap_fetch_size >= 0 && f->size != r->snap_fetch_size)) {
        abort_snapshot_fetch(r); /* a different file than the one we have begun */
        return;
    }
    if (f->position != r->snap_fetch_pos || f->len == 0 || (!f->data && f->len > 0) ||
        (uint64_t)f->len > (uint64_t)(f->size - f->position)) {
        fetch_backoff(r); /* ask for the same position again */
        return;
    }
    r->fetched_ok = true;
    r->last_fetch_ok_ms = r->now;
    r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;

    kq_raft_update *u = r->u;
    u->snapshot_id = r->snap_fetch_id;
    u->snapshot_chunk = true;
    u->chunk_position = f->position;
    u->chunk_data = f->data;
    u->chunk_len = f->len;
    u->snapshot_size = f->size;
    r->snap_fetch_size = f->size;
    r->snap_fetch_pos += (int64_t)f->len;
    if (r->snap_fetch_pos == f->size) {
        r->snap_fetching = false;
        r->snap_installing = true;
        u->install_snapshot = true;
    }
}

static void on_fetch_resp(kq_raft *r, const kq_raft_msg *m)
{
    int i = voter_index(r, m->from);
    if (i < 0 || i == r->self_idx || !r->peers[i].fetch_inflight)
        return;
    r->peers[i].fetch_inflight = false;
    const __typeof__(m->u.fetch_resp) *f = &m->u.fetch_resp;

    if (is_transport_error(m->error)) {
        fetch_backoff(r);
        if (r->role == KQ_RAFT_FOLLOWER && m->from == r->leader_id)
            r->fetch_failing = true;
        if (r->role == KQ_RAFT_UNATTACHED)
            r->discovery_idx = -1; /* try another voter */
        return;
    }
    if (m->epoch > r->epoch) {
        on_higher_epoch(r, m->epoch, m->leader_id);
        return;
    }
    if (m->epoch < r->epoch) {
        fetch_backoff(r);
        return;
    }
    /* same epoch */
    if (r->role != KQ_RAFT_FOLLOWER) {
        if ((r->role == KQ_RAFT_UNATTACHED || r->role == KQ_RAFT_PROSPECTIVE ||
             r->role == KQ_RAFT_CANDIDATE) &&
            can_follow_in_epoch(r, m->leader_id))
            become_follower(r, r->epoch, m->leader_id);
        else
            fetch_backoff(r);
        return;
    }
    if (m->from != r->leader_id) {
        fetch_backoff(r);
        return;
    }
    if (m->error != KQ_ERR_NONE) {
        /* NOT_LEADER_OR_FOLLOWER from our leader at our epoch (it resigned), UNKNOWN_LEADER_EPOCH,
         * or an error that should not happen: back off and retry. */
        fetch_backoff(r);
        return;
    }
    if (f->n_batches > 0 && !f->batches) {
        fetch_backoff(r);
        return;
    }
    r->fetched_ok = true;
    r->fetch_failing = false;
    r->last_fetch_ok_ms = r->now;
    r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;

    if (f->snapshot) {
        begin_snapshot_fetch(r, f->snapshot_id, m->epoch);
        return;
    }
    if (f->diverging) {
        int64_t t = truncation_point(r, f->diverging_epoch, f->diverging_end_offset);
        if (t < r->hw || t < r->committed) {
            set_fatal(r, "leader asked to truncate the log below the high watermark");
            return;
        }
        if (t < r->leo) {
            r->u->truncate_to = t;
            r->leo = t;
            if (r->durable_end > t)
                r->durable_end = t;
            truncate_epochs(r, t);
        }
        return; /* refetch at once (pump) */
    }
    if (f->high_watermark >= 0 && f->high_watermark > r->leader_hw)
        r->leader_hw = f->high_watermark;
    if (f->n_batches > 0)
        follower_append(r, m);
    follower_update_hw(r);
}

/* ---------------------------------------------------------------- sending */

static void pump_votes(kq_raft *r)
{
    if (r->role != KQ_RAFT_PROSPECTIVE && r->role != KQ_RAFT_CANDIDATE)
        return;
    if (r->now < r->vote_retry_at || r->backoff_deadline != 0)
        return;
    bool pre = r->role == KQ_RAFT_PROSPECTIVE;
    for (int i = 0; i < r->cfg.n_voters; i++) {
        peer *p = &r->peers[i];
        if (i == r->self_idx || p->vote != 0 || p->vote_inflight)
            continue;
        kq_raft_msg *m = emit(r, KQ_RAFT_VOTE_REQ, p->id);
        if (!m)
            return;
        m->epoch = pre ? r->epoch + 1 : r->epoch;
        m->leader_id = KQ_RAFT_NO_ID;
        m->u.vote_req.candidate_id = r->cfg.node_id;
        m->u.vote_req.last_epoch = last_epoch(r);
        m->u.vote_req.last_offset = r->leo;
        m->u.vote_req.pre_vote = pre;
        p->vote_inflight = true;
        p->vote_inflight_pre = pre;
        p->vote_inflight_round = r->round;
    }
}

static void pump_leader(kq_raft *r)
{
    if (r->role != KQ_RAFT_LEADER)
        return;
    if (r->now >= r->begin_resend_at) {
        for (int i = 0; i < r->cfg.n_voters; i++) {
            peer *p = &r->peers[i];
            if (i == r->self_idx || p->begin_inflight)
                continue;
            kq_raft_msg *m = emit(r, KQ_RAFT_BEGIN_EPOCH_REQ, p->id);
            if (!m)
                break;
            p->begin_inflight = true;
        }
        uint64_t period = r->cfg.fetch_timeout_ms / 2 ? r->cfg.fetch_timeout_ms / 2 : 1;
        r->begin_resend_at = r->now + period;
    }
    for (int i = 0; i < KQ_RAFT_MAX_PARKED && r->n_parked > 0; i++) {
        parked *p = &r->parked[i];
        if (!p->used)
            continue;
        if (r->leo > p->fetch_offset || r->hw != p->hw_at_park || r->now >= p->deadline) {
            if (r->u->n_msgs >= KQ_RAFT_MAX_MSGS)
                return;
            send_fetch_resp_records(r, p->from, p->token, p->fetch_offset, true);
            p->used = false;
            r->n_parked--;
        }
    }
}

static void pump_resigned(kq_raft *r)
{
    if (r->role != KQ_RAFT_RESIGNED || r->now < r->end_retry_at)
        return;
    for (int i = 0; i < r->cfg.n_voters; i++) {
        peer *p = &r->peers[i];
        if (i == r->self_idx || p->end_acked || p->end_inflight)
            continue;
        kq_raft_msg *m = emit(r, KQ_RAFT_END_EPOCH_REQ, p->id);
        if (!m)
            return;
        m->leader_id = r->cfg.node_id;
        memcpy(m->u.end_req.preferred, r->preferred, sizeof(r->preferred));
        m->u.end_req.n_preferred = r->n_preferred;
        p->end_inflight = true;
    }
}

static void pump_fetch_snapshot(kq_raft *r, int t)
{
    if (r->peers[t].snap_inflight)
        return;
    kq_raft_msg *m = emit(r, KQ_RAFT_FETCH_SNAPSHOT_REQ, r->peers[t].id);
    if (!m)
        return;
    m->u.fetch_snapshot_req.snapshot_id = r->snap_fetch_id;
    m->u.fetch_snapshot_req.position = r->snap_fetch_pos;
    m->u.fetch_snapshot_req.max_bytes = (int32_t)r->chunk_bytes;
    r->peers[t].snap_inflight = true;
}

static int fetch_target(kq_raft *r)
{
    if (r->role == KQ_RAFT_FOLLOWER)
        return voter_index(r, r->leader_id);
    if (r->role == KQ_RAFT_UNATTACHED && !is_voter(r)) {
        if (r->discovery_idx < 0 || r->peers[r->discovery_idx].fetch_inflight) {
            int cand[KQ_RAFT_MAX_VOTERS], n = 0;
            for (int i = 0; i < r->cfg.n_voters; i++)
                if (!r->peers[i].fetch_inflight)
                    cand[n++] = i;
            if (n == 0)
                return -1;
            r->discovery_idx = cand[prng_below(r, (uint64_t)n)];
        }
        return r->discovery_idx;
    }
    return -1;
}

static void pump_fetch(kq_raft *r)
{
    if (r->snap_installing)
        return; /* the host is installing a snapshot: nothing to fetch from until it is done */
    if (r->now < r->fetch_retry_at || r->durable_end < r->leo)
        return; /* back-off, or the offset we would report is not durable yet */
    int t = fetch_target(r);
    if (t < 0 || t == r->self_idx)
        return;
    if (r->snap_fetching) {
        if (r->role == KQ_RAFT_FOLLOWER)
            pump_fetch_snapshot(r, t);
        return;
    }
    if (r->peers[t].fetch_inflight)
        return;
    kq_raft_msg *m = emit(r, KQ_RAFT_FETCH_REQ, r->peers[t].id);
    if (!m)
        return;
    int32_t wait =
        r->cfg.fetch_max_wait_ms > INT32_MAX ? INT32_MAX : (int32_t)r->cfg.fetch_max_wait_ms;
    m->u.fetch_req.fetch_offset = r->leo;
    m->u.fetch_req.last_fetched_epoch = last_epoch(r);
    m->u.fetch_req.max_wait_ms = wait;
    r->peers[t].fetch_inflight = true;
}

/* Graceful shutdown of a Prospective or Candidate voter: stop campaigning without changing
 * the stored election state. The in-memory role becomes the one a restart from that state
 * would pick: Resigned if it led this epoch, Follower if it knows the epoch's leader, else
 * Unattached with its vote. Nothing is persisted. */
static void stop_campaign(kq_raft *r)
{
    r->backoff_deadline = 0;
    r->vote_retry_at = 0;
    if (r->leader_id == r->cfg.node_id) {
        r->role = KQ_RAFT_RESIGNED;
        for (int i = 0; i < r->cfg.n_voters; i++)
            r->peers[i].end_acked = true; /* EndQuorumEpoch went out when it resigned */
        r->end_retry_at = 0;
        r->n_preferred = 0;
    } else if (r->leader_id >= 0 && voter_index(r, r->leader_id) >= 0) {
        r->role = KQ_RAFT_FOLLOWER;
        r->leader_hw = -1;
        r->fetched_ok = false;
        r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;
        r->fetch_retry_at = 0;
    } else {
        r->role = KQ_RAFT_UNATTACHED;
        r->leader_id = KQ_RAFT_NO_ID;
        r->discovery_idx = -1;
    }
}

/* ---------------------------------------------------------------- timers */

static void resign(kq_raft *r)
{
    become_resigned(r);
}

static bool fire_timers(kq_raft *r)
{
    uint64_t now = r->now;
    switch (r->role) {
    case KQ_RAFT_UNATTACHED:
        if (is_voter(r)) {
            if (!r->shutdown && now >= r->election_deadline) {
                become_prospective(r);
                return true;
            }
        } else if (now >= r->fetch_deadline) {
            r->fetch_deadline = now + r->cfg.fetch_timeout_ms;
            r->discovery_idx = -1;
            r->fetch_retry_at = 0;
        }
        return false;
    case KQ_RAFT_RESIGNED:
        if (!r->shutdown && now >= r->election_deadline) {
            become_prospective(r);
            return true;
        }
        return false;
    case KQ_RAFT_PROSPECTIVE:
    case KQ_RAFT_CANDIDATE:
        if (r->backoff_deadline != 0) {
            if (now >= r->backoff_deadline) {
                r->backoff_deadline = 0;
                become_prospective(r);
                return true;
            }
        } else if (now >= r->election_deadline) {
            start_backoff(r);
            return true;
        }
        return false;
    case KQ_RAFT_FOLLOWER:
        if (now >= r->fetch_deadline) {
            if (r->snap_installing) {
                r->fetch_deadline = now + r->cfg.fetch_timeout_ms;
                return false;
            }
            if (!is_voter(r)) {
                become_unattached(r, r->epoch, KQ_RAFT_NO_ID); /* rediscover the leader */
                return true;
            }
            if (r->shutdown) {
                r->fetch_deadline = now + r->cfg.fetch_timeout_ms;
                return false;
            }
            become_prospective(r);
            return true;
        }
        return false;
    case KQ_RAFT_LEADER:
        if (r->cfg.n_voters > 1 && now >= r->cq_deadline) {
            resign(r);
            return true;
        }
        return false;
    }
    return false;
}

static void consider(uint64_t *d, uint64_t t)
{
    if (t < *d)
        *d = t;
}

static uint64_t next_deadline(kq_raft *r)
{
    uint64_t d = UINT64_MAX, now = r->now;
    switch (r->role) {
    case KQ_RAFT_UNATTACHED:
        if (is_voter(r)) {
            if (!r->shutdown)
                consider(&d, r->election_deadline);
        } else {
            consider(&d, r->fetch_deadline);
        }
        break;
    case KQ_RAFT_RESIGNED:
        if (!r->shutdown)
            consider(&d, r->election_deadline);
        if (r->end_retry_at > now)
            consider(&d, r->end_retry_at);
        break;
    case KQ_RAFT_PROSPECTIVE:
    case KQ_RAFT_CANDIDATE:
        consider(&d, r->backoff_deadline ? r->backoff_deadline : r->election_deadline);
        if (r->vote_retry_at > now)
            consider(&d, r->vote_retry_at);
        break;
    case KQ_RAFT_FOLLOWER:
        consider(&d, r->fetch_deadline);
        break;
    case KQ_RAFT_LEADER:
        consider(&d, r->begin_resend_at);
        if (r->cfg.n_voters > 1)
            consider(&d, r->cq_deadline);
        for (int i = 0; i < KQ_RAFT_MAX_PARKED && r->n_parked > 0; i++)
            if (r->parked[i].used)
                consider(&d, r->parked[i].deadline);
        break;
    }
    if ((r->role == KQ_RAFT_FOLLOWER || (r->role == KQ_RAFT_UNATTACHED && !is_voter(r))) &&
        r->fetch_retry_at > now)
        consider(&d, r->fetch_retry_at);
    if (d == UINT64_MAX)
        d = now + IDLE_DEADLINE_MS;
    if (d < now)
        d = now;
    return d;
}

/* ---------------------------------------------------------------- snapshots */

/* Move the log start up to `end` (a snapshot end whose last record has `epoch`): epoch entries
 * that end at or below it go, the one covering end - 1 is clamped to start at `end`. */
static void compact(kq_raft *r, int64_t end, int32_t epoch)
{
    if (end <= r->log_start)
        return;
    size_t first = 0;
    for (size_t i = 0; i < r->n_epochs; i++)
        if (r->epochs[i].start_offset < end)
            first = i;
    if (r->n_epochs > 0 && r->epochs[first].start_offset < end) {
        r->epochs[first].start_offset = end;
        memmove(r->epochs, r->epochs + first, (r->n_epochs - first) * sizeof(*r->epochs));
        r->n_epochs -= first;
    }
    r->log_start = end;
    r->start_epoch = epoch;
    if (r->committed < end)
        r->committed = end;
    r->u->compact_to = end;
}

static void remember_snapshot(kq_raft *r, kq_raft_snapshot_id id, int64_t size)
{
    if (snap_id_eq(r->snaps[0], id)) {
        r->snap_sizes[0] = size;
        return;
    }
    r->snaps[1] = r->snaps[0];
    r->snap_sizes[1] = r->snap_sizes[0];
    r->snaps[0] = id;
    r->snap_sizes[0] = size;
}

/* SNAPSHOT_TAKEN checks, before anything changes. */
static bool snapshot_taken_ok(const kq_raft *r, const kq_raft_snapshot_event *e)
{
    int64_t end = e->id.end_offset;
    if (end <= 0 || e->id.epoch <= 0 || e->size <= 0)
        return false;
    if (end > r->durable_end || end > r->committed || end < r->log_start)
        return false; /* only committed, durable state; never below the log start */
    if (end < r->snaps[0].end_offset)
        return false; /* older than the latest snapshot */
    if (end == r->snaps[0].end_offset && e->id.epoch != r->snaps[0].epoch)
        return false;
    return epoch_at(r, end - 1) == e->id.epoch;
}

static void on_snapshot_taken(kq_raft *r, const kq_raft_snapshot_event *e)
{
    remember_snapshot(r, e->id, e->size);
    compact(r, e->id.end_offset, e->id.epoch);
}

static void on_snapshot_installed(kq_raft *r, const kq_raft_snapshot_event *e)
{
    r->snap_installing = false;
    if (e->error != 0) {
        fetch_backoff(r); /* the next Fetch names the leader's latest snapshot again */
        return;
    }
    if (r->role == KQ_RAFT_LEADER) {
        set_fatal(r, "a leader was asked to install a snapshot");
        return;
    }
    int64_t end = r->snap_fetch_id.end_offset;
    remember_snapshot(r, r->snap_fetch_id, r->snap_fetch_size);
    /* The whole log was replaced by the snapshot: it starts and ends at its end offset. */
    r->log_start = end;
    r->start_epoch = r->snap_fetch_id.epoch;
    r->leo = end;
    r->durable_end = end;
    r->n_epochs = 0;
    add_epoch(r, r->snap_fetch_id.epoch, end);
    if (r->hw < end)
        r->hw = end; /* the snapshot is committed state */
    if (r->committed < end)
        r->committed = end;
    r->fetch_retry_at = 0;
}

/* ---------------------------------------------------------------- start */

static int on_start(kq_raft *r, const kq_raft_persisted *p)
{
    const kq_raft_qstate *q = &p->qstate;
    if (q->epoch < 0 || p->log_start_offset < 0 || p->log_end_offset < p->log_start_offset ||
        (p->n_epochs > 0 && !p->epochs))
        return KQ_ERR_INVALID_REQUEST;
    /* Snapshots: the latest lies within the log (an install the store did not finish would put
     * it above the log end: kq_store_open completes those), sizes are known. */
    if (p->log_start_epoch < 0 || (p->log_start_offset > 0) != (p->log_start_epoch > 0) ||
        p->snapshot.end_offset < 0 || p->snapshot.epoch < 0 ||
        (p->snapshot.end_offset > 0 && (p->snapshot.epoch <= 0 || p->snapshot_size <= 0 ||
                                        p->snapshot.end_offset > p->log_end_offset ||
                                        p->snapshot.end_offset < p->log_start_offset)))
        return KQ_ERR_INVALID_REQUEST;
    for (size_t i = 0; i < p->n_epochs; i++) {
        if (p->epochs[i].epoch < 0 || p->epochs[i].start_offset < 0 ||
            (i > 0 && (p->epochs[i].epoch <= p->epochs[i - 1].epoch ||
                       p->epochs[i].start_offset < p->epochs[i - 1].start_offset)))
            return KQ_ERR_INVALID_REQUEST;
    }
    if (p->n_epochs > 0) {
        r->epochs = malloc(p->n_epochs * sizeof(*r->epochs) + 16 * sizeof(*r->epochs));
        if (!r->epochs)
            return KQ_ERR_NOMEM;
        r->cap_epochs = p->n_epochs + 16;
        memcpy(r->epochs, p->epochs, p->n_epochs * sizeof(*r->epochs));
        r->n_epochs = p->n_epochs;
    }
    r->started = true;
    r->log_start = p->log_start_offset;
    r->start_epoch = p->log_start_epoch;
    r->leo = p->log_end_offset;
    r->durable_end = r->leo;
    truncate_epochs(r, r->leo); /* epochs with no entry left (an unflushed leader append) */
    if (p->snapshot.end_offset > 0) {
        r->snaps[0] = p->snapshot;
        r->snap_sizes[0] = p->snapshot_size;
        r->committed = p->snapshot.end_offset; /* a snapshot holds committed state only */
        /* A crash between writing the snapshot and deleting the prefix: finish it. */
        compact(r, p->snapshot.end_offset, p->snapshot.epoch);
    }
    r->hw = -1;
    r->leader_hw = -1;
    r->epoch = q->epoch;
    r->voted_id = q->voted_id;
    r->leader_id = q->leader_id;

    int32_t le = last_epoch(r);
    int32_t self = r->cfg.node_id;
    if (q->epoch < le) {
        become_unattached(r, le, KQ_RAFT_NO_ID);
    } else if (q->leader_id == self && is_voter(r)) {
        r->role = KQ_RAFT_LEADER; /* was leader: Resigned in the same epoch */
        r->leader_id = self;
        become_resigned(r);
        for (int i = 0; i < r->cfg.n_voters; i++)
            r->peers[i].end_acked = true; /* nothing to announce after a restart */
    } else if (q->voted_id == self && is_voter(r) && le >= q->epoch) {
        /* Its log already holds entries of the epoch it voted for itself in: it led that
         * epoch (the stored leader was lost). It must not campaign in that epoch again (a
         * VoteRequest needs last epoch < candidate epoch): Resigned, and its next candidacy
         * is at a higher epoch. No leader is known. */
        r->role = KQ_RAFT_RESIGNED;
        r->leader_id = KQ_RAFT_NO_ID;
        for (int i = 0; i < r->cfg.n_voters; i++)
            r->peers[i].end_acked = true;
        r->end_retry_at = 0;
        r->n_preferred = 0;
        r->election_deadline = r->now + random_election_timeout(r);
    } else if (q->voted_id == self && is_voter(r)) {
        r->role = KQ_RAFT_CANDIDATE;
        r->leader_id = KQ_RAFT_NO_ID;
        reset_round(r);
        r->election_deadline = r->now + random_election_timeout(r);
        check_votes(r);
    } else if (q->voted_id >= 0 && q->voted_id != self) {
        r->role = KQ_RAFT_UNATTACHED;
        r->leader_id = KQ_RAFT_NO_ID;
        if (is_voter(r))
            r->election_deadline = r->now + random_election_timeout(r);
        else
            r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;
        r->discovery_idx = -1;
    } else if (q->leader_id >= 0 && q->leader_id != self && voter_index(r, q->leader_id) >= 0) {
        r->role = KQ_RAFT_FOLLOWER;
        r->voted_id = KQ_RAFT_NO_ID;
        r->fetched_ok = false;
        r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;
    } else {
        r->role = KQ_RAFT_UNATTACHED;
        r->voted_id = KQ_RAFT_NO_ID;
        r->leader_id = KQ_RAFT_NO_ID;
        if (is_voter(r))
            r->election_deadline = r->now + random_election_timeout(r);
        else
            r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;
        r->discovery_idx = -1;
    }
    /* A one-voter quorum elects itself right away. */
    if (r->cfg.n_voters == 1 && is_voter(r) && r->role != KQ_RAFT_LEADER &&
        r->role != KQ_RAFT_CANDIDATE)
        become_prospective(r);
    return 0;
}

/* ---------------------------------------------------------------- API */

kq_raft *kq_raft_new(const kq_raft_config *cfg, char *errbuf, size_t errlen)
{
    const char *why = NULL;
    if (!cfg)
        why = "no configuration";
    else if (cfg->node_id < 0)
        why = "node id must be >= 0";
    else if (cfg->n_voters < 1 || cfg->n_voters > KQ_RAFT_MAX_VOTERS)
        why = "the voter set must have 1 to 16 voters";
    else if (cfg->election_timeout_ms == 0 || cfg->fetch_timeout_ms == 0 ||
             cfg->request_timeout_ms == 0)
        why = "election, fetch and request timeouts must be > 0";
    else if (cfg->fetch_max_wait_ms > INT32_MAX)
        why = "fetch max wait is too large";
    if (!why) {
        for (int i = 0; i < cfg->n_voters && !why; i++) {
            if (cfg->voters[i] < 0)
                why = "voter ids must be >= 0";
            for (int j = 0; j < i && !why; j++)
                if (cfg->voters[i] == cfg->voters[j])
                    why = "duplicate voter id";
        }
    }
    if (why) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "raft: %s", why);
        return NULL;
    }
    kq_raft *r = calloc(1, sizeof(*r));
    if (!r) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "raft: out of memory");
        return NULL;
    }
    r->cfg = *cfg;
    r->self_idx = voter_index(r, cfg->node_id);
    kq_prng_seed(&r->prng, cfg->seed);
    r->epoch = 0;
    r->voted_id = KQ_RAFT_NO_ID;
    r->leader_id = KQ_RAFT_NO_ID;
    r->hw = -1;
    r->committed = -1;
    r->leader_hw = -1;
    r->discovery_idx = -1;
    r->chunk_bytes =
        cfg->snapshot_chunk_bytes ? cfg->snapshot_chunk_bytes : KQ_RAFT_SNAPSHOT_CHUNK_DEFAULT;
    if (r->chunk_bytes > KQ_RAFT_SNAPSHOT_CHUNK_MAX)
        r->chunk_bytes = KQ_RAFT_SNAPSHOT_CHUNK_MAX;
    for (int i = 0; i < cfg->n_voters; i++) {
        r->peers[i].id = cfg->voters[i];
        r->peers[i].end_offset = -1;
        r->peers[i].prev_fetch_leo = -1;
    }
    return r;
}

void kq_raft_free(kq_raft *r)
{
    if (!r)
        return;
    free(r->epochs);
    free(r);
}

static bool msg_ok(const kq_raft *r, const kq_raft_msg *m)
{
    if (!m || (int)m->type < KQ_RAFT_VOTE_REQ || (int)m->type > KQ_RAFT_MSG_TYPE_MAX)
        return false;
    if (m->type == KQ_RAFT_FETCH_SNAPSHOT_RESP && m->u.fetch_snapshot_resp.len > 0 &&
        !m->u.fetch_snapshot_resp.data)
        return false;
    if (m->from < 0 || m->from == r->cfg.node_id || m->to != r->cfg.node_id || m->epoch < 0)
        return false;
    if (m->type == KQ_RAFT_FETCH_RESP && m->u.fetch_resp.n_batches > 0 && !m->u.fetch_resp.batches)
        return false;
    return true;
}

int kq_raft_step(kq_raft *r, const kq_raft_event *ev, kq_raft_update *u)
{
    if (!u)
        return KQ_ERR_INVALID_REQUEST;
    memset(u, 0, sizeof(*u));
    u->truncate_to = -1;
    u->compact_to = -1;
    u->msgs = r ? r->msgs : NULL;
    u->high_watermark = r ? r->hw : -1;
    if (!r || !ev)
        return KQ_ERR_INVALID_REQUEST;
    u->role = r->role;
    u->epoch = r->epoch;
    u->leader_id = advertised_leader(r);
    u->next_deadline_ms = r->now + IDLE_DEADLINE_MS;
    if (ev->type == KQ_RAFT_EV_START ? r->started : !r->started)
        return KQ_ERR_INVALID_REQUEST;
    if (ev->type == KQ_RAFT_EV_RECEIVE && !msg_ok(r, ev->u.msg))
        return KQ_ERR_INVALID_REQUEST;
    if (ev->type == KQ_RAFT_EV_PERSISTED && ev->u.persisted_end < 0)
        return KQ_ERR_INVALID_REQUEST;
    if (ev->type < KQ_RAFT_EV_START || ev->type > KQ_RAFT_EV_SNAPSHOT_INSTALLED)
        return KQ_ERR_INVALID_REQUEST;
    if (ev->type == KQ_RAFT_EV_SNAPSHOT_TAKEN && !snapshot_taken_ok(r, &ev->u.snapshot))
        return KQ_ERR_INVALID_REQUEST;
    if (ev->type == KQ_RAFT_EV_SNAPSHOT_INSTALLED &&
        (!r->snap_installing || !snap_id_eq(ev->u.snapshot.id, r->snap_fetch_id)))
        return KQ_ERR_INVALID_REQUEST; /* no install pending for that snapshot */

    if (ev->now_ms > r->now)
        r->now = ev->now_ms;
    r->u = u;
    kq_raft_role role0 = r->role;
    int32_t epoch0 = r->epoch, leader0 = advertised_leader(r);
    int64_t hw0 = r->hw;
    int rc = 0;

    switch (ev->type) {
    case KQ_RAFT_EV_START:
        rc = on_start(r, &ev->u.start);
        if (rc) {
            r->u = NULL;
            return rc;
        }
        role0 = (kq_raft_role)-1; /* always report the initial role */
        break;
    case KQ_RAFT_EV_TICK:
        break;
    case KQ_RAFT_EV_RECEIVE: {
        const kq_raft_msg *m = ev->u.msg;
        switch ((int)m->type) {
        case KQ_RAFT_VOTE_REQ:
            on_vote_req(r, m);
            break;
        case KQ_RAFT_VOTE_RESP:
            on_vote_resp(r, m);
            break;
        case KQ_RAFT_BEGIN_EPOCH_REQ:
            on_begin_req(r, m);
            break;
        case KQ_RAFT_BEGIN_EPOCH_RESP:
            on_begin_resp(r, m);
            break;
        case KQ_RAFT_END_EPOCH_REQ:
            on_end_req(r, m);
            break;
        case KQ_RAFT_END_EPOCH_RESP:
            on_end_resp(r, m);
            break;
        case KQ_RAFT_FETCH_REQ:
            on_fetch_req(r, m);
            break;
        case KQ_RAFT_FETCH_RESP:
            on_fetch_resp(r, m);
            break;
        case (int)KQ_RAFT_FETCH_SNAPSHOT_REQ:
            on_fetch_snapshot_req(r, m);
            break;
        case (int)KQ_RAFT_FETCH_SNAPSHOT_RESP:
            on_fetch_snapshot_resp(r, m);
            break;
        }
        break;
    }
    case KQ_RAFT_EV_PERSISTED:
        r->durable_end = ev->u.persisted_end < r->leo ? ev->u.persisted_end : r->leo;
        leader_update_hw(r);
        follower_update_hw(r);
        break;
    case KQ_RAFT_EV_PROPOSE:
        if (r->role != KQ_RAFT_LEADER || r->shutdown) {
            u->propose_error = KQ_ERR_NOT_LEADER_OR_FOLLOWER;
        } else if (ev->u.propose_count <= 0) {
            u->propose_error = KQ_ERR_INVALID_REQUEST;
        } else {
            kq_raft_batch *b = &u->append[u->n_append++];
            b->base_offset = r->leo;
            b->epoch = r->epoch;
            b->count = ev->u.propose_count;
            b->kind = KQ_RAFT_BATCH_PROPOSED;
            u->propose_base_offset = r->leo;
            u->propose_epoch = r->epoch;
            r->leo += ev->u.propose_count;
        }
        break;
    case KQ_RAFT_EV_RESIGN:
        r->shutdown = true;
        if (r->role == KQ_RAFT_LEADER)
            resign(r);
        else if (r->role == KQ_RAFT_PROSPECTIVE || r->role == KQ_RAFT_CANDIDATE)
            stop_campaign(r);
        break;
    case KQ_RAFT_EV_SNAPSHOT_TAKEN:
        on_snapshot_taken(r, &ev->u.snapshot);
        break;
    case KQ_RAFT_EV_SNAPSHOT_INSTALLED:
        on_snapshot_installed(r, &ev->u.snapshot);
        break;
    }

    for (int i = 0; i < MAX_TIMER_ROUNDS && !u->fatal; i++)
        if (!fire_timers(r))
            break;

    if (!u->fatal) {
        pump_votes(r);
        pump_leader(r);
        pump_resigned(r);
        pump_fetch(r);
    }

    u->high_watermark = r->hw;
    u->hw_changed = r->hw != hw0;
    u->role = r->role;
    u->epoch = r->epoch;
    u->leader_id = advertised_leader(r);
    u->role_changed = role0 != r->role || epoch0 != r->epoch || leader0 != u->leader_id;
    u->next_deadline_ms = next_deadline(r);
    r->u = NULL;
    return rc;
}

void kq_raft_get_status(const kq_raft *r, kq_raft_status *out)
{
    memset(out, 0, sizeof(*out));
    out->role = r->role;
    out->node_id = r->cfg.node_id;
    out->is_voter = is_voter(r);
    out->epoch = r->epoch;
    out->leader_id = advertised_leader(r);
    out->voted_id = r->voted_id;
    out->high_watermark = r->hw;
    out->log_start_offset = r->log_start;
    out->log_end_offset = r->leo;
    out->durable_end_offset = r->durable_end;
    out->last_epoch = last_epoch(r);
    out->snapshot = r->snaps[0];
    out->fetching_snapshot = r->snap_fetching;
    out->installing_snapshot = r->snap_installing;
    out->leader_answered = r->role == KQ_RAFT_FOLLOWER && r->fetched_ok;
    out->leader_answer_ms = out->leader_answered ? r->last_fetch_ok_ms : 0;
    if (r->role != KQ_RAFT_LEADER)
        return;
    kq_raft_replica *v = &out->voters[out->n_voters++];
    v->id = r->cfg.node_id;
    v->log_end_offset = r->durable_end;
    v->last_fetch_ms = r->now;
    v->last_caught_up_ms = r->now;
    for (int i = 0; i < r->cfg.n_voters; i++) {
        if (i == r->self_idx)
            continue;
        const peer *p = &r->peers[i];
        v = &out->voters[out->n_voters++];
        v->id = p->id;
        v->log_end_offset = p->end_offset;
        v->last_fetch_ms = p->last_fetch_ms;
        v->last_caught_up_ms = p->last_caught_up_ms;
    }
    for (int i = 0; i < KQ_RAFT_MAX_OBSERVERS; i++) {
        const observer *o = &r->observers[i];
        if (!o->used || r->now - o->last_fetch_ms > OBSERVER_EXPIRY_MS)
            continue;
        kq_raft_replica *x = &out->observers[out->n_observers++];
        x->id = o->id;
        x->log_end_offset = o->end_offset;
        x->last_fetch_ms = o->last_fetch_ms;
        x->last_caught_up_ms = o->last_caught_up_ms;
    }
}
