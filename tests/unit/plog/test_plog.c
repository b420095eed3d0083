/*
 * kq_plog behaviour: broker data-directory identity checks and their operator messages,
 * partitions (create/delete/list), append/read round trips and boundaries, truncation with
 * epoch entries, endOffsetForEpoch (kraft-semantics 4.6), HW and partition-epoch checkpoints,
 * transactions (abort, validation errors), CRC-detected corruption, restart exactness.
 *
 * Built twice: against the LMDB partition logs, and with KQ_PLOG_TEST_MEM against the
 * simulator's in-memory ones (tests/lib/plog_mem.h), where "reopen" is a crash and a restart
 * on the same disk. The contract tests run on both; identity, read-only, view and on-disk
 * corruption tests are LMDB's only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <inttypes.h>
#include <limits.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kq/data_codec.h"
#include "kq/error.h"
#include "kq/plog.h"
#include "kq/util.h"
#include "plog_test_util.h"
#ifdef KQ_PLOG_TEST_MEM
#include "plog_mem.h"
#endif

typedef struct fixture {
    char root[512];     /* removed at teardown */
    char dir[PATH_MAX]; /* root/data, not created */
    kq_plog *p;
#ifdef KQ_PLOG_TEST_MEM
    kq_plog_mem_disk *disk;
#endif
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (f == NULL || tmpdir_make(f->root, sizeof(f->root)) != 0)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "%s/data", f->root);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    kq_plog_close(f->p);
#ifdef KQ_PLOG_TEST_MEM
    kq_plog_mem_disk_free(f->disk);
#endif
    tmpdir_remove(f->root);
    free(f);
    return 0;
}

#ifdef KQ_PLOG_TEST_MEM
static void format_and_open(fixture *f)
{
    kq_store_identity id = {.cluster_id = TEST_CLUSTER_ID, .node_id = 1};
    f->disk = kq_plog_mem_disk_new(&id);
    assert_non_null(f->disk);
    assert_int_equal(kq_plog_mem_open(f->disk, &f->p), 0);
    assert_int_equal(kq_plog_identity_of(f->p)->node_id, 1);
    kq_plog *second;
    assert_int_equal(kq_plog_mem_open(f->disk, &second), KQ_ERR_INVALID_REQUEST);
}

/* A crash (whatever was not committed is lost) and a restart on the same disk. */
static void reopen(fixture *f)
{
    kq_plog_close(f->p);
    f->p = NULL;
    assert_int_equal(kq_plog_mem_open(f->disk, &f->p), 0);
}
#else
static void format_and_open(fixture *f)
{
    char err[512];
    assert_int_equal(kq_plog_format(f->dir, TEST_CLUSTER_ID, 1, NULL, err, sizeof(err)), 0);
    assert_int_equal(kq_plog_open(f->dir, TEST_CLUSTER_ID, 1, &f->p, err, sizeof(err)), 0);
}

static void reopen(fixture *f)
{
    char err[512];
    kq_plog_close(f->p);
    f->p = NULL;
    assert_int_equal(kq_plog_open(f->dir, TEST_CLUSTER_ID, 1, &f->p, err, sizeof(err)), 0);
}
#endif

#define SEEN_MAX 256
typedef struct seen {
    int n;
    int stop_after; /* 0: never stop */
    kq_plog_batch b[SEEN_MAX];
    int ok[SEEN_MAX]; /* content is what plog_test_append wrote */
    kq_plog_tp tp;
} seen;

static int collect(void *arg, const kq_plog_batch *b)
{
    seen *sn = arg;
    if (sn->n >= SEEN_MAX)
        return 1;
    sn->b[sn->n] = *b;
    sn->b[sn->n].records = NULL; /* not valid after the call */
    sn->ok[sn->n] = plog_test_batch_ok(&sn->tp, b, b->base_offset, b->leader_epoch, b->count);
    /* the stored CRC is the data plane's (a leader sends it to followers unchanged) */
    kq_data_batch db = {b->base_offset,    b->leader_epoch,  b->count,   b->crc32c, b->producer_id,
                        b->producer_epoch, b->base_sequence, b->records, b->len};
    sn->ok[sn->n] &= kq_data_batch_crc(&db) == b->crc32c;
    sn->n++;
    return sn->stop_after > 0 && sn->n >= sn->stop_after;
}

static void read_into(kq_plog *p, const kq_plog_tp *tp, int64_t from, int64_t to, size_t max,
                      seen *sn, int want_rc)
{
    memset(sn, 0, sizeof(*sn));
    sn->tp = *tp;
    assert_int_equal(kq_plog_read(p, tp, from, to, max, collect, sn), want_rc);
}

/* Appends batches (count 1 + i % 3) with the given epochs starting at `base`; returns the end. */
static int64_t append_epochs(kq_plog *p, const kq_plog_tp *tp, int64_t base, const int32_t *ep,
                             int n)
{
    for (int i = 0; i < n; i++) {
        int32_t count = 1 + i % 3;
        assert_int_equal(plog_test_append(p, tp, base, ep[i], count), 0);
        base += count;
    }
    return base;
}

#ifndef KQ_PLOG_TEST_MEM
/* ---- identity ---------------------------------------------------------------------------- */

static void test_format_open_identity(void **state)
{
    fixture *f = *state;
    char err[512];
    kq_store_identity id;
    assert_int_equal(kq_plog_format(f->dir, TEST_CLUSTER_ID, 7, &id, err, sizeof(err)), 0);
    assert_int_equal(kq_plog_open(f->dir, TEST_CLUSTER_ID, 7, &f->p, err, sizeof(err)), 0);
    const kq_store_identity *got = kq_plog_identity_of(f->p);
    assert_string_equal(got->cluster_id, TEST_CLUSTER_ID);
    assert_string_equal(got->directory_id, id.directory_id);
    assert_int_equal(got->node_id, 7);
    assert_string_equal(kq_plog_dir(f->p), f->dir);
    kq_plog_close(f->p);
    f->p = NULL;
    /* any cluster / any node */
    assert_int_equal(kq_plog_open(f->dir, NULL, -1, &f->p, err, sizeof(err)), 0);
    assert_string_equal(kq_plog_identity_of(f->p)->directory_id, id.directory_id);
    kq_plog_close(f->p);
    f->p = NULL;

    /* formatting again changes nothing */
    assert_int_equal(kq_plog_format(f->dir, TEST_CLUSTER_ID, 7, NULL, err, sizeof(err)),
                     KQ_ERR_ALREADY_FORMATTED);
    assert_non_null(strstr(err, "already formatted"));
    assert_int_equal(kq_plog_format(f->dir, "not-a-uuid", 7, NULL, err, sizeof(err)),
                     KQ_ERR_CONFIG);
    assert_non_null(strstr(err, "not-a-uuid"));

    /* wrong cluster: both ids named, and how to fix it */
    assert_int_equal(kq_plog_open(f->dir, TEST_OTHER_CLUSTER_ID, 7, &f->p, err, sizeof(err)),
                     KQ_ERR_MISMATCH);
    assert_null(f->p);
    assert_non_null(strstr(err, TEST_CLUSTER_ID));
    assert_non_null(strstr(err, TEST_OTHER_CLUSTER_ID));
    assert_non_null(strstr(err, "log.dirs"));
    /* wrong node */
    assert_int_equal(kq_plog_open(f->dir, TEST_CLUSTER_ID, 3, &f->p, err, sizeof(err)),
                     KQ_ERR_MISMATCH);
    assert_non_null(strstr(err, "stored node.id 7"));
    assert_non_null(strstr(err, "configured node.id 3"));
}

