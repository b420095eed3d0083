/* kq log-dump: print a metadata directory's log, one line per record, read-only. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kq/codec.h"
#include "kq/error.h"
#include "kq/store.h"
#include "kq_tools.h"

#define READ_CHUNK_BYTES (4u * 1024u * 1024u)

static const char LOGDUMP_USAGE[] =
    "Usage: kq log-dump --dir DIR [--json]\n"
    "\n"
    "  Opens the metadata directory DIR read-only (a running controller may keep using it)\n"
    "  and prints one line per record:\n"
    "    offset=<o> epoch=<e> batch=<base offset> <description>\n"
    "  then a summary line:\n"
    "    records=<n> batches=<b> log_start=<s> log_end=<e> last_epoch=<x> qstate_epoch=<q>\n"
    "    voted_id=<v> leader_id=<l>\n"
    "  -d, --dir DIR   the metadata directory (metadata.log.dir)\n"
    "  --json          one JSON object {\"records\": [...], \"summary\": {...}} instead\n";

enum { OPT_JSON = 1000, OPT_HELP };

typedef struct dump_ctx {
    bool json;
    kq_json *j;
    int64_t expected; /* base offset the next batch must have */
    int32_t batch_epoch;
    int64_t batch_base;
    int64_t n_records;
    int64_t n_batches;
    bool progress;
    int err;
    char errmsg[256];
} dump_ctx;

static const char *type_name(kq_record_type t)
{
    switch (t) {
    case KQ_RECORD_LEADER_CHANGE:
        return "leader_change";
    case KQ_RECORD_NOOP:
        return "noop";
    case KQ_RECORD_OPAQUE:
        return "opaque";
    default:
        return "unknown";
    }
}

static int on_record(void *arg, int64_t offset, kq_record_type type, const char *description)
{
    dump_ctx *d = arg;
    d->n_records++;
    if (d->json) {
        kq_json_begin_object(d->j);
        kq_json_key(d->j, "offset");
        kq_json_int(d->j, offset);
        kq_json_key(d->j, "epoch");
        kq_json_int(d->j, d->batch_epoch);
        kq_json_key(d->j, "batch");
        kq_json_int(d->j, d->batch_base);
        kq_json_key(d->j, "type");
        kq_json_string(d->j, type_name(type));
        kq_json_key(d->j, "description");
        kq_json_string(d->j, description ? description : "");
        kq_json_end_object(d->j);
    } else {
        printf("offset=%" PRId64 " epoch=%" PRId32 " batch=%" PRId64 " %s\n", offset,
               d->batch_epoch, d->batch_base, description ? description : "");
    }
    return 0;
}

static int on_batch(void *arg, int64_t base_offset, int32_t epoch, int32_t count, uint32_t crc32c,
                    const uint8_t *records, size_t len)
{
    dump_ctx *d = arg;
    if (base_offset != d->expected) {
        snprintf(d->errmsg, sizeof d->errmsg,
                 "batch at offset %" PRId64 " where offset %" PRId64 " was expected (gap or "
                 "overlap in the log)",
                 base_offset, d->expected);
        d->err = KQ_ERR_CORRUPT_MESSAGE;
        return 1;
    }
    if (count <= 0) {
        snprintf(d->errmsg, sizeof d->errmsg,
                 "batch at offset %" PRId64 " has record count %" PRId32, base_offset, count);
        d->err = KQ_ERR_CORRUPT_MESSAGE;
        return 1;
    }
    d->batch_epoch = epoch;
    d->batch_base = base_offset;
    int rc = kq_codec_walk_records(records, len, base_offset, count, on_record, d);
    if (rc != 0) {
        snprintf(d->errmsg, sizeof d->errmsg,
                 "batch at offset %" PRId64 " (epoch %" PRId32 ", %" PRId32
                 " records) does not decode: %s",
                 base_offset, epoch, count, kq_err_message(rc));
        d->err = rc;
        return 1;
    }
    d->n_batches++;
    d->expected = base_offset + count;
    d->progress = true;
    return 0;
}

