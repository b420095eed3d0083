/* Kafka-style uuids: 22 chars of URL-safe base64, never '-', never reserved, decode round-trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/util.h"

#define DRAWS 10000

static int cmp_str(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static void test_random_properties(void **state)
{
    static char all[DRAWS][KQ_UUID_STR_LEN + 1];
    const char *alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_";
    for (int i = 0; i < DRAWS; i++) {
        char s[KQ_UUID_STR_LEN + 1];
        uint8_t b[16];
        char again[KQ_UUID_STR_LEN + 1];
        memset(s, '*', sizeof(s));
        assert_int_equal(kq_uuid_random(s), 0);
        assert_int_equal(strlen(s), KQ_UUID_STR_LEN);
        assert_int_equal(strspn(s, alphabet), KQ_UUID_STR_LEN);
        assert_null(strchr(s, '-'));
        assert_true(kq_uuid_parse(s, b));
        kq_uuid_format(b, again);
        assert_string_equal(again, s);
        /* not a reserved value: the first 15 bytes zero and the last below 100 */
        int zero15 = 1;
        for (int k = 0; k < 15; k++)
            zero15 &= b[k] == 0;
        assert_false(zero15 && b[15] < 100);
        memcpy(all[i], s, sizeof(s));
    }
    qsort(all, DRAWS, sizeof(all[0]), cmp_str);
    for (int i = 1; i < DRAWS; i++)
        assert_string_not_equal(all[i - 1], all[i]);
}

static void test_format_known_values(void **state)
{
    uint8_t b[16];
    char s[KQ_UUID_STR_LEN + 1];
    memset(b, 0, sizeof(b));
    kq_uuid_format(b, s);
    assert_string_equal(s, "AAAAAAAAAAAAAAAAAAAAAA"); /* Kafka's ZERO_UUID */
    b[15] = 1;
    kq_uuid_format(b, s);
    assert_string_equal(s, "AAAAAAAAAAAAAAAAAAAAAQ"); /* Kafka's ONE_UUID */
    memset(b, 0xFF, sizeof(b));
    kq_uuid_format(b, s);
    assert_string_equal(s, "_____________________w");
    for (int i = 0; i < 16; i++)
        b[i] = (uint8_t)i;
    kq_uuid_format(b, s);
    assert_string_equal(s, "AAECAwQFBgcICQoLDA0ODw");
}

static void test_parse_kafka_example(void **state)
{
    /* Kafka's documented example (older ids may contain '-'; they must still parse). */
    uint8_t b[16];
    char s[KQ_UUID_STR_LEN + 1];
    assert_true(kq_uuid_parse("fMCL8kv1SWm87L_Md-I2hg", b));
    kq_uuid_format(b, s);
    assert_string_equal(s, "fMCL8kv1SWm87L_Md-I2hg");
    assert_int_equal(b[0], 0x7c);
    assert_int_equal(b[1], 0xc0);
    assert_int_equal(b[15], 0x86);
}

static void test_parse_rejects_garbage(void **state)
{
    uint8_t b[16];
    assert_false(kq_uuid_parse(NULL, b));
    assert_false(kq_uuid_parse("", b));
    assert_false(kq_uuid_parse("AAAAAAAAAAAAAAAAAAAAA", b));   /* 21 chars */
    assert_false(kq_uuid_parse("AAAAAAAAAAAAAAAAAAAAAAA", b)); /* 23 chars */
    assert_false(kq_uuid_parse("AAAAAAAAAAAAAAAAAAAAA=", b));  /* padding */
    assert_false(kq_uuid_parse("AAAAAAAAAA+AAAAAAAAAAA", b));  /* standard base64 '+' */
    assert_false(kq_uuid_parse("AAAAAAAAAA/AAAAAAAAAAA", b));  /* standard base64 '/' */
    assert_false(kq_uuid_parse("AAAAAAAAAA AAAAAAAAAAA", b));
    /* non-canonical: the last character may only carry 2 bits */
    assert_false(kq_uuid_parse("AAAAAAAAAAAAAAAAAAAAAB", b));
    assert_false(kq_uuid_parse("AAAAAAAAAAAAAAAAAAAAA_", b));
    assert_true(kq_uuid_parse("AAAAAAAAAAAAAAAAAAAAAg", b));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_properties),
        cmocka_unit_test(test_format_known_values),
        cmocka_unit_test(test_parse_kafka_example),
        cmocka_unit_test(test_parse_rejects_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
