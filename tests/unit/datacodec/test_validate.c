/*
 * Every validation rule of include/kq/data_codec.h: a message that breaks one rule is
 * rejected with the documented code and a message naming the field, and the decoded struct
 * owns nothing afterwards.
 */
#include <stdio.h>
#include <stdlib.h>

#include "datacodec_testutil.h"
#include "kq_rpc.pb-c.h"

/* ---- Produce requests ---------------------------------------------------------------------- */

typedef struct produce_case {
    const char *name;
    void (*mutate)(kq_produce_request *r);
    int32_t sender;
    const char *expect; /* substring of the error message */
} produce_case;

static uint8_t zero16[16];
static const uint8_t big_record[KQ_DATA_MAX_RECORD_BYTES + 1];

static void p_zero_topic(kq_produce_request *r)
{
    memcpy(r->topic_id, zero16, 16);
}
static void p_partition(kq_produce_request *r)
{
    r->partition = -1;
}
static void p_acks2(kq_produce_request *r)
{
    r->acks = 2;
}
static void p_acks_m2(kq_produce_request *r)
{
    r->acks = -2;
}
static void p_timeout(kq_produce_request *r)
{
    r->timeout_ms = -5;
}
static void p_pid(kq_produce_request *r)
{
    r->producer_id = -7;
}
static void p_pepoch_neg(kq_produce_request *r)
{
    r->producer_epoch = -1;
}
static void p_pepoch_big(kq_produce_request *r)
{
    r->producer_epoch = 40000;
}
static void p_seq(kq_produce_request *r)
{
    r->base_sequence = -3;
}
static void p_half_idem(kq_produce_request *r)
{
    r->producer_id = -1;
    r->producer_epoch = 3;
}
static void p_no_records(kq_produce_request *r)
{
    r->n_records = 0;
}
static const uint8_t *const big_records[1] = {big_record};
static const size_t big_lens[1] = {sizeof big_record};
static void p_big_record(kq_produce_request *r)
{
    r->records = big_records;
    r->record_lens = big_lens;
    r->n_records = 1;
}

static const produce_case produce_cases[] = {
    {"zero topic", p_zero_topic, 1, "ProduceRequest.topic_id is all zero"},
    {"partition", p_partition, 1, "ProduceRequest.partition -1 is out of range [0, 2147483647]"},
    {"acks 2", p_acks2, 1, "ProduceRequest.acks 2 is out of range [-1, 1]"},
    {"acks -2", p_acks_m2, 1, "ProduceRequest.acks -2 is out of range [-1, 1]"},
    {"timeout", p_timeout, 1, "ProduceRequest.timeout_ms -5 is out of range [0, 2147483647]"},
    {"producer id", p_pid, 1,
     "ProduceRequest.producer_id -7 is out of range [-1, 9223372036854775807]"},
    {"producer epoch negative", p_pepoch_neg, 1, "Produce producer_epoch -1"},
    {"producer epoch too big", p_pepoch_big, 1,
     "ProduceRequest.producer_epoch 40000 is out of range [-1, 32767]"},
    {"base sequence", p_seq, 1, "ProduceRequest.base_sequence -3 is out of range [-1, 2147483647]"},
    {"half idempotent", p_half_idem, 1, "producer_id -1 but producer_epoch 3"},
    {"no records", p_no_records, 1, "ProduceRequest.records has no entries"},
    {"record too big", p_big_record, 1,
     "ProduceRequest.records[0] is 1048577 bytes (at most 1048576)"},
    {"bad sender", NULL, -2, "sender_id -2"},
};

static void expect_request_error(const kq_buf *b, int code, const char *expect, const char *name)
{
    kq_data_request out;
    char err[512] = "";
    int rc = kq_data_decode_request(b->data, b->len, &out, err, sizeof err);

    if (rc != code || !strstr(err, expect))
        fail_msg("%s: got %d \"%s\", want %d \"%s\"", name, rc, err, code, expect);
    assert_null(out.priv_);
    assert_true(kq_data_is_data_api(out.api_key)); /* kept so the answer names the API */
    kq_data_request_free(&out);
}

