/*
 * /metrics, /healthz and /readyz: a small HTTP/1.1 server on nng 1.5.2's byte streams (the
 * same listener API takes tls+tcp:// URLs). See include/kq/metrics.h for the contract.
 *
 * nng's own HTTP server has no header timeout and no connection cap (1,500 slowloris
 * connections were all held open), so this one keeps a fixed table of KQ_HTTP_MAX_CONNECTIONS
 * slots, each with its own aio: a connection past the table is closed at once; a request
 * head must arrive whole within KQ_HTTP_HEAD_TIMEOUT_MS of when the server starts waiting
 * for it (the connection opening, or the previous answer sent), or the connection is closed
 * (counted, unless it is a kept-alive connection with nothing of a next request: that is
 * just idle); an answer must be taken within the same time; a head over KQ_HTTP_HEAD_MAX
 * bytes gets 431. Keep-alive and pipelined requests work (GET,
 * and HEAD like GET without the body); request bodies are refused (400), so a connection
 * never gets out of step.
 *
 * Threads: callbacks run on nng's task threads; each slot's aio touches only its slot, the
 * accept aio only hands free slots out, under h->mu. kq_http_stop stops the accept aio, then
 * every slot's aio (nng_aio_stop waits for a running callback), and only then frees.
 */
#include "kq/metrics.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "kq/error.h"
#include "kq/log.h"

#define READY_REASON_MAX 256
#define ACCEPT_RETRY_MS 100 /* after a failed accept (e.g. out of file descriptors) */
#define SHED_LOG_INTERVAL_MS 1000

typedef enum { SLOT_FREE = 0, SLOT_READ, SLOT_WRITE } slot_state;

typedef struct http_slot {
    kq_http *h;
    nng_aio *aio;
    bool in_use;      /* under h->mu: handed out by accept_cb, given back by slot_finish */
    nng_stream *s;    /* owned while the slot is in use */
    slot_state state; /* the slot's own: its callback's, and accept_cb's before it starts */
    bool answered;    /* at least one answer sent on this connection */
    char in[KQ_HTTP_HEAD_MAX];
    size_t in_len;
    char *out; /* the answer being sent (malloc'd) */
    size_t out_len, out_sent;
    bool close_after;
    bool head_only;       /* a HEAD request: send the answer's head, not its body */
    uint64_t deadline_ms; /* for the request head being read */
} http_slot;

struct kq_http {
    nng_stream_listener *l;
    nng_aio *accept_aio;
    bool accept_sleeping; /* accept_aio is in nng_sleep_aio after a failed accept */
    kq_metrics *metrics;
    kq_http_ready_fn ready;
    void *ready_arg;
    kq_metric *shed_limit, *shed_timeout;
    pthread_mutex_t mu;
    bool closing;
    uint64_t last_shed_log_ms;
    int port;
    char addr[300];
    http_slot slots[KQ_HTTP_MAX_CONNECTIONS];
};

static uint64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool closing(kq_http *h)
{
    bool c;

    pthread_mutex_lock(&h->mu);
    c = h->closing;
    pthread_mutex_unlock(&h->mu);
    return c;
}

/* A connection shed (limit or timeout): counted, and logged at most once a second. */
static void shed(kq_http *h, kq_metric *counter, const char *why)
{
    bool log_it;
    uint64_t now = mono_ms();

    kq_metric_inc(counter);
    pthread_mutex_lock(&h->mu);
    log_it = now - h->last_shed_log_ms >= SHED_LOG_INTERVAL_MS;
    if (log_it)
        h->last_shed_log_ms = now;
    pthread_mutex_unlock(&h->mu);
    if (log_it)
        KQ_WARN("http", "closed a metrics connection", "listener=%s reason=\"%s\"", h->addr, why);
}

/* Closes the slot's connection and frees the slot (its own callback, or stop). The stream
 * and the answer are taken under h->mu, so a second call (a callback nng still ran for a
 * stopped aio, and stop itself) finds nothing left to close. */
static void slot_finish(http_slot *c)
{
    kq_http *h = c->h;

    pthread_mutex_lock(&h->mu);
    nng_stream *s = c->s;
    char *out = c->out;
    c->s = NULL;
    c->out = NULL;
    pthread_mutex_unlock(&h->mu);
    if (s != NULL) {
        nng_stream_close(s);
        nng_stream_free(s);
    }
    free(out);
    pthread_mutex_lock(&h->mu);
    c->out_len = c->out_sent = c->in_len = 0;
    c->close_after = false;
    c->answered = false;
    c->state = SLOT_FREE;
    c->in_use = false;
    pthread_mutex_unlock(&h->mu);
}

