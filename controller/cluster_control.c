/* Cluster control (kraft-semantics.md 3.2, 3.3). */
#include "cluster_control.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition_change.h"
#include "kq/util.h"

typedef struct session {
    int32_t id;
    int64_t last_contact_ms;
    int64_t metadata_offset;
    int64_t cs_offset; /* controlled-shutdown offset, -1 none */
} session;

struct kq_cc {
    const kq_decide_settings *s;
    session *v; /* sorted by id */
    size_t n, cap;
};

kq_cc *kq_cc_new(const kq_decide_settings *settings)
{
    kq_cc *cc = calloc(1, sizeof *cc);

    if (cc)
        cc->s = settings;
    return cc;
}

void kq_cc_free(kq_cc *cc)
{
    if (!cc)
        return;
    free(cc->v);
    free(cc);
}

static size_t sess_pos(const kq_cc *cc, int32_t id, bool *found)
{
    size_t lo = 0, hi = cc->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (cc->v[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < cc->n && cc->v[lo].id == id;
    return lo;
}

static session *sess_find(const kq_cc *cc, int32_t id)
{
    bool found;
    size_t i = sess_pos(cc, id, &found);

    return found ? &cc->v[i] : NULL;
}

/* Find or create (fresh: contact now, offsets -1). NULL on out of memory. */
static session *sess_get(kq_cc *cc, int32_t id, int64_t now_ms)
{
    bool found;
    size_t i = sess_pos(cc, id, &found);

    if (found)
        return &cc->v[i];
    if (cc->n == cc->cap) {
        size_t ncap = cc->cap ? cc->cap * 2 : 16;
        session *nv = realloc(cc->v, ncap * sizeof *nv);

        if (!nv)
            return NULL;
        cc->v = nv;
        cc->cap = ncap;
    }
    memmove(cc->v + i + 1, cc->v + i, (cc->n - i) * sizeof *cc->v);
    cc->n++;
    cc->v[i] =
        (session){.id = id, .last_contact_ms = now_ms, .metadata_offset = -1, .cs_offset = -1};
    return &cc->v[i];
}

int kq_cc_activate(kq_cc *cc, const kq_image *img, int64_t now_ms)
{
    cc->n = 0;
    for (const kq_broker *b = kq_image_broker_next(img, NULL); b; b = kq_image_broker_next(img, b))
        if (!sess_get(cc, b->id, now_ms))
            return KQ_ERR_NOMEM;
    return 0;
}

int kq_cc_check_broker_epoch(const kq_image *img, int32_t id, int64_t epoch)
{
    const kq_broker *b = kq_image_broker(img, id);

    if (!b || b->epoch != epoch)
        return KQ_ERR_STALE_BROKER_EPOCH;
    return 0;
}

bool kq_cc_has_live_lease(const kq_cc *cc, const kq_image *img, int32_t id, int64_t now_ms)
{
    const kq_broker *b = kq_image_broker(img, id);
    const session *s = sess_find(cc, id);

    return b && !b->fenced && s && s->last_contact_ms + cc->s->session_timeout_ms >= now_ms;
}

bool kq_cc_soft_state(const kq_cc *cc, int32_t id, int64_t *last_contact_ms,
                      int64_t *metadata_offset, int64_t *controlled_shutdown_offset)
{
    const session *s = sess_find(cc, id);

    if (!s)
        return false;
    if (last_contact_ms)
        *last_contact_ms = s->last_contact_ms;
    if (metadata_offset)
        *metadata_offset = s->metadata_offset;
    if (controlled_shutdown_offset)
        *controlled_shutdown_offset = s->cs_offset;
    return true;
}

/* ---- record building blocks -------------------------------------------------------------- */

static int push_broker_change(kq_reclist *out, const kq_broker *b, int8_t fenced, int8_t ics)
{
    kq_record r = {.type = KQ_REC_BROKER_REGISTRATION_CHANGE};

    r.broker_change.broker_id = b->id;
    r.broker_change.broker_epoch = b->epoch;
    r.broker_change.fenced = fenced;
    r.broker_change.in_controlled_shutdown = ics;
    return kq_reclist_push(out, &r);
}

/* Remove `id` from the ISR (and, when `from_elr`, the ELR) of every partition, re-electing
 * leaders with `id` unacceptable. */
static int remove_broker(const kq_decide_settings *s, const kq_image *img, int32_t id,
                         bool from_elr, kq_reclist *out)
{
    kq_tp *tps = NULL, *elr_tps = NULL;
    size_t n = 0, n_elr = 0;
    int32_t *tisr = NULL;
    int rc;

    if ((rc = kq_image_broker_partitions(img, id, KQ_ROLE_ISR, &tps, &n)))
        goto out;
    if (from_elr && (rc = kq_image_broker_partitions(img, id, KQ_ROLE_ELR, &elr_tps, &n_elr)))
        goto out;
    if (!(tisr = malloc(KQ_REC_MAX_REPLICAS * sizeof *tisr))) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n + n_elr; i++) {
        const kq_tp *tp = i < n ? &tps[i] : &elr_tps[i - n];
        const kq_topic *t = kq_image_topic_by_id(img, tp->topic_id);
        const kq_partition *p = kq_image_partition(img, tp->topic_id, tp->partition);
        kq_record rec;
        kq_pcb b;
        int32_t k = 0;

        if (!t || !p)
            continue;
        if (i >= n && kq_ids_contain(kq_partition_isr(p), p->n_isr, id))
            continue; /* already handled through the ISR list */
        for (int32_t j = 0; j < p->n_isr; j++)
            if (kq_partition_isr(p)[j] != id)
                tisr[k++] = kq_partition_isr(p)[j];
        kq_pcb_init(&b, s, img, t, tp->partition);
        b.has_target_isr = true;
        b.target_isr = tisr;
        b.n_target_isr = k;
        b.unacceptable = id;
        if (from_elr)
            b.unclean_shutdown = id;
        if ((rc = kq_pcb_build(&b, &rec, NULL)))
            goto out;
        if (rec.type == KQ_REC_PARTITION_CHANGE && (rc = kq_reclist_push(out, &rec)))
            goto out;
    }
out:
    free(tps);
    free(elr_tps);
    free(tisr);
    return rc;
}

int kq_cc_fence_records(const kq_decide_settings *s, const kq_image *img, int32_t id,
                        kq_reclist *out)
{
    const kq_broker *b = kq_image_broker(img, id);
    size_t start = out->n;
    int rc;

    if (!b)
        return KQ_ERR_BROKER_ID_NOT_REGISTERED;
    if ((rc = remove_broker(s, img, id, false, out)))
        goto out;
    if (!b->fenced)
        rc = push_broker_change(out, b, KQ_FENCE_FENCE, 0);
out:
    if (rc)
        kq_reclist_truncate(out, start);
    return rc;
}

int kq_cc_unfence_records(const kq_decide_settings *s, const kq_image *img, int32_t id,
                          kq_reclist *out)
{
    const kq_broker *b = kq_image_broker(img, id);
    size_t start = out->n, n = 0;
    kq_tp *tps = NULL;
    int rc;

    if (!b)
        return KQ_ERR_BROKER_ID_NOT_REGISTERED;
    if (b->fenced && (rc = push_broker_change(out, b, KQ_FENCE_UNFENCE, 0)))
        goto out;
    if ((rc = kq_image_broker_partitions(img, id, KQ_ROLE_REPLICA, &tps, &n)))
        goto out;
    for (size_t i = 0; i < n; i++) {
        const kq_topic *t = kq_image_topic_by_id(img, tps[i].topic_id);
        const kq_partition *p = kq_image_partition(img, tps[i].topic_id, tps[i].partition);
        kq_record rec;
        kq_pcb pb;

        if (!t || !p || p->leader != KQ_NO_LEADER)
            continue;
        kq_pcb_init(&pb, s, img, t, tps[i].partition);
        pb.acceptable = id;
        if ((rc = kq_pcb_build(&pb, &rec, NULL)))
            goto out;
        if (rec.type == KQ_REC_PARTITION_CHANGE && (rc = kq_reclist_push(out, &rec)))
            goto out;
    }
out:
    free(tps);
    if (rc)
        kq_reclist_truncate(out, start);
    return rc;
}

int kq_cc_controlled_shutdown_records(const kq_decide_settings *s, const kq_image *img, int32_t id,
                                      kq_reclist *out)
{
    const kq_broker *b = kq_image_broker(img, id);
    size_t start = out->n;
    int rc = 0;

    if (!b)
        return KQ_ERR_BROKER_ID_NOT_REGISTERED;
    if (!b->in_controlled_shutdown && (rc = push_broker_change(out, b, KQ_FENCE_NONE, 1)))
        goto out;
    rc = remove_broker(s, img, id, false, out);
out:
    if (rc)
        kq_reclist_truncate(out, start);
    return rc;
}

int kq_cc_unregister(kq_cc *cc, const kq_image *img, int32_t id, kq_reclist *out)
{
    const kq_broker *b = kq_image_broker(img, id);
    size_t start = out->n;
    kq_record r = {.type = KQ_REC_UNREGISTER_BROKER};
    int rc;

    if (!b)
        return KQ_ERR_BROKER_ID_NOT_REGISTERED;
    if ((rc = remove_broker(cc->s, img, id, true, out)))
        goto out;
    r.unregister_broker.broker_id = id;
    r.unregister_broker.broker_epoch = b->epoch;
    if ((rc = kq_reclist_push(out, &r)))
        goto out;
    {
        bool found;
        size_t i = sess_pos(cc, id, &found);

        if (found) {
            memmove(cc->v + i, cc->v + i + 1, (cc->n - i - 1) * sizeof *cc->v);
            cc->n--;
        }
    }
out:
    if (rc)
        kq_reclist_truncate(out, start);
    return rc;
}

/* ---- registration ------------------------------------------------------------------------ */

static int fail(char *msg, size_t cap, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *msg, size_t cap, int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return code;
}

int kq_cc_register(kq_cc *cc, const kq_image *img, const kq_broker_registration *req,
                   int64_t next_offset, int64_t now_ms, kq_reclist *out,
                   kq_registration_result *res)
{
    const kq_broker *old = kq_image_broker(img, req->broker_id);
    size_t start = out->n;
    kq_record r = {.type = KQ_REC_REGISTER_BROKER};
    kq_rec_register_broker *rb = &r.register_broker;
    char err[200];
    bool same;
    session *ss;
    int rc = 0;

    memset(res, 0, sizeof *res);
    if (req->broker_id < 0) {
        rc = fail(res->message, sizeof res->message, KQ_ERR_INVALID_REQUEST,
                  "broker id %d is negative", (int)req->broker_id);
        goto out;
    }
    if (cc->s->cluster_id &&
        (!req->cluster_id || strcmp(req->cluster_id, cc->s->cluster_id) != 0)) {
        rc = fail(res->message, sizeof res->message, KQ_ERR_INCONSISTENT_CLUSTER_ID,
                  "broker %d sent cluster id %s, which is not this cluster's", req->broker_id,
                  req->cluster_id ? req->cluster_id : "(none)");
        goto out;
    }
    if (kq_uuid_is_zero(req->incarnation_id)) {
        rc = fail(res->message, sizeof res->message, KQ_ERR_INVALID_REQUEST,
                  "broker %d sent an all-zero incarnation id", (int)req->broker_id);
        goto out;
    }
    same = old && !memcmp(old->incarnation_id, req->incarnation_id, 16);
    if (old && !same && kq_cc_has_live_lease(cc, img, req->broker_id, now_ms)) {
        rc = fail(res->message, sizeof res->message, KQ_ERR_DUPLICATE_BROKER_REGISTRATION,
                  "another incarnation of broker %d holds a live lease", (int)req->broker_id);
        goto out;
    }
    /* Build the RegisterBroker record (deep copies so that the list owns them). */
    rb->broker_id = req->broker_id;
    memcpy(rb->incarnation_id, req->incarnation_id, 16);
    rb->registration_offset = -1;
    rb->broker_epoch = same ? old->epoch : next_offset;
    rb->fenced = same ? old->fenced : true;
    rb->in_controlled_shutdown = same ? old->in_controlled_shutdown : false;
    if (req->n_endpoints < 0 || req->n_endpoints > KQ_REC_MAX_ENDPOINTS) {
        rc = fail(res->message, sizeof res->message, KQ_ERR_INVALID_REQUEST,
                  "broker %d sent a bad endpoint count", (int)req->broker_id);
        goto out;
    }
    if (req->n_endpoints > 0) {
        rb->endpoints = calloc((size_t)req->n_endpoints, sizeof *rb->endpoints);
        if (!rb->endpoints) {
            rc = KQ_ERR_NOMEM;
            goto out;
        }
        rb->n_endpoints = req->n_endpoints;
        for (int32_t i = 0; i < req->n_endpoints; i++) {
            const kq_rec_endpoint *e = &req->endpoints[i];

            rb->endpoints[i].port = e->port;
            if ((e->name && !(rb->endpoints[i].name = strdup(e->name))) ||
                (e->host && !(rb->endpoints[i].host = strdup(e->host)))) {
                rc = KQ_ERR_NOMEM;
                goto out;
            }
        }
    }
    if (req->rack && !(rb->rack = strdup(req->rack))) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    if (kq_record_validate(&r, err, sizeof err)) {
        rc = fail(res->message, sizeof res->message, KQ_ERR_INVALID_REQUEST,
                  "broker %d registration: %s", (int)req->broker_id, err);
        goto out;
    }
    /* New incarnation of a broker still in ISRs: it leaves them first (only a lease-expired,
     * unfenced broker is still in any, as fencing would have removed it). Departure from
     * Kafka (docs/architecture.md, "ELR across restarts"): it stays in the ELRs. Kafka drops a
     * broker that restarted after an unclean shutdown from every ELR because it may have lost
     * unflushed records; a kq broker fsyncs every batch before acknowledging it or fetching
     * past it, so after a crash it still holds every record it held when it left the ISR,
     * which is all an ELR member promises. */
    if (old && !same && !old->fenced) {
        rc = remove_broker(cc->s, img, req->broker_id, false, out);
        if (rc)
            goto out;
    }
    /* The broker epoch is the offset of the RegisterBroker record itself (3.2), which follows
     * any unclean-shutdown changes: a broker is caught up once it replayed that record. */
    int64_t epoch = same ? old->epoch : next_offset + (int64_t)(out->n - start);
    rb->broker_epoch = epoch;
    if ((rc = kq_reclist_push(out, &r)))
        goto out;
    if (!(ss = sess_get(cc, req->broker_id, now_ms))) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    ss->last_contact_ms = now_ms;
    if (!same) {
        ss->metadata_offset = -1;
        ss->cs_offset = -1;
    }
    res->broker_epoch = epoch;
    res->new_incarnation = !same;
out:
    kq_record_free(&r);
    if (rc) {
        kq_reclist_truncate(out, start);
        if (rc == KQ_ERR_NOMEM && !res->message[0])
            snprintf(res->message, sizeof res->message, "out of memory registering broker %d",
                     (int)req->broker_id);
    }
    res->error = rc;
    return rc;
}

/* ---- heartbeat --------------------------------------------------------------------------- */

kq_broker_state kq_cc_next_state(kq_broker_state cur, bool want_fence, bool want_shutdown,
                                 bool caught_up, bool leads_partitions, int64_t cs_offset,
                                 int64_t lowest_active_offset)
{
    switch (cur) {
    case KQ_BROKER_FENCED:
        if (want_shutdown)
            return KQ_BROKER_SHUTDOWN_NOW;
        if (!want_fence && caught_up)
            return KQ_BROKER_UNFENCED;
        return KQ_BROKER_FENCED;
    case KQ_BROKER_UNFENCED:
        if (want_fence && want_shutdown)
            return KQ_BROKER_SHUTDOWN_NOW;
        if (want_fence)
            return KQ_BROKER_FENCED;
        if (want_shutdown)
            return leads_partitions ? KQ_BROKER_CONTROLLED_SHUTDOWN : KQ_BROKER_SHUTDOWN_NOW;
        return KQ_BROKER_UNFENCED;
    case KQ_BROKER_CONTROLLED_SHUTDOWN:
        if (leads_partitions)
            return KQ_BROKER_CONTROLLED_SHUTDOWN;
        if (cs_offset <= lowest_active_offset)
            return KQ_BROKER_SHUTDOWN_NOW;
        return KQ_BROKER_CONTROLLED_SHUTDOWN;
    case KQ_BROKER_SHUTDOWN_NOW:
    default:
        return KQ_BROKER_SHUTDOWN_NOW;
    }
}

static int64_t lowest_active_offset(const kq_cc *cc, const kq_image *img)
{
    int64_t low = INT64_MAX;

    for (const kq_broker *b = kq_image_broker_next(img, NULL); b;
         b = kq_image_broker_next(img, b)) {
        const session *s;

        if (b->fenced || b->in_controlled_shutdown)
            continue;
        s = sess_find(cc, b->id);
        if (!s)
            return -1; /* unknown progress: not caught up */
        if (s->metadata_offset < low)
            low = s->metadata_offset;
    }
    return low;
}

int kq_cc_heartbeat(kq_cc *cc, const kq_image *img, const kq_heartbeat *req, int64_t next_offset,
                    int64_t now_ms, kq_reclist *out, kq_heartbeat_result *res)
{
    const kq_broker *b = kq_image_broker(img, req->broker_id);
    size_t start = out->n;
    kq_broker_state cur, next;
    bool leads;
    session *s;
    int rc = 0;

    memset(res, 0, sizeof *res);
    if (kq_cc_check_broker_epoch(img, req->broker_id, req->broker_epoch)) {
        rc = KQ_ERR_STALE_BROKER_EPOCH;
        if (!b)
            snprintf(res->message, sizeof res->message, "broker %d is not registered",
                     (int)req->broker_id);
        else
            snprintf(res->message, sizeof res->message,
                     "broker %d sent epoch %lld but its registration has epoch %lld",
                     (int)req->broker_id, (long long)req->broker_epoch, (long long)b->epoch);
        goto out;
    }
    if (!(s = sess_get(cc, req->broker_id, now_ms))) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    s->last_contact_ms = now_ms;
    s->metadata_offset = req->current_metadata_offset;
    cur = b->fenced
              ? KQ_BROKER_FENCED
              : (b->in_controlled_shutdown ? KQ_BROKER_CONTROLLED_SHUTDOWN : KQ_BROKER_UNFENCED);
    res->is_caught_up = req->current_metadata_offset >= b->registration_offset;
    leads = kq_image_broker_count(img, b->id, KQ_ROLE_LEADER) > 0;
    next = kq_cc_next_state(cur, req->want_fence, req->want_shutdown, res->is_caught_up, leads,
                            s->cs_offset, lowest_active_offset(cc, img));
    if (cur != next || next == KQ_BROKER_SHUTDOWN_NOW) {
        switch (next) {
        case KQ_BROKER_FENCED:
        case KQ_BROKER_SHUTDOWN_NOW:
            rc = kq_cc_fence_records(cc->s, img, b->id, out);
            break;
        case KQ_BROKER_UNFENCED:
            rc = kq_cc_unfence_records(cc->s, img, b->id, out);
            break;
        case KQ_BROKER_CONTROLLED_SHUTDOWN:
            rc = kq_cc_controlled_shutdown_records(cc->s, img, b->id, out);
            break;
        }
        if (rc)
            goto out;
    }
    /* The controlled-shutdown offset is set once: the end offset of the batch that moved the
     * broker into controlled shutdown (KAFKA-14292). */
    if (next == KQ_BROKER_CONTROLLED_SHUTDOWN && s->cs_offset < 0)
        s->cs_offset = next_offset + (int64_t)(out->n - start) - 1;
    res->state = cur;
    res->next = next;
    res->is_fenced = next == KQ_BROKER_FENCED || next == KQ_BROKER_SHUTDOWN_NOW;
    res->in_controlled_shutdown = next == KQ_BROKER_CONTROLLED_SHUTDOWN;
    res->should_shutdown = next == KQ_BROKER_SHUTDOWN_NOW;
out:
    if (rc) {
        kq_reclist_truncate(out, start);
        if (rc == KQ_ERR_NOMEM)
            snprintf(res->message, sizeof res->message, "out of memory");
    }
    res->error = rc;
    return rc;
}

/* ---- session expiry ---------------------------------------------------------------------- */

int kq_cc_fence_stale(kq_cc *cc, const kq_image *img, int64_t now_ms, kq_reclist *out,
                      int32_t *fenced_id, int64_t *next_check_ms)
{
    const session *oldest = NULL;
    int rc;

    *fenced_id = -1;
    *next_check_ms = -1;
    for (const kq_broker *b = kq_image_broker_next(img, NULL); b;
         b = kq_image_broker_next(img, b)) {
        if (!b->fenced && !sess_get(cc, b->id, now_ms)) /* unknown: a fresh session */
            return KQ_ERR_NOMEM;
    }
    for (const kq_broker *b = kq_image_broker_next(img, NULL); b;
         b = kq_image_broker_next(img, b)) {
        const session *s = sess_find(cc, b->id);

        if (b->fenced || !s)
            continue;
        if (!oldest || s->last_contact_ms < oldest->last_contact_ms)
            oldest = s; /* brokers come in id order: the lowest id wins ties */
    }
    if (!oldest)
        return 0;
    if (oldest->last_contact_ms + cc->s->session_timeout_ms >= now_ms) {
        *next_check_ms = oldest->last_contact_ms + cc->s->session_timeout_ms;
        return 0;
    }
    if ((rc = kq_cc_fence_records(cc->s, img, oldest->id, out)))
        return rc;
    *fenced_id = oldest->id;
    *next_check_ms = now_ms;
    return 0;
}
