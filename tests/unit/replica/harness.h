/*
 * Test harness for kq_replica: up to 4 brokers (ids 1..4) each hosting one replica of
 * "ledger-0", a model partition log per broker (epoch and value per offset), a virtual clock,
 * and helpers that carry a Fetch from a follower to the leader and back, act as the controller
 * for AlterPartition, and crash / restart a broker from what it had written.
 *
 * Every update instruction is applied to the model log the way a host would: truncate, append,
 * checkpoint the epoch cache, then (auto_persist) step PERSISTED. Completions and log lines are
 * collected per broker. All functions are static inline so each test file can use a subset.
 */
#ifndef KQ_TEST_REPLICA_HARNESS_H
#define KQ_TEST_REPLICA_HARNESS_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kq/error.h"
#include "kq/replica.h"

#define H_BROKERS 4
#define H_LOG 4096
#define H_DONE 256
#define H_LINES 256

typedef struct h_broker {
    kq_replica *r;
    bool alive;
    int32_t epoch_at[H_LOG];
    int value[H_LOG];
    int64_t len; /* model log end */
    int64_t hw;  /* last HW the replica reported (the checkpoint) */
    kq_epoch_entry ckpt[64];
    size_t n_ckpt;
    bool has_alter;
    kq_replica_alter_request alter;
    int n_alters;             /* AlterPartition requests sent, ever */
    int n_shrinks, n_expands; /* as the update counts them (the broker's ISR metrics) */
    kq_replica_completion done[H_DONE];
    int n_done;
    char lines[H_LINES][KQ_REPLICA_LOG_LEN];
    int n_lines;
    int n_truncations;
    int64_t last_truncate_to;
    int64_t truncations[8]; /* the first 8 truncation offsets, in order */
    int64_t broker_epoch;
    bool fenced;
    bool shutting_down;
} h_broker;

typedef struct h_cluster {
    h_broker b[H_BROKERS + 1];
    int n; /* replicas 1..n */
    uint64_t now;
    uint32_t lag_ms;
    int32_t min_isr;
    bool auto_persist;
    int next_value;
    int append_value;    /* value for the records of the APPEND being stepped */
    kq_replica_update u; /* last update of the last h_step (before auto PERSISTED) */
} h_cluster;

static inline h_broker *hb(h_cluster *h, int id)
{
    assert_true(id >= 1 && id <= H_BROKERS);
    return &h->b[id];
}

static inline void h_collect(h_cluster *h, int id, const kq_replica_update *u)
{
    h_broker *b = hb(h, id);

    for (size_t i = 0; i < u->n_completions; i++) {
        assert_true(b->n_done < H_DONE);
        b->done[b->n_done++] = u->completions[i];
    }
    for (int i = 0; i < u->n_log; i++) {
        if (b->n_lines < H_LINES) {
            snprintf(b->lines[b->n_lines++], KQ_REPLICA_LOG_LEN, "%s", u->log[i]);
        }
    }
    b->n_shrinks += u->isr_shrinks;
    b->n_expands += u->isr_expands;
    if (u->send_alter) {
        b->has_alter = true;
        b->alter = u->alter;
        b->n_alters++;
    }
    if (u->hw_changed) {
        b->hw = u->high_watermark;
    }
}

/* Step one event on broker id and apply the update to its model log. Returns the step rc. */
static inline int h_step(h_cluster *h, int id, kq_replica_event *ev)
{
    h_broker *b = hb(h, id);
    kq_replica_update *u = &h->u;
    bool wrote = false;

    assert_true(b->alive);
    ev->now_ms = h->now;
    int rc = kq_replica_step(b->r, ev, u);
    if (rc) {
        /* a rejected event carries no instruction and names the problem */
        assert_int_equal(u->n_append, 0);
        assert_int_equal(u->truncate_to, -1);
        assert_true(u->reason[0] != '\0');
        return rc;
    }
    if (u->reset_log_start >= 0) {
        b->len = 0; /* the model keeps offsets from 0; reset only used at 0 here */
        wrote = true;
    }
    if (u->truncate_to >= 0) {
        assert_true(u->truncate_to < b->len);
        b->len = u->truncate_to;
        if (b->n_truncations < 8)
            b->truncations[b->n_truncations] = u->truncate_to;
        b->n_truncations++;
        b->last_truncate_to = u->truncate_to;
        wrote = true;
    }
    for (size_t i = 0; i < u->n_append; i++) {
        const kq_replica_batch *bt = &u->append[i];
        assert_int_equal(bt->base_offset, b->len);
        for (int32_t k = 0; k < bt->count; k++) {
            assert_true(b->len < H_LOG);
            b->epoch_at[b->len] = bt->epoch;
            if (bt->data) {
                b->value[b->len] = ((const int *)(const void *)bt->data)[k];
            } else {
                b->value[b->len] = h->append_value + k;
            }
            b->len++;
        }
        wrote = true;
    }
    if (u->epochs_changed) {
        size_t n;
        const kq_epoch_entry *e = kq_replica_epochs(b->r, &n);
        assert_true(n <= 64);
        memcpy(b->ckpt, e, n * sizeof(*e));
        b->n_ckpt = n;
    }
    h_collect(h, id, u);
    if (wrote && h->auto_persist) {
        kq_replica_event pe = {.type = KQ_REPLICA_EV_PERSISTED, .now_ms = h->now};
        kq_replica_update pu;
        pe.u.persisted_end = b->len;
        assert_int_equal(kq_replica_step(b->r, &pe, &pu), 0);
        h_collect(h, id, &pu);
    }
    return 0;
}

