/*
 * Every validation failure of kq_codec_decode_request / kq_codec_decode_response, with the
 * error code and a message naming the problem. Messages are built directly with protobuf-c so
 * that they can carry values our own encoders refuse to produce.
 */
#include <limits.h>
#include <stdio.h>

#include "codec_testutil.h"
#include "kq_rpc.pb-c.h"

/* ---- requests ------------------------------------------------------------------------- */

typedef struct reqfix {
    Kq__Request rq;
    Kq__VoteRequest vote;
    Kq__BeginQuorumEpochRequest begin;
    Kq__EndQuorumEpochRequest end;
    Kq__FetchRequest fetch;
    Kq__DescribeQuorumRequest describe;
    Kq__WriteRequest write;
    int32_t preferred[KQ_RAFT_MAX_VOTERS + 1];
    ProtobufCBinaryData records[2];
} reqfix;

static const uint8_t rec_bytes[] = {1, 2, 3};

/* A valid request for `api` (Vote, Begin, End, Fetch, Describe or Write). */
static void reqfix_init(reqfix *f, uint32_t api)
{
    memset(f, 0, sizeof *f);
    kq__request__init(&f->rq);
    kq__vote_request__init(&f->vote);
    kq__begin_quorum_epoch_request__init(&f->begin);
    kq__end_quorum_epoch_request__init(&f->end);
    kq__fetch_request__init(&f->fetch);
    kq__describe_quorum_request__init(&f->describe);
    kq__write_request__init(&f->write);
    f->rq.api_key = api;
    f->rq.api_version = 0;
    f->rq.cluster_id = "cluster";
    f->rq.sender_id = 2;
    switch (api) {
    case KQ_API_VOTE:
        f->vote.candidate_epoch = 5;
        f->vote.candidate_id = 2;
        f->vote.last_offset_epoch = 4;
        f->vote.last_offset = 10;
        f->rq.body_case = KQ__REQUEST__BODY_VOTE;
        f->rq.vote = &f->vote;
        break;
    case KQ_API_BEGIN_QUORUM_EPOCH:
        f->begin.leader_id = 2;
        f->begin.leader_epoch = 5;
        f->rq.body_case = KQ__REQUEST__BODY_BEGIN_QUORUM_EPOCH;
        f->rq.begin_quorum_epoch = &f->begin;
        break;
    case KQ_API_END_QUORUM_EPOCH:
        f->end.leader_id = 2;
        f->end.leader_epoch = 5;
        f->end.n_preferred_successors = 2;
        f->end.preferred_successors = f->preferred;
        f->preferred[0] = 1;
        f->preferred[1] = 3;
        f->rq.body_case = KQ__REQUEST__BODY_END_QUORUM_EPOCH;
        f->rq.end_quorum_epoch = &f->end;
        break;
    case KQ_API_FETCH:
        f->fetch.replica_id = 2;
        f->fetch.current_leader_epoch = 5;
        f->fetch.fetch_offset = 10;
        f->fetch.last_fetched_epoch = 4;
        f->fetch.max_wait_ms = 500;
        f->fetch.max_bytes = 1 << 20;
        f->rq.body_case = KQ__REQUEST__BODY_FETCH;
        f->rq.fetch = &f->fetch;
        break;
    case KQ_API_DESCRIBE_QUORUM:
        f->rq.sender_id = -1;
        f->rq.body_case = KQ__REQUEST__BODY_DESCRIBE_QUORUM;
        f->rq.describe_quorum = &f->describe;
        break;
    case KQ_API_WRITE:
        f->rq.sender_id = -1;
        f->records[0].data = (uint8_t *)rec_bytes;
        f->records[0].len = sizeof rec_bytes;
        f->write.n_records = 1;
        f->write.records = f->records;
        f->rq.body_case = KQ__REQUEST__BODY_WRITE;
        f->rq.write = &f->write;
        break;
    default:
        break;
    }
}

static kq_buf pack_req(const Kq__Request *rq)
{
    kq_buf b;

    b.len = kq__request__get_packed_size(rq);
    b.data = malloc(b.len ? b.len : 1);
    assert_non_null(b.data);
    assert_int_equal(kq__request__pack(rq, b.data), b.len);
    return b;
}

/* Decode raw bytes; expect `code` and `needle` in the message. Returns the api key seen. */
static uint32_t expect_req_bytes(const kq_buf *b, int code, const char *needle)
{
    kq_request r;
    char err[256] = "";
    int rc = kq_codec_decode_request(b->data, b->len, &r, err, sizeof err);
    uint32_t key = r.api_key;

    if (rc != code || !strstr(err, needle))
        fail_msg("decode_request: got %d \"%s\", want %d containing \"%s\"", rc, err, code, needle);
    /* after a failed decode nothing is owned and free is harmless */
    assert_null(r.priv_);
    assert_null(r.records);
    assert_int_equal(r.n_records, 0);
    kq_request_free(&r);
    return key;
}

