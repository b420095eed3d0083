/*
 * Records inside a batch payload: kq_codec_append_* (the Raft host's control records), read
 * back and rendered by the record codec as kq log-dump prints them, and kq_record_describe_raw
 * (what kq log-dump prints for a record that does not decode).
 */
#include <stdio.h>

#include "codec_testutil.h"
#include "kq_record.pb-c.h"

#include "kq/records.h"

#define MAX_SEEN 16

/* The records of payload, each decoded (kq_record_decode_next) and rendered as kq log-dump
 * prints it; the number read, or -1 when one does not decode. */
static int render_all(const uint8_t *payload, size_t len, char desc[][600])
{
    size_t pos = 0;
    int n = 0;
    char err[256];

    while (pos < len) {
        kq_record r;

        assert_true(n < MAX_SEEN);
        if (kq_record_decode_next(payload, len, &pos, &r, err, sizeof err))
            return -1;
        kq_record_render(&r, desc[n++], 600);
        kq_record_free(&r);
    }
    return n;
}

static void test_appended_records_render(void **state)
{
    kq_buf b = {0};
    char desc[MAX_SEEN][600];
    const int32_t voters[] = {1, 2, 3};
    const int32_t granting[] = {1, 2};
    uint8_t data[100];

    memset(data, 7, sizeof data);
    assert_int_equal(kq_codec_append_leader_change(&b, 1, voters, 3, granting, 2), 0);
    assert_int_equal(kq_codec_append_noop(&b), 0);
    assert_int_equal(kq_codec_append_opaque(&b, data, sizeof data), 0);
    assert_int_equal(kq_codec_append_opaque(&b, NULL, 0), 0);
    assert_int_equal(kq_codec_append_leader_change(&b, -1, NULL, 0, NULL, 0), 0);

    assert_int_equal(render_all(b.data, b.len, desc), 5);
    assert_string_equal(desc[0], "LeaderChange leader=1 voters=1,2,3 granting=1,2");
    assert_string_equal(desc[1], "NoOp");
    assert_string_equal(desc[2], "Opaque bytes=100");
    assert_string_equal(desc[3], "Opaque bytes=0");
    assert_string_equal(desc[4], "LeaderChange leader=-1 voters= granting=");
    kq_buf_free(&b);
}

/* What kq log-dump prints for a record it cannot decode. */
static void test_describe_raw(void **state)
{
    /* an empty Record (a body this version does not know) and one with an unknown field
     * (number 1000, varint 1) */
    static const uint8_t unknown_field[] = {0xc0, 0x3e, 0x01};
    static const uint8_t not_a_record[] = {0xff, 0xff, 0xff};
    char desc[64];
    kq_buf b = {0};

    assert_int_equal(kq_record_describe_raw(NULL, 0, desc, sizeof desc), 0);
    assert_string_equal(desc, "Unknown bytes=0");
    assert_int_equal(kq_record_describe_raw(unknown_field, 3, desc, sizeof desc), 0);
    assert_string_equal(desc, "Unknown bytes=3");
    assert_int_equal(kq_record_describe_raw(not_a_record, 3, desc, sizeof desc), KQ_ERR_MALFORMED);
    assert_int_equal(kq_record_describe_raw(NULL, 5, desc, sizeof desc), KQ_ERR_MALFORMED);
    assert_int_equal(kq_record_describe_raw(unknown_field, 3, NULL, 0), KQ_ERR_MALFORMED);
    /* a known body is named from the schema (the one-byte length prefix skipped) */
    assert_int_equal(kq_codec_append_noop(&b), 0);
    assert_int_equal(kq_record_describe_raw(b.data + 1, b.len - 1, desc, sizeof desc), 0);
    assert_string_equal(desc, "NoOp bytes=2");
    /* a short buffer is cut, still NUL-terminated */
    assert_int_equal(kq_record_describe_raw(b.data + 1, b.len - 1, desc, 4), 0);
    assert_string_equal(desc, "NoO");
    kq_buf_free(&b);
}

