/*
 * /metrics, /healthz and /readyz over nng 1.5.2's HTTP server (reference/conventions.md 5.1).
 * See include/kq/metrics.h for the contract.
 *
 * Handlers run on nng's task threads and finish synchronously: they render into a buffer,
 * copy it into an nng_http_res and complete the aio. nng_http_server_stop closes every
 * connection and waits until they are reaped, which waits for running handler callbacks, so
 * after it returns no callback can touch the kq_http any more.
 */
#include "kq/metrics.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "kq/error.h"

#define READY_REASON_MAX 256
#define N_HANDLERS 3

struct kq_http {
    nng_http_server *srv;
    kq_metrics *metrics;
    kq_http_ready_fn ready;
    void *ready_arg;
    nng_http_handler *handlers[N_HANDLERS]; /* registered with srv */
    int port;
    bool started;
};

/* Completes aio with a response; on allocation failure completes with an error, which makes
 * nng answer 500 and close the connection. */
static void reply(nng_aio *aio, uint16_t status, const char *ctype, const void *body, size_t len)
{
    nng_http_res *res = NULL;
    int rv;

    if ((rv = nng_http_res_alloc(&res)) != 0)
        goto fail;
    if ((rv = nng_http_res_set_status(res, status)) != 0 ||
        (rv = nng_http_res_set_header(res, "Content-Type", ctype)) != 0 ||
        (rv = nng_http_res_set_header(res, "Cache-Control", "no-store")) != 0 ||
        (rv = nng_http_res_copy_data(res, body, len)) != 0)
        goto fail;
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
    return;
fail:
    if (res != NULL)
        nng_http_res_free(res);
    nng_aio_finish(aio, rv);
}

static void reply_text(nng_aio *aio, uint16_t status, const char *text)
{
    reply(aio, status, "text/plain; charset=utf-8", text, strlen(text));
}

