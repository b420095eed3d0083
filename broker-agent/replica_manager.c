/*
 * The broker agent's replica manager: see replica_manager.h.
 */
#include "replica_manager.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/log.h"
#include "kq/records.h"
#include "kq/util.h"

const char *kq_rm_change_name(kq_rm_change_kind kind)
{
    switch (kind) {
    case KQ_RM_BECOME_LEADER:
        return "become-leader";
    case KQ_RM_BECOME_FOLLOWER:
        return "become-follower";
    case KQ_RM_UPDATE:
        return "update";
    case KQ_RM_STOP:
        return "stop";
    }
    return "unknown";
}

/* ---------- the pure delta ---------- */

typedef struct collect {
    const kq_image *img;
    const kq_topic *min_isr_of; /* the topic min_isr was looked up for: a topic's partitions */
    int32_t min_isr;            /* usually come one after another (no lookup per partition) */
    int32_t node_id;
    kq_rm_partition *v;
    size_t n, cap;
    size_t skipped;
    int rc;
} collect;

static int collect_cb(void *arg, const kq_topic *t, int32_t partition_id, const kq_partition *p)
{
    collect *c = arg;
    if (p->n_replicas > KQ_REPLICA_MAX_REPLICAS || p->n_isr > KQ_REPLICA_MAX_REPLICAS) {
        c->skipped++;
        return 0;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        kq_rm_partition *v = realloc(c->v, cap * sizeof(*v));
        if (v == NULL) {
            c->rc = KQ_ERR_NOMEM;
            return 1;
        }
        c->v = v;
        c->cap = cap;
    }
    kq_rm_partition *e = &c->v[c->n++];
    memset(e, 0, sizeof(*e));
    memcpy(e->topic_id, t->id, sizeof(e->topic_id));
    snprintf(e->topic, sizeof(e->topic), "%s", t->name ? t->name : "");
    e->partition = partition_id;
    e->leader = p->leader;
    e->leader_epoch = p->leader_epoch;
    e->partition_epoch = p->partition_epoch;
    e->role = p->leader == c->node_id ? KQ_REPLICA_LEADER : KQ_REPLICA_FOLLOWER;
    e->n_replicas = p->n_replicas;
    memcpy(e->replicas, kq_partition_replicas(p), (size_t)p->n_replicas * sizeof(int32_t));
    e->n_isr = p->n_isr;
    memcpy(e->isr, kq_partition_isr(p), (size_t)p->n_isr * sizeof(int32_t));
    if (c->min_isr_of != t) {
        c->min_isr_of = t;
        c->min_isr = kq_image_min_isr(c->img, e->topic, 0);
    }
    e->min_isr = c->min_isr;
    return 0;
}

static int tp_cmp(const kq_rm_partition *a, const kq_rm_partition *b)
{
    int c = memcmp(a->topic_id, b->topic_id, sizeof(a->topic_id));
    if (c != 0)
        return c;
    return (a->partition > b->partition) - (a->partition < b->partition);
}

static int tp_qsort_cmp(const void *a, const void *b)
{
    return tp_cmp(a, b);
}

static int push_change(kq_rm_change **v, size_t *n, size_t *cap, kq_rm_change_kind kind,
                       const kq_rm_partition *p)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        kq_rm_change *nv = realloc(*v, nc * sizeof(*nv));
        if (nv == NULL)
            return KQ_ERR_NOMEM;
        *v = nv;
        *cap = nc;
    }
    (*v)[*n].kind = kind;
    (*v)[*n].p = *p;
    (*n)++;
    return 0;
}

/* The change from old (NULL: not hosted before) to cur, or 0 for none. */
static kq_rm_change_kind classify(const kq_rm_partition *old, const kq_rm_partition *cur)
{
    if (old == NULL || old->role != cur->role || old->leader_epoch != cur->leader_epoch ||
        old->leader != cur->leader)
        return cur->role == KQ_REPLICA_LEADER ? KQ_RM_BECOME_LEADER : KQ_RM_BECOME_FOLLOWER;
    if (old->partition_epoch != cur->partition_epoch || old->min_isr != cur->min_isr)
        return KQ_RM_UPDATE;
    return 0;
}

