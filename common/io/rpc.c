/*
 * kq_rpc: request/response transport over nng 1.5.2 REQ/REP (see include/kq/rpc.h).
 *
 * Server: a REP socket with a fixed pool of contexts. Each context slot *is* the kq_rpc_req
 * handed to the application, and runs RECV -> WAIT (application owns it) -> SEND -> RECV.
 * The server carries a reference count: one for the owner (dropped by kq_rpc_server_stop) and
 * one per request in WAIT, so replies that arrive after stop find live memory and are simply
 * released. Stop never holds the lock while it closes the socket or stops aios. Every call
 * into nng_ctx_* (from reply/drop or from a callback re-arming) is counted in "entering", and
 * stop/close wait for those to finish before nng_close: nng 1.5.2 does not survive nng_ctx_*
 * racing nng_close (observed as a panic on a destroyed lock).
 *
 * Client: a REQ socket dialed non-blocking, resend disabled. Every call borrows a slot (REQ
 * context + aio) from a pool, sends with the call's timeout and receives with whatever remains
 * of it. Slots go back to the pool after the callback returned; close waits for threads inside
 * nng_ctx_*, fails every pending operation by closing the socket, waits until no call is
 * outstanding, then frees the pool.
 */
#include "kq/rpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "kq/error.h"
#include "kq/log.h"
#include "kq/tls.h"

/* ------------------------------------------------------------------------------------------ */
/* helpers */

static uint64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static nng_duration clamp_ms(uint64_t ms)
{
    return ms > (uint64_t)INT32_MAX ? (nng_duration)INT32_MAX : (nng_duration)ms;
}

/* nng 1.5.2 can wedge inside nng_close: when a TCP pipe is closed while a receive on it is
 * completing, the pipe's receive never finishes and nng's single reaper thread waits for it
 * forever (fixed upstream after 1.5.2: nanomsg/nng#1636, commit a1bc737b). nng destroys every
 * context before it waits for pipes, so by then all of our aios have completed. We therefore
 * close on a helper thread and stop waiting after CLOSE_WAIT_MS: shutdown goes on, the socket
 * is leaked and an error is logged, instead of the process hanging. */
#define CLOSE_WAIT_MS 10000

struct closer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    nng_socket sock;
    bool done;
    int refs; /* the waiter and the helper thread */
};

static void closer_unref(struct closer *cl)
{
    bool last;

    pthread_mutex_lock(&cl->mu);
    last = (--cl->refs == 0);
    pthread_mutex_unlock(&cl->mu);
    if (last) {
        pthread_cond_destroy(&cl->cv);
        pthread_mutex_destroy(&cl->mu);
        free(cl);
    }
}

static void *closer_main(void *p)
{
    struct closer *cl = p;

    nng_close(cl->sock);
    pthread_mutex_lock(&cl->mu);
    cl->done = true;
    pthread_cond_broadcast(&cl->cv);
    pthread_mutex_unlock(&cl->mu);
    closer_unref(cl);
    return NULL;
}

/* Returns false if the close was abandoned (nng may still run callbacks for the socket). */
static bool close_socket_bounded(nng_socket sock, const char *what, const char *url)
{
    struct closer *cl = calloc(1, sizeof(*cl));
    pthread_condattr_t ca;
    pthread_attr_t ta;
    pthread_t th;
    struct timespec dl;
    bool done;

    if (cl == NULL)
        goto direct;
    if (pthread_mutex_init(&cl->mu, NULL) != 0) {
        free(cl);
        goto direct;
    }
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_cond_init(&cl->cv, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        pthread_mutex_destroy(&cl->mu);
        free(cl);
        goto direct;
    }
    pthread_condattr_destroy(&ca);
    cl->sock = sock;
    cl->refs = 2;
    pthread_attr_init(&ta);
    pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &ta, closer_main, cl) != 0) {
        pthread_attr_destroy(&ta);
        pthread_cond_destroy(&cl->cv);
        pthread_mutex_destroy(&cl->mu);
        free(cl);
        goto direct;
    }
    pthread_attr_destroy(&ta);

    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += CLOSE_WAIT_MS / 1000;
    pthread_mutex_lock(&cl->mu);
    while (!cl->done && pthread_cond_timedwait(&cl->cv, &cl->mu, &dl) != ETIMEDOUT) {
    }
    done = cl->done;
    pthread_mutex_unlock(&cl->mu);
    if (!done)
        KQ_ERROR("rpc", "socket close did not finish; abandoning it (nng 1.5.2 reaper stall)",
                 "side=%s url=%s waited_ms=%d", what, url, CLOSE_WAIT_MS);
    closer_unref(cl);
    return done;
direct:
    nng_close(sock);
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* the process's TLS identity (kq_rpc_set_tls) */

#define TLS_SCHEME "tls+tcp://"

/* The configs every tls+tcp:// listener and dialer of the process uses, and the listeners and
 * dialers to hand a new pair to. A replaced config is never freed: nng 1.5.2 reads a
 * listener's or dialer's config without a lock (when it posts an accept or starts a dial) and
 * takes its reference later, so no moment is safe; each costs a few KB per SIGHUP. */
static struct {
    pthread_mutex_t mu;
    nng_tls_config *cfg[2];   /* [0] listeners, [1] dialers */
    kq_tls_settings settings; /* the last ones set (their strings are the caller's) */
    bool have_settings;
    struct tls_endpoint {
        int side; /* 0 listener, 1 dialer */
        uint32_t id;
    } * endpoints;
    size_t n_endpoints, cap_endpoints;
    void (*on_change)(void *arg, nng_tls_config *server); /* kq_rpc_tls_on_change */
    void *on_change_arg;
} tls = {.mu = PTHREAD_MUTEX_INITIALIZER};

nng_tls_config *kq_rpc_tls_server_config(void)
{
    nng_tls_config *c;

    pthread_mutex_lock(&tls.mu);
    c = tls.cfg[0];
    pthread_mutex_unlock(&tls.mu);
    return c;
}

void kq_rpc_tls_on_change(void (*fn)(void *arg, nng_tls_config *server), void *arg)
{
    pthread_mutex_lock(&tls.mu);
    tls.on_change = fn;
    tls.on_change_arg = arg;
    pthread_mutex_unlock(&tls.mu);
}

/* What a dialer to node N requires of the server (kq_rpc_identity_setup with node identities
 * checked): its certificate's principal is node N's. Set once at start, read by pipe
 * callbacks. */
static struct {
    bool on;
    char tmpl[260];
    const kq_principal_rules *rules; /* the daemon's, for the process's life */
} node_servers;