static void serve_readyz(kq_http *h, nng_aio *aio)
{
    char reason[READY_REASON_MAX] = "";
    char body[READY_REASON_MAX + 32];

    if (h->ready == NULL || h->ready(h->ready_arg, reason, sizeof(reason)) != 0) {
        reply_text(aio, 200, "ready\n");
        return;
    }
    reason[sizeof(reason) - 1] = '\0';
    /* keep it to one line */
    for (char *p = reason; *p != '\0'; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    snprintf(body, sizeof(body), "not ready: %s\n", reason[0] ? reason : "unknown reason");
    reply_text(aio, 503, body);
}

static kq_http *server_of(nng_aio *aio)
{
    return nng_http_handler_get_data(nng_aio_get_input(aio, 1));
}

static void metrics_cb(nng_aio *aio)
{
    kq_http *h = server_of(aio);
    char *text = NULL;
    size_t len = 0;

    if (kq_metrics_render(h->metrics, &text, &len) != 0) {
        reply_text(aio, 500, "cannot render metrics: out of memory\n");
        return;
    }
    reply(aio, 200, KQ_METRICS_CONTENT_TYPE, text, len);
    free(text);
}

static void healthz_cb(nng_aio *aio)
{
    reply_text(aio, 200, "ok\n");
}

static void readyz_cb(nng_aio *aio)
{
    serve_readyz(server_of(aio), aio);
}

static const struct {
    const char *path;
    void (*cb)(nng_aio *);
} endpoints[N_HANDLERS] = {
    {"/metrics", metrics_cb},
    {"/healthz", healthz_cb},
    {"/readyz", readyz_cb},
};

static void fmt_addr(char *buf, size_t n, const char *host, int port)
{
    if (strchr(host, ':') != NULL)
        snprintf(buf, n, "[%s]:%d", host, port);
    else
        snprintf(buf, n, "%s:%d", host, port);
}

static bool host_ok(const char *host)
{
    if (host[0] == '\0' || strlen(host) > 253)
        return false;
    for (const char *p = host; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '-' || c == ':' || c == '_' || c == '%';
        if (!ok)
            return false;
    }
    return true;
}

/* Stops serving (waits for running callbacks), unregisters and frees our handlers (the
 * server may be shared with another holder in this process), drops our hold, frees h. */
static void http_free(kq_http *h)
{
    if (h->started)
        nng_http_server_stop(h->srv);
    for (int i = 0; i < N_HANDLERS; i++) {
        if (h->handlers[i] != NULL && nng_http_server_del_handler(h->srv, h->handlers[i]) == 0)
            nng_http_handler_free(h->handlers[i]);
    }
    if (h->srv != NULL)
        nng_http_server_release(h->srv);
    free(h);
}

int kq_http_start(const char *host, int port, kq_metrics *m, kq_http_ready_fn ready, void *arg,
                  kq_http **out, char *errbuf, size_t errlen)
{
    char addr[300], url[320];
    nng_url *u = NULL;
    nng_http_handler *hd = NULL;
    nng_sockaddr sa;
    kq_http *h = NULL;
    int rv, rc = KQ_ERR_IO;

    if (errlen > 0)
        errbuf[0] = '\0';
    if (out != NULL)
        *out = NULL;
    if (host == NULL)
        host = "0.0.0.0";
    if (out == NULL || m == NULL) {
        snprintf(errbuf, errlen, "metrics HTTP server: no registry or output pointer");
        return KQ_ERR_INTERNAL;
    }
    if (!host_ok(host)) {
        snprintf(errbuf, errlen, "metrics HTTP server: bad host \"%.100s\"", host);
        return KQ_ERR_CONFIG;
    }
    if (port < 0 || port > 65535) {
        snprintf(errbuf, errlen, "metrics HTTP server: bad port %d (expected 0..65535)", port);
        return KQ_ERR_CONFIG;
    }
    fmt_addr(addr, sizeof(addr), host, port);
    snprintf(url, sizeof(url), "http://%s", addr);

    h = calloc(1, sizeof(*h));
    if (h == NULL) {
        rc = KQ_ERR_NOMEM;
        snprintf(errbuf, errlen, "metrics HTTP server on %s: out of memory", addr);
        goto out;
    }
    h->metrics = m;
    h->ready = ready;
    h->ready_arg = arg;
    h->port = port;

    if ((rv = nng_url_parse(&u, url)) != 0) {
        rc = KQ_ERR_CONFIG;
        snprintf(errbuf, errlen, "metrics HTTP server: bad address %s: %s", addr, nng_strerror(rv));
        goto out;
    }
    if ((rv = nng_http_server_hold(&h->srv, u)) != 0) {
        snprintf(errbuf, errlen, "cannot serve metrics on %s: %s", addr, nng_strerror(rv));
        goto out;
    }
    for (int i = 0; i < N_HANDLERS; i++) {
        if ((rv = nng_http_handler_alloc(&hd, endpoints[i].path, endpoints[i].cb)) != 0 ||
            (rv = nng_http_handler_set_method(hd, "GET")) != 0 ||
            (rv = nng_http_handler_collect_body(hd, true, 0)) != 0 ||
            (rv = nng_http_handler_set_data(hd, h, NULL)) != 0 ||
            (rv = nng_http_server_add_handler(h->srv, hd)) != 0) {
            /* NNG_EADDRINUSE here: another server in this process already serves the path
             * on this address */
            snprintf(errbuf, errlen, "cannot serve metrics on %s: %s", addr, nng_strerror(rv));
            goto out;
        }
        h->handlers[i] = hd;
        hd = NULL;
    }
    if ((rv = nng_http_server_start(h->srv)) != 0) {
        snprintf(errbuf, errlen, "cannot listen for HTTP (metrics) on %s: %s", addr,
                 nng_strerror(rv));
        goto out;
    }
    h->started = true;
    if (port == 0 && nng_http_server_get_addr(h->srv, &sa) == 0) {
        if (sa.s_family == NNG_AF_INET)
            h->port = ntohs(sa.s_in.sa_port);
        else if (sa.s_family == NNG_AF_INET6)
            h->port = ntohs(sa.s_in6.sa_port);
    }
    *out = h;
    h = NULL;
    rc = 0;
out:
    if (hd != NULL)
        nng_http_handler_free(hd);
    if (h != NULL)
        http_free(h);
    if (u != NULL)
        nng_url_free(u);
    return rc;
}

int kq_http_port(const kq_http *h)
{
    return h ? h->port : -1;
}

void kq_http_stop(kq_http *h)
{
    if (h != NULL)
        http_free(h);
}
