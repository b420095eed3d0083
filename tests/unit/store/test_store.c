/*
 * kq_store behaviour: format/open identity checks and their operator messages, append/read/
 * truncate, the epoch cache, recovery after reopen, CRC checking, read-only opens.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <lmdb.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kq/error.h"
#include "kq/store.h"
#include "kq/util.h"
#include "store_test_util.h"

typedef struct fixture {
    char root[512];     /* removed at teardown */
    char dir[PATH_MAX]; /* root/meta, not created */
    kq_store *s;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (f == NULL || tmpdir_make(f->root, sizeof(f->root)) != 0)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "%s/meta", f->root);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    kq_store_close(f->s);
    tmpdir_remove(f->root);
    free(f);
    return 0;
}

/* Formats f->dir as node 1 of TEST_CLUSTER_ID and opens it into f->s. */
static void format_and_open(fixture *f)
{
    char err[512];
    assert_int_equal(kq_store_format(f->dir, TEST_CLUSTER_ID, 1, NULL, err, sizeof(err)), 0);
    assert_int_equal(kq_store_open(f->dir, TEST_CLUSTER_ID, 1, &f->s, err, sizeof(err)), 0);
}

static void reopen(fixture *f)
{
    char err[512];
    kq_store_close(f->s);
    f->s = NULL;
    assert_int_equal(kq_store_open(f->dir, TEST_CLUSTER_ID, 1, &f->s, err, sizeof(err)), 0);
}

typedef struct seen {
    int n;
    int stop_after; /* 0: never stop */
    int64_t base[64];
    int32_t epoch[64];
    int32_t count[64];
    size_t len[64];
    int content_ok[64];
} seen;

static int collect(void *arg, int64_t base, int32_t epoch, int32_t count, uint32_t crc,
                   const uint8_t *rec, size_t len)
{
    seen *sn = arg;
    if (sn->n >= 64)
        return 1;
    sn->base[sn->n] = base;
    sn->epoch[sn->n] = epoch;
    sn->count[sn->n] = count;
    sn->len[sn->n] = len;
    sn->content_ok[sn->n] =
        test_batch_ok(base, epoch, count, rec, len) && kq_crc32c(0, rec, len) == crc;
    sn->n++;
    return sn->stop_after > 0 && sn->n >= sn->stop_after;
}

/* Appends batches at the current end with the given epochs in one txn; returns the new end. */
static int64_t append_epochs(kq_store *s, int64_t end, const int32_t *epochs, int n)
{
    assert_int_equal(kq_store_begin(s), 0);
    for (int i = 0; i < n; i++) {
        assert_int_equal(test_append(s, end, epochs[i]), 0);
        end += test_batch_count(end);
    }
    assert_int_equal(kq_store_commit(s), 0);
    return end;
}

