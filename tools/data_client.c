/*
 * The kq tool's data-plane client: metadata cache, per-broker connections, one-attempt
 * Produce / ListOffsets / Fetch. Contract and ownership: tools/data_client.h.
 *
 * An nng REQ socket to a dead peer does not fail: the request waits for the whole timeout
 * while nng redials. So before the first request on a connection, and after a request on it
 * failed, the address gets a short TCP probe (at most PROBE_MS): a refused or unreachable
 * broker costs no request timeout.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "data_client.h"
#include "kq/error.h"
#include "kq/rpc.h"
#include "kq/util.h"

#define MAX_CONNS 64
#define PROBE_MS 1000u
#define RPC_MARGIN_MS 1000u /* RPC timeout beyond a request's own timeout */
#define PARTITION_MAX_BYTES (1024 * 1024)
#define FETCH_MAX_BYTES (50 * 1024 * 1024)
#define ADDR_LEN 300
#define CANDIDATES_MAX (2 * KQ_TOOLS_MAX_ADDRS + 16)

typedef struct conn {
    char addr[ADDR_LEN]; /* host:port */
    kq_rpc_client *client;
    bool healthy; /* the last request on it got an answer */
} conn;

typedef struct cached_part {
    int32_t partition;
    int error;
    int32_t leader_id;
    int32_t leader_epoch;
} cached_part;

typedef struct cached_topic {
    char name[KQ_DATA_MAX_TOPIC_NAME + 1];
    uint8_t id[16];
    int error;
    cached_part *parts;
    size_t n_parts;
} cached_topic;

typedef struct cached_broker {
    int32_t id;
    char addr[ADDR_LEN];
} cached_broker;

struct kq_dc {
    kq_tools_addr bootstrap[KQ_TOOLS_MAX_ADDRS];
    int n_bootstrap;
    uint32_t timeout_ms;
    conn conns[MAX_CONNS];
    int n_conns;
    cached_broker *brokers;
    size_t n_brokers;
    cached_topic *topics;
    size_t n_topics;
    bool stale;
};

int kq_dc_open(const kq_tools_addr *bootstrap, int n_bootstrap, uint32_t request_timeout_ms,
               kq_dc **out)
{
    kq_dc *c;

    *out = NULL;
    if (!bootstrap || n_bootstrap < 1)
        return KQ_ERR_CONFIG;
    c = calloc(1, sizeof *c);
    if (!c)
        return KQ_ERR_NOMEM;
    c->n_bootstrap = n_bootstrap < KQ_TOOLS_MAX_ADDRS ? n_bootstrap : KQ_TOOLS_MAX_ADDRS;
    memcpy(c->bootstrap, bootstrap, (size_t)c->n_bootstrap * sizeof *bootstrap);
    c->timeout_ms = request_timeout_ms ? request_timeout_ms : KQ_DC_DEFAULT_REQUEST_TIMEOUT_MS;
    c->stale = true;
    *out = c;
    return 0;
}

static void free_topics(kq_dc *c)
{
    for (size_t i = 0; i < c->n_topics; i++)
        free(c->topics[i].parts);
    free(c->topics);
    c->topics = NULL;
    c->n_topics = 0;
}

void kq_dc_close(kq_dc *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n_conns; i++)
        kq_rpc_client_close(c->conns[i].client);
    free(c->brokers);
    free_topics(c);
    free(c);
}

void kq_dc_invalidate(kq_dc *c)
{
    c->stale = true;
}

/* ---- connections -------------------------------------------------------------------------- */

/* Split "host:port" / "[v6]:port". */
static bool split_addr(const char *addr, char *host, size_t hostlen, char *port, size_t portlen)
{
    const char *colon = strrchr(addr, ':');
    const char *h = addr;
    size_t hl;

    if (!colon)
        return false;
    hl = (size_t)(colon - addr);
    if (addr[0] == '[' && hl >= 2 && addr[hl - 1] == ']') {
        h = addr + 1;
        hl -= 2;
    }
    if (hl == 0 || hl >= hostlen || strlen(colon + 1) >= portlen)
        return false;
    memcpy(host, h, hl);
    host[hl] = 0;
    snprintf(port, portlen, "%s", colon + 1);
    return true;
}

