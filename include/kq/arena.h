/*
 * kq_arena: zeroed memory handed out in pieces and freed all at once (a decoded message, an
 * answer being built). Pure: no I/O.
 *
 * Ownership: the arena owns every piece it hands out until kq_arena_free; the caller owns the
 * arena (usually on its stack, zero-initialised with {0}). Not thread-safe.
 */
#ifndef KQ_ARENA_H
#define KQ_ARENA_H

#include <stddef.h>

/* The first KQ_ARENA_INLINE bytes come from the arena itself (most messages fit), the rest
 * from calloc'd blocks. */
#define KQ_ARENA_INLINE 768
typedef struct kq_arena {
    void **blk;
    size_t n, cap;
    size_t used; /* bytes of inline taken */
    _Alignas(max_align_t) unsigned char inline_[KQ_ARENA_INLINE];
} kq_arena;

/* n zeroed elements of size bytes (at least one byte); NULL when out of memory. */
void *kq_arena_alloc(kq_arena *a, size_t n, size_t size);
/* Room for one more element of `size` bytes at the end of the arena array *v of *n elements
 * (capacity *cap, grown by doubling): the new, zeroed element, or NULL when out of memory. */
void *kq_arena_push(kq_arena *a, void **v, size_t *n, size_t *cap, size_t size);
/* Frees every piece; the arena is empty and reusable afterwards. NULL is fine. */
void kq_arena_free(kq_arena *a);

#endif
