/*
 * kq_raft: the KRaft core, a pure state machine.
 *
 * No I/O, no clock, no sockets, no LMDB, no malloc after kq_raft_new except where stated.
 * The host (the controller loop, the broker agent's metadata follower, or the simulator)
 * drives it with events that carry the time, and acts on the update each step returns:
 *
 *     kq_raft_update u;
 *     kq_raft_step(r, &ev, &u);
 *     1. if u.persist_qstate: write u.qstate durably;
 *     2. if u.truncate_to >= 0: remove every log entry at offset >= u.truncate_to (always a
 *        batch boundary of this node's log, see kq_raft_update.truncate_to);
 *     3. for each of u.append[0..nappend): write the batch (payload: see kq_raft_batch.kind);
 *     4. queue u.msgs[0..nmsgs) for sending; they may only be sent once 1.-3. of this step
 *        (and every earlier step) are durable;
 *     5. once the writes are durable, step a PERSISTED event with the new durable log end;
 *     6. if u.hw_changed, apply committed records below u.high_watermark;
 *     7. arm a timer for u.next_deadline_ms and step TICK when it fires.
 *
 * Snapshots (kraft-semantics.md 1.5 items 2 and 5, 1.7). The host writes snapshots of its
 * committed state and stores them as opaque files (include/kq/store.h); the core knows only
 * their ids (end offset exclusive, epoch of the record at end - 1) and sizes:
 *   - after writing a snapshot of committed state that ends at a batch boundary <= the HW
 *     and <= the durable log end, the host steps KQ_RAFT_EV_SNAPSHOT_TAKEN; the update may
 *     say u.compact_to: delete every log batch below it (kq_store_delete_prefix). The log
 *     start moves only to a snapshot; lagging replicas then get the snapshot;
 *   - a leader answers a Fetch below its log start (and the other 1.5 item 2/5 cases) with
 *     fetch_resp.snapshot = true and the latest snapshot id, and serves FETCH_SNAPSHOT_REQ:
 *     its FETCH_SNAPSHOT_RESP names a byte range [position, position + len) of the snapshot
 *     file that the host fills in (or, if the file vanished, replaces by an error response
 *     SNAPSHOT_NOT_FOUND);
 *   - a follower (voter or observer) that gets a snapshot id switches to FetchSnapshot: one
 *     request in flight, each answer gives u.snapshot_chunk (write the bytes at
 *     u.chunk_position of the .part file of u.snapshot_id; position 0 starts a fresh file).
 *     When the last byte has arrived the update also says u.install_snapshot: the host syncs
 *     and verifies the file (CRC), truncates its whole log, sets the log start and end to
 *     u.snapshot_id.end_offset and its epoch cache to {snapshot epoch: end offset}
 *     (kq_store_install_snapshot), loads its state from the snapshot, and then steps
 *     KQ_RAFT_EV_SNAPSHOT_INSTALLED (error 0, or non-zero if the file was bad: the core then
 *     fetches again). Until that event the core sends no Fetch and never campaigns.
 *     u.snapshot_abort: discard the .part of u.snapshot_id (leader change, snapshot gone).
 *   - the leader never installs a snapshot. FetchSnapshot counts toward check-quorum.
 *
 * Semantics follow ../shared/reference/kraft-semantics.md section 1 (KRaft): pull-based Fetch
 * with lastFetchedEpoch and diverging-epoch truncation, Vote with pre-vote (KIP-996),
 * BeginQuorumEpoch (resent every fetch_timeout/2), EndQuorumEpoch on resignation, check-quorum,
 * the high-watermark rule, observers.
 *
 * Offsets are per record (a batch of n records starting at base offset b covers b..b+n-1); the
 * log end offset (LEO) is exclusive. The core keeps offsets and epochs only (an epoch -> start
 * offset cache), never payloads.
 *
 * Ownership: the kq_raft object owns everything it allocates (its epoch cache grows with
 * realloc as epochs are added: the only allocation after kq_raft_new); pointers inside an update
 * (msgs, append) point into the core's buffers and stay valid until the next kq_raft_step or
 * kq_raft_free. Pointers inside an event are borrowed for the duration of the step only.
 */
#ifndef KQ_RAFT_H
#define KQ_RAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kq/epoch_cache.h"

