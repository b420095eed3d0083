/*
 * The kq tool's data-plane client (lib kq_tools): `kq produce` and `kq consume` talk to broker
 * agents with the data-plane RPCs of include/kq/data_codec.h.
 *
 * Two parts:
 *   - pure helpers (tools/data_args.c): argument parsing of both commands, the retriable-error
 *     classification, result-line formatting; unit-tested in tests/unit/tools;
 *   - the client (tools/data_client.c): a bootstrap list, Metadata to the first broker that
 *     answers, a cache of topic -> id / partitions / leaders and broker id -> endpoint, one
 *     kq_rpc_client per broker endpoint, and one-attempt Produce / ListOffsets / Fetch calls to a
 *     partition's leader. An error that means the cached metadata may be stale
 *     (kq_dc_refresh_needed) marks it so, and the next call refreshes it first; and the
 *     idempotent producer's retry loop (kq_dc_send_record). The consumer's fetch loop is in
 *     tools/cmd_data.c.
 *
 * Envelopes carry cluster_id "" and sender_id -1 (brokers accept an empty cluster id from
 * clients).
 *
 * Ownership: kq_dc_open's result is the caller's (kq_dc_close). Every other pointer argument
 * is borrowed for the call. Parsed argument structs point into the argv they were parsed
 * from (topic, value): keep argv alive while they are used. A kq_dc_fetch_result owns its
 * decoded response (kq_dc_fetch_result_free).
 */
#ifndef KQ_DATA_CLIENT_H
#define KQ_DATA_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kq/data_codec.h"
#include "kq_tools.h"

/* ---- pure helpers (data_args.c) -------------------------------------------------------- */

#define KQ_DC_DEFAULT_REQUEST_TIMEOUT_MS 30000
#define KQ_DC_DEFAULT_DELIVERY_TIMEOUT_MS 120000
#define KQ_DC_MAX_TIMEOUT_MS 86400000 /* one day: the bound of every *-ms flag */
#define KQ_DC_RETRY_BACKOFF_MS 100

typedef struct kq_dc_produce_args {
    kq_tools_addr bootstrap[KQ_TOOLS_MAX_ADDRS];
    int n_bootstrap;
    const char *topic; /* into argv */
    int32_t partition; /* default 0 */
    int32_t acks;      /* -1 (all, default), 0 or 1 */
    int64_t request_timeout_ms;
    int64_t delivery_timeout_ms;
    const char *value;          /* into argv; NULL: one record per stdin line */
    const char *command_config; /* --command-config FILE (into argv), or NULL */
    bool help;                  /* --help: print the usage, nothing else parsed is meaningful */
} kq_dc_produce_args;

typedef struct kq_dc_consume_args {
    kq_tools_addr bootstrap[KQ_TOOLS_MAX_ADDRS];
    int n_bootstrap;
    const char *topic; /* into argv */
    int32_t partition; /* default 0 */
    bool from_beginning;
    int64_t max_records; /* -1: no limit */
    int64_t timeout_ms;  /* -1: wait forever */
    bool print_offsets;
    const char *command_config; /* --command-config FILE (into argv), or NULL */
    bool help;
} kq_dc_consume_args;

/* The usage texts (without the "kq produce: message" line). */
extern const char kq_dc_produce_usage[];
extern const char kq_dc_consume_usage[];

/* Parse the arguments after the command name (argv[0] is the command name; getopt state is
 * reset first). Returns 0, or KQ_ERR_CONFIG with errbuf naming the flag and the problem
 * (unknown option, missing value, bad number, acks not all/-1/1/0, missing --topic or
 * --bootstrap-server, invalid topic name, delivery timeout below the request timeout, stray
 * arguments). */
int kq_dc_parse_produce_args(int argc, char **argv, kq_dc_produce_args *out, char *errbuf,
                             size_t errlen);
int kq_dc_parse_consume_args(int argc, char **argv, kq_dc_consume_args *out, char *errbuf,
                             size_t errlen);

/* 1 if `kq produce` retries a record after this error (same sequence, after the back-off):
 * NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, NOT_ENOUGH_REPLICAS,
 * NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT, NETWORK_EXCEPTION,
 * UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH, KAFKA_STORAGE_ERROR. */
bool kq_dc_produce_retriable(int err);
/* 1 if the error means the cached metadata may be stale (refresh before the next call):
 * NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
 * FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NETWORK_EXCEPTION, REQUEST_TIMED_OUT. */
bool kq_dc_refresh_needed(int err);
/* 1 if `kq consume` retries after this error: kq_dc_refresh_needed, or BROKER_NOT_AVAILABLE,
 * KAFKA_STORAGE_ERROR, CORRUPT_MESSAGE. */
bool kq_dc_consume_retriable(int err);

/* What happened to one produced record. */
typedef struct kq_dc_produce_result {
    int error;      /* 0: written */
    int64_t offset; /* with no error (acks 1 or all) */
    int32_t acks;
    int attempts;        /* Produce requests sent (or tried) */
    uint64_t elapsed_ms; /* from the first attempt to the end */
} kq_dc_produce_result;

/* One result line, with the newline: "written at offset N", "sent (acks=0, offset unknown)"
 * or "error: NAME (after K attempts in M ms)" ("1 attempt" in the singular). */
void kq_dc_print_produce_result(FILE *f, const kq_dc_produce_result *r);
/* One consumed record: VALUE or "OFFSET<TAB>VALUE", then a newline; the value's bytes are
 * written as they are. */
void kq_dc_print_record(FILE *f, int64_t offset, const uint8_t *value, size_t len,
                        bool print_offsets);

/* ---- the client (data_client.c) -------------------------------------------------------- */

