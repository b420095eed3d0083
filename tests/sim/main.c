/*
 * kq-sim: run the deterministic simulator over one seed or a range of seeds.
 *
 *   kq-sim --seed S [--seeds N | --hours H] [--controllers K] [--brokers B] [--trace]
 *          [--max-time-ms T] [--liveness-ms L] [--check-determinism] [--bug NAME] [--quiet]
 *          [--raft-only [--observers M]] [--voter-changes]
 *   kq-sim --list-bugs
 *
 * Prints one line per failing seed (and its last trace lines on stderr) and a summary line
 * "sim: N seeds, F failed". --hours runs seeds from S on until the time is up or one fails
 * (a soak: the first failing seed, with its trace, is the report). Exit status: 0 all passed,
 * 1 some failed, 2 usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kq_cli.h"
#include "kq/error.h"
#include "sim.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: kq-sim --seed S [--seeds N | --hours H] [--controllers K] [--brokers B]\n"
        "              [--trace] [--max-time-ms T] [--liveness-ms L] [--check-determinism]\n"
        "              [--bug NAME] [--quiet] [--raft-only [--observers M]]\n"
        "              [--voter-changes]\n"
        "       kq-sim --list-bugs\n"
        "  --seed S             first seed (required)\n"
        "  --seeds N            run seeds S..S+N-1 (default 1)\n"
        "  --hours H            run seeds S, S+1, ... for H hours (fractions allowed), stop\n"
        "                       at the first that fails\n"
        "  --list-bugs          print the checker self-tests (--bug names), one per line\n"
        "  --controllers K      1..%d voters, the controllers (default: drawn from each\n"
        "                       seed); --voters K is the same\n"
        "  --brokers B          1..%d broker agents (default: drawn, 3..6)\n"
        "  --trace              print every trace line\n"
        "  --max-time-ms T      virtual length of the fault phase (default: drawn)\n"
        "  --liveness-ms L      convergence budget after healing (default 60000)\n"
        "  --check-determinism  run every seed twice and compare trace hashes\n"
        "  --bug NAME           run a deliberately broken host (checker self-test; see\n"
        "                       --list-bugs)\n"
        "  --quiet              no trace dump for failing seeds\n"
        "  --raft-only          the Raft quorum alone (no controller, brokers or clients)\n"
        "  --observers M        with --raft-only: 0..%d observers (default: drawn)\n"
        "  --controller         the whole cluster (the default; kept for old command lines)\n"
        "  --voter-changes      a dynamic quorum (kraft.version 1): 1..K controllers formatted\n"
        "                       as the voters, the others added later; the admin client adds,\n"
        "                       removes and replaces voters under the faults\n",
        KQ_SIM_MAX_VOTERS, KQ_SIM_MAX_BROKERS, KQ_SIM_MAX_OBSERVERS);
}

static int parse_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    return kq_cli_u64("kq-sim", opt, s, lo, hi, out);
}

int main(int argc, char **argv)
{
    kq_sim_opts o;
    kq_sim_opts_defaults(&o);
    uint64_t seed = 0, nseeds = 1, v, snaps_taken = 0, snaps_installed = 0, admin_retried = 0;
    uint64_t added = 0, removed = 0, refused = 0, wiped = 0, kills = 0, returns = 0;
    bool have_seed = false, determinism = false, raft_only = false, observers_given = false;
    double hours = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--list-bugs")) {
            for (int b = KQ_SIM_BUG_NONE + 1; b < KQ_SIM_BUG_COUNT; b++)
                printf("%s\n", kq_sim_bug_name((kq_sim_bug)b));
            return 0;
        } else if (!strcmp(a, "--hours")) {
            if (kq_cli_double("kq-sim", a, val, 1e-6, 10000, &hours))
                return 2;
            i++;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
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
        } else if (!strcmp(a, "--voters") || !strcmp(a, "--controllers")) {
            if (parse_u64(a, val, 1, KQ_SIM_MAX_VOTERS, &v))
                return 2;
            o.voters = (int)v;
            i++;
        } else if (!strcmp(a, "--observers")) {
            if (parse_u64(a, val, 0, KQ_SIM_MAX_OBSERVERS, &v))
                return 2;
            o.observers = (int)v;
            observers_given = true;
            i++;
        } else if (!strcmp(a, "--max-time-ms")) {
            if (parse_u64(a, val, 1, 100000000, &o.safety_ms))
                return 2;
            i++;
        } else if (!strcmp(a, "--liveness-ms")) {
            if (parse_u64(a, val, 1, 100000000, &o.liveness_ms))
                return 2;
            i++;
        } else if (!strcmp(a, "--controller")) {
            o.controller = true;
        } else if (!strcmp(a, "--raft-only")) {
            raft_only = true;
        } else if (!strcmp(a, "--voter-changes")) {
            o.voter_changes = true;
        } else if (!strcmp(a, "--brokers")) {
            if (parse_u64(a, val, 1, KQ_SIM_MAX_BROKERS, &v))
                return 2;
            o.brokers = (int)v;
            i++;
        } else if (!strcmp(a, "--trace")) {
            o.trace = true;
        } else if (!strcmp(a, "--quiet")) {
            o.dump_on_failure = false;
        } else if (!strcmp(a, "--check-determinism")) {
            determinism = true;
        } else if (!strcmp(a, "--bug")) {
            int b = val ? kq_sim_bug_from_name(val) : -1;
            if (b < 0) {
                fprintf(stderr, "kq-sim: --bug: '%s' is not a self-test (kq-sim --list-bugs)\n",
                        val ? val : "");
                return 2;
            }
            o.bug = (kq_sim_bug)b;
            i++;
        } else {
            fprintf(stderr, "kq-sim: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (raft_only && o.voter_changes) {
        fprintf(stderr, "kq-sim: --voter-changes needs the whole cluster, not --raft-only\n");
        return 2;
    }
    if (raft_only) {
        o.controller = false;
        if (kq_sim_bug_needs_controller(o.bug)) {
            fprintf(stderr, "kq-sim: --bug %s needs the whole cluster, not --raft-only\n",
                    kq_sim_bug_name(o.bug));
            return 2;
        }
    } else if (observers_given) {
        fprintf(stderr, "kq-sim: --observers needs --raft-only (in the whole cluster the "
                        "observers are the brokers: --brokers)\n");
        return 2;
    }
    if (!have_seed) {
        fprintf(stderr, "kq-sim: --seed is required\n");
        usage(stderr);
        return 2;
    }
    if (nseeds > UINT64_MAX - seed) {
        fprintf(stderr, "kq-sim: --seed + --seeds overflows\n");
        return 2;
    }
    o.out = o.trace ? stdout : stderr;

    uint64_t failed = 0, k, events = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    time_t stop_at = hours > 0 ? time(NULL) + (time_t)(hours * 3600) : 0;
    if (hours > 0)
        nseeds = UINT64_MAX - seed;
    for (k = 0; k < nseeds && !(hours > 0 && (failed > 0 || time(NULL) >= stop_at)); k++) {
        kq_sim_result r;
        o.seed = seed + k;
        int rc = kq_sim_run(&o, &r);
        if (rc == KQ_ERR_INVALID_CONFIG) {
            fprintf(stderr, "kq-sim: %s\n", r.reason);
            return 2;
        }
        if (rc) {
            printf("sim: seed %" PRIu64 " could not run: %s\n", o.seed, kq_err_name(rc));
            failed++;
            continue;
        }
        events += r.events;
        snaps_taken += r.snapshots_taken;
        snaps_installed += r.snapshots_installed;
        admin_retried += r.admin_retried;
        added += r.voters_added;
        removed += r.voters_removed;
        refused += r.voter_refusals;
        wiped += r.controllers_wiped;
        kills += r.leader_kills;
        returns += r.removed_starts;
        if (!r.failed && determinism) {
            kq_sim_result r2;
            kq_sim_opts o2 = o;
            o2.trace = false;
            rc = kq_sim_run(&o2, &r2);
            if (rc || r2.failed || r2.trace_hash != r.trace_hash || r2.events != r.events) {
                r.failed = true;
                snprintf(r.reason, sizeof r.reason,
                         "not deterministic: trace hash %016" PRIx64 " then %016" PRIx64
                         " (%" PRIu64 " then %" PRIu64 " events)",
                         r.trace_hash, r2.trace_hash, r.events, r2.events);
            }
        }
        if (r.failed) {
            failed++;
            printf("sim: seed %" PRIu64 " FAILED (voters %d observers %d): %s\n", o.seed, r.voters,
                   r.observers, r.reason);
        } else if (nseeds == 1 || o.trace) {
            printf("sim: seed %" PRIu64 " ok: voters %d observers %d, %" PRIu64 " events, %" PRIu64
                   " virtual ms, %" PRIu64 " crashes, last epoch %d, HW %" PRId64
                   ", trace hash %016" PRIx64 "\n",
                   o.seed, r.voters, r.observers, r.events, r.end_ms, r.crashes, r.last_epoch,
                   r.high_watermark, r.trace_hash);
            if (o.controller)
                printf("sim: seed %" PRIu64 " controller: %d brokers, %" PRIu64
                       " requests, %" PRIu64 " AlterPartitions acknowledged, %" PRIu64
                       " rejected, %" PRIu64 " activations, %" PRIu64 " image checks, %" PRIu64
                       " topics, %" PRIu64 " snapshots written, %" PRIu64 " installed\n",
                       o.seed, r.brokers, r.ctl_requests, r.ap_acked, r.ap_rejected, r.activations,
                       r.image_checks, r.topics_created, r.snapshots_taken, r.snapshots_installed);
            if (o.voter_changes)
                printf("sim: seed %" PRIu64 " voter changes: %" PRIu64 " added, %" PRIu64
                       " removed, %" PRIu64 " refused, %" PRIu64 " controllers wiped and "
                       "re-formatted; %d voters at the end\n",
                       o.seed, r.voters_added, r.voters_removed, r.voter_refusals,
                       r.controllers_wiped, r.final_voters);
        }
        fflush(stdout);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (o.controller)
        printf("sim: %" PRIu64 " snapshots written, %" PRIu64 " fetched and installed; %" PRIu64
               " admin operations answered after retries\n",
               snaps_taken, snaps_installed, admin_retried);
    if (o.voter_changes)
        printf("sim: voter changes: %" PRIu64 " voters added, %" PRIu64 " removed, %" PRIu64
               " changes refused, %" PRIu64 " controllers wiped and re-formatted, %" PRIu64
               " leaders crashed with a change in flight, %" PRIu64
               " removed voters restarted with an older epoch\n",
               added, removed, refused, wiped, kills, returns);
    printf("sim: %" PRIu64 " events in %.1f s (%.0f events/s, %.0f seeds/s)\n", events, secs,
           secs > 0 ? (double)events / secs : 0, secs > 0 ? (double)k / secs : 0);
    printf("sim: %" PRIu64 " seeds, %" PRIu64 " failed\n", k, failed);
    return failed ? 1 : 0;
}
