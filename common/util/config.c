/*
 * kq_config: Java .properties parsing, typed getters with Kafka-style messages, and the
 * voters / listener / host:port parsers.
 */
#include "kq/config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kq/error.h"
#include "kq/log.h"
#include "kq/principal.h"
#include "kq/util.h"

#define CONFIG_FILE_MAX (16u << 20) /* a properties file larger than this is a mistake */

typedef struct cfg_entry {
    char *key;   /* owned */
    char *value; /* owned */
    int line;    /* 0 when set programmatically */
    bool used;   /* some getter asked for it */
    bool warned; /* kq_config_warn_unknown already reported it */
} cfg_entry;

struct kq_config {
    cfg_entry *e; /* owned array */
    size_t n;
    size_t cap;
};

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\f';
}

/* ---- the entry table -------------------------------------------------------------------- */

static cfg_entry *find_entry(const kq_config *c, const char *key)
{
    for (size_t i = 0; i < c->n; i++) {
        if (strcmp(c->e[i].key, key) == 0)
            return &c->e[i];
    }
    return NULL;
}

/* Takes ownership of key and value in every case. */
static int put_entry(kq_config *c, char *key, char *value, int line)
{
    cfg_entry *e = find_entry(c, key);
    if (e != NULL) {
        if (line > 0 && e->line > 0)
            KQ_WARN("config", "duplicate config key, the last value wins", "key=%s line=%d", key,
                    line);
        free(key);
        free(e->value);
        e->value = value;
        e->line = line;
        return 0;
    }
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 16;
        cfg_entry *ne = realloc(c->e, ncap * sizeof(*ne));
        if (ne == NULL) {
            free(key);
            free(value);
            return KQ_ERR_NOMEM;
        }
        c->e = ne;
        c->cap = ncap;
    }
    c->e[c->n].key = key;
    c->e[c->n].value = value;
    c->e[c->n].line = line;
    c->e[c->n].used = false;
    c->e[c->n].warned = false;
    c->n++;
    return 0;
}

void kq_config_free(kq_config *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->e[i].key);
        free(c->e[i].value);
    }
    free(c->e);
    free(c);
}

/* ---- .properties parsing ---------------------------------------------------------------- */

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static int read_u4(const char *s, size_t len, size_t i, uint32_t *cp)
{
    uint32_t v = 0;
    if (i + 4 > len)
        return -1;
    for (size_t k = 0; k < 4; k++) {
        int h = hexval(s[i + k]);
        if (h < 0)
            return -1;
        v = v * 16 + (uint32_t)h;
    }
    *cp = v;
    return 0;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/*
 * Unescape s[0..len) into a new string: \t \n \r \f, \uXXXX (UTF-8 encoded, surrogate pairs
 * combined), and \c -> c for any other c. Returns NULL with *bad set on a malformed \u, or
 * with *bad clear when out of memory.
 */
static char *unescape(const char *s, size_t len, bool *bad)
{
    char *out = malloc(len * 2 + 1); /* \uXXXX (6) -> at most 3 bytes; pairs 12 -> 4 */
    size_t o = 0;
    *bad = false;
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (ch != '\\') {
            out[o++] = ch;
            continue;
        }
        if (++i >= len)
            break; /* a lone trailing backslash (continuation at end of input) */
        ch = s[i];
        switch (ch) {
        case 't':
            out[o++] = '\t';
            break;
        case 'n':
            out[o++] = '\n';
            break;
        case 'r':
            out[o++] = '\r';
            break;
        case 'f':
            out[o++] = '\f';
            break;
        case 'u': {
            uint32_t cp, lo;
            if (read_u4(s, len, i + 1, &cp) != 0)
                goto malformed;
            i += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (i + 2 >= len || s[i + 1] != '\\' || s[i + 2] != 'u' ||
                    read_u4(s, len, i + 3, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF)
                    goto malformed;
                i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                goto malformed;
            } else if (cp == 0) {
                goto malformed; /* cannot live in a C string */
            }
            o += put_utf8(out + o, cp);
            break;
        }
        default:
            out[o++] = ch;
        }
    }
    out[o] = '\0';
    return out;

malformed:
    free(out);
    *bad = true;
    return NULL;
}

/* Number of consecutive backslashes ending at s[end-1]. */
static size_t trailing_backslashes(const char *s, size_t end)
{
    size_t k = 0;
    while (k < end && s[end - 1 - k] == '\\')
        k++;
    return k;
}

typedef struct strbuf {
    char *p;
    size_t len, cap;
} strbuf;

