/* kq_principal: Kafka's ssl.principal.mapping.rules (DEFAULT, RULE with groups and /L /U,
 * order, no match), refused rules, and node.principal.template. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "kq/error.h"
#include "kq/principal.h"

static char err[512];

static kq_principal_rules *rules(const char *value)
{
    kq_principal_rules *r = NULL;

    if (kq_principal_rules_parse(value, &r, err, sizeof err) != 0)
        fail_msg("'%s' refused: %s", value ? value : "(null)", err);
    return r;
}

static void expect(const kq_principal_rules *r, const char *subject, bool known, const char *want)
{
    char out[KQ_PRINCIPAL_MAX];

    assert_int_equal(kq_principal_of(r, subject, out, sizeof out), known);
    assert_string_equal(out, want);
}

static void test_default(void **state)
{
    kq_principal_rules *r = rules(NULL);

    (void)state;
    expect(r, "CN=node-3,OU=brokers,O=kq\\, Inc.", true, "User:CN=node-3,OU=brokers,O=kq\\, Inc.");
    expect(r, "", false, "User:ANONYMOUS");
    expect(r, NULL, false, "User:ANONYMOUS");
    kq_principal_rules_free(r);
}

static void test_rules_in_order(void **state)
{
    kq_principal_rules *r =
        rules("RULE:^CN=([^,]*),OU=ServiceUsers,O=Unknown$/$1/, RULE:^CN=([^,]*),OU=(.*)$/$2-$1/U,"
              "RULE:^CN=admin$/operator/L ,DEFAULT");

    (void)state;
    expect(r, "CN=svc1,OU=ServiceUsers,O=Unknown", true, "User:svc1");
    expect(r, "CN=b1,OU=brokers", true, "User:BROKERS-B1");
    expect(r, "CN=admin", true, "User:operator");
    /* no RULE matches: DEFAULT */
    expect(r, "CN=node-1", true, "User:CN=node-1");
    /* the pattern must match the whole subject */
    expect(r, "X=1,CN=admin", true, "User:X=1,CN=admin");
    kq_principal_rules_free(r);

    /* without DEFAULT, an unmapped subject is nobody */
    r = rules("RULE:^CN=(node-[0-9]+)$/$1/");
    expect(r, "CN=node-7", true, "User:node-7");
    expect(r, "CN=intruder", false, "User:ANONYMOUS");
    kq_principal_rules_free(r);
    /* unanchored patterns still match the whole subject only; $0 is the whole match */
    r = rules("RULE:CN=admin/$0-ops/");
    expect(r, "CN=admin", true, "User:CN=admin-ops");
    expect(r, "X=1,CN=admin", false, "User:ANONYMOUS");
    expect(r, "CN=admin,O=x", false, "User:ANONYMOUS");
    kq_principal_rules_free(r);
    /* a slash in a pattern, escaped */
    r = rules("RULE:^CN=a\\/b$/ab/");
    expect(r, "CN=a/b", true, "User:ab");
    kq_principal_rules_free(r);
}

static void test_bad_rules_are_named(void **state)
{
    static const struct {
        const char *value, *want;
    } bad[] = {
        {"RULE:^CN=(.*?),OU=x$/$1/", "lazy quantifier"},
        {"RULE:^CN=(.*$/$1/", "not a valid extended regular expression"},
        {"RULE:^CN=x$", "is not RULE:pattern/replacement/[LU]"},
        {"RULE:^CN=x$/y/Q", "unexpected 'Q'"},
        {"RULE:^CN=node-(\\d+)$/$1/", "Java class escape"},
        {"DEFAULTS", "is not DEFAULT or RULE"},
        {"SOMETHING", "is not DEFAULT or RULE"},
    };
    kq_principal_rules *r = (kq_principal_rules *)err;

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(kq_principal_rules_parse(bad[i].value, &r, err, sizeof err),
                         KQ_ERR_CONFIG);
        assert_null(r);
        if (!strstr(err, bad[i].want) || !strstr(err, "ssl.principal.mapping.rules"))
            fail_msg("'%s': expected '%s' in '%s'", bad[i].value, bad[i].want, err);
    }
}

static void test_node_principals(void **state)
{
    const char *t = KQ_NODE_PRINCIPAL_TEMPLATE_DEFAULT;

    (void)state;
    assert_int_equal(kq_node_principal_template_check(t, err, sizeof err), 0);
    assert_true(kq_principal_is_node(t, "User:CN=node-3002", 3002));
    assert_false(kq_principal_is_node(t, "User:CN=node-3002", 3003));
    assert_false(kq_principal_is_node(t, "User:CN=node-30021", 3002));
    assert_false(kq_principal_is_node(t, "User:CN=node-1", 3001));
    assert_false(kq_principal_is_node(t, "User:ANONYMOUS", 1));
    assert_false(kq_principal_is_node(t, "User:CN=node--1", -1));
    assert_true(kq_principal_is_node("User:CN=kq-{id}.example.com,O=kq",
                                     "User:CN=kq-7.example.com,O=kq", 7));
    assert_int_equal(kq_node_principal_template_check("CN=node-{id}", err, sizeof err),
                     KQ_ERR_CONFIG);
    assert_non_null(strstr(err, "node.principal.template"));
    assert_int_equal(kq_node_principal_template_check("User:CN=node", err, sizeof err),
                     KQ_ERR_CONFIG);
    assert_int_equal(kq_node_principal_template_check("User:{id}-{id}", err, sizeof err),
                     KQ_ERR_CONFIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default),
        cmocka_unit_test(test_rules_in_order),
        cmocka_unit_test(test_bad_rules_are_named),
        cmocka_unit_test(test_node_principals),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
