/*
 * The store as the Raft host's disk (kq/raft_host.h): every write opens the iteration's write
 * transaction if none is open; commit is kq_store_commit (synchronous).
 */
#include "kq/log.h"
#include "kq/store.h"

static int open_txn(kq_store *s)
{
    return kq_store_in_txn(s) ? 0 : kq_store_begin(s);
}

static int put_qstate(void *ctx, const kq_raft_qstate *qs)
{
    int rc = open_txn(ctx);

    return rc ? rc : kq_store_put_qstate(ctx, qs);
}

static int truncate_log(void *ctx, int64_t end_offset)
{
    int rc = open_txn(ctx);

    KQ_WARN("raft", "truncating log", "offset=%lld", (long long)end_offset);
    return rc ? rc : kq_store_truncate(ctx, end_offset);
}

static int append(void *ctx, int64_t base_offset, int32_t epoch, int32_t count,
                  const uint8_t *records, size_t len)
{
    int rc = open_txn(ctx);

    return rc ? rc : kq_store_append(ctx, base_offset, epoch, count, records, len);
}

static int remove_prefix(void *ctx, int64_t log_start)
{
    int rc = open_txn(ctx);

    if (rc == 0 && (rc = kq_store_delete_prefix(ctx, log_start)) == 0) {
        kq_store_snapshot_delete_older(ctx, 2);
        KQ_INFO("raft", "log prefix removed", "log_start=%lld", (long long)log_start);
    }
    return rc;
}

static int snapshot_chunk(void *ctx, kq_raft_snapshot_id id, int64_t position, const uint8_t *data,
                          size_t len)
{
    return kq_store_snapshot_part_write(ctx, id, position, data, len);
}

static void snapshot_abort(void *ctx, kq_raft_snapshot_id id)
{
    kq_store_snapshot_part_abort(ctx, id);
}

static bool pending(void *ctx)
{
    return kq_store_in_txn(ctx);
}

static int commit(void *ctx)
{
    return kq_store_commit(ctx);
}

kq_raft_disk kq_store_raft_disk(kq_store *s)
{
    return (kq_raft_disk){.ctx = s,
                          .put_qstate = put_qstate,
                          .truncate = truncate_log,
                          .append = append,
                          .remove_prefix = remove_prefix,
                          .snapshot_chunk = snapshot_chunk,
                          .snapshot_abort = snapshot_abort,
                          .pending = pending,
                          .commit = commit}; /* synchronous: no commit_start */
}
