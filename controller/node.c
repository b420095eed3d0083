/* The controller node (node.h): proposals, parked answers, activation, timers, snapshots. */
#include "node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/api.h"
#include "kq/authorizer.h"
#include "kq/ctl_codec.h"
#include "kq/error.h"
#include "kq/principal.h"
#include "kq/records.h"
#include "ops.h"

/* The active controller checks for expired broker sessions at least this often. */
#define FENCE_CHECK_MAX_MS 500
/* A timer that left work undone (more than its 1000 changes) runs again this soon. */
#define MORE_WORK_MS 10

/* An answer parked until its last record commits: a client Write (resp empty: encoded at
 * completion from base_offset and epoch) or a controller API (resp encoded already). */
typedef struct kq_ctl_parked {
    uint32_t api;
    kq_buf resp;
    void *req;
    int64_t base_offset;
    int64_t last_offset;
    int32_t epoch;
    struct kq_ctl_parked *next;
} kq_ctl_parked;

/* A Write whose records are in the batch being built. */
typedef struct kq_ctl_pending {
    void *req;
    size_t first; /* index of its first record in the batch */
    size_t count;
} kq_ctl_pending;

static bool is_leader(const kq_ctl_node *n)
{
    return n->st->role == KQ_RAFT_LEADER;
}

static int64_t hw(const kq_ctl_node *n)
{
    return n->st->high_watermark;
}

static void die(kq_ctl_node *n, const char *what, const char *detail)
{
    n->failed = true;
    n->ops.fatal(n->ops.ctx, what, detail);
}

static void event(kq_ctl_node *n, kq_ctl_node_event ev, int64_t arg)
{
    if (n->ops.event)
        n->ops.event(n->ops.ctx, ev, arg);
}

int kq_ctl_node_init(kq_ctl_node *n, const kq_ctl_node_config *cfg, const kq_raft_status *st,
                     const kq_ctl_node_ops *ops, uint64_t now)
{
    memset(n, 0, sizeof(*n));
    n->cfg = *cfg;
    n->ops = *ops;
    n->st = st;
    if (kq_meta_init(&n->meta, &cfg->decide, cfg->cluster_id, cfg->seed) != 0)
        return KQ_ERR_NOMEM;
    n->cfg.cluster_id = n->meta.cluster_id;
    n->meta.applied_end = 0;
    n->last_snapshot_ms = now;
    n->now = now;
    return 0;
}

void kq_ctl_node_free(kq_ctl_node *n)
{
    while (n->parked_head != NULL) {
        kq_ctl_parked *p = n->parked_head;
        n->parked_head = p->next;
        n->ops.drop(n->ops.ctx, p->req);
        kq_buf_free(&p->resp);
        free(p);
    }
    for (size_t i = 0; i < n->n_pending; i++)
        n->ops.drop(n->ops.ctx, n->pending[i].req);
    free(n->pending);
    kq_buf_free(&n->batch);
    kq_meta_free(&n->meta);
    memset(n, 0, sizeof(*n));
}

size_t kq_ctl_node_waiting(const kq_ctl_node *n)
{
    return n->n_pending + n->n_parked;
}

/* ---------- answers ---------- */

/* Keep the parked list ordered by offset: answers complete in order. */
static void park_insert(kq_ctl_node *n, kq_ctl_parked *p)
{
    if (n->parked_tail == NULL || n->parked_tail->last_offset <= p->last_offset) {
        if (n->parked_tail)
            n->parked_tail->next = p;
        else
            n->parked_head = p;
        n->parked_tail = p;
    } else {
        kq_ctl_parked **pp = &n->parked_head;
        while (*pp != NULL && (*pp)->last_offset <= p->last_offset)
            pp = &(*pp)->next;
        p->next = *pp;
        *pp = p;
    }
    n->n_parked++;
}

static kq_ctl_parked *park_new(kq_ctl_node *n, void *req, uint32_t api, int64_t last_offset)
{
    kq_ctl_parked *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        n->ops.reply_error(n->ops.ctx, req, api, KQ_ERR_BROKER_NOT_AVAILABLE, "out of memory");
        return NULL;
    }
    p->req = req;
    p->api = api;
    p->last_offset = last_offset;
    return p;
}

