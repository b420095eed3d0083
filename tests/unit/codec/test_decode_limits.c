/*
 * Limits before allocation (common/wire/pb_wire.c): the decoders refuse, from the bytes alone,
 * a message whose unpacking would cost more than kq_pb_decode_budget of its size, and a
 * singular message field that repeats (protobuf-c would merge the repeats in quadratic time).
 *
 * The cost model is checked against protobuf-c itself: every message here, valid or mutated,
 * is also unpacked through a counting allocator, and the model's count must be at least the
 * real peak (an upper bound, or the limit could be passed) and close to it for the messages
 * that unpack (or it would refuse honest traffic).
 */
#include <stdio.h>

#include "codec_testutil.h"
#include "kq/records.h"
#include "kq_record.pb-c.h"
#include "kq_rpc.pb-c.h"
#include "pb_wire.h"

/* ---- protobuf-c through a counting allocator --------------------------------------------- */

static size_t live_bytes, peak_bytes, total_bytes;

/* The chunk glibc carves for a request of n bytes from fresh memory (a reused free chunk may
 * be up to 16 bytes larger; that depends on the heap's history, not on the message). */
static size_t chunk_bytes(size_t n)
{
    if (n >= ((size_t)128 << 10)) /* mmap'd: whole pages */
        return (n + 16 + 4095) & ~(size_t)4095;
    return n <= 24 ? 32 : (n + 8 + 15) & ~(size_t)15;
}

/* Each allocation carries its requested size in a 16-byte prefix. */
static void *count_alloc(void *data, size_t n)
{
    size_t *p = malloc(n + 16);

    (void)data;
    if (p == NULL)
        return NULL;
    p[0] = n;
    total_bytes += chunk_bytes(n);
    live_bytes += chunk_bytes(n);
    if (live_bytes > peak_bytes)
        peak_bytes = live_bytes;
    return (char *)p + 16;
}

static void count_free(void *data, void *p)
{
    (void)data;
    if (p) {
        size_t *h = (size_t *)(void *)((char *)p - 16);

        live_bytes -= chunk_bytes(h[0]);
        free(h);
    }
}

static ProtobufCAllocator counting = {count_alloc, count_free, NULL};

/* The peak protobuf-c really allocates to unpack p as a d (*parsed: it unpacked). */
static size_t real_peak_of(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
                           bool *parsed)
{
    ProtobufCMessage *m;

    live_bytes = peak_bytes = 0;
    m = protobuf_c_message_unpack(d, &counting, len, p);
    *parsed = m != NULL;
    if (m)
        protobuf_c_message_free_unpacked(m, &counting);
    assert_int_equal(live_bytes, 0);
    return peak_bytes;
}

static size_t real_peak(const uint8_t *p, size_t len, bool *parsed)
{
    return real_peak_of(&kq__request__descriptor, p, len, parsed);
}

static size_t model_cost(const uint8_t *p, size_t len)
{
    size_t cost = 0;
    char why[256];

    assert_true(
        kq_pb_unpack_cost(&kq__request__descriptor, p, len, SIZE_MAX, &cost, why, sizeof why));
    return cost;
}

/* The model bounds the real peak from above, and for a message that unpacks it is within 25%
 * (plus a few chunks) of it. */
static void check_model_of(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
                           const char *what)
{
    bool parsed;
    size_t real, model = 0;
    char why[256];

    /* the decoders refuse a repeated singular message before protobuf-c sees it */
    if (!kq_pb_unpack_cost(d, p, len, SIZE_MAX, &model, why, sizeof why)) {
        assert_non_null(strstr(why, "occurs more than once"));
        return;
    }
    real = real_peak_of(d, p, len, &parsed);
    if (real > model || (parsed && model > real + real / 4 + 256))
        fail_msg("%s (%zu bytes): model %zu bytes, protobuf-c peak %zu bytes", what, len, model,
                 real);
}

static void check_model(const uint8_t *p, size_t len, const char *what)
{
    check_model_of(&kq__request__descriptor, p, len, what);
}

/* ---- messages ---------------------------------------------------------------------------- */

static kq_buf pack_request(const Kq__Request *rq)
{
    kq_buf b = {malloc(kq__request__get_packed_size(rq) + 1), 0};

    assert_non_null(b.data);
    b.len = kq__request__pack(rq, b.data);
    return b;
}

