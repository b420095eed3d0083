/*
 * Finding the active controller: bootstrap list, leader hints, per-attempt timeouts, and the
 * retry policy that every kq command talking to controllers shares.
 *
 * One pass over the bootstrap list:
 *
 * A dead bootstrap address must not cost the full per-attempt timeout. Two mechanisms:
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
 * bootstrap address (at most max_hops), except a hint naming the address that just answered (a
 * new leader that is not active yet): asking it again at once is pointless.
 *
 * Writes (everything else: Write, CreateTopics, ...) are not idempotent and are never in
 * flight at two controllers: they go to one address at a time, in bootstrap order, but skip
 * addresses that the connect phase found dead.
 *
 * Passes: while a controller election is under way every address may fail (the old leader is
 * dead, standbys still name it or no leader, the new leader is not active yet). When a pass
 * ends without an answer and one of its failures is retriable (kq_err_retriable of the error
 * answered, a timeout, a refused or reset connection), the next pass starts after a backoff
 * (KQ_TOOLS_BACKOFF_MIN_MS doubling up to KQ_TOOLS_BACKOFF_MAX_MS, +-20% jitter), until the
 * next pass would start after the overall timeout; every request's timeout is clamped to the
 * time left. A non-retriable error answer ends the call at once. Ownership: see kq_tools.h.
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
#include "kq/util.h"
#include "kq_tools.h"

#define MAX_ATTEMPTS 64
#define CONNECT_PHASE_MS 1000u
#define STAGGER_MAX_MS 2000u

typedef struct attempt {
    char addr[300];
    bool answered;    /* an error answer (not a timeout or network failure) */
    bool retriable;   /* the failure may go away (worth another pass) */
    char reason[640]; /* error name, message (< 256) and leader hint (< 256) */
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

/* Close a probe socket with a reset (SO_LINGER 0) rather than a FIN: nng 1.5.2's listener
 * treats a peer that closes cleanly during the SP handshake as an unknown accept error and
 * backs off 100 ms before accepting again, which delayed the real connection that follows the
 * probe by 100 ms (every command, every retry pass); a reset makes it accept again at once. */
static void probe_close(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
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
            probe_close(pfd[j].fd);
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
            probe_close(pfd[j].fd);
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
    a->retriable = false;
    a->reason[0] = '\0';
    return *n - 1;
}

static void dead_reason(attempt *a, int err)
{
    a->retriable = err != PROBE_UNRESOLVED; /* a refused connection: maybe restarting */
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
    case KQ_API_DESCRIBE_ACLS:
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

/* Milliseconds from now until deadline (0 when passed). */
static uint32_t time_left(uint64_t deadline)
{
    uint64_t t = now_ms();
    return t >= deadline ? 0u : (uint32_t)(deadline - t);
}

/* The deadline passed before a request could be sent: the attempt counts as timed out. */
static void no_time_left(attempt *a, slot *s)
{
    snprintf(a->reason, sizeof a->reason, "%s (no time left)",
             kq_err_name(KQ_ERR_REQUEST_TIMED_OUT));
    a->retriable = true;
    s->state = SLOT_DONE;
}

/* Send the request to s->addr (a new attempt), with a timeout of attempt_ms clamped to the
 * time left before deadline. Called without cs->mu held. On failure to start, the slot is left
 * DONE with the attempt's reason set. */
static void launch(call_state *cs, int idx, bool probe_first, attempt *at, int *n_at,
                   const kq_buf *req, uint32_t attempt_ms, uint64_t deadline, cb_arg *args)
{
    slot *s = &cs->slots[idx];
    char hp[300], url[320], errbuf[256] = "";
    int ai = add_attempt(at, n_at, &s->addr);
    uint32_t left = time_left(deadline), timeout_ms = attempt_ms < left ? attempt_ms : left;
    s->attempt = ai;
    if (timeout_ms == 0) {
        no_time_left(&at[ai], s);
        return;
    }
    if (probe_first) {
        int st = PROBE_OK, perr = 0;
        probe_all(&s->addr, 1, timeout_ms < CONNECT_PHASE_MS ? timeout_ms : CONNECT_PHASE_MS, &st,
                  &perr);
        if (st == PROBE_DEAD) {
            dead_reason(&at[ai], perr);
            s->state = SLOT_DONE;
            return;
        }
        left = time_left(deadline);
        timeout_ms = timeout_ms < left ? timeout_ms : left;
        if (timeout_ms == 0) {
            no_time_left(&at[ai], s);
            return;
        }
    }
    kq_tools_format_addr(&s->addr, hp, sizeof hp);
    snprintf(url, sizeof url, "%s%s", kq_tools_scheme(), hp);
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
        at[ai].retriable = kq_err_retriable(rc) != 0;
    }
}

