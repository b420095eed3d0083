/* kq-broker-agent configuration: defaults, every key's validation naming the key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker_config.h"
#include "kq/error.h"

static char err[1024];
static kq_broker_config cfg;

#define BASE                                                                                       \
    "process.roles=broker\n"                                                                       \
    "node.id=4\n"                                                                                  \
    "controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095\n"                \
    "listeners=PLAINTEXT://127.0.0.1:9092\n"                                                       \
    "log.dirs=/tmp/kq-broker-4\n"

static void assert_contains(const char *s, const char *needle)
{
    if (strstr(s, needle) == NULL)
        fail_msg("'%s' does not contain '%s'", s, needle);
}

static int parse(const char *text)
{
    err[0] = '\0';
    memset(&cfg, 0x5a, sizeof(cfg));
    return kq_broker_config_parse(text, &cfg, err, sizeof(err));
}

/* A config with one line added (or replacing a BASE key: later lines win). */
static void expect_error(const char *extra, const char *key, const char *detail)
{
    char text[2048];
    snprintf(text, sizeof(text), "%s%s\n", BASE, extra);
    int rc = parse(text);
    if (rc != KQ_ERR_CONFIG)
        fail_msg("'%s' was accepted (rc %d)", extra, rc);
    assert_contains(err, key);
    if (detail != NULL)
        assert_contains(err, detail);
}

static void test_defaults(void **state)
{
    (void)state;
    assert_int_equal(parse(BASE), 0);
    assert_int_equal(cfg.node_id, 4);
    assert_int_equal(cfg.n_voters, 3);
    assert_int_equal(cfg.voters[2].id, 3);
    assert_int_equal(cfg.voters[2].port, 9095);
    assert_int_equal(cfg.raft.node_id, 4);
    assert_int_equal(cfg.raft.n_voters, 3);
    assert_int_equal(cfg.n_listeners, 1);
    assert_string_equal(cfg.listeners[0].name, "PLAINTEXT");
    assert_int_equal(cfg.listeners[0].port, 9092);
    /* advertised.listeners defaults to listeners */
    assert_int_equal(cfg.n_advertised, 1);
    assert_string_equal(cfg.advertised[0].host, "127.0.0.1");
    assert_string_equal(cfg.log_dir, "/tmp/kq-broker-4");
    assert_string_equal(cfg.rack, "");
    assert_int_equal(cfg.heartbeat_interval_ms, 2000);
    assert_int_equal(cfg.session_timeout_ms, 9000);
    assert_int_equal(cfg.registration_timeout_ms, 60000);
    assert_int_equal(cfg.shutdown_timeout_ms, 30000);
    assert_int_equal(cfg.replica_lag_time_max_ms, 30000);
    assert_int_equal(cfg.replica_fetch_wait_max_ms, 500);
    assert_int_equal(cfg.replica_fetch_max_bytes, 1048576);
    assert_int_equal(cfg.min_insync_replicas, 1);
    assert_int_equal(cfg.raft.request_timeout_ms, 2000);
    assert_string_equal(cfg.metrics_host, "");
    assert_int_equal(cfg.conn_limits.max_connections, 1000);
    assert_int_equal(cfg.conn_limits.max_connections_per_ip, 0); /* no limit */
}

static void test_all_keys(void **state)
{
    (void)state;
    assert_int_equal(parse(BASE "broker.rack=rack-a\n"
                                "advertised.listeners=PLAINTEXT://broker4.example:19092\n"
                                "broker.heartbeat.interval.ms=500\n"
                                "broker.session.timeout.ms=3000\n"
                                "replica.lag.time.max.ms=10000\n"
                                "replica.fetch.wait.max.ms=100\n"
                                "replica.fetch.max.bytes=65536\n"
                                "min.insync.replicas=2\n"
                                "metrics.listener=127.0.0.1:9200\n"
                                "initial.broker.registration.timeout.ms=5000\n"
                                "max.connections=50\n"
                                "max.connections.per.ip=5\n"),
                     0);
    assert_string_equal(cfg.rack, "rack-a");
    assert_string_equal(cfg.advertised[0].host, "broker4.example");
    assert_int_equal(cfg.advertised[0].port, 19092);
    assert_string_equal(cfg.listeners[0].host, "127.0.0.1"); /* binds where told */
    assert_int_equal(cfg.heartbeat_interval_ms, 500);
    assert_int_equal(cfg.session_timeout_ms, 3000);
    assert_int_equal(cfg.replica_lag_time_max_ms, 10000);
    assert_int_equal(cfg.replica_fetch_wait_max_ms, 100);
    assert_int_equal(cfg.replica_fetch_max_bytes, 65536);
    assert_int_equal(cfg.min_insync_replicas, 2);
    assert_string_equal(cfg.metrics_host, "127.0.0.1");
    assert_int_equal(cfg.metrics_port, 9200);
    assert_false(cfg.metrics_tls);
    assert_int_equal(cfg.registration_timeout_ms, 5000);
    assert_int_equal(cfg.conn_limits.max_connections, 50);
    assert_int_equal(cfg.conn_limits.max_connections_per_ip, 5);
}

