/*
 * The Raft core's elections: Vote (pre-vote and vote), Begin/EndQuorumEpoch, and what a
 * prospective, candidate or resigned node sends. See raft_internal.h.
 */
#include "raft_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- Vote */

static bool prevote_grant(kq_raft *r, const kq_raft_msg *m)
{
    const __typeof__(m->u.vote_req) *v = &m->u.vote_req;
    if (m->epoch <= r->epoch)
        return false;
    if ((!raft_is_voter(r) && !raft_voters_dynamic(r)) || r->shutdown ||
        !raft_may_lead(r, v->candidate_id))
        return false;
    if (!raft_log_up_to_date(r, v->last_epoch, v->last_offset))
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
    if ((!raft_is_voter(r) && !raft_voters_dynamic(r)) || r->shutdown ||
        !raft_may_lead(r, v->candidate_id))
        return false;
    switch (r->role) {
    case KQ_RAFT_UNATTACHED:
    case KQ_RAFT_PROSPECTIVE:
        if (r->leader_id >= 0)
            return false;
        if (r->voted_id == v->candidate_id)
            return kq_uuid_is_zero(r->voted_dir) ||
                   memcmp(r->voted_dir, m->from_dir, sizeof(r->voted_dir)) == 0;
        if (r->voted_id >= 0)
            return false;
        return raft_log_up_to_date(r, v->last_epoch, v->last_offset);
    default:
        return false;
    }
}

void raft_on_vote_req(kq_raft *r, const kq_raft_msg *m)
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
        if (!raft_meant_for_me(r, m))
            err = KQ_ERR_INVALID_VOTER_KEY;
        else
            granted = prevote_grant(r, m); /* never changes state or epoch */
    } else {
        if (m->epoch > r->epoch)
            raft_become_unattached(r, m->epoch, KQ_RAFT_NO_ID);
        if (!raft_meant_for_me(r, m))
            err = KQ_ERR_INVALID_VOTER_KEY; /* Kafka: after the epoch, before the vote */
        else
            granted = vote_grant(r, m);
        if (granted && (r->role != KQ_RAFT_UNATTACHED || r->voted_id != v->candidate_id))
            raft_grant_vote(r, v->candidate_id, m->from_dir); /* durable, same update */
    }
    kq_raft_msg *resp = raft_emit_resp(r, m, KQ_RAFT_VOTE_RESP, err);
    if (resp)
        resp->u.vote_resp.granted = granted;
}

void raft_on_vote_resp(kq_raft *r, const kq_raft_msg *m)
{
    int i = raft_voter_index(r, m->from);
    if (i < 0)
        raft_parked_answer(r, m->from, KQ_RAFT_VOTE_REQ);
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
        raft_on_higher_epoch(r, m->epoch, m->leader_id);
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
    if (!granted && was_pre && m->error == KQ_ERR_NONE && m->epoch < r->epoch &&
        m->leader_id >= 0) {
        raft_candidate_past_a_lower_leader(r);
        return;
    }
    if (!granted && m->epoch == r->epoch && raft_can_follow_in_epoch(r, m->leader_id)) {
        raft_become_follower(r, r->epoch, m->leader_id); /* a leader at our epoch is alive */
        return;
    }
    raft_check_votes(r);
}

/* ---------------------------------------------------------------- Begin/EndQuorumEpoch */

void raft_on_begin_req(kq_raft *r, const kq_raft_msg *m)
{
    int32_t leader = m->leader_id >= 0 ? m->leader_id : m->from;
    int err = KQ_ERR_NONE;
    if (leader != m->from || !raft_may_lead(r, leader))
        err = KQ_ERR_INVALID_REQUEST;
    else if (m->epoch < r->epoch)
        err = KQ_ERR_FENCED_LEADER_EPOCH;
    else if (m->epoch > r->epoch)
        raft_become_follower(r, m->epoch, leader);
    else if (r->role == KQ_RAFT_LEADER || r->role == KQ_RAFT_RESIGNED ||
             !raft_can_follow_in_epoch(r, leader))
        err = KQ_ERR_INVALID_REQUEST; /* two leaders in one epoch: a bug somewhere */
    else if (r->role != KQ_RAFT_FOLLOWER)
        raft_become_follower(r, m->epoch, leader);
    if (!err && !raft_meant_for_me(r, m))
        err = KQ_ERR_INVALID_VOTER_KEY; /* Kafka: after following the leader */
    raft_emit_resp(r, m, KQ_RAFT_BEGIN_EPOCH_RESP, err);
}

