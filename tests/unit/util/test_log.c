/* kq_log: logfmt line format, escaping, level filtering, journald prefix; stderr is captured
 * through a pipe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kq/log.h"

typedef void (*emit_fn)(void *arg);

static char captured[2 * 1024 * 1024];

typedef struct reader {
    int fd;
    size_t len;
} reader;

/* Drains the pipe while the test writes, so more than a pipe buffer can be captured. */
static void *read_all(void *arg)
{
    reader *r = arg;
    for (;;) {
        ssize_t n = read(r->fd, captured + r->len, sizeof(captured) - 1 - r->len);
        if (n <= 0)
            break;
        r->len += (size_t)n;
    }
    return NULL;
}

/* Run fn with stderr redirected into a pipe; returns what it wrote (NUL-terminated). */
static const char *capture(emit_fn fn, void *arg)
{
    int p[2];
    pthread_t th;
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(pipe(p), 0);
    reader r = {p[0], 0};
    assert_int_equal(pthread_create(&th, NULL, read_all, &r), 0);
    assert_true(dup2(p[1], STDERR_FILENO) >= 0);
    close(p[1]);
    fn(arg);
    assert_true(dup2(saved, STDERR_FILENO) >= 0); /* closes the last write end */
    close(saved);
    pthread_join(th, NULL);
    close(p[0]);
    captured[r.len] = '\0';
    return captured;
}