/* A TCP connect to addr within limit_ms: 0 if some resolved address accepts, else
 * NETWORK_EXCEPTION with the reason in why. A connect still pending at the limit counts as
 * reachable (the request timeout then decides). */
static int probe(const char *addr, uint32_t limit_ms, char *why, size_t whylen)
{
    struct addrinfo hints, *res = NULL;
    char host[256], port[16];
    int rc = KQ_ERR_NETWORK_EXCEPTION, last = ECONNREFUSED;

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    if (!split_addr(addr, host, sizeof host, port, sizeof port)) {
        kq_errf(why, whylen, "'%s' is not host:port", addr);
        return KQ_ERR_NETWORK_EXCEPTION;
    }
    if (getaddrinfo(host, port, &hints, &res) != 0 || !res) {
        kq_errf(why, whylen, "cannot connect: host name does not resolve");
        return KQ_ERR_NETWORK_EXCEPTION;
    }
    for (struct addrinfo *ai = res; ai && rc != 0; ai = ai->ai_next) {
        int fd =
            socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);

        if (fd < 0) {
            last = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            rc = 0;
        } else if (errno != EINPROGRESS) {
            last = errno;
        } else {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int so = 0, r;
            socklen_t sl = sizeof so;

            do {
                r = poll(&p, 1, (int)limit_ms);
            } while (r < 0 && errno == EINTR);
            if (r == 0)
                rc = 0; /* slow, not refused: let the request decide */
            else if (r > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) == 0 && so == 0)
                rc = 0;
            else
                last = so ? so : errno;
        }
        close(fd);
    }
    freeaddrinfo(res);
    if (rc)
        kq_errf(why, whylen, "cannot connect: %s", strerror(last));
    return rc;
}

/* The connection to addr, opened (and probed) when needed. */
static int get_conn(kq_dc *c, const char *addr, conn **out, char *why, size_t whylen)
{
    char url[ADDR_LEN + 8], e[256] = "";
    conn *k = NULL;
    int rc;

    for (int i = 0; i < c->n_conns && !k; i++)
        if (strcmp(c->conns[i].addr, addr) == 0)
            k = &c->conns[i];
    if (k && k->healthy) {
        *out = k;
        return 0;
    }
    rc = probe(addr, c->timeout_ms < PROBE_MS ? c->timeout_ms : PROBE_MS, why, whylen);
    if (rc)
        return rc;
    if (!k) {
        if (c->n_conns == MAX_CONNS) { /* drop the oldest */
            kq_rpc_client_close(c->conns[0].client);
            memmove(&c->conns[0], &c->conns[1], (MAX_CONNS - 1) * sizeof c->conns[0]);
            c->n_conns--;
        }
        k = &c->conns[c->n_conns];
        memset(k, 0, sizeof *k);
        snprintf(k->addr, sizeof k->addr, "%s", addr);
        snprintf(url, sizeof url, "%s%s", kq_tools_scheme(), addr);
        rc = kq_rpc_client_open(url, KQ_RPC_DEFAULT_MAX_MSG, &k->client, e, sizeof e);
        if (rc) {
            kq_errf(why, whylen, "%s", e[0] ? e : kq_err_message(rc));
            return KQ_ERR_NETWORK_EXCEPTION;
        }
        c->n_conns++;
    }
    *out = k;
    return 0;
}

