/* kq_rpc basics: echo round trips (sync and async, empty and large payloads), start/open
 * errors that name the URL, and dropped requests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "rpc_testlib.h"

static void test_echo_round_trip(void **state)
{
    char url[64], errbuf[256] = "";
    rt_echo echo;
    kq_rpc_server *srv = NULL;
    kq_rpc_client *cli = NULL;
    uint8_t *resp = NULL;
    size_t len = 0;
    rt_result res;

    rt_echo_init(&echo);
    rt_url(url, sizeof(url), rt_free_port());
    assert_int_equal(
        kq_rpc_server_start(url, 4, 0, rt_echo_cb, &echo, &srv, errbuf, sizeof(errbuf)), 0);
    assert_non_null(srv);
    assert_int_equal(kq_rpc_client_open(url, 0, &cli, errbuf, sizeof(errbuf)), 0);
    assert_non_null(cli);

    /* blocking */
    assert_int_equal(kq_rpc_call(cli, (const uint8_t *)"hello", 5, RT_WAIT_MS, &resp, &len), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(resp, "hello", 5);
    free(resp);

    /* empty request and response */
    resp = NULL;
    assert_int_equal(kq_rpc_call(cli, NULL, 0, RT_WAIT_MS, &resp, &len), 0);
    assert_int_equal(len, 0);
    free(resp);

    /* async */
    rt_result_init(&res);
    assert_int_equal(
        kq_rpc_call_async(cli, (const uint8_t *)"async", 5, RT_WAIT_MS, rt_result_cb, &res), 0);
    assert_int_equal(rt_result_wait(&res, RT_WAIT_MS), 1);
    assert_int_equal(res.err, 0);
    assert_int_equal(res.len, 5);
    assert_memory_equal(res.data, "async", 5);

    /* 4 MiB payload, below the default 64 MiB limit, comes back intact */
    {
        size_t big = 4u << 20;
        uint8_t *buf = malloc(big);
        assert_non_null(buf);
        for (size_t i = 0; i < big; i++)
            buf[i] = (uint8_t)(i * 31u + 7u);
        assert_int_equal(kq_rpc_call(cli, buf, big, RT_WAIT_MS, &resp, &len), 0);
        assert_int_equal(len, big);
        assert_memory_equal(resp, buf, big);
        free(resp);
        free(buf);
    }

    kq_rpc_client_close(cli);
    kq_rpc_server_stop(srv);
    assert_int_equal(echo.served, 4);
}

static void test_server_start_errors(void **state)
{
    char url[64], errbuf[256] = "";
    rt_echo echo;
    kq_rpc_server *srv = NULL, *srv2 = (kq_rpc_server *)&echo;

    rt_echo_init(&echo);
    rt_url(url, sizeof(url), rt_free_port());
    assert_int_equal(
        kq_rpc_server_start(url, 2, 1024, rt_echo_cb, &echo, &srv, errbuf, sizeof(errbuf)), 0);

    /* second listener on the same port: address in use, named in the message */
    assert_int_equal(
        kq_rpc_server_start(url, 2, 1024, rt_echo_cb, &echo, &srv2, errbuf, sizeof(errbuf)),
        KQ_ERR_IO);
    assert_null(srv2);
    assert_non_null(strstr(errbuf, url));
    assert_non_null(strstr(errbuf, "in use"));

    /* unsupported scheme */
    errbuf[0] = '\0';
    assert_int_equal(kq_rpc_server_start("bogus://127.0.0.1:1", 2, 1024, rt_echo_cb, &echo, &srv2,
                                         errbuf, sizeof(errbuf)),
                     KQ_ERR_IO);
    assert_non_null(strstr(errbuf, "bogus://127.0.0.1:1"));

    /* address that is not ours */
    errbuf[0] = '\0';
    assert_int_equal(kq_rpc_server_start("tcp://192.0.2.1:9093", 2, 1024, rt_echo_cb, &echo, &srv2,
                                         errbuf, sizeof(errbuf)),
                     KQ_ERR_IO);
    assert_non_null(strstr(errbuf, "tcp://192.0.2.1:9093"));

    /* missing callback */
    assert_int_equal(kq_rpc_server_start(url, 2, 1024, NULL, NULL, &srv2, errbuf, sizeof(errbuf)),
                     KQ_ERR_CONFIG);
    /* NULL errbuf is allowed */
    assert_int_equal(kq_rpc_server_start(url, 2, 1024, rt_echo_cb, &echo, &srv2, NULL, 0),
                     KQ_ERR_IO);

    kq_rpc_server_stop(srv);
    kq_rpc_server_stop(NULL);
}

