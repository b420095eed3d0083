/*
 * kq log-dump output: metadata-log batches, snapshot files and a broker's partition logs as
 * text in the shape of Kafka's kafka-dump-log.sh (a line per batch, "| offset: ..." per record,
 * metadata records as {"type":"TOPIC_RECORD","data":{...}} payloads), as one line per record
 * (the format tests compare logs with), or as JSON. Pure: it decodes the bytes it is given and
 * writes to a FILE *; tools/cmd_logdump.c does the reading.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kq/codec.h"
#include "kq/data_codec.h"
#include "kq/error.h"
#include "kq/util.h"
#include "kq_tools.h"

/* ---- record types and fields ------------------------------------------------------------- */

const char *kq_tools_record_type_name(kq_rec_type t)
{
    switch (t) {
    case KQ_REC_LEADER_CHANGE:
        return "LEADER_CHANGE";
    case KQ_REC_NOOP:
        return "NO_OP_RECORD";
    case KQ_REC_OPAQUE:
        return "OPAQUE_RECORD";
    case KQ_REC_KRAFT_VERSION:
        return "KRAFT_VERSION";
    case KQ_REC_VOTERS:
        return "KRAFT_VOTERS";
    case KQ_REC_REGISTER_BROKER:
        return "REGISTER_BROKER_RECORD";
    case KQ_REC_UNREGISTER_BROKER:
        return "UNREGISTER_BROKER_RECORD";
    case KQ_REC_BROKER_REGISTRATION_CHANGE:
        return "BROKER_REGISTRATION_CHANGE_RECORD";
    case KQ_REC_TOPIC:
        return "TOPIC_RECORD";
    case KQ_REC_PARTITION:
        return "PARTITION_RECORD";
    case KQ_REC_PARTITION_CHANGE:
        return "PARTITION_CHANGE_RECORD";
    case KQ_REC_REMOVE_TOPIC:
        return "REMOVE_TOPIC_RECORD";
    case KQ_REC_CONFIG:
        return "CONFIG_RECORD";
    case KQ_REC_FEATURE_LEVEL:
        return "FEATURE_LEVEL_RECORD";
    case KQ_REC_ACL:
        return "ACCESS_CONTROL_ENTRY_RECORD";
    case KQ_REC_REMOVE_ACL:
        return "REMOVE_ACCESS_CONTROL_ENTRY_RECORD";
    default:
        return "UNKNOWN";
    }
}

static void j_int(kq_json *j, const char *key, int64_t v)
{
    kq_json_key(j, key);
    kq_json_int(j, v);
}

static void j_bool(kq_json *j, const char *key, bool v)
{
    kq_json_key(j, key);
    kq_json_bool(j, v);
}

static void j_str(kq_json *j, const char *key, const char *v)
{
    kq_json_key(j, key);
    kq_json_string(j, v);
}

static void j_uuid(kq_json *j, const char *key, const uint8_t id[16])
{
    char s[KQ_UUID_STR_LEN + 1];

    kq_uuid_format(id, s);
    j_str(j, key, s);
}

static void j_ids(kq_json *j, const char *key, const kq_rec_ids *l)
{
    kq_json_key(j, key);
    kq_json_begin_array(j);
    for (int32_t i = 0; i < l->n; i++)
        kq_json_int(j, l->ids[i]);
    kq_json_end_array(j);
}

/* Kafka's LeaderChangeMessage lists voters as [{"voterId": n}]. */
static void j_voters(kq_json *j, const char *key, const kq_rec_ids *l)
{
    kq_json_key(j, key);
    kq_json_begin_array(j);
    for (int32_t i = 0; i < l->n; i++) {
        kq_json_begin_object(j);
        j_int(j, "voterId", l->ids[i]);
        kq_json_end_object(j);
    }
    kq_json_end_array(j);
}

static void j_empty_array(kq_json *j, const char *key)
{
    kq_json_key(j, key);
    kq_json_begin_array(j);
    kq_json_end_array(j);
}

