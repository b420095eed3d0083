/*
 * Snapshot files and log-prefix deletion in kq_store: write / list / read / load / delete,
 * a torn .part removed at the next open, CRC and header damage detected on load, the log
 * prefix deleted and the log start recovered, the follower's chunked install (and its crash
 * window), a wiped directory recovering as nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "kq/error.h"
#include "store_test_util.h"

typedef struct fx {
    char dir[256];
    kq_store *s;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));
    char err[512];
    if (!f || tmpdir_make(f->dir, sizeof(f->dir)) != 0)
        return -1;
    if (kq_store_format(f->dir, TEST_CLUSTER_ID, 1, NULL, err, sizeof(err)) != 0 ||
        kq_store_open(f->dir, TEST_CLUSTER_ID, 1, &f->s, err, sizeof(err)) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    kq_store_close(f->s);
    tmpdir_remove(f->dir);
    free(f);
    return 0;
}

static void reopen(fx *f)
{
    char err[512];
    kq_store_close(f->s);
    f->s = NULL;
    assert_int_equal(kq_store_open(f->dir, TEST_CLUSTER_ID, 1, &f->s, err, sizeof(err)), 0);
}

/* Batches at 0.. with the given epochs, one batch per entry; returns the log end. */
static int64_t fill_log(kq_store *s, const int32_t *epochs, int n, int64_t *bases)
{
    int64_t off = 0;
    assert_int_equal(kq_store_begin(s), 0);
    for (int i = 0; i < n; i++) {
        bases[i] = off;
        assert_int_equal(test_append(s, off, epochs[i]), 0);
        off += test_batch_count(off);
    }
    assert_int_equal(kq_store_commit(s), 0);
    return off;
}

static void snap_file(const fx *f, kq_raft_snapshot_id id, const char *suffix, char *out, size_t n)
{
    snprintf(out, n, "%s/snapshots/%020lld-%010d.checkpoint%s", f->dir, (long long)id.end_offset,
             (int)id.epoch, suffix);
}

static void test_write_list_read_load_delete(void **state)
{
    fx *f = *state;
    char err[512];
    uint8_t img[1000];
    for (size_t i = 0; i < sizeof(img); i++)
        img[i] = (uint8_t)(i * 13 + 1);
    kq_raft_snapshot_id a = {100, 2}, b = {250, 3}, c = {400, 3};
    int64_t size = 0;
    kq_raft_snapshot_id latest;

    assert_int_equal(kq_store_snapshot_latest(f->s, &latest, &size), KQ_ERR_NOT_FOUND);
    assert_int_equal(kq_store_snapshot_write(f->s, b, img, 500, &size, err, sizeof(err)), 0);
    assert_int_equal(size, KQ_STORE_SNAPSHOT_HEADER_LEN + 500);
    assert_int_equal(kq_store_snapshot_write(f->s, a, img, 100, NULL, err, sizeof(err)), 0);
    assert_int_equal(kq_store_snapshot_write(f->s, c, img, sizeof(img), &size, err, sizeof(err)),
                     0);
    /* bad ids are refused with a message */
    kq_raft_snapshot_id bad = {0, 0};
    assert_int_equal(kq_store_snapshot_write(f->s, bad, img, 10, NULL, err, sizeof(err)),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "invalid snapshot id"));

    kq_raft_snapshot_id ids[8];
    size_t n = 0;
    assert_int_equal(kq_store_snapshot_list(f->s, ids, 8, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0].end_offset, 100);
    assert_int_equal(ids[1].end_offset, 250);
    assert_int_equal(ids[2].end_offset, 400);
    assert_int_equal(kq_store_snapshot_latest(f->s, &latest, &size), 0);
    assert_int_equal(latest.end_offset, 400);
    assert_int_equal(latest.epoch, 3);
    assert_int_equal(size, KQ_STORE_SNAPSHOT_HEADER_LEN + (int64_t)sizeof(img));

    /* raw reads for FetchSnapshot: header then payload bytes, clipped at the end */
    uint8_t buf[64];
    size_t got = 0;
    assert_int_equal(kq_store_snapshot_read(f->s, c, 0, buf, 8, &got), 0);
    assert_int_equal(got, 8);
    assert_memory_equal(buf, "KQSNAP01", 8);
    assert_int_equal(
        kq_store_snapshot_read(f->s, c, KQ_STORE_SNAPSHOT_HEADER_LEN + 10, buf, 20, &got), 0);
    assert_memory_equal(buf, img + 10, 20);
    assert_int_equal(kq_store_snapshot_read(f->s, c, size - 5, buf, 64, &got), 0);
    assert_int_equal(got, 5);
    assert_int_equal(kq_store_snapshot_read(f->s, c, size, buf, 8, &got),
                     KQ_ERR_POSITION_OUT_OF_RANGE);
    assert_int_equal(kq_store_snapshot_read(f->s, c, -1, buf, 8, &got),
                     KQ_ERR_POSITION_OUT_OF_RANGE);
    kq_raft_snapshot_id missing = {401, 3};
    assert_int_equal(kq_store_snapshot_read(f->s, missing, 0, buf, 8, &got),
                     KQ_ERR_SNAPSHOT_NOT_FOUND);

    uint8_t *payload = NULL;
    size_t plen = 0;
    assert_int_equal(kq_store_snapshot_load(f->s, c, &payload, &plen, err, sizeof(err)), 0);
    assert_int_equal(plen, sizeof(img));
    assert_memory_equal(payload, img, sizeof(img));
    free(payload);
    assert_int_equal(kq_store_snapshot_load(f->s, missing, &payload, &plen, err, sizeof(err)),
                     KQ_ERR_SNAPSHOT_NOT_FOUND);
    assert_non_null(strstr(err, "does not exist"));

    /* keep the latest two */
    assert_int_equal(kq_store_snapshot_delete_older(f->s, KQ_STORE_SNAPSHOTS_KEPT), 0);
    assert_int_equal(kq_store_snapshot_list(f->s, ids, 8, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0].end_offset, 250);
    assert_int_equal(ids[1].end_offset, 400);
    assert_int_equal(kq_store_snapshot_delete_older(f->s, 0), KQ_ERR_INVALID_REQUEST);
}

