/*
 * The data plane serving reads: consumer and follower Fetch (long polls), ListOffsets and
 * Metadata. See dp_internal.h.
 */
#include "dp_internal.h"

#include "kq/log.h"
#include "kq/principal.h"

/* ---------- Fetch (serving) ---------- */

typedef struct read_ctx {
    kq_data_batch *v;
    size_t n, cap;
    int64_t limit_end; /* consumers: drop a batch that ends above this (the HW) */
    int rc;
} read_ctx;

static int read_cb(void *arg, const kq_plog_batch *b)
{
    read_ctx *c = arg;
    if (c->limit_end >= 0 && b->base_offset + b->count > c->limit_end)
        return 1;
    if (c->n == KQ_REPLICA_MAX_BATCHES)
        return 1;
    if (dp_grow((void **)&c->v, &c->cap, c->n, sizeof(kq_data_batch)) != 0) {
        c->rc = KQ_ERR_NOMEM;
        return 1;
    }
    uint8_t *copy = malloc(b->len ? b->len : 1);
    if (copy == NULL) {
        c->rc = KQ_ERR_NOMEM;
        return 1;
    }
    memcpy(copy, b->records, b->len);
    kq_data_batch *d = &c->v[c->n++];
    d->base_offset = b->base_offset;
    d->leader_epoch = b->leader_epoch;
    d->count = b->count;
    d->crc32c = b->crc32c;
    d->producer_id = b->producer_id;
    d->producer_epoch = b->producer_epoch;
    d->base_sequence = b->base_sequence;
    d->records = copy;
    d->len = b->len;
    return 0;
}

static void read_ctx_free(read_ctx *c)
{
    for (size_t i = 0; i < c->n; i++)
        free((void *)c->v[i].records);
    free(c->v);
}

