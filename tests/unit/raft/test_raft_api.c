/* Unit tests of the kq_raft API surface: configuration, event validation, epoch cache,
 * determinism of the seeded PRNG. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kq/error.h"
#include "kq/raft.h"

#include <string.h>

static kq_raft_config cfg3(int32_t self)
{
    kq_raft_config c;
    kq_raft_config_defaults(&c);
    c.node_id = self;
    c.n_voters = 3;
    c.voters[0] = 1;
    c.voters[1] = 2;
    c.voters[2] = 3;
    c.seed = 42;
    return c;
}

static int start(kq_raft *r, const kq_raft_persisted *p, kq_raft_update *u)
{
    kq_raft_event ev = {.type = KQ_RAFT_EV_START, .now_ms = 100};
    ev.u.start = *p;
    return kq_raft_step(r, &ev, u);
}

static kq_raft_persisted empty_disk(void)
{
    kq_raft_persisted p;
    memset(&p, 0, sizeof(p));
    p.qstate.voted_id = -1;
    p.qstate.leader_id = -1;
    return p;
}

static void test_config_defaults_match_kafka(void **state)
{
    kq_raft_config c;
    kq_raft_config_defaults(&c);
    assert_int_equal(c.node_id, -1);
    assert_int_equal(c.n_voters, 0);
    assert_int_equal(c.election_timeout_ms, 1000);
    assert_int_equal(c.fetch_timeout_ms, 2000);
    assert_int_equal(c.election_backoff_max_ms, 1000);
    assert_int_equal(c.request_timeout_ms, 2000);
    assert_int_equal(c.retry_backoff_ms, 20);
    assert_int_equal(c.fetch_max_wait_ms, 500);
}

static void test_new_rejects_bad_config_with_reason(void **state)
{
    char err[128];
    kq_raft_config c = cfg3(1);
    c.node_id = -1;
    assert_null(kq_raft_new(&c, err, sizeof(err)));
    assert_non_null(strstr(err, "node id"));

    c = cfg3(1);
    c.n_voters = -1;
    assert_null(kq_raft_new(&c, err, sizeof(err)));
    assert_non_null(strstr(err, "voter"));

    c = cfg3(1);
    c.n_bootstrap = KQ_RAFT_MAX_VOTERS + 1;
    assert_null(kq_raft_new(&c, err, sizeof(err)));
    assert_non_null(strstr(err, "bootstrap servers"));

    /* No static set (kraft.version 1): the set must come with START, or from a bootstrap
     * server; with neither, START is refused. */
    c = cfg3(1);
    c.n_voters = 0;
    kq_raft *r = kq_raft_new(&c, err, sizeof(err));
    assert_non_null(r);
    kq_raft_event ev = {.type = KQ_RAFT_EV_START};
    ev.u.start.qstate = (kq_raft_qstate){.epoch = 0, .voted_id = -1, .leader_id = -1};
    kq_raft_update u;
    assert_int_equal(kq_raft_step(r, &ev, &u), KQ_ERR_INVALID_REQUEST);
    kq_raft_free(r);
    c.n_bootstrap = 2;
    r = kq_raft_new(&c, err, sizeof(err));
    assert_non_null(r);
    assert_int_equal(kq_raft_step(r, &ev, &u), 0);
    kq_raft_free(r);

    c = cfg3(1);
    c.voters[2] = 2;
    assert_null(kq_raft_new(&c, err, sizeof(err)));
    assert_non_null(strstr(err, "duplicate voter"));

    c = cfg3(1);
    c.fetch_timeout_ms = 0;
    assert_null(kq_raft_new(&c, err, sizeof(err)));
    assert_non_null(strstr(err, "timeout"));

    c = cfg3(1);
    c.n_voters = KQ_RAFT_MAX_VOTERS + 1;
    assert_null(kq_raft_new(&c, NULL, 0)); /* no error buffer: still no crash */
}

static void test_role_names(void **state)
{
    assert_string_equal(kq_raft_role_name(KQ_RAFT_UNATTACHED), "unattached");
    assert_string_equal(kq_raft_role_name(KQ_RAFT_PROSPECTIVE), "prospective");
    assert_string_equal(kq_raft_role_name(KQ_RAFT_CANDIDATE), "candidate");
    assert_string_equal(kq_raft_role_name(KQ_RAFT_LEADER), "leader");
    assert_string_equal(kq_raft_role_name(KQ_RAFT_RESIGNED), "resigned");
    assert_string_equal(kq_raft_role_name(KQ_RAFT_FOLLOWER), "follower");
    assert_string_equal(kq_raft_role_name((kq_raft_role)99), "unknown");
}

