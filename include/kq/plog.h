/*
 * kq_plog: a broker agent's partition logs, one LMDB environment per log.dirs entry
 * (DESIGN.md section 5; format in common/io/plog.c and docs/storage.md).
 *
 * A broker data directory is a kq_store directory: `kq storage format` (kq_store_format)
 * creates it and stamps the identity (cluster id, node id, directory id), and kq_plog_open
 * checks that identity through kq_store before it opens the partition databases. Its
 * metadata-log databases stay empty.
 *
 * Partitions are named by (topic id, partition index). Each holds
 *   - record batches keyed by base offset: leader epoch, record count, producer id/epoch/base
 *     sequence and the records bytes, with a CRC-32C checked on every read;
 *   - its leader-epoch cache (epoch -> first offset written in that epoch);
 *   - its metadata: log start offset, high-watermark checkpoint, partition epoch seen.
 * The log end offset (LEO) is the end of the last batch, or the log start offset when the
 * partition has no batches.
 *
 * Writes happen in one write transaction per loop iteration, as with kq_store: kq_plog_begin,
 * any number of create/delete/append/truncate/set calls (on any partitions), kq_plog_commit.
 * Commit is synchronous (fsync); a failed commit returns KQ_ERR_IO, the handle then refuses
 * everything but close, and the caller must treat it as fatal. A mutating call that fails with
 * KQ_ERR_IO/FULL/NOMEM poisons the open transaction (commit refuses it); one that fails a
 * validation (INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION, ...) changes nothing and the
 * transaction stays usable.
 *
 * Queries (state, epochs, end offset for epoch, read, list) run in the open write transaction
 * when there is one (so they see its uncommitted writes), else in a read transaction of their
 * own. Everything returned is a copy; no LMDB pointer escapes.
 *
 * Thread use: one thread per handle. Two writable handles (in one process or two) on the same
 * directory are not supported; nor is opening a directory with kq_plog and kq_store at once in
 * one process. A read-only handle (kq_plog_open_readonly, for kq log-dump) in another process
 * may read a directory that a broker is writing.
 * Ownership: kq_plog_open's result is the caller's; free with kq_plog_close.
 */
#ifndef KQ_PLOG_H
#define KQ_PLOG_H

#include <stddef.h>
#include <stdint.h>

#include "kq/raft.h"
#include "kq/store.h"

#define KQ_PLOG_FORMAT_VERSION 1
#define KQ_PLOG_UNDEFINED_EPOCH (-1)
#define KQ_PLOG_UNDEFINED_OFFSET (-1)
#define KQ_PLOG_NO_PRODUCER_ID (-1)

typedef struct kq_plog kq_plog;

/* A partition: topic id (16 raw bytes, as kq_uuid_parse decodes them) and index >= 0. */
typedef struct kq_plog_tp {
    uint8_t topic_id[16];
    int32_t partition;
} kq_plog_tp;

/* A record batch. For kq_plog_append, crc32c is ignored (the store computes it) and records
 * is borrowed for the call. In a read callback every field is filled and records points into
 * a copy that is valid only during the call. crc32c covers the base offset, leader epoch,
 * count, producer fields and records (see plog.c). */
typedef struct kq_plog_batch {
    int64_t base_offset;
    int32_t leader_epoch;
    int32_t count;          /* records in the batch, >= 1; the next batch starts at base+count */
    uint32_t crc32c;        /* filled by reads */
    int64_t producer_id;    /* KQ_PLOG_NO_PRODUCER_ID if not idempotent */
    int16_t producer_epoch; /* -1 if not idempotent */
    int32_t base_sequence;  /* -1 if not idempotent */
    const uint8_t *records;
    size_t len;
} kq_plog_batch;

/* Per-partition state. */
typedef struct kq_plog_state {
    int64_t log_start_offset;
    int64_t log_end_offset;
    int64_t high_watermark;  /* the last checkpoint written, log_start_offset initially */
    int32_t partition_epoch; /* the last one recorded */
    int32_t last_epoch;      /* leader epoch of the last epoch-cache entry, -1 if none */
} kq_plog_state;

/* ---- the interface ----
 * Two implementations: the LMDB one (kq_plog_open, common/io/plog.c) and the simulator's
 * in-memory disk (tests/lib/plog_mem.h), which keeps only what was committed across a crash.
 * The kq_plog_* calls below dispatch through ops; each implementation keeps the contract
 * written here (tests/unit/plog runs the same tests on both). An implementation's handle
 * starts with a struct kq_plog whose ops point at its table. */
