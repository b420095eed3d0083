/* The leader-epoch cache (kq/epoch_cache.h): Kafka's assign rule, truncation, compaction and
 * the look-ups the Raft and replica cores make, as tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kq/epoch_cache.h"
#include "kq/error.h"

#define E(ep, st) ((kq_epoch_entry){(ep), (st)})

static void load(kq_epoch_cache *c, const kq_epoch_entry *e, size_t n)
{
    assert_int_equal(kq_epoch_cache_load(c, e, n, 4), 0);
}

static void expect(const kq_epoch_cache *c, const kq_epoch_entry *e, size_t n)
{
    assert_int_equal(c->n, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(c->e[i].epoch, e[i].epoch);
        assert_int_equal(c->e[i].start_offset, e[i].start_offset);
    }
}

typedef struct assign_case {
    const char *what;
    kq_epoch_entry before[4];
    size_t n_before;
    int32_t epoch;
    int64_t start;
    bool changed;
    kq_epoch_entry after[4];
    size_t n_after;
} assign_case;

static void test_assign(void **state)
{
    (void)state;
    static const assign_case cases[] = {
        {"empty cache", {{0}}, 0, 3, 0, true, {E(3, 0)}, 1},
        {"a new epoch at the end",
         {E(1, 0), E(3, 10)},
         2,
         5,
         20,
         true,
         {E(1, 0), E(3, 10), E(5, 20)},
         3},
        {"the same epoch again, later: no change",
         {E(1, 0), E(3, 10)},
         2,
         3,
         15,
         false,
         {E(1, 0), E(3, 10)},
         2},
        {"the same epoch at its own start: no change", {E(3, 10)}, 1, 3, 10, false, {E(3, 10)}, 1},
        {"the same epoch starting earlier replaces it",
         {E(1, 0), E(3, 10)},
         2,
         3,
         8,
         true,
         {E(1, 0), E(3, 8)},
         2},
        /* an empty entry of a past leadership above the log end: a lower epoch written at that
         * offset replaces it (the Raft core's old rule kept the higher epoch and skipped the
         * append, so the cache named the wrong epoch for those records) */
        {"a lower epoch over an empty higher one",
         {E(1, 0), E(7, 10)},
         2,
         6,
         10,
         true,
         {E(1, 0), E(6, 10)},
         2},
        {"entries at or after start go",
         {E(1, 0), E(2, 5), E(3, 9)},
         3,
         4,
         5,
         true,
         {E(1, 0), E(4, 5)},
         2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const assign_case *t = &cases[k];
        kq_epoch_cache c = {0};
        load(&c, t->before, t->n_before);
        assert_int_equal(kq_epoch_cache_reserve(&c, 1, 0), 0);
        bool changed = kq_epoch_cache_assign(&c, t->epoch, t->start);
        if (changed != t->changed)
            fail_msg("%s: changed %d, want %d", t->what, changed, t->changed);
        expect(&c, t->after, t->n_after);
        kq_epoch_cache_free(&c);
    }
}

static void test_lookups(void **state)
{
    (void)state;
    static const kq_epoch_entry e[] = {E(1, 0), E(3, 10), E(6, 25)};
    kq_epoch_cache c = {0};
    int32_t ep;
    int64_t end;
    load(&c, e, 3);
    /* end_offset_for: the largest epoch <= the asked one, ending where the next starts */
    assert_true(kq_epoch_cache_end_offset_for(&c, 2, 40, &ep, &end));
    assert_int_equal(ep, 1);
    assert_int_equal(end, 10);
    assert_true(kq_epoch_cache_end_offset_for(&c, 6, 40, &ep, &end));
    assert_int_equal(ep, 6);
    assert_int_equal(end, 40);
    assert_false(kq_epoch_cache_end_offset_for(&c, 0, 40, &ep, &end));
    /* last epoch: entries starting at or after the log end hold no record */
    assert_int_equal(kq_epoch_cache_last_epoch(&c, 40), 6);
    assert_int_equal(kq_epoch_cache_last_epoch(&c, 25), 3);
    assert_int_equal(kq_epoch_cache_last_epoch(&c, 0), -1);
    assert_int_equal(kq_epoch_cache_epoch_at(&c, 9), 1);
    assert_int_equal(kq_epoch_cache_epoch_at(&c, 10), 3);
    assert_int_equal(kq_epoch_cache_epoch_at(&c, -1), -1);
    assert_true(kq_epoch_cache_starts_at(&c, 25));
    assert_false(kq_epoch_cache_starts_at(&c, 24));
    kq_epoch_cache_free(&c);
}

static void test_truncate_and_compact(void **state)
{
    (void)state;
    static const kq_epoch_entry e[] = {E(1, 0), E(3, 10), E(6, 25)};
    kq_epoch_cache c = {0};
    load(&c, e, 3);
    assert_false(kq_epoch_cache_truncate_from(&c, 26));
    assert_true(kq_epoch_cache_truncate_from(&c, 25));
    expect(&c, (kq_epoch_entry[]){E(1, 0), E(3, 10)}, 2);
    load(&c, e, 3);
    kq_epoch_cache_compact(&c, 12); /* the entry covering offset 11 now starts at 12 */
    expect(&c, (kq_epoch_entry[]){E(3, 12), E(6, 25)}, 2);
    kq_epoch_cache_compact(&c, 25); /* an entry starts exactly there: it alone stays */
    expect(&c, (kq_epoch_entry[]){E(6, 25)}, 1);
    load(&c, e, 3);
    kq_epoch_cache_compact(&c, 10); /* exactly at the second entry's start */
    expect(&c, (kq_epoch_entry[]){E(3, 10), E(6, 25)}, 2);
    load(&c, (kq_epoch_entry[]){E(3, 10), E(6, 25)}, 2);
    kq_epoch_cache_compact(&c, 5); /* below the first entry: nothing changes */
    expect(&c, (kq_epoch_entry[]){E(3, 10), E(6, 25)}, 2);
    kq_epoch_cache_free(&c);
}

static void test_validity_and_bounds(void **state)
{
    (void)state;
    assert_true(kq_epoch_entries_valid(NULL, 0));
    assert_false(kq_epoch_entries_valid(NULL, 1));
    assert_true(kq_epoch_entries_valid((kq_epoch_entry[]){E(1, 0), E(2, 0)}, 2));
    assert_false(kq_epoch_entries_valid((kq_epoch_entry[]){E(2, 0), E(2, 5)}, 2));
    assert_false(kq_epoch_entries_valid((kq_epoch_entry[]){E(1, 5), E(2, 4)}, 2));
    assert_false(kq_epoch_entries_valid((kq_epoch_entry[]){E(-1, 0)}, 1));
    kq_epoch_cache c = {0};
    assert_int_equal(kq_epoch_cache_reserve(&c, 3, 3), 0);
    assert_int_equal(kq_epoch_cache_reserve(&c, 4, 3), KQ_ERR_FULL);
    kq_epoch_cache_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_assign),
        cmocka_unit_test(test_lookups),
        cmocka_unit_test(test_truncate_and_compact),
        cmocka_unit_test(test_validity_and_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
