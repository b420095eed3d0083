/* kq_metrics rendering: exact Prometheus 0.0.4 text (HELP/TYPE once per family, grouped label
 * sets, escaping, histogram cumulative buckets with +Inf == _count, counters named _total,
 * trailing newline), the built-in families, value formatting and update semantics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <time.h>

#include "metrics_testlib.h"

static char *render(const kq_metrics *m)
{
    char *text = NULL;
    size_t len = 0;

    assert_int_equal(kq_metrics_render(m, &text, &len), 0);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    assert_true(len > 0);
    assert_int_equal(text[len - 1], '\n');
    return text;
}

static void test_builtins(void **state)
{
    kq_metrics *m = kq_metrics_new();
    char *text;
    const char *p;
    double start, now = (double)time(NULL);

    assert_non_null(m);
    text = render(m);
    p = "# HELP kq_build_info Build information; the value is always 1.\n"
        "# TYPE kq_build_info gauge\n"
        "kq_build_info{version=\"" KQ_VERSION "\"} 1\n"
        "# HELP process_start_time_seconds Start time of the process since unix epoch in "
        "seconds.\n"
        "# TYPE process_start_time_seconds gauge\n"
        "process_start_time_seconds ";
    assert_memory_equal(text, p, strlen(p));
    start = strtod(text + strlen(p), NULL);
    /* the process started after 2020 and not in the future (+1 s for rounding) */
    assert_true(start > 1577836800.0);
    assert_true(start <= now + 1.0);
    assert_string_equal(mt_after_builtins(text), "");
    free(text);
    kq_metrics_free(m);
}

static void test_exact_render(void **state)
{
    static const char *states[] = {"leader", "follower", "candidate"};
    static const double bounds[] = {0.01, 0.5, 1};
    kq_metrics *m = kq_metrics_new();
    kq_metric *st[3], *epoch, *req_fetch, *req_vote, *lat, *ratio;
    char labels[64];
    char *text;

    assert_non_null(m);
    for (int i = 0; i < 3; i++) {
        snprintf(labels, sizeof(labels), "state=\"%s\"", states[i]);
        st[i] = kq_metrics_gauge_int(m, "kq_raft_state", "1 for the current Raft state.", labels);
        assert_non_null(st[i]);
    }
    epoch = kq_metrics_gauge_int(m, "kq_raft_epoch", "Current epoch.", NULL);
    req_fetch = kq_metrics_counter(m, "kq_rpc_requests_total", "Requests.", "api=\"fetch\"");
    lat = kq_metrics_histogram(m, "kq_raft_commit_latency_seconds", "Append to commit.", bounds, 3);
    req_vote = kq_metrics_counter(m, "kq_rpc_requests_total", "Requests.", "api=\"vote\"");
    ratio = kq_metrics_gauge(m, "kq_test_ratio", "A ratio.", "");
    assert_non_null(epoch);
    assert_non_null(req_fetch);
    assert_non_null(req_vote);
    assert_non_null(lat);
    assert_non_null(ratio);

    kq_metric_set_int(st[0], 1);
    kq_metric_set(st[1], 0);
    kq_metric_set_int(epoch, 42);
    kq_metric_inc(req_fetch);
    kq_metric_add(req_fetch, 2);
    kq_metric_add(req_vote, 7);
    kq_metric_set(ratio, 0.25);
    kq_metric_observe(lat, 0.0078125); /* <= 0.01 */
    kq_metric_observe(lat, 0.25);      /* <= 0.5 */
    kq_metric_observe(lat, 0.5);       /* le is inclusive */
    kq_metric_observe(lat, 1);
    kq_metric_observe(lat, 2); /* only +Inf */

    text = render(m);
    assert_string_equal(mt_after_builtins(text),
                        "# HELP kq_raft_state 1 for the current Raft state.\n"
                        "# TYPE kq_raft_state gauge\n"
                        "kq_raft_state{state=\"leader\"} 1\n"
                        "kq_raft_state{state=\"follower\"} 0\n"
                        "kq_raft_state{state=\"candidate\"} 0\n"
                        "# HELP kq_raft_epoch Current epoch.\n"
                        "# TYPE kq_raft_epoch gauge\n"
                        "kq_raft_epoch 42\n"
                        "# HELP kq_rpc_requests_total Requests.\n"
                        "# TYPE kq_rpc_requests_total counter\n"
                        "kq_rpc_requests_total{api=\"fetch\"} 3\n"
                        "kq_rpc_requests_total{api=\"vote\"} 7\n"
                        "# HELP kq_raft_commit_latency_seconds Append to commit.\n"
                        "# TYPE kq_raft_commit_latency_seconds histogram\n"
                        "kq_raft_commit_latency_seconds_bucket{le=\"0.01\"} 1\n"
                        "kq_raft_commit_latency_seconds_bucket{le=\"0.5\"} 3\n"
                        "kq_raft_commit_latency_seconds_bucket{le=\"1\"} 4\n"
                        "kq_raft_commit_latency_seconds_bucket{le=\"+Inf\"} 5\n"
                        "kq_raft_commit_latency_seconds_sum 3.7578125\n"
                        "kq_raft_commit_latency_seconds_count 5\n"
                        "# HELP kq_test_ratio A ratio.\n"
                        "# TYPE kq_test_ratio gauge\n"
                        "kq_test_ratio 0.25\n");
    /* one HELP and one TYPE line per family, even with several label sets */
    assert_int_equal(mt_count(text, "# HELP kq_raft_state "), 1);
    assert_int_equal(mt_count(text, "# TYPE kq_rpc_requests_total "), 1);
    assert_int_equal(kq_metric_value(lat), 5);
    assert_int_equal(kq_metric_value(req_fetch), 3);
    free(text);
    kq_metrics_free(m);
}

