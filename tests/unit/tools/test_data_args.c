/* kq produce / kq consume without a broker: argument parsing and validation (each bad value
 * is a usage error naming its flag), the retriable-error classification, and the result and
 * record lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "data_client.h"
#include "kq/error.h"

#define MAX_ARGS 32

/* argv from a space-separated command line (no quoting); storage lives in `store`. */
typedef struct args {
    char store[1024];
    char *argv[MAX_ARGS];
    int argc;
} args;

static void split(args *a, const char *line)
{
    char *save = NULL;

    snprintf(a->store, sizeof a->store, "%s", line);
    a->argc = 0;
    for (char *t = strtok_r(a->store, " ", &save); t && a->argc < MAX_ARGS - 1;
         t = strtok_r(NULL, " ", &save))
        a->argv[a->argc++] = t;
    a->argv[a->argc] = NULL;
}

static int produce(const char *line, kq_dc_produce_args *out, char *err, size_t errlen)
{
    args a;

    split(&a, line);
    err[0] = 0;
    return kq_dc_parse_produce_args(a.argc, a.argv, out, err, errlen);
}

static int consume(const char *line, kq_dc_consume_args *out, char *err, size_t errlen)
{
    args a;

    split(&a, line);
    err[0] = 0;
    return kq_dc_parse_consume_args(a.argc, a.argv, out, err, errlen);
}

static void test_produce_defaults_and_flags(void **state)
{
    (void)state;
    kq_dc_produce_args p;
    char err[512];

    assert_int_equal(
        produce("produce --bootstrap-server localhost:19092 --topic ledger", &p, err, sizeof err),
        0);
    assert_int_equal(p.n_bootstrap, 1);
    assert_string_equal(p.bootstrap[0].host, "localhost");
    assert_int_equal(p.bootstrap[0].port, 19092);
    assert_string_equal(p.topic, "ledger");
    assert_int_equal(p.partition, 0);
    assert_int_equal(p.acks, -1);
    assert_int_equal(p.request_timeout_ms, 30000);
    assert_int_equal(p.delivery_timeout_ms, 120000);
    assert_null(p.value);
    assert_false(p.help);

    assert_int_equal(produce("produce --bootstrap-server a:1,[::1]:2 --topic t.x_y-z --partition 7 "
                             "--acks 1 --request-timeout-ms 5000 --delivery-timeout-ms 8000 "
                             "--value deposit",
                             &p, err, sizeof err),
                     0);
    assert_int_equal(p.n_bootstrap, 2);
    assert_string_equal(p.bootstrap[1].host, "::1");
    assert_string_equal(p.topic, "t.x_y-z");
    assert_int_equal(p.partition, 7);
    assert_int_equal(p.acks, 1);
    assert_int_equal(p.request_timeout_ms, 5000);
    assert_int_equal(p.delivery_timeout_ms, 8000);
    assert_string_equal(p.value, "deposit");

    static const struct {
        const char *v;
        int32_t acks;
    } acks[] = {{"all", -1}, {"ALL", -1}, {"-1", -1}, {"1", 1}, {"0", 0}};
    for (size_t i = 0; i < sizeof acks / sizeof acks[0]; i++) {
        char line[128];

        snprintf(line, sizeof line, "produce --bootstrap-server h:1 --topic t --acks %s",
                 acks[i].v);
        assert_int_equal(produce(line, &p, err, sizeof err), 0);
        assert_int_equal(p.acks, acks[i].acks);
    }

    /* A request timeout above the default delivery timeout raises the latter with it. */
    assert_int_equal(produce("produce --bootstrap-server h:1 --topic t --request-timeout-ms 200000",
                             &p, err, sizeof err),
                     0);
    assert_int_equal(p.delivery_timeout_ms, 200000);

    assert_int_equal(produce("produce --help", &p, err, sizeof err), 0);
    assert_true(p.help);
    assert_int_equal(produce("produce -h", &p, err, sizeof err), 0);
    assert_true(p.help);
}

