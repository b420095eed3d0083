/*
 * kq_bmeta: a broker's copy of the metadata image, replayed from the committed metadata log
 * that its observer (the Raft host on the broker's metadata store) follows. The image is what
 * the replica manager, the data plane and the broker's answers read.
 *
 * - Committed batches are applied in order, each once: a batch wholly below the applied end
 *   is skipped (a read that started earlier), a gap or a record that cannot apply is an error
 *   (the daemon stops: a broker must never act on a partial image).
 * - A fetched (or recovered) snapshot replaces the image, applied up to its end offset.
 * - Ready to be unfenced: the image has replayed up to the first high watermark the observer
 *   learnt from the leader after start (kraft-semantics 3.3: a broker asks to stay fenced
 *   until then). The leader's, not the observer's own: that one is capped by what this node
 *   has made durable, so right after a restart it is the old log end, not the cluster's.
 *
 * - The replica manager first acts on the image once it may be published
 *   (kq_bmeta_publishable): caught up as above, and caught up with the broker's own
 *   registration as the active controller says (Kafka's initialCatchUpFuture). A restarted
 *   leader must not run on partition state older than what the controller has committed
 *   for it, and that includes what the controller had accepted from the broker's previous
 *   process and commits only after the restart (an ISR expansion in flight at the crash):
 *   the registration record comes after it in the log.
 *
 * Pure: no I/O, no clock. Ownership: kq_bmeta owns its image (kq_bmeta_free); records and
 * payloads passed in are borrowed for the call.
 */
#ifndef KQ_BROKER_METADATA_H
#define KQ_BROKER_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kq/image.h"

typedef struct kq_bmeta {
    kq_image *img;
    int64_t applied_end;  /* the next offset the image has not applied */
    int64_t ready_target; /* the first high watermark seen, -1 none yet */
    bool published;       /* kq_bmeta_publishable said yes once */
} kq_bmeta;

/* 0 or KQ_ERR_NOMEM. */
int kq_bmeta_init(kq_bmeta *m);
void kq_bmeta_free(kq_bmeta *m);

/* One committed batch at base (count records). 0, or an error with errbuf set. */
int kq_bmeta_apply_batch(kq_bmeta *m, int64_t base, int32_t count, const uint8_t *records,
                         size_t len, char *errbuf, size_t errlen);
/* Replace the image with a snapshot's (everything below end_offset). 0, or an error with
 * errbuf set (the image is then empty, applied end 0). */
int kq_bmeta_load_snapshot(kq_bmeta *m, const uint8_t *payload, size_t len, int64_t end_offset,
                           char *errbuf, size_t errlen);
/* hw: the leader's high watermark as the observer knows it (kq_raft_status
 * leader_high_watermark, -1 unknown). True once the image has replayed up to the first one
 * seen. */
bool kq_bmeta_caught_up(kq_bmeta *m, int64_t hw);
/* The replica manager may act on the image: once kq_bmeta_caught_up(m, hw) and the active
 * controller has said the broker caught up with its registration (registration_caught_up:
 * kq_bl.caught_up), and from then on for the life of the process (a later re-registration
 * does not stop the replicas from following the metadata). */
bool kq_bmeta_publishable(kq_bmeta *m, int64_t hw, bool registration_caught_up);

#endif