static void test_escaping(void **state)
{
    kq_metrics *m = kq_metrics_new();
    kq_metric *a, *b;
    char *text;

    assert_non_null(m);
    /* HELP: backslash and newline are escaped, quotes are not */
    a = kq_metrics_gauge(m, "kq_esc", "path C:\\kq \"quoted\"\nsecond line",
                         "v=\"a\\\"b\\\\c\\nd\"");
    assert_non_null(a);
    /* a raw newline and a raw backslash-free value; spaces around separators are accepted */
    b = kq_metrics_gauge(m, "kq_esc", "path C:\\kq \"quoted\"\nsecond line",
                         " v=\"line1\nline2\" , w=\"x\",");
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    kq_metric_set(a, 1);
    kq_metric_set(b, 2);
    text = render(m);
    assert_string_equal(mt_after_builtins(text),
                        "# HELP kq_esc path C:\\\\kq \"quoted\"\\nsecond line\n"
                        "# TYPE kq_esc gauge\n"
                        "kq_esc{v=\"a\\\"b\\\\c\\nd\"} 1\n"
                        "kq_esc{v=\"line1\\nline2\",w=\"x\"} 2\n");
    /* the same label set (once escaped, once raw) is the same child */
    assert_ptr_equal(kq_metrics_gauge(m, "kq_esc", "path C:\\kq \"quoted\"\nsecond line",
                                      "v=\"line1\\nline2\",w=\"x\""),
                     b);
    free(text);
    kq_metrics_free(m);
}

static void test_value_formatting(void **state)
{
    kq_metrics *m = kq_metrics_new();
    kq_metric *g[6], *big, *neg;
    char *text;
    static const double vals[] = {0.1, 1e20, -2.5, NAN, INFINITY, -INFINITY};
    char name[32];

    assert_non_null(m);
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof(name), "kq_g%d", i);
        g[i] = kq_metrics_gauge(m, name, "g", NULL);
        assert_non_null(g[i]);
        kq_metric_set(g[i], vals[i]);
    }
    big = kq_metrics_gauge_int(m, "kq_big", "b", NULL);
    neg = kq_metrics_gauge_int(m, "kq_neg", "n", NULL);
    kq_metric_set_int(big, INT64_C(9007199254740993)); /* 2^53 + 1: not exact as a double */
    kq_metric_set_int(neg, -1);
    text = render(m);
    assert_non_null(strstr(text, "\nkq_g0 0.1\n"));
    assert_non_null(strstr(text, "\nkq_g1 1e+20\n"));
    assert_non_null(strstr(text, "\nkq_g2 -2.5\n"));
    assert_non_null(strstr(text, "\nkq_g3 NaN\n"));
    assert_non_null(strstr(text, "\nkq_g4 +Inf\n"));
    assert_non_null(strstr(text, "\nkq_g5 -Inf\n"));
    assert_non_null(strstr(text, "\nkq_big 9007199254740993\n"));
    assert_non_null(strstr(text, "\nkq_neg -1\n"));
    free(text);
    kq_metrics_free(m);
}