static inline void h_boot(h_cluster *h, int id)
{
    h_broker *b = hb(h, id);
    kq_replica_config cfg;
    char err[128];

    kq_replica_config_defaults(&cfg);
    cfg.node_id = id;
    snprintf(cfg.topic, sizeof(cfg.topic), "ledger");
    cfg.partition = 0;
    cfg.replica_lag_time_max_ms = h->lag_ms;
    cfg.min_insync_replicas = h->min_isr;
    b->r = kq_replica_new(&cfg, err, sizeof(err));
    assert_non_null(b->r);
    b->alive = true;
    b->has_alter = false;
    b->broker_epoch += 100; /* a new incarnation registers with a new broker epoch */

    kq_replica_event ev = {.type = KQ_REPLICA_EV_START};
    ev.u.start.log_start_offset = 0;
    ev.u.start.log_end_offset = b->len;
    ev.u.start.high_watermark = b->hw;
    ev.u.start.epochs = b->ckpt;
    ev.u.start.n_epochs = b->n_ckpt;
    assert_int_equal(h_step(h, id, &ev), 0);
}

static inline void h_init(h_cluster *h, int n, int32_t min_isr, uint32_t lag_ms)
{
    memset(h, 0, sizeof(*h));
    h->n = n;
    h->min_isr = min_isr;
    h->lag_ms = lag_ms;
    h->auto_persist = true;
    h->next_value = 100;
    for (int id = 1; id <= n; id++) {
        h_boot(h, id);
    }
}

/* kill -9: the replica object is gone; its written log and checkpoints stay on "disk". */
static inline void h_crash(h_cluster *h, int id)
{
    h_broker *b = hb(h, id);

    kq_replica_free(b->r);
    b->r = NULL;
    b->alive = false;
    b->has_alter = false;
}

static inline void h_brokers_event(h_cluster *h, int id)
{
    kq_replica_broker br[H_BROKERS];
    kq_replica_event ev = {.type = KQ_REPLICA_EV_BROKERS};

    for (int i = 1; i <= h->n; i++) {
        br[i - 1].id = i;
        br[i - 1].broker_epoch = h->b[i].broker_epoch;
        br[i - 1].fenced = h->b[i].fenced || !h->b[i].alive;
        br[i - 1].in_controlled_shutdown = h->b[i].shutting_down;
    }
    ev.u.brokers.brokers = br;
    ev.u.brokers.n_brokers = h->n;
    assert_int_equal(h_step(h, id, &ev), 0);
}

/* Metadata delta (replicas 1..n) to one broker, with every broker's registration state. */
/* A delta that also carries min.insync.replicas (0: unchanged). */
static inline int h_delta_min(h_cluster *h, int id, int32_t leader, int32_t leader_epoch,
                              int32_t partition_epoch, const int32_t *isr, int n_isr,
                              int32_t min_isr);

static inline int h_delta(h_cluster *h, int id, int32_t leader, int32_t leader_epoch,
                          int32_t partition_epoch, const int32_t *isr, int n_isr)
{
    return h_delta_min(h, id, leader, leader_epoch, partition_epoch, isr, n_isr, 0);
}

static inline int h_delta_min(h_cluster *h, int id, int32_t leader, int32_t leader_epoch,
                              int32_t partition_epoch, const int32_t *isr, int n_isr,
                              int32_t min_isr)
{
    int32_t replicas[H_BROKERS];
    kq_replica_broker br[H_BROKERS];
    kq_replica_event ev = {.type = KQ_REPLICA_EV_DELTA};

    for (int i = 1; i <= h->n; i++) {
        replicas[i - 1] = i;
        br[i - 1].id = i;
        br[i - 1].broker_epoch = h->b[i].broker_epoch;
        br[i - 1].fenced = h->b[i].fenced || !h->b[i].alive;
        br[i - 1].in_controlled_shutdown = h->b[i].shutting_down;
    }
    ev.u.delta.leader_id = leader;
    ev.u.delta.leader_epoch = leader_epoch;
    ev.u.delta.partition_epoch = partition_epoch;
    ev.u.delta.replicas = replicas;
    ev.u.delta.n_replicas = h->n;
    ev.u.delta.isr = isr;
    ev.u.delta.n_isr = n_isr;
    ev.u.delta.min_insync_replicas = min_isr;
    ev.u.delta.brokers = br;
    ev.u.delta.n_brokers = h->n;
    return h_step(h, id, &ev);
}