/* A Write of n records of `size` bytes each, built from the generated structs (the codec's
 * encoder refuses more than KQ_CODEC_MAX_WRITE_RECORDS). */
static kq_buf write_request(size_t n, size_t size)
{
    uint8_t *rec = calloc(1, size + 1);
    ProtobufCBinaryData *recs = calloc(n + 1, sizeof *recs);
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__WriteRequest w = KQ__WRITE_REQUEST__INIT;
    kq_buf b;

    assert_true(rec && recs);
    for (size_t i = 0; i < n; i++) {
        recs[i].data = rec;
        recs[i].len = size;
    }
    w.n_records = n;
    w.records = recs;
    rq.api_key = KQ_API_WRITE;
    rq.cluster_id = "c";
    rq.body_case = KQ__REQUEST__BODY_WRITE;
    rq.write = &w;
    b = pack_request(&rq);
    free(recs);
    free(rec);
    return b;
}

/* A data-plane Fetch of n partitions, built from the generated structs. */
static kq_buf data_fetch_request(size_t n)
{
    static uint8_t topic_id[16] = {1, 2, 3};
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__DataFetchRequest f = KQ__DATA_FETCH_REQUEST__INIT;
    Kq__DataFetchPartition *parts = calloc(n, sizeof *parts);
    Kq__DataFetchPartition **ptrs = calloc(n, sizeof *ptrs);
    kq_buf b;

    assert_true(parts && ptrs);
    for (size_t i = 0; i < n; i++) {
        kq__data_fetch_partition__init(&parts[i]);
        parts[i].topic_id.data = topic_id;
        parts[i].topic_id.len = sizeof topic_id;
        parts[i].partition = (int32_t)i;
        parts[i].fetch_offset = (int64_t)i * 1000;
        ptrs[i] = &parts[i];
    }
    f.replica_id = 2;
    f.n_partitions = n;
    f.partitions = ptrs;
    rq.api_key = KQ_API_DATA_FETCH;
    rq.cluster_id = "c";
    rq.body_case = KQ__REQUEST__BODY_DATA_FETCH;
    rq.data_fetch = &f;
    b = pack_request(&rq);
    free(ptrs);
    free(parts);
    return b;
}

static size_t put_key(uint8_t *p, unsigned field, unsigned wire_type)
{
    return kq_pb_put_varint(p, (uint64_t)field << 3 | wire_type);
}

/* ---- tests ------------------------------------------------------------------------------- */

/* The request that took a leader from 12 MB to a 441 MB peak, scaled down: a million empty
 * records in 2 MB. protobuf-c would need over twice the budget; the codec refuses it with
 * a reason, before unpacking it. */
static void test_dense_write_is_refused_before_unpacking(void **state)
{
    kq_buf b = write_request(1000000, 0);
    kq_request r;
    char err[256] = "";
    bool parsed;

    (void)state;
    size_t real = real_peak(b.data, b.len, &parsed);

    if (!parsed || real < 2 * kq_pb_decode_budget(b.len))
        fail_msg("protobuf-c: %zu bytes for %zu, budget %zu", real, b.len,
                 kq_pb_decode_budget(b.len));
    assert_int_equal(kq_codec_decode_request(b.data, b.len, &r, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "decoding it would take more than"));
    assert_non_null(strstr(err, "bytes of memory (the limit for a message of this size)"));
    assert_int_equal(r.api_key, KQ_API_WRITE); /* so that the error answer names the API */
    kq_request_free(&r);
    kq_buf_free(&b);
}

/* Byte-heavy messages and dense ones up to a few hundred KiB are within the budget. */
static void test_honest_messages_decode(void **state)
{
    kq_buf big = write_request(KQ_CODEC_MAX_WRITE_RECORDS, 1000); /* 10 MB of records */
    kq_buf dense = data_fetch_request(10000);                     /* a Fetch of 10,000 */
    ProtobufCMessage *m;
    kq_request r;
    char err[256] = "";

    (void)state;
    assert_int_equal(kq_codec_decode_request(big.data, big.len, &r, err, sizeof err), 0);
    assert_int_equal(r.n_records, KQ_CODEC_MAX_WRITE_RECORDS);
    kq_request_free(&r);
    assert_true(model_cost(dense.data, dense.len) <= kq_pb_decode_budget(dense.len));
    m = kq_pb_unpack(&kq__request__descriptor, dense.data, dense.len, KQ_PB_REQUEST, &(int){0},
                     NULL, err, sizeof err);
    assert_non_null(m);
    protobuf_c_message_free_unpacked(m, NULL);
    check_model(big.data, big.len, "Write of 10,000 records of 1000 bytes");
    check_model(dense.data, dense.len, "data Fetch of 10,000 partitions");
    kq_buf_free(&big);
    kq_buf_free(&dense);
}

