/*
 * kq-data-probe: sends one crafted data-plane request to a broker agent and prints the answer.
 *
 *   kq-data-probe --broker HOST:PORT --case CASE [--cluster-id ID] [--topic-id UUID]
 *                 [--partition P] [--replica-id N] [--timeout-ms MS]
 *
 * The requests are built with protobuf-c directly (the generated kq_rpc / kq_data messages),
 * so the encoders' and decoders' validation in kq_datacodec is bypassed on the way out and the
 * broker sees exactly the bad value. CASE is one of:
 *
 *   produce-bad-acks             Produce with acks 2
 *   produce-no-records           Produce with no record
 *   produce-short-topic-id       Produce whose topic_id is 8 bytes
 *   produce-negative-partition   Produce to partition -1
 *   fetch-negative-offset        consumer Fetch at fetch_offset -5
 *   fetch-zero-max-bytes         consumer Fetch with max_bytes 0
 *   fetch-no-partitions          consumer Fetch naming no partition
 *   fetch-follower-unregistered  follower Fetch from replica --replica-id (default 99), which
 *                                is a well-formed request from a broker that is not registered
 *   body-mismatch                api key Produce carrying a data-plane Fetch body
 *   truncated-body               a well-formed Produce whose last 5 bytes are cut off
 *   empty-request                a message of 0 bytes
 *   wrong-cluster-id             a well-formed Produce for cluster "kq-probe-wrong-cluster"
 *   produce-ok                   a well-formed Produce of one record "probe-ok" (acks all)
 *   fetch-ok                     a well-formed consumer Fetch from offset 0
 *
 * Well-formed requests carry --cluster-id (default "": not checked by the broker) and
 * --topic-id / --partition (default: a fixed non-zero id, partition 0).
 *
 * Output, one line on stdout:   error=NAME message=TEXT
 * NAME is the whole-request error of the answer's envelope, else the Produce result's error,
 * else the first Fetch partition's error (NONE for success; TEXT then says what came back).
 * An answer whose envelope has an api key that is not the request's (a request that did not
 * parse at all is answered with api key 0) is read as a bare envelope; a line on stderr says so.
 *
 * Exit status: 0 an answer arrived and was read; 1 no answer (timeout, connection refused);
 * 2 usage error; 3 an answer arrived but could not be read (printed on stderr).
 *
 * Ownership: everything is local to main; request and answer buffers are freed before exit.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/codec.h"
#include "kq/data_codec.h"
#include "kq/error.h"
#include "kq/rpc.h"
#include "kq/util.h"
#include "kq_data.pb-c.h"
#include "kq_rpc.pb-c.h"

#define PROBE_EXIT_OK 0
#define PROBE_EXIT_NO_ANSWER 1
#define PROBE_EXIT_USAGE 2
#define PROBE_EXIT_UNREADABLE 3

#define PROBE_WRONG_CLUSTER "kq-probe-wrong-cluster"
#define PROBE_MAX_BYTES (1024 * 1024)

typedef enum probe_case {
    CASE_PRODUCE_BAD_ACKS,
    CASE_PRODUCE_NO_RECORDS,
    CASE_PRODUCE_SHORT_TOPIC_ID,
    CASE_PRODUCE_NEGATIVE_PARTITION,
    CASE_FETCH_NEGATIVE_OFFSET,
    CASE_FETCH_ZERO_MAX_BYTES,
    CASE_FETCH_NO_PARTITIONS,
    CASE_FETCH_FOLLOWER_UNREGISTERED,
    CASE_BODY_MISMATCH,
    CASE_TRUNCATED_BODY,
    CASE_EMPTY_REQUEST,
    CASE_WRONG_CLUSTER_ID,
    CASE_PRODUCE_OK,
    CASE_FETCH_OK,
    CASE_COUNT
} probe_case;

static const char *const case_names[CASE_COUNT] = {
    [CASE_PRODUCE_BAD_ACKS] = "produce-bad-acks",
    [CASE_PRODUCE_NO_RECORDS] = "produce-no-records",
    [CASE_PRODUCE_SHORT_TOPIC_ID] = "produce-short-topic-id",
    [CASE_PRODUCE_NEGATIVE_PARTITION] = "produce-negative-partition",
    [CASE_FETCH_NEGATIVE_OFFSET] = "fetch-negative-offset",
    [CASE_FETCH_ZERO_MAX_BYTES] = "fetch-zero-max-bytes",
    [CASE_FETCH_NO_PARTITIONS] = "fetch-no-partitions",
    [CASE_FETCH_FOLLOWER_UNREGISTERED] = "fetch-follower-unregistered",
    [CASE_BODY_MISMATCH] = "body-mismatch",
    [CASE_TRUNCATED_BODY] = "truncated-body",
    [CASE_EMPTY_REQUEST] = "empty-request",
    [CASE_WRONG_CLUSTER_ID] = "wrong-cluster-id",
    [CASE_PRODUCE_OK] = "produce-ok",
    [CASE_FETCH_OK] = "fetch-ok",
};

typedef struct probe_args {
    const char *broker;     /* borrowed from argv */
    const char *cluster_id; /* borrowed from argv or a literal */
    probe_case kase;
    uint8_t topic_id[16];
    int32_t partition;
    int32_t replica_id;
    uint32_t timeout_ms;
    int64_t producer_id; /* produce-ok: -1 (not idempotent) or the producer id to send */
    int32_t producer_epoch;
    int32_t sequence;
} probe_args;

