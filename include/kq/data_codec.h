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

/* ---- Produce ----------------------------------------------------------------------------- */

/* Valid: topic_id not all zero; partition >= 0; acks -1, 0 or 1; timeout_ms >= 0; producer
 * fields all -1 (not idempotent) or producer_id >= 0, producer_epoch 0..32767,
 * base_sequence >= 0; 1..KQ_DATA_MAX_RECORDS records, each <= KQ_DATA_MAX_RECORD_BYTES and
 * together <= KQ_DATA_MAX_PRODUCE_BYTES (empty values are allowed). */
typedef struct kq_produce_request {
    uint8_t topic_id[16];
    int32_t partition;
    int32_t acks;
    int32_t timeout_ms;
    int64_t producer_id;
    int32_t producer_epoch;
    int32_t base_sequence;
    const uint8_t *const *records; /* records[i] is record_lens[i] bytes, i < n_records */
    const size_t *record_lens;
    size_t n_records;
} kq_produce_request;

/* Valid: error_code >= 0; with no error, base_offset >= 0 and log_start_offset in
 * [0, base_offset]; with an error, base_offset and log_start_offset >= -1. */
typedef struct kq_produce_response {
    int error; /* kq_err */
    int64_t base_offset;
    int64_t log_start_offset;
    char error_message[KQ_DATA_MAX_ERROR_MESSAGE + 1];
} kq_produce_response;

/* ---- Fetch ------------------------------------------------------------------------------- */

/* Valid: topic_id not all zero; partition >= 0; current_leader_epoch >= -1; fetch_offset >= 0;
 * last_fetched_epoch >= -1; log_start_offset >= -1 (and <= fetch_offset when >= 0);
 * partition_max_bytes > 0; no partition twice in one request. */
typedef struct kq_data_fetch_partition {
    uint8_t topic_id[16];
    int32_t partition;
    int32_t current_leader_epoch;
    int64_t fetch_offset;
    int32_t last_fetched_epoch;
    int64_t log_start_offset;
    int32_t partition_max_bytes;
} kq_data_fetch_partition;

/* Valid: replica_id -1 (consumer: broker_epoch -1, log_start_offset -1 in every partition)
 * or >= 0 (follower: equal to the envelope sender_id, broker_epoch >= 0); max_wait_ms >= 0;
 * min_bytes >= 0; max_bytes > 0; 1..KQ_DATA_MAX_FETCH_PARTITIONS partitions. */
typedef struct kq_data_fetch_request {
    int32_t replica_id;
    int64_t broker_epoch;
    int32_t max_wait_ms;
    int32_t min_bytes;
    int32_t max_bytes;
    const kq_data_fetch_partition *partitions;
    size_t n_partitions;
} kq_data_fetch_request;

/* One batch as stored (kq_plog_batch has the same fields) and as sent. */
typedef struct kq_data_batch {
    int64_t base_offset;
    int32_t leader_epoch;
    int32_t count; /* >= 1; the next batch starts at base_offset + count */
    uint32_t crc32c;
    int64_t producer_id;    /* -1 if not idempotent */
    int16_t producer_epoch; /* -1 if not idempotent */
    int32_t base_sequence;  /* -1 if not idempotent */
    const uint8_t *records;
    size_t len;
} kq_data_batch;

/* CRC-32C of a batch: base_offset (i64 BE), leader_epoch (i32 BE), count (i32 BE),
 * producer_id (i64 BE), producer_epoch (i16 BE), base_sequence (i32 BE), then the records
 * bytes. This is the value kq_plog stores and returns, so a leader sends it unchanged. */
uint32_t kq_data_batch_crc(const kq_data_batch *b);

/* Valid: topic_id not all zero; partition >= 0; error >= 0; high_watermark and
 * log_start_offset >= -1, and with no error 0 <= log_start_offset <= high_watermark;
 * diverging epoch (present when diverging_epoch >= 0) has epoch >= 0, end_offset >= 0 and no
 * batches; current leader id and epoch >= -1; batches: at most KQ_DATA_MAX_BATCHES, none with
 * an error, each base_offset >= 0, leader_epoch >= 0, count >= 1, producer fields as in
 * Produce, crc32c == kq_data_batch_crc, and contiguous (each starts where the previous ended)
 * with leader epochs never decreasing. */
typedef struct kq_data_fetch_partition_result {
    uint8_t topic_id[16];
    int32_t partition;
    int error; /* kq_err */
    int64_t high_watermark;
    int64_t log_start_offset;
    int32_t diverging_epoch; /* -1 when absent */
    int64_t diverging_end_offset;
    int32_t current_leader_id; /* -1 when absent/unknown */
    int32_t current_leader_epoch;
    const kq_data_batch *batches;
    size_t n_batches;
} kq_data_fetch_partition_result;

/* A Fetch answer. A whole-request error (sent with kq_codec_encode_error_response, e.g.
 * INVALID_REQUEST or STALE_BROKER_EPOCH) decodes with error != 0, error_message set and no
 * partitions. Valid: at most KQ_DATA_MAX_FETCH_PARTITIONS partitions. */
