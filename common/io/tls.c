/*
 * kq_tls: kq's TLS engine for nng, over mbed TLS 2.28, and the TLS configs built from kq's
 * settings. Contract and ownership: include/kq/tls.h.
 *
 * How a connection's identity gets out: nng 1.5.2 lets an application reach a connection's
 * engine state only through the NNG_OPT_TLS_VERIFIED getter, which calls the engine's
 * `verified` operation synchronously on the caller's thread. kq_tls_pipe_subject() points a
 * thread-local slot at its buffer, reads NNG_OPT_TLS_VERIFIED, and the operation copies the
 * subject it recorded when the handshake ended into the slot.
 *
 * nng keeps calling `handshake` after one failed, so the first final result is latched: a
 * refused peer stays refused.
 */
#include "kq/tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/pkcs5.h>
#include <mbedtls/ssl.h>
#include <mbedtls/version.h>
#include <mbedtls/x509_crl.h>
#include <mbedtls/x509_crt.h>
#include <nng/supplemental/tls/engine.h>

/* ---------------------------------------------------------------------------------------- */
/* certificate subjects in RFC 2253 form                                                      */

/* The attribute types RFC 2253 (and Java's X500Principal) print by keyword. */
static const struct {
    const char *oid; /* DER contents of the OBJECT IDENTIFIER */
    size_t len;
    const char *keyword;
} dn_keywords[] = {
    {"\x55\x04\x03", 3, "CN"},
    {"\x55\x04\x06", 3, "C"},
    {"\x55\x04\x07", 3, "L"},
    {"\x55\x04\x08", 3, "ST"},
    {"\x55\x04\x09", 3, "STREET"},
    {"\x55\x04\x0a", 3, "O"},
    {"\x55\x04\x0b", 3, "OU"},
    {"\x09\x92\x26\x89\x93\xf2\x2c\x64\x01\x19", 10, "DC"},
    {"\x09\x92\x26\x89\x93\xf2\x2c\x64\x01\x01", 10, "UID"},
};

/* An output buffer that remembers overflowing. */
typedef struct dn_out {
    char *buf;
    size_t cap, len;
    bool full;
} dn_out;

static void dn_put(dn_out *o, const char *s, size_t n)
{
    if (o->len + n >= o->cap) {
        o->full = true;
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

static void dn_hex(dn_out *o, unsigned char c, bool upper)
{
    char h[3];

    snprintf(h, sizeof h, upper ? "%02X" : "%02x", c);
    dn_put(o, h, 2);
}

/* One Unicode code point as UTF-8. */
static void dn_utf8(dn_out *o, uint32_t cp)
{
    char b[4];
    size_t n;

    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | cp >> 6);
        b[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | cp >> 12);
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | cp >> 18);
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    dn_put(o, b, n);
}

/* The code points of a string value of ASN.1 type tag: UTF-8, PrintableString and IA5String
 * bytes as they are (UTF-8), T61String as Latin-1, BMPString as UCS-2 and UniversalString as
 * UCS-4 (big-endian), decoded as Java does. */
static size_t dn_decode(int tag, const unsigned char *p, size_t n, size_t i, uint32_t *cp)
{
    switch (tag) {
    case MBEDTLS_ASN1_BMP_STRING:
        *cp = i + 1 < n ? (uint32_t)p[i] << 8 | p[i + 1] : 0xfffd;
        return 2;
    case MBEDTLS_ASN1_UNIVERSAL_STRING:
        *cp = i + 3 < n ? (uint32_t)p[i] << 24 | (uint32_t)p[i + 1] << 16 |
                              (uint32_t)p[i + 2] << 8 | p[i + 3]
                        : 0xfffd;
        if (*cp > 0x10ffff)
            *cp = 0xfffd;
        return 4;
    default:
        *cp = p[i];
        return 1;
    }
}