/* A PartitionChangeRecord whose isr (a singular ReplicaList) repeats n times, one id each. */
static size_t isr_repeated(uint8_t *buf, size_t n)
{
    size_t len = 0, body;

    len += put_key(buf + len, 15, 2); /* Record.partition_change */
    body = 2 + 18 + 5 * n;
    len += kq_pb_put_varint(buf + len, body);
    len += put_key(buf + len, 1, 0); /* partition_id 0 */
    buf[len++] = 0;
    len += put_key(buf + len, 2, 2); /* topic_id, 16 bytes */
    buf[len++] = 16;
    memset(buf + len, 7, 16);
    len += 16;
    for (size_t i = 0; i < n; i++) {
        static const uint8_t isr[] = {3 << 3 | 2, 3, 1 << 3 | 2, 1, 1}; /* isr {ids: [1]} */

        memcpy(buf + len, isr, sizeof isr);
        len += sizeof isr;
    }
    return len;
}

/* An answer to this process gets the looser budget: the same dense 2 MB (~60 MB unpacked)
 * decodes as an answer and is refused as a request. */
static void test_answers_get_a_looser_budget(void **state)
{
    kq_buf b = write_request(1000000, 0);
    ProtobufCMessage *m;
    char err[256] = "";
    int rc = 0;

    (void)state;
    assert_true(kq_pb_answer_budget(b.len) > model_cost(b.data, b.len));
    m = kq_pb_unpack(&kq__request__descriptor, b.data, b.len, KQ_PB_ANSWER, &rc, NULL, err,
                     sizeof err);
    assert_non_null(m);
    protobuf_c_message_free_unpacked(m, NULL);
    assert_null(kq_pb_unpack(&kq__request__descriptor, b.data, b.len, KQ_PB_REQUEST, &rc, NULL, err,
                             sizeof err));
    assert_int_equal(rc, KQ_ERR_INVALID_REQUEST);
    kq_buf_free(&b);
}

/* protobuf-c merges every repeat of a singular (non-oneof) message field into the first by
 * copying the repeated fields of both: n repeats allocate and copy n^2/2 elements, so a 500 KB
 * record could keep a node busy for seconds. The decoders refuse the repeat. */
static void test_repeated_singular_message_is_refused(void **state)
{
    static uint8_t rec[32 + 5 * 2000];
    size_t totals[2];
    kq_record out;
    char why[256] = "";
    ProtobufCMessage *m;

    (void)state;
    for (int i = 0; i < 2; i++) {
        size_t len = isr_repeated(rec, 1000 * (size_t)(i + 1));

        live_bytes = peak_bytes = total_bytes = 0;
        m = protobuf_c_message_unpack(&kq__record__descriptor, &counting, len, rec);
        assert_non_null(m);
        protobuf_c_message_free_unpacked(m, &counting);
        totals[i] = total_bytes;
        assert_int_equal(kq_record_decode(rec, len, &out, why, sizeof why), KQ_ERR_INVALID_REQUEST);
        assert_string_equal(why, "field isr of kq.PartitionChangeRecord occurs more than once");
    }
    /* twice the repeats, four times the bytes allocated */
    if (totals[1] < 3 * totals[0])
        fail_msg("protobuf-c allocated %zu bytes for 1000 repeats, %zu for 2000", totals[0],
                 totals[1]);
}

