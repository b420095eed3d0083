/*
 * kq_plog: the partition logs of a broker data directory (a log.dirs entry), many partitions
 * in one LMDB environment.
 *
 * On-disk format, version 1 (also described for operators in docs/storage.md)
 * ---------------------------------------------------------------------------
 * The directory is a kq_store directory (kq_store_format made it: data.mdb, lock.mdb,
 * meta.properties, and the kq_store "meta" database with the identity). Its kq_store "log"
 * and "epochs" databases stay empty. The first kq_plog_open adds, in one transaction:
 *   meta            "plog_format_version" -> ASCII decimal, "1"
 *   plog_partitions partition key -> 25 bytes: version u8 (= 1), log start offset i64 BE,
 *                   high-watermark checkpoint i64 BE, partition epoch i32 BE, crc32c u32 BE of
 *                   the 21 bytes before it
 *   plog_batches    partition key + 8-byte BE base offset -> 26-byte header {crc32c u32,
 *                   leader epoch u32, record count u32, producer id i64, producer epoch i16,
 *                   base sequence i32} (all BE) followed by the records bytes. The crc32c
 *                   covers the 8-byte key offset, then every value byte after the crc field.
 *                   Batches of a partition are contiguous from its log start offset.
 *   plog_epochs     partition key + 4-byte BE leader epoch -> 8-byte BE start offset; epochs
 *                   and start offsets strictly ascending within a partition.
 * The partition key is the 16-byte topic id followed by the partition index as u32 BE, so a
 * partition's entries are adjacent and sorted. A partition exists exactly when its
 * plog_partitions entry does.
 *
 * Commits are synchronous; a failed commit marks the handle failed (as kq_store does).
 */
#include "kq/plog.h"

#include <inttypes.h>
#include <limits.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/log.h"
#include "kq/util.h"
#include "lmdb_util.h"

#define PLOG_MAX_DBS 16
#define PKEY_LEN 20
#define BKEY_LEN (PKEY_LEN + 8)
#define EKEY_LEN (PKEY_LEN + 4)
#define BHDR_LEN KQ_PLOG_BATCH_HEADER_LEN
#define PMETA_LEN 25
#define PMETA_VERSION 1

typedef struct lmdb_plog {
    kq_plog base; /* first: the interface (ops == &lmdb_ops) */
    MDB_env *env;
    MDB_dbi meta, parts, batches, epochs;
    MDB_txn *txn;  /* the open write transaction, or NULL */
    MDB_txn *view; /* kq_plog_view_begin's read transaction, or NULL */
    int readonly;  /* kq_plog_open_readonly: no write transaction */
    int no_parts;  /* read-only open of a directory no broker has opened: no partition dbs */
    int failed;    /* a commit failed: only close is allowed */
    int txn_bad;   /* a write inside the current txn failed: commit will refuse */
    kq_store_identity id;
    char dir[PATH_MAX];
} lmdb_plog;

static const kq_plog_ops lmdb_ops;
static void lmdb_close(kq_plog *bp);

typedef struct pmeta {
    int64_t log_start;
    int64_t hw;
    int32_t pepoch;
} pmeta;

/* What a mutation or query needs to know about a partition, read in its transaction. */
typedef struct pinfo {
    uint8_t key[PKEY_LEN];
    pmeta m;
    int64_t leo;
    int have_batch;
    int64_t last_base;
    int32_t last_entry_epoch; /* -1 if the epoch cache is empty */
    int64_t last_entry_start;
} pinfo;

/* ---- small helpers ---------------------------------------------------------------------- */

/* As kq_store's mapping, but a damaged partition entry is reported as corrupt. */
static int mdb_to_kq(int rc)
{
    return rc == MDB_CORRUPTED ? KQ_ERR_CORRUPT_MESSAGE : kq_lmdb_err(rc);
}

static void make_pkey(uint8_t *out, const kq_plog_tp *tp)
{
    memcpy(out, tp->topic_id, 16);
    put_be32(out + 16, (uint32_t)tp->partition);
}

static void tp_from_key(kq_plog_tp *tp, const uint8_t *key)
{
    memcpy(tp->topic_id, key, 16);
    tp->partition = (int32_t)get_be32(key + 16);
}

static void make_bkey(uint8_t *out, const uint8_t *pkey, int64_t offset)
{
    memcpy(out, pkey, PKEY_LEN);
    put_be64(out + PKEY_LEN, (uint64_t)offset);
}

static void make_ekey(uint8_t *out, const uint8_t *pkey, int32_t epoch)
{
    memcpy(out, pkey, PKEY_LEN);
    put_be32(out + PKEY_LEN, (uint32_t)epoch);
}

static int has_prefix(const MDB_val *k, const uint8_t *pkey, size_t klen)
{
    return k->mv_size == klen && memcmp(k->mv_data, pkey, PKEY_LEN) == 0;
}

static uint32_t batch_crc(const uint8_t *bkey, const uint8_t *val, size_t vlen)
{
    return kq_crc32c(kq_crc32c(0, bkey + PKEY_LEN, 8), val + 4, vlen - 4);
}

static void encode_pmeta(uint8_t *buf, const pmeta *m)
{
    buf[0] = PMETA_VERSION;
    put_be64(buf + 1, (uint64_t)m->log_start);
    put_be64(buf + 9, (uint64_t)m->hw);
    put_be32(buf + 17, (uint32_t)m->pepoch);
    put_be32(buf + 21, kq_crc32c(0, buf, 21));
}

/* 0, MDB_NOTFOUND, MDB_CORRUPTED (bad size, version or crc) or an LMDB error. */
static int get_pmeta(MDB_txn *txn, MDB_dbi parts, const uint8_t *pkey, pmeta *m)
{
    MDB_val k = {PKEY_LEN, (void *)pkey}, v;
    int rc = mdb_get(txn, parts, &k, &v);
    if (rc != 0)
        return rc;
    const uint8_t *b = v.mv_data;
    if (v.mv_size != PMETA_LEN || b[0] != PMETA_VERSION || get_be32(b + 21) != kq_crc32c(0, b, 21))
        return MDB_CORRUPTED;
    m->log_start = (int64_t)get_be64(b + 1);
    m->hw = (int64_t)get_be64(b + 9);
    m->pepoch = (int32_t)get_be32(b + 17);
    if (m->log_start < 0 || m->hw < m->log_start)
        return MDB_CORRUPTED;
    return 0;
}

