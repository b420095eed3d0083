/*
 * kq error codes: one X-macro table.
 *
 * Codes 1..999 keep Kafka's names and numbers where Kafka has them, so that operators can
 * search for them; codes >= 1000 are kq-local conditions that never cross the wire as a
 * Kafka error (I/O, configuration, internal). KQ_OK is 0. Functions return 0 or a positive
 * kq error code.
 */
#ifndef KQ_ERROR_H
#define KQ_ERROR_H

#include <stddef.h>

/* X(NAME, number, retriable, "message") */
#define KQ_ERROR_TABLE(X)                                                                          \
    X(NONE, 0, 0, "no error")                                                                      \
    X(OFFSET_OUT_OF_RANGE, 1, 0, "offset out of range")                                            \
    X(CORRUPT_MESSAGE, 2, 1, "corrupt message (CRC mismatch)")                                     \
    X(UNKNOWN_TOPIC_OR_PARTITION, 3, 1, "unknown topic or partition")                              \
    X(LEADER_NOT_AVAILABLE, 5, 1, "leader not available")                                          \
    X(NOT_LEADER_OR_FOLLOWER, 6, 1, "not leader or follower")                                      \
    X(REQUEST_TIMED_OUT, 7, 1, "request timed out")                                                \
    X(BROKER_NOT_AVAILABLE, 8, 1, "broker not available")                                          \
    X(MESSAGE_TOO_LARGE, 10, 0, "message too large")                                               \
    X(INVALID_TOPIC_EXCEPTION, 17, 0, "invalid topic name")                                        \
    X(NETWORK_EXCEPTION, 13, 1, "network exception")                                               \
    X(NOT_ENOUGH_REPLICAS, 19, 1, "not enough in-sync replicas")                                   \
    X(NOT_ENOUGH_REPLICAS_AFTER_APPEND, 20, 1, "not enough in-sync replicas after append")         \
    X(INVALID_REQUIRED_ACKS, 21, 0, "invalid required acks")                                       \
    X(TOPIC_AUTHORIZATION_FAILED, 29, 0, "topic authorization failed")                             \
    X(CLUSTER_AUTHORIZATION_FAILED, 31, 0, "cluster authorization failed")                         \
    X(INVALID_TIMESTAMP, 32, 0, "invalid timestamp")                                               \
    X(UNSUPPORTED_VERSION, 35, 0, "unsupported version")                                           \
    X(TOPIC_ALREADY_EXISTS, 36, 0, "topic already exists")                                         \
    X(INVALID_PARTITIONS, 37, 0, "invalid partitions")                                             \
    X(INVALID_REPLICATION_FACTOR, 38, 0, "invalid replication factor")                             \
    X(INVALID_REPLICA_ASSIGNMENT, 39, 0, "invalid replica assignment")                             \
    X(INVALID_CONFIG, 40, 0, "invalid config")                                                     \
    X(NOT_CONTROLLER, 41, 1, "not the active controller")                                          \
    X(INVALID_REQUEST, 42, 0, "invalid request")                                                   \
    X(POLICY_VIOLATION, 44, 0, "policy violation")                                                 \
    X(OUT_OF_ORDER_SEQUENCE_NUMBER, 45, 0, "out of order sequence number")                         \
    X(DUPLICATE_SEQUENCE_NUMBER, 46, 0, "duplicate sequence number")                               \
    X(INVALID_PRODUCER_EPOCH, 47, 0, "invalid producer epoch")                                     \
    X(KAFKA_STORAGE_ERROR, 56, 1, "storage error")                                                 \
    X(OPERATION_NOT_ATTEMPTED, 55, 0, "operation not attempted")                                   \
    X(UNKNOWN_PRODUCER_ID, 59, 0, "unknown producer id")                                           \
    X(FENCED_LEADER_EPOCH, 74, 1, "fenced leader epoch")                                           \
    X(UNKNOWN_LEADER_EPOCH, 75, 1, "unknown leader epoch")                                         \
    X(STALE_BROKER_EPOCH, 77, 0, "stale broker epoch")                                             \
    X(ELECTION_NOT_NEEDED, 84, 0, "election not needed")                                           \
    X(PREFERRED_LEADER_NOT_AVAILABLE, 80, 1, "preferred leader not available")                     \
    X(ELIGIBLE_LEADERS_NOT_AVAILABLE, 83, 1, "eligible leaders not available")                     \
    X(INVALID_UPDATE_VERSION, 95, 0, "invalid update version")                                     \
    X(UNKNOWN_TOPIC_ID, 100, 1, "unknown topic id")                                                \
    X(DUPLICATE_BROKER_REGISTRATION, 101, 0, "duplicate broker registration")                      \
    X(BROKER_ID_NOT_REGISTERED, 102, 0, "broker id not registered")                                \
    X(INCONSISTENT_CLUSTER_ID, 104, 0, "inconsistent cluster id")                                  \
    X(SNAPSHOT_NOT_FOUND, 98, 0, "snapshot not found")                                             \
    X(POSITION_OUT_OF_RANGE, 99, 0, "position out of range")                                       \
    X(INELIGIBLE_REPLICA, 107, 0, "ineligible replica")                                            \
    X(NEW_LEADER_ELECTED, 108, 0, "new leader elected")                                            \
    X(INVALID_REGISTRATION, 119, 0, "invalid registration")                                        \
    X(INVALID_VOTER_KEY, 125, 0, "invalid voter key")                                              \
    X(DUPLICATE_VOTER, 126, 0, "the voter is already in the voter set")                            \
    X(VOTER_NOT_FOUND, 127, 0, "the voter is not in the voter set")                                \
    X(NOMEM, 1000, 0, "out of memory")                                                             \
    X(IO, 1001, 0, "I/O error")                                                                    \
    X(CONFIG, 1002, 0, "configuration error")                                                      \
    X(MALFORMED, 1003, 0, "malformed message")                                                     \
    X(NOT_FORMATTED, 1004, 0, "directory not formatted")                                           \
    X(ALREADY_FORMATTED, 1005, 0, "directory already formatted")                                   \
    X(MISMATCH, 1006, 0, "stored identity does not match configuration")                           \
    X(FULL, 1007, 1, "queue or storage full")                                                      \
    X(NOT_FOUND, 1008, 0, "not found")                                                             \
    X(CLOSED, 1009, 0, "closed")                                                                   \
    X(TIMEOUT, 1010, 1, "timed out")                                                               \
    X(INTERNAL, 1011, 0, "internal error")                                                         \
    X(FATAL, 1012, 0, "fatal safety violation")

typedef enum kq_err {
#define KQ_ERROR_ENUM(name, num, retriable, msg) KQ_ERR_##name = num,
    KQ_ERROR_TABLE(KQ_ERROR_ENUM)
#undef KQ_ERROR_ENUM
} kq_err;

#define KQ_OK KQ_ERR_NONE

/* Kafka-style upper-case name ("NOT_CONTROLLER"); "UNKNOWN_ERROR" for an unknown code.
 * Returns a static string. */
const char *kq_err_name(int code);
/* Human message ("not the active controller"); static string. */
const char *kq_err_message(int code);
/* 1 if a client should retry the request (maybe elsewhere), else 0. */
int kq_err_retriable(int code);
/* Code for a name as printed by kq_err_name, or -1. */
int kq_err_from_name(const char *name);

/* printf-style message into the caller-owned errbuf (errlen bytes, truncated, always
 * NUL-terminated); does nothing when errbuf is NULL or errlen is 0. */
void kq_errf(char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