static const char usage[] =
    "usage: kq-data-probe --broker HOST:PORT --case CASE [--cluster-id ID] [--topic-id UUID]\n"
    "                     [--partition P] [--replica-id N] [--timeout-ms MS]\n"
    "                     [--producer-id P [--producer-epoch E] [--sequence S]] (produce-ok)\n"
    "CASE: produce-bad-acks produce-no-records produce-short-topic-id produce-negative-partition\n"
    "      fetch-negative-offset fetch-zero-max-bytes fetch-no-partitions\n"
    "      fetch-follower-unregistered body-mismatch truncated-body empty-request\n"
    "      wrong-cluster-id produce-ok fetch-ok\n"
    "Prints \"error=NAME message=TEXT\". Exit 0 answered, 1 no answer, 2 usage, 3 unreadable.\n";

static int parse_i32(const char *s, long lo, long hi, int32_t *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int32_t)v;
    return 0;
}

static int parse_args(int argc, char **argv, probe_args *a)
{
    static const struct option opts[] = {
        {"broker", required_argument, NULL, 'b'},
        {"case", required_argument, NULL, 'c'},
        {"cluster-id", required_argument, NULL, 'C'},
        {"topic-id", required_argument, NULL, 't'},
        {"partition", required_argument, NULL, 'p'},
        {"replica-id", required_argument, NULL, 'r'},
        {"timeout-ms", required_argument, NULL, 'T'},
        {"producer-id", required_argument, NULL, 'P'},
        {"producer-epoch", required_argument, NULL, 'E'},
        {"sequence", required_argument, NULL, 'S'},
        {NULL, 0, NULL, 0},
    };
    const char *kase = NULL;
    int32_t timeout = 10000;
    int o;

    memset(a, 0, sizeof(*a));
    a->cluster_id = "";
    a->replica_id = 99;
    a->producer_id = -1;
    a->producer_epoch = 0;
    for (int i = 0; i < 16; i++)
        a->topic_id[i] = (uint8_t)(0xa0 + i); /* any non-zero id */
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'b':
            a->broker = optarg;
            break;
        case 'c':
            kase = optarg;
            break;
        case 'C':
            a->cluster_id = optarg;
            break;
        case 't':
            if (!kq_uuid_parse(optarg, a->topic_id)) {
                fprintf(stderr, "kq-data-probe: --topic-id '%s' is not a topic id\n", optarg);
                return -1;
            }
            break;
        case 'p':
            if (parse_i32(optarg, 0, INT32_MAX, &a->partition) != 0) {
                fprintf(stderr, "kq-data-probe: --partition '%s' is not >= 0\n", optarg);
                return -1;
            }
            break;
        case 'r':
            if (parse_i32(optarg, 0, INT32_MAX, &a->replica_id) != 0) {
                fprintf(stderr, "kq-data-probe: --replica-id '%s' is not >= 0\n", optarg);
                return -1;
            }
            break;
        case 'P': {
            int32_t v;
            if (parse_i32(optarg, 0, INT32_MAX, &v) != 0) {
                fprintf(stderr, "kq-data-probe: --producer-id '%s' is not >= 0\n", optarg);
                return -1;
            }
            a->producer_id = v;
            break;
        }
        case 'E':
            if (parse_i32(optarg, 0, 32767, &a->producer_epoch) != 0) {
                fprintf(stderr, "kq-data-probe: --producer-epoch '%s' is not 0..32767\n", optarg);
                return -1;
            }
            break;
        case 'S':
            if (parse_i32(optarg, 0, INT32_MAX, &a->sequence) != 0) {
                fprintf(stderr, "kq-data-probe: --sequence '%s' is not >= 0\n", optarg);
                return -1;
            }
            break;
        case 'T':
            if (parse_i32(optarg, 1, INT32_MAX, &timeout) != 0) {
                fprintf(stderr, "kq-data-probe: --timeout-ms '%s' is not > 0\n", optarg);
                return -1;
            }
            break;
        default:
            return -1;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "kq-data-probe: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (a->broker == NULL || kase == NULL) {
        fprintf(stderr, "kq-data-probe: --broker and --case are required\n");
        return -1;
    }
    if (strlen(a->broker) > KQ_CODEC_MAX_ENDPOINT - 1) {
        fprintf(stderr, "kq-data-probe: --broker '%.40s...' is too long\n", a->broker);
        return -1;
    }
    a->kase = CASE_COUNT;
    for (int i = 0; i < CASE_COUNT; i++)
        if (strcmp(kase, case_names[i]) == 0)
            a->kase = (probe_case)i;
    if (a->kase == CASE_COUNT) {
        fprintf(stderr, "kq-data-probe: unknown --case '%s'\n", kase);
        return -1;
    }
    a->timeout_ms = (uint32_t)timeout;
    return 0;
}