void kq_rpc_url(char *buf, size_t cap, bool secure, const char *host, int port)
{
    snprintf(buf, cap, strchr(host, ':') ? "%s[%s]:%d" : "%s%s:%d", secure ? TLS_SCHEME : "tcp://",
             host, port);
}

/* kq_rpc_tls_metrics' gauges, and the files they were last set from. */
static struct {
    kq_metric *keystore, *truststore;
} tls_gauges;

/* Sets the expiry gauges from the files s names (a file that cannot be read leaves its gauge
 * as it was: kq_tls_config_new has just read it). */
static void tls_gauges_set(const kq_tls_settings *s)
{
    int64_t t;
    char err[512];

    if (tls_gauges.keystore && kq_tls_cert_describe(s->keystore, NULL, 0, &t, err, sizeof err) == 0)
        kq_metric_set_int(tls_gauges.keystore, t);
    if (tls_gauges.truststore && kq_tls_earliest_expiry(s->truststore, &t, err, sizeof err) == 0)
        kq_metric_set_int(tls_gauges.truststore, t);
}

static bool is_tls_url(const char *url)
{
    return strncmp(url, TLS_SCHEME, strlen(TLS_SCHEME)) == 0;
}

/* Hands the listener (side 0) or dialer (side 1) with nng id `id` the current config of its
 * side. Caller holds tls.mu. An nng error (NNG_ENOENT once it is closed). */
static int tls_set_config(int side, uint32_t id)
{
    if (side) {
        nng_dialer d = {.id = id};
        return nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, tls.cfg[1]);
    }
    nng_listener l = {.id = id};
    return nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, tls.cfg[0]);
}

int kq_rpc_set_tls(const kq_tls_settings *settings, char *errbuf, size_t errlen)
{
    nng_tls_config *fresh[2] = {NULL, NULL};
    char err[1024];

    if (kq_tls_config_new(settings, true, &fresh[0], err, sizeof err) ||
        kq_tls_config_new(settings, false, &fresh[1], err, sizeof err)) {
        if (fresh[0])
            nng_tls_config_free(fresh[0]);
        kq_errf(errbuf, errlen, "%s", err);
        return KQ_ERR_CONFIG;
    }
    pthread_mutex_lock(&tls.mu);
    tls.settings = *settings;
    tls.have_settings = true;
    tls_gauges_set(settings);
    for (int side = 0; side < 2; side++)
        tls.cfg[side] = fresh[side]; /* the old one is kept: see tls */
    /* Connections already made keep their sessions; the next ones use the new files. A closed
     * listener or dialer answers NNG_ENOENT, and is forgotten when it is closed. */
    for (size_t i = 0; i < tls.n_endpoints; i++)
        (void)tls_set_config(tls.endpoints[i].side, tls.endpoints[i].id);
    if (tls.on_change)
        tls.on_change(tls.on_change_arg, tls.cfg[0]);
    pthread_mutex_unlock(&tls.mu);
    return 0;
}

int kq_rpc_set_tls_config(const kq_ssl_config *ssl, char *errbuf, size_t errlen)
{
    kq_tls_settings s = {
        .keystore = ssl->keystore,
        .key_password = ssl->has_key_password ? ssl->key_password : NULL,
        .truststore = ssl->truststore,
        .client_auth = ssl->client_auth == 2   ? KQ_TLS_CLIENT_AUTH_REQUIRED
                       : ssl->client_auth == 1 ? KQ_TLS_CLIENT_AUTH_REQUESTED
                                               : KQ_TLS_CLIENT_AUTH_NONE,
    };

    return kq_rpc_set_tls(&s, errbuf, errlen);
}

int kq_rpc_identity_setup(bool secure, const kq_ssl_config *ssl, const kq_authorizer_config *authz,
                          const char *component, kq_principal_rules **rules, bool *check_identity,
                          char *errbuf, size_t errlen)
{
    *rules = NULL;
    *check_identity = secure && ssl->client_auth == 2;
    if (secure && kq_principal_rules_parse(ssl->mapping_rules, rules, errbuf, errlen) != 0)
        return KQ_ERR_CONFIG;
    /* Where nodes are identified, a node dialing node N also checks that N answered. */
    node_servers.on = *check_identity;
    snprintf(node_servers.tmpl, sizeof node_servers.tmpl, "%s", ssl->principal_template);
    node_servers.rules = *rules;
    if (authz->enabled && !*check_identity)
        KQ_WARN(component,
                "the authorizer is on but nodes are not identified by certificate: their own "
                "requests (Raft, registrations, heartbeats, follower fetches) need "
                "ClusterAction on the cluster (a super user, an ACL granting it, or no ACL on "
                "the cluster with allow.everyone.if.no.acl.found=true); use SSL with "
                "ssl.client.auth=required",
                "authorizer.class.name=%s", KQ_AUTHORIZER_CLASS);
    return 0;
}

void kq_rpc_reload_tls(void *ssl_config)
{
    const kq_ssl_config *ssl = ssl_config;
    char err[1024] = "";

    if (kq_rpc_set_tls_config(ssl, err, sizeof err) == 0)
        KQ_INFO("rpc", "TLS certificates re-read; new connections use them",
                "keystore=%s truststore=%s", ssl->keystore, ssl->truststore);
    else
        KQ_ERROR("rpc", "TLS certificates not re-read; the ones in use stay", "error=\"%s\"", err);
}

static void http_tls_changed(void *arg, nng_tls_config *server)
{
    int rv = kq_http_set_tls(arg, server);

    if (rv != 0)
        KQ_ERROR("rpc", "the HTTPS metrics listener keeps its old certificates", "error=\"%s\"",
                 nng_strerror(rv));
}

int kq_metrics_listener_start(const char *host, int port, bool secure, kq_metrics *m,
                              kq_http_ready_fn ready, void *arg, kq_http **out, char *errbuf,
                              size_t errlen)
{
    nng_tls_config *server = secure ? kq_rpc_tls_server_config() : NULL;
    int rc;

    if (secure && !server) {
        kq_errf(errbuf, errlen,
                "metrics.listener is https:// but no TLS settings were given "
                "(ssl.keystore.location, ssl.truststore.location)");
        return KQ_ERR_CONFIG;
    }
    rc = kq_http_start_tls(host, port, server, m, ready, arg, out, errbuf, errlen);
    if (rc == 0 && secure)
        kq_rpc_tls_on_change(http_tls_changed, *out);
    return rc;
}

