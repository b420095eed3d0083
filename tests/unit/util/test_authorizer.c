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
        KQ_ACL_RESOURCE_TOPIC, n, KQ_ACL_PATTERN_##pat, who, "*", KQ_ACL_OP_##op, KQ_ACL_##perm    \
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
        {KQ_ACL_RESOURCE_TOPIC, "hosted", KQ_ACL_PATTERN_LITERAL, "User:app", "10.0.0.1",
         KQ_ACL_OP_WRITE, KQ_ACL_ALLOW},
        {KQ_ACL_RESOURCE_CLUSTER, KQ_ACL_CLUSTER_NAME, KQ_ACL_PATTERN_LITERAL, "User:ops", "*",
         KQ_ACL_OP_ALTER_CONFIGS, KQ_ACL_ALLOW},
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_super_users_and_no_acls),
        cmocka_unit_test(test_acls),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
