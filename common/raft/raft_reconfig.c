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
    kq_voter_set old_set = r->voters;
    int n_old = r->voters.n;

    memcpy(old, r->peers, sizeof(old));
    memcpy(self.dir, r->cfg.directory_id, sizeof(self.dir));
    bool cq_starts = r->role == KQ_RAFT_LEADER && n_old <= 1 && s->n > 1;
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
        if (id == r->peers[LEADER_SLOT].id && r->role != KQ_RAFT_LEADER) {
            *p = r->peers[LEADER_SLOT];
            raft_peer_reset(&r->peers[LEADER_SLOT], KQ_RAFT_NO_ID); /* moved to p */
            continue;
        }
        raft_peer_reset(p, id);
        raft_peer_unpark(r, p); /* it left the set with requests in flight and came back */
        for (int k = 0; k < KQ_RAFT_MAX_OBSERVERS; k++) {
            observer *o = &r->observers[k];
            kq_voter_key ok = {.id = o->id};
            memcpy(ok.dir, o->dir, sizeof(ok.dir));
            if (!o->used || !kq_voter_key_matches(&s->v[i].key, &ok))
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
            if (r->peers[LEADER_SLOT].id != old[j].id)
                raft_peer_park(r, &r->peers[LEADER_SLOT]);
            r->peers[LEADER_SLOT] = old[j];
            continue;
        }
        raft_peer_park(r, &old[j]);
        if (r->role != KQ_RAFT_LEADER)
            continue;
        observer *o = raft_observer_slot(r, old[j].id, old_set.v[j].key.dir);
        o->end_offset = old[j].end_offset;
        o->last_fetch_ms = old[j].last_fetch_ms;
        /* caught up only once it fetches as an observer: a late AddRaftVoter (a client's
         * earlier attempt, delayed) must not re-add a voter just removed, whose directory may
         * be gone already (kq-sim --voter-changes seed 5017871) */
        o->last_caught_up_ms = 0;
        o->prev_fetch_ms = old[j].prev_fetch_ms;
        o->prev_fetch_leo = old[j].prev_fetch_leo;
        o->hw_sent = old[j].hw_sent;
    }
    if (cq_starts) {
        /* check-quorum starts with the second voter: a window from now, not a deadline that
         * passed while the leader was alone */
        r->cq_deadline = r->now + (uint64_t)r->cfg.fetch_timeout_ms * 3 / 2;
        for (int i = 0; i < KQ_RAFT_MAX_VOTERS; i++)
            r->peers[i].cq_fetched = false;
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

bool raft_control_ok(const kq_raft_control *c, size_t n, int64_t from, int64_t to, bool ascending)
{
    char why[160];

    if (n > 0 && !c)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (c[i].offset < from || c[i].offset >= to ||
            (ascending && i > 0 && c[i].offset < c[i - 1].offset))
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
            rc = c[i].unsafe_recovery
                     ? kq_voter_history_force_voters(&r->vh, c[i].offset, c[i].voters, why, whylen)
                     : kq_voter_history_add_voters(&r->vh, c[i].offset, c[i].voters, why, whylen);
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

/* A quorum of two voters {A, B} where the record removing A reached A alone (A led and failed
 * before B had it, or B led and lost its unsynced tail in a crash) would otherwise stall for
 * good: B needs A's vote, which A refuses to a shorter log, and A, no voter of its own set,
 * never campaigns (found by kq-sim --voter-changes). So A campaigns while the removal is not
 * known to be committed. It needs a majority of its latest set, which does not count it (any
 * majority of that set overlaps any majority of the set before: one change at a time), leads
 * until the removal commits and then hands over, as a leader that removed itself does. */
bool raft_campaigns(const kq_raft *r)
{
    int64_t at;

    if (raft_is_voter(r))
        return true;
    if (!raft_voters_dynamic(r))
        return false;
    kq_voter_history_last(&r->vh, &at);
    if (at < 0 || r->hw > at)
        return false;
    const kq_voter_set *before = kq_voter_history_set_at(&r->vh, at - 1);
    kq_voter_key self = {.id = r->cfg.node_id};
    memcpy(self.dir, r->cfg.directory_id, sizeof(self.dir));
    return before && kq_voters_find(before, &self) >= 0;
}

bool raft_voters_dynamic(const kq_raft *r)
{
    /* a node without a static set learns its set from the log: kraft.version 1 by nature */
    return kq_voter_history_kraft_version(&r->vh) >= 1 || r->cfg.n_voters == 0;
}

/* ---------------------------------------------------------------- changes (leader) */

static void voter_answer(kq_raft *r, kq_raft_msg_type req, int32_t to, uint64_t token, int err,
                         const char *why)
{
    kq_raft_msg *m = raft_emit(r, (kq_raft_msg_type)(req + 1), to);

    if (!m)
        return;
    m->token = token;
    m->error = err;
    if (err)
        snprintf(m->u.voter_resp.error_message, sizeof(m->u.voter_resp.error_message), "%s", why);
}

void raft_fail_voter_change(kq_raft *r, int err, const char *why)
{
    if (r->add_wait.active) {
        r->add_wait.active = false;
        voter_answer(r, KQ_RAFT_ADD_VOTER_REQ, r->add_wait.from, r->add_wait.token, err, why);
    }
    if (!r->change.active)
        return;
    r->change.active = false;
    voter_answer(r, r->change.type, r->change.from, r->change.token, err, why);
}

/* Append the leader's own batch of quorum records (in force at once): a KRaftVersionRecord
 * when kraft_version >= 0, then the VotersRecord for s. */
static int append_control(kq_raft *r, int16_t kraft_version, const kq_voter_set *s, char *why,
                          size_t whylen)
{
    kq_raft_update *u = r->u;
    int n = 0, rc;

    if (u->n_append >= KQ_RAFT_MAX_BATCHES) {
        snprintf(why, whylen, "the leader is busy: try again");
        return KQ_ERR_REQUEST_TIMED_OUT;
    }
    r->own_set = *s;
    if (kraft_version >= 0)
        r->own_control[n++] =
            (kq_raft_control){.offset = r->leo, .kraft_version = kraft_version, .voters = NULL};
    r->own_control[n] =
        (kq_raft_control){.offset = r->leo + n, .kraft_version = -1, .voters = &r->own_set};
    n++;
    rc = raft_add_control(r, r->own_control, (size_t)n, why, whylen);
    if (rc)
        return rc;
    kq_raft_batch *b = &u->append[u->n_append++];
    memset(b, 0, sizeof(*b));
    b->base_offset = r->leo;
    b->epoch = r->epoch;
    b->count = n;
    b->kind = KQ_RAFT_BATCH_VOTERS;
    b->control = r->own_control;
    b->n_control = (size_t)n;
    r->leo += n;
    raft_leader_update_hw(r);
    return 0;
}

/* Kafka's checks before any change, in its order: leadership, a change in flight, the
 * leader's own epoch committed, kraft.version 1, the last VotersRecord committed. */
static int change_allowed(const kq_raft *r, char *why, size_t whylen)
{
    int64_t at;

    if (r->role != KQ_RAFT_LEADER || r->shutdown) {
        snprintf(why, whylen, "node %d is not the leader", r->cfg.node_id);
        return KQ_ERR_NOT_LEADER_OR_FOLLOWER;
    }
    if (r->change.active) {
        snprintf(why, whylen, "another voter change (offset %lld) is in progress",
                 (long long)r->change.offset);
        return KQ_ERR_REQUEST_TIMED_OUT;
    }
    if (r->add_wait.active) {
        snprintf(why, whylen, "another voter change (adding node %d) is in progress",
                 r->add_wait.voter.key.id);
        return KQ_ERR_REQUEST_TIMED_OUT;
    }
    if (r->hw < 0) {
        snprintf(why, whylen, "the leader has not committed its epoch %d yet", r->epoch);
        return KQ_ERR_REQUEST_TIMED_OUT;
    }
    if (!raft_voters_dynamic(r)) {
        snprintf(why, whylen,
                 "kraft.version is 0 (static voters): upgrade to kraft.version 1 first");
        return KQ_ERR_UNSUPPORTED_VERSION;
    }
    kq_voter_history_last(&r->vh, &at);
    if (at < 0) {
        snprintf(why, whylen, "the voter set is not in the log yet: try again");
        return KQ_ERR_REQUEST_TIMED_OUT;
    }
    if (at >= r->hw) {
        snprintf(why, whylen, "the last voter change (offset %lld) has not committed yet",
                 (long long)at);
        return KQ_ERR_REQUEST_TIMED_OUT;
    }
    return 0;
}

/* The observer of this leader with key k, or NULL. */
static const observer *observer_of(const kq_raft *r, const kq_voter_key *k)
{
    for (int i = 0; i < KQ_RAFT_MAX_OBSERVERS; i++) {
        const observer *o = &r->observers[i];

        if (o->used && o->id == k->id && memcmp(o->dir, k->dir, sizeof(o->dir)) == 0)
            return o;
    }
    return NULL;
}

/* An observer of this leader that has caught up since `since` (a Fetch that arrived after the
 * AddRaftVoter: stricter than Kafka's "caught up once", so that a voter does not join far
 * behind and stall commits, and a delayed request cannot add a directory that no longer
 * fetches, such as one removed and wiped after the request was sent). */
static bool caught_up(kq_raft *r, const kq_voter_key *k, uint64_t since, char *why, size_t whylen)
{
    int32_t id = k->id;
    const observer *o = observer_of(r, k);

    if (o) {
        if (o->last_caught_up_ms > since)
            return true;
        snprintf(why, whylen,
                 "node %d has not caught up with the leader (end offset %lld, leader's %lld)", id,
                 (long long)o->end_offset, (long long)r->leo);
        return false;
    }
    snprintf(why, whylen,
             "node %d with this directory id does not fetch from the leader: start it first", id);
    return false;
}

/* kraft.version 0: a static voter reports its directory id, endpoint and range for the
 * upgrade; the leader keeps them in memory (each voter sends them again periodically). */
static int record_report(kq_raft *r, const kq_voter *v, char *why, size_t whylen)
{
    kq_voter_set probe = r->voters;
    int i = kq_voters_find_id(&r->voters, v->key.id);
    int rc = kq_voters_update(&probe, v, why, whylen); /* the checks of an update */

    if (rc)
        return rc;
    r->reported[i] = *v;
    r->has_reported[i] = true;
    return 0;
}

void raft_on_voter_req(kq_raft *r, const kq_raft_msg *m)
{
    const kq_voter *v = m->u.voter_req.voter;
    kq_voter_set next = r->voters;
    char why[KQ_RAFT_VOTER_ERROR_MAX] = "";
    int rc;

    if (m->type == KQ_RAFT_UPDATE_VOTER_REQ && (m->from != v->key.id || m->epoch != r->epoch)) {
        /* a voter updates only itself, in the leader's epoch (Kafka's CurrentLeaderEpoch) */
        rc = m->from != v->key.id  ? KQ_ERR_INVALID_REQUEST
             : m->epoch < r->epoch ? KQ_ERR_FENCED_LEADER_EPOCH
                                   : KQ_ERR_UNKNOWN_LEADER_EPOCH;
        snprintf(why, sizeof(why), "%s",
                 rc == KQ_ERR_INVALID_REQUEST ? "a voter updates only its own entry"
                                              : "not the leader's epoch");
        voter_answer(r, m->type, m->from, m->token, rc, why);
        return;
    }
    if (m->type == KQ_RAFT_UPDATE_VOTER_REQ && r->role == KQ_RAFT_LEADER && !r->shutdown &&
        !raft_voters_dynamic(r)) {
        rc = record_report(r, v, why, sizeof(why));
        voter_answer(r, m->type, m->from, m->token, rc, why);
        return;
    }
    rc = change_allowed(r, why, sizeof(why));
    int16_t level = kq_voter_history_kraft_version(&r->vh);
    if (!rc && m->type != KQ_RAFT_REMOVE_VOTER_REQ &&
        (v->kraft_min > level || v->kraft_max < level)) {
        snprintf(why, sizeof(why), "node %d supports kraft.version %d..%d, not %d in force",
                 v->key.id, v->kraft_min, v->kraft_max, level);
        rc = KQ_ERR_INVALID_REQUEST;
    }

    if (!rc) {
        if (m->type == KQ_RAFT_ADD_VOTER_REQ) {
            rc = kq_voters_add(&next, v, why, sizeof(why));
            if (!rc && !observer_of(r, &v->key)) { /* answered at once */
                caught_up(r, &v->key, 0, why, sizeof(why));
                rc = KQ_ERR_REQUEST_TIMED_OUT;
            } else if (!rc) { /* wait for a Fetch from it after this request */
                r->add_wait.active = true;
                r->add_wait.token = m->token;
                r->add_wait.from = m->from;
                r->add_wait.voter = *v;
                r->add_wait.since = r->now;
                /* a live observer fetches within a request timeout, or one more when an
                 * answer was lost */
                r->add_wait.deadline = r->now + r->cfg.request_timeout_ms + r->cfg.fetch_timeout_ms;
                return;
            }
        } else if (m->type == KQ_RAFT_REMOVE_VOTER_REQ) {
            rc = kq_voters_remove(&next, &v->key, why, sizeof(why));
        } else {
            rc = kq_voters_update(&next, v, why, sizeof(why));
        }
    }
    if (!rc)
        rc = append_control(r, -1, &next, why, sizeof(why));
    if (rc || m->type == KQ_RAFT_UPDATE_VOTER_REQ) {
        voter_answer(r, m->type, m->from, m->token, rc, why);
        return;
    }
    r->change = (voter_change){.active = true,
                               .type = m->type,
                               .token = m->token,
                               .from = m->from,
                               .offset = r->leo - 1,
                               .deadline = r->now + r->cfg.request_timeout_ms};
}

void raft_pump_reconfig(kq_raft *r)
{
    int64_t at;

    if (r->role != KQ_RAFT_LEADER)
        return;
    if (r->add_wait.active) {
        char why[KQ_RAFT_VOTER_ERROR_MAX] = "";
        bool ready = caught_up(r, &r->add_wait.voter.key, r->add_wait.since, why, sizeof(why));
        if (ready || r->now >= r->add_wait.deadline) {
            kq_voter v = r->add_wait.voter;
            kq_voter_set next = r->voters;
            int rc = KQ_ERR_REQUEST_TIMED_OUT;
            r->add_wait.active = false;
            if (ready) {
                rc = change_allowed(r, why, sizeof(why));
                if (!rc)
                    rc = kq_voters_add(&next, &v, why, sizeof(why));
                if (!rc)
                    rc = append_control(r, -1, &next, why, sizeof(why));
            }
            if (rc) {
                voter_answer(r, KQ_RAFT_ADD_VOTER_REQ, r->add_wait.from, r->add_wait.token, rc,
                             why);
            } else {
                r->change = (voter_change){.active = true,
                                           .type = KQ_RAFT_ADD_VOTER_REQ,
                                           .token = r->add_wait.token,
                                           .from = r->add_wait.from,
                                           .offset = r->leo - 1,
                                           .deadline = r->now + r->cfg.request_timeout_ms};
            }
        }
    }
    if (r->change.active && r->hw > r->change.offset) {
        r->change.active = false;
        voter_answer(r, r->change.type, r->change.from, r->change.token, KQ_ERR_NONE, NULL);
    } else if (r->change.active && r->now >= r->change.deadline) {
        raft_fail_voter_change(r, KQ_ERR_REQUEST_TIMED_OUT,
                               "the voter change did not commit in time (it may still)");
    }
    /* A leader that removed itself leads until the removal commits, then hands over. */
    kq_voter_history_last(&r->vh, &at);
    if (!raft_is_voter(r) && at >= 0 && r->hw > at)
        raft_become_resigned(r);
}

/* A leader whose voter set came from the bootstrap (kq storage format, offset -1) writes it
 * into the log with its LeaderChange record, so that it is replicated and committed like any
 * later change. */
void raft_leader_start_control(kq_raft *r, kq_raft_batch *b)
{
    char why[160];
    int64_t at;

    kq_voter_history_last(&r->vh, &at);
    if (!raft_voters_dynamic(r) || at != -1)
        return;
    r->own_set = r->voters;
    r->own_control[0] = (kq_raft_control){.offset = b->base_offset + 1,
                                          .kraft_version = kq_voter_history_kraft_version(&r->vh),
                                          .voters = NULL};
    r->own_control[1] =
        (kq_raft_control){.offset = b->base_offset + 2, .kraft_version = -1, .voters = &r->own_set};
    if (raft_add_control(r, r->own_control, 2, why, sizeof(why)) != 0) {
        raft_set_fatal(r, "the bootstrap voter set cannot be written into the log");
        return;
    }
    b->count = 3;
    b->control = r->own_control;
    b->n_control = 2;
}

/* ---------------------------------------------------------------- kraft.version */

void raft_upgrade_kraft(kq_raft *r, int16_t level, bool validate_only)
{
    kq_raft_update *u = r->u;
    char *why = u->upgrade_message;
    size_t whylen = sizeof(u->upgrade_message);
    int16_t cur = kq_voter_history_kraft_version(&r->vh);
    kq_voter_set next = r->voters;

    u->upgrade_error = KQ_ERR_INVALID_UPDATE_VERSION;
    if (level < 0 || level > 1) {
        snprintf(why, whylen, "kraft.version %d is not a level this node knows (0, 1)", level);
        return;
    }
    if (level < cur) {
        snprintf(why, whylen, "kraft.version cannot go down (from %d to %d)", cur, level);
        return;
    }
    u->upgrade_error = KQ_ERR_NOT_LEADER_OR_FOLLOWER;
    if (r->role != KQ_RAFT_LEADER || r->shutdown) {
        snprintf(why, whylen, "node %d is not the leader", r->cfg.node_id);
        return;
    }
    u->upgrade_error = 0;
    if (level == cur)
        return;
    u->upgrade_error = KQ_ERR_REQUEST_TIMED_OUT;
    if (r->change.active || r->hw < 0) {
        snprintf(why, whylen, "the leader is busy (%s): try again",
                 r->change.active ? "a voter change" : "its epoch has not committed");
        return;
    }
    /* every voter's directory id and range, as each reported it (the leader's own from cfg) */
    u->upgrade_error = KQ_ERR_INVALID_UPDATE_VERSION;
    for (int i = 0; i < next.n; i++) {
        const kq_voter *v = i == r->self_idx ? &r->self_voter : &r->reported[i];
        if ((i != r->self_idx && !r->has_reported[i]) || kq_uuid_is_zero(v->key.dir) ||
            !v->host[0] || v->port <= 0) {
            snprintf(why, whylen,
                     "voter %d has not reported its directory id and endpoint (is it running, does "
                     "it know its listener and support kraft.version 1?)",
                     next.v[i].key.id);
            return;
        }
        if (v->kraft_min > 1 || v->kraft_max < 1) {
            snprintf(why, whylen, "voter %d supports kraft.version %d..%d, not 1", v->key.id,
                     v->kraft_min, v->kraft_max);
            return;
        }
        next.v[i] = *v;
    }
    u->upgrade_error = 0;
    if (validate_only)
        return;
    u->upgrade_error = append_control(r, 1, &next, why, whylen);
}

/* ---------------------------------------------------------------- UpdateRaftVoter (voter) */

/* This voter's entry in the set in force is not what it is (a directory id the set lacks,
 * another endpoint or range). */
static bool entry_stale(const kq_raft *r)
{
    const kq_voter *e = &r->voters.v[r->self_idx], *me = &r->self_voter;

    return memcmp(e->key.dir, me->key.dir, sizeof(me->key.dir)) != 0 ||
           strcmp(e->host, me->host) != 0 || e->port != me->port || e->kraft_min != me->kraft_min ||
           e->kraft_max != me->kraft_max;
}

bool raft_update_voter_due(const kq_raft *r)
{
    return r->role == KQ_RAFT_FOLLOWER && raft_is_voter(r) && !r->shutdown && r->cfg.host[0] &&
           !kq_uuid_is_zero(r->cfg.directory_id) && !r->update_inflight && r->fetched_ok &&
           entry_stale(r);
}

void raft_pump_update_voter(kq_raft *r)
{
    if (!raft_update_voter_due(r) || r->now < r->update_at)
        return;
    kq_raft_msg *m = raft_emit(r, KQ_RAFT_UPDATE_VOTER_REQ, r->leader_id);
    if (!m)
        return;
    m->u.voter_req.voter = &r->self_voter;
    r->update_inflight = true;
    r->update_at = r->now + (uint64_t)r->cfg.fetch_timeout_ms * 3; /* Kafka's period */
}

void raft_on_update_voter_resp(kq_raft *r, const kq_raft_msg *m)
{
    (void)m;
    r->update_inflight = false; /* answered or timed out: the next one goes at update_at */
}
