/*
 * Follower truncation by leader epoch and failover stories of kq_replica
 * (../shared/reference/kraft-semantics.md 4.4, 4.6, 4.7; the seeds' "ledger" experiment in
 * ../shared/seeds/002_*.txt), with a virtual clock and model logs per broker.
 */
#include "harness.h"

static h_cluster H;
static const int32_t ISR123[] = {1, 2, 3};
static const int32_t ISR12[] = {1, 2};
static const int32_t ISR1[] = {1};
static const int32_t ISR2[] = {2};
static const int32_t ISR23[] = {2, 3};

/* KIP-101 story A (4.6): a follower that restarts with a stale HW must not truncate data the
 * leader has acknowledged; when it then becomes leader the acknowledged record survives. */
static void test_4_6_kip101_stale_hw_does_not_truncate_acknowledged(void **state)
{
    (void)state;
    h_init(&H, 2, 1, 30000);
    h_delta_all(&H, 1, 1, 0, ISR12, 2);
    h_produce_result m0 = h_produce(&H, 1, -1);
    h_produce_result m1 = h_produce(&H, 1, -1);
    h_fetch(&H, 2);      /* B gets m0, m1 with HW 0 */
    h_fetch_lost(&H, 2); /* A learns B has both: HW 2, both acknowledged; B never hears it */
    assert_int_equal(H.b[1].done[h_done_index(&H, 1, m0.token)].error, KQ_OK);
    assert_int_equal(H.b[1].done[h_done_index(&H, 1, m1.token)].error, KQ_OK);
    assert_int_equal(H.b[2].hw, 0);

    h_crash(&H, 2);
    h_boot(&H, 2); /* restarts with HW 0 and LEO 2 */
    h_delta(&H, 2, 1, 1, 0, ISR12, 2);
    h_fetch(&H, 2);
    assert_int_equal(H.b[2].n_truncations, 0);
    assert_int_equal(H.b[2].len, 2);

    h_crash(&H, 1); /* A dies: B, in the ISR, is elected */
    H.b[1].fenced = true;
    static const int32_t isr_b[] = {2};
    assert_int_equal(h_delta(&H, 2, 2, 2, 1, isr_b, 1), 0);
    assert_int_equal(h_status(&H, 2).role, KQ_REPLICA_LEADER);
    assert_int_equal(H.b[2].n_truncations, 0);
    assert_int_equal(kq_replica_readable_end(H.b[2].r), 2); /* m1 is readable */
    assert_int_equal(H.b[2].value[1], (int)m1.token);

    H.b[1].fenced = false;
    h_boot(&H, 1);
    h_delta(&H, 1, 2, 2, 1, isr_b, 1);
    h_catch_up(&H, 1);
    assert_int_equal(H.b[1].n_truncations, 0);
    h_assert_same_prefix(&H, 1, 2, 2);
    h_free(&H);
}

/* KIP-101 story B (4.6): after a double failure the two logs must not hold different records
 * at the same offset: the returning broker truncates by the new leader's epoch, not its HW. */
static void test_4_6_kip101_double_failure_logs_do_not_diverge(void **state)
{
    (void)state;
    h_init(&H, 2, 1, 30000);
    h_delta_all(&H, 1, 1, 0, ISR12, 2);
    h_produce(&H, 1, -1);
    h_catch_up(&H, 2);
    h_crash(&H, 2);
    h_delta(&H, 1, 1, 1, 1, ISR1, 1);
    h_produce_result m1 = h_produce(&H, 1, 1); /* only on A; A's HW becomes 2 */
    assert_int_equal(m1.base_offset, 1);
    assert_int_equal(H.b[1].hw, 2);
    h_crash(&H, 1); /* power failure: both down */

    h_boot(&H, 2);
    static const int32_t isr_b[] = {2};
    assert_int_equal(h_delta(&H, 2, 2, 2, 2, isr_b, 1), 0); /* B leads (unclean) */
    h_produce_result m2 = h_produce(&H, 2, 1);
    assert_int_equal(m2.base_offset, 1);

    h_boot(&H, 1); /* HW 2 on disk, log m0 m1 */
    assert_int_equal(h_delta(&H, 1, 2, 2, 2, isr_b, 1), 0);
    h_catch_up(&H, 1);
    assert_int_equal(H.b[1].n_truncations, 1);
    assert_int_equal(H.b[1].last_truncate_to, 1);
    assert_true(h_line(&H, 1, "Truncating to offset 1") >= 0);
    h_assert_same_prefix(&H, 1, 2, 2);
    assert_int_equal(H.b[1].value[1], (int)m2.token);
    assert_int_equal(H.b[1].hw, H.b[2].hw); /* learned from the new leader */
    h_free(&H);
}

