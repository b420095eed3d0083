/*
 * Internal protobuf wire-format helpers shared by the codecs (common/wire/codec.c,
 * data_codec.c, record_codec.c). Not a public header.
 *
 * Ownership: buffers are the caller's and nothing keeps a pointer into them; only
 * kq_pb_unpack allocates, and its result belongs to the caller.
 */
#ifndef KQ_IO_PB_WIRE_H
#define KQ_IO_PB_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "kq_rpc.pb-c.h"

/* How deep kq_pb_unpack follows nested messages before it refuses the input. */
#define KQ_PB_MAX_DEPTH 8

/* Reads a base-128 varint from p[*pos..len) and advances *pos; false if it is truncated or
 * longer than 10 bytes. */
bool kq_pb_read_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *out);

/* Writes v as a varint at p (room for 10 bytes); returns the bytes written. */
size_t kq_pb_put_varint(uint8_t *p, uint64_t v);

/* The last value of varint field `field` at the top level of the message in p[0..len) (as
 * protobuf does: the last occurrence wins); false if absent or the bytes stop parsing first.
 * Lets a decoder that refused a message still name its API in the answer. */
bool kq_pb_top_varint(const uint8_t *p, size_t len, uint32_t field, uint64_t *out);

/* The memory a decode may cost, in bytes, for a message of `frame` bytes: KQ_PB_DECODE_FACTOR
 * times the frame plus KQ_PB_DECODE_SLACK. Byte-heavy messages (records, batches, snapshot
 * chunks) cost about their size. protobuf-c keeps a 32-byte record of every field it scans, so
 * messages of many tiny fields cost up to ~40 times their size: the slack admits those up to
 * a few hundred KiB (a Fetch of 10,000 partitions is 200 KB and costs 5.8 MB), and refuses a
 * large message that dense (14 MB of empty records would cost 380 MB). */
#define KQ_PB_DECODE_FACTOR 4
#define KQ_PB_DECODE_SLACK ((size_t)8 << 20)
size_t kq_pb_decode_budget(size_t frame);

/* An answer from a server this process dialed (a Metadata or DescribeTopics answer of a large
 * cluster is made of small partition entries, ~10 times its size) gets a looser budget:
 * KQ_PB_ANSWER_FACTOR times its size plus KQ_PB_ANSWER_SLACK. */
#define KQ_PB_ANSWER_FACTOR 16
#define KQ_PB_ANSWER_SLACK ((size_t)64 << 20)
size_t kq_pb_answer_budget(size_t frame);

typedef enum kq_pb_source {
    KQ_PB_REQUEST, /* a request, or a record: kq_pb_decode_budget */
    KQ_PB_ANSWER,  /* an answer to this process: kq_pb_answer_budget */
} kq_pb_source;

/* Walks the bytes of a message of type d, allocating nothing, and adds up what
 * protobuf_c_message_unpack (protobuf-c 1.4.1, glibc malloc) would allocate for it into *cost
 * (if cost is not NULL). Returns false, with the reason in why, once the sum passes limit, when
 * a singular message field occurs twice, or when messages nest deeper than KQ_PB_MAX_DEPTH;
 * true otherwise, also for bytes that stop parsing (protobuf-c stops there too, having
 * allocated no more than counted). */
bool kq_pb_unpack_cost(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
                       size_t limit, size_t *cost, char *why, size_t whylen);

/* Unpacks a message of type d from p[0..len) (p non-NULL, also for len 0) with protobuf-c's
 * default allocator, but first refuses it if kq_pb_unpack_cost finds it would cost more than
 * the budget for its source, or finds a singular message field twice (outside a oneof,
 * protobuf-c merges repeats by copying their repeated fields again: quadratic time, an easy
 * denial of service; inside one it keeps the last, which no encoder of ours relies on).
 * Returns the message, which the caller frees with protobuf_c_message_free_unpacked, or NULL
 * with *err = KQ_ERR_INVALID_REQUEST and the reason in why (the limits), or *err =
 * KQ_ERR_MALFORMED and why empty (the bytes do not parse). The same walk sets *nul (when nul is
 * not NULL) to whether a string field, at any depth, holds a NUL byte, which protobuf-c would
 * silently cut the string at: the caller refuses such a message in its own words. */
ProtobufCMessage *kq_pb_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
                               kq_pb_source source, int *err, bool *nul, char *why, size_t whylen);

/* kq_pb_unpack of a kq.Request envelope, the one way both request decoders start: 0 with
 * *out (free with kq__request__free_unpacked), KQ_ERR_MALFORMED "request does not parse (N
 * bytes)" (also for p NULL with len > 0), or the limits' KQ_ERR_INVALID_REQUEST, in which case
 * *api_key still gets the envelope's api key when it can be read, so that the error answer
 * names its API (*api_key is left alone otherwise). *nul as for kq_pb_unpack. */
int kq_pb_unpack_request(const uint8_t *p, size_t len, Kq__Request **out, uint32_t *api_key,
                         bool *nul, char *why, size_t whylen);

#endif