static void expect_req(const reqfix *f, int code, const char *needle)
{
    kq_buf b = pack_req(&f->rq);

    expect_req_bytes(&b, code, needle);
    kq_buf_free(&b);
}

static void expect_req_ok(const reqfix *f)
{
    kq_buf b = pack_req(&f->rq);
    kq_request r;
    char err[256] = "";

    if (kq_codec_decode_request(b.data, b.len, &r, err, sizeof err) != 0)
        fail_msg("valid request rejected: %s", err);
    check_request_ok(&r);
    kq_request_free(&r);
    kq_buf_free(&b);
}

static void test_request_fixtures_are_valid(void **state)
{
    const uint32_t apis[] = {KQ_API_VOTE,  KQ_API_BEGIN_QUORUM_EPOCH, KQ_API_END_QUORUM_EPOCH,
                             KQ_API_FETCH, KQ_API_DESCRIBE_QUORUM,    KQ_API_WRITE};
    reqfix f;

    for (size_t i = 0; i < sizeof apis / sizeof apis[0]; i++) {
        reqfix_init(&f, apis[i]);
        expect_req_ok(&f);
    }
}

static void test_request_unparsable(void **state)
{
    static uint8_t junk[] = {0xff, 0xff, 0xff, 0xff};
    kq_buf b = {junk, sizeof junk};
    kq_buf empty = {NULL, 0};
    reqfix f;
    kq_request r;
    char err[64];

    expect_req_bytes(&b, KQ_ERR_MALFORMED, "request does not parse");
    expect_req_bytes(&empty, KQ_ERR_MALFORMED, "request does not parse");
    /* a valid message cut short misses required fields */
    reqfix_init(&f, KQ_API_VOTE);
    b = pack_req(&f.rq);
    b.len -= 3;
    expect_req_bytes(&b, KQ_ERR_MALFORMED, "request does not parse");
    b.len += 3;
    kq_buf_free(&b);
    /* NULL buffer with a length; NULL output; tiny errbuf is NUL-terminated */
    assert_int_equal(kq_codec_decode_request(NULL, 5, &r, err, sizeof err), KQ_ERR_MALFORMED);
    assert_int_equal(kq_codec_decode_request(junk, sizeof junk, NULL, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_codec_decode_request(junk, sizeof junk, &r, err, 4), KQ_ERR_MALFORMED);
    assert_int_equal(strlen(err), 3);
    assert_int_equal(kq_codec_decode_request(junk, sizeof junk, &r, NULL, 0), KQ_ERR_MALFORMED);
}

static void test_request_envelope(void **state)
{
    reqfix f;
    kq_buf b;
    char *p;

    reqfix_init(&f, 7);
    expect_req(&f, KQ_ERR_INVALID_REQUEST, "unknown api key 7");
    reqfix_init(&f, 0);
    expect_req(&f, KQ_ERR_INVALID_REQUEST, "unknown api key 0");

    reqfix_init(&f, KQ_API_FETCH);
    f.rq.api_version = 1;
    expect_req(&f, KQ_ERR_UNSUPPORTED_VERSION, "Fetch version 1 is not supported");

    reqfix_init(&f, KQ_API_VOTE);
    f.rq.cluster_id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdefX";
    expect_req(&f, KQ_ERR_INVALID_REQUEST, "cluster_id is longer than 64");
    f.rq.cluster_id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    expect_req_ok(&f);

    /* a NUL inside a string is not silently cut */
    reqfix_init(&f, KQ_API_VOTE);
    f.rq.cluster_id = "abcXdef";
    b = pack_req(&f.rq);
    p = memmem(b.data, b.len, "abcXdef", 7);
    assert_non_null(p);
    p[3] = '\0';
    expect_req_bytes(&b, KQ_ERR_INVALID_REQUEST, "NUL byte");
    kq_buf_free(&b);

    reqfix_init(&f, KQ_API_VOTE);
    f.rq.sender_id = -2;
    expect_req(&f, KQ_ERR_INVALID_REQUEST, "sender_id -2 is invalid");

    /* body required and matching the api key */
    reqfix_init(&f, KQ_API_VOTE);
    f.rq.body_case = KQ__REQUEST__BODY__NOT_SET;
    expect_req(&f, KQ_ERR_INVALID_REQUEST, "Vote request has no body");
    reqfix_init(&f, KQ_API_FETCH);
    f.rq.api_key = KQ_API_VOTE;
    b = pack_req(&f.rq);
    /* the api key is reported even when the body is wrong, for the error response */
    assert_int_equal(expect_req_bytes(&b, KQ_ERR_INVALID_REQUEST, "Vote request carries a fetch"),
                     KQ_API_VOTE);
    kq_buf_free(&b);
    reqfix_init(&f, KQ_API_DESCRIBE_QUORUM);
    f.rq.api_key = KQ_API_FETCH_SNAPSHOT;
    expect_req(&f, KQ_ERR_INVALID_REQUEST, "FetchSnapshot request carries a describe_quorum body");
}

static void test_vote_request_rules(void **state)
{
    reqfix f;

    reqfix_init(&f, KQ_API_VOTE);
    f.vote.candidate_epoch = -1;
    f.vote.last_offset_epoch = 0;
    expect_req(&f, KQ_ERR_INVALID_REQUEST,
               "VoteRequest.candidate_epoch -1 is out of range [0, 2147483647]");
    reqfix_init(&f, KQ_API_VOTE);
    f.vote.candidate_id = -2;
    expect_req(&f, KQ_ERR_INVALID_REQUEST,
               "VoteRequest.candidate_id -2 is out of range [-1, 2147483647]");
    reqfix_init(&f, KQ_API_VOTE);
    f.vote.last_offset_epoch = -1;
    expect_req(&f, KQ_ERR_INVALID_REQUEST,
               "VoteRequest.last_offset_epoch -1 is out of range [0, 2147483647]");
    reqfix_init(&f, KQ_API_VOTE);
    f.vote.last_offset = -1;
    expect_req(&f, KQ_ERR_INVALID_REQUEST,
               "VoteRequest.last_offset -1 is out of range [0, 9223372036854775807]");
    /* reference 1.4: lastOffsetEpoch >= candidateEpoch is invalid */
    reqfix_init(&f, KQ_API_VOTE);
    f.vote.last_offset_epoch = 5;
    expect_req(&f, KQ_ERR_INVALID_REQUEST, "last_offset_epoch 5 is not below candidate_epoch 5");
    f.vote.last_offset_epoch = 6;
    expect_req(&f, KQ_ERR_INVALID_REQUEST, "not below candidate_epoch");
    f.vote.last_offset_epoch = 4;
    expect_req_ok(&f);
    /* the smallest valid vote: epoch 1 over an empty log */
    f.vote.candidate_epoch = 1;
    f.vote.last_offset_epoch = 0;
    f.vote.last_offset = 0;
    expect_req_ok(&f);
    f.vote.candidate_epoch = 0;
    expect_req(&f, KQ_ERR_INVALID_REQUEST, "not below candidate_epoch 0");
}

static void test_quorum_epoch_request_rules(void **state)
{
    reqfix f;

    reqfix_init(&f, KQ_API_BEGIN_QUORUM_EPOCH);
    f.begin.leader_id = -2;
    expect_req(&f, KQ_ERR_INVALID_REQUEST,
               "BeginQuorumEpochRequest.leader_id -2 is out of range [-1, 2147483647]");
    reqfix_init(&f, KQ_API_BEGIN_QUORUM_EPOCH);
    f.begin.leader_epoch = -1;
    expect_req(&f, KQ_ERR_INVALID_REQUEST,
               "BeginQuorumEpochRequest.leader_epoch -1 is out of range [0, 2147483647]");

    reqfix_init(&f, KQ_API_END_QUORUM_EPOCH);
    f.end.leader_epoch = INT32_MIN;
    expect_req(&f, KQ_ERR_INVALID_REQUEST,
               "EndQuorumEpochRequest.leader_epoch -2147483648 is out of range [0, 2147483647]");
    reqfix_init(&f, KQ_API_END_QUORUM_EPOCH);
    f.end.leader_id = INT32_MIN;
    expect_req(&f, KQ_ERR_INVALID_REQUEST,
               "EndQuorumEpochRequest.leader_id -2147483648 is out of range [-1, 2147483647]");
    reqfix_init(&f, KQ_API_END_QUORUM_EPOCH);
    f.preferred[1] = -2;
    expect_req(&f, KQ_ERR_INVALID_REQUEST, "preferred successor -2 is invalid");
    reqfix_init(&f, KQ_API_END_QUORUM_EPOCH);
    f.end.n_preferred_successors = KQ_RAFT_MAX_VOTERS;
    expect_req_ok(&f);
    f.end.n_preferred_successors = KQ_RAFT_MAX_VOTERS + 1;
    expect_req(&f, KQ_ERR_INVALID_REQUEST,
               "EndQuorumEpochRequest.preferred_successors has 17 entries (max 16)");
}

static void test_fetch_request_rules(void **state)
{
    reqfix f;

    reqfix_init(&f, KQ_API_FETCH);
    f.fetch.replica_id = 3;
    expect_req(&f, KQ_ERR_INVALID_REQUEST, "replica_id 3 does not match sender_id 2");
    reqfix_init(&f, KQ_API_FETCH);
    f.fetch.current_leader_epoch = -1;
    expect_req(&f, KQ_ERR_INVALID_REQUEST,
               "FetchRequest.current_leader_epoch -1 is out of range [0, 2147483647]");
    reqfix_init(&f, KQ_API_FETCH);
    f.fetch.fetch_offset = INT64_MIN;
    expect_req(
        &f, KQ_ERR_INVALID_REQUEST,
        "FetchRequest.fetch_offset -9223372036854775808 is out of range [0, 9223372036854775807]");
    reqfix_init(&f, KQ_API_FETCH);
    f.fetch.last_fetched_epoch = -1;
    expect_req(&f, KQ_ERR_INVALID_REQUEST,
               "FetchRequest.last_fetched_epoch -1 is out of range [0, 2147483647]");
    reqfix_init(&f, KQ_API_FETCH);
    f.fetch.max_wait_ms = -1;
    expect_req(&f, KQ_ERR_INVALID_REQUEST,
               "FetchRequest.max_wait_ms -1 is out of range [0, 2147483647]");
    reqfix_init(&f, KQ_API_FETCH);
    f.fetch.max_bytes = -1;
    expect_req(&f, KQ_ERR_INVALID_REQUEST,
               "FetchRequest.max_bytes -1 is out of range [0, 2147483647]");
}

static void test_write_request_rules(void **state)
{
    reqfix f;
    ProtobufCBinaryData *many;

    reqfix_init(&f, KQ_API_WRITE);
    f.write.n_records = 0;
    expect_req(&f, KQ_ERR_INVALID_REQUEST, "WriteRequest.records has no entries");

    many = calloc(KQ_CODEC_MAX_WRITE_RECORDS + 1, sizeof *many);
    assert_non_null(many);
    reqfix_init(&f, KQ_API_WRITE);
    f.write.records = many;
    f.write.n_records = KQ_CODEC_MAX_WRITE_RECORDS;
    expect_req_ok(&f);
    f.write.n_records = KQ_CODEC_MAX_WRITE_RECORDS + 1;
    expect_req(&f, KQ_ERR_INVALID_REQUEST, "WriteRequest.records has 10001 entries (max 10000)");
    free(many);
}

/* ---- responses ------------------------------------------------------------------------ */

#define NB (KQ_RAFT_MAX_BATCHES + 1)

typedef struct respfix {
    Kq__Response rs;
    Kq__VoteResponse vote;
    Kq__BeginQuorumEpochResponse begin;
    Kq__EndQuorumEpochResponse end;
    Kq__FetchResponse fetch;
    Kq__DivergingEpoch diverging;
    Kq__FetchSnapshotId snapshot;
    Kq__Batch batch[NB];
    Kq__Batch *batch_ptrs[NB];
    Kq__DescribeQuorumResponse describe;
    Kq__ReplicaState replica[KQ_RAFT_MAX_OBSERVERS + 1];
    Kq__ReplicaState *replica_ptrs[KQ_RAFT_MAX_OBSERVERS + 1];
    Kq__NodeEndpoint node[KQ_RAFT_MAX_VOTERS + 1];
    Kq__NodeEndpoint *node_ptrs[KQ_RAFT_MAX_VOTERS + 1];
    Kq__WriteResponse write;
    kq_buf payload; /* 2 records, shared by every batch */
} respfix;

static void respfix_free(respfix *f)
{
    kq_buf_free(&f->payload);
}

/* A valid response for `api`; fetch has 2 batches of 2 records at 10 and 12. */
static void respfix_init(respfix *f, uint32_t api)
{
    memset(f, 0, sizeof *f);
    kq__response__init(&f->rs);
    kq__vote_response__init(&f->vote);
    kq__begin_quorum_epoch_response__init(&f->begin);
    kq__end_quorum_epoch_response__init(&f->end);
    kq__fetch_response__init(&f->fetch);
    kq__diverging_epoch__init(&f->diverging);
    kq__fetch_snapshot_id__init(&f->snapshot);
    kq__describe_quorum_response__init(&f->describe);
    kq__write_response__init(&f->write);
    tu_opaque_payload(&f->payload, 2, 4, 0x5a);
    for (int i = 0; i < NB; i++) {
        kq__batch__init(&f->batch[i]);
        f->batch[i].base_offset = 10 + 2 * i;
        f->batch[i].epoch = 1;
        f->batch[i].count = 2;
        f->batch[i].records.data = f->payload.data;
        f->batch[i].records.len = f->payload.len;
        f->batch[i].crc32c = kq_crc32c(0, f->payload.data, f->payload.len);
        f->batch_ptrs[i] = &f->batch[i];
    }
    for (int i = 0; i <= KQ_RAFT_MAX_OBSERVERS; i++) {
        kq__replica_state__init(&f->replica[i]);
        f->replica[i].replica_id = i;
        f->replica[i].directory_id = "";
        f->replica[i].log_end_offset = 5;
        f->replica[i].last_fetch_timestamp = -1;
        f->replica[i].last_caught_up_timestamp = -1;
        f->replica_ptrs[i] = &f->replica[i];
    }
    for (int i = 0; i <= KQ_RAFT_MAX_VOTERS; i++) {
        kq__node_endpoint__init(&f->node[i]);
        f->node[i].node_id = i;
        f->node[i].listener = "CONTROLLER";
        f->node[i].host = "localhost";
        f->node[i].port = 9093;
        f->node_ptrs[i] = &f->node[i];
    }
    f->rs.api_key = api;
    f->rs.error_code = 0;
    switch (api) {
    case KQ_API_VOTE:
        f->vote.leader_id = -1;
        f->vote.leader_epoch = 5;
        f->vote.vote_granted = 1;
        f->rs.body_case = KQ__RESPONSE__BODY_VOTE;
        f->rs.vote = &f->vote;
        break;
    case KQ_API_BEGIN_QUORUM_EPOCH:
        f->begin.leader_id = 1;
        f->begin.leader_epoch = 5;
        f->rs.body_case = KQ__RESPONSE__BODY_BEGIN_QUORUM_EPOCH;
        f->rs.begin_quorum_epoch = &f->begin;
        break;
    case KQ_API_END_QUORUM_EPOCH:
        f->end.leader_id = 1;
        f->end.leader_epoch = 5;
        f->rs.body_case = KQ__RESPONSE__BODY_END_QUORUM_EPOCH;
        f->rs.end_quorum_epoch = &f->end;
        break;
    case KQ_API_FETCH:
        f->fetch.leader_id = 1;
        f->fetch.leader_epoch = 5;
        f->fetch.high_watermark = 12;
        f->fetch.log_start_offset = 0;
        f->fetch.n_batches = 2;
        f->fetch.batches = f->batch_ptrs;
        f->rs.body_case = KQ__RESPONSE__BODY_FETCH;
        f->rs.fetch = &f->fetch;
        break;
    case KQ_API_DESCRIBE_QUORUM:
        f->describe.cluster_id = "cluster";
        f->describe.leader_id = 1;
        f->describe.leader_epoch = 5;
        f->describe.high_watermark = 12;
        f->describe.n_current_voters = 3;
        f->describe.current_voters = f->replica_ptrs;
        f->describe.n_observers = 1;
        f->describe.observers = f->replica_ptrs + 3;
        f->describe.n_nodes = 3;
        f->describe.nodes = f->node_ptrs;
        f->rs.body_case = KQ__RESPONSE__BODY_DESCRIBE_QUORUM;
        f->rs.describe_quorum = &f->describe;
        break;
    case KQ_API_WRITE:
        f->write.base_offset = 12;
        f->write.epoch = 5;
        f->rs.body_case = KQ__RESPONSE__BODY_WRITE;
        f->rs.write = &f->write;
        break;
    default:
        break;
    }
}

static kq_buf pack_resp(const Kq__Response *rs)
{
    kq_buf b;

    b.len = kq__response__get_packed_size(rs);
    b.data = malloc(b.len ? b.len : 1);
    assert_non_null(b.data);
    assert_int_equal(kq__response__pack(rs, b.data), b.len);
    return b;
}

static void expect_resp_bytes(const kq_buf *b, int code, const char *needle)
{
    kq_response r;
    char err[256] = "";
    int rc = kq_codec_decode_response(b->data, b->len, 9, &r, err, sizeof err);

    if (rc != code || !strstr(err, needle))
        fail_msg("decode_response: got %d \"%s\", want %d containing \"%s\"", rc, err, code,
                 needle);
    assert_null(r.priv_);
    assert_null(r.batches);
    assert_null(r.raft.u.fetch_resp.batches);
    kq_response_free(&r);
}

static void expect_resp(const respfix *f, int code, const char *needle)
{
    kq_buf b = pack_resp(&f->rs);

    expect_resp_bytes(&b, code, needle);
    kq_buf_free(&b);
}

static void expect_resp_ok(const respfix *f)
{
    kq_buf b = pack_resp(&f->rs);
    kq_response r;
    char err[256] = "";

    if (kq_codec_decode_response(b.data, b.len, 9, &r, err, sizeof err) != 0)
        fail_msg("valid response rejected: %s", err);
    check_response_ok(&r, 9);
    kq_response_free(&r);
    kq_buf_free(&b);
}

static void test_response_fixtures_are_valid(void **state)
{
    const uint32_t apis[] = {KQ_API_VOTE,  KQ_API_BEGIN_QUORUM_EPOCH, KQ_API_END_QUORUM_EPOCH,
                             KQ_API_FETCH, KQ_API_DESCRIBE_QUORUM,    KQ_API_WRITE};
    respfix f;

    for (size_t i = 0; i < sizeof apis / sizeof apis[0]; i++) {
        respfix_init(&f, apis[i]);
        expect_resp_ok(&f);
        respfix_free(&f);
    }
}

static void test_response_envelope(void **state)
{
    static uint8_t junk[] = {0x0a, 0x80};
    kq_buf b = {junk, sizeof junk};
    char big[300];
    respfix f;
    char *p;

    expect_resp_bytes(&b, KQ_ERR_MALFORMED, "response does not parse");
    b.len = 0;
    expect_resp_bytes(&b, KQ_ERR_MALFORMED, "response does not parse");

    respfix_init(&f, 999);
    f.rs.error_code = KQ_ERR_INVALID_REQUEST;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST, "unknown api key 999");
    respfix_free(&f);

    respfix_init(&f, KQ_API_WRITE);
    f.rs.error_code = -1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "Response.error_code -1 is out of range [0, 2147483647]");
    f.rs.error_code = 0;

    memset(big, 'm', sizeof big);
    big[256] = '\0';
    f.rs.error_message = big;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST, "error_message is longer than 255");
    big[255] = '\0';
    expect_resp_ok(&f);
    f.rs.error_message = NULL;

    f.rs.has_leader_id = 1;
    f.rs.leader_id = -2;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "Response.leader_id -2 is out of range [-1, 2147483647]");
    f.rs.leader_id = -1;
    expect_resp_ok(&f);
    f.rs.has_leader_epoch = 1;
    f.rs.leader_epoch = -2;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "Response.leader_epoch -2 is out of range [-1, 2147483647]");
    f.rs.leader_epoch = 0;

    memset(big, 'h', sizeof big);
    big[256] = '\0';
    f.rs.leader_endpoint = big;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST, "leader_endpoint is longer than 255");
    f.rs.leader_endpoint = "host:9093";
    expect_resp_ok(&f);

    /* NUL inside the endpoint */
    f.rs.leader_endpoint = "hostXevil";
    b = pack_resp(&f.rs);
    p = memmem(b.data, b.len, "hostXevil", 9);
    assert_non_null(p);
    p[4] = '\0';
    expect_resp_bytes(&b, KQ_ERR_INVALID_REQUEST, "NUL byte");
    kq_buf_free(&b);
    f.rs.leader_endpoint = NULL;

    /* body: required without an error, must match the api key */
    f.rs.body_case = KQ__RESPONSE__BODY__NOT_SET;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST, "Write response has neither an error nor a body");
    f.rs.error_code = KQ_ERR_NOT_CONTROLLER;
    expect_resp_ok(&f);
    f.rs.body_case = KQ__RESPONSE__BODY_VOTE;
    f.rs.vote = &f.vote;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST, "Write response carries a vote body");
    respfix_free(&f);

    /* FetchSnapshot is supported: an error answer without a body decodes */
    respfix_init(&f, KQ_API_FETCH_SNAPSHOT);
    f.rs.error_code = KQ_ERR_SNAPSHOT_NOT_FOUND;
    expect_resp_ok(&f);
    respfix_free(&f);
}

