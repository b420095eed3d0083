/*
 * Deterministic data-plane simulator (see dsim.h for the model and the invariants). Layout:
 * trace, event scheduling (evheap.h, kq_prng), messages and network, simulated disk, controller,
 * broker host (applies kq_replica updates in the header's order), checkers, producer, faults,
 * phases and kq_dsim_run.
 *
 * Host choices worth knowing (they are what the real broker agent must do too):
 * - a follower sends its next Fetch only once what it appended is durable, so the fetch offset
 *   the leader counts for the HW is never lost by a crash (--bug early-fetch drops this);
 * - truncation and the leader-epoch checkpoint are written synchronously; appends become
 *   durable in order after a sampled fsync delay;
 * - a restarted broker applies metadata only once its new registration is in the log (so it
 *   never acts on its previous incarnation's leadership), and it is a new broker epoch;
 * - the controller keeps a restarted broker in the ELR (KIP-966 drops brokers that shut down
 *   uncleanly): that is safe only because of the first rule, a crash loses nothing the broker
 *   ever reported.
 */
#include "dsim.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/replica.h"
#include "kq/util.h"
#include "evheap.h"

#define NB KQ_DSIM_MAX_BROKERS
#define NP KQ_DSIM_MAX_PARTITIONS
#define RF 3
#define CTL 0             /* controller node */
#define PRODUCER (NB + 1) /* producer client node */
#define NNODES (NB + 2)
#define SESSION_MS 2500 /* broker.session.timeout.ms (scaled down) */
#define HEARTBEAT_MS 300
#define FETCH_TIMEOUT_MS 700
#define ALTER_RESEND_MS 600 /* transport-level resend of an unanswered AlterPartition */
#define PRODUCE_TIMEOUT_MS 3000
#define MAX_FETCH_RECS 48
#define HW_CKPT_MS 700
#define CONVERGE_EVERY_MS 250
#define TRACE_LINE 200
#define MAX_EVENTS 5000000ull

/* ---------------------------------------------------------------- types */

typedef struct rec {
    int32_t epoch;
    uint64_t payload; /* producer id * 16 + index in its batch */
} rec;

typedef struct dlog {
    rec *v;
    int64_t len, cap;
    int64_t durable;
    uint32_t gen; /* bumped by truncation and crash: older persist events are void */
    uint64_t persist_at;
    int64_t hw_ckpt;
    kq_epoch_entry *ep; /* leader-epoch checkpoint */
    size_t n_ep, cap_ep;
} dlog;

typedef struct fetcher {
    uint64_t seq;
    bool outstanding;
    uint64_t sent_at;
    uint64_t not_before;
    uint64_t armed_at; /* earliest pending E_FETCH, 0 none */
} fetcher;

typedef struct msg msg;

typedef struct brep {
    kq_replica *r;
    dlog log;
    fetcher f;
    uint64_t timer_at; /* replica deadline armed, UINT64_MAX none */
    int64_t verified;  /* log prefix checked against the committed records */
    msg *alter;        /* AlterPartition awaiting an answer (copy for resends), owned */
    uint64_t alter_sent_at;
} brep;

typedef struct cpart {
    int32_t leader, lepoch, pepoch;
    int32_t rep[RF];
    int nrep;
    int32_t isr[RF];
    int nisr;
    int32_t elr[RF];
    int nelr;
} cpart;

typedef struct cbroker {
    int64_t epoch;
    bool fenced;
    bool in_cs; /* in controlled shutdown */
    uint64_t last_contact;
    size_t reg_index; /* metadata record that registered the current epoch */
} cbroker;

typedef struct mrec {
    int kind; /* 0 partition, 1 broker */
    int id;
    cpart p;
    cbroker b;
} mrec;

typedef struct broker {
    int id;
    bool alive;
    uint32_t inc;
    int64_t bepoch;
    uint64_t paused_until;
    uint64_t restart_at; /* crashed: when it restarts (0 not scheduled) */
    bool hosts[NP];
    brep rep[NP];
    size_t meta_applied;
    bool registered_seen;
    cpart img_p[NP];
    cbroker img_b[NB + 1];
    uint64_t slow_disk_until;
    uint64_t shutdown_deadline; /* controlled shutdown requested: stop by then (0 none) */
} broker;

typedef enum mtype {
    M_FETCH = 1,
    M_FETCH_RESP,
    M_ALTER,
    M_ALTER_RESP,
    M_HEARTBEAT,
    M_REGISTER,
    M_PRODUCE,
    M_PRODUCE_RESP,
} mtype;

struct msg {
    mtype type;
    int from, to;
    uint32_t to_inc, from_inc;
    int part;
    uint64_t seq;
    int64_t bepoch;
    kq_replica_fetch_request freq;
    kq_replica_fetch_answer fans;
    rec *recs; /* owned */
    int n_recs;
    kq_replica_alter_request areq;
    int err;
    cpart state; /* alter answer */
    size_t meta_applied;
    bool want_shutdown;
    int16_t acks;
    int32_t count;
    int64_t base;
};

typedef enum etype {
    E_MSG = 1,
    E_PERSIST,
    E_TIMER,
    E_FETCH,
    E_ALTER_RTX,
    E_HEARTBEAT,
    E_META,
    E_HWCKPT,
    E_CTL_CHECK,
    E_PRODUCE,
    E_FAULT,
    E_RESTART,
    E_HEAL_CUT,
    E_HEAL_ALL,
    E_CONVERGE,
} etype;

typedef struct ev {
    uint64_t t, seq;
    etype type;
    int b, p;
    uint32_t inc, gen;
    int64_t x;
    msg *m; /* owned by the event */
} ev;
KQ_EV_KEY_FIRST(ev);

typedef struct prod {
    int part;
    int16_t acks;
    int32_t count;
    bool answered;
    int64_t base;
} prod;

typedef struct perpart {
    rec *com; /* committed prefix: what a consumer could have read below some leader's HW */
    int64_t com_len, com_cap;
    int32_t *lead_of; /* leader per leader epoch (-1 none) */
    int64_t *hw_max;  /* highest HW a leader reported per epoch */
    size_t n_epochs;
} perpart;

typedef struct ds {
    const kq_dsim_opts *o;
    kq_dsim_result *res;
    FILE *out;
    kq_prng rng; /* kq/util.h */
    uint64_t now, seq;
    kq_evheap heap; /* of ev (evheap.h) */
    int nb, np;
    int32_t min_isr;
    uint32_t lag_ms;
    uint32_t drop_pm, dup_pm, slow_pm, meta_slow_pm;
    uint32_t fault_min_ms, fault_max_ms;
    bool loose; /* stale and duplicate fetch answers reach the core */
    uint64_t safety_end, deadline;
    bool healing, done;
    broker br[NB + 1];
    bool cut[NNODES][NNODES];
    /* controller */
    cpart cp[NP];
    cbroker cb[NB + 1];
    mrec *mlog;
    size_t nmlog, capmlog;
    int64_t next_bepoch;
    /* producer */
    int32_t prod_view[NP]; /* the leaders the producer believes in */
    uint64_t prod_view_at;
    prod *prods;
    uint64_t nprods, capprods;
    perpart pp[NP];
    /* trace */
    char ring[KQ_DSIM_TRACE_KEEP][TRACE_LINE];
    uint64_t nlines;
    uint64_t hash;
    kq_replica_update u;
    int nomem;
} ds;

/* ---------------------------------------------------------------- helpers */

static uint64_t rnd(ds *s, uint64_t lo, uint64_t hi)
{
    return hi > lo ? kq_prng_range(&s->rng, lo, hi) : lo;
}

static bool chance(ds *s, uint32_t pm)
{
    return kq_prng_permille(&s->rng, pm);
}

static bool has_id(const int32_t *v, int n, int32_t id)
{
    for (int i = 0; i < n; i++) {
        if (v[i] == id) {
            return true;
        }
    }
    return false;
}

static void ids_str(char *buf, size_t len, const int32_t *v, int n)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && off < len; i++) {
        int w = snprintf(buf + off, len - off, "%s%d", i ? "," : "", (int)v[i]);
        off += w > 0 ? (size_t)w : 0;
    }
}

/* ---------------------------------------------------------------- trace and failure */

__attribute__((format(printf, 2, 3))) static void tr(ds *s, const char *fmt, ...)
{
    char line[TRACE_LINE];
    char body[TRACE_LINE - 24];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    snprintf(line, sizeof(line), "%8" PRIu64 " %s", s->now, body);
    for (const char *c = line; *c; c++) {
        s->hash = (s->hash ^ (uint8_t)*c) * 0x100000001B3ull;
    }
    s->hash = (s->hash ^ '\n') * 0x100000001B3ull;
    memcpy(s->ring[s->nlines % KQ_DSIM_TRACE_KEEP], line, sizeof(line));
    s->nlines++;
    if (s->o->trace) {
        fprintf(s->out, "%s\n", line);
    }
}

