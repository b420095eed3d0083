/*
 * kq_rpc: request/response transport over nng REQ/REP (DESIGN.md section 6).
 *
 * Server: one REP socket listening on a tcp:// or tls+tcp:// URL with a pool of contexts, each
 * running recv -> deliver -> (reply) -> recv. The on_request callback runs on an nng thread: it
 * must not block and must not touch loop-owned state; it takes ownership of the kq_rpc_req and the
 * loop later answers it with kq_rpc_reply (any thread). A receive size limit is always set
 * (NNG_OPT_RECVMAXSZ); oversized or garbage messages never crash the server.
 *
 * Client: one REQ socket per peer, dialed non-blocking with reconnect back-off
 * (NNG_OPT_RECONNMINT 100 ms, NNG_OPT_RECONNMAXT 2 s), nng's resend disabled
 * (NNG_OPT_REQ_RESENDTIME = NNG_DURATION_INFINITE), each call on its own REQ context with its
 * own timeout. Every call completes exactly once: with the response bytes, or with
 * KQ_ERR_REQUEST_TIMED_OUT / KQ_ERR_NETWORK_EXCEPTION.
 *
 * TLS: a tls+tcp:// listener or dialer uses the process's TLS identity (kq_rpc_set_tls), one
 * per process: its certificate is presented to every peer and its trust store checks them.
 */
#ifndef KQ_RPC_H
#define KQ_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kq/config.h"
#include "kq/error.h"
#include "kq/metrics.h"
#include "kq/principal.h"
#include "kq/tls.h"

#define KQ_RPC_DEFAULT_MAX_MSG (64u * 1024u * 1024u)
#define KQ_RPC_DEFAULT_CONTEXTS 64
#define KQ_RPC_DEFAULT_MAX_CONNECTIONS 1000     /* max.connections */
#define KQ_RPC_DEFAULT_MAX_CONNECTIONS_PER_IP 0 /* max.connections.per.ip: no limit, as Kafka */

typedef struct kq_rpc_server kq_rpc_server;
typedef struct kq_rpc_req kq_rpc_req;

/* "tcp://host:port" or, when secure, "tls+tcp://host:port" (an IPv6 host in brackets). */
void kq_rpc_url(char *buf, size_t cap, bool secure, const char *host, int port);

/* Sets the process's TLS identity from the PEM files in s (read now, not kept): the config
 * every later tls+tcp:// listener and dialer uses. Called again (SIGHUP), it re-reads the
 * files and hands the new config to every open tls+tcp:// listener and dialer: connections
 * already made keep their sessions, new ones use the new files (nng binds the config to the
 * accept it has already posted, so one more connection may still get the old one). On an
 * error nothing changes. 0, or KQ_ERR_CONFIG with the problem in errbuf. Thread-safe. */
int kq_rpc_set_tls(const kq_tls_settings *s, char *errbuf, size_t errlen);
/* The server (listener) config of the last kq_rpc_set_tls, NULL before the first; never freed
 * (see rpc.c), so a holder may keep it. */
nng_tls_config *kq_rpc_tls_server_config(void);
/* fn(arg, server_config) is called (under the TLS lock: fn must not call back into kq_rpc)
 * after each later kq_rpc_set_tls: a TLS stream listener outside kq_rpc (the HTTPS metrics
 * listener) takes the new config there. One hook per process; NULL fn removes it. */
void kq_rpc_tls_on_change(void (*fn)(void *arg, nng_tls_config *server), void *arg);
/* Starts the node's metrics listener (kq_http_start), over HTTPS with the process's server TLS
 * config when tls (it then follows every kq_rpc_set_tls: SIGHUP rotation). KQ_ERR_CONFIG when
 * tls and no TLS settings were given; else kq_http_start's codes. The stop is kq_http_stop
 * after kq_rpc_tls_on_change(NULL, NULL). */
int kq_metrics_listener_start(const char *host, int port, bool tls, kq_metrics *m,
                              kq_http_ready_fn ready, void *arg, kq_http **out, char *errbuf,
                              size_t errlen);
/* kq_rpc_set_tls from the ssl.* keys (kq_config_ssl). */
int kq_rpc_set_tls_config(const kq_ssl_config *ssl, char *errbuf, size_t errlen);
/* Registers kq_tls_certificate_expiry_timestamp_seconds{store="keystore"|"truststore"} in m
 * (the keystore's certificate, the earliest CA of the truststore) and keeps them current at
 * every kq_rpc_set_tls from then on. m must outlive the process's use of TLS. 0 or
 * KQ_ERR_NOMEM. */
int kq_rpc_tls_metrics(kq_metrics *m);
/* How a daemon's listener tells who sent a request (docs/security.md): on a TLS listener
 * (tls) the principal mapping rules from ssl (*rules, the caller's, kq_principal_rules_free;
 * NULL on plaintext, where everyone is User:ANONYMOUS), and whether node identities are
 * checked (*check_identity: TLS with ssl.client.auth=required; then clients opened with
 * kq_rpc_client_open_node also check the server's identity, with *rules, which must outlive
 * them). Warns under component when an
 * authorizer is on but nodes cannot be identified (their own requests then need
 * ClusterAction). 0, or KQ_ERR_CONFIG with errbuf set. */
int kq_rpc_identity_setup(bool tls, const kq_ssl_config *ssl, const kq_authorizer_config *authz,
                          const char *component, kq_principal_rules **rules, bool *check_identity,
                          char *errbuf, size_t errlen);
