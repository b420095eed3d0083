/*
 * The broker's replica manager: the pure delta (kq_rm_compute) over real images (new
 * partitions, leader and ISR changes, an older partition epoch ignored, stops after a topic
 * removal or a reassignment, a bad previous set refused), and the manager on a real kq_plog
 * (partition logs created, replicas stepped into the right role and epochs, partition epoch
 * recorded, logs deleted on stop, a stray log deleted at the first metadata, existing logs
 * reused after a restart).
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../image/image_gen.h"
#include "../store/store_test_util.h"
#include "kq/error.h"
#include "kq/image.h"
#include "kq/plog.h"
#include "kq/records.h"
#include "replica_manager.h"

static int64_t next_off;

static void apply_ok(kq_image *img, kq_record r)
{
    int rc = kq_image_apply(img, next_off, &r);
    if (rc != 0)
        fail_msg("apply failed: %d %s", rc, kq_image_error(img));
    next_off++;
    kq_record_free(&r);
    assert_int_equal(kq_image_commit(img, next_off - 1), 0);
}

/* Brokers 1..4; topic "orders" (id 0) with partitions 0..2 on 1,2,3, leader 1. */
static kq_image *setup_cluster(void)
{
    static const int32_t r123[] = {1, 2, 3};
    kq_image *img = kq_image_new();
    assert_non_null(img);
    next_off = 0;
    for (int32_t b = 1; b <= 4; b++)
        apply_ok(img, rec_register(b, 100 + b, NULL));
    apply_ok(img, rec_topic("orders", 0));
    for (int32_t p = 0; p < 3; p++)
        apply_ok(img, rec_partition(0, p, r123, 3, r123, 3, 1));
    return img;
}

typedef struct delta {
    kq_rm_partition *next;
    size_t n_next;
    kq_rm_change *ch;
    size_t n_ch;
    size_t skipped, stale;
} delta;

static void delta_free(delta *d)
{
    free(d->next);
    free(d->ch);
    memset(d, 0, sizeof(*d));
}

/* Compute for `node` from prev (may be NULL); prev is freed and replaced by the result. */
static void compute(const kq_image *img, int32_t node, delta *d)
{
    delta out;
    memset(&out, 0, sizeof(out));
    int rc = kq_rm_compute(img, node, d->next, d->n_next, &out.next, &out.n_next, &out.ch,
                           &out.n_ch, &out.skipped, &out.stale);
    assert_int_equal(rc, 0);
    delta_free(d);
    *d = out;
}

static void test_new_partitions(void **state)
{
    (void)state;
    kq_image *img = setup_cluster();
    delta d;
    memset(&d, 0, sizeof(d));

    compute(img, 1, &d);
    assert_int_equal(d.n_next, 3);
    assert_int_equal(d.n_ch, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(d.ch[i].kind, KQ_RM_BECOME_LEADER);
        assert_int_equal(d.ch[i].p.partition, (int32_t)i);
        assert_string_equal(d.ch[i].p.topic, "orders");
        assert_int_equal(d.ch[i].p.leader, 1);
        assert_int_equal(d.ch[i].p.n_replicas, 3);
        assert_int_equal(d.ch[i].p.replicas[2], 3);
        assert_int_equal(d.ch[i].p.n_isr, 3);
        assert_int_equal(d.next[i].role, KQ_REPLICA_LEADER);
    }
    /* The same image again: nothing to do, the same set. */
    compute(img, 1, &d);
    assert_int_equal(d.n_ch, 0);
    assert_int_equal(d.n_next, 3);
    delta_free(&d);

    compute(img, 2, &d);
    assert_int_equal(d.n_ch, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(d.ch[i].kind, KQ_RM_BECOME_FOLLOWER);
        assert_int_equal(d.ch[i].p.role, KQ_REPLICA_FOLLOWER);
        assert_int_equal(d.ch[i].p.leader, 1);
    }
    delta_free(&d);

    /* A partition with more replicas than a kq_replica supports is skipped, not hosted. */
    int32_t wide[KQ_REPLICA_MAX_REPLICAS + 1];
    for (int i = 0; i <= KQ_REPLICA_MAX_REPLICAS; i++)
        wide[i] = i + 1;
    apply_ok(img, rec_topic("wide", 2));
    apply_ok(img, rec_partition(2, 0, wide, KQ_REPLICA_MAX_REPLICAS + 1, wide, 1, 1));
    compute(img, 1, &d);
    assert_int_equal(d.skipped, 1);
    assert_int_equal(d.n_next, 3);
    assert_int_equal(d.n_ch, 3);
    delta_free(&d);

    /* Broker 4 hosts nothing. */
    compute(img, 4, &d);
    assert_int_equal(d.n_ch, 0);
    assert_int_equal(d.n_next, 0);
    assert_string_equal(kq_rm_change_name(KQ_RM_STOP), "stop");
    kq_image_free(img);
}

