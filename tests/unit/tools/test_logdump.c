/* kq log-dump output (tools/logdump.c): every metadata record type decoded with its fields, in
 * Kafka's dump-log text shape, as JSON (checked to be valid JSON) and as one line per record;
 * undecodable records; malformed batches; snapshots; broker partition logs with and without
 * values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kq/codec.h"
#include "kq/data_codec.h"
#include "kq/error.h"
#include "kq/records.h"
#include "kq/util.h"
#include "kq_tools.h"

#include "capture.h"

/* ---- a small strict JSON checker (RFC 8259 grammar; strings must be valid UTF-8) -------- */

static const char *js_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

static const char *js_value(const char *p, int depth);

static const char *js_string(const char *p)
{
    if (*p++ != '"')
        return NULL;
    while (*p != '"') {
        unsigned char c = (unsigned char)*p;

        if (c == '\0' || c < 0x20)
            return NULL;
        if (c == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i])
                        return NULL;
                p += 5;
            } else if (*p && strchr("\"\\/bfnrt", *p)) {
                p++;
            } else {
                return NULL;
            }
        } else if (c < 0x80) {
            p++;
        } else {
            int k = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;

            if (!k)
                return NULL;
            for (int i = 1; i < k; i++)
                if (((unsigned char)p[i] & 0xC0) != 0x80)
                    return NULL;
            p += k;
        }
    }
    return p + 1;
}

static const char *js_number(const char *p)
{
    const char *s = p;

    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return NULL;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return NULL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return NULL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return p > s ? p : NULL;
}

static const char *js_value(const char *p, int depth)
{
    if (depth > 64)
        return NULL;
    p = js_ws(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        bool obj = *p == '{';

        p = js_ws(p + 1);
        if (*p == close)
            return p + 1;
        for (;;) {
            if (obj) {
                p = js_string(js_ws(p));
                if (!p)
                    return NULL;
                p = js_ws(p);
                if (*p++ != ':')
                    return NULL;
            }
            p = js_value(p, depth + 1);
            if (!p)
                return NULL;
            p = js_ws(p);
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p == close)
                return p + 1;
            return NULL;
        }
    }
    if (*p == '"')
        return js_string(p);
    if (!strncmp(p, "true", 4))
        return p + 4;
    if (!strncmp(p, "false", 5))
        return p + 5;
    if (!strncmp(p, "null", 4))
        return p + 4;
    return js_number(p);
}

/* One JSON value, then only whitespace. */
static bool json_valid(const char *s)
{
    const char *p = js_value(s, 0);

    return p && *js_ws(p) == '\0';
}

static void test_json_checker_itself(void **state)
{
    (void)state;
    assert_true(json_valid("{\"a\":[1,-2.5e3,true,null,\"x\\u00e9\\n\"],\"b\":{}}\n"));
    assert_false(json_valid("{\"a\":[1,]}"));
    assert_false(json_valid("{\"a\":1}{"));
    assert_false(json_valid("{\"a\":\"\x01\"}"));
    assert_false(json_valid("{\"a\":\"\xff\"}"));
    assert_false(json_valid("[01]"));
}

/* ---- fixtures ---------------------------------------------------------------------------- */