int kq_rpc_tls_metrics(kq_metrics *m)
{
    static const char help[] =
        "Expiry (notAfter, Unix seconds) of this node's TLS certificate (store=keystore) and of "
        "the earliest CA certificate it trusts (store=truststore), as last loaded";
    kq_metric *k = kq_metrics_gauge_int(m, "kq_tls_certificate_expiry_timestamp_seconds", help,
                                        "store=\"keystore\"");
    kq_metric *t = kq_metrics_gauge_int(m, "kq_tls_certificate_expiry_timestamp_seconds", help,
                                        "store=\"truststore\"");

    if (!k || !t)
        return KQ_ERR_NOMEM;
    pthread_mutex_lock(&tls.mu);
    tls_gauges.keystore = k;
    tls_gauges.truststore = t;
    if (tls.have_settings)
        tls_gauges_set(&tls.settings);
    pthread_mutex_unlock(&tls.mu);
    return 0;
}

/* Gives a tls+tcp:// listener (side 0) or dialer (side 1), identified by its nng id, the
 * current config and remembers it for kq_rpc_set_tls. Caller holds tls.mu. */
static int tls_attach(int side, uint32_t id, const char *url, char *errbuf, size_t errlen)
{
    int rv;

    if (!tls.cfg[side]) {
        kq_errf(errbuf, errlen,
                "%s is a TLS address (SSL) but no TLS settings were given "
                "(ssl.keystore.location, ssl.truststore.location)",
                url);
        return KQ_ERR_CONFIG;
    }
    if (tls.n_endpoints == tls.cap_endpoints) {
        size_t bigger = tls.cap_endpoints ? 2 * tls.cap_endpoints : 8;
        void *grown = realloc(tls.endpoints, bigger * sizeof *tls.endpoints);

        if (!grown) {
            kq_errf(errbuf, errlen, "rpc %s: out of memory", url);
            return KQ_ERR_NOMEM;
        }
        tls.endpoints = grown;
        tls.cap_endpoints = bigger;
    }
    if ((rv = tls_set_config(side, id)) != 0) {
        kq_errf(errbuf, errlen, "rpc %s: cannot set its TLS config: %s", url, nng_strerror(rv));
        return KQ_ERR_IO;
    }
    tls.endpoints[tls.n_endpoints++] = (struct tls_endpoint){side, id};
    return 0;
}

/* Forgets a listener or dialer that is being closed. */
static void tls_detach(int side, uint32_t id)
{
    pthread_mutex_lock(&tls.mu);
    for (size_t i = 0; i < tls.n_endpoints; i++)
        if (tls.endpoints[i].side == side && tls.endpoints[i].id == id)
            tls.endpoints[i] = tls.endpoints[--tls.n_endpoints];
    pthread_mutex_unlock(&tls.mu);
}

/* Creates and starts the listener (side 0) or dialer (side 1) of sock for url, with the
 * process's TLS config for a tls+tcp:// URL. 0, or a kq error with errbuf set. */
static int endpoint_start(int side, nng_socket sock, const char *url, uint32_t *id, char *errbuf,
                          size_t errlen)
{
    bool secure = is_tls_url(url);
    nng_listener l = NNG_LISTENER_INITIALIZER;
    nng_dialer d = NNG_DIALER_INITIALIZER;
    int rv, err;

    rv = side ? nng_dialer_create(&d, sock, url) : nng_listener_create(&l, sock, url);
    if (rv) {
        kq_errf(errbuf, errlen, "rpc: cannot %s %s: %s", side ? "dial" : "listen on", url,
                nng_strerror(rv));
        return KQ_ERR_IO;
    }
    *id = side ? (uint32_t)nng_dialer_id(d) : (uint32_t)nng_listener_id(l);
    if (secure) {
        pthread_mutex_lock(&tls.mu);
        err = tls_attach(side, *id, url, errbuf, errlen);
        pthread_mutex_unlock(&tls.mu);
        if (err)
            goto fail;
    }
    rv = side ? nng_dialer_start(d, NNG_FLAG_NONBLOCK) : nng_listener_start(l, 0);
    if (rv == 0)
        return 0;
    kq_errf(errbuf, errlen, "rpc: cannot %s %s: %s", side ? "dial" : "listen on", url,
            nng_strerror(rv));
    err = KQ_ERR_IO;
fail:
    if (secure)
        tls_detach(side, *id);
    if (side)
        nng_dialer_close(d);
    else
        nng_listener_close(l);
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* connection limits: every pipe of a server socket, by peer address (nng pipe callbacks) */

#define REFUSAL_LOG_INTERVAL_MS 1000

typedef struct conn_entry {
    uint32_t pipe;
    bool refused;     /* closed at ADD_PRE; gone at REM_POST */
    uint8_t addr[16]; /* IPv6, or IPv4-mapped; all zero when unknown */
    char *subject;    /* TLS: the peer certificate's verified subject, "" for none; owned */
} conn_entry;

/* Owned by the server; freed with it, or leaked if its socket's close was abandoned (nng may
 * still call back). */
typedef struct conn_table {
    pthread_mutex_t mu;
    conn_entry *v;
    size_t n, cap;
    kq_rpc_conn_limits limits;
    uint64_t open, refused;
    kq_metric *open_metric, *refused_metric; /* NULL until kq_rpc_server_conn_metrics */
    uint64_t last_log_ms, unlogged;
    bool tls;      /* a tls+tcp:// listener: every entry has a subject */
    char url[128]; /* the server's */
} conn_table;

static void peer_addr(nng_pipe p, uint8_t out[16])
{
    nng_sockaddr sa;

    memset(out, 0, 16);
    if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0)
        return;
    if (sa.s_family == NNG_AF_INET) {
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &sa.s_in.sa_addr, 4);
    } else if (sa.s_family == NNG_AF_INET6) {
        memcpy(out, sa.s_in6.sa_addr, 16);
    }
}

static void format_addr(const uint8_t a[16], char *buf, size_t len)
{
    static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    if (!memcmp(a, v4_prefix, 12))
        inet_ntop(AF_INET, a + 12, buf, (socklen_t)len);
    else
        inet_ntop(AF_INET6, a, buf, (socklen_t)len);
}

