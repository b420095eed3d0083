/*
 * Internal to the Raft core (common/raft): the state behind kq_raft and the functions its
 * files share. raft.c holds the helpers, the role transitions, start-up and the API;
 * raft_election.c the Vote and Begin/EndQuorumEpoch handlers and the election's sending;
 * raft_fetch.c replication (Fetch on both sides); raft_snapshot.c FetchSnapshot and the
 * snapshot events; raft_timers.c the timers and the next deadline. Pure, like the core: no I/O,
 * no clock.
 *
 * Ownership: as in raft.c (struct kq_raft owns its epoch cache and its message buffer).
 */
#ifndef KQ_RAFT_INTERNAL_H
#define KQ_RAFT_INTERNAL_H

#include "kq/raft.h"
#include "kq/error.h"
#include "kq/quorum.h"
#include "kq/util.h"
#include "kq/voters.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDLE_DEADLINE_MS 60000u
#define OBSERVER_EXPIRY_MS 300000u
#define BACKOFF_UNIT_MS 100u
#define MAX_TIMER_ROUNDS 16
#define LEADER_SLOT KQ_RAFT_MAX_VOTERS

typedef struct peer {
    int32_t id;
    /* requests this node emitted to the peer and not yet answered */
    bool vote_inflight;
    bool vote_inflight_pre;
    uint32_t vote_inflight_round;
    bool begin_inflight;
    bool end_inflight;
    bool fetch_inflight;
    bool snap_inflight; /* FETCH_SNAPSHOT_REQ */
    /* election round */
    int8_t vote; /* 0 unrecorded, 1 granted, -1 rejected */
    /* resigned: END_EPOCH answered */
    bool end_acked;
    /* leader-side replica state */
    int64_t end_offset;
    uint64_t last_fetch_ms;
    uint64_t last_caught_up_ms;
    uint64_t prev_fetch_ms;
    int64_t prev_fetch_leo;
    int64_t hw_sent; /* high watermark in the last records answer sent to it (-1: none) */
    bool cq_fetched;
} peer;

typedef struct observer {
    bool used;
    int32_t id;
    uint8_t dir[16]; /* its directory id: another incarnation of the same id is another slot */
    int64_t end_offset;
    uint64_t last_fetch_ms;
    uint64_t last_caught_up_ms;
    uint64_t prev_fetch_ms;
    int64_t prev_fetch_leo;
    int64_t hw_sent; /* as peer.hw_sent */
} observer;

/* The voter change (Add or Remove) a leader has appended and answers once it commits. */
typedef struct voter_change {
    bool active;
    kq_raft_msg_type type; /* KQ_RAFT_ADD_VOTER_REQ or KQ_RAFT_REMOVE_VOTER_REQ */
    uint64_t token;
    int32_t from;
    int64_t offset; /* of its VotersRecord */
    uint64_t deadline;
} voter_change;

typedef struct parked {
    bool used;
    uint64_t token;
    int32_t from;
    int64_t fetch_offset;
    int64_t hw_at_park;
    uint64_t deadline;
} parked;

struct kq_raft {
    kq_raft_config cfg;
    /* The voter sets by log offset (kq/voters.h), over cfg.voters as the static set, and a
     * copy of the one in force; peers[i] is the replica state of voters.v[i]. */
    kq_voter_history vh;
    kq_voter_set voters;
    /* leader: the change in flight, and the quorum records of this step's own batch */
    voter_change change;
    /* leader: an AddRaftVoter waiting for a Fetch from the new voter's key that arrives after
     * it (its caught-up time later than `since`), until `deadline` */
    struct {
        bool active;
        uint64_t token;
        int32_t from;
        kq_voter voter;
        uint64_t since, deadline;
    } add_wait;
    kq_voter_set own_set;
    kq_raft_control own_control[2];
    /* leader at kraft.version 0: what each static voter reported with UpdateRaftVoter (its
     * directory id, endpoint, range), for the upgrade to 1 */
    kq_voter reported[KQ_RAFT_MAX_VOTERS];
    bool has_reported[KQ_RAFT_MAX_VOTERS];
    /* voter: this node as cfg describes it, and its UpdateRaftVoter to the leader */
    kq_voter self_voter;
    bool update_inflight;
    uint64_t update_at;
    int self_idx; /* index in voters, -1 for an observer */
    bool started;
    bool shutdown; /* EV_RESIGN seen: never campaign, never grant */
    kq_prng prng;
    uint64_t now;

    kq_raft_role role;
    int32_t epoch;
    int32_t voted_id;
    uint8_t voted_dir[16];
    int32_t leader_id;

    /* log */
    int64_t log_start;
    int32_t start_epoch; /* epoch of the record at log_start - 1 (0 when log_start is 0) */
    int64_t leo;
    int64_t durable_end;
    kq_epoch_cache epochs; /* kq/epoch_cache.h */
    int64_t hw;
    /* Highest HW this node has known since it started, kept when a new leader's HW goes back
     * to unknown: committed, so never truncated and a batch boundary. -1 unknown. */
    int64_t committed;

