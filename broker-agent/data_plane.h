/*
 * The broker agent's data plane (DESIGN.md section 9, docs/broker.md): serves Produce, the
 * data-plane Fetch (consumers and follower replicas), ListOffsets and Metadata on the broker's
 * listener, runs the follower fetchers that pull from partition leaders, sends the leaders'
 * AlterPartition requests to the active controller, and drives the replicas' timers.
 *
 * It owns no replica: it steps the replicas of a kq_rm (replica_manager.h) and writes their
 * partition logs through the kq_rm's kq_plog, following the update order of replica.h:
 * log writes of a loop iteration go into one plog transaction; kq_dp_commit commits it
 * (fsync), steps PERSISTED, and only then are the answers sent. So a Produce is answered only
 * once its records are durable on the leader, and a follower fetches the next offsets only
 * after the previous ones are durable on it.
 *
 * It does no network I/O and reads no clock: requests come in through kq_dp_on_request, what it
 * sends and answers goes out through the kq_dp_net operations of its configuration (nng in
 * kq-broker-agent, the simulated network in kq-sim), answers come back through kq_dp_on_answer,
 * and every call is given the time.
 *
 * Loop use (one thread, the broker's loop):
 *   kq_dp_on_request / kq_dp_on_answer      for each request / fetch or AlterPartition answer;
 *   kq_dp_tick                              each iteration (timers, long-poll deadlines);
 *   kq_dp_commit                            before the replica manager acts on metadata;
 *   kq_dp_after_metadata                    after kq_rm_on_metadata ran;
 *   kq_dp_pump                              last: sends answers, fetches and AlterPartitions;
 *   kq_dp_deadline                          the next time kq_dp_tick must run.
 *
 * Idempotent producers: per partition, the leader keeps each producer id's epoch and last
 * sequence (rebuilt from the log on the first Produce after it becomes leader or truncates);
 * a retried batch is answered with its original offset once committed, a gap in the sequence
 * is OUT_OF_ORDER_SEQUENCE_NUMBER, an older producer epoch INVALID_PRODUCER_EPOCH.
 *
 * Ownership: kq_dp_new's result is the caller's (kq_dp_free). The kq_rm and the image passed
 * to the calls are borrowed. A request handle given to kq_dp_on_request (when it returns 1)
 * becomes the data plane's until it passes it to net.reply or net.drop; a token given to
 * net.send stays the data plane's, and the network gives it back exactly once, to
 * kq_dp_on_answer; kq_dp_free frees the tokens still in flight, and the network must not give
 * them back after it.
 */
#ifndef KQ_BROKER_DATA_PLANE_H
#define KQ_BROKER_DATA_PLANE_H

#include <stddef.h>
#include <stdint.h>

#include "replica_manager.h"
#include "kq/authorizer.h"
#include "kq/codec.h"
#include "kq/config.h"
#include "kq/image.h"

typedef struct kq_dp kq_dp;

typedef enum kq_dp_peer {
    KQ_DP_PEER_BROKER = 1,     /* a partition leader's data-plane listener: a follower Fetch */
    KQ_DP_PEER_CONTROLLER = 2, /* the active controller: AlterPartition */
} kq_dp_peer;

/* The data plane's network. req: an opaque request handle from the caller's listener. */
typedef struct kq_dp_net {
    void *ctx;
    /* Answer req with answer (the operation takes answer's memory, and req). */
    void (*reply)(void *ctx, void *req, kq_buf *answer);
    /* Drop req unanswered (its client times out). */
    void (*drop)(void *ctx, void *req);
    /* Send request bytes (borrowed for the call) to node `node` of kind `peer` (a broker at
     * url, from its registration; url is NULL for the controller). 0: sent, and the answer (or
     * a transport error such as REQUEST_TIMED_OUT after timeout_ms) comes back later through
     * kq_dp_on_answer with token; otherwise an error and nothing will come back. */
    int (*send)(void *ctx, kq_dp_peer peer, int32_t node, const char *url, const uint8_t *data,
                size_t len, uint32_t timeout_ms, void *token);
} kq_dp_net;