static void test_open_not_formatted(void **state)
{
    fixture *f = *state;
    char err[512];
    /* missing directory */
    assert_int_equal(kq_plog_open(f->dir, TEST_CLUSTER_ID, 1, &f->p, err, sizeof(err)),
                     KQ_ERR_NOT_FORMATTED);
    assert_null(f->p);
    assert_non_null(strstr(err, f->dir));
    assert_non_null(strstr(err, "kq storage format"));
    /* existing empty directory: still refused, and nothing is created in it */
    assert_int_equal(kq_plog_open(f->root, TEST_CLUSTER_ID, 1, &f->p, err, sizeof(err)),
                     KQ_ERR_NOT_FORMATTED);
    assert_non_null(strstr(err, "kq storage format"));
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/data.mdb", f->root);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(kq_plog_open("", TEST_CLUSTER_ID, 1, &f->p, err, sizeof(err)), KQ_ERR_CONFIG);
    assert_non_null(strstr(err, "log.dirs"));
}

/* ---- partitions, append, read ------------------------------------------------------------ */

#endif

static void test_roundtrip_and_reopen(void **state)
{
    fixture *f = *state;
    kq_plog_tp a = test_tp(1, 0), b = test_tp(1, 1);
    format_and_open(f);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &a, 4, 0), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &b, 2, 50), 0);
    const int32_t ep[] = {1, 1, 2, 2, 5, 5};
    int64_t end_a = append_epochs(f->p, &a, 0, ep, 6);
    int64_t end_b = append_epochs(f->p, &b, 50, ep, 3);
    assert_int_equal(kq_plog_set_hw(f->p, &a, 5), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    assert_int_equal(end_a, 12);
    assert_int_equal(end_b, 56);

    for (int round = 0; round < 2; round++) {
        kq_plog_state st;
        assert_int_equal(kq_plog_state_of(f->p, &a, &st), 0);
        assert_int_equal(st.log_start_offset, 0);
        assert_int_equal(st.log_end_offset, 12);
        assert_int_equal(st.high_watermark, 5);
        assert_int_equal(st.partition_epoch, 4);
        assert_int_equal(st.last_epoch, 5);
        assert_int_equal(kq_plog_state_of(f->p, &b, &st), 0);
        assert_int_equal(st.log_start_offset, 50);
        assert_int_equal(st.log_end_offset, 56);
        assert_int_equal(st.high_watermark, 50);
        assert_int_equal(st.last_epoch, 2);

        seen sn;
        read_into(f->p, &a, 0, INT64_MAX, SIZE_MAX, &sn, 0);
        assert_int_equal(sn.n, 6);
        int64_t base = 0;
        for (int i = 0; i < 6; i++) {
            assert_int_equal(sn.b[i].base_offset, base);
            assert_int_equal(sn.b[i].leader_epoch, ep[i]);
            assert_int_equal(sn.b[i].count, 1 + i % 3);
            assert_int_equal(sn.b[i].producer_id, 1000);
            assert_int_equal(sn.b[i].base_sequence, base);
            assert_true(sn.ok[i]);
            base += sn.b[i].count;
        }
        read_into(f->p, &b, 50, INT64_MAX, SIZE_MAX, &sn, 0);
        assert_int_equal(sn.n, 3);
        assert_int_equal(sn.b[0].base_offset, 50);
        assert_int_equal(sn.b[0].producer_id, 1001);

        kq_epoch_entry *eps = NULL;
        size_t n = 0;
        assert_int_equal(kq_plog_epochs(f->p, &a, &eps, &n), 0);
        assert_int_equal(n, 3);
        assert_int_equal(eps[0].epoch, 1);
        assert_int_equal(eps[0].start_offset, 0);
        assert_int_equal(eps[1].epoch, 2);
        assert_int_equal(eps[1].start_offset, 3);
        assert_int_equal(eps[2].epoch, 5);
        assert_int_equal(eps[2].start_offset, 7);
        free(eps);

        kq_plog_tp *tps = NULL;
        assert_int_equal(kq_plog_list(f->p, &tps, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(tps[0].partition, 0);
        assert_int_equal(tps[1].partition, 1);
        assert_memory_equal(tps[0].topic_id, a.topic_id, 16);
        free(tps);
        reopen(f);
    }
}

static void test_append_rejects(void **state)
{
    fixture *f = *state;
    kq_plog_tp a = test_tp(1, 0), missing = test_tp(2, 0), neg = test_tp(1, -1);
    uint8_t rec[4] = {1, 2, 3, 4};
    kq_plog_batch b = {.base_offset = 0, .leader_epoch = 3, .count = 1, .records = rec, .len = 4};
    format_and_open(f);

    /* no transaction */
    assert_int_equal(kq_plog_create_partition(f->p, &a, 0, 0), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_plog_append(f->p, &a, &b), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_plog_commit(f->p), KQ_ERR_INVALID_REQUEST);

    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_begin(f->p), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_plog_create_partition(f->p, &a, 0, 0), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &a, 0, 0), KQ_ERR_TOPIC_ALREADY_EXISTS);
    assert_int_equal(kq_plog_create_partition(f->p, &neg, 0, 0), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_plog_create_partition(f->p, &missing, 0, -5), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_plog_append(f->p, &missing, &b), KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    assert_int_equal(kq_plog_append(f->p, &a, &b), 0);
    /* overlap, gap, lower epoch, empty batch, NULL records, NULL batch */
    b.base_offset = 0;
    assert_int_equal(kq_plog_append(f->p, &a, &b), KQ_ERR_INVALID_REQUEST);
    b.base_offset = 2;
    assert_int_equal(kq_plog_append(f->p, &a, &b), KQ_ERR_INVALID_REQUEST);
    b.base_offset = 1;
    b.leader_epoch = 2;
    assert_int_equal(kq_plog_append(f->p, &a, &b), KQ_ERR_INVALID_REQUEST);
    b.leader_epoch = 3;
    b.count = 0;
    assert_int_equal(kq_plog_append(f->p, &a, &b), KQ_ERR_INVALID_REQUEST);
    b.count = 1;
    b.records = NULL;
    assert_int_equal(kq_plog_append(f->p, &a, &b), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_plog_append(f->p, &a, NULL), KQ_ERR_INVALID_REQUEST);
    b.base_offset = INT64_MAX;
    b.records = rec;
    assert_int_equal(kq_plog_append(f->p, &a, &b), KQ_ERR_INVALID_REQUEST);
    /* the rejections left the transaction usable */
    b.base_offset = 1;
    b.records = NULL;
    b.len = 0;
    assert_int_equal(kq_plog_append(f->p, &a, &b), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);

    kq_plog_state st;
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), 0);
    assert_int_equal(st.log_end_offset, 2);
    assert_int_equal(st.last_epoch, 3);
    assert_int_equal(kq_plog_state_of(f->p, &missing, &st), KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    seen sn;
    read_into(f->p, &missing, 0, INT64_MAX, SIZE_MAX, &sn, KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    kq_epoch_entry *eps = NULL;
    size_t n = 0;
    assert_int_equal(kq_plog_epochs(f->p, &missing, &eps, &n), KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    assert_null(eps);
    /* an empty batch round-trips */
    read_into(f->p, &a, 1, INT64_MAX, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 1);
    assert_int_equal(sn.b[0].len, 0);
}

/* A leadership that wrote nothing leaves an epoch entry at the LEO; a follower of a new leader
 * then continues an older epoch there (the replica core's cache drops the empty entry too). */
static void test_append_below_an_empty_epoch(void **state)
{
    fixture *f = *state;
    kq_plog_tp a = test_tp(1, 0);
    format_and_open(f);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &a, 0, 0), 0);
    assert_int_equal(plog_test_append(f->p, &a, 0, 1, 4), 0);
    assert_int_equal(kq_plog_assign_epoch(f->p, &a, 2), 0); /* e2 at 4, no batch */
    assert_int_equal(plog_test_append(f->p, &a, 4, 1, 2), 0);
    kq_epoch_entry *eps = NULL;
    size_t n = 0;
    assert_int_equal(kq_plog_epochs(f->p, &a, &eps, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(eps[0].epoch, 1);
    free(eps);
    /* below an epoch that has records: refused, nothing changed */
    assert_int_equal(plog_test_append(f->p, &a, 6, 0, 1), KQ_ERR_INVALID_REQUEST);
    /* two empty epochs, then one between them and the last with records */
    assert_int_equal(kq_plog_assign_epoch(f->p, &a, 3), 0);
    assert_int_equal(kq_plog_assign_epoch(f->p, &a, 5), 0);
    assert_int_equal(plog_test_append(f->p, &a, 6, 4, 1), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    reopen(f);
    assert_int_equal(kq_plog_epochs(f->p, &a, &eps, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(eps[1].epoch, 4);
    assert_int_equal(eps[1].start_offset, 6);
    free(eps);
    kq_plog_state st;
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), 0);
    assert_int_equal(st.last_epoch, 4);
    assert_int_equal(st.log_end_offset, 7);
}

static void test_read_boundaries(void **state)
{
    fixture *f = *state;
    kq_plog_tp a = test_tp(1, 3), empty = test_tp(1, 4);
    format_and_open(f);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &a, 0, 10), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &empty, 0, 7), 0);
    const int32_t ep[] = {1, 1, 1, 1, 1, 1}; /* bases 10,11,13,16,17,19; LEO 22 */
    int64_t end = append_epochs(f->p, &a, 10, ep, 6);
    assert_int_equal(end, 22);
    assert_int_equal(kq_plog_commit(f->p), 0);
    seen sn;

    /* from inside a batch returns the batch holding it */
    read_into(f->p, &a, 14, INT64_MAX, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 4);
    assert_int_equal(sn.b[0].base_offset, 13);
    assert_true(sn.ok[0] && sn.ok[3]);
    read_into(f->p, &a, 21, INT64_MAX, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 1);
    assert_int_equal(sn.b[0].base_offset, 19);
    /* at the LEO: nothing; outside [log start, LEO]: out of range */
    read_into(f->p, &a, 22, INT64_MAX, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 0);
    read_into(f->p, &a, 23, INT64_MAX, SIZE_MAX, &sn, KQ_ERR_OFFSET_OUT_OF_RANGE);
    read_into(f->p, &a, 9, INT64_MAX, SIZE_MAX, &sn, KQ_ERR_OFFSET_OUT_OF_RANGE);
    read_into(f->p, &a, -1, INT64_MAX, SIZE_MAX, &sn, KQ_ERR_OFFSET_OUT_OF_RANGE);
    read_into(f->p, &empty, 7, INT64_MAX, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 0);
    read_into(f->p, &empty, 0, INT64_MAX, SIZE_MAX, &sn, KQ_ERR_OFFSET_OUT_OF_RANGE);
    /* `to` bounds base offsets (a consumer reads below the HW) */
    read_into(f->p, &a, 10, 16, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 3);
    assert_int_equal(sn.b[2].base_offset, 13);
    read_into(f->p, &a, 10, 10, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 0);
    /* max_bytes: at least one whole batch, then only what fits */
    read_into(f->p, &a, 10, INT64_MAX, 0, &sn, 0);
    assert_int_equal(sn.n, 1);
    size_t two = plog_test_len(3, 10) + plog_test_len(3, 11);
    read_into(f->p, &a, 10, INT64_MAX, two, &sn, 0);
    assert_int_equal(sn.n, 2);
    read_into(f->p, &a, 10, INT64_MAX, two + plog_test_len(3, 13) - 1, &sn, 0);
    assert_int_equal(sn.n, 2);
    /* the callback can stop the read */
    memset(&sn, 0, sizeof(sn));
    sn.tp = a;
    sn.stop_after = 2;
    assert_int_equal(kq_plog_read(f->p, &a, 10, INT64_MAX, SIZE_MAX, collect, &sn), 0);
    assert_int_equal(sn.n, 2);
    assert_int_equal(kq_plog_read(f->p, &a, 10, INT64_MAX, SIZE_MAX, NULL, NULL),
                     KQ_ERR_INVALID_REQUEST);
}

