/*
 * kq_datacodec: data-plane RPCs (proto/kq_data.proto) <-> include/kq/data_codec.h structs.
 * Contract and ownership: include/kq/data_codec.h.
 *
 * Decoders keep the unpacked protobuf envelope (record bytes point into it) and the arrays
 * they build in one private block owned by the result.
 */
#include "kq/data_codec.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/util.h"
#include "kq_data.pb-c.h"
#include "kq_rpc.pb-c.h"
#include "pb_wire.h"

static const uint8_t empty_input[1];

typedef struct data_priv {
    Kq__Request *rq;
    Kq__Response *rs;
    const uint8_t **records;
    size_t *record_lens;
    kq_data_fetch_partition *parts;
    kq_data_fetch_partition_result *results;
    kq_data_batch *batches;
    kq_list_offsets_partition *lo_parts;
    kq_list_offsets_partition_result *lo_results;
    const char **md_names;
    kq_data_metadata_broker *md_brokers;
    kq_data_metadata_topic *md_topics;
    kq_data_metadata_partition *md_parts;
} data_priv;

static void priv_free(data_priv *p)
{
    if (!p)
        return;
    if (p->rq)
        kq__request__free_unpacked(p->rq, NULL);
    if (p->rs)
        kq__response__free_unpacked(p->rs, NULL);
    free(p->records);
    free(p->record_lens);
    free(p->parts);
    free(p->results);
    free(p->batches);
    free(p->lo_parts);
    free(p->lo_results);
    free(p->md_names);
    free(p->md_brokers);
    free(p->md_topics);
    free(p->md_parts);
    free(p);
}

__attribute__((format(printf, 4, 5))) static int fail(char *errbuf, size_t errlen, int code,
                                                      const char *fmt, ...)
{
    if (errbuf && errlen > 0) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

#define BAD(...) fail(errbuf, errlen, KQ_ERR_INVALID_REQUEST, __VA_ARGS__)

bool kq_data_is_data_api(uint32_t api_key)
{
    const kq_api_info *api = kq_api_find(api_key);

    return api && api->kind == KQ_API_KIND_DATA;
}

static int pack(const ProtobufCMessage *msg, kq_buf *out)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *p = malloc(n ? n : 1);

    if (!p)
        return KQ_ERR_NOMEM;
    out->len = protobuf_c_message_pack(msg, p);
    out->data = p;
    return 0;
}

static int start(kq_buf *out)
{
    if (!out)
        return KQ_ERR_INVALID_REQUEST;
    out->data = NULL;
    out->len = 0;
    return 0;
}

static size_t bounded_len(const char *s, size_t max)
{
    return s ? strnlen(s, max + 1) : 0;
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

uint32_t kq_data_batch_crc(const kq_data_batch *b)
{
    uint8_t h[30];

    put_be(h, (uint64_t)b->base_offset, 8);
    put_be(h + 8, (uint32_t)b->leader_epoch, 4);
    put_be(h + 12, (uint32_t)b->count, 4);
    put_be(h + 16, (uint64_t)b->producer_id, 8);
    put_be(h + 24, (uint16_t)b->producer_epoch, 2);
    put_be(h + 26, (uint32_t)b->base_sequence, 4);
    return kq_crc32c(kq_crc32c(0, h, sizeof h), b->records, b->records ? b->len : 0);
}

/* ---------------------------------------------------------------------------------------- */
/* batch payloads                                                                            */

int kq_data_records_pack(const uint8_t *const *records, const size_t *lens, size_t n, kq_buf *out)
{
    size_t total = 0, pos = 0;
    uint8_t *p;
    int rc;

    if ((rc = start(out)) != 0)
        return rc;
    if (n > 0 && (!records || !lens))
        return KQ_ERR_INVALID_REQUEST;
    for (size_t i = 0; i < n; i++) {
        if (lens[i] > 0 && !records[i])
            return KQ_ERR_INVALID_REQUEST;
        if (lens[i] > SIZE_MAX - total - 10)
            return KQ_ERR_INVALID_REQUEST;
        total += 10 + lens[i];
    }
    p = malloc(total ? total : 1);
    if (!p)
        return KQ_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        pos += kq_pb_put_varint(p + pos, lens[i]);
        if (lens[i])
            memcpy(p + pos, records[i], lens[i]);
        pos += lens[i];
    }
    out->data = p;
    out->len = pos;
    return 0;
}

int kq_data_records_walk(const uint8_t *payload, size_t len, int64_t base_offset, int32_t count,
                         kq_data_record_cb cb, void *arg, char *errbuf, size_t errlen)
{
    size_t pos = 0;
    int rc;

    if (count < 1)
        return fail(errbuf, errlen, KQ_ERR_MALFORMED, "batch count %" PRId32 " is invalid", count);
    if (base_offset < 0 || base_offset > INT64_MAX - count)
        return fail(errbuf, errlen, KQ_ERR_MALFORMED,
                    "batch base offset %" PRId64 " is invalid for %" PRId32 " records", base_offset,
                    count);
    if (!payload && len > 0)
        return fail(errbuf, errlen, KQ_ERR_MALFORMED, "batch payload is missing");
    for (int32_t i = 0; i < count; i++) {
        uint64_t n;

        if (pos >= len)
            return fail(errbuf, errlen, KQ_ERR_MALFORMED,
                        "batch payload holds %" PRId32 " records, not %" PRId32, i, count);
        if (!kq_pb_read_varint(payload, len, &pos, &n))
            return fail(errbuf, errlen, KQ_ERR_MALFORMED,
                        "record %" PRId32 " of the batch has a bad length", i);
        if (n > len - pos)
            return fail(errbuf, errlen, KQ_ERR_MALFORMED,
                        "record %" PRId32 " of the batch claims %" PRIu64 " bytes but %zu remain",
                        i, n, len - pos);
        if (cb && (rc = cb(arg, base_offset + i, payload + pos, (size_t)n)) != 0)
            return rc;
        pos += (size_t)n;
    }
    if (pos != len)
        return fail(errbuf, errlen, KQ_ERR_MALFORMED,
                    "batch payload has %zu bytes after its %" PRId32 " records", len - pos, count);
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* requests                                                                                  */

static int encode_request(const char *cluster_id, int32_t sender_id, Kq__Request *rq, kq_buf *out)
{
    rq->api_version = 0;
    rq->cluster_id = (char *)(cluster_id ? cluster_id : "");
    rq->sender_id = sender_id;
    return pack(&rq->base, out);
}

int kq_data_encode_produce_request(const char *cluster_id, int32_t sender_id,
                                   const kq_produce_request *req, kq_buf *out)
{
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__ProduceRequest pr = KQ__PRODUCE_REQUEST__INIT;
    ProtobufCBinaryData *recs = NULL;
    int rc;

    if ((rc = start(out)) != 0)
        return rc;
    if (!req || (req->n_records > 0 && (!req->records || !req->record_lens)))
        return KQ_ERR_INVALID_REQUEST;
    recs = calloc(req->n_records ? req->n_records : 1, sizeof *recs);
    if (!recs)
        return KQ_ERR_NOMEM;
    for (size_t i = 0; i < req->n_records; i++) {
        recs[i].data = (uint8_t *)(req->records[i] ? req->records[i] : empty_input);
        recs[i].len = req->records[i] ? req->record_lens[i] : 0;
    }
    pr.topic_id.data = (uint8_t *)req->topic_id;
    pr.topic_id.len = 16;
    pr.partition = req->partition;
    pr.acks = req->acks;
    pr.timeout_ms = req->timeout_ms;
    pr.producer_id = req->producer_id;
    pr.producer_epoch = req->producer_epoch;
    pr.base_sequence = req->base_sequence;
    pr.n_records = req->n_records;
    pr.records = recs;
    rq.api_key = KQ_API_PRODUCE;
    rq.body_case = KQ__REQUEST__BODY_PRODUCE;
    rq.produce = &pr;
    rc = encode_request(cluster_id, sender_id, &rq, out);
    free(recs);
    return rc;
}

int kq_data_encode_fetch_request(const char *cluster_id, int32_t sender_id,
                                 const kq_data_fetch_request *req, kq_buf *out)
{
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__DataFetchRequest fr = KQ__DATA_FETCH_REQUEST__INIT;
    Kq__DataFetchPartition *parts = NULL, **pp = NULL;
    int rc;

    if ((rc = start(out)) != 0)
        return rc;
    if (!req || (req->n_partitions > 0 && !req->partitions))
        return KQ_ERR_INVALID_REQUEST;
    size_t n = req->n_partitions ? req->n_partitions : 1;
    parts = calloc(n, sizeof *parts);
    pp = calloc(n, sizeof *pp);
    if (!parts || !pp) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < req->n_partitions; i++) {
        const kq_data_fetch_partition *s = &req->partitions[i];
        Kq__DataFetchPartition *d = &parts[i];

        kq__data_fetch_partition__init(d);
        d->topic_id.data = (uint8_t *)s->topic_id;
        d->topic_id.len = 16;
        d->partition = s->partition;
        d->current_leader_epoch = s->current_leader_epoch;
        d->fetch_offset = s->fetch_offset;
        d->last_fetched_epoch = s->last_fetched_epoch;
        d->log_start_offset = s->log_start_offset;
        d->partition_max_bytes = s->partition_max_bytes;
        pp[i] = d;
    }
    fr.replica_id = req->replica_id;
    fr.broker_epoch = req->broker_epoch;
    fr.max_wait_ms = req->max_wait_ms;
    fr.min_bytes = req->min_bytes;
    fr.max_bytes = req->max_bytes;
    fr.n_partitions = req->n_partitions;
    fr.partitions = pp;
    rq.api_key = KQ_API_DATA_FETCH;
    rq.body_case = KQ__REQUEST__BODY_DATA_FETCH;
    rq.data_fetch = &fr;
    rc = encode_request(cluster_id, sender_id, &rq, out);
out:
    free(parts);
    free(pp);
    return rc;
}