#define KQ_RAFT_MAX_VOTERS 16
#define KQ_RAFT_MAX_OBSERVERS 64
#define KQ_RAFT_MAX_BATCHES 64 /* batches per Fetch response / per append */
#define KQ_RAFT_MAX_MSGS 256   /* messages one step can emit */
#define KQ_RAFT_MAX_PARKED 128 /* parked (long-poll) Fetch requests on a leader */
#define KQ_RAFT_NO_ID (-1)
/* The id of bootstrap server i (0-based) in Fetch requests and answers: -2, -3, ... */
#define KQ_RAFT_BOOTSTRAP_ID(i) (-2 - (int32_t)(i))
#define KQ_RAFT_SNAPSHOT_CHUNK_DEFAULT (1024 * 1024) /* bytes per FetchSnapshot answer */
#define KQ_RAFT_SNAPSHOT_CHUNK_MAX (8 * 1024 * 1024) /* codec limit for one chunk */

typedef struct kq_raft kq_raft;

typedef enum kq_raft_role {
    KQ_RAFT_UNATTACHED = 0, /* no leader known (may hold a vote: qstate.voted_id >= 0) */
    KQ_RAFT_PROSPECTIVE,    /* pre-vote round, epoch not bumped (KIP-996) */
    KQ_RAFT_CANDIDATE,
    KQ_RAFT_LEADER,
    KQ_RAFT_RESIGNED, /* leader that stepped down; in memory only */
    KQ_RAFT_FOLLOWER,
} kq_raft_role;

/* "unattached", "prospective", "candidate", "leader", "resigned", "follower"; static. */
const char *kq_raft_role_name(kq_raft_role role);

/* Durable election state, written before a transition takes effect (except to Resigned). */
typedef struct kq_raft_qstate {
    int32_t epoch;
    int32_t voted_id;  /* -1 none */
    int32_t leader_id; /* -1 none */
    /* the directory id of the candidate voted for (KIP-853); all zero: not known, and the vote
     * then stands for any directory of voted_id */
    uint8_t voted_dir[16];
} kq_raft_qstate;

/* A snapshot id: end_offset is exclusive (the snapshot holds offsets < end_offset), epoch is
 * the epoch of the record at end_offset - 1. {0, 0} means "none". */
typedef struct kq_raft_snapshot_id {
    int64_t end_offset;
    int32_t epoch;
} kq_raft_snapshot_id;

typedef struct kq_raft_config {
    int32_t node_id;
    uint8_t directory_id[16];           /* this node's directory id (all zero: not known) */
    int32_t voters[KQ_RAFT_MAX_VOTERS]; /* static voter set; node is an observer if absent */
    int n_voters; /* 0: no static set (kraft.version 1: the set comes from the log, or from the
                   * bootstrap records of kq storage format); then n_bootstrap must be > 0 or
                   * START must give a voter set */
    /* controller.quorum.bootstrap.servers (KIP-853): how many. A node that is not a voter and
     * knows no leader sends its Fetch to one of them, named KQ_RAFT_BOOTSTRAP_ID(i) (the host
     * maps the id to the i-th server's address; the answer comes from that id). An answer
     * naming a leader makes the node follow it by its real id. 0: discover among the voters. */
    int n_bootstrap;
    uint32_t election_timeout_ms;     /* controller.quorum.election.timeout.ms, 1000 */
    uint32_t fetch_timeout_ms;        /* controller.quorum.fetch.timeout.ms, 2000 */
    uint32_t election_backoff_max_ms; /* controller.quorum.election.backoff.max.ms, 1000 */
    uint32_t request_timeout_ms;      /* controller.quorum.request.timeout.ms, 2000 */
    uint32_t retry_backoff_ms;        /* controller.quorum.retry.backoff.ms, 20 */
    uint32_t fetch_max_wait_ms;       /* long-poll wait asked for in Fetch, 500 */
    uint64_t seed;                    /* PRNG seed for timeouts and back-off */
    /* This node as a voter (KIP-853): its controller listener endpoint and the kraft.version
     * range it supports. A voter whose entry in the set in force differs (or, at kraft.version
     * 0, has no directory id) sends the leader UpdateRaftVoter until it matches. Host "": never
     * (the node does not know its endpoint). */
    char host[256];
    int32_t port;
    int16_t kraft_min, kraft_max;
    uint32_t snapshot_chunk_bytes; /* max bytes per FetchSnapshot answer, 1 MiB (0: default;
                                    * capped at KQ_RAFT_SNAPSHOT_CHUNK_MAX) */
} kq_raft_config;