static void test_leader_and_isr_changes(void **state)
{
    (void)state;
    static const int32_t r12[] = {1, 2};
    kq_image *img = setup_cluster();
    delta d1, d2;
    memset(&d1, 0, sizeof(d1));
    memset(&d2, 0, sizeof(d2));
    compute(img, 1, &d1);
    compute(img, 2, &d2);

    /* ISR shrink of partition 1: an update (same leader epoch) for both. */
    kq_record r = rec_change(0, 1);
    r.partition_change.has_isr = true;
    r.partition_change.isr = gen_list(r12, 2);
    apply_ok(img, r);
    compute(img, 1, &d1);
    assert_int_equal(d1.n_ch, 1);
    assert_int_equal(d1.ch[0].kind, KQ_RM_UPDATE);
    assert_int_equal(d1.ch[0].p.partition, 1);
    assert_int_equal(d1.ch[0].p.partition_epoch, 1);
    assert_int_equal(d1.ch[0].p.n_isr, 2);
    compute(img, 2, &d2);
    assert_int_equal(d2.n_ch, 1);
    assert_int_equal(d2.ch[0].kind, KQ_RM_UPDATE);

    /* Leader of partition 2 moves to broker 2: 1 follows, 2 leads, at leader epoch 1. */
    r = rec_change(0, 2);
    r.partition_change.leader = 2;
    apply_ok(img, r);
    compute(img, 1, &d1);
    assert_int_equal(d1.n_ch, 1);
    assert_int_equal(d1.ch[0].kind, KQ_RM_BECOME_FOLLOWER);
    assert_int_equal(d1.ch[0].p.leader, 2);
    assert_int_equal(d1.ch[0].p.leader_epoch, 1);
    assert_int_equal(d1.next[2].role, KQ_REPLICA_FOLLOWER);
    compute(img, 2, &d2);
    assert_int_equal(d2.n_ch, 1);
    assert_int_equal(d2.ch[0].kind, KQ_RM_BECOME_LEADER);
    assert_int_equal(d2.ch[0].p.leader_epoch, 1);

    /* Leader -> none: a follower change without a leader. */
    r = rec_change(0, 2);
    r.partition_change.leader = KQ_NO_LEADER;
    apply_ok(img, r);
    compute(img, 2, &d2);
    assert_int_equal(d2.n_ch, 1);
    assert_int_equal(d2.ch[0].kind, KQ_RM_BECOME_FOLLOWER);
    assert_int_equal(d2.ch[0].p.leader, -1);
    assert_int_equal(d2.ch[0].p.leader_epoch, 2);

    delta_free(&d1);
    delta_free(&d2);
    kq_image_free(img);
}

/* A Config record that changes a hosted partition's min.insync.replicas (topic or cluster
 * default; set or delete) is an UPDATE for every replica it governs, in the same round, with
 * no partition change (issue 8, item 1). Precedence: topic, cluster default. */