__attribute__((format(printf, 2, 3))) static void fail(ds *s, const char *fmt, ...)
{
    va_list ap;
    char body[400];

    if (s->res->failed) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    s->res->failed = true;
    snprintf(s->res->reason, sizeof(s->res->reason), "t=%" PRIu64 " ms: %s", s->now, body);
    tr(s, "VIOLATION %s", body);
}

/* ---------------------------------------------------------------- event heap */

static void push(ds *s, ev e)
{
    e.seq = ++s->seq;
    if (!kq_evheap_push(&s->heap, &e)) {
        s->nomem = 1;
        if (e.m) {
            free(e.m->recs);
            free(e.m);
        }
    }
}

static void at(ds *s, uint64_t t, etype type, int b, int p, uint32_t inc)
{
    ev e = {.t = t, .type = type, .b = b, .p = p, .inc = inc};
    push(s, e);
}

/* ---------------------------------------------------------------- messages and network */

static void msg_free(msg *m)
{
    if (m) {
        free(m->recs);
        free(m);
    }
}

/* A broker id of this run (1..nb; nb never exceeds NB, which the compiler cannot see). */
static bool is_broker_id(const ds *s, int id)
{
    return id >= 1 && id <= s->nb && id <= NB;
}

static msg *msg_new(ds *s, mtype type, int from, int to, int part)
{
    msg *m = calloc(1, sizeof(*m));
    if (!m) {
        s->nomem = 1;
        return NULL;
    }
    m->type = type;
    m->from = from;
    m->to = to;
    m->part = part;
    if (is_broker_id(s, from)) {
        m->from_inc = s->br[from].inc;
    }
    if (is_broker_id(s, to)) {
        m->to_inc = s->br[to].inc;
    }
    return m;
}

static msg *msg_copy(ds *s, const msg *m)
{
    msg *c = malloc(sizeof(*c));
    if (!c) {
        s->nomem = 1;
        return NULL;
    }
    *c = *m;
    c->recs = NULL;
    if (m->n_recs) {
        c->recs = malloc((size_t)m->n_recs * sizeof(rec));
        if (!c->recs) {
            free(c);
            s->nomem = 1;
            return NULL;
        }
        memcpy(c->recs, m->recs, (size_t)m->n_recs * sizeof(rec));
    }
    return c;
}

static bool node_up(ds *s, int n)
{
    return n < 1 || n > s->nb || s->br[n].alive;
}

static uint64_t net_delay(ds *s)
{
    return chance(s, 50) ? rnd(s, 20, 250) : rnd(s, 1, 15);
}

/* Takes ownership of m. */
static void net_send(ds *s, msg *m)
{
    if (!m) {
        return;
    }
    if (s->cut[m->from][m->to] || !node_up(s, m->from) || chance(s, s->drop_pm)) {
        msg_free(m);
        return;
    }
    if (m->type != M_PRODUCE && chance(s, s->dup_pm)) {
        msg *d = msg_copy(s, m);
        if (d) {
            ev e = {.t = s->now + net_delay(s), .type = E_MSG, .m = d};
            push(s, e);
        }
    }
    ev e = {.t = s->now + net_delay(s), .type = E_MSG, .m = m};
    push(s, e);
}

/* ---------------------------------------------------------------- simulated disk */

static int log_reserve(ds *s, dlog *l, int64_t n)
{
    if (l->len + n <= l->cap) {
        return 0;
    }
    int64_t cap = l->cap ? l->cap : 256;
    while (cap < l->len + n) {
        cap *= 2;
    }
    rec *v = realloc(l->v, (size_t)cap * sizeof(*v));
    if (!v) {
        s->nomem = 1;
        return KQ_ERR_NOMEM;
    }
    l->v = v;
    l->cap = cap;
    return 0;
}

static void schedule_persist(ds *s, broker *b, int p)
{
    dlog *l = &b->rep[p].log;
    uint64_t d =
        chance(s, s->slow_pm) || s->now < b->slow_disk_until ? rnd(s, 50, 600) : rnd(s, 1, 30);
    uint64_t t = s->now + d;
    if (t < l->persist_at) {
        t = l->persist_at; /* fsyncs complete in order */
    }
    l->persist_at = t;
    ev e = {
        .t = t, .type = E_PERSIST, .b = b->id, .p = p, .inc = b->inc, .gen = l->gen, .x = l->len};
    push(s, e);
}

static void log_truncate(ds *s, broker *b, int p, int64_t to)
{
    brep *br = &b->rep[p];
    dlog *l = &br->log;
    if (to < l->len) {
        l->len = to;
    }
    if (l->durable > to) {
        l->durable = to;
    }
    if (br->verified > to) {
        br->verified = to;
    }
    l->gen++;
    if (l->durable < l->len) {
        schedule_persist(s, b, p);
    }
}

static void ckpt_epochs(ds *s, brep *br)
{
    size_t n = 0;
    const kq_epoch_entry *e = kq_replica_epochs(br->r, &n);
    dlog *l = &br->log;
    if (n > l->cap_ep) {
        size_t cap = n * 2;
        kq_epoch_entry *v = realloc(l->ep, cap * sizeof(*v));
        if (!v) {
            s->nomem = 1;
            return;
        }
        l->ep = v;
        l->cap_ep = cap;
    }
    if (n) {
        memcpy(l->ep, e, n * sizeof(*e));
    }
    l->n_ep = n;
}

/* ---------------------------------------------------------------- controller */

static int eff_min_isr(const ds *s)
{
    return kq_min_isr_effective(s->min_isr, RF);
}

static void meta_append(ds *s, int kind, int id)
{
    if (s->nmlog == s->capmlog) {
        size_t cap = s->capmlog ? s->capmlog * 2 : 256;
        mrec *v = realloc(s->mlog, cap * sizeof(*v));
        if (!v) {
            s->nomem = 1;
            return;
        }
        s->mlog = v;
        s->capmlog = cap;
    }
    mrec *r = &s->mlog[s->nmlog++];
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->id = id;
    if (kind == 0) {
        r->p = s->cp[id];
    } else {
        r->b = s->cb[id];
    }
}

static bool ctl_acceptable(const ds *s, int32_t id, int32_t excluded)
{
    return id >= 1 && id <= s->nb && id != excluded && !s->cb[id].fenced && !s->cb[id].in_cs;
}

static void remove_id(int32_t *v, int *n, int32_t id)
{
    int k = 0;
    for (int i = 0; i < *n; i++) {
        if (v[i] != id) {
            v[k++] = v[i];
        }
    }
    *n = k;
}

/* A PartitionChange: the new ISR (ELR rules of kraft-semantics 3.5) and, if the leader is no
 * longer valid, an election from the ISR, then the ELR; never unclean (unless --bug unclean). */
static void ctl_change(ds *s, int p, const int32_t *target, int nt, int32_t excluded,
                       const char *why)
{
    cpart *c = &s->cp[p];
    cpart n = *c;

    if (nt >= eff_min_isr(s)) {
        n.nelr = 0;
    } else {
        n.nelr = 0;
        for (int i = 0; i < c->nrep; i++) {
            int32_t r = c->rep[i];
            if ((has_id(c->elr, c->nelr, r) || has_id(c->isr, c->nisr, r)) &&
                !has_id(target, nt, r)) {
                n.elr[n.nelr++] = r;
            }
        }
    }
    memcpy(n.isr, target, (size_t)nt * sizeof(*target));
    n.nisr = nt;

    bool valid =
        n.leader >= 0 && ctl_acceptable(s, n.leader, excluded) && has_id(n.isr, n.nisr, n.leader);
    if (!valid) {
        int32_t w = -1;
        for (int i = 0; i < n.nrep && w < 0; i++) {
            int32_t r = n.rep[i];
            if (ctl_acceptable(s, r, excluded) &&
                (has_id(n.isr, n.nisr, r) || (n.nisr == 0 && has_id(n.elr, n.nelr, r)))) {
                w = r;
            }
        }
        if (w >= 0 && !has_id(n.isr, n.nisr, w)) { /* from the ELR */
            n.isr[0] = w;
            n.nisr = 1;
            remove_id(n.elr, &n.nelr, w);
        }
        if (w < 0 && s->o->bug == KQ_DSIM_BUG_UNCLEAN) {
            for (int i = 0; i < n.nrep && w < 0; i++) {
                if (ctl_acceptable(s, n.rep[i], excluded)) {
                    w = n.rep[i];
                }
            }
            if (w >= 0) {
                n.isr[0] = w;
                n.nisr = 1;
                n.nelr = 0;
            }
        }
        if (w != n.leader) {
            n.leader = w;
            if (s->o->bug != KQ_DSIM_BUG_SAME_EPOCH || w < 0) {
                n.lepoch++;
            }
            s->res->elections++;
        }
    }
    if (!memcmp(&n, c, sizeof(n))) {
        return;
    }
    n.pepoch++;
    *c = n;
    meta_append(s, 0, p);
    char isr[48], elr[48];
    ids_str(isr, sizeof(isr), c->isr, c->nisr);
    ids_str(elr, sizeof(elr), c->elr, c->nelr);
    tr(s, "ctl p%d %s: leader %d epoch %d pepoch %d isr [%s] elr [%s]", p, why, (int)c->leader,
       (int)c->lepoch, (int)c->pepoch, isr, elr);
}

