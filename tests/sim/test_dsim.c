/*
 * Self-tests of the data-plane simulator (dsim.h): options are validated, a seed is
 * reproducible, different seeds differ, healthy runs acknowledge records and converge, and each
 * deliberately broken host is caught with the invariant it breaks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dsim.h"
#include "kq/error.h"

static kq_dsim_opts quiet_opts(uint64_t seed)
{
    kq_dsim_opts o;
    kq_dsim_opts_defaults(&o);
    o.seed = seed;
    o.dump_on_failure = false;
    return o;
}

static void test_bad_options_are_rejected(void **state)
{
    (void)state;
    kq_dsim_result r;
    kq_dsim_opts o = quiet_opts(1);

    o.brokers = 2;
    assert_int_equal(kq_dsim_run(&o, &r), KQ_ERR_INVALID_CONFIG);
    assert_non_null(strstr(r.reason, "brokers 2"));
    o = quiet_opts(1);
    o.min_isr = 4;
    assert_int_equal(kq_dsim_run(&o, &r), KQ_ERR_INVALID_CONFIG);
    assert_non_null(strstr(r.reason, "min ISR 4"));
    o = quiet_opts(1);
    o.partitions = 3;
    assert_int_equal(kq_dsim_run(&o, &r), KQ_ERR_INVALID_CONFIG);
    assert_int_equal(kq_dsim_bug_from_name("unclean"), KQ_DSIM_BUG_UNCLEAN);
    assert_int_equal(kq_dsim_bug_from_name("same-epoch"), KQ_DSIM_BUG_SAME_EPOCH);
    assert_int_equal(kq_dsim_bug_from_name("nonsense"), -1);
}

static void test_same_seed_same_trace(void **state)
{
    (void)state;
    kq_dsim_result a, b, c;
    kq_dsim_opts o = quiet_opts(42);

    assert_int_equal(kq_dsim_run(&o, &a), 0);
    assert_int_equal(kq_dsim_run(&o, &b), 0);
    assert_false(a.failed);
    assert_int_equal(a.trace_hash, b.trace_hash);
    assert_int_equal(a.events, b.events);
    assert_int_equal(a.acked_all, b.acked_all);
    o.seed = 43;
    assert_int_equal(kq_dsim_run(&o, &c), 0);
    assert_int_not_equal(a.trace_hash, c.trace_hash);
}

static void test_healthy_runs_acknowledge_and_converge(void **state)
{
    (void)state;
    uint64_t acked = 0, crashes = 0, elections = 0, truncations = 0;

    for (uint64_t seed = 1; seed <= 40; seed++) {
        kq_dsim_result r;
        kq_dsim_opts o = quiet_opts(seed);
        assert_int_equal(kq_dsim_run(&o, &r), 0);
        if (r.failed) {
            fail_msg("seed %llu: %s", (unsigned long long)seed, r.reason);
        }
        assert_true(r.brokers >= 3 && r.brokers <= KQ_DSIM_MAX_BROKERS);
        assert_true(r.final_end[0] > 0);
        acked += r.acked_all;
        crashes += r.crashes;
        elections += r.elections;
        truncations += r.truncations;
    }
    /* the faults really happen and the workload really commits */
    assert_true(acked > 1000);
    assert_true(crashes > 0);
    assert_true(elections > 0);
    assert_true(truncations > 0);
}

/* Run seeds with a broken host until one fails; its reason must name `inv`. */
static void expect_caught(kq_dsim_bug bug, const char *inv)
{
    for (uint64_t seed = 1; seed <= 300; seed++) {
        kq_dsim_result r;
        kq_dsim_opts o = quiet_opts(seed);
        o.bug = bug;
        assert_int_equal(kq_dsim_run(&o, &r), 0);
        if (r.failed && strstr(r.reason, inv)) {
            return;
        }
    }
    fail_msg("no seed in 1..300 caught bug %d with %s", (int)bug, inv);
}

static void test_unclean_election_loses_acknowledged_records(void **state)
{
    (void)state;
    expect_caught(KQ_DSIM_BUG_UNCLEAN, "inv1:");
}

static void test_lying_fsync_is_caught(void **state)
{
    (void)state;
    expect_caught(KQ_DSIM_BUG_LOSE_SYNCED, "inv1:");
}

static void test_fetch_before_durable_is_caught(void **state)
{
    (void)state;
    expect_caught(KQ_DSIM_BUG_EARLY_FETCH, "inv");
}

static void test_two_leaders_in_one_epoch_are_caught(void **state)
{
    (void)state;
    expect_caught(KQ_DSIM_BUG_SAME_EPOCH, "inv4:");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_options_are_rejected),
        cmocka_unit_test(test_same_seed_same_trace),
        cmocka_unit_test(test_healthy_runs_acknowledge_and_converge),
        cmocka_unit_test(test_unclean_election_loses_acknowledged_records),
        cmocka_unit_test(test_lying_fsync_is_caught),
        cmocka_unit_test(test_fetch_before_durable_is_caught),
        cmocka_unit_test(test_two_leaders_in_one_epoch_are_caught),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
