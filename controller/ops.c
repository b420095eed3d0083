#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl_control.h"
#include "cluster_control.h"
#include "answers.h"
#include "kq/error.h"
#include "kq/principal.h"
#include "replication_control.h"

/* Features this controller supports (kq_ctl_encode_describe_features, UpdateFeatures). */
static const kq_ctl_feature_range SUPPORTED_FEATURES[] = {
    {"eligible.leader.replicas.version", 0, 1, 0},
    {"kraft.version", 0, 1, 0}, /* 1 only with kq_op_ctx.upgrade_kraft */
    {"metadata.version", 1, 1, 0},
};
#define N_SUPPORTED_FEATURES ((int32_t)(sizeof(SUPPORTED_FEATURES) / sizeof(SUPPORTED_FEATURES[0])))

/* KQ_ERR_NOT_CONTROLLER when leadership is lost in the middle of an operation (a flush of a
 * full batch steps the core, which may resign): the records after it are not written, and
 * the answer is NOT_CONTROLLER (those already proposed may or may not commit). */
static void view_drop(const kq_op_ctx *ctx);

static int add_record(const kq_op_ctx *ctx, const kq_record *r, char *errbuf, size_t errlen)
{
    if (r->type == KQ_REC_ACL || r->type == KQ_REC_REMOVE_ACL)
        view_drop(ctx);
    int rc =
        kq_meta_add(ctx->meta, r, ctx->batch, *ctx->batch_base, ctx->batch_count, errbuf, errlen);
    if (rc == KQ_ERR_NOT_CONTROLLER)
        return rc;
    if (rc != 0)
        return KQ_ERR_FATAL;
    if (ctx->flush != NULL && ctx->batch->len >= ctx->max_batch_bytes) {
        ctx->flush(ctx->flush_arg);
        view_drop(ctx); /* a flush may commit: undo entries the view reads are then freed */
        if (!ctx->meta->active) {
            snprintf(errbuf, errlen,
                     "leadership was lost while the operation's records were proposed");
            return KQ_ERR_NOT_CONTROLLER;
        }
    }
    return 0;
}

/* Validate every record of an operation before the first is applied: a record the image
 * would refuse is the client's fault (answered INVALID_REQUEST), not corruption, and an
 * operation is applied whole or not at all. Client operations are also capped at
 * KQ_OP_MAX_RECORDS (kraft-semantics 3.1); the timers (fencing, elections) are not. */
static int check_records(const kq_reclist *l, bool capped, char *errbuf, size_t errlen)
{
    char why[256];
    if (capped && l->n > KQ_OP_MAX_RECORDS) {
        snprintf(errbuf, errlen, "the operation would write %zu records; the limit is %d", l->n,
                 KQ_OP_MAX_RECORDS);
        return KQ_ERR_POLICY_VIOLATION;
    }
    for (size_t i = 0; i < l->n; i++) {
        if (kq_record_validate(&l->v[i], why, sizeof(why)) != 0) {
            snprintf(errbuf, errlen, "invalid request: %s", why);
            return KQ_ERR_INVALID_REQUEST;
        }
    }
    return 0;
}

static int add_list(const kq_op_ctx *ctx, kq_reclist *l, bool capped, char *errbuf, size_t errlen)
{
    int rc = check_records(l, capped, errbuf, errlen);
    for (size_t i = 0; i < l->n && rc == 0; i++)
        rc = add_record(ctx, &l->v[i], errbuf, errlen);
    kq_reclist_free(l);
    return rc;
}

/* Records of the controller's own timers: a record that does not validate is a bug. */
static int timer_records(const kq_op_ctx *ctx, kq_reclist *l, char *errbuf, size_t errlen)
{
    int rc = add_list(ctx, l, false, errbuf, errlen);
    return rc == 0 || rc == KQ_ERR_NOT_CONTROLLER ? rc : KQ_ERR_FATAL;
}

/* Records of a client operation. */
static int add_records(const kq_op_ctx *ctx, kq_reclist *l, char *errbuf, size_t errlen)
{
    return add_list(ctx, l, true, errbuf, errlen);
}

