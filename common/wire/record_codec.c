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
#include "wire.h"

#define fail(code, errbuf, errlen, ...) kq_wire_fail(errbuf, errlen, code, __VA_ARGS__)

/* ---- encode ------------------------------------------------------------------------------- */

/* Validate r and pack it onto the end of b, after a varint length prefix when `prefixed` (the
 * kq_record_append framing). b is unchanged on failure. */
static int pack(const kq_record *r, kq_buf *b, bool prefixed, char *errbuf, size_t errlen)
{
    int rc;

    if ((rc = kq_record_validate(r, errbuf, errlen)))
        return rc;
    if ((rc = kq_wire_record_pack((uint32_t)r->type, &r->register_broker, b, prefixed)))
        return fail(rc, errbuf, errlen, "%s %s a %s record",
                    rc == KQ_ERR_NOMEM ? "out of memory" : "a list without its array in",
                    prefixed ? "appending" : "encoding", kq_rec_type_name(r->type));
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

/* Convert an unpacked message into *out (which owns its memory). */
static int convert(const Kq__Record *m, kq_record *out, char *errbuf, size_t errlen)
{
    const ProtobufCFieldDescriptor *fd;
    const kq_wire_msg *t = kq_wire_record_table(m->body_case, &fd);
    int rc;

    memset(out, 0, sizeof *out);
    out->type = KQ_REC_NOOP;
    if (!t)
        return fail(KQ_ERR_MALFORMED, errbuf, errlen, "record has no known body (case %d)",
                    (int)m->body_case);
    out->type = (kq_rec_type)m->body_case;
    rc = kq_wire_decode(t, *(ProtobufCMessage *const *)((const char *)m + fd->offset),
                        &out->register_broker, NULL, errbuf, errlen);
    if (!rc)
        rc = kq_record_validate(out, errbuf, errlen);
    if (rc)
        kq_record_free(out);
    return rc;
}

int kq_record_decode(const uint8_t *buf, size_t len, kq_record *out, char *errbuf, size_t errlen)
{
    bool nul = false;
    static const uint8_t empty[1];
    Kq__Record *m;
    int rc;

    memset(out, 0, sizeof *out);
    out->type = KQ_REC_NOOP;
    if (!buf && len)
        return fail(KQ_ERR_MALFORMED, errbuf, errlen, "no input");
    m = (Kq__Record *)kq_pb_unpack(&kq__record__descriptor, len ? buf : empty, len, KQ_PB_REQUEST,
                                   &rc, &nul, errbuf, errlen);
    if (!m && rc == KQ_ERR_MALFORMED)
        return fail(KQ_ERR_MALFORMED, errbuf, errlen,
                    "record of %zu bytes does not parse as kq.Record", len);
    if (!m)
        return rc;
    if (nul) {
        kq__record__free_unpacked(m, NULL);
        return fail(KQ_ERR_MALFORMED, errbuf, errlen, "record holds a string with a NUL byte");
    }
    rc = convert(m, out, errbuf, errlen);
    kq__record__free_unpacked(m, NULL);
    return rc;
}

int kq_record_describe_raw(const uint8_t *buf, size_t len, char *desc, size_t cap)
{
    static const uint8_t empty[1];
    const ProtobufCFieldDescriptor *f = NULL;
    const ProtobufCMessageDescriptor *md;
    Kq__Record *m;
    size_t n;
    int rc;

    if ((!buf && len) || !desc || !cap)
        return KQ_ERR_MALFORMED;
    m = (Kq__Record *)kq_pb_unpack(&kq__record__descriptor, len ? buf : empty, len, KQ_PB_REQUEST,
                                   &rc, NULL, NULL, 0);
    if (!m)
        return KQ_ERR_MALFORMED;
    if (m->body_case != KQ__RECORD__BODY__NOT_SET)
        f = protobuf_c_message_descriptor_get_field(&kq__record__descriptor,
                                                    (unsigned)m->body_case);
    md = f && f->type == PROTOBUF_C_TYPE_MESSAGE ? f->descriptor : NULL;
    kq__record__free_unpacked(m, NULL);
    if (!md || !md->short_name) {
        snprintf(desc, cap, "Unknown bytes=%zu", len);
        return 0;
    }
    n = strlen(md->short_name); /* "TopicRecord": "Topic" */
    if (n > 6 && !strcmp(md->short_name + n - 6, "Record"))
        n -= 6;
    snprintf(desc, cap, "%.*s bytes=%zu", (int)n, md->short_name, len);
    return 0;
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
    case KQ_REC_KRAFT_VERSION:
        put(&o, " kraft_version=%d", (int)r->kraft_version.kraft_version);
        break;
    case KQ_REC_VOTERS:
        if (r->voters.unsafe_recovery)
            put(&o, " unsafe_recovery=true");
        put(&o, " voters=");
        for (int32_t i = 0; i < r->voters.n_voters; i++) {
            const kq_voter *v = &r->voters.voters[i];
            char d[KQ_UUID_STR_LEN + 1];

            kq_uuid_format(v->key.dir, d);
            put(&o, "%s%d@%s:%d:%s[%d..%d]", i ? "," : "", (int)v->key.id, v->host, (int)v->port, d,
                (int)v->kraft_min, (int)v->kraft_max);
        }
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
    case KQ_REC_ACL: {
        char entry[KQ_REC_MAX_NAME * 2 + 128];

        put_uuid(&o, "id", r->acl.id);
        kq_acl_entry_format(&r->acl, entry, sizeof entry);
        put(&o, " resource=%s:%s:%s %s", kq_acl_resource_type_name(r->acl.resource_type),
            kq_acl_pattern_type_name(r->acl.pattern_type),
            r->acl.resource_name ? r->acl.resource_name : "", entry);
        break;
    }
    case KQ_REC_REMOVE_ACL:
        put_uuid(&o, "id", r->remove_acl.id);
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
    if (kq_image_offset(img) != -1 || c.brokers || c.topics || c.configs || c.features || c.acls)
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

/* ---- quorum records for the Raft core ----------------------------------------------------- */

void kq_control_list_free(kq_control_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->sets[i]);
    free(l->c);
    free(l->sets);
    memset(l, 0, sizeof *l);
}

static int control_push(kq_control_list *l, const kq_raft_control *c, kq_voter_set *set)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        kq_raft_control *nc = realloc(l->c, cap * sizeof *nc);

        if (!nc)
            return KQ_ERR_NOMEM;
        l->c = nc;
        kq_voter_set **ns = realloc(l->sets, cap * sizeof *ns);
        if (!ns)
            return KQ_ERR_NOMEM;
        l->sets = ns;
        l->cap = cap;
    }
    l->c[l->n] = *c;
    l->c[l->n].voters = set;
    l->sets[l->n] = set;
    l->n++;
    return 0;
}

