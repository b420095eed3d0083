/*
 * Helpers shared by the kq_plog unit tests (header-only). Temporary directories and the
 * deterministic byte filler come from the store tests' header.
 */
#ifndef KQ_PLOG_TEST_UTIL_H
#define KQ_PLOG_TEST_UTIL_H

#include <stdint.h>
#include <string.h>

#include "../store/store_test_util.h"
#include "kq/plog.h"

/* Partition j of topic t: topic ids differ only in their last byte, so neighbouring
 * partitions' keys are adjacent in LMDB. */
static inline kq_plog_tp test_tp(int t, int32_t j)
{
    kq_plog_tp tp;
    memset(&tp, 0, sizeof(tp));
    tp.topic_id[0] = 0xA5;
    tp.topic_id[15] = (uint8_t)t;
    tp.partition = j;
    return tp;
}

/* Records length and bytes of the batch at `base` of partition `j`, a function of both. */
static inline size_t plog_test_len(int32_t j, int64_t base)
{
    return (size_t)((base * 7 + j * 13) % 61); /* 0..60: includes empty batches */
}

static inline void plog_test_fill(int32_t j, int64_t base, int32_t epoch, uint8_t *buf, size_t len)
{
    test_batch_fill(base * 7919 + j, epoch, buf, len);
}

/* Appends the deterministic batch (base, epoch, count) to partition j (topic 1 unless tp). */
static inline int plog_test_append(kq_plog *p, const kq_plog_tp *tp, int64_t base, int32_t epoch,
                                   int32_t count)
{
    uint8_t buf[64];
    kq_plog_batch b;
    memset(&b, 0, sizeof(b));
    b.base_offset = base;
    b.leader_epoch = epoch;
    b.count = count;
    b.producer_id = 1000 + tp->partition;
    b.producer_epoch = (int16_t)(epoch % 7);
    b.base_sequence = (int32_t)base;
    b.len = plog_test_len(tp->partition, base);
    plog_test_fill(tp->partition, base, epoch, buf, b.len);
    b.records = buf;
    return kq_plog_append(p, tp, &b);
}

/* 1 if b is exactly what plog_test_append wrote for (tp, base, epoch, count). */
static inline int plog_test_batch_ok(const kq_plog_tp *tp, const kq_plog_batch *b, int64_t base,
                                     int32_t epoch, int32_t count)
{
    uint8_t buf[64];
    size_t len = plog_test_len(tp->partition, base);
    if (b->base_offset != base || b->leader_epoch != epoch || b->count != count || b->len != len ||
        b->producer_id != 1000 + tp->partition || b->producer_epoch != (int16_t)(epoch % 7) ||
        b->base_sequence != (int32_t)base)
        return 0;
    plog_test_fill(tp->partition, base, epoch, buf, len);
    return len == 0 || memcmp(buf, b->records, len) == 0;
}

#endif