/* ---- answers ------------------------------------------------------------------------------ */

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    default:
        return "HTTP Version Not Supported";
    }
}

/* Builds the whole answer into c->out; false when out of memory. */
static bool answer(http_slot *c, int status, const char *ctype, const char *body, size_t len)
{
    char head[320];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n%s%s\r\n",
                     status, reason_phrase(status), ctype, len,
                     status == 405 ? "Allow: GET, HEAD\r\n" : "",
                     c->close_after ? "Connection: close\r\n" : "");

    c->out = malloc((size_t)n + len);
    if (c->out == NULL)
        return false;
    memcpy(c->out, head, (size_t)n);
    memcpy(c->out + n, body, len);
    c->out_len = (size_t)n + (c->head_only ? 0 : len);
    c->out_sent = 0;
    return true;
}

static bool answer_text(http_slot *c, int status, const char *text)
{
    return answer(c, status, "text/plain; charset=utf-8", text, strlen(text));
}

static bool answer_readyz(http_slot *c)
{
    kq_http *h = c->h;
    char reason[READY_REASON_MAX] = "";
    char body[READY_REASON_MAX + 32];

    if (h->ready == NULL || h->ready(h->ready_arg, reason, sizeof(reason)) != 0)
        return answer_text(c, 200, "ready\n");
    reason[sizeof(reason) - 1] = '\0';
    for (char *p = reason; *p != '\0'; p++) /* keep it to one line */
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    snprintf(body, sizeof(body), "not ready: %s\n", reason[0] ? reason : "unknown reason");
    return answer_text(c, 503, body);
}

static bool answer_metrics(http_slot *c)
{
    char *text = NULL;
    size_t len = 0;
    bool ok;

    if (kq_metrics_render(c->h->metrics, &text, &len) != 0)
        return answer_text(c, 500, "cannot render metrics: out of memory\n");
    ok = answer(c, 200, KQ_METRICS_CONTENT_TYPE, text, len);
    free(text);
    return ok;
}

/* How many times the head (NUL-terminated, lines ending in \n) carries header `name`
 * (case-insensitive; a name followed by blanks before its colon counts too, so that it cannot
 * slip past the checks). Copies the first value (trimmed) into val. */
static int header(const char *head, const char *name, char *val, size_t vlen)
{
    size_t nlen = strlen(name);
    int n = 0;

    for (const char *line = strchr(head, '\n'); line != NULL; line = strchr(line, '\n')) {
        const char *v, *end;

        line++;
        if (strncasecmp(line, name, nlen) != 0)
            continue;
        v = line + nlen;
        while (*v == ' ' || *v == '\t')
            v++;
        if (*v++ != ':' || n++ > 0)
            continue;
        while (*v == ' ' || *v == '\t')
            v++;
        end = v + strcspn(v, "\r\n");
        while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        snprintf(val, vlen, "%.*s", (int)(end - v), v);
    }
    return n;
}

