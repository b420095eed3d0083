/*
 * kq_recordcodec: metadata records <-> kq.Record protobuf bytes (proto/kq_record.proto), text
 * rendering for kq log-dump, and the protobuf-backed helpers over the image (replay, snapshot
 * write and load). See include/kq/records.h and include/kq/image.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/codec.h"
#include "kq/error.h"
#include "kq/image.h"
#include "kq/records.h"
#include "kq/util.h"

#include "kq_record.pb-c.h"
#include "pb_wire.h"

static int fail(int code, char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(int code, char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (errbuf && errlen) {
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* ---- encode ------------------------------------------------------------------------------- */

static ProtobufCBinaryData bin16(const uint8_t id[16])
{
    return (ProtobufCBinaryData){16, (uint8_t *)id};
}

/* Everything a packed message points to lives in this scratch (freed by the caller). */
typedef struct enc {
    Kq__Record rec;
    union {
        Kq__LeaderChangeRecord lc;
        Kq__NoOpRecord noop;
        Kq__OpaqueRecord op;
        Kq__RegisterBrokerRecord rb;
        Kq__UnregisterBrokerRecord ub;
        Kq__BrokerRegistrationChangeRecord bc;
        Kq__TopicRecord t;
        Kq__PartitionRecord p;
        Kq__PartitionChangeRecord pc;
        Kq__RemoveTopicRecord rt;
        Kq__ConfigRecord c;
        Kq__FeatureLevelRecord f;
    };
    Kq__RegisterBrokerRecord__Endpoint *eps;
    Kq__RegisterBrokerRecord__Endpoint **epp;
    Kq__ReplicaList lists[4];
} enc;

static void set_list(Kq__ReplicaList *l, const kq_rec_ids *ids)
{
    kq__replica_list__init(l);
    l->n_ids = (size_t)ids->n;
    l->ids = ids->ids;
}

