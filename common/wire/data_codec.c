/*
 * kq_datacodec: data-plane RPCs (proto/kq_data.proto) <-> include/kq/data_codec.h structs.
 * Contract and ownership: include/kq/data_codec.h.
 *
 * Every body is a wire table (common/wire/wire.h) with the field limits; what spans fields
 * (producer ids, consumer or follower, duplicates, batch contiguity and checksums, replica
 * sets) is checked after the table's decode. Decoders keep the unpacked protobuf envelope
 * (strings and record bytes point into it) and the arrays they build in one arena, both owned
 * by the result.
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
#include "kq_data_tables.h"
#include "wire.h"

#define fail kq_wire_fail
#define BAD(...) kq_wire_fail(errbuf, errlen, KQ_ERR_INVALID_REQUEST, __VA_ARGS__)
#define NOMEM(what) kq_wire_fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding %s", what)

static const uint8_t empty_input[1];

bool kq_data_is_data_api(uint32_t api_key)
{
    const kq_api_info *api = kq_api_find(api_key);

    return api && api->kind == KQ_API_KIND_DATA;
}

static int start(kq_buf *out)
{
    if (!out)
        return KQ_ERR_INVALID_REQUEST;
    out->data = NULL;
    out->len = 0;
    return 0;
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

/* The tables are generated from proto/kq_data.proto (kq_data_tables.c). */
const kq_wire_msg *const kq_wire_data_tables[] = {
    &kq_wt_produce_request,       &kq_wt_data_fetch_request, &kq_wt_list_offsets_request,
    &kq_wt_metadata_request,      &kq_wt_produce_response,   &kq_wt_data_fetch_response,
    &kq_wt_list_offsets_response, &kq_wt_metadata_response,  NULL,
};

/* ---------------------------------------------------------------------------------------- */
/* requests                                                                                  */

static int encode_request(const char *cluster_id, int32_t sender_id, uint32_t api_key,
                          const kq_wire_msg *m, const void *req, kq_buf *out)
{
    if ((start(out)) || !req)
        return KQ_ERR_INVALID_REQUEST;
    return kq_wire_send(api_key, cluster_id ? cluster_id : "", sender_id, m, req, out);
}

int kq_data_encode_produce_request(const char *cluster_id, int32_t sender_id,
                                   const kq_produce_request *req, kq_buf *out)
{
    return encode_request(cluster_id, sender_id, KQ_API_PRODUCE, &kq_wt_produce_request, req, out);
}

int kq_data_encode_fetch_request(const char *cluster_id, int32_t sender_id,
                                 const kq_data_fetch_request *req, kq_buf *out)
{
    return encode_request(cluster_id, sender_id, KQ_API_DATA_FETCH, &kq_wt_data_fetch_request, req,
                          out);
}

int kq_data_encode_list_offsets_request(const char *cluster_id, int32_t sender_id,
                                        const kq_list_offsets_request *req, kq_buf *out)
{
    return encode_request(cluster_id, sender_id, KQ_API_LIST_OFFSETS, &kq_wt_list_offsets_request,
                          req, out);
}

int kq_data_encode_metadata_request(const char *cluster_id, int32_t sender_id,
                                    const kq_data_metadata_request *req, kq_buf *out)
{
    return encode_request(cluster_id, sender_id, KQ_API_METADATA, &kq_wt_metadata_request, req,
                          out);
}

/* A producer id of -1 comes with epoch and sequence -1; any other with both >= 0. */
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
    if (pepoch < 0)
        return BAD("%s producer_epoch %" PRId32 " is invalid (must be 0..32767)", what, pepoch);
    if (seq < 0)
        return BAD("%s base_sequence %" PRId32 " is invalid (must be >= 0)", what, seq);
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
        return NOMEM(what);
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

static int check_produce(const kq_produce_request *r, char *errbuf, size_t errlen)
{
    size_t total = 0;
    int rc = check_producer("Produce", r->producer_id, r->producer_epoch, r->base_sequence, errbuf,
                            errlen);

    for (size_t i = 0; !rc && i < r->n_records; i++)
        total += r->record_lens[i];
    if (!rc && total > KQ_DATA_MAX_PRODUCE_BYTES)
        return BAD("Produce records total %zu bytes (at most %d)", total,
                   KQ_DATA_MAX_PRODUCE_BYTES);
    return rc;
}