static void test_update_semantics(void **state)
{
    static const double bounds[] = {1};
    kq_metrics *m = kq_metrics_new();
    kq_metric *c, *g, *gi, *h;

    assert_non_null(m);
    c = kq_metrics_counter(m, "kq_c_total", "c", NULL);
    g = kq_metrics_gauge(m, "kq_g", "g", NULL);
    gi = kq_metrics_gauge_int(m, "kq_gi", "gi", NULL);
    h = kq_metrics_histogram(m, "kq_h_seconds", "h", bounds, 1);
    assert_non_null(c);
    assert_non_null(g);
    assert_non_null(gi);
    assert_non_null(h);

    /* counters never go down and count whole units */
    kq_metric_add(c, 5);
    kq_metric_add(c, -3);
    kq_metric_add(c, NAN);
    kq_metric_add(c, 2.7);
    kq_metric_set(c, 100); /* wrong kind: ignored */
    kq_metric_observe(c, 1);
    assert_true(kq_metric_value(c) == 7);

    /* gauges go both ways */
    kq_metric_set(g, 1.5);
    kq_metric_add(g, -2);
    assert_true(kq_metric_value(g) == -0.5);
    kq_metric_observe(g, 3); /* wrong kind */
    assert_true(kq_metric_value(g) == -0.5);

    /* integer gauges: set rounds, add whole units, NaN ignored */
    kq_metric_set(gi, 2.6);
    assert_true(kq_metric_value(gi) == 3);
    kq_metric_add(gi, -5);
    assert_true(kq_metric_value(gi) == -2);
    kq_metric_set(gi, NAN);
    assert_true(kq_metric_value(gi) == -2);

    /* histograms: NaN and wrong-kind updates ignored */
    kq_metric_observe(h, NAN);
    kq_metric_set(h, 9);
    kq_metric_add(h, 9);
    assert_true(kq_metric_value(h) == 0);
    kq_metric_observe(h, -1); /* negative goes to the first bucket */
    assert_true(kq_metric_value(h) == 1);

    /* NULL metrics (a failed registration) are harmless */
    kq_metric_set(NULL, 1);
    kq_metric_set_int(NULL, 1);
    kq_metric_add(NULL, 1);
    kq_metric_inc(NULL);
    kq_metric_observe(NULL, 1);
    assert_true(kq_metric_value(NULL) == 0);
    kq_metrics_free(m);
    kq_metrics_free(NULL);
}

/* The registration returned NULL and the error names the problem (a macro so a failure
 * reports the caller's line). */
