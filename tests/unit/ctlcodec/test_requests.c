/* Controller RPC requests: encode -> decode round trips for every API, and the validation
 * errors a malformed or out-of-range request gets (INVALID_REQUEST naming the field). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kq/ctl_codec.h"
#include "kq/error.h"
#include "kq_ctl.pb-c.h"
#include "kq_rpc.pb-c.h"

/* Encode req, decode it back into *out (must succeed). */
static void round_trip(const kq_ctl_request *req, kq_ctl_request *out)
{
    kq_buf b = {0};
    char err[256] = "";

    assert_int_equal(kq_ctl_encode_request("clusterA", 7, req, &b), 0);
    int rc = kq_ctl_decode_request(b.data, b.len, out, err, sizeof err);
    if (rc)
        fail_msg("decode failed: %s (%s)", kq_err_name(rc), err);
    assert_int_equal(out->api_key, req->api_key);
    assert_string_equal(out->cluster_id, "clusterA");
    assert_int_equal(out->sender_id, 7);
    kq_buf_free(&b);
}

/* Encode req, expect decoding to fail with `code` and a message containing `needle`. */
static void expect_reject(const kq_ctl_request *req, int code, const char *needle)
{
    kq_buf b = {0};
    kq_ctl_request out;
    char err[256] = "";

    assert_int_equal(kq_ctl_encode_request("", -1, req, &b), 0);
    assert_int_equal(kq_ctl_decode_request(b.data, b.len, &out, err, sizeof err), code);
    if (!strstr(err, needle))
        fail_msg("error '%s' does not mention '%s'", err, needle);
    assert_null(out.priv_);
    kq_buf_free(&b);
}

static void test_broker_registration(void **state)
{
    (void)state;
    kq_rec_endpoint eps[2] = {{"PLAINTEXT", "h1", 9092}, {"SSL", "h1", 9093}};
    kq_ctl_request req = {.api_key = KQ_API_BROKER_REGISTRATION}, out;

    req.broker_registration = (kq_broker_registration){
        .broker_id = 4, .cluster_id = "cid", .endpoints = eps, .n_endpoints = 2, .rack = "r1"};
    req.broker_registration.incarnation_id[3] = 9;
    round_trip(&req, &out);
    assert_int_equal(out.broker_registration.broker_id, 4);
    assert_string_equal(out.broker_registration.cluster_id, "cid");
    assert_memory_equal(out.broker_registration.incarnation_id,
                        req.broker_registration.incarnation_id, 16);
    assert_int_equal(out.broker_registration.n_endpoints, 2);
    assert_string_equal(out.broker_registration.endpoints[1].name, "SSL");
    assert_int_equal(out.broker_registration.endpoints[1].port, 9093);
    assert_string_equal(out.broker_registration.rack, "r1");
    kq_ctl_request_free(&out);

    req.broker_registration.rack = NULL;
    round_trip(&req, &out);
    assert_null(out.broker_registration.rack);
    kq_ctl_request_free(&out);

    /* validation */
    eps[1].port = 70000;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "port 70000");
    eps[1].port = 1;
    eps[0].host = "";
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "host");
    eps[0].host = "h";
    memset(req.broker_registration.incarnation_id, 0, 16);
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "all zero");
    req.broker_registration.incarnation_id[0] = 1;
    req.broker_registration.n_endpoints = 0;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST,
                  "BrokerRegistrationRequest.endpoints has no entries");
    req.broker_registration.n_endpoints = 1;
    req.broker_registration.broker_id = -3;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "broker_id -3");
}

