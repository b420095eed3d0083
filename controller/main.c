/*
 * kq-controller: a voter of the metadata quorum.
 *
 * One loop thread owns the Raft core, the store's write transaction and every pending
 * request (DESIGN.md section 3). nng callbacks only push events onto the loop queue.
 * One iteration:
 *   1. read the monotonic clock once;
 *   2. step the core with every queued event (requests, responses, timers); Writes and
 *      controller APIs go to the controller node (node.h), which folds their records into
 *      one proposal and runs the active controller's timers;
 *   3. through the Raft host (kq/raft_host.h): send the leader's Fetch answers, commit
 *      everything that must be durable in one LMDB transaction (group commit), step
 *      PERSISTED, then send the messages the steps released (only now, after the commit);
 *   4. the node answers what committed, replays committed records and activates a leader
 *      that caught up; compute the next deadline.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl_config.h"
#include "meta.h"
#include "node.h"
#include "ops.h"
#include "kq/ctl_codec.h"
#include "kq/codec.h"
#include "kq/daemon.h"
#include "kq/error.h"
#include "kq/log.h"
#include "kq/loopq.h"
#include "kq/metrics.h"
#include "kq/raft.h"
#include "kq/raft_host.h"
#include "kq/raft_net.h"
#include "kq/principal.h"
#include "kq/records.h"
#include "kq/rpc.h"
#include "kq/store.h"
#include "kq/util.h"

#define EXIT_CONFIG 2
#define MAX_TOKENS 1024
#define FETCH_MAX_BYTES (8u * 1024u * 1024u)
#define SHUTDOWN_GRACE_MS 1000
#define TOKEN_TTL_MS 30000
/* REP contexts: every request waiting in the loop (a parked write, a long-poll Fetch) holds
 * one until it is answered. Client writes may hold at most MAX_WAITING_WRITES of them, so
 * Raft traffic always finds a free context (otherwise writers waiting for a commit could
 * starve the follower Fetches that commit them). */
#define SERVER_CONTEXTS 1024
#define MAX_WAITING_WRITES 768
/* One write request's records, and one proposed batch: a batch must fit in a Fetch response
 * (FETCH_MAX_BYTES) and well inside a peer's receive limit. */
#define MAX_WRITE_BYTES (1u * 1024u * 1024u)
#define MAX_BATCH_BYTES (4u * 1024u * 1024u)

enum { EV_REQUEST = 1, EV_RESPONSE, EV_SIGNAL };

/* An incoming request handed to the core, waiting for its response. */
typedef struct token_slot {
    kq_rpc_req *req;
    uint32_t gen;
    uint64_t since_ms;
} token_slot;

/* kq_rpc_requests_total{api=...}: one series per quorum API of the table (kq/api.h), named by
 * its body, then one for every controller API together and one for anything else. */
#define API_LABEL_CONTROLLER KQ_API_COUNT
#define API_LABEL_OTHER (KQ_API_COUNT + 1)
#define N_API_LABELS (KQ_API_COUNT + 2)

/* What /metrics exports; updated by the loop thread only. */
typedef struct ctl_metrics {
    kq_metrics *reg;
    kq_metric *state[6]; /* indexed by kq_raft_role */
    kq_metric *epoch, *leader, *hw, *leo, *active, *applied, *elections, *commit_latency;
    kq_metric *leader_fetch_age;
    kq_metric *requests[N_API_LABELS], *invalid, *refused;
    /* From the committed image (KAFKA-14457: never from uncommitted state). */
    kq_metric *image_hash, *brokers_active, *brokers_fenced, *topics, *partitions, *offline,
        *imbalance, *snapshot_end;
    uint64_t image_updated_ms;
    int64_t image_updated_offset;
} ctl_metrics;

/* Proposals waiting for the high watermark, to measure commit latency. */
#define LATENCY_RING 1024
typedef struct proposal_time {
    int64_t last_offset;
    uint64_t at_ns;
} proposal_time;

typedef struct ctl {
    kq_ctl_config cfg;
    /* A TLS listener: the mapping rules for the peers' principals (NULL on plaintext, where
     * everyone is User:ANONYMOUS). check_identity: ssl.client.auth=required too, so a request
     * that speaks for a node is checked against that node's principal; otherwise, with an
     * authorizer, it needs ClusterAction on the cluster (as in Kafka). */
    kq_principal_rules *principal_rules;
    bool check_identity;
    kq_ctl_node node; /* proposals, parked answers, the image (controller/node.h) */
    ctl_metrics m;
    kq_http *http;
    /* readiness inputs (kq_ctl_ready_state), read by the HTTP thread */
    _Atomic int64_t ready_applied, ready_hw, ready_epoch;
    _Atomic int ready_role, ready_leader;
    _Atomic bool ready_answered;
    _Atomic uint64_t ready_answer_ms;     /* follower: when the leader last answered (kq_now_ms) */
    _Atomic uint64_t ready_applied_since; /* when the applied offset last moved (kq_now_ms) */
    int64_t last_applied_seen;
    uint64_t last_applied_change_ms;
    proposal_time lat[LATENCY_RING];
    size_t lat_head, lat_n;
    kq_store *store;
    kq_raft *raft;
    kq_loopq *q;
    kq_rpc_server *server;
    kq_raft_net *net;  /* requests to the other voters (kq/raft_net.h) */
    kq_raft_host host; /* drives c->raft against the store and the peers (kq/raft_host.h) */

    token_slot tokens[MAX_TOKENS];

    const kq_buf *propose_payload; /* payload for the PROPOSED batch of the current step */
    int32_t inconsistent[2 * KQ_RAFT_MAX_VOTERS]; /* peers that said INCONSISTENT_CLUSTER_ID */
    int n_inconsistent;

    /* Leader: batches appended in the open write transaction, so Fetch responses can carry
     * them before this node's own fsync (followers then write in parallel with the leader;
     * the core counts the leader's own offset only once PERSISTED). */
    kq_codec_batch tail[KQ_RAFT_MAX_BATCHES];
    size_t n_tail;

    /* KIP-853: the quorum records of the last fetched batches (for the core, until the next
     * Fetch answer), and those recovered at start (the bootstrap's and the log's) */
    kq_control_list fetched, recovered, installed;
    kq_control_list log_control; /* start-up: the log's, moved after the snapshot's */
    uint64_t control_warned_ms;  /* the last warning about a fetched quorum record */
    uint64_t dial_warned_ms;     /* the last warning about a voter that cannot be dialed */

    uint64_t now;
    int shutting_down;
    uint64_t shutdown_deadline;
    volatile sig_atomic_t stop;
} ctl;

/* Exit 2: this node's own identity is wrong (operator error), not a crash. */
static void fatal_config(const char *msg)
{
    fprintf(stderr, "kq-controller: %s\n", msg);
    KQ_ERROR("controller", "stopping: wrong identity", "detail=\"%s\"", msg);
    _exit(EXIT_CONFIG);
}

/* The metadata directory, once known: a fatal error there on a full disk says so (exit 3). */
static const char *g_data_dir;

static void fatal(const char *what, const char *detail)
{
    KQ_ERROR("controller", "fatal error, exiting", "what=\"%s\" detail=\"%s\"", what,
             detail ? detail : "");
    kq_daemon_exit_if_no_space("kq-controller", g_data_dir, "metadata.log.dir");
    _exit(1);
}

/* What to do about storage found damaged before this node served or voted. */
#define RECOVER_HINT                                                                               \
    "; this node has not served or voted with it. Recover (docs/storage.md): stop it, move the "   \
    "directory aside, run kq storage format with the same cluster id and node id (dynamic "        \
    "voters: --no-initial-controllers, never --standalone or --initial-controllers; then "         \
    "remove-controller its old directory id and add-controller it, docs/operations.md section "    \
    "5), and start it: it fetches the log from the leader"

/* ---------- nng-thread callbacks: decode nothing, push and return ---------- */

static void on_request(void *arg, kq_rpc_req *req)
{
    ctl *c = arg;
    if (kq_loopq_push(c->q, EV_REQUEST, req) != 0)
        kq_rpc_req_drop(req); /* overloaded: the client times out and retries */
}

/* ---------- helpers ---------- */

static const kq_voter_addr *find_voter(const ctl *c, int32_t id)
{
    for (int i = 0; i < c->cfg.n_voters; i++)
        if (c->cfg.voters[i].id == id)
            return &c->cfg.voters[i];
    return NULL;
}

static void leader_endpoint(const ctl *c, int32_t leader, char *buf, size_t len)
{
    const kq_voter_addr *v = find_voter(c, leader);
    buf[0] = '\0';
    if (v != NULL)
        snprintf(buf, len, "%s:%d", v->host, v->port);
}

static void reply_buf(kq_rpc_req *req, kq_buf *b)
{
    kq_rpc_reply(req, b->data, b->len);
    kq_buf_free(b);
}

