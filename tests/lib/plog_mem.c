/* The in-memory partition logs: see plog_mem.h. Errors and checks follow the LMDB
 * implementation (common/io/plog.c) case for case; tests/unit/plog runs the same contract
 * tests on both. */
#include "plog_mem.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/util.h"

typedef struct mem_batch {
    int refs;
    kq_plog_batch b; /* b.records points at data */
    uint8_t data[];
} mem_batch;

/* A partition's batches and epoch cache, shared by the committed state and a transaction
 * until the transaction changes them. */
typedef struct mem_log {
    int refs;
    mem_batch **b;
    size_t n, cap;
    kq_epoch_entry *e;
    size_t ne, cap_e;
} mem_log;

typedef struct mem_part {
    kq_plog_tp tp;
    int64_t log_start, hw;
    int32_t pepoch;
    mem_log *log;
} mem_part;

typedef struct mem_state { /* partitions sorted by (topic id, partition) */
    mem_part *p;
    size_t n, cap;
} mem_state;

struct kq_plog_mem_disk {
    kq_store_identity id;
    mem_state durable;
    mem_state before_last; /* lying: what a crash goes back to */
    bool lie;
    int fail_rc;
    bool open;
};

typedef struct mem_plog {
    kq_plog base;
    kq_plog_mem_disk *d;
    mem_state work; /* the open transaction */
    bool txn, txn_bad, failed;
} mem_plog;

static const kq_plog_ops mem_ops;

/* The batch CRC-32C as the LMDB partition logs compute it (and kq_data_batch_crc): base
 * offset, leader epoch, count, producer id, producer epoch, base sequence (big-endian), then
 * the records. */
static uint32_t batch_crc(const kq_plog_batch *b)
{
    uint8_t h[8 + KQ_PLOG_BATCH_HEADER_LEN - 4];
    uint64_t v[] = {(uint64_t)b->base_offset,    (uint32_t)b->leader_epoch,
                    (uint32_t)b->count,          (uint64_t)b->producer_id,
                    (uint16_t)b->producer_epoch, (uint32_t)b->base_sequence};
    const int width[] = {8, 4, 4, 8, 2, 4};
    size_t at = 0;
    for (int i = 0; i < 6; i++)
        for (int k = width[i] - 1; k >= 0; k--)
            h[at++] = (uint8_t)(v[i] >> (8 * k));
    return kq_crc32c(kq_crc32c(0, h, sizeof(h)), b->records, b->len);
}

static void batch_release(mem_batch *b)
{
    if (b != NULL && --b->refs == 0)
        free(b);
}

static void log_release(mem_log *l)
{
    if (l == NULL || --l->refs > 0)
        return;
    for (size_t i = 0; i < l->n; i++)
        batch_release(l->b[i]);
    free(l->b);
    free(l->e);
    free(l);
}

static void state_release(mem_state *s)
{
    for (size_t i = 0; i < s->n; i++)
        log_release(s->p[i].log);
    free(s->p);
    memset(s, 0, sizeof(*s));
}

static bool grow(void **v, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap * 2 : 8;
    while (n < need)
        n *= 2;
    void *nv = realloc(*v, n * elem);
    if (nv == NULL)
        return false;
    *v = nv;
    *cap = n;
    return true;
}

/* The transaction's copy of the committed partition list (logs shared). */
static bool state_share(mem_state *dst, const mem_state *src)
{
    memset(dst, 0, sizeof(*dst));
    if (src->n > 0 && !grow((void **)&dst->p, &dst->cap, src->n, sizeof(mem_part)))
        return false;
    if (src->n > 0)
        memcpy(dst->p, src->p, src->n * sizeof(mem_part));
    dst->n = src->n;
    for (size_t i = 0; i < dst->n; i++)
        dst->p[i].log->refs++;
    return true;
}

static int tp_cmp(const kq_plog_tp *a, const kq_plog_tp *b)
{
    int c = memcmp(a->topic_id, b->topic_id, 16);
    if (c != 0)
        return c;
    return a->partition < b->partition ? -1 : a->partition > b->partition;
}

/* Index of tp in s, or where it would go (with *found false). */
static size_t find(const mem_state *s, const kq_plog_tp *tp, bool *found)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = tp_cmp(&s->p[mid].tp, tp);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

static int64_t part_leo(const mem_part *p)
{
    const mem_log *l = p->log;
    return l->n ? l->b[l->n - 1]->b.base_offset + l->b[l->n - 1]->b.count : p->log_start;
}

