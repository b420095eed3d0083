/*
 * Crash safety of kq_plog: a fork()ed child opens the broker directory and commits
 * transactions that touch several partitions each (appends, truncations, HW checkpoints,
 * partition epochs, delete and re-create) until the parent SIGKILLs it at a random moment.
 * The child reports every successful commit through a pipe. Both sides drive the same
 * deterministic plan through one function (plan_commit), the parent only on an in-memory
 * model. After each kill the parent reopens the directory and checks that every partition is
 * exactly the model after the last reported commit, or after the one in flight: partition
 * set, log start, LEO, HW, partition epoch, epoch cache and every batch's bytes and CRC.
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
#include "kq/plog.h"
#include "kq/util.h"
#include "plog_test_util.h"

#define ROUNDS 20
#define NPART 12
#define MAXB 6000 /* batches per partition the model holds; the child stops before */
#define REPORT_TIMEOUT_MS 60000
#define REPORT_CAP 100000

typedef struct mpart {
    int exists;
    int64_t log_start, hw;
    int32_t pepoch;
    int n;
    int64_t base[MAXB];
    int32_t epoch[MAXB];
    int32_t count[MAXB];
} mpart;

typedef struct model {
    mpart p[NPART];
} model;

static int64_t m_leo(const mpart *mp)
{
    return mp->n ? mp->base[mp->n - 1] + mp->count[mp->n - 1] : mp->log_start;
}

static int model_full(const model *m)
{
    for (int j = 0; j < NPART; j++)
        if (m->p[j].n > MAXB - 64)
            return 1;
    return 0;
}

/* The child runs every step on the store (p != NULL) and exits with `code` if one fails. */
#define DO(call, code)                                                                             \
    do {                                                                                           \
        if (p != NULL && (call) != 0)                                                              \
            _exit(code);                                                                           \
    } while (0)

/* Commit k of round r, applied to the model and (in the child) to the store. All batches of
 * round r have leader epoch r + 1. */
static void plan_commit(model *m, kq_plog *p, int r, int64_t k)
{
    kq_prng g;
    kq_prng_seed(&g, (uint64_t)r * 1000003u + (uint64_t)k + 1);
    int32_t epoch = r + 1;
    if (r == 0 && k == 0) {
        for (int j = 0; j < NPART; j++) {
            kq_plog_tp tp = test_tp(1, j);
            mpart *mp = &m->p[j];
            memset(mp, 0, sizeof(*mp));
            mp->exists = 1;
            mp->log_start = mp->hw = 10 * j;
            DO(kq_plog_create_partition(p, &tp, 0, mp->log_start), 30);
        }
    }
    if (k == 0 && r > 0) {
        /* a follower's truncation at the start of the round, and a new partition epoch */
        int j = r % NPART;
        kq_plog_tp tp = test_tp(1, j);
        mpart *mp = &m->p[j];
        int keep = mp->n - (int)kq_prng_below(&g, 4);
        if (keep < 0)
            keep = 0;
        int64_t to = keep < mp->n ? mp->base[keep] : m_leo(mp);
        DO(kq_plog_truncate(p, &tp, to), 31);
        mp->n = keep;
        if (mp->hw > to)
            mp->hw = to;
        mp->pepoch = r;
        DO(kq_plog_set_partition_epoch(p, &tp, r), 32);
        if (r % 5 == 0) {
            /* delete and re-create another partition, starting where it ended */
            int d = (r + 5) % NPART;
            kq_plog_tp dtp = test_tp(1, d);
            mpart *dp = &m->p[d];
            int64_t start = m_leo(dp);
            DO(kq_plog_delete_partition(p, &dtp), 33);
            DO(kq_plog_create_partition(p, &dtp, r, start), 34);
            dp->n = 0;
            dp->log_start = dp->hw = start;
            dp->pepoch = r;
        }
    }
    int parts = 1 + (int)kq_prng_below(&g, 4);
    for (int i = 0; i < parts; i++) {
        int j = (int)kq_prng_below(&g, NPART);
        kq_plog_tp tp = test_tp(1, j);
        mpart *mp = &m->p[j];
        int nb = 1 + (int)kq_prng_below(&g, 3);
        for (int b = 0; b < nb; b++) {
            int64_t base = m_leo(mp);
            int32_t count = 1 + (int32_t)kq_prng_below(&g, 4);
            DO(plog_test_append(p, &tp, base, epoch, count), 35);
            mp->base[mp->n] = base;
            mp->epoch[mp->n] = epoch;
            mp->count[mp->n] = count;
            mp->n++;
        }
        if (kq_prng_below(&g, 2) == 0) {
            int64_t leo = m_leo(mp);
            int64_t hw =
                mp->log_start + (int64_t)kq_prng_below(&g, (uint64_t)(leo - mp->log_start + 1));
            DO(kq_plog_set_hw(p, &tp, hw), 36);
            mp->hw = hw;
        }
    }
    if (k % 7 == 6) {
        /* a truncation in the middle of the round */
        int j = (int)kq_prng_below(&g, NPART);
        kq_plog_tp tp = test_tp(1, j);
        mpart *mp = &m->p[j];
        if (mp->n > 0) {
            int keep = (int)kq_prng_below(&g, (uint64_t)mp->n);
            DO(kq_plog_truncate(p, &tp, mp->base[keep]), 37);
            if (mp->hw > mp->base[keep])
                mp->hw = mp->base[keep];
            mp->n = keep;
        }
    }
}