static void reply_error(ctl *c, kq_rpc_req *req, uint32_t api, int err, const char *msg)
{
    kq_buf b = {0};
    if (err == KQ_ERR_CLUSTER_AUTHORIZATION_FAILED || err == KQ_ERR_TOPIC_AUTHORIZATION_FAILED) {
        char who[KQ_PRINCIPAL_MAX];
        kq_principal_of(c->principal_rules, kq_rpc_req_peer(req), who, sizeof who);
        kq_metric_inc(c->m.refused);
        kq_log_refusal("controller", who, msg);
    }
    char ep[300];
    int32_t leader = c->host.st.leader_id;
    leader_endpoint(c, leader, ep, sizeof(ep));
    if (kq_codec_encode_error_response(api, err, msg, leader, c->host.st.epoch, ep[0] ? ep : NULL,
                                       &b) != 0) {
        kq_rpc_req_drop(req);
        return;
    }
    reply_buf(req, &b);
}

static int is_leader(const ctl *c)
{
    return c->host.st.role == KQ_RAFT_LEADER;
}

static uint64_t token_make(ctl *c, kq_rpc_req *req)
{
    for (uint32_t i = 0; i < MAX_TOKENS; i++) {
        if (c->tokens[i].req == NULL) {
            c->tokens[i].req = req;
            c->tokens[i].gen++;
            c->tokens[i].since_ms = c->now;
            return ((uint64_t)c->tokens[i].gen << 32) | (i + 1);
        }
    }
    return 0;
}

static kq_rpc_req *token_take(ctl *c, uint64_t token)
{
    uint32_t idx = (uint32_t)(token & 0xffffffffu);
    uint32_t gen = (uint32_t)(token >> 32);
    if (idx == 0 || idx > MAX_TOKENS)
        return NULL;
    token_slot *t = &c->tokens[idx - 1];
    if (t->req == NULL || t->gen != gen)
        return NULL;
    kq_rpc_req *req = t->req;
    t->req = NULL;
    return req;
}

/* ---------- applying the core's updates ---------- */

static void tail_add(ctl *c, const kq_raft_batch *b, const uint8_t *data, size_t len)
{
    if (c->n_tail == KQ_RAFT_MAX_BATCHES)
        return; /* served from the store after the commit instead */
    uint8_t *copy = malloc(len ? len : 1);
    if (copy == NULL)
        return;
    memcpy(copy, data, len);
    c->tail[c->n_tail++] =
        (kq_codec_batch){b->base_offset, b->epoch, b->count, kq_crc32c(0, data, len), copy, len};
}

static void tail_clear(ctl *c)
{
    for (size_t i = 0; i < c->n_tail; i++)
        free((void *)c->tail[i].records);
    c->n_tail = 0;
}

/* This leader's own control batch: the LeaderChange record (leader_change) and the quorum
 * records the core gives (KIP-853: a voter change, or the bootstrap set the first leader of a
 * dynamic quorum writes after its LeaderChange). */
static void write_control(ctl *c, const kq_raft_batch *b, bool leader_change)
{
    kq_buf rec = {0};
    char why[256];
    if (leader_change && kq_ctl_node_leader_change(&c->node, b->base_offset, c->now, &rec) != 0)
        fatal("encode", "LeaderChange record");
    if (kq_control_append_batch(&rec, b, why, sizeof why) != 0)
        fatal("encode quorum records", why);
    if (c->host.disk.append(c->host.disk.ctx, b->base_offset, b->epoch, b->count, rec.data,
                            rec.len) != 0)
        fatal("store append", leader_change ? "LeaderChange batch" : "Voters batch");
    tail_add(c, b, rec.data, rec.len);
    kq_buf_free(&rec);
}

static void log_role(ctl *c, const kq_raft_update *u)
{
    KQ_INFO("raft", "state changed", "state=%s epoch=%d leader=%d", kq_raft_role_name(u->role),
            u->epoch, u->leader_id);
}

/* kq_raft_host_ops: the quorum records of the snapshot install_snapshot just loaded. */
static size_t installed_control(void *arg, const kq_raft_control **out)
{
    ctl *c = arg;
    *out = c->installed.c;
    return c->installed.n;
}

/* kq_raft_host_ops: the quorum records of fetched batches, for the core. */
static int fetched_control(void *arg, kq_raft_batch *batches, size_t n)
{
    ctl *c = arg;
    int rc = kq_control_list_read_fetched(&c->fetched, batches, n);
    if (rc != 0 && (c->control_warned_ms == 0 || c->now >= c->control_warned_ms + 60000)) {
        c->control_warned_ms = c->now; /* once a minute: the core retries every back-off */
        KQ_WARN("raft", "a fetched quorum record does not decode; fetching again", "error=%s",
                kq_err_name(rc));
    }
    return rc;
}

/* With dynamic voters (KIP-853) the voter set in force is the core's: keep the address book
 * (cfg.voters: Vote senders, DescribeQuorum, leader hints) and the dialed peers in step. */
static void sync_voters(ctl *c)
{
    int64_t at;
    const kq_voter_set *s = kq_raft_voters(c->raft, &at);
    char err[300];
    if (at == -2 || s == NULL)
        return; /* static voters: cfg.voters is the set */
    for (int i = 0; i < s->n; i++) {
        kq_voter_addr a = {.id = s->v[i].key.id, .port = s->v[i].port};
        snprintf(a.host, sizeof a.host, "%s", s->v[i].host);
        if (a.id != c->cfg.node_id && a.port > 0 && c->net &&
            kq_raft_net_set_peer(c->net, &a, err, sizeof err) != 0 &&
            (c->dial_warned_ms == 0 || c->now >= c->dial_warned_ms + 60000)) {
            c->dial_warned_ms = c->now; /* tried at every step: said once a minute */
            KQ_WARN("raft", "cannot dial a voter", "voter=%d error=\"%s\"", a.id, err);
        }
        c->cfg.voters[i] = a;
    }
    c->cfg.n_voters = s->n;
}

/* kq_raft_host_ops: this node's own batches, the LeaderChange record and the proposals. */
static void append_own(void *arg, const kq_raft_batch *b)
{
    ctl *c = arg;
    if (b->kind == KQ_RAFT_BATCH_LEADER_CHANGE || b->kind == KQ_RAFT_BATCH_VOTERS) {
        write_control(c, b, b->kind == KQ_RAFT_BATCH_LEADER_CHANGE);
    } else {
        if (c->propose_payload == NULL)
            fatal("internal", "proposed batch without payload");
        if (c->host.disk.append(c->host.disk.ctx, b->base_offset, b->epoch, b->count,
                                c->propose_payload->data, c->propose_payload->len) != 0)
            fatal("store append", "proposed batch");
        tail_add(c, b, c->propose_payload->data, c->propose_payload->len);
    }
}

static void after_step(void *arg, const kq_raft_update *u)
{
    ctl *c = arg;
    sync_voters(c);
    if (!u->role_changed)
        return;
    log_role(c, u);
    if (u->role == KQ_RAFT_CANDIDATE)
        kq_metric_inc(c->m.elections);
    kq_ctl_node_after_step(&c->node, u, c->now);
    if (u->role != KQ_RAFT_LEADER)
        c->lat_n = 0;
}

/* After a commit: the batches in the tail are on disk, the store serves them from now on. */
static void persisted(void *arg, int64_t durable_end)
{
    (void)durable_end;
    tail_clear(arg);
}

static int send_request(void *arg, const kq_raft_msg *m)
{
    ctl *c = arg;
    return kq_raft_net_send(c->net, m, kq_store_identity_of(c->store)->cluster_id,
                            c->cfg.raft.request_timeout_ms);
}

static void host_fatal(void *arg, const char *what, const char *detail)
{
    (void)arg;
    fatal(what, detail);
}

/* Returns 0, or the core's error for an event it rejected (then *u is empty). */
static int step(ctl *c, kq_raft_event *ev, kq_raft_update *u)
{
    c->host.now = c->now;
    int rc = kq_raft_host_step(&c->host, ev, u);
    if (rc != 0) {
        KQ_WARN("raft", "event rejected by the core", "type=%d error=%s", (int)ev->type,
                kq_err_name(rc));
        if (ev->type == KQ_RAFT_EV_PROPOSE)
            u->propose_error = rc;
    }
    return rc;
}

/* ---------- kq_ctl_node_ops: the controller node's hands ---------- */

static int node_propose(void *arg, const kq_buf *payload, int32_t count, int64_t *base,
                        int32_t *epoch)
{
    ctl *c = arg;
    kq_raft_event ev = {.type = KQ_RAFT_EV_PROPOSE, .u.propose_count = count};
    kq_raft_update u;
    c->propose_payload = payload;
    step(c, &ev, &u);
    c->propose_payload = NULL;
    *base = u.propose_base_offset;
    *epoch = u.propose_epoch;
    if (u.propose_error == 0 && is_leader(c) && c->lat_n < LATENCY_RING)
        c->lat[(c->lat_head + c->lat_n++) % LATENCY_RING] =
            (proposal_time){*base + count - 1, kq_now_ns()};
    return u.propose_error;
}