static const uint8_t TOPIC_ID[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint8_t INCARNATION[16] = {0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0,
                                        0,    0,    0,    0,    0, 0, 0, 0x2a};
static char TOPIC_S[KQ_UUID_STR_LEN + 1];
static char INC_S[KQ_UUID_STR_LEN + 1];

#define N_RECS 13

/* One record of every type (PartitionChange twice: all fields, and only the ISR). The records
 * borrow static arrays. */
static void every_record(kq_record *r)
{
    static int32_t v123[] = {1, 2, 3}, v12[] = {1, 2}, v3[] = {3}, v2[] = {2};
    static kq_rec_endpoint eps[] = {{"PLAINTEXT", "broker-1.example", 9092},
                                    {"SSL", "broker-1.example", 9093}};
    static uint8_t opaque[] = "kq-write 1 0....";

    kq_uuid_format(TOPIC_ID, TOPIC_S);
    kq_uuid_format(INCARNATION, INC_S);
    memset(r, 0, N_RECS * sizeof *r);
    r[0].type = KQ_REC_LEADER_CHANGE;
    r[0].leader_change = (kq_rec_leader_change){3001, {v123, 3}, {v12, 2}};
    r[1].type = KQ_REC_NOOP;
    r[2].type = KQ_REC_OPAQUE;
    r[2].opaque = (kq_rec_opaque){opaque, 16};
    r[3].type = KQ_REC_REGISTER_BROKER;
    r[3].register_broker = (kq_rec_register_broker){.broker_id = 1,
                                                    .broker_epoch = 7,
                                                    .endpoints = eps,
                                                    .n_endpoints = 2,
                                                    .rack = "rack-a",
                                                    .fenced = true,
                                                    .in_controlled_shutdown = false,
                                                    .registration_offset = -1};
    memcpy(r[3].register_broker.incarnation_id, INCARNATION, 16);
    r[4].type = KQ_REC_UNREGISTER_BROKER;
    r[4].unregister_broker = (kq_rec_unregister_broker){2, 9};
    r[5].type = KQ_REC_BROKER_REGISTRATION_CHANGE;
    r[5].broker_change = (kq_rec_broker_change){1, 7, KQ_FENCE_UNFENCE, 1};
    r[6].type = KQ_REC_TOPIC;
    r[6].topic.name = "ledger";
    memcpy(r[6].topic.topic_id, TOPIC_ID, 16);
    r[7].type = KQ_REC_PARTITION;
    r[7].partition = (kq_rec_partition){.partition_id = 0,
                                        .replicas = {v123, 3},
                                        .isr = {v12, 2},
                                        .elr = {v3, 1},
                                        .last_known_elr = {NULL, 0},
                                        .leader = 1,
                                        .leader_recovery_state = KQ_RECOVERY_RECOVERED,
                                        .leader_epoch = 4,
                                        .partition_epoch = 6};
    memcpy(r[7].partition.topic_id, TOPIC_ID, 16);
    r[8].type = KQ_REC_PARTITION_CHANGE;
    r[8].partition_change =
        (kq_rec_partition_change){.partition_id = 0,
                                  .has_replicas = true,
                                  .has_isr = true,
                                  .has_elr = true,
                                  .has_last_known_elr = true,
                                  .replicas = {v123, 3},
                                  .isr = {v2, 1},
                                  .elr = {NULL, 0},
                                  .last_known_elr = {v3, 1},
                                  .leader = 2,
                                  .leader_recovery_state = KQ_RECOVERY_RECOVERING};
    memcpy(r[8].partition_change.topic_id, TOPIC_ID, 16);
    r[9].type = KQ_REC_PARTITION_CHANGE;
    r[9].partition_change =
        (kq_rec_partition_change){.partition_id = 0,
                                  .has_isr = true,
                                  .isr = {v12, 2},
                                  .leader = KQ_LEADER_UNCHANGED,
                                  .leader_recovery_state = KQ_RECOVERY_UNCHANGED};
    memcpy(r[9].partition_change.topic_id, TOPIC_ID, 16);
    r[10].type = KQ_REC_REMOVE_TOPIC;
    memcpy(r[10].remove_topic.topic_id, TOPIC_ID, 16);
    r[11].type = KQ_REC_CONFIG;
    r[11].config =
        (kq_rec_config){KQ_CONFIG_RESOURCE_TOPIC, "ledger", "min.insync.replicas", "2 \"x\""};
    r[12].type = KQ_REC_FEATURE_LEVEL;
    r[12].feature_level = (kq_rec_feature_level){"metadata.version", 1};
}

/* Each record's expected payload, {"type":...,"data":{...}}. */
static void expected_payloads(char want[N_RECS][1024])
{
    snprintf(want[0], 1024,
             "{\"type\":\"LEADER_CHANGE\",\"data\":{\"leaderId\":3001,\"voters\":[{\"voterId\":1},"
             "{\"voterId\":2},{\"voterId\":3}],\"grantingVoters\":[{\"voterId\":1},{\"voterId\":"
             "2}]}}");
    snprintf(want[1], 1024, "{\"type\":\"NO_OP_RECORD\",\"data\":{}}");
    snprintf(want[2], 1024, "{\"type\":\"OPAQUE_RECORD\",\"data\":{\"size\":16}}");
    snprintf(want[3], 1024,
             "{\"type\":\"REGISTER_BROKER_RECORD\",\"data\":{\"brokerId\":1,\"incarnationId\":"
             "\"%s\",\"brokerEpoch\":7,\"endPoints\":[{\"name\":\"PLAINTEXT\",\"host\":\"broker-"
             "1.example\",\"port\":9092},{\"name\":\"SSL\",\"host\":\"broker-1.example\","
             "\"port\":9093}],\"rack\":\"rack-a\",\"fenced\":true,\"inControlledShutdown\":"
             "false}}",
             INC_S);
    snprintf(want[4], 1024,
             "{\"type\":\"UNREGISTER_BROKER_RECORD\",\"data\":{\"brokerId\":2,\"brokerEpoch\":9}"
             "}");
    snprintf(want[5], 1024,
             "{\"type\":\"BROKER_REGISTRATION_CHANGE_RECORD\",\"data\":{\"brokerId\":1,"
             "\"brokerEpoch\":7,\"fenced\":-1,\"inControlledShutdown\":1}}");
    snprintf(want[6], 1024,
             "{\"type\":\"TOPIC_RECORD\",\"data\":{\"name\":\"ledger\",\"topicId\":\"%s\"}}",
             TOPIC_S);
    snprintf(want[7], 1024,
             "{\"type\":\"PARTITION_RECORD\",\"data\":{\"partitionId\":0,\"topicId\":\"%s\","
             "\"replicas\":[1,2,3],\"isr\":[1,2],\"removingReplicas\":[],\"addingReplicas\":[],"
             "\"leader\":1,\"leaderRecoveryState\":0,\"leaderEpoch\":4,\"partitionEpoch\":6,"
             "\"eligibleLeaderReplicas\":[3],\"lastKnownElr\":[]}}",
             TOPIC_S);
    snprintf(want[8], 1024,
             "{\"type\":\"PARTITION_CHANGE_RECORD\",\"data\":{\"partitionId\":0,\"topicId\":"
             "\"%s\",\"isr\":[2],\"leader\":2,\"replicas\":[1,2,3],\"leaderRecoveryState\":1,"
             "\"eligibleLeaderReplicas\":[],\"lastKnownElr\":[3]}}",
             TOPIC_S);
    snprintf(want[9], 1024,
             "{\"type\":\"PARTITION_CHANGE_RECORD\",\"data\":{\"partitionId\":0,\"topicId\":"
             "\"%s\",\"isr\":[1,2]}}",
             TOPIC_S);
    snprintf(want[10], 1024, "{\"type\":\"REMOVE_TOPIC_RECORD\",\"data\":{\"topicId\":\"%s\"}}",
             TOPIC_S);
    snprintf(want[11], 1024,
             "{\"type\":\"CONFIG_RECORD\",\"data\":{\"resourceType\":2,\"resourceName\":"
             "\"ledger\",\"name\":\"min.insync.replicas\",\"value\":\"2 \\\"x\\\"\"}}");
    snprintf(want[12], 1024,
             "{\"type\":\"FEATURE_LEVEL_RECORD\",\"data\":{\"name\":\"metadata.version\","
             "\"featureLevel\":1}}");
}

/* The records of every_record, length-prefixed, in b (caller frees); sizes[i] = value size. */
static void encode_all(const kq_record *r, int n, kq_buf *b, size_t *sizes)
{
    char err[256];

    b->data = NULL;
    b->len = 0;
    for (int i = 0; i < n; i++) {
        kq_buf one = {0};

        assert_int_equal(kq_record_encode(&r[i], &one, err, sizeof err), 0);
        sizes[i] = one.len;
        kq_buf_free(&one);
        if (kq_record_append(b, &r[i], err, sizeof err) != 0)
            fail_msg("record %d: %s", i, err);
    }
}

static void dump_batch(kq_tools_dump_format fmt, const kq_buf *b, int32_t count, capture *c)
{
    kq_tools_dump *d = malloc(sizeof *d);
    kq_tools_log_batch lb = {100, 3, count, 0xdeadbeef, b->data, b->len, 12 + b->len};
    kq_tools_log_summary s = {100, 100 + count, 3, 4, 3001, 3002};

    assert_non_null(d);
    cap_open(c);
    kq_tools_dump_init(d, c->f, fmt, false);
    kq_tools_dump_log_begin(d);
    if (kq_tools_dump_log_batch(d, &lb) != 0)
        fail_msg("dump_log_batch: %s", d->err);
    kq_tools_dump_log_end(d, &s);
    free(d);
}

/* ---- metadata log ------------------------------------------------------------------------ */

static void test_log_dump_decodes_every_metadata_record_in_text(void **state)
{
    (void)state;
    kq_record r[N_RECS];
    char want[N_RECS][1024], line[1200];
    size_t sizes[N_RECS];
    kq_buf b;
    capture c;

    every_record(r);
    expected_payloads(want);
    encode_all(r, N_RECS, &b, sizes);
    dump_batch(KQ_TOOLS_DUMP_TEXT, &b, N_RECS, &c);
    const char *out = cap_text(&c);

    snprintf(line, sizeof line,
             "baseOffset: 100 lastOffset: 112 count: 13 partitionLeaderEpoch: 3 isControl: false "
             "size: %zu crc: 3735928559\n",
             12 + b.len);
    assert_true(strncmp(out, line, strlen(line)) == 0);
    const char *p = out + strlen(line);
    for (int i = 0; i < N_RECS; i++) {
        snprintf(line, sizeof line, "| offset: %d valueSize: %zu payload: %s\n", 100 + i, sizes[i],
                 want[i]);
        if (strncmp(p, line, strlen(line)) != 0)
            fail_msg("record %d:\nwant %sgot  %.*s", i, line, (int)strcspn(p, "\n") + 1, p);
        p += strlen(line);
    }
    assert_string_equal(p, "records=13 batches=1 log_start=100 log_end=113 last_epoch=3 "
                           "qstate_epoch=4 voted_id=3001 leader_id=3002\n");
    cap_close(&c);
    kq_buf_free(&b);
}

static void test_log_dump_json_names_every_record_type_and_field(void **state)
{
    (void)state;
    kq_record r[N_RECS];
    char want[N_RECS][1024], rec[1400];
    size_t sizes[N_RECS];
    kq_buf b;
    capture c;

    every_record(r);
    expected_payloads(want);
    encode_all(r, N_RECS, &b, sizes);
    dump_batch(KQ_TOOLS_DUMP_JSON, &b, N_RECS, &c);
    const char *out = cap_text(&c);

    assert_true(json_valid(out));
    assert_true(strncmp(out,
                        "{\"batches\":[{\"baseOffset\":100,\"lastOffset\":112,\"count\":13,"
                        "\"partitionLeaderEpoch\":3,\"isControl\":false,",
                        strlen("{\"batches\":[{\"baseOffset\":100,\"lastOffset\":112,\"count\":"
                               "13,\"partitionLeaderEpoch\":3,\"isControl\":false,")) == 0);
    for (int i = 0; i < N_RECS; i++) {
        /* {"offset":..,"valueSize":..,"type":T,"description":..,"data":D}: type and data as
         * in the text payload */
        const char *type = strstr(want[i], "\"type\":");
        const char *data = strstr(want[i], ",\"data\":");
        char desc[1024];

        kq_record_render(&r[i], desc, sizeof desc);
        snprintf(rec, sizeof rec, "{\"offset\":%d,\"valueSize\":%zu,%.*s,\"description\":\"",
                 100 + i, sizes[i], (int)(data - type), type);
        if (!strstr(out, rec))
            fail_msg("record %d: '%s' not in %s", i, rec, out);
        snprintf(rec, sizeof rec, "%.*s}", (int)strlen(data) - 1, data);
        if (!strstr(out, rec))
            fail_msg("record %d: data '%s' not in %s", i, rec, out);
    }
    assert_non_null(strstr(out, "\"summary\":{\"records\":13,\"batches\":1,\"log_start\":100,"
                                "\"log_end\":113,\"last_epoch\":3,\"qstate_epoch\":4,\"voted_id\":"
                                "3001,\"leader_id\":3002}}\n"));
    assert_null(strstr(out, "UNKNOWN"));
    cap_close(&c);
    kq_buf_free(&b);
}

static void test_log_dump_lines_keep_one_line_per_record(void **state)
{
    (void)state;
    kq_record r[N_RECS];
    char line[1200], desc[1024];
    size_t sizes[N_RECS];
    kq_buf b;
    capture c;

    every_record(r);
    encode_all(r, N_RECS, &b, sizes);
    dump_batch(KQ_TOOLS_DUMP_LINES, &b, N_RECS, &c);
    const char *p = cap_text(&c);

    for (int i = 0; i < N_RECS; i++) {
        kq_record_render(&r[i], desc, sizeof desc);
        snprintf(line, sizeof line, "offset=%d epoch=3 batch=100 %s\n", 100 + i, desc);
        if (strncmp(p, line, strlen(line)) != 0)
            fail_msg("record %d:\nwant %sgot  %.*s", i, line, (int)strcspn(p, "\n") + 1, p);
        p += strlen(line);
    }
    assert_string_equal(p, "records=13 batches=1 log_start=100 log_end=113 last_epoch=3 "
                           "qstate_epoch=4 voted_id=3001 leader_id=3002\n");
    cap_close(&c);
    /* the descriptions that tests/chaos compares keep their form */
    kq_record_render(&r[0], desc, sizeof desc);
    assert_string_equal(desc, "LeaderChange leader=3001 voters=1,2,3 granting=1,2");
    kq_record_render(&r[1], desc, sizeof desc);
    assert_string_equal(desc, "NoOp");
    kq_record_render(&r[2], desc, sizeof desc);
    assert_string_equal(desc, "Opaque bytes=16");
    kq_buf_free(&b);
}

static void test_log_dump_control_batch_and_empty_log(void **state)
{
    (void)state;
    kq_record r[N_RECS];
    size_t sizes[1];
    kq_buf b;
    capture c;
    kq_tools_dump *d = malloc(sizeof *d);
    kq_tools_log_summary s = {0, 0, 0, 0, -1, -1};

    every_record(r);
    encode_all(r, 1, &b, sizes); /* the LeaderChange alone */
    dump_batch(KQ_TOOLS_DUMP_TEXT, &b, 1, &c);
    assert_non_null(strstr(cap_text(&c), " isControl: true "));
    cap_close(&c);
    kq_buf_free(&b);

    cap_open(&c);
    kq_tools_dump_init(d, c.f, KQ_TOOLS_DUMP_JSON, false);
    kq_tools_dump_log_begin(d);
    kq_tools_dump_log_end(d, &s);
    assert_string_equal(cap_text(&c), "{\"batches\":[],\"summary\":{\"records\":0,\"batches\":0,"
                                      "\"log_start\":0,\"log_end\":0,\"last_epoch\":0,"
                                      "\"qstate_epoch\":0,\"voted_id\":-1,\"leader_id\":-1}}\n");
    cap_close(&c);
    cap_open(&c);
    kq_tools_dump_init(d, c.f, KQ_TOOLS_DUMP_TEXT, false);
    kq_tools_dump_log_begin(d);
    kq_tools_dump_log_end(d, &s);
    assert_string_equal(cap_text(&c), "records=0 batches=0 log_start=0 log_end=0 last_epoch=0 "
                                      "qstate_epoch=0 voted_id=-1 leader_id=-1\n");
    cap_close(&c);
    free(d);
}

/* A record of a type this build does not know (field 99) and a Topic whose name breaks the
 * rules both print as UNKNOWN with what the codec can say; the batch still dumps. */
static void test_log_dump_reports_undecodable_records_as_unknown(void **state)
{
    (void)state;
    uint8_t batch[64];
    size_t n = 0;
    kq_tools_dump *d = malloc(sizeof *d);
    capture c;

    batch[n++] = 3; /* unknown field 99, varint 1 */
    batch[n++] = 0x98;
    batch[n++] = 0x06;
    batch[n++] = 0x01;
    batch[n++] = 25; /* Record{topic: TopicRecord{name: "a b", topic_id: 16 bytes}} */
    batch[n++] = 0x6a;
    batch[n++] = 23;
    batch[n++] = 0x0a;
    batch[n++] = 3;
    memcpy(batch + n, "a b", 3);
    n += 3;
    batch[n++] = 0x12;
    batch[n++] = 16;
    memcpy(batch + n, TOPIC_ID, 16);
    n += 16;

    kq_tools_log_batch lb = {7, 1, 2, 0, batch, n, 12 + n};
    for (int f = 0; f < 2; f++) {
        cap_open(&c);
        kq_tools_dump_init(d, c.f, f ? KQ_TOOLS_DUMP_JSON : KQ_TOOLS_DUMP_TEXT, false);
        kq_tools_dump_log_begin(d);
        if (kq_tools_dump_log_batch(d, &lb) != 0)
            fail_msg("%s", d->err);
        const char *out = cap_text(&c);
        if (f == 0) {
            assert_non_null(strstr(out, "| offset: 7 valueSize: 3 payload: {\"type\":\"UNKNOWN\","
                                        "\"description\":\"Unknown bytes=3\",\"error\":\""));
            assert_non_null(strstr(out, "| offset: 8 valueSize: 25 payload: {\"type\":"
                                        "\"UNKNOWN\",\"description\":\"Topic bytes=25\","
                                        "\"error\":\""));
        } else {
            kq_tools_log_summary s = {7, 9, 1, 1, -1, -1};

            kq_tools_dump_log_end(d, &s);
            out = cap_text(&c);
            assert_true(json_valid(out));
            assert_non_null(strstr(out, "{\"offset\":8,\"valueSize\":25,\"type\":\"UNKNOWN\","
                                        "\"description\":\"Topic bytes=25\",\"error\":\""));
        }
        cap_close(&c);
    }
    free(d);
}

/* Bytes that are not kq.Records, a short batch and trailing bytes are errors, and nothing of
 * the batch is printed. */
static void test_log_dump_refuses_a_malformed_batch_without_printing(void **state)
{
    (void)state;
    static const uint8_t garbage[] = {2, 0xff, 0xff};
    static const uint8_t noop2[] = {2, 0x12, 0x00, 2, 0x12, 0x00, 9};
    kq_tools_dump *d = malloc(sizeof *d);
    struct {
        const uint8_t *b;
        size_t len;
        int32_t count;
        const char *err;
    } cases[] = {
        {garbage, sizeof garbage, 1, "does not parse as a kq.Record"},
        {noop2, 6, 3, "truncated"},
        {noop2, 7, 2, "holds 1 bytes after its 2 records"},
        {noop2, 6, 0, "record count 0"},
    };
    capture c;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kq_tools_log_batch lb = {0, 1, cases[i].count, 0, cases[i].b, cases[i].len, 0};

        cap_open(&c);
        kq_tools_dump_init(d, c.f, KQ_TOOLS_DUMP_TEXT, false);
        assert_int_equal(kq_tools_dump_log_batch(d, &lb), KQ_ERR_MALFORMED);
        if (!strstr(d->err, cases[i].err))
            fail_msg("case %zu: '%s' not in '%s'", i, cases[i].err, d->err);
        assert_string_equal(cap_text(&c) ? cap_text(&c) : "", "");
        cap_close(&c);
    }
    free(d);
}