static void test_min_isr_config_change_is_an_update(void **state)
{
    (void)state;
    kq_image *img = setup_cluster();
    delta d1, d4;
    memset(&d1, 0, sizeof(d1));
    memset(&d4, 0, sizeof(d4));
    compute(img, 1, &d1);
    assert_int_equal(d1.next[0].min_isr, 0); /* none set: the static key applies */
    compute(img, 4, &d4);                    /* broker 4 hosts nothing */

    struct {
        int type;
        const char *res, *value;
        int32_t want;
    } steps[] = {
        {KQ_CONFIG_RESOURCE_BROKER, "", "2", 2},       /* cluster default */
        {KQ_CONFIG_RESOURCE_TOPIC, "orders", "4", 4},  /* the topic wins over it */
        {KQ_CONFIG_RESOURCE_TOPIC, "orders", NULL, 2}, /* deleted: back to the default */
        {KQ_CONFIG_RESOURCE_BROKER, "", NULL, 0},
    };
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
        apply_ok(img,
                 rec_config(steps[s].type, steps[s].res, "min.insync.replicas", steps[s].value));
        compute(img, 1, &d1);
        assert_int_equal(d1.n_ch, 3);
        for (size_t i = 0; i < 3; i++) {
            assert_int_equal(d1.ch[i].kind, KQ_RM_UPDATE);
            assert_int_equal(d1.ch[i].p.min_isr, steps[s].want);
            assert_int_equal(d1.ch[i].p.partition_epoch, 0);
        }
        compute(img, 4, &d4);
        assert_int_equal(d4.n_ch, 0);
    }
    /* A per-broker value (the controller refuses it; an earlier kq may have stored one) is not
     * read: the rule is the same everywhere. */
    apply_ok(img, rec_config(KQ_CONFIG_RESOURCE_BROKER, "1", "min.insync.replicas", "3"));
    compute(img, 1, &d1);
    assert_int_equal(d1.n_ch, 0);
    /* A config change on a partition whose epoch we are already past still reaches it. */
    d1.next[0].partition_epoch = 5;
    apply_ok(img, rec_config(KQ_CONFIG_RESOURCE_TOPIC, "orders", "min.insync.replicas", "2"));
    compute(img, 1, &d1);
    assert_int_equal(d1.n_ch, 3);
    assert_int_equal(d1.stale, 1);
    assert_int_equal(d1.next[0].partition_epoch, 5);
    assert_int_equal(d1.next[0].min_isr, 2);
    delta_free(&d1);
    delta_free(&d4);
    kq_image_free(img);
}

static void test_older_partition_epoch_ignored(void **state)
{
    (void)state;
    kq_image *img = setup_cluster();
    delta d;
    memset(&d, 0, sizeof(d));
    compute(img, 1, &d);
    /* We acted on partition epoch 5 of partition 0 already (e.g. from a newer image). */
    d.next[0].partition_epoch = 5;
    d.next[0].leader_epoch = 3;
    compute(img, 1, &d);
    assert_int_equal(d.n_ch, 0);
    assert_int_equal(d.stale, 1);
    assert_int_equal(d.n_next, 3);
    assert_int_equal(d.next[0].partition_epoch, 5); /* kept, not rolled back */
    assert_int_equal(d.next[0].leader_epoch, 3);
    assert_int_equal(d.next[1].partition_epoch, 0);
    delta_free(&d);
    kq_image_free(img);
}

