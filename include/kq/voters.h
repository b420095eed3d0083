/*
 * kq_voter_set and kq_voter_history: the metadata quorum's voters as KIP-853 keeps them
 * (kraft-semantics.md §1.8). A voter is a key, (node id, directory id), plus the endpoint of
 * its controller listener and the kraft.version range it supports. A directory id is made by
 * `kq storage format`, so a node whose directory was wiped and formatted again is a new voter
 * with the same id, and nothing the old one promised (a vote, a fetched offset) counts for it.
 *
 * The history maps log offsets to the voter set and the kraft.version in force from there on:
 * the latest entry is in force as soon as its record is in the local log (appended, not yet
 * committed), a truncated log drops the entries past its end, a snapshot keeps only the last
 * entry at or before its end. Entries ascend strictly in offset; offset -1 is the bootstrap entry
 * written by `kq storage format` (never part of the replicated log). With no entry at all the
 * static set of `controller.quorum.voters` (kraft.version 0) is in force.
 *
 * Part of kq_raft (common/raft/voters.c): no I/O, no clock. Ownership: a kq_voter_set is a
 * plain value (copied freely); kq_voter_history owns its entry array (kq_voter_history_free)
 * and copies every set passed in; pointers it returns stay valid until the next change.
 */
#ifndef KQ_VOTERS_H
#define KQ_VOTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kq/raft.h" /* KQ_RAFT_MAX_VOTERS */

#define KQ_VOTER_HOST_MAX 256 /* host name bytes, NUL included */

/* A voter's identity. dir all zero: not known (a static voter of kraft.version 0). */
typedef struct kq_voter_key {
    int32_t id;
    uint8_t dir[16];
} kq_voter_key;

typedef struct kq_voter {
    kq_voter_key key;
    char host[KQ_VOTER_HOST_MAX]; /* controller listener; "" unknown */
    int32_t port;                 /* 0 unknown */
    int16_t kraft_min, kraft_max; /* supported kraft.version range */
} kq_voter;

typedef struct kq_voter_set {
    kq_voter v[KQ_RAFT_MAX_VOTERS];
    int n;
} kq_voter_set;

/* A set entry with key `entry` stands for a replica with key `k`: the ids are equal and the
 * entry's directory id is unknown or equal to k's. */
bool kq_voter_key_matches(const kq_voter_key *entry, const kq_voter_key *k);
/* Same id and same directory id (both may be zero). */
bool kq_voter_key_equal(const kq_voter_key *a, const kq_voter_key *b);

/* Index of the voter standing for key k (kq_voter_key_matches), or -1. */
int kq_voters_find(const kq_voter_set *s, const kq_voter_key *k);
/* Index of the voter with this node id, whatever its directory, or -1. */
int kq_voters_find_id(const kq_voter_set *s, int32_t id);

/* The set is usable as the voter set in force: 1..KQ_RAFT_MAX_VOTERS voters, ids >= 0 and
 * distinct, ports in 0..65535, kraft_min <= kraft_max, hosts NUL-terminated. 0, or
 * KQ_ERR_INVALID_REQUEST with the reason in errbuf. */
int kq_voters_check(const kq_voter_set *s, char *errbuf, size_t errlen);

/* The changes an AddRaftVoter, RemoveRaftVoter or UpdateRaftVoter makes, on a copy: `s` is
 * changed only on success. Errors, with the reason in errbuf:
 *   add:    KQ_ERR_INVALID_REQUEST (zero directory id, no endpoint, kraft_min > kraft_max, the
 *           set is full), KQ_ERR_DUPLICATE_VOTER (the id is a voter already, with any
 *           directory: replacing a directory takes a remove, then an add);
 *   remove: KQ_ERR_VOTER_NOT_FOUND (no voter with exactly this key, or it is the last one);
 *   update: KQ_ERR_VOTER_NOT_FOUND (no voter stands for v->key), KQ_ERR_INVALID_REQUEST (no
 *           endpoint, kraft_min > kraft_max); the entry takes v's endpoint and range (and its
 *           directory id when the entry had none). */