/* KIP-279 (4.6): back-to-back failover. A follower whose last epoch the leader does not know
 * truncates to min(leader end, its own end for the leader's epoch, LEO), then asks again. */
static void test_4_6_kip279_back_to_back_failover(void **state)
{
    (void)state;
    h_init(&H, 2, 1, 30000);
    h_delta_all(&H, 1, 1, 0, ISR12, 2);
    h_produce(&H, 1, -1);
    h_catch_up(&H, 2);                         /* both: m0 @ epoch 1 */
    h_produce_result m1 = h_produce(&H, 1, 1); /* A: m1 @ offset 1, epoch 1, unreplicated */
    h_crash(&H, 1);
    static const int32_t isr_b[] = {2};
    static const int32_t isr_a[] = {1};
    assert_int_equal(h_delta(&H, 2, 2, 2, 1, isr_b, 1), 0);
    h_produce_result m1b = h_produce(&H, 2, 1); /* B: m1' @ offset 1, epoch 2 */
    assert_int_equal(m1b.base_offset, 1);
    h_crash(&H, 2);
    h_boot(&H, 1);
    assert_int_equal(h_delta(&H, 1, 1, 3, 2, isr_a, 1), 0); /* A back, epoch 3, never saw 2 */
    h_boot(&H, 2);
    assert_int_equal(h_delta(&H, 2, 1, 3, 2, isr_a, 1), 0);

    kq_replica_fetch_answer a = h_fetch(&H, 2);
    assert_true(a.diverging);
    assert_int_equal(a.diverging_epoch, 1);
    assert_int_equal(a.diverging_end_offset, 2);  /* A's epoch 1 ends at 2 ... */
    assert_int_equal(H.b[2].last_truncate_to, 1); /* ... but B's epoch 1 ends at 1 */
    h_catch_up(&H, 2);
    h_assert_same_prefix(&H, 1, 2, 2);
    assert_int_equal(H.b[2].value[1], (int)m1.token);
    assert_int_equal(H.b[2].epoch_at[1], 1);
    h_produce(&H, 1, 1);
    h_catch_up(&H, 2);
    h_assert_same_prefix(&H, 1, 2, 3);
    h_free(&H);
}

/* 4.4/4.6: a follower's HW is min(leader HW in the response, its LEO). */
static void test_4_4_follower_hw_is_min_of_leader_hw_and_leo(void **state)
{
    (void)state;
    h_init(&H, 3, 1, 30000);
    h_delta_all(&H, 1, 1, 0, ISR12, 2);
    h_produce_n(&H, 1, 1, 6, 0);
    h_catch_up(&H, 2);
    assert_int_equal(h_status(&H, 1).high_watermark, 6);
    h_fetch_max(&H, 3, 2); /* broker 3 (not in the ISR) gets 2 records and HW 6 */
    assert_int_equal(H.b[3].hw, 2);
    h_catch_up(&H, 3);
    assert_int_equal(H.b[3].hw, 6);
    h_free(&H);
}