/* A string value with the escapes of Java's X500Principal.getName() (RFC 2253): a backslash
 * before , = + < > # ; " and \ anywhere and before every leading and trailing space. kq also
 * writes control characters as \XX (Java leaves them raw), so a subject is one printable
 * line. */
static void dn_string(dn_out *o, int tag, const unsigned char *p, size_t n)
{
    size_t lead = 0, trail = n, i = 0;

    while (lead < n && p[lead] == ' ' && tag != MBEDTLS_ASN1_BMP_STRING &&
           tag != MBEDTLS_ASN1_UNIVERSAL_STRING)
        lead++;
    while (trail > lead && p[trail - 1] == ' ' && tag != MBEDTLS_ASN1_BMP_STRING &&
           tag != MBEDTLS_ASN1_UNIVERSAL_STRING)
        trail--;
    while (i < n) {
        uint32_t cp;
        size_t at = i;

        i += dn_decode(tag, p, n, i, &cp);
        if (cp < 0x20 || cp == 0x7f) {
            dn_put(o, "\\", 1);
            dn_hex(o, (unsigned char)cp, true);
        } else if (cp < 0x80 && (strchr(",=+<>#;\"\\", (int)cp) || at < lead || at >= trail)) {
            char c = (char)cp;

            dn_put(o, "\\", 1);
            dn_put(o, &c, 1);
        } else if (tag == MBEDTLS_ASN1_UTF8_STRING || tag == MBEDTLS_ASN1_PRINTABLE_STRING ||
                   tag == MBEDTLS_ASN1_IA5_STRING) {
            dn_put(o, (const char *)&p[at], 1); /* UTF-8 passes through */
        } else {
            dn_utf8(o, cp);
        }
    }
}

/* A value of a type RFC 2253 has no string form for: '#' and the hex of its DER encoding. */
static void dn_der_hex(dn_out *o, const mbedtls_x509_buf *v)
{
    dn_put(o, "#", 1);
    dn_hex(o, (unsigned char)v->tag, false);
    if (v->len < 0x80) {
        dn_hex(o, (unsigned char)v->len, false);
    } else {
        int bytes = v->len > 0xffffff ? 4 : v->len > 0xffff ? 3 : v->len > 0xff ? 2 : 1;

        dn_hex(o, (unsigned char)(0x80 | bytes), false);
        for (int b = bytes - 1; b >= 0; b--)
            dn_hex(o, (unsigned char)(v->len >> (8 * b)), false);
    }
    for (size_t i = 0; i < v->len; i++)
        dn_hex(o, v->p[i], false);
}

static void dn_attribute(dn_out *o, const mbedtls_x509_name *a)
{
    const char *keyword = NULL;
    char oid[64];

    for (size_t i = 0; i < sizeof dn_keywords / sizeof dn_keywords[0]; i++)
        if (a->oid.len == dn_keywords[i].len && !memcmp(a->oid.p, dn_keywords[i].oid, a->oid.len))
            keyword = dn_keywords[i].keyword;
    if (!keyword) {
        if (mbedtls_oid_get_numeric_string(oid, sizeof oid, &a->oid) < 0) {
            o->full = true;
            return;
        }
        keyword = oid;
    }
    dn_put(o, keyword, strlen(keyword));
    dn_put(o, "=", 1);
    /* string values as text; any other type, and every attribute without a keyword (as
     * Java does), as the hex of its DER encoding */
    if (keyword != oid &&
        (a->val.tag == MBEDTLS_ASN1_UTF8_STRING || a->val.tag == MBEDTLS_ASN1_PRINTABLE_STRING ||
         a->val.tag == MBEDTLS_ASN1_IA5_STRING || a->val.tag == MBEDTLS_ASN1_T61_STRING ||
         a->val.tag == MBEDTLS_ASN1_BMP_STRING || a->val.tag == MBEDTLS_ASN1_UNIVERSAL_STRING))
        dn_string(o, a->val.tag, a->val.p, a->val.len);
    else
        dn_der_hex(o, &a->val);
}