/* metrics.listener takes an optional scheme: https:// serves the endpoints over TLS. */
static void test_metrics_listener_scheme(void **state)
{
    (void)state;
    /* HTTPS with the node's keystore: the ssl.* keys are required then */
    expect_error("metrics.listener=https://127.0.0.1:9443", "ssl.keystore.location",
                 "missing required key");
    assert_int_equal(parse(BASE "metrics.listener=https://127.0.0.1:9443\n"
                                "ssl.keystore.location=/k.pem\nssl.truststore.location=/ca.pem\n"),
                     0);
    assert_true(cfg.metrics_tls);
    assert_string_equal(cfg.metrics_host, "127.0.0.1");
    assert_int_equal(cfg.metrics_port, 9443);
    assert_int_equal(parse(BASE "metrics.listener=http://[::1]:9200\n"), 0);
    assert_false(cfg.metrics_tls);
    assert_string_equal(cfg.metrics_host, "::1");
    expect_error("metrics.listener=https://nohost", "metrics.listener", "https://HOST:PORT");
}

static void test_two_listeners(void **state)
{
    (void)state;
    assert_int_equal(
        parse(BASE "listeners=PLAINTEXT://127.0.0.1:9092, INTERNAL://127.0.0.1:9192\n"), 0);
    assert_int_equal(cfg.n_listeners, 2);
    assert_string_equal(cfg.listeners[1].name, "INTERNAL");
    assert_int_equal(cfg.listeners[1].port, 9192);
    assert_int_equal(cfg.n_advertised, 2);
    expect_error("listeners=A://127.0.0.1:1,A://127.0.0.1:2", "listeners", "appears twice");
    expect_error("listeners=A://127.0.0.1:1,,B://127.0.0.1:2", "listeners", "empty entry");
}

static void test_security_protocols(void **state)
{
    (void)state;
    /* plaintext by default: no ssl.* needed */
    assert_int_equal(parse(BASE), 0);
    assert_int_equal(cfg.listener_protocol, KQ_SECURITY_PLAINTEXT);
    assert_int_equal(cfg.controller_protocol, KQ_SECURITY_PLAINTEXT);
    /* an SSL listener with the controllers over SSL too */
    assert_int_equal(parse(BASE "listeners=SSL://127.0.0.1:9092\n"
                                "listener.security.protocol.map=CONTROLLER:SSL,SSL:SSL\n"
                                "ssl.keystore.location=/k.pem\nssl.truststore.location=/ca.pem\n"),
                     0);
    assert_int_equal(cfg.listener_protocol, KQ_SECURITY_SSL);
    assert_int_equal(cfg.controller_protocol, KQ_SECURITY_SSL);
    assert_string_equal(cfg.ssl.keystore, "/k.pem");
    /* a plaintext broker whose controllers are SSL */
    assert_int_equal(parse(BASE
                           "listener.security.protocol.map=CONTROLLER:SSL,PLAINTEXT:PLAINTEXT\n"
                           "ssl.keystore.location=/k.pem\nssl.truststore.location=/ca.pem\n"),
                     0);
    assert_int_equal(cfg.listener_protocol, KQ_SECURITY_PLAINTEXT);
    assert_int_equal(cfg.controller_protocol, KQ_SECURITY_SSL);
    /* SSL anywhere in a set map (another broker's listener) needs the keys */
    expect_error("listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
                 "ssl.keystore.location", "missing required key");
    expect_error("listeners=SSL://127.0.0.1:9092", "ssl.keystore.location", "missing required key");
    /* a set map must name the served listener and the controllers' */
    expect_error("listener.security.protocol.map=CONTROLLER:PLAINTEXT",
                 "listener.security.protocol.map", "no protocol for listener 'PLAINTEXT'");
    expect_error("listener.security.protocol.map=PLAINTEXT:PLAINTEXT",
                 "listener.security.protocol.map", "no protocol for listener 'CONTROLLER'");
    expect_error("controller.listener.names=", "controller.listener.names", "empty");
    expect_error("ssl.client.auth=maybe", "ssl.client.auth", NULL);
}

