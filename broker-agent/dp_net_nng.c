/* The data plane's network over nng: see dp_net_nng.h. */
#include "dp_net_nng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/log.h"

#define MAX_LEADERS 64 /* as DP_MAX_FETCHERS: one fetcher per leader */

typedef struct leader_client {
    int32_t id;
    char url[300];
    kq_rpc_client *c;
} leader_client;

struct kq_dp_nng {
    kq_loopq *q;
    int ev_type;
    size_t max_msg;
    kq_rpc_client *const *ctl;
    int32_t ctl_ids[KQ_RAFT_MAX_VOTERS];
    int n_ctl;
    void (*fatal)(const char *what, const char *detail);
    leader_client leaders[MAX_LEADERS];
    int n_leaders;
};

/* An answer on its way to the loop. */
typedef struct answer {
    kq_dp_nng *n;
    void *token;
    int err;
    uint8_t *data;
    size_t len;
} answer;

kq_dp_nng *kq_dp_nng_new(kq_loopq *q, int ev_type, size_t max_msg_bytes,
                         kq_rpc_client *const *controllers, const int32_t *controller_ids,
                         int n_controllers, void (*fatal)(const char *what, const char *detail))
{
    kq_dp_nng *n = calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    n->q = q;
    n->ev_type = ev_type;
    n->max_msg = max_msg_bytes;
    n->ctl = controllers;
    n->n_ctl = n_controllers < KQ_RAFT_MAX_VOTERS ? n_controllers : KQ_RAFT_MAX_VOTERS;
    memcpy(n->ctl_ids, controller_ids, (size_t)n->n_ctl * sizeof(int32_t));
    n->fatal = fatal;
    return n;
}

void kq_dp_nng_set_controllers(kq_dp_nng *n, const int32_t *controller_ids, int n_controllers)
{
    n->n_ctl = n_controllers < KQ_RAFT_MAX_VOTERS ? n_controllers : KQ_RAFT_MAX_VOTERS;
    memcpy(n->ctl_ids, controller_ids, (size_t)n->n_ctl * sizeof(int32_t));
}

void kq_dp_nng_free(kq_dp_nng *n)
{
    if (n == NULL)
        return;
    for (int i = 0; i < n->n_leaders; i++)
        kq_rpc_client_close(n->leaders[i].c);
    free(n);
}

static void reply(void *ctx, void *req, kq_buf *buf)
{
    (void)ctx;
    kq_rpc_reply(req, buf->data, buf->len);
    kq_buf_free(buf);
}

static void drop(void *ctx, void *req)
{
    (void)ctx;
    kq_rpc_req_drop(req);
}

/* nng thread: copy, push, return. */
static void on_answer(void *arg, int err, const uint8_t *data, size_t len)
{
    answer *a = arg;
    a->err = kq_rpc_copy_answer(err, data, len, &a->data, &a->len);
    if (kq_loopq_push(a->n->q, a->n->ev_type, a) != 0)
        a->n->fatal("loop queue full", "a data-plane answer was dropped");
}

/* The client of leader id at url, (re)opened if its endpoint changed. The data plane sends one
 * fetch at a time per leader, so nothing is in flight on a client being replaced. */
static kq_rpc_client *leader_client_for(kq_dp_nng *n, int32_t id, const char *url)
{
    leader_client *l = NULL;
    for (int i = 0; i < n->n_leaders && l == NULL; i++)
        if (n->leaders[i].id == id)
            l = &n->leaders[i];
    if (l == NULL) {
        if (n->n_leaders == MAX_LEADERS)
            return NULL;
        l = &n->leaders[n->n_leaders++];
        memset(l, 0, sizeof(*l));
        l->id = id;
    }
    if (l->c != NULL && strcmp(l->url, url) != 0) {
        kq_rpc_client_close(l->c);
        l->c = NULL;
    }
    if (l->c == NULL) {
        char err[300];
        if (kq_rpc_client_open_node(url, id, n->max_msg, &l->c, err, sizeof(err)) != 0) {
            KQ_WARN("replica", "cannot open a connection to a leader", "leader=%d detail=\"%s\"",
                    id, err);
            l->c = NULL;
            return NULL;
        }
        snprintf(l->url, sizeof(l->url), "%s", url);
    }
    return l->c;
}

static int send_to(void *ctx, kq_dp_peer peer, int32_t node, const char *url, const uint8_t *data,
                   size_t len, uint32_t timeout_ms, void *token)
{
    kq_dp_nng *n = ctx;
    kq_rpc_client *c = NULL;
    if (peer == KQ_DP_PEER_BROKER && url != NULL) {
        c = leader_client_for(n, node, url);
    } else if (peer == KQ_DP_PEER_CONTROLLER) {
        for (int i = 0; i < n->n_ctl && c == NULL; i++)
            if (n->ctl_ids[i] == node)
                c = n->ctl[i];
    }
    if (c == NULL)
        return KQ_ERR_NETWORK_EXCEPTION;
    answer *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return KQ_ERR_NOMEM;
    a->n = n;
    a->token = token;
    int rc = kq_rpc_call_async(c, data, len, timeout_ms, on_answer, a);
    if (rc != 0)
        free(a);
    return rc;
}

kq_dp_net kq_dp_nng_net(kq_dp_nng *n)
{
    return (kq_dp_net){.ctx = n, .reply = reply, .drop = drop, .send = send_to};
}

void kq_dp_nng_deliver(kq_dp *dp, void *item, uint64_t now_ms)
{
    answer *a = item;
    kq_dp_on_answer(dp, a->token, a->err, a->data, a->len, now_ms);
    free(a->data);
    free(a);
}