/* Answer now when everything up to wait_offset committed, else park (takes resp). */
static void park_response(kq_ctl_node *n, void *req, uint32_t api, int64_t wait_offset,
                          kq_buf *resp)
{
    if (hw(n) > wait_offset) {
        n->ops.reply(n->ops.ctx, req, resp, wait_offset);
        return;
    }
    kq_ctl_parked *p = park_new(n, req, api, wait_offset);
    if (p == NULL) {
        kq_buf_free(resp);
        return;
    }
    p->resp = *resp;
    *resp = (kq_buf){0};
    park_insert(n, p);
}

/* Answer the parked answers whose records committed. */
static void complete_answers(kq_ctl_node *n)
{
    while (n->parked_head != NULL && hw(n) > n->parked_head->last_offset) {
        kq_ctl_parked *p = n->parked_head;
        n->parked_head = p->next;
        if (n->parked_head == NULL)
            n->parked_tail = NULL;
        n->n_parked--;
        if (p->resp.data == NULL &&
            kq_codec_encode_write_response(p->base_offset, p->epoch, &p->resp) != 0)
            n->ops.drop(n->ops.ctx, p->req);
        else
            n->ops.reply(n->ops.ctx, p->req, &p->resp, p->last_offset);
        kq_buf_free(&p->resp);
        free(p);
    }
}

/* Everything waiting fails with err: leadership lost, or shutting down. */
static void fail_waiting(kq_ctl_node *n, int err)
{
    kq_ctl_parked *p = n->parked_head;
    while (p != NULL) {
        kq_ctl_parked *next = p->next;
        n->ops.reply_error(n->ops.ctx, p->req, p->api, err,
                           "leadership changed before the change committed");
        kq_buf_free(&p->resp);
        free(p);
        p = next;
    }
    n->parked_head = n->parked_tail = NULL;
    n->n_parked = 0;
    for (size_t i = 0; i < n->n_pending; i++)
        n->ops.reply_error(n->ops.ctx, n->pending[i].req, KQ_API_WRITE, err,
                           "not the active controller");
    n->n_pending = 0;
    n->batch_count = 0;
    n->batch.len = 0;
}

/* ---------- proposals ---------- */

static int propose(kq_ctl_node *n, const kq_buf *payload, int32_t count, int64_t *base,
                   int32_t *epoch)
{
    bool active = n->meta.active;
    int err = n->ops.propose(n->ops.ctx, payload, count, base, epoch);
    if (err == 0) {
        n->last_append_ms = n->now;
        if (active) { /* the image applied these records already (kq_meta_add) */
            n->last_applied_epoch = *epoch;
            n->bytes_since_snapshot += (int64_t)payload->len;
        }
    }
    return err;
}

void kq_ctl_node_flush(kq_ctl_node *n)
{
    int64_t base = -1;
    int32_t epoch = -1;
    if (n->failed || n->batch_count == 0)
        return;
    int64_t expected = n->st->log_end_offset; /* where its records were applied from */
    int32_t count = n->batch_count;
    n->batch_count = 0; /* a flush reached from inside the step finds nothing to propose */
    int err = propose(n, &n->batch, count, &base, &epoch);
    n->batch.len = 0;
    if (n->failed)
        return;
    if (err == 0 && base != expected) {
        die(n, "internal", "a proposal landed at another offset than its records were applied at");
        return;
    }
    for (size_t i = 0; i < n->n_pending; i++) {
        kq_ctl_pending *pw = &n->pending[i];
        if (err != 0) {
            n->ops.reply_error(n->ops.ctx, pw->req, KQ_API_WRITE, KQ_ERR_NOT_CONTROLLER,
                               "not the active controller");
            continue;
        }
        kq_ctl_parked *p =
            park_new(n, pw->req, KQ_API_WRITE, base + (int64_t)pw->first + (int64_t)pw->count - 1);
        if (p == NULL)
            continue;
        p->base_offset = base + (int64_t)pw->first;
        p->epoch = epoch;
        park_insert(n, p);
    }
    n->n_pending = 0;
}