static void ctl_fence(ds *s, int b, const char *why)
{
    s->cb[b].fenced = true;
    tr(s, "ctl fence broker %d (%s)", b, why);
    for (int p = 0; p < s->np; p++) {
        cpart *c = &s->cp[p];
        if (has_id(c->isr, c->nisr, b) || c->leader == b) {
            int32_t t[RF];
            int nt = c->nisr;
            memcpy(t, c->isr, sizeof(t));
            remove_id(t, &nt, b);
            ctl_change(s, p, t, nt, b, "fence");
        }
    }
    meta_append(s, 1, b);
}

static void ctl_unfence(ds *s, int b)
{
    s->cb[b].fenced = false;
    meta_append(s, 1, b);
    tr(s, "ctl unfence broker %d", b);
    for (int p = 0; p < s->np; p++) {
        cpart *c = &s->cp[p];
        if (c->leader < 0) {
            int32_t t[RF];
            memcpy(t, c->isr, sizeof(t));
            ctl_change(s, p, t, c->nisr, -1, "unfence election");
        }
    }
}

static void ctl_alter(ds *s, const msg *m)
{
    const kq_replica_alter_request *a = &m->areq;
    int p = m->part, err = KQ_OK;
    int b = m->from;
    cpart *c = &s->cp[p];

    if (m->bepoch != s->cb[b].epoch) {
        err = KQ_ERR_STALE_BROKER_EPOCH;
    } else if (a->leader_epoch > c->lepoch || a->partition_epoch > c->pepoch) {
        err = KQ_ERR_NOT_CONTROLLER;
    } else if (a->leader_epoch < c->lepoch) {
        err = KQ_ERR_FENCED_LEADER_EPOCH;
    } else if (b != c->leader) {
        err = KQ_ERR_INVALID_REQUEST;
    } else if (a->partition_epoch < c->pepoch) {
        err = KQ_ERR_INVALID_UPDATE_VERSION;
    } else if (a->n_new_isr < 1 || a->n_new_isr > RF || !has_id(a->new_isr, a->n_new_isr, b)) {
        err = KQ_ERR_INVALID_REQUEST;
    } else {
        for (int i = 0; i < a->n_new_isr && !err; i++) {
            int32_t id = a->new_isr[i];
            if (!has_id(c->rep, c->nrep, id) || has_id(a->new_isr, i, id)) {
                err = KQ_ERR_INVALID_REQUEST;
            } else if (s->cb[id].fenced || s->cb[id].in_cs ||
                       (a->new_isr_broker_epochs[i] >= 0 && id != b &&
                        a->new_isr_broker_epochs[i] != s->cb[id].epoch)) {
                err = KQ_ERR_INELIGIBLE_REPLICA;
            }
        }
    }
    if (!err) {
        bool same = a->n_new_isr == c->nisr;
        for (int i = 0; i < a->n_new_isr && same; i++) {
            same = has_id(c->isr, c->nisr, a->new_isr[i]);
        }
        if (!same) {
            ctl_change(s, p, a->new_isr, a->n_new_isr, -1, "alter-partition");
        }
    }
    char isr[48];
    ids_str(isr, sizeof(isr), a->new_isr, a->n_new_isr);
    tr(s, "ctl p%d alter from %d (epoch %d/%d isr [%s]): %s", p, b, (int)a->leader_epoch,
       (int)a->partition_epoch, isr, kq_err_name(err));
    msg *r = msg_new(s, M_ALTER_RESP, CTL, b, p);
    if (!r) {
        return;
    }
    r->to_inc = m->from_inc;
    r->err = err;
    r->seq = a->request_id;
    r->state = *c;
    net_send(s, r);
}

static bool ctl_leads_any(const ds *s, int b)
{
    for (int p = 0; p < s->np; p++) {
        if (s->cp[p].leader == b) {
            return true;
        }
    }
    return false;
}

/* kraft-semantics 3.3: UNFENCED -> CONTROLLED_SHUTDOWN (leave every ISR, move leaderships);
 * leading nothing any more -> SHUTDOWN_NOW (fenced). */
static void ctl_controlled_shutdown(ds *s, int b)
{
    cbroker *c = &s->cb[b];

    if (c->fenced) {
        return;
    }
    if (!c->in_cs) {
        c->in_cs = true;
        meta_append(s, 1, b);
        tr(s, "ctl broker %d enters controlled shutdown", b);
        for (int p = 0; p < s->np; p++) {
            cpart *cp = &s->cp[p];
            if (has_id(cp->isr, cp->nisr, b) || cp->leader == b) {
                int32_t t[RF];
                int nt = cp->nisr;
                memcpy(t, cp->isr, sizeof(t));
                remove_id(t, &nt, b);
                ctl_change(s, p, t, nt, b, "controlled shutdown");
            }
        }
    }
    if (!ctl_leads_any(s, b)) {
        ctl_fence(s, b, "controlled shutdown complete");
    }
}

static void ctl_msg(ds *s, const msg *m)
{
    int b = m->from;
    cbroker *c = &s->cb[b];

    switch (m->type) {
    case M_REGISTER:
        if (m->bepoch > c->epoch) {
            if (!c->fenced) {
                ctl_fence(s, b, "re-registration");
            }
            c->epoch = m->bepoch;
            c->fenced = true;
            c->in_cs = false;
            c->last_contact = s->now;
            c->reg_index = s->nmlog;
            meta_append(s, 1, b);
            tr(s, "ctl register broker %d epoch %" PRId64, b, m->bepoch);
        }
        break;
    case M_HEARTBEAT:
        if (m->bepoch != c->epoch) {
            break;
        }
        c->last_contact = s->now;
        if (m->want_shutdown) {
            ctl_controlled_shutdown(s, b);
        } else if (c->fenced && m->meta_applied > c->reg_index) {
            ctl_unfence(s, b);
        }
        break;
    case M_ALTER:
        ctl_alter(s, m);
        break;
    default:
        break;
    }
}

static void ctl_check(ds *s)
{
    for (int b = 1; b <= s->nb; b++) {
        cbroker *c = &s->cb[b];
        if (!c->fenced && s->now > c->last_contact + SESSION_MS) {
            ctl_fence(s, b, "session expired");
            break; /* one per check */
        }
    }
    at(s, s->now + 100, E_CTL_CHECK, 0, 0, 0);
}

/* ---------------------------------------------------------------- checkers */

static int pp_grow(ds *s, perpart *q, int32_t epoch)
{
    if ((size_t)epoch < q->n_epochs) {
        return 0;
    }
    size_t n = (size_t)epoch * 2 + 16;
    int32_t *lo = realloc(q->lead_of, n * sizeof(*lo));
    if (!lo) {
        s->nomem = 1;
        return KQ_ERR_NOMEM;
    }
    q->lead_of = lo;
    int64_t *hm = realloc(q->hw_max, n * sizeof(*hm));
    if (!hm) {
        s->nomem = 1;
        return KQ_ERR_NOMEM;
    }
    q->hw_max = hm;
    for (size_t i = q->n_epochs; i < n; i++) {
        q->lead_of[i] = -1;
        q->hw_max[i] = -1;
    }
    q->n_epochs = n;
    return 0;
}

/* The first acks=all produce acknowledged with a record in [from, to) of partition p, 0 none. */
static uint64_t acked_in(const ds *s, int p, int64_t from, int64_t to)
{
    for (uint64_t i = 0; i < s->nprods; i++) {
        const prod *pr = &s->prods[i];
        if (pr->part == p && pr->acks == -1 && pr->base >= 0 && pr->base + pr->count > from &&
            pr->base < to) {
            return i + 1;
        }
    }
    return 0;
}

