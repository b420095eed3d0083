/*
 * Option values for the simulators and test tools (kq-sim, kq-bench): one parser, so
 * a bad value always gets "<prog>: <opt>: '<value>' is not a number in <lo>..<hi>" on stderr
 * (and the tool exits 2) instead of being read as 0.
 *
 * Header-only; nothing is allocated.
 */
#ifndef KQ_CLI_H
#define KQ_CLI_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Parse s (the value of option opt) as an unsigned number in [lo, hi]; on error print
 * "<prog>: <opt> ..." to stderr and return -1. */
static inline int kq_cli_u64(const char *prog, const char *opt, const char *s, uint64_t lo,
                             uint64_t hi, uint64_t *out)
{
    char *end = NULL;
    if (!s || !*s || *s == '-') {
        fprintf(stderr, "%s: %s needs a non-negative number\n", prog, opt);
        return -1;
    }
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: %s: '%s' is not a number in %" PRIu64 "..%" PRIu64 "\n", prog, opt, s,
                lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* The same for a real number in [lo, hi] (seconds, hours). */
static inline int kq_cli_double(const char *prog, const char *opt, const char *s, double lo,
                                double hi, double *out)
{
    char *end = NULL;
    if (!s || !*s) {
        fprintf(stderr, "%s: %s needs a number\n", prog, opt);
        return -1;
    }
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "%s: %s: '%s' is not a number in %g..%g\n", prog, opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

#endif
