/*
 * The simulators' event queue: see evheap.h.
 */
#include "evheap.h"

#include <stdlib.h>
#include <string.h>

static bool before(const void *a, const void *b)
{
    kq_ev_key x, y; /* copied out: the events are the simulators' own types */
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    return x.t < y.t || (x.t == y.t && x.seq < y.seq);
}

#define AT(h, i) ((h)->v + (i) * (h)->size)

void kq_evheap_init(kq_evheap *h, size_t size)
{
    memset(h, 0, sizeof *h);
    h->size = size < sizeof(kq_ev_key) ? sizeof(kq_ev_key) : size;
}

bool kq_evheap_push(kq_evheap *h, const void *ev)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 1024;
        unsigned char *v = realloc(h->v, cap * h->size);
        if (!v)
            return false;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(ev, AT(h, p)))
            break;
        memcpy(AT(h, i), AT(h, p), h->size);
        i = p;
    }
    memcpy(AT(h, i), ev, h->size);
    return true;
}

bool kq_evheap_pop(kq_evheap *h, void *out)
{
    if (h->n == 0)
        return false;
    memcpy(out, AT(h, 0), h->size);
    size_t n = --h->n, i = 0;
    const unsigned char *last = AT(h, n);
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(AT(h, c + 1), AT(h, c)))
            c++;
        if (!before(AT(h, c), last))
            break;
        memcpy(AT(h, i), AT(h, c), h->size);
        i = c;
    }
    if (n)
        memmove(AT(h, i), last, h->size);
    return true;
}

void kq_evheap_free(kq_evheap *h)
{
    free(h->v);
    memset(h, 0, sizeof *h);
}
