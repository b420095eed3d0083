/*
 * The Raft core's membership (KIP-853): the voter set in force, learned from the quorum records
 * in the log as they are appended (kq/voters.h), and what a change of it does to this node's
 * role and to the replica state a leader keeps. See raft_internal.h.
 */
#include "raft_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The voter set in force is the history's latest: take a copy, find this node in it (by id and
 * directory id), and carry each replica's state over by id. A voter that stays keeps its state
 * (requests in flight included); a new voter that fetched from this leader as an observer
 * brings that progress with it, and the leader this node followed from outside the set its
 * Fetch state; a removed voter's progress stays with a leader as an observer's, and a removed
 * leader this node follows moves to the leader slot. */
void raft_apply_voters(kq_raft *r)
{
    const kq_voter_set *s = kq_voter_history_last(&r->vh, NULL);
    kq_voter_key self = {.id = r->cfg.node_id};
    peer old[KQ_RAFT_MAX_VOTERS];
    int n_old = r->voters.n;

    memcpy(old, r->peers, sizeof(old));
    memcpy(self.dir, r->cfg.directory_id, sizeof(self.dir));
    r->voters = *s;
    r->self_idx = kq_voters_find(s, &self);
    for (int i = 0; i < s->n; i++) {
        peer *p = &r->peers[i];
        int32_t id = s->v[i].key.id;
        int j = 0;

        while (j < n_old && old[j].id != id)
            j++;
        if (j < n_old) {
            *p = old[j];
            old[j].id = KQ_RAFT_NO_ID;
            continue;
        }
        if (id == r->peers[LEADER_SLOT].id) {
            *p = r->peers[LEADER_SLOT];
            raft_peer_reset(&r->peers[LEADER_SLOT], KQ_RAFT_NO_ID);
            continue;
        }
        raft_peer_reset(p, id);
        for (int k = 0; k < KQ_RAFT_MAX_OBSERVERS; k++) {
            observer *o = &r->observers[k];
            if (!o->used || o->id != id)
                continue;
            p->end_offset = o->end_offset;
            p->last_fetch_ms = o->last_fetch_ms;
            p->last_caught_up_ms = o->last_caught_up_ms;
            p->prev_fetch_ms = o->prev_fetch_ms;
            p->prev_fetch_leo = o->prev_fetch_leo;
            p->hw_sent = o->hw_sent;
            o->used = false;
        }
    }
    for (int j = 0; j < n_old; j++) {
        if (old[j].id == KQ_RAFT_NO_ID || old[j].id == r->cfg.node_id)
            continue;
        if (old[j].id == r->leader_id && r->role != KQ_RAFT_LEADER) {
            r->peers[LEADER_SLOT] = old[j];
            continue;
        }
        if (r->role != KQ_RAFT_LEADER)
            continue;
        observer *o = raft_observer_slot(r, old[j].id);
        o->end_offset = old[j].end_offset;
        o->last_fetch_ms = old[j].last_fetch_ms;
        o->last_caught_up_ms = old[j].last_caught_up_ms;
        o->prev_fetch_ms = old[j].prev_fetch_ms;
        o->prev_fetch_leo = old[j].prev_fetch_leo;
        o->hw_sent = old[j].hw_sent;
    }
}

/* A node that became a voter may campaign; one that stopped being one no longer does (a
 * leader keeps leading until its removal commits). */
static void role_after_change(kq_raft *r, bool was_voter)
{
    bool is_voter = raft_is_voter(r);

    if (is_voter == was_voter)
        return;
    switch (r->role) {
    case KQ_RAFT_UNATTACHED:
        if (is_voter) {
            r->election_deadline = r->now + raft_random_election_timeout(r);
        } else {
            r->fetch_deadline = r->now + r->cfg.fetch_timeout_ms;
            r->fetch_retry_at = 0;
            r->discovery_idx = -1;
        }
        break;
    case KQ_RAFT_PROSPECTIVE:
    case KQ_RAFT_CANDIDATE:
        if (!is_voter)
            raft_stop_campaign(r);
        break;
    case KQ_RAFT_FOLLOWER:
    case KQ_RAFT_LEADER:
    case KQ_RAFT_RESIGNED:
        break;
    }
}

/* The history changed: the set in force may have. */
static void voters_changed(kq_raft *r)
{
    bool was_voter = raft_is_voter(r);

    raft_apply_voters(r);
    role_after_change(r, was_voter);
    raft_check_votes(r);
}

bool raft_control_ok(const kq_raft_control *c, size_t n, int64_t from, int64_t to)
{
    char why[160];

    if (n > 0 && !c)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (c[i].offset < from || c[i].offset >= to || (i > 0 && c[i].offset < c[i - 1].offset))
            return false;
        if (c[i].kraft_version < -1 || c[i].kraft_version > 1)
            return false;
        if (c[i].voters && kq_voters_check(c[i].voters, why, sizeof(why)) != 0)
            return false;
    }
    return true;
}

int raft_add_control(kq_raft *r, const kq_raft_control *c, size_t n, char *why, size_t whylen)
{
    bool changed = false;
    int rc = 0;

    for (size_t i = 0; i < n && !rc; i++) {
        if (c[i].kraft_version >= 0) {
            rc = kq_voter_history_add_kraft_version(&r->vh, c[i].offset, c[i].kraft_version, why,
                                                    whylen);
            changed = true;
        }
        if (!rc && c[i].voters) {
            rc = kq_voter_history_add_voters(&r->vh, c[i].offset, c[i].voters, why, whylen);
            changed = true;
        }
    }
    if (changed)
        voters_changed(r);
    return rc;
}

void raft_voters_truncate(kq_raft *r, int64_t end)
{
    if (kq_voter_history_truncate_new(&r->vh, end))
        voters_changed(r);
}

void raft_voters_compact(kq_raft *r, int64_t start)
{
    kq_voter_history_truncate_old(&r->vh, start);
}

bool raft_voters_dynamic(const kq_raft *r)
{
    return kq_voter_history_kraft_version(&r->vh) >= 1;
}