/* The RDNs are stored in certificate order (most general first, with next_merged joining the
 * attributes of one multi-valued RDN); RFC 2253 prints them in reverse. Returns false when
 * the text does not fit in cap bytes. */
static bool dn_format(const mbedtls_x509_name *dn, char *buf, size_t cap)
{
    const mbedtls_x509_name *rdns[64];
    size_t n = 0;
    dn_out o = {buf, cap, 0, cap == 0};

    if (cap)
        buf[0] = '\0';
    for (const mbedtls_x509_name *a = dn; a && a->oid.p; a = a->next) {
        if (n == sizeof rdns / sizeof rdns[0])
            return false;
        rdns[n++] = a;
        while (a->next_merged && a->next)
            a = a->next;
    }
    for (size_t i = n; i-- > 0;) {
        if (i != n - 1)
            dn_put(&o, ",", 1);
        for (const mbedtls_x509_name *a = rdns[i];; a = a->next) {
            if (a != rdns[i])
                dn_put(&o, "+", 1);
            dn_attribute(&o, a);
            if (!a->next_merged || !a->next)
                break;
        }
    }
    return !o.full;
}

/* ---------------------------------------------------------------------------------------- */
/* the engine: configs                                                                        */

typedef struct own_cert {
    mbedtls_x509_crt crt;
    mbedtls_pk_context key;
    struct own_cert *next;
} own_cert;

struct nng_tls_engine_config {
    mbedtls_ssl_config conf;
    mbedtls_x509_crt ca;
    mbedtls_x509_crl crl;
    own_cert *certs;
    char *server_name;
    bool is_server;
};

static int os_random(void *unused, unsigned char *out, size_t len)
{
    (void)unused;
    while (len) {
        ssize_t n = getrandom(out, len, 0);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return MBEDTLS_ERR_SSL_INTERNAL_ERROR;
        }
        out += n;
        len -= (size_t)n;
    }
    return 0;
}

static int config_init(nng_tls_engine_config *c, nng_tls_mode mode)
{
    c->is_server = mode == NNG_TLS_MODE_SERVER;
    mbedtls_ssl_config_init(&c->conf);
    mbedtls_x509_crt_init(&c->ca);
    mbedtls_x509_crl_init(&c->crl);
    if (mbedtls_ssl_config_defaults(&c->conf,
                                    c->is_server ? MBEDTLS_SSL_IS_SERVER : MBEDTLS_SSL_IS_CLIENT,
                                    MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT))
        return NNG_ENOMEM;
    mbedtls_ssl_conf_rng(&c->conf, os_random, NULL);
    mbedtls_ssl_conf_min_version(&c->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
                                 MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_max_version(&c->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
                                 MBEDTLS_SSL_MINOR_VERSION_3);
    /* nng's defaults: a server asks nothing of its clients, a client verifies its server. */
    mbedtls_ssl_conf_authmode(&c->conf,
                              c->is_server ? MBEDTLS_SSL_VERIFY_NONE : MBEDTLS_SSL_VERIFY_REQUIRED);
    mbedtls_ssl_conf_ca_chain(&c->conf, &c->ca, NULL);
    return 0;
}

static void config_fini(nng_tls_engine_config *c)
{
    mbedtls_ssl_config_free(&c->conf);
    mbedtls_x509_crt_free(&c->ca);
    mbedtls_x509_crl_free(&c->crl);
    for (own_cert *o = c->certs, *next; o; o = next) {
        next = o->next;
        mbedtls_x509_crt_free(&o->crt);
        mbedtls_pk_free(&o->key);
        free(o);
    }
    free(c->server_name);
}

static int config_server_name(nng_tls_engine_config *c, const char *name)
{
    char *copy = strdup(name);

    if (!copy)
        return NNG_ENOMEM;
    free(c->server_name);
    c->server_name = copy;
    return 0;
}

static int config_auth(nng_tls_engine_config *c, nng_tls_auth_mode mode)
{
    switch (mode) {
    case NNG_TLS_AUTH_MODE_NONE:
        mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_NONE);
        return 0;
    case NNG_TLS_AUTH_MODE_OPTIONAL:
        mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_OPTIONAL);
        return 0;
    case NNG_TLS_AUTH_MODE_REQUIRED:
        mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
        return 0;
    }
    return NNG_EINVAL;
}