static void check_replica(ds *s, broker *b, int p)
{
    brep *br = &b->rep[p];
    dlog *l = &br->log;
    perpart *q = &s->pp[p];
    kq_replica_status st;

    kq_replica_get_status(br->r, &st);
    if (st.log_end_offset != l->len || st.durable_end_offset > l->durable) {
        fail(s,
             "host: p%d broker %d replica LEO %" PRId64 " durable %" PRId64 " but log %" PRId64
             " durable %" PRId64,
             p, b->id, st.log_end_offset, st.durable_end_offset, l->len, l->durable);
        return;
    }
    if (st.high_watermark > l->len) {
        fail(s, "inv2: p%d broker %d HW %" PRId64 " beyond its log end %" PRId64, p, b->id,
             st.high_watermark, l->len);
        return;
    }
    if (st.role == KQ_REPLICA_LEADER) {
        int32_t e = st.leader_epoch;
        if (pp_grow(s, q, e)) {
            return;
        }
        if (q->lead_of[e] < 0) {
            q->lead_of[e] = b->id;
            /* a new leader must hold every record a consumer could already have read */
            if (l->len < q->com_len) {
                uint64_t lost = acked_in(s, p, l->len, q->com_len);
                if (lost) {
                    fail(s,
                         "inv1: p%d broker %d leads epoch %d with log end %" PRId64
                         ": acks=all record %" PRIu64 " acknowledged at %" PRId64
                         " is lost (committed end %" PRId64 ")",
                         p, b->id, (int)e, l->len, lost, s->prods[lost - 1].base, q->com_len);
                } else {
                    fail(s,
                         "inv3: p%d broker %d leads epoch %d with log end %" PRId64
                         " below the committed end %" PRId64,
                         p, b->id, (int)e, l->len, q->com_len);
                }
                return;
            }
            tr(s, "p%d broker %d leads epoch %d (log end %" PRId64 ", HW %" PRId64 ")", p, b->id,
               (int)e, l->len, st.high_watermark);
        } else if (q->lead_of[e] != b->id) {
            fail(s, "inv4: p%d epoch %d has two leaders: %d and %d", p, (int)e, (int)q->lead_of[e],
                 b->id);
            return;
        }
        if (st.high_watermark < q->hw_max[e]) {
            fail(s, "inv3: p%d leader %d HW went down from %" PRId64 " to %" PRId64 " in epoch %d",
                 p, b->id, q->hw_max[e], st.high_watermark, (int)e);
            return;
        }
        q->hw_max[e] = st.high_watermark;
        /* a consumer may now read up to the HW: those records are committed */
        if (st.high_watermark > q->com_len) {
            int64_t from = q->com_len < br->verified ? q->com_len : br->verified;
            for (int64_t o = from; o < q->com_len; o++) {
                if (l->v[o].payload != q->com[o].payload) {
                    fail(s,
                         "inv3: p%d leader %d offset %" PRId64 " holds %" PRIu64 " but %" PRIu64
                         " was committed",
                         p, b->id, o, l->v[o].payload, q->com[o].payload);
                    return;
                }
            }
            if (st.high_watermark > q->com_cap) {
                int64_t cap = q->com_cap ? q->com_cap : 256;
                while (cap < st.high_watermark) {
                    cap *= 2;
                }
                rec *v = realloc(q->com, (size_t)cap * sizeof(*v));
                if (!v) {
                    s->nomem = 1;
                    return;
                }
                q->com = v;
                q->com_cap = cap;
            }
            memcpy(q->com + q->com_len, l->v + q->com_len,
                   (size_t)(st.high_watermark - q->com_len) * sizeof(rec));
            q->com_len = st.high_watermark;
            if (br->verified < q->com_len) {
                br->verified = q->com_len;
            }
        }
    }
    /* inv 2: below its HW a replica holds exactly the committed records */
    for (int64_t o = br->verified; o < st.high_watermark; o++) {
        if (o >= q->com_len) {
            fail(s, "inv2: p%d broker %d HW %" PRId64 " exceeds every leader's HW (%" PRId64 ")", p,
                 b->id, st.high_watermark, q->com_len);
            return;
        }
        if (l->v[o].payload != q->com[o].payload || l->v[o].epoch != q->com[o].epoch) {
            fail(s,
                 "inv2: p%d broker %d offset %" PRId64 " below HW %" PRId64 " holds %" PRIu64
                 "@e%d but %" PRIu64 "@e%d was committed",
                 p, b->id, o, st.high_watermark, l->v[o].payload, (int)l->v[o].epoch,
                 q->com[o].payload, (int)q->com[o].epoch);
            return;
        }
    }
    if (br->verified < st.high_watermark) {
        br->verified = st.high_watermark;
    }
}

/* ---------------------------------------------------------------- broker host */

static bool paused(const ds *s, const broker *b)
{
    return b->paused_until > s->now;
}

static void maybe_fetch(ds *s, broker *b, int p);

static void arm_fetch(ds *s, broker *b, int p, uint64_t t)
{
    fetcher *f = &b->rep[p].f;
    if (f->armed_at == 0 || t < f->armed_at) {
        f->armed_at = t;
        at(s, t, E_FETCH, b->id, p, b->inc);
    }
}

/* Step one event and act on the update in the header's order. `src` is the FETCH_RESPONSE
 * message whose records the appended batches borrow. `fa` receives a FOLLOWER_FETCH answer. */
static int rep_step(ds *s, broker *b, int p, kq_replica_event *e, kq_replica_fetch_answer *fa)
{
    brep *br = &b->rep[p];
    dlog *l = &br->log;
    kq_replica_update *u = &s->u;

    e->now_ms = s->now;
    int rc = kq_replica_step(br->r, e, u);
    if (rc) {
        fail(s, "p%d broker %d: step of event %d failed: %s (%s)", p, b->id, (int)e->type,
             kq_err_name(rc), u->reason);
        return rc;
    }
    /* 1.-3. */
    if (u->reset_log_start >= 0) {
        fail(s, "p%d broker %d: unexpected log reset to %" PRId64 " (log start is always 0)", p,
             b->id, u->reset_log_start);
        return KQ_ERR_INTERNAL;
    }
    if (u->truncate_to >= 0) {
        tr(s, "p%d broker %d truncates %" PRId64 " -> %" PRId64, p, b->id, l->len, u->truncate_to);
        s->res->truncations++;
        log_truncate(s, b, p, u->truncate_to);
    }
    if (u->n_append) {
        for (size_t i = 0; i < u->n_append; i++) {
            const kq_replica_batch *bt = &u->append[i];
            if (bt->base_offset != l->len || log_reserve(s, l, bt->count)) {
                fail(s,
                     "p%d broker %d: append at %" PRId64 " does not continue the log at %" PRId64,
                     p, b->id, bt->base_offset, l->len);
                return KQ_ERR_INTERNAL;
            }
            for (int32_t k = 0; k < bt->count; k++) {
                rec *r = &l->v[l->len + k];
                if (e->type == KQ_REPLICA_EV_APPEND) {
                    r->epoch = bt->epoch;
                    r->payload = e->u.append.token * 16 + (uint64_t)k;
                } else {
                    memcpy(r, bt->data + (size_t)k * sizeof(rec), sizeof(rec));
                    if (r->epoch != bt->epoch) {
                        fail(s, "p%d broker %d: fetched batch epoch %d but record epoch %d", p,
                             b->id, (int)bt->epoch, (int)r->epoch);
                        return KQ_ERR_INTERNAL;
                    }
                }
            }
            l->len += bt->count;
        }
        schedule_persist(s, b, p);
    }
    /* 4. */
    if (u->epochs_changed) {
        ckpt_epochs(s, br);
    }
    /* 6. answers */
    if (u->has_produce || u->n_completions) {
        for (size_t i = 0; i < u->n_completions + (u->has_produce ? 1 : 0); i++) {
            const kq_replica_completion *c =
                i < u->n_completions ? &u->completions[i] : &u->produce;
            msg *m = msg_new(s, M_PRODUCE_RESP, b->id, PRODUCER, p);
            if (m) {
                m->seq = c->token;
                m->err = c->error;
                m->base = c->base_offset;
                net_send(s, m);
            }
        }
    }
    if (u->has_fetch && fa) {
        *fa = u->fetch;
    }
    /* 7. */
    if (u->send_alter) {
        msg *m = msg_new(s, M_ALTER, b->id, CTL, p);
        if (m) {
            m->areq = u->alter;
            m->bepoch = b->bepoch;
            msg_free(br->alter);
            br->alter = msg_copy(s, m);
            br->alter_sent_at = s->now;
            at(s, s->now + ALTER_RESEND_MS, E_ALTER_RTX, b->id, p, b->inc);
            net_send(s, m);
        }
    }
    /* 8. */
    for (int i = 0; i < u->n_log; i++) {
        tr(s, "%s", u->log[i]);
    }
    if (u->role != KQ_REPLICA_LEADER && br->alter) {
        msg_free(br->alter);
        br->alter = NULL;
    }
    /* 9. */
    if (u->restart_fetcher) {
        br->f.outstanding = false;
        br->f.not_before = s->now;
    }
    /* 10. */
    if (u->next_deadline_ms != br->timer_at) {
        br->timer_at = u->next_deadline_ms;
        if (br->timer_at != KQ_REPLICA_NO_DEADLINE) {
            at(s, br->timer_at > s->now ? br->timer_at : s->now, E_TIMER, b->id, p, b->inc);
        }
    }
    check_replica(s, b, p);
    maybe_fetch(s, b, p);
    return 0;
}