/* One request to addr. On 0, *resp (malloc'd, caller frees) holds the answer. */
static int rpc(kq_dc *c, const char *addr, const kq_buf *req, uint32_t timeout_ms, uint8_t **resp,
               size_t *len, char *why, size_t whylen)
{
    conn *k = NULL;
    int rc;

    *resp = NULL;
    *len = 0;
    if ((rc = get_conn(c, addr, &k, why, whylen)) != 0)
        return rc;
    rc = kq_rpc_call(k->client, req->data, req->len, timeout_ms, resp, len);
    k->healthy = rc == 0;
    if (rc)
        kq_errf(why, whylen, "%s (%s)", kq_err_name(rc),
                rc == KQ_ERR_REQUEST_TIMED_OUT ? "no answer in time" : kq_err_message(rc));
    return rc;
}

/* ---- metadata ----------------------------------------------------------------------------- */

static void broker_addr(const char *host, int32_t port, char *out, size_t outlen)
{
    if (strchr(host, ':'))
        snprintf(out, outlen, "[%s]:%" PRId32, host, port);
    else
        snprintf(out, outlen, "%s:%" PRId32, host, port);
}

static cached_topic *find_topic(kq_dc *c, const char *name)
{
    for (size_t i = 0; i < c->n_topics; i++)
        if (strcmp(c->topics[i].name, name) == 0)
            return &c->topics[i];
    return NULL;
}

/* Replace the broker list and the entry of `topic` with what m says. */
static int apply_metadata(kq_dc *c, const char *topic, const kq_data_metadata_response *m)
{
    cached_broker *brokers = calloc(m->n_brokers ? m->n_brokers : 1, sizeof *brokers);
    const kq_data_metadata_topic *t = NULL;
    cached_part *parts = NULL;
    cached_topic *ct;

    if (!brokers)
        return KQ_ERR_NOMEM;
    for (size_t i = 0; i < m->n_brokers; i++) {
        brokers[i].id = m->brokers[i].id;
        broker_addr(m->brokers[i].host, m->brokers[i].port, brokers[i].addr,
                    sizeof brokers[i].addr);
    }
    for (size_t i = 0; i < m->n_topics && !t; i++)
        if (strcmp(m->topics[i].name, topic) == 0)
            t = &m->topics[i];
    if (t && t->n_partitions) {
        parts = calloc(t->n_partitions, sizeof *parts);
        if (!parts) {
            free(brokers);
            return KQ_ERR_NOMEM;
        }
        for (size_t j = 0; j < t->n_partitions; j++) {
            parts[j].partition = t->partitions[j].partition;
            parts[j].error = t->partitions[j].error;
            parts[j].leader_id = t->partitions[j].leader_id;
            parts[j].leader_epoch = t->partitions[j].leader_epoch;
        }
    }
    ct = find_topic(c, topic);
    if (!ct) {
        cached_topic *nt = realloc(c->topics, (c->n_topics + 1) * sizeof *nt);

        if (!nt) {
            free(brokers);
            free(parts);
            return KQ_ERR_NOMEM;
        }
        c->topics = nt;
        ct = &c->topics[c->n_topics++];
        memset(ct, 0, sizeof *ct);
        snprintf(ct->name, sizeof ct->name, "%s", topic);
    }
    free(ct->parts);
    ct->parts = parts;
    ct->n_parts = t ? t->n_partitions : 0;
    ct->error = t ? t->error : KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    if (t)
        memcpy(ct->id, t->topic_id, 16);
    else
        memset(ct->id, 0, 16);
    free(c->brokers);
    c->brokers = brokers;
    c->n_brokers = m->n_brokers;
    return 0;
}

/* 0: a connection whose last request was answered, 1: no connection yet, 2: a connection
 * whose last request failed (a dead or paused broker: asked last). */
static int health_rank(const kq_dc *c, const char *addr)
{
    for (int i = 0; i < c->n_conns; i++)
        if (strcmp(c->conns[i].addr, addr) == 0)
            return c->conns[i].healthy ? 0 : 2;
    return 1;
}

/* Candidate addresses for a Metadata request: known brokers, then the bootstrap list, each
 * once, ordered by health_rank (stable). */
