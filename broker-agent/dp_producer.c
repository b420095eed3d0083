/*
 * The data plane's producer state: idempotent producers' last sequences per partition, rebuilt
 * from the log when a partition is first written. See dp_internal.h.
 */
#include "dp_internal.h"

/* ---------- producer state (idempotence) ---------- */

dp_producer *dp_producer_find(dp_part *p, int64_t pid)
{
    for (size_t i = 0; i < p->n_producers; i++)
        if (p->producers[i].pid == pid)
            return &p->producers[i];
    return NULL;
}

void dp_producer_note(kq_dp *dp, dp_part *p, int64_t pid, int16_t epoch, int32_t base_seq,
                      int32_t count, int64_t base_offset)
{
    if (pid < 0)
        return;
    dp_producer *e = dp_producer_find(p, pid);
    if (e == NULL) {
        if (p->n_producers == DP_MAX_PRODUCERS) {
            /* Forget the producer that wrote longest ago. */
            size_t old = 0;
            for (size_t i = 1; i < p->n_producers; i++)
                if (p->producers[i].last_offset < p->producers[old].last_offset)
                    old = i;
            p->producers[old] = p->producers[--p->n_producers];
        }
        if (dp_grow((void **)&p->producers, &p->cap_producers, p->n_producers,
                    sizeof(dp_producer)) != 0) {
            dp_oom(dp, "producer state");
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
    dp_producer_note(c->dp, c->p, b->producer_id, b->producer_epoch, b->base_sequence, b->count,
                     b->base_offset);
    c->next = b->base_offset + b->count;
    return 0;
}

/* Rebuild the producer state of p from its whole log (first Produce after becoming leader or
 * after a truncation). */
int dp_producers_load(kq_dp *dp, dp_part *p)
{
    kq_plog_tp tp = dp_tp_make(p->topic_id, p->partition);
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