static void close_client(slot *s)
{
    if (s->client != NULL) {
        kq_rpc_client_close(s->client);
        s->client = NULL;
    }
}

static bool same_addr(const kq_tools_addr *a, const kq_tools_addr *b)
{
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

typedef enum pass_result {
    PASS_ANSWER = 0, /* *resp holds an answer with error NONE */
    PASS_STOPPED,    /* a non-retriable error answer (already reported) */
    PASS_FAILED,     /* no usable answer: see the attempts */
} pass_result;

/* One pass over the bootstrap list (see the top of this file). Fills at[0..*n_at). */
static pass_result one_pass(const kq_tools_call_opts *o, uint32_t api_key, const kq_buf *req,
                            kq_response *resp, uint64_t deadline, attempt *at, int *n_at)
{
    slot slots[KQ_TOOLS_MAX_ADDRS];
    cb_arg args[KQ_TOOLS_MAX_ADDRS];
    int order[KQ_TOOLS_MAX_ADDRS], perr[KQ_TOOLS_MAX_ADDRS], probe[KQ_TOOLS_MAX_ADDRS];
    call_state cs;
    pthread_condattr_t ca;
    int n = o->n_bootstrap < KQ_TOOLS_MAX_ADDRS ? o->n_bootstrap : KQ_TOOLS_MAX_ADDRS;
    bool read = is_read(api_key);
    uint32_t left = time_left(deadline);
    uint32_t attempt_ms = o->attempt_timeout_ms ? o->attempt_timeout_ms : o->timeout_ms;
    if (attempt_ms > left)
        attempt_ms = left;
    /* Reads: how long one address may stay silent before the next one is started too. */
    uint64_t stagger = attempt_ms / 4u < STAGGER_MAX_MS ? attempt_ms / 4u : STAGGER_MAX_MS;
    pass_result ret = PASS_FAILED;

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
    probe_all(o->bootstrap, n, attempt_ms < CONNECT_PHASE_MS ? attempt_ms : CONNECT_PHASE_MS, probe,
              perr);
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
                int ai = add_attempt(at, n_at, &slots[b].addr);
                dead_reason(&at[ai], perr[b]);
                slots[b].state = SLOT_DONE;
                continue;
            }
            launch(&cs, b, false, at, n_at, req, attempt_ms, deadline, args);
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
        if (rc != 0) {
            /* Timeouts and lost connections are retriable; a malformed answer is not. */
            a->retriable = s->err != 0 && kq_err_retriable(rc);
            continue; /* no usable answer from this chain */
        }
        if (resp->error == KQ_ERR_NONE) {
            ret = PASS_ANSWER;
            break;
        }
        int err = resp->error;
        bool redirect = err == KQ_ERR_NOT_CONTROLLER || err == KQ_ERR_NOT_LEADER_OR_FOLLOWER;
        bool hinted = redirect && resp->leader_endpoint[0] != '\0';
        a->answered = true;
        a->retriable = kq_err_retriable(err) != 0;
        snprintf(a->reason, sizeof a->reason, "%s: %s%s%s%s", kq_err_name(err),
                 resp->error_message[0] ? resp->error_message : kq_err_message(err),
                 hinted ? " (leader hint " : "", hinted ? resp->leader_endpoint : "",
                 hinted ? ")" : "");
        kq_tools_addr hint;
        bool follow =
            hinted && parse_hint(resp->leader_endpoint, &hint) && !same_addr(&hint, &s->addr);
        kq_response_free(resp);
        memset(resp, 0, sizeof *resp);
        if (follow && s->hops < o->max_hops) {
            s->hops++;
            s->addr = hint;
            close_client(s);
            launch(&cs, done, true, at, n_at, req, attempt_ms, deadline, args);
            continue;
        }
        if (!a->retriable) {
            kq_tools_errorf("controller %s answered %s", a->addr, a->reason);
            ret = PASS_STOPPED;
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
    return ret;
}

/* at[i] repeats an earlier attempt (same address and reason). */
static bool repeated(const attempt *at, int i)
{
    for (int k = 0; k < i; k++)
        if (strcmp(at[k].addr, at[i].addr) == 0 && strcmp(at[k].reason, at[i].reason) == 0)
            return true;
    return false;
}

/* The last pass failed: timed_out says whether it was retriable (and time ran out) or every
 * failure was permanent. */
static void print_failure(const kq_tools_call_opts *o, const attempt *at, int n_at, bool timed_out)
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
    if (timed_out)
        kq_tools_errorf("no controller answered within %u ms (tried %s)", o->timeout_ms, tried);
    else
        kq_tools_errorf("no controller gave a usable answer (tried %s)", tried);
    /* Error answers, and failures that no retry can cure (the others: see the first line). */
    for (int i = 0; i < n_at; i++) {
        if ((!at[i].answered && at[i].retriable) || repeated(at, i))
            continue;
        if (at[i].answered)
            fprintf(stderr, "  %s answered %s\n", at[i].addr, at[i].reason);
        else
            fprintf(stderr, "  %s: %s\n", at[i].addr, at[i].reason);
    }
}

