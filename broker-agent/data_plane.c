/*
 * The broker agent's data plane: see data_plane.h.
 */
#include "dp_internal.h"
#include "kq/authorizer.h"
#include "kq/principal.h"

static void on_rm_update(void *arg, const kq_rm_partition *hp, kq_replica *r,
                         const kq_replica_update *u);

/* Growth helper for the arrays of struct kq_dp (dp_internal.h). */
int dp_grow(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    void *nv = realloc(*v, nc * elem);
    if (nv == NULL)
        return KQ_ERR_NOMEM;
    *v = nv;
    *cap = nc;
    return 0;
}

void dp_oom(kq_dp *dp, const char *what)
{
    dp->cfg.fatal("out of memory", what);
}

void dp_drop(kq_dp *dp, void *req)
{
    dp->cfg.net.drop(dp->cfg.net.ctx, req);
}

dp_net_ev *dp_net_ev_new(kq_dp *dp, int kind)
{
    dp_net_ev *ev = calloc(1, sizeof(*ev));
    if (ev == NULL)
        return NULL;
    ev->kind = kind;
    ev->next = dp->inflight;
    if (dp->inflight != NULL)
        dp->inflight->prev = ev;
    dp->inflight = ev;
    return ev;
}

void dp_net_ev_free(kq_dp *dp, dp_net_ev *ev)
{
    if (ev == NULL)
        return;
    if (ev->prev != NULL)
        ev->prev->next = ev->next;
    else
        dp->inflight = ev->next;
    if (ev->next != NULL)
        ev->next->prev = ev->prev;
    free(ev->sent);
    free(ev);
}

kq_dp *kq_dp_new(const kq_dp_config *cfg, kq_rm *rm)
{
    kq_dp *dp = calloc(1, sizeof(*dp));
    if (dp == NULL)
        return NULL;
    dp->cfg = *cfg;
    dp->rm = rm;
    dp->plog = kq_rm_plog(rm);
    kq_rm_set_update_cb(rm, on_rm_update, dp);
    return dp;
}

void kq_dp_free(kq_dp *dp)
{
    if (dp == NULL)
        return;
    for (size_t i = 0; i < dp->n_parts; i++)
        free(dp->parts[i].producers);
    while (dp->inflight != NULL)
        dp_net_ev_free(dp, dp->inflight);
    for (size_t i = 0; i < dp->n_parked; i++)
        dp_drop(dp, dp->parked[i].req);
    for (size_t i = 0; i < dp->n_fetches; i++) {
        dp_drop(dp, dp->fetches[i].req);
        kq_data_request_free(&dp->fetches[i].r);
        free(dp->fetches[i].denied);
    }
    for (size_t i = 0; i < dp->n_replies; i++) {
        dp_drop(dp, dp->replies[i].req);
        kq_buf_free(&dp->replies[i].buf);
    }
    free(dp->parts);
    free(dp->parked);
    free(dp->fetches);
    free(dp->replies);
    free(dp);
}

void kq_dp_get_counts(const kq_dp *dp, kq_dp_counts *out)
{
    *out = dp->counts;
    out->parked_produces = dp->n_parked;
    out->parked_fetches = dp->n_fetches;
}

/* ---------- partitions ---------- */

/* The state of a partition, created on first use. dp->parts is sorted by (topic id,
 * partition), so this is a binary search on every replica step; a pointer it returns is valid
 * until the next part_get of another partition or the next kq_dp_after_metadata. */
