/*
 * The controller's answers, built from the metadata image and from its decisions' results:
 * see answers.h.
 */
#include "answers.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kq/arena.h"
#include "kq/ctl_codec.h"
#include "kq/error.h"
#include "kq/util.h"

/* The encoders' contract: *out is empty unless they succeed. */
static bool reset(kq_buf *out)
{
    if (!out)
        return false;
    out->data = NULL;
    out->len = 0;
    return true;
}

/* Encodes body as api_key's answer and frees the arena it was built in. */
static int answer(uint32_t api_key, const void *body, kq_arena *a, kq_buf *out)
{
    int rc = kq_ctl_encode_answer(api_key, body, out);

    kq_arena_free(a);
    return rc;
}

typedef struct named_topic {
    const char *name;
    const kq_topic *t;
} named_topic;

static int cmp_named(const void *x, const void *y)
{
    return strcmp(((const named_topic *)x)->name, ((const named_topic *)y)->name);
}

/* Configs of one resource, collected from the image (strings borrowed from it or the caller):
 * the first source to name a key wins, keys outside the request's list are skipped. */
typedef struct entry_list {
    kq_arena *a;
    kq_ctl_config_entry *v;
    size_t n, cap;
    const kq_describe_config_resource *req; /* key filter, or NULL */
    int source;                             /* for entries added by the callback */
    bool nomem;
} entry_list;

static bool wanted(const kq_describe_config_resource *r, const char *name)
{
    if (!r || r->n_keys <= 0)
        return true;
    for (int32_t i = 0; i < r->n_keys; i++)
        if (r->keys[i] && strcmp(r->keys[i], name) == 0)
            return true;
    return false;
}

static int add_entry(entry_list *l, const char *name, const char *value, int source)
{
    kq_ctl_config_entry *e;

    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0)
            return 0; /* a more specific source already set it */
    if (!wanted(l->req, name))
        return 0;
    if (!(e = kq_arena_push(l->a, (void **)&l->v, &l->n, &l->cap, sizeof *e))) {
        l->nomem = true;
        return KQ_ERR_NOMEM;
    }
    *e = (kq_ctl_config_entry){(char *)name, (char *)value, source};
    return 0;
}

static int entry_cb(void *arg, int type, const char *resource, const char *name, const char *value)
{
    entry_list *l = arg;

    (void)type;
    (void)resource;
    return add_entry(l, name, value, l->source);
}

static int cmp_entry(const void *x, const void *y)
{
    return strcmp(((const kq_ctl_config_entry *)x)->name, ((const kq_ctl_config_entry *)y)->name);
}

/* A known topic as DescribeTopics shows it: partitions, dynamic configs, effective min ISR. */
static int fill_topic(kq_arena *a, const kq_image *img, const kq_topic *t, int32_t default_min_isr,
                      kq_ctl_topic_desc *d)
{
    kq_ctl_partition_desc *ps = kq_arena_alloc(a, (size_t)t->n_partitions, sizeof *ps);
    entry_list cl = {.a = a, .source = KQ_CONFIG_SOURCE_DYNAMIC_TOPIC};

    if (!ps)
        return KQ_ERR_NOMEM;
    d->has_id = true;
    memcpy(d->topic_id, t->id, 16);
    for (int32_t i = 0; i < t->n_partitions; i++) {
        const kq_partition *p = &t->partitions[i];

        ps[i] = (kq_ctl_partition_desc){
            .partition = i,
            .leader = p->leader,
            .leader_epoch = p->leader_epoch,
            .partition_epoch = p->partition_epoch,
            .replicas = {(int32_t *)kq_partition_replicas(p), p->n_replicas},
            .isr = {(int32_t *)kq_partition_isr(p), p->n_isr},
            .elr = {(int32_t *)kq_partition_elr(p), p->n_elr},
            .last_known_elr = {(int32_t *)kq_partition_last_known_elr(p), p->n_last_known_elr},
            .leader_recovery_state = (int8_t)p->leader_recovery_state,
        };
    }
    d->partitions = ps;
    d->n_partitions = t->n_partitions;
    kq_image_foreach_config(img, KQ_CONFIG_RESOURCE_TOPIC, t->name, entry_cb, &cl);
    if (cl.nomem)
        return KQ_ERR_NOMEM;
    d->configs = cl.v;
    d->n_configs = (int32_t)cl.n;
    d->min_insync_replicas = kq_image_min_isr(img, t->name, default_min_isr);
    return 0;
}