/* ---- snapshot ---------------------------------------------------------------------------- */

static void test_snapshot_dump_numbers_records_by_index(void **state)
{
    (void)state;
    kq_record r[N_RECS];
    char want[N_RECS][1024], line[1200], desc[1024];
    size_t sizes[N_RECS];
    kq_tools_snapshot_info info = {214, 2, 8622};
    kq_tools_dump *d = malloc(sizeof *d);
    kq_buf b;
    capture c;

    every_record(r);
    expected_payloads(want);
    encode_all(r + 3, N_RECS - 3, &b, sizes); /* an image holds no control or test records */
    cap_open(&c);
    kq_tools_dump_init(d, c.f, KQ_TOOLS_DUMP_TEXT, false);
    assert_int_equal(kq_tools_dump_snapshot(d, &info, b.data, b.len), 0);
    const char *p = cap_text(&c);
    for (int i = 0; i < N_RECS - 3; i++) {
        snprintf(line, sizeof line, "| index: %d valueSize: %zu payload: %s\n", i, sizes[i],
                 want[i + 3]);
        if (strncmp(p, line, strlen(line)) != 0)
            fail_msg("record %d:\nwant %sgot  %.*s", i, line, (int)strcspn(p, "\n") + 1, p);
        p += strlen(line);
    }
    assert_string_equal(p, "records=10 end_offset=214 epoch=2 size=8622\n");
    cap_close(&c);

    cap_open(&c);
    kq_tools_dump_init(d, c.f, KQ_TOOLS_DUMP_JSON, false);
    assert_int_equal(kq_tools_dump_snapshot(d, &info, b.data, b.len), 0);
    assert_true(json_valid(cap_text(&c)));
    assert_non_null(strstr(cap_text(&c), "{\"records\":[{\"index\":0,\"valueSize\":"));
    assert_non_null(strstr(cap_text(&c), "\"summary\":{\"records\":10,\"end_offset\":214,"
                                         "\"epoch\":2,\"size\":8622}}\n"));
    cap_close(&c);

    cap_open(&c);
    kq_tools_dump_init(d, c.f, KQ_TOOLS_DUMP_LINES, false);
    assert_int_equal(kq_tools_dump_snapshot(d, &info, b.data, b.len), 0);
    kq_record_render(&r[6], desc, sizeof desc);
    snprintf(line, sizeof line, "\nindex=3 %s\n", desc);
    assert_non_null(strstr(cap_text(&c), line));
    cap_close(&c);

    /* an empty snapshot, and a truncated one */
    cap_open(&c);
    kq_tools_dump_init(d, c.f, KQ_TOOLS_DUMP_TEXT, false);
    assert_int_equal(kq_tools_dump_snapshot(d, &info, NULL, 0), 0);
    assert_string_equal(cap_text(&c), "records=0 end_offset=214 epoch=2 size=8622\n");
    cap_close(&c);
    cap_open(&c);
    kq_tools_dump_init(d, c.f, KQ_TOOLS_DUMP_TEXT, false);
    assert_int_equal(kq_tools_dump_snapshot(d, &info, b.data, b.len - 1), KQ_ERR_MALFORMED);
    assert_non_null(strstr(d->err, "snapshot record 9"));
    cap_close(&c);
    free(d);
    kq_buf_free(&b);
}

