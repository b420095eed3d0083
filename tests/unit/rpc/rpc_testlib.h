/*
 * Helpers shared by the kq_rpc unit tests (header-only, static functions): free-port probe,
 * clocks, an echo server callback, a server callback that parks requests in a queue for the
 * test to answer later, and a collector for asynchronous client results.
 *
 * Ownership: an rt_queue owns the kq_rpc_req pointers it holds until rt_queue_pop hands one
 * to the caller, who must then reply to it or drop it. An rt_result copies response bytes.
 */
#ifndef KQ_RPC_TESTLIB_H
#define KQ_RPC_TESTLIB_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kq/error.h"
#include "kq/rpc.h"

/* Generous bound for waiting on a condition; never a pass/fail latency threshold. */
#define RT_WAIT_MS 30000u

static inline uint64_t rt_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline void rt_sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000u, .tv_nsec = (long)(ms % 1000u) * 1000000L};

    while (nanosleep(&ts, &ts) != 0) {
    }
}

static inline void rt_deadline(struct timespec *ts, unsigned ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000u;
    ts->tv_nsec += (long)(ms % 1000u) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* A TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it). */
static inline int rt_free_port(void)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port = -1;

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static inline void rt_url(char *buf, size_t n, int port)
{
    snprintf(buf, n, "tcp://127.0.0.1:%d", port);
}

/* Raw TCP connection to 127.0.0.1:port, or -1. */
static inline int rt_tcp_connect(int port)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- echo server: replies with the request bytes, inline on the nng thread ---- */

typedef struct rt_echo {
    pthread_mutex_t mu;
    int served;
    size_t max_len; /* largest request seen */
} rt_echo;

static inline void rt_echo_init(rt_echo *e)
{
    pthread_mutex_init(&e->mu, NULL);
    e->served = 0;
    e->max_len = 0;
}

static inline void rt_echo_cb(void *arg, kq_rpc_req *req)
{
    rt_echo *e = arg;

    pthread_mutex_lock(&e->mu);
    e->served++;
    if (kq_rpc_req_len(req) > e->max_len)
        e->max_len = kq_rpc_req_len(req);
    pthread_mutex_unlock(&e->mu);
    kq_rpc_reply(req, kq_rpc_req_data(req), kq_rpc_req_len(req));
}

/* ---- queue server: parks requests for the test to answer ---- */

#define RT_QUEUE_MAX 1024

typedef struct rt_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    kq_rpc_req *items[RT_QUEUE_MAX];
    int head, n;
    int total; /* requests ever received */
} rt_queue;

static inline void rt_queue_init(rt_queue *q)
{
    memset(q, 0, sizeof(*q));
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
}

static inline void rt_queue_cb(void *arg, kq_rpc_req *req)
{
    rt_queue *q = arg;

    pthread_mutex_lock(&q->mu);
    if (q->n < RT_QUEUE_MAX) {
        q->items[(q->head + q->n) % RT_QUEUE_MAX] = req;
        q->n++;
        q->total++;
        pthread_cond_broadcast(&q->cv);
        req = NULL;
    }
    pthread_mutex_unlock(&q->mu);
    if (req != NULL)
        kq_rpc_req_drop(req);
}

/* Waits until at least `n` requests are queued; returns the number queued. */
static inline int rt_queue_wait(rt_queue *q, int n, unsigned timeout_ms)
{
    struct timespec ts;
    int have;

    rt_deadline(&ts, timeout_ms);
    pthread_mutex_lock(&q->mu);
    while (q->n < n && pthread_cond_timedwait(&q->cv, &q->mu, &ts) == 0) {
    }
    have = q->n;
    pthread_mutex_unlock(&q->mu);
    return have;
}

/* Pops the oldest request, waiting up to timeout_ms; NULL if none. Caller owns it. */
static inline kq_rpc_req *rt_queue_pop(rt_queue *q, unsigned timeout_ms)
{
    kq_rpc_req *r = NULL;

    if (rt_queue_wait(q, 1, timeout_ms) < 1)
        return NULL;
    pthread_mutex_lock(&q->mu);
    if (q->n > 0) {
        r = q->items[q->head];
        q->head = (q->head + 1) % RT_QUEUE_MAX;
        q->n--;
    }
    pthread_mutex_unlock(&q->mu);
    return r;
}

/* ---- async result collector ---- */

typedef struct rt_result {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls; /* how many times the callback ran */
    int err;
    uint8_t data[256];
    size_t len;
    bool truncated;
} rt_result;

static inline void rt_result_init(rt_result *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

static inline void rt_result_cb(void *arg, int err, const uint8_t *data, size_t len)
{
    rt_result *r = arg;

    pthread_mutex_lock(&r->mu);
    r->calls++;
    r->err = err;
    r->len = len;
    r->truncated = len > sizeof(r->data);
    if (err == 0 && len > 0)
        memcpy(r->data, data, r->truncated ? sizeof(r->data) : len);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Waits until the callback ran at least once; returns the number of runs. */
static inline int rt_result_wait(rt_result *r, unsigned timeout_ms)
{
    struct timespec ts;
    int calls;

    rt_deadline(&ts, timeout_ms);
    pthread_mutex_lock(&r->mu);
    while (r->calls == 0 && pthread_cond_timedwait(&r->cv, &r->mu, &ts) == 0) {
    }
    calls = r->calls;
    pthread_mutex_unlock(&r->mu);
    return calls;
}

/* Against a queue server: one round trip with a generous timeout, so that the connection
 * exists before a test uses a short timeout. Returns 0 when it worked. */
static inline int rt_queue_warm_up(kq_rpc_client *c, rt_queue *q)
{
    rt_result res;
    kq_rpc_req *req;

    rt_result_init(&res);
    if (kq_rpc_call_async(c, (const uint8_t *)"warm", 4, RT_WAIT_MS, rt_result_cb, &res) != 0)
        return -1;
    req = rt_queue_pop(q, RT_WAIT_MS);
    if (req == NULL)
        return -1;
    if (kq_rpc_reply(req, (const uint8_t *)"ok", 2) != 0)
        return -1;
    if (rt_result_wait(&res, RT_WAIT_MS) != 1 || res.err != 0)
        return -1;
    return 0;
}

/* Calls until one succeeds with the echo of `msg` or timeout_ms passes; returns the last
 * error (0 on success). For waiting out reconnects. */
static inline int rt_call_until_ok(kq_rpc_client *c, const char *msg, unsigned timeout_ms)
{
    uint64_t end = rt_now_ms() + timeout_ms;
    int err;

    do {
        uint8_t *resp = NULL;
        size_t len = 0;

        err = kq_rpc_call(c, (const uint8_t *)msg, strlen(msg), 1000, &resp, &len);
        if (err == 0) {
            bool same = len == strlen(msg) && memcmp(resp, msg, len) == 0;
            free(resp);
            return same ? 0 : KQ_ERR_CORRUPT_MESSAGE;
        }
        rt_sleep_ms(50);
    } while (rt_now_ms() < end);
    return err;
}

#endif
