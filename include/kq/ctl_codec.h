/*
 * kq_ctlcodec: the controller RPCs (proto/kq_ctl.proto, carried in the kq_rpc.proto envelope)
 * <-> the plain structs of include/kq/ctlapi.h. Pure functions; protobuf-c types never appear
 * here.
 *
 *   - Requests: kq_ctl_decode_request (bytes) or kq_ctl_request_from_envelope (after
 *     kq_codec_decode_request) fill a tagged union, validated: counts, string lengths, enum
 *     values, id ranges -> KQ_ERR_INVALID_REQUEST with errbuf naming the field. Semantic checks
 *     (topic name rules, partition counts, known configs, epochs) are left to the decisions so
 *     they can answer per item. kq_ctl_encode_request is the inverse (tools, tests).
 *   - Responses: kq_ctl_encode_*_response from the decisions' results (registration,
 *     heartbeat, unregistration, AlterPartition); the other answers are built by the
 *     controller (controller/answers.h) and encoded by kq_ctl_encode_answer. A top-level
 *     error (NOT_CONTROLLER with a leader hint, INVALID_REQUEST, ...) is sent with
 *     kq_codec_encode_error_response.
 *   - Response decoders for the tool and tests: kq_ctl_decode_*_response read the body of a
 *     kq_response decoded by kq_codec_decode_response into plain structs.
 *
 * Ownership:
 *   - kq_ctl_request: the decoded union points into memory owned by the kq_ctl_request
 *     (released by kq_ctl_request_free). kq_ctl_request_from_envelope BORROWS `env` too: free
 *     the kq_ctl_request before kq_request_free(env).
 *   - Encoders borrow their inputs and fill a kq_buf with malloc'd data (kq_buf_free).
 *   - Decoded response structs own every array and string inside them; release each with its
 *     *_free function (which leaves it empty; NULL is fine). They do not borrow `env`.
 */
#ifndef KQ_CTL_CODEC_H
#define KQ_CTL_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kq/codec.h"
#include "kq/ctlapi.h"
#include "kq/image.h"

/* Decode limits (per request). */
#define KQ_CTL_MAX_ITEMS 10000           /* topics, resources, features, names, targets */
#define KQ_CTL_MAX_PARTITIONS 1000000    /* partitions or assignments in one request */
#define KQ_CTL_MAX_CONFIGS 1000          /* configs per topic / resource */
#define KQ_CTL_MAX_TOPIC_NAME_BYTES 1024 /* longer names are rejected outright */
#define KQ_CTL_MAX_MESSAGE 255           /* per-item error messages */

/* 1 if api_key is one of the controller APIs of this header. */
bool kq_ctl_is_controller_api(uint32_t api_key);

/* ---- requests ---------------------------------------------------------------------------- */

typedef struct kq_ctl_request {
    uint32_t api_key; /* KQ_API_* */
    char cluster_id[KQ_CODEC_MAX_CLUSTER_ID + 1];
    int32_t sender_id;
    union {
        kq_broker_registration broker_registration; /* cluster_id points at the body's */
        kq_heartbeat broker_heartbeat;
        kq_unregister_broker unregister_broker;
        kq_alter_partition alter_partition;
        kq_create_topics create_topics;
        kq_delete_topics delete_topics;
        kq_create_partitions_request create_partitions;
        kq_elect_leaders elect_leaders;
        kq_alter_configs alter_configs;
        kq_describe_configs describe_configs;
        kq_update_features update_features;
        kq_describe_topics describe_topics; /* n == 0: every topic */
        kq_create_acls create_acls;
        kq_describe_acls describe_acls;
        kq_delete_acls delete_acls;
        /* DescribeCluster, DescribeFeatures: no fields */
    };
    void *priv_; /* private: allocations and, for kq_ctl_decode_request, the envelope */
} kq_ctl_request;

/* Decode one Request whose api key is a controller API. Errors: KQ_ERR_MALFORMED (does not
 * parse), KQ_ERR_UNSUPPORTED_VERSION, KQ_ERR_INVALID_REQUEST (not a controller API, missing or
 * wrong body, bad field: errbuf says which), KQ_ERR_NOMEM. On error *out is empty. */
int kq_ctl_decode_request(const uint8_t *buf, size_t len, kq_ctl_request *out, char *errbuf,
                          size_t errlen);
/* Same from an envelope already decoded by kq_codec_decode_request (borrowed; see above). */
int kq_ctl_request_from_envelope(const kq_request *env, kq_ctl_request *out, char *errbuf,
                                 size_t errlen);
void kq_ctl_request_free(kq_ctl_request *r);

/* Encode req (api_key and the matching union member; cluster_id and sender_id from the
 * arguments, NULL cluster id = ""). KQ_ERR_INVALID_REQUEST for an unknown api key or counts /
 * pointers that do not fit, KQ_ERR_NOMEM. */
int kq_ctl_encode_request(const char *cluster_id, int32_t sender_id, const kq_ctl_request *req,
                          kq_buf *out);