int kq_voters_add(kq_voter_set *s, const kq_voter *v, char *errbuf, size_t errlen);
int kq_voters_remove(kq_voter_set *s, const kq_voter_key *k, char *errbuf, size_t errlen);
int kq_voters_update(kq_voter_set *s, const kq_voter *v, char *errbuf, size_t errlen);

/* Single-server change (Ongaro §4.1, Kafka's hasOverlappingMajority): b differs from a by at
 * most one key added and at most one key removed, so any majority of b overlaps any majority
 * of a. Keys compare with kq_voter_key_equal. */
bool kq_voters_overlap(const kq_voter_set *a, const kq_voter_set *b);

/* ---- history */

typedef struct kq_voter_history_entry {
    int64_t offset; /* the record's log offset; -1 the bootstrap entry */
    int16_t kraft_version;
    bool has_set;       /* a VotersRecord at or before this entry */
    int64_t set_offset; /* the offset of that VotersRecord */
    kq_voter_set set;
} kq_voter_history_entry;

typedef struct kq_voter_history {
    kq_voter_set static_set; /* controller.quorum.voters, in force while no entry has a set */
    kq_voter_history_entry *e;
    size_t n, cap;
} kq_voter_history;

/* Start an empty history over the static set (copied; n may be 0 for a node that has none). */
void kq_voter_history_init(kq_voter_history *h, const kq_voter_set *static_set);
void kq_voter_history_free(kq_voter_history *h);

/* A VotersRecord at `offset` (records at the same offset, such as the bootstrap's KRaftVersion
 * and Voters records at -1, share one entry). Refused (KQ_ERR_INVALID_REQUEST, history
 * unchanged) when offset is below -1 or below the last entry's, when that entry already has a
 * VotersRecord at this offset, when the set fails
 * kq_voters_check, or when it does not overlap (kq_voters_overlap) the set of the previous
 * VotersRecord of the log (the bootstrap and static sets may be replaced by any set). KQ_ERR_NOMEM.
 */
int kq_voter_history_add_voters(kq_voter_history *h, int64_t offset, const kq_voter_set *s,
                                char *errbuf, size_t errlen);
/* kq metadata-quorum unsafe-recover: a VotersRecord written on the one surviving controller
 * after a majority was lost for good. As kq_voter_history_add_voters, but it may replace any
 * set (the overlap rule cannot hold: the voters it drops are gone). */
int kq_voter_history_force_voters(kq_voter_history *h, int64_t offset, const kq_voter_set *s,
                                  char *errbuf, size_t errlen);
/* A KRaftVersionRecord at `offset` (offsets as above). The version never goes down and is
 * 0 or 1: anything else is KQ_ERR_INVALID_REQUEST. */
int kq_voter_history_add_kraft_version(kq_voter_history *h, int64_t offset, int16_t version,
                                       char *errbuf, size_t errlen);

/* The log was truncated to end at `end`: drop every entry at offset >= end (the bootstrap
 * entry stays). True when one was dropped. */
bool kq_voter_history_truncate_new(kq_voter_history *h, int64_t end);
/* The log now starts at `start` (a snapshot ending there): of the entries below start only the
 * last stays. */
void kq_voter_history_truncate_old(kq_voter_history *h, int64_t start);

/* The voter set in force at `offset` (after the records at offsets <= offset): the last entry
 * at or before it that has a set, else the static set. */
const kq_voter_set *kq_voter_history_set_at(const kq_voter_history *h, int64_t offset);
/* The latest set (in force now), and the offset of the record it came from: -1 for the
 * bootstrap entry, -2 for the static set. */
const kq_voter_set *kq_voter_history_last(const kq_voter_history *h, int64_t *offset);
/* The kraft.version in force at `offset` / now (0 with no entry). */
int16_t kq_voter_history_kraft_version_at(const kq_voter_history *h, int64_t offset);
int16_t kq_voter_history_kraft_version(const kq_voter_history *h);

#endif
