/*
 * kq_authorizer: StandardAuthorizer's decision. Contract: include/kq/authorizer.h.
 */
#include "kq/authorizer.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "kq/util.h"

const char *kq_acl_operation_name(int op)
{
    switch (op) {
    case KQ_ACL_OP_ALL:
        return "All";
    case KQ_ACL_OP_READ:
        return "Read";
    case KQ_ACL_OP_WRITE:
        return "Write";
    case KQ_ACL_OP_CREATE:
        return "Create";
    case KQ_ACL_OP_DELETE:
        return "Delete";
    case KQ_ACL_OP_ALTER:
        return "Alter";
    case KQ_ACL_OP_DESCRIBE:
        return "Describe";
    case KQ_ACL_OP_CLUSTER_ACTION:
        return "ClusterAction";
    case KQ_ACL_OP_DESCRIBE_CONFIGS:
        return "DescribeConfigs";
    case KQ_ACL_OP_ALTER_CONFIGS:
        return "AlterConfigs";
    case KQ_ACL_OP_IDEMPOTENT_WRITE:
        return "IdempotentWrite";
    default:
        return "Unknown";
    }
}

const char *kq_acl_resource_type_name(int type)
{
    return type == KQ_ACL_RESOURCE_TOPIC     ? "Topic"
           : type == KQ_ACL_RESOURCE_CLUSTER ? "Cluster"
           : type == KQ_ACL_ANY              ? "Any"
                                             : "Unknown";
}

const char *kq_acl_pattern_type_name(int type)
{
    return type == KQ_ACL_PATTERN_LITERAL    ? "Literal"
           : type == KQ_ACL_PATTERN_PREFIXED ? "Prefixed"
           : type == KQ_ACL_PATTERN_MATCH    ? "Match"
           : type == KQ_ACL_ANY              ? "Any"
                                             : "Unknown";
}

const char *kq_acl_permission_name(int permission)
{
    return permission == KQ_ACL_ALLOW  ? "Allow"
           : permission == KQ_ACL_DENY ? "Deny"
           : permission == KQ_ACL_ANY  ? "Any"
                                       : "Unknown";
}

/* "DescribeConfigs", "describe_configs" and "DESCRIBE-CONFIGS" are the same name. */
static bool name_equal(const char *a, const char *b)
{
    for (;;) {
        while (*a == '_' || *a == '-')
            a++;
        while (*b == '_' || *b == '-')
            b++;
        if (!*a || !*b)
            return !*a && !*b;
        if (tolower((unsigned char)*a++) != tolower((unsigned char)*b++))
            return false;
    }
}

int kq_acl_operation_parse(const char *s, bool allow_any)
{
    if (!s)
        return 0;
    if (allow_any && name_equal(s, "Any"))
        return KQ_ACL_ANY;
    for (int op = KQ_ACL_OP_ALL; op <= KQ_ACL_OP_IDEMPOTENT_WRITE; op++)
        if (name_equal(s, kq_acl_operation_name(op)))
            return op;
    return 0;
}

int kq_acl_pattern_type_parse(const char *s, bool allow_any)
{
    if (!s)
        return 0;
    if (name_equal(s, "Literal"))
        return KQ_ACL_PATTERN_LITERAL;
    if (name_equal(s, "Prefixed"))
        return KQ_ACL_PATTERN_PREFIXED;
    if (allow_any && name_equal(s, "Any"))
        return KQ_ACL_ANY;
    if (allow_any && name_equal(s, "Match"))
        return KQ_ACL_PATTERN_MATCH;
    return 0;
}

size_t kq_acl_enum_name(const char *camel, char *out, size_t cap)
{
    size_t o = 0;

    for (size_t i = 0; camel[i] && o + 2 < cap; i++) {
        if (i && isupper((unsigned char)camel[i]))
            out[o++] = '_';
        out[o++] = (char)toupper((unsigned char)camel[i]);
    }
    out[o] = '\0';
    return o;
}

size_t kq_acl_entry_format(const kq_acl *a, char *buf, size_t cap)
{
    char op[32], perm[16];
    int n;

    kq_acl_enum_name(kq_acl_operation_name(a->operation), op, sizeof op);
    kq_acl_enum_name(kq_acl_permission_name(a->permission), perm, sizeof perm);
    n = snprintf(buf, cap, "(principal=%s, host=%s, operation=%s, permissionType=%s)",
                 a->principal ? a->principal : "", a->host ? a->host : "", op, perm);
    return n < 0 ? 0 : (size_t)n;
}

