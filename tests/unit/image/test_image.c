/*
 * kq_image: apply semantics (brokers, topics, partitions, PartitionChange merge rules, configs,
 * features), apply errors leaving the image untouched, the broker -> partitions index checked
 * against a brute-force scan after random sequences, and exact rollback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "image_gen.h"
#include "kq/error.h"
#include "kq/image.h"
#include "kq/records.h"

static int64_t next_off;

/* Apply (taking ownership of r's memory) and return the result. */
static int apply(kq_image *img, kq_record r)
{
    int rc = kq_image_apply(img, next_off, &r);

    if (!rc)
        next_off++;
    kq_record_free(&r);
    return rc;
}

static void apply_ok(kq_image *img, kq_record r)
{
    int rc = apply(img, r);

    if (rc)
        fail_msg("apply failed: %d %s", rc, kq_image_error(img));
}

static void assert_ids(const int32_t *got, int n, const int32_t *want, int nwant)
{
    assert_int_equal(n, nwant);
    for (int i = 0; i < n; i++)
        assert_int_equal(got[i], want[i]);
}

static kq_image *setup_cluster(void)
{
    kq_image *img = kq_image_new();
    static const int32_t r123[] = {1, 2, 3};

    assert_non_null(img);
    next_off = 0;
    for (int32_t b = 1; b <= 4; b++)
        apply_ok(img, rec_register(b, 100 + b, b % 2 ? "rack-a" : NULL));
    apply_ok(img, rec_topic("orders", 0));
    for (int32_t p = 0; p < 3; p++)
        apply_ok(img, rec_partition(0, p, r123, 3, r123, 3, 1));
    return img;
}

/* ---- brute-force check of the broker index and the counters ------------------------------ */

typedef struct scan {
    int32_t broker;
    uint32_t count[5];
    uint64_t parts, offline, imbalance, under;
} scan;

static int scan_cb(void *arg, const kq_topic *t, int32_t pid, const kq_partition *p)
{
    scan *s = arg;
    int32_t b = s->broker;

    (void)t;
    (void)pid;
    s->parts++;
    s->offline += p->leader == KQ_NO_LEADER;
    s->imbalance += p->leader != kq_partition_replicas(p)[0];
    s->under += p->n_isr < p->n_replicas;
    s->count[KQ_ROLE_LEADER] += p->leader == b;
    s->count[KQ_ROLE_REPLICA] += kq_ids_contain(kq_partition_replicas(p), p->n_replicas, b);
    s->count[KQ_ROLE_ISR] += kq_ids_contain(kq_partition_isr(p), p->n_isr, b);
    s->count[KQ_ROLE_ELR] += kq_ids_contain(kq_partition_elr(p), p->n_elr, b);
    s->count[KQ_ROLE_LAST_KNOWN_ELR] +=
        kq_ids_contain(kq_partition_last_known_elr(p), p->n_last_known_elr, b);
    return 0;
}

typedef struct visit {
    int32_t broker;
    kq_image_role role;
    uint32_t n;
    int bad;
    const kq_topic *t[4096];
    int32_t pid[4096];
} visit;

static int visit_cb(void *arg, const kq_topic *t, int32_t pid, const kq_partition *p)
{
    visit *v = arg;

    if (&t->partitions[pid] != p)
        v->bad++;
    for (uint32_t i = 0; i < v->n; i++)
        if (v->t[i] == t && v->pid[i] == pid)
            v->bad++; /* visited twice */
    if (v->n < 4096) {
        v->t[v->n] = t;
        v->pid[v->n] = pid;
    }
    v->n++;
    return 0;
}

