/*
 * Hostile input: every truncation and every single-bit flip of a valid encoding of each
 * data-plane message, then 100,000 deterministic mutated buffers (bit flips, byte overwrites,
 * truncations, splices, insertions) and 20,000 random buffers, each through all five
 * decoders. Each input must give an error with a message, or a decode whose result passes the
 * documented rules (checked here independently); never a crash, which ASan/UBSan
 * (-DKQ_SANITIZE=ON) would turn into a failure.
 */
#include <stdio.h>
#include <stdlib.h>

#include "datacodec_testutil.h"
#include "kq/util.h"

#define MUTATED_ITERATIONS 100000
#define RANDOM_ITERATIONS 20000
#define N_DECODERS 5 /* request, Produce, Fetch, ListOffsets, Metadata responses */

/* The project's splitmix64 (kq/util.h), seeded here: the same sequence every run. */
static kq_prng rng_state = {0x646174617072746full};

static uint64_t rng(void)
{
    return kq_prng_next(&rng_state);
}

static size_t rng_below(size_t n)
{
    return n ? (size_t)(rng() % n) : 0;
}

typedef struct counts {
    size_t ok, rejected;
} counts;

static bool zero16(const uint8_t *id)
{
    for (int i = 0; i < 16; i++)
        if (id[i])
            return false;
    return true;
}

static bool producer_ok(int64_t pid, int32_t e, int32_t s)
{
    if (pid == -1)
        return e == -1 && s == -1;
    return pid >= 0 && e >= 0 && e <= 32767 && s >= 0;
}

static void check_request_ok(const kq_data_request *r)
{
    assert_non_null(r->priv_);
    assert_true(r->sender_id >= -1);
    assert_true(strlen(r->cluster_id) <= KQ_CODEC_MAX_CLUSTER_ID);
    if (r->api_key == KQ_API_PRODUCE) {
        const kq_produce_request *p = &r->u.produce;
        size_t total = 0;

        assert_false(zero16(p->topic_id));
        assert_true(p->partition >= 0);
        assert_true(p->acks >= -1 && p->acks <= 1);
        assert_true(p->timeout_ms >= 0);
        assert_true(producer_ok(p->producer_id, p->producer_epoch, p->base_sequence));
        assert_true(p->n_records >= 1 && p->n_records <= KQ_DATA_MAX_RECORDS);
        for (size_t i = 0; i < p->n_records; i++) {
            assert_non_null(p->records[i]);
            assert_true(p->record_lens[i] <= KQ_DATA_MAX_RECORD_BYTES);
            total += p->record_lens[i];
            if (p->record_lens[i]) /* touch the bytes so ASan sees any bad pointer */
                assert_true(p->records[i][p->record_lens[i] - 1] ==
                            p->records[i][p->record_lens[i] - 1]);
        }
        assert_true(total <= KQ_DATA_MAX_PRODUCE_BYTES);
    } else if (r->api_key == KQ_API_LIST_OFFSETS) {
        const kq_list_offsets_request *l = &r->u.list_offsets;

        assert_true(l->replica_id == -1 || l->replica_id == r->sender_id);
        assert_true(l->n_partitions >= 1 && l->n_partitions <= KQ_DATA_MAX_FETCH_PARTITIONS);
        for (size_t i = 0; i < l->n_partitions; i++) {
            const kq_list_offsets_partition *p = &l->partitions[i];

            assert_false(zero16(p->topic_id));
            assert_true(p->partition >= 0 && p->current_leader_epoch >= -1);
            assert_true(p->timestamp == -1 || p->timestamp == -2);
            for (size_t j = 0; j < i; j++)
                assert_false(memcmp(p->topic_id, l->partitions[j].topic_id, 16) == 0 &&
                             p->partition == l->partitions[j].partition);
        }
    } else if (r->api_key == KQ_API_METADATA) {
        const kq_data_metadata_request *m = &r->u.metadata;

        assert_true(m->n_topics <= KQ_DATA_MAX_METADATA_TOPICS);
        for (size_t i = 0; i < m->n_topics; i++) {
            size_t n = strlen(m->topics[i]);

            assert_true(n >= 1 && n <= KQ_DATA_MAX_TOPIC_NAME);
            for (size_t j = 0; j < i; j++)
                assert_true(strcmp(m->topics[i], m->topics[j]) != 0);
        }
    } else {
        const kq_data_fetch_request *f = &r->u.fetch;

        assert_int_equal(r->api_key, KQ_API_DATA_FETCH);
        assert_true(f->replica_id >= -1);
        if (f->replica_id == -1)
            assert_true(f->broker_epoch == -1);
        else
            assert_true(f->replica_id == r->sender_id && f->broker_epoch >= 0);
        assert_true(f->max_wait_ms >= 0 && f->min_bytes >= 0 && f->max_bytes > 0);
        assert_true(f->n_partitions >= 1 && f->n_partitions <= KQ_DATA_MAX_FETCH_PARTITIONS);
        for (size_t i = 0; i < f->n_partitions; i++) {
            const kq_data_fetch_partition *p = &f->partitions[i];

            assert_false(zero16(p->topic_id));
            assert_true(p->partition >= 0 && p->current_leader_epoch >= -1);
            assert_true(p->fetch_offset >= 0 && p->last_fetched_epoch >= -1);
            assert_true(p->log_start_offset >= -1 && p->log_start_offset <= p->fetch_offset);
            assert_true(p->partition_max_bytes > 0);
            for (size_t j = 0; j < i; j++)
                assert_false(memcmp(p->topic_id, f->partitions[j].topic_id, 16) == 0 &&
                             p->partition == f->partitions[j].partition);
        }
    }
}