/* ---- partition logs ---------------------------------------------------------------------- */

static void plog_fixture(kq_buf *vals, kq_tools_plog_partition *p, kq_epoch_entry *eps)
{
    static const uint8_t v0[] = "deposit 100";
    static const uint8_t v1[] = "caf\xc3\xa9 \\ \"q\"\t";
    static const uint8_t v2[] = {0x00, 0xff, 'a', '\n'};
    const uint8_t *const vs[] = {v0, v1, v2};
    const size_t lens[] = {11, 12, 4};

    assert_int_equal(kq_data_records_pack(vs, lens, 3, vals), 0);
    memset(p, 0, sizeof *p);
    memcpy(p->tp.topic_id, TOPIC_ID, 16);
    p->tp.partition = 2;
    p->topic = "ledger";
    p->state = (kq_plog_state){.log_start_offset = 5,
                               .log_end_offset = 8,
                               .high_watermark = 7,
                               .partition_epoch = 3,
                               .last_epoch = 4};
    eps[0] = (kq_epoch_entry){.epoch = 0, .start_offset = 0};
    eps[1] = (kq_epoch_entry){.epoch = 4, .start_offset = 6};
    p->epochs = eps;
    p->n_epochs = 2;
}

static void dump_plog(kq_tools_dump_format fmt, bool values, capture *c)
{
    kq_buf vals = {0};
    kq_tools_plog_partition p;
    kq_epoch_entry eps[2];
    kq_tools_dump *d = malloc(sizeof *d);

    plog_fixture(&vals, &p, eps);
    kq_plog_batch b = {.base_offset = 5,
                       .leader_epoch = 4,
                       .count = 3,
                       .crc32c = 42,
                       .producer_id = 9167478527408224341,
                       .producer_epoch = 0,
                       .base_sequence = 10,
                       .records = vals.data,
                       .len = vals.len};
    cap_open(c);
    kq_tools_dump_init(d, c->f, fmt, values);
    kq_tools_dump_plog_begin(d);
    kq_tools_dump_plog_partition(d, &p);
    if (kq_tools_dump_plog_batch(d, &b) != 0)
        fail_msg("%s", d->err);
    kq_tools_dump_plog_partition_end(d);
    p.topic = NULL;
    p.n_epochs = 0;
    p.tp.partition = 3;
    p.state = (kq_plog_state){0};
    kq_tools_dump_plog_partition(d, &p);
    kq_tools_dump_plog_partition_end(d);
    kq_tools_dump_plog_end(d);
    kq_buf_free(&vals);
    free(d);
}

