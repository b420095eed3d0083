/* Command-line argument helpers of the kq tool. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq_tools.h"

bool kq_tools_parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (s == NULL || *s == '\0')
        return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
        return false;
    if (v < min || v > max)
        return false;
    *out = v;
    return true;
}

/* One "host:port" or "[v6]:port" entry of length len. */
static int parse_one(const char *s, size_t len, kq_tools_addr *a, char *errbuf, size_t errlen)
{
    char entry[300];
    if (len == 0 || len >= sizeof entry) {
        snprintf(errbuf, errlen, "'%.*s' is not host:port", (int)(len > 64 ? 64 : len), s);
        return KQ_ERR_CONFIG;
    }
    memcpy(entry, s, len);
    entry[len] = '\0';

    const char *host = entry;
    size_t host_len;
    const char *port_str;
    if (entry[0] == '[') {
        char *close = strchr(entry, ']');
        if (close == NULL || close[1] != ':') {
            snprintf(errbuf, errlen, "'%s' is not [ipv6]:port", entry);
            return KQ_ERR_CONFIG;
        }
        host = entry + 1;
        host_len = (size_t)(close - host);
        port_str = close + 2;
    } else {
        char *colon = strrchr(entry, ':');
        if (colon == NULL || strchr(entry, ':') != colon) {
            snprintf(errbuf, errlen, "'%s' is not host:port", entry);
            return KQ_ERR_CONFIG;
        }
        host_len = (size_t)(colon - entry);
        port_str = colon + 1;
    }
    int64_t port;
    if (host_len == 0 || host_len >= sizeof a->host) {
        snprintf(errbuf, errlen, "'%s' has no host (expected host:port)", entry);
        return KQ_ERR_CONFIG;
    }
    if (!kq_tools_parse_int(port_str, 1, 65535, &port)) {
        snprintf(errbuf, errlen, "'%s': port must be an integer in [1, 65535]", entry);
        return KQ_ERR_CONFIG;
    }
    memcpy(a->host, host, host_len);
    a->host[host_len] = '\0';
    a->port = (int)port;
    return 0;
}

int kq_tools_parse_addrs(const char *list, kq_tools_addr *out, int max, int *n, char *errbuf,
                         size_t errlen)
{
    *n = 0;
    if (list == NULL || *list == '\0') {
        snprintf(errbuf, errlen, "empty address list (expected host:port[,host:port...])");
        return KQ_ERR_CONFIG;
    }
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        /* Trim surrounding blanks ("a:1, b:2"). */
        while (len > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (*n >= max) {
            snprintf(errbuf, errlen, "too many addresses (at most %d)", max);
            return KQ_ERR_CONFIG;
        }
        int rc = parse_one(p, len, &out[*n], errbuf, errlen);
        if (rc != 0)
            return rc;
        (*n)++;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    return 0;
}

void kq_tools_format_addr(const kq_tools_addr *a, char *out, size_t outlen)
{
    if (strchr(a->host, ':') != NULL)
        snprintf(out, outlen, "[%s]:%d", a->host, a->port);
    else
        snprintf(out, outlen, "%s:%d", a->host, a->port);
}

void kq_tools_errorf(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "Error: %s\n", msg);
}

int kq_tools_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "kq %s: %s\n", cmd, msg);
    if (usage != NULL)
        fputs(usage, stderr);
    return KQ_EXIT_USAGE;
}

const char *kq_tools_bad_option(char **argv, char *buf, size_t buflen)
{
    if (optopt > 0 && optopt < 128 && isalnum(optopt)) {
        snprintf(buf, buflen, "-%c", optopt);
        return buf;
    }
    snprintf(buf, buflen, "%s", optind > 0 ? argv[optind - 1] : "?");
    return buf;
}
