/*
 * Round trips through kq_codec: every request and response type, with boundary values, and the
 * encoders' refusal of arguments that would produce a message the decoders reject.
 */
#include <limits.h>
#include <stdio.h>

#include "codec_testutil.h"

static const char CID64[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
static const char CID65[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdefX";

static kq_raft_msg blank_msg(kq_raft_msg_type type)
{
    kq_raft_msg m;

    memset(&m, 0, sizeof m);
    m.type = type;
    m.to = 7;
    m.from = 1;
    m.leader_id = -1;
    return m;
}

/* Encode m as a request and decode it; the decoded request is returned in *r. */
static void request_roundtrip(const kq_raft_msg *m, const char *cid, kq_request *r)
{
    kq_buf b = {0};
    char err[256] = "";

    assert_int_equal(kq_codec_encode_raft_request(m, cid, &b), 0);
    assert_non_null(b.data);
    assert_int_equal(kq_codec_decode_request(b.data, b.len, r, err, sizeof err), 0);
    check_request_ok(r);
    assert_int_equal(r->api_version, 0);
    assert_string_equal(r->cluster_id, cid ? cid : "");
    assert_int_equal(r->sender_id, m->from);
    assert_int_equal(r->raft.type, m->type);
    assert_int_equal(r->raft.from, m->from);
    assert_int_equal(r->raft.to, -1); /* the host fills it */
    assert_int_equal(r->raft.epoch, m->epoch);
    kq_buf_free(&b);
    assert_null(b.data);
}

static void test_vote_request(void **state)
{
    kq_raft_msg m = blank_msg(KQ_RAFT_VOTE_REQ);
    kq_request r;
    const int32_t epochs[][2] = {{1, 0}, {INT32_MAX, INT32_MAX - 1}, {5, 4}};
    const int64_t offsets[] = {0, 1, INT64_MAX};

    for (size_t e = 0; e < sizeof epochs / sizeof epochs[0]; e++) {
        for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
            for (int pre = 0; pre <= 1; pre++) {
                m.from = (int32_t)e == 0 ? INT32_MAX : (int32_t)o;
                m.epoch = epochs[e][0];
                m.u.vote_req.candidate_id = m.from;
                m.u.vote_req.last_epoch = epochs[e][1];
                m.u.vote_req.last_offset = offsets[o];
                m.u.vote_req.pre_vote = pre;
                request_roundtrip(&m, pre ? CID64 : "", &r);
                assert_int_equal(r.api_key, KQ_API_VOTE);
                assert_int_equal(r.raft.u.vote_req.candidate_id, m.from);
                assert_int_equal(r.raft.u.vote_req.last_epoch, epochs[e][1]);
                assert_true(r.raft.u.vote_req.last_offset == offsets[o]);
                assert_int_equal(r.raft.u.vote_req.pre_vote, pre);
                assert_int_equal(r.raft.leader_id, -1);
                kq_request_free(&r);
            }
        }
    }
    /* NULL cluster id encodes as "" */
    m.u.vote_req.last_epoch = 0;
    m.epoch = 1;
    request_roundtrip(&m, NULL, &r);
    kq_request_free(&r);
}

static void test_begin_end_requests(void **state)
{
    kq_raft_msg m = blank_msg(KQ_RAFT_BEGIN_EPOCH_REQ);
    kq_request r;

    m.from = 3;
    m.leader_id = 3;
    m.epoch = INT32_MAX;
    request_roundtrip(&m, "cluster", &r);
    assert_int_equal(r.api_key, KQ_API_BEGIN_QUORUM_EPOCH);
    assert_int_equal(r.raft.leader_id, 3);
    kq_request_free(&r);

    m.epoch = 0;
    m.leader_id = -1;
    request_roundtrip(&m, "cluster", &r);
    assert_int_equal(r.raft.leader_id, -1);
    kq_request_free(&r);

    for (int n = 0; n <= KQ_RAFT_MAX_VOTERS; n += KQ_RAFT_MAX_VOTERS / 2) {
        m = blank_msg(KQ_RAFT_END_EPOCH_REQ);
        m.from = 2;
        m.leader_id = 2;
        m.epoch = 9;
        m.u.end_req.n_preferred = n;
        for (int i = 0; i < n; i++)
            m.u.end_req.preferred[i] = i == 0 ? INT32_MAX : i;
        request_roundtrip(&m, "c", &r);
        assert_int_equal(r.api_key, KQ_API_END_QUORUM_EPOCH);
        assert_int_equal(r.raft.leader_id, 2);
        assert_int_equal(r.raft.u.end_req.n_preferred, n);
        for (int i = 0; i < n; i++)
            assert_int_equal(r.raft.u.end_req.preferred[i], m.u.end_req.preferred[i]);
        kq_request_free(&r);
    }
}

static void test_fetch_request(void **state)
{
    kq_raft_msg m = blank_msg(KQ_RAFT_FETCH_REQ);
    kq_request r;

    m.from = 4;
    m.epoch = 0;
    m.u.fetch_req.fetch_offset = 0;
    m.u.fetch_req.last_fetched_epoch = 0;
    m.u.fetch_req.max_wait_ms = 0;
    request_roundtrip(&m, CID64, &r);
    assert_int_equal(r.api_key, KQ_API_FETCH);
    assert_true(r.raft.u.fetch_req.fetch_offset == 0);
    kq_request_free(&r);

    m.from = -1; /* a tool fetching as an anonymous observer */
    m.epoch = INT32_MAX;
    m.u.fetch_req.fetch_offset = INT64_MAX;
    m.u.fetch_req.last_fetched_epoch = INT32_MAX;
    m.u.fetch_req.max_wait_ms = INT32_MAX;
    request_roundtrip(&m, CID64, &r);
    assert_true(r.raft.u.fetch_req.fetch_offset == INT64_MAX);
    assert_int_equal(r.raft.u.fetch_req.last_fetched_epoch, INT32_MAX);
    assert_int_equal(r.raft.u.fetch_req.max_wait_ms, INT32_MAX);
    assert_int_equal(r.raft.from, -1);
    kq_request_free(&r);
}

static void test_describe_and_write_requests(void **state)
{
    kq_buf b = {0};
    kq_request r;
    char err[256];
    static const uint8_t one[] = {0x00, 0xff, 0x7f};
    const uint8_t *recs[3] = {one, NULL, one};
    size_t lens[3] = {sizeof one, 0, 1};

    assert_int_equal(kq_codec_encode_describe_request(CID64, &b), 0);
    assert_int_equal(kq_codec_decode_request(b.data, b.len, &r, err, sizeof err), 0);
    check_request_ok(&r);
    assert_int_equal(r.api_key, KQ_API_DESCRIBE_QUORUM);
    assert_string_equal(r.cluster_id, CID64);
    assert_int_equal(r.sender_id, -1);
    kq_request_free(&r);
    kq_buf_free(&b);

    assert_int_equal(kq_codec_encode_write_request(NULL, recs, lens, 3, &b), 0);
    assert_int_equal(kq_codec_decode_request(b.data, b.len, &r, err, sizeof err), 0);
    check_request_ok(&r);
    assert_int_equal(r.api_key, KQ_API_WRITE);
    assert_string_equal(r.cluster_id, "");
    assert_int_equal(r.n_records, 3);
    assert_int_equal(r.record_lens[0], 3);
    assert_memory_equal(r.records[0], one, 3);
    assert_int_equal(r.record_lens[1], 0);
    assert_non_null(r.records[1]);
    assert_int_equal(r.record_lens[2], 1);
    assert_int_equal(r.records[2][0], 0x00);
    kq_buf_free(&b);
    /* records point into the decoded struct, not into the wire buffer */
    assert_memory_equal(r.records[0], one, 3);
    kq_request_free(&r);
    assert_null(r.records);
    assert_null(r.priv_);
    kq_request_free(&r); /* twice is safe */
}

static void test_write_request_max_records(void **state)
{
    size_t n = KQ_CODEC_MAX_WRITE_RECORDS;
    const uint8_t **recs = calloc(n, sizeof *recs);
    size_t *lens = calloc(n, sizeof *lens);
    uint8_t *vals = calloc(n, 1);
    kq_buf b = {0};
    kq_request r;
    char err[256];

    assert_non_null(recs);
    assert_non_null(lens);
    assert_non_null(vals);
    for (size_t i = 0; i < n; i++) {
        vals[i] = (uint8_t)i;
        recs[i] = &vals[i];
        lens[i] = 1;
    }
    assert_int_equal(kq_codec_encode_write_request("c", recs, lens, n, &b), 0);
    assert_int_equal(kq_codec_decode_request(b.data, b.len, &r, err, sizeof err), 0);
    assert_int_equal(r.n_records, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(r.records[i][0], (uint8_t)i);
    kq_request_free(&r);
    kq_buf_free(&b);
    /* one more is refused by the encoder */
    assert_int_equal(kq_codec_encode_write_request("c", recs, lens, n + 1, &b),
                     KQ_ERR_INVALID_REQUEST);
    free(recs);
    free(lens);
    free(vals);
}

static void response_roundtrip(const kq_raft_msg *m, const kq_codec_batch *batches, size_t n,
                               kq_response *r)
{
    kq_buf b = {0};
    char err[256] = "";

    assert_int_equal(kq_codec_encode_raft_response(m, batches, n, &b), 0);
    assert_int_equal(kq_codec_decode_response(b.data, b.len, 42, r, err, sizeof err), 0);
    check_response_ok(r, 42);
    assert_int_equal(r->raft.type, m->type);
    assert_int_equal(r->raft.from, 42);
    assert_int_equal(r->raft.to, -1);
    assert_int_equal(r->raft.error, m->error);
    assert_int_equal(r->error, m->error);
    assert_int_equal(r->raft.epoch, m->epoch);
    assert_int_equal(r->raft.leader_id, m->leader_id);
    /* envelope hints */
    assert_int_equal(r->leader_id, m->leader_id);
    assert_int_equal(r->leader_epoch, m->epoch);
    kq_buf_free(&b);
}

static void test_small_raft_responses(void **state)
{
    const kq_raft_msg_type types[] = {KQ_RAFT_VOTE_RESP, KQ_RAFT_BEGIN_EPOCH_RESP,
                                      KQ_RAFT_END_EPOCH_RESP};
    const uint32_t keys[] = {KQ_API_VOTE, KQ_API_BEGIN_QUORUM_EPOCH, KQ_API_END_QUORUM_EPOCH};
    kq_response r;

    for (size_t t = 0; t < 3; t++) {
        for (int v = 0; v < 3; v++) {
            kq_raft_msg m = blank_msg(types[t]);

            m.error = v == 2 ? KQ_ERR_FENCED_LEADER_EPOCH : 0;
            m.leader_id = v == 0 ? -1 : INT32_MAX;
            m.epoch = v == 0 ? 0 : INT32_MAX;
            m.u.vote_resp.granted = types[t] == KQ_RAFT_VOTE_RESP && v == 1;
            response_roundtrip(&m, NULL, 0, &r);
            assert_int_equal(r.api_key, keys[t]);
            if (types[t] == KQ_RAFT_VOTE_RESP)
                assert_int_equal(r.raft.u.vote_resp.granted, v == 1);
            kq_response_free(&r);
        }
    }
}

static void test_fetch_response(void **state)
{
    kq_raft_msg m = blank_msg(KQ_RAFT_FETCH_RESP);
    kq_response r;
    kq_buf p1, p2;
    kq_codec_batch batches[2];

    /* no batches, unknown HW, diverging */
    m.leader_id = 1;
    m.epoch = 3;
    m.u.fetch_resp.high_watermark = -1;
    m.u.fetch_resp.log_start_offset = 0;
    m.u.fetch_resp.diverging = true;
    m.u.fetch_resp.diverging_epoch = 2;
    m.u.fetch_resp.diverging_end_offset = INT64_MAX;
    response_roundtrip(&m, NULL, 0, &r);
    assert_true(r.raft.u.fetch_resp.high_watermark == -1);
    assert_true(r.raft.u.fetch_resp.diverging);
    assert_int_equal(r.raft.u.fetch_resp.diverging_epoch, 2);
    assert_true(r.raft.u.fetch_resp.diverging_end_offset == INT64_MAX);
    assert_int_equal(r.n_batches, 0);
    assert_int_equal(r.raft.u.fetch_resp.records_from, r.raft.u.fetch_resp.records_to);
    kq_response_free(&r);

    /* two contiguous batches, not diverging */
    tu_opaque_payload(&p1, 3, 10, 0xaa);
    tu_opaque_payload(&p2, 1, 0, 0);
    batches[0] = tu_batch(100, 2, 3, &p1);
    batches[1] = tu_batch(103, 3, 1, &p2);
    m.u.fetch_resp.diverging = false;
    m.u.fetch_resp.high_watermark = 104;
    m.u.fetch_resp.log_start_offset = 100;
    response_roundtrip(&m, batches, 2, &r);
    assert_false(r.raft.u.fetch_resp.diverging);
    assert_true(r.raft.u.fetch_resp.high_watermark == 104);
    assert_true(r.raft.u.fetch_resp.log_start_offset == 100);
    assert_int_equal(r.n_batches, 2);
    assert_int_equal(r.raft.u.fetch_resp.n_batches, 2);
    assert_ptr_equal(r.raft.u.fetch_resp.batches, r.batches);
    assert_true(r.raft.u.fetch_resp.records_from == 100);
    assert_true(r.raft.u.fetch_resp.records_to == 104);
    for (int i = 0; i < 2; i++) {
        assert_true(r.batches[i].base_offset == batches[i].base_offset);
        assert_int_equal(r.batches[i].epoch, batches[i].epoch);
        assert_int_equal(r.batches[i].count, batches[i].count);
        assert_int_equal(r.batches[i].crc32c, batches[i].crc32c);
        assert_int_equal(r.batches[i].kind, KQ_RAFT_BATCH_FETCHED);
        assert_int_equal(r.batches[i].len, batches[i].len);
        assert_memory_equal(r.batches[i].data, batches[i].records, batches[i].len);
    }
    kq_buf_free(&p1);
    kq_buf_free(&p2);
    /* the payload is owned by the decoded struct */
    assert_int_equal(r.batches[0].data[r.batches[0].len - 1], 0xaa);
    kq_response_free(&r);
    assert_null(r.batches);
    assert_null(r.raft.u.fetch_resp.batches);
    kq_response_free(&r);
}

static void test_fetch_response_max_batches(void **state)
{
    kq_raft_msg m = blank_msg(KQ_RAFT_FETCH_RESP);
    kq_codec_batch batches[KQ_RAFT_MAX_BATCHES + 1];
    kq_buf p, b = {0};
    kq_response r;

    tu_opaque_payload(&p, 2, 5, 1);
    for (int i = 0; i <= KQ_RAFT_MAX_BATCHES; i++)
        batches[i] = tu_batch(INT64_MAX - 2 * (KQ_RAFT_MAX_BATCHES + 1) + 2 * i, i, 2, &p);
    m.leader_id = 0;
    m.epoch = KQ_RAFT_MAX_BATCHES;
    m.u.fetch_resp.high_watermark = INT64_MAX;
    m.u.fetch_resp.log_start_offset = INT64_MAX;
    response_roundtrip(&m, batches, KQ_RAFT_MAX_BATCHES, &r);
    assert_int_equal(r.n_batches, KQ_RAFT_MAX_BATCHES);
    assert_true(r.raft.u.fetch_resp.records_to == INT64_MAX - 2);
    kq_response_free(&r);
    assert_int_equal(kq_codec_encode_raft_response(&m, batches, KQ_RAFT_MAX_BATCHES + 1, &b),
                     KQ_ERR_INVALID_REQUEST);
    assert_null(b.data);
    kq_buf_free(&p);
}

static void fill_description(kq_quorum_description *d)
{
    memset(d, 0, sizeof *d);
    strcpy(d->cluster_id, CID64);
    d->leader_id = 1;
    d->leader_epoch = INT32_MAX;
    d->high_watermark = INT64_MAX;
    d->n_voters = KQ_RAFT_MAX_VOTERS;
    for (int i = 0; i < d->n_voters; i++) {
        d->voters[i].id = i + 1;
        if (i % 2)
            strcpy(d->voters[i].directory_id, "AAAAAAAAAAAAAAAAAAAA-_");
        d->voters[i].log_end_offset = i == 0 ? INT64_MAX : -1;
        d->voters[i].last_fetch_timestamp = i == 0 ? -1 : INT64_MAX;
        d->voters[i].last_caught_up_timestamp = i;
    }
    d->n_observers = KQ_RAFT_MAX_OBSERVERS;
    for (int i = 0; i < d->n_observers; i++) {
        d->observers[i].id = 100 + i;
        strcpy(d->observers[i].directory_id, "zzzzzzzzzzzzzzzzzzzzzw");
        d->observers[i].log_end_offset = i;
        d->observers[i].last_fetch_timestamp = i;
        d->observers[i].last_caught_up_timestamp = -1;
    }
    d->n_nodes = KQ_RAFT_MAX_VOTERS;
    for (int i = 0; i < d->n_nodes; i++) {
        d->nodes[i].id = i + 1;
        memset(d->nodes[i].listener, 'L', sizeof d->nodes[i].listener - 1);
        if (i == 0)
            memset(d->nodes[i].host, 'h', sizeof d->nodes[i].host - 1);
        else
            snprintf(d->nodes[i].host, sizeof d->nodes[i].host, "10.0.0.%d", i);
        d->nodes[i].port = i == 0 ? 65535 : 0;
    }
}

static void test_describe_response(void **state)
{
    kq_quorum_description d;
    kq_buf b = {0};
    kq_response r;
    char err[256];

    fill_description(&d);
    assert_int_equal(kq_codec_encode_describe_response(&d, &b), 0);
    assert_int_equal(kq_codec_decode_response(b.data, b.len, -1, &r, err, sizeof err), 0);
    check_response_ok(&r, -1);
    assert_int_equal(r.api_key, KQ_API_DESCRIBE_QUORUM);
    assert_int_equal(r.error, 0);
    assert_memory_equal(&r.describe, &d, sizeof d);
    kq_response_free(&r);
    kq_buf_free(&b);

    /* empty arrays, empty cluster id, unknown leader */
    memset(&d, 0, sizeof d);
    d.leader_id = -1;
    d.high_watermark = -1;
    assert_int_equal(kq_codec_encode_describe_response(&d, &b), 0);
    assert_int_equal(kq_codec_decode_response(b.data, b.len, -1, &r, err, sizeof err), 0);
    assert_memory_equal(&r.describe, &d, sizeof d);
    kq_response_free(&r);
    kq_buf_free(&b);
}

static void test_write_response(void **state)
{
    kq_buf b = {0};
    kq_response r;
    char err[256];
    const int64_t offs[] = {0, INT64_MAX};

    for (int i = 0; i < 2; i++) {
        assert_int_equal(kq_codec_encode_write_response(offs[i], i ? INT32_MAX : 0, &b), 0);
        assert_int_equal(kq_codec_decode_response(b.data, b.len, 3, &r, err, sizeof err), 0);
        check_response_ok(&r, 3);
        assert_int_equal(r.api_key, KQ_API_WRITE);
        assert_true(r.write_base_offset == offs[i]);
        assert_int_equal(r.write_epoch, i ? INT32_MAX : 0);
        kq_response_free(&r);
        kq_buf_free(&b);
    }
}

static void test_error_responses(void **state)
{
    kq_buf b = {0};
    kq_response r;
    char err[256];
    char longmsg[400];
    char endpoint[KQ_CODEC_MAX_ENDPOINT];

    /* NOT_CONTROLLER with a full hint */
    memset(endpoint, 'e', sizeof endpoint - 1);
    endpoint[sizeof endpoint - 1] = '\0';
    assert_int_equal(kq_codec_encode_error_response(KQ_API_WRITE, KQ_ERR_NOT_CONTROLLER,
                                                    "not the active controller", 2, 7, endpoint,
                                                    &b),
                     0);
    assert_int_equal(kq_codec_decode_response(b.data, b.len, 1, &r, err, sizeof err), 0);
    check_response_ok(&r, 1);
    assert_int_equal(r.api_key, KQ_API_WRITE);
    assert_int_equal(r.error, KQ_ERR_NOT_CONTROLLER);
    assert_string_equal(r.error_message, "not the active controller");
    assert_int_equal(r.leader_id, 2);
    assert_int_equal(r.leader_epoch, 7);
    assert_string_equal(r.leader_endpoint, endpoint);
    kq_response_free(&r);
    kq_buf_free(&b);

    /* no hints, no message, for a raft API: the core gets a response of the right type */
    assert_int_equal(kq_codec_encode_error_response(KQ_API_FETCH, KQ_ERR_INCONSISTENT_CLUSTER_ID,
                                                    NULL, -1, -1, NULL, &b),
                     0);
    assert_int_equal(kq_codec_decode_response(b.data, b.len, 5, &r, err, sizeof err), 0);
    check_response_ok(&r, 5);
    assert_int_equal(r.raft.type, KQ_RAFT_FETCH_RESP);
    assert_int_equal(r.raft.error, KQ_ERR_INCONSISTENT_CLUSTER_ID);
    assert_int_equal(r.raft.from, 5);
    assert_int_equal(r.leader_id, -1);
    assert_int_equal(r.leader_epoch, -1);
    assert_string_equal(r.error_message, "");
    assert_string_equal(r.leader_endpoint, "");
    assert_int_equal(r.n_batches, 0);
    kq_response_free(&r);
    kq_buf_free(&b);

    /* long messages are cut to 255 bytes, never in the middle of a UTF-8 sequence */
    memset(longmsg, 'x', sizeof longmsg);
    longmsg[sizeof longmsg - 1] = '\0';
    longmsg[254] = (char)0xc3; /* a 2-byte sequence straddling the limit */
    longmsg[255] = (char)0xa9;
    assert_int_equal(kq_codec_encode_error_response(KQ_API_DESCRIBE_QUORUM, KQ_ERR_INVALID_REQUEST,
                                                    longmsg, -1, -1, "", &b),
                     0);
    assert_int_equal(kq_codec_decode_response(b.data, b.len, 5, &r, err, sizeof err), 0);
    assert_int_equal(strlen(r.error_message), 254);
    assert_memory_equal(r.error_message, longmsg, 254);
    kq_response_free(&r);
    kq_buf_free(&b);

    /* an endpoint that does not fit the decoder's buffer is refused */
    char toolong[KQ_CODEC_MAX_ENDPOINT + 1];
    memset(toolong, 'e', sizeof toolong - 1);
    toolong[sizeof toolong - 1] = '\0';
    assert_int_equal(
        kq_codec_encode_error_response(KQ_API_WRITE, KQ_ERR_NOT_CONTROLLER, "", 1, 1, toolong, &b),
        KQ_ERR_INVALID_REQUEST);
    assert_null(b.data);
}

static void test_encoder_refusals(void **state)
{
    kq_raft_msg m = blank_msg(KQ_RAFT_VOTE_RESP);
    kq_buf b = {0};
    kq_quorum_description d;
    static const uint8_t x = 1;
    const uint8_t *recs[1] = {&x};
    size_t lens[1] = {1};
    kq_codec_batch batch = {0, 0, 1, 0, &x, 1};

    /* response type through the request encoder and vice versa */
    assert_int_equal(kq_codec_encode_raft_request(&m, "c", &b), KQ_ERR_INVALID_REQUEST);
    m.type = KQ_RAFT_VOTE_REQ;
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), KQ_ERR_INVALID_REQUEST);
    m.type = 0;
    assert_int_equal(kq_codec_encode_raft_request(&m, "c", &b), KQ_ERR_INVALID_REQUEST);
    /* cluster id too long */
    m.type = KQ_RAFT_VOTE_REQ;
    m.epoch = 1;
    assert_int_equal(kq_codec_encode_raft_request(&m, CID65, &b), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_codec_encode_describe_request(CID65, &b), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_codec_encode_write_request(CID65, recs, lens, 1, &b),
                     KQ_ERR_INVALID_REQUEST);
    /* too many preferred successors */
    m.type = KQ_RAFT_END_EPOCH_REQ;
    m.u.end_req.n_preferred = KQ_RAFT_MAX_VOTERS + 1;
    assert_int_equal(kq_codec_encode_raft_request(&m, "c", &b), KQ_ERR_INVALID_REQUEST);
    m.u.end_req.n_preferred = -1;
    assert_int_equal(kq_codec_encode_raft_request(&m, "c", &b), KQ_ERR_INVALID_REQUEST);
    /* batches on a non-fetch response */
    m.type = KQ_RAFT_VOTE_RESP;
    assert_int_equal(kq_codec_encode_raft_response(&m, &batch, 1, &b), KQ_ERR_INVALID_REQUEST);
    /* write request: none, too many, NULL record with a length */
    assert_int_equal(kq_codec_encode_write_request("c", recs, lens, 0, &b), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(
        kq_codec_encode_write_request("c", recs, lens, KQ_CODEC_MAX_WRITE_RECORDS + 1, &b),
        KQ_ERR_INVALID_REQUEST);
    recs[0] = NULL;
    assert_int_equal(kq_codec_encode_write_request("c", recs, lens, 1, &b), KQ_ERR_INVALID_REQUEST);
    /* description arrays out of range, unterminated strings */
    fill_description(&d);
    d.n_voters = KQ_RAFT_MAX_VOTERS + 1;
    assert_int_equal(kq_codec_encode_describe_response(&d, &b), KQ_ERR_INVALID_REQUEST);
    fill_description(&d);
    d.n_observers = -1;
    assert_int_equal(kq_codec_encode_describe_response(&d, &b), KQ_ERR_INVALID_REQUEST);
    fill_description(&d);
    memset(d.voters[0].directory_id, 'A', sizeof d.voters[0].directory_id);
    assert_int_equal(kq_codec_encode_describe_response(&d, &b), KQ_ERR_INVALID_REQUEST);
    fill_description(&d);
    memset(d.cluster_id, 'c', sizeof d.cluster_id);
    assert_int_equal(kq_codec_encode_describe_response(&d, &b), KQ_ERR_INVALID_REQUEST);
    assert_null(b.data);
    /* NULL arguments */
    assert_int_equal(kq_codec_encode_raft_request(NULL, "c", &b), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_codec_encode_describe_response(NULL, &b), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_codec_encode_write_response(0, 0, NULL), KQ_ERR_INVALID_REQUEST);
    kq_buf_free(NULL);
    kq_buf_free(&b);
}

/* KIP-853: directory ids ride on Vote, BeginQuorumEpoch, Fetch and FetchSnapshot (absent when
 * all zero), and the three voter changes carry a voter; an error's reason comes back. */
static void test_directory_ids(void **state)
{
    const kq_raft_msg_type types[] = {KQ_RAFT_VOTE_REQ, KQ_RAFT_BEGIN_EPOCH_REQ, KQ_RAFT_FETCH_REQ,
                                      KQ_RAFT_FETCH_SNAPSHOT_REQ};
    kq_request r;

    (void)state;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        for (int known = 0; known <= 1; known++) {
            kq_raft_msg m = blank_msg(types[t]);

            m.epoch = 3;
            m.u.vote_req.last_epoch = 2;
            m.u.fetch_snapshot_req.snapshot_id.end_offset = 0;
            memset(m.from_dir, known ? 0xa1 : 0, sizeof m.from_dir);
            memset(m.to_dir, known ? 0xb2 : 0, sizeof m.to_dir);
            if (types[t] == KQ_RAFT_VOTE_REQ)
                m.u.vote_req.candidate_id = m.from;
            request_roundtrip(&m, "c", &r);
            assert_memory_equal(r.raft.from_dir, m.from_dir, 16);
            /* only Vote and BeginQuorumEpoch name the receiver's directory */
            if (types[t] == KQ_RAFT_VOTE_REQ || types[t] == KQ_RAFT_BEGIN_EPOCH_REQ)
                assert_memory_equal(r.raft.to_dir, m.to_dir, 16);
            else
                assert_true(kq_uuid_is_zero(r.raft.to_dir));
            kq_request_free(&r);
        }
    }
}