static void check_produce_response_ok(const kq_produce_response *r)
{
    assert_true(r->error >= 0);
    assert_true(strlen(r->error_message) <= KQ_DATA_MAX_ERROR_MESSAGE);
    if (r->error == 0)
        assert_true(r->base_offset >= 0 && r->log_start_offset >= 0 &&
                    r->log_start_offset <= r->base_offset);
    else
        assert_true(r->base_offset >= -1 && r->log_start_offset >= -1);
}

static void check_fetch_response_ok(const kq_data_fetch_response *r)
{
    assert_true(r->error >= 0);
    assert_true(r->n_partitions <= KQ_DATA_MAX_FETCH_PARTITIONS);
    if (r->error)
        assert_int_equal(r->n_partitions, 0);
    for (size_t i = 0; i < r->n_partitions; i++) {
        const kq_data_fetch_partition_result *p = &r->partitions[i];

        assert_false(zero16(p->topic_id));
        assert_true(p->partition >= 0 && p->error >= 0);
        if (p->error == 0)
            assert_true(p->log_start_offset >= 0 && p->log_start_offset <= p->high_watermark);
        else
            assert_int_equal(p->n_batches, 0);
        if (p->diverging_epoch != -1) {
            assert_true(p->diverging_epoch >= 0 && p->diverging_end_offset >= 0);
            assert_int_equal(p->n_batches, 0);
        }
        assert_true(p->current_leader_id >= -1 && p->current_leader_epoch >= -1);
        for (size_t j = 0; j < p->n_batches; j++) {
            const kq_data_batch *b = &p->batches[j];

            assert_true(b->base_offset >= 0 && b->leader_epoch >= 0 && b->count >= 1);
            assert_true(producer_ok(b->producer_id, b->producer_epoch, b->base_sequence));
            assert_int_equal(kq_data_batch_crc(b), b->crc32c);
            if (j > 0) {
                assert_true(b->base_offset ==
                            p->batches[j - 1].base_offset + p->batches[j - 1].count);
                assert_true(b->leader_epoch >= p->batches[j - 1].leader_epoch);
            }
        }
    }
}

static void check_list_offsets_response_ok(const kq_list_offsets_response *r)
{
    assert_true(r->error >= 0 && r->n_partitions <= KQ_DATA_MAX_FETCH_PARTITIONS);
    if (r->error)
        assert_int_equal(r->n_partitions, 0);
    for (size_t i = 0; i < r->n_partitions; i++) {
        const kq_list_offsets_partition_result *p = &r->partitions[i];

        assert_false(zero16(p->topic_id));
        assert_true(p->partition >= 0 && p->error >= 0 && p->leader_epoch >= -1);
        assert_true(p->offset >= (p->error ? -1 : 0));
    }
}