/* authz's answer for one resource: 0, or its error, with the message copied into the arena
 * when msg is not NULL (*msg NULL when out of memory). */
static int item_refused(kq_arena *a, const kq_item_authz *authz, int8_t type, const char *name,
                        bool filtering, char **msg)
{
    char buf[KQ_CTL_MAX_MESSAGE + 1];
    int rc;

    if (!authz || !authz->check ||
        !(rc = authz->check(authz->arg, type, name, filtering, buf, sizeof buf)))
        return 0;
    if (msg && (*msg = kq_arena_alloc(a, strlen(buf) + 1, 1)))
        memcpy(*msg, buf, strlen(buf) + 1);
    return rc;
}

int kq_ctl_encode_describe_topics(const kq_image *img, const char *const *names, int32_t n,
                                  int32_t default_min_isr, const kq_item_authz *authz, kq_buf *out)
{
    kq_ctl_topics_desc body = {0};
    kq_ctl_topic_desc *ts;
    named_topic *list;
    const kq_topic *t;
    kq_arena a = {0};
    size_t cnt = 0;

    if (!reset(out) || !img || n < 0 || (n > 0 && !names))
        return KQ_ERR_INVALID_REQUEST;
    if (n > 0) {
        cnt = (size_t)n;
    } else {
        for (t = kq_image_topic_next(img, NULL); t; t = kq_image_topic_next(img, t))
            cnt++;
    }
    list = kq_arena_alloc(&a, cnt, sizeof *list);
    ts = kq_arena_alloc(&a, cnt, sizeof *ts);
    if (!list || !ts)
        goto nomem;
    if (n > 0) {
        for (int32_t i = 0; i < n; i++) {
            if (!names[i]) {
                kq_arena_free(&a);
                return KQ_ERR_INVALID_REQUEST;
            }
            list[i] = (named_topic){names[i], kq_image_topic_by_name(img, names[i])};
        }
    } else {
        size_t i = 0;

        for (t = kq_image_topic_next(img, NULL); t && i < cnt; t = kq_image_topic_next(img, t))
            if (!item_refused(&a, authz, KQ_CONFIG_RESOURCE_TOPIC, t->name, true, NULL))
                list[i++] = (named_topic){t->name, t}; /* every topic: the allowed ones */
        cnt = i;
    }
    qsort(list, cnt, sizeof *list, cmp_named);
    for (size_t i = 0; i < cnt; i++) {
        kq_ctl_topic_desc *d = &ts[body.n_topics];

        if (body.n_topics > 0 && strcmp(ts[body.n_topics - 1].name, list[i].name) == 0)
            continue; /* duplicate name */
        d->name = (char *)list[i].name;
        d->min_insync_replicas = -1;
        if (n > 0 &&
            (d->error = item_refused(&a, authz, KQ_CONFIG_RESOURCE_TOPIC, d->name, false, NULL)))
            ; /* a name it may not describe: refused, whether it exists or not */
        else if (!list[i].t)
            d->error = KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        else if (fill_topic(&a, img, list[i].t, default_min_isr, d))
            goto nomem;
        body.n_topics++;
    }
    body.topics = ts;
    return answer(KQ_API_DESCRIBE_TOPICS, &body, &a, out);
nomem:
    kq_arena_free(&a);
    return KQ_ERR_NOMEM;
}

static bool broker_name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 10)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return strtol(s, NULL, 10) <= INT32_MAX;
}

/* One resource of DescribeConfigs: its own configs, then the cluster defaults of the image,
 * then the static defaults, sorted by name; or the reason it has none. */
