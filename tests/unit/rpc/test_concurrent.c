/* kq_rpc concurrency: many async calls in flight on one client, answered by another thread
 * after a delay and out of order; each caller gets its own response. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "rpc_testlib.h"

#define N_CALLS 64

typedef struct call_slot {
    int id;
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int *done;
    int calls;
    int err;
    char resp[64];
    size_t len;
} call_slot;

static void slot_cb(void *arg, int err, const uint8_t *data, size_t len)
{
    call_slot *s = arg;

    pthread_mutex_lock(s->mu);
    s->calls++;
    s->err = err;
    s->len = len;
    if (err == 0 && len < sizeof(s->resp))
        memcpy(s->resp, data, len);
    (*s->done)++;
    pthread_cond_broadcast(s->cv);
    pthread_mutex_unlock(s->mu);
}

/* Replier: "batch" mode waits for all N requests, then answers them in reverse order after a
 * delay; "stream" mode answers each as it arrives (for fewer contexts than calls). */
typedef struct replier {
    rt_queue *q;
    int n;
    bool batch;
    int replied;
    int reply_errors;
} replier;

static void answer(replier *r, kq_rpc_req *req)
{
    char out[80];
    int n = snprintf(out, sizeof(out), "re:%.*s", (int)kq_rpc_req_len(req),
                     (const char *)kq_rpc_req_data(req));

    if (kq_rpc_reply(req, (const uint8_t *)out, (size_t)n) != 0)
        r->reply_errors++;
    r->replied++;
}

static void *replier_main(void *arg)
{
    replier *r = arg;

    if (r->batch) {
        kq_rpc_req *reqs[N_CALLS];
        int got = 0;

        if (rt_queue_wait(r->q, r->n, RT_WAIT_MS) < r->n)
            return NULL;
        for (got = 0; got < r->n; got++)
            reqs[got] = rt_queue_pop(r->q, RT_WAIT_MS);
        rt_sleep_ms(50);
        for (int i = got - 1; i >= 0; i--)
            answer(r, reqs[i]);
    } else {
        for (int i = 0; i < r->n; i++) {
            kq_rpc_req *req = rt_queue_pop(r->q, RT_WAIT_MS);
            if (req == NULL)
                return NULL;
            if (i % 7 == 0)
                rt_sleep_ms(5);
            answer(r, req);
        }
    }
    return NULL;
}

static void run(int n_contexts, bool batch)
{
    char url[64], errbuf[256] = "";
    rt_queue q;
    kq_rpc_server *srv = NULL;
    kq_rpc_client *cli = NULL;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    int done = 0;
    call_slot slots[N_CALLS];
    replier rep = {.q = &q, .n = N_CALLS, .batch = batch};
    pthread_t th;
    struct timespec ts;

    rt_queue_init(&q);
    rt_url(url, sizeof(url), rt_free_port());
    assert_int_equal(
        kq_rpc_server_start(url, n_contexts, 4096, rt_queue_cb, &q, &srv, errbuf, sizeof(errbuf)),
        0);
    assert_int_equal(kq_rpc_client_open(url, 4096, &cli, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(pthread_create(&th, NULL, replier_main, &rep), 0);

    for (int i = 0; i < N_CALLS; i++) {
        char body[32];
        int n = snprintf(body, sizeof(body), "call-%d", i);

        slots[i] = (call_slot){.id = i, .mu = &mu, .cv = &cv, .done = &done};
        assert_int_equal(kq_rpc_call_async(cli, (const uint8_t *)body, (size_t)n, RT_WAIT_MS,
                                           slot_cb, &slots[i]),
                         0);
    }

    rt_deadline(&ts, RT_WAIT_MS);
    pthread_mutex_lock(&mu);
    while (done < N_CALLS && pthread_cond_timedwait(&cv, &mu, &ts) == 0) {
    }
    pthread_mutex_unlock(&mu);
    pthread_join(th, NULL);

    assert_int_equal(rep.replied, N_CALLS);
    assert_int_equal(rep.reply_errors, 0);
    assert_int_equal(done, N_CALLS);
    for (int i = 0; i < N_CALLS; i++) {
        char want[40];
        int n = snprintf(want, sizeof(want), "re:call-%d", i);

        assert_int_equal(slots[i].calls, 1);
        assert_int_equal(slots[i].err, 0);
        assert_int_equal(slots[i].len, (size_t)n);
        assert_memory_equal(slots[i].resp, want, (size_t)n);
    }
    assert_int_equal(q.total, N_CALLS);

    kq_rpc_client_close(cli);
    kq_rpc_server_stop(srv);
    /* callbacks never run after close returned */
    for (int i = 0; i < N_CALLS; i++)
        assert_int_equal(slots[i].calls, 1);
}

static void test_64_concurrent_out_of_order(void **state)
{
    run(KQ_RPC_DEFAULT_CONTEXTS, true);
}

static void test_more_calls_than_contexts(void **state)
{
    run(8, false);
}

/* The pool of client contexts is reused: many sequential rounds stay correct. */
static void test_reuse_rounds(void **state)
{
    char url[64], errbuf[256] = "";
    rt_echo echo;
    kq_rpc_server *srv = NULL;
    kq_rpc_client *cli = NULL;

    rt_echo_init(&echo);
    rt_url(url, sizeof(url), rt_free_port());
    assert_int_equal(
        kq_rpc_server_start(url, 4, 4096, rt_echo_cb, &echo, &srv, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(kq_rpc_client_open(url, 4096, &cli, errbuf, sizeof(errbuf)), 0);
    for (int i = 0; i < 500; i++) {
        char body[32];
        int n = snprintf(body, sizeof(body), "round-%d", i);
        uint8_t *resp = NULL;
        size_t len = 0;

        assert_int_equal(
            kq_rpc_call(cli, (const uint8_t *)body, (size_t)n, RT_WAIT_MS, &resp, &len), 0);
        assert_int_equal(len, (size_t)n);
        assert_memory_equal(resp, body, len);
        free(resp);
    }
    kq_rpc_client_close(cli);
    kq_rpc_server_stop(srv);
    assert_int_equal(echo.served, 500);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_64_concurrent_out_of_order),
        cmocka_unit_test(test_more_calls_than_contexts),
        cmocka_unit_test(test_reuse_rounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