static int sb_append(strbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 128;
        while (ncap < b->len + n + 1)
            ncap *= 2;
        char *np = realloc(b->p, ncap);
        if (np == NULL)
            return KQ_ERR_NOMEM;
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

/* One physical line starting at *pos: sets [*start, *end) and moves *pos past the EOL. */
static bool next_line(const char *text, size_t *pos, size_t *start, size_t *end)
{
    size_t i = *pos;
    if (text[i] == '\0')
        return false;
    *start = i;
    while (text[i] != '\0' && text[i] != '\n' && text[i] != '\r')
        i++;
    *end = i;
    if (text[i] == '\r' && text[i + 1] == '\n')
        i += 2;
    else if (text[i] != '\0')
        i++;
    *pos = i;
    return true;
}

/* Split a logical line (continuations joined, leading whitespace gone) into key and value. */
static int parse_logical(kq_config *c, const char *s, size_t len, int line, const char *where,
                         char *errbuf, size_t errlen)
{
    size_t k = 0;
    bool bad;
    while (k < len) {
        if (s[k] == '\\') {
            k += 2;
            continue;
        }
        if (s[k] == '=' || s[k] == ':' || is_ws(s[k]))
            break;
        k++;
    }
    if (k > len)
        k = len;
    size_t v = k;
    while (v < len && is_ws(s[v]))
        v++;
    if (v < len && (s[v] == '=' || s[v] == ':'))
        v++;
    while (v < len && is_ws(s[v]))
        v++;
    size_t vend = len;
    /* trim trailing whitespace that is not escaped */
    while (vend > v && is_ws(s[vend - 1]) && trailing_backslashes(s, vend - 1) % 2 == 0)
        vend--;

    if (k == 0) {
        kq_errf(errbuf, errlen, "%sline %d: missing key before '%c'", where, line,
                len > 0 ? s[0] : '=');
        return KQ_ERR_CONFIG;
    }
    char *key = unescape(s, k, &bad);
    if (key == NULL) {
        if (!bad)
            return KQ_ERR_NOMEM;
        kq_errf(errbuf, errlen, "%sline %d: malformed \\uXXXX escape in key", where, line);
        return KQ_ERR_CONFIG;
    }
    char *value = unescape(s + v, vend - v, &bad);
    if (value == NULL) {
        if (bad)
            kq_errf(errbuf, errlen, "%sline %d: malformed \\uXXXX escape in the value of '%s'",
                    where, line, key);
        free(key);
        return bad ? KQ_ERR_CONFIG : KQ_ERR_NOMEM;
    }
    return put_entry(c, key, value, line);
}

static int parse_text(const char *text, const char *where, kq_config **out, char *errbuf,
                      size_t errlen)
{
    int rc = 0;
    kq_config *c = NULL;
    strbuf lb = {0};
    size_t pos = 0, st, en;
    int lineno = 0;

    *out = NULL;
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    while (next_line(text, &pos, &st, &en)) {
        lineno++;
        int first = lineno;
        while (st < en && is_ws(text[st]))
            st++;
        if (st == en || text[st] == '#' || text[st] == '!')
            continue; /* blank or comment; comments never continue */
        lb.len = 0;
        for (;;) {
            bool cont = trailing_backslashes(text, en) % 2 == 1;
            if (cont)
                en--;
            rc = sb_append(&lb, text + st, en - st);
            if (rc != 0)
                goto out;
            if (!cont || !next_line(text, &pos, &st, &en))
                break;
            lineno++;
            while (st < en && is_ws(text[st]))
                st++;
        }
        rc = parse_logical(c, lb.p ? lb.p : "", lb.len, first, where, errbuf, errlen);
        if (rc != 0)
            goto out;
    }
    *out = c;
    c = NULL;
out:
    if (rc == KQ_ERR_NOMEM)
        kq_errf(errbuf, errlen, "%sout of memory while parsing", where);
    free(lb.p);
    kq_config_free(c);
    return rc;
}

int kq_config_parse(const char *text, kq_config **out, char *errbuf, size_t errlen)
{
    if (out == NULL)
        return KQ_ERR_INTERNAL;
    return parse_text(text ? text : "", "", out, errbuf, errlen);
}

int kq_config_load(const char *path, kq_config **out, char *errbuf, size_t errlen)
{
    int rc = 0;
    int fd = -1;
    char *text = NULL;
    char where[512];
    struct stat st;

    if (out == NULL)
        return KQ_ERR_INTERNAL;
    *out = NULL;
    if (path == NULL || path[0] == '\0') {
        kq_errf(errbuf, errlen, "no config file given");
        return KQ_ERR_CONFIG;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        kq_errf(errbuf, errlen, "cannot read config file '%s': %s", path, strerror(errno));
        rc = KQ_ERR_CONFIG;
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        kq_errf(errbuf, errlen, "cannot read config file '%s': %s", path, strerror(EISDIR));
        rc = KQ_ERR_CONFIG;
        goto out;
    }
    size_t cap = 4096, len = 0;
    text = malloc(cap);
    if (text == NULL) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    for (;;) {
        if (len + 1 == cap) {
            if (cap > CONFIG_FILE_MAX) {
                kq_errf(errbuf, errlen, "config file '%s' is larger than %u bytes", path,
                        CONFIG_FILE_MAX);
                rc = KQ_ERR_CONFIG;
                goto out;
            }
            char *nt = realloc(text, cap * 2);
            if (nt == NULL) {
                rc = KQ_ERR_NOMEM;
                goto out;
            }
            text = nt;
            cap *= 2;
        }
        ssize_t r = read(fd, text + len, cap - 1 - len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            kq_errf(errbuf, errlen, "cannot read config file '%s': %s", path, strerror(errno));
            rc = KQ_ERR_CONFIG;
            goto out;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    text[len] = '\0';
    if (strlen(text) != len) {
        kq_errf(errbuf, errlen, "config file '%s' contains a NUL byte (not a text file?)", path);
        rc = KQ_ERR_CONFIG;
        goto out;
    }
    snprintf(where, sizeof(where), "%s: ", path);
    rc = parse_text(text, where, out, errbuf, errlen);
out:
    if (rc == KQ_ERR_NOMEM)
        kq_errf(errbuf, errlen, "out of memory reading config file '%s'", path);
    if (fd >= 0)
        close(fd);
    free(text);
    return rc;
}

/* ---- getters ---------------------------------------------------------------------------- */

const char *kq_config_get(kq_config *c, const char *key)
{
    if (c == NULL || key == NULL)
        return NULL;
    cfg_entry *e = find_entry(c, key);
    if (e == NULL)
        return NULL;
    e->used = true;
    return e->value;
}

int kq_config_set(kq_config *c, const char *key, const char *value)
{
    if (c == NULL || key == NULL || key[0] == '\0')
        return KQ_ERR_CONFIG;
    if (value == NULL) { /* remove */
        cfg_entry *e = find_entry(c, key);
        if (e != NULL) {
            free(e->key);
            free(e->value);
            *e = c->e[--c->n];
        }
        return 0;
    }
    char *k = strdup(key);
    char *v = strdup(value);
    if (k == NULL || v == NULL) {
        free(k);
        free(v);
        return KQ_ERR_NOMEM;
    }
    return put_entry(c, k, v, 0);
}

int kq_config_string(kq_config *c, const char *key, const char *def, const char **out, char *errbuf,
                     size_t errlen)
{
    const char *v = kq_config_get(c, key);
    *out = v != NULL ? v : def;
    return 0;
}

int kq_config_required(kq_config *c, const char *key, const char **out, char *errbuf, size_t errlen)
{
    const char *v = kq_config_get(c, key);
    if (v == NULL || v[0] == '\0') {
        *out = NULL;
        kq_errf(errbuf, errlen, "%s: missing required key (it has no default value)", key);
        return KQ_ERR_CONFIG;
    }
    *out = v;
    return 0;
}

/* Value without surrounding whitespace, into buf (truncated copies are reported as such). */
static const char *trimmed(const char *v, char *buf, size_t buflen)
{
    while (is_ws(*v) || *v == '\n' || *v == '\r')
        v++;
    size_t n = strlen(v);
    while (n > 0 && (is_ws(v[n - 1]) || v[n - 1] == '\n' || v[n - 1] == '\r'))
        n--;
    if (n >= buflen)
        n = buflen - 1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    return buf;
}

int kq_config_int(kq_config *c, const char *key, int64_t def, int64_t min, int64_t max,
                  int64_t *out, char *errbuf, size_t errlen)
{
    char buf[64];
    const char *raw = kq_config_get(c, key);
    if (raw == NULL) {
        *out = def;
        return 0;
    }
    const char *v = trimmed(raw, buf, sizeof(buf));
    const char *p = v;
    bool neg = false;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (*p < '0' || *p > '9' || strlen(raw) >= sizeof(buf)) {
        goto not_int;
    }
    uint64_t mag = 0;
    bool overflow = false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (mag > (UINT64_MAX - 9) / 10)
            overflow = true;
        else
            mag = mag * 10 + (uint64_t)(*p - '0');
    }
    if (*p != '\0')
        goto not_int;
    int64_t val;
    if (overflow || (!neg && mag > (uint64_t)INT64_MAX) ||
        (neg && mag > (uint64_t)INT64_MAX + 1u)) {
        goto range;
    }
    val = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    if (val < min || val > max)
        goto range;
    *out = val;
    return 0;

not_int:
    kq_errf(errbuf, errlen, "%s: '%s' is not an integer in [%" PRId64 ", %" PRId64 "]", key, raw,
            min, max);
    return KQ_ERR_CONFIG;
range:
    kq_errf(errbuf, errlen,
            "%s: '%s' is out of range; expected an integer in [%" PRId64 ", %" PRId64 "]", key, v,
            min, max);
    return KQ_ERR_CONFIG;
}

int kq_config_bool(kq_config *c, const char *key, int def, int *out, char *errbuf, size_t errlen)
{
    char buf[16];
    const char *raw = kq_config_get(c, key);
    if (raw == NULL) {
        *out = def ? 1 : 0;
        return 0;
    }
    const char *v = strlen(raw) < sizeof(buf) ? trimmed(raw, buf, sizeof(buf)) : "";
    if (strcasecmp(v, "true") == 0) {
        *out = 1;
        return 0;
    }
    if (strcasecmp(v, "false") == 0) {
        *out = 0;
        return 0;
    }
    kq_errf(errbuf, errlen, "%s: '%s' is not a boolean (expected true or false)", key, raw);
    return KQ_ERR_CONFIG;
}

void kq_config_warn_unknown(kq_config *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++) {
        cfg_entry *e = &c->e[i];
        if (e->used || e->warned)
            continue;
        e->warned = true;
        bool plain = e->key[0] != '\0';
        for (const char *p = e->key; *p; p++) {
            if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || *p == 0x7f)
                plain = false;
        }
        if (plain) {
            KQ_WARN("config", "unknown config key, ignored", "key=%s", e->key);
        } else {
            /* quote it so the logfmt line stays parseable */
            char q[600];
            size_t o = 0;
            for (const char *p = e->key; *p && o + 6 < sizeof(q); p++) {
                unsigned char ch = (unsigned char)*p;
                if (ch == '"' || ch == '\\') {
                    q[o++] = '\\';
                    q[o++] = (char)ch;
                } else if (ch < 0x20 || ch == 0x7f) {
                    o += (size_t)snprintf(q + o, sizeof(q) - o, "\\x%02x", ch);
                } else {
                    q[o++] = (char)ch;
                }
            }
            q[o] = '\0';
            KQ_WARN("config", "unknown config key, ignored", "key=\"%s\"", q);
        }
    }
}