static void test_partition_log_dump_shows_offsets_producer_and_values(void **state)
{
    (void)state;
    char want[2048];
    capture c;

    kq_uuid_format(TOPIC_ID, TOPIC_S);
    for (int values = 0; values < 2; values++) {
        dump_plog(KQ_TOOLS_DUMP_TEXT, values, &c);
        snprintf(want, sizeof want,
                 "topicId: %s partition: 2 topic: ledger logStartOffset: 5 logEndOffset: 8 "
                 "highWatermarkCheckpoint: 7 partitionEpoch: 3 leaderEpochCache: 0@0,4@6\n"
                 "baseOffset: 5 lastOffset: 7 count: 3 baseSequence: 10 lastSequence: 12 "
                 "producerId: 9167478527408224341 producerEpoch: 0 partitionLeaderEpoch: 4 "
                 "size: %d crc: 42\n"
                 "| offset: 5 valueSize: 11 sequence: 10%s\n"
                 "| offset: 6 valueSize: 12 sequence: 11%s\n"
                 "| offset: 7 valueSize: 4 sequence: 12%s\n"
                 "topicId: %s partition: 3 logStartOffset: 0 logEndOffset: 0 "
                 "highWatermarkCheckpoint: 0 partitionEpoch: 0 leaderEpochCache: -\n"
                 "partitions=2 batches=1 records=3\n",
                 TOPIC_S, KQ_PLOG_BATCH_HEADER_LEN + 3 + 11 + 12 + 4,
                 values ? " payload: deposit 100" : "",
                 values ? " payload: caf\xc3\xa9 \\\\ \"q\"\\x09" : "",
                 values ? " payload: \\x00\\xffa\\x0a" : "", TOPIC_S);
        assert_string_equal(cap_text(&c), want);
        cap_close(&c);
    }
}