static int check_fetch(const kq_data_fetch_request *r, int32_t sender_id, char *errbuf,
                       size_t errlen)
{
    bool consumer = r->replica_id == KQ_DATA_CONSUMER_REPLICA_ID;

    if (consumer && r->broker_epoch != -1)
        return BAD("Fetch broker_epoch %" PRId64 " is invalid for a consumer (must be -1)",
                   r->broker_epoch);
    if (!consumer && r->replica_id != sender_id)
        return BAD("Fetch replica_id %" PRId32 " differs from the sender %" PRId32, r->replica_id,
                   sender_id);
    if (!consumer && r->broker_epoch < 0)
        return BAD("Fetch broker_epoch %" PRId64 " is invalid for a follower (must be >= 0)",
                   r->broker_epoch);
    for (size_t i = 0; i < r->n_partitions; i++) {
        const kq_data_fetch_partition *p = &r->partitions[i];

        if (consumer && p->log_start_offset != -1)
            return BAD("Fetch partitions[%zu] log_start_offset %" PRId64
                       " is invalid (must be -1 for a consumer)",
                       i, p->log_start_offset);
        if (p->log_start_offset > p->fetch_offset)
            return BAD("Fetch partitions[%zu] log_start_offset %" PRId64
                       " is above fetch_offset %" PRId64,
                       i, p->log_start_offset, p->fetch_offset);
    }
    return NO_DUPLICATES("Fetch", r->partitions, r->n_partitions, kq_data_fetch_partition);
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
        return NOMEM(what);
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

static int check_body(kq_data_request *r, char *errbuf, size_t errlen)
{
    switch (r->api_key) {
    case KQ_API_PRODUCE:
        return check_produce(&r->u.produce, errbuf, errlen);
    case KQ_API_DATA_FETCH:
        return check_fetch(&r->u.fetch, r->sender_id, errbuf, errlen);
    case KQ_API_LIST_OFFSETS:
        if (r->u.list_offsets.replica_id >= 0 && r->u.list_offsets.replica_id != r->sender_id)
            return BAD("ListOffsets replica_id %" PRId32 " differs from the sender %" PRId32,
                       r->u.list_offsets.replica_id, r->sender_id);
        return NO_DUPLICATES("ListOffsets", r->u.list_offsets.partitions,
                             r->u.list_offsets.n_partitions, kq_list_offsets_partition);
    default:
        return check_unique_names("Metadata request", r->u.metadata.topics, r->u.metadata.n_topics,
                                  errbuf, errlen);
    }
}

static const kq_wire_msg *request_table(uint32_t api_key)
{
    switch (api_key) {
    case KQ_API_PRODUCE:
        return &kq_wt_produce_request;
    case KQ_API_DATA_FETCH:
        return &kq_wt_data_fetch_request;
    case KQ_API_LIST_OFFSETS:
        return &kq_wt_list_offsets_request;
    default:
        return &kq_wt_metadata_request;
    }
}

int kq_data_decode_request(const uint8_t *buf, size_t len, kq_data_request *out, char *errbuf,
                           size_t errlen)
{
    bool nul = false;
    kq_wire_owned *pv = NULL;
    Kq__Request *rq;
    ProtobufCMessage **body;
    const char *name;
    int rc;

    if (!out)
        return BAD("no output for decoded request");
    memset(out, 0, sizeof *out);
    out->sender_id = -1;
    if ((rc = kq_pb_unpack_request(buf, len, &rq, &out->api_key, &nul, errbuf, errlen)) != 0)
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
        return NOMEM("a request");
    }
    pv->msg = &rq->base;
    name = kq_api_find(rq->api_key)->name; /* a data-plane API (checked above) */
    body = kq_wire_body_slot(&kq__request__descriptor, rq, rq->api_key);
    if (rq->api_version != 0)
        rc = fail(errbuf, errlen, KQ_ERR_UNSUPPORTED_VERSION,
                  "%s version %u is not supported (only version 0)", name, rq->api_version);
    else if (nul)
        rc = BAD("%s request has a string with a NUL byte", name);
    else if (strnlen(rq->cluster_id, KQ_CODEC_MAX_CLUSTER_ID + 1) > KQ_CODEC_MAX_CLUSTER_ID)
        rc = BAD("%s request cluster_id is longer than %d bytes", name, KQ_CODEC_MAX_CLUSTER_ID);
    else if (rq->sender_id < -1)
        rc = BAD("%s request sender_id %" PRId32 " is invalid", name, rq->sender_id);
    else if ((int)rq->body_case != kq_api_find(rq->api_key)->body_case || !*body)
        rc = BAD("%s request has no %s body", name, name);
    else
        rc = kq_wire_decode(request_table(rq->api_key), *body, &out->u, &pv->a, errbuf, errlen);
    out->sender_id = rq->sender_id;
    if (!rc)
        rc = check_body(out, errbuf, errlen);
    if (rc) {
        uint32_t key = out->api_key;

        memset(out, 0, sizeof *out);
        out->api_key = key;
        out->sender_id = -1;
        kq_wire_owned_free(pv);
        return rc;
    }
    snprintf(out->cluster_id, sizeof out->cluster_id, "%s", rq->cluster_id);
    out->priv_ = pv;
    return 0;
}