/* Answers the request head in head (NUL-terminated); false when out of memory. */
static bool serve(http_slot *c, const char *head)
{
    char method[16], target[256], version[16], val[64];
    size_t mlen = strcspn(head, " \r\n"), tlen, vlen;
    int n_length;
    const char *t = head + mlen + 1, *v;
    char *q;

    tlen = head[mlen] == ' ' ? strcspn(t, " \r\n") : 0;
    v = t + tlen + 1;
    vlen = tlen > 0 && t[tlen] == ' ' ? strcspn(v, " \r\n") : 0;
    if (mlen == 0 || mlen >= sizeof method || tlen == 0 || vlen == 0 || vlen >= sizeof version) {
        c->close_after = true;
        return answer_text(c, 400, "bad request line\n");
    }
    snprintf(method, sizeof method, "%.*s", (int)mlen, head);
    c->head_only = strcmp(method, "HEAD") == 0; /* no body on any answer to it */
    /* a target longer than any path served is simply not found */
    snprintf(target, sizeof target, "%.*s", (int)(tlen < sizeof target ? tlen : 0), t);
    snprintf(version, sizeof version, "%.*s", (int)vlen, v);
    if (strcmp(version, "HTTP/1.1") != 0 && strcmp(version, "HTTP/1.0") != 0) {
        c->close_after = true;
        return answer_text(c, 505, "HTTP/1.0 or HTTP/1.1 only\n");
    }
    if (strcmp(version, "HTTP/1.0") == 0 ||
        (header(head, "Connection", val, sizeof val) > 0 && strcasecmp(val, "close") == 0))
        c->close_after = true;
    n_length = header(head, "Content-Length", val, sizeof val);
    if (n_length > 1 || (n_length == 1 && strcmp(val, "0") != 0) ||
        header(head, "Transfer-Encoding", val, sizeof val) > 0) {
        c->close_after = true;
        return answer_text(c, 400, "requests with a body are not served here\n");
    }
    if ((q = strchr(target, '?')) != NULL)
        *q = '\0';
    if (strcmp(target, "/metrics") != 0 && strcmp(target, "/healthz") != 0 &&
        strcmp(target, "/readyz") != 0)
        return answer_text(c, 404, "not found (try /metrics, /healthz or /readyz)\n");
    if (strcmp(method, "GET") != 0 && !c->head_only)
        return answer_text(c, 405, "GET or HEAD only\n");
    if (strcmp(target, "/metrics") == 0)
        return answer_metrics(c);
    if (strcmp(target, "/healthz") == 0)
        return answer_text(c, 200, "ok\n");
    return answer_readyz(c);
}

/* ---- the connection state machine ---------------------------------------------------------- */

static void start_send(http_slot *c)
{
    nng_iov iov = {.iov_buf = c->out + c->out_sent, .iov_len = c->out_len - c->out_sent};

    uint64_t now = mono_ms();

    if (c->state != SLOT_WRITE) /* the whole answer gets one deadline */
        c->deadline_ms = now + KQ_HTTP_HEAD_TIMEOUT_MS;
    c->state = SLOT_WRITE;
    nng_aio_set_iov(c->aio, 1, &iov);
    nng_aio_set_timeout(c->aio, c->deadline_ms > now ? (nng_duration)(c->deadline_ms - now) : 1);
    nng_stream_send(c->s, c->aio);
}

/* The end of the first complete head in s (a blank line: CRLF CRLF, or LF LF from lax
 * clients, whichever comes first), with *head_len its length up to and with the blank line. */
static char *first_head_end(char *s, size_t *head_len)
{
    char *crlf = strstr(s, "\r\n\r\n"), *lf = strstr(s, "\n\n");

    if (lf != NULL && (crlf == NULL || lf < crlf)) {
        *head_len = (size_t)(lf - s) + 2;
        return lf;
    }
    if (crlf != NULL)
        *head_len = (size_t)(crlf - s) + 4;
    return crlf;
}

/* Answers the next complete head in c->in, or reads more of it; false: finish the slot. */
static bool advance(http_slot *c)
{
    char *end;
    size_t head_len;
    uint64_t now;
    nng_iov iov;

    c->in[c->in_len] = '\0'; /* in_len < sizeof c->in: reads leave room for it */
    end = first_head_end(c->in, &head_len);
    if (end != NULL) {
        end[head_len - (size_t)(end - c->in) == 4 ? 2 : 1] = '\0'; /* keep the last line end */
        c->head_only = false;
        if (!serve(c, c->in))
            return false;
        memmove(c->in, c->in + head_len, c->in_len - head_len);
        c->in_len -= head_len;
        start_send(c);
        return true;
    }
    if (memchr(c->in, '\0', c->in_len) != NULL) {
        c->close_after = true;
        if (!answer_text(c, 400, "NUL byte in the request head\n"))
            return false;
        c->in_len = 0;
        start_send(c);
        return true;
    }
    if (c->in_len >= sizeof c->in - 1) {
        c->close_after = true;
        if (!answer_text(c, 431, "request head over 8 KiB\n"))
            return false;
        c->in_len = 0;
        start_send(c);
        return true;
    }
    now = mono_ms();
    if (now >= c->deadline_ms) {
        if (!(c->answered && c->in_len == 0)) /* an idle kept-alive connection is no attack */
            shed(c->h, c->h->shed_timeout, "request head not received in time");
        return false;
    }
    c->state = SLOT_READ;
    iov.iov_buf = c->in + c->in_len;
    iov.iov_len = sizeof c->in - 1 - c->in_len;
    nng_aio_set_iov(c->aio, 1, &iov);
    nng_aio_set_timeout(c->aio, (nng_duration)(c->deadline_ms - now));
    nng_stream_recv(c->s, c->aio);
    return true;
}