static int pack_request(const Kq__Request *rq, kq_buf *out)
{
    size_t n = kq__request__get_packed_size(rq);
    out->data = malloc(n ? n : 1);
    if (out->data == NULL)
        return KQ_ERR_NOMEM;
    out->len = kq__request__pack(rq, out->data);
    return 0;
}

/* The request bytes for a->kase; out is malloc'd (kq_buf_free). *api is the api key sent. */
static int build_request(const probe_args *a, kq_buf *out, uint32_t *api)
{
    static uint8_t record[] = "probe-bad";
    static uint8_t record_ok[] = "probe-ok";
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__ProduceRequest pr = KQ__PRODUCE_REQUEST__INIT;
    Kq__DataFetchRequest fr = KQ__DATA_FETCH_REQUEST__INIT;
    Kq__DataFetchPartition fp = KQ__DATA_FETCH_PARTITION__INIT;
    Kq__DataFetchPartition *fps[1] = {&fp};
    ProtobufCBinaryData recs[1];
    uint8_t topic[16];
    bool fetch;
    int rc;

    memcpy(topic, a->topic_id, sizeof(topic));
    rq.api_version = 0;
    rq.cluster_id = (char *)a->cluster_id;
    rq.sender_id = -1;

    /* A well-formed Produce of one record, non-idempotent, acks all. */
    pr.topic_id.data = topic;
    pr.topic_id.len = sizeof(topic);
    pr.partition = a->partition;
    pr.acks = KQ_DATA_ACKS_ALL;
    pr.timeout_ms = 30000;
    pr.producer_id = KQ_DATA_NO_PRODUCER_ID;
    pr.producer_epoch = -1;
    pr.base_sequence = -1;
    recs[0].data = record;
    recs[0].len = sizeof(record) - 1;
    pr.records = recs;
    pr.n_records = 1;

    /* A well-formed consumer Fetch of one partition from offset 0, no long poll. */
    fr.replica_id = KQ_DATA_CONSUMER_REPLICA_ID;
    fr.broker_epoch = -1;
    fr.max_wait_ms = 0;
    fr.min_bytes = 0;
    fr.max_bytes = PROBE_MAX_BYTES;
    fr.partitions = fps;
    fr.n_partitions = 1;
    fp.topic_id.data = topic;
    fp.topic_id.len = sizeof(topic);
    fp.partition = a->partition;
    fp.current_leader_epoch = -1;
    fp.fetch_offset = 0;
    fp.last_fetched_epoch = -1;
    fp.log_start_offset = -1;
    fp.partition_max_bytes = PROBE_MAX_BYTES;

    fetch = false;
    switch (a->kase) {
    case CASE_PRODUCE_BAD_ACKS:
        pr.acks = 2;
        break;
    case CASE_PRODUCE_NO_RECORDS:
        pr.records = NULL;
        pr.n_records = 0;
        break;
    case CASE_PRODUCE_SHORT_TOPIC_ID:
        pr.topic_id.len = 8;
        break;
    case CASE_PRODUCE_NEGATIVE_PARTITION:
        pr.partition = -1;
        break;
    case CASE_FETCH_NEGATIVE_OFFSET:
        fetch = true;
        fp.fetch_offset = -5;
        break;
    case CASE_FETCH_ZERO_MAX_BYTES:
        fetch = true;
        fr.max_bytes = 0;
        break;
    case CASE_FETCH_NO_PARTITIONS:
        fetch = true;
        fr.partitions = NULL;
        fr.n_partitions = 0;
        break;
    case CASE_FETCH_FOLLOWER_UNREGISTERED:
        fetch = true;
        fr.replica_id = a->replica_id;
        fr.broker_epoch = 0;
        fp.log_start_offset = 0;
        rq.sender_id = a->replica_id;
        break;
    case CASE_BODY_MISMATCH:
        /* api key Produce, body Fetch */
        rq.api_key = KQ_API_PRODUCE;
        rq.body_case = KQ__REQUEST__BODY_DATA_FETCH;
        rq.data_fetch = &fr;
        *api = KQ_API_PRODUCE;
        return pack_request(&rq, out);
    case CASE_EMPTY_REQUEST:
        out->data = malloc(1);
        out->len = 0;
        *api = 0;
        return out->data == NULL ? KQ_ERR_NOMEM : 0;
    case CASE_WRONG_CLUSTER_ID:
        rq.cluster_id = (char *)PROBE_WRONG_CLUSTER;
        break;
    case CASE_PRODUCE_OK:
        recs[0].data = record_ok;
        recs[0].len = sizeof(record_ok) - 1;
        if (a->producer_id >= 0) { /* idempotent: --producer-id/--producer-epoch/--sequence */
            pr.producer_id = a->producer_id;
            pr.producer_epoch = a->producer_epoch;
            pr.base_sequence = a->sequence;
        }
        break;
    case CASE_FETCH_OK:
        fetch = true;
        break;
    case CASE_TRUNCATED_BODY:
    case CASE_COUNT:
        break;
    }
    if (fetch) {
        rq.api_key = KQ_API_DATA_FETCH;
        rq.body_case = KQ__REQUEST__BODY_DATA_FETCH;
        rq.data_fetch = &fr;
    } else {
        rq.api_key = KQ_API_PRODUCE;
        rq.body_case = KQ__REQUEST__BODY_PRODUCE;
        rq.produce = &pr;
    }
    *api = rq.api_key;
    if ((rc = pack_request(&rq, out)) != 0)
        return rc;
    if (a->kase == CASE_TRUNCATED_BODY) {
        /* The body (field 50) is packed last: cutting the tail cuts inside the body. */
        if (out->len <= 5) {
            kq_buf_free(out);
            return KQ_ERR_INTERNAL;
        }
        out->len -= 5;
    }
    return 0;
}