static int candidates(const kq_dc *c, char (*out)[ADDR_LEN], int max)
{
    char(*all)[ADDR_LEN] = out;
    int n = 0, rank[CANDIDATES_MAX];

    for (size_t i = 0; i < c->n_brokers + (size_t)c->n_bootstrap && n < max; i++) {
        char a[ADDR_LEN];
        bool dup = false;

        if (i < c->n_brokers)
            snprintf(a, sizeof a, "%s", c->brokers[i].addr);
        else
            kq_tools_format_addr(&c->bootstrap[i - c->n_brokers], a, sizeof a);
        for (int k = 0; k < n && !dup; k++)
            dup = strcmp(all[k], a) == 0;
        if (dup)
            continue;
        rank[n] = health_rank(c, a);
        snprintf(all[n++], ADDR_LEN, "%s", a);
    }
    /* Stable insertion sort by rank. */
    for (int i = 1; i < n; i++) {
        char a[ADDR_LEN];
        int r = rank[i], k = i;

        memcpy(a, all[i], ADDR_LEN);
        for (; k > 0 && rank[k - 1] > r; k--) {
            memcpy(all[k], all[k - 1], ADDR_LEN);
            rank[k] = rank[k - 1];
        }
        memcpy(all[k], a, ADDR_LEN);
        rank[k] = r;
    }
    return n;
}

int kq_dc_refresh(kq_dc *c, const char *topic, char *errbuf, size_t errlen)
{
    enum { MAX_CAND = CANDIDATES_MAX };
    char cand[MAX_CAND][ADDR_LEN];
    char reasons[2048] = "", tried[1024] = "";
    size_t rused = 0, tused = 0;
    const char *names[1] = {topic};
    kq_data_metadata_request mr = {.topics = names, .n_topics = 1};
    kq_buf req = {NULL, 0};
    int n, rc, last = KQ_ERR_NETWORK_EXCEPTION;

    rc = kq_data_encode_metadata_request("", -1, &mr, &req);
    if (rc) {
        kq_errf(errbuf, errlen, "cannot encode the Metadata request: %s", kq_err_message(rc));
        return rc;
    }
    n = candidates(c, cand, MAX_CAND);
    for (int i = 0; i < n; i++) {
        char why[400] = "", derr[256] = "";
        uint8_t *resp = NULL;
        size_t len = 0;
        kq_data_metadata_response m;
        int w;

        rc = rpc(c, cand[i], &req, c->timeout_ms, &resp, &len, why, sizeof why);
        if (rc == 0) {
            rc = kq_data_decode_metadata_response(resp, len, &m, derr, sizeof derr);
            free(resp);
            if (rc) {
                snprintf(why, sizeof why, "malformed Metadata answer: %s", derr);
            } else if (m.error) {
                rc = m.error;
                snprintf(why, sizeof why, "%s: %s", kq_err_name(m.error),
                         m.error_message[0] ? m.error_message : kq_err_message(m.error));
                kq_data_metadata_response_free(&m);
            } else {
                rc = apply_metadata(c, topic, &m);
                kq_data_metadata_response_free(&m);
                if (rc == 0) {
                    c->stale = false;
                    kq_buf_free(&req);
                    return 0;
                }
                snprintf(why, sizeof why, "%s", kq_err_message(rc));
            }
        }
        last = rc;
        w = snprintf(tried + tused, sizeof tried - tused, "%s%s", tused ? "," : "", cand[i]);
        if (w > 0 && (size_t)w < sizeof tried - tused)
            tused += (size_t)w;
        w = snprintf(reasons + rused, sizeof reasons - rused, "\n  %s: %s", cand[i], why);
        if (w > 0 && (size_t)w < sizeof reasons - rused)
            rused += (size_t)w;
    }
    kq_buf_free(&req);
    kq_errf(errbuf, errlen, "no broker answered within %" PRIu32 " ms (tried %s)%s", c->timeout_ms,
            tried, reasons);
    return last; /* the last address's: transport error, answer error or malformed answer */
}