static void test_partition_log_json_values_are_utf8_or_base64(void **state)
{
    (void)state;
    char want[2048];
    capture c;

    kq_uuid_format(TOPIC_ID, TOPIC_S);
    dump_plog(KQ_TOOLS_DUMP_JSON, true, &c);
    assert_true(json_valid(cap_text(&c)));
    snprintf(want, sizeof want,
             "{\"partitions\":[{\"topicId\":\"%s\",\"partition\":2,\"topic\":\"ledger\","
             "\"logStartOffset\":5,\"logEndOffset\":8,\"highWatermarkCheckpoint\":7,"
             "\"partitionEpoch\":3,\"leaderEpochCache\":[{\"epoch\":0,\"startOffset\":0},"
             "{\"epoch\":4,\"startOffset\":6}],\"batches\":[{\"baseOffset\":5,\"lastOffset\":7,"
             "\"count\":3,\"baseSequence\":10,\"lastSequence\":12,\"producerId\":"
             "9167478527408224341,\"producerEpoch\":0,\"partitionLeaderEpoch\":4,\"size\":%d,"
             "\"crc\":42,\"records\":[{\"offset\":5,\"valueSize\":11,\"sequence\":10,\"value\":"
             "\"deposit 100\"},{\"offset\":6,\"valueSize\":12,\"sequence\":11,\"value\":"
             "\"caf\xc3\xa9 \\\\ \\\"q\\\"\\t\"},{\"offset\":7,\"valueSize\":4,\"sequence\":12,"
             "\"valueBase64\":\"AP9hCg==\"}]}]},{\"topicId\":\"%s\",\"partition\":3,\"topic\":"
             "null,\"logStartOffset\":0,\"logEndOffset\":0,\"highWatermarkCheckpoint\":0,"
             "\"partitionEpoch\":0,\"leaderEpochCache\":[],\"batches\":[]}],\"summary\":"
             "{\"partitions\":2,\"batches\":1,\"records\":3}}\n",
             TOPIC_S, KQ_PLOG_BATCH_HEADER_LEN + 3 + 11 + 12 + 4, TOPIC_S);
    assert_string_equal(cap_text(&c), want);
    cap_close(&c);

    /* without --print-values: no values */
    dump_plog(KQ_TOOLS_DUMP_JSON, false, &c);
    assert_true(json_valid(cap_text(&c)));
    assert_null(strstr(cap_text(&c), "\"value\":"));
    assert_null(strstr(cap_text(&c), "\"valueBase64\":"));
    assert_non_null(strstr(cap_text(&c), "{\"offset\":7,\"valueSize\":4,\"sequence\":12}"));
    cap_close(&c);
}