/* The same delta to every live broker. */
static inline void h_delta_all(h_cluster *h, int32_t leader, int32_t leader_epoch,
                               int32_t partition_epoch, const int32_t *isr, int n_isr)
{
    for (int id = 1; id <= h->n; id++) {
        if (h->b[id].alive) {
            assert_int_equal(h_delta(h, id, leader, leader_epoch, partition_epoch, isr, n_isr), 0);
        }
    }
}

typedef struct h_produce_result {
    bool answered; /* false: acks=all parked */
    int error;
    int64_t base_offset;
    uint64_t token;
} h_produce_result;

static inline h_produce_result h_produce_n(h_cluster *h, int id, int16_t acks, int32_t count,
                                           uint32_t timeout_ms)
{
    kq_replica_event ev = {.type = KQ_REPLICA_EV_APPEND};
    h_produce_result res = {0};

    res.token = (uint64_t)h->next_value;
    ev.u.append.acks = acks;
    ev.u.append.count = count;
    ev.u.append.token = res.token;
    ev.u.append.timeout_ms = timeout_ms;
    h->append_value = h->next_value;
    h->next_value += count;
    assert_int_equal(h_step(h, id, &ev), 0);
    res.answered = h->u.has_produce;
    res.error = h->u.produce.error;
    res.base_offset = h->u.produce.base_offset;
    if (!res.answered) {
        assert_true(h->u.produce_parked);
    }
    return res;
}

static inline h_produce_result h_produce(h_cluster *h, int id, int16_t acks)
{
    return h_produce_n(h, id, acks, 1, 0);
}

/* A completion for token on broker id: its index, or -1. */
static inline int h_done_index(h_cluster *h, int id, uint64_t token)
{
    h_broker *b = hb(h, id);

    for (int i = 0; i < b->n_done; i++) {
        if (b->done[i].token == token) {
            return i;
        }
    }
    return -1;
}

/*
 * One Fetch round trip from follower to leader: the follower's request, the leader's answer,
 * the records the leader's host would read from its log (one batch per record, at most
 * max_records), and the follower's handling of the response. Returns the leader's answer.
 */
static inline kq_replica_fetch_answer h_fetch_max(h_cluster *h, int follower, int64_t max_records)
{
    kq_replica_fetch_request req;
    kq_replica_fetch_answer a;
    h_broker *f = hb(h, follower);

    assert_true(kq_replica_next_fetch(f->r, &req));
    h_broker *l = hb(h, req.leader_id);
    kq_replica_event ev = {.type = KQ_REPLICA_EV_FOLLOWER_FETCH};
    ev.u.fetch.replica_id = follower;
    ev.u.fetch.fetch_offset = req.fetch_offset;
    ev.u.fetch.last_fetched_epoch = req.last_fetched_epoch;
    ev.u.fetch.current_leader_epoch = req.current_leader_epoch;
    ev.u.fetch.broker_epoch = f->broker_epoch;
    assert_int_equal(h_step(h, req.leader_id, &ev), 0);
    assert_true(h->u.has_fetch);
    a = h->u.fetch;

    kq_replica_batch batches[KQ_REPLICA_MAX_BATCHES];
    kq_replica_event rv = {.type = KQ_REPLICA_EV_FETCH_RESPONSE};
    size_t n = 0;
    rv.u.fetch_resp.error = a.error;
    rv.u.fetch_resp.fetch_offset = req.fetch_offset;
    rv.u.fetch_resp.leader_epoch = a.leader_epoch;
    rv.u.fetch_resp.high_watermark = a.high_watermark;
    rv.u.fetch_resp.log_start_offset = a.log_start_offset;
    rv.u.fetch_resp.diverging = a.diverging;
    rv.u.fetch_resp.diverging_epoch = a.diverging_epoch;
    rv.u.fetch_resp.diverging_end_offset = a.diverging_end_offset;
    if (!a.error && !a.diverging) {
        for (int64_t o = a.records_from; o < a.records_to && o < l->len &&
                                         (int64_t)n < max_records && n < KQ_REPLICA_MAX_BATCHES;
             o++) {
            batches[n].base_offset = o;
            batches[n].epoch = l->epoch_at[o];
            batches[n].count = 1;
            batches[n].data = (const uint8_t *)&l->value[o];
            batches[n].len = sizeof(int);
            n++;
        }
    }
    rv.u.fetch_resp.batches = batches;
    rv.u.fetch_resp.n_batches = n;
    assert_int_equal(h_step(h, follower, &rv), 0);
    return a;
}

