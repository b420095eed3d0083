/* kq_http: /metrics, /healthz and /readyz over nng's HTTP server, fetched with a plain socket
 * client: status codes, Content-Type, bodies, 404 and 405, readiness in both states, bind and
 * argument errors that name the address, junk connections, and stop with clients connected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdatomic.h>

#include "metrics_testlib.h"

typedef struct readiness {
    atomic_int ready;
    atomic_int calls;
    const char *reason;
} readiness;

static int ready_cb(void *arg, char *reason, size_t reason_len)
{
    readiness *r = arg;

    atomic_fetch_add(&r->calls, 1);
    if (atomic_load(&r->ready))
        return 1;
    snprintf(reason, reason_len, "%s", r->reason);
    return 0;
}

typedef struct fixture {
    kq_metrics *m;
    kq_metric *requests;
    kq_http *http;
    readiness rd;
    int port;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    char errbuf[256] = "";

    if (f == NULL)
        return -1;
    atomic_init(&f->rd.ready, 1);
    atomic_init(&f->rd.calls, 0);
    f->rd.reason = "no leader known";
    f->m = kq_metrics_new();
    if (f->m == NULL)
        return -1;
    f->requests =
        kq_metrics_counter(f->m, "kq_rpc_requests_total", "RPC requests.", "api=\"fetch\"");
    if (f->requests == NULL)
        return -1;
    if (kq_http_start("127.0.0.1", 0, f->m, ready_cb, &f->rd, &f->http, errbuf, sizeof(errbuf)) !=
        0) {
        fprintf(stderr, "kq_http_start: %s\n", errbuf);
        return -1;
    }
    f->port = kq_http_port(f->http);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;

    kq_http_stop(f->http);
    kq_metrics_free(f->m);
    free(f);
    return 0;
}

static void test_metrics_endpoint(void **state)
{
    fixture *f = *state;
    mt_resp r;
    char ct[128], cl[32], *text = NULL;
    size_t len = 0;

    assert_true(f->port > 0 && f->port < 65536);
    kq_metric_add(f->requests, 41);
    kq_metric_inc(f->requests);
    assert_int_equal(mt_request(f->port, "GET", "/metrics", &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(mt_header(&r, "Content-Type", ct, sizeof(ct)));
    assert_string_equal(ct, "text/plain; version=0.0.4; charset=utf-8");
    assert_true(mt_header(&r, "Content-Length", cl, sizeof(cl)));
    assert_int_equal(strtoul(cl, NULL, 10), r.body_len);
    /* the body is exactly what the registry renders */
    assert_int_equal(kq_metrics_render(f->m, &text, &len), 0);
    assert_int_equal(r.body_len, len);
    assert_memory_equal(r.body, text, len);
    assert_non_null(strstr(r.body, "\nkq_rpc_requests_total{api=\"fetch\"} 42\n"));
    assert_non_null(strstr(r.body, "kq_build_info{version=\"" KQ_VERSION "\"} 1\n"));
    free(text);
    mt_resp_free(&r);

    /* updates show up in the next scrape */
    kq_metric_inc(f->requests);
    assert_int_equal(mt_request(f->port, "GET", "/metrics", &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\nkq_rpc_requests_total{api=\"fetch\"} 43\n"));
    mt_resp_free(&r);

    /* HEAD works like GET, without a body */
    assert_int_equal(mt_request(f->port, "HEAD", "/metrics", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    mt_resp_free(&r);
}

static void test_healthz(void **state)
{
    fixture *f = *state;
    mt_resp r;

    assert_int_equal(mt_request(f->port, "GET", "/healthz", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 3);
    assert_string_equal(r.body, "ok\n");
    mt_resp_free(&r);
    /* not ready does not mean not healthy */
    atomic_store(&f->rd.ready, 0);
    assert_int_equal(mt_request(f->port, "GET", "/healthz", &r), 0);
    assert_int_equal(r.status, 200);
    mt_resp_free(&r);
}

static void test_readyz_both_states(void **state)
{
    fixture *f = *state;
    mt_resp r;
    int calls;

    atomic_store(&f->rd.ready, 1);
    calls = atomic_load(&f->rd.calls);
    assert_int_equal(mt_request(f->port, "GET", "/readyz", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ready\n");
    assert_int_equal(atomic_load(&f->rd.calls), calls + 1);
    mt_resp_free(&r);

    atomic_store(&f->rd.ready, 0);
    assert_int_equal(mt_request(f->port, "GET", "/readyz", &r), 0);
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "not ready: no leader known\n");
    mt_resp_free(&r);

    /* a multi-line reason comes back as one line */
    f->rd.reason = "applied offset stuck at 17\nfor 30 s";
    assert_int_equal(mt_request(f->port, "GET", "/readyz", &r), 0);
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "not ready: applied offset stuck at 17 for 30 s\n");
    mt_resp_free(&r);

    /* an empty reason still says something */
    f->rd.reason = "";
    assert_int_equal(mt_request(f->port, "GET", "/readyz", &r), 0);
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "not ready: unknown reason\n");
    mt_resp_free(&r);

    /* and back */
    atomic_store(&f->rd.ready, 1);
    assert_int_equal(mt_request(f->port, "GET", "/readyz", &r), 0);
    assert_int_equal(r.status, 200);
    mt_resp_free(&r);
}

static void test_unknown_path_and_method(void **state)
{
    fixture *f = *state;
    mt_resp r;

    assert_int_equal(mt_request(f->port, "GET", "/nope", &r), 0);
    assert_int_equal(r.status, 404);
    mt_resp_free(&r);
    assert_int_equal(mt_request(f->port, "GET", "/", &r), 0);
    assert_int_equal(r.status, 404);
    mt_resp_free(&r);
    assert_int_equal(mt_request(f->port, "GET", "/metrics/extra", &r), 0);
    assert_int_equal(r.status, 404);
    mt_resp_free(&r);
    assert_int_equal(mt_request(f->port, "POST", "/metrics", &r), 0);
    assert_int_equal(r.status, 405);
    mt_resp_free(&r);
    assert_int_equal(mt_request(f->port, "DELETE", "/readyz", &r), 0);
    assert_int_equal(r.status, 405);
    mt_resp_free(&r);
    /* HEAD gets no body whatever the answer, or a kept-alive client would read it as the next
     * answer */
    assert_int_equal(mt_request(f->port, "HEAD", "/nope", &r), 0);
    assert_int_equal(r.status, 404);
    assert_int_equal(r.body_len, 0);
    mt_resp_free(&r);
    /* the server still answers afterwards */
    assert_int_equal(mt_request(f->port, "GET", "/healthz", &r), 0);
    assert_int_equal(r.status, 200);
    mt_resp_free(&r);
}

static void test_junk_connections(void **state)
{
    fixture *f = *state;
    static const char binary[] = "\x00\x01\x02\xff\xfe garbage\r\n\r\n";
    static const char *junk[] = {
        "",                                     /* connect and close */
        binary,                                 /* binary, sent with its NUL bytes */
        "GET /metrics HTTP/1.1\r\nHost: x\r\n", /* request cut short */
        "GET /metrics HTTP/9.9\r\n\r\n",        /* bad version */
        "GET ",                                 /* then a 9000-byte line */
        "BREW /healthz HTCPCP/1.0\r\n\r\n",
    };
    char longline[9000];
    mt_resp r;

    memset(longline, 'a', sizeof(longline) - 1);
    longline[sizeof(longline) - 1] = '\0';
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
            int fd = mt_connect(f->port);
            assert_true(fd >= 0);
            mt_send_all(fd, junk[i], i == 1 ? sizeof(binary) - 1 : strlen(junk[i]));
            if (i == 4)
                mt_send_all(fd, longline, strlen(longline));
            close(fd);
        }
    }
    assert_int_equal(mt_request(f->port, "GET", "/healthz", &r), 0);
    assert_int_equal(r.status, 200);
    mt_resp_free(&r);
    assert_int_equal(mt_request(f->port, "GET", "/metrics", &r), 0);
    assert_int_equal(r.status, 200);
    mt_resp_free(&r);
}

