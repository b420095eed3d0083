/*
 * libFuzzer target: the .properties parser (kq_config_parse), the typed getters, and the
 * value parsers kq_config_parse_voters / _listener / _hostport.
 *
 * Input: byte 0 % 3 picks the mode; the rest is
 *   0: a .properties file: parsed, then the getters and value parsers run on the values of
 *      the keys the daemons read;
 *   1: one value, given to each value parser;
 *   2: NUL-separated key, value, key, value, ...: written as a .properties file with every
 *      special character escaped, parsed back, and each key must give its (last) value.
 *
 * Checks: a parse or getter error is KQ_ERR_CONFIG with a message (naming the key for a
 * getter); typed getters return values within their bounds; a parsed voters list, listener or
 * host:port obeys the rules its parser enforces; escaping round-trips exactly.
 */
#include <limits.h>
#include <stdio.h>
#include <strings.h>

#include "fuzz_check.h"
#include "kq/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_VOTERS 16

static bool host_ok(const char *h)
{
    return h[0] != '\0' && strlen(h) < 256;
}

static void voters(const char *v)
{
    kq_voter_addr out[MAX_VOTERS];
    char err[512] = "";
    int n = -1;
    int rc = kq_config_parse_voters(v, out, MAX_VOTERS, &n, err, sizeof err);

    if (rc) {
        FUZZ_CHECK(rc == KQ_ERR_CONFIG && strstr(err, "controller.quorum.voters") && n == 0);
        return;
    }
    FUZZ_CHECK(n >= 1 && n <= MAX_VOTERS);
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(out[i].id >= 0 && host_ok(out[i].host));
        FUZZ_CHECK(out[i].port >= 1 && out[i].port <= 65535);
        FUZZ_CHECK(strcmp(out[i].host, "0.0.0.0") && strcmp(out[i].host, "::"));
        for (int k = 0; k < i; k++)
            FUZZ_CHECK(out[k].id != out[i].id &&
                       (out[k].port != out[i].port || strcasecmp(out[k].host, out[i].host)));
    }
}

static void listener(const char *v)
{
    kq_listener l;
    char err[512] = "";
    int rc = kq_config_parse_listener(v, &l, err, sizeof err);

    if (rc) {
        FUZZ_CHECK(rc == KQ_ERR_CONFIG && err[0]);
        return;
    }
    FUZZ_CHECK(l.name[0] && strlen(l.name) < sizeof l.name && host_ok(l.host));
    for (const char *p = l.name; *p; p++)
        FUZZ_CHECK((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                   (*p >= '0' && *p <= '9') || *p == '_' || *p == '-');
    FUZZ_CHECK(l.port >= 1 && l.port <= 65535);
    FUZZ_CHECK(!strncmp(v, l.name, strlen(l.name)) && !strncmp(v + strlen(l.name), "://", 3));
}

static void hostport(const char *v)
{
    char host[64] = "";
    char err[512] = "";
    int port = -1;
    int rc = kq_config_parse_hostport(v, host, sizeof host, &port, err, sizeof err);

    if (rc) {
        FUZZ_CHECK(rc == KQ_ERR_CONFIG && err[0]);
        return;
    }
    FUZZ_CHECK(host[0] && strlen(host) < sizeof host && port >= 1 && port <= 65535);
    FUZZ_CHECK(!strchr(v, ','));
}

static void values(const char *v)
{
    voters(v);
    listener(v);
    hostport(v);
}

/* Keys the daemons read, with the bounds of an integer getter (0, 0: not an integer). */
static const struct {
    const char *key;
    int64_t min, max;
} keys[] = {
    {"node.id", 0, INT32_MAX},
    {"controller.quorum.election.timeout.ms", 1, 86400000},
    {"controller.quorum.fetch.timeout.ms", 1, 86400000},
    {"num.partitions", 1, 1000000},
    {"controller.quorum.voters", 0, 0},
    {"listeners", 0, 0},
    {"advertised.listeners", 0, 0},
    {"controller.quorum.bootstrap.servers", 0, 0},
    {"process.roles", 0, 0},
    {"log.dirs", 0, 0},
};

static void getters(kq_config *c)
{
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *raw = kq_config_get(c, keys[i].key), *s = NULL;
        char err[512] = "";
        int64_t iv = -5;
        int bv = -5;
        int rc;

        rc = kq_config_int(c, keys[i].key, 1, keys[i].min ? keys[i].min : 0,
                           keys[i].max ? keys[i].max : INT64_MAX, &iv, err, sizeof err);
        if (rc)
            FUZZ_CHECK(rc == KQ_ERR_CONFIG && strstr(err, keys[i].key) && raw);
        else
            FUZZ_CHECK((iv >= keys[i].min && (!keys[i].max || iv <= keys[i].max)) ||
                       (!raw && iv == 1));
        rc = kq_config_bool(c, keys[i].key, 0, &bv, err, sizeof err);
        FUZZ_CHECK(rc ? rc == KQ_ERR_CONFIG && raw : bv == 0 || bv == 1);
        rc = kq_config_string(c, keys[i].key, "def", &s, err, sizeof err);
        FUZZ_CHECK(rc == 0 && s && (raw ? !strcmp(s, raw) : !strcmp(s, "def")));
        if (!raw)
            continue;
        values(raw);
        /* a comma-separated list: each element alone */
        if (strchr(raw, ',') && strlen(raw) < 4096) {
            char buf[4096], *save = NULL;

            strcpy(buf, raw);
            for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
                values(t);
        }
    }
}

