/*
 * Records inside a batch payload: kq_codec_append_* and kq_codec_walk_records (whose
 * descriptions `kq log-dump` prints for records it cannot decode).
 */
#include <stdio.h>

#include "codec_testutil.h"
#include "kq_record.pb-c.h"

#define MAX_SEEN 16

typedef struct seen {
    int n;
    int stop_at; /* return 77 from the callback for this record index, -1 never */
    int64_t offsets[MAX_SEEN];
    kq_record_type types[MAX_SEEN];
    char desc[MAX_SEEN][600];
} seen;

static int collect(void *arg, int64_t offset, kq_record_type type, const char *description)
{
    seen *s = arg;

    assert_true(s->n < MAX_SEEN);
    s->offsets[s->n] = offset;
    s->types[s->n] = type;
    assert_true(strlen(description) < sizeof s->desc[0]);
    strcpy(s->desc[s->n], description);
    if (s->n++ == s->stop_at)
        return 77;
    return 0;
}

static void test_walk_mixed_batch(void **state)
{
    kq_buf b = {0};
    seen s = {.stop_at = -1};
    const int32_t voters[] = {1, 2, 3};
    const int32_t granting[] = {1, 2};
    uint8_t data[100];

    memset(data, 7, sizeof data);
    assert_int_equal(kq_codec_append_leader_change(&b, 1, voters, 3, granting, 2), 0);
    assert_int_equal(kq_codec_append_noop(&b), 0);
    assert_int_equal(kq_codec_append_opaque(&b, data, sizeof data), 0);
    assert_int_equal(kq_codec_append_opaque(&b, NULL, 0), 0);
    assert_int_equal(kq_codec_append_leader_change(&b, -1, NULL, 0, NULL, 0), 0);

    assert_int_equal(kq_codec_walk_records(b.data, b.len, 1000, 5, collect, &s), 0);
    assert_int_equal(s.n, 5);
    for (int i = 0; i < 5; i++)
        assert_true(s.offsets[i] == 1000 + i);
    assert_int_equal(s.types[0], KQ_RECORD_LEADER_CHANGE);
    assert_string_equal(s.desc[0], "LeaderChange leader=1 voters=1,2,3 granting=1,2");
    assert_int_equal(s.types[1], KQ_RECORD_NOOP);
    assert_string_equal(s.desc[1], "NoOp");
    assert_int_equal(s.types[2], KQ_RECORD_OPAQUE);
    assert_string_equal(s.desc[2], "Opaque bytes=100");
    assert_string_equal(s.desc[3], "Opaque bytes=0");
    assert_string_equal(s.desc[4], "LeaderChange leader=-1 voters= granting=");
    kq_buf_free(&b);
}

static void test_walk_count_mismatch(void **state)
{
    kq_buf b = {0};
    seen s = {.stop_at = -1};

    assert_int_equal(kq_codec_append_noop(&b), 0);
    assert_int_equal(kq_codec_append_noop(&b), 0);
    /* claims fewer records than the payload holds */
    assert_int_equal(kq_codec_walk_records(b.data, b.len, 0, 1, collect, &s), KQ_ERR_MALFORMED);
    /* claims more */
    s.n = 0;
    assert_int_equal(kq_codec_walk_records(b.data, b.len, 0, 3, collect, &s), KQ_ERR_MALFORMED);
    assert_int_equal(kq_codec_walk_records(b.data, b.len, 0, -1, collect, &s), KQ_ERR_MALFORMED);
    /* an empty payload with zero records is fine */
    s.n = 0;
    assert_int_equal(kq_codec_walk_records(NULL, 0, 0, 0, collect, &s), 0);
    assert_int_equal(s.n, 0);
    kq_buf_free(&b);
}

static void test_walk_bad_payloads(void **state)
{
    kq_buf b = {0};
    seen s = {.stop_at = -1};
    uint8_t data[300];
    static const uint8_t huge_len[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x00};
    static const uint8_t endless_varint[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                             0x80, 0x80, 0x80, 0x80, 0x80};
    static const uint8_t not_a_record[] = {0x03, 0xff, 0xff, 0xff};

    memset(data, 1, sizeof data);
    assert_int_equal(kq_codec_append_opaque(&b, data, sizeof data), 0);
    /* every truncation of a valid one-record payload fails cleanly */
    for (size_t len = 0; len < b.len; len++) {
        s.n = 0;
        assert_int_equal(kq_codec_walk_records(b.data, len, 0, 1, collect, &s), KQ_ERR_MALFORMED);
        assert_int_equal(s.n, 0);
    }
    assert_int_equal(kq_codec_walk_records(huge_len, sizeof huge_len, 0, 1, collect, &s),
                     KQ_ERR_MALFORMED);
    assert_int_equal(
        kq_codec_walk_records(endless_varint, sizeof endless_varint, 0, 1, collect, &s),
        KQ_ERR_MALFORMED);
    assert_int_equal(kq_codec_walk_records(not_a_record, sizeof not_a_record, 0, 1, collect, &s),
                     KQ_ERR_MALFORMED);
    assert_int_equal(kq_codec_walk_records(NULL, 5, 0, 1, collect, &s), KQ_ERR_MALFORMED);
    assert_int_equal(kq_codec_walk_records(b.data, b.len, 0, 1, NULL, NULL), KQ_ERR_MALFORMED);
    /* offsets that would overflow */
    assert_int_equal(kq_codec_walk_records(b.data, b.len, INT64_MAX, 1, collect, &s),
                     KQ_ERR_MALFORMED);
    kq_buf_free(&b);
}