static int config_ca_chain(nng_tls_engine_config *c, const char *certs, const char *crl)
{
    if (mbedtls_x509_crt_parse(&c->ca, (const unsigned char *)certs, strlen(certs) + 1))
        return NNG_ECRYPTO;
    if (crl) {
        if (mbedtls_x509_crl_parse(&c->crl, (const unsigned char *)crl, strlen(crl) + 1))
            return NNG_ECRYPTO;
        mbedtls_ssl_conf_ca_chain(&c->conf, &c->ca, &c->crl);
    }
    return 0;
}

static int config_own_cert(nng_tls_engine_config *c, const char *cert, const char *key,
                           const char *pass)
{
    own_cert *o = calloc(1, sizeof *o);
    int rc = NNG_ECRYPTO;

    if (!o)
        return NNG_ENOMEM;
    mbedtls_x509_crt_init(&o->crt);
    mbedtls_pk_init(&o->key);
    if (!mbedtls_x509_crt_parse(&o->crt, (const unsigned char *)cert, strlen(cert) + 1) &&
        !mbedtls_pk_parse_key(&o->key, (const unsigned char *)key, strlen(key) + 1,
                              (const unsigned char *)pass, pass ? strlen(pass) : 0) &&
        !mbedtls_pk_check_pair(&o->crt.pk, &o->key) &&
        !mbedtls_ssl_conf_own_cert(&c->conf, &o->crt, &o->key)) {
        o->next = c->certs;
        c->certs = o;
        return 0;
    }
    mbedtls_x509_crt_free(&o->crt);
    mbedtls_pk_free(&o->key);
    free(o);
    return rc;
}

