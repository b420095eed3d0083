/* kq_authorizer: StandardAuthorizer's decision (super users, literal, wildcard and prefixed
 * resources, User:* and host matching, DENY over ALLOW, implied Describe, the no-ACL rule),
 * super.users parsing, and the reasons given. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "kq/authorizer.h"

static char why[512];

#define TOPIC(n, pat, who, op, perm)                                                               \
    {                                                                                              \
        .resource_type = KQ_ACL_RESOURCE_TOPIC, .resource_name = n,                                \
        .pattern_type = KQ_ACL_PATTERN_##pat, .principal = who, .host = "*",                       \
        .operation = KQ_ACL_OP_##op, .permission = KQ_ACL_##perm                                   \
    }

static bool may(const kq_authorizer_config *c, const kq_acl *acls, size_t n, const char *who,
                kq_acl_operation op, kq_acl_resource_type type, const char *name)
{
    why[0] = '\0';
    return kq_authorize(c, acls, n, who, "127.0.0.1", op, type, name, why, sizeof why);
}

static void test_super_users_and_no_acls(void **state)
{
    kq_authorizer_config c = {.enabled = true};
    char err[256];

    (void)state;
    assert_int_equal(
        kq_authorizer_parse_super_users(" User:admin ; User:CN=ops,O=x;", &c, err, sizeof err), 0);
    assert_int_equal(c.n_super_users, 2);
    assert_string_equal(c.super_users[1], "User:CN=ops,O=x");
    assert_true(may(&c, NULL, 0, "User:admin", KQ_ACL_OP_DELETE, KQ_ACL_RESOURCE_TOPIC, "t"));
    assert_true(may(&c, NULL, 0, "User:CN=ops,O=x", KQ_ACL_OP_ALTER, KQ_ACL_RESOURCE_CLUSTER,
                    KQ_ACL_CLUSTER_NAME));
    /* anybody else: no ACL, and allow.everyone.if.no.acl.found is false */
    assert_false(may(&c, NULL, 0, "User:CN=node-1", KQ_ACL_OP_DELETE, KQ_ACL_RESOURCE_TOPIC, "t"));
    assert_string_equal(why, "principal User:CN=node-1 is not allowed to Delete on Topic t (no "
                             "ACL on the resource, allow.everyone.if.no.acl.found=false)");
    c.allow_everyone_if_no_acl_found = true;
    assert_true(may(&c, NULL, 0, "User:CN=node-1", KQ_ACL_OP_DELETE, KQ_ACL_RESOURCE_TOPIC, "t"));
    /* no authorizer: everything */
    c.enabled = false;
    assert_true(may(&c, NULL, 0, NULL, KQ_ACL_OP_ALTER, KQ_ACL_RESOURCE_CLUSTER, "x"));

    assert_int_equal(kq_authorizer_parse_super_users("admin", &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "super.users: 'admin' is not a principal"));
}