void kq_data_request_free(kq_data_request *r)
{
    if (!r)
        return;
    kq_wire_owned_free(r->priv_);
    memset(r, 0, sizeof *r);
    r->sender_id = -1;
}

/* ---------------------------------------------------------------------------------------- */
/* responses                                                                                 */

static int encode_response(uint32_t api_key, const kq_wire_msg *m, const void *res, kq_buf *out)
{
    if (start(out) || !res)
        return KQ_ERR_INVALID_REQUEST;
    return kq_wire_send(api_key, KQ_WIRE_ANSWER, 0, m, res, out);
}

int kq_data_encode_produce_response(const kq_produce_response *res, kq_buf *out)
{
    return encode_response(KQ_API_PRODUCE, &kq_wt_produce_response, res, out);
}

int kq_data_encode_fetch_response(const kq_data_fetch_response *res, kq_buf *out)
{
    return encode_response(KQ_API_DATA_FETCH, &kq_wt_data_fetch_response, res, out);
}

int kq_data_encode_list_offsets_response(const kq_list_offsets_response *res, kq_buf *out)
{
    return encode_response(KQ_API_LIST_OFFSETS, &kq_wt_list_offsets_response, res, out);
}

int kq_data_encode_metadata_response(const kq_data_metadata_response *res, kq_buf *out)
{
    return encode_response(KQ_API_METADATA, &kq_wt_metadata_response, res, out);
}

/* Every answer decoder: unpacks the envelope for api_key (into a private block that *priv
 * takes on success), takes an error answer's code and message into *error and msg, or
 * decodes the body through m into out (size bytes: zeroed on failure). */
static int decode_response(const uint8_t *buf, size_t len, uint32_t api_key, const kq_wire_msg *m,
                           void *out, int *error, char msg[KQ_DATA_MAX_ERROR_MESSAGE + 1],
                           void **priv, char *errbuf, size_t errlen)
{
    bool nul = false;
    const kq_api_info *api = kq_api_find(api_key);
    kq_wire_owned *pv = calloc(1, sizeof *pv);
    Kq__Response *rs;
    ProtobufCMessage **body;
    int rc = 0;

    memset(out, 0, m->size);
    if (!pv)
        return NOMEM(api->name);
    if (!buf && len > 0)
        rc = fail(errbuf, errlen, KQ_ERR_MALFORMED, "%s response does not parse (no buffer)",
                  api->name);
    else if (!(rs = (Kq__Response *)kq_pb_unpack(&kq__response__descriptor, buf ? buf : empty_input,
                                                 len, KQ_PB_ANSWER, &rc, &nul, errbuf, errlen)))
        rc = rc == KQ_ERR_MALFORMED ? fail(errbuf, errlen, rc,
                                           "%s response does not parse (%zu bytes)", api->name, len)
                                    : rc;
    else if (!(pv->msg = &rs->base,
               body = kq_wire_body_slot(&kq__response__descriptor, rs, api_key)))
        rc = KQ_ERR_INTERNAL;
    else if (rs->api_key != api_key)
        rc = BAD("%s response has api key %u", api->name, rs->api_key);
    else if (nul)
        rc = BAD("%s response has a string with a NUL byte", api->name);
    else if (rs->error_code < 0)
        rc = BAD("%s response error_code %" PRId32 " is invalid", api->name, rs->error_code);
    else if (rs->error_code && rs->body_case != KQ__RESPONSE__BODY__NOT_SET)
        rc = BAD("%s error response carries a body", api->name);
    else if (rs->error_code) {
        *error = rs->error_code;
        snprintf(msg, KQ_DATA_MAX_ERROR_MESSAGE + 1, "%s",
                 rs->error_message ? rs->error_message : "");
    } else if ((int)rs->body_case != api->body_case || !*body)
        rc = BAD("%s response has no %s body", api->name, api->name);
    else
        rc = kq_wire_decode(m, *body, out, &pv->a, errbuf, errlen);
    if (rc) {
        memset(out, 0, m->size);
        kq_wire_owned_free(pv);
    } else if (priv) {
        *priv = pv;
    } else {
        kq_wire_owned_free(pv);
    }
    return rc;
}

