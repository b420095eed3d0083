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

#define MAX_MESSAGE 255

/* ---------------------------------------------------------------------------------------- */
/* helpers                                                                                   */

typedef struct arena {
    void **blk;
    size_t n, cap;
} arena;

static void *aalloc(arena *a, size_t n, size_t size)
{
    void *p;

    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        void **nb = realloc(a->blk, cap * sizeof *nb);

        if (!nb)
            return NULL;
        a->blk = nb;
        a->cap = cap;
    }
    p = calloc(n ? n : 1, size);
    if (p)
        a->blk[a->n++] = p;
    return p;
}

static void arena_free(arena *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++)
        free(a->blk[i]);
    free(a->blk);
    a->blk = NULL;
    a->n = a->cap = 0;
}

/* What a kq_ctl_request owns. */
typedef struct req_priv {
    arena a;
    kq_request env; /* decoded envelope when owned (kq_ctl_decode_request) */
    bool own_env;
} req_priv;

__attribute__((format(printf, 3, 4))) static int bad(char *errbuf, size_t errlen, const char *fmt,
                                                     ...)
{
    va_list ap;

    if (errbuf && errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return KQ_ERR_INVALID_REQUEST;
}

#define BAD(...) bad(errbuf, errlen, __VA_ARGS__)
static int nomem(char *errbuf, size_t errlen)
{
    if (errbuf && errlen > 0)
        snprintf(errbuf, errlen, "out of memory");
    return KQ_ERR_NOMEM;
}
#define NOMEM() nomem(errbuf, errlen)

/* Length of s, or max + 1 if longer than max. */
static size_t blen(const char *s, size_t max)
{
    return s ? strnlen(s, max + 1) : 0;
}

static bool str_ok(const char *s, size_t max, bool nonempty)
{
    size_t n;

    if (!s)
        return !nonempty;
    n = blen(s, max);
    return n <= max && (!nonempty || n > 0);
}

/* Point a protobuf optional 16-byte id field (has flag and bytes) at id (borrowed). */
static void set_id(protobuf_c_boolean *has, ProtobufCBinaryData *bin, const uint8_t id[16])
{
    *has = 1;
    bin->data = (uint8_t *)id;
    bin->len = 16;
}

static char *clip(const char *m, char *buf)
{
    size_t n;

    if (!m || !m[0])
        return NULL;
    n = strnlen(m, MAX_MESSAGE + 1);
    if (n > MAX_MESSAGE) {
        n = MAX_MESSAGE;
        while (n > 0 && ((unsigned char)m[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(buf, m, n);
    buf[n] = '\0';
    return buf;
}

static int pack(const ProtobufCMessage *msg, kq_buf *out)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *p = malloc(n ? n : 1);

    if (!p)
        return KQ_ERR_NOMEM;
    out->len = protobuf_c_message_pack(msg, p);
    out->data = p;
    return 0;
}

bool kq_ctl_is_controller_api(uint32_t k)
{
    const kq_api_info *api = kq_api_find(k);

    return api && api->kind == KQ_API_KIND_CONTROLLER;
}

/* ---------------------------------------------------------------------------------------- */
/* request decoding                                                                          */

static int dec_endpoints(arena *a, Kq__CtlEndpoint **w, size_t n, const kq_rec_endpoint **out,
                         int32_t *n_out, const char *what, char *errbuf, size_t errlen)
{
    kq_rec_endpoint *e;

    if (n > KQ_REC_MAX_ENDPOINTS)
        return BAD("%s has %zu endpoints (max %d)", what, n, KQ_REC_MAX_ENDPOINTS);
    e = aalloc(a, n, sizeof *e);
    if (!e)
        return NOMEM();
    for (size_t i = 0; i < n; i++) {
        if (!str_ok(w[i]->name, KQ_REC_MAX_NAME, true))
            return BAD("%s endpoint %zu name is empty or longer than %d bytes", what, i,
                       KQ_REC_MAX_NAME);
        if (!str_ok(w[i]->host, KQ_REC_MAX_NAME, true))
            return BAD("%s endpoint %zu host is empty or longer than %d bytes", what, i,
                       KQ_REC_MAX_NAME);
        if (w[i]->port < 0 || w[i]->port > 65535)
            return BAD("%s endpoint %zu port %d is out of range 0..65535", what, i, w[i]->port);
        e[i].name = w[i]->name;
        e[i].host = w[i]->host;
        e[i].port = w[i]->port;
    }
    *out = e;
    *n_out = (int32_t)n;
    return 0;
}

static int dec_registration(arena *a, const Kq__BrokerRegistrationRequest *w,
                            kq_broker_registration *r, char *errbuf, size_t errlen)
{
    if (w->broker_id < 0)
        return BAD("broker_registration broker_id %d is negative", w->broker_id);
    if (!str_ok(w->cluster_id, KQ_CODEC_MAX_CLUSTER_ID, false))
        return BAD("broker_registration cluster_id is longer than %d bytes",
                   KQ_CODEC_MAX_CLUSTER_ID);
    if (w->incarnation_id.len != 16)
        return BAD("broker_registration incarnation_id has %zu bytes, not 16",
                   w->incarnation_id.len);
    memcpy(r->incarnation_id, w->incarnation_id.data, 16);
    if (kq_uuid_is_zero(r->incarnation_id))
        return BAD("broker_registration incarnation_id is all zero");
    if (w->n_endpoints == 0)
        return BAD("broker_registration has no endpoints");
    if (w->rack && !str_ok(w->rack, KQ_REC_MAX_NAME, true))
        return BAD("broker_registration rack is empty or longer than %d bytes", KQ_REC_MAX_NAME);
    r->broker_id = w->broker_id;
    r->cluster_id = w->cluster_id;
    r->rack = w->rack;
    return dec_endpoints(a, w->endpoints, w->n_endpoints, &r->endpoints, &r->n_endpoints,
                         "broker_registration", errbuf, errlen);
}

static int dec_alter_partition(arena *a, const Kq__AlterPartitionRequest *w, kq_alter_partition *r,
                               char *errbuf, size_t errlen)
{
    size_t total = 0;
    kq_ap_topic *topics;

    if (w->version < 0 || w->version > 3)
        return BAD("alter_partition version %d is not in 0..3", w->version);
    if (w->broker_id < 0)
        return BAD("alter_partition broker_id %d is negative", w->broker_id);
    if (w->broker_epoch < -1)
        return BAD("alter_partition broker_epoch %lld is invalid", (long long)w->broker_epoch);
    if (w->n_topics > KQ_CTL_MAX_ITEMS)
        return BAD("alter_partition has %zu topics (max %d)", w->n_topics, KQ_CTL_MAX_ITEMS);
    topics = aalloc(a, w->n_topics, sizeof *topics);
    if (!topics)
        return NOMEM();
    for (size_t i = 0; i < w->n_topics; i++) {
        const Kq__AlterPartitionTopic *t = w->topics[i];
        kq_ap_partition *ps;

        if (w->version > 1) {
            if (!t->has_topic_id || t->topic_id.len != 16)
                return BAD("alter_partition topic %zu needs a 16-byte topic_id (version %d)", i,
                           w->version);
            memcpy(topics[i].topic_id, t->topic_id.data, 16);
        } else {
            if (!t->topic_name || !str_ok(t->topic_name, KQ_CTL_MAX_TOPIC_NAME_BYTES, true))
                return BAD("alter_partition topic %zu needs a topic_name of 1..%d bytes "
                           "(version %d)",
                           i, KQ_CTL_MAX_TOPIC_NAME_BYTES, w->version);
            topics[i].name = t->topic_name;
        }
        total += t->n_partitions;
        if (total > KQ_CTL_MAX_PARTITIONS)
            return BAD("alter_partition has more than %d partitions", KQ_CTL_MAX_PARTITIONS);
        ps = aalloc(a, t->n_partitions, sizeof *ps);
        if (!ps)
            return NOMEM();
        for (size_t k = 0; k < t->n_partitions; k++) {
            const Kq__AlterPartitionPartition *p = t->partitions[k];
            kq_ap_isr_member *isr;

            if (p->partition_index < 0)
                return BAD("alter_partition topic %zu partition_index %d is negative", i,
                           p->partition_index);
            if (p->leader_epoch < 0 || p->partition_epoch < 0)
                return BAD("alter_partition topic %zu partition %d has a negative epoch", i,
                           p->partition_index);
            if (p->leader_recovery_state != KQ_RECOVERY_RECOVERED &&
                p->leader_recovery_state != KQ_RECOVERY_RECOVERING)
                return BAD("alter_partition topic %zu partition %d leader_recovery_state %d is "
                           "not 0 or 1",
                           i, p->partition_index, p->leader_recovery_state);
            if (p->n_new_isr > KQ_REC_MAX_REPLICAS)
                return BAD("alter_partition topic %zu partition %d new_isr has %zu members "
                           "(max %d)",
                           i, p->partition_index, p->n_new_isr, KQ_REC_MAX_REPLICAS);
            isr = aalloc(a, p->n_new_isr, sizeof *isr);
            if (!isr)
                return NOMEM();
            for (size_t m = 0; m < p->n_new_isr; m++) {
                if (p->new_isr[m]->broker_epoch < -1)
                    return BAD("alter_partition topic %zu partition %d new_isr broker_epoch "
                               "%lld is invalid",
                               i, p->partition_index, (long long)p->new_isr[m]->broker_epoch);
                isr[m].broker_id = p->new_isr[m]->broker_id;
                isr[m].broker_epoch = p->new_isr[m]->broker_epoch;
            }
            ps[k].partition_index = p->partition_index;
            ps[k].leader_epoch = p->leader_epoch;
            ps[k].partition_epoch = p->partition_epoch;
            ps[k].leader_recovery_state = (int8_t)p->leader_recovery_state;
            ps[k].new_isr = isr;
            ps[k].n_new_isr = (int32_t)p->n_new_isr;
        }
        topics[i].partitions = ps;
        topics[i].n_partitions = (int32_t)t->n_partitions;
    }
    r->version = (int16_t)w->version;
    r->broker_id = w->broker_id;
    r->broker_epoch = w->broker_epoch;
    r->topics = topics;
    r->n_topics = (int32_t)w->n_topics;
    return 0;
}

static int dec_assignments(arena *a, Kq__CtlReplicaAssignment **w, size_t n, size_t *total,
                           const kq_partition_assignment **out, int32_t *n_out, const char *what,
                           char *errbuf, size_t errlen)
{
    kq_partition_assignment *as;

    *total += n;
    if (*total > KQ_CTL_MAX_PARTITIONS)
        return BAD("%s has more than %d assignments", what, KQ_CTL_MAX_PARTITIONS);
    as = aalloc(a, n, sizeof *as);
    if (!as)
        return NOMEM();
    for (size_t i = 0; i < n; i++) {
        if (w[i]->partition_index < 0)
            return BAD("%s assignment %zu partition_index %d is negative", what, i,
                       w[i]->partition_index);
        if (w[i]->n_broker_ids > KQ_REC_MAX_REPLICAS)
            return BAD("%s assignment %zu has %zu replicas (max %d)", what, i, w[i]->n_broker_ids,
                       KQ_REC_MAX_REPLICAS);
        as[i].partition_index = w[i]->partition_index;
        as[i].broker_ids = w[i]->broker_ids;
        as[i].n_broker_ids = (int32_t)w[i]->n_broker_ids;
    }
    *out = n ? as : NULL;
    *n_out = (int32_t)n;
    return 0;
}

/* A request's list of n items: 1..KQ_CTL_MAX_ITEMS of them ("<what> has no <none>", "<what> has
 * N <noun> (max M)" otherwise). Returns n zeroed outputs of size bytes in arena a, or NULL with
 * *rc set (and errbuf filled). */
static void *dec_list(arena *a, size_t n, size_t size, const char *what, const char *none,
                      const char *noun, int *rc, char *errbuf, size_t errlen)
{
    void *p;

    if (n == 0) {
        *rc = BAD("%s has no %s", what, none);
        return NULL;
    }
    if (n > KQ_CTL_MAX_ITEMS) {
        *rc = BAD("%s has %zu %s (max %d)", what, n, noun, KQ_CTL_MAX_ITEMS);
        return NULL;
    }
    p = aalloc(a, n, size);
    if (!p)
        *rc = NOMEM();
    return p;
}

static int dec_topic_name(const char *name, const char *what, size_t i, char *errbuf, size_t errlen)
{
    if (!str_ok(name, KQ_CTL_MAX_TOPIC_NAME_BYTES, false))
        return BAD("%s %zu name is longer than %d bytes", what, i, KQ_CTL_MAX_TOPIC_NAME_BYTES);
    return 0;
}

static int dec_create_topics(arena *a, const Kq__CreateTopicsRequest *w, kq_ctl_request *r,
                             char *errbuf, size_t errlen)
{
    kq_create_topic *ts;
    size_t total = 0;
    int rc;

    ts = dec_list(a, w->n_topics, sizeof *ts, "create_topics", "topics", "topics", &rc, errbuf,
                  errlen);
    if (!ts)
        return rc;
    for (size_t i = 0; i < w->n_topics; i++) {
        const Kq__CreatableTopic *t = w->topics[i];
        kq_config_kv *cs;

        rc = dec_topic_name(t->name, "create_topics topic", i, errbuf, errlen);
        if (rc)
            return rc;
        if (t->num_partitions < -1)
            return BAD("create_topics topic %zu num_partitions %d is invalid", i,
                       t->num_partitions);
        if (t->replication_factor < -1)
            return BAD("create_topics topic %zu replication_factor %d is invalid", i,
                       t->replication_factor);
        rc = dec_assignments(a, t->assignments, t->n_assignments, &total, &ts[i].assignments,
                             &ts[i].n_assignments, "create_topics", errbuf, errlen);
        if (rc)
            return rc;
        if (t->n_configs > KQ_CTL_MAX_CONFIGS)
            return BAD("create_topics topic %zu has %zu configs (max %d)", i, t->n_configs,
                       KQ_CTL_MAX_CONFIGS);
        cs = aalloc(a, t->n_configs, sizeof *cs);
        if (!cs)
            return NOMEM();
        for (size_t k = 0; k < t->n_configs; k++) {
            if (!str_ok(t->configs[k]->name, KQ_REC_MAX_NAME, true))
                return BAD("create_topics topic %zu config %zu name is empty or longer than %d "
                           "bytes",
                           i, k, KQ_REC_MAX_NAME);
            if (!t->configs[k]->value)
                return BAD("create_topics topic %zu config '%s' has no value", i,
                           t->configs[k]->name);
            if (!str_ok(t->configs[k]->value, KQ_REC_MAX_CONFIG_VALUE, false))
                return BAD("create_topics topic %zu config '%s' value is longer than %d bytes", i,
                           t->configs[k]->name, KQ_REC_MAX_CONFIG_VALUE);
            cs[k].name = t->configs[k]->name;
            cs[k].value = t->configs[k]->value;
        }
        if (t->has_topic_id) {
            if (t->topic_id.len != 16)
                return BAD("create_topics topic %zu topic_id has %zu bytes (expected 16)", i,
                           t->topic_id.len);
            if (kq_topic_id_reserved(t->topic_id.data))
                return BAD("create_topics topic %zu topic_id is a reserved id", i);
            memcpy(ts[i].topic_id, t->topic_id.data, 16);
        }
        ts[i].name = t->name;
        ts[i].num_partitions = t->num_partitions;
        ts[i].replication_factor = t->replication_factor;
        ts[i].configs = t->n_configs ? cs : NULL;
        ts[i].n_configs = (int32_t)t->n_configs;
    }
    r->create_topics.topics = ts;
    r->create_topics.n = (int32_t)w->n_topics;
    return 0;
}

static int dec_delete_topics(arena *a, const Kq__DeleteTopicsRequest *w, kq_ctl_request *r,
                             char *errbuf, size_t errlen)
{
    kq_delete_topic *ts;
    int rc;

    ts = dec_list(a, w->n_topics, sizeof *ts, "delete_topics", "topics", "topics", &rc, errbuf,
                  errlen);
    if (!ts)
        return rc;
    for (size_t i = 0; i < w->n_topics; i++) {
        const Kq__DeleteTopicState *t = w->topics[i];

        if (t->name) {
            rc = dec_topic_name(t->name, "delete_topics topic", i, errbuf, errlen);
            if (rc)
                return rc;
            ts[i].name = t->name;
        } else {
            if (!t->has_topic_id || t->topic_id.len != 16)
                return BAD("delete_topics topic %zu has neither a name nor a 16-byte topic_id", i);
            memcpy(ts[i].topic_id, t->topic_id.data, 16);
        }
    }
    r->delete_topics.topics = ts;
    r->delete_topics.n = (int32_t)w->n_topics;
    return 0;
}

static int dec_create_partitions(arena *a, const Kq__CreatePartitionsRequest *w, kq_ctl_request *r,
                                 char *errbuf, size_t errlen)
{
    kq_create_partitions *ts;
    size_t total = 0;
    int rc;

    ts = dec_list(a, w->n_topics, sizeof *ts, "create_partitions", "topics", "topics", &rc, errbuf,
                  errlen);
    if (!ts)
        return rc;
    for (size_t i = 0; i < w->n_topics; i++) {
        const Kq__CreatePartitionsTopic *t = w->topics[i];

        rc = dec_topic_name(t->name, "create_partitions topic", i, errbuf, errlen);
        if (rc)
            return rc;
        rc = dec_assignments(a, t->assignments, t->n_assignments, &total, &ts[i].assignments,
                             &ts[i].n_assignments, "create_partitions", errbuf, errlen);
        if (rc)
            return rc;
        ts[i].topic = t->name;
        ts[i].count = t->count;
    }
    r->create_partitions.topics = ts;
    r->create_partitions.n = (int32_t)w->n_topics;
    return 0;
}

static int dec_elect_leaders(arena *a, const Kq__ElectLeadersRequest *w, kq_elect_leaders *r,
                             char *errbuf, size_t errlen)
{
    size_t total = 0, k = 0;
    kq_elect_target *ts;
    int rc;

    if (w->election_type != KQ_ELECTION_TYPE_PREFERRED &&
        w->election_type != KQ_ELECTION_TYPE_UNCLEAN)
        return BAD("elect_leaders election_type %d is not 0 (PREFERRED) or 1 (UNCLEAN)",
                   w->election_type);
    r->election_type = (int8_t)w->election_type;
    if (w->all_partitions) {
        if (w->n_topic_partitions > 0)
            return BAD("elect_leaders has all_partitions and a partition list");
        r->all_partitions = true;
        return 0;
    }
    if (w->n_topic_partitions > KQ_CTL_MAX_ITEMS)
        return BAD("elect_leaders has %zu topics (max %d)", w->n_topic_partitions,
                   KQ_CTL_MAX_ITEMS);
    for (size_t i = 0; i < w->n_topic_partitions; i++) {
        rc =
            dec_topic_name(w->topic_partitions[i]->topic, "elect_leaders topic", i, errbuf, errlen);
        if (rc)
            return rc;
        total += w->topic_partitions[i]->n_partitions;
        if (total > KQ_CTL_MAX_PARTITIONS)
            return BAD("elect_leaders has more than %d partitions", KQ_CTL_MAX_PARTITIONS);
    }
    if (total == 0)
        return BAD("elect_leaders names no partitions (and all_partitions is false)");
    ts = aalloc(a, total, sizeof *ts);
    if (!ts)
        return NOMEM();
    for (size_t i = 0; i < w->n_topic_partitions; i++) {
        const Kq__ElectTopicPartitions *t = w->topic_partitions[i];

        for (size_t p = 0; p < t->n_partitions; p++) {
            if (t->partitions[p] < 0)
                return BAD("elect_leaders topic '%s' partition %d is negative", t->topic,
                           t->partitions[p]);
            ts[k].topic = t->topic;
            ts[k].partition = t->partitions[p];
            k++;
        }
    }
    r->all_partitions = false;
    r->targets = ts;
    r->n_targets = (int32_t)total;
    return 0;
}

static int check_resource(int32_t type, const char *name, const char *what, size_t i, char *errbuf,
                          size_t errlen)
{
    if (type != KQ_CONFIG_RESOURCE_TOPIC && type != KQ_CONFIG_RESOURCE_BROKER)
        return BAD("%s resource %zu type %d is not 2 (topic) or 4 (broker)", what, i, type);
    if (!str_ok(name, KQ_CTL_MAX_TOPIC_NAME_BYTES, false))
        return BAD("%s resource %zu name is longer than %d bytes", what, i,
                   KQ_CTL_MAX_TOPIC_NAME_BYTES);
    return 0;
}

static int dec_alter_configs(arena *a, const Kq__IncrementalAlterConfigsRequest *w,
                             kq_ctl_request *r, char *errbuf, size_t errlen)
{
    kq_alter_config_resource *rs;
    int rc;

    rs = dec_list(a, w->n_resources, sizeof *rs, "incremental_alter_configs", "resources",
                  "resources", &rc, errbuf, errlen);
    if (!rs)
        return rc;
    for (size_t i = 0; i < w->n_resources; i++) {
        const Kq__AlterConfigsResource *x = w->resources[i];
        kq_config_op *ops;

        rc = check_resource(x->resource_type, x->resource_name, "incremental_alter_configs", i,
                            errbuf, errlen);
        if (rc)
            return rc;
        if (x->n_configs > KQ_CTL_MAX_CONFIGS)
            return BAD("incremental_alter_configs resource %zu has %zu configs (max %d)", i,
                       x->n_configs, KQ_CTL_MAX_CONFIGS);
        ops = aalloc(a, x->n_configs, sizeof *ops);
        if (!ops)
            return NOMEM();
        for (size_t k = 0; k < x->n_configs; k++) {
            const Kq__AlterableConfig *c = x->configs[k];

            if (!str_ok(c->name, KQ_REC_MAX_NAME, true))
                return BAD("incremental_alter_configs resource %zu config %zu name is empty or "
                           "longer than %d bytes",
                           i, k, KQ_REC_MAX_NAME);
            if (c->config_operation < KQ_CONFIG_OP_SET ||
                c->config_operation > KQ_CONFIG_OP_SUBTRACT)
                return BAD("incremental_alter_configs config '%s' operation %d is not 0..3",
                           c->name, c->config_operation);
            if (c->config_operation != KQ_CONFIG_OP_DELETE && !c->value)
                return BAD("incremental_alter_configs config '%s' has no value", c->name);
            if (!str_ok(c->value, KQ_REC_MAX_CONFIG_VALUE, false))
                return BAD("incremental_alter_configs config '%s' value is longer than %d bytes",
                           c->name, KQ_REC_MAX_CONFIG_VALUE);
            ops[k].name = c->name;
            ops[k].value = c->config_operation == KQ_CONFIG_OP_DELETE ? NULL : c->value;
            ops[k].op = (int8_t)c->config_operation;
        }
        rs[i].resource_type = (int8_t)x->resource_type;
        rs[i].resource_name = x->resource_name;
        rs[i].ops = ops;
        rs[i].n_ops = (int32_t)x->n_configs;
    }
    r->alter_configs.resources = rs;
    r->alter_configs.n = (int32_t)w->n_resources;
    return 0;
}

static int dec_describe_configs(arena *a, const Kq__DescribeConfigsRequest *w, kq_ctl_request *r,
                                char *errbuf, size_t errlen)
{
    kq_describe_config_resource *rs;
    int rc;

    rs = dec_list(a, w->n_resources, sizeof *rs, "describe_configs", "resources", "resources", &rc,
                  errbuf, errlen);
    if (!rs)
        return rc;
    for (size_t i = 0; i < w->n_resources; i++) {
        const Kq__DescribeConfigsResource *x = w->resources[i];

        rc = check_resource(x->resource_type, x->resource_name, "describe_configs", i, errbuf,
                            errlen);
        if (rc)
            return rc;
        if (x->n_configuration_keys > KQ_CTL_MAX_CONFIGS)
            return BAD("describe_configs resource %zu asks for %zu keys (max %d)", i,
                       x->n_configuration_keys, KQ_CTL_MAX_CONFIGS);
        for (size_t k = 0; k < x->n_configuration_keys; k++)
            if (!str_ok(x->configuration_keys[k], KQ_REC_MAX_NAME, true))
                return BAD("describe_configs resource %zu key %zu is empty or longer than %d "
                           "bytes",
                           i, k, KQ_REC_MAX_NAME);
        rs[i].resource_type = (int8_t)x->resource_type;
        rs[i].resource_name = x->resource_name;
        rs[i].keys = (const char *const *)x->configuration_keys;
        rs[i].n_keys = (int32_t)x->n_configuration_keys;
    }
    r->describe_configs.resources = rs;
    r->describe_configs.n = (int32_t)w->n_resources;
    return 0;
}

static int dec_update_features(arena *a, const Kq__UpdateFeaturesRequest *w, kq_ctl_request *r,
                               char *errbuf, size_t errlen)
{
    kq_feature_update *us;
    int rc;

    us = dec_list(a, w->n_feature_updates, sizeof *us, "update_features", "feature updates",
                  "updates", &rc, errbuf, errlen);
    if (!us)
        return rc;
    for (size_t i = 0; i < w->n_feature_updates; i++) {
        const Kq__FeatureUpdate *u = w->feature_updates[i];

        if (!str_ok(u->feature, KQ_REC_MAX_NAME, true))
            return BAD("update_features update %zu feature name is empty or longer than %d bytes",
                       i, KQ_REC_MAX_NAME);
        if (u->max_version_level < 0 || u->max_version_level > INT16_MAX)
            return BAD("update_features feature '%s' level %d is not in 0..32767", u->feature,
                       u->max_version_level);
        if (u->upgrade_type < KQ_FEATURE_UPGRADE || u->upgrade_type > KQ_FEATURE_UNSAFE_DOWNGRADE)
            return BAD("update_features feature '%s' upgrade_type %d is not 1..3", u->feature,
                       u->upgrade_type);
        us[i].name = u->feature;
        us[i].max_version_level = (int16_t)u->max_version_level;
        us[i].upgrade_type = (int8_t)u->upgrade_type;
    }
    r->update_features.updates = us;
    r->update_features.n = (int32_t)w->n_feature_updates;
    r->update_features.validate_only = w->has_validate_only && w->validate_only;
    return 0;
}

static int dec_describe_topics(const Kq__DescribeTopicsRequest *w, kq_ctl_request *r, char *errbuf,
                               size_t errlen)
{
    if (w->n_topics > KQ_CTL_MAX_ITEMS)
        return BAD("describe_topics asks for %zu topics (max %d)", w->n_topics, KQ_CTL_MAX_ITEMS);
    for (size_t i = 0; i < w->n_topics; i++) {
        int rc = dec_topic_name(w->topics[i], "describe_topics topic", i, errbuf, errlen);

        if (rc)
            return rc;
    }
    r->describe_topics.names = (const char *const *)w->topics;
    r->describe_topics.n = (int32_t)w->n_topics;
    return 0;
}

static int from_envelope(const kq_request *env, kq_ctl_request *out, req_priv *pv, char *errbuf,
                         size_t errlen)
{
    const Kq__Request *rq = env->priv_;
    arena *a = &pv->a;

    if (!kq_ctl_is_controller_api(env->api_key))
        return BAD("api key %u is not a controller API", env->api_key);
    if (!rq)
        return BAD("request envelope was not decoded");
    out->api_key = env->api_key;
    memcpy(out->cluster_id, env->cluster_id, sizeof out->cluster_id);
    out->sender_id = env->sender_id;
    switch (env->api_key) {
    case KQ_API_BROKER_REGISTRATION:
        if (rq->body_case != KQ__REQUEST__BODY_BROKER_REGISTRATION)
            break;
        return dec_registration(a, rq->broker_registration, &out->broker_registration, errbuf,
                                errlen);
    case KQ_API_BROKER_HEARTBEAT: {
        const Kq__BrokerHeartbeatRequest *w = rq->broker_heartbeat;

        if (rq->body_case != KQ__REQUEST__BODY_BROKER_HEARTBEAT)
            break;
        if (w->broker_id < 0)
            return BAD("broker_heartbeat broker_id %d is negative", w->broker_id);
        if (w->broker_epoch < -1)
            return BAD("broker_heartbeat broker_epoch %lld is invalid", (long long)w->broker_epoch);
        if (w->current_metadata_offset < -1)
            return BAD("broker_heartbeat current_metadata_offset %lld is invalid",
                       (long long)w->current_metadata_offset);
        out->broker_heartbeat.broker_id = w->broker_id;
        out->broker_heartbeat.broker_epoch = w->broker_epoch;
        out->broker_heartbeat.current_metadata_offset = w->current_metadata_offset;
        out->broker_heartbeat.want_fence = w->want_fence;
        out->broker_heartbeat.want_shutdown = w->want_shut_down;
        return 0;
    }
    case KQ_API_UNREGISTER_BROKER:
        if (rq->body_case != KQ__REQUEST__BODY_UNREGISTER_BROKER)
            break;
        if (rq->unregister_broker->broker_id < 0)
            return BAD("unregister_broker broker_id %d is negative",
                       rq->unregister_broker->broker_id);
        out->unregister_broker_id = rq->unregister_broker->broker_id;
        return 0;
    case KQ_API_ALTER_PARTITION:
        if (rq->body_case != KQ__REQUEST__BODY_ALTER_PARTITION)
            break;
        return dec_alter_partition(a, rq->alter_partition, &out->alter_partition, errbuf, errlen);
    case KQ_API_CREATE_TOPICS:
        if (rq->body_case != KQ__REQUEST__BODY_CREATE_TOPICS)
            break;
        return dec_create_topics(a, rq->create_topics, out, errbuf, errlen);
    case KQ_API_DELETE_TOPICS:
        if (rq->body_case != KQ__REQUEST__BODY_DELETE_TOPICS)
            break;
        return dec_delete_topics(a, rq->delete_topics, out, errbuf, errlen);
    case KQ_API_CREATE_PARTITIONS:
        if (rq->body_case != KQ__REQUEST__BODY_CREATE_PARTITIONS)
            break;
        return dec_create_partitions(a, rq->create_partitions, out, errbuf, errlen);
    case KQ_API_ELECT_LEADERS:
        if (rq->body_case != KQ__REQUEST__BODY_ELECT_LEADERS)
            break;
        return dec_elect_leaders(a, rq->elect_leaders, &out->elect_leaders, errbuf, errlen);
    case KQ_API_INCREMENTAL_ALTER_CONFIGS:
        if (rq->body_case != KQ__REQUEST__BODY_INCREMENTAL_ALTER_CONFIGS)
            break;
        return dec_alter_configs(a, rq->incremental_alter_configs, out, errbuf, errlen);
    case KQ_API_DESCRIBE_CONFIGS:
        if (rq->body_case != KQ__REQUEST__BODY_DESCRIBE_CONFIGS)
            break;
        return dec_describe_configs(a, rq->describe_configs, out, errbuf, errlen);
    case KQ_API_UPDATE_FEATURES:
        if (rq->body_case != KQ__REQUEST__BODY_UPDATE_FEATURES)
            break;
        return dec_update_features(a, rq->update_features, out, errbuf, errlen);
    case KQ_API_DESCRIBE_FEATURES:
        if (rq->body_case != KQ__REQUEST__BODY_DESCRIBE_FEATURES)
            break;
        return 0;
    case KQ_API_DESCRIBE_CLUSTER:
        if (rq->body_case != KQ__REQUEST__BODY_DESCRIBE_CLUSTER)
            break;
        return 0;
    case KQ_API_DESCRIBE_TOPICS:
        if (rq->body_case != KQ__REQUEST__BODY_DESCRIBE_TOPICS)
            break;
        return dec_describe_topics(rq->describe_topics, out, errbuf, errlen);
    default:
        break;
    }
    return BAD("request for api key %u has a missing or wrong body", env->api_key);
}

void kq_ctl_request_free(kq_ctl_request *r)
{
    req_priv *pv;

    if (!r)
        return;
    pv = r->priv_;
    if (pv) {
        arena_free(&pv->a);
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

static Kq__CtlEndpoint **enc_endpoints(arena *a, const kq_rec_endpoint *e, int32_t n)
{
    Kq__CtlEndpoint *w = aalloc(a, (size_t)n, sizeof *w);
    Kq__CtlEndpoint **pp = aalloc(a, (size_t)n, sizeof *pp);

    if (!w || !pp)
        return NULL;
    for (int32_t i = 0; i < n; i++) {
        kq__ctl_endpoint__init(&w[i]);
        w[i].name = e[i].name;
        w[i].host = e[i].host;
        w[i].port = e[i].port;
        pp[i] = &w[i];
    }
    return pp;
}

static Kq__CtlReplicaAssignment **enc_assignments(arena *a, const kq_partition_assignment *as,
                                                  int32_t n)
{
    Kq__CtlReplicaAssignment *w = aalloc(a, (size_t)n, sizeof *w);
    Kq__CtlReplicaAssignment **pp = aalloc(a, (size_t)n, sizeof *pp);

    if (!w || !pp)
        return NULL;
    for (int32_t i = 0; i < n; i++) {
        kq__ctl_replica_assignment__init(&w[i]);
        if (as[i].n_broker_ids < 0 || (as[i].n_broker_ids > 0 && !as[i].broker_ids))
            return NULL;
        w[i].partition_index = as[i].partition_index;
        w[i].n_broker_ids = (size_t)as[i].n_broker_ids;
        w[i].broker_ids = (int32_t *)as[i].broker_ids;
        pp[i] = &w[i];
    }
    return pp;
}

/* Fill the body of rq from req; 0, KQ_ERR_INVALID_REQUEST or KQ_ERR_NOMEM. */
static int enc_body(arena *a, const kq_ctl_request *req, Kq__Request *rq)
{
#define ALLOC(var, n) (var = aalloc(a, (size_t)(n), sizeof *(var)))
#define CHECKN(n, p) ((n) < 0 || ((n) > 0 && !(p)))
/* Put w into rq as the body of API NAME (oneof member `field`); 0. */
#define SET_BODY(NAME, field) (rq->body_case = KQ__REQUEST__BODY_##NAME, rq->field = w, 0)
    switch (req->api_key) {
    case KQ_API_BROKER_REGISTRATION: {
        const kq_broker_registration *r = &req->broker_registration;
        Kq__BrokerRegistrationRequest *w;

        if (CHECKN(r->n_endpoints, r->endpoints) || !ALLOC(w, 1))
            return KQ_ERR_INVALID_REQUEST;
        kq__broker_registration_request__init(w);
        w->broker_id = r->broker_id;
        w->cluster_id = (char *)(r->cluster_id ? r->cluster_id : "");
        w->incarnation_id.data = (uint8_t *)r->incarnation_id;
        w->incarnation_id.len = 16;
        w->rack = (char *)r->rack;
        w->n_endpoints = (size_t)r->n_endpoints;
        if (r->n_endpoints && !(w->endpoints = enc_endpoints(a, r->endpoints, r->n_endpoints)))
            return KQ_ERR_NOMEM;
        return SET_BODY(BROKER_REGISTRATION, broker_registration);
    }
    case KQ_API_BROKER_HEARTBEAT: {
        Kq__BrokerHeartbeatRequest *w;

        if (!ALLOC(w, 1))
            return KQ_ERR_NOMEM;
        kq__broker_heartbeat_request__init(w);
        w->broker_id = req->broker_heartbeat.broker_id;
        w->broker_epoch = req->broker_heartbeat.broker_epoch;
        w->current_metadata_offset = req->broker_heartbeat.current_metadata_offset;
        w->want_fence = req->broker_heartbeat.want_fence;
        w->want_shut_down = req->broker_heartbeat.want_shutdown;
        return SET_BODY(BROKER_HEARTBEAT, broker_heartbeat);
    }
    case KQ_API_UNREGISTER_BROKER: {
        Kq__UnregisterBrokerRequest *w;

        if (!ALLOC(w, 1))
            return KQ_ERR_NOMEM;
        kq__unregister_broker_request__init(w);
        w->broker_id = req->unregister_broker_id;
        return SET_BODY(UNREGISTER_BROKER, unregister_broker);
    }
    case KQ_API_ALTER_PARTITION: {
        const kq_alter_partition *r = &req->alter_partition;
        Kq__AlterPartitionRequest *w;
        Kq__AlterPartitionTopic *ts, **tp;

        if (CHECKN(r->n_topics, r->topics))
            return KQ_ERR_INVALID_REQUEST;
        if (!ALLOC(w, 1) || !ALLOC(ts, r->n_topics) || !ALLOC(tp, r->n_topics))
            return KQ_ERR_NOMEM;
        kq__alter_partition_request__init(w);
        w->version = r->version;
        w->broker_id = r->broker_id;
        w->broker_epoch = r->broker_epoch;
        for (int32_t i = 0; i < r->n_topics; i++) {
            const kq_ap_topic *t = &r->topics[i];
            Kq__AlterPartitionPartition *ps, **pp;

            if (CHECKN(t->n_partitions, t->partitions))
                return KQ_ERR_INVALID_REQUEST;
            if (!ALLOC(ps, t->n_partitions) || !ALLOC(pp, t->n_partitions))
                return KQ_ERR_NOMEM;
            kq__alter_partition_topic__init(&ts[i]);
            if (r->version > 1) {
                set_id(&ts[i].has_topic_id, &ts[i].topic_id, t->topic_id);
            } else {
                ts[i].topic_name = (char *)t->name;
            }
            for (int32_t k = 0; k < t->n_partitions; k++) {
                const kq_ap_partition *p = &t->partitions[k];
                Kq__AlterPartitionIsrMember *ms, **mp;

                if (CHECKN(p->n_new_isr, p->new_isr))
                    return KQ_ERR_INVALID_REQUEST;
                if (!ALLOC(ms, p->n_new_isr) || !ALLOC(mp, p->n_new_isr))
                    return KQ_ERR_NOMEM;
                kq__alter_partition_partition__init(&ps[k]);
                ps[k].partition_index = p->partition_index;
                ps[k].leader_epoch = p->leader_epoch;
                ps[k].partition_epoch = p->partition_epoch;
                ps[k].leader_recovery_state = p->leader_recovery_state;
                for (int32_t m = 0; m < p->n_new_isr; m++) {
                    kq__alter_partition_isr_member__init(&ms[m]);
                    ms[m].broker_id = p->new_isr[m].broker_id;
                    ms[m].broker_epoch = p->new_isr[m].broker_epoch;
                    mp[m] = &ms[m];
                }
                ps[k].n_new_isr = (size_t)p->n_new_isr;
                ps[k].new_isr = mp;
                pp[k] = &ps[k];
            }
            ts[i].n_partitions = (size_t)t->n_partitions;
            ts[i].partitions = pp;
            tp[i] = &ts[i];
        }
        w->n_topics = (size_t)r->n_topics;
        w->topics = tp;
        return SET_BODY(ALTER_PARTITION, alter_partition);
    }
    case KQ_API_CREATE_TOPICS: {
        int32_t n = req->create_topics.n;
        const kq_create_topic *r = req->create_topics.topics;
        Kq__CreateTopicsRequest *w;
        Kq__CreatableTopic *ts, **tp;

        if (CHECKN(n, r))
            return KQ_ERR_INVALID_REQUEST;
        if (!ALLOC(w, 1) || !ALLOC(ts, n) || !ALLOC(tp, n))
            return KQ_ERR_NOMEM;
        kq__create_topics_request__init(w);
        for (int32_t i = 0; i < n; i++) {
            Kq__CtlConfig *cs, **cp;

            if (CHECKN(r[i].n_configs, r[i].configs) ||
                CHECKN(r[i].n_assignments, r[i].assignments))
                return KQ_ERR_INVALID_REQUEST;
            kq__creatable_topic__init(&ts[i]);
            ts[i].name = (char *)(r[i].name ? r[i].name : "");
            ts[i].num_partitions = r[i].num_partitions;
            ts[i].replication_factor = r[i].replication_factor;
            if (!kq_uuid_is_zero(r[i].topic_id))
                set_id(&ts[i].has_topic_id, &ts[i].topic_id, r[i].topic_id);
            ts[i].n_assignments = (size_t)r[i].n_assignments;
            if (r[i].n_assignments &&
                !(ts[i].assignments = enc_assignments(a, r[i].assignments, r[i].n_assignments)))
                return KQ_ERR_INVALID_REQUEST;
            if (!ALLOC(cs, r[i].n_configs) || !ALLOC(cp, r[i].n_configs))
                return KQ_ERR_NOMEM;
            for (int32_t k = 0; k < r[i].n_configs; k++) {
                kq__ctl_config__init(&cs[k]);
                cs[k].name = (char *)r[i].configs[k].name;
                cs[k].value = (char *)r[i].configs[k].value;
                cp[k] = &cs[k];
            }
            ts[i].n_configs = (size_t)r[i].n_configs;
            ts[i].configs = cp;
            tp[i] = &ts[i];
        }
        w->n_topics = (size_t)n;
        w->topics = tp;
        return SET_BODY(CREATE_TOPICS, create_topics);
    }
    case KQ_API_DELETE_TOPICS: {
        int32_t n = req->delete_topics.n;
        const kq_delete_topic *r = req->delete_topics.topics;
        Kq__DeleteTopicsRequest *w;
        Kq__DeleteTopicState *ts, **tp;

        if (CHECKN(n, r))
            return KQ_ERR_INVALID_REQUEST;
        if (!ALLOC(w, 1) || !ALLOC(ts, n) || !ALLOC(tp, n))
            return KQ_ERR_NOMEM;
        kq__delete_topics_request__init(w);
        for (int32_t i = 0; i < n; i++) {
            kq__delete_topic_state__init(&ts[i]);
            if (r[i].name) {
                ts[i].name = (char *)r[i].name;
            } else {
                set_id(&ts[i].has_topic_id, &ts[i].topic_id, r[i].topic_id);
            }
            tp[i] = &ts[i];
        }
        w->n_topics = (size_t)n;
        w->topics = tp;
        return SET_BODY(DELETE_TOPICS, delete_topics);
    }
    case KQ_API_CREATE_PARTITIONS: {
        int32_t n = req->create_partitions.n;
        const kq_create_partitions *r = req->create_partitions.topics;
        Kq__CreatePartitionsRequest *w;
        Kq__CreatePartitionsTopic *ts, **tp;

        if (CHECKN(n, r))
            return KQ_ERR_INVALID_REQUEST;
        if (!ALLOC(w, 1) || !ALLOC(ts, n) || !ALLOC(tp, n))
            return KQ_ERR_NOMEM;
        kq__create_partitions_request__init(w);
        for (int32_t i = 0; i < n; i++) {
            if (CHECKN(r[i].n_assignments, r[i].assignments))
                return KQ_ERR_INVALID_REQUEST;
            kq__create_partitions_topic__init(&ts[i]);
            ts[i].name = (char *)(r[i].topic ? r[i].topic : "");
            ts[i].count = r[i].count;
            ts[i].n_assignments = (size_t)r[i].n_assignments;
            if (r[i].n_assignments &&
                !(ts[i].assignments = enc_assignments(a, r[i].assignments, r[i].n_assignments)))
                return KQ_ERR_INVALID_REQUEST;
            tp[i] = &ts[i];
        }
        w->n_topics = (size_t)n;
        w->topics = tp;
        return SET_BODY(CREATE_PARTITIONS, create_partitions);
    }
    case KQ_API_ELECT_LEADERS: {
        const kq_elect_leaders *r = &req->elect_leaders;
        Kq__ElectLeadersRequest *w;
        Kq__ElectTopicPartitions *ts, **tp;
        int32_t nt = 0;

        if (!r->all_partitions && CHECKN(r->n_targets, r->targets))
            return KQ_ERR_INVALID_REQUEST;
        if (!ALLOC(w, 1))
            return KQ_ERR_NOMEM;
        kq__elect_leaders_request__init(w);
        w->election_type = r->election_type;
        w->all_partitions = r->all_partitions;
        if (!r->all_partitions && r->n_targets > 0) {
            int32_t *parts;

            /* Group consecutive targets of the same topic (order is kept). */
            if (!ALLOC(ts, r->n_targets) || !ALLOC(tp, r->n_targets) || !ALLOC(parts, r->n_targets))
                return KQ_ERR_NOMEM;
            for (int32_t i = 0; i < r->n_targets; i++) {
                const char *topic = r->targets[i].topic ? r->targets[i].topic : "";

                if (nt == 0 || strcmp(ts[nt - 1].topic, topic) != 0) {
                    kq__elect_topic_partitions__init(&ts[nt]);
                    ts[nt].topic = (char *)topic;
                    ts[nt].partitions = &parts[i];
                    tp[nt] = &ts[nt];
                    nt++;
                }
                parts[i] = r->targets[i].partition;
                ts[nt - 1].n_partitions++;
            }
            w->n_topic_partitions = (size_t)nt;
            w->topic_partitions = tp;
        }
        return SET_BODY(ELECT_LEADERS, elect_leaders);
    }
    case KQ_API_INCREMENTAL_ALTER_CONFIGS: {
        int32_t n = req->alter_configs.n;
        const kq_alter_config_resource *r = req->alter_configs.resources;
        Kq__IncrementalAlterConfigsRequest *w;
        Kq__AlterConfigsResource *rs, **rp;

        if (CHECKN(n, r))
            return KQ_ERR_INVALID_REQUEST;
        if (!ALLOC(w, 1) || !ALLOC(rs, n) || !ALLOC(rp, n))
            return KQ_ERR_NOMEM;
        kq__incremental_alter_configs_request__init(w);
        for (int32_t i = 0; i < n; i++) {
            Kq__AlterableConfig *cs, **cp;

            if (CHECKN(r[i].n_ops, r[i].ops))
                return KQ_ERR_INVALID_REQUEST;
            if (!ALLOC(cs, r[i].n_ops) || !ALLOC(cp, r[i].n_ops))
                return KQ_ERR_NOMEM;
            kq__alter_configs_resource__init(&rs[i]);
            rs[i].resource_type = r[i].resource_type;
            rs[i].resource_name = (char *)(r[i].resource_name ? r[i].resource_name : "");
            for (int32_t k = 0; k < r[i].n_ops; k++) {
                kq__alterable_config__init(&cs[k]);
                cs[k].name = (char *)r[i].ops[k].name;
                cs[k].config_operation = r[i].ops[k].op;
                cs[k].value = (char *)r[i].ops[k].value;
                cp[k] = &cs[k];
            }
            rs[i].n_configs = (size_t)r[i].n_ops;
            rs[i].configs = cp;
            rp[i] = &rs[i];
        }
        w->n_resources = (size_t)n;
        w->resources = rp;
        return SET_BODY(INCREMENTAL_ALTER_CONFIGS, incremental_alter_configs);
    }
    case KQ_API_DESCRIBE_CONFIGS: {
        int32_t n = req->describe_configs.n;
        const kq_describe_config_resource *r = req->describe_configs.resources;
        Kq__DescribeConfigsRequest *w;
        Kq__DescribeConfigsResource *rs, **rp;

        if (CHECKN(n, r))
            return KQ_ERR_INVALID_REQUEST;
        if (!ALLOC(w, 1) || !ALLOC(rs, n) || !ALLOC(rp, n))
            return KQ_ERR_NOMEM;
        kq__describe_configs_request__init(w);
        for (int32_t i = 0; i < n; i++) {
            if (CHECKN(r[i].n_keys, r[i].keys))
                return KQ_ERR_INVALID_REQUEST;
            kq__describe_configs_resource__init(&rs[i]);
            rs[i].resource_type = r[i].resource_type;
            rs[i].resource_name = (char *)(r[i].resource_name ? r[i].resource_name : "");
            rs[i].n_configuration_keys = (size_t)r[i].n_keys;
            rs[i].configuration_keys = (char **)r[i].keys;
            rp[i] = &rs[i];
        }
        w->n_resources = (size_t)n;
        w->resources = rp;
        return SET_BODY(DESCRIBE_CONFIGS, describe_configs);
    }
    case KQ_API_UPDATE_FEATURES: {
        int32_t n = req->update_features.n;
        const kq_feature_update *r = req->update_features.updates;
        Kq__UpdateFeaturesRequest *w;
        Kq__FeatureUpdate *us, **up;

        if (CHECKN(n, r))
            return KQ_ERR_INVALID_REQUEST;
        if (!ALLOC(w, 1) || !ALLOC(us, n) || !ALLOC(up, n))
            return KQ_ERR_NOMEM;
        kq__update_features_request__init(w);
        for (int32_t i = 0; i < n; i++) {
            kq__feature_update__init(&us[i]);
            us[i].feature = (char *)(r[i].name ? r[i].name : "");
            us[i].max_version_level = r[i].max_version_level;
            us[i].upgrade_type = r[i].upgrade_type;
            up[i] = &us[i];
        }
        w->n_feature_updates = (size_t)n;
        w->feature_updates = up;
        w->has_validate_only = 1;
        w->validate_only = req->update_features.validate_only;
        return SET_BODY(UPDATE_FEATURES, update_features);
    }
    case KQ_API_DESCRIBE_FEATURES: {
        Kq__DescribeFeaturesRequest *w;

        if (!ALLOC(w, 1))
            return KQ_ERR_NOMEM;
        kq__describe_features_request__init(w);
        return SET_BODY(DESCRIBE_FEATURES, describe_features);
    }
    case KQ_API_DESCRIBE_CLUSTER: {
        Kq__DescribeClusterRequest *w;

        if (!ALLOC(w, 1))
            return KQ_ERR_NOMEM;
        kq__describe_cluster_request__init(w);
        return SET_BODY(DESCRIBE_CLUSTER, describe_cluster);
    }
    case KQ_API_DESCRIBE_TOPICS: {
        Kq__DescribeTopicsRequest *w;

        if (CHECKN(req->describe_topics.n, req->describe_topics.names))
            return KQ_ERR_INVALID_REQUEST;
        if (!ALLOC(w, 1))
            return KQ_ERR_NOMEM;
        kq__describe_topics_request__init(w);
        w->n_topics = (size_t)req->describe_topics.n;
        w->topics = (char **)req->describe_topics.names;
        return SET_BODY(DESCRIBE_TOPICS, describe_topics);
    }
    default:
        return KQ_ERR_INVALID_REQUEST;
    }
#undef ALLOC
#undef CHECKN
#undef SET_BODY
}

int kq_ctl_encode_request(const char *cluster_id, int32_t sender_id, const kq_ctl_request *req,
                          kq_buf *out)
{
    Kq__Request rq = KQ__REQUEST__INIT;
    arena a = {0};
    int rc;

    if (!out)
        return KQ_ERR_INVALID_REQUEST;
    out->data = NULL;
    out->len = 0;
    if (!req || blen(cluster_id, KQ_CODEC_MAX_CLUSTER_ID) > KQ_CODEC_MAX_CLUSTER_ID)
        return KQ_ERR_INVALID_REQUEST;
    rq.api_key = req->api_key;
    rq.api_version = 0;
    rq.cluster_id = (char *)(cluster_id ? cluster_id : "");
    rq.sender_id = sender_id;
    rc = enc_body(&a, req, &rq);
    if (!rc)
        rc = pack(&rq.base, out);
    arena_free(&a);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* responses from results                                                                    */

static int finish_response(arena *a, Kq__Response *rs, uint32_t api_key, kq_buf *out)
{
    int rc;

    rs->api_key = api_key;
    rs->error_code = 0;
    rc = pack(&rs->base, out);
    arena_free(a);
    return rc;
}

/* In a response encoder (locals rs, body, a, out): put body into rs as the body of API NAME
 * (oneof member `field`), encode it into out and free a. */
#define FINISH(NAME, field)                                                                        \
    (rs.body_case = KQ__RESPONSE__BODY_##NAME, rs.field = &body,                                   \
     finish_response(&a, &rs, KQ_API_##NAME, out))

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

/* True if x, y and z were all allocated; otherwise frees the arena. */
static bool all_allocated(arena *a, const void *x, const void *y, const void *z)
{
    if (x && y && z)
        return true;
    arena_free(a);
    return false;
}

/* Per-item result lists: n result structs, n pointers to them and n message buffers, all in
 * arena a. False (and a freed) if out of memory. */
#define ALLOC_RESULTS(a, n, ts, tp, msgs)                                                          \
    ((ts) = aalloc((a), (size_t)(n), sizeof *(ts)), (tp) = aalloc((a), (size_t)(n), sizeof *(tp)), \
     (msgs) = aalloc((a), (size_t)(n), MAX_MESSAGE + 1), all_allocated((a), (ts), (tp), (msgs)))

/* Item i's message, clipped into its slot of msgs (arena-owned). */
static char *item_message(char *msgs, int32_t i, const char *message)
{
    return clip(message, msgs + (size_t)i * (MAX_MESSAGE + 1));
}

int kq_ctl_encode_broker_registration_response(const kq_registration_result *res, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__BrokerRegistrationResponse body = KQ__BROKER_REGISTRATION_RESPONSE__INIT;
    arena a = {0};

    if (start(out) || !res)
        return KQ_ERR_INVALID_REQUEST;
    if (res->error)
        return error_response(KQ_API_BROKER_REGISTRATION, res->error, res->message, out);
    body.broker_epoch = res->broker_epoch;
    return FINISH(BROKER_REGISTRATION, broker_registration);
}

int kq_ctl_encode_broker_heartbeat_response(const kq_heartbeat_result *res, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__BrokerHeartbeatResponse body = KQ__BROKER_HEARTBEAT_RESPONSE__INIT;
    arena a = {0};

    if (start(out) || !res)
        return KQ_ERR_INVALID_REQUEST;
    if (res->error)
        return error_response(KQ_API_BROKER_HEARTBEAT, res->error, res->message, out);
    body.is_caught_up = res->is_caught_up;
    body.is_fenced = res->is_fenced;
    body.should_shut_down = res->should_shutdown;
    body.has_in_controlled_shutdown = 1;
    body.in_controlled_shutdown = res->in_controlled_shutdown;
    return FINISH(BROKER_HEARTBEAT, broker_heartbeat);
}

int kq_ctl_encode_unregister_broker_response(int error, const char *message, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__UnregisterBrokerResponse body = KQ__UNREGISTER_BROKER_RESPONSE__INIT;
    arena a = {0};

    if (start(out))
        return KQ_ERR_INVALID_REQUEST;
    if (error)
        return error_response(KQ_API_UNREGISTER_BROKER, error, message, out);
    return FINISH(UNREGISTER_BROKER, unregister_broker);
}

int kq_ctl_encode_alter_partition_response(const kq_alter_partition *req,
                                           const kq_alter_partition_result *res, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__AlterPartitionResponse body = KQ__ALTER_PARTITION_RESPONSE__INIT;
    Kq__AlterPartitionTopicResult *ts, **tp;
    arena a = {0};
    int32_t k = 0, total = 0;

    if (start(out) || !req || !res || req->n_topics < 0 || (req->n_topics && !req->topics))
        return KQ_ERR_INVALID_REQUEST;
    if (res->error)
        return error_response(KQ_API_ALTER_PARTITION, res->error, res->message, out);
    for (int32_t i = 0; i < req->n_topics; i++)
        total += req->topics[i].n_partitions;
    if (total != res->n_results || (total > 0 && !res->results))
        return KQ_ERR_INVALID_REQUEST;
    ts = aalloc(&a, (size_t)req->n_topics, sizeof *ts);
    tp = aalloc(&a, (size_t)req->n_topics, sizeof *tp);
    if (!ts || !tp)
        goto nomem;
    for (int32_t i = 0; i < req->n_topics; i++) {
        const kq_ap_topic *t = &req->topics[i];
        Kq__AlterPartitionPartitionResult *ps = aalloc(&a, (size_t)t->n_partitions, sizeof *ps);
        Kq__AlterPartitionPartitionResult **pp = aalloc(&a, (size_t)t->n_partitions, sizeof *pp);

        if (!ps || !pp)
            goto nomem;
        kq__alter_partition_topic_result__init(&ts[i]);
        if (req->version > 1) {
            set_id(&ts[i].has_topic_id, &ts[i].topic_id, t->topic_id);
        } else {
            ts[i].topic_name = (char *)t->name;
        }
        for (int32_t p = 0; p < t->n_partitions; p++, k++) {
            const kq_ap_result *r = &res->results[k];

            kq__alter_partition_partition_result__init(&ps[p]);
            ps[p].partition_index = t->partitions[p].partition_index;
            ps[p].error_code = r->error;
            ps[p].leader_id = r->error ? -1 : r->leader_id;
            ps[p].leader_epoch = r->error ? -1 : r->leader_epoch;
            ps[p].leader_recovery_state = r->leader_recovery_state;
            ps[p].partition_epoch = r->error ? -1 : r->partition_epoch;
            if (!r->error && r->n_isr > 0 && r->isr) {
                ps[p].n_isr = (size_t)r->n_isr;
                ps[p].isr = r->isr;
            }
            pp[p] = &ps[p];
        }
        ts[i].n_partitions = (size_t)t->n_partitions;
        ts[i].partitions = pp;
        tp[i] = &ts[i];
    }
    body.n_topics = (size_t)req->n_topics;
    body.topics = tp;
    return FINISH(ALTER_PARTITION, alter_partition);
nomem:
    arena_free(&a);
    return KQ_ERR_NOMEM;
}

int kq_ctl_encode_create_topics_response(const kq_create_topic *reqs,
                                         const kq_create_topic_result *res, int32_t n, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__CreateTopicsResponse body = KQ__CREATE_TOPICS_RESPONSE__INIT;
    Kq__CreatableTopicResult *ts, **tp;
    char *msgs;
    arena a = {0};

    if (start(out) || n < 0 || (n > 0 && (!reqs || !res)))
        return KQ_ERR_INVALID_REQUEST;
    if (!ALLOC_RESULTS(&a, n, ts, tp, msgs))
        return KQ_ERR_NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kq__creatable_topic_result__init(&ts[i]);
        ts[i].name = (char *)(reqs[i].name ? reqs[i].name : "");
        ts[i].error_code = res[i].error;
        ts[i].error_message = item_message(msgs, i, res[i].message);
        if (!res[i].error ||
            (res[i].error == KQ_ERR_TOPIC_ALREADY_EXISTS && !kq_uuid_is_zero(res[i].topic_id))) {
            set_id(&ts[i].has_topic_id, &ts[i].topic_id, res[i].topic_id);
        }
        ts[i].num_partitions = res[i].error ? -1 : res[i].num_partitions;
        ts[i].replication_factor = res[i].error ? -1 : res[i].replication_factor;
        tp[i] = &ts[i];
    }
    body.n_topics = (size_t)n;
    body.topics = tp;
    return FINISH(CREATE_TOPICS, create_topics);
}

int kq_ctl_encode_delete_topics_response(const kq_delete_topic *reqs, const kq_simple_result *res,
                                         int32_t n, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__DeleteTopicsResponse body = KQ__DELETE_TOPICS_RESPONSE__INIT;
    Kq__DeletableTopicResult *ts, **tp;
    char *msgs;
    arena a = {0};

    if (start(out) || n < 0 || (n > 0 && (!reqs || !res)))
        return KQ_ERR_INVALID_REQUEST;
    if (!ALLOC_RESULTS(&a, n, ts, tp, msgs))
        return KQ_ERR_NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kq__deletable_topic_result__init(&ts[i]);
        if (reqs[i].name) {
            ts[i].name = (char *)reqs[i].name;
        } else {
            set_id(&ts[i].has_topic_id, &ts[i].topic_id, reqs[i].topic_id);
        }
        ts[i].error_code = res[i].error;
        ts[i].error_message = item_message(msgs, i, res[i].message);
        tp[i] = &ts[i];
    }
    body.n_topics = (size_t)n;
    body.topics = tp;
    return FINISH(DELETE_TOPICS, delete_topics);
}

/* CtlResourceResult list (CreatePartitions). */
int kq_ctl_encode_create_partitions_response(const kq_create_partitions *reqs,
                                             const kq_simple_result *res, int32_t n, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__CreatePartitionsResponse body = KQ__CREATE_PARTITIONS_RESPONSE__INIT;
    Kq__CtlResourceResult *ts, **tp;
    char *msgs;
    arena a = {0};

    if (start(out) || n < 0 || (n > 0 && (!reqs || !res)))
        return KQ_ERR_INVALID_REQUEST;
    if (!ALLOC_RESULTS(&a, n, ts, tp, msgs))
        return KQ_ERR_NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kq__ctl_resource_result__init(&ts[i]);
        ts[i].name = (char *)(reqs[i].topic ? reqs[i].topic : "");
        ts[i].error_code = res[i].error;
        ts[i].error_message = item_message(msgs, i, res[i].message);
        tp[i] = &ts[i];
    }
    body.n_topics = (size_t)n;
    body.topics = tp;
    return FINISH(CREATE_PARTITIONS, create_partitions);
}

int kq_ctl_encode_elect_leaders_response(const kq_image *img, const kq_elect_leaders *req,
                                         const kq_elect_result *res, int32_t n_res, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__ElectLeadersResponse body = KQ__ELECT_LEADERS_RESPONSE__INIT;
    Kq__ElectTopicResult *ts, **tp;
    Kq__ElectPartitionResult *ps, **pp;
    arena a = {0};
    size_t nt = 0;

    if (start(out) || !req || n_res < 0 || (n_res > 0 && !res))
        return KQ_ERR_INVALID_REQUEST;
    ts = aalloc(&a, (size_t)n_res, sizeof *ts);
    tp = aalloc(&a, (size_t)n_res, sizeof *tp);
    ps = aalloc(&a, (size_t)n_res, sizeof *ps);
    pp = aalloc(&a, (size_t)n_res, sizeof *pp);
    if (!ts || !tp || !ps || !pp) {
        arena_free(&a);
        return KQ_ERR_NOMEM;
    }
    /* One topic entry per run of results for the same topic; partitions share pp. */
    for (int32_t i = 0; i < n_res; i++) {
        const kq_elect_result *r = &res[i];
        const char *name = NULL;

        if (r->index >= 0) {
            if (r->index >= req->n_targets || !req->targets) {
                arena_free(&a);
                return KQ_ERR_INVALID_REQUEST;
            }
            name = req->targets[r->index].topic;
        } else if (img) {
            const kq_topic *t = kq_image_topic_by_id(img, r->topic_id);

            name = t ? t->name : NULL;
        }
        if (!name)
            name = "";
        if (nt == 0 || strcmp(ts[nt - 1].topic, name) != 0) {
            kq__elect_topic_result__init(&ts[nt]);
            ts[nt].topic = (char *)name;
            if (!kq_uuid_is_zero(r->topic_id)) {
                set_id(&ts[nt].has_topic_id, &ts[nt].topic_id, r->topic_id);
            }
            ts[nt].partitions = &pp[i];
            tp[nt] = &ts[nt];
            nt++;
        }
        kq__elect_partition_result__init(&ps[i]);
        ps[i].partition_id = r->partition;
        ps[i].error_code = r->error;
        pp[i] = &ps[i];
        ts[nt - 1].n_partitions++;
    }
    body.n_results = nt;
    body.results = tp;
    return FINISH(ELECT_LEADERS, elect_leaders);
}

int kq_ctl_encode_alter_configs_response(const kq_alter_config_resource *reqs,
                                         const kq_simple_result *res, int32_t n, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__IncrementalAlterConfigsResponse body = KQ__INCREMENTAL_ALTER_CONFIGS_RESPONSE__INIT;
    Kq__AlterConfigsResourceResult *ts, **tp;
    char *msgs;
    arena a = {0};

    if (start(out) || n < 0 || (n > 0 && (!reqs || !res)))
        return KQ_ERR_INVALID_REQUEST;
    if (!ALLOC_RESULTS(&a, n, ts, tp, msgs))
        return KQ_ERR_NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kq__alter_configs_resource_result__init(&ts[i]);
        ts[i].resource_type = reqs[i].resource_type;
        ts[i].resource_name = (char *)(reqs[i].resource_name ? reqs[i].resource_name : "");
        ts[i].error_code = res[i].error;
        ts[i].error_message = item_message(msgs, i, res[i].message);
        tp[i] = &ts[i];
    }
    body.n_responses = (size_t)n;
    body.responses = tp;
    return FINISH(INCREMENTAL_ALTER_CONFIGS, incremental_alter_configs);
}

int kq_ctl_encode_update_features_response(const kq_feature_update *reqs,
                                           const kq_simple_result *res, int32_t n, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__UpdateFeaturesResponse body = KQ__UPDATE_FEATURES_RESPONSE__INIT;
    Kq__UpdatableFeatureResult *ts, **tp;
    char *msgs;
    arena a = {0};

    if (start(out) || n < 0 || (n > 0 && (!reqs || !res)))
        return KQ_ERR_INVALID_REQUEST;
    if (!ALLOC_RESULTS(&a, n, ts, tp, msgs))
        return KQ_ERR_NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kq__updatable_feature_result__init(&ts[i]);
        ts[i].feature = (char *)(reqs[i].name ? reqs[i].name : "");
        ts[i].error_code = res[i].error;
        ts[i].error_message = item_message(msgs, i, res[i].message);
        tp[i] = &ts[i];
    }
    body.n_results = (size_t)n;
    body.results = tp;
    return FINISH(UPDATE_FEATURES, update_features);
}

/* ---------------------------------------------------------------------------------------- */
/* describe responses from the image                                                         */

int kq_ctl_encode_describe_cluster(const kq_image *img, const char *cluster_id,
                                   int32_t controller_id, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__DescribeClusterResponse body = KQ__DESCRIBE_CLUSTER_RESPONSE__INIT;
    Kq__DescribeClusterBroker *bs, **bp;
    const kq_broker *b;
    arena a = {0};
    size_t n = 0, i = 0;

    if (start(out) || !img || blen(cluster_id, KQ_CODEC_MAX_CLUSTER_ID) > KQ_CODEC_MAX_CLUSTER_ID)
        return KQ_ERR_INVALID_REQUEST;
    for (b = kq_image_broker_next(img, NULL); b; b = kq_image_broker_next(img, b))
        n++;
    bs = aalloc(&a, n, sizeof *bs);
    bp = aalloc(&a, n, sizeof *bp);
    if (!bs || !bp)
        goto nomem;
    for (b = kq_image_broker_next(img, NULL); b && i < n; b = kq_image_broker_next(img, b), i++) {
        kq__describe_cluster_broker__init(&bs[i]);
        bs[i].broker_id = b->id;
        bs[i].broker_epoch = b->epoch;
        bs[i].fenced = b->fenced;
        bs[i].in_controlled_shutdown = b->in_controlled_shutdown;
        bs[i].rack = b->rack;
        if (b->n_endpoints > 0) {
            bs[i].endpoints = enc_endpoints(&a, b->endpoints, b->n_endpoints);
            if (!bs[i].endpoints)
                goto nomem;
            bs[i].n_endpoints = (size_t)b->n_endpoints;
        }
        bp[i] = &bs[i];
    }
    body.cluster_id = (char *)(cluster_id ? cluster_id : "");
    body.controller_id = controller_id;
    body.n_brokers = i;
    body.brokers = bp;
    return FINISH(DESCRIBE_CLUSTER, describe_cluster);
nomem:
    arena_free(&a);
    return KQ_ERR_NOMEM;
}

typedef struct named_topic {
    const char *name;
    const kq_topic *t;
} named_topic;

static int cmp_named(const void *x, const void *y)
{
    return strcmp(((const named_topic *)x)->name, ((const named_topic *)y)->name);
}

/* Collected configs of one resource (strings borrowed from the image or the caller). */
typedef struct cfg_list {
    arena *a;
    Kq__CtlConfig *v;
    size_t n, cap;
    bool nomem;
} cfg_list;

static int collect_cfg(void *arg, int type, const char *resource, const char *name,
                       const char *value)
{
    cfg_list *l = arg;

    (void)type;
    (void)resource;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        Kq__CtlConfig *nv = aalloc(l->a, cap, sizeof *nv);

        if (!nv) {
            l->nomem = true;
            return KQ_ERR_NOMEM;
        }
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    kq__ctl_config__init(&l->v[l->n]);
    l->v[l->n].name = (char *)name;
    l->v[l->n].value = (char *)value;
    l->n++;
    return 0;
}

static int fill_topic(arena *a, const kq_image *img, const kq_topic *t, int32_t default_min_isr,
                      Kq__DescribeTopicsTopic *w)
{
    Kq__DescribeTopicsPartition *ps = aalloc(a, (size_t)t->n_partitions, sizeof *ps);
    Kq__DescribeTopicsPartition **pp = aalloc(a, (size_t)t->n_partitions, sizeof *pp);
    cfg_list cl = {.a = a};

    if (!ps || !pp)
        return KQ_ERR_NOMEM;
    set_id(&w->has_topic_id, &w->topic_id, t->id);
    for (int32_t i = 0; i < t->n_partitions; i++) {
        const kq_partition *p = &t->partitions[i];

        kq__describe_topics_partition__init(&ps[i]);
        ps[i].partition_index = i;
        ps[i].leader_id = p->leader;
        ps[i].leader_epoch = p->leader_epoch;
        ps[i].partition_epoch = p->partition_epoch;
        ps[i].leader_recovery_state = p->leader_recovery_state;
        ps[i].n_replicas = p->n_replicas;
        ps[i].replicas = (int32_t *)kq_partition_replicas(p);
        ps[i].n_isr = p->n_isr;
        ps[i].isr = (int32_t *)kq_partition_isr(p);
        ps[i].n_elr = p->n_elr;
        ps[i].elr = (int32_t *)kq_partition_elr(p);
        ps[i].n_last_known_elr = p->n_last_known_elr;
        ps[i].last_known_elr = (int32_t *)kq_partition_last_known_elr(p);
        pp[i] = &ps[i];
    }
    w->n_partitions = (size_t)t->n_partitions;
    w->partitions = pp;
    kq_image_foreach_config(img, KQ_CONFIG_RESOURCE_TOPIC, t->name, collect_cfg, &cl);
    if (cl.nomem)
        return KQ_ERR_NOMEM;
    if (cl.n) {
        Kq__CtlConfig **cp = aalloc(a, cl.n, sizeof *cp);

        if (!cp)
            return KQ_ERR_NOMEM;
        for (size_t i = 0; i < cl.n; i++)
            cp[i] = &cl.v[i];
        w->n_configs = cl.n;
        w->configs = cp;
    }
    w->has_min_insync_replicas = 1;
    w->min_insync_replicas = kq_image_min_isr(img, t->name, default_min_isr);
    return 0;
}

int kq_ctl_encode_describe_topics(const kq_image *img, const char *const *names, int32_t n,
                                  int32_t default_min_isr, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__DescribeTopicsResponse body = KQ__DESCRIBE_TOPICS_RESPONSE__INIT;
    Kq__DescribeTopicsTopic *ts, **tp;
    named_topic *list;
    const kq_topic *t;
    arena a = {0};
    size_t cnt = 0, k = 0;

    if (start(out) || !img || n < 0 || (n > 0 && !names))
        return KQ_ERR_INVALID_REQUEST;
    if (n > 0) {
        cnt = (size_t)n;
    } else {
        for (t = kq_image_topic_next(img, NULL); t; t = kq_image_topic_next(img, t))
            cnt++;
    }
    list = aalloc(&a, cnt, sizeof *list);
    ts = aalloc(&a, cnt, sizeof *ts);
    tp = aalloc(&a, cnt, sizeof *tp);
    if (!list || !ts || !tp)
        goto nomem;
    if (n > 0) {
        for (int32_t i = 0; i < n; i++) {
            if (!names[i]) {
                arena_free(&a);
                return KQ_ERR_INVALID_REQUEST;
            }
            list[i].name = names[i];
            list[i].t = kq_image_topic_by_name(img, names[i]);
        }
    } else {
        size_t i = 0;

        for (t = kq_image_topic_next(img, NULL); t && i < cnt; t = kq_image_topic_next(img, t))
            list[i++] = (named_topic){t->name, t};
        cnt = i;
    }
    qsort(list, cnt, sizeof *list, cmp_named);
    for (size_t i = 0; i < cnt; i++) {
        if (k > 0 && strcmp(ts[k - 1].name, list[i].name) == 0)
            continue; /* duplicate name */
        kq__describe_topics_topic__init(&ts[k]);
        ts[k].name = (char *)list[i].name;
        if (!list[i].t) {
            ts[k].error_code = KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        } else if (fill_topic(&a, img, list[i].t, default_min_isr, &ts[k])) {
            goto nomem;
        }
        tp[k] = &ts[k];
        k++;
    }
    body.n_topics = k;
    body.topics = tp;
    return FINISH(DESCRIBE_TOPICS, describe_topics);
nomem:
    arena_free(&a);
    return KQ_ERR_NOMEM;
}

/* Entries of one DescribeConfigs result being built. */
typedef struct entry_list {
    arena *a;
    Kq__DescribeConfigsEntry *v;
    size_t n, cap;
    const kq_describe_config_resource *req; /* key filter */
    int source;                             /* for entries added by the callback */
    bool nomem;
} entry_list;

static bool wanted(const kq_describe_config_resource *r, const char *name)
{
    if (r->n_keys <= 0)
        return true;
    for (int32_t i = 0; i < r->n_keys; i++)
        if (r->keys[i] && strcmp(r->keys[i], name) == 0)
            return true;
    return false;
}

static int add_entry(entry_list *l, const char *name, const char *value, int source)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0)
            return 0; /* a more specific source already set it */
    if (!wanted(l->req, name))
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        Kq__DescribeConfigsEntry *nv = aalloc(l->a, cap, sizeof *nv);

        if (!nv) {
            l->nomem = true;
            return KQ_ERR_NOMEM;
        }
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    kq__describe_configs_entry__init(&l->v[l->n]);
    l->v[l->n].name = (char *)name;
    l->v[l->n].value = (char *)value;
    l->v[l->n].config_source = source;
    l->n++;
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
    return strcmp(((const Kq__DescribeConfigsEntry *)x)->name,
                  ((const Kq__DescribeConfigsEntry *)y)->name);
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

int kq_ctl_encode_describe_configs(const kq_image *img, const kq_describe_config_resource *reqs,
                                   int32_t n, const kq_config_kv *static_defaults, int32_t n_static,
                                   kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__DescribeConfigsResponse body = KQ__DESCRIBE_CONFIGS_RESPONSE__INIT;
    Kq__DescribeConfigsResult *ts, **tp;
    arena a = {0};

    if (start(out) || !img || n < 0 || (n > 0 && !reqs) || n_static < 0 ||
        (n_static > 0 && !static_defaults))
        return KQ_ERR_INVALID_REQUEST;
    ts = aalloc(&a, (size_t)n, sizeof *ts);
    tp = aalloc(&a, (size_t)n, sizeof *tp);
    if (!ts || !tp)
        goto nomem;
    for (int32_t i = 0; i < n; i++) {
        const kq_describe_config_resource *r = &reqs[i];
        const char *name = r->resource_name ? r->resource_name : "";
        entry_list el = {.a = &a, .req = r};

        kq__describe_configs_result__init(&ts[i]);
        ts[i].resource_type = r->resource_type;
        ts[i].resource_name = (char *)name;
        tp[i] = &ts[i];
        if (r->resource_type == KQ_CONFIG_RESOURCE_TOPIC) {
            if (!kq_image_topic_by_name(img, name)) {
                ts[i].error_code = KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
                ts[i].error_message = "topic does not exist";
                continue;
            }
            el.source = KQ_CONFIG_SOURCE_DYNAMIC_TOPIC;
            kq_image_foreach_config(img, KQ_CONFIG_RESOURCE_TOPIC, name, entry_cb, &el);
        } else if (r->resource_type == KQ_CONFIG_RESOURCE_BROKER) {
            if (name[0] && !broker_name_ok(name)) {
                ts[i].error_code = KQ_ERR_INVALID_REQUEST;
                ts[i].error_message = "broker resource name must be a broker id or empty";
                continue;
            }
            if (name[0]) {
                el.source = KQ_CONFIG_SOURCE_DYNAMIC_BROKER;
                kq_image_foreach_config(img, KQ_CONFIG_RESOURCE_BROKER, name, entry_cb, &el);
            }
        } else {
            ts[i].error_code = KQ_ERR_INVALID_REQUEST;
            ts[i].error_message = "resource type must be 2 (topic) or 4 (broker)";
            continue;
        }
        el.source = KQ_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER;
        kq_image_foreach_config(img, KQ_CONFIG_RESOURCE_BROKER, "", entry_cb, &el);
        for (int32_t k = 0; k < n_static && !el.nomem; k++)
            if (static_defaults[k].name)
                add_entry(&el, static_defaults[k].name, static_defaults[k].value,
                          KQ_CONFIG_SOURCE_DEFAULT);
        if (el.nomem)
            goto nomem;
        if (el.n) {
            Kq__DescribeConfigsEntry **ep = aalloc(&a, el.n, sizeof *ep);

            if (!ep)
                goto nomem;
            qsort(el.v, el.n, sizeof *el.v, cmp_entry);
            for (size_t k = 0; k < el.n; k++)
                ep[k] = &el.v[k];
            ts[i].n_configs = el.n;
            ts[i].configs = ep;
        }
    }
    body.n_results = (size_t)n;
    body.results = tp;
    return FINISH(DESCRIBE_CONFIGS, describe_configs);
nomem:
    arena_free(&a);
    return KQ_ERR_NOMEM;
}

typedef struct feat_list {
    arena *a;
    Kq__FeatureDescription *v;
    size_t n, cap;
    bool nomem;
} feat_list;

static Kq__FeatureDescription *feat_find(feat_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0)
            return &l->v[i];
    return NULL;
}

static Kq__FeatureDescription *feat_add(feat_list *l, const char *name)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        Kq__FeatureDescription *nv = aalloc(l->a, cap, sizeof *nv);

        if (!nv) {
            l->nomem = true;
            return NULL;
        }
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    kq__feature_description__init(&l->v[l->n]);
    l->v[l->n].name = (char *)name;
    return &l->v[l->n++];
}

static int feat_cb(void *arg, const char *name, int16_t level)
{
    feat_list *l = arg;
    Kq__FeatureDescription *f = feat_find(l, name);

    if (!f && !(f = feat_add(l, name)))
        return KQ_ERR_NOMEM;
    f->finalized_version_level = level;
    return 0;
}

static int cmp_feat(const void *x, const void *y)
{
    return strcmp(((const Kq__FeatureDescription *)x)->name,
                  ((const Kq__FeatureDescription *)y)->name);
}

int kq_ctl_encode_describe_features(const kq_image *img, const kq_ctl_feature_range *supported,
                                    int32_t n, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__DescribeFeaturesResponse body = KQ__DESCRIBE_FEATURES_RESPONSE__INIT;
    Kq__FeatureDescription **fp;
    arena a = {0};
    feat_list fl = {.a = &a};

    if (start(out) || !img || n < 0 || (n > 0 && !supported))
        return KQ_ERR_INVALID_REQUEST;
    for (int32_t i = 0; i < n; i++) {
        Kq__FeatureDescription *f;

        if (!supported[i].name || !supported[i].name[0]) {
            arena_free(&a);
            return KQ_ERR_INVALID_REQUEST;
        }
        f = feat_find(&fl, supported[i].name);
        if (!f && !(f = feat_add(&fl, supported[i].name)))
            goto nomem;
        f->supported_min_version = supported[i].min_version;
        f->supported_max_version = supported[i].max_version;
    }
    kq_image_foreach_feature(img, feat_cb, &fl);
    if (fl.nomem)
        goto nomem;
    fp = aalloc(&a, fl.n, sizeof *fp);
    if (!fp)
        goto nomem;
    if (fl.n)
        qsort(fl.v, fl.n, sizeof *fl.v, cmp_feat);
    for (size_t i = 0; i < fl.n; i++)
        fp[i] = &fl.v[i];
    body.finalized_features_epoch = kq_image_committed_offset(img);
    body.n_features = fl.n;
    body.features = fp;
    return FINISH(DESCRIBE_FEATURES, describe_features);
nomem:
    arena_free(&a);
    return KQ_ERR_NOMEM;
}

/* ---------------------------------------------------------------------------------------- */
/* response decoding                                                                         */

static const Kq__Response *body_of(const kq_response *env, uint32_t api_key, int body_case,
                                   const char *what, char *errbuf, size_t errlen)
{
    const Kq__Response *rs;

    if (!env || !env->priv_) {
        bad(errbuf, errlen, "%s: no decoded response", what);
        return NULL;
    }
    rs = env->priv_;
    if (env->api_key != api_key) {
        bad(errbuf, errlen, "%s: response is for api key %u", what, env->api_key);
        return NULL;
    }
    if ((int)rs->body_case != body_case) {
        bad(errbuf, errlen, "%s response has no %s body", what, what);
        return NULL;
    }
    return rs;
}

static char *dupstr(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int dup_ids(kq_ctl_ids *out, const int32_t *ids, size_t n, const char *what, char *errbuf,
                   size_t errlen)
{
    if (n > KQ_REC_MAX_REPLICAS)
        return BAD("%s has %zu ids (max %d)", what, n, KQ_REC_MAX_REPLICAS);
    out->ids = calloc(n ? n : 1, sizeof *out->ids);
    if (!out->ids)
        return NOMEM();
    if (n)
        memcpy(out->ids, ids, n * sizeof *ids);
    out->n = (int32_t)n;
    return 0;
}

void kq_ctl_cluster_desc_free(kq_ctl_cluster_desc *d)
{
    if (!d)
        return;
    for (int32_t i = 0; i < d->n_brokers; i++) {
        for (int32_t k = 0; k < d->brokers[i].n_endpoints; k++) {
            free(d->brokers[i].endpoints[k].name);
            free(d->brokers[i].endpoints[k].host);
        }
        free(d->brokers[i].endpoints);
        free(d->brokers[i].rack);
    }
    free(d->brokers);
    free(d->cluster_id);
    memset(d, 0, sizeof *d);
    d->controller_id = -1;
}

int kq_ctl_decode_describe_cluster_response(const kq_response *env, kq_ctl_cluster_desc *out,
                                            char *errbuf, size_t errlen)
{
    const Kq__Response *rs;
    const Kq__DescribeClusterResponse *w;
    int rc = 0;

    if (!out)
        return BAD("no output");
    memset(out, 0, sizeof *out);
    out->controller_id = -1;
    rs = body_of(env, KQ_API_DESCRIBE_CLUSTER, KQ__RESPONSE__BODY_DESCRIBE_CLUSTER,
                 "describe_cluster", errbuf, errlen);
    if (!rs)
        return KQ_ERR_INVALID_REQUEST;
    w = rs->describe_cluster;
    if (w->n_brokers > KQ_CTL_MAX_PARTITIONS)
        return BAD("describe_cluster has %zu brokers", w->n_brokers);
    out->cluster_id = dupstr(w->cluster_id ? w->cluster_id : "");
    out->controller_id = w->controller_id;
    out->brokers = calloc(w->n_brokers ? w->n_brokers : 1, sizeof *out->brokers);
    if (!out->cluster_id || !out->brokers) {
        rc = NOMEM();
        goto out;
    }
    for (size_t i = 0; i < w->n_brokers; i++) {
        const Kq__DescribeClusterBroker *b = w->brokers[i];
        kq_ctl_broker_desc *d = &out->brokers[i];

        out->n_brokers = (int32_t)i + 1;
        if (b->n_endpoints > KQ_REC_MAX_ENDPOINTS) {
            rc = BAD("describe_cluster broker %d has %zu endpoints", b->broker_id, b->n_endpoints);
            goto out;
        }
        d->id = b->broker_id;
        d->epoch = b->broker_epoch;
        d->fenced = b->fenced;
        d->in_controlled_shutdown = b->in_controlled_shutdown;
        d->rack = dupstr(b->rack);
        d->endpoints = calloc(b->n_endpoints ? b->n_endpoints : 1, sizeof *d->endpoints);
        if ((b->rack && !d->rack) || !d->endpoints) {
            rc = NOMEM();
            goto out;
        }
        for (size_t k = 0; k < b->n_endpoints; k++) {
            d->n_endpoints = (int32_t)k + 1;
            d->endpoints[k].name = dupstr(b->endpoints[k]->name);
            d->endpoints[k].host = dupstr(b->endpoints[k]->host);
            d->endpoints[k].port = b->endpoints[k]->port;
            if (!d->endpoints[k].name || !d->endpoints[k].host) {
                rc = NOMEM();
                goto out;
            }
        }
    }
out:
    if (rc)
        kq_ctl_cluster_desc_free(out);
    return rc;
}

/* Copy one config entry into e (e owns the copies); KQ_ERR_NOMEM if a copy failed. */
static int dup_entry(kq_ctl_config_entry *e, const char *name, const char *value, int source)
{
    e->name = dupstr(name);
    e->value = dupstr(value);
    e->source = source;
    return !e->name || (value && !e->value) ? KQ_ERR_NOMEM : 0;
}

static void free_entries(kq_ctl_config_entry *e, int32_t n)
{
    for (int32_t i = 0; e && i < n; i++) {
        free(e[i].name);
        free(e[i].value);
    }
    free(e);
}

void kq_ctl_topics_desc_free(kq_ctl_topics_desc *d)
{
    if (!d)
        return;
    for (int32_t i = 0; i < d->n_topics; i++) {
        kq_ctl_topic_desc *t = &d->topics[i];

        for (int32_t k = 0; k < t->n_partitions; k++) {
            free(t->partitions[k].replicas.ids);
            free(t->partitions[k].isr.ids);
            free(t->partitions[k].elr.ids);
            free(t->partitions[k].last_known_elr.ids);
        }
        free(t->partitions);
        free_entries(t->configs, t->n_configs);
        free(t->name);
    }
    free(d->topics);
    memset(d, 0, sizeof *d);
}

int kq_ctl_decode_describe_topics_response(const kq_response *env, kq_ctl_topics_desc *out,
                                           char *errbuf, size_t errlen)
{
    const Kq__Response *rs;
    const Kq__DescribeTopicsResponse *w;
    int rc = 0;

    if (!out)
        return BAD("no output");
    memset(out, 0, sizeof *out);
    rs = body_of(env, KQ_API_DESCRIBE_TOPICS, KQ__RESPONSE__BODY_DESCRIBE_TOPICS, "describe_topics",
                 errbuf, errlen);
    if (!rs)
        return KQ_ERR_INVALID_REQUEST;
    w = rs->describe_topics;
    out->topics = calloc(w->n_topics ? w->n_topics : 1, sizeof *out->topics);
    if (!out->topics)
        return NOMEM();
    for (size_t i = 0; i < w->n_topics; i++) {
        const Kq__DescribeTopicsTopic *t = w->topics[i];
        kq_ctl_topic_desc *d = &out->topics[i];

        out->n_topics = (int32_t)i + 1;
        d->name = dupstr(t->name ? t->name : "");
        if (!d->name) {
            rc = NOMEM();
            goto out;
        }
        d->error = t->error_code;
        d->min_insync_replicas = t->has_min_insync_replicas ? t->min_insync_replicas : -1;
        if (t->has_topic_id) {
            if (t->topic_id.len != 16) {
                rc = BAD("describe_topics topic '%s' id has %zu bytes", d->name, t->topic_id.len);
                goto out;
            }
            d->has_id = true;
            memcpy(d->topic_id, t->topic_id.data, 16);
        }
        if (t->n_configs > KQ_CTL_MAX_CONFIGS || t->n_partitions > KQ_CTL_MAX_PARTITIONS) {
            rc = BAD("describe_topics topic '%s' has too many configs or partitions", d->name);
            goto out;
        }
        d->configs = calloc(t->n_configs ? t->n_configs : 1, sizeof *d->configs);
        d->partitions = calloc(t->n_partitions ? t->n_partitions : 1, sizeof *d->partitions);
        if (!d->configs || !d->partitions) {
            rc = NOMEM();
            goto out;
        }
        for (size_t k = 0; k < t->n_configs; k++) {
            d->n_configs = (int32_t)k + 1;
            if (dup_entry(&d->configs[k], t->configs[k]->name, t->configs[k]->value,
                          KQ_CONFIG_SOURCE_DYNAMIC_TOPIC)) {
                rc = NOMEM();
                goto out;
            }
        }
        for (size_t k = 0; k < t->n_partitions; k++) {
            const Kq__DescribeTopicsPartition *p = t->partitions[k];
            kq_ctl_partition_desc *pd = &d->partitions[k];

            d->n_partitions = (int32_t)k + 1;
            if (p->leader_id < -1 || p->partition_index < 0) {
                rc = BAD("describe_topics topic '%s' partition %d is invalid", d->name,
                         p->partition_index);
                goto out;
            }
            pd->partition = p->partition_index;
            pd->leader = p->leader_id;
            pd->leader_epoch = p->leader_epoch;
            pd->partition_epoch = p->partition_epoch;
            pd->leader_recovery_state = (int8_t)p->leader_recovery_state;
            if ((rc = dup_ids(&pd->replicas, p->replicas, p->n_replicas, "replicas", errbuf,
                              errlen)) ||
                (rc = dup_ids(&pd->isr, p->isr, p->n_isr, "isr", errbuf, errlen)) ||
                (rc = dup_ids(&pd->elr, p->elr, p->n_elr, "elr", errbuf, errlen)) ||
                (rc = dup_ids(&pd->last_known_elr, p->last_known_elr, p->n_last_known_elr,
                              "last_known_elr", errbuf, errlen)))
                goto out;
        }
    }
out:
    if (rc)
        kq_ctl_topics_desc_free(out);
    return rc;
}

void kq_ctl_configs_desc_free(kq_ctl_configs_desc *d)
{
    if (!d)
        return;
    for (int32_t i = 0; i < d->n_results; i++) {
        free(d->results[i].resource_name);
        free(d->results[i].message);
        free_entries(d->results[i].entries, d->results[i].n_entries);
    }
    free(d->results);
    memset(d, 0, sizeof *d);
}

int kq_ctl_decode_describe_configs_response(const kq_response *env, kq_ctl_configs_desc *out,
                                            char *errbuf, size_t errlen)
{
    const Kq__Response *rs;
    const Kq__DescribeConfigsResponse *w;
    int rc = 0;

    if (!out)
        return BAD("no output");
    memset(out, 0, sizeof *out);
    rs = body_of(env, KQ_API_DESCRIBE_CONFIGS, KQ__RESPONSE__BODY_DESCRIBE_CONFIGS,
                 "describe_configs", errbuf, errlen);
    if (!rs)
        return KQ_ERR_INVALID_REQUEST;
    w = rs->describe_configs;
    out->results = calloc(w->n_results ? w->n_results : 1, sizeof *out->results);
    if (!out->results)
        return NOMEM();
    for (size_t i = 0; i < w->n_results; i++) {
        const Kq__DescribeConfigsResult *x = w->results[i];
        kq_ctl_config_result *d = &out->results[i];

        out->n_results = (int32_t)i + 1;
        d->resource_type = (int8_t)x->resource_type;
        d->resource_name = dupstr(x->resource_name ? x->resource_name : "");
        d->error = x->error_code;
        d->message = dupstr(x->error_message);
        d->entries = calloc(x->n_configs ? x->n_configs : 1, sizeof *d->entries);
        if (!d->resource_name || !d->entries || (x->error_message && !d->message)) {
            rc = NOMEM();
            goto out;
        }
        for (size_t k = 0; k < x->n_configs; k++) {
            d->n_entries = (int32_t)k + 1;
            if (dup_entry(&d->entries[k], x->configs[k]->name, x->configs[k]->value,
                          x->configs[k]->config_source)) {
                rc = NOMEM();
                goto out;
            }
        }
    }
out:
    if (rc)
        kq_ctl_configs_desc_free(out);
    return rc;
}

void kq_ctl_features_desc_free(kq_ctl_features_desc *d)
{
    if (!d)
        return;
    for (int32_t i = 0; i < d->n_features; i++)
        free(d->features[i].name);
    free(d->features);
    memset(d, 0, sizeof *d);
    d->epoch = -1;
}

int kq_ctl_decode_describe_features_response(const kq_response *env, kq_ctl_features_desc *out,
                                             char *errbuf, size_t errlen)
{
    const Kq__Response *rs;
    const Kq__DescribeFeaturesResponse *w;

    if (!out)
        return BAD("no output");
    memset(out, 0, sizeof *out);
    out->epoch = -1;
    rs = body_of(env, KQ_API_DESCRIBE_FEATURES, KQ__RESPONSE__BODY_DESCRIBE_FEATURES,
                 "describe_features", errbuf, errlen);
    if (!rs)
        return KQ_ERR_INVALID_REQUEST;
    w = rs->describe_features;
    out->epoch = w->finalized_features_epoch;
    out->features = calloc(w->n_features ? w->n_features : 1, sizeof *out->features);
    if (!out->features)
        return NOMEM();
    for (size_t i = 0; i < w->n_features; i++) {
        const Kq__FeatureDescription *f = w->features[i];

        out->n_features = (int32_t)i + 1;
        if (f->supported_min_version < 0 || f->supported_min_version > INT16_MAX ||
            f->supported_max_version < 0 || f->supported_max_version > INT16_MAX ||
            f->finalized_version_level < 0 || f->finalized_version_level > INT16_MAX) {
            kq_ctl_features_desc_free(out);
            return BAD("describe_features feature %zu has a level outside 0..32767", i);
        }
        out->features[i].name = dupstr(f->name);
        if (!out->features[i].name) {
            kq_ctl_features_desc_free(out);
            return NOMEM();
        }
        out->features[i].min_version = (int16_t)f->supported_min_version;
        out->features[i].max_version = (int16_t)f->supported_max_version;
        out->features[i].finalized_level = (int16_t)f->finalized_version_level;
    }
    return 0;
}

void kq_ctl_item_results_free(kq_ctl_item_results *r)
{
    if (!r)
        return;
    for (int32_t i = 0; i < r->n; i++) {
        free(r->items[i].name);
        free(r->items[i].message);
    }
    free(r->items);
    memset(r, 0, sizeof *r);
}

/* Append one item; takes name/message as borrowed strings and copies them. */
static int push_item(kq_ctl_item_results *r, size_t cap, const char *name, const char *message,
                     int error, const ProtobufCBinaryData *id, bool has_id)
{
    kq_ctl_item_result *it;

    if ((size_t)r->n >= cap)
        return KQ_ERR_INVALID_REQUEST;
    it = &r->items[r->n++];
    it->partition = -1;
    it->num_partitions = -1;
    it->replication_factor = -1;
    it->error = error;
    it->name = strdup(name ? name : "");
    it->message = dupstr(message);
    if (!it->name || (message && !it->message))
        return KQ_ERR_NOMEM;
    if (has_id && id->len == 16) {
        it->has_id = true;
        memcpy(it->topic_id, id->data, 16);
    }
    return 0;
}

int kq_ctl_decode_item_results(const kq_response *env, kq_ctl_item_results *out, char *errbuf,
                               size_t errlen)
{
    const Kq__Response *rs;
    size_t cap = 0;
    int rc = 0;

    if (!out)
        return BAD("no output");
    memset(out, 0, sizeof *out);
    if (!env || !env->priv_)
        return BAD("no decoded response");
    rs = env->priv_;
    switch (rs->body_case) {
    case KQ__RESPONSE__BODY_CREATE_TOPICS:
        cap = rs->create_topics->n_topics;
        break;
    case KQ__RESPONSE__BODY_DELETE_TOPICS:
        cap = rs->delete_topics->n_topics;
        break;
    case KQ__RESPONSE__BODY_CREATE_PARTITIONS:
        cap = rs->create_partitions->n_topics;
        break;
    case KQ__RESPONSE__BODY_ELECT_LEADERS:
        for (size_t i = 0; i < rs->elect_leaders->n_results; i++)
            cap += rs->elect_leaders->results[i]->n_partitions;
        break;
    case KQ__RESPONSE__BODY_INCREMENTAL_ALTER_CONFIGS:
        cap = rs->incremental_alter_configs->n_responses;
        break;
    case KQ__RESPONSE__BODY_UPDATE_FEATURES:
        cap = rs->update_features->n_results;
        break;
    default:
        return BAD("response for api key %u has no per-item results", env->api_key);
    }
    if (cap > KQ_CTL_MAX_PARTITIONS)
        return BAD("response has %zu results (max %d)", cap, KQ_CTL_MAX_PARTITIONS);
    out->items = calloc(cap ? cap : 1, sizeof *out->items);
    if (!out->items)
        return NOMEM();
    switch (rs->body_case) {
    case KQ__RESPONSE__BODY_CREATE_TOPICS:
        for (size_t i = 0; i < cap && !rc; i++) {
            const Kq__CreatableTopicResult *t = rs->create_topics->topics[i];

            rc = push_item(out, cap, t->name, t->error_message, t->error_code, &t->topic_id,
                           t->has_topic_id);
            out->items[i].num_partitions = t->num_partitions;
            out->items[i].replication_factor = t->replication_factor;
        }
        break;
    case KQ__RESPONSE__BODY_DELETE_TOPICS:
        for (size_t i = 0; i < cap && !rc; i++) {
            const Kq__DeletableTopicResult *t = rs->delete_topics->topics[i];

            rc = push_item(out, cap, t->name, t->error_message, t->error_code, &t->topic_id,
                           t->has_topic_id);
        }
        break;
    case KQ__RESPONSE__BODY_CREATE_PARTITIONS:
        for (size_t i = 0; i < cap && !rc; i++) {
            const Kq__CtlResourceResult *t = rs->create_partitions->topics[i];

            rc = push_item(out, cap, t->name, t->error_message, t->error_code, NULL, false);
        }
        break;
    case KQ__RESPONSE__BODY_ELECT_LEADERS:
        for (size_t i = 0; i < rs->elect_leaders->n_results && !rc; i++) {
            const Kq__ElectTopicResult *t = rs->elect_leaders->results[i];

            for (size_t k = 0; k < t->n_partitions && !rc; k++) {
                rc = push_item(out, cap, t->topic, t->partitions[k]->error_message,
                               t->partitions[k]->error_code, &t->topic_id, t->has_topic_id);
                out->items[out->n - 1].partition = t->partitions[k]->partition_id;
            }
        }
        break;
    case KQ__RESPONSE__BODY_INCREMENTAL_ALTER_CONFIGS:
        for (size_t i = 0; i < cap && !rc; i++) {
            const Kq__AlterConfigsResourceResult *t = rs->incremental_alter_configs->responses[i];

            rc =
                push_item(out, cap, t->resource_name, t->error_message, t->error_code, NULL, false);
            out->items[i].resource_type = (int8_t)t->resource_type;
        }
        break;
    case KQ__RESPONSE__BODY_UPDATE_FEATURES:
        for (size_t i = 0; i < cap && !rc; i++) {
            const Kq__UpdatableFeatureResult *t = rs->update_features->results[i];

            rc = push_item(out, cap, t->feature, t->error_message, t->error_code, NULL, false);
        }
        break;
    default:
        break;
    }
    if (rc) {
        kq_ctl_item_results_free(out);
        return rc == KQ_ERR_NOMEM ? NOMEM() : BAD("inconsistent per-item results");
    }
    return 0;
}

int kq_ctl_decode_broker_registration_response(const kq_response *env, int64_t *broker_epoch,
                                               char *errbuf, size_t errlen)
{
    const Kq__Response *rs =
        body_of(env, KQ_API_BROKER_REGISTRATION, KQ__RESPONSE__BODY_BROKER_REGISTRATION,
                "broker_registration", errbuf, errlen);

    if (!rs || !broker_epoch)
        return KQ_ERR_INVALID_REQUEST;
    if (rs->broker_registration->broker_epoch < 0)
        return BAD("broker_registration response epoch %lld is negative",
                   (long long)rs->broker_registration->broker_epoch);
    *broker_epoch = rs->broker_registration->broker_epoch;
    return 0;
}

int kq_ctl_decode_broker_heartbeat_response(const kq_response *env, kq_heartbeat_result *out,
                                            char *errbuf, size_t errlen)
{
    const Kq__Response *rs =
        body_of(env, KQ_API_BROKER_HEARTBEAT, KQ__RESPONSE__BODY_BROKER_HEARTBEAT,
                "broker_heartbeat", errbuf, errlen);

    if (!rs || !out)
        return KQ_ERR_INVALID_REQUEST;
    memset(out, 0, sizeof *out);
    out->is_caught_up = rs->broker_heartbeat->is_caught_up;
    out->is_fenced = rs->broker_heartbeat->is_fenced;
    out->should_shutdown = rs->broker_heartbeat->should_shut_down;
    out->in_controlled_shutdown = rs->broker_heartbeat->has_in_controlled_shutdown &&
                                  rs->broker_heartbeat->in_controlled_shutdown;
    return 0;
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
    const Kq__Response *rs;
    const Kq__AlterPartitionResponse *w;
    size_t total = 0, k = 0;

    if (!out)
        return BAD("no output");
    memset(out, 0, sizeof *out);
    rs = body_of(env, KQ_API_ALTER_PARTITION, KQ__RESPONSE__BODY_ALTER_PARTITION, "alter_partition",
                 errbuf, errlen);
    if (!rs)
        return KQ_ERR_INVALID_REQUEST;
    w = rs->alter_partition;
    for (size_t i = 0; i < w->n_topics; i++)
        total += w->topics[i]->n_partitions;
    if (total > KQ_CTL_MAX_PARTITIONS)
        return BAD("alter_partition response has %zu partitions", total);
    out->results = calloc(total ? total : 1, sizeof *out->results);
    if (!out->results)
        return NOMEM();
    for (size_t i = 0; i < w->n_topics; i++) {
        for (size_t p = 0; p < w->topics[i]->n_partitions; p++, k++) {
            const Kq__AlterPartitionPartitionResult *x = w->topics[i]->partitions[p];
            kq_ap_result *r = &out->results[k];
            kq_ctl_ids ids = {0};

            out->n_results = (int32_t)k + 1;
            if (dup_ids(&ids, x->isr, x->n_isr, "alter_partition isr", errbuf, errlen)) {
                kq_ctl_alter_partition_response_free(out);
                return KQ_ERR_INVALID_REQUEST;
            }
            r->error = x->error_code;
            r->leader_id = x->leader_id;
            r->leader_epoch = x->leader_epoch;
            r->isr = ids.ids;
            r->n_isr = ids.n;
            r->leader_recovery_state = (int8_t)x->leader_recovery_state;
            r->partition_epoch = x->partition_epoch;
        }
    }
    return 0;
}
