/*
 * Partition leader rules of kq_replica, one rule per test, with a virtual clock
 * (../shared/reference/kraft-semantics.md section 4; DESIGN.md section 9).
 * RF 3 on brokers 1, 2, 3; broker 1 leads at leader epoch 1 unless a test says otherwise.
 */
#include "harness.h"

static h_cluster H;
static const int32_t ISR123[] = {1, 2, 3};
static const int32_t ISR12[] = {1, 2};
static const int32_t ISR1[] = {1};

static void setup_leader(int32_t min_isr, const int32_t *isr, int n_isr)
{
    h_init(&H, 3, min_isr, 30000);
    h_delta_all(&H, 1, 1, 0, isr, n_isr);
    assert_int_equal(h_status(&H, 1).role, KQ_REPLICA_LEADER);
    assert_int_equal(h_status(&H, 2).role, KQ_REPLICA_FOLLOWER);
}

static int64_t follower_leo(int leader, int32_t id)
{
    kq_replica_status st = h_status(&H, leader);
    for (int i = 0; i < st.n_followers; i++) {
        if (st.followers[i].id == id) {
            return st.followers[i].log_end_offset;
        }
    }
    fail_msg("no follower %d", id);
    return -2;
}

static int64_t follower_caught_up(int leader, int32_t id)
{
    kq_replica_status st = h_status(&H, leader);
    for (int i = 0; i < st.n_followers; i++) {
        if (st.followers[i].id == id) {
            return st.followers[i].last_caught_up_ms;
        }
    }
    fail_msg("no follower %d", id);
    return -2;
}

/* 4.1 + seed 001 example 1: a slow follower stays in the ISR for replica.lag.time.max.ms while
 * the HW crawls with it; then it is removed and the HW jumps to the leader's LEO. */
static void test_4_1_slow_follower_stays_for_lag_then_removed_hw_jumps(void **state)
{
    (void)state;
    setup_leader(1, ISR123, 3);
    uint64_t removed_at = 0;
    int64_t lcu_at_removal = -1;

    for (uint64_t t = 0; t <= 60000 && !removed_at; t += 5000) {
        H.now = t;
        h_produce_n(&H, 1, 1, 100, 0);
        h_catch_up(&H, 2);
        if (t < 10000) {
            h_catch_up(&H, 3);
        } else {
            h_fetch_max(&H, 3, 10); /* its disk slowed down: 10 records per 5 s */
        }
        int alters = H.b[1].n_alters;
        int64_t lcu = follower_caught_up(1, 3);
        h_tick(&H, 1, t);
        if (H.b[1].n_alters > alters) {
            removed_at = t;
            lcu_at_removal = lcu;
            break;
        }
        /* still in the ISR: the HW is the slow follower's position, below the leader's LEO */
        assert_true(h_isr_is(&H, 1, ISR123, 3));
        assert_int_equal(h_status(&H, 1).high_watermark, follower_leo(1, 3));
        if (t >= 15000) {
            assert_true(h_status(&H, 1).high_watermark < h_status(&H, 1).log_end_offset);
        }
    }
    assert_true(removed_at > 0);
    /* removed only after the lag time, at the first isr-expiration run (every lag/2) after */
    assert_true(removed_at - (uint64_t)lcu_at_removal > 30000);
    assert_true(removed_at - (uint64_t)lcu_at_removal <= 30000 + 15000);
    assert_true(h_line(&H, 1, "Shrinking ISR from 1,2,3 to 1,2") >= 0);
    assert_int_equal(H.b[1].n_shrinks, 1); /* counted where it is asked, not from the log text */
    assert_int_equal(H.b[1].n_expands, 0);
    assert_int_equal(H.b[1].alter.n_new_isr, 2);
    /* pending shrink: the HW still waits for the old ISR (KIP-497) */
    int64_t crawl = h_status(&H, 1).high_watermark;
    h_catch_up(&H, 2);
    assert_int_equal(h_status(&H, 1).high_watermark, crawl);
    h_alter_answer(&H, 1, KQ_OK);
    assert_true(h_isr_is(&H, 1, ISR12, 2));
    assert_true(h_line(&H, 1, "ISR updated to 1,2 and version updated to 1") >= 0);
    /* the shrink moves the HW once its metadata arrives (the controller's min ISR is then in
     * force here too) */
    assert_int_equal(h_status(&H, 1).high_watermark, crawl);
    h_delta_all(&H, 1, 1, 1, ISR12, 2);
    assert_int_equal(h_status(&H, 1).high_watermark, h_status(&H, 1).log_end_offset);
    assert_true(h_status(&H, 1).high_watermark > crawl);
    h_free(&H);
}

/* 4.1: a follower that always trails by one fetch under steady produce stays in sync (its fetch
 * offset reaches the leader's LEO of its previous fetch); one that stops fetching is removed. */