static void maybe_fetch(ds *s, broker *b, int p)
{
    brep *br = &b->rep[p];
    fetcher *f = &br->f;
    kq_replica_fetch_request q;

    if (!b->alive || paused(s, b) || !br->r || s->res->failed) {
        return;
    }
    if (!kq_replica_next_fetch(br->r, &q)) {
        f->outstanding = false;
        return;
    }
    if (f->outstanding) {
        if (s->now < f->sent_at + FETCH_TIMEOUT_MS) {
            arm_fetch(s, b, p, f->sent_at + FETCH_TIMEOUT_MS);
            return;
        }
        f->outstanding = false;
    }
    if (s->now < f->not_before) {
        arm_fetch(s, b, p, f->not_before);
        return;
    }
    if (s->o->bug != KQ_DSIM_BUG_EARLY_FETCH && br->log.durable < br->log.len) {
        return; /* the PERSISTED step calls again */
    }
    msg *m = msg_new(s, M_FETCH, b->id, q.leader_id, p);
    if (!m) {
        return;
    }
    m->seq = ++s->seq;
    m->freq = q;
    m->bepoch = b->bepoch;
    tr(s, "p%d broker %d fetch from %d at %" PRId64 " (last epoch %d, leader epoch %d)", p, b->id,
       (int)q.leader_id, q.fetch_offset, (int)q.last_fetched_epoch, (int)q.current_leader_epoch);
    f->seq = m->seq;
    f->outstanding = true;
    f->sent_at = s->now;
    arm_fetch(s, b, p, s->now + FETCH_TIMEOUT_MS);
    net_send(s, m);
}

static void on_follower_fetch(ds *s, broker *b, const msg *m)
{
    int p = m->part;
    brep *br = &b->rep[p];
    kq_replica_fetch_answer fa;
    kq_replica_event e = {.type = KQ_REPLICA_EV_FOLLOWER_FETCH};

    if (!b->hosts[p]) {
        return;
    }
    e.u.fetch.replica_id = m->from;
    e.u.fetch.fetch_offset = m->freq.fetch_offset;
    e.u.fetch.last_fetched_epoch = m->freq.last_fetched_epoch;
    e.u.fetch.current_leader_epoch = m->freq.current_leader_epoch;
    e.u.fetch.broker_epoch = m->bepoch;
    memset(&fa, 0, sizeof(fa));
    if (rep_step(s, b, p, &e, &fa)) {
        return;
    }
    msg *r = msg_new(s, M_FETCH_RESP, b->id, m->from, p);
    if (!r) {
        return;
    }
    r->to_inc = m->from_inc;
    r->seq = m->seq;
    r->freq = m->freq;
    r->fans = fa;
    if (!fa.error && !fa.diverging && fa.records_to > fa.records_from) {
        int64_t to = fa.records_to;
        if (to > br->log.len) {
            to = br->log.len;
        }
        if (to > fa.records_from + MAX_FETCH_RECS) {
            to = fa.records_from + MAX_FETCH_RECS;
        }
        if (to > fa.records_from) {
            r->n_recs = (int)(to - fa.records_from);
            r->recs = malloc((size_t)r->n_recs * sizeof(rec));
            if (!r->recs) {
                s->nomem = 1;
                msg_free(r);
                return;
            }
            memcpy(r->recs, br->log.v + fa.records_from, (size_t)r->n_recs * sizeof(rec));
        }
    }
    tr(s,
       "p%d broker %d answers fetch of %d at %" PRId64 ": %s%s, records %" PRId64 "..%" PRId64
       " (%d sent), HW %" PRId64,
       p, b->id, m->from, m->freq.fetch_offset, kq_err_name(fa.error),
       fa.diverging ? " diverging" : "", fa.records_from, fa.records_to, r->n_recs,
       fa.high_watermark);
    net_send(s, r);
}

static void on_fetch_response(ds *s, broker *b, const msg *m)
{
    int p = m->part;
    brep *br = &b->rep[p];
    fetcher *f = &br->f;
    kq_replica_batch bt[KQ_REPLICA_MAX_BATCHES];
    size_t nb = 0;
    kq_replica_event e = {.type = KQ_REPLICA_EV_FETCH_RESPONSE};
    kq_replica_fetch_response *fr = &e.u.fetch_resp;

    if (!b->hosts[p]) {
        return;
    }
    if (f->outstanding && m->seq == f->seq) {
        f->outstanding = false;
    } else if (!s->loose) {
        return; /* an answer to an abandoned request */
    }           /* loose transport: the core must recognise a stale answer itself */
    fr->error = m->fans.error;
    fr->fetch_offset = m->freq.fetch_offset;
    fr->leader_epoch = m->fans.leader_epoch;
    fr->high_watermark = m->fans.high_watermark;
    fr->log_start_offset = m->fans.log_start_offset;
    fr->diverging = m->fans.diverging;
    fr->diverging_epoch = m->fans.diverging_epoch;
    fr->diverging_end_offset = m->fans.diverging_end_offset;
    /* batches: runs of one epoch and one producer batch */
    for (int i = 0; i < m->n_recs && nb < KQ_REPLICA_MAX_BATCHES;) {
        int j = i + 1;
        while (j < m->n_recs && m->recs[j].epoch == m->recs[i].epoch &&
               m->recs[j].payload / 16 == m->recs[i].payload / 16) {
            j++;
        }
        bt[nb].base_offset = m->freq.fetch_offset + i;
        bt[nb].epoch = m->recs[i].epoch;
        bt[nb].count = j - i;
        bt[nb].data = (const uint8_t *)&m->recs[i];
        bt[nb].len = (size_t)(j - i) * sizeof(rec);
        nb++;
        i = j;
    }
    fr->batches = bt;
    fr->n_batches = nb;
    if (fr->error) {
        f->not_before = s->now + 100;
    } else if (!fr->diverging && nb == 0) {
        f->not_before = s->now + rnd(s, 5, 80); /* long-poll wait */
    }
    rep_step(s, b, p, &e, NULL);
}

static void on_produce(ds *s, broker *b, const msg *m)
{
    int p = m->part;
    if (!b->hosts[p]) {
        msg *r = msg_new(s, M_PRODUCE_RESP, b->id, PRODUCER, p);
        if (r) {
            r->seq = m->seq;
            r->err = KQ_ERR_NOT_LEADER_OR_FOLLOWER;
            r->base = -1;
            net_send(s, r);
        }
        return;
    }
    kq_replica_event e = {.type = KQ_REPLICA_EV_APPEND};
    e.u.append.acks = m->acks;
    e.u.append.count = m->count;
    e.u.append.token = m->seq;
    e.u.append.timeout_ms = PRODUCE_TIMEOUT_MS;
    rep_step(s, b, p, &e, NULL);
}

static void on_alter_response(ds *s, broker *b, const msg *m)
{
    int p = m->part;
    brep *br = &b->rep[p];
    if (!b->hosts[p]) {
        return;
    }
    if (br->alter && br->alter->areq.request_id == m->seq) {
        msg_free(br->alter);
        br->alter = NULL;
    }
    kq_replica_event e = {.type = KQ_REPLICA_EV_ALTER_RESPONSE};
    e.u.alter_resp.request_id = m->seq;
    e.u.alter_resp.error = m->err;
    e.u.alter_resp.leader_id = m->state.leader;
    e.u.alter_resp.leader_epoch = m->state.lepoch;
    e.u.alter_resp.partition_epoch = m->state.pepoch;
    e.u.alter_resp.isr = m->state.isr;
    e.u.alter_resp.n_isr = m->state.nisr;
    rep_step(s, b, p, &e, NULL);
}

static void fill_brokers(const broker *b, const cpart *c, kq_replica_broker *out)
{
    for (int i = 0; i < c->nrep; i++) {
        int32_t id = c->rep[i];
        out[i].id = id;
        out[i].broker_epoch = b->img_b[id].epoch;
        out[i].fenced = b->img_b[id].fenced;
        out[i].in_controlled_shutdown = b->img_b[id].in_cs;
    }
}

/* Follow the metadata log: everything new since the last poll, as one delta per partition. */
static void meta_poll(ds *s, broker *b)
{
    at(s, s->now + (chance(s, s->meta_slow_pm) ? rnd(s, 500, 3000) : rnd(s, 10, 250)), E_META,
       b->id, 0, b->inc);
    if (s->cut[CTL][b->id] || b->meta_applied >= s->nmlog) {
        return;
    }
    size_t end = s->nmlog;
    if (!b->registered_seen) {
        for (size_t i = 0; i < end && !b->registered_seen; i++) {
            if (s->mlog[i].kind == 1 && s->mlog[i].id == b->id && s->mlog[i].b.epoch == b->bepoch) {
                b->registered_seen = true;
            }
        }
        if (!b->registered_seen) {
            return;
        }
    }
    bool pchg[NP] = {false}, bchg = false;
    for (size_t i = b->meta_applied; i < end; i++) {
        const mrec *r = &s->mlog[i];
        if (r->kind == 0) {
            b->img_p[r->id] = r->p;
            pchg[r->id] = true;
        } else {
            b->img_b[r->id] = r->b;
            bchg = true;
        }
    }
    b->meta_applied = end;
    for (int p = 0; p < s->np && !s->res->failed; p++) {
        if (!b->hosts[p]) {
            continue;
        }
        const cpart *c = &b->img_p[p];
        kq_replica_broker bs[RF];
        fill_brokers(b, c, bs);
        kq_replica_event e;
        memset(&e, 0, sizeof(e));
        if (pchg[p]) {
            e.type = KQ_REPLICA_EV_DELTA;
            e.u.delta.leader_id = c->leader;
            e.u.delta.leader_epoch = c->lepoch;
            e.u.delta.partition_epoch = c->pepoch;
            e.u.delta.replicas = c->rep;
            e.u.delta.n_replicas = c->nrep;
            e.u.delta.isr = c->isr;
            e.u.delta.n_isr = c->nisr;
            e.u.delta.min_insync_replicas = s->min_isr;
            e.u.delta.brokers = bs;
            e.u.delta.n_brokers = c->nrep;
        } else if (bchg) {
            e.type = KQ_REPLICA_EV_BROKERS;
            e.u.brokers.brokers = bs;
            e.u.brokers.n_brokers = c->nrep;
        } else {
            continue;
        }
        rep_step(s, b, p, &e, NULL);
    }
}

