/*
 * kq_epoch_cache: a leader-epoch cache, the map from each leader epoch to the first offset
 * written in it (Kafka's LeaderEpochFileCache). Entries ascend in epoch and in start offset.
 * One type for the Raft core (the metadata log, kq/raft.h) and the replica core (partition
 * logs, kq/replica.h); the stores keep it as a checkpoint of kq_epoch_entry.
 *
 * Pure: no I/O, no clock. Ownership: the cache owns its array (kq_epoch_cache_free); entries
 * passed in are copied.
 */
#ifndef KQ_EPOCH_CACHE_H
#define KQ_EPOCH_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kq_epoch_entry {
    int32_t epoch;
    int64_t start_offset;
} kq_epoch_entry;

typedef struct kq_epoch_cache {
    kq_epoch_entry *e;
    size_t n, cap;
} kq_epoch_cache;

/* A recovered checkpoint is well formed: epochs >= 0 strictly ascending, start offsets >= 0
 * not descending. */
bool kq_epoch_entries_valid(const kq_epoch_entry *e, size_t n);

void kq_epoch_cache_free(kq_epoch_cache *c);
/* Replace the cache with a copy of e[0..n) (checked by the caller), with room for `spare`
 * more entries. 0 or KQ_ERR_NOMEM (the cache unchanged). */
int kq_epoch_cache_load(kq_epoch_cache *c, const kq_epoch_entry *e, size_t n, size_t spare);
/* Room for `extra` more entries, at most `max` in all (0: no bound). 0, KQ_ERR_NOMEM or
 * KQ_ERR_FULL. */
int kq_epoch_cache_reserve(kq_epoch_cache *c, size_t extra, size_t max);

/* Kafka's assign: `epoch` starts at `start`. Nothing changes when the last entry already is
 * this epoch starting at or before `start`; otherwise every entry at the end whose epoch is
 * >= epoch or whose start is >= start is dropped, and {epoch, start} appended. Needs room for
 * one entry (kq_epoch_cache_reserve). True when the cache changed. */
bool kq_epoch_cache_assign(kq_epoch_cache *c, int32_t epoch, int64_t start);
/* Drop every entry that starts at or after `offset` (the log was truncated there). True when
 * one was dropped. */
bool kq_epoch_cache_truncate_from(kq_epoch_cache *c, int64_t offset);
/* The log now starts at `start` (Kafka's truncateFromStart): of the entries starting at or
 * below it only the last stays, moved to begin at `start`. */
void kq_epoch_cache_compact(kq_epoch_cache *c, int64_t start);

/* The largest cached epoch <= epoch and where it ends (the next entry's start, or leo, the
 * log end offset). False when every cached epoch is above `epoch`. */
bool kq_epoch_cache_end_offset_for(const kq_epoch_cache *c, int32_t epoch, int64_t leo,
                                   int32_t *out_epoch, int64_t *out_end);
/* The epoch of the last record below leo (entries starting at or after leo hold none); -1
 * when no entry starts below leo. */
int32_t kq_epoch_cache_last_epoch(const kq_epoch_cache *c, int64_t leo);
/* The epoch of the record at `offset`; -1 when offset is below the first entry. */
int32_t kq_epoch_cache_epoch_at(const kq_epoch_cache *c, int64_t offset);
/* Some entry starts exactly at `offset` (a batch boundary of this log). */
bool kq_epoch_cache_starts_at(const kq_epoch_cache *c, int64_t offset);

#endif