typedef struct bad_case {
    const char *line;
    const char *expect;
} bad_case;

static const bad_case produce_bad[] = {
    {"produce --bootstrap-server h:1 --topic t --acks 2", "--acks: '2' is not all, -1, 1 or 0"},
    {"produce --bootstrap-server h:1 --topic t --acks none", "--acks: 'none' is not all"},
    {"produce --bootstrap-server h:1", "--topic is required"},
    {"produce --topic t", "--bootstrap-server is required"},
    {"produce --bootstrap-server h:1 --topic t --partition -1",
     "--partition: '-1' is not an integer in [0, 2147483647]"},
    {"produce --bootstrap-server h:1 --topic t --partition 1x", "--partition: '1x' is not an"},
    {"produce --bootstrap-server h:1 --topic t --partition 2147483648",
     "--partition: '2147483648'"},
    {"produce --bootstrap-server h:1 --topic t --request-timeout-ms 0",
     "--request-timeout-ms: '0' is not an integer in [1, 86400000]"},
    {"produce --bootstrap-server h:1 --topic t --delivery-timeout-ms ten",
     "--delivery-timeout-ms: 'ten' is not an integer"},
    {"produce --bootstrap-server h:1 --topic t --request-timeout-ms 5000 --delivery-timeout-ms "
     "4000",
     "--delivery-timeout-ms 4000 must be at least --request-timeout-ms 5000"},
    {"produce --bootstrap-server h:1 --topic a/b", "--topic: 'a/b' is not a valid topic name"},
    {"produce --bootstrap-server h:1 --topic ..", "--topic: '..' is not a valid topic name"},
    {"produce --bootstrap-server localhost --topic t", "--bootstrap-server: 'localhost' is not"},
    {"produce --bootstrap-server h:0 --topic t", "--bootstrap-server: 'h:0': port must be"},
    {"produce --bootstrap-server h:1 --topic t --from-beginning",
     "unknown option '--from-beginning'"},
    {"produce --bootstrap-server h:1 --topic", "option '--topic' needs a value"},
    {"produce --bootstrap-server h:1 --topic t extra", "unexpected argument 'extra'"},
};

static const bad_case consume_bad[] = {
    {"consume --bootstrap-server h:1", "--topic is required"},
    {"consume --topic t --from-beginning", "--bootstrap-server is required"},
    {"consume --bootstrap-server h:1 --topic t --max-records 0",
     "--max-records: '0' is not an integer in [1, 9223372036854775807]"},
    {"consume --bootstrap-server h:1 --topic t --max-records -5", "--max-records: '-5'"},
    {"consume --bootstrap-server h:1 --topic t --timeout-ms 1.5",
     "--timeout-ms: '1.5' is not an integer in [1, 86400000]"},
    {"consume --bootstrap-server h:1 --topic t --partition x", "--partition: 'x' is not an"},
    {"consume --bootstrap-server h:1 --topic t --acks 1", "unknown option '--acks'"},
    {"consume --bootstrap-server h:1 --topic t --timeout-ms",
     "option '--timeout-ms' needs a value"},
    {"consume --bootstrap-server h:1 --topic t 5", "unexpected argument '5'"},
    {"consume --bootstrap-server h:1 --topic bad!name", "--topic: 'bad!name' is not a valid"},
};

static void test_produce_usage_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof produce_bad / sizeof produce_bad[0]; i++) {
        kq_dc_produce_args p;
        char err[512];
        int rc = produce(produce_bad[i].line, &p, err, sizeof err);

        if (rc != KQ_ERR_CONFIG || !strstr(err, produce_bad[i].expect))
            fail_msg("'%s': got %d \"%s\", want \"%s\"", produce_bad[i].line, rc, err,
                     produce_bad[i].expect);
    }
}