/* Append r to a proposal that will start at the log end offset. On the active controller the
 * image applies it at once (so the next decision sees it); otherwise it is applied when it
 * commits. */
static int add_to_proposal(kq_ctl_node *n, kq_buf *batch, int32_t *count, const kq_record *r)
{
    char err[512];
    if (n->meta.active) {
        if (kq_meta_add(&n->meta, r, batch, n->st->log_end_offset, count, err, sizeof(err)) != 0) {
            die(n, "metadata image", err);
            return -1;
        }
        return 0;
    }
    if (kq_record_append(batch, r, err, sizeof(err)) != 0) {
        die(n, "encode", err);
        return -1;
    }
    (*count)++;
    return 0;
}

void kq_ctl_node_noop(kq_ctl_node *n, uint64_t now)
{
    int64_t base;
    int32_t epoch;
    kq_buf b = {0};
    kq_record r;
    int32_t count = 0;
    memset(&r, 0, sizeof(r));
    r.type = KQ_REC_NOOP;
    n->now = now;
    kq_ctl_node_flush(n); /* the NoOp's offset follows the batch being built */
    if (!n->failed && add_to_proposal(n, &b, &count, &r) == 0)
        propose(n, &b, count, &base, &epoch);
    kq_buf_free(&b);
}

/* ---------- requests ---------- */

static void queue_write(kq_ctl_node *n, void *req, const kq_request *r)
{
    const char *refusal = NULL;
    int err = 0;
    char msg[128];
    size_t bytes = 0;
    for (size_t i = 0; i < r->n_records; i++)
        bytes += r->record_lens[i] + 16;
    if (!is_leader(n)) {
        err = KQ_ERR_NOT_CONTROLLER;
        refusal = "not the active controller";
    } else if (kq_ctl_node_waiting(n) >= n->cfg.max_waiting) {
        err = KQ_ERR_BROKER_NOT_AVAILABLE;
        refusal = "too many writes waiting for commit; retry";
    } else if (r->n_records == 0) {
        err = KQ_ERR_INVALID_REQUEST;
        refusal = "write has no records";
    } else if (bytes > n->cfg.max_write_bytes) {
        snprintf(msg, sizeof(msg), "write of %zu bytes exceeds the limit of %zu bytes", bytes,
                 n->cfg.max_write_bytes);
        err = KQ_ERR_MESSAGE_TOO_LARGE;
        refusal = msg;
    } else if (n->n_pending == n->cap_pending) {
        size_t cap = n->cap_pending ? n->cap_pending * 2 : 64;
        kq_ctl_pending *p = realloc(n->pending, cap * sizeof(*p));
        if (p == NULL) {
            err = KQ_ERR_BROKER_NOT_AVAILABLE;
            refusal = "out of memory";
        } else {
            n->pending = p;
            n->cap_pending = cap;
        }
    }
    if (refusal != NULL) {
        n->ops.reply_error(n->ops.ctx, req, KQ_API_WRITE, err, refusal);
        return;
    }
    if (n->batch.len + bytes > n->cfg.max_batch_bytes) {
        kq_ctl_node_flush(n); /* close the current batch; this write starts the next one */
        if (!is_leader(n) && !n->failed) { /* the step resigned */
            n->ops.reply_error(n->ops.ctx, req, KQ_API_WRITE, KQ_ERR_NOT_CONTROLLER,
                               "not the active controller");
            return;
        }
    }
    size_t first = (size_t)n->batch_count;
    for (size_t i = 0; i < r->n_records && !n->failed; i++) {
        kq_record rec;
        memset(&rec, 0, sizeof(rec));
        rec.type = KQ_REC_OPAQUE;
        rec.opaque.data = (uint8_t *)r->records[i];
        rec.opaque.len = r->record_lens[i];
        add_to_proposal(n, &n->batch, &n->batch_count, &rec);
    }
    if (n->failed) {
        n->ops.drop(n->ops.ctx, req);
        return;
    }
    n->pending[n->n_pending++] = (kq_ctl_pending){req, first, r->n_records};
}

