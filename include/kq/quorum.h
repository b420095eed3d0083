/*
 * kq_quorum: the quorum arithmetic of the KRaft core (kraft-semantics.md §1), as pure
 * functions over plain arrays, so each rule is stated once and tested with tables
 * (tests/unit/raft/test_quorum.c) instead of only through elections and Fetch rounds.
 * Part of kq_raft (common/raft/quorum.c): no I/O, no clock, no allocation.
 *
 * Ownership: every array argument is borrowed for the call and not changed.
 */
#ifndef KQ_QUORUM_H
#define KQ_QUORUM_H

#include <stdbool.h>
#include <stdint.h>

/* Voters needed for a majority of n_voters (n_voters / 2 + 1; 1 for n_voters <= 0, so that a
 * misconfigured set never counts as reached by nobody). */
int kq_quorum_majority(int n_voters);

/* The largest offset that at least a majority of the n voters has reached, given each
 * voter's end offset (its durable log end; the leader's own included): the majority-th
 * largest value. -1 for n <= 0 or n > KQ_RAFT_MAX_VOTERS (no voter set is that large), or
 * when every end is below -1 (end offsets never are). */
int64_t kq_quorum_majority_end(const int64_t *ends, int n);

/* The leader's high watermark after its voters reached `ends`: the majority end, but never
 * past the leader's log end `leo`, and only once it is past `epoch_start` (the first offset of
 * the leader's epoch: KRaft commits an entry of the current epoch before any earlier one
 * counts as committed). It never goes back: the result is at least `hw`. */
int64_t kq_quorum_high_watermark(const int64_t *ends, int n, int64_t leo, int64_t epoch_start,
                                 int64_t hw);

typedef enum kq_vote_tally {
    KQ_VOTE_OPEN, /* neither a majority granted nor one out of reach */
    KQ_VOTE_WON,  /* a majority granted */
    KQ_VOTE_LOST, /* so many rejected that a majority can no longer grant */
} kq_vote_tally;

/* An election's state after `granted` voters granted and `rejected` refused, of n_voters
 * (the candidate's own vote counted in granted). */
kq_vote_tally kq_quorum_tally(int granted, int rejected, int n_voters);

/* Check-quorum: whether `fetched` voters (the leader itself included) heard from within the
 * fetch timeout are a majority of n_voters, so the leader keeps its leadership. */
bool kq_quorum_heard(int fetched, int n_voters);

#endif