void raft_on_begin_resp(kq_raft *r, const kq_raft_msg *m)
{
    int i = raft_voter_index(r, m->from);
    if (i < 0)
        raft_parked_answer(r, m->from, KQ_RAFT_BEGIN_EPOCH_REQ);
    if (i < 0 || i == r->self_idx || !r->peers[i].begin_inflight)
        return;
    r->peers[i].begin_inflight = false;
    if (m->epoch > r->epoch)
        raft_on_higher_epoch(r, m->epoch, m->leader_id);
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

void raft_on_end_req(kq_raft *r, const kq_raft_msg *m)
{
    int32_t leader = m->leader_id >= 0 ? m->leader_id : m->from;
    int err = KQ_ERR_NONE;
    if (leader != m->from || !raft_may_lead(r, leader) || m->u.end_req.n_preferred < 0 ||
        m->u.end_req.n_preferred > KQ_RAFT_MAX_VOTERS) {
        err = KQ_ERR_INVALID_REQUEST;
    } else if (m->epoch < r->epoch) {
        err = KQ_ERR_FENCED_LEADER_EPOCH;
    } else {
        if (m->epoch > r->epoch)
            raft_become_follower(r, m->epoch, leader);
        if (raft_is_voter(r)) {
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
    raft_emit_resp(r, m, KQ_RAFT_END_EPOCH_RESP, err);
}

void raft_on_end_resp(kq_raft *r, const kq_raft_msg *m)
{
    int i = raft_voter_index(r, m->from);
    if (i < 0)
        raft_parked_answer(r, m->from, KQ_RAFT_END_EPOCH_REQ);
    if (i < 0 || i == r->self_idx || !r->peers[i].end_inflight)
        return;
    r->peers[i].end_inflight = false;
    if (m->epoch > r->epoch) {
        raft_on_higher_epoch(r, m->epoch, m->leader_id);
        return;
    }
    if (m->error == KQ_ERR_REQUEST_TIMED_OUT || m->error == KQ_ERR_NETWORK_EXCEPTION ||
        m->error == KQ_ERR_BROKER_NOT_AVAILABLE) {
        r->end_retry_at = r->now + r->cfg.retry_backoff_ms;
        return;
    }
    r->peers[i].end_acked = true;
}

/* ---------------------------------------------------------------- sending */

void raft_pump_votes(kq_raft *r)
{
    if (r->role != KQ_RAFT_PROSPECTIVE && r->role != KQ_RAFT_CANDIDATE)
        return;
    if (r->now < r->vote_retry_at || r->backoff_deadline != 0)
        return;
    bool pre = r->role == KQ_RAFT_PROSPECTIVE;
    for (int i = 0; i < r->voters.n; i++) {
        peer *p = &r->peers[i];
        if (i == r->self_idx || p->vote != 0 || p->vote_inflight)
            continue;
        kq_raft_msg *m = raft_emit(r, KQ_RAFT_VOTE_REQ, p->id);
        if (!m)
            return;
        m->epoch = pre ? r->epoch + 1 : r->epoch;
        m->leader_id = KQ_RAFT_NO_ID;
        m->u.vote_req.candidate_id = r->cfg.node_id;
        m->u.vote_req.last_epoch = raft_last_epoch(r);
        m->u.vote_req.last_offset = r->leo;
        m->u.vote_req.pre_vote = pre;
        p->vote_inflight = true;
        p->vote_inflight_pre = pre;
        p->vote_inflight_round = r->round;
    }
}

void raft_pump_resigned(kq_raft *r)
{
    if (r->role != KQ_RAFT_RESIGNED || r->now < r->end_retry_at)
        return;
    for (int i = 0; i < r->voters.n; i++) {
        peer *p = &r->peers[i];
        if (i == r->self_idx || p->end_acked || p->end_inflight)
            continue;
        kq_raft_msg *m = raft_emit(r, KQ_RAFT_END_EPOCH_REQ, p->id);
        if (!m)
            return;
        m->leader_id = r->cfg.node_id;
        memcpy(m->u.end_req.preferred, r->preferred, sizeof(r->preferred));
        m->u.end_req.n_preferred = r->n_preferred;
        p->end_inflight = true;
    }
}

/* Graceful shutdown of a Prospective or Candidate voter: stop campaigning without changing
 * the stored election state. The in-memory role becomes the one a restart from that state
 * would pick: Resigned if it led this epoch, Follower if it knows the epoch's leader, else
 * Unattached with its vote. Nothing is persisted. */
void raft_stop_campaign(kq_raft *r)
{
    r->backoff_deadline = 0;
    r->vote_retry_at = 0;
    if (r->leader_id == r->cfg.node_id) {
        r->role = KQ_RAFT_RESIGNED;
        for (int i = 0; i < r->voters.n; i++)
            r->peers[i].end_acked = true; /* EndQuorumEpoch went out when it resigned */
        r->end_retry_at = 0;
        r->n_preferred = 0;
    } else if (raft_may_lead(r, r->leader_id)) {
        r->role = KQ_RAFT_FOLLOWER;
        raft_track_leader(r, r->leader_id);
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
