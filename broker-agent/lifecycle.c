/* The broker lifecycle state machine (lifecycle.h). Pure: no I/O, no clock. */
#include "lifecycle.h"

#include <string.h>

#include "kq/error.h"

const char *kq_bl_state_name(kq_bl_state s)
{
    switch (s) {
    case KQ_BL_STARTING:
        return "STARTING";
    case KQ_BL_RECOVERY:
        return "RECOVERY";
    case KQ_BL_RUNNING:
        return "RUNNING";
    case KQ_BL_PENDING_CONTROLLED_SHUTDOWN:
        return "PENDING_CONTROLLED_SHUTDOWN";
    case KQ_BL_SHUTTING_DOWN:
        return "SHUTTING_DOWN";
    }
    return "UNKNOWN";
}

void kq_bl_init(kq_bl *l, const kq_bl_config *cfg, uint64_t now_ms)
{
    memset(l, 0, sizeof(*l));
    l->cfg = *cfg;
    if (l->cfg.n_controllers < 0 || l->cfg.n_controllers > KQ_RAFT_MAX_VOTERS)
        l->cfg.n_controllers = 0; /* none known: nothing is sent (kq_bl_set_controllers) */
    if (l->cfg.heartbeat_interval_ms == 0)
        l->cfg.heartbeat_interval_ms = 1;
    l->state = KQ_BL_STARTING;
    l->broker_epoch = -1;
    l->hint = -1;
    l->leader = -1;
    l->observed = -1;
    l->sent_to = -1;
    l->started_ms = now_ms;
    l->next_send_ms = now_ms;
    l->fenced = true;
    kq_prng_seed(&l->rng, cfg->seed);
}

void kq_bl_set_controllers(kq_bl *l, const int32_t *ids, int n)
{
    if (n < 0 || n > KQ_RAFT_MAX_VOTERS)
        return;
    memcpy(l->cfg.controllers, ids, (size_t)n * sizeof(ids[0]));
    l->cfg.n_controllers = n;
    bool hint_known = false;
    for (int i = 0; i < n; i++)
        hint_known |= ids[i] == l->hint;
    if (!hint_known)
        l->hint = -1;
}

/* Hints naming anything but a controller are ignored. */
static int32_t known(const kq_bl *l, int32_t id)
{
    for (int i = 0; i < l->cfg.n_controllers; i++)
        if (l->cfg.controllers[i] == id)
            return id;
    return -1;
}

static int32_t target_of(kq_bl *l)
{
    if (l->hint >= 0)
        return l->hint;
    if (l->leader >= 0)
        return l->leader;
    return l->cfg.controllers[l->rr % l->cfg.n_controllers];
}

static bool wrong_target(int error)
{
    return error == KQ_ERR_REQUEST_TIMED_OUT || error == KQ_ERR_NETWORK_EXCEPTION ||
           error == KQ_ERR_NOT_CONTROLLER || error == KQ_ERR_NOT_LEADER_OR_FOLLOWER ||
           error == KQ_ERR_LEADER_NOT_AVAILABLE;
}

/* A failed request: back off, and look elsewhere when the target was wrong. The back-off never
 * exceeds a heartbeat interval nor a quarter of the session: a new active controller starts
 * every broker's session when it activates, and a broker still searching must reach it well
 * before that session expires (a failed attempt at a dead controller also costs a request
 * timeout). The same cap lets a restarted broker register soon after an old incarnation's
 * lease (DUPLICATE_BROKER_REGISTRATION) expires. */