int kq_dc_route_for(kq_dc *c, const char *topic, int32_t partition, kq_dc_route *out, char *errbuf,
                    size_t errlen)
{
    const cached_topic *t = c->stale ? NULL : find_topic(c, topic);
    const cached_part *p = NULL;
    int rc;

    memset(out, 0, sizeof *out);
    out->leader_id = -1;
    out->leader_epoch = -1;
    if (!t) {
        if ((rc = kq_dc_refresh(c, topic, errbuf, errlen)) != 0)
            return rc;
        t = find_topic(c, topic);
    }
    if (!t || t->error) {
        c->stale = true;
        rc = t ? t->error : KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        kq_errf(errbuf, errlen, "topic %s: %s", topic, kq_err_name(rc));
        return rc;
    }
    for (size_t i = 0; i < t->n_parts && !p; i++)
        if (t->parts[i].partition == partition)
            p = &t->parts[i];
    if (!p) {
        c->stale = true;
        kq_errf(errbuf, errlen, "topic %s has no partition %" PRId32 " (%zu partitions)", topic,
                partition, t->n_parts);
        return KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    }
    memcpy(out->topic_id, t->id, 16);
    out->leader_id = p->leader_id;
    out->leader_epoch = p->leader_epoch;
    if (p->error || p->leader_id < 0) {
        c->stale = true;
        rc = p->error ? p->error : KQ_ERR_LEADER_NOT_AVAILABLE;
        kq_errf(errbuf, errlen, "%s-%" PRId32 ": %s", topic, partition, kq_err_name(rc));
        return rc;
    }
    for (size_t i = 0; i < c->n_brokers; i++) {
        if (c->brokers[i].id == p->leader_id) {
            snprintf(out->leader, sizeof out->leader, "%s", c->brokers[i].addr);
            return 0;
        }
    }
    c->stale = true;
    kq_errf(errbuf, errlen, "%s-%" PRId32 ": the leader, broker %" PRId32 ", has no known endpoint",
            topic, partition, p->leader_id);
    return KQ_ERR_LEADER_NOT_AVAILABLE;
}

/* ---- data-plane calls --------------------------------------------------------------------- */

static uint32_t add_margin(uint32_t t)
{
    return t > UINT32_MAX - RPC_MARGIN_MS ? UINT32_MAX : t + RPC_MARGIN_MS;
}

/* Route, send req (built by the caller for route) to the leader, return the answer bytes.
 * build encodes the request for the route into *req. */
typedef int (*build_fn)(const kq_dc_route *route, const void *arg, kq_buf *req);

static int leader_call(kq_dc *c, const char *topic, int32_t partition, build_fn build,
                       const void *arg, uint32_t timeout_ms, kq_dc_route *route, uint8_t **resp,
                       size_t *len, char *errbuf, size_t errlen)
{
    kq_buf req = {NULL, 0};
    char why[400] = "";
    int rc;

    *resp = NULL;
    *len = 0;
    if ((rc = kq_dc_route_for(c, topic, partition, route, errbuf, errlen)) != 0)
        return rc;
    if ((rc = build(route, arg, &req)) != 0) {
        kq_errf(errbuf, errlen, "cannot encode the request: %s", kq_err_message(rc));
        return rc;
    }
    rc = rpc(c, route->leader, &req, timeout_ms, resp, len, why, sizeof why);
    kq_buf_free(&req);
    if (rc) {
        c->stale = true;
        kq_errf(errbuf, errlen, "leader %" PRId32 " at %s: %s", route->leader_id, route->leader,
                why);
    }
    return rc;
}

