/*
 * kq_authorizer: Kafka's StandardAuthorizer decision, as a pure function (no I/O, no clock):
 * may principal P, from host H, perform operation O on resource R, given the super users, the
 * ACLs and allow.everyone.if.no.acl.found? Codes are Kafka's (AclOperation, ResourceType,
 * PatternType, AclPermissionType), so ACL records and tools can carry them unchanged.
 *
 * The rules: a super user may do everything. Otherwise the ACLs that match the resource
 * (LITERAL with the same name or the name "*", PREFIXED whose name starts the resource's),
 * the principal (the same, or "User:*") and the host (the same, or "*") decide: any DENY for
 * the operation (or ALL) denies; otherwise an ALLOW for the operation, for ALL, or for an
 * operation that implies it (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS
 * implies DESCRIBE_CONFIGS) allows. With no ACL at all on the resource,
 * allow.everyone.if.no.acl.found decides; else the answer is deny.
 *
 * Ownership: everything is borrowed for the call; the reason is written into the caller's
 * buffer.
 */
#ifndef KQ_AUTHORIZER_H
#define KQ_AUTHORIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kafka's codes. ANY (1) is only a filter value: it matches every value. */
#define KQ_ACL_ANY 1
/* PatternType MATCH (2), a filter value: the ACLs that apply to the named resource (LITERAL
 * with its name or "*", PREFIXED whose name starts it). */
#define KQ_ACL_PATTERN_MATCH 2

typedef enum kq_acl_operation {
    KQ_ACL_OP_ALL = 2,
    KQ_ACL_OP_READ = 3,
    KQ_ACL_OP_WRITE = 4,
    KQ_ACL_OP_CREATE = 5,
    KQ_ACL_OP_DELETE = 6,
    KQ_ACL_OP_ALTER = 7,
    KQ_ACL_OP_DESCRIBE = 8,
    KQ_ACL_OP_CLUSTER_ACTION = 9,
    KQ_ACL_OP_DESCRIBE_CONFIGS = 10,
    KQ_ACL_OP_ALTER_CONFIGS = 11,
    KQ_ACL_OP_IDEMPOTENT_WRITE = 12,
} kq_acl_operation;

typedef enum kq_acl_resource_type {
    KQ_ACL_RESOURCE_TOPIC = 2,
    KQ_ACL_RESOURCE_CLUSTER = 4,
} kq_acl_resource_type;

typedef enum kq_acl_pattern_type {
    KQ_ACL_PATTERN_LITERAL = 3,
    KQ_ACL_PATTERN_PREFIXED = 4,
} kq_acl_pattern_type;

typedef enum kq_acl_permission {
    KQ_ACL_DENY = 2,
    KQ_ACL_ALLOW = 3,
} kq_acl_permission;

/* The name of the cluster resource, as Kafka calls it. */
#define KQ_ACL_CLUSTER_NAME "kafka-cluster"

/* One ACL binding, as an AccessControlEntryRecord (include/kq/records.h) carries it: `id`
 * names it in the log (RemoveAccessControlEntryRecord); the decision does not read it. */
typedef struct kq_acl {
    uint8_t id[16];
    int8_t resource_type; /* kq_acl_resource_type */
    const char *resource_name;
    int8_t pattern_type;   /* kq_acl_pattern_type */
    const char *principal; /* "User:alice", or "User:*" */
    const char *host;      /* an address, or "*" */
    int8_t operation;      /* kq_acl_operation */
    int8_t permission;     /* kq_acl_permission */
} kq_acl;

/* A DescribeAcls / DeleteAcls filter: KQ_ACL_ANY (or NULL for the strings) matches every
 * value; pattern_type KQ_ACL_PATTERN_MATCH matches what applies to resource_name. */
typedef struct kq_acl_filter {
    int8_t resource_type;
    const char *resource_name;
    int8_t pattern_type;
    const char *principal;
    const char *host;
    int8_t operation;
    int8_t permission;
} kq_acl_filter;

/* Whether filter f selects binding a (Kafka's AclBindingFilter.matches). */
bool kq_acl_filter_matches(const kq_acl_filter *f, const kq_acl *a);

/* Whether the filter's values are each a value or ANY/MATCH/NULL (no UNKNOWN, no out-of-range
 * code). 0, or -1 with the problem in err. */
int kq_acl_filter_check(const kq_acl_filter *f, char *err, size_t errlen);

/* Whether a is a binding kq can store and enforce: resource Topic (a valid topic name, a
 * prefix of one, or "*" when literal) or Cluster ("kafka-cluster", literal); pattern LITERAL or
 * PREFIXED; principal "User:NAME" (NAME non-empty, or "*"); host "*" (the peer's address is
 * not known to the decision: a host-scoped ACL could never match); an operation that applies
 * to the resource type (Kafka's table); ALLOW or DENY. 0, or -1 with the problem in err. */
int kq_acl_binding_check(const kq_acl *a, char *err, size_t errlen);

/* Kafka's names, parsed case-insensitively with or without underscores ("DescribeConfigs",
 * "describe_configs"); "Any" only when allow_any. The code, or 0 (UNKNOWN) when not a name. */
int kq_acl_operation_parse(const char *s, bool allow_any);
int kq_acl_pattern_type_parse(const char *s, bool allow_any);

/* Kafka's upper-case enum spelling (READ, DESCRIBE_CONFIGS) of one of the names above, into
 * out (cap > 0 bytes, NUL-terminated). Returns the length. */
size_t kq_acl_enum_name(const char *camel, char *out, size_t cap);

/* A one-line rendering as kafka-acls.sh prints a binding:
 * "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)". */
size_t kq_acl_entry_format(const kq_acl *a, char *buf, size_t cap);

#define KQ_AUTHORIZER_MAX_SUPER_USERS 32

/* authorizer.class.name, super.users, allow.everyone.if.no.acl.found. */
typedef struct kq_authorizer_config {
    bool enabled; /* an authorizer is configured: every admin and client request is checked */
    int n_super_users;
    char super_users[KQ_AUTHORIZER_MAX_SUPER_USERS][160]; /* principals, "User:admin" */
    bool allow_everyone_if_no_acl_found;
} kq_authorizer_config;

/* The class names accepted for authorizer.class.name (Kafka's StandardAuthorizer). */
#define KQ_AUTHORIZER_CLASS "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

/* Parses super.users ("User:a;User:b", as Kafka: semicolon-separated) into cfg. 0, or -1 with
 * the problem in err (an entry without "User:", too many, too long). */
int kq_authorizer_parse_super_users(const char *value, kq_authorizer_config *cfg, char *err,
                                    size_t errlen);

/* The decision: true to allow. On a deny, why (whylen bytes) says "principal P is not allowed
 * to OPERATION on RESOURCE_TYPE NAME" and whether an ACL denied it. cfg->enabled false allows
 * everything. */
bool kq_authorize(const kq_authorizer_config *cfg, const kq_acl *acls, size_t n_acls,
                  const char *principal, const char *host, kq_acl_operation op,
                  kq_acl_resource_type type, const char *name, char *why, size_t whylen);

/* Whether principal is one of super.users (false when the authorizer is off). */
bool kq_authorizer_is_super_user(const kq_authorizer_config *cfg, const char *principal);

/* Kafka's names: "Describe", "Topic", "Prefixed", "Allow"; "Unknown" for others. */
const char *kq_acl_operation_name(int op);
const char *kq_acl_resource_type_name(int type);
const char *kq_acl_pattern_type_name(int type);
const char *kq_acl_permission_name(int permission);

#endif
