/*
 * The controller-mode invariant checkers of the simulator (sim_inv.h) catch what they claim:
 * a leader outside the ISR, an ELR overlapping the ISR, a fenced or unregistered broker added
 * to an ISR, epochs going down (through an image rollback), and pass on healthy images.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kq/error.h"
#include "kq/image.h"
#include "kq/records.h"
#include "sim_inv.h"

static const uint8_t TOPIC[16] = {7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
static int64_t next_off;

static void apply_ok(kq_image *img, const kq_record *r)
{
    int rc = kq_image_apply(img, next_off, r);
    if (rc)
        fail_msg("apply failed: %s: %s", kq_err_name(rc), kq_image_error(img));
    next_off++;
}

static kq_record rec_broker(int32_t id, bool fenced)
{
    static kq_rec_endpoint ep = {.name = "PLAINTEXT", .host = "h", .port = 9092};
    kq_record r;
    memset(&r, 0, sizeof r);
    r.type = KQ_REC_REGISTER_BROKER;
    r.register_broker.broker_id = id;
    r.register_broker.incarnation_id[0] = (uint8_t)id;
    r.register_broker.broker_epoch = next_off;
    r.register_broker.endpoints = &ep;
    r.register_broker.n_endpoints = 1;
    r.register_broker.fenced = fenced;
    r.register_broker.registration_offset = -1;
    return r;
}

static kq_record rec_partition(int32_t pid, int32_t *rep, int nrep, int32_t *isr, int nisr,
                               int32_t *elr, int nelr, int32_t leader)
{
    kq_record r;
    memset(&r, 0, sizeof r);
    r.type = KQ_REC_PARTITION;
    r.partition.partition_id = pid;
    memcpy(r.partition.topic_id, TOPIC, 16);
    r.partition.replicas = (kq_rec_ids){rep, nrep};
    r.partition.isr = (kq_rec_ids){isr, nisr};
    r.partition.elr = (kq_rec_ids){elr, nelr};
    r.partition.leader = leader;
    return r;
}

static kq_record rec_isr_change(int32_t pid, int32_t *isr, int nisr)
{
    kq_record r;
    memset(&r, 0, sizeof r);
    r.type = KQ_REC_PARTITION_CHANGE;
    r.partition_change.partition_id = pid;
    memcpy(r.partition_change.topic_id, TOPIC, 16);
    r.partition_change.has_isr = true;
    r.partition_change.isr = (kq_rec_ids){isr, nisr};
    r.partition_change.leader = KQ_LEADER_UNCHANGED;
    r.partition_change.leader_recovery_state = KQ_RECOVERY_UNCHANGED;
    return r;
}

/* Brokers 1, 2 unfenced, 3 fenced; topic "t" with partition 0 replicas 1,2,3 ISR 1,2 leader 1. */
static kq_image *cluster(void)
{
    kq_image *img = kq_image_new();
    assert_non_null(img);
    next_off = 0;
    for (int32_t b = 1; b <= 3; b++) {
        kq_record r = rec_broker(b, b == 3);
        apply_ok(img, &r);
    }
    kq_record t;
    memset(&t, 0, sizeof t);
    t.type = KQ_REC_TOPIC;
    t.topic.name = "t";
    memcpy(t.topic.topic_id, TOPIC, 16);
    apply_ok(img, &t);
    int32_t rep[] = {1, 2, 3}, isr[] = {1, 2};
    kq_record p = rec_partition(0, rep, 3, isr, 2, NULL, 0, 1);
    apply_ok(img, &p);
    return img;
}

static void test_healthy_image_passes(void **state)
{
    (void)state;
    char why[256] = "";
    kq_image *img = cluster();
    assert_int_equal(kq_sim_check_partitions(img, why, sizeof why), 0);
    kq_sim_epochs *e = kq_sim_epochs_new();
    assert_non_null(e);
    assert_int_equal(kq_sim_epochs_check(e, img, why, sizeof why), 0);
    assert_int_equal(kq_sim_epochs_check(e, img, why, sizeof why), 0);
    kq_sim_epochs_free(e);
    kq_image_free(img);
}

static void test_leader_outside_isr_is_caught(void **state)
{
    (void)state;
    char why[256] = "";
    kq_image *img = cluster();
    int32_t rep[] = {1, 2}, isr[] = {1};
    kq_record p = rec_partition(1, rep, 2, isr, 1, NULL, 0, 2); /* leader 2, ISR {1} */
    apply_ok(img, &p);
    assert_int_equal(kq_sim_check_partitions(img, why, sizeof why), 1);
    assert_non_null(strstr(why, "leader 2 is not in the ISR"));
    assert_non_null(strstr(why, "t-1"));
    kq_image_free(img);
}

static void test_elr_overlapping_isr_is_caught(void **state)
{
    (void)state;
    char why[256] = "";
    kq_image *img = cluster();
    int32_t rep[] = {1, 2}, isr[] = {1}, elr[] = {1};
    kq_record p = rec_partition(1, rep, 2, isr, 1, elr, 1, 1);
    if (kq_image_apply(img, next_off, &p) != 0) {
        /* the image itself refuses such a record: nothing left for the checker to catch */
        kq_image_free(img);
        skip();
    }
    assert_int_equal(kq_sim_check_partitions(img, why, sizeof why), 1);
    assert_non_null(strstr(why, "both the ISR and the ELR"));
    kq_image_free(img);
}

