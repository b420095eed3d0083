/*
 * The Raft host: see kq/raft_host.h.
 */
#include "kq/raft_host.h"

#include <stdlib.h>
#include <string.h>

#include "kq/error.h"

int kq_raft_host_init(kq_raft_host *h, kq_raft *r, const kq_raft_disk *disk,
                      const kq_raft_host_ops *ops)
{
    memset(h, 0, sizeof *h);
    h->outbox = calloc(KQ_RAFT_HOST_MAX_OUTBOX, sizeof *h->outbox);
    h->outbox_dep = calloc(KQ_RAFT_HOST_MAX_OUTBOX, sizeof *h->outbox_dep);
    if (!h->outbox || !h->outbox_dep) {
        free(h->outbox);
        free(h->outbox_dep);
        return KQ_ERR_NOMEM;
    }
    h->raft = r;
    h->disk = *disk;
    h->ops = *ops;
    kq_raft_get_status(r, &h->st);
    h->hw = h->st.high_watermark;
    h->durable_end = h->st.log_end_offset;
    return 0;
}

int64_t kq_raft_host_applicable_end(const kq_raft_host *h)
{
    return h->hw < h->durable_end ? h->hw : h->durable_end;
}

int64_t kq_raft_host_outbox_reads_from(const kq_raft_host *h)
{
    int64_t from = INT64_MAX;
    for (size_t i = 0; i < h->n_outbox; i++) {
        const kq_raft_msg *m = &h->outbox[i];
        if (m->type == KQ_RAFT_FETCH_RESP && m->error == 0 &&
            m->u.fetch_resp.records_to > m->u.fetch_resp.records_from &&
            m->u.fetch_resp.records_from < from)
            from = m->u.fetch_resp.records_from;
    }
    return from;
}

void kq_raft_host_free(kq_raft_host *h)
{
    if (!h)
        return;
    free(h->outbox);
    free(h->outbox_dep);
    h->outbox = NULL;
    h->outbox_dep = NULL;
    h->n_outbox = 0;
}

static void must(kq_raft_host *h, int rc, const char *what)
{
    if (rc != 0)
        h->ops.fatal(h->ops.ctx, what, kq_err_message(rc));
}

static void apply(kq_raft_host *h, const kq_raft_update *u)
{
    kq_raft_disk *d = &h->disk;

    if (u->fatal)
        h->ops.fatal(h->ops.ctx, "raft safety violation", u->fatal_reason);
    if (u->persist_qstate)
        must(h, d->put_qstate(d->ctx, &u->qstate), "writing the quorum state");
    if (u->truncate_to >= 0) {
        must(h, d->truncate(d->ctx, u->truncate_to), "truncating the log");
        if (h->durable_end > u->truncate_to)
            h->durable_end = u->truncate_to;
        for (size_t i = 0; i < h->n_inflight; i++) /* their entries above it are gone */
            if (h->inflight[i].end > u->truncate_to)
                h->inflight[i].end = u->truncate_to;
    }
    for (size_t i = 0; i < u->n_append; i++) {
        const kq_raft_batch *b = &u->append[i];

        if (b->kind == KQ_RAFT_BATCH_FETCHED)
            must(h, d->append(d->ctx, b->base_offset, b->epoch, b->count, b->data, b->len),
                 "appending a fetched batch");
        else if (h->ops.append_own)
            h->ops.append_own(h->ops.ctx, b);
        else
            h->ops.fatal(h->ops.ctx, "internal", "an observer was asked to write its own batch");
    }
    if (u->compact_to >= 0)
        must(h, d->remove_prefix(d->ctx, u->compact_to), "removing the log below a snapshot");
    if (u->snapshot_abort)
        d->snapshot_abort(d->ctx, u->snapshot_id);
    if (u->snapshot_chunk)
        must(h,
             d->snapshot_chunk(d->ctx, u->snapshot_id, u->chunk_position, u->chunk_data,
                               u->chunk_len),
             "writing a fetched snapshot chunk");
    if (u->install_snapshot) { /* in its own transaction, after the commit (flush) */
        h->pending_install = true;
        h->install_id = u->snapshot_id;
    }
    /* This update's messages wait for its writes, or for the last batch started before. */
    uint64_t dep = h->commits_started + (d->pending(d->ctx) ? 1 : 0);
    for (size_t i = 0; i < u->n_msgs; i++) {
        if (h->n_outbox == KQ_RAFT_HOST_MAX_OUTBOX)
            h->ops.fatal(h->ops.ctx, "internal", "outbox full");
        h->outbox_dep[h->n_outbox] = dep;
        h->outbox[h->n_outbox++] = u->msgs[i];
    }
    h->hw = u->high_watermark;
    h->deadline = u->next_deadline_ms;
    kq_raft_get_status(h->raft, &h->st);
    if (h->ops.after_step)
        h->ops.after_step(h->ops.ctx, u);
}

