/*
 * kq-broker-agent: a broker of the kq cluster (DESIGN.md section 9, docs/broker.md).
 *
 * This version runs the broker's control plane:
 *   - start-up checks: log.dirs formatted for this node.id (kq storage format), the metadata
 *     log in <log.dirs>/__cluster_metadata stamped with the same cluster id and node id;
 *   - the metadata follower: the Raft core in observer mode (node.id is not a voter) fetching
 *     the metadata log from the controllers into its own store and replaying committed
 *     records into a kq_image, the same image the controllers build;
 *   - the lifecycle (broker-agent/lifecycle.h): registration with a new incarnation id,
 *     heartbeats carrying the applied metadata offset, fenced until caught up, controlled
 *     shutdown on SIGTERM, NOT_CONTROLLER hints and failover.
 * The data plane (partition replicas, Produce/Fetch) comes next; the listener already binds
 * and answers every request with UNSUPPORTED_VERSION.
 *
 * One loop thread owns everything (DESIGN.md section 3): nng callbacks push events onto the
 * loop queue. One iteration: read the clock; step the core with the answers that arrived;
 * through the Raft host (kq/raft_host.h, the same as kq-controller's) commit the store (group
 * commit), step PERSISTED and send what the core released; replay committed records; drive
 * the lifecycle.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "broker_config.h"
#include "data_plane.h"
#include "dp_net_nng.h"
#include "lifecycle.h"
#include "metadata.h"
#include "replica_manager.h"
#include "kq/codec.h"
#include "kq/ctl_codec.h"
#include "kq/daemon.h"
#include "kq/error.h"
#include "kq/image.h"
#include "kq/log.h"
#include "kq/loopq.h"
#include "kq/metrics.h"
#include "kq/plog.h"
#include "kq/raft.h"
#include "kq/raft_host.h"
#include "kq/raft_net.h"
#include "kq/principal.h"
#include "kq/rpc.h"
#include "kq/store.h"
#include "kq/util.h"

#define EXIT_CONFIG 2
#define READ_MAX_BYTES (8u * 1024u * 1024u)
/* Requests the listener holds at once. A waiting acks=all Produce or a long-polling Fetch keeps
 * its context until answered, so the data plane stops parking new ones DP_RESERVED short of
 * this (data_plane.h), leaving room for the follower fetches that let them complete. */
#define SERVER_CONTEXTS 1024
#define METADATA_SUBDIR "__cluster_metadata"

enum { EV_RAFT = 1, EV_CTL, EV_REQUEST, EV_SIGNAL, EV_DATA };

/* A controller RPC answer (registration or heartbeat), built on an nng thread. */
typedef struct ctl_ev {
    uint32_t api;
    int err;
    uint8_t *data;
    size_t len;
} ctl_ev;

typedef struct ctl_call {
    struct broker *b;
    uint32_t api;
} ctl_call;

typedef struct broker_metrics {
    kq_metrics *reg;
    kq_metric *state[5]; /* indexed by kq_bl_state */
    kq_metric *fenced, *epoch, *leader, *leader_fetch_age, *hw, *leo, *applied;
    kq_metric *rm_leaders, *rm_followers, *rm_changes; /* replica manager */
    uint64_t rm_changes_seen;
    /* data plane: counters follow kq_dp_counts (the *_seen fields are what was added so far) */
    kq_metric *produce, *produce_err, *fetch, *invalid, *refused, *appended, *shrinks, *expands;
    kq_metric *under_replicated, *under_min_isr, *at_min_isr, *parked_produces, *parked_fetches;
    kq_dp_counts dp_seen;
    uint64_t gauges_at; /* when the per-partition gauges were last computed (once a second) */
} broker_metrics;

typedef struct broker {
    kq_broker_config cfg;
    /* An SSL listener: the mapping rules for the peers' principals (NULL on plaintext:
     * User:ANONYMOUS). check_identity: ssl.client.auth=required too (a follower's requests
     * are checked against its principal; otherwise an authorizer wants ClusterAction). */
    kq_principal_rules *principal_rules;
    bool check_identity;
    char cluster_id[KQ_STORE_ID_LEN + 1];
    char meta_dir[4200];
    uint8_t incarnation[16];
    char incarnation_str[KQ_UUID_STR_LEN + 1];
    kq_plog *plog;
    kq_rm *rm;                           /* replica manager, on plog */
    kq_dp *dp;                           /* data plane: Produce, Fetch, fetchers, AlterPartition */
    kq_dp_nng *dp_net;                   /* its network (dp_net_nng.h) */
    int32_t ctl_ids[KQ_RAFT_MAX_VOTERS]; /* cfg.voters' ids, as ctl */
    bool metadata_changed;  /* the replica manager acted on new metadata this iteration */
    int64_t rm_applied_end; /* applied_end the replica manager last acted on */
    kq_store *store;
    kq_raft *raft;
    kq_raft_net *net;
    kq_rpc_client *ctl[KQ_RAFT_MAX_VOTERS]; /* controller RPC clients, as cfg.voters */
    /* dynamic voters (KIP-853): clients of controllers that left or moved, closed at exit (their
     * calls in flight still answer); the quorum records for the observer's core */
    kq_rpc_client *retired[64];
    int n_retired;
    kq_control_list fetched, recovered, installed;
    kq_rpc_server *server;
    kq_loopq *q;
    kq_bmeta meta; /* the metadata image, replayed from the observer's log (metadata.h) */
    kq_bl lc;
    broker_metrics m;
    kq_http *http;
    _Atomic int ready;

    kq_raft_host host; /* drives b->raft against the store and the controllers (kq/raft_host.h) */
    int32_t inconsistent[2 * KQ_RAFT_MAX_VOTERS]; /* voters and bootstrap servers */
    int n_inconsistent;
    int32_t last_leader;
    bool last_fenced;
    uint64_t now;
    volatile sig_atomic_t stop;
    bool shutdown_requested;
} broker;

static void fatal_config(const char *msg)
{
    fprintf(stderr, "kq-broker-agent: %s\n", msg);
    KQ_ERROR("broker", "stopping: configuration or identity error", "detail=\"%s\"", msg);
    _exit(EXIT_CONFIG);
}

/* log.dirs, once known: a fatal error there on a full disk says so (exit 3). */
static const char *g_data_dir;

static void fatal(const char *what, const char *detail)
{
    KQ_ERROR("broker", "fatal error, exiting", "what=\"%s\" detail=\"%s\"", what,
             detail ? detail : "");
    kq_daemon_exit_if_no_space("kq-broker-agent", g_data_dir, "log.dirs");
    _exit(1);
}

/* ---------- nng-thread callbacks: copy, push, return ---------- */

