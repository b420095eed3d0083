/* Cluster control: registration and broker epochs (kraft-semantics.md 3.2), heartbeats, the
 * broker state machine, lease expiry, fencing, unfencing and controlled shutdown (3.3). */
#include "fixture.h"

static int reg(fx *f, int32_t id, int gen, const char *cluster, int64_t now,
               kq_registration_result *res)
{
    kq_rec_endpoint ep = {.name = "PLAINTEXT", .host = "h", .port = 9092};
    kq_broker_registration req = {
        .broker_id = id, .cluster_id = cluster, .endpoints = &ep, .n_endpoints = 1};

    fx_incarnation(id, gen, req.incarnation_id);
    return kq_cc_register(f->cc, f->img, &req, f->next, now, &f->out, res);
}

static kq_heartbeat_result hb(fx *f, int32_t id, int64_t off, bool want_fence, bool want_shut,
                              int64_t now)
{
    kq_heartbeat req = {.broker_id = id,
                        .broker_epoch = kq_image_broker(f->img, id)->epoch,
                        .current_metadata_offset = off,
                        .want_fence = want_fence,
                        .want_shutdown = want_shut};
    kq_heartbeat_result res;

    assert_int_equal(kq_cc_heartbeat(f->cc, f->img, &req, f->next, now, &f->out, &res), 0);
    return res;
}

/* 3.2: a new incarnation gets epoch = the next log offset and starts fenced. */
static void test_register_new_incarnation_epoch_is_next_offset(void **st)
{
    fx *f = fx_new();
    kq_registration_result res;

    f->next = 40;
    assert_int_equal(reg(f, 1, 1, "cluster-A", 0, &res), 0);
    assert_int_equal(res.broker_epoch, 40);
    assert_true(res.new_incarnation);
    assert_int_equal(f->out.n, 1);
    assert_int_equal(f->out.v[0].type, KQ_REC_REGISTER_BROKER);
    fx_apply(f);
    const kq_broker *b = kq_image_broker(f->img, 1);
    assert_int_equal(b->epoch, 40);
    assert_true(b->fenced);
    assert_int_equal(b->registration_offset, 40);
    assert_int_equal(kq_cc_check_broker_epoch(f->img, 1, 40), 0);
    assert_int_equal(kq_cc_check_broker_epoch(f->img, 1, 39), KQ_ERR_STALE_BROKER_EPOCH);
    assert_int_equal(kq_cc_check_broker_epoch(f->img, 2, 40), KQ_ERR_STALE_BROKER_EPOCH);
    fx_free(f);
}

/* 3.2 (KAFKA-16952): the same incarnation keeps its epoch, fenced and shutdown state. */
static void test_register_same_incarnation_keeps_state(void **st)
{
    fx *f = fx_new();
    kq_registration_result res;

    int64_t e = fx_register(f, 1, 1, NULL, 0);
    fx_broker_change(f, 1, KQ_FENCE_UNFENCE, 0);
    assert_int_equal(reg(f, 1, 1, "cluster-A", 100, &res), 0);
    assert_int_equal(res.broker_epoch, e);
    assert_false(res.new_incarnation);
    fx_apply(f);
    assert_false(kq_image_broker(f->img, 1)->fenced);
    assert_int_equal(kq_image_broker(f->img, 1)->epoch, e);
    fx_free(f);
}

/* 3.2: a live lease with another incarnation -> DUPLICATE_BROKER_REGISTRATION; once the lease
 * expired the new incarnation registers with a new, larger epoch. */
static void test_register_duplicate_live_lease(void **st)
{
    fx *f = fx_new();
    kq_registration_result res;

    int64_t e = fx_register(f, 1, 1, NULL, 0);
    fx_broker_change(f, 1, KQ_FENCE_UNFENCE, 0);
    assert_int_equal(reg(f, 1, 2, "cluster-A", 9000, &res), KQ_ERR_DUPLICATE_BROKER_REGISTRATION);
    assert_int_equal(res.error, KQ_ERR_DUPLICATE_BROKER_REGISTRATION);
    assert_int_equal(f->out.n, 0);
    assert_non_null(strstr(res.message, "broker 1"));
    assert_int_equal(reg(f, 1, 2, "cluster-A", 9001, &res), 0);
    assert_true(res.broker_epoch > e);
    fx_free(f);
}

