#include "ctl_config.h"

#include <stdio.h>
#include <string.h>

#include "kq/error.h"

/* Prefix errbuf with the key so every message names what to fix. */
static int name_key(int rc, const char *key, char *errbuf, size_t errlen)
{
    char why[512];
    if (rc == 0 || strncmp(errbuf, key, strlen(key)) == 0)
        return rc;
    snprintf(why, sizeof(why), "%s", errbuf);
    snprintf(errbuf, errlen, "%s: %s", key, why);
    return rc;
}

static int get_ms(kq_config *c, const char *key, int64_t def, int64_t min, uint32_t *out,
                  char *errbuf, size_t errlen)
{
    int64_t v = 0;
    int rc = kq_config_int(c, key, def, min, 86400000, &v, errbuf, errlen);
    if (rc == 0)
        *out = (uint32_t)v;
    return rc;
}

/* metadata.log.dir, else (as in Kafka) the first entry of log.dirs, trimmed. */
static int metadata_log_dir(kq_config *c, char *dir, size_t dirlen, char *errbuf, size_t errlen)
{
    const char *s = NULL;
    const char *key = "metadata.log.dir";
    int rc = kq_config_string(c, key, NULL, &s, errbuf, errlen);
    if (rc != 0)
        return rc;
    if (s == NULL || s[0] == '\0') {
        key = "log.dirs";
        if ((rc = kq_config_string(c, key, NULL, &s, errbuf, errlen)) != 0)
            return rc;
    }
    if (s == NULL || s[0] == '\0') {
        snprintf(errbuf, errlen,
                 "metadata.log.dir: missing required key (the metadata log's directory; "
                 "the first entry of log.dirs is used when it is not set)");
        return KQ_ERR_CONFIG;
    }
    while (*s == ' ' || *s == '\t')
        s++;
    size_t len = strcspn(s, ",");
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    if (len == 0 || len >= dirlen) {
        snprintf(errbuf, errlen, "%s: %s", key,
                 len == 0 ? "empty directory name" : "path is too long");
        return KQ_ERR_CONFIG;
    }
    memcpy(dir, s, len);
    dir[len] = '\0';
    return 0;
}

