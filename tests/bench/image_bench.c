/*
 * kq-image-bench: scale figures of the metadata image and of the controller's decisions,
 * measured in one process on the pure modules (no network, no log store), so that the
 * ratios between figures are comparable:
 *
 *   1. register brokers and create partitions (RF 3) through kq_rc_create_topics and the
 *      controller's apply path (kq_meta_add: encode + apply, then commit): time, process RSS,
 *      kq_image_memory_bytes;
 *   2. snapshot write (size, time) and load into a fresh image (time; hash must match);
 *   3. fencing a broker that leads >= 100,000 partitions (manual assignments put broker 1
 *      first): session expiry decision (kq_cc_fence_stale) and applying its records;
 *   4. failover: kq_meta_try_activate (kq_cc_activate) at 1k, 100k and 1M partitions;
 *   5. rollback (kq_meta_deactivate) of a 10,000-record uncommitted suffix at full size.
 *
 * Each figure is one line:  figure=<name> value=<number> unit=<unit>
 * Lines starting with '#' are comments. Exit status 0 on success, 1 when a check fails
 * (a hash mismatch, a decision error); the message names the problem.
 *
 *   kq-image-bench [--brokers N] [--topics N] [--partitions-per-topic N]
 *                  [--leader-topics N] [--seed S]
 *
 * Ownership: everything allocated here is freed before exit.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_control.h"
#include "decide.h"
#include "kq/codec.h"
#include "kq/error.h"
#include "kq/image.h"
#include "kq/records.h"
#include "kq/util.h"
#include "meta.h"
#include "replication_control.h"

#define REPS 5 /* repetitions of the microsecond-scale measurements (median reported) */
#define BATCH_BYTES (1u << 20) /* proposals are cut at 1 MiB, the controller's write cap */
#define ROLLBACK_RECORDS 10000

typedef struct bench_opts {
    int32_t brokers;
    int32_t topics;
    int32_t per_topic;
    int32_t leader_topics; /* topics (created first) whose every partition broker 1 leads */
    uint64_t seed;
} bench_opts;

typedef struct bench {
    bench_opts o;
    kq_meta m;
    bool meta_ok;
    kq_decide_settings s;
    int64_t now_ms;  /* simulated clock */
    int64_t *epochs; /* broker epochs, indexed by id */
    kq_buf batch;
    uint64_t batches;     /* proposals cut so far */
    uint64_t batch_bytes; /* encoded record bytes proposed so far */
    uint64_t decide_ns;   /* time spent in kq_rc_create_topics */
    uint64_t apply_ns;    /* time spent proposing (encode + apply + commit) topic records */
    char err[512];
} bench;

static void figure(const char *name, double value, const char *unit)
{
    printf("figure=%s value=%.6g unit=%s\n", name, value, unit);
    fflush(stdout);
}

static double secs_since(uint64_t t0_ns)
{
    return (double)(kq_now_ns() - t0_ns) / 1e9;
}

/* VmRSS or VmHWM of this process in bytes, 0 if /proc is unreadable. */
static uint64_t proc_status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kb = 0;
    size_t klen = strlen(key);

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            kb = strtoull(line + klen + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb * 1024;
}

static double mib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Propose the records of l as the active controller does: encode and apply each
 * (kq_meta_add), cutting a proposal every BATCH_BYTES; with commit, every proposal is then
 * treated as committed (kq_meta_committed), else it stays in the undo log. */
static int propose(bench *b, const kq_reclist *l, bool commit)
{
    int64_t base = b->m.applied_end;
    int32_t count = 0;
    int rc = 0;

    b->batch.len = 0;
    for (size_t i = 0; i < l->n; i++) {
        rc = kq_meta_add(&b->m, &l->v[i], &b->batch, base, &count, b->err, sizeof(b->err));
        if (rc != 0)
            return rc;
        if (b->batch.len >= BATCH_BYTES || i + 1 == l->n) {
            b->batches++;
            b->batch_bytes += b->batch.len;
            if (commit)
                kq_meta_committed(&b->m, b->m.applied_end);
            base = b->m.applied_end;
            count = 0;
            b->batch.len = 0;
        }
    }
    return 0;
}

