/*
 * kq-controller configuration: the controller's .properties keys (Kafka names and defaults),
 * validated into one struct. Any bad value is reported with the key's name; the daemon exits 2.
 */
#ifndef KQ_CTL_CONFIG_H
#define KQ_CTL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "kq/config.h"
#include "kq/log.h"
#include "kq/raft.h"
#include "kq/rpc.h"
#include "decide.h"

typedef struct kq_ctl_config {
    int32_t node_id;
    /* controller.quorum.voters (kraft.version 0); with dynamic voters the voter set in force,
     * kept by the daemon from the Raft core */
    kq_voter_addr voters[KQ_RAFT_MAX_VOTERS];
    int n_voters;
    /* controller.quorum.bootstrap.servers, id KQ_RAFT_BOOTSTRAP_ID(i) each (raft.n_bootstrap) */
    kq_voter_addr bootstrap[KQ_RAFT_MAX_VOTERS];
    kq_listener listener;          /* listeners: where this node binds */
    kq_listener advertised;        /* advertised.listeners (defaults to listeners) */
    kq_security_protocol protocol; /* the listener's, from listener.security.protocol.map; the
                                    * controllers dial each other with it too */
    kq_ssl_config ssl;             /* ssl.* (required when protocol is SSL) */
    kq_authorizer_config authz;    /* authorizer.class.name, super.users, allow.everyone... */
    char log_dir[4096];            /* metadata.log.dir */
    kq_raft_config raft;
    uint32_t append_linger_ms;      /* controller.quorum.append.linger.ms */
    uint32_t idle_interval_ms;      /* metadata.max.idle.interval.ms (0: no NoOps) */
    uint32_t max_request_bytes;     /* socket.request.max.bytes */
    kq_rpc_conn_limits conn_limits; /* max.connections, max.connections.per.ip */
    kq_log_level log_level;         /* log.level */
    char metrics_host[256];         /* metrics.listener host ("" = no HTTP endpoint) */
    kq_decide_settings decide;      /* broker.session.timeout.ms, num.partitions, ... */
    uint32_t rebalance_interval_ms; /* leader.imbalance.check.interval.seconds * 1000 */
    uint32_t unclean_interval_ms;   /* unclean.leader.election.interval.ms */
    int64_t snapshot_max_bytes;     /* metadata.log.max.record.bytes.between.snapshots */
    int64_t snapshot_interval_ms;   /* metadata.log.max.snapshot.interval.ms (0: off) */
    int metrics_port;
    bool metrics_tls; /* metrics.listener https:// */
} kq_ctl_config;

/* Load and validate. Returns 0, or KQ_ERR_CONFIG / KQ_ERR_IO with errbuf naming the key or
 * file. Warns about unknown keys. */
int kq_ctl_config_load(const char *path, kq_ctl_config *out, char *errbuf, size_t errlen);

#endif
