/*
 * kq-produce-bench: produce latency and throughput of the broker data plane, and end-to-end
 * latency from a produce to a waiting consumer.
 *
 *   kq-produce-bench --bootstrap-server HOST:PORT[,...] --topic T [--partition P]
 *       [--producers N] [--seconds S] [--warmup S] [--record-bytes B] [--acks all|1]
 *       [--batch R] [--timeout-ms MS]
 *
 * finds the partition's leader with a Metadata request, then N threads, each with its own
 * kq_rpc_client, send Produce requests (R records of B bytes each, not idempotent: producer
 * fields -1) to the leader, one at a time, and time each request (monotonic clock) from the
 * send to the answer. Requests answered during the warm-up are not counted. One line:
 *
 *   produce: producers=N acks=all batch=R record_bytes=B requests=... records/s=...
 *       MB/s=... p50_ms=... p99_ms=... errors=...
 *
 * (MB/s counts record values only, 10^6 bytes.) Every failed request (transport error,
 * malformed answer, error answer) is counted in errors= and the first of each kind is
 * reported on stderr with its detail; after an error a producer waits 100 ms before its next
 * request (no hot loop against a broken leader).
 *
 *   kq-produce-bench --e2e --bootstrap-server ... --topic T [--seconds S] [--record-bytes B]
 *
 * runs one consumer thread that asks the leader for the latest readable offset (ListOffsets,
 * the high watermark) and then long-polls consumer Fetches (replica id -1, max_wait_ms 500)
 * from there, and one producer thread that sends one record at a time with acks=all, its
 * value holding this run's nonce and the send time (monotonic ns; a --record-bytes below 16
 * is raised to 16 to hold them). The producer sends the next record only once the consumer has
 * received the previous one (or after 5 s), so the consumer is always waiting when a record
 * arrives. latency = time the consumer received the Fetch answer - send time; a consumer sees only
 * records below the high watermark, so this is the commit latency as a consumer sees it. One line:
 *
 *   e2e: records=... p50_ms=... p99_ms=... ack_p50_ms=... ack_p99_ms=... missing=...
 *       errors=...
 *
 * (ack_*: the producer's acks=all round trips in the same run; missing: acknowledged records
 * the consumer did not see within 5 s.)
 *
 * The benchmark does not follow a leader change: requests to a leader that went away count
 * as errors. Exit status: 0 if some request succeeded (errors are printed, not hidden), 1 if
 * nothing succeeded or the leader could not be found, 2 for bad arguments.
 *
 * Ownership: everything is owned by main or by the thread that allocated it; threads borrow
 * the shared, read-only setup (target) for their whole life.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kq/codec.h"
#include "kq/data_codec.h"
#include "kq/error.h"
#include "kq/rpc.h"
#include "kq/util.h"

#define MAX_PRODUCERS 1024
#define MAX_BOOTSTRAP 32
#define METADATA_RPC_MS 3000u
#define LEADER_WAIT_MS 30000u /* how long to wait for the partition to have a leader */
#define RPC_MARGIN_MS 1000u   /* RPC timeout beyond the request's own timeout */
#define ERROR_BACKOFF_MS 100u
#define E2E_MAX_WAIT_MS 500
#define E2E_SEE_TIMEOUT_MS 5000u
#define E2E_VALUE_MIN 16 /* nonce (8 bytes) + send time (8 bytes) */
#define FETCH_PARTITION_MAX_BYTES (1024 * 1024)
#define MAX_ERR_KINDS 16

typedef struct opts {
    char bootstrap[MAX_BOOTSTRAP][300];
    int n_bootstrap;
    const char *topic;
    int32_t partition;
    int producers;
    double seconds;
    double warmup;
    size_t record_bytes;
    int32_t acks;
    int batch;
    uint32_t timeout_ms;
    bool e2e;
} opts;

/* Where to send: the partition's leader, as Metadata named it. */
typedef struct target {
    char url[320]; /* tcp://host:port */
    uint8_t topic_id[16];
    int32_t partition;
    int32_t leader_id;
    int32_t leader_epoch;
} target;

/* Errors by code, with the first detail of each code kept for the report. */
typedef struct err_tally {
    int code[MAX_ERR_KINDS];
    uint64_t count[MAX_ERR_KINDS];
    char first[MAX_ERR_KINDS][200];
    int n;
    uint64_t other; /* more kinds than MAX_ERR_KINDS */
    uint64_t total;
} err_tally;

static void tally(err_tally *t, int code, const char *detail)
{
    t->total++;
    for (int i = 0; i < t->n; i++) {
        if (t->code[i] == code) {
            t->count[i]++;
            return;
        }
    }
    if (t->n == MAX_ERR_KINDS) {
        t->other++;
        return;
    }
    t->code[t->n] = code;
    t->count[t->n] = 1;
    snprintf(t->first[t->n], sizeof t->first[t->n], "%s", detail ? detail : "");
    t->n++;
}

