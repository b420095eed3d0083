#include "sim_inv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"

static void topic_label(const kq_topic *t, int32_t part, char *buf, size_t len)
{
    snprintf(buf, len, "%s-%d", t->name ? t->name : "?", part);
}

static int ids_subset(const int32_t *a, int na, const int32_t *b, int nb, int32_t *missing)
{
    for (int i = 0; i < na; i++) {
        if (!kq_ids_contain(b, nb, a[i])) {
            *missing = a[i];
            return 0;
        }
    }
    return 1;
}

bool kq_sim_same_set(const int32_t *a, int na, const int32_t *b, int nb)
{
    int32_t x;
    return na == nb && ids_subset(a, na, b, nb, &x) && ids_subset(b, nb, a, na, &x);
}

typedef struct part_check {
    char *why;
    size_t len;
} part_check;

static int check_one(void *arg, const kq_topic *t, int32_t pid, const kq_partition *p)
{
    part_check *c = arg;
    char tp[300];
    int32_t x;
    const int32_t *rep = kq_partition_replicas(p), *isr = kq_partition_isr(p);
    const int32_t *elr = kq_partition_elr(p), *lke = kq_partition_last_known_elr(p);
    topic_label(t, pid, tp, sizeof tp);
    if (!ids_subset(isr, p->n_isr, rep, p->n_replicas, &x)) {
        snprintf(c->why, c->len, "%s: ISR member %d is not a replica", tp, x);
        return 1;
    }
    if (!ids_subset(elr, p->n_elr, rep, p->n_replicas, &x)) {
        snprintf(c->why, c->len, "%s: ELR member %d is not a replica", tp, x);
        return 1;
    }
    if (!ids_subset(lke, p->n_last_known_elr, rep, p->n_replicas, &x)) {
        snprintf(c->why, c->len, "%s: LastKnownElr member %d is not a replica", tp, x);
        return 1;
    }
    for (int i = 0; i < p->n_elr; i++) {
        if (kq_ids_contain(isr, p->n_isr, elr[i])) {
            snprintf(c->why, c->len, "%s: broker %d is in both the ISR and the ELR", tp, elr[i]);
            return 1;
        }
    }
    if (p->leader != KQ_NO_LEADER && !kq_ids_contain(isr, p->n_isr, p->leader)) {
        snprintf(c->why, c->len, "%s: leader %d is not in the ISR (size %d)", tp, p->leader,
                 p->n_isr);
        return 1;
    }
    if (p->leader_epoch < 0 || p->partition_epoch < 0) {
        snprintf(c->why, c->len, "%s: negative epoch (leader epoch %d, partition epoch %d)", tp,
                 p->leader_epoch, p->partition_epoch);
        return 1;
    }
    return 0;
}

int kq_sim_check_partitions(const kq_image *img, char *why, size_t len)
{
    part_check c = {why, len};
    return kq_image_foreach_partition(img, check_one, &c) ? 1 : 0;
}

static int check_added(const kq_image *img, const char *what, const int32_t *isr, int n_isr,
                       const int32_t *old, int n_old, char *why, size_t len)
{
    for (int i = 0; i < n_isr; i++) {
        if (kq_ids_contain(old, n_old, isr[i]))
            continue;
        const kq_broker *b = kq_image_broker(img, isr[i]);
        if (b == NULL) {
            snprintf(why, len, "%s adds unregistered broker %d to the ISR", what, isr[i]);
            return 1;
        }
        if (b->fenced) {
            snprintf(why, len, "%s adds fenced broker %d (epoch %lld) to the ISR", what, isr[i],
                     (long long)b->epoch);
            return 1;
        }
    }
    return 0;
}

int kq_sim_check_isr_additions(const kq_image *img, const kq_record *r, char *why, size_t len)
{
    char what[96];
    if (r->type == KQ_REC_PARTITION) {
        const kq_rec_partition *p = &r->partition;
        snprintf(what, sizeof what, "PartitionRecord for partition %d", p->partition_id);
        return check_added(img, what, p->isr.ids, p->isr.n, NULL, 0, why, len);
    }
    if (r->type != KQ_REC_PARTITION_CHANGE || !r->partition_change.has_isr)
        return 0;
    const kq_rec_partition_change *pc = &r->partition_change;
    const kq_partition *cur = kq_image_partition(img, pc->topic_id, pc->partition_id);
    const kq_topic *t = kq_image_topic_by_id(img, pc->topic_id);
    snprintf(what, sizeof what, "PartitionChange for %s-%d", t && t->name ? t->name : "?",
             pc->partition_id);
    return check_added(img, what, pc->isr.ids, pc->isr.n, cur ? kq_partition_isr(cur) : NULL,
                       cur ? cur->n_isr : 0, why, len);
}