/* Offset the next appended record gets (a new broker epoch is that offset). */
static int64_t log_next(const kq_op_ctx *ctx)
{
    return *ctx->batch_base + *ctx->batch_count;
}

static int op_register(const kq_op_ctx *ctx, const kq_broker_registration *req, kq_buf *resp,
                       char *errbuf, size_t errlen)
{
    kq_reclist out;
    kq_registration_result res;
    memset(&res, 0, sizeof(res));
    kq_reclist_init(&out);
    kq_cc_register(ctx->meta->cc, ctx->meta->img, req, log_next(ctx), ctx->now_ms, &out, &res);
    int rc = add_records(ctx, &out, errbuf, errlen);
    if (rc != 0)
        return rc;
    return kq_ctl_encode_broker_registration_response(&res, resp);
}

static int op_heartbeat(const kq_op_ctx *ctx, const kq_heartbeat *req, kq_buf *resp, char *errbuf,
                        size_t errlen)
{
    kq_reclist out;
    kq_heartbeat_result res;
    memset(&res, 0, sizeof(res));
    kq_reclist_init(&out);
    kq_cc_heartbeat(ctx->meta->cc, ctx->meta->img, req, log_next(ctx), ctx->now_ms, &out, &res);
    int rc = add_records(ctx, &out, errbuf, errlen);
    if (rc != 0)
        return rc;
    return kq_ctl_encode_broker_heartbeat_response(&res, resp);
}

static int op_unregister(const kq_op_ctx *ctx, int32_t id, kq_buf *resp, char *errbuf,
                         size_t errlen)
{
    kq_reclist out;
    kq_reclist_init(&out);
    int err = kq_cc_unregister(ctx->meta->cc, ctx->meta->img, id, &out);
    int rc = add_records(ctx, &out, errbuf, errlen);
    if (rc != 0)
        return rc;
    return kq_ctl_encode_unregister_broker_response(err, err ? kq_err_message(err) : NULL, resp);
}

static int op_alter_partition(const kq_op_ctx *ctx, const kq_alter_partition *req, kq_buf *resp,
                              char *errbuf, size_t errlen)
{
    kq_reclist out;
    kq_alter_partition_result res;
    kq_ap_ctx apc = {.s = &ctx->meta->settings, .active = true};
    memset(&res, 0, sizeof(res));
    kq_reclist_init(&out);
    kq_rc_alter_partition(&apc, ctx->meta->img, req, &out, &res);
    int rc = add_records(ctx, &out, errbuf, errlen);
    if (rc == 0)
        rc = kq_ctl_encode_alter_partition_response(req, &res, resp);
    kq_alter_partition_result_free(&res);
    return rc;
}

static int allowed(const kq_op_ctx *ctx, kq_acl_operation op, kq_acl_resource_type type,
                   const char *name, char *msg, size_t cap);

static int op_create_topics(const kq_op_ctx *ctx, const kq_create_topic *reqs, int32_t n,
                            kq_buf *resp, char *errbuf, size_t errlen)
{
    kq_reclist out;
    size_t cap = n > 0 ? (size_t)n : 1;
    kq_create_topic_result *res = calloc(cap, sizeof(*res)), *refused = calloc(cap, sizeof(*res));
    char msg[sizeof res->message];
    int64_t partitions = 0;
    int rc = KQ_ERR_NOMEM;
    if (res == NULL || refused == NULL)
        goto out;
    /* Create on the cluster allows every topic; without it, Create on each topic decides,
     * and a topic refused is answered TOPIC_AUTHORIZATION_FAILED (Kafka) */
    bool cluster = kq_op_authorize(ctx->authz, ctx->meta->img, ctx->principal, KQ_ACL_OP_CREATE,
                                   KQ_ACL_RESOURCE_CLUSTER, KQ_ACL_CLUSTER_NAME, msg,
                                   sizeof msg) == 0; /* not a refusal: the topics decide then */
    for (int32_t i = 0; i < n; i++) {
        if (!cluster &&
            (refused[i].error = allowed(ctx, KQ_ACL_OP_CREATE, KQ_ACL_RESOURCE_TOPIC, reqs[i].name,
                                        refused[i].message, sizeof refused[i].message))) {
            refused[i].num_partitions = refused[i].replication_factor = -1;
            continue;
        }
        partitions += reqs[i].n_assignments > 0    ? reqs[i].n_assignments
                      : reqs[i].num_partitions > 0 ? reqs[i].num_partitions
                                                   : ctx->meta->settings.num_partitions;
    }
    /* Refuse before building millions of records (one per partition). */
    if (partitions > KQ_OP_MAX_RECORDS) {
        snprintf(errbuf, errlen,
                 "the request creates %lld partitions; one request may create at most %d",
                 (long long)partitions, KQ_OP_MAX_RECORDS);
        rc = KQ_ERR_POLICY_VIOLATION;
        goto out;
    }
    kq_reclist_init(&out);
    kq_rc_create_topics(&ctx->meta->settings, ctx->meta->img, reqs, n, refused, &ctx->meta->rng,
                        &out, res);
    rc = add_records(ctx, &out, errbuf, errlen);
    if (rc == 0)
        rc = kq_ctl_encode_create_topics_response(reqs, res, n, resp);
out:
    free(res);
    free(refused);
    return rc;
}

