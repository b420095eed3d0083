/*
 * kq_raft_net: the Raft core's outgoing requests (Vote, BeginQuorumEpoch, EndQuorumEpoch,
 * Fetch) over kq_rpc, for a daemon with one loop thread (DESIGN.md section 3). Used by the
 * broker agent's metadata observer; the controller's private copy of the same logic
 * (controller/main.c send_request / on_response / handle_response) can move here.
 *
 * One kq_rpc client per peer. kq_raft_net_send encodes a request the core emitted and calls
 * the peer; whatever happens (answer, timeout, transport failure, failure to send at all)
 * exactly one response item is pushed onto the loop queue with the item type given at open.
 * The loop pops it and turns it into the message for the core with kq_raft_net_decode: a
 * peer's answer, or a response of the request's type carrying REQUEST_TIMED_OUT /
 * NETWORK_EXCEPTION or the peer's error code, so the core gets exactly one response per
 * request (raft.h).
 *
 * Threads: kq_raft_net_send, _decode and _close on the loop thread; the rpc callbacks only copy
 * bytes and push. Ownership: the caller owns the kq_raft_net (kq_raft_net_close) and every
 * popped item (kq_raft_net_decode consumes it). The queue is borrowed and must outlive the
 * net. A decoded answer owns its memory (kq_raft_net_answer_free); answer.msg's batches point
 * into it.
 */
#ifndef KQ_RAFT_NET_H
#define KQ_RAFT_NET_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "kq/codec.h"
#include "kq/config.h"
#include "kq/loopq.h"
#include "kq/raft.h"

typedef struct kq_raft_net kq_raft_net;
typedef struct kq_raft_net_item kq_raft_net_item; /* what the loop pops */

/* peers: the other voters (the caller leaves itself out), dialed over TLS when tls (the
 * process's identity, kq_rpc_set_tls). Returns 0, or an error with errbuf naming the peer. */
int kq_raft_net_open(const kq_voter_addr *peers, int n_peers, bool tls, size_t max_msg_bytes,
                     kq_loopq *q, int item_type, kq_raft_net **out, char *errbuf, size_t errlen);
/* Dial v->id at v's endpoint from now on: a new id, or a new endpoint for a known one (the old
 * connection is kept until close, for its calls in flight). Ids < 0 are bootstrap servers
 * (KQ_RAFT_BOOTSTRAP_ID). 0, KQ_ERR_FULL (64 endpoints over the net's life) or the dial's
 * error, errbuf saying why. */
int kq_raft_net_set_peer(kq_raft_net *n, const kq_voter_addr *v, char *errbuf, size_t errlen);
/* This node's Raft listener, sent with its BeginQuorumEpoch requests (KIP-853) so that a voter
 * that does not know where the new leader is can dial it. host "" or NULL: not sent. */
void kq_raft_net_set_self(kq_raft_net *n, const char *host, int32_t port);
/* Cancels outstanding calls (their items are still pushed) and frees. NULL is fine. */
void kq_raft_net_close(kq_raft_net *n);

/* Send request m (m->type a *_REQ, m->to a peer). Returns 0 (one item will be pushed), or
 * KQ_ERR_FULL when not even the failure could be queued (the caller must treat it as fatal:
 * the core would wait for that response forever). */
int kq_raft_net_send(kq_raft_net *n, const kq_raft_msg *m, const char *cluster_id,
                     uint32_t timeout_ms);

typedef struct kq_raft_net_answer {
    kq_raft_msg msg; /* RECEIVE this (from = peer, to = self) */
    int32_t peer;
    int transport_error; /* 0, REQUEST_TIMED_OUT, NETWORK_EXCEPTION, or a decode error */
    int peer_error;      /* the error the peer answered with (0 none) */
    char message[256];   /* the peer's error message or what did not decode */
    kq_response decoded; /* owned */
} kq_raft_net_answer;

/* Consumes item. self_id fills msg.to. */
void kq_raft_net_decode(kq_raft_net_item *item, int32_t self_id, kq_raft_net_answer *out);
void kq_raft_net_answer_free(kq_raft_net_answer *a);

/* KIP-853 discovery: an answer from bootstrap server i (a.peer = KQ_RAFT_BOOTSTRAP_ID(i)) that
 * names a leader without an error came from that leader itself (only a leader answers a Fetch
 * without one), so the leader's id is dialed at bootstrap[i]'s address from now on; a
 * NOT_LEADER_OR_FOLLOWER answer with the leader's endpoint (host:port) names where to dial
 * it. Anything else: nothing. */
void kq_raft_net_learn_leader(kq_raft_net *n, const kq_voter_addr *bootstrap, int n_bootstrap,
                              const kq_raft_net_answer *a);

/* The response type of a request type (VOTE_REQ -> VOTE_RESP, ...). */
kq_raft_msg_type kq_raft_net_response_type(kq_raft_msg_type req);

#endif
