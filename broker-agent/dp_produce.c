/*
 * The data plane serving Produce: checks, idempotence, acks 0/1/all and min.insync.replicas,
 * parking until the high watermark passes. See dp_internal.h.
 */
#include "dp_internal.h"

/* ---------- Produce ---------- */

int32_t dp_image_leader(const kq_image *img, const uint8_t topic_id[16], int32_t partition,
                        int32_t *epoch)
{
    const kq_partition *ip = img != NULL ? kq_image_partition(img, topic_id, partition) : NULL;
    *epoch = ip != NULL ? ip->leader_epoch : -1;
    return ip != NULL ? ip->leader : -1;
}

/* The error for a partition this broker does not host. */
int dp_not_hosted_error(const kq_image *img, const uint8_t topic_id[16], int32_t partition)
{
    if (img == NULL || kq_image_partition(img, topic_id, partition) == NULL)
        return KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    return KQ_ERR_NOT_LEADER_OR_FOLLOWER;
}

void dp_handle_produce(kq_dp *dp, void *req, const kq_produce_request *pr, const kq_image *img,
                       uint64_t now)
{
    kq_buf payload = {0};
    kq_replica_update u;
    char msg[256];
    dp->counts.produce_requests++;
    size_t i = kq_rm_find(dp->rm, pr->topic_id, pr->partition);
    kq_replica *r = i == SIZE_MAX ? NULL : kq_rm_replica_mut(dp->rm, i);
    if (r == NULL) {
        int err = dp_not_hosted_error(img, pr->topic_id, pr->partition);
        dp_reply_produce(dp, req, err, -1, -1, kq_err_message(err));
        goto out;
    }
    kq_replica_status st;
    kq_replica_get_status(r, &st);
    dp_part *p = dp_part_get(dp, pr->topic_id, pr->partition);
    if (p == NULL)
        goto out;
    if (st.role == KQ_REPLICA_LEADER && pr->producer_id >= 0) {
        if (!p->producers_loaded) {
            int rc = dp_producers_load(dp, p);
            if (rc != 0) {
                snprintf(msg, sizeof(msg), "cannot rebuild the producer state: %s",
                         kq_err_message(rc));
                dp_reply_produce(dp, req, KQ_ERR_KAFKA_STORAGE_ERROR, -1, -1, msg);
                goto out;
            }
        }
        const dp_producer *e = dp_producer_find(p, pr->producer_id);
        if (e != NULL && pr->producer_epoch < e->epoch) {
            snprintf(msg, sizeof(msg), "producer %lld epoch %d is older than its epoch %d",
                     (long long)pr->producer_id, pr->producer_epoch, e->epoch);
            dp_reply_produce(dp, req, KQ_ERR_INVALID_PRODUCER_EPOCH, -1, -1, msg);
            goto out;
        }
        if (e != NULL && pr->producer_epoch == e->epoch) {
            for (int k = 0; k < e->n_recent; k++) {
                const dp_recent *d = &e->recent[k];
                if (d->base_seq != pr->base_sequence || d->count != (int32_t)pr->n_records)
                    continue;
                /* A retry of a batch already written: answer with its offset once it is
                 * committed; until then the producer retries. */
                if (d->base_offset + d->count <= st.high_watermark || pr->acks != -1)
                    dp_reply_produce(dp, req, 0, d->base_offset, st.log_start_offset, NULL);
                else if (kq_min_isr_cmp(st.n_isr, st.min_insync_replicas, st.n_replicas) < 0) {
                    snprintf(msg, sizeof(msg),
                             "duplicate of the batch at offset %lld, which cannot be committed "
                             "while the ISR (%d) is below min.insync.replicas (%d)",
                             (long long)d->base_offset, st.n_isr, st.min_insync_replicas);
                    dp_reply_produce(dp, req, KQ_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND, -1, -1, msg);
                } else {
                    snprintf(msg, sizeof(msg),
                             "duplicate of the batch at offset %lld, not committed yet; retry",
                             (long long)d->base_offset);
                    dp_reply_produce(dp, req, KQ_ERR_REQUEST_TIMED_OUT, -1, -1, msg);
                }
                goto out;
            }
            if (pr->base_sequence != e->last_seq + 1) {
                snprintf(msg, sizeof(msg),
                         "producer %lld: sequence %d, expected %d (records are missing)",
                         (long long)pr->producer_id, pr->base_sequence, e->last_seq + 1);
                dp_reply_produce(dp, req, KQ_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, -1, -1, msg);
                goto out;
            }
        }
    }
    if (pr->acks == -1 && st.role == KQ_REPLICA_LEADER &&
        dp->n_parked + dp->n_fetches >= dp->cfg.max_waiting) {
        snprintf(msg, sizeof(msg),
                 "broker busy: %zu requests already wait for replication or new records; retry",
                 dp->n_parked + dp->n_fetches);
        dp_reply_produce(dp, req, KQ_ERR_REQUEST_TIMED_OUT, -1, -1, msg);
        goto out;
    }
    if (kq_data_records_pack(pr->records, pr->record_lens, pr->n_records, &payload) != 0) {
        dp_oom(dp, "produce payload");
        goto out;
    }
    kq_replica_event ev = {.type = KQ_REPLICA_EV_APPEND, .now_ms = now};
    ev.u.append.acks = (int16_t)pr->acks;
    ev.u.append.count = (int32_t)pr->n_records;
    ev.u.append.token = ++dp->token;
    ev.u.append.timeout_ms = (uint32_t)pr->timeout_ms;
    dp_src src = {.payload = payload.data,
                  .payload_len = payload.len,
                  .pid = pr->producer_id,
                  .pepoch = (int16_t)pr->producer_epoch,
                  .base_seq = pr->base_sequence};
    kq_replica *rr = kq_rm_replica_mut(dp->rm, i);
    int rc = kq_replica_step(rr, &ev, &u);
    if (rc != 0) {
        dp_reply_produce(dp, req, KQ_ERR_INVALID_REQUEST, -1, -1, u.reason);
        goto out;
    }
    if (u.produce_parked) {
        if (dp_grow((void **)&dp->parked, &dp->cap_parked, dp->n_parked,
                    sizeof(dp_parked_produce)) != 0) {
            dp_oom(dp, "parked produce");
            goto out;
        }
        dp_parked_produce *pp = &dp->parked[dp->n_parked++];
        pp->token = ev.u.append.token;
        pp->req = req;
        memcpy(pp->topic_id, pr->topic_id, 16);
        pp->partition = pr->partition;
        req = NULL;
    }
    dp_apply(dp, i, rr, &u, &src);
    if (u.has_produce && req != NULL) {
        int err = u.produce.error;
        if (err == KQ_ERR_NOT_LEADER_OR_FOLLOWER) {
            int32_t le;
            int32_t leader = dp_image_leader(img, pr->topic_id, pr->partition, &le);
            snprintf(msg, sizeof(msg), "broker %d is not the leader (leader %d, epoch %d)",
                     dp->cfg.node_id, leader, le);
        }
        dp_reply_produce(
            dp, req, err, u.produce.base_offset, st.log_start_offset,
            err == 0 ? NULL : (err == KQ_ERR_NOT_LEADER_OR_FOLLOWER ? msg : kq_err_message(err)));
        req = NULL;
    }
    if (req != NULL)
        dp_reply_produce(dp, req, KQ_ERR_INTERNAL, -1, -1, "the replica gave no answer");
out:
    kq_buf_free(&payload);
}