/* Serve a Fetch; returns false if it was parked (nothing to send yet and may_park). */
static bool serve_fetch(kq_dp *dp, void *req, const kq_data_fetch_request *fr, const kq_image *img,
                        uint64_t now, bool may_park, const bool *denied)
{
    size_t n = fr->n_partitions;
    kq_data_fetch_partition_result *res = calloc(n ? n : 1, sizeof(*res));
    read_ctx *reads = calloc(n ? n : 1, sizeof(*reads));
    kq_buf out = {0};
    bool follower = fr->replica_id >= 0;
    bool anything = false;
    bool parked = false;
    size_t budget = fr->max_bytes > 0 ? (size_t)fr->max_bytes : DP_READ_CHUNK;
    if (res == NULL || reads == NULL) {
        dp_oom(dp, "fetch answer");
        goto out;
    }
    for (size_t k = 0; k < n; k++) {
        const kq_data_fetch_partition *fp = &fr->partitions[k];
        kq_data_fetch_partition_result *pr = &res[k];
        memcpy(pr->topic_id, fp->topic_id, 16);
        pr->partition = fp->partition;
        pr->high_watermark = -1;
        pr->log_start_offset = -1;
        pr->diverging_epoch = -1;
        pr->current_leader_id =
            dp_image_leader(img, fp->topic_id, fp->partition, &pr->current_leader_epoch);
        reads[k].limit_end = -1;
        if (denied && denied[k]) {
            pr->error = KQ_ERR_TOPIC_AUTHORIZATION_FAILED;
            pr->current_leader_id = pr->current_leader_epoch = -1; /* nothing about it */
            anything = true;
            continue;
        }
        size_t i = kq_rm_find(dp->rm, fp->topic_id, fp->partition);
        kq_replica *r = i == SIZE_MAX ? NULL : kq_rm_replica_mut(dp->rm, i);
        if (r == NULL) {
            pr->error = dp_not_hosted_error(img, fp->topic_id, fp->partition);
            anything = true;
            continue;
        }
        int64_t from = 0, to = 0;
        if (follower) {
            kq_replica_update u;
            kq_replica_event ev = {.type = KQ_REPLICA_EV_FOLLOWER_FETCH, .now_ms = now};
            ev.u.fetch.replica_id = fr->replica_id;
            ev.u.fetch.fetch_offset = fp->fetch_offset;
            ev.u.fetch.last_fetched_epoch = fp->last_fetched_epoch;
            ev.u.fetch.current_leader_epoch = fp->current_leader_epoch;
            ev.u.fetch.broker_epoch = fr->broker_epoch;
            if (dp_step(dp, i, &ev, &u, NULL) != 0 || !u.has_fetch) {
                pr->error = KQ_ERR_INVALID_REQUEST;
                anything = true;
                continue;
            }
            pr->error = u.fetch.error;
            pr->high_watermark = u.fetch.high_watermark;
            pr->log_start_offset = u.fetch.log_start_offset;
            if (u.fetch.diverging) {
                pr->diverging_epoch = u.fetch.diverging_epoch < 0 ? 0 : u.fetch.diverging_epoch;
                pr->diverging_end_offset = u.fetch.diverging_end_offset;
                if (u.fetch.diverging_epoch < 0)
                    pr->diverging_end_offset = u.fetch.log_start_offset;
            }
            from = u.fetch.records_from;
            to = u.fetch.records_to;
            if (pr->error != 0 || u.fetch.diverging)
                anything = true;
        } else {
            kq_replica_status st;
            kq_replica_get_status(r, &st);
            pr->error = kq_replica_consumer_read(r, fp->fetch_offset, &from, &to);
            pr->high_watermark = kq_replica_readable_end(r);
            pr->log_start_offset = st.log_start_offset;
            reads[k].limit_end = to;
            if (pr->error != 0)
                anything = true;
        }
        if (pr->error != 0 || from >= to || budget == 0)
            continue;
        size_t maxb = fp->partition_max_bytes > 0 ? (size_t)fp->partition_max_bytes : budget;
        if (maxb > budget)
            maxb = budget;
        kq_plog_tp tp = dp_tp_make(fp->topic_id, fp->partition);
        int rc = kq_plog_read(dp->plog, &tp, from, to, maxb, read_cb, &reads[k]);
        if (rc == 0 && reads[k].rc != 0)
            rc = reads[k].rc;
        if (rc != 0) {
            KQ_WARN("replica", "cannot read the partition log", "partition=%d error=%s",
                    fp->partition, kq_err_name(rc));
            read_ctx_free(&reads[k]);
            memset(&reads[k], 0, sizeof(reads[k]));
            pr->error = rc == KQ_ERR_OFFSET_OUT_OF_RANGE ? rc : KQ_ERR_KAFKA_STORAGE_ERROR;
            anything = true;
            continue;
        }
        size_t used = 0;
        for (size_t b = 0; b < reads[k].n; b++)
            used += reads[k].v[b].len;
        budget = used >= budget ? 0 : budget - used;
        pr->batches = reads[k].v;
        pr->n_batches = reads[k].n;
        if (reads[k].n > 0)
            anything = true;
    }
    if (!anything && may_park && fr->max_wait_ms > 0 &&
        dp->n_parked + dp->n_fetches < dp->cfg.max_waiting) {
        parked = true;
        goto out;
    }
    kq_data_fetch_response resp;
    memset(&resp, 0, sizeof(resp));
    resp.partitions = res;
    resp.n_partitions = n;
    dp_queue_answer(dp, req, KQ_API_DATA_FETCH, kq_data_encode_fetch_response(&resp, &out), &out);
out:
    kq_buf_free(&out);
    for (size_t k = 0; reads != NULL && k < n; k++)
        read_ctx_free(&reads[k]);
    free(reads);
    free(res);
    return !parked;
}

/* A Fetch just received: checks the sender, serves or parks it. Takes ownership of r. */
void dp_handle_fetch(kq_dp *dp, void *req, kq_data_request *r, const kq_image *img, uint64_t now,
                     bool *denied)
{
    const kq_data_fetch_request *fr = &r->u.fetch;
    char msg[256];
    dp->counts.fetch_requests++;
    if (fr->replica_id >= 0) {
        /* Follower fetches come from a registered broker with its current epoch. */
        const kq_broker *br = img != NULL ? kq_image_broker(img, fr->replica_id) : NULL;
        if (br == NULL) {
            snprintf(msg, sizeof(msg), "replica %d is not a registered broker", fr->replica_id);
            dp_reply_error(dp, req, KQ_API_DATA_FETCH, KQ_ERR_BROKER_ID_NOT_REGISTERED, msg);
            kq_data_request_free(r);
            free(denied);
            return;
        }
        /* An older epoch is a previous incarnation (a zombie); a newer one is a registration
         * this broker's metadata has not applied yet, which it will. */
        if (fr->broker_epoch < br->epoch) {
            snprintf(msg, sizeof(msg), "broker %d: epoch %lld, registered epoch %lld",
                     fr->replica_id, (long long)fr->broker_epoch, (long long)br->epoch);
            dp_reply_error(dp, req, KQ_API_DATA_FETCH, KQ_ERR_STALE_BROKER_EPOCH, msg);
            kq_data_request_free(r);
            free(denied);
            return;
        }
    }
    if (serve_fetch(dp, req, fr, img, now, true, denied)) {
        kq_data_request_free(r);
        free(denied);
        return;
    }
    if (dp_grow((void **)&dp->fetches, &dp->cap_fetches, dp->n_fetches, sizeof(dp_parked_fetch)) !=
        0) {
        free(denied);
        dp_oom(dp, "parked fetch");
        return;
    }
    uint32_t wait = (uint32_t)fr->max_wait_ms;
    if (wait > DP_MAX_WAIT_MS)
        wait = DP_MAX_WAIT_MS;
    dp_parked_fetch *pf = &dp->fetches[dp->n_fetches++];
    pf->req = req;
    pf->r = *r;
    pf->denied = denied;
    pf->deadline = now + wait;
    memset(r, 0, sizeof(*r));
}

