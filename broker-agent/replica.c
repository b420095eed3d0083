/*
 * kq_replica: a partition replica's rules (see include/kq/replica.h for the contract).
 *
 * Pure state machine: no I/O, no clock, no global state. Every event is validated completely
 * before any state changes, so a rejected event leaves the replica as it was.
 *
 * Ownership: struct kq_replica owns its epoch cache, its parked acks=all produces and the
 * completion buffer that kq_replica_update.completions points into (all heap, grown with
 * realloc before any state change of the step that needs them).
 */
#include "kq/replica.h"
#include "kq/error.h"
#include "kq/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IDS KQ_REPLICA_MAX_REPLICAS

typedef struct follower_state {
    int32_t id;
    int64_t leo;                   /* -1 unknown */
    int64_t last_fetch_ms;         /* -1 never */
    int64_t last_caught_up_ms;     /* -1 never */
    int64_t last_fetch_leader_leo; /* leader LEO at the previous fetch, -1 none */
    int64_t broker_epoch;          /* from its last Fetch, -1 unknown */
} follower_state;

typedef struct broker_slot {
    bool known;
    kq_replica_broker b;
} broker_slot;

typedef struct parked_produce {
    uint64_t token;
    int64_t base;
    int64_t end; /* exclusive */
    uint64_t deadline_ms;
} parked_produce;

typedef enum alter_state {
    ALTER_IDLE = 0,
    ALTER_SENT,          /* waiting for the answer to alter_id */
    ALTER_RETRY,         /* resend at alter_retry_at */
    ALTER_WAIT_METADATA, /* stay pending until new metadata */
} alter_state;

struct kq_replica {
    kq_replica_config cfg;
    bool started;
    uint64_t now;

    kq_replica_role role;
    int32_t leader_id;
    int32_t leader_epoch;
    int32_t partition_epoch;
    int32_t min_isr;
    /* A shrink the controller answered at this partition epoch: the HW does not move until the
     * metadata carrying it arrives (-1: none). The controller decided the removed replicas' ELR
     * with the min.insync.replicas it had; by then this replica has applied every config
     * committed before, so it freezes the HW by the same minimum. */
    int32_t hw_hold_epoch;

    int32_t replicas[MAX_IDS];
    broker_slot brokers[MAX_IDS]; /* aligned with replicas */
    int n_replicas;
    int32_t isr[MAX_IDS]; /* committed (leader only; empty on a follower) */
    int n_isr;

    kq_replica_pending pending;
    int32_t sent_isr[MAX_IDS];
    int n_sent_isr;
    int32_t maximal[MAX_IDS];
    int n_maximal;
    alter_state alter;
    uint64_t alter_id;
    uint64_t alter_retry_at;

    int64_t log_start;
    int64_t leo;
    int64_t durable;
    int64_t hw;

    kq_epoch_cache epochs; /* kq/epoch_cache.h */

    follower_state fol[MAX_IDS];
    int n_fol;
    uint64_t next_isr_check;

    parked_produce *parked;
    size_t n_parked;
    size_t cap_parked;
    kq_replica_completion *done; /* capacity cap_parked + 1 */
    size_t n_done;

    kq_replica_update *u; /* the current step's update */
};

const char *kq_replica_role_name(kq_replica_role role)
{
    switch (role) {
    case KQ_REPLICA_LEADER:
        return "leader";
    case KQ_REPLICA_FOLLOWER:
        return "follower";
    case KQ_REPLICA_NONE:
    default:
        return "none";
    }
}

void kq_replica_config_defaults(kq_replica_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->node_id = KQ_REPLICA_NO_ID;
    cfg->replica_lag_time_max_ms = 30000;
    cfg->min_insync_replicas = 1;
    cfg->request_timeout_ms = 30000;
    cfg->alter_retry_ms = 50;
}

/* ---- small helpers ---------------------------------------------------------------------- */

static bool ids_contain(const int32_t *ids, int n, int32_t id)
{
    for (int i = 0; i < n; i++) {
        if (ids[i] == id) {
            return true;
        }
    }
    return false;
}

static void ids_format(char *buf, size_t len, const int32_t *ids, int n)
{
    size_t off = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && off < len; i++) {
        int w = snprintf(buf + off, len - off, "%s%d", i ? "," : "", (int)ids[i]);
        if (w < 0) {
            break;
        }
        off += (size_t)w;
    }
}

__attribute__((format(printf, 2, 3))) static void logline(kq_replica *r, const char *fmt, ...)
{
    kq_replica_update *u = r->u;
    char msg[KQ_REPLICA_LOG_LEN - 64];
    va_list ap;

    if (u->n_log >= KQ_REPLICA_MAX_LOG) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (snprintf(u->log[u->n_log], KQ_REPLICA_LOG_LEN, "[Partition %s-%d broker=%d] %s",
                 r->cfg.topic, (int)r->cfg.partition, (int)r->cfg.node_id,
                 msg) >= KQ_REPLICA_LOG_LEN) {
        memcpy(u->log[u->n_log] + KQ_REPLICA_LOG_LEN - 4, "...", 4); /* cut, and say so */
    }
    u->n_log++;
}

__attribute__((format(printf, 2, 3))) static int reject(kq_replica *r, const char *fmt, ...)
{
    kq_replica_update *u = r->u;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(u->reason, sizeof(u->reason), fmt, ap);
    va_end(ap);
    return KQ_ERR_INVALID_REQUEST;
}

static int eff_min_isr(const kq_replica *r)
{
    return kq_min_isr_effective(r->min_isr, r->n_replicas);
}

static int replica_slot(const kq_replica *r, int32_t id)
{
    for (int i = 0; i < r->n_replicas; i++) {
        if (r->replicas[i] == id) {
            return i;
        }
    }
    return -1;
}

static follower_state *fol_find(kq_replica *r, int32_t id)
{
    for (int i = 0; i < r->n_fol; i++) {
        if (r->fol[i].id == id) {
            return &r->fol[i];
        }
    }
    return NULL;
}

static uint64_t isr_check_period(const kq_replica *r)
{
    uint64_t p = r->cfg.replica_lag_time_max_ms / 2;

    return p ? p : 1;
}

