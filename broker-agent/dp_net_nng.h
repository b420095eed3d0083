/*
 * kq_dp_nng: the data plane's network in kq-broker-agent (kq_dp_net of data_plane.h over nng).
 * Answers go back on the listener's request (kq_rpc_reply); follower Fetches go to one rpc
 * client per partition leader, reopened when the leader's endpoint changes; AlterPartition
 * goes to the client of the controller named. An answer is copied on the nng thread and
 * pushed on the loop queue as an item of type ev_type; the loop hands it to
 * kq_dp_nng_deliver.
 *
 * Ownership: kq_dp_nng_new's result is the caller's (kq_dp_nng_free, after kq_dp_free). The
 * loop queue and the controller clients array (filled by the caller, as controller_ids) are
 * borrowed; the leader clients are its own.
 */
#ifndef KQ_BROKER_DP_NET_NNG_H
#define KQ_BROKER_DP_NET_NNG_H

#include "data_plane.h"
#include "kq/loopq.h"
#include "kq/rpc.h"

typedef struct kq_dp_nng kq_dp_nng;

/* NULL on out of memory. fatal: called when the loop queue is full (must not return). */
kq_dp_nng *kq_dp_nng_new(kq_loopq *q, int ev_type, size_t max_msg_bytes,
                         kq_rpc_client *const *controllers, const int32_t *controller_ids,
                         int n_controllers, void (*fatal)(const char *what, const char *detail));
void kq_dp_nng_free(kq_dp_nng *n);
/* The controllers changed (dynamic voters): controller_ids[i] is served by the i-th client of
 * the array given to kq_dp_nng_new, which the caller keeps current. */
void kq_dp_nng_set_controllers(kq_dp_nng *n, const int32_t *controller_ids, int n_controllers);
/* The operations for kq_dp_config.net. */
kq_dp_net kq_dp_nng_net(kq_dp_nng *n);
/* A loop-queue item of type ev_type: gives its answer to dp (kq_dp_on_answer), frees it. */
void kq_dp_nng_deliver(kq_dp *dp, void *item, uint64_t now_ms);

#endif