/* Fill cfg with Kafka's defaults (node_id -1, no voters). */
void kq_raft_config_defaults(kq_raft_config *cfg);

struct kq_voter_set; /* kq/voters.h */

/* A quorum record of KIP-853 at a log offset: a KRaftVersionRecord, a VotersRecord, or both at
 * one offset (the bootstrap's, at -1). The core keeps the voter set and kraft.version history
 * from these (kq/voters.h); it never reads payloads, so the host decodes them. */
typedef struct kq_raft_control {
    int64_t offset;                    /* -1: the bootstrap written by kq storage format */
    int16_t kraft_version;             /* a KRaftVersionRecord's level (0 or 1); -1: none */
    const struct kq_voter_set *voters; /* a VotersRecord's set (borrowed); NULL: none */
    /* the VotersRecord was written by kq metadata-quorum unsafe-recover: it replaces the set
     * whatever the one-change rule says */
    bool unsafe_recovery;
} kq_raft_control;

/* What the host recovered from disk, given with KQ_RAFT_EV_START. */
typedef struct kq_raft_persisted {
    kq_raft_qstate qstate;
    int64_t log_start_offset;     /* first offset in the log (0 unless compacted) */
    int64_t log_end_offset;       /* durable LEO */
    const kq_epoch_entry *epochs; /* epoch cache, ascending; borrowed */
    size_t n_epochs;
    /* Snapshots (all zero when there are none; the zero-initialised struct of a host that
     * does not snapshot stays valid). log_start_epoch: the epoch of the record at
     * log_start_offset - 1 (the epoch of the snapshot at the log start), 0 when the log
     * starts at 0. snapshot: the latest snapshot (end_offset <= log_end_offset and >=
     * log_start_offset), snapshot_size its file size in bytes (> 0 when there is one). */
    int32_t log_start_epoch;
    kq_raft_snapshot_id snapshot;
    int64_t snapshot_size;
    /* Every quorum record the node holds, ascending by offset (borrowed): the bootstrap's at
     * -1, the latest snapshot's (at its end - 1), then the log's, uncommitted ones included.
     * None: the static set of cfg.voters is in force (kraft.version 0). */
    const kq_raft_control *control;
    size_t n_control;
} kq_raft_persisted;

/* A record batch's metadata. The payload travels beside it, opaque to the core. */
typedef enum kq_raft_batch_kind {
    KQ_RAFT_BATCH_PROPOSED = 0,      /* leader: the host's payload from the PROPOSE event */
    KQ_RAFT_BATCH_LEADER_CHANGE = 1, /* leader: host encodes a LeaderChangeRecord (count 1) */
    KQ_RAFT_BATCH_FETCHED = 2,       /* follower: data/len point at the fetched payload */
    KQ_RAFT_BATCH_VOTERS = 3,        /* leader: host encodes the VotersRecord in `control` */
} kq_raft_batch_kind;

typedef struct kq_raft_batch {
    int64_t base_offset;
    int32_t epoch;
    int32_t count;
    kq_raft_batch_kind kind;
    const uint8_t *data; /* borrowed from the RECEIVE event (FETCHED only) */
    size_t len;
    uint32_t crc32c; /* as received (FETCHED only) */
    /* The batch's quorum records, at offsets in [base_offset, base_offset + count): for a
     * FETCHED batch the host decodes them from the payload (none: n_control 0); for the
     * leader's own VOTERS batch (count 1: a VotersRecord; 2 for the kraft.version upgrade:
     * KRaftVersion, then Voters) and a LEADER_CHANGE batch that writes the bootstrap set into the
     * log (count 3: LeaderChange, KRaftVersion, Voters records) the host encodes them. Borrowed for
     * the step. */
    const kq_raft_control *control;
    size_t n_control;
} kq_raft_batch;

