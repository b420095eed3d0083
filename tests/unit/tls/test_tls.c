/* kq_tls: subjects in RFC 2253 form, named errors for bad keystores and truststores, and the
 * verified subject of each peer over real mutual-TLS REQ/REP connections on loopback, with
 * certificates made by deploy/tls/make-certs.sh and openssl. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "kq/tls.h"
#include "test_certs.h"

static char dir[256];

/* odd.pem's subject as Java's X500Principal.getName() gives it: reversed, '#', '=' and ','
 * escaped, the trailing space escaped, emailAddress (no keyword) as the hex of its DER. */
#define ODD_SUBJECT                                                                                \
    "1.2.840.113549.1.9.1=#1603614062,CN=\\#node 7\\ ,OU=a\\=b+UID=b3,O=kq\\, Inc.,C=US"

static void sh(const char *cmd)
{
    if (tc_sh("%s", cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

static const char *path(const char *name)
{
    return tc_path(dir, name);
}

static int make_certs(void **state)
{
    char cmd[2048];

    (void)state;
    if (tc_make(dir, sizeof dir, "node-1 node-2", "node-1"))
        return -1;
    /* A subject with several RDNs, a comma to escape and a multi-valued RDN. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
             "-subj '/C=US/O=kq, Inc./OU=a=b+UID=b3/CN=#node 7 /emailAddress=a@b' -multivalue-rdn "
             "-keyout odd.key -out odd.csr 2>/dev/null && openssl x509 -req -in odd.csr -CA "
             "ca.pem -CAkey ca.key -days 30 -out odd.crt 2>/dev/null && cat odd.crt odd.key > "
             "odd.pem",
             dir);
    sh(cmd);
    /* node-1's key encrypted with a password (traditional PEM encryption, which mbed TLS 2.28
     * reads, and openssl 3's default PKCS#8, which it does not), and node-1's certificate
     * with node-2's key. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && openssl x509 -in node-1.pem -out node-1.crt && openssl pkey -in "
             "node-1.pem -traditional -aes256 -passout pass:s3cret -out enc.key && cat "
             "node-1.crt enc.key > node-1-enc.pem && openssl pkey -in node-1.pem -aes256 "
             "-passout pass:s3cret -out enc3.key && cat node-1.crt enc3.key > node-1-enc3.pem "
             "&& openssl pkey -in node-2.pem -out node-2.key && cat node-1.crt node-2.key > "
             "mixed.pem && echo 'not a certificate' > junk.pem",
             dir);
    sh(cmd);
    /* a subject longer than KQ_TLS_SUBJECT_MAX: ten 60-character OUs */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && s=/CN=long && for i in 0 1 2 3 4 5 6 7 8 9; do "
             "s=\"$s/OU=$(printf '%%060d' $i)\"; done && openssl req -new -newkey ec -pkeyopt "
             "ec_paramgen_curve:P-256 -nodes -subj \"$s\" -keyout long.key -out long.csr "
             "2>/dev/null && openssl x509 -req -in long.csr -CA ca.pem -CAkey ca.key -days 30 "
             "-out long.crt 2>/dev/null && cat long.crt long.key > long.pem",
             dir);
    sh(cmd);
    return 0;
}

static int remove_certs(void **state)
{
    (void)state;
    tc_remove(dir);
    return 0;
}

static void test_subjects_are_rfc2253(void **state)
{
    char subject[KQ_TLS_SUBJECT_MAX + 1], err[512] = "";
    int64_t not_after = 0, now = (int64_t)time(NULL);

    (void)state;
    assert_int_equal(kq_tls_cert_describe(path("node-1.pem"), subject, sizeof subject, &not_after,
                                          err, sizeof err),
                     0);
    assert_string_equal(subject, "CN=node-1");
    /* make-certs.sh signs for 825 days */
    assert_in_range(not_after, now + 824 * 86400LL, now + 826 * 86400LL);

    assert_int_equal(
        kq_tls_cert_describe(path("odd.pem"), subject, sizeof subject, &not_after, err, sizeof err),
        0);
    assert_string_equal(subject, ODD_SUBJECT);
    assert_in_range(not_after, now + 29 * 86400LL, now + 31 * 86400LL);

    /* too small a buffer is an error, not a cut subject */
    assert_int_equal(
        kq_tls_cert_describe(path("odd.pem"), subject, 10, &not_after, err, sizeof err), -1);
    assert_non_null(strstr(err, "longer than 9 bytes"));
    assert_int_equal(kq_tls_cert_describe(path("junk.pem"), NULL, 0, &not_after, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "junk.pem: no certificate"));
}

static void expect_config_error(const char *keystore, const char *password, const char *truststore,
                                const char *want)
{
    kq_tls_settings s = {keystore, password, truststore, KQ_TLS_CLIENT_AUTH_REQUIRED};
    nng_tls_config *c = (nng_tls_config *)&s;
    char err[1024] = "";

    assert_int_equal(kq_tls_config_new(&s, true, &c, err, sizeof err), -1);
    assert_null(c);
    if (!strstr(err, want))
        fail_msg("expected an error containing '%s', got '%s'", want, err);
}

static void test_bad_files_are_named(void **state)
{
    kq_tls_settings s = {path("node-1-enc.pem"), "s3cret", path("ca.pem"),
                         KQ_TLS_CLIENT_AUTH_REQUIRED};
    nng_tls_config *c = NULL;
    char err[1024] = "";

    (void)state;
    assert_int_equal(kq_tls_config_new(&s, true, &c, err, sizeof err), 0);
    assert_non_null(c);
    nng_tls_config_free(c);
    expect_config_error(path("missing.pem"), NULL, path("ca.pem"), "ssl.keystore.location");
    expect_config_error(path("missing.pem"), NULL, path("ca.pem"), "No such file or directory");
    expect_config_error(path("node-1.pem"), NULL, path("missing.pem"), "ssl.truststore.location");
    expect_config_error(path("node-1.crt"), NULL, path("ca.pem"), "no usable private key");
    expect_config_error(path("node-2.key"), NULL, path("ca.pem"), "no certificate");
    expect_config_error(path("mixed.pem"), NULL, path("ca.pem"),
                        "does not belong to the first certificate");
    expect_config_error(path("node-1-enc.pem"), NULL, path("ca.pem"),
                        "ssl.key.password is not set");
    expect_config_error(path("node-1-enc.pem"), "wrong", path("ca.pem"),
                        "ssl.key.password does not decrypt");
    expect_config_error(path("node-1-enc3.pem"), "s3cret", path("ca.pem"),
                        "openssl pkey -traditional -aes256");
    expect_config_error(path("node-1.pem"), NULL, path("junk.pem"), "no CA certificate");
    expect_config_error(NULL, NULL, path("ca.pem"), "TLS needs ssl.keystore.location");
}

/* ---- real connections ------------------------------------------------------------------ */

typedef struct server {
    nng_socket sock;
    nng_listener l;
    char url[64];
} server;

static void server_start(server *sv, const char *keystore, kq_tls_client_auth auth)
{
    kq_tls_settings s = {path(keystore), NULL, path("ca.pem"), auth};
    nng_tls_config *c;
    char err[512] = "";
    int port = 0;

    assert_int_equal(kq_tls_config_new(&s, true, &c, err, sizeof err), 0);
    assert_int_equal(nng_rep0_open(&sv->sock), 0);
    assert_int_equal(nng_socket_set_ms(sv->sock, NNG_OPT_RECVTIMEO, 3000), 0);
    assert_int_equal(nng_listener_create(&sv->l, sv->sock, "tls+tcp://127.0.0.1:0"), 0);
    assert_int_equal(nng_listener_set_ptr(sv->l, NNG_OPT_TLS_CONFIG, c), 0);
    assert_int_equal(nng_listener_start(sv->l, 0), 0);
    nng_tls_config_free(c); /* the listener holds its own reference */
    assert_int_equal(nng_listener_get_int(sv->l, NNG_OPT_TCP_BOUND_PORT, &port), 0);
    snprintf(sv->url, sizeof sv->url, "tls+tcp://127.0.0.1:%d", port);
}

/* A REQ client with the given keystore (NULL: no certificate at all) and trust store. */
static int client_open(nng_socket *sock, const char *url, const char *keystore,
                       const char *truststore)
{
    nng_tls_config *c;
    nng_dialer d;
    char err[512] = "";
    int rc;

    if (keystore) {
        kq_tls_settings s = {path(keystore), NULL, path(truststore), KQ_TLS_CLIENT_AUTH_NONE};

        assert_int_equal(kq_tls_config_new(&s, false, &c, err, sizeof err), 0);
    } else {
        assert_int_equal(kq_tls_init(err, sizeof err), 0);
        assert_int_equal(nng_tls_config_alloc(&c, NNG_TLS_MODE_CLIENT), 0);
        assert_int_equal(nng_tls_config_ca_file(c, path(truststore)), 0);
    }
    assert_int_equal(nng_req0_open(sock), 0);
    assert_int_equal(nng_socket_set_ms(*sock, NNG_OPT_RECVTIMEO, 1500), 0);
    assert_int_equal(nng_dialer_create(&d, *sock, url), 0);
    assert_int_equal(nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, c), 0);
    nng_tls_config_free(c);
    rc = nng_dialer_start(d, 0);
    return rc;
}

/* Sends "who" from the client; the server answers with the subject it sees on the request's
 * pipe. Returns 0 with the server's answer in seen, or the nng error the client got. */
static int ask(nng_socket cli, server *sv, char *seen, size_t cap, char *server_subject,
               size_t server_cap)
{
    nng_msg *m;
    char subject[KQ_TLS_SUBJECT_MAX + 1];
    int rc;

    if ((rc = nng_send(cli, "who", 3, 0)) != 0)
        return rc;
    if (nng_recvmsg(sv->sock, &m, 0) == 0) {
        char small[4];
        int src = kq_tls_pipe_subject(nng_msg_get_pipe(m), subject, sizeof subject);

        assert_int_equal(src, 0);
        /* a subject that does not fit is an error, never a prefix */
        assert_int_equal(kq_tls_pipe_subject(nng_msg_get_pipe(m), small, sizeof small),
                         strlen(subject) < sizeof small ? 0 : NNG_EINVAL);
        nng_msg_clear(m);
        assert_int_equal(nng_msg_append(m, subject, strlen(subject) + 1), 0);
        assert_int_equal(nng_sendmsg(sv->sock, m, 0), 0);
    }
    if ((rc = nng_recvmsg(cli, &m, 0)) != 0)
        return rc;
    snprintf(seen, cap, "%s", (const char *)nng_msg_body(m));
    if (server_subject)
        assert_int_equal(kq_tls_pipe_subject(nng_msg_get_pipe(m), server_subject, server_cap), 0);
    nng_msg_free(m);
    return 0;
}

static void test_each_peer_is_known_by_its_certificate(void **state)
{
    server sv;
    nng_socket a, b;
    char seen[KQ_TLS_SUBJECT_MAX + 1], theirs[KQ_TLS_SUBJECT_MAX + 1];

    (void)state;
    server_start(&sv, "node-2.pem", KQ_TLS_CLIENT_AUTH_REQUIRED);
    assert_int_equal(client_open(&a, sv.url, "node-1.pem", "ca.pem"), 0);
    assert_int_equal(client_open(&b, sv.url, "odd.pem", "ca.pem"), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ask(a, &sv, seen, sizeof seen, theirs, sizeof theirs), 0);
        assert_string_equal(seen, "CN=node-1");
        assert_string_equal(theirs, "CN=node-2"); /* the client knows whom it reached */
        assert_int_equal(ask(b, &sv, seen, sizeof seen, NULL, 0), 0);
        assert_string_equal(seen, ODD_SUBJECT);
    }
    nng_close(a);
    nng_close(b);
    nng_close(sv.sock);
}

