/*
 * Metadata records as plain structs: validation, deep copy and free (pure; see
 * include/kq/records.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/util.h"
#include "kq/error.h"
#include "kq/records.h"

const char *kq_rec_type_name(kq_rec_type t)
{
    switch (t) {
    case KQ_REC_LEADER_CHANGE:
        return "LeaderChange";
    case KQ_REC_NOOP:
        return "NoOp";
    case KQ_REC_OPAQUE:
        return "Opaque";
    case KQ_REC_KRAFT_VERSION:
        return "KRaftVersion";
    case KQ_REC_VOTERS:
        return "Voters";
    case KQ_REC_REGISTER_BROKER:
        return "RegisterBroker";
    case KQ_REC_UNREGISTER_BROKER:
        return "UnregisterBroker";
    case KQ_REC_BROKER_REGISTRATION_CHANGE:
        return "BrokerRegistrationChange";
    case KQ_REC_TOPIC:
        return "Topic";
    case KQ_REC_PARTITION:
        return "Partition";
    case KQ_REC_PARTITION_CHANGE:
        return "PartitionChange";
    case KQ_REC_REMOVE_TOPIC:
        return "RemoveTopic";
    case KQ_REC_CONFIG:
        return "Config";
    case KQ_REC_FEATURE_LEVEL:
        return "FeatureLevel";
    case KQ_REC_ACL:
        return "AccessControlEntry";
    case KQ_REC_REMOVE_ACL:
        return "RemoveAccessControlEntry";
    default:
        return "Unknown";
    }
}

static int fail(char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (errbuf && errlen) {
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return KQ_ERR_INVALID_REQUEST;
}

/* Check a string: non-NULL (unless may_be_null), length <= max, non-empty if required. */
static int check_str(const char *s, size_t max, bool nonempty, const char *what, char *errbuf,
                     size_t errlen)
{
    size_t n;

    if (!s)
        return fail(errbuf, errlen, "%s is missing", what);
    n = strnlen(s, max + 1);
    if (n > max)
        return fail(errbuf, errlen, "%s is longer than %zu bytes", what, max);
    if (nonempty && n == 0)
        return fail(errbuf, errlen, "%s is empty", what);
    return 0;
}

/* Ids >= 0 (or -1 if allowed), at most KQ_REC_MAX_REPLICAS, no duplicates. */
static int check_ids(const kq_rec_ids *l, const char *what, char *errbuf, size_t errlen)
{
    if (l->n < 0 || l->n > KQ_REC_MAX_REPLICAS)
        return fail(errbuf, errlen, "%s has %d entries (allowed 0..%d)", what, (int)l->n,
                    KQ_REC_MAX_REPLICAS);
    if (l->n > 0 && !l->ids)
        return fail(errbuf, errlen, "%s has %d entries but no array", what, (int)l->n);
    for (int32_t i = 0; i < l->n; i++) {
        if (l->ids[i] < 0)
            return fail(errbuf, errlen, "%s holds invalid broker id %d", what, (int)l->ids[i]);
        for (int32_t j = 0; j < i; j++)
            if (l->ids[j] == l->ids[i])
                return fail(errbuf, errlen, "%s holds broker %d twice", what, (int)l->ids[i]);
    }
    return 0;
}

static bool ids_contain(const kq_rec_ids *l, int32_t id)
{
    for (int32_t i = 0; i < l->n; i++)
        if (l->ids[i] == id)
            return true;
    return false;
}

static int check_subset(const kq_rec_ids *sub, const kq_rec_ids *replicas, const char *what,
                        char *errbuf, size_t errlen)
{
    for (int32_t i = 0; i < sub->n; i++)
        if (!ids_contain(replicas, sub->ids[i]))
            return fail(errbuf, errlen, "%s member %d is not a replica", what, (int)sub->ids[i]);
    return 0;
}

