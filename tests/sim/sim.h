/*
 * kq_sim: deterministic simulator of the whole cluster (docs/testing.md).
 *
 * One process runs 1-5 voters, each a real kq_raft core driven by the production Raft host
 * (kq/raft_host.h) over simulated parts: a virtual clock per node, a simulated network
 * (latency, loss, duplication, reordering, clogging, partitions) and simulated disks (durable
 * image + pending writes that become durable after a sampled latency; a crash drops the pending
 * tail, or keeps some of it: a torn write); processes pause, syncs are sometimes slow, voters'
 * clocks drift in some seeds. Everything is drawn from one 64-bit seed, so a run is
 * reproducible from (seed, options, commit). opts.controller false (--raft-only) runs the
 * quorum alone, with 0-3 observers.
 *
 * A run has a safety phase (random faults) and a liveness phase (faults stop, the network
 * heals, crashed nodes restart; a single leader, a new commit and identical logs on every node
 * (above the later log start: below it a snapshot stands in) are required within a time
 * budget; in the whole cluster also every broker unfenced, every controller ready and the admin
 * client's retried operations answered). Invariants are checked after every core step; the first
 * violation stops the run.
 *
 * The whole cluster (opts.controller, the default): every voter runs the production controller node
 * (controller/node.h, as kq-controller does): it replays the committed log, the leader
 * activates and runs the controller APIs (kq_op_run) and timers (fencing, leaderless scan,
 * rebalance), and answers wait for their records to commit. 3-6 simulated brokers, each
 * with its own drifting clock, run the production broker lifecycle (broker-agent/lifecycle.h:
 * registration, heartbeats, back-off, controller choice, fencing state) and, as the Raft
 * observers of the run (node ids 101.., one per broker), the production metadata observer: the
 * Raft host over a simulated disk and the broker's image (broker-agent/metadata.h), replayed
 * from what is committed and durable, which gives the heartbeat's metadata offset, readiness
 * to unfence and the partitions the broker leads; and the production replica manager and data
 * plane (broker-agent/data_plane.h) on an in-memory partition-log disk (tests/lib/plog_mem.h),
 * its follower Fetches and AlterPartitions over the simulated network. A broker crashes and
 * restarts as a process (observer, lifecycle and data plane together, what its disks had not
 * committed lost, a new incarnation). Brokers also send made-up AlterPartitions (ISR
 * shrink/expand from their own image, sometimes with stale epochs) for the partitions they
 * lead outside the clients' topic; an admin client creates and deletes topics, alters configs,
 * runs elections and controlled shutdowns, retrying each operation as a Kafka admin client
 * does; in half of the seeds the controllers write snapshots, which lagging controllers and
 * brokers fetch, install and load (and restarts load); producers (idempotent
 * acks=all, acks=1, acks=0) and a consumer use the data-plane API on topic t0. All of it is encoded
 * with the controller codec (include/kq/ctl_codec.h) and travels over the lossy, partitionable
 * network, following NOT_CONTROLLER hints. A reference image replays the committed log with
 * checks before every record; after every event: partition invariants (sim_inv.h), epochs
 * never decrease, no fenced broker added to an ISR, every controller's committed image hash
 * equals the reference at the same offset, every broker's image too (and a broker never
 * applies past the committed end), a consumer never gets records above the high watermark,
 * and every AlterPartition a broker saw
 * acknowledged stays in the committed state; after every broker loop: at most one leader per
 * partition leader epoch, a leader's high watermark never goes back in its epoch, and what a
 * leader exposes below its high watermark matches (and, in the newest epoch, includes) what
 * every earlier leader exposed. At the end all images must be identical, every
 * record acknowledged with acks=all is in its leader's log (once, in order), every record read
 * is still there, and replicas agree below their high watermarks (partitions that had an
 * unclean election are exempt from the loss checks).
 *
 * Ownership: kq_sim_run borrows opts (and opts->out) for the duration of the call and fills
 * the caller's result; it allocates nothing that outlives the call.
 */
#ifndef KQ_SIM_H
#define KQ_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define KQ_SIM_MAX_VOTERS 5
#define KQ_SIM_MAX_OBSERVERS 3
#define KQ_SIM_TRACE_KEEP 200 /* trace lines dumped on failure */
#define KQ_SIM_MAX_BROKERS 6

/* Deliberately broken hosts, to prove the checkers catch what they claim to catch: one row
 * per self-test (enum, name, needs controller mode, what it breaks). */
#define KQ_SIM_BUGS(X)                                                                             \
    X(EARLY_ACK, "early-ack", false, "a disk that reports batches durable before they are")        \
    X(LOSE_SYNCED, "lose-synced", false, "a crash also loses the last durable batch")              \
    X(CTL_EARLY_REPLY, "ctl-early-reply", true,                                                    \
      "the active controller takes its log end for committed")                                     \
    X(CTL_NO_ROLLBACK, "ctl-no-rollback", true,                                                    \
      "uncommitted records stay in the image after leadership is lost")                            \
    X(CTL_CLOCK_JUMP, "ctl-clock-jump", true,                                                      \
      "the active controller's clock jumps a session timeout forward")                             \
    X(BROKER_UNCOMMITTED, "broker-uncommitted", true,                                              \
      "a broker applies metadata records before they commit")                                      \
    X(ACKS_ONE_AS_ALL, "acks-one-as-all", true,                                                    \
      "producers send with acks=1 but count the answers as acks=all acknowledgements")             \
    X(BROKER_DISK_LIES, "broker-disk-lies", true,                                                  \
      "a broker's partition-log disk loses its last commit in a crash")                            \
    X(UNCLEAN, "unclean", true,                                                                    \
      "unclean leader elections are enabled and not exempt from the data checks")                  \
    X(SNAPSHOT_DROPS_RECORD, "snapshot-drops-record", true,                                        \
      "a controller's snapshot leaves out the last record of its image")                           \
    X(CTL_REFUSES_ADMIN, "ctl-refuses-admin", true,                                                \
      "the active controller answers admin requests NOT_CONTROLLER, naming itself")                \
    X(HOST_DROPS_VOTERS, "host-drops-voters", true,                                                \
      "with --voter-changes (implied): hosts give their cores no quorum records of fetched "       \
      "batches")

