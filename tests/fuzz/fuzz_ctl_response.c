/*
 * libFuzzer target: the controller response body decoders (kq_ctl_decode_*_response and
 * kq_ctl_decode_item_results) on a response envelope decoded by kq_codec_decode_response.
 *
 * Input: byte 0 picks the API (byte0 % 14, kq_rpc.proto body order); the rest is the body
 * message, wrapped into a valid envelope with error_code 0. A first byte >= 0xF0 means the
 * rest is a whole envelope, unwrapped.
 *
 * Checks: every decoder either fails with INVALID_REQUEST (or MALFORMED) and a message, owning
 * nothing, or fills a struct that obeys its documented bounds; a decoder for another API
 * refuses the body; registration, heartbeat and the per-item results of IncrementalAlterConfigs
 * and UpdateFeatures re-encode (kq_ctl_encode_*_response) to the same decoded value.
 */
#include "fuzz_check.h"
#include "fuzz_wire.h"
#include "answers.h"
#include "kq/ctl_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_rc(int rc, const char *err)
{
    FUZZ_CHECK(rc == KQ_ERR_INVALID_REQUEST || rc == KQ_ERR_MALFORMED);
    FUZZ_CHECK(err[0] != '\0');
}

static void check_ids(const kq_ctl_ids *ids)
{
    FUZZ_CHECK(ids->n >= 0 && ids->n <= KQ_REC_MAX_REPLICAS && (ids->n == 0 || ids->ids));
}

static void check_cluster(const kq_response *env)
{
    kq_ctl_cluster_desc d;
    char err[256] = "";
    int rc = kq_ctl_decode_describe_cluster_response(env, &d, err, sizeof err);

    if (rc) {
        check_rc(rc, err);
        FUZZ_CHECK(d.brokers == NULL && d.cluster_id == NULL);
        return;
    }
    FUZZ_CHECK(env->api_key == KQ_API_DESCRIBE_CLUSTER && d.cluster_id && d.n_brokers >= 0);
    for (int32_t i = 0; i < d.n_brokers; i++) {
        FUZZ_CHECK(d.brokers[i].n_endpoints >= 0 &&
                   d.brokers[i].n_endpoints <= KQ_REC_MAX_ENDPOINTS);
        for (int32_t k = 0; k < d.brokers[i].n_endpoints; k++)
            FUZZ_CHECK(d.brokers[i].endpoints[k].name && d.brokers[i].endpoints[k].host);
    }
    kq_ctl_cluster_desc_free(&d);
    FUZZ_CHECK(d.brokers == NULL && d.n_brokers == 0);
}

static void check_topics(const kq_response *env)
{
    kq_ctl_topics_desc d;
    char err[256] = "";
    int rc = kq_ctl_decode_describe_topics_response(env, &d, err, sizeof err);

    if (rc) {
        check_rc(rc, err);
        FUZZ_CHECK(d.topics == NULL);
        return;
    }
    FUZZ_CHECK(env->api_key == KQ_API_DESCRIBE_TOPICS && d.n_topics >= 0);
    for (int32_t i = 0; i < d.n_topics; i++) {
        const kq_ctl_topic_desc *t = &d.topics[i];

        FUZZ_CHECK(t->name != NULL);
        FUZZ_CHECK(t->n_configs >= 0 && t->n_configs <= KQ_CTL_MAX_CONFIGS);
        FUZZ_CHECK(t->n_partitions >= 0 && t->n_partitions <= KQ_CTL_MAX_PARTITIONS);
        for (int32_t k = 0; k < t->n_configs; k++)
            FUZZ_CHECK(t->configs[k].name != NULL &&
                       t->configs[k].source == KQ_CONFIG_SOURCE_DYNAMIC_TOPIC);
        for (int32_t k = 0; k < t->n_partitions; k++) {
            const kq_ctl_partition_desc *p = &t->partitions[k];

            FUZZ_CHECK(p->partition >= 0 && p->leader >= -1);
            check_ids(&p->replicas);
            check_ids(&p->isr);
            check_ids(&p->elr);
            check_ids(&p->last_known_elr);
        }
    }
    kq_ctl_topics_desc_free(&d);
}

