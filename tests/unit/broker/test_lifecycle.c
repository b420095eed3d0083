/* The broker lifecycle state machine (broker-agent/lifecycle.h) on a virtual clock:
 * registration, heartbeat cadence, fencing states, leader hints, back-off, controlled shutdown,
 * exits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "kq/error.h"
#include "lifecycle.h"

static kq_bl bl;
static kq_bl_action act;
static uint64_t now;

static void setup_bl(void)
{
    kq_bl_config c = {.broker_id = 4,
                      .controllers = {1, 2, 3},
                      .n_controllers = 3,
                      .heartbeat_interval_ms = 2000,
                      .session_timeout_ms = 9000,
                      .registration_timeout_ms = 60000,
                      .shutdown_timeout_ms = 30000,
                      .seed = 42};
    now = 1000;
    memset(&act, 0, sizeof(act));
    kq_bl_init(&bl, &c, now);
}

static void poll_at(uint64_t t, int64_t offset)
{
    now = t;
    kq_bl_poll(&bl, now, offset, &act);
}

static kq_heartbeat_result hb_result(bool caught_up, bool fenced, bool shutdown)
{
    kq_heartbeat_result r;
    memset(&r, 0, sizeof(r));
    r.is_caught_up = caught_up;
    r.is_fenced = fenced;
    r.should_shutdown = shutdown;
    return r;
}

/* Register at epoch 50 through controller 1 (the observer's leader). */
static void register_broker(void)
{
    kq_bl_set_leader(&bl, 1);
    poll_at(now, -1);
    assert_int_equal(act.send, KQ_BL_SEND_REGISTRATION);
    assert_int_equal(act.target, 1);
    kq_bl_on_registration(&bl, now, 0, 50, -1);
    assert_int_equal(bl.broker_epoch, 50);
}

/* Drive to RUNNING: caught up, ready, unfenced. */
static void run_broker(void)
{
    register_broker();
    kq_bl_set_ready(&bl);
    poll_at(now, 60);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    kq_heartbeat_result r = hb_result(true, false, false);
    kq_bl_on_heartbeat(&bl, now, 0, &r, -1);
    assert_int_equal(bl.state, KQ_BL_RUNNING);
}

static void test_register_then_heartbeat(void **state)
{
    (void)state;
    setup_bl();
    assert_int_equal(bl.state, KQ_BL_STARTING);
    poll_at(1000, -1);
    assert_int_equal(act.send, KQ_BL_SEND_REGISTRATION);
    assert_int_equal(act.target, 1); /* no leader known: the first voter */
    /* one request in flight: nothing more until it is answered */
    poll_at(1500, -1);
    assert_int_equal(act.send, KQ_BL_SEND_NONE);
    assert_false(act.exit);
    kq_bl_on_registration(&bl, 1500, 0, 77, -1);
    poll_at(1500, 12);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    assert_int_equal(act.hb.broker_id, 4);
    assert_int_equal(act.hb.broker_epoch, 77);
    assert_int_equal(act.hb.current_metadata_offset, 12);
    assert_true(act.hb.want_fence); /* metadata not replayed yet */
    assert_false(act.hb.want_shutdown);
}