typedef enum kq_raft_msg_type {
    KQ_RAFT_VOTE_REQ = 1,
    KQ_RAFT_VOTE_RESP,
    KQ_RAFT_BEGIN_EPOCH_REQ,
    KQ_RAFT_BEGIN_EPOCH_RESP,
    KQ_RAFT_END_EPOCH_REQ,
    KQ_RAFT_END_EPOCH_RESP,
    KQ_RAFT_FETCH_REQ,
    KQ_RAFT_FETCH_RESP,
} kq_raft_msg_type;

/* FetchSnapshot (API 59). These two values of kq_raft_msg_type are defined outside the enum
 * list on purpose: hosts (the simulator) keep exhaustive switches over the eight types above
 * compiling under -Wswitch -Werror. Compare with ==, or switch on (int)m->type. A response's
 * type is its request's + 1, as for the other pairs. */
#define KQ_RAFT_FETCH_SNAPSHOT_REQ ((kq_raft_msg_type)9)
#define KQ_RAFT_FETCH_SNAPSHOT_RESP ((kq_raft_msg_type)10)
/* Voter changes (KIP-853: AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter), outside the enum for
 * the same reason. A leader answers them; the requester may be a client (from -1), which only
 * the token names. ADD and REMOVE are answered once the new set commits (or fail with
 * REQUEST_TIMED_OUT after request_timeout_ms, the change possibly still committing), UPDATE at
 * once. */
#define KQ_RAFT_ADD_VOTER_REQ ((kq_raft_msg_type)11)
#define KQ_RAFT_ADD_VOTER_RESP ((kq_raft_msg_type)12)
#define KQ_RAFT_REMOVE_VOTER_REQ ((kq_raft_msg_type)13)
#define KQ_RAFT_REMOVE_VOTER_RESP ((kq_raft_msg_type)14)
#define KQ_RAFT_UPDATE_VOTER_REQ ((kq_raft_msg_type)15)
#define KQ_RAFT_UPDATE_VOTER_RESP ((kq_raft_msg_type)16)
/* AddRaftVoter, RemoveRaftVoter or UpdateRaftVoter (their u.voter_req names a voter). */
static inline bool kq_raft_msg_is_voter_change(kq_raft_msg_type t)
{
    return t == KQ_RAFT_ADD_VOTER_REQ || t == KQ_RAFT_REMOVE_VOTER_REQ ||
           t == KQ_RAFT_UPDATE_VOTER_REQ;
}
/* Vote, Begin/EndQuorumEpoch, Fetch, FetchSnapshot or a voter change (else an answer). */
bool kq_raft_msg_is_request(kq_raft_msg_type t);
#define KQ_RAFT_MSG_TYPE_MAX 16
#define KQ_RAFT_VOTER_ERROR_MAX 160 /* voter change answers' error_message bytes */

/*
 * One message. Requests are answered by exactly one response:
 * - a request the core RECEIVEs carries a host-chosen `token`; the core's response carries the
 *   same token and `to` = the requester, so the host can reply on the right connection;
 * - a request the core emits goes to `to`; the host must eventually RECEIVE exactly one
 *   response for it (from = that peer): the peer's answer, or a response of the same type with
 *   `error` = KQ_ERR_REQUEST_TIMED_OUT / KQ_ERR_NETWORK_EXCEPTION when the transport failed or
 *   request_timeout_ms passed. The core keeps at most one request of each type in flight per
 *   peer.
 *
 * `epoch` and `leader_id` are the sender's view (request: sender's epoch; response: the
 * responder's current epoch and known leader, -1 if none). Exception: in a VOTE_REQ `epoch` is
 * the candidate epoch, which for a pre-vote is the sender's epoch + 1.
 */
