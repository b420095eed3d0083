/*
 * ListOffsets (earliest / latest): round trips of request and response, the whole-request
 * error answer, and every validation rule.
 */
#include <stdio.h>
#include <stdlib.h>

#include "datacodec_testutil.h"

static void test_request_roundtrip(void **state)
{
    (void)state;
    for (int follower = 0; follower <= 1; follower++) {
        kq_list_offsets_partition parts[2];
        kq_list_offsets_request in = example_list_offsets(parts);
        kq_data_request out;
        kq_buf b;
        char err[256] = "";

        in.replica_id = follower ? 3 : -1;
        assert_int_equal(
            kq_data_encode_list_offsets_request(TEST_CLUSTER, follower ? 3 : -1, &in, &b), 0);
        assert_int_equal(kq_data_decode_request(b.data, b.len, &out, err, sizeof err), 0);
        assert_int_equal(out.api_key, KQ_API_LIST_OFFSETS);
        assert_true(kq_data_is_data_api(out.api_key));
        const kq_list_offsets_request *r = &out.u.list_offsets;
        assert_int_equal(r->replica_id, in.replica_id);
        assert_int_equal(r->n_partitions, 2);
        for (size_t i = 0; i < 2; i++) {
            assert_memory_equal(r->partitions[i].topic_id, parts[i].topic_id, 16);
            assert_int_equal(r->partitions[i].partition, parts[i].partition);
            assert_int_equal(r->partitions[i].current_leader_epoch, parts[i].current_leader_epoch);
            assert_int_equal(r->partitions[i].timestamp, parts[i].timestamp);
        }
        kq_data_request_free(&out);
        kq_buf_free(&b);
    }
}

static void test_response_roundtrip(void **state)
{
    (void)state;
    kq_list_offsets_partition_result parts[2];
    kq_list_offsets_response in = example_list_offsets_response(parts), out;
    kq_buf b;
    char err[256] = "";

    assert_int_equal(kq_data_encode_list_offsets_response(&in, &b), 0);
    assert_int_equal(kq_data_decode_list_offsets_response(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.error, 0);
    assert_int_equal(out.n_partitions, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_memory_equal(out.partitions[i].topic_id, parts[i].topic_id, 16);
        assert_int_equal(out.partitions[i].partition, parts[i].partition);
        assert_int_equal(out.partitions[i].error, parts[i].error);
        assert_int_equal(out.partitions[i].offset, parts[i].offset);
        assert_int_equal(out.partitions[i].leader_epoch, parts[i].leader_epoch);
    }
    kq_data_list_offsets_response_free(&out);
    assert_null(out.priv_);
    kq_buf_free(&b);

    assert_int_equal(kq_codec_encode_error_response(KQ_API_LIST_OFFSETS, KQ_ERR_INVALID_REQUEST,
                                                    "bad", -1, -1, NULL, &b),
                     0);
    assert_int_equal(kq_data_decode_list_offsets_response(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.error, KQ_ERR_INVALID_REQUEST);
    assert_string_equal(out.error_message, "bad");
    assert_int_equal(out.n_partitions, 0);
    kq_data_list_offsets_response_free(&out);
    kq_buf_free(&b);
}

typedef struct req_case {
    const char *name;
    int32_t replica_id, sender;
    int which; /* partition to break, or -1 */
    int field; /* 0 topic, 1 partition, 2 epoch, 3 timestamp, 4 duplicate, 5 none */
    const char *expect;
} req_case;

static const req_case req_cases[] = {
    {"replica id", -2, -1, -1, -1,
     "ListOffsetsRequest.replica_id -2 is out of range [-1, 2147483647]"},
    {"replica not the sender", 2, 5, -1, -1, "ListOffsets replica_id 2 differs from the sender 5"},
    {"topic", -1, -1, 1, 0, "ListOffsetsRequest.partitions[1].topic_id is all zero"},
    {"partition", -1, -1, 0, 1,
     "ListOffsetsRequest.partitions[0].partition -3 is out of range [0, 2147483647]"},
    {"leader epoch", -1, -1, 1, 2,
     "ListOffsetsRequest.partitions[1].current_leader_epoch -2 is out of range [-1, 2147483647]"},
    {"timestamp", -1, -1, 0, 3,
     "ListOffsetsRequest.partitions[0].timestamp 1700000000000 is out of range [-2, -1]"},
    {"duplicate", -1, -1, 1, 4, "ListOffsets names partition AQIDBAUGBwgJCgsMDQ4PEA-0 twice"},
    {"no partitions", -1, -1, -1, 5, "ListOffsetsRequest.partitions has no entries"},
};

static void test_request_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof req_cases / sizeof req_cases[0]; i++) {
        const req_case *c = &req_cases[i];
        kq_list_offsets_partition parts[2];
        kq_list_offsets_request r = example_list_offsets(parts);
        kq_data_request out;
        kq_buf b;
        char err[256] = "";

        r.replica_id = c->replica_id;
        switch (c->field) {
        case 0:
            memset(parts[c->which].topic_id, 0, 16);
            break;
        case 1:
            parts[c->which].partition = -3;
            break;
        case 2:
            parts[c->which].current_leader_epoch = -2;
            break;
        case 3:
            parts[c->which].timestamp = 1700000000000LL;
            break;
        case 4:
            parts[1].partition = parts[0].partition;
            break;
        case 5:
            r.n_partitions = 0;
            break;
        default:
            break;
        }
        assert_int_equal(kq_data_encode_list_offsets_request(TEST_CLUSTER, c->sender, &r, &b), 0);
        int rc = kq_data_decode_request(b.data, b.len, &out, err, sizeof err);
        if (rc != KQ_ERR_INVALID_REQUEST || !strstr(err, c->expect))
            fail_msg("%s: got %d \"%s\", want \"%s\"", c->name, rc, err, c->expect);
        assert_null(out.priv_);
        kq_buf_free(&b);
    }
}

