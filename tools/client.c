/*
 * Finding the active controller: bootstrap list, leader hints, per-attempt timeouts.
 *
 * A dead bootstrap address must not cost the full --timeout-ms. Two mechanisms:
 *
 *   1. A short connect phase: plain TCP connects to every bootstrap address at once, bounded
 *      by CONNECT_PHASE_MS. An address that refuses (or is unreachable) is recorded as failed
 *      without sending anything; one that did not connect in time is tried after the others.
 *      A leader hint is probed the same way before the request is sent to it.
 *   2. Reads (the Describe* APIs) are sent with kq_rpc_call_async, staggered: the next
 *      bootstrap address is started as soon as every started one has failed, or when none has
 *      answered usefully within a quarter of the timeout (at most STAGGER_MAX_MS), so a live but
 * hung controller cannot hold the command for the whole timeout. The first usable answer (success
 * or a non-retriable error) wins; NOT_CONTROLLER / NOT_LEADER_OR_FOLLOWER hints are followed per
 * bootstrap address (at most max_hops).
 *
 * Writes (everything else: Write, CreateTopics, ...) are not idempotent and are never in
 * flight at two controllers: they go to one address at a time, in bootstrap order, but skip
 * addresses that the connect phase found dead. Ownership: see kq_tools.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kq/error.h"
#include "kq/rpc.h"
#include "kq_tools.h"

#define MAX_ATTEMPTS 64
#define CONNECT_PHASE_MS 1000u
#define STAGGER_MAX_MS 2000u

typedef struct attempt {
    char addr[300];
    bool answered; /* an error answer (not a timeout or network failure) */
    char reason[400];
} attempt;

enum { PROBE_OK = 0, PROBE_DEAD, PROBE_SLOW };

typedef enum slot_state { SLOT_PENDING = 0, SLOT_INFLIGHT, SLOT_DONE } slot_state;

/* One bootstrap address and the hint chain that started from it. */
typedef struct slot {
    kq_tools_addr addr; /* current target (bootstrap address or a hint) */
    int hops;
    int probe; /* PROBE_* of the bootstrap address */
    slot_state state;
    int attempt; /* index in the attempt table of the in-flight request */
    kq_rpc_client *client;
    /* Filled by the callback (under mu). */
    bool completed;
    int err;
    uint8_t *data; /* malloc'd copy of the answer */
    size_t len;
} slot;

typedef struct call_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int outstanding; /* callbacks still to run */
    slot *slots;
} call_state;

typedef struct cb_arg {
    call_state *cs;
    int slot;
} cb_arg;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- connect phase ------------------------------------------------------------------------ */

#define PROBE_PER_ADDR 4      /* resolved addresses probed per host (e.g. ::1 and 127.0.0.1) */
#define PROBE_UNRESOLVED (-1) /* errs[i]: the host name did not resolve */

/* Start non-blocking connects to up to PROBE_PER_ADDR resolved addresses of a; fds[] gets the
 * sockets (-1 where none). Returns how many are in progress; when 0, *err says why. */
static int probe_start(const kq_tools_addr *a, int fds[PROBE_PER_ADDR], int *err)
{
    struct addrinfo hints, *res = NULL;
    char port[16];
    int started = 0;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    snprintf(port, sizeof port, "%d", a->port);
    for (int k = 0; k < PROBE_PER_ADDR; k++)
        fds[k] = -1;
    *err = 0;
    if (getaddrinfo(a->host, port, &hints, &res) != 0 || res == NULL) {
        *err = PROBE_UNRESOLVED;
        goto out;
    }
    for (struct addrinfo *ai = res; ai != NULL && started < PROBE_PER_ADDR; ai = ai->ai_next) {
        int fd =
            socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            *err = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
            *err = errno;
            close(fd);
            continue;
        }
        fds[started++] = fd;
    }
out:
    if (res != NULL)
        freeaddrinfo(res);
    return started;
}

/* Probe n addresses at once for at most limit_ms: out[i] is PROBE_OK (some resolved address
 * accepted), PROBE_DEAD (none did; errs[i] is an errno or PROBE_UNRESOLVED) or PROBE_SLOW. */
