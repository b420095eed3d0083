/*
 * Test helpers shared by tests/unit/image and tests/unit/recordcodec: a deterministic PRNG,
 * record builders, and a random record generator driven by the current image (it produces
 * mostly valid records and some that must be rejected). Every record it fills owns its
 * memory (release with kq_record_free).
 */
#ifndef KQ_TEST_IMAGE_GEN_H
#define KQ_TEST_IMAGE_GEN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/image.h"
#include "kq/records.h"

#define GEN_BROKERS 10
#define GEN_TOPICS 12

typedef struct gen {
    uint64_t s;
} gen;

static inline uint64_t gen_next(gen *g)
{
    uint64_t z = (g->s += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline int gen_below(gen *g, int n)
{
    return (int)(gen_next(g) % (uint64_t)n);
}

static inline void gen_tid(int n, uint8_t id[16])
{
    memset(id, 0, 16);
    id[0] = (uint8_t)(n + 1);
    id[7] = 0x5a;
    id[15] = (uint8_t)(0xa0 + n);
}

static inline int32_t *gen_ids(const int32_t *src, int n)
{
    int32_t *p = malloc((size_t)(n ? n : 1) * sizeof *p);

    if (n)
        memcpy(p, src, (size_t)n * sizeof *p);
    return p;
}

static inline kq_rec_ids gen_list(const int32_t *src, int n)
{
    return (kq_rec_ids){gen_ids(src, n), n};
}

/* Builders (results own their memory). */
static inline kq_record rec_register(int32_t id, int64_t epoch, const char *rack)
{
    kq_record r = {.type = KQ_REC_REGISTER_BROKER};

    r.register_broker.broker_id = id;
    r.register_broker.broker_epoch = epoch;
    memset(r.register_broker.incarnation_id, 0x11 + id, 16);
    r.register_broker.n_endpoints = 1;
    r.register_broker.endpoints = calloc(1, sizeof(kq_rec_endpoint));
    r.register_broker.endpoints[0].name = strdup("PLAINTEXT");
    r.register_broker.endpoints[0].host = strdup("localhost");
    r.register_broker.endpoints[0].port = 9092 + id;
    r.register_broker.rack = rack ? strdup(rack) : NULL;
    r.register_broker.fenced = true;
    r.register_broker.registration_offset = -1;
    return r;
}

static inline kq_record rec_broker_change(int32_t id, int64_t epoch, int fenced, int ics)
{
    kq_record r = {.type = KQ_REC_BROKER_REGISTRATION_CHANGE};

    r.broker_change.broker_id = id;
    r.broker_change.broker_epoch = epoch;
    r.broker_change.fenced = (int8_t)fenced;
    r.broker_change.in_controlled_shutdown = (int8_t)ics;
    return r;
}

static inline kq_record rec_unregister(int32_t id, int64_t epoch)
{
    kq_record r = {.type = KQ_REC_UNREGISTER_BROKER};

    r.unregister_broker.broker_id = id;
    r.unregister_broker.broker_epoch = epoch;
    return r;
}

static inline kq_record rec_topic(const char *name, int idn)
{
    kq_record r = {.type = KQ_REC_TOPIC};

    r.topic.name = strdup(name);
    gen_tid(idn, r.topic.topic_id);
    return r;
}

static inline kq_record rec_remove_topic(int idn)
{
    kq_record r = {.type = KQ_REC_REMOVE_TOPIC};

    gen_tid(idn, r.remove_topic.topic_id);
    return r;
}

static inline kq_record rec_partition(int idn, int32_t pid, const int32_t *rep, int nrep,
                                      const int32_t *isr, int nisr, int32_t leader)
{
    kq_record r = {.type = KQ_REC_PARTITION};

    gen_tid(idn, r.partition.topic_id);
    r.partition.partition_id = pid;
    r.partition.replicas = gen_list(rep, nrep);
    r.partition.isr = gen_list(isr, nisr);
    r.partition.elr = gen_list(NULL, 0);
    r.partition.last_known_elr = gen_list(NULL, 0);
    r.partition.leader = leader;
    return r;
}

/* A PartitionChange that changes nothing yet (fill the fields you need). */
static inline kq_record rec_change(int idn, int32_t pid)
{
    kq_record r = {.type = KQ_REC_PARTITION_CHANGE};

    gen_tid(idn, r.partition_change.topic_id);
    r.partition_change.partition_id = pid;
    r.partition_change.leader = KQ_LEADER_UNCHANGED;
    r.partition_change.leader_recovery_state = KQ_RECOVERY_UNCHANGED;
    return r;
}

static inline kq_record rec_config(int type, const char *res, const char *name, const char *val)
{
    kq_record r = {.type = KQ_REC_CONFIG};

    r.config.resource_type = (int8_t)type;
    r.config.resource_name = strdup(res);
    r.config.name = strdup(name);
    r.config.value = val ? strdup(val) : NULL;
    return r;
}

static inline kq_record rec_feature(const char *name, int level)
{
    kq_record r = {.type = KQ_REC_FEATURE_LEVEL};

    r.feature_level.name = strdup(name);
    r.feature_level.level = (int16_t)level;
    return r;
}

/* An ACL binding with id n (1..), on topic `topic` (NULL: the cluster). */
static inline kq_record rec_acl(int n, const char *topic, const char *principal, int op, int perm)
{
    kq_record r = {.type = KQ_REC_ACL};

    r.acl.id[0] = 0xac;
    r.acl.id[15] = (uint8_t)n;
    r.acl.resource_type = topic ? KQ_ACL_RESOURCE_TOPIC : KQ_ACL_RESOURCE_CLUSTER;
    r.acl.resource_name = strdup(topic ? topic : KQ_ACL_CLUSTER_NAME);
    r.acl.pattern_type = KQ_ACL_PATTERN_LITERAL;
    r.acl.principal = strdup(principal);
    r.acl.host = strdup("*");
    r.acl.operation = (int8_t)op;
    r.acl.permission = (int8_t)perm;
    return r;
}

static inline kq_record rec_remove_acl(int n)
{
    kq_record r = {.type = KQ_REC_REMOVE_ACL};

    r.remove_acl.id[0] = 0xac;
    r.remove_acl.id[15] = (uint8_t)n;
    return r;
}

/* A random subset of `from` (order kept), at least `min` long when possible. */
static inline int gen_subset(gen *g, const int32_t *from, int n, int min, int32_t *out)
{
    int k = 0;

    for (int i = 0; i < n; i++)
        if (gen_below(g, 3))
            out[k++] = from[i];
    for (int i = 0; i < n && k < min; i++) {
        int have = 0;

        for (int j = 0; j < k; j++)
            have |= out[j] == from[i];
        if (!have)
            out[k++] = from[i];
    }
    return k;
}

/* Random distinct replicas (1..4) from 0..GEN_BROKERS-1. */
static inline int gen_replicas(gen *g, int32_t *out)
{
    int n = 1 + gen_below(g, 4), k = 0;

    while (k < n) {
        int32_t b = gen_below(g, GEN_BROKERS);
        int have = 0;

        for (int j = 0; j < k; j++)
            have |= out[j] == b;
        if (!have)
            out[k++] = b;
    }
    return n;
}

static const char *const gen_topic_names[GEN_TOPICS] = {
    "orders", "payments", "t.2", "t_3", "t-4", "logs", "x", "metrics", "a.b.c", "Z9", "q", "r",
};

/* Fill *r with a random record given the image (mostly applicable). */
static inline void gen_record(gen *g, const kq_image *img, kq_record *r)
{
    int k = gen_below(g, 100);
    int32_t rep[8], isr[8], elr[8], lke[8];

    if (k < 8) {
        int32_t id = gen_below(g, GEN_BROKERS);
        const kq_broker *b = kq_image_broker(img, id);

        *r = rec_register(id, b && gen_below(g, 2) ? b->epoch : (int64_t)gen_below(g, 1000),
                          gen_below(g, 2) ? "rack-a" : NULL);
        r->register_broker.fenced = gen_below(g, 2);
    } else if (k < 16) {
        int32_t id = gen_below(g, GEN_BROKERS);
        const kq_broker *b = kq_image_broker(img, id);

        *r = rec_broker_change(id, b && gen_below(g, 8) ? b->epoch : 7, gen_below(g, 3) - 1,
                               gen_below(g, 2));
    } else if (k < 19) {
        int32_t id = gen_below(g, GEN_BROKERS);
        const kq_broker *b = kq_image_broker(img, id);

        *r = rec_unregister(id, b && gen_below(g, 4) ? b->epoch : 3);
    } else if (k < 27) {
        int t = gen_below(g, GEN_TOPICS);

        /* Usually a matching (name, id) pair; sometimes a clash. */
        *r = rec_topic(gen_topic_names[t], gen_below(g, 6) ? t : gen_below(g, GEN_TOPICS));
    } else if (k < 30) {
        *r = rec_remove_topic(gen_below(g, GEN_TOPICS));
    } else if (k < 50) {
        int t = gen_below(g, GEN_TOPICS), nr = gen_replicas(g, rep);
        uint8_t id[16];
        const kq_topic *tp;
        int32_t pid;
        int ni = gen_subset(g, rep, nr, 1, isr);

        gen_tid(t, id);
        tp = kq_image_topic_by_id(img, id);
        pid = tp ? tp->n_partitions : 0;
        if (tp && tp->n_partitions && !gen_below(g, 5))
            pid = gen_below(g, tp->n_partitions);
        if (!gen_below(g, 20))
            pid++;
        *r = rec_partition(t, pid, rep, nr, isr, ni, gen_below(g, 6) ? isr[0] : KQ_NO_LEADER);
        free(r->partition.elr.ids);
        r->partition.elr = gen_list(elr, gen_subset(g, rep, nr, 0, elr));
        r->partition.leader_epoch = gen_below(g, 5);
        r->partition.partition_epoch = gen_below(g, 5);
    } else if (k < 85) {
        int t = gen_below(g, GEN_TOPICS);
        uint8_t id[16];
        const kq_topic *tp;
        const kq_partition *p;
        int32_t pid;
        int nr;

        gen_tid(t, id);
        tp = kq_image_topic_by_id(img, id);
        pid = tp && tp->n_partitions ? gen_below(g, tp->n_partitions + (gen_below(g, 10) == 0)) : 0;
        *r = rec_change(t, pid);
        p = kq_image_partition(img, id, pid);
        if (p) {
            nr = p->n_replicas;
            memcpy(rep, kq_partition_replicas(p), (size_t)nr * sizeof *rep);
        } else {
            nr = gen_replicas(g, rep);
        }
        if (!gen_below(g, 5)) {
            nr = gen_replicas(g, rep);
            r->partition_change.has_replicas = true;
            r->partition_change.replicas = gen_list(rep, nr);
        }
        if (r->partition_change.has_replicas || gen_below(g, 2)) {
            int ni = gen_subset(g, rep, nr, gen_below(g, 4) ? 1 : 0, isr);

            r->partition_change.has_isr = true;
            r->partition_change.isr = gen_list(isr, ni);
            switch (gen_below(g, 4)) {
            case 0:
                r->partition_change.leader = ni ? isr[gen_below(g, ni)] : KQ_NO_LEADER;
                break;
            case 1:
                r->partition_change.leader = KQ_NO_LEADER;
                break;
            default:
                break;
            }
        } else if (gen_below(g, 3) == 0) {
            r->partition_change.leader = rep[gen_below(g, nr)];
        }
        if (r->partition_change.has_replicas || gen_below(g, 3) == 0) {
            r->partition_change.has_elr = true;
            r->partition_change.elr = gen_list(elr, gen_subset(g, rep, nr, 0, elr));
        }
        if (r->partition_change.has_replicas || gen_below(g, 4) == 0) {
            r->partition_change.has_last_known_elr = true;
            r->partition_change.last_known_elr = gen_list(lke, gen_below(g, 2) ? 0 : 1);
            if (r->partition_change.last_known_elr.n)
                r->partition_change.last_known_elr.ids[0] = rep[0];
        }
        if (!gen_below(g, 6))
            r->partition_change.leader_recovery_state = (int8_t)gen_below(g, 2);
    } else if (k < 95) {
        static const char *const keys[] = {"min.insync.replicas", "retention.ms",
                                           "unclean.leader.election.enable"};
        char val[16];
        int type = gen_below(g, 2) ? KQ_CONFIG_RESOURCE_TOPIC : KQ_CONFIG_RESOURCE_BROKER;
        const char *res = type == KQ_CONFIG_RESOURCE_TOPIC
                              ? (gen_below(g, 4) ? gen_topic_names[gen_below(g, GEN_TOPICS)] : "")
                              : (gen_below(g, 2) ? "1" : "");

        snprintf(val, sizeof val, "%d", gen_below(g, 100));
        *r = rec_config(type, res, keys[gen_below(g, 3)], gen_below(g, 4) ? val : NULL);
    } else if (k < 98) {
        static const char *const feats[] = {"metadata.version", "kraft.version", "x.feature"};

        *r = rec_feature(feats[gen_below(g, 3)], gen_below(g, 4));
    } else if (k < 99) { /* ids 1..3: adds of an id in use and removes of one not are refused */
        int id = 1 + gen_below(g, 3);

        if (gen_below(g, 2))
            *r = rec_acl(id, gen_below(g, 2) ? gen_topic_names[gen_below(g, GEN_TOPICS)] : NULL,
                         gen_below(g, 2) ? "User:alice" : "User:*", KQ_ACL_OP_DESCRIBE,
                         gen_below(g, 2) ? KQ_ACL_ALLOW : KQ_ACL_DENY);
        else
            *r = rec_remove_acl(id);
    } else {
        *r = (kq_record){.type = KQ_REC_NOOP};
    }
}

#endif