/* May the client do op on the resource? 0, or TOPIC_AUTHORIZATION_FAILED (a topic) /
 * CLUSTER_AUTHORIZATION_FAILED with msg naming principal, operation and resource. */
/* The error refusing op on a resource of this type. */
static int refusal(kq_acl_resource_type type)
{
    return type == KQ_ACL_RESOURCE_TOPIC ? KQ_ERR_TOPIC_AUTHORIZATION_FAILED
                                         : KQ_ERR_CLUSTER_AUTHORIZATION_FAILED;
}

/* One decision over the committed ACLs held in *view (built at its first use; the caller frees
 * view->scratch). 0, or the refusal with msg set. */
static int decide(const kq_authorizer_config *authz, const kq_image *img,
                  struct kq_op_refusals *view, const char *who, kq_acl_operation op,
                  kq_acl_resource_type type, const char *name, char *msg, size_t cap)
{
    if (!view->have_view) {
        if (kq_image_committed_acls(img, &view->acls, &view->n_acls, &view->scratch)) {
            snprintf(msg, cap, "out of memory deciding whether %s may %s", who,
                     kq_acl_operation_name(op));
            return refusal(type);
        }
        view->have_view = true;
    }
    if (kq_authorize(authz, view->acls, view->n_acls, who, "", op, type, name ? name : "", msg,
                     cap))
        return 0;
    return refusal(type);
}

int kq_op_authorize(const kq_authorizer_config *authz, const kq_image *img, const char *principal,
                    kq_acl_operation op, kq_acl_resource_type type, const char *name, char *msg,
                    size_t cap)
{
    struct kq_op_refusals view = {0};
    int rc;

    if (!authz || !authz->enabled)
        return 0;
    rc = decide(authz, img, &view, principal ? principal : KQ_PRINCIPAL_ANONYMOUS, op, type, name,
                msg, cap);
    free(view.scratch);
    return rc;
}

/* The operation's per-item check, over the committed ACLs built once per operation. A
 * refusal is counted, unless `filtering` (a request for every topic lists the allowed ones:
 * leaving one out refuses nothing, as in Kafka). */
static int check_item(const kq_op_ctx *ctx, bool filtering, kq_acl_operation op,
                      kq_acl_resource_type type, const char *name, char *msg, size_t cap)
{
    struct kq_op_refusals *st = ctx->refusals;
    const char *who = ctx->principal ? ctx->principal : KQ_PRINCIPAL_ANONYMOUS;
    int rc;

    if (!ctx->authz || !ctx->authz->enabled)
        return 0;
    if (!st)
        return kq_op_authorize(ctx->authz, ctx->meta->img, who, op, type, name, msg, cap);
    rc = decide(ctx->authz, ctx->meta->img, st, who, op, type, name, msg, cap);
    if (rc && !filtering) {
        st->items++;
        snprintf(st->msg, sizeof st->msg, "%s", msg);
    }
    return rc;
}

static int allowed(const kq_op_ctx *ctx, kq_acl_operation op, kq_acl_resource_type type,
                   const char *name, char *msg, size_t cap)
{
    return check_item(ctx, false, op, type, name, msg, cap);
}