int kq_rm_compute(const kq_image *img, int32_t node_id, const kq_rm_partition *prev, size_t n_prev,
                  kq_rm_partition **next, size_t *n_next, kq_rm_change **changes, size_t *n_changes,
                  size_t *skipped, size_t *stale)
{
    collect c = {.img = img, .node_id = node_id};
    kq_rm_change *ch = NULL;
    size_t n_ch = 0, cap_ch = 0, n_stale = 0;
    int rc = 0;

    *next = NULL;
    *n_next = 0;
    *changes = NULL;
    *n_changes = 0;
    *skipped = 0;
    *stale = 0;
    for (size_t i = 1; i < n_prev; i++)
        if (tp_cmp(&prev[i - 1], &prev[i]) >= 0)
            return KQ_ERR_INVALID_REQUEST;
    rc = kq_image_foreach_broker_partition(img, node_id, KQ_ROLE_REPLICA, collect_cb, &c);
    if (c.rc != 0 || rc != 0) {
        rc = c.rc ? c.rc : rc;
        goto out;
    }
    if (c.n > 1)
        qsort(c.v, c.n, sizeof(*c.v), tp_qsort_cmp);

    /* Merge the two sorted lists. */
    size_t i = 0, j = 0;
    while (i < c.n || j < n_prev) {
        int cmp = i == c.n ? 1 : j == n_prev ? -1 : tp_cmp(&c.v[i], &prev[j]);
        if (cmp > 0) { /* hosted before, not any more */
            if ((rc = push_change(&ch, &n_ch, &cap_ch, KQ_RM_STOP, &prev[j])) != 0)
                goto out;
            j++;
            continue;
        }
        const kq_rm_partition *old = cmp == 0 ? &prev[j] : NULL;
        if (old != NULL && c.v[i].partition_epoch < old->partition_epoch) {
            int32_t min_isr = c.v[i].min_isr; /* configs are not partition state: keep them */
            c.v[i] = *old;                    /* an older partition epoch: ignored (4.7) */
            c.v[i].min_isr = min_isr;
            n_stale++;
            if (min_isr != old->min_isr &&
                (rc = push_change(&ch, &n_ch, &cap_ch, KQ_RM_UPDATE, &c.v[i])) != 0)
                goto out;
        } else {
            kq_rm_change_kind k = classify(old, &c.v[i]);
            if (k != 0 && (rc = push_change(&ch, &n_ch, &cap_ch, k, &c.v[i])) != 0)
                goto out;
        }
        i++;
        if (cmp == 0)
            j++;
    }
    /* STOPs last: move them after the others, keeping each group's order. */
    if (n_ch > 1) {
        kq_rm_change *sorted = malloc(n_ch * sizeof(*sorted));
        if (sorted == NULL) {
            rc = KQ_ERR_NOMEM;
            goto out;
        }
        size_t k = 0;
        for (int pass = 0; pass < 2; pass++)
            for (size_t x = 0; x < n_ch; x++)
                if ((ch[x].kind == KQ_RM_STOP) == (pass == 1))
                    sorted[k++] = ch[x];
        free(ch);
        ch = sorted;
    }
    *next = c.v;
    *n_next = c.n;
    c.v = NULL;
    *changes = ch;
    *n_changes = n_ch;
    ch = NULL;
    *skipped = c.skipped;
    *stale = n_stale;
    rc = 0;
out:
    free(c.v);
    free(ch);
    return rc;
}

/* ---------- the manager ---------- */