static void test_heartbeat_unregister(void **state)
{
    (void)state;
    kq_ctl_request req = {.api_key = KQ_API_BROKER_HEARTBEAT}, out;

    req.broker_heartbeat = (kq_heartbeat){.broker_id = 2,
                                          .broker_epoch = 55,
                                          .current_metadata_offset = 1234,
                                          .want_fence = false,
                                          .want_shutdown = true};
    round_trip(&req, &out);
    assert_int_equal(out.broker_heartbeat.broker_id, 2);
    assert_int_equal(out.broker_heartbeat.broker_epoch, 55);
    assert_int_equal(out.broker_heartbeat.current_metadata_offset, 1234);
    assert_false(out.broker_heartbeat.want_fence);
    assert_true(out.broker_heartbeat.want_shutdown);
    kq_ctl_request_free(&out);
    req.broker_heartbeat.current_metadata_offset = -5;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "current_metadata_offset");

    kq_ctl_request u = {.api_key = KQ_API_UNREGISTER_BROKER, .unregister_broker.broker_id = 9};
    round_trip(&u, &out);
    assert_int_equal(out.unregister_broker.broker_id, 9);
    kq_ctl_request_free(&out);
    u.unregister_broker.broker_id = -1;
    expect_reject(&u, KQ_ERR_INVALID_REQUEST,
                  "UnregisterBrokerRequest.broker_id -1 is out of range");
}

static void test_alter_partition(void **state)
{
    (void)state;
    kq_ap_isr_member isr[2] = {{1, 10}, {2, -1}};
    kq_ap_partition parts[2] = {{0, 4, 9, KQ_RECOVERY_RECOVERED, isr, 2},
                                {3, 1, 1, KQ_RECOVERY_RECOVERING, isr, 1}};
    kq_ap_topic topics[1] = {{.partitions = parts, .n_partitions = 2}};
    kq_ctl_request req = {.api_key = KQ_API_ALTER_PARTITION}, out;

    memset(topics[0].topic_id, 0xab, 16);
    req.alter_partition = (kq_alter_partition){
        .version = 3, .broker_id = 1, .broker_epoch = 10, .topics = topics, .n_topics = 1};
    round_trip(&req, &out);
    const kq_alter_partition *ap = &out.alter_partition;
    assert_int_equal(ap->version, 3);
    assert_int_equal(ap->broker_epoch, 10);
    assert_int_equal(ap->n_topics, 1);
    assert_memory_equal(ap->topics[0].topic_id, topics[0].topic_id, 16);
    assert_int_equal(ap->topics[0].n_partitions, 2);
    assert_int_equal(ap->topics[0].partitions[1].partition_index, 3);
    assert_int_equal(ap->topics[0].partitions[1].leader_recovery_state, KQ_RECOVERY_RECOVERING);
    assert_int_equal(ap->topics[0].partitions[0].n_new_isr, 2);
    assert_int_equal(ap->topics[0].partitions[0].new_isr[1].broker_id, 2);
    assert_int_equal(ap->topics[0].partitions[0].new_isr[1].broker_epoch, -1);
    kq_ctl_request_free(&out);

    /* version 1 carries names */
    topics[0].name = "foo";
    req.alter_partition.version = 1;
    round_trip(&req, &out);
    assert_string_equal(out.alter_partition.topics[0].name, "foo");
    kq_ctl_request_free(&out);

    req.alter_partition.version = 4;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "version 4");
    req.alter_partition.version = 1;
    parts[1].leader_recovery_state = 2;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "leader_recovery_state 2");
    parts[1].leader_recovery_state = 0;
    parts[0].partition_index = -1;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "partition_index -1");
    parts[0].partition_index = 0;
    topics[0].name = NULL;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "topic_name");
}

/* A version 2 request whose topic has no id (hand-built: the encoder always sends one). */
static void test_alter_partition_missing_topic_id(void **state)
{
    (void)state;
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__AlterPartitionRequest ap = KQ__ALTER_PARTITION_REQUEST__INIT;
    Kq__AlterPartitionTopic t = KQ__ALTER_PARTITION_TOPIC__INIT, *tp = &t;
    kq_ctl_request out;
    char err[256] = "";
    uint8_t buf[256];
    size_t n;

    ap.version = 2;
    ap.broker_id = 1;
    ap.broker_epoch = 1;
    ap.n_topics = 1;
    ap.topics = &tp;
    t.topic_name = "foo";
    rq.api_key = KQ_API_ALTER_PARTITION;
    rq.cluster_id = "";
    rq.sender_id = 1;
    rq.body_case = KQ__REQUEST__BODY_ALTER_PARTITION;
    rq.alter_partition = &ap;
    n = kq__request__pack(&rq, buf);
    assert_int_equal(kq_ctl_decode_request(buf, n, &out, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "topic_id"));
}

