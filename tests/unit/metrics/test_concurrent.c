/* kq_metrics under concurrency: 4 threads update a counter, gauges and a histogram while the
 * main thread renders in a loop; another thread registers new families during the renders.
 * Every render must be well formed (histogram +Inf == _count, cumulative buckets, counters
 * never going down) and the final values exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#include "metrics_testlib.h"

#define N_THREADS 4
#define N_ITER 200000
#define N_REGISTER 300

typedef struct shared {
    kq_metrics *m;
    kq_metric *counter, *gauge, *gauge_int, *hist;
    atomic_int done;
} shared;

static const double bounds[] = {0.001, 0.01, 0.1};

static void *updater(void *arg)
{
    shared *s = arg;
    /* 0.0005 -> first bucket, 0.05 -> third, 5 -> +Inf only */
    static const double obs[] = {0.0005, 0.05, 5};

    for (int i = 0; i < N_ITER; i++) {
        kq_metric_inc(s->counter);
        kq_metric_add(s->gauge, 1.0);
        kq_metric_add(s->gauge_int, 1);
        kq_metric_observe(s->hist, obs[i % 3]);
    }
    atomic_fetch_add(&s->done, 1);
    return NULL;
}

static void *registrar(void *arg)
{
    shared *s = arg;
    char name[64];

    for (int i = 0; i < N_REGISTER; i++) {
        snprintf(name, sizeof(name), "kq_late_%d", i);
        kq_metric_set_int(kq_metrics_gauge_int(s->m, name, "registered late", "x=\"1\""), i);
    }
    atomic_fetch_add(&s->done, 1);
    return NULL;
}

static uint64_t series_value(const char *text, const char *series)
{
    const char *p = strstr(text, series);

    if (p == NULL)
        fail_msg("series %s missing from render", series);
    return strtoull(p + strlen(series), NULL, 10);
}

/* Checks one render: returns the counter value seen. */
static uint64_t check_render(const char *text, size_t len)
{
    uint64_t b[4], count, prev = 0;
    char series[96];

    assert_true(len > 0 && text[len - 1] == '\n');
    for (int i = 0; i < 4; i++) {
        const char *le = i == 0 ? "0.001" : i == 1 ? "0.01" : i == 2 ? "0.1" : "+Inf";
        snprintf(series, sizeof(series), "\nkq_lat_seconds_bucket{le=\"%s\"} ", le);
        b[i] = series_value(text, series);
        assert_true(b[i] >= prev); /* cumulative */
        prev = b[i];
    }
    count = series_value(text, "\nkq_lat_seconds_count ");
    assert_true(b[3] == count);
    assert_int_equal(mt_count(text, "# TYPE kq_lat_seconds "), 1);
    return series_value(text, "\nkq_ops_total ");
}

static void test_concurrent_updates_and_render(void **state)
{
    shared s;
    pthread_t th[N_THREADS + 1];
    uint64_t last = 0;
    int renders = 0;
    char *text = NULL;
    size_t len = 0;
    char series[64];

    memset(&s, 0, sizeof(s));
    atomic_init(&s.done, 0);
    s.m = kq_metrics_new();
    assert_non_null(s.m);
    s.counter = kq_metrics_counter(s.m, "kq_ops_total", "ops", NULL);
    s.gauge = kq_metrics_gauge(s.m, "kq_level", "level", NULL);
    s.gauge_int = kq_metrics_gauge_int(s.m, "kq_level_int", "level", NULL);
    s.hist = kq_metrics_histogram(s.m, "kq_lat_seconds", "latency", bounds, 3);
    assert_non_null(s.counter);
    assert_non_null(s.gauge);
    assert_non_null(s.gauge_int);
    assert_non_null(s.hist);

    for (int i = 0; i < N_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, updater, &s), 0);
    assert_int_equal(pthread_create(&th[N_THREADS], NULL, registrar, &s), 0);

    /* render until every thread is done, and at least a few times */
    while (atomic_load(&s.done) < N_THREADS + 1 || renders < 5) {
        uint64_t seen;

        assert_int_equal(kq_metrics_render(s.m, &text, &len), 0);
        seen = check_render(text, len);
        assert_true(seen >= last); /* a counter never goes down */
        last = seen;
        free(text);
        renders++;
    }
    for (int i = 0; i <= N_THREADS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);

    /* final values are exact */
    assert_true(kq_metric_value(s.counter) == (double)N_THREADS * N_ITER);
    assert_true(kq_metric_value(s.gauge) == (double)N_THREADS * N_ITER);
    assert_true(kq_metric_value(s.gauge_int) == (double)N_THREADS * N_ITER);
    assert_true(kq_metric_value(s.hist) == (double)N_THREADS * N_ITER);

    assert_int_equal(kq_metrics_render(s.m, &text, &len), 0);
    check_render(text, len);
    assert_int_equal(series_value(text, "\nkq_ops_total "), N_THREADS * N_ITER);
    assert_int_equal(series_value(text, "\nkq_level_int "), N_THREADS * N_ITER);
    assert_int_equal(series_value(text, "\nkq_level "), N_THREADS * N_ITER);
    /* each third of the observations lands in its bucket */
    {
        /* per thread, observation i goes to obs[i % 3] */
        uint64_t first = (uint64_t)N_THREADS * (N_ITER / 3 + (N_ITER % 3 >= 1));
        uint64_t second = (uint64_t)N_THREADS * (N_ITER / 3 + (N_ITER % 3 >= 2));
        assert_int_equal(series_value(text, "\nkq_lat_seconds_bucket{le=\"0.001\"} "), first);
        assert_int_equal(series_value(text, "\nkq_lat_seconds_bucket{le=\"0.01\"} "), first);
        assert_int_equal(series_value(text, "\nkq_lat_seconds_bucket{le=\"0.1\"} "),
                         first + second);
        assert_int_equal(series_value(text, "\nkq_lat_seconds_bucket{le=\"+Inf\"} "),
                         (uint64_t)N_THREADS * N_ITER);
    }
    /* every family registered during the renders is there, once */
    for (int i = 0; i < N_REGISTER; i++) {
        snprintf(series, sizeof(series), "\nkq_late_%d{x=\"1\"} ", i);
        assert_int_equal(series_value(text, series), i);
        snprintf(series, sizeof(series), "# TYPE kq_late_%d gauge\n", i);
        assert_int_equal(mt_count(text, series), 1);
    }
    free(text);
    kq_metrics_free(s.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_updates_and_render),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