static void set_hw(kq_replica *r, int64_t hw)
{
    if (hw != r->hw) {
        r->hw = hw;
        r->u->hw_changed = true;
    }
}

/* ---- epoch cache (kq/epoch_cache.h, with this core's bound and log end) ---------------- */

static int epochs_reserve(kq_replica *r, size_t extra)
{
    return kq_epoch_cache_reserve(&r->epochs, extra, KQ_REPLICA_MAX_EPOCHS);
}

/* Largest cached epoch <= epoch, and its end (start of the next cached epoch, or the LEO). */
static bool end_offset_for(const kq_replica *r, int32_t epoch, int32_t *out_epoch, int64_t *out_end)
{
    return kq_epoch_cache_end_offset_for(&r->epochs, epoch, r->leo, out_epoch, out_end);
}

/* Epoch of the last record in the log (cached epochs that start at the LEO hold no record). */
static int32_t last_record_epoch(const kq_replica *r)
{
    return kq_epoch_cache_last_epoch(&r->epochs, r->leo);
}

/* Leader: assign `epoch` starting at the LEO (capacity reserved by the caller). */
static void epochs_assign_leader(kq_replica *r, int32_t epoch)
{
    if (kq_epoch_cache_assign(&r->epochs, epoch, r->leo))
        r->u->epochs_changed = true;
}

/* ---- produce completions ---------------------------------------------------------------- */

static int parked_reserve(kq_replica *r)
{
    if (r->n_parked + 1 <= r->cap_parked) {
        return 0;
    }
    if (r->n_parked >= KQ_REPLICA_MAX_PARKED) {
        return KQ_ERR_FULL;
    }
    size_t cap = r->cap_parked ? r->cap_parked * 2 : 16;
    if (cap > KQ_REPLICA_MAX_PARKED) {
        cap = KQ_REPLICA_MAX_PARKED;
    }
    parked_produce *p = realloc(r->parked, cap * sizeof(*p));
    if (!p) {
        return KQ_ERR_NOMEM;
    }
    r->parked = p;
    kq_replica_completion *d = realloc(r->done, (cap + 1) * sizeof(*d));
    if (!d) {
        return KQ_ERR_NOMEM; /* parked grew, done did not: cap_parked unchanged, retry later */
    }
    r->done = d;
    r->cap_parked = cap;
    return 0;
}

static void complete_at(kq_replica *r, size_t i, int error)
{
    kq_replica_completion *c = &r->done[r->n_done++];

    c->token = r->parked[i].token;
    c->error = error;
    c->base_offset = r->parked[i].base;
    r->parked[i] = r->parked[--r->n_parked];
    r->u->completions = r->done;
    r->u->n_completions = r->n_done;
}

/* Complete what the HW now covers (4.5); while the ISR is below the min, the HW is frozen and
 * nothing more can be committed: finish the waiting ones with AFTER_APPEND (header). */
static void complete_parked(kq_replica *r)
{
    int min = eff_min_isr(r);

    for (size_t i = 0; i < r->n_parked;) {
        if (r->hw >= r->parked[i].end) {
            complete_at(r, i,
                        min <= r->n_maximal ? KQ_OK : KQ_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND);
        } else if (r->n_isr < min) {
            complete_at(r, i, KQ_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND);
        } else {
            i++;
        }
    }
}

static void fail_all_parked(kq_replica *r, int error)
{
    while (r->n_parked > 0) {
        complete_at(r, r->n_parked - 1, error);
    }
}

static void expire_parked(kq_replica *r)
{
    for (size_t i = 0; i < r->n_parked;) {
        if (r->parked[i].deadline_ms <= r->now) {
            complete_at(r, i, KQ_ERR_REQUEST_TIMED_OUT);
        } else {
            i++;
        }
    }
}

/* ---- leader rules ----------------------------------------------------------------------- */

static bool is_eligible(const kq_replica *r, const follower_state *f)
{
    int s = replica_slot(r, f->id);

    if (s < 0 || !r->brokers[s].known) {
        return false;
    }
    const kq_replica_broker *b = &r->brokers[s].b;
    if (b->fenced || b->in_controlled_shutdown) {
        return false;
    }
    return f->broker_epoch < 0 || f->broker_epoch == b->broker_epoch;
}

/* 4.1: leader LEO == follower LEO, or caught up within the lag time. */
static bool is_caught_up(const kq_replica *r, const follower_state *f)
{
    if (f->leo >= 0 && f->leo == r->leo) {
        return true;
    }
    return f->last_caught_up_ms >= 0 &&
           r->now - (uint64_t)f->last_caught_up_ms <= r->cfg.replica_lag_time_max_ms;
}

/* 4.4: HW = min LEO over the leader (durable) and the maximal ISR plus caught-up eligible
 * followers; frozen below the min ISR; never decreasing. */
static void maybe_advance_hw(kq_replica *r)
{
    if (r->role != KQ_REPLICA_LEADER || r->n_isr < eff_min_isr(r) || r->hw_hold_epoch >= 0) {
        return;
    }
    int64_t hw = r->durable;
    for (int i = 0; i < r->n_fol; i++) {
        const follower_state *f = &r->fol[i];
        bool counts = ids_contain(r->maximal, r->n_maximal, f->id) ||
                      (is_caught_up(r, f) && is_eligible(r, f));
        if (counts && f->leo < hw) {
            hw = f->leo; /* -1 (unknown) holds the HW where it is */
        }
    }
    if (hw > r->hw) {
        set_hw(r, hw);
    }
}

static void recheck_hw(kq_replica *r)
{
    maybe_advance_hw(r);
    complete_parked(r);
}

static void alter_emit(kq_replica *r)
{
    kq_replica_alter_request *a = &r->u->alter;

    r->alter_id++;
    r->alter = ALTER_SENT;
    r->u->send_alter = true;
    memset(a, 0, sizeof(*a));
    a->request_id = r->alter_id;
    a->leader_epoch = r->leader_epoch;
    a->partition_epoch = r->partition_epoch;
    a->n_new_isr = r->n_sent_isr;
    for (int i = 0; i < r->n_sent_isr; i++) {
        const follower_state *f = fol_find(r, r->sent_isr[i]);
        a->new_isr[i] = r->sent_isr[i];
        a->new_isr_broker_epochs[i] = f ? f->broker_epoch : -1;
    }
}

