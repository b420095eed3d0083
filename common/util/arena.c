/*
 * kq_arena: see kq/arena.h.
 */
#include "kq/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *kq_arena_alloc(kq_arena *a, size_t n, size_t size)
{
    void *p;

    size_t bytes, want;

    if (size && n > SIZE_MAX / size)
        return NULL;
    bytes = (n ? n : 1) * (size ? size : 1);
    want = (bytes + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1);
    if (want >= bytes && want <= sizeof a->inline_ - a->used) { /* zeroed: the arena starts so */
        p = a->inline_ + a->used;
        a->used += want;
        return p;
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        void **nb = realloc(a->blk, cap * sizeof *nb);

        if (!nb)
            return NULL;
        a->blk = nb;
        a->cap = cap;
    }
    p = calloc(n ? n : 1, size ? size : 1);
    if (p)
        a->blk[a->n++] = p;
    return p;
}

void kq_arena_free(kq_arena *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++)
        free(a->blk[i]);
    free(a->blk);
    a->blk = NULL;
    a->n = a->cap = 0;
    memset(a->inline_, 0, a->used); /* reusable, and zero again */
    a->used = 0;
}

void *kq_arena_push(kq_arena *a, void **v, size_t *n, size_t *cap, size_t size)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        char *nv = kq_arena_alloc(a, c, size);

        if (!nv)
            return NULL;
        if (*n)
            memcpy(nv, *v, *n * size);
        *v = nv;
        *cap = c;
    }
    return (char *)*v + (*n)++ * size;
}