static void test_create_topics(void **state)
{
    (void)state;
    int32_t a0[] = {1, 2, 3}, a1[] = {2, 3, 1};
    kq_partition_assignment as[] = {{0, a0, 3}, {1, a1, 3}};
    kq_config_kv cfg[] = {{"min.insync.replicas", "2"}, {"cleanup.policy", "compact"}};
    kq_create_topic ts[] = {
        {.name = "a", .num_partitions = 6, .replication_factor = 3, .configs = cfg, .n_configs = 2},
        {.name = "b",
         .num_partitions = -1,
         .replication_factor = -1,
         .assignments = as,
         .n_assignments = 2}};
    kq_ctl_request req = {.api_key = KQ_API_CREATE_TOPICS}, out;

    req.create_topics.topics = ts;
    req.create_topics.n = 2;
    round_trip(&req, &out);
    assert_int_equal(out.create_topics.n, 2);
    assert_string_equal(out.create_topics.topics[0].name, "a");
    assert_int_equal(out.create_topics.topics[0].num_partitions, 6);
    assert_int_equal(out.create_topics.topics[0].replication_factor, 3);
    assert_int_equal(out.create_topics.topics[0].n_configs, 2);
    assert_string_equal(out.create_topics.topics[0].configs[1].value, "compact");
    assert_int_equal(out.create_topics.topics[0].n_assignments, 0);
    assert_int_equal(out.create_topics.topics[1].n_assignments, 2);
    assert_int_equal(out.create_topics.topics[1].assignments[1].partition_index, 1);
    assert_memory_equal(out.create_topics.topics[1].assignments[1].broker_ids, a1, sizeof a1);
    for (int k = 0; k < 16; k++)
        assert_int_equal(out.create_topics.topics[0].topic_id[k], 0); /* none sent */
    kq_ctl_request_free(&out);

    /* A client-chosen topic id travels; a reserved one is refused by the decoder. */
    memset(ts[1].topic_id, 0x5a, 16);
    round_trip(&req, &out);
    assert_memory_equal(out.create_topics.topics[1].topic_id, ts[1].topic_id, 16);
    kq_ctl_request_free(&out);
    memset(ts[1].topic_id, 0, 16);
    ts[1].topic_id[15] = 1;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "topic_id is a reserved id");
    memset(ts[1].topic_id, 0, 16);

    ts[0].num_partitions = -2;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "num_partitions -2");
    ts[0].num_partitions = 0; /* a semantic error: left to the decisions (per topic) */
    round_trip(&req, &out);
    assert_int_equal(out.create_topics.topics[0].num_partitions, 0);
    kq_ctl_request_free(&out);
    cfg[0].name = "";
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "topics[0].configs[0].name is empty");
    cfg[0].name = "x";
    req.create_topics.n = 0;
    req.create_topics.topics = NULL;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "CreateTopicsRequest.topics has no entries");
}

static void test_delete_and_create_partitions(void **state)
{
    (void)state;
    kq_delete_topic dt[2] = {{.name = "a"}, {.name = NULL}};
    kq_ctl_request req = {.api_key = KQ_API_DELETE_TOPICS}, out;

    memset(dt[1].topic_id, 5, 16);
    req.delete_topics.topics = dt;
    req.delete_topics.n = 2;
    round_trip(&req, &out);
    assert_string_equal(out.delete_topics.topics[0].name, "a");
    assert_null(out.delete_topics.topics[1].name);
    assert_memory_equal(out.delete_topics.topics[1].topic_id, dt[1].topic_id, 16);
    kq_ctl_request_free(&out);

    int32_t ids[] = {3, 1};
    kq_partition_assignment as[] = {{4, ids, 2}};
    kq_create_partitions cp[] = {{"t", 5, as, 1}};
    kq_ctl_request r2 = {.api_key = KQ_API_CREATE_PARTITIONS};
    r2.create_partitions.topics = cp;
    r2.create_partitions.n = 1;
    round_trip(&r2, &out);
    assert_string_equal(out.create_partitions.topics[0].topic, "t");
    assert_int_equal(out.create_partitions.topics[0].count, 5);
    assert_int_equal(out.create_partitions.topics[0].assignments[0].n_broker_ids, 2);
    kq_ctl_request_free(&out);
}

