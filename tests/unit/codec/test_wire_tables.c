/*
 * Property test of the wire tables (common/wire/wire.h): for every table of the record,
 * controller, data-plane and quorum codecs, random C structs within the table's limits survive
 * encode -> pack -> unpack -> decode unchanged, driven only by the table and protobuf-c's
 * descriptor; every table names fields its descriptor has; and a value one past a limit is refused
 * with the field's path in the message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kq/ctl_codec.h"
#include "kq/data_codec.h"
#include "kq/error.h"
#include "kq/util.h"
#include "wire.h"

#define ROUNDS 200
#define AT(base, off) ((void *)((char *)(base) + (off)))

static kq_prng rng = {0x9e3779b97f4a7c15ull}; /* kq/util.h: the same sequence every run */

static uint64_t next(void)
{
    return kq_prng_next(&rng);
}

/* Uniform in [lo, hi], with the ends and the middle often. */
static int64_t pick(int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)hi - (uint64_t)lo;

    switch (next() % 4) {
    case 0:
        return lo;
    case 1:
        return hi;
    default:
        return span == UINT64_MAX ? (int64_t)next() : lo + (int64_t)(next() % (span + 1));
    }
}

static const ProtobufCFieldDescriptor *pbf(const kq_wire_msg *m, const kq_wire_field *f)
{
    return protobuf_c_message_descriptor_get_field_by_name(m->desc, f->name);
}

static void set_count(const kq_wire_field *f, void *c, size_t n)
{
    if (f->flags & KQ_WF_SIZE)
        *(size_t *)AT(c, f->aux) = n;
    else
        *(int32_t *)AT(c, f->aux) = (int32_t)n;
}

static int64_t get_count(const kq_wire_field *f, const void *c)
{
    return (f->flags & KQ_WF_SIZE) ? (int64_t) * (const size_t *)((const char *)c + f->aux)
                                   : *(const int32_t *)((const char *)c + f->aux);
}

static char *rand_str(kq_arena *a, int64_t max, bool nonempty)
{
    size_t cap = (size_t)(max < 12 ? max : 12), n = (size_t)pick(nonempty ? 1 : 0, (int64_t)cap);
    char *s = kq_arena_alloc(a, n + 1, 1);

    for (size_t i = 0; s && i < n; i++)
        s[i] = (char)('a' + next() % 26);
    return s;
}

static size_t rand_count(const kq_wire_field *f, int depth)
{
    int64_t hi = f->max < 3 ? f->max : 3;

    if (depth > 3)
        hi = 0;
    return (size_t)pick((f->flags & KQ_WF_NONEMPTY) && f->kind != KQ_WK_STRS ? 1 : 0, hi);
}

/* A sub-table whose fields live in the parent: all absent, or each random in its range. */
static void fill_inline(const kq_wire_field *f, void *c)
{
    bool absent = next() % 3 == 0;

    if (f->flags & KQ_WF_HAS)
        *(bool *)AT(c, f->aux) = !absent;
    for (size_t i = 0; i < f->sub->n_fields; i++) {
        const kq_wire_field *g = &f->sub->fields[i];
        /* absent: every field as the receiver fills in an absent sub-message */
        int64_t v = absent ? f->absent : pick(g->min, g->max);

        if (g->kind == KQ_WK_I32)
            *(int32_t *)AT(c, g->off) = (int32_t)v;
        else
            *(int64_t *)AT(c, g->off) = v;
    }
}