static int build(enc *e, const kq_record *r)
{
    kq__record__init(&e->rec);
    e->eps = NULL;
    e->epp = NULL;
    e->rec.body_case = (Kq__Record__BodyCase)r->type;
    switch (r->type) {
    case KQ_REC_LEADER_CHANGE:
        kq__leader_change_record__init(&e->lc);
        e->lc.leader_id = r->leader_change.leader_id;
        e->lc.n_voters = (size_t)r->leader_change.voters.n;
        e->lc.voters = r->leader_change.voters.ids;
        e->lc.n_granting_voters = (size_t)r->leader_change.granting_voters.n;
        e->lc.granting_voters = r->leader_change.granting_voters.ids;
        e->rec.leader_change = &e->lc;
        break;
    case KQ_REC_NOOP:
        kq__no_op_record__init(&e->noop);
        e->rec.noop = &e->noop;
        break;
    case KQ_REC_OPAQUE:
        kq__opaque_record__init(&e->op);
        e->op.data = (ProtobufCBinaryData){r->opaque.len, r->opaque.data};
        e->rec.opaque = &e->op;
        break;
    case KQ_REC_REGISTER_BROKER: {
        const kq_rec_register_broker *b = &r->register_broker;

        kq__register_broker_record__init(&e->rb);
        e->rb.broker_id = b->broker_id;
        e->rb.incarnation_id = bin16(b->incarnation_id);
        e->rb.broker_epoch = b->broker_epoch;
        e->rb.rack = b->rack;
        e->rb.fenced = b->fenced;
        e->rb.in_controlled_shutdown = b->in_controlled_shutdown;
        if (b->registration_offset >= 0) {
            e->rb.has_registration_offset = 1;
            e->rb.registration_offset = b->registration_offset;
        }
        if (b->n_endpoints > 0) {
            e->eps = calloc((size_t)b->n_endpoints, sizeof *e->eps);
            e->epp = calloc((size_t)b->n_endpoints, sizeof *e->epp);
            if (!e->eps || !e->epp)
                return KQ_ERR_NOMEM;
            for (int32_t i = 0; i < b->n_endpoints; i++) {
                kq__register_broker_record__endpoint__init(&e->eps[i]);
                e->eps[i].name = b->endpoints[i].name;
                e->eps[i].host = b->endpoints[i].host;
                e->eps[i].port = b->endpoints[i].port;
                e->epp[i] = &e->eps[i];
            }
            e->rb.n_endpoints = (size_t)b->n_endpoints;
            e->rb.endpoints = e->epp;
        }
        e->rec.register_broker = &e->rb;
        break;
    }
    case KQ_REC_UNREGISTER_BROKER:
        kq__unregister_broker_record__init(&e->ub);
        e->ub.broker_id = r->unregister_broker.broker_id;
        e->ub.broker_epoch = r->unregister_broker.broker_epoch;
        e->rec.unregister_broker = &e->ub;
        break;
    case KQ_REC_BROKER_REGISTRATION_CHANGE:
        kq__broker_registration_change_record__init(&e->bc);
        e->bc.broker_id = r->broker_change.broker_id;
        e->bc.broker_epoch = r->broker_change.broker_epoch;
        e->bc.has_fenced = r->broker_change.fenced != KQ_FENCE_NONE;
        e->bc.fenced = r->broker_change.fenced;
        e->bc.has_in_controlled_shutdown = r->broker_change.in_controlled_shutdown != 0;
        e->bc.in_controlled_shutdown = r->broker_change.in_controlled_shutdown;
        e->rec.broker_registration_change = &e->bc;
        break;
    case KQ_REC_TOPIC:
        kq__topic_record__init(&e->t);
        e->t.name = r->topic.name;
        e->t.topic_id = bin16(r->topic.topic_id);
        e->rec.topic = &e->t;
        break;
    case KQ_REC_PARTITION: {
        const kq_rec_partition *p = &r->partition;

        kq__partition_record__init(&e->p);
        e->p.partition_id = p->partition_id;
        e->p.topic_id = bin16(p->topic_id);
        e->p.n_replicas = (size_t)p->replicas.n;
        e->p.replicas = p->replicas.ids;
        e->p.n_isr = (size_t)p->isr.n;
        e->p.isr = p->isr.ids;
        e->p.n_elr = (size_t)p->elr.n;
        e->p.elr = p->elr.ids;
        e->p.n_last_known_elr = (size_t)p->last_known_elr.n;
        e->p.last_known_elr = p->last_known_elr.ids;
        e->p.leader = p->leader;
        e->p.leader_recovery_state = p->leader_recovery_state;
        e->p.leader_epoch = p->leader_epoch;
        e->p.partition_epoch = p->partition_epoch;
        e->rec.partition = &e->p;
        break;
    }
    case KQ_REC_PARTITION_CHANGE: {
        const kq_rec_partition_change *c = &r->partition_change;

        kq__partition_change_record__init(&e->pc);
        e->pc.partition_id = c->partition_id;
        e->pc.topic_id = bin16(c->topic_id);
        if (c->has_replicas) {
            set_list(&e->lists[0], &c->replicas);
            e->pc.replicas = &e->lists[0];
        }
        if (c->has_isr) {
            set_list(&e->lists[1], &c->isr);
            e->pc.isr = &e->lists[1];
        }
        if (c->has_elr) {
            set_list(&e->lists[2], &c->elr);
            e->pc.elr = &e->lists[2];
        }
        if (c->has_last_known_elr) {
            set_list(&e->lists[3], &c->last_known_elr);
            e->pc.last_known_elr = &e->lists[3];
        }
        e->pc.has_leader = c->leader != KQ_LEADER_UNCHANGED;
        e->pc.leader = c->leader;
        e->pc.has_leader_recovery_state = c->leader_recovery_state != KQ_RECOVERY_UNCHANGED;
        e->pc.leader_recovery_state = c->leader_recovery_state;
        e->rec.partition_change = &e->pc;
        break;
    }
    case KQ_REC_REMOVE_TOPIC:
        kq__remove_topic_record__init(&e->rt);
        e->rt.topic_id = bin16(r->remove_topic.topic_id);
        e->rec.remove_topic = &e->rt;
        break;
    case KQ_REC_CONFIG:
        kq__config_record__init(&e->c);
        e->c.resource_type = r->config.resource_type;
        e->c.resource_name = r->config.resource_name;
        e->c.name = r->config.name;
        e->c.value = r->config.value;
        e->rec.config = &e->c;
        break;
    case KQ_REC_FEATURE_LEVEL:
        kq__feature_level_record__init(&e->f);
        e->f.name = r->feature_level.name;
        e->f.feature_level = r->feature_level.level;
        e->rec.feature_level = &e->f;
        break;
    default:
        return KQ_ERR_INVALID_REQUEST;
    }
    return 0;
}

static void enc_free(enc *e)
{
    free(e->eps);
    free(e->epp);
}