static void probe_all(const kq_tools_addr *addrs, int n, uint32_t limit_ms, int *out, int *errs)
{
    struct pollfd pfd[KQ_TOOLS_MAX_ADDRS * PROBE_PER_ADDR];
    int pending[KQ_TOOLS_MAX_ADDRS];
    int left = 0;
    for (int i = 0; i < n; i++) {
        int fds[PROBE_PER_ADDR];
        pending[i] = probe_start(&addrs[i], fds, &errs[i]);
        out[i] = pending[i] == 0 ? PROBE_DEAD : PROBE_SLOW;
        left += pending[i];
        for (int k = 0; k < PROBE_PER_ADDR; k++) {
            pfd[i * PROBE_PER_ADDR + k].fd = fds[k];
            pfd[i * PROBE_PER_ADDR + k].events = POLLOUT;
            pfd[i * PROBE_PER_ADDR + k].revents = 0;
        }
    }
    uint64_t deadline = now_ms() + limit_ms;
    while (left > 0) {
        uint64_t t = now_ms();
        if (t >= deadline)
            break;
        int r = poll(pfd, (nfds_t)(n * PROBE_PER_ADDR), (int)(deadline - t));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (int j = 0; j < n * PROBE_PER_ADDR; j++) {
            if (pfd[j].fd < 0 || pfd[j].revents == 0)
                continue;
            int i = j / PROBE_PER_ADDR, so = 0;
            socklen_t sl = sizeof so;
            if (getsockopt(pfd[j].fd, SOL_SOCKET, SO_ERROR, &so, &sl) != 0)
                so = errno;
            close(pfd[j].fd);
            pfd[j].fd = -1;
            left--;
            pending[i]--;
            if (out[i] == PROBE_OK)
                continue;
            if (so == 0) {
                out[i] = PROBE_OK;
            } else {
                errs[i] = so;
                if (pending[i] == 0)
                    out[i] = PROBE_DEAD;
            }
        }
    }
    for (int j = 0; j < n * PROBE_PER_ADDR; j++)
        if (pfd[j].fd >= 0)
            close(pfd[j].fd);
}

/* ---- attempts and answers ----------------------------------------------------------------- */

/* Parse a leader hint: "host:port", tolerating a "LISTENER://" or "tcp://" prefix. */
static bool parse_hint(const char *endpoint, kq_tools_addr *out)
{
    const char *p = strstr(endpoint, "://");
    p = p ? p + 3 : endpoint;
    char errbuf[128];
    int n = 0;
    return kq_tools_parse_addrs(p, out, 1, &n, errbuf, sizeof errbuf) == 0 && n == 1;
}

/* Returns the index of the new attempt (the last slot is reused when the table is full). */
static int add_attempt(attempt *at, int *n, const kq_tools_addr *addr)
{
    if (*n < MAX_ATTEMPTS)
        (*n)++;
    attempt *a = &at[*n - 1];
    kq_tools_format_addr(addr, a->addr, sizeof a->addr);
    a->answered = false;
    a->reason[0] = '\0';
    return *n - 1;
}

static void dead_reason(attempt *a, int err)
{
    snprintf(a->reason, sizeof a->reason, "%s (cannot connect: %s)",
             kq_err_name(KQ_ERR_NETWORK_EXCEPTION),
             err == PROBE_UNRESOLVED ? "host name does not resolve"
                                     : strerror(err ? err : ECONNREFUSED));
}

/* Decode an answer. Returns 0 with *resp decoded (any error code), or a kq error with reason
 * set (timeout, network, malformed answer). */
static int decode_answer(int err, const uint8_t *data, size_t len, uint32_t api_key,
                         kq_response *resp, char *reason, size_t reason_len)
{
    char errbuf[256] = "";
    memset(resp, 0, sizeof *resp);
    if (err != 0) {
        snprintf(reason, reason_len, "%s (%s)", kq_err_name(err), kq_err_message(err));
        return err;
    }
    int rc = kq_codec_decode_response(data, len, -1, resp, errbuf, sizeof errbuf);
    if (rc != 0) {
        snprintf(reason, reason_len, "malformed response: %s",
                 errbuf[0] ? errbuf : kq_err_message(rc));
        memset(resp, 0, sizeof *resp);
        return rc;
    }
    if (resp->api_key != api_key) {
        snprintf(reason, reason_len, "response is for api key %u, not %u", resp->api_key, api_key);
        kq_response_free(resp);
        memset(resp, 0, sizeof *resp);
        return KQ_ERR_MALFORMED;
    }
    return 0;
}

static bool is_read(uint32_t api_key)
{
    switch (api_key) {
    case KQ_API_DESCRIBE_QUORUM:
    case KQ_API_DESCRIBE_CONFIGS:
    case KQ_API_DESCRIBE_CLUSTER:
    case KQ_API_DESCRIBE_TOPICS:
    case KQ_API_DESCRIBE_FEATURES:
        return true;
    default:
        return false; /* anything else may change state: one controller at a time */
    }
}

static void on_answer(void *arg, int err, const uint8_t *data, size_t len)
{
    cb_arg *ca = arg;
    call_state *cs = ca->cs;
    uint8_t *copy = NULL;
    if (err == 0) {
        copy = malloc(len ? len : 1);
        if (copy == NULL)
            err = KQ_ERR_NOMEM;
        else if (len)
            memcpy(copy, data, len);
    }
    pthread_mutex_lock(&cs->mu);
    slot *s = &cs->slots[ca->slot];
    s->completed = true;
    s->err = err;
    s->data = copy;
    s->len = err == 0 ? len : 0;
    cs->outstanding--;
    pthread_cond_broadcast(&cs->cv);
    pthread_mutex_unlock(&cs->mu);
}