void kq_tools_record_data_json(kq_json *j, const kq_record *r)
{
    kq_json_begin_object(j);
    switch (r->type) {
    case KQ_REC_LEADER_CHANGE:
        j_int(j, "leaderId", r->leader_change.leader_id);
        j_voters(j, "voters", &r->leader_change.voters);
        j_voters(j, "grantingVoters", &r->leader_change.granting_voters);
        break;
    case KQ_REC_OPAQUE:
        j_int(j, "size", (int64_t)r->opaque.len);
        break;
    case KQ_REC_KRAFT_VERSION:
        j_int(j, "version", r->kraft_version.version);
        j_int(j, "kRaftVersion", r->kraft_version.kraft_version);
        break;
    case KQ_REC_VOTERS: /* Kafka's VotersRecord, with kq's one controller endpoint per voter */
        j_int(j, "version", r->voters.version);
        if (r->voters.unsafe_recovery)
            j_bool(j, "unsafeRecovery", true);
        kq_json_key(j, "voters");
        kq_json_begin_array(j);
        for (int32_t i = 0; i < r->voters.n_voters; i++) {
            const kq_voter *v = &r->voters.voters[i];

            kq_json_begin_object(j);
            j_int(j, "voterId", v->key.id);
            j_uuid(j, "voterDirectoryId", v->key.dir);
            kq_json_key(j, "endpoints");
            kq_json_begin_array(j);
            kq_json_begin_object(j);
            j_str(j, "name", "CONTROLLER");
            j_str(j, "host", v->host);
            j_int(j, "port", v->port);
            kq_json_end_object(j);
            kq_json_end_array(j);
            kq_json_key(j, "kRaftVersionFeature");
            kq_json_begin_object(j);
            j_int(j, "minSupportedVersion", v->kraft_min);
            j_int(j, "maxSupportedVersion", v->kraft_max);
            kq_json_end_object(j);
            kq_json_end_object(j);
        }
        kq_json_end_array(j);
        break;
    case KQ_REC_REGISTER_BROKER: {
        const kq_rec_register_broker *b = &r->register_broker;

        j_int(j, "brokerId", b->broker_id);
        j_uuid(j, "incarnationId", b->incarnation_id);
        j_int(j, "brokerEpoch", b->broker_epoch);
        kq_json_key(j, "endPoints");
        kq_json_begin_array(j);
        for (int32_t i = 0; i < b->n_endpoints; i++) {
            kq_json_begin_object(j);
            j_str(j, "name", b->endpoints[i].name);
            j_str(j, "host", b->endpoints[i].host);
            j_int(j, "port", b->endpoints[i].port);
            kq_json_end_object(j);
        }
        kq_json_end_array(j);
        j_str(j, "rack", b->rack);
        j_bool(j, "fenced", b->fenced);
        j_bool(j, "inControlledShutdown", b->in_controlled_shutdown);
        if (b->registration_offset >= 0)
            j_int(j, "registrationOffset", b->registration_offset);
        break;
    }
    case KQ_REC_UNREGISTER_BROKER:
        j_int(j, "brokerId", r->unregister_broker.broker_id);
        j_int(j, "brokerEpoch", r->unregister_broker.broker_epoch);
        break;
    case KQ_REC_BROKER_REGISTRATION_CHANGE:
        /* Kafka's encoding too: fenced 1 fence, -1 unfence, 0 no change. */
        j_int(j, "brokerId", r->broker_change.broker_id);
        j_int(j, "brokerEpoch", r->broker_change.broker_epoch);
        j_int(j, "fenced", r->broker_change.fenced);
        j_int(j, "inControlledShutdown", r->broker_change.in_controlled_shutdown);
        break;
    case KQ_REC_TOPIC:
        j_str(j, "name", r->topic.name);
        j_uuid(j, "topicId", r->topic.topic_id);
        break;
    case KQ_REC_PARTITION: {
        const kq_rec_partition *p = &r->partition;

        j_int(j, "partitionId", p->partition_id);
        j_uuid(j, "topicId", p->topic_id);
        j_ids(j, "replicas", &p->replicas);
        j_ids(j, "isr", &p->isr);
        /* kq has no reassignments: these are always empty (the metadata shell's keys). */
        j_empty_array(j, "removingReplicas");
        j_empty_array(j, "addingReplicas");
        j_int(j, "leader", p->leader);
        j_int(j, "leaderRecoveryState", p->leader_recovery_state);
        j_int(j, "leaderEpoch", p->leader_epoch);
        j_int(j, "partitionEpoch", p->partition_epoch);
        j_ids(j, "eligibleLeaderReplicas", &p->elr);
        j_ids(j, "lastKnownElr", &p->last_known_elr);
        break;
    }
    case KQ_REC_PARTITION_CHANGE: {
        const kq_rec_partition_change *c = &r->partition_change;

        j_int(j, "partitionId", c->partition_id);
        j_uuid(j, "topicId", c->topic_id);
        if (c->has_isr)
            j_ids(j, "isr", &c->isr);
        if (c->leader != KQ_LEADER_UNCHANGED)
            j_int(j, "leader", c->leader);
        if (c->has_replicas)
            j_ids(j, "replicas", &c->replicas);
        if (c->leader_recovery_state != KQ_RECOVERY_UNCHANGED)
            j_int(j, "leaderRecoveryState", c->leader_recovery_state);
        if (c->has_elr)
            j_ids(j, "eligibleLeaderReplicas", &c->elr);
        if (c->has_last_known_elr)
            j_ids(j, "lastKnownElr", &c->last_known_elr);
        break;
    }
    case KQ_REC_REMOVE_TOPIC:
        j_uuid(j, "topicId", r->remove_topic.topic_id);
        break;
    case KQ_REC_CONFIG:
        j_int(j, "resourceType", r->config.resource_type);
        j_str(j, "resourceName", r->config.resource_name ? r->config.resource_name : "");
        j_str(j, "name", r->config.name);
        j_str(j, "value", r->config.value);
        break;
    case KQ_REC_FEATURE_LEVEL:
        j_str(j, "name", r->feature_level.name);
        j_int(j, "featureLevel", r->feature_level.level);
        break;
    case KQ_REC_ACL: /* Kafka's AccessControlEntryRecord field names */
        j_uuid(j, "id", r->acl.id);
        j_int(j, "resourceType", r->acl.resource_type);
        j_str(j, "resourceName", r->acl.resource_name);
        j_int(j, "patternType", r->acl.pattern_type);
        j_str(j, "principal", r->acl.principal);
        j_str(j, "host", r->acl.host);
        j_int(j, "operation", r->acl.operation);
        j_int(j, "permissionType", r->acl.permission);
        break;
    case KQ_REC_REMOVE_ACL:
        j_uuid(j, "id", r->remove_acl.id);
        break;
    default: /* NoOp has no fields */
        break;
    }
    kq_json_end_object(j);
}

