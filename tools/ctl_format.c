/* Output of the controller metadata commands (topics, cluster, configs, features,
 * leader-election): Kafka's text formats (kraft-semantics.md 5, conventions.md 1.5) and JSON. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/util.h"
#include "kq_tools.h"

/* The partition's ISR against the topic's min.insync.replicas, by the brokers' own rule. */
static int min_isr_cmp(const kq_ctl_topic_desc *t, const kq_ctl_partition_desc *p)
{
    return kq_min_isr_cmp(p->isr.n, t->min_insync_replicas, p->replicas.n);
}

static bool broker_live(const kq_ctl_cluster_desc *c, int32_t id)
{
    if (!c)
        return true;
    for (int32_t i = 0; i < c->n_brokers; i++)
        if (c->brokers[i].id == id)
            return !c->brokers[i].fenced;
    return false;
}

bool kq_tools_partition_selected(const kq_ctl_topic_desc *t, const kq_ctl_partition_desc *p,
                                 kq_tools_topic_filter filter, const kq_ctl_cluster_desc *cluster)
{
    switch (filter) {
    case KQ_TOPIC_FILTER_UNDER_REPLICATED:
        return p->replicas.n - p->isr.n > 0;
    case KQ_TOPIC_FILTER_UNDER_MIN_ISR:
        return p->leader < 0 || min_isr_cmp(t, p) < 0;
    case KQ_TOPIC_FILTER_AT_MIN_ISR:
        return min_isr_cmp(t, p) == 0;
    case KQ_TOPIC_FILTER_UNAVAILABLE:
        return p->leader < 0 || !broker_live(cluster, p->leader);
    case KQ_TOPIC_FILTER_NONE:
    default:
        return true;
    }
}

/* Close the list and the top-level object that every --json document here is, and end the
 * line. */
/* Open the document every --json list here is: {"<list_key>":[ ... (json_end_doc closes it). */
static void json_begin_doc(kq_json *j, FILE *f, const char *list_key)
{
    kq_json_init(j, f);
    kq_json_begin_object(j);
    kq_json_key(j, list_key);
    kq_json_begin_array(j);
}

static void json_end_doc(kq_json *j)
{
    kq_json_end_array(j);
    kq_json_end_object(j);
    fputc('\n', j->f);
}

static void print_ids(FILE *f, const kq_ctl_ids *ids)
{
    for (int32_t i = 0; i < ids->n; i++)
        fprintf(f, "%s%d", i ? "," : "", ids->ids[i]);
}

static void json_ids(kq_json *j, const char *key, const kq_ctl_ids *ids)
{
    kq_json_key(j, key);
    kq_json_begin_array(j);
    for (int32_t i = 0; i < ids->n; i++)
        kq_json_int(j, ids->ids[i]);
    kq_json_end_array(j);
}

static int32_t replication_factor(const kq_ctl_topic_desc *t)
{
    return t->n_partitions > 0 ? t->partitions[0].replicas.n : 0;
}

static void topic_id_str(const kq_ctl_topic_desc *t, char out[KQ_UUID_STR_LEN + 1])
{
    static const uint8_t zero[16];

    kq_uuid_format(t->has_id ? t->topic_id : zero, out);
}

