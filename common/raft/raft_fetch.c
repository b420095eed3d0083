/*
 * The Raft core's replication: Fetch on the leader (parking, high watermark, check-quorum
 * marks) and on a follower (append, truncation, back-off), and the Fetch it sends. See
 * raft_internal.h.
 */
#include "raft_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- Fetch (leader side) */

observer *raft_observer_slot(kq_raft *r, int32_t id, const uint8_t dir[16])
{
    observer *free_slot = NULL, *oldest = NULL;
    for (int i = 0; i < KQ_RAFT_MAX_OBSERVERS; i++) {
        observer *o = &r->observers[i];
        if (o->used && o->id == id && !memcmp(o->dir, dir, sizeof(o->dir)))
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
    memcpy(o->dir, dir, sizeof(o->dir));
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

void raft_check_quorum_mark(kq_raft *r, int i)
{
    r->peers[i].cq_fetched = true;
    int n = raft_is_voter(r); /* the leader counts itself only while it is a voter */
    for (int j = 0; j < r->voters.n; j++)
        if (j != r->self_idx && r->peers[j].cq_fetched)
            n++;
    if (kq_quorum_heard(n, r->voters.n)) {
        for (int j = 0; j < r->voters.n; j++)
            r->peers[j].cq_fetched = false;
        r->cq_deadline = r->now + (uint64_t)r->cfg.fetch_timeout_ms * 3 / 2;
    }
}

void raft_on_fetch_req(kq_raft *r, const kq_raft_msg *m)
{
    const __typeof__(m->u.fetch_req) *f = &m->u.fetch_req;
    if (f->max_wait_ms < 0 || f->fetch_offset < 0 || f->last_fetched_epoch < 0 ||
        f->last_fetched_epoch > m->epoch) {
        raft_send_fetch_error(r, m->from, m->token, KQ_ERR_INVALID_REQUEST);
        return;
    }
    if (m->epoch < r->epoch) {
        raft_send_fetch_error(r, m->from, m->token, KQ_ERR_FENCED_LEADER_EPOCH);
        return;
    }
    if (m->epoch > r->epoch) {
        raft_send_fetch_error(r, m->from, m->token, KQ_ERR_UNKNOWN_LEADER_EPOCH);
        return;
    }
    if (r->role != KQ_RAFT_LEADER) {
        raft_send_fetch_error(r, m->from, m->token, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
        return;
    }
    if (r->shutdown) {
        raft_send_fetch_error(r, m->from, m->token, KQ_ERR_BROKER_NOT_AVAILABLE);
        return;
    }
    /* A new Fetch from a replica supersedes one it left parked. */
    for (int i = 0; i < KQ_RAFT_MAX_PARKED && r->n_parked > 0; i++) {
        parked *p = &r->parked[i];
        if (p->used && p->from == m->from) {
            raft_send_fetch_resp_records(r, p->from, p->token, p->fetch_offset, false);
            p->used = false;
            r->n_parked--;
        }
    }

    /* a voter by key: the same id with another directory fetches as an observer */
    int vi = raft_voter_key_index(r, m->from, m->from_dir);
    if (vi >= 0)
        raft_check_quorum_mark(r, vi);

    /* validateOffsetAndEpoch (kraft-semantics.md 1.5). Item 5 (KAFKA-15078): a fetch from
     * offset 0 gets the snapshot whenever one exists. Item 2: with a snapshot at the log start
     * (log_start > 0, epoch start_epoch), an offset below it, at it with another epoch, or a
     * last fetched epoch older than it gets the latest snapshot. */
    if (r->snaps[0].end_offset > 0 &&
        (f->fetch_offset == 0 || (r->log_start > 0 && (f->fetch_offset < r->log_start ||
                                                       (f->fetch_offset == r->log_start &&
                                                        f->last_fetched_epoch != r->start_epoch) ||
                                                       f->last_fetched_epoch < r->start_epoch)))) {
        kq_raft_msg *resp = raft_emit_resp(r, m, KQ_RAFT_FETCH_RESP, KQ_ERR_NONE);
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
        raft_send_fetch_error(r, m->from, m->token, KQ_ERR_OFFSET_OUT_OF_RANGE);
        return;
    } else if (!raft_end_offset_for_epoch(r, f->last_fetched_epoch, &div_epoch, &div_end)) {
        valid = false;
        div_epoch = 0;
        div_end = r->log_start;
    } else {
        valid = div_epoch == f->last_fetched_epoch && div_end >= f->fetch_offset;
    }
    if (!valid) {
        kq_raft_msg *resp = raft_emit_resp(r, m, KQ_RAFT_FETCH_RESP, KQ_ERR_NONE);
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
        raft_leader_update_hw(r);
    } else if (vi < 0) {
        observer *o = raft_observer_slot(r, m->from, m->from_dir);
        record_fetch(r, &o->end_offset, &o->last_fetch_ms, &o->last_caught_up_ms, &o->prev_fetch_ms,
                     &o->prev_fetch_leo, f->fetch_offset);
    }

    const int64_t *sent = raft_hw_sent_of(r, m->from);
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
    raft_send_fetch_resp_records(r, m->from, m->token, f->fetch_offset, true);
}

/* ---------------------------------------------------------------- Fetch (follower side) */

void raft_follower_update_hw(kq_raft *r)
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
    return kq_epoch_cache_starts_at(&r->epochs, t);
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
    bool holds = raft_end_offset_for_epoch(r, epoch, &own_epoch, &own_end);
    if (!holds) {
        own_end = r->epochs.n > 0 ? r->epochs.e[0].start_offset : r->log_start;
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

bool raft_is_transport_error(int err)
{
    return err == KQ_ERR_REQUEST_TIMED_OUT || err == KQ_ERR_NETWORK_EXCEPTION ||
           err == KQ_ERR_BROKER_NOT_AVAILABLE;
}

void raft_fetch_backoff(kq_raft *r)
{
    r->fetch_retry_at = r->now + r->cfg.retry_backoff_ms;
}

static void follower_append(kq_raft *r, const kq_raft_msg *m)
{
    const __typeof__(m->u.fetch_resp) *f = &m->u.fetch_resp;
    size_t n = f->n_batches < KQ_RAFT_MAX_BATCHES ? f->n_batches : KQ_RAFT_MAX_BATCHES;
    int64_t next = r->leo;
    int32_t ep = raft_last_epoch(r);
    /* validate all first: a bad response changes nothing */
    for (size_t i = 0; i < n; i++) {
        const kq_raft_batch *b = &f->batches[i];
        if (b->base_offset != next || b->count <= 0 || b->epoch < ep || b->epoch > m->epoch ||
            b->epoch <= 0 ||
            !raft_control_ok(b->control, b->n_control, b->base_offset, b->base_offset + b->count,
                             true)) {
            raft_fetch_backoff(r);
            return;
        }
        next = b->base_offset + b->count;
        ep = b->epoch;
    }
    kq_raft_update *u = r->u;
    for (size_t i = 0; i < n && u->n_append < KQ_RAFT_MAX_BATCHES; i++) {
        const kq_raft_batch *b = &f->batches[i];
        if (b->epoch > raft_last_epoch(r) || r->epochs.n == 0)
            raft_add_epoch(r, b->epoch, b->base_offset);
        kq_raft_batch *a = &u->append[u->n_append++];
        *a = *b;
        a->kind = KQ_RAFT_BATCH_FETCHED;
        r->leo = b->base_offset + b->count;
        /* KIP-853: a voter set is in force from the moment it is in the log */
        char why[256];
        if (raft_add_control(r, b->control, b->n_control, why, sizeof(why)) != 0) {
            raft_set_fatal(r, "the leader sent quorum records this node cannot put in force "
                              "(a voter set breaking the one-change rule, or a lower "
                              "kraft.version)");
            return;
        }
    }
}

/* The answer of bootstrap server `from` (KQ_RAFT_BOOTSTRAP_ID): only whom it names as the
 * leader counts; the node then fetches from that leader by its id (records from a bootstrap
 * id are not taken: the server may be a voter that is not the leader). */
static void on_bootstrap_fetch_resp(kq_raft *r, const kq_raft_msg *m)
{
    int b = KQ_RAFT_BOOTSTRAP_ID(0) - m->from;

    if (b < 0 || b >= r->cfg.n_bootstrap || !r->boot_inflight[b])
        return;
    r->boot_inflight[b] = false;
    if (!raft_is_transport_error(m->error) && m->epoch > r->epoch) {
        raft_on_higher_epoch(r, m->epoch, m->leader_id);
        return;
    }
    if (!raft_is_transport_error(m->error) && m->epoch == r->epoch &&
        r->role == KQ_RAFT_UNATTACHED && raft_can_follow_in_epoch(r, m->leader_id)) {
        raft_become_follower(r, r->epoch, m->leader_id);
        return;
    }
    raft_fetch_backoff(r);
    if (r->role == KQ_RAFT_UNATTACHED)
        r->discovery_idx = -1; /* try another server */
}

void raft_on_fetch_resp(kq_raft *r, const kq_raft_msg *m)
{
    if (m->from <= KQ_RAFT_BOOTSTRAP_ID(0)) {
        on_bootstrap_fetch_resp(r, m);
        return;
    }
    int i = raft_peer_index(r, m->from);
    if (i < 0)
        raft_parked_answer(r, m->from, KQ_RAFT_FETCH_REQ);
    if (i < 0 || i == r->self_idx || !r->peers[i].fetch_inflight)
        return;
    r->peers[i].fetch_inflight = false;
    const __typeof__(m->u.fetch_resp) *f = &m->u.fetch_resp;

    if (raft_is_transport_error(m->error)) {
        raft_fetch_backoff(r);
        if (r->role == KQ_RAFT_FOLLOWER && m->from == r->leader_id)
            r->fetch_failing = true;
        if (r->role == KQ_RAFT_UNATTACHED)
            r->discovery_idx = -1; /* try another voter */
        return;
    }
    if (m->epoch > r->epoch) {
        raft_on_higher_epoch(r, m->epoch, m->leader_id);
        return;
    }
    if (m->epoch < r->epoch) {
        raft_fetch_backoff(r);
        return;
    }
    /* same epoch */
    if (r->role != KQ_RAFT_FOLLOWER) {
        if ((r->role == KQ_RAFT_UNATTACHED || r->role == KQ_RAFT_PROSPECTIVE ||
             r->role == KQ_RAFT_CANDIDATE) &&
            raft_can_follow_in_epoch(r, m->leader_id))
            raft_become_follower(r, r->epoch, m->leader_id);
        else
            raft_fetch_backoff(r);
        return;
    }
    if (m->from != r->leader_id) {
        raft_fetch_backoff(r);
        return;
    }
    if (m->error != KQ_ERR_NONE) {
        /* NOT_LEADER_OR_FOLLOWER from our leader at our epoch (it resigned), UNKNOWN_LEADER_EPOCH,
         * or an error that should not happen: back off and retry. */
        raft_fetch_backoff(r);
        return;
    }
    if (f->n_batches > 0 && !f->batches) {
        raft_fetch_backoff(r);
        return;
    }
    r->fetched_ok = true;
    r->fetch_failing = false;
    r->last_fetch_ok_ms = r->now;
    r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;

    if (f->snapshot) {
        raft_begin_snapshot_fetch(r, f->snapshot_id, m->epoch);
        return;
    }
    if (f->diverging) {
        int64_t t = truncation_point(r, f->diverging_epoch, f->diverging_end_offset);
        if (t < r->hw || t < r->committed) {
            raft_set_fatal(r, "leader asked to truncate the log below the high watermark");
            return;
        }
        if (t < r->leo) {
            r->u->truncate_to = t;
            r->leo = t;
            if (r->durable_end > t)
                r->durable_end = t;
            raft_truncate_epochs(r, t);
            raft_voters_truncate(r, t); /* a voter set truncated away is no longer in force */
        }
        return; /* refetch at once (pump) */
    }
    if (f->high_watermark >= 0 && f->high_watermark > r->leader_hw)
        r->leader_hw = f->high_watermark;
    if (f->n_batches > 0)
        follower_append(r, m);
    raft_follower_update_hw(r);
}

void raft_pump_leader(kq_raft *r)
{
    if (r->role != KQ_RAFT_LEADER)
        return;
    if (r->now >= r->begin_resend_at) {
        for (int i = 0; i < r->voters.n; i++) {
            peer *p = &r->peers[i];
            if (i == r->self_idx || p->begin_inflight)
                continue;
            kq_raft_msg *m = raft_emit(r, KQ_RAFT_BEGIN_EPOCH_REQ, p->id);
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
            raft_send_fetch_resp_records(r, p->from, p->token, p->fetch_offset, true);
            p->used = false;
            r->n_parked--;
        }
    }
}

static int fetch_target(kq_raft *r)
{
    if (r->role == KQ_RAFT_FOLLOWER)
        return raft_peer_index(r, r->leader_id);
    if (r->role == KQ_RAFT_UNATTACHED && !raft_is_voter(r)) {
        if (r->discovery_idx < 0 || r->peers[r->discovery_idx].fetch_inflight) {
            int cand[KQ_RAFT_MAX_VOTERS], n = 0;
            for (int i = 0; i < r->voters.n; i++)
                if (!r->peers[i].fetch_inflight && r->peers[i].id != r->cfg.node_id)
                    cand[n++] = i;
            if (n == 0)
                return -1;
            r->discovery_idx = cand[raft_prng_below(r, (uint64_t)n)];
        }
        return r->discovery_idx;
    }
    return -1;
}

/* A node that is not a voter and knows no leader asks its bootstrap servers (Kafka's
 * controller.quorum.bootstrap.servers) when it has them: one at a time, at random. */
static bool discover_by_bootstrap(const kq_raft *r)
{
    return r->role == KQ_RAFT_UNATTACHED && !raft_is_voter(r) && r->cfg.n_bootstrap > 0;
}

static void fill_fetch(kq_raft *r, kq_raft_msg *m)
{
    m->u.fetch_req.fetch_offset = r->leo;
    m->u.fetch_req.last_fetched_epoch = raft_last_epoch(r);
    m->u.fetch_req.max_wait_ms =
        r->cfg.fetch_max_wait_ms > INT32_MAX ? INT32_MAX : (int32_t)r->cfg.fetch_max_wait_ms;
}

static void pump_bootstrap_fetch(kq_raft *r)
{
    if (r->discovery_idx < 0 || r->discovery_idx >= r->cfg.n_bootstrap) {
        int cand[KQ_RAFT_MAX_VOTERS], n = 0;

        for (int i = 0; i < r->cfg.n_bootstrap; i++)
            if (!r->boot_inflight[i])
                cand[n++] = i;
        if (n == 0)
            return;
        r->discovery_idx = cand[raft_prng_below(r, (uint64_t)n)];
    }
    if (r->boot_inflight[r->discovery_idx])
        return; /* wait for its answer (or its timeout) */
    kq_raft_msg *m = raft_emit(r, KQ_RAFT_FETCH_REQ, KQ_RAFT_BOOTSTRAP_ID(r->discovery_idx));
    if (!m)
        return;
    fill_fetch(r, m);
    r->boot_inflight[r->discovery_idx] = true;
}

void raft_pump_fetch(kq_raft *r)
{
    if (r->snap_installing)
        return; /* the host is installing a snapshot: nothing to fetch from until it is done */
    if (r->now < r->fetch_retry_at || r->durable_end < r->leo)
        return; /* back-off, or the offset we would report is not durable yet */
    if (discover_by_bootstrap(r)) {
        pump_bootstrap_fetch(r);
        return;
    }
    int t = fetch_target(r);
    if (t < 0 || t == r->self_idx)
        return;
    if (r->snap_fetching) {
        if (r->role == KQ_RAFT_FOLLOWER)
            raft_pump_fetch_snapshot(r, t);
        return;
    }
    if (r->peers[t].fetch_inflight)
        return;
    kq_raft_msg *m = raft_emit(r, KQ_RAFT_FETCH_REQ, r->peers[t].id);
    if (!m)
        return;
    fill_fetch(r, m);
    r->peers[t].fetch_inflight = true;
}