static int put_pmeta(MDB_txn *txn, MDB_dbi parts, const uint8_t *pkey, const pmeta *m)
{
    uint8_t buf[PMETA_LEN];
    encode_pmeta(buf, m);
    MDB_val k = {PKEY_LEN, (void *)pkey}, v = {sizeof(buf), buf};
    return mdb_put(txn, parts, &k, &v, 0);
}

/* Positions c on the last entry whose key is pkey + `suffix` bytes. 0 or MDB_NOTFOUND. */
static int seek_last(MDB_cursor *c, const uint8_t *pkey, size_t suffix, MDB_val *k, MDB_val *v)
{
    uint8_t key[BKEY_LEN];
    memcpy(key, pkey, PKEY_LEN);
    memset(key + PKEY_LEN, 0xFF, suffix); /* above any valid (non-negative) offset or epoch */
    k->mv_size = PKEY_LEN + suffix;
    k->mv_data = key;
    int rc = mdb_cursor_get(c, k, v, MDB_SET_RANGE);
    if (rc == 0)
        rc = mdb_cursor_get(c, k, v, MDB_PREV);
    else if (rc == MDB_NOTFOUND)
        rc = mdb_cursor_get(c, k, v, MDB_LAST);
    if (rc == 0 && (k->mv_size < PKEY_LEN || memcmp(k->mv_data, pkey, PKEY_LEN) != 0))
        rc = MDB_NOTFOUND;
    return rc;
}

/* Positions c on the first entry with key >= key (klen bytes) that still has the prefix. */
static int seek_first(MDB_cursor *c, const uint8_t *key, size_t klen, MDB_val *k, MDB_val *v)
{
    k->mv_size = klen;
    k->mv_data = (void *)key;
    int rc = mdb_cursor_get(c, k, v, MDB_SET_RANGE);
    if (rc == 0 && (k->mv_size < PKEY_LEN || memcmp(k->mv_data, key, PKEY_LEN) != 0))
        rc = MDB_NOTFOUND;
    return rc;
}

/* Fills *pi for tp in txn: 0, MDB_NOTFOUND (no such partition), MDB_CORRUPTED or LMDB error. */
static int load_pinfo(const lmdb_plog *p, MDB_txn *txn, const kq_plog_tp *tp, pinfo *pi)
{
    MDB_cursor *c = NULL;
    MDB_val k, v;
    int rc;

    memset(pi, 0, sizeof(*pi));
    make_pkey(pi->key, tp);
    if ((rc = get_pmeta(txn, p->parts, pi->key, &pi->m)) != 0)
        return rc;
    pi->leo = pi->m.log_start;
    pi->last_entry_epoch = -1;
    if ((rc = mdb_cursor_open(txn, p->batches, &c)) != 0)
        return rc;
    rc = seek_last(c, pi->key, 8, &k, &v);
    if (rc == 0) {
        if (k.mv_size != BKEY_LEN || v.mv_size < BHDR_LEN) {
            rc = MDB_CORRUPTED;
            goto out;
        }
        pi->have_batch = 1;
        pi->last_base = (int64_t)get_be64((const uint8_t *)k.mv_data + PKEY_LEN);
        int32_t count = (int32_t)get_be32((const uint8_t *)v.mv_data + 8);
        if (count <= 0 || pi->last_base < pi->m.log_start || pi->last_base > INT64_MAX - count) {
            rc = MDB_CORRUPTED;
            goto out;
        }
        pi->leo = pi->last_base + count;
    } else if (rc != MDB_NOTFOUND) {
        goto out;
    }
    mdb_cursor_close(c);
    c = NULL;
    if ((rc = mdb_cursor_open(txn, p->epochs, &c)) != 0)
        return rc;
    rc = seek_last(c, pi->key, 4, &k, &v);
    if (rc == 0) {
        if (k.mv_size != EKEY_LEN || v.mv_size != 8) {
            rc = MDB_CORRUPTED;
            goto out;
        }
        pi->last_entry_epoch = (int32_t)get_be32((const uint8_t *)k.mv_data + PKEY_LEN);
        pi->last_entry_start = (int64_t)get_be64(v.mv_data);
        if (pi->last_entry_epoch < 0 || pi->last_entry_start < 0) {
            rc = MDB_CORRUPTED;
            goto out;
        }
    } else if (rc == MDB_NOTFOUND) {
        rc = 0;
    }
out:
    if (c != NULL)
        mdb_cursor_close(c);
    return rc;
}

/* Maps load_pinfo's result to a kq error, logging damage. */
static int pinfo_err(const lmdb_plog *p, int rc, const kq_plog_tp *tp, const char *what)
{
    if (rc == 0)
        return 0;
    if (rc == MDB_NOTFOUND)
        return KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    char topic[KQ_UUID_STR_LEN + 1];
    kq_uuid_format(tp->topic_id, topic);
    if (rc == MDB_CORRUPTED)
        KQ_ERROR("plog", "partition metadata is damaged", "dir=%s topic_id=%s partition=%" PRId32,
                 p->dir, topic, tp->partition);
    else
        KQ_ERROR("plog", "cannot read partition",
                 "dir=%s op=%s topic_id=%s partition=%" PRId32 " err=\"%s\"", p->dir, what, topic,
                 tp->partition, mdb_strerror(rc));
    return mdb_to_kq(rc);
}

static int valid_tp(const kq_plog_tp *tp)
{
    return tp != NULL && tp->partition >= 0;
}

/* ---- format / open ---------------------------------------------------------------------- */