void kq_tools_print_topics(FILE *f, const kq_ctl_topics_desc *d, kq_tools_topic_filter filter,
                           const kq_ctl_cluster_desc *cluster, bool json)
{
    char id[KQ_UUID_STR_LEN + 1];
    kq_json j;

    if (json)
        json_begin_doc(&j, f, "topics");
    for (int32_t i = 0; i < d->n_topics; i++) {
        const kq_ctl_topic_desc *t = &d->topics[i];
        bool any = false;

        if (t->error)
            continue;
        topic_id_str(t, id);
        if (json) {
            for (int32_t k = 0; k < t->n_partitions; k++)
                any = any || kq_tools_partition_selected(t, &t->partitions[k], filter, cluster);
            if (filter != KQ_TOPIC_FILTER_NONE && !any)
                continue;
            kq_json_begin_object(&j);
            kq_json_key(&j, "name");
            kq_json_string(&j, t->name);
            kq_json_key(&j, "topicId");
            kq_json_string(&j, id);
            kq_json_key(&j, "partitionCount");
            kq_json_int(&j, t->n_partitions);
            kq_json_key(&j, "replicationFactor");
            kq_json_int(&j, replication_factor(t));
            kq_json_key(&j, "configs");
            kq_json_begin_object(&j);
            for (int32_t k = 0; k < t->n_configs; k++) {
                kq_json_key(&j, t->configs[k].name);
                kq_json_string(&j, t->configs[k].value);
            }
            kq_json_end_object(&j);
            kq_json_key(&j, "partitions");
            kq_json_begin_array(&j);
            for (int32_t k = 0; k < t->n_partitions; k++) {
                const kq_ctl_partition_desc *p = &t->partitions[k];

                if (!kq_tools_partition_selected(t, p, filter, cluster))
                    continue;
                kq_json_begin_object(&j);
                kq_json_key(&j, "partition");
                kq_json_int(&j, p->partition);
                kq_json_key(&j, "leader");
                if (p->leader < 0)
                    kq_json_null(&j);
                else
                    kq_json_int(&j, p->leader);
                kq_json_key(&j, "leaderEpoch");
                kq_json_int(&j, p->leader_epoch);
                kq_json_key(&j, "partitionEpoch");
                kq_json_int(&j, p->partition_epoch);
                json_ids(&j, "replicas", &p->replicas);
                json_ids(&j, "isr", &p->isr);
                json_ids(&j, "elr", &p->elr);
                json_ids(&j, "lastKnownElr", &p->last_known_elr);
                kq_json_key(&j, "leaderRecoveryState");
                kq_json_string(&j, p->leader_recovery_state == KQ_RECOVERY_RECOVERING
                                       ? "RECOVERING"
                                       : "RECOVERED");
                kq_json_end_object(&j);
            }
            kq_json_end_array(&j);
            kq_json_end_object(&j);
            continue;
        }
        if (filter == KQ_TOPIC_FILTER_NONE) {
            fprintf(f,
                    "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: ",
                    t->name, id, t->n_partitions, replication_factor(t));
            for (int32_t k = 0; k < t->n_configs; k++)
                fprintf(f, "%s%s=%s", k ? "," : "", t->configs[k].name,
                        t->configs[k].value ? t->configs[k].value : "");
            fputc('\n', f);
        }
        for (int32_t k = 0; k < t->n_partitions; k++) {
            const kq_ctl_partition_desc *p = &t->partitions[k];

            if (!kq_tools_partition_selected(t, p, filter, cluster))
                continue;
            fprintf(f, "\tTopic: %s\tPartition: %d\tLeader: ", t->name, p->partition);
            if (p->leader < 0)
                fputs("none", f);
            else
                fprintf(f, "%d", p->leader);
            fputs("\tReplicas: ", f);
            print_ids(f, &p->replicas);
            fputs("\tIsr: ", f);
            print_ids(f, &p->isr);
            fputs("\tElr: ", f);
            print_ids(f, &p->elr);
            fputs("\tLastKnownElr: ", f);
            print_ids(f, &p->last_known_elr);
            fputc('\n', f);
        }
    }
    if (json)
        json_end_doc(&j);
}

void kq_tools_print_topic_list(FILE *f, const kq_ctl_topics_desc *d, bool json)
{
    kq_json j;

    if (json)
        json_begin_doc(&j, f, "topics");
    /* The controller answers sorted by name. */
    for (int32_t i = 0; i < d->n_topics; i++) {
        if (d->topics[i].error)
            continue;
        if (json)
            kq_json_string(&j, d->topics[i].name);
        else
            fprintf(f, "%s\n", d->topics[i].name);
    }
    if (json) {
        kq_json_end_array(&j);
        kq_json_end_object(&j);
        fputc('\n', f);
    }
}

/* "NAME://HOST:PORT" ("[HOST]" for an IPv6 literal) into buf; returns buf. */
static const char *endpoint_str(const kq_rec_endpoint *e, char *buf, size_t len)
{
    bool v6 = strchr(e->host, ':') != NULL;

    snprintf(buf, len, "%s://%s%s%s:%d", e->name, v6 ? "[" : "", e->host, v6 ? "]" : "", e->port);
    return buf;
}

