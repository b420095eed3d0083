/* kq_raft_net: Raft requests over kq_rpc for a single-loop daemon (include/kq/raft_net.h). */
#include "kq/raft_net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/log.h"
#include "kq/rpc.h"

typedef struct net_peer {
    int32_t id; /* RETIRED: replaced by a later entry for the same id (kept until close) */
    char host[256];
    int port;
    kq_rpc_client *client;
} net_peer;

#define MAX_PEERS 64
#define RETIRED INT32_MIN

struct kq_raft_net {
    net_peer peers[MAX_PEERS];
    int n_peers;
    kq_loopq *q;
    int item_type;
    bool tls;
    size_t max_msg_bytes;
    kq_codec_endpoint self; /* sent with BeginQuorumEpoch (host "": not) */
};

struct kq_raft_net_item {
    int32_t peer;
    int32_t req_epoch;
    kq_raft_msg_type req_type;
    int err;
    uint8_t *data;
    size_t len;
};

typedef struct call_ctx {
    kq_raft_net *net;
    kq_raft_net_item *item;
} call_ctx;

kq_raft_msg_type kq_raft_net_response_type(kq_raft_msg_type req)
{
    return (kq_raft_msg_type)((int)req + 1); /* raft.h: a response's type is its request's + 1 */
}

static int open_peer(kq_raft_net *n, const kq_voter_addr *v, char *errbuf, size_t errlen)
{
    char url[300];
    net_peer *p;

    if (n->n_peers == MAX_PEERS) {
        snprintf(errbuf, errlen, "raft net: more than %d peer endpoints", MAX_PEERS);
        return KQ_ERR_FULL;
    }
    p = &n->peers[n->n_peers];
    kq_rpc_url(url, sizeof url, n->tls, v->host, v->port);
    /* a bootstrap server's id (< 0) is not a node id: its certificate is not checked */
    int rc = kq_rpc_client_open_node(url, v->id >= 0 ? v->id : -1, n->max_msg_bytes, &p->client,
                                     errbuf, errlen);
    if (rc != 0)
        return rc;
    p->id = v->id;
    snprintf(p->host, sizeof p->host, "%s", v->host);
    p->port = v->port;
    n->n_peers++;
    return 0;
}

static net_peer *find_peer(kq_raft_net *n, int32_t id)
{
    for (int i = n->n_peers; i > 0; i--)
        if (n->peers[i - 1].id == id)
            return &n->peers[i - 1];
    return NULL;
}

void kq_raft_net_set_self(kq_raft_net *n, const char *host, int32_t port)
{
    snprintf(n->self.host, sizeof n->self.host, "%s", host ? host : "");
    n->self.port = port;
}

int kq_raft_net_set_peer(kq_raft_net *n, const kq_voter_addr *v, char *errbuf, size_t errlen)
{
    net_peer *old = find_peer(n, v->id);

    if (old && old->port == v->port && !strcmp(old->host, v->host))
        return 0;
    int rc = open_peer(n, v, errbuf, errlen);
    if (rc == 0 && old)
        old->id = RETIRED; /* its calls in flight still answer; closed with the net */
    return rc;
}

int kq_raft_net_open(const kq_voter_addr *peers, int n_peers, bool tls, size_t max_msg_bytes,
                     kq_loopq *q, int item_type, kq_raft_net **out, char *errbuf, size_t errlen)
{
    int rc = 0;
    kq_raft_net *n = NULL;
    *out = NULL;
    if (n_peers < 0 || n_peers > MAX_PEERS || q == NULL) {
        snprintf(errbuf, errlen, "raft net: bad arguments (%d peers)", n_peers);
        return KQ_ERR_INVALID_REQUEST;
    }
    n = calloc(1, sizeof(*n));
    if (n == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        return KQ_ERR_NOMEM;
    }
    n->q = q;
    n->item_type = item_type;
    n->tls = tls;
    n->max_msg_bytes = max_msg_bytes;
    for (int i = 0; i < n_peers && rc == 0; i++)
        rc = open_peer(n, &peers[i], errbuf, errlen);
    if (rc != 0) {
        kq_raft_net_close(n);
        return rc;
    }
    *out = n;
    return 0;
}

void kq_raft_net_close(kq_raft_net *n)
{
    if (n == NULL)
        return;
    for (int i = 0; i < n->n_peers; i++)
        kq_rpc_client_close(n->peers[i].client);
    free(n);
}

/* nng thread: copy the bytes, push, return. */
static void on_response(void *arg, int err, const uint8_t *data, size_t len)
{
    call_ctx *cc = arg;
    kq_raft_net_item *it = cc->item;
    it->err = kq_rpc_copy_answer(err, data, len, &it->data, &it->len);
    if (kq_loopq_push(cc->net->q, cc->net->item_type, it) != 0) {
        /* The core would wait forever for this response; nothing sane is left to do. */
        fprintf(stderr, "kq: loop queue full, a Raft response was lost; exiting\n");
        abort();
    }
    free(cc);
}