int kq_data_encode_list_offsets_request(const char *cluster_id, int32_t sender_id,
                                        const kq_list_offsets_request *req, kq_buf *out)
{
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__ListOffsetsRequest lr = KQ__LIST_OFFSETS_REQUEST__INIT;
    Kq__ListOffsetsPartition *parts = NULL, **pp = NULL;
    int rc;

    if ((rc = start(out)) != 0)
        return rc;
    if (!req || (req->n_partitions > 0 && !req->partitions))
        return KQ_ERR_INVALID_REQUEST;
    size_t n = req->n_partitions ? req->n_partitions : 1;
    parts = calloc(n, sizeof *parts);
    pp = calloc(n, sizeof *pp);
    if (!parts || !pp) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < req->n_partitions; i++) {
        const kq_list_offsets_partition *src = &req->partitions[i];

        kq__list_offsets_partition__init(&parts[i]);
        parts[i].topic_id.data = (uint8_t *)src->topic_id;
        parts[i].topic_id.len = 16;
        parts[i].partition = src->partition;
        parts[i].current_leader_epoch = src->current_leader_epoch;
        parts[i].timestamp = src->timestamp;
        pp[i] = &parts[i];
    }
    lr.replica_id = req->replica_id;
    lr.n_partitions = req->n_partitions;
    lr.partitions = pp;
    rq.api_key = KQ_API_LIST_OFFSETS;
    rq.body_case = KQ__REQUEST__BODY_LIST_OFFSETS;
    rq.list_offsets = &lr;
    rc = encode_request(cluster_id, sender_id, &rq, out);
out:
    free(parts);
    free(pp);
    return rc;
}

int kq_data_encode_metadata_request(const char *cluster_id, int32_t sender_id,
                                    const kq_data_metadata_request *req, kq_buf *out)
{
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__MetadataRequest mr = KQ__METADATA_REQUEST__INIT;
    char **names = NULL;
    int rc;

    if ((rc = start(out)) != 0)
        return rc;
    if (!req || (req->n_topics > 0 && !req->topics))
        return KQ_ERR_INVALID_REQUEST;
    names = calloc(req->n_topics ? req->n_topics : 1, sizeof *names);
    if (!names)
        return KQ_ERR_NOMEM;
    for (size_t i = 0; i < req->n_topics; i++)
        names[i] = (char *)(req->topics[i] ? req->topics[i] : "");
    mr.n_topics = req->n_topics;
    mr.topics = names;
    rq.api_key = KQ_API_METADATA;
    rq.body_case = KQ__REQUEST__BODY_METADATA;
    rq.metadata = &mr;
    rc = encode_request(cluster_id, sender_id, &rq, out);
    free(names);
    return rc;
}

static int check_producer(const char *what, int64_t pid, int32_t pepoch, int32_t seq, char *errbuf,
                          size_t errlen)
{
    if (pid == KQ_DATA_NO_PRODUCER_ID) {
        if (pepoch != -1 || seq != -1)
            return BAD("%s has producer_id -1 but producer_epoch %" PRId32
                       " and base_sequence %" PRId32 " (both must be -1)",
                       what, pepoch, seq);
        return 0;
    }
    if (pid < 0)
        return BAD("%s producer_id %" PRId64 " is invalid (must be -1 or >= 0)", what, pid);
    if (pepoch < 0 || pepoch > INT16_MAX)
        return BAD("%s producer_epoch %" PRId32 " is invalid (must be 0..32767)", what, pepoch);
    if (seq < 0)
        return BAD("%s base_sequence %" PRId32 " is invalid (must be >= 0)", what, seq);
    return 0;
}

/* A (topic id, partition) pair: 16 bytes, not all zero, and a partition >= 0. */
static int dec_tp(const ProtobufCBinaryData *b, int32_t partition, uint8_t out[16],
                  const char *what, char *errbuf, size_t errlen)
{
    if (b->len != 16)
        return BAD("%s topic_id is %zu bytes (must be 16)", what, b->len);
    memcpy(out, b->data, 16);
    if (kq_uuid_is_zero(out))
        return BAD("%s topic_id is all zero", what);
    if (partition < 0)
        return BAD("%s partition %" PRId32 " is invalid (must be >= 0)", what, partition);
    return 0;
}

static int dec_produce(const Kq__ProduceRequest *w, kq_produce_request *r, data_priv *pv,
                       char *errbuf, size_t errlen)
{
    size_t total = 0;
    int rc;

    if ((rc = dec_tp(&w->topic_id, w->partition, r->topic_id, "Produce", errbuf, errlen)) != 0)
        return rc;
    if (w->acks != -1 && w->acks != 0 && w->acks != 1)
        return BAD("Produce acks %" PRId32 " is invalid (must be -1, 0 or 1)", w->acks);
    if (w->timeout_ms < 0)
        return BAD("Produce timeout_ms %" PRId32 " is invalid (must be >= 0)", w->timeout_ms);
    if ((rc = check_producer("Produce", w->producer_id, w->producer_epoch, w->base_sequence, errbuf,
                             errlen)) != 0)
        return rc;
    if (w->n_records == 0)
        return BAD("Produce has no records");
    if (w->n_records > KQ_DATA_MAX_RECORDS)
        return BAD("Produce has %zu records (at most %d)", w->n_records, KQ_DATA_MAX_RECORDS);
    for (size_t i = 0; i < w->n_records; i++) {
        if (w->records[i].len > KQ_DATA_MAX_RECORD_BYTES)
            return BAD("Produce records[%zu] is %zu bytes (at most %d)", i, w->records[i].len,
                       KQ_DATA_MAX_RECORD_BYTES);
        total += w->records[i].len;
    }
    if (total > KQ_DATA_MAX_PRODUCE_BYTES)
        return BAD("Produce records total %zu bytes (at most %d)", total,
                   KQ_DATA_MAX_PRODUCE_BYTES);
    pv->records = calloc(w->n_records, sizeof *pv->records);
    pv->record_lens = calloc(w->n_records, sizeof *pv->record_lens);
    if (!pv->records || !pv->record_lens)
        return fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding Produce");
    for (size_t i = 0; i < w->n_records; i++) {
        pv->records[i] = w->records[i].data ? w->records[i].data : empty_input;
        pv->record_lens[i] = w->records[i].len;
    }
    r->partition = w->partition;
    r->acks = w->acks;
    r->timeout_ms = w->timeout_ms;
    r->producer_id = w->producer_id;
    r->producer_epoch = w->producer_epoch;
    r->base_sequence = w->base_sequence;
    r->records = pv->records;
    r->record_lens = pv->record_lens;
    r->n_records = w->n_records;
    return 0;
}

typedef struct tp_key {
    uint8_t topic_id[16];
    int32_t partition;
} tp_key;

static int cmp_tp(const void *x, const void *y)
{
    const tp_key *a = x, *b = y;
    int c = memcmp(a->topic_id, b->topic_id, 16);

    if (c)
        return c;
    return (a->partition > b->partition) - (a->partition < b->partition);
}

