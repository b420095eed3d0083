/*
 * Round trips of every data-plane message through encode and decode, the envelope paths
 * (whole-request error answers, non-data APIs) and the documented batch CRC layout.
 */
#include <stdio.h>
#include <stdlib.h>

#include "datacodec_testutil.h"

static void test_produce_request_roundtrip(void **state)
{
    (void)state;
    kq_produce_request in = example_produce();
    kq_data_request out;
    kq_buf b;
    char err[256] = "";

    assert_int_equal(kq_data_encode_produce_request(TEST_CLUSTER, 2, &in, &b), 0);
    assert_int_equal(kq_data_decode_request(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.api_key, KQ_API_PRODUCE);
    assert_string_equal(out.cluster_id, TEST_CLUSTER);
    assert_int_equal(out.sender_id, 2);
    const kq_produce_request *p = &out.u.produce;
    assert_memory_equal(p->topic_id, topic_a, 16);
    assert_int_equal(p->partition, 3);
    assert_int_equal(p->acks, -1);
    assert_int_equal(p->timeout_ms, 30000);
    assert_int_equal(p->producer_id, 4242);
    assert_int_equal(p->producer_epoch, 7);
    assert_int_equal(p->base_sequence, 100);
    assert_int_equal(p->n_records, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(p->record_lens[i], example_lens[i]);
        assert_non_null(p->records[i]);
        if (example_lens[i])
            assert_memory_equal(p->records[i], example_records[i], example_lens[i]);
    }
    kq_data_request_free(&out);
    assert_null(out.priv_);
    kq_data_request_free(&out); /* twice is harmless */
    kq_buf_free(&b);
}

static void test_produce_request_not_idempotent_acks(void **state)
{
    (void)state;
    for (int acks = -1; acks <= 1; acks++) {
        kq_produce_request in = example_produce();
        kq_data_request out;
        kq_buf b;
        char err[256] = "";

        in.acks = acks;
        in.producer_id = -1;
        in.producer_epoch = -1;
        in.base_sequence = -1;
        in.timeout_ms = 0;
        assert_int_equal(kq_data_encode_produce_request("", -1, &in, &b), 0);
        assert_int_equal(kq_data_decode_request(b.data, b.len, &out, err, sizeof err), 0);
        assert_int_equal(out.u.produce.acks, acks);
        assert_int_equal(out.u.produce.producer_id, -1);
        assert_int_equal(out.sender_id, -1);
        assert_string_equal(out.cluster_id, "");
        kq_data_request_free(&out);
        kq_buf_free(&b);
    }
}

static void check_fetch_roundtrip(bool follower)
{
    kq_data_fetch_partition parts[2];
    kq_data_fetch_request in = example_fetch(parts, follower);
    kq_data_request out;
    kq_buf b;
    char err[256] = "";

    assert_int_equal(kq_data_encode_fetch_request(TEST_CLUSTER, follower ? 2 : -1, &in, &b), 0);
    assert_int_equal(kq_data_decode_request(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.api_key, KQ_API_DATA_FETCH);
    const kq_data_fetch_request *f = &out.u.fetch;
    assert_int_equal(f->replica_id, in.replica_id);
    assert_int_equal(f->broker_epoch, in.broker_epoch);
    assert_int_equal(f->max_wait_ms, 500);
    assert_int_equal(f->min_bytes, 1);
    assert_int_equal(f->max_bytes, 50 << 20);
    assert_int_equal(f->n_partitions, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_memory_equal(f->partitions[i].topic_id, parts[i].topic_id, 16);
        assert_int_equal(f->partitions[i].partition, parts[i].partition);
        assert_int_equal(f->partitions[i].current_leader_epoch, parts[i].current_leader_epoch);
        assert_int_equal(f->partitions[i].fetch_offset, parts[i].fetch_offset);
        assert_int_equal(f->partitions[i].last_fetched_epoch, parts[i].last_fetched_epoch);
        assert_int_equal(f->partitions[i].log_start_offset, parts[i].log_start_offset);
        assert_int_equal(f->partitions[i].partition_max_bytes, parts[i].partition_max_bytes);
    }
    kq_data_request_free(&out);
    kq_buf_free(&b);
}

static void test_fetch_request_consumer_roundtrip(void **state)
{
    (void)state;
    check_fetch_roundtrip(false);
}

static void test_fetch_request_follower_roundtrip(void **state)
{
    (void)state;
    check_fetch_roundtrip(true);
}

static void test_non_data_request_is_not_found(void **state)
{
    (void)state;
    kq_buf b;
    kq_data_request out;
    char err[256] = "";

    assert_int_equal(kq_codec_encode_describe_request(TEST_CLUSTER, &b), 0);
    assert_int_equal(kq_data_decode_request(b.data, b.len, &out, err, sizeof err),
                     KQ_ERR_NOT_FOUND);
    assert_int_equal(out.api_key, KQ_API_DESCRIBE_QUORUM);
    assert_null(out.priv_);
    assert_non_null(strstr(err, "not a data-plane API"));
    kq_buf_free(&b);
    assert_true(kq_data_is_data_api(KQ_API_PRODUCE));
    assert_true(kq_data_is_data_api(KQ_API_DATA_FETCH));
    assert_false(kq_data_is_data_api(KQ_API_FETCH));
}

static void test_produce_response_roundtrip(void **state)
{
    (void)state;
    kq_produce_response in = {.error = 0, .base_offset = 1234, .log_start_offset = 7};
    kq_produce_response out;
    kq_buf b;
    char err[256] = "";

    assert_int_equal(kq_data_encode_produce_response(&in, &b), 0);
    assert_int_equal(kq_data_decode_produce_response(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.error, 0);
    assert_int_equal(out.base_offset, 1234);
    assert_int_equal(out.log_start_offset, 7);
    assert_string_equal(out.error_message, "");
    kq_buf_free(&b);

    /* A per-partition error with a long message: clipped to the limit. */
    kq_produce_response e = {
        .error = KQ_ERR_NOT_ENOUGH_REPLICAS, .base_offset = -1, .log_start_offset = -1};
    memset(e.error_message, 'x', KQ_DATA_MAX_ERROR_MESSAGE);
    assert_int_equal(kq_data_encode_produce_response(&e, &b), 0);
    assert_int_equal(kq_data_decode_produce_response(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.error, KQ_ERR_NOT_ENOUGH_REPLICAS);
    assert_int_equal(out.base_offset, -1);
    assert_int_equal(strlen(out.error_message), KQ_DATA_MAX_ERROR_MESSAGE);
    kq_buf_free(&b);
}

static void test_envelope_error_responses(void **state)
{
    (void)state;
    kq_buf b;
    kq_produce_response pr;
    kq_data_fetch_response fr;
    char err[256] = "";

    assert_int_equal(kq_codec_encode_error_response(KQ_API_PRODUCE, KQ_ERR_INVALID_REQUEST,
                                                    "Produce acks 2 is invalid", -1, -1, NULL, &b),
                     0);
    assert_int_equal(kq_data_decode_produce_response(b.data, b.len, &pr, err, sizeof err), 0);
    assert_int_equal(pr.error, KQ_ERR_INVALID_REQUEST);
    assert_string_equal(pr.error_message, "Produce acks 2 is invalid");
    assert_int_equal(pr.base_offset, -1);
    /* The same bytes are not a Fetch answer. */
    assert_int_equal(kq_data_decode_fetch_response(b.data, b.len, &fr, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "api key"));
    kq_buf_free(&b);

    assert_int_equal(kq_codec_encode_error_response(KQ_API_DATA_FETCH, KQ_ERR_STALE_BROKER_EPOCH,
                                                    "stale", 1, 3, NULL, &b),
                     0);
    assert_int_equal(kq_data_decode_fetch_response(b.data, b.len, &fr, err, sizeof err), 0);
    assert_int_equal(fr.error, KQ_ERR_STALE_BROKER_EPOCH);
    assert_string_equal(fr.error_message, "stale");
    assert_int_equal(fr.n_partitions, 0);
    kq_data_fetch_response_free(&fr);
    kq_buf_free(&b);
}

static void test_fetch_response_roundtrip(void **state)
{
    (void)state;
    kq_data_fetch_partition_result parts[3];
    kq_data_batch bt[3];
    kq_data_fetch_response in = example_fetch_response(parts, bt);
    kq_data_fetch_response out;
    kq_buf b;
    char err[256] = "";

    assert_int_equal(kq_data_encode_fetch_response(&in, &b), 0);
    assert_int_equal(kq_data_decode_fetch_response(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.error, 0);
    assert_int_equal(out.n_partitions, 3);
    for (size_t i = 0; i < 3; i++) {
        const kq_data_fetch_partition_result *x = &parts[i], *y = &out.partitions[i];

        assert_memory_equal(x->topic_id, y->topic_id, 16);
        assert_int_equal(x->partition, y->partition);
        assert_int_equal(x->error, y->error);
        assert_int_equal(x->high_watermark, y->high_watermark);
        assert_int_equal(x->log_start_offset, y->log_start_offset);
        assert_int_equal(x->diverging_epoch, y->diverging_epoch);
        assert_int_equal(x->diverging_end_offset, y->diverging_end_offset);
        assert_int_equal(x->current_leader_id, y->current_leader_id);
        assert_int_equal(x->current_leader_epoch, y->current_leader_epoch);
        assert_int_equal(x->n_batches, y->n_batches);
        for (size_t j = 0; j < x->n_batches; j++) {
            const kq_data_batch *p = &x->batches[j], *q = &y->batches[j];

            assert_int_equal(p->base_offset, q->base_offset);
            assert_int_equal(p->leader_epoch, q->leader_epoch);
            assert_int_equal(p->count, q->count);
            assert_int_equal(p->crc32c, q->crc32c);
            assert_int_equal(p->producer_id, q->producer_id);
            assert_int_equal(p->producer_epoch, q->producer_epoch);
            assert_int_equal(p->base_sequence, q->base_sequence);
            assert_int_equal(p->len, q->len);
            assert_memory_equal(p->records, q->records, p->len);
        }
    }
    kq_data_fetch_response_free(&out);
    assert_null(out.priv_);
    assert_int_equal(out.n_partitions, 0);
    kq_buf_free(&b);

    /* An empty answer (long poll expired, nothing new) is valid too. */
    kq_data_fetch_response empty = {0};
    assert_int_equal(kq_data_encode_fetch_response(&empty, &b), 0);
    assert_int_equal(kq_data_decode_fetch_response(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.n_partitions, 0);
    kq_data_fetch_response_free(&out);
    kq_buf_free(&b);
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* The CRC covers the documented header layout then the records (the kq_plog value). */
static void test_batch_crc_layout(void **state)
{
    (void)state;
    kq_data_batch bt = {.base_offset = 0x0102030405060708LL,
                        .leader_epoch = 9,
                        .count = 3,
                        .producer_id = -1,
                        .producer_epoch = -1,
                        .base_sequence = -1,
                        .records = payload2,
                        .len = sizeof payload2};
    uint8_t buf[30 + sizeof payload2];

    put_be(buf, (uint64_t)bt.base_offset, 8);
    put_be(buf + 8, 9, 4);
    put_be(buf + 12, 3, 4);
    put_be(buf + 16, UINT64_MAX, 8);
    put_be(buf + 24, 0xffff, 2);
    put_be(buf + 26, 0xffffffffu, 4);
    memcpy(buf + 30, payload2, sizeof payload2);
    assert_int_equal(kq_data_batch_crc(&bt), kq_crc32c(0, buf, sizeof buf));
    /* Every header field is covered. */
    uint32_t c0 = kq_data_batch_crc(&bt);
    bt.count = 4;
    assert_int_not_equal(kq_data_batch_crc(&bt), c0);
    bt.count = 3;
    bt.producer_epoch = 0;
    assert_int_not_equal(kq_data_batch_crc(&bt), c0);
}

static void test_null_arguments(void **state)
{
    (void)state;
    kq_buf b;
    char err[128] = "";
    kq_data_request r;

    assert_int_equal(kq_data_encode_produce_request("", 1, NULL, &b), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_data_encode_fetch_request("", 1, NULL, &b), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_data_encode_produce_response(NULL, &b), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_data_encode_fetch_response(NULL, &b), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_data_decode_request(NULL, 5, &r, err, sizeof err), KQ_ERR_MALFORMED);
    assert_int_equal(kq_data_decode_request(NULL, 0, &r, err, sizeof err), KQ_ERR_MALFORMED);
    assert_non_null(strstr(err, "does not parse"));
    kq_data_request_free(NULL);
    kq_data_fetch_response_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_produce_request_roundtrip),
        cmocka_unit_test(test_produce_request_not_idempotent_acks),
        cmocka_unit_test(test_fetch_request_consumer_roundtrip),
        cmocka_unit_test(test_fetch_request_follower_roundtrip),
        cmocka_unit_test(test_non_data_request_is_not_found),
        cmocka_unit_test(test_produce_response_roundtrip),
        cmocka_unit_test(test_envelope_error_responses),
        cmocka_unit_test(test_fetch_response_roundtrip),
        cmocka_unit_test(test_batch_crc_layout),
        cmocka_unit_test(test_null_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