static void broker_start(ds *s, broker *b)
{
    char err[160];
    kq_replica_config cfg;

    b->alive = true;
    b->inc++;
    b->registered_seen = false;
    b->meta_applied = 0;
    memset(b->img_p, 0, sizeof(b->img_p));
    memset(b->img_b, 0, sizeof(b->img_b));
    for (int p = 0; p < s->np && !s->res->failed; p++) {
        brep *br = &b->rep[p];
        if (!b->hosts[p]) {
            continue;
        }
        kq_replica_config_defaults(&cfg);
        cfg.node_id = b->id;
        snprintf(cfg.topic, sizeof(cfg.topic), "dsim");
        cfg.partition = p;
        cfg.replica_lag_time_max_ms = s->lag_ms;
        cfg.min_insync_replicas = s->min_isr;
        cfg.request_timeout_ms = PRODUCE_TIMEOUT_MS;
        br->r = kq_replica_new(&cfg, err, sizeof(err));
        if (!br->r) {
            fail(s, "p%d broker %d: %s", p, b->id, err);
            return;
        }
        memset(&br->f, 0, sizeof(br->f));
        br->timer_at = KQ_REPLICA_NO_DEADLINE;
        br->verified = 0;
        kq_replica_event e = {.type = KQ_REPLICA_EV_START};
        e.u.start.log_start_offset = 0;
        e.u.start.log_end_offset = br->log.len;
        e.u.start.high_watermark = br->log.hw_ckpt;
        e.u.start.epochs = br->log.ep;
        e.u.start.n_epochs = br->log.n_ep;
        rep_step(s, b, p, &e, NULL);
    }
    at(s, s->now, E_HEARTBEAT, b->id, 0, b->inc);
    at(s, s->now + rnd(s, 1, 50), E_META, b->id, 0, b->inc);
    at(s, s->now + HW_CKPT_MS, E_HWCKPT, b->id, 0, b->inc);
}

/* Stop a broker: a crash loses what is not durable; a clean stop (the end of a controlled
 * shutdown) flushes first. */
static void broker_stop(ds *s, broker *b, bool clean)
{
    b->alive = false;
    b->paused_until = 0;
    b->shutdown_deadline = 0;
    if (clean) {
        s->res->shutdowns++;
    } else {
        s->res->crashes++;
    }
    for (int p = 0; p < s->np; p++) {
        brep *br = &b->rep[p];
        if (!b->hosts[p]) {
            continue;
        }
        dlog *l = &br->log;
        kq_replica_free(br->r);
        br->r = NULL;
        msg_free(br->alter);
        br->alter = NULL;
        if (clean) {
            l->durable = l->len;
        } else if (s->o->bug == KQ_DSIM_BUG_LOSE_SYNCED && l->durable > 0) {
            l->durable -= (int64_t)rnd(s, 1, l->durable < 3 ? (uint64_t)l->durable : 3);
        }
        tr(s, "p%d broker %d %s: log %" PRId64 " -> durable %" PRId64, p, b->id,
           clean ? "stops cleanly" : "crash", l->len, l->durable);
        l->len = l->durable;
        l->gen++;
        l->persist_at = 0;
        size_t k = 0;
        while (k < l->n_ep && l->ep[k].start_offset <= l->len) {
            k++;
        }
        l->n_ep = k;
    }
}

static void broker_msg(ds *s, broker *b, const msg *m)
{
    switch (m->type) {
    case M_FETCH:
        on_follower_fetch(s, b, m);
        break;
    case M_FETCH_RESP:
        on_fetch_response(s, b, m);
        break;
    case M_PRODUCE:
        on_produce(s, b, m);
        break;
    case M_ALTER_RESP:
        on_alter_response(s, b, m);
        break;
    default:
        break;
    }
}

/* ---------------------------------------------------------------- producer */

static void producer_tick(ds *s)
{
    if (s->now >= s->safety_end) {
        return;
    }
    at(s, s->now + rnd(s, 3, 60), E_PRODUCE, 0, 0, 0);
    if (s->nprods == s->capprods) {
        uint64_t cap = s->capprods ? s->capprods * 2 : 1024;
        prod *v = realloc(s->prods, cap * sizeof(*v));
        if (!v) {
            s->nomem = 1;
            return;
        }
        s->prods = v;
        s->capprods = cap;
    }
    uint64_t pid = ++s->nprods; /* prods[pid - 1] */
    prod *pr = &s->prods[pid - 1];
    pr->part = (int)rnd(s, 0, (uint64_t)s->np - 1);
    pr->acks = chance(s, 120) ? 1 : -1;
    pr->count = (int32_t)rnd(s, 1, 3);
    pr->answered = false;
    pr->base = -1;
    if (s->now >= s->prod_view_at) { /* the producer's metadata refresh */
        for (int p = 0; p < s->np; p++) {
            s->prod_view[p] = s->cp[p].leader;
        }
        s->prod_view_at = s->now + rnd(s, 50, 1500);
    }
    int target = s->prod_view[pr->part];
    if (target < 1 || chance(s, 100)) {
        target = (int)rnd(s, 1, (uint64_t)s->nb);
    }
    msg *m = msg_new(s, M_PRODUCE, PRODUCER, target, pr->part);
    if (!m) {
        return;
    }
    m->seq = pid;
    m->acks = pr->acks;
    m->count = pr->count;
    s->res->produced++;
    net_send(s, m);
}

static void producer_answer(ds *s, const msg *m)
{
    if (m->seq < 1 || m->seq > s->nprods) {
        return;
    }
    prod *pr = &s->prods[m->seq - 1];
    if (pr->answered) {
        return;
    }
    pr->answered = true;
    if (m->err != KQ_OK) {
        tr(s, "producer: p%d acks=%d id %" PRIu64 " failed at %d: %s", pr->part, (int)pr->acks,
           m->seq, m->from, kq_err_name(m->err));
        return;
    }
    pr->base = m->base;
    perpart *q = &s->pp[pr->part];
    if (pr->acks == 1) {
        s->res->acked_one += (uint64_t)pr->count;
        return;
    }
    s->res->acked_all += (uint64_t)pr->count;
    tr(s, "producer: p%d acks=all id %" PRIu64 " acknowledged at %" PRId64 " by %d", pr->part,
       m->seq, m->base, m->from);
    for (int32_t k = 0; k < pr->count; k++) {
        int64_t o = m->base + k;
        if (o >= q->com_len || q->com[o].payload != m->seq * 16 + (uint64_t)k) {
            fail(s,
                 "inv1: p%d acks=all record %" PRIu64 "/%d acknowledged at %" PRId64
                 " by %d but not committed there (committed end %" PRId64 ")",
                 pr->part, m->seq, (int)k, o, m->from, q->com_len);
            return;
        }
    }
}

/* ---------------------------------------------------------------- faults */

static int pick_broker(ds *s, bool alive)
{
    int cand[NB], n = 0;
    for (int b = 1; b <= s->nb; b++) {
        if (s->br[b].alive == alive) {
            cand[n++] = b;
        }
    }
    return n ? cand[rnd(s, 0, (uint64_t)n - 1)] : -1;
}

static void fault(ds *s)
{
    if (s->now >= s->safety_end) {
        return;
    }
    at(s, s->now + rnd(s, s->fault_min_ms, s->fault_max_ms), E_FAULT, 0, 0, 0);
    uint64_t k = rnd(s, 0, 99);
    int b = pick_broker(s, true);
    if (b < 0) {
        return;
    }
    broker *br = &s->br[b];
    if (k < 25) {
        broker_stop(s, br, false);
        br->restart_at = s->now + rnd(s, 50, 4000);
        at(s, br->restart_at, E_RESTART, b, 0, br->inc);
    } else if (k < 45 && !paused(s, br)) {
        br->paused_until = s->now + rnd(s, 50, SESSION_MS * 2);
        s->res->pauses++;
        tr(s, "broker %d paused until %" PRIu64, b, br->paused_until);
    } else if (k < 75) {
        int n = 0;
        for (int o = 0; o < NNODES; o++) {
            bool c = o != b && (o == CTL || o == PRODUCER || o <= s->nb) && chance(s, 500);
            if (c) {
                s->cut[b][o] = s->cut[o][b] = true;
                n++;
            }
        }
        tr(s, "broker %d cut off from %d nodes", b, n);
        at(s, s->now + rnd(s, 200, 5000), E_HEAL_CUT, b, 0, 0);
    } else if (k < 82 && !br->shutdown_deadline) {
        br->shutdown_deadline = s->now + rnd(s, 1000, 6000);
        tr(s, "broker %d asks for a controlled shutdown", b);
    } else if (k < 90) {
        br->slow_disk_until = s->now + rnd(s, 200, 3000);
        tr(s, "broker %d disk slow until %" PRIu64, b, br->slow_disk_until);
    }
}

