/*
 * kq_principal: peers' principals from their certificate subjects, and node principals.
 * Contract and ownership: include/kq/principal.h.
 */
#include "kq/principal.h"

#include <ctype.h>
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"

#define MAX_RULES 32

typedef struct rule {
    bool is_default;
    regex_t re;
    char *replacement;
    char case_fold; /* 0, 'L' or 'U' */
} rule;

struct kq_principal_rules {
    int n;
    rule v[MAX_RULES];
};

void kq_principal_rules_free(kq_principal_rules *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n; i++)
        if (!r->v[i].is_default) {
            regfree(&r->v[i].re);
            free(r->v[i].replacement);
        }
    free(r);
}

/* Reads up to the next unescaped '/' from *p into a new string (escapes kept for the regex,
 * "\/" becoming "/"); *p is left after the '/'. NULL when there is none. */
static char *until_slash(const char **p)
{
    const char *s = *p;
    size_t n = strlen(s);
    char *out = malloc(n + 1), *o = out;

    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n && s[i + 1] == '/') {
            *o++ = '/';
            i++;
        } else if (s[i] == '\\' && i + 1 < n) {
            *o++ = s[i];
            *o++ = s[++i];
        } else if (s[i] == '/') {
            *o = '\0';
            *p = s + i + 1;
            return out;
        } else {
            *o++ = s[i];
        }
    }
    free(out);
    return NULL;
}

static int parse_rule(const char **p, rule *r, char *errbuf, size_t errlen)
{
    const char *start = *p;
    char *pattern;

    *p += 5; /* "RULE:" */
    if (!(pattern = until_slash(p)) || !(r->replacement = until_slash(p))) {
        free(pattern);
        kq_errf(errbuf, errlen,
                "ssl.principal.mapping.rules: '%.60s' is not RULE:pattern/replacement/[LU]", start);
        return KQ_ERR_CONFIG;
    }
    if (**p == 'L' || **p == 'U')
        r->case_fold = *(*p)++;
    if (strstr(pattern, "\\d") || strstr(pattern, "\\w") || strstr(pattern, "\\s") ||
        strstr(pattern, "\\D") || strstr(pattern, "\\W") || strstr(pattern, "\\S")) {
        kq_errf(errbuf, errlen,
                "ssl.principal.mapping.rules: pattern '%.200s' uses a Java class escape (\\d, "
                "\\w, \\s), which POSIX extended regular expressions do not have: write "
                "[0-9], [[:alnum:]_], [[:space:]]",
                pattern);
        free(pattern);
        free(r->replacement);
        return KQ_ERR_CONFIG;
    }
    if (strstr(pattern, "*?") || strstr(pattern, "+?") || strstr(pattern, "??") ||
        strstr(pattern, "}?")) {
        kq_errf(errbuf, errlen,
                "ssl.principal.mapping.rules: pattern '%.200s' uses a lazy quantifier, which "
                "kq's POSIX extended regular expressions do not have (write [^,]* for .*? "
                "inside a subject)",
                pattern);
        free(pattern);
        free(r->replacement);
        return KQ_ERR_CONFIG;
    }
    /* Kafka matches the whole subject: kq_principal_of checks the match spans it */
    if (strlen(pattern) > 1000 || regcomp(&r->re, pattern, REG_EXTENDED) != 0) {
        kq_errf(errbuf, errlen,
                "ssl.principal.mapping.rules: pattern '%.200s' is not a valid extended "
                "regular expression",
                pattern);
        free(pattern);
        free(r->replacement);
        return KQ_ERR_CONFIG;
    }
    free(pattern);
    return 0;
}

