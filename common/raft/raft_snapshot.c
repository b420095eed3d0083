/*
 * The Raft core's snapshots: FetchSnapshot on both sides, and the snapshot taken and
 * installed events (log compaction). See raft_internal.h.
 */
#include "raft_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- FetchSnapshot (leader side) */

static void send_fetch_snapshot_error(kq_raft *r, const kq_raft_msg *m, int err)
{
    kq_raft_msg *resp = raft_emit_resp(r, m, KQ_RAFT_FETCH_SNAPSHOT_RESP, err);
    if (resp) {
        resp->u.fetch_snapshot_resp.snapshot_id = m->u.fetch_snapshot_req.snapshot_id;
        resp->u.fetch_snapshot_resp.size = -1;
        resp->u.fetch_snapshot_resp.position = m->u.fetch_snapshot_req.position;
    }
}

void raft_on_fetch_snapshot_req(kq_raft *r, const kq_raft_msg *m)
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
    int vi = raft_voter_key_index(r, m->from, m->from_dir);
    if (vi >= 0)
        raft_check_quorum_mark(r, vi); /* FetchSnapshot counts toward check-quorum (1.7) */
    else
        raft_observer_slot(r, m->from, m->from_dir)->last_fetch_ms = r->now;

    /* Any snapshot this node still has (the latest or the one before), never the bootstrap
     * id {0, 0}. */
    int k = -1;
    for (int i = 0; i < 2; i++)
        if (r->snaps[i].end_offset > 0 && raft_snap_id_eq(r->snaps[i], f->snapshot_id))
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
    kq_raft_msg *resp = raft_emit_resp(r, m, KQ_RAFT_FETCH_SNAPSHOT_RESP, KQ_ERR_NONE);
    if (resp) {
        resp->u.fetch_snapshot_resp.snapshot_id = r->snaps[k];
        resp->u.fetch_snapshot_resp.size = size;
        resp->u.fetch_snapshot_resp.position = f->position;
        resp->u.fetch_snapshot_resp.data = NULL;
        resp->u.fetch_snapshot_resp.len = (size_t)len;
    }
}

/* The leader answered SNAPSHOT: switch to FetchSnapshot (1.5, follower side). */
void raft_begin_snapshot_fetch(kq_raft *r, kq_raft_snapshot_id id, int32_t leader_epoch)
{
    if (id.end_offset <= 0 || id.epoch <= 0 || id.epoch > leader_epoch) {
        raft_fetch_backoff(r); /* malformed */
        return;
    }
    if (id.end_offset < r->committed || id.end_offset < r->hw ||
        (r->snaps[0].end_offset > 0 && id.end_offset <= r->snaps[0].end_offset &&
         id.end_offset <= r->leo)) {
        /* Never go back below what this node knows is committed or already holds: a
         * correct leader does not ask for that (our offset would have been valid). */
        raft_fetch_backoff(r);
        return;
    }
    r->snap_fetching = true;
    r->snap_fetch_id = id;
    r->snap_fetch_pos = 0;
    r->snap_fetch_size = -1;
}

