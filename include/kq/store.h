/*
 * kq_store: a node's metadata-log directory, one LMDB environment (DESIGN.md section 5).
 *
 * Named databases:
 *   meta   : "format_version", "cluster_id", "node_id", "directory_id", "quorum_state",
 *            "bootstrap" (KIP-853: {count u32 BE} then `count` length-prefixed records, the
 *            KRaftVersion and Voters records kq storage format wrote; absent: none)
 *   log    : 8-byte big-endian base offset -> 12-byte header {epoch u32 BE, count u32 BE,
 *            crc32c u32 BE of the records} followed by the records bytes
 *   epochs : 4-byte big-endian epoch -> 8-byte big-endian start offset
 *   meta "log_start": 12 bytes {offset i64 BE, epoch i32 BE}: the log start and the epoch of
 *            the record just below it (absent: 0, 0). Moves only to a snapshot end.
 *
 * Snapshots are files <dir>/snapshots/<endOffset:20>-<epoch:10>.checkpoint (kraft-semantics.md
 * 1.7), opaque to the store: a 36-byte header {magic "KQSNAP01", end offset i64 BE, epoch i32
 * BE, payload length u64 BE, crc32c of the payload u32 BE, crc32c of the preceding 32 header
 * bytes u32 BE} then the payload (the image as records). The whole file travels in
 * FetchSnapshot, so a follower's copy is checked the same way. Written to a .part file,
 * fsynced, renamed, directory fsynced. A writable open removes torn .part files and
 * .deleted leftovers and finishes an install that a crash interrupted.
 *
 * Writes happen in one write transaction per loop iteration (group commit): kq_store_begin,
 * any number of put/truncate/append calls, kq_store_commit. Commit is synchronous (fsync);
 * a failed commit returns KQ_ERR_IO and the caller must treat it as fatal.
 * Reads copy values out before their read transaction ends; no LMDB pointer escapes.
 *
 * Thread use: one thread writes; reads may come from the same thread between transactions.
 * Ownership: kq_store_open's result is the caller's; free with kq_store_close.
 */
#ifndef KQ_STORE_H
#define KQ_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kq/raft.h"
#include "kq/raft_host.h"

#define KQ_STORE_FORMAT_VERSION 1
#define KQ_STORE_ID_LEN 22 /* Kafka-style base64 uuid, without NUL */

typedef struct kq_store kq_store;

typedef struct kq_store_identity {
    char cluster_id[KQ_STORE_ID_LEN + 1];
    char directory_id[KQ_STORE_ID_LEN + 1];
    int32_t node_id;
} kq_store_identity;

/* Create `dir` (and parents) and stamp it. KQ_ERR_ALREADY_FORMATTED if it already holds a
 * formatted store (nothing changed). directory_id is generated. errbuf gets a message. */
int kq_store_format(const char *dir, const char *cluster_id, int32_t node_id,
                    kq_store_identity *out, char *errbuf, size_t errlen);

/* What kq storage format may add (KIP-853). directory_id: this directory's id (22-char base64,
 * not all zero) as --initial-controllers names it; NULL: a random one. bootstrap: `count`
 * length-prefixed records (KRaftVersion, Voters) stored in the same transaction; NULL: none. */
typedef struct kq_store_format_opts {
    const char *directory_id;
    const uint8_t *bootstrap;
    size_t bootstrap_len;
    int32_t bootstrap_count;
} kq_store_format_opts;
int kq_store_format_opts_apply(const char *dir, const char *cluster_id, int32_t node_id,
                               const kq_store_format_opts *opts, kq_store_identity *out,
                               char *errbuf, size_t errlen);

/* kq metadata-quorum unsafe-recover: a new directory id (22-char base64, not all zero) in the
 * open write transaction; after the commit, kq_store_write_meta_properties rewrites the
 * human-readable copy. 0, KQ_ERR_INVALID_REQUEST or KQ_ERR_IO. */
int kq_store_put_directory_id(kq_store *s, const char *directory_id);
int kq_store_write_meta_properties(kq_store *s, char *errbuf, size_t errlen);

