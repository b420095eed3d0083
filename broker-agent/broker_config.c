#include "broker_config.h"

#include <stdarg.h>
#include <stdbool.h>
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

static int bad(char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad(char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, errlen, fmt, ap);
    va_end(ap);
    return KQ_ERR_CONFIG;
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

/* "A://h:p,B://h:p" -> out[0..*n). Names must be unique. */
static int parse_listeners(const char *key, const char *value, kq_listener *out, int *n,
                           char *errbuf, size_t errlen)
{
    char item[600];
    const char *p = value;
    *n = 0;
    while (*p != '\0') {
        size_t len = strcspn(p, ",");
        const char *s = p;
        size_t l = len;
        while (l > 0 && (*s == ' ' || *s == '\t'))
            s++, l--;
        while (l > 0 && (s[l - 1] == ' ' || s[l - 1] == '\t'))
            l--;
        if (l == 0)
            return bad(errbuf, errlen, "%s: empty entry in '%s'", key, value);
        if (*n == KQ_BROKER_MAX_LISTENERS) {
            snprintf(errbuf, errlen, "%s: more than %d listeners", key, KQ_BROKER_MAX_LISTENERS);
            return KQ_ERR_CONFIG;
        }
        if (l >= sizeof(item))
            return bad(errbuf, errlen, "%s: entry too long in '%.200s'", key, value);
        memcpy(item, s, l);
        item[l] = '\0';
        int rc = kq_config_parse_listener(item, &out[*n], errbuf, errlen);
        if (rc != 0)
            return name_key(rc, key, errbuf, errlen);
        for (int i = 0; i < *n; i++)
            if (strcmp(out[i].name, out[*n].name) == 0)
                return bad(errbuf, errlen, "%s: listener name '%s' appears twice", key,
                           out[i].name);
        (*n)++;
        p += len;
        if (*p == ',')
            p++;
    }
    if (*n == 0)
        return bad(errbuf, errlen, "%s: %s", key, "no listener given (NAME://HOST:PORT)");
    return 0;
}

static int load_from(kq_config *c, kq_broker_config *out, char *errbuf, size_t errlen)
{
    const char *s = NULL;
    int64_t v = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    kq_raft_config_defaults(&out->raft);

    if ((rc = kq_config_int(c, "node.id", -1, 0, 2147483647, &v, errbuf, errlen)) != 0)
        return rc;
    if (v < 0)
        return bad(errbuf, errlen, "%s: %s", "node.id",
                   "missing required key (a non-negative integer)");
    out->node_id = (int32_t)v;
    out->raft.node_id = out->node_id;

    if ((rc = kq_config_required(c, "process.roles", &s, errbuf, errlen)) != 0)
        return rc;
    if (strcmp(s, "broker") != 0)
        return bad(errbuf, errlen,
                   "%s: '%s' is not supported by kq-broker-agent (use 'broker'; controllers "
                   "run kq-controller)",
                   "process.roles", s);

    const char *boot = NULL;
    if ((rc = kq_config_string(c, "controller.quorum.voters", NULL, &s, errbuf, errlen)) != 0 ||
        (rc = kq_config_string(c, "controller.quorum.bootstrap.servers", NULL, &boot, errbuf,
                               errlen)) != 0)
        return rc;
    if ((s == NULL || s[0] == '\0') && (boot == NULL || boot[0] == '\0'))
        return bad(errbuf, errlen, "%s",
                   "controller.quorum.voters or controller.quorum.bootstrap.servers is required "
                   "(id@host:port,... for static voters; host:port,... for dynamic voters)");
    if (s != NULL && s[0] != '\0' &&
        (rc = name_key(kq_config_parse_voters(s, out->voters, KQ_RAFT_MAX_VOTERS, &out->n_voters,
                                              errbuf, errlen),
                       "controller.quorum.voters", errbuf, errlen)) != 0)
        return rc;
    if (boot != NULL && boot[0] != '\0' &&
        (rc = kq_config_parse_bootstrap_servers(boot, out->bootstrap, KQ_RAFT_MAX_VOTERS,
                                                &out->raft.n_bootstrap, errbuf, errlen)) != 0)
        return rc;
    for (int i = 0; i < out->raft.n_bootstrap; i++)
        out->bootstrap[i].id = KQ_RAFT_BOOTSTRAP_ID(i);
    for (int i = 0; i < out->n_voters; i++) {
        if (out->voters[i].id == out->node_id) {
            snprintf(errbuf, errlen,
                     "node.id: %d is also a controller in controller.quorum.voters; a broker "
                     "agent needs an id of its own",
                     out->node_id);
            return KQ_ERR_CONFIG;
        }
        out->raft.voters[i] = out->voters[i].id;
    }
    out->raft.n_voters = out->n_voters;

    if ((rc = kq_config_required(c, "listeners", &s, errbuf, errlen)) != 0)
        return rc;
    if ((rc = parse_listeners("listeners", s, out->listeners, &out->n_listeners, errbuf, errlen)) !=
        0)
        return rc;
    if ((rc = kq_config_string(c, "advertised.listeners", NULL, &s, errbuf, errlen)) != 0)
        return rc;
    if (s != NULL && s[0] != '\0') {
        if ((rc = parse_listeners("advertised.listeners", s, out->advertised, &out->n_advertised,
                                  errbuf, errlen)) != 0)
            return rc;
    } else {
        memcpy(out->advertised, out->listeners, sizeof(out->listeners));
        out->n_advertised = out->n_listeners;
    }
    for (int i = 0; i < out->n_advertised; i++) {
        const char *h = out->advertised[i].host;
        if (strcmp(h, "0.0.0.0") == 0 || strcmp(h, "::") == 0)
            return bad(errbuf, errlen,
                       "%s: '%s' is not an address other brokers and clients can reach; set "
                       "advertised.listeners to this host's address",
                       s != NULL && s[0] != '\0' ? "advertised.listeners" : "listeners", h);
    }

    char controller_listener[32];
    if ((rc = kq_config_string(c, "controller.listener.names", "CONTROLLER", &s, errbuf, errlen)) !=
        0)
        return rc;
    snprintf(controller_listener, sizeof controller_listener, "%.*s", (int)strcspn(s, ", "), s);
    if (!controller_listener[0])
        return bad(errbuf, errlen, "%s: %s", "controller.listener.names",
                   "empty (the listener name the controllers use, e.g. CONTROLLER)");
    if ((rc = kq_config_protocol_map(c, &out->protocols, errbuf, errlen)) != 0 ||
        (rc = kq_protocol_of(&out->protocols, out->listeners[0].name, &out->listener_protocol,
                             errbuf, errlen)) != 0 ||
        (rc = kq_protocol_of(&out->protocols, controller_listener, &out->controller_protocol,
                             errbuf, errlen)) != 0)
        return rc;
    /* SSL anywhere in a map that was set (a leader's listener may be one of them) needs the
     * ssl.* keys too */
    int any_ssl =
        out->listener_protocol == KQ_SECURITY_SSL || out->controller_protocol == KQ_SECURITY_SSL;
    for (int i = 0; i < out->protocols.n && out->protocols.given; i++)
        any_ssl |= out->protocols.v[i].protocol == KQ_SECURITY_SSL;
    if ((rc = kq_config_metrics_listener(c, out->metrics_host, sizeof(out->metrics_host),
                                         &out->metrics_port, &out->metrics_tls, errbuf, errlen)))
        return rc;
    any_ssl |= out->metrics_tls; /* an https:// metrics listener uses them too */
    if ((rc = kq_config_ssl(c, any_ssl, &out->ssl, errbuf, errlen)) != 0 ||
        (rc = kq_config_authorizer(c, &out->authz, errbuf, errlen)) != 0)
        return rc;

    if ((rc = kq_config_string(c, "log.dirs", NULL, &s, errbuf, errlen)) != 0)
        return rc;
    if (s == NULL || s[0] == '\0') {
        if ((rc = kq_config_string(c, "log.dir", NULL, &s, errbuf, errlen)) != 0)
            return rc;
        if (s == NULL || s[0] == '\0')
            return bad(errbuf, errlen, "%s: %s", "log.dirs",
                       "missing required key (the broker's data directory)");
    }
    if (strchr(s, ',') != NULL)
        return bad(errbuf, errlen,
                   "%s: '%s' names several directories; this version supports exactly one",
                   "log.dirs", s);
    {
        const char *d = s;
        size_t l = strlen(d);
        while (l > 0 && (*d == ' ' || *d == '\t'))
            d++, l--;
        while (l > 0 && (d[l - 1] == ' ' || d[l - 1] == '\t'))
            l--;
        if (l == 0 || l >= sizeof(out->log_dir))
            return bad(errbuf, errlen, "%s: %s", "log.dirs",
                       l == 0 ? "empty directory name" : "path is too long");
        memcpy(out->log_dir, d, l);
        out->log_dir[l] = '\0';
    }

    if ((rc = kq_config_string(c, "broker.rack", "", &s, errbuf, errlen)) != 0)
        return rc;
    if (strlen(s) >= sizeof(out->rack))
        return bad(errbuf, errlen, "%s: %s", "broker.rack", "longer than 255 characters");
    snprintf(out->rack, sizeof(out->rack), "%s", s);

    if ((rc = get_ms(c, "broker.heartbeat.interval.ms", 2000, 1, &out->heartbeat_interval_ms,
                     errbuf, errlen)) != 0 ||
        (rc = get_ms(c, "broker.session.timeout.ms", 9000, 100, &out->session_timeout_ms, errbuf,
                     errlen)) != 0 ||
        (rc = get_ms(c, "initial.broker.registration.timeout.ms", 60000, 1,
                     &out->registration_timeout_ms, errbuf, errlen)) != 0 ||
        (rc = get_ms(c, "broker.controlled.shutdown.timeout.ms", 30000, 1,
                     &out->shutdown_timeout_ms, errbuf, errlen)) != 0 ||
        (rc = get_ms(c, "replica.lag.time.max.ms", 30000, 1, &out->replica_lag_time_max_ms, errbuf,
                     errlen)) != 0 ||
        (rc = get_ms(c, "replica.fetch.wait.max.ms", 500, 0, &out->replica_fetch_wait_max_ms,
                     errbuf, errlen)) != 0 ||
        (rc = get_ms(c, "kq.test.replica.fetch.delay.ms", 0, 0, &out->test_fetch_delay_ms, errbuf,
                     errlen)) != 0)
        return rc;
    if (out->heartbeat_interval_ms >= out->session_timeout_ms) {
        snprintf(errbuf, errlen,
                 "broker.heartbeat.interval.ms: %u must be less than broker.session.timeout.ms "
                 "(%u), or the controller fences the broker between heartbeats",
                 out->heartbeat_interval_ms, out->session_timeout_ms);
        return KQ_ERR_CONFIG;
    }
    if (out->replica_fetch_wait_max_ms >= out->replica_lag_time_max_ms) {
        snprintf(errbuf, errlen,
                 "replica.fetch.wait.max.ms: %u must be less than replica.lag.time.max.ms (%u), "
                 "or followers drop out of the ISR while they wait",
                 out->replica_fetch_wait_max_ms, out->replica_lag_time_max_ms);
        return KQ_ERR_CONFIG;
    }
    if ((rc = kq_config_int(c, "replica.fetch.max.bytes", 1048576, 1, 1073741824, &v, errbuf,
                            errlen)) != 0)
        return rc;
    out->replica_fetch_max_bytes = (uint32_t)v;
    if ((rc = kq_config_int(c, "min.insync.replicas", 1, 1, 32767, &v, errbuf, errlen)) != 0)
        return rc;
    out->min_insync_replicas = (int32_t)v;
    if ((rc = kq_config_int(c, "socket.request.max.bytes", 16777216, 16777216, 1073741824, &v,
                            errbuf, errlen)) != 0)
        return rc;
    out->max_request_bytes = (uint32_t)v;
    if ((rc = kq_config_int(c, "max.connections", KQ_RPC_DEFAULT_MAX_CONNECTIONS, 1, 1000000, &v,
                            errbuf, errlen)) != 0)
        return rc;
    out->conn_limits.max_connections = (int)v;
    if ((rc = kq_config_int(c, "max.connections.per.ip", KQ_RPC_DEFAULT_MAX_CONNECTIONS_PER_IP, 0,
                            1000000, &v, errbuf, errlen)) != 0)
        return rc;
    out->conn_limits.max_connections_per_ip = (int)v;

    if ((rc = get_ms(c, "controller.quorum.election.timeout.ms", 1000, 1,
                     &out->raft.election_timeout_ms, errbuf, errlen)) != 0 ||
        (rc = get_ms(c, "controller.quorum.fetch.timeout.ms", 2000, 1, &out->raft.fetch_timeout_ms,
                     errbuf, errlen)) != 0 ||
        (rc = get_ms(c, "controller.quorum.election.backoff.max.ms", 1000, 1,
                     &out->raft.election_backoff_max_ms, errbuf, errlen)) != 0 ||
        (rc = get_ms(c, "controller.quorum.request.timeout.ms", 2000, 1,
                     &out->raft.request_timeout_ms, errbuf, errlen)) != 0 ||
        (rc = get_ms(c, "controller.quorum.retry.backoff.ms", 20, 0, &out->raft.retry_backoff_ms,
                     errbuf, errlen)) != 0)
        return rc;

    if ((rc = kq_config_string(c, "log.level", "info", &s, errbuf, errlen)) != 0)
        return rc;
    int lvl = kq_log_level_parse(s);
    if (lvl < 0)
        return bad(errbuf, errlen, "%s: '%s' is not one of debug, info, warn, error", "log.level",
                   s);
    out->log_level = (kq_log_level)lvl;
    kq_config_warn_unknown(c);
    return 0;
}

int kq_broker_config_load(const char *path, kq_broker_config *out, char *errbuf, size_t errlen)
{
    kq_config *c = NULL;
    int rc = kq_config_load(path, &c, errbuf, errlen);
    if (rc == 0)
        rc = load_from(c, out, errbuf, errlen);
    kq_config_free(c);
    return rc;
}

int kq_broker_config_parse(const char *text, kq_broker_config *out, char *errbuf, size_t errlen)
{
    kq_config *c = NULL;
    int rc = kq_config_parse(text, &c, errbuf, errlen);
    if (rc == 0)
        rc = load_from(c, out, errbuf, errlen);
    kq_config_free(c);
    return rc;
}
