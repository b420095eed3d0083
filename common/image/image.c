/*
 * The cluster metadata image (include/kq/image.h). Pure: no I/O, no clock.
 *
 * Layout:
 *   - topics: kq_topic structs (individually allocated, so their addresses are stable) in a
 *     slot array, found through two open-addressing hash tables (id, name); each topic holds
 *     its partitions in an array indexed by partition id;
 *   - a partition's lists live in one int32 allocation:
 *       [replicas][isr][elr][last_known_elr][rpos: one per replica][lpos]
 *     where rpos[i] is the position of this partition in broker replicas[i]'s replica vector
 *     and lpos its position in the leader's leader vector (swap-remove in O(1));
 *   - brokers: one node per broker id ever referenced (registered or not), sorted by id; each
 *     node holds the registration and the broker -> partitions index;
 *   - configs and features: small sorted arrays; ACLs: an array sorted by id, which is also
 *     the contiguous kq_acl list the authorizer reads.
 *
 * Apply is two-phase: every allocation (new lists, index capacity, undo entry) happens before
 * the first mutation, so a failure leaves the image untouched. Vectors and tables never
 * shrink, so rollback (which restores earlier sizes) needs no allocation.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/image.h"

/* ---- internal types ----------------------------------------------------------------------- */

typedef struct pref {
    uint32_t slot;
    int32_t part;
} pref;

typedef struct pvec {
    pref *v;
    uint32_t n, cap;
} pvec;

typedef struct bnode {
    kq_broker reg; /* valid iff registered */
    bool registered;
    pvec replicas;
    pvec leads;
    uint32_t n_isr, n_elr;
} bnode;

typedef struct cfg {
    int8_t type;
    char *resource;
    char *name;
    char *value;
} cfg;

typedef struct feat {
    char *name;
    int16_t level;
} feat;

enum {
    U_BROKER,       /* old registration (moved) or "was not registered" */
    U_BROKER_FLAGS, /* old fenced / in_controlled_shutdown */
    U_TOPIC_ADD,    /* topic created: detach and free it */
    U_TOPIC_REMOVE, /* topic removed: reattach it and its configs */
    U_PART_SET,     /* old partition state (ids moved) */
    U_PART_APPEND,  /* partition appended: drop it */
    U_CONFIG,       /* key (copies) and old value (moved; NULL = absent) */
    U_FEATURE,      /* name (copy) and old level (0 = absent) */
    U_ACL_ADD,      /* ACL added: remove it (by id) */
    U_ACL_REMOVE,   /* ACL removed: reinsert it (moved) */
};

typedef struct undo {
    int64_t offset;
    int kind;
    int32_t id; /* broker id or partition id */
    kq_topic *topic;
    union {
        struct {
            bool was;
            kq_broker old;
        } broker;
        struct {
            bool fenced, ics;
        } flags;
        kq_partition part;
        struct {
            cfg *cfgs;
            size_t n;
        } removed;
        cfg config;
        feat feature;
        kq_acl acl;
    };
} undo;

struct kq_image {
    int64_t offset;
    int64_t committed;

    kq_topic **slots; /* NULL = free */
    uint32_t n_slots, cap_slots;
    uint32_t *free_slots; /* capacity cap_slots */
    uint32_t n_free;

    kq_topic **by_id; /* open addressing, power-of-two capacity, NULL = empty */
    kq_topic **by_name;
    size_t tcap; /* capacity of both tables */
    uint32_t n_topics;

    bnode **brokers; /* sorted by id */
    size_t n_brokers, cap_brokers;

    cfg *cfgs;
    size_t n_cfgs, cap_cfgs;
    feat *feats;
    size_t n_feats, cap_feats;
    kq_acl *acls; /* sorted by id */
    size_t n_acls, cap_acls;
    size_t n_uncommitted_acl; /* U_ACL_* entries in the undo log */

    undo *u;
    size_t u_head, u_n, u_cap;

    uint64_t n_partitions, n_offline, n_imbalance, n_under;
    char err[256];
};

static int errf(kq_image *img, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int errf(kq_image *img, int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(img->err, sizeof img->err, fmt, ap);
    va_end(ap);
    return code;
}

/* Kafka-style base64url rendering of an id for messages. */
static void id_str(const uint8_t id[16], char out[23])
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    int o = 0;

    for (int i = 0; i < 16; i += 3) {
        uint32_t v = (uint32_t)id[i] << 16;

        if (i + 1 < 16)
            v |= (uint32_t)id[i + 1] << 8;
        if (i + 2 < 16)
            v |= id[i + 2];
        out[o++] = a[(v >> 18) & 63];
        out[o++] = a[(v >> 12) & 63];
        if (i + 1 < 16)
            out[o++] = a[(v >> 6) & 63];
        if (i + 2 < 16)
            out[o++] = a[v & 63];
    }
    out[o] = '\0';
}

/* ---- hashing ------------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t hstep(uint64_t h, uint64_t v)
{
    return mix64(h ^ v) + 0x2545f4914f6cdd1dULL;
}

static uint64_t hbytes(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t f = 0xcbf29ce484222325ULL;

    for (size_t i = 0; i < n; i++) {
        f ^= b[i];
        f *= 0x100000001b3ULL;
    }
    return hstep(hstep(h, n), f);
}

static uint64_t hstr(uint64_t h, const char *s)
{
    if (!s)
        return hstep(h, 0xdeadULL);
    return hbytes(hstep(h, 1), s, strlen(s));
}

static uint64_t hash_id(const uint8_t id[16])
{
    uint64_t a, b;

    memcpy(&a, id, 8);
    memcpy(&b, id + 8, 8);
    return mix64(a ^ mix64(b));
}

static uint64_t hash_name(const char *s)
{
    return hbytes(0, s, strlen(s));
}

/* ---- topic hash tables -------------------------------------------------------------------- */

static uint64_t tkey(const kq_topic *t, bool by_name)
{
    return by_name ? hash_name(t->name) : hash_id(t->id);
}

static void table_put(kq_topic **tab, size_t cap, kq_topic *t, bool by_name)
{
    size_t i = (size_t)tkey(t, by_name) & (cap - 1);

    while (tab[i])
        i = (i + 1) & (cap - 1);
    tab[i] = t;
}

/* Backward-shift deletion (linear probing, no tombstones). */
static void table_del(kq_topic **tab, size_t cap, const kq_topic *t, bool by_name)
{
    size_t i = (size_t)tkey(t, by_name) & (cap - 1);

    while (tab[i] != t) {
        if (!tab[i])
            return;
        i = (i + 1) & (cap - 1);
    }
    for (;;) {
        size_t j = i, k;

        tab[i] = NULL;
        for (;;) {
            j = (j + 1) & (cap - 1);
            if (!tab[j])
                return;
            k = (size_t)tkey(tab[j], by_name) & (cap - 1);
            /* Move tab[j] to i unless its home k lies cyclically in (i, j]. */
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
                continue;
            break;
        }
        tab[i] = tab[j];
        i = j;
    }
}

/* Make room for one more topic in both tables (load <= 1/2). */
static int tables_reserve(kq_image *img)
{
    size_t ncap;
    kq_topic **a, **b;

    if ((size_t)(img->n_topics + 1) * 2 <= img->tcap)
        return 0;
    ncap = img->tcap ? img->tcap * 2 : 64;
    a = calloc(ncap, sizeof *a);
    b = calloc(ncap, sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return errf(img, KQ_ERR_NOMEM, "out of memory growing the topic index");
    }
    for (size_t i = 0; i < img->tcap; i++) {
        if (img->by_id[i])
            table_put(a, ncap, img->by_id[i], false);
        if (img->by_name[i])
            table_put(b, ncap, img->by_name[i], true);
    }
    free(img->by_id);
    free(img->by_name);
    img->by_id = a;
    img->by_name = b;
    img->tcap = ncap;
    return 0;
}

static kq_topic *find_id(const kq_image *img, const uint8_t id[16])
{
    size_t i;

    if (!img->tcap)
        return NULL;
    i = (size_t)hash_id(id) & (img->tcap - 1);
    while (img->by_id[i]) {
        if (!memcmp(img->by_id[i]->id, id, 16))
            return img->by_id[i];
        i = (i + 1) & (img->tcap - 1);
    }
    return NULL;
}

static kq_topic *find_name(const kq_image *img, const char *name)
{
    size_t i;

    if (!img->tcap || !name)
        return NULL;
    i = (size_t)hash_name(name) & (img->tcap - 1);
    while (img->by_name[i]) {
        if (!strcmp(img->by_name[i]->name, name))
            return img->by_name[i];
        i = (i + 1) & (img->tcap - 1);
    }
    return NULL;
}

/* ---- brokers ------------------------------------------------------------------------------ */