static void test_small_raft_response_rules(void **state)
{
    respfix f;

    respfix_init(&f, KQ_API_VOTE);
    f.vote.leader_epoch = -1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "VoteResponse.leader_epoch -1 is out of range [0, 2147483647]");
    f.vote.leader_epoch = 0;
    f.vote.leader_id = -5;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "VoteResponse.leader_id -5 is out of range [-1, 2147483647]");
    respfix_free(&f);

    respfix_init(&f, KQ_API_BEGIN_QUORUM_EPOCH);
    f.begin.leader_epoch = -3;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "BeginQuorumEpochResponse.leader_epoch -3 is out of range [0, 2147483647]");
    respfix_free(&f);

    respfix_init(&f, KQ_API_END_QUORUM_EPOCH);
    f.end.leader_id = -3;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "EndQuorumEpochResponse.leader_id -3 is out of range [-1, 2147483647]");
    respfix_free(&f);
}

static void test_fetch_response_rules(void **state)
{
    respfix f;

    respfix_init(&f, KQ_API_FETCH);
    f.fetch.leader_epoch = -1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "FetchResponse.leader_epoch -1 is out of range [0, 2147483647]");
    f.fetch.leader_epoch = 5;
    f.fetch.high_watermark = -2;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "FetchResponse.high_watermark -2 is out of range [-1, 9223372036854775807]");
    f.fetch.high_watermark = -1;
    expect_resp_ok(&f);
    f.fetch.log_start_offset = -1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "FetchResponse.log_start_offset -1 is out of range [0, 9223372036854775807]");
    f.fetch.log_start_offset = 0;

    f.fetch.diverging_epoch = &f.diverging;
    f.diverging.epoch = -1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "FetchResponse.diverging_epoch.epoch -1 is out of range [0, 2147483647]");
    f.diverging.epoch = 3;
    f.diverging.end_offset = -1;
    expect_resp(
        &f, KQ_ERR_INVALID_REQUEST,
        "FetchResponse.diverging_epoch.end_offset -1 is out of range [0, 9223372036854775807]");
    f.diverging.end_offset = 0;
    expect_resp_ok(&f);
    f.fetch.diverging_epoch = NULL;

    f.fetch.snapshot_id = &f.snapshot;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST, "snapshot");
    f.fetch.snapshot_id = NULL;

    f.fetch.n_batches = KQ_RAFT_MAX_BATCHES;
    expect_resp_ok(&f);
    f.fetch.n_batches = KQ_RAFT_MAX_BATCHES + 1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST, "FetchResponse.batches has 65 entries (max 64)");
    respfix_free(&f);
}