static void test_events_before_start_or_second_start_are_invalid(void **state)
{
    kq_raft_config c = cfg3(1);
    kq_raft *r = kq_raft_new(&c, NULL, 0);
    assert_non_null(r);
    kq_raft_update u;
    kq_raft_event tick = {.type = KQ_RAFT_EV_TICK, .now_ms = 5};
    assert_int_equal(kq_raft_step(r, &tick, &u), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(u.n_msgs, 0);
    assert_int_equal(u.truncate_to, -1);
    kq_raft_persisted p = empty_disk();
    assert_int_equal(start(r, &p, &u), 0);
    assert_true(u.role_changed);
    assert_int_equal(u.role, KQ_RAFT_UNATTACHED);
    assert_true(u.next_deadline_ms >= 1100 && u.next_deadline_ms < 2100);
    assert_int_equal(start(r, &p, &u), KQ_ERR_INVALID_REQUEST);
    kq_raft_free(r);
}

static void test_malformed_events_are_rejected_without_state_change(void **state)
{
    kq_raft_config c = cfg3(1);
    kq_raft *r = kq_raft_new(&c, NULL, 0);
    kq_raft_update u;
    kq_raft_persisted p = empty_disk();
    assert_int_equal(start(r, &p, &u), 0);

    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE, .now_ms = 200};
    ev.u.msg = NULL;
    assert_int_equal(kq_raft_step(r, &ev, &u), KQ_ERR_INVALID_REQUEST);

    kq_raft_msg m;
    memset(&m, 0, sizeof(m));
    m.type = KQ_RAFT_VOTE_REQ;
    m.from = 2;
    m.to = 3; /* not for us */
    m.epoch = 1;
    ev.u.msg = &m;
    assert_int_equal(kq_raft_step(r, &ev, &u), KQ_ERR_INVALID_REQUEST);
    m.to = 1;
    m.type = (kq_raft_msg_type)77;
    assert_int_equal(kq_raft_step(r, &ev, &u), KQ_ERR_INVALID_REQUEST);
    m.type = KQ_RAFT_FETCH_RESP;
    m.u.fetch_resp.n_batches = 2; /* batches missing */
    assert_int_equal(kq_raft_step(r, &ev, &u), KQ_ERR_INVALID_REQUEST);

    kq_raft_event pe = {.type = KQ_RAFT_EV_PERSISTED, .now_ms = 200};
    pe.u.persisted_end = -5;
    assert_int_equal(kq_raft_step(r, &pe, &u), KQ_ERR_INVALID_REQUEST);
    kq_raft_event bad = {.type = (kq_raft_event_type)42, .now_ms = 200};
    assert_int_equal(kq_raft_step(r, &bad, &u), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_raft_step(r, NULL, &u), KQ_ERR_INVALID_REQUEST);

    kq_raft_status s;
    kq_raft_get_status(r, &s);
    assert_int_equal(s.epoch, 0);
    assert_int_equal(s.role, KQ_RAFT_UNATTACHED);
    kq_raft_free(r);
}

static void test_start_rejects_inconsistent_disk_state(void **state)
{
    kq_raft_config c = cfg3(1);
    kq_raft_update u;
    kq_epoch_entry bad_order[2] = {{.epoch = 3, .start_offset = 0},
                                   {.epoch = 2, .start_offset = 5}};
    kq_raft_persisted p = empty_disk();
    p.log_end_offset = 10;
    p.epochs = bad_order;
    p.n_epochs = 2;
    kq_raft *r = kq_raft_new(&c, NULL, 0);
    assert_int_equal(start(r, &p, &u), KQ_ERR_INVALID_REQUEST);
    p = empty_disk();
    p.log_start_offset = 5;
    p.log_end_offset = 2;
    assert_int_equal(start(r, &p, &u), KQ_ERR_INVALID_REQUEST);
    p = empty_disk();
    p.n_epochs = 1; /* no array */
    assert_int_equal(start(r, &p, &u), KQ_ERR_INVALID_REQUEST);
    /* a good start still works afterwards */
    p = empty_disk();
    assert_int_equal(start(r, &p, &u), 0);
    kq_raft_free(r);
}

