/*
 * kq-dsim: run the deterministic data-plane simulator (dsim.h) over one seed or a range.
 *
 *   kq-dsim --seed S [--seeds N] [--brokers B] [--partitions P] [--min-isr M] [--trace]
 *           [--max-time-ms T] [--liveness-ms L] [--check-determinism] [--bug NAME] [--quiet]
 *
 * Prints one line per failing seed (and its last trace lines on stderr) and a summary line
 * "dsim: N seeds, F failed". Exit status: 0 all passed, 1 some failed, 2 usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq_cli.h"
#include "dsim.h"
#include "kq/error.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kq-dsim --seed S [--seeds N] [--brokers B] [--partitions P] [--min-isr M]\n"
            "               [--trace] [--max-time-ms T] [--liveness-ms L] [--check-determinism]\n"
            "               [--bug NAME] [--quiet]\n"
            "  --seed S             first seed (required)\n"
            "  --seeds N            run seeds S..S+N-1 (default 1)\n"
            "  --brokers B          3..%d brokers (default: drawn from each seed)\n"
            "  --partitions P       1..%d partitions, RF 3 (default: drawn)\n"
            "  --min-isr M          min.insync.replicas 1..3 (default: drawn, mostly 2)\n"
            "  --trace              print every trace line\n"
            "  --max-time-ms T      virtual length of the fault phase (default: drawn)\n"
            "  --liveness-ms L      convergence budget after healing (default 60000)\n"
            "  --check-determinism  run every seed twice and compare trace hashes\n"
            "  --bug NAME           deliberately broken host (checker self-test): none,\n"
            "                       unclean, lose-synced, early-fetch, same-epoch\n"
            "  --quiet              no trace dump for failing seeds\n",
            KQ_DSIM_MAX_BROKERS, KQ_DSIM_MAX_PARTITIONS);
}

static int parse_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    return kq_cli_u64("kq-dsim", opt, s, lo, hi, out);
}

int main(int argc, char **argv)
{
    kq_dsim_opts o;
    kq_dsim_opts_defaults(&o);
    uint64_t seed = 0, nseeds = 1, v;
    bool have_seed = false, determinism = false;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--seed")) {
            if (parse_u64(a, val, 0, UINT64_MAX, &seed))
                return 2;
            have_seed = true;
            i++;
        } else if (!strcmp(a, "--seeds")) {
            if (parse_u64(a, val, 1, 100000000, &nseeds))
                return 2;
            i++;
        } else if (!strcmp(a, "--brokers")) {
            if (parse_u64(a, val, 3, KQ_DSIM_MAX_BROKERS, &v))
                return 2;
            o.brokers = (int)v;
            i++;
        } else if (!strcmp(a, "--partitions")) {
            if (parse_u64(a, val, 1, KQ_DSIM_MAX_PARTITIONS, &v))
                return 2;
            o.partitions = (int)v;
            i++;
        } else if (!strcmp(a, "--min-isr")) {
            if (parse_u64(a, val, 1, 3, &v))
                return 2;
            o.min_isr = (int)v;
            i++;
        } else if (!strcmp(a, "--max-time-ms")) {
            if (parse_u64(a, val, 1, 100000000, &o.safety_ms))
                return 2;
            i++;
        } else if (!strcmp(a, "--liveness-ms")) {
            if (parse_u64(a, val, 1, 100000000, &o.liveness_ms))
                return 2;
            i++;
        } else if (!strcmp(a, "--trace")) {
            o.trace = true;
        } else if (!strcmp(a, "--quiet")) {
            o.dump_on_failure = false;
        } else if (!strcmp(a, "--check-determinism")) {
            determinism = true;
        } else if (!strcmp(a, "--bug")) {
            int b = val ? kq_dsim_bug_from_name(val) : -1;
            if (b < 0) {
                fprintf(stderr, "kq-dsim: --bug needs none, unclean, lose-synced, early-fetch or "
                                "same-epoch\n");
                return 2;
            }
            o.bug = (kq_dsim_bug)b;
            i++;
        } else {
            fprintf(stderr, "kq-dsim: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!have_seed) {
        fprintf(stderr, "kq-dsim: --seed is required\n");
        usage(stderr);
        return 2;
    }
    if (nseeds > UINT64_MAX - seed) {
        fprintf(stderr, "kq-dsim: --seed + --seeds overflows\n");
        return 2;
    }
    o.out = o.trace ? stdout : stderr;

    uint64_t failed = 0, acked = 0;
    for (uint64_t k = 0; k < nseeds; k++) {
        kq_dsim_result r;
        o.seed = seed + k;
        int rc = kq_dsim_run(&o, &r);
        if (rc == KQ_ERR_INVALID_CONFIG) {
            fprintf(stderr, "kq-dsim: %s\n", r.reason);
            return 2;
        }
        if (rc) {
            printf("dsim: seed %" PRIu64 " could not run: %s\n", o.seed, kq_err_name(rc));
            failed++;
            continue;
        }
        if (!r.failed && determinism) {
            kq_dsim_result r2;
            kq_dsim_opts o2 = o;
            o2.trace = false;
            rc = kq_dsim_run(&o2, &r2);
            if (rc || r2.failed || r2.trace_hash != r.trace_hash || r2.events != r.events) {
                r.failed = true;
                snprintf(r.reason, sizeof r.reason,
                         "not deterministic: trace hash %016" PRIx64 " then %016" PRIx64
                         " (%" PRIu64 " then %" PRIu64 " events)",
                         r.trace_hash, r2.trace_hash, r.events, r2.events);
            }
        }
        acked += r.acked_all;
        if (r.failed) {
            failed++;
            printf("dsim: seed %" PRIu64 " FAILED (brokers %d partitions %d min ISR %d): %s\n",
                   o.seed, r.brokers, r.partitions, r.min_isr, r.reason);
        } else if (nseeds == 1 || o.trace) {
            printf("dsim: seed %" PRIu64 " ok: brokers %d partitions %d min ISR %d, %" PRIu64
                   " events, %" PRIu64 " virtual ms, %" PRIu64 " crashes, %" PRIu64
                   " controlled shutdowns, %" PRIu64 " pauses, %" PRIu64 " elections, %" PRIu64
                   " produces, %" PRIu64 " acks=all and %" PRIu64
                   " acks=1 records acknowledged, %" PRIu64 " truncations, final log end %" PRId64
                   ", trace hash %016" PRIx64 "\n",
                   o.seed, r.brokers, r.partitions, r.min_isr, r.events, r.end_ms, r.crashes,
                   r.shutdowns, r.pauses, r.elections, r.produced, r.acked_all, r.acked_one,
                   r.truncations, r.final_end[0], r.trace_hash);
        }
        fflush(stdout);
    }
    printf("dsim: %" PRIu64 " seeds, %" PRIu64 " failed (%" PRIu64
           " acks=all records acknowledged in all)\n",
           nseeds, failed, acked);
    return failed ? 1 : 0;
}