static void sleep_ms(uint32_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int kq_tools_call_controller(const kq_tools_call_opts *o, uint32_t api_key, const kq_buf *req,
                             kq_response *resp)
{
    attempt at[MAX_ATTEMPTS];
    uint64_t deadline = now_ms() + o->timeout_ms;
    uint32_t backoff = KQ_TOOLS_BACKOFF_MIN_MS;
    kq_prng prng;
    int passes = 0, ret = KQ_EXIT_FAILURE;

    kq_prng_seed(&prng, kq_now_ns() ^ ((uint64_t)getpid() << 32));
    for (;;) {
        int n_at = 0;
        passes++;
        pass_result r = one_pass(o, api_key, req, resp, deadline, at, &n_at);
        if (r == PASS_ANSWER) {
            ret = KQ_EXIT_OK;
            break;
        }
        if (r == PASS_STOPPED)
            break;
        bool retriable = false;
        for (int i = 0; i < n_at; i++)
            retriable = retriable || at[i].retriable;
        /* Jitter +-20% (as Kafka's retry backoff); no pass starts after the deadline. */
        uint32_t wait = (uint32_t)((uint64_t)backoff * (80u + kq_prng_below(&prng, 41)) / 100u);
        uint32_t left = time_left(deadline);
        if (!retriable || wait >= left) {
            print_failure(o, at, n_at, retriable);
            break;
        }
        if (o->verbose != NULL)
            for (int i = 0; i < n_at; i++)
                if (!repeated(at, i))
                    fprintf(o->verbose, "kq: retrying in %u ms after pass %d: %s: %s\n", wait,
                            passes, at[i].addr, at[i].reason);
        sleep_ms(wait);
        backoff = backoff * 2u < KQ_TOOLS_BACKOFF_MAX_MS ? backoff * 2u : KQ_TOOLS_BACKOFF_MAX_MS;
    }
    if (o->passes != NULL)
        *o->passes = passes;
    return ret;
}