static int32_t last_epoch(const mem_part *p)
{
    return p->log->ne ? p->log->e[p->log->ne - 1].epoch : -1;
}

/* ---- handle and transaction */

static mem_plog *as_mem(const kq_plog *p)
{
    return (mem_plog *)p;
}

static int txn_check(const mem_plog *p, const kq_plog_tp *tp)
{
    if (p->failed)
        return KQ_ERR_IO;
    if (!p->txn || tp == NULL || tp->partition < 0)
        return KQ_ERR_INVALID_REQUEST;
    return 0;
}

static int oom(mem_plog *p)
{
    p->txn_bad = true;
    return KQ_ERR_NOMEM;
}

/* The partition tp of the transaction, its log made its own (not shared) when `own`. */
static int part_of(mem_plog *p, const kq_plog_tp *tp, bool own, mem_part **out)
{
    bool found;
    size_t i = find(&p->work, tp, &found);
    if (!found)
        return KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    mem_part *pt = &p->work.p[i];
    if (own && pt->log->refs > 1) {
        const mem_log *old = pt->log;
        mem_log *l = calloc(1, sizeof(*l));
        if (l == NULL || (old->n && !grow((void **)&l->b, &l->cap, old->n, sizeof(*l->b))) ||
            (old->ne && !grow((void **)&l->e, &l->cap_e, old->ne, sizeof(*l->e)))) {
            if (l != NULL) {
                free(l->b);
                free(l->e);
            }
            free(l);
            return oom(p);
        }
        l->refs = 1;
        l->n = old->n;
        l->ne = old->ne;
        for (size_t k = 0; k < old->n; k++) {
            l->b[k] = old->b[k];
            l->b[k]->refs++;
        }
        if (old->ne)
            memcpy(l->e, old->e, old->ne * sizeof(*l->e));
        log_release(pt->log);
        pt->log = l;
    }
    *out = pt;
    return 0;
}

static void mem_close(kq_plog *bp)
{
    mem_plog *p = as_mem(bp);
    state_release(&p->work); /* a crash: the transaction is lost */
    if (p->d->lie && p->d->before_last.p) {
        state_release(&p->d->durable); /* and the lying disk's last commit */
        p->d->durable = p->d->before_last;
        memset(&p->d->before_last, 0, sizeof(p->d->before_last));
    }
    p->d->open = false;
    free(p);
}

static const kq_store_identity *mem_identity_of(const kq_plog *bp)
{
    return &as_mem(bp)->d->id;
}

static int mem_begin(kq_plog *bp)
{
    mem_plog *p = as_mem(bp);
    if (p->failed)
        return KQ_ERR_IO;
    if (p->txn)
        return KQ_ERR_INVALID_REQUEST;
    if (!state_share(&p->work, &p->d->durable))
        return KQ_ERR_NOMEM;
    p->txn = true;
    p->txn_bad = false;
    return 0;
}

static void mem_abort(kq_plog *bp)
{
    mem_plog *p = as_mem(bp);
    state_release(&p->work);
    p->txn = false;
    p->txn_bad = false;
}

static int mem_commit(kq_plog *bp)
{
    mem_plog *p = as_mem(bp);
    if (p->failed)
        return KQ_ERR_IO;
    if (!p->txn)
        return KQ_ERR_INVALID_REQUEST;
    int rc = p->txn_bad ? KQ_ERR_IO : p->d->fail_rc;
    if (rc != 0) {
        p->d->fail_rc = 0;
        mem_abort(bp);
        p->failed = true; /* as kq_plog: a failed commit is fatal for the handle */
        return rc;
    }
    if (p->d->lie) {
        state_release(&p->d->before_last);
        p->d->before_last = p->d->durable;
    } else {
        state_release(&p->d->durable);
    }
    p->d->durable = p->work;
    memset(&p->work, 0, sizeof(p->work));
    p->txn = false;
    return 0;
}

static int mem_in_txn(const kq_plog *bp)
{
    return as_mem(bp)->txn;
}

/* ---- mutations */

static int mem_create_partition(kq_plog *bp, const kq_plog_tp *tp, int32_t partition_epoch,
                                int64_t log_start_offset)
{
    mem_plog *p = as_mem(bp);
    int ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    if (log_start_offset < 0 || partition_epoch < 0)
        return KQ_ERR_INVALID_REQUEST;
    bool found;
    size_t i = find(&p->work, tp, &found);
    if (found)
        return KQ_ERR_TOPIC_ALREADY_EXISTS;
    mem_log *l = calloc(1, sizeof(*l));
    if (l == NULL || !grow((void **)&p->work.p, &p->work.cap, p->work.n + 1, sizeof(mem_part))) {
        free(l);
        return oom(p);
    }
    l->refs = 1;
    memmove(&p->work.p[i + 1], &p->work.p[i], (p->work.n - i) * sizeof(mem_part));
    p->work.p[i] = (mem_part){.tp = *tp,
                              .log_start = log_start_offset,
                              .hw = log_start_offset,
                              .pepoch = partition_epoch,
                              .log = l};
    p->work.n++;
    return 0;
}

