/* The leader-epoch cache: see kq/epoch_cache.h. */
#include "kq/epoch_cache.h"

#include <stdlib.h>
#include <string.h>

#include "kq/error.h"

bool kq_epoch_entries_valid(const kq_epoch_entry *e, size_t n)
{
    if (n > 0 && e == NULL)
        return false;
    for (size_t i = 0; i < n; i++)
        if (e[i].epoch < 0 || e[i].start_offset < 0 ||
            (i > 0 && (e[i].epoch <= e[i - 1].epoch || e[i].start_offset < e[i - 1].start_offset)))
            return false;
    return true;
}

void kq_epoch_cache_free(kq_epoch_cache *c)
{
    free(c->e);
    memset(c, 0, sizeof *c);
}

int kq_epoch_cache_load(kq_epoch_cache *c, const kq_epoch_entry *e, size_t n, size_t spare)
{
    kq_epoch_entry *copy = malloc((n + spare + 1) * sizeof *copy);
    if (copy == NULL)
        return KQ_ERR_NOMEM;
    if (n > 0)
        memcpy(copy, e, n * sizeof *copy);
    free(c->e);
    c->e = copy;
    c->n = n;
    c->cap = n + spare + 1;
    return 0;
}

int kq_epoch_cache_reserve(kq_epoch_cache *c, size_t extra, size_t max)
{
    size_t want = c->n + extra;
    if (max > 0 && want > max)
        return KQ_ERR_FULL;
    if (want <= c->cap)
        return 0;
    size_t cap = c->cap ? c->cap : 8;
    while (cap < want)
        cap *= 2;
    kq_epoch_entry *e = realloc(c->e, cap * sizeof *e);
    if (e == NULL)
        return KQ_ERR_NOMEM;
    c->e = e;
    c->cap = cap;
    return 0;
}

bool kq_epoch_cache_assign(kq_epoch_cache *c, int32_t epoch, int64_t start)
{
    if (c->n > 0 && c->e[c->n - 1].epoch == epoch && c->e[c->n - 1].start_offset <= start)
        return false;
    while (c->n > 0 && (c->e[c->n - 1].epoch >= epoch || c->e[c->n - 1].start_offset >= start))
        c->n--;
    c->e[c->n++] = (kq_epoch_entry){epoch, start};
    return true;
}

bool kq_epoch_cache_truncate_from(kq_epoch_cache *c, int64_t offset)
{
    size_t n0 = c->n;
    while (c->n > 0 && c->e[c->n - 1].start_offset >= offset)
        c->n--;
    return c->n != n0;
}

void kq_epoch_cache_compact(kq_epoch_cache *c, int64_t start)
{
    size_t keep = c->n; /* the last entry starting at or below `start` */
    for (size_t i = 0; i < c->n && c->e[i].start_offset <= start; i++)
        keep = i;
    if (keep == c->n)
        return;
    c->e[keep].start_offset = start;
    memmove(c->e, c->e + keep, (c->n - keep) * sizeof *c->e);
    c->n -= keep;
}

bool kq_epoch_cache_end_offset_for(const kq_epoch_cache *c, int32_t epoch, int64_t leo,
                                   int32_t *out_epoch, int64_t *out_end)
{
    for (size_t i = c->n; i > 0; i--) {
        if (c->e[i - 1].epoch <= epoch) {
            *out_epoch = c->e[i - 1].epoch;
            *out_end = i < c->n ? c->e[i].start_offset : leo;
            return true;
        }
    }
    return false;
}

int32_t kq_epoch_cache_last_epoch(const kq_epoch_cache *c, int64_t leo)
{
    for (size_t i = c->n; i > 0; i--)
        if (c->e[i - 1].start_offset < leo)
            return c->e[i - 1].epoch;
    return -1;
}

int32_t kq_epoch_cache_epoch_at(const kq_epoch_cache *c, int64_t offset)
{
    for (size_t i = c->n; i > 0; i--)
        if (c->e[i - 1].start_offset <= offset)
            return c->e[i - 1].epoch;
    return -1;
}

bool kq_epoch_cache_starts_at(const kq_epoch_cache *c, int64_t offset)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->e[i].start_offset == offset)
            return true;
    return false;
}