static int describe_resource(kq_arena *a, const kq_image *img, const kq_describe_config_resource *r,
                             const kq_config_kv *statics, int32_t n_static, kq_ctl_config_result *d)
{
    entry_list el = {.a = a, .req = r};

    d->resource_type = r->resource_type;
    d->resource_name = (char *)(r->resource_name ? r->resource_name : "");
    if (r->resource_type == KQ_CONFIG_RESOURCE_TOPIC) {
        if (!kq_image_topic_by_name(img, d->resource_name)) {
            d->error = KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
            d->message = "topic does not exist";
            return 0;
        }
        el.source = KQ_CONFIG_SOURCE_DYNAMIC_TOPIC;
        kq_image_foreach_config(img, KQ_CONFIG_RESOURCE_TOPIC, d->resource_name, entry_cb, &el);
    } else if (r->resource_type == KQ_CONFIG_RESOURCE_BROKER) {
        if (d->resource_name[0] && !broker_name_ok(d->resource_name)) {
            d->error = KQ_ERR_INVALID_REQUEST;
            d->message = "broker resource name must be a broker id or empty";
            return 0;
        }
        el.source = KQ_CONFIG_SOURCE_DYNAMIC_BROKER;
        if (d->resource_name[0])
            kq_image_foreach_config(img, KQ_CONFIG_RESOURCE_BROKER, d->resource_name, entry_cb,
                                    &el);
    } else {
        d->error = KQ_ERR_INVALID_REQUEST;
        d->message = "resource type must be 2 (topic) or 4 (broker)";
        return 0;
    }
    el.source = KQ_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER;
    kq_image_foreach_config(img, KQ_CONFIG_RESOURCE_BROKER, "", entry_cb, &el);
    for (int32_t k = 0; k < n_static && !el.nomem; k++)
        if (statics[k].name)
            add_entry(&el, statics[k].name, statics[k].value, KQ_CONFIG_SOURCE_DEFAULT);
    if (el.nomem)
        return KQ_ERR_NOMEM;
    if (el.n)
        qsort(el.v, el.n, sizeof *el.v, cmp_entry);
    d->entries = el.v;
    d->n_entries = (int32_t)el.n;
    return 0;
}

int kq_ctl_encode_describe_configs(const kq_image *img, const kq_describe_config_resource *reqs,
                                   int32_t n, const kq_config_kv *static_defaults, int32_t n_static,
                                   const kq_item_authz *authz, kq_buf *out)
{
    kq_ctl_configs_desc body = {NULL, n};
    kq_arena a = {0};

    if (!reset(out) || !img || n < 0 || (n > 0 && !reqs) || n_static < 0 ||
        (n_static > 0 && !static_defaults))
        return KQ_ERR_INVALID_REQUEST;
    if (!(body.results = kq_arena_alloc(&a, (size_t)n, sizeof *body.results)))
        goto nomem;
    for (int32_t i = 0; i < n; i++) {
        kq_ctl_config_result *d = &body.results[i];

        if ((d->error = item_refused(&a, authz, reqs[i].resource_type, reqs[i].resource_name, false,
                                     &d->message))) {
            d->resource_type = reqs[i].resource_type;
            d->resource_name = (char *)(reqs[i].resource_name ? reqs[i].resource_name : "");
            if (!d->message)
                goto nomem;
        } else if (describe_resource(&a, img, &reqs[i], static_defaults, n_static, d)) {
            goto nomem;
        }
    }
    return answer(KQ_API_DESCRIBE_CONFIGS, &body, &a, out);
nomem:
    kq_arena_free(&a);
    return KQ_ERR_NOMEM;
}

/* Features: the supported ranges, then the image's finalized levels (a feature only the image
 * knows gets 0..0). */
typedef struct feat_list {
    kq_arena *a;
    kq_ctl_feature_desc *v;
    size_t n, cap;
    bool nomem;
} feat_list;

static kq_ctl_feature_desc *feat_get(feat_list *l, const char *name)
{
    kq_ctl_feature_desc *f;

    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0)
            return &l->v[i];
    if (!(f = kq_arena_push(l->a, (void **)&l->v, &l->n, &l->cap, sizeof *f)))
        l->nomem = true;
    else
        f->name = (char *)name;
    return f;
}

