/*
 * kq_log: logfmt lines on stderr, one write(2) per line.
 */
#include "kq/log.h"
#include "kq/util.h"

#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX 4096

static _Atomic int32_t g_node_id = -1;
static _Atomic int g_min_level = KQ_LOG_INFO;
static _Atomic int g_journal = -1; /* -1 not yet checked, 0 plain, 1 journald stream */

static const char *const level_names[] = {"debug", "info", "warn", "error"};
static const char *const level_prefix[] = {"<7>", "<6>", "<4>", "<3>"};

/*
 * systemd sets JOURNAL_STREAM=<dev>:<inode> for a service whose stderr is the journal. As
 * systemd.exec(5) advises, trust it only if it still describes our stderr (a child whose
 * stderr was redirected inherits the variable).
 */
static int journal_check(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    char tail;

    if (js == NULL || sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) != 2)
        return 0;
    if (fstat(STDERR_FILENO, &st) != 0)
        return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void kq_log_init(int32_t node_id, kq_log_level min_level)
{
    atomic_store(&g_node_id, node_id);
    kq_log_set_level(min_level);
    atomic_store(&g_journal, journal_check());
}

void kq_log_set_level(kq_log_level min_level)
{
    int l = (int)min_level;
    if (l < KQ_LOG_DEBUG)
        l = KQ_LOG_DEBUG;
    if (l > KQ_LOG_ERROR)
        l = KQ_LOG_ERROR;
    atomic_store(&g_min_level, l);
}

int kq_log_level_parse(const char *s)
{
    if (s == NULL)
        return -1;
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, level_names[i]) == 0)
            return i;
    }
    return -1;
}

typedef struct line_buf {
    char b[LOG_LINE_MAX];
    size_t len;
    int truncated;
} line_buf;

/* Room is kept for the final '\n'. */
#define LINE_ROOM(lb) (LOG_LINE_MAX - 1 - (lb)->len)

static void put_str(line_buf *lb, const char *s)
{
    size_t n = strlen(s);
    if (n > LINE_ROOM(lb)) {
        n = LINE_ROOM(lb);
        lb->truncated = 1;
    }
    memcpy(lb->b + lb->len, s, n);
    lb->len += n;
}

__attribute__((format(printf, 2, 0))) static void put_vfmt(line_buf *lb, const char *fmt,
                                                           va_list ap)
{
    size_t room = LINE_ROOM(lb) + 1; /* vsnprintf writes a NUL we then overwrite */
    int n = vsnprintf(lb->b + lb->len, room, fmt, ap);
    if (n < 0)
        return;
    if ((size_t)n >= room) {
        lb->len += room - 1;
        lb->truncated = 1;
    } else {
        lb->len += (size_t)n;
    }
}

__attribute__((format(printf, 2, 3))) static void put_fmt(line_buf *lb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    put_vfmt(lb, fmt, ap);
    va_end(ap);
}

/* The message as a logfmt quoted value: \" \\ \n \r \t escaped, other control bytes \xNN. */
static void put_quoted(line_buf *lb, const char *s)
{
    put_str(lb, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[5];
        switch (*p) {
        case '"':
            put_str(lb, "\\\"");
            break;
        case '\\':
            put_str(lb, "\\\\");
            break;
        case '\n':
            put_str(lb, "\\n");
            break;
        case '\r':
            put_str(lb, "\\r");
            break;
        case '\t':
            put_str(lb, "\\t");
            break;
        default:
            if (*p < 0x20 || *p == 0x7f) {
                snprintf(esc, sizeof(esc), "\\x%02x", *p);
            } else {
                esc[0] = (char)*p;
                esc[1] = '\0';
            }
            put_str(lb, esc);
        }
    }
    put_str(lb, "\"");
}

static void put_timestamp(line_buf *lb)
{
    struct timespec ts;
    struct tm tm;
    char buf[32];

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    put_fmt(lb, "ts=%s.%03ldZ ", buf, ts.tv_nsec / 1000000L);
}

