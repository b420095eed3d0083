/* The partition change builder (kraft-semantics.md 3.5). */
#include "partition_change.h"

#include <stdlib.h>
#include <string.h>

/* A list of broker ids with a fixed capacity. */
typedef struct idl {
    int32_t *v;
    int32_t n;
} idl;

static bool idl_has(const idl *l, int32_t id)
{
    return kq_ids_contain(l->v, l->n, id);
}

static void idl_add(idl *l, int32_t id)
{
    if (!idl_has(l, id))
        l->v[l->n++] = id;
}

static void idl_set(idl *l, const int32_t *ids, int32_t n)
{
    l->n = 0;
    for (int32_t i = 0; i < n; i++)
        idl_add(l, ids[i]);
}

static bool ids_equal(const int32_t *a, int32_t na, const int32_t *b, int32_t nb)
{
    if (na != nb)
        return false;
    for (int32_t i = 0; i < na; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

static int ids_dup(kq_rec_ids *dst, const idl *src)
{
    dst->n = src->n;
    dst->ids = NULL;
    if (src->n == 0)
        return 0;
    dst->ids = malloc((size_t)src->n * sizeof *dst->ids);
    if (!dst->ids)
        return KQ_ERR_NOMEM;
    memcpy(dst->ids, src->v, (size_t)src->n * sizeof *dst->ids);
    return 0;
}

void kq_pcb_init(kq_pcb *b, const kq_decide_settings *s, const kq_image *img, const kq_topic *t,
                 int32_t pid)
{
    const kq_partition *p = (t && pid >= 0 && pid < t->n_partitions) ? &t->partitions[pid] : NULL;

    memset(b, 0, sizeof *b);
    b->img = img;
    b->topic = t;
    b->partition_id = pid;
    b->election = (t && kq_decide_unclean_enabled(s, img, t->name)) ? KQ_ELECTION_UNCLEAN
                                                                    : KQ_ELECTION_ONLINE;
    b->elr_enabled = kq_decide_elr_enabled(s, img);
    b->min_isr = kq_decide_min_isr(s, img, t ? t->name : NULL, p ? p->n_replicas : 1);
    b->target_recovery = KQ_RECOVERY_UNCHANGED;
    b->unacceptable = -1;
    b->acceptable = -1;
    b->unclean_shutdown = -1;
}

typedef struct ctx {
    const kq_pcb *b;
    idl rep, isr, elr;
} ctx;

/* isAcceptableLeader: registered, unfenced, not in controlled shutdown (with the overrides). */
static bool acceptable(const ctx *c, int32_t r)
{
    if (r < 0)
        return false;
    if (r == c->b->unacceptable)
        return false;
    if (r == c->b->acceptable)
        return true;
    return kq_decide_broker_active(c->b->img, r);
}

/* A valid new leader: in the target ISR (or the ELR when the target ISR is empty), acceptable. */
static bool valid(const ctx *c, int32_t r)
{
    if (!acceptable(c, r))
        return false;
    return c->isr.n > 0 ? idl_has(&c->isr, r) : idl_has(&c->elr, r);
}

int kq_pcb_build(const kq_pcb *b, kq_record *out, kq_pcb_result *res)
{
    const kq_partition *p;
    const int32_t *prep, *pisr, *pelr, *plke;
    kq_rec_partition_change *pc;
    kq_pcb_result r = {0};
    ctx c = {.b = b};
    idl lke = {0};
    int32_t cap, leader, recovery;
    bool set_isr = false, set_rep = false, elect = false, bump = false, rep_removed = false;
    int rc = 0;

    memset(out, 0, sizeof *out);
    out->type = KQ_REC_NONE;
    if (!b->topic || b->partition_id < 0 || b->partition_id >= b->topic->n_partitions)
        return KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    p = &b->topic->partitions[b->partition_id];
    prep = kq_partition_replicas(p);
    pisr = kq_partition_isr(p);
    pelr = kq_partition_elr(p);
    plke = kq_partition_last_known_elr(p);
    cap = (int32_t)p->n_replicas + (b->has_target_replicas ? b->n_target_replicas : 0) +
          (b->has_target_isr ? b->n_target_isr : 0) + 1;
    c.rep.v = malloc((size_t)cap * sizeof(int32_t));
    c.isr.v = malloc((size_t)cap * sizeof(int32_t));
    c.elr.v = malloc((size_t)cap * sizeof(int32_t));
    lke.v = malloc((size_t)cap * sizeof(int32_t));
    if (!c.rep.v || !c.isr.v || !c.elr.v || !lke.v) {
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    idl_set(&c.rep, prep, p->n_replicas);
    if (b->has_target_isr)
        idl_set(&c.isr, b->target_isr, b->n_target_isr);
    else
        idl_set(&c.isr, pisr, p->n_isr);
    idl_set(&c.elr, pelr, p->n_elr);
    idl_set(&lke, plke, p->n_last_known_elr);
    leader = p->leader;
    recovery = p->leader_recovery_state;

    /* Reassignment completes when the target ISR holds every target replica. */
    if (b->has_target_replicas && b->n_target_replicas > 0) {
        bool all = true;

        for (int32_t i = 0; i < b->n_target_replicas; i++)
            if (!idl_has(&c.isr, b->target_replicas[i]))
                all = false;
        if (all) {
            idl nisr = {.v = lke.v, .n = 0}; /* scratch; lke reloaded below */

            for (int32_t i = 0; i < c.rep.n; i++)
                if (!kq_ids_contain(b->target_replicas, b->n_target_replicas, c.rep.v[i]))
                    rep_removed = true;
            idl_set(&c.rep, b->target_replicas, b->n_target_replicas);
            for (int32_t i = 0; i < c.isr.n; i++)
                if (idl_has(&c.rep, c.isr.v[i]))
                    nisr.v[nisr.n++] = c.isr.v[i];
            memcpy(c.isr.v, nisr.v, (size_t)nisr.n * sizeof(int32_t));
            c.isr.n = nisr.n;
            idl_set(&lke, plke, p->n_last_known_elr);
            set_rep = !ids_equal(c.rep.v, c.rep.n, prep, p->n_replicas);
        }
    }

    /* KIP-966 target ELR. */
    if (b->elr_enabled) {
        if (c.isr.n >= b->min_isr) {
            c.elr.n = 0;
            lke.n = 0;
        } else {
            idl cand = {.v = malloc((size_t)cap * sizeof(int32_t)), .n = 0};

            if (!cand.v) {
                rc = KQ_ERR_NOMEM;
                goto out;
            }
            /* (old ELR u old ISR) - target ISR - unclean shutdowns, in replica order. */
            for (int32_t i = 0; i < c.rep.n; i++) {
                int32_t id = c.rep.v[i];

                if ((kq_ids_contain(pelr, p->n_elr, id) || kq_ids_contain(pisr, p->n_isr, id)) &&
                    !idl_has(&c.isr, id) && id != b->unclean_shutdown)
                    cand.v[cand.n++] = id;
            }
            memcpy(c.elr.v, cand.v, (size_t)cand.n * sizeof(int32_t));
            c.elr.n = cand.n;
            free(cand.v);
        }
    } else {
        c.elr.n = 0;
        lke.n = 0;
    }

    /* Election. */
    if (!valid(&c, leader) ||
        (b->election == KQ_ELECTION_PREFERRED && c.rep.n > 0 && leader != c.rep.v[0]))
        elect = true;
    if (elect) {
        int32_t w = KQ_NO_LEADER;

        if (b->election == KQ_ELECTION_PREFERRED) {
            if (c.rep.n > 0 && valid(&c, c.rep.v[0]))
                w = c.rep.v[0];
            else if (valid(&c, leader))
                w = leader;
            else
                for (int32_t i = 1; i < c.rep.n && w < 0; i++)
                    if (valid(&c, c.rep.v[i]))
                        w = c.rep.v[i];
        } else {
            if (valid(&c, leader))
                w = leader;
            else
                for (int32_t i = 0; i < c.rep.n && w < 0; i++)
                    if (valid(&c, c.rep.v[i]))
                        w = c.rep.v[i];
        }
        if (w >= 0 && c.isr.n == 0)
            r.from_elr = true;
        /* Last known leader: ISR and ELR empty, exactly one LastKnownElr entry. */
        if (w < 0 && b->elr_enabled && c.isr.n == 0 && c.elr.n == 0 && p->n_last_known_elr == 1 &&
            idl_has(&c.rep, plke[0]) && acceptable(&c, plke[0])) {
            w = plke[0];
            r.unclean = true;
        }
        if (w < 0 && b->election == KQ_ELECTION_UNCLEAN) {
            for (int32_t i = 0; i < c.rep.n && w < 0; i++)
                if (acceptable(&c, c.rep.v[i]))
                    w = c.rep.v[i];
            r.unclean = w >= 0;
        }
        leader = w;
    }
    if (leader != p->leader)
        r.leader_changed = true;
    else if (rep_removed && leader >= 0)
        bump = true; /* 3.5 (a): a reassignment removed a replica */

    if (r.unclean) {
        c.isr.n = 0;
        idl_add(&c.isr, leader);
        recovery = KQ_RECOVERY_RECOVERING;
        c.elr.n = 0;
        lke.n = 0;
        set_isr = true;
    } else if (r.from_elr) {
        int32_t k = 0;

        c.isr.n = 0;
        idl_add(&c.isr, leader);
        for (int32_t i = 0; i < c.elr.n; i++)
            if (c.elr.v[i] != leader)
                c.elr.v[k++] = c.elr.v[i];
        c.elr.n = k;
        if (c.isr.n >= b->min_isr) {
            c.elr.n = 0;
            lke.n = 0;
        }
        set_isr = true;
    } else if (c.isr.n > 0 || b->elr_enabled) {
        set_isr = true; /* never write an empty ISR without ELR: last replica standing */
    } else {
        c.isr.n = 0; /* keep the current ISR */
        idl_set(&c.isr, pisr, p->n_isr);
    }

    /* LastKnownElr, "last known leader" mode. */
    if (b->elr_enabled && !r.unclean && c.isr.n >= b->min_isr) {
        lke.n = 0;
    } else if (b->elr_enabled && !r.unclean) {
        if (c.isr.n == 0 && p->n_isr > 0 && p->leader >= 0 &&
            !(p->n_last_known_elr == 1 && plke[0] == p->leader)) {
            lke.n = 0;
            idl_add(&lke, p->leader);
        } else if (leader >= 0 && lke.n > 0) {
            lke.n = 0;
        }
    }

    if (b->target_recovery != KQ_RECOVERY_UNCHANGED && !r.unclean)
        recovery = b->target_recovery;

    /* Assemble the record. */
    out->type = KQ_REC_PARTITION_CHANGE;
    pc = &out->partition_change;
    memcpy(pc->topic_id, b->topic->id, 16);
    pc->partition_id = b->partition_id;
    pc->leader = KQ_LEADER_UNCHANGED;
    pc->leader_recovery_state = KQ_RECOVERY_UNCHANGED;
    if (r.leader_changed || bump)
        pc->leader = leader;
    if (recovery != p->leader_recovery_state)
        pc->leader_recovery_state = (int8_t)recovery;
    if (set_rep) {
        pc->has_replicas = true;
        if ((rc = ids_dup(&pc->replicas, &c.rep)))
            goto out;
    }
    if (set_isr && !ids_equal(c.isr.v, c.isr.n, pisr, p->n_isr)) {
        pc->has_isr = true;
        if ((rc = ids_dup(&pc->isr, &c.isr)))
            goto out;
    }
    if (!ids_equal(c.elr.v, c.elr.n, pelr, p->n_elr)) {
        pc->has_elr = true;
        if ((rc = ids_dup(&pc->elr, &c.elr)))
            goto out;
    }
    if (!ids_equal(lke.v, lke.n, plke, p->n_last_known_elr)) {
        pc->has_last_known_elr = true;
        if ((rc = ids_dup(&pc->last_known_elr, &lke)))
            goto out;
    }
    if (pc->leader == KQ_LEADER_UNCHANGED && pc->leader_recovery_state == KQ_RECOVERY_UNCHANGED &&
        !pc->has_replicas && !pc->has_isr && !pc->has_elr && !pc->has_last_known_elr) {
        memset(out, 0, sizeof *out);
        out->type = KQ_REC_NONE;
    }
    r.changed = out->type == KQ_REC_PARTITION_CHANGE;
    r.leader = leader;
out:
    if (rc)
        kq_record_free(out);
    if (rc)
        out->type = KQ_REC_NONE;
    if (res)
        *res = r;
    free(c.rep.v);
    free(c.isr.v);
    free(c.elr.v);
    free(lke.v);
    return rc;
}
