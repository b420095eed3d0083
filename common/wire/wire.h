/*
 * The table-driven message layer shared by the codecs (not a public header).
 *
 * Every message that crosses between a protobuf-c struct (generated from proto/) and the plain
 * C struct the rest of kq works with (include/kq/records.h, ctlapi.h, ...) is described once by
 * a kq_wire_msg: one kq_wire_field per field, naming the .proto field, where the C value lives
 * and the field's limits (range, length, count, non-empty). kq-wiregen (proto/wiregen.c) writes
 * the tables from the annotations in the .proto files; the one written by hand is a second view
 * of FetchResponse's batches (codec.c). kq_wire_decode and kq_wire_encode
 * walk that table together with protobuf-c's own descriptor, so no codec copies a message field
 * by field; codecs keep only the rules that span fields (topic id or name by version,
 * duplicates, ordering) and the choice of which message to send.
 *
 * Ownership:
 *   - kq_arena: blocks of zeroed memory owned by the arena until kq_arena_free.
 *   - kq_wire_decode with an arena: arrays of C structs come from the arena; strings, bytes and
 *     int32 lists point INTO the unpacked protobuf tree, which the caller keeps alive (and frees)
 *     while the C struct is used. Without an arena (a == NULL): every array, string and bytes
 *     value is malloc'd and owned by the C struct (records: kq_record_free).
 *   - kq_wire_encode: sub-messages and pointer arrays come from the arena; strings, bytes and
 *     int32 lists point INTO the C struct (borrowed, read-only), which must outlive the pack.
 */
#ifndef KQ_WIRE_WIRE_H
#define KQ_WIRE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "kq/arena.h"
#include "kq/codec.h"

/* ---- field tables ----------------------------------------------------------------------- */

typedef enum kq_wire_kind {
    KQ_WK_I8,    /* int8_t      <- any 32-bit integer field */
    KQ_WK_I16,   /* int16_t     <- any 32-bit integer field */
    KQ_WK_I32,   /* int32_t     <- any 32-bit integer field (int32, sint32, enum) */
    KQ_WK_I64,   /* int64_t     <- any 64-bit integer field */
    KQ_WK_BOOL,  /* bool        <- bool */
    KQ_WK_STR,   /* char *      <- string (NULL: an absent optional string) */
    KQ_WK_UUID,  /* uint8_t[16] <- bytes of exactly 16 (all zero: an absent optional one) */
    KQ_WK_BYTES, /* uint8_t * at off, size_t length at aux <- bytes */
    KQ_WK_IDS,   /* int32_t * at off, int32_t count at aux <- repeated 32-bit integers */
    KQ_WK_STRS,  /* const char ** at off, int32_t count at aux <- repeated string */
    KQ_WK_TEXT,  /* char[max + 1] at off <- string (cut at max bytes; "" <-> absent) */
    KQ_WK_CONST, /* nothing in C <- an integer: `absent` is sent, [min, max] accepted */
    KQ_WK_BLOBS, /* const uint8_t ** at off, size_t * lengths at aux2, count at aux <- repeated
                    bytes (an empty value is a non-NULL pointer and length 0) */
    KQ_WK_MSG,   /* C struct at off <- singular message; a bool at aux says present (KQ_WF_HAS) */
    KQ_WK_MSGS,  /* C array at off, int32_t count at aux <- repeated message */
} kq_wire_kind;

#define KQ_WF_NONEMPTY 1u /* strings (each of KQ_WK_STRS): not ""; other lists: an entry */
#define KQ_WF_NONZERO 2u  /* uuid: present and not all zero */
#define KQ_WF_HAS 4u      /* aux is the offset of a bool: true when the optional field is present */
#define KQ_WF_SIZE 16u    /* lists: the count at aux is a size_t, not an int32_t */
/* KQ_WK_MSG whose sub-table's fields live in the parent struct (offsets of the parent, off 0):
 * absent, its integers are set to `absent`; sent when a key (KQ_WF_KEY) is not `absent`. */
#define KQ_WF_INLINE 32u
/* An integer of an inline sub-table that decides whether it is sent (when none of its fields
 * is a key, any integer not `absent` sends it). */
#define KQ_WF_KEY 64u
/* KQ_WK_IDS, KQ_WK_MSGS: the array is inline at off (max elements), not a pointer. */
#define KQ_WF_FIXED 128u
/* KQ_WK_TEXT: a longer value is refused, not cut. */
#define KQ_WF_STRICT 256u
#define KQ_WF_ABSENT 8u /* optional scalar: absent means `absent` (and that value is not sent) */

typedef struct kq_wire_msg kq_wire_msg;

typedef struct kq_wire_field {
    const char *name; /* the .proto field */
    uint8_t kind;     /* kq_wire_kind */
    uint16_t flags;   /* KQ_WF_* */
    size_t off, aux;  /* offsets in the C struct */
    int64_t min, max; /* scalars: inclusive range; strings, bytes: max length; lists: max count */
    int64_t absent;   /* KQ_WF_ABSENT: the C value of an absent optional scalar */
    int64_t elem_max; /* KQ_WK_STRS, KQ_WK_BLOBS: max length of each value */
    size_t aux2;      /* KQ_WK_BLOBS: offset of the lengths */
    const kq_wire_msg *sub; /* KQ_WK_MSG, KQ_WK_MSGS: the element's table */
} kq_wire_field;