/* ---- truncation and the epoch cache ------------------------------------------------------ */

static void expect_epochs(kq_plog *p, const kq_plog_tp *tp, const kq_epoch_entry *want,
                          size_t nwant)
{
    kq_epoch_entry *eps = NULL;
    size_t n = 0;
    assert_int_equal(kq_plog_epochs(p, tp, &eps, &n), 0);
    assert_int_equal(n, nwant);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(eps[i].epoch, want[i].epoch);
        assert_int_equal(eps[i].start_offset, want[i].start_offset);
    }
    free(eps);
}

static void test_truncate_with_epochs(void **state)
{
    fixture *f = *state;
    kq_plog_tp a = test_tp(1, 0), other = test_tp(1, 1);
    format_and_open(f);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &a, 0, 0), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &other, 0, 0), 0);
    /* bases 0(e1) 1(e1) 3(e3) 6(e3) 7(e5) 9(e5) 12(e6); LEO 13 */
    const int32_t ep[] = {1, 1, 3, 1 + 2, 5, 5, 6};
    assert_int_equal(append_epochs(f->p, &a, 0, ep, 7), 13);
    append_epochs(f->p, &other, 0, ep, 7);
    assert_int_equal(kq_plog_set_hw(f->p, &a, 12), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    const kq_epoch_entry all[] = {{1, 0}, {3, 3}, {5, 7}, {6, 12}};
    expect_epochs(f->p, &a, all, 4);

    assert_int_equal(kq_plog_begin(f->p), 0);
    /* not a boundary, past the LEO */
    assert_int_equal(kq_plog_truncate(f->p, &a, 8), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_plog_truncate(f->p, &a, 14), KQ_ERR_OFFSET_OUT_OF_RANGE);
    assert_int_equal(kq_plog_truncate(f->p, &a, -1), KQ_ERR_OFFSET_OUT_OF_RANGE);
    /* at the LEO: nothing changes */
    assert_int_equal(kq_plog_truncate(f->p, &a, 13), 0);
    /* to 7: epochs 5 and 6 started at >= 7 and go; HW lowered to 7 */
    assert_int_equal(kq_plog_truncate(f->p, &a, 7), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    const kq_epoch_entry after7[] = {{1, 0}, {3, 3}};
    expect_epochs(f->p, &a, after7, 2);
    kq_plog_state st;
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), 0);
    assert_int_equal(st.log_end_offset, 7);
    assert_int_equal(st.high_watermark, 7);
    assert_int_equal(st.last_epoch, 3);
    seen sn;
    read_into(f->p, &a, 0, INT64_MAX, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 4);
    /* the neighbouring partition is untouched */
    expect_epochs(f->p, &other, all, 4);
    assert_int_equal(kq_plog_state_of(f->p, &other, &st), 0);
    assert_int_equal(st.log_end_offset, 13);

    /* a new leader epoch continues the truncated log (epoch 4 < removed 5 is fine now) */
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(plog_test_append(f->p, &a, 7, 4, 2), 0);
    /* truncating to a boundary inside epoch 3 keeps epoch 3's entry (it starts at 3) */
    assert_int_equal(kq_plog_truncate(f->p, &a, 6), 0);
    const kq_epoch_entry after6[] = {{1, 0}, {3, 3}};
    expect_epochs(f->p, &a, after6, 2); /* the open txn's view */
    assert_int_equal(kq_plog_truncate(f->p, &a, 3), 0);
    const kq_epoch_entry after3[] = {{1, 0}};
    expect_epochs(f->p, &a, after3, 1);
    assert_int_equal(kq_plog_commit(f->p), 0);
    reopen(f);
    expect_epochs(f->p, &a, after3, 1);
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), 0);
    assert_int_equal(st.log_end_offset, 3);
    assert_int_equal(st.high_watermark, 3);

    /* to the log start (all batches), then below it */
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_truncate(f->p, &a, 0), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    expect_epochs(f->p, &a, NULL, 0);
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), 0);
    assert_int_equal(st.log_end_offset, 0);
    assert_int_equal(st.last_epoch, -1);

    kq_plog_tp late = test_tp(1, 2);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &late, 0, 100), 0);
    assert_int_equal(plog_test_append(f->p, &late, 100, 1, 3), 0);
    assert_int_equal(kq_plog_truncate(f->p, &late, 99), KQ_ERR_OFFSET_OUT_OF_RANGE);
    assert_int_equal(kq_plog_truncate(f->p, &late, 0), KQ_ERR_OFFSET_OUT_OF_RANGE);
    assert_int_equal(kq_plog_truncate(f->p, &late, 100), 0);
    /* truncate fully: restart empty at 250 */
    assert_int_equal(plog_test_append(f->p, &late, 100, 2, 3), 0);
    assert_int_equal(kq_plog_truncate_fully(f->p, &late, 250), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    assert_int_equal(kq_plog_state_of(f->p, &late, &st), 0);
    assert_int_equal(st.log_start_offset, 250);
    assert_int_equal(st.log_end_offset, 250);
    assert_int_equal(st.high_watermark, 250);
    assert_int_equal(st.last_epoch, -1);
    read_into(f->p, &late, 100, INT64_MAX, SIZE_MAX, &sn, KQ_ERR_OFFSET_OUT_OF_RANGE);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(plog_test_append(f->p, &late, 250, 3, 1), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    read_into(f->p, &late, 250, INT64_MAX, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 1);
    assert_true(sn.ok[0]);
}

static void expect_eofe(kq_plog *p, const kq_plog_tp *tp, int32_t epoch, int32_t want_epoch,
                        int64_t want_end)
{
    int32_t e = 99;
    int64_t end = 99;
    assert_int_equal(kq_plog_end_offset_for_epoch(p, tp, epoch, &e, &end), 0);
    if (e != want_epoch || end != want_end)
        fail_msg("endOffsetForEpoch(%" PRId32 ") = (%" PRId32 ", %" PRId64 "), want (%" PRId32
                 ", %" PRId64 ")",
                 epoch, e, end, want_epoch, want_end);
}

static void test_end_offset_for_epoch(void **state)
{
    fixture *f = *state;
    kq_plog_tp a = test_tp(1, 0), empty = test_tp(1, 1), missing = test_tp(9, 0);
    format_and_open(f);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &a, 0, 0), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &empty, 0, 0), 0);
    /* epochs 2@0, 4@3, 7@7; LEO 12 */
    const int32_t ep[] = {2, 2, 4, 4, 7, 7};
    assert_int_equal(append_epochs(f->p, &a, 0, ep, 6), 12);
    assert_int_equal(kq_plog_commit(f->p), 0);

    /* unknown epochs below the first cached one, and the undefined epoch */
    expect_eofe(f->p, &a, 0, KQ_PLOG_UNDEFINED_EPOCH, KQ_PLOG_UNDEFINED_OFFSET);
    expect_eofe(f->p, &a, 1, KQ_PLOG_UNDEFINED_EPOCH, KQ_PLOG_UNDEFINED_OFFSET);
    expect_eofe(f->p, &a, -1, KQ_PLOG_UNDEFINED_EPOCH, KQ_PLOG_UNDEFINED_OFFSET);
    /* cached epochs end where the next one starts */
    expect_eofe(f->p, &a, 2, 2, 3);
    expect_eofe(f->p, &a, 4, 4, 7);
    /* unknown epochs between cached ones: the largest smaller epoch and its end */
    expect_eofe(f->p, &a, 3, 2, 3);
    expect_eofe(f->p, &a, 5, 4, 7);
    expect_eofe(f->p, &a, 6, 4, 7);
    /* the latest epoch, and anything above it, ends at the LEO */
    expect_eofe(f->p, &a, 7, 7, 12);
    expect_eofe(f->p, &a, 100, 7, 12);
    /* empty cache */
    expect_eofe(f->p, &empty, 5, KQ_PLOG_UNDEFINED_EPOCH, KQ_PLOG_UNDEFINED_OFFSET);
    int32_t e;
    int64_t end;
    assert_int_equal(kq_plog_end_offset_for_epoch(f->p, &missing, 1, &e, &end),
                     KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);

    /* a new leader assigns its epoch at the LEO before any batch (4.6) */
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_assign_epoch(f->p, &a, 6), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_plog_assign_epoch(f->p, &a, 7), 0); /* already the last: no-op */
    assert_int_equal(kq_plog_assign_epoch(f->p, &a, 9), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    expect_eofe(f->p, &a, 7, 7, 12);
    expect_eofe(f->p, &a, 8, 7, 12);
    expect_eofe(f->p, &a, 9, 9, 12);
    /* an epoch that never got a batch is replaced by the next one at the same offset */
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(plog_test_append(f->p, &a, 12, 10, 2), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    const kq_epoch_entry want[] = {{2, 0}, {4, 3}, {7, 7}, {10, 12}};
    expect_epochs(f->p, &a, want, 4);
    expect_eofe(f->p, &a, 9, 7, 12);
    expect_eofe(f->p, &a, 10, 10, 14);
    kq_plog_state st;
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), 0);
    assert_int_equal(st.last_epoch, 10);
}