    /* elections */
    uint32_t round;
    int retries;
    uint64_t election_deadline;
    uint64_t backoff_deadline; /* 0: not backing off */
    uint64_t vote_retry_at;

    /* follower / observer */
    uint64_t fetch_deadline;
    uint64_t fetch_retry_at;
    bool fetched_ok; /* a successful Fetch response since becoming follower */
    /* The latest Fetch to the leader failed in transport (refused, reset, timed out): the
     * leader may be gone, so a pre-vote need not be refused on its behalf. */
    bool fetch_failing;
    uint64_t last_fetch_ok_ms;
    int64_t leader_hw; /* latest HW the leader reported, -1 unknown */
    int discovery_idx; /* observer without leader: voter (or bootstrap server) index fetched
                        * from */
    bool boot_inflight[KQ_RAFT_MAX_VOTERS]; /* a Fetch to bootstrap server i is in flight */

    /* leader */
    int64_t epoch_start;
    uint64_t cq_deadline;
    uint64_t begin_resend_at;
    observer observers[KQ_RAFT_MAX_OBSERVERS];
    parked parked[KQ_RAFT_MAX_PARKED];
    size_t n_parked;

    /* snapshots: [0] latest, [1] the one before (end_offset 0: none) */
    kq_raft_snapshot_id snaps[2];
    int64_t snap_sizes[2];
    uint32_t chunk_bytes;
    /* follower snapshot transfer */
    bool snap_fetching;   /* sending FETCH_SNAPSHOT_REQ for snap_fetch_id */
    bool snap_installing; /* install_snapshot emitted, waiting for SNAPSHOT_INSTALLED */
    kq_raft_snapshot_id snap_fetch_id;
    int64_t snap_fetch_pos;
    int64_t snap_fetch_size; /* -1 until the first answer */

    /* resigned */
    uint64_t end_retry_at;
    int32_t preferred[KQ_RAFT_MAX_VOTERS];
    int n_preferred;

    /* peers[i] for voters.v[i]; peers[LEADER_SLOT]: the leader this node follows while that
     * leader is not in its voter set (a leader whose removal has not committed yet) */
    peer peers[KQ_RAFT_MAX_VOTERS + 1];
    /* requests in flight to nodes whose peer entry went (raft_peer_park) */
    peer gone_peers[KQ_RAFT_MAX_VOTERS + 1];

    /* the current step */
    kq_raft_update *u;
    kq_raft_msg msgs[KQ_RAFT_MAX_MSGS];
};

/* ---- shared between the core's files */

/* raft.c: helpers, role transitions */
uint64_t raft_prng_below(kq_raft *r, uint64_t n);
bool raft_is_voter(const kq_raft *r);
/* The node runs for leader when no leader is known: a voter, or a node that the last
 * VotersRecord it holds removed while that record is not known to be committed (raft_reconfig.c) */
bool raft_campaigns(const kq_raft *r);
int raft_voter_index(const kq_raft *r, int32_t id);
int raft_peer_index(const kq_raft *r, int32_t id);
int raft_voter_key_index(const kq_raft *r, int32_t id, const uint8_t dir[16]);
bool raft_meant_for_me(const kq_raft *r, const kq_raft_msg *m);
bool raft_may_lead(const kq_raft *r, int32_t id);
void raft_track_leader(kq_raft *r, int32_t leader);
void raft_peer_reset(peer *p, int32_t id);
/* A peer entry goes (its node left the voter set, or the leader slot is reused) while requests
 * to that node are in flight: their answers are still to come, and the host's contract is one
 * request of a type per node in flight. raft_peer_park keeps the in-flight marks of p until the
 * answers come (raft_parked_answer, for an answer from a node with no entry) or the node gets
 * an entry again (raft_peer_unpark moves them into it). */
void raft_peer_park(kq_raft *r, const peer *p);
void raft_peer_unpark(kq_raft *r, peer *p);
/* An answer of this request type from node id, which has no voter entry: its parked mark goes
 * (or the leader slot's, for node id). */
void raft_parked_answer(kq_raft *r, int32_t id, kq_raft_msg_type req_type);
int32_t raft_last_epoch(const kq_raft *r);
bool raft_log_up_to_date(const kq_raft *r, int32_t cand_epoch, int64_t cand_end);
bool raft_end_offset_for_epoch(const kq_raft *r, int32_t epoch, int32_t *out_epoch,
                               int64_t *out_end);
int32_t raft_epoch_at(const kq_raft *r, int64_t off);
bool raft_snap_id_eq(kq_raft_snapshot_id a, kq_raft_snapshot_id b);
void raft_set_fatal(kq_raft *r, const char *reason);
uint64_t raft_random_election_timeout(kq_raft *r);
void raft_add_epoch(kq_raft *r, int32_t epoch, int64_t start);
void raft_truncate_epochs(kq_raft *r, int64_t end);
bool raft_can_follow_in_epoch(const kq_raft *r, int32_t leader);
kq_raft_msg *raft_emit(kq_raft *r, kq_raft_msg_type type, int32_t to);
kq_raft_msg *raft_emit_resp(kq_raft *r, const kq_raft_msg *req, kq_raft_msg_type type, int err);
int64_t *raft_hw_sent_of(kq_raft *r, int32_t id);
void raft_send_fetch_resp_records(kq_raft *r, int32_t to, uint64_t token, int64_t from_off,
                                  bool delivered);