static int node_read_committed(void *arg, int64_t from, int64_t to, kq_ctl_batch_fn fn,
                               void *fn_arg)
{
    ctl *c = arg;
    return kq_store_read(c->store, from, to, FETCH_MAX_BYTES, fn, fn_arg);
}

static void node_reply(void *arg, void *req, kq_buf *resp, int64_t wait_offset)
{
    (void)arg;
    (void)wait_offset;
    reply_buf(req, resp);
}

static void node_reply_error(void *arg, void *req, uint32_t api, int err, const char *msg)
{
    reply_error(arg, req, api, err, msg);
}

/* kq features upgrade --feature kraft.version=1: the core writes the first VotersRecord once
 * every static voter has reported its directory id and endpoint (UpdateRaftVoter). */
static int node_upgrade_kraft(void *arg, int16_t level, bool validate_only, char *msg,
                              size_t msglen)
{
    ctl *c = arg;
    kq_raft_event ev = {.type = KQ_RAFT_EV_UPGRADE_KRAFT};
    kq_raft_update u;
    ev.u.upgrade.level = level;
    ev.u.upgrade.validate_only = validate_only;
    if (step(c, &ev, &u) != 0) {
        snprintf(msg, msglen, "the Raft core refused the upgrade event");
        return KQ_ERR_INVALID_REQUEST;
    }
    snprintf(msg, msglen, "%s", u.upgrade_error ? u.upgrade_message : "");
    if (u.upgrade_error == 0 && !validate_only)
        KQ_INFO("raft", "kraft.version upgrade", "level=%d", (int)level);
    return u.upgrade_error;
}

static void node_refused(void *arg, const char *principal, int32_t items, const char *msg)
{
    ctl *c = arg;
    kq_metric_add(c->m.refused, (double)items);
    kq_log_refusal("controller", principal, msg);
}

static void node_drop(void *arg, void *req)
{
    (void)arg;
    kq_rpc_req_drop(req);
}

static void node_event(void *arg, kq_ctl_node_event ev, int64_t value)
{
    ctl *c = arg;
    const kq_image *img = c->node.meta.img;
    switch (ev) {
    case KQ_CTL_NODE_ACTIVATED:
        KQ_INFO("controller", "became the active controller", "epoch=%d applied_end=%lld",
                c->host.st.epoch, (long long)c->node.meta.applied_end);
        break;
    case KQ_CTL_NODE_DEACTIVATED:
        KQ_INFO("controller", "no longer the active controller", "epoch=%d", (int)value);
        break;
    case KQ_CTL_NODE_FEATURES_FINALIZED:
        KQ_INFO("controller", "finalized the feature levels of a new cluster",
                "metadata.version=%d eligible.leader.replicas.version=%d",
                (int)kq_image_feature(img, "metadata.version"),
                (int)kq_image_feature(img, "eligible.leader.replicas.version"));
        break;
    case KQ_CTL_NODE_ELR_OFF:
        KQ_WARN("controller", "ELR is off: eligible.leader.replicas.version is 0",
                "hint=\"kq features upgrade --feature eligible.leader.replicas.version=1 "
                "turns it on; eligible.leader.replicas.enable only sets a new cluster's "
                "level\"");
        break;
    case KQ_CTL_NODE_FENCED:
        KQ_WARN("controller", "fencing broker: session expired", "broker=%d", (int)value);
        break;
    case KQ_CTL_NODE_APPLIED:
        break;
    }
}

static void node_fatal(void *arg, const char *what, const char *detail)
{
    (void)arg;
    fatal(what, detail);
}

/* ---------- requests ---------- */

static void describe(ctl *c, kq_rpc_req *req)
{
    kq_quorum_description *d = calloc(1, sizeof(*d));
    kq_buf b = {0};
    int64_t wall = kq_wall_ms();
    if (d == NULL) {
        kq_rpc_req_drop(req);
        return;
    }
    if (!is_leader(c)) {
        int err =
            c->host.st.leader_id >= 0 ? KQ_ERR_NOT_LEADER_OR_FOLLOWER : KQ_ERR_LEADER_NOT_AVAILABLE;
        reply_error(c, req, KQ_API_DESCRIBE_QUORUM, err,
                    c->host.st.leader_id >= 0 ? "ask the leader" : "no leader is known");
        free(d);
        return;
    }
    snprintf(d->cluster_id, sizeof(d->cluster_id), "%s",
             kq_store_identity_of(c->store)->cluster_id);
    d->leader_id = c->host.st.leader_id;
    d->leader_epoch = c->host.st.epoch;
    d->high_watermark = c->host.st.high_watermark;
    for (int pass = 0; pass < 2; pass++) {
        const kq_raft_replica *src = pass == 0 ? c->host.st.voters : c->host.st.observers;
        int n = pass == 0 ? c->host.st.n_voters : c->host.st.n_observers;
        kq_quorum_replica *dst = pass == 0 ? d->voters : d->observers;
        for (int i = 0; i < n; i++) {
            dst[i].id = src[i].id;
            dst[i].log_end_offset = src[i].log_end_offset;
            dst[i].last_fetch_timestamp =
                src[i].last_fetch_ms ? wall - (int64_t)(c->now - src[i].last_fetch_ms) : -1;
            dst[i].last_caught_up_timestamp =
                src[i].last_caught_up_ms ? wall - (int64_t)(c->now - src[i].last_caught_up_ms) : -1;
            if (src[i].id == c->cfg.node_id) {
                snprintf(dst[i].directory_id, sizeof(dst[i].directory_id), "%s",
                         kq_store_identity_of(c->store)->directory_id);
            } else if (!kq_uuid_is_zero(src[i].directory_id)) {
                /* a voter's from the set in force, an observer's from its Fetch (KIP-853) */
                kq_uuid_format(src[i].directory_id, dst[i].directory_id);
            }
        }
        if (pass == 0)
            d->n_voters = n;
        else
            d->n_observers = n;
    }
    for (int i = 0; i < c->cfg.n_voters && i < KQ_RAFT_MAX_VOTERS; i++) {
        kq_quorum_node *nd = &d->nodes[d->n_nodes++];
        nd->id = c->cfg.voters[i].id;
        snprintf(nd->listener, sizeof(nd->listener), "%s", c->cfg.advertised.name);
        snprintf(nd->host, sizeof(nd->host), "%s", c->cfg.voters[i].host);
        nd->port = c->cfg.voters[i].port;
    }
    if (kq_codec_encode_describe_response(d, &b) != 0)
        kq_rpc_req_drop(req);
    else
        reply_buf(req, &b);
    free(d);
}

static void count_request(ctl *c, uint32_t api)
{
    const kq_api_info *info = kq_api_find(api);
    int i = info == NULL                           ? API_LABEL_OTHER
            : info->kind == KQ_API_KIND_QUORUM     ? (int)(info - kq_apis)
            : info->kind == KQ_API_KIND_CONTROLLER ? API_LABEL_CONTROLLER
                                                   : API_LABEL_OTHER;
    kq_metric_inc(c->m.requests[i]);
}

/* Step a Raft request into the core; its answer comes back through send_response. */
static void receive_request(ctl *c, const kq_request *r, uint64_t token)
{
    kq_raft_msg m = r->raft;
    m.token = token;
    m.to = c->cfg.node_id;
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE, .u.msg = &m};
    kq_raft_update u;
    if (step(c, &ev, &u) != 0) {
        kq_rpc_req *back = token_take(c, token);
        if (back != NULL)
            reply_error(c, back, r->api_key, KQ_ERR_INVALID_REQUEST,
                        "request rejected by the Raft core");
    }
}

/* Op on the cluster resource for this request's principal: true when allowed; otherwise
 * answered CLUSTER_AUTHORIZATION_FAILED. */
static bool cluster_allowed(ctl *c, kq_rpc_req *req, uint32_t api, const char *principal,
                            kq_acl_operation op)
{
    char why[1000];
    if (!kq_op_authorize(&c->cfg.authz, c->node.meta.img, c->principal_rules ? principal : NULL, op,
                         KQ_ACL_RESOURCE_CLUSTER, KQ_ACL_CLUSTER_NAME, why, sizeof why))
        return true;
    reply_error(c, req, api, KQ_ERR_CLUSTER_AUTHORIZATION_FAILED, why);
    return false;
}

/* A Raft request for the core, answered through send_response by its token. */
static void to_core(ctl *c, kq_rpc_req *req, const kq_request *r)
{
    uint64_t token = token_make(c, req);
    if (token == 0) {
        reply_error(c, req, r->api_key, KQ_ERR_BROKER_NOT_AVAILABLE, "too many requests");
        return;
    }
    receive_request(c, r, token);
}