/* The bootstrap records (meta "bootstrap"): *records malloc'd (caller frees), *count 0 and
 * *records NULL when there are none. 0, KQ_ERR_CORRUPT_MESSAGE (damaged value), KQ_ERR_IO. */
int kq_store_get_bootstrap(kq_store *s, uint8_t **records, size_t *len, int32_t *count);

/* Open a formatted directory. expect_cluster_id may be NULL (any); expect_node_id may be -1
 * (any). Errors, each with a message in errbuf that says how to fix it:
 *   KQ_ERR_NOT_FORMATTED (missing dir or no store: "run kq storage format ..."),
 *   KQ_ERR_MISMATCH (cluster id or node id differs), KQ_ERR_IO. */
int kq_store_open(const char *dir, const char *expect_cluster_id, int32_t expect_node_id,
                  kq_store **out, char *errbuf, size_t errlen);
/* Open read-only (for kq log-dump); no identity check beyond being formatted. */
int kq_store_open_readonly(const char *dir, kq_store **out, char *errbuf, size_t errlen);
void kq_store_close(kq_store *s);

const kq_store_identity *kq_store_identity_of(const kq_store *s);

/* Recovered state for KQ_RAFT_EV_START. *epochs is malloc'd (caller frees). */
typedef struct kq_store_recovered {
    kq_raft_qstate qstate; /* epoch 0, -1, -1 if never written */
    int64_t log_start_offset;
    int64_t log_end_offset;
    int32_t last_epoch; /* epoch of the last batch, 0 if empty */
    kq_epoch_entry *epochs;
    size_t n_epochs;
    int32_t log_start_epoch;      /* epoch of the record at log_start_offset - 1, 0 if none */
    kq_raft_snapshot_id snapshot; /* latest snapshot file, {0, 0} if none */
    int64_t snapshot_size;        /* its size in bytes (0 if none) */
} kq_store_recovered;
/* A wiped or new directory recovers as all zeros (qstate -1s). Fill kq_raft_persisted from it
 * field by field (log_start_epoch, snapshot, snapshot_size included). */
int kq_store_recover(kq_store *s, kq_store_recovered *out);

/* Write transaction. */
int kq_store_begin(kq_store *s);
int kq_store_put_qstate(kq_store *s, const kq_raft_qstate *qs);
/* Remove every batch with base offset >= offset and every epoch entry starting at >= offset.
 * offset must be a batch boundary (KQ_ERR_INVALID_REQUEST otherwise). */
int kq_store_truncate(kq_store *s, int64_t offset);
/* Append a batch; base_offset must equal the current end. Adds an epoch entry when `epoch`
 * is greater than the last one. crc32c is of `records`. */
int kq_store_append(kq_store *s, int64_t base_offset, int32_t epoch, int32_t count,
                    const uint8_t *records, size_t len);
/* Remove every batch below `offset` (a batch boundary or the log end, >= the log start; it
 * must be a snapshot end: kq_raft_update.compact_to), drop the epoch entries that end at or
 * below it, clamp the one covering offset - 1 to start at `offset`, and record the new log
 * start. KQ_ERR_INVALID_REQUEST for an offset that is not a boundary or out of range. */
int kq_store_delete_prefix(kq_store *s, int64_t offset);
int kq_store_commit(kq_store *s); /* fsyncs; KQ_ERR_IO is fatal for the caller */
void kq_store_abort(kq_store *s);
int kq_store_in_txn(const kq_store *s);
/* The store as a Raft host's disk (kq/raft_host.h): each write opens the write transaction if
 * none is open, commit is kq_store_commit; truncations and prefix removals are logged, and a
 * prefix removal keeps the two newest snapshots. s is borrowed: it must outlive the host. */
kq_raft_disk kq_store_raft_disk(kq_store *s);