static int feat_cb(void *arg, const char *name, int16_t level)
{
    kq_ctl_feature_desc *f = feat_get(arg, name);

    if (!f)
        return KQ_ERR_NOMEM;
    f->finalized_level = level;
    return 0;
}

static int cmp_feat(const void *x, const void *y)
{
    return strcmp(((const kq_ctl_feature_desc *)x)->name, ((const kq_ctl_feature_desc *)y)->name);
}

int kq_ctl_encode_describe_features(const kq_image *img, const kq_ctl_feature_range *supported,
                                    int32_t n, kq_buf *out)
{
    kq_arena a = {0};
    feat_list fl = {.a = &a};
    kq_ctl_features_desc body;

    if (!reset(out) || !img || n < 0 || (n > 0 && !supported))
        return KQ_ERR_INVALID_REQUEST;
    for (int32_t i = 0; i < n; i++) {
        kq_ctl_feature_desc *f;

        if (!supported[i].name || !supported[i].name[0]) {
            kq_arena_free(&a);
            return KQ_ERR_INVALID_REQUEST;
        }
        if (!(f = feat_get(&fl, supported[i].name)))
            goto nomem;
        f->min_version = supported[i].min_version;
        f->max_version = supported[i].max_version;
        if (supported[i].finalized > 0)
            f->finalized_level = supported[i].finalized;
    }
    kq_image_foreach_feature(img, feat_cb, &fl);
    if (fl.nomem)
        goto nomem;
    if (fl.n)
        qsort(fl.v, fl.n, sizeof *fl.v, cmp_feat);
    body = (kq_ctl_features_desc){kq_image_committed_offset(img), fl.v, (int32_t)fl.n};
    return answer(KQ_API_DESCRIBE_FEATURES, &body, &a, out);
nomem:
    kq_arena_free(&a);
    return KQ_ERR_NOMEM;
}

/* ---- per-item answers from the decisions' results ---------------------------------------- */

/* n item views in the arena, one per result (of `stride` bytes, with an int error and a
 * message of msg_size bytes, NUL-terminated, at the offsets; an empty message is sent as
 * none). NULL with *rc set when a message is not terminated (INVALID_REQUEST) or out of
 * memory; the arena is then freed. */
static kq_ctl_item_result *item_views(kq_arena *a, int32_t n, const char *res, size_t stride,
                                      size_t error_off, size_t msg_off, size_t msg_size, int *rc)
{
    kq_ctl_item_result *v = kq_arena_alloc(a, (size_t)n, sizeof *v);

    *rc = v ? 0 : KQ_ERR_NOMEM;
    for (int32_t i = 0; v && i < n; i++) {
        const char *r = res + (size_t)i * stride;

        if (!memchr(r + msg_off, 0, msg_size)) {
            *rc = KQ_ERR_INVALID_REQUEST;
            v = NULL;
            break;
        }
        memcpy(&v[i].error, r + error_off, sizeof v[i].error);
        v[i].message = r[msg_off] ? (char *)r + msg_off : NULL;
    }
    if (!v)
        kq_arena_free(a);
    return v;
}
/* Result type T has an int error and a char message[] (at most KQ_CTL_MAX_MESSAGE bytes). */
#define ITEM_VIEWS(a, n, res, T, rc)                                                               \
    item_views(a, n, (const char *)(res), sizeof(T), offsetof(T, error), offsetof(T, message),     \
               sizeof(((T *)0)->message), rc)
_Static_assert(sizeof(((kq_simple_result *)0)->message) <= KQ_CTL_MAX_MESSAGE + 1 &&
                   sizeof(((kq_create_topic_result *)0)->message) <= KQ_CTL_MAX_MESSAGE + 1,
               "a result's message fits an answer's");

/* The inputs of an item answer: n >= 0 requests and results, present when n > 0. */
#define ITEMS_OK(reqs, res, n) ((n) >= 0 && ((n) == 0 || ((reqs) && (res))))