struct kq_rm {
    kq_rm_config cfg;
    kq_plog *plog;           /* borrowed */
    kq_rm_partition *hosted; /* sorted */
    kq_replica **replicas;   /* parallel to hosted */
    size_t n_hosted;
    bool swept; /* stray partition logs deleted (first call) */
    kq_rm_update_cb update_cb;
    void *update_arg;
    kq_rm_counts counts;
};

kq_rm *kq_rm_new(const kq_rm_config *cfg, kq_plog *plog)
{
    kq_rm *rm = calloc(1, sizeof(*rm));
    if (rm == NULL)
        return NULL;
    rm->cfg = *cfg;
    rm->plog = plog;
    return rm;
}

void kq_rm_free(kq_rm *rm)
{
    if (rm == NULL)
        return;
    for (size_t i = 0; i < rm->n_hosted; i++)
        kq_replica_free(rm->replicas[i]);
    free(rm->replicas);
    free(rm->hosted);
    free(rm);
}

static kq_plog_tp tp_of(const kq_rm_partition *p)
{
    kq_plog_tp tp;
    memcpy(tp.topic_id, p->topic_id, sizeof(tp.topic_id));
    tp.partition = p->partition;
    return tp;
}

/* The configured minimum for p, else this broker's static min.insync.replicas. */
static int32_t min_isr_of(const kq_rm *rm, const kq_rm_partition *p)
{
    return p->min_isr > 0 ? p->min_isr : rm->cfg.min_insync_replicas;
}

/* Registration state of p's replicas as the image knows it. */
static int brokers_of(const kq_image *img, const kq_rm_partition *p, kq_replica_broker *out)
{
    int n = 0;
    for (int i = 0; i < p->n_replicas; i++) {
        const kq_broker *br = kq_image_broker(img, p->replicas[i]);
        if (br == NULL)
            continue;
        out[n].id = br->id;
        out[n].broker_epoch = br->epoch;
        out[n].fenced = br->fenced;
        out[n].in_controlled_shutdown = br->in_controlled_shutdown;
        n++;
    }
    return n;
}

/* Steps 1-2 of the update order (replica.h): reset and truncation, inside the open plog
 * transaction. */
static int log_prepare(kq_rm *rm, const kq_rm_partition *p, const kq_replica_update *u,
                       char *errbuf, size_t errlen)
{
    kq_plog_tp tp = tp_of(p);
    int rc = 0;
    if (u->reset_log_start >= 0 &&
        (rc = kq_plog_truncate_fully(rm->plog, &tp, u->reset_log_start)) != 0) {
        snprintf(errbuf, errlen, "%s-%d: cannot reset the log at %lld: %s", p->topic, p->partition,
                 (long long)u->reset_log_start, kq_err_message(rc));
        return rc;
    }
    if (u->truncate_to >= 0 && (rc = kq_plog_truncate(rm->plog, &tp, u->truncate_to)) != 0) {
        snprintf(errbuf, errlen, "%s-%d: cannot truncate the log to %lld: %s", p->topic,
                 p->partition, (long long)u->truncate_to, kq_err_message(rc));
        return rc;
    }
    if (u->reset_log_start >= 0 || u->truncate_to >= 0)
        KQ_INFO("replica", "Truncated the partition log", "partition=%s-%d to=%lld reset=%s",
                p->topic, p->partition,
                (long long)(u->reset_log_start >= 0 ? u->reset_log_start : u->truncate_to),
                u->reset_log_start >= 0 ? "true" : "false");
    return 0;
}