static void tally_merge(err_tally *dst, const err_tally *src)
{
    for (int i = 0; i < src->n; i++) {
        bool found = false;
        for (int j = 0; j < dst->n && !found; j++) {
            if (dst->code[j] == src->code[i]) {
                dst->count[j] += src->count[i];
                found = true;
            }
        }
        if (!found && dst->n < MAX_ERR_KINDS) {
            dst->code[dst->n] = src->code[i];
            dst->count[dst->n] = src->count[i];
            memcpy(dst->first[dst->n], src->first[i], sizeof dst->first[0]);
            dst->n++;
        } else if (!found) {
            dst->other += src->count[i];
        }
    }
    dst->other += src->other;
    dst->total += src->total;
}

/* One stderr line per error kind: "errors: NOT_ENOUGH_REPLICAS x3 (first: ...)". */
static void tally_report(const char *what, const err_tally *t)
{
    for (int i = 0; i < t->n; i++)
        fprintf(stderr, "kq-produce-bench: %s errors: %s x%" PRIu64 " (first: %s)\n", what,
                kq_err_name(t->code[i]), t->count[i], t->first[i]);
    if (t->other)
        fprintf(stderr, "kq-produce-bench: %s errors: %" PRIu64 " more of other kinds\n", what,
                t->other);
}

static void sleep_ms(uint32_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static double ms_of(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* ---- arguments ---------------------------------------------------------------------------- */

static int parse_long(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "kq-produce-bench: %s '%s' is not a whole number in %ld..%ld\n", flag, s,
                lo, hi);
        return KQ_ERR_CONFIG;
    }
    *out = v;
    return 0;
}

static int parse_secs(const char *flag, const char *s, double lo, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= lo) || v > 86400.0) {
        fprintf(stderr, "kq-produce-bench: %s '%s' is not a number of seconds in %g..86400\n", flag,
                s, lo);
        return KQ_ERR_CONFIG;
    }
    *out = v;
    return 0;
}

/* "host:port,host:port" -> o->bootstrap; each entry must have a host and a numeric port. */
static int parse_bootstrap(const char *list, opts *o)
{
    const char *p = list;
    o->n_bootstrap = 0;
    while (*p != '\0') {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char item[300];
        if (n == 0 || n >= sizeof item || o->n_bootstrap == MAX_BOOTSTRAP)
            goto bad;
        memcpy(item, p, n);
        item[n] = '\0';
        const char *colon = strrchr(item, ':');
        long port = 0;
        char *end = NULL;
        if (colon == NULL || colon == item)
            goto bad;
        errno = 0;
        port = strtol(colon + 1, &end, 10);
        if (errno != 0 || end == colon + 1 || *end != '\0' || port < 1 || port > 65535)
            goto bad;
        snprintf(o->bootstrap[o->n_bootstrap++], sizeof o->bootstrap[0], "%s", item);
        p += n;
        if (*p == ',')
            p++;
    }
    if (o->n_bootstrap > 0)
        return 0;
bad:
    fprintf(stderr,
            "kq-produce-bench: --bootstrap-server '%s' is not a list of HOST:PORT (at most %d, "
            "comma-separated)\n",
            list, MAX_BOOTSTRAP);
    return KQ_ERR_CONFIG;
}

static void usage(void)
{
    fprintf(stderr, "usage: kq-produce-bench --bootstrap-server HOST:PORT[,...] --topic T "
                    "[--partition P]\n"
                    "           [--producers N] [--seconds S] [--warmup S] [--record-bytes B]\n"
                    "           [--acks all|1] [--batch R] [--timeout-ms MS]\n"
                    "       kq-produce-bench --e2e --bootstrap-server HOST:PORT[,...] --topic T\n"
                    "           [--partition P] [--seconds S] [--warmup S] [--record-bytes B]\n");
}

