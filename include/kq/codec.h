/*
 * kq_codec: the one place that converts between protobuf-c wire messages (proto/kq_rpc.proto)
 * and the plain C structs the cores and tools use. protobuf-c types never appear in public
 * headers. Every decode is validated here: sizes, required oneof bodies, ranges, enum values;
 * a failure returns KQ_ERR_INVALID_REQUEST (or KQ_ERR_MALFORMED for bytes that do not parse)
 * with a message in errbuf, never a crash.
 *
 * Ownership: encoders fill a kq_buf whose data is malloc'd (caller frees with kq_buf_free).
 * Decoders fill a struct that owns its memory; release it with the matching *_free function.
 * Pointers inside a decoded struct (batches, strings) live until that free.
 */
#ifndef KQ_CODEC_H
#define KQ_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "kq/api.h"
#include "kq/raft.h"
#include "kq/voters.h"

#define KQ_CODEC_MAX_CLUSTER_ID 64
#define KQ_CODEC_MAX_WRITE_RECORDS 10000
#define KQ_CODEC_MAX_ENDPOINT 256
#define KQ_CODEC_MAX_SNAPSHOT_CHUNK (8 * 1024 * 1024) /* bytes in one FetchSnapshot answer */
#define KQ_CODEC_MAX_BATCH_COUNT 1000000              /* records one batch may claim */
#define KQ_CODEC_FETCH_MAX_BYTES (8 * 1024 * 1024)    /* a follower's Fetch max_bytes */

/* API keys: include/kq/api.h (KQ_API_*). */

typedef struct kq_buf {
    uint8_t *data;
    size_t len;
} kq_buf;
void kq_buf_free(kq_buf *b);

/* One batch as stored and as sent (payload = records bytes). */
typedef struct kq_codec_batch {
    int64_t base_offset;
    int32_t epoch;
    int32_t count;
    uint32_t crc32c;
    const uint8_t *records;
    size_t len;
} kq_codec_batch;

typedef struct kq_quorum_replica {
    int32_t id;
    char directory_id[23]; /* "" unknown */
    int64_t log_end_offset;
    int64_t last_fetch_timestamp;     /* wall ms, -1 unknown */
    int64_t last_caught_up_timestamp; /* wall ms, -1 unknown */
} kq_quorum_replica;

typedef struct kq_quorum_node {
    int32_t id;
    char listener[32];
    char host[KQ_CODEC_MAX_ENDPOINT];
    int32_t port;
} kq_quorum_node;

typedef struct kq_quorum_description {
    char cluster_id[KQ_CODEC_MAX_CLUSTER_ID + 1];
    int32_t leader_id;
    int32_t leader_epoch;
    int64_t high_watermark;
    kq_quorum_replica voters[KQ_RAFT_MAX_VOTERS];
    int n_voters; /* leader first */
    kq_quorum_replica observers[KQ_RAFT_MAX_OBSERVERS];
    int n_observers;
    kq_quorum_node nodes[KQ_RAFT_MAX_VOTERS];
    int n_nodes;
} kq_quorum_description;

/* A decoded request. For a controller API (KQ_API_CREATE_TOPICS ...) kq_codec_decode_request
 * checks only the envelope (version, cluster id, sender, NUL-free strings, that the matching
 * body is present); kq_ctl_request_from_envelope (include/kq/ctl_codec.h) decodes and
 * validates the body. Likewise kq_codec_decode_response checks only the envelope of a
 * controller API response; the kq_ctl_decode_*_response functions read the body. */
/* The body of an AddRaftVoter, RemoveRaftVoter or UpdateRaftVoter request (KIP-853). Remove
 * carries only the key; epoch is UpdateRaftVoter's current_leader_epoch (0 for the others). */
typedef struct kq_codec_voter_req {
    int32_t epoch;
    kq_voter voter;
} kq_codec_voter_req;

/* A leader's Raft listener as its BeginQuorumEpoch carries it (KIP-853). host "": not sent /
 * not known. */
typedef struct kq_codec_endpoint {
    char host[KQ_CODEC_MAX_ENDPOINT];
    int32_t port;
} kq_codec_endpoint;