/* For kq_daemon_on_reload: re-reads the files named by the kq_ssl_config at ssl_config (which
 * must outlive the process's use of it) and logs the outcome; on an error the certificates in
 * use stay. */
void kq_rpc_reload_tls(void *ssl_config);

/* Called on an nng thread; owns req from here on. */
typedef void (*kq_rpc_on_request)(void *arg, kq_rpc_req *req);

/* url like "tcp://127.0.0.1:9093" or "tls+tcp://127.0.0.1:9093". Returns 0, or KQ_ERR_IO
 * (KQ_ERR_CONFIG for a tls+tcp:// URL before kq_rpc_set_tls) with errbuf naming the URL and
 * the nng error (e.g. address in use). Caller owns *out; stop with kq_rpc_server_stop. */
int kq_rpc_server_start(const char *url, int n_contexts, size_t max_msg_bytes, kq_rpc_on_request cb,
                        void *arg, kq_rpc_server **out, char *errbuf, size_t errlen);
/* Stops listening, drops unanswered requests, frees the server. Do not call from a callback. */
void kq_rpc_server_stop(kq_rpc_server *s);

/* Connections a server holds at once. A server counts every connection (pipe) from the start
 * and refuses (closes at once, before any message is read) one that would pass a limit; a
 * refusal is logged at most once a second, with the peer and the limit. */
typedef struct kq_rpc_conn_limits {
    int max_connections;        /* on this listener; <= 0: no limit */
    int max_connections_per_ip; /* from one peer address; <= 0: no limit */
} kq_rpc_conn_limits;
/* Until called, the KQ_RPC_DEFAULT_MAX_CONNECTIONS* limits hold. Applies to new connections. */
void kq_rpc_server_set_conn_limits(kq_rpc_server *s, const kq_rpc_conn_limits *limits);
/* Connections held now, and refused since the start. */
void kq_rpc_server_conn_counts(kq_rpc_server *s, uint64_t *open, uint64_t *refused);
/* Registers kq_rpc_connections (gauge) and kq_rpc_connections_refused_total (counter) in m
 * and keeps them current from then on. m must outlive s. 0, or KQ_ERR_NOMEM. */
int kq_rpc_server_conn_metrics(kq_rpc_server *s, kq_metrics *m);

const uint8_t *kq_rpc_req_data(const kq_rpc_req *req);
/* Who sent req: NULL on a plaintext listener; on a TLS listener the subject of the client's
 * verified certificate ("CN=node-1"), or "" for a client without one. Valid until req is
 * released. */
const char *kq_rpc_req_peer(const kq_rpc_req *req);

size_t kq_rpc_req_len(const kq_rpc_req *req);
/* Send the reply and release req (always, even on error). Thread-safe. */
int kq_rpc_reply(kq_rpc_req *req, const uint8_t *data, size_t len);
/* Release req without replying (the client times out). */
void kq_rpc_req_drop(kq_rpc_req *req);

typedef struct kq_rpc_client kq_rpc_client;

/* url like "tcp://127.0.0.1:9093" or "tls+tcp://..." (after kq_rpc_set_tls). Never blocks on
 * the peer being down. */
int kq_rpc_client_open(const char *url, size_t max_msg_bytes, kq_rpc_client **out, char *errbuf,
                       size_t errlen);
/* The same for a client of node node_id (a voter, a controller, a partition leader): where
 * node identities are checked (kq_rpc_identity_setup) and url is tls+tcp://, a connection
 * whose server certificate is not node node_id's (node.principal.template) is closed before
 * anything is sent, and logged (kq_log_refusal); nng redials. node_id < 0: not checked. */
int kq_rpc_client_open_node(const char *url, int32_t node_id, size_t max_msg_bytes,
                            kq_rpc_client **out, char *errbuf, size_t errlen);
/* Cancels outstanding calls (their callbacks run with KQ_ERR_NETWORK_EXCEPTION) and frees. */
void kq_rpc_client_close(kq_rpc_client *c);

/* Runs on an nng thread; data valid only during the call; err 0 on success. */
typedef void (*kq_rpc_on_response)(void *arg, int err, const uint8_t *data, size_t len);

/* For an on_response callback that hands the answer to its loop: copies data into *out
 * (malloc'd, the caller's; NULL and *out_len 0 when err != 0 or len == 0) and returns the
 * error to report: err, or KQ_ERR_NETWORK_EXCEPTION if the copy failed (a lost answer). */
static inline int kq_rpc_copy_answer(int err, const uint8_t *data, size_t len, uint8_t **out,
                                     size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (err != 0 || len == 0)
        return err;
    if ((*out = malloc(len)) == NULL)
        return KQ_ERR_NETWORK_EXCEPTION;
    memcpy(*out, data, len);
    *out_len = len;
    return 0;
}
/* Returns 0 (cb will run exactly once) or an error (cb will not run). */
int kq_rpc_call_async(kq_rpc_client *c, const uint8_t *req, size_t len, uint32_t timeout_ms,
                      kq_rpc_on_response cb, void *arg);
/* Blocking call; *resp is malloc'd (caller frees). */
int kq_rpc_call(kq_rpc_client *c, const uint8_t *req, size_t len, uint32_t timeout_ms,
                uint8_t **resp, size_t *resp_len);

#endif