static void test_clients_without_a_trusted_certificate_get_nothing(void **state)
{
    server sv;
    nng_socket c;
    char seen[64] = "";

    (void)state;
    server_start(&sv, "node-2.pem", KQ_TLS_CLIENT_AUTH_REQUIRED);
    /* a certificate from another CA, with the same subject */
    if (client_open(&c, sv.url, "other/node-1.pem", "ca.pem") == 0)
        assert_int_not_equal(ask(c, &sv, seen, sizeof seen, NULL, 0), 0);
    nng_close(c);
    /* no certificate */
    if (client_open(&c, sv.url, NULL, "ca.pem") == 0)
        assert_int_not_equal(ask(c, &sv, seen, sizeof seen, NULL, 0), 0);
    nng_close(c);
    assert_string_equal(seen, "");
    /* a client that does not trust the server's CA does not talk to it either */
    if (client_open(&c, sv.url, "node-1.pem", "other/ca.pem") == 0)
        assert_int_not_equal(ask(c, &sv, seen, sizeof seen, NULL, 0), 0);
    nng_close(c);
    assert_string_equal(seen, "");
    /* and the server still serves a good client */
    assert_int_equal(client_open(&c, sv.url, "node-1.pem", "ca.pem"), 0);
    assert_int_equal(ask(c, &sv, seen, sizeof seen, NULL, 0), 0);
    assert_string_equal(seen, "CN=node-1");
    nng_close(c);
    nng_close(sv.sock);
}