/* Rejects a partition named twice among n (topic id, partition) pairs; topic(i) and
 * partition(i) read the i-th element of arr, of `size` bytes. */
static int check_no_duplicates(const char *what, const void *arr, size_t n, size_t size,
                               size_t id_off, size_t part_off, char *errbuf, size_t errlen)
{
    tp_key *keys = malloc((n ? n : 1) * sizeof *keys);
    int rc = 0;

    if (!keys)
        return fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding %s", what);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *e = (const uint8_t *)arr + i * size;

        memcpy(keys[i].topic_id, e + id_off, 16);
        memcpy(&keys[i].partition, e + part_off, sizeof keys[i].partition);
    }
    qsort(keys, n, sizeof *keys, cmp_tp);
    for (size_t i = 1; i < n; i++) {
        if (cmp_tp(&keys[i - 1], &keys[i]) == 0) {
            char id[KQ_UUID_STR_LEN + 1];

            kq_uuid_format(keys[i].topic_id, id);
            rc = BAD("%s names partition %s-%" PRId32 " twice", what, id, keys[i].partition);
            break;
        }
    }
    free(keys);
    return rc;
}

#define NO_DUPLICATES(what, arr, n, type)                                                          \
    check_no_duplicates(what, arr, n, sizeof(type), offsetof(type, topic_id),                      \
                        offsetof(type, partition), errbuf, errlen)

static int dec_fetch(const Kq__DataFetchRequest *w, int32_t sender_id, kq_data_fetch_request *r,
                     data_priv *pv, char *errbuf, size_t errlen)
{
    bool consumer = w->replica_id == KQ_DATA_CONSUMER_REPLICA_ID;
    int rc;

    if (w->replica_id < -1)
        return BAD("Fetch replica_id %" PRId32 " is invalid (must be -1 or >= 0)", w->replica_id);
    if (consumer && w->broker_epoch != -1)
        return BAD("Fetch broker_epoch %" PRId64 " is invalid for a consumer (must be -1)",
                   w->broker_epoch);
    if (!consumer && w->replica_id != sender_id)
        return BAD("Fetch replica_id %" PRId32 " differs from the sender %" PRId32, w->replica_id,
                   sender_id);
    if (!consumer && w->broker_epoch < 0)
        return BAD("Fetch broker_epoch %" PRId64 " is invalid for a follower (must be >= 0)",
                   w->broker_epoch);
    if (w->max_wait_ms < 0)
        return BAD("Fetch max_wait_ms %" PRId32 " is invalid (must be >= 0)", w->max_wait_ms);
    if (w->min_bytes < 0)
        return BAD("Fetch min_bytes %" PRId32 " is invalid (must be >= 0)", w->min_bytes);
    if (w->max_bytes <= 0)
        return BAD("Fetch max_bytes %" PRId32 " is invalid (must be > 0)", w->max_bytes);
    if (w->n_partitions == 0)
        return BAD("Fetch has no partitions");
    if (w->n_partitions > KQ_DATA_MAX_FETCH_PARTITIONS)
        return BAD("Fetch has %zu partitions (at most %d)", w->n_partitions,
                   KQ_DATA_MAX_FETCH_PARTITIONS);
    pv->parts = calloc(w->n_partitions, sizeof *pv->parts);
    if (!pv->parts)
        return fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding Fetch");
    for (size_t i = 0; i < w->n_partitions; i++) {
        const Kq__DataFetchPartition *s = w->partitions[i];
        kq_data_fetch_partition *d = &pv->parts[i];
        char what[48];

        snprintf(what, sizeof what, "Fetch partitions[%zu]", i);
        if ((rc = dec_tp(&s->topic_id, s->partition, d->topic_id, what, errbuf, errlen)) != 0)
            return rc;
        if (s->current_leader_epoch < -1)
            return BAD("%s current_leader_epoch %" PRId32 " is invalid (must be >= -1)", what,
                       s->current_leader_epoch);
        if (s->fetch_offset < 0)
            return BAD("%s fetch_offset %" PRId64 " is invalid (must be >= 0)", what,
                       s->fetch_offset);
        if (s->last_fetched_epoch < -1)
            return BAD("%s last_fetched_epoch %" PRId32 " is invalid (must be >= -1)", what,
                       s->last_fetched_epoch);
        if (s->log_start_offset < -1 || (consumer && s->log_start_offset != -1))
            return BAD("%s log_start_offset %" PRId64 " is invalid (must be %s)", what,
                       s->log_start_offset, consumer ? "-1 for a consumer" : ">= -1");
        if (s->log_start_offset > s->fetch_offset)
            return BAD("%s log_start_offset %" PRId64 " is above fetch_offset %" PRId64, what,
                       s->log_start_offset, s->fetch_offset);
        if (s->partition_max_bytes <= 0)
            return BAD("%s partition_max_bytes %" PRId32 " is invalid (must be > 0)", what,
                       s->partition_max_bytes);
        d->partition = s->partition;
        d->current_leader_epoch = s->current_leader_epoch;
        d->fetch_offset = s->fetch_offset;
        d->last_fetched_epoch = s->last_fetched_epoch;
        d->log_start_offset = s->log_start_offset;
        d->partition_max_bytes = s->partition_max_bytes;
    }
    if ((rc = NO_DUPLICATES("Fetch", pv->parts, w->n_partitions, kq_data_fetch_partition)) != 0)
        return rc;
    r->replica_id = w->replica_id;
    r->broker_epoch = w->broker_epoch;
    r->max_wait_ms = w->max_wait_ms;
    r->min_bytes = w->min_bytes;
    r->max_bytes = w->max_bytes;
    r->partitions = pv->parts;
    r->n_partitions = w->n_partitions;
    return 0;
}

static int dec_list_offsets(const Kq__ListOffsetsRequest *w, int32_t sender_id,
                            kq_list_offsets_request *r, data_priv *pv, char *errbuf, size_t errlen)
{
    int rc;

    if (w->replica_id < -1)
        return BAD("ListOffsets replica_id %" PRId32 " is invalid (must be -1 or >= 0)",
                   w->replica_id);
    if (w->replica_id >= 0 && w->replica_id != sender_id)
        return BAD("ListOffsets replica_id %" PRId32 " differs from the sender %" PRId32,
                   w->replica_id, sender_id);
    if (w->n_partitions == 0)
        return BAD("ListOffsets has no partitions");
    if (w->n_partitions > KQ_DATA_MAX_FETCH_PARTITIONS)
        return BAD("ListOffsets has %zu partitions (at most %d)", w->n_partitions,
                   KQ_DATA_MAX_FETCH_PARTITIONS);
    pv->lo_parts = calloc(w->n_partitions, sizeof *pv->lo_parts);
    if (!pv->lo_parts)
        return fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding ListOffsets");
    for (size_t i = 0; i < w->n_partitions; i++) {
        const Kq__ListOffsetsPartition *src = w->partitions[i];
        kq_list_offsets_partition *d = &pv->lo_parts[i];
        char what[48];

        snprintf(what, sizeof what, "ListOffsets partitions[%zu]", i);
        if ((rc = dec_tp(&src->topic_id, src->partition, d->topic_id, what, errbuf, errlen)) != 0)
            return rc;
        if (src->current_leader_epoch < -1)
            return BAD("%s current_leader_epoch %" PRId32 " is invalid (must be >= -1)", what,
                       src->current_leader_epoch);
        if (src->timestamp != KQ_DATA_EARLIEST_TIMESTAMP &&
            src->timestamp != KQ_DATA_LATEST_TIMESTAMP)
            return BAD("%s timestamp %" PRId64 " is not supported (-2 earliest or -1 latest)", what,
                       src->timestamp);
        d->partition = src->partition;
        d->current_leader_epoch = src->current_leader_epoch;
        d->timestamp = src->timestamp;
    }
    if ((rc = NO_DUPLICATES("ListOffsets", pv->lo_parts, w->n_partitions,
                            kq_list_offsets_partition)) != 0)
        return rc;
    r->replica_id = w->replica_id;
    r->partitions = pv->lo_parts;
    r->n_partitions = w->n_partitions;
    return 0;
}

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

static int cmp_i32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;

    return (a > b) - (a < b);
}

/* A topic name as Metadata carries it: 1..KQ_DATA_MAX_TOPIC_NAME bytes (NULs were rejected
 * with the envelope). */
