/*
 * kq_arena (include/kq/arena.h): zeroed pieces, inline then heap, overflow refused, arrays that
 * grow, and an arena that is empty and zero again after kq_arena_free.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kq/arena.h"

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

static void test_pieces_are_zeroed_inline_then_heap(void **state)
{
    kq_arena a = {0};
    (void)state;
    unsigned char *small = kq_arena_alloc(&a, 10, 1);
    assert_non_null(small);
    assert_true(small >= a.inline_ && small < a.inline_ + KQ_ARENA_INLINE);
    assert_true(all_zero(small, 10));
    memset(small, 0xAB, 10);
    unsigned char *big = kq_arena_alloc(&a, KQ_ARENA_INLINE * 4, 1); /* past the inline bytes */
    assert_non_null(big);
    assert_true(big < a.inline_ || big >= a.inline_ + KQ_ARENA_INLINE);
    assert_true(all_zero(big, KQ_ARENA_INLINE * 4));
    assert_int_equal(a.n, 1);
    assert_non_null(kq_arena_alloc(&a, 0, 0)); /* at least one byte */
    kq_arena_free(&a);
    assert_int_equal(a.n, 0);
    assert_int_equal(a.used, 0);
    assert_true(all_zero(a.inline_, KQ_ARENA_INLINE)); /* zero again: reusable */
    small = kq_arena_alloc(&a, 10, 1);
    assert_true(all_zero(small, 10));
    kq_arena_free(&a);
    kq_arena_free(NULL);
}

static void test_size_overflow_is_refused(void **state)
{
    kq_arena a = {0};
    (void)state;
    assert_null(kq_arena_alloc(&a, SIZE_MAX / 2 + 2, 2));
    assert_null(kq_arena_alloc(&a, SIZE_MAX, SIZE_MAX));
    assert_int_equal(a.n, 0);
    kq_arena_free(&a);
}

static void test_push_grows_and_keeps_elements(void **state)
{
    kq_arena a = {0};
    int32_t *v = NULL;
    size_t n = 0, cap = 0;
    (void)state;
    for (int32_t i = 0; i < 1000; i++) {
        int32_t *e = kq_arena_push(&a, (void **)&v, &n, &cap, sizeof *v);
        assert_non_null(e);
        assert_int_equal(*e, 0);
        *e = i * 7;
    }
    assert_int_equal(n, 1000);
    assert_true(cap >= 1000);
    for (int32_t i = 0; i < 1000; i++)
        assert_int_equal(v[i], i * 7);
    kq_arena_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pieces_are_zeroed_inline_then_heap),
        cmocka_unit_test(test_size_overflow_is_refused),
        cmocka_unit_test(test_push_grows_and_keeps_elements),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