static int config_version(nng_tls_engine_config *c, nng_tls_version lo, nng_tls_version hi)
{
    /* mbed TLS 2.28 speaks up to TLS 1.2 (minor version 3); kq never goes below 1.2. */
    if (lo > NNG_TLS_1_2 || hi < NNG_TLS_1_2 || lo > hi)
        return NNG_ENOTSUP;
    (void)c;
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* the engine: connections                                                                    */

struct nng_tls_engine_conn {
    void *stream; /* nng's handle for the TCP stream below, for nng_tls_engine_send/recv */
    mbedtls_ssl_context ssl;
    int handshake_rc;      /* 0 until the handshake ends, then 1 (done) or an nng error */
    bool peer_verified;    /* the peer's certificate chains to the trust store */
    bool subject_too_long; /* verified, but its subject does not fit: no identity */
    char subject[KQ_TLS_SUBJECT_MAX + 1];
};

/* The buffer kq_tls_pipe_subject() armed on this thread, if any. */
static _Thread_local struct {
    char *buf;
    size_t cap;
    bool filled;
    int rc; /* 0, or why the subject cannot be given */
} subject_query;

static int bio_send(void *stream, const unsigned char *buf, size_t len)
{
    int rc = nng_tls_engine_send(stream, buf, &len);

    if (rc == NNG_EAGAIN)
        return MBEDTLS_ERR_SSL_WANT_WRITE;
    return rc ? MBEDTLS_ERR_NET_SEND_FAILED : (int)len;
}

static int bio_recv(void *stream, unsigned char *buf, size_t len)
{
    int rc = nng_tls_engine_recv(stream, buf, &len);

    if (rc == NNG_EAGAIN)
        return MBEDTLS_ERR_SSL_WANT_READ;
    return rc ? MBEDTLS_ERR_NET_RECV_FAILED : (int)len;
}

static int conn_init(nng_tls_engine_conn *ec, void *stream, nng_tls_engine_config *c)
{
    ec->stream = stream;
    mbedtls_ssl_init(&ec->ssl);
    if (mbedtls_ssl_setup(&ec->ssl, &c->conf) ||
        (c->server_name && mbedtls_ssl_set_hostname(&ec->ssl, c->server_name))) {
        mbedtls_ssl_free(&ec->ssl); /* nng calls fini too; freeing twice is harmless */
        return NNG_ENOMEM;
    }
    mbedtls_ssl_set_bio(&ec->ssl, stream, bio_send, bio_recv, NULL);
    return 0;
}

static void conn_fini(nng_tls_engine_conn *ec)
{
    mbedtls_ssl_free(&ec->ssl);
}

static void conn_close(nng_tls_engine_conn *ec)
{
    (void)mbedtls_ssl_close_notify(&ec->ssl);
}

/* Records who the peer is once the handshake is done: only a certificate the trust store
 * verified names anybody. */
static void conn_record_peer(nng_tls_engine_conn *ec)
{
    const mbedtls_x509_crt *peer = mbedtls_ssl_get_peer_cert(&ec->ssl);

    ec->peer_verified = peer && mbedtls_ssl_get_verify_result(&ec->ssl) == 0;
    if (ec->peer_verified && !dn_format(&peer->subject, ec->subject, sizeof ec->subject)) {
        ec->subject[0] = '\0';
        ec->subject_too_long = true;
    }
}

static int conn_handshake(nng_tls_engine_conn *ec)
{
    int rc;

    if (ec->handshake_rc)
        return ec->handshake_rc == 1 ? 0 : ec->handshake_rc;
    rc = mbedtls_ssl_handshake(&ec->ssl);
    if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE)
        return NNG_EAGAIN;
    if (rc == 0) {
        conn_record_peer(ec);
        ec->handshake_rc = 1;
        return 0;
    }
    ec->handshake_rc = rc == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED ? NNG_EPEERAUTH
                       : rc == MBEDTLS_ERR_NET_SEND_FAILED || rc == MBEDTLS_ERR_NET_RECV_FAILED
                           ? NNG_ECONNRESET
                           : NNG_ECRYPTO;
    return ec->handshake_rc;
}

static int conn_io_error(int rc)
{
    switch (rc) {
    case MBEDTLS_ERR_SSL_WANT_READ:
    case MBEDTLS_ERR_SSL_WANT_WRITE:
        return NNG_EAGAIN;
    case MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY:
    case MBEDTLS_ERR_SSL_CONN_EOF:
    case 0:
        return NNG_ECLOSED;
    case MBEDTLS_ERR_NET_SEND_FAILED:
    case MBEDTLS_ERR_NET_RECV_FAILED:
        return NNG_ECONNRESET;
    default:
        return NNG_ECRYPTO;
    }
}

static int conn_recv(nng_tls_engine_conn *ec, uint8_t *buf, size_t *len)
{
    int rc = mbedtls_ssl_read(&ec->ssl, buf, *len);

    if (rc <= 0)
        return conn_io_error(rc);
    *len = (size_t)rc;
    return 0;
}

static int conn_send(nng_tls_engine_conn *ec, const uint8_t *buf, size_t *len)
{
    int rc = mbedtls_ssl_write(&ec->ssl, buf, *len);

    if (rc <= 0)
        return conn_io_error(rc);
    *len = (size_t)rc;
    return 0;
}

static bool conn_verified(nng_tls_engine_conn *ec)
{
    bool verified = ec->handshake_rc == 1 && ec->peer_verified;

    if (subject_query.buf) {
        const char *subject = verified ? ec->subject : "";

        subject_query.filled = true;
        if (verified && ec->subject_too_long)
            subject_query.rc = NNG_EMSGSIZE;
        else if (strlen(subject) >= subject_query.cap)
            subject_query.rc = NNG_EINVAL; /* never a cut subject: a prefix may be another's */
        else
            memcpy(subject_query.buf, subject, strlen(subject) + 1);
    }
    return verified;
}

