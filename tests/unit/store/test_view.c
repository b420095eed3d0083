/*
 * kq_store read views (kq log-dump of a directory a daemon is writing): a fork()ed reader opens
 * the store read-only and begins a view; the parent then removes the log prefix, truncates the
 * tail and appends batches of a new epoch, in another process's write transactions. The reader
 * must still recover and read exactly the log as it was when its view began, every batch
 * intact; without a view it sees the new log. Also the rules: one view at a time, no view with
 * a write transaction open and no write transaction with a view open.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kq/error.h"
#include "store_test_util.h"

#define N_BATCHES 8

typedef struct seen {
    int64_t next;
    int bad;
    int n;
} seen;

static int check_batch(void *arg, int64_t base, int32_t epoch, int32_t count, uint32_t crc,
                       const uint8_t *rec, size_t len)
{
    seen *s = arg;
    (void)crc;
    if (base != s->next || epoch != 1 || !test_batch_ok(base, epoch, count, rec, len))
        s->bad++;
    s->next = base + count;
    s->n++;
    return 0;
}

/* The reader: exit status 0 when its view showed the old log from start to end. */
static void reader(const char *dir, int64_t end, int ready_fd, int go_fd)
{
    kq_store *s = NULL;
    kq_store_recovered rec;
    char err[512], b = 'r';
    seen sn = {0, 0, 0};

    if (kq_store_open_readonly(dir, &s, err, sizeof(err)) != 0 || kq_store_view_begin(s) != 0)
        _exit(10);
    if (kq_store_view_begin(s) != KQ_ERR_INVALID_REQUEST)
        _exit(11);
    if (write(ready_fd, &b, 1) != 1 || read(go_fd, &b, 1) != 1)
        _exit(12);
    /* the writer has committed by now */
    if (kq_store_recover(s, &rec) != 0)
        _exit(13);
    free(rec.epochs);
    if (rec.log_start_offset != 0 || rec.log_end_offset != end || rec.last_epoch != 1)
        _exit(14);
    while (sn.next < end) {
        int64_t from = sn.next;
        if (kq_store_read(s, from, end, 64, check_batch, &sn) != 0 || sn.next == from)
            _exit(15);
    }
    if (sn.bad || sn.n != N_BATCHES)
        _exit(16);
    kq_store_view_end(s);
    /* without the view: the writer's log */
    if (kq_store_recover(s, &rec) != 0)
        _exit(17);
    free(rec.epochs);
    if (rec.log_start_offset == 0 || rec.last_epoch != 2)
        _exit(18);
    kq_store_close(s);
    _exit(0);
}

static void test_view_sees_one_state_while_another_process_writes(void **state)
{
    (void)state;
    char dir[256], err[512], b;
    kq_store *s = NULL;
    int64_t bases[N_BATCHES], end = 0;
    int ready[2], go[2], status = 0;

    assert_int_equal(tmpdir_make(dir, sizeof(dir)), 0);
    assert_int_equal(kq_store_format(dir, TEST_CLUSTER_ID, 1, NULL, err, sizeof(err)), 0);
    assert_int_equal(kq_store_open(dir, TEST_CLUSTER_ID, 1, &s, err, sizeof(err)), 0);
    assert_int_equal(kq_store_begin(s), 0);
    for (int i = 0; i < N_BATCHES; i++) {
        bases[i] = end;
        assert_int_equal(test_append(s, end, 1), 0);
        end += test_batch_count(end);
    }
    assert_int_equal(kq_store_commit(s), 0);
    kq_store_close(s); /* no environment may be open across fork() */
    s = NULL;

    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(go), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        reader(dir, end, ready[1], go[0]);
    assert_int_equal(read(ready[0], &b, 1), 1);

    /* The writer: remove the prefix, cut the tail, append a new epoch. */
    assert_int_equal(kq_store_open(dir, TEST_CLUSTER_ID, 1, &s, err, sizeof(err)), 0);
    assert_int_equal(kq_store_begin(s), 0);
    assert_int_equal(kq_store_delete_prefix(s, bases[3]), 0);
    assert_int_equal(kq_store_truncate(s, bases[6]), 0);
    assert_int_equal(test_append(s, bases[6], 2), 0);
    assert_int_equal(kq_store_commit(s), 0);
    kq_store_close(s);
    b = 'g';
    assert_int_equal(write(go[1], &b, 1), 1);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
    tmpdir_remove(dir);
}

static void test_view_rules(void **state)
{
    (void)state;
    char dir[256], err[512];
    kq_store *s = NULL;

    assert_int_equal(tmpdir_make(dir, sizeof(dir)), 0);
    assert_int_equal(kq_store_format(dir, TEST_CLUSTER_ID, 1, NULL, err, sizeof(err)), 0);
    assert_int_equal(kq_store_open(dir, TEST_CLUSTER_ID, 1, &s, err, sizeof(err)), 0);
    assert_int_equal(kq_store_begin(s), 0);
    assert_int_equal(kq_store_view_begin(s), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(test_append(s, 0, 1), 0);
    assert_int_equal(kq_store_commit(s), 0);
    assert_int_equal(kq_store_view_begin(s), 0);
    assert_int_equal(kq_store_view_begin(s), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_store_begin(s), KQ_ERR_INVALID_REQUEST);
    kq_store_view_end(s);
    kq_store_view_end(s); /* twice is fine */
    assert_int_equal(kq_store_begin(s), 0);
    kq_store_abort(s);
    assert_int_equal(kq_store_view_begin(s), 0);
    kq_store_close(s); /* ends the view */
    tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view_sees_one_state_while_another_process_writes),
        cmocka_unit_test(test_view_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