static int mem_delete_partition(kq_plog *bp, const kq_plog_tp *tp)
{
    mem_plog *p = as_mem(bp);
    int ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    bool found;
    size_t i = find(&p->work, tp, &found);
    if (!found)
        return KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    log_release(p->work.p[i].log);
    memmove(&p->work.p[i], &p->work.p[i + 1], (p->work.n - i - 1) * sizeof(mem_part));
    p->work.n--;
    return 0;
}

/* Adds epoch -> start after removing trailing entries that start at or after start. */
static int add_epoch(mem_plog *p, mem_log *l, int32_t epoch, int64_t start)
{
    while (l->ne > 0 && l->e[l->ne - 1].start_offset >= start)
        l->ne--;
    if (!grow((void **)&l->e, &l->cap_e, l->ne + 1, sizeof(*l->e)))
        return oom(p);
    l->e[l->ne++] = (kq_epoch_entry){.epoch = epoch, .start_offset = start};
    return 0;
}

static int mem_append(kq_plog *bp, const kq_plog_tp *tp, const kq_plog_batch *b)
{
    mem_plog *p = as_mem(bp);
    mem_part *pt;
    int ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    if (b == NULL || b->leader_epoch < 0 || b->count <= 0 || b->base_offset < 0 ||
        b->base_offset > INT64_MAX - b->count || (b->records == NULL && b->len > 0) ||
        b->len > SIZE_MAX - KQ_PLOG_BATCH_HEADER_LEN - sizeof(mem_batch))
        return KQ_ERR_INVALID_REQUEST;
    if ((ret = part_of(p, tp, false, &pt)) != 0)
        return ret;
    if (b->base_offset != part_leo(pt))
        return KQ_ERR_INVALID_REQUEST;
    bool empty_tail = pt->log->ne > 0 && pt->log->e[pt->log->ne - 1].start_offset >= b->base_offset;
    if (b->leader_epoch < last_epoch(pt) && !empty_tail)
        return KQ_ERR_INVALID_REQUEST;
    if ((ret = part_of(p, tp, true, &pt)) != 0)
        return ret;
    mem_log *l = pt->log;
    while (b->leader_epoch < last_epoch(pt) && l->e[l->ne - 1].start_offset >= b->base_offset)
        l->ne--; /* epochs that never got a batch (see kq/plog.h) */
    if (b->leader_epoch < last_epoch(pt))
        return KQ_ERR_INVALID_REQUEST;
    mem_batch *mb = malloc(sizeof(*mb) + b->len);
    if (mb == NULL || !grow((void **)&l->b, &l->cap, l->n + 1, sizeof(*l->b))) {
        free(mb);
        return oom(p);
    }
    mb->refs = 1;
    mb->b = *b;
    if (b->len > 0)
        memcpy(mb->data, b->records, b->len);
    mb->b.records = mb->data;
    mb->b.crc32c = batch_crc(&mb->b);
    l->b[l->n++] = mb;
    if (b->leader_epoch > last_epoch(pt))
        return add_epoch(p, l, b->leader_epoch, b->base_offset);
    return 0;
}

static int mem_assign_epoch(kq_plog *bp, const kq_plog_tp *tp, int32_t leader_epoch)
{
    mem_plog *p = as_mem(bp);
    mem_part *pt;
    int ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    if (leader_epoch < 0)
        return KQ_ERR_INVALID_REQUEST;
    if ((ret = part_of(p, tp, false, &pt)) != 0)
        return ret;
    if (leader_epoch < last_epoch(pt))
        return KQ_ERR_INVALID_REQUEST;
    if (leader_epoch == last_epoch(pt))
        return 0;
    if ((ret = part_of(p, tp, true, &pt)) != 0)
        return ret;
    return add_epoch(p, pt->log, leader_epoch, part_leo(pt));
}

/* Drops the batches from index k and the epoch entries starting at or after offset. */
static void cut(mem_log *l, size_t k, int64_t offset)
{
    for (size_t i = k; i < l->n; i++)
        batch_release(l->b[i]);
    l->n = k;
    while (l->ne > 0 && l->e[l->ne - 1].start_offset >= offset)
        l->ne--;
}