static void test_partition_log_not_idempotent_and_malformed(void **state)
{
    (void)state;
    static const uint8_t bad[] = {5, 'a'};
    kq_tools_dump *d = malloc(sizeof *d);
    kq_buf vals = {0};
    const uint8_t *v[] = {(const uint8_t *)"x"};
    size_t l[] = {1};
    capture c;

    assert_int_equal(kq_data_records_pack(v, l, 1, &vals), 0);
    kq_plog_batch b = {.base_offset = 0,
                       .leader_epoch = 1,
                       .count = 1,
                       .producer_id = -1,
                       .producer_epoch = -1,
                       .base_sequence = -1,
                       .records = vals.data,
                       .len = vals.len};
    cap_open(&c);
    kq_tools_dump_init(d, c.f, KQ_TOOLS_DUMP_TEXT, false);
    assert_int_equal(kq_tools_dump_plog_batch(d, &b), 0);
    assert_string_equal(cap_text(&c),
                        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 "
                        "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 1 size: 28 crc: "
                        "0\n| offset: 0 valueSize: 1 sequence: -1\n");
    cap_close(&c);
    b.records = bad;
    b.len = sizeof bad;
    cap_open(&c);
    kq_tools_dump_init(d, c.f, KQ_TOOLS_DUMP_TEXT, true);
    assert_int_equal(kq_tools_dump_plog_batch(d, &b), KQ_ERR_MALFORMED);
    assert_non_null(strstr(d->err, "batch at offset 0 does not decode"));
    assert_string_equal(cap_text(&c) ? cap_text(&c) : "", "");
    cap_close(&c);
    kq_buf_free(&vals);
    free(d);
}

