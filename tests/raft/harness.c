/* Scripted harness for the pure Raft core; see harness.h. */
#include "harness.h"
#include "kq/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what)
{
    fprintf(stderr, "harness: %s\n", what);
    abort();
}

static bool snap_id_same(kq_raft_snapshot_id a, kq_raft_snapshot_id b)
{
    return a.end_offset == b.end_offset && a.epoch == b.epoch;
}

h_node *h_node_of(harness *h, int32_t id)
{
    if (id < 1 || id > h->n)
        die("unknown node id");
    return &h->nodes[id - 1];
}

static const h_node *cnode(const harness *h, int32_t id)
{
    if (id < 1 || id > h->n)
        die("unknown node id");
    return &h->nodes[id - 1];
}

void h_init(harness *h, int n_voters, int n_observers, uint64_t seed)
{
    memset(h, 0, sizeof(*h));
    if (n_voters + n_observers > H_MAX_NODES || n_voters < 1)
        die("bad cluster size");
    h->n = n_voters + n_observers;
    h->n_voters = n_voters;
    h->now = 1000;
    h->next_payload = 1;
    h->max_fetch_batches = 8;
    for (int i = 0; i < h->n; i++) {
        h_node *nd = &h->nodes[i];
        nd->id = i + 1;
        nd->owner = h;
        nd->voter = i < n_voters;
        kq_raft_config_defaults(&nd->cfg);
        nd->cfg.node_id = nd->id;
        nd->cfg.n_voters = n_voters;
        for (int v = 0; v < n_voters; v++)
            nd->cfg.voters[v] = v + 1;
        nd->cfg.seed = seed * 1000003u + (uint64_t)nd->id;
        nd->qs.epoch = 0;
        nd->qs.voted_id = -1;
        nd->qs.leader_id = -1;
        nd->hw = -1;
        nd->max_hw = -1;
    }
}

void h_free(harness *h)
{
    for (int i = 0; i < h->n; i++) {
        if (h->nodes[i].r)
            kq_raft_host_free(&h->nodes[i].host);
        kq_raft_free(h->nodes[i].r);
        free(h->nodes[i].log);
        free(h->nodes[i].snap_bytes);
        free(h->nodes[i].part);
    }
    free(h->q);
    for (size_t i = 0; i < h->n_ctl; i++)
        free(h->ctl[i]);
    free(h->ctl);
    free(h->installed);
    memset(h, 0, sizeof(*h));
}

static int64_t log_end(const h_node *nd)
{
    if (nd->n_log == 0)
        return nd->log_start;
    const h_batch *b = &nd->log[nd->n_log - 1];
    return b->base + b->count;
}

/* A new batch at the end of the node's log (fields for the caller to fill). */
static h_batch *log_push(h_node *nd)
{
    if (nd->n_log == nd->cap_log) {
        size_t cap = nd->cap_log ? nd->cap_log * 2 : 64;
        h_batch *l = realloc(nd->log, cap * sizeof(*l));
        if (!l)
            die("out of memory");
        nd->log = l;
        nd->cap_log = cap;
    }
    return &nd->log[nd->n_log++];
}

/* ------------------------------------------------------------ queue */

static h_qmsg *q_push(harness *h, const kq_raft_msg *m, uint64_t at)
{
    if (h->nq == h->capq) {
        size_t cap = h->capq ? h->capq * 2 : 64;
        h_qmsg *q = realloc(h->q, cap * sizeof(*q));
        if (!q)
            die("out of memory");
        h->q = q;
        h->capq = cap;
    }
    h_qmsg *e = &h->q[h->nq++];
    memset(e, 0, sizeof(*e));
    e->m = *m;
    if (m->type == KQ_RAFT_FETCH_RESP) {
        e->m.u.fetch_resp.batches = NULL; /* refilled from e->batches at delivery */
        e->m.u.fetch_resp.n_batches = 0;
    }
    if (kq_raft_msg_is_voter_change(m->type) && m->u.voter_req.voter) {
        e->voter = *m->u.voter_req.voter; /* pointed at again at delivery */
        e->m.u.voter_req.voter = NULL;
    }
    e->deliver_at = at;
    return e;
}

static void q_remove(harness *h, size_t idx)
{
    memmove(&h->q[idx], &h->q[idx + 1], (h->nq - idx - 1) * sizeof(h->q[0]));
    h->nq--;
}

static void queue_timeout(harness *h, int32_t requester, int32_t responder, kq_raft_msg_type req,
                          uint64_t at)
{
    kq_raft_msg t;
    memset(&t, 0, sizeof(t));
    t.type = (kq_raft_msg_type)(req + 1);
    t.from = responder;
    t.to = requester;
    t.error = KQ_ERR_REQUEST_TIMED_OUT;
    t.epoch = 0;
    t.leader_id = -1;
    t.u.fetch_resp.high_watermark = -1;
    q_push(h, &t, at);
}

static h_outstanding *out_find(harness *h, uint64_t token)
{
    for (int i = 0; i < H_MAX_OUTSTANDING; i++)
        if (h->out[i].used && h->out[i].token == token)
            return &h->out[i];
    return NULL;
}

static void out_add(harness *h, uint64_t token, const kq_raft_msg *req, int32_t alias)
{
    for (int i = 0; i < H_MAX_OUTSTANDING; i++) {
        if (!h->out[i].used) {
            h->out[i].used = true;
            h->out[i].alias = alias;
            h->out[i].token = token;
            h->out[i].requester = req->from;
            h->out[i].responder = req->to;
            h->out[i].type = req->type;
            h->out[i].sent_at = h->now;
            return;
        }
    }
    die("too many outstanding requests");
}

/* ------------------------------------------------------------ quorum records */

const h_control *h_control_of(const harness *h, uint64_t payload)
{
    for (size_t i = 0; i < h->n_ctl; i++)
        if (h->ctl[i]->payload == payload)
            return h->ctl[i];
    return NULL;
}