int kq_plog_format(const char *dir, const char *cluster_id, int32_t node_id, kq_store_identity *out,
                   char *errbuf, size_t errlen)
{
    /* The identity and its checks are kq_store's: one format for every kq data directory. */
    return kq_store_format(dir, cluster_id, node_id, out, errbuf, errlen);
}

/* Reads and checks the identity through kq_store (which opens and closes the environment). */
static int check_identity(const char *dir, const char *expect_cluster_id, int32_t expect_node_id,
                          kq_store_identity *id, char *errbuf, size_t errlen)
{
    kq_store *s = NULL;
    int ret = kq_store_open_readonly(dir, &s, errbuf, errlen);
    if (ret == KQ_ERR_NOT_FORMATTED) {
        kq_lmdb_not_formatted(errbuf, errlen, "log", dir);
        return ret;
    }
    if (ret != 0)
        return ret;
    *id = *kq_store_identity_of(s);
    kq_store_close(s);
    return kq_lmdb_check_identity(id, dir, "log.dirs", expect_cluster_id, expect_node_id, errbuf,
                                  errlen);
}

/* Both opens: a broker's (readonly 0: creates the format key and the partition databases on
 * first use) and log-dump's (readonly 1: MDB_RDONLY, creates nothing; a directory no broker
 * has opened has no partition databases and lists none). */
static int plog_open(const char *dir, int readonly, const char *expect_cluster_id,
                     int32_t expect_node_id, kq_plog **out, char *errbuf, size_t errlen)
{
    lmdb_plog *p = NULL;
    MDB_txn *txn = NULL;
    MDB_val k, v;
    char ver[16];
    unsigned dbi_flags = readonly ? 0 : MDB_CREATE;
    int rc, ret = 0;

    kq_errf(errbuf, errlen, "%s", "");
    *out = NULL;
    if (dir == NULL || dir[0] == '\0') {
        kq_errf(errbuf, errlen, "no log directory given (set log.dirs)");
        return KQ_ERR_CONFIG;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        kq_errf(errbuf, errlen, "out of memory");
        return KQ_ERR_NOMEM;
    }
    p->base.ops = &lmdb_ops;
    p->readonly = readonly;
    if (strlen(dir) >= sizeof(p->dir)) {
        kq_errf(errbuf, errlen, "log directory path too long: %s", dir);
        ret = KQ_ERR_CONFIG;
        goto out;
    }
    snprintf(p->dir, sizeof(p->dir), "%s", dir);
    if ((ret = check_identity(dir, expect_cluster_id, expect_node_id, &p->id, errbuf, errlen)) != 0)
        goto out;

    if ((rc = kq_lmdb_env_open(dir, readonly ? MDB_RDONLY : 0, PLOG_MAX_DBS, &p->env)) != 0 ||
        (rc = mdb_txn_begin(p->env, NULL, readonly ? MDB_RDONLY : 0, &txn)) != 0 ||
        (rc = mdb_dbi_open(txn, "meta", 0, &p->meta)) != 0)
        goto mdb_fail;
    k.mv_size = strlen("plog_format_version");
    k.mv_data = (void *)"plog_format_version";
    rc = mdb_get(txn, p->meta, &k, &v);
    if (rc == MDB_NOTFOUND && readonly) {
        p->no_parts = 1; /* formatted, but no broker has opened it yet */
    } else if (rc == MDB_NOTFOUND) {
        snprintf(ver, sizeof(ver), "%d", KQ_PLOG_FORMAT_VERSION);
        v.mv_size = strlen(ver);
        v.mv_data = ver;
        if ((rc = mdb_put(txn, p->meta, &k, &v, 0)) != 0)
            goto mdb_fail;
    } else if (rc != 0) {
        goto mdb_fail;
    } else if (v.mv_size != 1 || ((const char *)v.mv_data)[0] != '1') {
        kq_errf(errbuf, errlen,
                "partition logs in %s have format version %.*s but this kq reads version %d; "
                "use a matching kq release",
                dir, (int)(v.mv_size < 16 ? v.mv_size : 16), (const char *)v.mv_data,
                KQ_PLOG_FORMAT_VERSION);
        ret = KQ_ERR_UNSUPPORTED_VERSION;
        goto out;
    }
    if (!p->no_parts && ((rc = mdb_dbi_open(txn, "plog_partitions", dbi_flags, &p->parts)) != 0 ||
                         (rc = mdb_dbi_open(txn, "plog_batches", dbi_flags, &p->batches)) != 0 ||
                         (rc = mdb_dbi_open(txn, "plog_epochs", dbi_flags, &p->epochs)) != 0))
        goto mdb_fail;
    /* Commit (not abort) the txn, read-only too: database handles opened in an aborted txn are
     * closed again. */
    rc = mdb_txn_commit(txn);
    txn = NULL;
    if (rc != 0)
        goto mdb_fail;
    goto out;

mdb_fail:
    kq_errf(errbuf, errlen, "cannot %s the partition logs in %s: %s", readonly ? "read" : "open",
            dir, mdb_strerror(rc));
    ret = mdb_to_kq(rc);
out:
    if (txn != NULL)
        mdb_txn_abort(txn);
    if (ret != 0) {
        if (p != NULL)
            lmdb_close(&p->base);
        return ret;
    }
    *out = &p->base;
    return 0;
}

int kq_plog_open(const char *dir, const char *expect_cluster_id, int32_t expect_node_id,
                 kq_plog **out, char *errbuf, size_t errlen)
{
    return plog_open(dir, 0, expect_cluster_id, expect_node_id, out, errbuf, errlen);
}

int kq_plog_open_readonly(const char *dir, kq_plog **out, char *errbuf, size_t errlen)
{
    return plog_open(dir, 1, NULL, -1, out, errbuf, errlen);
}

/* p's LMDB handle, NULL for another implementation of kq_plog. */
static lmdb_plog *as_lmdb(const kq_plog *p)
{
    return p != NULL && p->ops == &lmdb_ops ? (lmdb_plog *)p : NULL;
}