/* The first byte of a packed kq.Record holding a KRaftVersion (field 4) or Voters (field 5)
 * body: the field's tag with wire type 2. */
#define TAG_KRAFT_VERSION ((4 << 3) | 2)
#define TAG_VOTERS ((5 << 3) | 2)

/* The quorum records among `count` records (-1: up to the end of the buffer, stopping at the
 * first other record), at offsets first + i (or all at `first` when one_offset). */
static int add_records(kq_control_list *l, int64_t first, bool one_offset, int32_t count,
                       const uint8_t *records, size_t len, char *errbuf, size_t errlen)
{
    size_t pos = 0, n0 = l->n;
    int rc = 0;

    for (int32_t i = 0; (count < 0 ? pos < len : i < count) && !rc; i++) {
        int64_t off = one_offset ? first : first + i;
        uint64_t n;
        size_t p = pos;
        kq_record r;

        if (!kq_pb_read_varint(records, len, &p, &n) || n > len - p) {
            rc = fail(KQ_ERR_CORRUPT_MESSAGE, errbuf, errlen,
                      "the record at offset %lld runs past its batch", (long long)off);
            break;
        }
        pos = p + (size_t)n;
        if (n == 0 || (records[p] != TAG_KRAFT_VERSION && records[p] != TAG_VOTERS)) {
            if (count < 0)
                break; /* a snapshot's quorum records come first */
            continue;
        }
        char why[200];
        if ((rc = kq_record_decode(records + p, (size_t)n, &r, why, sizeof why))) {
            rc = fail(KQ_ERR_CORRUPT_MESSAGE, errbuf, errlen,
                      "the quorum record at offset %lld does not decode: %s", (long long)off, why);
            break;
        }
        kq_raft_control c = {.offset = off, .kraft_version = -1};
        kq_voter_set *set = NULL;
        if (r.type == KQ_REC_KRAFT_VERSION) {
            c.kraft_version = r.kraft_version.kraft_version;
        } else if (r.type == KQ_REC_VOTERS) {
            if (!(set = calloc(1, sizeof *set))) {
                kq_record_free(&r);
                rc = KQ_ERR_NOMEM;
                break;
            }
            set->n = (int)r.voters.n_voters; /* validated: 1..KQ_RAFT_MAX_VOTERS */
            memcpy(set->v, r.voters.voters, (size_t)set->n * sizeof set->v[0]);
            c.unsafe_recovery = r.voters.unsafe_recovery;
        }
        kq_record_free(&r);
        if (c.kraft_version < 0 && !set)
            continue; /* another body behind the same tag byte cannot be: a decode says */
        if ((rc = control_push(l, &c, set)))
            free(set);
    }
    if (rc) { /* l as before */
        for (size_t i = n0; i < l->n; i++)
            free(l->sets[i]);
        l->n = n0;
        if (rc == KQ_ERR_NOMEM)
            fail(rc, errbuf, errlen, "out of memory reading quorum records");
    }
    return rc;
}