static void test_produce_request_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof produce_cases / sizeof produce_cases[0]; i++) {
        const produce_case *c = &produce_cases[i];
        kq_produce_request r = example_produce();
        kq_buf b;

        if (c->mutate)
            c->mutate(&r);
        assert_int_equal(kq_data_encode_produce_request(TEST_CLUSTER, c->sender, &r, &b), 0);
        expect_request_error(&b, KQ_ERR_INVALID_REQUEST, c->expect, c->name);
        kq_buf_free(&b);
    }
}

static void test_produce_request_limits(void **state)
{
    (void)state;
    size_t n = KQ_DATA_MAX_RECORDS + 1;
    const uint8_t **recs = calloc(n, sizeof *recs);
    size_t *lens = calloc(n, sizeof *lens);
    kq_produce_request r = example_produce();
    kq_buf b;

    assert_non_null(recs);
    assert_non_null(lens);
    for (size_t i = 0; i < n; i++)
        recs[i] = rec0;
    r.records = recs;
    r.record_lens = lens;
    r.n_records = n;
    assert_int_equal(kq_data_encode_produce_request(TEST_CLUSTER, 1, &r, &b), 0);
    expect_request_error(&b, KQ_ERR_INVALID_REQUEST,
                         "ProduceRequest.records has 100001 entries (max 100000)", "count");
    kq_buf_free(&b);

    /* 65 records of 1 MiB: each is allowed, the total is not. */
    static const uint8_t mib[KQ_DATA_MAX_RECORD_BYTES];
    for (size_t i = 0; i < 65; i++) {
        recs[i] = mib;
        lens[i] = sizeof mib;
    }
    r.n_records = 65;
    assert_int_equal(kq_data_encode_produce_request(TEST_CLUSTER, 1, &r, &b), 0);
    expect_request_error(&b, KQ_ERR_INVALID_REQUEST, "Produce records total", "total");
    kq_buf_free(&b);
    /* 64 are fine. */
    r.n_records = 64;
    kq_data_request out;
    char err[256] = "";
    assert_int_equal(kq_data_encode_produce_request(TEST_CLUSTER, 1, &r, &b), 0);
    assert_int_equal(kq_data_decode_request(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.u.produce.n_records, 64);
    kq_data_request_free(&out);
    kq_buf_free(&b);
    free(recs);
    free(lens);
}

/* A topic id of the wrong size can only come from a hand-built message. */
static void test_produce_request_topic_id_size(void **state)
{
    (void)state;
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__ProduceRequest pr = KQ__PRODUCE_REQUEST__INIT;
    ProtobufCBinaryData rec = {5, (uint8_t *)rec0};
    uint8_t id[15] = {1};
    kq_buf b;

    pr.topic_id.data = id;
    pr.topic_id.len = sizeof id;
    pr.acks = 1;
    pr.producer_id = pr.producer_epoch = pr.base_sequence = -1;
    pr.n_records = 1;
    pr.records = &rec;
    rq.api_key = KQ_API_PRODUCE;
    rq.cluster_id = "";
    rq.body_case = KQ__REQUEST__BODY_PRODUCE;
    rq.produce = &pr;
    b.len = protobuf_c_message_get_packed_size(&rq.base);
    b.data = malloc(b.len);
    assert_non_null(b.data);
    protobuf_c_message_pack(&rq.base, b.data);
    expect_request_error(&b, KQ_ERR_INVALID_REQUEST, "ProduceRequest.topic_id has 15 bytes, not 16",
                         "id size");
    kq_buf_free(&b);
}

/* Envelope rules: version, wrong body, NUL in the cluster id, long cluster id. */
static void pack_env(Kq__Request *rq, kq_buf *b)
{
    b->len = protobuf_c_message_get_packed_size(&rq->base);
    b->data = malloc(b->len ? b->len : 1);
    assert_non_null(b->data);
    protobuf_c_message_pack(&rq->base, b->data);
}

static void test_request_envelope_rules(void **state)
{
    (void)state;
    kq_produce_request r = example_produce();
    kq_data_request out;
    kq_buf b;
    char err[256];

    /* Version 1: decode the valid encoding, bump the version, re-encode. */
    assert_int_equal(kq_data_encode_produce_request(TEST_CLUSTER, 1, &r, &b), 0);
    Kq__Request *rq = kq__request__unpack(NULL, b.len, b.data);
    assert_non_null(rq);
    kq_buf_free(&b);
    rq->api_version = 1;
    pack_env(rq, &b);
    expect_request_error(&b, KQ_ERR_UNSUPPORTED_VERSION, "Produce version 1 is not supported",
                         "version");
    kq_buf_free(&b);
    rq->api_version = 0;

    /* Produce key with a Fetch body, Fetch key with a Produce body, no body. */
    rq->api_key = KQ_API_DATA_FETCH;
    pack_env(rq, &b);
    expect_request_error(&b, KQ_ERR_INVALID_REQUEST, "Fetch request has no Fetch body",
                         "fetch body");
    kq_buf_free(&b);
    rq->api_key = KQ_API_PRODUCE;
    Kq__ProduceRequest *keep = rq->produce;
    rq->body_case = KQ__REQUEST__BODY__NOT_SET;
    rq->produce = NULL;
    pack_env(rq, &b);
    expect_request_error(&b, KQ_ERR_INVALID_REQUEST, "Produce request has no Produce body",
                         "no body");
    kq_buf_free(&b);
    rq->body_case = KQ__REQUEST__BODY_PRODUCE;
    rq->produce = keep;

    /* Cluster id too long. */
    char *cid = rq->cluster_id;
    char longid[KQ_CODEC_MAX_CLUSTER_ID + 2];
    memset(longid, 'c', sizeof longid - 1);
    longid[sizeof longid - 1] = 0;
    rq->cluster_id = longid;
    pack_env(rq, &b);
    expect_request_error(&b, KQ_ERR_INVALID_REQUEST, "cluster_id is longer than 64", "long id");
    kq_buf_free(&b);
    rq->cluster_id = cid;
    kq__request__free_unpacked(rq, NULL);

    /* A NUL byte inside the cluster id string (patched in the wire bytes). */
    assert_int_equal(kq_data_encode_produce_request("abcdef", 1, &r, &b), 0);
    uint8_t *p = memmem(b.data, b.len, "abcdef", 6);
    assert_non_null(p);
    p[2] = 0;
    expect_request_error(&b, KQ_ERR_INVALID_REQUEST, "string with a NUL byte", "nul");
    kq_buf_free(&b);

    /* Bytes that do not parse. */
    uint8_t junk[] = {0xff, 0xff, 0xff};
    err[0] = 0;
    assert_int_equal(kq_data_decode_request(junk, sizeof junk, &out, err, sizeof err),
                     KQ_ERR_MALFORMED);
    assert_non_null(strstr(err, "does not parse"));
    assert_null(out.priv_);
}

/* ---- Fetch requests ------------------------------------------------------------------------ */

typedef struct fetch_case {
    const char *name;
    bool follower;
    void (*mutate)(kq_data_fetch_request *r, kq_data_fetch_partition *p);
    int32_t sender; /* -100: the default for the kind */
    const char *expect;
} fetch_case;

static void f_replica(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)p;
    r->replica_id = -2;
}
static void f_consumer_epoch(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)p;
    r->broker_epoch = 5;
}
static void f_follower_epoch(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)p;
    r->broker_epoch = -1;
}
static void f_wait(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)p;
    r->max_wait_ms = -1;
}
static void f_min(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)p;
    r->min_bytes = -1;
}
static void f_max(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)p;
    r->max_bytes = 0;
}
static void f_none(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)p;
    r->n_partitions = 0;
}
static void f_topic(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)r;
    memset(p[1].topic_id, 0, 16);
}
static void f_partition(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)r;
    p[1].partition = -4;
}
static void f_cle(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)r;
    p[0].current_leader_epoch = -2;
}
static void f_offset(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)r;
    p[0].fetch_offset = -1;
}
static void f_lfe(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)r;
    p[0].last_fetched_epoch = -9;
}
static void f_lso_consumer(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)r;
    p[0].log_start_offset = 0;
}
static void f_lso_neg(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)r;
    p[0].log_start_offset = -2;
}
static void f_lso_above(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)r;
    p[0].log_start_offset = 1001;
}
static void f_pmax(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)r;
    p[1].partition_max_bytes = 0;
}
static void f_dup(kq_data_fetch_request *r, kq_data_fetch_partition *p)
{
    (void)r;
    memcpy(p[1].topic_id, p[0].topic_id, 16);
    p[1].partition = p[0].partition;
}