static int validate_partition(const kq_rec_partition *p, char *errbuf, size_t errlen)
{
    int rc;

    if (p->partition_id < 0)
        return fail(errbuf, errlen, "Partition: invalid partition id %d", (int)p->partition_id);
    if (kq_uuid_is_zero(p->topic_id))
        return fail(errbuf, errlen, "Partition: topic id is zero");
    if ((rc = check_ids(&p->replicas, "Partition replicas", errbuf, errlen)) ||
        (rc = check_ids(&p->isr, "Partition isr", errbuf, errlen)) ||
        (rc = check_ids(&p->elr, "Partition elr", errbuf, errlen)) ||
        (rc = check_ids(&p->last_known_elr, "Partition last_known_elr", errbuf, errlen)))
        return rc;
    if (p->replicas.n == 0)
        return fail(errbuf, errlen, "Partition: no replicas");
    if ((rc = check_subset(&p->isr, &p->replicas, "Partition isr", errbuf, errlen)) ||
        (rc = check_subset(&p->elr, &p->replicas, "Partition elr", errbuf, errlen)) ||
        (rc = check_subset(&p->last_known_elr, &p->replicas, "Partition last_known_elr", errbuf,
                           errlen)))
        return rc;
    if (p->leader != KQ_NO_LEADER && (p->leader < 0 || !ids_contain(&p->replicas, p->leader)))
        return fail(errbuf, errlen, "Partition: leader %d is not a replica", (int)p->leader);
    if (p->leader_recovery_state != KQ_RECOVERY_RECOVERED &&
        p->leader_recovery_state != KQ_RECOVERY_RECOVERING)
        return fail(errbuf, errlen, "Partition: invalid leader recovery state %d",
                    (int)p->leader_recovery_state);
    if (p->leader_epoch < 0 || p->partition_epoch < 0)
        return fail(errbuf, errlen, "Partition: negative epoch (leader %d, partition %d)",
                    (int)p->leader_epoch, (int)p->partition_epoch);
    return 0;
}

static int validate_partition_change(const kq_rec_partition_change *c, char *errbuf, size_t errlen)
{
    int rc;

    if (c->partition_id < 0)
        return fail(errbuf, errlen, "PartitionChange: invalid partition id %d",
                    (int)c->partition_id);
    if (kq_uuid_is_zero(c->topic_id))
        return fail(errbuf, errlen, "PartitionChange: topic id is zero");
    if ((c->has_replicas &&
         (rc = check_ids(&c->replicas, "PartitionChange replicas", errbuf, errlen))) ||
        (c->has_isr && (rc = check_ids(&c->isr, "PartitionChange isr", errbuf, errlen))) ||
        (c->has_elr && (rc = check_ids(&c->elr, "PartitionChange elr", errbuf, errlen))) ||
        (c->has_last_known_elr &&
         (rc = check_ids(&c->last_known_elr, "PartitionChange last_known_elr", errbuf, errlen))))
        return rc;
    if (c->has_replicas && c->replicas.n == 0)
        return fail(errbuf, errlen, "PartitionChange: empty replicas");
    if (c->leader < KQ_LEADER_UNCHANGED)
        return fail(errbuf, errlen, "PartitionChange: invalid leader %d", (int)c->leader);
    if (c->leader_recovery_state < KQ_RECOVERY_UNCHANGED ||
        c->leader_recovery_state > KQ_RECOVERY_RECOVERING)
        return fail(errbuf, errlen, "PartitionChange: invalid leader recovery state %d",
                    (int)c->leader_recovery_state);
    return 0;
}

static int validate_config(const kq_rec_config *c, char *errbuf, size_t errlen)
{
    int rc;

    if (c->resource_type != KQ_CONFIG_RESOURCE_TOPIC &&
        c->resource_type != KQ_CONFIG_RESOURCE_BROKER)
        return fail(errbuf, errlen, "Config: invalid resource type %d (2 topic, 4 broker)",
                    (int)c->resource_type);
    if ((rc = check_str(c->resource_name, KQ_REC_MAX_NAME, false, "Config resource name", errbuf,
                        errlen)) ||
        (rc = check_str(c->name, KQ_REC_MAX_NAME, true, "Config name", errbuf, errlen)))
        return rc;
    if (c->value &&
        (rc = check_str(c->value, KQ_REC_MAX_CONFIG_VALUE, false, "Config value", errbuf, errlen)))
        return rc;
    if (c->resource_type == KQ_CONFIG_RESOURCE_TOPIC && c->resource_name[0] &&
        !kq_topic_name_valid(c->resource_name))
        return fail(errbuf, errlen, "Config: invalid topic name \"%.64s\"", c->resource_name);
    if (c->resource_type == KQ_CONFIG_RESOURCE_BROKER && c->resource_name[0]) {
        const char *s = c->resource_name;
        size_t n = strlen(s);

        if (n > 10 || strspn(s, "0123456789") != n || strtoll(s, NULL, 10) > INT32_MAX)
            return fail(errbuf, errlen, "Config: broker resource \"%.64s\" is not a broker id", s);
    }
    return 0;
}

