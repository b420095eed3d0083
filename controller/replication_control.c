/* Replication control (kraft-semantics.md 3.4-3.6). */
#include "replication_control.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_control.h"
#include "placement.h"

static int seterr(char *msg, size_t cap, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int seterr(char *msg, size_t cap, int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return code;
}

static int ids_copy(kq_rec_ids *dst, const int32_t *src, int32_t n)
{
    dst->n = n;
    dst->ids = NULL;
    if (n <= 0)
        return 0;
    if (!(dst->ids = malloc((size_t)n * sizeof *dst->ids)))
        return KQ_ERR_NOMEM;
    memcpy(dst->ids, src, (size_t)n * sizeof *dst->ids);
    return 0;
}

/* ---- configs ----------------------------------------------------------------------------- */

typedef enum ctype { C_BOOL, C_INT, C_LIST_POLICY } ctype;

/* Scopes, as bits: a topic, the cluster default (broker resource ""), one broker ("<id>"). */
enum { AT_TOPIC = 1, AT_CLUSTER = 2, AT_BROKER = 4 };

typedef struct ckey {
    const char *name;
    ctype type;
    int64_t min, max;
    unsigned where;    /* where Kafka has the key: AT_TOPIC, AT_CLUSTER | AT_BROKER */
    unsigned enforced; /* where kq does what it says; elsewhere it is refused (not supported yet) */
} ckey;

/* Every key Kafka has at these scopes that kq knows. A key is accepted only where something
 * enforces it (docs/configuration.md lists them): the partition leaders (min.insync.replicas,
 * broker-agent/replica_manager.c) and the controller's decisions
 * (controller/decide.c). The others are recognised, so the error says "not supported yet"
 * rather than "unknown". A DELETE of any known key is accepted, so a value stored by an
 * earlier version can be removed. */
static const ckey KEYS[] = {
    /* Not per broker: the describe filters and the ELR decisions could not agree with one
     * broker's own minimum (one rule everywhere). */
    {"min.insync.replicas", C_INT, 1, INT32_MAX, AT_TOPIC | AT_CLUSTER | AT_BROKER,
     AT_TOPIC | AT_CLUSTER},
    {"unclean.leader.election.enable", C_BOOL, 0, 0, AT_TOPIC | AT_CLUSTER | AT_BROKER,
     AT_TOPIC | AT_CLUSTER},
    {"cleanup.policy", C_LIST_POLICY, 0, 0, AT_TOPIC, 0},
    {"retention.ms", C_INT, -1, INT64_MAX, AT_TOPIC, 0},
    {"retention.bytes", C_INT, -1, INT64_MAX, AT_TOPIC, 0},
    {"segment.bytes", C_INT, 14, INT32_MAX, AT_TOPIC, 0},
    {"max.message.bytes", C_INT, 0, INT32_MAX, AT_TOPIC, 0},
    {"num.partitions", C_INT, 1, INT32_MAX, AT_CLUSTER | AT_BROKER, 0},
    {"default.replication.factor", C_INT, 1, INT16_MAX, AT_CLUSTER | AT_BROKER, 0},
    {"auto.leader.rebalance.enable", C_BOOL, 0, 0, AT_CLUSTER | AT_BROKER, AT_CLUSTER},
    /* ELR follows the eligible.leader.replicas.version feature (kq features), as in Kafka. */
    {"eligible.leader.replicas.enable", C_BOOL, 0, 0, AT_CLUSTER | AT_BROKER, 0},
    {"leader.imbalance.check.interval.seconds", C_INT, 1, INT32_MAX, AT_CLUSTER | AT_BROKER, 0},
    {"unclean.leader.election.interval.ms", C_INT, 1, INT64_MAX, AT_CLUSTER | AT_BROKER, 0},
    {"log.retention.ms", C_INT, -1, INT64_MAX, AT_CLUSTER | AT_BROKER, 0},
    {"log.retention.bytes", C_INT, -1, INT64_MAX, AT_CLUSTER | AT_BROKER, 0},
    {"log.segment.bytes", C_INT, 14, INT32_MAX, AT_CLUSTER | AT_BROKER, 0},
    {"message.max.bytes", C_INT, 0, INT32_MAX, AT_CLUSTER | AT_BROKER, 0},
};

static unsigned scope_of(int resource_type, const char *resource)
{
    if (resource_type == KQ_CONFIG_RESOURCE_TOPIC)
        return AT_TOPIC;
    return resource == NULL || *resource == '\0' ? AT_CLUSTER : AT_BROKER;
}

static const ckey *find_key(int resource_type, const char *name)
{
    /* Known at a scope: a topic, or a broker resource ("" or an id). */
    unsigned w = resource_type == KQ_CONFIG_RESOURCE_TOPIC ? AT_TOPIC : AT_CLUSTER;

    for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++)
        if (!strcmp(KEYS[i].name, name) && (KEYS[i].where & w))
            return &KEYS[i];
    return NULL;
}

static bool policy_ok(const char *v)
{
    char buf[64];
    char *save = NULL, *tok;
    int n = 0;

    if (!v || strlen(v) >= sizeof buf || !*v)
        return false;
    strcpy(buf, v);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "delete") && strcmp(tok, "compact"))
            return false;
        n++;
    }
    return n > 0;
}