static void failed(kq_bl *l, uint64_t now, int error, int32_t leader_hint)
{
    uint32_t cap = l->cfg.session_timeout_ms / 4;
    leader_hint = known(l, leader_hint);
    if (l->cfg.heartbeat_interval_ms < cap)
        cap = l->cfg.heartbeat_interval_ms;
    if (cap < KQ_BL_BACKOFF_MIN_MS)
        cap = KQ_BL_BACKOFF_MIN_MS;
    uint32_t b = l->backoff_ms == 0 ? KQ_BL_BACKOFF_MIN_MS : l->backoff_ms * 2;
    if (b > cap || b < l->backoff_ms)
        b = cap;
    l->backoff_ms = b;
    uint32_t j = b / 50; /* 2 % jitter either way */
    int64_t wait = (int64_t)b;
    if (j > 0)
        wait += (int64_t)kq_prng_below(&l->rng, 2u * j + 1u) - (int64_t)j;
    if (wrong_target(error)) {
        /* The controller the failed request went to; the targets may have moved since (the
         * observer saw a new leader while it was in flight). */
        int32_t tried = l->sent_to;
        if (leader_hint < 0 && l->hint < 0 && l->leader >= 0 && l->leader != tried) {
            wait = 0; /* a leader learnt while the request was out: try it now */
        } else if (leader_hint >= 0 && leader_hint != tried) {
            l->hint = leader_hint;
            wait = 0; /* follow the hint at once */
        } else if (leader_hint >= 0) {
            /* The leader itself, not active yet: it activates as soon as it has committed its
             * epoch's first record, so ask again soon (the back-off keeps growing meanwhile). */
            l->hint = leader_hint;
            if (wait > 2 * KQ_BL_BACKOFF_MIN_MS)
                wait = 2 * KQ_BL_BACKOFF_MIN_MS;
        } else {
            /* Nobody named a leader: try the next voter (and stop trusting the observer's
             * leader until it reports another one). */
            l->hint = -1;
            l->leader = -1;
            l->rr++;
        }
    }
    l->next_send_ms = now + (uint64_t)wait;
}

static bool set_state(kq_bl *l, kq_bl_state s)
{
    if (l->state == s)
        return false;
    l->state = s;
    return true;
}

void kq_bl_poll(kq_bl *l, uint64_t now, int64_t metadata_offset, kq_bl_action *out)
{
    memset(out, 0, sizeof(*out));
    out->target = -1;
    if (l->exit_reason == NULL && !l->ever_registered &&
        now >= l->started_ms + l->cfg.registration_timeout_ms) {
        l->exit_code = 1;
        l->exit_reason = "could not register with the active controller within "
                         "initial.broker.registration.timeout.ms";
    }
    if (l->exit_reason == NULL && l->state == KQ_BL_PENDING_CONTROLLED_SHUTDOWN &&
        now >= l->shutdown_ms + l->cfg.shutdown_timeout_ms) {
        l->state = KQ_BL_SHUTTING_DOWN;
        l->exit_code = 0;
        l->exit_reason = "controlled shutdown timed out (broker.controlled.shutdown.timeout.ms); "
                         "stopping anyway";
    }
    if (l->exit_reason == NULL && l->state == KQ_BL_SHUTTING_DOWN) {
        l->exit_code = 0;
        l->exit_reason = "controlled shutdown complete";
    }
    if (l->exit_reason != NULL) {
        out->exit = true;
        out->exit_code = l->exit_code;
        out->exit_reason = l->exit_reason;
        out->next_ms = now;
        return;
    }
    uint64_t next = now + 1000;
    if (!l->ever_registered && l->started_ms + l->cfg.registration_timeout_ms < next)
        next = l->started_ms + l->cfg.registration_timeout_ms;
    if (l->state == KQ_BL_PENDING_CONTROLLED_SHUTDOWN &&
        l->shutdown_ms + l->cfg.shutdown_timeout_ms < next)
        next = l->shutdown_ms + l->cfg.shutdown_timeout_ms;
    if (l->in_flight || now < l->next_send_ms || l->cfg.n_controllers == 0) {
        if (!l->in_flight && l->next_send_ms < next)
            next = l->next_send_ms;
        out->next_ms = next;
        return;
    }
    out->target = target_of(l);
    l->sent_to = out->target;
    l->in_flight = true;
    if (l->broker_epoch < 0) {
        out->send = KQ_BL_SEND_REGISTRATION;
    } else {
        out->send = KQ_BL_SEND_HEARTBEAT;
        out->hb.broker_id = l->cfg.broker_id;
        out->hb.broker_epoch = l->broker_epoch;
        out->hb.current_metadata_offset = metadata_offset;
        out->hb.want_shutdown = l->state == KQ_BL_PENDING_CONTROLLED_SHUTDOWN;
        out->hb.want_fence = !out->hb.want_shutdown && !l->ready_to_unfence;
        if (out->hb.want_shutdown)
            l->first_shutdown_hb = false;
    }
    l->in_flight_kind = out->send;
    out->next_ms = next;
}

