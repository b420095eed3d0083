/*
 * The metadata record tables (proto/kq_record.proto <-> include/kq/records.h) and the one
 * pack of a record body, shared by the record codec and the Raft host's control records
 * (kq_codec_append_*). See wire.h.
 */
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/records.h"
#include "kq_record.pb-c.h"
#include "kq_record_tables.h"
#include "pb_wire.h"
#include "wire.h"

/* The record tables are generated from proto/kq_record.proto (kq_record_tables.c). Indexed by
 * kq_rec_type (= the kq.Record oneof field number); every body is at the union. */
static const kq_wire_msg noop_m = {.desc = &kq__no_op_record__descriptor, .size = 0};
static const kq_wire_msg *const record_m[] = {
    [KQ_REC_LEADER_CHANGE] = &kq_wt_leader_change_record,
    [KQ_REC_NOOP] = &noop_m,
    [KQ_REC_OPAQUE] = &kq_wt_opaque_record,
    [KQ_REC_KRAFT_VERSION] = &kq_wt_kraft_version_record,
    [KQ_REC_VOTERS] = &kq_wt_voters_record,
    [KQ_REC_REGISTER_BROKER] = &kq_wt_register_broker_record,
    [KQ_REC_UNREGISTER_BROKER] = &kq_wt_unregister_broker_record,
    [KQ_REC_BROKER_REGISTRATION_CHANGE] = &kq_wt_broker_registration_change_record,
    [KQ_REC_TOPIC] = &kq_wt_topic_record,
    [KQ_REC_PARTITION] = &kq_wt_partition_record,
    [KQ_REC_PARTITION_CHANGE] = &kq_wt_partition_change_record,
    [KQ_REC_REMOVE_TOPIC] = &kq_wt_remove_topic_record,
    [KQ_REC_CONFIG] = &kq_wt_config_record,
    [KQ_REC_FEATURE_LEVEL] = &kq_wt_feature_level_record,
    [KQ_REC_ACL] = &kq_wt_access_control_entry_record,
    [KQ_REC_REMOVE_ACL] = &kq_wt_remove_access_control_entry_record,
};

/* The table of a record type and the oneof member that carries it; NULL for neither. */
const kq_wire_msg *kq_wire_record_table(uint32_t type, const ProtobufCFieldDescriptor **fd)
{
    if (type >= sizeof record_m / sizeof record_m[0] || !record_m[type])
        return NULL;
    *fd = protobuf_c_message_descriptor_get_field(&kq__record__descriptor, type);
    return *fd ? record_m[type] : NULL;
}

int kq_wire_record_pack(uint32_t type, const void *body, kq_buf *b, bool prefixed)
{
    const ProtobufCFieldDescriptor *fd;
    const kq_wire_msg *m = kq_wire_record_table(type, &fd);
    kq_arena a = {0};
    Kq__Record rec = KQ__RECORD__INIT;
    uint8_t hdr[10], *nb;
    size_t sz, h = 0;
    int rc;

    if (!m || !b || (!b->data && b->len > 0))
        return KQ_ERR_INVALID_REQUEST;
    if (!(*(ProtobufCMessage **)((char *)&rec + fd->offset) =
              kq_wire_encode_new(m, body, &a, &rc))) {
        kq_arena_free(&a);
        return rc;
    }
    rec.body_case = (Kq__Record__BodyCase)type;
    sz = kq__record__get_packed_size(&rec);
    if (prefixed)
        h = kq_pb_put_varint(hdr, sz);
    if (b->len > SIZE_MAX - sz - h - 1 || !(nb = realloc(b->data, b->len + h + sz + 1))) {
        kq_arena_free(&a);
        return KQ_ERR_NOMEM;
    }
    memcpy(nb + b->len, hdr, h);
    kq__record__pack(&rec, nb + b->len + h);
    kq_arena_free(&a);
    b->data = nb;
    b->len += h + sz;
    return 0;
}
