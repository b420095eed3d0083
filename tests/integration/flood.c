/*
 * kq-flood: a hostile client for the tests and benchmarks of the limits before allocation and
 * the connection caps. It builds its messages with protobuf-c directly, so no encoder check
 * stands between it and the server.
 *
 *   kq-flood --server HOST:PORT --case dense-write [--records N] [--parallel P]
 *       P clients at once each send one Write of N empty records (default 7,000,000: 14 MB),
 *       and print each answer: `answer error=NAME message=TEXT`.
 *   kq-flood --server HOST:PORT --case merge-write [--records N] [--parallel P]
 *       the same with a Write body repeated N times (default 200,000), one record each.
 *   kq-flood --server HOST:PORT --case hold --connections N [--source ADDR] [--hold-ms MS]
 *       opens N TCP connections from ADDR (default 127.0.0.2), does the SP handshake (REQ) on
 *       each and sends nothing more; after MS (default 2000) prints
 *       `held=H closed=C` (C: connections the server closed).
 *   kq-flood --server HOST:PORT --case http-slow --connections N [--source ADDR]
 *            [--hold-ms MS]
 *       opens N TCP connections to an HTTP port, sends half a request head on each, and prints
 *       `closed_at_once=A closed_in_time=T still_open=S`: A closed within 1 s, T closed
 *       before MS (default 15000) ran out, S still open then.
 *
 * Exit status: 0 when every request got an answer (or, for hold and http-slow, when the
 * counts were printed), 1 otherwise, 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "kq/codec.h"
#include "kq/error.h"
#include "kq_rpc.pb-c.h"

typedef struct opts {
    const char *server, *kase, *source;
    long records, parallel, connections, hold_ms;
} opts;

typedef struct job {
    const opts *o;
    const uint8_t *msg;
    size_t len;
    char line[400];
    bool answered;
} job;

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* kq.Request{api_key Write, write{records: "" x n}}, or with the body repeated n times. */
static uint8_t *build_write(long n, bool repeat_body, size_t *len)
{
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__WriteRequest w = KQ__WRITE_REQUEST__INIT;
    ProtobufCBinaryData one = {0, NULL};
    ProtobufCBinaryData *recs = NULL;
    uint8_t *buf, *p;
    size_t head;

    rq.api_key = KQ_API_WRITE;
    rq.cluster_id = "";
    rq.sender_id = -1;
    rq.body_case = KQ__REQUEST__BODY_WRITE;
    rq.write = &w;
    if (!repeat_body) {
        recs = calloc((size_t)n, sizeof *recs);
        if (recs == NULL)
            return NULL;
        w.n_records = (size_t)n;
        w.records = recs;
        buf = malloc(kq__request__get_packed_size(&rq));
        if (buf != NULL)
            *len = kq__request__pack(&rq, buf);
        free(recs);
        return buf;
    }
    /* the envelope with an empty body, then n copies of field 15 = {records: ""} */
    w.n_records = 1;
    w.records = &one;
    head = kq__request__get_packed_size(&rq);
    buf = malloc(head * (size_t)n);
    if (buf == NULL)
        return NULL;
    kq__request__pack(&rq, buf);
    p = buf + head;
    for (long i = 1; i < n; i++) {
        static const uint8_t body[] = {15 << 3 | 2, 2, 1 << 3 | 2, 0};

        memcpy(p, body, sizeof body);
        p += sizeof body;
    }
    *len = (size_t)(p - buf);
    return buf;
}

static void *send_one(void *arg)
{
    job *j = arg;
    nng_socket s;
    nng_msg *reply = NULL;
    char url[300];
    kq_response r;
    char err[256] = "";
    int rv;

    snprintf(url, sizeof url, "tcp://%s", j->o->server);
    if ((rv = nng_req0_open(&s)) != 0) {
        snprintf(j->line, sizeof j->line, "no answer: %s", nng_strerror(rv));
        return NULL;
    }
    nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, 64u << 20);
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 30000);
    nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 30000);
    if ((rv = nng_dial(s, url, NULL, 0)) != 0 ||
        (rv = nng_send(s, (void *)j->msg, j->len, 0)) != 0 ||
        (rv = nng_recvmsg(s, &reply, 0)) != 0) {
        snprintf(j->line, sizeof j->line, "no answer: %s", nng_strerror(rv));
        nng_close(s);
        return NULL;
    }
    rv = kq_codec_decode_response(nng_msg_body(reply), nng_msg_len(reply), -1, &r, err, sizeof err);
    if (rv != 0)
        snprintf(j->line, sizeof j->line, "answer undecodable: %s", err);
    else
        snprintf(j->line, sizeof j->line, "answer error=%s message=%s", kq_err_name(r.error),
                 r.error_message);
    j->answered = rv == 0;
    kq_response_free(&r);
    nng_msg_free(reply);
    nng_close(s);
    return NULL;
}

