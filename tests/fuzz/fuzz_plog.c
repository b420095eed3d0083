/*
 * libFuzzer target: the partition-log readers on arbitrary stored keys and values.
 *
 * A broker data directory is formatted and opened once (creating the partition databases) in
 * a temporary directory. For every input, its databases are rewritten from the input
 * (fuzz_lmdb.h grammar after byte 0: databases 0 plog_partitions, 1 plog_batches,
 * 2 plog_epochs, 3 meta; fixed keys: index i -> partition i of one topic, followed by an 8-byte
 * offset (batches) or a 4-byte epoch (epochs) from the input; the CRC fix-up rewrites a
 * partition entry's or a batch's CRC), then a reader opens it (byte 0 bit 7: writable
 * kq_plog_open as a broker does, else kq_plog_open_readonly as kq log-dump does) and queries
 * every partition it lists: state, epoch cache, end offset for an epoch, and reads from the log
 * start and from a point byte 0 picks.
 *
 * Checks: every refusal is an error code (damage: KQ_ERR_CORRUPT_MESSAGE); nothing crashes or
 * leaks; a successful read returns contiguous batches starting with the one that holds
 * `from`, each with count >= 1, a CRC that matches kq_data_batch_crc, ending at or below the
 * LEO, within max_bytes (beyond the first); the state obeys log start <= HW and log start <=
 * LEO; end_offset_for_epoch answers an epoch <= the one asked, or undefined.
 */
#include "fuzz_check.h"
#include "fuzz_lmdb.h"
#include "fuzz_wire.h"
#include "kq/data_codec.h"
#include "kq/plog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CLUSTER "fMCL8kv1SWm87L_Md-I2hg"
#define MAX_DBS 16
#define MAX_BYTES 4096

static char *dir;
static const uint8_t topic[16] = {0x5e, 0xed, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};

static size_t make_key(unsigned db, uint8_t idx, const uint8_t **p, size_t left, uint8_t *key)
{
    size_t suffix = db == 1 ? 8 : db == 2 ? 4 : 0;

    if (db == 3) { /* meta: its only plog key */
        memcpy(key, "plog_format_version", 19);
        return 19;
    }
    if (left < suffix)
        return 0;
    memcpy(key, topic, 16);
    put_be32(key + 16, idx);
    memcpy(key + 20, *p, suffix);
    *p += suffix;
    return 20 + suffix;
}

static void fix(unsigned db, const uint8_t *key, size_t klen, uint8_t *val, size_t vlen)
{
    if (db == 0 && vlen == 25)
        put_be32(val + 21, kq_crc32c(0, val, 21));
    if (db == 1 && klen == 28 && vlen >= KQ_PLOG_BATCH_HEADER_LEN)
        put_be32(val, kq_crc32c(kq_crc32c(0, key + 20, 8), val + 4, vlen - 4));
}

static const fuzz_lmdb_target target = {
    {"plog_partitions", "plog_batches", "plog_epochs", "meta"}, make_key, fix};

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
    kq_plog *p = NULL;

    (void)argc;
    (void)argv;
    dir = fuzz_tmpdir("plog");
    if (kq_plog_format(dir, CLUSTER, 1, NULL, err, sizeof err) != 0 ||
        kq_plog_open(dir, CLUSTER, 1, &p, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_plog: cannot set up %s: %s\n", dir, err);
        abort();
    }
    kq_plog_close(p);
    fuzz_lmdb_save_meta(dir, MAX_DBS);
    atexit(cleanup);
    return 0;
}

typedef struct walk {
    int64_t from, next, leo;
    size_t bytes;
    int n;
} walk;

static int check_batch(void *arg, const kq_plog_batch *b)
{
    walk *w = arg;
    kq_data_batch d = {b->base_offset,    b->leader_epoch,  b->count,   b->crc32c, b->producer_id,
                       b->producer_epoch, b->base_sequence, b->records, b->len};

    FUZZ_CHECK(b->count >= 1);
    if (w->n == 0)
        FUZZ_CHECK(b->base_offset <= w->from && w->from < b->base_offset + b->count);
    else
        FUZZ_CHECK(b->base_offset == w->next);
    FUZZ_CHECK(b->base_offset + b->count <= w->leo);
    FUZZ_CHECK(kq_data_batch_crc(&d) == b->crc32c);
    if (b->len) {
        volatile uint8_t last = b->records[b->len - 1];
        (void)last;
    }
    w->bytes += b->len;
    if (w->n > 0)
        FUZZ_CHECK(w->bytes <= MAX_BYTES);
    w->next = b->base_offset + b->count;
    w->n++;
    return 0;
}

