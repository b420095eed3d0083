/*
 * kq controller API: the plain C request and result types of the controller RPCs
 * (BrokerRegistration, BrokerHeartbeat, AlterPartition, CreateTopics, CreatePartitions,
 * DeleteTopics, ElectLeaders, IncrementalAlterConfigs). The controller's decisions
 * (controller/cluster_control.h, replication_control.h) take and fill them; the wire codec
 * (include/kq/ctl_codec.h) decodes requests into them and encodes responses from them, so
 * that tools and tests never depend on controller/.
 *
 * No functions here: types and constants only. No protobuf types.
 *
 * Ownership: a request struct only BORROWS what it points to (strings, arrays): whoever filled
 * it (a decoder, a test, the tool) owns that memory and keeps it alive while the request is
 * used. Result structs are filled by value, except kq_alter_partition_result.results and
 * kq_ap_result.isr (malloc'd; see kq_alter_partition_result_free in
 * controller/replication_control.h, or kq_ctl_alter_partition_response_free in
 * include/kq/ctl_codec.h for decoded responses).
 */
#ifndef KQ_CTLAPI_H
#define KQ_CTLAPI_H

#include <stdbool.h>
#include <stdint.h>

#include "kq/records.h"

/* ---- broker registration and heartbeats (kraft-semantics.md 3.2, 3.3) -------------------- */

typedef enum kq_broker_state {
    KQ_BROKER_FENCED = 0,
    KQ_BROKER_UNFENCED = 1,
    KQ_BROKER_CONTROLLED_SHUTDOWN = 2,
    KQ_BROKER_SHUTDOWN_NOW = 3,
} kq_broker_state;

typedef struct kq_broker_registration {
    int32_t broker_id;
    const char *cluster_id;
    uint8_t incarnation_id[16];
    const kq_rec_endpoint *endpoints;
    int32_t n_endpoints;
    const char *rack; /* NULL: none */
} kq_broker_registration;

typedef struct kq_registration_result {
    int error;            /* 0 or a kq error code */
    int64_t broker_epoch; /* on success */
    bool new_incarnation; /* a new epoch was assigned */
    char message[256];
} kq_registration_result;

typedef struct kq_heartbeat {
    int32_t broker_id;
    int64_t broker_epoch;
    int64_t current_metadata_offset;
    bool want_fence;
    bool want_shutdown;
} kq_heartbeat;

typedef struct kq_heartbeat_result {
    int error;
    bool is_caught_up; /* current metadata offset >= its RegisterBroker record offset */
    bool is_fenced;    /* next state FENCED or SHUTDOWN_NOW */
    bool should_shutdown;
    bool in_controlled_shutdown;
    kq_broker_state state, next;
    char message[256];
} kq_heartbeat_result;

/* ---- topics ------------------------------------------------------------------------------ */

typedef struct kq_partition_assignment {
    int32_t partition_index;
    const int32_t *broker_ids;
    int32_t n_broker_ids;
} kq_partition_assignment;

typedef struct kq_config_kv {
    const char *name;
    const char *value;
} kq_config_kv;

typedef struct kq_create_topic {
    const char *name;
    int32_t num_partitions;                     /* -1: num.partitions */
    int32_t replication_factor;                 /* -1: default.replication.factor */
    const kq_partition_assignment *assignments; /* manual assignment (then both must be -1) */
    int32_t n_assignments;
    const kq_config_kv *configs;
    int32_t n_configs;
    /* All zero: the controller picks the id. Otherwise the client's choice (kq topics --create
     * sends a random one, so that a retried create recognises the topic it created): refused
     * with INVALID_REQUEST when reserved (kq_topic_id_reserved) or used by another topic. */
    uint8_t topic_id[16];
} kq_create_topic;

typedef struct kq_create_topic_result {
    int error; /* 0, INVALID_REQUEST, INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS,
                  INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT,
                  INVALID_CONFIG */
    char message[256];
    uint8_t topic_id[16]; /* the new topic's; with TOPIC_ALREADY_EXISTS the existing topic's */
    int32_t num_partitions;
    int32_t replication_factor;
} kq_create_topic_result;

typedef struct kq_create_partitions {
    const char *topic;
    int32_t count;                              /* new total */
    const kq_partition_assignment *assignments; /* for the new partitions, or none */
    int32_t n_assignments;
} kq_create_partitions;

typedef struct kq_simple_result {
    int error;
    char message[256];
} kq_simple_result;

/* ---- AlterPartition ---------------------------------------------------------------------- */

typedef struct kq_ap_isr_member {
    int32_t broker_id;
    int64_t broker_epoch; /* -1: not checked */
} kq_ap_isr_member;

