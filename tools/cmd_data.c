/*
 * kq produce / kq consume: the data-plane commands (docs/tools.md). The client, the
 * producer's retry loop (kq_dc_send_record), argument parsing and output lines are in lib
 * kq_tools (tools/data_client.h); this file reads stdin and runs the consumer's fetch loop.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_client.h"
#include "kq/error.h"
#include "kq/util.h"

#define FETCH_MAX_WAIT_MS 500

/* ---- produce ------------------------------------------------------------------------------ */

int kq_cmd_produce(int argc, char **argv)
{
    kq_dc_produce_args a;
    kq_dc_producer p;
    kq_dc *dc = NULL;
    char err[2048] = "";
    char *line = NULL;
    size_t cap = 0;
    int failed = 0, ret = KQ_EXIT_FAILURE, rc;

    if (kq_dc_parse_produce_args(argc, argv, &a, err, sizeof err) != 0)
        return kq_tools_usage_error("produce", kq_dc_produce_usage, "%s", err);
    if (a.help) {
        fputs(kq_dc_produce_usage, stdout);
        return KQ_EXIT_OK;
    }
    if (kq_dc_producer_init(&p, a.topic, a.partition, a.acks, (uint32_t)a.request_timeout_ms,
                            (uint32_t)a.delivery_timeout_ms) != 0) {
        kq_tools_errorf("cannot read /dev/urandom for a producer id: %s", strerror(errno));
        return KQ_EXIT_FAILURE;
    }
    if (a.command_config && kq_tools_command_config(a.command_config, err, sizeof err) != 0)
        return kq_tools_usage_error("produce", NULL, "%s", err);
    if ((rc = kq_dc_open(a.bootstrap, a.n_bootstrap, (uint32_t)a.request_timeout_ms, &dc)) != 0) {
        kq_tools_errorf("%s", kq_err_message(rc));
        return KQ_EXIT_FAILURE;
    }
    /* Like a Kafka producer's max.block.ms: keep asking for metadata (a broker may be paused
     * or restarting) for up to the request timeout. */
    {
        uint64_t give_up = kq_now_ms() + (uint64_t)a.request_timeout_ms;
        while ((rc = kq_dc_refresh(dc, a.topic, err, sizeof err)) != 0 && kq_now_ms() < give_up)
            usleep(200 * 1000);
        if (rc != 0) {
            kq_tools_errorf("%s (kept asking for metadata for --request-timeout-ms %lld)", err,
                            (long long)a.request_timeout_ms);
            goto out;
        }
    }
    for (;;) {
        kq_dc_produce_result r;
        const char *v = a.value;
        size_t len = v ? strlen(v) : 0;

        if (!v) {
            ssize_t n = getline(&line, &cap, stdin);

            if (n < 0)
                break;
            if (n > 0 && line[n - 1] == '\n')
                n--;
            v = line;
            len = (size_t)n;
        }
        kq_dc_send_record(dc, &p, (const uint8_t *)v, len, &r, err, sizeof err);
        kq_dc_print_produce_result(stdout, &r);
        fflush(stdout);
        if (r.error) {
            fprintf(stderr, "kq produce: %s\n", err[0] ? err : kq_err_message(r.error));
            failed++;
        }
        if (a.value)
            break;
    }
    if (!a.value && ferror(stdin)) {
        kq_tools_errorf("cannot read stdin: %s", strerror(errno));
        goto out;
    }
    ret = failed ? KQ_EXIT_FAILURE : KQ_EXIT_OK;
out:
    free(line);
    kq_dc_close(dc);
    return ret;
}

/* ---- consume ------------------------------------------------------------------------------ */

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

typedef struct consumer {
    const kq_dc_consume_args *a;
    int64_t offset; /* next offset to print */
    int64_t count;
    bool done; /* max records reached */
} consumer;

static int on_record(void *arg, int64_t offset, const uint8_t *value, size_t len)
{
    consumer *c = arg;

    if (c->done || offset < c->offset)
        return 0; /* a batch may start before the fetch offset */
    kq_dc_print_record(stdout, offset, value, len, c->a->print_offsets);
    c->offset = offset + 1;
    c->count++;
    if (c->a->max_records > 0 && c->count >= c->a->max_records)
        c->done = true;
    return 0;
}

/* A retriable error: say so on stderr when it differs from the previous one (no flood). */
static void warn_retry(int err, const char *detail)
{
    static int last;

    if (err == last)
        return;
    last = err;
    fprintf(stderr, "kq consume: %s (retrying)\n", detail[0] ? detail : kq_err_message(err));
}

/* Waits out the back-off; false when the idle deadline (0: none) or a signal ends the wait. */
static bool backoff(uint64_t idle_deadline)
{
    if (g_stop || (idle_deadline && kq_now_ms() + KQ_DC_RETRY_BACKOFF_MS >= idle_deadline))
        return false;
    kq_dc_sleep_ms(KQ_DC_RETRY_BACKOFF_MS);
    return !g_stop;
}

