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
 * Loop use (one thread, the broker's loop):
 *   kq_dp_on_request / kq_dp_on_net_event   for each request / fetch or AlterPartition answer;
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
 * Ownership: kq_dp_new's result is the caller's (kq_dp_free). The kq_rm, the loop queue and
 * the image passed to the calls are borrowed. Requests handed to kq_dp_on_request and events
 * handed to kq_dp_on_net_event become the data plane's.
 */
#ifndef KQ_BROKER_DATA_PLANE_H
#define KQ_BROKER_DATA_PLANE_H

#include <stddef.h>
#include <stdint.h>

#include "replica_manager.h"
#include "kq/image.h"
#include "kq/loopq.h"
#include "kq/rpc.h"

typedef struct kq_dp kq_dp;

typedef struct kq_dp_config {
    int32_t node_id;
    const char *cluster_id;             /* borrowed for the data plane's life */
    uint32_t replica_fetch_wait_max_ms; /* follower long-poll */
    uint32_t replica_fetch_max_bytes;   /* per partition */
    uint32_t test_fetch_delay_ms;       /* tests only: pause between a follower's fetches */
    uint32_t request_timeout_ms;        /* AlterPartition and fetch transport timeout */
    size_t max_msg_bytes;               /* rpc client receive limit */
    /* Requests that may wait at once (acks=all Produces for the HW plus long-polling
     * Fetches): each holds a listener context until answered. Beyond it a Fetch is answered
     * at once (empty) and an acks=all Produce gets REQUEST_TIMED_OUT, retriable, unwritten,
     * so the followers' fetches that complete the waiting ones still get in. */
    size_t max_waiting;
    kq_loopq *q; /* nng callbacks push answers here */
    int ev_type; /* with this loop-queue item type */
    /* Called on a storage failure (fsync, LMDB); must not return. */
    void (*fatal)(const char *what, const char *detail);
} kq_dp_config;

/* NULL on out of memory. */
kq_dp *kq_dp_new(const kq_dp_config *cfg, kq_rm *rm);
/* Drops unanswered requests (clients time out) and closes the fetchers' connections. */
void kq_dp_free(kq_dp *dp);

/* A request from the listener: 1 if it was a data-plane API (the data plane owns req and
 * answers it), 0 if not (req untouched: the caller answers it). img is the broker's image. */
int kq_dp_on_request(kq_dp *dp, kq_rpc_req *req, const kq_image *img, uint64_t now_ms);
/* An item of type cfg.ev_type popped from the loop queue. */
void kq_dp_on_net_event(kq_dp *dp, void *ev, uint64_t now_ms);
void kq_dp_tick(kq_dp *dp, const kq_image *img, uint64_t now_ms);
void kq_dp_commit(kq_dp *dp, const kq_image *img, uint64_t now_ms);
/* After kq_rm_on_metadata: broker registration changes reach the leaders' replicas, and
 * Produces parked on partitions no longer hosted are answered. */
void kq_dp_after_metadata(kq_dp *dp, const kq_image *img, uint64_t now_ms);
/* ctl: the client of the active controller (NULL if none known); broker_epoch: this broker's
 * registration epoch (-1: not registered, no follower fetches are sent). */
void kq_dp_pump(kq_dp *dp, const kq_image *img, kq_rpc_client *ctl, int64_t broker_epoch,
                uint64_t now_ms);
uint64_t kq_dp_deadline(const kq_dp *dp);

typedef struct kq_dp_counts {
    uint64_t produce_requests, produce_errors, fetch_requests, invalid_requests;
    uint64_t records_appended, isr_shrinks, isr_expands;
    size_t parked_produces, parked_fetches;
} kq_dp_counts;
void kq_dp_get_counts(const kq_dp *dp, kq_dp_counts *out);

#endif
