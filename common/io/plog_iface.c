/* The kq_plog calls: each dispatches to its handle's implementation (kq/plog.h "the
 * interface"). Nothing is checked here: every implementation checks its own arguments. */
#include "kq/plog.h"

void kq_plog_close(kq_plog *p)
{
    if (p != NULL)
        p->ops->close(p);
}

const kq_store_identity *kq_plog_identity_of(const kq_plog *p)
{
    return p->ops->identity_of(p);
}

int kq_plog_begin(kq_plog *p)
{
    return p->ops->begin(p);
}

int kq_plog_commit(kq_plog *p)
{
    return p->ops->commit(p);
}

void kq_plog_abort(kq_plog *p)
{
    p->ops->abort(p);
}

int kq_plog_in_txn(const kq_plog *p)
{
    return p->ops->in_txn(p);
}

int kq_plog_create_partition(kq_plog *p, const kq_plog_tp *tp, int32_t partition_epoch,
                             int64_t log_start_offset)
{
    return p->ops->create_partition(p, tp, partition_epoch, log_start_offset);
}

int kq_plog_delete_partition(kq_plog *p, const kq_plog_tp *tp)
{
    return p->ops->delete_partition(p, tp);
}

int kq_plog_append(kq_plog *p, const kq_plog_tp *tp, const kq_plog_batch *b)
{
    return p->ops->append(p, tp, b);
}

int kq_plog_assign_epoch(kq_plog *p, const kq_plog_tp *tp, int32_t leader_epoch)
{
    return p->ops->assign_epoch(p, tp, leader_epoch);
}

int kq_plog_truncate(kq_plog *p, const kq_plog_tp *tp, int64_t offset)
{
    return p->ops->truncate(p, tp, offset);
}

int kq_plog_truncate_fully(kq_plog *p, const kq_plog_tp *tp, int64_t offset)
{
    return p->ops->truncate_fully(p, tp, offset);
}

int kq_plog_set_hw(kq_plog *p, const kq_plog_tp *tp, int64_t hw)
{
    return p->ops->set_hw(p, tp, hw);
}

int kq_plog_set_partition_epoch(kq_plog *p, const kq_plog_tp *tp, int32_t partition_epoch)
{
    return p->ops->set_partition_epoch(p, tp, partition_epoch);
}

int kq_plog_state_of(kq_plog *p, const kq_plog_tp *tp, kq_plog_state *out)
{
    return p->ops->state_of(p, tp, out);
}

int kq_plog_epochs(kq_plog *p, const kq_plog_tp *tp, kq_epoch_entry **out, size_t *n)
{
    return p->ops->epochs(p, tp, out, n);
}

int kq_plog_end_offset_for_epoch(kq_plog *p, const kq_plog_tp *tp, int32_t epoch,
                                 int32_t *out_epoch, int64_t *out_end)
{
    return p->ops->end_offset_for_epoch(p, tp, epoch, out_epoch, out_end);
}

int kq_plog_read(kq_plog *p, const kq_plog_tp *tp, int64_t from, int64_t to, size_t max_bytes,
                 kq_plog_batch_cb cb, void *arg)
{
    return p->ops->read(p, tp, from, to, max_bytes, cb, arg);
}

int kq_plog_list(kq_plog *p, kq_plog_tp **out, size_t *n)
{
    return p->ops->list(p, out, n);
}