static nng_tls_engine_config_ops config_ops = {
    .size = sizeof(nng_tls_engine_config),
    .init = config_init,
    .fini = config_fini,
    .server = config_server_name,
    .auth = config_auth,
    .ca_chain = config_ca_chain,
    .own_cert = config_own_cert,
    .version = config_version,
};

static nng_tls_engine_conn_ops conn_ops = {
    .size = sizeof(nng_tls_engine_conn),
    .init = conn_init,
    .fini = conn_fini,
    .close = conn_close,
    .handshake = conn_handshake,
    .recv = conn_recv,
    .send = conn_send,
    .verified = conn_verified,
};

static nng_tls_engine engine = {
    .version = NNG_TLS_ENGINE_V1,
    .config_ops = &config_ops,
    .conn_ops = &conn_ops,
    .name = "kq-mbed",
    .description =
        "kq's engine on mbed TLS " MBEDTLS_VERSION_STRING ", keeping each peer's verified subject",
    .fips_mode = false,
};

/* ---------------------------------------------------------------------------------------- */
/* the public functions                                                                       */

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool installed;

int kq_tls_init(char *err, size_t errlen)
{
    int rc = 0;

    pthread_mutex_lock(&init_lock);
    if (!installed) {
        /* nng's first initialisation installs its own engine, so it must come first. */
        (void)nng_tls_engine_name();
        if (strncmp(nng_version(), "1.5.", 4) != 0) {
            snprintf(err, errlen,
                     "nng %s: kq's TLS engine needs nng 1.5.x (the engine interface changed in "
                     "1.6)",
                     nng_version());
            rc = -1;
        } else if ((rc = nng_tls_engine_register(&engine)) != 0) {
            snprintf(err, errlen, "registering kq's TLS engine with nng: %s", nng_strerror(rc));
            rc = -1;
        } else {
            installed = true;
        }
    }
    pthread_mutex_unlock(&init_lock);
    return rc;
}

int kq_tls_pipe_subject(nng_pipe p, char *buf, size_t cap)
{
    bool verified = false;
    int rc;

    if (!cap)
        return NNG_EINVAL;
    buf[0] = '\0';
    subject_query.buf = buf;
    subject_query.cap = cap;
    subject_query.filled = false;
    subject_query.rc = 0;
    rc = nng_pipe_get_bool(p, NNG_OPT_TLS_VERIFIED, &verified);
    if (!rc && !subject_query.filled)
        rc = NNG_ENOTSUP; /* a TLS pipe of another engine: it cannot say who the peer is */
    if (!rc)
        rc = subject_query.rc;
    subject_query.buf = NULL;
    if (rc || !verified)
        buf[0] = '\0';
    return rc;
}

/* Reads a whole file into a NUL-terminated buffer the caller frees; NULL with err set. */
static char *read_pem(const char *key, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;

    if (!f) {
        snprintf(err, errlen, "%s %s: %s", key, path, strerror(errno));
        return NULL;
    }
    for (;;) {
        if (cap - len < 4097) {
            char *bigger = cap > (64u << 20) ? NULL : realloc(buf, cap = cap * 2 + 8192);

            if (!bigger) {
                snprintf(err, errlen, "%s %s: larger than 64 MiB or out of memory", key, path);
                goto fail;
            }
            buf = bigger;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);

        len += n;
        if (n == 0)
            break;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "%s %s: read error", key, path);
        goto fail;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
fail:
    fclose(f);
    free(buf);
    return NULL;
}

static void tls_error(char *err, size_t errlen, const char *what, int mbedtls_rc)
{
    char why[160];

    mbedtls_strerror(mbedtls_rc, why, sizeof why);
    snprintf(err, errlen, "%s: %s", what, why);
}