/* Validate r, build it and pack it onto the end of b (grown once), after a varint length
 * prefix when `prefixed` (the kq_record_append framing). b is unchanged on failure. */
static int pack(const kq_record *r, kq_buf *b, bool prefixed, char *errbuf, size_t errlen)
{
    uint8_t hdr[10], *nb;
    size_t sz, h = 0;
    enc e;
    int rc;

    if ((rc = kq_record_validate(r, errbuf, errlen)))
        return rc;
    if ((rc = build(&e, r))) {
        enc_free(&e);
        return fail(rc, errbuf, errlen, "out of memory encoding a %s record",
                    kq_rec_type_name(r->type));
    }
    sz = kq__record__get_packed_size(&e.rec);
    if (prefixed)
        h = kq_pb_put_varint(hdr, sz);
    nb = realloc(b->data, b->len + h + sz + 1);
    if (!nb) {
        enc_free(&e);
        return fail(KQ_ERR_NOMEM, errbuf, errlen, "out of memory %s a record",
                    prefixed ? "appending" : "encoding");
    }
    memcpy(nb + b->len, hdr, h);
    kq__record__pack(&e.rec, nb + b->len + h);
    enc_free(&e);
    b->data = nb;
    b->len += h + sz;
    return 0;
}

int kq_record_encode(const kq_record *r, kq_buf *out, char *errbuf, size_t errlen)
{
    kq_buf b = {0};
    int rc = pack(r, &b, false, errbuf, errlen);

    if (!rc)
        *out = b;
    return rc;
}

int kq_record_append(kq_buf *b, const kq_record *r, char *errbuf, size_t errlen)
{
    if (!b || (!b->data && b->len > 0))
        return fail(KQ_ERR_INVALID_REQUEST, errbuf, errlen, "invalid output buffer");
    return pack(r, b, true, errbuf, errlen);
}

/* ---- decode ------------------------------------------------------------------------------- */

static int take_id(const ProtobufCBinaryData *d, uint8_t out[16], const char *what, char *errbuf,
                   size_t errlen)
{
    if (d->len != 16)
        return fail(KQ_ERR_INVALID_REQUEST, errbuf, errlen, "%s has %zu bytes, expected 16", what,
                    d->len);
    memcpy(out, d->data, 16);
    return 0;
}

static int take_ids(kq_rec_ids *dst, const int32_t *ids, size_t n, const char *what, char *errbuf,
                    size_t errlen)
{
    dst->ids = NULL;
    dst->n = 0;
    if (n > KQ_REC_MAX_REPLICAS)
        return fail(KQ_ERR_INVALID_REQUEST, errbuf, errlen, "%s has %zu entries (max %d)", what, n,
                    KQ_REC_MAX_REPLICAS);
    if (!n)
        return 0;
    dst->ids = malloc(n * sizeof(int32_t));
    if (!dst->ids)
        return fail(KQ_ERR_NOMEM, errbuf, errlen, "out of memory decoding %s", what);
    memcpy(dst->ids, ids, n * sizeof(int32_t));
    dst->n = (int32_t)n;
    return 0;
}

static int take_str(char **dst, const char *s, size_t max, const char *what, char *errbuf,
                    size_t errlen)
{
    *dst = NULL;
    if (!s)
        return 0;
    if (strnlen(s, max + 1) > max)
        return fail(KQ_ERR_INVALID_REQUEST, errbuf, errlen, "%s is longer than %zu bytes", what,
                    max);
    if (!(*dst = strdup(s)))
        return fail(KQ_ERR_NOMEM, errbuf, errlen, "out of memory decoding %s", what);
    return 0;
}

static int range(int64_t v, int64_t lo, int64_t hi, const char *what, char *errbuf, size_t errlen)
{
    if (v < lo || v > hi)
        return fail(KQ_ERR_INVALID_REQUEST, errbuf, errlen, "%s %lld out of range [%lld, %lld]",
                    what, (long long)v, (long long)lo, (long long)hi);
    return 0;
}