/* ---- checkpoints, transactions, deletion ------------------------------------------------- */

static void test_hw_and_partition_epoch(void **state)
{
    fixture *f = *state;
    kq_plog_tp a = test_tp(1, 0);
    format_and_open(f);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &a, 3, 5), 0);
    const int32_t ep[] = {1, 1, 1};
    assert_int_equal(append_epochs(f->p, &a, 5, ep, 3), 11);
    assert_int_equal(kq_plog_set_hw(f->p, &a, 12), KQ_ERR_OFFSET_OUT_OF_RANGE);
    assert_int_equal(kq_plog_set_hw(f->p, &a, 4), KQ_ERR_OFFSET_OUT_OF_RANGE);
    assert_int_equal(kq_plog_set_hw(f->p, &a, 9), 0); /* need not be a batch boundary */
    assert_int_equal(kq_plog_set_partition_epoch(f->p, &a, 2), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_plog_set_partition_epoch(f->p, &a, 8), 0);
    kq_plog_tp missing = test_tp(1, 1);
    assert_int_equal(kq_plog_set_hw(f->p, &missing, 0), KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    assert_int_equal(kq_plog_set_partition_epoch(f->p, &missing, 0),
                     KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    assert_int_equal(kq_plog_commit(f->p), 0);
    reopen(f);
    kq_plog_state st;
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), 0);
    assert_int_equal(st.high_watermark, 9);
    assert_int_equal(st.partition_epoch, 8);
    assert_int_equal(st.log_start_offset, 5);
    assert_int_equal(st.log_end_offset, 11);
}