/* Drops the operation's ACL view (an ACL record was applied: it may point at moved memory). */
static void view_drop(const kq_op_ctx *ctx)
{
    if (ctx->refusals && ctx->refusals->have_view) {
        free(ctx->refusals->scratch);
        ctx->refusals->scratch = NULL;
        ctx->refusals->have_view = false;
    }
}

/* A config resource: a topic by name; a broker (or the cluster default) is the cluster. */
static int config_allowed(const kq_op_ctx *ctx, bool filtering, kq_acl_operation op, int8_t type,
                          const char *name, char *msg, size_t cap)
{
    return type == KQ_CONFIG_RESOURCE_TOPIC
               ? check_item(ctx, filtering, op, KQ_ACL_RESOURCE_TOPIC, name, msg, cap)
               : check_item(ctx, filtering, op, KQ_ACL_RESOURCE_CLUSTER, KQ_ACL_CLUSTER_NAME, msg,
                            cap);
}

/* The describe answers' per-item check (answers.h). */
typedef struct describe_authz {
    const kq_op_ctx *ctx;
    kq_acl_operation op;
} describe_authz;

static int describe_check(void *arg, int8_t type, const char *name, bool filtering, char *msg,
                          size_t cap)
{
    const describe_authz *d = arg;
    return config_allowed(d->ctx, filtering, d->op, type, name, msg, cap);
}

/* Per-item operations whose later items must see the earlier items' records: decide one
 * item, add its records (applied at once), then the next. An item `check` refuses is answered
 * with its error and writes nothing. *res_out (n results) is the caller's to free. */
typedef void (*item_fn)(const kq_op_ctx *ctx, int32_t i, kq_reclist *out, kq_simple_result *res,
                        const void *reqs);
typedef int (*item_check)(const kq_op_ctx *ctx, int32_t i, const void *reqs, char *msg, size_t cap);

static int run_items(const kq_op_ctx *ctx, const void *reqs, int32_t n, item_check check,
                     item_fn fn, kq_simple_result **res_out, char *errbuf, size_t errlen)
{
    int rc = 0;
    kq_simple_result *res = calloc(n > 0 ? (size_t)n : 1, sizeof(*res));
    if (res == NULL)
        return KQ_ERR_NOMEM;
    for (int32_t i = 0; i < n && rc == 0; i++) {
        kq_reclist out;
        kq_reclist_init(&out);
        if (check && (res[i].error = check(ctx, i, reqs, res[i].message, sizeof res[i].message)))
            continue;
        fn(ctx, i, &out, &res[i], reqs);
        rc = add_records(ctx, &out, errbuf, errlen);
    }
    if (rc != 0) {
        free(res);
        return rc;
    }
    *res_out = res;
    return 0;
}

static int delete_check(const kq_op_ctx *ctx, int32_t i, const void *reqs, char *msg, size_t cap)
{
    const kq_delete_topic *r = &((const kq_delete_topic *)reqs)[i];
    const kq_topic *known = r->name ? NULL : kq_image_topic_by_id(ctx->meta->img, r->topic_id);
    const char *name = r->name ? r->name : known ? known->name : NULL;

    char other[KQ_CTL_MAX_MESSAGE + 1], id[KQ_UUID_STR_LEN + 1];
    int rc;

    /* an unknown id is answered UNKNOWN_TOPIC_ID by the operation */
    if (!name || !(rc = allowed(ctx, KQ_ACL_OP_DELETE, KQ_ACL_RESOURCE_TOPIC, name, msg, cap)))
        return 0;
    /* named by id: its name is told only to who may Describe it (Kafka answers no name) */
    if (!r->name && check_item(ctx, true, KQ_ACL_OP_DESCRIBE, KQ_ACL_RESOURCE_TOPIC, name, other,
                               sizeof other)) {
        kq_uuid_format(r->topic_id, id);
        snprintf(msg, cap, "principal %s is not allowed to Delete topic id %s",
                 ctx->principal ? ctx->principal : KQ_PRINCIPAL_ANONYMOUS, id);
    }
    return rc;
}