static size_t escape(char *out, const char *s, bool key)
{
    size_t o = 0;

    for (size_t i = 0; s[i]; i++) {
        char ch = s[i];

        switch (ch) {
        case '\n':
            o += (size_t)sprintf(out + o, "\\n");
            continue;
        case '\r':
            o += (size_t)sprintf(out + o, "\\r");
            continue;
        case '\t':
            o += (size_t)sprintf(out + o, "\\t");
            continue;
        case '\f':
            o += (size_t)sprintf(out + o, "\\f");
            continue;
        case '\\':
        case ' ':
            out[o++] = '\\';
            break;
        case '=':
        case ':':
        case '#':
        case '!':
            if (key)
                out[o++] = '\\';
            break;
        default:
            break;
        }
        out[o++] = ch;
    }
    return o;
}

static void round_trip(const char *in, size_t size)
{
    const char *pairs[64][2];
    size_t n = 0, pos = 0;
    char *text, err[512] = "";
    size_t o = 0;
    kq_config *c = NULL;

    while (pos < size && n < 64) {
        const char *k = in + pos, *v;

        pos += strlen(k) + 1;
        if (pos > size)
            break;
        v = in + pos;
        pos += strlen(v) + 1;
        if (pos > size + 1)
            break;
        if (!k[0])
            continue; /* a key is never empty */
        pairs[n][0] = k;
        pairs[n][1] = v;
        n++;
    }
    text = malloc(size * 2 + 3 * n + 1);
    FUZZ_CHECK(text);
    for (size_t i = 0; i < n; i++) {
        o += escape(text + o, pairs[i][0], true);
        text[o++] = '=';
        o += escape(text + o, pairs[i][1], false);
        text[o++] = '\n';
    }
    text[o] = '\0';
    FUZZ_CHECK(kq_config_parse(text, &c, err, sizeof err) == 0);
    for (size_t i = 0; i < n; i++) {
        const char *want = pairs[i][1];

        for (size_t k = i + 1; k < n; k++) /* the last value wins */
            if (!strcmp(pairs[k][0], pairs[i][0]))
                want = pairs[k][1];
        FUZZ_CHECK(kq_config_get(c, pairs[i][0]) && !strcmp(kq_config_get(c, pairs[i][0]), want));
    }
    kq_config_free(c);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s, err[512] = "";
    kq_config *c = NULL;
    int rc;

    if (size < 1)
        return 0;
    s = malloc(size + 1); /* NUL-terminated copy; the last byte of a pair list may be cut */
    FUZZ_CHECK(s);
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    s[size] = '\0';
    switch (data[0] % 3) {
    case 0:
        rc = kq_config_parse(s, &c, err, sizeof err);
        if (rc) {
            FUZZ_CHECK(rc == KQ_ERR_CONFIG && err[0] && c == NULL);
            break;
        }
        FUZZ_CHECK(c != NULL);
        getters(c);
        FUZZ_CHECK(kq_config_set(c, "fuzz.key", "v") == 0 &&
                   !strcmp(kq_config_get(c, "fuzz.key"), "v"));
        kq_config_free(c);
        break;
    case 1:
        values(s);
        break;
    default:
        round_trip(s, size - 1);
    }
    free(s);
    return 0;
}