static bool in_ids(int32_t id, const int32_t *ids, int n)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

static void check_metadata_response_ok(const kq_data_metadata_response *r)
{
    assert_true(r->error >= 0);
    assert_true(r->n_brokers <= KQ_DATA_MAX_METADATA_BROKERS);
    assert_true(r->n_topics <= KQ_DATA_MAX_METADATA_TOPICS);
    if (r->error)
        assert_true(r->n_brokers == 0 && r->n_topics == 0);
    for (size_t i = 0; i < r->n_brokers; i++) {
        const kq_data_metadata_broker *b = &r->brokers[i];
        size_t hl = strlen(b->host);

        assert_true(b->id >= 0 && b->port >= 1 && b->port <= 65535);
        assert_true(hl >= 1 && hl < KQ_CODEC_MAX_ENDPOINT);
        assert_true(!b->rack || strlen(b->rack) <= KQ_DATA_MAX_RACK);
        for (size_t j = 0; j < i; j++)
            assert_true(r->brokers[j].id != b->id);
    }
    for (size_t i = 0; i < r->n_topics; i++) {
        const kq_data_metadata_topic *t = &r->topics[i];
        size_t nl = strlen(t->name);

        assert_true(nl >= 1 && nl <= KQ_DATA_MAX_TOPIC_NAME && t->error >= 0);
        if (t->error)
            assert_int_equal(t->n_partitions, 0);
        else
            assert_false(zero16(t->topic_id));
        for (size_t j = 0; j < i; j++)
            assert_true(strcmp(r->topics[j].name, t->name) != 0);
        for (size_t j = 0; j < t->n_partitions; j++) {
            const kq_data_metadata_partition *p = &t->partitions[j];

            assert_true(p->partition >= 0 && p->error >= 0);
            assert_true(p->leader_id >= -1 && p->leader_epoch >= -1);
            assert_true(p->n_replicas >= 0 && p->n_replicas <= KQ_DATA_MAX_METADATA_REPLICAS);
            assert_true(p->n_isr >= 0 && p->n_isr <= p->n_replicas);
            for (int k = 0; k < p->n_replicas; k++) {
                assert_true(p->replicas[k] >= 0);
                assert_false(in_ids(p->replicas[k], p->replicas, k));
            }
            for (int k = 0; k < p->n_isr; k++) {
                assert_true(in_ids(p->isr[k], p->replicas, p->n_replicas));
                assert_false(in_ids(p->isr[k], p->isr, k));
            }
            assert_true(p->leader_id == -1 || in_ids(p->leader_id, p->replicas, p->n_replicas));
            for (size_t k = 0; k < j; k++)
                assert_true(t->partitions[k].partition != p->partition);
        }
    }
}

/* Runs buf through every decoder and checks the outcome. */
static void feed(const uint8_t *buf, size_t len, counts *c)
{
    char err[512];
    int rc;

    kq_data_request rq;
    err[0] = 0;
    rc = kq_data_decode_request(buf, len, &rq, err, sizeof err);
    if (rc == 0) {
        check_request_ok(&rq);
        c->ok++;
    } else {
        assert_true(err[0] != 0);
        assert_null(rq.priv_);
        c->rejected++;
    }
    kq_data_request_free(&rq);

    kq_produce_response pr;
    err[0] = 0;
    rc = kq_data_decode_produce_response(buf, len, &pr, err, sizeof err);
    if (rc == 0) {
        check_produce_response_ok(&pr);
        c->ok++;
    } else {
        assert_true(err[0] != 0);
        c->rejected++;
    }

    kq_data_fetch_response fr;
    err[0] = 0;
    rc = kq_data_decode_fetch_response(buf, len, &fr, err, sizeof err);
    if (rc == 0) {
        check_fetch_response_ok(&fr);
        c->ok++;
    } else {
        assert_true(err[0] != 0);
        assert_null(fr.priv_);
        c->rejected++;
    }
    kq_data_fetch_response_free(&fr);

    kq_list_offsets_response lr;
    err[0] = 0;
    rc = kq_data_decode_list_offsets_response(buf, len, &lr, err, sizeof err);
    if (rc == 0) {
        check_list_offsets_response_ok(&lr);
        c->ok++;
    } else {
        assert_true(err[0] != 0);
        assert_null(lr.priv_);
        c->rejected++;
    }
    kq_data_list_offsets_response_free(&lr);

    kq_data_metadata_response mr;
    err[0] = 0;
    rc = kq_data_decode_metadata_response(buf, len, &mr, err, sizeof err);
    if (rc == 0) {
        check_metadata_response_ok(&mr);
        c->ok++;
    } else {
        assert_true(err[0] != 0);
        assert_null(mr.priv_);
        c->rejected++;
    }
    kq_data_metadata_response_free(&mr);
}