/* Send the request to s->addr (a new attempt). Called without cs->mu held. On failure to
 * start, the slot is left DONE with the attempt's reason set. */
static void launch(call_state *cs, int idx, bool probe_first, attempt *at, int *n_at,
                   const kq_buf *req, uint32_t timeout_ms, cb_arg *args)
{
    slot *s = &cs->slots[idx];
    char hp[300], url[320], errbuf[256] = "";
    int ai = add_attempt(at, n_at, &s->addr);
    s->attempt = ai;
    if (probe_first) {
        int st = PROBE_OK, perr = 0;
        probe_all(&s->addr, 1, timeout_ms < CONNECT_PHASE_MS ? timeout_ms : CONNECT_PHASE_MS, &st,
                  &perr);
        if (st == PROBE_DEAD) {
            dead_reason(&at[ai], perr);
            s->state = SLOT_DONE;
            return;
        }
    }
    kq_tools_format_addr(&s->addr, hp, sizeof hp);
    snprintf(url, sizeof url, "tcp://%s", hp);
    if (s->client == NULL) {
        int rc = kq_rpc_client_open(url, KQ_RPC_DEFAULT_MAX_MSG, &s->client, errbuf, sizeof errbuf);
        if (rc != 0) {
            snprintf(at[ai].reason, sizeof at[ai].reason, "%s",
                     errbuf[0] ? errbuf : kq_err_message(rc));
            s->client = NULL;
            s->state = SLOT_DONE;
            return;
        }
    }
    args[idx].cs = cs;
    args[idx].slot = idx;
    pthread_mutex_lock(&cs->mu);
    s->completed = false;
    s->data = NULL;
    s->len = 0;
    s->state = SLOT_INFLIGHT;
    cs->outstanding++;
    pthread_mutex_unlock(&cs->mu);
    int rc = kq_rpc_call_async(s->client, req->data, req->len, timeout_ms, on_answer, &args[idx]);
    if (rc != 0) {
        pthread_mutex_lock(&cs->mu);
        cs->outstanding--;
        s->state = SLOT_DONE;
        pthread_mutex_unlock(&cs->mu);
        snprintf(at[ai].reason, sizeof at[ai].reason, "%s (%s)", kq_err_name(rc),
                 kq_err_message(rc));
    }
}

static void close_client(slot *s)
{
    if (s->client != NULL) {
        kq_rpc_client_close(s->client);
        s->client = NULL;
    }
}