static void test_response_rules(void **state)
{
    (void)state;
    static const struct {
        int which, field;
        const char *expect;
    } cases[] = {
        {0, 0, "ListOffsetsResponse.partitions[0].topic_id is all zero"},
        {1, 1, "ListOffsetsResponse.partitions[1].partition -1 is out of range [0, 2147483647]"},
        {1, 2, "ListOffsetsResponse.partitions[1].error_code -7 is out of range [0, 2147483647]"},
        {0, 3, "ListOffsets response partitions[0] offset -1 is invalid (must be >= 0)"},
        {1, 4,
         "ListOffsetsResponse.partitions[1].offset -2 is out of range [-1, 9223372036854775807]"},
        {0, 5,
         "ListOffsetsResponse.partitions[0].leader_epoch -2 is out of range [-1, 2147483647]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kq_list_offsets_partition_result parts[2];
        kq_list_offsets_response r = example_list_offsets_response(parts), out;
        kq_list_offsets_partition_result *p = &parts[cases[i].which];
        kq_buf b;
        char err[256] = "";

        switch (cases[i].field) {
        case 0:
            memset(p->topic_id, 0, 16);
            break;
        case 1:
            p->partition = -1;
            break;
        case 2:
            p->error = -7;
            break;
        case 3:
            p->offset = -1;
            break;
        case 4:
            p->offset = -2;
            break;
        default:
            p->leader_epoch = -2;
            break;
        }
        assert_int_equal(kq_data_encode_list_offsets_response(&r, &b), 0);
        int rc = kq_data_decode_list_offsets_response(b.data, b.len, &out, err, sizeof err);
        if (rc != KQ_ERR_INVALID_REQUEST || !strstr(err, cases[i].expect))
            fail_msg("case %zu: got %d \"%s\", want \"%s\"", i, rc, err, cases[i].expect);
        assert_null(out.priv_);
        assert_int_equal(out.n_partitions, 0);
        kq_buf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_roundtrip),
        cmocka_unit_test(test_response_roundtrip),
        cmocka_unit_test(test_request_rules),
        cmocka_unit_test(test_response_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