static void test_requested_client_auth_serves_anonymous_clients_as_nobody(void **state)
{
    server sv;
    nng_socket c;
    char seen[64] = "x";

    (void)state;
    server_start(&sv, "node-2.pem", KQ_TLS_CLIENT_AUTH_REQUESTED);
    assert_int_equal(client_open(&c, sv.url, NULL, "ca.pem"), 0);
    assert_int_equal(ask(c, &sv, seen, sizeof seen, NULL, 0), 0);
    assert_string_equal(seen, "");
    nng_close(c);
    assert_int_equal(client_open(&c, sv.url, "node-1.pem", "ca.pem"), 0);
    assert_int_equal(ask(c, &sv, seen, sizeof seen, NULL, 0), 0);
    assert_string_equal(seen, "CN=node-1");
    nng_close(c);
    nng_close(sv.sock);
}

static void test_a_subject_too_long_identifies_nobody(void **state)
{
    server sv;
    nng_socket c;
    nng_msg *m;
    char subject[KQ_TLS_SUBJECT_MAX + 1] = "x";

    (void)state;
    server_start(&sv, "node-2.pem", KQ_TLS_CLIENT_AUTH_REQUIRED);
    assert_int_equal(client_open(&c, sv.url, "long.pem", "ca.pem"), 0);
    assert_int_equal(nng_send(c, "who", 3, 0), 0);
    assert_int_equal(nng_recvmsg(sv.sock, &m, 0), 0);
    /* verified, but kq cannot say who it is: an error the listener refuses the pipe on */
    assert_int_equal(kq_tls_pipe_subject(nng_msg_get_pipe(m), subject, sizeof subject),
                     NNG_EMSGSIZE);
    assert_string_equal(subject, "");
    nng_msg_free(m);
    nng_close(c);
    nng_close(sv.sock);
}