void raft_send_fetch_error(kq_raft *r, int32_t to, uint64_t token, int err);
void raft_abort_snapshot_fetch(kq_raft *r);
void raft_leader_update_hw(kq_raft *r);
void raft_start_backoff(kq_raft *r);
void raft_check_votes(kq_raft *r);
void raft_become_unattached(kq_raft *r, int32_t epoch, int32_t voted);
void raft_grant_vote(kq_raft *r, int32_t id, const uint8_t dir[16]);
void raft_become_follower(kq_raft *r, int32_t epoch, int32_t leader);
void raft_become_prospective(kq_raft *r);
/* A prospective node's pre-vote was refused by a voter that follows a live leader at an epoch
 * below this node's: pre-votes will be refused for as long as that leader lives, and this
 * node's epoch cannot go back; a real election at a higher epoch (which the leader joins when
 * it sees the epoch) is the only way to bring them together. */
void raft_candidate_past_a_lower_leader(kq_raft *r);
void raft_become_resigned(kq_raft *r);
void raft_on_higher_epoch(kq_raft *r, int32_t epoch, int32_t leader);

/* raft_election.c: elections */
void raft_on_vote_req(kq_raft *r, const kq_raft_msg *m);
void raft_on_vote_resp(kq_raft *r, const kq_raft_msg *m);
void raft_on_begin_req(kq_raft *r, const kq_raft_msg *m);
void raft_on_begin_resp(kq_raft *r, const kq_raft_msg *m);
void raft_on_end_req(kq_raft *r, const kq_raft_msg *m);
void raft_on_end_resp(kq_raft *r, const kq_raft_msg *m);
void raft_pump_votes(kq_raft *r);
void raft_pump_resigned(kq_raft *r);
void raft_stop_campaign(kq_raft *r);

/* raft_fetch.c: replication */
observer *raft_observer_slot(kq_raft *r, int32_t id, const uint8_t dir[16]);
void raft_check_quorum_mark(kq_raft *r, int i);
void raft_on_fetch_req(kq_raft *r, const kq_raft_msg *m);
void raft_follower_update_hw(kq_raft *r);
bool raft_is_transport_error(int err);
void raft_fetch_backoff(kq_raft *r);
void raft_on_fetch_resp(kq_raft *r, const kq_raft_msg *m);
void raft_pump_leader(kq_raft *r);
void raft_pump_fetch(kq_raft *r);

/* raft_snapshot.c: snapshots */
void raft_on_fetch_snapshot_req(kq_raft *r, const kq_raft_msg *m);
void raft_begin_snapshot_fetch(kq_raft *r, kq_raft_snapshot_id id, int32_t leader_epoch);
void raft_on_fetch_snapshot_resp(kq_raft *r, const kq_raft_msg *m);
void raft_pump_fetch_snapshot(kq_raft *r, int t);
void raft_compact(kq_raft *r, int64_t end, int32_t epoch);
bool raft_snapshot_taken_ok(const kq_raft *r, const kq_raft_snapshot_event *e);
void raft_on_snapshot_taken(kq_raft *r, const kq_raft_snapshot_event *e);
void raft_on_snapshot_installed(kq_raft *r, const kq_raft_snapshot_event *e);

/* raft_reconfig.c: membership */
void raft_apply_voters(kq_raft *r);
/* Quorum records well formed for offsets in [from, to): ascending (when asked), kraft.version
 * -1..1, valid sets (kq_voters_check). */
bool raft_control_ok(const kq_raft_control *c, size_t n, int64_t from, int64_t to, bool ascending);
/* Into the history, in order; the set in force and this node's role follow. 0, or the
 * history's refusal (why says it; the records before it stay). */
int raft_add_control(kq_raft *r, const kq_raft_control *c, size_t n, char *why, size_t whylen);
void raft_voters_truncate(kq_raft *r, int64_t end);  /* the log now ends at `end` */
void raft_voters_compact(kq_raft *r, int64_t start); /* the log now starts at `start` */
bool raft_voters_dynamic(const kq_raft *r);          /* kraft.version >= 1 in force */
void raft_on_voter_req(kq_raft *r, const kq_raft_msg *m);
void raft_pump_reconfig(kq_raft *r);
void raft_fail_voter_change(kq_raft *r, int err, const char *why);
void raft_leader_start_control(kq_raft *r, kq_raft_batch *b);
void raft_upgrade_kraft(kq_raft *r, int16_t level, bool validate_only);
void raft_on_update_voter_resp(kq_raft *r, const kq_raft_msg *m);
bool raft_update_voter_due(const kq_raft *r);
void raft_pump_update_voter(kq_raft *r);

/* raft_timers.c: timers */
void raft_resign(kq_raft *r);
bool raft_fire_timers(kq_raft *r);
uint64_t raft_next_deadline(kq_raft *r);

#endif