/* A BeginQuorumEpoch names where the leader is reached (KIP-853), when the sender gives it. */
static void test_begin_carries_the_leader_endpoint(void **state)
{
    kq_raft_msg m = blank_msg(KQ_RAFT_BEGIN_EPOCH_REQ);
    kq_codec_endpoint ep = {.port = 9093};
    kq_request r;
    kq_buf b = {0};
    char err[256];

    (void)state;
    m.epoch = 4;
    snprintf(ep.host, sizeof ep.host, "c4.example");
    assert_int_equal(kq_codec_encode_raft_request_from(&m, "c", &ep, &b), 0);
    assert_int_equal(kq_codec_decode_request(b.data, b.len, &r, err, sizeof err), 0);
    assert_string_equal(r.leader_endpoint.host, "c4.example");
    assert_int_equal(r.leader_endpoint.port, 9093);
    assert_int_equal(r.raft.epoch, 4);
    kq_request_free(&r);
    kq_buf_free(&b);
    /* without one: empty */
    request_roundtrip(&m, "c", &r);
    assert_string_equal(r.leader_endpoint.host, "");
    assert_int_equal(r.leader_endpoint.port, 0);
    kq_request_free(&r);
    /* a port out of range is refused by the encoder */
    ep.port = 70000;
    assert_int_equal(kq_codec_encode_raft_request_from(&m, "c", &ep, &b), KQ_ERR_INVALID_REQUEST);
}