int kq_raft_host_step(kq_raft_host *h, kq_raft_event *ev, kq_raft_update *u)
{
    kq_raft_update local;
    kq_raft_event with_control;
    kq_raft_msg m;
    kq_raft_batch batches[KQ_RAFT_MAX_BATCHES];
    int rc;

    if (!u)
        u = &local;
    ev->now_ms = h->now;
    if (ev->type == KQ_RAFT_EV_RECEIVE && h->ops.fetched_control && ev->u.msg &&
        ev->u.msg->type == KQ_RAFT_FETCH_RESP && ev->u.msg->u.fetch_resp.n_batches > 0 &&
        ev->u.msg->u.fetch_resp.n_batches <= KQ_RAFT_MAX_BATCHES &&
        ev->u.msg->u.fetch_resp.batches) {
        /* the fetched batches with their quorum records, read by the node */
        m = *ev->u.msg;
        memcpy(batches, m.u.fetch_resp.batches, m.u.fetch_resp.n_batches * sizeof batches[0]);
        m.u.fetch_resp.batches = batches;
        if (h->ops.fetched_control(h->ops.ctx, batches, m.u.fetch_resp.n_batches) != 0) {
            m.error = KQ_ERR_CORRUPT_MESSAGE; /* not a transport error: a plain retry */
            m.u.fetch_resp.batches = NULL;
            m.u.fetch_resp.n_batches = 0;
        }
        with_control = *ev;
        with_control.u.msg = &m;
        ev = &with_control;
    }
    if ((rc = kq_raft_step(h->raft, ev, u)) != 0)
        return rc;
    apply(h, u);
    return 0;
}

static void send(kq_raft_host *h, const kq_raft_msg *m)
{
    if (kq_raft_msg_is_request(m->type)) {
        if (h->ops.send_request(h->ops.ctx, m) != 0)
            h->ops.fatal(h->ops.ctx, "sending", "a Raft request could not even be failed");
    } else if (h->ops.send_response) {
        h->ops.send_response(h->ops.ctx, m);
    }
}

void kq_raft_host_send_fetch_answers(kq_raft_host *h)
{
    size_t keep = 0;

    if (h->st.role != KQ_RAFT_LEADER)
        return;
    for (size_t i = 0; i < h->n_outbox; i++) {
        kq_raft_msg m = h->outbox[i];

        if (m.type == KQ_RAFT_FETCH_RESP) {
            send(h, &m);
        } else {
            h->outbox_dep[keep] = h->outbox_dep[i];
            h->outbox[keep++] = m;
        }
    }
    h->n_outbox = keep;
}

/* Batch seq is durable, and the log below end with it. */
static void durable(kq_raft_host *h, uint64_t seq, int64_t end)
{
    kq_raft_event ev = {.type = KQ_RAFT_EV_PERSISTED};

    h->commits_durable = seq;
    h->durable_end = end;
    if (h->ops.persisted)
        h->ops.persisted(h->ops.ctx, h->durable_end);
    ev.u.persisted_end = h->durable_end;
    kq_raft_host_step(h, &ev, NULL);
}

void kq_raft_host_commit(kq_raft_host *h)
{
    while (h->disk.pending(h->disk.ctx)) {
        if (h->disk.commit_start && h->n_inflight == KQ_RAFT_HOST_MAX_INFLIGHT)
            return; /* the batch stays open until a sync finishes */
        uint64_t seq = ++h->commits_started;

        if (h->disk.commit_start) {
            must(h, h->disk.commit_start(h->disk.ctx, seq), "committing the log");
            h->inflight[h->n_inflight++] =
                (kq_raft_host_commit_inflight){seq, h->st.log_end_offset};
            return; /* kq_raft_host_durable follows */
        }
        must(h, h->disk.commit(h->disk.ctx), "committing the log (fsync)");
        durable(h, seq, h->st.log_end_offset);
    }
}

