/*
 * kq_principal: who a TLS peer is (Kafka's principal, "User:CN=node-1"), and which principal
 * may speak for node N (node.principal.template). A pure module: strings in, strings out.
 *
 * A peer's principal is "User:" + its certificate subject (RFC 2253, kq_tls_pipe_subject)
 * after ssl.principal.mapping.rules, Kafka's syntax: a comma-separated list of
 * RULE:pattern/replacement/[LU] and DEFAULT, tried in order; the first rule whose pattern
 * matches the whole subject gives the name ($1..$9 in the replacement are its groups; /L and
 * /U lower- or upper-case the result), DEFAULT gives the subject itself. Patterns are POSIX
 * extended regular expressions (Java's lazy quantifiers such as .*? are refused). A peer
 * without a verified certificate, or whose subject no rule maps, is User:ANONYMOUS.
 *
 * Ownership: kq_principal_rules_parse's result is the caller's (kq_principal_rules_free).
 * Output strings are written into the caller's buffers.
 */
#ifndef KQ_PRINCIPAL_H
#define KQ_PRINCIPAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KQ_PRINCIPAL_ANONYMOUS "User:ANONYMOUS"
#define KQ_PRINCIPAL_MAX 600 /* "User:" + a mapped subject, with its NUL */
#define KQ_NODE_PRINCIPAL_TEMPLATE_DEFAULT "User:CN=node-{id}"

typedef struct kq_principal_rules kq_principal_rules;

/* Parses ssl.principal.mapping.rules (NULL or "" means DEFAULT). 0, or KQ_ERR_CONFIG with the
 * problem in errbuf (a rule that is not RULE:pattern/replacement/[LU] or DEFAULT, a pattern
 * that does not compile, a lazy quantifier). */
int kq_principal_rules_parse(const char *value, kq_principal_rules **out, char *errbuf,
                             size_t errlen);
void kq_principal_rules_free(kq_principal_rules *r);

/* The principal of a peer whose verified subject is `subject` ("" or NULL: none) into out
 * (cap bytes). Returns true when the peer is identified, false for User:ANONYMOUS (no subject,
 * no matching rule, or a result that does not fit). */
bool kq_principal_of(const kq_principal_rules *r, const char *subject, char *out, size_t cap);

/* Checks node.principal.template: "User:" followed by text with exactly one "{id}". 0 or
 * KQ_ERR_CONFIG naming the key. */
int kq_node_principal_template_check(const char *tmpl, char *errbuf, size_t errlen);
/* Whether `principal` is the principal of node `id` under template tmpl. */
bool kq_principal_is_node(const char *tmpl, const char *principal, int32_t id);

#endif