static int run_writes(const opts *o, bool repeat_body)
{
    size_t len = 0;
    uint8_t *msg = build_write(o->records, repeat_body, &len);
    pthread_t th[64];
    job jobs[64];
    int failed = 0;

    if (msg == NULL) {
        fprintf(stderr, "kq-flood: out of memory building the message\n");
        return 1;
    }
    printf("message bytes=%zu parallel=%ld\n", len, o->parallel);
    for (long i = 0; i < o->parallel; i++) {
        jobs[i] = (job){.o = o, .msg = msg, .len = len};
        pthread_create(&th[i], NULL, send_one, &jobs[i]);
    }
    for (long i = 0; i < o->parallel; i++) {
        pthread_join(th[i], NULL);
        printf("%s\n", jobs[i].line);
        failed += !jobs[i].answered;
    }
    free(msg);
    return failed ? 1 : 0;
}

static int connect_from(const opts *o)
{
    char host[256];
    const char *colon = strrchr(o->server, ':');
    struct sockaddr_in to = {.sin_family = AF_INET}, from = {.sin_family = AF_INET};
    int fd;

    if (colon == NULL || (size_t)(colon - o->server) >= sizeof host)
        return -1;
    snprintf(host, sizeof host, "%.*s", (int)(colon - o->server), o->server);
    to.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &to.sin_addr) != 1 ||
        inet_pton(AF_INET, o->source, &from.sin_addr) != 1)
        return -1;
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&from, sizeof from) != 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Has the server closed fd (end of stream or reset)? Reads and drops what it sent. */
static bool peer_closed(int fd, int wait_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char buf[256];

    while (poll(&p, 1, wait_ms) == 1) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);

        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return true;
        wait_ms = 0;
    }
    return false;
}

static int run_connections(const opts *o, bool http)
{
    static const uint8_t sp_req[8] = {0, 'S', 'P', 0, 0, 0x30, 0, 0}; /* SP header, REQ0 */
    static const char half_head[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
    int *fds = calloc((size_t)o->connections, sizeof *fds);
    long opened = 0, at_once = 0, in_time = 0, still = 0;
    uint64_t deadline;

    if (fds == NULL)
        return 1;
    for (long i = 0; i < o->connections; i++) {
        fds[i] = connect_from(o);
        if (fds[i] < 0)
            continue;
        opened++;
        if (http)
            (void)!send(fds[i], half_head, sizeof half_head - 1, MSG_NOSIGNAL);
        else
            (void)!send(fds[i], sp_req, sizeof sp_req, MSG_NOSIGNAL);
    }
    deadline = now_ms() + (uint64_t)o->hold_ms;
    for (long i = 0; i < o->connections; i++) {
        if (fds[i] < 0)
            continue;
        if (peer_closed(fds[i], i == 0 ? 1000 : 0)) {
            at_once++;
            close(fds[i]);
            fds[i] = -1;
        }
    }
    for (long i = 0; i < o->connections; i++) {
        if (fds[i] < 0)
            continue;
        uint64_t now = now_ms();

        if (peer_closed(fds[i], now < deadline ? (int)(deadline - now) : 0))
            in_time++;
        else
            still++;
        close(fds[i]);
    }
    free(fds);
    if (http)
        printf("opened=%ld closed_at_once=%ld closed_in_time=%ld still_open=%ld\n", opened, at_once,
               in_time, still);
    else
        printf("opened=%ld held=%ld closed=%ld\n", opened, still, at_once + in_time);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: kq-flood --server HOST:PORT --case dense-write|merge-write|hold|"
                    "http-slow [--records N] [--parallel P] [--connections N] [--source ADDR] "
                    "[--hold-ms MS]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    opts o = {
        .source = "127.0.0.2", .records = -1, .parallel = 1, .connections = 10, .hold_ms = -1};

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (v == NULL)
            usage();
        if (!strcmp(a, "--server"))
            o.server = v;
        else if (!strcmp(a, "--case"))
            o.kase = v;
        else if (!strcmp(a, "--source"))
            o.source = v;
        else if (!strcmp(a, "--records"))
            o.records = atol(v);
        else if (!strcmp(a, "--parallel"))
            o.parallel = atol(v);
        else if (!strcmp(a, "--connections"))
            o.connections = atol(v);
        else if (!strcmp(a, "--hold-ms"))
            o.hold_ms = atol(v);
        else
            usage();
        i++;
    }
    if (o.server == NULL || o.kase == NULL || o.parallel < 1 || o.parallel > 64 ||
        o.connections < 1 || o.connections > 100000)
        usage();
    if (!strcmp(o.kase, "dense-write") || !strcmp(o.kase, "merge-write")) {
        bool merge = !strcmp(o.kase, "merge-write");

        if (o.records < 0)
            o.records = merge ? 200000 : 7000000;
        if (o.records < 1)
            usage();
        return run_writes(&o, merge);
    }
    if (!strcmp(o.kase, "hold") || !strcmp(o.kase, "http-slow")) {
        bool http = !strcmp(o.kase, "http-slow");

        if (o.hold_ms < 0)
            o.hold_ms = http ? 15000 : 2000;
        return run_connections(&o, http);
    }
    usage();
}