/* A VotersRecord: a voter set that can be in force (kq_voters_check) whose every voter has a
 * directory id and an endpoint (KIP-853 voters are keyed by both). */
static int validate_voters(const kq_rec_voters *r, char *errbuf, size_t errlen)
{
    static const uint8_t zero[16];
    kq_voter_set set;
    int rc;

    if (r->n_voters < 1 || r->n_voters > KQ_RAFT_MAX_VOTERS || !r->voters)
        return fail(errbuf, errlen, "Voters: %d voters (allowed 1..%d)", (int)r->n_voters,
                    KQ_RAFT_MAX_VOTERS);
    set.n = (int)r->n_voters;
    memcpy(set.v, r->voters, (size_t)set.n * sizeof set.v[0]);
    if ((rc = kq_voters_check(&set, errbuf, errlen)))
        return rc;
    for (int i = 0; i < set.n; i++) {
        const kq_voter *v = &set.v[i];

        if (!memcmp(v->key.dir, zero, sizeof zero))
            return fail(errbuf, errlen, "Voters: voter %d has no directory id", (int)v->key.id);
        if (!v->host[0] || v->port <= 0)
            return fail(errbuf, errlen, "Voters: voter %d has no endpoint", (int)v->key.id);
    }
    return 0;
}

static int validate_register(const kq_rec_register_broker *b, char *errbuf, size_t errlen)
{
    int rc;

    if (b->broker_id < 0)
        return fail(errbuf, errlen, "RegisterBroker: invalid broker id %d", (int)b->broker_id);
    if (b->broker_epoch < 0)
        return fail(errbuf, errlen, "RegisterBroker: negative broker epoch %lld",
                    (long long)b->broker_epoch);
    if (b->registration_offset < -1)
        return fail(errbuf, errlen, "RegisterBroker: invalid registration offset %lld",
                    (long long)b->registration_offset);
    if (b->n_endpoints < 0 || b->n_endpoints > KQ_REC_MAX_ENDPOINTS ||
        (b->n_endpoints > 0 && !b->endpoints))
        return fail(errbuf, errlen, "RegisterBroker: %d endpoints (allowed 0..%d)",
                    (int)b->n_endpoints, KQ_REC_MAX_ENDPOINTS);
    for (int32_t i = 0; i < b->n_endpoints; i++) {
        const kq_rec_endpoint *e = &b->endpoints[i];

        if ((rc = check_str(e->name, KQ_REC_MAX_NAME, true, "RegisterBroker endpoint name", errbuf,
                            errlen)) ||
            (rc = check_str(e->host, KQ_REC_MAX_NAME, true, "RegisterBroker endpoint host", errbuf,
                            errlen)))
            return rc;
        if (e->port < 0 || e->port > 65535)
            return fail(errbuf, errlen, "RegisterBroker: endpoint port %d out of range",
                        (int)e->port);
        for (int32_t j = 0; j < i; j++)
            if (!strcmp(b->endpoints[j].name, e->name))
                return fail(errbuf, errlen, "RegisterBroker: endpoint \"%.64s\" listed twice",
                            e->name);
    }
    if (b->rack &&
        (rc = check_str(b->rack, KQ_REC_MAX_NAME, false, "RegisterBroker rack", errbuf, errlen)))
        return rc;
    return 0;
}