/* Keep a copy of batch b's quorum records under `payload`. */
static void control_keep(harness *h, uint64_t payload, const kq_raft_batch *b)
{
    h_control *c = calloc(1, sizeof(*c));
    if (!c || b->n_control > 2)
        die("cannot keep a batch's quorum records");
    if (h->n_ctl == h->cap_ctl) {
        size_t cap = h->cap_ctl ? h->cap_ctl * 2 : 16;
        h_control **l = realloc(h->ctl, cap * sizeof(*l));
        if (!l)
            die("out of memory");
        h->ctl = l;
        h->cap_ctl = cap;
    }
    c->payload = payload;
    c->n = b->n_control;
    for (size_t i = 0; i < c->n; i++) {
        c->c[i] = b->control[i];
        if (b->control[i].voters) {
            c->set = *b->control[i].voters;
            c->c[i].voters = &c->set;
        }
    }
    h->ctl[h->n_ctl++] = c;
}

/* Append to out (grown) the quorum records of the batches below `end` whose payload ids are in
 * ids[0..n). */
static void control_collect(const harness *h, const uint64_t *ids, size_t n, kq_raft_control **out,
                            size_t *n_out)
{
    for (size_t i = 0; i < n; i++) {
        const h_control *c = h_control_of(h, ids[i]);
        if (!c)
            continue;
        kq_raft_control *l = realloc(*out, (*n_out + c->n) * sizeof(*l));
        if (!l)
            die("out of memory");
        *out = l;
        for (size_t k = 0; k < c->n; k++)
            l[(*n_out)++] = c->c[k];
    }
}

/* What a node holds: at start the bootstrap's, its snapshot's and its log's; for an install its
 * snapshot's only (caller frees *out). */
static size_t node_control(const harness *h, const h_node *nd, bool at_start, kq_raft_control **out)
{
    size_t n = 0;
    *out = NULL;
    if (h->dynamic && at_start && !nd->no_initial) {
        *out = malloc(sizeof(**out));
        if (!*out)
            die("out of memory");
        (*out)[n++] = h->boot_ctl;
    }
    control_collect(h, (const uint64_t *)nd->snap_bytes, nd->snap_len / sizeof(uint64_t), out, &n);
    for (size_t i = 0; at_start && i < nd->n_log; i++)
        control_collect(h, &nd->log[i].payload, 1, out, &n);
    return n;
}

kq_voter h_voter(int32_t id)
{
    kq_voter v;
    memset(&v, 0, sizeof(v));
    v.key.id = id;
    memset(v.key.dir, 0x11 * id, sizeof(v.key.dir));
    snprintf(v.host, sizeof(v.host), "n%d", id);
    v.port = 9000 + id;
    v.kraft_max = 1;
    return v;
}

void h_bootstrap_dynamic(harness *h)
{
    h->dynamic = true;
    memset(&h->boot, 0, sizeof(h->boot));
    for (int i = 0; i < h->n; i++) {
        h_node *nd = &h->nodes[i];
        memset(nd->cfg.directory_id, 0x11 * nd->id, sizeof(nd->cfg.directory_id));
        if (nd->voter)
            h->boot.v[h->boot.n++] = h_voter(nd->id);
    }
    h->boot_ctl = (kq_raft_control){.offset = -1, .kraft_version = 1, .voters = &h->boot};
}

const kq_voter_set *h_voters(const harness *h, int32_t id)
{
    return kq_raft_voters(h->nodes[id - 1].r, NULL);
}

int h_voter_req(harness *h, int32_t leader, int32_t from, kq_raft_msg_type type, const kq_voter *v)
{
    kq_raft_msg m;
    memset(&m, 0, sizeof(m));
    m.type = type;
    m.from = from;
    m.epoch = h_epoch(h, leader);
    m.leader_id = -1;
    m.u.voter_req.voter = v;
    return h_inject(h, leader, &m);
}

/* ------------------------------------------------------------ host */

static void fill_fetch_resp(harness *h, const h_node *leader, h_qmsg *e)
{
    int64_t from = e->m.u.fetch_resp.records_from, to = e->m.u.fetch_resp.records_to;
    e->n_batches = 0;
    if (e->m.error != KQ_ERR_NONE || from >= to)
        return;
    for (size_t i = 0; i < leader->n_log && e->n_batches < h->max_fetch_batches; i++) {
        const h_batch *b = &leader->log[i];
        if (b->base + b->count <= from)
            continue;
        if (b->base >= to)
            break;
        /* an offset inside a batch gets the whole batch, as a log read would */
        kq_raft_batch *k = &e->batches[e->n_batches];
        e->payloads[e->n_batches] = b->payload;
        k->base_offset = b->base;
        k->epoch = b->epoch;
        k->count = b->count;
        k->kind = KQ_RAFT_BATCH_FETCHED;
        k->len = sizeof(uint64_t);
        const h_control *c = h_control_of(h, b->payload);
        k->control = c ? c->c : NULL;
        k->n_control = c ? c->n : 0;
        e->n_batches++;
    }
}

static void fill_snapshot_resp(const h_node *leader, h_qmsg *e)
{
    const __typeof__(e->m.u.fetch_snapshot_resp) *f = &e->m.u.fetch_snapshot_resp;
    if (e->m.error != KQ_ERR_NONE)
        return;
    if (!snap_id_same(f->snapshot_id, leader->snap) || f->len > H_MAX_CHUNK ||
        f->position + (int64_t)f->len > (int64_t)leader->snap_len)
        die("leader core asked for snapshot bytes its host does not have");
    memcpy(e->chunk, leader->snap_bytes + f->position, f->len);
}

