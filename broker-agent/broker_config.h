/*
 * kq-broker-agent configuration: the broker's .properties keys (Kafka names and defaults,
 * docs/broker.md), validated into one struct. Any bad value is reported with the key's name;
 * the daemon exits 2.
 *
 * Ownership: the struct is filled by value; it holds no pointers.
 */
#ifndef KQ_BROKER_CONFIG_H
#define KQ_BROKER_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "kq/config.h"
#include "kq/log.h"
#include "kq/raft.h"
#include "kq/rpc.h"

#define KQ_BROKER_MAX_LISTENERS 4
#define KQ_BROKER_MAX_LOG_DIRS 1 /* this version keeps everything in one directory */

typedef struct kq_broker_config {
    int32_t node_id;
    /* controller.quorum.voters; with dynamic voters (KIP-853) the voter set in force, kept by
     * the daemon from its Raft observer */
    kq_voter_addr voters[KQ_RAFT_MAX_VOTERS];
    int n_voters;
    /* controller.quorum.bootstrap.servers, id KQ_RAFT_BOOTSTRAP_ID(i) each (raft.n_bootstrap) */
    kq_voter_addr bootstrap[KQ_RAFT_MAX_VOTERS];
    kq_listener listeners[KQ_BROKER_MAX_LISTENERS]; /* listeners: where this node binds */
    int n_listeners;
    kq_listener advertised[KQ_BROKER_MAX_LISTENERS]; /* advertised.listeners (default: listeners) */
    int n_advertised;
    /* listener.security.protocol.map; the protocols of listeners[0] (the one served) and of
     * controller.listener.names' first name (how the controllers are dialed); ssl.* (required
     * when either is SSL) */
    kq_protocol_map protocols;
    kq_security_protocol listener_protocol, controller_protocol;
    kq_ssl_config ssl;
    kq_authorizer_config authz;         /* authorizer.class.name, super.users, allow.everyone... */
    char log_dir[4096];                 /* log.dirs (or log.dir): the one data directory */
    char rack[256];                     /* broker.rack, "" = none */
    uint32_t heartbeat_interval_ms;     /* broker.heartbeat.interval.ms, 2000 */
    uint32_t session_timeout_ms;        /* broker.session.timeout.ms, 9000 */
    uint32_t registration_timeout_ms;   /* initial.broker.registration.timeout.ms, 60000 */
    uint32_t shutdown_timeout_ms;       /* broker.controlled.shutdown.timeout.ms, 30000 */
    uint32_t replica_lag_time_max_ms;   /* replica.lag.time.max.ms, 30000 */
    uint32_t replica_fetch_wait_max_ms; /* replica.fetch.wait.max.ms, 500 */
    uint32_t test_fetch_delay_ms;       /* kq.test.replica.fetch.delay.ms, 0: tests only (a slow
                                         * follower: wait this long between fetches) */
    uint32_t replica_fetch_max_bytes;   /* replica.fetch.max.bytes, 1048576 */
    int32_t min_insync_replicas;        /* min.insync.replicas, 1 (cluster default) */
    uint32_t max_request_bytes;         /* socket.request.max.bytes, 16 MiB */
    kq_rpc_conn_limits conn_limits;     /* max.connections, max.connections.per.ip */
    kq_raft_config raft;                /* the metadata observer (controller.quorum.*) */
    kq_log_level log_level;             /* log.level */
    char metrics_host[256];             /* metrics.listener host ("" = no HTTP endpoint) */
    int metrics_port;
    bool metrics_tls; /* metrics.listener https:// */
} kq_broker_config;

/* Load and validate a file. Returns 0, or KQ_ERR_CONFIG / KQ_ERR_IO with errbuf naming the key
 * (or the file). Warns about unknown keys. */
int kq_broker_config_load(const char *path, kq_broker_config *out, char *errbuf, size_t errlen);
/* The same from .properties text (tests). */
int kq_broker_config_parse(const char *text, kq_broker_config *out, char *errbuf, size_t errlen);

#endif