static void handle_request(ctl *c, kq_rpc_req *req)
{
    kq_request r;
    char err[256];
    memset(&r, 0, sizeof(r));
    int rc =
        kq_codec_decode_request(kq_rpc_req_data(req), kq_rpc_req_len(req), &r, err, sizeof(err));
    count_request(c, r.api_key);
    if (rc != 0) {
        kq_metric_inc(c->m.invalid);
        KQ_WARN("rpc", "rejected malformed request", "error=%s detail=\"%s\"", kq_err_name(rc),
                err);
        reply_error(c, req, r.api_key, rc == KQ_ERR_MALFORMED ? KQ_ERR_INVALID_REQUEST : rc, err);
        goto out;
    }
    if (r.cluster_id[0] != '\0' &&
        strcmp(r.cluster_id, kq_store_identity_of(c->store)->cluster_id) != 0) {
        snprintf(err, sizeof(err), "request for cluster %s, this is cluster %s", r.cluster_id,
                 kq_store_identity_of(c->store)->cluster_id);
        reply_error(c, req, r.api_key, KQ_ERR_INCONSISTENT_CLUSTER_ID, err);
        goto out;
    }
    char principal[KQ_PRINCIPAL_MAX] = "";
    if (c->principal_rules)
        kq_principal_of(c->principal_rules, kq_rpc_req_peer(req), principal, sizeof principal);
    switch (r.api_key) {
    case KQ_API_VOTE:
    case KQ_API_BEGIN_QUORUM_EPOCH:
    case KQ_API_END_QUORUM_EPOCH:
    case KQ_API_FETCH:
    case KQ_API_FETCH_SNAPSHOT:
    case KQ_API_UPDATE_RAFT_VOTER: {
        bool fetch = r.api_key == KQ_API_FETCH || r.api_key == KQ_API_FETCH_SNAPSHOT;
        /* With dynamic voters this node's set may be stale (it was away while voters
         * changed): the core decides who may ask for a vote or lead (Kafka). */
        bool dynamic = c->host.st.kraft_version >= 1 || c->cfg.raft.n_voters == 0;
        if (r.sender_id == c->cfg.node_id || r.sender_id < 0 ||
            (!fetch && !dynamic && find_voter(c, r.sender_id) == NULL)) {
            snprintf(err, sizeof(err), "sender id %d is not allowed for api %u", r.sender_id,
                     r.api_key);
            reply_error(c, req, r.api_key, KQ_ERR_INVALID_REQUEST, err);
            goto out;
        }
        /* A vote is asked for by its candidate, not on its behalf. */
        if (r.api_key == KQ_API_VOTE && r.raft.u.vote_req.candidate_id != r.sender_id) {
            snprintf(err, sizeof(err), "vote for candidate %d sent by node %d",
                     r.raft.u.vote_req.candidate_id, r.sender_id);
            reply_error(c, req, r.api_key, KQ_ERR_INVALID_REQUEST, err);
            goto out;
        }
        /* A Raft request speaks for the node it names (as a voter when the id is one): only
         * that node's certificate may send it; where nobody is identified, an authorizer
         * wants ClusterAction. Refused before the core sees it. */
        char why[1000];
        if (c->check_identity &&
            !kq_principal_is_node(c->cfg.ssl.principal_template, principal, r.sender_id)) {
            snprintf(why, sizeof(why), "principal %s may not act for node %d (%s needs %s)",
                     principal, r.sender_id, kq_api_find(r.api_key)->name,
                     c->cfg.ssl.principal_template);
            reply_error(c, req, r.api_key, KQ_ERR_CLUSTER_AUTHORIZATION_FAILED, why);
            goto out;
        }
        if (!c->check_identity &&
            !cluster_allowed(c, req, r.api_key, principal, KQ_ACL_OP_CLUSTER_ACTION))
            goto out;
        /* a leader this node may not know yet says where it is reached */
        if (dynamic && r.api_key == KQ_API_BEGIN_QUORUM_EPOCH && r.leader_endpoint.host[0] &&
            r.leader_endpoint.port > 0) {
            kq_voter_addr a = {.id = r.sender_id, .port = r.leader_endpoint.port};
            char why2[300];
            snprintf(a.host, sizeof a.host, "%s", r.leader_endpoint.host);
            if (kq_raft_net_set_peer(c->net, &a, why2, sizeof why2) != 0)
                KQ_WARN("raft", "cannot dial the leader", "leader=%d error=\"%s\"", a.id, why2);
        }
        to_core(c, req, &r);
        break;
    }
    case KQ_API_ADD_RAFT_VOTER:
    case KQ_API_REMOVE_RAFT_VOTER:
        /* kq metadata-quorum add-controller / remove-controller: Alter on the cluster, as
         * Kafka's AddRaftVoter and RemoveRaftVoter */
        if (cluster_allowed(c, req, r.api_key, principal, KQ_ACL_OP_ALTER))
            to_core(c, req, &r);
        break;
    case KQ_API_DESCRIBE_QUORUM:
        if (cluster_allowed(c, req, r.api_key, principal, KQ_ACL_OP_DESCRIBE))
            describe(c, req);
        break;
    default:
        if (kq_ctl_node_request(&c->node, req, &r, c->principal_rules ? principal : NULL, c->now) !=
            0)
            kq_metric_inc(c->m.invalid);
        break;
    }
out:
    kq_request_free(&r);
}

/* A directory formatted with another cluster id: every peer rejects our requests. When a
 * majority of the voters (this node excluded) has said so, this node is the odd one out: stop
 * with exit 2 instead of disturbing the quorum. A correctly formatted node hears it from the
 * odd node only, which is never a majority. */
static void note_inconsistent_cluster(ctl *c, int32_t peer_id, const char *detail)
{
    for (int i = 0; i < c->n_inconsistent; i++)
        if (c->inconsistent[i] == peer_id)
            return;
    if (c->n_inconsistent < 2 * KQ_RAFT_MAX_VOTERS)
        c->inconsistent[c->n_inconsistent++] = peer_id;
    KQ_WARN("controller", "peer rejected our cluster id", "peer=%d detail=\"%s\"", peer_id, detail);
    /* Voters count against the majority of the set; bootstrap servers (ids < 0, possibly a
     * voter counted again) only when they all say so and no voter set is known. */
    int voters = 0, boot = 0;
    for (int i = 0; i < c->n_inconsistent; i++)
        voters += c->inconsistent[i] >= 0, boot += c->inconsistent[i] < 0;
    if ((c->cfg.n_voters > 0 && voters >= c->cfg.n_voters / 2 + 1) ||
        (c->cfg.n_voters == 0 && c->cfg.raft.n_bootstrap > 0 && boot >= c->cfg.raft.n_bootstrap)) {
        char msg[1200];
        snprintf(msg, sizeof(msg),
                 "cluster id %s in %.300s does not match the cluster id of the other controllers "
                 "(%.256s); re-format this node's metadata.log.dir with the quorum's cluster id "
                 "(kq storage format --cluster-id <id>)",
                 kq_store_identity_of(c->store)->cluster_id, c->cfg.log_dir, detail);
        fatal_config(msg);
    }
}

static void handle_response(ctl *c, kq_raft_net_item *item)
{
    kq_raft_net_answer a;
    kq_raft_net_decode(item, c->cfg.node_id, &a);
    if (a.transport_error != 0 && a.transport_error != KQ_ERR_REQUEST_TIMED_OUT &&
        a.transport_error != KQ_ERR_NETWORK_EXCEPTION)
        KQ_WARN("rpc", "bad response from peer", "peer=%d error=%s detail=\"%s\"", a.peer,
                kq_err_name(a.transport_error), a.message);
    if (a.peer_error == KQ_ERR_INCONSISTENT_CLUSTER_ID)
        note_inconsistent_cluster(c, a.peer, a.message);
    kq_raft_net_learn_leader(c->net, c->cfg.bootstrap, c->cfg.raft.n_bootstrap, &a);
    kq_raft_event e = {.type = KQ_RAFT_EV_RECEIVE, .u.msg = &a.msg};
    kq_raft_update u;
    step(c, &e, &u);
    kq_raft_net_answer_free(&a);
}

/* ---------- sending ---------- */

typedef struct batch_vec {
    kq_codec_batch *b;
    uint8_t **bufs;
    size_t n, cap;
} batch_vec;

static int collect_batch(void *arg, int64_t base, int32_t epoch, int32_t count, uint32_t crc,
                         const uint8_t *records, size_t len)
{
    batch_vec *v = arg;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        kq_codec_batch *nb = realloc(v->b, cap * sizeof(*nb));
        if (nb == NULL)
            return 1;
        v->b = nb;
        uint8_t **nbufs = realloc(v->bufs, cap * sizeof(*nbufs));
        if (nbufs == NULL)
            return 1;
        v->bufs = nbufs;
        v->cap = cap;
    }
    uint8_t *copy = malloc(len ? len : 1);
    if (copy == NULL)
        return 1;
    memcpy(copy, records, len);
    v->bufs[v->n] = copy;
    v->b[v->n] = (kq_codec_batch){base, epoch, count, crc, copy, len};
    v->n++;
    return v->n >= KQ_RAFT_MAX_BATCHES;
}