int kq_record_validate(const kq_record *r, char *errbuf, size_t errlen)
{
    int rc;

    if (!r)
        return fail(errbuf, errlen, "no record");
    switch (r->type) {
    case KQ_REC_NOOP:
        return 0;
    case KQ_REC_OPAQUE:
        if (r->opaque.len > KQ_REC_MAX_OPAQUE || (r->opaque.len && !r->opaque.data))
            return fail(errbuf, errlen, "Opaque: invalid payload of %zu bytes", r->opaque.len);
        return 0;
    case KQ_REC_KRAFT_VERSION:
        if (r->kraft_version.version != 0 || r->kraft_version.kraft_version < 0 ||
            r->kraft_version.kraft_version > 1)
            return fail(errbuf, errlen, "KRaftVersion: invalid kraft.version %d (version %d)",
                        (int)r->kraft_version.kraft_version, (int)r->kraft_version.version);
        return 0;
    case KQ_REC_VOTERS:
        if (r->voters.version != 0)
            return fail(errbuf, errlen, "Voters: unknown record version %d",
                        (int)r->voters.version);
        return validate_voters(&r->voters, errbuf, errlen);
    case KQ_REC_LEADER_CHANGE:
        if (r->leader_change.leader_id < -1)
            return fail(errbuf, errlen, "LeaderChange: invalid leader id %d",
                        (int)r->leader_change.leader_id);
        if ((rc = check_ids(&r->leader_change.voters, "LeaderChange voters", errbuf, errlen)))
            return rc;
        return check_ids(&r->leader_change.granting_voters, "LeaderChange granting voters", errbuf,
                         errlen);
    case KQ_REC_REGISTER_BROKER:
        return validate_register(&r->register_broker, errbuf, errlen);
    case KQ_REC_UNREGISTER_BROKER:
        if (r->unregister_broker.broker_id < 0 || r->unregister_broker.broker_epoch < 0)
            return fail(errbuf, errlen, "UnregisterBroker: invalid broker id %d or epoch %lld",
                        (int)r->unregister_broker.broker_id,
                        (long long)r->unregister_broker.broker_epoch);
        return 0;
    case KQ_REC_BROKER_REGISTRATION_CHANGE: {
        const kq_rec_broker_change *c = &r->broker_change;

        if (c->broker_id < 0 || c->broker_epoch < 0)
            return fail(errbuf, errlen,
                        "BrokerRegistrationChange: invalid broker id %d or epoch %lld",
                        (int)c->broker_id, (long long)c->broker_epoch);
        if (c->fenced < -1 || c->fenced > 1)
            return fail(errbuf, errlen, "BrokerRegistrationChange: invalid fenced %d",
                        (int)c->fenced);
        if (c->in_controlled_shutdown < 0 || c->in_controlled_shutdown > 1)
            return fail(errbuf, errlen,
                        "BrokerRegistrationChange: invalid in_controlled_shutdown %d",
                        (int)c->in_controlled_shutdown);
        return 0;
    }
    case KQ_REC_TOPIC:
        if (!kq_topic_name_valid(r->topic.name))
            return fail(errbuf, errlen,
                        "Topic: invalid topic name \"%.64s\" (allowed [a-zA-Z0-9._-]{1,249}, "
                        "not \".\" or \"..\")",
                        r->topic.name ? r->topic.name : "(null)");
        if (kq_uuid_is_zero(r->topic.topic_id))
            return fail(errbuf, errlen, "Topic: topic id is zero");
        return 0;
    case KQ_REC_PARTITION:
        return validate_partition(&r->partition, errbuf, errlen);
    case KQ_REC_PARTITION_CHANGE:
        return validate_partition_change(&r->partition_change, errbuf, errlen);
    case KQ_REC_REMOVE_TOPIC:
        if (kq_uuid_is_zero(r->remove_topic.topic_id))
            return fail(errbuf, errlen, "RemoveTopic: topic id is zero");
        return 0;
    case KQ_REC_CONFIG:
        return validate_config(&r->config, errbuf, errlen);
    case KQ_REC_FEATURE_LEVEL:
        if ((rc = check_str(r->feature_level.name, KQ_REC_MAX_NAME, true, "FeatureLevel name",
                            errbuf, errlen)))
            return rc;
        if (r->feature_level.level < 0)
            return fail(errbuf, errlen, "FeatureLevel: negative level %d",
                        (int)r->feature_level.level);
        return 0;
    case KQ_REC_ACL: {
        char why[512];

        if (kq_uuid_is_zero(r->acl.id))
            return fail(errbuf, errlen, "AccessControlEntry: id is zero");
        if ((rc = check_str(r->acl.resource_name, KQ_REC_MAX_NAME, false,
                            "AccessControlEntry resource name", errbuf, errlen)) ||
            (rc = check_str(r->acl.principal, KQ_REC_MAX_NAME, true, "AccessControlEntry principal",
                            errbuf, errlen)) ||
            (rc = check_str(r->acl.host, KQ_REC_MAX_NAME, true, "AccessControlEntry host", errbuf,
                            errlen)))
            return rc;
        if (kq_acl_binding_check(&r->acl, why, sizeof why))
            return fail(errbuf, errlen, "AccessControlEntry: %s", why);
        return 0;
    }
    case KQ_REC_REMOVE_ACL:
        if (kq_uuid_is_zero(r->remove_acl.id))
            return fail(errbuf, errlen, "RemoveAccessControlEntry: id is zero");
        return 0;
    default:
        return fail(errbuf, errlen, "unknown record type %d", (int)r->type);
    }
}