static void test_keepalive_many_requests(void **state)
{
    fixture *f = *state;
    const char *req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    char buf[4096] = "";
    size_t got = 0;
    int fd = mt_connect(f->port);

    assert_true(fd >= 0);
    for (int i = 0; i < 10; i++)
        assert_true(mt_send_all(fd, req, strlen(req)));
    /* ten responses come back on the one connection */
    while (mt_count(buf, "ok\n") < 10) {
        ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
        assert_true(n > 0);
        got += (size_t)n;
        buf[got] = '\0';
    }
    assert_int_equal(mt_count(buf, "HTTP/1.1 200"), 10);
    close(fd);
}

static void test_stop_with_idle_client(void **state)
{
    kq_metrics *m = kq_metrics_new();
    kq_http *h = NULL;
    char errbuf[256], buf[64];
    int fd, port;
    ssize_t n;

    assert_non_null(m);
    assert_int_equal(kq_http_start("127.0.0.1", 0, m, NULL, NULL, &h, errbuf, sizeof(errbuf)), 0);
    port = kq_http_port(h);
    /* a NULL ready callback means always ready */
    {
        mt_resp r;
        assert_int_equal(mt_request(port, "GET", "/readyz", &r), 0);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "ready\n");
        mt_resp_free(&r);
    }
    fd = mt_connect(port);
    assert_true(fd >= 0);
    /* half a request in flight, then stop: it must return and close the connection */
    assert_true(mt_send_all(fd, "GET /metrics HTTP/1.1\r\n", 23));
    kq_http_stop(h);
    n = recv(fd, buf, sizeof(buf), 0);
    assert_true(n <= 0);
    close(fd);
    /* the port is free again: a new server can bind it */
    assert_int_equal(kq_http_start("127.0.0.1", port, m, NULL, NULL, &h, errbuf, sizeof(errbuf)),
                     0);
    assert_int_equal(kq_http_port(h), port);
    kq_http_stop(h);
    kq_http_stop(NULL);
    kq_metrics_free(m);
}