/* ADD_PRE: count the pipe; refuse (close) it if a limit is reached. REM_POST: forget it. */
static void conn_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    conn_table *t = arg;
    uint32_t id = (uint32_t)nng_pipe_id(p);
    const char *limit = NULL;
    char who[INET6_ADDRSTRLEN] = "?";
    uint64_t skipped = 0;
    int value = 0;
    bool log_it = false;
    char *subject = NULL;

    if (ev == NNG_PIPE_EV_ADD_PRE && t->tls) {
        /* The handshake is done by now; a pipe whose peer cannot be told is refused. */
        char buf[KQ_TLS_SUBJECT_MAX + 1];
        int rv = kq_tls_pipe_subject(p, buf, sizeof buf);

        if (rv || (subject = strdup(buf)) == NULL) {
            KQ_WARN("rpc", "refused a TLS connection: its peer cannot be identified",
                    "url=%s err=\"%s\"", t->url, rv ? nng_strerror(rv) : "out of memory");
            nng_pipe_close(p);
            return;
        }
    }
    pthread_mutex_lock(&t->mu);
    if (ev == NNG_PIPE_EV_REM_POST) {
        for (size_t i = 0; i < t->n; i++) {
            if (t->v[i].pipe == id) {
                t->open -= !t->v[i].refused;
                kq_metric_set_int(t->open_metric, (int64_t)t->open);
                free(t->v[i].subject);
                t->v[i] = t->v[--t->n];
                break;
            }
        }
        pthread_mutex_unlock(&t->mu);
        return;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        conn_entry *v = realloc(t->v, cap * sizeof *v);

        if (v == NULL) {
            pthread_mutex_unlock(&t->mu);
            free(subject);
            nng_pipe_close(p); /* out of memory: refuse rather than lose track */
            return;
        }
        t->v = v;
        t->cap = cap;
    }
    conn_entry *e = &t->v[t->n++];
    size_t same = 0;

    e->pipe = id;
    e->refused = false;
    e->subject = subject;
    peer_addr(p, e->addr);
    for (size_t i = 0; i + 1 < t->n; i++)
        same += !t->v[i].refused && !memcmp(t->v[i].addr, e->addr, 16);
    if (t->limits.max_connections > 0 && t->open >= (uint64_t)t->limits.max_connections) {
        limit = "max.connections";
        value = t->limits.max_connections;
    } else if (t->limits.max_connections_per_ip > 0 &&
               same >= (size_t)t->limits.max_connections_per_ip) {
        limit = "max.connections.per.ip";
        value = t->limits.max_connections_per_ip;
    }
    if (limit == NULL) {
        t->open++;
        kq_metric_set_int(t->open_metric, (int64_t)t->open);
        pthread_mutex_unlock(&t->mu);
        return;
    }
    e->refused = true;
    t->refused++;
    kq_metric_inc(t->refused_metric);
    format_addr(e->addr, who, sizeof who);
    if (mono_ms() - t->last_log_ms >= REFUSAL_LOG_INTERVAL_MS) {
        log_it = true;
        skipped = t->unlogged;
        t->unlogged = 0;
        t->last_log_ms = mono_ms();
    } else {
        t->unlogged++;
    }
    pthread_mutex_unlock(&t->mu);
    nng_pipe_close(p);
    if (log_it)
        KQ_WARN("rpc", "refused a connection: limit reached",
                "url=%s peer=%s limit=%s value=%d refused_since_last_line=%llu", t->url, who, limit,
                value, (unsigned long long)skipped);
}

static conn_table *conn_table_new(const char *url)
{
    conn_table *t = calloc(1, sizeof *t);

    if (t == NULL)
        return NULL;
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        free(t);
        return NULL;
    }
    t->limits.max_connections = KQ_RPC_DEFAULT_MAX_CONNECTIONS;
    t->limits.max_connections_per_ip = KQ_RPC_DEFAULT_MAX_CONNECTIONS_PER_IP;
    snprintf(t->url, sizeof t->url, "%s", url);
    return t;
}

/* The subject of the peer on pipe id of a TLS listener's table, copied into buf: "" when the
 * peer has no verified certificate or the pipe is gone. */
static void conn_subject(conn_table *t, uint32_t id, char *buf, size_t cap)
{
    buf[0] = '\0';
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].pipe == id && !t->v[i].refused && t->v[i].subject)
            snprintf(buf, cap, "%s", t->v[i].subject);
    pthread_mutex_unlock(&t->mu);
}

static void conn_table_free(conn_table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].subject);
    pthread_mutex_destroy(&t->mu);
    free(t->v);
    free(t);
}

/* ------------------------------------------------------------------------------------------ */
/* server */

enum srv_state {
    SRV_IDLE = 0, /* no operation pending (not started, or finished because of closing) */
    SRV_RECV,     /* nng_ctx_recv pending */
    SRV_WAIT,     /* delivered to the application; msg holds the request */
    SRV_SEND,     /* nng_ctx_send pending */
};

/* One context slot. Owned by the server (array s->slots); lent to the application while in
 * SRV_WAIT, during which it holds one server reference. */
struct kq_rpc_req {
    kq_rpc_server *srv;
    nng_ctx ctx;
    nng_aio *aio;
    bool ctx_open;
    enum srv_state state;
    nng_msg *msg;                      /* request (SRV_WAIT only); owned by the slot */
    bool tls;                          /* SRV_WAIT: it came over a TLS listener */
    char peer[KQ_TLS_SUBJECT_MAX + 1]; /* then: kq_rpc_req_peer */
};

struct kq_rpc_server {
    nng_socket sock;
    bool sock_open;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool closing;
    int refs;     /* owner + requests in SRV_WAIT */
    int entering; /* threads inside nng_ctx_send/recv for this socket */
    int n_slots;
    struct kq_rpc_req *slots; /* owned */
    kq_rpc_on_request cb;
    void *arg;
    conn_table *conns; /* owned; NULL once leaked (see conn_table) */
    uint32_t listener; /* nng id; forgotten by the TLS registry at stop */
    char url[128];
};

static void server_free(kq_rpc_server *s)
{
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    conn_table_free(s->conns);
    free(s->slots);
    free(s);
}

/* Drops one reference (lock not held); frees the server on the last one. */
static void server_unref(kq_rpc_server *s)
{
    bool last;

    pthread_mutex_lock(&s->mu);
    last = (--s->refs == 0);
    pthread_mutex_unlock(&s->mu);
    if (last)
        server_free(s);
}

/* Ends a section started (under the lock) with s->entering++: a call into nng on one of the
 * server's contexts. Stop waits for all of them before it closes the socket, because nng 1.5.2
 * does not tolerate nng_ctx_* calls racing nng_close (observed: a panic on a destroyed lock). */