int kq_plog_view_begin(kq_plog *bp)
{
    lmdb_plog *p = as_lmdb(bp);
    if (p == NULL)
        return KQ_ERR_INVALID_REQUEST;
    if (p->failed)
        return KQ_ERR_IO;
    if (p->txn != NULL || p->view != NULL)
        return KQ_ERR_INVALID_REQUEST;
    int rc = mdb_txn_begin(p->env, NULL, MDB_RDONLY, &p->view);
    if (rc != 0) {
        p->view = NULL;
        KQ_ERROR("plog", "cannot begin a read transaction", "dir=%s err=\"%s\"", p->dir,
                 mdb_strerror(rc));
        return mdb_to_kq(rc);
    }
    return 0;
}

void kq_plog_view_end(kq_plog *bp)
{
    lmdb_plog *p = as_lmdb(bp);
    if (p != NULL && p->view != NULL) {
        mdb_txn_abort(p->view);
        p->view = NULL;
    }
}

static void lmdb_close(kq_plog *bp)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    if (p == NULL)
        return;
    if (p->view != NULL)
        mdb_txn_abort(p->view);
    if (p->txn != NULL)
        mdb_txn_abort(p->txn);
    if (p->env != NULL)
        mdb_env_close(p->env);
    free(p);
}

static const kq_store_identity *lmdb_identity_of(const kq_plog *bp)
{
    const lmdb_plog *p = (const lmdb_plog *)bp;
    return &p->id;
}

const char *kq_plog_dir(const kq_plog *bp)
{
    const lmdb_plog *p = as_lmdb(bp);
    return p != NULL ? p->dir : "";
}

/* ---- write transaction ------------------------------------------------------------------- */

static int txn_check(const lmdb_plog *p, const kq_plog_tp *tp)
{
    if (p->failed)
        return KQ_ERR_IO;
    if (p->txn == NULL || !valid_tp(tp))
        return KQ_ERR_INVALID_REQUEST;
    return 0;
}

/* A write inside the txn failed; LMDB requires the txn to be aborted afterwards. */
static int txn_fail(lmdb_plog *p, int rc, const char *what)
{
    p->txn_bad = 1;
    KQ_ERROR("plog", "write failed", "dir=%s op=%s err=\"%s\"", p->dir, what, mdb_strerror(rc));
    return mdb_to_kq(rc);
}

static int lmdb_begin(kq_plog *bp)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    if (p->failed)
        return KQ_ERR_IO;
    if (p->readonly || p->txn != NULL || p->view != NULL)
        return KQ_ERR_INVALID_REQUEST;
    int rc = kq_lmdb_txn_begin(p->env, &p->txn, "plog", p->dir);
    if (rc != 0)
        return mdb_to_kq(rc);
    p->txn_bad = 0;
    return 0;
}

static int lmdb_commit(kq_plog *bp)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    if (p->failed)
        return KQ_ERR_IO;
    if (p->txn == NULL)
        return KQ_ERR_INVALID_REQUEST;
    return kq_lmdb_txn_commit(&p->txn, p->txn_bad, &p->failed, "plog", p->dir);
}

static void lmdb_abort(kq_plog *bp)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    if (p->txn != NULL)
        mdb_txn_abort(p->txn);
    p->txn = NULL;
    p->txn_bad = 0;
}

static int lmdb_in_txn(const kq_plog *bp)
{
    const lmdb_plog *p = (const lmdb_plog *)bp;
    return p->txn != NULL;
}

/* Deletes every entry of dbi with key >= from (flen bytes) that shares from's partition
 * prefix. Re-seeks after each delete (avoids cursor subtleties after mdb_cursor_del). */
static int delete_from(MDB_txn *txn, MDB_dbi dbi, const uint8_t *from, size_t flen)
{
    MDB_cursor *c = NULL;
    MDB_val k, v;
    int rc = mdb_cursor_open(txn, dbi, &c);
    if (rc != 0)
        return rc;
    while ((rc = seek_first(c, from, flen, &k, &v)) == 0) {
        if ((rc = mdb_cursor_del(c, 0)) != 0)
            break;
    }
    mdb_cursor_close(c);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* kq_lmdb_seek_fn: the last epoch entry of the partition whose key is arg. */
static int seek_last_epoch(MDB_cursor *c, MDB_val *k, MDB_val *v, const void *pkey)
{
    return seek_last(c, pkey, 4, k, v);
}

/* kq_lmdb_offset_fn: an epoch entry's start offset. */
static int epoch_start(const MDB_val *k, const MDB_val *v, int64_t *off)
{
    (void)k;
    if (v->mv_size != 8)
        return MDB_CORRUPTED;
    *off = (int64_t)get_be64(v->mv_data);
    return 0;
}

/* Deletes the partition's trailing epoch entries whose start offset is >= offset. */
static int delete_epochs_from(MDB_txn *txn, MDB_dbi dbi, const uint8_t *pkey, int64_t offset)
{
    return kq_lmdb_delete_tail(txn, dbi, seek_last_epoch, pkey, epoch_start, offset);
}

/* Adds the entry epoch -> start, after removing trailing entries starting at >= start. */
static int add_epoch_entry(MDB_txn *txn, MDB_dbi dbi, const uint8_t *pkey, int32_t epoch,
                           int64_t start)
{
    uint8_t ekey[EKEY_LEN], eval[8];
    int rc = delete_epochs_from(txn, dbi, pkey, start);
    if (rc != 0)
        return rc;
    make_ekey(ekey, pkey, epoch);
    put_be64(eval, (uint64_t)start);
    MDB_val k = {sizeof(ekey), ekey}, v = {sizeof(eval), eval};
    return mdb_put(txn, dbi, &k, &v, 0);
}

static int lmdb_create_partition(kq_plog *bp, const kq_plog_tp *tp, int32_t partition_epoch,
                                 int64_t log_start_offset)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    uint8_t pkey[PKEY_LEN];
    pmeta m;
    int rc, ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    if (log_start_offset < 0 || partition_epoch < 0)
        return KQ_ERR_INVALID_REQUEST;
    make_pkey(pkey, tp);
    rc = get_pmeta(p->txn, p->parts, pkey, &m);
    if (rc == 0 || rc == MDB_CORRUPTED)
        return KQ_ERR_TOPIC_ALREADY_EXISTS;
    if (rc != MDB_NOTFOUND)
        return txn_fail(p, rc, "create_partition");
    m.log_start = log_start_offset;
    m.hw = log_start_offset;
    m.pepoch = partition_epoch;
    /* a crash-free store never holds batches or epochs without a partition entry, but clear
     * any anyway so a new partition always starts empty */
    if ((rc = delete_from(p->txn, p->batches, pkey, PKEY_LEN)) != 0 ||
        (rc = delete_from(p->txn, p->epochs, pkey, PKEY_LEN)) != 0 ||
        (rc = put_pmeta(p->txn, p->parts, pkey, &m)) != 0)
        return txn_fail(p, rc, "create_partition");
    return 0;
}

