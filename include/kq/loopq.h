/*
 * kq_loopq: the bounded event queue between nng callbacks and a daemon's single loop thread.
 * Producers (any thread) push and never block: a full queue returns KQ_ERR_FULL and the
 * producer answers "busy" or drops (the peer retries). The loop waits with a deadline.
 *
 * Items are (type, pointer) pairs; ownership of the pointer moves to whoever pops it.
 */
#ifndef KQ_LOOPQ_H
#define KQ_LOOPQ_H

#include <stddef.h>
#include <stdint.h>

typedef struct kq_loopq kq_loopq;

typedef struct kq_loopq_item {
    int type;
    void *ptr;
} kq_loopq_item;

kq_loopq *kq_loopq_new(size_t capacity);
void kq_loopq_free(kq_loopq *q);                     /* items still queued are not freed */
int kq_loopq_push(kq_loopq *q, int type, void *ptr); /* 0 or KQ_ERR_FULL */
/* Wake the loop without an item (e.g. from a signal-watching thread). */
void kq_loopq_wake(kq_loopq *q);
/* Pop up to max items; if none are queued, wait until one arrives, a wake, or the monotonic
 * deadline (kq_now_ms scale) passes. Returns the number popped (0 on timeout or wake). */
size_t kq_loopq_pop(kq_loopq *q, kq_loopq_item *items, size_t max, uint64_t deadline_ms);

#endif