static int read_file(const char *path, char *buf, size_t len)
{
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return -1;
    size_t n = fread(buf, 1, len - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return 0;
}

/* ---- format / open ------------------------------------------------------------------------ */

static void test_format_open_roundtrip(void **state)
{
    fixture *f = *state;
    char err[512], path[PATH_MAX + 32], props[1024], line[128];
    kq_store_identity id;
    uint8_t raw[16];

    /* format creates missing parents too */
    snprintf(f->dir, sizeof(f->dir), "%s/a/b/meta", f->root);
    assert_int_equal(kq_store_format(f->dir, TEST_CLUSTER_ID, 1, &id, err, sizeof(err)), 0);
    assert_string_equal(id.cluster_id, TEST_CLUSTER_ID);
    assert_int_equal(id.node_id, 1);
    assert_int_equal(strlen(id.directory_id), KQ_STORE_ID_LEN);
    assert_true(kq_uuid_parse(id.directory_id, raw));

    assert_int_equal(kq_store_open(f->dir, TEST_CLUSTER_ID, 1, &f->s, err, sizeof(err)), 0);
    const kq_store_identity *got = kq_store_identity_of(f->s);
    assert_string_equal(got->cluster_id, TEST_CLUSTER_ID);
    assert_string_equal(got->directory_id, id.directory_id);
    assert_int_equal(got->node_id, 1);

    kq_store_recovered rec;
    assert_int_equal(kq_store_recover(f->s, &rec), 0);
    assert_int_equal(rec.qstate.epoch, 0);
    assert_int_equal(rec.qstate.voted_id, -1);
    assert_int_equal(rec.qstate.leader_id, -1);
    assert_int_equal(rec.log_start_offset, 0);
    assert_int_equal(rec.log_end_offset, 0);
    assert_int_equal(rec.last_epoch, 0);
    assert_int_equal(rec.n_epochs, 0);
    free(rec.epochs);

    /* the operator-facing copy of the identity */
    snprintf(path, sizeof(path), "%s/meta.properties", f->dir);
    assert_int_equal(read_file(path, props, sizeof(props)), 0);
    snprintf(line, sizeof(line), "cluster.id=%s\n", TEST_CLUSTER_ID);
    assert_non_null(strstr(props, line));
    snprintf(line, sizeof(line), "directory.id=%s\n", id.directory_id);
    assert_non_null(strstr(props, line));
    assert_non_null(strstr(props, "node.id=1\n"));
    assert_non_null(strstr(props, "version=1\n"));

    /* expectations may be left open */
    kq_store_close(f->s);
    f->s = NULL;
    assert_int_equal(kq_store_open(f->dir, NULL, -1, &f->s, err, sizeof(err)), 0);
    assert_int_equal(kq_store_identity_of(f->s)->node_id, 1);
}

static void test_format_twice_refused(void **state)
{
    fixture *f = *state;
    char err[512], want[PATH_MAX + 200];
    kq_store_identity id1, id2;
    assert_int_equal(kq_store_format(f->dir, TEST_CLUSTER_ID, 1, &id1, err, sizeof(err)), 0);
    memset(&id2, 0, sizeof(id2));
    assert_int_equal(kq_store_format(f->dir, TEST_OTHER_CLUSTER_ID, 2, &id2, err, sizeof(err)),
                     KQ_ERR_ALREADY_FORMATTED);
    snprintf(want, sizeof(want),
             "Log directory %s is already formatted. Use --ignore-formatted to ignore this "
             "directory and format the others.",
             f->dir);
    assert_string_equal(err, want);
    /* nothing changed */
    assert_int_equal(kq_store_open(f->dir, TEST_CLUSTER_ID, 1, &f->s, err, sizeof(err)), 0);
    assert_string_equal(kq_store_identity_of(f->s)->directory_id, id1.directory_id);
}

static void test_format_bad_input(void **state)
{
    fixture *f = *state;
    char err[512];
    struct stat st;
    const char *bad[] = {"", "short", "fMCL8kv1SWm87L_Md-I2hgX", "fMCL8kv1SWm87L_Md+I2hg",
                         "fMCL8kv1SWm87L_Md-I2hh"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(kq_store_format(f->dir, bad[i], 1, NULL, err, sizeof(err)), KQ_ERR_CONFIG);
        assert_non_null(strstr(err, "invalid cluster id"));
    }
    assert_int_equal(kq_store_format(f->dir, TEST_CLUSTER_ID, -1, NULL, err, sizeof(err)),
                     KQ_ERR_CONFIG);
    assert_non_null(strstr(err, "node.id"));
    /* refused input creates nothing */
    assert_int_equal(stat(f->dir, &st), -1);

    /* a path below a regular file cannot be created */
    char file[PATH_MAX + 16], sub[PATH_MAX + 32];
    snprintf(file, sizeof(file), "%s/file", f->root);
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    fclose(fp);
    snprintf(sub, sizeof(sub), "%s/meta", file);
    assert_int_equal(kq_store_format(sub, TEST_CLUSTER_ID, 1, NULL, err, sizeof(err)), KQ_ERR_IO);
    assert_true(strlen(err) > 0);
}

static void test_open_not_formatted(void **state)
{
    fixture *f = *state;
    char err[512], want[PATH_MAX + 200], path[PATH_MAX + 32];
    struct stat st;

    /* missing directory */
    assert_int_equal(kq_store_open(f->dir, TEST_CLUSTER_ID, 1, &f->s, err, sizeof(err)),
                     KQ_ERR_NOT_FORMATTED);
    assert_null(f->s);
    snprintf(want, sizeof(want),
             "metadata directory %s is not formatted; run: kq storage format --config <file> "
             "--cluster-id <id>",
             f->dir);
    assert_string_equal(err, want);
    assert_int_equal(kq_store_open_readonly(f->dir, &f->s, err, sizeof(err)), KQ_ERR_NOT_FORMATTED);
    assert_string_equal(err, want);

    /* existing empty directory: refused, and no store gets created behind our back */
    assert_int_equal(mkdir(f->dir, 0750), 0);
    assert_int_equal(kq_store_open(f->dir, TEST_CLUSTER_ID, 1, &f->s, err, sizeof(err)),
                     KQ_ERR_NOT_FORMATTED);
    assert_string_equal(err, want);
    snprintf(path, sizeof(path), "%s/data.mdb", f->dir);
    assert_int_equal(stat(path, &st), -1);
    assert_int_equal(errno, ENOENT);

    /* an LMDB environment that was never stamped by format */
    MDB_env *env;
    MDB_txn *txn;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_open(env, f->dir, 0, 0640), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    assert_int_equal(kq_store_open(f->dir, NULL, -1, &f->s, err, sizeof(err)),
                     KQ_ERR_NOT_FORMATTED);
    assert_string_equal(err, want);
    /* ... which format then accepts */
    assert_int_equal(kq_store_format(f->dir, TEST_CLUSTER_ID, 1, NULL, err, sizeof(err)), 0);
    assert_int_equal(kq_store_open(f->dir, TEST_CLUSTER_ID, 1, &f->s, err, sizeof(err)), 0);
}

static void test_open_mismatch(void **state)
{
    fixture *f = *state;
    char err[512], want[PATH_MAX + 200];
    assert_int_equal(kq_store_format(f->dir, TEST_CLUSTER_ID, 2, NULL, err, sizeof(err)), 0);

    assert_int_equal(kq_store_open(f->dir, TEST_CLUSTER_ID, 1, &f->s, err, sizeof(err)),
                     KQ_ERR_MISMATCH);
    assert_null(f->s);
    snprintf(want, sizeof(want),
             "stored node.id 2 does not match configured node.id 1 in %s; point "
             "metadata.log.dir at this node's own directory",
             f->dir);
    assert_string_equal(err, want);

    assert_int_equal(kq_store_open(f->dir, TEST_OTHER_CLUSTER_ID, 2, &f->s, err, sizeof(err)),
                     KQ_ERR_MISMATCH);
    assert_null(f->s);
    assert_non_null(strstr(err, "stored cluster.id " TEST_CLUSTER_ID));
    assert_non_null(strstr(err, "configured cluster id " TEST_OTHER_CLUSTER_ID));
    assert_non_null(strstr(err, f->dir));
    assert_non_null(strstr(err, "kq storage format"));

    /* the refused opens left the store intact */
    assert_int_equal(kq_store_open(f->dir, TEST_CLUSTER_ID, 2, &f->s, err, sizeof(err)), 0);
}

/* ---- log ---------------------------------------------------------------------------------- */

static void test_append_read(void **state)
{
    fixture *f = *state;
    format_and_open(f);
    const int32_t epochs[] = {1, 1, 2, 2, 2, 5};
    int64_t end = append_epochs(f->s, 0, epochs, 6);
    /* counts are 1 + base % 3: bases 0,1,3,4,6,7 -> end 9 */
    assert_int_equal(end, 9);

    seen sn = {0};
    assert_int_equal(kq_store_read(f->s, 0, end, SIZE_MAX, collect, &sn), 0);
    assert_int_equal(sn.n, 6);
    const int64_t bases[] = {0, 1, 3, 4, 6, 7};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(sn.base[i], bases[i]);
        assert_int_equal(sn.epoch[i], epochs[i]);
        assert_true(sn.content_ok[i]);
    }

    /* [from, to): stop before base 6 */
    memset(&sn, 0, sizeof(sn));
    assert_int_equal(kq_store_read(f->s, 3, 6, SIZE_MAX, collect, &sn), 0);
    assert_int_equal(sn.n, 2);
    assert_int_equal(sn.base[0], 3);
    assert_int_equal(sn.base[1], 4);

    /* max_bytes: batches 1 and 3 fit exactly, batch 4 would exceed */
    size_t two = test_batch_len(1) + test_batch_len(3);
    memset(&sn, 0, sizeof(sn));
    assert_int_equal(kq_store_read(f->s, 1, end, two, collect, &sn), 0);
    assert_int_equal(sn.n, 2);
    memset(&sn, 0, sizeof(sn));
    assert_int_equal(kq_store_read(f->s, 1, end, two - 1, collect, &sn), 0);
    assert_int_equal(sn.n, 1);
    /* always at least one batch, even if it alone exceeds max_bytes */
    memset(&sn, 0, sizeof(sn));
    assert_int_equal(kq_store_read(f->s, 0, end, 1, collect, &sn), 0);
    assert_int_equal(sn.n, 1);
    assert_int_equal(sn.base[0], 0);

    /* the callback can stop the read */
    memset(&sn, 0, sizeof(sn));
    sn.stop_after = 3;
    assert_int_equal(kq_store_read(f->s, 0, end, SIZE_MAX, collect, &sn), 0);
    assert_int_equal(sn.n, 3);

    /* not a batch boundary / at the end / past the end */
    memset(&sn, 0, sizeof(sn));
    assert_int_equal(kq_store_read(f->s, 2, end, SIZE_MAX, collect, &sn), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_store_read(f->s, 8, end, SIZE_MAX, collect, &sn), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_store_read(f->s, end, end + 10, SIZE_MAX, collect, &sn), 0);
    assert_int_equal(kq_store_read(f->s, end + 1, end + 10, SIZE_MAX, collect, &sn),
                     KQ_ERR_OFFSET_OUT_OF_RANGE);
    assert_int_equal(kq_store_read(f->s, -1, end, SIZE_MAX, collect, &sn),
                     KQ_ERR_OFFSET_OUT_OF_RANGE);
    assert_int_equal(sn.n, 0);

    /* epoch cache: first offset of each epoch */
    kq_store_recovered rec;
    assert_int_equal(kq_store_recover(f->s, &rec), 0);
    assert_int_equal(rec.log_start_offset, 0);
    assert_int_equal(rec.log_end_offset, 9);
    assert_int_equal(rec.last_epoch, 5);
    assert_int_equal(rec.n_epochs, 3);
    assert_int_equal(rec.epochs[0].epoch, 1);
    assert_int_equal(rec.epochs[0].start_offset, 0);
    assert_int_equal(rec.epochs[1].epoch, 2);
    assert_int_equal(rec.epochs[1].start_offset, 3);
    assert_int_equal(rec.epochs[2].epoch, 5);
    assert_int_equal(rec.epochs[2].start_offset, 7);
    free(rec.epochs);
}