static void test_bad_values_name_the_key(void **state)
{
    (void)state;
    expect_error("node.id=abc", "node.id", NULL);
    expect_error("node.id=-3", "node.id", NULL);
    expect_error("process.roles=controller", "process.roles", "kq-controller");
    expect_error("process.roles=broker,controller", "process.roles", NULL);
    expect_error("controller.quorum.voters=1@nohostport", "controller.quorum.voters", NULL);
    expect_error("controller.quorum.voters=", "controller.quorum.voters", "is required");
    expect_error("listeners=127.0.0.1:9092", "listeners", NULL);
    expect_error("listeners=PLAINTEXT://127.0.0.1:99999", "listeners", NULL);
    expect_error("advertised.listeners=PLAINTEXT://:9092", "advertised.listeners", "reach");
    expect_error("log.dirs=/a,/b", "log.dirs", "exactly one");
    expect_error("broker.heartbeat.interval.ms=0", "broker.heartbeat.interval.ms", NULL);
    expect_error("broker.heartbeat.interval.ms=fast", "broker.heartbeat.interval.ms", NULL);
    expect_error("broker.heartbeat.interval.ms=9000", "broker.heartbeat.interval.ms",
                 "broker.session.timeout.ms");
    expect_error("broker.session.timeout.ms=10", "broker.session.timeout.ms", NULL);
    expect_error("replica.lag.time.max.ms=0", "replica.lag.time.max.ms", NULL);
    expect_error("replica.fetch.wait.max.ms=-1", "replica.fetch.wait.max.ms", NULL);
    expect_error("replica.fetch.wait.max.ms=30000", "replica.fetch.wait.max.ms",
                 "replica.lag.time.max.ms");
    expect_error("replica.fetch.max.bytes=0", "replica.fetch.max.bytes", NULL);
    expect_error("min.insync.replicas=0", "min.insync.replicas", NULL);
    expect_error("metrics.listener=nohost", "metrics.listener", NULL);
    expect_error("log.level=loud", "log.level", NULL);
    expect_error("max.connections=0", "max.connections", NULL);
    expect_error("max.connections.per.ip=many", "max.connections.per.ip", NULL);
    expect_error("max.connections.per.ip=-1", "max.connections.per.ip", NULL);
    expect_error("initial.broker.registration.timeout.ms=x",
                 "initial.broker.registration.timeout.ms", NULL);
}

static void test_missing_keys(void **state)
{
    (void)state;
    assert_int_equal(parse("process.roles=broker\nnode.id=4\n"
                           "listeners=PLAINTEXT://127.0.0.1:9092\nlog.dirs=/tmp/x\n"),
                     KQ_ERR_CONFIG);
    assert_contains(err, "controller.quorum.voters");
    assert_contains(err, "controller.quorum.bootstrap.servers");
    /* dynamic voters (KIP-853): the bootstrap servers alone will do */
    assert_int_equal(parse("process.roles=broker\nnode.id=4\n"
                           "controller.quorum.bootstrap.servers=127.0.0.1:9093, 127.0.0.1:9094\n"
                           "listeners=PLAINTEXT://127.0.0.1:9092\nlog.dirs=/tmp/x\n"),
                     0);
    assert_int_equal(cfg.raft.n_bootstrap, 2);
    assert_int_equal(cfg.n_voters, 0);
    assert_int_equal(cfg.bootstrap[1].port, 9094);
    assert_int_equal(cfg.bootstrap[1].id, KQ_RAFT_BOOTSTRAP_ID(1));
    assert_int_equal(parse("process.roles=broker\nnode.id=4\n"
                           "controller.quorum.bootstrap.servers=127.0.0.1:9093,\n"
                           "listeners=PLAINTEXT://127.0.0.1:9092\nlog.dirs=/tmp/x\n"),
                     KQ_ERR_CONFIG);
    assert_contains(err, "controller.quorum.bootstrap.servers: entry 2");
    assert_int_equal(parse("process.roles=broker\nnode.id=4\n"
                           "controller.quorum.voters=1@127.0.0.1:9093\n"
                           "listeners=PLAINTEXT://127.0.0.1:9092\n"),
                     KQ_ERR_CONFIG);
    assert_contains(err, "log.dirs");
    assert_int_equal(parse("node.id=4\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
                           "listeners=PLAINTEXT://127.0.0.1:9092\nlog.dirs=/tmp/x\n"),
                     KQ_ERR_CONFIG);
    assert_contains(err, "process.roles");
    /* log.dir is accepted when log.dirs is absent */
    assert_int_equal(parse("process.roles=broker\nnode.id=4\n"
                           "controller.quorum.voters=1@127.0.0.1:9093\n"
                           "listeners=PLAINTEXT://127.0.0.1:9092\nlog.dir=/tmp/y\n"),
                     0);
    assert_string_equal(cfg.log_dir, "/tmp/y");
}

static void test_node_id_must_not_be_a_voter(void **state)
{
    (void)state;
    expect_error("node.id=2", "node.id", "controller.quorum.voters");
}

static void test_load_file(void **state)
{
    (void)state;
    char path[] = "/tmp/kq-broker-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs(BASE "broker.rack=r9\n", f);
    fclose(f);
    assert_int_equal(kq_broker_config_load(path, &cfg, err, sizeof(err)), 0);
    assert_string_equal(cfg.rack, "r9");
    unlink(path);
    int rc = kq_broker_config_load(path, &cfg, err, sizeof(err));
    assert_int_not_equal(rc, 0);
    assert_contains(err, path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_all_keys),
        cmocka_unit_test(test_metrics_listener_scheme),
        cmocka_unit_test(test_two_listeners),
        cmocka_unit_test(test_bad_values_name_the_key),
        cmocka_unit_test(test_missing_keys),
        cmocka_unit_test(test_node_id_must_not_be_a_voter),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_security_protocols),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