static size_t broker_pos(const kq_image *img, int32_t id, bool *found)
{
    size_t lo = 0, hi = img->n_brokers;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (img->brokers[mid]->reg.id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < img->n_brokers && img->brokers[lo]->reg.id == id;
    return lo;
}

static bnode *bnode_find(const kq_image *img, int32_t id)
{
    bool found;
    size_t i = broker_pos(img, id, &found);

    return found ? img->brokers[i] : NULL;
}

/* Find or create the node for broker `id`. Creating one is not a visible change. */
static bnode *bnode_get(kq_image *img, int32_t id)
{
    bool found;
    size_t i = broker_pos(img, id, &found);
    bnode *b;

    if (found)
        return img->brokers[i];
    if (img->n_brokers == img->cap_brokers) {
        size_t ncap = img->cap_brokers ? img->cap_brokers * 2 : 16;
        bnode **nb = realloc(img->brokers, ncap * sizeof *nb);

        if (!nb)
            return NULL;
        img->brokers = nb;
        img->cap_brokers = ncap;
    }
    b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->reg.id = id;
    memmove(img->brokers + i + 1, img->brokers + i, (img->n_brokers - i) * sizeof *img->brokers);
    img->brokers[i] = b;
    img->n_brokers++;
    return b;
}

static void broker_clear(kq_broker *b)
{
    for (int32_t i = 0; i < b->n_endpoints; i++) {
        free(b->endpoints[i].name);
        free(b->endpoints[i].host);
    }
    free(b->endpoints);
    free(b->rack);
    b->endpoints = NULL;
    b->n_endpoints = 0;
    b->rack = NULL;
}

static int pvec_reserve(pvec *v, uint32_t extra)
{
    uint32_t ncap;
    pref *nv;

    if (v->n + extra <= v->cap)
        return 0;
    ncap = v->cap < 8 ? 8 : v->cap + v->cap / 2;
    if (ncap < v->n + extra)
        ncap = v->n + extra;
    nv = realloc(v->v, (size_t)ncap * sizeof *nv);
    if (!nv)
        return KQ_ERR_NOMEM;
    v->v = nv;
    v->cap = ncap;
    return 0;
}

/* ---- partitions and the broker index ------------------------------------------------------ */

static size_t lists_len(const kq_partition *p)
{
    return (size_t)p->n_replicas + p->n_isr + p->n_elr + p->n_last_known_elr;
}

static int32_t *rpos_of(const kq_partition *p)
{
    return p->ids + lists_len(p);
}

static int32_t *lpos_of(const kq_partition *p)
{
    return p->ids + lists_len(p) + p->n_replicas;
}

static size_t ids_alloc_len(const kq_partition *p)
{
    return lists_len(p) + p->n_replicas + 1;
}

static kq_partition *part_at(const kq_image *img, pref r)
{
    return &img->slots[r.slot]->partitions[r.part];
}

/* Allocate the lists of a new partition state. */
static int part_alloc(kq_partition *p, const kq_rec_ids *rep, const kq_rec_ids *isr,
                      const kq_rec_ids *elr, const kq_rec_ids *lke)
{
    int32_t *d;

    p->n_replicas = (uint16_t)rep->n;
    p->n_isr = (uint16_t)isr->n;
    p->n_elr = (uint16_t)elr->n;
    p->n_last_known_elr = (uint16_t)lke->n;
    p->ids = malloc(ids_alloc_len(p) * sizeof(int32_t));
    if (!p->ids)
        return KQ_ERR_NOMEM;
    d = p->ids;
    if (rep->n)
        memcpy(d, rep->ids, (size_t)rep->n * sizeof(int32_t));
    d += rep->n;
    if (isr->n)
        memcpy(d, isr->ids, (size_t)isr->n * sizeof(int32_t));
    d += isr->n;
    if (elr->n)
        memcpy(d, elr->ids, (size_t)elr->n * sizeof(int32_t));
    d += elr->n;
    if (lke->n)
        memcpy(d, lke->ids, (size_t)lke->n * sizeof(int32_t));
    return 0;
}

/* Ensure broker nodes and index capacity exist for adding partition state p. */
static int index_reserve(kq_image *img, const kq_partition *p)
{
    for (int i = 0; i < p->n_replicas; i++) {
        bnode *b = bnode_get(img, p->ids[i]);

        if (!b || pvec_reserve(&b->replicas, 1))
            return errf(img, KQ_ERR_NOMEM, "out of memory growing the broker index");
        if (p->ids[i] == p->leader && pvec_reserve(&b->leads, 1))
            return errf(img, KQ_ERR_NOMEM, "out of memory growing the broker index");
    }
    return 0;
}

static void counters(kq_image *img, const kq_partition *p, int d)
{
    img->n_partitions += (uint64_t)(int64_t)d;
    if (p->leader == KQ_NO_LEADER)
        img->n_offline += (uint64_t)(int64_t)d;
    if (p->leader != p->ids[0])
        img->n_imbalance += (uint64_t)(int64_t)d;
    if (p->n_isr < p->n_replicas)
        img->n_under += (uint64_t)(int64_t)d;
}

/* Add partition (slot, pid) with state p to the index. Capacity must be reserved (it always
 * is: by index_reserve on apply, and by never-shrinking vectors on rollback). */
static void index_add(kq_image *img, uint32_t slot, int32_t pid, kq_partition *p)
{
    const int32_t *isr = kq_partition_isr(p), *elr = kq_partition_elr(p);
    int32_t *rpos = rpos_of(p);

    for (int i = 0; i < p->n_replicas; i++) {
        bnode *b = bnode_find(img, p->ids[i]);

        if (pvec_reserve(&b->replicas, 1))
            abort(); /* unreachable: reserved before */
        rpos[i] = (int32_t)b->replicas.n;
        b->replicas.v[b->replicas.n++] = (pref){slot, pid};
        if (p->ids[i] == p->leader) {
            if (pvec_reserve(&b->leads, 1))
                abort();
            *lpos_of(p) = (int32_t)b->leads.n;
            b->leads.v[b->leads.n++] = (pref){slot, pid};
        }
        if (kq_ids_contain(isr, p->n_isr, p->ids[i]))
            b->n_isr++;
        if (kq_ids_contain(elr, p->n_elr, p->ids[i]))
            b->n_elr++;
    }
    counters(img, p, 1);
}

/* Swap-remove entry `pos` of broker b's replica (leader = false) or leader vector. */
static void pvec_remove(kq_image *img, bnode *b, bool leader, uint32_t pos)
{
    pvec *v = leader ? &b->leads : &b->replicas;
    pref moved = v->v[--v->n];

    if (pos == v->n)
        return;
    v->v[pos] = moved;
    {
        kq_partition *q = part_at(img, moved);

        if (leader) {
            *lpos_of(q) = (int32_t)pos;
        } else {
            for (int i = 0; i < q->n_replicas; i++)
                if (q->ids[i] == b->reg.id)
                    rpos_of(q)[i] = (int32_t)pos;
        }
    }
}

static void index_remove(kq_image *img, kq_partition *p)
{
    const int32_t *isr = kq_partition_isr(p), *elr = kq_partition_elr(p);
    int32_t *rpos = rpos_of(p);

    for (int i = 0; i < p->n_replicas; i++) {
        bnode *b = bnode_find(img, p->ids[i]);

        pvec_remove(img, b, false, (uint32_t)rpos[i]);
        if (p->ids[i] == p->leader)
            pvec_remove(img, b, true, (uint32_t)*lpos_of(p));
        if (kq_ids_contain(isr, p->n_isr, p->ids[i]))
            b->n_isr--;
        if (kq_ids_contain(elr, p->n_elr, p->ids[i]))
            b->n_elr--;
    }
    counters(img, p, -1);
}

/* ---- topics ------------------------------------------------------------------------------- */

static int slots_reserve(kq_image *img)
{
    uint32_t ncap;
    kq_topic **ns;
    uint32_t *nf;

    if (img->n_free > 0 || img->n_slots < img->cap_slots)
        return 0;
    ncap = img->cap_slots ? img->cap_slots * 2 : 64;
    ns = realloc(img->slots, (size_t)ncap * sizeof *ns);
    if (!ns)
        return errf(img, KQ_ERR_NOMEM, "out of memory growing the topic table");
    img->slots = ns;
    nf = realloc(img->free_slots, (size_t)ncap * sizeof *nf);
    if (!nf)
        return errf(img, KQ_ERR_NOMEM, "out of memory growing the topic table");
    img->free_slots = nf;
    img->cap_slots = ncap;
    return 0;
}

/* Attach a topic (with its partitions) to slots, tables and the index. Space must be
 * reserved (slots_reserve, tables_reserve, index capacity). */
static void topic_attach(kq_image *img, kq_topic *t)
{
    uint32_t s = img->n_free ? img->free_slots[--img->n_free] : img->n_slots++;

    img->slots[s] = t;
    t->slot_ = s;
    table_put(img->by_id, img->tcap, t, false);
    table_put(img->by_name, img->tcap, t, true);
    img->n_topics++;
    for (int32_t i = 0; i < t->n_partitions; i++)
        index_add(img, s, i, &t->partitions[i]);
}

static void topic_detach(kq_image *img, kq_topic *t)
{
    for (int32_t i = 0; i < t->n_partitions; i++)
        index_remove(img, &t->partitions[i]);
    table_del(img->by_id, img->tcap, t, false);
    table_del(img->by_name, img->tcap, t, true);
    img->slots[t->slot_] = NULL;
    img->free_slots[img->n_free++] = t->slot_;
    img->n_topics--;
}

static void topic_free(kq_topic *t)
{
    if (!t)
        return;
    for (int32_t i = 0; i < t->n_partitions; i++)
        free(t->partitions[i].ids);
    free(t->partitions);
    free(t->name);
    free(t);
}

/* ---- configs and features ----------------------------------------------------------------- */

static int cfg_cmp(int type, const char *res, const char *name, const cfg *c)
{
    int d;

    if (type != c->type)
        return type < c->type ? -1 : 1;
    if ((d = strcmp(res, c->resource)))
        return d;
    return strcmp(name, c->name);
}

static size_t cfg_pos(const kq_image *img, int type, const char *res, const char *name, bool *found)
{
    size_t lo = 0, hi = img->n_cfgs;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (cfg_cmp(type, res, name, &img->cfgs[mid]) > 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < img->n_cfgs && !cfg_cmp(type, res, name, &img->cfgs[lo]);
    return lo;
}

static int cfg_reserve(kq_image *img, size_t extra)
{
    size_t ncap;
    cfg *nc;

    if (img->n_cfgs + extra <= img->cap_cfgs)
        return 0;
    ncap = img->cap_cfgs ? img->cap_cfgs * 2 : 16;
    if (ncap < img->n_cfgs + extra)
        ncap = img->n_cfgs + extra;
    nc = realloc(img->cfgs, ncap * sizeof *nc);
    if (!nc)
        return errf(img, KQ_ERR_NOMEM, "out of memory growing the config table");
    img->cfgs = nc;
    img->cap_cfgs = ncap;
    return 0;
}

/* Insert an entry (takes its strings); capacity must be reserved. */
static void cfg_insert(kq_image *img, cfg c)
{
    bool found;
    size_t i = cfg_pos(img, c.type, c.resource, c.name, &found);

    memmove(img->cfgs + i + 1, img->cfgs + i, (img->n_cfgs - i) * sizeof *img->cfgs);
    img->cfgs[i] = c;
    img->n_cfgs++;
}

static void cfg_clear(cfg *c)
{
    free(c->resource);
    free(c->name);
    free(c->value);
    memset(c, 0, sizeof *c);
}

static size_t feat_pos(const kq_image *img, const char *name, bool *found)
{
    size_t lo = 0, hi = img->n_feats;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (strcmp(img->feats[mid].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < img->n_feats && !strcmp(img->feats[lo].name, name);
    return lo;
}

/* Set a feature (level 0 removes). Takes `name` when it inserts, else leaves it to the caller
 * (returns true if it took it). Capacity must be reserved for an insert. */
static bool feat_set(kq_image *img, char *name, int16_t level)
{
    bool found;
    size_t i = feat_pos(img, name, &found);

    if (found && level) {
        img->feats[i].level = level;
        return false;
    }
    if (found) {
        free(img->feats[i].name);
        memmove(img->feats + i, img->feats + i + 1, (img->n_feats - i - 1) * sizeof *img->feats);
        img->n_feats--;
        return false;
    }
    if (!level)
        return false;
    memmove(img->feats + i + 1, img->feats + i, (img->n_feats - i) * sizeof *img->feats);
    img->feats[i] = (feat){name, level};
    img->n_feats++;
    return true;
}

static size_t acl_pos(const kq_image *img, const uint8_t id[16], bool *found)
{
    size_t lo = 0, hi = img->n_acls;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (memcmp(img->acls[mid].id, id, 16) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < img->n_acls && !memcmp(img->acls[lo].id, id, 16);
    return lo;
}

/* Insert an entry (takes its strings); capacity must be reserved. */
static void acl_insert(kq_image *img, kq_acl a)
{
    bool found;
    size_t i = acl_pos(img, a.id, &found);

    memmove(img->acls + i + 1, img->acls + i, (img->n_acls - i) * sizeof *img->acls);
    img->acls[i] = a;
    img->n_acls++;
}

/* Take entry i out of the table (the caller owns its strings afterwards). */
static kq_acl acl_take(kq_image *img, size_t i)
{
    kq_acl a = img->acls[i];

    memmove(img->acls + i, img->acls + i + 1, (img->n_acls - i - 1) * sizeof *img->acls);
    img->n_acls--;
    return a;
}

static void acl_clear(kq_acl *a)
{
    kq_record r = {.type = KQ_REC_ACL, .acl = *a};

    kq_record_free(&r);
    memset(a, 0, sizeof *a);
}

/* ---- undo log ----------------------------------------------------------------------------- */

static int undo_reserve(kq_image *img)
{
    size_t ncap;
    undo *nu;

    if (img->u_n < img->u_cap)
        return 0;
    if (img->u_head > 0) {
        memmove(img->u, img->u + img->u_head, (img->u_n - img->u_head) * sizeof *img->u);
        img->u_n -= img->u_head;
        img->u_head = 0;
        if (img->u_n < img->u_cap)
            return 0;
    }
    ncap = img->u_cap ? img->u_cap * 2 : 64;
    nu = realloc(img->u, ncap * sizeof *nu);
    if (!nu)
        return errf(img, KQ_ERR_NOMEM, "out of memory growing the undo log");
    img->u = nu;
    img->u_cap = ncap;
    return 0;
}

static undo *undo_push(kq_image *img, int64_t offset, int kind)
{
    undo *e = &img->u[img->u_n++];

    memset(e, 0, sizeof *e);
    e->offset = offset;
    e->kind = kind;
    return e;
}

static bool is_acl_entry(const undo *e)
{
    return e->kind == U_ACL_ADD || e->kind == U_ACL_REMOVE;
}

/* Free what a dropped (committed) entry owns. */
static void undo_release(undo *e)
{
    switch (e->kind) {
    case U_BROKER:
        if (e->broker.was)
            broker_clear(&e->broker.old);
        break;
    case U_TOPIC_REMOVE:
        topic_free(e->topic);
        for (size_t i = 0; i < e->removed.n; i++)
            cfg_clear(&e->removed.cfgs[i]);
        free(e->removed.cfgs);
        break;
    case U_PART_SET:
        free(e->part.ids);
        break;
    case U_CONFIG:
        cfg_clear(&e->config);
        break;
    case U_FEATURE:
        free(e->feature.name);
        break;
    case U_ACL_REMOVE:
        acl_clear(&e->acl);
        break;
    default:
        break;
    }
}

/* Revert one entry (the newest). Needs no allocation. */
static void undo_revert(kq_image *img, undo *e)
{
    switch (e->kind) {
    case U_BROKER: {
        bnode *b = bnode_find(img, e->id);

        if (b->registered)
            broker_clear(&b->reg);
        b->registered = e->broker.was;
        if (e->broker.was)
            b->reg = e->broker.old;
        b->reg.id = e->id;
        break;
    }
    case U_BROKER_FLAGS: {
        bnode *b = bnode_find(img, e->id);

        b->reg.fenced = e->flags.fenced;
        b->reg.in_controlled_shutdown = e->flags.ics;
        break;
    }
    case U_TOPIC_ADD:
        topic_detach(img, e->topic);
        topic_free(e->topic);
        break;
    case U_TOPIC_REMOVE:
        topic_attach(img, e->topic);
        for (size_t i = 0; i < e->removed.n; i++)
            cfg_insert(img, e->removed.cfgs[i]); /* capacity: these were in the table */
        free(e->removed.cfgs);
        break;
    case U_PART_SET: {
        kq_partition *p = &e->topic->partitions[e->id];

        index_remove(img, p);
        free(p->ids);
        *p = e->part;
        index_add(img, e->topic->slot_, e->id, p);
        break;
    }
    case U_PART_APPEND: {
        kq_partition *p = &e->topic->partitions[e->id];

        index_remove(img, p);
        free(p->ids);
        e->topic->n_partitions--;
        break;
    }
    case U_CONFIG: {
        bool found;
        size_t i = cfg_pos(img, e->config.type, e->config.resource, e->config.name, &found);

        if (found && e->config.value) {
            free(img->cfgs[i].value);
            img->cfgs[i].value = e->config.value;
            e->config.value = NULL;
            cfg_clear(&e->config);
        } else if (found) {
            cfg_clear(&img->cfgs[i]);
            memmove(img->cfgs + i, img->cfgs + i + 1, (img->n_cfgs - i - 1) * sizeof *img->cfgs);
            img->n_cfgs--;
            cfg_clear(&e->config);
        } else if (e->config.value) {
            cfg_insert(img, e->config); /* capacity: it was in the table */
        } else {
            cfg_clear(&e->config);
        }
        break;
    }
    case U_FEATURE:
        if (!feat_set(img, e->feature.name, e->feature.level))
            free(e->feature.name);
        break;
    case U_ACL_ADD: {
        bool found;
        size_t i = acl_pos(img, e->acl.id, &found);
        kq_acl a;

        if (found) {
            a = acl_take(img, i);
            acl_clear(&a);
        }
        break;
    }
    case U_ACL_REMOVE:
        acl_insert(img, e->acl); /* capacity: it was in the table */
        break;
    default:
        break;
    }
}

/* ---- apply -------------------------------------------------------------------------------- */

static int copy_broker(kq_image *img, kq_broker *d, const kq_rec_register_broker *s, int64_t offset)
{
    memset(d, 0, sizeof *d);
    d->id = s->broker_id;
    memcpy(d->incarnation_id, s->incarnation_id, 16);
    d->epoch = s->broker_epoch;
    d->fenced = s->fenced;
    d->in_controlled_shutdown = s->in_controlled_shutdown;
    d->registration_offset = s->registration_offset >= 0 ? s->registration_offset : offset;
    if (s->n_endpoints > 0) {
        d->endpoints = calloc((size_t)s->n_endpoints, sizeof *d->endpoints);
        if (!d->endpoints)
            goto nomem;
        d->n_endpoints = s->n_endpoints;
        for (int32_t i = 0; i < s->n_endpoints; i++) {
            d->endpoints[i].port = s->endpoints[i].port;
            d->endpoints[i].name = strdup(s->endpoints[i].name);
            d->endpoints[i].host = strdup(s->endpoints[i].host);
            if (!d->endpoints[i].name || !d->endpoints[i].host)
                goto nomem;
        }
    }
    if (s->rack && !(d->rack = strdup(s->rack)))
        goto nomem;
    return 0;
nomem:
    broker_clear(d);
    return errf(img, KQ_ERR_NOMEM, "out of memory copying broker %d", (int)s->broker_id);
}

static int apply_register(kq_image *img, int64_t off, const kq_rec_register_broker *r, bool u)
{
    kq_broker nb;
    bnode *b;
    int rc;

    if (!(b = bnode_get(img, r->broker_id)))
        return errf(img, KQ_ERR_NOMEM, "out of memory registering broker %d", (int)r->broker_id);
    if (u && (rc = undo_reserve(img)))
        return rc;
    if ((rc = copy_broker(img, &nb, r, off)))
        return rc;
    if (u) {
        undo *e = undo_push(img, off, U_BROKER);

        e->id = r->broker_id;
        e->broker.was = b->registered;
        if (b->registered)
            e->broker.old = b->reg;
    } else if (b->registered) {
        broker_clear(&b->reg);
    }
    b->reg = nb;
    b->registered = true;
    return 0;
}

static bnode *registered(kq_image *img, int32_t id, int64_t epoch, const char *what, int *rc)
{
    bnode *b = bnode_find(img, id);

    if (!b || !b->registered) {
        *rc = errf(img, KQ_ERR_BROKER_ID_NOT_REGISTERED, "%s: broker %d is not registered", what,
                   (int)id);
        return NULL;
    }
    if (b->reg.epoch != epoch) {
        *rc = errf(img, KQ_ERR_STALE_BROKER_EPOCH,
                   "%s: broker %d has epoch %lld, the record names epoch %lld", what, (int)id,
                   (long long)b->reg.epoch, (long long)epoch);
        return NULL;
    }
    return b;
}

static int apply_unregister(kq_image *img, int64_t off, const kq_rec_unregister_broker *r, bool u)
{
    int rc = 0;
    bnode *b = registered(img, r->broker_id, r->broker_epoch, "UnregisterBroker", &rc);

    if (!b)
        return rc;
    if (u && (rc = undo_reserve(img)))
        return rc;
    if (u) {
        undo *e = undo_push(img, off, U_BROKER);

        e->id = r->broker_id;
        e->broker.was = true;
        e->broker.old = b->reg;
    } else {
        broker_clear(&b->reg);
    }
    memset(&b->reg, 0, sizeof b->reg);
    b->reg.id = r->broker_id;
    b->registered = false;
    return 0;
}

static int apply_broker_change(kq_image *img, int64_t off, const kq_rec_broker_change *r, bool u)
{
    int rc = 0;
    bnode *b = registered(img, r->broker_id, r->broker_epoch, "BrokerRegistrationChange", &rc);

    if (!b)
        return rc;
    if (u && (rc = undo_reserve(img)))
        return rc;
    if (u) {
        undo *e = undo_push(img, off, U_BROKER_FLAGS);

        e->id = r->broker_id;
        e->flags.fenced = b->reg.fenced;
        e->flags.ics = b->reg.in_controlled_shutdown;
    }
    if (r->fenced == KQ_FENCE_FENCE)
        b->reg.fenced = true;
    else if (r->fenced == KQ_FENCE_UNFENCE)
        b->reg.fenced = false;
    if (r->in_controlled_shutdown == 1)
        b->reg.in_controlled_shutdown = true;
    return 0;
}

static int apply_topic(kq_image *img, int64_t off, const kq_rec_topic *r, bool u)
{
    kq_topic *t;
    char ids[23];
    int rc;

    if (find_id(img, r->topic_id)) {
        id_str(r->topic_id, ids);
        return errf(img, KQ_ERR_TOPIC_ALREADY_EXISTS, "Topic %s: topic id %s already exists",
                    r->name, ids);
    }
    if (find_name(img, r->name))
        return errf(img, KQ_ERR_TOPIC_ALREADY_EXISTS, "Topic: a topic named %s already exists",
                    r->name);
    if ((rc = tables_reserve(img)) || (rc = slots_reserve(img)) || (u && (rc = undo_reserve(img))))
        return rc;
    t = calloc(1, sizeof *t);
    if (!t || !(t->name = strdup(r->name))) {
        free(t);
        return errf(img, KQ_ERR_NOMEM, "out of memory creating topic %s", r->name);
    }
    memcpy(t->id, r->topic_id, 16);
    topic_attach(img, t);
    if (u)
        undo_push(img, off, U_TOPIC_ADD)->topic = t;
    return 0;
}

static kq_topic *topic_for(kq_image *img, const uint8_t id[16], const char *what, int *rc)
{
    kq_topic *t = find_id(img, id);
    char ids[23];

    if (!t) {
        id_str(id, ids);
        *rc = errf(img, KQ_ERR_UNKNOWN_TOPIC_ID, "%s: unknown topic id %s", what, ids);
    }
    return t;
}

static int apply_partition(kq_image *img, int64_t off, const kq_rec_partition *r, bool u)
{
    kq_partition np = {0};
    kq_topic *t;
    int rc = 0;

    if (!(t = topic_for(img, r->topic_id, "Partition", &rc)))
        return rc;
    if (r->partition_id > t->n_partitions)
        return errf(img, KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION,
                    "Partition: partition %d of topic %s is out of order (it has %d partitions)",
                    (int)r->partition_id, t->name, (int)t->n_partitions);
    if (r->partition_id == t->n_partitions && t->n_partitions == t->cap_partitions_) {
        int32_t ncap = t->cap_partitions_ < 4 ? 4 : t->cap_partitions_ + t->cap_partitions_ / 2;
        kq_partition *nparts;

        if (t->cap_partitions_ > INT32_MAX / 2)
            return errf(img, KQ_ERR_INVALID_REQUEST, "Partition: too many partitions");
        nparts = realloc(t->partitions, (size_t)ncap * sizeof *nparts);
        if (!nparts)
            return errf(img, KQ_ERR_NOMEM, "out of memory growing topic %s", t->name);
        t->partitions = nparts;
        t->cap_partitions_ = ncap;
    }
    if (u && (rc = undo_reserve(img)))
        return rc;
    np.leader = r->leader;
    np.leader_epoch = r->leader_epoch;
    np.partition_epoch = r->partition_epoch;
    np.leader_recovery_state = r->leader_recovery_state;
    if (part_alloc(&np, &r->replicas, &r->isr, &r->elr, &r->last_known_elr))
        return errf(img, KQ_ERR_NOMEM, "out of memory adding a partition to %s", t->name);
    if ((rc = index_reserve(img, &np))) {
        free(np.ids);
        return rc;
    }
    if (r->partition_id == t->n_partitions) {
        t->partitions[t->n_partitions++] = np;
        if (u)
            undo_push(img, off, U_PART_APPEND)->topic = t;
    } else {
        kq_partition *p = &t->partitions[r->partition_id];

        index_remove(img, p);
        if (u) {
            undo *e = undo_push(img, off, U_PART_SET);

            e->topic = t;
            e->part = *p;
        } else {
            free(p->ids);
        }
        *p = np;
    }
    if (u)
        img->u[img->u_n - 1].id = r->partition_id;
    index_add(img, t->slot_, r->partition_id, &t->partitions[r->partition_id]);
    return 0;
}

static bool subset(const int32_t *a, int na, const int32_t *b, int nb)
{
    for (int i = 0; i < na; i++)
        if (!kq_ids_contain(b, nb, a[i]))
            return false;
    return true;
}

static int apply_partition_change(kq_image *img, int64_t off, const kq_rec_partition_change *r,
                                  bool u)
{
    kq_partition np = {0}, *p;
    kq_rec_ids rep, isr, elr, lke;
    kq_topic *t;
    int rc = 0;

    if (!(t = topic_for(img, r->topic_id, "PartitionChange", &rc)))
        return rc;
    if (r->partition_id >= t->n_partitions)
        return errf(img, KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION,
                    "PartitionChange: topic %s has no partition %d", t->name, (int)r->partition_id);
    p = &t->partitions[r->partition_id];
    /* Merge: absent lists, leader -2 and recovery -1 keep the old values. */
    rep = r->has_replicas ? r->replicas
                          : (kq_rec_ids){(int32_t *)kq_partition_replicas(p), p->n_replicas};
    isr = r->has_isr ? r->isr : (kq_rec_ids){(int32_t *)kq_partition_isr(p), p->n_isr};
    elr = r->has_elr ? r->elr : (kq_rec_ids){(int32_t *)kq_partition_elr(p), p->n_elr};
    lke = r->has_last_known_elr
              ? r->last_known_elr
              : (kq_rec_ids){(int32_t *)kq_partition_last_known_elr(p), p->n_last_known_elr};
    np.leader = r->leader == KQ_LEADER_UNCHANGED ? p->leader : r->leader;
    np.leader_recovery_state = r->leader_recovery_state == KQ_RECOVERY_UNCHANGED
                                   ? p->leader_recovery_state
                                   : r->leader_recovery_state;
    if (p->partition_epoch == INT32_MAX ||
        (r->leader != KQ_LEADER_UNCHANGED && p->leader_epoch == INT32_MAX))
        return errf(img, KQ_ERR_INVALID_REQUEST, "PartitionChange: epoch overflow on %s-%d",
                    t->name, (int)r->partition_id);
    np.leader_epoch = p->leader_epoch + (r->leader != KQ_LEADER_UNCHANGED ? 1 : 0);
    np.partition_epoch = p->partition_epoch + 1;
    if (!subset(isr.ids, isr.n, rep.ids, rep.n) || !subset(elr.ids, elr.n, rep.ids, rep.n) ||
        !subset(lke.ids, lke.n, rep.ids, rep.n))
        return errf(img, KQ_ERR_INVALID_REQUEST,
                    "PartitionChange: on %s-%d isr, elr or last_known_elr would hold a "
                    "non-replica",
                    t->name, (int)r->partition_id);
    if (np.leader != KQ_NO_LEADER && !kq_ids_contain(rep.ids, rep.n, np.leader))
        return errf(img, KQ_ERR_INVALID_REQUEST,
                    "PartitionChange: on %s-%d leader %d is not a replica", t->name,
                    (int)r->partition_id, (int)np.leader);
    if (u && (rc = undo_reserve(img)))
        return rc;
    if (part_alloc(&np, &rep, &isr, &elr, &lke))
        return errf(img, KQ_ERR_NOMEM, "out of memory changing %s-%d", t->name,
                    (int)r->partition_id);
    if ((rc = index_reserve(img, &np))) {
        free(np.ids);
        return rc;
    }
    index_remove(img, p);
    if (u) {
        undo *e = undo_push(img, off, U_PART_SET);

        e->topic = t;
        e->id = r->partition_id;
        e->part = *p;
    } else {
        free(p->ids);
    }
    *p = np;
    index_add(img, t->slot_, r->partition_id, p);
    return 0;
}

static int apply_remove_topic(kq_image *img, int64_t off, const kq_rec_remove_topic *r, bool u)
{
    kq_topic *t;
    size_t first, n = 0;
    bool found;
    cfg *saved = NULL;
    int rc = 0;

    if (!(t = topic_for(img, r->topic_id, "RemoveTopic", &rc)))
        return rc;
    if (u && (rc = undo_reserve(img)))
        return rc;
    /* The topic's configs go with it: they are contiguous in the sorted table. */
    first = cfg_pos(img, KQ_CONFIG_RESOURCE_TOPIC, t->name, "", &found);
    while (first + n < img->n_cfgs && img->cfgs[first + n].type == KQ_CONFIG_RESOURCE_TOPIC &&
           !strcmp(img->cfgs[first + n].resource, t->name))
        n++;
    if (u && n && !(saved = malloc(n * sizeof *saved)))
        return errf(img, KQ_ERR_NOMEM, "out of memory removing topic %s", t->name);
    for (size_t i = 0; i < n; i++) {
        if (u)
            saved[i] = img->cfgs[first + i];
        else
            cfg_clear(&img->cfgs[first + i]);
    }
    if (n) {
        memmove(img->cfgs + first, img->cfgs + first + n,
                (img->n_cfgs - first - n) * sizeof *img->cfgs);
        img->n_cfgs -= n;
    }
    topic_detach(img, t);
    if (u) {
        undo *e = undo_push(img, off, U_TOPIC_REMOVE);

        e->topic = t;
        e->removed.cfgs = saved;
        e->removed.n = n;
    } else {
        topic_free(t);
    }
    return 0;
}

static int apply_config(kq_image *img, int64_t off, const kq_rec_config *r, bool u)
{
    bool found;
    size_t i = cfg_pos(img, r->resource_type, r->resource_name, r->name, &found);
    cfg ukey = {r->resource_type, NULL, NULL, NULL}, tkey = {r->resource_type, NULL, NULL, NULL};
    char *val = NULL;
    int rc;

    if (!found && !r->value)
        return 0; /* deleting an absent key changes nothing */
    if ((rc = cfg_reserve(img, 1)) || (u && (rc = undo_reserve(img))))
        return rc;
    if ((r->value && !(val = strdup(r->value))) ||
        (u && (!(ukey.resource = strdup(r->resource_name)) || !(ukey.name = strdup(r->name)))) ||
        (!found &&
         (!(tkey.resource = strdup(r->resource_name)) || !(tkey.name = strdup(r->name))))) {
        free(val);
        cfg_clear(&ukey);
        cfg_clear(&tkey);
        return errf(img, KQ_ERR_NOMEM, "out of memory setting config %s", r->name);
    }
    if (u) {
        undo *e = undo_push(img, off, U_CONFIG);

        e->config = ukey; /* key copies; value = the old value (moved), NULL if absent */
        if (found) {
            e->config.value = img->cfgs[i].value;
            img->cfgs[i].value = NULL;
        }
    }
    if (found && val) {
        free(img->cfgs[i].value);
        img->cfgs[i].value = val;
    } else if (found) {
        cfg_clear(&img->cfgs[i]);
        memmove(img->cfgs + i, img->cfgs + i + 1, (img->n_cfgs - i - 1) * sizeof *img->cfgs);
        img->n_cfgs--;
    } else {
        tkey.value = val;
        cfg_insert(img, tkey);
    }
    return 0;
}

static int apply_feature(kq_image *img, int64_t off, const kq_rec_feature_level *r, bool u)
{
    bool found;
    size_t i = feat_pos(img, r->name, &found);
    char *name = NULL, *uname = NULL;
    int rc;

    if (!found && r->level == 0)
        return 0;
    if (u && (rc = undo_reserve(img)))
        return rc;
    if (!found && img->n_feats == img->cap_feats) {
        size_t ncap = img->cap_feats ? img->cap_feats * 2 : 8;
        feat *nf = realloc(img->feats, ncap * sizeof *nf);

        if (!nf)
            return errf(img, KQ_ERR_NOMEM, "out of memory setting feature %s", r->name);
        img->feats = nf;
        img->cap_feats = ncap;
    }
    if ((!found && !(name = strdup(r->name))) || (u && !(uname = strdup(r->name)))) {
        free(name);
        free(uname);
        return errf(img, KQ_ERR_NOMEM, "out of memory setting feature %s", r->name);
    }
    if (u) {
        undo *e = undo_push(img, off, U_FEATURE);

        e->feature.name = uname;
        e->feature.level = found ? img->feats[i].level : 0;
    }
    if (found)
        feat_set(img, (char *)r->name, r->level);
    else
        feat_set(img, name, r->level);
    return 0;
}

static int apply_acl(kq_image *img, int64_t off, const kq_record *r, bool u)
{
    bool found;
    char id[23];
    kq_record copy;
    int rc;

    acl_pos(img, r->acl.id, &found);
    if (found) {
        id_str(r->acl.id, id);
        return errf(img, KQ_ERR_INVALID_REQUEST, "AccessControlEntry: an ACL with id %s exists",
                    id);
    }
    if (u && (rc = undo_reserve(img)))
        return rc;
    if (img->n_acls == img->cap_acls) {
        size_t ncap = img->cap_acls ? img->cap_acls * 2 : 16;
        kq_acl *na = realloc(img->acls, ncap * sizeof *na);

        if (!na)
            return errf(img, KQ_ERR_NOMEM, "out of memory growing the ACL table");
        img->acls = na;
        img->cap_acls = ncap;
    }
    if (kq_record_copy(&copy, r))
        return errf(img, KQ_ERR_NOMEM, "out of memory copying an ACL");
    if (u) {
        memcpy(undo_push(img, off, U_ACL_ADD)->acl.id, r->acl.id, 16);
        img->n_uncommitted_acl++;
    }
    acl_insert(img, copy.acl);
    return 0;
}

static int apply_remove_acl(kq_image *img, int64_t off, const kq_rec_remove_acl *r, bool u)
{
    bool found;
    size_t i = acl_pos(img, r->id, &found);
    char id[23];
    kq_acl a;
    int rc;

    if (!found) {
        id_str(r->id, id);
        return errf(img, KQ_ERR_INVALID_REQUEST, "RemoveAccessControlEntry: no ACL with id %s", id);
    }
    if (u && (rc = undo_reserve(img)))
        return rc;
    a = acl_take(img, i);
    if (u) {
        undo_push(img, off, U_ACL_REMOVE)->acl = a;
        img->n_uncommitted_acl++;
    } else {
        acl_clear(&a);
    }
    return 0;
}

static int apply_one(kq_image *img, int64_t off, const kq_record *r, bool u)
{
    switch (r->type) {
    case KQ_REC_REGISTER_BROKER:
        return apply_register(img, off, &r->register_broker, u);
    case KQ_REC_UNREGISTER_BROKER:
        return apply_unregister(img, off, &r->unregister_broker, u);
    case KQ_REC_BROKER_REGISTRATION_CHANGE:
        return apply_broker_change(img, off, &r->broker_change, u);
    case KQ_REC_TOPIC:
        return apply_topic(img, off, &r->topic, u);
    case KQ_REC_PARTITION:
        return apply_partition(img, off, &r->partition, u);
    case KQ_REC_PARTITION_CHANGE:
        return apply_partition_change(img, off, &r->partition_change, u);
    case KQ_REC_REMOVE_TOPIC:
        return apply_remove_topic(img, off, &r->remove_topic, u);
    case KQ_REC_CONFIG:
        return apply_config(img, off, &r->config, u);
    case KQ_REC_FEATURE_LEVEL:
        return apply_feature(img, off, &r->feature_level, u);
    case KQ_REC_ACL:
        return apply_acl(img, off, r, u);
    case KQ_REC_REMOVE_ACL:
        return apply_remove_acl(img, off, &r->remove_acl, u);
    default:
        return 0; /* LeaderChange, KRaftVersion, Voters, NoOp, Opaque */
    }
}

int kq_image_apply(kq_image *img, int64_t offset, const kq_record *r)
{
    int rc;

    img->err[0] = '\0';
    if ((rc = kq_record_validate(r, img->err, sizeof img->err)))
        return rc;
    if (offset <= img->offset)
        return errf(img, KQ_ERR_INVALID_REQUEST,
                    "record offset %lld is not after the last applied offset %lld",
                    (long long)offset, (long long)img->offset);
    if ((rc = apply_one(img, offset, r, true)))
        return rc;
    img->offset = offset;
    return 0;
}

int kq_image_apply_noundo_(kq_image *img, int64_t offset, const kq_record *r)
{
    int rc;

    img->err[0] = '\0';
    if ((rc = kq_record_validate(r, img->err, sizeof img->err)))
        return rc;
    return apply_one(img, offset, r, false);
}
void kq_image_set_offsets_(kq_image *img, int64_t offset)
{
    img->offset = img->committed = offset;
}

const char *kq_image_error(const kq_image *img)
{
    return img->err;
}

int64_t kq_image_offset(const kq_image *img)
{
    return img->offset;
}

int64_t kq_image_committed_offset(const kq_image *img)
{
    return img->committed;
}

size_t kq_image_undo_depth(const kq_image *img)
{
    return img->u_n - img->u_head;
}

int kq_image_commit(kq_image *img, int64_t offset)
{
    if (offset > img->offset)
        offset = img->offset;
    if (offset <= img->committed)
        return 0;
    while (img->u_head < img->u_n && img->u[img->u_head].offset <= offset) {
        img->n_uncommitted_acl -= is_acl_entry(&img->u[img->u_head]);
        undo_release(&img->u[img->u_head++]);
    }
    if (img->u_head == img->u_n)
        img->u_head = img->u_n = 0;
    img->committed = offset;
    return 0;
}

int kq_image_rollback(kq_image *img, int64_t offset)
{
    if (offset < img->committed)
        return errf(img, KQ_ERR_INVALID_REQUEST,
                    "cannot roll back to offset %lld: offset %lld is committed", (long long)offset,
                    (long long)img->committed);
    if (offset >= img->offset)
        return 0;
    while (img->u_n > img->u_head && img->u[img->u_n - 1].offset > offset) {
        img->n_uncommitted_acl -= is_acl_entry(&img->u[img->u_n - 1]);
        undo_revert(img, &img->u[--img->u_n]);
    }
    img->offset = offset;
    return 0;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

kq_image *kq_image_new(void)
{
    kq_image *img = calloc(1, sizeof *img);

    if (!img)
        return NULL;
    img->offset = img->committed = -1;
    return img;
}

void kq_image_clear(kq_image *img)
{
    if (!img)
        return;
    /* Release newest first, so a topic removed and still referenced by older entries is freed
     * by its U_TOPIC_REMOVE entry only; older entries hold no owning topic pointers. */
    while (img->u_n > img->u_head) {
        undo *e = &img->u[--img->u_n];

        if (e->kind == U_TOPIC_ADD)
            continue; /* the topic is in the slots (or freed by a later remove entry) */
        undo_release(e);
    }
    free(img->u);
    for (uint32_t s = 0; s < img->n_slots; s++)
        topic_free(img->slots[s]);
    free(img->slots);
    free(img->free_slots);
    free(img->by_id);
    free(img->by_name);
    for (size_t i = 0; i < img->n_brokers; i++) {
        if (img->brokers[i]->registered)
            broker_clear(&img->brokers[i]->reg);
        free(img->brokers[i]->replicas.v);
        free(img->brokers[i]->leads.v);
        free(img->brokers[i]);
    }
    free(img->brokers);
    for (size_t i = 0; i < img->n_cfgs; i++)
        cfg_clear(&img->cfgs[i]);
    free(img->cfgs);
    for (size_t i = 0; i < img->n_feats; i++)
        free(img->feats[i].name);
    free(img->feats);
    for (size_t i = 0; i < img->n_acls; i++)
        acl_clear(&img->acls[i]);
    free(img->acls);
    memset(img, 0, sizeof *img);
    img->offset = img->committed = -1;
}

void kq_image_free(kq_image *img)
{
    kq_image_clear(img);
    free(img);
}

/* ---- reads -------------------------------------------------------------------------------- */

const kq_broker *kq_image_broker(const kq_image *img, int32_t id)
{
    bnode *b = bnode_find(img, id);

    return b && b->registered ? &b->reg : NULL;
}

const kq_broker *kq_image_broker_next(const kq_image *img, const kq_broker *prev)
{
    size_t i = 0;

    if (prev) {
        bool found;

        i = broker_pos(img, prev->id, &found);
        if (found)
            i++;
    }
    for (; i < img->n_brokers; i++)
        if (img->brokers[i]->registered)
            return &img->brokers[i]->reg;
    return NULL;
}

uint32_t kq_image_broker_count(const kq_image *img, int32_t id, kq_image_role role)
{
    bnode *b = bnode_find(img, id);
    uint32_t n = 0;

    if (!b)
        return 0;
    switch (role) {
    case KQ_ROLE_LEADER:
        return b->leads.n;
    case KQ_ROLE_REPLICA:
        return b->replicas.n;
    case KQ_ROLE_ISR:
        return b->n_isr;
    case KQ_ROLE_ELR:
        return b->n_elr;
    case KQ_ROLE_LAST_KNOWN_ELR:
        for (uint32_t i = 0; i < b->replicas.n; i++) {
            const kq_partition *p = part_at(img, b->replicas.v[i]);

            n += kq_ids_contain(kq_partition_last_known_elr(p), p->n_last_known_elr, id);
        }
        return n;
    }
    return 0;
}

static bool has_role(const kq_partition *p, int32_t id, kq_image_role role)
{
    switch (role) {
    case KQ_ROLE_LEADER:
        return p->leader == id;
    case KQ_ROLE_REPLICA:
        return true;
    case KQ_ROLE_ISR:
        return kq_ids_contain(kq_partition_isr(p), p->n_isr, id);
    case KQ_ROLE_ELR:
        return kq_ids_contain(kq_partition_elr(p), p->n_elr, id);
    case KQ_ROLE_LAST_KNOWN_ELR:
        return kq_ids_contain(kq_partition_last_known_elr(p), p->n_last_known_elr, id);
    }
    return false;
}

int kq_image_foreach_broker_partition(const kq_image *img, int32_t id, kq_image_role role,
                                      kq_image_partition_cb cb, void *arg)
{
    bnode *b = bnode_find(img, id);
    const pvec *v;

    if (!b)
        return 0;
    v = role == KQ_ROLE_LEADER ? &b->leads : &b->replicas;
    for (uint32_t i = 0; i < v->n; i++) {
        const kq_partition *p = part_at(img, v->v[i]);
        int rc;

        if (has_role(p, id, role) && (rc = cb(arg, img->slots[v->v[i].slot], v->v[i].part, p)))
            return rc;
    }
    return 0;
}

typedef struct collect {
    kq_tp *v;
    size_t n, cap;
} collect;

static int collect_cb(void *arg, const kq_topic *t, int32_t pid, const kq_partition *p)
{
    collect *c = arg;

    (void)p;
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 64;
        kq_tp *nv = realloc(c->v, ncap * sizeof *nv);

        if (!nv)
            return KQ_ERR_NOMEM;
        c->v = nv;
        c->cap = ncap;
    }
    memcpy(c->v[c->n].topic_id, t->id, 16);
    c->v[c->n++].partition = pid;
    return 0;
}

int kq_image_broker_partitions(const kq_image *img, int32_t id, kq_image_role role, kq_tp **out,
                               size_t *n)
{
    collect c = {0};
    int rc = kq_image_foreach_broker_partition(img, id, role, collect_cb, &c);

    if (rc) {
        free(c.v);
        *out = NULL;
        *n = 0;
        return rc;
    }
    *out = c.v;
    *n = c.n;
    return 0;
}

int kq_image_foreach_partition(const kq_image *img, kq_image_partition_cb cb, void *arg)
{
    for (uint32_t s = 0; s < img->n_slots; s++) {
        const kq_topic *t = img->slots[s];

        if (!t)
            continue;
        for (int32_t i = 0; i < t->n_partitions; i++) {
            int rc = cb(arg, t, i, &t->partitions[i]);

            if (rc)
                return rc;
        }
    }
    return 0;
}

const kq_topic *kq_image_topic_by_name(const kq_image *img, const char *name)
{
    return find_name(img, name);
}

const kq_topic *kq_image_topic_by_id(const kq_image *img, const uint8_t id[16])
{
    return id ? find_id(img, id) : NULL;
}

const kq_topic *kq_image_topic_next(const kq_image *img, const kq_topic *prev)
{
    for (uint32_t s = prev ? prev->slot_ + 1 : 0; s < img->n_slots; s++)
        if (img->slots[s])
            return img->slots[s];
    return NULL;
}

const kq_partition *kq_image_partition(const kq_image *img, const uint8_t topic_id[16],
                                       int32_t partition_id)
{
    const kq_topic *t = kq_image_topic_by_id(img, topic_id);

    if (!t || partition_id < 0 || partition_id >= t->n_partitions)
        return NULL;
    return &t->partitions[partition_id];
}

const char *kq_image_config(const kq_image *img, int resource_type, const char *resource,
                            const char *name)
{
    bool found;
    size_t i;

    if (!resource || !name)
        return NULL;
    i = cfg_pos(img, resource_type, resource, name, &found);
    return found ? img->cfgs[i].value : NULL;
}

static bool min_isr_parse(const char *v, int32_t *out)
{
    int64_t x = 0;
    if (v == NULL || *v == '\0')
        return false;
    for (const char *c = v; *c; c++) {
        if (*c < '0' || *c > '9')
            return false;
        x = x * 10 + (*c - '0');
        if (x > INT32_MAX)
            return false;
    }
    if (x < 1)
        return false;
    *out = (int32_t)x;
    return true;
}

int32_t kq_image_min_isr(const kq_image *img, const char *topic, int32_t dflt)
{
    static const char key[] = "min.insync.replicas";
    int32_t m;
    if (topic != NULL &&
        min_isr_parse(kq_image_config(img, KQ_CONFIG_RESOURCE_TOPIC, topic, key), &m))
        return m;
    if (min_isr_parse(kq_image_config(img, KQ_CONFIG_RESOURCE_BROKER, "", key), &m))
        return m;
    return dflt;
}

int kq_image_foreach_config(const kq_image *img, int resource_type, const char *resource,
                            kq_image_config_cb cb, void *arg)
{
    for (size_t i = 0; i < img->n_cfgs; i++) {
        const cfg *c = &img->cfgs[i];
        int rc;

        if (resource_type && c->type != resource_type)
            continue;
        if (resource && strcmp(resource, c->resource))
            continue;
        if ((rc = cb(arg, c->type, c->resource, c->name, c->value)))
            return rc;
    }
    return 0;
}

const kq_acl *kq_image_acls(const kq_image *img, size_t *n)
{
    *n = img ? img->n_acls : 0;
    return img ? img->acls : NULL;
}

int kq_image_committed_acls(const kq_image *img, const kq_acl **out, size_t *n, kq_acl **scratch)
{
    size_t k;
    kq_acl *v;

    *scratch = NULL;
    if (!img || !img->n_uncommitted_acl) {
        *out = kq_image_acls(img, n);
        return 0;
    }
    if (!(v = malloc((img->n_acls + img->n_uncommitted_acl) * sizeof *v)))
        return KQ_ERR_NOMEM;
    memcpy(v, img->acls, img->n_acls * sizeof *v);
    k = img->n_acls;
    for (size_t i = img->u_n; i-- > img->u_head;) { /* undo, newest first */
        const undo *e = &img->u[i];

        if (e->kind == U_ACL_REMOVE)
            v[k++] = e->acl;
        for (size_t j = 0; e->kind == U_ACL_ADD && j < k; j++)
            if (!memcmp(v[j].id, e->acl.id, 16)) {
                v[j] = v[--k];
                break;
            }
    }
    *scratch = v;
    *out = v;
    *n = k;
    return 0;
}

int16_t kq_image_feature(const kq_image *img, const char *name)
{
    bool found;
    size_t i;

    if (!name)
        return 0;
    i = feat_pos(img, name, &found);
    return found ? img->feats[i].level : 0;
}

int kq_image_foreach_feature(const kq_image *img, kq_image_feature_cb cb, void *arg)
{
    for (size_t i = 0; i < img->n_feats; i++) {
        int rc = cb(arg, img->feats[i].name, img->feats[i].level);

        if (rc)
            return rc;
    }
    return 0;
}

void kq_image_get_counts(const kq_image *img, kq_image_counts *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < img->n_brokers; i++) {
        const bnode *b = img->brokers[i];

        if (!b->registered)
            continue;
        out->brokers++;
        out->fenced_brokers += b->reg.fenced;
        out->controlled_shutdown_brokers += b->reg.in_controlled_shutdown;
    }
    out->topics = img->n_topics;
    out->partitions = img->n_partitions;
    out->offline_partitions = img->n_offline;
    out->preferred_imbalance = img->n_imbalance;
    out->under_replicated = img->n_under;
    out->configs = (uint32_t)img->n_cfgs;
    out->features = (uint32_t)img->n_feats;
    out->acls = (uint32_t)img->n_acls;
}

/* ---- hash --------------------------------------------------------------------------------- */

static uint64_t hash_ids(uint64_t h, const int32_t *ids, int n)
{
    h = hstep(h, (uint64_t)n);
    for (int i = 0; i < n; i++)
        h = hstep(h, (uint32_t)ids[i]);
    return h;
}

uint64_t kq_image_hash(const kq_image *img)
{
    uint64_t sum = 0;

    for (size_t i = 0; i < img->n_brokers; i++) {
        const kq_broker *b = &img->brokers[i]->reg;
        uint64_t h = 1;

        if (!img->brokers[i]->registered)
            continue;
        h = hstep(h, (uint32_t)b->id);
        h = hbytes(h, b->incarnation_id, 16);
        h = hstep(h, (uint64_t)b->epoch);
        h = hstep(h, (uint64_t)b->registration_offset);
        h = hstep(h, (uint64_t)b->fenced * 2 + b->in_controlled_shutdown);
        h = hstr(h, b->rack);
        h = hstep(h, (uint64_t)b->n_endpoints);
        for (int32_t e = 0; e < b->n_endpoints; e++) {
            h = hstr(h, b->endpoints[e].name);
            h = hstr(h, b->endpoints[e].host);
            h = hstep(h, (uint32_t)b->endpoints[e].port);
        }
        sum += mix64(h);
    }
    for (uint32_t s = 0; s < img->n_slots; s++) {
        const kq_topic *t = img->slots[s];
        uint64_t th;

        if (!t)
            continue;
        th = hbytes(2, t->id, 16);
        sum += mix64(hstep(hstr(th, t->name), (uint64_t)t->n_partitions));
        for (int32_t i = 0; i < t->n_partitions; i++) {
            const kq_partition *p = &t->partitions[i];
            uint64_t h = hstep(th, (uint32_t)i);

            h = hstep(h, (uint32_t)p->leader);
            h = hstep(h, (uint32_t)p->leader_epoch);
            h = hstep(h, (uint32_t)p->partition_epoch);
            h = hstep(h, (uint8_t)p->leader_recovery_state);
            h = hash_ids(h, kq_partition_replicas(p), p->n_replicas);
            h = hash_ids(h, kq_partition_isr(p), p->n_isr);
            h = hash_ids(h, kq_partition_elr(p), p->n_elr);
            h = hash_ids(h, kq_partition_last_known_elr(p), p->n_last_known_elr);
            sum += mix64(h);
        }
    }
    for (size_t i = 0; i < img->n_cfgs; i++) {
        const cfg *c = &img->cfgs[i];

        sum += mix64(hstr(hstr(hstr(hstep(3, (uint64_t)c->type), c->resource), c->name), c->value));
    }
    for (size_t i = 0; i < img->n_feats; i++)
        sum += mix64(hstep(hstr(4, img->feats[i].name), (uint16_t)img->feats[i].level));
    for (size_t i = 0; i < img->n_acls; i++) {
        const kq_acl *a = &img->acls[i];
        uint64_t h = hbytes(5, a->id, 16);

        h = hstr(hstep(hstr(hstep(h, (uint8_t)a->resource_type), a->resource_name),
                       (uint8_t)a->pattern_type),
                 a->principal);
        h = hstep(hstep(hstr(h, a->host), (uint8_t)a->operation), (uint8_t)a->permission);
        sum += mix64(h);
    }
    return sum;
}

size_t kq_image_memory_bytes(const kq_image *img)
{
    size_t n = sizeof *img;

    n += img->cap_slots * (sizeof(kq_topic *) + sizeof(uint32_t));
    n += img->tcap * 2 * sizeof(kq_topic *);
    for (uint32_t s = 0; s < img->n_slots; s++) {
        const kq_topic *t = img->slots[s];

        if (!t)
            continue;
        n += sizeof *t + strlen(t->name) + 1 + (size_t)t->cap_partitions_ * sizeof(kq_partition);
        for (int32_t i = 0; i < t->n_partitions; i++)
            n += ids_alloc_len(&t->partitions[i]) * sizeof(int32_t);
    }
    n += img->cap_brokers * sizeof(bnode *);
    for (size_t i = 0; i < img->n_brokers; i++) {
        const bnode *b = img->brokers[i];

        n += sizeof *b + ((size_t)b->replicas.cap + b->leads.cap) * sizeof(pref);
        if (b->registered) {
            n += (size_t)b->reg.n_endpoints * sizeof(kq_rec_endpoint);
            for (int32_t e = 0; e < b->reg.n_endpoints; e++)
                n += strlen(b->reg.endpoints[e].name) + strlen(b->reg.endpoints[e].host) + 2;
            n += b->reg.rack ? strlen(b->reg.rack) + 1 : 0;
        }
    }
    n += img->cap_cfgs * sizeof(cfg);
    for (size_t i = 0; i < img->n_cfgs; i++)
        n += strlen(img->cfgs[i].resource) + strlen(img->cfgs[i].name) + 2 +
             (img->cfgs[i].value ? strlen(img->cfgs[i].value) + 1 : 0);
    n += img->cap_feats * sizeof(feat);
    n += img->cap_acls * sizeof(kq_acl);
    for (size_t i = 0; i < img->n_acls; i++)
        n += strlen(img->acls[i].resource_name) + strlen(img->acls[i].principal) +
             strlen(img->acls[i].host) + 3;
    n += img->u_cap * sizeof(undo);
    return n;
}

/* ---- canonical record stream -------------------------------------------------------------- */

static int cmp_topic_name(const void *a, const void *b)
{
    return strcmp((*(kq_topic *const *)a)->name, (*(kq_topic *const *)b)->name);
}

int kq_image_foreach_record(const kq_image *img, kq_image_record_cb cb, void *arg)
{
    kq_topic **sorted = NULL;
    size_t nt = 0;
    kq_record r;
    int rc = 0;

    for (size_t i = 0; i < img->n_feats; i++) {
        memset(&r, 0, sizeof r);
        r.type = KQ_REC_FEATURE_LEVEL;
        r.feature_level.name = img->feats[i].name;
        r.feature_level.level = img->feats[i].level;
        if ((rc = cb(arg, &r)))
            goto out;
    }
    for (size_t i = 0; i < img->n_brokers; i++) {
        const kq_broker *b = &img->brokers[i]->reg;

        if (!img->brokers[i]->registered)
            continue;
        memset(&r, 0, sizeof r);
        r.type = KQ_REC_REGISTER_BROKER;
        r.register_broker.broker_id = b->id;
        memcpy(r.register_broker.incarnation_id, b->incarnation_id, 16);
        r.register_broker.broker_epoch = b->epoch;
        r.register_broker.endpoints = b->endpoints;
        r.register_broker.n_endpoints = b->n_endpoints;
        r.register_broker.rack = b->rack;
        r.register_broker.fenced = b->fenced;
        r.register_broker.in_controlled_shutdown = b->in_controlled_shutdown;
        r.register_broker.registration_offset = b->registration_offset;
        if ((rc = cb(arg, &r)))
            goto out;
    }
    if (img->n_topics) {
        sorted = malloc(img->n_topics * sizeof *sorted);
        if (!sorted) {
            rc = KQ_ERR_NOMEM;
            goto out;
        }
        for (uint32_t s = 0; s < img->n_slots; s++)
            if (img->slots[s])
                sorted[nt++] = img->slots[s];
        qsort(sorted, nt, sizeof *sorted, cmp_topic_name);
    }
    for (size_t k = 0; k < nt; k++) {
        const kq_topic *t = sorted[k];

        memset(&r, 0, sizeof r);
        r.type = KQ_REC_TOPIC;
        r.topic.name = t->name;
        memcpy(r.topic.topic_id, t->id, 16);
        if ((rc = cb(arg, &r)))
            goto out;
        for (int32_t i = 0; i < t->n_partitions; i++) {
            const kq_partition *p = &t->partitions[i];
            kq_rec_partition *rp = &r.partition;

            memset(&r, 0, sizeof r);
            r.type = KQ_REC_PARTITION;
            rp->partition_id = i;
            memcpy(rp->topic_id, t->id, 16);
            rp->replicas = (kq_rec_ids){(int32_t *)kq_partition_replicas(p), p->n_replicas};
            rp->isr = (kq_rec_ids){(int32_t *)kq_partition_isr(p), p->n_isr};
            rp->elr = (kq_rec_ids){(int32_t *)kq_partition_elr(p), p->n_elr};
            rp->last_known_elr =
                (kq_rec_ids){(int32_t *)kq_partition_last_known_elr(p), p->n_last_known_elr};
            rp->leader = p->leader;
            rp->leader_recovery_state = p->leader_recovery_state;
            rp->leader_epoch = p->leader_epoch;
            rp->partition_epoch = p->partition_epoch;
            if ((rc = cb(arg, &r)))
                goto out;
        }
    }
    for (size_t i = 0; i < img->n_cfgs; i++) {
        memset(&r, 0, sizeof r);
        r.type = KQ_REC_CONFIG;
        r.config.resource_type = img->cfgs[i].type;
        r.config.resource_name = img->cfgs[i].resource;
        r.config.name = img->cfgs[i].name;
        r.config.value = img->cfgs[i].value;
        if ((rc = cb(arg, &r)))
            goto out;
    }
    for (size_t i = 0; i < img->n_acls; i++) {
        memset(&r, 0, sizeof r);
        r.type = KQ_REC_ACL;
        r.acl = img->acls[i];
        if ((rc = cb(arg, &r)))
            goto out;
    }
out:
    free(sorted);
    return rc;
}
