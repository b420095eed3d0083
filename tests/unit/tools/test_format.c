/* kq tool output: describe --status / --replication text and JSON, the JSON emitter, and
 * argument parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kq/error.h"
#include "kq_tools.h"

#include "capture.h"

/* Captures what a printer writes. */

static void set_replica(kq_quorum_replica *r, int32_t id, const char *dir, int64_t leo,
                        int64_t fetch, int64_t caught_up)
{
    memset(r, 0, sizeof *r);
    r->id = id;
    snprintf(r->directory_id, sizeof r->directory_id, "%s", dir);
    r->log_end_offset = leo;
    r->last_fetch_timestamp = fetch;
    r->last_caught_up_timestamp = caught_up;
}

static void add_node(kq_quorum_description *d, int32_t id, const char *listener, const char *host,
                     int32_t port)
{
    kq_quorum_node *n = &d->nodes[d->n_nodes++];
    n->id = id;
    snprintf(n->listener, sizeof n->listener, "%s", listener);
    snprintf(n->host, sizeof n->host, "%s", host);
    n->port = port;
}

/* Three voters, the leader (2) stored in the middle, one observer. */
static kq_quorum_description *sample(void)
{
    static kq_quorum_description d;
    memset(&d, 0, sizeof d);
    snprintf(d.cluster_id, sizeof d.cluster_id, "fMCL8kv1SWm87L_Md-I2hg");
    d.leader_id = 2;
    d.leader_epoch = 7;
    d.high_watermark = 93614;
    set_replica(&d.voters[0], 1, "ILZ5MPTeRWakmJu99uBJCA", 93610, 1000, 900);
    set_replica(&d.voters[1], 2, "", 93622, 2000, 2000);
    set_replica(&d.voters[2], 3, KQ_TOOLS_ZERO_UUID, 93622, 1500, 1500);
    d.n_voters = 3;
    set_replica(&d.observers[0], 100, "3Db5QLSqSZieL3rJBUUegA", 5, -1, -1);
    d.n_observers = 1;
    add_node(&d, 1, "CONTROLLER", "localhost", 9093);
    add_node(&d, 2, "CONTROLLER", "localhost", 9094);
    add_node(&d, 3, "CONTROLLER", "::1", 9095);
    return &d;
}

static void test_status_text(void **state)
{
    capture c;
    cap_open(&c);
    kq_tools_print_status(c.f, sample(), false);
    assert_string_equal(
        cap_text(&c),
        "ClusterId:              fMCL8kv1SWm87L_Md-I2hg\n"
        "LeaderId:               2\n"
        "LeaderEpoch:            7\n"
        "HighWatermark:          93614\n"
        "MaxFollowerLag:         12\n"
        "MaxFollowerLagTimeMs:   1100\n"
        "CurrentVoters:          [{\"id\": 2, \"endpoints\": [\"CONTROLLER://localhost:9094\"]}, "
        "{\"id\": 1, \"directoryId\": \"ILZ5MPTeRWakmJu99uBJCA\", \"endpoints\": "
        "[\"CONTROLLER://localhost:9093\"]}, {\"id\": 3, \"endpoints\": "
        "[\"CONTROLLER://[::1]:9095\"]}]\n"
        "CurrentObservers:       [{\"id\": 100, \"directoryId\": \"3Db5QLSqSZieL3rJBUUegA\"}]\n");
    cap_close(&c);
}

static void test_status_json(void **state)
{
    capture c;
    cap_open(&c);
    kq_tools_print_status(c.f, sample(), true);
    assert_string_equal(cap_text(&c),
                        "{\"clusterId\":\"fMCL8kv1SWm87L_Md-I2hg\",\"leaderId\":2,"
                        "\"leaderEpoch\":7,\"highWatermark\":93614,\"maxFollowerLag\":12,"
                        "\"maxFollowerLagTimeMs\":1100,\"currentVoters\":[{\"id\":2,"
                        "\"endpoints\":[\"CONTROLLER://localhost:9094\"]},{\"id\":1,"
                        "\"directoryId\":\"ILZ5MPTeRWakmJu99uBJCA\",\"endpoints\":"
                        "[\"CONTROLLER://localhost:9093\"]},{\"id\":3,\"endpoints\":"
                        "[\"CONTROLLER://[::1]:9095\"]}],\"currentObservers\":[{\"id\":100,"
                        "\"directoryId\":\"3Db5QLSqSZieL3rJBUUegA\"}]}\n");
    cap_close(&c);
}

