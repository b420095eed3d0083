/* The pure parts of `kq topics --alter` (CreatePartitions) and `kq features upgrade |
 * downgrade | disable` (UpdateFeatures): argument parsing and result lines in Kafka's
 * TopicCommand / FeatureCommand style (conventions.md 1.5). */
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq_tools.h"

int kq_tools_new_partition_assignments(const int32_t *ids, int32_t np, int32_t rf, int32_t current,
                                       int32_t total, kq_partition_assignment **out, int32_t *n_out,
                                       char *errbuf, size_t errlen)
{
    kq_partition_assignment *as;
    int32_t add;

    *out = NULL;
    *n_out = 0;
    if (np != total) {
        snprintf(errbuf, errlen,
                 "--replica-assignment lists %d partition(s) but --partitions is %d: list every "
                 "partition, existing ones included",
                 (int)np, (int)total);
        return KQ_ERR_CONFIG;
    }
    if (current < 0 || total <= current)
        return 0;
    add = total - current;
    as = calloc((size_t)add, sizeof *as);
    if (!as) {
        snprintf(errbuf, errlen, "out of memory");
        return KQ_ERR_NOMEM;
    }
    for (int32_t i = 0; i < add; i++)
        as[i] =
            (kq_partition_assignment){current + i, ids + (size_t)(current + i) * (size_t)rf, rf};
    *out = as;
    *n_out = add;
    return 0;
}

static const char *op_verb(kq_tools_feature_op op)
{
    switch (op) {
    case KQ_TOOLS_FEATURE_UPGRADE:
        return "upgrade";
    case KQ_TOOLS_FEATURE_DOWNGRADE:
        return "downgrade";
    default:
        return "disable";
    }
}

/* One --feature value into out->ups[i] / out->names[i]. */
static int parse_one(kq_tools_feature_op op, const char *v, bool unsafe,
                     kq_tools_feature_updates *out, int32_t i, char *errbuf, size_t errlen)
{
    const char *eq = strchr(v, '=');
    size_t name_len = eq ? (size_t)(eq - v) : strlen(v);
    int64_t level = 0;

    if (op == KQ_TOOLS_FEATURE_DISABLE && eq) {
        snprintf(errbuf, errlen, "--feature: '%s' is not a feature name (disable takes NAME only)",
                 v);
        return KQ_ERR_CONFIG;
    }
    if (op != KQ_TOOLS_FEATURE_DISABLE &&
        (!eq || !kq_tools_parse_int(eq + 1, INT16_MIN, INT16_MAX, &level))) {
        snprintf(errbuf, errlen, "--feature: '%s' is not of the form NAME=LEVEL", v);
        return KQ_ERR_CONFIG;
    }
    if (name_len == 0) {
        snprintf(errbuf, errlen, "--feature: '%s' has an empty feature name", v);
        return KQ_ERR_CONFIG;
    }
    if (name_len > KQ_TOOLS_FEATURE_NAME_MAX) {
        snprintf(errbuf, errlen, "--feature: the feature name '%.32s...' is longer than %d bytes",
                 v, KQ_TOOLS_FEATURE_NAME_MAX);
        return KQ_ERR_CONFIG;
    }
    if (level < 0) {
        snprintf(errbuf, errlen, "--feature: '%s': the level must be between 0 and 32767", v);
        return KQ_ERR_CONFIG;
    }
    memcpy(out->names[i], v, name_len);
    out->names[i][name_len] = '\0';
    for (int32_t j = 0; j < i; j++)
        if (strcmp(out->names[j], out->names[i]) == 0) {
            snprintf(errbuf, errlen, "--feature: feature %s is given more than once",
                     out->names[i]);
            return KQ_ERR_CONFIG;
        }
    out->ups[i].name = out->names[i];
    out->ups[i].max_version_level = (int16_t)level;
    out->ups[i].upgrade_type = op == KQ_TOOLS_FEATURE_UPGRADE ? KQ_FEATURE_UPGRADE
                               : unsafe                       ? KQ_FEATURE_UNSAFE_DOWNGRADE
                                                              : KQ_FEATURE_SAFE_DOWNGRADE;
    return 0;
}

int kq_tools_parse_feature_updates(kq_tools_feature_op op, const char *const *values, int n,
                                   bool unsafe, kq_tools_feature_updates *out, char *errbuf,
                                   size_t errlen)
{
    int rc;

    out->n = 0;
    if (n <= 0) {
        snprintf(errbuf, errlen, "%s needs at least one --feature", op_verb(op));
        return KQ_ERR_CONFIG;
    }
    if (n > KQ_TOOLS_MAX_FEATURES) {
        snprintf(errbuf, errlen, "at most %d --feature options", KQ_TOOLS_MAX_FEATURES);
        return KQ_ERR_CONFIG;
    }
    if (unsafe && op == KQ_TOOLS_FEATURE_UPGRADE) {
        snprintf(errbuf, errlen, "--unsafe goes with downgrade and disable, not upgrade");
        return KQ_ERR_CONFIG;
    }
    for (int i = 0; i < n; i++) {
        rc = parse_one(op, values[i], unsafe, out, i, errbuf, errlen);
        if (rc) {
            out->n = 0;
            return rc;
        }
    }
    out->n = n;
    return 0;
}

static const kq_ctl_item_result *find_result(const kq_ctl_item_results *r, const char *name)
{
    for (int32_t i = 0; r && i < r->n; i++)
        if (r->items[i].name && strcmp(r->items[i].name, name) == 0)
            return &r->items[i];
    return NULL;
}

int kq_tools_print_feature_results(FILE *f, kq_tools_feature_op op,
                                   const kq_tools_feature_updates *u, const kq_ctl_item_results *r,
                                   bool dry_run)
{
    const char *verb = op_verb(op);
    int failed = 0;

    for (int32_t i = 0; i < u->n; i++) {
        const kq_feature_update *up = &u->ups[i];
        const kq_ctl_item_result *it = find_result(r, up->name);
        const char *err_name, *msg;

        if (it && it->error == 0) {
            if (op == KQ_TOOLS_FEATURE_DISABLE)
                fprintf(f, "%s %s disabled.\n", up->name, dry_run ? "can be" : "was");
            else
                fprintf(f, "%s %s %sd to %d.\n", up->name, dry_run ? "can be" : "was", verb,
                        (int)up->max_version_level);
            continue;
        }
        failed++;
        if (it) {
            err_name = kq_err_name(it->error);
            msg = it->message && it->message[0] ? it->message : kq_err_message(it->error);
        } else {
            err_name = "UNKNOWN_SERVER_ERROR";
            msg = "the controller sent no result for this feature";
        }
        if (op == KQ_TOOLS_FEATURE_DISABLE)
            fprintf(f, "Could not disable %s. %s: %s\n", up->name, err_name, msg);
        else
            fprintf(f, "Could not %s %s to %d. %s: %s\n", verb, up->name,
                    (int)up->max_version_level, err_name, msg);
    }
    return failed;
}