/* A oneof body given twice is refused too (protobuf-c would drop the first). */
static void test_repeated_oneof_body_is_refused(void **state)
{
    kq_buf one = write_request(1, 0);
    uint8_t *twice = malloc(one.len + 8);
    size_t n = one.len;
    kq_request r;
    char err[256] = "";

    (void)state;
    assert_non_null(twice);
    memcpy(twice, one.data, one.len);
    n += put_key(twice + n, 15, 2); /* a second WriteRequest body (field 15) */
    twice[n++] = 2;
    n += put_key(twice + n, 1, 2); /* with one empty record */
    twice[n++] = 0;
    assert_int_equal(kq_codec_decode_request(twice, n, &r, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_string_equal(err, "field write of kq.Request occurs more than once");
    kq_request_free(&r);
    /* the same body once decodes */
    assert_int_equal(kq_codec_decode_request(one.data, one.len, &r, err, sizeof err), 0);
    kq_request_free(&r);
    free(twice);
    kq_buf_free(&one);
}

/* Unknown fields and packed runs cost what protobuf-c makes of them. */
static void test_model_counts_unknown_and_packed_fields(void **state)
{
    uint8_t buf[64 * 1024];
    size_t n;
    kq_buf head = write_request(0, 0);

    (void)state;
    /* many unknown fields of each wire type after a valid head */
    memcpy(buf, head.data, head.len);
    n = head.len;
    for (unsigned i = 0; n + 24 < sizeof buf; i++) {
        n += put_key(buf + n, 900 + i % 50, (unsigned[]){0, 1, 2, 5}[i % 4]);
        switch (i % 4) {
        case 0:
            buf[n++] = 1;
            break;
        case 1:
            memset(buf + n, 7, 8);
            n += 8;
            break;
        case 2:
            buf[n++] = 3;
            memcpy(buf + n, "abc", 3);
            n += 3;
            break;
        default:
            memset(buf + n, 7, 4);
            n += 4;
            break;
        }
    }
    check_model(buf, n, "unknown fields");
    /* api_key, a singular uint32, sent as a packed run of 30,000 varints: protobuf-c refuses
     * it after scanning, having allocated only the message */
    n = put_key(buf, 1, 2);
    n += kq_pb_put_varint(buf + n, 30000);
    memset(buf + n, 1, 30000);
    check_model(buf, n + 30000, "a singular scalar sent packed");
    /* found by fuzz_unpack_cost: a packed run whose last varint is cut (01 82): protobuf-c
     * counts the ended one, allocates the array, then fails */
    {
        static const uint8_t rec[] = {0x72, 0x24, 0x08, 0x00, 0x12, 0x10, 0x5e, 0xed, 0x01, 0x02,
                                      0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
                                      0x0d, 0x0e, 0x1a, 0x02, 0x01, 0x02, 0x22, 0x02, 0x01, 0x82,
                                      0x38, 0x02, 0x40, 0x00, 0x48, 0x00, 0x50, 0x00};

        check_model_of(&kq__record__descriptor, rec, sizeof rec, "a cut packed varint run");
    }
    kq_buf_free(&head);
}

/* Every truncation and 20,000 random mutations of the messages above: the model is an upper
 * bound of protobuf-c's peak whatever the bytes, and never refuses what it should not. */
static void test_model_bounds_protobuf_c_on_mutations(void **state)
{
    kq_buf seeds[] = {write_request(3, 5), data_fetch_request(40), write_request(300, 0)};
    uint64_t x = 0x6c696d6974730001ull;

    (void)state;
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        uint8_t *m = malloc(seeds[s].len);

        assert_non_null(m);
        for (size_t cut = 0; cut <= seeds[s].len; cut += 1 + cut / 64)
            check_model(seeds[s].data, cut, "a truncation");
        for (int i = 0; i < 20000 / 3; i++) {
            memcpy(m, seeds[s].data, seeds[s].len);
            for (int k = 0; k < 1 + i % 4; k++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                m[(x >> 33) % seeds[s].len] = (uint8_t)(x >> 20);
            }
            check_model(m, seeds[s].len, "a mutation");
        }
        free(m);
        kq_buf_free(&seeds[s]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_write_is_refused_before_unpacking),
        cmocka_unit_test(test_honest_messages_decode),
        cmocka_unit_test(test_answers_get_a_looser_budget),
        cmocka_unit_test(test_repeated_singular_message_is_refused),
        cmocka_unit_test(test_repeated_oneof_body_is_refused),
        cmocka_unit_test(test_model_counts_unknown_and_packed_fields),
        cmocka_unit_test(test_model_bounds_protobuf_c_on_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