/* A random C struct of table m in c (zeroed), inside every limit the decoder checks. */
static void fill(const kq_wire_msg *m, void *c, kq_arena *a, int depth)
{
    for (size_t i = 0; i < m->n_fields; i++) {
        const kq_wire_field *f = &m->fields[i];
        const ProtobufCFieldDescriptor *fd = pbf(m, f);
        bool optional = fd->label == PROTOBUF_C_LABEL_OPTIONAL;
        void *dst = AT(c, f->off);

        if (f->kind == KQ_WK_MSG && (f->flags & KQ_WF_INLINE)) {
            fill_inline(f, c);
            continue;
        }
        switch (f->kind) {
        case KQ_WK_I8:
            *(int8_t *)dst = (int8_t)pick(f->min, f->max);
            break;
        case KQ_WK_I16:
            *(int16_t *)dst = (int16_t)pick(f->min, f->max);
            break;
        case KQ_WK_I32:
            *(int32_t *)dst = (int32_t)pick(f->min, f->max);
            break;
        case KQ_WK_I64:
            *(int64_t *)dst = pick(f->min, f->max);
            break;
        case KQ_WK_BOOL:
            *(bool *)dst = next() & 1;
            break;
        case KQ_WK_STR:
            *(char **)dst =
                optional && next() % 3 == 0 ? NULL : rand_str(a, f->max, f->flags & KQ_WF_NONEMPTY);
            break;
        case KQ_WK_UUID: {
            bool has = !optional || (f->flags & KQ_WF_NONZERO) || next() % 2;

            if (f->flags & KQ_WF_HAS)
                *(bool *)AT(c, f->aux) = has;
            for (int k = 0; has && k < 16; k++)
                ((uint8_t *)dst)[k] = (uint8_t)next();
            ((uint8_t *)dst)[0] |= has ? 1 : 0; /* present ids are not all zero */
            break;
        }
        case KQ_WK_TEXT: {
            char *t = rand_str(a, f->max, false);

            memcpy(dst, t, strlen(t) + 1);
            break;
        }
        case KQ_WK_BLOBS: {
            size_t n = rand_count(f, depth);
            const uint8_t **v = kq_arena_alloc(a, n, sizeof *v);
            size_t *lens = kq_arena_alloc(a, n, sizeof *lens);

            for (size_t k = 0; k < n; k++) {
                lens[k] = (size_t)pick(0, 8);
                v[k] = (const uint8_t *)rand_str(a, 8, false);
                lens[k] = strlen((const char *)v[k]);
            }
            *(const uint8_t ***)dst = n ? v : NULL;
            *(size_t **)AT(c, f->aux2) = n ? lens : NULL;
            set_count(f, c, n);
            break;
        }
        case KQ_WK_BYTES: {
            size_t n = (size_t)pick(0, 20);
            uint8_t *b = kq_arena_alloc(a, n, 1);

            for (size_t k = 0; k < n; k++)
                b[k] = (uint8_t)next();
            *(uint8_t **)dst = n ? b : NULL;
            *(size_t *)AT(c, f->aux) = n;
            break;
        }
        case KQ_WK_IDS: {
            size_t n = rand_count(f, depth);
            int32_t *v = (f->flags & KQ_WF_FIXED) ? dst : kq_arena_alloc(a, n, sizeof *v);

            for (size_t k = 0; k < n; k++)
                v[k] = (int32_t)next();
            if (!(f->flags & KQ_WF_FIXED))
                *(int32_t **)dst = n ? v : NULL;
            set_count(f, c, n);
            break;
        }
        case KQ_WK_STRS: {
            size_t n = rand_count(f, depth);
            char **v = kq_arena_alloc(a, n, sizeof *v);

            for (size_t k = 0; k < n; k++)
                v[k] = rand_str(a, f->elem_max, f->flags & KQ_WF_NONEMPTY);
            *(char ***)dst = n ? v : NULL;
            set_count(f, c, n);
            break;
        }
        case KQ_WK_MSG: {
            bool has = !(f->flags & KQ_WF_HAS) || next() % 2;

            if (f->flags & KQ_WF_HAS)
                *(bool *)AT(c, f->aux) = has;
            if (has)
                fill(f->sub, dst, a, depth + 1);
            break;
        }
        case KQ_WK_MSGS: {
            size_t n = rand_count(f, depth);
            char *v = (f->flags & KQ_WF_FIXED) ? dst : kq_arena_alloc(a, n, f->sub->size);

            for (size_t k = 0; k < n; k++)
                fill(f->sub, v + k * f->sub->size, a, depth + 1);
            if (!(f->flags & KQ_WF_FIXED))
                *(void **)dst = n ? v : NULL;
            set_count(f, c, n);
            break;
        }
        case KQ_WK_CONST: /* nothing in C: the encoder sends the constant */
            break;
        default:
            fail_msg("%s.%s: unknown kind %d", m->desc->name, f->name, f->kind);
        }
    }
}