/* Append a LeaderChange record (a new leader's first record), commit it and make this node the
 * leader of that epoch, so that kq_meta_try_activate can succeed. */
static int new_leader_epoch(bench *b)
{
    int32_t voters[3] = {1, 2, 3};
    kq_record r = {.type = KQ_REC_LEADER_CHANGE};
    kq_reclist l;
    int64_t off = b->m.applied_end;
    int rc;

    r.leader_change.leader_id = 1;
    r.leader_change.voters = (kq_rec_ids){malloc(sizeof(voters)), 3};
    r.leader_change.granting_voters = (kq_rec_ids){malloc(sizeof(voters)), 3};
    kq_reclist_init(&l);
    if (r.leader_change.voters.ids == NULL || r.leader_change.granting_voters.ids == NULL) {
        kq_record_free(&r);
        return KQ_ERR_NOMEM;
    }
    memcpy(r.leader_change.voters.ids, voters, sizeof(voters));
    memcpy(r.leader_change.granting_voters.ids, voters, sizeof(voters));
    rc = kq_reclist_push(&l, &r);
    if (rc == 0)
        rc = propose(b, &l, true);
    kq_reclist_free(&l);
    if (rc == 0)
        kq_meta_became_leader(&b->m, off);
    return rc;
}

/* Fail-over figures at the current size: a leader that has everything committed becomes
 * active (kq_meta_try_activate, which gives every broker a fresh session), REPS times; the
 * previous activation is ended with kq_meta_deactivate (an empty suffix to roll back). */
static int measure_failover(bench *b, const char *label)
{
    double act[REPS], deact[REPS];
    char name[96];
    int rc;

    for (int i = 0; i < REPS; i++) {
        uint64_t t0 = kq_now_ns();
        rc = kq_meta_deactivate(&b->m, b->err, sizeof(b->err));
        deact[i] = secs_since(t0);
        if (rc != 0)
            return rc;
        if ((rc = new_leader_epoch(b)) != 0)
            return rc;
        t0 = kq_now_ns();
        bool ok = kq_meta_try_activate(&b->m, true, b->m.applied_end, b->m.applied_end, b->now_ms);
        act[i] = secs_since(t0);
        if (!ok) {
            snprintf(b->err, sizeof(b->err), "kq_meta_try_activate refused at %s partitions",
                     label);
            return KQ_ERR_INVALID_REQUEST;
        }
    }
    snprintf(name, sizeof(name), "failover_activate_%s", label);
    figure(name, median(act, REPS) * 1e6, "us");
    snprintf(name, sizeof(name), "failover_deactivate_empty_%s", label);
    figure(name, median(deact, REPS) * 1e6, "us");
    return 0;
}

static int register_brokers(bench *b)
{
    kq_rec_endpoint ep = {.name = "PLAINTEXT", .host = "127.0.0.1", .port = 0};
    kq_reclist l;
    int rc = 0;

    kq_reclist_init(&l);
    for (int32_t id = 1; id <= b->o.brokers && rc == 0; id++) {
        kq_broker_registration req = {
            .broker_id = id, .cluster_id = b->m.cluster_id, .endpoints = &ep, .n_endpoints = 1};
        kq_registration_result res;

        ep.port = 9000 + id;
        memcpy(req.incarnation_id, &id, sizeof(id));
        req.incarnation_id[15] = 0x5a;
        rc = kq_cc_register(b->m.cc, b->m.img, &req, b->m.applied_end, b->now_ms, &l, &res);
        if (rc == 0 && res.error != 0)
            rc = res.error;
        if (rc != 0) {
            snprintf(b->err, sizeof(b->err), "registering broker %d: %s", id, res.message);
            break;
        }
        b->epochs[id] = res.broker_epoch;
        rc = propose(b, &l, true);
        kq_reclist_free(&l);
    }
    /* Unfence: each broker heartbeats with a metadata offset past its registration. */
    for (int32_t id = 1; id <= b->o.brokers && rc == 0; id++) {
        kq_heartbeat hb = {.broker_id = id,
                           .broker_epoch = b->epochs[id],
                           .current_metadata_offset = b->m.applied_end};
        kq_heartbeat_result res;

        rc = kq_cc_heartbeat(b->m.cc, b->m.img, &hb, b->m.applied_end, b->now_ms, &l, &res);
        if (rc == 0 && res.error != 0)
            rc = res.error;
        if (rc != 0) {
            snprintf(b->err, sizeof(b->err), "heartbeat of broker %d: %s", id, res.message);
            break;
        }
        rc = propose(b, &l, true);
        kq_reclist_free(&l);
    }
    kq_reclist_free(&l);
    if (rc == 0) {
        kq_image_counts c;
        kq_image_get_counts(b->m.img, &c);
        if (c.brokers != (uint32_t)b->o.brokers || c.fenced_brokers != 0) {
            snprintf(b->err, sizeof(b->err), "%u brokers registered, %u fenced (want %d, 0)",
                     c.brokers, c.fenced_brokers, b->o.brokers);
            rc = KQ_ERR_INVALID_REQUEST;
        }
    }
    return rc;
}