static void apply_compaction(h_node *nd, int64_t to)
{
    size_t k = 0;
    int32_t ep = nd->log_start_epoch;
    while (k < nd->n_log && nd->log[k].base + nd->log[k].count <= to) {
        ep = nd->log[k].epoch;
        k++;
    }
    if (k < nd->n_log && nd->log[k].base < to)
        die("core asked to compact inside a batch");
    memmove(nd->log, nd->log + k, (nd->n_log - k) * sizeof(*nd->log));
    nd->n_log -= k;
    nd->n_durable = nd->n_durable > k ? nd->n_durable - k : 0;
    if (to > nd->log_start) {
        nd->log_start = to;
        nd->log_start_epoch = ep;
    }
    nd->compactions++;
}

/* ------------------------------------------------------------ host: the production Raft host */

/* Each node's host is kq_raft_host (kq/raft_host.h) over this in-memory disk, asynchronous:
 * a batch becomes durable when the harness says so (at once, or with h_persist when
 * hold_persist is set), and what the host sends goes onto the queue. The disk counts what a
 * store would refuse (appends that do not continue the log, truncations inside a batch)
 * instead of stopping, so tests can assert the core never asks for them. */

static int disk_put_qstate(void *ctx, const kq_raft_qstate *qs)
{
    h_node *nd = ctx;
    nd->qs = *qs;
    nd->n_qstate_writes++;
    nd->open = true;
    return 0;
}

static int disk_truncate(void *ctx, int64_t end)
{
    h_node *nd = ctx;
    /* The store (kq_store_truncate) rejects a truncation inside a batch: count it (the
     * harness still splits the batch so the core and the log stay comparable). */
    while (nd->n_log > 0 && nd->log[nd->n_log - 1].base >= end)
        nd->n_log--;
    if (nd->n_log > 0 && log_end(nd) > end) {
        nd->truncate_errors++;
        nd->log[nd->n_log - 1].count = (int32_t)(end - nd->log[nd->n_log - 1].base);
    }
    if (nd->n_durable > nd->n_log)
        nd->n_durable = nd->n_log;
    nd->open = true;
    return 0;
}

/* Records are one payload id (8 bytes): the harness's own for this node's batches. */
static int disk_append(void *ctx, int64_t base, int32_t epoch, int32_t count, const uint8_t *data,
                       size_t len)
{
    h_node *nd = ctx;
    if (base != log_end(nd) || count <= 0) {
        nd->append_errors++;
        return 0;
    }
    if (!data || len != sizeof(uint64_t))
        die("fetched batch without its payload");
    h_batch *x = log_push(nd);
    x->base = base;
    x->epoch = epoch;
    x->count = count;
    memcpy(&x->payload, data, sizeof(uint64_t));
    nd->open = true;
    return 0;
}

static int disk_remove_prefix(void *ctx, int64_t to)
{
    apply_compaction(ctx, to);
    return 0;
}

static int disk_snapshot_chunk(void *ctx, kq_raft_snapshot_id id, int64_t pos, const uint8_t *data,
                               size_t len)
{
    h_node *nd = ctx;
    if (pos == 0) {
        free(nd->part);
        nd->part = NULL;
        nd->part_len = 0;
        nd->part_id = id;
    }
    if (pos != (int64_t)nd->part_len || !snap_id_same(id, nd->part_id)) {
        nd->chunk_errors++;
        return 0;
    }
    uint8_t *p = realloc(nd->part, nd->part_len + len + 1);
    if (!p)
        die("out of memory");
    memcpy(p + nd->part_len, data, len);
    nd->part = p;
    nd->part_len += len;
    nd->chunks_written++;
    return 0;
}

static void disk_snapshot_abort(void *ctx, kq_raft_snapshot_id id)
{
    h_node *nd = ctx;
    (void)id;
    free(nd->part);
    nd->part = NULL;
    nd->part_len = 0;
    nd->aborts++;
}

static bool disk_pending(void *ctx)
{
    return ((h_node *)ctx)->open;
}

static int disk_commit(void *ctx)
{
    (void)ctx;
    die("synchronous commit on the harness's asynchronous disk");
    return KQ_ERR_INTERNAL;
}

static int disk_commit_start(void *ctx, uint64_t seq)
{
    h_node *nd = ctx;
    nd->open = false;
    nd->commit_started = seq;
    nd->n_log_started = nd->n_log; /* what this batch makes crash-safe */
    return 0;
}

/* The fetched snapshot replaces the log (or, damaged, is dropped). hold_install: it finishes
 * when the test calls h_finish_install. */
static int host_install(void *ctx, kq_raft_snapshot_id id, char *err, size_t errlen)
{
    h_node *nd = ctx;
    int rc = 0;
    (void)err, (void)errlen;
    if ((int64_t)nd->part_len != nd->part_size || nd->corrupt_next_install) {
        nd->corrupt_next_install = false;
        nd->install_failures++;
        free(nd->part);
        nd->part = NULL;
        nd->part_len = 0;
        rc = KQ_ERR_CORRUPT_MESSAGE;
    } else {
        free(nd->snap_bytes);
        nd->snap_bytes = nd->part;
        nd->snap_len = nd->part_len;
        nd->snap = id;
        nd->part = NULL;
        nd->part_len = 0;
        nd->n_log = 0;
        nd->n_durable = 0;
        nd->n_log_started = 0;
        nd->log_start = id.end_offset;
        nd->log_start_epoch = id.epoch;
        nd->installs++;
    }
    if (nd->hold_install) {
        nd->install_pending = true;
        nd->pending_id = id;
        nd->pending_err = rc;
        return KQ_RAFT_HOST_LATER;
    }
    return rc;
}

static size_t host_installed_control(void *ctx, const kq_raft_control **out)
{
    h_node *nd = ctx;
    harness *h = nd->owner;
    free(h->installed);
    h->n_installed = node_control(h, nd, false, &h->installed);
    *out = h->installed;
    return h->n_installed;
}

