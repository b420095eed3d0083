/* Shared pieces of the controller's pure decisions: record lists, settings, effective configs. */
#include "decide.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kq/util.h"

void kq_reclist_init(kq_reclist *l)
{
    l->v = NULL;
    l->n = 0;
    l->cap = 0;
}

void kq_reclist_truncate(kq_reclist *l, size_t n)
{
    if (!l)
        return;
    while (l->n > n)
        kq_record_free(&l->v[--l->n]);
}

void kq_reclist_free(kq_reclist *l)
{
    if (!l)
        return;
    kq_reclist_truncate(l, 0);
    free(l->v);
    kq_reclist_init(l);
}

int kq_reclist_push(kq_reclist *l, kq_record *r)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 8;
        kq_record *nv = realloc(l->v, ncap * sizeof *nv);

        if (!nv) {
            kq_record_free(r);
            return KQ_ERR_NOMEM;
        }
        l->v = nv;
        l->cap = ncap;
    }
    l->v[l->n++] = *r;
    memset(r, 0, sizeof *r);
    return 0;
}

void kq_decide_settings_default(kq_decide_settings *s)
{
    memset(s, 0, sizeof *s);
    s->session_timeout_ms = 9000;
    s->num_partitions = 1;
    s->default_replication_factor = 1;
    s->min_insync_replicas = 1;
    s->unclean_leader_election = false;
    s->elr_enabled = true;
    s->auto_leader_rebalance = true;
}

bool kq_decide_parse_bool(const char *v, bool *out)
{
    if (!v)
        return false;
    if (!strcmp(v, "true")) {
        *out = true;
        return true;
    }
    if (!strcmp(v, "false")) {
        *out = false;
        return true;
    }
    return false;
}

bool kq_decide_parse_i64(const char *v, int64_t *out)
{
    char *end = NULL;
    long long x;

    if (!v || !*v || (*v != '-' && (*v < '0' || *v > '9')))
        return false;
    errno = 0;
    x = strtoll(v, &end, 10);
    if (errno || !end || *end)
        return false;
    *out = x;
    return true;
}

/* Topic config, else cluster default (broker resource ""), else NULL. */
static const char *effective(const kq_image *img, const char *topic, const char *key)
{
    const char *v = NULL;

    if (topic)
        v = kq_image_config(img, KQ_CONFIG_RESOURCE_TOPIC, topic, key);
    if (!v)
        v = kq_image_config(img, KQ_CONFIG_RESOURCE_BROKER, "", key);
    return v;
}

int32_t kq_decide_min_isr(const kq_decide_settings *s, const kq_image *img, const char *topic,
                          int32_t rf)
{
    return kq_min_isr_effective(kq_image_min_isr(img, topic, s->min_insync_replicas), rf);
}

bool kq_decide_unclean_enabled(const kq_decide_settings *s, const kq_image *img, const char *topic)
{
    bool b;

    if (kq_decide_parse_bool(effective(img, topic, "unclean.leader.election.enable"), &b))
        return b;
    return s->unclean_leader_election;
}

bool kq_decide_elr_bootstrap(const kq_decide_settings *s, const kq_image *img)
{
    bool b;

    /* A cluster-default value written by an earlier kq (the key is refused now) still says
     * what the cluster ran at. */
    if (kq_decide_parse_bool(effective(img, NULL, "eligible.leader.replicas.enable"), &b))
        return b;
    return s->elr_enabled;
}

bool kq_decide_elr_enabled(const kq_decide_settings *s, const kq_image *img)
{
    /* Kafka's rule: ELR is on while eligible.leader.replicas.version >= 1. Until the active
     * controller has finalized the levels (metadata.version 0: before its first activation),
     * what it will finalize decides. */
    if (kq_image_feature(img, "metadata.version") >= 1)
        return kq_image_feature(img, "eligible.leader.replicas.version") >= 1;
    return kq_decide_elr_bootstrap(s, img);
}

bool kq_decide_auto_rebalance(const kq_decide_settings *s, const kq_image *img)
{
    bool b;

    if (kq_decide_parse_bool(effective(img, NULL, "auto.leader.rebalance.enable"), &b))
        return b;
    return s->auto_leader_rebalance;
}

bool kq_decide_broker_active(const kq_image *img, int32_t id)
{
    const kq_broker *b = kq_image_broker(img, id);

    return b && !b->fenced && !b->in_controlled_shutdown;
}
