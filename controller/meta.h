/*
 * The controller's metadata state: the image every controller replays from the committed log,
 * and, on the active controller, the records it has proposed but not yet seen commit.
 *
 * Offsets: `applied_end` is the next log offset the image has not applied.
 * - A standby (and a leader that is not active yet) applies committed batches only:
 *   kq_meta_apply_batch for every batch below the high watermark, then kq_meta_committed.
 * - The leader becomes active (kq_meta_try_activate) once its own LeaderChange record has
 *   committed and everything in its log is applied and committed (HW == LEO == applied_end):
 *   from then on it applies each record as it adds it to a proposal (kq_meta_add), so the next
 *   decision sees it, and the image keeps an undo log down to the committed offset.
 * - Losing leadership (kq_meta_deactivate) rolls the image back to the committed offset.
 * A record that cannot apply is corruption: the functions return an error and the daemon
 * stops (a standby must never become active with a partial image).
 *
 * Ownership: kq_meta owns the image and the cluster-control soft state; `settings` is copied.
 */
#ifndef KQ_CTL_META_H
#define KQ_CTL_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster_control.h"
#include "decide.h"
#include "kq/codec.h"
#include "kq/image.h"
#include "kq/util.h"

typedef struct kq_meta {
    kq_image *img;
    kq_cc *cc;
    kq_decide_settings settings;
    char cluster_id[KQ_UUID_STR_LEN + 1];
    int64_t applied_end;
    int64_t epoch_start; /* leader: offset of its LeaderChange record; -1 otherwise */
    bool active;
    kq_prng rng;
    uint64_t applied_records; /* statistics */
} kq_meta;

int kq_meta_init(kq_meta *m, const kq_decide_settings *settings, const char *cluster_id,
                 uint64_t seed);
void kq_meta_free(kq_meta *m);

/* Decode and apply the `count` records of one committed batch at base (only the part at or
 * above applied_end). 0, or an error with errbuf naming the offset and the reason. */
int kq_meta_apply_batch(kq_meta *m, int64_t base, int32_t count, const uint8_t *records, size_t len,
                        char *errbuf, size_t errlen);
/* Everything below hw is committed: drop undo entries. */
void kq_meta_committed(kq_meta *m, int64_t hw);

/* Replace the image with a snapshot's records (start-up, or a snapshot fetched from the
 * leader): the image then holds everything below end_offset, committed. Not while active. */
int kq_meta_load_snapshot(kq_meta *m, const uint8_t *payload, size_t len, int64_t end_offset,
                          char *errbuf, size_t errlen);

/* Leader bookkeeping. */
void kq_meta_became_leader(kq_meta *m, int64_t epoch_start);
/* Returns true when this call made the node active (then soft state is fresh from now_ms). */
bool kq_meta_try_activate(kq_meta *m, bool is_leader, int64_t hw, int64_t leo, int64_t now_ms);
/* Leadership lost: roll back to the committed offset (no-op when not active). */
int kq_meta_deactivate(kq_meta *m, char *errbuf, size_t errlen);

/* Active controller: append `r` to the proposal being built in `batch` (which will be
 * proposed at `batch_base`, holding `*batch_count` records so far), applying it to the image at
 * offset batch_base + *batch_count. On an apply error nothing is appended; not active (the
 * leadership was lost, the image rolled back): KQ_ERR_NOT_CONTROLLER, nothing appended. */
int kq_meta_add(kq_meta *m, const kq_record *r, kq_buf *batch, int64_t batch_base,
                int32_t *batch_count, char *errbuf, size_t errlen);
#endif