#define N_SEEDS 10

static void make_seeds(kq_buf seeds[N_SEEDS])
{
    kq_produce_request p = example_produce();
    kq_data_fetch_partition fp[2];
    kq_data_fetch_request f = example_fetch(fp, true);
    kq_data_fetch_partition_result rp[3];
    kq_data_batch bt[3];
    kq_data_fetch_response r = example_fetch_response(rp, bt);
    kq_produce_response ok = {.base_offset = 77, .log_start_offset = 5};

    assert_int_equal(kq_data_encode_produce_request(TEST_CLUSTER, 1, &p, &seeds[0]), 0);
    assert_int_equal(kq_data_encode_fetch_request(TEST_CLUSTER, 2, &f, &seeds[1]), 0);
    assert_int_equal(kq_data_encode_fetch_response(&r, &seeds[2]), 0);
    assert_int_equal(kq_data_encode_produce_response(&ok, &seeds[3]), 0);
    f = example_fetch(fp, false);
    assert_int_equal(kq_data_encode_fetch_request(TEST_CLUSTER, -1, &f, &seeds[4]), 0);
    assert_int_equal(kq_codec_encode_error_response(KQ_API_PRODUCE, KQ_ERR_NOT_LEADER_OR_FOLLOWER,
                                                    "moved", 2, 4, "h:1", &seeds[5]),
                     0);
    kq_list_offsets_partition lp[2];
    kq_list_offsets_request lq = example_list_offsets(lp);
    assert_int_equal(kq_data_encode_list_offsets_request(TEST_CLUSTER, -1, &lq, &seeds[6]), 0);
    kq_list_offsets_partition_result lrp[2];
    kq_list_offsets_response lrs = example_list_offsets_response(lrp);
    assert_int_equal(kq_data_encode_list_offsets_response(&lrs, &seeds[7]), 0);
    kq_data_metadata_request mq = example_metadata_request();
    assert_int_equal(kq_data_encode_metadata_request("", -1, &mq, &seeds[8]), 0);
    kq_data_metadata_broker mb[3];
    kq_data_metadata_topic mt[3];
    kq_data_metadata_partition mp[2];
    kq_data_metadata_response mrs = example_metadata_response(mb, mt, mp);
    assert_int_equal(kq_data_encode_metadata_response(&mrs, &seeds[9]), 0);
}

static void free_seeds(kq_buf seeds[N_SEEDS])
{
    for (int i = 0; i < N_SEEDS; i++)
        kq_buf_free(&seeds[i]);
}

static void test_truncations_and_bit_flips(void **state)
{
    (void)state;
    kq_buf seeds[N_SEEDS];
    counts c = {0};

    make_seeds(seeds);
    for (int s = 0; s < N_SEEDS; s++) {
        const kq_buf *sd = &seeds[s];
        uint8_t *buf = malloc(sd->len);

        assert_non_null(buf);
        for (size_t n = 0; n < sd->len; n++) {
            memcpy(buf, sd->data, n); /* exact-size copy so ASan catches over-reads */
            feed(buf, n, &c);
        }
        for (size_t bit = 0; bit < sd->len * 8; bit++) {
            memcpy(buf, sd->data, sd->len);
            buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            feed(buf, sd->len, &c);
        }
        free(buf);
    }
    /* The untouched seeds decode (each by exactly the decoder for its type). */
    counts v = {0};
    for (int s = 0; s < N_SEEDS; s++)
        feed(seeds[s].data, seeds[s].len, &v);
    assert_int_equal(v.ok, N_SEEDS);
    printf("truncations and bit flips: %zu decodes accepted, %zu rejected\n", c.ok, c.rejected);
    assert_true(c.rejected > 0);
    free_seeds(seeds);
}

