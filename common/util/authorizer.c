/*
 * kq_authorizer: StandardAuthorizer's decision. Contract: include/kq/authorizer.h.
 */
#include "kq/authorizer.h"

#include <stdio.h>
#include <string.h>

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
                                             : "Unknown";
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
    if (a->resource_type != (int8_t)type || !a->resource_name)
        return false;
    if (a->pattern_type == KQ_ACL_PATTERN_LITERAL)
        return !strcmp(a->resource_name, "*") || !strcmp(a->resource_name, name);
    if (a->pattern_type == KQ_ACL_PATTERN_PREFIXED)
        return !strncmp(a->resource_name, name, strlen(a->resource_name));
    return false;
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