/* ---- decoding ---------------------------------------------------------------------------- */

/* One decoded record: rec when ok, else the codec's description and the decoder's error. */
typedef struct item {
    kq_record rec;
    bool ok;
    size_t value_size;
    char *desc; /* !ok: malloc'd */
    char *err;  /* !ok: malloc'd */
} item;

static void item_free(item *it)
{
    if (it->ok)
        kq_record_free(&it->rec);
    free(it->desc);
    free(it->err);
    memset(it, 0, sizeof *it);
}

static bool read_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;

    for (unsigned shift = 0; shift < 64; shift += 7) {
        uint8_t b;

        if (*pos >= len)
            return false;
        b = p[(*pos)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* Decodes the length-prefixed record at buf[*pos] (`what` names it in errors). */
static int decode_item(kq_tools_dump *d, const uint8_t *buf, size_t len, size_t *pos,
                       const char *what, int64_t n, item *it)
{
    size_t start = *pos;
    uint64_t vlen;
    char derr[256] = "", desc[512];
    int rc;

    memset(it, 0, sizeof *it);
    if (!read_varint(buf, len, pos, &vlen) || vlen > len - *pos) {
        snprintf(d->err, sizeof d->err,
                 "%s %" PRId64 ": its length at byte %zu is truncated or exceeds the %zu bytes "
                 "left",
                 what, n, start, len - start);
        return KQ_ERR_MALFORMED;
    }
    it->value_size = (size_t)vlen;
    rc = kq_record_decode(buf + *pos, (size_t)vlen, &it->rec, derr, sizeof derr);
    if (rc == KQ_ERR_NOMEM) {
        snprintf(d->err, sizeof d->err, "out of memory decoding %s %" PRId64, what, n);
        return rc;
    }
    if (rc == 0) {
        it->ok = true;
    } else {
        /* Not decodable here: is it a kq.Record at all? */
        if (kq_record_describe_raw(buf + *pos, (size_t)vlen, desc, sizeof desc)) {
            snprintf(d->err, sizeof d->err, "%s %" PRId64 " does not parse as a kq.Record: %s",
                     what, n, derr);
            return KQ_ERR_MALFORMED;
        }
        it->desc = strdup(desc);
        it->err = strdup(derr);
        if (!it->desc || !it->err) {
            item_free(it);
            snprintf(d->err, sizeof d->err, "out of memory");
            return KQ_ERR_NOMEM;
        }
    }
    *pos += (size_t)vlen;
    return 0;
}

static const char *item_desc(kq_tools_dump *d, const item *it)
{
    if (!it->ok)
        return it->desc;
    kq_record_render(&it->rec, d->desc, sizeof d->desc);
    return d->desc;
}

/* {"type": ..., "data": {...}} (or "description" and "error" for an undecodable record). */
static void payload_json(kq_json *j, const item *it)
{
    kq_json_begin_object(j);
    j_str(j, "type", it->ok ? kq_tools_record_type_name(it->rec.type) : "UNKNOWN");
    if (it->ok) {
        kq_json_key(j, "data");
        kq_tools_record_data_json(j, &it->rec);
    } else {
        j_str(j, "description", it->desc);
        j_str(j, "error", it->err);
    }
    kq_json_end_object(j);
}

/* One metadata record: `label` is "offset" (a log) or "index" (a snapshot). */
static void print_item(kq_tools_dump *d, const char *label, int64_t n, int32_t epoch, int64_t batch,
                       const item *it)
{
    kq_json pj;

    switch (d->format) {
    case KQ_TOOLS_DUMP_LINES:
        if (batch >= 0)
            fprintf(d->f, "%s=%" PRId64 " epoch=%" PRId32 " batch=%" PRId64 " %s\n", label, n,
                    epoch, batch, item_desc(d, it));
        else
            fprintf(d->f, "%s=%" PRId64 " %s\n", label, n, item_desc(d, it));
        break;
    case KQ_TOOLS_DUMP_JSON:
        kq_json_begin_object(&d->j);
        j_int(&d->j, label, n);
        j_int(&d->j, "valueSize", (int64_t)it->value_size);
        j_str(&d->j, "type", it->ok ? kq_tools_record_type_name(it->rec.type) : "UNKNOWN");
        j_str(&d->j, "description", item_desc(d, it));
        if (it->ok) {
            kq_json_key(&d->j, "data");
            kq_tools_record_data_json(&d->j, &it->rec);
        } else {
            j_str(&d->j, "error", it->err);
        }
        kq_json_end_object(&d->j);
        break;
    default:
        fprintf(d->f, "| %s: %" PRId64 " valueSize: %zu payload: ", label, n, it->value_size);
        kq_json_init(&pj, d->f);
        payload_json(&pj, it);
        fputc('\n', d->f);
        break;
    }
}

/* ---- metadata log ------------------------------------------------------------------------ */

void kq_tools_dump_init(kq_tools_dump *d, FILE *f, kq_tools_dump_format format, bool print_values)
{
    d->f = f;
    d->format = format;
    d->print_values = print_values;
    kq_json_init(&d->j, f);
    d->n_partitions = d->n_batches = d->n_records = 0;
    d->err[0] = '\0';
    d->desc[0] = '\0';
}

void kq_tools_dump_log_begin(kq_tools_dump *d)
{
    if (d->format != KQ_TOOLS_DUMP_JSON)
        return;
    kq_json_begin_object(&d->j);
    kq_json_key(&d->j, "batches");
    kq_json_begin_array(&d->j);
}

int kq_tools_dump_log_batch(kq_tools_dump *d, const kq_tools_log_batch *b)
{
    item *items;
    size_t pos = 0;
    bool control = true;
    int rc = 0;
    int32_t i, n = 0;

    if (b->count <= 0 || b->base_offset < 0 || b->base_offset > INT64_MAX - b->count ||
        (!b->records && b->len)) {
        snprintf(d->err, sizeof d->err, "batch at offset %" PRId64 " has record count %" PRId32,
                 b->base_offset, b->count);
        return KQ_ERR_MALFORMED;
    }
    items = calloc((size_t)b->count, sizeof *items);
    if (!items) {
        snprintf(d->err, sizeof d->err, "out of memory for a batch of %" PRId32 " records",
                 b->count);
        return KQ_ERR_NOMEM;
    }
    for (; n < b->count; n++) {
        rc = decode_item(d, b->records, b->len, &pos, "record at offset", b->base_offset + n,
                         &items[n]);
        if (rc)
            goto out;
        if (!items[n].ok ||
            (items[n].rec.type != KQ_REC_LEADER_CHANGE &&
             items[n].rec.type != KQ_REC_KRAFT_VERSION && items[n].rec.type != KQ_REC_VOTERS))
            control = false;
    }
    if (pos != b->len) {
        snprintf(d->err, sizeof d->err,
                 "batch at offset %" PRId64 " holds %zu bytes after its %" PRId32 " records",
                 b->base_offset, b->len - pos, b->count);
        rc = KQ_ERR_MALFORMED;
        goto out;
    }

    if (d->format == KQ_TOOLS_DUMP_JSON) {
        kq_json_begin_object(&d->j);
        j_int(&d->j, "baseOffset", b->base_offset);
        j_int(&d->j, "lastOffset", b->base_offset + b->count - 1);
        j_int(&d->j, "count", b->count);
        j_int(&d->j, "partitionLeaderEpoch", b->epoch);
        j_bool(&d->j, "isControl", control);
        j_int(&d->j, "size", (int64_t)b->size);
        j_int(&d->j, "crc", b->crc32c);
        kq_json_key(&d->j, "records");
        kq_json_begin_array(&d->j);
    } else if (d->format == KQ_TOOLS_DUMP_TEXT) {
        fprintf(d->f,
                "baseOffset: %" PRId64 " lastOffset: %" PRId64 " count: %" PRId32
                " partitionLeaderEpoch: %" PRId32 " isControl: %s size: %zu crc: %" PRIu32 "\n",
                b->base_offset, b->base_offset + b->count - 1, b->count, b->epoch,
                control ? "true" : "false", b->size, b->crc32c);
    }
    for (i = 0; i < b->count; i++)
        print_item(d, "offset", b->base_offset + i, b->epoch, b->base_offset, &items[i]);
    if (d->format == KQ_TOOLS_DUMP_JSON) {
        kq_json_end_array(&d->j);
        kq_json_end_object(&d->j);
    }
    d->n_batches++;
    d->n_records += b->count;
out:
    for (i = 0; i < n; i++)
        item_free(&items[i]);
    free(items);
    return rc;
}

void kq_tools_dump_log_end(kq_tools_dump *d, const kq_tools_log_summary *s)
{
    if (d->format != KQ_TOOLS_DUMP_JSON) {
        fprintf(d->f,
                "records=%" PRId64 " batches=%" PRId64 " log_start=%" PRId64 " log_end=%" PRId64
                " last_epoch=%" PRId32 " qstate_epoch=%" PRId32 " voted_id=%" PRId32
                " leader_id=%" PRId32 "\n",
                d->n_records, d->n_batches, s->log_start, s->log_end, s->last_epoch,
                s->qstate_epoch, s->voted_id, s->leader_id);
        return;
    }
    kq_json_end_array(&d->j);
    kq_json_key(&d->j, "summary");
    kq_json_begin_object(&d->j);
    j_int(&d->j, "records", d->n_records);
    j_int(&d->j, "batches", d->n_batches);
    j_int(&d->j, "log_start", s->log_start);
    j_int(&d->j, "log_end", s->log_end);
    j_int(&d->j, "last_epoch", s->last_epoch);
    j_int(&d->j, "qstate_epoch", s->qstate_epoch);
    j_int(&d->j, "voted_id", s->voted_id);
    j_int(&d->j, "leader_id", s->leader_id);
    kq_json_end_object(&d->j);
    kq_json_end_object(&d->j);
    fputc('\n', d->f);
}

/* ---- snapshot ---------------------------------------------------------------------------- */

int kq_tools_dump_snapshot(kq_tools_dump *d, const kq_tools_snapshot_info *info,
                           const uint8_t *payload, size_t len)
{
    size_t pos = 0;
    int64_t n = 0;
    int rc = 0;

    if (!payload && len) {
        snprintf(d->err, sizeof d->err, "no snapshot payload");
        return KQ_ERR_MALFORMED;
    }
    if (d->format == KQ_TOOLS_DUMP_JSON) {
        kq_json_begin_object(&d->j);
        kq_json_key(&d->j, "records");
        kq_json_begin_array(&d->j);
    }
    while (pos < len) {
        item it;

        rc = decode_item(d, payload, len, &pos, "snapshot record", n, &it);
        if (rc)
            return rc;
        print_item(d, "index", n, 0, -1, &it);
        item_free(&it);
        n++;
    }
    d->n_records = n;
    if (d->format != KQ_TOOLS_DUMP_JSON) {
        fprintf(d->f,
                "records=%" PRId64 " end_offset=%" PRId64 " epoch=%" PRId32 " size=%" PRId64 "\n",
                n, info->end_offset, info->epoch, info->size);
        return 0;
    }
    kq_json_end_array(&d->j);
    kq_json_key(&d->j, "summary");
    kq_json_begin_object(&d->j);
    j_int(&d->j, "records", n);
    j_int(&d->j, "end_offset", info->end_offset);
    j_int(&d->j, "epoch", info->epoch);
    j_int(&d->j, "size", info->size);
    kq_json_end_object(&d->j);
    kq_json_end_object(&d->j);
    fputc('\n', d->f);
    return 0;
}

/* ---- partition logs ---------------------------------------------------------------------- */

static bool utf8_valid(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = kq_json_utf8_len(p + i, n - i);

        if (!k)
            return false;
        i += k;
    }
    return true;
}

/* A value on a text line: valid UTF-8 as it is, except that a backslash is doubled and
 * control bytes, DEL and bytes that are not UTF-8 print as \xNN, so one record stays one line. */
static void print_value_text(FILE *f, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = kq_json_utf8_len(p + i, n - i);

        if (k == 1 && p[i] == '\\')
            fputs("\\\\", f);
        else if (k == 1 && p[i] >= 0x20 && p[i] != 0x7f)
            fputc(p[i], f);
        else if (k > 1)
            fwrite(p + i, 1, k, f);
        else
            fprintf(f, "\\x%02x", p[i]);
        i += k ? k : 1;
    }
}

