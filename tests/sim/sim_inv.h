/*
 * kq_sim invariants over controller metadata images (include/kq/image.h), used by the
 * controller mode of the simulator (sim.h) after every event. Pure functions: they read the
 * image and report the first violation in `why`; they never change the image.
 *
 *   - kq_sim_check_partitions: every partition has ISR within its replicas, ELR within its
 *     replicas and disjoint from the ISR, LastKnownElr within its replicas, and a leader that
 *     is in the ISR or -1 (so with an empty ISR there is no leader).
 *   - kq_sim_check_isr_additions: a record about to apply adds to an ISR only brokers that are
 *     registered and not fenced at that moment.
 *   - kq_sim_epochs: per (topic id, partition) the highest partition and leader epochs seen;
 *     kq_sim_epochs_check fails when an image shows a lower one (epochs never decrease).
 *   - kq_sim_leaders: per (topic id, partition) which broker acted as leader in each leader
 *     epoch; kq_sim_leaders_note fails when a second broker leads an epoch (at most one
 *     leader per leader epoch, the data plane's fencing rule).
 *
 * Ownership: images and records are borrowed for the call; a kq_sim_epochs is created by
 * kq_sim_epochs_new and owned by the caller (kq_sim_epochs_free); a kq_sim_leaders likewise
 * (kq_sim_leaders_new, kq_sim_leaders_free).
 */
#ifndef KQ_SIM_INV_H
#define KQ_SIM_INV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kq/image.h"
#include "kq/records.h"

/* 0 when every partition of img is well formed; 1 with why naming the partition otherwise. */
int kq_sim_check_partitions(const kq_image *img, char *why, size_t len);

/* 0 when applying r to img (its current state, before the apply) would add only registered,
 * unfenced brokers to an ISR; 1 with why otherwise. Records other than Partition and
 * PartitionChange always pass. */
int kq_sim_check_isr_additions(const kq_image *img, const kq_record *r, char *why, size_t len);

typedef struct kq_sim_epochs kq_sim_epochs;

kq_sim_epochs *kq_sim_epochs_new(void); /* NULL on out of memory */
void kq_sim_epochs_free(kq_sim_epochs *t);
/* Compare every partition of img with the epochs seen before and remember the new ones.
 * 0 ok; 1 with why when an epoch went down; KQ_ERR_NOMEM. */
int kq_sim_epochs_check(kq_sim_epochs *t, const kq_image *img, char *why, size_t len);

typedef struct kq_sim_leaders kq_sim_leaders;

kq_sim_leaders *kq_sim_leaders_new(void); /* NULL on out of memory */
void kq_sim_leaders_free(kq_sim_leaders *t);
/* Broker `leader` acts as the leader of (topic_id, partition) in leader_epoch (>= 0). 0 ok (the
 * first broker seen in that epoch, or the same one again); 1 with why when another broker led
 * that epoch; KQ_ERR_NOMEM. */
int kq_sim_leaders_note(kq_sim_leaders *t, const uint8_t topic_id[16], int32_t partition,
                        int32_t leader_epoch, int32_t leader, char *why, size_t len);

/* 1 if the two id lists hold the same set. */
bool kq_sim_same_set(const int32_t *a, int na, const int32_t *b, int nb);

#endif
