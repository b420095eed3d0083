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
#include "pb_wire.h"
#include "wire.h"

/* ---- the record tables (proto/kq_record.proto <-> include/kq/records.h) ------------------ */

#define I32 KQ_W_I32
#define I64 KQ_W_I64

static const kq_wire_field ids_f[] = {KQ_W_IDS(kq_rec_ids, ids, n, "ids", 0, KQ_REC_MAX_REPLICAS)};
static const kq_wire_msg ids_m = KQ_W_TABLE(kq_rec_ids, kq__replica_list__descriptor, ids_f);

static const kq_wire_field endpoint_f[] = {
    KQ_W_STR(kq_rec_endpoint, name, "name", 0, KQ_REC_MAX_NAME),
    KQ_W_STR(kq_rec_endpoint, host, "host", 0, KQ_REC_MAX_NAME),
    KQ_W_INT(kq_rec_endpoint, port, "port", I32),
};
static const kq_wire_msg endpoint_m =
    KQ_W_TABLE(kq_rec_endpoint, kq__register_broker_record__endpoint__descriptor, endpoint_f);

static const kq_wire_field leader_change_f[] = {
    KQ_W_INT(kq_rec_leader_change, leader_id, "leader_id", I32),
    KQ_W_IDS(kq_rec_leader_change, voters.ids, voters.n, "voters", 0, KQ_REC_MAX_REPLICAS),
    KQ_W_IDS(kq_rec_leader_change, granting_voters.ids, granting_voters.n, "granting_voters", 0,
             KQ_REC_MAX_REPLICAS),
};
static const kq_wire_field opaque_f[] = {
    KQ_W_BYTES(kq_rec_opaque, data, len, "data", KQ_REC_MAX_OPAQUE),
};
static const kq_wire_field register_broker_f[] = {
    KQ_W_INT(kq_rec_register_broker, broker_id, "broker_id", I32),
    KQ_W_UUID(kq_rec_register_broker, incarnation_id, "incarnation_id", 0),
    KQ_W_INT(kq_rec_register_broker, broker_epoch, "broker_epoch", I64),
    KQ_W_MSGS(kq_rec_register_broker, endpoints, n_endpoints, "endpoints", 0, KQ_REC_MAX_ENDPOINTS,
              &endpoint_m),
    KQ_W_STR(kq_rec_register_broker, rack, "rack", 0, KQ_REC_MAX_NAME),
    KQ_W_BOOL(kq_rec_register_broker, fenced, "fenced"),
    KQ_W_BOOL(kq_rec_register_broker, in_controlled_shutdown, "in_controlled_shutdown"),
    KQ_W_OPT(kq_rec_register_broker, registration_offset, "registration_offset", I64, -1),
};
static const kq_wire_field unregister_broker_f[] = {
    KQ_W_INT(kq_rec_unregister_broker, broker_id, "broker_id", I32),
    KQ_W_INT(kq_rec_unregister_broker, broker_epoch, "broker_epoch", I64),
};
static const kq_wire_field broker_change_f[] = {
    KQ_W_INT(kq_rec_broker_change, broker_id, "broker_id", I32),
    KQ_W_INT(kq_rec_broker_change, broker_epoch, "broker_epoch", I64),
    KQ_W_OPT(kq_rec_broker_change, fenced, "fenced", KQ_WK_I8, -1, 1, KQ_FENCE_NONE),
    KQ_W_OPT(kq_rec_broker_change, in_controlled_shutdown, "in_controlled_shutdown", KQ_WK_I8, 0, 1,
             0),
};
static const kq_wire_field topic_f[] = {
    KQ_W_STR(kq_rec_topic, name, "name", 0, KQ_REC_MAX_TOPIC_NAME),
    KQ_W_UUID(kq_rec_topic, topic_id, "topic_id", 0),
};
#define PARTITION_IDS(T, f) KQ_W_IDS(T, f.ids, f.n, #f, 0, KQ_REC_MAX_REPLICAS)
static const kq_wire_field partition_f[] = {
    KQ_W_INT(kq_rec_partition, partition_id, "partition_id", I32),
    KQ_W_UUID(kq_rec_partition, topic_id, "topic_id", 0),
    PARTITION_IDS(kq_rec_partition, replicas),
    PARTITION_IDS(kq_rec_partition, isr),
    PARTITION_IDS(kq_rec_partition, elr),
    PARTITION_IDS(kq_rec_partition, last_known_elr),
    KQ_W_INT(kq_rec_partition, leader, "leader", I32),
    KQ_W_INT(kq_rec_partition, leader_recovery_state, "leader_recovery_state", KQ_WK_I8, 0, 1),
    KQ_W_INT(kq_rec_partition, leader_epoch, "leader_epoch", I32),
    KQ_W_INT(kq_rec_partition, partition_epoch, "partition_epoch", I32),
};
#define CHANGE_IDS(f) KQ_W_MSG(kq_rec_partition_change, f, has_##f, #f, &ids_m)
static const kq_wire_field partition_change_f[] = {
    KQ_W_INT(kq_rec_partition_change, partition_id, "partition_id", I32),
    KQ_W_UUID(kq_rec_partition_change, topic_id, "topic_id", 0),
    CHANGE_IDS(replicas),
    CHANGE_IDS(isr),
    CHANGE_IDS(elr),
    CHANGE_IDS(last_known_elr),
    KQ_W_OPT(kq_rec_partition_change, leader, "leader", I32, KQ_LEADER_UNCHANGED),
    KQ_W_OPT(kq_rec_partition_change, leader_recovery_state, "leader_recovery_state", KQ_WK_I8, -1,
             1, KQ_RECOVERY_UNCHANGED),
};
static const kq_wire_field remove_topic_f[] = {
    KQ_W_UUID(kq_rec_remove_topic, topic_id, "topic_id", 0),
};
static const kq_wire_field config_f[] = {
    KQ_W_INT(kq_rec_config, resource_type, "resource_type", KQ_WK_I8, 0, 127),
    KQ_W_STR(kq_rec_config, resource_name, "resource_name", 0, KQ_REC_MAX_NAME),
    KQ_W_STR(kq_rec_config, name, "name", 0, KQ_REC_MAX_NAME),
    KQ_W_STR(kq_rec_config, value, "value", 0, KQ_REC_MAX_CONFIG_VALUE),
};
static const kq_wire_field feature_level_f[] = {
    KQ_W_STR(kq_rec_feature_level, name, "name", 0, KQ_REC_MAX_NAME),
    KQ_W_INT(kq_rec_feature_level, level, "feature_level", KQ_WK_I16, 0, INT16_MAX),
};