static int answer_error(kq_dc *c, const kq_dc_route *route, const char *what, int err,
                        const char *msg, char *errbuf, size_t errlen)
{
    if (kq_dc_refresh_needed(err))
        c->stale = true;
    kq_errf(errbuf, errlen, "%s answer from leader %" PRId32 " at %s: %s%s%s", what,
            route->leader_id, route->leader, kq_err_name(err), msg && msg[0] ? ": " : "",
            msg ? msg : "");
    return err;
}

typedef struct produce_arg {
    int32_t partition, acks;
    uint32_t timeout_ms;
    int64_t producer_id;
    int32_t producer_epoch, sequence;
    const uint8_t *value;
    size_t len;
} produce_arg;

static int build_produce(const kq_dc_route *route, const void *arg, kq_buf *req)
{
    const produce_arg *a = arg;
    const uint8_t *recs[1] = {a->value};
    size_t lens[1] = {a->len};
    kq_produce_request p;

    memset(&p, 0, sizeof p);
    memcpy(p.topic_id, route->topic_id, 16);
    p.partition = a->partition;
    p.acks = a->acks;
    p.timeout_ms = a->timeout_ms > INT32_MAX ? INT32_MAX : (int32_t)a->timeout_ms;
    p.producer_id = a->producer_id;
    p.producer_epoch = a->producer_epoch;
    p.base_sequence = a->sequence;
    p.records = recs;
    p.record_lens = lens;
    p.n_records = 1;
    return kq_data_encode_produce_request("", -1, &p, req);
}

int kq_dc_produce(kq_dc *c, const char *topic, int32_t partition, int32_t acks, uint32_t timeout_ms,
                  int64_t producer_id, int32_t producer_epoch, int32_t sequence,
                  const uint8_t *value, size_t len, int64_t *offset, char *errbuf, size_t errlen)
{
    produce_arg a = {.partition = partition,
                     .acks = acks,
                     .timeout_ms = timeout_ms,
                     .producer_id = producer_id,
                     .producer_epoch = producer_epoch,
                     .sequence = sequence,
                     .value = value,
                     .len = len};
    kq_dc_route route;
    kq_produce_response pr;
    uint8_t *resp = NULL;
    size_t rlen = 0;
    char derr[256] = "";
    int rc;

    *offset = -1;
    rc = leader_call(c, topic, partition, build_produce, &a, add_margin(timeout_ms), &route, &resp,
                     &rlen, errbuf, errlen);
    if (rc)
        return rc;
    rc = kq_data_decode_produce_response(resp, rlen, &pr, derr, sizeof derr);
    free(resp);
    if (rc) {
        kq_errf(errbuf, errlen, "malformed Produce answer from %s: %s", route.leader, derr);
        return rc;
    }
    if (pr.error)
        return answer_error(c, &route, "Produce", pr.error, pr.error_message, errbuf, errlen);
    *offset = pr.base_offset;
    return 0;
}

typedef struct offsets_arg {
    int32_t partition;
    int64_t timestamp;
} offsets_arg;

static int build_list_offsets(const kq_dc_route *route, const void *arg, kq_buf *req)
{
    const offsets_arg *a = arg;
    kq_list_offsets_partition p;
    kq_list_offsets_request r = {.replica_id = -1, .partitions = &p, .n_partitions = 1};

    memset(&p, 0, sizeof p);
    memcpy(p.topic_id, route->topic_id, 16);
    p.partition = a->partition;
    p.current_leader_epoch = route->leader_epoch;
    p.timestamp = a->timestamp;
    return kq_data_encode_list_offsets_request("", -1, &r, req);
}