/* key: the standard base64 (with padding) of p[0..n). 0 or KQ_ERR_NOMEM. */
static int j_base64(kq_json *j, const char *key, const uint8_t *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1);
    size_t o = 0;

    if (!out)
        return KQ_ERR_NOMEM;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;

        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tab[v & 63] : '=';
    }
    out[o] = '\0';
    j_str(j, key, out);
    free(out);
    return 0;
}

void kq_tools_dump_plog_begin(kq_tools_dump *d)
{
    if (d->format != KQ_TOOLS_DUMP_JSON)
        return;
    kq_json_begin_object(&d->j);
    kq_json_key(&d->j, "partitions");
    kq_json_begin_array(&d->j);
}

void kq_tools_dump_plog_partition(kq_tools_dump *d, const kq_tools_plog_partition *p)
{
    char id[KQ_UUID_STR_LEN + 1];

    kq_uuid_format(p->tp.topic_id, id);
    d->n_partitions++;
    if (d->format != KQ_TOOLS_DUMP_JSON) {
        fprintf(d->f, "topicId: %s partition: %" PRId32, id, p->tp.partition);
        if (p->topic)
            fprintf(d->f, " topic: %s", p->topic);
        fprintf(d->f,
                " logStartOffset: %" PRId64 " logEndOffset: %" PRId64
                " highWatermarkCheckpoint: %" PRId64 " partitionEpoch: %" PRId32
                " leaderEpochCache: ",
                p->state.log_start_offset, p->state.log_end_offset, p->state.high_watermark,
                p->state.partition_epoch);
        for (size_t i = 0; i < p->n_epochs; i++)
            fprintf(d->f, "%s%" PRId32 "@%" PRId64, i ? "," : "", p->epochs[i].epoch,
                    p->epochs[i].start_offset);
        fputs(p->n_epochs ? "\n" : "-\n", d->f);
        return;
    }
    kq_json_begin_object(&d->j);
    j_str(&d->j, "topicId", id);
    j_int(&d->j, "partition", p->tp.partition);
    j_str(&d->j, "topic", p->topic);
    j_int(&d->j, "logStartOffset", p->state.log_start_offset);
    j_int(&d->j, "logEndOffset", p->state.log_end_offset);
    j_int(&d->j, "highWatermarkCheckpoint", p->state.high_watermark);
    j_int(&d->j, "partitionEpoch", p->state.partition_epoch);
    kq_json_key(&d->j, "leaderEpochCache");
    kq_json_begin_array(&d->j);
    for (size_t i = 0; i < p->n_epochs; i++) {
        kq_json_begin_object(&d->j);
        j_int(&d->j, "epoch", p->epochs[i].epoch);
        j_int(&d->j, "startOffset", p->epochs[i].start_offset);
        kq_json_end_object(&d->j);
    }
    kq_json_end_array(&d->j);
    kq_json_key(&d->j, "batches");
    kq_json_begin_array(&d->j);
}

