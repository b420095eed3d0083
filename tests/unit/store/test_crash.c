/*
 * Crash safety of kq_store: a fork()ed child opens the store and commits batches (with a
 * truncation and quorum-state write at the start of each round) until the parent SIGKILLs it
 * at a random moment. The child reports every successful commit through a pipe. The parent
 * then reopens the store and checks that
 *   - the recovered state is exactly the last reported commit or the one in flight
 *     (no acknowledged commit lost, nothing half-applied),
 *   - the log is contiguous from 0, every batch holds exactly the bytes the child wrote,
 *     the CRCs verify, and the prefix the child did not touch is unchanged,
 *   - the epoch cache, last epoch and quorum state agree with the batches.
 * Set KQ_TEST_SEED to repeat a run's choices of kill points.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kq/error.h"
#include "kq/store.h"
#include "kq/util.h"
#include "store_test_util.h"

#define ROUNDS 20
#define MAX_OFFSETS 200000
#define REPORT_TIMEOUT_MS 60000
#define REPORT_CAP (MAX_OFFSETS + 8) /* each commit adds at least one offset */

typedef struct report {
    int64_t k; /* commit number within the round */
    int64_t end;
} report;

/* Batch boundaries depend only on the base offset (count = 1 + base % 3) and the log always
 * starts at 0, so the boundary before a boundary `b > 0` is b - 1 or b - 2. */
static int64_t prev_boundary(int64_t b)
{
    return (b % 3 == 1) ? b - 1 : b - 2;
}

/* The round's plan: commit 0 truncates `r % 4` batches off the end, writes the quorum state
 * and appends one batch; commit k >= 1 appends 1 + k % 3 batches (and rewrites the quorum
 * state every fifth commit). All batches of round r have epoch r + 1. */
static int64_t plan_truncate_point(int64_t end, int r)
{
    for (int i = 0; i < r % 4 && end > 0; i++)
        end = prev_boundary(end);
    return end;
}

static int64_t plan_end_after(int64_t end_before, int64_t k, int r)
{
    if (k == 0) {
        int64_t t = plan_truncate_point(end_before, r);
        return t + test_batch_count(t);
    }
    for (int64_t i = 0; i < 1 + k % 3; i++)
        end_before += test_batch_count(end_before);
    return end_before;
}

static kq_raft_qstate plan_qstate(int r)
{
    kq_raft_qstate qs = {.epoch = r + 1, .voted_id = r % 3, .leader_id = r % 3};
    return qs;
}

static void write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(20);
        c += w;
        n -= (size_t)w;
    }
}

/* Runs in the child; never returns. Exit codes name the step that failed. */
static void child_main(const char *dir, int r, int fd)
{
    kq_store *s = NULL;
    kq_store_recovered rec;
    char err[512];
    int32_t epoch = r + 1;
    kq_raft_qstate qs = plan_qstate(r);

    if (kq_store_open(dir, TEST_CLUSTER_ID, 1, &s, err, sizeof(err)) != 0)
        _exit(10);
    if (kq_store_recover(s, &rec) != 0)
        _exit(11);
    free(rec.epochs);
    int64_t end = rec.log_end_offset;
    for (int64_t k = 0;; k++) {
        if (end > MAX_OFFSETS - 16) {
            pause(); /* the parent kills us */
            continue;
        }
        if (kq_store_begin(s) != 0)
            _exit(12);
        int64_t want = plan_end_after(end, k, r);
        if (k == 0) {
            end = plan_truncate_point(end, r);
            if (kq_store_truncate(s, end) != 0 || kq_store_put_qstate(s, &qs) != 0)
                _exit(13);
        } else if (k % 5 == 0 && kq_store_put_qstate(s, &qs) != 0) {
            _exit(13);
        }
        while (end < want) {
            if (test_append(s, end, epoch) != 0)
                _exit(14);
            end += test_batch_count(end);
        }
        if (kq_store_commit(s) != 0)
            _exit(15);
        report rp = {k, end};
        write_all(fd, &rp, sizeof(rp));
    }
}

typedef struct verify_ctx {
    int64_t next;      /* expected next base offset */
    int32_t *epoch_at; /* epoch per base offset, filled in */
    int32_t last_epoch;
    int bad;
    char why[256];
} verify_ctx;

