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
 * include/kq/ctl_codec.h for decoded responses). The describe answers generated alongside
 * (kq_ctl_topics_desc, kq_ctl_configs_desc, kq_ctl_features_desc and what they hold) OWN their
 * memory when a decoder filled them: free them with the matching kq_ctl_*_desc_free of
 * include/kq/ctl_codec.h; built by the controller to be sent, they borrow.
 */
#ifndef KQ_CTLAPI_H
#define KQ_CTLAPI_H

#include <stdbool.h>
#include <stdint.h>

#include "kq/records.h"

/* The request structs (kq_broker_registration, kq_heartbeat, kq_alter_partition,
 * kq_create_topic, ...), generated from the annotations in proto/kq_ctl.proto, which
 * document their fields and limits. */
/* A list of broker ids in a decoded DescribeTopics answer. */
typedef struct kq_ctl_ids {
    int32_t *ids;
    int32_t n;
} kq_ctl_ids;

/* One per-item result of CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders (one per
 * partition), IncrementalAlterConfigs, UpdateFeatures. */
typedef struct kq_ctl_item_result {
    char *name;           /* topic, resource or feature name ("" if none was sent) */
    int32_t partition;    /* ElectLeaders; else -1 */
    int8_t resource_type; /* IncrementalAlterConfigs; else 0 */
    bool has_id;
    uint8_t topic_id[16];   /* CreateTopics, DeleteTopics, ElectLeaders when sent */
    int32_t num_partitions; /* CreateTopics; else -1 */
    int32_t replication_factor;
    int error;
    char *message; /* NULL: none */
} kq_ctl_item_result;

typedef struct kq_ctl_item_results {
    kq_ctl_item_result *items;
    int32_t n;
} kq_ctl_item_results;

/* One partition's AlterPartition result (the generated kq_ap_wire_result holds one). */
typedef struct kq_ap_result {
    int error;
    int32_t leader_id;
    int32_t leader_epoch;
    int32_t *isr; /* malloc'd, freed by kq_alter_partition_result_free */
    int32_t n_isr;
    int8_t leader_recovery_state;
    int32_t partition_epoch;
} kq_ap_result;

/* The request structs and the describe answers' (kq_ctl_topics_desc, kq_ctl_configs_desc,
 * kq_ctl_features_desc) are generated too, with the wire's shapes of ElectLeaders and the
 * AlterPartition answer (kq_elect_wire*, kq_ap_wire*), which only the codec uses. */
#include "kq/kq_ctl_types.h"

/* ---- broker registration and heartbeats (kraft-semantics.md 3.2, 3.3) -------------------- */

typedef enum kq_broker_state {
    KQ_BROKER_FENCED = 0,
    KQ_BROKER_UNFENCED = 1,
    KQ_BROKER_CONTROLLED_SHUTDOWN = 2,
    KQ_BROKER_SHUTDOWN_NOW = 3,
} kq_broker_state;

typedef struct kq_registration_result {
    int error;            /* 0 or a kq error code */
    int64_t broker_epoch; /* on success */
    bool new_incarnation; /* a new epoch was assigned */
    char message[256];
} kq_registration_result;

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

typedef struct kq_create_topic_result {
    int error; /* 0, INVALID_REQUEST, INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS,
                  INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT,
                  INVALID_CONFIG */
    char message[256];
    uint8_t topic_id[16]; /* the new topic's; with TOPIC_ALREADY_EXISTS the existing topic's */
    int32_t num_partitions;
    int32_t replication_factor;
} kq_create_topic_result;

typedef struct kq_simple_result {
    int error;
    char message[256];
} kq_simple_result;

/* ---- AlterPartition ---------------------------------------------------------------------- */

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

/* ---- request types used only on the wire (the decisions take their parts) ------------- */

/* ElectLeaders: all_partitions, or the n_targets targets (n_targets >= 1). The controller
 * passes targets = NULL to kq_rc_elect_leaders when all_partitions is set. */
typedef struct kq_elect_leaders {
    int8_t election_type; /* KQ_ELECTION_TYPE_PREFERRED or _UNCLEAN */
    bool all_partitions;
    const kq_elect_target *targets;
    int32_t n_targets;
} kq_elect_leaders;

#define KQ_FEATURE_UPGRADE 1
#define KQ_FEATURE_SAFE_DOWNGRADE 2
#define KQ_FEATURE_UNSAFE_DOWNGRADE 3

/* Kafka ConfigSource values (DescribeConfigs). */
#define KQ_CONFIG_SOURCE_UNKNOWN 0
#define KQ_CONFIG_SOURCE_DYNAMIC_TOPIC 1
#define KQ_CONFIG_SOURCE_DYNAMIC_BROKER 2
#define KQ_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER 3
#define KQ_CONFIG_SOURCE_STATIC_BROKER 4
#define KQ_CONFIG_SOURCE_DEFAULT 5

#endif