static void test_append_rejects(void **state)
{
    fixture *f = *state;
    uint8_t rec[4] = {1, 2, 3, 4};
    format_and_open(f);

    /* outside a transaction */
    assert_int_equal(kq_store_append(f->s, 0, 1, 1, rec, sizeof(rec)), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_store_truncate(f->s, 0), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_store_commit(f->s), KQ_ERR_INVALID_REQUEST);
    assert_false(kq_store_in_txn(f->s));

    assert_int_equal(kq_store_begin(f->s), 0);
    assert_true(kq_store_in_txn(f->s));
    assert_int_equal(kq_store_begin(f->s), KQ_ERR_INVALID_REQUEST);
    /* wrong base offsets: a gap, and an overwrite */
    assert_int_equal(kq_store_append(f->s, 1, 1, 1, rec, sizeof(rec)), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_store_append(f->s, 0, 2, 3, rec, sizeof(rec)), 0);
    assert_int_equal(kq_store_append(f->s, 0, 2, 1, rec, sizeof(rec)), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_store_append(f->s, 2, 2, 1, rec, sizeof(rec)), KQ_ERR_INVALID_REQUEST);
    /* epoch going backwards, zero count, negative epoch */
    assert_int_equal(kq_store_append(f->s, 3, 1, 1, rec, sizeof(rec)), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_store_append(f->s, 3, 2, 0, rec, sizeof(rec)), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_store_append(f->s, 3, -1, 1, rec, sizeof(rec)), KQ_ERR_INVALID_REQUEST);
    /* the rejected calls did not disturb the transaction */
    assert_int_equal(kq_store_append(f->s, 3, 2, 1, rec, sizeof(rec)), 0);
    assert_int_equal(kq_store_commit(f->s), 0);
    assert_false(kq_store_in_txn(f->s));

    kq_store_recovered r;
    assert_int_equal(kq_store_recover(f->s, &r), 0);
    assert_int_equal(r.log_end_offset, 4);
    assert_int_equal(r.n_epochs, 1);
    free(r.epochs);
}

