/*
 * Writes the seed corpus of every fuzz target: small valid inputs, in each target's input
 * format (see the comment at the top of each fuzz_*.c). The corpus is checked in under
 * tests/fuzz/corpus; regenerate it after changing a format or adding a target:
 *
 *   build/fuzz/bin/fuzz_seeds tests/fuzz/corpus          writes DIR/<target>/seed_<name>
 *   build/fuzz/bin/fuzz_seeds --check tests/fuzz/corpus  fails if a seed is missing or differs
 *
 * Deterministic: the same build writes the same bytes.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_wire.h"
#include "kq/codec.h"
#include "answers.h"
#include "kq/ctl_codec.h"
#include "kq/data_codec.h"
#include "kq/error.h"
#include "kq/image.h"
#include "kq/records.h"
#include "kq/store.h"
#include "kq/util.h"
#include "pb_wire.h"

static const char *root;
static bool check;
static int failures;

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void put_be64(uint8_t *p, uint64_t v)
{
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

/* Writes (or with --check compares) root/target/seed_name. */
static void put_with(const char *target, const char *name, const uint8_t *prefix, size_t plen,
                     const uint8_t *data, size_t len);

static void put(const char *target, const char *name, const uint8_t *data, size_t len)
{
    char path[4096];
    FILE *f;

    /* fuzz_unpack_cost starts from every envelope seed: byte 0 = 0 Request, 1 Response */
    if (!strcmp(target, "decode_request") || !strcmp(target, "decode_response")) {
        uint8_t type = strcmp(target, "decode_request") == 0 ? 0 : 1;

        snprintf(path, sizeof path, "%s_%s", type ? "resp" : "req", name);
        put_with("unpack_cost", path, &type, 1, data, len);
    }

    snprintf(path, sizeof path, "%s/%s", root, target);
    if (!check && mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "fuzz_seeds: cannot create %s: %s\n", path, strerror(errno));
        failures++;
        return;
    }
    snprintf(path, sizeof path, "%s/%s/seed_%s", root, target, name);
    if (check) {
        uint8_t *have = malloc(len + 1);
        size_t n = 0;

        f = fopen(path, "rb");
        if (f && have)
            n = fread(have, 1, len + 1, f);
        if (!f || !have || n != len || (len && memcmp(have, data, len))) {
            fprintf(stderr, "fuzz_seeds: %s is %s; regenerate the corpus (fuzz_seeds %s)\n", path,
                    f ? "out of date" : "missing", root);
            failures++;
        }
        if (f)
            fclose(f);
        free(have);
        return;
    }
    f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f)) {
        fprintf(stderr, "fuzz_seeds: cannot write %s\n", path);
        failures++;
    }
}

/* put() of a buffer, freed afterwards; rc != 0 (the encoder failed) is a failure. */
static void put_buf(const char *target, const char *name, int rc, kq_buf *b)
{
    if (rc) {
        fprintf(stderr, "fuzz_seeds: cannot encode %s/%s (%d)\n", target, name, rc);
        failures++;
    } else {
        put(target, name, b->data, b->len);
    }
    kq_buf_free(b);
}

/* prefix bytes, then data */
static void put_with(const char *target, const char *name, const uint8_t *prefix, size_t plen,
                     const uint8_t *data, size_t len)
{
    uint8_t *p = malloc(plen + len + 1);

    if (!p) {
        failures++;
        return;
    }
    memcpy(p, prefix, plen);
    if (len)
        memcpy(p + plen, data, len);
    put(target, name, p, plen + len);
    free(p);
}

/* A steered seed for a target that wraps a body into an envelope: [index, (sender,)] body,
 * the body taken out of the encoded envelope `b` (freed). */
static void put_body(const char *target, const char *name, const fuzz_api *apis, size_t n_apis,
                     uint32_t api_key, bool with_sender, int rc, kq_buf *b)
{
    const uint8_t *body = NULL;
    size_t blen = 0;
    uint8_t prefix[2] = {0, 0xff};
    size_t i;

    for (i = 0; i < n_apis && apis[i].api_key != api_key; i++)
        ;
    if (rc || i == n_apis || fuzz_find_field(b->data, b->len, apis[i].field, &body, &blen)) {
        fprintf(stderr, "fuzz_seeds: cannot encode %s/%s (%d)\n", target, name, rc);
        failures++;
        kq_buf_free(b);
        return;
    }
    prefix[0] = (uint8_t)i;
    put_with(target, name, prefix, with_sender ? 2 : 1, body, blen);
    kq_buf_free(b);
}

/* ---- the codec targets that already existed -------------------------------------------- */