static bool same_str(const char *x, const char *y)
{
    return (!x && !y) || (x && y && !strcmp(x, y));
}

/* x and y agree on every field of table m; the first difference is named in why. */
static bool same(const kq_wire_msg *m, const void *x, const void *y, char *why, size_t len)
{
    for (size_t i = 0; i < m->n_fields; i++) {
        const kq_wire_field *f = &m->fields[i];
        const void *a = (const char *)x + f->off, *b = (const char *)y + f->off;
        const void *fixed_a = a, *fixed_b = b; /* an inline array, seen as a pointer to it */
        int64_t n = 0;
        bool ok = true;

        switch (f->kind) {
        case KQ_WK_I8:
            ok = *(const int8_t *)a == *(const int8_t *)b;
            break;
        case KQ_WK_I16:
            ok = *(const int16_t *)a == *(const int16_t *)b;
            break;
        case KQ_WK_I32:
            ok = *(const int32_t *)a == *(const int32_t *)b;
            break;
        case KQ_WK_I64:
            ok = *(const int64_t *)a == *(const int64_t *)b;
            break;
        case KQ_WK_BOOL:
            ok = *(const bool *)a == *(const bool *)b;
            break;
        case KQ_WK_STR:
            ok = same_str(*(char *const *)a, *(char *const *)b);
            break;
        case KQ_WK_TEXT:
            ok = !strcmp(a, b);
            break;
        case KQ_WK_CONST:
            break;
        case KQ_WK_UUID:
            ok = !memcmp(a, b, 16) &&
                 (!(f->flags & KQ_WF_HAS) || *(const bool *)((const char *)x + f->aux) ==
                                                 *(const bool *)((const char *)y + f->aux));
            break;
        case KQ_WK_BYTES: {
            size_t la = *(const size_t *)((const char *)x + f->aux);

            ok = la == *(const size_t *)((const char *)y + f->aux) &&
                 (!la || !memcmp(*(void *const *)a, *(void *const *)b, la));
            break;
        }
        case KQ_WK_MSG:
            ok = (!(f->flags & KQ_WF_HAS) || *(const bool *)((const char *)x + f->aux) ==
                                                 *(const bool *)((const char *)y + f->aux)) &&
                 same(f->sub, a, b, why, len);
            break;
        default: /* the lists */
            if (f->flags & KQ_WF_FIXED) {
                a = &fixed_a;
                b = &fixed_b;
            }
            n = get_count(f, x);
            ok = n == get_count(f, y);
            for (int64_t k = 0; ok && k < n; k++) {
                if (f->kind == KQ_WK_BLOBS) {
                    size_t la = (*(size_t *const *)((const char *)x + f->aux2))[k];

                    ok = la == (*(size_t *const *)((const char *)y + f->aux2))[k] &&
                         (!la || !memcmp((*(uint8_t *const *const *)a)[k],
                                         (*(uint8_t *const *const *)b)[k], la));
                } else if (f->kind == KQ_WK_IDS)
                    ok = (*(int32_t *const *)a)[k] == (*(int32_t *const *)b)[k];
                else if (f->kind == KQ_WK_STRS)
                    ok = same_str((*(char **const *)a)[k], (*(char **const *)b)[k]);
                else
                    ok = same(f->sub, *(char *const *)a + (size_t)k * f->sub->size,
                              *(char *const *)b + (size_t)k * f->sub->size, why, len);
            }
        }
        if (!ok) {
            if (!why[0])
                snprintf(why, len, "%s.%s differs", m->desc->name, f->name);
            return false;
        }
    }
    return true;
}