static void test_client_open_errors(void **state)
{
    char url[64], errbuf[256] = "";
    kq_rpc_client *cli = NULL;

    assert_int_equal(kq_rpc_client_open("nonsense", 0, &cli, errbuf, sizeof(errbuf)), KQ_ERR_IO);
    assert_null(cli);
    assert_non_null(strstr(errbuf, "nonsense"));

    errbuf[0] = '\0';
    assert_int_equal(kq_rpc_client_open("tcp://", 0, &cli, errbuf, sizeof(errbuf)), KQ_ERR_IO);
    assert_non_null(strstr(errbuf, "tcp://"));

    /* nothing listens there: opening still succeeds at once (non-blocking dial) */
    rt_url(url, sizeof(url), rt_free_port());
    assert_int_equal(kq_rpc_client_open(url, 0, &cli, errbuf, sizeof(errbuf)), 0);
    assert_non_null(cli);
    kq_rpc_client_close(cli);
    kq_rpc_client_close(NULL);
}

static void test_drop_then_serve(void **state)
{
    char url[64], errbuf[256] = "";
    rt_queue q;
    kq_rpc_server *srv = NULL;
    kq_rpc_client *cli = NULL;
    rt_result res;
    kq_rpc_req *req;

    rt_queue_init(&q);
    rt_url(url, sizeof(url), rt_free_port());
    /* one context only: the dropped one must come back to receiving */
    assert_int_equal(
        kq_rpc_server_start(url, 1, 1024, rt_queue_cb, &q, &srv, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(kq_rpc_client_open(url, 0, &cli, errbuf, sizeof(errbuf)), 0);

    /* connect first, so the short timeout below covers only the server's answer */
    assert_int_equal(rt_queue_warm_up(cli, &q), 0);
    rt_result_init(&res);
    assert_int_equal(kq_rpc_call_async(cli, (const uint8_t *)"first", 5, 300, rt_result_cb, &res),
                     0);
    req = rt_queue_pop(&q, RT_WAIT_MS);
    assert_non_null(req);
    assert_int_equal(kq_rpc_req_len(req), 5);
    assert_memory_equal(kq_rpc_req_data(req), "first", 5);
    kq_rpc_req_drop(req);
    assert_int_equal(rt_result_wait(&res, RT_WAIT_MS), 1);
    assert_int_equal(res.err, KQ_ERR_REQUEST_TIMED_OUT);

    rt_result_init(&res);
    assert_int_equal(
        kq_rpc_call_async(cli, (const uint8_t *)"second", 6, RT_WAIT_MS, rt_result_cb, &res), 0);
    req = rt_queue_pop(&q, RT_WAIT_MS);
    assert_non_null(req);
    assert_memory_equal(kq_rpc_req_data(req), "second", 6);
    assert_int_equal(kq_rpc_reply(req, (const uint8_t *)"ok", 2), 0);
    assert_int_equal(rt_result_wait(&res, RT_WAIT_MS), 1);
    assert_int_equal(res.err, 0);
    assert_int_equal(res.len, 2);
    assert_memory_equal(res.data, "ok", 2);

    kq_rpc_client_close(cli);
    kq_rpc_server_stop(srv);
    assert_int_equal(res.calls, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo_round_trip),
        cmocka_unit_test(test_server_start_errors),
        cmocka_unit_test(test_client_open_errors),
        cmocka_unit_test(test_drop_then_serve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