static void assert_matches(const char *s, const char *re)
{
    regex_t rx;
    assert_int_equal(regcomp(&rx, re, REG_EXTENDED | REG_NOSUB), 0);
    int m = regexec(&rx, s, 0, NULL, 0);
    regfree(&rx);
    if (m != 0)
        fail_msg("'%s' does not match /%s/", s, re);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void emit_basic(void *arg)
{
    unsetenv("JOURNAL_STREAM");
    kq_log_init(1, KQ_LOG_INFO);
    kq_logf(KQ_LOG_INFO, "raft", "became leader", "epoch=%d leader=%d", 7, 1);
}

static void test_line_format(void **state)
{
    const char *out = capture(emit_basic, NULL);
    assert_matches(out, "^ts=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
                        "level=info node=1 component=raft msg=\"became leader\" epoch=7 "
                        "leader=1\n$");
    /* the timestamp is now, in UTC */
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    assert_non_null(strptime(out + 3, "%Y-%m-%dT%H:%M:%S", &tm));
    time_t logged = timegm(&tm);
    struct timespec ts;
    /* The precise clock: time() reads the kernel's coarse one, which may still be in the
     * second before the line's timestamp for a few milliseconds. */
    assert_int_equal(clock_gettime(CLOCK_REALTIME, &ts), 0);
    time_t now = ts.tv_sec;
    assert_true(logged <= now && logged > now - 3600);
}

static void emit_variants(void *arg)
{
    unsetenv("JOURNAL_STREAM");
    kq_log_init(-1, KQ_LOG_DEBUG);
    kq_logf(KQ_LOG_DEBUG, "store", "opened", NULL);
    kq_logf(KQ_LOG_WARN, NULL, "no component", NULL);
    kq_logf(KQ_LOG_ERROR, "rpc", "bad \"peer\" said\nC:\\path\there\r", "peer=%s", "10.0.0.1");
    KQ_INFO("config", "macro form", "key=%s", "node.id");
}

static void test_optional_parts_and_escaping(void **state)
{
    const char *out = capture(emit_variants, NULL);
    assert_int_equal(count_lines(out), 4);
    char *copy = strdup(out);
    char *save = NULL;
    char *l1 = strtok_r(copy, "\n", &save);
    char *l2 = strtok_r(NULL, "\n", &save);
    char *l3 = strtok_r(NULL, "\n", &save);
    char *l4 = strtok_r(NULL, "\n", &save);
    assert_non_null(l4);
    /* node -1 omits node=; NULL fields add nothing */
    assert_matches(l1, "^ts=[^ ]+ level=debug component=store msg=\"opened\"$");
    /* NULL component omits component= */
    assert_matches(l2, "^ts=[^ ]+ level=warn msg=\"no component\"$");
    assert_non_null(
        strstr(l3, " level=error component=rpc msg=\"bad \\\"peer\\\" said\\nC:\\\\path\\there\\r\""
                   " peer=10.0.0.1"));
    assert_matches(l4, "^ts=[^ ]+ level=info component=config msg=\"macro form\" key=node.id$");
    free(copy);
}

static void emit_filtered(void *arg)
{
    unsetenv("JOURNAL_STREAM");
    kq_log_init(3, KQ_LOG_WARN);
    kq_logf(KQ_LOG_DEBUG, "x", "debug dropped", NULL);
    kq_logf(KQ_LOG_INFO, "x", "info dropped", NULL);
    kq_logf(KQ_LOG_WARN, "x", "warn kept", NULL);
    kq_logf(KQ_LOG_ERROR, "x", "error kept", NULL);
    kq_log_set_level(KQ_LOG_ERROR);
    kq_logf(KQ_LOG_WARN, "x", "warn dropped", NULL);
    kq_logf(KQ_LOG_ERROR, "x", "error kept 2", NULL);
    kq_log_set_level(KQ_LOG_DEBUG);
    kq_logf(KQ_LOG_DEBUG, "x", "debug kept", NULL);
}

static void test_level_filtering(void **state)
{
    const char *out = capture(emit_filtered, NULL);
    assert_int_equal(count_lines(out), 4);
    assert_null(strstr(out, "dropped"));
    assert_non_null(strstr(out, "level=warn node=3 component=x msg=\"warn kept\""));
    assert_non_null(strstr(out, "level=error node=3 component=x msg=\"error kept\""));
    assert_non_null(strstr(out, "msg=\"error kept 2\""));
    assert_non_null(strstr(out, "level=debug node=3 component=x msg=\"debug kept\""));
}

static void test_level_parse(void **state)
{
    assert_int_equal(kq_log_level_parse("debug"), KQ_LOG_DEBUG);
    assert_int_equal(kq_log_level_parse("info"), KQ_LOG_INFO);
    assert_int_equal(kq_log_level_parse("warn"), KQ_LOG_WARN);
    assert_int_equal(kq_log_level_parse("ERROR"), KQ_LOG_ERROR);
    assert_int_equal(kq_log_level_parse("verbose"), -1);
    assert_int_equal(kq_log_level_parse(""), -1);
    assert_int_equal(kq_log_level_parse(NULL), -1);
}

static void emit_journal(void *arg)
{
    struct stat st;
    char js[64];
    assert_int_equal(fstat(STDERR_FILENO, &st), 0);
    snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", js, 1);
    kq_log_init(2, KQ_LOG_DEBUG);
    kq_logf(KQ_LOG_ERROR, "a", "e", NULL);
    kq_logf(KQ_LOG_WARN, "a", "w", NULL);
    kq_logf(KQ_LOG_INFO, "a", "i", "k=v");
    kq_logf(KQ_LOG_DEBUG, "a", "d", NULL);
    /* a JOURNAL_STREAM that names another file (stderr was redirected): no prefix */
    setenv("JOURNAL_STREAM", "1:1", 1);
    kq_log_init(2, KQ_LOG_DEBUG);
    kq_logf(KQ_LOG_INFO, "a", "plain", NULL);
    unsetenv("JOURNAL_STREAM");
}

static void test_journal_prefix(void **state)
{
    const char *out = capture(emit_journal, NULL);
    assert_matches(out, "^<3>level=error node=2 component=a msg=\"e\"\n"
                        "<4>level=warn node=2 component=a msg=\"w\"\n"
                        "<6>level=info node=2 component=a msg=\"i\" k=v\n"
                        "<7>level=debug node=2 component=a msg=\"d\"\n"
                        "ts=[^ ]+ level=info node=2 component=a msg=\"plain\"\n$");
}

static void emit_long(void *arg)
{
    static char big[10000];
    memset(big, 'x', sizeof(big) - 1);
    unsetenv("JOURNAL_STREAM");
    kq_log_init(1, KQ_LOG_INFO);
    kq_logf(KQ_LOG_INFO, "big", big, "after=1");
    kq_logf(KQ_LOG_INFO, "big", "short", "data=%s", big);
    kq_logf(KQ_LOG_INFO, "f", "fields with a line break", "a=1\nb=2");
}

static void test_long_lines_are_truncated_not_split(void **state)
{
    const char *out = capture(emit_long, NULL);
    assert_int_equal(count_lines(out), 3);
    const char *l2 = strchr(out, '\n') + 1;
    const char *l3 = strchr(l2, '\n') + 1;
    assert_true(l2 - out <= 4096);
    assert_true(l3 - l2 <= 4096);
    assert_non_null(strstr(out, " truncated=true\n"));
    assert_matches(l3, "msg=\"fields with a line break\" a=1 b=2\n$");
}

#define THREADS 4
#define PER_THREAD 500

static void *log_thread(void *arg)
{
    for (int i = 0; i < PER_THREAD; i++)
        kq_logf(KQ_LOG_INFO, "t", "concurrent line", "thread=%d i=%d pad=%s", (int)(intptr_t)arg, i,
                "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy");
    return NULL;
}

static void emit_threads(void *arg)
{
    pthread_t th[THREADS];
    unsetenv("JOURNAL_STREAM");
    kq_log_init(1, KQ_LOG_INFO);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, log_thread, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
}

static void test_concurrent_lines_do_not_interleave(void **state)
{
    const char *out = capture(emit_threads, NULL);
    assert_int_equal(count_lines(out), THREADS * PER_THREAD);
    char *copy = strdup(out);
    char *save = NULL;
    int n = 0;
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        assert_matches(l, "^ts=[^ ]+ level=info node=1 component=t msg=\"concurrent line\" "
                          "thread=[0-9] i=[0-9]+ pad=y{52}$");
        n++;
    }
    assert_int_equal(n, THREADS * PER_THREAD);
    free(copy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_format),
        cmocka_unit_test(test_optional_parts_and_escaping),
        cmocka_unit_test(test_level_filtering),
        cmocka_unit_test(test_level_parse),
        cmocka_unit_test(test_journal_prefix),
        cmocka_unit_test(test_long_lines_are_truncated_not_split),
        cmocka_unit_test(test_concurrent_lines_do_not_interleave),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