bool kq_bl_on_registration(kq_bl *l, uint64_t now, int error, int64_t broker_epoch,
                           int32_t leader_hint)
{
    l->in_flight = false;
    if (error == 0 && broker_epoch >= 0) {
        l->broker_epoch = broker_epoch;
        l->ever_registered = true;
        l->backoff_ms = 0;
        l->next_send_ms = now; /* first heartbeat at once */
        return false;
    }
    if (error == KQ_ERR_INCONSISTENT_CLUSTER_ID) {
        l->exit_code = 2;
        l->exit_reason = "the controller rejected the registration: this broker's data "
                         "directory was formatted with another cluster id than the quorum's "
                         "(re-format log.dirs with the quorum's cluster id)";
        return false;
    }
    failed(l, now, error == 0 ? KQ_ERR_NETWORK_EXCEPTION : error, leader_hint);
    return false;
}

bool kq_bl_on_heartbeat(kq_bl *l, uint64_t now, int error, const kq_heartbeat_result *res,
                        int32_t leader_hint)
{
    bool changed = false;
    l->in_flight = false;
    if (error == KQ_ERR_STALE_BROKER_EPOCH) {
        /* The registration this epoch belonged to is gone: register again. */
        l->broker_epoch = -1;
        l->fenced = true;
        l->caught_up = false;
        l->backoff_ms = 0;
        l->next_send_ms = now;
        if (l->state == KQ_BL_PENDING_CONTROLLED_SHUTDOWN)
            return set_state(l, KQ_BL_SHUTTING_DOWN); /* nothing left to hand over */
        return set_state(l, KQ_BL_STARTING);
    }
    if (error != 0 || res == NULL) {
        failed(l, now, error != 0 ? error : KQ_ERR_NETWORK_EXCEPTION, leader_hint);
        return false;
    }
    l->backoff_ms = 0;
    if (l->fenced != res->is_fenced || l->caught_up != res->is_caught_up)
        changed = true;
    l->fenced = res->is_fenced;
    l->caught_up = res->is_caught_up;
    switch (l->state) {
    case KQ_BL_STARTING:
        if (res->is_caught_up)
            changed |= set_state(l, res->is_fenced ? KQ_BL_RECOVERY : KQ_BL_RUNNING);
        break;
    case KQ_BL_RECOVERY:
        if (!res->is_fenced)
            changed |= set_state(l, KQ_BL_RUNNING);
        break;
    case KQ_BL_PENDING_CONTROLLED_SHUTDOWN:
        if (res->should_shutdown)
            changed |= set_state(l, KQ_BL_SHUTTING_DOWN);
        break;
    default:
        break;
    }
    if (l->state == KQ_BL_STARTING)
        l->next_send_ms = now + KQ_BL_STARTING_INTERVAL_MS;
    else if (l->state == KQ_BL_PENDING_CONTROLLED_SHUTDOWN && l->first_shutdown_hb)
        l->next_send_ms = now + KQ_BL_FIRST_SHUTDOWN_HB_MS;
    else
        l->next_send_ms = now + l->cfg.heartbeat_interval_ms;
    return changed;
}

void kq_bl_set_leader(kq_bl *l, int32_t leader_id)
{
    leader_id = known(l, leader_id);
    if (leader_id == l->observed)
        return;
    l->observed = leader_id;
    l->leader = leader_id;
    if (leader_id >= 0) {
        l->hint = -1; /* a newer view of the leader than an old hint */
        /* Backing off after failures (the old leader died): the new one may be activating
         * now, with every session restarted; try it at once rather than after the back-off. */
        if (l->backoff_ms > 0 && !l->in_flight)
            l->next_send_ms = 0;
    }
}

void kq_bl_set_ready(kq_bl *l)
{
    if (l->ready_to_unfence)
        return;
    l->ready_to_unfence = true;
    if (l->broker_epoch >= 0 && !l->in_flight &&
        (l->state == KQ_BL_STARTING || l->state == KQ_BL_RECOVERY))
        l->next_send_ms = 0; /* tell the controller at the next poll */
}

bool kq_bl_request_shutdown(kq_bl *l, uint64_t now)
{
    if (l->state == KQ_BL_PENDING_CONTROLLED_SHUTDOWN || l->state == KQ_BL_SHUTTING_DOWN)
        return false;
    l->shutdown_ms = now;
    if (l->broker_epoch < 0)
        return set_state(l, KQ_BL_SHUTTING_DOWN); /* not registered: nothing to hand over */
    l->first_shutdown_hb = true;
    if (!l->in_flight)
        l->next_send_ms = now + KQ_BL_FIRST_SHUTDOWN_HB_MS;
    return set_state(l, KQ_BL_PENDING_CONTROLLED_SHUTDOWN);
}
