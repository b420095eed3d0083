/* kq_config: .properties syntax, typed getters and their messages, unknown-key warnings,
 * voters / listener / host:port parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kq/config.h"
#include "kq/util.h"
#include "kq/error.h"
#include "kq/log.h"

static char err[512];

static kq_config *parse_ok(const char *text)
{
    kq_config *c = NULL;
    err[0] = '\0';
    int rc = kq_config_parse(text, &c, err, sizeof(err));
    if (rc != 0)
        fail_msg("parse failed: %s", err);
    assert_non_null(c);
    return c;
}

static void assert_contains(const char *s, const char *needle)
{
    if (strstr(s, needle) == NULL)
        fail_msg("'%s' does not contain '%s'", s, needle);
}

/* ---- syntax ----------------------------------------------------------------------------- */

static const char *sample = "# a comment\n"
                            "! a bang comment\n"
                            "\n"
                            "   \t\n"
                            "   key1 = value one   \n"
                            "key2:value2\n"
                            "key3 value3\n"
                            "key4=a\\\n"
                            "    b\\\n"
                            "\t c\n"
                            "key5 = ends in a backslash \\\\\n"
                            "key6=\n"
                            "  key7=indented\n"
                            "key\\ with\\ space = x\n"
                            "unicode=caf\\u00e9 \\uD83D\\uDE00\n"
                            "tab=\\t\n"
                            "dup=1\n"
                            "dup=2\n"
                            "# a comment ending in a backslash does not continue \\\n"
                            "notcontinued=yes\n"
                            "colon\\:key=v\n"
                            "eq = a=b:c\n"
                            "crlf=yes\r\n"
                            "cr=old mac\r"
                            "last=abc\\";

static void test_properties_syntax(void **state)
{
    kq_config *c = parse_ok(sample);
    assert_string_equal(kq_config_get(c, "key1"), "value one");
    assert_string_equal(kq_config_get(c, "key2"), "value2");
    assert_string_equal(kq_config_get(c, "key3"), "value3");
    assert_string_equal(kq_config_get(c, "key4"), "abc");
    assert_string_equal(kq_config_get(c, "key5"), "ends in a backslash \\");
    assert_string_equal(kq_config_get(c, "key6"), "");
    assert_string_equal(kq_config_get(c, "key7"), "indented");
    assert_string_equal(kq_config_get(c, "key with space"), "x");
    assert_string_equal(kq_config_get(c, "unicode"), "caf\xc3\xa9 \xf0\x9f\x98\x80");
    assert_string_equal(kq_config_get(c, "tab"), "\t");
    assert_string_equal(kq_config_get(c, "dup"), "2");
    assert_string_equal(kq_config_get(c, "notcontinued"), "yes");
    assert_string_equal(kq_config_get(c, "colon:key"), "v");
    assert_string_equal(kq_config_get(c, "eq"), "a=b:c");
    assert_string_equal(kq_config_get(c, "crlf"), "yes");
    assert_string_equal(kq_config_get(c, "cr"), "old mac");
    assert_string_equal(kq_config_get(c, "last"), "abc");
    assert_null(kq_config_get(c, "# a comment"));
    assert_null(kq_config_get(c, "missing"));
    assert_null(kq_config_get(c, "key"));
    kq_config_free(c);

    c = parse_ok("");
    assert_null(kq_config_get(c, "anything"));
    kq_config_free(c);
}