static void test_abort_and_txn_view(void **state)
{
    fixture *f = *state;
    kq_plog_tp a = test_tp(1, 0), b = test_tp(1, 1);
    format_and_open(f);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &a, 0, 0), 0);
    assert_int_equal(plog_test_append(f->p, &a, 0, 1, 2), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);

    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_true(kq_plog_in_txn(f->p));
    assert_int_equal(plog_test_append(f->p, &a, 2, 2, 2), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &b, 0, 0), 0);
    /* queries inside the transaction see its writes */
    kq_plog_state st;
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), 0);
    assert_int_equal(st.log_end_offset, 4);
    assert_int_equal(st.last_epoch, 2);
    assert_int_equal(kq_plog_state_of(f->p, &b, &st), 0);
    kq_plog_abort(f->p);
    assert_false(kq_plog_in_txn(f->p));
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), 0);
    assert_int_equal(st.log_end_offset, 2);
    assert_int_equal(st.last_epoch, 1);
    assert_int_equal(kq_plog_state_of(f->p, &b, &st), KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    /* after an abort the same append is accepted again */
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(plog_test_append(f->p, &a, 2, 2, 2), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), 0);
    assert_int_equal(st.log_end_offset, 4);
}

static void test_delete_and_list(void **state)
{
    fixture *f = *state;
    format_and_open(f);
    const int32_t ep[] = {1, 2, 3};
    assert_int_equal(kq_plog_begin(f->p), 0);
    /* created out of order; topic 2's ids sort after topic 1's */
    for (int t = 2; t >= 1; t--) {
        for (int32_t j = 2; j >= 0; j--) {
            kq_plog_tp tp = test_tp(t, j);
            assert_int_equal(kq_plog_create_partition(f->p, &tp, 0, 0), 0);
            append_epochs(f->p, &tp, 0, ep, 3);
        }
    }
    assert_int_equal(kq_plog_commit(f->p), 0);
    kq_plog_tp mid = test_tp(1, 1), missing = test_tp(3, 0);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_delete_partition(f->p, &mid), 0);
    assert_int_equal(kq_plog_delete_partition(f->p, &mid), KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    assert_int_equal(kq_plog_delete_partition(f->p, &missing), KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    assert_int_equal(kq_plog_commit(f->p), 0);
    reopen(f);

    kq_plog_tp *tps = NULL;
    size_t n = 0;
    assert_int_equal(kq_plog_list(f->p, &tps, &n), 0);
    assert_int_equal(n, 5);
    const int want_t[] = {1, 1, 2, 2, 2};
    const int32_t want_j[] = {0, 2, 0, 1, 2};
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(tps[i].topic_id[15], want_t[i]);
        assert_int_equal(tps[i].partition, want_j[i]);
        kq_plog_state st;
        assert_int_equal(kq_plog_state_of(f->p, &tps[i], &st), 0);
        assert_int_equal(st.log_end_offset, 6);
        seen sn;
        read_into(f->p, &tps[i], 0, INT64_MAX, SIZE_MAX, &sn, 0);
        assert_int_equal(sn.n, 3);
        assert_true(sn.ok[0] && sn.ok[1] && sn.ok[2]);
    }
    free(tps);
    /* re-created, the partition starts empty */
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &mid, 1, 0), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    kq_plog_state st;
    assert_int_equal(kq_plog_state_of(f->p, &mid, &st), 0);
    assert_int_equal(st.log_end_offset, 0);
    assert_int_equal(st.last_epoch, -1);
    expect_epochs(f->p, &mid, NULL, 0);
}