static int check_topic_name(const char *what, const char *name, char *errbuf, size_t errlen)
{
    size_t n = bounded_len(name, KQ_DATA_MAX_TOPIC_NAME);

    if (n == 0)
        return BAD("%s topic name is empty", what);
    if (n > KQ_DATA_MAX_TOPIC_NAME)
        return BAD("%s topic name \"%.40s...\" is longer than %d bytes", what, name,
                   KQ_DATA_MAX_TOPIC_NAME);
    return 0;
}

/* Rejects a name present twice among n; sorts a copy. */
static int check_unique_names(const char *what, const char *const *names, size_t n, char *errbuf,
                              size_t errlen)
{
    const char **sorted;
    int rc = 0;

    if (n < 2)
        return 0;
    sorted = malloc(n * sizeof *sorted);
    if (!sorted)
        return fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding %s", what);
    memcpy(sorted, names, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_str);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            rc = BAD("%s names topic \"%.64s\" twice", what, sorted[i]);
            break;
        }
    }
    free(sorted);
    return rc;
}

static int dec_metadata(const Kq__MetadataRequest *w, kq_data_metadata_request *r, data_priv *pv,
                        char *errbuf, size_t errlen)
{
    int rc;

    if (w->n_topics > KQ_DATA_MAX_METADATA_TOPICS)
        return BAD("Metadata request has %zu topics (at most %d)", w->n_topics,
                   KQ_DATA_MAX_METADATA_TOPICS);
    for (size_t i = 0; i < w->n_topics; i++) {
        char what[48];

        snprintf(what, sizeof what, "Metadata request topics[%zu]", i);
        if ((rc = check_topic_name(what, w->topics[i], errbuf, errlen)) != 0)
            return rc;
    }
    if ((rc = check_unique_names("Metadata request", (const char *const *)w->topics, w->n_topics,
                                 errbuf, errlen)) != 0)
        return rc;
    pv->md_names = calloc(w->n_topics ? w->n_topics : 1, sizeof *pv->md_names);
    if (!pv->md_names)
        return fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding Metadata");
    for (size_t i = 0; i < w->n_topics; i++)
        pv->md_names[i] = w->topics[i];
    r->topics = w->n_topics ? pv->md_names : NULL;
    r->n_topics = w->n_topics;
    return 0;
}

int kq_data_decode_request(const uint8_t *buf, size_t len, kq_data_request *out, char *errbuf,
                           size_t errlen)
{
    data_priv *pv = NULL;
    Kq__Request *rq;
    const char *name;
    int rc;

    if (!out)
        return BAD("no output for decoded request");
    memset(out, 0, sizeof *out);
    out->sender_id = -1;
    if ((rc = kq_pb_unpack_request(buf, len, &rq, &out->api_key, errbuf, errlen)) != 0)
        return rc;
    out->api_key = rq->api_key;
    if (!kq_data_is_data_api(rq->api_key)) {
        kq__request__free_unpacked(rq, NULL);
        return fail(errbuf, errlen, KQ_ERR_NOT_FOUND, "api key %u is not a data-plane API",
                    out->api_key);
    }
    pv = calloc(1, sizeof *pv);
    if (!pv) {
        kq__request__free_unpacked(rq, NULL);
        return fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding request");
    }
    pv->rq = rq;
    name = kq_api_find(rq->api_key)->name; /* a data-plane API (checked above) */
    if (rq->api_version != 0) {
        rc = fail(errbuf, errlen, KQ_ERR_UNSUPPORTED_VERSION,
                  "%s version %u is not supported (only version 0)", name, rq->api_version);
        goto out;
    }
    if (!kq_pb_strings_ok(&kq__request__descriptor, buf ? buf : empty_input, len)) {
        rc = BAD("%s request has a string with a NUL byte", name);
        goto out;
    }
    if (bounded_len(rq->cluster_id, KQ_CODEC_MAX_CLUSTER_ID) > KQ_CODEC_MAX_CLUSTER_ID) {
        rc = BAD("%s request cluster_id is longer than %d bytes", name, KQ_CODEC_MAX_CLUSTER_ID);
        goto out;
    }
    if (rq->sender_id < -1) {
        rc = BAD("%s request sender_id %" PRId32 " is invalid", name, rq->sender_id);
        goto out;
    }
    if (rq->api_key == KQ_API_PRODUCE) {
        if (rq->body_case != KQ__REQUEST__BODY_PRODUCE) {
            rc = BAD("Produce request has no Produce body");
            goto out;
        }
        rc = dec_produce(rq->produce, &out->u.produce, pv, errbuf, errlen);
    } else if (rq->api_key == KQ_API_LIST_OFFSETS) {
        if (rq->body_case != KQ__REQUEST__BODY_LIST_OFFSETS) {
            rc = BAD("ListOffsets request has no ListOffsets body");
            goto out;
        }
        rc = dec_list_offsets(rq->list_offsets, rq->sender_id, &out->u.list_offsets, pv, errbuf,
                              errlen);
    } else if (rq->api_key == KQ_API_METADATA) {
        if (rq->body_case != KQ__REQUEST__BODY_METADATA) {
            rc = BAD("Metadata request has no Metadata body");
            goto out;
        }
        rc = dec_metadata(rq->metadata, &out->u.metadata, pv, errbuf, errlen);
    } else {
        if (rq->body_case != KQ__REQUEST__BODY_DATA_FETCH) {
            rc = BAD("Fetch request has no data-plane Fetch body");
            goto out;
        }
        rc = dec_fetch(rq->data_fetch, rq->sender_id, &out->u.fetch, pv, errbuf, errlen);
    }
    if (rc)
        goto out;
    snprintf(out->cluster_id, sizeof out->cluster_id, "%s", rq->cluster_id ? rq->cluster_id : "");
    out->sender_id = rq->sender_id;
    out->priv_ = pv;
    pv = NULL;
out:
    if (rc) {
        uint32_t key = out->api_key;

        memset(out, 0, sizeof *out);
        out->api_key = key;
        out->sender_id = -1;
    }
    priv_free(pv);
    return rc;
}

void kq_data_request_free(kq_data_request *r)
{
    if (!r)
        return;
    priv_free(r->priv_);
    memset(r, 0, sizeof *r);
    r->sender_id = -1;
}

/* ---------------------------------------------------------------------------------------- */
/* responses                                                                                 */

static char *clip_message(const char *m, char buf[KQ_DATA_MAX_ERROR_MESSAGE + 1])
{
    if (!m || !m[0])
        return NULL;
    snprintf(buf, KQ_DATA_MAX_ERROR_MESSAGE + 1, "%s", m);
    return buf;
}

int kq_data_encode_produce_response(const kq_produce_response *res, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__ProduceResponse pr = KQ__PRODUCE_RESPONSE__INIT;
    char msg[KQ_DATA_MAX_ERROR_MESSAGE + 1];
    int rc;

    if ((rc = start(out)) != 0)
        return rc;
    if (!res)
        return KQ_ERR_INVALID_REQUEST;
    pr.error_code = res->error;
    pr.base_offset = res->base_offset;
    pr.log_start_offset = res->log_start_offset;
    pr.error_message = clip_message(res->error_message, msg);
    rs.api_key = KQ_API_PRODUCE;
    rs.error_code = 0;
    rs.body_case = KQ__RESPONSE__BODY_PRODUCE;
    rs.produce = &pr;
    return pack(&rs.base, out);
}