/* The leader handles the follower's Fetch but the response is lost (the follower crashed). */
static inline kq_replica_fetch_answer h_fetch_lost(h_cluster *h, int follower)
{
    kq_replica_fetch_request req;
    h_broker *f = hb(h, follower);

    assert_true(kq_replica_next_fetch(f->r, &req));
    kq_replica_event ev = {.type = KQ_REPLICA_EV_FOLLOWER_FETCH};
    ev.u.fetch.replica_id = follower;
    ev.u.fetch.fetch_offset = req.fetch_offset;
    ev.u.fetch.last_fetched_epoch = req.last_fetched_epoch;
    ev.u.fetch.current_leader_epoch = req.current_leader_epoch;
    ev.u.fetch.broker_epoch = f->broker_epoch;
    assert_int_equal(h_step(h, req.leader_id, &ev), 0);
    return h->u.fetch;
}

static inline kq_replica_fetch_answer h_fetch(h_cluster *h, int follower)
{
    return h_fetch_max(h, follower, KQ_REPLICA_MAX_BATCHES);
}

/* Fetch until the follower's log end equals the leader's and the leader has seen it. */
static inline void h_catch_up(h_cluster *h, int follower)
{
    for (int i = 0; i < 100; i++) {
        kq_replica_fetch_request req;
        assert_true(kq_replica_next_fetch(hb(h, follower)->r, &req));
        kq_replica_fetch_answer a = h_fetch(h, follower);
        if (!a.error && !a.diverging && a.records_from == a.records_to) {
            return;
        }
    }
    fail_msg("broker %d did not catch up", follower);
}

static inline void h_tick(h_cluster *h, int id, uint64_t now)
{
    kq_replica_event ev = {.type = KQ_REPLICA_EV_TICK};

    assert_true(now >= h->now);
    h->now = now;
    assert_int_equal(h_step(h, id, &ev), 0);
}

/* The controller answers the leader's pending AlterPartition. */
static inline void h_alter_answer(h_cluster *h, int id, int error)
{
    h_broker *b = hb(h, id);
    kq_replica_event ev = {.type = KQ_REPLICA_EV_ALTER_RESPONSE};

    assert_true(b->has_alter);
    b->has_alter = false;
    ev.u.alter_resp.request_id = b->alter.request_id;
    ev.u.alter_resp.error = error;
    ev.u.alter_resp.leader_id = id;
    ev.u.alter_resp.leader_epoch = b->alter.leader_epoch;
    ev.u.alter_resp.partition_epoch = b->alter.partition_epoch + (error ? 0 : 1);
    ev.u.alter_resp.isr = b->alter.new_isr;
    ev.u.alter_resp.n_isr = b->alter.n_new_isr;
    assert_int_equal(h_step(h, id, &ev), 0);
}

static inline kq_replica_status h_status(h_cluster *h, int id)
{
    kq_replica_status st;

    kq_replica_get_status(hb(h, id)->r, &st);
    return st;
}

static inline bool h_isr_is(h_cluster *h, int id, const int32_t *isr, int n)
{
    kq_replica_status st = h_status(h, id);

    if (st.n_isr != n) {
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (st.isr[i] != isr[i]) {
            return false;
        }
    }
    return true;
}

/* Index of the first collected log line of broker id containing text, or -1. */
static inline int h_line(h_cluster *h, int id, const char *text)
{
    h_broker *b = hb(h, id);

    for (int i = 0; i < b->n_lines; i++) {
        if (strstr(b->lines[i], text)) {
            return i;
        }
    }
    return -1;
}

/* The model logs of a and b hold the same records below `end`. */
static inline void h_assert_same_prefix(h_cluster *h, int a, int b, int64_t end)
{
    h_broker *x = hb(h, a), *y = hb(h, b);

    assert_true(x->len >= end && y->len >= end);
    for (int64_t o = 0; o < end; o++) {
        if (x->epoch_at[o] != y->epoch_at[o] || x->value[o] != y->value[o]) {
            fail_msg("brokers %d and %d differ at offset %lld: (epoch %d, value %d) vs "
                     "(epoch %d, value %d)",
                     a, b, (long long)o, x->epoch_at[o], x->value[o], y->epoch_at[o], y->value[o]);
        }
    }
}

static inline void h_free(h_cluster *h)
{
    for (int id = 1; id <= H_BROKERS; id++) {
        kq_replica_free(h->b[id].r);
        h->b[id].r = NULL;
    }
}

#endif