static void test_starting_recovery_running(void **state)
{
    (void)state;
    setup_bl();
    register_broker();
    poll_at(now, 10);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    kq_heartbeat_result r = hb_result(false, true, false);
    assert_false(kq_bl_on_heartbeat(&bl, now, 0, &r, -1));
    assert_int_equal(bl.state, KQ_BL_STARTING);
    /* STARTING: every 10 ms */
    uint64_t t = now;
    poll_at(t + KQ_BL_STARTING_INTERVAL_MS - 1, 10);
    assert_int_equal(act.send, KQ_BL_SEND_NONE);
    assert_int_equal(act.next_ms, t + KQ_BL_STARTING_INTERVAL_MS);
    poll_at(t + KQ_BL_STARTING_INTERVAL_MS, 60);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    r = hb_result(true, true, false);
    assert_true(kq_bl_on_heartbeat(&bl, now, 0, &r, -1));
    assert_int_equal(bl.state, KQ_BL_RECOVERY);
    /* RECOVERY: the normal interval, still asking to stay fenced */
    t = now;
    poll_at(t + 1999, 60);
    assert_int_equal(act.send, KQ_BL_SEND_NONE);
    /* ready to unfence: tell the controller at once */
    kq_bl_set_ready(&bl);
    poll_at(t + 1999, 60);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    assert_false(act.hb.want_fence);
    r = hb_result(true, false, false);
    assert_true(kq_bl_on_heartbeat(&bl, now, 0, &r, -1));
    assert_int_equal(bl.state, KQ_BL_RUNNING);
    assert_false(bl.fenced);
    /* RUNNING: exactly every heartbeat interval */
    t = now;
    poll_at(t + 1999, 61);
    assert_int_equal(act.send, KQ_BL_SEND_NONE);
    poll_at(t + 2000, 61);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    /* fenced again (session expired while paused): the flag changes, the state stays */
    r = hb_result(true, true, false);
    assert_true(kq_bl_on_heartbeat(&bl, now, 0, &r, -1));
    assert_true(bl.fenced);
    assert_int_equal(bl.state, KQ_BL_RUNNING);
}

static void test_caught_up_and_unfenced_at_once(void **state)
{
    (void)state;
    setup_bl();
    register_broker();
    kq_bl_set_ready(&bl);
    poll_at(now, 60);
    kq_heartbeat_result r = hb_result(true, false, false);
    assert_true(kq_bl_on_heartbeat(&bl, now, 0, &r, -1));
    assert_int_equal(bl.state, KQ_BL_RUNNING);
}

static void test_not_controller_hint_is_followed_at_once(void **state)
{
    (void)state;
    setup_bl();
    poll_at(1000, -1);
    assert_int_equal(act.target, 1);
    kq_bl_on_registration(&bl, now, KQ_ERR_NOT_CONTROLLER, -1, 3);
    poll_at(now, -1);
    assert_int_equal(act.send, KQ_BL_SEND_REGISTRATION);
    assert_int_equal(act.target, 3);
    /* the hinted leader is not active yet: same target, after a back-off */
    kq_bl_on_registration(&bl, now, KQ_ERR_NOT_CONTROLLER, -1, 3);
    poll_at(now, -1);
    assert_int_equal(act.send, KQ_BL_SEND_NONE);
    poll_at(now + 300, -1);
    assert_int_equal(act.send, KQ_BL_SEND_REGISTRATION);
    assert_int_equal(act.target, 3);
}

static void test_failover_moves_to_the_next_controller(void **state)
{
    (void)state;
    setup_bl();
    run_broker();
    /* controller 1 dies: the heartbeat times out, no hint: try the next voter */
    poll_at(now + 2000, 70);
    assert_int_equal(act.target, 1);
    kq_bl_on_heartbeat(&bl, now, KQ_ERR_REQUEST_TIMED_OUT, NULL, -1);
    poll_at(now + 200, 70);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    assert_int_equal(act.target, 2);
    /* the observer learns the new leader: it wins over round robin */
    kq_bl_on_heartbeat(&bl, now, KQ_ERR_NOT_CONTROLLER, NULL, -1);
    kq_bl_set_leader(&bl, 3);
    poll_at(now + 1000, 70);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    assert_int_equal(act.target, 3);
    kq_heartbeat_result r = hb_result(true, false, false);
    kq_bl_on_heartbeat(&bl, now, 0, &r, -1);
    assert_int_equal(bl.backoff_ms, 0);
    assert_int_equal(bl.state, KQ_BL_RUNNING);
}

/* The back-off stops at the heartbeat interval (2000), below a quarter of the session (2250):
 * a broker searching for a new active controller reaches it well within the session the
 * controller grants at activation (issue 8, item 6: it slept up to 9 s and was fenced). */
