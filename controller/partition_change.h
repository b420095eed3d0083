/*
 * The partition change builder (kraft-semantics.md 3.5): given a partition of the image and a
 * target (ISR, recovery state, election type, forced (un)acceptable broker), compute the one
 * PartitionChange record that realises it -- leader election (ONLINE / PREFERRED / UNCLEAN),
 * ELR and LastKnownElr (KIP-966, "last known leader" mode), "last replica standing" when ELR
 * is off -- or no record when nothing changes. Pure.
 *
 * Ownership: kq_pcb borrows everything it points to (image, topic, lists) for the duration of
 * kq_pcb_build. The record written to *out is owned by the caller (malloc'd lists; release with
 * kq_record_free or move it into a kq_reclist).
 */
#ifndef KQ_PARTITION_CHANGE_H
#define KQ_PARTITION_CHANGE_H

#include <stdbool.h>
#include <stdint.h>

#include "decide.h"

typedef enum kq_election {
    KQ_ELECTION_PREFERRED = 0, /* ElectLeaders wire value 0 */
    KQ_ELECTION_UNCLEAN = 1,   /* ElectLeaders wire value 1; also ONLINE with unclean enabled */
    KQ_ELECTION_ONLINE = 2,
} kq_election;

typedef struct kq_pcb {
    const kq_image *img;
    const kq_topic *topic;
    int32_t partition_id;
    kq_election election;
    bool elr_enabled;
    int32_t min_isr; /* effective: min(min.insync.replicas, RF) */
    /* Target ISR (absent: the current ISR). */
    bool has_target_isr;
    const int32_t *target_isr;
    int32_t n_target_isr;
    int8_t target_recovery;   /* KQ_RECOVERY_UNCHANGED or a state */
    int32_t unacceptable;     /* broker being fenced / removed: never a leader (-1: none) */
    int32_t acceptable;       /* broker being unfenced: acceptable although fenced (-1: none) */
    int32_t unclean_shutdown; /* broker restarted uncleanly: also dropped from the ELR (-1) */
    /* Reassignment target (absent: none). When the target ISR holds every target replica the
     * replica set becomes the target, non-target replicas leave the ISR/ELR, and the leader
     * is re-elected if it was removed (3.5 "Reassignment"). */
    bool has_target_replicas;
    const int32_t *target_replicas;
    int32_t n_target_replicas;
} kq_pcb;

typedef struct kq_pcb_result {
    bool changed;        /* a record was produced */
    int32_t leader;      /* leader after the change */
    bool leader_changed; /* record sets Leader (leader epoch bump) */
    bool unclean;        /* leader came from outside the ISR/ELR (RECOVERING) */
    bool from_elr;       /* leader elected from the ELR */
} kq_pcb_result;

/* Fill the defaults for partition `pid` of topic `t`: election ONLINE, or UNCLEAN when the
 * topic's effective unclean.leader.election.enable is true; ELR and min ISR from the settings
 * and image; no target (build() then only re-elects if needed). */
void kq_pcb_init(kq_pcb *b, const kq_decide_settings *s, const kq_image *img, const kq_topic *t,
                 int32_t pid);

/* Build. Returns 0 (out->type = KQ_REC_PARTITION_CHANGE, or KQ_REC_NONE when nothing would
 * change), KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION (no such partition) or KQ_ERR_NOMEM. res may be
 * NULL. */
int kq_pcb_build(const kq_pcb *b, kq_record *out, kq_pcb_result *res);

#endif