/* Prints the answer line; returns an exit status. */
static int print_answer(uint32_t api, const uint8_t *data, size_t len)
{
    char err[512] = "";
    int rc;

    if (api == KQ_API_PRODUCE) {
        kq_produce_response pr;
        rc = kq_data_decode_produce_response(data, len, &pr, err, sizeof(err));
        if (rc == 0) {
            if (pr.error == 0)
                printf("error=%s message=written at base_offset %" PRId64 "\n",
                       kq_err_name(pr.error), pr.base_offset);
            else
                printf("error=%s message=%s\n", kq_err_name(pr.error), pr.error_message);
            return PROBE_EXIT_OK;
        }
    } else if (api == KQ_API_DATA_FETCH) {
        kq_data_fetch_response fr;
        rc = kq_data_decode_fetch_response(data, len, &fr, err, sizeof(err));
        if (rc == 0) {
            if (fr.error != 0) {
                printf("error=%s message=%s\n", kq_err_name(fr.error), fr.error_message);
            } else if (fr.n_partitions == 0) {
                printf("error=NONE message=no partition in the answer\n");
            } else {
                const kq_data_fetch_partition_result *p = &fr.partitions[0];
                int64_t records = 0;
                for (size_t i = 0; i < p->n_batches; i++)
                    records += p->batches[i].count;
                printf("error=%s message=partition %" PRId32 " high_watermark %" PRId64
                       " records %" PRId64 "\n",
                       kq_err_name(p->error), p->partition, p->high_watermark, records);
            }
            kq_data_fetch_response_free(&fr);
            return PROBE_EXIT_OK;
        }
    }
    /* Not an answer to this api (e.g. api key 0 for a request that did not parse): read the
     * bare envelope. */
    Kq__Response *rs = kq__response__unpack(NULL, len, len > 0 ? data : (const uint8_t *)"");
    if (rs == NULL) {
        fprintf(stderr, "kq-data-probe: the answer (%zu bytes) does not parse%s%s\n", len,
                err[0] ? ": " : "", err);
        return PROBE_EXIT_UNREADABLE;
    }
    int status = PROBE_EXIT_OK;
    if (rs->error_code <= 0 || rs->body_case != KQ__RESPONSE__BODY__NOT_SET) {
        fprintf(stderr,
                "kq-data-probe: the answer has api key %u, error_code %" PRId32
                " and %s body (%s)\n",
                rs->api_key, rs->error_code,
                rs->body_case != KQ__RESPONSE__BODY__NOT_SET ? "a" : "no", err);
        status = PROBE_EXIT_UNREADABLE;
    } else {
        fprintf(stderr, "kq-data-probe: answer read as a bare envelope with api key %u (%s)\n",
                rs->api_key, err);
        printf("error=%s message=%s\n", kq_err_name(rs->error_code),
               rs->error_message ? rs->error_message : "");
    }
    kq__response__free_unpacked(rs, NULL);
    return status;
}