/* Record strings are not checked for UTF-8 by the decoder: a value with a byte that is not
 * UTF-8 still makes valid JSON (U+FFFD), valid UTF-8 passes as it is. */
static void test_json_stays_valid_with_bytes_that_are_not_utf8(void **state)
{
    (void)state;
    kq_record r = {.type = KQ_REC_CONFIG};
    size_t size;
    kq_buf b;
    capture c;

    r.config = (kq_rec_config){KQ_CONFIG_RESOURCE_BROKER, "1", "k\xc3\xa9", "a\xff\xc3(\x01"};
    encode_all(&r, 1, &b, &size);
    dump_batch(KQ_TOOLS_DUMP_JSON, &b, 1, &c);
    assert_true(json_valid(cap_text(&c)));
    assert_non_null(strstr(cap_text(&c), "\"data\":{\"resourceType\":4,\"resourceName\":\"1\","
                                         "\"name\":\"k\xc3\xa9\",\"value\":\"a\\ufffd\\ufffd("
                                         "\\u0001\"}"));
    cap_close(&c);
    dump_batch(KQ_TOOLS_DUMP_TEXT, &b, 1, &c);
    assert_non_null(strstr(cap_text(&c), "\"value\":\"a\\ufffd\\ufffd(\\u0001\"}"));
    cap_close(&c);
    kq_buf_free(&b);
}

static void test_record_type_names_are_kafkas(void **state)
{
    (void)state;
    assert_string_equal(kq_tools_record_type_name(KQ_REC_REGISTER_BROKER),
                        "REGISTER_BROKER_RECORD");
    assert_string_equal(kq_tools_record_type_name(KQ_REC_BROKER_REGISTRATION_CHANGE),
                        "BROKER_REGISTRATION_CHANGE_RECORD");
    assert_string_equal(kq_tools_record_type_name(KQ_REC_NONE), "UNKNOWN");
    assert_string_equal(kq_tools_record_type_name((kq_rec_type)99), "UNKNOWN");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_checker_itself),
        cmocka_unit_test(test_log_dump_decodes_every_metadata_record_in_text),
        cmocka_unit_test(test_log_dump_json_names_every_record_type_and_field),
        cmocka_unit_test(test_log_dump_lines_keep_one_line_per_record),
        cmocka_unit_test(test_log_dump_control_batch_and_empty_log),
        cmocka_unit_test(test_log_dump_reports_undecodable_records_as_unknown),
        cmocka_unit_test(test_log_dump_refuses_a_malformed_batch_without_printing),
        cmocka_unit_test(test_snapshot_dump_numbers_records_by_index),
        cmocka_unit_test(test_partition_log_dump_shows_offsets_producer_and_values),
        cmocka_unit_test(test_partition_log_json_values_are_utf8_or_base64),
        cmocka_unit_test(test_partition_log_not_idempotent_and_malformed),
        cmocka_unit_test(test_json_stays_valid_with_bytes_that_are_not_utf8),
        cmocka_unit_test(test_record_type_names_are_kafkas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