static void test_4_1_trailing_follower_stays_in_sync(void **state)
{
    (void)state;
    setup_leader(1, ISR123, 3);
    for (uint64_t t = 0; t <= 120000; t += 1000) {
        H.now = t;
        h_produce_n(&H, 1, 1, 10, 0);
        h_fetch(&H, 2);
        h_fetch(&H, 3);
        h_tick(&H, 1, t);
        assert_true(follower_leo(1, 2) < h_status(&H, 1).log_end_offset);
    }
    assert_int_equal(H.b[1].n_alters, 0);
    assert_true(h_isr_is(&H, 1, ISR123, 3));

    for (uint64_t t = 121000; t <= 180000; t += 1000) { /* broker 3 stops fetching */
        H.now = t;
        h_produce_n(&H, 1, 1, 10, 0);
        h_fetch(&H, 2);
        h_tick(&H, 1, t);
    }
    assert_int_equal(H.b[1].n_alters, 1);
    assert_true(h_line(&H, 1, "Shrinking ISR from 1,2,3 to 1,2") >= 0);
    h_free(&H);
}

/* 4.1: a follower whose LEO equals the leader's is caught up, however long ago it fetched. */
static void test_4_1_follower_at_leader_leo_never_expires(void **state)
{
    (void)state;
    setup_leader(1, ISR123, 3);
    h_produce_n(&H, 1, 1, 5, 0);
    h_catch_up(&H, 2);
    h_catch_up(&H, 3);
    for (uint64_t t = 15000; t <= 300000; t += 15000) {
        h_tick(&H, 1, t);
    }
    assert_int_equal(H.b[1].n_alters, 0);
    assert_true(h_isr_is(&H, 1, ISR123, 3));
    h_free(&H);
}

/* 4.2: a follower out of the ISR is added once its LEO reaches the HW. */
static void test_4_2_expand_when_follower_reaches_hw(void **state)
{
    (void)state;
    setup_leader(1, ISR12, 2);
    h_produce_n(&H, 1, 1, 5, 0);
    h_catch_up(&H, 2);
    assert_int_equal(h_status(&H, 1).high_watermark, 5);
    while (H.b[1].n_alters == 0) {
        int64_t before = follower_leo(1, 3);
        assert_true(before < 5);
        h_fetch_max(&H, 3, 2);
    }
    assert_int_equal(follower_leo(1, 3), 5); /* fetch offsets 0, 2, 4, then 5 */
    assert_true(h_line(&H, 1, "Expanding ISR from 1,2 to 1,2,3") >= 0);
    assert_int_equal(H.b[1].n_expands, 1);
    assert_int_equal(H.b[1].n_shrinks, 0);
    assert_int_equal(H.b[1].alter.n_new_isr, 3);
    assert_int_equal(H.b[1].alter.new_isr[2], 3);
    assert_int_equal(H.b[1].alter.leader_epoch, 1);
    assert_int_equal(H.b[1].alter.partition_epoch, 0);
    assert_int_equal(H.b[1].alter.new_isr_broker_epochs[2], H.b[3].broker_epoch);
    h_alter_answer(&H, 1, KQ_OK);
    assert_true(h_isr_is(&H, 1, ISR123, 3));
    assert_int_equal(h_status(&H, 1).partition_epoch, 1);
    h_free(&H);
}

/* 4.2: the follower must also have reached the start of the current leader epoch. */
static void test_4_2_expand_needs_current_leader_epoch(void **state)
{
    (void)state;
    setup_leader(1, ISR12, 2);
    h_produce_n(&H, 1, 1, 3, 0);
    h_catch_up(&H, 2);
    h_produce_n(&H, 1, 1, 2, 0);        /* LEO 5, HW 3 */
    h_delta_all(&H, 1, 2, 1, ISR12, 2); /* leader epoch bump: epoch 2 starts at 5 */
    assert_int_equal(h_status(&H, 1).high_watermark, 3);
    h_fetch_max(&H, 3, 4); /* reports 0, gets 4 */
    h_fetch_max(&H, 3, 0); /* reports 4 >= HW 3 but < epoch start 5 */
    assert_int_equal(follower_leo(1, 3), 4);
    assert_int_equal(H.b[1].n_alters, 0);
    h_fetch_max(&H, 3, 1);
    h_fetch_max(&H, 3, 0); /* reports 5 */
    assert_int_equal(H.b[1].n_alters, 1);
    assert_true(h_line(&H, 1, "Expanding ISR from 1,2 to 1,2,3") >= 0);
    h_free(&H);
}

/* 4.2: fenced, shutting-down or wrong-broker-epoch followers are not added; a Fetch with a
 * stale broker epoch is refused with NOT_LEADER_OR_FOLLOWER. */
