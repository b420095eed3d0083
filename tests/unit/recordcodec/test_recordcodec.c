/*
 * kq_recordcodec: kq_record <-> kq.Record bytes round trips for every record type, decode
 * validation errors, rendering for kq log-dump, batch replay, and snapshots (image -> records
 * -> image gives the same hash and the same bytes; rollback restores the exact snapshot).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../image/image_gen.h"
#include "kq/codec.h"
#include "kq/error.h"
#include "kq/image.h"
#include "kq/records.h"

#include "kq_record.pb-c.h"

static char err[256];

/* kq_buf_free lives in kq_codec, which this test does not link. */
static void buf_free(kq_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

static void assert_ids_eq(const kq_rec_ids *a, const kq_rec_ids *b)
{
    assert_int_equal(a->n, b->n);
    for (int32_t i = 0; i < a->n; i++)
        assert_int_equal(a->ids[i], b->ids[i]);
}

static void assert_str_eq(const char *a, const char *b)
{
    if (!a || !b)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

/* Field-by-field equality of two records. */
static void assert_rec_eq(const kq_record *a, const kq_record *b)
{
    assert_int_equal(a->type, b->type);
    switch (a->type) {
    case KQ_REC_LEADER_CHANGE:
        assert_int_equal(a->leader_change.leader_id, b->leader_change.leader_id);
        assert_ids_eq(&a->leader_change.voters, &b->leader_change.voters);
        assert_ids_eq(&a->leader_change.granting_voters, &b->leader_change.granting_voters);
        break;
    case KQ_REC_KRAFT_VERSION:
        assert_int_equal(a->kraft_version.kraft_version, b->kraft_version.kraft_version);
        break;
    case KQ_REC_VOTERS:
        assert_int_equal(a->voters.unsafe_recovery, b->voters.unsafe_recovery);
        assert_int_equal(a->voters.n_voters, b->voters.n_voters);
        assert_memory_equal(a->voters.voters, b->voters.voters,
                            (size_t)a->voters.n_voters * sizeof a->voters.voters[0]);
        break;
    case KQ_REC_OPAQUE:
        assert_int_equal(a->opaque.len, b->opaque.len);
        assert_memory_equal(a->opaque.data, b->opaque.data, a->opaque.len);
        break;
    case KQ_REC_REGISTER_BROKER: {
        const kq_rec_register_broker *x = &a->register_broker, *y = &b->register_broker;

        assert_int_equal(x->broker_id, y->broker_id);
        assert_memory_equal(x->incarnation_id, y->incarnation_id, 16);
        assert_int_equal(x->broker_epoch, y->broker_epoch);
        assert_int_equal(x->n_endpoints, y->n_endpoints);
        for (int32_t i = 0; i < x->n_endpoints; i++) {
            assert_string_equal(x->endpoints[i].name, y->endpoints[i].name);
            assert_string_equal(x->endpoints[i].host, y->endpoints[i].host);
            assert_int_equal(x->endpoints[i].port, y->endpoints[i].port);
        }
        assert_str_eq(x->rack, y->rack);
        assert_int_equal(x->fenced, y->fenced);
        assert_int_equal(x->in_controlled_shutdown, y->in_controlled_shutdown);
        assert_int_equal(x->registration_offset, y->registration_offset);
        break;
    }
    case KQ_REC_UNREGISTER_BROKER:
        assert_int_equal(a->unregister_broker.broker_id, b->unregister_broker.broker_id);
        assert_int_equal(a->unregister_broker.broker_epoch, b->unregister_broker.broker_epoch);
        break;
    case KQ_REC_BROKER_REGISTRATION_CHANGE:
        assert_int_equal(a->broker_change.broker_id, b->broker_change.broker_id);
        assert_int_equal(a->broker_change.broker_epoch, b->broker_change.broker_epoch);
        assert_int_equal(a->broker_change.fenced, b->broker_change.fenced);
        assert_int_equal(a->broker_change.in_controlled_shutdown,
                         b->broker_change.in_controlled_shutdown);
        break;
    case KQ_REC_TOPIC:
        assert_string_equal(a->topic.name, b->topic.name);
        assert_memory_equal(a->topic.topic_id, b->topic.topic_id, 16);
        break;
    case KQ_REC_PARTITION: {
        const kq_rec_partition *x = &a->partition, *y = &b->partition;

        assert_int_equal(x->partition_id, y->partition_id);
        assert_memory_equal(x->topic_id, y->topic_id, 16);
        assert_ids_eq(&x->replicas, &y->replicas);
        assert_ids_eq(&x->isr, &y->isr);
        assert_ids_eq(&x->elr, &y->elr);
        assert_ids_eq(&x->last_known_elr, &y->last_known_elr);
        assert_int_equal(x->leader, y->leader);
        assert_int_equal(x->leader_recovery_state, y->leader_recovery_state);
        assert_int_equal(x->leader_epoch, y->leader_epoch);
        assert_int_equal(x->partition_epoch, y->partition_epoch);
        break;
    }
    case KQ_REC_PARTITION_CHANGE: {
        const kq_rec_partition_change *x = &a->partition_change, *y = &b->partition_change;

        assert_int_equal(x->partition_id, y->partition_id);
        assert_memory_equal(x->topic_id, y->topic_id, 16);
        assert_int_equal(x->has_replicas, y->has_replicas);
        assert_int_equal(x->has_isr, y->has_isr);
        assert_int_equal(x->has_elr, y->has_elr);
        assert_int_equal(x->has_last_known_elr, y->has_last_known_elr);
        if (x->has_replicas)
            assert_ids_eq(&x->replicas, &y->replicas);
        if (x->has_isr)
            assert_ids_eq(&x->isr, &y->isr);
        if (x->has_elr)
            assert_ids_eq(&x->elr, &y->elr);
        if (x->has_last_known_elr)
            assert_ids_eq(&x->last_known_elr, &y->last_known_elr);
        assert_int_equal(x->leader, y->leader);
        assert_int_equal(x->leader_recovery_state, y->leader_recovery_state);
        break;
    }
    case KQ_REC_REMOVE_TOPIC:
        assert_memory_equal(a->remove_topic.topic_id, b->remove_topic.topic_id, 16);
        break;
    case KQ_REC_CONFIG:
        assert_int_equal(a->config.resource_type, b->config.resource_type);
        assert_string_equal(a->config.resource_name, b->config.resource_name);
        assert_string_equal(a->config.name, b->config.name);
        assert_str_eq(a->config.value, b->config.value);
        break;
    case KQ_REC_FEATURE_LEVEL:
        assert_string_equal(a->feature_level.name, b->feature_level.name);
        assert_int_equal(a->feature_level.level, b->feature_level.level);
        break;
    default:
        break;
    }
}

/* A VotersRecord of n voters 3001.. (owning its array), every field set. */
static kq_record rec_voters(int n, bool unsafe_recovery)
{
    kq_record r = {.type = KQ_REC_VOTERS};

    r.voters.voters = calloc((size_t)n, sizeof *r.voters.voters);
    assert_non_null(r.voters.voters);
    r.voters.n_voters = n;
    r.voters.unsafe_recovery = unsafe_recovery;
    for (int i = 0; i < n; i++) {
        kq_voter *v = &r.voters.voters[i];

        v->key.id = 3001 + i;
        memset(v->key.dir, 0x10 + i, sizeof v->key.dir);
        snprintf(v->host, sizeof v->host, "controller-%d.example", i);
        v->port = 9093 + i;
        v->kraft_min = 0;
        v->kraft_max = 1;
    }
    return r;
}

/* One record of every type (each owns its memory). */
static int sample_records(kq_record *out)
{
    static const int32_t r123[] = {1, 2, 3}, r12[] = {1, 2}, r3[] = {3}, v[] = {1, 2, 3};
    int n = 0;
    kq_record r;

    r = (kq_record){.type = KQ_REC_LEADER_CHANGE};
    r.leader_change.leader_id = 2;
    r.leader_change.voters = gen_list(v, 3);
    r.leader_change.granting_voters = gen_list(v, 2);
    out[n++] = r;
    out[n++] = (kq_record){.type = KQ_REC_NOOP};
    r = (kq_record){.type = KQ_REC_OPAQUE};
    r.opaque.data = malloc(3);
    memcpy(r.opaque.data, "abc", 3);
    r.opaque.len = 3;
    out[n++] = r;
    out[n] = rec_register(4, 77, "rack-b");
    out[n].register_broker.in_controlled_shutdown = true;
    out[n++].register_broker.registration_offset = 12;
    out[n++] = rec_register(5, 0, NULL);
    out[n++] = rec_unregister(4, 77);
    out[n++] = rec_broker_change(4, 77, KQ_FENCE_UNFENCE, 1);
    out[n++] = rec_broker_change(4, 77, KQ_FENCE_FENCE, 0);
    out[n++] = rec_topic("orders", 3);
    out[n] = rec_partition(3, 0, r123, 3, r12, 2, 1);
    free(out[n].partition.elr.ids);
    out[n].partition.elr = gen_list(r3, 1);
    out[n].partition.leader_epoch = 7;
    out[n].partition.partition_epoch = 9;
    out[n++].partition.leader_recovery_state = KQ_RECOVERY_RECOVERING;
    out[n++] = rec_partition(3, 1, r123, 3, NULL, 0, KQ_NO_LEADER);
    /* PartitionChange: nothing set, then empty lists (present but empty) and leader -1. */
    out[n++] = rec_change(3, 0);
    out[n] = rec_change(3, 0);
    out[n].partition_change.has_isr = true;
    out[n].partition_change.isr = gen_list(NULL, 0);
    out[n].partition_change.has_elr = true;
    out[n].partition_change.elr = gen_list(r3, 1);
    out[n].partition_change.has_last_known_elr = true;
    out[n].partition_change.last_known_elr = gen_list(NULL, 0);
    out[n].partition_change.leader = KQ_NO_LEADER;
    out[n++].partition_change.leader_recovery_state = KQ_RECOVERY_RECOVERED;
    out[n] = rec_change(3, 1);
    out[n].partition_change.has_replicas = true;
    out[n].partition_change.replicas = gen_list(r12, 2);
    out[n++].partition_change.leader = 2;
    out[n++] = rec_remove_topic(3);
    out[n++] = rec_config(KQ_CONFIG_RESOURCE_TOPIC, "orders", "retention.ms", "100");
    out[n++] = rec_config(KQ_CONFIG_RESOURCE_BROKER, "", "min.insync.replicas", NULL);
    out[n++] = rec_feature("metadata.version", 22);
    out[n] = (kq_record){.type = KQ_REC_KRAFT_VERSION};
    out[n++].kraft_version.kraft_version = 1;
    out[n++] = rec_voters(3, false);
    out[n++] = rec_voters(1, true);
    return n;
}

static void test_round_trip(void **state)
{
    kq_record recs[32];
    int n = sample_records(recs);
    kq_buf batch = {0};
    size_t pos = 0;

    (void)state;
    for (int i = 0; i < n; i++) {
        kq_buf one = {0};
        kq_record back;

        assert_int_equal(kq_record_encode(&recs[i], &one, err, sizeof err), 0);
        assert_int_equal(kq_record_decode(one.data, one.len, &back, err, sizeof err), 0);
        assert_rec_eq(&recs[i], &back);
        kq_record_free(&back);
        buf_free(&one);
        assert_int_equal(kq_record_append(&batch, &recs[i], err, sizeof err), 0);
    }
    /* The same records back from one length-prefixed batch payload. */
    for (int i = 0; i < n; i++) {
        kq_record back;

        assert_int_equal(kq_record_decode_next(batch.data, batch.len, &pos, &back, err, sizeof err),
                         0);
        assert_rec_eq(&recs[i], &back);
        kq_record_free(&back);
    }
    assert_int_equal(pos, batch.len);
    /* A deep copy is equal and independent. */
    for (int i = 0; i < n; i++) {
        kq_record copy;

        assert_int_equal(kq_record_copy(&copy, &recs[i]), 0);
        assert_rec_eq(&recs[i], &copy);
        kq_record_free(&copy);
        kq_record_free(&recs[i]);
    }
    buf_free(&batch);
}

static void pack_raw(const Kq__Record *m, kq_buf *out)
{
    out->len = kq__record__get_packed_size(m);
    out->data = malloc(out->len + 1);
    kq__record__pack(m, out->data);
}

static int decode_raw(const Kq__Record *m)
{
    kq_buf b;
    kq_record r;
    int rc;

    pack_raw(m, &b);
    rc = kq_record_decode(b.data, b.len, &r, err, sizeof err);
    buf_free(&b);
    if (!rc)
        kq_record_free(&r);
    return rc;
}

static void test_decode_errors(void **state)
{
    static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0x01, 0x02};
    static uint8_t id16[16] = {1, 2, 3}, id15[15] = {1};
    int32_t many[KQ_REC_MAX_REPLICAS + 1] = {0};
    Kq__Record m = KQ__RECORD__INIT;
    Kq__TopicRecord t = KQ__TOPIC_RECORD__INIT;
    Kq__PartitionRecord p = KQ__PARTITION_RECORD__INIT;
    Kq__ConfigRecord c = KQ__CONFIG_RECORD__INIT;
    Kq__FeatureLevelRecord f = KQ__FEATURE_LEVEL_RECORD__INIT;
    kq_record r;
    size_t pos = 0;

    (void)state;
    assert_int_equal(kq_record_decode(garbage, sizeof garbage, &r, err, sizeof err),
                     KQ_ERR_MALFORMED);
    assert_int_equal(r.type, KQ_REC_NOOP);
    /* No body. */
    assert_int_equal(decode_raw(&m), KQ_ERR_MALFORMED);
    assert_non_null(strstr(err, "no known body"));

    m.body_case = KQ__RECORD__BODY_TOPIC;
    m.topic = &t;
    t.name = "good";
    t.topic_id = (ProtobufCBinaryData){15, id15};
    assert_int_equal(decode_raw(&m), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "16"));
    t.topic_id = (ProtobufCBinaryData){16, id16};
    assert_int_equal(decode_raw(&m), 0);
    t.name = "bad/name";
    assert_int_equal(decode_raw(&m), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "topic name"));
    t.name = "..";
    assert_int_equal(decode_raw(&m), KQ_ERR_INVALID_REQUEST);
    {
        /* A NUL inside a string would be cut silently by protobuf-c: rejected instead. */
        kq_buf b;
        uint8_t *at;

        t.name = "abXdef";
        pack_raw(&m, &b);
        at = memchr(b.data, 'X', b.len);
        *at = '\0';
        assert_int_equal(kq_record_decode(b.data, b.len, &r, err, sizeof err), KQ_ERR_MALFORMED);
        assert_non_null(strstr(err, "NUL"));
        buf_free(&b);
    }
    {
        /* Also two messages down: an endpoint's host inside a RegisterBrokerRecord. */
        Kq__Record rm = KQ__RECORD__INIT;
        Kq__RegisterBrokerRecord rb = KQ__REGISTER_BROKER_RECORD__INIT;
        Kq__RegisterBrokerRecord__Endpoint ep = KQ__REGISTER_BROKER_RECORD__ENDPOINT__INIT;
        Kq__RegisterBrokerRecord__Endpoint *eps[] = {&ep};
        kq_buf b;
        uint8_t *at;

        ep.name = "PLAINTEXT";
        ep.host = "hostXname";
        ep.port = 9092;
        rb.broker_id = 1;
        rb.incarnation_id = (ProtobufCBinaryData){16, id16};
        rb.n_endpoints = 1;
        rb.endpoints = eps;
        rm.body_case = KQ__RECORD__BODY_REGISTER_BROKER;
        rm.register_broker = &rb;
        pack_raw(&rm, &b);
        assert_int_equal(kq_record_decode(b.data, b.len, &r, err, sizeof err), 0);
        kq_record_free(&r);
        at = memchr(b.data, 'X', b.len);
        *at = '\0';
        assert_int_equal(kq_record_decode(b.data, b.len, &r, err, sizeof err), KQ_ERR_MALFORMED);
        assert_non_null(strstr(err, "NUL"));
        buf_free(&b);
    }

    m.body_case = KQ__RECORD__BODY_PARTITION;
    m.partition = &p;
    p.topic_id = (ProtobufCBinaryData){16, id16};
    p.n_replicas = KQ_REC_MAX_REPLICAS + 1;
    p.replicas = many;
    assert_int_equal(decode_raw(&m), KQ_ERR_INVALID_REQUEST);
    for (int i = 0; i < 3; i++)
        many[i] = i;
    p.n_replicas = 3;
    p.leader_recovery_state = 256; /* must not wrap to 0 */
    assert_int_equal(decode_raw(&m), KQ_ERR_INVALID_REQUEST);
    p.leader_recovery_state = 0;
    p.leader = 5; /* not a replica */
    assert_int_equal(decode_raw(&m), KQ_ERR_INVALID_REQUEST);
    p.leader = 0;
    assert_int_equal(decode_raw(&m), 0);

    m.body_case = KQ__RECORD__BODY_CONFIG;
    m.config = &c;
    c.resource_type = 258; /* must not wrap to 2 */
    c.resource_name = "t";
    c.name = "k";
    assert_int_equal(decode_raw(&m), KQ_ERR_INVALID_REQUEST);
    c.resource_type = 2;
    assert_int_equal(decode_raw(&m), 0);

    m.body_case = KQ__RECORD__BODY_FEATURE_LEVEL;
    m.feature_level = &f;
    f.name = "metadata.version";
    f.feature_level = 70000;
    assert_int_equal(decode_raw(&m), KQ_ERR_INVALID_REQUEST);

    /* Framing: a length prefix running past the end. */
    {
        static const uint8_t trunc[] = {0x10, 0x01, 0x02};

        assert_int_equal(kq_record_decode_next(trunc, sizeof trunc, &pos, &r, err, sizeof err),
                         KQ_ERR_MALFORMED);
        assert_int_equal(pos, 0);
    }
}