int kq_data_encode_fetch_response(const kq_data_fetch_response *res, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__DataFetchResponse fr = KQ__DATA_FETCH_RESPONSE__INIT;
    Kq__DataFetchPartitionResponse *parts = NULL, **pp = NULL;
    Kq__DataEpochEndOffset *div = NULL;
    Kq__DataLeader *lead = NULL;
    Kq__DataBatch *batches = NULL, **bp = NULL;
    size_t nb = 0, k = 0;
    int rc;

    if ((rc = start(out)) != 0)
        return rc;
    if (!res || (res->n_partitions > 0 && !res->partitions))
        return KQ_ERR_INVALID_REQUEST;
    for (size_t i = 0; i < res->n_partitions; i++) {
        if (res->partitions[i].n_batches > 0 && !res->partitions[i].batches)
            return KQ_ERR_INVALID_REQUEST;
        nb += res->partitions[i].n_batches;
    }
    size_t np = res->n_partitions ? res->n_partitions : 1;
    parts = calloc(np, sizeof *parts);
    pp = calloc(np, sizeof *pp);
    div = calloc(np, sizeof *div);
    lead = calloc(np, sizeof *lead);
    batches = calloc(nb ? nb : 1, sizeof *batches);
    bp = calloc(nb ? nb : 1, sizeof *bp);
    if (!parts || !pp || !div || !lead || !batches || !bp) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < res->n_partitions; i++) {
        const kq_data_fetch_partition_result *s = &res->partitions[i];
        Kq__DataFetchPartitionResponse *d = &parts[i];

        kq__data_fetch_partition_response__init(d);
        d->topic_id.data = (uint8_t *)s->topic_id;
        d->topic_id.len = 16;
        d->partition = s->partition;
        d->error_code = s->error;
        d->high_watermark = s->high_watermark;
        d->log_start_offset = s->log_start_offset;
        if (s->diverging_epoch >= 0) {
            kq__data_epoch_end_offset__init(&div[i]);
            div[i].epoch = s->diverging_epoch;
            div[i].end_offset = s->diverging_end_offset;
            d->diverging_epoch = &div[i];
        }
        if (s->current_leader_id >= 0 || s->current_leader_epoch >= 0) {
            kq__data_leader__init(&lead[i]);
            lead[i].leader_id = s->current_leader_id;
            lead[i].leader_epoch = s->current_leader_epoch;
            d->current_leader = &lead[i];
        }
        d->n_batches = s->n_batches;
        d->batches = &bp[k];
        for (size_t j = 0; j < s->n_batches; j++, k++) {
            const kq_data_batch *sb = &s->batches[j];
            Kq__DataBatch *db = &batches[k];

            kq__data_batch__init(db);
            db->base_offset = sb->base_offset;
            db->leader_epoch = sb->leader_epoch;
            db->count = sb->count;
            db->crc32c = sb->crc32c;
            db->producer_id = sb->producer_id;
            db->producer_epoch = sb->producer_epoch;
            db->base_sequence = sb->base_sequence;
            db->records.data = (uint8_t *)(sb->records ? sb->records : empty_input);
            db->records.len = sb->records ? sb->len : 0;
            bp[k] = db;
        }
        pp[i] = d;
    }
    fr.n_partitions = res->n_partitions;
    fr.partitions = pp;
    rs.api_key = KQ_API_DATA_FETCH;
    rs.error_code = 0;
    rs.body_case = KQ__RESPONSE__BODY_DATA_FETCH;
    rs.data_fetch = &fr;
    rc = pack(&rs.base, out);
out:
    free(parts);
    free(pp);
    free(div);
    free(lead);
    free(batches);
    free(bp);
    return rc;
}

/* Unpacks a response envelope for api_key into *rsp (set even when a check then fails). An
 * error answer without a body returns 0 with its code and message in *error and msg. */
static int unpack_response(const uint8_t *buf, size_t len, uint32_t api_key, const char *name,
                           int body_case, Kq__Response **rsp, int *error,
                           char msg[KQ_DATA_MAX_ERROR_MESSAGE + 1], char *errbuf, size_t errlen)
{
    Kq__Response *rs;
    int rc;

    *rsp = NULL;
    if (!buf && len > 0)
        return fail(errbuf, errlen, KQ_ERR_MALFORMED, "%s response does not parse (no buffer)",
                    name);
    rs = (Kq__Response *)kq_pb_unpack(&kq__response__descriptor, buf ? buf : empty_input, len,
                                      KQ_PB_ANSWER, &rc, errbuf, errlen);
    if (!rs && rc == KQ_ERR_MALFORMED)
        return fail(errbuf, errlen, rc, "%s response does not parse (%zu bytes)", name, len);
    if (!rs)
        return rc;
    *rsp = rs;
    if (rs->api_key != api_key)
        return BAD("%s response has api key %u", name, rs->api_key);
    if (!kq_pb_strings_ok(&kq__response__descriptor, buf ? buf : empty_input, len))
        return BAD("%s response has a string with a NUL byte", name);
    if (rs->error_code < 0)
        return BAD("%s response error_code %" PRId32 " is invalid", name, rs->error_code);
    if (rs->error_code != 0) {
        if (rs->body_case != KQ__RESPONSE__BODY__NOT_SET)
            return BAD("%s error response carries a body", name);
        *error = rs->error_code;
        snprintf(msg, KQ_DATA_MAX_ERROR_MESSAGE + 1, "%s",
                 rs->error_message ? rs->error_message : "");
        return 0;
    }
    if ((int)rs->body_case != body_case)
        return BAD("%s response has no %s body", name, name);
    return 0;
}

/* The start of a decoder that keeps a private block: allocates *pvp (left to the caller to
 * free, also on failure) and unpacks the envelope into it, as unpack_response. */
static int start_response(const uint8_t *buf, size_t len, uint32_t api_key, const char *name,
                          int body_case, data_priv **pvp, int *error,
                          char msg[KQ_DATA_MAX_ERROR_MESSAGE + 1], char *errbuf, size_t errlen)
{
    *pvp = calloc(1, sizeof **pvp);
    if (!*pvp)
        return fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding %s response", name);
    return unpack_response(buf, len, api_key, name, body_case, &(*pvp)->rs, error, msg, errbuf,
                           errlen);
}

/* The end of such a decoder: on failure out (size bytes) is zeroed and pv freed, else out's
 * priv_ (*priv) takes pv. Returns rc. */
static int finish_response(int rc, data_priv *pv, void *out, size_t size, void **priv)
{
    if (rc) {
        memset(out, 0, size);
        priv_free(pv);
    } else {
        *priv = pv;
    }
    return rc;
}

int kq_data_decode_produce_response(const uint8_t *buf, size_t len, kq_produce_response *out,
                                    char *errbuf, size_t errlen)
{
    Kq__Response *rs = NULL;
    const Kq__ProduceResponse *w;
    int rc;

    if (!out)
        return BAD("no output for decoded response");
    memset(out, 0, sizeof *out);
    out->base_offset = -1;
    out->log_start_offset = -1;
    rc = unpack_response(buf, len, KQ_API_PRODUCE, "Produce", KQ__RESPONSE__BODY_PRODUCE, &rs,
                         &out->error, out->error_message, errbuf, errlen);
    if (rc || out->error)
        goto out;
    w = rs->produce;
    if (w->error_code < 0) {
        rc = BAD("Produce response error_code %" PRId32 " is invalid", w->error_code);
        goto out;
    }
    if (w->error_code == 0) {
        if (w->base_offset < 0) {
            rc = BAD("Produce response base_offset %" PRId64 " is invalid (must be >= 0)",
                     w->base_offset);
            goto out;
        }
        if (w->log_start_offset < 0 || w->log_start_offset > w->base_offset) {
            rc = BAD("Produce response log_start_offset %" PRId64
                     " is invalid (must be 0..base_offset %" PRId64 ")",
                     w->log_start_offset, w->base_offset);
            goto out;
        }
    } else if (w->base_offset < -1 || w->log_start_offset < -1) {
        rc = BAD("Produce error response base_offset %" PRId64 " or log_start_offset %" PRId64
                 " is invalid (must be >= -1)",
                 w->base_offset, w->log_start_offset);
        goto out;
    }
    out->error = w->error_code;
    out->base_offset = w->base_offset;
    out->log_start_offset = w->log_start_offset;
    snprintf(out->error_message, sizeof out->error_message, "%s",
             w->error_message ? w->error_message : "");
out:
    if (rs)
        kq__response__free_unpacked(rs, NULL);
    if (rc) {
        memset(out, 0, sizeof *out);
        out->base_offset = -1;
        out->log_start_offset = -1;
    }
    return rc;
}

