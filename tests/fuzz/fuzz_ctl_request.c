/*
 * libFuzzer target: kq_ctl_decode_request, every controller API body.
 *
 * Input: byte 0 picks the API (byte0 modulo the number of controller APIs in fuzz_wire.h, 17) and
 * byte 1 the envelope's sender id (as int8); the rest is the body message, wrapped into a valid
 * envelope here. A first byte >= 0xF0 means the rest is a whole envelope, unwrapped.
 *
 * Checks: a rejected request gets MALFORMED / INVALID_REQUEST / UNSUPPORTED_VERSION with a
 * message and owns nothing; an accepted one obeys the decoder's documented rules (counts,
 * lengths, ranges, enums), and re-encodes to a request that decodes to the same value, whose
 * own encoding is byte-for-byte the first one.
 */
#include "fuzz_check.h"
#include "fuzz_wire.h"
#include "kq/ctl_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t slen(const char *s)
{
    return s ? strlen(s) : 0;
}

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static void check_assignments(const kq_partition_assignment *as, int32_t n)
{
    FUZZ_CHECK(n >= 0 && (n == 0 || as));
    for (int32_t i = 0; i < n; i++)
        FUZZ_CHECK(as[i].partition_index >= 0 && as[i].n_broker_ids >= 0 &&
                   as[i].n_broker_ids <= KQ_REC_MAX_REPLICAS);
}

static void same_assignments(const kq_partition_assignment *a, int32_t na,
                             const kq_partition_assignment *b, int32_t nb)
{
    FUZZ_CHECK(na == nb);
    for (int32_t i = 0; i < na; i++) {
        FUZZ_CHECK(a[i].partition_index == b[i].partition_index &&
                   a[i].n_broker_ids == b[i].n_broker_ids);
        FUZZ_CHECK(!a[i].n_broker_ids || !memcmp(a[i].broker_ids, b[i].broker_ids,
                                                 sizeof(int32_t) * (size_t)a[i].n_broker_ids));
    }
}

static bool name_ok(const char *s, size_t max, bool nonempty)
{
    return s && strlen(s) <= max && (!nonempty || s[0]);
}

/* A decoded ACL binding or filter: strings within the record limits (a filter's may be
 * absent), codes within int8. */
static void check_acl(const kq_acl *a)
{
    FUZZ_CHECK(name_ok(a->resource_name, KQ_REC_MAX_NAME, false) &&
               name_ok(a->principal, KQ_REC_MAX_NAME, false) &&
               name_ok(a->host, KQ_REC_MAX_NAME, false));
    FUZZ_CHECK(a->resource_type >= 0 && a->pattern_type >= 0 && a->operation >= 0 &&
               a->permission >= 0);
}

static void check_filter(const kq_acl_filter *f)
{
    FUZZ_CHECK(slen(f->resource_name) <= KQ_REC_MAX_NAME && slen(f->principal) <= KQ_REC_MAX_NAME &&
               slen(f->host) <= KQ_REC_MAX_NAME);
    FUZZ_CHECK(f->resource_type >= 0 && f->pattern_type >= 0 && f->operation >= 0 &&
               f->permission >= 0);
}

static bool same_acl(const kq_acl *a, const kq_acl *b)
{
    return a->resource_type == b->resource_type && a->pattern_type == b->pattern_type &&
           a->operation == b->operation && a->permission == b->permission &&
           same_str(a->resource_name, b->resource_name) && same_str(a->principal, b->principal) &&
           same_str(a->host, b->host);
}

static bool same_filter(const kq_acl_filter *a, const kq_acl_filter *b)
{
    return a->resource_type == b->resource_type && a->pattern_type == b->pattern_type &&
           a->operation == b->operation && a->permission == b->permission &&
           same_str(a->resource_name, b->resource_name) && same_str(a->principal, b->principal) &&
           same_str(a->host, b->host);
}