/* Step 4 (the epoch cache, after the appends) and the update's log lines. */
static int log_finish(kq_rm *rm, const kq_rm_partition *p, const kq_replica *r,
                      const kq_replica_update *u, char *errbuf, size_t errlen)
{
    kq_plog_tp tp = tp_of(p);
    int rc = 0;
    if (u->epochs_changed) {
        size_t n = 0;
        const kq_epoch_entry *e = kq_replica_epochs(r, &n);
        kq_plog_state st;
        if ((rc = kq_plog_state_of(rm->plog, &tp, &st)) != 0) {
            snprintf(errbuf, errlen, "%s-%d: %s", p->topic, p->partition, kq_err_message(rc));
            return rc;
        }
        if (n > 0 && e[n - 1].epoch > st.last_epoch &&
            (rc = kq_plog_assign_epoch(rm->plog, &tp, e[n - 1].epoch)) != 0) {
            snprintf(errbuf, errlen, "%s-%d: cannot record leader epoch %d: %s", p->topic,
                     p->partition, e[n - 1].epoch, kq_err_message(rc));
            return rc;
        }
    }
    for (int i = 0; i < u->n_log; i++)
        KQ_INFO("replica", u->log[i], "partition=%s-%d", p->topic, p->partition);
    return 0;
}

/* Apply the log instructions of a metadata step (a DELTA appends nothing). */
static int apply_log_update(kq_rm *rm, const kq_rm_partition *p, kq_replica *r,
                            const kq_replica_update *u, char *errbuf, size_t errlen)
{
    int rc = log_prepare(rm, p, u, errbuf, errlen);
    return rc != 0 ? rc : log_finish(rm, p, r, u, errbuf, errlen);
}

