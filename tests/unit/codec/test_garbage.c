/*
 * Hostile input: every truncation and every single-bit flip of a valid encoding of each message
 * type, then 200,000 deterministic random and mutated buffers through both decoders and the
 * record walker. Each input must give a decode error (with a message) or a decode whose result
 * passes the same validation rules (checked independently by check_*_ok); never a crash, which
 * ASan/UBSan (-DKQ_SANITIZE=ON) would turn into a failure.
 */
#include <stdio.h>

#include "codec_testutil.h"
#include "kq/records.h"
#include "pb_wire.h"
#include "kq/util.h"

#define GARBAGE_ITERATIONS 200000

/* The project's splitmix64 (kq/util.h), seeded here: the same sequence every run. */
static kq_prng rng_state = {0x6b71636f64656331ull};

static uint64_t rng(void)
{
    return kq_prng_next(&rng_state);
}

static size_t rng_below(size_t n)
{
    return n ? (size_t)(rng() % n) : 0;
}

typedef struct corpus {
    kq_buf req[16];
    size_t n_req;
    kq_buf resp[16];
    size_t n_resp;
    kq_buf payload[4];
    size_t n_payload;
} corpus;

static corpus C;

static void add(kq_buf *arr, size_t *n, kq_buf b)
{
    assert_true(*n < 16);
    assert_non_null(b.data);
    arr[(*n)++] = b;
}