static void check_configs(const kq_response *env)
{
    kq_ctl_configs_desc d;
    char err[256] = "";
    int rc = kq_ctl_decode_describe_configs_response(env, &d, err, sizeof err);

    if (rc) {
        check_rc(rc, err);
        FUZZ_CHECK(d.results == NULL);
        return;
    }
    FUZZ_CHECK(env->api_key == KQ_API_DESCRIBE_CONFIGS && d.n_results >= 0);
    for (int32_t i = 0; i < d.n_results; i++) {
        FUZZ_CHECK(d.results[i].resource_name && d.results[i].n_entries >= 0);
        for (int32_t k = 0; k < d.results[i].n_entries; k++)
            FUZZ_CHECK(d.results[i].entries[k].name != NULL);
    }
    kq_ctl_configs_desc_free(&d);
}

static void check_features(const kq_response *env)
{
    kq_ctl_features_desc d;
    char err[256] = "";
    int rc = kq_ctl_decode_describe_features_response(env, &d, err, sizeof err);

    if (rc) {
        check_rc(rc, err);
        FUZZ_CHECK(d.features == NULL);
        return;
    }
    FUZZ_CHECK(env->api_key == KQ_API_DESCRIBE_FEATURES && d.n_features >= 0);
    for (int32_t i = 0; i < d.n_features; i++)
        FUZZ_CHECK(d.features[i].name && d.features[i].min_version >= 0 &&
                   d.features[i].max_version >= 0 && d.features[i].finalized_level >= 0);
    kq_ctl_features_desc_free(&d);
}

/* DescribeAcls and DeleteAcls answers: bindings with their strings; re-encoded, the same. */
static void check_acls(const kq_response *env)
{
    kq_ctl_acls_desc d, d2;
    kq_ctl_delete_acls_desc x;
    kq_response env2;
    kq_buf b = {0};
    char err[256] = "";
    int rc = kq_ctl_decode_describe_acls_response(env, &d, err, sizeof err);

    if (rc) {
        check_rc(rc, err);
        FUZZ_CHECK(d.acls == NULL && d.n == 0);
    } else {
        FUZZ_CHECK(env->api_key == KQ_API_DESCRIBE_ACLS && d.n >= 0);
        for (int32_t i = 0; i < d.n; i++)
            FUZZ_CHECK(d.acls[i].resource_name && d.acls[i].principal && d.acls[i].host);
        FUZZ_CHECK(kq_ctl_encode_answer(KQ_API_DESCRIBE_ACLS, &d, &b) == 0);
        FUZZ_CHECK(kq_codec_decode_response(b.data, b.len, -1, &env2, err, sizeof err) == 0);
        FUZZ_CHECK(kq_ctl_decode_describe_acls_response(&env2, &d2, err, sizeof err) == 0);
        FUZZ_CHECK(d2.n == d.n);
        for (int32_t i = 0; i < d.n; i++)
            FUZZ_CHECK(!strcmp(d.acls[i].principal, d2.acls[i].principal) &&
                       d.acls[i].operation == d2.acls[i].operation);
        kq_ctl_acls_desc_free(&d2);
        kq_response_free(&env2);
        kq_buf_free(&b);
        kq_ctl_acls_desc_free(&d);
    }
    rc = kq_ctl_decode_delete_acls_response(env, &x, err, sizeof err);
    if (rc) {
        check_rc(rc, err);
        FUZZ_CHECK(x.results == NULL && x.n == 0);
        return;
    }
    FUZZ_CHECK(env->api_key == KQ_API_DELETE_ACLS && x.n >= 0 && x.n <= KQ_CTL_MAX_ITEMS);
    for (int32_t i = 0; i < x.n; i++) {
        FUZZ_CHECK(x.results[i].n >= 0);
        for (int32_t k = 0; k < x.results[i].n; k++)
            FUZZ_CHECK(x.results[i].acls[k].principal && x.results[i].acls[k].host);
    }
    kq_ctl_delete_acls_desc_free(&x);
}

/* A message that survives re-encoding unchanged: absent, or 1..255 bytes. */
static bool plain_message(const char *m)
{
    return !m || (m[0] && strlen(m) <= 255);
}