static void write_all(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return; /* nowhere left to report a logging failure */
        }
        p += w;
        n -= (size_t)w;
    }
}

void kq_logf(kq_log_level level, const char *component, const char *msg, const char *fields_fmt,
             ...)
{
    line_buf lb;
    int lvl = (int)level;
    int journal;

    if (lvl < KQ_LOG_DEBUG)
        lvl = KQ_LOG_DEBUG;
    if (lvl > KQ_LOG_ERROR)
        lvl = KQ_LOG_ERROR;
    if (lvl < atomic_load(&g_min_level))
        return;
    journal = atomic_load(&g_journal);
    if (journal < 0) {
        journal = journal_check();
        atomic_store(&g_journal, journal);
    }

    lb.len = 0;
    lb.truncated = 0;
    if (journal)
        put_str(&lb, level_prefix[lvl]);
    else
        put_timestamp(&lb);
    put_fmt(&lb, "level=%s", level_names[lvl]);
    int32_t node = atomic_load(&g_node_id);
    if (node >= 0)
        put_fmt(&lb, " node=%" PRId32, node);
    if (component != NULL && component[0] != '\0')
        put_fmt(&lb, " component=%s", component);
    put_str(&lb, " msg=");
    put_quoted(&lb, msg ? msg : "");
    if (fields_fmt != NULL && fields_fmt[0] != '\0') {
        va_list ap;
        put_str(&lb, " ");
        size_t start = lb.len;
        va_start(ap, fields_fmt);
        put_vfmt(&lb, fields_fmt, ap);
        va_end(ap);
        /* verbatim, except that a line break must not split the event */
        for (size_t i = start; i < lb.len; i++) {
            if (lb.b[i] == '\n' || lb.b[i] == '\r')
                lb.b[i] = ' ';
        }
    }
    if (lb.truncated) {
        /* make the cut visible and keep the line parseable */
        static const char mark[] = " truncated=true";
        if (lb.len > LOG_LINE_MAX - 1 - (sizeof(mark) - 1))
            lb.len = LOG_LINE_MAX - 1 - (sizeof(mark) - 1);
        memcpy(lb.b + lb.len, mark, sizeof(mark) - 1);
        lb.len += sizeof(mark) - 1;
    }
    lb.b[lb.len++] = '\n';
    write_all(lb.b, lb.len);
}

#define REFUSAL_PEERS 64

void kq_log_refusal(const char *component, const char *principal, const char *detail)
{
    kq_log_refused(component, "refused a request: its sender may not do that", principal, detail);
}

void kq_log_refused(const char *component, const char *message, const char *principal,
                    const char *detail)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static struct {
        const char *message; /* a literal: one line a minute per (message, principal) */
        char principal[600];
        uint64_t last_ms, skipped;
    } peers[REFUSAL_PEERS];
    uint64_t now = kq_now_ms(), skipped = 0;
    size_t slot = 0;
    bool log_it = true, same = false;

    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < REFUSAL_PEERS && !same; i++) {
        same = peers[i].message == message &&
               !strncmp(peers[i].principal, principal, sizeof peers[i].principal - 1);
        if (same || peers[i].last_ms < peers[slot].last_ms)
            slot = i; /* else the least recently logged one is reused */
    }
    if (same && peers[slot].last_ms && now - peers[slot].last_ms < 60000) {
        peers[slot].skipped++;
        log_it = false;
    } else {
        if (!same)
            peers[slot].skipped = 0;
        peers[slot].message = message;
        snprintf(peers[slot].principal, sizeof peers[slot].principal, "%s", principal);
        skipped = peers[slot].skipped;
        peers[slot].skipped = 0;
        peers[slot].last_ms = now;
    }
    pthread_mutex_unlock(&mu);
    if (log_it)
        KQ_WARN(component, message, "principal=\"%s\" detail=\"%s\" refused_since_last_line=%llu",
                principal, detail, (unsigned long long)skipped);
}
