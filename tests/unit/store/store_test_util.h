/*
 * Helpers shared by the store unit tests (header-only; included by each test_*.c).
 * Temporary directories live under $TMPDIR (or /tmp) and are removed by tmpdir_remove.
 */
#ifndef KQ_STORE_TEST_UTIL_H
#define KQ_STORE_TEST_UTIL_H

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kq/store.h"

#define TEST_CLUSTER_ID "fMCL8kv1SWm87L_Md-I2hg"
#define TEST_OTHER_CLUSTER_ID "AAAAAAAAAAAAAAAAAAAAAQ"

/* Creates a fresh empty directory; `out` gets its path. Returns 0 on success. */
static inline int tmpdir_make(char *out, size_t len)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    snprintf(out, len, "%s/kq-store-test-XXXXXX", base);
    return mkdtemp(out) == NULL ? -1 : 0;
}

static inline int tmpdir_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static inline void tmpdir_remove(const char *dir)
{
    nftw(dir, tmpdir_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Deterministic batch content: the record count and bytes are functions of the base offset
 * and epoch, so any stored batch can be checked on its own. */
static inline int32_t test_batch_count(int64_t base)
{
    return (int32_t)(1 + base % 3);
}

static inline size_t test_batch_len(int64_t base)
{
    return (size_t)(8 + (base * 7) % 57);
}

static inline void test_batch_fill(int64_t base, int32_t epoch, uint8_t *buf, size_t len)
{
    uint64_t x = (uint64_t)base * 0x9E3779B97F4A7C15ull ^ (uint64_t)epoch * 0xBF58476D1CE4E5B9ull;
    for (size_t i = 0; i < len; i++) {
        x ^= x >> 31;
        x *= 0x94D049BB133111EBull;
        x += 0x632BE59BD9B4E5Full;
        buf[i] = (uint8_t)(x >> 56);
    }
}

/* Appends the deterministic batch at `base` with `epoch` inside an open write txn. */
static inline int test_append(kq_store *s, int64_t base, int32_t epoch)
{
    uint8_t buf[128];
    size_t len = test_batch_len(base);
    test_batch_fill(base, epoch, buf, len);
    return kq_store_append(s, base, epoch, test_batch_count(base), buf, len);
}

/* 1 if (base, epoch, count, records) is exactly what test_append writes, else 0. */
static inline int test_batch_ok(int64_t base, int32_t epoch, int32_t count, const uint8_t *rec,
                                size_t len)
{
    uint8_t buf[128];
    if (count != test_batch_count(base) || len != test_batch_len(base))
        return 0;
    test_batch_fill(base, epoch, buf, len);
    return memcmp(buf, rec, len) == 0;
}

#endif