static void srv_leave(kq_rpc_server *s)
{
    pthread_mutex_lock(&s->mu);
    if (--s->entering == 0 && s->closing)
        pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Arms a receive on the slot unless the server is closing. Called from the slot's own aio
 * callback. */
static void srv_rearm_from_cb(struct kq_rpc_req *r)
{
    kq_rpc_server *s = r->srv;

    pthread_mutex_lock(&s->mu);
    if (s->closing) {
        r->state = SRV_IDLE;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    r->state = SRV_RECV;
    s->entering++;
    pthread_mutex_unlock(&s->mu);
    nng_ctx_recv(r->ctx, r->aio);
    srv_leave(s);
}

static void srv_aio_cb(void *p)
{
    struct kq_rpc_req *r = p;
    kq_rpc_server *s = r->srv;
    int rv = nng_aio_result(r->aio);
    nng_msg *msg;

    switch (r->state) {
    case SRV_RECV:
        if (rv != 0) {
            if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
                r->state = SRV_IDLE;
                return;
            }
            /* Anything else is about one pipe or message; keep serving. */
            KQ_WARN("rpc", "receive failed", "url=%s err=\"%s\"", s->url, nng_strerror(rv));
            srv_rearm_from_cb(r);
            return;
        }
        msg = nng_aio_get_msg(r->aio);
        nng_aio_set_msg(r->aio, NULL);
        pthread_mutex_lock(&s->mu);
        if (s->closing) {
            r->state = SRV_IDLE;
            pthread_mutex_unlock(&s->mu);
            nng_msg_free(msg);
            return;
        }
        r->msg = msg;
        r->state = SRV_WAIT;
        s->refs++;
        /* s->conns is set to NULL (and the table leaked, not freed) if a stop gave up on the
         * socket: take it while the lock is held. */
        conn_table *conns = s->conns;
        r->tls = is_tls_url(s->url);
        pthread_mutex_unlock(&s->mu);
        r->peer[0] = '\0'; /* a TLS request whose peer cannot be found is nobody's */
        if (r->tls && conns)
            conn_subject(conns, (uint32_t)nng_pipe_id(nng_msg_get_pipe(msg)), r->peer,
                         sizeof r->peer);
        /* The application owns r from here; it may reply inline. Touch nothing after this. */
        s->cb(s->arg, r);
        return;
    case SRV_SEND:
        if (rv != 0) {
            /* The message is still ours after a failed send. */
            msg = nng_aio_get_msg(r->aio);
            nng_aio_set_msg(r->aio, NULL);
            if (msg != NULL)
                nng_msg_free(msg);
            if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
                r->state = SRV_IDLE;
                return;
            }
            /* e.g. the requester went away: nothing to report to anyone. */
        }
        srv_rearm_from_cb(r);
        return;
    case SRV_IDLE:
    case SRV_WAIT:
        /* Not reachable: no operation is pending in these states. */
        return;
    }
}

int kq_rpc_server_start(const char *url, int n_contexts, size_t max_msg_bytes, kq_rpc_on_request cb,
                        void *arg, kq_rpc_server **out, char *errbuf, size_t errlen)
{
    kq_rpc_server *s = NULL;
    int rv;
    int err = KQ_ERR_IO;
    bool mu_init = false, cv_init = false;

    if (out != NULL)
        *out = NULL;
    if (url == NULL || cb == NULL || out == NULL) {
        kq_errf(errbuf, errlen, "rpc server: url, callback and out are required");
        return KQ_ERR_CONFIG;
    }
    if (n_contexts <= 0)
        n_contexts = KQ_RPC_DEFAULT_CONTEXTS;
    if (max_msg_bytes == 0)
        max_msg_bytes = KQ_RPC_DEFAULT_MAX_MSG;

    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        err = KQ_ERR_NOMEM;
        kq_errf(errbuf, errlen, "rpc server %s: out of memory", url);
        goto out;
    }
    s->slots = calloc((size_t)n_contexts, sizeof(*s->slots));
    if (s->slots == NULL) {
        err = KQ_ERR_NOMEM;
        kq_errf(errbuf, errlen, "rpc server %s: out of memory", url);
        goto out;
    }
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        kq_errf(errbuf, errlen, "rpc server %s: cannot initialise lock", url);
        goto out;
    }
    mu_init = true;
    if (pthread_cond_init(&s->cv, NULL) != 0) {
        kq_errf(errbuf, errlen, "rpc server %s: cannot initialise condition", url);
        goto out;
    }
    cv_init = true;
    s->n_slots = n_contexts;
    s->cb = cb;
    s->arg = arg;
    s->refs = 1;
    snprintf(s->url, sizeof(s->url), "%s", url);

    if ((rv = nng_rep0_open(&s->sock)) != 0) {
        kq_errf(errbuf, errlen, "rpc server %s: cannot open REP socket: %s", url, nng_strerror(rv));
        goto out;
    }
    s->sock_open = true;
    if ((rv = nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, max_msg_bytes)) != 0) {
        kq_errf(errbuf, errlen, "rpc server %s: cannot set receive size limit: %s", url,
                nng_strerror(rv));
        goto out;
    }
    if ((s->conns = conn_table_new(s->url)) == NULL) {
        err = KQ_ERR_NOMEM;
        kq_errf(errbuf, errlen, "rpc server %s: out of memory", url);
        goto out;
    }
    s->conns->tls = is_tls_url(url);
    if ((rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_PRE, conn_cb, s->conns)) != 0 ||
        (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, conn_cb, s->conns)) != 0) {
        kq_errf(errbuf, errlen, "rpc server %s: cannot watch connections: %s", url,
                nng_strerror(rv));
        goto out;
    }
    for (int i = 0; i < n_contexts; i++) {
        struct kq_rpc_req *r = &s->slots[i];

        r->srv = s;
        if ((rv = nng_aio_alloc(&r->aio, srv_aio_cb, r)) != 0) {
            kq_errf(errbuf, errlen, "rpc server %s: cannot allocate aio: %s", url,
                    nng_strerror(rv));
            goto out;
        }
        if ((rv = nng_ctx_open(&r->ctx, s->sock)) != 0) {
            kq_errf(errbuf, errlen, "rpc server %s: cannot open context: %s", url,
                    nng_strerror(rv));
            goto out;
        }
        r->ctx_open = true;
    }
    if ((err = endpoint_start(0, s->sock, url, &s->listener, errbuf, errlen)) != 0)
        goto out;
    err = KQ_ERR_IO;
    for (int i = 0; i < n_contexts; i++) {
        s->slots[i].state = SRV_RECV;
        nng_ctx_recv(s->slots[i].ctx, s->slots[i].aio);
    }
    *out = s;
    s = NULL;
    err = 0;
out:
    if (s != NULL) {
        /* Nothing was armed yet, so no callback can be running. */
        if (s->sock_open)
            nng_close(s->sock);
        if (s->slots != NULL) {
            for (int i = 0; i < s->n_slots; i++) {
                if (s->slots[i].aio != NULL)
                    nng_aio_free(s->slots[i].aio);
            }
        }
        if (cv_init)
            pthread_cond_destroy(&s->cv);
        if (mu_init)
            pthread_mutex_destroy(&s->mu);
        conn_table_free(s->conns);
        free(s->slots);
        free(s);
    }
    return err;
}