/* Kafka's AclEntry.supportedOperations for the two resource types kq has. */
static bool operation_applies(int type, int op)
{
    if (op == KQ_ACL_OP_ALL || op == KQ_ACL_OP_ALTER || op == KQ_ACL_OP_DESCRIBE ||
        op == KQ_ACL_OP_CREATE || op == KQ_ACL_OP_DESCRIBE_CONFIGS || op == KQ_ACL_OP_ALTER_CONFIGS)
        return true;
    if (type == KQ_ACL_RESOURCE_TOPIC)
        return op == KQ_ACL_OP_READ || op == KQ_ACL_OP_WRITE || op == KQ_ACL_OP_DELETE;
    return op == KQ_ACL_OP_CLUSTER_ACTION || op == KQ_ACL_OP_IDEMPOTENT_WRITE;
}

/* "User:NAME" with NAME non-empty and printable. */
static bool principal_valid(const char *p)
{
    if (!p || strncmp(p, "User:", 5) || !p[5])
        return false;
    for (; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

int kq_acl_binding_check(const kq_acl *a, char *err, size_t errlen)
{
    const char *name = a->resource_name ? a->resource_name : "";
    const char *what = NULL;

    if (a->resource_type != KQ_ACL_RESOURCE_TOPIC && a->resource_type != KQ_ACL_RESOURCE_CLUSTER)
        what = "the resource type must be Topic or Cluster";
    else if (a->pattern_type != KQ_ACL_PATTERN_LITERAL &&
             a->pattern_type != KQ_ACL_PATTERN_PREFIXED)
        what = "the pattern type must be Literal or Prefixed";
    else if (a->resource_type == KQ_ACL_RESOURCE_CLUSTER &&
             (strcmp(name, KQ_ACL_CLUSTER_NAME) || a->pattern_type != KQ_ACL_PATTERN_LITERAL))
        what = "the cluster resource is the literal name " KQ_ACL_CLUSTER_NAME;
    else if (a->resource_type == KQ_ACL_RESOURCE_TOPIC &&
             !(!strcmp(name, "*") && a->pattern_type == KQ_ACL_PATTERN_LITERAL) &&
             !kq_topic_name_valid(name))
        what = "the topic name (or prefix) is not a valid topic name, nor a literal *";
    else if (!principal_valid(a->principal))
        what = "the principal must be User:NAME (or User:*)";
    else if (!a->host || strcmp(a->host, "*"))
        what = "the host must be * (kq does not scope ACLs by client address)";
    else if (a->operation < KQ_ACL_OP_ALL || a->operation > KQ_ACL_OP_IDEMPOTENT_WRITE ||
             !operation_applies(a->resource_type, a->operation))
        what = "the operation does not apply to the resource type";
    else if (a->permission != KQ_ACL_ALLOW && a->permission != KQ_ACL_DENY)
        what = "the permission must be Allow or Deny";
    if (!what)
        return 0;
    snprintf(err, errlen, "ACL %s %s:%.255s for %.255s, %s %s: %s",
             kq_acl_pattern_type_name(a->pattern_type), kq_acl_resource_type_name(a->resource_type),
             name, a->principal ? a->principal : "(none)", kq_acl_permission_name(a->permission),
             kq_acl_operation_name(a->operation), what);
    return -1;
}

int kq_acl_filter_check(const kq_acl_filter *f, char *err, size_t errlen)
{
    const char *what = NULL;

    if (f->resource_type != KQ_ACL_ANY && f->resource_type != KQ_ACL_RESOURCE_TOPIC &&
        f->resource_type != KQ_ACL_RESOURCE_CLUSTER)
        what = "resource type (Any, Topic or Cluster)";
    else if (f->pattern_type < KQ_ACL_ANY || f->pattern_type > KQ_ACL_PATTERN_PREFIXED)
        what = "pattern type (Any, Match, Literal or Prefixed)";
    else if (f->operation < KQ_ACL_ANY || f->operation > KQ_ACL_OP_IDEMPOTENT_WRITE)
        what = "operation";
    else if (f->permission < KQ_ACL_ANY || f->permission > KQ_ACL_ALLOW)
        what = "permission (Any, Allow or Deny)";
    else if (f->pattern_type == KQ_ACL_PATTERN_MATCH && !f->resource_name)
        what = "pattern type Match without a resource name";
    if (!what)
        return 0;
    snprintf(err, errlen, "ACL filter: invalid %s", what);
    return -1;
}

static bool str_filter(const char *want, const char *have)
{
    return !want || (have && !strcmp(want, have));
}

/* The ACL's pattern covers resource `name` (LITERAL: the name or "*"; PREFIXED: a prefix). */
static bool pattern_covers(const kq_acl *a, const char *name)
{
    if (!a->resource_name)
        return false;
    if (a->pattern_type == KQ_ACL_PATTERN_LITERAL)
        return !strcmp(a->resource_name, "*") || !strcmp(a->resource_name, name);
    if (a->pattern_type == KQ_ACL_PATTERN_PREFIXED)
        return !strncmp(a->resource_name, name, strlen(a->resource_name));
    return false;
}

bool kq_acl_filter_matches(const kq_acl_filter *f, const kq_acl *a)
{
    if (f->resource_type != KQ_ACL_ANY && f->resource_type != a->resource_type)
        return false;
    if (f->pattern_type == KQ_ACL_PATTERN_MATCH) {
        if (!pattern_covers(a, f->resource_name))
            return false;
    } else if ((f->pattern_type != KQ_ACL_ANY && f->pattern_type != a->pattern_type) ||
               !str_filter(f->resource_name, a->resource_name)) {
        return false;
    }
    return str_filter(f->principal, a->principal) && str_filter(f->host, a->host) &&
           (f->operation == KQ_ACL_ANY || f->operation == a->operation) &&
           (f->permission == KQ_ACL_ANY || f->permission == a->permission);
}

int kq_authorizer_parse_super_users(const char *value, kq_authorizer_config *cfg, char *err,
                                    size_t errlen)
{
    cfg->n_super_users = 0;
    for (const char *p = value ? value : ""; *p;) {
        size_t n = strcspn(p, ";");
        const char *e = p + n;

        while (n && (*p == ' ' || *p == '\t')) {
            p++;
            n--;
        }
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n) {
            if (n < 6 || strncmp(p, "User:", 5) != 0) {
                snprintf(err, errlen, "super.users: '%.*s' is not a principal (User:NAME)",
                         (int)(n > 100 ? 100 : n), p);
                return -1;
            }
            if (cfg->n_super_users == KQ_AUTHORIZER_MAX_SUPER_USERS ||
                n >= sizeof cfg->super_users[0]) {
                snprintf(err, errlen, "super.users: more than %d entries, or one longer than %zu",
                         KQ_AUTHORIZER_MAX_SUPER_USERS, sizeof cfg->super_users[0] - 1);
                return -1;
            }
            memcpy(cfg->super_users[cfg->n_super_users], p, n);
            cfg->super_users[cfg->n_super_users++][n] = '\0';
        }
        p = *e ? e + 1 : e;
    }
    return 0;
}

static bool resource_matches(const kq_acl *a, kq_acl_resource_type type, const char *name)
{
    return a->resource_type == (int8_t)type && pattern_covers(a, name);
}

/* Whether an ACL for acl_op covers op (ALL covers everything; READ, WRITE, DELETE and ALTER
 * imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS). */
static bool operation_covers(int acl_op, kq_acl_operation op, bool allow)
{
    if (acl_op == (int)op || acl_op == KQ_ACL_OP_ALL)
        return true;
    if (!allow)
        return false; /* a DENY of READ does not deny DESCRIBE */
    if (op == KQ_ACL_OP_DESCRIBE)
        return acl_op == KQ_ACL_OP_READ || acl_op == KQ_ACL_OP_WRITE ||
               acl_op == KQ_ACL_OP_DELETE || acl_op == KQ_ACL_OP_ALTER;
    if (op == KQ_ACL_OP_DESCRIBE_CONFIGS)
        return acl_op == KQ_ACL_OP_ALTER_CONFIGS;
    return false;
}

bool kq_authorizer_is_super_user(const kq_authorizer_config *cfg, const char *principal)
{
    for (int i = 0; cfg->enabled && principal && i < cfg->n_super_users; i++)
        if (!strcmp(cfg->super_users[i], principal))
            return true;
    return false;
}

bool kq_authorize(const kq_authorizer_config *cfg, const kq_acl *acls, size_t n_acls,
                  const char *principal, const char *host, kq_acl_operation op,
                  kq_acl_resource_type type, const char *name, char *why, size_t whylen)
{
    bool any_on_resource = false, allowed = false;
    const kq_acl *denied_by = NULL;

    if (!cfg->enabled)
        return true;
    principal = principal ? principal : "User:ANONYMOUS";
    host = host ? host : "";
    if (kq_authorizer_is_super_user(cfg, principal))
        return true;
    for (size_t i = 0; i < n_acls; i++) {
        const kq_acl *a = &acls[i];

        if (!resource_matches(a, type, name))
            continue;
        any_on_resource = true;
        if (!a->principal || (strcmp(a->principal, principal) && strcmp(a->principal, "User:*")))
            continue;
        if (!a->host || (strcmp(a->host, host) && strcmp(a->host, "*")))
            continue;
        if (!operation_covers(a->operation, op, a->permission == KQ_ACL_ALLOW))
            continue;
        if (a->permission == KQ_ACL_DENY)
            denied_by = a;
        else if (a->permission == KQ_ACL_ALLOW)
            allowed = true;
    }
    if (!denied_by && (allowed || (!any_on_resource && cfg->allow_everyone_if_no_acl_found)))
        return true;
    snprintf(why, whylen, "principal %s is not allowed to %s on %s %s (%s)", principal,
             kq_acl_operation_name(op), kq_acl_resource_type_name(type), name,
             denied_by         ? "an ACL denies it"
             : any_on_resource ? "no ACL allows it"
                               : "no ACL on the resource, allow.everyone.if.no.acl.found=false");
    return false;
}