/* Checks the keystore holds a certificate and the private key that matches it. */
static int check_keystore(const kq_tls_settings *s, const char *pem, char *err, size_t errlen)
{
    mbedtls_x509_crt crt;
    mbedtls_pk_context key;
    const char *pass = s->key_password;
    char what[800];
    int rc;

    mbedtls_x509_crt_init(&crt);
    mbedtls_pk_init(&key);
    if ((rc = mbedtls_x509_crt_parse(&crt, (const unsigned char *)pem, strlen(pem) + 1)) != 0 ||
        !crt.raw.p) {
        snprintf(what, sizeof what, "ssl.keystore.location %s: no certificate", s->keystore);
        tls_error(err, errlen, what, rc < 0 ? rc : MBEDTLS_ERR_X509_INVALID_FORMAT);
        rc = -1;
    } else if ((rc = mbedtls_pk_parse_key(&key, (const unsigned char *)pem, strlen(pem) + 1,
                                          (const unsigned char *)pass, pass ? strlen(pass) : 0))) {
        snprintf(what, sizeof what, "ssl.keystore.location %s: %s", s->keystore,
                 rc == MBEDTLS_ERR_PK_PASSWORD_REQUIRED   ? "the private key is encrypted and "
                                                            "ssl.key.password is not set"
                 : rc == MBEDTLS_ERR_PK_PASSWORD_MISMATCH ? "ssl.key.password does not decrypt "
                                                            "the private key"
                 : rc == MBEDTLS_ERR_PKCS5_FEATURE_UNAVAILABLE
                     ? "the private key is encrypted in a way mbed TLS 2.28 cannot read "
                       "(openssl 3's default PKCS#8 with AES); re-encrypt it with 'openssl pkey "
                       "-traditional -aes256'"
                     : "no usable private key");
        tls_error(err, errlen, what, rc);
        rc = -1;
    } else if ((rc = mbedtls_pk_check_pair(&crt.pk, &key))) {
        snprintf(what, sizeof what,
                 "ssl.keystore.location %s: the private key does not belong to the first "
                 "certificate",
                 s->keystore);
        tls_error(err, errlen, what, rc);
        rc = -1;
    }
    mbedtls_x509_crt_free(&crt);
    mbedtls_pk_free(&key);
    return rc;
}

static int check_truststore(const kq_tls_settings *s, const char *pem, char *err, size_t errlen)
{
    mbedtls_x509_crt ca;
    int rc;

    mbedtls_x509_crt_init(&ca);
    rc = mbedtls_x509_crt_parse(&ca, (const unsigned char *)pem, strlen(pem) + 1);
    if (rc > 0) {
        snprintf(err, errlen, "ssl.truststore.location %s: %d of its certificates cannot be read",
                 s->truststore, rc);
        rc = -1;
    } else if (rc < 0 || !ca.raw.p) {
        char what[600];

        snprintf(what, sizeof what, "ssl.truststore.location %s: no CA certificate", s->truststore);
        tls_error(err, errlen, what, rc < 0 ? rc : MBEDTLS_ERR_X509_INVALID_FORMAT);
        rc = -1;
    } else {
        rc = 0;
    }
    mbedtls_x509_crt_free(&ca);
    return rc;
}