static void test_plain_tcp_pipes_have_no_subject(void **state)
{
    nng_socket srv, cli;
    nng_listener l;
    nng_msg *m;
    char url[64], subject[64] = "x";
    int port;

    (void)state;
    assert_int_equal(nng_rep0_open(&srv), 0);
    assert_int_equal(nng_listener_create(&l, srv, "tcp://127.0.0.1:0"), 0);
    assert_int_equal(nng_listener_start(l, 0), 0);
    assert_int_equal(nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port), 0);
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    assert_int_equal(nng_req0_open(&cli), 0);
    assert_int_equal(nng_dial(cli, url, NULL, 0), 0);
    assert_int_equal(nng_send(cli, "who", 3, 0), 0);
    assert_int_equal(nng_recvmsg(srv, &m, 0), 0);
    assert_int_equal(kq_tls_pipe_subject(nng_msg_get_pipe(m), subject, sizeof subject),
                     NNG_ENOTSUP);
    assert_string_equal(subject, "");
    nng_msg_free(m);
    nng_close(cli);
    nng_close(srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_subjects_are_rfc2253),
        cmocka_unit_test(test_bad_files_are_named),
        cmocka_unit_test(test_each_peer_is_known_by_its_certificate),
        cmocka_unit_test(test_clients_without_a_trusted_certificate_get_nothing),
        cmocka_unit_test(test_requested_client_auth_serves_anonymous_clients_as_nobody),
        cmocka_unit_test(test_a_subject_too_long_identifies_nobody),
        cmocka_unit_test(test_plain_tcp_pipes_have_no_subject),
    };

    return cmocka_run_group_tests(tests, make_certs, remove_certs);
}