static void codec_seeds(void)
{
    kq_raft_msg m;
    kq_buf b = {0}, p = {0};
    kq_codec_batch batch;
    kq_quorum_description d;
    const int32_t voters[] = {1, 2, 3};
    static const uint8_t rec[] = {1, 2, 3, 4};
    const uint8_t *recs[1] = {rec};
    size_t lens[1] = {sizeof rec};
    uint8_t one = 3;
    int rc;

    memset(&m, 0, sizeof m);
    m.from = 1;
    m.leader_id = 1;
    m.epoch = 3;
    m.type = KQ_RAFT_VOTE_REQ;
    m.u.vote_req.candidate_id = 1;
    m.u.vote_req.last_epoch = 2;
    m.u.vote_req.last_offset = 10;
    put_buf("decode_request", "vote", kq_codec_encode_raft_request(&m, "cluster", &b), &b);
    m.type = KQ_RAFT_BEGIN_EPOCH_REQ;
    put_buf("decode_request", "begin", kq_codec_encode_raft_request(&m, "cluster", &b), &b);
    m.type = KQ_RAFT_END_EPOCH_REQ;
    m.u.end_req.n_preferred = 2;
    m.u.end_req.preferred[0] = 2;
    m.u.end_req.preferred[1] = 3;
    put_buf("decode_request", "end", kq_codec_encode_raft_request(&m, "cluster", &b), &b);
    memset(&m.u, 0, sizeof m.u);
    m.type = KQ_RAFT_FETCH_REQ;
    m.u.fetch_req.fetch_offset = 10;
    m.u.fetch_req.last_fetched_epoch = 2;
    m.u.fetch_req.max_wait_ms = 500;
    put_buf("decode_request", "fetch", kq_codec_encode_raft_request(&m, "cluster", &b), &b);
    put_buf("decode_request", "describe", kq_codec_encode_describe_request("cluster", &b), &b);
    put_buf("decode_request", "write", kq_codec_encode_write_request("", recs, lens, 1, &b), &b);
    /* KIP-853 voter changes (directory ids ride on the requests above too) */
    {
        kq_voter v = {.key = {.id = 4}, .port = 9093, .kraft_max = 1};
        memset(v.key.dir, 0x44, sizeof v.key.dir);
        snprintf(v.host, sizeof v.host, "c4");
        memset(&m, 0, sizeof m);
        m.from = -1;
        m.leader_id = -1;
        m.u.voter_req.voter = &v;
        m.type = KQ_RAFT_ADD_VOTER_REQ;
        put_buf("decode_request", "add_voter", kq_codec_encode_raft_request(&m, "cluster", &b), &b);
        m.type = KQ_RAFT_REMOVE_VOTER_REQ;
        put_buf("decode_request", "remove_voter", kq_codec_encode_raft_request(&m, "cluster", &b),
                &b);
        m.type = KQ_RAFT_UPDATE_VOTER_REQ;
        m.from = 4;
        m.epoch = 3;
        memset(m.from_dir, 0x44, sizeof m.from_dir);
        put_buf("decode_request", "update_voter", kq_codec_encode_raft_request(&m, "cluster", &b),
                &b);
        memset(&m, 0, sizeof m);
        m.type = KQ_RAFT_ADD_VOTER_RESP;
        m.leader_id = 1;
        m.epoch = 3;
        m.error = KQ_ERR_DUPLICATE_VOTER;
        snprintf(m.u.voter_resp.error_message, sizeof m.u.voter_resp.error_message, "a voter");
        put_buf("decode_response", "add_voter", kq_codec_encode_raft_response(&m, NULL, 0, &b), &b);
    }

    memset(&m, 0, sizeof m);
    m.leader_id = 1;
    m.epoch = 3;
    m.type = KQ_RAFT_VOTE_RESP;
    m.u.vote_resp.granted = true;
    put_buf("decode_response", "vote", kq_codec_encode_raft_response(&m, NULL, 0, &b), &b);
    m.type = KQ_RAFT_BEGIN_EPOCH_RESP;
    put_buf("decode_response", "begin", kq_codec_encode_raft_response(&m, NULL, 0, &b), &b);
    m.type = KQ_RAFT_END_EPOCH_RESP;
    put_buf("decode_response", "end", kq_codec_encode_raft_response(&m, NULL, 0, &b), &b);
    memset(&m.u, 0, sizeof m.u);
    m.type = KQ_RAFT_FETCH_RESP;
    m.u.fetch_resp.high_watermark = 1;
    m.u.fetch_resp.diverging = true;
    m.u.fetch_resp.diverging_epoch = 1;
    m.u.fetch_resp.diverging_end_offset = 1;
    rc = kq_codec_append_leader_change(&p, 1, voters, 3, voters, 2);
    rc |= kq_codec_append_noop(&p);
    rc |= kq_codec_append_opaque(&p, rec, sizeof rec);
    batch.base_offset = 0;
    batch.epoch = 3;
    batch.count = 3;
    batch.records = p.data;
    batch.len = p.len;
    batch.crc32c = kq_crc32c(0, p.data, p.len);
    put_buf("decode_response", "fetch", rc || kq_codec_encode_raft_response(&m, &batch, 1, &b), &b);
    memset(&d, 0, sizeof d);
    strcpy(d.cluster_id, "cluster");
    d.leader_id = 1;
    d.leader_epoch = 3;
    d.high_watermark = 3;
    d.n_voters = 1;
    d.voters[0].id = 1;
    strcpy(d.voters[0].directory_id, "AAAAAAAAAAAAAAAAAAAAAg");
    d.n_observers = 1;
    d.observers[0].id = 7;
    d.observers[0].last_fetch_timestamp = -1;
    d.n_nodes = 1;
    d.nodes[0].id = 1;
    strcpy(d.nodes[0].listener, "CONTROLLER");
    strcpy(d.nodes[0].host, "localhost");
    d.nodes[0].port = 9093;
    put_buf("decode_response", "describe", kq_codec_encode_describe_response(&d, &b), &b);
    put_buf("decode_response", "write", kq_codec_encode_write_response(5, 3, &b), &b);
    put_buf("decode_response", "error",
            kq_codec_encode_error_response(KQ_API_WRITE, 41, "not the active controller", 2, 3,
                                           "localhost:9093", &b),
            &b);
    /* walk_records: first byte is the record count */
    put_with("walk_records", "mixed", &one, 1, p.data, p.len);
    kq_buf_free(&p);
}

/* ---- metadata records, an image ---------------------------------------------------------- */

static const uint8_t topic_id[16] = {0x5e, 0xed, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};

/* ACL bindings and filters for the ACL API seeds. */
static const kq_acl seed_acls[2] = {
    {.resource_type = KQ_ACL_RESOURCE_TOPIC,
     .resource_name = "orders",
     .pattern_type = KQ_ACL_PATTERN_LITERAL,
     .principal = "User:CN=reader",
     .host = "*",
     .operation = KQ_ACL_OP_READ,
     .permission = KQ_ACL_ALLOW},
    {.resource_type = KQ_ACL_RESOURCE_CLUSTER,
     .resource_name = KQ_ACL_CLUSTER_NAME,
     .pattern_type = KQ_ACL_PATTERN_LITERAL,
     .principal = "User:*",
     .host = "*",
     .operation = KQ_ACL_OP_ALTER,
     .permission = KQ_ACL_DENY},
};
static const kq_acl_filter seed_filters[2] = {
    {KQ_ACL_ANY, NULL, KQ_ACL_ANY, NULL, NULL, KQ_ACL_ANY, KQ_ACL_ANY},
    {KQ_ACL_RESOURCE_TOPIC, "orders", KQ_ACL_PATTERN_MATCH, "User:CN=reader", "*", KQ_ACL_OP_READ,
     KQ_ACL_ALLOW},
};
static int32_t one_two[] = {1, 2};
static kq_rec_endpoint endpoint = {"PLAINTEXT", "localhost", 9092};

