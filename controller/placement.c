/* Striped rack-aware replica placement (kraft-semantics.md 3.4). */
#include "placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"

typedef struct rack {
    const char *name; /* NULL: no rack */
    int32_t *unfenced, *fenced;
    int32_t n_unfenced, n_fenced;
    uint32_t cur_unfenced, cur_fenced; /* round-robin cursors within one partition */
    /* Each partition starts one broker further than the previous one that used this rack
     * (StripedReplicaPlacer's per-rack offset): 1,2,3 / 2,3,1 / 3,1,2 in a single rack. */
    uint32_t next_start_unfenced, next_start_fenced;
    int32_t partition_unfenced, partition_fenced; /* last partition that used each cursor */
} rack;

static int rack_cmp(const void *a, const void *b)
{
    const rack *x = a, *y = b;

    if (!x->name || !y->name)
        return x->name ? 1 : (y->name ? -1 : 0);
    return strcmp(x->name, y->name);
}

static bool same_rack(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

/* Fisher-Yates over the rack order and fresh cursors: random ones, or all equal to
 * *first_start (then cleared to UINT64_MAX) for the first round of a placement. */
static void shuffle(rack *racks, int32_t nr, kq_prng *prng, uint64_t *first_start)
{
    for (int32_t i = nr - 1; i > 0; i--) {
        int32_t j = (int32_t)kq_prng_below(prng, (uint64_t)i + 1);
        rack t = racks[i];

        racks[i] = racks[j];
        racks[j] = t;
    }
    for (int32_t i = 0; i < nr; i++) {
        if (*first_start != UINT64_MAX) {
            racks[i].next_start_unfenced = racks[i].next_start_fenced = (uint32_t)*first_start;
        } else {
            racks[i].next_start_unfenced = (uint32_t)kq_prng_below(prng, 1u << 16);
            racks[i].next_start_fenced = (uint32_t)kq_prng_below(prng, 1u << 16);
        }
        racks[i].partition_unfenced = racks[i].partition_fenced = -1;
    }
    *first_start = UINT64_MAX;
}

/* Next broker of `r` (fenced or not) not already in chosen[0..n); -1 if none. */
static int32_t take(rack *r, bool fenced, int32_t partition, const int32_t *chosen, int32_t n)
{
    int32_t *ids = fenced ? r->fenced : r->unfenced;
    int32_t cnt = fenced ? r->n_fenced : r->n_unfenced;
    uint32_t *cur = fenced ? &r->cur_fenced : &r->cur_unfenced;
    int32_t *last = fenced ? &r->partition_fenced : &r->partition_unfenced;
    uint32_t *next_start = fenced ? &r->next_start_fenced : &r->next_start_unfenced;

    if (*last != partition) {
        *last = partition;
        *cur = (*next_start)++;
    }

    for (int32_t k = 0; k < cnt; k++) {
        int32_t id = ids[(*cur + (uint32_t)k) % (uint32_t)cnt];

        if (!kq_ids_contain(chosen, n, id)) {
            *cur += (uint32_t)k + 1;
            return id;
        }
    }
    return -1;
}

int kq_place_replicas(const kq_image *img, int32_t n_partitions, int32_t rf, kq_prng *prng,
                      int32_t **out, char *errbuf, size_t errlen)
{
    rack *racks = NULL;
    int32_t *ids = NULL, *res = NULL;
    int32_t nr = 0, usable = 0, unfenced = 0, since_shuffle = 0;
    uint32_t start;
    uint64_t first_start;
    int rc = 0;

    *out = NULL;
    if (n_partitions <= 0) {
        snprintf(errbuf, errlen, "number of partitions must be positive, got %d",
                 (int)n_partitions);
        return KQ_ERR_INVALID_PARTITIONS;
    }
    if (rf <= 0) {
        snprintf(errbuf, errlen, "replication factor must be positive, got %d", (int)rf);
        return KQ_ERR_INVALID_REPLICATION_FACTOR;
    }
    for (const kq_broker *b = kq_image_broker_next(img, NULL); b;
         b = kq_image_broker_next(img, b)) {
        if (b->in_controlled_shutdown)
            continue;
        usable++;
        unfenced += !b->fenced;
    }
    if (unfenced == 0) {
        snprintf(errbuf, errlen, "all brokers are fenced or shutting down (%d usable)",
                 (int)usable);
        rc = KQ_ERR_INVALID_REPLICATION_FACTOR;
        goto out;
    }
    if (rf > usable) {
        snprintf(errbuf, errlen, "replication factor %d is larger than the %d available brokers",
                 (int)rf, (int)usable);
        rc = KQ_ERR_INVALID_REPLICATION_FACTOR;
        goto out;
    }
    if ((size_t)n_partitions * (size_t)rf > (size_t)INT32_MAX) {
        snprintf(errbuf, errlen, "too many replicas (%d partitions x %d)", (int)n_partitions,
                 (int)rf);
        rc = KQ_ERR_INVALID_PARTITIONS;
        goto out;
    }
    racks = calloc((size_t)usable, sizeof *racks);
    ids = malloc(2 * (size_t)usable * sizeof *ids);
    res = malloc((size_t)n_partitions * (size_t)rf * sizeof *res);
    if (!racks || !ids || !res) {
        rc = KQ_ERR_NOMEM;
        snprintf(errbuf, errlen, "out of memory placing %d partitions", (int)n_partitions);
        goto out;
    }
    /* Group by rack; brokers come in id order so each list is sorted. */
    for (const kq_broker *b = kq_image_broker_next(img, NULL); b;
         b = kq_image_broker_next(img, b)) {
        int32_t i;

        if (b->in_controlled_shutdown)
            continue;
        for (i = 0; i < nr && !same_rack(racks[i].name, b->rack); i++)
            ;
        if (i == nr)
            racks[nr++].name = b->rack;
    }
    qsort(racks, (size_t)nr, sizeof *racks, rack_cmp);
    {
        int32_t pos = 0;

        for (int32_t i = 0; i < nr; i++) {
            racks[i].unfenced = ids + pos;
            for (const kq_broker *b = kq_image_broker_next(img, NULL); b;
                 b = kq_image_broker_next(img, b))
                if (!b->in_controlled_shutdown && !b->fenced && same_rack(racks[i].name, b->rack))
                    racks[i].unfenced[racks[i].n_unfenced++] = b->id;
            pos += racks[i].n_unfenced;
            racks[i].fenced = ids + pos;
            for (const kq_broker *b = kq_image_broker_next(img, NULL); b;
                 b = kq_image_broker_next(img, b))
                if (!b->in_controlled_shutdown && b->fenced && same_rack(racks[i].name, b->rack))
                    racks[i].fenced[racks[i].n_fenced++] = b->id;
            pos += racks[i].n_fenced;
        }
    }
    /* Departure from Kafka's random first cursor (docs/architecture.md): the first round
     * starts at the number of partitions the cluster already has, so placement rotates
     * deterministically and a fresh cluster's first partition gets brokers in id order (the
     * seeds' "Replicas: 1,2,3"). Later rounds re-randomize as StripedReplicaPlacer does. */
    {
        kq_image_counts counts;
        kq_image_get_counts(img, &counts);
        first_start = counts.partitions;
    }
    shuffle(racks, nr, prng, &first_start);
    start = (uint32_t)kq_prng_below(prng, (uint64_t)nr);
    for (int32_t p = 0; p < n_partitions; p++) {
        int32_t *chosen = res + (size_t)p * (size_t)rf;
        int32_t n = 0;

        if (since_shuffle == unfenced) {
            shuffle(racks, nr, prng, &first_start);
            since_shuffle = 0;
        }
        for (int pass = 0; pass < 2 && n < rf; pass++) {
            bool fenced = pass == 1;
            uint32_t r = start;
            int32_t misses = 0;

            /* One replica per rack per round; stop after a full round that found nothing. */
            while (n < rf && misses < nr) {
                int32_t id = take(&racks[r % (uint32_t)nr], fenced, p, chosen, n);

                r++;
                if (id < 0) {
                    misses++;
                    continue;
                }
                misses = 0;
                chosen[n++] = id;
            }
        }
        if (n < rf) { /* cannot happen: rf <= usable */
            rc = KQ_ERR_INTERNAL;
            snprintf(errbuf, errlen, "placement found only %d of %d replicas", (int)n, (int)rf);
            goto out;
        }
        start++;
        since_shuffle++;
    }
    *out = res;
    res = NULL;
out:
    free(racks);
    free(ids);
    free(res);
    return rc;
}