static void check_index(const kq_image *img)
{
    static visit v;
    kq_image_counts c;

    kq_image_get_counts(img, &c);
    for (int role = 0; role < 5; role++)
        assert_int_equal(kq_image_broker_count(img, -1, (kq_image_role)role), 0);
    for (int32_t b = 0; b <= GEN_BROKERS; b++) {
        scan s = {.broker = b};

        kq_image_foreach_partition(img, scan_cb, &s);
        assert_int_equal(c.partitions, s.parts);
        assert_int_equal(c.offline_partitions, s.offline);
        assert_int_equal(c.preferred_imbalance, s.imbalance);
        assert_int_equal(c.under_replicated, s.under);
        for (int role = 0; role < 5; role++) {
            memset(&v, 0, sizeof v);
            v.broker = b;
            v.role = (kq_image_role)role;
            assert_int_equal(kq_image_broker_count(img, b, (kq_image_role)role), s.count[role]);
            kq_image_foreach_broker_partition(img, b, (kq_image_role)role, visit_cb, &v);
            assert_int_equal(v.n, s.count[role]);
            assert_int_equal(v.bad, 0);
        }
    }
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_brokers(void **state)
{
    kq_image *img = kq_image_new();
    const kq_broker *b;
    kq_image_counts c;

    (void)state;
    next_off = 10;
    apply_ok(img, rec_register(2, 10, "rack-a"));
    b = kq_image_broker(img, 2);
    assert_non_null(b);
    assert_int_equal(b->epoch, 10);
    assert_true(b->fenced);
    assert_false(b->in_controlled_shutdown);
    assert_int_equal(b->registration_offset, 10);
    assert_string_equal(b->rack, "rack-a");
    assert_int_equal(b->n_endpoints, 1);
    assert_string_equal(b->endpoints[0].host, "localhost");
    assert_int_equal(b->endpoints[0].port, 9094);
    assert_null(kq_image_broker(img, 3));

    /* Unfence, then controlled shutdown; fence = 0 keeps the fenced flag. */
    apply_ok(img, rec_broker_change(2, 10, KQ_FENCE_UNFENCE, 0));
    assert_false(kq_image_broker(img, 2)->fenced);
    apply_ok(img, rec_broker_change(2, 10, KQ_FENCE_NONE, 1));
    b = kq_image_broker(img, 2);
    assert_false(b->fenced);
    assert_true(b->in_controlled_shutdown);
    apply_ok(img, rec_broker_change(2, 10, KQ_FENCE_FENCE, 0));
    assert_true(kq_image_broker(img, 2)->fenced);
    assert_true(kq_image_broker(img, 2)->in_controlled_shutdown);

    /* Wrong epoch or unknown broker: errors naming the problem. */
    assert_int_equal(apply(img, rec_broker_change(2, 9, KQ_FENCE_UNFENCE, 0)),
                     KQ_ERR_STALE_BROKER_EPOCH);
    assert_non_null(strstr(kq_image_error(img), "epoch"));
    assert_int_equal(apply(img, rec_broker_change(7, 1, KQ_FENCE_UNFENCE, 0)),
                     KQ_ERR_BROKER_ID_NOT_REGISTERED);
    assert_int_equal(apply(img, rec_unregister(7, 1)), KQ_ERR_BROKER_ID_NOT_REGISTERED);
    assert_int_equal(apply(img, rec_unregister(2, 11)), KQ_ERR_STALE_BROKER_EPOCH);

    /* A new registration replaces the old one (new epoch, offset, no rack). */
    apply_ok(img, rec_register(2, 50, NULL));
    b = kq_image_broker(img, 2);
    assert_int_equal(b->epoch, 50);
    assert_null(b->rack);
    assert_false(b->in_controlled_shutdown);
    assert_int_equal(b->registration_offset, next_off - 1);

    apply_ok(img, rec_register(1, 60, NULL));
    assert_ptr_equal(kq_image_broker_next(img, NULL), kq_image_broker(img, 1));
    assert_ptr_equal(kq_image_broker_next(img, kq_image_broker(img, 1)), kq_image_broker(img, 2));
    assert_null(kq_image_broker_next(img, kq_image_broker(img, 2)));
    kq_image_get_counts(img, &c);
    assert_int_equal(c.brokers, 2);
    assert_int_equal(c.fenced_brokers, 2);

    apply_ok(img, rec_unregister(2, 50));
    assert_null(kq_image_broker(img, 2));
    kq_image_get_counts(img, &c);
    assert_int_equal(c.brokers, 1);
    kq_image_free(img);
}

static void test_topics_and_partitions(void **state)
{
    kq_image *img = setup_cluster();
    static const int32_t r231[] = {2, 3, 1}, r23[] = {2, 3};
    uint8_t id[16];
    const kq_topic *t;
    const kq_partition *p;
    kq_image_counts c;
    uint64_t h;

    (void)state;
    gen_tid(0, id);
    t = kq_image_topic_by_name(img, "orders");
    assert_non_null(t);
    assert_ptr_equal(kq_image_topic_by_id(img, id), t);
    assert_int_equal(t->n_partitions, 3);
    assert_null(kq_image_topic_by_name(img, "nope"));
    p = kq_image_partition(img, id, 2);
    assert_non_null(p);
    assert_int_equal(p->leader, 1);
    assert_int_equal(p->leader_epoch, 0);
    assert_int_equal(p->partition_epoch, 0);
    assert_null(kq_image_partition(img, id, 3));
    assert_null(kq_image_partition(img, id, -1));
    assert_int_equal(kq_image_broker_count(img, 1, KQ_ROLE_LEADER), 3);
    assert_int_equal(kq_image_broker_count(img, 3, KQ_ROLE_ISR), 3);
    assert_int_equal(kq_image_broker_count(img, 4, KQ_ROLE_REPLICA), 0);

    /* Errors leave the image exactly as it was. */
    h = kq_image_hash(img);
    assert_int_equal(apply(img, rec_topic("orders", 5)), KQ_ERR_TOPIC_ALREADY_EXISTS);
    assert_int_equal(apply(img, rec_topic("other", 0)), KQ_ERR_TOPIC_ALREADY_EXISTS);
    assert_int_equal(apply(img, rec_partition(0, 4, r23, 2, r23, 2, 2)),
                     KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    assert_non_null(strstr(kq_image_error(img), "out of order"));
    assert_int_equal(apply(img, rec_partition(9, 0, r23, 2, r23, 2, 2)), KQ_ERR_UNKNOWN_TOPIC_ID);
    assert_int_equal(apply(img, rec_topic("bad name", 6)), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(apply(img, rec_topic("..", 6)), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(apply(img, rec_partition(0, 3, r23, 2, r231, 3, 2)),
                     KQ_ERR_INVALID_REQUEST); /* isr member 1 not a replica */
    assert_int_equal(apply(img, rec_partition(0, 3, r23, 2, r23, 2, 4)),
                     KQ_ERR_INVALID_REQUEST); /* leader not a replica */
    assert_int_equal(kq_image_hash(img), h);

    /* A Partition record for an existing partition replaces it in full. */
    apply_ok(img, rec_partition(0, 1, r231, 3, r23, 2, 2));
    p = kq_image_partition(img, id, 1);
    assert_ids(kq_partition_replicas(p), p->n_replicas, r231, 3);
    assert_ids(kq_partition_isr(p), p->n_isr, r23, 2);
    assert_int_equal(p->leader, 2);
    assert_int_equal(kq_image_broker_count(img, 1, KQ_ROLE_LEADER), 2);
    assert_int_equal(kq_image_broker_count(img, 2, KQ_ROLE_LEADER), 1);
    kq_image_get_counts(img, &c);
    assert_int_equal(c.topics, 1);
    assert_int_equal(c.partitions, 3);
    assert_int_equal(c.preferred_imbalance, 0); /* leader 2 == replicas[0] */
    assert_int_equal(c.under_replicated, 1);
    check_index(img);
    kq_image_free(img);
}

static void test_partition_change_merge(void **state)
{
    kq_image *img = setup_cluster();
    static const int32_t r12[] = {1, 2}, r123[] = {1, 2, 3}, r3[] = {3}, r2[] = {2},
                         r1234[] = {1, 2, 3, 4}, r24[] = {2, 4};
    uint8_t id[16];
    const kq_partition *p;
    kq_record r;
    kq_image_counts c;

    (void)state;
    gen_tid(0, id);

    /* ISR shrink only: partition epoch +1, leader epoch unchanged, rest kept. */
    r = rec_change(0, 0);
    r.partition_change.has_isr = true;
    r.partition_change.isr = gen_list(r12, 2);
    apply_ok(img, r);
    p = kq_image_partition(img, id, 0);
    assert_ids(kq_partition_isr(p), p->n_isr, r12, 2);
    assert_ids(kq_partition_replicas(p), p->n_replicas, r123, 3);
    assert_int_equal(p->leader, 1);
    assert_int_equal(p->leader_epoch, 0);
    assert_int_equal(p->partition_epoch, 1);
    assert_int_equal(kq_image_broker_count(img, 3, KQ_ROLE_ISR), 2);

    /* An empty change still bumps the partition epoch (and only it). */
    apply_ok(img, rec_change(0, 0));
    p = kq_image_partition(img, id, 0);
    assert_int_equal(p->partition_epoch, 2);
    assert_int_equal(p->leader_epoch, 0);
    assert_ids(kq_partition_isr(p), p->n_isr, r12, 2);

    /* Leader change: both epochs bump. */
    r = rec_change(0, 0);
    r.partition_change.leader = 2;
    apply_ok(img, r);
    p = kq_image_partition(img, id, 0);
    assert_int_equal(p->leader, 2);
    assert_int_equal(p->leader_epoch, 1);
    assert_int_equal(p->partition_epoch, 3);
    assert_int_equal(kq_image_broker_count(img, 2, KQ_ROLE_LEADER), 1);
    assert_int_equal(kq_image_broker_count(img, 1, KQ_ROLE_LEADER), 2);

    /* Leader set to the same id: the leader epoch still bumps. */
    r = rec_change(0, 0);
    r.partition_change.leader = 2;
    apply_ok(img, r);
    p = kq_image_partition(img, id, 0);
    assert_int_equal(p->leader, 2);
    assert_int_equal(p->leader_epoch, 2);
    assert_int_equal(p->partition_epoch, 4);

    /* Leader -> none with ELR (ISR empty), LastKnownElr and RECOVERING. */
    r = rec_change(0, 0);
    r.partition_change.leader = KQ_NO_LEADER;
    r.partition_change.has_isr = true;
    r.partition_change.isr = gen_list(NULL, 0);
    r.partition_change.has_elr = true;
    r.partition_change.elr = gen_list(r3, 1);
    r.partition_change.has_last_known_elr = true;
    r.partition_change.last_known_elr = gen_list(r2, 1);
    r.partition_change.leader_recovery_state = KQ_RECOVERY_RECOVERING;
    apply_ok(img, r);
    p = kq_image_partition(img, id, 0);
    assert_int_equal(p->leader, KQ_NO_LEADER);
    assert_int_equal(p->leader_epoch, 3);
    assert_int_equal(p->partition_epoch, 5);
    assert_int_equal(p->n_isr, 0);
    assert_ids(kq_partition_elr(p), p->n_elr, r3, 1);
    assert_ids(kq_partition_last_known_elr(p), p->n_last_known_elr, r2, 1);
    assert_int_equal(p->leader_recovery_state, KQ_RECOVERY_RECOVERING);
    assert_int_equal(kq_image_broker_count(img, 3, KQ_ROLE_ELR), 1);
    assert_int_equal(kq_image_broker_count(img, 2, KQ_ROLE_LAST_KNOWN_ELR), 1);
    assert_int_equal(kq_image_broker_count(img, 2, KQ_ROLE_LEADER), 0);
    kq_image_get_counts(img, &c);
    assert_int_equal(c.offline_partitions, 1);

    /* Unchanged fields (ELR, LastKnownElr, recovery) survive a later ISR-only change. */
    r = rec_change(0, 0);
    r.partition_change.has_isr = true;
    r.partition_change.isr = gen_list(r3, 1);
    r.partition_change.leader = 3;
    apply_ok(img, r);
    p = kq_image_partition(img, id, 0);
    assert_ids(kq_partition_elr(p), p->n_elr, r3, 1);
    assert_ids(kq_partition_last_known_elr(p), p->n_last_known_elr, r2, 1);
    assert_int_equal(p->leader_recovery_state, KQ_RECOVERY_RECOVERING);
    assert_int_equal(p->leader, 3);
    assert_int_equal(p->leader_epoch, 4);
    assert_int_equal(p->partition_epoch, 6);

    /* Reassignment-style replicas change with a matching ISR, then back to RECOVERED. */
    r = rec_change(0, 0);
    r.partition_change.has_replicas = true;
    r.partition_change.replicas = gen_list(r1234, 4);
    r.partition_change.has_elr = true;
    r.partition_change.elr = gen_list(NULL, 0);
    r.partition_change.has_last_known_elr = true;
    r.partition_change.last_known_elr = gen_list(NULL, 0);
    r.partition_change.leader_recovery_state = KQ_RECOVERY_RECOVERED;
    apply_ok(img, r);
    p = kq_image_partition(img, id, 0);
    assert_ids(kq_partition_replicas(p), p->n_replicas, r1234, 4);
    assert_int_equal(p->n_elr, 0);
    assert_int_equal(p->n_last_known_elr, 0);
    assert_int_equal(p->leader_recovery_state, KQ_RECOVERY_RECOVERED);
    assert_int_equal(p->leader_epoch, 4);
    assert_int_equal(kq_image_broker_count(img, 4, KQ_ROLE_REPLICA), 1);
    check_index(img);

    /* Impossible changes: unknown topic, bad partition, ISR/leader outside replicas, replicas
     * that drop the leader. Each leaves the image untouched. */
    {
        uint64_t h = kq_image_hash(img);

        r = rec_change(7, 0);
        assert_int_equal(apply(img, r), KQ_ERR_UNKNOWN_TOPIC_ID);
        r = rec_change(0, 3);
        assert_int_equal(apply(img, r), KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
        r = rec_change(0, 1);
        r.partition_change.leader = 4;
        assert_int_equal(apply(img, r), KQ_ERR_INVALID_REQUEST);
        r = rec_change(0, 1);
        r.partition_change.has_isr = true;
        r.partition_change.isr = gen_list(r1234, 4);
        assert_int_equal(apply(img, r), KQ_ERR_INVALID_REQUEST);
        assert_non_null(strstr(kq_image_error(img), "non-replica"));
        r = rec_change(0, 0);
        r.partition_change.has_replicas = true;
        r.partition_change.replicas = gen_list(r24, 2); /* drops leader 3 */
        r.partition_change.has_isr = true;
        r.partition_change.isr = gen_list(r2, 1);
        assert_int_equal(apply(img, r), KQ_ERR_INVALID_REQUEST);
        assert_int_equal(kq_image_hash(img), h);
    }
    check_index(img);
    kq_image_free(img);
}

static void test_remove_topic(void **state)
{
    kq_image *img = setup_cluster();
    static const int32_t r34[] = {3, 4};
    uint8_t id[16];
    kq_image_counts c;

    (void)state;
    gen_tid(0, id);
    apply_ok(img, rec_topic("logs", 1));
    apply_ok(img, rec_partition(1, 0, r34, 2, r34, 2, 3));
    apply_ok(img, rec_config(KQ_CONFIG_RESOURCE_TOPIC, "orders", "min.insync.replicas", "2"));
    apply_ok(img, rec_config(KQ_CONFIG_RESOURCE_TOPIC, "orders", "retention.ms", "1000"));
    apply_ok(img, rec_config(KQ_CONFIG_RESOURCE_TOPIC, "logs", "retention.ms", "5"));
    assert_int_equal(kq_image_broker_count(img, 1, KQ_ROLE_REPLICA), 3);

    apply_ok(img, rec_remove_topic(0));
    assert_null(kq_image_topic_by_name(img, "orders"));
    assert_null(kq_image_topic_by_id(img, id));
    assert_null(kq_image_partition(img, id, 0));
    assert_int_equal(kq_image_broker_count(img, 1, KQ_ROLE_REPLICA), 0);
    assert_int_equal(kq_image_broker_count(img, 1, KQ_ROLE_LEADER), 0);
    assert_int_equal(kq_image_broker_count(img, 2, KQ_ROLE_ISR), 0);
    assert_int_equal(kq_image_broker_count(img, 3, KQ_ROLE_REPLICA), 1);
    assert_null(kq_image_config(img, KQ_CONFIG_RESOURCE_TOPIC, "orders", "retention.ms"));
    assert_string_equal(kq_image_config(img, KQ_CONFIG_RESOURCE_TOPIC, "logs", "retention.ms"),
                        "5");
    kq_image_get_counts(img, &c);
    assert_int_equal(c.topics, 1);
    assert_int_equal(c.partitions, 1);
    assert_int_equal(c.configs, 1);
    check_index(img);

    /* Gone: a second removal fails; the name and id can be used again. */
    assert_int_equal(apply(img, rec_remove_topic(0)), KQ_ERR_UNKNOWN_TOPIC_ID);
    apply_ok(img, rec_topic("orders", 0));
    assert_int_equal(kq_image_topic_by_name(img, "orders")->n_partitions, 0);
    check_index(img);
    kq_image_free(img);
}

typedef struct cfgs_seen {
    char buf[512];
} cfgs_seen;

static int cfg_cb(void *arg, int type, const char *res, const char *name, const char *value)
{
    cfgs_seen *s = arg;
    size_t n = strlen(s->buf);

    snprintf(s->buf + n, sizeof s->buf - n, "%d/%s/%s=%s;", type, res, name, value);
    return 0;
}

static int feat_cb(void *arg, const char *name, int16_t level)
{
    cfgs_seen *s = arg;
    size_t n = strlen(s->buf);

    snprintf(s->buf + n, sizeof s->buf - n, "%s=%d;", name, level);
    return 0;
}

static void test_configs_and_features(void **state)
{
    kq_image *img = kq_image_new();
    cfgs_seen s = {""};

    (void)state;
    next_off = 0;
    apply_ok(img, rec_config(KQ_CONFIG_RESOURCE_TOPIC, "t", "retention.ms", "10"));
    apply_ok(img, rec_config(KQ_CONFIG_RESOURCE_BROKER, "", "min.insync.replicas", "2"));
    apply_ok(img, rec_config(KQ_CONFIG_RESOURCE_BROKER, "3", "log.dirs", "/x"));
    apply_ok(img, rec_config(KQ_CONFIG_RESOURCE_TOPIC, "t", "cleanup.policy", "compact"));
    apply_ok(img, rec_config(KQ_CONFIG_RESOURCE_TOPIC, "t", "retention.ms", "20"));
    assert_string_equal(kq_image_config(img, KQ_CONFIG_RESOURCE_TOPIC, "t", "retention.ms"), "20");
    assert_string_equal(kq_image_config(img, KQ_CONFIG_RESOURCE_BROKER, "", "min.insync.replicas"),
                        "2");
    assert_null(kq_image_config(img, KQ_CONFIG_RESOURCE_TOPIC, "", "min.insync.replicas"));
    kq_image_foreach_config(img, 0, NULL, cfg_cb, &s);
    assert_string_equal(s.buf, "2/t/cleanup.policy=compact;2/t/retention.ms=20;"
                               "4//min.insync.replicas=2;4/3/log.dirs=/x;");
    s.buf[0] = '\0';
    kq_image_foreach_config(img, KQ_CONFIG_RESOURCE_BROKER, "3", cfg_cb, &s);
    assert_string_equal(s.buf, "4/3/log.dirs=/x;");

    /* NULL value deletes; deleting an absent key is a no-op. */
    apply_ok(img, rec_config(KQ_CONFIG_RESOURCE_TOPIC, "t", "retention.ms", NULL));
    assert_null(kq_image_config(img, KQ_CONFIG_RESOURCE_TOPIC, "t", "retention.ms"));
    apply_ok(img, rec_config(KQ_CONFIG_RESOURCE_TOPIC, "t", "retention.ms", NULL));
    /* Invalid: unknown resource type, broker resource that is not an id, bad topic name. */
    assert_int_equal(apply(img, rec_config(3, "t", "a", "b")), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(apply(img, rec_config(KQ_CONFIG_RESOURCE_BROKER, "b1", "a", "b")),
                     KQ_ERR_INVALID_REQUEST);
    assert_int_equal(apply(img, rec_config(KQ_CONFIG_RESOURCE_TOPIC, "a/b", "a", "b")),
                     KQ_ERR_INVALID_REQUEST);

    apply_ok(img, rec_feature("metadata.version", 21));
    apply_ok(img, rec_feature("kraft.version", 1));
    apply_ok(img, rec_feature("metadata.version", 22));
    assert_int_equal(kq_image_feature(img, "metadata.version"), 22);
    s.buf[0] = '\0';
    kq_image_foreach_feature(img, feat_cb, &s);
    assert_string_equal(s.buf, "kraft.version=1;metadata.version=22;");
    apply_ok(img, rec_feature("kraft.version", 0)); /* level 0 removes */
    assert_int_equal(kq_image_feature(img, "kraft.version"), 0);
    s.buf[0] = '\0';
    kq_image_foreach_feature(img, feat_cb, &s);
    assert_string_equal(s.buf, "metadata.version=22;");
    assert_int_equal(apply(img, rec_feature("x", -1)), KQ_ERR_INVALID_REQUEST);
    kq_image_free(img);
}

static void test_offsets_and_validation(void **state)
{
    kq_image *img = kq_image_new();
    kq_record r = {.type = KQ_REC_NOOP};
    kq_record bad;
    int32_t many[KQ_REC_MAX_REPLICAS + 1];
    static const int32_t dup[] = {1, 1}, neg[] = {1, -3};
    char err[256];
    char longname[KQ_REC_MAX_TOPIC_NAME + 2];

    (void)state;
    assert_int_equal(kq_image_offset(img), -1);
    assert_int_equal(kq_image_apply(img, 5, &r), 0);
    assert_int_equal(kq_image_offset(img), 5);
    assert_int_equal(kq_image_apply(img, 5, &r), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(kq_image_error(img), "not after"));
    assert_int_equal(kq_image_apply(img, 4, &r), KQ_ERR_INVALID_REQUEST);
    r.type = (kq_rec_type)99;
    assert_int_equal(kq_image_apply(img, 6, &r), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_image_apply(img, 6, NULL), KQ_ERR_INVALID_REQUEST);

    /* Topic names. */
    assert_true(kq_topic_name_valid("a.b-c_D9"));
    assert_false(kq_topic_name_valid("."));
    assert_false(kq_topic_name_valid(".."));
    assert_false(kq_topic_name_valid(""));
    assert_false(kq_topic_name_valid("a b"));
    assert_false(kq_topic_name_valid("a/b"));
    assert_false(kq_topic_name_valid(NULL));
    memset(longname, 'x', sizeof longname);
    longname[KQ_REC_MAX_TOPIC_NAME] = '\0';
    assert_true(kq_topic_name_valid(longname));
    longname[KQ_REC_MAX_TOPIC_NAME] = 'x';
    longname[KQ_REC_MAX_TOPIC_NAME + 1] = '\0';
    assert_false(kq_topic_name_valid(longname));

    /* Replica lists: too many, duplicates, negative ids, empty replicas. */
    for (int i = 0; i <= KQ_REC_MAX_REPLICAS; i++)
        many[i] = i;
    bad = rec_partition(0, 0, many, KQ_REC_MAX_REPLICAS + 1, many, 1, 0);
    assert_int_equal(kq_record_validate(&bad, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "entries"));
    kq_record_free(&bad);
    bad = rec_partition(0, 0, many, KQ_REC_MAX_REPLICAS, many, 1, 0);
    assert_int_equal(kq_record_validate(&bad, err, sizeof err), 0);
    kq_record_free(&bad);
    bad = rec_partition(0, 0, dup, 2, dup, 1, 1);
    assert_int_equal(kq_record_validate(&bad, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "twice"));
    kq_record_free(&bad);
    bad = rec_partition(0, 0, neg, 2, neg, 1, 1);
    assert_int_equal(kq_record_validate(&bad, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    kq_record_free(&bad);
    bad = rec_partition(0, 0, NULL, 0, NULL, 0, -1);
    assert_int_equal(kq_record_validate(&bad, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    kq_record_free(&bad);
    bad = rec_partition(0, -1, dup, 1, dup, 1, 1);
    assert_int_equal(kq_record_validate(&bad, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    kq_record_free(&bad);
    bad = rec_change(0, 0);
    bad.partition_change.leader = -3;
    assert_int_equal(kq_record_validate(&bad, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    bad.partition_change.leader = KQ_LEADER_UNCHANGED;
    bad.partition_change.leader_recovery_state = 2;
    assert_int_equal(kq_record_validate(&bad, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    kq_record_free(&bad);
    bad = rec_broker_change(1, 1, 2, 0);
    assert_int_equal(kq_record_validate(&bad, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    bad = rec_register(-1, 1, NULL);
    assert_int_equal(kq_record_validate(&bad, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    kq_record_free(&bad);
    bad = rec_register(1, 1, NULL);
    bad.register_broker.endpoints[0].port = 70000;
    assert_int_equal(kq_record_validate(&bad, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "port"));
    kq_record_free(&bad);
    bad = rec_topic("ok", 0);
    memset(bad.topic.topic_id, 0, 16);
    assert_int_equal(kq_record_validate(&bad, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "zero"));
    kq_record_free(&bad);
    assert_int_equal(kq_image_offset(img), 5);
    kq_image_free(img);
}

static void test_random_index_consistency(void **state)
{
    int by_type[32] = {0};

    (void)state;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        kq_image *img = kq_image_new();
        gen g = {seed};
        int applied = 0, rejected = 0;

        next_off = 0;
        for (int i = 0; i < 400; i++) {
            kq_record r;
            uint64_t before = kq_image_hash(img);
            int64_t off = kq_image_offset(img);
            int rc;

            gen_record(&g, img, &r);
            {
                kq_rec_type type = r.type;

                rc = apply(img, r);
                if (!rc)
                    by_type[type]++;
            }
            if (rc) {
                rejected++;
                assert_int_equal(kq_image_hash(img), before);
                assert_int_equal(kq_image_offset(img), off);
                assert_true(kq_image_error(img)[0] != '\0');
            } else {
                applied++;
            }
            if (i % 7 == 0)
                kq_image_commit(img, kq_image_offset(img));
            if (i % 20 == 0)
                check_index(img);
        }
        check_index(img);
        assert_true(applied > 100);
        assert_true(rejected > 0);
        kq_image_free(img);
    }
    /* Every kind of record was applied successfully many times. */
    for (int t = KQ_REC_REGISTER_BROKER; t <= KQ_REC_REMOVE_ACL; t++)
        if (by_type[t] < (t >= KQ_REC_ACL ? 5 : 20))
            fail_msg("only %d %s records applied", by_type[t], kq_rec_type_name((kq_rec_type)t));
}

static int count_acl_records(void *arg, const kq_record *r)
{
    *(int *)arg += r->type == KQ_REC_ACL;
    return 0;
}

/* ACL bindings: kept sorted by id, an id used twice or removed unknown is refused with the
 * image unchanged, rollback restores a removed binding, and the canonical stream carries them. */
static void test_acls(void **state)
{
    kq_image *img = kq_image_new();
    kq_image_counts counts;
    size_t n;
    const kq_acl *acls;
    uint64_t h;
    int in_stream = 0;

    (void)state;
    next_off = 0;
    assert_int_equal(apply(img, rec_acl(7, "orders", "User:alice", KQ_ACL_OP_READ, KQ_ACL_ALLOW)),
                     0);
    assert_int_equal(apply(img, rec_acl(3, NULL, "User:bob", KQ_ACL_OP_ALTER, KQ_ACL_DENY)), 0);
    acls = kq_image_acls(img, &n);
    assert_int_equal(n, 2);
    assert_int_equal(acls[0].id[15], 3);
    assert_string_equal(acls[0].resource_name, KQ_ACL_CLUSTER_NAME);
    assert_string_equal(acls[1].principal, "User:alice");
    kq_image_commit(img, kq_image_offset(img));
    h = kq_image_hash(img);

    assert_int_equal(apply(img, rec_acl(7, "x", "User:eve", KQ_ACL_OP_READ, KQ_ACL_ALLOW)),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(kq_image_error(img), "exists"));
    assert_int_equal(apply(img, rec_remove_acl(9)), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(kq_image_error(img), "no ACL"));
    assert_int_equal(kq_image_hash(img), h);

    assert_int_equal(apply(img, rec_remove_acl(7)), 0);
    acls = kq_image_acls(img, &n);
    assert_int_equal(n, 1);
    assert_true(kq_image_hash(img) != h);
    /* Uncommitted: the authorizer's (committed) view still has 7, and not an uncommitted 5 */
    assert_int_equal(apply(img, rec_acl(5, "x", "User:eve", KQ_ACL_OP_READ, KQ_ACL_ALLOW)), 0);
    {
        const kq_acl *view;
        kq_acl *scratch;
        bool has7 = false;

        assert_int_equal(kq_image_committed_acls(img, &view, &n, &scratch), 0);
        assert_non_null(scratch);
        assert_int_equal(n, 2);
        for (size_t i = 0; i < n; i++) {
            has7 |= view[i].id[15] == 7;
            assert_int_not_equal(view[i].id[15], 5);
        }
        assert_true(has7);
        free(scratch);
    }
    /* added and removed again, both uncommitted: in neither view */
    assert_int_equal(apply(img, rec_acl(9, "y", "User:eve", KQ_ACL_OP_READ, KQ_ACL_ALLOW)), 0);
    assert_int_equal(apply(img, rec_remove_acl(9)), 0);
    {
        const kq_acl *view;
        kq_acl *scratch;

        assert_int_equal(kq_image_committed_acls(img, &view, &n, &scratch), 0);
        assert_int_equal(n, 2);
        for (size_t i = 0; i < n; i++)
            assert_int_not_equal(view[i].id[15], 9);
        free(scratch);
    }
    assert_int_equal(kq_image_rollback(img, kq_image_committed_offset(img)), 0);
    acls = kq_image_acls(img, &n);
    assert_int_equal(n, 2);
    assert_string_equal(acls[1].resource_name, "orders");
    assert_int_equal(kq_image_hash(img), h);
    {
        const kq_acl *view;
        kq_acl *scratch;

        assert_int_equal(kq_image_committed_acls(img, &view, &n, &scratch), 0);
        assert_null(scratch); /* nothing uncommitted: the image's own list */
        assert_ptr_equal(view, kq_image_acls(img, &n));
        assert_int_equal(n, 2);
    }

    kq_image_get_counts(img, &counts);
    assert_int_equal(counts.acls, 2);
    assert_int_equal(kq_image_foreach_record(img, count_acl_records, &in_stream), 0);
    assert_int_equal(in_stream, 2);
    /* A binding kq could not enforce never reaches the image. */
    {
        kq_record bad = rec_acl(5, "orders", "User:alice", KQ_ACL_OP_READ, KQ_ACL_ALLOW);

        free((char *)bad.acl.host);
        bad.acl.host = strdup("10.0.0.1");
        assert_int_equal(apply(img, bad), KQ_ERR_INVALID_REQUEST);
        assert_non_null(strstr(kq_image_error(img), "host"));
    }
    kq_image_free(img);
}

static void test_rollback_exact(void **state)
{
    (void)state;
    for (uint64_t seed = 100; seed < 130; seed++) {
        kq_image *img = kq_image_new();
        gen g = {seed};
        uint64_t hash_at[600];
        int64_t base;

        next_off = 0;
        /* A committed prefix. */
        for (int i = 0; i < 150; i++) {
            kq_record r;

            gen_record(&g, img, &r);
            apply(img, r);
        }
        base = kq_image_offset(img);
        kq_image_commit(img, base);
        assert_int_equal(kq_image_undo_depth(img), 0);
        hash_at[0] = kq_image_hash(img);
        /* Uncommitted records; remember the hash after each offset. */
        for (int i = 0; i < 300; i++) {
            kq_record r;

            gen_record(&g, img, &r);
            apply(img, r);
            hash_at[kq_image_offset(img) - base] = kq_image_hash(img);
        }
        {
            /* Offsets are consecutive, so every offset in [base, top] has a hash. */
            int64_t top = kq_image_offset(img);
            int64_t mid = base + (int64_t)(gen_next(&g) % (uint64_t)(top - base + 1));

            assert_int_equal(kq_image_rollback(img, mid), 0);
            assert_int_equal(kq_image_offset(img), mid);
            assert_int_equal(kq_image_hash(img), hash_at[mid - base]);
            check_index(img);
        }
        assert_int_equal(kq_image_rollback(img, base - 1), KQ_ERR_INVALID_REQUEST);
        assert_int_equal(kq_image_rollback(img, base), 0);
        assert_int_equal(kq_image_offset(img), base);
        assert_int_equal(kq_image_hash(img), hash_at[0]);
        assert_int_equal(kq_image_undo_depth(img), 0);
        check_index(img);
        /* The image keeps working after a rollback. */
        for (int i = 0; i < 50; i++) {
            kq_record r;

            gen_record(&g, img, &r);
            apply(img, r);
        }
        check_index(img);
        kq_image_free(img); /* with uncommitted entries: no leak under ASan */
    }
}

/* Rollback to every intermediate offset restores the hash recorded there. */
static void test_rollback_each_offset(void **state)
{
    (void)state;
    for (uint64_t seed = 7; seed < 12; seed++) {
        gen g = {seed};
        kq_image *img = kq_image_new();
        uint64_t hashes[201];
        int64_t offs[201];
        int n = 0;

        next_off = 0;
        for (int i = 0; i < 200; i++) {
            kq_record r;

            gen_record(&g, img, &r);
            apply(img, r);
            offs[n] = kq_image_offset(img);
            hashes[n++] = kq_image_hash(img);
        }
        for (int i = n - 1; i >= 0; i -= 1 + (int)(gen_next(&g) % 9)) {
            assert_int_equal(kq_image_rollback(img, offs[i]), 0);
            assert_int_equal(kq_image_hash(img), hashes[i]);
        }
        check_index(img);
        kq_image_commit(img, kq_image_offset(img));
        assert_int_equal(kq_image_undo_depth(img), 0);
        kq_image_free(img);
    }
}

static void test_commit(void **state)
{
    kq_image *img = setup_cluster();
    static const int32_t r12[] = {1, 2};
    kq_record r;
    int64_t top;

    (void)state;
    kq_image_commit(img, 3);
    assert_int_equal(kq_image_committed_offset(img), 3);
    r = rec_change(0, 0);
    r.partition_change.has_isr = true;
    r.partition_change.isr = gen_list(r12, 2);
    apply_ok(img, r);
    top = kq_image_offset(img);
    /* Commit beyond the applied offset clamps; it never moves back. */
    kq_image_commit(img, top + 100);
    assert_int_equal(kq_image_committed_offset(img), top);
    kq_image_commit(img, 1);
    assert_int_equal(kq_image_committed_offset(img), top);
    assert_int_equal(kq_image_undo_depth(img), 0);
    assert_int_equal(kq_image_rollback(img, top - 1), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(kq_image_error(img), "committed"));
    assert_int_equal(kq_image_rollback(img, top), 0);

    kq_image_clear(img);
    assert_int_equal(kq_image_offset(img), -1);
    assert_null(kq_image_topic_by_name(img, "orders"));
    assert_null(kq_image_broker(img, 1));
    kq_image_free(img);
}

/* Collect the partitions a broker leads and move them away while changing the image. */
static void test_collect_and_move_leaders(void **state)
{
    kq_image *img = setup_cluster();
    kq_tp *tps;
    size_t n;

    (void)state;
    assert_int_equal(kq_image_broker_partitions(img, 1, KQ_ROLE_LEADER, &tps, &n), 0);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++) {
        kq_record r = rec_change(0, tps[i].partition);
        int32_t isr23[] = {2, 3};

        memcpy(r.partition_change.topic_id, tps[i].topic_id, 16);
        r.partition_change.leader = 2;
        r.partition_change.has_isr = true;
        r.partition_change.isr = gen_list(isr23, 2);
        apply_ok(img, r);
    }
    free(tps);
    assert_int_equal(kq_image_broker_count(img, 1, KQ_ROLE_LEADER), 0);
    assert_int_equal(kq_image_broker_count(img, 1, KQ_ROLE_ISR), 0);
    assert_int_equal(kq_image_broker_count(img, 2, KQ_ROLE_LEADER), 3);
    assert_int_equal(kq_image_broker_partitions(img, 9, KQ_ROLE_LEADER, &tps, &n), 0);
    assert_int_equal(n, 0);
    assert_null(tps);
    check_index(img);
    kq_image_free(img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_brokers),
        cmocka_unit_test(test_topics_and_partitions),
        cmocka_unit_test(test_partition_change_merge),
        cmocka_unit_test(test_remove_topic),
        cmocka_unit_test(test_configs_and_features),
        cmocka_unit_test(test_offsets_and_validation),
        cmocka_unit_test(test_random_index_consistency),
        cmocka_unit_test(test_rollback_exact),
        cmocka_unit_test(test_acls),
        cmocka_unit_test(test_rollback_each_offset),
        cmocka_unit_test(test_commit),
        cmocka_unit_test(test_collect_and_move_leaders),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