/* Read whole batches with base offset in [from, to), stopping before the total records size
 * would exceed max_bytes (but always returning at least one batch if any). `from` must be a
 * batch boundary. The callback gets copies valid only during the call; return non-zero to
 * stop. Returns 0, or KQ_ERR_CORRUPT_MESSAGE when a stored CRC does not match. */
typedef int (*kq_store_batch_cb)(void *arg, int64_t base_offset, int32_t epoch, int32_t count,
                                 uint32_t crc32c, const uint8_t *records, size_t len);
int kq_store_read(kq_store *s, int64_t from, int64_t to, size_t max_bytes, kq_store_batch_cb cb,
                  void *arg);

/* Start-up check of what the node will rely on, before it serves or votes: every stored batch
 * from rec's log start to its log end (rec: from kq_store_recover) is read back, its CRC32C
 * checked (the CRC covers the records only, so the header is checked against the rest: the
 * batches must follow each other without gaps, and each batch's epoch must be the one rec's
 * epoch index gives its offset and no later than the stored quorum epoch), and cb (may be NULL)
 * checks each batch's content (return non-zero with a message in errbuf to refuse it). Also the
 * latest snapshot file, whole. 0, or KQ_ERR_CORRUPT_MESSAGE (damage) or another error (KQ_ERR_IO,
 * KQ_ERR_NOMEM: a failure that is not damage) with errbuf naming the file (<dir>/data.mdb or the
 * snapshot) and what is wrong. An LMDB page so damaged that LMDB asserts ends the process with exit
 * status 2 and a message naming the file (kq_lmdb_env_open), never an abort. */
typedef int (*kq_store_check_cb)(void *arg, int64_t base_offset, int32_t count,
                                 const uint8_t *records, size_t len, char *errbuf, size_t errlen);
int kq_store_verify(kq_store *s, const kq_store_recovered *rec, kq_store_check_cb cb, void *arg,
                    char *errbuf, size_t errlen);

/* Start-up only: LMDB reads its file through a memory map, so a page number damaged on disk
 * can make it touch memory past the end of the file (SIGBUS) or follow a wild pointer
 * (SIGSEGV) instead of returning an error. Between kq_store_guard_reads(dir) and
 * kq_store_unguard_reads() (around opening, recovering and kq_store_verify), either signal
 * prints that the store in dir is damaged and how to recover, and exits 2. Not for the
 * daemon's run: a crash there is a bug to keep, not to explain away. Not thread-safe: call
 * from the main thread before other threads read the store. */
void kq_store_guard_reads(const char *dir);
void kq_store_unguard_reads(void);

/* True when the file system holding dir has (nearly) no space left for an unprivileged write:
 * how a daemon tells a full disk from other write failures (LMDB reports ENOSPC as EIO). */
bool kq_store_dir_full(const char *dir);

/* Bytes a stored batch takes before its records: {epoch, count, crc32c}. */
#define KQ_STORE_BATCH_HEADER_LEN 12

/* A consistent view for a reader of a directory that a daemon may be writing (kq log-dump):
 * between view_begin and view_end, kq_store_recover and kq_store_read all run in one LMDB read
 * transaction, so they see the log as it was at view_begin even if the daemon meanwhile
 * appends, truncates or removes the prefix below a snapshot (LMDB keeps the pages the view
 * uses; the file may grow while it is open, so keep it short). Snapshot files are not part of
 * it. Not allowed with a write transaction open (and kq_store_begin is refused while a view
 * is): KQ_ERR_INVALID_REQUEST. kq_store_close ends an open view. */
int kq_store_view_begin(kq_store *s);
void kq_store_view_end(kq_store *s);

/* ---- snapshots (outside the write transaction; one thread) ---- */

#define KQ_STORE_SNAPSHOT_HEADER_LEN 36
#define KQ_STORE_SNAPSHOTS_KEPT 2

/* Write a snapshot of committed state: `payload` (the image as records, e.g. from
 * kq_image_snapshot_write) at id. Durable on return; *size_out (may be NULL) gets the file
 * size to give the core in KQ_RAFT_EV_SNAPSHOT_TAKEN. Overwrites an existing file of that id.
 * KQ_ERR_IO (errbuf says why), KQ_ERR_INVALID_REQUEST for a bad id. */