/* Retry parked fetches: all of them when something changed, else the expired ones. */
void dp_retry_parked_fetches(kq_dp *dp, const kq_image *img, uint64_t now, bool all)
{
    size_t k = 0;
    while (k < dp->n_fetches) {
        dp_parked_fetch *pf = &dp->fetches[k];
        bool expired = now >= pf->deadline;
        if (!all && !expired) {
            k++;
            continue;
        }
        if (serve_fetch(dp, pf->req, &pf->r.u.fetch, img, now, !expired, pf->denied)) {
            kq_data_request_free(&pf->r);
            free(pf->denied);
            dp->fetches[k] = dp->fetches[--dp->n_fetches];
            continue;
        }
        k++;
    }
}

/* ---------- ListOffsets ---------- */

void dp_handle_list_offsets(kq_dp *dp, void *req, const kq_list_offsets_request *lr,
                            const kq_image *img, const bool *denied)
{
    size_t n = lr->n_partitions;
    kq_list_offsets_partition_result *res = calloc(n ? n : 1, sizeof(*res));
    kq_buf out = {0};
    if (res == NULL) {
        dp_oom(dp, "list offsets");
        return;
    }
    for (size_t k = 0; k < n; k++) {
        const kq_list_offsets_partition *lp = &lr->partitions[k];
        kq_list_offsets_partition_result *pr = &res[k];
        memcpy(pr->topic_id, lp->topic_id, 16);
        pr->partition = lp->partition;
        pr->offset = -1;
        pr->leader_epoch = -1;
        if (denied && denied[k]) {
            pr->error = KQ_ERR_TOPIC_AUTHORIZATION_FAILED;
            continue;
        }
        size_t i = kq_rm_find(dp->rm, lp->topic_id, lp->partition);
        kq_replica *r = i == SIZE_MAX ? NULL : kq_rm_replica_mut(dp->rm, i);
        if (r == NULL) {
            pr->error = dp_not_hosted_error(img, lp->topic_id, lp->partition);
            continue;
        }
        kq_replica_status st;
        kq_replica_get_status(r, &st);
        if (st.role != KQ_REPLICA_LEADER) {
            pr->error = KQ_ERR_NOT_LEADER_OR_FOLLOWER;
            continue;
        }
        if (lp->current_leader_epoch >= 0 && lp->current_leader_epoch != st.leader_epoch) {
            pr->error = lp->current_leader_epoch < st.leader_epoch ? KQ_ERR_FENCED_LEADER_EPOCH
                                                                   : KQ_ERR_UNKNOWN_LEADER_EPOCH;
            continue;
        }
        pr->leader_epoch = st.leader_epoch;
        if (lp->timestamp == KQ_DATA_EARLIEST_TIMESTAMP)
            pr->offset = st.log_start_offset;
        else
            pr->offset = lr->replica_id >= 0 ? st.log_end_offset : kq_replica_readable_end(r);
    }
    kq_list_offsets_response resp;
    memset(&resp, 0, sizeof(resp));
    resp.partitions = res;
    resp.n_partitions = n;
    dp_queue_answer(dp, req, KQ_API_LIST_OFFSETS, kq_data_encode_list_offsets_response(&resp, &out),
                    &out);
    kq_buf_free(&out);
    free(res);
}

/* ---------- Metadata ---------- */

typedef struct md_build {
    kq_data_metadata_topic *topics;
    size_t n_topics;
    kq_data_metadata_partition *parts; /* all topics' partitions */
    size_t n_parts;
    kq_data_metadata_broker *brokers;
    size_t n_brokers;
} md_build;

static void md_build_free(md_build *m)
{
    free(m->topics);
    free(m->parts);
    free(m->brokers);
}

