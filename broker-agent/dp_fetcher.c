/*
 * The data plane's follower fetcher: one Fetch at a time to each leader, its answers applied
 * to the replicas. See dp_internal.h.
 */
#include "dp_internal.h"

/* ---------- the follower fetcher ---------- */

/* The fetcher of leader (url: its data-plane listener, from its registration in img). */
static dp_fetcher *fetcher_for(kq_dp *dp, int32_t leader, const kq_image *img, char *url,
                               size_t url_len, uint64_t now)
{
    const kq_broker *br = kq_image_broker(img, leader);
    if (br == NULL || br->n_endpoints < 1)
        return NULL;
    const kq_rec_endpoint *e = &br->endpoints[0];
    kq_security_protocol protocol = KQ_SECURITY_PLAINTEXT;
    /* an endpoint whose listener has no protocol here is not dialed (fail closed) */
    if (dp->cfg.protocols && kq_protocol_of(dp->cfg.protocols, e->name, &protocol, NULL, 0)) {
        if (!dp->unmapped_logged_ms || now >= dp->unmapped_logged_ms + 60000) {
            dp->unmapped_logged_ms = now ? now : 1;
            KQ_WARN("replica",
                    "not fetching from a leader whose listener has no protocol here; add it to "
                    "listener.security.protocol.map",
                    "leader=%d listener=%s", leader, e->name);
        }
        return NULL;
    }
    snprintf(url, url_len, strchr(e->host, ':') ? "%s[%.250s]:%d" : "%s%.250s:%d",
             kq_protocol_scheme(protocol), e->host, e->port);
    dp_fetcher *f = NULL;
    for (int i = 0; i < dp->n_fetchers && f == NULL; i++)
        if (dp->fetchers[i].leader == leader)
            f = &dp->fetchers[i];
    if (f == NULL) {
        if (dp->n_fetchers == DP_MAX_FETCHERS)
            return NULL;
        f = &dp->fetchers[dp->n_fetchers++];
        memset(f, 0, sizeof(*f));
        f->leader = leader;
    }
    return f;
}

