/*
 * kq_bl: the broker agent's lifecycle towards the active controller, a pure state machine
 * (kraft-semantics.md 3.3 "Broker side"). No I/O, no clock: the daemon passes the time, sends
 * what kq_bl_poll asks for and feeds the answers back.
 *
 * States: STARTING (registering, then heartbeating every 10 ms until the controller says it
 * has caught up with its own registration) -> RECOVERY (caught up, still fenced) -> RUNNING
 * (unfenced) -> PENDING_CONTROLLED_SHUTDOWN (want_shutdown sent) -> SHUTTING_DOWN (the
 * controller said should_shutdown, or the shutdown timeout passed: the daemon exits).
 *
 * - One request (registration or heartbeat) in flight at a time (KAFKA-15950).
 * - Registration uses a new incarnation id per process start (chosen by the daemon) and is
 *   retried with back-off (DUPLICATE_BROKER_REGISTRATION: an old incarnation's session still
 *   lives). If no registration succeeds within registration_timeout_ms, the daemon exits.
 * - Heartbeats every heartbeat_interval_ms (10 ms while STARTING, 50 ms for the first one in
 *   pending shutdown), carrying the last applied metadata offset; want_fence while the daemon
 *   is not ready to unfence (metadata not replayed to the high watermark yet).
 * - Failures (timeout, transport error, NOT_CONTROLLER, ...) back off exponentially from
 *   100 ms, factor 2, up to the heartbeat interval or a quarter of the session timeout,
 *   whichever is smaller, with 2 % jitter: a broker looking for a new active controller (which
 *   restarts every session when it activates) finds it well within the session. A
 *   NOT_CONTROLLER from the hinted leader itself (activating) is retried within 200 ms.
 * - Target: the leader hinted by the last NOT_CONTROLLER answer, else the Raft leader the
 *   metadata observer knows (kq_bl_set_leader; a new one is tried at once, cutting a
 *   back-off short), else the voters in turn.
 * - STALE_BROKER_EPOCH on a heartbeat: the registration is gone; register again.
 * - INCONSISTENT_CLUSTER_ID on registration: fatal configuration error (exit 2).
 *
 * Ownership: kq_bl is a plain struct owned by the caller; it holds no pointers.
 */
#ifndef KQ_BROKER_LIFECYCLE_H
#define KQ_BROKER_LIFECYCLE_H

#include <stdbool.h>
#include <stdint.h>

#include "kq/ctlapi.h"
#include "kq/raft.h"
#include "kq/util.h"

#define KQ_BL_STARTING_INTERVAL_MS 10
#define KQ_BL_FIRST_SHUTDOWN_HB_MS 50
#define KQ_BL_BACKOFF_MIN_MS 100

typedef enum kq_bl_state {
    KQ_BL_STARTING = 0,
    KQ_BL_RECOVERY,
    KQ_BL_RUNNING,
    KQ_BL_PENDING_CONTROLLED_SHUTDOWN,
    KQ_BL_SHUTTING_DOWN,
} kq_bl_state;

/* "STARTING", "RECOVERY", ...; static. */
const char *kq_bl_state_name(kq_bl_state s);

typedef struct kq_bl_config {
    int32_t broker_id;
    int32_t controllers[KQ_RAFT_MAX_VOTERS]; /* controller ids (the voters) */
    int n_controllers;
    uint32_t heartbeat_interval_ms;
    uint32_t session_timeout_ms;
    uint32_t registration_timeout_ms;
    uint32_t shutdown_timeout_ms;
    uint64_t seed; /* jitter */
} kq_bl_config;

typedef enum kq_bl_send {
    KQ_BL_SEND_NONE = 0,
    KQ_BL_SEND_REGISTRATION,
    KQ_BL_SEND_HEARTBEAT,
} kq_bl_send;

/* What kq_bl_poll asks the daemon to do. */
typedef struct kq_bl_action {
    kq_bl_send send;  /* send this now to `target` and report the answer */
    int32_t target;   /* controller id */
    kq_heartbeat hb;  /* for KQ_BL_SEND_HEARTBEAT */
    uint64_t next_ms; /* poll again at this time at the latest */
    bool exit;        /* stop the daemon with exit_code; exit_reason says why */
    int exit_code;    /* 0 (shutdown done), 1 (registration timed out), 2 (configuration) */
    const char *exit_reason;
} kq_bl_action;

typedef struct kq_bl {
    kq_bl_config cfg;
    kq_bl_state state;
    int64_t broker_epoch; /* -1 until registered */
    bool in_flight;
    kq_bl_send in_flight_kind;
    int32_t sent_to; /* the controller the request in flight (or the last one) went to */
    uint64_t next_send_ms;
    uint32_t backoff_ms; /* 0 after a success */
    int32_t hint;        /* from NOT_CONTROLLER, -1 none */
    int32_t leader;      /* from the metadata observer, -1 none (or not trusted) */
    int32_t observed;    /* the observer's last reported leader */
    int rr;              /* next voter index to try when no leader is known */
    uint64_t started_ms;
    uint64_t shutdown_ms;   /* when shutdown was requested */
    bool first_shutdown_hb; /* the next heartbeat is the first with want_shutdown */
    bool ready_to_unfence;
    bool fenced; /* as the controller last said (true until unfenced) */
    bool caught_up;
    bool ever_registered;
    int exit_code;
    const char *exit_reason;
    kq_prng rng;
} kq_bl;

void kq_bl_init(kq_bl *l, const kq_bl_config *cfg, uint64_t now_ms);

/* Dynamic voters (KIP-853): the controllers are the voter set in force, learnt from the
 * metadata log; n 0 (not learnt yet): nothing is sent until they are. Hints and the leader
 * keep their meaning (a hint naming a controller no longer in the set is dropped). */
void kq_bl_set_controllers(kq_bl *l, const int32_t *ids, int n);

/* Called every loop iteration: what to send now (at most one request in flight), when to poll
 * again, or that the daemon must exit. metadata_offset: the last applied metadata offset (-1
 * none). */
void kq_bl_poll(kq_bl *l, uint64_t now_ms, int64_t metadata_offset, kq_bl_action *out);

/* The answer to the request in flight. error: 0, a transport error (REQUEST_TIMED_OUT,
 * NETWORK_EXCEPTION) or the controller's error code; leader_hint: the leader id in an error
 * answer (-1 none). Returns true when the state changed (the caller logs it). */
bool kq_bl_on_registration(kq_bl *l, uint64_t now_ms, int error, int64_t broker_epoch,
                           int32_t leader_hint);
bool kq_bl_on_heartbeat(kq_bl *l, uint64_t now_ms, int error, const kq_heartbeat_result *res,
                        int32_t leader_hint);

/* The metadata observer's view of the Raft leader (the active controller), -1 unknown. Only a
 * change counts: call it every iteration. */
void kq_bl_set_leader(kq_bl *l, int32_t leader_id);
/* The broker replayed the metadata log up to the high watermark: stop asking to be fenced. */
void kq_bl_set_ready(kq_bl *l);
/* SIGTERM: controlled shutdown. Returns true when the state changed. */
bool kq_bl_request_shutdown(kq_bl *l, uint64_t now_ms);

#endif
