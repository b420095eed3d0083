/* kq_rpc hostile input: messages above the server's size limit, and raw TCP connections
 * sending junk, fake SP headers with huge lengths, or nothing at all. The server must keep
 * answering real clients. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <signal.h>

#include "rpc_testlib.h"

#define SERVER_MAX 1024

static void test_oversized_dropped(void **state)
{
    char url[64], errbuf[256] = "";
    rt_echo echo;
    kq_rpc_server *srv = NULL;
    kq_rpc_client *cli = NULL, *other = NULL;
    uint8_t *big = calloc(1, 4 * SERVER_MAX);
    uint8_t *resp = NULL;
    size_t len = 0;
    int err;

    assert_non_null(big);
    rt_echo_init(&echo);
    rt_url(url, sizeof(url), rt_free_port());
    assert_int_equal(
        kq_rpc_server_start(url, 4, SERVER_MAX, rt_echo_cb, &echo, &srv, errbuf, sizeof(errbuf)),
        0);
    assert_int_equal(kq_rpc_client_open(url, 0, &cli, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(kq_rpc_client_open(url, 0, &other, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(rt_call_until_ok(other, "before", RT_WAIT_MS), 0);

    err = kq_rpc_call(cli, big, 4 * SERVER_MAX, 2000, &resp, &len);
    assert_true(err == KQ_ERR_NETWORK_EXCEPTION || err == KQ_ERR_REQUEST_TIMED_OUT);
    assert_null(resp);

    /* exactly at the limit is still fine (nng counts the 4-byte request id too) */
    assert_int_equal(rt_call_until_ok(cli, "after", RT_WAIT_MS), 0);
    assert_int_equal(kq_rpc_call(cli, big, SERVER_MAX - 4, RT_WAIT_MS, &resp, &len), 0);
    assert_int_equal(len, SERVER_MAX - 4);
    free(resp);
    /* one byte more is over */
    err = kq_rpc_call(cli, big, SERVER_MAX - 3, 2000, &resp, &len);
    assert_true(err == KQ_ERR_NETWORK_EXCEPTION || err == KQ_ERR_REQUEST_TIMED_OUT);
    assert_int_equal(rt_call_until_ok(cli, "after2", RT_WAIT_MS), 0);
    /* the other client was not disturbed */
    assert_int_equal(rt_call_until_ok(other, "other", RT_WAIT_MS), 0);
    /* the oversized messages never reached the application */
    assert_true(echo.served >= 4);
    assert_int_equal(echo.max_len, SERVER_MAX - 4);
    kq_rpc_client_close(cli);
    kq_rpc_client_close(other);
    kq_rpc_server_stop(srv);
    free(big);
}

