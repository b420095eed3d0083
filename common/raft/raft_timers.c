/*
 * The Raft core's timers: election, fetch and check-quorum timeouts, back-offs, resignation,
 * and the next deadline the host must step TICK at. See raft_internal.h.
 */
#include "raft_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- timers */

void raft_resign(kq_raft *r)
{
    raft_become_resigned(r);
}

bool raft_fire_timers(kq_raft *r)
{
    uint64_t now = r->now;
    switch (r->role) {
    case KQ_RAFT_UNATTACHED:
        if (raft_is_voter(r)) {
            if (!r->shutdown && now >= r->election_deadline) {
                raft_become_prospective(r);
                return true;
            }
        } else if (now >= r->fetch_deadline) {
            if (raft_campaigns(r) && !r->shutdown) {
                /* no leader found for a fetch timeout, and the record that removed it may be
                 * known here only (raft_campaigns) */
                raft_become_prospective(r);
                if (r->role != KQ_RAFT_UNATTACHED)
                    return true; /* (not while it installs a snapshot: it looks on) */
            }
            r->fetch_deadline = now + r->cfg.fetch_timeout_ms;
            r->discovery_idx = -1;
            r->fetch_retry_at = 0;
        }
        return false;
    case KQ_RAFT_RESIGNED:
        if (!r->shutdown && now >= r->election_deadline) {
            if (!raft_is_voter(r)) {
                /* removed from the voters: never campaigns; a new epoch, so that nobody takes
                 * it for the leader of the old one (Kafka's pollResigned) */
                raft_become_unattached(r, r->epoch + 1, KQ_RAFT_NO_ID);
                return true;
            }
            raft_become_prospective(r);
            return true;
        }
        return false;
    case KQ_RAFT_PROSPECTIVE:
    case KQ_RAFT_CANDIDATE:
        if (r->backoff_deadline != 0) {
            if (now >= r->backoff_deadline) {
                r->backoff_deadline = 0;
                if (!raft_is_voter(r)) { /* a removed node's round failed: look for a leader */
                    raft_become_unattached(r, r->epoch, r->voted_id);
                    return true;
                }
                raft_become_prospective(r);
                return true;
            }
        } else if (now >= r->election_deadline) {
            raft_start_backoff(r);
            return true;
        }
        return false;
    case KQ_RAFT_FOLLOWER:
        if (now >= r->fetch_deadline) {
            if (r->snap_installing) {
                r->fetch_deadline = now + r->cfg.fetch_timeout_ms;
                return false;
            }
            if (!raft_is_voter(r)) {
                /* the leader it followed did not answer for a fetch timeout: a node that an
                 * uncommitted record removed campaigns (the leader others name may be a stale
                 * hint, and it may hold the only copy of that record); others rediscover */
                if (raft_campaigns(r) && !r->shutdown) {
                    raft_become_prospective(r);
                    if (r->role != KQ_RAFT_FOLLOWER)
                        return true;
                }
                raft_become_unattached(r, r->epoch, KQ_RAFT_NO_ID); /* rediscover the leader */
                return true;
            }
            if (r->shutdown) {
                r->fetch_deadline = now + r->cfg.fetch_timeout_ms;
                return false;
            }
            raft_become_prospective(r);
            return true;
        }
        return false;
    case KQ_RAFT_LEADER:
        if (r->voters.n > 1 && now >= r->cq_deadline) {
            raft_resign(r);
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

uint64_t raft_next_deadline(kq_raft *r)
{
    uint64_t d = UINT64_MAX, now = r->now;
    switch (r->role) {
    case KQ_RAFT_UNATTACHED:
        if (raft_is_voter(r)) {
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
        if (raft_update_voter_due(r) && r->update_at > now)
            consider(&d, r->update_at);
        break;
    case KQ_RAFT_LEADER:
        consider(&d, r->begin_resend_at);
        if (r->change.active)
            consider(&d, r->change.deadline);
        if (r->add_wait.active)
            consider(&d, r->add_wait.deadline);
        if (r->voters.n > 1)
            consider(&d, r->cq_deadline);
        for (int i = 0; i < KQ_RAFT_MAX_PARKED && r->n_parked > 0; i++)
            if (r->parked[i].used)
                consider(&d, r->parked[i].deadline);
        break;
    }
    if ((r->role == KQ_RAFT_FOLLOWER || (r->role == KQ_RAFT_UNATTACHED && !raft_is_voter(r))) &&
        r->fetch_retry_at > now)
        consider(&d, r->fetch_retry_at);
    if (d == UINT64_MAX)
        d = now + IDLE_DEADLINE_MS;
    if (d < now)
        d = now;
    return d;
}
