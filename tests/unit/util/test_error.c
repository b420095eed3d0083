/* kq error table: names, numbers, messages and retriability round-trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "kq/error.h"

typedef struct row {
    const char *name;
    int num;
    int retriable;
    const char *msg;
} row;

static const row rows[] = {
#define ROW(name, num, retriable, msg) {#name, num, retriable, msg},
    KQ_ERROR_TABLE(ROW)
#undef ROW
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

static void test_round_trip_every_code(void **state)
{
    for (size_t i = 0; i < NROWS; i++) {
        assert_string_equal(kq_err_name(rows[i].num), rows[i].name);
        assert_int_equal(kq_err_from_name(rows[i].name), rows[i].num);
        assert_string_equal(kq_err_message(rows[i].num), rows[i].msg);
        assert_int_equal(kq_err_retriable(rows[i].num), rows[i].retriable);
    }
}

static void test_names_and_numbers_unique(void **state)
{
    for (size_t i = 0; i < NROWS; i++) {
        for (size_t j = i + 1; j < NROWS; j++) {
            assert_int_not_equal(rows[i].num, rows[j].num);
            assert_string_not_equal(rows[i].name, rows[j].name);
        }
    }
}

static void test_kafka_numbers(void **state)
{
    assert_int_equal(KQ_OK, 0);
    assert_string_equal(kq_err_name(KQ_OK), "NONE");
    assert_int_equal(KQ_ERR_NOT_CONTROLLER, 41);
    assert_string_equal(kq_err_name(41), "NOT_CONTROLLER");
    assert_string_equal(kq_err_message(41), "not the active controller");
    assert_int_equal(kq_err_retriable(41), 1);
    assert_int_equal(KQ_ERR_FENCED_LEADER_EPOCH, 74);
    assert_int_equal(kq_err_from_name("INCONSISTENT_CLUSTER_ID"), 104);
    assert_int_equal(kq_err_retriable(KQ_ERR_INVALID_REQUEST), 0);
    assert_int_equal(kq_err_retriable(KQ_ERR_FULL), 1);
    assert_int_equal(kq_err_from_name("CONFIG"), 1002);
}

static void test_unknown_codes_and_names(void **state)
{
    assert_string_equal(kq_err_name(9999), "UNKNOWN_ERROR");
    assert_string_equal(kq_err_name(-1), "UNKNOWN_ERROR");
    assert_string_equal(kq_err_name(4), "UNKNOWN_ERROR"); /* gap in Kafka's numbering */
    assert_string_equal(kq_err_message(9999), "unknown error");
    assert_int_equal(kq_err_retriable(9999), 0);
    assert_int_equal(kq_err_from_name("NO_SUCH_ERROR"), -1);
    assert_int_equal(kq_err_from_name("UNKNOWN_ERROR"), -1);
    assert_int_equal(kq_err_from_name("not_controller"), -1); /* names are exact */
    assert_int_equal(kq_err_from_name(""), -1);
    assert_int_equal(kq_err_from_name(NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_code),
        cmocka_unit_test(test_names_and_numbers_unique),
        cmocka_unit_test(test_kafka_numbers),
        cmocka_unit_test(test_unknown_codes_and_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
