/*
 * Internal helpers shared by kq_store (common/io/store.c) and kq_plog (common/io/plog.c), the
 * two LMDB-backed directories: big-endian integers for keys and values, LMDB error mapping,
 * environment open, the identity checks and their messages, deleting from a database's end.
 * Not a public header: nothing outside common/io includes it.
 *
 * Ownership: no function here keeps a pointer it is given; errbuf is the caller's.
 */
#ifndef KQ_IO_LMDB_UTIL_H
#define KQ_IO_LMDB_UTIL_H

#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

#include "kq/store.h"

/* Address space only: the data file stays sparse. */
#define KQ_LMDB_MAP_SIZE ((size_t)1 << 40)

/* ---- big-endian integers (keys compare as bytes, so these sort numerically) -------------- */

static inline void put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline uint16_t get_be16(const uint8_t *p)
{
    return (uint16_t)(((unsigned)p[0] << 8) | p[1]);
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline uint32_t get_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void put_be64(uint8_t *p, uint64_t v)
{
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

static inline uint64_t get_be64(const uint8_t *p)
{
    return ((uint64_t)get_be32(p) << 32) | get_be32(p + 4);
}

/* ---- LMDB -------------------------------------------------------------------------------- */

/* Reading what must be there (the identity, the databases, the log's ends): an LMDB result
 * that means the file is damaged is KQ_ERR_CORRUPT_MESSAGE (a start-up refusal, exit 2, not a
 * runtime failure to retry), anything else as kq_lmdb_err. */
int kq_lmdb_read_err(int rc);

/* kq error code for an LMDB (or errno) result: 0, KQ_ERR_FULL, KQ_ERR_NOMEM or KQ_ERR_IO. */
int kq_lmdb_err(int rc);

/* Creates and opens the environment in dir (map size KQ_LMDB_MAP_SIZE, max_dbs named
 * databases, MDB_NOTLS | flags, mode 0640) and clears stale reader slots. On success *out is
 * the caller's (mdb_env_close); on failure nothing is left open. Returns 0 or an LMDB error. */
int kq_lmdb_env_open(const char *dir, unsigned flags, unsigned max_dbs, MDB_env **out);

/* Checks a stored identity against the configured one (expect_cluster_id NULL: any;
 * expect_node_id < 0: any). On a mismatch writes the operator message, which names the
 * directory and its configuration key dir_key ("metadata.log.dir", "log.dirs"), and returns
 * KQ_ERR_MISMATCH; else 0. */
int kq_lmdb_check_identity(const kq_store_identity *id, const char *dir, const char *dir_key,
                           const char *expect_cluster_id, int32_t expect_node_id, char *errbuf,
                           size_t errlen);

/* Writes "<kind> directory <dir> is not formatted; run: kq storage format ..." to errbuf. */
void kq_lmdb_not_formatted(char *errbuf, size_t errlen, const char *kind, const char *dir);

/* Begins a write transaction in env into *txn. On failure *txn is NULL and the failure is
 * logged under component comp naming dir. Returns 0 or an LMDB error. */
int kq_lmdb_txn_begin(MDB_env *env, MDB_txn **txn, const char *comp, const char *dir);

/* Ends the write transaction *txn (always NULL afterwards): aborts it when bad (a write inside
 * it failed) and commits it otherwise. A refused or failed commit sets *failed and is logged
 * under comp naming dir. Returns 0 or KQ_ERR_IO. */
int kq_lmdb_txn_commit(MDB_txn **txn, int bad, int *failed, const char *comp, const char *dir);

/* Positions c on the current last entry of the range being deleted: 0 or MDB_NOTFOUND (or an
 * LMDB error). arg is the caller's. */
typedef int (*kq_lmdb_seek_fn)(MDB_cursor *c, MDB_val *k, MDB_val *v, const void *arg);
/* Reads the offset an entry holds: 0 (in *off), MDB_NOTFOUND to stop deleting there, or an
 * LMDB error such as MDB_CORRUPTED. */
typedef int (*kq_lmdb_offset_fn)(const MDB_val *k, const MDB_val *v, int64_t *off);

/* Deletes entries of dbi from the end backwards while the last one holds an offset >= from,
 * re-positioning (seek, or MDB_LAST when seek is NULL) after every delete, which avoids
 * LMDB's cursor position subtleties after mdb_cursor_del. Returns 0 or an LMDB error. */
int kq_lmdb_delete_tail(MDB_txn *txn, MDB_dbi dbi, kq_lmdb_seek_fn seek, const void *seek_arg,
                        kq_lmdb_offset_fn offset_of, int64_t from);

#endif
