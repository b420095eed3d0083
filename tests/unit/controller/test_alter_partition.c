/* AlterPartition (kraft-semantics.md 3.6): one test per error code, each also proving the
 * validation ORDER by violating a later rule at the same time. */
#include "fixture.h"

typedef struct apfx {
    fx *f;
    int64_t epoch[8]; /* broker epochs */
    uint8_t tid[16];
    kq_alter_partition_result res;
} apfx;

/* Brokers 1..4 unfenced; topic t, partition 0: replicas 1,2,3 ISR 1,2,3 leader 1,
 * leader epoch 5, partition epoch 10. */
static apfx *setup(void)
{
    apfx *a = calloc(1, sizeof *a);
    kq_record r = {.type = KQ_REC_PARTITION};

    assert_non_null(a);
    a->f = fx_new();
    for (int32_t id = 1; id <= 4; id++) {
        a->epoch[id] = fx_register(a->f, id, 1, NULL, 0);
        fx_broker_change(a->f, id, KQ_FENCE_UNFENCE, 0);
    }
    fx_partition(a->f, "t", IDS(1, 2, 3), IDS(1, 2, 3), NONE, NONE, 1);
    fx_topic_id("t", a->tid);
    memcpy(r.partition.topic_id, a->tid, 16);
    r.partition.partition_id = 0;
    r.partition.replicas = (kq_rec_ids){(int32_t[]){1, 2, 3}, 3};
    r.partition.isr = (kq_rec_ids){(int32_t[]){1, 2, 3}, 3};
    r.partition.leader = 1;
    r.partition.leader_epoch = 5;
    r.partition.partition_epoch = 10;
    fx_apply_rec(a->f, &r);
    return a;
}

static void teardown(apfx *a)
{
    kq_alter_partition_result_free(&a->res);
    fx_free(a->f);
    free(a);
}

typedef struct call {
    bool standby;
    int16_t version;
    int32_t broker;
    int64_t broker_epoch; /* 0: the broker's real epoch */
    bool zero_topic;
    const char *name; /* v <= 1 */
    int32_t partition;
    int32_t leader_epoch, partition_epoch;
    int8_t recovery;
    int32_t isr[8];
    int n_isr;
    int64_t isr_epoch[8]; /* 0: -1 (unchecked) */
    kq_target_replicas_fn target;
    void *target_arg;
} call;

static call base(void)
{
    return (call){.version = 3,
                  .broker = 1,
                  .leader_epoch = 5,
                  .partition_epoch = 10,
                  .isr = {1, 2},
                  .n_isr = 2};
}

/* Returns the top-level error, or the partition error when the top level is 0. */
static int run(apfx *a, call c)
{
    kq_ap_isr_member m[8];
    kq_ap_partition p = {.partition_index = c.partition,
                         .leader_epoch = c.leader_epoch,
                         .partition_epoch = c.partition_epoch,
                         .leader_recovery_state = c.recovery,
                         .new_isr = m,
                         .n_new_isr = c.n_isr};
    kq_ap_topic t = {.partitions = &p, .n_partitions = 1, .name = c.name};
    kq_alter_partition req = {.version = c.version,
                              .broker_id = c.broker,
                              .broker_epoch =
                                  c.broker_epoch ? c.broker_epoch : a->epoch[c.broker & 7],
                              .topics = &t,
                              .n_topics = 1};
    kq_ap_ctx ctx = {.s = &a->f->s,
                     .active = !c.standby,
                     .target_replicas = c.target,
                     .target_arg = c.target_arg};

    for (int i = 0; i < c.n_isr; i++)
        m[i] = (kq_ap_isr_member){c.isr[i], c.isr_epoch[i] ? c.isr_epoch[i] : -1};
    if (!c.zero_topic)
        memcpy(t.topic_id, a->tid, 16);
    kq_alter_partition_result_free(&a->res);
    int rc = kq_rc_alter_partition(&ctx, a->f->img, &req, &a->f->out, &a->res);
    assert_int_equal(rc, a->res.error);
    if (rc)
        return rc;
    assert_int_equal(a->res.n_results, 1);
    return a->res.results[0].error;
}