static void test_torn_part_ignored_after_crash(void **state)
{
    fx *f = *state;
    char err[512], path[512];
    uint8_t img[64] = {7};
    kq_raft_snapshot_id a = {10, 1}, torn = {20, 1};
    assert_int_equal(kq_store_snapshot_write(f->s, a, img, sizeof(img), NULL, err, sizeof(err)), 0);
    /* a crash in the middle of writing the next one leaves a .part */
    assert_int_equal(kq_store_snapshot_part_write(f->s, torn, 0, img, 30), 0);
    snap_file(f, torn, ".part", path, sizeof(path));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    kq_raft_snapshot_id latest;
    int64_t size;
    assert_int_equal(kq_store_snapshot_latest(f->s, &latest, &size), 0);
    assert_int_equal(latest.end_offset, 10); /* a .part is never a snapshot */
    reopen(f);
    assert_int_not_equal(stat(path, &st), 0); /* removed at open */
    assert_int_equal(kq_store_snapshot_latest(f->s, &latest, &size), 0);
    assert_int_equal(latest.end_offset, 10);
    kq_store_recovered rec;
    assert_int_equal(kq_store_recover(f->s, &rec), 0);
    assert_int_equal(rec.snapshot.end_offset, 10);
    assert_int_equal(rec.snapshot_size, KQ_STORE_SNAPSHOT_HEADER_LEN + 64);
    free(rec.epochs);
}

static void flip_byte(const char *path, off_t at)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0x40;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

static void test_crc_mismatch_detected(void **state)
{
    fx *f = *state;
    char err[512], path[512];
    uint8_t img[200];
    memset(img, 0x5a, sizeof(img));
    kq_raft_snapshot_id a = {50, 4};
    assert_int_equal(kq_store_snapshot_write(f->s, a, img, sizeof(img), NULL, err, sizeof(err)), 0);
    snap_file(f, a, "", path, sizeof(path));
    uint8_t *p = NULL;
    size_t n = 0;
    flip_byte(path, KQ_STORE_SNAPSHOT_HEADER_LEN + 77); /* payload */
    assert_int_equal(kq_store_snapshot_load(f->s, a, &p, &n, err, sizeof(err)),
                     KQ_ERR_CORRUPT_MESSAGE);
    assert_null(p);
    assert_non_null(strstr(err, "CRC32C mismatch"));
    flip_byte(path, KQ_STORE_SNAPSHOT_HEADER_LEN + 77);
    assert_int_equal(kq_store_snapshot_load(f->s, a, &p, &n, err, sizeof(err)), 0);
    free(p);
    p = NULL;
    flip_byte(path, 9); /* header: end offset */
    assert_int_equal(kq_store_snapshot_load(f->s, a, &p, &n, err, sizeof(err)),
                     KQ_ERR_CORRUPT_MESSAGE);
    assert_non_null(strstr(err, "damaged header"));
    flip_byte(path, 9);
    /* truncated file */
    assert_int_equal(truncate(path, KQ_STORE_SNAPSHOT_HEADER_LEN + 100), 0);
    assert_int_equal(kq_store_snapshot_load(f->s, a, &p, &n, err, sizeof(err)),
                     KQ_ERR_CORRUPT_MESSAGE);
    assert_non_null(strstr(err, "header says"));
    assert_int_equal(truncate(path, 10), 0);
    assert_int_equal(kq_store_snapshot_load(f->s, a, &p, &n, err, sizeof(err)),
                     KQ_ERR_CORRUPT_MESSAGE);
    assert_non_null(strstr(err, "truncated"));
}