static void on_ctl_response(void *arg, int err, const uint8_t *data, size_t len)
{
    ctl_call *cc = arg;
    ctl_ev *ev = calloc(1, sizeof(*ev));
    if (ev == NULL)
        fatal("memory", "controller answer");
    ev->api = cc->api;
    ev->err = kq_rpc_copy_answer(err, data, len, &ev->data, &ev->len);
    if (kq_loopq_push(cc->b->q, EV_CTL, ev) != 0)
        fatal("loop queue full", "controller answer dropped");
    free(cc);
}

static void on_request(void *arg, kq_rpc_req *req)
{
    broker *b = arg;
    if (kq_loopq_push(b->q, EV_REQUEST, req) != 0)
        kq_rpc_req_drop(req);
}

/* ---------- the metadata follower ---------- */

/* With dynamic voters the controllers are the voter set in force, learnt from the metadata log:
 * keep the address book, the controller clients, the lifecycle's and the data plane's
 * controller lists and the observer's peers in step. */
static void sync_controllers(broker *b)
{
    int64_t at;
    const kq_voter_set *s = kq_raft_voters(b->raft, &at);
    bool tls = b->cfg.controller_protocol == KQ_SECURITY_SSL;
    char err[300];
    if (at == -2 || s == NULL || b->net == NULL)
        return; /* static voters: cfg.voters is the set */
    bool changed = s->n != b->cfg.n_voters;
    for (int i = 0; i < s->n; i++) {
        kq_voter_addr a = {.id = s->v[i].key.id, .port = s->v[i].port};
        snprintf(a.host, sizeof a.host, "%s", s->v[i].host);
        kq_voter_addr *old = &b->cfg.voters[i];
        if (i < b->cfg.n_voters && old->id == a.id && old->port == a.port &&
            !strcmp(old->host, a.host) && b->ctl[i])
            continue;
        changed = true;
        if (kq_raft_net_set_peer(b->net, &a, err, sizeof err) != 0)
            KQ_WARN("metadata", "cannot dial a controller", "controller=%d error=\"%s\"", a.id,
                    err);
        if (b->ctl[i] && b->n_retired < (int)(sizeof b->retired / sizeof b->retired[0]))
            b->retired[b->n_retired++] = b->ctl[i];
        else if (b->ctl[i])
            kq_rpc_client_close(b->ctl[i]); /* no room left: its calls in flight fail */
        b->ctl[i] = NULL;
        char url[300];
        kq_rpc_url(url, sizeof url, tls, a.host, a.port);
        if (kq_rpc_client_open_node(url, a.id, KQ_RPC_DEFAULT_MAX_MSG, &b->ctl[i], err,
                                    sizeof err) != 0)
            KQ_WARN("broker", "cannot dial a controller", "controller=%d error=\"%s\"", a.id, err);
        *old = a;
    }
    if (!changed)
        return;
    b->cfg.n_voters = s->n;
    for (int i = 0; i < s->n; i++)
        b->ctl_ids[i] = b->cfg.voters[i].id;
    kq_bl_set_controllers(&b->lc, b->ctl_ids, s->n);
    kq_dp_nng_set_controllers(b->dp_net, b->ctl_ids, s->n);
    KQ_INFO("broker", "controllers from the voter set in force", "count=%d", s->n);
}

static int fetched_control(void *arg, kq_raft_batch *batches, size_t n)
{
    broker *b = arg;
    return kq_control_list_read_fetched(&b->fetched, batches, n);
}

static size_t installed_control(void *arg, const kq_raft_control **out)
{
    broker *b = arg;
    *out = b->installed.c;
    return b->installed.n;
}

static void after_step(void *arg, const kq_raft_update *u)
{
    sync_controllers(arg);
    if (u->role_changed)
        KQ_INFO("metadata", "observer state changed", "state=%s epoch=%d leader=%d",
                kq_raft_role_name(u->role), u->epoch, u->leader_id);
}

static int step(broker *b, kq_raft_event *ev)
{
    b->host.now = b->now;
    int rc = kq_raft_host_step(&b->host, ev, NULL);
    if (rc != 0)
        KQ_WARN("metadata", "event rejected by the core", "type=%d error=%s", (int)ev->type,
                kq_err_name(rc));
    return rc;
}

static int send_request(void *arg, const kq_raft_msg *m)
{
    broker *b = arg;
    return kq_raft_net_send(b->net, m, b->cluster_id, b->cfg.raft.request_timeout_ms);
}

/* kq_raft_disk.remove_prefix of an observer: it never takes a snapshot, so the core never asks
 * it to drop a log prefix; if it did, the broker stops (host_fatal) instead of losing its log. */
static int refuse_compaction(void *ctx, int64_t log_start)
{
    (void)ctx;
    KQ_ERROR("metadata", "an observer was asked to compact its metadata log", "log_start=%lld",
             (long long)log_start);
    return KQ_ERR_INTERNAL;
}

static void host_fatal(void *arg, const char *what, const char *detail)
{
    (void)arg;
    fatal(what, detail);
}

/* Majority of the voters rejected our cluster id: this broker's directory belongs to another
 * cluster (or it points at the wrong quorum). */
static void note_inconsistent_cluster(broker *b, int32_t peer, const char *detail)
{
    for (int i = 0; i < b->n_inconsistent; i++)
        if (b->inconsistent[i] == peer)
            return;
    if (b->n_inconsistent < 2 * KQ_RAFT_MAX_VOTERS)
        b->inconsistent[b->n_inconsistent++] = peer;
    KQ_WARN("metadata", "controller rejected our cluster id", "controller=%d detail=\"%s\"", peer,
            detail);
    /* Voters count against the majority of the set; bootstrap servers (ids < 0, possibly a
     * voter counted again) only when they all say so and no voter set is known. */
    int voters = 0, boot = 0;
    for (int i = 0; i < b->n_inconsistent; i++)
        voters += b->inconsistent[i] >= 0, boot += b->inconsistent[i] < 0;
    if ((b->cfg.n_voters > 0 && voters >= b->cfg.n_voters / 2 + 1) ||
        (b->cfg.n_voters == 0 && b->cfg.raft.n_bootstrap > 0 && boot >= b->cfg.raft.n_bootstrap)) {
        char msg[1400];
        snprintf(msg, sizeof(msg),
                 "cluster id %s in %.600s does not match the controllers' cluster id (%.256s); "
                 "check controller.quorum.voters, or re-format log.dirs with the quorum's "
                 "cluster id (kq storage format --cluster-id <id>)",
                 b->cluster_id, b->cfg.log_dir, detail);
        fatal_config(msg);
    }
}