/* The seeds' "ledger" experiment at the replica level: RF 3, min.insync.replicas 2. */
static void test_seed_ledger_experiment(void **state)
{
    (void)state;
    h_init(&H, 3, 2, 30000);
    h_delta_all(&H, 1, 1, 0, ISR123, 3);

    h_produce_result dep100 = h_produce(&H, 1, -1); /* acks=all 'deposit 100' */
    h_catch_up(&H, 2);
    h_catch_up(&H, 3);
    h_catch_up(&H, 2);
    int i = h_done_index(&H, 1, dep100.token);
    assert_true(i >= 0);
    assert_int_equal(H.b[1].done[i].error, KQ_OK);
    assert_int_equal(H.b[1].done[i].base_offset, 0); /* written at offset 0 */

    h_crash(&H, 3); /* stop broker 3: the controller fences it, ISR 1,2 */
    h_delta_all(&H, 1, 1, 1, ISR12, 2);
    h_produce_result dep50 = h_produce(&H, 1, -1); /* acks=all 'deposit 50' */
    h_catch_up(&H, 2);
    i = h_done_index(&H, 1, dep50.token);
    assert_true(i >= 0);
    assert_int_equal(H.b[1].done[i].error, KQ_OK);
    assert_int_equal(H.b[1].done[i].base_offset, 1); /* written at offset 1 */

    h_crash(&H, 2); /* stop broker 2: ISR 1 (Elr 2) */
    h_delta_all(&H, 1, 1, 2, ISR1, 1);
    h_produce_result w30 = h_produce(&H, 1, -1); /* acks=all 'withdraw 30' */
    assert_true(w30.answered);
    assert_int_equal(w30.error, KQ_ERR_NOT_ENOUGH_REPLICAS);
    assert_int_equal(h_status(&H, 1).log_end_offset, 2); /* nothing written */
    h_produce_result w20 = h_produce(&H, 1, 1);          /* acks=1 'withdraw 20' */
    assert_int_equal(w20.error, KQ_OK);
    assert_int_equal(w20.base_offset, 2); /* written at offset 2 ... */
    h_tick(&H, 1, 15000);
    assert_int_equal(kq_replica_readable_end(H.b[1].r), 2); /* ... but not readable */
    assert_int_equal(H.b[1].len, 3);                        /* 3 batches in the leader's log */

    h_crash(&H, 1); /* broker 1 crashes; 2 and 3 restart; 2 (from the ELR) leads */
    H.b[1].fenced = true;
    h_boot(&H, 2);
    h_boot(&H, 3);
    assert_int_equal(h_delta(&H, 2, 2, 2, 3, ISR2, 1), 0);
    assert_int_equal(h_delta(&H, 3, 2, 2, 3, ISR2, 1), 0);
    assert_int_equal(h_status(&H, 2).role, KQ_REPLICA_LEADER);
    assert_int_equal(h_produce(&H, 2, -1).error, KQ_ERR_NOT_ENOUGH_REPLICAS);
    h_catch_up(&H, 3);
    assert_true(h_line(&H, 2, "Expanding ISR from 2 to 2,3") >= 0);
    h_alter_answer(&H, 2, KQ_OK);
    assert_true(h_isr_is(&H, 2, ISR23, 2));

    H.b[1].fenced = false; /* broker 1 restarts and follows 2 */
    h_boot(&H, 1);
    assert_int_equal(h_delta(&H, 1, 2, 2, 4, ISR23, 2), 0);
    h_catch_up(&H, 1);
    assert_int_equal(H.b[1].n_truncations, 1);
    assert_int_equal(H.b[1].last_truncate_to, 2);
    assert_true(h_line(&H, 1, "Truncating to offset 2") >= 0);
    for (int id = 1; id <= 3; id++) {
        assert_int_equal(H.b[id].len, 2); /* every broker has two batches */
    }
    h_assert_same_prefix(&H, 1, 2, 2);
    h_assert_same_prefix(&H, 3, 2, 2);

    int64_t from, to; /* a consumer from the beginning sees deposit 100 and deposit 50 only */
    assert_int_equal(kq_replica_consumer_read(H.b[2].r, 0, &from, &to), 0);
    assert_int_equal(from, 0);
    assert_int_equal(to, 2);
    assert_int_equal(H.b[2].value[0], (int)dep100.token);
    assert_int_equal(H.b[2].value[1], (int)dep50.token);
    h_free(&H);
}

