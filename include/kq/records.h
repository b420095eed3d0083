/*
 * kq metadata records as plain C structs (no protobuf types), the tagged union kq_record, and
 * the functions that validate, free, encode, decode and render them.
 *
 * Two libraries implement this header:
 *   kq_image       (common/image/records.c): kq_record_validate, kq_record_free -- pure, no
 *                  protobuf (kq_topic_name_valid is kq_util's, include/kq/util.h);
 *   kq_recordcodec (common/wire/record_codec.c): encode/decode to kq.Record protobuf bytes
 *                  (proto/kq_record.proto), render to text, replay into an image, snapshots.
 *
 * Ownership:
 *   - A record filled by a decoder OWNS every array and string it points to; release it with
 *     kq_record_free (which frees the contents, not the kq_record itself, and leaves the record
 *     as an empty KQ_REC_NOOP).
 *   - A record built by the caller (to encode or to apply) only BORROWS its pointers: encoders
 *     and kq_image_apply copy what they keep and never free or retain the caller's memory.
 *     Do not call kq_record_free on such a record unless its pointers are malloc'd.
 *
 * Framing: in a batch payload each record is a varint byte length followed by one packed
 * kq.Record, the same framing as kq_codec_append_* / kq_codec_walk_records (include/kq/codec.h).
 */
#ifndef KQ_RECORDS_H
#define KQ_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kq/authorizer.h"
#include "kq/util.h"
#include "kq/voters.h" /* kq_voter: a VotersRecord's entries */

/* Limits enforced by kq_record_validate (and so by every decode and apply). */
#define KQ_REC_MAX_REPLICAS 1024 /* per replica list (replicas, isr, elr, lke, voters) */
#define KQ_REC_MAX_TOPIC_NAME KQ_TOPIC_NAME_MAX /* kq_topic_name_valid (kq/util.h) */
#define KQ_REC_MAX_ENDPOINTS 64                 /* per broker */
#define KQ_REC_MAX_NAME 255           /* endpoint names, hosts, racks, feature and config keys */
#define KQ_REC_MAX_CONFIG_VALUE 32768 /* config values */
#define KQ_REC_MAX_OPAQUE (1u << 20)  /* opaque test payloads */

#define KQ_NO_LEADER (-1)        /* Partition.leader / PartitionChange.leader: no leader */
#define KQ_LEADER_UNCHANGED (-2) /* PartitionChange.leader: keep the current leader */

#define KQ_RECOVERY_UNCHANGED (-1) /* PartitionChange only */
#define KQ_RECOVERY_RECOVERED 0
#define KQ_RECOVERY_RECOVERING 1

#define KQ_FENCE_UNFENCE (-1) /* BrokerRegistrationChange.fenced */
#define KQ_FENCE_NONE 0
#define KQ_FENCE_FENCE 1

#define KQ_CONFIG_RESOURCE_TOPIC 2
#define KQ_CONFIG_RESOURCE_BROKER 4

/* Record types. Values equal the kq.Record oneof field numbers. */
typedef enum kq_rec_type {
    KQ_REC_NONE = 0, /* not a record (a freed or zeroed kq_record); never valid */
    KQ_REC_LEADER_CHANGE = 1,
    KQ_REC_NOOP = 2,
    KQ_REC_OPAQUE = 3,
    KQ_REC_KRAFT_VERSION = 4, /* KIP-853 quorum records, written by the Raft layer */
    KQ_REC_VOTERS = 5,
    KQ_REC_REGISTER_BROKER = 10,
    KQ_REC_UNREGISTER_BROKER = 11,
    KQ_REC_BROKER_REGISTRATION_CHANGE = 12,
    KQ_REC_TOPIC = 13,
    KQ_REC_PARTITION = 14,
    KQ_REC_PARTITION_CHANGE = 15,
    KQ_REC_REMOVE_TOPIC = 16,
    KQ_REC_CONFIG = 17,
    KQ_REC_FEATURE_LEVEL = 18,
    KQ_REC_ACL = 19,        /* AccessControlEntry: a kq_acl (include/kq/authorizer.h) */
    KQ_REC_REMOVE_ACL = 20, /* RemoveAccessControlEntry */
} kq_rec_type;