static void test_end_offset_for_epoch_uses_next_epoch_start_or_leo(void **state)
{
    kq_raft_config c = cfg3(1);
    kq_raft *r = kq_raft_new(&c, NULL, 0);
    kq_raft_update u;
    kq_epoch_entry e[3] = {{.epoch = 1, .start_offset = 0},
                           {.epoch = 3, .start_offset = 4},
                           {.epoch = 6, .start_offset = 9}};
    kq_raft_persisted p = empty_disk();
    p.qstate.epoch = 6;
    p.log_end_offset = 12;
    p.epochs = e;
    p.n_epochs = 3;
    assert_int_equal(start(r, &p, &u), 0);
    int32_t ep;
    int64_t end;
    assert_true(kq_raft_end_offset_for_epoch(r, 1, &ep, &end));
    assert_int_equal(ep, 1);
    assert_int_equal(end, 4);
    assert_true(kq_raft_end_offset_for_epoch(r, 2, &ep, &end)); /* largest cached <= 2 */
    assert_int_equal(ep, 1);
    assert_int_equal(end, 4);
    assert_true(kq_raft_end_offset_for_epoch(r, 7, &ep, &end));
    assert_int_equal(ep, 6);
    assert_int_equal(end, 12);
    assert_false(kq_raft_end_offset_for_epoch(r, 0, &ep, &end));
    kq_raft_status s;
    kq_raft_get_status(r, &s);
    assert_int_equal(s.last_epoch, 6);
    assert_int_equal(s.log_end_offset, 12);
    assert_int_equal(s.durable_end_offset, 12);
    kq_raft_free(r);
}

static void test_epoch_entries_past_the_log_end_are_dropped_at_start(void **state)
{
    kq_raft_config c = cfg3(1);
    kq_raft *r = kq_raft_new(&c, NULL, 0);
    kq_raft_update u;
    /* epoch 4 was cached but its LeaderChange batch never became durable */
    kq_epoch_entry e[2] = {{.epoch = 2, .start_offset = 0}, {.epoch = 4, .start_offset = 5}};
    kq_raft_persisted p = empty_disk();
    p.qstate.epoch = 4;
    p.log_end_offset = 5;
    p.epochs = e;
    p.n_epochs = 2;
    assert_int_equal(start(r, &p, &u), 0);
    kq_raft_status s;
    kq_raft_get_status(r, &s);
    assert_int_equal(s.last_epoch, 2);
    kq_raft_free(r);
}

static uint64_t first_deadline(uint64_t seed)
{
    kq_raft_config c = cfg3(1);
    c.seed = seed;
    kq_raft *r = kq_raft_new(&c, NULL, 0);
    kq_raft_update u;
    kq_raft_persisted p = empty_disk();
    start(r, &p, &u);
    kq_raft_free(r);
    return u.next_deadline_ms;
}

static void test_timeouts_are_deterministic_per_seed(void **state)
{
    assert_int_equal(first_deadline(7), first_deadline(7));
    int distinct = 0;
    uint64_t a = first_deadline(1);
    for (uint64_t s = 2; s < 20; s++)
        if (first_deadline(s) != a)
            distinct++;
    assert_true(distinct > 0);
}

static void test_time_going_backwards_is_clamped(void **state)
{
    kq_raft_config c = cfg3(1);
    kq_raft *r = kq_raft_new(&c, NULL, 0);
    kq_raft_update u;
    kq_raft_persisted p = empty_disk();
    start(r, &p, &u);
    uint64_t d = u.next_deadline_ms;
    kq_raft_event tick = {.type = KQ_RAFT_EV_TICK, .now_ms = 1};
    assert_int_equal(kq_raft_step(r, &tick, &u), 0);
    assert_int_equal(u.next_deadline_ms, d);
    assert_int_equal(u.role, KQ_RAFT_UNATTACHED);
    kq_raft_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults_match_kafka),
        cmocka_unit_test(test_new_rejects_bad_config_with_reason),
        cmocka_unit_test(test_role_names),
        cmocka_unit_test(test_events_before_start_or_second_start_are_invalid),
        cmocka_unit_test(test_malformed_events_are_rejected_without_state_change),
        cmocka_unit_test(test_start_rejects_inconsistent_disk_state),
        cmocka_unit_test(test_end_offset_for_epoch_uses_next_epoch_start_or_leo),
        cmocka_unit_test(test_epoch_entries_past_the_log_end_are_dropped_at_start),
        cmocka_unit_test(test_timeouts_are_deterministic_per_seed),
        cmocka_unit_test(test_time_going_backwards_is_clamped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