/* ---- many partitions --------------------------------------------------------------------- */

#define MANY_P 1000
#define MANY_B 100

static int32_t many_epoch(int64_t i)
{
    return (int32_t)(1 + i / 25); /* batch i of every partition */
}

/* Checks every partition of the interleaved workload; batch i has base 2 * i, count 2. */
static void verify_many(kq_plog *p)
{
    seen *sn = calloc(1, sizeof(*sn));
    assert_non_null(sn);
    kq_plog_tp *tps = NULL;
    size_t n = 0;
    assert_int_equal(kq_plog_list(p, &tps, &n), 0);
    assert_int_equal(n, MANY_P);
    for (int32_t j = 0; j < MANY_P; j++) {
        kq_plog_tp tp = test_tp(j % 4, j);
        kq_plog_state st;
        assert_int_equal(kq_plog_state_of(p, &tp, &st), 0);
        assert_int_equal(st.log_start_offset, j);
        assert_int_equal(st.log_end_offset, j + 2 * MANY_B);
        assert_int_equal(st.high_watermark, j + 2 * MANY_B - 2);
        assert_int_equal(st.last_epoch, many_epoch(MANY_B - 1));
        int64_t next = j;
        int batches = 0;
        while (next < st.log_end_offset) {
            read_into(p, &tp, next, INT64_MAX, 400, sn, 0);
            assert_true(sn->n > 0);
            for (int i = 0; i < sn->n; i++, batches++) {
                assert_int_equal(sn->b[i].base_offset, next);
                assert_int_equal(sn->b[i].leader_epoch, many_epoch(batches));
                assert_true(sn->ok[i]);
                next += sn->b[i].count;
            }
        }
        assert_int_equal(batches, MANY_B);
        const kq_epoch_entry want[] = {{1, j}, {2, j + 50}, {3, j + 100}, {4, j + 150}};
        expect_epochs(p, &tp, want, 4);
    }
    free(tps);
    free(sn);
}

static void test_many_partitions_interleaved(void **state)
{
    fixture *f = *state;
    format_and_open(f);
    assert_int_equal(kq_plog_begin(f->p), 0);
    for (int32_t j = 0; j < MANY_P; j++) {
        kq_plog_tp tp = test_tp(j % 4, j);
        assert_int_equal(kq_plog_create_partition(f->p, &tp, 0, j), 0);
    }
    assert_int_equal(kq_plog_commit(f->p), 0);
    /* one transaction per "loop iteration", each appending to every partition */
    for (int64_t i = 0; i < MANY_B; i++) {
        assert_int_equal(kq_plog_begin(f->p), 0);
        for (int32_t j = 0; j < MANY_P; j++) {
            kq_plog_tp tp = test_tp(j % 4, j);
            assert_int_equal(plog_test_append(f->p, &tp, j + 2 * i, many_epoch(i), 2), 0);
            if (i > 0)
                assert_int_equal(kq_plog_set_hw(f->p, &tp, j + 2 * i), 0);
        }
        assert_int_equal(kq_plog_commit(f->p), 0);
    }
    verify_many(f->p);
    reopen(f);
    verify_many(f->p);
}

#ifndef KQ_PLOG_TEST_MEM
/* ---- corruption -------------------------------------------------------------------------- */

/* XORs `mask` into byte `at` (from the end if negative) of a stored value, through raw LMDB. */
static void corrupt_value(const char *dir, const char *db, const uint8_t *key, size_t klen, long at,
                          uint8_t mask)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k = {klen, (void *)key}, v;
    uint8_t copy[512];
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 16), 0);
    assert_int_equal(mdb_env_set_mapsize(env, (size_t)1 << 40), 0);
    assert_int_equal(mdb_env_open(env, dir, 0, 0640), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, db, 0, &dbi), 0);
    assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
    assert_true(v.mv_size <= sizeof(copy));
    memcpy(copy, v.mv_data, v.mv_size);
    size_t i = at >= 0 ? (size_t)at : v.mv_size - (size_t)(-at);
    assert_true(i < v.mv_size);
    copy[i] ^= mask;
    v.mv_data = copy;
    assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

static void batch_key(uint8_t *key, const kq_plog_tp *tp, int64_t base)
{
    memcpy(key, tp->topic_id, 16);
    for (int i = 0; i < 4; i++)
        key[16 + i] = (uint8_t)((uint32_t)tp->partition >> (24 - 8 * i));
    for (int i = 0; i < 8; i++)
        key[20 + i] = (uint8_t)((uint64_t)base >> (56 - 8 * i));
}

/* kq log-dump --partition-log: a read-only handle reads what a broker wrote, refuses every
 * write, and leaves data.mdb byte for byte as it was (even on a directory no broker has opened:
 * the partition databases are not created). */