static void flush_cb(void *arg)
{
    kq_ctl_node_flush(arg);
}

/* The proposal being built starts at the log end offset, which every proposal (including one
 * made by a flush in the middle of an operation) moves forward. */
static kq_op_ctx op_ctx(kq_ctl_node *n)
{
    return (kq_op_ctx){.meta = &n->meta,
                       .batch = &n->batch,
                       .batch_base = &n->st->log_end_offset,
                       .batch_count = &n->batch_count,
                       .now_ms = (int64_t)n->now,
                       .controller_id = n->cfg.node_id,
                       .flush = flush_cb,
                       .flush_arg = n,
                       .max_batch_bytes = n->cfg.max_batch_bytes,
                       .upgrade_kraft = n->ops.upgrade_kraft,
                       .upgrade_arg = n->ops.ctx,
                       .kraft_version = n->st->kraft_version};
}

/* A controller API: only the active controller answers; others point at the leader. */
/* A request that speaks for a broker comes from that broker's principal, when identities
 * are checked; false with the reason in err otherwise. */
static bool speaks_for_itself(const kq_ctl_node *n, const kq_ctl_request *cr, const char *principal,
                              char *err, size_t errlen)
{
    const char *tmpl = n->cfg.node_principal_template;
    int32_t id;

    switch (cr->api_key) {
    case KQ_API_BROKER_REGISTRATION:
        id = cr->broker_registration.broker_id;
        break;
    case KQ_API_BROKER_HEARTBEAT:
        id = cr->broker_heartbeat.broker_id;
        break;
    case KQ_API_ALTER_PARTITION:
        id = cr->alter_partition.broker_id;
        break;
    default:
        return true;
    }
    if (!tmpl) /* nobody is identified: as in Kafka, an authorizer wants ClusterAction */
        return kq_op_authorize(n->cfg.authorizer, n->meta.img, principal, KQ_ACL_OP_CLUSTER_ACTION,
                               KQ_ACL_RESOURCE_CLUSTER, KQ_ACL_CLUSTER_NAME, err, errlen) == 0;
    if (kq_principal_is_node(tmpl, principal, id))
        return true;
    snprintf(err, errlen, "principal %s may not act for broker %d (%s needs %s with {id} %d)",
             principal ? principal : KQ_PRINCIPAL_ANONYMOUS, id, kq_api_find(cr->api_key)->name,
             tmpl, id);
    return false;
}

/* Kafka's rules for the admin APIs on the cluster; the per-topic ones are the operation's.
 * Node APIs are checked by identity instead (speaks_for_itself). 0 or the error. */
static int authorize(const kq_ctl_node *n, const kq_ctl_request *cr, const char *principal,
                     char *err, size_t errlen)
{
    kq_acl_operation op;

    switch (cr->api_key) {
        /* CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs,
         * DescribeConfigs and DescribeTopics are authorized per item by the operation
         * (controller/ops.h), as Kafka answers them per topic or resource */
    case KQ_API_ELECT_LEADERS:
    case KQ_API_UPDATE_FEATURES:
    case KQ_API_UNREGISTER_BROKER:
    case KQ_API_CREATE_ACLS:
    case KQ_API_DELETE_ACLS:
        op = KQ_ACL_OP_ALTER;
        break;
    case KQ_API_DESCRIBE_CLUSTER:
    case KQ_API_DESCRIBE_FEATURES:
    case KQ_API_DESCRIBE_ACLS:
        op = KQ_ACL_OP_DESCRIBE;
        break;
    default:
        return 0;
    }
    return kq_op_authorize(n->cfg.authorizer, n->meta.img, principal, op, KQ_ACL_RESOURCE_CLUSTER,
                           KQ_ACL_CLUSTER_NAME, err, errlen);
}

