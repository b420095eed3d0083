/*
 * The broker agent's data plane: see data_plane.h.
 */
#include "data_plane.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/codec.h"
#include "kq/ctl_codec.h"
#include "kq/data_codec.h"
#include "kq/error.h"
#include "kq/log.h"
#include "kq/plog.h"
#include "kq/replica.h"
#include "kq/util.h"

#define DP_RECENT 5                /* batches remembered per producer for duplicates */
#define DP_MAX_PRODUCERS 10000     /* producer ids remembered per partition */
#define DP_MAX_FETCHERS 64         /* leaders fetched from at once */
#define DP_MAX_WAIT_MS 30000u      /* longest long-poll a client may ask for */
#define DP_FETCH_BACKOFF_MS 100u   /* after a failed fetch */
#define DP_READ_CHUNK (1u << 20)   /* producer-state rebuild reads */
#define DP_METADATA_LISTENER_MAX 8 /* endpoints copied per broker */

enum { DP_NET_FETCH = 1, DP_NET_ALTER };

typedef struct dp_recent {
    int32_t base_seq;
    int32_t count;
    int64_t base_offset;
} dp_recent;

typedef struct dp_producer {
    int64_t pid;
    int16_t epoch;
    int32_t last_seq; /* sequence of the last record written */
    int64_t last_offset;
    dp_recent recent[DP_RECENT];
    int n_recent, next_recent;
} dp_producer;

/* Data-plane state of one hosted partition (kept while hosted; looked up by topic id). */
typedef struct dp_part {
    uint8_t topic_id[16];
    int32_t partition;
    uint64_t deadline;
    bool dirty; /* written in the open transaction: step PERSISTED after the commit */
    int64_t hw;
    int64_t hw_ckpt;
    bool producers_loaded;
    dp_producer *producers;
    size_t n_producers, cap_producers;
    bool alter_pending; /* an AlterPartition to send */
    kq_replica_alter_request alter;
} dp_part;

typedef struct dp_parked_produce {
    uint64_t token;
    kq_rpc_req *req;
    uint8_t topic_id[16];
    int32_t partition;
} dp_parked_produce;

typedef struct dp_parked_fetch {
    kq_rpc_req *req;
    kq_data_request r;
    uint64_t deadline;
} dp_parked_fetch;

typedef struct dp_reply {
    kq_rpc_req *req;
    kq_buf buf;
} dp_reply;

/* One partition of a follower Fetch in flight: its answer is matched against what was asked
 * (a stale answer, for another offset or leader epoch, is dropped by the replica). */
typedef struct dp_sent {
    uint8_t topic_id[16];
    int32_t partition;
    int64_t fetch_offset;
    int32_t leader_epoch;
} dp_sent;

typedef struct dp_fetcher {
    int32_t leader;
    char url[300];
    kq_rpc_client *c;
    bool in_flight;
    uint64_t backoff_until;
} dp_fetcher;

/* An answer from another node (a fetch from a leader, or the controller's AlterPartition
 * answer), built on an nng thread and handed to the loop. */
typedef struct dp_net_ev {
    int kind;
    kq_dp *dp;
    int err;
    uint8_t *data;
    size_t len;
    int32_t leader; /* FETCH */
    dp_sent *sent;  /* FETCH: what was asked, per partition (owned) */
    size_t n_sent;
    uint8_t topic_id[16]; /* ALTER */
    int32_t partition;    /* ALTER */
    uint64_t request_id;  /* ALTER */
} dp_net_ev;

struct kq_dp {
    kq_dp_config cfg;
    kq_rm *rm;
    kq_plog *plog;
    dp_part *parts;
    size_t n_parts, cap_parts;
    dp_parked_produce *parked;
    size_t n_parked, cap_parked;
    dp_parked_fetch *fetches;
    size_t n_fetches, cap_fetches;
    dp_reply *replies;
    size_t n_replies, cap_replies;
    dp_fetcher fetchers[DP_MAX_FETCHERS];
    int n_fetchers;
    uint64_t token;
    bool wake;            /* some partition changed: retry parked fetches */
    uint64_t brokers_sig; /* registrations last passed to the leaders (kq_dp_after_metadata) */
    kq_dp_counts counts;
};

static void on_rm_update(void *arg, const kq_rm_partition *hp, kq_replica *r,
                         const kq_replica_update *u);

/* Growth helper for the arrays above. */
static int grow(void **v, size_t *cap, size_t n, size_t elem)
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