static void test_readonly_open_reads_and_changes_nothing(void **state)
{
    fixture *f = *state;
    char err[512], path[PATH_MAX + 16], nope[PATH_MAX + 16];
    kq_plog *ro = NULL;
    kq_plog_tp *tps = NULL, tp = test_tp(1, 0), tp2 = test_tp(2, 3);
    kq_plog_state st;
    kq_epoch_entry *eps = NULL;
    size_t n = 0;
    struct stat s0, s1;
    int32_t ep[] = {1, 1, 2};
    seen sn;

    assert_int_equal(kq_plog_format(f->dir, TEST_CLUSTER_ID, 1, NULL, err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/data.mdb", f->dir);
    assert_int_equal(stat(path, &s0), 0);
    assert_int_equal(kq_plog_open_readonly(f->dir, &ro, err, sizeof(err)), 0);
    assert_int_equal(kq_plog_list(ro, &tps, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(kq_plog_state_of(ro, &tp, &st), KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    kq_plog_close(ro);
    ro = NULL;
    assert_int_equal(stat(path, &s1), 0);
    assert_int_equal(s0.st_size, s1.st_size);
    assert_true(s0.st_mtim.tv_sec == s1.st_mtim.tv_sec && s0.st_mtim.tv_nsec == s1.st_mtim.tv_nsec);

    /* a broker writes two partitions */
    assert_int_equal(kq_plog_open(f->dir, TEST_CLUSTER_ID, 1, &f->p, err, sizeof(err)), 0);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &tp, 4, 0), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &tp2, 1, 5), 0);
    int64_t end = append_epochs(f->p, &tp, 0, ep, 3);
    assert_int_equal(kq_plog_commit(f->p), 0);
    kq_plog_close(f->p);
    f->p = NULL;

    assert_int_equal(stat(path, &s0), 0);
    assert_int_equal(kq_plog_open_readonly(f->dir, &ro, err, sizeof(err)), 0);
    assert_int_equal(kq_plog_identity_of(ro)->node_id, 1);
    assert_int_equal(kq_plog_view_begin(ro), 0);
    assert_int_equal(kq_plog_list(ro, &tps, &n), 0);
    assert_int_equal(n, 2);
    free(tps);
    assert_int_equal(kq_plog_state_of(ro, &tp, &st), 0);
    assert_int_equal(st.log_end_offset, end);
    assert_int_equal(st.partition_epoch, 4);
    assert_int_equal(kq_plog_epochs(ro, &tp, &eps, &n), 0);
    assert_int_equal(n, 2);
    free(eps);
    read_into(ro, &tp, 0, INT64_MAX, 1 << 20, &sn, 0);
    assert_int_equal(sn.n, 3);
    for (int i = 0; i < sn.n; i++)
        assert_true(sn.ok[i]);
    assert_int_equal(kq_plog_state_of(ro, &tp2, &st), 0);
    assert_int_equal(st.log_start_offset, 5);
    /* no writes */
    assert_int_equal(kq_plog_begin(ro), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_plog_create_partition(ro, &tp, 1, 0), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_plog_set_hw(ro, &tp, 1), KQ_ERR_INVALID_REQUEST);
    kq_plog_view_end(ro);
    assert_int_equal(kq_plog_state_of(ro, &tp, &st), 0); /* without a view too */
    kq_plog_close(ro);
    assert_int_equal(stat(path, &s1), 0);
    assert_int_equal(s0.st_size, s1.st_size);
    assert_true(s0.st_mtim.tv_sec == s1.st_mtim.tv_sec && s0.st_mtim.tv_nsec == s1.st_mtim.tv_nsec);

    /* a missing directory is not created */
    snprintf(nope, sizeof(nope), "%s/nope", f->root);
    assert_int_equal(kq_plog_open_readonly(nope, &ro, err, sizeof(err)), KQ_ERR_NOT_FORMATTED);
    assert_null(ro);
    assert_non_null(strstr(err, "kq storage format"));
    assert_int_not_equal(stat(nope, &s1), 0);
}

static void test_view_rules(void **state)
{
    fixture *f = *state;
    kq_plog_tp tp = test_tp(1, 0);

    format_and_open(f);
    assert_int_equal(kq_plog_view_begin(f->p), 0);
    assert_int_equal(kq_plog_view_begin(f->p), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_plog_begin(f->p), KQ_ERR_INVALID_REQUEST);
    kq_plog_view_end(f->p);
    kq_plog_view_end(f->p);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_view_begin(f->p), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_plog_create_partition(f->p, &tp, 0, 0), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    assert_int_equal(kq_plog_view_begin(f->p), 0); /* closed with the view open */
}

static void test_corruption_detected(void **state)
{
    fixture *f = *state;
    kq_plog_tp a = test_tp(1, 0), b = test_tp(1, 1);
    format_and_open(f);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &a, 0, 0), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &b, 0, 0), 0);
    /* bases 0,1,3,6,7 (LEO 9); base 3 has records, base 6 has some too */
    const int32_t ep[] = {1, 1, 1, 1, 1};
    int64_t end = append_epochs(f->p, &a, 0, ep, 5);
    append_epochs(f->p, &b, 0, ep, 5);
    assert_int_equal(kq_plog_commit(f->p), 0);
    kq_plog_close(f->p);
    f->p = NULL;

    uint8_t key[28];
    assert_true(plog_test_len(0, 3) > 0);
    batch_key(key, &a, 3);
    corrupt_value(f->dir, "plog_batches", key, sizeof(key), -1, 0x40); /* a record byte */
    batch_key(key, &a, 6);
    corrupt_value(f->dir, "plog_batches", key, sizeof(key), 13, 0x01); /* the producer id */

    reopen(f);
    seen sn;
    read_into(f->p, &a, 0, end, SIZE_MAX, &sn, KQ_ERR_CORRUPT_MESSAGE);
    assert_int_equal(sn.n, 0); /* nothing is handed out from a damaged read */
    read_into(f->p, &a, 3, end, SIZE_MAX, &sn, KQ_ERR_CORRUPT_MESSAGE);
    read_into(f->p, &a, 6, end, SIZE_MAX, &sn, KQ_ERR_CORRUPT_MESSAGE);
    /* the batches before the damage still read, and the last one */
    read_into(f->p, &a, 0, 3, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 2);
    read_into(f->p, &a, 7, end, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 1);
    assert_true(sn.ok[0]);
    /* the other partition is intact */
    read_into(f->p, &b, 0, end, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 5);
    /* a follower truncates the damaged suffix and refetches it */
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_truncate(f->p, &a, 3), 0);
    assert_int_equal(plog_test_append(f->p, &a, 3, 2, 3), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    read_into(f->p, &a, 0, INT64_MAX, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 3);
    assert_true(sn.ok[2]);

    /* damaged partition metadata (its own CRC) */
    kq_plog_close(f->p);
    f->p = NULL;
    corrupt_value(f->dir, "plog_partitions", key, 20, 10, 0x08);
    reopen(f);
    kq_plog_state st;
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), KQ_ERR_CORRUPT_MESSAGE);
    read_into(f->p, &a, 0, INT64_MAX, SIZE_MAX, &sn, KQ_ERR_CORRUPT_MESSAGE);
    assert_int_equal(kq_plog_state_of(f->p, &b, &st), 0);
    /* the operator's way out: delete the partition and let it be re-replicated */
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_delete_partition(f->p, &a), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &a, 0, 0), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), 0);
}

/* Deletes one stored entry through raw LMDB. */
static void delete_entry(const char *dir, const char *db, const uint8_t *key, size_t klen)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k = {klen, (void *)key};
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 16), 0);
    assert_int_equal(mdb_env_set_mapsize(env, (size_t)1 << 40), 0);
    assert_int_equal(mdb_env_open(env, dir, 0, 0640), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, db, 0, &dbi), 0);
    assert_int_equal(mdb_del(txn, dbi, &k, NULL), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

/* Found by fuzz_plog: when the batch holding `from` is missing and no entry at all sorts before
 * it (the partition's keys come first in the database), kq_plog_read returned 0 with no
 * batches, as at the LEO, so a fetcher would wait there forever; with another partition's
 * batch before it, the same damage was reported. Both are KQ_ERR_CORRUPT_MESSAGE now. */
static void test_missing_first_batch_detected(void **state)
{
    fixture *f = *state;
    kq_plog_tp first = test_tp(1, 0), second = test_tp(1, 1);
    const int32_t ep[] = {1, 1, 1}; /* bases 0, 1, 3 (LEO 6) */
    uint8_t key[28];
    seen sn;
    format_and_open(f);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &first, 0, 0), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &second, 0, 0), 0);
    int64_t end = append_epochs(f->p, &first, 0, ep, 3);
    append_epochs(f->p, &second, 0, ep, 3);
    assert_int_equal(kq_plog_commit(f->p), 0);
    kq_plog_close(f->p);
    f->p = NULL;
    batch_key(key, &first, 0);
    delete_entry(f->dir, "plog_batches", key, sizeof(key));
    batch_key(key, &second, 0);
    delete_entry(f->dir, "plog_batches", key, sizeof(key));

    reopen(f);
    read_into(f->p, &first, 0, end, SIZE_MAX, &sn, KQ_ERR_CORRUPT_MESSAGE); /* nothing before */
    assert_int_equal(sn.n, 0);
    read_into(f->p, &second, 0, end, SIZE_MAX, &sn, KQ_ERR_CORRUPT_MESSAGE); /* first's before */
    assert_int_equal(sn.n, 0);
    /* the batches that are there still read */
    read_into(f->p, &first, 1, end, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 2);
}