static void test_fenced_or_unknown_isr_addition_is_caught(void **state)
{
    (void)state;
    char why[256] = "";
    kq_image *img = cluster();
    int32_t add_fenced[] = {1, 2, 3}, add_unknown[] = {1, 9}, shrink[] = {1}, same[] = {2, 1};
    kq_record r = rec_isr_change(0, add_fenced, 3);
    assert_int_equal(kq_sim_check_isr_additions(img, &r, why, sizeof why), 1);
    assert_non_null(strstr(why, "fenced broker 3"));
    r = rec_isr_change(0, add_unknown, 2);
    assert_int_equal(kq_sim_check_isr_additions(img, &r, why, sizeof why), 1);
    assert_non_null(strstr(why, "unregistered broker 9"));
    /* shrinking, or keeping members, is always fine */
    r = rec_isr_change(0, shrink, 1);
    assert_int_equal(kq_sim_check_isr_additions(img, &r, why, sizeof why), 0);
    r = rec_isr_change(0, same, 2);
    assert_int_equal(kq_sim_check_isr_additions(img, &r, why, sizeof why), 0);
    /* a new partition may not start with a fenced ISR member either */
    int32_t rep[] = {2, 3}, isr[] = {2, 3};
    kq_record p = rec_partition(1, rep, 2, isr, 2, NULL, 0, 2);
    assert_int_equal(kq_sim_check_isr_additions(img, &p, why, sizeof why), 1);
    assert_non_null(strstr(why, "fenced broker 3"));
    kq_image_free(img);
}

static void test_epochs_going_down_are_caught(void **state)
{
    (void)state;
    char why[256] = "";
    kq_image *img = cluster();
    kq_image_commit(img, next_off - 1);
    int64_t committed = next_off - 1;
    kq_sim_epochs *e = kq_sim_epochs_new();
    assert_non_null(e);
    assert_int_equal(kq_sim_epochs_check(e, img, why, sizeof why), 0);
    int32_t shrink[] = {1};
    kq_record r = rec_isr_change(0, shrink, 1);
    apply_ok(img, &r); /* partition epoch 0 -> 1 */
    assert_int_equal(kq_sim_epochs_check(e, img, why, sizeof why), 0);
    assert_int_equal(kq_image_rollback(img, committed), 0); /* back to epoch 0 */
    assert_int_equal(kq_sim_epochs_check(e, img, why, sizeof why), 1);
    assert_non_null(strstr(why, "partition epoch 1 -> 0"));
    kq_sim_epochs_free(e);
    kq_image_free(img);
}

/* dsim's same-epoch self-test, as a table: a new leader in an old leader epoch is caught,
 * one leader per epoch (again and again, across partitions and topics, after a gap) is not. */
static void test_two_leaders_in_one_epoch_are_caught(void **state)
{
    (void)state;
    char why[256] = "";
    uint8_t t1[16] = {1}, t2[16] = {2};
    kq_sim_leaders *l = kq_sim_leaders_new();
    assert_non_null(l);
    assert_int_equal(kq_sim_leaders_note(l, t1, 0, 0, 101, why, sizeof why), 0);
    assert_int_equal(kq_sim_leaders_note(l, t1, 0, 0, 101, why, sizeof why), 0);
    assert_int_equal(kq_sim_leaders_note(l, t1, 0, 1, 102, why, sizeof why), 0);
    assert_int_equal(kq_sim_leaders_note(l, t1, 1, 0, 103, why, sizeof why), 0);
    assert_int_equal(kq_sim_leaders_note(l, t2, 0, 0, 102, why, sizeof why), 0);
    assert_int_equal(kq_sim_leaders_note(l, t1, 0, 500, 103, why, sizeof why), 0);
    assert_int_equal(kq_sim_leaders_note(l, t1, 0, -1, 104, why, sizeof why), 0);
    assert_int_equal(kq_sim_leaders_note(l, t1, 0, 1, 103, why, sizeof why), 1);
    assert_non_null(strstr(why, "brokers 102 and 103 both led leader epoch 1"));
    assert_int_equal(kq_sim_leaders_note(l, t1, 0, 500, 101, why, sizeof why), 1);
    assert_non_null(strstr(why, "leader epoch 500"));
    kq_sim_leaders_free(l);
}

static void test_same_set(void **state)
{
    (void)state;
    int32_t a[] = {1, 2, 3}, b[] = {3, 1, 2}, c[] = {1, 2}, d[] = {1, 2, 4};
    assert_true(kq_sim_same_set(a, 3, b, 3));
    assert_false(kq_sim_same_set(a, 3, c, 2));
    assert_false(kq_sim_same_set(a, 3, d, 3));
    assert_true(kq_sim_same_set(NULL, 0, NULL, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthy_image_passes),
        cmocka_unit_test(test_leader_outside_isr_is_caught),
        cmocka_unit_test(test_elr_overlapping_isr_is_caught),
        cmocka_unit_test(test_fenced_or_unknown_isr_addition_is_caught),
        cmocka_unit_test(test_epochs_going_down_are_caught),
        cmocka_unit_test(test_two_leaders_in_one_epoch_are_caught),
        cmocka_unit_test(test_same_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
