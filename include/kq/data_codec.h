/*
 * kq_datacodec: the data-plane RPCs of the broker agent (proto/kq_data.proto, carried in the
 * kq_rpc.proto envelope) <-> plain C structs. Produce (KQ_API_PRODUCE = 1101), the
 * data-plane Fetch (KQ_API_DATA_FETCH = 1100; consumers send replica_id -1, followers their
 * broker id), ListOffsets (KQ_API_LIST_OFFSETS = 2, earliest/latest) and Metadata
 * (KQ_API_METADATA = 3: brokers, topics, partition leaders). Pure functions; protobuf-c types
 * never appear here.
 *
 * Every decode is fully validated: bytes that do not parse -> KQ_ERR_MALFORMED (as kq_codec);
 * a wrong value, count or bound -> KQ_ERR_INVALID_REQUEST; a batch whose crc32c does not match
 * -> KQ_ERR_CORRUPT_MESSAGE (as kq_codec_decode_response, so a fetcher retries). errbuf gets a
 * message naming the field (e.g. "Produce acks 2 is invalid (must be -1, 0 or 1)"). Encoders do
 * not validate (tests use them to build bad messages); they only fail on NULL arguments
 * (KQ_ERR_INVALID_REQUEST) or memory (KQ_ERR_NOMEM).
 *
 * Ownership:
 *   - Encoders borrow every input and fill a kq_buf with malloc'd data (kq_buf_free).
 *   - A decoded struct owns all its memory (arrays, and the record bytes, which point into the
 *     unpacked message it keeps in priv_); release it with the matching *_free, which leaves it
 *     zeroed and is safe on a zeroed or already-freed struct. After a failed decode the struct
 *     owns nothing (free is still allowed). Pointers inside stay valid until that free.
 *   - Input buffers of decoders are borrowed only during the call.
 */
#ifndef KQ_DATA_CODEC_H
#define KQ_DATA_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kq/codec.h"

/* Decode limits. */
#define KQ_DATA_MAX_RECORDS 100000                   /* records in one Produce */
#define KQ_DATA_MAX_RECORD_BYTES (1024 * 1024)       /* one record value */
#define KQ_DATA_MAX_PRODUCE_BYTES (64 * 1024 * 1024) /* all record values of one Produce */
#define KQ_DATA_MAX_FETCH_PARTITIONS 10000           /* partitions in one Fetch */
#define KQ_DATA_MAX_BATCHES 100000                   /* batches in one partition's answer */
#define KQ_DATA_MAX_ERROR_MESSAGE 255
#define KQ_DATA_MAX_TOPIC_NAME 249              /* Kafka's limit, bytes */
#define KQ_DATA_MAX_METADATA_TOPICS 10000       /* topics in one Metadata request/answer */
#define KQ_DATA_MAX_METADATA_BROKERS 10000      /* brokers in one Metadata answer */
#define KQ_DATA_MAX_METADATA_PARTITIONS 1000000 /* partitions in one Metadata answer */
#define KQ_DATA_MAX_METADATA_REPLICAS 1000      /* replicas (and ISR) of one partition */
#define KQ_DATA_MAX_RACK 255                    /* bytes */

#define KQ_DATA_ACKS_ALL (-1)
#define KQ_DATA_CONSUMER_REPLICA_ID (-1)
#define KQ_DATA_NO_PRODUCER_ID (-1)

/* 1 if api_key is KQ_API_PRODUCE, KQ_API_DATA_FETCH, KQ_API_LIST_OFFSETS or KQ_API_METADATA. */
bool kq_data_is_data_api(uint32_t api_key);

#define KQ_DATA_EARLIEST_TIMESTAMP (-2) /* ListOffsets: the log start offset */
#define KQ_DATA_LATEST_TIMESTAMP (-1)   /* ListOffsets: HW for consumers, LEO for replicas */

/* The request and answer structs (kq_produce_request, kq_data_fetch_request, kq_data_batch,
 * ...), generated from the annotations in proto/kq_data.proto, which give each one's "Valid:"
 * rules and document its fields. */
#include "kq/kq_data_types.h"

/* CRC-32C of a batch: base_offset (i64 BE), leader_epoch (i32 BE), count (i32 BE),
 * producer_id (i64 BE), producer_epoch (i16 BE), base_sequence (i32 BE), then the records
 * bytes. This is the value kq_plog stores and returns, so a leader sends it unchanged. */
uint32_t kq_data_batch_crc(const kq_data_batch *b);

/* ---- Batch payloads ------------------------------------------------------------------------ */

/* The records bytes of a data-plane batch: `count` records, each a base-128 varint length
 * followed by that many value bytes (a Produce's records, in order). A leader builds the
 * payload of the batch it appends with kq_data_records_pack; consumers split a fetched
 * batch with kq_data_records_walk. */