/* 4.6: a leader that knows no epoch <= the follower's answers with diverging epoch -1 and its
 * log start; the follower starts over from there. */
static void test_4_6_unknown_old_epoch_refetches_from_log_start(void **state)
{
    (void)state;
    h_init(&H, 2, 1, 30000);
    /* broker 2 holds 2 records of epoch 0 that broker 1 (leading at epoch 5) never had */
    H.b[2].len = 2;
    H.b[2].epoch_at[0] = H.b[2].epoch_at[1] = 0;
    H.b[2].value[0] = H.b[2].value[1] = -7;
    H.b[2].ckpt[0] = (kq_epoch_entry){.epoch = 0, .start_offset = 0};
    H.b[2].n_ckpt = 1;
    h_crash(&H, 2);
    h_boot(&H, 2);
    h_delta_all(&H, 1, 5, 0, ISR1, 1);
    h_produce_n(&H, 1, 1, 3, 0);
    kq_replica_fetch_answer a = h_fetch(&H, 2);
    assert_true(a.diverging);
    assert_int_equal(a.diverging_epoch, -1);
    assert_int_equal(H.b[2].last_truncate_to, 0);
    h_catch_up(&H, 2);
    h_assert_same_prefix(&H, 1, 2, 3);
    h_free(&H);
}

/* Model logs for the truncation stories below: broker id's log is `len` records, of epoch
 * epochs[k] from starts[k] on, with values base + offset. */
static void h_log(int id, int64_t len, int n, const int32_t *epochs, const int64_t *starts,
                  int base)
{
    h_broker *b = &H.b[id];
    b->len = len;
    b->n_ckpt = (size_t)n;
    for (int k = 0; k < n; k++)
        b->ckpt[k] = (kq_epoch_entry){.epoch = epochs[k], .start_offset = starts[k]};
    for (int64_t o = 0; o < len; o++) {
        int k = n - 1;
        while (k > 0 && starts[k] > o)
            k--;
        b->epoch_at[o] = epochs[k];
        b->value[o] = base + (int)o;
    }
}

/* 4.6 after unclean elections (kq-sim seed 7700149976): broker 2 led epoch 0 alone (offsets
 * 0-19) and epoch 2 (20-22); broker 1 copied offset 0, then wrote 1-17 in epoch 1, and now
 * leads epoch 4. The leader's answer for epoch 2 is "epoch 1 ends at 18", an epoch broker 2
 * never had: 18 lies inside broker 2's own epoch 0, where it need not be a batch boundary (the
 * partition log refuses a truncation inside a batch, and the broker stopped, at every restart).
 * KIP-279: broker 2 truncates to its own end of epoch 0 (20, where its epoch 2 starts), asks
 * again, learns that epoch 0 ends at 1 and truncates there; then it holds the leader's log. */
static void test_4_6_unknown_leader_epoch_truncates_to_own_end_then_asks_again(void **state)
{
    (void)state;
    h_init(&H, 2, 1, 30000);
    h_log(1, 18, 2, (const int32_t[]){0, 1}, (const int64_t[]){0, 1}, 100);
    h_log(2, 23, 2, (const int32_t[]){0, 2}, (const int64_t[]){0, 20}, 100);
    H.b[2].hw = 20; /* its high watermark when it led epoch 2 alone */
    for (int o = 1; o < 18; o++)
        H.b[1].value[o] = 500 + o; /* broker 1's own records of epoch 1 */
    h_crash(&H, 1);
    h_crash(&H, 2);
    h_boot(&H, 1);
    h_boot(&H, 2);
    h_delta_all(&H, 1, 4, 0, ISR1, 1);
    kq_replica_fetch_answer a = h_fetch(&H, 2);
    assert_true(a.diverging);
    assert_int_equal(a.diverging_epoch, 1);
    assert_int_equal(a.diverging_end_offset, 18);
    assert_int_equal(H.b[2].n_truncations, 1);
    assert_int_equal(H.b[2].truncations[0], 20); /* its own end of epoch 0, not 18 */
    a = h_fetch(&H, 2);
    assert_true(a.diverging);
    assert_int_equal(a.diverging_epoch, 0);
    assert_int_equal(a.diverging_end_offset, 1);
    assert_int_equal(H.b[2].n_truncations, 2);
    assert_int_equal(H.b[2].truncations[1], 1);
    h_catch_up(&H, 2);
    h_assert_same_prefix(&H, 1, 2, 18);
    h_free(&H);
}