static int verify_batch(void *arg, int64_t base, int32_t epoch, int32_t count, uint32_t crc,
                        const uint8_t *rec, size_t len)
{
    verify_ctx *v = arg;
    if (base != v->next || base >= MAX_OFFSETS) {
        snprintf(v->why, sizeof(v->why), "batch at %" PRId64 ", expected %" PRId64, base, v->next);
        v->bad = 1;
        return 1;
    }
    if (!test_batch_ok(base, epoch, count, rec, len) || kq_crc32c(0, rec, len) != crc) {
        snprintf(v->why, sizeof(v->why), "batch at %" PRId64 " has the wrong content", base);
        v->bad = 1;
        return 1;
    }
    if (epoch < v->last_epoch) {
        snprintf(v->why, sizeof(v->why), "epoch goes back at %" PRId64, base);
        v->bad = 1;
        return 1;
    }
    v->epoch_at[base] = epoch;
    v->last_epoch = epoch;
    v->next = base + count;
    return 0;
}

/* Reads the whole log (in chunks, to exercise max_bytes) and checks it against `rec`. */
static void verify_log(kq_store *s, const kq_store_recovered *rec, int32_t *epoch_at)
{
    verify_ctx v = {0};
    v.epoch_at = epoch_at;
    while (v.next < rec->log_end_offset) {
        int64_t before = v.next;
        assert_int_equal(kq_store_read(s, v.next, rec->log_end_offset, 300, verify_batch, &v), 0);
        if (v.bad)
            fail_msg("%s", v.why);
        assert_true(v.next > before);
    }
    assert_int_equal(v.next, rec->log_end_offset);
    assert_int_equal(rec->log_start_offset, 0);
    assert_int_equal(rec->last_epoch, v.last_epoch);

    /* the epoch cache is exactly the epoch changes of the batches */
    size_t n = 0;
    int32_t prev = -1;
    for (int64_t b = 0; b < rec->log_end_offset; b += test_batch_count(b)) {
        if (epoch_at[b] != prev) {
            assert_true(n < rec->n_epochs);
            assert_int_equal(rec->epochs[n].epoch, epoch_at[b]);
            assert_int_equal(rec->epochs[n].start_offset, b);
            n++;
            prev = epoch_at[b];
        }
    }
    assert_int_equal(n, rec->n_epochs);
}

/* Reads reports until at least `target` arrived (or, with until_eof, until the child's end
 * of the pipe is closed). Returns the number of reports in `out`. */
static size_t read_reports(int fd, report *out, size_t cap, size_t have, size_t target,
                           int until_eof)
{
    char *p = (char *)out;
    size_t bytes = have * sizeof(report);
    while (until_eof || bytes / sizeof(report) < target) {
        struct pollfd pfd = {fd, POLLIN, 0};
        int prc = poll(&pfd, 1, REPORT_TIMEOUT_MS);
        if (prc < 0 && errno == EINTR)
            continue;
        if (prc <= 0)
            fail_msg("no progress report from the child for %d ms", REPORT_TIMEOUT_MS);
        assert_true(bytes < cap * sizeof(report));
        ssize_t r = read(fd, p + bytes, cap * sizeof(report) - bytes);
        if (r < 0 && errno == EINTR)
            continue;
        assert_true(r >= 0);
        if (r == 0)
            break;
        bytes += (size_t)r;
    }
    /* one report is one write(2) of less than PIPE_BUF bytes: never torn */
    assert_int_equal(bytes % sizeof(report), 0);
    return bytes / sizeof(report);
}

static uint64_t seed_from_env(void)
{
    const char *e = getenv("KQ_TEST_SEED");
    if (e != NULL && e[0] != '\0')
        return strtoull(e, NULL, 0);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
}