static int md_add_topic(md_build *m, const kq_topic *t, const char *name, size_t *cap_t,
                        size_t *cap_p)
{
    if (dp_grow((void **)&m->topics, cap_t, m->n_topics, sizeof(*m->topics)) != 0)
        return KQ_ERR_NOMEM;
    kq_data_metadata_topic *mt = &m->topics[m->n_topics++];
    memset(mt, 0, sizeof(*mt));
    mt->name = name;
    if (t == NULL) {
        mt->error = KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        return 0;
    }
    memcpy(mt->topic_id, t->id, 16);
    /* Partitions go into the shared array; the topic points into it once it is complete. */
    mt->n_partitions = (size_t)t->n_partitions;
    for (int32_t k = 0; k < t->n_partitions; k++) {
        if (dp_grow((void **)&m->parts, cap_p, m->n_parts, sizeof(*m->parts)) != 0)
            return KQ_ERR_NOMEM;
        const kq_partition *p = &t->partitions[k];
        kq_data_metadata_partition *mp = &m->parts[m->n_parts++];
        memset(mp, 0, sizeof(*mp));
        mp->partition = k;
        mp->leader_id = p->leader;
        mp->leader_epoch = p->leader_epoch;
        mp->error = p->leader < 0 ? KQ_ERR_LEADER_NOT_AVAILABLE : 0;
        mp->replicas = kq_partition_replicas(p);
        mp->n_replicas = p->n_replicas;
        mp->isr = kq_partition_isr(p);
        mp->n_isr = p->n_isr;
    }
    return 0;
}

void dp_handle_metadata(kq_dp *dp, void *req, const kq_data_metadata_request *mr,
                        const kq_image *img, const char *principal)
{
    char msg[900];
    md_build m;
    size_t cap_t = 0, cap_p = 0, cap_b = 0;
    kq_buf out = {0};
    int rc = 0;
    memset(&m, 0, sizeof(m));
    if (img == NULL) {
        dp_reply_error(dp, req, KQ_API_METADATA, KQ_ERR_BROKER_NOT_AVAILABLE,
                       "this broker has not loaded the metadata yet");
        return;
    }
    for (const kq_broker *b = kq_image_broker_next(img, NULL); b != NULL && rc == 0;
         b = kq_image_broker_next(img, b)) {
        if (b->n_endpoints < 1)
            continue;
        if ((rc = dp_grow((void **)&m.brokers, &cap_b, m.n_brokers, sizeof(*m.brokers))) != 0)
            break;
        kq_data_metadata_broker *mb = &m.brokers[m.n_brokers++];
        mb->id = b->id;
        mb->host = b->endpoints[0].host;
        mb->port = b->endpoints[0].port;
        mb->rack = b->rack;
    }
    if (mr->n_topics == 0) { /* every topic: the ones the client may describe (Kafka) */
        for (const kq_topic *t = kq_image_topic_next(img, NULL); t != NULL && rc == 0;
             t = kq_image_topic_next(img, t))
            if (!dp_topic_allowed(dp, img, principal, KQ_ACL_OP_DESCRIBE, NULL, t->name, msg,
                                  sizeof msg))
                rc = md_add_topic(&m, t, t->name, &cap_t, &cap_p);
    } else {
        bool any_refused = false;

        for (size_t k = 0; k < mr->n_topics && rc == 0; k++) {
            int refused = dp_topic_allowed(dp, img, principal, KQ_ACL_OP_DESCRIBE, NULL,
                                           mr->topics[k], msg, sizeof msg);

            rc = md_add_topic(&m, refused ? NULL : kq_image_topic_by_name(img, mr->topics[k]),
                              mr->topics[k], &cap_t, &cap_p);
            if (!rc && refused) /* whether it exists or not */
                m.topics[m.n_topics - 1].error = refused;
            any_refused |= refused != 0;
        }
        if (any_refused) { /* counted and logged as a request with a refusal */
            dp->counts.refused_requests++;
            kq_log_refusal("broker", principal ? principal : KQ_PRINCIPAL_ANONYMOUS, msg);
        }
    }
    if (rc != 0) {
        dp_oom(dp, "metadata answer");
        goto out;
    }
    size_t at = 0;
    for (size_t k = 0; k < m.n_topics; k++) {
        if (m.topics[k].error != 0)
            continue;
        m.topics[k].partitions = m.parts + at;
        at += m.topics[k].n_partitions;
    }
    kq_data_metadata_response resp;
    memset(&resp, 0, sizeof(resp));
    resp.brokers = m.brokers;
    resp.n_brokers = m.n_brokers;
    resp.topics = m.topics;
    resp.n_topics = m.n_topics;
    dp_queue_answer(dp, req, KQ_API_METADATA, kq_data_encode_metadata_response(&resp, &out), &out);
out:
    kq_buf_free(&out);
    md_build_free(&m);
}
