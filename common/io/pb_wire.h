/*
 * Internal protobuf wire-format helpers shared by kq_codec (common/io/codec.c) and
 * kq_recordcodec (common/io/record_codec.c). Not a public header.
 *
 * Ownership: nothing here allocates or keeps a pointer; buffers are the caller's.
 */
#ifndef KQ_IO_PB_WIRE_H
#define KQ_IO_PB_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* How deep kq_pb_strings_ok follows nested messages before it rejects the input. */
#define KQ_PB_MAX_DEPTH 8

/* Reads a base-128 varint from p[*pos..len) and advances *pos; false if it is truncated or
 * longer than 10 bytes. */
bool kq_pb_read_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *out);

/* Writes v as a varint at p (room for 10 bytes); returns the bytes written. */
size_t kq_pb_put_varint(uint8_t *p, uint64_t v);

/* protobuf-c NUL-terminates strings and so silently cuts one that carries a NUL byte. Walks
 * the wire bytes of a message of type d (one that already unpacked) and returns false if any
 * string field, at any depth, holds a NUL, if the bytes are malformed, if they use groups, or
 * if messages nest deeper than KQ_PB_MAX_DEPTH. */
bool kq_pb_strings_ok(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len);

#endif