/* Short name ("PartitionChange"); "Unknown" for anything else. Static string. */
const char *kq_rec_type_name(kq_rec_type t);

/* The struct of each record type (kq_rec_ids, kq_rec_partition, ...), generated from the
 * annotations in proto/kq_record.proto, which document each field. */
#include "kq/kq_record_types.h"

typedef struct kq_record {
    kq_rec_type type;
    union {
        kq_rec_register_broker register_broker;
        kq_rec_unregister_broker unregister_broker;
        kq_rec_broker_change broker_change;
        kq_rec_topic topic;
        kq_rec_partition partition;
        kq_rec_partition_change partition_change;
        kq_rec_remove_topic remove_topic;
        kq_rec_config config;
        kq_rec_feature_level feature_level;
        kq_acl acl; /* decoded: owns its strings (const only for the decision's sake) */
        kq_rec_remove_acl remove_acl;
        kq_rec_leader_change leader_change;
        kq_rec_opaque opaque;
        kq_rec_kraft_version kraft_version;
        kq_rec_voters voters; /* decoded: owns its voters array */
    };
} kq_record;

/* ---- kq_image (pure) --------------------------------------------------------------------- */

/* Structural checks of one record (ids, sizes, string bounds and characters, enum values,
 * duplicates, isr/elr/last_known_elr/leader within replicas). Returns 0 or
 * KQ_ERR_INVALID_REQUEST with a message naming the problem in errbuf (may be NULL). */
int kq_record_validate(const kq_record *r, char *errbuf, size_t errlen);

/* Free what a decoded (or deep-copied) record owns; r becomes {KQ_REC_NOOP}. NULL is fine. */
void kq_record_free(kq_record *r);

/* Deep copy: dst owns its memory afterwards (kq_record_free). 0 or KQ_ERR_NOMEM. */
int kq_record_copy(kq_record *dst, const kq_record *src);

/* ---- kq_recordcodec ---------------------------------------------------------------------- */

struct kq_buf; /* include/kq/codec.h: malloc'd data + len, freed with kq_buf_free */

/* Validate r, then append it length-prefixed to b (b->data grows with realloc). On error b is
 * unchanged. 0, KQ_ERR_INVALID_REQUEST (message in errbuf) or KQ_ERR_NOMEM. */
int kq_record_append(struct kq_buf *b, const kq_record *r, char *errbuf, size_t errlen);

/* Validate and pack r as one kq.Record (no length prefix) into a fresh out->data. */
int kq_record_encode(const kq_record *r, struct kq_buf *out, char *errbuf, size_t errlen);

/* Decode one packed kq.Record (no length prefix) into *out (which then owns its memory).
 * Errors: KQ_ERR_MALFORMED (does not parse, no body, NUL inside a string), or
 * KQ_ERR_INVALID_REQUEST (parses but fails kq_record_validate); *out is left empty. */
int kq_record_decode(const uint8_t *buf, size_t len, kq_record *out, char *errbuf, size_t errlen);

/* Decode the length-prefixed record at buf[*pos] and advance *pos past it. */
int kq_record_decode_next(const uint8_t *buf, size_t len, size_t *pos, kq_record *out, char *errbuf,
                          size_t errlen);

/* Decode (and validate) every one of a batch's `count` length-prefixed records, keeping none,
 * and require the batch to end after the last. 0, or the first error with errbuf naming the
 * record's offset (base_offset + index). What a daemon checks of its log before it serves:
 * the signature is kq_store_check_cb's (include/kq/store.h); arg is not used. */
int kq_record_check_batch(void *arg, int64_t base_offset, int32_t count, const uint8_t *records,
                          size_t len, char *errbuf, size_t errlen);

/* For kq log-dump, of a record kq_record_decode refused: the name of its body from the schema
 * and its size, "Topic bytes=23" ("Unknown bytes=N" for a body this build does not know),
 * into desc (NUL-terminated). 0, or KQ_ERR_MALFORMED when buf is not a kq.Record at all. */
int kq_record_describe_raw(const uint8_t *buf, size_t len, char *desc, size_t cap);