int kq_data_decode_produce_response(const uint8_t *buf, size_t len, kq_produce_response *out,
                                    char *errbuf, size_t errlen)
{
    int error = 0, rc;
    char msg[KQ_DATA_MAX_ERROR_MESSAGE + 1] = "";

    if (!out)
        return BAD("no output for decoded response");
    rc = decode_response(buf, len, KQ_API_PRODUCE, &kq_wt_produce_response, out, &error, msg, NULL,
                         errbuf, errlen);
    if (!rc && error) {
        out->error = error;
        memcpy(out->error_message, msg, sizeof msg);
    } else if (!rc && !out->error && out->base_offset < 0) {
        rc = BAD("Produce response base_offset %" PRId64 " is invalid (must be >= 0)",
                 out->base_offset);
    } else if (!rc && !out->error &&
               (out->log_start_offset < 0 || out->log_start_offset > out->base_offset)) {
        rc = BAD("Produce response log_start_offset %" PRId64
                 " is invalid (must be 0..base_offset %" PRId64 ")",
                 out->log_start_offset, out->base_offset);
    }
    if (rc || error) {
        if (rc)
            memset(out, 0, sizeof *out);
        out->base_offset = -1;
        out->log_start_offset = -1;
    }
    return rc;
}

/* A partition's batches: contiguous, leader epochs not decreasing, producer fields together,
 * checksums right. */
static int check_batches(const kq_data_fetch_partition_result *p, const char *what, char *errbuf,
                         size_t errlen)
{
    for (size_t j = 0; j < p->n_batches; j++) {
        const kq_data_batch *b = &p->batches[j];
        char bw[80];
        uint32_t crc;
        int rc;

        snprintf(bw, sizeof bw, "%.40s batches[%zu]", what, j);
        if (b->base_offset > INT64_MAX - b->count)
            return BAD("%s base_offset %" PRId64 " + count %" PRId32 " overflows", bw,
                       b->base_offset, b->count);
        if ((rc = check_producer(bw, b->producer_id, b->producer_epoch, b->base_sequence, errbuf,
                                 errlen)) != 0)
            return rc;
        if (j > 0 && b->base_offset != b[-1].base_offset + b[-1].count)
            return BAD("%s base_offset %" PRId64 " is not contiguous (expected %" PRId64 ")", bw,
                       b->base_offset, b[-1].base_offset + b[-1].count);
        if (j > 0 && b->leader_epoch < b[-1].leader_epoch)
            return BAD("%s leader_epoch %" PRId32 " is below the previous batch's %" PRId32, bw,
                       b->leader_epoch, b[-1].leader_epoch);
        if ((crc = kq_data_batch_crc(b)) != b->crc32c)
            return fail(errbuf, errlen, KQ_ERR_CORRUPT_MESSAGE,
                        "%s crc32c 0x%08" PRIx32 " does not match its contents (0x%08" PRIx32 ")",
                        bw, b->crc32c, crc);
    }
    return 0;
}

static int check_fetch_response(const kq_data_fetch_response *r, char *errbuf, size_t errlen)
{
    for (size_t i = 0; i < r->n_partitions; i++) {
        const kq_data_fetch_partition_result *p = &r->partitions[i];
        char what[64];
        int rc;

        snprintf(what, sizeof what, "Fetch response partitions[%zu]", i);
        if (p->error == 0 && (p->log_start_offset < 0 || p->high_watermark < 0 ||
                              p->log_start_offset > p->high_watermark))
            return BAD("%s log_start_offset %" PRId64 " and high_watermark %" PRId64
                       " are invalid (must be 0 <= log_start_offset <= high_watermark)",
                       what, p->log_start_offset, p->high_watermark);
        if (p->error != 0 && p->n_batches > 0)
            return BAD("%s has error %s and %zu batches", what, kq_err_name(p->error),
                       p->n_batches);
        if (p->diverging_epoch >= 0 && p->n_batches > 0)
            return BAD("%s has a diverging_epoch and %zu batches", what, p->n_batches);
        if ((rc = check_batches(p, what, errbuf, errlen)) != 0)
            return rc;
    }
    return 0;
}