dp_part *dp_part_get(kq_dp *dp, const uint8_t topic_id[16], int32_t partition)
{
    size_t lo = 0, hi = dp->n_parts;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = memcmp(dp->parts[mid].topic_id, topic_id, 16);
        if (c == 0)
            c = (dp->parts[mid].partition > partition) - (dp->parts[mid].partition < partition);
        if (c == 0)
            return &dp->parts[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (dp_grow((void **)&dp->parts, &dp->cap_parts, dp->n_parts, sizeof(dp_part)) != 0) {
        dp_oom(dp, "partition state");
        return NULL;
    }
    memmove(&dp->parts[lo + 1], &dp->parts[lo], (dp->n_parts - lo) * sizeof(dp_part));
    dp->n_parts++;
    dp_part *p = &dp->parts[lo];
    memset(p, 0, sizeof(*p));
    memcpy(p->topic_id, topic_id, 16);
    p->partition = partition;
    p->deadline = KQ_REPLICA_NO_DEADLINE;
    p->hw = -1;
    p->hw_ckpt = -1;
    return p;
}

kq_plog_tp dp_tp_make(const uint8_t topic_id[16], int32_t partition)
{
    kq_plog_tp tp;
    memcpy(tp.topic_id, topic_id, 16);
    tp.partition = partition;
    return tp;
}

static void ensure_txn(kq_dp *dp)
{
    if (!kq_plog_in_txn(dp->plog) && kq_plog_begin(dp->plog) != 0)
        dp->cfg.fatal("partition logs", "cannot start a write transaction");
}

/* ---------- replies ---------- */

static void queue_reply(kq_dp *dp, void *req, kq_buf *buf)
{
    if (dp_grow((void **)&dp->replies, &dp->cap_replies, dp->n_replies, sizeof(dp_reply)) != 0) {
        dp_oom(dp, "reply queue");
        return;
    }
    dp->replies[dp->n_replies].req = req;
    dp->replies[dp->n_replies].buf = *buf;
    dp->n_replies++;
    memset(buf, 0, sizeof(*buf));
}

/* Queue an answer encoded with result rc; an answer that could not be encoded is dropped (the
 * client times out). */
static void queue_encoded(kq_dp *dp, void *req, int rc, kq_buf *out)
{
    if (rc != 0) {
        dp_drop(dp, req);
        kq_buf_free(out);
        return;
    }
    queue_reply(dp, req, out);
}

void dp_reply_error(kq_dp *dp, void *req, uint32_t api, int err, const char *msg)
{
    kq_buf out = {0};
    queue_encoded(dp, req, kq_codec_encode_error_response(api, err, msg, -1, -1, NULL, &out), &out);
}

/* Queue an answer to api encoded with result rc; if it could not be encoded, answer INTERNAL. */
void dp_queue_answer(kq_dp *dp, void *req, uint32_t api, int rc, kq_buf *out)
{
    if (rc == 0) {
        queue_reply(dp, req, out);
        return;
    }
    kq_buf_free(out);
    dp_reply_error(dp, req, api, KQ_ERR_INTERNAL, "cannot encode the answer");
}

void dp_reply_produce(kq_dp *dp, void *req, int err, int64_t base_offset, int64_t log_start,
                      const char *msg)
{
    kq_produce_response res;
    kq_buf out = {0};
    memset(&res, 0, sizeof(res));
    res.error = err;
    res.base_offset = err == 0 ? base_offset : -1;
    res.log_start_offset = err == 0 && log_start <= base_offset ? log_start : -1;
    if (msg != NULL)
        snprintf(res.error_message, sizeof(res.error_message), "%s", msg);
    if (err != 0)
        dp->counts.produce_errors++;
    queue_encoded(dp, req, kq_data_encode_produce_response(&res, &out), &out);
}

/* ---------- applying a replica's update ---------- */

static void answer_parked_produce(kq_dp *dp, const kq_replica_completion *c, int64_t log_start)
{
    for (size_t k = 0; k < dp->n_parked; k++) {
        if (dp->parked[k].token != c->token)
            continue;
        dp_reply_produce(dp, dp->parked[k].req, c->error, c->base_offset, log_start,
                         c->error ? kq_err_message(c->error) : NULL);
        dp->parked[k] = dp->parked[--dp->n_parked];
        return;
    }
}

static int write_appends(kq_dp *dp, dp_part *p, const kq_replica_update *u, const dp_src *src,
                         char *err, size_t errlen)
{
    kq_plog_tp tp = dp_tp_make(p->topic_id, p->partition);
    for (size_t k = 0; k < u->n_append; k++) {
        const kq_replica_batch *rb = &u->append[k];
        kq_plog_batch b = {.base_offset = rb->base_offset,
                           .leader_epoch = rb->epoch,
                           .count = rb->count,
                           .producer_id = KQ_PLOG_NO_PRODUCER_ID,
                           .producer_epoch = -1,
                           .base_sequence = -1};
        if (src != NULL && src->batches != NULL) {
            const kq_data_batch *db = NULL;
            for (size_t j = 0; j < src->n_batches && db == NULL; j++)
                if (src->batches[j].base_offset == rb->base_offset)
                    db = &src->batches[j];
            if (db == NULL) {
                snprintf(err, errlen, "fetched batch at %lld not in the answer",
                         (long long)rb->base_offset);
                return KQ_ERR_INTERNAL;
            }
            b.producer_id = db->producer_id;
            b.producer_epoch = db->producer_epoch;
            b.base_sequence = db->base_sequence;
            b.records = db->records;
            b.len = db->len;
        } else if (src != NULL && src->payload != NULL) {
            b.producer_id = src->pid;
            b.producer_epoch = src->pepoch;
            b.base_sequence = src->base_seq;
            b.records = src->payload;
            b.len = src->payload_len;
        } else {
            snprintf(err, errlen, "an append without records");
            return KQ_ERR_INTERNAL;
        }
        int rc = kq_plog_append(dp->plog, &tp, &b);
        if (rc != 0) {
            snprintf(err, errlen, "append at %lld: %s", (long long)b.base_offset,
                     kq_err_message(rc));
            return rc;
        }
        dp->counts.records_appended += (uint64_t)b.count;
        if (p->producers_loaded)
            dp_producer_note(dp, p, b.producer_id, b.producer_epoch, b.base_sequence, b.count,
                             b.base_offset);
    }
    return 0;
}

/* What every update asks of the data plane besides its log writes (replica.h steps 6-10,
 * the sends being kq_dp_pump's): answers to parked Produces, HW and AlterPartition to send,
 * the timer, and when the producer state must be rebuilt. */
static void note_update(kq_dp *dp, dp_part *p, const kq_replica *r, const kq_replica_update *u)
{
    if (u->reset_log_start >= 0 || u->truncate_to >= 0 || u->role_changed)
        p->producers_loaded = false;
    if (u->role_changed)
        dp->wake = true; /* a parked fetch there now gets its error at once */
    dp->counts.isr_shrinks += (uint64_t)u->isr_shrinks;
    dp->counts.isr_expands += (uint64_t)u->isr_expands;
    if (u->n_completions > 0) {
        kq_replica_status st;
        kq_replica_get_status(r, &st);
        for (size_t k = 0; k < u->n_completions; k++)
            answer_parked_produce(dp, &u->completions[k], st.log_start_offset);
    }
    if (u->hw_changed) {
        p->hw = u->high_watermark;
        dp->wake = true;
    }
    if (u->send_alter) {
        p->alter_pending = true;
        p->alter = u->alter;
    }
    p->deadline = u->next_deadline_ms;
}

/* Act on one step's update for hosted entry i: the log writes (replica.h steps 1-4) in the
 * open transaction, then note_update. */
void dp_apply(kq_dp *dp, size_t i, kq_replica *r, const kq_replica_update *u, const dp_src *src)
{
    size_t n_hosted = 0;
    const kq_rm_partition *hp = kq_rm_partitions(dp->rm, &n_hosted);
    if (i >= n_hosted)
        return;
    dp_part *p = dp_part_get(dp, hp[i].topic_id, hp[i].partition);
    char err[512];
    if (p == NULL)
        return;
    bool writes =
        u->reset_log_start >= 0 || u->truncate_to >= 0 || u->n_append > 0 || u->epochs_changed;
    if (writes)
        ensure_txn(dp);
    if (kq_rm_log_prepare(dp->rm, i, u, err, sizeof(err)) != 0 ||
        write_appends(dp, p, u, src, err, sizeof(err)) != 0 ||
        kq_rm_log_finish(dp->rm, i, u, err, sizeof(err)) != 0)
        dp->cfg.fatal("partition log write", err);
    if (writes) {
        p->dirty = true;
        dp->wake = true;
    }
    note_update(dp, p, r, u);
}

/* Step an event into hosted entry i and apply the update. Returns the step's result. */
int dp_step(kq_dp *dp, size_t i, const kq_replica_event *ev, kq_replica_update *u,
            const dp_src *src)
{
    kq_replica *r = kq_rm_replica_mut(dp->rm, i);
    if (r == NULL)
        return KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    int rc = kq_replica_step(r, ev, u);
    if (rc != 0) {
        KQ_WARN("replica", "event refused by the replica", "type=%d reason=\"%s\"", (int)ev->type,
                u->reason);
        return rc;
    }
    dp_apply(dp, i, r, u, src);
    return 0;
}

/* The replica manager's metadata steps (log already written by the manager). */
static void on_rm_update(void *arg, const kq_rm_partition *hp, kq_replica *r,
                         const kq_replica_update *u)
{
    kq_dp *dp = arg;
    /* The hosted set is being replaced: find p's state by id, not by index. */
    dp_part *p = dp_part_get(dp, hp->topic_id, hp->partition);
    if (p == NULL)
        return;
    if (u->reset_log_start >= 0 || u->truncate_to >= 0 || u->epochs_changed)
        p->dirty = true; /* durable end may have moved: step PERSISTED after the next commit */
    note_update(dp, p, r, u);
}

/* ---------- requests ---------- */

/* A follower's request (replica_id >= 0) comes from that replica's principal, when
 * identities are checked; refused (answered) otherwise. */
static bool speaks_for_itself(kq_dp *dp, void *req, const kq_data_request *r, const kq_image *img,
                              const char *principal)
{
    const char *tmpl = dp->cfg.node_principal_template;
    int32_t id = r->api_key == KQ_API_DATA_FETCH     ? r->u.fetch.replica_id
                 : r->api_key == KQ_API_LIST_OFFSETS ? r->u.list_offsets.replica_id
                                                     : -1;
    char msg[900];

    if (id < 0)
        return true;
    if (!tmpl) { /* nobody is identified: as in Kafka, an authorizer wants ClusterAction */
        size_t n_acls;
        const kq_acl *acls = kq_image_acls(img, &n_acls);

        if (!dp->cfg.authorizer ||
            kq_authorize(dp->cfg.authorizer, acls, n_acls, principal, "", KQ_ACL_OP_CLUSTER_ACTION,
                         KQ_ACL_RESOURCE_CLUSTER, KQ_ACL_CLUSTER_NAME, msg, sizeof msg))
            return true;
    } else if (kq_principal_is_node(tmpl, principal, id)) {
        return true;
    } else {
        snprintf(msg, sizeof msg, "principal %.600s may not act for replica %d (needs %.200s)",
                 principal ? principal : KQ_PRINCIPAL_ANONYMOUS, id, tmpl);
    }
    dp->counts.refused_requests++;
    kq_log_refusal("broker", principal ? principal : KQ_PRINCIPAL_ANONYMOUS, msg);
    dp_reply_error(dp, req, r->api_key, KQ_ERR_CLUSTER_AUTHORIZATION_FAILED, msg);
    return false;
}

/* One topic of a request, by id (unknown ids are left to the handler) or by name: 0, or
 * TOPIC_AUTHORIZATION_FAILED with msg set. */
int dp_topic_allowed(kq_dp *dp, const kq_image *img, const char *principal, kq_acl_operation op,
                     const uint8_t *id, const char *name, char *msg, size_t len)
{
    const kq_topic *t = id && img ? kq_image_topic_by_id(img, id) : NULL;
    size_t n_acls;
    const kq_acl *acls = kq_image_acls(img, &n_acls);

    if (!dp->cfg.authorizer || !dp->cfg.authorizer->enabled)
        return 0;
    principal = principal ? principal : KQ_PRINCIPAL_ANONYMOUS;
    name = name ? name : t ? t->name : NULL;
    if (!name || kq_authorize(dp->cfg.authorizer, acls, n_acls, principal, "", op,
                              KQ_ACL_RESOURCE_TOPIC, name, msg, len))
        return 0;
    return KQ_ERR_TOPIC_AUTHORIZATION_FAILED;
}

/* Marks partition i of n in *denied when the client may not do op on topic `id` (the array is
 * allocated at the first refusal). false when out of memory. */
static bool deny_partition(kq_dp *dp, const kq_image *img, const char *principal,
                           kq_acl_operation op, const uint8_t *id, size_t i, size_t n,
                           bool **denied, char *msg, size_t len)
{
    if (!dp_topic_allowed(dp, img, principal, op, id, NULL, msg, len))
        return true;
    if (!*denied && !(*denied = calloc(n, sizeof **denied)))
        return false;
    (*denied)[i] = true;
    return true;
}

/* Kafka's rules for the data-plane APIs, over the ACLs of the broker's image (the metadata
 * log as far as this broker applied it). A Produce (one topic) is refused whole: answered,
 * and false. A consumer's Fetch and ListOffsets get *denied, the partitions whose topic it
 * may not Read / Describe (NULL: none), answered per partition; Metadata is answered per topic
 * by its handler. */
static bool client_allowed(kq_dp *dp, void *req, const kq_data_request *r, const kq_image *img,
                           const char *principal, bool **denied)
{
    char msg[900] = "";
    bool ok = true;
    int rc = 0;

    *denied = NULL;
    if (!dp->cfg.authorizer || !dp->cfg.authorizer->enabled)
        return true;
    principal = principal ? principal : KQ_PRINCIPAL_ANONYMOUS;
    if (r->api_key == KQ_API_PRODUCE)
        rc = dp_topic_allowed(dp, img, principal, KQ_ACL_OP_WRITE, r->u.produce.topic_id, NULL, msg,
                              sizeof msg);
    if (r->api_key == KQ_API_DATA_FETCH && r->u.fetch.replica_id < 0)
        for (size_t i = 0; i < r->u.fetch.n_partitions && ok; i++)
            ok = deny_partition(dp, img, principal, KQ_ACL_OP_READ,
                                r->u.fetch.partitions[i].topic_id, i, r->u.fetch.n_partitions,
                                denied, msg, sizeof msg);
    if (r->api_key == KQ_API_LIST_OFFSETS && r->u.list_offsets.replica_id < 0)
        for (size_t i = 0; i < r->u.list_offsets.n_partitions && ok; i++)
            ok = deny_partition(dp, img, principal, KQ_ACL_OP_DESCRIBE,
                                r->u.list_offsets.partitions[i].topic_id, i,
                                r->u.list_offsets.n_partitions, denied, msg, sizeof msg);
    if (!ok) {
        dp_reply_error(dp, req, r->api_key, KQ_ERR_NOMEM, "out of memory");
        return false;
    }
    if (!rc && !*denied)
        return true;
    dp->counts.refused_requests++;
    kq_log_refusal("broker", principal, msg);
    if (!rc)
        return true; /* answered per partition */
    dp_reply_error(dp, req, r->api_key, rc, msg);
    return false;
}

int kq_dp_on_request(kq_dp *dp, void *req, const uint8_t *data, size_t len, const kq_image *img,
                     const char *principal, uint64_t now_ms)
{
    kq_data_request r;
    char err[300];
    memset(&r, 0, sizeof(r));
    int rc = kq_data_decode_request(data, len, &r, err, sizeof(err));
    if (rc == KQ_ERR_NOT_FOUND)
        return 0;
    if (rc != 0) {
        dp->counts.invalid_requests++;
        KQ_WARN("broker", "invalid data-plane request", "api=%u detail=\"%s\"", r.api_key, err);
        if (r.api_key == 0)
            return 0; /* not even an envelope: the caller's error path answers it */
        dp_reply_error(dp, req, r.api_key, KQ_ERR_INVALID_REQUEST, err);
        return 1;
    }
    if (r.cluster_id[0] != '\0' && strcmp(r.cluster_id, dp->cfg.cluster_id) != 0) {
        snprintf(err, sizeof(err), "request for cluster %.64s, this is cluster %.64s", r.cluster_id,
                 dp->cfg.cluster_id);
        dp_reply_error(dp, req, r.api_key, KQ_ERR_INCONSISTENT_CLUSTER_ID, err);
        kq_data_request_free(&r);
        return 1;
    }
    bool *denied = NULL;
    if (!speaks_for_itself(dp, req, &r, img, principal) ||
        !client_allowed(dp, req, &r, img, principal, &denied)) {
        kq_data_request_free(&r);
        return 1;
    }
    switch (r.api_key) {
    case KQ_API_PRODUCE:
        dp_handle_produce(dp, req, &r.u.produce, img, now_ms);
        break;
    case KQ_API_DATA_FETCH:
        dp_handle_fetch(dp, req, &r, img, now_ms, denied);
        denied = NULL; /* the fetch's */
        break;
    case KQ_API_LIST_OFFSETS:
        dp_handle_list_offsets(dp, req, &r.u.list_offsets, img, denied);
        break;
    case KQ_API_METADATA:
        dp_handle_metadata(dp, req, &r.u.metadata, img, principal);
        break;
    default:
        dp_reply_error(dp, req, r.api_key, KQ_ERR_UNSUPPORTED_VERSION, "unsupported api");
        break;
    }
    free(denied);
    kq_data_request_free(&r);
    return 1;
}

/* ---------- timers, commit, metadata, sending ---------- */

void kq_dp_tick(kq_dp *dp, const kq_image *img, uint64_t now_ms)
{
    for (size_t k = 0; k < dp->n_parts; k++) {
        if (dp->parts[k].deadline > now_ms)
            continue;
        size_t i = kq_rm_find(dp->rm, dp->parts[k].topic_id, dp->parts[k].partition);
        dp->parts[k].deadline = KQ_REPLICA_NO_DEADLINE;
        if (i == SIZE_MAX)
            continue;
        kq_replica_event ev = {.type = KQ_REPLICA_EV_TICK, .now_ms = now_ms};
        kq_replica_update u;
        dp_step(dp, i, &ev, &u, NULL);
    }
    dp_retry_parked_fetches(dp, img, now_ms, false);
}

void kq_dp_commit(kq_dp *dp, const kq_image *img, uint64_t now_ms)
{
    char err[300];
    for (int round = 0; round < 4; round++) {
        if (kq_plog_in_txn(dp->plog)) {
            /* High-watermark checkpoints ride along with the data. */
            for (size_t k = 0; k < dp->n_parts; k++) {
                dp_part *p = &dp->parts[k];
                if (p->hw < 0 || p->hw == p->hw_ckpt)
                    continue;
                kq_plog_tp tp = dp_tp_make(p->topic_id, p->partition);
                kq_plog_state st;
                if (kq_plog_state_of(dp->plog, &tp, &st) != 0)
                    continue;
                int64_t hw = p->hw < st.log_end_offset ? p->hw : st.log_end_offset;
                if (hw < st.log_start_offset)
                    hw = st.log_start_offset;
                if (kq_plog_set_hw(dp->plog, &tp, hw) == 0)
                    p->hw_ckpt = p->hw;
            }
            int rc = kq_plog_commit(dp->plog);
            if (rc != 0) {
                snprintf(err, sizeof(err), "commit failed: %s", kq_err_message(rc));
                dp->cfg.fatal("partition logs", err);
            }
        }
        bool stepped = false;
        for (size_t k = 0; k < dp->n_parts; k++) {
            dp_part *p = &dp->parts[k];
            if (!p->dirty)
                continue;
            p->dirty = false;
            size_t i = kq_rm_find(dp->rm, p->topic_id, p->partition);
            kq_replica *r = i == SIZE_MAX ? NULL : kq_rm_replica_mut(dp->rm, i);
            if (r == NULL)
                continue;
            kq_replica_status st;
            kq_replica_get_status(r, &st);
            kq_replica_event ev = {.type = KQ_REPLICA_EV_PERSISTED, .now_ms = now_ms};
            ev.u.persisted_end = st.log_end_offset;
            kq_replica_update u;
            dp_step(dp, i, &ev, &u, NULL);
            stepped = true;
        }
        if (dp->wake) {
            dp->wake = false;
            dp_retry_parked_fetches(dp, img, now_ms, true);
            stepped = true;
        }
        if (!stepped && !kq_plog_in_txn(dp->plog))
            break;
    }
    if (kq_plog_in_txn(dp->plog)) {
        int rc = kq_plog_commit(dp->plog);
        if (rc != 0)
            dp->cfg.fatal("partition logs", kq_err_message(rc));
    }
}

void kq_dp_after_metadata(kq_dp *dp, const kq_image *img, uint64_t now_ms)
{
    size_t n = 0;
    const kq_rm_partition *hp = kq_rm_partitions(dp->rm, &n);
    /* Registration changes (fencing, controlled shutdown, new epochs) reach the leaders; most
     * metadata batches change none (replicas that just became leader got the registrations
     * with their delta). */
    uint64_t sig = 1469598103934665603ull;
    for (const kq_broker *b = kq_image_broker_next(img, NULL); b != NULL;
         b = kq_image_broker_next(img, b)) {
        uint64_t v[2] = {((uint64_t)(uint32_t)b->id << 2) | ((uint64_t)b->fenced << 1) |
                             (uint64_t)b->in_controlled_shutdown,
                         (uint64_t)b->epoch};
        for (size_t j = 0; j < 2; j++)
            sig = (sig ^ v[j]) * 1099511628211ull;
    }
    bool brokers_changed = sig != dp->brokers_sig;
    dp->brokers_sig = sig;
    for (size_t i = 0; brokers_changed && i < n; i++) {
        if (hp[i].role != KQ_REPLICA_LEADER)
            continue;
        kq_replica_broker brokers[KQ_REPLICA_MAX_REPLICAS];
        kq_replica_event ev = {.type = KQ_REPLICA_EV_BROKERS, .now_ms = now_ms};
        ev.u.brokers.brokers = brokers;
        ev.u.brokers.n_brokers = kq_rm_brokers_of(img, &hp[i], brokers);
        kq_replica_update u;
        dp_step(dp, i, &ev, &u, NULL);
    }
    /* Produces parked on a partition this broker no longer hosts. */
    size_t k = 0;
    while (k < dp->n_parked) {
        if (kq_rm_find(dp->rm, dp->parked[k].topic_id, dp->parked[k].partition) != SIZE_MAX) {
            k++;
            continue;
        }
        dp_reply_produce(dp, dp->parked[k].req, KQ_ERR_NOT_LEADER_OR_FOLLOWER, -1, -1,
                         "this broker no longer hosts the partition");
        dp->parked[k] = dp->parked[--dp->n_parked];
    }
    /* Forget the state of partitions no longer hosted (keeping dp->parts sorted); parked
     * fetches for them are then answered. */
    size_t kept = 0;
    for (k = 0; k < dp->n_parts; k++) {
        if (kq_rm_find(dp->rm, dp->parts[k].topic_id, dp->parts[k].partition) == SIZE_MAX) {
            free(dp->parts[k].producers);
            dp->wake = true;
            continue;
        }
        dp->parts[kept++] = dp->parts[k];
    }
    dp->n_parts = kept;
}

void kq_dp_pump(kq_dp *dp, const kq_image *img, int32_t controller, int64_t broker_epoch,
                uint64_t now_ms)
{
    if (dp->wake && !kq_plog_in_txn(dp->plog)) {
        dp->wake = false;
        dp_retry_parked_fetches(dp, img, now_ms, true);
    }
    for (size_t i = 0; i < dp->n_replies; i++)
        dp->cfg.net.reply(dp->cfg.net.ctx, dp->replies[i].req, &dp->replies[i].buf);
    dp->n_replies = 0;
    dp_pump_alters(dp, controller, broker_epoch);
    dp_pump_fetchers(dp, img, broker_epoch, now_ms);
}

uint64_t kq_dp_deadline(const kq_dp *dp, uint64_t now)
{
    uint64_t d = KQ_REPLICA_NO_DEADLINE;
    if (dp->wake || dp->n_replies > 0)
        return 0;
    for (size_t k = 0; k < dp->n_parts; k++) {
        if (dp->parts[k].dirty)
            return 0;
        if (dp->parts[k].deadline < d)
            d = dp->parts[k].deadline;
        if (dp->parts[k].alter_pending && d > now + 50)
            d = now + 50;
    }
    for (size_t k = 0; k < dp->n_fetches; k++)
        if (dp->fetches[k].deadline < d)
            d = dp->fetches[k].deadline;
    for (int i = 0; i < dp->n_fetchers; i++)
        if (!dp->fetchers[i].in_flight && dp->fetchers[i].backoff_until > now &&
            dp->fetchers[i].backoff_until < d)
            d = dp->fetchers[i].backoff_until;
    return d;
}