static void print_failure(const kq_tools_call_opts *o, const attempt *at, int n_at)
{
    char tried[2048] = "";
    size_t used = 0;
    for (int i = 0; i < n_at && used < sizeof tried; i++) {
        bool dup = false;
        for (int k = 0; k < i; k++)
            dup = dup || strcmp(at[k].addr, at[i].addr) == 0;
        if (dup)
            continue;
        int w = snprintf(tried + used, sizeof tried - used, "%s%s", used ? ", " : "", at[i].addr);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    kq_tools_errorf("no controller answered within %u ms (tried %s)", o->timeout_ms, tried);
    for (int i = 0; i < n_at; i++) {
        bool dup = !at[i].answered;
        for (int k = 0; k < i && !dup; k++)
            dup = at[k].answered && strcmp(at[k].addr, at[i].addr) == 0 &&
                  strcmp(at[k].reason, at[i].reason) == 0;
        if (!dup)
            fprintf(stderr, "  %s answered %s\n", at[i].addr, at[i].reason);
    }
}

int kq_tools_call_controller(const kq_tools_call_opts *o, uint32_t api_key, const kq_buf *req,
                             kq_response *resp)
{
    attempt at[MAX_ATTEMPTS];
    int n_at = 0;
    slot slots[KQ_TOOLS_MAX_ADDRS];
    cb_arg args[KQ_TOOLS_MAX_ADDRS];
    int order[KQ_TOOLS_MAX_ADDRS], perr[KQ_TOOLS_MAX_ADDRS], probe[KQ_TOOLS_MAX_ADDRS];
    call_state cs;
    pthread_condattr_t ca;
    int n = o->n_bootstrap < KQ_TOOLS_MAX_ADDRS ? o->n_bootstrap : KQ_TOOLS_MAX_ADDRS;
    bool read = is_read(api_key);
    /* Reads: how long one address may stay silent before the next one is started too. */
    uint64_t stagger = o->timeout_ms / 4u < STAGGER_MAX_MS ? o->timeout_ms / 4u : STAGGER_MAX_MS;
    int ret = KQ_EXIT_FAILURE;
    bool have_answer = false;
    bool stopped = false; /* a non-retriable error ended the search (already reported) */

    memset(resp, 0, sizeof *resp);
    memset(slots, 0, sizeof slots);
    memset(&cs, 0, sizeof cs);
    cs.slots = slots;
    pthread_mutex_init(&cs.mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cs.cv, &ca);
    pthread_condattr_destroy(&ca);

    /* Connect phase; launch order: reachable addresses in bootstrap order, then slow ones. */
    probe_all(o->bootstrap, n, o->timeout_ms < CONNECT_PHASE_MS ? o->timeout_ms : CONNECT_PHASE_MS,
              probe, perr);
    int n_order = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int b = 0; b < n; b++)
            if ((pass == 0) == (probe[b] != PROBE_SLOW))
                order[n_order++] = b;
    for (int b = 0; b < n; b++) {
        slots[b].addr = o->bootstrap[b];
        slots[b].probe = probe[b];
    }

    int next = 0; /* next index in order[] to launch */
    uint64_t last_launch = 0;
    for (;;) {
        /* Launch: when nothing is in flight, or (reads) when the stagger interval passed. */
        int inflight = 0;
        for (int b = 0; b < n; b++)
            inflight += slots[b].state == SLOT_INFLIGHT;
        while (next < n_order && (inflight == 0 || (read && now_ms() >= last_launch + stagger))) {
            int b = order[next++];
            if (slots[b].probe == PROBE_DEAD) {
                int ai = add_attempt(at, &n_at, &slots[b].addr);
                dead_reason(&at[ai], perr[b]);
                slots[b].state = SLOT_DONE;
                continue;
            }
            launch(&cs, b, false, at, &n_at, req, o->timeout_ms, args);
            if (slots[b].state == SLOT_INFLIGHT) {
                inflight++;
                last_launch = now_ms();
            }
        }
        if (inflight == 0)
            break; /* everything tried and failed */

        /* Wait for an answer (or the next stagger deadline). */
        int done = -1;
        pthread_mutex_lock(&cs.mu);
        for (;;) {
            for (int b = 0; b < n && done < 0; b++)
                if (slots[b].state == SLOT_INFLIGHT && slots[b].completed)
                    done = b;
            if (done >= 0)
                break;
            if (read && next < n_order) {
                uint64_t dl = last_launch + stagger;
                if (now_ms() >= dl)
                    break;
                struct timespec ts = {(time_t)(dl / 1000u), (long)(dl % 1000u) * 1000000L};
                pthread_cond_timedwait(&cs.cv, &cs.mu, &ts);
            } else {
                pthread_cond_wait(&cs.cv, &cs.mu);
            }
        }
        pthread_mutex_unlock(&cs.mu);
        if (done < 0)
            continue; /* stagger deadline: launch the next address */

        slot *s = &slots[done];
        attempt *a = &at[s->attempt];
        s->state = SLOT_DONE;
        int rc = decode_answer(s->err, s->data, s->len, api_key, resp, a->reason, sizeof a->reason);
        free(s->data);
        s->data = NULL;
        if (rc != 0)
            continue; /* no usable answer from this chain */
        if (resp->error == KQ_ERR_NONE) {
            have_answer = true;
            ret = KQ_EXIT_OK;
            break;
        }
        int err = resp->error;
        a->answered = true;
        snprintf(a->reason, sizeof a->reason, "%s: %s", kq_err_name(err),
                 resp->error_message[0] ? resp->error_message : kq_err_message(err));
        kq_tools_addr hint;
        bool follow = (err == KQ_ERR_NOT_CONTROLLER || err == KQ_ERR_NOT_LEADER_OR_FOLLOWER) &&
                      resp->leader_endpoint[0] != '\0' && parse_hint(resp->leader_endpoint, &hint);
        kq_response_free(resp);
        memset(resp, 0, sizeof *resp);
        if (follow && s->hops < o->max_hops) {
            s->hops++;
            s->addr = hint;
            close_client(s);
            launch(&cs, done, true, at, &n_at, req, o->timeout_ms, args);
            continue;
        }
        if (!kq_err_retriable(err)) {
            kq_tools_errorf("controller %s answered %s", a->addr, a->reason);
            stopped = true;
            break;
        }
    }

    /* Cancel what is still in flight and wait until every callback has run. */
    for (int b = 0; b < n; b++)
        close_client(&slots[b]);
    pthread_mutex_lock(&cs.mu);
    while (cs.outstanding > 0)
        pthread_cond_wait(&cs.cv, &cs.mu);
    pthread_mutex_unlock(&cs.mu);
    for (int b = 0; b < n; b++)
        free(slots[b].data);
    pthread_cond_destroy(&cs.cv);
    pthread_mutex_destroy(&cs.mu);

    if (!have_answer && !stopped)
        print_failure(o, at, n_at);
    return ret;
}
