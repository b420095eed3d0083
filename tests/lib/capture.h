/*
 * capture: a FILE* that collects what a printer writes, for tests that compare output text
 * (the kq tool's formatters). Include after <cmocka.h>.
 *
 * Ownership: cap_open makes c own a memstream and its buffer; cap_text's pointer stays valid
 * until the next write or cap_close, which frees both.
 */
#ifndef KQ_TEST_CAPTURE_H
#define KQ_TEST_CAPTURE_H

#include <stdio.h>
#include <stdlib.h>

typedef struct capture {
    FILE *f;
    char *buf;
    size_t len;
} capture;

static inline void cap_open(capture *c)
{
    c->buf = NULL;
    c->len = 0;
    c->f = open_memstream(&c->buf, &c->len);
    assert_non_null(c->f);
}

/* What was written so far, NUL-terminated. */
static inline const char *cap_text(capture *c)
{
    fflush(c->f);
    return c->buf;
}

static inline void cap_close(capture *c)
{
    fclose(c->f);
    free(c->buf);
}

#endif