static void test_4_2_ineligible_follower_not_added(void **state)
{
    (void)state;
    setup_leader(1, ISR12, 2);
    h_produce_n(&H, 1, 1, 3, 0);
    h_catch_up(&H, 2);

    H.b[3].fenced = true;
    h_brokers_event(&H, 1);
    h_catch_up(&H, 3);
    assert_int_equal(H.b[1].n_alters, 0);

    H.b[3].fenced = false;
    H.b[3].shutting_down = true;
    h_brokers_event(&H, 1);
    h_fetch(&H, 3);
    assert_int_equal(H.b[1].n_alters, 0);

    H.b[3].shutting_down = false;
    h_brokers_event(&H, 1);
    H.b[3].broker_epoch += 1; /* newer than the metadata knows: accepted, not eligible */
    kq_replica_fetch_answer a = h_fetch(&H, 3);
    assert_int_equal(a.error, KQ_OK);
    assert_int_equal(H.b[1].n_alters, 0);

    H.b[3].broker_epoch -= 2; /* older than the metadata: stale */
    a = h_fetch(&H, 3);
    assert_int_equal(a.error, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(H.b[1].n_alters, 0);

    H.b[3].broker_epoch += 1; /* the registered epoch */
    h_fetch(&H, 3);
    assert_int_equal(H.b[1].n_alters, 1);
    h_free(&H);
}

/* 4.3: one AlterPartition in flight: no shrink and no second request while one is pending. */
static void test_4_3_one_alter_partition_in_flight(void **state)
{
    (void)state;
    setup_leader(1, ISR12, 2);
    h_produce_n(&H, 1, 1, 3, 0);
    h_catch_up(&H, 2);
    h_catch_up(&H, 3); /* expand to 1,2,3 sent */
    assert_int_equal(H.b[1].n_alters, 1);
    assert_true(h_status(&H, 1).alter_in_flight);
    for (uint64_t t = 1000; t <= 100000; t += 1000) { /* broker 2 stops fetching */
        H.now = t;
        h_produce_n(&H, 1, 1, 1, 0);
        h_fetch(&H, 3);
        h_tick(&H, 1, t);
    }
    assert_int_equal(H.b[1].n_alters, 1);
    assert_int_equal(h_status(&H, 1).pending, KQ_REPLICA_PENDING_EXPAND);
    h_alter_answer(&H, 1, KQ_OK);
    assert_true(h_isr_is(&H, 1, ISR123, 3));
    h_tick(&H, 1, 105000);
    assert_int_equal(H.b[1].n_alters, 2);
    assert_true(h_line(&H, 1, "Shrinking ISR from 1,2,3 to 1,3") >= 0);
    h_free(&H);
}

/* 4.3/4.4: during a pending shrink the HW is computed on the old (maximal) ISR. */
static void test_4_3_pending_shrink_hw_uses_old_isr(void **state)
{
    (void)state;
    setup_leader(1, ISR123, 3);
    h_produce_n(&H, 1, 1, 10, 0);
    h_catch_up(&H, 2); /* broker 3 never fetches in this epoch */
    assert_int_equal(h_status(&H, 1).high_watermark, 0);
    h_tick(&H, 1, 45000);
    assert_int_equal(h_status(&H, 1).pending, KQ_REPLICA_PENDING_SHRINK);
    kq_replica_status st = h_status(&H, 1);
    assert_int_equal(st.n_maximal_isr, 3);
    h_catch_up(&H, 2);
    assert_int_equal(h_status(&H, 1).high_watermark, 0);
    h_alter_answer(&H, 1, KQ_OK);
    assert_int_equal(h_status(&H, 1).high_watermark, 0); /* until the shrink's metadata */
    h_delta_all(&H, 1, 1, 1, ISR12, 2);
    assert_int_equal(h_status(&H, 1).high_watermark, 10);
    h_free(&H);
}

/* A shrink answered by the controller moves the HW only once its metadata arrives: the
 * controller put the removed replica in the ELR under min.insync.replicas 2, which this leader
 * had not seen yet (min 1); with the metadata comes the minimum, and the HW stays frozen, so
 * the ELR member misses nothing committed. Found by kq-sim seed 6018411 (a consumer read
 * records that an ELR leader did not have). */
static void test_4_3_shrink_waits_for_its_metadata(void **state)
{
    (void)state;
    setup_leader(1, ISR12, 2);
    h_produce_n(&H, 1, 1, 4, 0);
    h_catch_up(&H, 2);
    assert_int_equal(h_status(&H, 1).high_watermark, 4);
    h_produce_n(&H, 1, 1, 6, 0);
    h_tick(&H, 1, 45000); /* 2 stopped fetching: shrink to {1} */
    assert_int_equal(h_status(&H, 1).pending, KQ_REPLICA_PENDING_SHRINK);
    h_alter_answer(&H, 1, KQ_OK);
    assert_true(h_isr_is(&H, 1, ISR1, 1));
    assert_int_equal(h_status(&H, 1).high_watermark, 4); /* not 10 with the stale min 1 */
    /* the metadata: the Config record (min 2) came before the shrink's partition change */
    assert_int_equal(h_delta_min(&H, 1, 1, 1, 1, ISR1, 1, 2), 0);
    assert_int_equal(h_status(&H, 1).high_watermark, 4);          /* frozen: ISR 1 < min 2 */
    assert_int_equal(h_delta_min(&H, 1, 1, 1, 2, ISR1, 1, 1), 0); /* lowered again */
    assert_int_equal(h_status(&H, 1).high_watermark, 10);
    h_free(&H);
}

/* 4.3/4.4: during a pending expand the new member already holds the HW back. */
static void test_4_3_pending_expand_hw_includes_new_member(void **state)
{
    (void)state;
    setup_leader(1, ISR12, 2);
    h_produce_n(&H, 1, 1, 5, 0);
    h_catch_up(&H, 2);
    h_catch_up(&H, 3);
    assert_int_equal(h_status(&H, 1).pending, KQ_REPLICA_PENDING_EXPAND);
    assert_int_equal(h_status(&H, 1).n_maximal_isr, 3);
    H.now = 40000; /* 3 no longer counts as "caught up": only the maximal ISR holds it */
    h_produce_n(&H, 1, 1, 5, 0);
    h_catch_up(&H, 2);
    assert_int_equal(h_status(&H, 1).high_watermark, 5); /* 3 is at 5 */
    h_catch_up(&H, 3);
    assert_int_equal(h_status(&H, 1).high_watermark, 10);
    h_free(&H);
}

static void start_expand(void)
{
    setup_leader(1, ISR12, 2);
    h_produce_n(&H, 1, 1, 3, 0);
    h_catch_up(&H, 2);
    h_catch_up(&H, 3);
    assert_int_equal(H.b[1].n_alters, 1);
}

/* 4.3: INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED fall back to the committed ISR, no retry. */
static void test_4_3_ineligible_replica_reverts_without_retry(void **state)
{
    (void)state;
    start_expand();
    h_alter_answer(&H, 1, KQ_ERR_INELIGIBLE_REPLICA);
    kq_replica_status st = h_status(&H, 1);
    assert_int_equal(st.pending, KQ_REPLICA_PENDING_NONE);
    assert_int_equal(st.n_maximal_isr, 2);
    assert_true(h_isr_is(&H, 1, ISR12, 2));
    h_tick(&H, 1, 1000);
    assert_int_equal(H.b[1].n_alters, 1);
    h_fetch(&H, 3); /* a later fetch may propose again */
    assert_int_equal(H.b[1].n_alters, 2);
    h_alter_answer(&H, 1, KQ_ERR_OPERATION_NOT_ATTEMPTED);
    assert_int_equal(h_status(&H, 1).pending, KQ_REPLICA_PENDING_NONE);
    h_free(&H);
}

/* 4.3: FENCED_LEADER_EPOCH (and the like) stay pending with no retry until new metadata. */
static void test_4_3_fenced_leader_epoch_waits_for_metadata(void **state)
{
    (void)state;
    start_expand();
    h_alter_answer(&H, 1, KQ_ERR_FENCED_LEADER_EPOCH);
    assert_int_equal(h_status(&H, 1).pending, KQ_REPLICA_PENDING_EXPAND);
    assert_false(h_status(&H, 1).alter_in_flight);
    h_fetch(&H, 3);
    h_fetch(&H, 2);
    h_tick(&H, 1, 20000);
    assert_int_equal(H.b[1].n_alters, 1);
    assert_int_equal(H.u.next_deadline_ms, 30000); /* only the isr-expiration task */
    h_delta_all(&H, 1, 1, 1, ISR123, 3);
    assert_int_equal(h_status(&H, 1).pending, KQ_REPLICA_PENDING_NONE);
    assert_true(h_isr_is(&H, 1, ISR123, 3));
    h_free(&H);
}

/* 4.3: any other error is retried after 50 ms with a new request; answers to an older request
 * are ignored. */
static void test_4_3_other_error_retried_after_backoff(void **state)
{
    (void)state;
    start_expand();
    kq_replica_alter_request first = H.b[1].alter;
    H.now = 100;
    h_alter_answer(&H, 1, KQ_ERR_NOT_CONTROLLER);
    assert_int_equal(H.u.next_deadline_ms, 150);
    h_tick(&H, 1, 149);
    assert_int_equal(H.b[1].n_alters, 1);
    h_tick(&H, 1, 150);
    assert_int_equal(H.b[1].n_alters, 2);
    assert_true(H.b[1].alter.request_id != first.request_id);
    assert_int_equal(H.b[1].alter.n_new_isr, 3);

    kq_replica_event ev = {.type = KQ_REPLICA_EV_ALTER_RESPONSE};
    ev.u.alter_resp.request_id = first.request_id; /* a late answer to the first request */
    ev.u.alter_resp.error = KQ_OK;
    ev.u.alter_resp.leader_id = 1;
    ev.u.alter_resp.leader_epoch = 1;
    ev.u.alter_resp.partition_epoch = 1;
    ev.u.alter_resp.isr = ISR123;
    ev.u.alter_resp.n_isr = 3;
    assert_int_equal(h_step(&H, 1, &ev), 0);
    assert_true(h_isr_is(&H, 1, ISR12, 2));
    h_alter_answer(&H, 1, KQ_OK);
    assert_true(h_isr_is(&H, 1, ISR123, 3));
    h_free(&H);
}

/* 4.3: a success naming another leader epoch is ignored (stays pending). */
static void test_4_3_success_for_other_leader_epoch_ignored(void **state)
{
    (void)state;
    start_expand();
    H.b[1].alter.leader_epoch = 2;
    h_alter_answer(&H, 1, KQ_OK);
    assert_true(h_isr_is(&H, 1, ISR12, 2));
    assert_int_equal(h_status(&H, 1).pending, KQ_REPLICA_PENDING_EXPAND);
    h_free(&H);
}

/* 4.4 (KAFKA-15583): the HW does not advance while the ISR is below min.insync.replicas, even
 * with the leader alone in the ISR; consumers read below it only. */
static void test_4_4_hw_frozen_below_min_isr(void **state)
{
    (void)state;
    setup_leader(2, ISR123, 3);
    h_produce_n(&H, 1, 1, 2, 0);
    h_catch_up(&H, 2);
    h_catch_up(&H, 3);
    assert_int_equal(h_status(&H, 1).high_watermark, 2);
    h_delta_all(&H, 1, 1, 1, ISR1, 1);
    h_produce_n(&H, 1, 1, 3, 0);
    assert_int_equal(h_status(&H, 1).log_end_offset, 5);
    h_tick(&H, 1, 15000);
    assert_int_equal(h_status(&H, 1).high_watermark, 2);
    h_tick(&H, 1, 45000); /* 2 and 3 no longer caught up: only the leader's LEO would count */
    assert_int_equal(h_status(&H, 1).high_watermark, 2);
    assert_int_equal(kq_replica_readable_end(H.b[1].r), 2);
    int64_t from, to;
    assert_int_equal(kq_replica_consumer_read(H.b[1].r, 2, &from, &to), 0);
    assert_int_equal(to - from, 0);
    assert_int_equal(kq_replica_consumer_read(H.b[1].r, 0, &from, &to), 0);
    assert_int_equal(to, 2);
    assert_int_equal(kq_replica_consumer_read(H.b[1].r, 6, &from, &to), KQ_ERR_OFFSET_OUT_OF_RANGE);
    assert_int_equal(kq_replica_consumer_read(H.b[2].r, 0, &from, &to),
                     KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    /* with min ISR 1 the same state would commit: the freeze is the rule, not the data */
    h_free(&H);
}

/* 4.4/4.5: a min.insync.replicas raised by metadata alone (same leader and partition epochs: a
 * Config record) applies at once: the HW freezes and acks=all is refused; lowered again, the HW
 * moves and acks=all works (issue 8, item 1). */
static void test_4_4_raised_min_isr_applies_without_a_partition_change(void **state)
{
    (void)state;
    setup_leader(1, ISR1, 1);
    h_produce_n(&H, 1, 1, 2, 0);
    assert_int_equal(h_status(&H, 1).high_watermark, 2);
    assert_int_equal(h_delta_min(&H, 1, 1, 1, 0, ISR1, 1, 2), 0);
    assert_true(h_line(&H, 1, "min.insync.replicas changed from 1 to 2") >= 0);
    assert_int_equal(h_status(&H, 1).min_insync_replicas, 2);
    h_produce_result r = h_produce(&H, 1, -1);
    assert_true(r.answered);
    assert_int_equal(r.error, KQ_ERR_NOT_ENOUGH_REPLICAS);
    h_produce_n(&H, 1, 1, 1, 0); /* acks=1 is written, but not committed */
    assert_int_equal(h_status(&H, 1).log_end_offset, 3);
    assert_int_equal(h_status(&H, 1).high_watermark, 2);
    assert_int_equal(h_delta_min(&H, 1, 1, 1, 0, ISR1, 1, 1), 0);
    assert_int_equal(h_status(&H, 1).high_watermark, 3);
    r = h_produce(&H, 1, -1);
    assert_int_equal(r.error, KQ_OK);
    h_free(&H);
}

/* A min.insync.replicas change that arrives with partition state older than the replica's
 * (its AlterPartition answer came before the metadata) is still in force: a config is not
 * partition state. Found by kq-sim (a broker enforced the old value until its image caught
 * up with its own ISR change). */
static void test_4_4_min_isr_applies_with_an_older_partition_epoch(void **state)
{
    (void)state;
    setup_leader(1, ISR1, 1);
    assert_int_equal(h_delta_min(&H, 1, 1, 1, 3, ISR1, 1, 1), 0);
    h_produce_n(&H, 1, 1, 2, 0);
    assert_int_equal(h_status(&H, 1).high_watermark, 2);
    assert_int_equal(h_delta_min(&H, 1, 1, 1, 2, ISR1, 1, 2), 0); /* partition epoch 2 < 3 */
    assert_true(h_line(&H, 1, "Skipped the metadata change") >= 0);
    assert_int_equal(h_status(&H, 1).min_insync_replicas, 2);
    assert_int_equal(h_status(&H, 1).partition_epoch, 3);
    h_produce_result r = h_produce(&H, 1, -1);
    assert_int_equal(r.error, KQ_ERR_NOT_ENOUGH_REPLICAS);
    assert_int_equal(h_delta_min(&H, 1, 1, 1, 2, ISR1, 1, 1), 0); /* lowered again: in force */
    assert_int_equal(h_status(&H, 1).min_insync_replicas, 1);
    r = h_produce(&H, 1, -1);
    assert_int_equal(r.error, KQ_OK);
    h_free(&H);
}

/* 4.5: as in Kafka 4.x (Partition.effectiveMinIsr), min.insync.replicas above the replica
 * count is the replica count: every replica must be in the ISR (issue 8, item 2). */
static void test_4_5_min_isr_above_replication_factor_needs_every_replica(void **state)
{
    (void)state;
    setup_leader(5, ISR123, 3);
    h_produce_result r = h_produce(&H, 1, -1);
    assert_false(r.answered); /* accepted and parked: the ISR (3) meets the effective min (3) */
    h_catch_up(&H, 2);
    h_catch_up(&H, 3);
    assert_int_equal(h_status(&H, 1).high_watermark, 1);
    h_delta_all(&H, 1, 1, 1, ISR12, 2);
    r = h_produce(&H, 1, -1);
    assert_true(r.answered);
    assert_int_equal(r.error, KQ_ERR_NOT_ENOUGH_REPLICAS);
    h_free(&H);
}

/* 4.4: the HW is min LEO over the ISR, learned from fetch offsets, and only after the leader's
 * own write is durable. */
static void test_4_4_hw_is_min_isr_leo_learned_from_fetch_offsets(void **state)
{
    (void)state;
    setup_leader(1, ISR12, 2);
    H.auto_persist = false;
    h_produce_n(&H, 1, 1, 4, 0);
    h_fetch(&H, 2); /* reports 0, gets 4 */
    assert_int_equal(h_status(&H, 1).high_watermark, 0);
    h_fetch(&H, 2); /* reports 4; the leader's own write is not durable yet */
    assert_int_equal(h_status(&H, 1).high_watermark, 0);
    kq_replica_event pe = {.type = KQ_REPLICA_EV_PERSISTED};
    pe.u.persisted_end = 4;
    assert_int_equal(h_step(&H, 1, &pe), 0);
    assert_int_equal(h_status(&H, 1).high_watermark, 4);
    h_free(&H);
}

/* 4.5: acks=all with the ISR below min.insync.replicas is refused, nothing is written. */
static void test_4_5_acks_all_below_min_isr_not_enough_replicas(void **state)
{
    (void)state;
    setup_leader(2, ISR1, 1);
    h_produce_result r = h_produce(&H, 1, -1);
    assert_true(r.answered);
    assert_int_equal(r.error, KQ_ERR_NOT_ENOUGH_REPLICAS);
    assert_int_equal(H.u.n_append, 0);
    assert_int_equal(h_status(&H, 1).log_end_offset, 0);
    r = h_produce(&H, 1, 1); /* acks=1 ignores min.insync.replicas */
    assert_int_equal(r.error, KQ_OK);
    assert_int_equal(r.base_offset, 0);
    r = h_produce(&H, 1, 0);
    assert_int_equal(r.error, KQ_OK);
    assert_int_equal(r.base_offset, 1);
    h_free(&H);
}

/* 4.5: acks=all completes NONE once the HW passes the batch end, not before. */
static void test_4_5_acks_all_completes_when_hw_passes(void **state)
{
    (void)state;
    setup_leader(2, ISR123, 3);
    h_produce_result r = h_produce_n(&H, 1, -1, 3, 0);
    assert_false(r.answered);
    h_fetch(&H, 2);
    h_fetch(&H, 3);
    h_fetch(&H, 2); /* 2 has reported 3; 3 has not yet */
    assert_int_equal(h_done_index(&H, 1, r.token), -1);
    h_fetch(&H, 3);
    int i = h_done_index(&H, 1, r.token);
    assert_true(i >= 0);
    assert_int_equal(H.b[1].done[i].error, KQ_OK);
    assert_int_equal(H.b[1].done[i].base_offset, 0);
    h_free(&H);
}

/* 4.5: a parked acks=all times out with REQUEST_TIMED_OUT. */
static void test_4_5_acks_all_times_out(void **state)
{
    (void)state;
    setup_leader(2, ISR123, 3);
    h_produce_result r = h_produce_n(&H, 1, -1, 1, 5000);
    assert_true(H.u.next_deadline_ms <= 5000);
    h_tick(&H, 1, 4999);
    assert_int_equal(h_done_index(&H, 1, r.token), -1);
    h_tick(&H, 1, 5000);
    int i = h_done_index(&H, 1, r.token);
    assert_true(i >= 0);
    assert_int_equal(H.b[1].done[i].error, KQ_ERR_REQUEST_TIMED_OUT);
    h_free(&H);
}

/* 4.5: losing leadership completes parked acks=all with NOT_LEADER_OR_FOLLOWER. */
static void test_4_5_acks_all_leadership_lost(void **state)
{
    (void)state;
    setup_leader(2, ISR123, 3);
    h_produce_result r = h_produce(&H, 1, -1);
    h_delta_all(&H, 2, 2, 1, ISR123, 3);
    int i = h_done_index(&H, 1, r.token);
    assert_true(i >= 0);
    assert_int_equal(H.b[1].done[i].error, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    r = h_produce(&H, 1, 1);
    assert_int_equal(r.error, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    h_free(&H);
}

/* 4.5: the ISR shrinking below min while acks=all waits: NOT_ENOUGH_REPLICAS_AFTER_APPEND (the
 * records are written; the frozen HW cannot commit them). */
static void test_4_5_isr_shrinks_while_waiting_after_append(void **state)
{
    (void)state;
    setup_leader(2, ISR123, 3);
    h_produce_result r = h_produce_n(&H, 1, -1, 1, 100000);
    h_tick(&H, 1, 45000); /* neither follower fetched: shrink to 1 proposed */
    assert_int_equal(h_done_index(&H, 1, r.token), -1); /* still pending */
    h_alter_answer(&H, 1, KQ_OK);
    assert_true(h_isr_is(&H, 1, ISR1, 1));
    int i = h_done_index(&H, 1, r.token);
    assert_true(i >= 0);
    assert_int_equal(H.b[1].done[i].error, KQ_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND);
    assert_int_equal(H.b[1].done[i].base_offset, 0);
    assert_int_equal(h_status(&H, 1).log_end_offset, 1);
    h_free(&H);
}

/* 4.7: a delta with an older partition epoch is ignored. */
static void test_4_7_older_partition_epoch_ignored(void **state)
{
    (void)state;
    h_init(&H, 3, 1, 30000);
    h_delta_all(&H, 1, 3, 5, ISR123, 3);
    assert_int_equal(h_delta(&H, 1, 2, 4, 4, ISR123, 3), 0);
    kq_replica_status st = h_status(&H, 1);
    assert_int_equal(st.role, KQ_REPLICA_LEADER);
    assert_int_equal(st.leader_epoch, 3);
    assert_int_equal(st.partition_epoch, 5);
    assert_true(h_line(&H, 1, "Skipped") >= 0);
    /* not a replica any more: role none */
    int32_t reps[] = {2, 3};
    kq_replica_event ev = {.type = KQ_REPLICA_EV_DELTA};
    ev.u.delta.leader_id = 2;
    ev.u.delta.leader_epoch = 4;
    ev.u.delta.partition_epoch = 6;
    ev.u.delta.replicas = reps;
    ev.u.delta.n_replicas = 2;
    ev.u.delta.isr = reps;
    ev.u.delta.n_isr = 2;
    assert_int_equal(h_step(&H, 1, &ev), 0);
    assert_int_equal(h_status(&H, 1).role, KQ_REPLICA_NONE);
    h_free(&H);
}

/* Bad input: clear errors naming the problem, no state change, never a crash. */
static void test_bad_input_rejected_with_reason(void **state)
{
    (void)state;
    kq_replica_config cfg;
    char err[128] = "";
    kq_replica_config_defaults(&cfg);
    assert_null(kq_replica_new(&cfg, err, sizeof(err)));
    assert_non_null(strstr(err, "node_id"));
    cfg.node_id = 1;
    cfg.min_insync_replicas = 0;
    assert_null(kq_replica_new(&cfg, err, sizeof(err)));
    assert_non_null(strstr(err, "min.insync.replicas"));
    cfg.min_insync_replicas = 1;
    kq_replica *r = kq_replica_new(&cfg, err, sizeof(err));
    assert_non_null(r);
    kq_replica_update u;
    kq_replica_event ev = {.type = KQ_REPLICA_EV_TICK};
    assert_int_equal(kq_replica_step(r, &ev, &u), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(u.reason, "before START"));
    kq_replica_free(r);

    setup_leader(1, ISR12, 2);
    int32_t dup[] = {1, 1};
    assert_int_equal(h_delta(&H, 1, 1, 2, 1, dup, 2), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(H.u.reason, "twice"));
    int32_t stranger[] = {1, 9};
    assert_int_equal(h_delta(&H, 1, 1, 2, 1, stranger, 2), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(h_status(&H, 1).partition_epoch, 0);

    h_produce_result p = h_produce_n(&H, 1, 2, 1, 0);
    assert_int_equal(p.error, KQ_ERR_INVALID_REQUIRED_ACKS);
    p = h_produce_n(&H, 1, 1, 0, 0);
    assert_int_equal(p.error, KQ_ERR_INVALID_REQUEST);

    /* a follower given a batch that does not continue its log */
    kq_replica_batch bad = {.base_offset = 7, .epoch = 1, .count = 1};
    ev = (kq_replica_event){.type = KQ_REPLICA_EV_FETCH_RESPONSE};
    ev.u.fetch_resp.leader_epoch = 1;
    ev.u.fetch_resp.fetch_offset = 0;
    ev.u.fetch_resp.batches = &bad;
    ev.u.fetch_resp.n_batches = 1;
    assert_int_equal(h_step(&H, 2, &ev), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(H.u.reason, "does not continue"));
    bad.base_offset = 0;
    bad.epoch = 5; /* newer than the leader's epoch */
    assert_int_equal(h_step(&H, 2, &ev), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(h_status(&H, 2).log_end_offset, 0);

    ev = (kq_replica_event){.type = KQ_REPLICA_EV_PERSISTED};
    ev.u.persisted_end = 99;
    assert_int_equal(h_step(&H, 1, &ev), KQ_ERR_INVALID_REQUEST);

    /* a Fetch from a broker that is not a replica */
    ev = (kq_replica_event){.type = KQ_REPLICA_EV_FOLLOWER_FETCH};
    ev.u.fetch.replica_id = 9;
    ev.u.fetch.last_fetched_epoch = -1;
    ev.u.fetch.current_leader_epoch = -1;
    ev.u.fetch.broker_epoch = -1;
    assert_int_equal(h_step(&H, 1, &ev), 0);
    assert_int_equal(H.u.fetch.error, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    ev.u.fetch.replica_id = 2;
    ev.u.fetch.current_leader_epoch = 0;
    assert_int_equal(h_step(&H, 1, &ev), 0);
    assert_int_equal(H.u.fetch.error, KQ_ERR_FENCED_LEADER_EPOCH);
    ev.u.fetch.current_leader_epoch = 1;
    ev.u.fetch.fetch_offset = 50;
    assert_int_equal(h_step(&H, 1, &ev), 0);
    assert_int_equal(H.u.fetch.error, KQ_ERR_OFFSET_OUT_OF_RANGE);
    h_free(&H);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_4_1_slow_follower_stays_for_lag_then_removed_hw_jumps),
        cmocka_unit_test(test_4_1_trailing_follower_stays_in_sync),
        cmocka_unit_test(test_4_1_follower_at_leader_leo_never_expires),
        cmocka_unit_test(test_4_2_expand_when_follower_reaches_hw),
        cmocka_unit_test(test_4_2_expand_needs_current_leader_epoch),
        cmocka_unit_test(test_4_2_ineligible_follower_not_added),
        cmocka_unit_test(test_4_3_one_alter_partition_in_flight),
        cmocka_unit_test(test_4_3_pending_shrink_hw_uses_old_isr),
        cmocka_unit_test(test_4_3_pending_expand_hw_includes_new_member),
        cmocka_unit_test(test_4_3_ineligible_replica_reverts_without_retry),
        cmocka_unit_test(test_4_3_fenced_leader_epoch_waits_for_metadata),
        cmocka_unit_test(test_4_3_other_error_retried_after_backoff),
        cmocka_unit_test(test_4_3_success_for_other_leader_epoch_ignored),
        cmocka_unit_test(test_4_4_hw_frozen_below_min_isr),
        cmocka_unit_test(test_4_4_raised_min_isr_applies_without_a_partition_change),
        cmocka_unit_test(test_4_4_min_isr_applies_with_an_older_partition_epoch),
        cmocka_unit_test(test_4_3_shrink_waits_for_its_metadata),
        cmocka_unit_test(test_4_5_min_isr_above_replication_factor_needs_every_replica),
        cmocka_unit_test(test_4_4_hw_is_min_isr_leo_learned_from_fetch_offsets),
        cmocka_unit_test(test_4_5_acks_all_below_min_isr_not_enough_replicas),
        cmocka_unit_test(test_4_5_acks_all_completes_when_hw_passes),
        cmocka_unit_test(test_4_5_acks_all_times_out),
        cmocka_unit_test(test_4_5_acks_all_leadership_lost),
        cmocka_unit_test(test_4_5_isr_shrinks_while_waiting_after_append),
        cmocka_unit_test(test_4_7_older_partition_epoch_ignored),
        cmocka_unit_test(test_bad_input_rejected_with_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