/* Views of the n results res (of type RT, see ITEM_VIEWS), each named by the string at
 * name_off in reqs[i] (of `stride` bytes); NULL with *rc set for bad arguments
 * (INVALID_REQUEST) or no memory. */
#define NAMED_VIEWS(a, reqs, T, name, res, RT, n, out, rc)                                         \
    (!reset(out) || !ITEMS_OK(reqs, res, n)                                                        \
         ? (*(rc) = KQ_ERR_INVALID_REQUEST, (kq_ctl_item_result *)NULL)                            \
         : name_views(ITEM_VIEWS(a, n, res, RT, rc), reqs, sizeof(T), offsetof(T, name), n))
static kq_ctl_item_result *name_views(kq_ctl_item_result *v, const void *reqs, size_t stride,
                                      size_t name_off, int32_t n)
{
    for (int32_t i = 0; v && i < n; i++)
        v[i].name = *(char *const *)((const char *)reqs + (size_t)i * stride + name_off);
    return v;
}
#define SIMPLE_VIEWS(a, reqs, T, name, res, n, out, rc)                                            \
    NAMED_VIEWS(a, reqs, T, name, res, kq_simple_result, n, out, rc)

int kq_ctl_encode_create_topics_response(const kq_create_topic *reqs,
                                         const kq_create_topic_result *res, int32_t n, kq_buf *out)
{
    kq_arena a = {0};
    int rc;
    kq_ctl_item_result *v =
        NAMED_VIEWS(&a, reqs, kq_create_topic, name, res, kq_create_topic_result, n, out, &rc);

    for (int32_t i = 0; v && i < n; i++) {
        v[i].has_id = !res[i].error || (res[i].error == KQ_ERR_TOPIC_ALREADY_EXISTS &&
                                        !kq_uuid_is_zero(res[i].topic_id));
        memcpy(v[i].topic_id, res[i].topic_id, 16);
        v[i].num_partitions = res[i].error ? -1 : res[i].num_partitions;
        v[i].replication_factor = res[i].error ? -1 : res[i].replication_factor;
    }
    return v ? answer(KQ_API_CREATE_TOPICS, &(kq_ctl_item_results){v, n}, &a, out) : rc;
}

int kq_ctl_encode_delete_topics_response(const kq_delete_topic *reqs, const kq_simple_result *res,
                                         int32_t n, kq_buf *out)
{
    kq_arena a = {0};
    int rc;
    kq_ctl_item_result *v = SIMPLE_VIEWS(&a, reqs, kq_delete_topic, name, res, n, out, &rc);

    for (int32_t i = 0; v && i < n; i++) { /* named by name, or else by id */
        v[i].has_id = !reqs[i].name;
        memcpy(v[i].topic_id, reqs[i].topic_id, 16);
    }
    return v ? answer(KQ_API_DELETE_TOPICS, &(kq_ctl_item_results){v, n}, &a, out) : rc;
}

int kq_ctl_encode_create_acls_response(const kq_simple_result *res, int32_t n, kq_buf *out)
{
    kq_arena a = {0};
    int rc = KQ_ERR_INVALID_REQUEST;
    kq_ctl_item_result *v =
        reset(out) && ITEMS_OK(res, res, n) ? ITEM_VIEWS(&a, n, res, kq_simple_result, &rc) : NULL;

    return v ? answer(KQ_API_CREATE_ACLS, &(kq_ctl_item_results){v, n}, &a, out) : rc;
}

int kq_ctl_encode_create_partitions_response(const kq_create_partitions *reqs,
                                             const kq_simple_result *res, int32_t n, kq_buf *out)
{
    kq_arena a = {0};
    int rc;
    kq_ctl_item_result *v = SIMPLE_VIEWS(&a, reqs, kq_create_partitions, topic, res, n, out, &rc);

    return v ? answer(KQ_API_CREATE_PARTITIONS, &(kq_ctl_item_results){v, n}, &a, out) : rc;
}

