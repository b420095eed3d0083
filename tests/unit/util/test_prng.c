/* splitmix64 determinism and kq_prng_below's range; clock sanity. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <time.h>

#include "kq/util.h"

static void test_reference_sequence(void **state)
{
    kq_prng p;
    kq_prng_seed(&p, 0);
    assert_int_equal(kq_prng_next(&p), 0xE220A8397B1DCDAFull);
    kq_prng_seed(&p, 1234567);
    assert_int_equal(kq_prng_next(&p), 6457827717110365317ull);
    assert_int_equal(kq_prng_next(&p), 3203168211198807973ull);
    assert_int_equal(kq_prng_next(&p), 9817491932198370423ull);
    assert_int_equal(kq_prng_next(&p), 4593380528125082431ull);
    assert_int_equal(kq_prng_next(&p), 16408922859458223821ull);
}

static void test_same_seed_same_sequence(void **state)
{
    kq_prng a, b, c;
    kq_prng_seed(&a, 0xfeedface);
    kq_prng_seed(&b, 0xfeedface);
    kq_prng_seed(&c, 0xfeedfacf);
    int differs = 0;
    for (int i = 0; i < 10000; i++) {
        uint64_t x = kq_prng_next(&a);
        assert_int_equal(x, kq_prng_next(&b));
        differs += x != kq_prng_next(&c);
    }
    assert_true(differs > 9990);
}

static void test_below_range_and_spread(void **state)
{
    kq_prng p;
    kq_prng_seed(&p, 7);
    uint64_t hist[10] = {0};
    for (int i = 0; i < 100000; i++) {
        uint64_t v = kq_prng_below(&p, 10);
        assert_true(v < 10);
        hist[v]++;
    }
    for (int i = 0; i < 10; i++) { /* expected 10000 each; deterministic for this seed */
        assert_true(hist[i] > 9000);
        assert_true(hist[i] < 11000);
    }
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(kq_prng_below(&p, 1), 0);
        assert_true(kq_prng_below(&p, 3) < 3);
        assert_true(kq_prng_below(&p, UINT64_MAX) < UINT64_MAX);
        assert_true(kq_prng_below(&p, (1ull << 63) + 1) < (1ull << 63) + 1);
    }
    /* determinism of below as well */
    kq_prng a, b;
    kq_prng_seed(&a, 99);
    kq_prng_seed(&b, 99);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(kq_prng_below(&a, 1000 + (uint64_t)i),
                         kq_prng_below(&b, 1000 + (uint64_t)i));
}

/* kq_prng_range covers [lo, hi] and only it; kq_prng_permille hits about permille / 1000. */
static void test_range_and_permille(void **state)
{
    kq_prng p;
    int seen[5] = {0}, hits = 0;
    (void)state;
    kq_prng_seed(&p, 99);
    for (int i = 0; i < 5000; i++) {
        uint64_t v = kq_prng_range(&p, 10, 14);
        assert_true(v >= 10 && v <= 14);
        seen[v - 10]++;
    }
    for (int i = 0; i < 5; i++)
        assert_true(seen[i] > 800 && seen[i] < 1200);
    assert_int_equal(kq_prng_range(&p, 7, 7), 7);
    for (int i = 0; i < 10000; i++)
        hits += kq_prng_permille(&p, 250);
    assert_true(hits > 2300 && hits < 2700);
    for (int i = 0; i < 100; i++) {
        assert_false(kq_prng_permille(&p, 0));
        assert_true(kq_prng_permille(&p, 1000));
    }
}

static void test_clocks(void **state)
{
    uint64_t prev = kq_now_ns();
    for (int i = 0; i < 10000; i++) {
        uint64_t now = kq_now_ns();
        assert_true(now >= prev);
        prev = now;
    }
    uint64_t ms1 = kq_now_ms();
    uint64_t ns = kq_now_ns();
    uint64_t ms2 = kq_now_ms();
    assert_true(ms1 <= ns / 1000000u);
    assert_true(ns / 1000000u <= ms2);
    /* wall clock is epoch milliseconds: compare with time(2) generously */
    int64_t wall = kq_wall_ms();
    int64_t t = (int64_t)time(NULL);
    assert_true(wall / 1000 > t - 60);
    assert_true(wall / 1000 < t + 60);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_sequence),
        cmocka_unit_test(test_same_seed_same_sequence),
        cmocka_unit_test(test_below_range_and_spread),
        cmocka_unit_test(test_range_and_permille),
        cmocka_unit_test(test_clocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