static int lmdb_delete_partition(kq_plog *bp, const kq_plog_tp *tp)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    uint8_t pkey[PKEY_LEN];
    int rc, ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    make_pkey(pkey, tp);
    MDB_val k = {PKEY_LEN, pkey};
    rc = mdb_del(p->txn, p->parts, &k, NULL);
    if (rc == MDB_NOTFOUND)
        return KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    if (rc != 0 || (rc = delete_from(p->txn, p->batches, pkey, PKEY_LEN)) != 0 ||
        (rc = delete_from(p->txn, p->epochs, pkey, PKEY_LEN)) != 0)
        return txn_fail(p, rc, "delete_partition");
    return 0;
}

/* load_pinfo for a mutation: validation errors leave the txn usable, LMDB errors poison it. */
static int mut_pinfo(lmdb_plog *p, const kq_plog_tp *tp, pinfo *pi, const char *what)
{
    int rc = load_pinfo(p, p->txn, tp, pi);
    if (rc == 0)
        return 0;
    if (rc == MDB_NOTFOUND || rc == MDB_CORRUPTED)
        return pinfo_err(p, rc, tp, what);
    return txn_fail(p, rc, what);
}

static int lmdb_append(kq_plog *bp, const kq_plog_tp *tp, const kq_plog_batch *b)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    uint8_t key[BKEY_LEN];
    pinfo pi;
    int rc, ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    if (b == NULL || b->leader_epoch < 0 || b->count <= 0 || b->base_offset < 0 ||
        b->base_offset > INT64_MAX - b->count || (b->records == NULL && b->len > 0) ||
        b->len > SIZE_MAX - BHDR_LEN)
        return KQ_ERR_INVALID_REQUEST;
    if ((ret = mut_pinfo(p, tp, &pi, "append")) != 0)
        return ret;
    if (b->base_offset != pi.leo)
        return KQ_ERR_INVALID_REQUEST;
    if (b->leader_epoch < pi.last_entry_epoch && pi.last_entry_start >= b->base_offset) {
        /* trailing epochs that never got a batch (a leadership without records): dropped, as
         * Kafka's epoch cache and the replica's own do, before the older epoch continues */
        if ((rc = delete_epochs_from(p->txn, p->epochs, pi.key, b->base_offset)) != 0)
            return txn_fail(p, rc, "append epoch");
        if ((ret = mut_pinfo(p, tp, &pi, "append")) != 0)
            return ret;
    }
    if (b->leader_epoch < pi.last_entry_epoch)
        return KQ_ERR_INVALID_REQUEST;

    make_bkey(key, pi.key, b->base_offset);
    MDB_val k = {sizeof(key), key}, v = {BHDR_LEN + b->len, NULL};
    /* MDB_RESERVE: LMDB hands back the space, we fill it (saves one copy). */
    if ((rc = mdb_put(p->txn, p->batches, &k, &v, MDB_NOOVERWRITE | MDB_RESERVE)) != 0)
        return txn_fail(p, rc, "append");
    uint8_t *d = v.mv_data;
    put_be32(d + 4, (uint32_t)b->leader_epoch);
    put_be32(d + 8, (uint32_t)b->count);
    put_be64(d + 12, (uint64_t)b->producer_id);
    put_be16(d + 20, (uint16_t)b->producer_epoch);
    put_be32(d + 22, (uint32_t)b->base_sequence);
    if (b->len > 0)
        memcpy(d + BHDR_LEN, b->records, b->len);
    put_be32(d, batch_crc(key, d, v.mv_size));

    if (b->leader_epoch > pi.last_entry_epoch &&
        (rc = add_epoch_entry(p->txn, p->epochs, pi.key, b->leader_epoch, b->base_offset)) != 0)
        return txn_fail(p, rc, "append epoch");
    return 0;
}

static int lmdb_assign_epoch(kq_plog *bp, const kq_plog_tp *tp, int32_t leader_epoch)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    pinfo pi;
    int rc, ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    if (leader_epoch < 0)
        return KQ_ERR_INVALID_REQUEST;
    if ((ret = mut_pinfo(p, tp, &pi, "assign_epoch")) != 0)
        return ret;
    if (leader_epoch < pi.last_entry_epoch)
        return KQ_ERR_INVALID_REQUEST;
    if (leader_epoch == pi.last_entry_epoch)
        return 0;
    if ((rc = add_epoch_entry(p->txn, p->epochs, pi.key, leader_epoch, pi.leo)) != 0)
        return txn_fail(p, rc, "assign_epoch");
    return 0;
}