static const fetch_case fetch_cases[] = {
    {"replica id", false, f_replica, -100,
     "DataFetchRequest.replica_id -2 is out of range [-1, 2147483647]"},
    {"consumer broker epoch", false, f_consumer_epoch, -100,
     "Fetch broker_epoch 5 is invalid for a consumer"},
    {"follower broker epoch", true, f_follower_epoch, -100,
     "Fetch broker_epoch -1 is invalid for a follower"},
    {"follower not the sender", true, NULL, 3, "Fetch replica_id 2 differs from the sender 3"},
    {"max wait", false, f_wait, -100,
     "DataFetchRequest.max_wait_ms -1 is out of range [0, 2147483647]"},
    {"min bytes", false, f_min, -100,
     "DataFetchRequest.min_bytes -1 is out of range [0, 2147483647]"},
    {"max bytes", false, f_max, -100,
     "DataFetchRequest.max_bytes 0 is out of range [1, 2147483647]"},
    {"no partitions", false, f_none, -100, "DataFetchRequest.partitions has no entries"},
    {"topic", false, f_topic, -100, "DataFetchRequest.partitions[1].topic_id is all zero"},
    {"partition", false, f_partition, -100,
     "DataFetchRequest.partitions[1].partition -4 is out of range [0, 2147483647]"},
    {"leader epoch", false, f_cle, -100,
     "DataFetchRequest.partitions[0].current_leader_epoch -2 is out of range [-1, 2147483647]"},
    {"fetch offset", false, f_offset, -100,
     "DataFetchRequest.partitions[0].fetch_offset -1 is out of range [0, 9223372036854775807]"},
    {"last fetched epoch", true, f_lfe, -100,
     "DataFetchRequest.partitions[0].last_fetched_epoch -9 is out of range [-1, 2147483647]"},
    {"consumer log start", false, f_lso_consumer, -100,
     "Fetch partitions[0] log_start_offset 0 is invalid (must be -1 for a consumer)"},
    {"follower log start", true, f_lso_neg, -100,
     "DataFetchRequest.partitions[0].log_start_offset -2 is out of range [-1, "
     "9223372036854775807]"},
    {"log start above fetch offset", true, f_lso_above, -100,
     "log_start_offset 1001 is above fetch_offset 1000"},
    {"partition max bytes", false, f_pmax, -100,
     "DataFetchRequest.partitions[1].partition_max_bytes 0 is out of range [1, 2147483647]"},
    {"duplicate partition", false, f_dup, -100,
     "Fetch names partition AQIDBAUGBwgJCgsMDQ4PEA-0 twice"},
};

