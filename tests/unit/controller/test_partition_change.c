/* The partition change builder, one rule of kraft-semantics.md 3.5 per test. */
#include "fixture.h"

/* Build for partition 0 of `topic` and apply; returns whether a record was written. */
static bool build_apply(fx *f, kq_pcb *b, kq_pcb_result *res)
{
    kq_record rec;

    assert_int_equal(kq_pcb_build(b, &rec, res), 0);
    if (rec.type == KQ_REC_NONE)
        return false;
    assert_int_equal(rec.type, KQ_REC_PARTITION_CHANGE);
    fx_apply_rec(f, &rec);
    kq_record_free(&rec);
    return true;
}

static void init_b(fx *f, kq_pcb *b, const char *topic)
{
    kq_pcb_init(b, &f->s, f->img, kq_image_topic_by_name(f->img, topic), 0);
}

/* 3.5 ONLINE step 1: the current leader stays while it is valid; an ISR shrink bumps only the
 * partition epoch (KAFKA-15021). */
static void test_keep_valid_leader_isr_shrink_no_leader_bump(void **st)
{
    fx *f = fx_new();
    kq_pcb b;
    kq_pcb_result r;

    fx_brokers(f, 3, 0);
    fx_partition(f, "t", IDS(1, 2, 3), IDS(1, 2, 3), NONE, NONE, 1);
    init_b(f, &b, "t");
    b.has_target_isr = true;
    b.target_isr = (int32_t[]){1, 2};
    b.n_target_isr = 2;
    assert_true(build_apply(f, &b, &r));
    assert_false(r.leader_changed);
    const kq_partition *p = fx_part(f, "t", 0);
    assert_int_equal(p->leader, 1);
    assert_int_equal(p->leader_epoch, 0);
    assert_int_equal(p->partition_epoch, 1);
    ASSERT_ISR(p, "1,2");
    fx_free(f);
}

/* 3.5 ONLINE step 2: a new leader is the first valid replica in REPLICA order (not ISR order),
 * and the leader epoch bumps. */
static void test_first_valid_in_replica_order(void **st)
{
    fx *f = fx_new();
    kq_pcb b;
    kq_pcb_result r;

    fx_brokers(f, 3, 0);
    fx_partition(f, "t", IDS(1, 2, 3), IDS(1, 3, 2), NONE, NONE, 1);
    init_b(f, &b, "t");
    b.has_target_isr = true;
    b.target_isr = (int32_t[]){3, 2};
    b.n_target_isr = 2;
    b.unacceptable = 1;
    assert_true(build_apply(f, &b, &r));
    const kq_partition *p = fx_part(f, "t", 0);
    assert_int_equal(p->leader, 2);
    assert_int_equal(p->leader_epoch, 1);
    assert_int_equal(p->partition_epoch, 1);
    ASSERT_ISR(p, "3,2");
    fx_free(f);
}

