/*
 * kq_store: a node's metadata-log directory, one LMDB environment (DESIGN.md section 5).
 *
 * Named databases:
 *   meta   : "format_version", "cluster_id", "node_id", "directory_id", "quorum_state"
 *   log    : 8-byte big-endian base offset -> 12-byte header {epoch u32 BE, count u32 BE,
 *            crc32c u32 BE of the records} followed by the records bytes
 *   epochs : 4-byte big-endian epoch -> 8-byte big-endian start offset
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

#include <stddef.h>
#include <stdint.h>

#include "kq/raft.h"

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
    kq_raft_epoch_entry *epochs;
    size_t n_epochs;
} kq_store_recovered;
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
int kq_store_commit(kq_store *s); /* fsyncs; KQ_ERR_IO is fatal for the caller */
void kq_store_abort(kq_store *s);
int kq_store_in_txn(const kq_store *s);

/* Read whole batches with base offset in [from, to), stopping before the total records size
 * would exceed max_bytes (but always returning at least one batch if any). `from` must be a
 * batch boundary. The callback gets copies valid only during the call; return non-zero to
 * stop. Returns 0, or KQ_ERR_CORRUPT_MESSAGE when a stored CRC does not match. */
typedef int (*kq_store_batch_cb)(void *arg, int64_t base_offset, int32_t epoch, int32_t count,
                                 uint32_t crc32c, const uint8_t *records, size_t len);
int kq_store_read(kq_store *s, int64_t from, int64_t to, size_t max_bytes, kq_store_batch_cb cb,
                  void *arg);

#endif