int kq_rc_validate_config(int resource_type, const char *resource, const char *name,
                          const char *value, char *msg, size_t cap)
{
    static const char *const scope_name[] = {"", "topic", "cluster-default broker", "", "broker"};
    unsigned scope = scope_of(resource_type, resource);
    const ckey *k;
    int64_t x;
    bool b;

    if (!name || !*name)
        return seterr(msg, cap, KQ_ERR_INVALID_CONFIG, "config name is empty");
    if (!(k = find_key(resource_type, name)))
        return seterr(msg, cap, KQ_ERR_INVALID_CONFIG, "unknown %s config %s",
                      resource_type == KQ_CONFIG_RESOURCE_TOPIC ? "topic" : "broker", name);
    if (!value)
        return 0;
    if (!(k->enforced & scope))
        return seterr(msg, cap, KQ_ERR_INVALID_CONFIG,
                      "%s config %s is not supported yet: kq does not enforce it (the configs it "
                      "enforces are listed in docs/configuration.md)",
                      scope_name[scope], name);
    switch (k->type) {
    case C_BOOL:
        if (!kq_decide_parse_bool(value, &b))
            return seterr(msg, cap, KQ_ERR_INVALID_CONFIG,
                          "invalid value %s for %s: expected true or false", value, name);
        break;
    case C_INT:
        if (!kq_decide_parse_i64(value, &x) || x < k->min || x > k->max)
            return seterr(msg, cap, KQ_ERR_INVALID_CONFIG,
                          "invalid value %s for %s: expected an integer in [%lld, %lld]", value,
                          name, (long long)k->min, (long long)k->max);
        break;
    case C_LIST_POLICY:
        if (!policy_ok(value))
            return seterr(msg, cap, KQ_ERR_INVALID_CONFIG,
                          "invalid value %s for %s: expected delete, compact or both", value, name);
        break;
    }
    return 0;
}

static int push_config(kq_reclist *out, int8_t type, const char *res, const char *name,
                       const char *value)
{
    kq_record r = {.type = KQ_REC_CONFIG};

    r.config.resource_type = type;
    r.config.resource_name = strdup(res);
    r.config.name = strdup(name);
    r.config.value = value ? strdup(value) : NULL;
    if (!r.config.resource_name || !r.config.name || (value && !r.config.value)) {
        kq_record_free(&r);
        return KQ_ERR_NOMEM;
    }
    return kq_reclist_push(out, &r);
}

/* APPEND / SUBTRACT on a comma-separated list value. */
static int list_edit(const char *cur, const char *item, bool append, char *outv, size_t cap)
{
    char buf[256];
    char *save = NULL, *tok;
    bool present = false;

    outv[0] = '\0';
    if (cur && strlen(cur) < sizeof buf) {
        strcpy(buf, cur);
        for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (!strcmp(tok, item)) {
                present = true;
                if (!append)
                    continue;
            }
            if (outv[0])
                strncat(outv, ",", cap - strlen(outv) - 1);
            strncat(outv, tok, cap - strlen(outv) - 1);
        }
    }
    if (append && !present) {
        if (outv[0])
            strncat(outv, ",", cap - strlen(outv) - 1);
        strncat(outv, item, cap - strlen(outv) - 1);
    }
    return 0;
}

/* KIP-966: an ELR member holds every record committed while the ISR was at least the min ISR
 * it was computed for; when min.insync.replicas changes, the HW may advance with fewer
 * replicas, so the ELR and LastKnownElr of every partition the change affects are cleared (as
 * Kafka's ReplicationControlManager does): a topic's partitions for a topic config, those of
 * every topic without its own value for a cluster or broker default. */
