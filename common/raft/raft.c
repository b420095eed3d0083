/*
 * kq_raft: the KRaft core (see include/kq/raft.h for the contract).
 *
 * Pure state machine: no I/O, no clock, no global state. Time comes from the events,
 * randomness from a splitmix64 generator seeded by cfg.seed.
 *
 * Ownership: struct kq_raft owns its epoch cache (heap, grows with realloc as epochs are added)
 * and the message buffer that kq_raft_update.msgs points into.
 */
#include "raft_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

bool kq_raft_msg_is_request(kq_raft_msg_type t)
{
    return t == KQ_RAFT_VOTE_REQ || t == KQ_RAFT_BEGIN_EPOCH_REQ || t == KQ_RAFT_END_EPOCH_REQ ||
           t == KQ_RAFT_FETCH_REQ || t == KQ_RAFT_FETCH_SNAPSHOT_REQ ||
           t == KQ_RAFT_ADD_VOTER_REQ || t == KQ_RAFT_REMOVE_VOTER_REQ ||
           t == KQ_RAFT_UPDATE_VOTER_REQ;
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
uint64_t raft_prng_below(kq_raft *r, uint64_t n)
{
    return n ? kq_prng_below(&r->prng, n) : 0;
}

bool raft_is_voter(const kq_raft *r)
{
    return r->self_idx >= 0;
}

int raft_voter_index(const kq_raft *r, int32_t id)
{
    return kq_voters_find_id(&r->voters, id);
}

/* The voter standing for key (id, dir), or -1. */
int raft_voter_key_index(const kq_raft *r, int32_t id, const uint8_t dir[16])
{
    kq_voter_key k = {.id = id};

    memcpy(k.dir, dir, sizeof(k.dir));
    return kq_voters_find(&r->voters, &k);
}

/* A Vote or BeginQuorumEpoch request names this node's directory, or none. */
bool raft_meant_for_me(const kq_raft *r, const kq_raft_msg *m)
{
    return kq_uuid_is_zero(m->to_dir) ||
           memcmp(m->to_dir, r->cfg.directory_id, sizeof(m->to_dir)) == 0;
}

/* The peer slot of node id: a voter's, or the leader slot when this node follows id from
 * outside its voter set; -1 for neither. */
int raft_peer_index(const kq_raft *r, int32_t id)
{
    int i = raft_voter_index(r, id);

    if (i < 0 && id >= 0 && r->peers[LEADER_SLOT].id == id)
        i = LEADER_SLOT;
    return i;
}

/* May node id lead this node or ask for its vote? With the static set of kraft.version 0 only
 * a voter may. With dynamic voters any node may (Kafka's rule): a leader whose removal has not
 * committed leads until it does, and a candidate may be in a set this node has not learnt. */
bool raft_may_lead(const kq_raft *r, int32_t id)
{
    return id >= 0 && id != r->cfg.node_id &&
           (raft_voter_index(r, id) >= 0 || raft_voters_dynamic(r));
}

/* Following `leader`: a leader outside the voter set gets the leader slot for the Fetch state. */
void raft_track_leader(kq_raft *r, int32_t leader)
{
    if (raft_voter_index(r, leader) < 0 && r->peers[LEADER_SLOT].id != leader) {
        raft_peer_park(r, &r->peers[LEADER_SLOT]);
        raft_peer_reset(&r->peers[LEADER_SLOT], leader);
        raft_peer_unpark(r, &r->peers[LEADER_SLOT]);
    }
}

static bool peer_busy(const peer *p)
{
    return p->vote_inflight || p->begin_inflight || p->end_inflight || p->fetch_inflight ||
           p->snap_inflight;
}

void raft_peer_park(kq_raft *r, const peer *p)
{
    int slot = -1;

    if (p->id < 0 || !peer_busy(p))
        return;
    for (int i = 0; i <= KQ_RAFT_MAX_VOTERS; i++) {
        peer *q = &r->gone_peers[i];
        if (peer_busy(q) && q->id == p->id) {
            slot = i;
            break;
        }
        if (slot < 0 && !peer_busy(q))
            slot = i;
    }
    if (slot < 0)
        slot = 0; /* full (more departed nodes than slots): the marks of one are forgotten */
    peer *q = &r->gone_peers[slot];
    if (!peer_busy(q) || q->id != p->id)
        raft_peer_reset(q, p->id);
    q->vote_inflight |= p->vote_inflight;
    if (p->vote_inflight) {
        q->vote_inflight_pre = p->vote_inflight_pre;
        q->vote_inflight_round = p->vote_inflight_round;
    }
    q->begin_inflight |= p->begin_inflight;
    q->end_inflight |= p->end_inflight;
    q->fetch_inflight |= p->fetch_inflight;
    q->snap_inflight |= p->snap_inflight;
}

void raft_peer_unpark(kq_raft *r, peer *p)
{
    for (int i = 0; p->id >= 0 && i <= KQ_RAFT_MAX_VOTERS; i++) {
        peer *q = &r->gone_peers[i];
        if (!peer_busy(q) || q->id != p->id)
            continue;
        if (q->vote_inflight && !p->vote_inflight) {
            p->vote_inflight = true;
            p->vote_inflight_pre = q->vote_inflight_pre;
            p->vote_inflight_round = q->vote_inflight_round;
        }
        p->begin_inflight |= q->begin_inflight;
        p->end_inflight |= q->end_inflight;
        p->fetch_inflight |= q->fetch_inflight;
        p->snap_inflight |= q->snap_inflight;
        raft_peer_reset(q, KQ_RAFT_NO_ID);
    }
}

void raft_parked_answer(kq_raft *r, int32_t id, kq_raft_msg_type req_type)
{
    for (int i = 0; i <= KQ_RAFT_MAX_VOTERS + 1; i++) {
        /* the parked marks, and the leader slot's (Vote/Begin/End answers look up voters
         * only, and the slot may hold marks moved in with a node that left the set) */
        peer *q = i <= KQ_RAFT_MAX_VOTERS ? &r->gone_peers[i] : &r->peers[LEADER_SLOT];
        if (!peer_busy(q) || q->id != id)
            continue;
        if (req_type == KQ_RAFT_VOTE_REQ)
            q->vote_inflight = false;
        else if (req_type == KQ_RAFT_BEGIN_EPOCH_REQ)
            q->begin_inflight = false;
        else if (req_type == KQ_RAFT_END_EPOCH_REQ)
            q->end_inflight = false;
        else if (req_type == KQ_RAFT_FETCH_REQ)
            q->fetch_inflight = false;
        else if (req_type == KQ_RAFT_FETCH_SNAPSHOT_REQ)
            q->snap_inflight = false;
    }
}

void raft_peer_reset(peer *p, int32_t id)
{
    memset(p, 0, sizeof(*p));
    p->id = id;
    p->end_offset = -1;
    p->prev_fetch_leo = -1;
    p->hw_sent = -1;
}

/* Epoch of the last entry: of the log, or of the snapshot at the log start when the log holds
 * nothing above it. */
int32_t raft_last_epoch(const kq_raft *r)
{
    int32_t e = kq_epoch_cache_last_epoch(&r->epochs, r->leo);
    if (e >= 0)
        return e;
    return r->log_start > 0 ? r->start_epoch : 0;
}

bool raft_log_up_to_date(const kq_raft *r, int32_t cand_epoch, int64_t cand_end)
{
    int32_t le = raft_last_epoch(r);
    if (cand_epoch != le)
        return cand_epoch > le;
    return cand_end >= r->leo;
}

/* The snapshot at the log start acts as an entry {start_epoch: log_start} below the cache (the
 * cache may have lost it to a truncation down to the log start). */
bool raft_end_offset_for_epoch(const kq_raft *r, int32_t epoch, int32_t *out_epoch,
                               int64_t *out_end)
{
    if (kq_epoch_cache_end_offset_for(&r->epochs, epoch, r->leo, out_epoch, out_end))
        return true;
    if (r->log_start > 0 && r->start_epoch > 0 && r->start_epoch <= epoch) {
        *out_epoch = r->start_epoch;
        *out_end = r->epochs.n > 0 ? r->epochs.e[0].start_offset : r->leo;
        return true;
    }
    return false;
}

/* Epoch of the record at `off` (log_start - 1 <= off < leo), -1 if unknown. */
int32_t raft_epoch_at(const kq_raft *r, int64_t off)
{
    int32_t e = kq_epoch_cache_epoch_at(&r->epochs, off);
    if (e >= 0)
        return e;
    if (r->log_start > 0 && off >= r->log_start - 1)
        return r->start_epoch; /* below the first cached epoch: the snapshot's epoch */
    return -1;
}

bool raft_snap_id_eq(kq_raft_snapshot_id a, kq_raft_snapshot_id b)
{
    return a.end_offset == b.end_offset && a.epoch == b.epoch;
}

const kq_voter_set *kq_raft_voters(const kq_raft *r, int64_t *record_offset)
{
    kq_voter_history_last(&r->vh, record_offset);
    return &r->voters;
}

const kq_voter_set *kq_raft_voters_at(const kq_raft *r, int64_t offset, int16_t *kraft_version)
{
    int16_t v = kq_voter_history_kraft_version_at(&r->vh, offset);

    *kraft_version = v;
    return v >= 1 ? kq_voter_history_set_at(&r->vh, offset) : NULL;
}

bool kq_raft_end_offset_for_epoch(const kq_raft *r, int32_t epoch, int32_t *out_epoch,
                                  int64_t *out_end)
{
    return raft_end_offset_for_epoch(r, epoch, out_epoch, out_end);
}

void raft_set_fatal(kq_raft *r, const char *reason)
{
    if (!r->u->fatal) {
        r->u->fatal = true;
        r->u->fatal_reason = reason;
    }
}

/* Record that `epoch` starts at `start` (Kafka's assign rule, kq/epoch_cache.h). */
void raft_add_epoch(kq_raft *r, int32_t epoch, int64_t start)
{
    if (kq_epoch_cache_reserve(&r->epochs, 1, 0) != 0) {
        raft_set_fatal(r, "out of memory growing the epoch cache");
        return;
    }
    kq_epoch_cache_assign(&r->epochs, epoch, start);
}

void raft_truncate_epochs(kq_raft *r, int64_t end)
{
    kq_epoch_cache_truncate_from(&r->epochs, end);
}

uint64_t raft_random_election_timeout(kq_raft *r)
{
    uint64_t t = r->cfg.election_timeout_ms;
    return t + raft_prng_below(r, t);
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
bool raft_can_follow_in_epoch(const kq_raft *r, int32_t leader)
{
    return raft_may_lead(r, leader) && (r->leader_id < 0 || r->leader_id == leader);
}

kq_raft_msg *raft_emit(kq_raft *r, kq_raft_msg_type type, int32_t to)
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
    memcpy(m->from_dir, r->cfg.directory_id, sizeof(m->from_dir));
    int i = raft_voter_index(r, to);
    if (i >= 0)
        memcpy(m->to_dir, r->voters.v[i].key.dir, sizeof(m->to_dir));
    return m;
}

kq_raft_msg *raft_emit_resp(kq_raft *r, const kq_raft_msg *req, kq_raft_msg_type type, int err)
{
    kq_raft_msg *m = raft_emit(r, type, req->from);
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
    /* at kraft.version 0 a vote is for the id (any directory): stored without one, so a store
     * of static voters keeps its old quorum-state format (a rollback can read it) */
    if (raft_voters_dynamic(r))
        memcpy(r->u->qstate.voted_dir, r->voted_dir, sizeof(r->voted_dir));
    else
        memset(r->u->qstate.voted_dir, 0, sizeof(r->u->qstate.voted_dir));
    r->u->qstate.leader_id = r->leader_id;
}

static void reset_round(kq_raft *r)
{
    r->round++;
    for (int i = 0; i < r->voters.n; i++)
        r->peers[i].vote = 0;
    if (raft_is_voter(r))
        r->peers[r->self_idx].vote = 1;
    r->backoff_deadline = 0;
    r->vote_retry_at = 0;
}

/* ---------------------------------------------------------------- leader helpers */

/* Where the leader remembers the high watermark it last sent a replica (NULL: not a replica it
 * tracks). A fetcher whose last answer carried an older high watermark than the leader's is
 * answered at once instead of parked: it cannot know what has committed since (a parked fetch
 * is completed when the high watermark moves, but this one arrived after it moved). */
int64_t *raft_hw_sent_of(kq_raft *r, int32_t id)
{
    int vi = raft_voter_index(r, id);
    if (vi >= 0)
        return vi == r->self_idx ? NULL : &r->peers[vi].hw_sent;
    for (int i = 0; i < KQ_RAFT_MAX_OBSERVERS; i++)
        if (r->observers[i].used && r->observers[i].id == id)
            return &r->observers[i].hw_sent;
    return NULL;
}

/* delivered: false when the fetcher has given this request up (a newer Fetch superseded it),
 * so the answer does not count as what the fetcher knows. */
void raft_send_fetch_resp_records(kq_raft *r, int32_t to, uint64_t token, int64_t from_off,
                                  bool delivered)
{
    kq_raft_msg *m = raft_emit(r, KQ_RAFT_FETCH_RESP, to);
    if (!m)
        return;
    int64_t *sent = delivered ? raft_hw_sent_of(r, to) : NULL;
    if (sent)
        *sent = r->hw;
    m->token = token;
    m->u.fetch_resp.high_watermark = r->hw;
    m->u.fetch_resp.log_start_offset = r->log_start;
    m->u.fetch_resp.records_from = from_off;
    m->u.fetch_resp.records_to = r->leo > from_off ? r->leo : from_off;
}

void raft_send_fetch_error(kq_raft *r, int32_t to, uint64_t token, int err)
{
    kq_raft_msg *m = raft_emit(r, KQ_RAFT_FETCH_RESP, to);
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
            raft_send_fetch_error(r, p->from, p->token, err);
        else
            raft_send_fetch_resp_records(r, p->from, p->token, p->fetch_offset, true);
        p->used = false;
        r->n_parked--;
    }
}

