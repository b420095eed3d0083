/*
 * kq_tools: --command-config FILE, the client properties every kq command that connects takes
 * (Kafka's keys: security.protocol, ssl.keystore.*, ssl.key.password, ssl.truststore.*).
 * With security.protocol=SSL the process's TLS identity is set from the file and every
 * connection the command makes is tls+tcp://. See kq_tools.h.
 */
#include <stdio.h>
#include <strings.h>

#include "kq/config.h"
#include "kq/rpc.h"
#include "kq_tools.h"

static bool use_tls;

bool kq_tools_tls(void)
{
    return use_tls;
}

const char *kq_tools_scheme(void)
{
    return kq_protocol_scheme(use_tls ? KQ_SECURITY_SSL : KQ_SECURITY_PLAINTEXT);
}

int kq_tools_command_config(const char *path, char *errbuf, size_t errlen)
{
    static kq_ssl_config ssl; /* the process's identity: kept for its whole life */
    kq_config *c = NULL;
    const char *proto = NULL;
    char why[1024] = "";
    int rc = kq_config_load(path, &c, why, sizeof why);

    if (rc == 0 && (rc = kq_config_string(c, "security.protocol", "PLAINTEXT", &proto, why,
                                          sizeof why)) == 0) {
        if (!strcasecmp(proto, "SSL")) {
            use_tls = true;
        } else if (strcasecmp(proto, "PLAINTEXT") != 0) {
            snprintf(why, sizeof why, "security.protocol: '%s' is not PLAINTEXT or SSL%s", proto,
                     !strncasecmp(proto, "SASL", 4) ? " (kq has no SASL)" : "");
            rc = KQ_ERR_CONFIG;
        }
    }
    if (rc == 0)
        rc = kq_config_ssl(c, use_tls, &ssl, why, sizeof why);
    if (rc == 0 && use_tls)
        rc = kq_rpc_set_tls_config(&ssl, why, sizeof why);
    kq_config_free(c);
    if (rc != 0) {
        use_tls = false;
        snprintf(errbuf, errlen, "--command-config %s: %s", path, why);
    }
    return rc;
}