/* 3.5: no record when nothing changes. */
static void test_no_change_no_record(void **st)
{
    fx *f = fx_new();
    kq_pcb b;
    kq_record rec;
    kq_pcb_result r;

    fx_brokers(f, 3, 0);
    fx_partition(f, "t", IDS(1, 2, 3), IDS(1, 2, 3), NONE, NONE, 1);
    init_b(f, &b, "t");
    b.has_target_isr = true;
    b.target_isr = (int32_t[]){1, 2, 3};
    b.n_target_isr = 3;
    assert_int_equal(kq_pcb_build(&b, &rec, &r), 0);
    assert_int_equal(rec.type, KQ_REC_NONE);
    assert_false(r.changed);
    /* and an unknown partition is an error, not a crash */
    b.partition_id = 7;
    assert_int_equal(kq_pcb_build(&b, &rec, &r), KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    fx_free(f);
}

/* 3.5 "Empty ISR without ELR": the last ISR member stays in the ISR, the leader becomes -1. */
static void test_last_replica_standing_without_elr(void **st)
{
    fx *f = fx_new();
    kq_pcb b;
    kq_pcb_result r;

    f->s.elr_enabled = false;
    fx_brokers(f, 2, 0);
    fx_partition(f, "t", IDS(1, 2), IDS(1), NONE, NONE, 1);
    init_b(f, &b, "t");
    b.has_target_isr = true;
    b.target_isr = NULL;
    b.n_target_isr = 0;
    b.unacceptable = 1;
    assert_true(build_apply(f, &b, &r));
    const kq_partition *p = fx_part(f, "t", 0);
    assert_int_equal(p->leader, -1);
    assert_int_equal(p->leader_epoch, 1);
    ASSERT_ISR(p, "1");
    ASSERT_ELR(p, "");
    fx_free(f);
}

/* KIP-966: target ISR below min ISR -> ELR = (old ELR u old ISR) - target ISR. */
static void test_elr_shrink_below_min_isr(void **st)
{
    fx *f = fx_new();
    kq_pcb b;
    kq_pcb_result r;

    fx_brokers(f, 3, 0);
    fx_partition(f, "t", IDS(1, 2, 3), IDS(1, 2, 3), NONE, NONE, 1);
    fx_config(f, KQ_CONFIG_RESOURCE_TOPIC, "t", "min.insync.replicas", "2");
    init_b(f, &b, "t");
    assert_int_equal(b.min_isr, 2);
    b.has_target_isr = true;
    b.target_isr = (int32_t[]){1};
    b.n_target_isr = 1;
    assert_true(build_apply(f, &b, &r));
    const kq_partition *p = fx_part(f, "t", 0);
    ASSERT_ISR(p, "1");
    ASSERT_ELR(p, "2,3");
    ASSERT_LKE(p, "");
    assert_int_equal(p->leader, 1);
    fx_free(f);
}

/* KIP-966: ISR back at min ISR -> ELR and LastKnownElr cleared. */
static void test_elr_cleared_at_min_isr(void **st)
{
    fx *f = fx_new();
    kq_pcb b;
    kq_pcb_result r;

    fx_brokers(f, 3, 0);
    fx_partition(f, "t", IDS(1, 2, 3), IDS(1), IDS(2, 3), NONE, 1);
    fx_config(f, KQ_CONFIG_RESOURCE_TOPIC, "t", "min.insync.replicas", "2");
    init_b(f, &b, "t");
    b.has_target_isr = true;
    b.target_isr = (int32_t[]){1, 2};
    b.n_target_isr = 2;
    assert_true(build_apply(f, &b, &r));
    const kq_partition *p = fx_part(f, "t", 0);
    ASSERT_ISR(p, "1,2");
    ASSERT_ELR(p, "");
    fx_free(f);
}

/* KIP-966: with ELR the ISR may become empty; the fenced last member joins the ELR and
 * LastKnownElr remembers the last leader ("last known leader" mode). */
static void test_elr_empty_isr_remembers_last_leader(void **st)
{
    fx *f = fx_new();
    kq_pcb b;
    kq_pcb_result r;

    fx_brokers(f, 3, 0);
    fx_broker_change(f, 2, KQ_FENCE_FENCE, 0);
    fx_broker_change(f, 3, KQ_FENCE_FENCE, 0);
    fx_partition(f, "t", IDS(1, 2, 3), IDS(1), IDS(2, 3), NONE, 1);
    fx_config(f, KQ_CONFIG_RESOURCE_TOPIC, "t", "min.insync.replicas", "2");
    init_b(f, &b, "t");
    b.has_target_isr = true;
    b.n_target_isr = 0;
    b.unacceptable = 1;
    assert_true(build_apply(f, &b, &r));
    const kq_partition *p = fx_part(f, "t", 0);
    assert_int_equal(p->leader, -1);
    assert_int_equal(p->leader_epoch, 1);
    ASSERT_ISR(p, "");
    ASSERT_ELR(p, "1,2,3");
    ASSERT_LKE(p, "1");

    fx_broker_change(f, 1, KQ_FENCE_FENCE, 0);
    /* Unfencing 2 (forced acceptable) elects it from the ELR: ISR [2], out of the ELR, and
     * LastKnownElr is cleared once there is a leader again. */
    init_b(f, &b, "t");
    b.acceptable = 2;
    assert_true(build_apply(f, &b, &r));
    assert_true(r.from_elr);
    assert_false(r.unclean);
    p = fx_part(f, "t", 0);
    assert_int_equal(p->leader, 2);
    ASSERT_ISR(p, "2");
    ASSERT_ELR(p, "1,3");
    ASSERT_LKE(p, "");
    assert_int_equal(p->leader_recovery_state, KQ_RECOVERY_RECOVERED);
    fx_free(f);
}

/* 3.5 step 3: ISR and ELR empty, exactly one LastKnownElr -> elect it, counted unclean. */
static void test_last_known_leader_election(void **st)
{
    fx *f = fx_new();
    kq_pcb b;
    kq_pcb_result r;

    fx_brokers(f, 3, 0);
    fx_partition(f, "t", IDS(1, 2, 3), NONE, NONE, IDS(3), -1);
    init_b(f, &b, "t");
    assert_true(build_apply(f, &b, &r));
    assert_true(r.unclean);
    const kq_partition *p = fx_part(f, "t", 0);
    assert_int_equal(p->leader, 3);
    ASSERT_ISR(p, "3");
    ASSERT_LKE(p, "");
    assert_int_equal(p->leader_recovery_state, KQ_RECOVERY_RECOVERING);
    fx_free(f);
}

/* 3.5 step 4: an out-of-sync replica is elected only when unclean election is enabled; the
 * ISR becomes [winner], RECOVERING, ELR fields cleared. */
static void test_unclean_only_when_enabled(void **st)
{
    fx *f = fx_new();
    kq_pcb b;
    kq_pcb_result r;
    kq_record rec;

    f->s.elr_enabled = false;
    fx_brokers(f, 3, 0);
    fx_broker_change(f, 1, KQ_FENCE_FENCE, 0);
    fx_partition(f, "t", IDS(1, 2, 3), IDS(1), NONE, NONE, -1);
    init_b(f, &b, "t");
    assert_int_equal(b.election, KQ_ELECTION_ONLINE);
    assert_int_equal(kq_pcb_build(&b, &rec, &r), 0);
    assert_int_equal(rec.type, KQ_REC_NONE);

    fx_config(f, KQ_CONFIG_RESOURCE_TOPIC, "t", "unclean.leader.election.enable", "true");
    init_b(f, &b, "t");
    assert_int_equal(b.election, KQ_ELECTION_UNCLEAN);
    assert_true(build_apply(f, &b, &r));
    assert_true(r.unclean);
    const kq_partition *p = fx_part(f, "t", 0);
    assert_int_equal(p->leader, 2);
    ASSERT_ISR(p, "2");
    assert_int_equal(p->leader_recovery_state, KQ_RECOVERY_RECOVERING);
    fx_free(f);
}

/* The cluster default config enables unclean election too; an unclean pick clears the ELR. */
static void test_unclean_cluster_config_clears_elr(void **st)
{
    fx *f = fx_new();
    kq_pcb b;
    kq_pcb_result r;

    fx_brokers(f, 3, 0);
    fx_broker_change(f, 1, KQ_FENCE_FENCE, 0);
    fx_partition(f, "t", IDS(1, 2, 3), NONE, IDS(1), NONE, -1);
    fx_config(f, KQ_CONFIG_RESOURCE_BROKER, "", "unclean.leader.election.enable", "true");
    init_b(f, &b, "t");
    assert_true(build_apply(f, &b, &r));
    const kq_partition *p = fx_part(f, "t", 0);
    assert_int_equal(p->leader, 2);
    ASSERT_ISR(p, "2");
    ASSERT_ELR(p, "");
    ASSERT_LKE(p, "");
    fx_free(f);
}

/* PREFERRED: replicas[0] if valid; else keep the current leader; never an unclean pick. */
static void test_preferred_election(void **st)
{
    fx *f = fx_new();
    kq_pcb b;
    kq_pcb_result r;
    kq_record rec;

    fx_brokers(f, 3, 0);
    fx_partition(f, "t", IDS(1, 2, 3), IDS(1, 2, 3), NONE, NONE, 2);
    init_b(f, &b, "t");
    b.election = KQ_ELECTION_PREFERRED;
    assert_true(build_apply(f, &b, &r));
    assert_int_equal(fx_part(f, "t", 0)->leader, 1);

    /* preferred not in ISR: the current leader is kept, no record */
    fx_partition(f, "u", IDS(1, 2, 3), IDS(2, 3), NONE, NONE, 2);
    kq_pcb_init(&b, &f->s, f->img, kq_image_topic_by_name(f->img, "u"), 0);
    b.election = KQ_ELECTION_PREFERRED;
    assert_int_equal(kq_pcb_build(&b, &rec, &r), 0);
    assert_int_equal(rec.type, KQ_REC_NONE);

    /* leaderless, ISR holds only a fenced broker, unclean enabled: PREFERRED still elects
     * nobody outside the ISR */
    f->s.elr_enabled = false;
    fx_broker_change(f, 3, KQ_FENCE_FENCE, 0);
    fx_partition(f, "v", IDS(1, 2, 3), IDS(3), NONE, NONE, -1);
    fx_config(f, KQ_CONFIG_RESOURCE_TOPIC, "v", "unclean.leader.election.enable", "true");
    kq_pcb_init(&b, &f->s, f->img, kq_image_topic_by_name(f->img, "v"), 0);
    b.election = KQ_ELECTION_PREFERRED;
    assert_int_equal(kq_pcb_build(&b, &rec, &r), 0);
    assert_int_equal(rec.type, KQ_REC_NONE);
    fx_free(f);
}

/* KIP-966: a replica that shut down uncleanly leaves the ELR. */
static void test_unclean_shutdown_leaves_elr(void **st)
{
    fx *f = fx_new();
    kq_pcb b;
    kq_pcb_result r;

    fx_brokers(f, 3, 0);
    fx_broker_change(f, 1, KQ_FENCE_FENCE, 0);
    fx_broker_change(f, 2, KQ_FENCE_FENCE, 0);
    fx_partition(f, "t", IDS(1, 2, 3), NONE, IDS(1, 2), IDS(1), -1);
    init_b(f, &b, "t");
    b.unclean_shutdown = 2;
    b.unacceptable = 2;
    assert_true(build_apply(f, &b, &r));
    const kq_partition *p = fx_part(f, "t", 0);
    ASSERT_ELR(p, "1");
    ASSERT_LKE(p, "1");
    assert_int_equal(p->leader, -1);
    fx_free(f);
}

/* 3.5 Reassignment: completing it replaces the replicas, drops removed replicas from the ISR,
 * and re-elects when the leader was removed. */
static void test_reassignment_completion(void **st)
{
    fx *f = fx_new();
    kq_pcb b;
    kq_pcb_result r;

    fx_brokers(f, 4, 0);
    fx_partition(f, "t", IDS(1, 2, 3, 4), IDS(1, 2, 3, 4), NONE, NONE, 1);
    init_b(f, &b, "t");
    b.has_target_replicas = true;
    b.target_replicas = (int32_t[]){2, 3, 4};
    b.n_target_replicas = 3;
    assert_true(build_apply(f, &b, &r));
    assert_true(r.leader_changed);
    const kq_partition *p = fx_part(f, "t", 0);
    ASSERT_REPLICAS(p, "2,3,4");
    ASSERT_ISR(p, "2,3,4");
    assert_int_equal(p->leader, 2);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keep_valid_leader_isr_shrink_no_leader_bump),
        cmocka_unit_test(test_first_valid_in_replica_order),
        cmocka_unit_test(test_no_change_no_record),
        cmocka_unit_test(test_last_replica_standing_without_elr),
        cmocka_unit_test(test_elr_shrink_below_min_isr),
        cmocka_unit_test(test_elr_cleared_at_min_isr),
        cmocka_unit_test(test_elr_empty_isr_remembers_last_leader),
        cmocka_unit_test(test_last_known_leader_election),
        cmocka_unit_test(test_unclean_only_when_enabled),
        cmocka_unit_test(test_unclean_cluster_config_clears_elr),
        cmocka_unit_test(test_preferred_election),
        cmocka_unit_test(test_unclean_shutdown_leaves_elr),
        cmocka_unit_test(test_reassignment_completion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