int kq_tls_config_new(const kq_tls_settings *s, bool server, nng_tls_config **out, char *err,
                      size_t errlen)
{
    nng_tls_config *c = NULL;
    char *keystore = NULL, *truststore = NULL;
    int rc = -1, nrc;

    *out = NULL;
    if (kq_tls_init(err, errlen))
        return -1;
    if (!s->keystore || !s->truststore) {
        snprintf(err, errlen, "TLS needs %s",
                 !s->keystore ? "ssl.keystore.location" : "ssl.truststore.location");
        return -1;
    }
    if (!(keystore = read_pem("ssl.keystore.location", s->keystore, err, errlen)) ||
        check_keystore(s, keystore, err, errlen) ||
        !(truststore = read_pem("ssl.truststore.location", s->truststore, err, errlen)) ||
        check_truststore(s, truststore, err, errlen))
        goto out;
    if ((nrc = nng_tls_config_alloc(&c, server ? NNG_TLS_MODE_SERVER : NNG_TLS_MODE_CLIENT)) ||
        (nrc = nng_tls_config_version(c, NNG_TLS_1_2, NNG_TLS_1_2)) ||
        (nrc = nng_tls_config_own_cert(c, keystore, keystore, s->key_password)) ||
        (nrc = nng_tls_config_ca_chain(c, truststore, NULL)) ||
        (nrc = nng_tls_config_auth_mode(c, !server || s->client_auth == KQ_TLS_CLIENT_AUTH_REQUIRED
                                               ? NNG_TLS_AUTH_MODE_REQUIRED
                                           : s->client_auth == KQ_TLS_CLIENT_AUTH_REQUESTED
                                               ? NNG_TLS_AUTH_MODE_OPTIONAL
                                               : NNG_TLS_AUTH_MODE_NONE))) {
        snprintf(err, errlen, "TLS config from %s and %s: %s", s->keystore, s->truststore,
                 nng_strerror(nrc));
        goto out;
    }
    *out = c;
    c = NULL;
    rc = 0;
out:
    if (c)
        nng_tls_config_free(c);
    free(keystore);
    free(truststore);
    return rc;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's civil algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

    return era * 146097 + doe - 719468;
}

static int64_t unix_time(const mbedtls_x509_time *t)
{
    return days_from_civil(t->year, t->mon, t->day) * 86400 + t->hour * 3600 + t->min * 60 + t->sec;
}

int kq_tls_earliest_expiry(const char *pem_path, int64_t *not_after, char *err, size_t errlen)
{
    char *pem = read_pem("certificate", pem_path, err, errlen);
    mbedtls_x509_crt crt;
    int rc;

    if (!pem)
        return -1;
    mbedtls_x509_crt_init(&crt);
    rc = mbedtls_x509_crt_parse(&crt, (const unsigned char *)pem, strlen(pem) + 1);
    if (rc < 0 || !crt.raw.p) {
        snprintf(err, errlen, "%s: no certificate", pem_path);
        rc = -1;
    } else {
        *not_after = INT64_MAX;
        for (const mbedtls_x509_crt *c = &crt; c && c->raw.p; c = c->next)
            if (unix_time(&c->valid_to) < *not_after)
                *not_after = unix_time(&c->valid_to);
        rc = 0;
    }
    mbedtls_x509_crt_free(&crt);
    free(pem);
    return rc;
}

int kq_tls_cert_describe(const char *pem_path, char *subject, size_t cap, int64_t *not_after,
                         char *err, size_t errlen)
{
    char *pem = read_pem("certificate", pem_path, err, errlen);
    mbedtls_x509_crt crt;
    int rc;

    if (!pem)
        return -1;
    mbedtls_x509_crt_init(&crt);
    rc = mbedtls_x509_crt_parse(&crt, (const unsigned char *)pem, strlen(pem) + 1);
    if (rc < 0 || !crt.raw.p) {
        char what[600];

        snprintf(what, sizeof what, "%s: no certificate", pem_path);
        tls_error(err, errlen, what, rc < 0 ? rc : MBEDTLS_ERR_X509_INVALID_FORMAT);
        rc = -1;
    } else if (subject && !dn_format(&crt.subject, subject, cap)) {
        snprintf(err, errlen, "%s: the certificate's subject is longer than %zu bytes", pem_path,
                 cap - 1);
        rc = -1;
    } else {
        *not_after = unix_time(&crt.valid_to);
        rc = 0;
    }
    mbedtls_x509_crt_free(&crt);
    free(pem);
    return rc;
}