typedef struct kq_request {
    uint32_t api_key;
    uint32_t api_version;
    char cluster_id[KQ_CODEC_MAX_CLUSTER_ID + 1];
    int32_t sender_id;
    kq_raft_msg raft; /* Vote/BeginQuorumEpoch/EndQuorumEpoch/Fetch: type set, from = sender */
    /* Add/Remove/UpdateRaftVoter: the body; raft.u.voter_req.voter points at voter_req.voter,
     * so a decoded request must not be copied by value (point it again after a copy) */
    kq_codec_voter_req voter_req;
    kq_codec_endpoint leader_endpoint; /* BeginQuorumEpoch: where the leader is reached */
    /* Write: records[i], record_lens[i] for i < n_records */
    const uint8_t **records;
    size_t *record_lens;
    size_t n_records;
    void *priv_; /* owned unpacked protobuf */
} kq_request;

/* A decoded response. */
typedef struct kq_response {
    uint32_t api_key;
    int error; /* kq_err */
    char error_message[256];
    int32_t leader_id;                           /* -1 unless hinted */
    int32_t leader_epoch;                        /* -1 unless hinted */
    char leader_endpoint[KQ_CODEC_MAX_ENDPOINT]; /* "" unless hinted */
    kq_raft_msg raft; /* raft APIs; fetch_resp.batches points into batches below */
    kq_raft_batch *batches;
    size_t n_batches;
    kq_quorum_description describe; /* DescribeQuorum */
    int64_t write_base_offset;      /* Write */
    int32_t write_epoch;
    void *priv_;
} kq_response;

/* Requests. A Raft request from the core: m->type is a *_REQ type. */
int kq_codec_encode_raft_request(const kq_raft_msg *m, const char *cluster_id, kq_buf *out);
/* The same, with the sender's listener: a BeginQuorumEpoch carries it (ep NULL or host "":
 * not); other requests ignore it. */
int kq_codec_encode_raft_request_from(const kq_raft_msg *m, const char *cluster_id,
                                      const kq_codec_endpoint *ep, kq_buf *out);
int kq_codec_encode_describe_request(const char *cluster_id, kq_buf *out);
int kq_codec_encode_write_request(const char *cluster_id, const uint8_t *const *records,
                                  const size_t *lens, size_t n, kq_buf *out);

/* Responses. For FETCH_RESP from a leader, `batches` are what the host read from its store
 * for [records_from, records_to); otherwise pass NULL, 0. For FETCH_SNAPSHOT_RESP the host
 * sets u.fetch_snapshot_resp.data/len (in a copy of the core's message) to the bytes it read
 * from the snapshot file (kq_store_snapshot_read), at most KQ_CODEC_MAX_SNAPSHOT_CHUNK.
 * A FETCH_RESP with u.fetch_resp.snapshot carries the snapshot id (no batches allowed).
 * FETCH_SNAPSHOT_REQ and FETCH_SNAPSHOT_RESP (API 59) are encoded and decoded like the other
 * Raft messages; a decoded FETCH_SNAPSHOT_RESP's data points into the kq_response. */
int kq_codec_encode_raft_response(const kq_raft_msg *m, const kq_codec_batch *batches,
                                  size_t n_batches, kq_buf *out);
int kq_codec_encode_describe_response(const kq_quorum_description *d, kq_buf *out);
int kq_codec_encode_write_response(int64_t base_offset, int32_t epoch, kq_buf *out);
/* Error response for any API, with an optional leader hint (-1 / NULL when unknown). */
int kq_codec_encode_error_response(uint32_t api_key, int error, const char *message,
                                   int32_t leader_id, int32_t leader_epoch,
                                   const char *leader_endpoint, kq_buf *out);

int kq_codec_decode_request(const uint8_t *buf, size_t len, kq_request *out, char *errbuf,
                            size_t errlen);
void kq_request_free(kq_request *r);
/* Decode a response; `from` fills raft.from. Batches' CRCs are checked
 * (KQ_ERR_CORRUPT_MESSAGE on mismatch). */
int kq_codec_decode_response(const uint8_t *buf, size_t len, int32_t from, kq_response *out,
                             char *errbuf, size_t errlen);
void kq_response_free(kq_response *r);

/* Records inside a batch: each is a varint length then a packed kq.Record (records.h). */
/* Append one encoded record (length-prefixed) to a growing buffer. */
int kq_codec_append_leader_change(kq_buf *b, int32_t leader_id, const int32_t *voters, int n_voters,
                                  const int32_t *granting, int n_granting);
int kq_codec_append_noop(kq_buf *b);
int kq_codec_append_opaque(kq_buf *b, const uint8_t *data, size_t len);

#endif
