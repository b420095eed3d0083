/* kq topics --alter (the new partitions' assignments) and kq features upgrade / downgrade /
 * disable (--feature parsing, Kafka's result lines, failures counted), including every
 * rejected argument. */
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

static char *capture_results(kq_tools_feature_op op, const kq_tools_feature_updates *u,
                             const kq_ctl_item_results *r, bool dry_run, int *failed)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    assert_non_null(f);
    *failed = kq_tools_print_feature_results(f, op, u, r, dry_run);
    fclose(f);
    return buf;
}

static void test_new_partition_assignments(void **state)
{
    (void)state;
    int32_t *ids = NULL, np, rf, n_as = -1;
    kq_partition_assignment *as = NULL;
    char err[256] = "";

    assert_int_equal(
        kq_tools_parse_replica_assignment("1:2,2:3,3:1,1:3", &ids, &np, &rf, err, sizeof err), 0);
    assert_int_equal(np, 4);
    /* 2 existing partitions, new total 4: partitions 2 and 3 with their listed replicas. */
    assert_int_equal(
        kq_tools_new_partition_assignments(ids, np, rf, 2, 4, &as, &n_as, err, sizeof err), 0);
    assert_int_equal(n_as, 2);
    assert_int_equal(as[0].partition_index, 2);
    assert_int_equal(as[0].n_broker_ids, 2);
    assert_int_equal(as[0].broker_ids[0], 3);
    assert_int_equal(as[0].broker_ids[1], 1);
    assert_int_equal(as[1].partition_index, 3);
    assert_int_equal(as[1].broker_ids[0], 1);
    assert_int_equal(as[1].broker_ids[1], 3);
    free(as);

    /* The count must match --partitions. */
    assert_int_equal(
        kq_tools_new_partition_assignments(ids, np, rf, 2, 5, &as, &n_as, err, sizeof err),
        KQ_ERR_CONFIG);
    assert_null(as);
    assert_int_equal(n_as, 0);
    assert_non_null(strstr(err, "lists 4 partition(s) but --partitions is 5"));

    /* Not more than now: nothing to send, the controller answers INVALID_PARTITIONS. */
    assert_int_equal(
        kq_tools_new_partition_assignments(ids, np, rf, 4, 4, &as, &n_as, err, sizeof err), 0);
    assert_null(as);
    assert_int_equal(n_as, 0);
    free(ids);
}

static void test_parse_upgrade(void **state)
{
    (void)state;
    kq_tools_feature_updates u;
    const char *v[] = {"eligible.leader.replicas.version=1", "metadata.version=1"};
    char err[256] = "";

    assert_int_equal(
        kq_tools_parse_feature_updates(KQ_TOOLS_FEATURE_UPGRADE, v, 2, false, &u, err, sizeof err),
        0);
    assert_int_equal(u.n, 2);
    assert_string_equal(u.ups[0].name, "eligible.leader.replicas.version");
    assert_int_equal(u.ups[0].max_version_level, 1);
    assert_int_equal(u.ups[0].upgrade_type, KQ_FEATURE_UPGRADE);
    assert_string_equal(u.ups[1].name, "metadata.version");
    assert_int_equal(u.ups[1].upgrade_type, KQ_FEATURE_UPGRADE);

    const char *d[] = {"kraft.version=0"};
    assert_int_equal(kq_tools_parse_feature_updates(KQ_TOOLS_FEATURE_DOWNGRADE, d, 1, false, &u,
                                                    err, sizeof err),
                     0);
    assert_int_equal(u.ups[0].upgrade_type, KQ_FEATURE_SAFE_DOWNGRADE);
    assert_int_equal(u.ups[0].max_version_level, 0);
    assert_int_equal(
        kq_tools_parse_feature_updates(KQ_TOOLS_FEATURE_DOWNGRADE, d, 1, true, &u, err, sizeof err),
        0);
    assert_int_equal(u.ups[0].upgrade_type, KQ_FEATURE_UNSAFE_DOWNGRADE);

    const char *x[] = {"eligible.leader.replicas.version"};
    assert_int_equal(
        kq_tools_parse_feature_updates(KQ_TOOLS_FEATURE_DISABLE, x, 1, false, &u, err, sizeof err),
        0);
    assert_int_equal(u.n, 1);
    assert_string_equal(u.ups[0].name, "eligible.leader.replicas.version");
    assert_int_equal(u.ups[0].max_version_level, 0);
    assert_int_equal(u.ups[0].upgrade_type, KQ_FEATURE_SAFE_DOWNGRADE);
}

static void expect_bad(kq_tools_feature_op op, const char *value, bool unsafe, const char *needle)
{
    kq_tools_feature_updates u;
    const char *v[] = {value};
    char err[256] = "";

    assert_int_equal(kq_tools_parse_feature_updates(op, v, 1, unsafe, &u, err, sizeof err),
                     KQ_ERR_CONFIG);
    assert_int_equal(u.n, 0);
    if (!strstr(err, needle))
        fail_msg("'%s': expected an error containing '%s', got '%s'", value, needle, err);
}