void kq_tools_print_cluster(FILE *f, const kq_ctl_cluster_desc *d, bool json)
{
    char ep[600];
    kq_json j;

    if (json)
        json_begin_doc(&j, f, "brokers");
    for (int32_t i = 0; i < d->n_brokers; i++) {
        const kq_broker *b = &d->brokers[i];

        if (json) {
            kq_json_begin_object(&j);
            kq_json_key(&j, "id");
            kq_json_int(&j, b->id);
            kq_json_key(&j, "epoch");
            kq_json_int(&j, b->epoch);
            kq_json_key(&j, "fenced");
            kq_json_bool(&j, b->fenced);
            kq_json_key(&j, "inControlledShutdown");
            kq_json_bool(&j, b->in_controlled_shutdown);
            kq_json_key(&j, "rack");
            kq_json_string(&j, b->rack);
            kq_json_key(&j, "endpoints");
            kq_json_begin_array(&j);
            for (int32_t k = 0; k < b->n_endpoints; k++)
                kq_json_string(&j, endpoint_str(&b->endpoints[k], ep, sizeof ep));
            kq_json_end_array(&j);
            kq_json_end_object(&j);
            continue;
        }
        fprintf(f,
                "Broker: %d\tEpoch: %lld\tFenced: %s\tInControlledShutdown: %s\tRack: %s\t"
                "Endpoints: ",
                b->id, (long long)b->epoch, b->fenced ? "true" : "false",
                b->in_controlled_shutdown ? "true" : "false", b->rack ? b->rack : "none");
        for (int32_t k = 0; k < b->n_endpoints; k++)
            fprintf(f, "%s%s", k ? "," : "", endpoint_str(&b->endpoints[k], ep, sizeof ep));
        fputc('\n', f);
    }
    if (json)
        json_end_doc(&j);
}

static const char *source_name(int s)
{
    switch (s) {
    case KQ_CONFIG_SOURCE_DYNAMIC_TOPIC:
        return "DYNAMIC_TOPIC_CONFIG";
    case KQ_CONFIG_SOURCE_DYNAMIC_BROKER:
        return "DYNAMIC_BROKER_CONFIG";
    case KQ_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER:
        return "DYNAMIC_DEFAULT_BROKER_CONFIG";
    case KQ_CONFIG_SOURCE_STATIC_BROKER:
        return "STATIC_BROKER_CONFIG";
    case KQ_CONFIG_SOURCE_DEFAULT:
        return "DEFAULT_CONFIG";
    default:
        return "UNKNOWN";
    }
}

/* The source that counts as "dynamic" for this resource (what --describe shows without --all). */
static bool is_dynamic(const kq_ctl_config_result *r, int source)
{
    if (r->resource_type == KQ_CONFIG_RESOURCE_TOPIC)
        return source == KQ_CONFIG_SOURCE_DYNAMIC_TOPIC;
    if (r->resource_name[0])
        return source == KQ_CONFIG_SOURCE_DYNAMIC_BROKER;
    return source == KQ_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER;
}

void kq_tools_print_configs(FILE *f, const kq_ctl_config_result *r, bool all, bool json)
{
    const char *what = r->resource_type == KQ_CONFIG_RESOURCE_TOPIC ? "topic" : "broker";
    kq_json j;

    if (json) {
        kq_json_init(&j, f);
        kq_json_begin_object(&j);
        kq_json_key(&j, "entityType");
        kq_json_string(&j, r->resource_type == KQ_CONFIG_RESOURCE_TOPIC ? "topics" : "brokers");
        kq_json_key(&j, "entityName");
        kq_json_string(&j, r->resource_name[0] ? r->resource_name : NULL);
        kq_json_key(&j, "configs");
        kq_json_begin_array(&j);
    } else if (r->resource_type == KQ_CONFIG_RESOURCE_BROKER && !r->resource_name[0]) {
        fprintf(f, "%s configs for brokers in the cluster are:\n", all ? "All default" : "Default");
    } else {
        fprintf(f, "%s configs for %s %s are:\n", all ? "All" : "Dynamic", what, r->resource_name);
    }
    for (int32_t i = 0; i < r->n_entries; i++) {
        const kq_ctl_config_entry *e = &r->entries[i];
        const char *v = e->value ? e->value : "null";

        if (!all && !is_dynamic(r, e->source))
            continue;
        if (json) {
            kq_json_begin_object(&j);
            kq_json_key(&j, "name");
            kq_json_string(&j, e->name);
            kq_json_key(&j, "value");
            kq_json_string(&j, e->value);
            kq_json_key(&j, "source");
            kq_json_string(&j, source_name(e->source));
            kq_json_end_object(&j);
            continue;
        }
        fprintf(f, "  %s=%s sensitive=false synonyms={%s:%s=%s}\n", e->name, v,
                source_name(e->source), e->name, v);
    }
    if (json)
        json_end_doc(&j);
}

const char *kq_tools_metadata_version_name(int level)
{
    static const char *const names[] = {
        NULL,      "3.0-IV1", "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1", "3.3-IV2",
        "3.3-IV3", "3.4-IV0", "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1",
        "3.6-IV2", "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0",
        "3.9-IV0", "4.0-IV0", "4.0-IV1", "4.0-IV2", "4.0-IV3",
    };

    if (level <= 0 || (size_t)level >= sizeof names / sizeof names[0])
        return NULL;
    return names[level];
}