/* One topic: placed by kq_place_replicas, or (leader topic) manually assigned with broker 1
 * first and the followers spread over the other brokers. */
static int create_topic(bench *b, int32_t t, int32_t *assign_ids, kq_partition_assignment *pa)
{
    char name[32];
    kq_create_topic req = {.name = name, .num_partitions = b->o.per_topic, .replication_factor = 3};
    kq_create_topic_result res;
    kq_reclist l;
    int32_t others = b->o.brokers - 1;
    int rc;

    snprintf(name, sizeof(name), "bench-%05d", (int)t);
    if (t < b->o.leader_topics) {
        for (int32_t p = 0; p < b->o.per_topic; p++) {
            int64_t k = (int64_t)t * b->o.per_topic + p;
            int32_t *ids = assign_ids + (size_t)p * 3;
            ids[0] = 1;
            ids[1] = 2 + (int32_t)(k % others);
            ids[2] = 2 + (int32_t)((k % others + 1 + (k / others) % (others - 1)) % others);
            pa[p] = (kq_partition_assignment){p, ids, 3};
        }
        req.num_partitions = -1;
        req.replication_factor = -1;
        req.assignments = pa;
        req.n_assignments = b->o.per_topic;
    }
    kq_reclist_init(&l);
    uint64_t t0 = kq_now_ns();
    rc = kq_rc_create_topics(&b->s, b->m.img, &req, 1, NULL, &b->m.rng, &l, &res);
    uint64_t t1 = kq_now_ns();
    if (rc == 0 && res.error != 0) {
        snprintf(b->err, sizeof(b->err), "creating topic %s: %s: %s", name, kq_err_name(res.error),
                 res.message);
        rc = res.error;
    }
    if (rc == 0)
        rc = propose(b, &l, true);
    b->decide_ns += t1 - t0;
    b->apply_ns += kq_now_ns() - t1;
    kq_reclist_free(&l);
    return rc;
}

