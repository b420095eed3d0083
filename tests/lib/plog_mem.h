/*
 * kq_plog_mem: an in-memory implementation of the partition-log interface (kq/plog.h), for
 * the simulator (tests/sim) and tests. A "disk" (kq_plog_mem_disk) holds what was committed;
 * a handle opened on it writes in a transaction that kq_plog_commit makes durable at once.
 * Closing a handle with a transaction open is a crash: what was not committed is gone, and a
 * new handle on the same disk sees the last commit. kq_plog_mem_fail_next_commit makes the
 * next commit fail as a failed fsync does with LMDB (KQ_ERR_IO or KQ_ERR_FULL; nothing of the
 * transaction is kept and the handle refuses everything but close).
 *
 * Batches are stored once and shared (reference counts) between the committed state and a
 * transaction, so a transaction costs a copy of the partition list and, per partition it
 * changes, of that partition's batch pointers.
 *
 * Single-threaded. Ownership: the disk is the caller's (kq_plog_mem_disk_free, once every
 * handle on it is closed); a handle from kq_plog_mem_open is the caller's (kq_plog_close).
 */
#ifndef KQ_PLOG_MEM_H
#define KQ_PLOG_MEM_H

#include <stdbool.h>

#include "kq/plog.h"

typedef struct kq_plog_mem_disk kq_plog_mem_disk;

/* A blank disk with identity *id (copied). NULL on out of memory. */
kq_plog_mem_disk *kq_plog_mem_disk_new(const kq_store_identity *id);
void kq_plog_mem_disk_free(kq_plog_mem_disk *d);

/* A handle on d: 0, KQ_ERR_NOMEM, or KQ_ERR_INVALID_REQUEST if another handle is open. */
int kq_plog_mem_open(kq_plog_mem_disk *d, kq_plog **out);

/* The next commit on d fails with rc (KQ_ERR_IO or KQ_ERR_FULL); 0 clears it. */
void kq_plog_mem_fail_next_commit(kq_plog_mem_disk *d, int rc);

/* A lying disk (a simulator self-test): a crash (a close) also loses the last commit, which the
 * handle had reported durable. */
void kq_plog_mem_lie(kq_plog_mem_disk *d, bool lie);

#endif