static int lmdb_truncate(kq_plog *bp, const kq_plog_tp *tp, int64_t offset)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    uint8_t key[BKEY_LEN];
    pinfo pi;
    MDB_val k, v;
    int rc, ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    if ((ret = mut_pinfo(p, tp, &pi, "truncate")) != 0)
        return ret;
    if (offset < pi.m.log_start || offset > pi.leo)
        return KQ_ERR_OFFSET_OUT_OF_RANGE;
    if (offset == pi.leo)
        return 0;
    make_bkey(key, pi.key, offset);
    k.mv_size = sizeof(key);
    k.mv_data = key;
    rc = mdb_get(p->txn, p->batches, &k, &v);
    if (rc == MDB_NOTFOUND)
        return KQ_ERR_INVALID_REQUEST; /* not a batch boundary */
    if (rc != 0)
        return txn_fail(p, rc, "truncate");
    if ((rc = delete_from(p->txn, p->batches, key, sizeof(key))) != 0 ||
        (rc = delete_epochs_from(p->txn, p->epochs, pi.key, offset)) != 0)
        return txn_fail(p, rc, "truncate");
    if (pi.m.hw > offset) {
        pi.m.hw = offset;
        if ((rc = put_pmeta(p->txn, p->parts, pi.key, &pi.m)) != 0)
            return txn_fail(p, rc, "truncate");
    }
    return 0;
}

static int lmdb_truncate_fully(kq_plog *bp, const kq_plog_tp *tp, int64_t offset)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    pinfo pi;
    int rc, ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    if (offset < 0)
        return KQ_ERR_INVALID_REQUEST;
    if ((ret = mut_pinfo(p, tp, &pi, "truncate_fully")) != 0)
        return ret;
    pi.m.log_start = offset;
    pi.m.hw = offset;
    if ((rc = delete_from(p->txn, p->batches, pi.key, PKEY_LEN)) != 0 ||
        (rc = delete_from(p->txn, p->epochs, pi.key, PKEY_LEN)) != 0 ||
        (rc = put_pmeta(p->txn, p->parts, pi.key, &pi.m)) != 0)
        return txn_fail(p, rc, "truncate_fully");
    return 0;
}

static int lmdb_set_hw(kq_plog *bp, const kq_plog_tp *tp, int64_t hw)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    pinfo pi;
    int rc, ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    if ((ret = mut_pinfo(p, tp, &pi, "set_hw")) != 0)
        return ret;
    if (hw < pi.m.log_start || hw > pi.leo)
        return KQ_ERR_OFFSET_OUT_OF_RANGE;
    if (hw == pi.m.hw)
        return 0;
    pi.m.hw = hw;
    if ((rc = put_pmeta(p->txn, p->parts, pi.key, &pi.m)) != 0)
        return txn_fail(p, rc, "set_hw");
    return 0;
}

static int lmdb_set_partition_epoch(kq_plog *bp, const kq_plog_tp *tp, int32_t partition_epoch)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    uint8_t pkey[PKEY_LEN];
    pmeta m;
    int rc, ret = txn_check(p, tp);
    if (ret != 0)
        return ret;
    make_pkey(pkey, tp);
    rc = get_pmeta(p->txn, p->parts, pkey, &m);
    if (rc == MDB_NOTFOUND || rc == MDB_CORRUPTED)
        return pinfo_err(p, rc, tp, "set_partition_epoch");
    if (rc != 0)
        return txn_fail(p, rc, "set_partition_epoch");
    if (partition_epoch < m.pepoch)
        return KQ_ERR_INVALID_REQUEST;
    if (partition_epoch == m.pepoch)
        return 0;
    m.pepoch = partition_epoch;
    if ((rc = put_pmeta(p->txn, p->parts, pkey, &m)) != 0)
        return txn_fail(p, rc, "set_partition_epoch");
    return 0;
}

/* ---- queries ----------------------------------------------------------------------------- */

/* The transaction a query runs in: the open write txn, or a new read txn (*own = 1). */
static int q_begin(lmdb_plog *p, MDB_txn **txn, int *own)
{
    *own = 0;
    if (p->failed)
        return KQ_ERR_IO;
    if (p->no_parts)
        return KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    if (p->view != NULL) {
        *txn = p->view;
        return 0;
    }
    if (p->txn != NULL) {
        if (p->txn_bad)
            return KQ_ERR_IO;
        *txn = p->txn;
        return 0;
    }
    int rc = mdb_txn_begin(p->env, NULL, MDB_RDONLY, txn);
    if (rc != 0) {
        KQ_ERROR("plog", "cannot begin a read transaction", "dir=%s err=\"%s\"", p->dir,
                 mdb_strerror(rc));
        return mdb_to_kq(rc);
    }
    *own = 1;
    return 0;
}

static void q_end(MDB_txn *txn, int own)
{
    if (own)
        mdb_txn_abort(txn);
}

static int lmdb_state_of(kq_plog *bp, const kq_plog_tp *tp, kq_plog_state *out)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    MDB_txn *txn = NULL;
    pinfo pi;
    int own, ret;
    memset(out, 0, sizeof(*out));
    if (!valid_tp(tp))
        return KQ_ERR_INVALID_REQUEST;
    if ((ret = q_begin(p, &txn, &own)) != 0)
        return ret;
    ret = pinfo_err(p, load_pinfo(p, txn, tp, &pi), tp, "state");
    q_end(txn, own);
    if (ret != 0)
        return ret;
    out->log_start_offset = pi.m.log_start;
    out->log_end_offset = pi.leo;
    out->high_watermark = pi.m.hw;
    out->partition_epoch = pi.m.pepoch;
    out->last_epoch = pi.last_entry_epoch;
    return 0;
}