static void test_backoff_doubles_with_jitter_up_to_a_heartbeat(void **state)
{
    (void)state;
    setup_bl();
    uint32_t expect = 100;
    for (int i = 0; i < 12; i++) {
        poll_at(now, -1);
        assert_int_equal(act.send, KQ_BL_SEND_REGISTRATION);
        uint64_t sent = now;
        kq_bl_on_registration(&bl, sent, KQ_ERR_NETWORK_EXCEPTION, -1, -1);
        uint64_t wait = bl.next_send_ms - sent;
        assert_true(wait >= expect - expect / 50 && wait <= expect + expect / 50);
        poll_at(bl.next_send_ms - 1, -1);
        assert_int_equal(act.send, KQ_BL_SEND_NONE);
        now = bl.next_send_ms;
        expect = expect * 2 > 2000 ? 2000 : expect * 2;
    }
    assert_int_equal(bl.backoff_ms, 2000);
}

/* The observer sees the new leader while a heartbeat to the dead one is in flight: when that
 * heartbeat fails, the new leader is tried at once (not dropped for round robin). */
static void test_new_leader_seen_while_in_flight_is_tried_at_once(void **state)
{
    (void)state;
    setup_bl();
    run_broker();
    kq_bl_set_leader(&bl, 1);
    poll_at(now + 2000, 70);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    assert_int_equal(act.target, 1);
    kq_bl_set_leader(&bl, 3); /* controller 1 died; 3 leads now */
    kq_bl_on_heartbeat(&bl, now, KQ_ERR_REQUEST_TIMED_OUT, NULL, -1);
    poll_at(now, 70);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    assert_int_equal(act.target, 3);
}

/* While backing off, a new leader seen by the metadata observer is tried at once. */
static void test_new_leader_cuts_the_backoff_short(void **state)
{
    (void)state;
    setup_bl();
    run_broker();
    for (int i = 0; i < 6; i++) { /* the leader died: heartbeats fail, the back-off grows */
        poll_at(bl.next_send_ms > now ? bl.next_send_ms : now, 70);
        assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
        kq_bl_on_heartbeat(&bl, now, KQ_ERR_REQUEST_TIMED_OUT, NULL, -1);
    }
    assert_true(bl.next_send_ms - now >= 1000);
    kq_bl_set_leader(&bl, 2);
    poll_at(now, 70);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    assert_int_equal(act.target, 2);
}

static void test_duplicate_registration_retries_every_interval(void **state)
{
    (void)state;
    setup_bl();
    for (int i = 0; i < 8; i++) {
        poll_at(now, -1);
        assert_int_equal(act.send, KQ_BL_SEND_REGISTRATION);
        assert_int_equal(act.target, 1); /* the right controller: keep asking it */
        kq_bl_on_registration(&bl, now, KQ_ERR_DUPLICATE_BROKER_REGISTRATION, -1, -1);
        assert_true(bl.next_send_ms - now <= 2000 + 40);
        now = bl.next_send_ms;
    }
    assert_int_equal(bl.backoff_ms, 2000);
    kq_bl_on_registration(&bl, now, 0, 99, -1); /* not in flight: still accepted */
    assert_int_equal(bl.broker_epoch, 99);
}

static void test_registration_timeout_exits_1(void **state)
{
    (void)state;
    setup_bl();
    poll_at(1000, -1);
    kq_bl_on_registration(&bl, now, KQ_ERR_REQUEST_TIMED_OUT, -1, -1);
    poll_at(1000 + 59999, -1);
    assert_false(act.exit);
    poll_at(1000 + 60000, -1);
    assert_true(act.exit);
    assert_int_equal(act.exit_code, 1);
    assert_non_null(strstr(act.exit_reason, "initial.broker.registration.timeout.ms"));
}

static void test_registered_broker_never_hits_registration_timeout(void **state)
{
    (void)state;
    setup_bl();
    run_broker();
    poll_at(1000 + 120000, 70);
    assert_false(act.exit);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
}

