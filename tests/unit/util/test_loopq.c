/* kq_loopq: bounded, non-blocking push; FIFO pop with deadline; wake; cross-thread order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>

#include "kq/error.h"
#include "kq/loopq.h"
#include "kq/util.h"

#define LONG_WAIT_MS 60000 /* "forever" for a test: only reached if the code is broken */

static void test_new_rejects_zero_capacity(void **state)
{
    assert_null(kq_loopq_new(0));
    kq_loopq_free(NULL); /* no-op */
}

static void test_full_queue_returns_full(void **state)
{
    kq_loopq *q = kq_loopq_new(4);
    int tags[5];
    kq_loopq_item it[8];
    assert_non_null(q);
    for (int i = 0; i < 4; i++)
        assert_int_equal(kq_loopq_push(q, i, &tags[i]), 0);
    assert_int_equal(kq_loopq_push(q, 4, &tags[4]), KQ_ERR_FULL);
    assert_int_equal(kq_loopq_push(q, 4, &tags[4]), KQ_ERR_FULL);
    /* pop respects max and FIFO order */
    assert_int_equal(kq_loopq_pop(q, it, 3, 0), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(it[i].type, i);
        assert_ptr_equal(it[i].ptr, &tags[i]);
    }
    /* room again: the ring wraps around */
    assert_int_equal(kq_loopq_push(q, 4, &tags[4]), 0);
    assert_int_equal(kq_loopq_pop(q, it, 8, 0), 2);
    assert_int_equal(it[0].type, 3);
    assert_int_equal(it[1].type, 4);
    assert_ptr_equal(it[1].ptr, &tags[4]);
    assert_int_equal(kq_loopq_pop(q, it, 0, 0), 0); /* max 0 */
    kq_loopq_free(q);
}

static void test_pop_times_out_when_empty(void **state)
{
    kq_loopq *q = kq_loopq_new(2);
    kq_loopq_item it[2];
    assert_non_null(q);
    /* a deadline in the past returns at once */
    assert_int_equal(kq_loopq_pop(q, it, 2, 0), 0);
    /* a near deadline: returns 0, and not before the deadline */
    uint64_t deadline = kq_now_ms() + 30;
    assert_int_equal(kq_loopq_pop(q, it, 2, deadline), 0);
    assert_true(kq_now_ms() >= deadline);
    kq_loopq_free(q);
}

typedef struct waker {
    kq_loopq *q;
    int items; /* push this many items instead of waking, if > 0 */
} waker;

static void *wake_thread(void *arg)
{
    waker *w = arg;
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL); /* let the main thread block first (not required for correctness) */
    if (w->items > 0) {
        for (int i = 0; i < w->items; i++)
            kq_loopq_push(w->q, 7, NULL);
    } else {
        kq_loopq_wake(w->q);
    }
    return NULL;
}

static void test_wake_interrupts_wait(void **state)
{
    kq_loopq *q = kq_loopq_new(2);
    kq_loopq_item it[2];
    pthread_t th;
    waker w = {q, 0};
    assert_non_null(q);

    uint64_t deadline = kq_now_ms() + LONG_WAIT_MS;
    assert_int_equal(pthread_create(&th, NULL, wake_thread, &w), 0);
    assert_int_equal(kq_loopq_pop(q, it, 2, deadline), 0);
    assert_true(kq_now_ms() < deadline); /* woken, not timed out */
    pthread_join(th, NULL);

    /* a wake before the pop is not lost: the next pop returns at once, and only once */
    kq_loopq_wake(q);
    deadline = kq_now_ms() + LONG_WAIT_MS;
    assert_int_equal(kq_loopq_pop(q, it, 2, deadline), 0);
    assert_true(kq_now_ms() < deadline);
    deadline = kq_now_ms() + 20;
    assert_int_equal(kq_loopq_pop(q, it, 2, deadline), 0);
    assert_true(kq_now_ms() >= deadline);

    /* a wake with items queued: the items come out */
    assert_int_equal(kq_loopq_push(q, 1, NULL), 0);
    kq_loopq_wake(q);
    assert_int_equal(kq_loopq_pop(q, it, 2, 0), 1);
    assert_int_equal(it[0].type, 1);
    kq_loopq_free(q);
}

static void test_push_wakes_waiting_consumer(void **state)
{
    kq_loopq *q = kq_loopq_new(2);
    kq_loopq_item it[2];
    pthread_t th;
    waker w = {q, 1};
    assert_non_null(q);
    uint64_t deadline = kq_now_ms() + LONG_WAIT_MS;
    assert_int_equal(pthread_create(&th, NULL, wake_thread, &w), 0);
    assert_int_equal(kq_loopq_pop(q, it, 2, deadline), 1);
    assert_int_equal(it[0].type, 7);
    pthread_join(th, NULL);
    kq_loopq_free(q);
}

#define ITEMS 100000
#define PRODUCERS 4

typedef struct producer {
    kq_loopq *q;
    int id;
    int count;
    long fulls;
} producer;

static void *produce(void *arg)
{
    producer *p = arg;
    for (int i = 0; i < p->count; i++) {
        /* the pointer carries the sequence number; the type the producer */
        while (kq_loopq_push(p->q, p->id, (void *)(uintptr_t)(i + 1)) == KQ_ERR_FULL) {
            p->fulls++;
            sched_yield();
        }
    }
    return NULL;
}

static void run_exchange(int nprod, size_t capacity)
{
    kq_loopq *q = kq_loopq_new(capacity);
    pthread_t th[PRODUCERS];
    producer pr[PRODUCERS];
    uintptr_t next[PRODUCERS];
    kq_loopq_item it[64];
    int per = ITEMS / nprod;
    int got = 0;
    assert_non_null(q);
    for (int i = 0; i < nprod; i++) {
        pr[i] = (producer){q, i, per, 0};
        next[i] = 1;
        assert_int_equal(pthread_create(&th[i], NULL, produce, &pr[i]), 0);
    }
    while (got < per * nprod) {
        uint64_t deadline = kq_now_ms() + LONG_WAIT_MS;
        size_t n = kq_loopq_pop(q, it, 64, deadline);
        assert_true(n > 0); /* never a timeout while producers are running */
        for (size_t k = 0; k < n; k++) {
            int t = it[k].type;
            assert_true(t >= 0 && t < nprod);
            assert_int_equal((uintptr_t)it[k].ptr, next[t]); /* per-producer order */
            next[t]++;
        }
        got += (int)n;
    }
    for (int i = 0; i < nprod; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(next[i], (uintptr_t)per + 1);
    }
    assert_int_equal(kq_loopq_pop(q, it, 64, 0), 0); /* nothing extra */
    kq_loopq_free(q);
}

static void test_one_producer_100k_in_order(void **state)
{
    run_exchange(1, 128);
}

static void test_many_producers_small_queue(void **state)
{
    run_exchange(PRODUCERS, 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_rejects_zero_capacity),
        cmocka_unit_test(test_full_queue_returns_full),
        cmocka_unit_test(test_pop_times_out_when_empty),
        cmocka_unit_test(test_wake_interrupts_wait),
        cmocka_unit_test(test_push_wakes_waiting_consumer),
        cmocka_unit_test(test_one_producer_100k_in_order),
        cmocka_unit_test(test_many_producers_small_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