static int create_all(bench *b)
{
    int32_t *assign_ids = malloc(sizeof(int32_t) * 3 * (size_t)b->o.per_topic);
    kq_partition_assignment *pa = malloc(sizeof(*pa) * (size_t)b->o.per_topic);
    uint64_t total_ns = 0, rss0 = proc_status_kb("VmRSS");
    int64_t next_mark = 1000;
    int rc = 0;

    if (assign_ids == NULL || pa == NULL) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    figure("rss_before_create", mib(rss0), "MiB");
    for (int32_t t = 0; t < b->o.topics; t++) {
        uint64_t t0 = kq_now_ns();
        if ((rc = create_topic(b, t, assign_ids, pa)) != 0)
            goto out;
        total_ns += kq_now_ns() - t0;
        int64_t parts = (int64_t)(t + 1) * b->o.per_topic;
        if (parts >= next_mark) { /* failover at 1k, 100k, 1M partitions (not timed above) */
            char label[32];
            snprintf(label, sizeof(label), "%lldp", (long long)parts);
            if ((rc = measure_failover(b, label)) != 0)
                goto out;
            next_mark *= next_mark == 1000 ? 100 : 10;
        }
    }
    kq_image_counts c;
    kq_image_get_counts(b->m.img, &c);
    if (c.partitions != (uint64_t)b->o.topics * (uint64_t)b->o.per_topic) {
        snprintf(b->err, sizeof(b->err), "image holds %llu partitions, expected %llu",
                 (unsigned long long)c.partitions,
                 (unsigned long long)b->o.topics * (unsigned long long)b->o.per_topic);
        rc = KQ_ERR_INVALID_REQUEST;
        goto out;
    }
    figure("partitions", (double)c.partitions, "count");
    figure("create_seconds", (double)total_ns / 1e9, "s");
    figure("create_decide_seconds", (double)b->decide_ns / 1e9, "s");
    figure("create_apply_seconds", (double)b->apply_ns / 1e9, "s");
    figure("create_partitions_per_s", (double)c.partitions / ((double)total_ns / 1e9), "1/s");
    figure("image_memory_bytes", mib(kq_image_memory_bytes(b->m.img)), "MiB");
    figure("image_bytes_per_partition", (double)kq_image_memory_bytes(b->m.img) / c.partitions,
           "B");
    figure("rss_after_create", mib(proc_status_kb("VmRSS")), "MiB");
    figure("rss_growth_create", mib(proc_status_kb("VmRSS") - rss0), "MiB");
out:
    free(assign_ids);
    free(pa);
    return rc;
}

static int snapshot(bench *b)
{
    kq_buf snap = {0};
    kq_image *copy = NULL;
    int32_t n_records = 0;
    uint64_t h0 = kq_image_hash(b->m.img);
    int rc;

    uint64_t t0 = kq_now_ns();
    rc = kq_image_snapshot_write(b->m.img, &snap, &n_records);
    double wsec = secs_since(t0);
    if (rc != 0) {
        snprintf(b->err, sizeof(b->err), "snapshot write: %s", kq_err_name(rc));
        goto out;
    }
    figure("snapshot_write_seconds", wsec, "s");
    figure("snapshot_bytes", mib(snap.len), "MiB");
    figure("snapshot_records", n_records, "count");

    if ((copy = kq_image_new()) == NULL) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    uint64_t rss0 = proc_status_kb("VmRSS");
    t0 = kq_now_ns();
    rc = kq_image_snapshot_load(copy, snap.data, snap.len, kq_image_offset(b->m.img) + 1, b->err,
                                sizeof(b->err));
    double lsec = secs_since(t0);
    if (rc != 0)
        goto out;
    figure("snapshot_load_seconds", lsec, "s");
    figure("rss_growth_snapshot_load", mib(proc_status_kb("VmRSS") - rss0), "MiB");
    figure("loaded_image_memory_bytes", mib(kq_image_memory_bytes(copy)), "MiB");
    t0 = kq_now_ns();
    uint64_t h1 = kq_image_hash(copy);
    figure("image_hash_seconds", secs_since(t0), "s");
    if (h1 != h0) {
        snprintf(b->err, sizeof(b->err),
                 "loaded image hash %016llx differs from the original %016llx",
                 (unsigned long long)h1, (unsigned long long)h0);
        rc = KQ_ERR_INVALID_REQUEST;
        goto out;
    }
    printf("# snapshot load: hash %016llx equal to the original\n", (unsigned long long)h1);
out:
    kq_image_free(copy);
    kq_buf_free(&snap);
    return rc;
}

/* Broker 1 stops heartbeating: every other broker heartbeats later, so at expiry
 * kq_cc_fence_stale picks broker 1. */