static int create_partitions_check(const kq_op_ctx *ctx, int32_t i, const void *reqs, char *msg,
                                   size_t cap)
{
    return allowed(ctx, KQ_ACL_OP_ALTER, KQ_ACL_RESOURCE_TOPIC,
                   ((const kq_create_partitions *)reqs)[i].topic, msg, cap);
}

static int alter_configs_check(const kq_op_ctx *ctx, int32_t i, const void *reqs, char *msg,
                               size_t cap)
{
    const kq_alter_config_resource *r = &((const kq_alter_config_resource *)reqs)[i];
    return config_allowed(ctx, false, KQ_ACL_OP_ALTER_CONFIGS, r->resource_type, r->resource_name,
                          msg, cap);
}

static void delete_one(const kq_op_ctx *ctx, int32_t i, kq_reclist *out, kq_simple_result *res,
                       const void *reqs)
{
    const kq_delete_topic *r = &((const kq_delete_topic *)reqs)[i];
    kq_rc_delete_topic(ctx->meta->img, r->name, r->topic_id, out, res);
}

static void create_partitions_one(const kq_op_ctx *ctx, int32_t i, kq_reclist *out,
                                  kq_simple_result *res, const void *reqs)
{
    const kq_create_partitions *r = &((const kq_create_partitions *)reqs)[i];
    if (r->count > KQ_OP_MAX_RECORDS) {
        const kq_topic *t = kq_image_topic_by_name(ctx->meta->img, r->topic);
        if (t == NULL || r->count - (int32_t)t->n_partitions > KQ_OP_MAX_RECORDS) {
            res->error = KQ_ERR_POLICY_VIOLATION;
            snprintf(res->message, sizeof(res->message),
                     "one request may add at most %d partitions", KQ_OP_MAX_RECORDS);
            return;
        }
    }
    kq_rc_create_partitions(&ctx->meta->settings, ctx->meta->img, r, 1, &ctx->meta->rng, out, res);
}

static void alter_configs_one(const kq_op_ctx *ctx, int32_t i, kq_reclist *out,
                              kq_simple_result *res, const void *reqs)
{
    const kq_alter_config_resource *r = &((const kq_alter_config_resource *)reqs)[i];
    kq_rc_alter_configs(ctx->meta->img, r->resource_type, r->resource_name, r->ops, r->n_ops, out,
                        res);
}

static void create_acl_one(const kq_op_ctx *ctx, int32_t i, kq_reclist *out, kq_simple_result *res,
                           const void *reqs)
{
    if (kq_acl_create(ctx->meta->img, &((const kq_acl *)reqs)[i], &ctx->meta->rng, out, res)) {
        res->error = KQ_ERR_NOMEM;
        snprintf(res->message, sizeof res->message, "out of memory");
    }
}

static int op_delete_acls(const kq_op_ctx *ctx, const kq_delete_acls *req, kq_buf *resp,
                          char *errbuf, size_t errlen)
{
    kq_reclist out;
    kq_reclist_init(&out);
    int rc = kq_acl_delete(ctx->meta->img, req->filters, req->n, &out, resp);
    if (rc == 0)
        rc = add_records(ctx, &out, errbuf, errlen);
    else
        kq_reclist_free(&out);
    if (rc != 0)
        kq_buf_free(resp);
    return rc;
}

static int op_elect_leaders(const kq_op_ctx *ctx, const kq_elect_leaders *req, kq_buf *resp,
                            char *errbuf, size_t errlen)
{
    kq_reclist out;
    kq_elect_result *results = NULL;
    int32_t n_results = 0;
    kq_reclist_init(&out);
    int err =
        kq_rc_elect_leaders(&ctx->meta->settings, ctx->meta->img, req->election_type,
                            req->all_partitions ? NULL : req->targets,
                            req->all_partitions ? 0 : req->n_targets, &out, &results, &n_results);
    if (err != 0) {
        kq_reclist_free(&out);
        free(results);
        snprintf(errbuf, errlen, "%s", kq_err_message(err));
        return err;
    }
    int rc = add_records(ctx, &out, errbuf, errlen);
    if (rc == 0)
        rc = kq_ctl_encode_elect_leaders_response(ctx->meta->img, req, results, n_results, resp);
    free(results);
    return rc;
}