/* Leader: the bytes [position, position + len) of a snapshot file, for FetchSnapshot. */
static void send_snapshot_chunk(ctl *c, kq_rpc_req *req, const kq_raft_msg *m)
{
    kq_raft_msg out = *m;
    kq_buf b = {0};
    uint8_t *buf = NULL;
    size_t n = 0;
    if (m->error == 0 && m->u.fetch_snapshot_resp.len > 0) {
        buf = malloc(m->u.fetch_snapshot_resp.len);
        if (buf == NULL)
            fatal("memory", "snapshot chunk");
        int rc = kq_store_snapshot_read(c->store, m->u.fetch_snapshot_resp.snapshot_id,
                                        m->u.fetch_snapshot_resp.position, buf,
                                        m->u.fetch_snapshot_resp.len, &n);
        if (rc != 0) {
            free(buf);
            reply_error(c, req, KQ_API_FETCH_SNAPSHOT, rc, kq_err_message(rc));
            return;
        }
    }
    out.u.fetch_snapshot_resp.data = buf;
    out.u.fetch_snapshot_resp.len = n;
    if (kq_codec_encode_raft_response(&out, NULL, 0, &b) != 0)
        kq_rpc_req_drop(req);
    else
        reply_buf(req, &b);
    free(buf);
}

static void send_response(void *arg, const kq_raft_msg *m)
{
    ctl *c = arg;
    kq_rpc_req *req = token_take(c, m->token);
    batch_vec v = {0};
    kq_buf b = {0};
    if (req == NULL)
        return; /* already answered or expired */
    if (m->type == KQ_RAFT_FETCH_SNAPSHOT_RESP) {
        send_snapshot_chunk(c, req, m);
        return;
    }
    if ((m->type == KQ_RAFT_ADD_VOTER_RESP || m->type == KQ_RAFT_REMOVE_VOTER_RESP ||
         m->type == KQ_RAFT_UPDATE_VOTER_RESP || m->type == KQ_RAFT_FETCH_RESP) &&
        m->error == KQ_ERR_NOT_LEADER_OR_FOLLOWER && m->leader_id >= 0) {
        /* with the leader's endpoint, so a tool, or a node that found this one through
         * controller.quorum.bootstrap.servers, can follow the hint */
        uint32_t api = m->type == KQ_RAFT_ADD_VOTER_RESP      ? KQ_API_ADD_RAFT_VOTER
                       : m->type == KQ_RAFT_REMOVE_VOTER_RESP ? KQ_API_REMOVE_RAFT_VOTER
                       : m->type == KQ_RAFT_UPDATE_VOTER_RESP ? KQ_API_UPDATE_RAFT_VOTER
                                                              : KQ_API_FETCH;
        reply_error(c, req, api, m->error,
                    api == KQ_API_FETCH ? "not the leader" : m->u.voter_resp.error_message);
        return;
    }
    int64_t from = m->u.fetch_resp.records_from, to = m->u.fetch_resp.records_to;
    if (m->type == KQ_RAFT_FETCH_RESP && m->error == 0 && to > from) {
        int64_t next = from;
        if (from < c->host.durable_end) {
            int rc =
                kq_store_read(c->store, from, to < c->host.durable_end ? to : c->host.durable_end,
                              FETCH_MAX_BYTES, collect_batch, &v);
            if (rc == KQ_ERR_INVALID_REQUEST || rc == KQ_ERR_OFFSET_OUT_OF_RANGE) {
                /* A fetch offset inside a batch: only a broken or hostile client sends it. */
                KQ_WARN("raft", "fetch offset is not a batch boundary", "replica=%d offset=%lld",
                        m->to, (long long)from);
                reply_error(c, req, KQ_API_FETCH, KQ_ERR_INVALID_REQUEST,
                            "fetch offset is not a batch boundary");
                goto out;
            }
            if (rc != 0)
                fatal("store read", kq_err_message(rc));
            if (v.n > 0)
                next = v.b[v.n - 1].base_offset + v.b[v.n - 1].count;
        }
        /* Continue with batches not yet durable here, while they stay contiguous. */
        for (size_t i = 0; i < c->n_tail && next < to && v.n < KQ_RAFT_MAX_BATCHES; i++) {
            const kq_codec_batch *t = &c->tail[i];
            if (t->base_offset != next)
                continue;
            size_t before = v.n;
            collect_batch(&v, t->base_offset, t->epoch, t->count, t->crc32c, t->records, t->len);
            if (v.n == before)
                break;
            next += t->count;
        }
        if (v.n == 0 && from >= c->host.durable_end) {
            KQ_WARN("raft", "fetch offset is not a batch boundary", "replica=%d offset=%lld", m->to,
                    (long long)from);
            reply_error(c, req, KQ_API_FETCH, KQ_ERR_INVALID_REQUEST,
                        "fetch offset is not a batch boundary");
            goto out;
        }
    }
    if (kq_codec_encode_raft_response(m, v.b, v.n, &b) != 0)
        kq_rpc_req_drop(req);
    else
        reply_buf(req, &b);
out:
    for (size_t i = 0; i < v.n; i++)
        free(v.bufs[i]);
    free(v.bufs);
    free(v.b);
}

/* ---------- writes ---------- */

static void observe_commits(ctl *c)
{
    uint64_t now = kq_now_ns();
    while (c->lat_n > 0 && c->host.hw > c->lat[c->lat_head].last_offset) {
        kq_metric_observe(c->m.commit_latency, (double)(now - c->lat[c->lat_head].at_ns) / 1e9);
        c->lat_head = (c->lat_head + 1) % LATENCY_RING;
        c->lat_n--;
    }
}

static void expire_tokens(ctl *c)
{
    for (int i = 0; i < MAX_TOKENS; i++) {
        if (c->tokens[i].req != NULL && c->now > c->tokens[i].since_ms + TOKEN_TTL_MS) {
            kq_rpc_req_drop(c->tokens[i].req);
            c->tokens[i].req = NULL;
        }
    }
}

/* ---------- metrics ---------- */

/* Readiness (kq_ctl_readiness, controller/node.h): the loop publishes its inputs in
 * metrics_update, the HTTP thread decides at the time of the question, so a loop that stopped
 * publishing cannot stay ready. Writes the reason only; kq_http adds "not ready: ". */
static int ready_cb(void *arg, char *reason, size_t len)
{
    ctl *c = arg;
    kq_ctl_ready_state r = {.role = (kq_raft_role)c->ready_role,
                            .leader_id = c->ready_leader,
                            .epoch = (int32_t)c->ready_epoch,
                            .leader_answered = c->ready_answered,
                            .leader_answer_ms = c->ready_answer_ms,
                            .hw = c->ready_hw,
                            .applied = c->ready_applied,
                            .applied_since_ms = c->ready_applied_since};
    return kq_ctl_readiness(&r, kq_now_ms(), c->cfg.raft.fetch_timeout_ms, reason, len);
}