/* 3.2: cluster id mismatch and malformed registrations are refused with a clear error. */
static void test_register_bad_input(void **st)
{
    fx *f = fx_new();
    kq_registration_result res;
    kq_rec_endpoint bad = {.name = "PLAINTEXT", .host = "", .port = 9092};
    kq_broker_registration req = {
        .broker_id = 1, .cluster_id = "cluster-A", .endpoints = &bad, .n_endpoints = 1};

    assert_int_equal(reg(f, 1, 1, "cluster-B", 0, &res), KQ_ERR_INCONSISTENT_CLUSTER_ID);
    assert_int_equal(reg(f, 1, 1, NULL, 0, &res), KQ_ERR_INCONSISTENT_CLUSTER_ID);
    assert_int_equal(reg(f, -3, 1, "cluster-A", 0, &res), KQ_ERR_INVALID_REQUEST);
    /* all-zero incarnation */
    assert_int_equal(kq_cc_register(f->cc, f->img, &req, 0, 0, &f->out, &res),
                     KQ_ERR_INVALID_REQUEST);
    fx_incarnation(1, 1, req.incarnation_id);
    assert_int_equal(kq_cc_register(f->cc, f->img, &req, 0, 0, &f->out, &res),
                     KQ_ERR_INVALID_REQUEST); /* empty host */
    assert_non_null(strstr(res.message, "broker 1"));
    assert_int_equal(f->out.n, 0);
    fx_free(f);
}

/* 3.2: a new incarnation of a broker still in ISRs (its lease expired, it was never fenced)
 * writes the ISR removal first (leadership moves), then RegisterBroker. kq departs from
 * KIP-966 here (docs/architecture.md, "ELR across restarts"): brokers fsync, so a restarted
 * broker keeps its ELR memberships, and one that leaves an ISR below min.insync.replicas
 * enters the ELR as on fencing. */
static void test_register_new_incarnation_keeps_elr(void **st)
{
    fx *f = fx_new();
    kq_registration_result res;

    fx_brokers(f, 3, 0);
    fx_partition(f, "t", IDS(1, 2, 3), IDS(1, 2), NONE, NONE, 1);
    fx_partition(f, "u", IDS(1, 2, 3), IDS(2), IDS(1), NONE, 2);
    fx_config(f, KQ_CONFIG_RESOURCE_BROKER, "", "min.insync.replicas", "2");
    assert_int_equal(reg(f, 1, 2, "cluster-A", 20000, &res), 0); /* lease expired */
    assert_int_equal(f->out.n, 2); /* t's ISR change, then the registration; u unchanged */
    assert_int_equal(f->out.v[0].type, KQ_REC_PARTITION_CHANGE);
    assert_int_equal(f->out.v[1].type, KQ_REC_REGISTER_BROKER);
    /* The epoch is the RegisterBroker record's own offset (after the change), so the broker
     * is caught up exactly when it has replayed its registration. */
    int64_t reg_offset = f->next + 1;
    assert_int_equal(res.broker_epoch, reg_offset);
    assert_int_equal(f->out.v[1].register_broker.broker_epoch, reg_offset);
    fx_apply(f);
    const kq_partition *p = fx_part(f, "t", 0);
    assert_int_equal(p->leader, 2);
    ASSERT_ISR(p, "2");
    ASSERT_ELR(p, "1");                  /* left an ISR below the minimum: eligible */
    ASSERT_ELR(fx_part(f, "u", 0), "1"); /* still eligible after the restart */
    assert_true(kq_image_broker(f->img, 1)->fenced);
    fx_free(f);
}

/* 3.3 state machine, every transition. */
static void test_state_machine(void **st)
{
    const kq_broker_state F = KQ_BROKER_FENCED, U = KQ_BROKER_UNFENCED,
                          C = KQ_BROKER_CONTROLLED_SHUTDOWN, S = KQ_BROKER_SHUTDOWN_NOW;

    /* FENCED */
    assert_int_equal(kq_cc_next_state(F, false, true, false, false, -1, 0), S);
    assert_int_equal(kq_cc_next_state(F, false, false, true, false, -1, 0), U);
    assert_int_equal(kq_cc_next_state(F, true, false, true, false, -1, 0), F);
    assert_int_equal(kq_cc_next_state(F, false, false, false, false, -1, 0), F);
    /* UNFENCED */
    assert_int_equal(kq_cc_next_state(U, true, true, true, true, -1, 0), S);
    assert_int_equal(kq_cc_next_state(U, true, false, true, true, -1, 0), F);
    assert_int_equal(kq_cc_next_state(U, false, true, true, true, -1, 0), C);
    assert_int_equal(kq_cc_next_state(U, false, true, true, false, -1, 0), S);
    assert_int_equal(kq_cc_next_state(U, false, false, true, true, -1, 0), U);
    /* CONTROLLED_SHUTDOWN */
    assert_int_equal(kq_cc_next_state(C, false, true, true, true, 5, 100), C);
    assert_int_equal(kq_cc_next_state(C, false, true, true, false, 5, 4), C);
    assert_int_equal(kq_cc_next_state(C, false, true, true, false, 5, 5), S);
    assert_int_equal(kq_cc_next_state(C, false, false, true, false, 5, INT64_MAX), S);
}