#define expect_fail(call, m, needle)                                                               \
    do {                                                                                           \
        kq_metric *x_ = (call);                                                                    \
        if (x_ != NULL)                                                                            \
            fail_msg("%s succeeded", #call);                                                       \
        if (strstr(kq_metrics_last_error(m), (needle)) == NULL)                                    \
            fail_msg("error \"%s\" does not mention \"%s\"", kq_metrics_last_error(m), (needle));  \
    } while (0)

static void test_registration_errors(void **state)
{
    static const double good[] = {0.1, 1};
    static const double unsorted[] = {1, 0.1};
    static const double dup[] = {1, 1};
    const double nan_bounds[] = {0.1, NAN};
    double many[KQ_METRICS_MAX_BUCKETS + 1];
    kq_metrics *m = kq_metrics_new();
    char *before, *after;

    assert_non_null(m);
    for (int i = 0; i <= KQ_METRICS_MAX_BUCKETS; i++)
        many[i] = i + 1;
    assert_non_null(kq_metrics_gauge(m, "kq_ok", "ok", "a=\"1\""));
    assert_non_null(kq_metrics_histogram(m, "kq_h", "h", good, 2));
    before = render(m);

    expect_fail(kq_metrics_gauge(m, NULL, "x", NULL), m, "bad metric name");
    expect_fail(kq_metrics_gauge(m, "", "x", NULL), m, "bad metric name");
    expect_fail(kq_metrics_gauge(m, "1abc", "x", NULL), m, "1abc");
    expect_fail(kq_metrics_gauge(m, "kq-dash", "x", NULL), m, "kq-dash");
    expect_fail(kq_metrics_gauge(m, "__reserved", "x", NULL), m, "__reserved");
    expect_fail(kq_metrics_counter(m, "kq_requests", "x", NULL), m, "must end in _total");
    expect_fail(kq_metrics_histogram(m, "kq_h2", "x", good, 0), m, "bucket bounds");
    expect_fail(kq_metrics_histogram(m, "kq_h2", "x", many, KQ_METRICS_MAX_BUCKETS + 1), m,
                "bucket bounds");
    expect_fail(kq_metrics_histogram(m, "kq_h2", "x", NULL, 2), m, "bucket bounds");
    expect_fail(kq_metrics_histogram(m, "kq_h2", "x", unsorted, 2), m, "strictly increasing");
    expect_fail(kq_metrics_histogram(m, "kq_h2", "x", dup, 2), m, "strictly increasing");
    expect_fail(kq_metrics_histogram(m, "kq_h2", "x", nan_bounds, 2), m, "finite");
    expect_fail(kq_metrics_histogram(m, "kq_h", "h", unsorted + 1, 1), m, "different bounds");

    /* labels */
    expect_fail(kq_metrics_gauge(m, "kq_l", "x", "state=leader"), m, "=\"value\"");
    expect_fail(kq_metrics_gauge(m, "kq_l", "x", "state=\"leader"), m, "unterminated");
    expect_fail(kq_metrics_gauge(m, "kq_l", "x", "a=\"1\",a=\"2\""), m, "appears twice");
    expect_fail(kq_metrics_gauge(m, "kq_l", "x", "__a=\"1\""), m, "reserved");
    expect_fail(kq_metrics_gauge(m, "kq_l", "x", "a=\"\\q\""), m, "bad escape");
    expect_fail(kq_metrics_gauge(m, "kq_l", "x", "a=\"1\" b=\"2\""), m, "expected ','");
    expect_fail(kq_metrics_gauge(m, "kq_l", "x", "1a=\"1\""), m, "bad label name");

    /* clashes with existing families */
    expect_fail(kq_metrics_gauge(m, "kq_h", "h", NULL), m, "already registered as a histogram");
    expect_fail(kq_metrics_gauge_int(m, "kq_ok", "ok", NULL), m, "already registered");
    expect_fail(kq_metrics_gauge(m, "kq_ok", "different help", "a=\"2\""), m, "different help");
    expect_fail(kq_metrics_gauge(m, "kq_h_bucket", "x", NULL), m, "histogram");
    assert_non_null(kq_metrics_gauge(m, "kq_count", "x", NULL));
    expect_fail(kq_metrics_histogram(m, "kq", "x", good, 2), m, "histogram");
    expect_fail(kq_metrics_gauge(NULL, "kq_x", "x", NULL), NULL, "no registry");

    /* nothing of the failed registrations shows up */
    after = render(m);
    assert_int_equal(strncmp(after, before, strlen(before)), 0);
    assert_string_equal(after + strlen(before),
                        "# HELP kq_count x\n# TYPE kq_count gauge\nkq_count 0\n");

    /* a success clears the error; re-registering the same series returns the same metric */
    assert_ptr_equal(kq_metrics_gauge(m, "kq_ok", "ok", "a=\"1\""),
                     kq_metrics_gauge(m, "kq_ok", "ok", "a=\"1\""));
    assert_string_equal(kq_metrics_last_error(m), "");
    free(before);
    free(after);
    kq_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins),         cmocka_unit_test(test_exact_render),
        cmocka_unit_test(test_escaping),         cmocka_unit_test(test_value_formatting),
        cmocka_unit_test(test_update_semantics), cmocka_unit_test(test_registration_errors),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
