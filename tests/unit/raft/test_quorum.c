/* The quorum arithmetic (include/kq/quorum.h) as tables: majority, the majority end, the
 * high-watermark rule (current epoch, log end, never back), vote tallies and check-quorum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kq/quorum.h"

static void test_majority(void **state)
{
    static const struct {
        int n, want;
    } t[] = {{1, 1}, {2, 2}, {3, 2}, {4, 3}, {5, 3}, {6, 4}, {7, 4}, {0, 1}, {-3, 1}};

    (void)state;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        assert_int_equal(kq_quorum_majority(t[i].n), t[i].want);
}

static void test_majority_end(void **state)
{
    static const struct {
        int n;
        int64_t ends[5], want;
    } t[] = {
        {1, {7}, 7},
        {3, {10, 4, 7}, 7}, /* two of three have 7 */
        {3, {4, 4, 10}, 4}, /* the leader far ahead counts for one */
        {3, {0, 0, 9}, 0},
        {5, {9, 8, 7, 6, 5}, 7},     /* three of five */
        {5, {5, 9, 5, 9, 1}, 5},     /* ties */
        {4, {10, 10, 2, 2}, 2},      /* an even set needs three */
        {5, {-1, -1, -1, 3, 3}, -1}, /* voters that never fetched */
    };

    (void)state;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        assert_int_equal(kq_quorum_majority_end(t[i].ends, t[i].n), t[i].want);
    assert_int_equal(kq_quorum_majority_end(t[0].ends, 0), -1);
}

static void test_high_watermark(void **state)
{
    static const struct {
        int64_t ends[3], leo, epoch_start, hw, want;
    } t[] = {
        {{10, 7, 4}, 10, 0, 0, 7}, /* the majority end */
        {{10, 7, 4}, 6, 0, 0, 6},  /* never past the leader's log end */
        {{10, 7, 4}, 10, 7, 3, 3}, /* 7 is not past the epoch start: nothing of this epoch
                                      is on a majority yet, the old value stays */
        {{10, 8, 4}, 10, 7, 3, 8}, /* 8 is: it counts */
        {{10, 5, 4}, 10, 0, 9, 9}, /* never back */
        {{10, 10, 10}, 10, 0, 10, 10},
    };

    (void)state;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        assert_int_equal(
            kq_quorum_high_watermark(t[i].ends, 3, t[i].leo, t[i].epoch_start, t[i].hw), t[i].want);
}

static void test_tally(void **state)
{
    static const struct {
        int granted, rejected, n;
        kq_vote_tally want;
    } t[] = {
        {1, 0, 1, KQ_VOTE_WON},  {1, 0, 3, KQ_VOTE_OPEN}, {2, 0, 3, KQ_VOTE_WON},
        {1, 1, 3, KQ_VOTE_OPEN}, {1, 2, 3, KQ_VOTE_LOST}, {2, 2, 5, KQ_VOTE_OPEN},
        {2, 3, 5, KQ_VOTE_LOST}, {3, 2, 5, KQ_VOTE_WON},  {2, 1, 4, KQ_VOTE_OPEN},
        {2, 2, 4, KQ_VOTE_LOST},
    };

    (void)state;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        assert_int_equal(kq_quorum_tally(t[i].granted, t[i].rejected, t[i].n), t[i].want);
}

static void test_heard(void **state)
{
    (void)state;
    assert_true(kq_quorum_heard(1, 1));
    assert_false(kq_quorum_heard(1, 3));
    assert_true(kq_quorum_heard(2, 3));
    assert_false(kq_quorum_heard(2, 5));
    assert_true(kq_quorum_heard(3, 5));
    assert_false(kq_quorum_heard(2, 4));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_majority),       cmocka_unit_test(test_majority_end),
        cmocka_unit_test(test_high_watermark), cmocka_unit_test(test_tally),
        cmocka_unit_test(test_heard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