/* Step 1: a standby answers NOT_CONTROLLER before checking anything else. */
static void test_step1_not_controller(void **st)
{
    apfx *a = setup();
    call c = base();

    c.standby = true;
    c.broker_epoch = 999; /* would be STALE_BROKER_EPOCH (step 2) */
    assert_int_equal(run(a, c), KQ_ERR_NOT_CONTROLLER);
    assert_int_equal(a->f->out.n, 0);
    teardown(a);
}

/* Step 2: checkBrokerEpoch -> STALE_BROKER_EPOCH (top level), before unknown topics. */
static void test_step2_stale_broker_epoch(void **st)
{
    apfx *a = setup();
    call c = base();

    c.broker_epoch = a->epoch[1] + 1;
    c.zero_topic = true; /* would be UNKNOWN_TOPIC_ID (step 3) */
    assert_int_equal(run(a, c), KQ_ERR_STALE_BROKER_EPOCH);
    assert_int_equal(a->res.n_results, 0);
    c = base();
    c.broker = 7; /* never registered */
    c.broker_epoch = 1;
    assert_int_equal(run(a, c), KQ_ERR_STALE_BROKER_EPOCH);
    teardown(a);
}

/* Step 3: unknown or zero topic id -> UNKNOWN_TOPIC_ID (v > 1), UNKNOWN_TOPIC_OR_PARTITION
 * (v <= 1, by name); before the epoch checks. */