typedef struct kq_dc kq_dc;

/* Partition routing from the cache. */
typedef struct kq_dc_route {
    uint8_t topic_id[16];
    int32_t leader_id;
    int32_t leader_epoch;
    char leader[300]; /* "host:port" of the leader */
} kq_dc_route;

/* A client for the bootstrap list (at most KQ_TOOLS_MAX_ADDRS, copied). request_timeout_ms
 * bounds every RPC unless a call says otherwise. Returns 0 or KQ_ERR_NOMEM. */
int kq_dc_open(const kq_tools_addr *bootstrap, int n_bootstrap, uint32_t request_timeout_ms,
               kq_dc **out);
void kq_dc_close(kq_dc *c);

/* Metadata for topic, from a known broker or a bootstrap address: addresses that refuse a TCP
 * connection are skipped at once, the others asked in turn until one answers (each within the
 * request timeout). Returns 0 (the cache is updated; the topic may still carry an error, see
 * kq_dc_route_for), or NETWORK_EXCEPTION / REQUEST_TIMED_OUT with errbuf "no broker answered
 * within N ms (tried a, b, c)" and each address's reason, or the error of a malformed answer
 * or of a whole-request error. */
int kq_dc_refresh(kq_dc *c, const char *topic, char *errbuf, size_t errlen);

/* The leader of topic-partition from the cache (refreshing first when it is stale or does
 * not know the topic). Returns 0, or the topic's or partition's error
 * (UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE when there is no leader or its endpoint is
 * unknown), or the refresh's error; errbuf says which. */
int kq_dc_route_for(kq_dc *c, const char *topic, int32_t partition, kq_dc_route *out, char *errbuf,
                    size_t errlen);

/* Mark the cached metadata stale (the next route refreshes). */
void kq_dc_invalidate(kq_dc *c);

/* One Produce of one record to the leader. timeout_ms is both the request's timeout (how
 * long an acks=all leader may wait) and, plus a margin, the RPC's. Returns 0 with *offset
 * set, or the error (the answer's, the transport's, or the routing's); errbuf gets a detail.
 * Errors for which kq_dc_refresh_needed holds invalidate the cache. */
int kq_dc_produce(kq_dc *c, const char *topic, int32_t partition, int32_t acks, uint32_t timeout_ms,
                  int64_t producer_id, int32_t producer_epoch, int32_t sequence,
                  const uint8_t *value, size_t len, int64_t *offset, char *errbuf, size_t errlen);

/* ListOffsets of one partition at its leader; timestamp KQ_DATA_EARLIEST_TIMESTAMP or
 * KQ_DATA_LATEST_TIMESTAMP (the high watermark for a consumer). Errors as kq_dc_produce. */
int kq_dc_list_offset(kq_dc *c, const char *topic, int32_t partition, int64_t timestamp,
                      int64_t *offset, char *errbuf, size_t errlen);

/* A consumer Fetch of one partition from fetch_offset (replica id -1, broker epoch -1,
 * long-poll max_wait_ms). On 0, *out holds the partition's batches (only that partition's
 * result is accepted) and its high watermark. Errors as kq_dc_produce, including the
 * partition's error (OFFSET_OUT_OF_RANGE ...). */
typedef struct kq_dc_fetch_result {
    int64_t high_watermark;
    const kq_data_batch *batches;
    size_t n_batches;
    kq_data_fetch_response resp_; /* owned */
} kq_dc_fetch_result;
int kq_dc_fetch(kq_dc *c, const char *topic, int32_t partition, int64_t fetch_offset,
                int32_t max_wait_ms, kq_dc_fetch_result *out, char *errbuf, size_t errlen);
void kq_dc_fetch_result_free(kq_dc_fetch_result *r);

/* An idempotent producer to one partition, one record in flight. */
typedef struct kq_dc_producer {
    const char *topic; /* borrowed */
    int32_t partition;
    int32_t acks;
    uint32_t request_timeout_ms;
    uint32_t delivery_timeout_ms;
    int64_t producer_id; /* >= 0; kq_dc_producer_init picks a random one */
    int32_t sequence;    /* of the next record */
} kq_dc_producer;

/* Fills the routing fields and a random non-negative 63-bit producer id (/dev/urandom),
 * sequence 0. Returns 0 or KQ_ERR_IO. */
int kq_dc_producer_init(kq_dc_producer *p, const char *topic, int32_t partition, int32_t acks,
                        uint32_t request_timeout_ms, uint32_t delivery_timeout_ms);

/* Deliver one record: one Produce with the producer's next sequence (producer epoch 0),
 * retried with the same sequence after KQ_DC_RETRY_BACKOFF_MS while the error is retriable
 * (kq_dc_produce_retriable) and delivery_timeout_ms has not passed since the first attempt;
 * each attempt waits at most min(request_timeout_ms, the delivery time left). *r gets the
 * outcome; on failure detail says what the last error was. Afterwards the sequence moves on;
 * after a failure the producer continues under a new random producer id from sequence 0
 * (the broker may or may not hold the failed record). */
void kq_dc_send_record(kq_dc *c, kq_dc_producer *p, const uint8_t *value, size_t len,
                       kq_dc_produce_result *r, char *detail, size_t detail_len);

/* Sleep ms milliseconds (resumed after a signal). */
void kq_dc_sleep_ms(uint64_t ms);

/* ---- commands (tools/cmd_data.c, kq executable) ----------------------------------------- */

/* argv[0] is the command name; returns a KQ_EXIT_* code. */
int kq_cmd_produce(int argc, char **argv);
int kq_cmd_consume(int argc, char **argv);

#endif