struct kq_wire_msg {
    const ProtobufCMessageDescriptor *desc;
    size_t size; /* sizeof the C struct */
    const kq_wire_field *fields;
    size_t n_fields;
    /* Decode without clearing the struct first and encode without initialising the message:
     * for tables that fill part of a larger struct or message (an envelope and its body). */
    bool in_place;
};

/* What a decoded kq_request or kq_response keeps in priv_: the unpacked envelope and the arena
 * of what was decoded from it. */
typedef struct kq_wire_owned {
    ProtobufCMessage *msg;
    kq_arena a;
} kq_wire_owned;
/* Frees the envelope, the arena and o itself (calloc'd by the decoder). NULL is fine. */
void kq_wire_owned_free(kq_wire_owned *o);
/* Every top-level table of a codec, NULL-terminated (the property test in
 * tests/unit/codec/test_wire_tables.c round-trips each; sub-tables are reached through them).
 * The record tables are reached by type instead (kq_wire_record_table). */
extern const kq_wire_msg *const kq_wire_ctl_tables[];
extern const kq_wire_msg *const kq_wire_data_tables[];
extern const kq_wire_msg *const kq_wire_quorum_tables[];

/* ---- the two walks ---------------------------------------------------------------------- */

/* Fills the C struct c (zeroed first) from the unpacked message pb of type m->desc, checking
 * every field's limits. 0; KQ_ERR_INVALID_REQUEST with errbuf naming the field by its path
 * (e.g. "AlterPartitionRequest.topics[2].partitions[0].leader_epoch -1 is out of range
 * [0, 2147483647]"), or KQ_ERR_NOMEM. On error without an arena, what was allocated so far
 * stays in c for the caller's free function (every pointer is valid or NULL). */
int kq_wire_decode(const kq_wire_msg *m, const ProtobufCMessage *pb, void *c, kq_arena *a,
                   char *errbuf, size_t errlen);

/* Frees what kq_wire_decode without an arena allocated in c (not c itself), recursively;
 * the pointers are left dangling: the caller clears c. */
void kq_wire_free(const kq_wire_msg *m, void *c);

/* Fills the protobuf-c message pb (initialised here) from the C struct c. Limits are not
 * checked (the receiver's decode checks them). 0, KQ_ERR_INVALID_REQUEST (a negative count, or
 * a count without its array), or KQ_ERR_NOMEM. */
int kq_wire_encode(const kq_wire_msg *m, const void *c, ProtobufCMessage *pb, kq_arena *a);

/* A new protobuf-c message of m's type in the arena, filled from c (kq_wire_encode); NULL with
 * *rc set when kq_wire_encode fails. */
ProtobufCMessage *kq_wire_encode_new(const kq_wire_msg *m, const void *c, kq_arena *a, int *rc);

/* ---- envelopes ------------------------------------------------------------------------- */

/* The oneof member of a kq.Request or kq.Response (`envelope` is its descriptor) that carries
 * api_key's body (both number their bodies alike), or NULL for an unknown api key. */
ProtobufCMessage **kq_wire_body_slot(const ProtobufCMessageDescriptor *envelope, const void *env,
                                     uint32_t api_key);
/* Packs into out (malloc'd) a kq.Request for api_key (version 0, cluster_id NULL = "",
 * sender_id) or, with cluster_id == KQ_WIRE_ANSWER, a kq.Response without an error, whose
 * body is c through m. 0, KQ_ERR_INVALID_REQUEST or KQ_ERR_NOMEM. */
#define KQ_WIRE_ANSWER ((const char *)-1)
/* kq_wire_send with a second view: after m has encoded c into the body, view encodes view_c
 * into the same body message (fields m does not cover). */
int kq_wire_send_view(uint32_t api_key, const char *cluster_id, int32_t sender_id,
                      const kq_wire_msg *m, const void *c, const kq_wire_msg *view,
                      const void *view_c, kq_buf *out);
int kq_wire_send(uint32_t api_key, const char *cluster_id, int32_t sender_id, const kq_wire_msg *m,
                 const void *c, kq_buf *out);

/* ---- metadata records (record_tables.c) ------------------------------------------------ */

/* The table of record type `type` (a kq_rec_type, the kq.Record oneof number) and the oneof
 * member carrying it, or NULL for a type with no body. */
const kq_wire_msg *kq_wire_record_table(uint32_t type, const ProtobufCFieldDescriptor **fd);
/* Pack body (the C struct of `type`'s table, e.g. a kq_rec_leader_change) as one kq.Record
 * onto the end of b (grown with realloc), after a varint length when `prefixed`. Nothing is
 * validated. 0, KQ_ERR_INVALID_REQUEST (unknown type, a list without its array) or
 * KQ_ERR_NOMEM; b is unchanged on failure. */
int kq_wire_record_pack(uint32_t type, const void *body, kq_buf *b, bool prefixed);

/* ---- one pack, one error path ----------------------------------------------------------- */

/* Packs msg into a fresh out->data (malloc'd, the caller's). 0 or KQ_ERR_NOMEM. */
int kq_wire_pack(const ProtobufCMessage *msg, kq_buf *out);

/* Writes the message into errbuf (if any) and returns code. */
int kq_wire_fail(char *errbuf, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* m cut to at most max bytes at a UTF-8 boundary, copied into buf (max + 1 bytes); NULL for a
 * NULL or empty m. */
char *kq_wire_clip(const char *m, char *buf, size_t max);

#endif