static void test_encode_rejects_invalid(void **state)
{
    kq_buf b = {0};
    kq_record r = rec_topic("x y", 1);

    (void)state;
    assert_int_equal(kq_record_append(&b, &r, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(b.len, 0);
    assert_null(b.data);
    assert_non_null(strstr(err, "invalid topic name"));
    kq_record_free(&r);
}

/* A VotersRecord the quorum could not run on is refused, with the reason. */
static void test_voters_refused(void **state)
{
    static const struct {
        const char *why;
        int n;
        void (*spoil)(kq_record *r);
    } cases[] = {
        {"0 voters", 0, NULL},    {"appears twice", 2, NULL},          {"no directory id", 1, NULL},
        {"no endpoint", 1, NULL}, {"unknown record version", 1, NULL},
    };
    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kq_record r = rec_voters(cases[c].n ? cases[c].n : 1, false);
        kq_buf b = {0};

        if (c == 0)
            r.voters.n_voters = 0;
        else if (c == 1)
            r.voters.voters[1].key.id = r.voters.voters[0].key.id;
        else if (c == 2)
            memset(r.voters.voters[0].key.dir, 0, 16);
        else if (c == 3)
            r.voters.voters[0].host[0] = '\0';
        else
            r.voters.version = 1;
        err[0] = '\0';
        assert_int_equal(kq_record_append(&b, &r, err, sizeof err), KQ_ERR_INVALID_REQUEST);
        assert_null(b.data);
        assert_non_null(strstr(err, cases[c].why));
        kq_record_free(&r);
    }
    /* kraft.version is 0 or 1 */
    kq_record k = {.type = KQ_REC_KRAFT_VERSION};
    kq_buf b = {0};
    k.kraft_version.kraft_version = 2;
    assert_int_equal(kq_record_append(&b, &k, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "kraft.version 2"));
}

static void test_render(void **state)
{
    static const int32_t r12[] = {1, 2};
    char buf[512], small[24];
    kq_record r = rec_topic("foo", 0);
    size_t n;

    (void)state;
    kq_record_render(&r, buf, sizeof buf);
    assert_true(!strncmp(buf, "Topic name=foo id=", 18));
    assert_int_equal(strlen(buf), 18 + 22);
    kq_record_free(&r);

    r = rec_change(0, 0);
    r.partition_change.has_isr = true;
    r.partition_change.isr = gen_list(r12, 2);
    r.partition_change.leader = 2;
    kq_record_render(&r, buf, sizeof buf);
    assert_true(!strncmp(buf, "PartitionChange topic=", 22));
    assert_non_null(strstr(buf, " partition=0 leader=2 isr=1,2"));
    assert_null(strstr(buf, "elr"));
    n = kq_record_render(&r, small, sizeof small);
    assert_int_equal(n, sizeof small - 1);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_string_equal(small + sizeof small - 4, "...");
    kq_record_free(&r);

    r = rec_register(3, 44, "r1");
    kq_record_render(&r, buf, sizeof buf);
    assert_true(!strncmp(buf, "RegisterBroker id=3 epoch=44", 28));
    assert_non_null(strstr(buf, "rack=r1 endpoints=PLAINTEXT://localhost:9095"));
    kq_record_free(&r);
    r = rec_config(KQ_CONFIG_RESOURCE_TOPIC, "foo", "retention.ms", NULL);
    kq_record_render(&r, buf, sizeof buf);
    assert_string_equal(buf, "Config type=topic resource=\"foo\" name=retention.ms deleted");
    kq_record_free(&r);
    r = rec_voters(2, true);
    kq_record_render(&r, buf, sizeof buf);
    assert_string_equal(buf, "Voters unsafe_recovery=true "
                             "voters=3001@controller-0.example:9093:EBAQEBAQEBAQEBAQEBAQEA[0..1],"
                             "3002@controller-1.example:9094:EREREREREREREREREREREQ[0..1]");
    kq_record_free(&r);
}

/* Random records applied to an image; returns it. */
static kq_image *random_image(uint64_t seed, int n, int64_t *off)
{
    kq_image *img = kq_image_new();
    gen g = {seed};

    for (int i = 0; i < n; i++) {
        kq_record r;

        gen_record(&g, img, &r);
        if (!kq_image_apply(img, *off, &r))
            (*off)++;
        kq_record_free(&r);
    }
    return img;
}

static void test_snapshot_round_trip(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 25; seed++) {
        int64_t off = 0;
        kq_image *img = random_image(seed, 500, &off);
        kq_image *loaded = kq_image_new();
        kq_buf s1 = {0}, s2 = {0};
        int32_t n1 = 0, n2 = 0;
        kq_image_counts c1, c2;

        assert_int_equal(kq_image_snapshot_write(img, &s1, &n1), 0);
        assert_int_equal(kq_image_snapshot_load(loaded, s1.data, s1.len, off, err, sizeof err), 0);
        assert_int_equal(kq_image_offset(loaded), off - 1);
        assert_int_equal(kq_image_committed_offset(loaded), off - 1);
        assert_int_equal(kq_image_hash(loaded), kq_image_hash(img));
        kq_image_get_counts(img, &c1);
        kq_image_get_counts(loaded, &c2);
        assert_memory_equal(&c1, &c2, sizeof c1);
        assert_true(c1.partitions > 0);
        /* Canonical: the loaded image writes the very same bytes. */
        assert_int_equal(kq_image_snapshot_write(loaded, &s2, &n2), 0);
        assert_int_equal(n1, n2);
        assert_int_equal(s1.len, s2.len);
        assert_memory_equal(s1.data, s2.data, s1.len);
        /* Loading into a non-empty image is refused. */
        assert_int_equal(kq_image_snapshot_load(loaded, s1.data, s1.len, off, err, sizeof err),
                         KQ_ERR_INVALID_REQUEST);
        buf_free(&s1);
        buf_free(&s2);
        kq_image_free(loaded);
        kq_image_free(img);
    }
}