static int fence(bench *b)
{
    kq_reclist l;
    int32_t fenced_id = -1;
    int64_t next_check = -1;
    uint32_t led = kq_image_broker_count(b->m.img, 1, KQ_ROLE_LEADER);
    uint32_t in_isr = kq_image_broker_count(b->m.img, 1, KQ_ROLE_ISR);
    int rc = 0;

    kq_reclist_init(&l);
    b->now_ms += 1000;
    int64_t last_contact = b->now_ms;
    for (int32_t id = 2; id <= b->o.brokers && rc == 0; id++) {
        kq_heartbeat hb = {.broker_id = id,
                           .broker_epoch = b->epochs[id],
                           .current_metadata_offset = b->m.applied_end};
        kq_heartbeat_result res;
        rc = kq_cc_heartbeat(b->m.cc, b->m.img, &hb, b->m.applied_end, b->now_ms, &l, &res);
        if (rc == 0 && (res.error != 0 || l.n != 0)) {
            snprintf(b->err, sizeof(b->err), "heartbeat of broker %d: error %d, %zu records", id,
                     res.error, l.n);
            rc = KQ_ERR_INVALID_REQUEST;
        }
    }
    if (rc != 0)
        goto out;
    figure("fence_broker_leads", led, "partitions");
    figure("fence_broker_in_isr", in_isr, "partitions");

    b->now_ms = last_contact - 1000 + b->s.session_timeout_ms + 1; /* broker 1 just expired */
    uint64_t t0 = kq_now_ns();
    rc = kq_cc_fence_stale(b->m.cc, b->m.img, b->now_ms, &l, &fenced_id, &next_check);
    double dsec = secs_since(t0);
    if (rc == 0 && fenced_id != 1) {
        snprintf(b->err, sizeof(b->err), "kq_cc_fence_stale fenced broker %d, expected 1",
                 (int)fenced_id);
        rc = KQ_ERR_INVALID_REQUEST;
    }
    if (rc != 0)
        goto out;
    uint64_t batches0 = b->batches, bytes0 = b->batch_bytes;
    t0 = kq_now_ns();
    rc = propose(b, &l, true);
    double asec = secs_since(t0);
    if (rc != 0)
        goto out;
    figure("fence_records", (double)l.n, "count");
    figure("fence_decide_seconds", dsec, "s");
    figure("fence_apply_seconds", asec, "s");
    figure("fence_total_seconds", dsec + asec, "s");
    figure("fence_proposals_1mib", (double)(b->batches - batches0), "count");
    figure("fence_record_bytes", mib(b->batch_bytes - bytes0), "MiB");
    uint32_t still = kq_image_broker_count(b->m.img, 1, KQ_ROLE_LEADER) +
                     kq_image_broker_count(b->m.img, 1, KQ_ROLE_ISR);
    kq_image_counts c;
    kq_image_get_counts(b->m.img, &c);
    if (still != 0 || c.offline_partitions != 0 || !kq_image_broker(b->m.img, 1)->fenced) {
        snprintf(b->err, sizeof(b->err),
                 "after fencing broker 1 it still leads or is in ISR of %u partitions, %llu "
                 "partitions are offline",
                 still, (unsigned long long)c.offline_partitions);
        rc = KQ_ERR_INVALID_REQUEST;
    }
out:
    kq_reclist_free(&l);
    return rc;
}

/* A 10,000-record (ROLLBACK_RECORDS) uncommitted suffix (ISR removals of broker 2), rolled back on
 * leadership loss; the image must come back to the same hash. */
static int rollback(bench *b)
{
    kq_reclist l;
    uint64_t h0 = kq_image_hash(b->m.img);
    int rc;

    kq_reclist_init(&l);
    if ((rc = kq_cc_fence_records(&b->s, b->m.img, 2, &l)) != 0)
        goto out;
    if (l.n > ROLLBACK_RECORDS) /* small runs (fewer partitions) roll back what there is */
        kq_reclist_truncate(&l, ROLLBACK_RECORDS);
    figure("rollback_records", (double)l.n, "count");
    if ((rc = propose(b, &l, false)) != 0)
        goto out;
    figure("rollback_undo_depth", (double)kq_image_undo_depth(b->m.img), "records");
    uint64_t t0 = kq_now_ns();
    rc = kq_meta_deactivate(&b->m, b->err, sizeof(b->err));
    double sec = secs_since(t0);
    if (rc != 0)
        goto out;
    figure("rollback_seconds", sec, "s");
    uint64_t h1 = kq_image_hash(b->m.img);
    if (h1 != h0) {
        snprintf(b->err, sizeof(b->err), "image hash after rollback %016llx, before %016llx",
                 (unsigned long long)h1, (unsigned long long)h0);
        rc = KQ_ERR_INVALID_REQUEST;
    }
out:
    kq_reclist_free(&l);
    return rc;
}