static void test_follower_lag_rules(void **state)
{
    kq_quorum_description *d = sample();
    int64_t lag, ms;

    /* Everyone caught up: the leader itself is the "most lagging" voter -> 0 ms. */
    d->voters[0].log_end_offset = 93622;
    kq_tools_follower_lag(d, &lag, &ms);
    assert_int_equal(lag, 0);
    assert_int_equal(ms, 0);

    /* Unknown caught-up time of the laggiest voter -> -1. */
    d->voters[2].log_end_offset = 93600;
    d->voters[2].last_caught_up_timestamp = -1;
    kq_tools_follower_lag(d, &lag, &ms);
    assert_int_equal(lag, 22);
    assert_int_equal(ms, -1);

    /* Ties: the first voter with the smallest LEO counts (voter 1 before voter 3). */
    d->voters[0].log_end_offset = 93600;
    kq_tools_follower_lag(d, &lag, &ms);
    assert_int_equal(lag, 22);
    assert_int_equal(ms, 2000 - 900);

    /* Leader not among the voters: nothing sensible to compute. */
    d->leader_id = 42;
    kq_tools_follower_lag(d, &lag, &ms);
    assert_int_equal(lag, -1);
    assert_int_equal(ms, -1);
    assert_int_equal(kq_tools_leader_index(d), -1);
}

static void test_replication_table(void **state)
{
    capture c;
    char err[256] = "";
    cap_open(&c);
    assert_int_equal(kq_tools_print_replication(c.f, sample(), false, 0, false, err, sizeof err),
                     0);
    assert_string_equal(cap_text(&c),
                        "NodeId\tDirectoryId           \tLogEndOffset\tLag  \tLastFetchTimestamp\t"
                        "LastCaughtUpTimestamp\tStatus  \t\n"
                        "2     \tAAAAAAAAAAAAAAAAAAAAAA\t93622       \t0    \t2000              \t"
                        "2000                 \tLeader  \t\n"
                        "1     \tILZ5MPTeRWakmJu99uBJCA\t93610       \t12   \t1000              \t"
                        "900                  \tFollower\t\n"
                        "3     \tAAAAAAAAAAAAAAAAAAAAAA\t93622       \t0    \t1500              \t"
                        "1500                 \tFollower\t\n"
                        "100   \t3Db5QLSqSZieL3rJBUUegA\t5           \t93617\t-1                \t"
                        "-1                   \tObserver\t\n");
    cap_close(&c);
}

static void test_replication_human_readable(void **state)
{
    capture c;
    char err[256] = "";
    cap_open(&c);
    assert_int_equal(kq_tools_print_replication(c.f, sample(), true, 2500, false, err, sizeof err),
                     0);
    const char *out = cap_text(&c);
    assert_non_null(strstr(out, "\t500 ms ago        \t500 ms ago           \tLeader  \t\n"));
    assert_non_null(strstr(out, "\t1500 ms ago       \t1600 ms ago          \tFollower\t\n"));
    /* Unknown timestamps stay -1. */
    assert_non_null(strstr(out, "\t-1                \t-1                   \tObserver\t\n"));
    cap_close(&c);
}

static void test_replication_future_timestamp(void **state)
{
    capture c;
    char err[256] = "";
    cap_open(&c);
    /* now = 1200 is before the leader's last fetch (2000): clock drift, nothing printed. */
    assert_int_equal(kq_tools_print_replication(c.f, sample(), true, 1200, false, err, sizeof err),
                     KQ_ERR_INVALID_TIMESTAMP);
    assert_string_equal(cap_text(&c), "");
    assert_non_null(strstr(err, "drift"));
    assert_non_null(strstr(err, "node 2"));
    cap_close(&c);
}

