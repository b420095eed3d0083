/*
 * kq_ctlcodec: controller RPC bodies (proto/kq_ctl.proto) <-> include/kq/ctlapi.h structs.
 * Contract and ownership: include/kq/ctl_codec.h.
 *
 * Decoders keep every array they build in a small arena (a list of calloc'd blocks) owned by
 * the result; strings point into the unpacked protobuf tree, which is either borrowed from the
 * caller's kq_request or owned (kq_ctl_decode_request). Encoders build the protobuf-c structs
 * in a temporary arena pointing at the caller's data and pack them into one malloc'd buffer.
 */
#include "kq/ctl_codec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/util.h"
#include "kq_ctl.pb-c.h"
#include "kq_rpc.pb-c.h"
#include "kq_ctl_tables.h"
#include "wire.h"

/* ---------------------------------------------------------------------------------------- */
/* helpers                                                                                   */

/* What a kq_ctl_request owns. */
typedef struct req_priv {
    kq_arena a;
    kq_request env; /* decoded envelope when owned (kq_ctl_decode_request) */
    bool own_env;
} req_priv;

#define BAD(...) kq_wire_fail(errbuf, errlen, KQ_ERR_INVALID_REQUEST, __VA_ARGS__)
#define NOMEM() kq_wire_fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory")

/* Length of s, or max + 1 if longer than max. */
static size_t blen(const char *s, size_t max)
{
    return s ? strnlen(s, max + 1) : 0;
}

bool kq_ctl_is_controller_api(uint32_t k)
{
    const kq_api_info *api = kq_api_find(k);

    return api && api->kind == KQ_API_KIND_CONTROLLER;
}
/* ---------------------------------------------------------------------------------------- */
/* the request tables (generated from proto/kq_ctl.proto)                                    */

/* Every controller request body but ElectLeaders' (whose targets are regrouped by topic on
 * the wire) is a generated table over its member of kq_ctl_request's union; NULL fields: an
 * empty body. */
static const kq_wire_msg empty_cluster_m = {.desc = &kq__describe_cluster_request__descriptor};
static const kq_wire_msg empty_features_m = {.desc = &kq__describe_features_request__descriptor};
static const struct ctl_body {
    uint32_t api_key;
    const kq_wire_msg *m;
} ctl_bodies[] = {
    {KQ_API_BROKER_REGISTRATION, &kq_wt_broker_registration_request},
    {KQ_API_BROKER_HEARTBEAT, &kq_wt_broker_heartbeat_request},
    {KQ_API_UNREGISTER_BROKER, &kq_wt_unregister_broker_request},
    {KQ_API_ALTER_PARTITION, &kq_wt_alter_partition_request},
    {KQ_API_CREATE_TOPICS, &kq_wt_create_topics_request},
    {KQ_API_DELETE_TOPICS, &kq_wt_delete_topics_request},
    {KQ_API_CREATE_PARTITIONS, &kq_wt_create_partitions_request},
    {KQ_API_ELECT_LEADERS, &kq_wt_elect_leaders_request},
    {KQ_API_INCREMENTAL_ALTER_CONFIGS, &kq_wt_incremental_alter_configs_request},
    {KQ_API_DESCRIBE_CONFIGS, &kq_wt_describe_configs_request},
    {KQ_API_UPDATE_FEATURES, &kq_wt_update_features_request},
    {KQ_API_DESCRIBE_TOPICS, &kq_wt_describe_topics_request},
    {KQ_API_DESCRIBE_CLUSTER, &empty_cluster_m},
    {KQ_API_DESCRIBE_FEATURES, &empty_features_m},
    {KQ_API_CREATE_ACLS, &kq_wt_create_acls_request},
    {KQ_API_DESCRIBE_ACLS, &kq_wt_describe_acls_request},
    {KQ_API_DELETE_ACLS, &kq_wt_delete_acls_request},
};

/* Where every member of a request's union starts: the C struct a body table fills. */
#define BODY(r) (&(r)->broker_registration)