int kq_data_decode_fetch_response(const uint8_t *buf, size_t len, kq_data_fetch_response *out,
                                  char *errbuf, size_t errlen)
{
    int error = 0, rc;
    char msg[KQ_DATA_MAX_ERROR_MESSAGE + 1] = "";

    if (!out)
        return BAD("no output for decoded response");
    rc = decode_response(buf, len, KQ_API_DATA_FETCH, &kq_wt_data_fetch_response, out, &error, msg,
                         &out->priv_, errbuf, errlen);
    if (!rc && (rc = check_fetch_response(out, errbuf, errlen)))
        kq_data_fetch_response_free(out);
    out->error = error;
    memcpy(out->error_message, msg, sizeof msg);
    return rc;
}

void kq_data_fetch_response_free(kq_data_fetch_response *r)
{
    if (!r)
        return;
    kq_wire_owned_free(r->priv_);
    memset(r, 0, sizeof *r);
}

int kq_data_decode_list_offsets_response(const uint8_t *buf, size_t len,
                                         kq_list_offsets_response *out, char *errbuf, size_t errlen)
{
    int error = 0, rc;
    char msg[KQ_DATA_MAX_ERROR_MESSAGE + 1] = "";

    if (!out)
        return BAD("no output for decoded response");
    rc = decode_response(buf, len, KQ_API_LIST_OFFSETS, &kq_wt_list_offsets_response, out, &error,
                         msg, &out->priv_, errbuf, errlen);
    for (size_t i = 0; !rc && i < out->n_partitions; i++)
        if (!out->partitions[i].error && out->partitions[i].offset < 0) {
            rc = BAD("ListOffsets response partitions[%zu] offset %" PRId64
                     " is invalid (must be >= 0)",
                     i, out->partitions[i].offset);
            kq_data_list_offsets_response_free(out);
        }
    out->error = error;
    memcpy(out->error_message, msg, sizeof msg);
    return rc;
}

void kq_data_list_offsets_response_free(kq_list_offsets_response *r)
{
    if (!r)
        return;
    kq_wire_owned_free(r->priv_);
    memset(r, 0, sizeof *r);
}

/* Rejects an id named twice among n (sorted into tmp, which has room for n). */
static int check_unique_ids(const char *what, const char *list, const int32_t *ids, size_t n,
                            int32_t *tmp, char *errbuf, size_t errlen)
{
    if (!n)
        return 0;
    memcpy(tmp, ids, n * sizeof *tmp);
    qsort(tmp, n, sizeof *tmp, cmp_i32);
    for (size_t i = 0; i < n; i++) {
        if (tmp[i] < 0)
            return BAD("%s %s id %" PRId32 " is invalid (must be >= 0)", what, list, tmp[i]);
        if (i > 0 && tmp[i] == tmp[i - 1])
            return BAD("%s %s name broker %" PRId32 " twice", what, list, tmp[i]);
    }
    return 0;
}

static int check_metadata_partition(const kq_data_metadata_partition *p, const char *what,
                                    int32_t *reps, int32_t *isr, char *errbuf, size_t errlen)
{
    int rc;

    if ((rc = check_unique_ids(what, "replicas", p->replicas, (size_t)p->n_replicas, reps, errbuf,
                               errlen)) ||
        (rc = check_unique_ids(what, "isr", p->isr, (size_t)p->n_isr, isr, errbuf, errlen)))
        return rc;
    for (int i = 0; i < p->n_isr; i++)
        if (!bsearch(&p->isr[i], reps, (size_t)p->n_replicas, sizeof *reps, cmp_i32))
            return BAD("%s isr member %" PRId32 " is not a replica", what, p->isr[i]);
    if (p->leader_id >= 0 &&
        !bsearch(&p->leader_id, reps, (size_t)p->n_replicas, sizeof *reps, cmp_i32))
        return BAD("%s leader %" PRId32 " is not a replica", what, p->leader_id);
    return 0;
}