static int op_update_features(const kq_op_ctx *ctx, const kq_feature_update *reqs, int32_t n,
                              bool validate_only, kq_buf *resp, char *errbuf, size_t errlen)
{
    int rc = 0;
    kq_simple_result *res = calloc(n > 0 ? (size_t)n : 1, sizeof(*res));
    if (res == NULL)
        return KQ_ERR_NOMEM;
    for (int32_t i = 0; i < n && rc == 0; i++) {
        const kq_ctl_feature_range *f = NULL;
        for (int32_t j = 0; j < N_SUPPORTED_FEATURES; j++)
            if (strcmp(SUPPORTED_FEATURES[j].name, reqs[i].name) == 0)
                f = &SUPPORTED_FEATURES[j];
        int16_t cur = kq_image_feature(ctx->meta->img, reqs[i].name);
        if (f != NULL && strcmp(f->name, "kraft.version") == 0) {
            /* the Raft layer's: the proposal built so far goes first, then the core decides */
            if (ctx->upgrade_kraft == NULL || reqs[i].max_version_level > 1 ||
                reqs[i].upgrade_type != KQ_FEATURE_UPGRADE) {
                res[i].error = KQ_ERR_INVALID_UPDATE_VERSION;
                snprintf(res[i].message, sizeof(res[i].message),
                         "kraft.version can only be upgraded, to 1 (no downgrade, as Kafka)");
                continue;
            }
            if (*ctx->batch_count > 0 && ctx->flush != NULL) {
                ctx->flush(ctx->flush_arg);
                view_drop(ctx);
                if (!ctx->meta->active) {
                    rc = KQ_ERR_NOT_CONTROLLER;
                    snprintf(errbuf, errlen, "leadership lost");
                    break;
                }
            }
            res[i].error =
                ctx->upgrade_kraft(ctx->upgrade_arg, reqs[i].max_version_level, validate_only,
                                   res[i].message, sizeof(res[i].message));
            continue;
        }
        if (f == NULL) {
            res[i].error = KQ_ERR_INVALID_REQUEST;
            snprintf(res[i].message, sizeof(res[i].message), "unknown feature %s", reqs[i].name);
        } else if (reqs[i].max_version_level < f->min_version ||
                   reqs[i].max_version_level > f->max_version) {
            res[i].error = KQ_ERR_INVALID_REQUEST;
            snprintf(res[i].message, sizeof(res[i].message),
                     "%s level %d is outside the supported range %d..%d", reqs[i].name,
                     reqs[i].max_version_level, f->min_version, f->max_version);
        } else if (reqs[i].max_version_level < cur && reqs[i].upgrade_type == KQ_FEATURE_UPGRADE) {
            res[i].error = KQ_ERR_INVALID_REQUEST;
            snprintf(res[i].message, sizeof(res[i].message),
                     "%s is at level %d; lowering it needs a downgrade", reqs[i].name, cur);
        } else if (!validate_only && reqs[i].max_version_level != cur) {
            kq_record r;
            memset(&r, 0, sizeof(r));
            r.type = KQ_REC_FEATURE_LEVEL;
            r.feature_level.name = (char *)reqs[i].name;
            r.feature_level.level = reqs[i].max_version_level;
            rc = add_record(ctx, &r, errbuf, errlen);
        }
    }
    if (rc == 0)
        rc = kq_ctl_encode_update_features_response(reqs, res, n, resp);
    free(res);
    return rc;
}