static void handle_raft_answer(broker *b, kq_raft_net_item *it)
{
    kq_raft_net_answer a;
    kq_raft_net_decode(it, b->cfg.node_id, &a);
    if (a.transport_error != 0 && a.transport_error != KQ_ERR_REQUEST_TIMED_OUT &&
        a.transport_error != KQ_ERR_NETWORK_EXCEPTION)
        KQ_WARN("metadata", "bad answer from controller", "controller=%d error=%s detail=\"%s\"",
                a.peer, kq_err_name(a.transport_error), a.message);
    if (a.peer_error == KQ_ERR_INCONSISTENT_CLUSTER_ID)
        note_inconsistent_cluster(b, a.peer, a.message);
    kq_raft_net_learn_leader(b->net, b->cfg.bootstrap, b->cfg.raft.n_bootstrap, &a);
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE, .u.msg = &a.msg};
    step(b, &ev);
    kq_raft_net_answer_free(&a);
}

static int apply_batch(void *arg, int64_t base, int32_t epoch, int32_t count, uint32_t crc,
                       const uint8_t *records, size_t len)
{
    broker *b = arg;
    char why[512];
    (void)epoch, (void)crc;
    if (kq_bmeta_apply_batch(&b->meta, base, count, records, len, why, sizeof(why)) != 0)
        fatal("metadata image: a committed batch cannot apply", why);
    return 0;
}

/* Replay committed (and durable) batches into the image. */
static void apply_committed(broker *b)
{
    int64_t upto = kq_raft_host_applicable_end(&b->host);
    while (upto > 0 && b->meta.applied_end < upto) {
        int64_t before = b->meta.applied_end;
        int rc = kq_store_read(b->store, before, upto, READ_MAX_BYTES, apply_batch, b);
        if (rc != 0)
            fatal("store read (replaying committed metadata)", kq_err_message(rc));
        if (b->meta.applied_end == before)
            fatal("internal", "no progress replaying committed metadata");
    }
    /* The replicas first act on the image once it has caught up with the first leader high
     * watermark and the controller says it has caught up with this process's registration
     * (kq_bmeta_publishable): a leader restarted on an old image would otherwise compute its
     * high watermark with an ISR that is no longer the committed one. */
    if (b->meta.applied_end != b->rm_applied_end &&
        kq_bmeta_publishable(&b->meta, b->host.st.leader_high_watermark, b->lc.caught_up)) {
        char why[1024];
        b->rm_applied_end = b->meta.applied_end;
        if (kq_rm_on_metadata(b->rm, b->meta.img, b->now, why, sizeof(why)) != 0)
            fatal("replica manager", why);
        b->metadata_changed = true;
    }
    if (kq_bmeta_caught_up(&b->meta, b->host.st.leader_high_watermark) && !b->lc.ready_to_unfence) {
        KQ_INFO("broker", "metadata replayed up to the high watermark; ready to unfence",
                "applied_offset=%lld", (long long)(b->meta.applied_end - 1));
        kq_bl_set_ready(&b->lc);
    }
}

/* Load a snapshot (the whole committed image up to its end offset) into a fresh image. */
/* The image from snapshot id, and its quorum records (KIP-853) into control. */
static int load_snapshot_image(broker *b, kq_raft_snapshot_id id, kq_control_list *control,
                               char *err, size_t errlen)
{
    uint8_t *payload = NULL;
    size_t len = 0;
    int rc = kq_store_snapshot_load(b->store, id, &payload, &len, err, errlen);
    if (rc == 0)
        rc = kq_bmeta_load_snapshot(&b->meta, payload, len, id.end_offset, err, errlen);
    if (rc == 0)
        rc = kq_control_list_add_snapshot(control, id.end_offset, payload, len, err, errlen);
    free(payload);
    return rc;
}

/* A metadata snapshot fetched from the leader (the broker was behind the leader's log start):
 * install it as the new log start and replace the image with it (kq_raft_host_ops). */
static int install_snapshot(void *arg, kq_raft_snapshot_id id, char *err, size_t errlen)
{
    broker *b = arg;
    int rc = kq_store_install_snapshot(b->store, id, err, errlen);
    kq_control_list_free(&b->installed);
    if (rc == 0)
        rc = load_snapshot_image(b, id, &b->installed, err, errlen);
    if (rc == KQ_ERR_CORRUPT_MESSAGE)
        KQ_WARN("metadata", "fetched snapshot is damaged; fetching it again", "detail=\"%s\"", err);
    else if (rc == 0)
        KQ_INFO("metadata", "installed a metadata snapshot fetched from the leader",
                "end_offset=%lld epoch=%d", (long long)id.end_offset, id.epoch);
    return rc;
}

/* ---------- the lifecycle ---------- */

static int voter_index(const broker *b, int32_t id)
{
    for (int i = 0; i < b->cfg.n_voters; i++)
        if (b->cfg.voters[i].id == id)
            return i;
    return -1;
}

static void log_lifecycle(broker *b, kq_bl_state before)
{
    if (b->lc.state != before)
        KQ_INFO("broker", "lifecycle state changed", "from=%s to=%s broker_epoch=%lld",
                kq_bl_state_name(before), kq_bl_state_name(b->lc.state),
                (long long)b->lc.broker_epoch);
    if (b->lc.broker_epoch >= 0 && b->lc.fenced != b->last_fenced) {
        if (b->lc.fenced)
            KQ_WARN("broker", "fenced by the controller", "broker_epoch=%lld caught_up=%s",
                    (long long)b->lc.broker_epoch, b->lc.caught_up ? "true" : "false");
        else
            KQ_INFO("broker", "unfenced by the controller", "broker_epoch=%lld",
                    (long long)b->lc.broker_epoch);
        b->last_fenced = b->lc.fenced;
    }
}

