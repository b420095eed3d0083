/* CRC-32C: standard vectors (RFC 3720 B.4), chaining, and every alignment against a bitwise
 * reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "kq/util.h"

static uint32_t crc_bitwise(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static void test_check_value(void **state)
{
    assert_int_equal(kq_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(kq_crc32c(0, "", 0), 0);
    assert_int_equal(kq_crc32c(0, NULL, 0), 0);
}

static void test_rfc3720_vectors(void **state)
{
    uint8_t b[32];
    memset(b, 0, sizeof(b));
    assert_int_equal(kq_crc32c(0, b, 32), 0x8A9136AAu);
    memset(b, 0xFF, sizeof(b));
    assert_int_equal(kq_crc32c(0, b, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)i;
    assert_int_equal(kq_crc32c(0, b, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)(31 - i);
    assert_int_equal(kq_crc32c(0, b, 32), 0x113FDB5Cu);
}

static void test_chaining_equals_one_shot(void **state)
{
    uint8_t buf[1000];
    kq_prng p;
    kq_prng_seed(&p, 42);
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)kq_prng_next(&p);
    uint32_t whole = kq_crc32c(0, buf, sizeof(buf));
    assert_int_equal(whole, crc_bitwise(buf, sizeof(buf)));
    for (size_t cut = 0; cut <= sizeof(buf); cut += 7) {
        uint32_t c = kq_crc32c(0, buf, cut);
        c = kq_crc32c(c, buf + cut, sizeof(buf) - cut);
        assert_int_equal(c, whole);
    }
}

static void test_every_alignment_and_length(void **state)
{
    uint8_t buf[300];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)(i * 31 + 7);
    for (size_t off = 0; off < 16; off++) {
        for (size_t len = 0; len + off <= sizeof(buf); len += 13)
            assert_int_equal(kq_crc32c(0, buf + off, len), crc_bitwise(buf + off, len));
    }
}

static void test_detects_corruption(void **state)
{
    uint8_t buf[64];
    memset(buf, 0x5A, sizeof(buf));
    uint32_t good = kq_crc32c(0, buf, sizeof(buf));
    for (size_t i = 0; i < sizeof(buf); i++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (uint8_t)(1u << bit);
            assert_int_not_equal(kq_crc32c(0, buf, sizeof(buf)), good);
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_value),
        cmocka_unit_test(test_rfc3720_vectors),
        cmocka_unit_test(test_chaining_equals_one_shot),
        cmocka_unit_test(test_every_alignment_and_length),
        cmocka_unit_test(test_detects_corruption),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