static void test_replication_json(void **state)
{
    capture c;
    char err[256] = "";
    kq_quorum_description *d = sample();
    d->n_observers = 0;
    d->n_voters = 2;
    cap_open(&c);
    assert_int_equal(kq_tools_print_replication(c.f, d, true, 2500, true, err, sizeof err), 0);
    assert_string_equal(cap_text(&c),
                        "{\"replicas\":[{\"nodeId\":2,\"directoryId\":\"AAAAAAAAAAAAAAAAAAAAAA\","
                        "\"logEndOffset\":93622,\"lag\":0,\"lastFetchTimestamp\":\"500 ms ago\","
                        "\"lastCaughtUpTimestamp\":\"500 ms ago\",\"status\":\"Leader\"},"
                        "{\"nodeId\":1,\"directoryId\":\"ILZ5MPTeRWakmJu99uBJCA\","
                        "\"logEndOffset\":93610,\"lag\":12,\"lastFetchTimestamp\":"
                        "\"1500 ms ago\",\"lastCaughtUpTimestamp\":\"1600 ms ago\","
                        "\"status\":\"Follower\"}]}\n");
    cap_close(&c);

    /* observers: one with a directory id (a controller waiting for add-controller), one
     * without (a broker) */
    d = sample();
    d->n_voters = 0;
    set_replica(&d->observers[1], 101, KQ_TOOLS_ZERO_UUID, 5, -1, -1);
    d->n_observers = 2;
    cap_open(&c);
    assert_int_equal(kq_tools_print_replication(c.f, d, false, 0, true, err, sizeof err), 0);
    assert_non_null(
        strstr(cap_text(&c), "\"nodeId\":100,\"directoryId\":\"3Db5QLSqSZieL3rJBUUegA\""));
    assert_non_null(strstr(cap_text(&c), "\"status\":\"Observer\",\"candidateVoter\":true}"));
    assert_non_null(strstr(cap_text(&c), "\"status\":\"Observer\",\"candidateVoter\":false}"));
    cap_close(&c);
}

static void test_json_escaping_and_nesting(void **state)
{
    capture c;
    kq_json j;
    cap_open(&c);
    kq_json_init(&j, c.f);
    kq_json_begin_object(&j);
    kq_json_key(&j, "s");
    kq_json_string(&j, "a\"b\\c\nd\te\x01");
    kq_json_key(&j, "list");
    kq_json_begin_array(&j);
    kq_json_int(&j, -5);
    kq_json_begin_object(&j);
    kq_json_end_object(&j);
    kq_json_begin_array(&j);
    kq_json_end_array(&j);
    kq_json_bool(&j, true);
    kq_json_null(&j);
    kq_json_end_array(&j);
    kq_json_key(&j, "k\"");
    kq_json_int(&j, INT64_MAX);
    kq_json_end_object(&j);
    assert_string_equal(cap_text(&c), "{\"s\":\"a\\\"b\\\\c\\nd\\te\\u0001\","
                                      "\"list\":[-5,{},[],true,null],"
                                      "\"k\\\"\":9223372036854775807}");
    cap_close(&c);
}

/* Every string is valid JSON: bytes that are not UTF-8 become U+FFFD, UTF-8 passes as it is,
 * kq_json_string_n keeps NUL bytes (escaped). */