static int parse_args(int argc, char **argv, opts *o)
{
    static const struct option lopts[] = {{"bootstrap-server", required_argument, NULL, 'b'},
                                          {"topic", required_argument, NULL, 't'},
                                          {"partition", required_argument, NULL, 'p'},
                                          {"producers", required_argument, NULL, 'n'},
                                          {"seconds", required_argument, NULL, 's'},
                                          {"warmup", required_argument, NULL, 'W'},
                                          {"record-bytes", required_argument, NULL, 'B'},
                                          {"acks", required_argument, NULL, 'a'},
                                          {"batch", required_argument, NULL, 'r'},
                                          {"timeout-ms", required_argument, NULL, 'T'},
                                          {"e2e", no_argument, NULL, 'e'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    long v = 0;
    int c;
    memset(o, 0, sizeof *o);
    o->producers = 1;
    o->seconds = 5;
    o->warmup = 0.5;
    o->record_bytes = 100;
    o->acks = KQ_DATA_ACKS_ALL;
    o->batch = 1;
    o->timeout_ms = 30000;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (parse_bootstrap(optarg, o) != 0)
                return 2;
            break;
        case 't':
            if (optarg[0] == '\0' || strlen(optarg) > KQ_DATA_MAX_TOPIC_NAME) {
                fprintf(stderr, "kq-produce-bench: --topic must be 1..%d bytes\n",
                        KQ_DATA_MAX_TOPIC_NAME);
                return 2;
            }
            o->topic = optarg;
            break;
        case 'p':
            if (parse_long("--partition", optarg, 0, INT32_MAX, &v) != 0)
                return 2;
            o->partition = (int32_t)v;
            break;
        case 'n':
            if (parse_long("--producers", optarg, 1, MAX_PRODUCERS, &v) != 0)
                return 2;
            o->producers = (int)v;
            break;
        case 's':
            if (parse_secs("--seconds", optarg, 0.001, &o->seconds) != 0)
                return 2;
            break;
        case 'W':
            if (parse_secs("--warmup", optarg, 0.0, &o->warmup) != 0)
                return 2;
            break;
        case 'B':
            if (parse_long("--record-bytes", optarg, 0, KQ_DATA_MAX_RECORD_BYTES, &v) != 0)
                return 2;
            o->record_bytes = (size_t)v;
            break;
        case 'a':
            if (strcmp(optarg, "all") == 0 || strcmp(optarg, "-1") == 0) {
                o->acks = KQ_DATA_ACKS_ALL;
            } else if (strcmp(optarg, "1") == 0) {
                o->acks = 1;
            } else {
                fprintf(stderr, "kq-produce-bench: --acks '%s' is invalid (must be all, -1 or 1)\n",
                        optarg);
                return 2;
            }
            break;
        case 'r':
            if (parse_long("--batch", optarg, 1, KQ_DATA_MAX_RECORDS, &v) != 0)
                return 2;
            o->batch = (int)v;
            break;
        case 'T':
            if (parse_long("--timeout-ms", optarg, 1, 600000, &v) != 0)
                return 2;
            o->timeout_ms = (uint32_t)v;
            break;
        case 'e':
            o->e2e = true;
            break;
        case 'h':
            usage();
            return 1;
        default:
            if (optopt != 0)
                fprintf(stderr, "kq-produce-bench: option -%c is unknown or needs a value\n",
                        optopt);
            else
                fprintf(stderr, "kq-produce-bench: option '%s' is unknown or needs a value\n",
                        argv[optind - 1]);
            usage();
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kq-produce-bench: unexpected argument '%s'\n", argv[optind]);
        usage();
        return 2;
    }
    if (o->n_bootstrap == 0 || o->topic == NULL) {
        fprintf(stderr, "kq-produce-bench: --bootstrap-server and --topic are required\n");
        usage();
        return 2;
    }
    if ((uint64_t)o->batch * o->record_bytes > KQ_DATA_MAX_PRODUCE_BYTES) {
        fprintf(stderr,
                "kq-produce-bench: --batch %d x --record-bytes %zu exceeds the %d-byte Produce "
                "limit\n",
                o->batch, o->record_bytes, KQ_DATA_MAX_PRODUCE_BYTES);
        return 2;
    }
    if (o->e2e && (o->producers != 1 || o->batch != 1 || o->acks != KQ_DATA_ACKS_ALL)) {
        fprintf(stderr, "kq-produce-bench: --e2e uses one producer, batch 1 and acks=all; "
                        "drop --producers/--batch/--acks\n");
        return 2;
    }
    if (o->e2e && o->record_bytes < E2E_VALUE_MIN)
        o->record_bytes = E2E_VALUE_MIN; /* the value must hold the nonce and the send time */
    return 0;
}

/* ---- leader lookup ------------------------------------------------------------------------ */

/* One RPC on a fresh client; *resp malloc'd. */
static int call_once(const char *url, const kq_buf *req, uint32_t timeout_ms, uint8_t **resp,
                     size_t *len, char *err, size_t errlen)
{
    kq_rpc_client *cl = NULL;
    int rc = kq_rpc_client_open(url, KQ_RPC_DEFAULT_MAX_MSG, &cl, err, errlen);
    if (rc != 0)
        return rc;
    rc = kq_rpc_call(cl, req->data, req->len, timeout_ms, resp, len);
    if (rc != 0)
        kq_errf(err, errlen, "%s", kq_err_name(rc));
    kq_rpc_client_close(cl);
    return rc;
}

/* Ask one broker; 0 with *t filled when the partition has a leader with a known endpoint, a
 * kq error with why set otherwise. */
static int metadata_from(const char *addr, const opts *o, target *t, char *why, size_t whylen)
{
    const char *names[1] = {o->topic};
    kq_data_metadata_request mr = {.topics = names, .n_topics = 1};
    kq_data_metadata_response m;
    kq_buf req = {0};
    uint8_t *resp = NULL;
    size_t len = 0;
    char url[320], err[256] = "";
    int rc;

    memset(&m, 0, sizeof m);
    snprintf(url, sizeof url, "tcp://%s", addr);
    if ((rc = kq_data_encode_metadata_request("", -1, &mr, &req)) != 0) {
        kq_errf(why, whylen, "cannot encode Metadata: %s", kq_err_name(rc));
        goto out;
    }
    if ((rc = call_once(url, &req, METADATA_RPC_MS, &resp, &len, err, sizeof err)) != 0) {
        kq_errf(why, whylen, "%s: no Metadata answer (%s)", addr, err);
        goto out;
    }
    if ((rc = kq_data_decode_metadata_response(resp, len, &m, err, sizeof err)) != 0) {
        kq_errf(why, whylen, "%s: malformed Metadata answer: %s", addr, err);
        goto out;
    }
    if (m.error != 0) {
        rc = m.error;
        kq_errf(why, whylen, "%s: Metadata error %s %s", addr, kq_err_name(rc), m.error_message);
        goto out;
    }
    rc = KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    kq_errf(why, whylen, "%s: Metadata does not list topic %s", addr, o->topic);
    for (size_t i = 0; i < m.n_topics; i++) {
        const kq_data_metadata_topic *tp = &m.topics[i];
        if (strcmp(tp->name, o->topic) != 0)
            continue;
        if (tp->error != 0) {
            rc = tp->error;
            kq_errf(why, whylen, "%s: topic %s: %s", addr, o->topic, kq_err_name(rc));
            goto out;
        }
        kq_errf(why, whylen, "%s: topic %s has no partition %" PRId32 " (%zu partitions)", addr,
                o->topic, o->partition, tp->n_partitions);
        for (size_t j = 0; j < tp->n_partitions; j++) {
            const kq_data_metadata_partition *p = &tp->partitions[j];
            if (p->partition != o->partition)
                continue;
            if (p->error != 0 || p->leader_id < 0) {
                rc = p->error ? p->error : KQ_ERR_LEADER_NOT_AVAILABLE;
                kq_errf(why, whylen, "%s: %s-%" PRId32 " has no leader (%s)", addr, o->topic,
                        o->partition, kq_err_name(rc));
                goto out;
            }
            rc = KQ_ERR_LEADER_NOT_AVAILABLE;
            kq_errf(why, whylen, "%s: leader %" PRId32 " of %s-%" PRId32 " has no endpoint", addr,
                    p->leader_id, o->topic, o->partition);
            for (size_t k = 0; k < m.n_brokers; k++) {
                const kq_data_metadata_broker *b = &m.brokers[k];
                if (b->id != p->leader_id)
                    continue;
                if (strchr(b->host, ':') != NULL)
                    snprintf(t->url, sizeof t->url, "tcp://[%s]:%" PRId32, b->host, b->port);
                else
                    snprintf(t->url, sizeof t->url, "tcp://%s:%" PRId32, b->host, b->port);
                memcpy(t->topic_id, tp->topic_id, 16);
                t->partition = p->partition;
                t->leader_id = p->leader_id;
                t->leader_epoch = p->leader_epoch;
                rc = 0;
            }
            goto out;
        }
        goto out;
    }
out:
    kq_data_metadata_response_free(&m);
    free(resp);
    kq_buf_free(&req);
    return rc;
}

/* Try the bootstrap list in turn until some broker names the leader (a topic created a moment
 * ago may have none yet), for at most LEADER_WAIT_MS. */
static int find_leader(const opts *o, target *t)
{
    uint64_t deadline = kq_now_ms() + LEADER_WAIT_MS;
    char why[600] = "";
    for (;;) {
        for (int i = 0; i < o->n_bootstrap; i++) {
            if (metadata_from(o->bootstrap[i], o, t, why, sizeof why) == 0)
                return 0;
        }
        if (kq_now_ms() >= deadline) {
            fprintf(stderr,
                    "kq-produce-bench: no leader for %s-%" PRId32 " after %u ms; last answer: %s\n",
                    o->topic, o->partition, LEADER_WAIT_MS, why);
            return KQ_ERR_LEADER_NOT_AVAILABLE;
        }
        sleep_ms(200);
    }
}

/* ---- Produce ------------------------------------------------------------------------------ */

/* Build one Produce of n records, each value the `len` bytes of `value`. */
static int encode_produce(const target *t, int32_t acks, uint32_t timeout_ms, const uint8_t *value,
                          size_t len, int n, kq_buf *out)
{
    const uint8_t **recs = calloc((size_t)n, sizeof *recs);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    kq_produce_request p;
    int rc = KQ_ERR_NOMEM;

    if (recs == NULL || lens == NULL)
        goto out;
    for (int i = 0; i < n; i++) {
        recs[i] = value;
        lens[i] = len;
    }
    memset(&p, 0, sizeof p);
    memcpy(p.topic_id, t->topic_id, 16);
    p.partition = t->partition;
    p.acks = acks;
    p.timeout_ms = (int32_t)timeout_ms;
    p.producer_id = KQ_DATA_NO_PRODUCER_ID;
    p.producer_epoch = -1;
    p.base_sequence = -1;
    p.records = recs;
    p.record_lens = lens;
    p.n_records = (size_t)n;
    rc = kq_data_encode_produce_request("", -1, &p, out);
out:
    free(recs);
    free(lens);
    return rc;
}

/* Send one encoded Produce and check its answer: 0 with *offset, or an error with detail. */
static int produce_once(kq_rpc_client *cl, const kq_buf *req, uint32_t timeout_ms, int64_t *offset,
                        char *detail, size_t dlen)
{
    kq_produce_response pr;
    uint8_t *resp = NULL;
    size_t len = 0;
    char err[256] = "";
    int rc = kq_rpc_call(cl, req->data, req->len, timeout_ms + RPC_MARGIN_MS, &resp, &len);

    if (rc != 0) {
        kq_errf(detail, dlen, "no answer: %s", kq_err_message(rc));
        return rc;
    }
    rc = kq_data_decode_produce_response(resp, len, &pr, err, sizeof err);
    free(resp);
    if (rc != 0) {
        kq_errf(detail, dlen, "malformed Produce answer: %s", err);
        return rc;
    }
    if (pr.error != 0) {
        kq_errf(detail, dlen, "Produce answer: %s%s%s", kq_err_name(pr.error),
                pr.error_message[0] ? ": " : "", pr.error_message);
        return pr.error;
    }
    *offset = pr.base_offset;
    return 0;
}

typedef struct producer {
    pthread_t th;
    const opts *o;
    const target *t;
    uint64_t warm_ns, end_ns;
    kq_hist hist;
    uint64_t last_done_ns; /* end of the last counted request */
    err_tally errs;
} producer;

static void *run_producer(void *arg)
{
    producer *w = arg;
    const opts *o = w->o;
    kq_rpc_client *cl = NULL;
    kq_buf req = {0};
    uint8_t *value = malloc(o->record_bytes ? o->record_bytes : 1);
    char err[256] = "";
    int rc;

    if (value == NULL) {
        tally(&w->errs, KQ_ERR_NOMEM, "cannot allocate the record");
        goto out;
    }
    for (size_t i = 0; i < o->record_bytes; i++)
        value[i] = (uint8_t)('a' + i % 26);
    if ((rc = encode_produce(w->t, o->acks, o->timeout_ms, value, o->record_bytes, o->batch,
                             &req)) != 0) {
        tally(&w->errs, rc, "cannot encode the Produce request");
        goto out;
    }
    if ((rc = kq_rpc_client_open(w->t->url, KQ_RPC_DEFAULT_MAX_MSG, &cl, err, sizeof err)) != 0) {
        tally(&w->errs, rc, err);
        goto out;
    }
    for (;;) {
        uint64_t t0 = kq_now_ns();
        int64_t offset = -1;
        if (t0 >= w->end_ns)
            break;
        rc = produce_once(cl, &req, o->timeout_ms, &offset, err, sizeof err);
        uint64_t t1 = kq_now_ns();
        if (rc != 0) {
            tally(&w->errs, rc, err);
            sleep_ms(ERROR_BACKOFF_MS);
            continue;
        }
        if (t1 >= w->warm_ns) { /* answered after the warm-up: counted, however long it took */
            kq_hist_add(&w->hist, t1 - t0);
            w->last_done_ns = t1;
        }
    }
out:
    if (cl != NULL)
        kq_rpc_client_close(cl);
    kq_buf_free(&req);
    free(value);
    return NULL;
}

static int produce_bench(const opts *o, const target *t)
{
    producer *ws = calloc((size_t)o->producers, sizeof *ws);
    kq_hist total;
    err_tally errs;
    int started = 0, rc = 1;
    uint64_t start = kq_now_ns(), warm = start + (uint64_t)(o->warmup * 1e9),
             end = warm + (uint64_t)(o->seconds * 1e9), last = warm;

    memset(&errs, 0, sizeof errs);
    kq_hist_init(&total);
    if (ws == NULL) {
        fprintf(stderr, "kq-produce-bench: out of memory\n");
        return 1;
    }
    for (int i = 0; i < o->producers; i++) {
        ws[i].o = o;
        ws[i].t = t;
        ws[i].warm_ns = warm;
        ws[i].end_ns = end;
        kq_hist_init(&ws[i].hist);
        if (pthread_create(&ws[i].th, NULL, run_producer, &ws[i]) != 0) {
            fprintf(stderr, "kq-produce-bench: cannot start producer thread %d\n", i);
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(ws[i].th, NULL);
        kq_hist_merge(&total, &ws[i].hist);
        tally_merge(&errs, &ws[i].errs);
        if (ws[i].last_done_ns > last)
            last = ws[i].last_done_ns;
    }
    /* Throughput over the measured window: from the end of the warm-up to the last counted
     * answer (at least the planned duration). */
    double secs = (double)(last - warm) / 1e9;
    if (secs < o->seconds)
        secs = o->seconds;
    double recs = (double)total.n * o->batch / secs;
    printf("produce: producers=%d acks=%s batch=%d record_bytes=%zu requests=%" PRIu64
           " records/s=%.0f MB/s=%.2f p50_ms=%.3f p99_ms=%.3f errors=%" PRIu64 "\n",
           started, o->acks == KQ_DATA_ACKS_ALL ? "all" : "1", o->batch, o->record_bytes, total.n,
           recs, recs * (double)o->record_bytes / 1e6, ms_of(kq_hist_quantile(&total, 0.50)),
           ms_of(kq_hist_quantile(&total, 0.99)), errs.total);
    fflush(stdout);
    tally_report("produce", &errs);
    if (started < o->producers)
        rc = 1;
    else if (total.n == 0)
        fprintf(stderr, "kq-produce-bench: no Produce request succeeded\n");
    else
        rc = 0;
    free(ws);
    return rc;
}

/* ---- end to end --------------------------------------------------------------------------- */

typedef struct e2e {
    const opts *o;
    const target *t;
    uint64_t nonce;
    uint64_t warm_ns, end_ns;
    atomic_int consumer_ready; /* 1: positioned at the latest offset, 2: gave up */
    atomic_int stop;
    atomic_llong seen_upto; /* highest offset of ours the consumer received, -1 none */
    kq_hist e2e_hist;       /* consumer thread */
    uint64_t consumer_records;
    err_tally consumer_errs;
    kq_hist ack_hist; /* producer thread */
    uint64_t acked;
    uint64_t missing;
    err_tally producer_errs;
} e2e;

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* The latest offset a consumer may read (ListOffsets LATEST = the high watermark). */
static int latest_offset(kq_rpc_client *cl, const target *t, uint32_t timeout_ms, int64_t *out,
                         char *detail, size_t dlen)
{
    kq_list_offsets_partition p = {.partition = t->partition,
                                   .current_leader_epoch = t->leader_epoch,
                                   .timestamp = KQ_DATA_LATEST_TIMESTAMP};
    kq_list_offsets_request r = {.replica_id = -1, .partitions = &p, .n_partitions = 1};
    kq_list_offsets_response lr;
    kq_buf req = {0};
    uint8_t *resp = NULL;
    size_t len = 0;
    char err[256] = "";
    int rc;

    memset(&lr, 0, sizeof lr);
    memcpy(p.topic_id, t->topic_id, 16);
    if ((rc = kq_data_encode_list_offsets_request("", -1, &r, &req)) != 0) {
        kq_errf(detail, dlen, "cannot encode ListOffsets");
        goto out;
    }
    if ((rc = kq_rpc_call(cl, req.data, req.len, timeout_ms, &resp, &len)) != 0) {
        kq_errf(detail, dlen, "ListOffsets: no answer: %s", kq_err_message(rc));
        goto out;
    }
    if ((rc = kq_data_decode_list_offsets_response(resp, len, &lr, err, sizeof err)) != 0) {
        kq_errf(detail, dlen, "malformed ListOffsets answer: %s", err);
        goto out;
    }
    if (lr.error != 0) {
        rc = lr.error;
        kq_errf(detail, dlen, "ListOffsets answer: %s %s", kq_err_name(rc), lr.error_message);
        goto out;
    }
    rc = KQ_ERR_MALFORMED;
    kq_errf(detail, dlen, "ListOffsets answer has no result for the partition");
    for (size_t i = 0; i < lr.n_partitions; i++) {
        if (lr.partitions[i].partition != t->partition ||
            memcmp(lr.partitions[i].topic_id, t->topic_id, 16) != 0)
            continue;
        rc = lr.partitions[i].error;
        if (rc != 0)
            kq_errf(detail, dlen, "ListOffsets partition error: %s", kq_err_name(rc));
        else
            *out = lr.partitions[i].offset;
        break;
    }
out:
    kq_data_list_offsets_response_free(&lr);
    free(resp);
    kq_buf_free(&req);
    return rc;
}

typedef struct walk_ctx {
    e2e *x;
    uint64_t recv_ns;
} walk_ctx;

static int on_record(void *arg, int64_t offset, const uint8_t *value, size_t len)
{
    walk_ctx *w = arg;
    e2e *x = w->x;
    if (len < E2E_VALUE_MIN || get_u64(value) != x->nonce)
        return 0; /* not ours (another writer to the topic) */
    uint64_t sent = get_u64(value + 8);
    if (sent >= x->warm_ns)
        kq_hist_add(&x->e2e_hist, w->recv_ns > sent ? w->recv_ns - sent : 0);
    x->consumer_records++;
    if (offset > atomic_load(&x->seen_upto))
        atomic_store(&x->seen_upto, (long long)offset);
    return 0;
}

/* One consumer Fetch: 0 with *next advanced past what came back. */
static int fetch_once(kq_rpc_client *cl, e2e *x, int64_t *next, char *detail, size_t dlen)
{
    const target *t = x->t;
    kq_data_fetch_partition p;
    kq_data_fetch_request r;
    kq_data_fetch_response fr;
    kq_buf req = {0};
    uint8_t *resp = NULL;
    size_t len = 0;
    char err[256] = "";
    int rc;

    memset(&fr, 0, sizeof fr);
    memset(&p, 0, sizeof p);
    memcpy(p.topic_id, t->topic_id, 16);
    p.partition = t->partition;
    p.current_leader_epoch = t->leader_epoch;
    p.fetch_offset = *next;
    p.last_fetched_epoch = -1;
    p.log_start_offset = -1;
    p.partition_max_bytes = FETCH_PARTITION_MAX_BYTES;
    memset(&r, 0, sizeof r);
    r.replica_id = KQ_DATA_CONSUMER_REPLICA_ID;
    r.broker_epoch = -1;
    r.max_wait_ms = E2E_MAX_WAIT_MS;
    r.min_bytes = 1;
    r.max_bytes = FETCH_PARTITION_MAX_BYTES;
    r.partitions = &p;
    r.n_partitions = 1;
    if ((rc = kq_data_encode_fetch_request("", -1, &r, &req)) != 0) {
        kq_errf(detail, dlen, "cannot encode Fetch");
        goto out;
    }
    rc = kq_rpc_call(cl, req.data, req.len, x->o->timeout_ms + E2E_MAX_WAIT_MS, &resp, &len);
    walk_ctx w = {.x = x, .recv_ns = kq_now_ns()};
    if (rc != 0) {
        kq_errf(detail, dlen, "Fetch: no answer: %s", kq_err_message(rc));
        goto out;
    }
    if ((rc = kq_data_decode_fetch_response(resp, len, &fr, err, sizeof err)) != 0) {
        kq_errf(detail, dlen, "malformed Fetch answer: %s", err);
        goto out;
    }
    if (fr.error != 0) {
        rc = fr.error;
        kq_errf(detail, dlen, "Fetch answer: %s %s", kq_err_name(rc), fr.error_message);
        goto out;
    }
    for (size_t i = 0; i < fr.n_partitions; i++) {
        const kq_data_fetch_partition_result *pr = &fr.partitions[i];
        if (pr->partition != t->partition || memcmp(pr->topic_id, t->topic_id, 16) != 0)
            continue;
        if (pr->error != 0) {
            rc = pr->error;
            kq_errf(detail, dlen, "Fetch partition error: %s", kq_err_name(rc));
            goto out;
        }
        for (size_t b = 0; b < pr->n_batches; b++) {
            const kq_data_batch *bt = &pr->batches[b];
            if (bt->base_offset + bt->count <= *next)
                continue; /* already seen (a batch that starts before the fetch offset) */
            rc = kq_data_records_walk(bt->records, bt->len, bt->base_offset, bt->count, on_record,
                                      &w, err, sizeof err);
            if (rc != 0) {
                kq_errf(detail, dlen, "fetched batch at %" PRId64 ": %s", bt->base_offset, err);
                goto out;
            }
            *next = bt->base_offset + bt->count;
        }
        goto out;
    }
    rc = KQ_ERR_MALFORMED;
    kq_errf(detail, dlen, "Fetch answer has no result for the partition");
out:
    kq_data_fetch_response_free(&fr);
    free(resp);
    kq_buf_free(&req);
    return rc;
}

static void *run_consumer(void *arg)
{
    e2e *x = arg;
    kq_rpc_client *cl = NULL;
    char err[256] = "";
    int64_t next = -1;
    int rc;

    if ((rc = kq_rpc_client_open(x->t->url, KQ_RPC_DEFAULT_MAX_MSG, &cl, err, sizeof err)) != 0) {
        tally(&x->consumer_errs, rc, err);
        atomic_store(&x->consumer_ready, 2);
        return NULL;
    }
    for (int attempt = 0; next < 0; attempt++) {
        if ((rc = latest_offset(cl, x->t, x->o->timeout_ms, &next, err, sizeof err)) != 0) {
            tally(&x->consumer_errs, rc, err);
            if (attempt == 50) {
                atomic_store(&x->consumer_ready, 2);
                goto out;
            }
            sleep_ms(ERROR_BACKOFF_MS);
        }
    }
    atomic_store(&x->consumer_ready, 1);
    while (!atomic_load(&x->stop)) {
        if ((rc = fetch_once(cl, x, &next, err, sizeof err)) != 0) {
            tally(&x->consumer_errs, rc, err);
            sleep_ms(ERROR_BACKOFF_MS);
        }
    }
out:
    kq_rpc_client_close(cl);
    return NULL;
}

/* Wait until the consumer received offset `off` (or gave up / timed out): true if seen. */
static bool wait_seen(e2e *x, int64_t off, uint32_t limit_ms)
{
    uint64_t deadline = kq_now_ms() + limit_ms;
    while (atomic_load(&x->seen_upto) < off) {
        if (kq_now_ms() >= deadline)
            return false;
        sleep_ms(1); /* only paces the producer: the consumer times its own receipt */
    }
    return true;
}

static void *run_e2e_producer(void *arg)
{
    e2e *x = arg;
    const opts *o = x->o;
    kq_rpc_client *cl = NULL;
    uint8_t *value = calloc(1, o->record_bytes);
    char err[256] = "";
    int rc;

    if (value == NULL) {
        tally(&x->producer_errs, KQ_ERR_NOMEM, "cannot allocate the record");
        return NULL;
    }
    if ((rc = kq_rpc_client_open(x->t->url, KQ_RPC_DEFAULT_MAX_MSG, &cl, err, sizeof err)) != 0) {
        tally(&x->producer_errs, rc, err);
        goto out;
    }
    put_u64(value, x->nonce);
    for (;;) {
        kq_buf req = {0};
        int64_t offset = -1;
        uint64_t t0 = kq_now_ns();
        if (t0 >= x->end_ns)
            break;
        put_u64(value + 8, t0);
        rc = encode_produce(x->t, KQ_DATA_ACKS_ALL, o->timeout_ms, value, o->record_bytes, 1, &req);
        if (rc == 0) {
            t0 = kq_now_ns(); /* the time in the value is within microseconds of this */
            rc = produce_once(cl, &req, o->timeout_ms, &offset, err, sizeof err);
        } else {
            snprintf(err, sizeof err, "cannot encode the Produce request");
        }
        uint64_t t1 = kq_now_ns();
        kq_buf_free(&req);
        if (rc != 0) {
            tally(&x->producer_errs, rc, err);
            sleep_ms(ERROR_BACKOFF_MS);
            continue;
        }
        x->acked++;
        if (t0 >= x->warm_ns)
            kq_hist_add(&x->ack_hist, t1 - t0);
        if (!wait_seen(x, offset, E2E_SEE_TIMEOUT_MS)) {
            x->missing++;
            fprintf(stderr,
                    "kq-produce-bench: e2e: record acknowledged at offset %" PRId64
                    " not received by the consumer within %u ms\n",
                    offset, E2E_SEE_TIMEOUT_MS);
        }
    }
out:
    if (cl != NULL)
        kq_rpc_client_close(cl);
    free(value);
    return NULL;
}

static int e2e_bench(const opts *o, const target *t)
{
    static e2e x; /* two histograms: keep them off the stack */
    pthread_t cth, pth;
    int rc = 1;

    memset(&x, 0, sizeof x);
    x.o = o;
    x.t = t;
    x.nonce = kq_now_ns() ^ ((uint64_t)getpid() << 32) ^ 0x6b71653265ull;
    atomic_init(&x.seen_upto, -1);
    atomic_init(&x.consumer_ready, 0);
    atomic_init(&x.stop, 0);
    kq_hist_init(&x.e2e_hist);
    kq_hist_init(&x.ack_hist);
    if (pthread_create(&cth, NULL, run_consumer, &x) != 0) {
        fprintf(stderr, "kq-produce-bench: cannot start the consumer thread\n");
        return 1;
    }
    while (atomic_load(&x.consumer_ready) == 0)
        sleep_ms(5);
    if (atomic_load(&x.consumer_ready) == 1) {
        sleep_ms(50); /* the consumer's first long-poll is parked at the leader */
        uint64_t start = kq_now_ns();
        x.warm_ns = start + (uint64_t)(o->warmup * 1e9);
        x.end_ns = x.warm_ns + (uint64_t)(o->seconds * 1e9);
        if (pthread_create(&pth, NULL, run_e2e_producer, &x) != 0)
            fprintf(stderr, "kq-produce-bench: cannot start the producer thread\n");
        else
            pthread_join(pth, NULL);
    }
    atomic_store(&x.stop, 1);
    pthread_join(cth, NULL);
    printf("e2e: records=%" PRIu64 " p50_ms=%.3f p99_ms=%.3f ack_p50_ms=%.3f ack_p99_ms=%.3f "
           "missing=%" PRIu64 " errors=%" PRIu64 "\n",
           x.e2e_hist.n, ms_of(kq_hist_quantile(&x.e2e_hist, 0.50)),
           ms_of(kq_hist_quantile(&x.e2e_hist, 0.99)), ms_of(kq_hist_quantile(&x.ack_hist, 0.50)),
           ms_of(kq_hist_quantile(&x.ack_hist, 0.99)), x.missing,
           x.producer_errs.total + x.consumer_errs.total);
    fflush(stdout);
    tally_report("e2e producer", &x.producer_errs);
    tally_report("e2e consumer", &x.consumer_errs);
    if (x.e2e_hist.n == 0)
        fprintf(stderr, "kq-produce-bench: e2e: the consumer received no record\n");
    else
        rc = 0;
    return rc;
}

int main(int argc, char **argv)
{
    opts o;
    target t;
    int rc = parse_args(argc, argv, &o);

    if (rc != 0)
        return rc;
    memset(&t, 0, sizeof t);
    if (find_leader(&o, &t) != 0)
        return 1;
    fprintf(stderr,
            "kq-produce-bench: %s-%" PRId32 " leader %" PRId32 " (epoch %" PRId32 ") at %s\n",
            o.topic, o.partition, t.leader_id, t.leader_epoch, t.url);
    return o.e2e ? e2e_bench(&o, &t) : produce_bench(&o, &t);
}
