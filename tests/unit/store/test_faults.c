/*
 * Disk faults under kq_store (reliability.md section 3.7): this executable interposes
 * fdatasync, pwrite and writev (liblmdb calls them through the PLT), so a test can make the
 * disk fail. A failed commit must return KQ_ERR_IO and leave the handle refusing everything
 * but close, and a reopen must find the last good commit intact and writable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "kq/error.h"
#include "kq/store.h"
#include "store_test_util.h"

enum fault { FAULT_NONE = 0, FAULT_FSYNC_EIO, FAULT_WRITE_ENOSPC };
static enum fault g_fault;
static int g_injected; /* calls that failed because of g_fault */

int fdatasync(int fd)
{
    if (g_fault == FAULT_FSYNC_EIO) {
        g_injected++;
        errno = EIO;
        return -1;
    }
    return (int)syscall(SYS_fdatasync, fd);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (g_fault == FAULT_WRITE_ENOSPC) {
        g_injected++;
        errno = ENOSPC;
        return -1;
    }
    return (ssize_t)syscall(SYS_pwrite64, fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    if (g_fault == FAULT_WRITE_ENOSPC) {
        g_injected++;
        errno = ENOSPC;
        return -1;
    }
    return (ssize_t)syscall(SYS_writev, fd, iov, cnt);
}

typedef struct fixture {
    char root[512];
    char dir[600];
    kq_store *s;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    char err[512];
    if (f == NULL || tmpdir_make(f->root, sizeof(f->root)) != 0)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "%s/meta", f->root);
    if (kq_store_format(f->dir, TEST_CLUSTER_ID, 1, NULL, err, sizeof(err)) != 0 ||
        kq_store_open(f->dir, TEST_CLUSTER_ID, 1, &f->s, err, sizeof(err)) != 0)
        return -1;
    g_fault = FAULT_NONE;
    g_injected = 0;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    g_fault = FAULT_NONE;
    kq_store_close(f->s);
    tmpdir_remove(f->root);
    free(f);
    return 0;
}

static int count_batch(void *arg, int64_t base, int32_t epoch, int32_t count, uint32_t crc,
                       const uint8_t *rec, size_t len)
{
    int *n = arg;
    if (test_batch_ok(base, epoch, count, rec, len))
        (*n)++;
    return 0;
}

static void failed_commit_is_sticky(fixture *f, enum fault fault)
{
    kq_store_recovered r;
    kq_raft_qstate qs = {.epoch = 4, .voted_id = 1, .leader_id = 1};
    char err[512];
    int n = 0;

    /* one good commit: batch at 0 (count 1), qstate epoch 4 */
    assert_int_equal(kq_store_begin(f->s), 0);
    assert_int_equal(kq_store_put_qstate(f->s, &qs), 0);
    assert_int_equal(test_append(f->s, 0, 4), 0);
    assert_int_equal(kq_store_commit(f->s), 0);

    /* the disk fails during the next commit */
    assert_int_equal(kq_store_begin(f->s), 0);
    qs.epoch = 5;
    assert_int_equal(kq_store_put_qstate(f->s, &qs), 0);
    assert_int_equal(test_append(f->s, 1, 5), 0);
    g_fault = fault;
    assert_int_equal(kq_store_commit(f->s), KQ_ERR_IO);
    g_fault = FAULT_NONE;
    assert_true(g_injected > 0);
    assert_false(kq_store_in_txn(f->s));

    /* the handle is good only for close now, even though LMDB itself would carry on */
    assert_int_equal(kq_store_begin(f->s), KQ_ERR_IO);
    assert_int_equal(kq_store_recover(f->s, &r), KQ_ERR_IO);
    assert_int_equal(kq_store_read(f->s, 0, 10, SIZE_MAX, count_batch, &n), KQ_ERR_IO);
    assert_int_equal(kq_store_append(f->s, 3, 5, 1, NULL, 0), KQ_ERR_IO);
    assert_int_equal(kq_store_commit(f->s), KQ_ERR_IO);
    kq_store_close(f->s);
    f->s = NULL;

    /* a restarted node finds the last good commit and can write again */
    assert_int_equal(kq_store_open(f->dir, TEST_CLUSTER_ID, 1, &f->s, err, sizeof(err)), 0);
    assert_int_equal(kq_store_recover(f->s, &r), 0);
    assert_int_equal(r.qstate.epoch, 4);
    assert_int_equal(r.log_end_offset, 1);
    assert_int_equal(r.last_epoch, 4);
    assert_int_equal(r.n_epochs, 1);
    free(r.epochs);
    assert_int_equal(kq_store_read(f->s, 0, 10, SIZE_MAX, count_batch, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(kq_store_begin(f->s), 0);
    assert_int_equal(test_append(f->s, 1, 5), 0);
    assert_int_equal(kq_store_commit(f->s), 0);
    assert_int_equal(kq_store_recover(f->s, &r), 0);
    assert_int_equal(r.log_end_offset, 3);
    free(r.epochs);
}

static void test_fsync_eio(void **state)
{
    failed_commit_is_sticky(*state, FAULT_FSYNC_EIO);
}

static void test_write_enospc(void **state)
{
    failed_commit_is_sticky(*state, FAULT_WRITE_ENOSPC);
}

/* format on a disk that refuses writes fails cleanly and can be retried. */
static void test_format_on_full_disk(void **state)
{
    fixture *f = *state;
    char err[512], dir[700];
    snprintf(dir, sizeof(dir), "%s/other", f->root);
    g_fault = FAULT_WRITE_ENOSPC;
    int rc = kq_store_format(dir, TEST_CLUSTER_ID, 2, NULL, err, sizeof(err));
    g_fault = FAULT_NONE;
    assert_int_equal(rc, KQ_ERR_IO);
    assert_non_null(strstr(err, dir));
    /* nothing half-formatted is left behind: open refuses, a retry succeeds */
    kq_store *s = NULL;
    assert_int_equal(kq_store_open(dir, TEST_CLUSTER_ID, 2, &s, err, sizeof(err)),
                     KQ_ERR_NOT_FORMATTED);
    assert_int_equal(kq_store_format(dir, TEST_CLUSTER_ID, 2, NULL, err, sizeof(err)), 0);
    assert_int_equal(kq_store_open(dir, TEST_CLUSTER_ID, 2, &s, err, sizeof(err)), 0);
    kq_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fsync_eio, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_enospc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_format_on_full_disk, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