/* kq log-dump --snapshot: a file read by path, without a store, checked like a load; its id
 * comes from the header, whatever the file is called. */
static void test_snapshot_file_load_by_path(void **state)
{
    fx *f = *state;
    char err[512], path[512], copy[600];
    uint8_t img[300], *p = NULL;
    size_t n = 0;
    int64_t size = 0;
    kq_raft_snapshot_id a = {77, 5}, got = {0, 0};

    for (size_t i = 0; i < sizeof(img); i++)
        img[i] = (uint8_t)(i * 7);
    assert_int_equal(kq_store_snapshot_write(f->s, a, img, sizeof(img), NULL, err, sizeof(err)), 0);
    snap_file(f, a, "", path, sizeof(path));
    assert_int_equal(kq_store_snapshot_file_load(path, &got, &p, &n, &size, err, sizeof(err)), 0);
    assert_int_equal(got.end_offset, 77);
    assert_int_equal(got.epoch, 5);
    assert_int_equal(size, KQ_STORE_SNAPSHOT_HEADER_LEN + (int64_t)sizeof(img));
    assert_int_equal(n, sizeof(img));
    assert_memory_equal(p, img, sizeof(img));
    free(p);
    p = NULL;

    /* a copy under another name reads the same (the header names the snapshot) */
    snprintf(copy, sizeof(copy), "%s/copy.bin", f->dir);
    assert_int_equal(rename(path, copy), 0);
    assert_int_equal(kq_store_snapshot_file_load(copy, &got, &p, &n, NULL, err, sizeof(err)), 0);
    assert_int_equal(got.end_offset, 77);
    free(p);
    p = NULL;

    flip_byte(copy, KQ_STORE_SNAPSHOT_HEADER_LEN + 5);
    assert_int_equal(kq_store_snapshot_file_load(copy, &got, &p, &n, &size, err, sizeof(err)),
                     KQ_ERR_CORRUPT_MESSAGE);
    assert_null(p);
    assert_non_null(strstr(err, "CRC32C mismatch"));
    assert_non_null(strstr(err, "copy.bin"));
    assert_int_equal(kq_store_snapshot_file_load(f->dir, &got, &p, &n, &size, err, sizeof(err)),
                     KQ_ERR_IO);
    assert_non_null(strstr(err, "not a regular file"));
    snprintf(copy, sizeof(copy), "%s/missing.checkpoint", f->dir);
    assert_int_equal(kq_store_snapshot_file_load(copy, &got, &p, &n, &size, err, sizeof(err)),
                     KQ_ERR_SNAPSHOT_NOT_FOUND);
    assert_non_null(strstr(err, "does not exist"));
}

