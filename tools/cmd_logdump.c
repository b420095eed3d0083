/*
 * kq log-dump: print a metadata directory's log (--dir), a snapshot file (--snapshot) or a
 * broker's partition logs (--partition-log), read-only. The reading is here; the output is
 * tools/logdump.c. Every LMDB read of one dump runs in one read transaction (a store or plog
 * view), so a dump of a directory that a daemon is writing is consistent and changes nothing.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kq/error.h"
#include "kq/plog.h"
#include "kq/records.h"
#include "kq/store.h"
#include "kq/util.h"
#include "kq_tools.h"

#define READ_CHUNK_BYTES (4u * 1024u * 1024u)

static const char LOGDUMP_USAGE[] =
    "Usage: kq log-dump --dir DIR [--json | --lines]\n"
    "       kq log-dump --snapshot FILE [--json | --lines]\n"
    "       kq log-dump --partition-log DIR [--topic-id ID] [--partition P] [--print-values]\n"
    "                   [--json]\n"
    "\n"
    "  Reads without changing anything (a running daemon may keep using the directory).\n"
    "  -d, --dir DIR          a metadata log: a controller's metadata.log.dir, or a broker's\n"
    "                         <log.dirs>/__cluster_metadata. Per batch a line\n"
    "                           baseOffset: B lastOffset: L count: N partitionLeaderEpoch: E ...\n"
    "                         per record\n"
    "                           | offset: O valueSize: S payload: {\"type\":\"TOPIC_RECORD\","
    "\"data\":{...}}\n"
    "                         then records=<n> batches=<b> log_start=<s> log_end=<e>\n"
    "                         last_epoch=<x> qstate_epoch=<q> voted_id=<v> leader_id=<l>\n"
    "  --snapshot FILE        a snapshot file (<dir>/snapshots/*.checkpoint): its records,\n"
    "                         then records=<n> end_offset=<o> epoch=<e> size=<bytes>\n"
    "  --partition-log DIR    a broker's data directory (log.dirs): per partition its state,\n"
    "                         per batch offsets, leader epoch, producer id/epoch, sequences\n"
    "                         and size, per record offset, size and sequence\n"
    "  --topic-id ID          only this topic's partitions (with --partition-log)\n"
    "  --partition P          only partition P (with --partition-log)\n"
    "  --print-values         also print each record's value (with --partition-log)\n"
    "  --lines                one line per record, offset=<o> epoch=<e> batch=<b> <description>\n"
    "                         (not with --partition-log)\n"
    "  --json                 one JSON object instead of text\n";

enum {
    OPT_JSON = 1000,
    OPT_HELP,
    OPT_LINES,
    OPT_SNAPSHOT,
    OPT_PARTITION_LOG,
    OPT_TOPIC_ID,
    OPT_PARTITION,
    OPT_PRINT_VALUES,
};

/* ---- --dir ---------------------------------------------------------------------------------- */

typedef struct log_ctx {
    kq_tools_dump *d;
    int64_t expected; /* base offset the next batch must have */
    bool progress;
    int err;
    char errmsg[600];
} log_ctx;

static int on_log_batch(void *arg, int64_t base_offset, int32_t epoch, int32_t count,
                        uint32_t crc32c, const uint8_t *records, size_t len)
{
    log_ctx *c = arg;
    kq_tools_log_batch b = {.base_offset = base_offset,
                            .epoch = epoch,
                            .count = count,
                            .crc32c = crc32c,
                            .records = records,
                            .len = len,
                            .size = KQ_STORE_BATCH_HEADER_LEN + len};
    int rc;

    if (base_offset != c->expected) {
        snprintf(c->errmsg, sizeof c->errmsg,
                 "batch at offset %" PRId64 " where offset %" PRId64 " was expected (gap or "
                 "overlap in the log)",
                 base_offset, c->expected);
        c->err = KQ_ERR_CORRUPT_MESSAGE;
        return 1;
    }
    rc = kq_tools_dump_log_batch(c->d, &b);
    if (rc != 0) {
        snprintf(c->errmsg, sizeof c->errmsg,
                 "batch at offset %" PRId64 " (epoch %" PRId32 ", %" PRId32
                 " records) does not decode: %s",
                 base_offset, epoch, count, c->d->err);
        c->err = rc;
        return 1;
    }
    c->expected = base_offset + count;
    c->progress = true;
    return 0;
}

