/* kq_rpc connection limits: a server refuses connections past max.connections and past
 * max.connections.per.ip before reading anything from them, counts what it holds and what it
 * refused, and takes a refused peer once a slot is free again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "rpc_testlib.h"

#define REFUSED_CALL_MS 600

static int echo_once(kq_rpc_client *cli, int timeout_ms)
{
    uint8_t *resp = NULL;
    size_t len = 0;
    int rc = kq_rpc_call(cli, (const uint8_t *)"ping", 4, timeout_ms, &resp, &len);

    if (rc == 0)
        assert_memory_equal(resp, "ping", 4);
    free(resp);
    return rc;
}

/* A call on cli succeeds within RT_WAIT_MS (nng redials with back-off). */
static void expect_served(kq_rpc_client *cli)
{
    uint64_t deadline = rt_now_ms() + (uint64_t)RT_WAIT_MS;

    while (echo_once(cli, 300) != 0)
        assert_true(rt_now_ms() < deadline);
}

static void start(kq_rpc_server **srv, rt_echo *echo, char *url, size_t urllen,
                  const kq_rpc_conn_limits *limits)
{
    char errbuf[256] = "";

    rt_echo_init(echo);
    rt_url(url, urllen, rt_free_port());
    assert_int_equal(kq_rpc_server_start(url, 4, 0, rt_echo_cb, echo, srv, errbuf, sizeof errbuf),
                     0);
    kq_rpc_server_set_conn_limits(*srv, limits);
}

static kq_rpc_client *open_client(const char *url)
{
    char errbuf[256] = "";
    kq_rpc_client *cli = NULL;

    assert_int_equal(kq_rpc_client_open(url, 0, &cli, errbuf, sizeof errbuf), 0);
    return cli;
}

static void test_max_connections(void **state)
{
    char url[64];
    rt_echo echo;
    kq_rpc_server *srv = NULL;
    kq_rpc_conn_limits limits = {.max_connections = 2, .max_connections_per_ip = 0};
    kq_rpc_client *a, *b, *c;
    uint64_t open, refused;

    (void)state;
    start(&srv, &echo, url, sizeof url, &limits);
    a = open_client(url);
    b = open_client(url);
    expect_served(a);
    expect_served(b);
    c = open_client(url);
    assert_int_not_equal(echo_once(c, REFUSED_CALL_MS), 0);
    kq_rpc_server_conn_counts(srv, &open, &refused);
    assert_int_equal(open, 2);
    assert_true(refused >= 1);
    /* the two held connections still work */
    assert_int_equal(echo_once(a, RT_WAIT_MS), 0);
    assert_int_equal(echo_once(b, RT_WAIT_MS), 0);
    /* a freed slot goes to the peer that was refused */
    kq_rpc_client_close(a);
    expect_served(c);
    kq_rpc_server_conn_counts(srv, &open, &refused);
    assert_int_equal(open, 2);
    kq_rpc_client_close(b);
    kq_rpc_client_close(c);
    kq_rpc_server_stop(srv);
}

static void test_max_connections_per_ip(void **state)
{
    char url[64];
    rt_echo echo;
    kq_rpc_server *srv = NULL;
    kq_rpc_conn_limits limits = {.max_connections = 0, .max_connections_per_ip = 1};
    kq_rpc_client *a, *b;
    uint64_t open, refused;

    (void)state;
    start(&srv, &echo, url, sizeof url, &limits);
    a = open_client(url);
    expect_served(a);
    b = open_client(url); /* the same address, 127.0.0.1 */
    assert_int_not_equal(echo_once(b, REFUSED_CALL_MS), 0);
    kq_rpc_server_conn_counts(srv, &open, &refused);
    assert_int_equal(open, 1);
    assert_true(refused >= 1);
    /* no limit: both are served */
    limits.max_connections_per_ip = 0;
    kq_rpc_server_set_conn_limits(srv, &limits);
    expect_served(b);
    assert_int_equal(echo_once(a, RT_WAIT_MS), 0);
    kq_rpc_server_conn_counts(srv, &open, &refused);
    assert_int_equal(open, 2);
    kq_rpc_client_close(a);
    kq_rpc_client_close(b);
    kq_rpc_server_stop(srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_connections),
        cmocka_unit_test(test_max_connections_per_ip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