static void test_delete_prefix_and_recover(void **state)
{
    fx *f = *state;
    int32_t epochs[] = {1, 1, 2, 2, 2, 3, 5, 5};
    int64_t bases[8];
    int64_t end = fill_log(f->s, epochs, 8, bases);

    /* outside a transaction, not a boundary, beyond the end: refused */
    assert_int_equal(kq_store_delete_prefix(f->s, bases[3]), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_store_begin(f->s), 0);
    if (bases[3] + 1 < bases[4])
        assert_int_equal(kq_store_delete_prefix(f->s, bases[3] + 1), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_store_delete_prefix(f->s, end + 1), KQ_ERR_INVALID_REQUEST);
    /* a snapshot ending inside epoch 2 (after batch 3) */
    assert_int_equal(kq_store_delete_prefix(f->s, bases[4]), 0);
    assert_int_equal(kq_store_commit(f->s), 0);

    kq_store_recovered rec;
    assert_int_equal(kq_store_recover(f->s, &rec), 0);
    assert_int_equal(rec.log_start_offset, bases[4]);
    assert_int_equal(rec.log_start_epoch, 2);
    assert_int_equal(rec.log_end_offset, end);
    assert_int_equal(rec.n_epochs, 3); /* 2 clamped to the start, 3, 5 */
    assert_int_equal(rec.epochs[0].epoch, 2);
    assert_int_equal(rec.epochs[0].start_offset, bases[4]);
    assert_int_equal(rec.epochs[1].epoch, 3);
    assert_int_equal(rec.epochs[1].start_offset, bases[5]);
    assert_int_equal(rec.epochs[2].epoch, 5);
    free(rec.epochs);

    /* batches below the start are gone; reads and truncation never go below it */
    assert_int_not_equal(kq_store_read(f->s, bases[0], end, 1 << 20, NULL, NULL), 0);
    assert_int_equal(kq_store_begin(f->s), 0);
    assert_int_equal(kq_store_truncate(f->s, bases[2]), KQ_ERR_INVALID_REQUEST);
    /* a prefix deletion up to the log end leaves an empty log that starts there */
    assert_int_equal(kq_store_delete_prefix(f->s, end), 0);
    assert_int_equal(kq_store_commit(f->s), 0);
    reopen(f);
    assert_int_equal(kq_store_recover(f->s, &rec), 0);
    assert_int_equal(rec.log_start_offset, end);
    assert_int_equal(rec.log_end_offset, end);
    assert_int_equal(rec.log_start_epoch, 5);
    assert_int_equal(rec.last_epoch, 5);
    free(rec.epochs);
    /* appends continue at the log end */
    assert_int_equal(kq_store_begin(f->s), 0);
    assert_int_equal(kq_store_append(f->s, end - 1, 6, 1, (const uint8_t *)"x", 1),
                     KQ_ERR_INVALID_REQUEST);
    assert_int_equal(test_append(f->s, end, 6), 0);
    assert_int_equal(kq_store_commit(f->s), 0);
    assert_int_equal(kq_store_recover(f->s, &rec), 0);
    assert_int_equal(rec.log_start_offset, end);
    assert_int_equal(rec.log_end_offset, end + test_batch_count(end));
    free(rec.epochs);
}

static void test_chunked_install_and_recover(void **state)
{
    fx *f = *state;
    char err[512];
    int32_t epochs[] = {1, 1, 2};
    int64_t bases[3];
    fill_log(f->s, epochs, 3, bases);

    /* the leader's file, copied in 3 chunks as FetchSnapshot would */
    uint8_t img[300];
    for (size_t i = 0; i < sizeof(img); i++)
        img[i] = (uint8_t)(i ^ 0xa5);
    kq_raft_snapshot_id id = {1000, 7};
    int64_t size = 0;
    assert_int_equal(kq_store_snapshot_write(f->s, id, img, sizeof(img), &size, err, sizeof(err)),
                     0);
    uint8_t file[400];
    size_t got;
    assert_int_equal(kq_store_snapshot_read(f->s, id, 0, file, sizeof(file), &got), 0);
    assert_int_equal((int64_t)got, size);
    char path[512];
    snap_file(f, id, "", path, sizeof(path));
    assert_int_equal(unlink(path), 0); /* this node does not have it yet */

    assert_int_equal(kq_store_snapshot_part_write(f->s, id, 0, file, 100), 0);
    /* a gap or a replay is refused */
    assert_int_equal(kq_store_snapshot_part_write(f->s, id, 150, file + 150, 10),
                     KQ_ERR_POSITION_OUT_OF_RANGE);
    assert_int_equal(kq_store_snapshot_part_write(f->s, id, 100, file + 100, 100), 0);
    assert_int_equal(kq_store_snapshot_part_write(f->s, id, 200, file + 200, got - 200), 0);
    assert_int_equal(kq_store_install_snapshot(f->s, id, err, sizeof(err)), 0);

    kq_store_recovered rec;
    reopen(f);
    assert_int_equal(kq_store_recover(f->s, &rec), 0);
    assert_int_equal(rec.log_start_offset, 1000);
    assert_int_equal(rec.log_end_offset, 1000);
    assert_int_equal(rec.log_start_epoch, 7);
    assert_int_equal(rec.n_epochs, 1);
    assert_int_equal(rec.epochs[0].epoch, 7);
    assert_int_equal(rec.epochs[0].start_offset, 1000);
    assert_int_equal(rec.snapshot.end_offset, 1000);
    assert_int_equal(rec.snapshot.epoch, 7);
    assert_int_equal(rec.snapshot_size, size);
    free(rec.epochs);
    uint8_t *p = NULL;
    size_t n = 0;
    assert_int_equal(kq_store_snapshot_load(f->s, id, &p, &n, err, sizeof(err)), 0);
    assert_int_equal(n, sizeof(img));
    assert_memory_equal(p, img, sizeof(img));
    free(p);
    /* the log goes on from the snapshot end */
    assert_int_equal(kq_store_begin(f->s), 0);
    assert_int_equal(test_append(f->s, 1000, 8), 0);
    assert_int_equal(kq_store_commit(f->s), 0);
}