/* One record of every kind, in an order that applies to an empty image. */
static int sample_records(kq_record *r, int max)
{
    int n = 0;

    if (max < 11)
        return 0;
    memset(r, 0, sizeof *r * (size_t)max);
    for (int32_t id = 1; id <= 2; id++) {
        r[n].type = KQ_REC_REGISTER_BROKER;
        r[n].register_broker.broker_id = id;
        r[n].register_broker.incarnation_id[0] = (uint8_t)id;
        r[n].register_broker.broker_epoch = id;
        r[n].register_broker.endpoints = &endpoint;
        r[n].register_broker.n_endpoints = 1;
        r[n].register_broker.rack = id == 1 ? "rack-a" : NULL;
        r[n].register_broker.fenced = true;
        r[n].register_broker.registration_offset = -1;
        n++;
    }
    r[n].type = KQ_REC_BROKER_REGISTRATION_CHANGE;
    r[n].broker_change.broker_id = 1;
    r[n].broker_change.broker_epoch = 1;
    r[n].broker_change.fenced = KQ_FENCE_UNFENCE;
    n++;
    r[n].type = KQ_REC_TOPIC;
    r[n].topic.name = "orders";
    memcpy(r[n].topic.topic_id, topic_id, 16);
    n++;
    r[n].type = KQ_REC_PARTITION;
    memcpy(r[n].partition.topic_id, topic_id, 16);
    r[n].partition.replicas = (kq_rec_ids){one_two, 2};
    r[n].partition.isr = (kq_rec_ids){one_two, 2};
    r[n].partition.leader = 1;
    n++;
    r[n].type = KQ_REC_PARTITION_CHANGE;
    memcpy(r[n].partition_change.topic_id, topic_id, 16);
    r[n].partition_change.has_isr = true;
    r[n].partition_change.isr = (kq_rec_ids){one_two, 1};
    r[n].partition_change.leader = KQ_LEADER_UNCHANGED;
    r[n].partition_change.leader_recovery_state = KQ_RECOVERY_UNCHANGED;
    n++;
    r[n].type = KQ_REC_CONFIG;
    r[n].config.resource_type = KQ_CONFIG_RESOURCE_TOPIC;
    r[n].config.resource_name = "orders";
    r[n].config.name = "min.insync.replicas";
    r[n].config.value = "2";
    n++;
    r[n].type = KQ_REC_FEATURE_LEVEL;
    r[n].feature_level.name = "metadata.version";
    r[n].feature_level.level = 1;
    n++;
    r[n].type = KQ_REC_ACL;
    memcpy(r[n].acl.id, topic_id, 16);
    r[n].acl.resource_type = KQ_ACL_RESOURCE_TOPIC;
    r[n].acl.resource_name = "ord";
    r[n].acl.pattern_type = KQ_ACL_PATTERN_PREFIXED;
    r[n].acl.principal = "User:CN=reader";
    r[n].acl.host = "*";
    r[n].acl.operation = KQ_ACL_OP_DESCRIBE;
    r[n].acl.permission = KQ_ACL_ALLOW;
    n++;
    r[n].type = KQ_REC_REMOVE_ACL;
    memcpy(r[n].remove_acl.id, topic_id, 16);
    n++;
    r[n].type = KQ_REC_LEADER_CHANGE;
    r[n].leader_change.leader_id = 1;
    r[n].leader_change.voters = (kq_rec_ids){one_two, 2};
    r[n].leader_change.granting_voters = (kq_rec_ids){one_two, 1};
    n++;
    r[n].type = KQ_REC_NOOP;
    n++;
    r[n].type = KQ_REC_UNREGISTER_BROKER;
    r[n].unregister_broker.broker_id = 2;
    r[n].unregister_broker.broker_epoch = 2;
    n++;
    return n;
}

static kq_image *sample_image(void)
{
    kq_record r[16];
    int n = sample_records(r, 16);
    kq_image *img = kq_image_new();

    for (int i = 0; img && i < n - 1; i++) /* all but the UnregisterBroker */
        if (kq_image_apply(img, i, &r[i]) != 0) {
            fprintf(stderr, "fuzz_seeds: record %d does not apply: %s\n", i, kq_image_error(img));
            failures++;
        }
    return img;
}

static void record_seeds(void)
{
    kq_record r[16];
    int n = sample_records(r, 16);
    kq_buf b = {0}, batch = {0};
    char err[256] = "", name[32];
    const uint8_t zero = 0, odd = 1, two = 2;

    for (int i = 0; i < n; i++) {
        if (kq_record_encode(&r[i], &b, err, sizeof err) ||
            kq_record_append(&batch, &r[i], err, sizeof err)) {
            fprintf(stderr, "fuzz_seeds: record %d: %s\n", i, err);
            failures++;
            kq_buf_free(&b);
            continue;
        }
        snprintf(name, sizeof name, "%02d_%s", i, kq_rec_type_name(r[i].type));
        put_with("records", name, &zero, 1, b.data, b.len);
        put_with("unpack_cost", name, &two, 1, b.data, b.len); /* 2: a kq.Record */
        kq_buf_free(&b);
    }
    put_with("records", "batch", &odd, 1, batch.data, batch.len);
    kq_buf_free(&batch);
    /* KIP-853 quorum records */
    static kq_voter_set set = {.n = 2};
    for (int i = 0; i < 2; i++) {
        set.v[i].key.id = 1 + i;
        memset(set.v[i].key.dir, 0x11 * (i + 1), 16);
        snprintf(set.v[i].host, sizeof set.v[i].host, "c%d", i + 1);
        set.v[i].port = 9093;
        set.v[i].kraft_max = 1;
    }
    kq_raft_control kv = {.offset = -1, .kraft_version = 1};
    kq_raft_control vs = {.offset = -1, .kraft_version = -1, .voters = &set, .unsafe_recovery = 1};
    const kq_raft_control *ctl[2] = {&kv, &vs};
    const char *ctl_names[2] = {"kraft_version", "voters"};
    for (int i = 0; i < 2; i++) {
        kq_buf one = {0};
        if (kq_control_append(&one, ctl[i], err, sizeof err) != 0) {
            fprintf(stderr, "fuzz_seeds: %s: %s\n", ctl_names[i], err);
            failures++;
            continue;
        }
        size_t p = 0;
        uint64_t len = 0;
        kq_pb_read_varint(one.data, one.len, &p, &len); /* the record without its prefix */
        put_with("records", ctl_names[i], &zero, 1, one.data + p, (size_t)len);
        put_with("unpack_cost", ctl_names[i], &two, 1, one.data + p, (size_t)len);
        kq_buf_free(&one);
    }
}