static void test_inconsistent_cluster_id_exits_2(void **state)
{
    (void)state;
    setup_bl();
    poll_at(1000, -1);
    kq_bl_on_registration(&bl, now, KQ_ERR_INCONSISTENT_CLUSTER_ID, -1, -1);
    poll_at(1001, -1);
    assert_true(act.exit);
    assert_int_equal(act.exit_code, 2);
    assert_non_null(strstr(act.exit_reason, "cluster id"));
}

static void test_stale_epoch_registers_again(void **state)
{
    (void)state;
    setup_bl();
    run_broker();
    poll_at(now + 2000, 70);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    assert_true(kq_bl_on_heartbeat(&bl, now, KQ_ERR_STALE_BROKER_EPOCH, NULL, -1));
    assert_int_equal(bl.state, KQ_BL_STARTING);
    assert_true(bl.fenced);
    poll_at(now, 70);
    assert_int_equal(act.send, KQ_BL_SEND_REGISTRATION);
}

static void test_controlled_shutdown(void **state)
{
    (void)state;
    setup_bl();
    run_broker();
    uint64_t t = now;
    assert_true(kq_bl_request_shutdown(&bl, t));
    assert_int_equal(bl.state, KQ_BL_PENDING_CONTROLLED_SHUTDOWN);
    assert_false(kq_bl_request_shutdown(&bl, t)); /* a second SIGTERM changes nothing */
    poll_at(t + KQ_BL_FIRST_SHUTDOWN_HB_MS - 1, 80);
    assert_int_equal(act.send, KQ_BL_SEND_NONE);
    poll_at(t + KQ_BL_FIRST_SHUTDOWN_HB_MS, 80);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    assert_true(act.hb.want_shutdown);
    assert_false(act.hb.want_fence);
    /* the controller moves leadership away first */
    kq_heartbeat_result r = hb_result(true, false, false);
    kq_bl_on_heartbeat(&bl, now, 0, &r, -1);
    assert_int_equal(bl.state, KQ_BL_PENDING_CONTROLLED_SHUTDOWN);
    poll_at(now + 2000, 90);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    assert_true(act.hb.want_shutdown);
    r = hb_result(true, true, true);
    assert_true(kq_bl_on_heartbeat(&bl, now, 0, &r, -1));
    assert_int_equal(bl.state, KQ_BL_SHUTTING_DOWN);
    poll_at(now, 90);
    assert_true(act.exit);
    assert_int_equal(act.exit_code, 0);
    assert_int_equal(act.send, KQ_BL_SEND_NONE);
}

static void test_shutdown_while_heartbeat_in_flight(void **state)
{
    (void)state;
    setup_bl();
    run_broker();
    poll_at(now + 2000, 70);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    assert_false(act.hb.want_shutdown);
    kq_bl_request_shutdown(&bl, now);
    poll_at(now + 100, 70);
    assert_int_equal(act.send, KQ_BL_SEND_NONE); /* still one in flight */
    kq_heartbeat_result r = hb_result(true, false, false);
    kq_bl_on_heartbeat(&bl, now, 0, &r, -1);
    poll_at(now + KQ_BL_FIRST_SHUTDOWN_HB_MS, 70);
    assert_int_equal(act.send, KQ_BL_SEND_HEARTBEAT);
    assert_true(act.hb.want_shutdown);
}

static void test_shutdown_times_out(void **state)
{
    (void)state;
    setup_bl();
    run_broker();
    uint64_t t = now;
    kq_bl_request_shutdown(&bl, t);
    poll_at(t + 50, 70);
    kq_bl_on_heartbeat(&bl, now, KQ_ERR_REQUEST_TIMED_OUT, NULL, -1);
    poll_at(t + 29999, 70);
    assert_false(act.exit);
    assert_true(act.next_ms <= t + 30000);
    poll_at(t + 30000, 70);
    assert_true(act.exit);
    assert_int_equal(act.exit_code, 0);
    assert_non_null(strstr(act.exit_reason, "timed out"));
}