typedef struct kq_raft_msg {
    kq_raft_msg_type type;
    int32_t from;
    int32_t to;
    uint64_t token;
    int error; /* kq_err; responses only */
    int32_t epoch;
    int32_t leader_id;
    /* KIP-853 keys (all zero: not known). from_dir: the sender's directory id (a Fetch from a
     * voter's id with another directory is an observer's; a vote goes to the candidate's key).
     * to_dir: in a Vote or BeginQuorumEpoch request, the receiver's directory id as the sender
     * knows it; a node with another one answers INVALID_VOTER_KEY (the request was meant for
     * an earlier incarnation of it). */
    uint8_t from_dir[16];
    uint8_t to_dir[16];
    union {
        struct {
            int32_t candidate_id;
            int32_t last_epoch;
            int64_t last_offset; /* candidate's LEO */
            bool pre_vote;
        } vote_req;
        struct {
            bool granted;
        } vote_resp;
        struct {
            int32_t preferred[KQ_RAFT_MAX_VOTERS]; /* other voters, most caught up first */
            int n_preferred;
        } end_req;
        struct {
            int64_t fetch_offset;
            int32_t last_fetched_epoch;
            int32_t max_wait_ms;
        } fetch_req;
        struct {
            int64_t high_watermark; /* -1 unknown */
            int64_t log_start_offset;
            bool diverging;
            int32_t diverging_epoch;
            int64_t diverging_end_offset;
            /* Emitted by a leader: the host fills whole batches in [records_from, records_to)
             * from its store, up to its byte limit. records_from == records_to: no records. */
            int64_t records_from;
            int64_t records_to;
            /* Received by a follower: the batches the host decoded (borrowed). */
            const kq_raft_batch *batches;
            size_t n_batches;
            /* SNAPSHOT answer (1.5 items 2/5): fetch the leader's latest snapshot `snapshot`
             * with FetchSnapshot; no records, no divergence. */
            bool snapshot;
            kq_raft_snapshot_id snapshot_id;
        } fetch_resp;
        struct {
            kq_raft_snapshot_id snapshot_id;
            int64_t position; /* byte offset in the snapshot file */
            int32_t max_bytes;
        } fetch_snapshot_req;
        struct {
            /* ADD / UPDATE: the voter, its endpoint and kraft.version range; REMOVE: its key
             * (id and directory id; the rest ignored). Borrowed for the step. */
            const struct kq_voter *voter;
        } voter_req;
        struct {
            char error_message[KQ_RAFT_VOTER_ERROR_MAX]; /* why, when error != 0 */
        } voter_resp;
        struct {
            kq_raft_snapshot_id snapshot_id;
            int64_t size;     /* total bytes of the snapshot file */
            int64_t position; /* of the first byte of this chunk */
            /* Emitted by a leader: the host sends bytes [position, position + len) of the
             * snapshot file snapshot_id (data is NULL). Received by a follower: the chunk
             * (data borrowed for the step; may be NULL when len is 0). */
            const uint8_t *data;
            size_t len;
        } fetch_snapshot_resp;
    } u;
} kq_raft_msg;

typedef enum kq_raft_event_type {
    KQ_RAFT_EV_START = 1,      /* once, first: recovered state */
    KQ_RAFT_EV_TICK,           /* time passed (at or after next_deadline_ms) */
    KQ_RAFT_EV_RECEIVE,        /* a request or a response arrived */
    KQ_RAFT_EV_PERSISTED,      /* the log is durable up to `persisted_end` (and qstate written) */
    KQ_RAFT_EV_PROPOSE,        /* leader: append `propose_count` records as one batch */
    KQ_RAFT_EV_RESIGN,         /* graceful shutdown: resign (leader) and stop voting; a non-leader
                                * stops campaigning and voting without changing its qstate */
    KQ_RAFT_EV_SNAPSHOT_TAKEN, /* u.snapshot: the host wrote a snapshot (see top) */
    KQ_RAFT_EV_SNAPSHOT_INSTALLED, /* u.snapshot: the host installed the fetched snapshot
                                    * named by u.install_snapshot (error 0), or could not
                                    * (error != 0, e.g. KQ_ERR_CORRUPT_MESSAGE) */
    KQ_RAFT_EV_UPGRADE_KRAFT,      /* leader: u.upgrade, `kq features upgrade --feature
                                    * kraft.version=1`; result in the update's upgrade_error */
} kq_raft_event_type;

/* Payload of SNAPSHOT_TAKEN / SNAPSHOT_INSTALLED. */
typedef struct kq_raft_snapshot_event {
    kq_raft_snapshot_id id;
    int64_t size; /* TAKEN: file size in bytes (> 0); INSTALLED: ignored */
    int error;    /* INSTALLED only: 0 installed, else the install failed */
    /* INSTALLED only: the snapshot's quorum records (at id.end_offset - 1; borrowed). */
    const kq_raft_control *control;
    size_t n_control;
} kq_raft_snapshot_event;