static int mem_truncate(kq_plog *bp, const kq_plog_tp *tp, int64_t offset)
{
    mem_plog *p = as_mem(bp);
    mem_part *pt;
    int ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    if ((ret = part_of(p, tp, false, &pt)) != 0)
        return ret;
    if (offset < pt->log_start || offset > part_leo(pt))
        return KQ_ERR_OFFSET_OUT_OF_RANGE;
    if (offset == part_leo(pt))
        return 0;
    size_t k = 0;
    while (k < pt->log->n && pt->log->b[k]->b.base_offset < offset)
        k++;
    if (k == pt->log->n || pt->log->b[k]->b.base_offset != offset)
        return KQ_ERR_INVALID_REQUEST; /* not a batch boundary */
    if ((ret = part_of(p, tp, true, &pt)) != 0)
        return ret;
    cut(pt->log, k, offset);
    if (pt->hw > offset)
        pt->hw = offset;
    return 0;
}

static int mem_truncate_fully(kq_plog *bp, const kq_plog_tp *tp, int64_t offset)
{
    mem_plog *p = as_mem(bp);
    mem_part *pt;
    int ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    if (offset < 0)
        return KQ_ERR_INVALID_REQUEST;
    if ((ret = part_of(p, tp, true, &pt)) != 0)
        return ret;
    cut(pt->log, 0, INT64_MIN);
    pt->log_start = offset;
    pt->hw = offset;
    return 0;
}

static int mem_set_hw(kq_plog *bp, const kq_plog_tp *tp, int64_t hw)
{
    mem_plog *p = as_mem(bp);
    mem_part *pt;
    int ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    if ((ret = part_of(p, tp, false, &pt)) != 0)
        return ret;
    if (hw < pt->log_start || hw > part_leo(pt))
        return KQ_ERR_OFFSET_OUT_OF_RANGE;
    pt->hw = hw;
    return 0;
}

static int mem_set_partition_epoch(kq_plog *bp, const kq_plog_tp *tp, int32_t partition_epoch)
{
    mem_plog *p = as_mem(bp);
    mem_part *pt;
    int ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    if ((ret = part_of(p, tp, false, &pt)) != 0)
        return ret;
    if (partition_epoch < pt->pepoch)
        return KQ_ERR_INVALID_REQUEST;
    pt->pepoch = partition_epoch;
    return 0;
}

/* ---- queries: in the open transaction, else the committed state */

static int q_part(const mem_plog *p, const kq_plog_tp *tp, const mem_part **out)
{
    if (p->failed || (p->txn && p->txn_bad))
        return KQ_ERR_IO;
    if (tp == NULL || tp->partition < 0)
        return KQ_ERR_INVALID_REQUEST;
    const mem_state *s = p->txn ? &p->work : &p->d->durable;
    bool found;
    size_t i = find(s, tp, &found);
    if (!found)
        return KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    *out = &s->p[i];
    return 0;
}

static int mem_state_of(kq_plog *bp, const kq_plog_tp *tp, kq_plog_state *out)
{
    const mem_part *pt;
    memset(out, 0, sizeof(*out));
    int ret = q_part(as_mem(bp), tp, &pt);
    if (ret != 0)
        return ret;
    out->log_start_offset = pt->log_start;
    out->log_end_offset = part_leo(pt);
    out->high_watermark = pt->hw;
    out->partition_epoch = pt->pepoch;
    out->last_epoch = last_epoch(pt);
    return 0;
}

static int mem_epochs(kq_plog *bp, const kq_plog_tp *tp, kq_epoch_entry **out, size_t *n)
{
    const mem_part *pt;
    *out = NULL;
    *n = 0;
    int ret = q_part(as_mem(bp), tp, &pt);
    if (ret != 0 || pt->log->ne == 0)
        return ret;
    *out = malloc(pt->log->ne * sizeof(**out));
    if (*out == NULL)
        return KQ_ERR_NOMEM;
    memcpy(*out, pt->log->e, pt->log->ne * sizeof(**out));
    *n = pt->log->ne;
    return 0;
}

static int mem_end_offset_for_epoch(kq_plog *bp, const kq_plog_tp *tp, int32_t epoch,
                                    int32_t *out_epoch, int64_t *out_end)
{
    const mem_part *pt;
    *out_epoch = KQ_PLOG_UNDEFINED_EPOCH;
    *out_end = KQ_PLOG_UNDEFINED_OFFSET;
    int ret = q_part(as_mem(bp), tp, &pt);
    if (ret != 0)
        return ret;
    const mem_log *l = pt->log;
    for (size_t i = l->ne; i > 0; i--) {
        if (l->e[i - 1].epoch <= epoch) {
            *out_epoch = l->e[i - 1].epoch;
            *out_end = i < l->ne ? l->e[i].start_offset : part_leo(pt);
            break;
        }
    }
    return 0;
}