static void test_elect_leaders(void **state)
{
    (void)state;
    kq_elect_target ts[] = {{"a", 0}, {"a", 2}, {"b", 1}};
    kq_ctl_request req = {.api_key = KQ_API_ELECT_LEADERS}, out;

    req.elect_leaders = (kq_elect_leaders){
        .election_type = KQ_ELECTION_TYPE_UNCLEAN, .targets = ts, .n_targets = 3};
    round_trip(&req, &out);
    assert_int_equal(out.elect_leaders.election_type, KQ_ELECTION_TYPE_UNCLEAN);
    assert_false(out.elect_leaders.all_partitions);
    assert_int_equal(out.elect_leaders.n_targets, 3);
    assert_string_equal(out.elect_leaders.targets[1].topic, "a");
    assert_int_equal(out.elect_leaders.targets[1].partition, 2);
    assert_string_equal(out.elect_leaders.targets[2].topic, "b");
    kq_ctl_request_free(&out);

    kq_ctl_request all = {.api_key = KQ_API_ELECT_LEADERS};
    all.elect_leaders.all_partitions = true;
    round_trip(&all, &out);
    assert_true(out.elect_leaders.all_partitions);
    assert_int_equal(out.elect_leaders.n_targets, 0);
    kq_ctl_request_free(&out);

    req.elect_leaders.election_type = 2;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "election_type 2");
    req.elect_leaders.election_type = 0;
    ts[2].partition = -4;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "partition -4");
    req.elect_leaders.n_targets = 0;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "names no partitions");
}

static void test_configs_and_features(void **state)
{
    (void)state;
    kq_config_op ops[] = {{"min.insync.replicas", "2", KQ_CONFIG_OP_SET},
                          {"retention.ms", NULL, KQ_CONFIG_OP_DELETE}};
    kq_alter_config_resource res[] = {{KQ_CONFIG_RESOURCE_TOPIC, "t", ops, 2}};
    kq_ctl_request req = {.api_key = KQ_API_INCREMENTAL_ALTER_CONFIGS}, out;

    req.alter_configs.resources = res;
    req.alter_configs.n = 1;
    round_trip(&req, &out);
    assert_int_equal(out.alter_configs.resources[0].resource_type, KQ_CONFIG_RESOURCE_TOPIC);
    assert_string_equal(out.alter_configs.resources[0].resource_name, "t");
    assert_int_equal(out.alter_configs.resources[0].n_ops, 2);
    assert_string_equal(out.alter_configs.resources[0].ops[0].value, "2");
    assert_null(out.alter_configs.resources[0].ops[1].value);
    assert_int_equal(out.alter_configs.resources[0].ops[1].op, KQ_CONFIG_OP_DELETE);
    kq_ctl_request_free(&out);
    ops[1].op = 9;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "operation 9");
    ops[1].op = KQ_CONFIG_OP_SET; /* SET without a value */
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "has no value");
    ops[1].op = KQ_CONFIG_OP_DELETE;
    res[0].resource_type = 3;
    expect_reject(&req, KQ_ERR_INVALID_REQUEST, "type 3");

    const char *keys[] = {"min.insync.replicas"};
    kq_describe_config_resource dr[] = {{KQ_CONFIG_RESOURCE_BROKER, "", keys, 1}};
    kq_ctl_request d = {.api_key = KQ_API_DESCRIBE_CONFIGS};
    d.describe_configs.resources = dr;
    d.describe_configs.n = 1;
    round_trip(&d, &out);
    assert_string_equal(out.describe_configs.resources[0].resource_name, "");
    assert_int_equal(out.describe_configs.resources[0].n_keys, 1);
    assert_string_equal(out.describe_configs.resources[0].keys[0], "min.insync.replicas");
    kq_ctl_request_free(&out);

    kq_feature_update fu[] = {{"metadata.version", 21, KQ_FEATURE_UPGRADE}};
    kq_ctl_request u = {.api_key = KQ_API_UPDATE_FEATURES};
    u.update_features.updates = fu;
    u.update_features.n = 1;
    u.update_features.validate_only = true;
    round_trip(&u, &out);
    assert_string_equal(out.update_features.updates[0].name, "metadata.version");
    assert_int_equal(out.update_features.updates[0].max_version_level, 21);
    assert_true(out.update_features.validate_only);
    kq_ctl_request_free(&out);
    fu[0].upgrade_type = 0;
    expect_reject(&u, KQ_ERR_INVALID_REQUEST, "upgrade_type 0");
}