static void send_ctl(broker *b, const kq_bl_action *a)
{
    kq_ctl_request req;
    kq_rec_endpoint eps[KQ_BROKER_MAX_LISTENERS];
    kq_buf buf = {0};
    ctl_call *cc = NULL;
    int vi = voter_index(b, a->target);
    int rc = KQ_ERR_NETWORK_EXCEPTION;
    memset(&req, 0, sizeof(req));
    if (a->send == KQ_BL_SEND_REGISTRATION) {
        req.api_key = KQ_API_BROKER_REGISTRATION;
        req.broker_registration.broker_id = b->cfg.node_id;
        req.broker_registration.cluster_id = b->cluster_id;
        memcpy(req.broker_registration.incarnation_id, b->incarnation, 16);
        for (int i = 0; i < b->cfg.n_advertised; i++)
            eps[i] = (kq_rec_endpoint){b->cfg.advertised[i].name, b->cfg.advertised[i].host,
                                       b->cfg.advertised[i].port};
        req.broker_registration.endpoints = eps;
        req.broker_registration.n_endpoints = b->cfg.n_advertised;
        req.broker_registration.rack = b->cfg.rack[0] ? b->cfg.rack : NULL;
    } else {
        req.api_key = KQ_API_BROKER_HEARTBEAT;
        req.broker_heartbeat = a->hb;
    }
    if (vi < 0)
        goto fail;
    rc = kq_ctl_encode_request(b->cluster_id, b->cfg.node_id, &req, &buf);
    if (rc != 0)
        goto fail;
    cc = malloc(sizeof(*cc));
    if (cc == NULL) {
        rc = KQ_ERR_NOMEM;
        goto fail;
    }
    *cc = (ctl_call){b, req.api_key};
    rc = kq_rpc_call_async(b->ctl[vi], buf.data, buf.len, b->cfg.raft.request_timeout_ms,
                           on_ctl_response, cc);
    if (rc == 0) {
        kq_buf_free(&buf);
        return;
    }
    free(cc);
fail:
    kq_buf_free(&buf);
    KQ_WARN("broker", "cannot send to the controller", "controller=%d error=%s", a->target,
            kq_err_name(rc));
    kq_bl_state before = b->lc.state;
    if (a->send == KQ_BL_SEND_REGISTRATION)
        kq_bl_on_registration(&b->lc, b->now, KQ_ERR_NETWORK_EXCEPTION, -1, -1);
    else
        kq_bl_on_heartbeat(&b->lc, b->now, KQ_ERR_NETWORK_EXCEPTION, NULL, -1);
    log_lifecycle(b, before);
}

static void handle_ctl_answer(broker *b, ctl_ev *ev)
{
    kq_response resp;
    char err[256] = "";
    int rc = ev->err;
    int32_t hint = -1;
    int64_t epoch = -1;
    kq_heartbeat_result hr;
    kq_bl_state before = b->lc.state;
    memset(&resp, 0, sizeof(resp));
    memset(&hr, 0, sizeof(hr));
    if (rc == 0) {
        rc = kq_codec_decode_response(ev->data, ev->len, -1, &resp, err, sizeof(err));
        if (rc == 0 && resp.api_key != ev->api) {
            snprintf(err, sizeof(err), "answer for api %u, not %u", resp.api_key, ev->api);
            rc = KQ_ERR_NETWORK_EXCEPTION;
        }
        if (rc != 0)
            KQ_WARN("broker", "bad answer from the controller", "error=%s detail=\"%s\"",
                    kq_err_name(rc), err);
    }
    if (rc == 0 && resp.error != 0) {
        rc = resp.error;
        hint = resp.leader_id;
        if (rc != KQ_ERR_NOT_CONTROLLER)
            KQ_WARN("broker",
                    ev->api == KQ_API_BROKER_REGISTRATION ? "registration refused"
                                                          : "heartbeat refused",
                    "error=%s detail=\"%s\"", kq_err_name(rc), resp.error_message);
    } else if (rc == 0 && ev->api == KQ_API_BROKER_REGISTRATION) {
        rc = kq_ctl_decode_broker_registration_response(&resp, &epoch, err, sizeof(err));
    } else if (rc == 0) {
        rc = kq_ctl_decode_broker_heartbeat_response(&resp, &hr, err, sizeof(err));
    }
    if (rc == KQ_ERR_INCONSISTENT_CLUSTER_ID) {
        char msg[1400];
        snprintf(msg, sizeof(msg),
                 "the active controller rejected this broker: cluster id %s in %.600s does not "
                 "match the quorum's (%.300s); re-format log.dirs with the quorum's cluster id "
                 "(kq storage format --cluster-id <id>) or fix controller.quorum.voters",
                 b->cluster_id, b->cfg.log_dir, resp.error_message);
        fatal_config(msg);
    }
    if (ev->api == KQ_API_BROKER_REGISTRATION) {
        kq_bl_on_registration(&b->lc, b->now, rc, epoch, hint);
        if (rc == 0)
            KQ_INFO("broker", "registered with the controller",
                    "broker_epoch=%lld incarnation_id=%s", (long long)epoch, b->incarnation_str);
    } else {
        kq_bl_on_heartbeat(&b->lc, b->now, rc, rc == 0 ? &hr : NULL, hint);
    }
    log_lifecycle(b, before);
    kq_response_free(&resp);
    free(ev->data);
    free(ev);
}

/* Data-plane requests go to the data plane; anything else is not served by a broker: answer
 * it with an error, never leave a client hanging. */
static void handle_request(broker *b, kq_rpc_req *req)
{
    char principal[KQ_PRINCIPAL_MAX] = "";
    if (b->principal_rules)
        kq_principal_of(b->principal_rules, kq_rpc_req_peer(req), principal, sizeof principal);
    if (kq_dp_on_request(b->dp, req, kq_rpc_req_data(req), kq_rpc_req_len(req), b->meta.img,
                         b->principal_rules ? principal : NULL, b->now))
        return;
    kq_request r;
    kq_buf out = {0};
    char err[256];
    memset(&r, 0, sizeof(r));
    int rc =
        kq_codec_decode_request(kq_rpc_req_data(req), kq_rpc_req_len(req), &r, err, sizeof(err));
    int code = rc != 0 ? KQ_ERR_INVALID_REQUEST : KQ_ERR_UNSUPPORTED_VERSION;
    const char *msg = rc != 0 ? err : "a broker does not serve this api; ask a controller";
    if (kq_codec_encode_error_response(r.api_key, code, msg, b->host.st.leader_id, -1, NULL,
                                       &out) == 0) {
        kq_rpc_reply(req, out.data, out.len);
        kq_buf_free(&out);
    } else {
        kq_rpc_req_drop(req);
    }
    kq_request_free(&r);
    (void)b;
}

/* ---------- metrics ---------- */

static int ready_cb(void *arg, char *reason, size_t len)
{
    broker *b = arg;
    switch (b->ready) {
    case 1:
        return 1;
    case 2:
        snprintf(reason, len, "fenced: not unfenced by the active controller yet");
        return 0;
    default:
        snprintf(reason, len, "starting: not registered with the active controller yet");
        return 0;
    }
}