static int mem_read(kq_plog *bp, const kq_plog_tp *tp, int64_t from, int64_t to, size_t max_bytes,
                    kq_plog_batch_cb cb, void *arg)
{
    const mem_part *pt;
    if (cb == NULL)
        return KQ_ERR_INVALID_REQUEST;
    int ret = q_part(as_mem(bp), tp, &pt);
    if (ret != 0)
        return ret;
    if (from < pt->log_start || from > part_leo(pt))
        return KQ_ERR_OFFSET_OUT_OF_RANGE;
    const mem_log *l = pt->log;
    size_t k = 0; /* the batch holding `from` */
    while (k < l->n && l->b[k]->b.base_offset + l->b[k]->b.count <= from)
        k++;
    size_t end = k, bytes = 0;
    while (end < l->n && l->b[end]->b.base_offset < to &&
           (end == k ||
            (bytes + l->b[end]->b.len >= bytes && bytes + l->b[end]->b.len <= max_bytes))) {
        bytes += l->b[end]->b.len;
        end++;
    }
    if (end == k)
        return 0;
    /* the callback may change the log: hold the batches it is given */
    mem_batch **held = malloc((end - k) * sizeof(*held));
    if (held == NULL)
        return KQ_ERR_NOMEM;
    for (size_t i = k; i < end; i++) {
        held[i - k] = l->b[i];
        held[i - k]->refs++;
    }
    for (size_t i = 0; i < end - k; i++)
        if (cb(arg, &held[i]->b) != 0)
            break;
    for (size_t i = 0; i < end - k; i++)
        batch_release(held[i]);
    free(held);
    return 0;
}

static int mem_list(kq_plog *bp, kq_plog_tp **out, size_t *n)
{
    const mem_plog *p = as_mem(bp);
    *out = NULL;
    *n = 0;
    if (p->failed || (p->txn && p->txn_bad))
        return KQ_ERR_IO;
    const mem_state *s = p->txn ? &p->work : &p->d->durable;
    if (s->n == 0)
        return 0;
    *out = malloc(s->n * sizeof(**out));
    if (*out == NULL)
        return KQ_ERR_NOMEM;
    for (size_t i = 0; i < s->n; i++)
        (*out)[i] = s->p[i].tp;
    *n = s->n;
    return 0;
}

static const kq_plog_ops mem_ops = {
    .close = mem_close,
    .identity_of = mem_identity_of,
    .begin = mem_begin,
    .commit = mem_commit,
    .abort = mem_abort,
    .in_txn = mem_in_txn,
    .create_partition = mem_create_partition,
    .delete_partition = mem_delete_partition,
    .append = mem_append,
    .assign_epoch = mem_assign_epoch,
    .truncate = mem_truncate,
    .truncate_fully = mem_truncate_fully,
    .set_hw = mem_set_hw,
    .set_partition_epoch = mem_set_partition_epoch,
    .state_of = mem_state_of,
    .epochs = mem_epochs,
    .end_offset_for_epoch = mem_end_offset_for_epoch,
    .read = mem_read,
    .list = mem_list,
};

/* ---- the disk */

kq_plog_mem_disk *kq_plog_mem_disk_new(const kq_store_identity *id)
{
    kq_plog_mem_disk *d = calloc(1, sizeof(*d));
    if (d != NULL)
        d->id = *id;
    return d;
}

void kq_plog_mem_disk_free(kq_plog_mem_disk *d)
{
    if (d == NULL)
        return;
    state_release(&d->durable);
    state_release(&d->before_last);
    free(d);
}

int kq_plog_mem_open(kq_plog_mem_disk *d, kq_plog **out)
{
    *out = NULL;
    if (d->open)
        return KQ_ERR_INVALID_REQUEST;
    mem_plog *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return KQ_ERR_NOMEM;
    p->base.ops = &mem_ops;
    p->d = d;
    d->open = true;
    *out = &p->base;
    return 0;
}

void kq_plog_mem_fail_next_commit(kq_plog_mem_disk *d, int rc)
{
    d->fail_rc = rc;
}

void kq_plog_mem_lie(kq_plog_mem_disk *d, bool lie)
{
    d->lie = lie;
}