static void test_acls(void **state)
{
    kq_authorizer_config c = {.enabled = true, .allow_everyone_if_no_acl_found = true};
    const kq_acl acls[] = {
        TOPIC("orders", LITERAL, "User:reader", DESCRIBE, ALLOW),
        TOPIC("pay-", PREFIXED, "User:app", WRITE, ALLOW),
        TOPIC("pay-secret", LITERAL, "User:app", ALL, DENY),
        TOPIC("*", LITERAL, "User:*", READ, ALLOW),
        TOPIC("logs", LITERAL, "User:app", READ, DENY),
        {.resource_type = KQ_ACL_RESOURCE_TOPIC, .resource_name = "hosted",
         .pattern_type = KQ_ACL_PATTERN_LITERAL, .principal = "User:app", .host = "10.0.0.1",
         .operation = KQ_ACL_OP_WRITE, .permission = KQ_ACL_ALLOW},
        {.resource_type = KQ_ACL_RESOURCE_CLUSTER, .resource_name = KQ_ACL_CLUSTER_NAME,
         .pattern_type = KQ_ACL_PATTERN_LITERAL, .principal = "User:ops", .host = "*",
         .operation = KQ_ACL_OP_ALTER_CONFIGS, .permission = KQ_ACL_ALLOW},
    };
    size_t n = sizeof acls / sizeof acls[0];

    (void)state;
    /* a reader granted only Describe describes and does nothing else */
    assert_true(
        may(&c, acls, n, "User:reader", KQ_ACL_OP_DESCRIBE, KQ_ACL_RESOURCE_TOPIC, "orders"));
    assert_false(
        may(&c, acls, n, "User:reader", KQ_ACL_OP_DELETE, KQ_ACL_RESOURCE_TOPIC, "orders"));
    assert_non_null(strstr(why, "no ACL allows it"));
    assert_false(
        may(&c, acls, n, "User:reader", KQ_ACL_OP_CREATE, KQ_ACL_RESOURCE_TOPIC, "orders"));
    /* the wildcard topic ACL lets everyone read, and reading implies describing */
    assert_true(may(&c, acls, n, "User:reader", KQ_ACL_OP_READ, KQ_ACL_RESOURCE_TOPIC, "orders"));
    assert_true(may(&c, acls, n, "User:x", KQ_ACL_OP_DESCRIBE, KQ_ACL_RESOURCE_TOPIC, "any"));
    /* prefixed, and DENY beats ALLOW */
    assert_true(may(&c, acls, n, "User:app", KQ_ACL_OP_WRITE, KQ_ACL_RESOURCE_TOPIC, "pay-eu"));
    assert_true(may(&c, acls, n, "User:app", KQ_ACL_OP_DESCRIBE, KQ_ACL_RESOURCE_TOPIC, "pay-eu"));
    assert_false(
        may(&c, acls, n, "User:app", KQ_ACL_OP_WRITE, KQ_ACL_RESOURCE_TOPIC, "pay-secret"));
    assert_non_null(strstr(why, "an ACL denies it"));
    assert_false(may(&c, acls, n, "User:app", KQ_ACL_OP_WRITE, KQ_ACL_RESOURCE_TOPIC, "pa"));
    /* a DENY of Read does not deny Describe */
    assert_false(may(&c, acls, n, "User:app", KQ_ACL_OP_READ, KQ_ACL_RESOURCE_TOPIC, "logs"));
    assert_true(may(&c, acls, n, "User:app", KQ_ACL_OP_DESCRIBE, KQ_ACL_RESOURCE_TOPIC, "logs"));
    /* hosts */
    assert_false(may(&c, acls, n, "User:app", KQ_ACL_OP_WRITE, KQ_ACL_RESOURCE_TOPIC, "hosted"));
    assert_true(kq_authorize(&c, acls, n, "User:app", "10.0.0.1", KQ_ACL_OP_WRITE,
                             KQ_ACL_RESOURCE_TOPIC, "hosted", why, sizeof why));
    /* the cluster resource; AlterConfigs implies DescribeConfigs */
    assert_true(may(&c, acls, n, "User:ops", KQ_ACL_OP_DESCRIBE_CONFIGS, KQ_ACL_RESOURCE_CLUSTER,
                    KQ_ACL_CLUSTER_NAME));
    assert_false(may(&c, acls, n, "User:ops", KQ_ACL_OP_ALTER, KQ_ACL_RESOURCE_CLUSTER,
                     KQ_ACL_CLUSTER_NAME));
    /* ACLs on the resource switch the no-ACL rule off for it */
    assert_false(may(&c, acls, n, "User:x", KQ_ACL_OP_DELETE, KQ_ACL_RESOURCE_TOPIC, "orders"));
    assert_false(
        may(&c, acls, n, "User:x", KQ_ACL_OP_ALTER, KQ_ACL_RESOURCE_CLUSTER, KQ_ACL_CLUSTER_NAME));
    /* a resource without ACLs still follows it */
    /* the "*" READ ACL is on every topic, so the no-ACL rule holds for no topic */
    assert_false(may(&c, acls, n, "User:x", KQ_ACL_OP_DELETE, KQ_ACL_RESOURCE_TOPIC, "zzz"));
}

/* DescribeAcls/DeleteAcls filters: ANY and NULL match everything, MATCH what applies. */
static void test_filters(void **state)
{
    const kq_acl lit = TOPIC("orders", LITERAL, "User:alice", READ, ALLOW);
    const kq_acl pre = TOPIC("ord", PREFIXED, "User:bob", WRITE, DENY);
    const kq_acl star = TOPIC("*", LITERAL, "User:*", DESCRIBE, ALLOW);
    kq_acl_filter any = {KQ_ACL_ANY, NULL, KQ_ACL_ANY, NULL, NULL, KQ_ACL_ANY, KQ_ACL_ANY};
    kq_acl_filter f = any;
    char err[256];

    (void)state;
    assert_true(kq_acl_filter_matches(&any, &lit) && kq_acl_filter_matches(&any, &pre));
    f.resource_name = "orders"; /* exact name, any pattern type */
    assert_true(kq_acl_filter_matches(&f, &lit));
    assert_false(kq_acl_filter_matches(&f, &pre));
    f.pattern_type = KQ_ACL_PATTERN_MATCH; /* what applies to topic orders */
    assert_true(kq_acl_filter_matches(&f, &lit));
    assert_true(kq_acl_filter_matches(&f, &pre));
    assert_true(kq_acl_filter_matches(&f, &star));
    f.resource_name = "payments";
    assert_false(kq_acl_filter_matches(&f, &pre));
    assert_true(kq_acl_filter_matches(&f, &star));
    f = any;
    f.principal = "User:bob";
    f.permission = KQ_ACL_DENY;
    assert_true(kq_acl_filter_matches(&f, &pre));
    assert_false(kq_acl_filter_matches(&f, &lit));
    f = any;
    f.operation = KQ_ACL_OP_READ;
    f.resource_type = KQ_ACL_RESOURCE_CLUSTER;
    assert_false(kq_acl_filter_matches(&f, &lit));

    assert_int_equal(kq_acl_filter_check(&any, err, sizeof err), 0);
    f = any;
    f.pattern_type = KQ_ACL_PATTERN_MATCH;
    assert_int_equal(kq_acl_filter_check(&f, err, sizeof err), -1);
    assert_non_null(strstr(err, "Match"));
    f = any;
    f.operation = 0;
    assert_int_equal(kq_acl_filter_check(&f, err, sizeof err), -1);
    assert_non_null(strstr(err, "operation"));
}