static int metrics_init(broker *b, char *err, size_t errlen)
{
    broker_metrics *m = &b->m;
    m->reg = kq_metrics_new();
    if (m->reg == NULL) {
        snprintf(err, errlen, "out of memory");
        return KQ_ERR_NOMEM;
    }
    for (int i = 0; i < 5; i++) {
        char labels[64];
        snprintf(labels, sizeof(labels), "state=\"%s\"", kq_bl_state_name((kq_bl_state)i));
        m->state[i] = kq_metrics_gauge_int(m->reg, "kq_broker_state",
                                           "1 for the lifecycle state this broker is in", labels);
    }
    m->fenced = kq_metrics_gauge_int(m->reg, "kq_broker_fenced",
                                     "1 while the controller keeps this broker fenced", NULL);
    m->epoch = kq_metrics_gauge_int(m->reg, "kq_broker_epoch",
                                    "Broker epoch of the current registration, -1 if none", NULL);
    m->leader = kq_metrics_gauge_int(m->reg, "kq_raft_leader_id",
                                     "Metadata quorum leader, -1 if unknown", NULL);
    m->leader_fetch_age = kq_metrics_gauge(
        m->reg, "kq_raft_leader_fetch_age_seconds",
        "Seconds since the metadata quorum leader last answered this observer's Fetch, -1 when "
        "it follows no leader that has answered",
        NULL);
    m->hw = kq_metrics_gauge_int(m->reg, "kq_raft_high_watermark",
                                 "Committed metadata offset (exclusive), -1 if unknown", NULL);
    m->leo = kq_metrics_gauge_int(m->reg, "kq_raft_log_end_offset",
                                  "Metadata log end offset of this observer", NULL);
    m->applied = kq_metrics_gauge_int(m->reg, "kq_metadata_last_applied_offset",
                                      "Last metadata offset applied to the image", NULL);
    m->rm_leaders =
        kq_metrics_gauge_int(m->reg, "kq_broker_partitions",
                             "Partition replicas this broker hosts, by role", "role=\"leader\"");
    m->rm_followers =
        kq_metrics_gauge_int(m->reg, "kq_broker_partitions",
                             "Partition replicas this broker hosts, by role", "role=\"follower\"");
    m->rm_changes = kq_metrics_counter(
        m->reg, "kq_broker_replica_changes_total",
        "Metadata changes applied to replicas (become leader/follower, update, stop)", NULL);
    m->produce = kq_metrics_counter(m->reg, "kq_broker_produce_requests_total",
                                    "Produce requests received", NULL);
    m->produce_err = kq_metrics_counter(m->reg, "kq_broker_produce_errors_total",
                                        "Produce requests answered with an error", NULL);
    m->fetch =
        kq_metrics_counter(m->reg, "kq_broker_fetch_requests_total",
                           "Data-plane Fetch requests received (consumers and followers)", NULL);
    m->invalid = kq_metrics_counter(m->reg, "kq_broker_invalid_requests_total",
                                    "Data-plane requests answered INVALID_REQUEST", NULL);
    m->refused = kq_metrics_counter(
        m->reg, "kq_authorization_failures_total",
        "Requests refused for their sender (CLUSTER_AUTHORIZATION_FAILED or "
        "TOPIC_AUTHORIZATION_FAILED): not the replica it claims, or not authorized",
        NULL);
    m->appended =
        kq_metrics_counter(m->reg, "kq_broker_records_appended_total",
                           "Records written to partition logs (as leader or follower)", NULL);
    m->shrinks = kq_metrics_counter(m->reg, "kq_broker_isr_shrinks_total",
                                    "ISR shrinks requested by this broker as leader", NULL);
    m->expands = kq_metrics_counter(m->reg, "kq_broker_isr_expands_total",
                                    "ISR expansions requested by this broker as leader", NULL);
    m->under_replicated = kq_metrics_gauge_int(
        m->reg, "kq_broker_under_replicated_partitions",
        "Partitions led by this broker whose ISR is smaller than their replica list", NULL);
    m->under_min_isr = kq_metrics_gauge_int(
        m->reg, "kq_broker_under_min_isr_partitions",
        "Partitions led by this broker whose ISR is below min.insync.replicas (capped at the "
        "replica count): acks=all is refused and the high watermark is frozen there",
        NULL);
    m->at_min_isr = kq_metrics_gauge_int(
        m->reg, "kq_broker_at_min_isr_partitions",
        "Partitions led by this broker whose ISR is exactly min.insync.replicas (capped at the "
        "replica count): one more loss stops acks=all writes",
        NULL);
    m->parked_produces =
        kq_metrics_gauge_int(m->reg, "kq_broker_waiting_produces",
                             "acks=all Produce requests waiting for the ISR", NULL);
    m->parked_fetches = kq_metrics_gauge_int(m->reg, "kq_broker_waiting_fetches",
                                             "Fetch requests long-polling for new records", NULL);
    return 0;
}

static void metrics_update(broker *b)
{
    for (int i = 0; i < 5; i++)
        kq_metric_set_int(b->m.state[i], (int)b->lc.state == i);
    kq_metric_set_int(b->m.fenced, b->lc.fenced);
    kq_metric_set_int(b->m.epoch, b->lc.broker_epoch);
    kq_metric_set_int(b->m.leader, b->host.st.leader_id);
    int64_t age = kq_raft_leader_answer_age_ms(&b->host.st, b->now);
    kq_metric_set(b->m.leader_fetch_age, age < 0 ? -1.0 : (double)age / 1000.0);
    kq_metric_set_int(b->m.hw, b->host.st.high_watermark);
    kq_metric_set_int(b->m.leo, b->host.st.log_end_offset);
    kq_metric_set_int(b->m.applied, b->meta.applied_end - 1);
    kq_rm_counts rc;
    kq_rm_get_counts(b->rm, &rc);
    kq_metric_set_int(b->m.rm_leaders, (int64_t)rc.leaders);
    kq_metric_set_int(b->m.rm_followers, (int64_t)rc.followers);
    kq_metric_add(b->m.rm_changes, (double)(rc.changes - b->m.rm_changes_seen));
    b->m.rm_changes_seen = rc.changes;
    kq_dp_counts dc;
    kq_dp_get_counts(b->dp, &dc);
    kq_dp_counts *seen = &b->m.dp_seen;
    kq_metric_add(b->m.produce, (double)(dc.produce_requests - seen->produce_requests));
    kq_metric_add(b->m.produce_err, (double)(dc.produce_errors - seen->produce_errors));
    kq_metric_add(b->m.fetch, (double)(dc.fetch_requests - seen->fetch_requests));
    kq_metric_add(b->m.invalid, (double)(dc.invalid_requests - seen->invalid_requests));
    kq_metric_add(b->m.refused, (double)(dc.refused_requests - seen->refused_requests));
    kq_metric_add(b->m.appended, (double)(dc.records_appended - seen->records_appended));
    kq_metric_add(b->m.shrinks, (double)(dc.isr_shrinks - seen->isr_shrinks));
    kq_metric_add(b->m.expands, (double)(dc.isr_expands - seen->isr_expands));
    *seen = dc;
    kq_metric_set_int(b->m.parked_produces, (int64_t)dc.parked_produces);
    kq_metric_set_int(b->m.parked_fetches, (int64_t)dc.parked_fetches);
    if (b->now >= b->m.gauges_at + 1000) {
        size_t n = 0;
        int64_t under = 0, under_min = 0, at_min = 0;
        b->m.gauges_at = b->now;
        kq_rm_partitions(b->rm, &n);
        for (size_t i = 0; i < n; i++) {
            kq_replica_status st;
            const kq_replica *r = kq_rm_replica(b->rm, i);
            if (r == NULL)
                continue;
            kq_replica_get_status(r, &st);
            if (st.role != KQ_REPLICA_LEADER)
                continue;
            under += st.n_isr < st.n_replicas;
            int c = kq_min_isr_cmp(st.n_isr, st.min_insync_replicas, st.n_replicas);
            under_min += c < 0;
            at_min += c == 0;
        }
        kq_metric_set_int(b->m.under_replicated, under);
        kq_metric_set_int(b->m.under_min_isr, under_min);
        kq_metric_set_int(b->m.at_min_isr, at_min);
    }
    b->ready = b->lc.broker_epoch < 0 ? 0 : (b->lc.fenced ? 2 : 1);
}