static void test_stops(void **state)
{
    (void)state;
    static const int32_t r24[] = {2, 4}, r14[] = {1, 4};
    kq_image *img = setup_cluster();
    delta d;
    memset(&d, 0, sizeof(d));
    compute(img, 1, &d);

    /* Reassign partition 0 to 2,4 (leader 2): broker 1 stops it. */
    kq_record r = rec_change(0, 0);
    r.partition_change.has_replicas = true;
    r.partition_change.replicas = gen_list(r24, 2);
    r.partition_change.has_isr = true;
    r.partition_change.isr = gen_list(r24, 2);
    r.partition_change.leader = 2;
    apply_ok(img, r);
    compute(img, 1, &d);
    assert_int_equal(d.n_ch, 1);
    assert_int_equal(d.ch[0].kind, KQ_RM_STOP);
    assert_int_equal(d.ch[0].p.partition, 0);
    assert_int_equal(d.ch[0].p.role, KQ_REPLICA_LEADER); /* the last state acted on */
    assert_int_equal(d.n_next, 2);

    /* Remove "orders" and create "logs" (id 1, after it in id order): the new partition's
     * change comes first, then the stops. */
    apply_ok(img, rec_topic("logs", 1));
    apply_ok(img, rec_partition(1, 0, r14, 2, r14, 2, 4));
    apply_ok(img, rec_remove_topic(0));
    compute(img, 1, &d);
    assert_int_equal(d.n_ch, 3);
    assert_int_equal(d.ch[0].kind, KQ_RM_BECOME_FOLLOWER);
    assert_string_equal(d.ch[0].p.topic, "logs");
    assert_int_equal(d.ch[0].p.leader, 4);
    assert_int_equal(d.ch[1].kind, KQ_RM_STOP);
    assert_int_equal(d.ch[1].p.partition, 1);
    assert_int_equal(d.ch[2].kind, KQ_RM_STOP);
    assert_int_equal(d.ch[2].p.partition, 2);
    assert_int_equal(d.n_next, 1);
    delta_free(&d);
    kq_image_free(img);
}

static void test_bad_prev_refused(void **state)
{
    (void)state;
    kq_image *img = setup_cluster();
    delta d;
    memset(&d, 0, sizeof(d));
    compute(img, 1, &d);
    kq_rm_partition swapped[2] = {d.next[1], d.next[0]};
    kq_rm_partition *next = NULL;
    kq_rm_change *ch = NULL;
    size_t n_next = 9, n_ch = 9, skipped = 9, stale = 9;
    assert_int_equal(
        kq_rm_compute(img, 1, swapped, 2, &next, &n_next, &ch, &n_ch, &skipped, &stale),
        KQ_ERR_INVALID_REQUEST);
    assert_null(next);
    assert_null(ch);
    assert_int_equal(n_next, 0);
    assert_int_equal(n_ch, 0);
    kq_rm_partition dup[2] = {d.next[0], d.next[0]};
    assert_int_equal(kq_rm_compute(img, 1, dup, 2, &next, &n_next, &ch, &n_ch, &skipped, &stale),
                     KQ_ERR_INVALID_REQUEST);
    delta_free(&d);
    kq_image_free(img);
}

/* ---- the manager on a real partition-log directory ---- */

typedef struct fixture {
    char root[PATH_MAX - 16];
    char dir[PATH_MAX];
    kq_plog *p;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (f == NULL || tmpdir_make(f->root, sizeof(f->root)) != 0)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "%s/data", f->root);
    char err[512];
    if (kq_plog_format(f->dir, TEST_CLUSTER_ID, 1, NULL, err, sizeof(err)) != 0 ||
        kq_plog_open(f->dir, TEST_CLUSTER_ID, 1, &f->p, err, sizeof(err)) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    kq_plog_close(f->p);
    tmpdir_remove(f->root);
    free(f);
    return 0;
}

static size_t plog_count(kq_plog *p)
{
    kq_plog_tp *tps = NULL;
    size_t n = 0;
    assert_int_equal(kq_plog_list(p, &tps, &n), 0);
    free(tps);
    return n;
}

static kq_plog_state plog_state(kq_plog *p, int topic, int32_t partition)
{
    kq_plog_tp tp;
    kq_plog_state st;
    gen_tid(topic, tp.topic_id);
    tp.partition = partition;
    assert_int_equal(kq_plog_state_of(p, &tp, &st), 0);
    return st;
}

static kq_replica_status replica_status(const kq_rm *rm, size_t i)
{
    kq_replica_status st;
    const kq_replica *r = kq_rm_replica(rm, i);
    assert_non_null(r);
    kq_replica_get_status(r, &st);
    return st;
}