/* ---- controller API requests and responses ------------------------------------------------ */

static void ctl_request(const char *name, const kq_ctl_request *req)
{
    kq_buf b = {0};
    int rc = kq_ctl_encode_request("fuzz", 1, req, &b);

    put_body("ctl_request", name, fuzz_ctl_apis, FUZZ_N_CTL_APIS, req->api_key, true, rc, &b);
}

static void ctl_request_seeds(void)
{
    static const kq_ap_isr_member isr[] = {{1, 1}, {2, -1}};
    static const kq_ap_partition app[] = {{0, 1, 1, KQ_RECOVERY_RECOVERED, isr, 2}};
    static const kq_partition_assignment as[] = {{0, one_two, 2}};
    static const kq_config_kv cfg[] = {{"retention.ms", "60000"}};
    static const kq_elect_target tg[] = {{"orders", 0}, {"orders", 1}};
    static const kq_config_op ops[] = {{"retention.ms", "1", KQ_CONFIG_OP_SET},
                                       {"cleanup.policy", NULL, KQ_CONFIG_OP_DELETE}};
    static const char *const keys[] = {"min.insync.replicas"};
    static const kq_feature_update fu[] = {{"metadata.version", 2, KQ_FEATURE_UPGRADE}};
    static const char *const names[] = {"orders", "events"};
    kq_ap_topic apt[1] = {{.name = "orders", .partitions = app, .n_partitions = 1}};
    kq_create_topic ct[1] = {{"orders", 3, 2, NULL, 0, cfg, 1, {0}}};
    kq_create_topic ct_manual[1] = {{"events", -1, -1, as, 1, NULL, 0, {0}}};
    kq_delete_topic dt[2] = {{.name = "orders"}, {.name = NULL}};
    kq_create_partitions cp[1] = {{"orders", 4, NULL, 0}};
    kq_alter_config_resource acr[1] = {{KQ_CONFIG_RESOURCE_TOPIC, "orders", ops, 2}};
    kq_describe_config_resource dcr[2] = {{KQ_CONFIG_RESOURCE_TOPIC, "orders", keys, 1},
                                          {KQ_CONFIG_RESOURCE_BROKER, "1", NULL, 0}};
    kq_ctl_request r;
    kq_buf b = {0};

    memset(&r, 0, sizeof r);
    r.api_key = KQ_API_BROKER_REGISTRATION;
    r.broker_registration.broker_id = 1;
    r.broker_registration.cluster_id = "fMCL8kv1SWm87L_Md-I2hg";
    r.broker_registration.incarnation_id[0] = 7;
    r.broker_registration.endpoints = &endpoint;
    r.broker_registration.n_endpoints = 1;
    r.broker_registration.rack = "rack-a";
    ctl_request("broker_registration", &r);
    memset(&r, 0, sizeof r);
    r.api_key = KQ_API_BROKER_HEARTBEAT;
    r.broker_heartbeat = (kq_heartbeat){1, 5, 42, false, true};
    ctl_request("broker_heartbeat", &r);
    r.api_key = KQ_API_UNREGISTER_BROKER;
    r.unregister_broker.broker_id = 3;
    ctl_request("unregister_broker", &r);
    memset(&r, 0, sizeof r);
    r.api_key = KQ_API_ALTER_PARTITION;
    r.alter_partition = (kq_alter_partition){1, 1, 5, apt, 1};
    ctl_request("alter_partition_v1", &r);
    memcpy(apt[0].topic_id, topic_id, 16);
    apt[0].name = NULL;
    r.alter_partition.version = 3;
    ctl_request("alter_partition_v3", &r);
    memset(&r, 0, sizeof r);
    r.api_key = KQ_API_CREATE_TOPICS;
    r.create_topics.topics = ct;
    r.create_topics.n = 1;
    ctl_request("create_topics", &r);
    r.create_topics.topics = ct_manual;
    ctl_request("create_topics_manual", &r);
    memset(&r, 0, sizeof r);
    memcpy(dt[1].topic_id, topic_id, 16);
    r.api_key = KQ_API_DELETE_TOPICS;
    r.delete_topics.topics = dt;
    r.delete_topics.n = 2;
    ctl_request("delete_topics", &r);
    memset(&r, 0, sizeof r);
    r.api_key = KQ_API_CREATE_PARTITIONS;
    r.create_partitions.topics = cp;
    r.create_partitions.n = 1;
    ctl_request("create_partitions", &r);
    memset(&r, 0, sizeof r);
    r.api_key = KQ_API_ELECT_LEADERS;
    r.elect_leaders = (kq_elect_leaders){KQ_ELECTION_TYPE_PREFERRED, false, tg, 2};
    ctl_request("elect_leaders", &r);
    r.elect_leaders = (kq_elect_leaders){KQ_ELECTION_TYPE_UNCLEAN, true, NULL, 0};
    ctl_request("elect_leaders_all", &r);
    memset(&r, 0, sizeof r);
    r.api_key = KQ_API_INCREMENTAL_ALTER_CONFIGS;
    r.alter_configs.resources = acr;
    r.alter_configs.n = 1;
    ctl_request("incremental_alter_configs", &r);
    memset(&r, 0, sizeof r);
    r.api_key = KQ_API_DESCRIBE_CONFIGS;
    r.describe_configs.resources = dcr;
    r.describe_configs.n = 2;
    ctl_request("describe_configs", &r);
    memset(&r, 0, sizeof r);
    r.api_key = KQ_API_UPDATE_FEATURES;
    r.update_features.updates = fu;
    r.update_features.n = 1;
    r.update_features.validate_only = true;
    ctl_request("update_features", &r);
    memset(&r, 0, sizeof r);
    r.api_key = KQ_API_DESCRIBE_FEATURES;
    ctl_request("describe_features", &r);
    r.api_key = KQ_API_DESCRIBE_CLUSTER;
    ctl_request("describe_cluster", &r);
    r.api_key = KQ_API_DESCRIBE_TOPICS;
    r.describe_topics.names = names;
    r.describe_topics.n = 2;
    ctl_request("describe_topics", &r);
    {
        kq_ctl_request a = {.api_key = KQ_API_CREATE_ACLS};

        a.create_acls.acls = seed_acls;
        a.create_acls.n = 2;
        ctl_request("create_acls", &a);
        memset(&a, 0, sizeof a);
        a.api_key = KQ_API_DESCRIBE_ACLS;
        a.describe_acls.filter = seed_filters[0];
        ctl_request("describe_acls", &a);
        memset(&a, 0, sizeof a);
        a.api_key = KQ_API_DELETE_ACLS;
        a.delete_acls.filters = seed_filters;
        a.delete_acls.n = 2;
        ctl_request("delete_acls", &a);
    }
    /* one whole envelope, unwrapped */
    if (kq_ctl_encode_request("fuzz", 1, &r, &b) == 0) {
        uint8_t raw = FUZZ_RAW_ENVELOPE;

        put_with("ctl_request", "raw_envelope", &raw, 1, b.data, b.len);
    } else {
        failures++;
    }
    kq_buf_free(&b);
}