typedef struct kq_plog_ops {
    void (*close)(kq_plog *p);
    const kq_store_identity *(*identity_of)(const kq_plog *p);
    int (*begin)(kq_plog *p);
    int (*commit)(kq_plog *p);
    void (*abort)(kq_plog *p);
    int (*in_txn)(const kq_plog *p);
    int (*create_partition)(kq_plog *p, const kq_plog_tp *tp, int32_t partition_epoch,
                            int64_t log_start_offset);
    int (*delete_partition)(kq_plog *p, const kq_plog_tp *tp);
    int (*append)(kq_plog *p, const kq_plog_tp *tp, const kq_plog_batch *b);
    int (*assign_epoch)(kq_plog *p, const kq_plog_tp *tp, int32_t leader_epoch);
    int (*truncate)(kq_plog *p, const kq_plog_tp *tp, int64_t offset);
    int (*truncate_fully)(kq_plog *p, const kq_plog_tp *tp, int64_t offset);
    int (*set_hw)(kq_plog *p, const kq_plog_tp *tp, int64_t hw);
    int (*set_partition_epoch)(kq_plog *p, const kq_plog_tp *tp, int32_t partition_epoch);
    int (*state_of)(kq_plog *p, const kq_plog_tp *tp, kq_plog_state *out);
    int (*epochs)(kq_plog *p, const kq_plog_tp *tp, kq_epoch_entry **out, size_t *n);
    int (*end_offset_for_epoch)(kq_plog *p, const kq_plog_tp *tp, int32_t epoch, int32_t *out_epoch,
                                int64_t *out_end);
    int (*read)(kq_plog *p, const kq_plog_tp *tp, int64_t from, int64_t to, size_t max_bytes,
                int (*cb)(void *arg, const kq_plog_batch *b), void *arg);
    int (*list)(kq_plog *p, kq_plog_tp **out, size_t *n);
} kq_plog_ops;

struct kq_plog {
    const kq_plog_ops *ops;
};

/* Format `dir` as a broker data directory: exactly kq_store_format (same checks, messages and
 * KQ_ERR_ALREADY_FORMATTED). The partition databases are created by the first kq_plog_open. */
int kq_plog_format(const char *dir, const char *cluster_id, int32_t node_id, kq_store_identity *out,
                   char *errbuf, size_t errlen);

/* Open a formatted directory. expect_cluster_id may be NULL (any); expect_node_id may be -1
 * (any). Errors, each with a message in errbuf saying how to fix it: KQ_ERR_NOT_FORMATTED
 * ("run: kq storage format ..."), KQ_ERR_MISMATCH (names the stored and configured values),
 * KQ_ERR_UNSUPPORTED_VERSION, KQ_ERR_CONFIG, KQ_ERR_IO. */
int kq_plog_open(const char *dir, const char *expect_cluster_id, int32_t expect_node_id,
                 kq_plog **out, char *errbuf, size_t errlen);
/* Open a formatted directory read-only (kq log-dump --partition-log): the LMDB environment is
 * opened MDB_RDONLY and nothing is created or changed, not even the partition databases (a
 * directory no broker has opened yet lists no partitions). Any identity. Queries only: every
 * mutation and kq_plog_begin answer KQ_ERR_INVALID_REQUEST. Errors as kq_plog_open. */
int kq_plog_open_readonly(const char *dir, kq_plog **out, char *errbuf, size_t errlen);
void kq_plog_close(kq_plog *p);
const kq_store_identity *kq_plog_identity_of(const kq_plog *p);
/* The directory given to kq_plog_open (owned by p); "" for a handle that is not LMDB's. */
const char *kq_plog_dir(const kq_plog *p);

/* ---- write transaction ---- */
int kq_plog_begin(kq_plog *p);  /* KQ_ERR_INVALID_REQUEST if one is already open */
int kq_plog_commit(kq_plog *p); /* fsyncs; KQ_ERR_IO is fatal for the caller */
void kq_plog_abort(kq_plog *p);
int kq_plog_in_txn(const kq_plog *p);

/* Mutations: KQ_ERR_INVALID_REQUEST without an open transaction or with bad arguments;
 * KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist. */

/* New empty partition with log start = LEO = HW = log_start_offset (>= 0).
 * KQ_ERR_TOPIC_ALREADY_EXISTS if it exists (nothing changed). */
int kq_plog_create_partition(kq_plog *p, const kq_plog_tp *tp, int32_t partition_epoch,
                             int64_t log_start_offset);
