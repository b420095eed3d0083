/* kq_rpc timeouts and reconnects: a late reply times the call out and is never delivered to a
 * later call; a dead peer fails within the timeout and works once it starts; a server restart
 * is survived by the client. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "rpc_testlib.h"

static void test_late_reply_times_out(void **state)
{
    char url[64], errbuf[256] = "";
    rt_queue q;
    kq_rpc_server *srv = NULL;
    kq_rpc_client *cli = NULL;
    rt_result res;
    kq_rpc_req *late, *fresh;

    rt_queue_init(&q);
    rt_url(url, sizeof(url), rt_free_port());
    assert_int_equal(
        kq_rpc_server_start(url, 4, 4096, rt_queue_cb, &q, &srv, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(kq_rpc_client_open(url, 4096, &cli, errbuf, sizeof(errbuf)), 0);

    /* connect first, so the short timeout below covers only the server's answer */
    assert_int_equal(rt_queue_warm_up(cli, &q), 0);
    rt_result_init(&res);
    assert_int_equal(kq_rpc_call_async(cli, (const uint8_t *)"slow", 4, 200, rt_result_cb, &res),
                     0);
    late = rt_queue_pop(&q, RT_WAIT_MS);
    assert_non_null(late);
    /* hold the request past the client's timeout */
    assert_int_equal(rt_result_wait(&res, RT_WAIT_MS), 1);
    assert_int_equal(res.err, KQ_ERR_REQUEST_TIMED_OUT);

    /* the late reply goes out without harm */
    assert_int_equal(kq_rpc_reply(late, (const uint8_t *)"stale", 5), 0);
    rt_sleep_ms(100);
    assert_int_equal(res.calls, 1);

    /* the next call (reusing the pooled context) gets its own answer, not the stale one */
    rt_result_init(&res);
    assert_int_equal(
        kq_rpc_call_async(cli, (const uint8_t *)"next", 4, RT_WAIT_MS, rt_result_cb, &res), 0);
    fresh = rt_queue_pop(&q, RT_WAIT_MS);
    assert_non_null(fresh);
    assert_memory_equal(kq_rpc_req_data(fresh), "next", 4);
    assert_int_equal(kq_rpc_reply(fresh, (const uint8_t *)"fresh", 5), 0);
    assert_int_equal(rt_result_wait(&res, RT_WAIT_MS), 1);
    assert_int_equal(res.err, 0);
    assert_int_equal(res.len, 5);
    assert_memory_equal(res.data, "fresh", 5);

    kq_rpc_client_close(cli);
    kq_rpc_server_stop(srv);
    assert_int_equal(res.calls, 1);
}

static void test_dead_peer_then_reconnect(void **state)
{
    char url[64], errbuf[256] = "";
    rt_echo echo;
    kq_rpc_server *srv = NULL;
    kq_rpc_client *cli = NULL;
    uint8_t *resp = NULL;
    size_t len = 0;
    uint64_t t0, elapsed;
    int err;

    rt_echo_init(&echo);
    rt_url(url, sizeof(url), rt_free_port());
    assert_int_equal(kq_rpc_client_open(url, 4096, &cli, errbuf, sizeof(errbuf)), 0);

    t0 = rt_now_ms();
    err = kq_rpc_call(cli, (const uint8_t *)"anyone", 6, 300, &resp, &len);
    elapsed = rt_now_ms() - t0;
    assert_true(err == KQ_ERR_REQUEST_TIMED_OUT || err == KQ_ERR_NETWORK_EXCEPTION);
    assert_null(resp);
    assert_int_equal(len, 0);
    /* bounded by the timeout (plus very generous slack), i.e. it did not hang */
    assert_true(elapsed < 300 + RT_WAIT_MS);

    /* the peer comes up: the background redial finds it */
    assert_int_equal(
        kq_rpc_server_start(url, 4, 4096, rt_echo_cb, &echo, &srv, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(rt_call_until_ok(cli, "hello", RT_WAIT_MS), 0);

    kq_rpc_client_close(cli);
    kq_rpc_server_stop(srv);
}

static void test_server_restart(void **state)
{
    char url[64], errbuf[256] = "";
    rt_queue q;
    rt_echo echo;
    kq_rpc_server *srv = NULL;
    kq_rpc_client *cli = NULL;
    rt_result res;

    rt_queue_init(&q);
    rt_echo_init(&echo);
    rt_url(url, sizeof(url), rt_free_port());
    assert_int_equal(
        kq_rpc_server_start(url, 4, 4096, rt_queue_cb, &q, &srv, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(kq_rpc_client_open(url, 4096, &cli, errbuf, sizeof(errbuf)), 0);

    /* a call in flight when the server goes away fails (no silent resend), well before its
     * own long timeout */
    rt_result_init(&res);
    assert_int_equal(
        kq_rpc_call_async(cli, (const uint8_t *)"inflight", 8, 600000, rt_result_cb, &res), 0);
    assert_int_equal(rt_queue_wait(&q, 1, RT_WAIT_MS), 1);
    kq_rpc_server_stop(srv);
    assert_int_equal(rt_result_wait(&res, RT_WAIT_MS), 1);
    assert_int_equal(res.err, KQ_ERR_NETWORK_EXCEPTION);
    /* the parked request is released after stop without harm */
    kq_rpc_req_drop(rt_queue_pop(&q, 0));

    assert_int_equal(
        kq_rpc_server_start(url, 4, 4096, rt_echo_cb, &echo, &srv, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(rt_call_until_ok(cli, "again", RT_WAIT_MS), 0);
    assert_true(echo.served >= 1);

    kq_rpc_client_close(cli);
    kq_rpc_server_stop(srv);
    assert_int_equal(res.calls, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_late_reply_times_out),
        cmocka_unit_test(test_dead_peer_then_reconnect),
        cmocka_unit_test(test_server_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