/* ---- quorum records for the Raft core (KIP-853) ----------------------------------------- */

/* The KRaftVersion and Voters records of a log (or a snapshot, or the bootstrap written by kq
 * storage format) as the Raft core takes them (kq_raft_control, include/kq/raft.h): one entry
 * per record, ascending by offset. Owns the voter sets its entries point at. */
typedef struct kq_control_list {
    kq_raft_control *c;
    kq_voter_set **sets; /* sets[i]: the set of c[i] (NULL for a KRaftVersion record) */
    size_t n, cap;
} kq_control_list;

void kq_control_list_free(kq_control_list *l);

/* Adds the quorum records among a batch's `count` length-prefixed records (offsets base_offset
 * on; base_offset -1: every record at -1, the bootstrap's). Only records whose first byte is
 * the tag of the KRaftVersion or Voters body are decoded (kq writes a kq.Record as its one
 * body). 0; KQ_ERR_CORRUPT_MESSAGE (a quorum record that does not decode or validate, or the
 * batch runs short), errbuf naming its offset; KQ_ERR_NOMEM. On error l is as before. */
int kq_control_list_add_batch(kq_control_list *l, int64_t base_offset, int32_t count,
                              const uint8_t *records, size_t len, char *errbuf, size_t errlen);

/* The quorum records at the head of a snapshot payload (kq storage snapshots of a dynamic
 * quorum start with them), every one at offset end_offset - 1; scanning stops at the first
 * other record. Errors as kq_control_list_add_batch. */
int kq_control_list_add_snapshot(kq_control_list *l, int64_t end_offset, const uint8_t *payload,
                                 size_t len, char *errbuf, size_t errlen);

/* Moves every entry of src to the end of dst (src is left empty). 0 or KQ_ERR_NOMEM (then
 * nothing moved). */
int kq_control_list_move(kq_control_list *dst, kq_control_list *src);

/* A snapshot's head for the Raft core at kraft.version 1 (KIP-853): a KRaftVersion record,
 * then the Voters record of set, appended to b. 0, or kq_control_append's error. */
int kq_control_append_snapshot_head(struct kq_buf *b, int16_t kraft_version,
                                    const kq_voter_set *set, char *errbuf, size_t errlen);

/* The signature of kq_store_check_cb (include/kq/store.h): kq_record_check_batch, then
 * kq_control_list_add_batch into arg (a kq_control_list): a daemon checks its log and learns
 * its voter history in one read. */
int kq_control_check_batch(void *arg, int64_t base_offset, int32_t count, const uint8_t *records,
                           size_t len, char *errbuf, size_t errlen);

/* Appends c as one length-prefixed record: a VotersRecord when c->voters is set (with the
 * unsafe-recovery mark), else a KRaftVersionRecord of c->kraft_version. 0,
 * KQ_ERR_INVALID_REQUEST (errbuf says why; b unchanged) or KQ_ERR_NOMEM. */
int kq_control_append(struct kq_buf *b, const kq_raft_control *c, char *errbuf, size_t errlen);

/* For kq_raft_host_ops.fetched_control (include/kq/raft_host.h): empties l, reads the quorum
 * records of the n fetched batches into it and points each batch's control at its own. 0 or
 * the first batch's error (then no batch has control). */
int kq_control_list_read_fetched(kq_control_list *l, kq_raft_batch *batches, size_t n);

/* Appends the quorum records of a batch the core gave the leader to write (its `control`: the
 * whole payload of a KQ_RAFT_BATCH_VOTERS batch, the records after the LeaderChange record of a
 * KQ_RAFT_BATCH_LEADER_CHANGE batch). 0 or kq_control_append's error. */
int kq_control_append_batch(struct kq_buf *b, const kq_raft_batch *batch, char *errbuf,
                            size_t errlen);

/* One-line text for kq log-dump, e.g. "Topic name=foo id=<base64 uuid>" or
 * "PartitionChange topic=<id> partition=0 leader=2 isr=1,2". Always NUL-terminates a
 * non-empty buffer and ends with "..." when truncated. Returns the length written. */
size_t kq_record_render(const kq_record *r, char *buf, size_t cap);

#endif