/* Removes the partition with all its batches, epoch entries and metadata. */
int kq_plog_delete_partition(kq_plog *p, const kq_plog_tp *tp);
/* Append a batch at base_offset == LEO, stamped with leader_epoch; adds the entry
 * (leader_epoch -> base_offset) when the epoch grows. leader_epoch must be >= the last
 * epoch-cache entry, except that trailing entries starting at or after base_offset (epochs that
 * never got a batch: a leadership recorded with kq_plog_assign_epoch that wrote nothing) are
 * first removed when leader_epoch is below them, as Kafka's epoch cache does: a follower
 * continues the older epoch of its new leader. */
int kq_plog_append(kq_plog *p, const kq_plog_tp *tp, const kq_plog_batch *b);
/* Record that leader_epoch starts at the current LEO (a new leader, kraft-semantics 4.6),
 * without a batch; no-op if leader_epoch equals the last entry, INVALID_REQUEST if lower.
 * Adding an entry (here or in append) first removes trailing entries that start at or after
 * its start offset (epochs that never got a batch), so start offsets stay ascending. */
int kq_plog_assign_epoch(kq_plog *p, const kq_plog_tp *tp, int32_t leader_epoch);
/* Remove every batch with base offset >= offset and every epoch entry starting at >= offset;
 * the HW checkpoint is lowered to offset if above it. offset must be the LEO or a batch
 * boundary (INVALID_REQUEST otherwise), within [log start, LEO] (OFFSET_OUT_OF_RANGE). */
int kq_plog_truncate(kq_plog *p, const kq_plog_tp *tp, int64_t offset);
/* Drop every batch and epoch entry and restart the log empty at offset (>= 0): log start =
 * LEO = HW = offset (a follower behind the leader's log start). */
int kq_plog_truncate_fully(kq_plog *p, const kq_plog_tp *tp, int64_t offset);
/* High-watermark checkpoint; must lie in [log start, LEO] (OFFSET_OUT_OF_RANGE otherwise). */
int kq_plog_set_hw(kq_plog *p, const kq_plog_tp *tp, int64_t hw);
/* Partition epoch seen in the metadata; INVALID_REQUEST if lower than the recorded one. */
int kq_plog_set_partition_epoch(kq_plog *p, const kq_plog_tp *tp, int32_t partition_epoch);

/* A consistent view for a reader (kq log-dump of a live broker): between view_begin and
 * view_end every query runs in one LMDB read transaction, so list, state, epochs and read all
 * see the directory as it was at view_begin. Not allowed with a write transaction open (and
 * kq_plog_begin is refused while a view is): KQ_ERR_INVALID_REQUEST. kq_plog_close ends it. */
int kq_plog_view_begin(kq_plog *p);
void kq_plog_view_end(kq_plog *p);

/* Bytes a stored batch takes before its records: crc32c, leader epoch, count, producer id,
 * producer epoch, base sequence. */
#define KQ_PLOG_BATCH_HEADER_LEN 26

/* ---- queries ---- */
int kq_plog_state_of(kq_plog *p, const kq_plog_tp *tp, kq_plog_state *out);
/* The epoch cache, ascending. *out is malloc'd (caller frees; NULL when *n == 0). */
int kq_plog_epochs(kq_plog *p, const kq_plog_tp *tp, kq_epoch_entry **out, size_t *n);
/* kraft-semantics 4.6: the largest cached epoch <= epoch, and its end offset (the start of the
 * next cached epoch, or the LEO for the last one). If no cached epoch is <= epoch (or the
 * cache is empty, or epoch < 0): KQ_PLOG_UNDEFINED_EPOCH and KQ_PLOG_UNDEFINED_OFFSET.
 * Returns 0 in all these cases. */
int kq_plog_end_offset_for_epoch(kq_plog *p, const kq_plog_tp *tp, int32_t epoch,
                                 int32_t *out_epoch, int64_t *out_end);

/* Read whole batches, starting with the one that holds offset `from` (so a `from` inside a
 * batch returns that batch, as Kafka does), with base offsets < `to`, stopping before the
 * total records size would exceed max_bytes but always returning at least one batch if any.
 * from == LEO returns nothing; from outside [log start, LEO] is KQ_ERR_OFFSET_OUT_OF_RANGE.
 * The callback's batch is valid only during the call; return non-zero to stop. Every batch is
 * checked (CRC, contiguity) before the first callback: KQ_ERR_CORRUPT_MESSAGE if one fails. */
typedef int (*kq_plog_batch_cb)(void *arg, const kq_plog_batch *b);
int kq_plog_read(kq_plog *p, const kq_plog_tp *tp, int64_t from, int64_t to, size_t max_bytes,
                 kq_plog_batch_cb cb, void *arg);

/* Every partition, sorted by (topic id bytes, partition). *out is malloc'd (caller frees). */
int kq_plog_list(kq_plog *p, kq_plog_tp **out, size_t *n);

#endif