int kq_op_run(const kq_op_ctx *ctx, const kq_ctl_request *req, kq_buf *resp, int64_t *wait_offset,
              char *errbuf, size_t errlen)
{
    int rc;
    const kq_image *img = ctx->meta->img;
    kq_simple_result *items = NULL; /* run_items results of a per-item operation */
    memset(resp, 0, sizeof(*resp));
    switch (req->api_key) {
    case KQ_API_BROKER_REGISTRATION:
        rc = op_register(ctx, &req->broker_registration, resp, errbuf, errlen);
        break;
    case KQ_API_BROKER_HEARTBEAT:
        rc = op_heartbeat(ctx, &req->broker_heartbeat, resp, errbuf, errlen);
        break;
    case KQ_API_UNREGISTER_BROKER:
        rc = op_unregister(ctx, req->unregister_broker.broker_id, resp, errbuf, errlen);
        break;
    case KQ_API_ALTER_PARTITION:
        rc = op_alter_partition(ctx, &req->alter_partition, resp, errbuf, errlen);
        break;
    case KQ_API_CREATE_TOPICS:
        rc = op_create_topics(ctx, req->create_topics.topics, req->create_topics.n, resp, errbuf,
                              errlen);
        break;
    case KQ_API_DELETE_TOPICS:
        rc = run_items(ctx, req->delete_topics.topics, req->delete_topics.n, delete_check,
                       delete_one, &items, errbuf, errlen);
        if (rc == 0)
            rc = kq_ctl_encode_delete_topics_response(req->delete_topics.topics, items,
                                                      req->delete_topics.n, resp);
        break;
    case KQ_API_CREATE_PARTITIONS:
        rc = run_items(ctx, req->create_partitions.topics, req->create_partitions.n,
                       create_partitions_check, create_partitions_one, &items, errbuf, errlen);
        if (rc == 0)
            rc = kq_ctl_encode_create_partitions_response(req->create_partitions.topics, items,
                                                          req->create_partitions.n, resp);
        break;
    case KQ_API_ELECT_LEADERS:
        rc = op_elect_leaders(ctx, &req->elect_leaders, resp, errbuf, errlen);
        break;
    case KQ_API_INCREMENTAL_ALTER_CONFIGS:
        rc = run_items(ctx, req->alter_configs.resources, req->alter_configs.n, alter_configs_check,
                       alter_configs_one, &items, errbuf, errlen);
        if (rc == 0)
            rc = kq_ctl_encode_alter_configs_response(req->alter_configs.resources, items,
                                                      req->alter_configs.n, resp);
        break;
    case KQ_API_UPDATE_FEATURES:
        rc = op_update_features(ctx, req->update_features.updates, req->update_features.n,
                                req->update_features.validate_only, resp, errbuf, errlen);
        break;
    case KQ_API_DESCRIBE_CLUSTER:
        rc = kq_ctl_encode_describe_cluster(img, ctx->meta->cluster_id, ctx->controller_id, resp);
        break;
    case KQ_API_DESCRIBE_TOPICS:
        rc = kq_ctl_encode_describe_topics(
            img, req->describe_topics.names, req->describe_topics.n,
            ctx->meta->settings.min_insync_replicas,
            &(kq_item_authz){describe_check, &(describe_authz){ctx, KQ_ACL_OP_DESCRIBE}}, resp);
        break;
    case KQ_API_DESCRIBE_CONFIGS: {
        char mis[16], ule[8];
        snprintf(mis, sizeof(mis), "%d", ctx->meta->settings.min_insync_replicas);
        snprintf(ule, sizeof(ule), "%s",
                 ctx->meta->settings.unclean_leader_election ? "true" : "false");
        kq_config_kv statics[] = {{"min.insync.replicas", mis},
                                  {"unclean.leader.election.enable", ule}};
        rc = kq_ctl_encode_describe_configs(
            img, req->describe_configs.resources, req->describe_configs.n, statics, 2,
            &(kq_item_authz){describe_check, &(describe_authz){ctx, KQ_ACL_OP_DESCRIBE_CONFIGS}},
            resp);
        break;
    }
    case KQ_API_DESCRIBE_FEATURES: {
        kq_ctl_feature_range sup[N_SUPPORTED_FEATURES];
        memcpy(sup, SUPPORTED_FEATURES, sizeof sup);
        for (int32_t i = 0; i < N_SUPPORTED_FEATURES; i++)
            if (strcmp(sup[i].name, "kraft.version") == 0) {
                sup[i].finalized = ctx->kraft_version;
                if (ctx->upgrade_kraft == NULL)
                    sup[i].max_version = 0;
            }
        rc = kq_ctl_encode_describe_features(img, sup, N_SUPPORTED_FEATURES, resp);
    } break;
    case KQ_API_CREATE_ACLS:
        if (req->create_acls.n > KQ_ACL_MAX_CREATIONS) {
            snprintf(errbuf, errlen,
                     "the request creates %d ACL bindings; one may create at most %d",
                     (int)req->create_acls.n, KQ_ACL_MAX_CREATIONS);
            return KQ_ERR_POLICY_VIOLATION;
        }
        rc = run_items(ctx, req->create_acls.acls, req->create_acls.n, NULL, create_acl_one, &items,
                       errbuf, errlen);
        if (rc == 0)
            rc = kq_ctl_encode_create_acls_response(items, req->create_acls.n, resp);
        break;
    case KQ_API_DESCRIBE_ACLS:
        rc = kq_acl_describe(img, &req->describe_acls.filter, resp, errbuf, errlen);
        break;
    case KQ_API_DELETE_ACLS:
        rc = op_delete_acls(ctx, &req->delete_acls, resp, errbuf, errlen);
        break;
    default:
        snprintf(errbuf, errlen, "api %u is not a controller api", req->api_key);
        return KQ_ERR_INVALID_REQUEST;
    }
    free(items);
    view_drop(ctx); /* the image moves on after the operation */
    if (rc != 0 && rc != KQ_ERR_FATAL && errbuf[0] == '\0')
        snprintf(errbuf, errlen, "%s", kq_err_message(rc));
    /* Everything the answer reflects has been applied below applied_end. */
    *wait_offset = ctx->meta->applied_end - 1;
    return rc;
}