static int handle_ctl(kq_ctl_node *n, void *req, const kq_request *env, const char *principal)
{
    kq_ctl_request cr;
    char err[512] = "";
    kq_buf resp = {0};
    int64_t wait = -1;
    memset(&cr, 0, sizeof(cr));
    if (!n->meta.active) {
        n->ops.reply_error(n->ops.ctx, req, env->api_key, KQ_ERR_NOT_CONTROLLER,
                           is_leader(n) ? "this controller is still catching up; retry"
                                        : "not the active controller");
        return 0;
    }
    /* Overload never refuses a heartbeat: refusing it would let the sessions of live brokers
     * expire (KAFKA-15019). */
    if (kq_ctl_node_waiting(n) >= n->cfg.max_waiting && env->api_key != KQ_API_BROKER_HEARTBEAT) {
        n->ops.reply_error(n->ops.ctx, req, env->api_key, KQ_ERR_BROKER_NOT_AVAILABLE,
                           "too many requests waiting for commit; retry");
        return 0;
    }
    int rc = kq_ctl_request_from_envelope(env, &cr, err, sizeof(err));
    if (rc != 0) {
        n->ops.reply_error(n->ops.ctx, req, env->api_key,
                           rc == KQ_ERR_MALFORMED ? KQ_ERR_INVALID_REQUEST : rc, err);
        return KQ_ERR_INVALID_REQUEST;
    }
    if (!speaks_for_itself(n, &cr, principal, err, sizeof err)) {
        kq_ctl_request_free(&cr);
        n->ops.reply_error(n->ops.ctx, req, env->api_key, KQ_ERR_CLUSTER_AUTHORIZATION_FAILED, err);
        return 0;
    }
    if ((rc = authorize(n, &cr, principal, err, sizeof err)) != 0) {
        kq_ctl_request_free(&cr);
        n->ops.reply_error(n->ops.ctx, req, env->api_key, rc, err);
        return 0;
    }
    struct kq_op_refusals refusals = {0};
    kq_op_ctx ctx = op_ctx(n);
    ctx.authz = n->cfg.authorizer;
    ctx.principal = principal;
    ctx.refusals = &refusals;
    rc = kq_op_run(&ctx, &cr, &resp, &wait, err, sizeof(err));
    if (refusals.items > 0 && n->ops.refused)
        n->ops.refused(n->ops.ctx, principal ? principal : KQ_PRINCIPAL_ANONYMOUS, refusals.items,
                       refusals.msg);
    kq_ctl_request_free(&cr);
    if (rc == KQ_ERR_FATAL || n->failed) {
        if (!n->failed)
            die(n, "metadata image", err);
        kq_buf_free(&resp);
        n->ops.drop(n->ops.ctx, req);
        return 0;
    }
    if (rc != 0) {
        n->ops.reply_error(n->ops.ctx, req, env->api_key, rc, err);
        return 0;
    }
    park_response(n, req, env->api_key, wait, &resp);
    return 0;
}

int kq_ctl_node_request(kq_ctl_node *n, void *req, const kq_request *env, const char *principal,
                        uint64_t now)
{
    n->now = now;
    if (n->failed) {
        n->ops.drop(n->ops.ctx, req);
        return 0;
    }
    if (env->api_key == KQ_API_WRITE) {
        /* opaque records straight into the metadata log: super users only */
        if (n->cfg.authorizer && n->cfg.authorizer->enabled &&
            !kq_authorizer_is_super_user(n->cfg.authorizer, principal)) {
            char err[300];
            snprintf(err, sizeof err,
                     "principal %s may not Write to the metadata log (super "
                     "users only)",
                     principal ? principal : KQ_PRINCIPAL_ANONYMOUS);
            n->ops.reply_error(n->ops.ctx, req, env->api_key, KQ_ERR_CLUSTER_AUTHORIZATION_FAILED,
                               err);
            return 0;
        }
        queue_write(n, req, env);
        return 0;
    }
    if (kq_ctl_is_controller_api(env->api_key))
        return handle_ctl(n, req, env, principal);
    n->ops.reply_error(n->ops.ctx, req, env->api_key, KQ_ERR_INVALID_REQUEST, "unsupported api");
    return 0;
}

