/*
 * Cluster control (kraft-semantics.md 3.2, 3.3): broker registration and epochs, heartbeat
 * soft state and the FENCED / UNFENCED / CONTROLLED_SHUTDOWN / SHUTDOWN_NOW state machine,
 * session (lease) expiry, fencing, unfencing, controlled shutdown and unregistration.
 *
 * Pure: the image is read, never changed; time and the next log offset are arguments. Each
 * operation appends the records to write (in order) to `out` and fills a response to send once
 * they commit. On any error nothing is appended. The caller applies the records to its image
 * (kq_image_apply) before the next decision.
 *
 * Soft state (kq_cc) lives only on the active controller: per broker last contact, metadata
 * offset and controlled-shutdown offset. A newly active controller calls kq_cc_activate.
 *
 * Ownership: kq_cc is created and freed by the caller; it borrows `settings` (must outlive
 * it). Requests are borrowed. Records in `out` are owned by the kq_reclist.
 */
#ifndef KQ_CLUSTER_CONTROL_H
#define KQ_CLUSTER_CONTROL_H

#include <stdbool.h>
#include <stdint.h>

#include "decide.h"
#include "kq/ctlapi.h" /* request and result types */

typedef struct kq_cc kq_cc;

/* NULL on out of memory. */
kq_cc *kq_cc_new(const kq_decide_settings *settings);
void kq_cc_free(kq_cc *cc);

/* A new active controller: drop all soft state and give every registered broker a fresh
 * session starting at now_ms (metadata offset and controlled-shutdown offset unknown, -1). */
int kq_cc_activate(kq_cc *cc, const kq_image *img, int64_t now_ms);

/* checkBrokerEpoch: 0, or KQ_ERR_STALE_BROKER_EPOCH when `id` is not registered or its epoch
 * differs. */
int kq_cc_check_broker_epoch(const kq_image *img, int32_t id, int64_t epoch);

/* Live lease: registered, unfenced and last contact + session timeout >= now. */
bool kq_cc_has_live_lease(const kq_cc *cc, const kq_image *img, int32_t id, int64_t now_ms);

/* Soft state of one broker; false if none. */
bool kq_cc_soft_state(const kq_cc *cc, int32_t id, int64_t *last_contact_ms,
                      int64_t *metadata_offset, int64_t *controlled_shutdown_offset);

/* ---- registration ------------------------------------------------------------------------ */
/* Returns res->error: 0, KQ_ERR_INVALID_REQUEST (bad id, endpoints, rack, zero incarnation),
 * KQ_ERR_INCONSISTENT_CLUSTER_ID, KQ_ERR_DUPLICATE_BROKER_REGISTRATION (live lease, other
 * incarnation), KQ_ERR_NOMEM. A new incarnation gets epoch = next_offset (the offset the first
 * appended record will get) and starts fenced; if the old incarnation was in ISRs/ELRs the
 * "unclean shutdown" PartitionChanges come first. The same incarnation keeps its epoch,
 * fenced and controlled-shutdown state. */
int kq_cc_register(kq_cc *cc, const kq_image *img, const kq_broker_registration *req,
                   int64_t next_offset, int64_t now_ms, kq_reclist *out,
                   kq_registration_result *res);

/* ---- heartbeat --------------------------------------------------------------------------- */
/* Returns res->error: 0, KQ_ERR_STALE_BROKER_EPOCH, KQ_ERR_NOMEM. Updates the soft state and
 * appends the records of the transition (fence / unfence / enter controlled shutdown). */
int kq_cc_heartbeat(kq_cc *cc, const kq_image *img, const kq_heartbeat *req, int64_t next_offset,
                    int64_t now_ms, kq_reclist *out, kq_heartbeat_result *res);

/* Pure state machine (3.3). cs_offset: controlled-shutdown offset; lowest_active_offset: lowest
 * metadata offset among active brokers (INT64_MAX when none). */
kq_broker_state kq_cc_next_state(kq_broker_state cur, bool want_fence, bool want_shutdown,
                                 bool caught_up, bool leads_partitions, int64_t cs_offset,
                                 int64_t lowest_active_offset);

/* ---- session expiry ---------------------------------------------------------------------- */
/* Fence at most ONE broker whose lease expired (the oldest last contact; lowest id on ties):
 * its ISR removals with re-elections, then BrokerRegistrationChange(fenced=1). *fenced_id is
 * that broker or -1. *next_check_ms: now_ms when one was fenced (call again after applying the
 * records), else the oldest unfenced last contact + session timeout, or -1 when no broker is
 * unfenced. Returns 0 or KQ_ERR_NOMEM. */
int kq_cc_fence_stale(kq_cc *cc, const kq_image *img, int64_t now_ms, kq_reclist *out,
                      int32_t *fenced_id, int64_t *next_check_ms);

/* ---- building blocks (also used by the heartbeat paths) ---------------------------------- */
/* Fence: remove from every ISR (re-electing), then the fence record (if not already fenced). */
int kq_cc_fence_records(const kq_decide_settings *s, const kq_image *img, int32_t id,
                        kq_reclist *out);
/* Unfence record, then elect the broker for leaderless partitions that can use it. */
int kq_cc_unfence_records(const kq_decide_settings *s, const kq_image *img, int32_t id,
                          kq_reclist *out);
/* Controlled shutdown record (if not already), then ISR removal and leadership moves. */
int kq_cc_controlled_shutdown_records(const kq_decide_settings *s, const kq_image *img, int32_t id,
                                      kq_reclist *out);
/* UnregisterBroker: remove from ISRs and ELRs, then UnregisterBroker. Returns
 * KQ_ERR_BROKER_ID_NOT_REGISTERED when unknown. */
int kq_cc_unregister(kq_cc *cc, const kq_image *img, int32_t id, kq_reclist *out);

#endif
