/* Test helper: build a kq_image by applying metadata records directly (no controller
 * decisions), for the ctl codec and kq tool tests. Header-only; needs cmocka included first. */
#ifndef KQ_TEST_CTL_IMAGE_FIXTURE_H
#define KQ_TEST_CTL_IMAGE_FIXTURE_H

#include <stdint.h>
#include <string.h>

#include "kq/image.h"
#include "kq/records.h"

typedef struct cfx {
    kq_image *img;
    int64_t next;
} cfx;

static inline void cfx_init(cfx *f)
{
    f->img = kq_image_new();
    assert_non_null(f->img);
    f->next = 0;
}

static inline void cfx_free(cfx *f)
{
    kq_image_free(f->img);
    f->img = NULL;
}

static inline void cfx_apply(cfx *f, const kq_record *r)
{
    int rc = kq_image_apply(f->img, f->next, r);

    if (rc)
        fail_msg("apply %s: %s", kq_rec_type_name(r->type), kq_image_error(f->img));
    kq_image_commit(f->img, f->next);
    f->next++;
}

/* Broker `id` with one PLAINTEXT endpoint localhost:9092+id, unfenced unless `fenced`. */
static inline void cfx_broker(cfx *f, int32_t id, const char *rack, bool fenced, bool ics)
{
    kq_rec_endpoint ep = {.name = "PLAINTEXT", .host = "localhost", .port = 9092 + id};
    kq_record r = {.type = KQ_REC_REGISTER_BROKER};

    r.register_broker.broker_id = id;
    r.register_broker.incarnation_id[0] = (uint8_t)(id + 1);
    r.register_broker.incarnation_id[15] = 0x5a;
    r.register_broker.broker_epoch = f->next;
    r.register_broker.endpoints = &ep;
    r.register_broker.n_endpoints = 1;
    r.register_broker.rack = (char *)rack;
    r.register_broker.fenced = fenced;
    r.register_broker.in_controlled_shutdown = ics;
    r.register_broker.registration_offset = -1;
    cfx_apply(f, &r);
}

static inline void cfx_topic_id(const char *name, uint8_t id[16])
{
    memset(id, 0, 16);
    for (size_t i = 0; name[i] && i < 15; i++)
        id[i] = (uint8_t)name[i];
    id[15] = 0x77;
}

static inline void cfx_topic(cfx *f, const char *name)
{
    kq_record r = {.type = KQ_REC_TOPIC};

    r.topic.name = (char *)name;
    cfx_topic_id(name, r.topic.topic_id);
    cfx_apply(f, &r);
}

/* Next partition of `topic` (which must exist). Lists are n-terminated by the counts. */
static inline void cfx_partition(cfx *f, const char *topic, const int32_t *rep, int nrep,
                                 const int32_t *isr, int nisr, const int32_t *elr, int nelr,
                                 const int32_t *lke, int nlke, int32_t leader)
{
    kq_record r = {.type = KQ_REC_PARTITION};
    const kq_topic *t = kq_image_topic_by_name(f->img, topic);

    assert_non_null(t);
    cfx_topic_id(topic, r.partition.topic_id);
    r.partition.partition_id = t->n_partitions;
    r.partition.replicas = (kq_rec_ids){(int32_t *)rep, nrep};
    r.partition.isr = (kq_rec_ids){(int32_t *)isr, nisr};
    r.partition.elr = (kq_rec_ids){(int32_t *)elr, nelr};
    r.partition.last_known_elr = (kq_rec_ids){(int32_t *)lke, nlke};
    r.partition.leader = leader;
    r.partition.leader_recovery_state = KQ_RECOVERY_RECOVERED;
    r.partition.leader_epoch = 3;
    r.partition.partition_epoch = 7;
    cfx_apply(f, &r);
}

static inline void cfx_config(cfx *f, int8_t type, const char *resource, const char *name,
                              const char *value)
{
    kq_record r = {.type = KQ_REC_CONFIG};

    r.config.resource_type = type;
    r.config.resource_name = (char *)resource;
    r.config.name = (char *)name;
    r.config.value = (char *)value;
    cfx_apply(f, &r);
}

static inline void cfx_feature(cfx *f, const char *name, int16_t level)
{
    kq_record r = {.type = KQ_REC_FEATURE_LEVEL};

    r.feature_level.name = (char *)name;
    r.feature_level.level = level;
    cfx_apply(f, &r);
}

#endif
