/*
 * Batch payloads: kq_data_records_pack / kq_data_records_walk round trips (including empty
 * and large values), every malformed-payload error, a callback stopping the walk, and 50,000
 * mutated payloads that must be walked or rejected without a crash.
 */
#include <stdio.h>
#include <stdlib.h>

#include "datacodec_testutil.h"
#include "kq/util.h"

typedef struct seen {
    int n;
    int64_t offsets[8];
    size_t lens[8];
    const uint8_t *vals[8];
    int stop_at; /* -1: never */
} seen;

static int collect(void *arg, int64_t offset, const uint8_t *value, size_t len)
{
    seen *s = arg;

    if (s->n == s->stop_at)
        return KQ_ERR_INTERNAL;
    if (s->n < 8) {
        s->offsets[s->n] = offset;
        s->lens[s->n] = len;
        s->vals[s->n] = value;
    }
    s->n++;
    return 0;
}

static void test_pack_walk_roundtrip(void **state)
{
    (void)state;
    static uint8_t big[300];
    const uint8_t *recs[4] = {rec0, NULL, rec2, big};
    size_t lens[4] = {5, 0, sizeof rec2, sizeof big};
    kq_buf b;
    seen s = {.stop_at = -1};
    char err[256] = "";

    memset(big, 0xab, sizeof big);
    assert_int_equal(kq_data_records_pack(recs, lens, 4, &b), 0);
    /* 1 + 5, 1 + 0, 1 + 5, 2 + 300 bytes. */
    assert_int_equal(b.len, 6 + 1 + 6 + 302);
    assert_int_equal(kq_data_records_walk(b.data, b.len, 40, 4, collect, &s, err, sizeof err), 0);
    assert_int_equal(s.n, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(s.offsets[i], 40 + i);
        assert_int_equal(s.lens[i], lens[i]);
        if (lens[i])
            assert_memory_equal(s.vals[i], recs[i], lens[i]);
    }
    /* Validation only. */
    assert_int_equal(kq_data_records_walk(b.data, b.len, 0, 4, NULL, NULL, err, sizeof err), 0);
    kq_buf_free(&b);
}

/* A Produce decoded by the broker packs into a payload a consumer walks back. */
static void test_produce_to_payload(void **state)
{
    (void)state;
    kq_produce_request in = example_produce();
    kq_data_request rq;
    kq_buf b, pl;
    seen s = {.stop_at = -1};
    char err[256] = "";

    assert_int_equal(kq_data_encode_produce_request(TEST_CLUSTER, 1, &in, &b), 0);
    assert_int_equal(kq_data_decode_request(b.data, b.len, &rq, err, sizeof err), 0);
    assert_int_equal(kq_data_records_pack(rq.u.produce.records, rq.u.produce.record_lens,
                                          rq.u.produce.n_records, &pl),
                     0);
    assert_int_equal(kq_data_records_walk(pl.data, pl.len, 0, (int32_t)rq.u.produce.n_records,
                                          collect, &s, err, sizeof err),
                     0);
    assert_int_equal(s.n, 3);
    assert_memory_equal(s.vals[0], "hello", 5);
    assert_int_equal(s.lens[1], 0);
    kq_data_request_free(&rq);
    kq_buf_free(&b);
    kq_buf_free(&pl);
}

static void expect_walk_error(const uint8_t *p, size_t len, int64_t base, int32_t count,
                              const char *expect)
{
    char err[256] = "";
    int rc = kq_data_records_walk(p, len, base, count, NULL, NULL, err, sizeof err);

    if (rc != KQ_ERR_MALFORMED || !strstr(err, expect))
        fail_msg("got %d \"%s\", want MALFORMED \"%s\"", rc, err, expect);
}