static int dec_batches(const Kq__DataFetchPartitionResponse *s, const char *what,
                       kq_data_batch *dst, char *errbuf, size_t errlen)
{
    int rc;

    for (size_t j = 0; j < s->n_batches; j++) {
        const Kq__DataBatch *w = s->batches[j];
        kq_data_batch *b = &dst[j];
        char bw[80];

        snprintf(bw, sizeof bw, "%.40s batches[%zu]", what, j);
        if (w->base_offset < 0)
            return BAD("%s base_offset %" PRId64 " is invalid (must be >= 0)", bw, w->base_offset);
        if (w->leader_epoch < 0)
            return BAD("%s leader_epoch %" PRId32 " is invalid (must be >= 0)", bw,
                       w->leader_epoch);
        if (w->count < 1)
            return BAD("%s count %" PRId32 " is invalid (must be >= 1)", bw, w->count);
        if (w->base_offset > INT64_MAX - w->count)
            return BAD("%s base_offset %" PRId64 " + count %" PRId32 " overflows", bw,
                       w->base_offset, w->count);
        if ((rc = check_producer(bw, w->producer_id, w->producer_epoch, w->base_sequence, errbuf,
                                 errlen)) != 0)
            return rc;
        if (j > 0) {
            const kq_data_batch *p = &dst[j - 1];

            if (w->base_offset != p->base_offset + p->count)
                return BAD("%s base_offset %" PRId64 " is not contiguous (expected %" PRId64 ")",
                           bw, w->base_offset, p->base_offset + p->count);
            if (w->leader_epoch < p->leader_epoch)
                return BAD("%s leader_epoch %" PRId32 " is below the previous batch's %" PRId32, bw,
                           w->leader_epoch, p->leader_epoch);
        }
        b->base_offset = w->base_offset;
        b->leader_epoch = w->leader_epoch;
        b->count = w->count;
        b->crc32c = w->crc32c;
        b->producer_id = w->producer_id;
        b->producer_epoch = (int16_t)w->producer_epoch;
        b->base_sequence = w->base_sequence;
        b->records = w->records.data ? w->records.data : empty_input;
        b->len = w->records.len;
        uint32_t crc = kq_data_batch_crc(b);
        if (crc != b->crc32c)
            return fail(errbuf, errlen, KQ_ERR_CORRUPT_MESSAGE,
                        "%s crc32c 0x%08" PRIx32 " does not match its contents (0x%08" PRIx32 ")",
                        bw, b->crc32c, crc);
    }
    return 0;
}

static int dec_fetch_partitions(const Kq__DataFetchResponse *w, kq_data_fetch_response *out,
                                data_priv *pv, char *errbuf, size_t errlen)
{
    size_t nb = 0, k = 0;
    int rc;

    if (w->n_partitions > KQ_DATA_MAX_FETCH_PARTITIONS)
        return BAD("Fetch response has %zu partitions (at most %d)", w->n_partitions,
                   KQ_DATA_MAX_FETCH_PARTITIONS);
    for (size_t i = 0; i < w->n_partitions; i++) {
        if (w->partitions[i]->n_batches > KQ_DATA_MAX_BATCHES)
            return BAD("Fetch response partitions[%zu] has %zu batches (at most %d)", i,
                       w->partitions[i]->n_batches, KQ_DATA_MAX_BATCHES);
        nb += w->partitions[i]->n_batches;
    }
    pv->results = calloc(w->n_partitions ? w->n_partitions : 1, sizeof *pv->results);
    pv->batches = calloc(nb ? nb : 1, sizeof *pv->batches);
    if (!pv->results || !pv->batches)
        return fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding Fetch response");
    for (size_t i = 0; i < w->n_partitions; i++) {
        const Kq__DataFetchPartitionResponse *s = w->partitions[i];
        kq_data_fetch_partition_result *d = &pv->results[i];
        char what[64];

        snprintf(what, sizeof what, "Fetch response partitions[%zu]", i);
        if ((rc = dec_tp(&s->topic_id, s->partition, d->topic_id, what, errbuf, errlen)) != 0)
            return rc;
        if (s->error_code < 0)
            return BAD("%s error_code %" PRId32 " is invalid", what, s->error_code);
        if (s->high_watermark < -1 || s->log_start_offset < -1)
            return BAD("%s high_watermark %" PRId64 " or log_start_offset %" PRId64
                       " is invalid (must be >= -1)",
                       what, s->high_watermark, s->log_start_offset);
        if (s->error_code == 0 && (s->log_start_offset < 0 || s->high_watermark < 0 ||
                                   s->log_start_offset > s->high_watermark))
            return BAD("%s log_start_offset %" PRId64 " and high_watermark %" PRId64
                       " are invalid (must be 0 <= log_start_offset <= high_watermark)",
                       what, s->log_start_offset, s->high_watermark);
        if (s->error_code != 0 && s->n_batches > 0)
            return BAD("%s has error %s and %zu batches", what, kq_err_name(s->error_code),
                       s->n_batches);
        d->diverging_epoch = -1;
        d->diverging_end_offset = -1;
        if (s->diverging_epoch) {
            if (s->diverging_epoch->epoch < 0 || s->diverging_epoch->end_offset < 0)
                return BAD("%s diverging_epoch {epoch %" PRId32 ", end_offset %" PRId64
                           "} is invalid (both must be >= 0)",
                           what, s->diverging_epoch->epoch, s->diverging_epoch->end_offset);
            if (s->n_batches > 0)
                return BAD("%s has a diverging_epoch and %zu batches", what, s->n_batches);
            d->diverging_epoch = s->diverging_epoch->epoch;
            d->diverging_end_offset = s->diverging_epoch->end_offset;
        }
        d->current_leader_id = -1;
        d->current_leader_epoch = -1;
        if (s->current_leader) {
            if (s->current_leader->leader_id < -1 || s->current_leader->leader_epoch < -1)
                return BAD("%s current_leader {id %" PRId32 ", epoch %" PRId32
                           "} is invalid (both must be >= -1)",
                           what, s->current_leader->leader_id, s->current_leader->leader_epoch);
            d->current_leader_id = s->current_leader->leader_id;
            d->current_leader_epoch = s->current_leader->leader_epoch;
        }
        if ((rc = dec_batches(s, what, &pv->batches[k], errbuf, errlen)) != 0)
            return rc;
        d->partition = s->partition;
        d->error = s->error_code;
        d->high_watermark = s->high_watermark;
        d->log_start_offset = s->log_start_offset;
        d->batches = s->n_batches ? &pv->batches[k] : NULL;
        d->n_batches = s->n_batches;
        k += s->n_batches;
    }
    out->partitions = pv->results;
    out->n_partitions = w->n_partitions;
    return 0;
}

int kq_data_decode_fetch_response(const uint8_t *buf, size_t len, kq_data_fetch_response *out,
                                  char *errbuf, size_t errlen)
{
    data_priv *pv = NULL;
    int rc;

    if (!out)
        return BAD("no output for decoded response");
    memset(out, 0, sizeof *out);
    rc = start_response(buf, len, KQ_API_DATA_FETCH, "Fetch", KQ__RESPONSE__BODY_DATA_FETCH, &pv,
                        &out->error, out->error_message, errbuf, errlen);
    if (rc == 0 && !out->error)
        rc = dec_fetch_partitions(pv->rs->data_fetch, out, pv, errbuf, errlen);
    return finish_response(rc, pv, out, sizeof *out, &out->priv_);
}

void kq_data_fetch_response_free(kq_data_fetch_response *r)
{
    if (!r)
        return;
    priv_free(r->priv_);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------------------------------------- */
/* ListOffsets responses                                                                     */

int kq_data_encode_list_offsets_response(const kq_list_offsets_response *res, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__ListOffsetsResponse lr = KQ__LIST_OFFSETS_RESPONSE__INIT;
    Kq__ListOffsetsPartitionResponse *parts = NULL, **pp = NULL;
    int rc;

    if ((rc = start(out)) != 0)
        return rc;
    if (!res || (res->n_partitions > 0 && !res->partitions))
        return KQ_ERR_INVALID_REQUEST;
    size_t n = res->n_partitions ? res->n_partitions : 1;
    parts = calloc(n, sizeof *parts);
    pp = calloc(n, sizeof *pp);
    if (!parts || !pp) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < res->n_partitions; i++) {
        const kq_list_offsets_partition_result *src = &res->partitions[i];

        kq__list_offsets_partition_response__init(&parts[i]);
        parts[i].topic_id.data = (uint8_t *)src->topic_id;
        parts[i].topic_id.len = 16;
        parts[i].partition = src->partition;
        parts[i].error_code = src->error;
        parts[i].offset = src->offset;
        parts[i].leader_epoch = src->leader_epoch;
        pp[i] = &parts[i];
    }
    lr.n_partitions = res->n_partitions;
    lr.partitions = pp;
    rs.api_key = KQ_API_LIST_OFFSETS;
    rs.error_code = 0;
    rs.body_case = KQ__RESPONSE__BODY_LIST_OFFSETS;
    rs.list_offsets = &lr;
    rc = pack(&rs.base, out);
out:
    free(parts);
    free(pp);
    return rc;
}