int kq_control_list_add_batch(kq_control_list *l, int64_t base_offset, int32_t count,
                              const uint8_t *records, size_t len, char *errbuf, size_t errlen)
{
    return add_records(l, base_offset < 0 ? -1 : base_offset, base_offset < 0, count, records, len,
                       errbuf, errlen);
}

int kq_control_list_add_snapshot(kq_control_list *l, int64_t end_offset, const uint8_t *payload,
                                 size_t len, char *errbuf, size_t errlen)
{
    return add_records(l, end_offset - 1, true, -1, payload, len, errbuf, errlen);
}

int kq_control_check_batch(void *arg, int64_t base_offset, int32_t count, const uint8_t *records,
                           size_t len, char *errbuf, size_t errlen)
{
    int rc = kq_record_check_batch(NULL, base_offset, count, records, len, errbuf, errlen);

    return rc ? rc
              : kq_control_list_add_batch(arg, base_offset, count, records, len, errbuf, errlen);
}

int kq_control_append(kq_buf *b, const kq_raft_control *c, char *errbuf, size_t errlen)
{
    kq_record r;

    if (!c)
        return fail(KQ_ERR_INVALID_REQUEST, errbuf, errlen, "no quorum record");
    memset(&r, 0, sizeof r);
    if (c->voters) {
        r.type = KQ_REC_VOTERS;
        r.voters.voters = (kq_voter *)c->voters->v;
        r.voters.n_voters = c->voters->n;
        r.voters.unsafe_recovery = c->unsafe_recovery;
    } else {
        r.type = KQ_REC_KRAFT_VERSION;
        r.kraft_version.kraft_version = c->kraft_version;
    }
    return kq_record_append(b, &r, errbuf, errlen);
}

int kq_control_list_read_fetched(kq_control_list *l, kq_raft_batch *batches, size_t n)
{
    size_t first[KQ_RAFT_MAX_BATCHES];
    char why[256];
    int rc = 0;

    kq_control_list_free(l);
    if (n > KQ_RAFT_MAX_BATCHES)
        return KQ_ERR_INVALID_REQUEST;
    for (size_t i = 0; i < n && !rc; i++) {
        first[i] = l->n;
        rc = kq_control_list_add_batch(l, batches[i].base_offset, batches[i].count, batches[i].data,
                                       batches[i].len, why, sizeof why);
    }
    for (size_t i = 0; i < n; i++) { /* the list has stopped growing: point into it */
        size_t end = rc ? 0 : i + 1 < n ? first[i + 1] : l->n;

        batches[i].n_control = rc ? 0 : end - first[i];
        batches[i].control = batches[i].n_control ? &l->c[first[i]] : NULL;
    }
    return rc;
}

int kq_control_append_batch(kq_buf *b, const kq_raft_batch *batch, char *errbuf, size_t errlen)
{
    for (size_t i = 0; i < batch->n_control; i++) {
        int rc = kq_control_append(b, &batch->control[i], errbuf, errlen);

        if (rc)
            return rc;
    }
    return 0;
}

int kq_control_list_move(kq_control_list *dst, kq_control_list *src)
{
    size_t n0 = dst->n;

    for (size_t i = 0; i < src->n; i++)
        if (control_push(dst, &src->c[i], src->sets[i]) != 0) {
            dst->n = n0; /* the sets are still src's */
            return KQ_ERR_NOMEM;
        }
    free(src->c);
    free(src->sets);
    memset(src, 0, sizeof *src);
    return 0;
}

int kq_control_append_snapshot_head(kq_buf *b, int16_t kraft_version, const kq_voter_set *set,
                                    char *errbuf, size_t errlen)
{
    kq_raft_control kv = {.offset = -1, .kraft_version = kraft_version};
    kq_raft_control vs = {.offset = -1, .kraft_version = -1, .voters = set};
    int rc = kq_control_append(b, &kv, errbuf, errlen);

    return rc ? rc : kq_control_append(b, &vs, errbuf, errlen);
}
