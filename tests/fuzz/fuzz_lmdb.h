/*
 * Shared by fuzz_store and fuzz_plog: turns fuzz input into LMDB entries written straight into
 * a real, formatted directory, so the store's own readers meet arbitrary keys and values.
 * LMDB's page format itself is not fuzzed (LMDB is not robust to arbitrary files; the daemons
 * guard those reads, see kq_store_guard_reads): every file here is one LMDB wrote.
 *
 * Input grammar (after the target's own leading bytes), repeated until the input ends:
 *   op     u8: bits 0-1 the database (target's table of four), 0x04 delete the key instead
 *              of writing it, 0x08 the value length is u16 BE (else u8), 0x10 fix the value's
 *              CRC (target's fix-up), 0x20 the key is the target's key for a small index
 *   key    0x20 set: u8 index, then the target's suffix bytes; else u8 length, then the key
 *   value  u8 (or u16 BE) length, then the value (absent for a delete)
 *
 * Ownership: fuzz_lmdb_* keep no pointer they are given; the baseline is malloc'd and kept for
 * the life of the process.
 */
#ifndef KQ_FUZZ_LMDB_H
#define KQ_FUZZ_LMDB_H

#include <lmdb.h>

#include "fuzz_check.h"
#include "lmdb_util.h"

#define FUZZ_LMDB_MAX_KEY 511

typedef struct fuzz_lmdb_target {
    const char *dbs[4]; /* named databases; dbs[0..3] */
    /* Builds the key for index idx of database db from the suffix bytes at *p (advancing *p,
     * at most `left` bytes); returns the key length, 0 if the input ran out. */
    size_t (*make_key)(unsigned db, uint8_t idx, const uint8_t **p, size_t left, uint8_t *key);
    /* Rewrites the CRC a value of database db carries (key, value writable copy). */
    void (*fix)(unsigned db, const uint8_t *key, size_t klen, uint8_t *val, size_t vlen);
} fuzz_lmdb_target;

typedef struct fuzz_kv {
    uint8_t *k, *v;
    size_t kl, vl;
} fuzz_kv;

/* The "meta" entries of a freshly formatted directory, restored before every input. */
static fuzz_kv *fuzz_meta;
static size_t fuzz_n_meta;

static void fuzz_lmdb_save_meta(const char *dir, unsigned max_dbs)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta;
    MDB_cursor *c;
    MDB_val k, v;
    int rc;

    FUZZ_CHECK(kq_lmdb_env_open(dir, MDB_RDONLY, max_dbs, &env) == 0);
    FUZZ_CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) == 0);
    FUZZ_CHECK(mdb_dbi_open(txn, "meta", 0, &meta) == 0);
    FUZZ_CHECK(mdb_cursor_open(txn, meta, &c) == 0);
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        fuzz_kv *e;

        fuzz_meta = realloc(fuzz_meta, (fuzz_n_meta + 1) * sizeof *fuzz_meta);
        FUZZ_CHECK(fuzz_meta);
        e = &fuzz_meta[fuzz_n_meta++];
        e->k = malloc(k.mv_size);
        e->v = malloc(v.mv_size ? v.mv_size : 1);
        FUZZ_CHECK(e->k && e->v);
        memcpy(e->k, k.mv_data, k.mv_size);
        memcpy(e->v, v.mv_data, v.mv_size);
        e->kl = k.mv_size;
        e->vl = v.mv_size;
    }
    FUZZ_CHECK(rc == MDB_NOTFOUND);
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    mdb_env_close(env);
}

static void fuzz_lmdb_free_meta(void)
{
    for (size_t i = 0; i < fuzz_n_meta; i++) {
        free(fuzz_meta[i].k);
        free(fuzz_meta[i].v);
    }
    free(fuzz_meta);
    fuzz_meta = NULL;
    fuzz_n_meta = 0;
}

/* Empties the four databases and "meta", restores meta's baseline, then writes the input's
 * entries. Bad entries LMDB refuses (empty or too long keys) are skipped. */
static void fuzz_lmdb_write(const char *dir, unsigned max_dbs, const fuzz_lmdb_target *t,
                            const uint8_t *p, size_t left)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi[4], meta;
    uint8_t key[FUZZ_LMDB_MAX_KEY + 1], val[65536];

    FUZZ_CHECK(kq_lmdb_env_open(dir, MDB_NOSYNC, max_dbs, &env) == 0);
    FUZZ_CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
    FUZZ_CHECK(mdb_dbi_open(txn, "meta", 0, &meta) == 0);
    for (unsigned i = 0; i < 4; i++) {
        if (!strcmp(t->dbs[i], "meta")) {
            dbi[i] = meta;
            continue;
        }
        FUZZ_CHECK(mdb_dbi_open(txn, t->dbs[i], MDB_CREATE, &dbi[i]) == 0);
        FUZZ_CHECK(mdb_drop(txn, dbi[i], 0) == 0);
    }
    FUZZ_CHECK(mdb_drop(txn, meta, 0) == 0);
    for (size_t i = 0; i < fuzz_n_meta; i++) {
        MDB_val k = {fuzz_meta[i].kl, fuzz_meta[i].k}, v = {fuzz_meta[i].vl, fuzz_meta[i].v};

        FUZZ_CHECK(mdb_put(txn, meta, &k, &v, 0) == 0);
    }
    while (left >= 2) {
        const uint8_t *end = p + left, *q;
        uint8_t op = *p++;
        unsigned db = op & 3;
        size_t klen, vlen;
        MDB_val k, v;

        if (op & 0x20) {
            q = p + 1;
            klen = t->make_key(db, *p, &q, (size_t)(end - q), key);
            if (!klen)
                break;
            p = q;
        } else {
            klen = *p++;
            if ((size_t)(end - p) < klen)
                break;
            memcpy(key, p, klen);
            p += klen;
        }
        k.mv_size = klen;
        k.mv_data = key;
        if (op & 0x04) {
            mdb_del(txn, dbi[db], &k, NULL); /* MDB_NOTFOUND is fine */
            left = (size_t)(end - p);
            continue;
        }
        if (op & 0x08) {
            if (end - p < 2)
                break;
            vlen = (size_t)p[0] << 8 | p[1];
            p += 2;
        } else {
            if (end - p < 1)
                break;
            vlen = *p++;
        }
        if ((size_t)(end - p) < vlen)
            vlen = (size_t)(end - p);
        memcpy(val, p, vlen);
        p += vlen;
        if (op & 0x10)
            t->fix(db, key, klen, val, vlen);
        v.mv_size = vlen;
        v.mv_data = val;
        if (klen > 0)
            mdb_put(txn, dbi[db], &k, &v, 0); /* MDB_BAD_VALSIZE etc.: skipped */
        left = (size_t)(end - p);
    }
    FUZZ_CHECK(mdb_txn_commit(txn) == 0);
    mdb_env_close(env);
}

#endif