void kq_rpc_server_stop(kq_rpc_server *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->closing = true;
    while (s->entering > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);

    /* No new operation starts from now on (closing is set and nobody is inside nng_ctx_*).
     * Closing the socket fails every pending operation; then wait for the callbacks. */
    if (is_tls_url(s->url))
        tls_detach(0, s->listener);
    if (!close_socket_bounded(s->sock, "server", s->url)) {
        /* nng may still call back into it: leak it with the socket, and let it touch nothing
         * its owner frees (the metrics registry) */
        pthread_mutex_lock(&s->conns->mu);
        s->conns->open_metric = s->conns->refused_metric = NULL;
        pthread_mutex_unlock(&s->conns->mu);
        pthread_mutex_lock(&s->mu);
        s->conns = NULL;
        pthread_mutex_unlock(&s->mu);
    }
    for (int i = 0; i < s->n_slots; i++)
        nng_aio_stop(s->slots[i].aio);
    for (int i = 0; i < s->n_slots; i++) {
        struct kq_rpc_req *r = &s->slots[i];
        nng_msg *m = nng_aio_get_msg(r->aio);

        if (m != NULL)
            nng_msg_free(m);
        nng_aio_free(r->aio);
        r->aio = NULL;
    }
    /* Requests still held by the application keep the memory alive until released. */
    server_unref(s);
}

void kq_rpc_server_set_conn_limits(kq_rpc_server *s, const kq_rpc_conn_limits *limits)
{
    if (s == NULL || s->conns == NULL || limits == NULL)
        return;
    pthread_mutex_lock(&s->conns->mu);
    s->conns->limits = *limits;
    pthread_mutex_unlock(&s->conns->mu);
}

void kq_rpc_server_conn_counts(kq_rpc_server *s, uint64_t *open, uint64_t *refused)
{
    *open = *refused = 0;
    if (s == NULL || s->conns == NULL)
        return;
    pthread_mutex_lock(&s->conns->mu);
    *open = s->conns->open;
    *refused = s->conns->refused;
    pthread_mutex_unlock(&s->conns->mu);
}

int kq_rpc_server_conn_metrics(kq_rpc_server *s, kq_metrics *m)
{
    kq_metric *open_m, *refused_m;

    if (s == NULL || s->conns == NULL || m == NULL)
        return 0;
    open_m = kq_metrics_gauge_int(m, "kq_rpc_connections", "Connections the RPC listener holds now",
                                  NULL);
    refused_m = kq_metrics_counter(
        m, "kq_rpc_connections_refused_total",
        "Connections refused at max.connections or max.connections.per.ip", NULL);
    if (open_m == NULL || refused_m == NULL)
        return KQ_ERR_NOMEM;
    pthread_mutex_lock(&s->conns->mu);
    kq_metric_set_int(open_m, (int64_t)s->conns->open);
    kq_metric_add(refused_m, (double)s->conns->refused);
    s->conns->open_metric = open_m;
    s->conns->refused_metric = refused_m;
    pthread_mutex_unlock(&s->conns->mu);
    return 0;
}

const char *kq_rpc_req_peer(const kq_rpc_req *req)
{
    if (req == NULL || req->msg == NULL || !req->tls)
        return NULL;
    return req->peer;
}

const uint8_t *kq_rpc_req_data(const kq_rpc_req *req)
{
    if (req == NULL || req->msg == NULL)
        return NULL;
    return nng_msg_body(req->msg);
}

size_t kq_rpc_req_len(const kq_rpc_req *req)
{
    if (req == NULL || req->msg == NULL)
        return 0;
    return nng_msg_len(req->msg);
}

/* Ends the application's ownership of r. If `reply` is non-NULL it is sent, else the slot
 * goes back to receiving. Consumes `reply` in every case. */
static int srv_release(struct kq_rpc_req *r, nng_msg *reply)
{
    kq_rpc_server *s = r->srv;
    nng_msg *req_msg;
    bool last;

    pthread_mutex_lock(&s->mu);
    if (r->state != SRV_WAIT) {
        /* Released twice: a caller bug; do not touch the slot. */
        pthread_mutex_unlock(&s->mu);
        if (reply != NULL)
            nng_msg_free(reply);
        KQ_ERROR("rpc", "request released twice", "url=%s", s->url);
        return KQ_ERR_INTERNAL;
    }
    req_msg = r->msg;
    r->msg = NULL;
    if (s->closing) {
        r->state = SRV_IDLE;
        last = (--s->refs == 0);
        pthread_mutex_unlock(&s->mu);
        nng_msg_free(req_msg);
        if (reply != NULL)
            nng_msg_free(reply);
        if (last)
            server_free(s);
        return KQ_ERR_CLOSED;
    }
    s->refs--; /* the owner still holds one, so this is never the last */
    s->entering++;
    r->state = reply != NULL ? SRV_SEND : SRV_RECV;
    pthread_mutex_unlock(&s->mu);

    nng_msg_free(req_msg);
    if (reply != NULL) {
        nng_aio_set_msg(r->aio, reply);
        nng_ctx_send(r->ctx, r->aio);
    } else {
        nng_ctx_recv(r->ctx, r->aio);
    }
    srv_leave(s);
    return 0;
}

int kq_rpc_reply(kq_rpc_req *req, const uint8_t *data, size_t len)
{
    nng_msg *reply = NULL;
    int rv;

    if (req == NULL)
        return KQ_ERR_INTERNAL;
    if (data == NULL && len > 0) {
        srv_release(req, NULL);
        return KQ_ERR_INTERNAL;
    }
    if ((rv = nng_msg_alloc(&reply, len)) != 0) {
        srv_release(req, NULL);
        return KQ_ERR_NOMEM;
    }
    if (len > 0)
        memcpy(nng_msg_body(reply), data, len);
    return srv_release(req, reply);
}