/* C struct -> protobuf-c -> bytes -> protobuf-c -> C struct, without and with an arena. */
static void round_trip(const kq_wire_msg *m, const void *c)
{
    kq_arena enc = {0}, dec = {0};
    ProtobufCMessage *pb, *back;
    void *out = calloc(1, m->size), *out2 = calloc(1, m->size);
    char err[256] = "", why[256] = "";
    kq_buf buf = {0};
    int rc;

    assert_non_null(out);
    assert_non_null(out2);
    pb = kq_wire_encode_new(m, c, &enc, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(kq_wire_pack(pb, &buf), 0);
    back = protobuf_c_message_unpack(m->desc, NULL, buf.len, buf.data);
    if (!back)
        fail_msg("%s: packed bytes do not unpack", m->desc->name);
    rc = kq_wire_decode(m, back, out, NULL, err, sizeof err);
    if (rc)
        fail_msg("%s: decode failed: %s", m->desc->name, err);
    if (!same(m, c, out, why, sizeof why))
        fail_msg("%s after a round trip (owned copies): %s", m->desc->name, why);
    assert_int_equal(kq_wire_decode(m, back, out2, &dec, err, sizeof err), 0);
    if (!same(m, c, out2, why, sizeof why))
        fail_msg("%s after a round trip (arena): %s", m->desc->name, why);
    kq_wire_free(m, out);
    free(out);
    free(out2);
    kq_arena_free(&dec);
    protobuf_c_message_free_unpacked(back, NULL);
    kq_buf_free(&buf);
    kq_arena_free(&enc);
}

static void check_tables(const kq_wire_msg *const *tables)
{
    for (size_t t = 0; tables[t]; t++) {
        const kq_wire_msg *m = tables[t];

        for (size_t i = 0; i < m->n_fields; i++)
            if (!pbf(m, &m->fields[i]))
                fail_msg("table for %s names field %s, which it does not have", m->desc->name,
                         m->fields[i].name);
        for (int r = 0; r < ROUNDS; r++) {
            kq_arena a = {0};
            void *c = kq_arena_alloc(&a, 1, m->size ? m->size : 1);

            assert_non_null(c);
            fill(m, c, &a, 0);
            round_trip(m, c);
            kq_arena_free(&a);
        }
    }
}

/* The record tables, by record type (kq_wire_record_table), NULL-terminated. */
static const kq_wire_msg *record_tables[65];

static const kq_wire_msg *const *all_record_tables(void)
{
    const ProtobufCFieldDescriptor *fd;
    size_t n = 0;

    for (uint32_t type = 0; type < 64; type++)
        if ((record_tables[n] = kq_wire_record_table(type, &fd)))
            n++;
    record_tables[n] = NULL;
    assert_int_equal(n, 16); /* every kq_rec_type with a body */
    return record_tables;
}

static void test_record_tables_round_trip(void **state)
{
    (void)state;
    check_tables(all_record_tables());
}

static void test_ctl_tables_round_trip(void **state)
{
    (void)state;
    check_tables(kq_wire_ctl_tables);
}

/* The first integer field with a range narrower than its type: a value one past the top is
 * refused, naming the field. */
static void check_limit_named(const kq_wire_msg *m)
{
    for (size_t i = 0; i < m->n_fields; i++) {
        const kq_wire_field *f = &m->fields[i];
        const ProtobufCFieldDescriptor *fd = pbf(m, f);
        kq_arena a = {0};
        ProtobufCMessage *pb;
        char err[256] = "", want[128];
        void *c, *out;
        int rc;

        if (f->kind != KQ_WK_I32 || f->max >= INT32_MAX || (f->flags & KQ_WF_ABSENT))
            continue;
        c = kq_arena_alloc(&a, 1, m->size);
        out = kq_arena_alloc(&a, 1, m->size);
        fill(m, c, &a, 0);
        pb = kq_wire_encode_new(m, c, &a, &rc);
        assert_int_equal(rc, 0);
        *(int32_t *)AT(pb, fd->offset) = (int32_t)f->max + 1;
        assert_int_equal(kq_wire_decode(m, pb, out, &a, err, sizeof err), KQ_ERR_INVALID_REQUEST);
        snprintf(want, sizeof want, "%s.%s %lld is out of range", m->desc->short_name, f->name,
                 (long long)f->max + 1);
        if (!strstr(err, want))
            fail_msg("error '%s' does not say '%s'", err, want);
        kq_arena_free(&a);
        return;
    }
}

static void test_data_tables_round_trip(void **state)
{
    (void)state;
    check_tables(kq_wire_data_tables);
}

static void test_quorum_tables_round_trip(void **state)
{
    (void)state;
    check_tables(kq_wire_quorum_tables);
}

static void test_limits_are_named(void **state)
{
    (void)state;
    for (const kq_wire_msg *const *t = all_record_tables(); *t; t++)
        check_limit_named(*t);
    for (size_t t = 0; kq_wire_ctl_tables[t]; t++)
        check_limit_named(kq_wire_ctl_tables[t]);
    for (size_t t = 0; kq_wire_data_tables[t]; t++)
        check_limit_named(kq_wire_data_tables[t]);
    for (size_t t = 0; kq_wire_quorum_tables[t]; t++)
        check_limit_named(kq_wire_quorum_tables[t]);
}

/* What the hand-written encoders did with holes in their input, the tables do too: a NULL
 * bytes value is sent empty, a NULL string in a list is sent as "", and an election of all
 * partitions sends no partition list even when the caller left targets in the struct. */
static void test_encoders_fill_holes(void **state)
{
    uint8_t id[16] = {1};
    kq_data_batch batch = {.count = 1, .records = NULL, .len = 5};
    kq_data_fetch_partition_result part = {.partition = 0, .batches = &batch, .n_batches = 1};
    kq_data_fetch_response fr = {.partitions = &part, .n_partitions = 1};
    const char *names[2] = {"a", NULL};
    kq_data_metadata_request mr = {.topics = names, .n_topics = 2};
    kq_elect_target target = {"t", 0};
    kq_ctl_request el = {.api_key = KQ_API_ELECT_LEADERS};
    kq_ctl_request back;
    kq_data_request dr;
    char err[256] = "";
    kq_buf b = {0};

    (void)state;
    memcpy(part.topic_id, id, 16);
    assert_int_equal(kq_data_encode_fetch_response(&fr, &b), 0);
    kq_buf_free(&b);
    assert_int_equal(kq_data_encode_metadata_request("", -1, &mr, &b), 0);
    assert_int_equal(kq_data_decode_request(b.data, b.len, &dr, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "MetadataRequest.topics[1] is empty"));
    kq_buf_free(&b);
    el.elect_leaders.all_partitions = true;
    el.elect_leaders.targets = &target;
    el.elect_leaders.n_targets = 1;
    assert_int_equal(kq_ctl_encode_request("", -1, &el, &b), 0);
    assert_int_equal(kq_ctl_decode_request(b.data, b.len, &back, err, sizeof err), 0);
    assert_true(back.elect_leaders.all_partitions);
    assert_int_equal(back.elect_leaders.n_targets, 0);
    kq_ctl_request_free(&back);
    kq_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_tables_round_trip),
        cmocka_unit_test(test_ctl_tables_round_trip),
        cmocka_unit_test(test_data_tables_round_trip),
        cmocka_unit_test(test_quorum_tables_round_trip),
        cmocka_unit_test(test_limits_are_named),
        cmocka_unit_test(test_encoders_fill_holes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