static void test_voter_changes(void **state)
{
    const kq_raft_msg_type types[] = {KQ_RAFT_ADD_VOTER_REQ, KQ_RAFT_REMOVE_VOTER_REQ,
                                      KQ_RAFT_UPDATE_VOTER_REQ};
    const uint32_t keys[] = {KQ_API_ADD_RAFT_VOTER, KQ_API_REMOVE_RAFT_VOTER,
                             KQ_API_UPDATE_RAFT_VOTER};
    kq_voter v = {.key = {.id = 3004}, .port = 9093, .kraft_min = 0, .kraft_max = 1};
    kq_request r;
    kq_response a;
    kq_buf b = {0};

    (void)state;
    memset(v.key.dir, 0x5c, sizeof v.key.dir);
    memset(v.host, 'h', sizeof v.host - 1); /* the longest host */
    for (size_t t = 0; t < 3; t++) {
        kq_raft_msg m = blank_msg(types[t]);

        m.from = types[t] == KQ_RAFT_UPDATE_VOTER_REQ ? 3004 : -1; /* a voter, or the tool */
        m.epoch = types[t] == KQ_RAFT_UPDATE_VOTER_REQ ? 9 : 0;
        m.u.voter_req.voter = &v;
        request_roundtrip(&m, "c", &r);
        assert_int_equal(r.api_key, keys[t]);
        assert_ptr_equal(r.raft.u.voter_req.voter, &r.voter_req.voter);
        assert_int_equal(r.voter_req.voter.key.id, 3004);
        assert_memory_equal(r.voter_req.voter.key.dir, v.key.dir, 16);
        if (types[t] == KQ_RAFT_REMOVE_VOTER_REQ) { /* the key only */
            assert_string_equal(r.voter_req.voter.host, "");
            assert_int_equal(r.voter_req.voter.port, 0);
        } else {
            assert_string_equal(r.voter_req.voter.host, v.host);
            assert_int_equal(r.voter_req.voter.port, 9093);
            assert_int_equal(r.voter_req.voter.kraft_max, 1);
        }
        kq_request_free(&r);

        /* the answer, with and without an error and its reason */
        for (int e = 0; e <= 1; e++) {
            kq_raft_msg ans = blank_msg((kq_raft_msg_type)(types[t] + 1));

            ans.epoch = 9;
            ans.leader_id = 3001;
            ans.error = e ? KQ_ERR_DUPLICATE_VOTER : 0;
            snprintf(ans.u.voter_resp.error_message, sizeof ans.u.voter_resp.error_message, "%s",
                     e ? "node 3004 is a voter already" : "");
            response_roundtrip(&ans, NULL, 0, &a);
            assert_int_equal(a.api_key, keys[t]);
            assert_string_equal(a.raft.u.voter_resp.error_message,
                                e ? "node 3004 is a voter already" : "");
            kq_response_free(&a);
        }
    }
    /* refusals: no voter to encode; a port 0 or a zero directory id the decoder refuses,
     * naming the field */
    kq_raft_msg m = blank_msg(KQ_RAFT_ADD_VOTER_REQ);
    assert_int_equal(kq_codec_encode_raft_request(&m, "c", &b), KQ_ERR_INVALID_REQUEST);
    m.u.voter_req.voter = &v;
    for (int bad = 0; bad < 2; bad++) {
        char err[256] = "";

        v.port = bad == 0 ? 0 : 9093;
        memset(v.key.dir, bad == 1 ? 0 : 0x5c, sizeof v.key.dir);
        assert_int_equal(kq_codec_encode_raft_request(&m, "c", &b), 0);
        assert_int_equal(kq_codec_decode_request(b.data, b.len, &r, err, sizeof err),
                         KQ_ERR_INVALID_REQUEST);
        assert_non_null(strstr(err, bad == 0 ? "port" : "voter_directory_id"));
        kq_buf_free(&b);
    }
    /* an UpdateRaftVoter names the leader epoch it was sent in */
    memset(v.key.dir, 0x5c, sizeof v.key.dir);
    m = blank_msg(KQ_RAFT_UPDATE_VOTER_REQ);
    m.u.voter_req.voter = &v;
    m.epoch = -1;
    assert_int_equal(kq_codec_encode_raft_request(&m, "c", &b), KQ_ERR_INVALID_REQUEST);
    assert_null(b.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vote_request),
        cmocka_unit_test(test_begin_end_requests),
        cmocka_unit_test(test_fetch_request),
        cmocka_unit_test(test_describe_and_write_requests),
        cmocka_unit_test(test_write_request_max_records),
        cmocka_unit_test(test_small_raft_responses),
        cmocka_unit_test(test_fetch_response),
        cmocka_unit_test(test_fetch_response_max_batches),
        cmocka_unit_test(test_describe_response),
        cmocka_unit_test(test_write_response),
        cmocka_unit_test(test_error_responses),
        cmocka_unit_test(test_encoder_refusals),
        cmocka_unit_test(test_directory_ids),
        cmocka_unit_test(test_voter_changes),
        cmocka_unit_test(test_begin_carries_the_leader_endpoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