static void test_fetch_request_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof fetch_cases / sizeof fetch_cases[0]; i++) {
        const fetch_case *c = &fetch_cases[i];
        kq_data_fetch_partition parts[2];
        kq_data_fetch_request r = example_fetch(parts, c->follower);
        int32_t sender = c->sender != -100 ? c->sender : (c->follower ? 2 : -1);
        kq_buf b;

        if (c->mutate)
            c->mutate(&r, parts);
        assert_int_equal(kq_data_encode_fetch_request(TEST_CLUSTER, sender, &r, &b), 0);
        expect_request_error(&b, KQ_ERR_INVALID_REQUEST, c->expect, c->name);
        kq_buf_free(&b);
    }
}

static void test_fetch_request_partition_limit(void **state)
{
    (void)state;
    size_t n = KQ_DATA_MAX_FETCH_PARTITIONS + 1;
    kq_data_fetch_partition two[2];
    kq_data_fetch_request r = example_fetch(two, false);
    kq_data_fetch_partition *parts = calloc(n, sizeof *parts);
    kq_buf b;

    assert_non_null(parts);
    for (size_t i = 0; i < n; i++) {
        parts[i] = two[0];
        parts[i].partition = (int32_t)i;
    }
    r.partitions = parts;
    r.n_partitions = n;
    assert_int_equal(kq_data_encode_fetch_request(TEST_CLUSTER, -1, &r, &b), 0);
    expect_request_error(&b, KQ_ERR_INVALID_REQUEST,
                         "DataFetchRequest.partitions has 10001 entries (max 10000)", "limit");
    kq_buf_free(&b);
    /* At the limit, all distinct: accepted. */
    kq_data_request out;
    char err[256] = "";
    r.n_partitions = n - 1;
    assert_int_equal(kq_data_encode_fetch_request(TEST_CLUSTER, -1, &r, &b), 0);
    assert_int_equal(kq_data_decode_request(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.u.fetch.n_partitions, n - 1);
    kq_data_request_free(&out);
    kq_buf_free(&b);
    free(parts);
}

/* ---- Produce responses --------------------------------------------------------------------- */

static void expect_produce_response_error(const kq_produce_response *in, const char *expect)
{
    kq_produce_response out;
    kq_buf b;
    char err[512] = "";
    int rc;

    assert_int_equal(kq_data_encode_produce_response(in, &b), 0);
    rc = kq_data_decode_produce_response(b.data, b.len, &out, err, sizeof err);
    if (rc != KQ_ERR_INVALID_REQUEST || !strstr(err, expect))
        fail_msg("got %d \"%s\", want INVALID_REQUEST \"%s\"", rc, err, expect);
    assert_int_equal(out.error, 0);
    assert_int_equal(out.base_offset, -1);
    kq_buf_free(&b);
}

static void test_produce_response_rules(void **state)
{
    (void)state;
    kq_produce_response r = {.base_offset = -1, .log_start_offset = 0};
    expect_produce_response_error(&r, "Produce response base_offset -1");
    r = (kq_produce_response){.base_offset = 10, .log_start_offset = 11};
    expect_produce_response_error(&r, "Produce response log_start_offset 11");
    r = (kq_produce_response){.base_offset = 10, .log_start_offset = -1};
    expect_produce_response_error(&r, "Produce response log_start_offset -1");
    r = (kq_produce_response){.error = -3, .base_offset = 10, .log_start_offset = 1};
    expect_produce_response_error(&r, "ProduceResponse.error_code -3 is out of range");
    r = (kq_produce_response){
        .error = KQ_ERR_NOT_ENOUGH_REPLICAS, .base_offset = -2, .log_start_offset = -1};
    expect_produce_response_error(&r, "ProduceResponse.base_offset -2 is out of range");

    /* A Fetch answer is not a Produce answer; neither is an envelope error with a body. */
    kq_data_fetch_response fr = {0};
    kq_produce_response out;
    kq_buf b;
    char err[256] = "";
    assert_int_equal(kq_data_encode_fetch_response(&fr, &b), 0);
    assert_int_equal(kq_data_decode_produce_response(b.data, b.len, &out, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "Produce response has api key 1100"));
    kq_buf_free(&b);

    r = (kq_produce_response){.base_offset = 1, .log_start_offset = 0};
    assert_int_equal(kq_data_encode_produce_response(&r, &b), 0);
    Kq__Response *rs = kq__response__unpack(NULL, b.len, b.data);
    assert_non_null(rs);
    kq_buf_free(&b);
    rs->error_code = KQ_ERR_NOT_LEADER_OR_FOLLOWER;
    b.len = protobuf_c_message_get_packed_size(&rs->base);
    b.data = malloc(b.len);
    assert_non_null(b.data);
    protobuf_c_message_pack(&rs->base, b.data);
    assert_int_equal(kq_data_decode_produce_response(b.data, b.len, &out, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "Produce error response carries a body"));
    kq_buf_free(&b);
    /* Success with no body. */
    rs->error_code = 0;
    rs->body_case = KQ__RESPONSE__BODY__NOT_SET;
    Kq__ProduceResponse *keep = rs->produce;
    rs->produce = NULL;
    b.len = protobuf_c_message_get_packed_size(&rs->base);
    b.data = malloc(b.len ? b.len : 1);
    assert_non_null(b.data);
    protobuf_c_message_pack(&rs->base, b.data);
    assert_int_equal(kq_data_decode_produce_response(b.data, b.len, &out, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "Produce response has no Produce body"));
    kq_buf_free(&b);
    rs->body_case = KQ__RESPONSE__BODY_PRODUCE;
    rs->produce = keep;
    kq__response__free_unpacked(rs, NULL);
}

/* ---- Fetch responses ----------------------------------------------------------------------- */

typedef struct fr_case {
    const char *name;
    void (*mutate)(kq_data_fetch_partition_result *p, kq_data_batch *b);
    bool refresh_crc; /* recompute the CRCs after the mutation */
    int code;
    const char *expect;
} fr_case;

static void r_topic(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)b;
    memset(p[1].topic_id, 0, 16);
}
static void r_partition(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)b;
    p[0].partition = -1;
}
static void r_error(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)b;
    p[2].error = -1;
}
static void r_hw(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)b;
    p[2].high_watermark = -2;
}
static void r_lso_above_hw(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)b;
    p[0].log_start_offset = 106;
}
static void r_no_hw(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)b;
    p[1].high_watermark = -1;
}
static void r_error_batches(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)b;
    p[0].error = KQ_ERR_FENCED_LEADER_EPOCH;
}
static void r_div(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)b;
    p[1].diverging_end_offset = -1;
}
static void r_div_batches(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)b;
    p[0].diverging_epoch = 1;
    p[0].diverging_end_offset = 10;
}
static void r_leader(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)b;
    p[1].current_leader_id = -5;
}
static void r_base(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)p;
    b[0].base_offset = -1;
}
static void r_epoch(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)p;
    b[0].leader_epoch = -1;
}
static void r_count(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)p;
    b[2].count = 0;
}
static void r_gap(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)p;
    b[2].base_offset = 104;
}
static void r_overlap(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)p;
    b[1].base_offset = 101;
}
static void r_epoch_down(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)p;
    b[2].leader_epoch = 2;
}
static void r_overflow(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    p[0].n_batches = 1;
    p[0].high_watermark = INT64_MAX;
    b[0].base_offset = INT64_MAX - 1;
}
static void r_producer(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)p;
    b[1].producer_epoch = -1;
}
static void r_crc(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)p;
    b[1].crc32c ^= 1;
}
static void r_crc_payload(kq_data_fetch_partition_result *p, kq_data_batch *b)
{
    (void)p;
    b[2].len -= 1; /* the CRC was computed over all of it */
}