static int metrics_init(ctl *c, char *err, size_t errlen)
{
    static const double bounds[] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                    0.05,   0.1,   0.25,  0.5,   1,    2.5};
    ctl_metrics *m = &c->m;
    m->reg = kq_metrics_new();
    if (m->reg == NULL)
        goto nomem;
    for (int i = 0; i < 6; i++) {
        char labels[64];
        snprintf(labels, sizeof(labels), "state=\"%s\"", kq_raft_role_name((kq_raft_role)i));
        m->state[i] = kq_metrics_gauge_int(m->reg, "kq_raft_state",
                                           "1 for the Raft state this node is in", labels);
    }
    m->epoch = kq_metrics_gauge_int(m->reg, "kq_raft_epoch", "Current Raft epoch", NULL);
    m->leader = kq_metrics_gauge_int(m->reg, "kq_raft_leader_id", "Known leader, -1 if none", NULL);
    m->hw = kq_metrics_gauge_int(m->reg, "kq_raft_high_watermark",
                                 "Committed offset (exclusive), -1 if unknown", NULL);
    m->leo = kq_metrics_gauge_int(m->reg, "kq_raft_log_end_offset", "Log end offset", NULL);
    m->active =
        kq_metrics_gauge_int(m->reg, "kq_controller_active", "1 on the active controller", NULL);
    m->applied = kq_metrics_gauge_int(m->reg, "kq_metadata_last_applied_offset",
                                      "Last metadata offset applied", NULL);
    m->leader_fetch_age = kq_metrics_gauge(
        m->reg, "kq_raft_leader_fetch_age_seconds",
        "Seconds since the leader this node follows last answered its Fetch: 0 on the leader, "
        "-1 when it follows no leader that has answered (none known, or electing)",
        NULL);
    m->elections = kq_metrics_counter(m->reg, "kq_raft_elections_total",
                                      "Elections this node started as a candidate", NULL);
    m->commit_latency =
        kq_metrics_histogram(m->reg, "kq_raft_commit_latency_seconds",
                             "Time from proposing a batch to its commit, on the leader", bounds,
                             (int)(sizeof(bounds) / sizeof(bounds[0])));
    for (int i = 0; i < N_API_LABELS; i++) {
        const char *label = i == API_LABEL_CONTROLLER               ? "controller"
                            : i == API_LABEL_OTHER                  ? "other"
                            : kq_apis[i].kind == KQ_API_KIND_QUORUM ? kq_apis[i].body
                                                                    : NULL;
        char labels[64];

        if (label == NULL)
            continue; /* a controller or data API: counted under "controller" or "other" */
        snprintf(labels, sizeof(labels), "api=\"%s\"", label);
        m->requests[i] = kq_metrics_counter(m->reg, "kq_rpc_requests_total",
                                            "Requests received, by API", labels);
        if (m->requests[i] == NULL)
            goto nomem;
    }
    m->invalid = kq_metrics_counter(m->reg, "kq_rpc_invalid_requests_total",
                                    "Requests rejected as malformed or invalid", NULL);
    m->refused =
        kq_metrics_counter(m->reg, "kq_authorization_failures_total",
                           "Requests refused for their sender (CLUSTER_AUTHORIZATION_FAILED or "
                           "TOPIC_AUTHORIZATION_FAILED): not the node it claims, or not authorized",
                           NULL);
    m->image_hash = kq_metrics_gauge_int(
        m->reg, "kq_metadata_image_hash",
        "Hash of the committed metadata image content (low 48 bits); equal on every controller "
        "that applied the same records",
        NULL);
    m->brokers_active = kq_metrics_gauge_int(m->reg, "kq_controller_brokers",
                                             "Registered brokers by state", "state=\"active\"");
    m->brokers_fenced = kq_metrics_gauge_int(m->reg, "kq_controller_brokers",
                                             "Registered brokers by state", "state=\"fenced\"");
    m->topics = kq_metrics_gauge_int(m->reg, "kq_controller_topics", "Topics", NULL);
    m->partitions = kq_metrics_gauge_int(m->reg, "kq_controller_partitions", "Partitions", NULL);
    m->offline = kq_metrics_gauge_int(m->reg, "kq_controller_offline_partitions",
                                      "Partitions without a leader", NULL);
    m->imbalance = kq_metrics_gauge_int(m->reg, "kq_controller_preferred_replica_imbalance",
                                        "Partitions whose leader is not their first replica", NULL);
    m->snapshot_end = kq_metrics_gauge_int(m->reg, "kq_metadata_snapshot_end_offset",
                                           "End offset of the latest snapshot (0: none)", NULL);
    m->image_updated_offset = -1;
    return 0;
nomem:
    snprintf(err, errlen, "out of memory");
    return KQ_ERR_NOMEM;
}

static void metrics_update(ctl *c)
{
    const kq_raft_status *st = &c->host.st;
    for (int i = 0; i < 6; i++)
        kq_metric_set_int(c->m.state[i], (int)st->role == i);
    kq_metric_set_int(c->m.epoch, st->epoch);
    kq_metric_set_int(c->m.leader, st->leader_id);
    kq_metric_set_int(c->m.hw, st->high_watermark);
    kq_metric_set_int(c->m.leo, st->log_end_offset);
    kq_metric_set_int(c->m.active, st->role == KQ_RAFT_LEADER);
    /* Committed and applied: below both the image's applied end and the high watermark. */
    int64_t applied = c->node.meta.applied_end < c->host.hw ? c->node.meta.applied_end : c->host.hw;
    kq_metric_set_int(c->m.applied, applied - 1);
    if (applied != c->last_applied_seen) {
        c->last_applied_seen = applied;
        c->last_applied_change_ms = c->now;
    }
    int64_t age = kq_raft_leader_answer_age_ms(st, c->now);
    kq_metric_set(c->m.leader_fetch_age, age < 0 ? -1.0 : (double)age / 1000.0);
    c->ready_applied = applied;
    c->ready_hw = c->host.hw;
    c->ready_epoch = st->epoch;
    c->ready_role = (int)st->role;
    c->ready_leader = st->leader_id;
    c->ready_answered = st->leader_answered;
    c->ready_answer_ms = st->leader_answer_ms;
    c->ready_applied_since = c->last_applied_change_ms;
    kq_metric_set_int(c->m.snapshot_end, c->node.snapshot_end);
    /* Image gauges: only when nothing uncommitted is applied, at most once a second. */
    if (c->node.meta.applied_end == c->host.hw && c->host.hw != c->m.image_updated_offset &&
        c->now >= c->m.image_updated_ms + 1000) {
        kq_image_counts n;
        kq_image_get_counts(c->node.meta.img, &n);
        kq_metric_set_int(c->m.image_hash,
                          (int64_t)(kq_image_hash(c->node.meta.img) & ((UINT64_C(1) << 48) - 1)));
        kq_metric_set_int(c->m.brokers_active, n.brokers - n.fenced_brokers);
        kq_metric_set_int(c->m.brokers_fenced, n.fenced_brokers);
        kq_metric_set_int(c->m.topics, n.topics);
        kq_metric_set_int(c->m.partitions, (int64_t)n.partitions);
        kq_metric_set_int(c->m.offline, (int64_t)n.offline_partitions);
        kq_metric_set_int(c->m.imbalance, (int64_t)n.preferred_imbalance);
        c->m.image_updated_ms = c->now;
        c->m.image_updated_offset = c->host.hw;
    }
}

/* ---------- start-up ---------- */

static int install_snapshot(void *arg, kq_raft_snapshot_id id, char *err, size_t errlen);