static void host_append_own(void *ctx, const kq_raft_batch *b)
{
    h_node *nd = ctx;
    uint64_t payload = b->kind == KQ_RAFT_BATCH_LEADER_CHANGE && !b->n_control
                           ? H_LEADER_CHANGE_PAYLOAD | (uint32_t)b->epoch
                           : nd->owner->next_payload++;
    if (b->n_control)
        control_keep(nd->owner, payload, b);
    nd->host.disk.append(nd->host.disk.ctx, b->base_offset, b->epoch, b->count,
                         (const uint8_t *)&payload, sizeof payload);
}

static int host_send_request(void *ctx, const kq_raft_msg *m)
{
    h_node *nd = ctx;
    nd->sent[m->type]++;
    q_push(nd->owner, m, nd->owner->now);
    return 0;
}

static void host_send_response(void *ctx, const kq_raft_msg *m)
{
    h_node *nd = ctx;
    harness *h = nd->owner;
    nd->sent[m->type]++;
    if ((m->type == KQ_RAFT_ADD_VOTER_RESP || m->type == KQ_RAFT_REMOVE_VOTER_RESP ||
         m->type == KQ_RAFT_UPDATE_VOTER_RESP) &&
        h->n_answers < H_MAX_ANSWERS)
        h->answers[h->n_answers++] = *m;
    h_outstanding *o = out_find(h, m->token);
    if (!o)
        return; /* already timed out: the host drops a late answer */
    o->used = false;
    kq_raft_msg as = *m;
    if (o->alias)
        as.from = o->alias; /* answered as the bootstrap server the requester named */
    h_qmsg *e = q_push(h, &as, h->now);
    if (m->type == KQ_RAFT_FETCH_RESP)
        fill_fetch_resp(h, nd, e);
    if (m->type == KQ_RAFT_FETCH_SNAPSHOT_RESP)
        fill_snapshot_resp(nd, e);
}

/* After every step: the update a test sees (h_last) is the one of the event it stepped, with
 * what the host stepped on its own for it (PERSISTED, SNAPSHOT_INSTALLED) folded in. */
static void host_after_step(void *ctx, const kq_raft_update *u)
{
    h_node *nd = ctx;
    if (nd->merging) {
        size_t room = KQ_RAFT_MAX_MSGS - nd->last.n_msgs;
        size_t n = u->n_msgs < room ? u->n_msgs : room;
        memcpy(nd->last_msgs + nd->last.n_msgs, u->msgs, n * sizeof(kq_raft_msg));
        nd->last.n_msgs += n;
        if (u->hw_changed)
            nd->last.hw_changed = true;
        if (u->install_snapshot || u->snapshot_chunk || u->snapshot_abort || u->compact_to >= 0) {
            nd->last.install_snapshot |= u->install_snapshot;
            nd->last.snapshot_chunk |= u->snapshot_chunk;
            nd->last.snapshot_abort |= u->snapshot_abort;
            if (u->compact_to >= 0)
                nd->last.compact_to = u->compact_to;
        }
        nd->last.high_watermark = u->high_watermark;
        nd->last.next_deadline_ms = u->next_deadline_ms;
        if (u->fatal) {
            nd->last.fatal = true;
            nd->last.fatal_reason = u->fatal_reason;
        }
    } else {
        nd->last = *u;
        memcpy(nd->last_msgs, u->msgs, u->n_msgs * sizeof(kq_raft_msg));
        nd->last.msgs = nd->last_msgs;
    }
    if (u->install_snapshot)
        nd->part_size = u->snapshot_size;
    if (u->hw_changed) {
        nd->hw = u->high_watermark;
        if (nd->hw > nd->max_hw)
            nd->max_hw = nd->hw;
    }
    nd->deadline = u->next_deadline_ms;
}

static void host_fatal(void *ctx, const char *what, const char *detail)
{
    h_node *nd = ctx;
    (void)what;
    nd->fatal = true;
    nd->fatal_reason = detail;
}

/* What the host does after an event: the leader's Fetch answers, commit, the durable report
 * (unless held), the sends; all of it folded into the event's update. */
static void host_settle(h_node *nd)
{
    bool was = nd->merging;
    nd->merging = true;
    for (int round = 0; round < 8 && !nd->fatal; round++) {
        kq_raft_host_send_fetch_answers(&nd->host);
        kq_raft_host_flush(&nd->host);
        if (nd->hold_persist || nd->fatal || nd->commit_started <= nd->host.commits_durable)
            break;
        nd->n_durable = nd->n_log_started < nd->n_log ? nd->n_log_started : nd->n_log;
        kq_raft_host_durable(&nd->host, nd->commit_started);
        if (round == 7) { /* send what the last PERSISTED released */
            kq_raft_host_send_fetch_answers(&nd->host);
            kq_raft_host_flush(&nd->host);
        }
    }
    nd->merging = was;
}

static void host_open(h_node *nd)
{
    kq_raft_disk disk = {.ctx = nd,
                         .put_qstate = disk_put_qstate,
                         .truncate = disk_truncate,
                         .append = disk_append,
                         .remove_prefix = disk_remove_prefix,
                         .snapshot_chunk = disk_snapshot_chunk,
                         .snapshot_abort = disk_snapshot_abort,
                         .pending = disk_pending,
                         .commit = disk_commit,
                         .commit_start = disk_commit_start};
    kq_raft_host_ops ops = {.ctx = nd,
                            .send_request = host_send_request,
                            .send_response = host_send_response,
                            .append_own = host_append_own,
                            .after_step = host_after_step,
                            .install_snapshot = host_install,
                            .installed_control = host_installed_control,
                            .fatal = host_fatal};
    if (kq_raft_host_init(&nd->host, nd->r, &disk, &ops) != 0)
        die("out of memory");
    nd->host.durable_end = log_end(nd);
    nd->open = false;
    nd->commit_started = 0;
    nd->n_log_started = nd->n_log;
}