static int dec_list_offsets_partitions(const Kq__ListOffsetsResponse *w,
                                       kq_list_offsets_response *out, data_priv *pv, char *errbuf,
                                       size_t errlen)
{
    int rc;

    if (w->n_partitions > KQ_DATA_MAX_FETCH_PARTITIONS)
        return BAD("ListOffsets response has %zu partitions (at most %d)", w->n_partitions,
                   KQ_DATA_MAX_FETCH_PARTITIONS);
    pv->lo_results = calloc(w->n_partitions ? w->n_partitions : 1, sizeof *pv->lo_results);
    if (!pv->lo_results)
        return fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding ListOffsets response");
    for (size_t i = 0; i < w->n_partitions; i++) {
        const Kq__ListOffsetsPartitionResponse *src = w->partitions[i];
        kq_list_offsets_partition_result *d = &pv->lo_results[i];
        char what[64];

        snprintf(what, sizeof what, "ListOffsets response partitions[%zu]", i);
        if ((rc = dec_tp(&src->topic_id, src->partition, d->topic_id, what, errbuf, errlen)) != 0)
            return rc;
        if (src->error_code < 0)
            return BAD("%s error_code %" PRId32 " is invalid", what, src->error_code);
        if (src->offset < (src->error_code ? -1 : 0))
            return BAD("%s offset %" PRId64 " is invalid (must be >= %d)", what, src->offset,
                       src->error_code ? -1 : 0);
        if (src->leader_epoch < -1)
            return BAD("%s leader_epoch %" PRId32 " is invalid (must be >= -1)", what,
                       src->leader_epoch);
        d->partition = src->partition;
        d->error = src->error_code;
        d->offset = src->offset;
        d->leader_epoch = src->leader_epoch;
    }
    out->partitions = pv->lo_results;
    out->n_partitions = w->n_partitions;
    return 0;
}

int kq_data_decode_list_offsets_response(const uint8_t *buf, size_t len,
                                         kq_list_offsets_response *out, char *errbuf, size_t errlen)
{
    data_priv *pv = NULL;
    int rc;

    if (!out)
        return BAD("no output for decoded response");
    memset(out, 0, sizeof *out);
    rc = start_response(buf, len, KQ_API_LIST_OFFSETS, "ListOffsets",
                        KQ__RESPONSE__BODY_LIST_OFFSETS, &pv, &out->error, out->error_message,
                        errbuf, errlen);
    if (rc == 0 && !out->error)
        rc = dec_list_offsets_partitions(pv->rs->list_offsets, out, pv, errbuf, errlen);
    return finish_response(rc, pv, out, sizeof *out, &out->priv_);
}

void kq_data_list_offsets_response_free(kq_list_offsets_response *r)
{
    if (!r)
        return;
    priv_free(r->priv_);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------------------------------------- */
/* Metadata responses                                                                        */

int kq_data_encode_metadata_response(const kq_data_metadata_response *res, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__MetadataResponse mr = KQ__METADATA_RESPONSE__INIT;
    Kq__MetadataBroker *brokers = NULL, **bp = NULL;
    Kq__MetadataTopic *topics = NULL, **tp = NULL;
    Kq__MetadataPartition *parts = NULL, **pp = NULL;
    size_t np = 0, k = 0;
    int rc;

    if ((rc = start(out)) != 0)
        return rc;
    if (!res || (res->n_brokers > 0 && !res->brokers) || (res->n_topics > 0 && !res->topics))
        return KQ_ERR_INVALID_REQUEST;
    for (size_t i = 0; i < res->n_topics; i++) {
        const kq_data_metadata_topic *t = &res->topics[i];

        if (t->n_partitions > 0 && !t->partitions)
            return KQ_ERR_INVALID_REQUEST;
        for (size_t j = 0; j < t->n_partitions; j++) {
            const kq_data_metadata_partition *p = &t->partitions[j];

            if (p->n_replicas < 0 || p->n_isr < 0 || (p->n_replicas > 0 && !p->replicas) ||
                (p->n_isr > 0 && !p->isr))
                return KQ_ERR_INVALID_REQUEST;
        }
        np += t->n_partitions;
    }
    brokers = calloc(res->n_brokers ? res->n_brokers : 1, sizeof *brokers);
    bp = calloc(res->n_brokers ? res->n_brokers : 1, sizeof *bp);
    topics = calloc(res->n_topics ? res->n_topics : 1, sizeof *topics);
    tp = calloc(res->n_topics ? res->n_topics : 1, sizeof *tp);
    parts = calloc(np ? np : 1, sizeof *parts);
    pp = calloc(np ? np : 1, sizeof *pp);
    if (!brokers || !bp || !topics || !tp || !parts || !pp) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < res->n_brokers; i++) {
        const kq_data_metadata_broker *s = &res->brokers[i];

        kq__metadata_broker__init(&brokers[i]);
        brokers[i].node_id = s->id;
        brokers[i].host = (char *)(s->host ? s->host : "");
        brokers[i].port = s->port;
        brokers[i].rack = (char *)s->rack;
        bp[i] = &brokers[i];
    }
    for (size_t i = 0; i < res->n_topics; i++) {
        const kq_data_metadata_topic *s = &res->topics[i];
        Kq__MetadataTopic *d = &topics[i];

        kq__metadata_topic__init(d);
        d->name = (char *)(s->name ? s->name : "");
        d->topic_id.data = (uint8_t *)s->topic_id;
        d->topic_id.len = 16;
        d->error_code = s->error;
        d->n_partitions = s->n_partitions;
        d->partitions = &pp[k];
        for (size_t j = 0; j < s->n_partitions; j++, k++) {
            const kq_data_metadata_partition *sp = &s->partitions[j];
            Kq__MetadataPartition *dp = &parts[k];

            kq__metadata_partition__init(dp);
            dp->partition = sp->partition;
            dp->error_code = sp->error;
            dp->leader_id = sp->leader_id;
            dp->leader_epoch = sp->leader_epoch;
            dp->n_replicas = (size_t)sp->n_replicas;
            dp->replicas = (int32_t *)sp->replicas;
            dp->n_isr = (size_t)sp->n_isr;
            dp->isr = (int32_t *)sp->isr;
            pp[k] = dp;
        }
        tp[i] = d;
    }
    mr.n_brokers = res->n_brokers;
    mr.brokers = bp;
    mr.n_topics = res->n_topics;
    mr.topics = tp;
    rs.api_key = KQ_API_METADATA;
    rs.error_code = 0;
    rs.body_case = KQ__RESPONSE__BODY_METADATA;
    rs.metadata = &mr;
    rc = pack(&rs.base, out);
out:
    free(brokers);
    free(bp);
    free(topics);
    free(tp);
    free(parts);
    free(pp);
    return rc;
}

static int dec_metadata_brokers(const Kq__MetadataResponse *w, data_priv *pv, char *errbuf,
                                size_t errlen)
{
    int32_t *ids = NULL;
    int rc = 0;

    if (w->n_brokers > KQ_DATA_MAX_METADATA_BROKERS)
        return BAD("Metadata response has %zu brokers (at most %d)", w->n_brokers,
                   KQ_DATA_MAX_METADATA_BROKERS);
    pv->md_brokers = calloc(w->n_brokers ? w->n_brokers : 1, sizeof *pv->md_brokers);
    ids = calloc(w->n_brokers ? w->n_brokers : 1, sizeof *ids);
    if (!pv->md_brokers || !ids) {
        rc = fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding Metadata response");
        goto out;
    }
    for (size_t i = 0; i < w->n_brokers; i++) {
        const Kq__MetadataBroker *s = w->brokers[i];
        kq_data_metadata_broker *d = &pv->md_brokers[i];
        size_t hl = bounded_len(s->host, KQ_CODEC_MAX_ENDPOINT - 1);

        if (s->node_id < 0) {
            rc = BAD("Metadata response brokers[%zu] id %" PRId32 " is invalid (must be >= 0)", i,
                     s->node_id);
            goto out;
        }
        if (hl == 0 || hl > KQ_CODEC_MAX_ENDPOINT - 1) {
            rc = BAD("Metadata response brokers[%zu] (id %" PRId32
                     ") host is %s (must be 1..%d bytes)",
                     i, s->node_id, hl ? "too long" : "empty", KQ_CODEC_MAX_ENDPOINT - 1);
            goto out;
        }
        if (s->port < 1 || s->port > 65535) {
            rc = BAD("Metadata response brokers[%zu] (id %" PRId32 ") port %" PRId32
                     " is invalid (must be 1..65535)",
                     i, s->node_id, s->port);
            goto out;
        }
        if (bounded_len(s->rack, KQ_DATA_MAX_RACK) > KQ_DATA_MAX_RACK) {
            rc = BAD("Metadata response brokers[%zu] (id %" PRId32 ") rack is longer than %d bytes",
                     i, s->node_id, KQ_DATA_MAX_RACK);
            goto out;
        }
        d->id = s->node_id;
        d->host = s->host;
        d->port = s->port;
        d->rack = s->rack;
        ids[i] = s->node_id;
    }
    qsort(ids, w->n_brokers, sizeof *ids, cmp_i32);
    for (size_t i = 1; i < w->n_brokers; i++) {
        if (ids[i] == ids[i - 1]) {
            rc = BAD("Metadata response names broker %" PRId32 " twice", ids[i]);
            goto out;
        }
    }
out:
    free(ids);
    return rc;
}