/* ---------- start-up ---------- */

/* Open (or, the first time, create) the metadata log under the data directory, stamped with
 * the data directory's identity. */
static int open_metadata_store(broker *b, char *err, size_t errlen)
{
    struct stat sb;
    kq_store_identity id;
    int n = snprintf(b->meta_dir, sizeof(b->meta_dir), "%s/%s", b->cfg.log_dir, METADATA_SUBDIR);
    if (n < 0 || (size_t)n >= sizeof(b->meta_dir)) {
        snprintf(err, errlen, "log.dirs: path is too long");
        return KQ_ERR_CONFIG;
    }
    if (stat(b->meta_dir, &sb) != 0 && errno == ENOENT) {
        int rc = kq_store_format(b->meta_dir, b->cluster_id, b->cfg.node_id, &id, err, errlen);
        if (rc != 0)
            return rc;
        KQ_INFO("broker", "created the metadata log", "dir=%s cluster_id=%s", b->meta_dir,
                b->cluster_id);
    }
    return kq_store_open(b->meta_dir, b->cluster_id, b->cfg.node_id, &b->store, err, errlen);
}

static int start(broker *b, char *err, size_t errlen)
{
    kq_store_recovered rec;
    kq_control_list log_control = {0}; /* the log's quorum records, after the snapshot's */
    int rc;
    memset(&rec, 0, sizeof(rec));
    b->last_fenced = true;

    kq_store_guard_reads(b->cfg.log_dir);
    rc = kq_plog_open(b->cfg.log_dir, NULL, b->cfg.node_id, &b->plog, err, errlen);
    if (rc != 0)
        return rc;
    snprintf(b->cluster_id, sizeof(b->cluster_id), "%s", kq_plog_identity_of(b->plog)->cluster_id);
    kq_rm_config rmc = {.node_id = b->cfg.node_id,
                        .replica_lag_time_max_ms = b->cfg.replica_lag_time_max_ms,
                        .min_insync_replicas = b->cfg.min_insync_replicas};
    b->rm = kq_rm_new(&rmc, b->plog);
    if (b->rm == NULL) {
        snprintf(err, errlen, "out of memory");
        return KQ_ERR_NOMEM;
    }
    rc = open_metadata_store(b, err, errlen);
    if (rc != 0)
        return rc;
    g_data_dir = b->cfg.log_dir;
    rc = kq_store_recover(b->store, &rec);
    if (rc == 0) {
        /* What it will replay, checked before it registers or serves. */
        char why[1200] = "";
        rc =
            kq_store_verify(b->store, &rec, kq_control_check_batch, &log_control, why, sizeof(why));
        kq_store_unguard_reads();
        if (rc != 0) {
            kq_control_list_free(&log_control);
            free(rec.epochs);
            memset(&rec, 0, sizeof(rec));
            snprintf(err, errlen, "%.1200s%s%.1000s%s", why,
                     rc == KQ_ERR_CORRUPT_MESSAGE ? "; recover (docs/storage.md): stop the "
                                                    "broker, delete "
                                                  : "",
                     rc == KQ_ERR_CORRUPT_MESSAGE ? b->meta_dir : "",
                     rc == KQ_ERR_CORRUPT_MESSAGE ? " (its copy of the metadata log) and start "
                                                    "it: it fetches the metadata again"
                                                  : "");
            return rc;
        }
    } else {
        snprintf(err, errlen, "cannot recover the metadata log in %.900s: %.200s%s", b->meta_dir,
                 kq_err_message(rc),
                 rc == KQ_ERR_CORRUPT_MESSAGE ? "; recover (docs/storage.md): stop the broker, "
                                                "delete that directory and start it"
                                              : "");
        return rc;
    }
    if (kq_bmeta_init(&b->meta) != 0) {
        rc = KQ_ERR_NOMEM;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (rec.snapshot.end_offset > 0) {
        rc = load_snapshot_image(b, rec.snapshot, &b->recovered, err, errlen);
        if (rc != 0) {
            rc = KQ_ERR_IO;
            goto out;
        }
        KQ_INFO("metadata", "loaded metadata snapshot", "end_offset=%lld epoch=%d",
                (long long)rec.snapshot.end_offset, rec.snapshot.epoch);
    }
    if (kq_control_list_move(&b->recovered, &log_control) != 0) {
        rc = KQ_ERR_NOMEM;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (rec.log_start_offset > b->meta.applied_end) {
        snprintf(err, errlen,
                 "the metadata log in %.600s starts at offset %lld but no snapshot covers the "
                 "records before it; stop the broker, delete that directory (the broker "
                 "fetches the metadata again from the controllers) and start it",
                 b->meta_dir, (long long)rec.log_start_offset);
        rc = KQ_ERR_IO;
        goto out;
    }

    kq_uuid_random(b->incarnation_str);
    kq_uuid_parse(b->incarnation_str, b->incarnation);
    uint64_t seed = kq_now_ns() ^ ((uint64_t)getpid() << 32);
    for (size_t i = 0; b->incarnation_str[i]; i++)
        seed = seed * 131 + (uint8_t)b->incarnation_str[i];
    b->cfg.raft.seed = seed;
    b->raft = kq_raft_new(&b->cfg.raft, err, errlen);
    if (b->raft == NULL) {
        rc = KQ_ERR_CONFIG;
        goto out;
    }
    kq_raft_disk disk = kq_store_raft_disk(b->store);
    disk.remove_prefix = refuse_compaction; /* an observer takes no snapshots */
    kq_raft_host_ops ops = {.ctx = b,
                            .send_request = send_request,
                            .after_step = after_step,
                            .install_snapshot = install_snapshot,
                            .fetched_control = fetched_control,
                            .installed_control = installed_control,
                            .fatal = host_fatal};
    if (kq_raft_host_init(&b->host, b->raft, &disk, &ops) != 0) {
        rc = KQ_ERR_NOMEM;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    b->host.hw = -1;
    b->host.durable_end = rec.log_end_offset;
    kq_bl_config lc = {.broker_id = b->cfg.node_id,
                       .n_controllers = b->cfg.n_voters,
                       .heartbeat_interval_ms = b->cfg.heartbeat_interval_ms,
                       .session_timeout_ms = b->cfg.session_timeout_ms,
                       .registration_timeout_ms = b->cfg.registration_timeout_ms,
                       .shutdown_timeout_ms = b->cfg.shutdown_timeout_ms,
                       .seed = seed ^ 0x9e3779b97f4a7c15ull};
    for (int i = 0; i < b->cfg.n_voters; i++)
        lc.controllers[i] = b->cfg.voters[i].id;

    rc = metrics_init(b, err, errlen);
    if (rc != 0)
        goto out;
    b->q = kq_loopq_new(65536);
    if (b->q == NULL) {
        rc = KQ_ERR_NOMEM;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (int i = 0; i < b->cfg.n_voters; i++)
        b->ctl_ids[i] = b->cfg.voters[i].id;
    b->dp_net = kq_dp_nng_new(b->q, EV_DATA, KQ_RPC_DEFAULT_MAX_MSG, b->ctl, b->ctl_ids,
                              b->cfg.n_voters, fatal);
    if (b->dp_net == NULL) {
        rc = KQ_ERR_NOMEM;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    {
        kq_dp_config dc = {.node_id = b->cfg.node_id,
                           .cluster_id = b->cluster_id,
                           .replica_fetch_wait_max_ms = b->cfg.replica_fetch_wait_max_ms,
                           .replica_fetch_max_bytes = b->cfg.replica_fetch_max_bytes,
                           .test_fetch_delay_ms = b->cfg.test_fetch_delay_ms,
                           .request_timeout_ms = b->cfg.raft.request_timeout_ms,
                           .max_msg_bytes = KQ_RPC_DEFAULT_MAX_MSG,
                           .protocols = &b->cfg.protocols,
                           .node_principal_template =
                               b->check_identity ? b->cfg.ssl.principal_template : NULL,
                           .authorizer = &b->cfg.authz,
                           .max_waiting = SERVER_CONTEXTS - 64,
                           .net = kq_dp_nng_net(b->dp_net),
                           .fatal = fatal};
        b->dp = kq_dp_new(&dc, b->rm);
        if (b->dp == NULL) {
            rc = KQ_ERR_NOMEM;
            snprintf(err, errlen, "out of memory");
            goto out;
        }
    }
    bool ctl_tls = b->cfg.controller_protocol == KQ_SECURITY_SSL;
    bool listener_tls = b->cfg.listener_protocol == KQ_SECURITY_SSL;
    if (b->cfg.ssl.keystore[0] && ((rc = kq_rpc_set_tls_config(&b->cfg.ssl, err, errlen)) != 0 ||
                                   (rc = kq_rpc_tls_metrics(b->m.reg)) != 0))
        goto out;
    if (b->cfg.metrics_host[0] != '\0' &&
        (rc =
             kq_metrics_listener_start(b->cfg.metrics_host, b->cfg.metrics_port, b->cfg.metrics_tls,
                                       b->m.reg, ready_cb, b, &b->http, err, errlen)) != 0)
        goto out;
    kq_voter_addr peers[2 * KQ_RAFT_MAX_VOTERS];
    int n_peers = 0;
    for (int i = 0; i < b->cfg.n_voters; i++)
        peers[n_peers++] = b->cfg.voters[i];
    for (int i = 0; i < b->cfg.raft.n_bootstrap; i++)
        peers[n_peers++] = b->cfg.bootstrap[i];
    rc = kq_raft_net_open(peers, n_peers, ctl_tls, b->cfg.max_request_bytes, b->q, EV_RAFT, &b->net,
                          err, errlen);
    if (rc != 0)
        goto out;
    for (int i = 0; i < b->cfg.n_voters; i++) {
        char url[300];
        const kq_voter_addr *v = &b->cfg.voters[i];
        kq_rpc_url(url, sizeof url, ctl_tls, v->host, v->port);
        rc = kq_rpc_client_open_node(url, v->id, KQ_RPC_DEFAULT_MAX_MSG, &b->ctl[i], err, errlen);
        if (rc != 0)
            goto out;
    }
    {
        const kq_listener *l = &b->cfg.listeners[0];
        char url[300];
        kq_rpc_url(url, sizeof url, listener_tls, l->host, l->port);
        rc = kq_rpc_server_start(url, SERVER_CONTEXTS, b->cfg.max_request_bytes, on_request, b,
                                 &b->server, err, errlen);
        if (rc != 0)
            goto out;
        kq_rpc_server_set_conn_limits(b->server, &b->cfg.conn_limits);
        if ((rc = kq_rpc_server_conn_metrics(b->server, b->m.reg)) != 0) {
            snprintf(err, errlen, "out of memory registering connection metrics");
            goto out;
        }
        KQ_INFO("broker", "started",
                "listener=%s cluster_id=%s directory_id=%s metadata_dir=%s metadata_log_end=%lld "
                "incarnation_id=%s",
                url, b->cluster_id, kq_plog_identity_of(b->plog)->directory_id, b->meta_dir,
                (long long)rec.log_end_offset, b->incarnation_str);
        if (!listener_tls)
            KQ_WARN("broker", "listener is plaintext; use TLS outside local development", "url=%s",
                    url);
        else if (b->cfg.ssl.client_auth != 2)
            KQ_WARN(
                "broker",
                "ssl.client.auth is not required: clients are not identified and node identities "
                "are not checked",
                "url=%s ssl.client.auth=%s", url, b->cfg.ssl.client_auth ? "requested" : "none");
    }

    b->now = kq_now_ms();
    kq_bl_init(&b->lc, &lc, b->now);
    kq_raft_event ev = {.type = KQ_RAFT_EV_START};
    ev.u.start.qstate = rec.qstate;
    ev.u.start.log_start_offset = rec.log_start_offset;
    ev.u.start.log_end_offset = rec.log_end_offset;
    ev.u.start.epochs = rec.epochs;
    ev.u.start.n_epochs = rec.n_epochs;
    /* A log that starts at an installed snapshot: its epoch, and the snapshot itself. */
    ev.u.start.log_start_epoch = rec.log_start_epoch;
    ev.u.start.snapshot = rec.snapshot;
    ev.u.start.snapshot_size = rec.snapshot_size;
    ev.u.start.control = b->recovered.c;
    ev.u.start.n_control = b->recovered.n;
    if (step(b, &ev) != 0) {
        snprintf(err, errlen,
                 "the Raft core rejected the metadata log recovered from %.900s; the directory "
                 "may be damaged",
                 b->meta_dir);
        rc = KQ_ERR_IO;
        goto out;
    }
    rc = 0;
out:
    kq_control_list_free(&log_control);
    free(rec.epochs);
    return rc;
}

/* ---------- the loop ---------- */

static int run(broker *b)
{
    kq_loopq_item items[256];
    kq_bl_action a;
    memset(&a, 0, sizeof(a));
    a.next_ms = 0;
    for (;;) {
        uint64_t deadline = b->host.deadline;
        if (a.next_ms < deadline)
            deadline = a.next_ms;
        uint64_t dd = kq_dp_deadline(b->dp, b->now);
        if (dd < deadline)
            deadline = dd;
        if (b->host.n_outbox > 0)
            deadline = 0;
        size_t n = kq_loopq_pop(b->q, items, 256, deadline);
        b->now = kq_now_ms();
        b->host.now = b->now; /* the host steps PERSISTED at this time */
        for (size_t i = 0; i < n; i++) {
            switch (items[i].type) {
            case EV_RAFT:
                handle_raft_answer(b, items[i].ptr);
                break;
            case EV_CTL:
                handle_ctl_answer(b, items[i].ptr);
                break;
            case EV_REQUEST:
                handle_request(b, items[i].ptr);
                break;
            case EV_DATA:
                kq_dp_nng_deliver(b->dp, items[i].ptr, b->now);
                break;
            default:
                break;
            }
        }
        if (b->stop && !b->shutdown_requested) {
            kq_bl_state before = b->lc.state;
            b->shutdown_requested = true;
            KQ_INFO("broker", "shutting down: controlled shutdown", "state=%s",
                    kq_bl_state_name(b->lc.state));
            kq_bl_request_shutdown(&b->lc, b->now);
            log_lifecycle(b, before);
        }
        if (b->now >= b->host.deadline) {
            kq_raft_event ev = {.type = KQ_RAFT_EV_TICK};
            step(b, &ev);
        }
        kq_raft_host_flush(&b->host);
        kq_dp_tick(b->dp, b->meta.img, b->now);
        kq_dp_commit(b->dp, b->meta.img, b->now);
        b->metadata_changed = false;
        apply_committed(b);
        if (b->metadata_changed)
            kq_dp_after_metadata(b->dp, b->meta.img, b->now);
        {
            int vi = voter_index(b, b->host.st.leader_id);
            kq_dp_pump(b->dp, b->meta.img, vi >= 0 && b->ctl[vi] ? b->host.st.leader_id : -1,
                       b->lc.broker_epoch, b->now);
        }
        if (b->host.st.leader_id != b->last_leader) {
            b->last_leader = b->host.st.leader_id;
            if (b->host.st.leader_id >= 0)
                KQ_INFO("broker", "metadata quorum leader", "leader=%d epoch=%d",
                        b->host.st.leader_id, b->host.st.epoch);
        }
        kq_bl_set_leader(&b->lc, b->host.st.leader_id);
        kq_bl_poll(&b->lc, b->now, b->meta.applied_end - 1, &a);
        if (a.exit) {
            metrics_update(b);
            if (a.exit_code == EXIT_CONFIG)
                fatal_config(a.exit_reason);
            if (a.exit_code != 0) {
                KQ_ERROR("broker", "stopping", "reason=\"%s\"", a.exit_reason);
                fprintf(stderr, "kq-broker-agent: %s\n", a.exit_reason);
            } else {
                KQ_INFO("broker", "stopping", "reason=\"%s\"", a.exit_reason);
            }
            return a.exit_code;
        }
        if (a.send != KQ_BL_SEND_NONE)
            send_ctl(b, &a);
        metrics_update(b);
    }
}

static const char usage[] = "usage: kq-broker-agent --config FILE\n"
                            "  Runs one broker agent of a kq cluster. See docs/broker.md.\n";

int main(int argc, char **argv)
{
    static broker b;
    char err[4096] = "";
    const char *config = NULL;
    int exit_code = 0;
    if (kq_daemon_args(argc, argv, usage, &config, &exit_code) != 0)
        return exit_code;
    kq_daemon_block_signals();

    kq_log_init(-1, KQ_LOG_INFO);
    int rc = kq_broker_config_load(config, &b.cfg, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "kq-broker-agent: %s: %s\n", config, err);
        return EXIT_CONFIG;
    }
    kq_log_init(b.cfg.node_id, b.cfg.log_level);
    if (kq_rpc_identity_setup(b.cfg.listener_protocol == KQ_SECURITY_SSL, &b.cfg.ssl, &b.cfg.authz,
                              "broker", &b.principal_rules, &b.check_identity, err,
                              sizeof(err)) != 0) {
        fprintf(stderr, "kq-broker-agent: %s: %s\n", config, err);
        return EXIT_CONFIG;
    }
    b.last_leader = -1;
    rc = start(&b, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "kq-broker-agent: %s\n", err);
        KQ_ERROR("broker", "cannot start", "error=%s detail=\"%s\"", kq_err_name(rc), err);
        return rc == KQ_ERR_IO || rc == KQ_ERR_NOMEM ? 1 : EXIT_CONFIG;
    }
    if (b.cfg.ssl.keystore[0])
        kq_daemon_on_reload(kq_rpc_reload_tls, &b.cfg.ssl);
    if (kq_daemon_signal_thread(&b.stop, b.q, EV_SIGNAL) != 0) {
        fprintf(stderr, "kq-broker-agent: cannot start the signal thread\n");
        return 1;
    }
    int code = run(&b);
    b.now = kq_now_ms();
    b.host.now = b.now;
    kq_raft_host_commit(&b.host);
    kq_daemon_teardown_watchdog("broker", code);
    kq_raft_host_free(&b.host);
    kq_store_close(b.store);
    kq_dp_free(b.dp);
    kq_dp_nng_free(b.dp_net);
    kq_rm_free(b.rm);
    kq_plog_close(b.plog);
    kq_rpc_tls_on_change(NULL, NULL); /* before the HTTPS listener it may point at goes */
    kq_http_stop(b.http);
    kq_rpc_server_stop(b.server);
    kq_raft_net_close(b.net);
    for (int i = 0; i < b.cfg.n_voters; i++)
        kq_rpc_client_close(b.ctl[i]);
    for (int i = 0; i < b.n_retired; i++)
        kq_rpc_client_close(b.retired[i]);
    kq_control_list_free(&b.fetched);
    kq_control_list_free(&b.recovered);
    kq_control_list_free(&b.installed);
    KQ_INFO("broker", "stopped", "exit_code=%d", code);
    return code;
}