int kq_raft_net_send(kq_raft_net *n, const kq_raft_msg *m, const char *cluster_id,
                     uint32_t timeout_ms)
{
    kq_buf b = {0};
    call_ctx *cc = NULL;
    net_peer *p = NULL;
    int rc = KQ_ERR_NETWORK_EXCEPTION;
    kq_raft_net_item *it = calloc(1, sizeof(*it));
    if (it == NULL)
        return KQ_ERR_FULL;
    it->peer = m->to;
    it->req_epoch = m->epoch;
    it->req_type = m->type;
    p = find_peer(n, m->to);
    if (p == NULL)
        goto fail;
    rc = kq_codec_encode_raft_request_from(m, cluster_id, &n->self, &b);
    if (rc != 0)
        goto fail;
    cc = malloc(sizeof(*cc));
    if (cc == NULL) {
        rc = KQ_ERR_NETWORK_EXCEPTION;
        goto fail;
    }
    *cc = (call_ctx){n, it};
    rc = kq_rpc_call_async(p->client, b.data, b.len, timeout_ms, on_response, cc);
    kq_buf_free(&b);
    if (rc == 0)
        return 0;
    free(cc);
fail:
    kq_buf_free(&b);
    /* Tell the core through the queue, like any other failure, so it can retry. */
    it->err = rc == KQ_ERR_REQUEST_TIMED_OUT ? rc : KQ_ERR_NETWORK_EXCEPTION;
    if (kq_loopq_push(n->q, n->item_type, it) != 0) {
        free(it);
        return KQ_ERR_FULL;
    }
    return 0;
}

void kq_raft_net_decode(kq_raft_net_item *it, int32_t self_id, kq_raft_net_answer *out)
{
    memset(out, 0, sizeof(*out));
    out->peer = it->peer;
    kq_raft_msg_type want = kq_raft_net_response_type(it->req_type);
    int rc = it->err;
    if (rc == 0) {
        rc = kq_codec_decode_response(it->data, it->len, it->peer, &out->decoded, out->message,
                                      sizeof(out->message));
        if (rc == 0 && out->decoded.error != 0) {
            out->peer_error = out->decoded.error;
            snprintf(out->message, sizeof(out->message), "%s", out->decoded.error_message);
        } else if (rc == 0 && out->decoded.raft.type != want) {
            snprintf(out->message, sizeof(out->message), "answer of another type (%d, not %d)",
                     (int)out->decoded.raft.type, (int)want);
            rc = KQ_ERR_NETWORK_EXCEPTION;
        }
    }
    out->transport_error = rc;
    if (rc == 0 && out->peer_error == 0) {
        out->msg = out->decoded.raft;
    } else {
        /* A transport failure or an error answer: still exactly one response of the request's
         * type for the core. */
        memset(&out->msg, 0, sizeof(out->msg));
        out->msg.type = want;
        out->msg.error = rc != 0 ? (rc == KQ_ERR_REQUEST_TIMED_OUT ? rc : KQ_ERR_NETWORK_EXCEPTION)
                                 : out->peer_error;
        out->msg.epoch =
            rc == 0 && out->decoded.leader_epoch >= 0 ? out->decoded.leader_epoch : it->req_epoch;
        out->msg.leader_id = rc == 0 ? out->decoded.leader_id : -1;
    }
    out->msg.from = it->peer;
    out->msg.to = self_id;
    free(it->data);
    free(it);
}

void kq_raft_net_answer_free(kq_raft_net_answer *a)
{
    if (a == NULL)
        return;
    kq_response_free(&a->decoded);
    memset(a, 0, sizeof(*a));
}

void kq_raft_net_learn_leader(kq_raft_net *n, const kq_voter_addr *bootstrap, int n_bootstrap,
                              const kq_raft_net_answer *a)
{
    int i = KQ_RAFT_BOOTSTRAP_ID(0) - a->peer;
    char err[300];

    if (a->peer > KQ_RAFT_BOOTSTRAP_ID(0) || i >= n_bootstrap || a->transport_error != 0 ||
        a->msg.type != KQ_RAFT_FETCH_RESP || a->msg.leader_id < 0 ||
        find_peer(n, a->msg.leader_id) != NULL)
        return;
    kq_voter_addr v = bootstrap[i];
    v.id = a->msg.leader_id;
    if (a->peer_error == KQ_ERR_NOT_LEADER_OR_FOLLOWER) {
        /* a voter that is not the leader names it, with its endpoint */
        if (!a->decoded.leader_endpoint[0] ||
            kq_config_parse_hostport(a->decoded.leader_endpoint, v.host, sizeof v.host, &v.port,
                                     err, sizeof err) != 0)
            return;
    } else if (a->peer_error != 0) {
        return;
    } /* no error: the server is the leader itself */
    if (kq_raft_net_set_peer(n, &v, err, sizeof err) != 0)
        KQ_WARN("raft", "cannot dial the leader", "leader=%d endpoint=%s:%d error=\"%s\"",
                (int)v.id, v.host, v.port, err);
}