typedef struct kq_raft_event {
    kq_raft_event_type type;
    uint64_t now_ms; /* monotonic time, never decreasing */
    union {
        kq_raft_persisted start;
        const kq_raft_msg *msg;
        int64_t persisted_end;
        int32_t propose_count;
        kq_raft_snapshot_event snapshot;
        struct {
            int16_t level;      /* the kraft.version wanted: 1 (0 is where every cluster starts) */
            bool validate_only; /* check, append nothing */
        } upgrade;
    } u;
} kq_raft_event;

typedef struct kq_raft_update {
    bool persist_qstate;
    kq_raft_qstate qstate;

    /* -1: none. Otherwise a batch boundary of this node's own log. On DivergingEpoch(E, end)
     * the target is T = min(end, own end for E, LEO); the own end for an epoch the node does
     * not hold, with no cached epoch <= E, is the start of its first cached epoch (its log
     * start). T is used when it is a boundary the core knows (its LEO, log start, a start
     * offset in its epoch cache, or the highest HW it has known since it started), or when the
     * node holds epoch E itself (both logs hold a prefix of the same epoch-E batches, so the
     * leader's end of E is a boundary of ours). Otherwise (own largest epoch E' < E) it
     * truncates less deep, to its own end of E' (the start of its next epoch: everything above
     * is of epochs the leader does not hold), and the next Fetch gets the exact end of E'. It
     * never truncates deeper than T: that could drop entries committed without its knowledge.
     * A target below the HW is never truncated: the update is fatal instead. */
    int64_t truncate_to;
    kq_raft_batch append[KQ_RAFT_MAX_BATCHES];
    size_t n_append;

    kq_raft_msg *msgs; /* core-owned; valid until the next step */
    size_t n_msgs;

    bool hw_changed;
    int64_t high_watermark; /* current HW, -1 unknown */

    bool role_changed;
    kq_raft_role role;
    int32_t epoch;
    int32_t leader_id;

    /* PROPOSE result: the batch's base offset and epoch, or error NOT_LEADER_OR_FOLLOWER. */
    int propose_error;
    /* UPGRADE_KRAFT result: 0 (appended, or nothing to do), NOT_LEADER_OR_FOLLOWER,
     * REQUEST_TIMED_OUT (a change in flight, the epoch not committed yet), INVALID_UPDATE_VERSION
     * (a level other than 0 or 1, a downgrade, a voter that has not reported its directory id
     * and a range including 1), with the reason in upgrade_message. */
    int upgrade_error;
    char upgrade_message[KQ_RAFT_VOTER_ERROR_MAX];
    int64_t propose_base_offset;
    int32_t propose_epoch;

    uint64_t next_deadline_ms; /* step TICK at this time at the latest */

    /* Set when the step hit a safety violation that must stop the node (e.g. a leader asked
     * it to truncate below its high watermark). The host logs fatal_reason and exits. */
    bool fatal;
    const char *fatal_reason;

    /* -1: none. Otherwise delete every log batch below this offset (a snapshot end, at a
     * batch boundary): kq_store_delete_prefix. Not urgent: may follow the other writes. */
    int64_t compact_to;
    /* Follower snapshot transfer, all about the snapshot u.snapshot_id (see top). In one
     * update, act in this order: abort, chunk, install. */
    kq_raft_snapshot_id snapshot_id;
    bool snapshot_abort; /* discard the .part file of snapshot_id */
    bool snapshot_chunk; /* write chunk_data[0..chunk_len) at chunk_position (0: new file) */
    int64_t chunk_position;
    const uint8_t *chunk_data; /* borrowed from the RECEIVE event */
    size_t chunk_len;
    bool install_snapshot; /* the file is complete (snapshot_size bytes): install it, then
                            * step KQ_RAFT_EV_SNAPSHOT_INSTALLED */
    int64_t snapshot_size;
} kq_raft_update;

/* Per-replica state on the leader, for DescribeQuorum. Timestamps in the core's clock
 * (now_ms of events); 0 = never. */
typedef struct kq_raft_replica {
    int32_t id;
    /* KIP-853: a voter's from the set in force, an observer's from its Fetch requests (a
     * controller formatted for dynamic voters sends one, a broker none); all zero: not known */
    uint8_t directory_id[16];
    int64_t log_end_offset; /* -1 unknown */
    uint64_t last_fetch_ms;
    uint64_t last_caught_up_ms;
} kq_raft_replica;