int kq_cmd_log_dump(int argc, char **argv)
{
    static const char cmd[] = "log-dump";
    static const struct option opts[] = {
        {"dir", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *dir = NULL;
    bool json = false;
    kq_store *s = NULL;
    kq_store_recovered rec;
    bool have_rec = false;
    char errbuf[512] = "";
    int ret = KQ_EXIT_FAILURE;
    kq_json j;
    dump_ctx d;
    char ob[64];

    optind = 0;
    for (;;) {
        int c = getopt_long(argc, argv, ":d:h", opts, NULL);
        if (c == -1)
            break;
        switch (c) {
        case 'd':
            dir = optarg;
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
    if (dir == NULL || dir[0] == '\0')
        return kq_tools_usage_error(cmd, LOGDUMP_USAGE, "missing --dir DIR");

    int rc = kq_store_open_readonly(dir, &s, errbuf, sizeof errbuf);
    if (rc != 0) {
        if (errbuf[0])
            kq_tools_errorf("%s", errbuf);
        else
            kq_tools_errorf("cannot open metadata directory %s: %s", dir, kq_err_message(rc));
        s = NULL;
        goto out;
    }
    memset(&rec, 0, sizeof rec);
    rc = kq_store_recover(s, &rec);
    if (rc != 0) {
        kq_tools_errorf("cannot read the log state of %s: %s", dir, kq_err_message(rc));
        goto out;
    }
    have_rec = true;

    memset(&d, 0, sizeof d);
    d.json = json;
    d.j = &j;
    d.expected = rec.log_start_offset;
    if (json) {
        kq_json_init(&j, stdout);
        kq_json_begin_object(&j);
        kq_json_key(&j, "records");
        kq_json_begin_array(&j);
    }
    while (d.expected < rec.log_end_offset) {
        d.progress = false;
        rc = kq_store_read(s, d.expected, rec.log_end_offset, READ_CHUNK_BYTES, on_batch, &d);
        if (d.err != 0) {
            kq_tools_errorf("%s: %s", dir, d.errmsg);
            goto out;
        }
        if (rc != 0) {
            kq_tools_errorf("%s: cannot read the log at offset %" PRId64 ": %s", dir, d.expected,
                            kq_err_message(rc));
            goto out;
        }
        if (!d.progress) {
            kq_tools_errorf("%s: no batch at offset %" PRId64 " although the log ends at %" PRId64,
                            dir, d.expected, rec.log_end_offset);
            goto out;
        }
    }

    if (json) {
        kq_json_end_array(&j);
        kq_json_key(&j, "summary");
        kq_json_begin_object(&j);
        kq_json_key(&j, "records");
        kq_json_int(&j, d.n_records);
        kq_json_key(&j, "batches");
        kq_json_int(&j, d.n_batches);
        kq_json_key(&j, "log_start");
        kq_json_int(&j, rec.log_start_offset);
        kq_json_key(&j, "log_end");
        kq_json_int(&j, rec.log_end_offset);
        kq_json_key(&j, "last_epoch");
        kq_json_int(&j, rec.last_epoch);
        kq_json_key(&j, "qstate_epoch");
        kq_json_int(&j, rec.qstate.epoch);
        kq_json_key(&j, "voted_id");
        kq_json_int(&j, rec.qstate.voted_id);
        kq_json_key(&j, "leader_id");
        kq_json_int(&j, rec.qstate.leader_id);
        kq_json_end_object(&j);
        kq_json_end_object(&j);
        fputc('\n', stdout);
    } else {
        printf("records=%" PRId64 " batches=%" PRId64 " log_start=%" PRId64 " log_end=%" PRId64
               " last_epoch=%" PRId32 " qstate_epoch=%" PRId32 " voted_id=%" PRId32
               " leader_id=%" PRId32 "\n",
               d.n_records, d.n_batches, rec.log_start_offset, rec.log_end_offset, rec.last_epoch,
               rec.qstate.epoch, rec.qstate.voted_id, rec.qstate.leader_id);
    }
    ret = KQ_EXIT_OK;
out:
    if (have_rec)
        free(rec.epochs);
    if (s != NULL)
        kq_store_close(s);
    return ret;
}