/* IncrementalAlterConfigs / UpdateFeatures results, taken as the controller's decisions'
 * results, re-encode through the controller's answers (controller/answers.c) to the same
 * items. */
static void round_trip_items(const kq_response *env, const kq_ctl_item_results *r)
{
    kq_simple_result *res = calloc((size_t)r->n + 1, sizeof *res);
    kq_alter_config_resource *acs = calloc((size_t)r->n + 1, sizeof *acs);
    kq_feature_update *fus = calloc((size_t)r->n + 1, sizeof *fus);
    kq_ctl_item_results again;
    kq_response env2;
    kq_buf b = {0};
    char err[256] = "";
    int rc;

    FUZZ_CHECK(res && acs && fus);
    for (int32_t i = 0; i < r->n; i++) {
        if (!plain_message(r->items[i].message))
            goto out;
        res[i].error = r->items[i].error;
        if (r->items[i].message)
            strcpy(res[i].message, r->items[i].message);
        acs[i].resource_type = r->items[i].resource_type;
        acs[i].resource_name = r->items[i].name;
        fus[i].name = r->items[i].name;
    }
    if (env->api_key == KQ_API_INCREMENTAL_ALTER_CONFIGS)
        rc = kq_ctl_encode_alter_configs_response(acs, res, r->n, &b);
    else
        rc = kq_ctl_encode_update_features_response(fus, res, r->n, &b);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(kq_codec_decode_response(b.data, b.len, -1, &env2, err, sizeof err) == 0);
    FUZZ_CHECK(kq_ctl_decode_item_results(&env2, &again, err, sizeof err) == 0);
    FUZZ_CHECK(again.n == r->n);
    for (int32_t i = 0; i < r->n; i++) {
        const kq_ctl_item_result *x = &r->items[i], *y = &again.items[i];

        FUZZ_CHECK(!strcmp(x->name, y->name) && x->error == y->error &&
                   x->resource_type == y->resource_type);
        FUZZ_CHECK((!x->message && !y->message) ||
                   (x->message && y->message && !strcmp(x->message, y->message)));
    }
    kq_ctl_item_results_free(&again);
    kq_response_free(&env2);
    kq_buf_free(&b);
out:
    free(res);
    free(acs);
    free(fus);
}

static bool is_item_api(uint32_t k)
{
    return k == KQ_API_CREATE_TOPICS || k == KQ_API_DELETE_TOPICS ||
           k == KQ_API_CREATE_PARTITIONS || k == KQ_API_ELECT_LEADERS ||
           k == KQ_API_INCREMENTAL_ALTER_CONFIGS || k == KQ_API_UPDATE_FEATURES ||
           k == KQ_API_CREATE_ACLS;
}

static void check_items(const kq_response *env)
{
    kq_ctl_item_results r;
    char err[256] = "";
    int rc = kq_ctl_decode_item_results(env, &r, err, sizeof err);

    if (rc) {
        check_rc(rc, err);
        FUZZ_CHECK(r.items == NULL && r.n == 0);
        return;
    }
    FUZZ_CHECK(is_item_api(env->api_key) && r.n >= 0 && r.n <= KQ_CTL_MAX_PARTITIONS);
    for (int32_t i = 0; i < r.n; i++) {
        const kq_ctl_item_result *it = &r.items[i];

        FUZZ_CHECK(it->name != NULL);
        if (env->api_key != KQ_API_ELECT_LEADERS)
            FUZZ_CHECK(it->partition == -1);
        if (env->api_key != KQ_API_CREATE_TOPICS)
            FUZZ_CHECK(it->num_partitions == -1 && it->replication_factor == -1);
        if (env->api_key != KQ_API_INCREMENTAL_ALTER_CONFIGS)
            FUZZ_CHECK(it->resource_type == 0);
        if (env->api_key == KQ_API_CREATE_PARTITIONS ||
            env->api_key == KQ_API_INCREMENTAL_ALTER_CONFIGS ||
            env->api_key == KQ_API_UPDATE_FEATURES || env->api_key == KQ_API_CREATE_ACLS)
            FUZZ_CHECK(!it->has_id);
    }
    if (env->api_key == KQ_API_INCREMENTAL_ALTER_CONFIGS || env->api_key == KQ_API_UPDATE_FEATURES)
        round_trip_items(env, &r);
    kq_ctl_item_results_free(&r);
}