int kq_principal_rules_parse(const char *value, kq_principal_rules **out, char *errbuf,
                             size_t errlen)
{
    kq_principal_rules *r = calloc(1, sizeof *r);
    const char *p = value && value[0] ? value : "DEFAULT";
    int rc = 0;

    *out = NULL;
    if (!r) {
        kq_errf(errbuf, errlen, "out of memory");
        return KQ_ERR_NOMEM;
    }
    while (rc == 0) {
        while (*p == ',' || isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        if (r->n == MAX_RULES) {
            kq_errf(errbuf, errlen, "ssl.principal.mapping.rules: more than %d rules", MAX_RULES);
            rc = KQ_ERR_CONFIG;
        } else if (!strncmp(p, "DEFAULT", 7) &&
                   (!p[7] || p[7] == ',' || isspace((unsigned char)p[7]))) {
            r->v[r->n++].is_default = true;
            p += 7;
        } else if (!strncmp(p, "RULE:", 5)) {
            if ((rc = parse_rule(&p, &r->v[r->n], errbuf, errlen)) == 0)
                r->n++;
            if (rc == 0 && *p && *p != ',' && !isspace((unsigned char)*p)) {
                kq_errf(errbuf, errlen,
                        "ssl.principal.mapping.rules: unexpected '%.20s' after a rule", p);
                rc = KQ_ERR_CONFIG;
            }
        } else {
            kq_errf(errbuf, errlen,
                    "ssl.principal.mapping.rules: '%.60s' is not DEFAULT or "
                    "RULE:pattern/replacement/[LU]",
                    p);
            rc = KQ_ERR_CONFIG;
        }
    }
    if (rc) {
        kq_principal_rules_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* replacement with $0 (the whole match) and $1..$9 */
static bool substitute(const rule *r, const char *subject, const regmatch_t *m, char *out,
                       size_t cap)
{
    size_t n = 0;

    for (const char *s = r->replacement; *s; s++) {
        const char *piece = s;
        size_t len = 1;

        if (*s == '$' && s[1] >= '0' && s[1] <= '9') {
            const regmatch_t *g = &m[s[1] - '0'];

            piece = g->rm_so >= 0 ? subject + g->rm_so : "";
            len = g->rm_so >= 0 ? (size_t)(g->rm_eo - g->rm_so) : 0;
            s++;
        } else if (*s == '\\' && s[1]) {
            piece = ++s;
        }
        if (n + len >= cap)
            return false;
        memcpy(out + n, piece, len);
        n += len;
    }
    out[n] = '\0';
    for (size_t i = 0; i < n && r->case_fold; i++)
        out[i] = (char)(r->case_fold == 'L' ? tolower((unsigned char)out[i])
                                            : toupper((unsigned char)out[i]));
    return true;
}

bool kq_principal_of(const kq_principal_rules *r, const char *subject, char *out, size_t cap)
{
    char name[KQ_PRINCIPAL_MAX];

    if (subject && subject[0] && r) {
        for (int i = 0; i < r->n; i++) {
            regmatch_t m[10];

            if (r->v[i].is_default) {
                if ((size_t)snprintf(out, cap, "User:%s", subject) < cap)
                    return true;
                break;
            }
            if (regexec(&r->v[i].re, subject, 10, m, 0) != 0 || m[0].rm_so != 0 ||
                (size_t)m[0].rm_eo != strlen(subject))
                continue;
            if (substitute(&r->v[i], subject, m, name, sizeof name) && name[0] &&
                (size_t)snprintf(out, cap, "User:%s", name) < cap)
                return true;
            break;
        }
    }
    snprintf(out, cap, "%s", KQ_PRINCIPAL_ANONYMOUS);
    return false;
}

int kq_node_principal_template_check(const char *tmpl, char *errbuf, size_t errlen)
{
    const char *id = tmpl ? strstr(tmpl, "{id}") : NULL;

    if (!tmpl || strncmp(tmpl, "User:", 5) != 0 || !id || strstr(id + 4, "{id}") ||
        strlen(tmpl) > 256) {
        kq_errf(errbuf, errlen,
                "node.principal.template: '%.100s' must start with 'User:' and contain '{id}' "
                "once (default %s)",
                tmpl ? tmpl : "", KQ_NODE_PRINCIPAL_TEMPLATE_DEFAULT);
        return KQ_ERR_CONFIG;
    }
    return 0;
}

bool kq_principal_is_node(const char *tmpl, const char *principal, int32_t id)
{
    const char *at = strstr(tmpl, "{id}");
    char want[KQ_PRINCIPAL_MAX];

    if (!at || id < 0 || !principal)
        return false;
    if ((size_t)snprintf(want, sizeof want, "%.*s%" PRId32 "%s", (int)(at - tmpl), tmpl, id,
                         at + 4) >= sizeof want)
        return false;
    return strcmp(want, principal) == 0;
}