/* ---- addresses -------------------------------------------------------------------------- */

#define EP_ALLOW_EMPTY_HOST 1

static bool host_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_';
}

/*
 * Parse "host:port", "[v6]:port" (and ":port" with EP_ALLOW_EMPTY_HOST) from s[0..len).
 * The host is stored without brackets. On failure returns -1 with `why` set.
 */
static int parse_endpoint(const char *s, size_t len, int flags, char *host, size_t hostlen,
                          int *port, char *why, size_t whylen)
{
    const char *h;
    size_t hlen;
    size_t i;

    if (memchr(s, ',', len) != NULL) {
        snprintf(why, whylen, "found ',' but only one address is allowed here");
        return -1;
    }
    if (len > 0 && s[0] == '[') {
        const char *rb = memchr(s, ']', len);
        if (rb == NULL) {
            snprintf(why, whylen, "missing ']' after the IPv6 address");
            return -1;
        }
        h = s + 1;
        hlen = (size_t)(rb - h);
        if (hlen == 0) {
            snprintf(why, whylen, "empty IPv6 address in []");
            return -1;
        }
        bool colon = false;
        for (i = 0; i < hlen; i++) {
            if (h[i] == ':')
                colon = true;
            else if (!(hexval(h[i]) >= 0 || h[i] == '.' || (h[i] == '%' && i > 0) ||
                       (memchr(h, '%', i) != NULL && host_char(h[i])))) {
                snprintf(why, whylen, "'%.*s' is not an IPv6 address", (int)hlen, h);
                return -1;
            }
        }
        if (!colon) {
            snprintf(why, whylen, "'%.*s' is not an IPv6 address", (int)hlen, h);
            return -1;
        }
        i = (size_t)(rb - s) + 1;
        if (i >= len || s[i] != ':') {
            snprintf(why, whylen, "expected ':PORT' after ']'");
            return -1;
        }
    } else {
        const char *colon = NULL;
        for (i = 0; i < len; i++) {
            if (s[i] == ':')
                colon = s + i;
        }
        if (colon == NULL) {
            snprintf(why, whylen, "missing ':PORT'");
            return -1;
        }
        h = s;
        hlen = (size_t)(colon - s);
        if (memchr(h, ':', hlen) != NULL) {
            snprintf(why, whylen, "an IPv6 address must be written in brackets, e.g. [::1]:9093");
            return -1;
        }
        for (i = 0; i < hlen; i++) {
            if (!host_char(h[i])) {
                snprintf(why, whylen, "invalid character '%c' in host '%.*s'", h[i], (int)hlen, h);
                return -1;
            }
        }
        if (hlen == 0 && !(flags & EP_ALLOW_EMPTY_HOST)) {
            snprintf(why, whylen, "missing host before ':PORT'");
            return -1;
        }
        i = hlen;
    }
    /* s[i] == ':' */
    const char *p = s + i + 1;
    size_t plen = len - i - 1;
    long pv = 0;
    bool ok = plen > 0 && plen <= 5;
    for (size_t k = 0; ok && k < plen; k++) {
        if (p[k] < '0' || p[k] > '9')
            ok = false;
        else
            pv = pv * 10 + (p[k] - '0');
    }
    if (!ok || pv < 1 || pv > 65535) {
        snprintf(why, whylen, "port '%.*s' is not an integer in [1, 65535]", (int)plen, p);
        return -1;
    }
    if (hlen >= hostlen) {
        snprintf(why, whylen, "host is longer than %zu characters", hostlen - 1);
        return -1;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (int)pv;
    return 0;
}

static bool unspecified_host(const char *host)
{
    return strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0;
}

int kq_config_parse_voters(const char *value, kq_voter_addr *out, int max, int *n, char *errbuf,
                           size_t errlen)
{
    const char *key = "controller.quorum.voters";
    char why[160];
    int count = 0;

    if (n != NULL)
        *n = 0;
    if (value == NULL || out == NULL || n == NULL) {
        kq_errf(errbuf, errlen, "%s: no value", key);
        return KQ_ERR_CONFIG;
    }
    const char *p = value;
    int pos = 0;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *s = p;
        pos++;
        while (len > 0 && (is_ws(*s) || *s == '\n' || *s == '\r')) {
            s++;
            len--;
        }
        while (len > 0 && (is_ws(s[len - 1]) || s[len - 1] == '\n' || s[len - 1] == '\r'))
            len--;
        if (len == 0) {
            if (pos == 1 && comma == NULL)
                kq_errf(errbuf, errlen, "%s: empty; expected ID@HOST:PORT[,ID@HOST:PORT...]", key);
            else
                kq_errf(errbuf, errlen, "%s: entry %d is empty (stray ',')", key, pos);
            return KQ_ERR_CONFIG;
        }
        int elen = len > 200 ? 200 : (int)len;
        const char *at = memchr(s, '@', len);
        if (at == NULL) {
            kq_errf(errbuf, errlen, "%s: entry '%.*s': expected ID@HOST:PORT", key, elen, s);
            return KQ_ERR_CONFIG;
        }
        /* id */
        size_t idlen = (size_t)(at - s);
        int64_t id = 0;
        bool ok = idlen > 0 && idlen <= 10;
        for (size_t k = 0; ok && k < idlen; k++) {
            if (s[k] < '0' || s[k] > '9')
                ok = false;
            else
                id = id * 10 + (s[k] - '0');
        }
        if (!ok || id > INT32_MAX) {
            kq_errf(errbuf, errlen,
                    "%s: entry '%.*s': node id '%.*s' is not an integer in [0, 2147483647]", key,
                    elen, s, (int)idlen, s);
            return KQ_ERR_CONFIG;
        }
        if (count >= max) {
            kq_errf(errbuf, errlen, "%s: more than %d voters", key, max);
            return KQ_ERR_CONFIG;
        }
        kq_voter_addr *va = &out[count];
        if (parse_endpoint(at + 1, len - idlen - 1, 0, va->host, sizeof(va->host), &va->port, why,
                           sizeof(why)) != 0) {
            kq_errf(errbuf, errlen, "%s: entry '%.*s': %s", key, elen, s, why);
            return KQ_ERR_CONFIG;
        }
        if (unspecified_host(va->host)) {
            kq_errf(errbuf, errlen,
                    "%s: entry '%.*s': %s is not a routable address; give the host other nodes "
                    "use to reach voter %" PRId64,
                    key, elen, s, va->host, id);
            return KQ_ERR_CONFIG;
        }
        va->id = (int32_t)id;
        for (int k = 0; k < count; k++) {
            if (out[k].id == va->id) {
                kq_errf(errbuf, errlen, "%s: entry '%.*s': duplicate voter id %" PRId32, key, elen,
                        s, va->id);
                return KQ_ERR_CONFIG;
            }
            if (out[k].port == va->port && strcasecmp(out[k].host, va->host) == 0) {
                kq_errf(errbuf, errlen,
                        "%s: entry '%.*s': voters %" PRId32 " and %" PRId32
                        " have the same address",
                        key, elen, s, out[k].id, va->id);
                return KQ_ERR_CONFIG;
            }
        }
        count++;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    *n = count;
    return 0;
}

int kq_config_parse_listener(const char *value, kq_listener *out, char *errbuf, size_t errlen)
{
    char why[160];
    if (value == NULL || out == NULL) {
        kq_errf(errbuf, errlen, "listener: no value");
        return KQ_ERR_CONFIG;
    }
    const char *sep = strstr(value, "://");
    if (sep == NULL) {
        kq_errf(errbuf, errlen, "listener '%s': expected NAME://HOST:PORT", value);
        return KQ_ERR_CONFIG;
    }
    size_t nlen = (size_t)(sep - value);
    if (nlen == 0) {
        kq_errf(errbuf, errlen, "listener '%s': missing listener name before '://'", value);
        return KQ_ERR_CONFIG;
    }
    if (nlen >= sizeof(out->name)) {
        kq_errf(errbuf, errlen, "listener '%s': listener name is longer than %zu characters", value,
                sizeof(out->name) - 1);
        return KQ_ERR_CONFIG;
    }
    for (size_t i = 0; i < nlen; i++) {
        char ch = value[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-')) {
            kq_errf(errbuf, errlen,
                    "listener '%s': listener name '%.*s' may only contain letters, digits, '_' "
                    "and '-'",
                    value, (int)nlen, value);
            return KQ_ERR_CONFIG;
        }
    }
    const char *ep = sep + 3;
    if (parse_endpoint(ep, strlen(ep), EP_ALLOW_EMPTY_HOST, out->host, sizeof(out->host),
                       &out->port, why, sizeof(why)) != 0) {
        kq_errf(errbuf, errlen, "listener '%s': %s", value, why);
        return KQ_ERR_CONFIG;
    }
    memcpy(out->name, value, nlen);
    out->name[nlen] = '\0';
    if (out->host[0] == '\0')
        strcpy(out->host, "0.0.0.0");
    return 0;
}

int kq_config_parse_bootstrap_servers(const char *value, kq_voter_addr *out, int max, int *n,
                                      char *errbuf, size_t errlen)
{
    const char *key = "controller.quorum.bootstrap.servers", *p = value;
    char why[160];

    *n = 0;
    if (!value || !*value) {
        kq_errf(errbuf, errlen, "%s: empty; expected HOST:PORT[,HOST:PORT...]", key);
        return KQ_ERR_CONFIG;
    }
    for (int pos = 1;; pos++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);

        while (len > 0 && is_ws(*p)) {
            p++;
            len--;
        }
        while (len > 0 && is_ws(p[len - 1]))
            len--;
        if (*n >= max) {
            kq_errf(errbuf, errlen, "%s: more than %d servers", key, max);
            return KQ_ERR_CONFIG;
        }
        kq_voter_addr *a = &out[*n];
        if (len == 0 ||
            parse_endpoint(p, len, 0, a->host, sizeof(a->host), &a->port, why, sizeof(why)) != 0) {
            kq_errf(errbuf, errlen, "%s: entry %d '%.*s': %s (expected HOST:PORT)", key, pos,
                    len > 200 ? 200 : (int)len, p, len ? why : "empty");
            return KQ_ERR_CONFIG;
        }
        a->id = -1;
        (*n)++;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

int kq_config_parse_hostport(const char *value, char *host, size_t hostlen, int *port, char *errbuf,
                             size_t errlen)
{
    char why[160];
    if (value == NULL || host == NULL || hostlen == 0 || port == NULL) {
        kq_errf(errbuf, errlen, "address: no value");
        return KQ_ERR_CONFIG;
    }
    if (parse_endpoint(value, strlen(value), 0, host, hostlen, port, why, sizeof(why)) != 0) {
        kq_errf(errbuf, errlen, "address '%s': %s (expected HOST:PORT)", value, why);
        return KQ_ERR_CONFIG;
    }
    return 0;
}

int kq_config_metrics_listener(kq_config *c, char *host, size_t hostlen, int *port, bool *tls,
                               char *errbuf, size_t errlen)
{
    const char *v = kq_config_get(c, "metrics.listener");
    char why[512];

    host[0] = '\0';
    *port = 0;
    *tls = false;
    if (!v || !v[0])
        return 0;
    if (!strncasecmp(v, "https://", 8)) {
        *tls = true;
        v += 8;
    } else if (!strncasecmp(v, "http://", 7)) {
        v += 7;
    }
    if (kq_config_parse_hostport(v, host, hostlen, port, why, sizeof why) != 0) {
        kq_errf(errbuf, errlen, "metrics.listener: %s (or http://HOST:PORT, https://HOST:PORT)",
                why);
        return KQ_ERR_CONFIG;
    }
    return 0;
}

/* ---- security ---------------------------------------------------------------------------- */

static int protocol_parse(const char *s, size_t n, kq_security_protocol *out)
{
    if (n == 9 && !strncasecmp(s, "PLAINTEXT", 9))
        *out = KQ_SECURITY_PLAINTEXT;
    else if (n == 3 && !strncasecmp(s, "SSL", 3))
        *out = KQ_SECURITY_SSL;
    else
        return -1;
    return 0;
}

int kq_config_protocol_map(kq_config *c, kq_protocol_map *out, char *errbuf, size_t errlen)
{
    const char *key = "listener.security.protocol.map";
    const char *v = kq_config_get(c, key);

    memset(out, 0, sizeof *out);
    out->given = v != NULL && v[0] != '\0';
    if (!out->given)
        v = "PLAINTEXT:PLAINTEXT,SSL:SSL";
    for (const char *p = v; *p;) {
        const char *end = p + strcspn(p, ",");
        const char *colon;
        char raw[160], entry[160];

        snprintf(raw, sizeof raw, "%.*s", (int)(end - p), p);
        trimmed(raw, entry, sizeof entry);
        if (!entry[0]) {
            p = *end ? end + 1 : end;
            continue;
        }
        colon = strchr(entry, ':');
        if (!colon || colon == entry || !colon[1]) {
            kq_errf(errbuf, errlen, "%s: '%s' is not LISTENER_NAME:PROTOCOL", key, entry);
            return KQ_ERR_CONFIG;
        }
        size_t nlen = (size_t)(colon - entry);
        char proto[64];
        kq_security_protocol sp;

        trimmed(colon + 1, proto, sizeof proto);
        while (nlen && is_ws(entry[nlen - 1]))
            nlen--;
        if (protocol_parse(proto, strlen(proto), &sp)) {
            kq_errf(errbuf, errlen, "%s: '%s': protocol '%s' is not PLAINTEXT or SSL%s", key, entry,
                    proto,
                    !strncasecmp(proto, "SASL", 4) ? " (kq has no SASL; use SSL with client "
                                                     "certificates)"
                                                   : "");
            return KQ_ERR_CONFIG;
        }
        if (nlen >= sizeof out->v[0].name) {
            kq_errf(errbuf, errlen, "%s: listener name in '%s' is longer than %zu characters", key,
                    entry, sizeof out->v[0].name - 1);
            return KQ_ERR_CONFIG;
        }
        for (int i = 0; i < out->n; i++)
            if (strlen(out->v[i].name) == nlen && !strncasecmp(out->v[i].name, entry, nlen)) {
                kq_errf(errbuf, errlen, "%s: listener '%.*s' is mapped twice", key, (int)nlen,
                        entry);
                return KQ_ERR_CONFIG;
            }
        if (out->n == KQ_MAX_PROTOCOL_MAP) {
            kq_errf(errbuf, errlen, "%s: more than %d listeners", key, KQ_MAX_PROTOCOL_MAP);
            return KQ_ERR_CONFIG;
        }
        memcpy(out->v[out->n].name, entry, nlen);
        out->v[out->n].name[nlen] = '\0';
        out->v[out->n++].protocol = sp;
        p = *end ? end + 1 : end;
    }
    return 0;
}

int kq_protocol_of(const kq_protocol_map *m, const char *name, kq_security_protocol *out,
                   char *errbuf, size_t errlen)
{
    for (int i = 0; i < m->n; i++)
        if (!strcasecmp(m->v[i].name, name)) {
            *out = m->v[i].protocol;
            return 0;
        }
    if (!m->given) {
        *out = KQ_SECURITY_PLAINTEXT;
        return 0;
    }
    kq_errf(errbuf, errlen,
            "listener.security.protocol.map: no protocol for listener '%s' (add %s:SSL or "
            "%s:PLAINTEXT)",
            name, name, name);
    return KQ_ERR_CONFIG;
}

const char *kq_protocol_scheme(kq_security_protocol p)
{
    return p == KQ_SECURITY_SSL ? "tls+tcp://" : "tcp://";
}

/* A path-valued ssl.* key into buf; empty when unset. */
static int ssl_path(kq_config *c, const char *key, int needed, char *buf, size_t cap, char *errbuf,
                    size_t errlen)
{
    const char *v = kq_config_get(c, key);

    buf[0] = '\0';
    if (v == NULL || v[0] == '\0') {
        if (!needed)
            return 0;
        kq_errf(errbuf, errlen, "%s: missing required key (a listener or connection uses SSL)",
                key);
        return KQ_ERR_CONFIG;
    }
    if (strlen(v) >= cap) {
        kq_errf(errbuf, errlen, "%s: longer than %zu characters", key, cap - 1);
        return KQ_ERR_CONFIG;
    }
    snprintf(buf, cap, "%s", v);
    return 0;
}

int kq_config_ssl(kq_config *c, int needed, kq_ssl_config *out, char *errbuf, size_t errlen)
{
    static const char *const types[] = {"ssl.keystore.type", "ssl.truststore.type"};
    const char *v;
    int rc;

    memset(out, 0, sizeof *out);
    for (int i = 0; i < 2; i++) {
        v = kq_config_get(c, types[i]);
        if (v && v[0] && strcasecmp(v, "PEM")) {
            kq_errf(errbuf, errlen,
                    "%s: '%s' is not supported (kq reads PEM files only: set PEM; see "
                    "docs/security.md to convert a JKS or PKCS12 store)",
                    types[i], v);
            return KQ_ERR_CONFIG;
        }
    }
    if ((rc = ssl_path(c, "ssl.keystore.location", needed, out->keystore, sizeof out->keystore,
                       errbuf, errlen)) ||
        (rc = ssl_path(c, "ssl.truststore.location", needed, out->truststore,
                       sizeof out->truststore, errbuf, errlen)))
        return rc;
    v = kq_config_get(c, "ssl.key.password");
    if (v && v[0]) {
        if (strlen(v) >= sizeof out->key_password) {
            kq_errf(errbuf, errlen, "ssl.key.password: longer than %zu characters",
                    sizeof out->key_password - 1);
            return KQ_ERR_CONFIG;
        }
        snprintf(out->key_password, sizeof out->key_password, "%s", v);
        out->has_key_password = 1;
    }
    v = kq_config_get(c, "node.principal.template");
    snprintf(out->principal_template, sizeof out->principal_template, "%s",
             v && v[0] ? v : KQ_NODE_PRINCIPAL_TEMPLATE_DEFAULT);
    if (v && strlen(v) >= sizeof out->principal_template) {
        kq_errf(errbuf, errlen, "node.principal.template: longer than %zu characters",
                sizeof out->principal_template - 1);
        return KQ_ERR_CONFIG;
    }
    if ((rc = kq_node_principal_template_check(out->principal_template, errbuf, errlen)) != 0)
        return rc;
    v = kq_config_get(c, "ssl.principal.mapping.rules");
    if (v && strlen(v) >= sizeof out->mapping_rules) {
        kq_errf(errbuf, errlen, "ssl.principal.mapping.rules: longer than %zu characters",
                sizeof out->mapping_rules - 1);
        return KQ_ERR_CONFIG;
    }
    snprintf(out->mapping_rules, sizeof out->mapping_rules, "%s", v && v[0] ? v : "DEFAULT");
    {
        kq_principal_rules *rules = NULL;

        if ((rc = kq_principal_rules_parse(out->mapping_rules, &rules, errbuf, errlen)) != 0)
            return rc;
        kq_principal_rules_free(rules);
    }
    v = kq_config_get(c, "ssl.client.auth");
    if (v == NULL || v[0] == '\0' || !strcasecmp(v, "none"))
        out->client_auth = 0;
    else if (!strcasecmp(v, "requested"))
        out->client_auth = 1;
    else if (!strcasecmp(v, "required"))
        out->client_auth = 2;
    else {
        kq_errf(errbuf, errlen, "ssl.client.auth: '%s' is not one of required, requested, none", v);
        return KQ_ERR_CONFIG;
    }
    return 0;
}

int kq_config_authorizer(kq_config *c, kq_authorizer_config *out, char *errbuf, size_t errlen)
{
    const char *v = kq_config_get(c, "authorizer.class.name");
    int b = 0, rc;

    memset(out, 0, sizeof *out);
    if (v && v[0]) {
        if (strcmp(v, KQ_AUTHORIZER_CLASS) != 0) {
            kq_errf(errbuf, errlen,
                    "authorizer.class.name: '%s' is not supported (kq has %s, ACLs in the "
                    "metadata log)",
                    v, KQ_AUTHORIZER_CLASS);
            return KQ_ERR_CONFIG;
        }
        out->enabled = true;
    }
    if (kq_authorizer_parse_super_users(kq_config_get(c, "super.users"), out, errbuf, errlen))
        return KQ_ERR_CONFIG;
    if ((rc = kq_config_bool(c, "allow.everyone.if.no.acl.found", 0, &b, errbuf, errlen)) != 0)
        return rc;
    out->allow_everyone_if_no_acl_found = b;
    return 0;
}

/* ---- --initial-controllers ---------------------------------------------------------------- */

/* Each entry's ":DIRECTORY_ID" is taken off and parsed here; what is left is a
 * controller.quorum.voters value, parsed by kq_config_parse_voters (whose messages name
 * controller.quorum.voters: renamed for the option). */
int kq_config_parse_initial_controllers(const char *value, kq_initial_controller *out, int max,
                                        int *n, char *errbuf, size_t errlen)
{
    static const char opt[] = "--initial-controllers", voters_key[] = "controller.quorum.voters";
    kq_voter_addr addrs[KQ_INITIAL_CONTROLLERS_MAX];
    uint8_t dirs[KQ_INITIAL_CONTROLLERS_MAX][16];
    char *stripped, why[512];
    size_t w = 0;
    int count = 0, rc;

    if (n)
        *n = 0;
    if (!value || !out || !n || max <= 0) {
        kq_errf(errbuf, errlen, "%s: no value", opt);
        return KQ_ERR_CONFIG;
    }
    stripped = malloc(strlen(value) + 1);
    if (!stripped) {
        kq_errf(errbuf, errlen, "%s: out of memory", opt);
        return KQ_ERR_NOMEM;
    }
    for (const char *p = value;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *colon = NULL;
        char dir_text[64];
        size_t b = 0, e = len;

        while (b < e && (is_ws(p[b]) || p[b] == '\n' || p[b] == '\r'))
            b++;
        while (e > b && (is_ws(p[e - 1]) || p[e - 1] == '\n' || p[e - 1] == '\r'))
            e--;
        int colons = 0; /* after the '@', outside an [IPv6] host */
        bool at = false, in_brackets = false;
        for (size_t k = b; k < e; k++) {
            if (p[k] == '@')
                at = true;
            else if (p[k] == '[')
                in_brackets = true;
            else if (p[k] == ']')
                in_brackets = false;
            else if (p[k] == ':' && at && !in_brackets) {
                colon = p + k;
                colons++;
            }
        }
        if (e > b) {
            int elen = (int)(e - b) > 200 ? 200 : (int)(e - b);
            size_t dlen = colon ? (size_t)(p + e - colon - 1) : 0;

            if (count >= max || count >= KQ_INITIAL_CONTROLLERS_MAX) {
                kq_errf(errbuf, errlen, "%s: more than %d controllers", opt,
                        max < KQ_INITIAL_CONTROLLERS_MAX ? max : KQ_INITIAL_CONTROLLERS_MAX);
                free(stripped);
                return KQ_ERR_CONFIG;
            }
            if (colons < 2 || dlen == 0 || dlen >= sizeof(dir_text)) {
                kq_errf(errbuf, errlen, "%s: entry '%.*s': expected ID@HOST:PORT:DIRECTORY_ID", opt,
                        elen, p + b);
                free(stripped);
                return KQ_ERR_CONFIG;
            }
            memcpy(dir_text, colon + 1, dlen);
            dir_text[dlen] = '\0';
            if (!kq_uuid_parse(dir_text, dirs[count]) || kq_uuid_is_zero(dirs[count])) {
                kq_errf(errbuf, errlen,
                        "%s: entry '%.*s': '%s' is not a directory id (a uuid as kq storage "
                        "random-uuid prints it)",
                        opt, elen, p + b, dir_text);
                free(stripped);
                return KQ_ERR_CONFIG;
            }
            for (int k = 0; k < count; k++)
                if (!memcmp(dirs[k], dirs[count], 16)) {
                    kq_errf(errbuf, errlen, "%s: entry '%.*s': directory id %s appears twice", opt,
                            elen, p + b, dir_text);
                    free(stripped);
                    return KQ_ERR_CONFIG;
                }
            count++;
            e = (size_t)(colon - p);
        }
        if (w)
            stripped[w++] = ',';
        memcpy(stripped + w, p + b, e - b);
        w += e - b;
        if (!comma)
            break;
        p = comma + 1;
    }
    stripped[w] = '\0';
    rc = kq_config_parse_voters(stripped, addrs, count ? count : 1, n, why, sizeof(why));
    free(stripped);
    if (rc) {
        const char *rest = strncmp(why, voters_key, sizeof(voters_key) - 1) == 0
                               ? why + sizeof(voters_key) - 1
                               : why;
        kq_errf(errbuf, errlen, "%s%s", opt, rest);
        *n = 0;
        return rc;
    }
    for (int i = 0; i < *n; i++) {
        out[i].addr = addrs[i];
        memcpy(out[i].dir, dirs[i], 16);
    }
    return 0;
}