static void test_corrupt_fetched_snapshot_changes_nothing(void **state)
{
    fx *f = *state;
    char err[512];
    int32_t epochs[] = {1, 2};
    int64_t bases[2];
    int64_t end = fill_log(f->s, epochs, 2, bases);
    uint8_t junk[100];
    memset(junk, 0x11, sizeof(junk));
    kq_raft_snapshot_id id = {500, 3};
    assert_int_equal(kq_store_snapshot_part_write(f->s, id, 0, junk, sizeof(junk)), 0);
    assert_int_equal(kq_store_install_snapshot(f->s, id, err, sizeof(err)), KQ_ERR_CORRUPT_MESSAGE);
    assert_non_null(strstr(err, "damaged header"));
    kq_store_recovered rec;
    assert_int_equal(kq_store_recover(f->s, &rec), 0);
    assert_int_equal(rec.log_start_offset, 0);
    assert_int_equal(rec.log_end_offset, end);
    assert_int_equal(rec.snapshot.end_offset, 0);
    free(rec.epochs);
    /* no part left behind; installing without one says so */
    assert_int_equal(kq_store_install_snapshot(f->s, id, err, sizeof(err)),
                     KQ_ERR_SNAPSHOT_NOT_FOUND);
    assert_int_equal(kq_store_snapshot_part_abort(f->s, id), 0);
}

/* A crash after the install transaction but before the rename: the next open finishes it. */
static void test_interrupted_install_finished_at_open(void **state)
{
    fx *f = *state;
    char err[512], path[512];
    int32_t epochs[] = {1, 1, 2, 2};
    int64_t bases[4];
    fill_log(f->s, epochs, 4, bases);
    /* build a valid file for id {bases[2], 1} and keep its bytes */
    kq_raft_snapshot_id id = {bases[2], 1};
    uint8_t img[40] = {1, 2, 3};
    uint8_t file[128];
    size_t got;
    assert_int_equal(kq_store_snapshot_write(f->s, id, img, sizeof(img), NULL, err, sizeof(err)),
                     0);
    assert_int_equal(kq_store_snapshot_read(f->s, id, 0, file, sizeof(file), &got), 0);
    snap_file(f, id, "", path, sizeof(path));
    assert_int_equal(unlink(path), 0);
    /* state right after the install transaction: the log starts at the snapshot, the file
     * is still a .part */
    assert_int_equal(kq_store_begin(f->s), 0);
    assert_int_equal(kq_store_delete_prefix(f->s, bases[2]), 0);
    assert_int_equal(kq_store_commit(f->s), 0);
    assert_int_equal(kq_store_snapshot_part_write(f->s, id, 0, file, got), 0);
    reopen(f);
    kq_store_recovered rec;
    assert_int_equal(kq_store_recover(f->s, &rec), 0);
    assert_int_equal(rec.snapshot.end_offset, bases[2]);
    assert_int_equal(rec.snapshot.epoch, 1);
    assert_int_equal(rec.log_start_offset, bases[2]);
    free(rec.epochs);
    uint8_t *p = NULL;
    size_t n;
    assert_int_equal(kq_store_snapshot_load(f->s, id, &p, &n, err, sizeof(err)), 0);
    free(p);
}

static void test_wiped_directory_recovers_nothing(void **state)
{
    fx *f = *state;
    kq_store_recovered rec;
    assert_int_equal(kq_store_recover(f->s, &rec), 0);
    assert_int_equal(rec.log_start_offset, 0);
    assert_int_equal(rec.log_end_offset, 0);
    assert_int_equal(rec.log_start_epoch, 0);
    assert_int_equal(rec.snapshot.end_offset, 0);
    assert_int_equal(rec.snapshot.epoch, 0);
    assert_int_equal(rec.snapshot_size, 0);
    assert_int_equal(rec.n_epochs, 0);
    free(rec.epochs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_list_read_load_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_part_ignored_after_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crc_mismatch_detected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_file_load_by_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_prefix_and_recover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chunked_install_and_recover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_fetched_snapshot_changes_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_interrupted_install_finished_at_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wiped_directory_recovers_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
