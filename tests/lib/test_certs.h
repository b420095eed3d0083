/*
 * Certificates for tests of TLS (header-only): a private CA and keystores made by
 * deploy/tls/make-certs.sh in a fresh temporary directory, plus a second CA ("other/") whose
 * certificates the first does not trust.
 *
 * Ownership: the directory belongs to the test; tc_remove deletes it. Paths returned by
 * tc_path live in a ring of eight static buffers.
 */
#ifndef KQ_TEST_CERTS_H
#define KQ_TEST_CERTS_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* Runs a shell command built from fmt; returns its exit status (0 on success). */
static inline int tc_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int tc_sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}

/* Makes dir (cap bytes) a new directory holding ca.pem and a keystore NAME.pem per name in
 * the space-separated list names, and other/ca.pem with other/NAME.pem for other_names.
 * Needs KQ_SOURCE_DIR (the repository) defined by the build. 0 or -1. */
static inline int tc_make(char *dir, size_t cap, const char *names, const char *other_names)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

    snprintf(dir, cap, "%s/kq-certs-XXXXXX", tmp);
    if (!mkdtemp(dir))
        return -1;
    if (tc_sh("'%s/deploy/tls/make-certs.sh' '%s' %s > /dev/null", KQ_SOURCE_DIR, dir, names))
        return -1;
    if (other_names && tc_sh("'%s/deploy/tls/make-certs.sh' '%s/other' %s > /dev/null",
                             KQ_SOURCE_DIR, dir, other_names))
        return -1;
    return 0;
}

static inline const char *tc_path(const char *dir, const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];

    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static inline void tc_remove(const char *dir)
{
    if (dir[0])
        (void)tc_sh("rm -rf '%s'", dir);
}

#endif