static int open_store(const char *dir, kq_store **s)
{
    char errbuf[512] = "";
    int rc = kq_store_open_readonly(dir, s, errbuf, sizeof errbuf);

    if (rc == 0)
        rc = kq_store_view_begin(*s);
    if (rc != 0) {
        if (errbuf[0])
            kq_tools_errorf("%s", errbuf);
        else
            kq_tools_errorf("cannot open metadata directory %s: %s", dir, kq_err_message(rc));
        kq_store_close(*s);
        *s = NULL;
        return KQ_EXIT_FAILURE;
    }
    return 0;
}

static int dump_dir(const char *dir, kq_tools_dump *d)
{
    kq_store *s = NULL;
    kq_store_recovered rec;
    log_ctx c = {.d = d};
    char sub[4096];
    struct stat st;
    int ret = KQ_EXIT_FAILURE, rc;

    if (open_store(dir, &s) != 0)
        return KQ_EXIT_FAILURE;
    rc = kq_store_recover(s, &rec);
    if (rc != 0) {
        kq_tools_errorf("cannot read the log state of %s: %s", dir, kq_err_message(rc));
        goto out;
    }
    c.expected = rec.log_start_offset;
    kq_tools_dump_log_begin(d);
    while (c.expected < rec.log_end_offset) {
        c.progress = false;
        rc = kq_store_read(s, c.expected, rec.log_end_offset, READ_CHUNK_BYTES, on_log_batch, &c);
        if (c.err != 0) {
            kq_tools_errorf("%s: %s", dir, c.errmsg);
            goto out_rec;
        }
        if (rc != 0) {
            kq_tools_errorf("%s: cannot read the log at offset %" PRId64 ": %s", dir, c.expected,
                            kq_err_message(rc));
            goto out_rec;
        }
        if (!c.progress) {
            kq_tools_errorf("%s: no batch at offset %" PRId64 " although the log ends at %" PRId64,
                            dir, c.expected, rec.log_end_offset);
            goto out_rec;
        }
    }
    kq_tools_log_summary sum = {.log_start = rec.log_start_offset,
                                .log_end = rec.log_end_offset,
                                .last_epoch = rec.last_epoch,
                                .qstate_epoch = rec.qstate.epoch,
                                .voted_id = rec.qstate.voted_id,
                                .leader_id = rec.qstate.leader_id};
    kq_tools_dump_log_end(d, &sum);
    /* A broker's data directory has an empty metadata log of its own: point at the right one. */
    snprintf(sub, sizeof sub, "%s/__cluster_metadata", dir);
    if (rec.log_end_offset == 0 && stat(sub, &st) == 0 && S_ISDIR(st.st_mode))
        fprintf(stderr,
                "kq log-dump: %s is a broker data directory: its metadata log is in %s, its "
                "partition logs are read with --partition-log %s\n",
                dir, sub, dir);
    ret = KQ_EXIT_OK;
out_rec:
    free(rec.epochs);
out:
    kq_store_close(s);
    return ret;
}

/* ---- --snapshot ----------------------------------------------------------------------------- */

static int dump_snapshot(const char *path, kq_tools_dump *d)
{
    kq_raft_snapshot_id id;
    uint8_t *payload = NULL;
    size_t len = 0;
    int64_t size = 0;
    char errbuf[512] = "";
    int rc = kq_store_snapshot_file_load(path, &id, &payload, &len, &size, errbuf, sizeof errbuf);

    if (rc != 0) {
        kq_tools_errorf("%s", errbuf[0] ? errbuf : kq_err_message(rc));
        return KQ_EXIT_FAILURE;
    }
    kq_tools_snapshot_info info = {id.end_offset, id.epoch, size};
    rc = kq_tools_dump_snapshot(d, &info, payload, len);
    free(payload);
    if (rc != 0) {
        kq_tools_errorf("%s: %s", path, d->err);
        return KQ_EXIT_FAILURE;
    }
    return KQ_EXIT_OK;
}

/* ---- --partition-log ------------------------------------------------------------------------ */