/* 3.3: heartbeats from unregistered brokers or with a stale epoch -> STALE_BROKER_EPOCH. */
static void test_heartbeat_stale_epoch(void **st)
{
    fx *f = fx_new();
    kq_heartbeat req = {.broker_id = 1, .broker_epoch = 0};
    kq_heartbeat_result res;

    assert_int_equal(kq_cc_heartbeat(f->cc, f->img, &req, 0, 0, &f->out, &res),
                     KQ_ERR_STALE_BROKER_EPOCH);
    assert_non_null(strstr(res.message, "not registered"));
    int64_t e = fx_register(f, 1, 1, NULL, 0);
    req.broker_epoch = e - 1;
    assert_int_equal(kq_cc_heartbeat(f->cc, f->img, &req, f->next, 0, &f->out, &res),
                     KQ_ERR_STALE_BROKER_EPOCH);
    assert_int_equal(f->out.n, 0);
    fx_free(f);
}

/* 3.3: FENCED -> UNFENCED only once the metadata offset reaches its own RegisterBroker record
 * (IsCaughtUp); the unfence record comes first, then elections for leaderless partitions. */
static void test_unfence_when_caught_up(void **st)
{
    fx *f = fx_new();
    kq_heartbeat_result r;

    fx_brokers(f, 2, 0);
    fx_partition(f, "t", IDS(2, 1), IDS(2), NONE, NONE, 2);
    int64_t reg_off = f->next;
    fx_register(f, 3, 1, NULL, 0);
    fx_broker_change(f, 1, KQ_FENCE_FENCE, 0);
    fx_partition(f, "t", IDS(1, 3), IDS(1), NONE, NONE, -1);

    r = hb(f, 3, reg_off - 1, false, false, 10);
    assert_false(r.is_caught_up);
    assert_true(r.is_fenced);
    assert_int_equal(r.next, KQ_BROKER_FENCED);
    assert_int_equal(f->out.n, 0);
    r = hb(f, 3, reg_off, true, false, 20); /* caught up but wants to stay fenced */
    assert_true(r.is_caught_up);
    assert_true(r.is_fenced);
    assert_int_equal(f->out.n, 0);

    /* broker 1 (leader-less partition t-1 has it in the ISR) comes back */
    int64_t r1 = kq_image_broker(f->img, 1)->registration_offset;
    r = hb(f, 1, r1, false, false, 30);
    assert_false(r.is_fenced);
    assert_int_equal(r.next, KQ_BROKER_UNFENCED);
    assert_int_equal(f->out.n, 2);
    assert_int_equal(f->out.v[0].type, KQ_REC_BROKER_REGISTRATION_CHANGE);
    assert_int_equal(f->out.v[0].broker_change.fenced, KQ_FENCE_UNFENCE);
    assert_int_equal(f->out.v[1].type, KQ_REC_PARTITION_CHANGE);
    fx_apply(f);
    assert_false(kq_image_broker(f->img, 1)->fenced);
    assert_int_equal(fx_part(f, "t", 1)->leader, 1);
    fx_free(f);
}

/* 3.3: fencing (wantFence) removes the broker from every ISR, re-electing, and then writes
 * BrokerRegistrationChange(fenced=1). */
static void test_want_fence_removes_from_isrs(void **st)
{
    fx *f = fx_new();
    kq_heartbeat_result r;

    fx_brokers(f, 3, 0);
    fx_partition(f, "t", IDS(1, 2, 3), IDS(1, 2, 3), NONE, NONE, 1);
    fx_partition(f, "t", IDS(2, 1, 3), IDS(2, 1), NONE, NONE, 2);
    r = hb(f, 1, 100, true, false, 5);
    assert_true(r.is_fenced);
    assert_int_equal(f->out.n, 3);
    assert_int_equal(f->out.v[2].type, KQ_REC_BROKER_REGISTRATION_CHANGE);
    assert_int_equal(f->out.v[2].broker_change.fenced, KQ_FENCE_FENCE);
    fx_apply(f);
    assert_int_equal(fx_part(f, "t", 0)->leader, 2);
    ASSERT_ISR(fx_part(f, "t", 0), "2,3");
    ASSERT_ISR(fx_part(f, "t", 1), "2");
    assert_int_equal(fx_part(f, "t", 1)->leader_epoch, 0); /* leader kept: no bump */
    assert_true(kq_image_broker(f->img, 1)->fenced);
    fx_free(f);
}