/* Loads the epoch cache of an existing partition (pi filled). */
static int load_epochs(lmdb_plog *p, MDB_txn *txn, const kq_plog_tp *tp, pinfo *pi,
                       kq_epoch_entry **out, size_t *n)
{
    MDB_cursor *c = NULL;
    MDB_val k, v;
    kq_epoch_entry *eps = NULL;
    size_t cnt = 0, cap = 0;
    int rc, ret = 0;

    *out = NULL;
    *n = 0;
    if ((ret = pinfo_err(p, load_pinfo(p, txn, tp, pi), tp, "epochs")) != 0)
        return ret;
    if ((rc = mdb_cursor_open(txn, p->epochs, &c)) != 0)
        goto mdb_fail;
    for (rc = seek_first(c, pi->key, PKEY_LEN, &k, &v); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (k.mv_size < PKEY_LEN || memcmp(k.mv_data, pi->key, PKEY_LEN) != 0)
            break;
        if (!has_prefix(&k, pi->key, EKEY_LEN) || v.mv_size != 8) {
            rc = MDB_CORRUPTED;
            goto mdb_fail;
        }
        if (cnt == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            kq_epoch_entry *ne = realloc(eps, ncap * sizeof(*ne));
            if (ne == NULL) {
                ret = KQ_ERR_NOMEM;
                goto out;
            }
            eps = ne;
            cap = ncap;
        }
        eps[cnt].epoch = (int32_t)get_be32((const uint8_t *)k.mv_data + PKEY_LEN);
        eps[cnt].start_offset = (int64_t)get_be64(v.mv_data);
        /* epochs and start offsets are non-negative and strictly ascending */
        if (eps[cnt].epoch < 0 || eps[cnt].start_offset < 0 ||
            (cnt > 0 && eps[cnt].start_offset <= eps[cnt - 1].start_offset)) {
            rc = MDB_CORRUPTED;
            goto mdb_fail;
        }
        cnt++;
    }
    if (rc != 0 && rc != MDB_NOTFOUND)
        goto mdb_fail;
    *out = eps;
    *n = cnt;
    eps = NULL;
    goto out;
mdb_fail:
    ret = pinfo_err(p, rc, tp, "epochs");
out:
    if (c != NULL)
        mdb_cursor_close(c);
    free(eps);
    return ret;
}

static int lmdb_epochs(kq_plog *bp, const kq_plog_tp *tp, kq_epoch_entry **out, size_t *n)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    MDB_txn *txn = NULL;
    pinfo pi;
    int own, ret;
    *out = NULL;
    *n = 0;
    if (!valid_tp(tp))
        return KQ_ERR_INVALID_REQUEST;
    if ((ret = q_begin(p, &txn, &own)) != 0)
        return ret;
    ret = load_epochs(p, txn, tp, &pi, out, n);
    q_end(txn, own);
    return ret;
}

static int lmdb_end_offset_for_epoch(kq_plog *bp, const kq_plog_tp *tp, int32_t epoch,
                                     int32_t *out_epoch, int64_t *out_end)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    MDB_txn *txn = NULL;
    kq_epoch_entry *eps = NULL;
    size_t n = 0;
    pinfo pi;
    int own, ret;

    *out_epoch = KQ_PLOG_UNDEFINED_EPOCH;
    *out_end = KQ_PLOG_UNDEFINED_OFFSET;
    if (!valid_tp(tp))
        return KQ_ERR_INVALID_REQUEST;
    if ((ret = q_begin(p, &txn, &own)) != 0)
        return ret;
    ret = load_epochs(p, txn, tp, &pi, &eps, &n);
    q_end(txn, own);
    if (ret != 0)
        return ret;
    for (size_t i = n; i > 0; i--) {
        if (eps[i - 1].epoch <= epoch) {
            *out_epoch = eps[i - 1].epoch;
            *out_end = i < n ? eps[i].start_offset : pi.leo;
            break;
        }
    }
    free(eps);
    return 0;
}

typedef struct read_item {
    kq_plog_batch b;
    size_t off; /* of the records in the copy buffer */
    uint8_t key[BKEY_LEN];
    size_t vlen;
    size_t voff; /* of the whole value in the copy buffer */
} read_item;