typedef struct epoch_entry {
    uint8_t topic_id[16];
    int32_t partition;
    int32_t leader_epoch;
    int32_t partition_epoch;
} epoch_entry;

struct kq_sim_epochs {
    epoch_entry *v;
    size_t n, cap;
};

kq_sim_epochs *kq_sim_epochs_new(void)
{
    return calloc(1, sizeof(kq_sim_epochs));
}

void kq_sim_epochs_free(kq_sim_epochs *t)
{
    if (t == NULL)
        return;
    free(t->v);
    free(t);
}

typedef struct epochs_walk {
    kq_sim_epochs *t;
    char *why;
    size_t len;
} epochs_walk;

static int epochs_one(void *arg, const kq_topic *tp, int32_t pid, const kq_partition *p)
{
    epochs_walk *w = arg;
    kq_sim_epochs *t = w->t;
    for (size_t i = 0; i < t->n; i++) {
        epoch_entry *e = &t->v[i];
        if (e->partition != pid || memcmp(e->topic_id, tp->id, 16) != 0)
            continue;
        if (p->partition_epoch < e->partition_epoch || p->leader_epoch < e->leader_epoch) {
            char l[300];
            topic_label(tp, pid, l, sizeof l);
            snprintf(w->why, w->len,
                     "%s: epochs went down: partition epoch %d -> %d, leader epoch %d -> %d", l,
                     e->partition_epoch, p->partition_epoch, e->leader_epoch, p->leader_epoch);
            return 1;
        }
        e->partition_epoch = p->partition_epoch;
        e->leader_epoch = p->leader_epoch;
        return 0;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 32;
        epoch_entry *v = realloc(t->v, cap * sizeof(*v));
        if (v == NULL)
            return KQ_ERR_NOMEM;
        t->v = v;
        t->cap = cap;
    }
    epoch_entry *e = &t->v[t->n++];
    memcpy(e->topic_id, tp->id, 16);
    e->partition = pid;
    e->leader_epoch = p->leader_epoch;
    e->partition_epoch = p->partition_epoch;
    return 0;
}

int kq_sim_epochs_check(kq_sim_epochs *t, const kq_image *img, char *why, size_t len)
{
    epochs_walk w = {t, why, len};
    return kq_image_foreach_partition(img, epochs_one, &w);
}

typedef struct leaders_entry {
    uint8_t topic_id[16];
    int32_t partition;
    int32_t *by_epoch; /* leader + 1 per leader epoch; 0 = no leader seen */
    size_t cap;
} leaders_entry;

struct kq_sim_leaders {
    leaders_entry *v;
    size_t n, cap;
};

kq_sim_leaders *kq_sim_leaders_new(void)
{
    return calloc(1, sizeof(kq_sim_leaders));
}

void kq_sim_leaders_free(kq_sim_leaders *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].by_epoch);
    free(t->v);
    free(t);
}

static leaders_entry *leaders_entry_of(kq_sim_leaders *t, const uint8_t topic_id[16],
                                       int32_t partition)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].partition == partition && memcmp(t->v[i].topic_id, topic_id, 16) == 0)
            return &t->v[i];
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        leaders_entry *v = realloc(t->v, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        t->v = v;
        t->cap = cap;
    }
    leaders_entry *e = &t->v[t->n++];
    memset(e, 0, sizeof *e);
    memcpy(e->topic_id, topic_id, 16);
    e->partition = partition;
    return e;
}

int kq_sim_leaders_note(kq_sim_leaders *t, const uint8_t topic_id[16], int32_t partition,
                        int32_t leader_epoch, int32_t leader, char *why, size_t len)
{
    if (leader_epoch < 0)
        return 0;
    leaders_entry *e = leaders_entry_of(t, topic_id, partition);
    if (e == NULL)
        return KQ_ERR_NOMEM;
    if ((size_t)leader_epoch >= e->cap) {
        size_t cap = e->cap ? e->cap : 16;
        while (cap <= (size_t)leader_epoch)
            cap *= 2;
        int32_t *v = realloc(e->by_epoch, cap * sizeof(*v));
        if (v == NULL)
            return KQ_ERR_NOMEM;
        memset(v + e->cap, 0, (cap - e->cap) * sizeof(*v));
        e->by_epoch = v;
        e->cap = cap;
    }
    int32_t seen = e->by_epoch[leader_epoch];
    if (seen == 0) {
        e->by_epoch[leader_epoch] = leader + 1;
        return 0;
    }
    if (seen == leader + 1)
        return 0;
    snprintf(why, len, "partition %d: brokers %d and %d both led leader epoch %d", partition,
             seen - 1, leader, leader_epoch);
    return 1;
}