typedef struct kq_ap_partition {
    int32_t partition_index;
    int32_t leader_epoch;
    int32_t partition_epoch;
    int8_t leader_recovery_state; /* KQ_RECOVERY_RECOVERED (v0) or _RECOVERING */
    const kq_ap_isr_member *new_isr;
    int32_t n_new_isr;
} kq_ap_partition;

typedef struct kq_ap_topic {
    uint8_t topic_id[16]; /* v > 1 */
    const char *name;     /* v <= 1 */
    const kq_ap_partition *partitions;
    int32_t n_partitions;
} kq_ap_topic;

typedef struct kq_alter_partition {
    int16_t version; /* 0..3 */
    int32_t broker_id;
    int64_t broker_epoch;
    const kq_ap_topic *topics;
    int32_t n_topics;
} kq_alter_partition;

typedef struct kq_ap_result {
    int error;
    int32_t leader_id;
    int32_t leader_epoch;
    int32_t *isr; /* malloc'd, freed by kq_alter_partition_result_free */
    int32_t n_isr;
    int8_t leader_recovery_state;
    int32_t partition_epoch;
} kq_ap_result;

typedef struct kq_alter_partition_result {
    int error; /* top level: 0, NOT_CONTROLLER, STALE_BROKER_EPOCH, NOMEM */
    char message[256];
    kq_ap_result *results; /* one per request partition, in request order (malloc'd) */
    int32_t n_results;
} kq_alter_partition_result;

/* ---- elections --------------------------------------------------------------------------- */

#define KQ_ELECTION_TYPE_PREFERRED 0 /* ElectLeaders wire value */
#define KQ_ELECTION_TYPE_UNCLEAN 1

typedef struct kq_elect_target {
    const char *topic;
    int32_t partition;
} kq_elect_target;

typedef struct kq_elect_result {
    uint8_t topic_id[16]; /* zero for an unknown topic */
    int32_t index;        /* index into the request's targets (-1 for "all") */
    int32_t partition;
    int error; /* 0, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
                  ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION */
} kq_elect_result;

/* ---- configs ----------------------------------------------------------------------------- */

#define KQ_CONFIG_OP_SET 0
#define KQ_CONFIG_OP_DELETE 1
#define KQ_CONFIG_OP_APPEND 2
#define KQ_CONFIG_OP_SUBTRACT 3

typedef struct kq_config_op {
    const char *name;
    const char *value;
    int8_t op;
} kq_config_op;

/* ---- request types used only on the wire (the decisions take their parts) ------------- */

/* DeleteTopics: one topic by name, or by id when name is NULL. */
typedef struct kq_delete_topic {
    const char *name;
    uint8_t topic_id[16];
} kq_delete_topic;

/* ElectLeaders: all_partitions, or the n_targets targets (n_targets >= 1). The controller
 * passes targets = NULL to kq_rc_elect_leaders when all_partitions is set. */
typedef struct kq_elect_leaders {
    int8_t election_type; /* KQ_ELECTION_TYPE_PREFERRED or _UNCLEAN */
    bool all_partitions;
    const kq_elect_target *targets;
    int32_t n_targets;
} kq_elect_leaders;

/* IncrementalAlterConfigs: the operations on one resource. */
typedef struct kq_alter_config_resource {
    int8_t resource_type;      /* KQ_CONFIG_RESOURCE_TOPIC or _BROKER */
    const char *resource_name; /* topic name, broker id in decimal, or "" (cluster default) */
    const kq_config_op *ops;
    int32_t n_ops;
} kq_alter_config_resource;

/* DescribeConfigs: one resource, all keys (n_keys == 0) or the keys listed. */
typedef struct kq_describe_config_resource {
    int8_t resource_type;
    const char *resource_name;
    const char *const *keys;
    int32_t n_keys;
} kq_describe_config_resource;

#define KQ_FEATURE_UPGRADE 1
#define KQ_FEATURE_SAFE_DOWNGRADE 2
#define KQ_FEATURE_UNSAFE_DOWNGRADE 3

/* UpdateFeatures: one feature's new finalized level (0 disables it). */
typedef struct kq_feature_update {
    const char *name;
    int16_t max_version_level;
    int8_t upgrade_type; /* KQ_FEATURE_UPGRADE .. _UNSAFE_DOWNGRADE */
} kq_feature_update;

/* Kafka ConfigSource values (DescribeConfigs). */
#define KQ_CONFIG_SOURCE_UNKNOWN 0
#define KQ_CONFIG_SOURCE_DYNAMIC_TOPIC 1
#define KQ_CONFIG_SOURCE_DYNAMIC_BROKER 2
#define KQ_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER 3
#define KQ_CONFIG_SOURCE_STATIC_BROKER 4
#define KQ_CONFIG_SOURCE_DEFAULT 5

#endif
