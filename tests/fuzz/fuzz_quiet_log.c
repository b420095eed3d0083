/*
 * kq_log for the fuzz targets that feed damaged data to code that logs every problem it finds
 * (the store and partition-log readers, the config parser): linked as an object before
 * kq_util, it replaces common/util/log.c so a run does not spend its time writing log lines.
 * Set KQ_FUZZ_LOG=1 to see them (message and fields, unformatted timestamps omitted).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/log.h"

static int verbose = -1;

void kq_log_init(int32_t node_id, kq_log_level min_level)
{
    (void)node_id;
    (void)min_level;
}

void kq_log_set_level(kq_log_level min_level)
{
    (void)min_level;
}

int kq_log_level_parse(const char *s)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};

    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

void kq_logf(kq_log_level level, const char *component, const char *msg, const char *fields_fmt,
             ...)
{
    va_list ap;

    if (verbose < 0)
        verbose = getenv("KQ_FUZZ_LOG") != NULL;
    if (!verbose)
        return;
    fprintf(stderr, "level=%d component=%s msg=\"%s\" ", (int)level, component ? component : "",
            msg ? msg : "");
    if (fields_fmt) {
        va_start(ap, fields_fmt);
        vfprintf(stderr, fields_fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
}