static void test_step3_unknown_topic(void **st)
{
    apfx *a = setup();
    call c = base();

    c.zero_topic = true;
    c.leader_epoch = 1; /* would be FENCED_LEADER_EPOCH (step 7) */
    assert_int_equal(run(a, c), KQ_ERR_UNKNOWN_TOPIC_ID);
    c.version = 1;
    c.name = "nope";
    assert_int_equal(run(a, c), KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    c.name = "t"; /* by name it is found: now the leader epoch check fires */
    assert_int_equal(run(a, c), KQ_ERR_FENCED_LEADER_EPOCH);
    teardown(a);
}

/* Step 4: unknown partition -> UNKNOWN_TOPIC_OR_PARTITION, before the epoch checks. */
static void test_step4_unknown_partition(void **st)
{
    apfx *a = setup();
    call c = base();

    c.partition = 3;
    c.leader_epoch = 99; /* would be NOT_CONTROLLER (step 5) */
    assert_int_equal(run(a, c), KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    teardown(a);
}

/* Step 5: request leader epoch ahead -> NOT_CONTROLLER (KAFKA-14154), before the partition
 * epoch and leader checks. */
static void test_step5_leader_epoch_ahead(void **st)
{
    apfx *a = setup();
    call c = base();

    c.leader_epoch = 6;
    c.partition_epoch = 3; /* would be INVALID_UPDATE_VERSION (step 9) */
    c.broker = 2;          /* would be INVALID_REQUEST (step 8) */
    assert_int_equal(run(a, c), KQ_ERR_NOT_CONTROLLER);
    teardown(a);
}

/* Step 6: request partition epoch ahead -> NOT_CONTROLLER, before a stale leader epoch. */
static void test_step6_partition_epoch_ahead(void **st)
{
    apfx *a = setup();
    call c = base();

    c.partition_epoch = 11;
    c.leader_epoch = 4; /* would be FENCED_LEADER_EPOCH (step 7) */
    assert_int_equal(run(a, c), KQ_ERR_NOT_CONTROLLER);
    teardown(a);
}

/* Step 7: stale leader epoch -> FENCED_LEADER_EPOCH, before "not the leader". */
static void test_step7_fenced_leader_epoch(void **st)
{
    apfx *a = setup();
    call c = base();

    c.leader_epoch = 4;
    c.broker = 2; /* would be INVALID_REQUEST (step 8) */
    assert_int_equal(run(a, c), KQ_ERR_FENCED_LEADER_EPOCH);
    teardown(a);
}

/* Step 8: the sender is not the leader -> INVALID_REQUEST, before the CAS check. */
static void test_step8_not_leader(void **st)
{
    apfx *a = setup();
    call c = base();

    c.broker = 2;
    c.partition_epoch = 9; /* would be INVALID_UPDATE_VERSION (step 9) */
    assert_int_equal(run(a, c), KQ_ERR_INVALID_REQUEST);
    teardown(a);
}

/* Step 9: stale partition epoch -> INVALID_UPDATE_VERSION, before ISR content checks. */
static void test_step9_invalid_update_version(void **st)
{
    apfx *a = setup();
    call c = base();

    c.partition_epoch = 9;
    c.isr[1] = 4; /* a non-replica: would be INVALID_REQUEST (step 10) */
    assert_int_equal(run(a, c), KQ_ERR_INVALID_UPDATE_VERSION);
    assert_int_equal(a->f->out.n, 0);
    teardown(a);
}

/* Step 10: non-replica or duplicate in the new ISR -> INVALID_REQUEST (before step 14). */
static void test_step10_isr_not_replicas(void **st)
{
    apfx *a = setup();
    call c = base();

    fx_broker_change(a->f, 4, KQ_FENCE_FENCE, 0);
    c.isr[1] = 4; /* not a replica, and fenced (step 14 would say INELIGIBLE_REPLICA) */
    assert_int_equal(run(a, c), KQ_ERR_INVALID_REQUEST);
    c = base();
    c.isr[1] = 1; /* duplicate */
    assert_int_equal(run(a, c), KQ_ERR_INVALID_REQUEST);
    teardown(a);
}

/* Step 11: the new ISR must contain the leader. */
static void test_step11_isr_without_leader(void **st)
{
    apfx *a = setup();
    call c = base();

    fx_broker_change(a->f, 3, KQ_FENCE_FENCE, 0);
    c.isr[0] = 2;
    c.isr[1] = 3; /* 3 fenced: step 14 would fire later */
    assert_int_equal(run(a, c), KQ_ERR_INVALID_REQUEST);
    teardown(a);
}

/* Step 12: RECOVERING with more than one ISR member -> INVALID_REQUEST. Step 13: RECOVERED ->
 * RECOVERING -> INVALID_REQUEST. */
static void test_step12_13_recovery_state(void **st)
{
    apfx *a = setup();
    call c = base();

    c.recovery = KQ_RECOVERY_RECOVERING;
    assert_int_equal(run(a, c), KQ_ERR_INVALID_REQUEST);
    c.isr[0] = 1;
    c.n_isr = 1;
    assert_int_equal(run(a, c), KQ_ERR_INVALID_REQUEST); /* step 13 */
    teardown(a);
}

/* Step 14: fenced, in controlled shutdown, unregistered or wrong-epoch ISR members ->
 * INELIGIBLE_REPLICA (v > 1) / OPERATION_NOT_ATTEMPTED (v <= 1); nothing written. */
static void test_step14_ineligible_replica(void **st)
{
    apfx *a = setup();
    call c = base();

    fx_broker_change(a->f, 2, KQ_FENCE_FENCE, 0);
    assert_int_equal(run(a, c), KQ_ERR_INELIGIBLE_REPLICA);
    c.version = 1;
    c.name = "t";
    assert_int_equal(run(a, c), KQ_ERR_OPERATION_NOT_ATTEMPTED);

    c = base();
    c.isr[1] = 3;
    fx_broker_change(a->f, 3, KQ_FENCE_NONE, 1); /* controlled shutdown */
    assert_int_equal(run(a, c), KQ_ERR_INELIGIBLE_REPLICA);

    c = base();
    c.n_isr = 1;
    c.isr_epoch[0] = a->epoch[1] + 5; /* the leader itself with a wrong epoch */
    assert_int_equal(run(a, c), KQ_ERR_INELIGIBLE_REPLICA);
    c.isr_epoch[0] = a->epoch[1];
    assert_int_equal(run(a, c), 0);
    assert_int_equal(a->f->out.n, 1);
    kq_reclist_free(&a->f->out);

    /* a replica that is not registered at all */
    fx_partition(a->f, "t", IDS(1, 6), IDS(1), NONE, NONE, 1);
    call d = base();
    d.partition = 1;
    d.leader_epoch = 0;
    d.partition_epoch = 0;
    d.isr[1] = 6;
    assert_int_equal(run(a, d), KQ_ERR_INELIGIBLE_REPLICA);
    teardown(a);
}

/* Step 15: success writes one PartitionChange and returns partition epoch + 1 with the same
 * leader epoch; a request equal to the current state writes nothing and returns the state. */
static void test_step15_success_and_noop(void **st)
{
    apfx *a = setup();
    call c = base();

    assert_int_equal(run(a, c), 0);
    assert_int_equal(a->f->out.n, 1);
    kq_ap_result *r = &a->res.results[0];
    assert_int_equal(r->leader_id, 1);
    assert_int_equal(r->leader_epoch, 5);
    assert_int_equal(r->partition_epoch, 11);
    ASSERT_IDS(r->isr, r->n_isr, "1,2");
    fx_apply(a->f);
    const kq_partition *p = fx_part(a->f, "t", 0);
    assert_int_equal(p->partition_epoch, 11);
    assert_int_equal(p->leader_epoch, 5);
    ASSERT_ISR(p, "1,2");

    /* the same request again: stale partition epoch now */
    assert_int_equal(run(a, c), KQ_ERR_INVALID_UPDATE_VERSION);
    /* with the new epoch and the same ISR: no record, same epoch */
    c.partition_epoch = 11;
    assert_int_equal(run(a, c), 0);
    assert_int_equal(a->f->out.n, 0);
    assert_int_equal(a->res.results[0].partition_epoch, 11);
    /* expansion back to 1,2,3 */
    c.isr[2] = 3;
    c.n_isr = 3;
    assert_int_equal(run(a, c), 0);
    fx_apply(a->f);
    ASSERT_ISR(fx_part(a->f, "t", 0), "1,2,3");
    teardown(a);
}

/* Step 15 with ELR: shrinking below min ISR moves the removed members to the ELR. */
static void test_step15_shrink_fills_elr(void **st)
{
    apfx *a = setup();
    call c = base();

    fx_config(a->f, KQ_CONFIG_RESOURCE_TOPIC, "t", "min.insync.replicas", "3");
    c.n_isr = 1;
    assert_int_equal(run(a, c), 0);
    fx_apply(a->f);
    const kq_partition *p = fx_part(a->f, "t", 0);
    ASSERT_ISR(p, "1");
    ASSERT_ELR(p, "2,3");
    teardown(a);
}

/* A RECOVERING leader reports RECOVERED through AlterPartition. */
static void test_recovering_to_recovered(void **st)
{
    apfx *a = setup();
    kq_record r = {.type = KQ_REC_PARTITION};

    memcpy(r.partition.topic_id, a->tid, 16);
    r.partition.replicas = (kq_rec_ids){(int32_t[]){1, 2, 3}, 3};
    r.partition.isr = (kq_rec_ids){(int32_t[]){1}, 1};
    r.partition.leader = 1;
    r.partition.leader_epoch = 5;
    r.partition.partition_epoch = 10;
    r.partition.leader_recovery_state = KQ_RECOVERY_RECOVERING;
    fx_apply_rec(a->f, &r);
    call c = base();
    c.n_isr = 1;
    c.recovery = KQ_RECOVERY_RECOVERING;
    assert_int_equal(run(a, c), 0); /* still recovering: nothing to change */
    assert_int_equal(a->f->out.n, 0);
    c.recovery = KQ_RECOVERY_RECOVERED;
    assert_int_equal(run(a, c), 0);
    assert_int_equal(a->res.results[0].leader_recovery_state, KQ_RECOVERY_RECOVERED);
    fx_apply(a->f);
    assert_int_equal(fx_part(a->f, "t", 0)->leader_recovery_state, KQ_RECOVERY_RECOVERED);
    teardown(a);
}

static const int32_t *target_234(void *arg, const uint8_t id[16], int32_t pid, int32_t *n)
{
    static const int32_t t[] = {2, 3, 4};

    (void)arg;
    (void)id;
    *n = pid == 1 ? 3 : 0;
    return pid == 1 ? t : NULL;
}

/* Step 16: the change finished a reassignment that removed the leader -> the record is written
 * but the sender gets NEW_LEADER_ELECTED (v > 1) or FENCED_LEADER_EPOCH (v <= 1). */
static void test_step16_new_leader_elected(void **st)
{
    apfx *a = setup();
    call c = base();

    fx_partition(a->f, "t", IDS(1, 2, 3, 4), IDS(1, 2, 3, 4), NONE, NONE, 1);
    c.partition = 1;
    c.leader_epoch = 0;
    c.partition_epoch = 0;
    c.isr[0] = 1;
    c.isr[1] = 2;
    c.isr[2] = 3;
    c.isr[3] = 4;
    c.n_isr = 4;
    c.target = target_234;
    /* version 1 first (nothing applied): FENCED_LEADER_EPOCH */
    c.version = 1;
    c.name = "t";
    assert_int_equal(run(a, c), KQ_ERR_FENCED_LEADER_EPOCH);
    assert_int_equal(a->f->out.n, 1);
    kq_reclist_free(&a->f->out);
    c.version = 3;
    assert_int_equal(run(a, c), KQ_ERR_NEW_LEADER_ELECTED);
    assert_int_equal(a->f->out.n, 1);
    fx_apply(a->f);
    const kq_partition *p = fx_part(a->f, "t", 1);
    ASSERT_REPLICAS(p, "2,3,4");
    assert_int_equal(p->leader, 2);
    teardown(a);
}

/* Malformed requests get INVALID_REQUEST, never a crash; a partition listed twice too. */
static void test_bad_shapes(void **st)
{
    apfx *a = setup();
    kq_ap_partition p[2] = {{.partition_index = 0,
                             .leader_epoch = 5,
                             .partition_epoch = 10,
                             .new_isr = (kq_ap_isr_member[]){{1, -1}},
                             .n_new_isr = 1},
                            {.partition_index = 0,
                             .leader_epoch = 5,
                             .partition_epoch = 10,
                             .new_isr = (kq_ap_isr_member[]){{1, -1}},
                             .n_new_isr = 1}};
    kq_ap_topic t = {.partitions = p, .n_partitions = 2};
    kq_alter_partition req = {
        .version = 3, .broker_id = 1, .broker_epoch = a->epoch[1], .topics = &t, .n_topics = 1};
    kq_ap_ctx ctx = {.s = &a->f->s, .active = true};

    memcpy(t.topic_id, a->tid, 16);
    assert_int_equal(kq_rc_alter_partition(&ctx, a->f->img, &req, &a->f->out, &a->res), 0);
    assert_int_equal(a->res.results[0].error, 0);
    assert_int_equal(a->res.results[1].error, KQ_ERR_INVALID_REQUEST);
    assert_int_equal(a->f->out.n, 1);
    kq_alter_partition_result_free(&a->res);
    t.partitions = NULL;
    assert_int_equal(kq_rc_alter_partition(&ctx, a->f->img, &req, &a->f->out, &a->res),
                     KQ_ERR_INVALID_REQUEST);
    p[0].n_new_isr = 5000;
    t.partitions = p;
    t.n_partitions = 1;
    kq_reclist_free(&a->f->out);
    assert_int_equal(kq_rc_alter_partition(&ctx, a->f->img, &req, &a->f->out, &a->res), 0);
    assert_int_equal(a->res.results[0].error, KQ_ERR_INVALID_REQUEST);
    assert_int_equal(a->f->out.n, 0);
    teardown(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step1_not_controller),
        cmocka_unit_test(test_step2_stale_broker_epoch),
        cmocka_unit_test(test_step3_unknown_topic),
        cmocka_unit_test(test_step4_unknown_partition),
        cmocka_unit_test(test_step5_leader_epoch_ahead),
        cmocka_unit_test(test_step6_partition_epoch_ahead),
        cmocka_unit_test(test_step7_fenced_leader_epoch),
        cmocka_unit_test(test_step8_not_leader),
        cmocka_unit_test(test_step9_invalid_update_version),
        cmocka_unit_test(test_step10_isr_not_replicas),
        cmocka_unit_test(test_step11_isr_without_leader),
        cmocka_unit_test(test_step12_13_recovery_state),
        cmocka_unit_test(test_step14_ineligible_replica),
        cmocka_unit_test(test_step15_success_and_noop),
        cmocka_unit_test(test_step15_shrink_fills_elr),
        cmocka_unit_test(test_recovering_to_recovered),
        cmocka_unit_test(test_step16_new_leader_elected),
        cmocka_unit_test(test_bad_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