static const fr_case fr_cases[] = {
    {"topic", r_topic, false, KQ_ERR_INVALID_REQUEST,
     "DataFetchResponse.partitions[1].topic_id is all zero"},
    {"partition", r_partition, false, KQ_ERR_INVALID_REQUEST,
     "DataFetchResponse.partitions[0].partition -1 is out of range [0, 2147483647]"},
    {"error code", r_error, false, KQ_ERR_INVALID_REQUEST,
     "DataFetchResponse.partitions[2].error_code -1 is out of range [0, 2147483647]"},
    {"high watermark", r_hw, false, KQ_ERR_INVALID_REQUEST,
     "DataFetchResponse.partitions[2].high_watermark -2 is out of range [-1, 9223372036854775807]"},
    {"log start above hw", r_lso_above_hw, false, KQ_ERR_INVALID_REQUEST,
     "partitions[0] log_start_offset 106 and high_watermark 105"},
    {"no hw without error", r_no_hw, false, KQ_ERR_INVALID_REQUEST,
     "partitions[1] log_start_offset 0 and high_watermark -1"},
    {"error with batches", r_error_batches, false, KQ_ERR_INVALID_REQUEST,
     "partitions[0] has error FENCED_LEADER_EPOCH and 3 batches"},
    {"diverging epoch", r_div, false, KQ_ERR_INVALID_REQUEST,
     "DataFetchResponse.partitions[1].diverging_epoch.end_offset -1 is out of range [0, "
     "9223372036854775807]"},
    {"diverging with batches", r_div_batches, false, KQ_ERR_INVALID_REQUEST,
     "partitions[0] has a diverging_epoch and 3 batches"},
    {"current leader", r_leader, false, KQ_ERR_INVALID_REQUEST,
     "DataFetchResponse.partitions[1].current_leader.leader_id -5 is out of range [-1, "
     "2147483647]"},
    {"batch base offset", r_base, true, KQ_ERR_INVALID_REQUEST,
     "DataFetchResponse.partitions[0].batches[0].base_offset -1 is out of range [0, "
     "9223372036854775807]"},
    {"batch leader epoch", r_epoch, true, KQ_ERR_INVALID_REQUEST,
     "DataFetchResponse.partitions[0].batches[0].leader_epoch -1 is out of range [0, 2147483647]"},
    {"batch count", r_count, true, KQ_ERR_INVALID_REQUEST,
     "DataFetchResponse.partitions[0].batches[2].count 0 is out of range [1, 2147483647]"},
    {"gap", r_gap, true, KQ_ERR_INVALID_REQUEST,
     "batches[2] base_offset 104 is not contiguous (expected 103)"},
    {"overlap", r_overlap, true, KQ_ERR_INVALID_REQUEST,
     "batches[1] base_offset 101 is not contiguous (expected 102)"},
    {"epoch going down", r_epoch_down, true, KQ_ERR_INVALID_REQUEST,
     "batches[2] leader_epoch 2 is below the previous batch's 3"},
    {"offset overflow", r_overflow, true, KQ_ERR_INVALID_REQUEST, "count 2 overflows"},
    {"producer fields", r_producer, true, KQ_ERR_INVALID_REQUEST,
     "batches[1] producer_epoch -1 is invalid"},
    {"crc", r_crc, false, KQ_ERR_CORRUPT_MESSAGE, "partitions[0] batches[1] crc32c 0x"},
    {"crc over payload", r_crc_payload, false, KQ_ERR_CORRUPT_MESSAGE, "batches[2] crc32c 0x"},
};