/* The metrics value of series `series` (a whole line's start) in a fresh render. */
static double scrape_value(kq_metrics *m, const char *series)
{
    char *text = NULL, *line;
    size_t len = 0;
    double v = -1;

    assert_int_equal(kq_metrics_render(m, &text, &len), 0);
    line = strstr(text, series);
    if (line != NULL)
        v = strtod(line + strlen(series), NULL);
    free(text);
    return v;
}

/* A connection the server closed: recv sees the end (or a reset) before MT_WAIT_S. */
static bool closed_by_server(int fd)
{
    char buf[512];
    ssize_t n;

    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
    }
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* Slowloris: a full table of connections, one kept alive after an answer and idle, the others
 * never finishing their request head. One more is closed on connect; each is closed once
 * KQ_HTTP_HEAD_TIMEOUT_MS has passed; then the server answers again. The refusal and the slow
 * ones are counted, the idle kept-alive one is not. */
static void test_sheds_slow_and_excess_clients(void **state)
{
    fixture *f = *state;
    int fds[KQ_HTTP_MAX_CONNECTIONS], extra;
    char buf[4096];
    mt_resp r;

    fds[0] = mt_connect(f->port);
    assert_true(fds[0] >= 0);
    const char *get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

    assert_true(mt_send_all(fds[0], get, strlen(get)));
    assert_true(recv(fds[0], buf, sizeof buf, 0) > 0); /* its answer; the connection stays */
    for (int i = 1; i < KQ_HTTP_MAX_CONNECTIONS; i++) {
        fds[i] = mt_connect(f->port);
        assert_true(fds[i] >= 0);
        assert_true(mt_send_all(fds[i], "GET /metrics HTTP/1.1\r\n", 23));
    }
    extra = mt_connect(f->port);
    assert_true(extra >= 0);
    assert_true(closed_by_server(extra));
    close(extra);
    assert_true(scrape_value(f->m, "kq_http_connections_shed_total{reason=\"limit\"} ") >= 1);
    /* MT_WAIT_S (recv timeout) is longer than the head timeout */
    for (int i = 0; i < KQ_HTTP_MAX_CONNECTIONS; i++) {
        if (!closed_by_server(fds[i]))
            fail_msg("slow connection %d still open after %d s", i, MT_WAIT_S);
        close(fds[i]);
    }
    assert_int_equal(scrape_value(f->m, "kq_http_connections_shed_total{reason=\"timeout\"} "),
                     KQ_HTTP_MAX_CONNECTIONS - 1);
    assert_int_equal(mt_request(f->port, "GET", "/healthz", &r), 0);
    assert_int_equal(r.status, 200);
    mt_resp_free(&r);
}