static int lmdb_read(kq_plog *bp, const kq_plog_tp *tp, int64_t from, int64_t to, size_t max_bytes,
                     kq_plog_batch_cb cb, void *arg)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    MDB_txn *txn = NULL;
    MDB_cursor *c = NULL;
    MDB_val k, v;
    uint8_t key[BKEY_LEN];
    pinfo pi;
    read_item *items = NULL;
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0, used = 0, rec_bytes = 0, bufcap = 0;
    int64_t expect = -1; /* base offset the next batch must have, -1 before the first */
    int own = 0, rc, ret;

    if (!valid_tp(tp) || cb == NULL)
        return KQ_ERR_INVALID_REQUEST;
    if ((ret = q_begin(p, &txn, &own)) != 0)
        return ret;
    if ((ret = pinfo_err(p, load_pinfo(p, txn, tp, &pi), tp, "read")) != 0)
        goto out;
    if (from < pi.m.log_start || from > pi.leo) {
        ret = KQ_ERR_OFFSET_OUT_OF_RANGE;
        goto out;
    }
    if (from == pi.leo)
        goto out;
    if ((rc = mdb_cursor_open(txn, p->batches, &c)) != 0)
        goto mdb_fail;
    /* the batch holding `from`: the last one with base <= from */
    make_bkey(key, pi.key, from);
    k.mv_size = sizeof(key);
    k.mv_data = key;
    rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    if (rc == 0 && !(has_prefix(&k, pi.key, BKEY_LEN) &&
                     (int64_t)get_be64((const uint8_t *)k.mv_data + PKEY_LEN) == from))
        rc = mdb_cursor_get(c, &k, &v, MDB_PREV);
    else if (rc == MDB_NOTFOUND)
        rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
    /* log start..LEO is not empty, so a batch must hold `from`: no entry before it at all, or
     * only another partition's, is damage */
    if (rc == MDB_NOTFOUND || (rc == 0 && !has_prefix(&k, pi.key, BKEY_LEN)))
        rc = MDB_CORRUPTED;
    for (; rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (!has_prefix(&k, pi.key, BKEY_LEN))
            break;
        if (v.mv_size < BHDR_LEN) {
            rc = MDB_CORRUPTED;
            break;
        }
        const uint8_t *d = v.mv_data;
        int64_t base = (int64_t)get_be64((const uint8_t *)k.mv_data + PKEY_LEN);
        int32_t count = (int32_t)get_be32(d + 8);
        size_t len = v.mv_size - BHDR_LEN;
        if (count <= 0 || base > INT64_MAX - count || (expect >= 0 && base != expect) ||
            (expect < 0 && (base > from || base + count <= from))) {
            rc = MDB_CORRUPTED;
            break;
        }
        if (base >= to)
            break;
        if (n > 0 && (rec_bytes + len < rec_bytes || rec_bytes + len > max_bytes))
            break;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            read_item *ni = realloc(items, ncap * sizeof(*ni));
            if (ni == NULL) {
                ret = KQ_ERR_NOMEM;
                goto out;
            }
            items = ni;
            cap = ncap;
        }
        if (used + v.mv_size > bufcap) {
            size_t ncap = bufcap ? bufcap : 4096;
            while (ncap < used + v.mv_size)
                ncap *= 2;
            uint8_t *nb = realloc(buf, ncap);
            if (nb == NULL) {
                ret = KQ_ERR_NOMEM;
                goto out;
            }
            buf = nb;
            bufcap = ncap;
        }
        read_item *it = &items[n++];
        memcpy(it->key, k.mv_data, BKEY_LEN);
        memcpy(buf + used, d, v.mv_size);
        it->voff = used;
        it->vlen = v.mv_size;
        it->off = used + BHDR_LEN;
        it->b.base_offset = base;
        it->b.crc32c = get_be32(d);
        it->b.leader_epoch = (int32_t)get_be32(d + 4);
        it->b.count = count;
        it->b.producer_id = (int64_t)get_be64(d + 12);
        it->b.producer_epoch = (int16_t)get_be16(d + 20);
        it->b.base_sequence = (int32_t)get_be32(d + 22);
        it->b.len = len;
        used += v.mv_size;
        rec_bytes += len;
        expect = base + count;
    }
    if (rc != 0 && rc != MDB_NOTFOUND)
        goto mdb_fail;
    if (expect > pi.leo) {
        rc = MDB_CORRUPTED;
        goto mdb_fail;
    }
    /* The read transaction ends before any callback runs: nothing of LMDB escapes. */
    mdb_cursor_close(c);
    c = NULL;
    q_end(txn, own);
    own = 0;

    for (size_t i = 0; i < n; i++) {
        if (batch_crc(items[i].key, buf + items[i].voff, items[i].vlen) != items[i].b.crc32c) {
            char topic[KQ_UUID_STR_LEN + 1];
            kq_uuid_format(tp->topic_id, topic);
            KQ_ERROR("plog", "CRC mismatch in stored batch",
                     "dir=%s topic_id=%s partition=%" PRId32 " offset=%" PRId64, p->dir, topic,
                     tp->partition, items[i].b.base_offset);
            ret = KQ_ERR_CORRUPT_MESSAGE;
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        items[i].b.records = buf + items[i].off;
        if (cb(arg, &items[i].b) != 0)
            break;
    }
    goto out;

mdb_fail:
    if (rc == MDB_CORRUPTED) {
        char topic[KQ_UUID_STR_LEN + 1];
        kq_uuid_format(tp->topic_id, topic);
        KQ_ERROR("plog", "stored batches are damaged",
                 "dir=%s topic_id=%s partition=%" PRId32 " from=%" PRId64, p->dir, topic,
                 tp->partition, from);
    } else {
        KQ_ERROR("plog", "cannot read the log", "dir=%s err=\"%s\"", p->dir, mdb_strerror(rc));
    }
    ret = mdb_to_kq(rc);
out:
    if (c != NULL)
        mdb_cursor_close(c);
    if (own)
        q_end(txn, own);
    free(items);
    free(buf);
    return ret;
}

static int lmdb_list(kq_plog *bp, kq_plog_tp **out, size_t *n)
{
    lmdb_plog *p = (lmdb_plog *)bp;
    MDB_txn *txn = NULL;
    MDB_cursor *c = NULL;
    MDB_val k, v;
    kq_plog_tp *tps = NULL;
    size_t cnt = 0, cap = 0;
    int own = 0, rc, ret;

    *out = NULL;
    *n = 0;
    if (p->no_parts && !p->failed)
        return 0;
    if ((ret = q_begin(p, &txn, &own)) != 0)
        return ret;
    if ((rc = mdb_cursor_open(txn, p->parts, &c)) != 0)
        goto mdb_fail;
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (k.mv_size != PKEY_LEN) {
            rc = MDB_CORRUPTED;
            goto mdb_fail;
        }
        if (cnt == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            kq_plog_tp *nt = realloc(tps, ncap * sizeof(*nt));
            if (nt == NULL) {
                ret = KQ_ERR_NOMEM;
                goto out;
            }
            tps = nt;
            cap = ncap;
        }
        tp_from_key(&tps[cnt++], k.mv_data);
    }
    if (rc != MDB_NOTFOUND)
        goto mdb_fail;
    *out = tps;
    *n = cnt;
    tps = NULL;
    goto out;
mdb_fail:
    KQ_ERROR("plog", "cannot list partitions", "dir=%s err=\"%s\"", p->dir, mdb_strerror(rc));
    ret = mdb_to_kq(rc);
out:
    if (c != NULL)
        mdb_cursor_close(c);
    q_end(txn, own);
    free(tps);
    return ret;
}

static const kq_plog_ops lmdb_ops = {
    .close = lmdb_close,
    .identity_of = lmdb_identity_of,
    .begin = lmdb_begin,
    .commit = lmdb_commit,
    .abort = lmdb_abort,
    .in_txn = lmdb_in_txn,
    .create_partition = lmdb_create_partition,
    .delete_partition = lmdb_delete_partition,
    .append = lmdb_append,
    .assign_epoch = lmdb_assign_epoch,
    .truncate = lmdb_truncate,
    .truncate_fully = lmdb_truncate_fully,
    .set_hw = lmdb_set_hw,
    .set_partition_epoch = lmdb_set_partition_epoch,
    .state_of = lmdb_state_of,
    .epochs = lmdb_epochs,
    .end_offset_for_epoch = lmdb_end_offset_for_epoch,
    .read = lmdb_read,
    .list = lmdb_list,
};
