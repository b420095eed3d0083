/*
 * Striped rack-aware replica placement (kraft-semantics.md 3.4, StripedReplicaPlacer), pure and
 * deterministic for a given image and PRNG state.
 *
 * Brokers are grouped by rack ("no rack" is a rack of its own); brokers in controlled shutdown
 * are never used. Racks are visited round-robin from a random start that moves by one per
 * partition; within a rack brokers are taken round-robin from a random start. The first
 * replica (the leader) is always unfenced; later replicas use fenced brokers only when no
 * unfenced one is left; no broker appears twice in a partition. After as many partitions as
 * there are unfenced brokers, the rack order and the starts are reshuffled.
 */
#ifndef KQ_PLACEMENT_H
#define KQ_PLACEMENT_H

#include <stdint.h>

#include "kq/image.h"
#include "kq/util.h"

/* Place `n_partitions` partitions of `rf` replicas. On success *out is a malloc'd array of
 * n_partitions * rf broker ids (partition i at out[i * rf .. i * rf + rf)), owned by the
 * caller. Errors (errbuf names the problem, *out NULL): KQ_ERR_INVALID_REPLICATION_FACTOR
 * (rf <= 0, rf > usable brokers, no unfenced broker), KQ_ERR_INVALID_PARTITIONS
 * (n_partitions <= 0), KQ_ERR_NOMEM. `prng` (borrowed) supplies the random starts. */
int kq_place_replicas(const kq_image *img, int32_t n_partitions, int32_t rf, kq_prng *prng,
                      int32_t **out, char *errbuf, size_t errlen);

#endif