#define STOPPED (-1) /* by the idle deadline or a signal: not an error */

/* The start offset (earliest or latest), retrying retriable errors. 0, STOPPED or a kq error
 * (printed). */
static int start_offset(kq_dc *dc, consumer *c, uint64_t idle_deadline)
{
    char err[1024] = "";
    int64_t ts = c->a->from_beginning ? KQ_DATA_EARLIEST_TIMESTAMP : KQ_DATA_LATEST_TIMESTAMP;

    for (;;) {
        int rc =
            kq_dc_list_offset(dc, c->a->topic, c->a->partition, ts, &c->offset, err, sizeof err);

        if (rc == 0)
            return 0;
        if (!kq_dc_consume_retriable(rc)) {
            kq_tools_errorf("cannot find the %s offset of %s-%" PRId32 ": %s",
                            c->a->from_beginning ? "earliest" : "latest", c->a->topic,
                            c->a->partition, err);
            return rc;
        }
        warn_retry(rc, err);
        if (!backoff(idle_deadline))
            return STOPPED;
    }
}

int kq_cmd_consume(int argc, char **argv)
{
    kq_dc_consume_args a;
    consumer c;
    kq_dc *dc = NULL;
    char err[2048] = "";
    struct sigaction sa;
    uint64_t last_progress;
    int ret = KQ_EXIT_FAILURE, rc;

    memset(&c, 0, sizeof c);
    if (kq_dc_parse_consume_args(argc, argv, &a, err, sizeof err) != 0)
        return kq_tools_usage_error("consume", kq_dc_consume_usage, "%s", err);
    if (a.help) {
        fputs(kq_dc_consume_usage, stdout);
        return KQ_EXIT_OK;
    }
    c.a = &a;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (a.command_config && kq_tools_command_config(a.command_config, err, sizeof err) != 0)
        return kq_tools_usage_error("consume", NULL, "%s", err);
    if ((rc = kq_dc_open(a.bootstrap, a.n_bootstrap, KQ_DC_DEFAULT_REQUEST_TIMEOUT_MS, &dc)) != 0) {
        kq_tools_errorf("%s", kq_err_message(rc));
        return KQ_EXIT_FAILURE;
    }
    last_progress = kq_now_ms();
#define IDLE_DEADLINE() (a.timeout_ms > 0 ? last_progress + (uint64_t)a.timeout_ms : 0)
    if ((rc = kq_dc_refresh(dc, a.topic, err, sizeof err)) != 0) {
        kq_tools_errorf("%s", err);
        goto out;
    }
    rc = start_offset(dc, &c, IDLE_DEADLINE());
    while (rc == 0 && !g_stop && !c.done) {
        uint64_t now = kq_now_ms(), dl = IDLE_DEADLINE();
        int32_t wait = FETCH_MAX_WAIT_MS;
        kq_dc_fetch_result fr;
        int64_t before = c.count;

        if (dl && now >= dl)
            break;
        if (dl && dl - now < (uint64_t)wait)
            wait = (int32_t)(dl - now);
        rc = kq_dc_fetch(dc, a.topic, a.partition, c.offset, wait, &fr, err, sizeof err);
        if (rc == KQ_ERR_OFFSET_OUT_OF_RANGE) {
            fprintf(stderr, "kq consume: offset %" PRId64 " is out of range; resetting to the %s\n",
                    c.offset, a.from_beginning ? "earliest" : "latest");
            rc = start_offset(dc, &c, dl);
            continue;
        }
        if (rc) {
            if (!kq_dc_consume_retriable(rc)) {
                kq_tools_errorf("%s", err);
                break;
            }
            warn_retry(rc, err);
            rc = backoff(dl) ? 0 : STOPPED;
            continue;
        }
        for (size_t i = 0; i < fr.n_batches && !c.done && rc == 0; i++) {
            const kq_data_batch *b = &fr.batches[i];

            if (b->base_offset + b->count <= c.offset)
                continue;
            rc = kq_data_records_walk(b->records, b->len, b->base_offset, b->count, on_record, &c,
                                      err, sizeof err);
            if (rc)
                kq_tools_errorf("batch at offset %" PRId64 " of %s-%" PRId32 ": %s", b->base_offset,
                                a.topic, a.partition, err);
            else if (!c.done && c.offset < b->base_offset + b->count)
                c.offset = b->base_offset + b->count;
        }
        kq_dc_fetch_result_free(&fr);
        fflush(stdout);
        if (c.count > before)
            last_progress = kq_now_ms();
    }
    ret = rc > 0 ? KQ_EXIT_FAILURE : KQ_EXIT_OK;
    fprintf(stderr, "Processed a total of %" PRId64 " messages\n", c.count);
#undef IDLE_DEADLINE
out:
    kq_dc_close(dc);
    return ret;
}