static void test_consume_defaults_and_flags(void **state)
{
    (void)state;
    kq_dc_consume_args c;
    char err[512];

    assert_int_equal(consume("consume --bootstrap-server h:1 --topic ledger", &c, err, sizeof err),
                     0);
    assert_string_equal(c.topic, "ledger");
    assert_int_equal(c.partition, 0);
    assert_false(c.from_beginning);
    assert_int_equal(c.max_records, -1);
    assert_int_equal(c.timeout_ms, -1);
    assert_false(c.print_offsets);

    assert_int_equal(consume("consume --topic ledger --partition 2 --from-beginning --max-records "
                             "3 --timeout-ms 10000 --print-offsets --bootstrap-server a:1,b:2",
                             &c, err, sizeof err),
                     0);
    assert_int_equal(c.partition, 2);
    assert_true(c.from_beginning);
    assert_int_equal(c.max_records, 3);
    assert_int_equal(c.timeout_ms, 10000);
    assert_true(c.print_offsets);
    assert_int_equal(c.n_bootstrap, 2);
    assert_string_equal(c.bootstrap[1].host, "b");

    assert_int_equal(consume("consume --help", &c, err, sizeof err), 0);
    assert_true(c.help);
}

static void test_consume_usage_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof consume_bad / sizeof consume_bad[0]; i++) {
        kq_dc_consume_args c;
        char err[512];
        int rc = consume(consume_bad[i].line, &c, err, sizeof err);

        if (rc != KQ_ERR_CONFIG || !strstr(err, consume_bad[i].expect))
            fail_msg("'%s': got %d \"%s\", want \"%s\"", consume_bad[i].line, rc, err,
                     consume_bad[i].expect);
    }
}

static void test_retriable_classification(void **state)
{
    (void)state;
    static const int retriable[] = {
        KQ_ERR_NOT_LEADER_OR_FOLLOWER,     KQ_ERR_LEADER_NOT_AVAILABLE,
        KQ_ERR_NOT_ENOUGH_REPLICAS,        KQ_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KQ_ERR_REQUEST_TIMED_OUT,          KQ_ERR_NETWORK_EXCEPTION,
        KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION, KQ_ERR_FENCED_LEADER_EPOCH,
        KQ_ERR_KAFKA_STORAGE_ERROR,
    };
    static const int final[] = {
        KQ_ERR_NONE,
        KQ_ERR_INVALID_REQUEST,
        KQ_ERR_INVALID_REQUIRED_ACKS,
        KQ_ERR_MESSAGE_TOO_LARGE,
        KQ_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
        KQ_ERR_INVALID_PRODUCER_EPOCH,
        KQ_ERR_UNKNOWN_PRODUCER_ID,
        KQ_ERR_CORRUPT_MESSAGE,
        KQ_ERR_MALFORMED,
        KQ_ERR_UNSUPPORTED_VERSION,
        KQ_ERR_NOT_CONTROLLER,
        KQ_ERR_OFFSET_OUT_OF_RANGE,
    };
    for (size_t i = 0; i < sizeof retriable / sizeof retriable[0]; i++)
        if (!kq_dc_produce_retriable(retriable[i]))
            fail_msg("%s should be retried by produce", kq_err_name(retriable[i]));
    for (size_t i = 0; i < sizeof final / sizeof final[0]; i++)
        if (kq_dc_produce_retriable(final[i]))
            fail_msg("%s should end a record", kq_err_name(final[i]));

    /* Refresh: the errors that say the cached leader may be wrong. */
    static const int refresh[] = {
        KQ_ERR_NOT_LEADER_OR_FOLLOWER, KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION,
        KQ_ERR_LEADER_NOT_AVAILABLE,   KQ_ERR_FENCED_LEADER_EPOCH,
        KQ_ERR_NETWORK_EXCEPTION,      KQ_ERR_REQUEST_TIMED_OUT,
        KQ_ERR_UNKNOWN_LEADER_EPOCH,
    };
    for (size_t i = 0; i < sizeof refresh / sizeof refresh[0]; i++) {
        assert_true(kq_dc_refresh_needed(refresh[i]));
        assert_true(kq_dc_consume_retriable(refresh[i]));
    }
    assert_false(kq_dc_refresh_needed(KQ_ERR_NOT_ENOUGH_REPLICAS));
    assert_false(kq_dc_refresh_needed(KQ_ERR_KAFKA_STORAGE_ERROR));
    assert_false(kq_dc_refresh_needed(KQ_ERR_NONE));
    assert_false(kq_dc_refresh_needed(KQ_ERR_INVALID_REQUEST));
    assert_true(kq_dc_consume_retriable(KQ_ERR_KAFKA_STORAGE_ERROR));
    assert_true(kq_dc_consume_retriable(KQ_ERR_CORRUPT_MESSAGE));
    assert_false(kq_dc_consume_retriable(KQ_ERR_INVALID_REQUEST));
    assert_false(kq_dc_consume_retriable(KQ_ERR_OFFSET_OUT_OF_RANGE));
}