static int parse_i32(const char *opt, const char *v, int32_t min, int32_t *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < min || x > 10000000) {
        fprintf(stderr, "kq-image-bench: %s wants an integer in [%d, 10000000], got '%s'\n", opt,
                (int)min, v);
        return -1;
    }
    *out = (int32_t)x;
    return 0;
}

static int parse_args(int argc, char **argv, bench_opts *o)
{
    static const struct option longopts[] = {{"brokers", required_argument, NULL, 'b'},
                                             {"topics", required_argument, NULL, 't'},
                                             {"partitions-per-topic", required_argument, NULL, 'p'},
                                             {"leader-topics", required_argument, NULL, 'l'},
                                             {"seed", required_argument, NULL, 's'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int c;

    *o = (bench_opts){
        .brokers = 100, .topics = 1000, .per_topic = 1000, .leader_topics = 100, .seed = 1};
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'b':
            bad = parse_i32("--brokers", optarg, 4, &o->brokers);
            break;
        case 't':
            bad = parse_i32("--topics", optarg, 1, &o->topics);
            break;
        case 'p':
            bad = parse_i32("--partitions-per-topic", optarg, 1, &o->per_topic);
            break;
        case 'l':
            bad = parse_i32("--leader-topics", optarg, 0, &o->leader_topics);
            break;
        case 's':
            o->seed = strtoull(optarg, NULL, 10);
            break;
        default:
            fprintf(stderr, "usage: kq-image-bench [--brokers N] [--topics N] "
                            "[--partitions-per-topic N] [--leader-topics N] [--seed S]\n");
            return c == 'h' ? 1 : 2;
        }
        if (bad)
            return 2;
    }
    if (optind != argc) {
        fprintf(stderr, "kq-image-bench: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (o->leader_topics > o->topics) {
        fprintf(stderr, "kq-image-bench: --leader-topics (%d) exceeds --topics (%d)\n",
                (int)o->leader_topics, (int)o->topics);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench b;
    int rc;

    memset(&b, 0, sizeof(b));
    if ((rc = parse_args(argc, argv, &b.o)) != 0)
        return rc == 1 ? 0 : 2;
    kq_decide_settings_default(&b.s);
    b.now_ms = 1000000;
    b.epochs = calloc((size_t)b.o.brokers + 1, sizeof(*b.epochs));
    if (b.epochs == NULL) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    if ((rc = kq_meta_init(&b.m, &b.s, "kq-image-bench-cluster", b.o.seed)) != 0)
        goto out;
    b.meta_ok = true;
    b.s = b.m.settings; /* with the cluster id, as the controller sees it */
    printf("# kq-image-bench brokers=%d topics=%d partitions_per_topic=%d leader_topics=%d "
           "rf=3 seed=%llu\n",
           (int)b.o.brokers, (int)b.o.topics, (int)b.o.per_topic, (int)b.o.leader_topics,
           (unsigned long long)b.o.seed);
    if ((rc = new_leader_epoch(&b)) != 0)
        goto out;
    if (!kq_meta_try_activate(&b.m, true, b.m.applied_end, b.m.applied_end, b.now_ms)) {
        snprintf(b.err, sizeof(b.err), "the first activation was refused");
        rc = KQ_ERR_INVALID_REQUEST;
        goto out;
    }
    if ((rc = register_brokers(&b)) != 0 || (rc = create_all(&b)) != 0 ||
        (rc = snapshot(&b)) != 0 || (rc = fence(&b)) != 0 || (rc = rollback(&b)) != 0)
        goto out;
    figure("rss_peak", mib(proc_status_kb("VmHWM")), "MiB");
out:
    if (rc != 0)
        fprintf(stderr, "kq-image-bench: %s%s%s\n", kq_err_name(rc), b.err[0] ? ": " : "", b.err);
    kq_buf_free(&b.batch);
    if (b.meta_ok)
        kq_meta_free(&b.m);
    free(b.epochs);
    return rc == 0 ? 0 : 1;
}