typedef struct kq_raft_status {
    kq_raft_role role;
    int32_t node_id;
    bool is_voter;
    int16_t kraft_version; /* in force: 0 static voters, 1 voters in the log (KIP-853) */
    int32_t epoch;
    int32_t leader_id;
    int32_t voted_id;
    int64_t high_watermark; /* -1 unknown */
    /* Follower or observer: the highest high watermark the leader it follows reported (its
     * own high_watermark stays at or below its durable log end), -1 none yet. */
    int64_t leader_high_watermark;
    int64_t log_start_offset;
    int64_t log_end_offset;
    int64_t durable_end_offset;
    int32_t last_epoch;           /* epoch of the last log entry, 0 if empty */
    kq_raft_snapshot_id snapshot; /* latest snapshot this node has, {0,0} none */
    bool fetching_snapshot;       /* follower: FetchSnapshot transfer in progress */
    bool installing_snapshot;     /* follower: waiting for SNAPSHOT_INSTALLED */
    /* Follower or observer: the leader it follows answered a Fetch (or FetchSnapshot) since it
     * started following it, last at leader_answer_ms (the core's clock). What readiness and
     * kq_raft_leader_fetch_age_seconds go by: leader_id alone may name a leader that is gone
     * (a prospective node keeps it to refuse votes in that epoch). */
    bool leader_answered;
    uint64_t leader_answer_ms;
    /* Leader only (n_voters = 0 elsewhere): voters with the leader first (among the observers
     * once it removed itself from the voters), then observers. */
    kq_raft_replica voters[KQ_RAFT_MAX_VOTERS];
    int n_voters;
    kq_raft_replica observers[KQ_RAFT_MAX_OBSERVERS];
    int n_observers;
} kq_raft_status;

/* Age of this node's last answer from the leader it follows, in ms at `now` (the core's
 * clock): 0 on the leader, -1 when it follows none that has answered (no leader known, a
 * candidate or prospective node, or a follower whose leader has not answered yet). The
 * kq_raft_leader_fetch_age_seconds metric and controllers' /readyz use it. */
static inline int64_t kq_raft_leader_answer_age_ms(const kq_raft_status *st, uint64_t now)
{
    if (st->role == KQ_RAFT_LEADER)
        return 0;
    if (!st->leader_answered)
        return -1;
    return now > st->leader_answer_ms ? (int64_t)(now - st->leader_answer_ms) : 0;
}

/* Create a core; it does nothing until KQ_RAFT_EV_START. Returns NULL on bad config
 * (errbuf says why) or out of memory. Caller owns the result; free with kq_raft_free. */
kq_raft *kq_raft_new(const kq_raft_config *cfg, char *errbuf, size_t errlen);
void kq_raft_free(kq_raft *r);

/* Step one event. Always fills *u (zeroed first). Returns 0, or KQ_ERR_INVALID_REQUEST for an
 * event that is malformed for the core (the update is then empty). */
int kq_raft_step(kq_raft *r, const kq_raft_event *ev, kq_raft_update *u);

void kq_raft_get_status(const kq_raft *r, kq_raft_status *out);

/* The voter set in force (valid until the next step) and, in *record_offset when not NULL, the
 * offset of the VotersRecord it came from: -1 the bootstrap's, -2 the static cfg.voters. */
const struct kq_voter_set *kq_raft_voters(const kq_raft *r, int64_t *record_offset);

/* What a snapshot ending after `offset` must hold of the quorum (KIP-853): the kraft.version
 * in force there, and (at kraft.version 1) the voter set in force there; NULL at kraft.version
 * 0 (the static set). Valid until the next step. */
const struct kq_voter_set *kq_raft_voters_at(const kq_raft *r, int64_t offset,
                                             int16_t *kraft_version);

/* Epoch and end offset for `epoch` per the epoch cache: the largest cached epoch <= epoch and
 * the start of the next one (or the LEO). Returns false if no cached epoch is <= epoch. */
bool kq_raft_end_offset_for_epoch(const kq_raft *r, int32_t epoch, int32_t *out_epoch,
                                  int64_t *out_end);

#endif