/* The metadata records' bodies are named from the schema too. */
static void test_describe_names_other_records(void **state)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(&kq__record__descriptor, "topic");
    uint8_t payload[64];
    size_t n = 0;
    char desc[64];

    assert_non_null(f);
    /* Record{topic: TopicRecord{name: "t", topic_id: 16 bytes}} */
    payload[n++] = (uint8_t)(f->id << 3 | 2);
    payload[n++] = 21;
    payload[n++] = 0x0a;
    payload[n++] = 1;
    payload[n++] = 't';
    payload[n++] = 0x12;
    payload[n++] = 16;
    memset(payload + n, 0xab, 16);
    n += 16;
    assert_int_equal(kq_record_describe_raw(payload, n, desc, sizeof desc), 0);
    assert_string_equal(desc, "Topic bytes=23");
}

static void test_truncated_payloads_refused(void **state)
{
    kq_buf b = {0};
    char desc[MAX_SEEN][600];
    uint8_t data[300];

    memset(data, 1, sizeof data);
    assert_int_equal(kq_codec_append_opaque(&b, data, sizeof data), 0);
    /* every truncation of a valid one-record payload fails cleanly */
    for (size_t len = 1; len < b.len; len++)
        assert_int_equal(render_all(b.data, len, desc), -1);
    assert_int_equal(render_all(b.data, b.len, desc), 1);
    kq_buf_free(&b);
}

static void test_long_leader_change_is_cut(void **state)
{
    kq_buf b = {0};
    char desc[MAX_SEEN][600];
    int32_t voters[KQ_REC_MAX_REPLICAS];

    for (int i = 0; i < KQ_REC_MAX_REPLICAS; i++)
        voters[i] = 1000000000 + i;
    assert_int_equal(kq_codec_append_leader_change(&b, 7, voters, KQ_REC_MAX_REPLICAS, voters,
                                                   KQ_REC_MAX_REPLICAS),
                     0);
    assert_int_equal(render_all(b.data, b.len, desc), 1);
    assert_true(strncmp(desc[0], "LeaderChange leader=7 voters=1000000000,1000000001,", 51) == 0);
    assert_true(strlen(desc[0]) <= 599);
    assert_string_equal(desc[0] + strlen(desc[0]) - 3, "...");
    kq_buf_free(&b);
}

static void test_append_refusals(void **state)
{
    kq_buf b = {0};
    const int32_t v[] = {1};

    assert_int_equal(kq_codec_append_leader_change(&b, 1, NULL, 1, v, 1), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_codec_append_leader_change(&b, 1, v, 1, NULL, 1), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_codec_append_leader_change(&b, 1, v, -1, v, 1), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_codec_append_opaque(&b, NULL, 3), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_codec_append_noop(NULL), KQ_ERR_INVALID_REQUEST);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
}

/* Payloads built with the append functions are what a Fetch response carries. */
static void test_payload_through_fetch_response(void **state)
{
    kq_buf payload = {0}, wire = {0};
    kq_raft_msg m;
    kq_codec_batch batch;
    kq_response r;
    char err[256], desc[MAX_SEEN][600];
    const int32_t voters[] = {1, 2, 3};

    assert_int_equal(kq_codec_append_leader_change(&payload, 2, voters, 3, voters + 1, 2), 0);
    batch = tu_batch(0, 1, 1, &payload);
    memset(&m, 0, sizeof m);
    m.type = KQ_RAFT_FETCH_RESP;
    m.epoch = 1;
    m.leader_id = 2;
    m.u.fetch_resp.high_watermark = 1;
    assert_int_equal(kq_codec_encode_raft_response(&m, &batch, 1, &wire), 0);
    assert_int_equal(kq_codec_decode_response(wire.data, wire.len, 2, &r, err, sizeof err), 0);
    assert_int_equal(render_all(r.batches[0].data, r.batches[0].len, desc), 1);
    assert_string_equal(desc[0], "LeaderChange leader=2 voters=1,2,3 granting=2,3");
    kq_response_free(&r);
    kq_buf_free(&wire);
    kq_buf_free(&payload);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_appended_records_render),
        cmocka_unit_test(test_describe_raw),
        cmocka_unit_test(test_describe_names_other_records),
        cmocka_unit_test(test_truncated_payloads_refused),
        cmocka_unit_test(test_long_leader_change_is_cut),
        cmocka_unit_test(test_append_refusals),
        cmocka_unit_test(test_payload_through_fetch_response),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