static void test_abort_and_uncommitted_end(void **state)
{
    fixture *f = *state;
    format_and_open(f);
    const int32_t e1[] = {1};
    int64_t end = append_epochs(f->s, 0, e1, 1); /* end 1 */

    assert_int_equal(kq_store_begin(f->s), 0);
    assert_int_equal(test_append(f->s, 1, 3), 0);
    /* the end includes the uncommitted batch */
    assert_int_equal(test_append(f->s, 1, 3), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(test_append(f->s, 3, 3), 0);
    kq_raft_qstate qs = {.epoch = 3, .voted_id = 2, .leader_id = -1};
    assert_int_equal(kq_store_put_qstate(f->s, &qs), 0);
    /* reads see only committed data */
    seen sn = {0};
    assert_int_equal(kq_store_read(f->s, 0, 100, SIZE_MAX, collect, &sn), 0);
    assert_int_equal(sn.n, 1);
    kq_store_abort(f->s);
    assert_false(kq_store_in_txn(f->s));

    /* nothing of the aborted txn remains; the end went back to 1 and epoch 2 is allowed */
    kq_store_recovered r;
    assert_int_equal(kq_store_recover(f->s, &r), 0);
    assert_int_equal(r.log_end_offset, end);
    assert_int_equal(r.qstate.epoch, 0);
    assert_int_equal(r.n_epochs, 1);
    free(r.epochs);
    const int32_t e2[] = {2};
    assert_int_equal(append_epochs(f->s, end, e2, 1), 3);
    assert_int_equal(kq_store_recover(f->s, &r), 0);
    assert_int_equal(r.n_epochs, 2);
    assert_int_equal(r.epochs[1].epoch, 2);
    assert_int_equal(r.epochs[1].start_offset, 1);
    free(r.epochs);
}

static void test_truncate(void **state)
{
    fixture *f = *state;
    format_and_open(f);
    const int32_t epochs[] = {1, 1, 2, 2, 3, 4}; /* bases 0,1,3,4,6,7; end 9 */
    int64_t end = append_epochs(f->s, 0, epochs, 6);

    assert_int_equal(kq_store_begin(f->s), 0);
    /* not a boundary, past the end, negative */
    assert_int_equal(kq_store_truncate(f->s, 5), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_store_truncate(f->s, end + 1), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_store_truncate(f->s, -1), KQ_ERR_INVALID_REQUEST);
    /* truncating at the end is a no-op */
    assert_int_equal(kq_store_truncate(f->s, end), 0);
    /* drop bases 4, 6, 7: epochs 3 and 4 go, epoch 2 (starting at 3) stays */
    assert_int_equal(kq_store_truncate(f->s, 4), 0);
    /* the new end is 4; the next batch may reuse an epoch below the dropped ones */
    assert_int_equal(test_append(f->s, 6, 2), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(test_append(f->s, 4, 2), 0);
    assert_int_equal(test_append(f->s, 6, 6), 0);
    assert_int_equal(kq_store_commit(f->s), 0);

    kq_store_recovered r;
    assert_int_equal(kq_store_recover(f->s, &r), 0);
    assert_int_equal(r.log_end_offset, 7);
    assert_int_equal(r.last_epoch, 6);
    assert_int_equal(r.n_epochs, 3);
    assert_int_equal(r.epochs[0].epoch, 1);
    assert_int_equal(r.epochs[1].epoch, 2);
    assert_int_equal(r.epochs[1].start_offset, 3);
    assert_int_equal(r.epochs[2].epoch, 6);
    assert_int_equal(r.epochs[2].start_offset, 6);
    free(r.epochs);

    seen sn = {0};
    assert_int_equal(kq_store_read(f->s, 0, 100, SIZE_MAX, collect, &sn), 0);
    assert_int_equal(sn.n, 5);
    assert_int_equal(sn.base[3], 4);
    assert_int_equal(sn.epoch[3], 2);
    assert_int_equal(sn.base[4], 6);
    assert_int_equal(sn.epoch[4], 6);
    for (int i = 0; i < sn.n; i++)
        assert_true(sn.content_ok[i]);

    /* truncate everything, in a txn of its own */
    assert_int_equal(kq_store_begin(f->s), 0);
    assert_int_equal(kq_store_truncate(f->s, 0), 0);
    assert_int_equal(kq_store_commit(f->s), 0);
    assert_int_equal(kq_store_recover(f->s, &r), 0);
    assert_int_equal(r.log_end_offset, 0);
    assert_int_equal(r.last_epoch, 0);
    assert_int_equal(r.n_epochs, 0);
    free(r.epochs);
    /* and an empty log accepts a batch at 0 with any epoch */
    const int32_t e[] = {1};
    assert_int_equal(append_epochs(f->s, 0, e, 1), 1);
}

static void test_recover_after_reopen(void **state)
{
    fixture *f = *state;
    format_and_open(f);
    const int32_t epochs[] = {1, 2, 2, 4, 4, 4, 7};
    int64_t end = append_epochs(f->s, 0, epochs, 7);
    kq_raft_qstate qs = {.epoch = 7, .voted_id = 3, .leader_id = 2};
    assert_int_equal(kq_store_begin(f->s), 0);
    assert_int_equal(kq_store_put_qstate(f->s, &qs), 0);
    assert_int_equal(kq_store_commit(f->s), 0);

    kq_store_recovered a, b;
    assert_int_equal(kq_store_recover(f->s, &a), 0);
    assert_int_equal(a.log_end_offset, end);
    assert_int_equal(a.qstate.epoch, 7);
    assert_int_equal(a.qstate.voted_id, 3);
    assert_int_equal(a.qstate.leader_id, 2);
    reopen(f);
    assert_int_equal(kq_store_recover(f->s, &b), 0);
    assert_int_equal(b.qstate.epoch, a.qstate.epoch);
    assert_int_equal(b.qstate.voted_id, a.qstate.voted_id);
    assert_int_equal(b.qstate.leader_id, a.qstate.leader_id);
    assert_int_equal(b.log_start_offset, a.log_start_offset);
    assert_int_equal(b.log_end_offset, a.log_end_offset);
    assert_int_equal(b.last_epoch, 7);
    assert_int_equal(b.n_epochs, 4);
    assert_int_equal(b.n_epochs, a.n_epochs);
    for (size_t i = 0; i < a.n_epochs; i++) {
        assert_int_equal(b.epochs[i].epoch, a.epochs[i].epoch);
        assert_int_equal(b.epochs[i].start_offset, a.epochs[i].start_offset);
    }
    free(a.epochs);
    free(b.epochs);

    /* the reopened store continues at the recovered end, with the recovered epoch floor */
    assert_int_equal(kq_store_begin(f->s), 0);
    assert_int_equal(test_append(f->s, end, 6), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(test_append(f->s, end - 1, 7), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(test_append(f->s, end, 7), 0);
    assert_int_equal(kq_store_commit(f->s), 0);

    /* a read-only open sees the same state and refuses writes */
    kq_store_close(f->s);
    f->s = NULL;
    char err[512];
    assert_int_equal(kq_store_open_readonly(f->dir, &f->s, err, sizeof(err)), 0);
    assert_int_equal(kq_store_identity_of(f->s)->node_id, 1);
    assert_int_equal(kq_store_recover(f->s, &b), 0);
    assert_int_equal(b.log_end_offset, end + test_batch_count(end));
    assert_int_equal(b.qstate.epoch, 7);
    free(b.epochs);
    seen sn = {0};
    assert_int_equal(kq_store_read(f->s, 0, INT64_MAX, SIZE_MAX, collect, &sn), 0);
    assert_int_equal(sn.n, 8);
    for (int i = 0; i < sn.n; i++)
        assert_true(sn.content_ok[i]);
    assert_int_equal(kq_store_begin(f->s), KQ_ERR_INVALID_REQUEST);
}

/* Puts k = v into named database db through raw LMDB, as damage on disk (or an older kq) would. */
static void raw_put(const char *dir, const char *db, MDB_val k, MDB_val v)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;

    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
    assert_int_equal(mdb_env_open(env, dir, 0, 0640), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, db, 0, &dbi), 0);
    assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

/* Writes meta "quorum_state" = v (len bytes) through raw LMDB. */
static void put_raw_qstate(const char *dir, const uint8_t *v, size_t len)
{
    raw_put(dir, "meta", (MDB_val){strlen("quorum_state"), (void *)"quorum_state"},
            (MDB_val){len, (void *)v});
}

/* The size of meta "quorum_state" through raw LMDB (0: absent). */
static size_t raw_qstate_len(const char *dir)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k = {strlen("quorum_state"), (void *)"quorum_state"}, val = {0, NULL};

    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
    assert_int_equal(mdb_env_open(env, dir, MDB_RDONLY, 0640), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
    int rc = mdb_get(txn, dbi, &k, &val);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return rc == 0 ? val.mv_size : 0;
}

/* KIP-853: the vote is kept with the candidate's directory id across a restart; a quorum state
 * written before (version 1, 13 bytes) reads as a vote for any directory; a damaged one is
 * refused. */
static void test_qstate_keeps_voted_directory(void **state)
{
    fixture *f = *state;
    kq_raft_qstate qs = {.epoch = 9, .voted_id = 3002, .leader_id = -1};
    kq_store_recovered r;
    static const uint8_t v1[13] = {1, 0, 0, 0, 5, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t bad[13] = {2, 0, 0, 0, 5, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff};

    format_and_open(f);
    memset(qs.voted_dir, 0x7e, sizeof qs.voted_dir);
    assert_int_equal(kq_store_begin(f->s), 0);
    assert_int_equal(kq_store_put_qstate(f->s, &qs), 0);
    assert_int_equal(kq_store_commit(f->s), 0);
    reopen(f);
    assert_int_equal(kq_store_recover(f->s, &r), 0);
    assert_int_equal(r.qstate.voted_id, 3002);
    assert_memory_equal(r.qstate.voted_dir, qs.voted_dir, 16);
    free(r.epochs);
    kq_store_close(f->s);
    f->s = NULL;
    assert_int_equal(raw_qstate_len(f->dir), 29);
    /* a vote with no directory (static voters) is written in the old 13-byte format */
    reopen(f);
    memset(qs.voted_dir, 0, sizeof qs.voted_dir);
    assert_int_equal(kq_store_begin(f->s), 0);
    assert_int_equal(kq_store_put_qstate(f->s, &qs), 0);
    assert_int_equal(kq_store_commit(f->s), 0);
    kq_store_close(f->s);
    f->s = NULL;
    assert_int_equal(raw_qstate_len(f->dir), 13);
    reopen(f);

    kq_store_close(f->s);
    f->s = NULL;
    put_raw_qstate(f->dir, v1, sizeof v1);
    reopen(f);
    assert_int_equal(kq_store_recover(f->s, &r), 0);
    assert_int_equal(r.qstate.epoch, 5);
    assert_int_equal(r.qstate.voted_id, 2);
    assert_int_equal(r.qstate.leader_id, -1);
    assert_true(kq_uuid_is_zero(r.qstate.voted_dir));
    free(r.epochs);

    kq_store_close(f->s);
    f->s = NULL;
    put_raw_qstate(f->dir, bad, sizeof bad); /* version 2 needs 29 bytes */
    reopen(f);
    assert_int_equal(kq_store_recover(f->s, &r), KQ_ERR_CORRUPT_MESSAGE);
    free(r.epochs);
}

/* Overwrites one byte of the records of the batch at `base` through raw LMDB. */
static void corrupt_batch(const char *dir, int64_t base)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k, v;
    uint8_t key[8], copy[256];
    for (int i = 0; i < 8; i++)
        key[i] = (uint8_t)((uint64_t)base >> (56 - 8 * i));
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
    assert_int_equal(mdb_env_open(env, dir, 0, 0640), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "log", 0, &dbi), 0);
    k.mv_size = 8;
    k.mv_data = key;
    assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
    assert_true(v.mv_size > 12 && v.mv_size <= sizeof(copy));
    memcpy(copy, v.mv_data, v.mv_size);
    copy[v.mv_size - 1] ^= 0x40;
    v.mv_data = copy;
    assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

static void test_corruption_detected(void **state)
{
    fixture *f = *state;
    format_and_open(f);
    const int32_t epochs[] = {1, 1, 1, 1}; /* bases 0,1,3,4 */
    int64_t end = append_epochs(f->s, 0, epochs, 4);
    kq_store_close(f->s);
    f->s = NULL;
    corrupt_batch(f->dir, 3);

    char err[512];
    assert_int_equal(kq_store_open(f->dir, TEST_CLUSTER_ID, 1, &f->s, err, sizeof(err)), 0);
    seen sn = {0};
    assert_int_equal(kq_store_read(f->s, 0, end, SIZE_MAX, collect, &sn), KQ_ERR_CORRUPT_MESSAGE);
    assert_int_equal(kq_store_read(f->s, 3, end, SIZE_MAX, collect, &sn), KQ_ERR_CORRUPT_MESSAGE);
    assert_int_equal(sn.n, 0);
    /* batches before and after the damaged one still read */
    assert_int_equal(kq_store_read(f->s, 0, 3, SIZE_MAX, collect, &sn), 0);
    assert_int_equal(sn.n, 2);
    assert_int_equal(kq_store_read(f->s, 4, end, SIZE_MAX, collect, &sn), 0);
    assert_int_equal(sn.n, 3);
    for (int i = 0; i < sn.n; i++)
        assert_true(sn.content_ok[i]);
    /* a follower would truncate the damaged suffix and refetch it */
    assert_int_equal(kq_store_begin(f->s), 0);
    assert_int_equal(kq_store_truncate(f->s, 3), 0);
    assert_int_equal(test_append(f->s, 3, 2), 0);
    assert_int_equal(kq_store_commit(f->s), 0);
    memset(&sn, 0, sizeof(sn));
    assert_int_equal(kq_store_read(f->s, 0, end, SIZE_MAX, collect, &sn), 0);
    assert_int_equal(sn.n, 3);
}

/* Writes a batch entry with the given key and header (records empty, CRC of nothing) through
 * raw LMDB, as damage on disk would. */
static void put_raw_batch(const char *dir, int64_t base, int32_t epoch, int32_t count)
{
    uint8_t key[8], hdr[12] = {0};
    MDB_val k = {sizeof key, key}, v = {sizeof hdr, hdr};
    for (int i = 0; i < 8; i++)
        key[i] = (uint8_t)((uint64_t)base >> (56 - 8 * i));
    for (int i = 0; i < 4; i++) {
        hdr[i] = (uint8_t)((uint32_t)epoch >> (24 - 8 * i));
        hdr[4 + i] = (uint8_t)((uint32_t)count >> (24 - 8 * i));
    }
    raw_put(dir, "log", k, v);
}

/* Found by fuzz_store: a last batch whose header says 0 (or a negative number of) records, or
 * whose end lies past INT64_MAX, gave a log end below that batch (which kq_store_verify then
 * accepted) or overflowed computing it (undefined behaviour). Such a header is damage. */
static void test_damaged_last_batch_header_refused(void **state)
{
    fixture *f = *state;
    const struct {
        int64_t base;
        int32_t count;
    } bad[] = {{4, 0}, {4, -3}, {INT64_MAX, 5}, {INT64_MAX - 1, 2}};
    format_and_open(f);
    const int32_t epochs[] = {1, 1, 1}; /* bases 0, 1, 3; end 4 */
    assert_int_equal(append_epochs(f->s, 0, epochs, 3), 4);
    kq_store_close(f->s);
    f->s = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[512] = "";
        put_raw_batch(f->dir, bad[i].base, 1, bad[i].count);
        assert_int_equal(kq_store_open(f->dir, TEST_CLUSTER_ID, 1, &f->s, err, sizeof(err)),
                         KQ_ERR_CORRUPT_MESSAGE);
        assert_non_null(strstr(err, "damaged"));
        assert_null(f->s);
        /* remove it again: the store opens, and its end is the last good batch's */
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi dbi;
        uint8_t key[8];
        MDB_val k = {sizeof key, key};
        for (int b = 0; b < 8; b++)
            key[b] = (uint8_t)((uint64_t)bad[i].base >> (56 - 8 * b));
        assert_int_equal(mdb_env_create(&env), 0);
        assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
        assert_int_equal(mdb_env_open(env, f->dir, 0, 0640), 0);
        assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
        assert_int_equal(mdb_dbi_open(txn, "log", 0, &dbi), 0);
        assert_int_equal(mdb_del(txn, dbi, &k, NULL), 0);
        assert_int_equal(mdb_txn_commit(txn), 0);
        mdb_env_close(env);
        reopen(f);
        kq_store_recovered rec;
        assert_int_equal(kq_store_recover(f->s, &rec), 0);
        assert_int_equal(rec.log_end_offset, 4);
        free(rec.epochs);
        kq_store_close(f->s);
        f->s = NULL;
    }
}

typedef struct empty_seen {
    int n;
    int non_null;
} empty_seen;

static int note_empty(void *arg, int64_t base, int32_t epoch, int32_t count, uint32_t crc,
                      const uint8_t *records, size_t len)
{
    empty_seen *e = arg;
    (void)base;
    (void)epoch;
    (void)count;
    (void)crc;
    e->n++;
    e->non_null += records != NULL && len == 0;
    return 0;
}

/* Found by fuzz_store: reading only batches with no record bytes did pointer arithmetic on a
 * copy buffer that was never allocated (UBSan: "applying zero offset to null pointer") and
 * handed the callback NULL. The copy buffer now always exists. */
static void test_read_empty_batch(void **state)
{
    fixture *f = *state;
    format_and_open(f);
    const int32_t epochs[] = {1, 1, 1}; /* bases 0, 1, 3; end 4 */
    assert_int_equal(append_epochs(f->s, 0, epochs, 3), 4);
    kq_store_close(f->s);
    f->s = NULL;
    put_raw_batch(f->dir, 4, 1, 1); /* one record, no bytes, CRC of nothing */
    reopen(f);
    empty_seen e = {0};
    assert_int_equal(kq_store_read(f->s, 4, INT64_MAX, SIZE_MAX, note_empty, &e), 0);
    assert_int_equal(e.n, 1);
    assert_int_equal(e.non_null, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_format_open_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_format_twice_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_format_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_not_formatted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_and_uncommitted_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recover_after_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_qstate_keeps_voted_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corruption_detected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_last_batch_header_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_empty_batch, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