/* Responses above the client's own limit fail the call instead of being delivered. */
static void test_oversized_response(void **state)
{
    char url[64], errbuf[256] = "";
    rt_echo echo;
    kq_rpc_server *srv = NULL;
    kq_rpc_client *cli = NULL;
    uint8_t *big = calloc(1, 8192);
    uint8_t *resp = NULL;
    size_t len = 0;
    int err;

    assert_non_null(big);
    rt_echo_init(&echo);
    rt_url(url, sizeof(url), rt_free_port());
    assert_int_equal(
        kq_rpc_server_start(url, 4, 0, rt_echo_cb, &echo, &srv, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(kq_rpc_client_open(url, 1024, &cli, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(rt_call_until_ok(cli, "warm", RT_WAIT_MS), 0);
    err = kq_rpc_call(cli, big, 8192, 2000, &resp, &len);
    assert_true(err == KQ_ERR_NETWORK_EXCEPTION || err == KQ_ERR_REQUEST_TIMED_OUT);
    assert_null(resp);
    assert_int_equal(rt_call_until_ok(cli, "small again", RT_WAIT_MS), 0);
    kq_rpc_client_close(cli);
    kq_rpc_server_stop(srv);
    free(big);
}

static void send_all(int fd, const void *buf, size_t len)
{
    /* errors are expected: the server may already have hung up */
    (void)!send(fd, buf, len, MSG_NOSIGNAL);
}

static const uint8_t sp_hdr_req[8] = {0x00, 'S', 'P', 0x00, 0x00, 0x30, 0x00, 0x00};

static void garbage_round(int port, int kind, unsigned seed)
{
    int fd = rt_tcp_connect(port);
    uint8_t buf[512];

    if (fd < 0)
        return;
    switch (kind) {
    case 0: /* random junk */
        for (size_t i = 0; i < sizeof(buf); i++) {
            seed = seed * 1103515245u + 12345u;
            buf[i] = (uint8_t)(seed >> 16);
        }
        send_all(fd, buf, sizeof(buf));
        break;
    case 1: /* valid REQ handshake, then a frame announcing 2^64-1 bytes */
        send_all(fd, sp_hdr_req, sizeof(sp_hdr_req));
        memset(buf, 0xff, 8);
        send_all(fd, buf, 8);
        send_all(fd, "abcdefgh", 8);
        break;
    case 2: /* valid handshake, frame of 1 GiB (above limit but "plausible") */
        send_all(fd, sp_hdr_req, sizeof(sp_hdr_req));
        {
            const uint8_t len1g[8] = {0, 0, 0, 0, 0x40, 0, 0, 0};
            send_all(fd, len1g, sizeof(len1g));
        }
        break;
    case 3: /* connect and close */
        break;
    case 4: /* valid handshake, small frame without a request id (bad REQ header) */
        send_all(fd, sp_hdr_req, sizeof(sp_hdr_req));
        {
            const uint8_t f[10] = {0, 0, 0, 0, 0, 0, 0, 2, 'h', 'i'};
            send_all(fd, f, sizeof(f));
        }
        break;
    case 5: /* handshake claiming a protocol REP does not talk to (PUB) */
    {
        const uint8_t pub[8] = {0x00, 'S', 'P', 0x00, 0x00, 0x20, 0x00, 0x00};
        send_all(fd, pub, sizeof(pub));
    } break;
    case 6: /* half a handshake, then close */
        send_all(fd, sp_hdr_req, 3);
        break;
    case 7: /* valid handshake + request id but truncated body, then close */
        send_all(fd, sp_hdr_req, sizeof(sp_hdr_req));
        {
            const uint8_t f[12] = {0, 0, 0, 0, 0, 0, 0, 100, 0x80, 0, 0, 1};
            send_all(fd, f, sizeof(f));
        }
        break;
    }
    close(fd);
}

static void test_garbage_connections(void **state)
{
    char url[64], errbuf[256] = "";
    rt_echo echo;
    kq_rpc_server *srv = NULL;
    kq_rpc_client *cli = NULL;
    int port = rt_free_port();
    int idle[8];

    rt_echo_init(&echo);
    rt_url(url, sizeof(url), port);
    assert_int_equal(
        kq_rpc_server_start(url, 4, SERVER_MAX, rt_echo_cb, &echo, &srv, errbuf, sizeof(errbuf)),
        0);
    /* a real client connected before the storm */
    assert_int_equal(kq_rpc_client_open(url, 0, &cli, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(rt_call_until_ok(cli, "before", RT_WAIT_MS), 0);

    /* idle connections that never say anything stay open during the test */
    for (int i = 0; i < 8; i++)
        idle[i] = rt_tcp_connect(port);

    for (int kind = 0; kind < 8; kind++) {
        for (int i = 0; i < 50; i++)
            garbage_round(port, kind, (unsigned)(kind * 1000 + i));
        /* the existing client still gets answers */
        assert_int_equal(rt_call_until_ok(cli, "during", RT_WAIT_MS), 0);
    }

    /* and a brand-new client can still connect and be served */
    {
        kq_rpc_client *fresh = NULL;

        assert_int_equal(kq_rpc_client_open(url, 0, &fresh, errbuf, sizeof(errbuf)), 0);
        assert_int_equal(rt_call_until_ok(fresh, "after", RT_WAIT_MS), 0);
        kq_rpc_client_close(fresh);
    }
    for (int i = 0; i < 8; i++)
        if (idle[i] >= 0)
            close(idle[i]);
    assert_int_equal(rt_call_until_ok(cli, "last", RT_WAIT_MS), 0);

    kq_rpc_client_close(cli);
    kq_rpc_server_stop(srv);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oversized_dropped),
        cmocka_unit_test(test_oversized_response),
        cmocka_unit_test(test_garbage_connections),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
