/*
 * kq_api: the one table of APIs (proto/kq_rpc.proto's ApiKey and Request/Response bodies).
 * Every dispatch, name, metric label and controller/data classification reads it; adding an
 * API is one line here plus its messages and handlers.
 *
 *   X(ID, key, "Name", body, kind)
 *     ID    KQ_API_<ID>, the constant code uses
 *     key   the number on the wire (Kafka's where Kafka has the API)
 *     Name  Kafka's name, for errors and logs
 *     body  the field of the Request and Response `body` oneof carrying it (the same number
 *           in both), always the lower-case ID; also the metric label of quorum APIs
 *     kind  QUORUM (served by a node's Raft host), CONTROLLER (the active controller) or
 *           DATA (broker agents' data plane)
 *
 * kq's own keys: Write (1000, opaque records for tests and benchmarks), DescribeFeatures
 * (1001), and the data-plane Fetch (1100) and Produce (1101): Kafka's Fetch key 1 is the
 * metadata Fetch here. DescribeTopics is Kafka's DescribeTopicPartitions (75).
 *
 * Ownership: the table and the strings in it are static; nothing here allocates.
 */
#ifndef KQ_API_H
#define KQ_API_H

#include <stddef.h>
#include <stdint.h>

#define KQ_API_TABLE(X)                                                                            \
    X(FETCH, 1, "Fetch", fetch, QUORUM)                                                            \
    X(VOTE, 52, "Vote", vote, QUORUM)                                                              \
    X(BEGIN_QUORUM_EPOCH, 53, "BeginQuorumEpoch", begin_quorum_epoch, QUORUM)                      \
    X(END_QUORUM_EPOCH, 54, "EndQuorumEpoch", end_quorum_epoch, QUORUM)                            \
    X(DESCRIBE_QUORUM, 55, "DescribeQuorum", describe_quorum, QUORUM)                              \
    X(FETCH_SNAPSHOT, 59, "FetchSnapshot", fetch_snapshot, QUORUM)                                 \
    X(ADD_RAFT_VOTER, 80, "AddRaftVoter", add_raft_voter, QUORUM)                                  \
    X(REMOVE_RAFT_VOTER, 81, "RemoveRaftVoter", remove_raft_voter, QUORUM)                         \
    X(UPDATE_RAFT_VOTER, 82, "UpdateRaftVoter", update_raft_voter, QUORUM)                         \
    X(WRITE, 1000, "Write", write, QUORUM)                                                         \
    X(CREATE_TOPICS, 19, "CreateTopics", create_topics, CONTROLLER)                                \
    X(DELETE_TOPICS, 20, "DeleteTopics", delete_topics, CONTROLLER)                                \
    X(DESCRIBE_CONFIGS, 32, "DescribeConfigs", describe_configs, CONTROLLER)                       \
    X(CREATE_PARTITIONS, 37, "CreatePartitions", create_partitions, CONTROLLER)                    \
    X(ELECT_LEADERS, 43, "ElectLeaders", elect_leaders, CONTROLLER)                                \
    X(INCREMENTAL_ALTER_CONFIGS, 44, "IncrementalAlterConfigs", incremental_alter_configs,         \
      CONTROLLER)                                                                                  \
    X(ALTER_PARTITION, 56, "AlterPartition", alter_partition, CONTROLLER)                          \
    X(UPDATE_FEATURES, 57, "UpdateFeatures", update_features, CONTROLLER)                          \
    X(DESCRIBE_CLUSTER, 60, "DescribeCluster", describe_cluster, CONTROLLER)                       \
    X(BROKER_REGISTRATION, 62, "BrokerRegistration", broker_registration, CONTROLLER)              \
    X(BROKER_HEARTBEAT, 63, "BrokerHeartbeat", broker_heartbeat, CONTROLLER)                       \
    X(UNREGISTER_BROKER, 64, "UnregisterBroker", unregister_broker, CONTROLLER)                    \
    X(DESCRIBE_TOPICS, 75, "DescribeTopics", describe_topics, CONTROLLER)                          \
    X(DESCRIBE_FEATURES, 1001, "DescribeFeatures", describe_features, CONTROLLER)                  \
    X(DESCRIBE_ACLS, 29, "DescribeAcls", describe_acls, CONTROLLER)                                \
    X(CREATE_ACLS, 30, "CreateAcls", create_acls, CONTROLLER)                                      \
    X(DELETE_ACLS, 31, "DeleteAcls", delete_acls, CONTROLLER)                                      \
    X(DATA_FETCH, 1100, "Fetch", data_fetch, DATA)                                                 \
    X(PRODUCE, 1101, "Produce", produce, DATA)                                                     \
    X(LIST_OFFSETS, 2, "ListOffsets", list_offsets, DATA)                                          \
    X(METADATA, 3, "Metadata", metadata, DATA)

enum {
#define KQ_API_ENUM_(id, key, name, body, kind) KQ_API_##id = key,
    KQ_API_TABLE(KQ_API_ENUM_)
#undef KQ_API_ENUM_
};

#define KQ_API_ONE_(id, key, name, body, kind) +1
enum { KQ_API_COUNT = 0 KQ_API_TABLE(KQ_API_ONE_) }; /* entries in the table */
#undef KQ_API_ONE_

typedef enum kq_api_kind {
    KQ_API_KIND_QUORUM,
    KQ_API_KIND_CONTROLLER,
    KQ_API_KIND_DATA,
} kq_api_kind;

typedef struct kq_api_info {
    uint32_t key;
    const char *name; /* "CreateTopics" */
    const char *body; /* "create_topics" */
    int body_case;    /* the body oneof's case number in Request and Response */
    kq_api_kind kind;
} kq_api_info;

/* The table, in the order above. */
extern const kq_api_info kq_apis[];
extern const size_t kq_n_apis;

/* The entry for `key`, or NULL for a key not in the table. */
const kq_api_info *kq_api_find(uint32_t key);
/* The entry whose body is oneof case `body_case`, or NULL. */
const kq_api_info *kq_api_by_body(int body_case);

#endif