int main(int argc, char **argv)
{
    probe_args a;
    kq_buf req = {0};
    kq_rpc_client *client = NULL;
    uint8_t *resp = NULL;
    size_t resp_len = 0;
    char url[KQ_CODEC_MAX_ENDPOINT + 16];
    char err[512] = "";
    uint32_t api = 0;
    int status = PROBE_EXIT_NO_ANSWER;
    int rc;

    if (parse_args(argc, argv, &a) != 0) {
        fputs(usage, stderr);
        return PROBE_EXIT_USAGE;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((rc = build_request(&a, &req, &api)) != 0) {
        fprintf(stderr, "kq-data-probe: cannot build the request: %s\n", kq_err_message(rc));
        status = PROBE_EXIT_UNREADABLE;
        goto out;
    }
    snprintf(url, sizeof(url), "tcp://%s", a.broker);
    rc = kq_rpc_client_open(url, KQ_RPC_DEFAULT_MAX_MSG, &client, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "kq-data-probe: cannot open %s: %s\n", url, err);
        goto out;
    }
    rc = kq_rpc_call(client, req.data, req.len, a.timeout_ms, &resp, &resp_len);
    if (rc != 0) {
        fprintf(stderr, "kq-data-probe: no answer from %s within %u ms: %s\n", a.broker,
                a.timeout_ms, kq_err_name(rc));
        goto out;
    }
    status = print_answer(api, resp, resp_len);
out:
    free(resp);
    if (client != NULL)
        kq_rpc_client_close(client);
    kq_buf_free(&req);
    return status;
}