/* ---------- leadership ---------- */

void kq_ctl_node_after_step(kq_ctl_node *n, const kq_raft_update *u, uint64_t now)
{
    n->now = now;
    if (n->failed || !u->role_changed)
        return;
    if (u->role == KQ_RAFT_LEADER) {
        n->last_append_ms = now;
        return;
    }
    char why[512];
    bool was = n->meta.active;
    if (kq_meta_deactivate(&n->meta, why, sizeof(why)) != 0) {
        die(n, "metadata image", why);
        return;
    }
    if (was)
        event(n, KQ_CTL_NODE_DEACTIVATED, u->epoch);
    /* Answer what committed before leadership was lost, fail the rest. */
    complete_answers(n);
    fail_waiting(n, KQ_ERR_NOT_CONTROLLER);
}

int kq_ctl_node_leader_change(kq_ctl_node *n, int64_t base, uint64_t now, kq_buf *record)
{
    n->now = now;
    int rc = kq_codec_append_leader_change(record, n->cfg.node_id, n->cfg.voters, n->cfg.n_voters,
                                           NULL, 0);
    if (rc != 0)
        return rc;
    kq_meta_became_leader(&n->meta, base);
    n->last_append_ms = now;
    return 0;
}

static int apply_committed_batch(void *arg, int64_t base, int32_t epoch, int32_t count,
                                 uint32_t crc, const uint8_t *records, size_t len)
{
    kq_ctl_node *n = arg;
    char why[512];
    (void)crc;
    if (kq_meta_apply_batch(&n->meta, base, count, records, len, why, sizeof(why)) != 0) {
        die(n, "metadata image: a committed record cannot apply", why);
        return 1;
    }
    n->last_applied_epoch = epoch;
    n->bytes_since_snapshot += (int64_t)len;
    if (!n->meta.active)
        event(n, KQ_CTL_NODE_APPLIED, n->meta.applied_end);
    return n->failed;
}

static void activate(kq_ctl_node *n)
{
    char err[512] = "";
    kq_op_ctx ctx = op_ctx(n);
    bool wrote = false;
    event(n, KQ_CTL_NODE_ACTIVATED, n->st->epoch);
    if (n->failed)
        return;
    int rc = kq_op_bootstrap_features(&ctx, &wrote, err, sizeof(err));
    if (rc == KQ_ERR_NOT_CONTROLLER)
        return; /* lost the leadership in a flush */
    if (rc != 0) {
        die(n, "metadata image", err);
        return;
    }
    if (wrote)
        event(n, KQ_CTL_NODE_FEATURES_FINALIZED, 0);
    else if (kq_image_feature(n->meta.img, "eligible.leader.replicas.version") < 1 &&
             kq_decide_elr_bootstrap(&n->meta.settings, n->meta.img))
        /* A cluster whose metadata.version was finalized by hand under an earlier kq, with
         * ELR on by configuration then: ELR now follows its (absent) feature level. */
        event(n, KQ_CTL_NODE_ELR_OFF, 0);
    /* Fresh broker sessions start now (kq_cc_activate); first checks soon. */
    n->next_fence_ms = n->now + FENCE_CHECK_MAX_MS;
    n->next_leaderless_ms = n->now;
    n->next_rebalance_ms = n->now + n->cfg.rebalance_interval_ms;
}

void kq_ctl_node_committed(kq_ctl_node *n, uint64_t now)
{
    n->now = now;
    if (n->failed)
        return;
    complete_answers(n);
    while (hw(n) > 0 && n->meta.applied_end < hw(n) && !n->failed) {
        int64_t before = n->meta.applied_end;
        int rc = n->ops.read_committed(n->ops.ctx, before, hw(n), apply_committed_batch, n);
        if (n->failed)
            return;
        if (rc != 0) {
            die(n, "reading committed records", kq_err_message(rc));
            return;
        }
        if (n->meta.applied_end == before) {
            die(n, "internal", "no progress replaying committed records");
            return;
        }
    }
    kq_meta_committed(&n->meta, hw(n));
    if (kq_meta_try_activate(&n->meta, is_leader(n), hw(n), n->st->log_end_offset, (int64_t)now))
        activate(n);
}