static void ctl_response(const char *name, uint32_t api_key, int rc, kq_buf *b)
{
    put_body("ctl_response", name, fuzz_ctl_apis, FUZZ_N_CTL_APIS, api_key, false, rc, b);
}

static void ctl_response_seeds(void)
{
    static const kq_ap_isr_member isr[] = {{1, 1}, {2, -1}};
    static const kq_ap_partition app[] = {{0, 1, 1, KQ_RECOVERY_RECOVERED, isr, 2}};
    kq_ap_topic apt[1] = {{.name = "orders", .partitions = app, .n_partitions = 1}};
    kq_alter_partition ap = {1, 1, 5, apt, 1};
    int32_t res_isr[] = {1, 2};
    kq_ap_result apr[1] = {{0, 1, 2, res_isr, 2, KQ_RECOVERY_RECOVERED, 3}};
    kq_alter_partition_result apres = {.results = apr, .n_results = 1};
    kq_registration_result reg = {.broker_epoch = 12};
    kq_heartbeat_result hb = {.is_caught_up = true, .in_controlled_shutdown = true};
    kq_create_topic ct[1] = {{"orders", 3, 2, NULL, 0, NULL, 0, {0}}};
    kq_create_topic_result ctr[1] = {{0, "", {0}, 3, 2}};
    kq_delete_topic dt[1] = {{.name = "orders"}};
    kq_simple_result ok[2] = {{0, ""}, {37, "bad config value"}};
    kq_create_partitions cp[1] = {{"orders", 4, NULL, 0}};
    kq_elect_target tg[1] = {{"orders", 0}};
    kq_elect_leaders el = {KQ_ELECTION_TYPE_PREFERRED, false, tg, 1};
    kq_elect_result er[1] = {{{0}, 0, 0, 0}};
    kq_alter_config_resource acr[1] = {{KQ_CONFIG_RESOURCE_TOPIC, "orders", NULL, 0}};
    kq_feature_update fu[1] = {{"metadata.version", 2, KQ_FEATURE_UPGRADE}};
    kq_describe_config_resource dcr[1] = {{KQ_CONFIG_RESOURCE_TOPIC, "orders", NULL, 0}};
    kq_config_kv statics[1] = {{"retention.ms", "604800000"}};
    kq_ctl_feature_range fr[1] = {{"metadata.version", 1, 3, 0}};
    kq_image *img = sample_image();
    kq_buf b = {0};

    memcpy(ctr[0].topic_id, topic_id, 16);
    memcpy(er[0].topic_id, topic_id, 16);
    ctl_response("broker_registration", KQ_API_BROKER_REGISTRATION,
                 kq_ctl_encode_broker_registration_response(&reg, &b), &b);
    ctl_response("broker_heartbeat", KQ_API_BROKER_HEARTBEAT,
                 kq_ctl_encode_broker_heartbeat_response(&hb, &b), &b);
    ctl_response("alter_partition", KQ_API_ALTER_PARTITION,
                 kq_ctl_encode_alter_partition_response(&ap, &apres, &b), &b);
    ctl_response("create_topics", KQ_API_CREATE_TOPICS,
                 kq_ctl_encode_create_topics_response(ct, ctr, 1, &b), &b);
    ctl_response("delete_topics", KQ_API_DELETE_TOPICS,
                 kq_ctl_encode_delete_topics_response(dt, ok, 1, &b), &b);
    ctl_response("create_partitions", KQ_API_CREATE_PARTITIONS,
                 kq_ctl_encode_create_partitions_response(cp, ok + 1, 1, &b), &b);
    ctl_response("elect_leaders", KQ_API_ELECT_LEADERS,
                 kq_ctl_encode_elect_leaders_response(img, &el, er, 1, &b), &b);
    ctl_response("incremental_alter_configs", KQ_API_INCREMENTAL_ALTER_CONFIGS,
                 kq_ctl_encode_alter_configs_response(acr, ok + 1, 1, &b), &b);
    ctl_response("update_features", KQ_API_UPDATE_FEATURES,
                 kq_ctl_encode_update_features_response(fu, ok, 1, &b), &b);
    ctl_response("describe_cluster", KQ_API_DESCRIBE_CLUSTER,
                 kq_ctl_encode_describe_cluster(img, "fMCL8kv1SWm87L_Md-I2hg", 1, &b), &b);
    ctl_response("describe_topics", KQ_API_DESCRIBE_TOPICS,
                 kq_ctl_encode_describe_topics(img, NULL, 0, 1, NULL, &b), &b);
    ctl_response("describe_configs", KQ_API_DESCRIBE_CONFIGS,
                 kq_ctl_encode_describe_configs(img, dcr, 1, statics, 1, NULL, &b), &b);
    ctl_response("describe_features", KQ_API_DESCRIBE_FEATURES,
                 kq_ctl_encode_describe_features(img, fr, 1, &b), &b);
    {
        kq_ctl_item_result created[2] = {
            {.name = "", .partition = -1},
            {.name = "", .partition = -1, .error = 42, .message = "the host must be *"}};
        kq_ctl_acls_desc listed = {(kq_acl *)seed_acls, 2};
        kq_ctl_delete_acls_result deleted[2] = {{0, NULL, (kq_acl *)seed_acls, 1},
                                                {42, "ACL filter: invalid operation", NULL, 0}};
        kq_ctl_delete_acls_desc dd = {deleted, 2};

        ctl_response(
            "create_acls", KQ_API_CREATE_ACLS,
            kq_ctl_encode_answer(KQ_API_CREATE_ACLS, &(kq_ctl_item_results){created, 2}, &b), &b);
        ctl_response("describe_acls", KQ_API_DESCRIBE_ACLS,
                     kq_ctl_encode_answer(KQ_API_DESCRIBE_ACLS, &listed, &b), &b);
        ctl_response("delete_acls", KQ_API_DELETE_ACLS,
                     kq_ctl_encode_answer(KQ_API_DELETE_ACLS, &dd, &b), &b);
    }
    kq_image_free(img);
}