int kq_data_records_pack(const uint8_t *const *records, const size_t *lens, size_t n, kq_buf *out);
/* Called once per record in order, offset = base_offset + index; value points into the
 * payload (borrowed for the call). A non-zero return stops the walk and is returned. */
typedef int (*kq_data_record_cb)(void *arg, int64_t offset, const uint8_t *value, size_t len);
/* Returns KQ_ERR_MALFORMED, with a message naming the record, if the payload does not hold
 * exactly `count` (>= 1) well-formed records; the callback may have seen the records before
 * the bad one. cb may be NULL (validation only). */
int kq_data_records_walk(const uint8_t *payload, size_t len, int64_t base_offset, int32_t count,
                         kq_data_record_cb cb, void *arg, char *errbuf, size_t errlen);

/* ---- Requests ---------------------------------------------------------------------------- */

/* A decoded data-plane request: api_key says which member of the union is filled. */
typedef struct kq_data_request {
    uint32_t api_key; /* KQ_API_PRODUCE, _DATA_FETCH, _LIST_OFFSETS or _METADATA */
    char cluster_id[KQ_CODEC_MAX_CLUSTER_ID + 1];
    int32_t sender_id;
    union {
        kq_produce_request produce;
        kq_data_fetch_request fetch;
        kq_list_offsets_request list_offsets;
        kq_data_metadata_request metadata; /* topics point into the owned message */
    } u;
    void *priv_; /* owned: unpacked message and arrays */
} kq_data_request;

int kq_data_encode_produce_request(const char *cluster_id, int32_t sender_id,
                                   const kq_produce_request *req, kq_buf *out);
int kq_data_encode_fetch_request(const char *cluster_id, int32_t sender_id,
                                 const kq_data_fetch_request *req, kq_buf *out);
int kq_data_encode_list_offsets_request(const char *cluster_id, int32_t sender_id,
                                        const kq_list_offsets_request *req, kq_buf *out);
int kq_data_encode_metadata_request(const char *cluster_id, int32_t sender_id,
                                    const kq_data_metadata_request *req, kq_buf *out);

/* Decode a request envelope. If it parses but its api_key is not a data-plane API, returns
 * KQ_ERR_NOT_FOUND with out->api_key set and nothing owned: the caller hands the bytes to
 * kq_codec_decode_request instead. Envelope rules are kq_codec's (api_version 0, cluster_id
 * <= KQ_CODEC_MAX_CLUSTER_ID bytes and no NUL in any string, sender_id >= -1, the body that
 * matches the api_key). On any other failure out->api_key is still set when the envelope
 * parsed (0 otherwise) and nothing is owned, so a broker can answer
 * kq_codec_encode_error_response(out->api_key, KQ_ERR_INVALID_REQUEST, errbuf, ...) (also for
 * KQ_ERR_MALFORMED) and keep serving. */
int kq_data_decode_request(const uint8_t *buf, size_t len, kq_data_request *out, char *errbuf,
                           size_t errlen);
void kq_data_request_free(kq_data_request *r);

/* ---- Responses --------------------------------------------------------------------------- */

/* The response body; error_message is clipped to KQ_DATA_MAX_ERROR_MESSAGE bytes. A
 * whole-request error is sent with kq_codec_encode_error_response(KQ_API_..., ...). */
int kq_data_encode_produce_response(const kq_produce_response *res, kq_buf *out);
int kq_data_encode_fetch_response(const kq_data_fetch_response *res, kq_buf *out);
int kq_data_encode_list_offsets_response(const kq_list_offsets_response *res, kq_buf *out);
int kq_data_encode_metadata_response(const kq_data_metadata_response *res, kq_buf *out);

/* Decode an answer to Produce / Fetch / ListOffsets / Metadata. An error answer without a body
 * (from kq_codec_encode_error_response) decodes to 0 with out->error set from the envelope. */
int kq_data_decode_produce_response(const uint8_t *buf, size_t len, kq_produce_response *out,
                                    char *errbuf, size_t errlen);
int kq_data_decode_fetch_response(const uint8_t *buf, size_t len, kq_data_fetch_response *out,
                                  char *errbuf, size_t errlen);
void kq_data_fetch_response_free(kq_data_fetch_response *r);
int kq_data_decode_list_offsets_response(const uint8_t *buf, size_t len,
                                         kq_list_offsets_response *out, char *errbuf,
                                         size_t errlen);
void kq_data_list_offsets_response_free(kq_list_offsets_response *r);
int kq_data_decode_metadata_response(const uint8_t *buf, size_t len, kq_data_metadata_response *out,
                                     char *errbuf, size_t errlen);
void kq_data_metadata_response_free(kq_data_metadata_response *r);

#endif