int kq_op_bootstrap_features(const kq_op_ctx *ctx, bool *wrote, char *errbuf, size_t errlen)
{
    const kq_image *img = ctx->meta->img;
    *wrote = false;
    if (kq_image_feature(img, "metadata.version") >= 1)
        return 0;
    /* The levels this cluster runs at: the highest metadata.version, ELR as configured. */
    bool elr = kq_decide_elr_bootstrap(&ctx->meta->settings, img);
    for (int32_t i = 0; i < N_SUPPORTED_FEATURES; i++) {
        const kq_ctl_feature_range *f = &SUPPORTED_FEATURES[i];
        int16_t level = f->max_version;
        if (strcmp(f->name, "kraft.version") == 0)
            continue; /* the Raft layer's (KRaftVersionRecord), never a FeatureLevelRecord */
        if (strcmp(f->name, "eligible.leader.replicas.version") == 0)
            level = elr ? 1 : 0;
        if (level <= kq_image_feature(img, f->name))
            continue;
        kq_record r;
        memset(&r, 0, sizeof(r));
        r.type = KQ_REC_FEATURE_LEVEL;
        r.feature_level.name = (char *)f->name;
        r.feature_level.level = level;
        int rc = add_record(ctx, &r, errbuf, errlen);
        if (rc != 0)
            return rc == KQ_ERR_NOT_CONTROLLER ? rc : KQ_ERR_FATAL;
        *wrote = true;
    }
    return 0;
}

int kq_op_fence_stale(const kq_op_ctx *ctx, int64_t *next_ms, int32_t *fenced_id, char *errbuf,
                      size_t errlen)
{
    kq_reclist out;
    kq_reclist_init(&out);
    *fenced_id = -1;
    kq_cc_fence_stale(ctx->meta->cc, ctx->meta->img, ctx->now_ms, &out, fenced_id, next_ms);
    return timer_records(ctx, &out, errbuf, errlen);
}

int kq_op_elect_leaderless(const kq_op_ctx *ctx, bool *more, char *errbuf, size_t errlen)
{
    kq_reclist out;
    kq_reclist_init(&out);
    *more = false;
    kq_rc_elect_leaderless(&ctx->meta->settings, ctx->meta->img, 1000, &out, more);
    return timer_records(ctx, &out, errbuf, errlen);
}

int kq_op_rebalance(const kq_op_ctx *ctx, bool *more, char *errbuf, size_t errlen)
{
    kq_reclist out;
    kq_reclist_init(&out);
    *more = false;
    if (!kq_decide_auto_rebalance(&ctx->meta->settings, ctx->meta->img))
        return 0;
    kq_rc_preferred_rebalance(&ctx->meta->settings, ctx->meta->img, 1000, &out, more);
    return timer_records(ctx, &out, errbuf, errlen);
}