/* Topic id -> name, from the broker's copy of the metadata log (best effort). */
typedef struct topic_name {
    uint8_t id[16];
    char *name;
} topic_name;

typedef struct topic_names {
    topic_name *v;
    size_t n, cap;
    bool nomem;
} topic_names;

static void names_add(topic_names *t, const kq_record *r)
{
    if (r->type != KQ_REC_TOPIC || !r->topic.name || t->nomem)
        return;
    if (t->n == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 64;
        topic_name *nv = realloc(t->v, ncap * sizeof *nv);

        if (!nv) {
            t->nomem = true;
            return;
        }
        t->v = nv;
        t->cap = ncap;
    }
    t->v[t->n].name = strdup(r->topic.name);
    if (!t->v[t->n].name) {
        t->nomem = true;
        return;
    }
    memcpy(t->v[t->n].id, r->topic.topic_id, 16);
    t->n++;
}

static void names_add_records(topic_names *t, const uint8_t *buf, size_t len)
{
    size_t pos = 0;

    while (pos < len) {
        kq_record r;

        if (kq_record_decode_next(buf, len, &pos, &r, NULL, 0) != 0)
            return; /* names are labels only; log-dump --dir reports damage */
        names_add(t, &r);
        kq_record_free(&r);
    }
}

typedef struct names_read {
    topic_names *t;
    int64_t next; /* the offset after the last batch seen */
} names_read;

static int names_batch(void *arg, int64_t base_offset, int32_t epoch, int32_t count,
                       uint32_t crc32c, const uint8_t *records, size_t len)
{
    names_read *nr = arg;

    (void)epoch;
    (void)crc32c;
    names_add_records(nr->t, records, len);
    nr->next = base_offset + count;
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    return memcmp(((const topic_name *)a)->id, ((const topic_name *)b)->id, 16);
}

/* Every topic of the broker's metadata (<data dir>/__cluster_metadata): its latest snapshot
 * and its log. Silently nothing when there is none or it cannot be read. */
static void names_load(topic_names *t, const char *data_dir)
{
    char dir[4096], errbuf[512];
    kq_store *s = NULL;
    kq_store_recovered rec;
    struct stat st;

    snprintf(dir, sizeof dir, "%s/__cluster_metadata", data_dir);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return;
    if (kq_store_open_readonly(dir, &s, errbuf, sizeof errbuf) != 0) {
        kq_store_close(s);
        return;
    }
    if (kq_store_view_begin(s) != 0 || kq_store_recover(s, &rec) != 0) {
        kq_store_close(s);
        return;
    }
    if (rec.snapshot.end_offset > 0) {
        uint8_t *payload = NULL;
        size_t len = 0;

        if (kq_store_snapshot_load(s, rec.snapshot, &payload, &len, errbuf, sizeof errbuf) == 0)
            names_add_records(t, payload, len);
        free(payload);
    }
    for (names_read nr = {t, rec.log_start_offset}; nr.next < rec.log_end_offset;) {
        int64_t from = nr.next;

        if (kq_store_read(s, from, rec.log_end_offset, READ_CHUNK_BYTES, names_batch, &nr) != 0 ||
            nr.next <= from)
            break;
    }
    free(rec.epochs);
    kq_store_close(s);
    /* By id; a topic in both the snapshot and the log appears twice (an id keeps its name). */
    if (t->n > 1)
        qsort(t->v, t->n, sizeof *t->v, cmp_name);
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (k > 0 && !memcmp(t->v[k - 1].id, t->v[i].id, 16)) {
            free(t->v[i].name);
            continue;
        }
        t->v[k++] = t->v[i];
    }
    t->n = k;
}

static const char *names_find(const topic_names *t, const uint8_t id[16])
{
    topic_name key;
    const topic_name *hit;

    if (t->n == 0)
        return NULL;
    memcpy(key.id, id, 16);
    hit = bsearch(&key, t->v, t->n, sizeof *t->v, cmp_name);
    return hit ? hit->name : NULL;
}

static void names_free(topic_names *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].name);
    free(t->v);
}

typedef struct plog_ctx {
    kq_tools_dump *d;
    int64_t next; /* the offset after the last batch printed */
    int err;
} plog_ctx;

