/* Test fixture for the controller decisions: an image plus helpers that write records into it
 * the way the daemon will (apply each record at the next offset, then commit). */
#ifndef KQ_TEST_CONTROLLER_FIXTURE_H
#define KQ_TEST_CONTROLLER_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_control.h"
#include "decide.h"
#include "kq/error.h"
#include "kq/image.h"
#include "partition_change.h"
#include "placement.h"
#include "replication_control.h"

typedef struct fx {
    kq_image *img;
    int64_t next; /* next log offset */
    kq_decide_settings s;
    kq_cc *cc;
    kq_reclist out;
} fx;

static inline fx *fx_new(void)
{
    fx *f = calloc(1, sizeof *f);

    assert_non_null(f);
    f->img = kq_image_new();
    assert_non_null(f->img);
    kq_decide_settings_default(&f->s);
    f->s.cluster_id = "cluster-A";
    f->cc = kq_cc_new(&f->s);
    assert_non_null(f->cc);
    kq_reclist_init(&f->out);
    return f;
}

static inline void fx_free(fx *f)
{
    kq_reclist_free(&f->out);
    kq_cc_free(f->cc);
    kq_image_free(f->img);
    free(f);
}

static inline void fx_apply_rec(fx *f, const kq_record *r)
{
    int rc = kq_image_apply(f->img, f->next, r);

    if (rc)
        fail_msg("apply %s at %lld: %s", kq_rec_type_name(r->type), (long long)f->next,
                 kq_image_error(f->img));
    kq_image_commit(f->img, f->next);
    f->next++;
}

/* Apply and clear f->out. Returns the number of records applied. */
static inline size_t fx_apply(fx *f)
{
    size_t n = f->out.n;

    for (size_t i = 0; i < f->out.n; i++)
        fx_apply_rec(f, &f->out.v[i]);
    kq_reclist_free(&f->out);
    return n;
}

static inline void fx_incarnation(int32_t id, int gen, uint8_t out[16])
{
    memset(out, 0, 16);
    out[0] = (uint8_t)(id + 1);
    out[1] = (uint8_t)gen;
    out[15] = 0x5a;
}

/* Register broker `id` (incarnation generation `gen`) through kq_cc_register; applies. */
static inline int64_t fx_register(fx *f, int32_t id, int gen, const char *rack, int64_t now)
{
    kq_rec_endpoint ep = {.name = "PLAINTEXT", .host = "localhost", .port = 9092 + id};
    kq_broker_registration req = {.broker_id = id,
                                  .cluster_id = "cluster-A",
                                  .endpoints = &ep,
                                  .n_endpoints = 1,
                                  .rack = rack};
    kq_registration_result res;

    fx_incarnation(id, gen, req.incarnation_id);
    if (kq_cc_register(f->cc, f->img, &req, f->next, now, &f->out, &res))
        fail_msg("register %d: %s %s", (int)id, kq_err_name(res.error), res.message);
    fx_apply(f);
    return res.broker_epoch;
}

static inline void fx_broker_change(fx *f, int32_t id, int8_t fenced, int8_t ics)
{
    const kq_broker *b = kq_image_broker(f->img, id);
    kq_record r = {.type = KQ_REC_BROKER_REGISTRATION_CHANGE};

    assert_non_null(b);
    r.broker_change.broker_id = id;
    r.broker_change.broker_epoch = b->epoch;
    r.broker_change.fenced = fenced;
    r.broker_change.in_controlled_shutdown = ics;
    fx_apply_rec(f, &r);
}

/* Register and unfence brokers 1..n (no racks) directly. */
static inline void fx_brokers(fx *f, int n, int64_t now)
{
    for (int32_t id = 1; id <= n; id++) {
        fx_register(f, id, 1, NULL, now);
        fx_broker_change(f, id, KQ_FENCE_UNFENCE, 0);
    }
}

static inline void fx_topic_id(const char *name, uint8_t id[16])
{
    memset(id, 0, 16);
    for (size_t i = 0; name[i] && i < 15; i++)
        id[i] = (uint8_t)name[i];
    id[15] = 0x77;
}

/* Write a topic with one partition in an exact state. */
static inline const kq_topic *fx_partition(fx *f, const char *topic, const int32_t *rep, int nrep,
                                           const int32_t *isr, int nisr, const int32_t *elr,
                                           int nelr, const int32_t *lke, int nlke, int32_t leader)
{
    kq_record r = {.type = KQ_REC_TOPIC};

    if (!kq_image_topic_by_name(f->img, topic)) {
        r.topic.name = (char *)topic;
        fx_topic_id(topic, r.topic.topic_id);
        fx_apply_rec(f, &r);
    }
    memset(&r, 0, sizeof r);
    r.type = KQ_REC_PARTITION;
    fx_topic_id(topic, r.partition.topic_id);
    r.partition.partition_id = kq_image_topic_by_name(f->img, topic)->n_partitions;
    r.partition.replicas = (kq_rec_ids){(int32_t *)rep, nrep};
    r.partition.isr = (kq_rec_ids){(int32_t *)isr, nisr};
    r.partition.elr = (kq_rec_ids){(int32_t *)elr, nelr};
    r.partition.last_known_elr = (kq_rec_ids){(int32_t *)lke, nlke};
    r.partition.leader = leader;
    fx_apply_rec(f, &r);
    return kq_image_topic_by_name(f->img, topic);
}

static inline void fx_config(fx *f, int8_t type, const char *res, const char *name,
                             const char *value)
{
    kq_record r = {.type = KQ_REC_CONFIG};

    r.config.resource_type = type;
    r.config.resource_name = (char *)res;
    r.config.name = (char *)name;
    r.config.value = (char *)value;
    fx_apply_rec(f, &r);
}

static inline const kq_partition *fx_part(fx *f, const char *topic, int32_t pid)
{
    const kq_topic *t = kq_image_topic_by_name(f->img, topic);

    assert_non_null(t);
    assert_true(pid < t->n_partitions);
    return &t->partitions[pid];
}

/* "1,2,3" rendering of an id list for comparisons. */
static inline const char *fx_ids(const int32_t *ids, int n, char *buf, size_t cap)
{
    size_t len = 0;

    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%d", i ? "," : "", (int)ids[i]);
    return buf;
}

#define ASSERT_IDS(ids, n, expect)                                                                 \
    do {                                                                                           \
        char b_[256];                                                                              \
        assert_string_equal(fx_ids((ids), (n), b_, sizeof b_), (expect));                          \
    } while (0)

#define ASSERT_ISR(p, e) ASSERT_IDS(kq_partition_isr(p), (p)->n_isr, e)
#define ASSERT_ELR(p, e) ASSERT_IDS(kq_partition_elr(p), (p)->n_elr, e)
#define ASSERT_LKE(p, e) ASSERT_IDS(kq_partition_last_known_elr(p), (p)->n_last_known_elr, e)
#define ASSERT_REPLICAS(p, e) ASSERT_IDS(kq_partition_replicas(p), (p)->n_replicas, e)

#define IDS(...) ((const int32_t[]){__VA_ARGS__}), (int)(sizeof((int32_t[]){__VA_ARGS__}) / 4)
#define NONE NULL, 0

#endif