static int start(ctl *c, char *err, size_t errlen)
{
    kq_store_recovered rec;
    int rc;
    memset(&rec, 0, sizeof(rec));
    int in_voters = 0;
    for (int i = 0; i < c->cfg.n_voters; i++)
        in_voters |= c->cfg.voters[i].id == c->cfg.node_id;
    if (!in_voters && c->cfg.n_voters > 0) {
        snprintf(err, errlen,
                 "node.id %d is not in controller.quorum.voters; every kq-controller must be a "
                 "voter",
                 c->cfg.node_id);
        return KQ_ERR_CONFIG;
    }
    kq_store_guard_reads(c->cfg.log_dir);
    rc = kq_store_open(c->cfg.log_dir, NULL, c->cfg.node_id, &c->store, err, errlen);
    if (rc != 0)
        return rc;
    g_data_dir = c->cfg.log_dir;
    rc = kq_store_recover(c->store, &rec);
    if (rc != 0) {
        /* Only damage gets the re-format advice (and exit 2); an I/O error or no memory is a
         * runtime failure (exit 1) that a restart may cure. */
        snprintf(err, errlen, "cannot recover the metadata log in %.900s: %.200s%s", c->cfg.log_dir,
                 kq_err_message(rc), rc == KQ_ERR_CORRUPT_MESSAGE ? RECOVER_HINT : "");
        return rc;
    }
    /* KIP-853: this directory's id, and the voter set kq storage format wrote (offset -1) */
    char why[1200] = "";
    if (!kq_uuid_parse(kq_store_identity_of(c->store)->directory_id, c->cfg.raft.directory_id))
        memset(c->cfg.raft.directory_id, 0, sizeof(c->cfg.raft.directory_id));
    uint8_t *boot = NULL;
    size_t boot_len = 0;
    int32_t boot_count = 0;
    rc = kq_store_get_bootstrap(c->store, &boot, &boot_len, &boot_count);
    if (rc == 0 && boot_count > 0)
        rc = kq_control_list_add_batch(&c->recovered, -1, boot_count, boot, boot_len, why,
                                       sizeof(why));
    free(boot);
    if (rc != 0) {
        kq_store_unguard_reads();
        free(rec.epochs);
        snprintf(err, errlen, "the bootstrap voter set in %.900s cannot be read: %.200s%s",
                 c->cfg.log_dir, why[0] ? why : kq_err_message(rc),
                 rc == KQ_ERR_CORRUPT_MESSAGE ? RECOVER_HINT : "");
        return rc;
    }
    if (c->cfg.n_voters == 0 && c->recovered.n == 0 && c->cfg.raft.n_bootstrap == 0) {
        kq_store_unguard_reads();
        free(rec.epochs);
        snprintf(err, errlen,
                 "%.900s was formatted without a voter set (--no-initial-controllers) and "
                 "controller.quorum.bootstrap.servers is not set: this node cannot find the "
                 "quorum",
                 c->cfg.log_dir);
        return KQ_ERR_CONFIG;
    }
    /* Everything it will replay or serve, checked before it joins the quorum; the log's
     * quorum records are read on the way. */
    rc = kq_store_verify(c->store, &rec, kq_control_check_batch, &c->log_control, why, sizeof(why));
    kq_store_unguard_reads();
    if (rc != 0) {
        free(rec.epochs);
        snprintf(err, errlen, "%.1200s%s", why, rc == KQ_ERR_CORRUPT_MESSAGE ? RECOVER_HINT : "");
        return rc;
    }
    uint64_t seed = 0;
    char u[KQ_UUID_STR_LEN + 1];
    kq_uuid_random(u);
    for (size_t i = 0; u[i]; i++)
        seed = seed * 131 + (uint8_t)u[i];
    c->cfg.raft.seed = seed ^ kq_now_ns();
    c->raft = kq_raft_new(&c->cfg.raft, err, errlen);
    if (c->raft == NULL) {
        free(rec.epochs);
        return KQ_ERR_CONFIG;
    }
    kq_raft_disk disk = kq_store_raft_disk(c->store);
    kq_raft_host_ops ops = {.ctx = c,
                            .send_request = send_request,
                            .send_response = send_response,
                            .append_own = append_own,
                            .after_step = after_step,
                            .persisted = persisted,
                            .install_snapshot = install_snapshot,
                            .fetched_control = fetched_control,
                            .installed_control = installed_control,
                            .fatal = host_fatal};
    if (kq_raft_host_init(&c->host, c->raft, &disk, &ops) != 0) {
        free(rec.epochs);
        snprintf(err, errlen, "out of memory");
        return KQ_ERR_NOMEM;
    }
    c->host.hw = -1;
    kq_ctl_node_config ncfg = {.node_id = c->cfg.node_id,
                               .n_voters = c->cfg.n_voters,
                               .cluster_id = kq_store_identity_of(c->store)->cluster_id,
                               .decide = c->cfg.decide,
                               .idle_interval_ms = c->cfg.idle_interval_ms,
                               .rebalance_interval_ms = c->cfg.rebalance_interval_ms,
                               .unclean_interval_ms = c->cfg.unclean_interval_ms,
                               .snapshot_max_bytes = c->cfg.snapshot_max_bytes,
                               .snapshot_interval_ms = c->cfg.snapshot_interval_ms,
                               .max_write_bytes = MAX_WRITE_BYTES,
                               .max_batch_bytes = MAX_BATCH_BYTES,
                               .max_waiting = MAX_WAITING_WRITES,
                               .seed = kq_now_ns() ^ (uint64_t)getpid(),
                               .node_principal_template =
                                   c->check_identity ? c->cfg.ssl.principal_template : NULL,
                               .authorizer = &c->cfg.authz};
    for (int i = 0; i < c->cfg.n_voters; i++)
        ncfg.voters[i] = c->cfg.voters[i].id;
    kq_ctl_node_ops nops = {.ctx = c,
                            .propose = node_propose,
                            .read_committed = node_read_committed,
                            .reply = node_reply,
                            .reply_error = node_reply_error,
                            .drop = node_drop,
                            .event = node_event,
                            .refused = node_refused,
                            .upgrade_kraft = node_upgrade_kraft,
                            .fatal = node_fatal};
    if (kq_ctl_node_init(&c->node, &ncfg, &c->host.st, &nops, kq_now_ms()) != 0) {
        free(rec.epochs);
        snprintf(err, errlen, "out of memory");
        return KQ_ERR_NOMEM;
    }
    if (rec.snapshot.end_offset > 0) {
        uint8_t *payload = NULL;
        size_t len = 0;
        rc = kq_store_snapshot_load(c->store, rec.snapshot, &payload, &len, err, errlen);
        if (rc == 0)
            rc = kq_ctl_node_load_snapshot(&c->node, rec.snapshot, payload, len, kq_now_ms(), err,
                                           errlen);
        if (rc == 0)
            rc = kq_control_list_add_snapshot(&c->recovered, rec.snapshot.end_offset, payload, len,
                                              err, errlen);
        free(payload);
        if (rc != 0) {
            free(rec.epochs);
            if (rc == KQ_ERR_NOMEM || rc == KQ_ERR_IO)
                return rc;
            size_t l = strlen(err);
            snprintf(err + l, errlen - l, "%s", RECOVER_HINT);
            return KQ_ERR_CORRUPT_MESSAGE;
        }
        KQ_INFO("controller", "loaded snapshot", "end_offset=%lld epoch=%d",
                (long long)rec.snapshot.end_offset, rec.snapshot.epoch);
    }
    if (kq_control_list_move(&c->recovered, &c->log_control) != 0) {
        free(rec.epochs);
        snprintf(err, errlen, "out of memory");
        return KQ_ERR_NOMEM;
    }
    if (rec.log_start_offset > c->node.meta.applied_end) {
        snprintf(err, errlen,
                 "the log in %.600s starts at offset %lld but no snapshot covers the records "
                 "before it; stop this node, wipe the directory, re-format it with the same "
                 "cluster id and node id, and start it: it fetches everything from the leader",
                 c->cfg.log_dir, (long long)rec.log_start_offset);
        free(rec.epochs);
        return KQ_ERR_IO;
    }
    rc = metrics_init(c, err, errlen);
    if (rc != 0) {
        free(rec.epochs);
        return rc;
    }
    c->q = kq_loopq_new(65536);
    if (c->q == NULL) {
        free(rec.epochs);
        snprintf(err, errlen, "out of memory");
        return KQ_ERR_NOMEM;
    }
    kq_voter_addr others[2 * KQ_RAFT_MAX_VOTERS];
    int n_others = 0;
    for (int i = 0; i < c->cfg.n_voters; i++)
        if (c->cfg.voters[i].id != c->cfg.node_id)
            others[n_others++] = c->cfg.voters[i];
    for (int i = 0; i < c->cfg.raft.n_bootstrap; i++)
        others[n_others++] = c->cfg.bootstrap[i];
    bool tls = c->cfg.protocol == KQ_SECURITY_SSL;
    if ((tls || c->cfg.metrics_tls) &&
        ((rc = kq_rpc_set_tls_config(&c->cfg.ssl, err, errlen)) != 0 ||
         (rc = kq_rpc_tls_metrics(c->m.reg)) != 0)) {
        free(rec.epochs);
        return rc;
    }
    if (c->cfg.metrics_host[0] != '\0' &&
        (rc =
             kq_metrics_listener_start(c->cfg.metrics_host, c->cfg.metrics_port, c->cfg.metrics_tls,
                                       c->m.reg, ready_cb, c, &c->http, err, errlen)) != 0) {
        free(rec.epochs);
        return rc;
    }
    rc = kq_raft_net_open(others, n_others, tls, c->cfg.max_request_bytes, c->q, EV_RESPONSE,
                          &c->net, err, errlen);
    if (rc != 0) {
        free(rec.epochs);
        return rc;
    }
    kq_raft_net_set_self(c->net, c->cfg.raft.host, c->cfg.raft.port);
    char url[300];
    kq_rpc_url(url, sizeof url, tls, c->cfg.listener.host, c->cfg.listener.port);
    rc = kq_rpc_server_start(url, SERVER_CONTEXTS, c->cfg.max_request_bytes, on_request, c,
                             &c->server, err, errlen);
    if (rc != 0) {
        free(rec.epochs);
        return rc;
    }
    kq_rpc_server_set_conn_limits(c->server, &c->cfg.conn_limits);
    if ((rc = kq_rpc_server_conn_metrics(c->server, c->m.reg)) != 0) {
        snprintf(err, errlen, "out of memory registering connection metrics");
        free(rec.epochs);
        return rc;
    }
    KQ_INFO("controller", "started",
            "listener=%s cluster_id=%s directory_id=%s log_end=%lld "
            "epoch=%d",
            url, kq_store_identity_of(c->store)->cluster_id,
            kq_store_identity_of(c->store)->directory_id, (long long)rec.log_end_offset,
            rec.qstate.epoch);
    if (!tls)
        KQ_WARN("controller", "listener is plaintext; use TLS outside local development", "url=%s",
                url);
    else if (c->cfg.ssl.client_auth != 2)
        KQ_WARN("controller",
                "ssl.client.auth is not required: clients are not identified and node identities "
                "are not checked",
                "url=%s ssl.client.auth=%s", url, c->cfg.ssl.client_auth ? "requested" : "none");

    c->now = kq_now_ms();
    c->host.durable_end = rec.log_end_offset;
    kq_raft_event ev = {.type = KQ_RAFT_EV_START};
    ev.u.start.qstate = rec.qstate;
    ev.u.start.log_start_offset = rec.log_start_offset;
    ev.u.start.log_end_offset = rec.log_end_offset;
    ev.u.start.epochs = rec.epochs;
    ev.u.start.n_epochs = rec.n_epochs;
    ev.u.start.log_start_epoch = rec.log_start_epoch;
    ev.u.start.snapshot = rec.snapshot;
    ev.u.start.snapshot_size = rec.snapshot_size;
    ev.u.start.control = c->recovered.c;
    ev.u.start.n_control = c->recovered.n;
    kq_raft_update up;
    rc = step(c, &ev, &up);
    free(rec.epochs);
    if (rc != 0) {
        snprintf(err, errlen,
                 "the Raft core rejected the state recovered from %.900s (%s); the directory "
                 "may be damaged",
                 c->cfg.log_dir, kq_err_name(rc));
        return KQ_ERR_IO;
    }
    return 0;
}