/* The rules kq_ctl_decode_request documents and enforces for an accepted request. */
static void check_request(const kq_ctl_request *r)
{
    switch (r->api_key) {
    case KQ_API_BROKER_REGISTRATION: {
        const kq_broker_registration *b = &r->broker_registration;

        FUZZ_CHECK(b->broker_id >= 0 && slen(b->cluster_id) <= KQ_CODEC_MAX_CLUSTER_ID);
        FUZZ_CHECK(!kq_uuid_is_zero(b->incarnation_id));
        FUZZ_CHECK(b->n_endpoints >= 1 && b->n_endpoints <= KQ_REC_MAX_ENDPOINTS);
        for (int32_t i = 0; i < b->n_endpoints; i++)
            FUZZ_CHECK(name_ok(b->endpoints[i].name, KQ_REC_MAX_NAME, true) &&
                       name_ok(b->endpoints[i].host, KQ_REC_MAX_NAME, true) &&
                       b->endpoints[i].port >= 0 && b->endpoints[i].port <= 65535);
        FUZZ_CHECK(!b->rack || name_ok(b->rack, KQ_REC_MAX_NAME, true));
        break;
    }
    case KQ_API_BROKER_HEARTBEAT:
        FUZZ_CHECK(r->broker_heartbeat.broker_id >= 0 && r->broker_heartbeat.broker_epoch >= -1 &&
                   r->broker_heartbeat.current_metadata_offset >= -1);
        break;
    case KQ_API_UNREGISTER_BROKER:
        FUZZ_CHECK(r->unregister_broker.broker_id >= 0);
        break;
    case KQ_API_ALTER_PARTITION: {
        const kq_alter_partition *a = &r->alter_partition;
        size_t total = 0;

        FUZZ_CHECK(a->version >= 0 && a->version <= 3 && a->broker_id >= 0 &&
                   a->broker_epoch >= -1);
        FUZZ_CHECK(a->n_topics >= 0 && a->n_topics <= KQ_CTL_MAX_ITEMS);
        for (int32_t i = 0; i < a->n_topics; i++) {
            const kq_ap_topic *t = &a->topics[i];

            if (a->version <= 1)
                FUZZ_CHECK(name_ok(t->name, KQ_CTL_MAX_TOPIC_NAME_BYTES, true));
            total += (size_t)t->n_partitions;
            for (int32_t k = 0; k < t->n_partitions; k++) {
                const kq_ap_partition *p = &t->partitions[k];

                FUZZ_CHECK(p->partition_index >= 0 && p->leader_epoch >= 0 &&
                           p->partition_epoch >= 0);
                FUZZ_CHECK(p->leader_recovery_state == KQ_RECOVERY_RECOVERED ||
                           p->leader_recovery_state == KQ_RECOVERY_RECOVERING);
                FUZZ_CHECK(p->n_new_isr >= 0 && p->n_new_isr <= KQ_REC_MAX_REPLICAS);
                for (int32_t m = 0; m < p->n_new_isr; m++)
                    FUZZ_CHECK(p->new_isr[m].broker_epoch >= -1);
            }
        }
        FUZZ_CHECK(total <= KQ_CTL_MAX_PARTITIONS);
        break;
    }
    case KQ_API_CREATE_TOPICS:
        FUZZ_CHECK(r->create_topics.n >= 1 && r->create_topics.n <= KQ_CTL_MAX_ITEMS);
        for (int32_t i = 0; i < r->create_topics.n; i++) {
            const kq_create_topic *t = &r->create_topics.topics[i];

            FUZZ_CHECK(slen(t->name) <= KQ_CTL_MAX_TOPIC_NAME_BYTES);
            FUZZ_CHECK(t->num_partitions >= -1 && t->replication_factor >= -1);
            check_assignments(t->assignments, t->n_assignments);
            FUZZ_CHECK(t->n_configs >= 0 && t->n_configs <= KQ_CTL_MAX_CONFIGS);
            for (int32_t k = 0; k < t->n_configs; k++)
                FUZZ_CHECK(name_ok(t->configs[k].name, KQ_REC_MAX_NAME, true) &&
                           name_ok(t->configs[k].value, KQ_REC_MAX_CONFIG_VALUE, false));
            FUZZ_CHECK(kq_uuid_is_zero(t->topic_id) || !kq_topic_id_reserved(t->topic_id));
        }
        break;
    case KQ_API_DELETE_TOPICS:
        FUZZ_CHECK(r->delete_topics.n >= 1 && r->delete_topics.n <= KQ_CTL_MAX_ITEMS);
        for (int32_t i = 0; i < r->delete_topics.n; i++)
            FUZZ_CHECK(slen(r->delete_topics.topics[i].name) <= KQ_CTL_MAX_TOPIC_NAME_BYTES);
        break;
    case KQ_API_CREATE_PARTITIONS:
        FUZZ_CHECK(r->create_partitions.n >= 1 && r->create_partitions.n <= KQ_CTL_MAX_ITEMS);
        for (int32_t i = 0; i < r->create_partitions.n; i++) {
            const kq_create_partitions *t = &r->create_partitions.topics[i];

            FUZZ_CHECK(slen(t->topic) <= KQ_CTL_MAX_TOPIC_NAME_BYTES);
            check_assignments(t->assignments, t->n_assignments);
        }
        break;
    case KQ_API_ELECT_LEADERS: {
        const kq_elect_leaders *e = &r->elect_leaders;

        FUZZ_CHECK(e->election_type == KQ_ELECTION_TYPE_PREFERRED ||
                   e->election_type == KQ_ELECTION_TYPE_UNCLEAN);
        if (e->all_partitions) {
            FUZZ_CHECK(e->n_targets == 0);
            break;
        }
        FUZZ_CHECK(e->n_targets >= 1 && e->n_targets <= KQ_CTL_MAX_PARTITIONS);
        for (int32_t i = 0; i < e->n_targets; i++)
            FUZZ_CHECK(e->targets[i].partition >= 0 &&
                       slen(e->targets[i].topic) <= KQ_CTL_MAX_TOPIC_NAME_BYTES);
        break;
    }
    case KQ_API_INCREMENTAL_ALTER_CONFIGS:
        FUZZ_CHECK(r->alter_configs.n >= 1 && r->alter_configs.n <= KQ_CTL_MAX_ITEMS);
        for (int32_t i = 0; i < r->alter_configs.n; i++) {
            const kq_alter_config_resource *x = &r->alter_configs.resources[i];

            FUZZ_CHECK(x->resource_type == KQ_CONFIG_RESOURCE_TOPIC ||
                       x->resource_type == KQ_CONFIG_RESOURCE_BROKER);
            FUZZ_CHECK(slen(x->resource_name) <= KQ_CTL_MAX_TOPIC_NAME_BYTES);
            FUZZ_CHECK(x->n_ops >= 0 && x->n_ops <= KQ_CTL_MAX_CONFIGS);
            for (int32_t k = 0; k < x->n_ops; k++) {
                const kq_config_op *o = &x->ops[k];

                FUZZ_CHECK(name_ok(o->name, KQ_REC_MAX_NAME, true));
                FUZZ_CHECK(o->op >= KQ_CONFIG_OP_SET && o->op <= KQ_CONFIG_OP_SUBTRACT);
                FUZZ_CHECK((o->op == KQ_CONFIG_OP_DELETE) == (o->value == NULL));
                FUZZ_CHECK(slen(o->value) <= KQ_REC_MAX_CONFIG_VALUE);
            }
        }
        break;
    case KQ_API_DESCRIBE_CONFIGS:
        FUZZ_CHECK(r->describe_configs.n >= 1 && r->describe_configs.n <= KQ_CTL_MAX_ITEMS);
        for (int32_t i = 0; i < r->describe_configs.n; i++) {
            const kq_describe_config_resource *x = &r->describe_configs.resources[i];

            FUZZ_CHECK(x->resource_type == KQ_CONFIG_RESOURCE_TOPIC ||
                       x->resource_type == KQ_CONFIG_RESOURCE_BROKER);
            FUZZ_CHECK(slen(x->resource_name) <= KQ_CTL_MAX_TOPIC_NAME_BYTES);
            FUZZ_CHECK(x->n_keys >= 0 && x->n_keys <= KQ_CTL_MAX_CONFIGS);
            for (int32_t k = 0; k < x->n_keys; k++)
                FUZZ_CHECK(name_ok(x->keys[k], KQ_REC_MAX_NAME, true));
        }
        break;
    case KQ_API_UPDATE_FEATURES:
        FUZZ_CHECK(r->update_features.n >= 1 && r->update_features.n <= KQ_CTL_MAX_ITEMS);
        for (int32_t i = 0; i < r->update_features.n; i++) {
            const kq_feature_update *u = &r->update_features.updates[i];

            FUZZ_CHECK(name_ok(u->name, KQ_REC_MAX_NAME, true) && u->max_version_level >= 0);
            FUZZ_CHECK(u->upgrade_type >= KQ_FEATURE_UPGRADE &&
                       u->upgrade_type <= KQ_FEATURE_UNSAFE_DOWNGRADE);
        }
        break;
    case KQ_API_DESCRIBE_TOPICS:
        FUZZ_CHECK(r->describe_topics.n >= 0 && r->describe_topics.n <= KQ_CTL_MAX_ITEMS);
        for (int32_t i = 0; i < r->describe_topics.n; i++)
            FUZZ_CHECK(slen(r->describe_topics.names[i]) <= KQ_CTL_MAX_TOPIC_NAME_BYTES);
        break;
    case KQ_API_DESCRIBE_CLUSTER:
    case KQ_API_DESCRIBE_FEATURES:
        break;
    case KQ_API_CREATE_ACLS:
        FUZZ_CHECK(r->create_acls.n >= 1 && r->create_acls.n <= KQ_CTL_MAX_ITEMS);
        for (int32_t i = 0; i < r->create_acls.n; i++)
            check_acl(&r->create_acls.acls[i]);
        break;
    case KQ_API_DESCRIBE_ACLS:
        check_filter(&r->describe_acls.filter);
        break;
    case KQ_API_DELETE_ACLS:
        FUZZ_CHECK(r->delete_acls.n >= 1 && r->delete_acls.n <= KQ_CTL_MAX_ITEMS);
        for (int32_t i = 0; i < r->delete_acls.n; i++)
            check_filter(&r->delete_acls.filters[i]);
        break;
    default:
        FUZZ_CHECK(!"an accepted request has a non-controller api key");
    }
}