static void test_json_strings_are_always_valid_utf8(void **state)
{
    capture c;
    kq_json j;
    (void)state;
    cap_open(&c);
    kq_json_init(&j, c.f);
    kq_json_begin_array(&j);
    kq_json_string(&j, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    kq_json_string(&j, "a\xff b\xc3( c\xe2\x82 d\xc0\xaf e\xed\xa0\x80");
    kq_json_string_n(&j, "x\0y\xc3", 4);
    kq_json_end_array(&j);
    assert_string_equal(cap_text(&c), "[\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\","
                                      "\"a\\ufffd b\\ufffd( c\\ufffd\\ufffd d\\ufffd\\ufffd "
                                      "e\\ufffd\\ufffd\\ufffd\","
                                      "\"x\\u0000y\\ufffd\"]");
    cap_close(&c);
    assert_int_equal(kq_json_utf8_len((const uint8_t *)"\xc3\xa9", 2), 2);
    assert_int_equal(kq_json_utf8_len((const uint8_t *)"\xc3\xa9", 1), 0);
    assert_int_equal(kq_json_utf8_len((const uint8_t *)"\xf4\x90\x80\x80", 4), 0);
    assert_int_equal(kq_json_utf8_len((const uint8_t *)"a", 1), 1);
    assert_int_equal(kq_json_utf8_len((const uint8_t *)"", 0), 0);
}

static void test_parse_addrs(void **state)
{
    kq_tools_addr a[KQ_TOOLS_MAX_ADDRS];
    int n = -1;
    char err[256];
    assert_int_equal(kq_tools_parse_addrs("127.0.0.1:9093, localhost:9094,[::1]:9095", a,
                                          KQ_TOOLS_MAX_ADDRS, &n, err, sizeof err),
                     0);
    assert_int_equal(n, 3);
    assert_string_equal(a[0].host, "127.0.0.1");
    assert_int_equal(a[0].port, 9093);
    assert_string_equal(a[1].host, "localhost");
    assert_int_equal(a[1].port, 9094);
    assert_string_equal(a[2].host, "::1");
    assert_int_equal(a[2].port, 9095);
    char s[300];
    kq_tools_format_addr(&a[2], s, sizeof s);
    assert_string_equal(s, "[::1]:9095");
    kq_tools_format_addr(&a[0], s, sizeof s);
    assert_string_equal(s, "127.0.0.1:9093");

    static const char *const bad[] = {
        "",      "localhost", "localhost:", ":9093",    "h:0",       "h:65536",
        "h:12x", "h:1,,h:2",  "h:1,",       "::1:9093", "[::1]9093", "[::1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(kq_tools_parse_addrs(bad[i], a, KQ_TOOLS_MAX_ADDRS, &n, err, sizeof err),
                         KQ_ERR_CONFIG);
        assert_true(strlen(err) > 0);
    }
    /* More entries than room. */
    assert_int_equal(kq_tools_parse_addrs("a:1,b:2,c:3", a, 2, &n, err, sizeof err), KQ_ERR_CONFIG);
    assert_non_null(strstr(err, "too many"));
}

static void test_parse_int(void **state)
{
    int64_t v = 0;
    assert_true(kq_tools_parse_int("2000", 1, 86400000, &v));
    assert_int_equal(v, 2000);
    assert_true(kq_tools_parse_int("-1", -1, 5, &v));
    assert_int_equal(v, -1);
    assert_false(kq_tools_parse_int("0", 1, 10, &v));
    assert_false(kq_tools_parse_int("11", 1, 10, &v));
    assert_false(kq_tools_parse_int("", 1, 10, &v));
    assert_false(kq_tools_parse_int("5ms", 1, 10, &v));
    assert_false(kq_tools_parse_int("99999999999999999999", 1, INT64_MAX, &v));
    assert_false(kq_tools_parse_int(NULL, 1, 10, &v));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_text),
        cmocka_unit_test(test_status_json),
        cmocka_unit_test(test_follower_lag_rules),
        cmocka_unit_test(test_replication_table),
        cmocka_unit_test(test_replication_human_readable),
        cmocka_unit_test(test_replication_future_timestamp),
        cmocka_unit_test(test_replication_json),
        cmocka_unit_test(test_json_escaping_and_nesting),
        cmocka_unit_test(test_json_strings_are_always_valid_utf8),
        cmocka_unit_test(test_parse_addrs),
        cmocka_unit_test(test_parse_int),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