/* ---- data plane --------------------------------------------------------------------------- */

static void data_request_seeds(void)
{
    static const uint8_t v1[] = "hello", v2[] = "world";
    const uint8_t *recs[2] = {v1, v2};
    size_t lens[2] = {5, 5};
    kq_produce_request pr = {{0}, 0, -1, 30000, -1, -1, -1, recs, lens, 2};
    kq_data_fetch_partition fp[1] = {{{0}, 0, 3, 10, 2, -1, 1048576}};
    kq_data_fetch_request fr = {-1, -1, 500, 1, 1048576, fp, 1};
    kq_list_offsets_partition lp[2] = {{{0}, 0, -1, KQ_DATA_LATEST_TIMESTAMP},
                                       {{0}, 1, 2, KQ_DATA_EARLIEST_TIMESTAMP}};
    kq_list_offsets_request lr = {-1, lp, 2};
    const char *const topics[] = {"orders"};
    kq_data_metadata_request mr = {topics, 1};
    kq_buf b = {0};
    int rc;

    memcpy(pr.topic_id, topic_id, 16);
    memcpy(fp[0].topic_id, topic_id, 16);
    memcpy(lp[0].topic_id, topic_id, 16);
    memcpy(lp[1].topic_id, topic_id, 16);
#define DATA_REQ(name, key, sender, expr)                                                          \
    rc = (expr);                                                                                   \
    put_body("data_request", name, fuzz_data_apis, FUZZ_N_DATA_APIS, key, true, rc, &b)
    DATA_REQ("produce", KQ_API_PRODUCE, -1, kq_data_encode_produce_request("fuzz", -1, &pr, &b));
    pr.acks = KQ_DATA_ACKS_ALL;
    pr.producer_id = 9;
    pr.producer_epoch = 0;
    pr.base_sequence = 0;
    DATA_REQ("produce_idempotent", KQ_API_PRODUCE, -1,
             kq_data_encode_produce_request("fuzz", -1, &pr, &b));
    DATA_REQ("fetch_consumer", KQ_API_DATA_FETCH, -1,
             kq_data_encode_fetch_request("fuzz", -1, &fr, &b));
    DATA_REQ("list_offsets", KQ_API_LIST_OFFSETS, -1,
             kq_data_encode_list_offsets_request("fuzz", -1, &lr, &b));
    DATA_REQ("metadata", KQ_API_METADATA, -1, kq_data_encode_metadata_request("fuzz", -1, &mr, &b));
    mr.n_topics = 0;
    DATA_REQ("metadata_all", KQ_API_METADATA, -1,
             kq_data_encode_metadata_request("fuzz", -1, &mr, &b));
#undef DATA_REQ
    /* a follower's fetch: the envelope's sender id must equal replica_id (2) */
    fr.replica_id = 2;
    fr.broker_epoch = 7;
    fp[0].log_start_offset = 0;
    rc = kq_data_encode_fetch_request("fuzz", 2, &fr, &b);
    {
        const uint8_t *body;
        size_t blen;
        uint8_t prefix[2] = {1, 2};

        if (rc || fuzz_find_field(b.data, b.len, 51, &body, &blen))
            failures++;
        else
            put_with("data_request", "fetch_follower", prefix, 2, body, blen);
    }
    kq_buf_free(&b);
}