static void free_ids(kq_rec_ids *l)
{
    free(l->ids);
    l->ids = NULL;
    l->n = 0;
}

void kq_record_free(kq_record *r)
{
    if (!r)
        return;
    switch (r->type) {
    case KQ_REC_OPAQUE:
        free(r->opaque.data);
        break;
    case KQ_REC_VOTERS:
        free(r->voters.voters);
        break;
    case KQ_REC_LEADER_CHANGE:
        free_ids(&r->leader_change.voters);
        free_ids(&r->leader_change.granting_voters);
        break;
    case KQ_REC_REGISTER_BROKER:
        for (int32_t i = 0; i < r->register_broker.n_endpoints && r->register_broker.endpoints;
             i++) {
            free(r->register_broker.endpoints[i].name);
            free(r->register_broker.endpoints[i].host);
        }
        free(r->register_broker.endpoints);
        free(r->register_broker.rack);
        break;
    case KQ_REC_TOPIC:
        free(r->topic.name);
        break;
    case KQ_REC_PARTITION:
        free_ids(&r->partition.replicas);
        free_ids(&r->partition.isr);
        free_ids(&r->partition.elr);
        free_ids(&r->partition.last_known_elr);
        break;
    case KQ_REC_PARTITION_CHANGE:
        free_ids(&r->partition_change.replicas);
        free_ids(&r->partition_change.isr);
        free_ids(&r->partition_change.elr);
        free_ids(&r->partition_change.last_known_elr);
        break;
    case KQ_REC_CONFIG:
        free(r->config.resource_name);
        free(r->config.name);
        free(r->config.value);
        break;
    case KQ_REC_FEATURE_LEVEL:
        free(r->feature_level.name);
        break;
    case KQ_REC_ACL:
        free((char *)r->acl.resource_name);
        free((char *)r->acl.principal);
        free((char *)r->acl.host);
        break;
    default:
        break;
    }
    memset(r, 0, sizeof *r);
    r->type = KQ_REC_NOOP;
}

static int dup_ids(kq_rec_ids *dst, const kq_rec_ids *src)
{
    dst->n = src->n;
    dst->ids = NULL;
    if (src->n <= 0)
        return 0;
    dst->ids = malloc((size_t)src->n * sizeof(int32_t));
    if (!dst->ids)
        return KQ_ERR_NOMEM;
    memcpy(dst->ids, src->ids, (size_t)src->n * sizeof(int32_t));
    return 0;
}