static void test_walk_errors(void **state)
{
    (void)state;
    const uint8_t two[] = {2, 'a', 'b', 1, 'c'};
    const uint8_t long_len[] = {9, 'a'};
    const uint8_t bad_varint[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    const uint8_t trunc_varint[] = {0x80};

    expect_walk_error(two, sizeof two, 0, 3, "holds 2 records, not 3");
    expect_walk_error(two, sizeof two, 0, 1, "has 2 bytes after its 1 records");
    expect_walk_error(long_len, sizeof long_len, 0, 1, "record 0 of the batch claims 9 bytes");
    expect_walk_error(bad_varint, sizeof bad_varint, 0, 1,
                      "record 0 of the batch has a bad length");
    expect_walk_error(trunc_varint, sizeof trunc_varint, 0, 1, "bad length");
    expect_walk_error(two, sizeof two, 0, 0, "batch count 0 is invalid");
    expect_walk_error(two, sizeof two, -1, 2, "base offset -1 is invalid");
    expect_walk_error(two, sizeof two, INT64_MAX - 1, 2, "is invalid for 2 records");
    expect_walk_error(NULL, 4, 0, 1, "payload is missing");
    expect_walk_error(NULL, 0, 0, 1, "holds 0 records, not 1");

    /* The callback's error stops the walk and is returned. */
    seen s = {.stop_at = 1};
    char err[64] = "";
    assert_int_equal(kq_data_records_walk(two, sizeof two, 0, 2, collect, &s, err, sizeof err),
                     KQ_ERR_INTERNAL);
    assert_int_equal(s.n, 1);

    /* Pack refuses a NULL value with a length. */
    const uint8_t *recs[1] = {NULL};
    size_t lens[1] = {3};
    kq_buf b;
    assert_int_equal(kq_data_records_pack(recs, lens, 1, &b), KQ_ERR_INVALID_REQUEST);
    assert_null(b.data);
    assert_int_equal(kq_data_records_pack(NULL, NULL, 1, &b), KQ_ERR_INVALID_REQUEST);
}

/* The project's splitmix64 (kq/util.h), seeded here: the same sequence every run. */
static kq_prng rng_state = {0x7265636f72647321ull};

static uint64_t rng(void)
{
    return kq_prng_next(&rng_state);
}

static int sum_cb(void *arg, int64_t offset, const uint8_t *value, size_t len)
{
    size_t *total = arg;

    (void)offset;
    for (size_t i = 0; i < len; i++) /* reads every byte: ASan catches a bad pointer */
        *total += value[i] != 0xee;
    return 0;
}

static void test_walk_mutated_payloads(void **state)
{
    (void)state;
    const uint8_t *recs[3] = {rec0, NULL, rec2};
    size_t lens[3] = {5, 0, sizeof rec2};
    kq_buf b;
    size_t ok = 0, bad = 0;

    assert_int_equal(kq_data_records_pack(recs, lens, 3, &b), 0);
    for (int it = 0; it < 50000; it++) {
        size_t len = b.len;
        uint8_t *p = malloc(len);

        assert_non_null(p);
        memcpy(p, b.data, len);
        for (int e = 0, n = 1 + (int)(rng() % 3); e < n; e++)
            p[rng() % len] ^= (uint8_t)(1u << (rng() % 8));
        if (rng() % 4 == 0)
            len = rng() % (len + 1);
        size_t total = 0;
        char err[256] = "";
        int rc = kq_data_records_walk(p, len, 0, (int32_t)(1 + rng() % 4), sum_cb, &total, err,
                                      sizeof err);
        if (rc == 0) {
            ok++;
        } else {
            assert_int_equal(rc, KQ_ERR_MALFORMED);
            assert_true(err[0] != 0);
            bad++;
        }
        free(p);
    }
    printf("mutated payloads: %zu walked, %zu rejected\n", ok, bad);
    assert_int_equal(ok + bad, 50000);
    assert_true(bad > 0);
    kq_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_walk_roundtrip),
        cmocka_unit_test(test_produce_to_payload),
        cmocka_unit_test(test_walk_errors),
        cmocka_unit_test(test_walk_mutated_payloads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
