/*
 * The simulators' event queue: a binary min-heap of fixed-size events ordered by time, then by
 * sequence number (so events at the same time run in the order they were scheduled, and a
 * seed replays exactly). Every event type starts with the two members of a kq_ev_key
 * (KQ_EV_KEY_FIRST checks it); the caller sets both.
 *
 * Ownership: the heap owns its array (kq_evheap_free); events are copied in and out, so what
 * an event points to stays the caller's.
 */
#ifndef KQ_SIM_EVHEAP_H
#define KQ_SIM_EVHEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kq_ev_key {
    uint64_t t;   /* when it runs */
    uint64_t seq; /* ties at the same t: the lower runs first */
} kq_ev_key;

/* In an event type's file: its first members are t and seq, as in kq_ev_key. */
#define KQ_EV_KEY_FIRST(type)                                                                      \
    _Static_assert(offsetof(type, t) == offsetof(kq_ev_key, t) &&                                  \
                       offsetof(type, seq) == offsetof(kq_ev_key, seq) &&                          \
                       sizeof(((type *)0)->t) == sizeof(uint64_t) &&                               \
                       sizeof(((type *)0)->seq) == sizeof(uint64_t),                               \
                   #type " must start with uint64_t t and seq")

typedef struct kq_evheap {
    unsigned char *v;
    size_t n, cap;
    size_t size; /* bytes per event, at least sizeof(kq_ev_key) */
} kq_evheap;

/* An empty heap of events of `size` bytes. */
void kq_evheap_init(kq_evheap *h, size_t size);
/* Copies ev in; false when out of memory (nothing changed). */
bool kq_evheap_push(kq_evheap *h, const void *ev);
/* Copies the earliest event to *out and removes it; false when empty. */
bool kq_evheap_pop(kq_evheap *h, void *out);
void kq_evheap_free(kq_evheap *h);

#endif