static void check_broker_side(const kq_response *env)
{
    kq_heartbeat_result hb, hb2;
    kq_registration_result reg = {0};
    kq_alter_partition_result ap;
    kq_response env2;
    kq_buf b = {0};
    int64_t epoch = -7;
    char err[256] = "";
    int rc;

    rc = kq_ctl_decode_broker_registration_response(env, &epoch, err, sizeof err);
    if (rc) {
        check_rc(rc, err);
    } else {
        FUZZ_CHECK(env->api_key == KQ_API_BROKER_REGISTRATION && epoch >= 0);
        reg.broker_epoch = epoch;
        FUZZ_CHECK(kq_ctl_encode_broker_registration_response(&reg, &b) == 0);
        FUZZ_CHECK(kq_codec_decode_response(b.data, b.len, -1, &env2, err, sizeof err) == 0);
        epoch = -7;
        FUZZ_CHECK(kq_ctl_decode_broker_registration_response(&env2, &epoch, err, sizeof err) == 0);
        FUZZ_CHECK(epoch == reg.broker_epoch);
        kq_response_free(&env2);
        kq_buf_free(&b);
    }

    rc = kq_ctl_decode_broker_heartbeat_response(env, &hb, err, sizeof err);
    if (rc) {
        check_rc(rc, err);
    } else {
        FUZZ_CHECK(env->api_key == KQ_API_BROKER_HEARTBEAT && hb.error == 0);
        FUZZ_CHECK(kq_ctl_encode_broker_heartbeat_response(&hb, &b) == 0);
        FUZZ_CHECK(kq_codec_decode_response(b.data, b.len, -1, &env2, err, sizeof err) == 0);
        FUZZ_CHECK(kq_ctl_decode_broker_heartbeat_response(&env2, &hb2, err, sizeof err) == 0);
        FUZZ_CHECK(hb.is_caught_up == hb2.is_caught_up && hb.is_fenced == hb2.is_fenced &&
                   hb.should_shutdown == hb2.should_shutdown &&
                   hb.in_controlled_shutdown == hb2.in_controlled_shutdown);
        kq_response_free(&env2);
        kq_buf_free(&b);
    }

    rc = kq_ctl_decode_alter_partition_response(env, &ap, err, sizeof err);
    if (rc) {
        check_rc(rc, err);
        FUZZ_CHECK(ap.results == NULL && ap.n_results == 0);
    } else {
        FUZZ_CHECK(env->api_key == KQ_API_ALTER_PARTITION && ap.n_results >= 0 &&
                   ap.n_results <= KQ_CTL_MAX_PARTITIONS);
        for (int32_t i = 0; i < ap.n_results; i++)
            FUZZ_CHECK(ap.results[i].n_isr >= 0 && ap.results[i].n_isr <= KQ_REC_MAX_REPLICAS &&
                       (ap.results[i].n_isr == 0 || ap.results[i].isr));
        kq_ctl_alter_partition_response_free(&ap);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kq_response env;
    char err[256] = "";
    uint8_t *msg;
    size_t len;
    int rc;

    if (size < 1)
        return 0;
    msg = fuzz_envelope(data, size, fuzz_ctl_apis, FUZZ_N_CTL_APIS, 0, &len);
    FUZZ_CHECK(msg);
    rc = kq_codec_decode_response(msg, len, -1, &env, err, sizeof err);
    free(msg); /* decoded structs must not borrow the input */
    if (rc) {
        fuzz_check_error(rc, err);
        kq_response_free(&env);
        return 0;
    }
    /* Every decoder sees every body: the one for another API must refuse it. */
    check_cluster(&env);
    check_topics(&env);
    check_configs(&env);
    check_features(&env);
    check_acls(&env);
    check_items(&env);
    check_broker_side(&env);
    kq_response_free(&env);
    return 0;
}