static void test_mutated_buffers(void **state)
{
    (void)state;
    kq_buf seeds[N_SEEDS];
    counts c = {0};
    size_t cap = 4096;
    uint8_t *buf = malloc(cap);

    assert_non_null(buf);
    make_seeds(seeds);
    for (int it = 0; it < MUTATED_ITERATIONS; it++) {
        const kq_buf *sd = &seeds[rng_below(N_SEEDS)];
        size_t len = sd->len;

        assert_true(len + 64 <= cap);
        memcpy(buf, sd->data, len);
        int edits = 1 + (int)rng_below(4);
        for (int e = 0; e < edits; e++) {
            switch (rng_below(6)) {
            case 0: /* bit flip */
                if (len)
                    buf[rng_below(len)] ^= (uint8_t)(1u << rng_below(8));
                break;
            case 1: /* byte overwrite with an interesting value */
            {
                static const uint8_t vals[] = {0, 1, 0x7f, 0x80, 0xff, 0xfe};
                if (len)
                    buf[rng_below(len)] = vals[rng_below(sizeof vals)];
                break;
            }
            case 2: /* truncate */
                len = rng_below(len + 1);
                break;
            case 3: /* insert random bytes */
            {
                size_t at = rng_below(len + 1), n = 1 + rng_below(8);
                if (len + n > cap - 8)
                    break;
                memmove(buf + at + n, buf + at, len - at);
                for (size_t k = 0; k < n; k++)
                    buf[at + k] = (uint8_t)rng();
                len += n;
                break;
            }
            case 4: /* splice a piece of another seed */
            {
                const kq_buf *o = &seeds[rng_below(N_SEEDS)];
                size_t from = rng_below(o->len), n = rng_below(o->len - from + 1);
                size_t at = rng_below(len + 1);
                if (at + n > cap - 8)
                    break;
                memcpy(buf + at, o->data + from, n);
                if (at + n > len)
                    len = at + n;
                break;
            }
            default: /* delete a range */
            {
                if (!len)
                    break;
                size_t at = rng_below(len), n = 1 + rng_below(len - at);
                memmove(buf + at, buf + at + n, len - at - n);
                len -= n;
                break;
            }
            }
        }
        /* exact-size copy so ASan catches over-reads */
        uint8_t *exact = malloc(len ? len : 1);
        assert_non_null(exact);
        memcpy(exact, buf, len);
        feed(exact, len, &c);
        free(exact);
    }
    printf("mutated: %zu decodes accepted, %zu rejected\n", c.ok, c.rejected);
    assert_int_equal(c.ok + c.rejected, (size_t)MUTATED_ITERATIONS * N_DECODERS);
    assert_true(c.rejected > (size_t)MUTATED_ITERATIONS); /* most mutations are caught */
    free(buf);
    free_seeds(seeds);
}

static void test_random_buffers(void **state)
{
    (void)state;
    counts c = {0};

    for (int it = 0; it < RANDOM_ITERATIONS; it++) {
        size_t len = rng_below(200);
        uint8_t *buf = malloc(len ? len : 1);

        assert_non_null(buf);
        for (size_t k = 0; k < len; k++)
            buf[k] = (uint8_t)rng();
        feed(buf, len, &c);
        free(buf);
    }
    printf("random: %zu decodes accepted, %zu rejected\n", c.ok, c.rejected);
    assert_int_equal(c.ok + c.rejected, (size_t)RANDOM_ITERATIONS * N_DECODERS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncations_and_bit_flips),
        cmocka_unit_test(test_mutated_buffers),
        cmocka_unit_test(test_random_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
