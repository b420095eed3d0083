/* Latency histogram: quantiles within 1 % of exact sorted data, clamping, merge. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "kq/util.h"

#define N 100000

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t exact_quantile(const uint64_t *sorted, size_t n, double q)
{
    double want = q * (double)n;
    size_t rank = (size_t)want;
    if ((double)rank < want)
        rank++;
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return sorted[rank - 1];
}

static void check_quantiles(const kq_hist *h, uint64_t *vals, size_t n)
{
    static const double qs[] = {0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0};
    qsort(vals, n, sizeof(vals[0]), cmp_u64);
    for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
        uint64_t want = exact_quantile(vals, n, qs[i]);
        uint64_t got = kq_hist_quantile(h, qs[i]);
        /* an upper bound, at most 1 % above the exact value */
        assert_true(got >= want);
        assert_true((double)got <= (double)want * 1.01);
    }
}

static void test_log_uniform_data(void **state)
{
    static kq_hist h;
    static uint64_t vals[N];
    kq_prng p;
    kq_prng_seed(&p, 1);
    kq_hist_init(&h);
    uint64_t sum = 0;
    for (size_t i = 0; i < N; i++) {
        /* 1 us .. ~100 s, spread over the decades */
        uint64_t decade = 1000;
        for (uint64_t d = kq_prng_below(&p, 8); d > 0; d--)
            decade *= 10;
        vals[i] = decade + kq_prng_below(&p, decade * 9);
        sum += vals[i];
        kq_hist_add(&h, vals[i]);
    }
    assert_int_equal(h.n, N);
    assert_int_equal(h.sum_ns, sum);
    check_quantiles(&h, vals, N);
    assert_int_equal(h.min_ns, vals[0]);
    assert_int_equal(h.max_ns, vals[N - 1]);
    assert_int_equal(kq_hist_quantile(&h, 1.0), vals[N - 1]);
}

static void test_every_value_in_a_narrow_range(void **state)
{
    /* dense integers around the low end where bucket bounds are closest together */
    static kq_hist h;
    static uint64_t vals[20000];
    kq_hist_init(&h);
    for (size_t i = 0; i < 20000; i++) {
        vals[i] = 1001 + i;
        kq_hist_add(&h, vals[i]);
    }
    check_quantiles(&h, vals, 20000);
    for (uint64_t v = 1001; v < 200000; v += 37) {
        kq_hist one;
        kq_hist_init(&one);
        kq_hist_add(&one, v);
        kq_hist_add(&one, 200000000);
        uint64_t q = kq_hist_quantile(&one, 0.5);
        assert_true(q >= v);
        assert_true((double)q <= (double)v * 1.01);
    }
}

static void test_empty_and_clamping(void **state)
{
    static kq_hist h;
    kq_hist_init(&h);
    assert_int_equal(kq_hist_quantile(&h, 0.5), 0);
    assert_int_equal(h.n, 0);

    kq_hist_add(&h, 0);
    kq_hist_add(&h, 5);             /* below 1 us: first bucket */
    kq_hist_add(&h, 500000000000u); /* 500 s: beyond 100 s, last bucket */
    assert_int_equal(h.counts[0], 2);
    assert_int_equal(h.counts[2047], 1);
    assert_int_equal(h.n, 3);
    assert_int_equal(h.min_ns, 0);
    assert_int_equal(h.max_ns, 500000000000u);
    uint64_t p50 = kq_hist_quantile(&h, 0.5);
    assert_true(p50 >= 5);
    assert_true(p50 <= 1000);
    uint64_t p100 = kq_hist_quantile(&h, 1.0);
    assert_true(p100 >= 100000000000u); /* at least the last bound; never beyond the max */
    assert_true(p100 <= 500000000000u);
    /* q outside [0, 1] is clamped */
    assert_int_equal(kq_hist_quantile(&h, -3.0), kq_hist_quantile(&h, 0.0));
    assert_int_equal(kq_hist_quantile(&h, 7.0), kq_hist_quantile(&h, 1.0));
}

static void test_merge_equals_combined(void **state)
{
    static kq_hist a, b, all, empty;
    kq_prng p;
    kq_prng_seed(&p, 5);
    kq_hist_init(&a);
    kq_hist_init(&b);
    kq_hist_init(&all);
    kq_hist_init(&empty);
    for (int i = 0; i < 5000; i++) {
        uint64_t v = 1000 + kq_prng_below(&p, 50000000);
        kq_hist_add(i % 3 ? &a : &b, v);
        kq_hist_add(&all, v);
    }
    kq_hist_merge(&a, &b);
    kq_hist_merge(&a, &empty);
    assert_memory_equal(&a, &all, sizeof(a));
    kq_hist_merge(&empty, &all);
    assert_memory_equal(&empty, &all, sizeof(all));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_uniform_data),
        cmocka_unit_test(test_every_value_in_a_narrow_range),
        cmocka_unit_test(test_empty_and_clamping),
        cmocka_unit_test(test_merge_equals_combined),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