static void oom(kq_dp *dp, const char *what)
{
    dp->cfg.fatal("out of memory", what);
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
    for (int i = 0; i < dp->n_fetchers; i++)
        kq_rpc_client_close(dp->fetchers[i].c);
    for (size_t i = 0; i < dp->n_parts; i++)
        free(dp->parts[i].producers);
    for (size_t i = 0; i < dp->n_parked; i++)
        kq_rpc_req_drop(dp->parked[i].req);
    for (size_t i = 0; i < dp->n_fetches; i++) {
        kq_rpc_req_drop(dp->fetches[i].req);
        kq_data_request_free(&dp->fetches[i].r);
    }
    for (size_t i = 0; i < dp->n_replies; i++) {
        kq_rpc_req_drop(dp->replies[i].req);
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
static dp_part *part_get(kq_dp *dp, const uint8_t topic_id[16], int32_t partition)
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
    if (grow((void **)&dp->parts, &dp->cap_parts, dp->n_parts, sizeof(dp_part)) != 0) {
        oom(dp, "partition state");
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

static kq_plog_tp tp_make(const uint8_t topic_id[16], int32_t partition)
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

static void queue_reply(kq_dp *dp, kq_rpc_req *req, kq_buf *buf)
{
    if (grow((void **)&dp->replies, &dp->cap_replies, dp->n_replies, sizeof(dp_reply)) != 0) {
        oom(dp, "reply queue");
        return;
    }
    dp->replies[dp->n_replies].req = req;
    dp->replies[dp->n_replies].buf = *buf;
    dp->n_replies++;
    memset(buf, 0, sizeof(*buf));
}

/* Queue an answer encoded with result rc; an answer that could not be encoded is dropped (the
 * client times out). */
static void queue_encoded(kq_dp *dp, kq_rpc_req *req, int rc, kq_buf *out)
{
    if (rc != 0) {
        kq_rpc_req_drop(req);
        kq_buf_free(out);
        return;
    }
    queue_reply(dp, req, out);
}

static void reply_error(kq_dp *dp, kq_rpc_req *req, uint32_t api, int err, const char *msg)
{
    kq_buf out = {0};
    queue_encoded(dp, req, kq_codec_encode_error_response(api, err, msg, -1, -1, NULL, &out), &out);
}

/* Queue an answer to api encoded with result rc; if it could not be encoded, answer INTERNAL. */
static void queue_answer(kq_dp *dp, kq_rpc_req *req, uint32_t api, int rc, kq_buf *out)
{
    if (rc == 0) {
        queue_reply(dp, req, out);
        return;
    }
    kq_buf_free(out);
    reply_error(dp, req, api, KQ_ERR_INTERNAL, "cannot encode the answer");
}

static void reply_produce(kq_dp *dp, kq_rpc_req *req, int err, int64_t base_offset,
                          int64_t log_start, const char *msg)
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

/* ---------- producer state (idempotence) ---------- */

static dp_producer *producer_find(dp_part *p, int64_t pid)
{
    for (size_t i = 0; i < p->n_producers; i++)
        if (p->producers[i].pid == pid)
            return &p->producers[i];
    return NULL;
}

static void producer_note(kq_dp *dp, dp_part *p, int64_t pid, int16_t epoch, int32_t base_seq,
                          int32_t count, int64_t base_offset)
{
    if (pid < 0)
        return;
    dp_producer *e = producer_find(p, pid);
    if (e == NULL) {
        if (p->n_producers == DP_MAX_PRODUCERS) {
            /* Forget the producer that wrote longest ago. */
            size_t old = 0;
            for (size_t i = 1; i < p->n_producers; i++)
                if (p->producers[i].last_offset < p->producers[old].last_offset)
                    old = i;
            p->producers[old] = p->producers[--p->n_producers];
        }
        if (grow((void **)&p->producers, &p->cap_producers, p->n_producers, sizeof(dp_producer)) !=
            0) {
            oom(dp, "producer state");
            return;
        }
        e = &p->producers[p->n_producers++];
        memset(e, 0, sizeof(*e));
        e->pid = pid;
    }
    if (epoch != e->epoch) {
        e->n_recent = e->next_recent = 0;
        e->epoch = epoch;
    }
    e->last_seq = base_seq + count - 1;
    e->last_offset = base_offset + count - 1;
    e->recent[e->next_recent] = (dp_recent){base_seq, count, base_offset};
    e->next_recent = (e->next_recent + 1) % DP_RECENT;
    if (e->n_recent < DP_RECENT)
        e->n_recent++;
}

typedef struct rebuild_ctx {
    kq_dp *dp;
    dp_part *p;
    int64_t next;
} rebuild_ctx;

static int rebuild_cb(void *arg, const kq_plog_batch *b)
{
    rebuild_ctx *c = arg;
    producer_note(c->dp, c->p, b->producer_id, b->producer_epoch, b->base_sequence, b->count,
                  b->base_offset);
    c->next = b->base_offset + b->count;
    return 0;
}

/* Rebuild the producer state of p from its whole log (first Produce after becoming leader or
 * after a truncation). */
static int producers_load(kq_dp *dp, dp_part *p)
{
    kq_plog_tp tp = tp_make(p->topic_id, p->partition);
    kq_plog_state st;
    int rc = kq_plog_state_of(dp->plog, &tp, &st);
    if (rc != 0)
        return rc;
    p->n_producers = 0;
    rebuild_ctx c = {dp, p, st.log_start_offset};
    while (c.next < st.log_end_offset) {
        int64_t before = c.next;
        rc = kq_plog_read(dp->plog, &tp, c.next, st.log_end_offset, DP_READ_CHUNK, rebuild_cb, &c);
        if (rc != 0)
            return rc;
        if (c.next == before)
            return KQ_ERR_INTERNAL;
    }
    p->producers_loaded = true;
    return 0;
}

/* ---------- applying a replica's update ---------- */

/* Where the records of an update's appends come from. */
typedef struct dp_src {
    /* APPEND: the Produce's packed records and producer fields */
    const uint8_t *payload;
    size_t payload_len;
    int64_t pid;
    int16_t pepoch;
    int32_t base_seq;
    /* FETCH_RESPONSE: the leader's batches */
    const kq_data_batch *batches;
    size_t n_batches;
} dp_src;

static void answer_parked_produce(kq_dp *dp, const kq_replica_completion *c, int64_t log_start)
{
    for (size_t k = 0; k < dp->n_parked; k++) {
        if (dp->parked[k].token != c->token)
            continue;
        reply_produce(dp, dp->parked[k].req, c->error, c->base_offset, log_start,
                      c->error ? kq_err_message(c->error) : NULL);
        dp->parked[k] = dp->parked[--dp->n_parked];
        return;
    }
}

static int write_appends(kq_dp *dp, dp_part *p, const kq_replica_update *u, const dp_src *src,
                         char *err, size_t errlen)
{
    kq_plog_tp tp = tp_make(p->topic_id, p->partition);
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
            producer_note(dp, p, b.producer_id, b.producer_epoch, b.base_sequence, b.count,
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
static void apply(kq_dp *dp, size_t i, kq_replica *r, const kq_replica_update *u, const dp_src *src)
{
    size_t n_hosted = 0;
    const kq_rm_partition *hp = kq_rm_partitions(dp->rm, &n_hosted);
    if (i >= n_hosted)
        return;
    dp_part *p = part_get(dp, hp[i].topic_id, hp[i].partition);
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
static int step(kq_dp *dp, size_t i, const kq_replica_event *ev, kq_replica_update *u,
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
    apply(dp, i, r, u, src);
    return 0;
}

/* The replica manager's metadata steps (log already written by the manager). */
static void on_rm_update(void *arg, const kq_rm_partition *hp, kq_replica *r,
                         const kq_replica_update *u)
{
    kq_dp *dp = arg;
    /* The hosted set is being replaced: find p's state by id, not by index. */
    dp_part *p = part_get(dp, hp->topic_id, hp->partition);
    if (p == NULL)
        return;
    if (u->reset_log_start >= 0 || u->truncate_to >= 0 || u->epochs_changed)
        p->dirty = true; /* durable end may have moved: step PERSISTED after the next commit */
    note_update(dp, p, r, u);
}

/* ---------- Produce ---------- */

static int32_t image_leader(const kq_image *img, const uint8_t topic_id[16], int32_t partition,
                            int32_t *epoch)
{
    const kq_partition *ip = img != NULL ? kq_image_partition(img, topic_id, partition) : NULL;
    *epoch = ip != NULL ? ip->leader_epoch : -1;
    return ip != NULL ? ip->leader : -1;
}

/* The error for a partition this broker does not host. */
static int not_hosted_error(const kq_image *img, const uint8_t topic_id[16], int32_t partition)
{
    if (img == NULL || kq_image_partition(img, topic_id, partition) == NULL)
        return KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    return KQ_ERR_NOT_LEADER_OR_FOLLOWER;
}

static void handle_produce(kq_dp *dp, kq_rpc_req *req, const kq_produce_request *pr,
                           const kq_image *img, uint64_t now)
{
    kq_buf payload = {0};
    kq_replica_update u;
    char msg[256];
    dp->counts.produce_requests++;
    size_t i = kq_rm_find(dp->rm, pr->topic_id, pr->partition);
    kq_replica *r = i == SIZE_MAX ? NULL : kq_rm_replica_mut(dp->rm, i);
    if (r == NULL) {
        int err = not_hosted_error(img, pr->topic_id, pr->partition);
        reply_produce(dp, req, err, -1, -1, kq_err_message(err));
        goto out;
    }
    kq_replica_status st;
    kq_replica_get_status(r, &st);
    dp_part *p = part_get(dp, pr->topic_id, pr->partition);
    if (p == NULL)
        goto out;
    if (st.role == KQ_REPLICA_LEADER && pr->producer_id >= 0) {
        if (!p->producers_loaded) {
            int rc = producers_load(dp, p);
            if (rc != 0) {
                snprintf(msg, sizeof(msg), "cannot rebuild the producer state: %s",
                         kq_err_message(rc));
                reply_produce(dp, req, KQ_ERR_KAFKA_STORAGE_ERROR, -1, -1, msg);
                goto out;
            }
        }
        const dp_producer *e = producer_find(p, pr->producer_id);
        if (e != NULL && pr->producer_epoch < e->epoch) {
            snprintf(msg, sizeof(msg), "producer %lld epoch %d is older than its epoch %d",
                     (long long)pr->producer_id, pr->producer_epoch, e->epoch);
            reply_produce(dp, req, KQ_ERR_INVALID_PRODUCER_EPOCH, -1, -1, msg);
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
                    reply_produce(dp, req, 0, d->base_offset, st.log_start_offset, NULL);
                else if (kq_min_isr_cmp(st.n_isr, st.min_insync_replicas, st.n_replicas) < 0) {
                    snprintf(msg, sizeof(msg),
                             "duplicate of the batch at offset %lld, which cannot be committed "
                             "while the ISR (%d) is below min.insync.replicas (%d)",
                             (long long)d->base_offset, st.n_isr, st.min_insync_replicas);
                    reply_produce(dp, req, KQ_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND, -1, -1, msg);
                } else {
                    snprintf(msg, sizeof(msg),
                             "duplicate of the batch at offset %lld, not committed yet; retry",
                             (long long)d->base_offset);
                    reply_produce(dp, req, KQ_ERR_REQUEST_TIMED_OUT, -1, -1, msg);
                }
                goto out;
            }
            if (pr->base_sequence != e->last_seq + 1) {
                snprintf(msg, sizeof(msg),
                         "producer %lld: sequence %d, expected %d (records are missing)",
                         (long long)pr->producer_id, pr->base_sequence, e->last_seq + 1);
                reply_produce(dp, req, KQ_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, -1, -1, msg);
                goto out;
            }
        }
    }
    if (pr->acks == -1 && st.role == KQ_REPLICA_LEADER &&
        dp->n_parked + dp->n_fetches >= dp->cfg.max_waiting) {
        snprintf(msg, sizeof(msg),
                 "broker busy: %zu requests already wait for replication or new records; retry",
                 dp->n_parked + dp->n_fetches);
        reply_produce(dp, req, KQ_ERR_REQUEST_TIMED_OUT, -1, -1, msg);
        goto out;
    }
    if (kq_data_records_pack(pr->records, pr->record_lens, pr->n_records, &payload) != 0) {
        oom(dp, "produce payload");
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
        reply_produce(dp, req, KQ_ERR_INVALID_REQUEST, -1, -1, u.reason);
        goto out;
    }
    if (u.produce_parked) {
        if (grow((void **)&dp->parked, &dp->cap_parked, dp->n_parked, sizeof(dp_parked_produce)) !=
            0) {
            oom(dp, "parked produce");
            goto out;
        }
        dp_parked_produce *pp = &dp->parked[dp->n_parked++];
        pp->token = ev.u.append.token;
        pp->req = req;
        memcpy(pp->topic_id, pr->topic_id, 16);
        pp->partition = pr->partition;
        req = NULL;
    }
    apply(dp, i, rr, &u, &src);
    if (u.has_produce && req != NULL) {
        int err = u.produce.error;
        if (err == KQ_ERR_NOT_LEADER_OR_FOLLOWER) {
            int32_t le;
            int32_t leader = image_leader(img, pr->topic_id, pr->partition, &le);
            snprintf(msg, sizeof(msg), "broker %d is not the leader (leader %d, epoch %d)",
                     dp->cfg.node_id, leader, le);
        }
        reply_produce(
            dp, req, err, u.produce.base_offset, st.log_start_offset,
            err == 0 ? NULL : (err == KQ_ERR_NOT_LEADER_OR_FOLLOWER ? msg : kq_err_message(err)));
        req = NULL;
    }
    if (req != NULL)
        reply_produce(dp, req, KQ_ERR_INTERNAL, -1, -1, "the replica gave no answer");
out:
    kq_buf_free(&payload);
}

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
    if (grow((void **)&c->v, &c->cap, c->n, sizeof(kq_data_batch)) != 0) {
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
static bool serve_fetch(kq_dp *dp, kq_rpc_req *req, const kq_data_fetch_request *fr,
                        const kq_image *img, uint64_t now, bool may_park)
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
        oom(dp, "fetch answer");
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
            image_leader(img, fp->topic_id, fp->partition, &pr->current_leader_epoch);
        reads[k].limit_end = -1;
        size_t i = kq_rm_find(dp->rm, fp->topic_id, fp->partition);
        kq_replica *r = i == SIZE_MAX ? NULL : kq_rm_replica_mut(dp->rm, i);
        if (r == NULL) {
            pr->error = not_hosted_error(img, fp->topic_id, fp->partition);
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
            if (step(dp, i, &ev, &u, NULL) != 0 || !u.has_fetch) {
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
        kq_plog_tp tp = tp_make(fp->topic_id, fp->partition);
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
    queue_answer(dp, req, KQ_API_DATA_FETCH, kq_data_encode_fetch_response(&resp, &out), &out);
out:
    kq_buf_free(&out);
    for (size_t k = 0; reads != NULL && k < n; k++)
        read_ctx_free(&reads[k]);
    free(reads);
    free(res);
    return !parked;
}

/* A Fetch just received: checks the sender, serves or parks it. Takes ownership of r. */
static void handle_fetch(kq_dp *dp, kq_rpc_req *req, kq_data_request *r, const kq_image *img,
                         uint64_t now)
{
    const kq_data_fetch_request *fr = &r->u.fetch;
    char msg[256];
    dp->counts.fetch_requests++;
    if (fr->replica_id >= 0) {
        /* Follower fetches come from a registered broker with its current epoch. */
        const kq_broker *br = img != NULL ? kq_image_broker(img, fr->replica_id) : NULL;
        if (br == NULL) {
            snprintf(msg, sizeof(msg), "replica %d is not a registered broker", fr->replica_id);
            reply_error(dp, req, KQ_API_DATA_FETCH, KQ_ERR_BROKER_ID_NOT_REGISTERED, msg);
            kq_data_request_free(r);
            return;
        }
        /* An older epoch is a previous incarnation (a zombie); a newer one is a registration
         * this broker's metadata has not applied yet, which it will. */
        if (fr->broker_epoch < br->epoch) {
            snprintf(msg, sizeof(msg), "broker %d: epoch %lld, registered epoch %lld",
                     fr->replica_id, (long long)fr->broker_epoch, (long long)br->epoch);
            reply_error(dp, req, KQ_API_DATA_FETCH, KQ_ERR_STALE_BROKER_EPOCH, msg);
            kq_data_request_free(r);
            return;
        }
    }
    if (serve_fetch(dp, req, fr, img, now, true)) {
        kq_data_request_free(r);
        return;
    }
    if (grow((void **)&dp->fetches, &dp->cap_fetches, dp->n_fetches, sizeof(dp_parked_fetch)) !=
        0) {
        oom(dp, "parked fetch");
        return;
    }
    uint32_t wait = (uint32_t)fr->max_wait_ms;
    if (wait > DP_MAX_WAIT_MS)
        wait = DP_MAX_WAIT_MS;
    dp_parked_fetch *pf = &dp->fetches[dp->n_fetches++];
    pf->req = req;
    pf->r = *r;
    pf->deadline = now + wait;
    memset(r, 0, sizeof(*r));
}

/* Retry parked fetches: all of them when something changed, else the expired ones. */
static void retry_parked_fetches(kq_dp *dp, const kq_image *img, uint64_t now, bool all)
{
    size_t k = 0;
    while (k < dp->n_fetches) {
        dp_parked_fetch *pf = &dp->fetches[k];
        bool expired = now >= pf->deadline;
        if (!all && !expired) {
            k++;
            continue;
        }
        if (serve_fetch(dp, pf->req, &pf->r.u.fetch, img, now, !expired)) {
            kq_data_request_free(&pf->r);
            dp->fetches[k] = dp->fetches[--dp->n_fetches];
            continue;
        }
        k++;
    }
}

/* ---------- ListOffsets ---------- */

static void handle_list_offsets(kq_dp *dp, kq_rpc_req *req, const kq_list_offsets_request *lr,
                                const kq_image *img)
{
    size_t n = lr->n_partitions;
    kq_list_offsets_partition_result *res = calloc(n ? n : 1, sizeof(*res));
    kq_buf out = {0};
    if (res == NULL) {
        oom(dp, "list offsets");
        return;
    }
    for (size_t k = 0; k < n; k++) {
        const kq_list_offsets_partition *lp = &lr->partitions[k];
        kq_list_offsets_partition_result *pr = &res[k];
        memcpy(pr->topic_id, lp->topic_id, 16);
        pr->partition = lp->partition;
        pr->offset = -1;
        pr->leader_epoch = -1;
        size_t i = kq_rm_find(dp->rm, lp->topic_id, lp->partition);
        kq_replica *r = i == SIZE_MAX ? NULL : kq_rm_replica_mut(dp->rm, i);
        if (r == NULL) {
            pr->error = not_hosted_error(img, lp->topic_id, lp->partition);
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
    queue_answer(dp, req, KQ_API_LIST_OFFSETS, kq_data_encode_list_offsets_response(&resp, &out),
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
    if (grow((void **)&m->topics, cap_t, m->n_topics, sizeof(*m->topics)) != 0)
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
        if (grow((void **)&m->parts, cap_p, m->n_parts, sizeof(*m->parts)) != 0)
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

static void handle_metadata(kq_dp *dp, kq_rpc_req *req, const kq_data_metadata_request *mr,
                            const kq_image *img)
{
    md_build m;
    size_t cap_t = 0, cap_p = 0, cap_b = 0;
    kq_buf out = {0};
    int rc = 0;
    memset(&m, 0, sizeof(m));
    if (img == NULL) {
        reply_error(dp, req, KQ_API_METADATA, KQ_ERR_BROKER_NOT_AVAILABLE,
                    "this broker has not loaded the metadata yet");
        return;
    }
    for (const kq_broker *b = kq_image_broker_next(img, NULL); b != NULL && rc == 0;
         b = kq_image_broker_next(img, b)) {
        if (b->n_endpoints < 1)
            continue;
        if ((rc = grow((void **)&m.brokers, &cap_b, m.n_brokers, sizeof(*m.brokers))) != 0)
            break;
        kq_data_metadata_broker *mb = &m.brokers[m.n_brokers++];
        mb->id = b->id;
        mb->host = b->endpoints[0].host;
        mb->port = b->endpoints[0].port;
        mb->rack = b->rack;
    }
    if (mr->n_topics == 0) {
        for (const kq_topic *t = kq_image_topic_next(img, NULL); t != NULL && rc == 0;
             t = kq_image_topic_next(img, t))
            rc = md_add_topic(&m, t, t->name, &cap_t, &cap_p);
    } else {
        for (size_t k = 0; k < mr->n_topics && rc == 0; k++)
            rc = md_add_topic(&m, kq_image_topic_by_name(img, mr->topics[k]), mr->topics[k], &cap_t,
                              &cap_p);
    }
    if (rc != 0) {
        oom(dp, "metadata answer");
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
    queue_answer(dp, req, KQ_API_METADATA, kq_data_encode_metadata_response(&resp, &out), &out);
out:
    kq_buf_free(&out);
    md_build_free(&m);
}

/* ---------- requests ---------- */

int kq_dp_on_request(kq_dp *dp, kq_rpc_req *req, const kq_image *img, uint64_t now_ms)
{
    kq_data_request r;
    char err[300];
    memset(&r, 0, sizeof(r));
    int rc =
        kq_data_decode_request(kq_rpc_req_data(req), kq_rpc_req_len(req), &r, err, sizeof(err));
    if (rc == KQ_ERR_NOT_FOUND)
        return 0;
    if (rc != 0) {
        dp->counts.invalid_requests++;
        KQ_WARN("broker", "invalid data-plane request", "api=%u detail=\"%s\"", r.api_key, err);
        if (r.api_key == 0)
            return 0; /* not even an envelope: the caller's error path answers it */
        reply_error(dp, req, r.api_key, KQ_ERR_INVALID_REQUEST, err);
        return 1;
    }
    if (r.cluster_id[0] != '\0' && strcmp(r.cluster_id, dp->cfg.cluster_id) != 0) {
        snprintf(err, sizeof(err), "request for cluster %.64s, this is cluster %.64s", r.cluster_id,
                 dp->cfg.cluster_id);
        reply_error(dp, req, r.api_key, KQ_ERR_INCONSISTENT_CLUSTER_ID, err);
        kq_data_request_free(&r);
        return 1;
    }
    switch (r.api_key) {
    case KQ_API_PRODUCE:
        handle_produce(dp, req, &r.u.produce, img, now_ms);
        break;
    case KQ_API_DATA_FETCH:
        handle_fetch(dp, req, &r, img, now_ms);
        break;
    case KQ_API_LIST_OFFSETS:
        handle_list_offsets(dp, req, &r.u.list_offsets, img);
        break;
    case KQ_API_METADATA:
        handle_metadata(dp, req, &r.u.metadata, img);
        break;
    default:
        reply_error(dp, req, r.api_key, KQ_ERR_UNSUPPORTED_VERSION, "unsupported api");
        break;
    }
    kq_data_request_free(&r);
    return 1;
}

/* ---------- the follower fetcher ---------- */

static void on_net_answer(void *arg, int err, const uint8_t *data, size_t len)
{
    dp_net_ev *ev = arg;
    ev->err = kq_rpc_copy_answer(err, data, len, &ev->data, &ev->len);
    if (kq_loopq_push(ev->dp->cfg.q, ev->dp->cfg.ev_type, ev) != 0)
        ev->dp->cfg.fatal("loop queue full", "a data-plane answer was dropped");
}

static dp_fetcher *fetcher_for(kq_dp *dp, int32_t leader, const kq_image *img)
{
    const kq_broker *br = kq_image_broker(img, leader);
    if (br == NULL || br->n_endpoints < 1)
        return NULL;
    char url[300];
    const kq_rec_endpoint *e = &br->endpoints[0];
    snprintf(url, sizeof(url), strchr(e->host, ':') ? "tcp://[%.250s]:%d" : "tcp://%.250s:%d",
             e->host, e->port);
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
    if (f->c != NULL && strcmp(f->url, url) != 0 && !f->in_flight) {
        kq_rpc_client_close(f->c);
        f->c = NULL;
    }
    if (f->c == NULL) {
        char err[300];
        if (kq_rpc_client_open(url, dp->cfg.max_msg_bytes, &f->c, err, sizeof(err)) != 0) {
            KQ_WARN("replica", "cannot open a connection to a leader", "leader=%d detail=\"%s\"",
                    leader, err);
            f->c = NULL;
            f->backoff_until = kq_now_ms() + 1000;
            return NULL;
        }
        snprintf(f->url, sizeof(f->url), "%s", url);
    }
    return f;
}

static void pump_fetchers(kq_dp *dp, const kq_image *img, int64_t broker_epoch, uint64_t now)
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
        oom(dp, "fetch requests");
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
            oom(dp, "fetch request");
            goto out;
        }
        for (size_t j = i; j < n; j++) {
            if (leaders[j] != leader || done[j])
                continue;
            done[j] = true;
            batch[m++] = fps[j];
        }
        dp_fetcher *f = fetcher_for(dp, leader, img);
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
        dp_net_ev *ev = rc == 0 ? calloc(1, sizeof(*ev)) : NULL;
        if (ev == NULL) {
            KQ_WARN("replica", "cannot build a fetch request", "leader=%d error=%s", leader,
                    kq_err_name(rc ? rc : KQ_ERR_NOMEM));
            free(batch);
            continue;
        }
        ev->kind = DP_NET_FETCH;
        ev->dp = dp;
        ev->leader = leader;
        ev->sent = calloc(m, sizeof(*ev->sent));
        if (ev->sent == NULL) {
            free(ev);
            free(batch);
            oom(dp, "fetch request");
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
        if (kq_rpc_call_async(f->c, buf.data, buf.len, timeout, on_net_answer, ev) != 0) {
            free(ev->sent);
            free(ev);
            f->backoff_until = now + DP_FETCH_BACKOFF_MS;
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

static void handle_fetch_answer(kq_dp *dp, dp_net_ev *ev, uint64_t now)
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
    int rc = ev->err;
    if (rc == 0)
        rc = kq_data_decode_fetch_response(ev->data, ev->len, &resp, err, sizeof(err));
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
        step(dp, i, &rev, &u, &src);
    }
    if (all_errors && f != NULL)
        f->backoff_until = now + DP_FETCH_BACKOFF_MS;
    else if (f != NULL && dp->cfg.test_fetch_delay_ms > 0)
        f->backoff_until = now + dp->cfg.test_fetch_delay_ms;
out:
    kq_data_fetch_response_free(&resp);
}

/* ---------- AlterPartition ---------- */

static void pump_alters(kq_dp *dp, kq_rpc_client *ctl, int64_t broker_epoch)
{
    if (ctl == NULL || broker_epoch < 0)
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
        dp_net_ev *ev = rc == 0 ? calloc(1, sizeof(*ev)) : NULL;
        if (ev != NULL) {
            ev->kind = DP_NET_ALTER;
            ev->dp = dp;
            memcpy(ev->topic_id, p->topic_id, 16);
            ev->partition = p->partition;
            ev->request_id = p->alter.request_id;
            if (kq_rpc_call_async(ctl, buf.data, buf.len, dp->cfg.request_timeout_ms, on_net_answer,
                                  ev) == 0) {
                p->alter_pending = false;
                ev = NULL;
            }
        }
        free(ev);
        kq_buf_free(&buf);
    }
}

static void handle_alter_answer(kq_dp *dp, dp_net_ev *ev, uint64_t now)
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
    int rc = ev->err;
    if (rc == 0)
        rc = kq_codec_decode_response(ev->data, ev->len, -1, &env, err, sizeof(err));
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
        step(dp, i, &rev, &u, NULL);
    }
    kq_ctl_alter_partition_response_free(&res);
    kq_response_free(&env);
}

void kq_dp_on_net_event(kq_dp *dp, void *arg, uint64_t now_ms)
{
    dp_net_ev *ev = arg;
    if (ev->kind == DP_NET_FETCH)
        handle_fetch_answer(dp, ev, now_ms);
    else
        handle_alter_answer(dp, ev, now_ms);
    free(ev->sent);
    free(ev->data);
    free(ev);
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
        step(dp, i, &ev, &u, NULL);
    }
    retry_parked_fetches(dp, img, now_ms, false);
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
                kq_plog_tp tp = tp_make(p->topic_id, p->partition);
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
            step(dp, i, &ev, &u, NULL);
            stepped = true;
        }
        if (dp->wake) {
            dp->wake = false;
            retry_parked_fetches(dp, img, now_ms, true);
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
        step(dp, i, &ev, &u, NULL);
    }
    /* Produces parked on a partition this broker no longer hosts. */
    size_t k = 0;
    while (k < dp->n_parked) {
        if (kq_rm_find(dp->rm, dp->parked[k].topic_id, dp->parked[k].partition) != SIZE_MAX) {
            k++;
            continue;
        }
        reply_produce(dp, dp->parked[k].req, KQ_ERR_NOT_LEADER_OR_FOLLOWER, -1, -1,
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

void kq_dp_pump(kq_dp *dp, const kq_image *img, kq_rpc_client *ctl, int64_t broker_epoch,
                uint64_t now_ms)
{
    if (dp->wake && !kq_plog_in_txn(dp->plog)) {
        dp->wake = false;
        retry_parked_fetches(dp, img, now_ms, true);
    }
    for (size_t i = 0; i < dp->n_replies; i++) {
        kq_rpc_reply(dp->replies[i].req, dp->replies[i].buf.data, dp->replies[i].buf.len);
        kq_buf_free(&dp->replies[i].buf);
    }
    dp->n_replies = 0;
    pump_alters(dp, ctl, broker_epoch);
    pump_fetchers(dp, img, broker_epoch, now_ms);
}

uint64_t kq_dp_deadline(const kq_dp *dp)
{
    uint64_t d = KQ_REPLICA_NO_DEADLINE;
    uint64_t now = kq_now_ms();
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