/* ---------- timers ---------- */

/* A timer's result: stop on an error (NOT_CONTROLLER: leadership was lost in a flush, the
 * node is no longer active; anything else: a record that cannot apply). */
static bool timer_failed(kq_ctl_node *n, int rc, const char *err)
{
    if (rc != 0 && rc != KQ_ERR_NOT_CONTROLLER)
        die(n, "metadata image", err);
    return rc != 0;
}

/* Fence brokers whose session expired (one at a time, each seeing the previous one's records),
 * elect leaders for leaderless partitions, move leadership back to preferred replicas. */
static void run_timers(kq_ctl_node *n)
{
    char err[512] = "";
    kq_op_ctx ctx = op_ctx(n);
    if (n->now >= n->next_fence_ms) {
        int64_t next = -1;
        for (int i = 0; i < 100 && !n->failed; i++) {
            int32_t fenced = -1;
            if (timer_failed(n, kq_op_fence_stale(&ctx, &next, &fenced, err, sizeof(err)), err))
                return;
            if (fenced < 0)
                break;
            event(n, KQ_CTL_NODE_FENCED, fenced);
        }
        /* A session that expires exactly now is fenced at the next check: strictly later, or
         * the timer would fire again at the same millisecond without end. */
        uint64_t cap = n->now + FENCE_CHECK_MAX_MS;
        n->next_fence_ms = next >= 0 && (uint64_t)next < cap ? (uint64_t)next : cap;
        if (n->next_fence_ms <= n->now)
            n->next_fence_ms = n->now + 1;
    }
    if (!n->failed && n->meta.active && n->now >= n->next_leaderless_ms) {
        bool more = false;
        if (timer_failed(n, kq_op_elect_leaderless(&ctx, &more, err, sizeof(err)), err))
            return;
        n->next_leaderless_ms = n->now + (more ? MORE_WORK_MS : n->cfg.unclean_interval_ms);
    }
    if (!n->failed && n->meta.active && n->now >= n->next_rebalance_ms) {
        bool more = false;
        if (timer_failed(n, kq_op_rebalance(&ctx, &more, err, sizeof(err)), err))
            return;
        n->next_rebalance_ms = n->now + (more ? MORE_WORK_MS : n->cfg.rebalance_interval_ms);
    }
}

static bool noop_due(const kq_ctl_node *n)
{
    return is_leader(n) && n->cfg.idle_interval_ms > 0 && !n->stopping;
}

void kq_ctl_node_run(kq_ctl_node *n, uint64_t now)
{
    n->now = now;
    if (n->failed)
        return;
    if (n->meta.active && !n->stopping)
        run_timers(n);
    kq_ctl_node_flush(n);
    if (!n->failed && noop_due(n) && now >= n->last_append_ms + n->cfg.idle_interval_ms)
        kq_ctl_node_noop(n, now);
}

uint64_t kq_ctl_node_deadline(const kq_ctl_node *n)
{
    uint64_t d = UINT64_MAX;
    if (n->failed)
        return d;
    if (n->batch_count > 0)
        return 0;
    if (n->meta.active && !n->stopping) {
        d = n->next_fence_ms;
        if (n->next_leaderless_ms < d)
            d = n->next_leaderless_ms;
        if (n->next_rebalance_ms < d)
            d = n->next_rebalance_ms;
    }
    if (noop_due(n) && n->last_append_ms + n->cfg.idle_interval_ms < d)
        d = n->last_append_ms + n->cfg.idle_interval_ms;
    return d;
}

void kq_ctl_node_stop(kq_ctl_node *n)
{
    n->stopping = true;
    fail_waiting(n, KQ_ERR_NOT_CONTROLLER);
}

/* ---------- snapshots ---------- */

/* Every snapshot_max_bytes of records (or snapshot_interval_ms), at a moment the image holds
 * nothing uncommitted. */