/* Stop a FetchSnapshot transfer (not an install the host is doing): the host drops the .part. */
void raft_abort_snapshot_fetch(kq_raft *r)
{
    if (!r->snap_fetching)
        return;
    r->snap_fetching = false;
    r->u->snapshot_abort = true;
    r->u->snapshot_id = r->snap_fetch_id;
}

static void leave_role(kq_raft *r)
{
    if (r->role == KQ_RAFT_LEADER) {
        complete_all_parked(r, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
        raft_fail_voter_change(r, KQ_ERR_NOT_LEADER_OR_FOLLOWER, "the leader stepped down");
    }
    raft_abort_snapshot_fetch(r);
}

void raft_leader_update_hw(kq_raft *r)
{
    if (r->role != KQ_RAFT_LEADER)
        return;
    int64_t ends[KQ_RAFT_MAX_VOTERS];
    int n = r->voters.n;
    for (int i = 0; i < n; i++)
        ends[i] = i == r->self_idx ? r->durable_end : r->peers[i].end_offset;
    r->hw = kq_quorum_high_watermark(ends, n, r->leo, r->epoch_start, r->hw);
    if (r->hw > r->committed)
        r->committed = r->hw;
}

static void become_leader(kq_raft *r);

static void become_candidate(kq_raft *r);

/* ---------------------------------------------------------------- transitions */

void raft_start_backoff(kq_raft *r)
{
    r->retries++;
    int exp = r->retries < 20 ? r->retries : 20;
    uint64_t span = (uint64_t)1 << exp; /* random(0 .. 2^retries - 1) */
    uint64_t b = BACKOFF_UNIT_MS * raft_prng_below(r, span);
    if (b > r->cfg.election_backoff_max_ms)
        b = r->cfg.election_backoff_max_ms;
    r->backoff_deadline = r->now + b;
    if (r->backoff_deadline == 0)
        r->backoff_deadline = 1;
}

/* Won, lost or still open? Called after any vote is recorded. */
void raft_check_votes(kq_raft *r)
{
    if (r->role != KQ_RAFT_PROSPECTIVE && r->role != KQ_RAFT_CANDIDATE)
        return;
    int granted = 0, rejected = 0;
    for (int i = 0; i < r->voters.n; i++) {
        if (r->peers[i].vote > 0)
            granted++;
        else if (r->peers[i].vote < 0)
            rejected++;
    }
    switch (kq_quorum_tally(granted, rejected, r->voters.n)) {
    case KQ_VOTE_WON:
        if (r->role == KQ_RAFT_PROSPECTIVE)
            become_candidate(r);
        else
            become_leader(r);
        return;
    case KQ_VOTE_LOST:
        if (r->backoff_deadline == 0)
            raft_start_backoff(r);
        return;
    case KQ_VOTE_OPEN:
        return;
    }
}

void raft_become_unattached(kq_raft *r, int32_t epoch, int32_t voted)
{
    leave_role(r);
    r->role = KQ_RAFT_UNATTACHED;
    r->epoch = epoch;
    r->voted_id = voted;
    memset(r->voted_dir, 0, sizeof(r->voted_dir));
    r->leader_id = KQ_RAFT_NO_ID;
    r->leader_hw = -1;
    r->backoff_deadline = 0;
    persist(r);
    if (raft_is_voter(r)) {
        r->election_deadline = r->now + raft_random_election_timeout(r);
    } else {
        r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;
        r->fetch_retry_at = 0;
        r->discovery_idx = -1;
    }
}

void raft_become_follower(kq_raft *r, int32_t epoch, int32_t leader)
{
    leave_role(r);
    r->role = KQ_RAFT_FOLLOWER;
    r->epoch = epoch;
    r->voted_id = KQ_RAFT_NO_ID;
    r->leader_id = leader;
    raft_track_leader(r, leader);
    r->leader_hw = -1;
    r->backoff_deadline = 0;
    r->retries = 0;
    r->fetched_ok = false;
    r->fetch_failing = false;
    r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;
    r->fetch_retry_at = 0;
    persist(r);
}

void raft_become_prospective(kq_raft *r)
{
    if (!raft_campaigns(r) || r->shutdown || r->snap_installing) {
        /* a node installing a snapshot never campaigns (a leader never installs): its timer
         * moves on, or an expired deadline would fire at every step */
        if (r->election_deadline <= r->now)
            r->election_deadline = r->now + raft_random_election_timeout(r);
        return;
    }
    leave_role(r);
    r->role = KQ_RAFT_PROSPECTIVE; /* same epoch, not durable; keeps vote and leader hint */
    reset_round(r);
    r->election_deadline = r->now + raft_random_election_timeout(r);
    raft_check_votes(r);
}

void raft_candidate_past_a_lower_leader(kq_raft *r)
{
    if (r->role == KQ_RAFT_PROSPECTIVE && raft_campaigns(r) && !r->shutdown && !r->snap_installing)
        become_candidate(r);
}

static void become_candidate(kq_raft *r)
{
    int32_t le = raft_last_epoch(r);
    r->role = KQ_RAFT_CANDIDATE;
    r->epoch++;
    if (r->epoch <= le)
        r->epoch = le + 1; /* a candidate epoch is always above the last log epoch */
    r->voted_id = r->cfg.node_id;
    memcpy(r->voted_dir, r->cfg.directory_id, sizeof(r->voted_dir));
    r->leader_id = KQ_RAFT_NO_ID;
    persist(r);
    reset_round(r);
    r->election_deadline = r->now + raft_random_election_timeout(r);
    raft_check_votes(r);
}

static void become_leader(kq_raft *r)
{
    kq_raft_update *u = r->u;
    r->role = KQ_RAFT_LEADER;
    r->leader_id = r->cfg.node_id;
    r->voted_id = r->cfg.node_id;
    memcpy(r->voted_dir, r->cfg.directory_id, sizeof(r->voted_dir));
    r->retries = 0;
    r->backoff_deadline = 0;
    persist(r);
    r->epoch_start = r->leo;
    raft_add_epoch(r, r->epoch, r->leo);
    if (u->n_append < KQ_RAFT_MAX_BATCHES) {
        kq_raft_batch *b = &u->append[u->n_append++];
        memset(b, 0, sizeof(*b));
        b->base_offset = r->leo;
        b->epoch = r->epoch;
        b->count = 1;
        b->kind = KQ_RAFT_BATCH_LEADER_CHANGE;
        raft_leader_start_control(r, b); /* the bootstrap voter set into the log */
        r->leo += b->count;
    } else {
        r->leo += 1;
    }
    r->hw = -1;
    for (int i = 0; i < r->voters.n; i++) {
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
    memset(r->has_reported, 0, sizeof(r->has_reported));
    raft_peer_park(r, &r->peers[LEADER_SLOT]);
    raft_peer_reset(&r->peers[LEADER_SLOT], KQ_RAFT_NO_ID); /* progress counts in this term only */
    r->cq_deadline = r->now + (uint64_t)r->cfg.fetch_timeout_ms * 3 / 2;
    r->begin_resend_at = r->now; /* send BEGIN_EPOCH now */
    raft_leader_update_hw(r);
}

static int cmp_pref(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* {end_offset, id} pairs */
    if (x[0] != y[0])
        return x[0] < y[0] ? 1 : -1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

void raft_become_resigned(kq_raft *r)
{
    int64_t pairs[KQ_RAFT_MAX_VOTERS][2];
    int n = 0;
    for (int i = 0; i < r->voters.n; i++) {
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
    for (int i = 0; i < r->voters.n; i++)
        r->peers[i].end_acked = (i == r->self_idx);
    r->end_retry_at = 0;
    r->election_deadline = r->now + raft_random_election_timeout(r);
}

/* Grant this epoch's vote to the candidate with key (id, dir): durable in the same update. */
void raft_grant_vote(kq_raft *r, int32_t id, const uint8_t dir[16])
{
    raft_become_unattached(r, r->epoch, id);
    memcpy(r->voted_dir, dir, sizeof(r->voted_dir));
    persist(r);
}

/* A message showed a higher epoch: follow its leader if it names one, else Unattached. */
void raft_on_higher_epoch(kq_raft *r, int32_t epoch, int32_t leader)
{
    if (raft_may_lead(r, leader))
        raft_become_follower(r, epoch, leader);
    else
        raft_become_unattached(r, epoch, KQ_RAFT_NO_ID);
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
    if (!kq_epoch_entries_valid(p->epochs, p->n_epochs) ||
        !raft_control_ok(p->control, p->n_control, -1, p->log_end_offset, false))
        return KQ_ERR_INVALID_REQUEST;
    if (kq_epoch_cache_load(&r->epochs, p->epochs, p->n_epochs, 16) != 0)
        return KQ_ERR_NOMEM;
    /* A crash between writing a snapshot and deleting the log below it leaves records both in
     * the snapshot and in the log: each offset counts once (the first given). */
    char why[256];
    int rc = 0;
    for (size_t i = 0; i < p->n_control && !rc; i++) {
        const kq_voter_history_entry *last = r->vh.n ? &r->vh.e[r->vh.n - 1] : NULL;
        kq_raft_control c = p->control[i];
        if (last && c.offset >= 0 && c.offset < last->offset)
            continue;
        if (last && c.offset >= 0 && c.offset == last->offset && last->has_set &&
            last->set_offset == c.offset)
            c.voters = NULL; /* that offset's VotersRecord is in already */
        rc = raft_add_control(r, &c, 1, why, sizeof(why));
    }
    if (!rc && r->voters.n == 0 && r->cfg.n_bootstrap == 0)
        rc = KQ_ERR_INVALID_REQUEST; /* no voter set and nobody to ask for one */
    if (rc) {
        kq_voter_set static_set = r->vh.static_set; /* as before this START */
        kq_voter_history_free(&r->vh);
        kq_voter_history_init(&r->vh, &static_set);
        raft_apply_voters(r);
        return rc == KQ_ERR_NOMEM ? rc : KQ_ERR_INVALID_REQUEST;
    }
    r->started = true;
    r->log_start = p->log_start_offset;
    r->start_epoch = p->log_start_epoch;
    r->leo = p->log_end_offset;
    r->durable_end = r->leo;
    raft_truncate_epochs(r, r->leo); /* epochs with no entry left (an unflushed leader append) */
    if (p->snapshot.end_offset > 0) {
        r->snaps[0] = p->snapshot;
        r->snap_sizes[0] = p->snapshot_size;
        r->committed = p->snapshot.end_offset; /* a snapshot holds committed state only */
        /* A crash between writing the snapshot and deleting the prefix: finish it. */
        raft_compact(r, p->snapshot.end_offset, p->snapshot.epoch);
    }
    r->hw = -1;
    r->leader_hw = -1;
    r->epoch = q->epoch;
    r->voted_id = q->voted_id;
    memcpy(r->voted_dir, q->voted_dir, sizeof(r->voted_dir));
    r->leader_id = q->leader_id;

    int32_t le = raft_last_epoch(r);
    int32_t self = r->cfg.node_id;
    if (q->epoch < le) {
        raft_become_unattached(r, le, KQ_RAFT_NO_ID);
    } else if (q->leader_id == self) { /* a removed leader too (Kafka): Resigned, then epoch+1 */
        r->role = KQ_RAFT_LEADER;      /* was leader: Resigned in the same epoch */
        r->leader_id = self;
        raft_become_resigned(r);
        for (int i = 0; i < r->voters.n; i++)
            r->peers[i].end_acked = true; /* nothing to announce after a restart */
    } else if (q->voted_id == self && raft_is_voter(r) && le >= q->epoch) {
        /* Its log already holds entries of the epoch it voted for itself in: it led that
         * epoch (the stored leader was lost). It must not campaign in that epoch again (a
         * VoteRequest needs last epoch < candidate epoch): Resigned, and its next candidacy
         * is at a higher epoch. No leader is known. */
        r->role = KQ_RAFT_RESIGNED;
        r->leader_id = KQ_RAFT_NO_ID;
        for (int i = 0; i < r->voters.n; i++)
            r->peers[i].end_acked = true;
        r->end_retry_at = 0;
        r->n_preferred = 0;
        r->election_deadline = r->now + raft_random_election_timeout(r);
    } else if (q->voted_id == self && raft_is_voter(r)) {
        r->role = KQ_RAFT_CANDIDATE;
        r->leader_id = KQ_RAFT_NO_ID;
        reset_round(r);
        r->election_deadline = r->now + raft_random_election_timeout(r);
        raft_check_votes(r);
    } else if (q->voted_id == self) {
        /* a candidacy of a node that a VotersRecord removed (raft_campaigns): its vote in this
         * epoch stays; it looks for a leader first */
        r->role = KQ_RAFT_UNATTACHED;
        r->leader_id = KQ_RAFT_NO_ID;
        r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;
        r->discovery_idx = -1;
    } else if (q->voted_id >= 0 && q->voted_id != self) {
        r->role = KQ_RAFT_UNATTACHED;
        r->leader_id = KQ_RAFT_NO_ID;
        if (raft_is_voter(r))
            r->election_deadline = r->now + raft_random_election_timeout(r);
        else
            r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;
        r->discovery_idx = -1;
    } else if (raft_may_lead(r, q->leader_id)) {
        r->role = KQ_RAFT_FOLLOWER;
        raft_track_leader(r, q->leader_id);
        r->voted_id = KQ_RAFT_NO_ID;
        r->fetched_ok = false;
        r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;
    } else {
        r->role = KQ_RAFT_UNATTACHED;
        r->voted_id = KQ_RAFT_NO_ID;
        r->leader_id = KQ_RAFT_NO_ID;
        if (raft_is_voter(r))
            r->election_deadline = r->now + raft_random_election_timeout(r);
        else
            r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;
        r->discovery_idx = -1;
    }
    /* A one-voter quorum elects itself right away. */
    if (r->voters.n == 1 && raft_is_voter(r) && r->role != KQ_RAFT_LEADER &&
        r->role != KQ_RAFT_CANDIDATE)
        raft_become_prospective(r);
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
    else if (cfg->n_voters < 0 || cfg->n_voters > KQ_RAFT_MAX_VOTERS)
        why = "the voter set must have 1 to 16 voters";
    else if (cfg->n_bootstrap < 0 || cfg->n_bootstrap > KQ_RAFT_MAX_VOTERS)
        why = "at most 16 bootstrap servers";
    else if (cfg->election_timeout_ms == 0 || cfg->fetch_timeout_ms == 0 ||
             cfg->request_timeout_ms == 0)
        why = "election, fetch and request timeouts must be > 0";
    else if (cfg->fetch_max_wait_ms > INT32_MAX)
        why = "fetch max wait is too large";
    else if (!memchr(cfg->host, '\0', sizeof(cfg->host)) || cfg->port < 0 || cfg->port > 65535 ||
             cfg->kraft_min < 0 || cfg->kraft_min > cfg->kraft_max)
        why = "this voter's endpoint or kraft.version range is not valid";
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
    kq_voter_set static_set = {.n = cfg->n_voters};
    for (int i = 0; i < cfg->n_voters; i++) {
        static_set.v[i].key.id = cfg->voters[i];
        static_set.v[i].kraft_max = 0; /* kraft.version 0 */
    }
    kq_voter_history_init(&r->vh, &static_set);
    r->self_voter.key.id = cfg->node_id;
    memcpy(r->self_voter.key.dir, cfg->directory_id, sizeof(r->self_voter.key.dir));
    snprintf(r->self_voter.host, sizeof(r->self_voter.host), "%s", cfg->host);
    r->self_voter.port = cfg->port;
    r->self_voter.kraft_min = cfg->kraft_min;
    r->self_voter.kraft_max = cfg->kraft_max;
    raft_peer_reset(&r->peers[LEADER_SLOT], KQ_RAFT_NO_ID);
    raft_apply_voters(r);
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
    return r;
}

void kq_raft_free(kq_raft *r)
{
    if (!r)
        return;
    kq_epoch_cache_free(&r->epochs);
    kq_voter_history_free(&r->vh);
    free(r);
}

static bool msg_ok(const kq_raft *r, const kq_raft_msg *m)
{
    if (!m || (int)m->type < KQ_RAFT_VOTE_REQ || (int)m->type > KQ_RAFT_MSG_TYPE_MAX)
        return false;
    if (m->type == KQ_RAFT_FETCH_SNAPSHOT_RESP && m->u.fetch_snapshot_resp.len > 0 &&
        !m->u.fetch_snapshot_resp.data)
        return false;
    bool change = kq_raft_msg_is_voter_change(m->type);
    bool from_bootstrap = m->type == KQ_RAFT_FETCH_RESP && m->from <= KQ_RAFT_BOOTSTRAP_ID(0) &&
                          m->from > KQ_RAFT_BOOTSTRAP_ID(r->cfg.n_bootstrap);
    if (change && !m->u.voter_req.voter)
        return false;
    if ((m->from < 0 && !change && !from_bootstrap) || m->from == r->cfg.node_id ||
        m->to != r->cfg.node_id || m->epoch < 0)
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
    if (ev->type < KQ_RAFT_EV_START || ev->type > KQ_RAFT_EV_UPGRADE_KRAFT)
        return KQ_ERR_INVALID_REQUEST;
    if (ev->type == KQ_RAFT_EV_SNAPSHOT_TAKEN && !raft_snapshot_taken_ok(r, &ev->u.snapshot))
        return KQ_ERR_INVALID_REQUEST;
    if (ev->type == KQ_RAFT_EV_SNAPSHOT_INSTALLED &&
        (!r->snap_installing || !raft_snap_id_eq(ev->u.snapshot.id, r->snap_fetch_id)))
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
            raft_on_vote_req(r, m);
            break;
        case KQ_RAFT_VOTE_RESP:
            raft_on_vote_resp(r, m);
            break;
        case KQ_RAFT_BEGIN_EPOCH_REQ:
            raft_on_begin_req(r, m);
            break;
        case KQ_RAFT_BEGIN_EPOCH_RESP:
            raft_on_begin_resp(r, m);
            break;
        case KQ_RAFT_END_EPOCH_REQ:
            raft_on_end_req(r, m);
            break;
        case KQ_RAFT_END_EPOCH_RESP:
            raft_on_end_resp(r, m);
            break;
        case KQ_RAFT_FETCH_REQ:
            raft_on_fetch_req(r, m);
            break;
        case KQ_RAFT_FETCH_RESP:
            raft_on_fetch_resp(r, m);
            break;
        case (int)KQ_RAFT_FETCH_SNAPSHOT_REQ:
            raft_on_fetch_snapshot_req(r, m);
            break;
        case (int)KQ_RAFT_FETCH_SNAPSHOT_RESP:
            raft_on_fetch_snapshot_resp(r, m);
            break;
        case (int)KQ_RAFT_ADD_VOTER_REQ:
        case (int)KQ_RAFT_REMOVE_VOTER_REQ:
        case (int)KQ_RAFT_UPDATE_VOTER_REQ:
            raft_on_voter_req(r, m);
            break;
        case (int)KQ_RAFT_UPDATE_VOTER_RESP:
            raft_on_update_voter_resp(r, m);
            break;
        default: /* Add/Remove answers: this core never asks for them */
            break;
        }
        break;
    }
    case KQ_RAFT_EV_PERSISTED:
        r->durable_end = ev->u.persisted_end < r->leo ? ev->u.persisted_end : r->leo;
        raft_leader_update_hw(r);
        raft_follower_update_hw(r);
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
            raft_resign(r);
        else if (r->role == KQ_RAFT_PROSPECTIVE || r->role == KQ_RAFT_CANDIDATE)
            raft_stop_campaign(r);
        break;
    case KQ_RAFT_EV_SNAPSHOT_TAKEN:
        raft_on_snapshot_taken(r, &ev->u.snapshot);
        break;
    case KQ_RAFT_EV_SNAPSHOT_INSTALLED:
        raft_on_snapshot_installed(r, &ev->u.snapshot);
        break;
    case KQ_RAFT_EV_UPGRADE_KRAFT:
        raft_upgrade_kraft(r, ev->u.upgrade.level, ev->u.upgrade.validate_only);
        break;
    }

    for (int i = 0; i < MAX_TIMER_ROUNDS && !u->fatal; i++)
        if (!raft_fire_timers(r))
            break;

    if (!u->fatal) {
        raft_pump_reconfig(r);
        raft_pump_update_voter(r);
        raft_pump_votes(r);
        raft_pump_leader(r);
        raft_pump_resigned(r);
        raft_pump_fetch(r);
    }

    u->high_watermark = r->hw;
    u->hw_changed = r->hw != hw0;
    u->role = r->role;
    u->epoch = r->epoch;
    u->leader_id = advertised_leader(r);
    u->role_changed = role0 != r->role || epoch0 != r->epoch || leader0 != u->leader_id;
    u->next_deadline_ms = raft_next_deadline(r);
    r->u = NULL;
    return rc;
}

void kq_raft_get_status(const kq_raft *r, kq_raft_status *out)
{
    memset(out, 0, sizeof(*out));
    out->role = r->role;
    out->node_id = r->cfg.node_id;
    out->is_voter = raft_is_voter(r);
    out->kraft_version = kq_voter_history_kraft_version(&r->vh);
    out->epoch = r->epoch;
    out->leader_id = advertised_leader(r);
    out->voted_id = r->voted_id;
    out->high_watermark = r->hw;
    out->leader_high_watermark = r->role == KQ_RAFT_FOLLOWER ? r->leader_hw : -1;
    out->log_start_offset = r->log_start;
    out->log_end_offset = r->leo;
    out->durable_end_offset = r->durable_end;
    out->last_epoch = raft_last_epoch(r);
    out->snapshot = r->snaps[0];
    out->fetching_snapshot = r->snap_fetching;
    out->installing_snapshot = r->snap_installing;
    out->leader_answered = r->role == KQ_RAFT_FOLLOWER && r->fetched_ok;
    out->leader_answer_ms = out->leader_answered ? r->last_fetch_ok_ms : 0;
    if (r->role != KQ_RAFT_LEADER)
        return;
    /* the leader first: among the voters, or among the observers once it removed itself */
    kq_raft_replica *v =
        raft_is_voter(r) ? &out->voters[out->n_voters++] : &out->observers[out->n_observers++];
    v->id = r->cfg.node_id;
    memcpy(v->directory_id, r->cfg.directory_id, sizeof(v->directory_id));
    v->log_end_offset = r->durable_end;
    v->last_fetch_ms = r->now;
    v->last_caught_up_ms = r->now;
    for (int i = 0; i < r->voters.n; i++) {
        if (i == r->self_idx)
            continue;
        const peer *p = &r->peers[i];
        v = &out->voters[out->n_voters++];
        v->id = p->id;
        memcpy(v->directory_id, r->voters.v[i].key.dir, sizeof(v->directory_id));
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
        memcpy(x->directory_id, o->dir, sizeof(x->directory_id));
        x->log_end_offset = o->end_offset;
        x->last_fetch_ms = o->last_fetch_ms;
        x->last_caught_up_ms = o->last_caught_up_ms;
    }
}