/* Open the partition's log (creating it the first time) and start a replica on it. */
static int start_replica(kq_rm *rm, const kq_image *img, const kq_rm_partition *p, uint64_t now_ms,
                         kq_replica **out, char *errbuf, size_t errlen)
{
    kq_plog_tp tp = tp_of(p);
    kq_plog_state st;
    kq_epoch_entry *pe = NULL;
    kq_epoch_entry *re = NULL;
    size_t n_epochs = 0;
    kq_replica *r = NULL;
    kq_replica_update u;
    int rc = kq_plog_state_of(rm->plog, &tp, &st);
    if (rc == KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION) {
        rc = kq_plog_create_partition(rm->plog, &tp, p->partition_epoch, 0);
        if (rc == 0)
            rc = kq_plog_state_of(rm->plog, &tp, &st);
    }
    if (rc != 0) {
        snprintf(errbuf, errlen, "%s-%d: cannot open its log: %s", p->topic, p->partition,
                 kq_err_message(rc));
        goto out;
    }
    if ((rc = kq_plog_epochs(rm->plog, &tp, &pe, &n_epochs)) != 0) {
        snprintf(errbuf, errlen, "%s-%d: cannot read its epoch cache: %s", p->topic, p->partition,
                 kq_err_message(rc));
        goto out;
    }
    if (n_epochs > 0) {
        re = calloc(n_epochs, sizeof(*re));
        if (re == NULL) {
            rc = KQ_ERR_NOMEM;
            snprintf(errbuf, errlen, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < n_epochs; i++) {
            re[i].epoch = pe[i].epoch;
            re[i].start_offset = pe[i].start_offset;
        }
    }
    kq_replica_config rc_cfg;
    kq_replica_config_defaults(&rc_cfg);
    rc_cfg.node_id = rm->cfg.node_id;
    snprintf(rc_cfg.topic, sizeof(rc_cfg.topic), "%s", p->topic);
    rc_cfg.partition = p->partition;
    rc_cfg.replica_lag_time_max_ms = rm->cfg.replica_lag_time_max_ms;
    rc_cfg.min_insync_replicas = min_isr_of(rm, p);
    r = kq_replica_new(&rc_cfg, errbuf, errlen);
    if (r == NULL) {
        rc = KQ_ERR_CONFIG;
        goto out;
    }
    kq_replica_event ev = {.type = KQ_REPLICA_EV_START, .now_ms = now_ms};
    ev.u.start.log_start_offset = st.log_start_offset;
    ev.u.start.log_end_offset = st.log_end_offset;
    ev.u.start.high_watermark = st.high_watermark;
    ev.u.start.epochs = re;
    ev.u.start.n_epochs = n_epochs;
    if ((rc = kq_replica_step(r, &ev, &u)) != 0) {
        snprintf(errbuf, errlen, "%s-%d: the replica rejected its recovered log: %s", p->topic,
                 p->partition, u.reason);
        goto out;
    }
    *out = r;
    r = NULL;
out:
    kq_replica_free(r);
    free(pe);
    free(re);
    return rc;
}

static int step_delta(kq_rm *rm, const kq_image *img, const kq_rm_partition *p, kq_replica *r,
                      uint64_t now_ms, char *errbuf, size_t errlen)
{
    kq_replica_broker brokers[KQ_REPLICA_MAX_REPLICAS];
    kq_replica_update u;
    kq_replica_event ev = {.type = KQ_REPLICA_EV_DELTA, .now_ms = now_ms};
    ev.u.delta.leader_id = p->leader;
    ev.u.delta.leader_epoch = p->leader_epoch;
    ev.u.delta.partition_epoch = p->partition_epoch;
    ev.u.delta.replicas = p->replicas;
    ev.u.delta.n_replicas = p->n_replicas;
    ev.u.delta.isr = p->isr;
    ev.u.delta.n_isr = p->n_isr;
    ev.u.delta.min_insync_replicas = min_isr_of(rm, p);
    ev.u.delta.brokers = brokers;
    ev.u.delta.n_brokers = brokers_of(img, p, brokers);
    int rc = kq_replica_step(r, &ev, &u);
    if (rc != 0) {
        snprintf(errbuf, errlen, "%s-%d: metadata delta refused: %s", p->topic, p->partition,
                 u.reason);
        return rc;
    }
    if ((rc = apply_log_update(rm, p, r, &u, errbuf, errlen)) != 0)
        return rc;
    if (rm->update_cb != NULL)
        rm->update_cb(rm->update_arg, p, r, &u);
    kq_plog_tp tp = tp_of(p);
    kq_plog_state st;
    if (kq_plog_state_of(rm->plog, &tp, &st) == 0 && p->partition_epoch > st.partition_epoch &&
        (rc = kq_plog_set_partition_epoch(rm->plog, &tp, p->partition_epoch)) != 0) {
        snprintf(errbuf, errlen, "%s-%d: cannot record partition epoch %d: %s", p->topic,
                 p->partition, p->partition_epoch, kq_err_message(rc));
        return rc;
    }
    return 0;
}

static size_t find_hosted(const kq_rm_partition *v, size_t n, const kq_rm_partition *key);

/* At the first metadata: delete the partition logs of partitions this broker no longer hosts
 * (their STOP happened while it was down). */
static int sweep_strays(kq_rm *rm, const kq_rm_partition *next, size_t n_next, char *errbuf,
                        size_t errlen)
{
    kq_plog_tp *tps = NULL;
    size_t n = 0;
    int rc = kq_plog_list(rm->plog, &tps, &n);
    if (rc != 0) {
        snprintf(errbuf, errlen, "partition logs: cannot list them: %s", kq_err_message(rc));
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        kq_rm_partition key;
        memcpy(key.topic_id, tps[i].topic_id, sizeof(key.topic_id));
        key.partition = tps[i].partition;
        if (find_hosted(next, n_next, &key) != SIZE_MAX)
            continue;
        if ((rc = kq_plog_delete_partition(rm->plog, &tps[i])) != 0) {
            snprintf(errbuf, errlen, "cannot delete a stray partition log: %s", kq_err_message(rc));
            goto out;
        }
        char id[KQ_UUID_STR_LEN + 1];
        kq_uuid_format(tps[i].topic_id, id);
        KQ_INFO("replica", "Deleted the log of a partition no longer hosted",
                "topic_id=%s partition=%d", id, tps[i].partition);
    }
out:
    free(tps);
    return rc;
}

static size_t find_hosted(const kq_rm_partition *v, size_t n, const kq_rm_partition *key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = tp_cmp(&v[mid], key);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return SIZE_MAX;
}

int kq_rm_on_metadata(kq_rm *rm, const kq_image *img, uint64_t now_ms, char *errbuf, size_t errlen)
{
    kq_rm_partition *next = NULL;
    kq_rm_change *ch = NULL;
    kq_replica **reps = NULL;
    size_t n_next = 0, n_ch = 0, skipped = 0, stale = 0;
    bool txn = false;
    int rc = kq_rm_compute(img, rm->cfg.node_id, rm->hosted, rm->n_hosted, &next, &n_next, &ch,
                           &n_ch, &skipped, &stale);
    if (rc != 0) {
        snprintf(errbuf, errlen, "replica manager: %s", kq_err_message(rc));
        goto out;
    }
    rm->counts.skipped = skipped;
    rm->counts.stale += stale;
    if (n_ch == 0 && rm->swept)
        goto out;
    if (n_next > 0 && (reps = calloc(n_next, sizeof(*reps))) == NULL) {
        rc = KQ_ERR_NOMEM;
        snprintf(errbuf, errlen, "out of memory");
        goto out;
    }
    /* Carry the replicas over to the new hosted set. */
    for (size_t i = 0; i < n_next; i++) {
        size_t k = find_hosted(rm->hosted, rm->n_hosted, &next[i]);
        if (k != SIZE_MAX) {
            reps[i] = rm->replicas[k];
            rm->replicas[k] = NULL;
        }
    }
    if ((rc = kq_plog_begin(rm->plog)) != 0) {
        snprintf(errbuf, errlen, "partition logs: %s", kq_err_message(rc));
        goto out;
    }
    txn = true;
    if (!rm->swept && (rc = sweep_strays(rm, next, n_next, errbuf, errlen)) != 0)
        goto out;
    for (size_t c = 0; c < n_ch; c++) {
        const kq_rm_partition *p = &ch[c].p;
        if (ch[c].kind == KQ_RM_STOP) {
            kq_plog_tp tp = tp_of(p);
            rc = kq_plog_delete_partition(rm->plog, &tp);
            if (rc != 0 && rc != KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION) {
                snprintf(errbuf, errlen, "%s-%d: cannot delete its log: %s", p->topic, p->partition,
                         kq_err_message(rc));
                goto out;
            }
            rc = 0;
            char msg[400];
            snprintf(msg, sizeof(msg), "Stopped replica of %s-%d", p->topic, p->partition);
            KQ_INFO("replica", msg, "partition_epoch=%d", p->partition_epoch);
            rm->counts.changes++;
            continue;
        }
        size_t i = find_hosted(next, n_next, p);
        if (i == SIZE_MAX) {
            rc = KQ_ERR_INTERNAL;
            snprintf(errbuf, errlen, "%s-%d: change for a partition not hosted", p->topic,
                     p->partition);
            goto out;
        }
        if (reps[i] == NULL &&
            (rc = start_replica(rm, img, p, now_ms, &reps[i], errbuf, errlen)) != 0)
            goto out;
        if ((rc = step_delta(rm, img, p, reps[i], now_ms, errbuf, errlen)) != 0)
            goto out;
        rm->counts.changes++;
        if (ch[c].kind == KQ_RM_BECOME_LEADER) {
            char msg[400];
            snprintf(msg, sizeof(msg), "Became leader of %s-%d at leader epoch %d", p->topic,
                     p->partition, p->leader_epoch);
            KQ_INFO("replica", msg, "partition_epoch=%d isr=%d", p->partition_epoch, p->n_isr);
        } else if (ch[c].kind == KQ_RM_BECOME_FOLLOWER) {
            char msg[400];
            snprintf(msg, sizeof(msg), "Became follower of %s-%d at leader epoch %d (leader %d)",
                     p->topic, p->partition, p->leader_epoch, p->leader);
            KQ_INFO("replica", msg, "partition_epoch=%d", p->partition_epoch);
        }
    }
    rc = kq_plog_commit(rm->plog);
    txn = false;
    if (rc != 0) {
        snprintf(errbuf, errlen, "partition logs: commit failed: %s", kq_err_message(rc));
        goto out;
    }
    /* Replicas of partitions no longer hosted are dropped; the new set replaces the old. */
    for (size_t k = 0; k < rm->n_hosted; k++)
        kq_replica_free(rm->replicas[k]);
    free(rm->replicas);
    free(rm->hosted);
    rm->swept = true;
    rm->hosted = next;
    rm->replicas = reps;
    rm->n_hosted = n_next;
    next = NULL;
    reps = NULL;
    rm->counts.leaders = rm->counts.followers = 0;
    for (size_t i = 0; i < rm->n_hosted; i++) {
        if (rm->hosted[i].role == KQ_REPLICA_LEADER)
            rm->counts.leaders++;
        else
            rm->counts.followers++;
    }
out:
    if (txn)
        kq_plog_abort(rm->plog);
    if (reps != NULL) {
        /* Failure: give carried-over replicas back (the old set stays), free new ones. */
        for (size_t i = 0; i < n_next; i++) {
            if (reps[i] == NULL)
                continue;
            size_t k = find_hosted(rm->hosted, rm->n_hosted, &next[i]);
            if (k != SIZE_MAX && rm->replicas[k] == NULL)
                rm->replicas[k] = reps[i];
            else
                kq_replica_free(reps[i]);
        }
        free(reps);
    }
    free(next);
    free(ch);
    return rc;
}

void kq_rm_get_counts(const kq_rm *rm, kq_rm_counts *out)
{
    *out = rm->counts;
}

const kq_rm_partition *kq_rm_partitions(const kq_rm *rm, size_t *n)
{
    *n = rm->n_hosted;
    return rm->hosted;
}

const kq_replica *kq_rm_replica(const kq_rm *rm, size_t i)
{
    return i < rm->n_hosted ? rm->replicas[i] : NULL;
}

void kq_rm_set_update_cb(kq_rm *rm, kq_rm_update_cb cb, void *arg)
{
    rm->update_cb = cb;
    rm->update_arg = arg;
}

size_t kq_rm_find(const kq_rm *rm, const uint8_t topic_id[16], int32_t partition)
{
    kq_rm_partition key;
    memcpy(key.topic_id, topic_id, sizeof(key.topic_id));
    key.partition = partition;
    return find_hosted(rm->hosted, rm->n_hosted, &key);
}

kq_replica *kq_rm_replica_mut(kq_rm *rm, size_t i)
{
    return i < rm->n_hosted ? rm->replicas[i] : NULL;
}

kq_plog *kq_rm_plog(kq_rm *rm)
{
    return rm->plog;
}

int kq_rm_log_prepare(kq_rm *rm, size_t i, const kq_replica_update *u, char *errbuf, size_t errlen)
{
    if (i >= rm->n_hosted) {
        snprintf(errbuf, errlen, "replica manager: no hosted partition %zu", i);
        return KQ_ERR_INTERNAL;
    }
    return log_prepare(rm, &rm->hosted[i], u, errbuf, errlen);
}

int kq_rm_log_finish(kq_rm *rm, size_t i, const kq_replica_update *u, char *errbuf, size_t errlen)
{
    if (i >= rm->n_hosted) {
        snprintf(errbuf, errlen, "replica manager: no hosted partition %zu", i);
        return KQ_ERR_INTERNAL;
    }
    return log_finish(rm, &rm->hosted[i], rm->replicas[i], u, errbuf, errlen);
}

int kq_rm_brokers_of(const kq_image *img, const kq_rm_partition *p, kq_replica_broker *out)
{
    return brokers_of(img, p, out);
}