static void test_describes(void **state)
{
    (void)state;
    const char *names[] = {"x", "y"};
    kq_ctl_request req = {.api_key = KQ_API_DESCRIBE_TOPICS}, out;

    req.describe_topics.names = names;
    req.describe_topics.n = 2;
    round_trip(&req, &out);
    assert_int_equal(out.describe_topics.n, 2);
    assert_string_equal(out.describe_topics.names[1], "y");
    kq_ctl_request_free(&out);

    kq_ctl_request c = {.api_key = KQ_API_DESCRIBE_CLUSTER};
    round_trip(&c, &out);
    kq_ctl_request_free(&out);
    kq_ctl_request f = {.api_key = KQ_API_DESCRIBE_FEATURES};
    round_trip(&f, &out);
    kq_ctl_request_free(&out);
}

/* Envelope-level problems: not a controller API, a body for another API, garbage bytes. */
static void test_envelope_errors(void **state)
{
    (void)state;
    kq_buf b = {0};
    kq_ctl_request out;
    kq_request env;
    char err[256] = "";
    const uint8_t garbage[] = {0xff, 0xff, 0xff, 0x01};

    assert_int_equal(kq_codec_encode_describe_request("", &b), 0);
    assert_int_equal(kq_ctl_decode_request(b.data, b.len, &out, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "not a controller API"));
    kq_buf_free(&b);

    assert_int_equal(kq_ctl_decode_request(garbage, sizeof garbage, &out, err, sizeof err),
                     KQ_ERR_MALFORMED);

    /* api key CreateTopics with a DescribeCluster body */
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__DescribeClusterRequest dc = KQ__DESCRIBE_CLUSTER_REQUEST__INIT;
    uint8_t buf[64];
    rq.api_key = KQ_API_CREATE_TOPICS;
    rq.cluster_id = "";
    rq.sender_id = -1;
    rq.body_case = KQ__REQUEST__BODY_DESCRIBE_CLUSTER;
    rq.describe_cluster = &dc;
    size_t n = kq__request__pack(&rq, buf);
    assert_int_equal(kq_ctl_decode_request(buf, n, &out, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "describe_cluster"));

    /* The two-step path the controller uses: envelope first, then the body. */
    kq_ctl_request ct = {.api_key = KQ_API_DESCRIBE_CLUSTER};
    assert_int_equal(kq_ctl_encode_request("c", 3, &ct, &b), 0);
    assert_int_equal(kq_codec_decode_request(b.data, b.len, &env, err, sizeof err), 0);
    assert_true(kq_ctl_is_controller_api(env.api_key));
    assert_int_equal(kq_ctl_request_from_envelope(&env, &out, err, sizeof err), 0);
    assert_int_equal(out.api_key, KQ_API_DESCRIBE_CLUSTER);
    kq_ctl_request_free(&out);
    kq_request_free(&env);
    kq_buf_free(&b);

    /* unknown api key in the encoder */
    kq_ctl_request bogus = {.api_key = 12345};
    assert_int_equal(kq_ctl_encode_request("", -1, &bogus, &b), KQ_ERR_INVALID_REQUEST);
    assert_false(kq_ctl_is_controller_api(KQ_API_FETCH));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broker_registration),
        cmocka_unit_test(test_heartbeat_unregister),
        cmocka_unit_test(test_alter_partition),
        cmocka_unit_test(test_alter_partition_missing_topic_id),
        cmocka_unit_test(test_create_topics),
        cmocka_unit_test(test_delete_and_create_partitions),
        cmocka_unit_test(test_elect_leaders),
        cmocka_unit_test(test_configs_and_features),
        cmocka_unit_test(test_describes),
        cmocka_unit_test(test_envelope_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