static const kq_wire_msg *body_table(uint32_t api_key)
{
    for (size_t i = 0; i < sizeof ctl_bodies / sizeof ctl_bodies[0]; i++)
        if (ctl_bodies[i].api_key == api_key)
            return ctl_bodies[i].m;
    return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* request decoding: the tables, then the rules that span fields                             */

/* Partitions (or assignments) summed over a request's topics: at most KQ_CTL_MAX_PARTITIONS. */
static int check_total(const char *what, size_t total, char *errbuf, size_t errlen)
{
    if (total > KQ_CTL_MAX_PARTITIONS)
        return BAD("%s has more than %d partitions", what, KQ_CTL_MAX_PARTITIONS);
    return 0;
}

static int check_alter_partition(const kq_alter_partition *r, char *errbuf, size_t errlen)
{
    size_t total = 0;

    for (int32_t i = 0; i < r->n_topics; i++) {
        const kq_ap_topic *t = &r->topics[i];

        if (r->version > 1 && kq_uuid_is_zero(t->topic_id))
            return BAD("alter_partition topic %d needs a 16-byte topic_id (version %d)", i,
                       r->version);
        if (r->version <= 1 && (!t->name || !t->name[0]))
            return BAD("alter_partition topic %d needs a topic_name of 1..%d bytes (version %d)", i,
                       KQ_CTL_MAX_TOPIC_NAME_BYTES, r->version);
        total += (size_t)t->n_partitions;
    }
    return check_total("alter_partition", total, errbuf, errlen);
}

static int check_create_topics(const kq_ctl_request *r, char *errbuf, size_t errlen)
{
    size_t total = 0;

    for (int32_t i = 0; i < r->create_topics.n; i++) {
        const kq_create_topic *t = &r->create_topics.topics[i];

        if (!kq_uuid_is_zero(t->topic_id) && kq_topic_id_reserved(t->topic_id))
            return BAD("create_topics topic %d topic_id is a reserved id", i);
        for (int32_t k = 0; k < t->n_configs; k++)
            if (!t->configs[k].value)
                return BAD("create_topics topic %d config '%s' has no value", i,
                           t->configs[k].name);
        total += (size_t)t->n_assignments;
    }
    return check_total("create_topics", total, errbuf, errlen);
}

static int check_resource(int8_t type, const char *what, int32_t i, char *errbuf, size_t errlen)
{
    if (type != KQ_CONFIG_RESOURCE_TOPIC && type != KQ_CONFIG_RESOURCE_BROKER)
        return BAD("%s resource %d type %d is not 2 (topic) or 4 (broker)", what, i, type);
    return 0;
}

static int check_body(kq_ctl_request *r, char *errbuf, size_t errlen)
{
    size_t total = 0;
    int rc = 0;

    switch (r->api_key) {
    case KQ_API_ALTER_PARTITION:
        return check_alter_partition(&r->alter_partition, errbuf, errlen);
    case KQ_API_CREATE_TOPICS:
        return check_create_topics(r, errbuf, errlen);
    case KQ_API_DELETE_TOPICS:
        for (int32_t i = 0; i < r->delete_topics.n; i++)
            if (!r->delete_topics.topics[i].name &&
                kq_uuid_is_zero(r->delete_topics.topics[i].topic_id))
                return BAD("delete_topics topic %d has neither a name nor a 16-byte topic_id", i);
        return 0;
    case KQ_API_CREATE_PARTITIONS:
        for (int32_t i = 0; i < r->create_partitions.n; i++)
            total += (size_t)r->create_partitions.topics[i].n_assignments;
        return check_total("create_partitions", total, errbuf, errlen);
    case KQ_API_INCREMENTAL_ALTER_CONFIGS:
        for (int32_t i = 0; i < r->alter_configs.n && !rc; i++) {
            kq_alter_config_resource *x =
                (kq_alter_config_resource *)&r->alter_configs.resources[i];

            rc = check_resource(x->resource_type, "incremental_alter_configs", i, errbuf, errlen);
            for (int32_t k = 0; k < x->n_ops && !rc; k++) {
                kq_config_op *op = (kq_config_op *)&x->ops[k];

                if (op->op == KQ_CONFIG_OP_DELETE)
                    op->value = NULL;
                else if (!op->value)
                    rc = BAD("incremental_alter_configs config '%s' has no value", op->name);
            }
        }
        return rc;
    case KQ_API_DESCRIBE_CONFIGS:
        for (int32_t i = 0; i < r->describe_configs.n && !rc; i++)
            rc = check_resource(r->describe_configs.resources[i].resource_type, "describe_configs",
                                i, errbuf, errlen);
        return rc;
    default:
        return 0;
    }
}

/* ElectLeaders: the wire's topics with partitions become the controller's targets. */
static int dec_elect_leaders(kq_arena *a, const ProtobufCMessage *body, kq_elect_leaders *r,
                             char *errbuf, size_t errlen)
{
    kq_elect_wire w;
    size_t total = 0, k = 0;
    kq_elect_target *ts;
    int rc = kq_wire_decode(&kq_wt_elect_leaders_request, body, &w, a, errbuf, errlen);

    if (rc)
        return rc;
    r->election_type = w.election_type;
    r->all_partitions = w.all_partitions;
    if (w.all_partitions)
        return w.n ? BAD("elect_leaders has all_partitions and a partition list") : 0;
    for (int32_t i = 0; i < w.n; i++)
        total += (size_t)w.topics[i].n;
    if ((rc = check_total("elect_leaders", total, errbuf, errlen)))
        return rc;
    if (!total)
        return BAD("elect_leaders names no partitions (and all_partitions is false)");
    if (!(ts = kq_arena_alloc(a, total, sizeof *ts)))
        return NOMEM();
    for (int32_t i = 0; i < w.n; i++)
        for (int32_t p = 0; p < w.topics[i].n; p++, k++) {
            ts[k] = (kq_elect_target){w.topics[i].topic, w.topics[i].partitions[p]};
            if (ts[k].partition < 0)
                return BAD("elect_leaders topic '%s' partition %d is negative", ts[k].topic,
                           ts[k].partition);
        }
    r->targets = ts;
    r->n_targets = (int32_t)total;
    return 0;
}

static int from_envelope(const kq_request *env, kq_ctl_request *out, req_priv *pv, char *errbuf,
                         size_t errlen)
{
    const kq_wire_owned *owned = env->priv_;
    const Kq__Request *rq = owned ? (const Kq__Request *)owned->msg : NULL;
    const kq_wire_msg *m = body_table(env->api_key);
    const kq_api_info *api = kq_api_find(env->api_key);
    ProtobufCMessage **slot;
    int rc;

    if (!m || !api)
        return BAD("api key %u is not a controller API", env->api_key);
    if (!rq)
        return BAD("request envelope was not decoded");
    slot = kq_wire_body_slot(&kq__request__descriptor, rq, env->api_key);
    if (!slot || (int)rq->body_case != api->body_case || !*slot)
        return BAD("request for api key %u has a missing or wrong body", env->api_key);
    if (env->api_key == KQ_API_ELECT_LEADERS) {
        memset(out, 0, sizeof *out);
        rc = dec_elect_leaders(&pv->a, *slot, &out->elect_leaders, errbuf, errlen);
    } else {
        memset(out, 0, sizeof *out);
        rc = kq_wire_decode(m, *slot, BODY(out), &pv->a, errbuf, errlen);
    }
    out->priv_ = pv;
    out->api_key = env->api_key;
    memcpy(out->cluster_id, env->cluster_id, sizeof out->cluster_id);
    out->sender_id = env->sender_id;
    return rc ? rc : check_body(out, errbuf, errlen);
}

void kq_ctl_request_free(kq_ctl_request *r)
{
    req_priv *pv;

    if (!r)
        return;
    pv = r->priv_;
    if (pv) {
        kq_arena_free(&pv->a);
        if (pv->own_env)
            kq_request_free(&pv->env);
        free(pv);
    }
    memset(r, 0, sizeof *r);
    r->sender_id = -1;
}

static int request_from(const kq_request *env, bool own, kq_ctl_request *out, char *errbuf,
                        size_t errlen)
{
    req_priv *pv = calloc(1, sizeof *pv);
    int rc;

    memset(out, 0, sizeof *out);
    out->sender_id = -1;
    if (!pv) {
        if (own)
            kq_request_free((kq_request *)env);
        return NOMEM();
    }
    if (own) {
        pv->env = *env;
        pv->own_env = true;
        env = &pv->env;
    }
    out->priv_ = pv;
    rc = from_envelope(env, out, pv, errbuf, errlen);
    if (rc)
        kq_ctl_request_free(out);
    return rc;
}

int kq_ctl_request_from_envelope(const kq_request *env, kq_ctl_request *out, char *errbuf,
                                 size_t errlen)
{
    if (!out)
        return BAD("no output for the decoded request");
    if (!env) {
        memset(out, 0, sizeof *out);
        return BAD("no request envelope");
    }
    return request_from(env, false, out, errbuf, errlen);
}

int kq_ctl_decode_request(const uint8_t *buf, size_t len, kq_ctl_request *out, char *errbuf,
                          size_t errlen)
{
    kq_request env;
    int rc;

    if (!out)
        return BAD("no output for the decoded request");
    memset(out, 0, sizeof *out);
    out->sender_id = -1;
    rc = kq_codec_decode_request(buf, len, &env, errbuf, errlen);
    if (rc)
        return rc;
    if (!kq_ctl_is_controller_api(env.api_key)) {
        rc = BAD("api key %u is not a controller API", env.api_key);
        kq_request_free(&env);
        return rc;
    }
    return request_from(&env, true, out, errbuf, errlen);
}

/* ---------------------------------------------------------------------------------------- */
/* request encoding                                                                          */

/* The targets, grouped by topic as they come (the order the results index). */
static int enc_elect_leaders(kq_arena *a, const kq_elect_leaders *r, kq_elect_wire *w)
{
    int32_t n = r->all_partitions ? 0 : r->n_targets; /* all partitions: no list */
    kq_elect_wire_topic *ts;
    int32_t *ps;

    *w = (kq_elect_wire){r->election_type, r->all_partitions, NULL, 0};
    if (n < 0 || (n > 0 && !r->targets))
        return KQ_ERR_INVALID_REQUEST;
    ts = kq_arena_alloc(a, (size_t)n, sizeof *ts);
    ps = kq_arena_alloc(a, (size_t)n, sizeof *ps);
    if (!ts || !ps)
        return KQ_ERR_NOMEM;
    for (int32_t i = 0; i < n; i++) {
        const char *topic = r->targets[i].topic ? r->targets[i].topic : "";

        if (!w->n || strcmp(ts[w->n - 1].topic, topic))
            ts[w->n++] = (kq_elect_wire_topic){topic, ps + i, 0};
        ps[i] = r->targets[i].partition;
        ts[w->n - 1].n++;
    }
    w->topics = ts;
    return 0;
}

int kq_ctl_encode_request(const char *cluster_id, int32_t sender_id, const kq_ctl_request *req,
                          kq_buf *out)
{
    kq_arena a = {0};
    const kq_wire_msg *m;
    kq_elect_wire w;
    int rc = 0;

    if (!out)
        return KQ_ERR_INVALID_REQUEST;
    out->data = NULL;
    out->len = 0;
    if (!req || blen(cluster_id, KQ_CODEC_MAX_CLUSTER_ID) > KQ_CODEC_MAX_CLUSTER_ID ||
        !(m = body_table(req->api_key)))
        return KQ_ERR_INVALID_REQUEST;
    if (req->api_key == KQ_API_ELECT_LEADERS &&
        !(rc = enc_elect_leaders(&a, &req->elect_leaders, &w)))
        rc = kq_wire_send(req->api_key, cluster_id, sender_id, &kq_wt_elect_leaders_request, &w,
                          out);
    else if (req->api_key != KQ_API_ELECT_LEADERS)
        rc = kq_wire_send(req->api_key, cluster_id, sender_id, m, BODY(req), out);
    kq_arena_free(&a);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* responses                                                                                 */

static int start(kq_buf *out)
{
    if (!out)
        return KQ_ERR_INVALID_REQUEST;
    out->data = NULL;
    out->len = 0;
    return 0;
}

static int error_response(uint32_t api_key, int error, const char *message, kq_buf *out)
{
    return kq_codec_encode_error_response(api_key, error, message && message[0] ? message : NULL,
                                          -1, -1, NULL, out);
}

/* Send body c (a struct of table m) as api_key's answer and free the arena a. */
static int send_body(uint32_t api_key, const kq_wire_msg *m, const void *c, kq_arena *a,
                     kq_buf *out)
{
    int rc = kq_wire_send(api_key, KQ_WIRE_ANSWER, 0, m, c, out);

    kq_arena_free(a);
    return rc;
}

int kq_ctl_encode_broker_registration_response(const kq_registration_result *res, kq_buf *out)
{
    kq_arena a = {0};

    if (start(out) || !res)
        return KQ_ERR_INVALID_REQUEST;
    if (res->error)
        return error_response(KQ_API_BROKER_REGISTRATION, res->error, res->message, out);
    return send_body(KQ_API_BROKER_REGISTRATION, &kq_wt_broker_registration_response, res, &a, out);
}

int kq_ctl_encode_broker_heartbeat_response(const kq_heartbeat_result *res, kq_buf *out)
{
    kq_arena a = {0};

    if (start(out) || !res)
        return KQ_ERR_INVALID_REQUEST;
    if (res->error)
        return error_response(KQ_API_BROKER_HEARTBEAT, res->error, res->message, out);
    return send_body(KQ_API_BROKER_HEARTBEAT, &kq_wt_broker_heartbeat_response, res, &a, out);
}

int kq_ctl_encode_unregister_broker_response(int error, const char *message, kq_buf *out)
{
    static const kq_wire_msg empty = {.desc = &kq__unregister_broker_response__descriptor,
                                      .size = 1};
    kq_arena a = {0};

    if (start(out))
        return KQ_ERR_INVALID_REQUEST;
    if (error)
        return error_response(KQ_API_UNREGISTER_BROKER, error, message, out);
    return send_body(KQ_API_UNREGISTER_BROKER, &empty, &a, &a, out);
}

int kq_ctl_encode_alter_partition_response(const kq_alter_partition *req,
                                           const kq_alter_partition_result *res, kq_buf *out)
{
    kq_arena a = {0};
    kq_ap_wire_topic *ts;
    int32_t k = 0, total = 0;

    if (start(out) || !req || !res || req->n_topics < 0 || (req->n_topics && !req->topics))
        return KQ_ERR_INVALID_REQUEST;
    if (res->error)
        return error_response(KQ_API_ALTER_PARTITION, res->error, res->message, out);
    for (int32_t i = 0; i < req->n_topics; i++)
        total += req->topics[i].n_partitions;
    if (total != res->n_results || (total > 0 && !res->results))
        return KQ_ERR_INVALID_REQUEST;
    if (!(ts = kq_arena_alloc(&a, (size_t)req->n_topics, sizeof *ts)))
        return KQ_ERR_NOMEM;
    for (int32_t i = 0; i < req->n_topics; i++) {
        const kq_ap_topic *t = &req->topics[i];

        if (!(ts[i].partitions =
                  kq_arena_alloc(&a, (size_t)t->n_partitions, sizeof(kq_ap_wire_result)))) {
            kq_arena_free(&a);
            return KQ_ERR_NOMEM;
        }
        ts[i].n = t->n_partitions;
        if (req->version > 1)
            memcpy(ts[i].topic_id, t->topic_id, 16);
        else
            ts[i].name = (char *)t->name;
        for (int32_t p = 0; p < t->n_partitions; p++, k++) {
            kq_ap_wire_result *v = &ts[i].partitions[p];

            v->partition_index = t->partitions[p].partition_index;
            v->r = res->results[k];
            if (v->r.error) { /* an error answer names no leader, epoch or ISR */
                v->r.leader_id = v->r.leader_epoch = v->r.partition_epoch = -1;
                v->r.n_isr = 0;
            } else if (!v->r.isr) {
                v->r.n_isr = 0;
            }
        }
    }
    return send_body(KQ_API_ALTER_PARTITION, &kq_wt_alter_partition_response,
                     &(kq_ap_wire_answer){ts, req->n_topics}, &a, out);
}

/* The answers whose C struct is the generated one of their table (or a kq_ctl_item_results),
 * built by the controller (controller/answers.c); `items`: a per-item answer, which
 * kq_ctl_decode_item_results reads. */
static const struct {
    uint32_t api_key;
    const kq_wire_msg *m;
    bool items;
} answers[] = {
    {KQ_API_CREATE_TOPICS, &kq_wt_create_topics_response, true},
    {KQ_API_DELETE_TOPICS, &kq_wt_delete_topics_response, true},
    {KQ_API_CREATE_PARTITIONS, &kq_wt_create_partitions_response, true},
    {KQ_API_INCREMENTAL_ALTER_CONFIGS, &kq_wt_incremental_alter_configs_response, true},
    {KQ_API_UPDATE_FEATURES, &kq_wt_update_features_response, true},
    {KQ_API_ELECT_LEADERS, &kq_wt_elect_leaders_response, false},
    {KQ_API_DESCRIBE_CLUSTER, &kq_wt_describe_cluster_response, false},
    {KQ_API_DESCRIBE_TOPICS, &kq_wt_describe_topics_response, false},
    {KQ_API_DESCRIBE_CONFIGS, &kq_wt_describe_configs_response, false},
    {KQ_API_DESCRIBE_FEATURES, &kq_wt_describe_features_response, false},
    {KQ_API_CREATE_ACLS, &kq_wt_create_acls_response, true},
    {KQ_API_DESCRIBE_ACLS, &kq_wt_describe_acls_response, false},
    {KQ_API_DELETE_ACLS, &kq_wt_delete_acls_response, false},
};

int kq_ctl_encode_answer(uint32_t api_key, const void *body, kq_buf *out)
{
    if (start(out) || !body)
        return KQ_ERR_INVALID_REQUEST;
    for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++)
        if (answers[i].api_key == api_key)
            return kq_wire_send(api_key, KQ_WIRE_ANSWER, 0, answers[i].m, body, out);
    return KQ_ERR_INVALID_REQUEST;
}

/* ---------------------------------------------------------------------------------------- */
/* decoded responses (owned copies); ElectLeaders and AlterPartition answer per topic, and    */
/* their C structs list partitions: their wire shapes (kq_elect_wire_results,                */
/* kq_ap_wire_answer) are flattened after decoding                                           */

/* The flatten below keeps the first sizeof(kq_ap_result) bytes of each partition's result. */
_Static_assert(offsetof(kq_ap_wire_result, r) == 0, "kq_ap_wire_result starts with its result");

const kq_wire_msg *const kq_wire_ctl_tables[] = {
    &kq_wt_broker_registration_request,
    &kq_wt_broker_heartbeat_request,
    &kq_wt_unregister_broker_request,
    &kq_wt_alter_partition_request,
    &kq_wt_create_topics_request,
    &kq_wt_delete_topics_request,
    &kq_wt_create_partitions_request,
    &kq_wt_incremental_alter_configs_request,
    &kq_wt_describe_configs_request,
    &kq_wt_update_features_request,
    &kq_wt_describe_topics_request,
    &empty_cluster_m,
    &empty_features_m,
    &kq_wt_elect_leaders_request,
    &kq_wt_describe_cluster_response,
    &kq_wt_describe_topics_response,
    &kq_wt_describe_configs_response,
    &kq_wt_describe_features_response,
    &kq_wt_create_topics_response,
    &kq_wt_delete_topics_response,
    &kq_wt_create_partitions_response,
    &kq_wt_incremental_alter_configs_response,
    &kq_wt_update_features_response,
    &kq_wt_elect_leaders_response,
    &kq_wt_alter_partition_response,
    &kq_wt_broker_heartbeat_response,
    &kq_wt_broker_registration_response,
    &kq_wt_create_acls_request,
    &kq_wt_describe_acls_request,
    &kq_wt_delete_acls_request,
    &kq_wt_create_acls_response,
    &kq_wt_describe_acls_response,
    &kq_wt_delete_acls_response,
    NULL,
};

/* Decode env's body (api_key's) into out through m, owned copies; out is left empty on error. */
static int dec_response(const kq_response *env, uint32_t api_key, const kq_wire_msg *m, void *out,
                        char *errbuf, size_t errlen)
{
    const kq_api_info *api = kq_api_find(api_key);
    const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(
        &kq__response__descriptor, (unsigned)api->body_case);
    const Kq__Response *rs;
    int rc;

    if (!out)
        return BAD("no output");
    memset(out, 0, m->size);
    if (!env || !env->priv_ || !(rs = (const Kq__Response *)((kq_wire_owned *)env->priv_)->msg))
        return BAD("%s: no decoded response", api->body);
    if (env->api_key != api_key)
        return BAD("%s: response is for api key %u", api->body, env->api_key);
    if ((int)rs->body_case != api->body_case || !fd)
        return BAD("%s response has no %s body", api->body, api->body);
    rc = kq_wire_decode(m, *(ProtobufCMessage *const *)((const char *)rs + fd->offset), out, NULL,
                        errbuf, errlen);
    if (rc) {
        kq_wire_free(m, out);
        memset(out, 0, m->size);
    }
    return rc;
}

/* Concatenate the n nested arrays (elements of `size` bytes, at offset `arr` with an int32_t
 * count at `cnt` in each of the n structs of `step` bytes at tops) into one malloc'd array of
 * elements of `keep` bytes (the first `keep` of each), moving them; each nested array is
 * freed. */
static void *flatten(void *tops, int32_t n, size_t step, size_t arr, size_t cnt, size_t size,
                     size_t keep, int32_t *total)
{
    char *out;
    size_t k = 0;
    int64_t sum = 0;

    *total = 0;
    for (int32_t i = 0; i < n; i++)
        sum += *(int32_t *)((char *)tops + (size_t)i * step + cnt);
    if (sum > INT32_MAX || !(out = calloc(sum ? (size_t)sum : 1, keep)))
        return NULL; /* the nested arrays are left as they were */
    *total = (int32_t)sum;
    for (int32_t i = 0; i < n; i++) {
        char *top = (char *)tops + (size_t)i * step, *elems = *(char **)(top + arr);

        for (int32_t j = 0; j < *(int32_t *)(top + cnt); j++, k++)
            memcpy(out + k * keep, elems + (size_t)j * size, keep);
        free(elems);
        *(void **)(top + arr) = NULL;
        *(int32_t *)(top + cnt) = 0;
    }
    return out;
}

/* Frees what the decoded answer d (a struct of table m) owns and clears it; false for NULL. */
static bool desc_free(const kq_wire_msg *m, void *d)
{
    if (!d)
        return false;
    kq_wire_free(m, d);
    memset(d, 0, m->size);
    return true;
}

void kq_ctl_cluster_desc_free(kq_ctl_cluster_desc *d)
{
    if (desc_free(&kq_wt_describe_cluster_response, d))
        d->controller_id = -1;
}

int kq_ctl_decode_describe_cluster_response(const kq_response *env, kq_ctl_cluster_desc *out,
                                            char *errbuf, size_t errlen)
{
    int rc = dec_response(env, KQ_API_DESCRIBE_CLUSTER, &kq_wt_describe_cluster_response, out,
                          errbuf, errlen);

    if (rc && out)
        out->controller_id = -1;
    return rc;
}

void kq_ctl_topics_desc_free(kq_ctl_topics_desc *d)
{
    desc_free(&kq_wt_describe_topics_response, d);
}

int kq_ctl_decode_describe_topics_response(const kq_response *env, kq_ctl_topics_desc *out,
                                           char *errbuf, size_t errlen)
{
    int rc = dec_response(env, KQ_API_DESCRIBE_TOPICS, &kq_wt_describe_topics_response, out, errbuf,
                          errlen);

    for (int32_t i = 0; !rc && i < out->n_topics; i++) /* DescribeTopics sends topic configs */
        for (int32_t k = 0; k < out->topics[i].n_configs; k++)
            out->topics[i].configs[k].source = KQ_CONFIG_SOURCE_DYNAMIC_TOPIC;
    return rc;
}

void kq_ctl_configs_desc_free(kq_ctl_configs_desc *d)
{
    desc_free(&kq_wt_describe_configs_response, d);
}

int kq_ctl_decode_describe_configs_response(const kq_response *env, kq_ctl_configs_desc *out,
                                            char *errbuf, size_t errlen)
{
    return dec_response(env, KQ_API_DESCRIBE_CONFIGS, &kq_wt_describe_configs_response, out, errbuf,
                        errlen);
}

void kq_ctl_features_desc_free(kq_ctl_features_desc *d)
{
    if (desc_free(&kq_wt_describe_features_response, d))
        d->epoch = -1;
}

int kq_ctl_decode_describe_features_response(const kq_response *env, kq_ctl_features_desc *out,
                                             char *errbuf, size_t errlen)
{
    int rc = dec_response(env, KQ_API_DESCRIBE_FEATURES, &kq_wt_describe_features_response, out,
                          errbuf, errlen);

    if (rc && out)
        out->epoch = -1;
    return rc;
}

void kq_ctl_acls_desc_free(kq_ctl_acls_desc *d)
{
    desc_free(&kq_wt_describe_acls_response, d);
}

int kq_ctl_decode_describe_acls_response(const kq_response *env, kq_ctl_acls_desc *out,
                                         char *errbuf, size_t errlen)
{
    return dec_response(env, KQ_API_DESCRIBE_ACLS, &kq_wt_describe_acls_response, out, errbuf,
                        errlen);
}

void kq_ctl_delete_acls_desc_free(kq_ctl_delete_acls_desc *d)
{
    desc_free(&kq_wt_delete_acls_response, d);
}

int kq_ctl_decode_delete_acls_response(const kq_response *env, kq_ctl_delete_acls_desc *out,
                                       char *errbuf, size_t errlen)
{
    return dec_response(env, KQ_API_DELETE_ACLS, &kq_wt_delete_acls_response, out, errbuf, errlen);
}

void kq_ctl_item_results_free(kq_ctl_item_results *r)
{
    if (!r)
        return;
    kq_wire_free(answers[0].m, r); /* every item table owns the same two strings */
    memset(r, 0, sizeof *r);
}

/* ElectLeaders: one item per partition, named by its topic. */
static int dec_elect_results(const kq_response *env, kq_ctl_item_results *out, char *errbuf,
                             size_t errlen)
{
    kq_elect_wire_results w;
    int64_t total = 0;
    int rc =
        dec_response(env, KQ_API_ELECT_LEADERS, &kq_wt_elect_leaders_response, &w, errbuf, errlen);

    if (rc)
        return rc;
    for (int32_t i = 0; i < w.n; i++)
        total += w.topics[i].n;
    if (total > KQ_CTL_MAX_PARTITIONS)
        rc = BAD("elect_leaders response has more than %d partitions", KQ_CTL_MAX_PARTITIONS);
    for (int32_t i = 0; !rc && i < w.n; i++)
        for (int32_t p = 0; !rc && p < w.topics[i].n; p++) {
            kq_ctl_item_result *it = &w.topics[i].partitions[p];

            it->has_id = w.topics[i].has_id;
            memcpy(it->topic_id, w.topics[i].topic_id, 16);
            if (!(it->name = strdup(w.topics[i].topic)))
                rc = NOMEM();
        }
    if (!rc && !(out->items = flatten(w.topics, w.n, sizeof *w.topics,
                                      offsetof(kq_elect_wire_topic_result, partitions),
                                      offsetof(kq_elect_wire_topic_result, n), sizeof *out->items,
                                      sizeof *out->items, &out->n)))
        rc = NOMEM();
    for (int32_t i = 0; rc && i < w.n; i++) /* the names are not in the table: free them here */
        for (int32_t p = 0; p < w.topics[i].n; p++)
            free(w.topics[i].partitions[p].name);
    kq_wire_free(&kq_wt_elect_leaders_response, &w); /* after a flatten, only the topics are left */
    return rc;
}

int kq_ctl_decode_item_results(const kq_response *env, kq_ctl_item_results *out, char *errbuf,
                               size_t errlen)
{
    int rc = BAD("response for api key %u has no per-item results", env ? env->api_key : 0);

    if (!out)
        return BAD("no output");
    memset(out, 0, sizeof *out);
    if (!env || !env->priv_)
        return BAD("no decoded response");
    if (env->api_key == KQ_API_ELECT_LEADERS)
        rc = dec_elect_results(env, out, errbuf, errlen);
    for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++)
        if (answers[i].items && answers[i].api_key == env->api_key)
            rc = dec_response(env, env->api_key, answers[i].m, out, errbuf, errlen);
    for (int32_t i = 0; !rc && i < out->n; i++) {
        kq_ctl_item_result *it = &out->items[i];

        if (env->api_key != KQ_API_ELECT_LEADERS)
            it->partition = -1;
        if (env->api_key != KQ_API_CREATE_TOPICS)
            it->num_partitions = it->replication_factor = -1;
        if (!it->name && !(it->name = strdup("")))
            rc = NOMEM();
    }
    if (rc)
        kq_ctl_item_results_free(out);
    return rc;
}