void kq_rpc_req_drop(kq_rpc_req *req)
{
    if (req != NULL)
        srv_release(req, NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* client */

enum call_state {
    CALL_FREE = 0,
    CALL_SEND,
    CALL_RECV,
};

/* One pooled call slot: a REQ context and its aio. Owned by the client (list `all`). */
struct rpc_call {
    kq_rpc_client *cli;
    nng_ctx ctx;
    nng_aio *aio;
    enum call_state state;
    uint64_t deadline_ms;
    kq_rpc_on_response cb;
    void *arg;
    struct rpc_call *next_free;
    struct rpc_call *next_all;
};

/* The pipe callback's argument: its own allocation, leaked with the socket when a bounded
 * close gives up (nng may still call back). */
struct node_check {
    int32_t id;
    char url[128];
};

struct kq_rpc_client {
    struct node_check *check; /* NULL: the server's identity is not checked */
    nng_socket sock;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool closing;
    int outstanding;            /* calls whose callback has not yet returned */
    int entering;               /* threads inside nng_ctx_* / nng_ctx_open for this socket */
    struct rpc_call *free_list; /* idle slots */
    struct rpc_call *all;       /* every slot, owned */
    uint32_t dialer;            /* nng id; forgotten by the TLS registry at close */
    char url[128];
};

static int map_nng_err(int rv)
{
    return rv == NNG_ETIMEDOUT ? KQ_ERR_REQUEST_TIMED_OUT : KQ_ERR_NETWORK_EXCEPTION;
}

/* Ends a section started (under the lock, closing false) with c->entering++. Close waits for
 * these before it closes the socket (see srv_leave). */
static void cli_leave(kq_rpc_client *c)
{
    pthread_mutex_lock(&c->mu);
    if (--c->entering == 0 && c->closing)
        pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Runs the callback, then returns the slot to the pool. Must be the last use of `call`. */
static void call_finish(struct rpc_call *call, int err, nng_msg *resp)
{
    kq_rpc_client *c = call->cli;

    if (resp != NULL)
        call->cb(call->arg, 0, nng_msg_body(resp), nng_msg_len(resp));
    else
        call->cb(call->arg, err, NULL, 0);
    if (resp != NULL)
        nng_msg_free(resp);

    pthread_mutex_lock(&c->mu);
    call->state = CALL_FREE;
    call->cb = NULL;
    call->arg = NULL;
    call->next_free = c->free_list;
    c->free_list = call;
    if (--c->outstanding == 0 && c->closing)
        pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void call_aio_cb(void *p)
{
    struct rpc_call *call = p;
    int rv = nng_aio_result(call->aio);
    nng_msg *msg;
    uint64_t now;

    switch (call->state) {
    case CALL_SEND:
        if (rv != 0) {
            msg = nng_aio_get_msg(call->aio);
            nng_aio_set_msg(call->aio, NULL);
            if (msg != NULL)
                nng_msg_free(msg);
            call_finish(call, map_nng_err(rv), NULL);
            return;
        }
        now = mono_ms();
        if (now >= call->deadline_ms) {
            call_finish(call, KQ_ERR_REQUEST_TIMED_OUT, NULL);
            return;
        }
        pthread_mutex_lock(&call->cli->mu);
        if (call->cli->closing) {
            pthread_mutex_unlock(&call->cli->mu);
            call_finish(call, KQ_ERR_NETWORK_EXCEPTION, NULL);
            return;
        }
        call->cli->entering++;
        pthread_mutex_unlock(&call->cli->mu);
        call->state = CALL_RECV;
        nng_aio_set_timeout(call->aio, clamp_ms(call->deadline_ms - now));
        nng_ctx_recv(call->ctx, call->aio);
        cli_leave(call->cli);
        return;
    case CALL_RECV:
        if (rv != 0) {
            call_finish(call, map_nng_err(rv), NULL);
            return;
        }
        msg = nng_aio_get_msg(call->aio);
        nng_aio_set_msg(call->aio, NULL);
        call_finish(call, 0, msg);
        return;
    case CALL_FREE:
        return;
    }
}

/* A new connection of a client that dials node check->id: the server's certificate must be
 * that node's, or the connection is closed before any request goes out (and redialed later). */
static void node_server_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    const struct node_check *check = arg;
    char subject[KQ_TLS_SUBJECT_MAX + 1], principal[KQ_PRINCIPAL_MAX], msg[1200];

    if (ev != NNG_PIPE_EV_ADD_PRE)
        return;
    if (kq_tls_pipe_subject(p, subject, sizeof subject) != 0)
        subject[0] = '\0';
    kq_principal_of(node_servers.rules, subject, principal, sizeof principal);
    if (kq_principal_is_node(node_servers.tmpl, principal, check->id))
        return;
    snprintf(msg, sizeof msg, "the server at %s is not node %d (%s)", check->url, (int)check->id,
             node_servers.tmpl);
    kq_log_refused("rpc",
                   "closed a connection: the node dialed was answered by another certificate "
                   "of the cluster's CA; nothing was sent",
                   principal, msg);
    nng_pipe_close(p);
}

int kq_rpc_client_open(const char *url, size_t max_msg_bytes, kq_rpc_client **out, char *errbuf,
                       size_t errlen)
{
    return kq_rpc_client_open_node(url, -1, max_msg_bytes, out, errbuf, errlen);
}

int kq_rpc_client_open_node(const char *url, int32_t node_id, size_t max_msg_bytes,
                            kq_rpc_client **out, char *errbuf, size_t errlen)
{
    kq_rpc_client *c = NULL;
    bool sock_open = false, mu_init = false, cv_init = false;
    int rv;
    int err = KQ_ERR_IO;

    if (out != NULL)
        *out = NULL;
    if (url == NULL || out == NULL) {
        kq_errf(errbuf, errlen, "rpc client: url and out are required");
        return KQ_ERR_CONFIG;
    }
    if (max_msg_bytes == 0)
        max_msg_bytes = KQ_RPC_DEFAULT_MAX_MSG;
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        err = KQ_ERR_NOMEM;
        kq_errf(errbuf, errlen, "rpc client %s: out of memory", url);
        goto out;
    }
    snprintf(c->url, sizeof(c->url), "%s", url);
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        kq_errf(errbuf, errlen, "rpc client %s: cannot initialise lock", url);
        goto out;
    }
    mu_init = true;
    if (pthread_cond_init(&c->cv, NULL) != 0) {
        kq_errf(errbuf, errlen, "rpc client %s: cannot initialise condition", url);
        goto out;
    }
    cv_init = true;
    if ((rv = nng_req0_open(&c->sock)) != 0) {
        kq_errf(errbuf, errlen, "rpc client %s: cannot open REQ socket: %s", url, nng_strerror(rv));
        goto out;
    }
    sock_open = true;
    if ((rv = nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) != 0 ||
        (rv = nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, max_msg_bytes)) != 0 ||
        (rv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, 100)) != 0 ||
        (rv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, 2000)) != 0) {
        kq_errf(errbuf, errlen, "rpc client %s: cannot set socket options: %s", url,
                nng_strerror(rv));
        goto out;
    }
    if (node_id >= 0 && node_servers.on && is_tls_url(url)) {
        if ((c->check = calloc(1, sizeof *c->check)) == NULL) {
            err = KQ_ERR_NOMEM;
            kq_errf(errbuf, errlen, "rpc client %s: out of memory", url);
            goto out;
        }
        c->check->id = node_id;
        snprintf(c->check->url, sizeof c->check->url, "%s", url);
        if ((rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_PRE, node_server_cb, c->check)) != 0) {
            kq_errf(errbuf, errlen, "rpc client %s: cannot watch its connections: %s", url,
                    nng_strerror(rv));
            goto out;
        }
    }
    if ((err = endpoint_start(1, c->sock, url, &c->dialer, errbuf, errlen)) != 0)
        goto out;
    *out = c;
    c = NULL;
    err = 0;
