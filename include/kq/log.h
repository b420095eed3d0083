/*
 * kq_log: logfmt lines on stderr, one event per line:
 *   ts=2026-11-29T14:00:00.123Z level=info node=1 component=raft msg="became leader" epoch=7
 * When $JOURNAL_STREAM is set (systemd), the line starts with a syslog prefix (<3>, <4>, <6>,
 * <7>) and drops ts=. Thread-safe (one write(2) per line).
 */
#ifndef KQ_LOG_H
#define KQ_LOG_H

#include <stdint.h>

typedef enum kq_log_level {
    KQ_LOG_DEBUG = 0,
    KQ_LOG_INFO = 1,
    KQ_LOG_WARN = 2,
    KQ_LOG_ERROR = 3,
} kq_log_level;

/* Process-wide settings: node id (-1 omits node=), minimum level. */
void kq_log_init(int32_t node_id, kq_log_level min_level);
void kq_log_set_level(kq_log_level min_level);
/* Parse "debug|info|warn|error"; returns -1 if unknown. */
int kq_log_level_parse(const char *s);

/* fmt is the message ("became leader"); extra logfmt fields follow as "key=value" pairs
 * written by the caller in `fields_fmt` (may be NULL), e.g.
 *   kq_logf(KQ_LOG_INFO, "raft", "became leader", "epoch=%d leader=%d", e, id);
 * The message is quoted and escaped; the fields are appended verbatim. */
void kq_logf(kq_log_level level, const char *component, const char *msg, const char *fields_fmt,
             ...) __attribute__((format(printf, 4, 5)));

#define KQ_DEBUG(comp, msg, ...) kq_logf(KQ_LOG_DEBUG, comp, msg, __VA_ARGS__)
#define KQ_INFO(comp, msg, ...) kq_logf(KQ_LOG_INFO, comp, msg, __VA_ARGS__)
#define KQ_WARN(comp, msg, ...) kq_logf(KQ_LOG_WARN, comp, msg, __VA_ARGS__)
#define KQ_ERROR(comp, msg, ...) kq_logf(KQ_LOG_ERROR, comp, msg, __VA_ARGS__)

/* Logs a request refused for who sent it (CLUSTER_AUTHORIZATION_FAILED) under component, at
 * most once a minute per principal (the lines skipped meanwhile are counted in the next).
 * Thread-safe. */
void kq_log_refusal(const char *component, const char *principal, const char *detail);
/* The same with another message: a string literal (lines are limited per message and
 * principal). */
void kq_log_refused(const char *component, const char *message, const char *principal,
                    const char *detail);

#endif