static void heal_all(ds *s)
{
    s->healing = true;
    s->drop_pm = 0;
    s->dup_pm = 0;
    s->slow_pm = 0;
    s->meta_slow_pm = 0;
    memset(s->cut, 0, sizeof(s->cut));
    tr(s, "heal: faults stop, network heals, brokers restart");
    for (int b = 1; b <= s->nb; b++) {
        broker *br = &s->br[b];
        br->slow_disk_until = 0;
        if (!br->alive) {
            br->restart_at = s->now;
            at(s, s->now, E_RESTART, b, 0, br->inc);
        }
    }
    at(s, s->now + CONVERGE_EVERY_MS, E_CONVERGE, 0, 0, 0);
}

/* ---------------------------------------------------------------- end state */

static bool converged(ds *s)
{
    for (int p = 0; p < s->np; p++) {
        const cpart *c = &s->cp[p];
        if (c->leader < 1 || c->nisr != c->nrep) {
            return false;
        }
        broker *lb = &s->br[c->leader];
        if (!lb->alive || paused(s, lb) || s->cb[c->leader].fenced) {
            return false;
        }
        kq_replica_status ls;
        kq_replica_get_status(lb->rep[p].r, &ls);
        if (ls.role != KQ_REPLICA_LEADER || ls.leader_epoch != c->lepoch || ls.n_isr != c->nrep ||
            ls.pending != KQ_REPLICA_PENDING_NONE || ls.n_parked ||
            ls.high_watermark != ls.log_end_offset || ls.durable_end_offset != ls.log_end_offset) {
            return false;
        }
        for (int i = 0; i < c->nrep; i++) {
            broker *fb = &s->br[c->rep[i]];
            kq_replica_status fs;
            if (!fb->alive || !fb->rep[p].r) {
                return false;
            }
            kq_replica_get_status(fb->rep[p].r, &fs);
            if (fs.leader_epoch != c->lepoch || fs.log_end_offset != ls.log_end_offset ||
                fs.high_watermark != ls.log_end_offset ||
                fs.durable_end_offset != ls.log_end_offset) {
                return false;
            }
        }
    }
    return true;
}

static void final_check(ds *s)
{
    for (int p = 0; p < s->np && !s->res->failed; p++) {
        const cpart *c = &s->cp[p];
        perpart *q = &s->pp[p];
        const dlog *ll = &s->br[c->leader].rep[p].log;
        s->res->final_end[p] = ll->len;
        for (int i = 0; i < c->nrep && !s->res->failed; i++) {
            const dlog *l = &s->br[c->rep[i]].rep[p].log;
            for (int64_t o = 0; o < l->len; o++) {
                if (l->v[o].payload != ll->v[o].payload || l->v[o].epoch != ll->v[o].epoch) {
                    fail(s,
                         "inv2: p%d replicas %d and %d differ at offset %" PRId64
                         " after convergence",
                         p, (int)c->leader, (int)c->rep[i], o);
                    break;
                }
            }
        }
        for (int64_t o = 0; o < q->com_len && !s->res->failed; o++) {
            if (o >= ll->len || ll->v[o].payload != q->com[o].payload) {
                fail(s, "inv3: p%d committed offset %" PRId64 " is gone from the final leader %d",
                     p, o, (int)c->leader);
            }
        }
    }
    for (uint64_t i = 0; i < s->nprods && !s->res->failed; i++) {
        const prod *pr = &s->prods[i];
        if (pr->acks != -1 || !pr->answered || pr->base < 0) {
            continue;
        }
        const cpart *c = &s->cp[pr->part];
        for (int r = 0; r < c->nisr && !s->res->failed; r++) {
            const dlog *l = &s->br[c->isr[r]].rep[pr->part].log;
            for (int32_t k = 0; k < pr->count; k++) {
                int64_t o = pr->base + k;
                if (o >= l->len || l->v[o].payload != (i + 1) * 16 + (uint64_t)k) {
                    fail(s,
                         "inv1: p%d acks=all record %" PRIu64 "/%d acknowledged at %" PRId64
                         " is lost on ISR replica %d (log end %" PRId64 ")",
                         pr->part, i + 1, (int)k, o, (int)c->isr[r], l->len);
                    break;
                }
            }
        }
    }
}

/* ---------------------------------------------------------------- dispatch */

static void dispatch(ds *s, ev *e)
{
    broker *b = is_broker_id(s, e->b) ? &s->br[e->b] : NULL;

    if (e->type == E_MSG) {
        msg *m = e->m;
        e->m = NULL;
        if (s->cut[m->from][m->to]) {
            msg_free(m);
            return;
        }
        if (m->to == CTL) {
            ctl_msg(s, m);
        } else if (m->to == PRODUCER) {
            producer_answer(s, m);
        } else {
            broker *t = &s->br[m->to];
            if (!t->alive || t->inc != m->to_inc) {
                msg_free(m);
                return;
            }
            if (paused(s, t)) {
                ev d = {.t = t->paused_until, .type = E_MSG, .m = m};
                push(s, d);
                return;
            }
            broker_msg(s, t, m);
        }
        msg_free(m);
        return;
    }
    if (b && e->type != E_RESTART && e->type != E_HEAL_CUT) {
        if (!b->alive || b->inc != e->inc) {
            return;
        }
        if (paused(s, b)) {
            e->t = b->paused_until;
            push(s, *e);
            return;
        }
    }
    switch (e->type) {
    case E_PERSIST: {
        dlog *l = &b->rep[e->p].log;
        if (e->gen != l->gen || e->x <= l->durable) {
            return;
        }
        l->durable = e->x < l->len ? e->x : l->len;
        kq_replica_event re = {.type = KQ_REPLICA_EV_PERSISTED};
        re.u.persisted_end = l->durable;
        rep_step(s, b, e->p, &re, NULL);
        break;
    }
    case E_TIMER: {
        brep *br = &b->rep[e->p];
        if (br->timer_at == KQ_REPLICA_NO_DEADLINE || br->timer_at > s->now) {
            return;
        }
        kq_replica_event re = {.type = KQ_REPLICA_EV_TICK};
        br->timer_at = KQ_REPLICA_NO_DEADLINE; /* re-armed from the update */
        rep_step(s, b, e->p, &re, NULL);
        break;
    }
    case E_FETCH:
        if (b->rep[e->p].f.armed_at <= s->now) {
            b->rep[e->p].f.armed_at = 0; /* this one (possibly deferred by a pause) */
        }
        maybe_fetch(s, b, e->p);
        break;
    case E_ALTER_RTX: {
        brep *br = &b->rep[e->p];
        if (br->alter && s->now >= br->alter_sent_at + ALTER_RESEND_MS) {
            msg *m = msg_copy(s, br->alter);
            br->alter_sent_at = s->now;
            at(s, s->now + ALTER_RESEND_MS, E_ALTER_RTX, b->id, e->p, b->inc);
            net_send(s, m);
        }
        break;
    }
    case E_HEARTBEAT: {
        if (b->shutdown_deadline &&
            ((b->img_b[b->id].fenced && b->img_b[b->id].epoch == b->bepoch) ||
             s->now >= b->shutdown_deadline)) {
            tr(s, "broker %d shuts down (%s)", b->id,
               s->now >= b->shutdown_deadline ? "timed out waiting" : "fenced as asked");
            broker_stop(s, b, true);
            b->restart_at = s->now + rnd(s, 100, 3000);
            at(s, b->restart_at, E_RESTART, b->id, 0, b->inc);
            break;
        }
        at(s, s->now + HEARTBEAT_MS, E_HEARTBEAT, b->id, 0, b->inc);
        msg *m = msg_new(s, b->registered_seen ? M_HEARTBEAT : M_REGISTER, b->id, CTL, 0);
        if (m) {
            m->bepoch = b->bepoch;
            m->meta_applied = b->meta_applied;
            m->want_shutdown = b->shutdown_deadline != 0;
            net_send(s, m);
        }
        break;
    }
    case E_META:
        meta_poll(s, b);
        break;
    case E_HWCKPT:
        at(s, s->now + HW_CKPT_MS, E_HWCKPT, b->id, 0, b->inc);
        for (int p = 0; p < s->np; p++) {
            if (b->hosts[p] && b->rep[p].r) {
                b->rep[p].log.hw_ckpt = kq_replica_readable_end(b->rep[p].r);
            }
        }
        break;
    case E_CTL_CHECK:
        ctl_check(s);
        break;
    case E_PRODUCE:
        producer_tick(s);
        break;
    case E_FAULT:
        fault(s);
        break;
    case E_RESTART:
        if (!b->alive && b->restart_at == s->now) {
            b->bepoch = ++s->next_bepoch;
            tr(s, "broker %d restarts (broker epoch %" PRId64 ")", b->id, b->bepoch);
            broker_start(s, b);
        }
        break;
    case E_HEAL_CUT:
        if (!s->healing) {
            for (int o = 0; o < NNODES; o++) {
                s->cut[e->b][o] = s->cut[o][e->b] = false;
            }
            tr(s, "broker %d reconnected", e->b);
        }
        break;
    case E_HEAL_ALL:
        heal_all(s);
        break;
    case E_CONVERGE:
        if (converged(s)) {
            tr(s, "converged");
            final_check(s);
            s->done = true;
        } else {
            at(s, s->now + CONVERGE_EVERY_MS, E_CONVERGE, 0, 0, 0);
        }
        break;
    default:
        break;
    }
}