static void write_all(int fd, const void *buf, size_t n)
{
    const char *c = buf;
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
static void child_main(const char *dir, model *m, int r, int fd)
{
    kq_plog *p = NULL;
    char err[512];
    if (kq_plog_open(dir, TEST_CLUSTER_ID, 1, &p, err, sizeof(err)) != 0)
        _exit(10);
    for (int64_t k = 0;; k++) {
        if (model_full(m)) {
            pause(); /* the parent kills us */
            continue;
        }
        if (kq_plog_begin(p) != 0)
            _exit(12);
        plan_commit(m, p, r, k);
        if (kq_plog_commit(p) != 0)
            _exit(15);
        write_all(fd, &k, sizeof(k));
    }
}

typedef struct vctx {
    const mpart *mp;
    kq_plog_tp tp;
    int i; /* next expected batch index */
    int bad;
} vctx;

static int verify_cb(void *arg, const kq_plog_batch *b)
{
    vctx *v = arg;
    const mpart *mp = v->mp;
    if (v->i >= mp->n ||
        !plog_test_batch_ok(&v->tp, b, mp->base[v->i], mp->epoch[v->i], mp->count[v->i])) {
        v->bad = 1;
        return 1;
    }
    v->i++;
    return 0;
}

/* 0 if the store holds exactly the model, else 1 with the reason in why. */
static int compare(kq_plog *p, const model *m, char *why, size_t whylen)
{
    kq_plog_tp *tps = NULL;
    size_t n = 0;
    int ret = 1;
    if (kq_plog_list(p, &tps, &n) != 0 || n != NPART) {
        snprintf(why, whylen, "partition list has %zu entries", n);
        goto out;
    }
    for (int j = 0; j < NPART; j++) {
        const mpart *mp = &m->p[j];
        kq_plog_tp tp = test_tp(1, j);
        kq_plog_state st;
        if (tps[j].partition != j || kq_plog_state_of(p, &tp, &st) != 0) {
            snprintf(why, whylen, "partition %d missing", j);
            goto out;
        }
        int32_t last = -1;
        size_t nent = 0;
        for (int i = 0; i < mp->n; i++) {
            if (mp->epoch[i] != last)
                nent++;
            last = mp->epoch[i];
        }
        if (st.log_start_offset != mp->log_start || st.log_end_offset != m_leo(mp) ||
            st.high_watermark != mp->hw || st.partition_epoch != mp->pepoch ||
            st.last_epoch != last) {
            snprintf(why, whylen,
                     "partition %d: start %" PRId64 " leo %" PRId64 " hw %" PRId64
                     " pepoch %" PRId32 " last epoch %" PRId32 ", model %" PRId64 " %" PRId64
                     " %" PRId64 " %" PRId32 " %" PRId32,
                     j, st.log_start_offset, st.log_end_offset, st.high_watermark,
                     st.partition_epoch, st.last_epoch, mp->log_start, m_leo(mp), mp->hw,
                     mp->pepoch, last);
            goto out;
        }
        /* the epoch cache is exactly the epoch changes of the batches */
        kq_epoch_entry *eps = NULL;
        size_t ne = 0;
        if (kq_plog_epochs(p, &tp, &eps, &ne) != 0 || ne != nent) {
            free(eps);
            snprintf(why, whylen, "partition %d: %zu epoch entries, model %zu", j, ne, nent);
            goto out;
        }
        last = -1;
        size_t e = 0;
        for (int i = 0; i < mp->n; i++) {
            if (mp->epoch[i] != last) {
                if (eps[e].epoch != mp->epoch[i] || eps[e].start_offset != mp->base[i]) {
                    free(eps);
                    snprintf(why, whylen, "partition %d: epoch entry %zu differs", j, e);
                    goto out;
                }
                e++;
            }
            last = mp->epoch[i];
        }
        free(eps);
        /* every batch, in chunks */
        vctx v = {mp, tp, 0, 0};
        while (v.i < mp->n) {
            int before = v.i;
            int rc = kq_plog_read(p, &tp, mp->base[v.i], INT64_MAX, 500, verify_cb, &v);
            if (rc != 0 || v.bad || v.i == before) {
                snprintf(why, whylen, "partition %d: batch %d (rc %d) differs", j, v.i, rc);
                goto out;
            }
        }
    }
    ret = 0;
out:
    free(tps);
    return ret;
}

static size_t read_reports(int fd, int64_t *out, size_t cap, size_t have, size_t target,
                           int until_eof)
{
    char *c = (char *)out;
    size_t bytes = have * sizeof(int64_t);
    while (until_eof || bytes / sizeof(int64_t) < target) {
        struct pollfd pfd = {fd, POLLIN, 0};
        int prc = poll(&pfd, 1, REPORT_TIMEOUT_MS);
        if (prc < 0 && errno == EINTR)
            continue;
        if (prc <= 0)
            fail_msg("no progress report from the child for %d ms", REPORT_TIMEOUT_MS);
        assert_true(bytes < cap * sizeof(int64_t));
        ssize_t r = read(fd, c + bytes, cap * sizeof(int64_t) - bytes);
        if (r < 0 && errno == EINTR)
            continue;
        assert_true(r >= 0);
        if (r == 0)
            break;
        bytes += (size_t)r;
    }
    assert_int_equal(bytes % sizeof(int64_t), 0);
    return bytes / sizeof(int64_t);
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
    char root[512], dir[600], err[512], why[512];
    kq_prng prng;
    uint64_t seed = seed_from_env();
    model *base = calloc(1, sizeof(model)), *cand[2];
    cand[0] = calloc(1, sizeof(model));
    cand[1] = calloc(1, sizeof(model));
    int64_t *reports = calloc(REPORT_CAP, sizeof(int64_t));
    assert_non_null(base);
    assert_non_null(cand[0]);
    assert_non_null(cand[1]);
    assert_non_null(reports);
    kq_prng_seed(&prng, seed);
    print_message("KQ_TEST_SEED=%" PRIu64 "\n", seed);

    assert_int_equal(tmpdir_make(root, sizeof(root)), 0);
    snprintf(dir, sizeof(dir), "%s/data", root);
    assert_int_equal(kq_plog_format(dir, TEST_CLUSTER_ID, 1, NULL, err, sizeof(err)), 0);

    int total_commits = 0, in_flight_landed = 0, created = 0;
    for (int r = 0; r < ROUNDS; r++) {
        int pfd[2];
        assert_int_equal(pipe(pfd), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(pfd[0]);
            child_main(dir, base, r, pfd[1]);
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

        /* the two states the store may hold: after the last reported commit, or the next */
        memcpy(cand[0], base, sizeof(model));
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(reports[i], (int64_t)i);
            plan_commit(cand[0], NULL, r, (int64_t)i);
        }
        memcpy(cand[1], cand[0], sizeof(model));
        int can_progress = !model_full(cand[1]);
        if (can_progress)
            plan_commit(cand[1], NULL, r, (int64_t)n);

        kq_plog *p = NULL;
        assert_int_equal(kq_plog_open(dir, TEST_CLUSTER_ID, 1, &p, err, sizeof(err)), 0);
        if (r == 0 && n == 0 && !can_progress)
            fail_msg("no progress possible");
        int which = -1;
        char why0[512] = "";
        if (!(r == 0 && n == 0) && compare(p, cand[0], why0, sizeof(why0)) == 0)
            which = 0;
        else if (can_progress && compare(p, cand[1], why, sizeof(why)) == 0)
            which = 1;
        if (which < 0) {
            if (r == 0 && n == 0) {
                /* killed before the first commit: the directory has no partitions at all */
                kq_plog_tp *tps = NULL;
                size_t np = 0;
                assert_int_equal(kq_plog_list(p, &tps, &np), 0);
                free(tps);
                if (np == 0) {
                    kq_plog_close(p);
                    r--; /* run round 0 again */
                    continue;
                }
            }
            fail_msg("round %d after %zu reported commits: store matches neither the last "
                     "acknowledged commit (%s) nor the one in flight (%s)",
                     r, n, why0, why);
        }
        in_flight_landed += which == 1;
        created = 1;
        memcpy(base, cand[which], sizeof(model));
        kq_plog_close(p);
    }
    print_message("%d rounds, %d acknowledged commits, %d unreported commits found durable\n",
                  ROUNDS, total_commits, in_flight_landed);
    assert_true(created);
    assert_true(total_commits > 0);

    tmpdir_remove(root);
    free(base);
    free(cand[0]);
    free(cand[1]);
    free(reports);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigkill_during_commits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