static void test_walk_unknown_record(void **state)
{
    /* an empty Record (a body this version does not know) and one with an unknown field
     * (number 1000, varint 1) */
    static const uint8_t payload[] = {0x00, 0x03, 0xc0, 0x3e, 0x01};
    seen s = {.stop_at = -1};

    assert_int_equal(kq_codec_walk_records(payload, sizeof payload, 5, 2, collect, &s), 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.types[0], KQ_RECORD_UNKNOWN);
    assert_string_equal(s.desc[0], "Unknown bytes=0");
    assert_int_equal(s.types[1], KQ_RECORD_UNKNOWN);
    assert_string_equal(s.desc[1], "Unknown bytes=3");
    assert_true(s.offsets[1] == 6);
}

/* Record bodies added to kq.Record by other modules (metadata records) are named from the
 * schema. Skipped when this build's kq.Record has no `topic` body. */
static void test_walk_names_other_records(void **state)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(&kq__record__descriptor, "topic");
    uint8_t payload[64];
    size_t n = 0;
    seen s = {.stop_at = -1};

    if (!f) {
        skip();
        return;
    }
    /* Record{topic: TopicRecord{name: "t", topic_id: 16 bytes}} */
    payload[n++] = 23;
    payload[n++] = (uint8_t)(f->id << 3 | 2);
    payload[n++] = 21;
    payload[n++] = 0x0a;
    payload[n++] = 1;
    payload[n++] = 't';
    payload[n++] = 0x12;
    payload[n++] = 16;
    memset(payload + n, 0xab, 16);
    n += 16;
    assert_int_equal(kq_codec_walk_records(payload, n, 0, 1, collect, &s), 0);
    assert_int_equal(s.types[0], KQ_RECORD_UNKNOWN);
    assert_string_equal(s.desc[0], "Topic bytes=23");
}

static void test_walk_callback_stops(void **state)
{
    kq_buf b = {0};
    seen s = {.stop_at = 1};

    for (int i = 0; i < 4; i++)
        assert_int_equal(kq_codec_append_noop(&b), 0);
    assert_int_equal(kq_codec_walk_records(b.data, b.len, 0, 4, collect, &s), 77);
    assert_int_equal(s.n, 2);
    kq_buf_free(&b);
}

static void test_long_leader_change_is_cut(void **state)
{
    kq_buf b = {0};
    seen s = {.stop_at = -1};
    int32_t voters[200];

    for (int i = 0; i < 200; i++)
        voters[i] = 1000000000 + i;
    assert_int_equal(kq_codec_append_leader_change(&b, 7, voters, 200, voters, 200), 0);
    assert_int_equal(kq_codec_walk_records(b.data, b.len, 0, 1, collect, &s), 0);
    assert_int_equal(s.types[0], KQ_RECORD_LEADER_CHANGE);
    assert_true(strncmp(s.desc[0], "LeaderChange leader=7 voters=1000000000,1000000001,", 51) == 0);
    assert_true(strlen(s.desc[0]) <= 511);
    assert_string_equal(s.desc[0] + strlen(s.desc[0]) - 3, "...");
    assert_null(strstr(s.desc[0], "granting")); /* cut before it */
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
    seen s = {.stop_at = -1};
    char err[256];
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
    assert_int_equal(kq_codec_walk_records(r.batches[0].data, r.batches[0].len,
                                           r.batches[0].base_offset, r.batches[0].count, collect,
                                           &s),
                     0);
    assert_string_equal(s.desc[0], "LeaderChange leader=2 voters=1,2,3 granting=2,3");
    kq_response_free(&r);
    kq_buf_free(&wire);
    kq_buf_free(&payload);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_mixed_batch),
        cmocka_unit_test(test_walk_count_mismatch),
        cmocka_unit_test(test_walk_bad_payloads),
        cmocka_unit_test(test_walk_unknown_record),
        cmocka_unit_test(test_walk_names_other_records),
        cmocka_unit_test(test_walk_callback_stops),
        cmocka_unit_test(test_long_leader_change_is_cut),
        cmocka_unit_test(test_append_refusals),
        cmocka_unit_test(test_payload_through_fetch_response),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