static void print_level(FILE *f, const char *feature, int v)
{
    const char *n =
        strcmp(feature, "metadata.version") == 0 ? kq_tools_metadata_version_name(v) : NULL;

    if (n)
        fputs(n, f);
    else
        fprintf(f, "%d", v);
}

void kq_tools_print_features(FILE *f, const kq_ctl_features_desc *d, bool json)
{
    kq_json j;

    if (json) {
        kq_json_init(&j, f);
        kq_json_begin_object(&j);
        kq_json_key(&j, "epoch");
        if (d->epoch >= 0)
            kq_json_int(&j, d->epoch);
        else
            kq_json_null(&j);
        kq_json_key(&j, "features");
        kq_json_begin_array(&j);
    }
    for (int32_t i = 0; i < d->n_features; i++) {
        const kq_ctl_feature_desc *x = &d->features[i];

        if (json) {
            kq_json_begin_object(&j);
            kq_json_key(&j, "name");
            kq_json_string(&j, x->name);
            kq_json_key(&j, "supportedMinVersion");
            kq_json_int(&j, x->min_version);
            kq_json_key(&j, "supportedMaxVersion");
            kq_json_int(&j, x->max_version);
            kq_json_key(&j, "finalizedVersionLevel");
            kq_json_int(&j, x->finalized_level);
            kq_json_end_object(&j);
            continue;
        }
        fprintf(f, "Feature: %s\tSupportedMinVersion: ", x->name);
        print_level(f, x->name, x->min_version);
        fputs("\tSupportedMaxVersion: ", f);
        print_level(f, x->name, x->max_version);
        fputs("\tFinalizedVersionLevel: ", f);
        print_level(f, x->name, x->finalized_level);
        if (d->epoch >= 0)
            fprintf(f, "\tEpoch: %lld\n", (long long)d->epoch);
        else
            fputs("\tEpoch: -\n", f);
    }
    if (json)
        json_end_doc(&j);
}

/* ", "-separated "t-p" list of items whose error matches (want_ok: error 0). */
static int print_list(FILE *f, const kq_ctl_item_results *r, int error)
{
    int n = 0;

    for (int32_t i = 0; i < r->n; i++) {
        if (r->items[i].error != error)
            continue;
        fprintf(f, "%s%s-%d", n ? ", " : "", r->items[i].name, r->items[i].partition);
        n++;
    }
    return n;
}

static int count_err(const kq_ctl_item_results *r, int error)
{
    int n = 0;

    for (int32_t i = 0; i < r->n; i++)
        n += r->items[i].error == error;
    return n;
}

bool kq_tools_topic_created(const kq_ctl_item_result *it, const uint8_t sent_id[16])
{
    if (it->error == KQ_ERR_NONE)
        return true;
    return it->error == KQ_ERR_TOPIC_ALREADY_EXISTS && it->has_id && !kq_uuid_is_zero(sent_id) &&
           memcmp(it->topic_id, sent_id, 16) == 0;
}

int kq_tools_print_election(FILE *f, const kq_ctl_item_results *r, const char *type)
{
    int failed = 0;

    if (count_err(r, 0)) {
        fprintf(f, "Successfully completed leader election (%s) for partitions ", type);
        print_list(f, r, 0);
        fputc('\n', f);
    }
    if (count_err(r, KQ_ERR_ELECTION_NOT_NEEDED)) {
        fputs("Valid replica already elected for partitions ", f);
        print_list(f, r, KQ_ERR_ELECTION_NOT_NEEDED);
        fputc('\n', f);
    }
    for (int32_t i = 0; i < r->n; i++) {
        const kq_ctl_item_result *it = &r->items[i];

        if (it->error == 0 || it->error == KQ_ERR_ELECTION_NOT_NEEDED)
            continue;
        fprintf(f, "Error completing leader election (%s) for partition: %s-%d: %s: %s\n", type,
                it->name, it->partition, kq_err_name(it->error),
                it->message ? it->message : kq_err_message(it->error));
        failed++;
    }
    return failed;
}