/* ---- responses ----------------------------------------------------------------------------- */
/* Each returns 0, KQ_ERR_INVALID_REQUEST (inconsistent arguments) or KQ_ERR_NOMEM. A result
 * whose top-level error is set is encoded as an error response (error_code + message, no
 * body). The other answers are built by the controller (controller/answers.h) and encoded by
 * kq_ctl_encode_answer. */

int kq_ctl_encode_broker_registration_response(const kq_registration_result *res, kq_buf *out);
int kq_ctl_encode_broker_heartbeat_response(const kq_heartbeat_result *res, kq_buf *out);
/* error 0 or a code (message may be NULL). */
int kq_ctl_encode_unregister_broker_response(int error, const char *message, kq_buf *out);
/* res->results are in request order (one per request partition). */
int kq_ctl_encode_alter_partition_response(const kq_alter_partition *req,
                                           const kq_alter_partition_result *res, kq_buf *out);
/* Encodes body, the C struct of api_key's answer, into *out (malloc'd, the caller's): a
 * kq_ctl_item_results for CreateTopics, DeleteTopics, CreatePartitions,
 * IncrementalAlterConfigs, UpdateFeatures and CreateAcls; kq_elect_wire_results for ElectLeaders;
 * kq_ctl_acls_desc for DescribeAcls and kq_ctl_delete_acls_desc for DeleteAcls;
 * kq_ctl_cluster_desc, kq_ctl_topics_desc, kq_ctl_configs_desc and kq_ctl_features_desc for
 * DescribeCluster, DescribeTopics, DescribeConfigs and DescribeFeatures. The controller builds
 * them (controller/answers.h). 0, KQ_ERR_INVALID_REQUEST (another API or a NULL body; limits
 * are the receiver's to check) or KQ_ERR_NOMEM. */
int kq_ctl_encode_answer(uint32_t api_key, const void *body, kq_buf *out);

/* ---- decoded responses (tool, tests) ----------------------------------------------------- */
/* Each checks env->api_key and that the body is present (else KQ_ERR_INVALID_REQUEST naming
 * the problem), validates what it copies, and fills *out (owned; free with the *_free). An
 * envelope carrying an error (env->error != 0) has no body: check env->error first. */

/* DescribeCluster: the image's brokers (kq_broker), strings and lists owned when decoded.
 * A decoded broker's incarnation_id and registration_offset are not on the wire (zero). */
typedef struct kq_ctl_cluster_desc {
    char *cluster_id;
    int32_t controller_id;
    kq_broker *brokers;
    int32_t n_brokers;
} kq_ctl_cluster_desc;
int kq_ctl_decode_describe_cluster_response(const kq_response *env, kq_ctl_cluster_desc *out,
                                            char *errbuf, size_t errlen);
void kq_ctl_cluster_desc_free(kq_ctl_cluster_desc *d);

int kq_ctl_decode_describe_topics_response(const kq_response *env, kq_ctl_topics_desc *out,
                                           char *errbuf, size_t errlen);
void kq_ctl_topics_desc_free(kq_ctl_topics_desc *d);

int kq_ctl_decode_describe_configs_response(const kq_response *env, kq_ctl_configs_desc *out,
                                            char *errbuf, size_t errlen);
void kq_ctl_configs_desc_free(kq_ctl_configs_desc *d);

int kq_ctl_decode_describe_features_response(const kq_response *env, kq_ctl_features_desc *out,
                                             char *errbuf, size_t errlen);
void kq_ctl_features_desc_free(kq_ctl_features_desc *d);

/* DescribeAcls: the bindings the filter selected; DeleteAcls: per filter, its error and the
 * bindings it deleted. */
int kq_ctl_decode_describe_acls_response(const kq_response *env, kq_ctl_acls_desc *out,
                                         char *errbuf, size_t errlen);
void kq_ctl_acls_desc_free(kq_ctl_acls_desc *d);
int kq_ctl_decode_delete_acls_response(const kq_response *env, kq_ctl_delete_acls_desc *out,
                                       char *errbuf, size_t errlen);
void kq_ctl_delete_acls_desc_free(kq_ctl_delete_acls_desc *d);

/* For env->api_key CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, ELECT_LEADERS,
 * INCREMENTAL_ALTER_CONFIGS, UPDATE_FEATURES or CREATE_ACLS (one per creation, name ""). */
int kq_ctl_decode_item_results(const kq_response *env, kq_ctl_item_results *out, char *errbuf,
                               size_t errlen);
void kq_ctl_item_results_free(kq_ctl_item_results *r);

/* Broker side (integration tests). */
int kq_ctl_decode_broker_registration_response(const kq_response *env, int64_t *broker_epoch,
                                               char *errbuf, size_t errlen);
/* Fills is_caught_up, is_fenced, should_shutdown, in_controlled_shutdown (error = 0). */
int kq_ctl_decode_broker_heartbeat_response(const kq_response *env, kq_heartbeat_result *out,
                                            char *errbuf, size_t errlen);
/* Flat results in response order; free with kq_ctl_alter_partition_response_free. */
int kq_ctl_decode_alter_partition_response(const kq_response *env, kq_alter_partition_result *out,
                                           char *errbuf, size_t errlen);
void kq_ctl_alter_partition_response_free(kq_alter_partition_result *r);

#endif