typedef struct kq_dp_config {
    int32_t node_id;
    const char *cluster_id;             /* borrowed for the data plane's life */
    uint32_t replica_fetch_wait_max_ms; /* follower long-poll */
    uint32_t replica_fetch_max_bytes;   /* per partition */
    uint32_t test_fetch_delay_ms;       /* tests only: pause between a follower's fetches */
    uint32_t request_timeout_ms;        /* AlterPartition and fetch transport timeout */
    size_t max_msg_bytes;               /* rpc client receive limit */
    /* listener.security.protocol.map, borrowed: a leader's first registered endpoint is dialed
     * with its listener's protocol (tls+tcp:// for SSL). NULL: every endpoint is plaintext. */
    const kq_protocol_map *protocols;
    /* node.principal.template, borrowed: a follower's Fetch or ListOffsets (replica_id >= 0)
     * is accepted only from the principal of that replica id. NULL: no identity checks. */
    const char *node_principal_template;
    /* The authorizer, borrowed (NULL or not enabled: none): Produce needs Write on its topic,
     * a consumer's Fetch Read, ListOffsets and Metadata Describe; the request is refused
     * whole (TOPIC_AUTHORIZATION_FAILED) when one topic is not allowed. */
    const kq_authorizer_config *authorizer;
    /* Requests that may wait at once (acks=all Produces for the HW plus long-polling
     * Fetches): each holds a listener context until answered. Beyond it a Fetch is answered
     * at once (empty) and an acks=all Produce gets REQUEST_TIMED_OUT, retriable, unwritten,
     * so the followers' fetches that complete the waiting ones still get in. */
    size_t max_waiting;
    kq_dp_net net;
    /* Called on a storage failure (fsync, LMDB); must not return. */
    void (*fatal)(const char *what, const char *detail);
} kq_dp_config;

/* NULL on out of memory. */
kq_dp *kq_dp_new(const kq_dp_config *cfg, kq_rm *rm);
/* Drops unanswered requests (clients time out) and closes the fetchers' connections. */
void kq_dp_free(kq_dp *dp);

/* A request from the listener (its bytes borrowed for the call): 1 if it was a data-plane API
 * (the data plane owns req and answers it), 0 if not (req untouched: the caller answers it).
 * img is the broker's image; principal who sent it, when cfg.node_principal_template is
 * set. */
int kq_dp_on_request(kq_dp *dp, void *req, const uint8_t *data, size_t len, const kq_image *img,
                     const char *principal, uint64_t now_ms);
/* The answer to what net.send sent with token: err 0 and the answer bytes (borrowed), or a
 * transport error (REQUEST_TIMED_OUT, NETWORK_EXCEPTION, ...). */
void kq_dp_on_answer(kq_dp *dp, void *token, int err, const uint8_t *data, size_t len,
                     uint64_t now_ms);
void kq_dp_tick(kq_dp *dp, const kq_image *img, uint64_t now_ms);
void kq_dp_commit(kq_dp *dp, const kq_image *img, uint64_t now_ms);
/* After kq_rm_on_metadata: broker registration changes reach the leaders' replicas, and
 * Produces parked on partitions no longer hosted are answered. */
void kq_dp_after_metadata(kq_dp *dp, const kq_image *img, uint64_t now_ms);
/* controller: the id of the active controller as the metadata observer knows it (-1: none
 * known, no AlterPartition is sent); broker_epoch: this broker's registration epoch (-1: not
 * registered, no follower fetches are sent). */
void kq_dp_pump(kq_dp *dp, const kq_image *img, int32_t controller, int64_t broker_epoch,
                uint64_t now_ms);
/* The next time kq_dp_tick must run (0: at once). */
uint64_t kq_dp_deadline(const kq_dp *dp, uint64_t now_ms);

typedef struct kq_dp_counts {
    uint64_t produce_requests, produce_errors, fetch_requests, invalid_requests;
    uint64_t refused_requests; /* CLUSTER_AUTHORIZATION_FAILED */
    uint64_t records_appended, isr_shrinks, isr_expands;
    size_t parked_produces, parked_fetches;
} kq_dp_counts;
void kq_dp_get_counts(const kq_dp *dp, kq_dp_counts *out);

#endif