static int clear_elr_for_min_isr(const kq_image *img, int8_t resource_type,
                                 const char *resource_name, kq_reclist *out)
{
    const kq_topic *t = NULL;
    while ((t = kq_image_topic_next(img, t)) != NULL) {
        if (resource_type == KQ_CONFIG_RESOURCE_TOPIC
                ? !t->name || strcmp(t->name, resource_name) != 0
                : !t->name || kq_image_config(img, KQ_CONFIG_RESOURCE_TOPIC, t->name,
                                              "min.insync.replicas") != NULL)
            continue;
        for (int32_t i = 0; i < t->n_partitions; i++) {
            const kq_partition *p = &t->partitions[i];
            if (p->n_elr == 0 && p->n_last_known_elr == 0)
                continue;
            kq_record r = {.type = KQ_REC_PARTITION_CHANGE};
            kq_rec_partition_change *pc = &r.partition_change;
            memcpy(pc->topic_id, t->id, 16);
            pc->partition_id = i;
            pc->leader = KQ_LEADER_UNCHANGED;
            pc->leader_recovery_state = KQ_RECOVERY_UNCHANGED;
            pc->has_elr = true;
            pc->has_last_known_elr = true;
            int rc = kq_reclist_push(out, &r);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int kq_rc_alter_configs(const kq_image *img, int8_t resource_type, const char *resource_name,
                        const kq_config_op *ops, int32_t n_ops, kq_reclist *out,
                        kq_simple_result *res)
{
    size_t start = out->n;
    int rc = 0;

    memset(res, 0, sizeof *res);
    if (!resource_name) {
        rc = seterr(res->message, sizeof res->message, KQ_ERR_INVALID_REQUEST,
                    "resource name missing");
        goto out;
    }
    if (resource_type == KQ_CONFIG_RESOURCE_TOPIC) {
        if (!kq_image_topic_by_name(img, resource_name)) {
            rc = seterr(res->message, sizeof res->message, KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION,
                        "topic %s does not exist", resource_name);
            goto out;
        }
    } else if (resource_type == KQ_CONFIG_RESOURCE_BROKER) {
        int64_t id;
        const char *d = resource_name;
        bool canonical = *d == '0' ? d[1] == '\0' : *d >= '1' && *d <= '9';

        while (canonical && *++d)
            canonical = *d >= '0' && *d <= '9';
        /* "" (the cluster default) or a broker id written as the record stores it: "-0" or
         * "007" would name no broker. */
        if (*resource_name &&
            (!canonical || !kq_decide_parse_i64(resource_name, &id) || id < 0 || id > INT32_MAX)) {
            rc = seterr(res->message, sizeof res->message, KQ_ERR_INVALID_REQUEST,
                        "broker resource name %s is not \"\" or a broker id", resource_name);
            goto out;
        }
    } else {
        rc = seterr(res->message, sizeof res->message, KQ_ERR_INVALID_REQUEST,
                    "unsupported config resource type %d", (int)resource_type);
        goto out;
    }
    for (int32_t i = 0; i < n_ops; i++) {
        const kq_config_op *o = &ops[i];
        char buf[256];
        const char *val = o->value;

        for (int32_t j = 0; j < i; j++)
            if (o->name && ops[j].name && !strcmp(o->name, ops[j].name)) {
                rc = seterr(res->message, sizeof res->message, KQ_ERR_INVALID_REQUEST,
                            "config %s appears twice", o->name);
                goto out;
            }
        if ((rc = kq_rc_validate_config(resource_type, resource_name, o->name, NULL, res->message,
                                        sizeof res->message)))
            goto out;
        switch (o->op) {
        case KQ_CONFIG_OP_SET:
            if (!val) {
                rc = seterr(res->message, sizeof res->message, KQ_ERR_INVALID_REQUEST,
                            "SET of %s without a value", o->name);
                goto out;
            }
            break;
        case KQ_CONFIG_OP_DELETE:
            val = NULL;
            break;
        case KQ_CONFIG_OP_APPEND:
        case KQ_CONFIG_OP_SUBTRACT:
            if (find_key(resource_type, o->name)->type != C_LIST_POLICY || !val) {
                rc = seterr(res->message, sizeof res->message, KQ_ERR_INVALID_CONFIG,
                            "%s is not a list config (APPEND/SUBTRACT)", o->name);
                goto out;
            }
            list_edit(kq_image_config(img, resource_type, resource_name, o->name), val,
                      o->op == KQ_CONFIG_OP_APPEND, buf, sizeof buf);
            val = buf[0] ? buf : NULL;
            break;
        default:
            rc = seterr(res->message, sizeof res->message, KQ_ERR_INVALID_REQUEST,
                        "unknown config operation %d for %s", (int)o->op, o->name);
            goto out;
        }
        if (val && (rc = kq_rc_validate_config(resource_type, resource_name, o->name, val,
                                               res->message, sizeof res->message)))
            goto out;
        if ((rc = push_config(out, resource_type, resource_name, o->name, val)))
            goto out;
        const char *cur = kq_image_config(img, resource_type, resource_name, o->name);
        bool changed = cur && val ? strcmp(cur, val) != 0 : cur != val;
        if (changed && !strcmp(o->name, "min.insync.replicas") &&
            (rc = clear_elr_for_min_isr(img, resource_type, resource_name, out)))
            goto out;
    }
out:
    if (rc) {
        kq_reclist_truncate(out, start);
        if (rc == KQ_ERR_NOMEM)
            snprintf(res->message, sizeof res->message, "out of memory");
    }
    res->error = rc;
    return rc == KQ_ERR_NOMEM ? rc : 0;
}

/* ---- topics ------------------------------------------------------------------------------ */

/* Kafka: '.' and '_' collide in metric names. */
static bool names_collide(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a == '.' ? '_' : *a, y = *b == '.' ? '_' : *b;

        if (x != y)
            return false;
    }
    return !*a && !*b;
}

static void random_topic_id(const kq_image *img, kq_prng *prng, uint8_t id[16])
{
    for (;;) {
        uint64_t a = kq_prng_next(prng), b = kq_prng_next(prng);

        memcpy(id, &a, 8);
        memcpy(id + 8, &b, 8);
        /* Skip the reserved ids (zero, Kafka's Uuid.ONE) and ids in use. */
        if (!kq_topic_id_reserved(id) && !kq_image_topic_by_id(img, id))
            return;
    }
}

/* Append one PartitionRecord: ISR = active replicas in order, leader = first of them. */
static int push_partition(kq_reclist *out, const kq_image *img, const uint8_t topic_id[16],
                          int32_t pid, const int32_t *replicas, int32_t rf)
{
    kq_record r = {.type = KQ_REC_PARTITION};
    kq_rec_partition *p = &r.partition;
    int rc;

    p->partition_id = pid;
    memcpy(p->topic_id, topic_id, 16);
    if ((rc = ids_copy(&p->replicas, replicas, rf)) || (rc = ids_copy(&p->isr, replicas, rf))) {
        kq_record_free(&r);
        return rc;
    }
    p->isr.n = 0;
    for (int32_t i = 0; i < rf; i++)
        if (kq_decide_broker_active(img, replicas[i]))
            p->isr.ids[p->isr.n++] = replicas[i];
    p->leader = p->isr.n > 0 ? p->isr.ids[0] : KQ_NO_LEADER;
    p->leader_recovery_state = KQ_RECOVERY_RECOVERED;
    return kq_reclist_push(out, &r);
}

/* Validate a manual assignment covering partitions first..first+n-1; *rf_out the common
 * replication factor (must equal rf_expect when > 0). Fills `flat` (n * rf) in index order. */
static int check_assignment(const kq_image *img, const kq_partition_assignment *as, int32_t n,
                            int32_t first, int32_t rf_expect, int32_t **flat, int32_t *rf_out,
                            char *msg, size_t cap)
{
    int32_t rf = rf_expect;
    bool any_active = false;

    *flat = NULL;
    for (int32_t i = 0; i < n; i++) {
        const kq_partition_assignment *a = &as[i];

        if (a->partition_index < first || a->partition_index >= first + n)
            return seterr(msg, cap, KQ_ERR_INVALID_REPLICA_ASSIGNMENT,
                          "partitions must be numbered %d..%d, got %d", (int)first,
                          (int)(first + n - 1), (int)a->partition_index);
        for (int32_t j = 0; j < i; j++)
            if (as[j].partition_index == a->partition_index)
                return seterr(msg, cap, KQ_ERR_INVALID_REPLICA_ASSIGNMENT,
                              "partition %d is assigned twice", (int)a->partition_index);
        if (a->n_broker_ids <= 0 || a->n_broker_ids > KQ_REC_MAX_REPLICAS)
            return seterr(msg, cap, KQ_ERR_INVALID_REPLICA_ASSIGNMENT,
                          "partition %d has %d replicas", (int)a->partition_index,
                          (int)a->n_broker_ids);
        if (rf <= 0)
            rf = a->n_broker_ids;
        if (a->n_broker_ids != rf)
            return seterr(msg, cap, KQ_ERR_INVALID_REPLICA_ASSIGNMENT,
                          "partition %d has %d replicas, the others %d: every partition needs "
                          "the same replication factor",
                          (int)a->partition_index, (int)a->n_broker_ids, (int)rf);
        for (int32_t j = 0; j < a->n_broker_ids; j++) {
            int32_t id = a->broker_ids[j];

            if (kq_ids_contain(a->broker_ids, j, id))
                return seterr(msg, cap, KQ_ERR_INVALID_REPLICA_ASSIGNMENT,
                              "partition %d lists broker %d twice", (int)a->partition_index,
                              (int)id);
            if (!kq_image_broker(img, id))
                return seterr(msg, cap, KQ_ERR_INVALID_REPLICA_ASSIGNMENT,
                              "partition %d names broker %d, which is not registered",
                              (int)a->partition_index, (int)id);
            any_active |= kq_decide_broker_active(img, id);
        }
    }
    if (!any_active)
        return seterr(msg, cap, KQ_ERR_INVALID_REPLICA_ASSIGNMENT,
                      "every broker in the assignment is fenced or shutting down");
    if (!(*flat = malloc((size_t)n * (size_t)rf * sizeof **flat)))
        return KQ_ERR_NOMEM;
    for (int32_t i = 0; i < n; i++)
        memcpy(*flat + (size_t)(as[i].partition_index - first) * (size_t)rf, as[i].broker_ids,
               (size_t)rf * sizeof **flat);
    *rf_out = rf;
    return 0;
}

static int create_one(const kq_decide_settings *s, const kq_image *img, const kq_create_topic *t,
                      kq_prng *prng, kq_reclist *out, kq_create_topic_result *res)
{
    char *m = res->message;
    size_t cap = sizeof res->message;
    int32_t *flat = NULL, np, rf;
    kq_record r = {.type = KQ_REC_TOPIC};
    const kq_topic *same;
    int rc = 0;

    if (!t->name || !kq_topic_name_valid(t->name))
        return seterr(m, cap, KQ_ERR_INVALID_TOPIC_EXCEPTION,
                      "topic name %s is not [a-zA-Z0-9._-]{1,249} (and not . or ..)",
                      t->name ? t->name : "(null)");
    if ((same = kq_image_topic_by_name(img, t->name))) {
        /* The existing topic's id: a client that chose the id of its create (a retry after a
         * lost answer) can tell its own topic from someone else's. */
        memcpy(res->topic_id, same->id, 16);
        return seterr(m, cap, KQ_ERR_TOPIC_ALREADY_EXISTS, "topic %s already exists", t->name);
    }
    for (const kq_topic *o = kq_image_topic_next(img, NULL); o; o = kq_image_topic_next(img, o))
        if (names_collide(o->name, t->name))
            return seterr(m, cap, KQ_ERR_INVALID_TOPIC_EXCEPTION,
                          "topic %s collides with existing topic %s ('.' and '_' collide)", t->name,
                          o->name);
    if (!kq_uuid_is_zero(t->topic_id)) {
        const kq_topic *o = kq_image_topic_by_id(img, t->topic_id);
        char id[KQ_UUID_STR_LEN + 1];

        kq_uuid_format(t->topic_id, id);
        if (kq_topic_id_reserved(t->topic_id))
            return seterr(m, cap, KQ_ERR_INVALID_REQUEST, "topic id %s is reserved", id);
        if (o)
            return seterr(m, cap, KQ_ERR_INVALID_REQUEST, "topic id %s is used by topic %s", id,
                          o->name);
    }
    if (t->n_assignments > 0) {
        if (t->num_partitions != -1 || t->replication_factor != -1)
            return seterr(m, cap, KQ_ERR_INVALID_REQUEST,
                          "with a manual assignment, partitions and replication factor must "
                          "both be -1");
        if ((rc =
                 check_assignment(img, t->assignments, t->n_assignments, 0, 0, &flat, &rf, m, cap)))
            return rc;
        np = t->n_assignments;
    } else {
        np = t->num_partitions == -1 ? s->num_partitions : t->num_partitions;
        rf = t->replication_factor == -1 ? s->default_replication_factor : t->replication_factor;
        if (t->replication_factor == 0 || t->replication_factor < -1 || rf <= 0)
            return seterr(m, cap, KQ_ERR_INVALID_REPLICATION_FACTOR,
                          "replication factor must be positive or -1, got %d",
                          (int)t->replication_factor);
        if (t->num_partitions == 0 || t->num_partitions < -1 || np <= 0)
            return seterr(m, cap, KQ_ERR_INVALID_PARTITIONS,
                          "number of partitions must be positive or -1, got %d",
                          (int)t->num_partitions);
        if (rf > KQ_REC_MAX_REPLICAS)
            return seterr(m, cap, KQ_ERR_INVALID_REPLICATION_FACTOR,
                          "replication factor %d is above %d", (int)rf, KQ_REC_MAX_REPLICAS);
        if ((rc = kq_place_replicas(img, np, rf, prng, &flat, m, cap)))
            return rc;
    }
    for (int32_t i = 0; i < t->n_configs; i++) {
        const kq_config_kv *kv = &t->configs[i];

        for (int32_t j = 0; j < i; j++)
            if (kv->name && t->configs[j].name && !strcmp(kv->name, t->configs[j].name)) {
                rc = seterr(m, cap, KQ_ERR_INVALID_REQUEST, "config %s appears twice", kv->name);
                goto out;
            }
        if ((rc = kq_rc_validate_config(KQ_CONFIG_RESOURCE_TOPIC, t->name, kv->name,
                                        kv->value ? kv->value : "", m, cap)))
            goto out;
    }
    /* Records: Topic, Configs, Partitions. */
    if (kq_uuid_is_zero(t->topic_id))
        random_topic_id(img, prng, res->topic_id);
    else
        memcpy(res->topic_id, t->topic_id, 16);
    memcpy(r.topic.topic_id, res->topic_id, 16);
    if (!(r.topic.name = strdup(t->name)) || (rc = kq_reclist_push(out, &r))) {
        kq_record_free(&r);
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    for (int32_t i = 0; i < t->n_configs; i++)
        if ((rc = push_config(out, KQ_CONFIG_RESOURCE_TOPIC, t->name, t->configs[i].name,
                              t->configs[i].value)))
            goto out;
    for (int32_t i = 0; i < np; i++)
        if ((rc = push_partition(out, img, res->topic_id, i, flat + (size_t)i * (size_t)rf, rf)))
            goto out;
    res->num_partitions = np;
    res->replication_factor = rf;
out:
    free(flat);
    return rc;
}

int kq_rc_create_topics(const kq_decide_settings *s, const kq_image *img,
                        const kq_create_topic *reqs, int32_t n,
                        const kq_create_topic_result *refused, kq_prng *prng, kq_reclist *out,
                        kq_create_topic_result *res)
{
    for (int32_t i = 0; i < n; i++) {
        size_t start = out->n;
        bool dup = false;
        int rc;

        memset(&res[i], 0, sizeof res[i]);
        for (int32_t j = 0; j < n && reqs[i].name; j++)
            if (j != i && reqs[j].name && !strcmp(reqs[i].name, reqs[j].name))
                dup = true;
        if (dup) {
            res[i].error = seterr(res[i].message, sizeof res[i].message, KQ_ERR_INVALID_REQUEST,
                                  "topic %s appears more than once in the request", reqs[i].name);
            continue;
        }
        for (int32_t j = 0; j < n && !kq_uuid_is_zero(reqs[i].topic_id); j++)
            if (j != i && !memcmp(reqs[i].topic_id, reqs[j].topic_id, 16))
                dup = true;
        if (dup) {
            res[i].error = seterr(res[i].message, sizeof res[i].message, KQ_ERR_INVALID_REQUEST,
                                  "the topic id of topic %s appears more than once in the request",
                                  reqs[i].name ? reqs[i].name : "(null)");
            continue;
        }
        if (refused && refused[i].error) {
            res[i] = refused[i];
            continue;
        }
        rc = create_one(s, img, &reqs[i], prng, out, &res[i]);
        if (rc) {
            kq_reclist_truncate(out, start);
            res[i].error = rc;
            if (rc == KQ_ERR_NOMEM)
                return rc;
        }
    }
    return 0;
}

int kq_rc_create_partitions(const kq_decide_settings *s, const kq_image *img,
                            const kq_create_partitions *reqs, int32_t n, kq_prng *prng,
                            kq_reclist *out, kq_simple_result *res)
{
    (void)s;
    for (int32_t i = 0; i < n; i++) {
        const kq_create_partitions *q = &reqs[i];
        const kq_topic *t = q->topic ? kq_image_topic_by_name(img, q->topic) : NULL;
        char *m = res[i].message;
        size_t cap = sizeof res[i].message, start = out->n;
        int32_t *flat = NULL, rf, add;
        int rc = 0;

        memset(&res[i], 0, sizeof res[i]);
        if (!t) {
            res[i].error = seterr(m, cap, KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION,
                                  "topic %s does not exist", q->topic ? q->topic : "(null)");
            continue;
        }
        if (q->count <= t->n_partitions) {
            res[i].error = seterr(m, cap, KQ_ERR_INVALID_PARTITIONS,
                                  q->count == t->n_partitions
                                      ? "topic %s already has %d partitions"
                                      : "topic %s has %d partitions; the count cannot decrease",
                                  t->name, (int)t->n_partitions);
            continue;
        }
        add = q->count - t->n_partitions;
        rf = t->n_partitions > 0 ? t->partitions[0].n_replicas : 1;
        if (q->n_assignments > 0) {
            if (q->n_assignments != add) {
                res[i].error =
                    seterr(m, cap, KQ_ERR_INVALID_REPLICA_ASSIGNMENT,
                           "%d assignments for %d new partitions", (int)q->n_assignments, (int)add);
                continue;
            }
            rc =
                check_assignment(img, q->assignments, add, t->n_partitions, rf, &flat, &rf, m, cap);
        } else {
            rc = kq_place_replicas(img, add, rf, prng, &flat, m, cap);
        }
        for (int32_t j = 0; !rc && j < add; j++)
            rc = push_partition(out, img, t->id, t->n_partitions + j, flat + (size_t)j * (size_t)rf,
                                rf);
        free(flat);
        if (rc) {
            kq_reclist_truncate(out, start);
            res[i].error = rc;
            if (rc == KQ_ERR_NOMEM)
                return rc;
        }
    }
    return 0;
}

int kq_rc_delete_topic(const kq_image *img, const char *name, const uint8_t topic_id[16],
                       kq_reclist *out, kq_simple_result *res)
{
    const kq_topic *t;
    kq_record r = {.type = KQ_REC_REMOVE_TOPIC};

    memset(res, 0, sizeof *res);
    if (name) {
        if (!(t = kq_image_topic_by_name(img, name)))
            return res->error =
                       seterr(res->message, sizeof res->message, KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION,
                              "topic %s does not exist", name);
    } else if (!topic_id || !(t = kq_image_topic_by_id(img, topic_id))) {
        return res->error = seterr(res->message, sizeof res->message, KQ_ERR_UNKNOWN_TOPIC_ID,
                                   "no topic has that id");
    }
    memcpy(r.remove_topic.topic_id, t->id, 16);
    return res->error = kq_reclist_push(out, &r);
}

/* ---- AlterPartition ---------------------------------------------------------------------- */

void kq_alter_partition_result_free(kq_alter_partition_result *r)
{
    if (!r)
        return;
    for (int32_t i = 0; i < r->n_results; i++)
        free(r->results[i].isr);
    free(r->results);
    r->results = NULL;
    r->n_results = 0;
}

/* Steps 3..16 for one partition. */
static int alter_one(const kq_ap_ctx *ctx, const kq_image *img, const kq_alter_partition *req,
                     const kq_ap_topic *at, const kq_ap_partition *ap, kq_reclist *out,
                     kq_ap_result *r, int32_t *scratch)
{
    const kq_topic *t;
    const kq_partition *p;
    const int32_t *rep;
    kq_record rec;
    kq_pcb b;
    kq_pcb_result br;
    int rc;

    /* 3 */
    if (req->version > 1) {
        t = kq_uuid_is_zero(at->topic_id) ? NULL : kq_image_topic_by_id(img, at->topic_id);
        if (!t)
            return KQ_ERR_UNKNOWN_TOPIC_ID;
    } else {
        t = at->name ? kq_image_topic_by_name(img, at->name) : NULL;
        if (!t)
            return KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    }
    /* 4 */
    if (ap->partition_index < 0 || ap->partition_index >= t->n_partitions)
        return KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    p = &t->partitions[ap->partition_index];
    rep = kq_partition_replicas(p);
    /* 5, 6: the broker knows newer epochs: this controller is probably stale. */
    if (ap->leader_epoch > p->leader_epoch)
        return KQ_ERR_NOT_CONTROLLER;
    if (ap->partition_epoch > p->partition_epoch)
        return KQ_ERR_NOT_CONTROLLER;
    /* 7 */
    if (ap->leader_epoch < p->leader_epoch)
        return KQ_ERR_FENCED_LEADER_EPOCH;
    /* 8 */
    if (req->broker_id != p->leader)
        return KQ_ERR_INVALID_REQUEST;
    /* 9: the compare-and-swap */
    if (ap->partition_epoch < p->partition_epoch)
        return KQ_ERR_INVALID_UPDATE_VERSION;
    /* 10 */
    if (ap->n_new_isr < 0 || ap->n_new_isr > p->n_replicas || (ap->n_new_isr && !ap->new_isr))
        return KQ_ERR_INVALID_REQUEST;
    for (int32_t i = 0; i < ap->n_new_isr; i++) {
        int32_t id = ap->new_isr[i].broker_id;

        if (!kq_ids_contain(rep, p->n_replicas, id) || kq_ids_contain(scratch, i, id))
            return KQ_ERR_INVALID_REQUEST;
        scratch[i] = id;
    }
    /* 11 */
    if (!kq_ids_contain(scratch, ap->n_new_isr, p->leader))
        return KQ_ERR_INVALID_REQUEST;
    /* 12 */
    if (ap->leader_recovery_state != KQ_RECOVERY_RECOVERED &&
        ap->leader_recovery_state != KQ_RECOVERY_RECOVERING)
        return KQ_ERR_INVALID_REQUEST;
    if (ap->leader_recovery_state == KQ_RECOVERY_RECOVERING && ap->n_new_isr > 1)
        return KQ_ERR_INVALID_REQUEST;
    /* 13 */
    if (p->leader_recovery_state == KQ_RECOVERY_RECOVERED &&
        ap->leader_recovery_state == KQ_RECOVERY_RECOVERING)
        return KQ_ERR_INVALID_REQUEST;
    /* 14 */
    for (int32_t i = 0; i < ap->n_new_isr; i++) {
        const kq_broker *m = kq_image_broker(img, ap->new_isr[i].broker_id);

        if (!m || m->fenced || m->in_controlled_shutdown ||
            (ap->new_isr[i].broker_epoch != -1 && ap->new_isr[i].broker_epoch != m->epoch))
            return req->version > 1 ? KQ_ERR_INELIGIBLE_REPLICA : KQ_ERR_OPERATION_NOT_ATTEMPTED;
    }
    /* 15 */
    kq_pcb_init(&b, ctx->s, img, t, ap->partition_index);
    b.has_target_isr = true;
    b.target_isr = scratch;
    b.n_target_isr = ap->n_new_isr;
    b.target_recovery = ap->leader_recovery_state;
    if (ctx->target_replicas) {
        int32_t n = 0;
        const int32_t *tr = ctx->target_replicas(ctx->target_arg, t->id, ap->partition_index, &n);

        if (tr && n > 0) {
            b.has_target_replicas = true;
            b.target_replicas = tr;
            b.n_target_replicas = n;
        }
    }
    if ((rc = kq_pcb_build(&b, &rec, &br)))
        return rc;
    r->leader_id = p->leader;
    r->leader_epoch = p->leader_epoch;
    r->partition_epoch = p->partition_epoch;
    r->leader_recovery_state = p->leader_recovery_state;
    {
        const int32_t *isr = kq_partition_isr(p);
        int32_t n_isr = p->n_isr;

        if (rec.type == KQ_REC_PARTITION_CHANGE) {
            const kq_rec_partition_change *pc = &rec.partition_change;

            r->partition_epoch++;
            if (pc->leader != KQ_LEADER_UNCHANGED) {
                r->leader_id = pc->leader;
                r->leader_epoch++;
            }
            if (pc->leader_recovery_state != KQ_RECOVERY_UNCHANGED)
                r->leader_recovery_state = pc->leader_recovery_state;
            if (pc->has_isr) {
                isr = pc->isr.ids;
                n_isr = pc->isr.n;
            }
        }
        if (n_isr > 0 && !(r->isr = malloc((size_t)n_isr * sizeof *r->isr))) {
            kq_record_free(&rec);
            return KQ_ERR_NOMEM;
        }
        if (n_isr > 0)
            memcpy(r->isr, isr, (size_t)n_isr * sizeof *r->isr);
        r->n_isr = n_isr;
    }
    if (rec.type == KQ_REC_PARTITION_CHANGE && (rc = kq_reclist_push(out, &rec)))
        return rc;
    /* 16: a finished reassignment moved the leadership away from the requester. */
    if (br.leader_changed && br.leader != req->broker_id)
        return req->version > 1 ? KQ_ERR_NEW_LEADER_ELECTED : KQ_ERR_FENCED_LEADER_EPOCH;
    return 0;
}

int kq_rc_alter_partition(const kq_ap_ctx *ctx, const kq_image *img, const kq_alter_partition *req,
                          kq_reclist *out, kq_alter_partition_result *res)
{
    int32_t total = 0, k = 0, *scratch = NULL;
    size_t start = out->n;
    int rc = 0;

    memset(res, 0, sizeof *res);
    /* 1 */
    if (!ctx->active) {
        rc = seterr(res->message, sizeof res->message, KQ_ERR_NOT_CONTROLLER,
                    "this controller is not active");
        goto out;
    }
    /* 2 */
    if (kq_cc_check_broker_epoch(img, req->broker_id, req->broker_epoch)) {
        rc = seterr(res->message, sizeof res->message, KQ_ERR_STALE_BROKER_EPOCH,
                    "broker %d epoch %lld is not its registration's", (int)req->broker_id,
                    (long long)req->broker_epoch);
        goto out;
    }
    if (req->n_topics < 0 || (req->n_topics && !req->topics)) {
        rc = seterr(res->message, sizeof res->message, KQ_ERR_INVALID_REQUEST, "bad topic list");
        goto out;
    }
    for (int32_t i = 0; i < req->n_topics; i++) {
        if (req->topics[i].n_partitions < 0 ||
            (req->topics[i].n_partitions && !req->topics[i].partitions)) {
            rc = seterr(res->message, sizeof res->message, KQ_ERR_INVALID_REQUEST,
                        "bad partition list");
            goto out;
        }
        total += req->topics[i].n_partitions;
    }
    if (total > 0 && !(res->results = calloc((size_t)total, sizeof *res->results))) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    if (!(scratch = malloc(KQ_REC_MAX_REPLICAS * sizeof *scratch))) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    res->n_results = total;
    for (int32_t i = 0; i < req->n_topics; i++) {
        const kq_ap_topic *at = &req->topics[i];

        for (int32_t j = 0; j < at->n_partitions; j++, k++) {
            kq_ap_result *r = &res->results[k];
            bool dup = false;
            int e;

            r->leader_id = KQ_NO_LEADER;
            /* One change per partition per request. */
            for (int32_t jj = 0; jj < j; jj++)
                if (at->partitions[jj].partition_index == at->partitions[j].partition_index)
                    dup = true;
            for (int32_t ii = 0; ii < i && !dup; ii++)
                if ((req->version > 1 && !memcmp(req->topics[ii].topic_id, at->topic_id, 16)) ||
                    (req->version <= 1 && at->name && req->topics[ii].name &&
                     !strcmp(req->topics[ii].name, at->name)))
                    for (int32_t jj = 0; jj < req->topics[ii].n_partitions; jj++)
                        if (req->topics[ii].partitions[jj].partition_index ==
                            at->partitions[j].partition_index)
                            dup = true;
            e = dup ? KQ_ERR_INVALID_REQUEST
                    : alter_one(ctx, img, req, at, &at->partitions[j], out, r, scratch);
            if (e == KQ_ERR_NOMEM) {
                rc = e;
                goto out;
            }
            r->error = e;
        }
    }
out:
    free(scratch);
    if (rc) {
        kq_reclist_truncate(out, start);
        kq_alter_partition_result_free(res);
    }
    res->error = rc;
    return rc;
}

/* ---- elections --------------------------------------------------------------------------- */

typedef struct elect_all {
    const kq_decide_settings *s;
    const kq_image *img;
    int type;
    kq_reclist *out;
    kq_elect_result *v;
    int32_t n, cap;
    int rc;
} elect_all;

/* One ElectLeaders partition: its error code (0 = elected; a record may be appended). */
static int elect_one(const kq_decide_settings *s, const kq_image *img, int type, const kq_topic *t,
                     int32_t pid, kq_reclist *out, int *fatal)
{
    const kq_partition *p = &t->partitions[pid];
    kq_record rec;
    kq_pcb b;
    kq_pcb_result br;
    int rc;

    if (type == KQ_ELECTION_PREFERRED && p->n_replicas > 0 &&
        p->leader == kq_partition_replicas(p)[0])
        return KQ_ERR_ELECTION_NOT_NEEDED;
    if (type == KQ_ELECTION_UNCLEAN && p->leader != KQ_NO_LEADER)
        return KQ_ERR_ELECTION_NOT_NEEDED;
    kq_pcb_init(&b, s, img, t, pid);
    b.election = (kq_election)type;
    if ((rc = kq_pcb_build(&b, &rec, &br))) {
        *fatal = rc;
        return rc;
    }
    if (rec.type != KQ_REC_PARTITION_CHANGE || !br.leader_changed || br.leader < 0) {
        kq_record_free(&rec);
        return type == KQ_ELECTION_PREFERRED ? KQ_ERR_PREFERRED_LEADER_NOT_AVAILABLE
                                             : KQ_ERR_ELIGIBLE_LEADERS_NOT_AVAILABLE;
    }
    if ((rc = kq_reclist_push(out, &rec)))
        *fatal = rc;
    return rc;
}

static int add_result(elect_all *a, const uint8_t id[16], int32_t index, int32_t pid, int err)
{
    if (a->n == a->cap) {
        int32_t ncap = a->cap ? a->cap * 2 : 16;
        kq_elect_result *nv = realloc(a->v, (size_t)ncap * sizeof *nv);

        if (!nv)
            return KQ_ERR_NOMEM;
        a->v = nv;
        a->cap = ncap;
    }
    memset(&a->v[a->n], 0, sizeof a->v[a->n]);
    if (id)
        memcpy(a->v[a->n].topic_id, id, 16);
    a->v[a->n].index = index;
    a->v[a->n].partition = pid;
    a->v[a->n].error = err;
    a->n++;
    return 0;
}

static int elect_all_cb(void *arg, const kq_topic *t, int32_t pid, const kq_partition *p)
{
    elect_all *a = arg;
    int fatal = 0, e;

    (void)p;
    e = elect_one(a->s, a->img, a->type, t, pid, a->out, &fatal);
    if (fatal)
        return a->rc = fatal;
    if (e == KQ_ERR_ELECTION_NOT_NEEDED)
        return 0;
    if ((a->rc = add_result(a, t->id, -1, pid, e)))
        return a->rc;
    return 0;
}

int kq_rc_elect_leaders(const kq_decide_settings *s, const kq_image *img, int election_type,
                        const kq_elect_target *targets, int32_t n_targets, kq_reclist *out,
                        kq_elect_result **results, int32_t *n_results)
{
    elect_all a = {.s = s, .img = img, .type = election_type, .out = out};
    size_t start = out->n;
    int rc = 0;

    *results = NULL;
    *n_results = 0;
    if (election_type != KQ_ELECTION_PREFERRED && election_type != KQ_ELECTION_UNCLEAN)
        return KQ_ERR_INVALID_REQUEST;
    if (!targets) {
        kq_image_foreach_partition(img, elect_all_cb, &a);
        rc = a.rc;
    } else {
        for (int32_t i = 0; i < n_targets && !rc; i++) {
            const kq_topic *t =
                targets[i].topic ? kq_image_topic_by_name(img, targets[i].topic) : NULL;
            int fatal = 0, e;

            if (!t || targets[i].partition < 0 || targets[i].partition >= t->n_partitions)
                e = KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
            else
                e = elect_one(s, img, election_type, t, targets[i].partition, out, &fatal);
            rc = fatal ? fatal : add_result(&a, t ? t->id : NULL, i, targets[i].partition, e);
        }
    }
    if (rc) {
        kq_reclist_truncate(out, start);
        free(a.v);
        return rc;
    }
    *results = a.v;
    *n_results = a.n;
    return 0;
}

typedef struct scan {
    const kq_decide_settings *s;
    const kq_image *img;
    bool preferred;
    int32_t max, done;
    kq_reclist *out;
    bool more;
    int rc;
} scan;

static int scan_cb(void *arg, const kq_topic *t, int32_t pid, const kq_partition *p)
{
    scan *sc = arg;
    kq_record rec;
    kq_pcb b;
    kq_pcb_result br;
    int32_t pref;

    if (p->n_replicas == 0)
        return 0;
    pref = kq_partition_replicas(p)[0];
    if (sc->preferred) {
        /* Only partitions led by a non-preferred replica whose preferred one could lead. */
        if (p->leader == KQ_NO_LEADER || p->leader == pref ||
            !kq_ids_contain(kq_partition_isr(p), p->n_isr, pref) ||
            !kq_decide_broker_active(sc->img, pref))
            return 0;
    } else if (p->leader != KQ_NO_LEADER) {
        return 0;
    }
    if (sc->done >= sc->max) {
        sc->more = true;
        return 1;
    }
    kq_pcb_init(&b, sc->s, sc->img, t, pid);
    if (sc->preferred)
        b.election = KQ_ELECTION_PREFERRED;
    if ((sc->rc = kq_pcb_build(&b, &rec, &br)))
        return 1;
    if (rec.type != KQ_REC_PARTITION_CHANGE)
        return 0;
    if ((sc->rc = kq_reclist_push(sc->out, &rec)))
        return 1;
    sc->done++;
    return 0;
}

static int run_scan(const kq_decide_settings *s, const kq_image *img, bool preferred, int32_t max,
                    kq_reclist *out, bool *more)
{
    scan sc = {.s = s, .img = img, .preferred = preferred, .max = max, .out = out};
    size_t start = out->n;

    *more = false;
    if (max <= 0)
        max = KQ_RC_SCAN_MAX;
    sc.max = max;
    kq_image_foreach_partition(img, scan_cb, &sc);
    if (sc.rc) {
        kq_reclist_truncate(out, start);
        return sc.rc;
    }
    *more = sc.more;
    return 0;
}

int kq_rc_preferred_rebalance(const kq_decide_settings *s, const kq_image *img, int32_t max,
                              kq_reclist *out, bool *more)
{
    *more = false;
    if (!kq_decide_auto_rebalance(s, img))
        return 0;
    return run_scan(s, img, true, max, out, more);
}

int kq_rc_elect_leaderless(const kq_decide_settings *s, const kq_image *img, int32_t max,
                           kq_reclist *out, bool *more)
{
    return run_scan(s, img, false, max, out, more);
}
