/* kq_rpc shutdown: stopping a server with requests still held by the application, and closing
 * a client with calls outstanding (peer alive or down). Meant to run under ASan/UBSan too
 * (-DKQ_SANITIZE=ON); replies racing the stop are in test_stop_race.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "rpc_testlib.h"

#define N_HELD 16

typedef struct counted {
    pthread_mutex_t *mu;
    int calls;
    int err;
    int reissue_rc; /* result of a new call attempted from inside the callback */
    kq_rpc_client **cli;
} counted;

static void counted_cb(void *arg, int err, const uint8_t *data, size_t len)
{
    counted *c = arg;
    int rc = -1;

    if (c->cli != NULL && err != 0)
        rc = kq_rpc_call_async(*c->cli, (const uint8_t *)"again", 5, 1000, counted_cb, c);
    pthread_mutex_lock(c->mu);
    c->calls++;
    c->err = err;
    c->reissue_rc = rc;
    pthread_mutex_unlock(c->mu);
}

static void test_server_stop_with_held_requests(void **state)
{
    char url[64], errbuf[256] = "";
    rt_queue q;
    kq_rpc_server *srv = NULL;
    kq_rpc_client *cli = NULL;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    counted res[N_HELD];
    kq_rpc_req *held[N_HELD];

    rt_queue_init(&q);
    rt_url(url, sizeof(url), rt_free_port());
    assert_int_equal(
        kq_rpc_server_start(url, N_HELD, 4096, rt_queue_cb, &q, &srv, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(kq_rpc_client_open(url, 4096, &cli, errbuf, sizeof(errbuf)), 0);
    for (int i = 0; i < N_HELD; i++) {
        res[i] = (counted){.mu = &mu};
        assert_int_equal(
            kq_rpc_call_async(cli, (const uint8_t *)"hold", 4, RT_WAIT_MS, counted_cb, &res[i]), 0);
    }
    assert_int_equal(rt_queue_wait(&q, N_HELD, RT_WAIT_MS), N_HELD);
    for (int i = 0; i < N_HELD; i++)
        held[i] = rt_queue_pop(&q, 0);

    kq_rpc_server_stop(srv);

    /* the application answers after stop: released without a crash, reported as closed */
    for (int i = 0; i < N_HELD; i++) {
        assert_non_null(held[i]);
        assert_int_equal(kq_rpc_req_len(held[i]), 4);
        if (i % 2 == 0)
            assert_int_equal(kq_rpc_reply(held[i], (const uint8_t *)"late", 4), KQ_ERR_CLOSED);
        else
            kq_rpc_req_drop(held[i]);
    }

    /* the client's calls all fail (connection gone) exactly once */
    kq_rpc_client_close(cli);
    for (int i = 0; i < N_HELD; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_true(res[i].err == KQ_ERR_NETWORK_EXCEPTION ||
                    res[i].err == KQ_ERR_REQUEST_TIMED_OUT);
    }
}

static void close_with_outstanding(bool peer_up)
{
    char url[64], errbuf[256] = "";
    rt_queue q;
    kq_rpc_server *srv = NULL;
    kq_rpc_client *cli = NULL;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    counted res[N_HELD];

    rt_queue_init(&q);
    rt_url(url, sizeof(url), rt_free_port());
    if (peer_up)
        assert_int_equal(
            kq_rpc_server_start(url, N_HELD, 4096, rt_queue_cb, &q, &srv, errbuf, sizeof(errbuf)),
            0);
    assert_int_equal(kq_rpc_client_open(url, 4096, &cli, errbuf, sizeof(errbuf)), 0);
    for (int i = 0; i < N_HELD; i++) {
        /* odd callbacks try to issue a new call from inside the callback during close */
        res[i] = (counted){.mu = &mu, .cli = (i % 2) ? &cli : NULL};
        assert_int_equal(
            kq_rpc_call_async(cli, (const uint8_t *)"wait", 4, 600000, counted_cb, &res[i]), 0);
    }
    if (peer_up)
        assert_int_equal(rt_queue_wait(&q, N_HELD, RT_WAIT_MS), N_HELD);

    kq_rpc_client_close(cli);
    /* every callback ran exactly once, before close returned, with NETWORK_EXCEPTION */
    for (int i = 0; i < N_HELD; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].err, KQ_ERR_NETWORK_EXCEPTION);
        if (i % 2)
            assert_int_equal(res[i].reissue_rc, KQ_ERR_CLOSED);
    }
    /* and none runs later */
    rt_sleep_ms(100);
    for (int i = 0; i < N_HELD; i++)
        assert_int_equal(res[i].calls, 1);

    if (peer_up) {
        kq_rpc_req *r;

        while ((r = rt_queue_pop(&q, 0)) != NULL)
            assert_int_equal(kq_rpc_reply(r, (const uint8_t *)"gone", 4), 0);
        kq_rpc_server_stop(srv);
    }
}

static void test_client_close_outstanding_peer_up(void **state)
{
    close_with_outstanding(true);
}

static void test_client_close_outstanding_peer_down(void **state)
{
    close_with_outstanding(false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_stop_with_held_requests),
        cmocka_unit_test(test_client_close_outstanding_peer_up),
        cmocka_unit_test(test_client_close_outstanding_peer_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