static void test_snapshot_corrupt(void **state)
{
    int64_t off = 0;
    kq_image *img = random_image(42, 300, &off);
    kq_image *loaded = kq_image_new();
    kq_buf s = {0};
    kq_image_counts c;

    (void)state;
    assert_int_equal(kq_image_snapshot_write(img, &s, NULL), 0);
    /* Truncated: error, and the image is left empty. */
    assert_int_equal(kq_image_snapshot_load(loaded, s.data, s.len - 3, off, err, sizeof err),
                     KQ_ERR_MALFORMED);
    kq_image_get_counts(loaded, &c);
    assert_int_equal(c.topics + c.brokers + c.configs + c.features, 0);
    assert_int_equal(kq_image_offset(loaded), -1);
    /* Records that parse but cannot apply (a Partition before its Topic). */
    {
        static const int32_t r1[] = {1};
        kq_buf bad = {0};
        kq_record p = rec_partition(0, 0, r1, 1, r1, 1, 1);

        assert_int_equal(kq_record_append(&bad, &p, err, sizeof err), 0);
        assert_int_equal(kq_image_snapshot_load(loaded, bad.data, bad.len, 10, err, sizeof err),
                         KQ_ERR_UNKNOWN_TOPIC_ID);
        assert_non_null(strstr(err, "unknown topic id"));
        kq_record_free(&p);
        buf_free(&bad);
    }
    /* The intact snapshot still loads afterwards. */
    assert_int_equal(kq_image_snapshot_load(loaded, s.data, s.len, off, err, sizeof err), 0);
    assert_int_equal(kq_image_hash(loaded), kq_image_hash(img));
    buf_free(&s);
    kq_image_free(loaded);
    kq_image_free(img);
}