static int dup_str(char **dst, const char *src)
{
    *dst = NULL;
    if (!src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : KQ_ERR_NOMEM;
}

int kq_record_copy(kq_record *dst, const kq_record *src)
{
    int rc = 0;

    *dst = *src;
    /* Null every pointer first so that kq_record_free is safe on a partial copy. */
    switch (src->type) {
    case KQ_REC_OPAQUE:
        dst->opaque.data = NULL;
        if (src->opaque.len) {
            dst->opaque.data = malloc(src->opaque.len);
            if (!dst->opaque.data) {
                rc = KQ_ERR_NOMEM;
                break;
            }
            memcpy(dst->opaque.data, src->opaque.data, src->opaque.len);
        }
        break;
    case KQ_REC_VOTERS:
        dst->voters.voters = NULL;
        if (src->voters.n_voters > 0) {
            size_t sz = (size_t)src->voters.n_voters * sizeof src->voters.voters[0];

            if (!(dst->voters.voters = malloc(sz))) {
                dst->voters.n_voters = 0;
                rc = KQ_ERR_NOMEM;
                break;
            }
            memcpy(dst->voters.voters, src->voters.voters, sz);
        }
        break;
    case KQ_REC_LEADER_CHANGE:
        dst->leader_change.granting_voters.ids = NULL;
        if (!(rc = dup_ids(&dst->leader_change.voters, &src->leader_change.voters)))
            rc = dup_ids(&dst->leader_change.granting_voters, &src->leader_change.granting_voters);
        break;
    case KQ_REC_REGISTER_BROKER: {
        const kq_rec_register_broker *s = &src->register_broker;
        kq_rec_register_broker *d = &dst->register_broker;

        d->rack = NULL;
        d->endpoints = NULL;
        d->n_endpoints = 0;
        if (s->n_endpoints > 0) {
            d->endpoints = calloc((size_t)s->n_endpoints, sizeof *d->endpoints);
            if (!d->endpoints) {
                rc = KQ_ERR_NOMEM;
                break;
            }
            d->n_endpoints = s->n_endpoints;
            for (int32_t i = 0; i < s->n_endpoints && !rc; i++) {
                d->endpoints[i].port = s->endpoints[i].port;
                if (!(rc = dup_str(&d->endpoints[i].name, s->endpoints[i].name)))
                    rc = dup_str(&d->endpoints[i].host, s->endpoints[i].host);
            }
        }
        if (!rc)
            rc = dup_str(&d->rack, s->rack);
        break;
    }
    case KQ_REC_TOPIC:
        rc = dup_str(&dst->topic.name, src->topic.name);
        break;
    case KQ_REC_PARTITION: {
        kq_rec_partition *d = &dst->partition;

        d->isr.ids = d->elr.ids = d->last_known_elr.ids = NULL;
        if (!(rc = dup_ids(&d->replicas, &src->partition.replicas)) &&
            !(rc = dup_ids(&d->isr, &src->partition.isr)) &&
            !(rc = dup_ids(&d->elr, &src->partition.elr)))
            rc = dup_ids(&d->last_known_elr, &src->partition.last_known_elr);
        break;
    }
    case KQ_REC_PARTITION_CHANGE: {
        kq_rec_partition_change *d = &dst->partition_change;

        d->isr.ids = d->elr.ids = d->last_known_elr.ids = NULL;
        if (!(rc = dup_ids(&d->replicas, &src->partition_change.replicas)) &&
            !(rc = dup_ids(&d->isr, &src->partition_change.isr)) &&
            !(rc = dup_ids(&d->elr, &src->partition_change.elr)))
            rc = dup_ids(&d->last_known_elr, &src->partition_change.last_known_elr);
        break;
    }
    case KQ_REC_CONFIG:
        dst->config.name = dst->config.value = NULL;
        if (!(rc = dup_str(&dst->config.resource_name, src->config.resource_name)) &&
            !(rc = dup_str(&dst->config.name, src->config.name)))
            rc = dup_str(&dst->config.value, src->config.value);
        break;
    case KQ_REC_FEATURE_LEVEL:
        rc = dup_str(&dst->feature_level.name, src->feature_level.name);
        break;
    case KQ_REC_ACL: {
        char *name = NULL, *principal = NULL, *host = NULL;

        dst->acl.principal = dst->acl.host = NULL;
        rc = dup_str(&name, src->acl.resource_name);
        dst->acl.resource_name = name;
        if (!rc)
            rc = dup_str(&principal, src->acl.principal);
        dst->acl.principal = principal;
        if (!rc)
            rc = dup_str(&host, src->acl.host);
        dst->acl.host = host;
        break;
    }
    default:
        break;
    }
    if (rc)
        kq_record_free(dst);
    return rc;
}