static void alter_submit(kq_replica *r, kq_replica_pending kind, const int32_t *isr, int n)
{
    if (kind == KQ_REPLICA_PENDING_EXPAND)
        r->u->isr_expands++;
    else
        r->u->isr_shrinks++;
    r->pending = kind;
    memcpy(r->sent_isr, isr, (size_t)n * sizeof(*isr));
    r->n_sent_isr = n;
    if (kind == KQ_REPLICA_PENDING_EXPAND) {
        memcpy(r->maximal, isr, (size_t)n * sizeof(*isr));
        r->n_maximal = n;
    } else {
        memcpy(r->maximal, r->isr, (size_t)r->n_isr * sizeof(*isr));
        r->n_maximal = r->n_isr;
    }
    alter_emit(r);
}

static void clear_pending(kq_replica *r)
{
    r->pending = KQ_REPLICA_PENDING_NONE;
    r->alter = ALTER_IDLE;
    r->n_sent_isr = 0;
    memcpy(r->maximal, r->isr, (size_t)r->n_isr * sizeof(r->isr[0]));
    r->n_maximal = r->n_isr;
}

/* 4.2 */
static void maybe_expand(kq_replica *r, const follower_state *f)
{
    int64_t epoch_start = 0;
    bool found = false;

    if (r->pending != KQ_REPLICA_PENDING_NONE || ids_contain(r->isr, r->n_isr, f->id) ||
        !is_eligible(r, f) || f->leo < r->hw) {
        return;
    }
    for (size_t i = 0; i < r->epochs.n; i++) {
        if (r->epochs.e[i].epoch == r->leader_epoch) {
            epoch_start = r->epochs.e[i].start_offset;
            found = true;
        }
    }
    if (!found) {
        return;
    }
    if (f->leo < epoch_start || r->n_isr >= MAX_IDS) {
        return;
    }
    int32_t next[MAX_IDS];
    char from[96], to[96];
    memcpy(next, r->isr, (size_t)r->n_isr * sizeof(next[0]));
    next[r->n_isr] = f->id;
    ids_format(from, sizeof(from), r->isr, r->n_isr);
    ids_format(to, sizeof(to), next, r->n_isr + 1);
    logline(r, "Expanding ISR from %s to %s", from, to);
    alter_submit(r, KQ_REPLICA_PENDING_EXPAND, next, r->n_isr + 1);
}

/* 4.1: the isr-expiration task. */
static void maybe_shrink(kq_replica *r)
{
    int32_t next[MAX_IDS];
    int n = 0;
    char oos[KQ_REPLICA_LOG_LEN / 2];
    size_t off = 0;

    if (r->pending != KQ_REPLICA_PENDING_NONE) {
        return;
    }
    oos[0] = '\0';
    for (int i = 0; i < r->n_isr; i++) {
        int32_t id = r->isr[i];
        const follower_state *f = id == r->cfg.node_id ? NULL : fol_find(r, id);
        if (id == r->cfg.node_id || (f && is_caught_up(r, f))) {
            next[n++] = id;
            continue;
        }
        if (off < sizeof(oos)) {
            int w = snprintf(oos + off, sizeof(oos) - off,
                             "%s(brokerId: %d, endOffset: %lld, lastCaughtUpTimeMs: %lld)",
                             off ? ", " : "", (int)id, f ? (long long)f->leo : -1LL,
                             f ? (long long)f->last_caught_up_ms : -1LL);
            off += w > 0 ? (size_t)w : 0;
        }
    }
    if (n == r->n_isr) {
        return;
    }
    char from[96], to[96];
    ids_format(from, sizeof(from), r->isr, r->n_isr);
    ids_format(to, sizeof(to), next, n);
    logline(r,
            "Shrinking ISR from %s to %s. Leader: (highWatermark: %lld, endOffset: %lld). "
            "Out of sync replicas: %s.",
            from, to, (long long)r->hw, (long long)r->leo, oos);
    alter_submit(r, KQ_REPLICA_PENDING_SHRINK, next, n);
}

static void reset_follower(follower_state *f, int32_t id)
{
    f->id = id;
    f->leo = -1;
    f->last_fetch_ms = -1;
    f->last_caught_up_ms = -1;
    f->last_fetch_leader_leo = -1;
    f->broker_epoch = -1;
}

/* ---- events ----------------------------------------------------------------------------- */

static int on_start(kq_replica *r, const kq_replica_start *s)
{
    if (r->started) {
        return reject(r, "START given twice");
    }
    if (s->log_start_offset < 0 || s->log_end_offset < s->log_start_offset) {
        return reject(r, "START: log start %lld / end %lld out of order",
                      (long long)s->log_start_offset, (long long)s->log_end_offset);
    }
    if (s->n_epochs > 0 && !s->epochs) {
        return reject(r, "START: %zu epochs but no array", s->n_epochs);
    }
    if (s->n_epochs > KQ_REPLICA_MAX_EPOCHS) {
        return reject(r, "START: %zu epochs, limit %d", s->n_epochs, KQ_REPLICA_MAX_EPOCHS);
    }
    if (!kq_epoch_entries_valid(s->epochs, s->n_epochs) ||
        (s->n_epochs > 0 && s->epochs[s->n_epochs - 1].start_offset > s->log_end_offset)) {
        return reject(r,
                      "START: the %zu epoch entries are not ascending or lie past the log end %lld",
                      s->n_epochs, (long long)s->log_end_offset);
    }
    int rc = kq_epoch_cache_load(&r->epochs, s->epochs, s->n_epochs, 1);
    if (rc) {
        return rc;
    }
    r->log_start = s->log_start_offset;
    r->leo = s->log_end_offset;
    r->durable = s->log_end_offset;
    r->hw = s->high_watermark;
    if (r->hw > r->leo) {
        r->hw = r->leo;
    }
    if (r->hw < r->log_start) {
        r->hw = r->log_start;
    }
    r->started = true;
    r->u->hw_changed = true;
    return 0;
}