/* Heads that could smuggle a second request: two Content-Lengths, a body, or a name with a
 * blank before its colon get 400 and a close; a lax LF LF head followed by a CRLF one is two
 * requests, each answered on its own. */
static void test_ambiguous_heads(void **state)
{
    fixture *f = *state;
    static const char *bad[] = {
        "GET /metrics HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\nhello",
        "GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
        "GET /metrics HTTP/1.1\r\nContent-Length : 5\r\n\r\nhello",
        "GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    };
    char buf[4096];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int fd = mt_connect(f->port);
        ssize_t n;

        assert_true(fd >= 0 && mt_send_all(fd, bad[i], strlen(bad[i])));
        n = recv(fd, buf, sizeof buf - 1, 0);
        assert_true(n > 0);
        buf[n] = '\0';
        if (strncmp(buf, "HTTP/1.1 400 ", 13) != 0)
            fail_msg("head %zu answered: %.40s", i, buf);
        close(fd);
    }
    {
        const char *two =
            "GET /healthz HTTP/1.1\n\nGET /nope HTTP/1.1\r\nConnection: close\r\n\r\n";
        int fd = mt_connect(f->port);
        size_t got = 0;
        ssize_t n;

        assert_true(fd >= 0 && mt_send_all(fd, two, strlen(two)));
        while ((n = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0)
            got += (size_t)n;
        buf[got] = '\0';
        assert_non_null(strstr(buf, "HTTP/1.1 200 OK"));
        assert_non_null(strstr(buf, "HTTP/1.1 404 Not Found"));
        close(fd);
    }
}

/* A head longer than KQ_HTTP_HEAD_MAX gets 431 and the connection closes. */
static void test_oversized_head(void **state)
{
    fixture *f = *state;
    char *big = malloc(KQ_HTTP_HEAD_MAX + 64);
    char buf[256] = "";
    int fd = mt_connect(f->port);
    size_t n;

    assert_true(big != NULL && fd >= 0);
    n = (size_t)snprintf(big, 64, "GET /metrics HTTP/1.1\r\nX-Pad: ");
    memset(big + n, 'a', KQ_HTTP_HEAD_MAX);
    assert_true(mt_send_all(fd, big, n + KQ_HTTP_HEAD_MAX));
    assert_true(recv(fd, buf, sizeof buf - 1, 0) > 0);
    assert_non_null(strstr(buf, "HTTP/1.1 431 "));
    assert_true(closed_by_server(fd));
    close(fd);
    free(big);
}

static void test_bind_errors(void **state)
{
    kq_metrics *m = kq_metrics_new();
    kq_http *h = NULL, *h2 = NULL;
    char errbuf[256], want[64];
    int port = 0, busy, rc;

    assert_non_null(m);
    /* a port taken by another socket */
    busy = mt_listen_any(&port);
    assert_true(busy >= 0);
    rc = kq_http_start("127.0.0.1", port, m, NULL, NULL, &h, errbuf, sizeof(errbuf));
    assert_int_equal(rc, KQ_ERR_IO);
    assert_null(h);
    printf("busy port error: %s\n", errbuf);
    snprintf(want, sizeof(want), "127.0.0.1:%d", port);
    if (strstr(errbuf, want) == NULL || strstr(errbuf, "in use") == NULL)
        fail_msg("error \"%s\" should name %s and say the address is in use", errbuf, want);
    close(busy);

    /* a port already served by this process */
    assert_int_equal(kq_http_start("127.0.0.1", 0, m, NULL, NULL, &h, errbuf, sizeof(errbuf)), 0);
    port = kq_http_port(h);
    rc = kq_http_start("127.0.0.1", port, m, NULL, NULL, &h2, errbuf, sizeof(errbuf));
    assert_int_equal(rc, KQ_ERR_IO);
    assert_null(h2);
    snprintf(want, sizeof(want), "127.0.0.1:%d", port);
    if (strstr(errbuf, want) == NULL)
        fail_msg("error \"%s\" should name %s", errbuf, want);
    /* the first server is unharmed */
    {
        mt_resp r;
        assert_int_equal(mt_request(port, "GET", "/healthz", &r), 0);
        assert_int_equal(r.status, 200);
        mt_resp_free(&r);
    }
    kq_http_stop(h);

    /* bad arguments */
    assert_int_equal(kq_http_start("127.0.0.1", -1, m, NULL, NULL, &h, errbuf, sizeof(errbuf)),
                     KQ_ERR_CONFIG);
    assert_non_null(strstr(errbuf, "bad port -1"));
    assert_int_equal(kq_http_start("127.0.0.1", 65536, m, NULL, NULL, &h, errbuf, sizeof(errbuf)),
                     KQ_ERR_CONFIG);
    assert_non_null(strstr(errbuf, "bad port 65536"));
    assert_int_equal(kq_http_start("bad host/x", 0, m, NULL, NULL, &h, errbuf, sizeof(errbuf)),
                     KQ_ERR_CONFIG);
    assert_non_null(strstr(errbuf, "bad host \"bad host/x\""));
    assert_int_equal(kq_http_start("", 0, m, NULL, NULL, &h, errbuf, sizeof(errbuf)),
                     KQ_ERR_CONFIG);
    assert_int_not_equal(
        kq_http_start("127.0.0.1", 0, NULL, NULL, NULL, &h, errbuf, sizeof(errbuf)), 0);
    /* an address this host does not have */
    rc = kq_http_start("192.0.2.1", 0, m, NULL, NULL, &h, errbuf, sizeof(errbuf));
    assert_int_equal(rc, KQ_ERR_IO);
    printf("foreign address error: %s\n", errbuf);
    assert_non_null(strstr(errbuf, "192.0.2.1:0"));
    assert_null(h);
    kq_metrics_free(m);
}

static void test_ipv6_loopback(void **state)
{
    kq_metrics *m = kq_metrics_new();
    kq_http *h = NULL;
    char errbuf[256];
    int rc;

    assert_non_null(m);
    rc = kq_http_start("::1", 0, m, NULL, NULL, &h, errbuf, sizeof(errbuf));
    if (rc != 0) {
        /* no IPv6 on this machine: the error still names the bracketed address */
        assert_non_null(strstr(errbuf, "[::1]:0"));
        kq_metrics_free(m);
        skip();
    }
    assert_true(kq_http_port(h) > 0);
    kq_http_stop(h);
    kq_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_metrics_endpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_healthz, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readyz_both_states, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_path_and_method, setup, teardown),
        cmocka_unit_test_setup_teardown(test_junk_connections, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keepalive_many_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sheds_slow_and_excess_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized_head, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ambiguous_heads, setup, teardown),
        cmocka_unit_test(test_stop_with_idle_client),
        cmocka_unit_test(test_bind_errors),
        cmocka_unit_test(test_ipv6_loopback),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