static void test_sigkill_during_commits(void **state)
{
    (void)state;
    char root[512], dir[600], err[512];
    kq_prng prng;
    uint64_t seed = seed_from_env();
    int32_t *prev_epoch_at = calloc(MAX_OFFSETS, sizeof(int32_t));
    int32_t *epoch_at = calloc(MAX_OFFSETS, sizeof(int32_t));
    report *reports = calloc(REPORT_CAP, sizeof(report));
    assert_non_null(prev_epoch_at);
    assert_non_null(epoch_at);
    assert_non_null(reports);
    kq_prng_seed(&prng, seed);
    print_message("KQ_TEST_SEED=%" PRIu64 "\n", seed);

    assert_int_equal(tmpdir_make(root, sizeof(root)), 0);
    snprintf(dir, sizeof(dir), "%s/meta", root);
    assert_int_equal(kq_store_format(dir, TEST_CLUSTER_ID, 1, NULL, err, sizeof(err)), 0);

    int64_t end = 0;     /* state before the round */
    int32_t q_epoch = 0; /* quorum-state epoch before the round */
    int32_t last_epoch = 0;
    int total_commits = 0;
    int in_flight_landed = 0; /* kills after a commit but before its report was read */
    for (int r = 0; r < ROUNDS; r++) {
        int pfd[2];
        assert_int_equal(pipe(pfd), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(pfd[0]);
            child_main(dir, r, pfd[1]);
        }
        close(pfd[1]);
        size_t target = (size_t)kq_prng_below(&prng, 12);
        size_t n = read_reports(pfd[0], reports, REPORT_CAP, 0, target, 0);
        usleep((useconds_t)kq_prng_below(&prng, 3000));
        assert_int_equal(kill(pid, SIGKILL), 0);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
            fail_msg("round %d: child did not run until killed (exit status %d)", r,
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        n = read_reports(pfd[0], reports, REPORT_CAP, n, 0, 1);
        close(pfd[0]);
        total_commits += (int)n;

        /* the two states the store may hold: last reported commit, or the one in flight */
        kq_raft_qstate qs = plan_qstate(r);
        int64_t cand_end[2];
        int32_t cand_q[2], cand_last[2];
        if (n == 0) {
            cand_end[0] = end;
            cand_q[0] = q_epoch;
            cand_last[0] = last_epoch;
            cand_end[1] = plan_end_after(end, 0, r);
        } else {
            /* the child did what the plan says */
            int64_t e = end;
            for (size_t i = 0; i < n; i++) {
                assert_int_equal(reports[i].k, (int64_t)i);
                e = plan_end_after(e, (int64_t)i, r);
                assert_int_equal(reports[i].end, e);
            }
            const report *last = &reports[n - 1];
            cand_end[0] = last->end;
            cand_q[0] = qs.epoch;
            cand_last[0] = r + 1;
            cand_end[1] = plan_end_after(last->end, last->k + 1, r);
        }
        cand_q[1] = qs.epoch;
        cand_last[1] = r + 1;

        kq_store *s = NULL;
        kq_store_recovered rec;
        if (r % 2 == 0)
            assert_int_equal(kq_store_open_readonly(dir, &s, err, sizeof(err)), 0);
        else
            assert_int_equal(kq_store_open(dir, TEST_CLUSTER_ID, 1, &s, err, sizeof(err)), 0);
        assert_int_equal(kq_store_recover(s, &rec), 0);
        int which = -1;
        for (int c = 0; c < 2; c++) {
            if (rec.log_end_offset == cand_end[c] && rec.qstate.epoch == cand_q[c] &&
                rec.last_epoch == cand_last[c])
                which = c;
        }
        if (which < 0)
            fail_msg("round %d: recovered end %" PRId64 " qstate epoch %" PRId32
                     " last epoch %" PRId32 " is neither the last acknowledged commit nor the "
                     "one in flight (end %" PRId64 " or %" PRId64 ")",
                     r, rec.log_end_offset, rec.qstate.epoch, rec.last_epoch, cand_end[0],
                     cand_end[1]);
        in_flight_landed += which == 1;
        if (rec.qstate.epoch == qs.epoch) {
            assert_int_equal(rec.qstate.voted_id, qs.voted_id);
            assert_int_equal(rec.qstate.leader_id, qs.leader_id);
        }

        memset(epoch_at, 0, MAX_OFFSETS * sizeof(int32_t));
        verify_log(s, &rec, epoch_at);
        /* below the round's truncation point nothing changed; above it all is this round's */
        int touched = rec.qstate.epoch == qs.epoch;
        int64_t keep = touched ? plan_truncate_point(end, r) : end;
        for (int64_t b = 0; b < rec.log_end_offset; b += test_batch_count(b)) {
            if (b < keep)
                assert_int_equal(epoch_at[b], prev_epoch_at[b]);
            else
                assert_int_equal(epoch_at[b], r + 1);
        }
        memcpy(prev_epoch_at, epoch_at, MAX_OFFSETS * sizeof(int32_t));
        end = rec.log_end_offset;
        q_epoch = rec.qstate.epoch;
        last_epoch = rec.last_epoch;
        free(rec.epochs);
        kq_store_close(s);
    }
    print_message(
        "%d rounds, %d acknowledged commits, %d unreported commits found durable, final log "
        "end %" PRId64 "\n",
        ROUNDS, total_commits, in_flight_landed, end);
    /* the kill points must have let some rounds commit, or the test checked little */
    assert_true(total_commits > 0);
    assert_true(end > 0);

    tmpdir_remove(root);
    free(prev_epoch_at);
    free(epoch_at);
    free(reports);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigkill_during_commits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