int kq_ctl_config_load(const char *path, kq_ctl_config *out, char *errbuf, size_t errlen)
{
    kq_config *c = NULL;
    const char *s = NULL;
    int64_t v = 0;
    int rc = kq_config_load(path, &c, errbuf, errlen);
    if (rc != 0)
        goto out;
    memset(out, 0, sizeof(*out));
    kq_raft_config_defaults(&out->raft);

    if ((rc = kq_config_int(c, "node.id", -1, 0, 2147483647, &v, errbuf, errlen)) != 0)
        goto out;
    if (v < 0) {
        snprintf(errbuf, errlen, "node.id: missing required key (a non-negative integer)");
        rc = KQ_ERR_CONFIG;
        goto out;
    }
    out->node_id = (int32_t)v;
    out->raft.node_id = out->node_id;

    if ((rc = kq_config_required(c, "process.roles", &s, errbuf, errlen)) != 0)
        goto out;
    if (strcmp(s, "controller") != 0) {
        snprintf(errbuf, errlen,
                 "process.roles: '%s' is not supported by kq-controller (use 'controller'; "
                 "brokers run kq-broker-agent)",
                 s);
        rc = KQ_ERR_CONFIG;
        goto out;
    }

    /* controller.quorum.voters (static, kraft.version 0) or, for dynamic voters (KIP-853),
     * controller.quorum.bootstrap.servers; at least one */
    const char *boot = NULL;
    if ((rc = kq_config_string(c, "controller.quorum.voters", NULL, &s, errbuf, errlen)) != 0 ||
        (rc = kq_config_string(c, "controller.quorum.bootstrap.servers", NULL, &boot, errbuf,
                               errlen)) != 0)
        goto out;
    if ((!s || !s[0]) && (!boot || !boot[0])) {
        snprintf(errbuf, errlen,
                 "controller.quorum.voters or controller.quorum.bootstrap.servers is required "
                 "(id@host:port,... for static voters; host:port,... for dynamic voters)");
        rc = KQ_ERR_CONFIG;
        goto out;
    }
    if (s && s[0] &&
        (rc = name_key(kq_config_parse_voters(s, out->voters, KQ_RAFT_MAX_VOTERS, &out->n_voters,
                                              errbuf, errlen),
                       "controller.quorum.voters", errbuf, errlen)) != 0)
        goto out;
    if (boot && boot[0] &&
        (rc = kq_config_parse_bootstrap_servers(boot, out->bootstrap, KQ_RAFT_MAX_VOTERS,
                                                &out->raft.n_bootstrap, errbuf, errlen)) != 0)
        goto out;
    for (int i = 0; i < out->raft.n_bootstrap; i++)
        out->bootstrap[i].id = KQ_RAFT_BOOTSTRAP_ID(i);
    for (int i = 0; i < out->n_voters; i++)
        out->raft.voters[i] = out->voters[i].id;
    out->raft.n_voters = out->n_voters;

    if ((rc = kq_config_required(c, "listeners", &s, errbuf, errlen)) != 0)
        goto out;
    if ((rc = name_key(kq_config_parse_listener(s, &out->listener, errbuf, errlen), "listeners",
                       errbuf, errlen)) != 0)
        goto out;
    if ((rc = kq_config_string(c, "advertised.listeners", NULL, &s, errbuf, errlen)) != 0)
        goto out;
    if (s != NULL && s[0] != '\0') {
        if ((rc = name_key(kq_config_parse_listener(s, &out->advertised, errbuf, errlen),
                           "advertised.listeners", errbuf, errlen)) != 0)
            goto out;
    } else {
        out->advertised = out->listener;
    }
    /* this node as a voter (KIP-853): the endpoint others reach it at, kraft.version 0..1; a
     * wildcard or empty host is no endpoint ("": the node never reports one, and the tools
     * that need it refuse) */
    const char *h = out->advertised.host;
    bool wildcard = !h[0] || !strcmp(h, "0.0.0.0") || !strcmp(h, "::") || !strcmp(h, "[::]");
    snprintf(out->raft.host, sizeof(out->raft.host), "%s", wildcard ? "" : h);
    out->raft.port = out->advertised.port;
    out->raft.kraft_min = 0;
    out->raft.kraft_max = 1;
    if ((rc = kq_config_string(c, "controller.listener.names", "CONTROLLER", &s, errbuf, errlen)) !=
        0)
        goto out;
    if ((rc = kq_config_metrics_listener(c, out->metrics_host, sizeof(out->metrics_host),
                                         &out->metrics_port, &out->metrics_tls, errbuf, errlen)))
        goto out;
    kq_protocol_map protocols;
    /* the ssl.* keys serve SSL listeners and an https:// metrics listener */
    if ((rc = kq_config_protocol_map(c, &protocols, errbuf, errlen)) != 0 ||
        (rc = kq_protocol_of(&protocols, out->listener.name, &out->protocol, errbuf, errlen)) !=
            0 ||
        (rc = kq_config_ssl(c, out->protocol == KQ_SECURITY_SSL || out->metrics_tls, &out->ssl,
                            errbuf, errlen)) != 0 ||
        (rc = kq_config_authorizer(c, &out->authz, errbuf, errlen)) != 0)
        goto out;

    if ((rc = metadata_log_dir(c, out->log_dir, sizeof(out->log_dir), errbuf, errlen)) != 0)
        goto out;

    if ((rc = get_ms(c, "controller.quorum.election.timeout.ms", 1000, 1,
                     &out->raft.election_timeout_ms, errbuf, errlen)) != 0 ||
        (rc = get_ms(c, "controller.quorum.fetch.timeout.ms", 2000, 1, &out->raft.fetch_timeout_ms,
                     errbuf, errlen)) != 0 ||
        (rc = get_ms(c, "controller.quorum.election.backoff.max.ms", 1000, 1,
                     &out->raft.election_backoff_max_ms, errbuf, errlen)) != 0 ||
        (rc = get_ms(c, "controller.quorum.request.timeout.ms", 2000, 1,
                     &out->raft.request_timeout_ms, errbuf, errlen)) != 0 ||
        (rc = get_ms(c, "controller.quorum.retry.backoff.ms", 20, 0, &out->raft.retry_backoff_ms,
                     errbuf, errlen)) != 0 ||
        (rc = get_ms(c, "controller.quorum.append.linger.ms", 25, 0, &out->append_linger_ms, errbuf,
                     errlen)) != 0 ||
        (rc = get_ms(c, "metadata.max.idle.interval.ms", 500, 0, &out->idle_interval_ms, errbuf,
                     errlen)) != 0)
        goto out;
    if ((rc = kq_config_int(c, "socket.request.max.bytes", 16777216, 16777216, 1073741824, &v,
                            errbuf, errlen)) != 0)
        goto out;
    out->max_request_bytes = (uint32_t)v;
    if ((rc = kq_config_int(c, "max.connections", KQ_RPC_DEFAULT_MAX_CONNECTIONS, 1, 1000000, &v,
                            errbuf, errlen)) != 0)
        goto out;
    out->conn_limits.max_connections = (int)v;
    if ((rc = kq_config_int(c, "max.connections.per.ip", KQ_RPC_DEFAULT_MAX_CONNECTIONS_PER_IP, 0,
                            1000000, &v, errbuf, errlen)) != 0)
        goto out;
    out->conn_limits.max_connections_per_ip = (int)v;

    /* Cluster defaults the active controller applies (dynamic configs in the log override). */
    kq_decide_settings_default(&out->decide);
    int b = 0;
    if ((rc = kq_config_int(c, "broker.session.timeout.ms", 9000, 100, 3600000, &v, errbuf,
                            errlen)) != 0)
        goto out;
    out->decide.session_timeout_ms = v;
    if ((rc = kq_config_int(c, "num.partitions", 1, 1, 100000, &v, errbuf, errlen)) != 0)
        goto out;
    out->decide.num_partitions = (int32_t)v;
    if ((rc = kq_config_int(c, "default.replication.factor", 1, 1, 32767, &v, errbuf, errlen)) != 0)
        goto out;
    out->decide.default_replication_factor = (int32_t)v;
    if ((rc = kq_config_int(c, "min.insync.replicas", 1, 1, 32767, &v, errbuf, errlen)) != 0)
        goto out;
    out->decide.min_insync_replicas = (int32_t)v;
    if ((rc = kq_config_bool(c, "unclean.leader.election.enable", 0, &b, errbuf, errlen)) != 0)
        goto out;
    out->decide.unclean_leader_election = b;
    if ((rc = kq_config_bool(c, "eligible.leader.replicas.enable", 1, &b, errbuf, errlen)) != 0)
        goto out;
    out->decide.elr_enabled = b;
    if ((rc = kq_config_bool(c, "auto.leader.rebalance.enable", 1, &b, errbuf, errlen)) != 0)
        goto out;
    out->decide.auto_leader_rebalance = b;
    if ((rc = kq_config_int(c, "leader.imbalance.check.interval.seconds", 300, 1, 86400, &v, errbuf,
                            errlen)) != 0)
        goto out;
    out->rebalance_interval_ms = (uint32_t)v * 1000u;
    if ((rc = get_ms(c, "unclean.leader.election.interval.ms", 300000, 1, &out->unclean_interval_ms,
                     errbuf, errlen)) != 0)
        goto out;

    if ((rc = kq_config_int(c, "metadata.log.max.record.bytes.between.snapshots", 20971520, 1024,
                            INT64_C(1) << 40, &out->snapshot_max_bytes, errbuf, errlen)) != 0 ||
        (rc = kq_config_int(c, "metadata.log.max.snapshot.interval.ms", 3600000, 0,
                            INT64_C(1) << 40, &out->snapshot_interval_ms, errbuf, errlen)) != 0)
        goto out;

    if ((rc = kq_config_string(c, "log.level", "info", &s, errbuf, errlen)) != 0)
        goto out;
    int lvl = kq_log_level_parse(s);
    if (lvl < 0) {
        snprintf(errbuf, errlen, "log.level: '%s' is not one of debug, info, warn, error", s);
        rc = KQ_ERR_CONFIG;
        goto out;
    }
    out->log_level = (kq_log_level)lvl;
    kq_config_warn_unknown(c);
out:
    kq_config_free(c);
    return rc;
}
