/*
 * FetchSnapshot on the wire (proto/kq_rpc.proto fields 40, kq_codec): round trips of the
 * request, the chunk response, error responses and Fetch responses naming a snapshot, and the
 * validation of sizes, positions and the 8 MiB chunk limit on both encode and decode.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kq/codec.h"
#include "kq/error.h"

static kq_raft_msg snap_req(void)
{
    kq_raft_msg m;
    memset(&m, 0, sizeof m);
    m.type = KQ_RAFT_FETCH_SNAPSHOT_REQ;
    m.from = 2;
    m.to = 1;
    m.epoch = 7;
    m.leader_id = -1;
    m.u.fetch_snapshot_req.snapshot_id.end_offset = 1234;
    m.u.fetch_snapshot_req.snapshot_id.epoch = 6;
    m.u.fetch_snapshot_req.position = 4096;
    m.u.fetch_snapshot_req.max_bytes = 1 << 20;
    return m;
}

static kq_raft_msg snap_resp(const uint8_t *data, size_t len)
{
    kq_raft_msg m;
    memset(&m, 0, sizeof m);
    m.type = KQ_RAFT_FETCH_SNAPSHOT_RESP;
    m.from = 1;
    m.to = 2;
    m.epoch = 7;
    m.leader_id = 1;
    m.u.fetch_snapshot_resp.snapshot_id.end_offset = 1234;
    m.u.fetch_snapshot_resp.snapshot_id.epoch = 6;
    m.u.fetch_snapshot_resp.size = 10000;
    m.u.fetch_snapshot_resp.position = 4096;
    m.u.fetch_snapshot_resp.data = data;
    m.u.fetch_snapshot_resp.len = len;
    return m;
}

static void test_request_round_trip(void **state)
{
    (void)state;
    kq_raft_msg m = snap_req();
    kq_buf b = {0};
    kq_request r;
    char err[256] = "";
    assert_int_equal(kq_codec_encode_raft_request(&m, "cluster-a", &b), 0);
    assert_int_equal(kq_codec_decode_request(b.data, b.len, &r, err, sizeof err), 0);
    assert_int_equal(r.api_key, KQ_API_FETCH_SNAPSHOT);
    assert_int_equal(r.raft.type, KQ_RAFT_FETCH_SNAPSHOT_REQ);
    assert_int_equal(r.raft.from, 2);
    assert_int_equal(r.raft.epoch, 7);
    assert_int_equal(r.raft.u.fetch_snapshot_req.snapshot_id.end_offset, 1234);
    assert_int_equal(r.raft.u.fetch_snapshot_req.snapshot_id.epoch, 6);
    assert_int_equal(r.raft.u.fetch_snapshot_req.position, 4096);
    assert_int_equal(r.raft.u.fetch_snapshot_req.max_bytes, 1 << 20);
    assert_string_equal(r.cluster_id, "cluster-a");
    kq_request_free(&r);
    kq_buf_free(&b);
}

static void test_request_encode_rejects_bad_values(void **state)
{
    (void)state;
    kq_buf b = {0};
    kq_raft_msg m = snap_req();
    m.u.fetch_snapshot_req.position = -1;
    assert_int_equal(kq_codec_encode_raft_request(&m, "c", &b), KQ_ERR_INVALID_REQUEST);
    assert_null(b.data);
    m = snap_req();
    m.u.fetch_snapshot_req.max_bytes = -5;
    assert_int_equal(kq_codec_encode_raft_request(&m, "c", &b), KQ_ERR_INVALID_REQUEST);
    m = snap_req();
    m.u.fetch_snapshot_req.snapshot_id.epoch = -1;
    assert_int_equal(kq_codec_encode_raft_request(&m, "c", &b), KQ_ERR_INVALID_REQUEST);
}

/* A request whose replica id is not its sender is refused by the decoder. */
static void test_request_decode_checks_sender(void **state)
{
    (void)state;
    kq_raft_msg m = snap_req();
    kq_buf b = {0};
    kq_request r;
    char err[256] = "";
    assert_int_equal(kq_codec_encode_raft_request(&m, "c", &b), 0);
    /* flip sender_id (field 4 of the envelope, a varint 2) to 3 */
    int patched = 0;
    for (size_t i = 0; i + 1 < b.len; i++) {
        if (b.data[i] == 0x20 && b.data[i + 1] == 0x02) { /* tag 4 varint, value 2 */
            b.data[i + 1] = 0x03;
            patched = 1;
            break;
        }
    }
    assert_true(patched);
    assert_int_equal(kq_codec_decode_request(b.data, b.len, &r, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "fetch_snapshot replica_id 2 does not match sender_id 3"));
    kq_buf_free(&b);
}