int kq_dc_list_offset(kq_dc *c, const char *topic, int32_t partition, int64_t timestamp,
                      int64_t *offset, char *errbuf, size_t errlen)
{
    offsets_arg a = {.partition = partition, .timestamp = timestamp};
    kq_dc_route route;
    kq_list_offsets_response lr;
    uint8_t *resp = NULL;
    size_t rlen = 0;
    char derr[256] = "";
    int rc;

    *offset = -1;
    rc = leader_call(c, topic, partition, build_list_offsets, &a, c->timeout_ms, &route, &resp,
                     &rlen, errbuf, errlen);
    if (rc)
        return rc;
    rc = kq_data_decode_list_offsets_response(resp, rlen, &lr, derr, sizeof derr);
    free(resp);
    if (rc) {
        kq_errf(errbuf, errlen, "malformed ListOffsets answer from %s: %s", route.leader, derr);
        return rc;
    }
    if (lr.error) {
        rc = answer_error(c, &route, "ListOffsets", lr.error, lr.error_message, errbuf, errlen);
        goto out;
    }
    rc = KQ_ERR_MALFORMED;
    kq_errf(errbuf, errlen, "ListOffsets answer from %s has no result for %s-%" PRId32,
            route.leader, topic, partition);
    for (size_t i = 0; i < lr.n_partitions; i++) {
        const kq_list_offsets_partition_result *p = &lr.partitions[i];

        if (p->partition != partition || memcmp(p->topic_id, route.topic_id, 16) != 0)
            continue;
        if (p->error) {
            rc = answer_error(c, &route, "ListOffsets", p->error, NULL, errbuf, errlen);
        } else {
            *offset = p->offset;
            rc = 0;
        }
        break;
    }
out:
    kq_data_list_offsets_response_free(&lr);
    return rc;
}

typedef struct fetch_arg {
    int32_t partition;
    int64_t offset;
    int32_t max_wait_ms;
} fetch_arg;

static int build_fetch(const kq_dc_route *route, const void *arg, kq_buf *req)
{
    const fetch_arg *a = arg;
    kq_data_fetch_partition p;
    kq_data_fetch_request r;

    memset(&p, 0, sizeof p);
    memcpy(p.topic_id, route->topic_id, 16);
    p.partition = a->partition;
    p.current_leader_epoch = route->leader_epoch;
    p.fetch_offset = a->offset;
    p.last_fetched_epoch = -1;
    p.log_start_offset = -1;
    p.partition_max_bytes = PARTITION_MAX_BYTES;
    memset(&r, 0, sizeof r);
    r.replica_id = KQ_DATA_CONSUMER_REPLICA_ID;
    r.broker_epoch = -1;
    r.max_wait_ms = a->max_wait_ms;
    r.min_bytes = 1;
    r.max_bytes = FETCH_MAX_BYTES;
    r.partitions = &p;
    r.n_partitions = 1;
    return kq_data_encode_fetch_request("", -1, &r, req);
}

void kq_dc_fetch_result_free(kq_dc_fetch_result *r)
{
    if (!r)
        return;
    kq_data_fetch_response_free(&r->resp_);
    memset(r, 0, sizeof *r);
}

int kq_dc_fetch(kq_dc *c, const char *topic, int32_t partition, int64_t fetch_offset,
                int32_t max_wait_ms, kq_dc_fetch_result *out, char *errbuf, size_t errlen)
{
    fetch_arg a = {.partition = partition, .offset = fetch_offset, .max_wait_ms = max_wait_ms};
    kq_dc_route route;
    uint8_t *resp = NULL;
    size_t rlen = 0;
    char derr[256] = "";
    int rc;

    memset(out, 0, sizeof *out);
    out->high_watermark = -1;
    rc = leader_call(c, topic, partition, build_fetch, &a,
                     add_margin(c->timeout_ms + (uint32_t)(max_wait_ms > 0 ? max_wait_ms : 0)),
                     &route, &resp, &rlen, errbuf, errlen);
    if (rc)
        return rc;
    rc = kq_data_decode_fetch_response(resp, rlen, &out->resp_, derr, sizeof derr);
    free(resp);
    if (rc) {
        kq_errf(errbuf, errlen, "malformed Fetch answer from %s: %s", route.leader, derr);
        return rc;
    }
    if (out->resp_.error) {
        rc = answer_error(c, &route, "Fetch", out->resp_.error, out->resp_.error_message, errbuf,
                          errlen);
        kq_dc_fetch_result_free(out);
        return rc;
    }
    for (size_t i = 0; i < out->resp_.n_partitions; i++) {
        const kq_data_fetch_partition_result *p = &out->resp_.partitions[i];

        if (p->partition != partition || memcmp(p->topic_id, route.topic_id, 16) != 0)
            continue;
        if (p->error) {
            rc = answer_error(c, &route, "Fetch", p->error, NULL, errbuf, errlen);
            kq_dc_fetch_result_free(out);
            return rc;
        }
        out->high_watermark = p->high_watermark;
        out->batches = p->batches;
        out->n_batches = p->n_batches;
        return 0;
    }
    kq_errf(errbuf, errlen, "Fetch answer from %s has no result for %s-%" PRId32, route.leader,
            topic, partition);
    kq_dc_fetch_result_free(out);
    return KQ_ERR_MALFORMED;
}