/* Convert an unpacked message into *out (which owns its memory). */
static int convert(const Kq__Record *m, kq_record *out, char *errbuf, size_t errlen)
{
    int rc = 0;

    memset(out, 0, sizeof *out);
    switch (m->body_case) {
    case KQ__RECORD__BODY_LEADER_CHANGE:
        out->type = KQ_REC_LEADER_CHANGE;
        out->leader_change.leader_id = m->leader_change->leader_id;
        if (!(rc = take_ids(&out->leader_change.voters, m->leader_change->voters,
                            m->leader_change->n_voters, "LeaderChange voters", errbuf, errlen)))
            rc = take_ids(&out->leader_change.granting_voters, m->leader_change->granting_voters,
                          m->leader_change->n_granting_voters, "LeaderChange granting voters",
                          errbuf, errlen);
        break;
    case KQ__RECORD__BODY_NOOP:
        out->type = KQ_REC_NOOP;
        break;
    case KQ__RECORD__BODY_OPAQUE:
        out->type = KQ_REC_OPAQUE;
        if (m->opaque->data.len > KQ_REC_MAX_OPAQUE) {
            rc = fail(KQ_ERR_INVALID_REQUEST, errbuf, errlen, "Opaque payload too large");
            break;
        }
        if (m->opaque->data.len) {
            out->opaque.data = malloc(m->opaque->data.len);
            if (!out->opaque.data) {
                rc = fail(KQ_ERR_NOMEM, errbuf, errlen, "out of memory decoding Opaque");
                break;
            }
            memcpy(out->opaque.data, m->opaque->data.data, m->opaque->data.len);
            out->opaque.len = m->opaque->data.len;
        }
        break;
    case KQ__RECORD__BODY_REGISTER_BROKER: {
        const Kq__RegisterBrokerRecord *s = m->register_broker;
        kq_rec_register_broker *d = &out->register_broker;

        out->type = KQ_REC_REGISTER_BROKER;
        d->broker_id = s->broker_id;
        d->broker_epoch = s->broker_epoch;
        d->fenced = s->fenced;
        d->in_controlled_shutdown = s->in_controlled_shutdown;
        d->registration_offset = s->has_registration_offset ? s->registration_offset : -1;
        if ((rc = take_id(&s->incarnation_id, d->incarnation_id, "RegisterBroker incarnation id",
                          errbuf, errlen)))
            break;
        if (s->n_endpoints > KQ_REC_MAX_ENDPOINTS) {
            rc = fail(KQ_ERR_INVALID_REQUEST, errbuf, errlen,
                      "RegisterBroker has %zu endpoints (max %d)", s->n_endpoints,
                      KQ_REC_MAX_ENDPOINTS);
            break;
        }
        if (s->n_endpoints) {
            d->endpoints = calloc(s->n_endpoints, sizeof *d->endpoints);
            if (!d->endpoints) {
                rc = fail(KQ_ERR_NOMEM, errbuf, errlen, "out of memory decoding endpoints");
                break;
            }
            d->n_endpoints = (int32_t)s->n_endpoints;
            for (size_t i = 0; i < s->n_endpoints && !rc; i++) {
                d->endpoints[i].port = s->endpoints[i]->port;
                if (!(rc = take_str(&d->endpoints[i].name, s->endpoints[i]->name, KQ_REC_MAX_NAME,
                                    "endpoint name", errbuf, errlen)))
                    rc = take_str(&d->endpoints[i].host, s->endpoints[i]->host, KQ_REC_MAX_NAME,
                                  "endpoint host", errbuf, errlen);
            }
            if (rc)
                break;
        }
        rc = take_str(&d->rack, s->rack, KQ_REC_MAX_NAME, "rack", errbuf, errlen);
        break;
    }
    case KQ__RECORD__BODY_UNREGISTER_BROKER:
        out->type = KQ_REC_UNREGISTER_BROKER;
        out->unregister_broker.broker_id = m->unregister_broker->broker_id;
        out->unregister_broker.broker_epoch = m->unregister_broker->broker_epoch;
        break;
    case KQ__RECORD__BODY_BROKER_REGISTRATION_CHANGE: {
        const Kq__BrokerRegistrationChangeRecord *s = m->broker_registration_change;

        out->type = KQ_REC_BROKER_REGISTRATION_CHANGE;
        out->broker_change.broker_id = s->broker_id;
        out->broker_change.broker_epoch = s->broker_epoch;
        if ((s->has_fenced &&
             (rc = range(s->fenced, -1, 1, "BrokerRegistrationChange fenced", errbuf, errlen))) ||
            (s->has_in_controlled_shutdown &&
             (rc = range(s->in_controlled_shutdown, 0, 1,
                         "BrokerRegistrationChange in_controlled_shutdown", errbuf, errlen))))
            break;
        out->broker_change.fenced = (int8_t)(s->has_fenced ? s->fenced : 0);
        out->broker_change.in_controlled_shutdown =
            (int8_t)(s->has_in_controlled_shutdown ? s->in_controlled_shutdown : 0);
        break;
    }
    case KQ__RECORD__BODY_TOPIC:
        out->type = KQ_REC_TOPIC;
        if (!(rc = take_id(&m->topic->topic_id, out->topic.topic_id, "Topic id", errbuf, errlen)))
            rc = take_str(&out->topic.name, m->topic->name, KQ_REC_MAX_TOPIC_NAME, "topic name",
                          errbuf, errlen);
        break;
    case KQ__RECORD__BODY_PARTITION: {
        const Kq__PartitionRecord *s = m->partition;
        kq_rec_partition *d = &out->partition;

        out->type = KQ_REC_PARTITION;
        d->partition_id = s->partition_id;
        d->leader = s->leader;
        d->leader_epoch = s->leader_epoch;
        d->partition_epoch = s->partition_epoch;
        if ((rc = range(s->leader_recovery_state, 0, 1, "Partition leader recovery state", errbuf,
                        errlen)) ||
            (rc = take_id(&s->topic_id, d->topic_id, "Partition topic id", errbuf, errlen)) ||
            (rc = take_ids(&d->replicas, s->replicas, s->n_replicas, "Partition replicas", errbuf,
                           errlen)) ||
            (rc = take_ids(&d->isr, s->isr, s->n_isr, "Partition isr", errbuf, errlen)) ||
            (rc = take_ids(&d->elr, s->elr, s->n_elr, "Partition elr", errbuf, errlen)) ||
            (rc = take_ids(&d->last_known_elr, s->last_known_elr, s->n_last_known_elr,
                           "Partition last_known_elr", errbuf, errlen)))
            break;
        d->leader_recovery_state = (int8_t)s->leader_recovery_state;
        break;
    }
    case KQ__RECORD__BODY_PARTITION_CHANGE: {
        const Kq__PartitionChangeRecord *s = m->partition_change;
        kq_rec_partition_change *d = &out->partition_change;

        out->type = KQ_REC_PARTITION_CHANGE;
        d->partition_id = s->partition_id;
        d->leader = s->has_leader ? s->leader : KQ_LEADER_UNCHANGED;
        d->leader_recovery_state = KQ_RECOVERY_UNCHANGED;
        if ((rc = take_id(&s->topic_id, d->topic_id, "PartitionChange topic id", errbuf, errlen)))
            break;
        if (s->has_leader_recovery_state) {
            if ((rc = range(s->leader_recovery_state, -1, 1,
                            "PartitionChange leader recovery state", errbuf, errlen)))
                break;
            d->leader_recovery_state = (int8_t)s->leader_recovery_state;
        }
        if ((d->has_replicas = s->replicas != NULL) &&
            (rc = take_ids(&d->replicas, s->replicas->ids, s->replicas->n_ids,
                           "PartitionChange replicas", errbuf, errlen)))
            break;
        if ((d->has_isr = s->isr != NULL) && (rc = take_ids(&d->isr, s->isr->ids, s->isr->n_ids,
                                                            "PartitionChange isr", errbuf, errlen)))
            break;
        if ((d->has_elr = s->elr != NULL) && (rc = take_ids(&d->elr, s->elr->ids, s->elr->n_ids,
                                                            "PartitionChange elr", errbuf, errlen)))
            break;
        if ((d->has_last_known_elr = s->last_known_elr != NULL))
            rc = take_ids(&d->last_known_elr, s->last_known_elr->ids, s->last_known_elr->n_ids,
                          "PartitionChange last_known_elr", errbuf, errlen);
        break;
    }
    case KQ__RECORD__BODY_REMOVE_TOPIC:
        out->type = KQ_REC_REMOVE_TOPIC;
        rc = take_id(&m->remove_topic->topic_id, out->remove_topic.topic_id, "RemoveTopic id",
                     errbuf, errlen);
        break;
    case KQ__RECORD__BODY_CONFIG:
        out->type = KQ_REC_CONFIG;
        if ((rc = range(m->config->resource_type, 0, 127, "Config resource type", errbuf, errlen)))
            break;
        out->config.resource_type = (int8_t)m->config->resource_type;
        if (!(rc = take_str(&out->config.resource_name, m->config->resource_name, KQ_REC_MAX_NAME,
                            "config resource name", errbuf, errlen)) &&
            !(rc = take_str(&out->config.name, m->config->name, KQ_REC_MAX_NAME, "config name",
                            errbuf, errlen)))
            rc = take_str(&out->config.value, m->config->value, KQ_REC_MAX_CONFIG_VALUE,
                          "config value", errbuf, errlen);
        break;
    case KQ__RECORD__BODY_FEATURE_LEVEL:
        out->type = KQ_REC_FEATURE_LEVEL;
        if (!(rc = range(m->feature_level->feature_level, 0, INT16_MAX, "feature level", errbuf,
                         errlen))) {
            out->feature_level.level = (int16_t)m->feature_level->feature_level;
            rc = take_str(&out->feature_level.name, m->feature_level->name, KQ_REC_MAX_NAME,
                          "feature name", errbuf, errlen);
        }
        break;
    default:
        out->type = KQ_REC_NOOP;
        return fail(KQ_ERR_MALFORMED, errbuf, errlen, "record has no known body (case %d)",
                    (int)m->body_case);
    }
    if (!rc)
        rc = kq_record_validate(out, errbuf, errlen);
    if (rc)
        kq_record_free(out);
    return rc;
}

