/* Controller RPC responses: encoded from the decisions' results or built from an image, then
 * decoded the way the kq tool and a broker read them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctl_image_fixture.h"
#include "answers.h"
#include "kq/ctl_codec.h"
#include "kq/error.h"

/* Envelope-decode b (must succeed) into env and free b. */
static void open_resp(kq_buf *b, kq_response *env)
{
    char err[256] = "";
    int rc = kq_codec_decode_response(b->data, b->len, -1, env, err, sizeof err);

    if (rc)
        fail_msg("envelope decode: %s (%s)", kq_err_name(rc), err);
    kq_buf_free(b);
}

static void test_registration_heartbeat(void **state)
{
    (void)state;
    kq_registration_result rr = {.error = 0, .broker_epoch = 42};
    kq_buf b = {0};
    kq_response env;
    int64_t epoch = 0;
    char err[256];

    assert_int_equal(kq_ctl_encode_broker_registration_response(&rr, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(env.error, 0);
    assert_int_equal(kq_ctl_decode_broker_registration_response(&env, &epoch, err, sizeof err), 0);
    assert_int_equal(epoch, 42);
    /* the wrong decoder for this body */
    kq_heartbeat_result hr;
    assert_int_equal(kq_ctl_decode_broker_heartbeat_response(&env, &hr, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    kq_response_free(&env);

    rr.error = KQ_ERR_DUPLICATE_BROKER_REGISTRATION;
    snprintf(rr.message, sizeof rr.message, "broker 3 has a live session");
    assert_int_equal(kq_ctl_encode_broker_registration_response(&rr, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(env.error, KQ_ERR_DUPLICATE_BROKER_REGISTRATION);
    assert_string_equal(env.error_message, "broker 3 has a live session");
    assert_int_equal(kq_ctl_decode_broker_registration_response(&env, &epoch, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    kq_response_free(&env);

    kq_heartbeat_result h = {.is_caught_up = true,
                             .is_fenced = false,
                             .should_shutdown = true,
                             .in_controlled_shutdown = true};
    assert_int_equal(kq_ctl_encode_broker_heartbeat_response(&h, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(kq_ctl_decode_broker_heartbeat_response(&env, &hr, err, sizeof err), 0);
    assert_true(hr.is_caught_up);
    assert_false(hr.is_fenced);
    assert_true(hr.should_shutdown);
    assert_true(hr.in_controlled_shutdown);
    kq_response_free(&env);

    assert_int_equal(kq_ctl_encode_unregister_broker_response(KQ_ERR_BROKER_ID_NOT_REGISTERED,
                                                              "broker 8 is not registered", &b),
                     0);
    open_resp(&b, &env);
    assert_int_equal(env.error, KQ_ERR_BROKER_ID_NOT_REGISTERED);
    assert_int_equal(env.api_key, KQ_API_UNREGISTER_BROKER);
    kq_response_free(&env);
}

static void test_alter_partition_response(void **state)
{
    (void)state;
    kq_ap_isr_member m[] = {{1, 5}, {2, 6}};
    kq_ap_partition p1[] = {{0, 1, 1, 0, m, 2}, {1, 1, 1, 0, m, 1}};
    kq_ap_partition p2[] = {{5, 1, 1, 0, m, 1}};
    kq_ap_topic ts[] = {{.name = "a", .partitions = p1, .n_partitions = 2},
                        {.name = "b", .partitions = p2, .n_partitions = 1}};
    kq_alter_partition req = {
        .version = 1, .broker_id = 1, .broker_epoch = 5, .topics = ts, .n_topics = 2};
    int32_t isr0[] = {1, 2};
    kq_ap_result rs[] = {{0, 1, 4, isr0, 2, 0, 9},
                         {KQ_ERR_INVALID_UPDATE_VERSION, 0, 0, NULL, 0, 0, 0},
                         {KQ_ERR_FENCED_LEADER_EPOCH, 0, 0, NULL, 0, 0, 0}};
    kq_alter_partition_result res = {.error = 0, .results = rs, .n_results = 3};
    kq_alter_partition_result got;
    kq_buf b = {0};
    kq_response env;
    char err[256];

    assert_int_equal(kq_ctl_encode_alter_partition_response(&req, &res, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(kq_ctl_decode_alter_partition_response(&env, &got, err, sizeof err), 0);
    assert_int_equal(got.n_results, 3);
    assert_int_equal(got.results[0].error, 0);
    assert_int_equal(got.results[0].leader_epoch, 4);
    assert_int_equal(got.results[0].partition_epoch, 9);
    assert_int_equal(got.results[0].n_isr, 2);
    assert_int_equal(got.results[0].isr[1], 2);
    assert_int_equal(got.results[1].error, KQ_ERR_INVALID_UPDATE_VERSION);
    assert_int_equal(got.results[2].error, KQ_ERR_FENCED_LEADER_EPOCH);
    kq_ctl_alter_partition_response_free(&got);
    kq_response_free(&env);

    /* result count does not match the request */
    res.n_results = 2;
    assert_int_equal(kq_ctl_encode_alter_partition_response(&req, &res, &b),
                     KQ_ERR_INVALID_REQUEST);
    /* top-level error -> envelope error */
    res.error = KQ_ERR_STALE_BROKER_EPOCH;
    snprintf(res.message, sizeof res.message, "stale");
    assert_int_equal(kq_ctl_encode_alter_partition_response(&req, &res, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(env.error, KQ_ERR_STALE_BROKER_EPOCH);
    kq_response_free(&env);
}

static void test_item_results(void **state)
{
    (void)state;
    kq_create_topic reqs[] = {{.name = "a"}, {.name = "b"}};
    kq_create_topic_result res[2] = {{.error = 0, .num_partitions = 3, .replication_factor = 2},
                                     {.error = KQ_ERR_TOPIC_ALREADY_EXISTS}};
    kq_ctl_item_results items;
    kq_buf b = {0};
    kq_response env;
    char err[256];

    memset(res[0].topic_id, 0x11, 16);
    snprintf(res[1].message, sizeof res[1].message, "Topic 'b' already exists.");
    assert_int_equal(kq_ctl_encode_create_topics_response(reqs, res, 2, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(kq_ctl_decode_item_results(&env, &items, err, sizeof err), 0);
    assert_int_equal(items.n, 2);
    assert_string_equal(items.items[0].name, "a");
    assert_true(items.items[0].has_id);
    assert_int_equal(items.items[0].topic_id[5], 0x11);
    assert_int_equal(items.items[0].num_partitions, 3);
    assert_int_equal(items.items[0].replication_factor, 2);
    assert_null(items.items[0].message);
    assert_int_equal(items.items[1].error, KQ_ERR_TOPIC_ALREADY_EXISTS);
    assert_string_equal(items.items[1].message, "Topic 'b' already exists.");
    assert_false(items.items[1].has_id);
    kq_ctl_item_results_free(&items);
    kq_response_free(&env);
    /* TOPIC_ALREADY_EXISTS carries the existing topic's id when the controller gives it. */
    memset(res[1].topic_id, 0x22, 16);
    assert_int_equal(kq_ctl_encode_create_topics_response(reqs, res, 2, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(kq_ctl_decode_item_results(&env, &items, err, sizeof err), 0);
    assert_int_equal(items.items[1].error, KQ_ERR_TOPIC_ALREADY_EXISTS);
    assert_true(items.items[1].has_id);
    assert_int_equal(items.items[1].topic_id[15], 0x22);
    assert_int_equal(items.items[1].num_partitions, -1);
    kq_ctl_item_results_free(&items);
    kq_response_free(&env);

    /* ElectLeaders: topic names from the targets, grouped per topic */
    kq_elect_target tg[] = {{"a", 0}, {"a", 1}, {"zz", 0}};
    kq_elect_leaders el = {.election_type = 0, .targets = tg, .n_targets = 3};
    kq_elect_result er[3] = {
        {.index = 0, .partition = 0, .error = 0},
        {.index = 1, .partition = 1, .error = KQ_ERR_ELECTION_NOT_NEEDED},
        {.index = 2, .partition = 0, .error = KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION}};
    assert_int_equal(kq_ctl_encode_elect_leaders_response(NULL, &el, er, 3, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(kq_ctl_decode_item_results(&env, &items, err, sizeof err), 0);
    assert_int_equal(items.n, 3);
    assert_string_equal(items.items[1].name, "a");
    assert_int_equal(items.items[1].partition, 1);
    assert_int_equal(items.items[1].error, KQ_ERR_ELECTION_NOT_NEEDED);
    assert_string_equal(items.items[2].name, "zz");
    assert_int_equal(items.items[2].error, KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    kq_ctl_item_results_free(&items);
    kq_response_free(&env);
    er[2].index = 7; /* out of range of the targets */
    assert_int_equal(kq_ctl_encode_elect_leaders_response(NULL, &el, er, 3, &b),
                     KQ_ERR_INVALID_REQUEST);

    /* IncrementalAlterConfigs */
    kq_alter_config_resource ar[] = {{KQ_CONFIG_RESOURCE_BROKER, "1", NULL, 0}};
    kq_simple_result sr[1] = {{KQ_ERR_INVALID_CONFIG, "bad value"}};
    assert_int_equal(kq_ctl_encode_alter_configs_response(ar, sr, 1, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(kq_ctl_decode_item_results(&env, &items, err, sizeof err), 0);
    assert_int_equal(items.items[0].resource_type, KQ_CONFIG_RESOURCE_BROKER);
    assert_string_equal(items.items[0].name, "1");
    assert_int_equal(items.items[0].error, KQ_ERR_INVALID_CONFIG);
    kq_ctl_item_results_free(&items);
    /* a result whose message is not NUL-terminated is refused, not read past its end */
    memset(sr[0].message, 'x', sizeof sr[0].message);
    assert_int_equal(kq_ctl_encode_alter_configs_response(ar, sr, 1, &b), KQ_ERR_INVALID_REQUEST);
    assert_null(b.data);
    /* not an item-results response */
    kq_response_free(&env);
    assert_int_equal(kq_ctl_encode_unregister_broker_response(0, NULL, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(kq_ctl_decode_item_results(&env, &items, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    kq_response_free(&env);
}

static void build(cfx *f)
{
    int32_t r123[] = {1, 2, 3}, r12[] = {1, 2}, r3[] = {3}, r2[] = {2};

    cfx_init(f);
    cfx_broker(f, 1, "rackA", false, false);
    cfx_broker(f, 2, NULL, true, false);
    cfx_broker(f, 3, "rackB", false, true);
    cfx_topic(f, "zeta");
    cfx_partition(f, "zeta", r123, 3, r12, 2, r3, 1, r2, 1, 1);
    cfx_partition(f, "zeta", r123, 3, NULL, 0, NULL, 0, NULL, 0, -1);
    cfx_topic(f, "alpha");
    cfx_partition(f, "alpha", r12, 2, r12, 2, NULL, 0, NULL, 0, 2);
    cfx_config(f, KQ_CONFIG_RESOURCE_TOPIC, "zeta", "min.insync.replicas", "2");
    cfx_config(f, KQ_CONFIG_RESOURCE_TOPIC, "zeta", "cleanup.policy", "compact");
    cfx_config(f, KQ_CONFIG_RESOURCE_BROKER, "", "min.insync.replicas", "3");
    cfx_config(f, KQ_CONFIG_RESOURCE_BROKER, "", "unclean.leader.election.enable", "true");
    cfx_config(f, KQ_CONFIG_RESOURCE_BROKER, "2", "unclean.leader.election.enable", "false");
    cfx_feature(f, "metadata.version", 21);
}

static void test_describe_cluster(void **state)
{
    (void)state;
    cfx f;
    kq_buf b = {0};
    kq_response env;
    kq_ctl_cluster_desc d;
    char err[256];

    build(&f);
    assert_int_equal(kq_ctl_encode_describe_cluster(f.img, "cid-1", 3000, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(kq_ctl_decode_describe_cluster_response(&env, &d, err, sizeof err), 0);
    assert_string_equal(d.cluster_id, "cid-1");
    assert_int_equal(d.controller_id, 3000);
    assert_int_equal(d.n_brokers, 3);
    assert_int_equal(d.brokers[0].id, 1);
    assert_false(d.brokers[0].fenced);
    assert_string_equal(d.brokers[0].rack, "rackA");
    assert_int_equal(d.brokers[0].epoch, kq_image_broker(f.img, 1)->epoch);
    assert_true(d.brokers[1].fenced);
    assert_null(d.brokers[1].rack);
    assert_true(d.brokers[2].in_controlled_shutdown);
    assert_int_equal(d.brokers[2].n_endpoints, 1);
    assert_string_equal(d.brokers[2].endpoints[0].name, "PLAINTEXT");
    assert_string_equal(d.brokers[2].endpoints[0].host, "localhost");
    assert_int_equal(d.brokers[2].endpoints[0].port, 9095);
    kq_ctl_cluster_desc_free(&d);
    kq_response_free(&env);
    cfx_free(&f);
}

static void test_describe_topics(void **state)
{
    (void)state;
    cfx f;
    kq_buf b = {0};
    kq_response env;
    kq_ctl_topics_desc d;
    char err[256];

    build(&f);
    assert_int_equal(kq_ctl_encode_describe_topics(f.img, NULL, 0, 1, NULL, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(kq_ctl_decode_describe_topics_response(&env, &d, err, sizeof err), 0);
    assert_int_equal(d.n_topics, 2);
    assert_string_equal(d.topics[0].name, "alpha");       /* sorted */
    assert_int_equal(d.topics[0].min_insync_replicas, 3); /* cluster default config */
    assert_int_equal(d.topics[0].n_configs, 0);
    const kq_ctl_topic_desc *z = &d.topics[1];
    assert_string_equal(z->name, "zeta");
    assert_int_equal(z->error, 0);
    assert_true(z->has_id);
    assert_memory_equal(z->topic_id, kq_image_topic_by_name(f.img, "zeta")->id, 16);
    assert_int_equal(z->min_insync_replicas, 2); /* topic config */
    assert_int_equal(z->n_configs, 2);
    assert_string_equal(z->configs[0].name, "cleanup.policy");
    assert_string_equal(z->configs[1].value, "2");
    assert_int_equal(z->n_partitions, 2);
    assert_int_equal(z->partitions[0].leader, 1);
    assert_int_equal(z->partitions[0].leader_epoch, 3);
    assert_int_equal(z->partitions[0].partition_epoch, 7);
    assert_int_equal(z->partitions[0].replicas.n, 3);
    assert_int_equal(z->partitions[0].isr.n, 2);
    assert_int_equal(z->partitions[0].elr.n, 1);
    assert_int_equal(z->partitions[0].elr.ids[0], 3);
    assert_int_equal(z->partitions[0].last_known_elr.ids[0], 2);
    assert_int_equal(z->partitions[1].leader, -1);
    assert_int_equal(z->partitions[1].isr.n, 0);
    kq_ctl_topics_desc_free(&d);
    kq_response_free(&env);

    /* by name: unknown names answer UNKNOWN_TOPIC_OR_PARTITION, duplicates once */
    const char *names[] = {"zeta", "nope", "zeta"};
    assert_int_equal(kq_ctl_encode_describe_topics(f.img, names, 3, 1, NULL, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(kq_ctl_decode_describe_topics_response(&env, &d, err, sizeof err), 0);
    assert_int_equal(d.n_topics, 2);
    assert_string_equal(d.topics[0].name, "nope");
    assert_int_equal(d.topics[0].error, KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    assert_false(d.topics[0].has_id);
    assert_int_equal(d.topics[0].n_partitions, 0);
    assert_string_equal(d.topics[1].name, "zeta");
    assert_int_equal(d.topics[1].n_partitions, 2);
    kq_ctl_topics_desc_free(&d);
    kq_response_free(&env);
    cfx_free(&f);
}

static void test_describe_configs(void **state)
{
    (void)state;
    cfx f;
    kq_buf b = {0};
    kq_response env;
    kq_ctl_configs_desc d;
    char err[256];
    kq_config_kv statics[] = {{"min.insync.replicas", "1"}, {"num.partitions", "1"}};
    const char *only[] = {"unclean.leader.election.enable"};
    kq_describe_config_resource rs[] = {{KQ_CONFIG_RESOURCE_TOPIC, "zeta", NULL, 0},
                                        {KQ_CONFIG_RESOURCE_BROKER, "2", NULL, 0},
                                        {KQ_CONFIG_RESOURCE_BROKER, "", only, 1},
                                        {KQ_CONFIG_RESOURCE_TOPIC, "nope", NULL, 0},
                                        {KQ_CONFIG_RESOURCE_BROKER, "x1", NULL, 0}};

    build(&f);
    assert_int_equal(kq_ctl_encode_describe_configs(f.img, rs, 5, statics, 2, NULL, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(kq_ctl_decode_describe_configs_response(&env, &d, err, sizeof err), 0);
    assert_int_equal(d.n_results, 5);
    /* topic zeta: its own two, then the cluster default it does not override, then statics */
    const kq_ctl_config_result *t = &d.results[0];
    assert_int_equal(t->error, 0);
    assert_int_equal(t->n_entries, 4);
    assert_string_equal(t->entries[0].name, "cleanup.policy");
    assert_int_equal(t->entries[0].source, KQ_CONFIG_SOURCE_DYNAMIC_TOPIC);
    assert_string_equal(t->entries[1].name, "min.insync.replicas");
    assert_string_equal(t->entries[1].value, "2");
    assert_int_equal(t->entries[1].source, KQ_CONFIG_SOURCE_DYNAMIC_TOPIC);
    assert_string_equal(t->entries[2].name, "num.partitions");
    assert_int_equal(t->entries[2].source, KQ_CONFIG_SOURCE_DEFAULT);
    assert_string_equal(t->entries[3].name, "unclean.leader.election.enable");
    assert_int_equal(t->entries[3].source, KQ_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER);
    /* broker 2 overrides unclean */
    const kq_ctl_config_result *b2 = &d.results[1];
    for (int i = 0; i < b2->n_entries; i++)
        if (!strcmp(b2->entries[i].name, "unclean.leader.election.enable")) {
            assert_string_equal(b2->entries[i].value, "false");
            assert_int_equal(b2->entries[i].source, KQ_CONFIG_SOURCE_DYNAMIC_BROKER);
        }
    assert_int_equal(d.results[2].n_entries, 1);
    assert_string_equal(d.results[2].entries[0].value, "true");
    assert_int_equal(d.results[3].error, KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    assert_int_equal(d.results[4].error, KQ_ERR_INVALID_REQUEST);
    kq_ctl_configs_desc_free(&d);
    kq_response_free(&env);
    cfx_free(&f);
}

static void test_describe_features(void **state)
{
    (void)state;
    cfx f;
    kq_buf b = {0};
    kq_response env;
    kq_ctl_features_desc d;
    char err[256];
    /* kraft.version's finalized level is the Raft layer's, given with the range */
    kq_ctl_feature_range sup[] = {{"metadata.version", 7, 27, 0}, {"kraft.version", 0, 1, 1}};

    build(&f);
    assert_int_equal(kq_ctl_encode_describe_features(f.img, sup, 2, &b), 0);
    open_resp(&b, &env);
    assert_int_equal(kq_ctl_decode_describe_features_response(&env, &d, err, sizeof err), 0);
    assert_int_equal(d.epoch, kq_image_committed_offset(f.img));
    assert_int_equal(d.n_features, 2);
    assert_string_equal(d.features[0].name, "kraft.version");
    assert_int_equal(d.features[0].finalized_level, 1);
    assert_int_equal(d.features[0].max_version, 1);
    assert_string_equal(d.features[1].name, "metadata.version");
    assert_int_equal(d.features[1].finalized_level, 21);
    assert_int_equal(d.features[1].min_version, 7);
    kq_ctl_features_desc_free(&d);
    kq_response_free(&env);
    cfx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registration_heartbeat),
        cmocka_unit_test(test_alter_partition_response),
        cmocka_unit_test(test_item_results),
        cmocka_unit_test(test_describe_cluster),
        cmocka_unit_test(test_describe_topics),
        cmocka_unit_test(test_describe_configs),
        cmocka_unit_test(test_describe_features),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