/* a and b (b decoded from a's encoding) carry the same request. */
static void same_request(const kq_ctl_request *a, const kq_ctl_request *b)
{
    FUZZ_CHECK(a->api_key == b->api_key && a->sender_id == b->sender_id &&
               !strcmp(a->cluster_id, b->cluster_id));
    switch (a->api_key) {
    case KQ_API_BROKER_REGISTRATION: {
        const kq_broker_registration *x = &a->broker_registration, *y = &b->broker_registration;

        FUZZ_CHECK(x->broker_id == y->broker_id && same_str(x->cluster_id, y->cluster_id) &&
                   !memcmp(x->incarnation_id, y->incarnation_id, 16) &&
                   same_str(x->rack, y->rack) && x->n_endpoints == y->n_endpoints);
        for (int32_t i = 0; i < x->n_endpoints; i++)
            FUZZ_CHECK(same_str(x->endpoints[i].name, y->endpoints[i].name) &&
                       same_str(x->endpoints[i].host, y->endpoints[i].host) &&
                       x->endpoints[i].port == y->endpoints[i].port);
        break;
    }
    case KQ_API_BROKER_HEARTBEAT:
        FUZZ_CHECK(!memcmp(&a->broker_heartbeat, &b->broker_heartbeat, sizeof a->broker_heartbeat));
        break;
    case KQ_API_UNREGISTER_BROKER:
        FUZZ_CHECK(a->unregister_broker.broker_id == b->unregister_broker.broker_id);
        break;
    case KQ_API_ALTER_PARTITION: {
        const kq_alter_partition *x = &a->alter_partition, *y = &b->alter_partition;

        FUZZ_CHECK(x->version == y->version && x->broker_id == y->broker_id &&
                   x->broker_epoch == y->broker_epoch && x->n_topics == y->n_topics);
        for (int32_t i = 0; i < x->n_topics; i++) {
            const kq_ap_topic *s = &x->topics[i], *t = &y->topics[i];

            if (x->version > 1)
                FUZZ_CHECK(!memcmp(s->topic_id, t->topic_id, 16));
            else
                FUZZ_CHECK(same_str(s->name, t->name));
            FUZZ_CHECK(s->n_partitions == t->n_partitions);
            for (int32_t k = 0; k < s->n_partitions; k++) {
                const kq_ap_partition *p = &s->partitions[k], *q = &t->partitions[k];

                FUZZ_CHECK(p->partition_index == q->partition_index &&
                           p->leader_epoch == q->leader_epoch &&
                           p->partition_epoch == q->partition_epoch &&
                           p->leader_recovery_state == q->leader_recovery_state &&
                           p->n_new_isr == q->n_new_isr);
                for (int32_t m = 0; m < p->n_new_isr; m++)
                    FUZZ_CHECK(p->new_isr[m].broker_id == q->new_isr[m].broker_id &&
                               p->new_isr[m].broker_epoch == q->new_isr[m].broker_epoch);
            }
        }
        break;
    }
    case KQ_API_CREATE_TOPICS:
        FUZZ_CHECK(a->create_topics.n == b->create_topics.n);
        for (int32_t i = 0; i < a->create_topics.n; i++) {
            const kq_create_topic *s = &a->create_topics.topics[i],
                                  *t = &b->create_topics.topics[i];

            FUZZ_CHECK(same_str(s->name, t->name) && s->num_partitions == t->num_partitions &&
                       s->replication_factor == t->replication_factor &&
                       !memcmp(s->topic_id, t->topic_id, 16) && s->n_configs == t->n_configs);
            same_assignments(s->assignments, s->n_assignments, t->assignments, t->n_assignments);
            for (int32_t k = 0; k < s->n_configs; k++)
                FUZZ_CHECK(same_str(s->configs[k].name, t->configs[k].name) &&
                           same_str(s->configs[k].value, t->configs[k].value));
        }
        break;
    case KQ_API_DELETE_TOPICS:
        FUZZ_CHECK(a->delete_topics.n == b->delete_topics.n);
        for (int32_t i = 0; i < a->delete_topics.n; i++) {
            const kq_delete_topic *s = &a->delete_topics.topics[i],
                                  *t = &b->delete_topics.topics[i];

            FUZZ_CHECK(same_str(s->name, t->name));
            if (!s->name)
                FUZZ_CHECK(!memcmp(s->topic_id, t->topic_id, 16));
        }
        break;
    case KQ_API_CREATE_PARTITIONS:
        FUZZ_CHECK(a->create_partitions.n == b->create_partitions.n);
        for (int32_t i = 0; i < a->create_partitions.n; i++) {
            const kq_create_partitions *s = &a->create_partitions.topics[i];
            const kq_create_partitions *t = &b->create_partitions.topics[i];

            FUZZ_CHECK(same_str(s->topic, t->topic) && s->count == t->count);
            same_assignments(s->assignments, s->n_assignments, t->assignments, t->n_assignments);
        }
        break;
    case KQ_API_ELECT_LEADERS: {
        const kq_elect_leaders *x = &a->elect_leaders, *y = &b->elect_leaders;

        FUZZ_CHECK(x->election_type == y->election_type && x->all_partitions == y->all_partitions &&
                   x->n_targets == y->n_targets);
        for (int32_t i = 0; i < x->n_targets; i++)
            FUZZ_CHECK(same_str(x->targets[i].topic, y->targets[i].topic) &&
                       x->targets[i].partition == y->targets[i].partition);
        break;
    }
    case KQ_API_INCREMENTAL_ALTER_CONFIGS:
        FUZZ_CHECK(a->alter_configs.n == b->alter_configs.n);
        for (int32_t i = 0; i < a->alter_configs.n; i++) {
            const kq_alter_config_resource *s = &a->alter_configs.resources[i];
            const kq_alter_config_resource *t = &b->alter_configs.resources[i];

            FUZZ_CHECK(s->resource_type == t->resource_type &&
                       same_str(s->resource_name, t->resource_name) && s->n_ops == t->n_ops);
            for (int32_t k = 0; k < s->n_ops; k++)
                FUZZ_CHECK(same_str(s->ops[k].name, t->ops[k].name) &&
                           same_str(s->ops[k].value, t->ops[k].value) &&
                           s->ops[k].op == t->ops[k].op);
        }
        break;
    case KQ_API_DESCRIBE_CONFIGS:
        FUZZ_CHECK(a->describe_configs.n == b->describe_configs.n);
        for (int32_t i = 0; i < a->describe_configs.n; i++) {
            const kq_describe_config_resource *s = &a->describe_configs.resources[i];
            const kq_describe_config_resource *t = &b->describe_configs.resources[i];

            FUZZ_CHECK(s->resource_type == t->resource_type &&
                       same_str(s->resource_name, t->resource_name) && s->n_keys == t->n_keys);
            for (int32_t k = 0; k < s->n_keys; k++)
                FUZZ_CHECK(same_str(s->keys[k], t->keys[k]));
        }
        break;
    case KQ_API_UPDATE_FEATURES:
        FUZZ_CHECK(a->update_features.n == b->update_features.n &&
                   a->update_features.validate_only == b->update_features.validate_only);
        for (int32_t i = 0; i < a->update_features.n; i++) {
            const kq_feature_update *s = &a->update_features.updates[i];
            const kq_feature_update *t = &b->update_features.updates[i];

            FUZZ_CHECK(same_str(s->name, t->name) && s->max_version_level == t->max_version_level &&
                       s->upgrade_type == t->upgrade_type);
        }
        break;
    case KQ_API_DESCRIBE_TOPICS:
        FUZZ_CHECK(a->describe_topics.n == b->describe_topics.n);
        for (int32_t i = 0; i < a->describe_topics.n; i++)
            FUZZ_CHECK(same_str(a->describe_topics.names[i], b->describe_topics.names[i]));
        break;
    case KQ_API_CREATE_ACLS:
        FUZZ_CHECK(a->create_acls.n == b->create_acls.n);
        for (int32_t i = 0; i < a->create_acls.n; i++)
            FUZZ_CHECK(same_acl(&a->create_acls.acls[i], &b->create_acls.acls[i]));
        break;
    case KQ_API_DESCRIBE_ACLS:
        FUZZ_CHECK(same_filter(&a->describe_acls.filter, &b->describe_acls.filter));
        break;
    case KQ_API_DELETE_ACLS:
        FUZZ_CHECK(a->delete_acls.n == b->delete_acls.n);
        for (int32_t i = 0; i < a->delete_acls.n; i++)
            FUZZ_CHECK(same_filter(&a->delete_acls.filters[i], &b->delete_acls.filters[i]));
        break;
    default:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kq_ctl_request r, again;
    kq_buf b1 = {0}, b2 = {0};
    char err[256] = "";
    uint8_t *msg;
    size_t len;
    int rc;

    if (size < 2)
        return 0;
    msg = fuzz_envelope(data, size, fuzz_ctl_apis, FUZZ_N_CTL_APIS, 1, &len);
    FUZZ_CHECK(msg);
    rc = kq_ctl_decode_request(msg, len, &r, err, sizeof err);
    free(msg); /* the decoded request owns copies */
    if (rc) {
        FUZZ_CHECK(rc == KQ_ERR_MALFORMED || rc == KQ_ERR_INVALID_REQUEST ||
                   rc == KQ_ERR_UNSUPPORTED_VERSION);
        FUZZ_CHECK(err[0] != '\0' && r.priv_ == NULL);
        kq_ctl_request_free(&r);
        return 0;
    }
    FUZZ_CHECK(kq_ctl_is_controller_api(r.api_key));
    FUZZ_CHECK(strlen(r.cluster_id) <= KQ_CODEC_MAX_CLUSTER_ID && r.sender_id >= -1);
    check_request(&r);

    FUZZ_CHECK(kq_ctl_encode_request(r.cluster_id, r.sender_id, &r, &b1) == 0);
    FUZZ_CHECK(kq_ctl_decode_request(b1.data, b1.len, &again, err, sizeof err) == 0);
    same_request(&r, &again);
    FUZZ_CHECK(kq_ctl_encode_request(again.cluster_id, again.sender_id, &again, &b2) == 0);
    FUZZ_CHECK(b1.len == b2.len && !memcmp(b1.data, b2.data, b1.len));
    kq_buf_free(&b1);
    kq_buf_free(&b2);
    kq_ctl_request_free(&again);
    kq_ctl_request_free(&r);
    return 0;
}
