/*
 * kq_loopq: bounded multi-producer single-consumer ring under a mutex, with a condition
 * variable on CLOCK_MONOTONIC so deadlines share kq_now_ms's time base.
 */
#include "kq/loopq.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "kq/error.h"
#include "kq/util.h"

struct kq_loopq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    kq_loopq_item *ring; /* owned; capacity slots */
    size_t capacity;
    size_t head; /* next slot to pop */
    size_t count;
    bool woken; /* a kq_loopq_wake not yet consumed by a pop */
};

kq_loopq *kq_loopq_new(size_t capacity)
{
    kq_loopq *q = NULL;
    pthread_condattr_t ca;
    bool ca_init = false, mu_init = false;

    if (capacity == 0 || capacity > SIZE_MAX / sizeof(kq_loopq_item))
        return NULL;
    q = calloc(1, sizeof(*q));
    if (q == NULL)
        goto fail;
    q->ring = calloc(capacity, sizeof(*q->ring));
    if (q->ring == NULL)
        goto fail;
    q->capacity = capacity;
    if (pthread_mutex_init(&q->mu, NULL) != 0)
        goto fail;
    mu_init = true;
    if (pthread_condattr_init(&ca) != 0)
        goto fail;
    ca_init = true;
    if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0)
        goto fail;
    if (pthread_cond_init(&q->cv, &ca) != 0)
        goto fail;
    pthread_condattr_destroy(&ca);
    return q;

fail:
    if (ca_init)
        pthread_condattr_destroy(&ca);
    if (mu_init)
        pthread_mutex_destroy(&q->mu);
    if (q != NULL)
        free(q->ring);
    free(q);
    return NULL;
}

void kq_loopq_free(kq_loopq *q)
{
    if (q == NULL)
        return;
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q->ring);
    free(q);
}

int kq_loopq_push(kq_loopq *q, int type, void *ptr)
{
    int rc = 0;
    if (q == NULL)
        return KQ_ERR_INTERNAL;
    pthread_mutex_lock(&q->mu);
    if (q->count == q->capacity) {
        rc = KQ_ERR_FULL;
        goto out;
    }
    size_t tail = (q->head + q->count) % q->capacity;
    q->ring[tail].type = type;
    q->ring[tail].ptr = ptr;
    q->count++;
    pthread_cond_signal(&q->cv);
out:
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void kq_loopq_wake(kq_loopq *q)
{
    if (q == NULL)
        return;
    pthread_mutex_lock(&q->mu);
    q->woken = true;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

size_t kq_loopq_pop(kq_loopq *q, kq_loopq_item *items, size_t max, uint64_t deadline_ms)
{
    size_t n = 0;
    if (q == NULL || items == NULL || max == 0)
        return 0;

    struct timespec abs;
    abs.tv_sec = (time_t)(deadline_ms / 1000u);
    abs.tv_nsec = (long)(deadline_ms % 1000u) * 1000000L;

    pthread_mutex_lock(&q->mu);
    while (q->count == 0 && !q->woken) {
        if (kq_now_ms() >= deadline_ms)
            break;
        int rc = pthread_cond_timedwait(&q->cv, &q->mu, &abs);
        if (rc == ETIMEDOUT)
            break;
    }
    while (n < max && q->count > 0) {
        items[n++] = q->ring[q->head];
        q->ring[q->head].ptr = NULL;
        q->head = (q->head + 1) % q->capacity;
        q->count--;
    }
    q->woken = false;
    pthread_mutex_unlock(&q->mu);
    return n;
}