static void build_corpus(void)
{
    kq_raft_msg m;
    kq_buf b;
    kq_buf p1 = {0}, p2 = {0};
    kq_codec_batch batches[2];
    kq_quorum_description d;
    const int32_t voters[] = {1, 2, 3};
    static const uint8_t rec[] = {9, 8, 7};
    const uint8_t *recs[2] = {rec, rec};
    size_t lens[2] = {3, 1};

    memset(&C, 0, sizeof C);
    /* requests */
    memset(&m, 0, sizeof m);
    m.from = 1;
    m.type = KQ_RAFT_VOTE_REQ;
    m.epoch = 3;
    m.u.vote_req.candidate_id = 1;
    m.u.vote_req.last_epoch = 2;
    m.u.vote_req.last_offset = 17;
    m.u.vote_req.pre_vote = true;
    assert_int_equal(kq_codec_encode_raft_request(&m, "kq-cluster", &b), 0);
    add(C.req, &C.n_req, b);
    m.type = KQ_RAFT_BEGIN_EPOCH_REQ;
    m.leader_id = 1;
    assert_int_equal(kq_codec_encode_raft_request(&m, "kq-cluster", &b), 0);
    add(C.req, &C.n_req, b);
    m.type = KQ_RAFT_END_EPOCH_REQ;
    m.u.end_req.n_preferred = 2;
    m.u.end_req.preferred[0] = 2;
    m.u.end_req.preferred[1] = 3;
    assert_int_equal(kq_codec_encode_raft_request(&m, "kq-cluster", &b), 0);
    add(C.req, &C.n_req, b);
    memset(&m.u, 0, sizeof m.u);
    m.type = KQ_RAFT_FETCH_REQ;
    m.u.fetch_req.fetch_offset = 300;
    m.u.fetch_req.last_fetched_epoch = 2;
    m.u.fetch_req.max_wait_ms = 500;
    assert_int_equal(kq_codec_encode_raft_request(&m, "kq-cluster", &b), 0);
    add(C.req, &C.n_req, b);
    assert_int_equal(kq_codec_encode_describe_request("kq-cluster", &b), 0);
    add(C.req, &C.n_req, b);
    assert_int_equal(kq_codec_encode_write_request("", recs, lens, 2, &b), 0);
    add(C.req, &C.n_req, b);

    /* payloads */
    assert_int_equal(kq_codec_append_leader_change(&p1, 1, voters, 3, voters, 2), 0);
    assert_int_equal(kq_codec_append_noop(&p1), 0);
    assert_int_equal(kq_codec_append_opaque(&p2, rec, sizeof rec), 0);

    /* responses */
    memset(&m, 0, sizeof m);
    m.type = KQ_RAFT_VOTE_RESP;
    m.leader_id = 1;
    m.epoch = 3;
    m.u.vote_resp.granted = true;
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), 0);
    add(C.resp, &C.n_resp, b);
    m.type = KQ_RAFT_BEGIN_EPOCH_RESP;
    m.error = KQ_ERR_FENCED_LEADER_EPOCH;
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), 0);
    add(C.resp, &C.n_resp, b);
    m.type = KQ_RAFT_END_EPOCH_RESP;
    m.error = 0;
    assert_int_equal(kq_codec_encode_raft_response(&m, NULL, 0, &b), 0);
    add(C.resp, &C.n_resp, b);
    memset(&m.u, 0, sizeof m.u);
    m.type = KQ_RAFT_FETCH_RESP;
    m.u.fetch_resp.high_watermark = 2;
    m.u.fetch_resp.diverging = true;
    m.u.fetch_resp.diverging_epoch = 1;
    m.u.fetch_resp.diverging_end_offset = 1;
    batches[0] = tu_batch(0, 1, 2, &p1);
    batches[1] = tu_batch(2, 3, 1, &p2);
    assert_int_equal(kq_codec_encode_raft_response(&m, batches, 2, &b), 0);
    add(C.resp, &C.n_resp, b);
    memset(&d, 0, sizeof d);
    strcpy(d.cluster_id, "kq-cluster");
    d.leader_id = 1;
    d.leader_epoch = 3;
    d.high_watermark = 3;
    d.n_voters = 2;
    d.voters[0].id = 1;
    strcpy(d.voters[0].directory_id, "AAAAAAAAAAAAAAAAAAAAAg");
    d.voters[1].id = 2;
    d.voters[1].log_end_offset = -1;
    d.n_observers = 1;
    d.observers[0].id = 10;
    d.n_nodes = 1;
    d.nodes[0].id = 1;
    strcpy(d.nodes[0].listener, "CONTROLLER");
    strcpy(d.nodes[0].host, "127.0.0.1");
    d.nodes[0].port = 9093;
    assert_int_equal(kq_codec_encode_describe_response(&d, &b), 0);
    add(C.resp, &C.n_resp, b);
    assert_int_equal(kq_codec_encode_write_response(5, 3, &b), 0);
    add(C.resp, &C.n_resp, b);
    assert_int_equal(kq_codec_encode_error_response(KQ_API_WRITE, KQ_ERR_NOT_CONTROLLER, "go away",
                                                    2, 3, "127.0.0.1:9093", &b),
                     0);
    add(C.resp, &C.n_resp, b);

    C.payload[C.n_payload++] = p1;
    C.payload[C.n_payload++] = p2;
}

static void free_corpus(void)
{
    for (size_t i = 0; i < C.n_req; i++)
        kq_buf_free(&C.req[i]);
    for (size_t i = 0; i < C.n_resp; i++)
        kq_buf_free(&C.resp[i]);
    for (size_t i = 0; i < C.n_payload; i++)
        kq_buf_free(&C.payload[i]);
}

static int setup(void **state)
{
    build_corpus();
    return 0;
}

static int teardown(void **state)
{
    free_corpus();
    return 0;
}

typedef struct stats {
    unsigned long ok, err;
} stats;

/* Decode `len` bytes (copied into an exact-size heap block so ASan sees any overread). */
static void try_request(const uint8_t *data, size_t len, stats *st)
{
    uint8_t *copy = malloc(len ? len : 1);
    kq_request r;
    char err[256] = "";
    int rc;

    assert_non_null(copy);
    if (len)
        memcpy(copy, data, len);
    rc = kq_codec_decode_request(copy, len, &r, err, sizeof err);
    free(copy); /* the decoded struct must not point into the input */
    if (rc == 0) {
        check_request_ok(&r);
        st->ok++;
    } else {
        if (!tu_is_decode_error(rc))
            fail_msg("decode_request returned %d (%s)", rc, err);
        assert_true(err[0] != '\0');
        assert_null(r.priv_);
        st->err++;
    }
    kq_request_free(&r);
}