static void data_response_seeds(void)
{
    static const uint8_t v1[] = "hello", v2[] = "world";
    const uint8_t *recs[2] = {v1, v2};
    size_t lens[2] = {5, 5};
    kq_buf payload = {0}, b = {0};
    kq_produce_response pr = {0, 10, 0, ""};
    kq_data_batch batches[2];
    kq_data_fetch_partition_result fp[1];
    kq_data_fetch_response fr = {0};
    kq_list_offsets_partition_result lp[1] = {{{0}, 0, 0, 12, 3}};
    kq_list_offsets_response lr = {0};
    int32_t reps[] = {1, 2};
    kq_data_metadata_broker mb[2] = {{1, "localhost", 9092, "rack-a"},
                                     {2, "localhost", 9093, NULL}};
    kq_data_metadata_partition mp[1] = {{0, 0, 1, 3, reps, 2, reps, 1}};
    kq_data_metadata_topic mt[1] = {{"orders", {0}, 0, mp, 1}};
    kq_data_metadata_response mr = {0};
    int rc;

    if (kq_data_records_pack(recs, lens, 2, &payload)) {
        failures++;
        return;
    }
    for (int i = 0; i < 2; i++) {
        batches[i] = (kq_data_batch){
            i * 2,        3,          2, 0, i ? 9 : -1, (int16_t)(i ? 0 : -1), i ? 0 : -1,
            payload.data, payload.len};
        batches[i].crc32c = kq_data_batch_crc(&batches[i]);
    }
    memset(fp, 0, sizeof fp);
    memcpy(fp[0].topic_id, topic_id, 16);
    fp[0].high_watermark = 4;
    fp[0].diverging_epoch = -1;
    fp[0].current_leader_id = 1;
    fp[0].current_leader_epoch = 3;
    fp[0].batches = batches;
    fp[0].n_batches = 2;
    fr.partitions = fp;
    fr.n_partitions = 1;
    memcpy(lp[0].topic_id, topic_id, 16);
    lr.partitions = lp;
    lr.n_partitions = 1;
    memcpy(mt[0].topic_id, topic_id, 16);
    mr.brokers = mb;
    mr.n_brokers = 2;
    mr.topics = mt;
    mr.n_topics = 1;
#define DATA_RESP(name, key, expr)                                                                 \
    rc = (expr);                                                                                   \
    put_body("data_response", name, fuzz_data_apis, FUZZ_N_DATA_APIS, key, false, rc, &b)
    DATA_RESP("produce", KQ_API_PRODUCE, kq_data_encode_produce_response(&pr, &b));
    DATA_RESP("fetch", KQ_API_DATA_FETCH, kq_data_encode_fetch_response(&fr, &b));
    fp[0].n_batches = 0;
    fp[0].diverging_epoch = 2;
    fp[0].diverging_end_offset = 3;
    DATA_RESP("fetch_diverging", KQ_API_DATA_FETCH, kq_data_encode_fetch_response(&fr, &b));
    DATA_RESP("list_offsets", KQ_API_LIST_OFFSETS, kq_data_encode_list_offsets_response(&lr, &b));
    DATA_RESP("metadata", KQ_API_METADATA, kq_data_encode_metadata_response(&mr, &b));
#undef DATA_RESP
    /* a whole-request error, unwrapped */
    rc = kq_codec_encode_error_response(KQ_API_DATA_FETCH, 58, "stale broker epoch", -1, -1, NULL,
                                        &b);
    if (rc) {
        failures++;
    } else {
        uint8_t prefix[2] = {FUZZ_RAW_ENVELOPE, 1};

        put_with("data_response", "fetch_error", prefix, 2, b.data, b.len);
    }
    kq_buf_free(&b);
    kq_buf_free(&payload);
}

/* ---- files and stores --------------------------------------------------------------------- */

static void snapshot_seeds(void)
{
    kq_image *img = sample_image();
    kq_buf payload = {0};
    uint8_t *file;
    size_t len;
    const uint8_t raw = 0;

    if (!img || kq_image_snapshot_write(img, &payload, NULL)) {
        failures++;
        kq_image_free(img);
        return;
    }
    len = KQ_STORE_SNAPSHOT_HEADER_LEN + payload.len;
    file = malloc(len);
    if (!file) {
        failures++;
        goto out;
    }
    memcpy(file, "KQSNAP01", 8);
    put_be64(file + 8, 10);
    put_be32(file + 16, 1);
    put_be64(file + 20, payload.len);
    put_be32(file + 28, kq_crc32c(0, payload.data, payload.len));
    put_be32(file + 32, kq_crc32c(0, file, 32));
    memcpy(file + KQ_STORE_SNAPSHOT_HEADER_LEN, payload.data, payload.len);
    put_with("snapshot_file", "image", &raw, 1, file, len);
    /* fixed mode: {end offset, epoch} then the payload */
    {
        uint8_t *p = malloc(1 + 12 + payload.len);

        if (p) {
            p[0] = 1;
            memcpy(p + 1, file + 8, 12);
            memcpy(p + 13, payload.data, payload.len);
            put("snapshot_file", "image_fixed", p, 13 + payload.len);
            free(p);
        }
    }
    free(file);
out:
    kq_buf_free(&payload);
    kq_image_free(img);
}

static void properties_seeds(void)
{
    static const char controller[] =
        "# controller.properties\n"
        "process.roles=controller\n"
        "node.id=1\n"
        "controller.quorum.voters=1@localhost:9093,2@localhost:9094,3@[::1]:9095\n"
        "listeners=CONTROLLER://:9093,PLAINTEXT://localhost:9092\n"
        "advertised.listeners = PLAINTEXT://broker-1.example.com:9092\n"
        "log.dirs : /var/lib/kq/meta\n"
        "controller.quorum.election.timeout.ms=1000\n"
        "! another comment\n"
        "controller.quorum.bootstrap.servers=localhost:9093,\\\n"
        "    localhost:9094\n"
        "num.partitions 3\n"
        "unicode.key=caf\\u00e9 \\uD83D\\uDE00\n";
    static const char voters[] = "\x01"
                                 "1@localhost:9093,2@10.0.0.2:9094,3@[fe80::1%eth0]:9095";
    static const char listener[] = "\x01"
                                   "CONTROLLER://[::]:9093";
    static const char hostport[] = "\x01"
                                   "example.com:65535";
    static const char pairs[] = "\x02"
                                "key\0value\0spaced key\0 lead and trail \0"
                                "a=b:c\0#!\\\t\n\0node.id\0"
                                "7";
    const uint8_t zero = 0;

    put_with("properties", "controller", &zero, 1, (const uint8_t *)controller,
             sizeof controller - 1);
    put("properties", "voters", (const uint8_t *)voters, sizeof voters - 1);
    put("properties", "listener", (const uint8_t *)listener, sizeof listener - 1);
    put("properties", "hostport", (const uint8_t *)hostport, sizeof hostport - 1);
    put("properties", "pairs", (const uint8_t *)pairs, sizeof pairs - 1);
}

/* fuzz_lmdb.h entries */
typedef struct ops {
    uint8_t b[4096];
    size_t n;
} ops;

static void op_raw(ops *o, uint8_t op, const void *key, size_t klen, const void *val, size_t vlen)
{
    o->b[o->n++] = op | (vlen > 255 ? 0x08 : 0);
    o->b[o->n++] = (uint8_t)klen;
    memcpy(o->b + o->n, key, klen);
    o->n += klen;
    if (vlen > 255)
        o->b[o->n++] = (uint8_t)(vlen >> 8);
    o->b[o->n++] = (uint8_t)vlen;
    memcpy(o->b + o->n, val, vlen);
    o->n += vlen;
}

