/*
 * kq_tls: TLS for nng listeners, dialers and the metrics server, and the verified identity of
 * the peer on every TLS connection.
 *
 * nng 1.5.2 verifies a peer's certificate chain but cannot say whose certificate it was. kq
 * therefore registers its own TLS engine with nng (over mbed TLS 2.28, the library Debian's
 * nng is built with): when a handshake verifies the peer's certificate against the trust
 * store, the engine keeps the certificate's subject, and kq_tls_pipe_subject() reads it for a
 * pipe. Every nng TLS object in the process (SP listeners and dialers, the HTTP server) uses
 * the engine once kq_tls_init() has run. Only TLS 1.2 is offered (mbed TLS 2.28 has no 1.3).
 *
 * Ownership: kq_tls_config_new() returns a config the caller owns (nng_tls_config_free; nng
 * keeps its own reference while a listener or dialer uses it). Paths and passwords are read
 * during the call and not kept. Subjects are copied into the caller's buffer.
 */
#ifndef KQ_TLS_H
#define KQ_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

/* Longest certificate subject kq keeps (RFC 2253 text, without the NUL). A certificate whose
 * subject is longer gives no identity. */
#define KQ_TLS_SUBJECT_MAX 512

/* ssl.client.auth: what a TLS listener asks of its clients. */
typedef enum kq_tls_client_auth {
    KQ_TLS_CLIENT_AUTH_NONE,      /* no client certificate asked for */
    KQ_TLS_CLIENT_AUTH_REQUESTED, /* asked for; a client without one is served, as nobody */
    KQ_TLS_CLIENT_AUTH_REQUIRED,  /* a client without a certificate the trust store verifies is
                                     refused */
} kq_tls_client_auth;

/* The files one side of a TLS connection uses (Kafka's ssl.* keys, PEM only). */
typedef struct kq_tls_settings {
    const char *keystore;     /* ssl.keystore.location: certificate chain and private key */
    const char *key_password; /* ssl.key.password, NULL for an unencrypted key */
    const char *truststore;   /* ssl.truststore.location: the CA certificates peers must chain to */
    kq_tls_client_auth client_auth; /* listeners only */
} kq_tls_settings;

/* Registers kq's engine with nng. Call once per process before any TLS listener, dialer or
 * HTTPS server exists (later calls do nothing). Fails, with a message in err, when the nng
 * library is not 1.5.x (the engine interface changed in 1.6). 0 or -1. */
int kq_tls_init(char *err, size_t errlen);

/* A TLS config for a listener (server true) or a dialer, from the PEM files in s. Checks the
 * files first so that a problem is named: a missing or unreadable file, no certificate or no
 * key in the keystore, a wrong key password, a key that does not match the certificate, a
 * truststore without a CA certificate. 0, or -1 with the problem in err. */
int kq_tls_config_new(const kq_tls_settings *s, bool server, nng_tls_config **out, char *err,
                      size_t errlen);

/* The subject (RFC 2253, as Java's X500Principal.getName() prints it for Kafka's principal:
 * "CN=node-1,O=kq"; kq differs only in writing control characters as \XX) of the
 * certificate the peer on pipe p presented, when the handshake verified it against the trust
 * store. 0 with the subject in buf (cap bytes, NUL-terminated; "" when the peer presented no
 * verified certificate); NNG_ENOTSUP for a pipe that is not TLS; NNG_EMSGSIZE when the
 * certificate was verified but its subject is longer than KQ_TLS_SUBJECT_MAX (the peer cannot
 * be identified: refuse it); NNG_EINVAL when it does not fit in cap (never a cut subject); or
 * another nng error. */
int kq_tls_pipe_subject(nng_pipe p, char *buf, size_t cap);

/* The subject (RFC 2253, as kq_tls_pipe_subject gives it) and expiry (notAfter, Unix
 * seconds) of the first certificate in a PEM file; subject may be NULL. 0, or -1 with the
 * problem in err. */
int kq_tls_cert_describe(const char *pem_path, char *subject, size_t cap, int64_t *not_after,
                         char *err, size_t errlen);

/* The earliest expiry (notAfter, Unix seconds) among all certificates in a PEM file (a
 * truststore's CAs, a keystore's chain). 0, or -1 with the problem in err. */
int kq_tls_earliest_expiry(const char *pem_path, int64_t *not_after, char *err, size_t errlen);

#endif
