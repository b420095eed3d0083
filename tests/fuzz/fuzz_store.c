/*
 * libFuzzer target: the metadata-log store's readers on arbitrary stored keys and values.
 *
 * A store is formatted once in a temporary directory. For every input, its "log", "epochs"
 * and "meta" databases are rewritten from the input (fuzz_lmdb.h grammar after byte 0:
 * databases 0 log, 1 epochs, 2 meta, 3 log; fixed keys: log index i -> offset i, epochs
 * index i -> epoch i, meta index i -> one of the meta key names; the CRC fix-up rewrites a
 * log value's records CRC), then the start-up path of a daemon runs on it: kq_store_open,
 * kq_store_recover, kq_store_verify with kq_record_check_batch, and kq_store_read (byte 0
 * picks where the read starts).
 *
 * Checks: every refusal is an error code with a message (damage is KQ_ERR_CORRUPT_MESSAGE);
 * nothing crashes or leaks. A store that verify accepts is one the daemon can rely on: read
 * back from its log start it yields contiguous batches up to its log end, with matching CRCs,
 * epochs that never decrease and records that decode.
 */
#include "fuzz_check.h"
#include "fuzz_lmdb.h"
#include "fuzz_wire.h"
#include "kq/records.h"
#include "kq/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CLUSTER "fMCL8kv1SWm87L_Md-I2hg"
#define MAX_DBS 8

static char *dir;

static const char *const meta_keys[] = {"quorum_state", "log_start", "format_version",
                                        "cluster_id",   "node_id",   "directory_id"};

static size_t make_key(unsigned db, uint8_t idx, const uint8_t **p, size_t left, uint8_t *key)
{
    (void)p;
    (void)left;
    if (db == 0 || db == 3) {
        put_be64(key, idx);
        return 8;
    }
    if (db == 1) {
        put_be32(key, idx);
        return 4;
    }
    memcpy(key, meta_keys[idx % 6], strlen(meta_keys[idx % 6]));
    return strlen(meta_keys[idx % 6]);
}

static void fix(unsigned db, const uint8_t *key, size_t klen, uint8_t *val, size_t vlen)
{
    (void)key;
    (void)klen;
    if ((db == 0 || db == 3) && vlen >= KQ_STORE_BATCH_HEADER_LEN)
        put_be32(val + 8,
                 kq_crc32c(0, val + KQ_STORE_BATCH_HEADER_LEN, vlen - KQ_STORE_BATCH_HEADER_LEN));
}

static const fuzz_lmdb_target target = {{"log", "epochs", "meta", "log"}, make_key, fix};

static void cleanup(void)
{
    fuzz_rmtree(dir);
    free(dir);
    fuzz_lmdb_free_meta();
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char err[512] = "";

    (void)argc;
    (void)argv;
    dir = fuzz_tmpdir("store");
    if (kq_store_format(dir, CLUSTER, 1, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_store: cannot format %s: %s\n", dir, err);
        abort();
    }
    fuzz_lmdb_save_meta(dir, MAX_DBS);
    atexit(cleanup);
    return 0;
}

typedef struct walk {
    const kq_store_recovered *rec;
    int64_t next;
    int32_t epoch;
    int32_t top;
    int batches;
} walk;

/* What verify promised, batch by batch. */
static int check_batch(void *arg, int64_t base, int32_t epoch, int32_t count, uint32_t crc,
                       const uint8_t *records, size_t len)
{
    walk *w = arg;
    char err[512];

    FUZZ_CHECK(base == w->next && count > 0 && epoch >= w->epoch);
    FUZZ_CHECK(kq_crc32c(0, records, len) == crc);
    if (w->rec->n_epochs > 0)
        FUZZ_CHECK(epoch <= w->top);
    FUZZ_CHECK(kq_record_check_batch(NULL, base, count, records, len, err, sizeof err) == 0);
    w->next = base + count;
    w->epoch = epoch;
    w->batches++;
    return 0;
}

static int count_cb(void *arg, int64_t base, int32_t epoch, int32_t count, uint32_t crc,
                    const uint8_t *records, size_t len)
{
    (void)base;
    (void)epoch;
    (void)count;
    (void)crc;
    (void)records;
    (void)len;
    ++*(int *)arg;
    return 0;
}

static void read_back(kq_store *s, const kq_store_recovered *rec)
{
    walk w = {rec, rec->log_start_offset, 0, rec->qstate.epoch, 0};

    if (rec->n_epochs > 0 && rec->epochs[rec->n_epochs - 1].epoch > w.top)
        w.top = rec->epochs[rec->n_epochs - 1].epoch;
    while (w.next < rec->log_end_offset) {
        int64_t at = w.next;

        FUZZ_CHECK(kq_store_read(s, at, rec->log_end_offset, 1 << 20, check_batch, &w) == 0);
        FUZZ_CHECK(w.next > at);
    }
    FUZZ_CHECK(w.next == rec->log_end_offset);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kq_store *s = NULL;
    kq_store_recovered rec;
    char err[4400] = "";
    int64_t from;
    int n = 0, rc;

    if (size < 1)
        return 0;
    fuzz_lmdb_write(dir, MAX_DBS, &target, data + 1, size - 1);

    rc = kq_store_open(dir, CLUSTER, 1, &s, err, sizeof err);
    if (rc) {
        FUZZ_CHECK(rc != KQ_ERR_NOMEM && err[0] != '\0' && s == NULL);
        return 0;
    }
    rc = kq_store_recover(s, &rec);
    if (rc) {
        FUZZ_CHECK(rc == KQ_ERR_CORRUPT_MESSAGE);
        FUZZ_CHECK(rec.epochs == NULL);
        kq_store_close(s);
        return 0;
    }
    rc = kq_store_verify(s, &rec, kq_record_check_batch, NULL, err, sizeof err);
    if (rc)
        FUZZ_CHECK(rc == KQ_ERR_CORRUPT_MESSAGE && strstr(err, dir));
    else
        read_back(s, &rec);

    /* An arbitrary read never crashes and refuses what is not a batch boundary. */
    switch (data[0] & 3) {
    case 0:
        from = rec.log_start_offset;
        break;
    case 1:
        from = rec.log_end_offset;
        break;
    case 2:
        from = data[0] >> 2;
        break;
    default:
        from = rec.log_start_offset < INT64_MAX ? rec.log_start_offset + 1 : 0;
    }
    rc = kq_store_read(s, from, INT64_MAX, 1 << 16, count_cb, &n);
    FUZZ_CHECK(rc == 0 || rc == KQ_ERR_CORRUPT_MESSAGE || rc == KQ_ERR_OFFSET_OUT_OF_RANGE ||
               rc == KQ_ERR_INVALID_REQUEST);
    if (rc)
        FUZZ_CHECK(n == 0);
    free(rec.epochs);
    kq_store_close(s);
    return 0;
}