/* ---------- the loop ---------- */

/* kq_raft_host_ops: a fetched snapshot is complete. Install it in the store and load the image
 * from it (the host then tells the core, which fetches from its end offset). */
static int install_snapshot(void *arg, kq_raft_snapshot_id id, char *err, size_t errlen)
{
    ctl *c = arg;
    uint8_t *payload = NULL;
    size_t len = 0;
    int rc = kq_store_install_snapshot(c->store, id, err, errlen);
    if (rc == 0)
        rc = kq_store_snapshot_load(c->store, id, &payload, &len, err, errlen);
    if (rc == KQ_ERR_CORRUPT_MESSAGE) {
        KQ_WARN("raft", "fetched snapshot is damaged; fetching it again", "detail=\"%s\"", err);
    } else if (rc == 0) {
        if (kq_ctl_node_load_snapshot(&c->node, id, payload, len, c->now, err, errlen) != 0)
            fatal("loading a fetched snapshot into the metadata image", err);
        kq_control_list_free(&c->installed);
        if (kq_control_list_add_snapshot(&c->installed, id.end_offset, payload, len, err, errlen) !=
            0)
            fatal("reading the quorum records of a fetched snapshot", err);
        KQ_INFO("raft", "installed a snapshot fetched from the leader", "end_offset=%lld epoch=%d",
                (long long)id.end_offset, id.epoch);
    }
    free(payload);
    return rc;
}

/* Write a snapshot of the committed image every snapshot_max_bytes of records (or
 * snapshot_interval_ms), at a moment the image holds nothing uncommitted; the core then lets
 * the log prefix below it go. */
static void maybe_snapshot(ctl *c)
{
    kq_buf b = {0};
    int32_t n_records = 0;
    char err[512];
    int64_t size = 0;
    kq_raft_snapshot_id id;
    if (!kq_ctl_node_snapshot_ready(&c->node, &c->host.st, c->host.pending_install,
                                    kq_raft_host_outbox_reads_from(&c->host), c->now, &id))
        return;
    uint64_t t0 = kq_now_ms();
    /* a dynamic quorum's snapshot starts with the quorum records in force at its end, so a
     * node that installs it (or restarts from it) knows the voters once the log below is gone */
    int16_t kraft_version;
    const kq_voter_set *set = kq_raft_voters_at(c->raft, id.end_offset - 1, &kraft_version);
    if (set != NULL && kq_control_append_snapshot_head(&b, kraft_version, set, err, sizeof err))
        fatal("snapshot: encoding the quorum records", err);
    if (kq_image_snapshot_write(c->node.meta.img, &b, &n_records) != 0)
        fatal("snapshot", "encoding the metadata image");
    if (kq_store_snapshot_write(c->store, id, b.data, b.len, &size, err, sizeof(err)) != 0)
        fatal("snapshot", err);
    KQ_INFO("controller", "wrote snapshot",
            "end_offset=%lld epoch=%d records=%d bytes=%lld ms=%llu", (long long)id.end_offset,
            id.epoch, n_records, (long long)size, (unsigned long long)(kq_now_ms() - t0));
    kq_buf_free(&b);
    kq_ctl_node_snapshot_taken(&c->node, id, c->now);
    kq_raft_event ev = {.type = KQ_RAFT_EV_SNAPSHOT_TAKEN};
    ev.u.snapshot.id = id;
    ev.u.snapshot.size = size;
    kq_raft_update u;
    step(c, &ev, &u);
}

static void run(ctl *c)
{
    kq_loopq_item items[256];
    int64_t last_hw = -1;
    while (1) {
        uint64_t deadline = c->host.deadline, node_deadline = kq_ctl_node_deadline(&c->node);
        if (node_deadline < deadline)
            deadline = node_deadline;
        if (c->shutting_down && c->shutdown_deadline < deadline)
            deadline = c->shutdown_deadline;
        if (c->host.n_outbox > 0)
            deadline = 0; /* messages left from the last iteration: do not sleep */
        size_t n = kq_loopq_pop(c->q, items, 256, deadline);
        c->now = kq_now_ms();
        c->host.now = c->now; /* the host steps PERSISTED at this time */
        for (size_t i = 0; i < n; i++) {
            switch (items[i].type) {
            case EV_REQUEST:
                handle_request(c, items[i].ptr);
                break;
            case EV_RESPONSE:
                handle_response(c, items[i].ptr);
                break;
            default:
                break;
            }
        }
        if (c->stop && !c->shutting_down) {
            KQ_INFO("controller", "shutting down: resigning", "role=%s",
                    kq_raft_role_name(c->host.st.role));
            c->shutting_down = 1;
            c->shutdown_deadline = c->now + SHUTDOWN_GRACE_MS;
            kq_raft_event ev = {.type = KQ_RAFT_EV_RESIGN};
            kq_raft_update u;
            step(c, &ev, &u);
            kq_ctl_node_stop(&c->node);
        }
        if (c->now >= c->host.deadline) {
            kq_raft_event ev = {.type = KQ_RAFT_EV_TICK};
            kq_raft_update u;
            step(c, &ev, &u);
        }
        kq_ctl_node_run(&c->node, c->now); /* timers, this iteration's proposal, idle NoOp */
        kq_raft_host_send_fetch_answers(&c->host);
        kq_raft_host_flush(&c->host);
        if (c->host.hw != last_hw) {
            last_hw = c->host.hw;
            observe_commits(c);
        }
        kq_ctl_node_committed(&c->node, c->now); /* answers, replay, activation */
        maybe_snapshot(c);
        expire_tokens(c);
        metrics_update(c);
        if (c->shutting_down && c->now >= c->shutdown_deadline)
            break;
    }
}

static const char usage[] =
    "usage: kq-controller --config FILE\n"
    "  Runs one voter of the kq metadata quorum. See docs/configuration.md.\n";

int main(int argc, char **argv)
{
    static ctl c;
    char err[4096] = "";
    const char *config = NULL;
    int exit_code = 0;
    if (kq_daemon_args(argc, argv, usage, &config, &exit_code) != 0)
        return exit_code;
    /* Block the shutdown signals before any thread exists; one thread sigwait()s for them. */
    kq_daemon_block_signals();

    kq_log_init(-1, KQ_LOG_INFO);
    int rc = kq_ctl_config_load(config, &c.cfg, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "kq-controller: %s: %s\n", config, err);
        return EXIT_CONFIG;
    }
    kq_log_init(c.cfg.node_id, c.cfg.log_level);
    if (kq_rpc_identity_setup(c.cfg.protocol == KQ_SECURITY_SSL, &c.cfg.ssl, &c.cfg.authz,
                              "controller", &c.principal_rules, &c.check_identity, err,
                              sizeof(err)) != 0) {
        fprintf(stderr, "kq-controller: %s: %s\n", config, err);
        return EXIT_CONFIG;
    }
    rc = start(&c, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "kq-controller: %s\n", err);
        KQ_ERROR("controller", "cannot start", "error=%s detail=\"%s\"", kq_err_name(rc), err);
        return rc == KQ_ERR_IO || rc == KQ_ERR_NOMEM ? 1 : EXIT_CONFIG;
    }
    if (c.cfg.protocol == KQ_SECURITY_SSL || c.cfg.metrics_tls)
        kq_daemon_on_reload(kq_rpc_reload_tls, &c.cfg.ssl);
    if (kq_daemon_signal_thread(&c.stop, c.q, EV_SIGNAL) != 0) {
        fprintf(stderr, "kq-controller: cannot start the signal thread\n");
        return 1;
    }
    run(&c);
    c.now = c.host.now = kq_now_ms();
    kq_raft_host_flush(&c.host); /* commit, then the EndQuorumEpoch requests */
    /* Give the EndQuorumEpoch requests a moment on the wire before the sockets close. */
    usleep(50 * 1000);
    kq_daemon_teardown_watchdog("controller", 0);
    kq_ctl_node_free(&c.node); /* drops what is still parked */
    kq_raft_host_free(&c.host);
    kq_control_list_free(&c.fetched);
    kq_control_list_free(&c.recovered);
    kq_control_list_free(&c.installed);
    kq_control_list_free(&c.log_control);
    kq_store_close(c.store);          /* everything is committed; close it before the network */
    kq_rpc_tls_on_change(NULL, NULL); /* before the HTTPS listener it may point at goes */
    kq_http_stop(c.http);
    kq_rpc_server_stop(c.server);
    kq_raft_net_close(c.net);
    KQ_INFO("controller", "stopped", "%s", "reason=signal");
    return 0;
}