static void test_batch_rules(void **state)
{
    respfix f;

    respfix_init(&f, KQ_API_FETCH);
    f.batch[0].base_offset = -1;
    f.batch[1].base_offset = 1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "FetchResponse.batches[0].base_offset -1 is out of range [0, 9223372036854775807]");
    respfix_free(&f);

    respfix_init(&f, KQ_API_FETCH);
    f.batch[1].epoch = -1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "FetchResponse.batches[1].epoch -1 is out of range [0, 2147483647]");
    respfix_free(&f);

    respfix_init(&f, KQ_API_FETCH);
    f.batch[1].count = 0;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "FetchResponse.batches[1].count 0 is out of range [1, 1000000]");
    f.batch[1].count = -7;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "FetchResponse.batches[1].count -7 is out of range [1, 1000000]");
    f.batch[1].count = 1000001;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "FetchResponse.batches[1].count 1000001 is out of range [1, 1000000]");
    respfix_free(&f);

    /* contiguity: a gap and an overlap */
    respfix_init(&f, KQ_API_FETCH);
    f.batch[1].base_offset = 13;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST, "batch 1 base_offset 13 does not follow");
    f.batch[1].base_offset = 11;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST, "(expected 12)");
    respfix_free(&f);

    /* offset overflow */
    respfix_init(&f, KQ_API_FETCH);
    f.fetch.n_batches = 1;
    f.batch[0].base_offset = INT64_MAX - 1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST, "overflows");
    f.batch[0].base_offset = INT64_MAX - 2;
    expect_resp_ok(&f);
    respfix_free(&f);

    /* too few bytes for the claimed records */
    respfix_init(&f, KQ_API_FETCH);
    f.batch[0].records.len = 1;
    f.batch[0].crc32c = kq_crc32c(0, f.payload.data, 1);
    expect_resp(&f, KQ_ERR_INVALID_REQUEST, "too few for 2 records");
    respfix_free(&f);

    /* CRC */
    respfix_init(&f, KQ_API_FETCH);
    f.batch[1].crc32c ^= 1;
    expect_resp(&f, KQ_ERR_CORRUPT_MESSAGE, "batch 1 at offset 12: crc32c");
    respfix_free(&f);
    respfix_init(&f, KQ_API_FETCH);
    f.payload.data[f.payload.len - 1] ^= 0x80; /* payload changed after the CRC was taken */
    expect_resp(&f, KQ_ERR_CORRUPT_MESSAGE, "does not match");
    respfix_free(&f);
}

