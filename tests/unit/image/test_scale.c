/*
 * kq_image at scale: 100 brokers, 1,000 topics x 100 partitions (100,000 partitions, RF 3).
 * Checks the counts and the broker index, moves every leadership of one broker away, and
 * prints the memory per partition (no timing or memory asserts: machines are shared).
 */
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "image_gen.h"
#include "kq/error.h"
#include "kq/image.h"
#include "kq/records.h"

#define N_BROKERS 100
#define N_TOPICS 1000
#define N_PARTS 100

static void test_scale(void **state)
{
    struct mallinfo2 m0, m1;
    kq_image *img;
    int64_t off = 0;
    kq_image_counts c;
    kq_tp *tps;
    size_t n;
    uint64_t total_leaders = 0;

    (void)state;
    m0 = mallinfo2();
    img = kq_image_new();
    assert_non_null(img);
    for (int32_t b = 0; b < N_BROKERS; b++) {
        kq_record r = rec_register(b, b, NULL);

        assert_int_equal(kq_image_apply(img, off++, &r), 0);
        kq_record_free(&r);
    }
    for (int t = 0; t < N_TOPICS; t++) {
        char name[32];
        kq_record r;

        snprintf(name, sizeof name, "topic-%04d", t);
        r = (kq_record){.type = KQ_REC_TOPIC};
        r.topic.name = name;
        memset(r.topic.topic_id, 0, 16);
        memcpy(r.topic.topic_id, &t, sizeof t);
        r.topic.topic_id[15] = 1;
        assert_int_equal(kq_image_apply(img, off++, &r), 0);
        for (int32_t p = 0; p < N_PARTS; p++) {
            int32_t rep[3];
            kq_record pr = {.type = KQ_REC_PARTITION};

            for (int k = 0; k < 3; k++)
                rep[k] = (t + p + k * 7) % N_BROKERS;
            memcpy(pr.partition.topic_id, r.topic.topic_id, 16);
            pr.partition.partition_id = p;
            pr.partition.replicas = (kq_rec_ids){rep, 3};
            pr.partition.isr = (kq_rec_ids){rep, 3};
            pr.partition.leader = rep[0];
            if (kq_image_apply(img, off++, &pr))
                fail_msg("%s", kq_image_error(img));
        }
        kq_image_commit(img, off - 1); /* as a standby would */
    }
    m1 = mallinfo2();
    kq_image_get_counts(img, &c);
    assert_int_equal(c.brokers, N_BROKERS);
    assert_int_equal(c.topics, N_TOPICS);
    assert_int_equal(c.partitions, (uint64_t)N_TOPICS * N_PARTS);
    assert_int_equal(c.offline_partitions, 0);
    assert_int_equal(c.preferred_imbalance, 0);
    for (int32_t b = 0; b < N_BROKERS; b++) {
        total_leaders += kq_image_broker_count(img, b, KQ_ROLE_LEADER);
        assert_int_equal(kq_image_broker_count(img, b, KQ_ROLE_REPLICA), 3000);
        assert_int_equal(kq_image_broker_count(img, b, KQ_ROLE_ISR), 3000);
    }
    assert_int_equal(total_leaders, (uint64_t)N_TOPICS * N_PARTS);

    {
        size_t est = kq_image_memory_bytes(img);
        size_t used = m1.uordblks > m0.uordblks ? m1.uordblks - m0.uordblks : 0;

        print_message("image: %llu partitions, %zu bytes allocated by the image "
                      "(%.1f bytes/partition); malloc in use %zu bytes (%.1f bytes/partition%s)\n",
                      (unsigned long long)c.partitions, est, (double)est / (double)c.partitions,
                      used, (double)used / (double)c.partitions,
                      used ? "" : ", not measurable under this allocator");
        assert_true(est > 0);
    }

    /* Fence-like pass: collect what broker 5 leads and move each leadership to replicas[1]. */
    assert_int_equal(kq_image_broker_partitions(img, 5, KQ_ROLE_LEADER, &tps, &n), 0);
    assert_int_equal(n, 1000);
    for (size_t i = 0; i < n; i++) {
        const kq_partition *p = kq_image_partition(img, tps[i].topic_id, tps[i].partition);
        kq_record r = {.type = KQ_REC_PARTITION_CHANGE};
        int32_t isr[2];

        assert_non_null(p);
        isr[0] = kq_partition_replicas(p)[1];
        isr[1] = kq_partition_replicas(p)[2];
        memcpy(r.partition_change.topic_id, tps[i].topic_id, 16);
        r.partition_change.partition_id = tps[i].partition;
        r.partition_change.leader = isr[0];
        r.partition_change.has_isr = true;
        r.partition_change.isr = (kq_rec_ids){isr, 2};
        r.partition_change.leader_recovery_state = KQ_RECOVERY_UNCHANGED;
        assert_int_equal(kq_image_apply(img, off++, &r), 0);
    }
    free(tps);
    assert_int_equal(kq_image_broker_count(img, 5, KQ_ROLE_LEADER), 0);
    assert_int_equal(kq_image_broker_count(img, 5, KQ_ROLE_ISR), 2000);
    kq_image_get_counts(img, &c);
    assert_int_equal(c.preferred_imbalance, 1000);
    assert_int_equal(c.under_replicated, 1000);
    /* Roll the whole pass back (as a deposed active controller would). */
    assert_int_equal(kq_image_rollback(img, off - 1001), 0);
    assert_int_equal(kq_image_broker_count(img, 5, KQ_ROLE_LEADER), 1000);
    kq_image_get_counts(img, &c);
    assert_int_equal(c.preferred_imbalance, 0);
    kq_image_free(img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