int h_step(harness *h, int32_t id, kq_raft_event *ev)
{
    h_node *nd = h_node_of(h, id);
    if (!nd->up || nd->fatal)
        return 0;
    kq_raft_update u;
    nd->host.now = h->now;
    nd->merging = false;
    int rc = kq_raft_host_step(&nd->host, ev, &u);
    if (rc) {
        nd->step_errors++;
        nd->last = u; /* what the core answered the rejected event with */
        nd->last.msgs = nd->last_msgs;
        nd->last.n_msgs = 0;
        return rc;
    }
    if (u.fatal)
        return 0;
    host_settle(nd);
    return 0;
}

int h_persist(harness *h, int32_t id)
{
    h_node *nd = h_node_of(h, id);
    if (!nd->up || nd->fatal)
        return 0;
    nd->host.now = h->now;
    kq_raft_host_commit(&nd->host); /* the open batch too */
    nd->n_durable = nd->n_log_started < nd->n_log ? nd->n_log_started : nd->n_log;
    if (nd->commit_started > nd->host.commits_durable) {
        nd->merging = false;
        kq_raft_host_durable(&nd->host, nd->commit_started);
    } else {
        nd->merging = false; /* nothing to sync: the core hears PERSISTED anyway, as before */
        kq_raft_event ev = {.type = KQ_RAFT_EV_PERSISTED};
        ev.u.persisted_end = log_end(nd);
        kq_raft_host_step(&nd->host, &ev, NULL);
    }
    host_settle(nd);
    return 0;
}

int h_tick(harness *h, int32_t id)
{
    kq_raft_event ev = {.type = KQ_RAFT_EV_TICK};
    return h_step(h, id, &ev);
}

int h_propose(harness *h, int32_t id, int32_t count)
{
    kq_raft_event ev = {.type = KQ_RAFT_EV_PROPOSE};
    ev.u.propose_count = count;
    return h_step(h, id, &ev);
}

int h_resign(harness *h, int32_t id)
{
    kq_raft_event ev = {.type = KQ_RAFT_EV_RESIGN};
    return h_step(h, id, &ev);
}

void h_start(harness *h, int32_t id)
{
    h_node *nd = h_node_of(h, id);
    char err[128];
    if (nd->r)
        kq_raft_host_free(&nd->host);
    kq_raft_free(nd->r);
    nd->r = kq_raft_new(&nd->cfg, err, sizeof(err));
    if (!nd->r)
        die(err);
    host_open(nd);
    nd->up = true;
    nd->fatal = false;
    nd->hw = -1;
    /* rebuild the epoch cache from the log, as a store would */
    kq_epoch_entry epochs[256];
    size_t ne = 0;
    for (size_t i = 0; i < nd->n_log; i++) {
        if (ne == 0 || epochs[ne - 1].epoch != nd->log[i].epoch) {
            if (ne == 256)
                die("too many epochs");
            epochs[ne].epoch = nd->log[i].epoch;
            epochs[ne].start_offset = nd->log[i].base;
            ne++;
        }
    }
    kq_raft_event ev = {.type = KQ_RAFT_EV_START};
    ev.u.start.qstate = nd->qs;
    ev.u.start.log_start_offset = nd->log_start;
    ev.u.start.log_start_epoch = nd->log_start_epoch;
    ev.u.start.snapshot = nd->snap;
    ev.u.start.snapshot_size = (int64_t)nd->snap_len;
    ev.u.start.log_end_offset = log_end(nd);
    ev.u.start.epochs = epochs;
    ev.u.start.n_epochs = ne;
    kq_raft_control *ctl;
    ev.u.start.n_control = node_control(h, nd, true, &ctl);
    ev.u.start.control = ctl;
    h_step(h, id, &ev);
    free(ctl);
}

void h_start_all(harness *h)
{
    for (int i = 0; i < h->n; i++)
        h_start(h, i + 1);
}

void h_crash(harness *h, int32_t id)
{
    h_node *nd = h_node_of(h, id);
    nd->up = false;
    if (nd->r)
        kq_raft_host_free(&nd->host);
    kq_raft_free(nd->r);
    nd->r = NULL;
    nd->open = false;
    nd->commit_started = 0;
    nd->install_pending = false;
    nd->n_log = nd->n_durable;
    free(nd->part); /* a .part never survives: the store removes it at open */
    nd->part = NULL;
    nd->part_len = 0;
    for (size_t i = h->nq; i > 0; i--) {
        kq_raft_msg m = h->q[i - 1].m;
        if (m.to != id)
            continue;
        q_remove(h, i - 1); /* lost with the process */
        if (kq_raft_msg_is_request(m.type) && m.from != id)
            queue_timeout(h, m.from, id, m.type, h->now + H_REQUEST_TIMEOUT_MS);
    }
    for (int i = 0; i < H_MAX_OUTSTANDING; i++) {
        h_outstanding *o = &h->out[i];
        if (o->used && o->responder == id) {
            o->used = false;
            queue_timeout(h, o->requester, id, o->type, h->now);
        } else if (o->used && o->requester == id) {
            o->used = false; /* its connection is gone: a late answer goes nowhere */
        }
    }
}

void h_wipe(harness *h, int32_t id)
{
    h_crash(h, id);
    h_node *nd = h_node_of(h, id);
    nd->n_log = 0;
    nd->n_durable = 0;
    nd->qs.epoch = 0;
    nd->qs.voted_id = -1;
    nd->qs.leader_id = -1;
    memset(nd->qs.voted_dir, 0, sizeof(nd->qs.voted_dir));
    nd->log_start = 0;
    nd->log_start_epoch = 0;
    memset(&nd->snap, 0, sizeof(nd->snap));
    free(nd->snap_bytes);
    nd->snap_bytes = NULL;
    nd->snap_len = 0;
    nd->max_hw = -1;
}