/* Sorted copy of n ids into tmp (room for n); rejects a negative id or one named twice. */
static int sorted_ids(const char *what, const char *list, const int32_t *ids, size_t n,
                      int32_t *tmp, char *errbuf, size_t errlen)
{
    if (n > KQ_DATA_MAX_METADATA_REPLICAS)
        return BAD("%s has %zu %s (at most %d)", what, n, list, KQ_DATA_MAX_METADATA_REPLICAS);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0)
            return BAD("%s %s[%zu] %" PRId32 " is invalid (must be >= 0)", what, list, i, ids[i]);
        tmp[i] = ids[i];
    }
    qsort(tmp, n, sizeof *tmp, cmp_i32);
    for (size_t i = 1; i < n; i++)
        if (tmp[i] == tmp[i - 1])
            return BAD("%s %s name broker %" PRId32 " twice", what, list, tmp[i]);
    return 0;
}

static int dec_metadata_partition(const Kq__MetadataPartition *s, const char *what,
                                  kq_data_metadata_partition *d, int32_t *reps, int32_t *isr,
                                  char *errbuf, size_t errlen)
{
    int rc;

    if (s->partition < 0)
        return BAD("%s partition %" PRId32 " is invalid (must be >= 0)", what, s->partition);
    if (s->error_code < 0)
        return BAD("%s error_code %" PRId32 " is invalid", what, s->error_code);
    if (s->leader_id < -1 || s->leader_epoch < -1)
        return BAD("%s leader_id %" PRId32 " or leader_epoch %" PRId32
                   " is invalid (must be >= -1)",
                   what, s->leader_id, s->leader_epoch);
    if ((rc = sorted_ids(what, "replicas", s->replicas, s->n_replicas, reps, errbuf, errlen)) != 0)
        return rc;
    if ((rc = sorted_ids(what, "isr", s->isr, s->n_isr, isr, errbuf, errlen)) != 0)
        return rc;
    for (size_t i = 0; i < s->n_isr; i++)
        if (!bsearch(&s->isr[i], reps, s->n_replicas, sizeof *reps, cmp_i32))
            return BAD("%s isr member %" PRId32 " is not a replica", what, s->isr[i]);
    if (s->leader_id >= 0 && !bsearch(&s->leader_id, reps, s->n_replicas, sizeof *reps, cmp_i32))
        return BAD("%s leader %" PRId32 " is not a replica", what, s->leader_id);
    d->partition = s->partition;
    d->error = s->error_code;
    d->leader_id = s->leader_id;
    d->leader_epoch = s->leader_epoch;
    d->replicas = s->n_replicas ? s->replicas : NULL;
    d->n_replicas = (int)s->n_replicas;
    d->isr = s->n_isr ? s->isr : NULL;
    d->n_isr = (int)s->n_isr;
    return 0;
}

static int dec_metadata_topics(const Kq__MetadataResponse *w, data_priv *pv, char *errbuf,
                               size_t errlen)
{
    int32_t *reps = NULL, *isr = NULL, *pids = NULL;
    const char **names = NULL;
    size_t np = 0, k = 0;
    int rc = 0;

    if (w->n_topics > KQ_DATA_MAX_METADATA_TOPICS)
        return BAD("Metadata response has %zu topics (at most %d)", w->n_topics,
                   KQ_DATA_MAX_METADATA_TOPICS);
    for (size_t i = 0; i < w->n_topics; i++) {
        if (w->topics[i]->n_partitions > KQ_DATA_MAX_METADATA_PARTITIONS - np)
            return BAD("Metadata response has more than %d partitions",
                       KQ_DATA_MAX_METADATA_PARTITIONS);
        np += w->topics[i]->n_partitions;
    }
    pv->md_topics = calloc(w->n_topics ? w->n_topics : 1, sizeof *pv->md_topics);
    pv->md_parts = calloc(np ? np : 1, sizeof *pv->md_parts);
    names = calloc(w->n_topics ? w->n_topics : 1, sizeof *names);
    reps = calloc(KQ_DATA_MAX_METADATA_REPLICAS, sizeof *reps);
    isr = calloc(KQ_DATA_MAX_METADATA_REPLICAS, sizeof *isr);
    pids = calloc(np ? np : 1, sizeof *pids);
    if (!pv->md_topics || !pv->md_parts || !names || !reps || !isr || !pids) {
        rc = fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding Metadata response");
        goto out;
    }
    for (size_t i = 0; i < w->n_topics; i++) {
        const Kq__MetadataTopic *s = w->topics[i];
        kq_data_metadata_topic *d = &pv->md_topics[i];
        char what[64];

        snprintf(what, sizeof what, "Metadata response topics[%zu]", i);
        if ((rc = check_topic_name(what, s->name, errbuf, errlen)) != 0)
            goto out;
        if (s->topic_id.len != 16) {
            rc = BAD("%s (%s) topic_id is %zu bytes (must be 16)", what, s->name, s->topic_id.len);
            goto out;
        }
        memcpy(d->topic_id, s->topic_id.data, 16);
        if (s->error_code < 0) {
            rc = BAD("%s (%s) error_code %" PRId32 " is invalid", what, s->name, s->error_code);
            goto out;
        }
        if (s->error_code == 0 && kq_uuid_is_zero(d->topic_id)) {
            rc = BAD("%s (%s) topic_id is all zero", what, s->name);
            goto out;
        }
        if (s->error_code != 0 && s->n_partitions > 0) {
            rc = BAD("%s (%s) has error %s and %zu partitions", what, s->name,
                     kq_err_name(s->error_code), s->n_partitions);
            goto out;
        }
        for (size_t j = 0; j < s->n_partitions; j++) {
            char pw[128];

            snprintf(pw, sizeof pw, "Metadata response topic %.64s partitions[%zu]", s->name, j);
            rc = dec_metadata_partition(s->partitions[j], pw, &pv->md_parts[k + j], reps, isr,
                                        errbuf, errlen);
            if (rc)
                goto out;
            pids[j] = s->partitions[j]->partition;
        }
        qsort(pids, s->n_partitions, sizeof *pids, cmp_i32);
        for (size_t j = 1; j < s->n_partitions; j++) {
            if (pids[j] == pids[j - 1]) {
                rc = BAD("%s (%s) names partition %" PRId32 " twice", what, s->name, pids[j]);
                goto out;
            }
        }
        d->name = s->name;
        d->error = s->error_code;
        d->partitions = s->n_partitions ? &pv->md_parts[k] : NULL;
        d->n_partitions = s->n_partitions;
        names[i] = s->name;
        k += s->n_partitions;
    }
    rc = check_unique_names("Metadata response", names, w->n_topics, errbuf, errlen);
out:
    free(names);
    free(reps);
    free(isr);
    free(pids);
    return rc;
}

int kq_data_decode_metadata_response(const uint8_t *buf, size_t len, kq_data_metadata_response *out,
                                     char *errbuf, size_t errlen)
{
    data_priv *pv = NULL;
    int rc;

    if (!out)
        return BAD("no output for decoded response");
    memset(out, 0, sizeof *out);
    rc = start_response(buf, len, KQ_API_METADATA, "Metadata", KQ__RESPONSE__BODY_METADATA, &pv,
                        &out->error, out->error_message, errbuf, errlen);
    if (rc || out->error)
        goto out;
    if ((rc = dec_metadata_brokers(pv->rs->metadata, pv, errbuf, errlen)) != 0)
        goto out;
    if ((rc = dec_metadata_topics(pv->rs->metadata, pv, errbuf, errlen)) != 0)
        goto out;
    out->brokers = pv->rs->metadata->n_brokers ? pv->md_brokers : NULL;
    out->n_brokers = pv->rs->metadata->n_brokers;
    out->topics = pv->rs->metadata->n_topics ? pv->md_topics : NULL;
    out->n_topics = pv->rs->metadata->n_topics;
out:
    return finish_response(rc, pv, out, sizeof *out, &out->priv_);
}

void kq_data_metadata_response_free(kq_data_metadata_response *r)
{
    if (!r)
        return;
    priv_free(r->priv_);
    memset(r, 0, sizeof *r);
}