static void test_manager(void **state)
{
    fixture *f = *state;
    char err[512] = "";
    kq_image *img = setup_cluster();
    kq_rm_config cfg = {.node_id = 1, .replica_lag_time_max_ms = 30000, .min_insync_replicas = 1};
    kq_rm *rm = kq_rm_new(&cfg, f->p);
    kq_rm_counts c;
    size_t n;
    assert_non_null(rm);
    apply_ok(img, rec_config(KQ_CONFIG_RESOURCE_TOPIC, "orders", "min.insync.replicas", "2"));

    /* A log left by a partition this broker no longer hosts (stopped while it was down). */
    kq_plog_tp stray;
    gen_tid(7, stray.topic_id);
    stray.partition = 0;
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &stray, 3, 0), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    assert_int_equal(plog_count(f->p), 1);

    assert_int_equal(kq_rm_on_metadata(rm, img, 1000, err, sizeof(err)), 0);
    kq_rm_get_counts(rm, &c);
    assert_int_equal(c.leaders, 3);
    assert_int_equal(c.followers, 0);
    assert_int_equal(c.changes, 3);
    assert_int_equal(plog_count(f->p), 3);
    kq_rm_partitions(rm, &n);
    assert_int_equal(n, 3);
    kq_replica_status st = replica_status(rm, 0);
    assert_int_equal(st.role, KQ_REPLICA_LEADER);
    assert_int_equal(st.leader_epoch, 0);
    assert_int_equal(st.n_isr, 3);
    assert_int_equal(st.min_insync_replicas, 2); /* the topic's config */
    assert_int_equal(plog_state(f->p, 0, 0).last_epoch, 0);

    /* Leader of partition 2 moves to broker 2: this broker follows at leader epoch 1. */
    kq_record r = rec_change(0, 2);
    r.partition_change.leader = 2;
    apply_ok(img, r);
    assert_int_equal(kq_rm_on_metadata(rm, img, 2000, err, sizeof(err)), 0);
    kq_rm_get_counts(rm, &c);
    assert_int_equal(c.leaders, 2);
    assert_int_equal(c.followers, 1);
    assert_int_equal(c.changes, 4);
    st = replica_status(rm, 2);
    assert_int_equal(st.role, KQ_REPLICA_FOLLOWER);
    assert_int_equal(st.leader_id, 2);
    assert_int_equal(st.leader_epoch, 1);
    assert_int_equal(st.partition_epoch, 1);
    assert_int_equal(plog_state(f->p, 0, 2).partition_epoch, 1);

    /* Nothing new: no change counted. */
    assert_int_equal(kq_rm_on_metadata(rm, img, 2500, err, sizeof(err)), 0);
    kq_rm_get_counts(rm, &c);
    assert_int_equal(c.changes, 4);

    /* A restart: a new manager on the same logs starts replicas on them. */
    kq_rm_free(rm);
    rm = kq_rm_new(&cfg, f->p);
    assert_non_null(rm);
    assert_int_equal(kq_rm_on_metadata(rm, img, 3000, err, sizeof(err)), 0);
    kq_rm_get_counts(rm, &c);
    assert_int_equal(c.leaders, 2);
    assert_int_equal(c.followers, 1);
    assert_int_equal(plog_count(f->p), 3);

    /* Topic removed: replicas stopped and their logs deleted. */
    apply_ok(img, rec_remove_topic(0));
    assert_int_equal(kq_rm_on_metadata(rm, img, 4000, err, sizeof(err)), 0);
    kq_rm_get_counts(rm, &c);
    assert_int_equal(c.leaders, 0);
    assert_int_equal(c.followers, 0);
    assert_int_equal(plog_count(f->p), 0);
    kq_rm_partitions(rm, &n);
    assert_int_equal(n, 0);
    assert_null(kq_rm_replica(rm, 0));

    kq_rm_free(rm);
    kq_image_free(img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_partitions),
        cmocka_unit_test(test_leader_and_isr_changes),
        cmocka_unit_test(test_min_isr_config_change_is_an_update),
        cmocka_unit_test(test_older_partition_epoch_ignored),
        cmocka_unit_test(test_stops),
        cmocka_unit_test(test_bad_prev_refused),
        cmocka_unit_test_setup_teardown(test_manager, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