int kq_store_snapshot_write(kq_store *s, kq_raft_snapshot_id id, const uint8_t *payload, size_t len,
                            int64_t *size_out, char *errbuf, size_t errlen);
/* Snapshot ids on disk (finished files only), ascending by end offset; *n gets the count
 * (may exceed cap: only cap are stored). */
int kq_store_snapshot_list(kq_store *s, kq_raft_snapshot_id *ids, size_t cap, size_t *n);
/* Latest snapshot and its file size; KQ_ERR_NOT_FOUND if there is none. */
int kq_store_snapshot_latest(kq_store *s, kq_raft_snapshot_id *id, int64_t *size);
/* File size of snapshot id; KQ_ERR_SNAPSHOT_NOT_FOUND if absent. */
int kq_store_snapshot_size(kq_store *s, kq_raft_snapshot_id id, int64_t *size);
/* Raw file bytes [position, position + len) for FetchSnapshot (*n_read may be < len at the
 * end). KQ_ERR_SNAPSHOT_NOT_FOUND, KQ_ERR_POSITION_OUT_OF_RANGE (position < 0 or >= size). */
int kq_store_snapshot_read(kq_store *s, kq_raft_snapshot_id id, int64_t position, uint8_t *buf,
                           size_t len, size_t *n_read);
/* Read and verify (magic, header CRC, id, length, payload CRC) a snapshot; *payload is
 * malloc'd, the caller frees it. KQ_ERR_SNAPSHOT_NOT_FOUND, KQ_ERR_CORRUPT_MESSAGE (errbuf
 * names the problem), KQ_ERR_IO, KQ_ERR_NOMEM. */
int kq_store_snapshot_load(kq_store *s, kq_raft_snapshot_id id, uint8_t **payload, size_t *len,
                           char *errbuf, size_t errlen);
/* Read and verify a snapshot file by path, with no store open (kq log-dump --snapshot): magic,
 * header CRC, payload length and payload CRC; the file name is not checked. *id gets the
 * snapshot id its header names, *size (may be NULL) the file size; *payload is malloc'd, the
 * caller frees it. KQ_ERR_SNAPSHOT_NOT_FOUND, KQ_ERR_CORRUPT_MESSAGE, KQ_ERR_IO (not a regular
 * file, unreadable), KQ_ERR_NOMEM; errbuf names the file and the problem. */
int kq_store_snapshot_file_load(const char *path, kq_raft_snapshot_id *id, uint8_t **payload,
                                size_t *len, int64_t *size, char *errbuf, size_t errlen);
/* Delete all but the latest `keep` (>= 1) snapshots; never one at or above the log start
 * that is the only one left. */
int kq_store_snapshot_delete_older(kq_store *s, size_t keep);

/* Follower side of FetchSnapshot (kq_raft_update.snapshot_chunk / snapshot_abort /
 * install_snapshot). part_write: position 0 starts a fresh .part; otherwise position must
 * be the current .part size (KQ_ERR_POSITION_OUT_OF_RANGE if not). */
int kq_store_snapshot_part_write(kq_store *s, kq_raft_snapshot_id id, int64_t position,
                                 const uint8_t *data, size_t len);
int kq_store_snapshot_part_abort(kq_store *s, kq_raft_snapshot_id id);
/* Install the complete .part of id: verify it (KQ_ERR_CORRUPT_MESSAGE: the .part is deleted,
 * nothing else changes), then in one synchronous transaction delete the whole log, set the
 * epoch cache to {id.epoch: id.end_offset} and the log start and end to id.end_offset, then
 * rename the file to .checkpoint. Must be called outside a write transaction. Crash-safe: a
 * crash before the transaction leaves the old log (the .part is removed at the next open);
 * after it, the next writable open finishes the rename. */
int kq_store_install_snapshot(kq_store *s, kq_raft_snapshot_id id, char *errbuf, size_t errlen);

#endif