static void test_describe_response_rules(void **state)
{
    respfix f;
    char s[300];

    respfix_init(&f, KQ_API_DESCRIBE_QUORUM);
    f.describe.cluster_id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef!";
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "DescribeQuorumResponse.cluster_id is longer than 64 bytes");
    f.describe.cluster_id = "";
    expect_resp_ok(&f);
    f.describe.leader_epoch = -1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "DescribeQuorumResponse.leader_epoch -1 is out of range [0, 2147483647]");
    f.describe.leader_epoch = 0;
    f.describe.leader_id = -2;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "DescribeQuorumResponse.leader_id -2 is out of range [-1, 2147483647]");
    f.describe.leader_id = 0;
    f.describe.high_watermark = -2;
    expect_resp(
        &f, KQ_ERR_INVALID_REQUEST,
        "DescribeQuorumResponse.high_watermark -2 is out of range [-1, 9223372036854775807]");
    f.describe.high_watermark = 0;

    f.describe.n_current_voters = KQ_RAFT_MAX_VOTERS + 1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "DescribeQuorumResponse.current_voters has 17 entries (max 16)");
    f.describe.n_current_voters = KQ_RAFT_MAX_VOTERS;
    expect_resp_ok(&f);
    f.describe.n_observers = KQ_RAFT_MAX_OBSERVERS + 1;
    f.describe.observers = f.replica_ptrs;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "DescribeQuorumResponse.observers has 65 entries (max 64)");
    f.describe.n_observers = KQ_RAFT_MAX_OBSERVERS;
    expect_resp_ok(&f);
    f.describe.n_nodes = KQ_RAFT_MAX_VOTERS + 1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST, "DescribeQuorumResponse.nodes has 17 entries (max 16)");
    f.describe.n_nodes = KQ_RAFT_MAX_VOTERS;
    expect_resp_ok(&f);

    /* replica fields (replica 1 is voter 1; observers start at replica 0 here) */
    f.replica[1].replica_id = -2;
    expect_resp(
        &f, KQ_ERR_INVALID_REQUEST,
        "DescribeQuorumResponse.current_voters[1].replica_id -2 is out of range [-1, 2147483647]");
    f.replica[1].replica_id = 1;
    f.replica[1].directory_id = "short";
    expect_resp(&f, KQ_ERR_INVALID_REQUEST, "voter 1 directory_id is not a 22-character uuid");
    f.replica[1].directory_id = "AAAAAAAAAAAAAAAAAAAAA=";
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "describe voter 1 directory_id is not a 22-character uuid");
    f.replica[1].directory_id = "AAAAAAAAAAAAAAAAAAAAAAA";
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "DescribeQuorumResponse.current_voters[1].directory_id is longer than 22 bytes");
    f.replica[1].directory_id = "AAAAAAAAAAAAAAAAAAAAAg";
    expect_resp_ok(&f);
    f.replica[1].log_end_offset = -2;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "DescribeQuorumResponse.current_voters[1].log_end_offset -2 is out of range [-1, "
                "9223372036854775807]");
    f.replica[1].log_end_offset = -1;
    f.replica[KQ_RAFT_MAX_OBSERVERS - 1].last_caught_up_timestamp = -2;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "DescribeQuorumResponse.observers[63].last_caught_up_timestamp -2 is out of range "
                "[-1, 9223372036854775807]");
    f.replica[KQ_RAFT_MAX_OBSERVERS - 1].last_caught_up_timestamp = 0;
    f.replica[2].last_fetch_timestamp = INT64_MIN;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "DescribeQuorumResponse.current_voters[2].last_fetch_timestamp "
                "-9223372036854775808 is out of range [-1, 9223372036854775807]");
    f.replica[2].last_fetch_timestamp = 0;
    expect_resp_ok(&f);

    /* node endpoints */
    f.node[3].node_id = -2;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "DescribeQuorumResponse.nodes[3].node_id -2 is out of range [-1, 2147483647]");
    f.node[3].node_id = 3;
    memset(s, 'l', sizeof s);
    s[32] = '\0';
    f.node[3].listener = s;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "DescribeQuorumResponse.nodes[3].listener is longer than 31 bytes");
    s[31] = '\0';
    expect_resp_ok(&f);
    f.node[3].listener = "C";
    memset(s, 'h', sizeof s);
    s[256] = '\0';
    f.node[3].host = s;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "DescribeQuorumResponse.nodes[3].host is longer than 255 bytes");
    s[255] = '\0';
    expect_resp_ok(&f);
    f.node[3].port = 65536;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "DescribeQuorumResponse.nodes[3].port 65536 is out of range [0, 65535]");
    f.node[3].port = -1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "DescribeQuorumResponse.nodes[3].port -1 is out of range [0, 65535]");
    respfix_free(&f);
}

static void test_write_response_rules(void **state)
{
    respfix f;

    respfix_init(&f, KQ_API_WRITE);
    f.write.base_offset = -1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "WriteResponse.base_offset -1 is out of range [0, 9223372036854775807]");
    f.write.base_offset = 0;
    f.write.epoch = -1;
    expect_resp(&f, KQ_ERR_INVALID_REQUEST,
                "WriteResponse.epoch -1 is out of range [0, 2147483647]");
    respfix_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_fixtures_are_valid),
        cmocka_unit_test(test_request_unparsable),
        cmocka_unit_test(test_request_envelope),
        cmocka_unit_test(test_vote_request_rules),
        cmocka_unit_test(test_quorum_epoch_request_rules),
        cmocka_unit_test(test_fetch_request_rules),
        cmocka_unit_test(test_write_request_rules),
        cmocka_unit_test(test_response_fixtures_are_valid),
        cmocka_unit_test(test_response_envelope),
        cmocka_unit_test(test_small_raft_response_rules),
        cmocka_unit_test(test_fetch_response_rules),
        cmocka_unit_test(test_batch_rules),
        cmocka_unit_test(test_describe_response_rules),
        cmocka_unit_test(test_write_response_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