int kq_ctl_decode_broker_registration_response(const kq_response *env, int64_t *broker_epoch,
                                               char *errbuf, size_t errlen)
{
    kq_registration_result r;
    int rc;

    if (!broker_epoch)
        return BAD("no output");
    rc = dec_response(env, KQ_API_BROKER_REGISTRATION, &kq_wt_broker_registration_response, &r,
                      errbuf, errlen);
    if (!rc)
        *broker_epoch = r.broker_epoch;
    return rc;
}

int kq_ctl_decode_broker_heartbeat_response(const kq_response *env, kq_heartbeat_result *out,
                                            char *errbuf, size_t errlen)
{
    if (!out)
        return BAD("no output");
    return dec_response(env, KQ_API_BROKER_HEARTBEAT, &kq_wt_broker_heartbeat_response, out, errbuf,
                        errlen);
}

void kq_ctl_alter_partition_response_free(kq_alter_partition_result *r)
{
    if (!r)
        return;
    for (int32_t i = 0; i < r->n_results; i++)
        free(r->results[i].isr);
    free(r->results);
    memset(r, 0, sizeof *r);
}

int kq_ctl_decode_alter_partition_response(const kq_response *env, kq_alter_partition_result *out,
                                           char *errbuf, size_t errlen)
{
    kq_ap_wire_answer w;
    int64_t total = 0;
    int rc;

    if (!out)
        return BAD("no output");
    memset(out, 0, sizeof *out);
    if ((rc = dec_response(env, KQ_API_ALTER_PARTITION, &kq_wt_alter_partition_response, &w, errbuf,
                           errlen)))
        return rc;
    for (int32_t i = 0; i < w.n; i++)
        total += w.topics[i].n;
    if (total > KQ_CTL_MAX_PARTITIONS)
        rc = BAD("alter_partition response has more than %d partitions", KQ_CTL_MAX_PARTITIONS);
    else if (!(out->results =
                   flatten(w.topics, w.n, sizeof *w.topics, offsetof(kq_ap_wire_topic, partitions),
                           offsetof(kq_ap_wire_topic, n), sizeof(kq_ap_wire_result),
                           sizeof(kq_ap_result), &out->n_results)))
        rc = NOMEM();
    kq_wire_free(&kq_wt_alter_partition_response, &w);
    return rc;
}