int kq_record_decode(const uint8_t *buf, size_t len, kq_record *out, char *errbuf, size_t errlen)
{
    static const uint8_t empty[1];
    Kq__Record *m;
    int rc;

    memset(out, 0, sizeof *out);
    out->type = KQ_REC_NOOP;
    if (!buf && len)
        return fail(KQ_ERR_MALFORMED, errbuf, errlen, "no input");
    m = (Kq__Record *)kq_pb_unpack(&kq__record__descriptor, len ? buf : empty, len, KQ_PB_REQUEST,
                                   &rc, errbuf, errlen);
    if (!m && rc == KQ_ERR_MALFORMED)
        return fail(KQ_ERR_MALFORMED, errbuf, errlen,
                    "record of %zu bytes does not parse as kq.Record", len);
    if (!m)
        return rc;
    if (!kq_pb_strings_ok(&kq__record__descriptor, len ? buf : empty, len)) {
        kq__record__free_unpacked(m, NULL);
        return fail(KQ_ERR_MALFORMED, errbuf, errlen, "record holds a string with a NUL byte");
    }
    rc = convert(m, out, errbuf, errlen);
    kq__record__free_unpacked(m, NULL);
    return rc;
}

int kq_record_decode_next(const uint8_t *buf, size_t len, size_t *pos, kq_record *out, char *errbuf,
                          size_t errlen)
{
    uint64_t n;
    size_t p = *pos;
    int rc;

    memset(out, 0, sizeof *out);
    out->type = KQ_REC_NOOP;
    if ((!buf && len) || p > len)
        return fail(KQ_ERR_MALFORMED, errbuf, errlen, "invalid position %zu in %zu bytes", p, len);
    if (!kq_pb_read_varint(buf, len, &p, &n) || n > len - p)
        return fail(KQ_ERR_MALFORMED, errbuf, errlen,
                    "record length at byte %zu is truncated or exceeds the %zu bytes left", *pos,
                    len - *pos);
    if ((rc = kq_record_decode(buf + p, (size_t)n, out, errbuf, errlen)))
        return rc;
    *pos = p + (size_t)n;
    return 0;
}

