/*
 * kq_config: Java .properties files (Kafka's format): key=value or key:value, '#' and '!'
 * comments, backslash line continuation, surrounding whitespace trimmed.
 *
 * Typed getters validate values and report a bad one as KQ_ERR_CONFIG with a message naming
 * the key and what is accepted ("controller.quorum.election.timeout.ms: 'abc' is not an
 * integer in [1, 86400000]"). Daemons exit 2 on such an error. kq_config_warn_unknown logs a
 * warning for every key that no getter asked for.
 *
 * Ownership: kq_config_load's result is the caller's (kq_config_free). Strings returned by
 * getters are owned by the config.
 */
#ifndef KQ_CONFIG_H
#define KQ_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "kq/authorizer.h"
#include "kq/raft.h"

typedef struct kq_config kq_config;

int kq_config_load(const char *path, kq_config **out, char *errbuf, size_t errlen);
/* Parse from memory (tests). */
int kq_config_parse(const char *text, kq_config **out, char *errbuf, size_t errlen);
void kq_config_free(kq_config *c);

/* Raw value or NULL; marks the key as known. */
const char *kq_config_get(kq_config *c, const char *key);
/* Set (tests, overrides). */
int kq_config_set(kq_config *c, const char *key, const char *value);

/* Each returns 0 (value or default stored in *out) or KQ_ERR_CONFIG with errbuf set. */
int kq_config_string(kq_config *c, const char *key, const char *def, const char **out, char *errbuf,
                     size_t errlen);
/* Required string: KQ_ERR_CONFIG "missing required key" if absent or empty. */
int kq_config_required(kq_config *c, const char *key, const char **out, char *errbuf,
                       size_t errlen);
int kq_config_int(kq_config *c, const char *key, int64_t def, int64_t min, int64_t max,
                  int64_t *out, char *errbuf, size_t errlen);
int kq_config_bool(kq_config *c, const char *key, int def, int *out, char *errbuf, size_t errlen);

/* Warn (kq_log) about keys present in the file that no getter asked for. */
void kq_config_warn_unknown(kq_config *c);

/* controller.quorum.voters: "1@host:9093,2@host:9094". */
typedef struct kq_voter_addr {
    int32_t id;
    char host[256];
    int port;
} kq_voter_addr;
int kq_config_parse_voters(const char *value, kq_voter_addr *out, int max, int *n, char *errbuf,
                           size_t errlen);
/* kq storage format --initial-controllers (KIP-853): "ID@HOST:PORT:DIRECTORY_ID,..." where the
 * directory id is a uuid as kq storage random-uuid prints it; the id@host:port part obeys the
 * rules of controller.quorum.voters, and directory ids are distinct and not zero. */
#define KQ_INITIAL_CONTROLLERS_MAX 16
typedef struct kq_initial_controller {
    kq_voter_addr addr;
    uint8_t dir[16];
} kq_initial_controller;
int kq_config_parse_initial_controllers(const char *value, kq_initial_controller *out, int max,
                                        int *n, char *errbuf, size_t errlen);
/* controller.quorum.bootstrap.servers (KIP-853): "HOST:PORT[,HOST:PORT...]", at most max; ids
 * are set to -1 (the caller numbers them). Messages name the key. */
int kq_config_parse_bootstrap_servers(const char *value, kq_voter_addr *out, int max, int *n,
                                      char *errbuf, size_t errlen);
/* A listener "NAME://host:port" (host may be empty = 0.0.0.0, or [v6]). */
typedef struct kq_listener {
    char name[32];
    char host[256];
    int port;
} kq_listener;
int kq_config_parse_listener(const char *value, kq_listener *out, char *errbuf, size_t errlen);
/* "host:port" */
int kq_config_parse_hostport(const char *value, char *host, size_t hostlen, int *port, char *errbuf,
                             size_t errlen);
/* metrics.listener: "" (no endpoint: host ""), "host:port" or "http://host:port" (HTTP), or
 * "https://host:port" (*tls: HTTPS with the node's ssl.* keystore, truststore and
 * ssl.client.auth). 0, or KQ_ERR_CONFIG with errbuf naming the key. */
int kq_config_metrics_listener(kq_config *c, char *host, size_t hostlen, int *port, bool *tls,
                               char *errbuf, size_t errlen);

/* ---- security (Kafka's keys; docs/security.md) ---- */

typedef enum kq_security_protocol {
    KQ_SECURITY_PLAINTEXT = 0,
    KQ_SECURITY_SSL = 1,
} kq_security_protocol;

#define KQ_MAX_PROTOCOL_MAP 16
/* listener.security.protocol.map: listener name -> protocol. */
typedef struct kq_protocol_map {
    int n;
    int given; /* the key was set (else Kafka's default map) */
    struct {
        char name[32];
        kq_security_protocol protocol;
    } v[KQ_MAX_PROTOCOL_MAP];
} kq_protocol_map;

/* Reads listener.security.protocol.map ("CONTROLLER:SSL,PLAINTEXT:PLAINTEXT"); its default
 * is Kafka's, PLAINTEXT:PLAINTEXT,SSL:SSL. SASL_PLAINTEXT and SASL_SSL are refused (kq has no
 * SASL). 0 or KQ_ERR_CONFIG naming the key. */
int kq_config_protocol_map(kq_config *c, kq_protocol_map *out, char *errbuf, size_t errlen);
/* The protocol of listener `name`. A name the map lacks is PLAINTEXT when the map was not
 * set (as Kafka treats its controller listener), an error naming the key when it was. */
int kq_protocol_of(const kq_protocol_map *m, const char *name, kq_security_protocol *out,
                   char *errbuf, size_t errlen);
/* "tcp://" or "tls+tcp://": the nng URL scheme of a protocol. */
const char *kq_protocol_scheme(kq_security_protocol p);

/* The ssl.* keys. Only PEM stores: certificate chain and key in one file, CAs in another. */
typedef struct kq_ssl_config {
    char keystore[4096];     /* ssl.keystore.location */
    char truststore[4096];   /* ssl.truststore.location */
    char key_password[1024]; /* ssl.key.password */
    int has_key_password;
    int client_auth;              /* ssl.client.auth: 0 none (default), 1 requested, 2 required */
    char principal_template[260]; /* node.principal.template (default User:CN=node-{id}) */
    char mapping_rules[2048];     /* ssl.principal.mapping.rules (default DEFAULT) */
} kq_ssl_config;
/* Reads the ssl.* keys, node.principal.template and ssl.principal.mapping.rules (both
 * checked, see kq/principal.h); `needed` (something uses SSL) makes the two locations
 * required. ssl.keystore.type and ssl.truststore.type must be PEM. 0 or KQ_ERR_CONFIG naming
 * the key. */
int kq_config_ssl(kq_config *c, int needed, kq_ssl_config *out, char *errbuf, size_t errlen);

/* authorizer.class.name (empty: no authorizer; Kafka's StandardAuthorizer class name turns
 * kq's on), super.users, allow.everyone.if.no.acl.found (default false). 0 or KQ_ERR_CONFIG
 * naming the key. */
int kq_config_authorizer(kq_config *c, kq_authorizer_config *out, char *errbuf, size_t errlen);

#endif