static int on_plog_batch(void *arg, const kq_plog_batch *b)
{
    plog_ctx *c = arg;
    int rc = kq_tools_dump_plog_batch(c->d, b);

    if (rc != 0) {
        c->err = rc;
        return 1;
    }
    c->next = b->base_offset + b->count;
    return 0;
}

static int dump_partition(kq_plog *p, const char *dir, const kq_plog_tp *tp,
                          const topic_names *names, kq_tools_dump *d)
{
    kq_tools_plog_partition part = {.tp = *tp, .topic = names_find(names, tp->topic_id)};
    kq_epoch_entry *eps = NULL;
    char id[KQ_UUID_STR_LEN + 1];
    int rc;

    kq_uuid_format(tp->topic_id, id);
    if ((rc = kq_plog_state_of(p, tp, &part.state)) != 0 ||
        (rc = kq_plog_epochs(p, tp, &eps, &part.n_epochs)) != 0) {
        kq_tools_errorf("%s: cannot read partition %s-%" PRId32 ": %s", dir, id, tp->partition,
                        kq_err_message(rc));
        return KQ_EXIT_FAILURE;
    }
    part.epochs = eps;
    kq_tools_dump_plog_partition(d, &part);
    free(eps);
    for (plog_ctx c = {d, part.state.log_start_offset, 0}; c.next < part.state.log_end_offset;) {
        int64_t from = c.next;

        rc = kq_plog_read(p, tp, from, INT64_MAX, READ_CHUNK_BYTES, on_plog_batch, &c);
        if (c.err != 0) {
            kq_tools_errorf("%s: partition %s-%" PRId32 ": %s", dir, id, tp->partition, d->err);
            return KQ_EXIT_FAILURE;
        }
        if (rc != 0) {
            kq_tools_errorf("%s: cannot read partition %s-%" PRId32 " at offset %" PRId64 ": %s",
                            dir, id, tp->partition, from, kq_err_message(rc));
            return KQ_EXIT_FAILURE;
        }
        if (c.next <= from) {
            kq_tools_errorf("%s: partition %s-%" PRId32 ": no batch at offset %" PRId64
                            " although its log ends at %" PRId64,
                            dir, id, tp->partition, from, part.state.log_end_offset);
            return KQ_EXIT_FAILURE;
        }
    }
    kq_tools_dump_plog_partition_end(d);
    return KQ_EXIT_OK;
}

static int dump_partition_log(const char *dir, const uint8_t *topic_id, int64_t partition,
                              kq_tools_dump *d)
{
    kq_plog *p = NULL;
    kq_plog_tp *tps = NULL;
    size_t n = 0;
    topic_names names = {0};
    char errbuf[512] = "";
    int ret = KQ_EXIT_FAILURE;
    int rc = kq_plog_open_readonly(dir, &p, errbuf, sizeof errbuf);

    if (rc == 0 && (rc = kq_plog_view_begin(p)) != 0)
        snprintf(errbuf, sizeof errbuf, "cannot read the partition logs in %s: %s", dir,
                 kq_err_message(rc));
    if (rc != 0) {
        kq_tools_errorf("%s", errbuf[0] ? errbuf : kq_err_message(rc));
        goto out;
    }
    if ((rc = kq_plog_list(p, &tps, &n)) != 0) {
        kq_tools_errorf("cannot list the partitions in %s: %s", dir, kq_err_message(rc));
        goto out;
    }
    names_load(&names, dir);
    kq_tools_dump_plog_begin(d);
    for (size_t i = 0; i < n; i++) {
        if ((topic_id && memcmp(tps[i].topic_id, topic_id, 16) != 0) ||
            (partition >= 0 && tps[i].partition != partition))
            continue;
        if (dump_partition(p, dir, &tps[i], &names, d) != KQ_EXIT_OK)
            goto out;
    }
    kq_tools_dump_plog_end(d);
    ret = KQ_EXIT_OK;
out:
    names_free(&names);
    free(tps);
    kq_plog_close(p);
    return ret;
}

/* ---- the command ---------------------------------------------------------------------------- */