/* What may be stored: Kafka's per-resource operations, names, principals; host only "*". */
static void test_binding_check(void **state)
{
    kq_acl a = TOPIC("orders", LITERAL, "User:alice", READ, ALLOW);
    char err[512];

    (void)state;
    assert_int_equal(kq_acl_binding_check(&a, err, sizeof err), 0);
    a.resource_name = "bad name";
    assert_int_equal(kq_acl_binding_check(&a, err, sizeof err), -1);
    assert_non_null(strstr(err, "topic name"));
    a.resource_name = "*";
    assert_int_equal(kq_acl_binding_check(&a, err, sizeof err), 0);
    a.pattern_type = KQ_ACL_PATTERN_PREFIXED; /* a prefixed "*" is not a topic prefix */
    assert_int_equal(kq_acl_binding_check(&a, err, sizeof err), -1);
    a = (kq_acl)TOPIC("orders", LITERAL, "alice", READ, ALLOW);
    assert_int_equal(kq_acl_binding_check(&a, err, sizeof err), -1);
    assert_non_null(strstr(err, "User:NAME"));
    a = (kq_acl)TOPIC("orders", LITERAL, "User:alice", CLUSTER_ACTION, ALLOW);
    assert_int_equal(kq_acl_binding_check(&a, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not apply"));
    a = (kq_acl)TOPIC("orders", LITERAL, "User:alice", READ, ALLOW);
    a.host = "10.1.2.3";
    assert_int_equal(kq_acl_binding_check(&a, err, sizeof err), -1);
    assert_non_null(strstr(err, "host"));
    a = (kq_acl){.resource_type = KQ_ACL_RESOURCE_CLUSTER,
                 .resource_name = "kafka-cluster",
                 .pattern_type = KQ_ACL_PATTERN_LITERAL,
                 .principal = "User:*",
                 .host = "*",
                 .operation = KQ_ACL_OP_CLUSTER_ACTION,
                 .permission = KQ_ACL_ALLOW};
    assert_int_equal(kq_acl_binding_check(&a, err, sizeof err), 0);
    a.resource_name = "other";
    assert_int_equal(kq_acl_binding_check(&a, err, sizeof err), -1);
    a.resource_name = "kafka-cluster";
    a.operation = KQ_ACL_OP_READ;
    assert_int_equal(kq_acl_binding_check(&a, err, sizeof err), -1);
}

static void test_names(void **state)
{
    char buf[160];
    const kq_acl a = TOPIC("t", LITERAL, "User:alice", DESCRIBE_CONFIGS, DENY);

    (void)state;
    assert_int_equal(kq_acl_operation_parse("DescribeConfigs", false), KQ_ACL_OP_DESCRIBE_CONFIGS);
    assert_int_equal(kq_acl_operation_parse("describe_configs", false), KQ_ACL_OP_DESCRIBE_CONFIGS);
    assert_int_equal(kq_acl_operation_parse("READ", false), KQ_ACL_OP_READ);
    assert_int_equal(kq_acl_operation_parse("Any", false), 0);
    assert_int_equal(kq_acl_operation_parse("Any", true), KQ_ACL_ANY);
    assert_int_equal(kq_acl_operation_parse("Frobnicate", true), 0);
    assert_int_equal(kq_acl_pattern_type_parse("prefixed", false), KQ_ACL_PATTERN_PREFIXED);
    assert_int_equal(kq_acl_pattern_type_parse("match", false), 0);
    assert_int_equal(kq_acl_pattern_type_parse("match", true), KQ_ACL_PATTERN_MATCH);
    kq_acl_entry_format(&a, buf, sizeof buf);
    assert_string_equal(
        buf, "(principal=User:alice, host=*, operation=DESCRIBE_CONFIGS, permissionType=DENY)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_super_users_and_no_acls),
        cmocka_unit_test(test_acls),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_binding_check),
        cmocka_unit_test(test_names),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