/* 3.3: controlled shutdown: record, leadership moved, removed from ISRs; the shutdown offset
 * is set once (KAFKA-14292); SHUTDOWN_NOW only when the active brokers caught up to it. */
static void test_controlled_shutdown(void **st)
{
    fx *f = fx_new();
    kq_heartbeat_result r;
    int64_t cs1, cs2;

    fx_brokers(f, 3, 0);
    fx_partition(f, "t", IDS(1, 2, 3), IDS(1, 2, 3), NONE, NONE, 1);
    hb(f, 2, 0, false, false, 1);
    hb(f, 3, 0, false, false, 1);
    int64_t start = f->next;
    r = hb(f, 1, 0, false, true, 2);
    assert_int_equal(r.next, KQ_BROKER_CONTROLLED_SHUTDOWN);
    assert_false(r.should_shutdown);
    assert_false(r.is_fenced);
    assert_int_equal(f->out.n, 2);
    assert_int_equal(f->out.v[0].type, KQ_REC_BROKER_REGISTRATION_CHANGE);
    assert_int_equal(f->out.v[0].broker_change.in_controlled_shutdown, 1);
    assert_true(kq_cc_soft_state(f->cc, 1, NULL, NULL, &cs1));
    assert_int_equal(cs1, start + 1); /* end offset of that batch */
    fx_apply(f);
    assert_int_equal(fx_part(f, "t", 0)->leader, 2);
    ASSERT_ISR(fx_part(f, "t", 0), "2,3");
    assert_true(kq_image_broker(f->img, 1)->in_controlled_shutdown);

    /* still in controlled shutdown: the others have not replayed the batch yet */
    r = hb(f, 1, f->next, false, true, 3);
    assert_int_equal(r.next, KQ_BROKER_CONTROLLED_SHUTDOWN);
    assert_true(kq_cc_soft_state(f->cc, 1, NULL, NULL, &cs2));
    assert_int_equal(cs2, cs1); /* set once */
    assert_int_equal(f->out.n, 0);
    hb(f, 2, cs1, false, false, 4);
    r = hb(f, 1, f->next, false, true, 5);
    assert_int_equal(r.next, KQ_BROKER_CONTROLLED_SHUTDOWN); /* broker 3 still behind */
    hb(f, 3, cs1, false, false, 6);
    r = hb(f, 1, f->next, false, true, 7);
    assert_int_equal(r.next, KQ_BROKER_SHUTDOWN_NOW);
    assert_true(r.should_shutdown);
    assert_true(r.is_fenced);
    fx_apply(f);
    assert_true(kq_image_broker(f->img, 1)->fenced);
    fx_free(f);
}

/* 3.3: an unfenced broker that leads nothing and wants to shut down goes to SHUTDOWN_NOW. */
static void test_shutdown_now_when_leading_nothing(void **st)
{
    fx *f = fx_new();

    fx_brokers(f, 2, 0);
    fx_partition(f, "t", IDS(2, 1), IDS(2, 1), NONE, NONE, 2);
    kq_heartbeat_result r = hb(f, 1, 0, false, true, 1);
    assert_int_equal(r.next, KQ_BROKER_SHUTDOWN_NOW);
    assert_true(r.should_shutdown);
    fx_apply(f);
    assert_true(kq_image_broker(f->img, 1)->fenced);
    ASSERT_ISR(fx_part(f, "t", 0), "2");
    fx_free(f);
}

/* 3.3 lease: one stale broker per call, oldest first, next check returned. */
static void test_lease_expiry_one_at_a_time_oldest_first(void **st)
{
    fx *f = fx_new();
    int32_t id;
    int64_t next;

    fx_brokers(f, 3, 0);
    hb(f, 1, 0, false, false, 3000);
    hb(f, 2, 0, false, false, 1000);
    hb(f, 3, 0, false, false, 2000);
    assert_int_equal(kq_cc_fence_stale(f->cc, f->img, 10000, &f->out, &id, &next), 0);
    assert_int_equal(id, -1);
    assert_int_equal(next, 10000); /* broker 2: 1000 + 9000 */
    assert_int_equal(f->out.n, 0);
    assert_true(kq_cc_has_live_lease(f->cc, f->img, 2, 10000));
    assert_false(kq_cc_has_live_lease(f->cc, f->img, 2, 10001));

    assert_int_equal(kq_cc_fence_stale(f->cc, f->img, 20000, &f->out, &id, &next), 0);
    assert_int_equal(id, 2);
    assert_int_equal(next, 20000);
    fx_apply(f);
    assert_true(kq_image_broker(f->img, 2)->fenced);
    assert_false(kq_image_broker(f->img, 3)->fenced);
    assert_int_equal(kq_cc_fence_stale(f->cc, f->img, 20000, &f->out, &id, &next), 0);
    assert_int_equal(id, 3);
    fx_apply(f);
    assert_int_equal(kq_cc_fence_stale(f->cc, f->img, 20000, &f->out, &id, &next), 0);
    assert_int_equal(id, 1);
    fx_apply(f);
    assert_int_equal(kq_cc_fence_stale(f->cc, f->img, 20000, &f->out, &id, &next), 0);
    assert_int_equal(id, -1);
    assert_int_equal(next, -1);
    fx_free(f);
}

