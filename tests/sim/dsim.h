/*
 * kq_dsim: deterministic data-plane simulator for the partition replica core
 * (include/kq/replica.h, broker-agent/replica.c).
 *
 * One process, one virtual clock, one seeded PRNG, no threads and no I/O. 3-5 simulated
 * brokers each host a real kq_replica per partition they are assigned (RF 3, one or two
 * partitions) with an in-memory log, a simulated disk (appends become durable after a sampled
 * fsync delay; a crash drops the undurable suffix), a leader-epoch checkpoint and an HW
 * checkpoint. A simulated controller holds each partition's leader, leader epoch, partition
 * epoch, ISR and ELR, validates AlterPartition as a compare-and-swap (kraft-semantics 3.6),
 * fences brokers whose heartbeats stop, elects leaders from the ISR (then the ELR; never
 * unclean) and publishes every change through a metadata log that each broker follows with a
 * random delay. Messages (Fetch, fetch answers, AlterPartition, Produce and their answers,
 * heartbeats, registrations) are delayed, dropped, duplicated and reordered; brokers crash and
 * restart from their durable state, pause (SIGSTOP-like), are cut off by partitions and go
 * through controlled shutdowns (leaderships moved away, then a clean stop); in some seeds stale
 * and duplicate fetch answers reach the replica core (a loose transport). A
 * producer sends acks=all (mostly) and acks=1 batches with unique payloads to the leader it
 * believes in.
 *
 * Invariants (checked after every event, and at the end after healing and catching up):
 *  1. every acks=all-acknowledged record is, at its acknowledged offset with its payload, on
 *     every ISR replica and on the final leader;
 *  2. no two replicas hold different payloads at an offset below both of their HWs;
 *  3. a leader's HW never decreases within one leader epoch, and a record a consumer could read
 *     (below a leader's HW) never disappears or changes;
 *  4. at most one leader per leader epoch.
 *
 * Ownership: kq_dsim_run borrows opts (and opts->out) for the duration of the call and fills
 * the caller's result; everything it allocates is freed before it returns.
 */
#ifndef KQ_DSIM_H
#define KQ_DSIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define KQ_DSIM_MAX_BROKERS 5
#define KQ_DSIM_MAX_PARTITIONS 2
#define KQ_DSIM_TRACE_KEEP 60 /* trace lines dumped on failure */

/* Deliberately broken hosts or controllers, to prove the checkers catch what they claim. */
typedef enum kq_dsim_bug {
    KQ_DSIM_BUG_NONE = 0,
    KQ_DSIM_BUG_UNCLEAN,     /* the controller elects any live replica when ISR/ELR have none */
    KQ_DSIM_BUG_LOSE_SYNCED, /* a crash also loses the last durable records (lying fsync) */
    KQ_DSIM_BUG_EARLY_FETCH, /* a follower fetches (reports its LEO) before it is durable */
    KQ_DSIM_BUG_SAME_EPOCH,  /* the controller elects a new leader without a new epoch */
} kq_dsim_bug;

typedef struct kq_dsim_opts {
    uint64_t seed;
    int brokers;          /* 3..KQ_DSIM_MAX_BROKERS; 0 = drawn from the seed */
    int partitions;       /* 1..KQ_DSIM_MAX_PARTITIONS; 0 = drawn */
    int min_isr;          /* 1..3; 0 = drawn (mostly 2) */
    uint64_t safety_ms;   /* virtual length of the fault phase; 0 = drawn (8-16 s) */
    uint64_t liveness_ms; /* budget to converge after healing; 0 = 60 s */
    bool trace;           /* print every trace line to out as it happens */
    bool dump_on_failure; /* print the last KQ_DSIM_TRACE_KEEP trace lines on failure */
    FILE *out;            /* borrowed; NULL means stderr */
    kq_dsim_bug bug;
} kq_dsim_opts;

typedef struct kq_dsim_result {
    bool failed;
    char reason[512];    /* first violation: invariant, virtual time, partition, broker */
    uint64_t trace_hash; /* FNV-1a over every trace line: equal for equal seeds */
    uint64_t events;
    uint64_t end_ms;
    int brokers;
    int partitions;
    int min_isr;
    uint64_t crashes;
    uint64_t shutdowns; /* controlled shutdowns that ended in a clean stop */
    uint64_t pauses;
    uint64_t elections;                        /* leader changes written by the controller */
    uint64_t produced;                         /* Produce requests sent */
    uint64_t acked_all;                        /* acks=all records acknowledged (NONE) */
    uint64_t acked_one;                        /* acks=1 records acknowledged */
    uint64_t truncations;                      /* follower truncations */
    int64_t final_end[KQ_DSIM_MAX_PARTITIONS]; /* final leader's log end per partition */
} kq_dsim_result;

void kq_dsim_opts_defaults(kq_dsim_opts *o);

/* Run one seed. Returns 0 when the run happened (res->failed says whether an invariant or
 * convergence failed), KQ_ERR_INVALID_CONFIG for out-of-range options (res->reason names the
 * option), or KQ_ERR_NOMEM. */
int kq_dsim_run(const kq_dsim_opts *o, kq_dsim_result *res);

/* "none", "unclean", "lose-synced", "early-fetch", "same-epoch"; -1 for an unknown name. */
int kq_dsim_bug_from_name(const char *name);

#endif