static void test_fetch_response_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof fr_cases / sizeof fr_cases[0]; i++) {
        const fr_case *c = &fr_cases[i];
        kq_data_fetch_partition_result parts[3];
        kq_data_batch bt[3];
        kq_data_fetch_response r = example_fetch_response(parts, bt);
        kq_data_fetch_response out;
        kq_buf b;
        char err[512] = "";
        int rc;

        c->mutate(parts, bt);
        if (c->refresh_crc)
            for (int j = 0; j < 3; j++)
                bt[j].crc32c = kq_data_batch_crc(&bt[j]);
        assert_int_equal(kq_data_encode_fetch_response(&r, &b), 0);
        rc = kq_data_decode_fetch_response(b.data, b.len, &out, err, sizeof err);
        if (rc != c->code || !strstr(err, c->expect))
            fail_msg("%s: got %d \"%s\", want %d \"%s\"", c->name, rc, err, c->code, c->expect);
        assert_null(out.priv_);
        assert_int_equal(out.n_partitions, 0);
        kq_data_fetch_response_free(&out);
        kq_buf_free(&b);
    }
}

static void test_fetch_response_partition_limit(void **state)
{
    (void)state;
    size_t n = KQ_DATA_MAX_FETCH_PARTITIONS + 1;
    kq_data_fetch_partition_result *parts = calloc(n, sizeof *parts);
    kq_data_fetch_response r = {0}, out;
    kq_buf b;
    char err[256] = "";

    assert_non_null(parts);
    for (size_t i = 0; i < n; i++) {
        memcpy(parts[i].topic_id, topic_a, 16);
        parts[i].partition = (int32_t)i;
        parts[i].diverging_epoch = parts[i].current_leader_id = parts[i].current_leader_epoch = -1;
    }
    r.partitions = parts;
    r.n_partitions = n;
    assert_int_equal(kq_data_encode_fetch_response(&r, &b), 0);
    assert_int_equal(kq_data_decode_fetch_response(b.data, b.len, &out, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "DataFetchResponse.partitions has 10001 entries (max 10000)"));
    kq_buf_free(&b);
    free(parts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_produce_request_rules),
        cmocka_unit_test(test_produce_request_limits),
        cmocka_unit_test(test_produce_request_topic_id_size),
        cmocka_unit_test(test_request_envelope_rules),
        cmocka_unit_test(test_fetch_request_rules),
        cmocka_unit_test(test_fetch_request_partition_limit),
        cmocka_unit_test(test_produce_response_rules),
        cmocka_unit_test(test_fetch_response_rules),
        cmocka_unit_test(test_fetch_response_partition_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