uint8_t *h_image(const harness *h, int32_t id, int64_t end, size_t *len)
{
    const h_node *nd = cnode(h, id);
    if (end < nd->log_start)
        return NULL;
    size_t n = nd->snap_len;
    for (size_t i = 0; i < nd->n_log && nd->log[i].base < end; i++)
        n += sizeof(uint64_t);
    uint8_t *p = malloc(n + 1);
    if (!p)
        die("out of memory");
    if (nd->snap_len)
        memcpy(p, nd->snap_bytes, nd->snap_len);
    size_t k = nd->snap_len;
    for (size_t i = 0; i < nd->n_log && nd->log[i].base < end; i++) {
        if (nd->log[i].base + nd->log[i].count > end) {
            free(p);
            return NULL; /* not a batch boundary */
        }
        memcpy(p + k, &nd->log[i].payload, sizeof(uint64_t));
        k += sizeof(uint64_t);
    }
    *len = k;
    return p;
}

int h_take_snapshot(harness *h, int32_t id, int64_t end)
{
    h_node *nd = h_node_of(h, id);
    size_t len = 0;
    uint8_t *img = h_image(h, id, end, &len);
    int32_t epoch = nd->log_start_epoch;
    for (size_t i = 0; i < nd->n_log && nd->log[i].base < end; i++)
        epoch = nd->log[i].epoch;
    if (!img)
        return KQ_ERR_INVALID_REQUEST;
    kq_raft_event ev = {.type = KQ_RAFT_EV_SNAPSHOT_TAKEN};
    ev.u.snapshot.id.end_offset = end;
    ev.u.snapshot.id.epoch = epoch;
    ev.u.snapshot.size = (int64_t)len;
    /* the file is durable before the core hears of it */
    kq_raft_snapshot_id old = nd->snap;
    uint8_t *old_bytes = nd->snap_bytes;
    size_t old_len = nd->snap_len;
    nd->snap = ev.u.snapshot.id;
    nd->snap_bytes = img;
    nd->snap_len = len;
    int rc = h_step(h, id, &ev);
    if (rc) { /* the core refused: the host deletes the file again */
        nd->snap = old;
        nd->snap_bytes = old_bytes;
        nd->snap_len = old_len;
        free(img);
    } else {
        free(old_bytes);
    }
    return rc;
}

int h_finish_install(harness *h, int32_t id)
{
    h_node *nd = h_node_of(h, id);
    if (!nd->install_pending)
        die("no install pending");
    nd->install_pending = false;
    nd->host.now = h->now;
    nd->merging = false;
    int rc = kq_raft_host_installed(&nd->host, nd->pending_err);
    if (rc)
        nd->step_errors++;
    if (!nd->fatal)
        host_settle(nd);
    return rc;
}

int h_inject(harness *h, int32_t to, const kq_raft_msg *m)
{
    kq_raft_msg c = *m;
    c.to = to;
    if (kq_raft_msg_is_request(c.type)) {
        c.token = ++h->next_token;
        out_add(h, c.token, &c, 0);
    }
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE};
    ev.u.msg = &c;
    return h_step(h, to, &ev);
}

/* ------------------------------------------------------------ delivery */

int h_find(const harness *h, kq_raft_msg_type type, int32_t from, int32_t to)
{
    for (size_t i = 0; i < h->nq; i++) {
        const kq_raft_msg *m = &h->q[i].m;
        if (m->type == type && (!from || m->from == from) && (!to || m->to == to))
            return (int)i;
    }
    return -1;
}

int h_count(const harness *h, kq_raft_msg_type type, int32_t from, int32_t to)
{
    int n = 0;
    for (size_t i = 0; i < h->nq; i++) {
        const kq_raft_msg *m = &h->q[i].m;
        if (m->type == type && (!from || m->from == from) && (!to || m->to == to))
            n++;
    }
    return n;
}

const kq_raft_msg *h_msg(const harness *h, int idx)
{
    if (idx < 0 || (size_t)idx >= h->nq)
        die("no such queued message");
    return &h->q[idx].m;
}

void h_drop(harness *h, int idx)
{
    if (idx < 0 || (size_t)idx >= h->nq)
        die("no such queued message");
    h_qmsg e = h->q[idx];
    q_remove(h, (size_t)idx);
    if (e.m.error == KQ_ERR_REQUEST_TIMED_OUT && e.m.epoch == 0 &&
        !kq_raft_msg_is_request(e.m.type))
        return; /* a synthesized timeout is never lost */
    if (kq_raft_msg_is_request(e.m.type)) {
        queue_timeout(h, e.m.from, e.m.to, e.m.type, h->now + H_REQUEST_TIMEOUT_MS);
    } else {
        queue_timeout(h, e.m.to, e.m.from, (kq_raft_msg_type)(e.m.type - 1),
                      h->now + H_REQUEST_TIMEOUT_MS);
    }
}