static void try_response(const uint8_t *data, size_t len, stats *st)
{
    uint8_t *copy = malloc(len ? len : 1);
    kq_response r;
    char err[256] = "";
    int rc;

    assert_non_null(copy);
    if (len)
        memcpy(copy, data, len);
    rc = kq_codec_decode_response(copy, len, 4, &r, err, sizeof err);
    free(copy);
    if (rc == 0) {
        check_response_ok(&r, 4);
        st->ok++;
    } else {
        if (!tu_is_decode_error(rc))
            fail_msg("decode_response returned %d (%s)", rc, err);
        assert_true(err[0] != '\0');
        assert_null(r.priv_);
        st->err++;
    }
    kq_response_free(&r);
}

/* Garbage as a batch payload of `count` records: each one decodes (and renders) or is
 * refused with MALFORMED or INVALID_REQUEST; a refused one's body (after its length) is
 * described, as kq log-dump does, or refused. ok: every record decoded and the payload used
 * up. */
static void try_walk(const uint8_t *data, size_t len, int32_t count, stats *st)
{
    uint8_t *copy = malloc(len ? len : 1);
    char err[256], desc[512];
    size_t pos = 0;
    int32_t i;

    assert_non_null(copy);
    if (len)
        memcpy(copy, data, len);
    for (i = 0; i < count; i++) {
        kq_record r;
        size_t at = pos;
        int rc = kq_record_decode_next(copy, len, &pos, &r, err, sizeof err);

        if (rc) {
            uint64_t n;

            assert_true(rc == KQ_ERR_MALFORMED || rc == KQ_ERR_INVALID_REQUEST);
            assert_true(pos == at);
            if (kq_pb_read_varint(copy, len, &pos, &n) && n <= len - pos) {
                rc = kq_record_describe_raw(copy + pos, (size_t)n, desc, sizeof desc);
                assert_true(rc == 0 || rc == KQ_ERR_MALFORMED);
            }
            break;
        }
        assert_true(kq_record_render(&r, desc, sizeof desc) < sizeof desc);
        kq_record_free(&r);
    }
    free(copy);
    if (i == count && pos == len)
        st->ok++;
    else
        st->err++;
}

static void test_truncations(void **state)
{
    stats st = {0, 0};

    for (size_t i = 0; i < C.n_req; i++)
        for (size_t len = 0; len < C.req[i].len; len++)
            try_request(C.req[i].data, len, &st);
    for (size_t i = 0; i < C.n_resp; i++)
        for (size_t len = 0; len < C.resp[i].len; len++)
            try_response(C.resp[i].data, len, &st);
    /* a cut message can still parse (a trailing optional field dropped), but most must fail */
    assert_true(st.err > st.ok);
    /* the untruncated corpus itself decodes */
    st.ok = st.err = 0;
    for (size_t i = 0; i < C.n_req; i++)
        try_request(C.req[i].data, C.req[i].len, &st);
    for (size_t i = 0; i < C.n_resp; i++)
        try_response(C.resp[i].data, C.resp[i].len, &st);
    assert_int_equal(st.err, 0);
}