/* The same rule in a clean history keeps what was committed: broker 2 holds epoch 0 up to 10
 * (high watermark 8) and its own uncommitted epoch 2 (11-12); broker 3, elected cleanly at
 * epoch 3, holds epoch 0 up to 7 and its epoch 1 (8-9). Answered "epoch 1 ends at 10", broker 2
 * truncates to its own end of epoch 0 (11), then by epoch 0's end at the leader (8): never
 * below its high watermark. (Rounding the leader's end down to the start of broker 2's epoch 0
 * would drop everything, committed records included.) */
static void test_4_6_unknown_leader_epoch_keeps_committed_records(void **state)
{
    (void)state;
    h_init(&H, 3, 1, 30000);
    h_log(2, 13, 2, (const int32_t[]){0, 2}, (const int64_t[]){0, 11}, 100);
    H.b[2].hw = 8;
    h_log(3, 10, 2, (const int32_t[]){0, 1}, (const int64_t[]){0, 8}, 100);
    H.b[3].value[8] = 800;
    H.b[3].value[9] = 801;
    h_crash(&H, 2);
    h_crash(&H, 3);
    h_boot(&H, 2);
    h_boot(&H, 3);
    static const int32_t isr3[] = {3};
    h_delta(&H, 3, 3, 3, 0, isr3, 1);
    h_delta(&H, 2, 3, 3, 0, isr3, 1);
    h_catch_up(&H, 2);
    assert_int_equal(H.b[2].n_truncations, 2);
    assert_int_equal(H.b[2].truncations[0], 11);
    assert_int_equal(H.b[2].truncations[1], 8);
    h_assert_same_prefix(&H, 3, 2, 10);
    h_free(&H);
}

/* 4.7: becoming follower at a new leader epoch restarts the fetcher; a repeat does not. */
static void test_4_7_fetcher_restarted_only_on_new_leader_epoch(void **state)
{
    (void)state;
    h_init(&H, 2, 1, 30000);
    assert_int_equal(h_delta(&H, 2, 1, 1, 0, ISR12, 2), 0);
    assert_true(H.u.restart_fetcher);
    assert_int_equal(h_delta(&H, 2, 1, 1, 1, ISR1, 1), 0); /* ISR change only */
    assert_false(H.u.restart_fetcher);
    assert_int_equal(h_delta(&H, 2, 1, 2, 2, ISR1, 1), 0);
    assert_true(H.u.restart_fetcher);
    kq_replica_fetch_request req;
    assert_true(kq_replica_next_fetch(H.b[2].r, &req));
    assert_int_equal(req.current_leader_epoch, 2);
    assert_false(kq_replica_next_fetch(H.b[1].r, &req)); /* not a follower */
    h_free(&H);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_4_6_kip101_stale_hw_does_not_truncate_acknowledged),
        cmocka_unit_test(test_4_6_kip101_double_failure_logs_do_not_diverge),
        cmocka_unit_test(test_4_6_kip279_back_to_back_failover),
        cmocka_unit_test(test_4_4_follower_hw_is_min_of_leader_hw_and_leo),
        cmocka_unit_test(test_seed_ledger_experiment),
        cmocka_unit_test(test_4_6_unknown_old_epoch_refetches_from_log_start),
        cmocka_unit_test(test_4_6_unknown_leader_epoch_truncates_to_own_end_then_asks_again),
        cmocka_unit_test(test_4_6_unknown_leader_epoch_keeps_committed_records),
        cmocka_unit_test(test_4_7_fetcher_restarted_only_on_new_leader_epoch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
