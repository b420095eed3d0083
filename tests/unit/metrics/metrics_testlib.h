/*
 * Helpers shared by the kq_metrics unit tests (header-only, static functions): a plain-socket
 * HTTP/1.1 client, a port blocker, and small string helpers.
 *
 * Ownership: an mt_resp owns its malloc'd raw buffer; release it with mt_resp_free. The
 * header and body pointers point into that buffer.
 */
#ifndef KQ_METRICS_TESTLIB_H
#define KQ_METRICS_TESTLIB_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "kq/error.h"
#include "kq/metrics.h"

/* Generous socket timeout: only bounds a hang, never a pass/fail latency threshold. */
#define MT_WAIT_S 30

typedef struct mt_resp {
    int status; /* -1 when no HTTP status line came back */
    char *raw;  /* whole response, NUL-terminated */
    size_t raw_len;
    const char *head; /* start of the header block (inside raw) */
    const char *body; /* start of the body (inside raw) */
    size_t body_len;
} mt_resp;

static inline void mt_resp_free(mt_resp *r)
{
    free(r->raw);
    memset(r, 0, sizeof(*r));
}

static inline int mt_connect(int port)
{
    struct sockaddr_in sa;
    struct timeval tv = {.tv_sec = MT_WAIT_S, .tv_usec = 0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static inline bool mt_send_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n <= 0)
            return false;
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

/* Value of header `name` in r (copied into out), or false. */
static inline bool mt_header(const mt_resp *r, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    const char *p;

    if (r->head == NULL)
        return false;
    for (p = r->head; p != NULL && p < r->body; p = strstr(p, "\r\n")) {
        if (p[0] == '\r')
            p += 2;
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1, *e;
            while (*v == ' ')
                v++;
            e = strstr(v, "\r\n");
            if (e == NULL)
                return false;
            snprintf(out, outlen, "%.*s", (int)(e - v), v);
            return true;
        }
    }
    return false;
}

/* Sends `method path` (HTTP/1.1, Connection: close) and reads the whole response. Returns 0
 * or -1 if the connection failed before a response arrived. */
static inline int mt_request(int port, const char *method, const char *path, mt_resp *r)
{
    char req[512];
    size_t cap = 4096;
    int fd, n;
    const char *hdr_end;
    char cl[32];

    memset(r, 0, sizeof(*r));
    r->status = -1;
    fd = mt_connect(port);
    if (fd < 0)
        return -1;
    n = snprintf(req, sizeof(req),
                 "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s\r\n", method, path,
                 strcmp(method, "POST") == 0 ? "Content-Length: 0\r\n" : "");
    if (!mt_send_all(fd, req, (size_t)n)) {
        close(fd);
        return -1;
    }
    r->raw = malloc(cap);
    if (r->raw == NULL) {
        close(fd);
        return -1;
    }
    for (;;) {
        ssize_t got;

        if (r->raw_len + 1 >= cap) {
            char *np = realloc(r->raw, cap * 2);
            if (np == NULL)
                break;
            r->raw = np;
            cap *= 2;
        }
        got = recv(fd, r->raw + r->raw_len, cap - r->raw_len - 1, 0);
        if (got <= 0)
            break;
        r->raw_len += (size_t)got;
        r->raw[r->raw_len] = '\0';
        /* stop once headers and Content-Length bytes are in (server may keep the socket) */
        hdr_end = strstr(r->raw, "\r\n\r\n");
        if (hdr_end != NULL) {
            mt_resp tmp = {.head = r->raw, .body = hdr_end + 4};
            if (strcmp(method, "HEAD") == 0)
                break;
            if (mt_header(&tmp, "Content-Length", cl, sizeof(cl)) &&
                r->raw_len >= (size_t)(hdr_end + 4 - r->raw) + strtoul(cl, NULL, 10))
                break;
        }
    }
    close(fd);
    r->raw[r->raw_len] = '\0';
    if (r->raw_len == 0)
        return -1;
    if (sscanf(r->raw, "HTTP/1.%*d %d", &r->status) != 1)
        r->status = -1;
    hdr_end = strstr(r->raw, "\r\n\r\n");
    r->head = strstr(r->raw, "\r\n");
    if (hdr_end != NULL) {
        r->body = hdr_end + 4;
        r->body_len = r->raw_len - (size_t)(r->body - r->raw);
    } else {
        r->body = r->raw + r->raw_len;
    }
    return 0;
}

/* A listening socket on 127.0.0.1 at a kernel-chosen port (to make a port busy). */
static inline int mt_listen_any(int *port)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 4) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

/* Number of non-overlapping occurrences of needle in hay. */
static inline int mt_count(const char *hay, const char *needle)
{
    int n = 0;
    size_t nl = strlen(needle);

    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + nl, needle))
        n++;
    return n;
}

/* The text after the two built-in families (kq_build_info, process_start_time_seconds). */
static inline const char *mt_after_builtins(const char *text)
{
    const char *p = strstr(text, "\nprocess_start_time_seconds ");

    if (p == NULL)
        return NULL;
    p = strchr(p + 1, '\n');
    return p ? p + 1 : NULL;
}

#endif