static int check_metadata_topic(const kq_data_metadata_topic *t, const char *what, int32_t *tmp,
                                char *errbuf, size_t errlen)
{
    int32_t *reps = tmp, *isr = tmp + KQ_DATA_MAX_METADATA_REPLICAS;
    int32_t *pids = tmp + 2 * KQ_DATA_MAX_METADATA_REPLICAS;
    int rc;

    if (t->error == 0 && kq_uuid_is_zero(t->topic_id))
        return BAD("%s (%s) topic_id is all zero", what, t->name);
    if (t->error != 0 && t->n_partitions > 0)
        return BAD("%s (%s) has error %s and %zu partitions", what, t->name, kq_err_name(t->error),
                   t->n_partitions);
    for (size_t j = 0; j < t->n_partitions; j++) {
        char pw[128];

        snprintf(pw, sizeof pw, "Metadata response topic %.64s partitions[%zu]", t->name, j);
        if ((rc = check_metadata_partition(&t->partitions[j], pw, reps, isr, errbuf, errlen)))
            return rc;
        pids[j] = t->partitions[j].partition;
    }
    qsort(pids, t->n_partitions, sizeof *pids, cmp_i32);
    for (size_t j = 1; j < t->n_partitions; j++)
        if (pids[j] == pids[j - 1])
            return BAD("%s (%s) names partition %" PRId32 " twice", what, t->name, pids[j]);
    return 0;
}

static int check_metadata_response(const kq_data_metadata_response *r, char *errbuf, size_t errlen)
{
    size_t np = 0, most = r->n_brokers > r->n_topics ? r->n_brokers : r->n_topics;
    const char **names;
    int32_t *tmp;
    int rc = 0;

    for (size_t i = 0; i < r->n_topics; i++) {
        np += r->topics[i].n_partitions;
        if (r->topics[i].n_partitions > most)
            most = r->topics[i].n_partitions;
    }
    if (np > KQ_DATA_MAX_METADATA_PARTITIONS)
        return BAD("Metadata response has more than %d partitions",
                   KQ_DATA_MAX_METADATA_PARTITIONS);
    tmp = calloc(2 * KQ_DATA_MAX_METADATA_REPLICAS + most + 1, sizeof *tmp);
    names = calloc(r->n_topics + 1, sizeof *names);
    if (!tmp || !names) {
        rc = NOMEM("Metadata response");
        goto out;
    }
    for (size_t i = 0; i < r->n_brokers; i++)
        tmp[i] = r->brokers[i].id;
    qsort(tmp, r->n_brokers, sizeof *tmp, cmp_i32);
    for (size_t i = 1; i < r->n_brokers && !rc; i++)
        if (tmp[i] == tmp[i - 1])
            rc = BAD("Metadata response names broker %" PRId32 " twice", tmp[i]);
    for (size_t i = 0; i < r->n_topics && !rc; i++) {
        char what[64];

        snprintf(what, sizeof what, "Metadata response topics[%zu]", i);
        rc = check_metadata_topic(&r->topics[i], what, tmp, errbuf, errlen);
        names[i] = r->topics[i].name;
    }
    if (!rc)
        rc = check_unique_names("Metadata response", names, r->n_topics, errbuf, errlen);
out:
    free(tmp);
    free(names);
    return rc;
}

int kq_data_decode_metadata_response(const uint8_t *buf, size_t len, kq_data_metadata_response *out,
                                     char *errbuf, size_t errlen)
{
    int error = 0, rc;
    char msg[KQ_DATA_MAX_ERROR_MESSAGE + 1] = "";

    if (!out)
        return BAD("no output for decoded response");
    rc = decode_response(buf, len, KQ_API_METADATA, &kq_wt_metadata_response, out, &error, msg,
                         &out->priv_, errbuf, errlen);
    if (!rc && (rc = check_metadata_response(out, errbuf, errlen)))
        kq_data_metadata_response_free(out);
    out->error = error;
    memcpy(out->error_message, msg, sizeof msg);
    return rc;
}

void kq_data_metadata_response_free(kq_data_metadata_response *r)
{
    if (!r)
        return;
    kq_wire_owned_free(r->priv_);
    memset(r, 0, sizeof *r);
}