/* ---------------------------------------------------------------- run */

void kq_dsim_opts_defaults(kq_dsim_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->dump_on_failure = true;
}

int kq_dsim_bug_from_name(const char *name)
{
    static const char *const names[] = {"none", "unclean", "lose-synced", "early-fetch",
                                        "same-epoch"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (!strcmp(name, names[i])) {
            return (int)i;
        }
    }
    return -1;
}

static void setup(ds *s)
{
    const kq_dsim_opts *o = s->o;

    s->nb = o->brokers ? o->brokers : (chance(s, 700) ? 3 : (int)rnd(s, 4, NB));
    s->np = o->partitions ? o->partitions : (chance(s, 700) ? 1 : 2);
    uint64_t k = rnd(s, 0, 99);
    s->min_isr = o->min_isr ? o->min_isr : (k < 75 ? 2 : k < 88 ? 1 : 3);
    s->lag_ms = (uint32_t)rnd(s, 600, 3000);
    s->drop_pm = (uint32_t)rnd(s, 0, 60);
    s->dup_pm = (uint32_t)rnd(s, 0, 30);
    s->slow_pm = (uint32_t)rnd(s, 0, 50);
    s->meta_slow_pm = (uint32_t)rnd(s, 0, 100);
    s->loose = chance(s, 300);
    s->fault_min_ms = (uint32_t)rnd(s, 100, 400);
    s->fault_max_ms = s->fault_min_ms + (uint32_t)rnd(s, 200, 1500);
    s->safety_end = o->safety_ms ? o->safety_ms : rnd(s, 8000, 16000);
    s->deadline = s->safety_end + (o->liveness_ms ? o->liveness_ms : 60000);
    s->next_bepoch = 100;

    for (int b = 1; b <= s->nb; b++) {
        s->br[b].id = b;
        s->br[b].bepoch = b;
        s->cb[b].epoch = b;
        s->cb[b].fenced = false;
        s->cb[b].last_contact = 0;
        s->cb[b].reg_index = s->nmlog;
        meta_append(s, 1, b);
    }
    for (int p = 0; p < s->np; p++) {
        cpart *c = &s->cp[p];
        int32_t pool[NB];
        int n = s->nb;
        for (int i = 0; i < n; i++) {
            pool[i] = i + 1;
        }
        c->nrep = RF;
        for (int i = 0; i < RF; i++) {
            int j = (int)rnd(s, (uint64_t)i, (uint64_t)n - 1);
            int32_t t = pool[i];
            pool[i] = pool[j];
            pool[j] = t;
            c->rep[i] = pool[i];
            c->isr[i] = pool[i];
            s->br[pool[i]].hosts[p] = true;
        }
        c->nisr = RF;
        c->leader = c->rep[0];
        meta_append(s, 0, p);
    }
    tr(s,
       "seed %" PRIu64 ": %d brokers, %d partitions, min ISR %d, lag %u ms, drop %u/1000, "
       "dup %u/1000, faults every %u-%u ms, safety %" PRIu64 " ms%s",
       o->seed, s->nb, s->np, (int)s->min_isr, s->lag_ms, s->drop_pm, s->dup_pm, s->fault_min_ms,
       s->fault_max_ms, s->safety_end, s->loose ? ", loose transport" : "");
    for (int p = 0; p < s->np; p++) {
        char r[48];
        ids_str(r, sizeof(r), s->cp[p].rep, s->cp[p].nrep);
        tr(s, "p%d replicas [%s]", p, r);
    }
    for (int b = 1; b <= s->nb && !s->res->failed; b++) {
        broker_start(s, &s->br[b]);
    }
    at(s, 100, E_CTL_CHECK, 0, 0, 0);
    at(s, rnd(s, 50, 300), E_PRODUCE, 0, 0, 0);
    at(s, rnd(s, 500, 1500), E_FAULT, 0, 0, 0);
    at(s, s->safety_end, E_HEAL_ALL, 0, 0, 0);
}

static void teardown(ds *s)
{
    ev e;
    while (kq_evheap_pop(&s->heap, &e)) {
        msg_free(e.m);
    }
    kq_evheap_free(&s->heap);
    for (int b = 1; b <= NB; b++) {
        for (int p = 0; p < NP; p++) {
            brep *br = &s->br[b].rep[p];
            kq_replica_free(br->r);
            msg_free(br->alter);
            free(br->log.v);
            free(br->log.ep);
        }
    }
    for (int p = 0; p < NP; p++) {
        free(s->pp[p].com);
        free(s->pp[p].lead_of);
        free(s->pp[p].hw_max);
    }
    free(s->mlog);
    free(s->prods);
}

int kq_dsim_run(const kq_dsim_opts *o, kq_dsim_result *res)
{
    int rc = 0;
    memset(res, 0, sizeof(*res));
    if ((o->brokers && (o->brokers < 3 || o->brokers > NB)) ||
        (o->partitions && (o->partitions < 1 || o->partitions > NP)) || o->min_isr < 0 ||
        o->min_isr > RF || o->bug < KQ_DSIM_BUG_NONE || o->bug > KQ_DSIM_BUG_SAME_EPOCH) {
        snprintf(res->reason, sizeof(res->reason),
                 "options out of range: brokers %d (3..%d), partitions %d (1..%d), min ISR %d "
                 "(1..%d)",
                 o->brokers, NB, o->partitions, NP, o->min_isr, RF);
        return KQ_ERR_INVALID_CONFIG;
    }
    ds *s = calloc(1, sizeof(*s));
    if (!s) {
        return KQ_ERR_NOMEM;
    }
    s->o = o;
    s->res = res;
    s->out = o->out ? o->out : stderr;
    kq_prng_seed(&s->rng, o->seed * 0x2545F4914F6CDD1Dull + 0x6A09E667F3BCC909ull);
    s->hash = 0xCBF29CE484222325ull;
    kq_evheap_init(&s->heap, sizeof(ev));
    setup(s);
    ev e;
    while (!res->failed && !s->done && !s->nomem && kq_evheap_pop(&s->heap, &e)) {
        s->now = e.t;
        res->events++;
        if (s->now > s->deadline) {
            char st[256];
            size_t off = 0;
            st[0] = '\0';
            for (int p = 0; p < s->np && off < sizeof(st); p++) {
                char isr[48];
                ids_str(isr, sizeof(isr), s->cp[p].isr, s->cp[p].nisr);
                int w = snprintf(st + off, sizeof(st) - off, " p%d leader %d isr [%s];", p,
                                 (int)s->cp[p].leader, isr);
                off += w > 0 ? (size_t)w : 0;
            }
            fail(s, "liveness: not converged %" PRIu64 " ms after healing:%s",
                 s->deadline - s->safety_end, st);
            msg_free(e.m);
            break;
        }
        if (res->events > MAX_EVENTS) {
            fail(s, "event budget of %llu exhausted", (unsigned long long)MAX_EVENTS);
            msg_free(e.m);
            break;
        }
        dispatch(s, &e);
        msg_free(e.m);
    }
    if (s->nomem) {
        rc = KQ_ERR_NOMEM;
    } else if (!res->failed && !s->done) {
        fail(s, "the simulation stopped without converging");
    }
    res->trace_hash = s->hash;
    res->end_ms = s->now;
    res->brokers = s->nb;
    res->partitions = s->np;
    res->min_isr = s->min_isr;
    if (res->failed && o->dump_on_failure) {
        uint64_t first = s->nlines > KQ_DSIM_TRACE_KEEP ? s->nlines - KQ_DSIM_TRACE_KEEP : 0;
        fprintf(s->out, "dsim: seed %" PRIu64 " trace (last %" PRIu64 " lines):\n", o->seed,
                s->nlines - first);
        for (uint64_t i = first; i < s->nlines; i++) {
            fprintf(s->out, "  %s\n", s->ring[i % KQ_DSIM_TRACE_KEEP]);
        }
    }
    teardown(s);
    free(s);
    return rc;
}