out:
    if (c != NULL) {
        if (sock_open)
            nng_close(c->sock);
        free(c->check);
        if (cv_init)
            pthread_cond_destroy(&c->cv);
        if (mu_init)
            pthread_mutex_destroy(&c->mu);
        free(c);
    }
    return err;
}

void kq_rpc_client_close(kq_rpc_client *c)
{
    struct rpc_call *call, *next;

    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    c->closing = true;
    while (c->entering > 0)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);

    /* Nobody is inside nng_ctx_* for this socket and nobody starts anything new. Closing the
     * socket fails every pending operation on every context with NNG_ECLOSED. */
    if (is_tls_url(c->url))
        tls_detach(1, c->dialer);
    if (close_socket_bounded(c->sock, "client", c->url))
        free(c->check); /* else leaked with the socket: nng may still call back */

    pthread_mutex_lock(&c->mu);
    while (c->outstanding > 0)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);

    for (call = c->all; call != NULL; call = call->next_all)
        nng_aio_stop(call->aio);
    for (call = c->all; call != NULL; call = next) {
        next = call->next_all;
        nng_aio_free(call->aio);
        free(call);
    }
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Allocates a new pool slot (lock not held). */
static int call_new(kq_rpc_client *c, struct rpc_call **out)
{
    struct rpc_call *call;
    int rv;

    *out = NULL;
    call = calloc(1, sizeof(*call));
    if (call == NULL)
        return KQ_ERR_NOMEM;
    call->cli = c;
    if ((rv = nng_aio_alloc(&call->aio, call_aio_cb, call)) != 0) {
        free(call);
        return KQ_ERR_NOMEM;
    }
    if ((rv = nng_ctx_open(&call->ctx, c->sock)) != 0) {
        nng_aio_free(call->aio);
        free(call);
        return rv == NNG_ENOMEM ? KQ_ERR_NOMEM : KQ_ERR_CLOSED;
    }
    /* Contexts copy the socket's resend time when opened; set it explicitly anyway. */
    nng_ctx_set_ms(call->ctx, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    *out = call;
    return 0;
}

int kq_rpc_call_async(kq_rpc_client *c, const uint8_t *req, size_t len, uint32_t timeout_ms,
                      kq_rpc_on_response cb, void *arg)
{
    struct rpc_call *call = NULL;
    nng_msg *msg = NULL;
    int err;

    if (c == NULL || cb == NULL || (req == NULL && len > 0))
        return KQ_ERR_INTERNAL;
    if (nng_msg_alloc(&msg, len) != 0)
        return KQ_ERR_NOMEM;
    if (len > 0)
        memcpy(nng_msg_body(msg), req, len);

    pthread_mutex_lock(&c->mu);
    if (c->closing) {
        pthread_mutex_unlock(&c->mu);
        err = KQ_ERR_CLOSED;
        goto out;
    }
    call = c->free_list;
    if (call != NULL)
        c->free_list = call->next_free;
    c->outstanding++; /* keeps close from freeing the pool while we work outside the lock */
    c->entering++;    /* keeps close from closing the socket under nng_ctx_open/send */
    pthread_mutex_unlock(&c->mu);

    if (call == NULL) {
        err = call_new(c, &call);
        pthread_mutex_lock(&c->mu);
        if (err != 0) {
            if (--c->outstanding == 0 && c->closing)
                pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
            cli_leave(c);
            goto out;
        }
        call->next_all = c->all;
        c->all = call;
        pthread_mutex_unlock(&c->mu);
    }

    call->cb = cb;
    call->arg = arg;
    call->state = CALL_SEND;
    call->deadline_ms = mono_ms() + timeout_ms;
    nng_aio_set_timeout(call->aio, clamp_ms(timeout_ms));
    nng_aio_set_msg(call->aio, msg);
    msg = NULL;
    nng_ctx_send(call->ctx, call->aio);
    cli_leave(c);
    err = 0;
out:
    if (msg != NULL)
        nng_msg_free(msg);
    return err;
}

struct sync_call {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int err;
    uint8_t *data;
    size_t len;
};

static void sync_cb(void *arg, int err, const uint8_t *data, size_t len)
{
    struct sync_call *sc = arg;
    uint8_t *copy = NULL;

    if (err == 0) {
        copy = malloc(len > 0 ? len : 1);
        if (copy == NULL)
            err = KQ_ERR_NOMEM;
        else if (len > 0)
            memcpy(copy, data, len);
    }
    pthread_mutex_lock(&sc->mu);
    sc->err = err;
    sc->data = copy;
    sc->len = err == 0 ? len : 0;
    sc->done = true;
    pthread_cond_signal(&sc->cv);
    pthread_mutex_unlock(&sc->mu);
}

int kq_rpc_call(kq_rpc_client *c, const uint8_t *req, size_t len, uint32_t timeout_ms,
                uint8_t **resp, size_t *resp_len)
{
    struct sync_call sc;
    int err;

    if (resp == NULL || resp_len == NULL)
        return KQ_ERR_INTERNAL;
    *resp = NULL;
    *resp_len = 0;
    memset(&sc, 0, sizeof(sc));
    if (pthread_mutex_init(&sc.mu, NULL) != 0)
        return KQ_ERR_INTERNAL;
    if (pthread_cond_init(&sc.cv, NULL) != 0) {
        pthread_mutex_destroy(&sc.mu);
        return KQ_ERR_INTERNAL;
    }
    err = kq_rpc_call_async(c, req, len, timeout_ms, sync_cb, &sc);
    if (err != 0)
        goto out;
    pthread_mutex_lock(&sc.mu);
    while (!sc.done)
        pthread_cond_wait(&sc.cv, &sc.mu);
    pthread_mutex_unlock(&sc.mu);
    err = sc.err;
    if (err == 0) {
        *resp = sc.data;
        *resp_len = sc.len;
    }
out:
    pthread_cond_destroy(&sc.cv);
    pthread_mutex_destroy(&sc.mu);
    return err;
}