static void test_response_round_trip(void **state)
{
    (void)state;
    uint8_t chunk[300];
    for (size_t i = 0; i < sizeof chunk; i++)
        chunk[i] = (uint8_t)(i * 7);
    kq_raft_msg m = snap_resp(chunk, sizeof chunk);
    kq_buf b = {0};
    kq_response r;
    char err[256] = "";
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), 0);
    assert_int_equal(kq_codec_decode_response(b.data, b.len, 1, &r, err, sizeof err), 0);
    assert_int_equal(r.api_key, KQ_API_FETCH_SNAPSHOT);
    assert_int_equal(r.raft.type, KQ_RAFT_FETCH_SNAPSHOT_RESP);
    assert_int_equal(r.raft.from, 1);
    assert_int_equal(r.raft.epoch, 7);
    assert_int_equal(r.raft.leader_id, 1);
    assert_int_equal(r.raft.error, 0);
    assert_int_equal(r.raft.u.fetch_snapshot_resp.snapshot_id.end_offset, 1234);
    assert_int_equal(r.raft.u.fetch_snapshot_resp.snapshot_id.epoch, 6);
    assert_int_equal(r.raft.u.fetch_snapshot_resp.size, 10000);
    assert_int_equal(r.raft.u.fetch_snapshot_resp.position, 4096);
    assert_int_equal(r.raft.u.fetch_snapshot_resp.len, sizeof chunk);
    assert_memory_equal(r.raft.u.fetch_snapshot_resp.data, chunk, sizeof chunk);
    kq_response_free(&r);
    kq_buf_free(&b);
}

static void test_error_response_round_trip(void **state)
{
    (void)state;
    int codes[] = {KQ_ERR_SNAPSHOT_NOT_FOUND, KQ_ERR_POSITION_OUT_OF_RANGE,
                   KQ_ERR_FENCED_LEADER_EPOCH, KQ_ERR_NOT_LEADER_OR_FOLLOWER};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        kq_raft_msg m = snap_resp(NULL, 0);
        m.error = codes[i];
        m.u.fetch_snapshot_resp.size = -1;
        kq_buf b = {0};
        kq_response r;
        char err[256] = "";
        assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), 0);
        assert_int_equal(kq_codec_decode_response(b.data, b.len, 1, &r, err, sizeof err), 0);
        assert_int_equal(r.raft.type, KQ_RAFT_FETCH_SNAPSHOT_RESP);
        assert_int_equal(r.raft.error, codes[i]);
        assert_int_equal(r.error, codes[i]);
        assert_int_equal(r.raft.u.fetch_snapshot_resp.len, 0);
        kq_response_free(&r);
        kq_buf_free(&b);
    }
    /* an error reply built by kq_codec_encode_error_response (no body) decodes too */
    kq_buf b = {0};
    kq_response r;
    char err[256] = "";
    assert_int_equal(kq_codec_encode_error_response(
                         KQ_API_FETCH_SNAPSHOT, KQ_ERR_SNAPSHOT_NOT_FOUND, "gone", 1, 7, NULL, &b),
                     0);
    assert_int_equal(kq_codec_decode_response(b.data, b.len, 1, &r, err, sizeof err), 0);
    assert_int_equal(r.raft.type, KQ_RAFT_FETCH_SNAPSHOT_RESP);
    assert_int_equal(r.raft.error, KQ_ERR_SNAPSHOT_NOT_FOUND);
    kq_response_free(&r);
    kq_buf_free(&b);
}

static void test_response_encode_rejects_bad_chunks(void **state)
{
    (void)state;
    static uint8_t big[KQ_CODEC_MAX_SNAPSHOT_CHUNK + 1];
    kq_buf b = {0};
    kq_raft_msg m = snap_resp(big, sizeof big); /* one byte over 8 MiB */
    m.u.fetch_snapshot_resp.size = (int64_t)sizeof big + 10;
    m.u.fetch_snapshot_resp.position = 0;
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), KQ_ERR_INVALID_REQUEST);
    assert_null(b.data);
    m = snap_resp(big, 100);
    m.u.fetch_snapshot_resp.position = 9950; /* 9950 + 100 > size 10000 */
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), KQ_ERR_INVALID_REQUEST);
    m = snap_resp(big, 10);
    m.u.fetch_snapshot_resp.position = -1;
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), KQ_ERR_INVALID_REQUEST);
    m = snap_resp(NULL, 10); /* no bytes behind a length */
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), KQ_ERR_INVALID_REQUEST);
    m = snap_resp(big, 10);
    m.u.fetch_snapshot_resp.size = 0;
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), KQ_ERR_INVALID_REQUEST);
    /* exactly 8 MiB is fine */
    m = snap_resp(big, KQ_CODEC_MAX_SNAPSHOT_CHUNK);
    m.u.fetch_snapshot_resp.size = KQ_CODEC_MAX_SNAPSHOT_CHUNK;
    m.u.fetch_snapshot_resp.position = 0;
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), 0);
    kq_response r;
    char err[256] = "";
    assert_int_equal(kq_codec_decode_response(b.data, b.len, 1, &r, err, sizeof err), 0);
    assert_int_equal(r.raft.u.fetch_snapshot_resp.len, KQ_CODEC_MAX_SNAPSHOT_CHUNK);
    kq_response_free(&r);
    kq_buf_free(&b);
}