void kq_raft_host_durable(kq_raft_host *h, uint64_t seq)
{
    size_t k = 0; /* batches up to seq: one PERSISTED, with the end of the last of them */

    while (k < h->n_inflight && h->inflight[k].seq <= seq)
        k++;
    if (k == 0)
        return;
    kq_raft_host_commit_inflight c = h->inflight[k - 1];
    memmove(h->inflight, h->inflight + k, (h->n_inflight - k) * sizeof h->inflight[0]);
    h->n_inflight -= k;
    durable(h, c.seq, c.end);
}
/* Everything written is durable (an asynchronous disk may still be syncing). */
static bool all_durable(kq_raft_host *h)
{
    return !h->disk.pending(h->disk.ctx) && h->n_inflight == 0;
}

/* The install of h->install_id finished with rc: the log is the snapshot's (rc 0), and the
 * core hears SNAPSHOT_INSTALLED. Returns the core's answer to it. */
static int finish_install(kq_raft_host *h, int rc)
{
    kq_raft_event ev = {.type = KQ_RAFT_EV_SNAPSHOT_INSTALLED};

    h->installing = false;
    if (rc != 0 && rc != KQ_ERR_CORRUPT_MESSAGE)
        h->ops.fatal(h->ops.ctx, "installing a fetched snapshot", kq_err_message(rc));
    if (rc == 0) {
        h->durable_end = h->install_id.end_offset;
        /* batches written during a background install (quorum state only) end there too */
        for (size_t i = 0; i < h->n_inflight; i++)
            if (h->inflight[i].end < h->durable_end)
                h->inflight[i].end = h->durable_end;
    }
    ev.u.snapshot.id = h->install_id;
    ev.u.snapshot.error = rc;
    if (rc == 0 && h->ops.installed_control)
        ev.u.snapshot.n_control = h->ops.installed_control(h->ops.ctx, &ev.u.snapshot.control);
    return kq_raft_host_step(h, &ev, NULL);
}

int kq_raft_host_installed(kq_raft_host *h, int rc)
{
    if (!h->installing)
        return KQ_ERR_INVALID_REQUEST; /* no background install in progress */
    return finish_install(h, rc);
}

static void install(kq_raft_host *h)
{
    char err[512] = "";
    int rc;

    h->pending_install = false;
    if (!h->ops.install_snapshot)
        h->ops.fatal(h->ops.ctx, "internal", "no way to install a fetched snapshot");
    rc = h->ops.install_snapshot(h->ops.ctx, h->install_id, err, sizeof err);
    if (rc == KQ_RAFT_HOST_LATER) {
        h->installing = true;
        return;
    }
    if (rc != 0 && rc != KQ_ERR_CORRUPT_MESSAGE)
        h->ops.fatal(h->ops.ctx, "installing a fetched snapshot", err);
    finish_install(h, rc);
}

void kq_raft_host_flush(kq_raft_host *h)
{
    for (int round = 0; round < 8; round++) {
        size_t n, keep = 0;
        bool progress = false;

        kq_raft_host_commit(h);
        /* Only the messages queued so far, and only those whose writes are durable: the
         * install below and the sends may step the core, which may queue more that depend on
         * writes not committed yet; they go in a later round, after their commit. */
        n = h->n_outbox;
        if (h->pending_install && all_durable(h)) {
            install(h); /* after the writes before it are durable */
            progress = true;
        }
        for (size_t i = 0; i < n; i++) {
            kq_raft_msg m = h->outbox[i];

            if (h->outbox_dep[i] <= h->commits_durable) {
                send(h, &m);
                progress = true;
            } else {
                h->outbox_dep[keep] = h->outbox_dep[i];
                h->outbox[keep++] = m;
            }
        }
        memmove(h->outbox + keep, h->outbox + n, (h->n_outbox - n) * sizeof h->outbox[0]);
        memmove(h->outbox_dep + keep, h->outbox_dep + n,
                (h->n_outbox - n) * sizeof h->outbox_dep[0]);
        h->n_outbox = keep + (h->n_outbox - n);
        if (!progress && !h->disk.pending(h->disk.ctx))
            break; /* what is left waits for an asynchronous commit */
        if (h->n_outbox == 0 && !h->disk.pending(h->disk.ctx) && !h->pending_install)
            break;
    }
}