void h_deliver(harness *h, int idx)
{
    if (idx < 0 || (size_t)idx >= h->nq)
        die("no such queued message");
    h_qmsg e = h->q[idx];
    q_remove(h, (size_t)idx);
    int32_t alias = 0, src = e.m.from;
    if (kq_raft_msg_is_request(e.m.type) && e.m.to <= KQ_RAFT_BOOTSTRAP_ID(0)) {
        int b = KQ_RAFT_BOOTSTRAP_ID(0) - e.m.to;
        alias = e.m.to;
        if (b >= h->n_bootstrap) { /* no such server: the request times out */
            queue_timeout(h, e.m.from, alias, e.m.type, h->now + H_REQUEST_TIMEOUT_MS);
            return;
        }
        e.m.to = h->bootstrap[b];
    }
    if (src <= KQ_RAFT_BOOTSTRAP_ID(0) && KQ_RAFT_BOOTSTRAP_ID(0) - src < h->n_bootstrap)
        src = h->bootstrap[KQ_RAFT_BOOTSTRAP_ID(0) - src];
    int32_t to = e.m.to;
    if (to < 1 || to > h->n)
        return; /* addressed outside the cluster (an injected request's answer) */
    h_node *nd = h_node_of(h, to);
    bool synthesized = e.m.error == KQ_ERR_REQUEST_TIMED_OUT && e.m.epoch == 0;
    if (!synthesized && ((src >= 0 && h->cut[src][to]) || !nd->up)) {
        if (kq_raft_msg_is_request(e.m.type))
            queue_timeout(h, e.m.from, alias ? alias : to, e.m.type, h->now + H_REQUEST_TIMEOUT_MS);
        else if (nd->up)
            queue_timeout(h, to, e.m.from, (kq_raft_msg_type)(e.m.type - 1),
                          h->now + H_REQUEST_TIMEOUT_MS);
        return;
    }
    if (!nd->up)
        return;
    if (kq_raft_msg_is_request(e.m.type)) {
        e.m.token = ++h->next_token;
        out_add(h, e.m.token, &e.m, alias);
    }
    if (kq_raft_msg_is_voter_change(e.m.type))
        e.m.u.voter_req.voter = &e.voter;
    if (e.m.type == KQ_RAFT_FETCH_SNAPSHOT_RESP) {
        e.m.u.fetch_snapshot_resp.data = e.m.u.fetch_snapshot_resp.len ? e.chunk : NULL;
    }
    if (e.m.type == KQ_RAFT_FETCH_RESP) {
        for (size_t i = 0; i < e.n_batches; i++)
            e.batches[i].data = (const uint8_t *)&e.payloads[i];
        e.m.u.fetch_resp.batches = e.n_batches ? e.batches : NULL;
        e.m.u.fetch_resp.n_batches = e.n_batches;
    }
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE};
    ev.u.msg = &e.m;
    h_step(h, to, &ev);
}

static int next_due(const harness *h)
{
    for (size_t i = 0; i < h->nq; i++)
        if (h->q[i].deliver_at <= h->now)
            return (int)i;
    return -1;
}

void h_deliver_all(harness *h)
{
    for (int guard = 0; guard < 100000; guard++) {
        int i = next_due(h);
        if (i < 0)
            return;
        if (guard > 99990) {
            const kq_raft_msg *m = &h->q[i].m;
            fprintf(stderr, "storm: type %d %d->%d ep %d err %d off %lld lfe %d div %d %d %lld\n",
                    m->type, m->from, m->to, m->epoch, m->error,
                    (long long)m->u.fetch_req.fetch_offset, m->u.fetch_req.last_fetched_epoch,
                    m->type == 8 ? m->u.fetch_resp.diverging : -1,
                    m->type == 8 ? m->u.fetch_resp.diverging_epoch : -1,
                    m->type == 8 ? (long long)m->u.fetch_resp.diverging_end_offset : -1);
            if (m->type == 8) {
                kq_raft_status st;
                kq_raft_get_status(h->nodes[m->from - 1].r, &st);
                fprintf(stderr,
                        "  from %lld to %lld nb %zu; leader role %d leo %lld harness end %lld "
                        "appenderr %d hw %lld\n",
                        (long long)m->u.fetch_resp.records_from,
                        (long long)m->u.fetch_resp.records_to, h->q[i].n_batches, st.role,
                        (long long)st.log_end_offset, (long long)log_end(&h->nodes[m->from - 1]),
                        h->nodes[m->from - 1].append_errors, (long long)st.high_watermark);
            }
        }
        h_deliver(h, i);
    }
    for (size_t i = 0; i < h->nq && i < 20; i++)
        fprintf(stderr, "  queued type %d %d->%d epoch %d err %d\n", h->q[i].m.type, h->q[i].m.from,
                h->q[i].m.to, h->q[i].m.epoch, h->q[i].m.error);
    die("message storm: delivery did not quiesce");
}

static void expire_outstanding(harness *h)
{
    for (int i = 0; i < H_MAX_OUTSTANDING; i++) {
        h_outstanding *o = &h->out[i];
        if (o->used && h->now >= o->sent_at + H_REQUEST_TIMEOUT_MS) {
            o->used = false;
            queue_timeout(h, o->requester, o->responder, o->type, h->now);
        }
    }
}

void h_run(harness *h, uint64_t ms)
{
    uint64_t end = h->now + ms;
    for (;;) {
        h_deliver_all(h);
        for (int i = 0; i < h->n; i++)
            if (h->nodes[i].up && h->nodes[i].deadline <= h->now)
                h_tick(h, i + 1);
        expire_outstanding(h);
        if (next_due(h) >= 0)
            continue;
        uint64_t t = end;
        for (int i = 0; i < h->n; i++)
            if (h->nodes[i].up && h->nodes[i].deadline < t)
                t = h->nodes[i].deadline;
        for (size_t i = 0; i < h->nq; i++)
            if (h->q[i].deliver_at < t)
                t = h->q[i].deliver_at;
        for (int i = 0; i < H_MAX_OUTSTANDING; i++)
            if (h->out[i].used && h->out[i].sent_at + H_REQUEST_TIMEOUT_MS < t)
                t = h->out[i].sent_at + H_REQUEST_TIMEOUT_MS;
        if (t <= h->now) {
            if (h->now >= end)
                return;
            t = h->now + 1; /* a deadline at "now" that did not move: make progress */
        }
        if (t > end)
            t = end;
        if (t == h->now && h->now >= end)
            return;
        h->now = t;
    }
}

bool h_run_until(harness *h, uint64_t ms, bool (*pred)(harness *h))
{
    uint64_t end = h->now + ms;
    while (h->now < end) {
        if (pred(h))
            return true;
        h_run(h, 10);
    }
    return pred(h);
}

void h_isolate(harness *h, int32_t id)
{
    for (int i = 1; i <= h->n; i++) {
        if (i == id)
            continue;
        h->cut[id][i] = true;
        h->cut[i][id] = true;
    }
}