int kq_ctl_encode_elect_leaders_response(const kq_image *img, const kq_elect_leaders *req,
                                         const kq_elect_result *res, int32_t n_res, kq_buf *out)
{
    kq_arena a = {0};
    kq_elect_wire_topic_result *ts;
    kq_ctl_item_result *ps;
    kq_elect_wire_results body = {NULL, 0};

    if (!reset(out) || !req || n_res < 0 || (n_res > 0 && !res))
        return KQ_ERR_INVALID_REQUEST;
    ts = kq_arena_alloc(&a, (size_t)n_res, sizeof *ts);
    ps = kq_arena_alloc(&a, (size_t)n_res, sizeof *ps);
    if (!ts || !ps) {
        kq_arena_free(&a);
        return KQ_ERR_NOMEM;
    }
    /* One topic entry per run of results for the same topic; their partitions share ps. */
    for (int32_t i = 0; i < n_res; i++) {
        const kq_elect_result *r = &res[i];
        const char *name = NULL;

        if (r->index >= 0) {
            if (r->index >= req->n_targets || !req->targets) {
                kq_arena_free(&a);
                return KQ_ERR_INVALID_REQUEST;
            }
            name = req->targets[r->index].topic;
        } else if (img) {
            const kq_topic *t = kq_image_topic_by_id(img, r->topic_id);

            name = t ? t->name : NULL;
        }
        if (!name)
            name = "";
        if (!body.n || strcmp(ts[body.n - 1].topic, name)) {
            ts[body.n] = (kq_elect_wire_topic_result){.topic = (char *)name,
                                                      .has_id = !kq_uuid_is_zero(r->topic_id),
                                                      .partitions = &ps[i]};
            memcpy(ts[body.n++].topic_id, r->topic_id, 16);
        }
        ps[i].partition = r->partition;
        ps[i].error = r->error;
        ts[body.n - 1].n++;
    }
    body.topics = ts;
    return answer(KQ_API_ELECT_LEADERS, &body, &a, out);
}

int kq_ctl_encode_alter_configs_response(const kq_alter_config_resource *reqs,
                                         const kq_simple_result *res, int32_t n, kq_buf *out)
{
    kq_arena a = {0};
    int rc;
    kq_ctl_item_result *v =
        SIMPLE_VIEWS(&a, reqs, kq_alter_config_resource, resource_name, res, n, out, &rc);

    for (int32_t i = 0; v && i < n; i++)
        v[i].resource_type = reqs[i].resource_type;
    return v ? answer(KQ_API_INCREMENTAL_ALTER_CONFIGS, &(kq_ctl_item_results){v, n}, &a, out) : rc;
}

int kq_ctl_encode_update_features_response(const kq_feature_update *reqs,
                                           const kq_simple_result *res, int32_t n, kq_buf *out)
{
    kq_arena a = {0};
    int rc;
    kq_ctl_item_result *v = SIMPLE_VIEWS(&a, reqs, kq_feature_update, name, res, n, out, &rc);

    return v ? answer(KQ_API_UPDATE_FEATURES, &(kq_ctl_item_results){v, n}, &a, out) : rc;
}

int kq_ctl_encode_describe_cluster(const kq_image *img, const char *cluster_id,
                                   int32_t controller_id, kq_buf *out)
{
    kq_ctl_cluster_desc v = {(char *)(cluster_id ? cluster_id : ""), controller_id, NULL, 0};
    const kq_broker *b;
    kq_arena a = {0};
    size_t n = 0;

    if (!reset(out) || !img ||
        (cluster_id && strnlen(cluster_id, KQ_CODEC_MAX_CLUSTER_ID + 1) > KQ_CODEC_MAX_CLUSTER_ID))
        return KQ_ERR_INVALID_REQUEST;
    for (b = kq_image_broker_next(img, NULL); b; b = kq_image_broker_next(img, b))
        n++;
    if (!(v.brokers = kq_arena_alloc(&a, n, sizeof *v.brokers))) {
        kq_arena_free(&a);
        return KQ_ERR_NOMEM;
    }
    for (b = kq_image_broker_next(img, NULL); b && (size_t)v.n_brokers < n;
         b = kq_image_broker_next(img, b))
        v.brokers[v.n_brokers++] = *b;
    return answer(KQ_API_DESCRIBE_CLUSTER, &v, &a, out);
}