bool kq_ctl_node_snapshot_due(const kq_ctl_node *n, uint64_t now, kq_raft_snapshot_id *id)
{
    int64_t end = hw(n);
    if (n->failed || end <= 0 || n->meta.applied_end != end || end <= n->snapshot_end)
        return false;
    bool by_bytes = n->bytes_since_snapshot >= n->cfg.snapshot_max_bytes;
    bool by_time = n->cfg.snapshot_interval_ms > 0 && n->bytes_since_snapshot > 0 &&
                   now >= n->last_snapshot_ms + (uint64_t)n->cfg.snapshot_interval_ms;
    if (!by_bytes && !by_time)
        return false;
    *id = (kq_raft_snapshot_id){.end_offset = end, .epoch = n->last_applied_epoch};
    return true;
}

bool kq_ctl_node_snapshot_ready(const kq_ctl_node *n, const kq_raft_status *st,
                                bool install_pending, int64_t log_read_from, uint64_t now,
                                kq_raft_snapshot_id *id)
{
    /* The high watermark counts the followers' logs: a leader whose own sync lags can know
     * records committed that its disk does not hold yet. A snapshot covers durable records
     * only (the core refuses one above its durable end, and after a crash the log would end
     * below the snapshot). */
    return !install_pending && !st->fetching_snapshot && !st->installing_snapshot &&
           kq_ctl_node_snapshot_due(n, now, id) && id->end_offset <= st->durable_end_offset &&
           id->end_offset <= log_read_from;
}

void kq_ctl_node_snapshot_taken(kq_ctl_node *n, kq_raft_snapshot_id id, uint64_t now)
{
    n->bytes_since_snapshot = 0;
    n->last_snapshot_ms = now;
    n->snapshot_end = id.end_offset;
}

int kq_ctl_node_load_snapshot(kq_ctl_node *n, kq_raft_snapshot_id id, const uint8_t *payload,
                              size_t len, uint64_t now, char *errbuf, size_t errlen)
{
    int rc = kq_meta_load_snapshot(&n->meta, payload, len, id.end_offset, errbuf, errlen);
    if (rc != 0)
        return rc;
    n->last_applied_epoch = id.epoch;
    kq_ctl_node_snapshot_taken(n, id, now);
    return 0;
}

int kq_ctl_readiness(const kq_ctl_ready_state *r, uint64_t now, uint32_t fetch_timeout_ms,
                     char *reason, size_t len)
{
    const char *role = kq_raft_role_name(r->role);
    long long epoch = (long long)r->epoch;
    bool leader = r->role == KQ_RAFT_LEADER;
    if (r->leader_id < 0 || (!leader && r->role != KQ_RAFT_FOLLOWER)) {
        snprintf(reason, len, "no leader known (state %s, epoch %lld)", role, epoch);
        return 0;
    }
    if (!leader && !r->leader_answered) {
        snprintf(reason, len, "leader %d has not answered a Fetch yet (state %s, epoch %lld)",
                 (int)r->leader_id, role, epoch);
        return 0;
    }
    if (r->hw < 0) {
        snprintf(reason, len, "the high watermark is not known yet (state %s, epoch %lld)", role,
                 epoch);
        return 0;
    }
    if (r->applied < r->hw && now > r->applied_since_ms + KQ_CTL_READY_STUCK_MS) {
        snprintf(reason, len, "applied offset stuck at %lld, high watermark %lld",
                 (long long)r->applied - 1, (long long)r->hw);
        return 0;
    }
    uint64_t age = now > r->leader_answer_ms ? now - r->leader_answer_ms : 0;
    if (!leader && age > fetch_timeout_ms) {
        snprintf(reason, len,
                 "leader %d has not answered a Fetch for %llu ms (state %s, epoch %lld, "
                 "controller.quorum.fetch.timeout.ms %u)",
                 (int)r->leader_id, (unsigned long long)age, role, epoch,
                 (unsigned)fetch_timeout_ms);
        return 0;
    }
    return 1;
}