/* ---- the producer ------------------------------------------------------------------------- */

static int random_producer_id(int64_t *out)
{
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return KQ_ERR_IO;
    do {
        n = read(fd, &v, sizeof v);
    } while (n < 0 && errno == EINTR);
    close(fd);
    if (n != (ssize_t)sizeof v)
        return KQ_ERR_IO;
    *out = (int64_t)(v & (uint64_t)INT64_MAX);
    return 0;
}

int kq_dc_producer_init(kq_dc_producer *p, const char *topic, int32_t partition, int32_t acks,
                        uint32_t request_timeout_ms, uint32_t delivery_timeout_ms)
{
    memset(p, 0, sizeof *p);
    p->topic = topic;
    p->partition = partition;
    p->acks = acks;
    p->request_timeout_ms = request_timeout_ms;
    p->delivery_timeout_ms = delivery_timeout_ms;
    return random_producer_id(&p->producer_id);
}

void kq_dc_sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void new_producer_id(kq_dc_producer *p)
{
    if (random_producer_id(&p->producer_id) != 0) /* /dev/urandom went away: any fresh id */
        p->producer_id = (int64_t)((kq_now_ns() ^ (uint64_t)p->producer_id) & (uint64_t)INT64_MAX);
    p->sequence = 0;
}

void kq_dc_send_record(kq_dc *c, kq_dc_producer *p, const uint8_t *value, size_t len,
                       kq_dc_produce_result *r, char *detail, size_t detail_len)
{
    uint64_t start = kq_now_ms(), deadline = start + p->delivery_timeout_ms;

    memset(r, 0, sizeof *r);
    r->acks = p->acks;
    r->offset = -1;
    kq_errf(detail, detail_len, "%s", "");
    for (;;) {
        uint64_t now = kq_now_ms(), left = deadline > now ? deadline - now : 1;
        uint32_t t = left < p->request_timeout_ms ? (uint32_t)left : p->request_timeout_ms;

        r->attempts++;
        r->error = kq_dc_produce(c, p->topic, p->partition, p->acks, t, p->producer_id, 0,
                                 p->sequence, value, len, &r->offset, detail, detail_len);
        if (r->error == 0 || !kq_dc_produce_retriable(r->error))
            break;
        uint64_t after = kq_now_ms();
        if (after >= deadline)
            break;
        /* The back-off, cut short at the deadline: the record then expires without another
         * attempt, its last error standing (as a producer's delivery timeout). */
        kq_dc_sleep_ms(deadline - after < KQ_DC_RETRY_BACKOFF_MS ? deadline - after
                                                                 : KQ_DC_RETRY_BACKOFF_MS);
        if (kq_now_ms() >= deadline)
            break;
    }
    r->elapsed_ms = kq_now_ms() - start;
    if (r->error)
        new_producer_id(p);
    else if (p->sequence == INT32_MAX)
        new_producer_id(p); /* sequences do not wrap */
    else
        p->sequence++;
}