typedef enum kq_sim_bug {
    KQ_SIM_BUG_NONE = 0,
#define KQ_SIM_BUG_ENUM(e, name, ctl, what) KQ_SIM_BUG_##e,
    KQ_SIM_BUGS(KQ_SIM_BUG_ENUM)
#undef KQ_SIM_BUG_ENUM
        KQ_SIM_BUG_COUNT
} kq_sim_bug;

typedef struct kq_sim_opts {
    uint64_t seed;
    int voters;           /* 1..KQ_SIM_MAX_VOTERS; 0 = drawn from the seed */
    int observers;        /* 0..KQ_SIM_MAX_OBSERVERS; -1 = drawn from the seed; ignored in
                             controller mode, where the observers are the brokers' */
    uint64_t safety_ms;   /* virtual length of the fault phase; 0 = drawn (10-25 s) */
    uint64_t liveness_ms; /* budget for convergence after healing; 0 = 60 s */
    bool trace;           /* print every trace line to out as it happens */
    bool dump_on_failure; /* print the last KQ_SIM_TRACE_KEEP trace lines on failure */
    FILE *out;            /* borrowed; NULL means stderr */
    kq_sim_bug bug;
    /* The whole cluster (the default; false is --raft-only, the quorum alone): every voter also
     * runs the controller node, and the observers are broker agents with their data plane. */
    bool controller;
    int brokers; /* 1..KQ_SIM_MAX_BROKERS; 0 = drawn (3..6) */
    /* A dynamic quorum (KIP-853, kraft.version 1; needs the whole cluster): the controllers are
     * formatted with 1..voters of them as the initial voters (the rest --no-initial-controllers,
     * finding the leader through controller.quorum.bootstrap.servers, as the brokers do), and
     * the admin client adds, removes and replaces voters (AddRaftVoter / RemoveRaftVoter; a
     * removed controller is sometimes wiped and comes back with a new directory id) under the
     * faults, sometimes crashing the leader with a change in flight. Checked: every node's
     * voter set in force is the one of the last VotersRecord in its own log (so equal on nodes
     * with equal logs), every leader was elected by a majority of its voter set and every high
     * watermark it advanced is durable on a majority of that set (a removed voter never
     * counts), and candidates are voters of their own set. */
    bool voter_changes;
} kq_sim_opts;

typedef struct kq_sim_result {
    bool failed;
    char reason[512];    /* first violation, with virtual time and node */
    uint64_t trace_hash; /* FNV-1a over every trace line: equal for equal seeds */
    uint64_t events;
    uint64_t end_ms; /* virtual time at the end */
    int voters;
    int observers;
    int64_t high_watermark; /* leader's HW at the end of a passing run */
    int32_t last_epoch;     /* highest epoch any node reached */
    uint64_t crashes;
    uint64_t commits_checked; /* offsets the committed-prefix oracle recorded */
    /* controller mode */
    int brokers;
    uint64_t ctl_requests;        /* controller API requests that reached an active controller */
    uint64_t ap_acked;            /* AlterPartition changes a broker saw acknowledged (NONE) */
    uint64_t ap_rejected;         /* AlterPartition partitions answered with an error */
    uint64_t image_checks;        /* committed images compared with the reference image */
    uint64_t activations;         /* times a node became the active controller */
    uint64_t topics_created;      /* topics in the final image */
    uint64_t records_acked;       /* records producers saw acknowledged (any acks) */
    uint64_t records_read;        /* records the consumer read */
    uint64_t snapshots_taken;     /* snapshots the controllers wrote */
    uint64_t snapshots_installed; /* snapshots fetched and installed (controllers, brokers) */
    uint64_t admin_retried;       /* admin operations answered after more than one try */
    /* voter_changes */
    uint64_t voters_added, voters_removed; /* AddRaftVoter / RemoveRaftVoter answered NONE */
    uint64_t voter_refusals;               /* answered with an error (DUPLICATE_VOTER, ...) */
    uint64_t controllers_wiped;            /* removed, wiped, back with a new directory id */
    uint64_t leader_kills;                 /* leaders crashed while a voter change was in flight */
    uint64_t removed_starts; /* a removed voter restarted with an epoch older than the leader's */
    int final_voters;        /* voters in the set in force at the end */
} kq_sim_result;

void kq_sim_opts_defaults(kq_sim_opts *o);

/* Run one seed. Returns 0 when the run happened (res->failed says whether an invariant or the
 * liveness requirement failed), KQ_ERR_INVALID_CONFIG for out-of-range options (res->reason
 * names the option), or KQ_ERR_NOMEM. */
int kq_sim_run(const kq_sim_opts *o, kq_sim_result *res);

/* "none" or a name of KQ_SIM_BUGS; returns -1 for an unknown name. */
int kq_sim_bug_from_name(const char *name);
/* The name of bug b ("none" for KQ_SIM_BUG_NONE), NULL outside the table. */
const char *kq_sim_bug_name(kq_sim_bug b);
/* Bug b is in the controller (it needs controller mode to run). */
bool kq_sim_bug_needs_controller(kq_sim_bug b);

#endif