static void read_from(kq_plog *p, const kq_plog_tp *tp, const kq_plog_state *st, int64_t from)
{
    walk w = {from, from, st->log_end_offset, 0, 0};
    int rc = kq_plog_read(p, tp, from, INT64_MAX, MAX_BYTES, check_batch, &w);

    if (rc) {
        FUZZ_CHECK(rc == KQ_ERR_CORRUPT_MESSAGE ||
                   (rc == KQ_ERR_OFFSET_OUT_OF_RANGE &&
                    (from < st->log_start_offset || from > st->log_end_offset)));
        FUZZ_CHECK(w.n == 0);
        return;
    }
    if (from == st->log_end_offset)
        FUZZ_CHECK(w.n == 0);
    else
        FUZZ_CHECK(w.n >= 1);
}

static void partition(kq_plog *p, const kq_plog_tp *tp, uint8_t pick)
{
    kq_plog_state st;
    kq_epoch_entry *eps = NULL;
    size_t n = 0;
    int32_t ep;
    int64_t end, span;
    int rc = kq_plog_state_of(p, tp, &st);

    if (rc) {
        FUZZ_CHECK(rc == KQ_ERR_CORRUPT_MESSAGE);
        return;
    }
    FUZZ_CHECK(st.log_start_offset >= 0 && st.high_watermark >= st.log_start_offset &&
               st.log_end_offset >= st.log_start_offset && st.last_epoch >= -1);
    rc = kq_plog_epochs(p, tp, &eps, &n);
    FUZZ_CHECK(rc == 0 || rc == KQ_ERR_CORRUPT_MESSAGE);
    if (rc == 0 && n)
        FUZZ_CHECK(eps[n - 1].epoch == st.last_epoch);
    free(eps);
    const int32_t asks[] = {-1, 0, st.last_epoch, INT32_MAX, (int32_t)pick};
    for (size_t i = 0; i < sizeof asks / sizeof asks[0]; i++) {
        rc = kq_plog_end_offset_for_epoch(p, tp, asks[i], &ep, &end);
        FUZZ_CHECK(rc == 0 || rc == KQ_ERR_CORRUPT_MESSAGE);
        if (rc == 0)
            FUZZ_CHECK(ep <= asks[i] ||
                       (ep == KQ_PLOG_UNDEFINED_EPOCH && end == KQ_PLOG_UNDEFINED_OFFSET));
    }
    read_from(p, tp, &st, st.log_start_offset);
    span = st.log_end_offset - st.log_start_offset;
    if (span > 0)
        read_from(p, tp, &st, st.log_start_offset + pick % (span + (span < INT64_MAX)));
    read_from(p, tp, &st, st.log_end_offset);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kq_plog *p = NULL;
    kq_plog_tp *tps = NULL;
    size_t n = 0;
    char err[4400] = "";
    int rc;

    if (size < 1)
        return 0;
    fuzz_lmdb_write(dir, MAX_DBS, &target, data + 1, size - 1);

    if (data[0] & 0x80)
        rc = kq_plog_open(dir, CLUSTER, 1, &p, err, sizeof err);
    else
        rc = kq_plog_open_readonly(dir, &p, err, sizeof err);
    if (rc) {
        FUZZ_CHECK(rc != KQ_ERR_NOMEM && err[0] != '\0' && p == NULL);
        return 0;
    }
    rc = kq_plog_list(p, &tps, &n);
    FUZZ_CHECK(rc == 0 || rc == KQ_ERR_CORRUPT_MESSAGE);
    for (size_t i = 1; rc == 0 && i < n; i++) /* sorted by (topic id, partition) */
        FUZZ_CHECK(memcmp(tps[i - 1].topic_id, tps[i].topic_id, 16) < 0 ||
                   (!memcmp(tps[i - 1].topic_id, tps[i].topic_id, 16) &&
                    (uint32_t)tps[i - 1].partition < (uint32_t)tps[i].partition));
    for (size_t i = 0; i < n && i < 8; i++)
        if (tps[i].partition >= 0)
            partition(p, &tps[i], data[0]);
    free(tps);
    kq_plog_close(p);
    return 0;
}