static void test_bit_flips(void **state)
{
    stats st = {0, 0};
    kq_buf b;
    unsigned long crc_caught = 0;

    for (size_t i = 0; i < C.n_req; i++) {
        b = C.req[i];
        for (size_t bit = 0; bit < b.len * 8; bit++) {
            b.data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            try_request(b.data, b.len, &st);
            b.data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
    }
    for (size_t i = 0; i < C.n_resp; i++) {
        b = C.resp[i];
        for (size_t bit = 0; bit < b.len * 8; bit++) {
            kq_response r;
            char err[256];

            b.data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            try_response(b.data, b.len, &st);
            if (kq_codec_decode_response(b.data, b.len, 4, &r, err, sizeof err) ==
                KQ_ERR_CORRUPT_MESSAGE)
                crc_caught++;
            kq_response_free(&r);
            b.data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
    }
    assert_true(st.ok > 0);
    assert_true(st.err > 0);
    /* flips inside batch payloads are caught by the CRC */
    assert_true(crc_caught > 0);
}

static void mutate(uint8_t *buf, size_t *len, size_t cap)
{
    int n = 1 + (int)rng_below(4);

    for (int k = 0; k < n; k++) {
        size_t pos = rng_below(*len ? *len : 1);

        switch (rng_below(7)) {
        case 0: /* flip a bit */
            if (*len)
                buf[pos] ^= (uint8_t)(1u << rng_below(8));
            break;
        case 1: /* random byte */
            if (*len)
                buf[pos] = (uint8_t)rng();
            break;
        case 2: /* interesting byte */
            if (*len) {
                static const uint8_t vals[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x0a, 0x12};
                buf[pos] = vals[rng_below(sizeof vals)];
            }
            break;
        case 3: /* truncate */
            *len = rng_below(*len + 1);
            break;
        case 4: /* insert a random byte */
            if (*len < cap) {
                memmove(buf + pos + 1, buf + pos, *len - pos);
                buf[pos] = (uint8_t)rng();
                (*len)++;
            }
            break;
        case 5: /* delete a byte */
            if (*len) {
                memmove(buf + pos, buf + pos + 1, *len - pos - 1);
                (*len)--;
            }
            break;
        default: /* duplicate a chunk at the end (protobuf merges repeated fields) */
            if (*len) {
                size_t from = rng_below(*len), n2 = rng_below(*len - from) + 1;
                if (*len + n2 <= cap) {
                    memmove(buf + *len, buf + from, n2);
                    *len += n2;
                }
            }
            break;
        }
    }
}

static void test_garbage(void **state)
{
    enum { CAP = 4096 };
    uint8_t buf[CAP];
    size_t len;
    stats req = {0, 0}, resp = {0, 0}, walk = {0, 0};

    for (long it = 0; it < GARBAGE_ITERATIONS; it++) {
        int mode = (int)rng_below(10);

        if (mode == 0) { /* pure random bytes */
            len = rng_below(256);
            for (size_t i = 0; i < len; i++)
                buf[i] = (uint8_t)rng();
        } else { /* a mutated corpus entry (requests, responses and payloads) */
            const kq_buf *src;
            size_t which = rng_below(C.n_req + C.n_resp + C.n_payload);

            if (which < C.n_req)
                src = &C.req[which];
            else if (which < C.n_req + C.n_resp)
                src = &C.resp[which - C.n_req];
            else
                src = &C.payload[which - C.n_req - C.n_resp];
            assert_true(src->len <= CAP);
            memcpy(buf, src->data, src->len);
            len = src->len;
            mutate(buf, &len, CAP);
        }
        try_request(buf, len, &req);
        try_response(buf, len, &resp);
        try_walk(buf, len, (int32_t)rng_below(4), &walk);
    }
    print_message("garbage: %d inputs; requests ok=%lu err=%lu; responses ok=%lu err=%lu; "
                  "walks ok=%lu err=%lu\n",
                  GARBAGE_ITERATIONS, req.ok, req.err, resp.ok, resp.err, walk.ok, walk.err);
    assert_int_equal(req.ok + req.err, GARBAGE_ITERATIONS);
    assert_int_equal(resp.ok + resp.err, GARBAGE_ITERATIONS);
    /* the mutator must reach both outcomes, or it is not testing validation */
    assert_true(req.ok > 0 && req.err > 0);
    assert_true(resp.ok > 0 && resp.err > 0);
    assert_true(walk.ok > 0 && walk.err > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_bit_flips),
        cmocka_unit_test(test_garbage),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