/* Runs fn-style printing into a memstream and returns the text (caller frees). */
static char *produce_line(const kq_dc_produce_result *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    assert_non_null(f);
    kq_dc_print_produce_result(f, r);
    fclose(f);
    return buf;
}

static void test_result_lines(void **state)
{
    (void)state;
    static const struct {
        kq_dc_produce_result r;
        const char *expect;
    } cases[] = {
        {{.error = 0, .offset = 2, .acks = 1, .attempts = 1, .elapsed_ms = 3},
         "written at offset 2\n"},
        {{.error = 0, .offset = 0, .acks = -1, .attempts = 4, .elapsed_ms = 350},
         "written at offset 0\n"},
        {{.error = 0, .offset = 9, .acks = 0, .attempts = 1}, "sent (acks=0, offset unknown)\n"},
        {{.error = KQ_ERR_NOT_ENOUGH_REPLICAS,
          .offset = -1,
          .acks = -1,
          .attempts = 79,
          .elapsed_ms = 8001},
         "error: NOT_ENOUGH_REPLICAS (after 79 attempts in 8001 ms)\n"},
        {{.error = KQ_ERR_INVALID_REQUEST, .offset = -1, .acks = 1, .attempts = 1, .elapsed_ms = 0},
         "error: INVALID_REQUEST (after 1 attempt in 0 ms)\n"},
        {{.error = KQ_ERR_NETWORK_EXCEPTION,
          .offset = -1,
          .acks = 0,
          .attempts = 2,
          .elapsed_ms = 120000},
         "error: NETWORK_EXCEPTION (after 2 attempts in 120000 ms)\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = produce_line(&cases[i].r);

        assert_string_equal(s, cases[i].expect);
        free(s);
    }
}

static void test_record_lines(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    static const uint8_t bin[] = {'a', 0, 'b'};

    assert_non_null(f);
    kq_dc_print_record(f, 0, (const uint8_t *)"deposit 100", 11, false);
    kq_dc_print_record(f, 1, (const uint8_t *)"deposit 50", 10, true);
    kq_dc_print_record(f, 12, NULL, 0, true);
    kq_dc_print_record(f, 13, NULL, 0, false);
    kq_dc_print_record(f, 14, bin, sizeof bin, false);
    fclose(f);
    static const char expect[] = "deposit 100\n1\tdeposit 50\n12\t\n\na\0b\n";
    assert_int_equal(len, sizeof expect - 1);
    assert_memory_equal(buf, expect, len);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_produce_defaults_and_flags),
        cmocka_unit_test(test_produce_usage_errors),
        cmocka_unit_test(test_consume_defaults_and_flags),
        cmocka_unit_test(test_consume_usage_errors),
        cmocka_unit_test(test_retriable_classification),
        cmocka_unit_test(test_result_lines),
        cmocka_unit_test(test_record_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