void raft_on_fetch_snapshot_resp(kq_raft *r, const kq_raft_msg *m)
{
    int i = raft_peer_index(r, m->from);
    if (i < 0)
        raft_parked_answer(r, m->from, KQ_RAFT_FETCH_SNAPSHOT_REQ);
    if (i < 0 || i == r->self_idx || !r->peers[i].snap_inflight)
        return;
    r->peers[i].snap_inflight = false;
    const __typeof__(m->u.fetch_snapshot_resp) *f = &m->u.fetch_snapshot_resp;

    if (raft_is_transport_error(m->error)) {
        raft_fetch_backoff(r);
        return;
    }
    if (m->epoch > r->epoch) {
        raft_on_higher_epoch(r, m->epoch, m->leader_id); /* aborts the transfer */
        return;
    }
    if (m->epoch < r->epoch || r->role != KQ_RAFT_FOLLOWER || m->from != r->leader_id ||
        !r->snap_fetching) {
        raft_fetch_backoff(r); /* stale */
        return;
    }
    if (m->error == KQ_ERR_SNAPSHOT_NOT_FOUND || m->error == KQ_ERR_POSITION_OUT_OF_RANGE) {
        /* The leader dropped that snapshot (a newer one exists) or our position is off:
         * start over with a Fetch, which names the leader's latest snapshot. */
        raft_abort_snapshot_fetch(r);
        return;
    }
    if (m->error != KQ_ERR_NONE) {
        raft_fetch_backoff(r);
        return;
    }
    if (!raft_snap_id_eq(f->snapshot_id, r->snap_fetch_id) || f->size <= 0 ||
        (r->snap_fetch_size >= 0 && f->size != r->snap_fetch_size)) {
        raft_abort_snapshot_fetch(r); /* a different file than the one we have begun */
        return;
    }
    if (f->position != r->snap_fetch_pos || f->len == 0 || (!f->data && f->len > 0) ||
        (uint64_t)f->len > (uint64_t)(f->size - f->position)) {
        raft_fetch_backoff(r); /* ask for the same position again */
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

void raft_pump_fetch_snapshot(kq_raft *r, int t)
{
    if (r->peers[t].snap_inflight)
        return;
    kq_raft_msg *m = raft_emit(r, KQ_RAFT_FETCH_SNAPSHOT_REQ, r->peers[t].id);
    if (!m)
        return;
    m->u.fetch_snapshot_req.snapshot_id = r->snap_fetch_id;
    m->u.fetch_snapshot_req.position = r->snap_fetch_pos;
    m->u.fetch_snapshot_req.max_bytes = (int32_t)r->chunk_bytes;
    r->peers[t].snap_inflight = true;
}

/* ---------------------------------------------------------------- snapshots */

/* Move the log start up to `end` (a snapshot end whose last record has `epoch`): epoch entries
 * that end at or below it go, the one covering end - 1 is clamped to start at `end`. */
void raft_compact(kq_raft *r, int64_t end, int32_t epoch)
{
    if (end <= r->log_start)
        return;
    kq_epoch_cache_compact(&r->epochs, end);
    raft_voters_compact(r, end);
    r->log_start = end;
    r->start_epoch = epoch;
    if (r->committed < end)
        r->committed = end;
    r->u->compact_to = end;
}

static void remember_snapshot(kq_raft *r, kq_raft_snapshot_id id, int64_t size)
{
    if (raft_snap_id_eq(r->snaps[0], id)) {
        r->snap_sizes[0] = size;
        return;
    }
    r->snaps[1] = r->snaps[0];
    r->snap_sizes[1] = r->snap_sizes[0];
    r->snaps[0] = id;
    r->snap_sizes[0] = size;
}

/* SNAPSHOT_TAKEN checks, before anything changes. */
bool raft_snapshot_taken_ok(const kq_raft *r, const kq_raft_snapshot_event *e)
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
    return raft_epoch_at(r, end - 1) == e->id.epoch;
}

void raft_on_snapshot_taken(kq_raft *r, const kq_raft_snapshot_event *e)
{
    remember_snapshot(r, e->id, e->size);
    raft_compact(r, e->id.end_offset, e->id.epoch);
}

void raft_on_snapshot_installed(kq_raft *r, const kq_raft_snapshot_event *e)
{
    r->snap_installing = false;
    if (e->error == 0 && !raft_control_ok(e->control, e->n_control, -1, e->id.end_offset, true)) {
        /* the host has replaced its log by the snapshot already: nothing to go back to */
        raft_set_fatal(r, "the installed snapshot holds quorum records that are not valid");
        return;
    }
    if (e->error != 0) {
        raft_fetch_backoff(r); /* the next Fetch names the leader's latest snapshot again */
        return;
    }
    if (r->role == KQ_RAFT_LEADER) {
        raft_set_fatal(r, "a leader was asked to install a snapshot");
        return;
    }
    int64_t end = r->snap_fetch_id.end_offset;
    remember_snapshot(r, r->snap_fetch_id, r->snap_fetch_size);
    /* The whole log was replaced by the snapshot: it starts and ends at its end offset. */
    r->log_start = end;
    r->start_epoch = r->snap_fetch_id.epoch;
    r->leo = end;
    r->durable_end = end;
    r->epochs.n = 0;
    raft_add_epoch(r, r->snap_fetch_id.epoch, end);
    /* The voter sets: the snapshot's replace the log's (a bootstrap set stays below them). */
    char why[256];
    raft_voters_truncate(r, 0);
    if (raft_add_control(r, e->control, e->n_control, why, sizeof(why)) != 0) {
        raft_set_fatal(r, "the installed snapshot holds a voter set that cannot be in force");
        return;
    }
    raft_voters_compact(r, end);
    if (r->hw < end)
        r->hw = end; /* the snapshot is committed state */
    if (r->committed < end)
        r->committed = end;
    r->fetch_retry_at = 0;
}