int kq_record_check_batch(void *arg, int64_t base_offset, int32_t count, const uint8_t *records,
                          size_t len, char *errbuf, size_t errlen)
{
    size_t pos = 0;
    (void)arg;
    for (int32_t i = 0; i < count; i++) {
        kq_record r;
        char why[256];
        int rc = kq_record_decode_next(records, len, &pos, &r, why, sizeof why);
        kq_record_free(&r);
        if (rc != 0)
            return fail(rc, errbuf, errlen, "the record at offset %lld does not decode: %s",
                        (long long)(base_offset + i), why);
    }
    if (pos != len)
        return fail(KQ_ERR_CORRUPT_MESSAGE, errbuf, errlen,
                    "the batch at offset %lld has %zu bytes after its %d records",
                    (long long)base_offset, len - pos, (int)count);
    return 0;
}

/* ---- render ------------------------------------------------------------------------------- */

typedef struct rbuf {
    char *b;
    size_t cap, n;
    bool full;
} rbuf;

static void put(rbuf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(rbuf *o, const char *fmt, ...)
{
    va_list ap;
    int k;
    size_t room;

    if (o->full)
        return;
    room = o->cap - o->n;
    va_start(ap, fmt);
    k = vsnprintf(o->b + o->n, room, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    if ((size_t)k < room) {
        o->n += (size_t)k;
        return;
    }
    /* Truncated: end with "..." when there is room for it. */
    o->full = true;
    o->n = o->cap - 1;
    if (o->cap >= 4)
        memcpy(o->b + o->cap - 4, "...", 4);
    o->b[o->n] = '\0';
}

static void put_ids(rbuf *o, const char *label, const kq_rec_ids *l)
{
    put(o, " %s=", label);
    for (int32_t i = 0; i < l->n; i++)
        put(o, "%s%d", i ? "," : "", (int)l->ids[i]);
}

static void put_uuid(rbuf *o, const char *label, const uint8_t id[16])
{
    char s[KQ_UUID_STR_LEN + 1];

    kq_uuid_format(id, s);
    put(o, " %s=%s", label, s);
}

size_t kq_record_render(const kq_record *r, char *buf, size_t cap)
{
    rbuf o = {buf, cap, 0, false};

    if (!buf || !cap)
        return 0;
    buf[0] = '\0';
    if (!r)
        return 0;
    put(&o, "%s", kq_rec_type_name(r->type));
    switch (r->type) {
    case KQ_REC_LEADER_CHANGE:
        put(&o, " leader=%d", (int)r->leader_change.leader_id);
        put_ids(&o, "voters", &r->leader_change.voters);
        put_ids(&o, "granting", &r->leader_change.granting_voters);
        break;
    case KQ_REC_OPAQUE:
        put(&o, " bytes=%zu", r->opaque.len);
        break;
    case KQ_REC_REGISTER_BROKER: {
        const kq_rec_register_broker *b = &r->register_broker;

        put(&o, " id=%d epoch=%lld", (int)b->broker_id, (long long)b->broker_epoch);
        put_uuid(&o, "incarnation", b->incarnation_id);
        put(&o, " fenced=%s controlled_shutdown=%s", b->fenced ? "true" : "false",
            b->in_controlled_shutdown ? "true" : "false");
        if (b->rack)
            put(&o, " rack=%s", b->rack);
        put(&o, " endpoints=");
        for (int32_t i = 0; i < b->n_endpoints; i++)
            put(&o, "%s%s://%s:%d", i ? "," : "", b->endpoints[i].name, b->endpoints[i].host,
                (int)b->endpoints[i].port);
        if (b->registration_offset >= 0)
            put(&o, " registration_offset=%lld", (long long)b->registration_offset);
        break;
    }
    case KQ_REC_UNREGISTER_BROKER:
        put(&o, " id=%d epoch=%lld", (int)r->unregister_broker.broker_id,
            (long long)r->unregister_broker.broker_epoch);
        break;
    case KQ_REC_BROKER_REGISTRATION_CHANGE:
        put(&o, " id=%d epoch=%lld", (int)r->broker_change.broker_id,
            (long long)r->broker_change.broker_epoch);
        if (r->broker_change.fenced)
            put(&o, " fenced=%s", r->broker_change.fenced > 0 ? "fence" : "unfence");
        if (r->broker_change.in_controlled_shutdown)
            put(&o, " controlled_shutdown=true");
        break;
    case KQ_REC_TOPIC:
        put(&o, " name=%s", r->topic.name ? r->topic.name : "");
        put_uuid(&o, "id", r->topic.topic_id);
        break;
    case KQ_REC_PARTITION: {
        const kq_rec_partition *p = &r->partition;

        put_uuid(&o, "topic", p->topic_id);
        put(&o, " partition=%d leader=%d leader_epoch=%d partition_epoch=%d", (int)p->partition_id,
            (int)p->leader, (int)p->leader_epoch, (int)p->partition_epoch);
        put_ids(&o, "replicas", &p->replicas);
        put_ids(&o, "isr", &p->isr);
        put_ids(&o, "elr", &p->elr);
        put_ids(&o, "last_known_elr", &p->last_known_elr);
        if (p->leader_recovery_state == KQ_RECOVERY_RECOVERING)
            put(&o, " recovery=RECOVERING");
        break;
    }
    case KQ_REC_PARTITION_CHANGE: {
        const kq_rec_partition_change *c = &r->partition_change;

        put_uuid(&o, "topic", c->topic_id);
        put(&o, " partition=%d", (int)c->partition_id);
        if (c->leader != KQ_LEADER_UNCHANGED)
            put(&o, " leader=%d", (int)c->leader);
        if (c->has_replicas)
            put_ids(&o, "replicas", &c->replicas);
        if (c->has_isr)
            put_ids(&o, "isr", &c->isr);
        if (c->has_elr)
            put_ids(&o, "elr", &c->elr);
        if (c->has_last_known_elr)
            put_ids(&o, "last_known_elr", &c->last_known_elr);
        if (c->leader_recovery_state != KQ_RECOVERY_UNCHANGED)
            put(&o, " recovery=%s", c->leader_recovery_state ? "RECOVERING" : "RECOVERED");
        break;
    }
    case KQ_REC_REMOVE_TOPIC:
        put_uuid(&o, "id", r->remove_topic.topic_id);
        break;
    case KQ_REC_CONFIG:
        put(&o, " type=%s resource=\"%s\" name=%s",
            r->config.resource_type == KQ_CONFIG_RESOURCE_TOPIC ? "topic" : "broker",
            r->config.resource_name ? r->config.resource_name : "",
            r->config.name ? r->config.name : "");
        if (r->config.value)
            put(&o, " value=\"%s\"", r->config.value);
        else
            put(&o, " deleted");
        break;
    case KQ_REC_FEATURE_LEVEL:
        put(&o, " name=%s level=%d", r->feature_level.name ? r->feature_level.name : "",
            (int)r->feature_level.level);
        break;
    default:
        break;
    }
    return o.n;
}

/* ---- image helpers ------------------------------------------------------------------------ */

int kq_image_replay(kq_image *img, const uint8_t *records, size_t len, int64_t base_offset,
                    int32_t count, char *errbuf, size_t errlen)
{
    size_t pos = 0;

    if (count < 0 || (!records && len) || base_offset < 0 || base_offset > INT64_MAX - count)
        return fail(KQ_ERR_MALFORMED, errbuf, errlen, "invalid batch (count %d)", (int)count);
    for (int32_t i = 0; i < count; i++) {
        kq_record r;
        int rc = kq_record_decode_next(records, len, &pos, &r, errbuf, errlen);

        if (rc)
            return rc;
        rc = kq_image_apply(img, base_offset + i, &r);
        kq_record_free(&r);
        if (rc)
            return fail(rc, errbuf, errlen, "offset %lld: %s", (long long)(base_offset + i),
                        kq_image_error(img));
    }
    if (pos != len)
        return fail(KQ_ERR_MALFORMED, errbuf, errlen, "batch holds %zu bytes after its %d records",
                    len - pos, (int)count);
    return 0;
}

typedef struct snap_writer {
    kq_buf *out;
    int32_t n;
    char err[256];
} snap_writer;

static int snap_cb(void *arg, const kq_record *r)
{
    snap_writer *w = arg;
    int rc = kq_record_append(w->out, r, w->err, sizeof w->err);

    if (!rc)
        w->n++;
    return rc;
}

int kq_image_snapshot_write(const kq_image *img, kq_buf *out, int32_t *n_records)
{
    snap_writer w = {out, 0, ""};
    int rc = kq_image_foreach_record(img, snap_cb, &w);

    if (n_records)
        *n_records = w.n;
    return rc;
}

int kq_image_snapshot_load(kq_image *img, const uint8_t *buf, size_t len, int64_t end_offset,
                           char *errbuf, size_t errlen)
{
    size_t pos = 0;
    int64_t i = 0;
    kq_image_counts c;

    kq_image_get_counts(img, &c);
    if (kq_image_offset(img) != -1 || c.brokers || c.topics || c.configs || c.features)
        return fail(KQ_ERR_INVALID_REQUEST, errbuf, errlen,
                    "a snapshot loads only into an empty image");
    if (end_offset < 0 || (!buf && len))
        return fail(KQ_ERR_INVALID_REQUEST, errbuf, errlen, "invalid snapshot end offset %lld",
                    (long long)end_offset);
    while (pos < len) {
        kq_record r;
        int rc = kq_record_decode_next(buf, len, &pos, &r, errbuf, errlen);

        if (!rc) {
            rc = kq_image_apply_noundo_(img, end_offset - 1, &r);
            kq_record_free(&r);
            if (rc)
                fail(rc, errbuf, errlen, "snapshot record %lld: %s", (long long)i,
                     kq_image_error(img));
        }
        if (rc) {
            kq_image_clear(img); /* never leave a partial image behind */
            return rc;
        }
        i++;
    }
    kq_image_set_offsets_(img, end_offset - 1);
    return 0;
}