static void test_rollback_restores_snapshot(void **state)
{
    (void)state;
    for (uint64_t seed = 50; seed < 70; seed++) {
        int64_t off = 0;
        kq_image *img = random_image(seed, 300, &off);
        kq_buf before = {0}, after = {0};
        uint64_t h = kq_image_hash(img);
        int64_t committed = off - 1;
        gen g = {seed * 31};

        kq_image_commit(img, committed);
        assert_int_equal(kq_image_snapshot_write(img, &before, NULL), 0);
        for (int i = 0; i < 300; i++) {
            kq_record r;

            gen_record(&g, img, &r);
            if (!kq_image_apply(img, off, &r))
                off++;
            kq_record_free(&r);
        }
        assert_int_equal(kq_image_rollback(img, committed), 0);
        assert_int_equal(kq_image_hash(img), h);
        assert_int_equal(kq_image_snapshot_write(img, &after, NULL), 0);
        assert_int_equal(before.len, after.len);
        assert_memory_equal(before.data, after.data, before.len);
        buf_free(&before);
        buf_free(&after);
        kq_image_free(img);
    }
}

static void test_replay_batch(void **state)
{
    static const int32_t r12[] = {1, 2};
    kq_image *img = kq_image_new();
    kq_buf b = {0};
    kq_record recs[4];

    (void)state;
    recs[0] = rec_topic("orders", 1);
    recs[1] = rec_partition(1, 0, r12, 2, r12, 2, 1);
    recs[2] = rec_change(1, 0);
    recs[2].partition_change.leader = 2;
    recs[3] = (kq_record){.type = KQ_REC_NOOP};
    for (int i = 0; i < 4; i++)
        assert_int_equal(kq_record_append(&b, &recs[i], err, sizeof err), 0);
    /* Count mismatch: extra bytes after the records. */
    assert_int_equal(kq_image_replay(img, b.data, b.len, 100, 3, err, sizeof err),
                     KQ_ERR_MALFORMED);
    kq_image_clear(img);
    assert_int_equal(kq_image_replay(img, b.data, b.len, 100, 4, err, sizeof err), 0);
    assert_int_equal(kq_image_offset(img), 103);
    {
        uint8_t id[16];
        const kq_partition *p;

        gen_tid(1, id);
        p = kq_image_partition(img, id, 0);
        assert_non_null(p);
        assert_int_equal(p->leader, 2);
        assert_int_equal(p->leader_epoch, 1);
        assert_int_equal(p->partition_epoch, 1);
    }
    /* Replaying the same batch again fails at its first record: the topic exists. */
    assert_int_equal(kq_image_replay(img, b.data, b.len, 104, 4, err, sizeof err),
                     KQ_ERR_TOPIC_ALREADY_EXISTS);
    assert_non_null(strstr(err, "offset 104"));
    for (int i = 0; i < 4; i++)
        kq_record_free(&recs[i]);
    buf_free(&b);
    kq_image_free(img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_encode_rejects_invalid),
        cmocka_unit_test(test_voters_refused),
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_snapshot_round_trip),
        cmocka_unit_test(test_snapshot_corrupt),
        cmocka_unit_test(test_rollback_restores_snapshot),
        cmocka_unit_test(test_replay_batch),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