static int check_ids(kq_replica *r, const char *what, const int32_t *ids, int n, int max)
{
    if (n < 0 || n > max || (n > 0 && !ids)) {
        return reject(r, "DELTA: %s count %d out of range 0..%d", what, n, max);
    }
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0) {
            return reject(r, "DELTA: %s contains negative broker id %d", what, (int)ids[i]);
        }
        if (ids_contain(ids, i, ids[i])) {
            return reject(r, "DELTA: %s lists broker %d twice", what, (int)ids[i]);
        }
    }
    return 0;
}

static int check_brokers(kq_replica *r, const kq_replica_broker *b, int n)
{
    if (n < 0 || n > 1024 || (n > 0 && !b)) {
        return reject(r, "BROKERS: count %d out of range 0..1024", n);
    }
    return 0;
}

static void apply_brokers(kq_replica *r, const kq_replica_broker *b, int n)
{
    for (int i = 0; i < n; i++) {
        int s = replica_slot(r, b[i].id);
        if (s >= 0) {
            r->brokers[s].known = true;
            r->brokers[s].b = b[i];
        }
    }
}

static void become_none(kq_replica *r)
{
    if (r->role == KQ_REPLICA_NONE) {
        return;
    }
    fail_all_parked(r, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    r->role = KQ_REPLICA_NONE;
    r->hw_hold_epoch = -1;
    r->n_isr = 0;
    r->n_fol = 0;
    clear_pending(r);
    r->u->role_changed = true;
    logline(r, "No longer a replica: stopped");
}

static int on_delta(kq_replica *r, const kq_replica_delta *d)
{
    int rc;

    if ((rc = check_ids(r, "replicas", d->replicas, d->n_replicas, MAX_IDS)) ||
        (rc = check_ids(r, "ISR", d->isr, d->n_isr, MAX_IDS)) ||
        (rc = check_brokers(r, d->brokers, d->n_brokers))) {
        return rc;
    }
    if (d->leader_epoch < 0 || d->partition_epoch < 0 || d->min_insync_replicas < 0) {
        return reject(r, "DELTA: negative leader epoch %d, partition epoch %d or min ISR %d",
                      (int)d->leader_epoch, (int)d->partition_epoch, (int)d->min_insync_replicas);
    }
    for (int i = 0; i < d->n_isr; i++) {
        if (!ids_contain(d->replicas, d->n_replicas, d->isr[i])) {
            return reject(r, "DELTA: ISR member %d is not a replica", (int)d->isr[i]);
        }
    }
    if (d->leader_id >= 0 && !ids_contain(d->replicas, d->n_replicas, d->leader_id)) {
        return reject(r, "DELTA: leader %d is not a replica", (int)d->leader_id);
    }
    bool was_member = r->role != KQ_REPLICA_NONE;
    /* min.insync.replicas is a config, not partition state: in force even when the partition
     * state below is older than what this replica knows (an AlterPartition answer came first) */
    if (d->min_insync_replicas > 0 && d->min_insync_replicas != r->min_isr) {
        logline(r, "min.insync.replicas changed from %d to %d", (int)r->min_isr,
                (int)d->min_insync_replicas);
        r->min_isr = d->min_insync_replicas;
    }
    if (was_member && d->partition_epoch < r->partition_epoch) {
        if (r->role == KQ_REPLICA_LEADER) {
            recheck_hw(r); /* a lower minimum may unfreeze the HW */
        }
        logline(r,
                "Skipped the metadata change to leader %d epoch %d since its partition epoch "
                "%d is older than the current %d",
                (int)d->leader_id, (int)d->leader_epoch, (int)d->partition_epoch,
                (int)r->partition_epoch);
        return 0;
    }
    bool leading = d->leader_id == r->cfg.node_id;
    bool new_epoch = !was_member || d->leader_epoch > r->leader_epoch ||
                     (leading && r->role != KQ_REPLICA_LEADER);
    if (leading && new_epoch && (rc = epochs_reserve(r, 1))) {
        return rc;
    }

    /* assignment, keeping what is known of brokers that stay */
    broker_slot slots[MAX_IDS];
    for (int i = 0; i < d->n_replicas; i++) {
        int s = replica_slot(r, d->replicas[i]);
        slots[i] = s >= 0 ? r->brokers[s] : (broker_slot){0};
    }
    memcpy(r->replicas, d->replicas, (size_t)d->n_replicas * sizeof(d->replicas[0]));
    memcpy(r->brokers, slots, (size_t)d->n_replicas * sizeof(slots[0]));
    r->n_replicas = d->n_replicas;
    apply_brokers(r, d->brokers, d->n_brokers);

    if (!ids_contain(d->replicas, d->n_replicas, r->cfg.node_id)) {
        r->partition_epoch = d->partition_epoch;
        r->leader_epoch = d->leader_epoch;
        r->leader_id = d->leader_id;
        become_none(r);
        return 0;
    }

    kq_replica_role old_role = r->role;
    int32_t old_leader = r->leader_id;
    int32_t old_partition_epoch = r->partition_epoch;
    r->partition_epoch = d->partition_epoch;
    r->leader_id = d->leader_id;
    if (d->leader_epoch > r->leader_epoch || !was_member) {
        r->leader_epoch = d->leader_epoch;
    }
    if (r->hw_hold_epoch >= 0 && (d->partition_epoch >= r->hw_hold_epoch || new_epoch)) {
        r->hw_hold_epoch = -1; /* the metadata of the shrink (or newer) is here */
    }

    if (leading) {
        memcpy(r->isr, d->isr, (size_t)d->n_isr * sizeof(d->isr[0]));
        r->n_isr = d->n_isr;
        /* The same partition epoch again: the pending AlterPartition was sent with it and may
         * still be accepted, so its maximal ISR keeps bounding the HW (4.3). */
        if (new_epoch || old_role != KQ_REPLICA_LEADER ||
            d->partition_epoch != old_partition_epoch) {
            clear_pending(r);
        }
        follower_state fol[MAX_IDS];
        int n = 0;
        for (int i = 0; i < d->n_replicas; i++) {
            int32_t id = d->replicas[i];
            if (id == r->cfg.node_id) {
                continue;
            }
            follower_state *old = old_role == KQ_REPLICA_LEADER ? fol_find(r, id) : NULL;
            if (old && !new_epoch) {
                fol[n] = *old;
            } else {
                reset_follower(&fol[n], id);
                if (ids_contain(d->isr, d->n_isr, id)) {
                    fol[n].last_caught_up_ms = (int64_t)r->now;
                }
            }
            n++;
        }
        memcpy(r->fol, fol, (size_t)n * sizeof(fol[0]));
        r->n_fol = n;
        if (new_epoch) {
            epochs_assign_leader(r, d->leader_epoch);
            r->next_isr_check = r->now + isr_check_period(r);
        }
        if (old_role != KQ_REPLICA_LEADER) {
            r->role = KQ_REPLICA_LEADER;
            r->u->role_changed = true;
        }
        char isr[96];
        ids_format(isr, sizeof(isr), r->isr, r->n_isr);
        if (new_epoch) {
            logline(r,
                    "Leader at epoch %d, partition epoch %d, ISR %s, epoch start offset %lld, "
                    "high watermark %lld",
                    (int)r->leader_epoch, (int)r->partition_epoch, isr, (long long)r->leo,
                    (long long)r->hw);
        }
        recheck_hw(r);
        return 0;
    }

    /* follower (leader_id may be -1) */
    if (old_role == KQ_REPLICA_LEADER) {
        fail_all_parked(r, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    }
    r->n_isr = 0;
    r->n_fol = 0;
    clear_pending(r);
    if (old_role != KQ_REPLICA_FOLLOWER) {
        r->role = KQ_REPLICA_FOLLOWER;
        r->u->role_changed = true;
    }
    if (r->leader_id >= 0 &&
        (new_epoch || old_role != KQ_REPLICA_FOLLOWER || old_leader != r->leader_id)) {
        r->u->restart_fetcher = true;
        logline(r, "Follower of leader %d at epoch %d, fetching from offset %lld",
                (int)r->leader_id, (int)r->leader_epoch, (long long)r->leo);
    }
    return 0;
}

static int on_brokers(kq_replica *r, const kq_replica_broker *b, int n)
{
    int rc = check_brokers(r, b, n);

    if (rc) {
        return rc;
    }
    apply_brokers(r, b, n);
    recheck_hw(r);
    return 0;
}

static int on_append(kq_replica *r, const kq_replica_append *a)
{
    kq_replica_update *u = r->u;
    int rc;

    u->has_produce = true;
    u->produce.token = a->token;
    u->produce.base_offset = -1;
    if (r->role != KQ_REPLICA_LEADER) {
        u->produce.error = KQ_ERR_NOT_LEADER_OR_FOLLOWER;
        return 0;
    }
    if (a->acks != -1 && a->acks != 0 && a->acks != 1) {
        u->produce.error = KQ_ERR_INVALID_REQUIRED_ACKS;
        return 0;
    }
    if (a->count <= 0 || r->leo > INT64_MAX - a->count) {
        u->produce.error = KQ_ERR_INVALID_REQUEST;
        return 0;
    }
    if (a->acks == -1) {
        if (r->n_isr < eff_min_isr(r)) {
            u->produce.error = KQ_ERR_NOT_ENOUGH_REPLICAS; /* nothing written */
            return 0;
        }
        rc = parked_reserve(r);
        if (rc == KQ_ERR_FULL) {
            u->produce.error = KQ_ERR_REQUEST_TIMED_OUT; /* too many waiting: refuse unwritten */
            return 0;
        }
        if (rc) {
            u->has_produce = false;
            return rc;
        }
    }
    kq_replica_batch *b = &u->append[u->n_append++];
    b->base_offset = r->leo;
    b->epoch = r->leader_epoch;
    b->count = a->count;
    r->leo += a->count;
    if (a->acks == -1) {
        parked_produce *p = &r->parked[r->n_parked++];
        uint32_t t = a->timeout_ms ? a->timeout_ms : r->cfg.request_timeout_ms;
        p->token = a->token;
        p->base = b->base_offset;
        p->end = r->leo;
        p->deadline_ms = r->now + t;
        u->has_produce = false;
        u->produce_parked = true;
        return 0;
    }
    u->produce.error = KQ_OK;
    u->produce.base_offset = b->base_offset;
    return 0;
}

static int on_persisted(kq_replica *r, int64_t end)
{
    if (end < 0 || end > r->leo) {
        return reject(r, "PERSISTED: offset %lld beyond the log end %lld", (long long)end,
                      (long long)r->leo);
    }
    if (end > r->durable) {
        r->durable = end;
        recheck_hw(r);
    }
    return 0;
}

static int on_follower_fetch(kq_replica *r, const kq_replica_follower_fetch *q)
{
    kq_replica_fetch_answer *a = &r->u->fetch;
    int32_t e;
    int64_t end;

    r->u->has_fetch = true;
    a->leader_epoch = r->leader_epoch;
    a->high_watermark = r->hw;
    a->log_start_offset = r->log_start;
    a->records_from = a->records_to = q->fetch_offset;
    if (r->role != KQ_REPLICA_LEADER) {
        a->error = KQ_ERR_NOT_LEADER_OR_FOLLOWER;
        return 0;
    }
    if (q->fetch_offset < 0 || q->last_fetched_epoch < -1) {
        a->error = KQ_ERR_INVALID_REQUEST;
        return 0;
    }
    if (q->current_leader_epoch >= 0 && q->current_leader_epoch != r->leader_epoch) {
        a->error = q->current_leader_epoch < r->leader_epoch ? KQ_ERR_FENCED_LEADER_EPOCH
                                                             : KQ_ERR_UNKNOWN_LEADER_EPOCH;
        return 0;
    }
    follower_state *f = q->replica_id == r->cfg.node_id ? NULL : fol_find(r, q->replica_id);
    int s = replica_slot(r, q->replica_id);
    if (!f || s < 0) {
        a->error = KQ_ERR_NOT_LEADER_OR_FOLLOWER; /* not a replica of this partition */
        return 0;
    }
    if (q->broker_epoch >= 0 && r->brokers[s].known &&
        q->broker_epoch < r->brokers[s].b.broker_epoch) {
        a->error = KQ_ERR_NOT_LEADER_OR_FOLLOWER; /* stale broker epoch (4.2) */
        return 0;
    }
    if (q->last_fetched_epoch >= 0) {
        if (!end_offset_for(r, q->last_fetched_epoch, &e, &end)) {
            a->diverging = true;
            a->diverging_epoch = -1;
            a->diverging_end_offset = r->log_start;
            return 0;
        }
        if (e != q->last_fetched_epoch || end < q->fetch_offset) {
            a->diverging = true; /* follower state is not updated on a diverging fetch */
            a->diverging_epoch = e;
            a->diverging_end_offset = end;
            return 0;
        }
    }
    if (q->fetch_offset < r->log_start || q->fetch_offset > r->leo) {
        a->error = KQ_ERR_OFFSET_OUT_OF_RANGE;
        return 0;
    }
    /* 4.1 follower state */
    if (q->fetch_offset >= r->leo) {
        if ((int64_t)r->now > f->last_caught_up_ms) {
            f->last_caught_up_ms = (int64_t)r->now;
        }
    } else if (f->last_fetch_leader_leo >= 0 && q->fetch_offset >= f->last_fetch_leader_leo) {
        if (f->last_fetch_ms > f->last_caught_up_ms) {
            f->last_caught_up_ms = f->last_fetch_ms;
        }
    }
    f->last_fetch_leader_leo = r->leo;
    f->last_fetch_ms = (int64_t)r->now;
    f->leo = q->fetch_offset;
    f->broker_epoch = q->broker_epoch;
    maybe_expand(r, f);
    recheck_hw(r);
    a->high_watermark = r->hw;
    a->records_to = r->leo;
    return 0;
}

static int follower_truncate(kq_replica *r, int64_t target, const char *why)
{
    if (target < r->log_start) {
        target = r->log_start;
    }
    bool dropped = kq_epoch_cache_truncate_from(&r->epochs, target);
    if (dropped) {
        r->u->epochs_changed = true;
    }
    if (target >= r->leo) {
        return 0;
    }
    r->u->truncate_to = target;
    logline(r, "Truncating to offset %lld (%s), log end was %lld", (long long)target, why,
            (long long)r->leo);
    r->leo = target;
    if (r->durable > target) {
        r->durable = target;
    }
    if (r->hw > target) {
        set_hw(r, target);
    }
    return 0;
}

static int on_fetch_response(kq_replica *r, const kq_replica_fetch_response *p)
{
    if (r->role != KQ_REPLICA_FOLLOWER || r->leader_id < 0 ||
        (p->leader_epoch >= 0 && p->leader_epoch != r->leader_epoch) || p->fetch_offset != r->leo) {
        return 0; /* stale: for another leader, epoch or position */
    }
    if (p->error) {
        if (p->error == KQ_ERR_OFFSET_OUT_OF_RANGE && p->log_start_offset > r->leo) {
            /* the leader no longer has our position: start over at its log start */
            r->u->reset_log_start = p->log_start_offset;
            logline(r, "Log end %lld is below the leader's log start %lld: restarting the log",
                    (long long)r->leo, (long long)p->log_start_offset);
            r->log_start = r->leo = r->durable = p->log_start_offset;
            r->epochs.n = 0;
            r->u->epochs_changed = true;
            set_hw(r, p->log_start_offset);
        }
        return 0;
    }
    if (p->diverging) {
        if (p->diverging_end_offset < 0 || p->diverging_epoch < -1) {
            return reject(r, "FETCH_RESPONSE: diverging epoch %d end %lld is invalid",
                          (int)p->diverging_epoch, (long long)p->diverging_end_offset);
        }
        int64_t target = p->diverging_end_offset;
        int32_t e;
        int64_t local_end;
        char why[96];
        if (p->diverging_epoch >= 0) {
            if (end_offset_for(r, p->diverging_epoch, &e, &local_end)) {
                /* KIP-279 (Kafka's getOffsetTruncationState): with the leader's epoch, to the
                 * smaller of the two ends; without it (e is smaller), to our own end of e, and
                 * ask again: the leader's end need not be a batch boundary of our log then,
                 * and the next answer is about e itself. */
                if (e != p->diverging_epoch || local_end < target) {
                    target = local_end;
                }
            } else {
                local_end = r->epochs.n ? r->epochs.e[0].start_offset : r->log_start;
                if (local_end < target) {
                    target = local_end;
                }
            }
        }
        if (target > r->leo) {
            target = r->leo;
        }
        snprintf(why, sizeof(why), "leader %d: epoch %d ends at %lld", (int)r->leader_id,
                 (int)p->diverging_epoch, (long long)p->diverging_end_offset);
        return follower_truncate(r, target, why);
    }

    /* validate every batch first */
    if (p->n_batches > KQ_REPLICA_MAX_BATCHES || (p->n_batches && !p->batches)) {
        return reject(r, "FETCH_RESPONSE: %zu batches, limit %d", p->n_batches,
                      KQ_REPLICA_MAX_BATCHES);
    }
    int64_t next = r->leo;
    int32_t last = last_record_epoch(r);
    size_t new_epochs = 0;
    /* Cached epochs above `last` start at or after the LEO and hold no record: they are
     * dropped when the first batch is written. */
    for (size_t i = 0; i < p->n_batches; i++) {
        const kq_replica_batch *b = &p->batches[i];
        if (b->base_offset != next || b->count <= 0 || next > INT64_MAX - b->count) {
            return reject(r,
                          "FETCH_RESPONSE: batch %zu at %lld (count %d) does not continue "
                          "the log at %lld",
                          i, (long long)b->base_offset, (int)b->count, (long long)next);
        }
        if (b->epoch < 0 || b->epoch < last || b->epoch > r->leader_epoch) {
            return reject(r, "FETCH_RESPONSE: batch %zu epoch %d outside %d..%d", i, (int)b->epoch,
                          (int)last, (int)r->leader_epoch);
        }
        if (b->epoch > last) {
            new_epochs++;
        }
        last = b->epoch;
        next += b->count;
    }
    if (p->high_watermark < -1) {
        return reject(r, "FETCH_RESPONSE: high watermark %lld", (long long)p->high_watermark);
    }
    int rc = epochs_reserve(r, new_epochs);
    if (rc) {
        return rc;
    }
    for (size_t i = 0; i < p->n_batches; i++) {
        const kq_replica_batch *b = &p->batches[i];
        if (kq_epoch_cache_truncate_from(&r->epochs, b->base_offset)) {
            r->u->epochs_changed = true; /* empty epochs of our own past leadership */
        }
        if (kq_epoch_cache_assign(&r->epochs, b->epoch, b->base_offset)) {
            r->u->epochs_changed = true;
        }
        r->u->append[r->u->n_append++] = *b;
        r->leo = b->base_offset + b->count;
    }
    if (p->high_watermark >= 0) {
        int64_t hw = p->high_watermark < r->leo ? p->high_watermark : r->leo;
        if (hw < r->log_start) {
            hw = r->log_start;
        }
        set_hw(r, hw);
    }
    return 0;
}

static int on_alter_response(kq_replica *r, const kq_replica_alter_response *p)
{
    char isr[96];

    if (r->role != KQ_REPLICA_LEADER || r->pending == KQ_REPLICA_PENDING_NONE ||
        r->alter != ALTER_SENT || p->request_id != r->alter_id) {
        return 0; /* the state changed meanwhile: ignored (4.3) */
    }
    if (p->error == KQ_OK) {
        if (p->n_isr <= 0 || p->n_isr > MAX_IDS || !p->isr) {
            return reject(r, "ALTER_RESPONSE: ISR count %d out of range", p->n_isr);
        }
        for (int i = 0; i < p->n_isr; i++) {
            if (!ids_contain(r->replicas, r->n_replicas, p->isr[i]) ||
                ids_contain(p->isr, i, p->isr[i])) {
                return reject(r, "ALTER_RESPONSE: ISR member %d is not a replica or repeated",
                              (int)p->isr[i]);
            }
        }
        if (p->leader_epoch != r->leader_epoch || p->partition_epoch < r->partition_epoch) {
            logline(r,
                    "Ignoring AlterPartition answer with leader epoch %d, partition epoch %d "
                    "(local %d, %d); waiting for metadata",
                    (int)p->leader_epoch, (int)p->partition_epoch, (int)r->leader_epoch,
                    (int)r->partition_epoch);
            r->alter = ALTER_WAIT_METADATA;
            return 0;
        }
        memcpy(r->isr, p->isr, (size_t)p->n_isr * sizeof(p->isr[0]));
        r->n_isr = p->n_isr;
        r->partition_epoch = p->partition_epoch;
        if (r->pending == KQ_REPLICA_PENDING_SHRINK) {
            r->hw_hold_epoch = p->partition_epoch;
        }
        clear_pending(r);
        ids_format(isr, sizeof(isr), r->isr, r->n_isr);
        logline(r, "ISR updated to %s and version updated to %d", isr, (int)r->partition_epoch);
        recheck_hw(r);
        return 0;
    }
    ids_format(isr, sizeof(isr), r->sent_isr, r->n_sent_isr);
    switch (p->error) {
    case KQ_ERR_INELIGIBLE_REPLICA:
    case KQ_ERR_OPERATION_NOT_ATTEMPTED:
        logline(r, "Failed to alter ISR to %s: %s; back to the committed ISR", isr,
                kq_err_name(p->error));
        clear_pending(r);
        recheck_hw(r);
        break;
    case KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION:
    case KQ_ERR_UNKNOWN_TOPIC_ID:
    case KQ_ERR_FENCED_LEADER_EPOCH:
    case KQ_ERR_INVALID_UPDATE_VERSION:
    case KQ_ERR_INVALID_REQUEST:
    case KQ_ERR_NEW_LEADER_ELECTED:
        logline(r, "Failed to alter ISR to %s: %s; waiting for new metadata", isr,
                kq_err_name(p->error));
        r->alter = ALTER_WAIT_METADATA;
        break;
    default:
        logline(r, "Failed to alter ISR to %s: %s; retrying", isr, kq_err_name(p->error));
        r->alter = ALTER_RETRY;
        r->alter_retry_at = r->now + r->cfg.alter_retry_ms;
        break;
    }
    return 0;
}

static void on_tick(kq_replica *r)
{
    if (r->role != KQ_REPLICA_LEADER) {
        return;
    }
    uint64_t period = isr_check_period(r);
    if (r->now >= r->next_isr_check) {
        maybe_shrink(r);
        while (r->next_isr_check <= r->now) {
            r->next_isr_check += period;
        }
    }
    if (r->alter == ALTER_RETRY && r->now >= r->alter_retry_at) {
        alter_emit(r);
    }
    recheck_hw(r);
    expire_parked(r);
}

static uint64_t next_deadline(const kq_replica *r)
{
    uint64_t d = KQ_REPLICA_NO_DEADLINE;

    if (r->role != KQ_REPLICA_LEADER) {
        return d;
    }
    d = r->next_isr_check;
    if (r->alter == ALTER_RETRY && r->alter_retry_at < d) {
        d = r->alter_retry_at;
    }
    for (size_t i = 0; i < r->n_parked; i++) {
        if (r->parked[i].deadline_ms < d) {
            d = r->parked[i].deadline_ms;
        }
    }
    return d;
}

/* ---- public ----------------------------------------------------------------------------- */

kq_replica *kq_replica_new(const kq_replica_config *cfg, char *errbuf, size_t errlen)
{
    kq_replica *r = NULL;
    const char *bad = NULL;

    if (!cfg) {
        bad = "no config";
    } else if (cfg->node_id < 0) {
        bad = "node_id must be >= 0";
    } else if (cfg->replica_lag_time_max_ms == 0) {
        bad = "replica.lag.time.max.ms must be > 0";
    } else if (cfg->min_insync_replicas < 1) {
        bad = "min.insync.replicas must be >= 1";
    } else if (cfg->request_timeout_ms == 0) {
        bad = "request timeout must be > 0";
    } else if (cfg->alter_retry_ms == 0) {
        bad = "AlterPartition retry back-off must be > 0";
    } else if (cfg->partition < 0) {
        bad = "partition must be >= 0";
    } else if (!memchr(cfg->topic, '\0', sizeof(cfg->topic))) {
        bad = "topic name is not terminated";
    }
    if (bad) {
        if (errbuf && errlen) {
            snprintf(errbuf, errlen, "replica config: %s", bad);
        }
        return NULL;
    }
    r = calloc(1, sizeof(*r));
    if (!r) {
        if (errbuf && errlen) {
            snprintf(errbuf, errlen, "replica: out of memory");
        }
        return NULL;
    }
    r->cfg = *cfg;
    r->min_isr = cfg->min_insync_replicas;
    r->hw_hold_epoch = -1;
    r->leader_id = KQ_REPLICA_NO_ID;
    r->leader_epoch = -1;
    r->partition_epoch = -1;
    r->next_isr_check = KQ_REPLICA_NO_DEADLINE;
    return r;
}

void kq_replica_free(kq_replica *r)
{
    if (!r) {
        return;
    }
    kq_epoch_cache_free(&r->epochs);
    free(r->parked);
    free(r->done);
    free(r);
}

int kq_replica_step(kq_replica *r, const kq_replica_event *ev, kq_replica_update *u)
{
    int rc = 0;

    memset(u, 0, offsetof(kq_replica_update, log));
    u->n_log = 0;
    u->reason[0] = '\0';
    u->reset_log_start = -1;
    u->truncate_to = -1;
    r->u = u;
    r->n_done = 0;
    if (!ev) {
        rc = reject(r, "no event");
        goto out;
    }
    if (ev->now_ms > r->now) {
        r->now = ev->now_ms;
    }
    if (!r->started && ev->type != KQ_REPLICA_EV_START) {
        rc = reject(r, "event %d before START", (int)ev->type);
        goto out;
    }
    switch (ev->type) {
    case KQ_REPLICA_EV_START:
        rc = on_start(r, &ev->u.start);
        break;
    case KQ_REPLICA_EV_DELTA:
        rc = on_delta(r, &ev->u.delta);
        break;
    case KQ_REPLICA_EV_BROKERS:
        rc = on_brokers(r, ev->u.brokers.brokers, ev->u.brokers.n_brokers);
        break;
    case KQ_REPLICA_EV_APPEND:
        rc = on_append(r, &ev->u.append);
        break;
    case KQ_REPLICA_EV_PERSISTED:
        rc = on_persisted(r, ev->u.persisted_end);
        break;
    case KQ_REPLICA_EV_FOLLOWER_FETCH:
        rc = on_follower_fetch(r, &ev->u.fetch);
        break;
    case KQ_REPLICA_EV_FETCH_RESPONSE:
        rc = on_fetch_response(r, &ev->u.fetch_resp);
        break;
    case KQ_REPLICA_EV_ALTER_RESPONSE:
        rc = on_alter_response(r, &ev->u.alter_resp);
        break;
    case KQ_REPLICA_EV_TICK:
        on_tick(r);
        break;
    default:
        rc = reject(r, "unknown event type %d", (int)ev->type);
        break;
    }
out:
    u->high_watermark = r->hw;
    u->role = r->role;
    u->leader_id = r->leader_id;
    u->leader_epoch = r->leader_epoch;
    u->next_deadline_ms = next_deadline(r);
    r->u = NULL;
    return rc;
}

void kq_replica_get_status(const kq_replica *r, kq_replica_status *out)
{
    memset(out, 0, sizeof(*out));
    out->role = r->role;
    out->node_id = r->cfg.node_id;
    out->leader_id = r->leader_id;
    out->leader_epoch = r->leader_epoch;
    out->partition_epoch = r->partition_epoch;
    memcpy(out->replicas, r->replicas, sizeof(r->replicas));
    out->n_replicas = r->n_replicas;
    memcpy(out->isr, r->isr, sizeof(r->isr));
    out->n_isr = r->n_isr;
    memcpy(out->maximal_isr, r->maximal, sizeof(r->maximal));
    out->n_maximal_isr = r->n_maximal;
    out->pending = r->pending;
    out->alter_in_flight = r->alter == ALTER_SENT || r->alter == ALTER_RETRY;
    out->min_insync_replicas = r->min_isr;
    out->log_start_offset = r->log_start;
    out->log_end_offset = r->leo;
    out->durable_end_offset = r->durable;
    out->high_watermark = r->hw;
    out->n_parked = r->n_parked;
    for (int i = 0; i < r->n_fol && r->role == KQ_REPLICA_LEADER; i++) {
        kq_replica_follower *f = &out->followers[out->n_followers++];
        f->id = r->fol[i].id;
        f->log_end_offset = r->fol[i].leo;
        f->last_fetch_ms = r->fol[i].last_fetch_ms;
        f->last_caught_up_ms = r->fol[i].last_caught_up_ms;
        f->broker_epoch = r->fol[i].broker_epoch;
    }
}

int64_t kq_replica_readable_end(const kq_replica *r)
{
    return r->hw;
}

int kq_replica_consumer_read(const kq_replica *r, int64_t offset, int64_t *from, int64_t *to)
{
    *from = *to = offset;
    if (r->role != KQ_REPLICA_LEADER) {
        return KQ_ERR_NOT_LEADER_OR_FOLLOWER;
    }
    if (offset < r->log_start || offset > r->leo) {
        return KQ_ERR_OFFSET_OUT_OF_RANGE;
    }
    if (r->hw > offset) {
        *to = r->hw;
    }
    return 0;
}

bool kq_replica_next_fetch(const kq_replica *r, kq_replica_fetch_request *req)
{
    if (!r->started || r->role != KQ_REPLICA_FOLLOWER || r->leader_id < 0) {
        return false;
    }
    req->leader_id = r->leader_id;
    req->fetch_offset = r->leo;
    req->last_fetched_epoch = last_record_epoch(r);
    req->current_leader_epoch = r->leader_epoch;
    return true;
}

const kq_epoch_entry *kq_replica_epochs(const kq_replica *r, size_t *n)
{
    *n = r->epochs.n;
    return r->epochs.e;
}

bool kq_replica_end_offset_for_epoch(const kq_replica *r, int32_t epoch, int32_t *out_epoch,
                                     int64_t *out_end)
{
    return end_offset_for(r, epoch, out_epoch, out_end);
}
