/*
 * The data plane's AlterPartition client: a replica's ISR change sent to the controller, its
 * answer applied. See dp_internal.h.
 */
#include "dp_internal.h"

/* ---------- AlterPartition ---------- */

void dp_pump_alters(kq_dp *dp, int32_t controller, int64_t broker_epoch)
{
    if (controller < 0 || broker_epoch < 0)
        return;
    for (size_t k = 0; k < dp->n_parts; k++) {
        dp_part *p = &dp->parts[k];
        if (!p->alter_pending)
            continue;
        kq_ap_isr_member isr[KQ_REPLICA_MAX_REPLICAS];
        for (int j = 0; j < p->alter.n_new_isr; j++) {
            isr[j].broker_id = p->alter.new_isr[j];
            isr[j].broker_epoch = p->alter.new_isr[j] == dp->cfg.node_id
                                      ? broker_epoch
                                      : p->alter.new_isr_broker_epochs[j];
        }
        kq_ap_partition ap = {.partition_index = p->partition,
                              .leader_epoch = p->alter.leader_epoch,
                              .partition_epoch = p->alter.partition_epoch,
                              .leader_recovery_state = KQ_RECOVERY_RECOVERED,
                              .new_isr = isr,
                              .n_new_isr = p->alter.n_new_isr};
        kq_ap_topic at = {.partitions = &ap, .n_partitions = 1};
        memcpy(at.topic_id, p->topic_id, 16);
        kq_ctl_request req;
        memset(&req, 0, sizeof(req));
        req.api_key = KQ_API_ALTER_PARTITION;
        req.alter_partition.version = 3;
        req.alter_partition.broker_id = dp->cfg.node_id;
        req.alter_partition.broker_epoch = broker_epoch;
        req.alter_partition.topics = &at;
        req.alter_partition.n_topics = 1;
        kq_buf buf = {0};
        int rc = kq_ctl_encode_request(dp->cfg.cluster_id, dp->cfg.node_id, &req, &buf);
        dp_net_ev *ev = rc == 0 ? dp_net_ev_new(dp, DP_NET_ALTER) : NULL;
        if (ev != NULL) {
            memcpy(ev->topic_id, p->topic_id, 16);
            ev->partition = p->partition;
            ev->request_id = p->alter.request_id;
            if (dp->cfg.net.send(dp->cfg.net.ctx, KQ_DP_PEER_CONTROLLER, controller, NULL, buf.data,
                                 buf.len, dp->cfg.request_timeout_ms, ev) == 0) {
                p->alter_pending = false;
                ev = NULL;
            }
        }
        dp_net_ev_free(dp, ev);
        kq_buf_free(&buf);
    }
}

void dp_handle_alter_answer(kq_dp *dp, dp_net_ev *ev, int err_in, const uint8_t *data, size_t len,
                            uint64_t now)
{
    kq_response env;
    kq_alter_partition_result res;
    char err[300] = "";
    memset(&env, 0, sizeof(env));
    memset(&res, 0, sizeof(res));
    kq_replica_event rev = {.type = KQ_REPLICA_EV_ALTER_RESPONSE, .now_ms = now};
    rev.u.alter_resp.request_id = ev->request_id;
    rev.u.alter_resp.leader_id = -1;
    rev.u.alter_resp.leader_epoch = -1;
    rev.u.alter_resp.partition_epoch = -1;
    int rc = err_in;
    if (rc == 0)
        rc = kq_codec_decode_response(data, len, -1, &env, err, sizeof(err));
    if (rc == 0 && env.error != 0)
        rc = env.error;
    else if (rc == 0)
        rc = kq_ctl_decode_alter_partition_response(&env, &res, err, sizeof(err));
    if (rc == 0 && res.error != 0)
        rc = res.error;
    if (rc == 0 && res.n_results >= 1) {
        const kq_ap_result *ar = &res.results[0];
        rev.u.alter_resp.error = ar->error;
        rev.u.alter_resp.leader_id = ar->leader_id;
        rev.u.alter_resp.leader_epoch = ar->leader_epoch;
        rev.u.alter_resp.partition_epoch = ar->partition_epoch;
        rev.u.alter_resp.isr = ar->isr;
        rev.u.alter_resp.n_isr = ar->n_isr;
        if (ar->error != 0)
            KQ_WARN("replica", "AlterPartition refused by the controller", "partition=%d error=%s",
                    ev->partition, kq_err_name(ar->error));
    } else {
        rev.u.alter_resp.error = rc != 0 ? rc : KQ_ERR_INVALID_REQUEST;
        if (rc != KQ_ERR_NOT_CONTROLLER && rc != KQ_ERR_REQUEST_TIMED_OUT &&
            rc != KQ_ERR_NETWORK_EXCEPTION)
            KQ_WARN("replica", "AlterPartition failed", "partition=%d error=%s detail=\"%s\"",
                    ev->partition, kq_err_name(rev.u.alter_resp.error), err);
    }
    size_t i = kq_rm_find(dp->rm, ev->topic_id, ev->partition);
    if (i != SIZE_MAX) {
        kq_replica_update u;
        dp_step(dp, i, &rev, &u, NULL);
    }
    kq_ctl_alter_partition_response_free(&res);
    kq_response_free(&env);
}

void kq_dp_on_answer(kq_dp *dp, void *token, int err, const uint8_t *data, size_t len,
                     uint64_t now_ms)
{
    dp_net_ev *ev = token;
    if (ev->kind == DP_NET_FETCH)
        dp_handle_fetch_answer(dp, ev, err, data, len, now_ms);
    else
        dp_handle_alter_answer(dp, ev, err, data, len, now_ms);
    dp_net_ev_free(dp, ev);
}