/* A key of the target's fixed form: index, then the suffix bytes. */
static void op_fixed(ops *o, uint8_t op, uint8_t idx, const void *suffix, size_t slen,
                     const void *val, size_t vlen)
{
    o->b[o->n++] = op | 0x20 | (vlen > 255 ? 0x08 : 0);
    o->b[o->n++] = idx;
    memcpy(o->b + o->n, suffix, slen);
    o->n += slen;
    if (vlen > 255)
        o->b[o->n++] = (uint8_t)(vlen >> 8);
    o->b[o->n++] = (uint8_t)vlen;
    memcpy(o->b + o->n, val, vlen);
    o->n += vlen;
}

static void store_seeds(void)
{
    kq_record r[16];
    int n = sample_records(r, 16);
    kq_buf recs1 = {0}, recs2 = {0};
    char err[256];
    uint8_t val[1024], key[8], qs[13] = {1};
    ops o = {.n = 1};

    for (int i = 0; i < 3 && i < n; i++)
        if (kq_record_append(&recs1, &r[i], err, sizeof err))
            failures++;
    if (kq_record_append(&recs2, &r[n - 3], err, sizeof err)) /* LeaderChange */
        failures++;
    if (recs1.len + 12 > sizeof val || recs2.len + 12 > sizeof val) {
        failures++;
        goto out;
    }
    o.b[0] = 0; /* read from the log start */
    put_be32(qs + 1, 2);
    put_be32(qs + 5, 1);
    put_be32(qs + 9, 1);
    op_fixed(&o, 2, 0, NULL, 0, qs, sizeof qs); /* meta quorum_state */
    put_be32(val, 1);                           /* batch 0: epoch 1, 3 records */
    put_be32(val + 4, 3);
    memcpy(val + 12, recs1.data, recs1.len);
    op_fixed(&o, 0x10, 0, NULL, 0, val, 12 + recs1.len);
    put_be32(val, 2); /* batch 3: epoch 2, 1 record */
    put_be32(val + 4, 1);
    memcpy(val + 12, recs2.data, recs2.len);
    op_fixed(&o, 0x10, 3, NULL, 0, val, 12 + recs2.len);
    put_be64(key, 0); /* epochs 1 -> 0, 2 -> 3 */
    op_fixed(&o, 1, 1, NULL, 0, key, 8);
    put_be64(key, 3);
    op_fixed(&o, 1, 2, NULL, 0, key, 8);
    put("store", "log", o.b, o.n);

    /* the same log, moved above a log start of 3 (a snapshot end) */
    o.n = 1;
    o.b[0] = 3;
    put_be64(val, 3);
    put_be32(val + 8, 1);
    op_fixed(&o, 2, 1, NULL, 0, val, 12); /* meta log_start {3, 1} */
    put_be32(val, 2);
    put_be32(val + 4, 1);
    memcpy(val + 12, recs2.data, recs2.len);
    op_fixed(&o, 0x10, 3, NULL, 0, val, 12 + recs2.len);
    put_be64(key, 3);
    op_fixed(&o, 1, 2, NULL, 0, key, 8);
    put("store", "log_start", o.b, o.n);

    /* an empty store, and one with a raw key of the wrong size */
    o.n = 1;
    o.b[0] = 1;
    put("store", "empty", o.b, o.n);
    op_raw(&o, 0, "abc", 3, "0123456789abcdef", 16);
    put("store", "bad_key", o.b, o.n);
out:
    kq_buf_free(&recs1);
    kq_buf_free(&recs2);
}

static void plog_seeds(void)
{
    static const uint8_t v1[] = "hello", v2[] = "world";
    const uint8_t *recs[2] = {v1, v2};
    size_t lens[2] = {5, 5};
    kq_buf payload = {0};
    uint8_t meta[25] = {1}, val[256], off[8], ep[4], start[8];
    ops o = {.n = 1};

    if (kq_data_records_pack(recs, lens, 2, &payload) || payload.len + 26 > sizeof val) {
        failures++;
        kq_buf_free(&payload);
        return;
    }
    o.b[0] = 1;             /* read-only open; middle read at offset 1 */
    put_be64(meta + 1, 0);  /* log start */
    put_be64(meta + 9, 2);  /* HW */
    put_be32(meta + 17, 4); /* partition epoch */
    op_fixed(&o, 0x10 | 0, 0, NULL, 0, meta, sizeof meta);
    for (int i = 0; i < 2; i++) { /* batches at 0 and 2, 2 records each */
        memset(val, 0, 26);
        put_be32(val + 4, (uint32_t)(1 + i)); /* leader epoch */
        put_be32(val + 8, 2);                 /* count */
        put_be64(val + 12, (uint64_t)-1);     /* not idempotent */
        val[20] = val[21] = 0xff;
        put_be32(val + 22, (uint32_t)-1);
        memcpy(val + 26, payload.data, payload.len);
        put_be64(off, (uint64_t)(2 * i));
        op_fixed(&o, 0x10 | 1, 0, off, 8, val, 26 + payload.len);
        put_be32(ep, (uint32_t)(1 + i)); /* epoch cache entry */
        put_be64(start, (uint64_t)(2 * i));
        op_fixed(&o, 2, 0, ep, 4, start, 8);
    }
    put("plog", "partition", o.b, o.n);
    o.b[0] = 0x83; /* the same through a writable open */
    put("plog", "partition_writable", o.b, o.n);
    o.n = 1;
    o.b[0] = 0;
    op_fixed(&o, 0x10 | 0, 5, NULL, 0, meta, sizeof meta);
    put("plog", "empty_partition", o.b, o.n);
    kq_buf_free(&payload);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--check")) {
        check = true;
        root = argv[2];
    } else if (argc == 2 && argv[1][0] != '-') {
        root = argv[1];
        if (mkdir(root, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "fuzz_seeds: cannot create %s: %s\n", root, strerror(errno));
            return 1;
        }
    } else {
        fprintf(stderr, "usage: fuzz_seeds [--check] CORPUS_DIR\n");
        return 2;
    }
    codec_seeds();
    record_seeds();
    ctl_request_seeds();
    ctl_response_seeds();
    data_request_seeds();
    data_response_seeds();
    snapshot_seeds();
    properties_seeds();
    store_seeds();
    plog_seeds();
    if (failures)
        fprintf(stderr, "fuzz_seeds: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