static void test_shutdown_before_registration_exits_at_once(void **state)
{
    (void)state;
    setup_bl();
    poll_at(1000, -1);
    assert_int_equal(act.send, KQ_BL_SEND_REGISTRATION);
    assert_true(kq_bl_request_shutdown(&bl, 1001));
    poll_at(1001, -1);
    assert_true(act.exit);
    assert_int_equal(act.exit_code, 0);
}

/* Whatever the answers, never more than one request in flight. */
static void test_one_in_flight_property(void **state)
{
    (void)state;
    static const int errors[] = {0,
                                 KQ_ERR_NOT_CONTROLLER,
                                 KQ_ERR_REQUEST_TIMED_OUT,
                                 KQ_ERR_NETWORK_EXCEPTION,
                                 KQ_ERR_STALE_BROKER_EPOCH,
                                 KQ_ERR_DUPLICATE_BROKER_REGISTRATION};
    kq_prng rng;
    kq_prng_seed(&rng, 7);
    setup_bl();
    int outstanding = 0;
    kq_bl_send kind = KQ_BL_SEND_NONE;
    int sends = 0;
    for (int i = 0; i < 20000 && !act.exit; i++) {
        now += kq_prng_below(&rng, 300);
        if (kq_prng_below(&rng, 50) == 0)
            kq_bl_set_leader(&bl, (int32_t)kq_prng_below(&rng, 4) - 1);
        if (i == 15000)
            kq_bl_request_shutdown(&bl, now);
        if (i == 100)
            kq_bl_set_ready(&bl);
        poll_at(now, i);
        if (act.send != KQ_BL_SEND_NONE) {
            assert_int_equal(outstanding, 0);
            assert_true(act.target >= 1 && act.target <= 3);
            outstanding = 1;
            kind = act.send;
            sends++;
        }
        if (outstanding && kq_prng_below(&rng, 3) == 0) {
            int e = errors[kq_prng_below(&rng, 6)];
            int32_t hint = (int32_t)kq_prng_below(&rng, 4) - 1;
            if (kind == KQ_BL_SEND_REGISTRATION) {
                kq_bl_on_registration(&bl, now, e == KQ_ERR_STALE_BROKER_EPOCH ? 0 : e, 100 + i,
                                      hint);
            } else {
                kq_heartbeat_result r = hb_result(kq_prng_below(&rng, 2), kq_prng_below(&rng, 2),
                                                  kq_prng_below(&rng, 4) == 0);
                kq_bl_on_heartbeat(&bl, now, e, &r, hint);
            }
            outstanding = 0;
        }
        assert_true(act.exit || act.next_ms >= now);
    }
    if (sends <= 100)
        fail_msg("only %d sends; exit=%d reason=%s", sends, act.exit,
                 act.exit_reason ? act.exit_reason : "-");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_then_heartbeat),
        cmocka_unit_test(test_starting_recovery_running),
        cmocka_unit_test(test_caught_up_and_unfenced_at_once),
        cmocka_unit_test(test_not_controller_hint_is_followed_at_once),
        cmocka_unit_test(test_failover_moves_to_the_next_controller),
        cmocka_unit_test(test_backoff_doubles_with_jitter_up_to_a_heartbeat),
        cmocka_unit_test(test_new_leader_cuts_the_backoff_short),
        cmocka_unit_test(test_new_leader_seen_while_in_flight_is_tried_at_once),
        cmocka_unit_test(test_duplicate_registration_retries_every_interval),
        cmocka_unit_test(test_registration_timeout_exits_1),
        cmocka_unit_test(test_registered_broker_never_hits_registration_timeout),
        cmocka_unit_test(test_inconsistent_cluster_id_exits_2),
        cmocka_unit_test(test_stale_epoch_registers_again),
        cmocka_unit_test(test_controlled_shutdown),
        cmocka_unit_test(test_shutdown_while_heartbeat_in_flight),
        cmocka_unit_test(test_shutdown_times_out),
        cmocka_unit_test(test_shutdown_before_registration_exits_at_once),
        cmocka_unit_test(test_one_in_flight_property),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