static void test_syntax_errors_name_the_line(void **state)
{
    kq_config *c = (kq_config *)0x1;
    assert_int_equal(kq_config_parse("a=1\n\nbad=\\u12G4\n", &c, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_null(c);
    assert_contains(err, "line 3");
    assert_contains(err, "malformed \\uXXXX escape");
    assert_contains(err, "'bad'");

    assert_int_equal(kq_config_parse("ok=1\n=value\n", &c, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_contains(err, "line 2: missing key");

    assert_int_equal(kq_config_parse("x=\\uD800 lone surrogate\n", &c, err, sizeof(err)),
                     KQ_ERR_CONFIG);
    assert_contains(err, "line 1");
    /* errbuf is optional */
    assert_int_equal(kq_config_parse("=x", &c, NULL, 0), KQ_ERR_CONFIG);
}

/* ---- getters ---------------------------------------------------------------------------- */

#define TIMEOUT_KEY "controller.quorum.election.timeout.ms"

static void test_int_getter(void **state)
{
    kq_config *c = parse_ok("node.id=3\n"
                            "neg=-5\n"
                            "plus=+7\n" TIMEOUT_KEY "=abc\n"
                            "garbage=10ms\n"
                            "zero=0\n"
                            "huge=99999999999999999999\n"
                            "max=9223372036854775807\n"
                            "min=-9223372036854775808\n"
                            "over=9223372036854775808\n"
                            "empty=\n"
                            "hex=0x10\n"
                            "inner=1 2\n");
    int64_t v = 0;
    assert_int_equal(kq_config_int(c, "node.id", -1, 0, 1000, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 3);
    assert_int_equal(kq_config_int(c, "absent", 1000, 1, 86400000, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 1000);
    assert_int_equal(kq_config_int(c, "neg", 0, -10, 10, &v, err, sizeof(err)), 0);
    assert_int_equal(v, -5);
    assert_int_equal(kq_config_int(c, "plus", 0, -10, 10, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 7);
    assert_int_equal(kq_config_int(c, "max", 0, INT64_MIN, INT64_MAX, &v, err, sizeof(err)), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(kq_config_int(c, "min", 0, INT64_MIN, INT64_MAX, &v, err, sizeof(err)), 0);
    assert_true(v == INT64_MIN);

    v = 42;
    assert_int_equal(kq_config_int(c, TIMEOUT_KEY, 1000, 1, 86400000, &v, err, sizeof(err)),
                     KQ_ERR_CONFIG);
    assert_string_equal(err, TIMEOUT_KEY ": 'abc' is not an integer in [1, 86400000]");
    assert_int_equal(kq_config_int(c, "garbage", 0, 0, 100, &v, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_string_equal(err, "garbage: '10ms' is not an integer in [0, 100]");
    assert_int_equal(kq_config_int(c, "zero", 5, 1, 86400000, &v, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_string_equal(err, "zero: '0' is out of range; expected an integer in [1, 86400000]");
    assert_int_equal(kq_config_int(c, "neg", 0, 0, 10, &v, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_string_equal(err, "neg: '-5' is out of range; expected an integer in [0, 10]");
    assert_int_equal(kq_config_int(c, "huge", 0, INT64_MIN, INT64_MAX, &v, err, sizeof(err)),
                     KQ_ERR_CONFIG);
    assert_contains(err, "huge: '99999999999999999999' is out of range");
    assert_int_equal(kq_config_int(c, "over", 0, INT64_MIN, INT64_MAX, &v, err, sizeof(err)),
                     KQ_ERR_CONFIG);
    assert_contains(err, "over: '9223372036854775808' is out of range");
    assert_int_equal(kq_config_int(c, "empty", 3, 0, 10, &v, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_string_equal(err, "empty: '' is not an integer in [0, 10]");
    assert_int_equal(kq_config_int(c, "hex", 3, 0, 100, &v, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_string_equal(err, "hex: '0x10' is not an integer in [0, 100]");
    assert_int_equal(kq_config_int(c, "inner", 3, 0, 100, &v, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_int_equal(v, 42); /* untouched on error */

    /* values set programmatically are trimmed like file values */
    assert_int_equal(kq_config_set(c, "spaced", " 12\t"), 0);
    assert_int_equal(kq_config_int(c, "spaced", 0, 0, 100, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 12);
    kq_config_free(c);
}

static void test_bool_getter(void **state)
{
    kq_config *c = parse_ok("a=true\nb=FALSE\nc=True\nd=yes\ne=1\nf=\ng=truex\n");
    int v = -1;
    assert_int_equal(kq_config_bool(c, "a", 0, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 1);
    assert_int_equal(kq_config_bool(c, "b", 1, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 0);
    assert_int_equal(kq_config_bool(c, "c", 0, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 1);
    assert_int_equal(kq_config_bool(c, "absent", 1, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 1);
    assert_int_equal(kq_config_bool(c, "absent", 0, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 0);
    assert_int_equal(kq_config_bool(c, "d", 0, &v, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_string_equal(err, "d: 'yes' is not a boolean (expected true or false)");
    assert_int_equal(kq_config_bool(c, "e", 0, &v, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_string_equal(err, "e: '1' is not a boolean (expected true or false)");
    assert_int_equal(kq_config_bool(c, "f", 0, &v, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_string_equal(err, "f: '' is not a boolean (expected true or false)");
    assert_int_equal(kq_config_bool(c, "g", 0, &v, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_contains(err, "g: 'truex'");
    kq_config_free(c);
}

static void test_string_required_set(void **state)
{
    kq_config *c = parse_ok("process.roles=controller\nempty=\n");
    const char *s = NULL;
    assert_int_equal(kq_config_string(c, "process.roles", "x", &s, err, sizeof(err)), 0);
    assert_string_equal(s, "controller");
    assert_int_equal(kq_config_string(c, "log.dirs", "/tmp/kq", &s, err, sizeof(err)), 0);
    assert_string_equal(s, "/tmp/kq");
    assert_int_equal(kq_config_string(c, "log.dirs", NULL, &s, err, sizeof(err)), 0);
    assert_null(s);
    assert_int_equal(kq_config_string(c, "empty", "def", &s, err, sizeof(err)), 0);
    assert_string_equal(s, "");

    assert_int_equal(kq_config_required(c, "process.roles", &s, err, sizeof(err)), 0);
    assert_string_equal(s, "controller");
    assert_int_equal(kq_config_required(c, "node.id", &s, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_string_equal(err, "node.id: missing required key (it has no default value)");
    assert_int_equal(kq_config_required(c, "empty", &s, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_contains(err, "empty: missing required key");

    assert_int_equal(kq_config_set(c, "process.roles", "broker,controller"), 0);
    assert_string_equal(kq_config_get(c, "process.roles"), "broker,controller");
    assert_int_equal(kq_config_set(c, "new.key", "v"), 0);
    assert_string_equal(kq_config_get(c, "new.key"), "v");
    assert_int_equal(kq_config_set(c, "new.key", NULL), 0); /* removes */
    assert_null(kq_config_get(c, "new.key"));
    assert_int_equal(kq_config_set(c, "", "v"), KQ_ERR_CONFIG);
    assert_int_equal(kq_config_set(c, NULL, "v"), KQ_ERR_CONFIG);
    kq_config_free(c);
}

/* ---- unknown keys ----------------------------------------------------------------------- */

static char captured[64 * 1024];

/* Run fn(c) with stderr captured into `captured`. */
static void capture(void (*fn)(kq_config *), kq_config *c)
{
    int p[2];
    int saved = dup(STDERR_FILENO);
    assert_int_equal(pipe(p), 0);
    dup2(p[1], STDERR_FILENO);
    close(p[1]);
    kq_log_init(-1, KQ_LOG_INFO);
    fn(c);
    dup2(saved, STDERR_FILENO);
    close(saved);
    ssize_t n = read(p[0], captured, sizeof(captured) - 1);
    close(p[0]);
    captured[n > 0 ? n : 0] = '\0';
}

static void capture_warn_unknown(kq_config *c)
{
    capture(kq_config_warn_unknown, c);
}

static void parse_dup(kq_config *unused)
{
    kq_config *c = parse_ok("a=1\nb=2\na=3\n");
    assert_string_equal(kq_config_get(c, "a"), "3");
    kq_config_free(c);
}

static void test_duplicate_key_last_wins_with_warning(void **state)
{
    capture(parse_dup, NULL);
    assert_contains(captured, "level=warn component=config msg=\"duplicate config key, the last "
                              "value wins\" key=a line=3\n");
}

static void test_warn_unknown_once(void **state)
{
    kq_config *c = parse_ok("node.id=1\ntypo.kye=3\nprocess.roles=controller\nodd\\ key=1\n");
    int64_t v;
    const char *s;
    assert_int_equal(kq_config_int(c, "node.id", 0, 0, 100, &v, err, sizeof(err)), 0);
    assert_int_equal(kq_config_string(c, "process.roles", NULL, &s, err, sizeof(err)), 0);
    capture_warn_unknown(c);
    assert_contains(captured, "level=warn component=config msg=\"unknown config key, ignored\" "
                              "key=typo.kye\n");
    assert_contains(captured, "key=\"odd key\"\n");
    assert_null(strstr(captured, "node.id"));
    assert_null(strstr(captured, "process.roles"));
    /* once per key */
    capture_warn_unknown(c);
    assert_string_equal(captured, "");
    kq_config_free(c);
}

/* ---- files ------------------------------------------------------------------------------ */

static void test_load_file(void **state)
{
    char path[] = "/tmp/kq_test_config_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "node.id=2\nbad=\\uZZZZ\n";
    assert_int_equal(write(fd, "node.id=2\n", 10), 10);
    close(fd);

    kq_config *c = NULL;
    assert_int_equal(kq_config_load(path, &c, err, sizeof(err)), 0);
    assert_string_equal(kq_config_get(c, "node.id"), "2");
    kq_config_free(c);

    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(kq_config_load(path, &c, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_null(c);
    assert_contains(err, path);
    assert_contains(err, "line 2");
    unlink(path);

    assert_int_equal(kq_config_load(path, &c, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_contains(err, "cannot read config file");
    assert_contains(err, path);
    assert_contains(err, "No such file or directory");

    assert_int_equal(kq_config_load("/tmp", &c, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_contains(err, "'/tmp'");
    assert_contains(err, "Is a directory");
    assert_int_equal(kq_config_load("", &c, err, sizeof(err)), KQ_ERR_CONFIG);
}

/* ---- voters ----------------------------------------------------------------------------- */

static void test_voters_ok(void **state)
{
    kq_voter_addr v[4];
    int n = -1;
    assert_int_equal(kq_config_parse_voters("1@host:9093,2@[::1]:9094", v, 4, &n, err, sizeof(err)),
                     0);
    assert_int_equal(n, 2);
    assert_int_equal(v[0].id, 1);
    assert_string_equal(v[0].host, "host");
    assert_int_equal(v[0].port, 9093);
    assert_int_equal(v[1].id, 2);
    assert_string_equal(v[1].host, "::1");
    assert_int_equal(v[1].port, 9094);

    assert_int_equal(kq_config_parse_voters(" 0@c-0.example.com:1 , 2147483647@10.0.0.3:65535 ", v,
                                            4, &n, err, sizeof(err)),
                     0);
    assert_int_equal(n, 2);
    assert_int_equal(v[0].id, 0);
    assert_string_equal(v[0].host, "c-0.example.com");
    assert_int_equal(v[0].port, 1);
    assert_int_equal(v[1].id, 2147483647);
    assert_int_equal(v[1].port, 65535);
}

static void voters_err(const char *value, int max, const char *needle1, const char *needle2)
{
    kq_voter_addr v[4];
    int n = -1;
    err[0] = '\0';
    if (kq_config_parse_voters(value, v, max, &n, err, sizeof(err)) != KQ_ERR_CONFIG)
        fail_msg("'%s' was accepted", value);
    assert_int_equal(n, 0);
    assert_contains(err, "controller.quorum.voters: ");
    if (needle1)
        assert_contains(err, needle1);
    if (needle2)
        assert_contains(err, needle2);
}

/* kq storage format --initial-controllers: the voters' rules plus a directory id each */
static void test_initial_controllers(void **state)
{
    kq_initial_controller c[4];
    int n = -1;
    char dir[23];
    (void)state;
    assert_int_equal(
        kq_config_parse_initial_controllers(
            "3001@c1:9093:fMCL8kv1SWm87L_Md-I2hg, 3002@[::1]:9094:K2w3UNMfQQ2bbtvWyb0Peg", c, 4, &n,
            err, sizeof(err)),
        0);
    assert_int_equal(n, 2);
    assert_int_equal(c[0].addr.id, 3001);
    assert_string_equal(c[0].addr.host, "c1");
    assert_int_equal(c[0].addr.port, 9093);
    kq_uuid_format(c[0].dir, dir);
    assert_string_equal(dir, "fMCL8kv1SWm87L_Md-I2hg");
    assert_string_equal(c[1].addr.host, "::1");
    kq_uuid_format(c[1].dir, dir);
    assert_string_equal(dir, "K2w3UNMfQQ2bbtvWyb0Peg");

    static const struct {
        const char *value, *needle;
    } bad[] = {
        {"3001@c1:9093", "entry '3001@c1:9093': expected ID@HOST:PORT:DIRECTORY_ID"},
        {"3001@c1:9093:", "expected ID@HOST:PORT:DIRECTORY_ID"},
        {"3001@c1:9093:nope", "'nope' is not a directory id"},
        {"3001@c1:9093:AAAAAAAAAAAAAAAAAAAAAA", "is not a directory id"}, /* the zero uuid */
        {"3001@c1:9093:fMCL8kv1SWm87L_Md-I2hg,3002@c2:9093:fMCL8kv1SWm87L_Md-I2hg",
         "directory id fMCL8kv1SWm87L_Md-I2hg appears twice"},
        {"3001@c1:9093:fMCL8kv1SWm87L_Md-I2hg,3001@c2:9093:K2w3UNMfQQ2bbtvWyb0Peg",
         "--initial-controllers: entry '3001@c2:9093': duplicate voter id 3001"},
        {"3001@c1:0:fMCL8kv1SWm87L_Md-I2hg", "--initial-controllers: entry '3001@c1:0': port '0'"},
        {"3001@0.0.0.0:9093:fMCL8kv1SWm87L_Md-I2hg", "not a routable address"},
        {"", "--initial-controllers: "},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        n = -1;
        if (kq_config_parse_initial_controllers(bad[i].value, c, 4, &n, err, sizeof(err)) !=
            KQ_ERR_CONFIG)
            fail_msg("'%s' was accepted", bad[i].value);
        assert_int_equal(n, 0);
        assert_contains(err, bad[i].needle);
        assert_true(strstr(err, "controller.quorum.voters") == NULL);
    }
    assert_int_equal(kq_config_parse_initial_controllers(
                         "1@a:1:fMCL8kv1SWm87L_Md-I2hg,2@b:1:K2w3UNMfQQ2bbtvWyb0Peg", c, 1, &n, err,
                         sizeof(err)),
                     KQ_ERR_CONFIG);
    assert_contains(err, "more than 1 controllers");
}

static void test_voters_rejected(void **state)
{
    voters_err("1@a:1,1@b:2", 4, "duplicate voter id 1", "'1@b:2'");
    voters_err("1@a:1,2@a:1", 4, "'2@a:1'", "same address");
    voters_err("-1@a:1", 4, "'-1@a:1'", "node id '-1' is not an integer in [0, 2147483647]");
    voters_err("x@a:1", 4, "'x@a:1'", "node id 'x'");
    voters_err("@a:1", 4, "'@a:1'", "node id ''");
    voters_err("2147483648@a:1", 4, "node id '2147483648'", NULL);
    voters_err("1@a:0", 4, "'1@a:0'", "port '0' is not an integer in [1, 65535]");
    voters_err("1@a:65536", 4, "'1@a:65536'", "port '65536'");
    voters_err("1@a:99999999", 4, "port '99999999'", NULL);
    voters_err("1@a:", 4, "port ''", NULL);
    voters_err("1@a:90x", 4, "port '90x'", NULL);
    voters_err("1@a", 4, "'1@a'", "missing ':PORT'");
    voters_err("1@:9093", 4, "'1@:9093'", "missing host");
    voters_err("1@0.0.0.0:9093", 4, "'1@0.0.0.0:9093'", "0.0.0.0 is not a routable address");
    voters_err("1@[::]:9093", 4, "'1@[::]:9093'", "not a routable address");
    voters_err("1@::1:9093", 4, "'1@::1:9093'", "in brackets");
    voters_err("1@[::1:9093", 4, "missing ']'", NULL);
    voters_err("1@[::1]9093", 4, "expected ':PORT' after ']'", NULL);
    voters_err("1@[]:9093", 4, "empty IPv6 address", NULL);
    voters_err("1@[zz]:9093", 4, "'zz' is not an IPv6 address", NULL);
    voters_err("1@ho st:9093", 4, "invalid character ' '", NULL);
    voters_err("1host:9093", 4, "'1host:9093'", "expected ID@HOST:PORT");
    voters_err("", 4, "empty", NULL);
    voters_err("   ", 4, "empty", NULL);
    voters_err("1@a:1,,2@b:2", 4, "entry 2 is empty", NULL);
    voters_err("1@a:1,", 4, "entry 2 is empty", NULL);
    voters_err(",1@a:1", 4, "entry 1 is empty", NULL);
    voters_err("1@a:1,2@b:2,3@c:3", 2, "more than 2 voters", NULL);
    voters_err(NULL, 4, NULL, NULL);

    char longhost[400];
    memset(longhost, 'h', sizeof(longhost));
    memcpy(longhost, "1@", 2);
    strcpy(longhost + 300, ":9093");
    voters_err(longhost, 4, "host is longer than 255 characters", NULL);
}

/* ---- listeners and host:port ------------------------------------------------------------ */

static void test_listener(void **state)
{
    kq_listener l;
    assert_int_equal(kq_config_parse_listener("CONTROLLER://127.0.0.1:9093", &l, err, sizeof(err)),
                     0);
    assert_string_equal(l.name, "CONTROLLER");
    assert_string_equal(l.host, "127.0.0.1");
    assert_int_equal(l.port, 9093);
    assert_int_equal(kq_config_parse_listener("CONTROLLER://:9093", &l, err, sizeof(err)), 0);
    assert_string_equal(l.host, "0.0.0.0");
    assert_int_equal(l.port, 9093);
    assert_int_equal(kq_config_parse_listener("PLAIN_TEXT-2://[::1]:19092", &l, err, sizeof(err)),
                     0);
    assert_string_equal(l.name, "PLAIN_TEXT-2");
    assert_string_equal(l.host, "::1");
    assert_int_equal(l.port, 19092);
    assert_int_equal(kq_config_parse_listener("C://[::]:1", &l, err, sizeof(err)), 0);
    assert_string_equal(l.host, "::");
    assert_int_equal(kq_config_parse_listener("C://[fe80::1%eth0]:9093", &l, err, sizeof(err)), 0);
    assert_string_equal(l.host, "fe80::1%eth0");
    assert_int_equal(kq_config_parse_listener("C://my-host.example:9093", &l, err, sizeof(err)), 0);
    assert_string_equal(l.host, "my-host.example");

    struct {
        const char *in, *needle;
    } bad[] = {
        {"127.0.0.1:9093", "expected NAME://HOST:PORT"},
        {"://h:1", "missing listener name"},
        {"CONTROLLER://h", "missing ':PORT'"},
        {"CONTROLLER://h:0", "port '0' is not an integer in [1, 65535]"},
        {"CONTROLLER://h:70000", "port '70000'"},
        {"CONTROLLER://::1:9093", "in brackets"},
        {"BAD NAME://h:1", "listener name 'BAD NAME'"},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJ://h:1", "longer than 31"},
        {"", "expected NAME://HOST:PORT"},
        {"CONTROLLER://a:9093,PLAINTEXT://b:9092", "only one address"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        if (kq_config_parse_listener(bad[i].in, &l, err, sizeof(err)) != KQ_ERR_CONFIG)
            fail_msg("listener '%s' was accepted", bad[i].in);
        assert_contains(err, bad[i].needle);
        char quoted[128];
        snprintf(quoted, sizeof(quoted), "listener '%s'", bad[i].in);
        assert_contains(err, quoted);
    }
    assert_int_equal(kq_config_parse_listener(NULL, &l, err, sizeof(err)), KQ_ERR_CONFIG);
}

static void test_hostport(void **state)
{
    char host[64];
    int port = 0;
    assert_int_equal(
        kq_config_parse_hostport("localhost:9093", host, sizeof(host), &port, err, sizeof(err)), 0);
    assert_string_equal(host, "localhost");
    assert_int_equal(port, 9093);
    assert_int_equal(
        kq_config_parse_hostport("[2001:db8::7]:443", host, sizeof(host), &port, err, sizeof(err)),
        0);
    assert_string_equal(host, "2001:db8::7");
    assert_int_equal(port, 443);

    assert_int_equal(kq_config_parse_hostport(":9093", host, sizeof(host), &port, err, sizeof(err)),
                     KQ_ERR_CONFIG);
    assert_string_equal(err, "address ':9093': missing host before ':PORT' (expected HOST:PORT)");
    assert_int_equal(kq_config_parse_hostport("host", host, sizeof(host), &port, err, sizeof(err)),
                     KQ_ERR_CONFIG);
    assert_contains(err, "address 'host': missing ':PORT'");
    assert_int_equal(kq_config_parse_hostport("h:abc", host, sizeof(host), &port, err, sizeof(err)),
                     KQ_ERR_CONFIG);
    assert_contains(err, "port 'abc' is not an integer in [1, 65535]");
    assert_int_equal(kq_config_parse_hostport("h:-1", host, sizeof(host), &port, err, sizeof(err)),
                     KQ_ERR_CONFIG);
    assert_int_equal(
        kq_config_parse_hostport("a:1,b:2", host, sizeof(host), &port, err, sizeof(err)),
        KQ_ERR_CONFIG);
    assert_contains(err, "address 'a:1,b:2': found ','");
    char small[4];
    assert_int_equal(
        kq_config_parse_hostport("longhost:1", small, sizeof(small), &port, err, sizeof(err)),
        KQ_ERR_CONFIG);
    assert_contains(err, "host is longer than 3 characters");
}

/* ---- security ----------------------------------------------------------------------------- */

static void test_protocol_map(void **state)
{
    kq_protocol_map m;
    kq_security_protocol p = KQ_SECURITY_SSL;
    kq_config *c = parse_ok("");

    (void)state;
    /* Kafka's default map; a name it lacks (the controller listener) is PLAINTEXT */
    assert_int_equal(kq_config_protocol_map(c, &m, err, sizeof err), 0);
    assert_int_equal(m.given, 0);
    assert_int_equal(kq_protocol_of(&m, "SSL", &p, err, sizeof err), 0);
    assert_int_equal(p, KQ_SECURITY_SSL);
    assert_int_equal(kq_protocol_of(&m, "CONTROLLER", &p, err, sizeof err), 0);
    assert_int_equal(p, KQ_SECURITY_PLAINTEXT);
    kq_config_free(c);

    c = parse_ok("listener.security.protocol.map = CONTROLLER:SSL, internal : plaintext\n");
    assert_int_equal(kq_config_protocol_map(c, &m, err, sizeof err), 0);
    assert_int_equal(m.n, 2);
    assert_int_equal(kq_protocol_of(&m, "CONTROLLER", &p, err, sizeof err), 0);
    assert_int_equal(p, KQ_SECURITY_SSL);
    assert_string_equal(kq_protocol_scheme(p), "tls+tcp://");
    assert_int_equal(kq_protocol_of(&m, "INTERNAL", &p, err, sizeof err), 0);
    assert_int_equal(p, KQ_SECURITY_PLAINTEXT);
    assert_string_equal(kq_protocol_scheme(p), "tcp://");
    /* a set map names every listener */
    assert_int_equal(kq_protocol_of(&m, "PLAINTEXT", &p, err, sizeof err), KQ_ERR_CONFIG);
    assert_contains(err, "no protocol for listener 'PLAINTEXT'");
    kq_config_free(c);

    static const struct {
        const char *map, *want;
    } bad[] = {
        {"CONTROLLER:SASL_SSL", "kq has no SASL"},
        {"CONTROLLER:TLS", "protocol 'TLS' is not PLAINTEXT or SSL"},
        {"CONTROLLER", "is not LISTENER_NAME:PROTOCOL"},
        {":SSL", "is not LISTENER_NAME:PROTOCOL"},
        {"A:SSL,a:PLAINTEXT", "mapped twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[256];

        snprintf(text, sizeof text, "listener.security.protocol.map=%s\n", bad[i].map);
        c = parse_ok(text);
        assert_int_equal(kq_config_protocol_map(c, &m, err, sizeof err), KQ_ERR_CONFIG);
        assert_contains(err, "listener.security.protocol.map");
        assert_contains(err, bad[i].want);
        kq_config_free(c);
    }
}

static void test_ssl_keys(void **state)
{
    kq_ssl_config ssl;
    kq_config *c = parse_ok("");

    (void)state;
    /* nothing uses SSL: nothing is required */
    assert_int_equal(kq_config_ssl(c, 0, &ssl, err, sizeof err), 0);
    assert_int_equal(ssl.keystore[0], '\0');
    assert_int_equal(kq_config_ssl(c, 1, &ssl, err, sizeof err), KQ_ERR_CONFIG);
    assert_contains(err, "ssl.keystore.location: missing required key");
    kq_config_free(c);

    c = parse_ok(
        "ssl.keystore.location=/k.pem\nssl.keystore.type=PEM\n"
        "ssl.truststore.location=/ca.pem\nssl.key.password=pw\nssl.client.auth=required\n");
    assert_int_equal(kq_config_ssl(c, 1, &ssl, err, sizeof err), 0);
    assert_string_equal(ssl.keystore, "/k.pem");
    assert_string_equal(ssl.truststore, "/ca.pem");
    assert_string_equal(ssl.key_password, "pw");
    assert_int_equal(ssl.has_key_password, 1);
    assert_int_equal(ssl.client_auth, 2);
    kq_config_free(c);

    c = parse_ok("ssl.keystore.location=/k.pem\n");
    assert_int_equal(kq_config_ssl(c, 1, &ssl, err, sizeof err), KQ_ERR_CONFIG);
    assert_contains(err, "ssl.truststore.location: missing required key");
    kq_config_free(c);

    c = parse_ok("ssl.keystore.type=JKS\n");
    assert_int_equal(kq_config_ssl(c, 0, &ssl, err, sizeof err), KQ_ERR_CONFIG);
    assert_contains(err, "ssl.keystore.type: 'JKS' is not supported");
    kq_config_free(c);

    c = parse_ok("ssl.client.auth=sometimes\n");
    assert_int_equal(kq_config_ssl(c, 0, &ssl, err, sizeof err), KQ_ERR_CONFIG);
    assert_contains(err, "ssl.client.auth: 'sometimes' is not one of required, requested, none");
    kq_config_free(c);

    c = parse_ok("ssl.client.auth=requested\n");
    assert_int_equal(kq_config_ssl(c, 0, &ssl, err, sizeof err), 0);
    assert_int_equal(ssl.client_auth, 1);
    assert_string_equal(ssl.principal_template, "User:CN=node-{id}");
    assert_string_equal(ssl.mapping_rules, "DEFAULT");
    kq_config_free(c);

    c = parse_ok("node.principal.template=User:CN=kq-{id},O=Example\n"
                 "ssl.principal.mapping.rules=RULE:^CN=([^,]*),O=Example$/$1/,DEFAULT\n");
    assert_int_equal(kq_config_ssl(c, 0, &ssl, err, sizeof err), 0);
    assert_string_equal(ssl.principal_template, "User:CN=kq-{id},O=Example");
    kq_config_free(c);
    c = parse_ok("node.principal.template=CN=node-{id}\n");
    assert_int_equal(kq_config_ssl(c, 0, &ssl, err, sizeof err), KQ_ERR_CONFIG);
    assert_contains(err, "node.principal.template: 'CN=node-{id}' must start with 'User:'");
    kq_config_free(c);
    c = parse_ok("ssl.principal.mapping.rules=RULE:^CN=(.*?)$/$1/\n");
    assert_int_equal(kq_config_ssl(c, 0, &ssl, err, sizeof err), KQ_ERR_CONFIG);
    assert_contains(err, "ssl.principal.mapping.rules");
    assert_contains(err, "lazy quantifier");
    kq_config_free(c);
}

static void test_authorizer_keys(void **state)
{
    kq_authorizer_config a;
    kq_config *c = parse_ok("");

    (void)state;
    assert_int_equal(kq_config_authorizer(c, &a, err, sizeof err), 0);
    assert_false(a.enabled);
    kq_config_free(c);
    c = parse_ok("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
                 "super.users=User:CN=admin;User:ops\nallow.everyone.if.no.acl.found=true\n");
    assert_int_equal(kq_config_authorizer(c, &a, err, sizeof err), 0);
    assert_true(a.enabled);
    assert_int_equal(a.n_super_users, 2);
    assert_string_equal(a.super_users[0], "User:CN=admin");
    assert_true(a.allow_everyone_if_no_acl_found);
    kq_config_free(c);
    c = parse_ok("authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n");
    assert_int_equal(kq_config_authorizer(c, &a, err, sizeof err), KQ_ERR_CONFIG);
    assert_contains(err, "authorizer.class.name: 'kafka.security.authorizer.AclAuthorizer' is "
                         "not supported");
    kq_config_free(c);
    c = parse_ok("super.users=admin\n");
    assert_int_equal(kq_config_authorizer(c, &a, err, sizeof err), KQ_ERR_CONFIG);
    assert_contains(err, "super.users: 'admin' is not a principal");
    kq_config_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_properties_syntax),
        cmocka_unit_test(test_syntax_errors_name_the_line),
        cmocka_unit_test(test_int_getter),
        cmocka_unit_test(test_bool_getter),
        cmocka_unit_test(test_string_required_set),
        cmocka_unit_test(test_warn_unknown_once),
        cmocka_unit_test(test_duplicate_key_last_wins_with_warning),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_voters_ok),
        cmocka_unit_test(test_voters_rejected),
        cmocka_unit_test(test_initial_controllers),
        cmocka_unit_test(test_listener),
        cmocka_unit_test(test_hostport),
        cmocka_unit_test(test_protocol_map),
        cmocka_unit_test(test_ssl_keys),
        cmocka_unit_test(test_authorizer_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