/* 3.3: lease expiry of a partition leader moves leadership to the ISR. */
static void test_lease_expiry_moves_leadership(void **st)
{
    fx *f = fx_new();
    int32_t id;
    int64_t next;

    fx_brokers(f, 3, 0);
    fx_partition(f, "t", IDS(1, 2, 3), IDS(1, 2, 3), NONE, NONE, 1);
    hb(f, 2, 0, false, false, 5000);
    hb(f, 3, 0, false, false, 5000);
    hb(f, 1, 0, false, false, 100);
    assert_int_equal(kq_cc_fence_stale(f->cc, f->img, 9101, &f->out, &id, &next), 0);
    assert_int_equal(id, 1);
    fx_apply(f);
    assert_int_equal(fx_part(f, "t", 0)->leader, 2);
    ASSERT_ISR(fx_part(f, "t", 0), "2,3");
    fx_free(f);
}

/* 3.1: a new active controller gives every broker a fresh session. */
static void test_activation_fresh_sessions(void **st)
{
    fx *f = fx_new();
    int32_t id;
    int64_t next, lc, mo;

    fx_brokers(f, 2, 0);
    hb(f, 1, 50, false, false, 0);
    assert_int_equal(kq_cc_activate(f->cc, f->img, 100000), 0);
    assert_true(kq_cc_soft_state(f->cc, 1, &lc, &mo, NULL));
    assert_int_equal(lc, 100000);
    assert_int_equal(mo, -1);
    assert_int_equal(kq_cc_fence_stale(f->cc, f->img, 109000, &f->out, &id, &next), 0);
    assert_int_equal(id, -1);
    assert_int_equal(next, 109000);
    assert_int_equal(kq_cc_fence_stale(f->cc, f->img, 109001, &f->out, &id, &next), 0);
    assert_int_equal(id, 1);
    fx_free(f);
}

/* 3.3 Unregister: leave ISRs and ELRs, then UnregisterBroker. */
static void test_unregister(void **st)
{
    fx *f = fx_new();

    fx_brokers(f, 2, 0);
    fx_partition(f, "t", IDS(1, 2), IDS(1, 2), NONE, NONE, 1);
    assert_int_equal(kq_cc_unregister(f->cc, f->img, 9, &f->out), KQ_ERR_BROKER_ID_NOT_REGISTERED);
    assert_int_equal(kq_cc_unregister(f->cc, f->img, 1, &f->out), 0);
    assert_int_equal(f->out.v[f->out.n - 1].type, KQ_REC_UNREGISTER_BROKER);
    fx_apply(f);
    assert_null(kq_image_broker(f->img, 1));
    assert_int_equal(fx_part(f, "t", 0)->leader, 2);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_new_incarnation_epoch_is_next_offset),
        cmocka_unit_test(test_register_same_incarnation_keeps_state),
        cmocka_unit_test(test_register_duplicate_live_lease),
        cmocka_unit_test(test_register_bad_input),
        cmocka_unit_test(test_register_new_incarnation_keeps_elr),
        cmocka_unit_test(test_state_machine),
        cmocka_unit_test(test_heartbeat_stale_epoch),
        cmocka_unit_test(test_unfence_when_caught_up),
        cmocka_unit_test(test_want_fence_removes_from_isrs),
        cmocka_unit_test(test_controlled_shutdown),
        cmocka_unit_test(test_shutdown_now_when_leading_nothing),
        cmocka_unit_test(test_lease_expiry_one_at_a_time_oldest_first),
        cmocka_unit_test(test_lease_expiry_moves_leadership),
        cmocka_unit_test(test_activation_fresh_sessions),
        cmocka_unit_test(test_unregister),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