/* Writes an epoch-cache entry (epoch -> start offset) through raw LMDB. */
static void put_epoch_entry(const char *dir, const kq_plog_tp *tp, int32_t epoch, int64_t start)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    uint8_t key[24], val[8];
    MDB_val k = {sizeof key, key}, v = {sizeof val, val};
    memcpy(key, tp->topic_id, 16);
    for (int i = 0; i < 4; i++) {
        key[16 + i] = (uint8_t)((uint32_t)tp->partition >> (24 - 8 * i));
        key[20 + i] = (uint8_t)((uint32_t)epoch >> (24 - 8 * i));
    }
    for (int i = 0; i < 8; i++)
        val[i] = (uint8_t)((uint64_t)start >> (56 - 8 * i));
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 16), 0);
    assert_int_equal(mdb_env_set_mapsize(env, (size_t)1 << 40), 0);
    assert_int_equal(mdb_env_open(env, dir, 0, 0640), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "plog_epochs", 0, &dbi), 0);
    assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

/* Found by fuzz_plog: a damaged epoch-cache entry with a negative epoch became the partition's
 * last_epoch (kq_plog_state_of reported e.g. -16), and entries whose start offsets go backwards
 * were returned as the cache. Both are KQ_ERR_CORRUPT_MESSAGE now. */
static void test_damaged_epoch_cache_detected(void **state)
{
    fixture *f = *state;
    kq_plog_tp a = test_tp(1, 0), b = test_tp(1, 1);
    const int32_t ep[] = {1, 2, 2}; /* bases 0, 1, 3 (LEO 6); entries 1 -> 0, 2 -> 1 */
    kq_plog_state st;
    kq_epoch_entry *eps = NULL;
    size_t n = 0;
    format_and_open(f);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &a, 0, 0), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &b, 0, 0), 0);
    append_epochs(f->p, &a, 0, ep, 3);
    append_epochs(f->p, &b, 0, ep, 3);
    assert_int_equal(kq_plog_commit(f->p), 0);
    kq_plog_close(f->p);
    f->p = NULL;
    put_epoch_entry(f->dir, &a, -16, 5); /* sorts last: 0xfffffff0 */
    put_epoch_entry(f->dir, &b, 3, 0);   /* starts before epoch 2's start */
    reopen(f);
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), KQ_ERR_CORRUPT_MESSAGE);
    assert_int_equal(kq_plog_epochs(f->p, &a, &eps, &n), KQ_ERR_CORRUPT_MESSAGE);
    assert_int_equal(kq_plog_epochs(f->p, &b, &eps, &n), KQ_ERR_CORRUPT_MESSAGE);
    assert_null(eps);
    assert_int_equal(n, 0);
}

#endif

#ifdef KQ_PLOG_TEST_MEM
/* ---- the simulated disk: crashes and failed commits ------------------------------------- */

static void test_crash_loses_only_uncommitted(void **state)
{
    fixture *f = *state;
    kq_plog_tp a = test_tp(1, 0), b = test_tp(1, 1);
    format_and_open(f);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &a, 1, 0), 0);
    assert_int_equal(plog_test_append(f->p, &a, 0, 1, 2), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(plog_test_append(f->p, &a, 2, 2, 3), 0);
    assert_int_equal(kq_plog_truncate(f->p, &a, 2), 0);
    assert_int_equal(plog_test_append(f->p, &a, 2, 3, 1), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &b, 0, 7), 0);
    reopen(f); /* crash with the transaction open */
    kq_plog_state st;
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), 0);
    assert_int_equal(st.log_end_offset, 2);
    assert_int_equal(st.last_epoch, 1);
    assert_int_equal(kq_plog_state_of(f->p, &b, &st), KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    seen sn;
    read_into(f->p, &a, 0, INT64_MAX, SIZE_MAX, &sn, 0);
    assert_int_equal(sn.n, 1);
    assert_true(sn.ok[0]);
}

static void test_failed_commit_keeps_nothing(void **state)
{
    fixture *f = *state;
    kq_plog_tp a = test_tp(1, 0);
    format_and_open(f);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(kq_plog_create_partition(f->p, &a, 1, 0), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
    kq_plog_mem_fail_next_commit(f->disk, KQ_ERR_FULL);
    assert_int_equal(kq_plog_begin(f->p), 0);
    assert_int_equal(plog_test_append(f->p, &a, 0, 1, 2), 0);
    assert_int_equal(kq_plog_commit(f->p), KQ_ERR_FULL);
    /* as with LMDB: the handle is failed, only close is left */
    kq_plog_state st;
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), KQ_ERR_IO);
    assert_int_equal(kq_plog_begin(f->p), KQ_ERR_IO);
    reopen(f);
    assert_int_equal(kq_plog_state_of(f->p, &a, &st), 0);
    assert_int_equal(st.log_end_offset, 0);
    assert_int_equal(kq_plog_begin(f->p), 0); /* the fault was for one commit */
    assert_int_equal(plog_test_append(f->p, &a, 0, 1, 2), 0);
    assert_int_equal(kq_plog_commit(f->p), 0);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifndef KQ_PLOG_TEST_MEM
        cmocka_unit_test_setup_teardown(test_format_open_identity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_not_formatted, setup, teardown),
#endif
        cmocka_unit_test_setup_teardown(test_roundtrip_and_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_below_an_empty_epoch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_boundaries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncate_with_epochs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_end_offset_for_epoch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hw_and_partition_epoch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_and_txn_view, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_and_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_partitions_interleaved, setup, teardown),
#ifdef KQ_PLOG_TEST_MEM
        cmocka_unit_test_setup_teardown(test_crash_loses_only_uncommitted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_commit_keeps_nothing, setup, teardown),
#else
        cmocka_unit_test_setup_teardown(test_readonly_open_reads_and_changes_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_view_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corruption_detected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_first_batch_detected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_epoch_cache_detected, setup, teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