int kq_tools_parse_replica_assignment(const char *s, int32_t **ids, int32_t *n_partitions,
                                      int32_t *rf, char *errbuf, size_t errlen)
{
    int32_t *v = NULL, np = 0, width = -1, cur = 0;
    size_t cap = 0, n = 0;
    const char *p = s;
    int rc = KQ_ERR_CONFIG;

    *ids = NULL;
    *n_partitions = 0;
    *rf = 0;
    if (!s || !*s) {
        snprintf(errbuf, errlen, "--replica-assignment is empty");
        return KQ_ERR_CONFIG;
    }
    for (;;) {
        char *end;
        long id;

        errno = 0;
        id = strtol(p, &end, 10);
        if (end == p || errno || id < 0 || id > INT32_MAX || (*end && *end != ':' && *end != ',')) {
            snprintf(errbuf, errlen,
                     "--replica-assignment: partition %d has a bad broker id "
                     "near '%.20s'",
                     np, p);
            goto out;
        }
        for (int32_t k = 0; k < cur; k++)
            if (v[n - 1 - (size_t)k] == (int32_t)id) {
                snprintf(errbuf, errlen,
                         "--replica-assignment: partition %d lists broker %ld "
                         "twice",
                         np, id);
                goto out;
            }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            int32_t *nv = realloc(v, nc * sizeof *nv);

            if (!nv) {
                snprintf(errbuf, errlen, "out of memory");
                rc = KQ_ERR_NOMEM;
                goto out;
            }
            v = nv;
            cap = nc;
        }
        v[n++] = (int32_t)id;
        cur++;
        if (*end == ':') {
            p = end + 1;
            continue;
        }
        /* end of a partition */
        if (width >= 0 && cur != width) {
            snprintf(errbuf, errlen,
                     "--replica-assignment: partition %d has %d replicas, "
                     "partition 0 has %d",
                     np, cur, width);
            goto out;
        }
        width = cur;
        cur = 0;
        np++;
        if (!*end)
            break;
        p = end + 1;
    }
    *ids = v;
    *n_partitions = np;
    *rf = width;
    return 0;
out:
    free(v);
    return rc;
}

void kq_tools_acl_resource(const kq_acl *a, char *buf, size_t cap)
{
    char type[32], pattern[32];

    kq_acl_enum_name(kq_acl_resource_type_name(a->resource_type), type, sizeof type);
    kq_acl_enum_name(kq_acl_pattern_type_name(a->pattern_type), pattern, sizeof pattern);
    snprintf(buf, cap, "ResourcePattern(resourceType=%s, name=%s, patternType=%s)", type,
             a->resource_name ? a->resource_name : "", pattern);
}

static bool same_resource(const kq_acl *a, const kq_acl *b)
{
    return a->resource_type == b->resource_type && a->pattern_type == b->pattern_type &&
           !strcmp(a->resource_name ? a->resource_name : "",
                   b->resource_name ? b->resource_name : "");
}

void kq_tools_print_acl_blocks(FILE *f, const char *verb, const kq_acl *acls, int32_t n)
{
    char buf[1024];

    for (int32_t i = 0; i < n; i++) {
        bool first = i == 0 || !same_resource(&acls[i], &acls[i - 1]);
        bool last = i == n - 1 || !same_resource(&acls[i], &acls[i + 1]);

        if (first) {
            kq_tools_acl_resource(&acls[i], buf, sizeof buf);
            fprintf(f, "%s for resource `%s`: \n ", verb, buf);
        }
        kq_acl_entry_format(&acls[i], buf, sizeof buf);
        fprintf(f, "\t%s%s", buf, last ? " \n\n" : "\n");
    }
}

void kq_tools_print_acls(FILE *f, const kq_acl *acls, int32_t n, bool json)
{
    char buf[64];
    kq_json j;

    if (!json) {
        kq_tools_print_acl_blocks(f, "Current ACLs", acls, n);
        return;
    }
    json_begin_doc(&j, f, "acls");
    for (int32_t i = 0; i < n; i++) {
        const kq_acl *a = &acls[i];
        const char *keys[] = {"resourceType", "patternType", "operation", "permissionType"};
        const char *names[] = {
            kq_acl_resource_type_name(a->resource_type), kq_acl_pattern_type_name(a->pattern_type),
            kq_acl_operation_name(a->operation), kq_acl_permission_name(a->permission)};

        kq_json_begin_object(&j);
        kq_json_key(&j, "resourceName");
        kq_json_string(&j, a->resource_name ? a->resource_name : "");
        kq_json_key(&j, "principal");
        kq_json_string(&j, a->principal ? a->principal : "");
        kq_json_key(&j, "host");
        kq_json_string(&j, a->host ? a->host : "");
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            kq_acl_enum_name(names[k], buf, sizeof buf);
            kq_json_key(&j, keys[k]);
            kq_json_string(&j, buf);
        }
        kq_json_end_object(&j);
    }
    json_end_doc(&j);
}