static void slot_cb(void *arg)
{
    http_slot *c = arg;
    int rv = nng_aio_result(c->aio);

    /* Stopping: never touch the stream now. http_free may be cancelling an operation on it
     * (nng's stop runs the transport's cancel on the connection, which must stay alive until
     * the stop returns); it finishes the slot once every aio has stopped. */
    if (closing(c->h))
        return;
    if (rv != 0) {
        /* counted before the peer can see the close; an idle kept-alive connection (answered,
         * nothing of a next request yet) is closed quietly */
        if (rv == NNG_ETIMEDOUT && !(c->state == SLOT_READ && c->answered && c->in_len == 0))
            shed(c->h, c->h->shed_timeout,
                 c->state == SLOT_READ ? "request head not received in time"
                                       : "answer not taken in time");
        slot_finish(c);
        return;
    }
    if (c->state == SLOT_READ) {
        c->in_len += nng_aio_count(c->aio);
    } else {
        c->out_sent += nng_aio_count(c->aio);
        if (c->out_sent < c->out_len) {
            start_send(c);
            return;
        }
        free(c->out);
        c->out = NULL;
        c->answered = true;
        c->state = SLOT_READ;
        if (c->close_after) {
            slot_finish(c);
            return;
        }
        c->deadline_ms = mono_ms() + KQ_HTTP_HEAD_TIMEOUT_MS;
    }
    if (!advance(c))
        slot_finish(c);
}

static void accept_cb(void *arg)
{
    kq_http *h = arg;
    int rv = nng_aio_result(h->accept_aio);
    nng_stream *s;
    http_slot *c = NULL;

    if (closing(h)) {
        if (rv == 0 && !h->accept_sleeping) { /* accepted as the listener closed */
            s = nng_aio_get_output(h->accept_aio, 0);
            nng_stream_close(s);
            nng_stream_free(s);
        }
        return;
    }
    if (h->accept_sleeping) {
        h->accept_sleeping = false;
        nng_stream_listener_accept(h->l, h->accept_aio);
        return;
    }
    if (rv != 0) {
        /* e.g. out of file descriptors: try again a little later instead of spinning */
        h->accept_sleeping = true;
        nng_sleep_aio(ACCEPT_RETRY_MS, h->accept_aio);
        return;
    }
    s = nng_aio_get_output(h->accept_aio, 0);
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < KQ_HTTP_MAX_CONNECTIONS && c == NULL; i++)
        if (!h->slots[i].in_use)
            c = &h->slots[i];
    if (c != NULL) {
        c->in_use = true;
        c->s = s;
        c->state = SLOT_READ;
    }
    pthread_mutex_unlock(&h->mu);
    if (c == NULL) {
        shed(h, h->shed_limit, "connection limit reached");
        nng_stream_close(s);
        nng_stream_free(s);
    } else {
        c->deadline_ms = mono_ms() + KQ_HTTP_HEAD_TIMEOUT_MS;
        if (!advance(c))
            slot_finish(c);
    }
    nng_stream_listener_accept(h->l, h->accept_aio);
}

/* ---- start and stop --------------------------------------------------------------------- */

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

