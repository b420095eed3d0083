/*
 * Rule test (found by the former data-plane simulator, kq-dsim seed 115494 with --min-isr 1): a
 * metadata delta that repeats the partition epoch the leader already knows must not drop a
 * pending ISR expansion. The AlterPartition was sent with that partition epoch, so the
 * controller can still accept it; until its answer (or newer metadata) the maximal ISR, which
 * contains the joining follower, must bound the HW (kraft-semantics 4.3, KIP-497). Otherwise
 * the HW passes the new member's log end, acks=all records are acknowledged that an ISR
 * member lacks, and electing that member loses them.
 */
#include "harness.h"

static void test_same_epoch_delta_keeps_pending_expand(void **state)
{
    (void)state;
    h_cluster h;
    const int32_t isr12[] = {1, 2};
    const int32_t isr123[] = {1, 2, 3};

    h_init(&h, 3, 2, 10000);
    h_delta_all(&h, 1, 0, 0, isr12, 2);
    h_produce_n(&h, 1, 1, 2, 0);
    h_catch_up(&h, 2);
    h_catch_up(&h, 3); /* broker 3 reaches the HW: expansion to 1,2,3 is sent */
    assert_true(hb(&h, 1)->has_alter);
    assert_int_equal(hb(&h, 1)->alter.n_new_isr, 3);
    assert_int_equal(hb(&h, 1)->alter.partition_epoch, 0);
    assert_int_equal(h_status(&h, 1).high_watermark, 2);

    /* the delta of partition epoch 0 is applied (again) while the request is in flight */
    assert_int_equal(h_delta(&h, 1, 1, 0, 0, isr12, 2), 0);
    kq_replica_status st = h_status(&h, 1);
    assert_int_equal(st.pending, KQ_REPLICA_PENDING_EXPAND);
    assert_int_equal(st.n_maximal_isr, 3);

    /* broker 3 falls silent past the lag time; broker 2 takes new acks=all records */
    h.now += 20000;
    h_produce_result p = h_produce_n(&h, 1, -1, 3, 60000);
    assert_false(p.answered);
    h_catch_up(&h, 2);
    assert_int_equal(hb(&h, 2)->len, 5);
    /* the HW waits for broker 3, which may already be in the committed ISR */
    assert_int_equal(h_status(&h, 1).high_watermark, 2);
    assert_int_equal(h_done_index(&h, 1, p.token), -1);

    /* the controller accepts the expansion: 1,2,3 at partition epoch 1 */
    h_alter_answer(&h, 1, KQ_OK);
    assert_true(h_isr_is(&h, 1, isr123, 3));
    assert_int_equal(h_status(&h, 1).partition_epoch, 1);
    assert_int_equal(h_status(&h, 1).high_watermark, 2);
    assert_int_equal(hb(&h, 1)->n_alters, 1); /* no second request was started */

    /* once broker 3 has the records they are committed and acknowledged */
    h_catch_up(&h, 3);
    h_catch_up(&h, 2);
    assert_int_equal(h_status(&h, 1).high_watermark, 5);
    int i = h_done_index(&h, 1, p.token);
    assert_true(i >= 0);
    assert_int_equal(hb(&h, 1)->done[i].error, KQ_OK);
    h_free(&h);
}

static void test_newer_epoch_delta_drops_pending_expand(void **state)
{
    (void)state;
    h_cluster h;
    const int32_t isr12[] = {1, 2};

    h_init(&h, 3, 2, 10000);
    h_delta_all(&h, 1, 0, 0, isr12, 2);
    h_produce_n(&h, 1, 1, 2, 0);
    h_catch_up(&h, 2);
    h_catch_up(&h, 3);
    assert_true(hb(&h, 1)->has_alter);

    /* a newer partition epoch: the controller rejects the request (compare-and-swap), so the
     * pending state goes and the committed ISR of the delta is what counts */
    assert_int_equal(h_delta(&h, 1, 1, 0, 1, isr12, 2), 0);
    kq_replica_status st = h_status(&h, 1);
    assert_int_equal(st.pending, KQ_REPLICA_PENDING_NONE);
    assert_int_equal(st.n_maximal_isr, 2);
    assert_int_equal(st.partition_epoch, 1);
    h_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_epoch_delta_keeps_pending_expand),
        cmocka_unit_test(test_newer_epoch_delta_drops_pending_expand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