int kq_cmd_log_dump(int argc, char **argv)
{
    static const char cmd[] = "log-dump";
    static const struct option opts[] = {
        {"dir", required_argument, NULL, 'd'},
        {"snapshot", required_argument, NULL, OPT_SNAPSHOT},
        {"partition-log", required_argument, NULL, OPT_PARTITION_LOG},
        {"topic-id", required_argument, NULL, OPT_TOPIC_ID},
        {"partition", required_argument, NULL, OPT_PARTITION},
        {"print-values", no_argument, NULL, OPT_PRINT_VALUES},
        {"lines", no_argument, NULL, OPT_LINES},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *dir = NULL, *snapshot = NULL, *plog = NULL, *topic_id_arg = NULL;
    bool json = false, lines = false, print_values = false;
    int64_t partition = -1;
    uint8_t topic_id[16];
    kq_tools_dump *d;
    char ob[64];
    int ret;

    optind = 0;
    for (;;) {
        int c = getopt_long(argc, argv, ":d:h", opts, NULL);
        if (c == -1)
            break;
        switch (c) {
        case 'd':
            dir = optarg;
            break;
        case OPT_SNAPSHOT:
            snapshot = optarg;
            break;
        case OPT_PARTITION_LOG:
            plog = optarg;
            break;
        case OPT_TOPIC_ID:
            topic_id_arg = optarg;
            if (!kq_uuid_parse(optarg, topic_id))
                return kq_tools_usage_error(cmd, LOGDUMP_USAGE,
                                            "--topic-id '%s' is not a 22-character base64 uuid",
                                            optarg);
            break;
        case OPT_PARTITION:
            if (!kq_tools_parse_int(optarg, 0, INT32_MAX, &partition))
                return kq_tools_usage_error(cmd, LOGDUMP_USAGE,
                                            "--partition '%s' is not an integer >= 0", optarg);
            break;
        case OPT_PRINT_VALUES:
            print_values = true;
            break;
        case OPT_LINES:
            lines = true;
            break;
        case OPT_JSON:
            json = true;
            break;
        case 'h':
        case OPT_HELP:
            fputs(LOGDUMP_USAGE, stdout);
            return KQ_EXIT_OK;
        case ':':
            return kq_tools_usage_error(cmd, LOGDUMP_USAGE, "option '%s' needs a value",
                                        kq_tools_bad_option(argv, ob, sizeof ob));
        default:
            return kq_tools_usage_error(cmd, LOGDUMP_USAGE, "unknown option '%s'",
                                        kq_tools_bad_option(argv, ob, sizeof ob));
        }
    }
    if (optind < argc)
        return kq_tools_usage_error(cmd, LOGDUMP_USAGE, "unexpected argument '%s'", argv[optind]);
    if ((dir != NULL) + (snapshot != NULL) + (plog != NULL) != 1)
        return kq_tools_usage_error(cmd, LOGDUMP_USAGE,
                                    "give exactly one of --dir DIR, --snapshot FILE or "
                                    "--partition-log DIR");
    if ((dir && !dir[0]) || (snapshot && !snapshot[0]) || (plog && !plog[0]))
        return kq_tools_usage_error(cmd, LOGDUMP_USAGE, "an empty path was given");
    if (json && lines)
        return kq_tools_usage_error(cmd, LOGDUMP_USAGE, "--json and --lines exclude each other");
    if (!plog && (print_values || topic_id_arg || partition >= 0))
        return kq_tools_usage_error(cmd, LOGDUMP_USAGE,
                                    "--print-values, --topic-id and --partition go with "
                                    "--partition-log");
    if (plog && lines)
        return kq_tools_usage_error(cmd, LOGDUMP_USAGE,
                                    "--lines goes with --dir and --snapshot (metadata records)");

    d = malloc(sizeof *d);
    if (!d) {
        kq_tools_errorf("out of memory");
        return KQ_EXIT_FAILURE;
    }
    kq_tools_dump_init(d, stdout,
                       json    ? KQ_TOOLS_DUMP_JSON
                       : lines ? KQ_TOOLS_DUMP_LINES
                               : KQ_TOOLS_DUMP_TEXT,
                       print_values);
    if (dir)
        ret = dump_dir(dir, d);
    else if (snapshot)
        ret = dump_snapshot(snapshot, d);
    else
        ret = dump_partition_log(plog, topic_id_arg ? topic_id : NULL, partition, d);
    free(d);
    return ret;
}