typedef struct kq_data_fetch_response {
    int error;
    char error_message[KQ_DATA_MAX_ERROR_MESSAGE + 1];
    const kq_data_fetch_partition_result *partitions;
    size_t n_partitions;
    void *priv_; /* owned: unpacked message and arrays */
} kq_data_fetch_response;

/* ---- ListOffsets ------------------------------------------------------------------------- */

#define KQ_DATA_EARLIEST_TIMESTAMP (-2) /* the log start offset */
#define KQ_DATA_LATEST_TIMESTAMP (-1)   /* HW for consumers, LEO for replicas */

/* Valid: topic_id not all zero; partition >= 0; current_leader_epoch >= -1; timestamp
 * KQ_DATA_EARLIEST_TIMESTAMP or KQ_DATA_LATEST_TIMESTAMP; no partition twice. */
typedef struct kq_list_offsets_partition {
    uint8_t topic_id[16];
    int32_t partition;
    int32_t current_leader_epoch;
    int64_t timestamp;
} kq_list_offsets_partition;

/* Valid: replica_id -1 or equal to the envelope sender_id; 1..KQ_DATA_MAX_FETCH_PARTITIONS
 * partitions. */
typedef struct kq_list_offsets_request {
    int32_t replica_id;
    const kq_list_offsets_partition *partitions;
    size_t n_partitions;
} kq_list_offsets_request;

/* Valid: topic_id not all zero; partition >= 0; error >= 0; with no error offset >= 0, with
 * an error offset >= -1; leader_epoch >= -1. */
typedef struct kq_list_offsets_partition_result {
    uint8_t topic_id[16];
    int32_t partition;
    int error;
    int64_t offset;
    int32_t leader_epoch;
} kq_list_offsets_partition_result;

/* A whole-request error decodes with error != 0 and no partitions, as for Fetch. */
typedef struct kq_list_offsets_response {
    int error;
    char error_message[KQ_DATA_MAX_ERROR_MESSAGE + 1];
    const kq_list_offsets_partition_result *partitions;
    size_t n_partitions; /* <= KQ_DATA_MAX_FETCH_PARTITIONS */
    void *priv_;         /* owned */
} kq_list_offsets_response;

/* ---- Metadata --------------------------------------------------------------------------- */

/* Valid: at most KQ_DATA_MAX_METADATA_TOPICS names, each 1..KQ_DATA_MAX_TOPIC_NAME bytes, no
 * name twice; none means all topics. A broker answers a name it does not know (or an
 * invalid one) with that topic's error UNKNOWN_TOPIC_OR_PARTITION; the codec only carries it. */
typedef struct kq_data_metadata_request {
    const char *const *topics; /* topics[i], i < n_topics */
    size_t n_topics;
} kq_data_metadata_request;

/* Valid: id >= 0 and no id twice; host 1..KQ_CODEC_MAX_ENDPOINT - 1 bytes; port 1..65535;
 * rack absent (NULL) or <= KQ_DATA_MAX_RACK bytes. */
typedef struct kq_data_metadata_broker {
    int32_t id;
    const char *host;
    int32_t port;
    const char *rack; /* NULL: none */
} kq_data_metadata_broker;

/* Valid: partition >= 0 and not twice in its topic; error >= 0; leader_id and leader_epoch
 * >= -1; 0..KQ_DATA_MAX_METADATA_REPLICAS replicas, each >= 0, none twice; the ISR likewise
 * and a subset of the replicas; leader_id -1 or one of the replicas. */
typedef struct kq_data_metadata_partition {
    int32_t partition;
    int error; /* kq_err */
    int32_t leader_id;
    int32_t leader_epoch;
    const int32_t *replicas;
    int n_replicas;
    const int32_t *isr;
    int n_isr;
} kq_data_metadata_partition;

/* Valid: name 1..KQ_DATA_MAX_TOPIC_NAME bytes; error >= 0; with no error topic_id not all
 * zero (with an error it may be all zero, e.g. for an unknown name) and no partitions with
 * an error; no topic name twice. */
typedef struct kq_data_metadata_topic {
    const char *name;
    uint8_t topic_id[16];
    int error; /* kq_err */
    const kq_data_metadata_partition *partitions;
    size_t n_partitions;
} kq_data_metadata_topic;

/* A Metadata answer. A whole-request error decodes with error != 0, error_message set and no
 * brokers or topics, as for Fetch. Valid: at most KQ_DATA_MAX_METADATA_BROKERS brokers,
 * KQ_DATA_MAX_METADATA_TOPICS topics and KQ_DATA_MAX_METADATA_PARTITIONS partitions in all. */
typedef struct kq_data_metadata_response {
    int error;
    char error_message[KQ_DATA_MAX_ERROR_MESSAGE + 1];
    const kq_data_metadata_broker *brokers;
    size_t n_brokers;
    const kq_data_metadata_topic *topics;
    size_t n_topics;
    void *priv_; /* owned: unpacked message and arrays */
} kq_data_metadata_response;

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