typedef struct value_walk {
    kq_tools_dump *d;
    const kq_plog_batch *b;
    int rc;
} value_walk;

static int count_value(void *arg, int64_t offset, const uint8_t *value, size_t len)
{
    (void)arg;
    (void)offset;
    (void)value;
    (void)len;
    return 0;
}

static int print_value(void *arg, int64_t offset, const uint8_t *value, size_t len)
{
    value_walk *w = arg;
    kq_tools_dump *d = w->d;
    int64_t seq =
        w->b->base_sequence >= 0 ? w->b->base_sequence + (offset - w->b->base_offset) : -1;

    if (d->format != KQ_TOOLS_DUMP_JSON) {
        fprintf(d->f, "| offset: %" PRId64 " valueSize: %zu sequence: %" PRId64, offset, len, seq);
        if (d->print_values) {
            fputs(" payload: ", d->f);
            print_value_text(d->f, value, len);
        }
        fputc('\n', d->f);
        return 0;
    }
    kq_json_begin_object(&d->j);
    j_int(&d->j, "offset", offset);
    j_int(&d->j, "valueSize", (int64_t)len);
    j_int(&d->j, "sequence", seq);
    if (d->print_values) {
        if (utf8_valid(value, len)) {
            kq_json_key(&d->j, "value");
            kq_json_string_n(&d->j, (const char *)value, len);
        } else if ((w->rc = j_base64(&d->j, "valueBase64", value, len)) != 0) {
            return 1;
        }
    }
    kq_json_end_object(&d->j);
    return 0;
}