static void test_parse_rejects(void **state)
{
    (void)state;
    kq_tools_feature_updates u;
    char err[256] = "", longname[400];

    expect_bad(KQ_TOOLS_FEATURE_UPGRADE, "metadata.version", false, "NAME=LEVEL");
    expect_bad(KQ_TOOLS_FEATURE_UPGRADE, "metadata.version=", false, "NAME=LEVEL");
    expect_bad(KQ_TOOLS_FEATURE_UPGRADE, "metadata.version=x1", false, "NAME=LEVEL");
    expect_bad(KQ_TOOLS_FEATURE_UPGRADE, "metadata.version=40000", false, "NAME=LEVEL");
    expect_bad(KQ_TOOLS_FEATURE_DOWNGRADE, "metadata.version=-1", false, "between 0 and 32767");
    expect_bad(KQ_TOOLS_FEATURE_UPGRADE, "=1", false, "empty feature name");
    expect_bad(KQ_TOOLS_FEATURE_DISABLE, "kraft.version=0", false, "NAME only");
    expect_bad(KQ_TOOLS_FEATURE_DISABLE, "", false, "empty feature name");
    expect_bad(KQ_TOOLS_FEATURE_UPGRADE, "kraft.version=1", true, "--unsafe");
    memset(longname, 'a', 300);
    strcpy(longname + 300, "=1");
    expect_bad(KQ_TOOLS_FEATURE_UPGRADE, longname, false, "longer than 255");

    const char *dup[] = {"kraft.version=0", "kraft.version=1"};
    assert_int_equal(kq_tools_parse_feature_updates(KQ_TOOLS_FEATURE_UPGRADE, dup, 2, false, &u,
                                                    err, sizeof err),
                     KQ_ERR_CONFIG);
    assert_non_null(strstr(err, "kraft.version is given more than once"));
    assert_int_equal(kq_tools_parse_feature_updates(KQ_TOOLS_FEATURE_UPGRADE, NULL, 0, false, &u,
                                                    err, sizeof err),
                     KQ_ERR_CONFIG);
    assert_non_null(strstr(err, "upgrade needs at least one --feature"));
}

static void test_print_results(void **state)
{
    (void)state;
    kq_tools_feature_updates u;
    const char *v[] = {"eligible.leader.replicas.version=1", "bogus=2", "kraft.version=1"};
    char err[256] = "", n0[] = "eligible.leader.replicas.version", n1[] = "bogus",
         m1[] = "unknown feature bogus";
    kq_ctl_item_result items[2] = {
        {.name = n0, .partition = -1, .num_partitions = -1, .replication_factor = -1},
        {.name = n1,
         .partition = -1,
         .num_partitions = -1,
         .replication_factor = -1,
         .error = KQ_ERR_INVALID_REQUEST,
         .message = m1},
    };
    kq_ctl_item_results r = {items, 2};
    int failed = -1;
    char *out;

    assert_int_equal(
        kq_tools_parse_feature_updates(KQ_TOOLS_FEATURE_UPGRADE, v, 3, false, &u, err, sizeof err),
        0);
    /* kraft.version has no result: counted as failed. */
    out = capture_results(KQ_TOOLS_FEATURE_UPGRADE, &u, &r, false, &failed);
    assert_string_equal(out,
                        "eligible.leader.replicas.version was upgraded to 1.\n"
                        "Could not upgrade bogus to 2. INVALID_REQUEST: unknown feature bogus\n"
                        "Could not upgrade kraft.version to 1. UNKNOWN_SERVER_ERROR: the "
                        "controller sent no result for this feature\n");
    assert_int_equal(failed, 2);
    free(out);

    u.n = 1;
    out = capture_results(KQ_TOOLS_FEATURE_UPGRADE, &u, &r, true, &failed);
    assert_string_equal(out, "eligible.leader.replicas.version can be upgraded to 1.\n");
    assert_int_equal(failed, 0);
    free(out);

    const char *d[] = {"eligible.leader.replicas.version=0"};
    assert_int_equal(kq_tools_parse_feature_updates(KQ_TOOLS_FEATURE_DOWNGRADE, d, 1, false, &u,
                                                    err, sizeof err),
                     0);
    out = capture_results(KQ_TOOLS_FEATURE_DOWNGRADE, &u, &r, false, &failed);
    assert_string_equal(out, "eligible.leader.replicas.version was downgraded to 0.\n");
    assert_int_equal(failed, 0);
    free(out);

    const char *x[] = {"eligible.leader.replicas.version", "bogus"};
    assert_int_equal(
        kq_tools_parse_feature_updates(KQ_TOOLS_FEATURE_DISABLE, x, 2, false, &u, err, sizeof err),
        0);
    out = capture_results(KQ_TOOLS_FEATURE_DISABLE, &u, &r, false, &failed);
    assert_string_equal(out, "eligible.leader.replicas.version was disabled.\n"
                             "Could not disable bogus. INVALID_REQUEST: unknown feature bogus\n");
    assert_int_equal(failed, 1);
    free(out);
    out = capture_results(KQ_TOOLS_FEATURE_DISABLE, &u, &r, true, &failed);
    assert_string_equal(out, "eligible.leader.replicas.version can be disabled.\n"
                             "Could not disable bogus. INVALID_REQUEST: unknown feature bogus\n");
    free(out);

    /* An error without a message falls back to the code's text. */
    items[1].message = NULL;
    out = capture_results(KQ_TOOLS_FEATURE_DISABLE, &u, &r, false, &failed);
    assert_non_null(strstr(out, "Could not disable bogus. INVALID_REQUEST: "));
    assert_non_null(strstr(out, kq_err_message(KQ_ERR_INVALID_REQUEST)));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_partition_assignments),
        cmocka_unit_test(test_parse_upgrade),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_print_results),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
