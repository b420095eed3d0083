/* The broker's metadata image (broker-agent/metadata.h): batches apply once and in order, a
 * gap or a bad record is an error that changes nothing, a snapshot replaces the image, and
 * "caught up" waits for the first high watermark seen. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kq/codec.h"
#include "kq/error.h"
#include "kq/records.h"
#include "metadata.h"

/* A batch of `n` topic records named <prefix>0, <prefix>1, ... */
static void topics(kq_buf *b, const char *prefix, int n)
{
    char err[256], name[32];
    for (int i = 0; i < n; i++) {
        kq_record r;
        memset(&r, 0, sizeof r);
        r.type = KQ_REC_TOPIC;
        snprintf(name, sizeof name, "%s%d", prefix, i);
        r.topic.name = name;
        memset(r.topic.topic_id, 0, 16);
        r.topic.topic_id[0] = (uint8_t)prefix[0];
        r.topic.topic_id[1] = (uint8_t)(i + 1);
        assert_int_equal(kq_record_append(b, &r, err, sizeof err), 0);
    }
}

static void test_batches_apply_once_in_order(void **state)
{
    (void)state;
    kq_bmeta m;
    char err[256];
    kq_buf a = {0}, b = {0};
    assert_int_equal(kq_bmeta_init(&m), 0);
    topics(&a, "a", 2);
    topics(&b, "b", 3);
    assert_int_equal(kq_bmeta_apply_batch(&m, 0, 2, a.data, a.len, err, sizeof err), 0);
    assert_int_equal(m.applied_end, 2);
    /* the same batch again (a read that started earlier): skipped */
    assert_int_equal(kq_bmeta_apply_batch(&m, 0, 2, a.data, a.len, err, sizeof err), 0);
    assert_int_equal(m.applied_end, 2);
    /* a gap: refused, nothing applied */
    assert_int_not_equal(kq_bmeta_apply_batch(&m, 5, 3, b.data, b.len, err, sizeof err), 0);
    assert_non_null(strstr(err, "does not start at the next offset 2"));
    assert_null(kq_image_topic_by_name(m.img, "b0"));
    assert_int_equal(kq_bmeta_apply_batch(&m, 2, 3, b.data, b.len, err, sizeof err), 0);
    assert_int_equal(m.applied_end, 5);
    assert_non_null(kq_image_topic_by_name(m.img, "a1"));
    assert_non_null(kq_image_topic_by_name(m.img, "b2"));
    /* a record that cannot apply (the same topic names again) is an error */
    assert_int_not_equal(kq_bmeta_apply_batch(&m, 5, 2, a.data, a.len, err, sizeof err), 0);
    kq_buf_free(&a);
    kq_buf_free(&b);
    kq_bmeta_free(&m);
}

static void test_snapshot_replaces_the_image(void **state)
{
    (void)state;
    kq_bmeta m, src;
    char err[256];
    kq_buf a = {0}, snap = {0};
    int32_t n = 0;
    assert_int_equal(kq_bmeta_init(&m), 0);
    assert_int_equal(kq_bmeta_init(&src), 0);
    topics(&a, "s", 3);
    assert_int_equal(kq_bmeta_apply_batch(&src, 0, 3, a.data, a.len, err, sizeof err), 0);
    assert_int_equal(kq_image_snapshot_write(src.img, &snap, &n), 0);
    kq_buf_free(&a);
    topics(&a, "old", 1);
    assert_int_equal(kq_bmeta_apply_batch(&m, 0, 1, a.data, a.len, err, sizeof err), 0);
    assert_int_equal(kq_bmeta_load_snapshot(&m, snap.data, snap.len, 3, err, sizeof err), 0);
    assert_int_equal(m.applied_end, 3);
    assert_null(kq_image_topic_by_name(m.img, "old0"));
    assert_int_equal(kq_image_hash(m.img), kq_image_hash(src.img));
    /* a payload that does not decode: an error, and an empty image at offset 0 */
    static const uint8_t junk[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_not_equal(kq_bmeta_load_snapshot(&m, junk, sizeof junk, 3, err, sizeof err), 0);
    assert_int_equal(m.applied_end, 0);
    assert_null(kq_image_topic_by_name(m.img, "s0"));
    kq_buf_free(&a);
    kq_buf_free(&snap);
    kq_bmeta_free(&src);
    kq_bmeta_free(&m);
}

static void test_caught_up_waits_for_the_first_high_watermark(void **state)
{
    (void)state;
    kq_bmeta m;
    char err[256];
    kq_buf a = {0};
    assert_int_equal(kq_bmeta_init(&m), 0);
    assert_false(kq_bmeta_caught_up(&m, -1)); /* no high watermark known yet */
    assert_false(kq_bmeta_caught_up(&m, 4));  /* the target is now 4 */
    topics(&a, "c", 4);
    assert_int_equal(kq_bmeta_apply_batch(&m, 0, 4, a.data, a.len, err, sizeof err), 0);
    assert_true(kq_bmeta_caught_up(&m, 9)); /* a later high watermark does not move it */
    kq_buf_free(&a);
    kq_bmeta_free(&m);
}

/* The replica manager first acts once the image caught up and the controller said the broker
 * caught up with its registration; from then on it keeps following (kq-sim seed 7100000987:
 * a restarted leader acted on an image without the ISR expansion its previous process had
 * sent, which the controller committed after the restart). */
static void test_publishable_waits_for_the_registration(void **state)
{
    (void)state;
    kq_bmeta m;
    char err[256];
    kq_buf a = {0};
    assert_int_equal(kq_bmeta_init(&m), 0);
    assert_false(kq_bmeta_publishable(&m, -1, true)); /* no high watermark yet */
    topics(&a, "p", 4);
    assert_int_equal(kq_bmeta_apply_batch(&m, 0, 4, a.data, a.len, err, sizeof err), 0);
    assert_true(kq_bmeta_caught_up(&m, 4));
    assert_false(kq_bmeta_publishable(&m, 4, false)); /* registration not caught up yet */
    assert_true(kq_bmeta_publishable(&m, 4, true));
    assert_true(kq_bmeta_publishable(&m, 4, false)); /* re-registering: keeps following */
    kq_buf_free(&a);
    kq_bmeta_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches_apply_once_in_order),
        cmocka_unit_test(test_snapshot_replaces_the_image),
        cmocka_unit_test(test_caught_up_waits_for_the_first_high_watermark),
        cmocka_unit_test(test_publishable_waits_for_the_registration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