/* Stops accepting, stops every slot (waiting for running callbacks), frees h. */
static void http_free(kq_http *h)
{
    pthread_mutex_lock(&h->mu);
    h->closing = true;
    pthread_mutex_unlock(&h->mu);
    if (h->l != NULL)
        nng_stream_listener_close(h->l);
    if (h->accept_aio != NULL)
        nng_aio_stop(h->accept_aio);
    /* Three passes: no stream is closed or freed while any aio may still be stopping on it. */
    for (int i = 0; i < KQ_HTTP_MAX_CONNECTIONS; i++)
        if (h->slots[i].aio != NULL)
            nng_aio_stop(h->slots[i].aio);
    for (int i = 0; i < KQ_HTTP_MAX_CONNECTIONS; i++) {
        http_slot *c = &h->slots[i];
        pthread_mutex_lock(&h->mu);
        bool in_use = c->in_use;
        pthread_mutex_unlock(&h->mu);
        if (in_use) /* its callback returned early (closing) or never ran */
            slot_finish(c);
    }
    for (int i = 0; i < KQ_HTTP_MAX_CONNECTIONS; i++)
        if (h->slots[i].aio != NULL)
            nng_aio_free(h->slots[i].aio);
    if (h->accept_aio != NULL)
        nng_aio_free(h->accept_aio);
    if (h->l != NULL)
        nng_stream_listener_free(h->l);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

int kq_http_start(const char *host, int port, kq_metrics *m, kq_http_ready_fn ready, void *arg,
                  kq_http **out, char *errbuf, size_t errlen)
{
    return kq_http_start_tls(host, port, NULL, m, ready, arg, out, errbuf, errlen);
}

int kq_http_set_tls(kq_http *h, nng_tls_config *tls)
{
    return nng_stream_listener_set_ptr(h->l, NNG_OPT_TLS_CONFIG, tls);
}

int kq_http_start_tls(const char *host, int port, nng_tls_config *tls, kq_metrics *m,
                      kq_http_ready_fn ready, void *arg, kq_http **out, char *errbuf, size_t errlen)
{
    char url[320];
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
    h = calloc(1, sizeof(*h));
    if (h == NULL || pthread_mutex_init(&h->mu, NULL) != 0) {
        free(h);
        snprintf(errbuf, errlen, "metrics HTTP server on %s:%d: out of memory", host, port);
        return KQ_ERR_NOMEM;
    }
    fmt_addr(h->addr, sizeof(h->addr), host, port);
    snprintf(url, sizeof(url), "%s%s", tls ? "tls+tcp://" : "tcp://", h->addr);
    h->metrics = m;
    h->ready = ready;
    h->ready_arg = arg;
    h->port = port;
    h->shed_limit = kq_metrics_counter(m, "kq_http_connections_shed_total",
                                       "Metrics-listener connections closed by the server: at "
                                       "the connection limit, or too slow to send a request",
                                       "reason=\"limit\"");
    h->shed_timeout = kq_metrics_counter(m, "kq_http_connections_shed_total",
                                         "Metrics-listener connections closed by the server: at "
                                         "the connection limit, or too slow to send a request",
                                         "reason=\"timeout\"");
    if (h->shed_limit == NULL || h->shed_timeout == NULL) {
        rc = KQ_ERR_NOMEM;
        snprintf(errbuf, errlen, "metrics HTTP server on %s: out of memory", h->addr);
        goto out;
    }
    if ((rv = nng_aio_alloc(&h->accept_aio, accept_cb, h)) != 0)
        goto nng_fail;
    for (int i = 0; i < KQ_HTTP_MAX_CONNECTIONS; i++) {
        h->slots[i].h = h;
        if ((rv = nng_aio_alloc(&h->slots[i].aio, slot_cb, &h->slots[i])) != 0)
            goto nng_fail;
    }
    if ((rv = nng_stream_listener_alloc(&h->l, url)) != 0) {
        rc = KQ_ERR_CONFIG;
        snprintf(errbuf, errlen, "metrics HTTP server: bad address %s: %s", h->addr,
                 nng_strerror(rv));
        goto out;
    }
    if (tls && (rv = kq_http_set_tls(h, tls)) != 0) {
        snprintf(errbuf, errlen, "metrics HTTPS server on %s: cannot set its TLS config: %s",
                 h->addr, nng_strerror(rv));
        goto out;
    }
    if ((rv = nng_stream_listener_listen(h->l)) != 0) {
        snprintf(errbuf, errlen, "cannot listen for HTTP (metrics) on %s: %s", h->addr,
                 nng_strerror(rv));
        goto out;
    }
    if (port == 0 && nng_stream_listener_get_addr(h->l, NNG_OPT_LOCADDR, &sa) == 0) {
        if (sa.s_family == NNG_AF_INET)
            h->port = ntohs(sa.s_in.sa_port);
        else if (sa.s_family == NNG_AF_INET6)
            h->port = ntohs(sa.s_in6.sa_port);
        fmt_addr(h->addr, sizeof(h->addr), host, h->port);
    }
    nng_stream_listener_accept(h->l, h->accept_aio);
    *out = h;
    return 0;
nng_fail:
    snprintf(errbuf, errlen, "metrics HTTP server on %s: %s", h->addr, nng_strerror(rv));
out:
    http_free(h);
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