/* Indexed by kq_rec_type (= the kq.Record oneof field number); every body is at the union. */
static const kq_wire_msg record_m[] = {
    [KQ_REC_LEADER_CHANGE] =
        KQ_W_TABLE(kq_rec_leader_change, kq__leader_change_record__descriptor, leader_change_f),
    [KQ_REC_NOOP] = {.desc = &kq__no_op_record__descriptor, .size = 0},
    [KQ_REC_OPAQUE] = KQ_W_TABLE(kq_rec_opaque, kq__opaque_record__descriptor, opaque_f),
    [KQ_REC_REGISTER_BROKER] = KQ_W_TABLE(
        kq_rec_register_broker, kq__register_broker_record__descriptor, register_broker_f),
    [KQ_REC_UNREGISTER_BROKER] = KQ_W_TABLE(
        kq_rec_unregister_broker, kq__unregister_broker_record__descriptor, unregister_broker_f),
    [KQ_REC_BROKER_REGISTRATION_CHANGE] = KQ_W_TABLE(
        kq_rec_broker_change, kq__broker_registration_change_record__descriptor, broker_change_f),
    [KQ_REC_TOPIC] = KQ_W_TABLE(kq_rec_topic, kq__topic_record__descriptor, topic_f),
    [KQ_REC_PARTITION] =
        KQ_W_TABLE(kq_rec_partition, kq__partition_record__descriptor, partition_f),
    [KQ_REC_PARTITION_CHANGE] = KQ_W_TABLE(
        kq_rec_partition_change, kq__partition_change_record__descriptor, partition_change_f),
    [KQ_REC_REMOVE_TOPIC] =
        KQ_W_TABLE(kq_rec_remove_topic, kq__remove_topic_record__descriptor, remove_topic_f),
    [KQ_REC_CONFIG] = KQ_W_TABLE(kq_rec_config, kq__config_record__descriptor, config_f),
    [KQ_REC_FEATURE_LEVEL] =
        KQ_W_TABLE(kq_rec_feature_level, kq__feature_level_record__descriptor, feature_level_f),
};

const kq_wire_msg *const kq_wire_record_tables[] = {
    &record_m[KQ_REC_LEADER_CHANGE],
    &record_m[KQ_REC_NOOP],
    &record_m[KQ_REC_OPAQUE],
    &record_m[KQ_REC_REGISTER_BROKER],
    &record_m[KQ_REC_UNREGISTER_BROKER],
    &record_m[KQ_REC_BROKER_REGISTRATION_CHANGE],
    &record_m[KQ_REC_TOPIC],
    &record_m[KQ_REC_PARTITION],
    &record_m[KQ_REC_PARTITION_CHANGE],
    &record_m[KQ_REC_REMOVE_TOPIC],
    &record_m[KQ_REC_CONFIG],
    &record_m[KQ_REC_FEATURE_LEVEL],
    NULL,
};

/* The table of a record type and the oneof member that carries it; NULL for neither. */
const kq_wire_msg *kq_wire_record_table(uint32_t type, const ProtobufCFieldDescriptor **fd)
{
    if (type >= sizeof record_m / sizeof record_m[0] || !record_m[type].desc)
        return NULL;
    *fd = protobuf_c_message_descriptor_get_field(&kq__record__descriptor, type);
    return *fd ? &record_m[type] : NULL;
}

int kq_wire_record_pack(uint32_t type, const void *body, kq_buf *b, bool prefixed)
{
    const ProtobufCFieldDescriptor *fd;
    const kq_wire_msg *m = kq_wire_record_table(type, &fd);
    kq_wire_arena a = {0};
    Kq__Record rec = KQ__RECORD__INIT;
    uint8_t hdr[10], *nb;
    size_t sz, h = 0;
    int rc;

    if (!m || !b || (!b->data && b->len > 0))
        return KQ_ERR_INVALID_REQUEST;
    if (!(*(ProtobufCMessage **)((char *)&rec + fd->offset) =
              kq_wire_encode_new(m, body, &a, &rc))) {
        kq_wire_arena_free(&a);
        return rc;
    }
    rec.body_case = (Kq__Record__BodyCase)type;
    sz = kq__record__get_packed_size(&rec);
    if (prefixed)
        h = kq_pb_put_varint(hdr, sz);
    if (b->len > SIZE_MAX - sz - h - 1 || !(nb = realloc(b->data, b->len + h + sz + 1))) {
        kq_wire_arena_free(&a);
        return KQ_ERR_NOMEM;
    }
    memcpy(nb + b->len, hdr, h);
    kq__record__pack(&rec, nb + b->len + h);
    kq_wire_arena_free(&a);
    b->data = nb;
    b->len += h + sz;
    return 0;
}