int kq_tools_dump_plog_batch(kq_tools_dump *d, const kq_plog_batch *b)
{
    value_walk w = {d, b, 0};
    char err[256] = "";
    int64_t last_seq = b->base_sequence >= 0 ? b->base_sequence + b->count - 1 : -1;
    size_t size = KQ_PLOG_BATCH_HEADER_LEN + b->len;

    /* Check the framing first, so that a bad batch prints nothing. */
    if (kq_data_records_walk(b->records, b->len, b->base_offset, b->count, count_value, NULL, err,
                             sizeof err)) {
        snprintf(d->err, sizeof d->err, "batch at offset %" PRId64 " does not decode: %s",
                 b->base_offset, err);
        return KQ_ERR_MALFORMED;
    }
    if (d->format == KQ_TOOLS_DUMP_JSON) {
        kq_json_begin_object(&d->j);
        j_int(&d->j, "baseOffset", b->base_offset);
        j_int(&d->j, "lastOffset", b->base_offset + b->count - 1);
        j_int(&d->j, "count", b->count);
        j_int(&d->j, "baseSequence", b->base_sequence);
        j_int(&d->j, "lastSequence", last_seq);
        j_int(&d->j, "producerId", b->producer_id);
        j_int(&d->j, "producerEpoch", b->producer_epoch);
        j_int(&d->j, "partitionLeaderEpoch", b->leader_epoch);
        j_int(&d->j, "size", (int64_t)size);
        j_int(&d->j, "crc", b->crc32c);
        kq_json_key(&d->j, "records");
        kq_json_begin_array(&d->j);
    } else {
        fprintf(d->f,
                "baseOffset: %" PRId64 " lastOffset: %" PRId64 " count: %" PRId32
                " baseSequence: %" PRId32 " lastSequence: %" PRId64 " producerId: %" PRId64
                " producerEpoch: %d partitionLeaderEpoch: %" PRId32 " size: %zu crc: %" PRIu32 "\n",
                b->base_offset, b->base_offset + b->count - 1, b->count, b->base_sequence, last_seq,
                b->producer_id, (int)b->producer_epoch, b->leader_epoch, size, b->crc32c);
    }
    kq_data_records_walk(b->records, b->len, b->base_offset, b->count, print_value, &w, err,
                         sizeof err);
    if (w.rc) {
        snprintf(d->err, sizeof d->err, "out of memory");
        return w.rc;
    }
    if (d->format == KQ_TOOLS_DUMP_JSON) {
        kq_json_end_array(&d->j);
        kq_json_end_object(&d->j);
    }
    d->n_batches++;
    d->n_records += b->count;
    return 0;
}

void kq_tools_dump_plog_partition_end(kq_tools_dump *d)
{
    if (d->format != KQ_TOOLS_DUMP_JSON)
        return;
    kq_json_end_array(&d->j);
    kq_json_end_object(&d->j);
}

void kq_tools_dump_plog_end(kq_tools_dump *d)
{
    if (d->format != KQ_TOOLS_DUMP_JSON) {
        fprintf(d->f, "partitions=%" PRId64 " batches=%" PRId64 " records=%" PRId64 "\n",
                d->n_partitions, d->n_batches, d->n_records);
        return;
    }
    kq_json_end_array(&d->j);
    kq_json_key(&d->j, "summary");
    kq_json_begin_object(&d->j);
    j_int(&d->j, "partitions", d->n_partitions);
    j_int(&d->j, "batches", d->n_batches);
    j_int(&d->j, "records", d->n_records);
    kq_json_end_object(&d->j);
    kq_json_end_object(&d->j);
    fputc('\n', d->f);
}