void dp_pump_fetchers(kq_dp *dp, const kq_image *img, int64_t broker_epoch, uint64_t now)
{
    size_t n = 0;
    const kq_rm_partition *hp = kq_rm_partitions(dp->rm, &n);
    if (broker_epoch < 0 || n == 0 || img == NULL)
        return;
    kq_data_fetch_partition *fps = calloc(n, sizeof(*fps));
    int32_t *leaders = calloc(n, sizeof(*leaders));
    bool *done = calloc(n, sizeof(*done));
    kq_buf buf = {0};
    if (fps == NULL || leaders == NULL || done == NULL) {
        dp_oom(dp, "fetch requests");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        kq_replica_fetch_request fr;
        const kq_replica *r = kq_rm_replica(dp->rm, i);
        leaders[i] = -1;
        if (r != NULL && kq_replica_next_fetch(r, &fr)) {
            kq_replica_status st;
            kq_replica_get_status(r, &st);
            leaders[i] = fr.leader_id;
            kq_data_fetch_partition *fp = &fps[i];
            memcpy(fp->topic_id, hp[i].topic_id, 16);
            fp->partition = hp[i].partition;
            fp->current_leader_epoch = fr.current_leader_epoch;
            fp->fetch_offset = fr.fetch_offset;
            fp->last_fetched_epoch = fr.last_fetched_epoch;
            fp->log_start_offset =
                st.log_start_offset <= fr.fetch_offset ? st.log_start_offset : -1;
            fp->partition_max_bytes = (int32_t)dp->cfg.replica_fetch_max_bytes;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (leaders[i] < 0 || done[i])
            continue;
        int32_t leader = leaders[i];
        /* Gather this leader's partitions at the front of a scratch range. */
        size_t m = 0;
        kq_data_fetch_partition *batch = calloc(n - i, sizeof(*batch));
        if (batch == NULL) {
            dp_oom(dp, "fetch request");
            goto out;
        }
        for (size_t j = i; j < n; j++) {
            if (leaders[j] != leader || done[j])
                continue;
            done[j] = true;
            batch[m++] = fps[j];
        }
        char url[300];
        dp_fetcher *f = fetcher_for(dp, leader, img, url, sizeof(url), now);
        if (f == NULL || f->in_flight || now < f->backoff_until) {
            free(batch);
            continue;
        }
        kq_data_fetch_request req = {.replica_id = dp->cfg.node_id,
                                     .broker_epoch = broker_epoch,
                                     .max_wait_ms = (int32_t)dp->cfg.replica_fetch_wait_max_ms,
                                     .min_bytes = 1,
                                     .max_bytes = (int32_t)dp->cfg.replica_fetch_max_bytes,
                                     .partitions = batch,
                                     .n_partitions = m};
        kq_buf_free(&buf);
        int rc = kq_data_encode_fetch_request(dp->cfg.cluster_id, dp->cfg.node_id, &req, &buf);
        dp_net_ev *ev = rc == 0 ? dp_net_ev_new(dp, DP_NET_FETCH) : NULL;
        if (ev == NULL) {
            KQ_WARN("replica", "cannot build a fetch request", "leader=%d error=%s", leader,
                    kq_err_name(rc ? rc : KQ_ERR_NOMEM));
            free(batch);
            continue;
        }
        ev->leader = leader;
        ev->sent = calloc(m, sizeof(*ev->sent));
        if (ev->sent == NULL) {
            dp_net_ev_free(dp, ev);
            free(batch);
            dp_oom(dp, "fetch request");
            continue;
        }
        for (size_t j = 0; j < m; j++) {
            memcpy(ev->sent[j].topic_id, batch[j].topic_id, 16);
            ev->sent[j].partition = batch[j].partition;
            ev->sent[j].fetch_offset = batch[j].fetch_offset;
            ev->sent[j].leader_epoch = batch[j].current_leader_epoch;
        }
        ev->n_sent = m;
        free(batch);
        uint32_t timeout = dp->cfg.replica_fetch_wait_max_ms + dp->cfg.request_timeout_ms;
        if (dp->cfg.net.send(dp->cfg.net.ctx, KQ_DP_PEER_BROKER, leader, url, buf.data, buf.len,
                             timeout, ev) != 0) {
            dp_net_ev_free(dp, ev);
            f->backoff_until = now + DP_FETCH_BACKOFF_MS * 10; /* cannot even connect */
            continue;
        }
        f->in_flight = true;
    }
out:
    kq_buf_free(&buf);
    free(fps);
    free(leaders);
    free(done);
}

void dp_handle_fetch_answer(kq_dp *dp, dp_net_ev *ev, int err_in, const uint8_t *data, size_t len,
                            uint64_t now)
{
    kq_data_fetch_response resp;
    char err[300];
    dp_fetcher *f = NULL;
    memset(&resp, 0, sizeof(resp));
    for (int i = 0; i < dp->n_fetchers; i++)
        if (dp->fetchers[i].leader == ev->leader)
            f = &dp->fetchers[i];
    if (f != NULL)
        f->in_flight = false;
    int rc = err_in;
    if (rc == 0)
        rc = kq_data_decode_fetch_response(data, len, &resp, err, sizeof(err));
    else
        snprintf(err, sizeof(err), "%s", kq_err_message(rc));
    if (rc == 0 && resp.error != 0) {
        rc = resp.error;
        snprintf(err, sizeof(err), "%s", resp.error_message);
    }
    if (rc != 0) {
        if (rc != KQ_ERR_REQUEST_TIMED_OUT && rc != KQ_ERR_NETWORK_EXCEPTION)
            KQ_WARN("replica", "fetch from the leader failed", "leader=%d error=%s detail=\"%s\"",
                    ev->leader, kq_err_name(rc), err);
        if (f != NULL)
            f->backoff_until = now + DP_FETCH_BACKOFF_MS;
        goto out;
    }
    bool all_errors = resp.n_partitions > 0;
    for (size_t k = 0; k < resp.n_partitions; k++) {
        const kq_data_fetch_partition_result *pr = &resp.partitions[k];
        size_t i = kq_rm_find(dp->rm, pr->topic_id, pr->partition);
        const kq_replica *r = i == SIZE_MAX ? NULL : kq_rm_replica(dp->rm, i);
        kq_replica_fetch_request fr;
        /* The leader answers in request order: look at the same position first. */
        const dp_sent *sent = NULL;
        for (size_t j = 0; j < ev->n_sent && sent == NULL; j++) {
            const dp_sent *c = &ev->sent[(k + j) % ev->n_sent];
            if (c->partition == pr->partition && memcmp(c->topic_id, pr->topic_id, 16) == 0)
                sent = c;
        }
        if (r == NULL || sent == NULL || !kq_replica_next_fetch(r, &fr) ||
            fr.leader_id != ev->leader)
            continue; /* not asked, or no longer following this leader */
        kq_replica_batch rb[KQ_REPLICA_MAX_BATCHES];
        size_t nb = pr->n_batches < KQ_REPLICA_MAX_BATCHES ? pr->n_batches : KQ_REPLICA_MAX_BATCHES;
        for (size_t b = 0; b < nb; b++)
            rb[b] = (kq_replica_batch){pr->batches[b].base_offset, pr->batches[b].leader_epoch,
                                       pr->batches[b].count, pr->batches[b].records,
                                       pr->batches[b].len};
        kq_replica_event rev = {.type = KQ_REPLICA_EV_FETCH_RESPONSE, .now_ms = now};
        rev.u.fetch_resp.error = pr->error;
        rev.u.fetch_resp.fetch_offset = sent->fetch_offset;
        rev.u.fetch_resp.leader_epoch = sent->leader_epoch;
        rev.u.fetch_resp.high_watermark = pr->high_watermark;
        rev.u.fetch_resp.log_start_offset = pr->log_start_offset;
        rev.u.fetch_resp.diverging = pr->diverging_epoch >= 0;
        rev.u.fetch_resp.diverging_epoch = pr->diverging_epoch;
        rev.u.fetch_resp.diverging_end_offset = pr->diverging_end_offset;
        rev.u.fetch_resp.batches = rb;
        rev.u.fetch_resp.n_batches = nb;
        if (pr->error == 0)
            all_errors = false;
        dp_src src = {.batches = pr->batches, .n_batches = nb};
        kq_replica_update u;
        dp_step(dp, i, &rev, &u, &src);
    }
    if (all_errors && f != NULL)
        f->backoff_until = now + DP_FETCH_BACKOFF_MS;
    else if (f != NULL && dp->cfg.test_fetch_delay_ms > 0)
        f->backoff_until = now + dp->cfg.test_fetch_delay_ms;
out:
    kq_data_fetch_response_free(&resp);
}