/* A hostile leader's response whose chunk overruns its size: patch the encoded size. */
static void test_response_decode_rejects_overrun(void **state)
{
    (void)state;
    uint8_t chunk[16] = {1, 2, 3};
    kq_raft_msg m = snap_resp(chunk, sizeof chunk);
    m.u.fetch_snapshot_resp.size = 0x7f;     /* encodes as one varint byte 0x7f */
    m.u.fetch_snapshot_resp.position = 0x6f; /* 111 + 16 = 127: valid at encode time */
    kq_buf b = {0};
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), 0);
    int patched = 0;
    for (size_t i = 0; i + 1 < b.len; i++) {
        if (b.data[i] == 0x20 && b.data[i + 1] == 0x7f) { /* size: tag 4 varint 127 */
            b.data[i + 1] = 0x70;                         /* 112 < 111 + 16 */
            patched = 1;
            break;
        }
    }
    assert_true(patched);
    kq_response r;
    char err[256] = "";
    assert_int_equal(kq_codec_decode_response(b.data, b.len, 1, &r, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "runs past size"));
    assert_null(r.priv_);
    kq_buf_free(&b);
}

static void test_fetch_response_with_snapshot_id(void **state)
{
    (void)state;
    kq_raft_msg m;
    memset(&m, 0, sizeof m);
    m.type = KQ_RAFT_FETCH_RESP;
    m.from = 1;
    m.to = 3;
    m.epoch = 4;
    m.leader_id = 1;
    m.u.fetch_resp.high_watermark = 900;
    m.u.fetch_resp.log_start_offset = 800;
    m.u.fetch_resp.snapshot = true;
    m.u.fetch_resp.snapshot_id.end_offset = 800;
    m.u.fetch_resp.snapshot_id.epoch = 3;
    kq_buf b = {0};
    kq_response r;
    char err[256] = "";
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), 0);
    assert_int_equal(kq_codec_decode_response(b.data, b.len, 1, &r, err, sizeof err), 0);
    assert_int_equal(r.raft.type, KQ_RAFT_FETCH_RESP);
    assert_true(r.raft.u.fetch_resp.snapshot);
    assert_false(r.raft.u.fetch_resp.diverging);
    assert_int_equal(r.raft.u.fetch_resp.snapshot_id.end_offset, 800);
    assert_int_equal(r.raft.u.fetch_resp.snapshot_id.epoch, 3);
    assert_int_equal(r.raft.u.fetch_resp.log_start_offset, 800);
    assert_int_equal(r.n_batches, 0);
    kq_response_free(&r);
    kq_buf_free(&b);

    /* a snapshot answer never carries records or a divergence */
    m.u.fetch_resp.diverging = true;
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), KQ_ERR_INVALID_REQUEST);
    m.u.fetch_resp.diverging = false;
    kq_codec_batch batch = {800, 3, 1, 0, (const uint8_t *)"x", 1};
    assert_int_equal(kq_codec_encode_raft_response(&m, &batch, 1, &b), KQ_ERR_INVALID_REQUEST);
    /* a plain Fetch response still says snapshot = false */
    m.u.fetch_resp.snapshot = false;
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), 0);
    assert_int_equal(kq_codec_decode_response(b.data, b.len, 1, &r, err, sizeof err), 0);
    assert_false(r.raft.u.fetch_resp.snapshot);
    kq_response_free(&r);
    kq_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_round_trip),
        cmocka_unit_test(test_request_encode_rejects_bad_values),
        cmocka_unit_test(test_request_decode_checks_sender),
        cmocka_unit_test(test_response_round_trip),
        cmocka_unit_test(test_error_response_round_trip),
        cmocka_unit_test(test_response_encode_rejects_bad_chunks),
        cmocka_unit_test(test_response_decode_rejects_overrun),
        cmocka_unit_test(test_fetch_response_with_snapshot_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