void h_cut(harness *h, int32_t a, int32_t b)
{
    h->cut[a][b] = true;
    h->cut[b][a] = true;
}

void h_heal(harness *h)
{
    memset(h->cut, 0, sizeof(h->cut));
}

/* ------------------------------------------------------------ queries */

const kq_raft_update *h_last(const harness *h, int32_t id)
{
    return &cnode(h, id)->last;
}

kq_raft_role h_role(const harness *h, int32_t id)
{
    kq_raft_status s;
    kq_raft_get_status(cnode(h, id)->r, &s);
    return s.role;
}

int32_t h_epoch(const harness *h, int32_t id)
{
    kq_raft_status s;
    kq_raft_get_status(cnode(h, id)->r, &s);
    return s.epoch;
}

int64_t h_leo(const harness *h, int32_t id)
{
    return log_end(cnode(h, id));
}

int32_t h_leader(const harness *h)
{
    int32_t best = 0, best_epoch = -1;
    for (int i = 0; i < h->n; i++) {
        const h_node *nd = &h->nodes[i];
        if (!nd->up)
            continue;
        kq_raft_status s;
        kq_raft_get_status(nd->r, &s);
        if (s.role == KQ_RAFT_LEADER && s.epoch > best_epoch) {
            best = nd->id;
            best_epoch = s.epoch;
        }
    }
    return best;
}

int h_leaders_in_epoch(const harness *h, int32_t epoch)
{
    int n = 0;
    for (int i = 0; i < h->n; i++) {
        const h_node *nd = &h->nodes[i];
        if (!nd->up)
            continue;
        kq_raft_status s;
        kq_raft_get_status(nd->r, &s);
        if (s.role == KQ_RAFT_LEADER && s.epoch == epoch)
            n++;
    }
    return n;
}

static bool batch_at(const h_node *nd, int64_t off, h_batch *out)
{
    for (size_t i = 0; i < nd->n_log; i++) {
        if (nd->log[i].base <= off && off < nd->log[i].base + nd->log[i].count) {
            *out = nd->log[i];
            return true;
        }
    }
    return false;
}

bool h_committed_prefix_matches(const harness *h)
{
    for (int a = 0; a < h->n; a++) {
        for (int b = a + 1; b < h->n; b++) {
            const h_node *x = &h->nodes[a], *y = &h->nodes[b];
            int64_t lim = x->max_hw < y->max_hw ? x->max_hw : y->max_hw;
            int64_t from = x->log_start > y->log_start ? x->log_start : y->log_start;
            for (int64_t off = from; off < lim; off++) {
                h_batch p, q;
                if (!batch_at(x, off, &p) || !batch_at(y, off, &q))
                    return false;
                if (p.epoch != q.epoch || p.payload != q.payload || p.base != q.base)
                    return false;
            }
        }
    }
    return true;
}

const kq_raft_msg *h_last_msg(const harness *h, int32_t id, kq_raft_msg_type type, int32_t to)
{
    const h_node *nd = cnode(h, id);
    for (size_t i = 0; i < nd->last.n_msgs; i++)
        if (nd->last_msgs[i].type == type && (!to || nd->last_msgs[i].to == to))
            return &nd->last_msgs[i];
    return NULL;
}

kq_raft_msg h_vote_req(int32_t from, int32_t to, int32_t cand_epoch, int32_t last_epoch,
                       int64_t last_offset, bool pre_vote)
{
    kq_raft_msg m;
    memset(&m, 0, sizeof(m));
    m.type = KQ_RAFT_VOTE_REQ;
    m.from = from;
    m.to = to;
    m.epoch = cand_epoch;
    m.leader_id = -1;
    m.u.vote_req.candidate_id = from;
    m.u.vote_req.last_epoch = last_epoch;
    m.u.vote_req.last_offset = last_offset;
    m.u.vote_req.pre_vote = pre_vote;
    return m;
}

kq_raft_msg h_fetch_req(int32_t from, int32_t to, int32_t epoch, int64_t offset, int32_t last_epoch,
                        int32_t max_wait)
{
    kq_raft_msg m;
    memset(&m, 0, sizeof(m));
    m.type = KQ_RAFT_FETCH_REQ;
    m.from = from;
    m.to = to;
    m.epoch = epoch;
    m.leader_id = -1;
    m.u.fetch_req.fetch_offset = offset;
    m.u.fetch_req.last_fetched_epoch = last_epoch;
    m.u.fetch_req.max_wait_ms = max_wait;
    return m;
}

bool h_has_leader(harness *h)
{
    return h_leader(h) != 0;
}

void h_expire(harness *h, int32_t id)
{
    h_node *nd = h_node_of(h, id);
    if (nd->deadline > h->now)
        h->now = nd->deadline;
    h_tick(h, id);
}

void h_disk_append(harness *h, int32_t id, int32_t epoch, int32_t count)
{
    h_node *nd = h_node_of(h, id);
    int64_t base = nd->n_log ? nd->log[nd->n_log - 1].base + nd->log[nd->n_log - 1].count : 0;
    h_batch *b = log_push(nd);
    b->base = base;
    b->epoch = epoch;
    b->count = count;
    b->payload = 0x5000 + (uint64_t)base;
    nd->n_durable = nd->n_log;
}

void h_disk_append_control(harness *h, int32_t id, int32_t epoch, kq_raft_control *c, size_t n)
{
    h_node *nd = h_node_of(h, id);
    int64_t base = log_end(nd);
    for (size_t i = 0; i < n; i++)
        c[i].offset = base + (int64_t)i;
    kq_raft_batch b = {
        .base_offset = base, .epoch = epoch, .count = (int32_t)n, .control = c, .n_control = n};
    h_batch *x = log_push(nd);
    x->base = base;
    x->epoch = epoch;
    x->count = (int32_t)n;
    x->payload = h->next_payload++;
    control_keep(h, x->payload, &b);
    nd->n_durable = nd->n_log;
}
