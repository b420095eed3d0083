/* Raft rule tests for snapshots and FetchSnapshot (reference/kraft-semantics.md 1.5 items 2
 * and 5, 1.7): the leader answers SNAPSHOT below its log start, compaction only to a snapshot,
 * a follower or observer copies the snapshot in chunks, installs it and continues from its
 * end, position and not-found errors, the leader never installs, an installing node never
 * campaigns, FetchSnapshot counts toward check-quorum, restart after an install. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"
#include "kq/error.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ helpers */

static harness *H; /* for the run-until predicates */
static int32_t WATCH;

static bool have_leader(harness *h)
{
    return h_leader(h) != 0;
}

static kq_raft_status status_of(harness *h, int32_t id)
{
    kq_raft_status st;
    kq_raft_get_status(h_node_of(h, id)->r, &st);
    return st;
}

/* Everyone up has the leader's whole log and knows it is committed. */
static bool all_caught_up(harness *h)
{
    int32_t l = h_leader(h);
    if (!l)
        return false;
    int64_t leo = h_leo(h, l);
    for (int i = 0; i < h->n; i++) {
        h_node *nd = &h->nodes[i];
        if (nd->up && (h_leo(h, nd->id) != leo || nd->hw != leo))
            return false;
    }
    return true;
}

static bool watched_installed(harness *h)
{
    return h_node_of(h, WATCH)->installs > 0 && all_caught_up(h);
}

static void set_chunk(harness *h, uint32_t bytes)
{
    for (int i = 0; i < h->n; i++)
        h->nodes[i].cfg.snapshot_chunk_bytes = bytes;
}

/* Start the listed nodes (0-terminated) and elect a leader among them. */
static int32_t elect(harness *h, const int32_t *ids)
{
    for (; *ids; ids++)
        h_start(h, *ids);
    assert_true(h_run_until(h, 20000, have_leader));
    return h_leader(h);
}

static void write_batches(harness *h, int32_t leader, int n)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(h_propose(h, leader, 2), 0);
        assert_int_equal(h_last(h, leader)->propose_error, 0);
        h_run(h, 30);
    }
    assert_true(h_run_until(h, 20000, all_caught_up));
}

static int32_t other_voter(harness *h, int32_t leader)
{
    for (int32_t id = 1; id <= h->n_voters; id++)
        if (id != leader)
            return id;
    return 0;
}

/* The leader's answer to a Fetch injected from node `from` (a node that is down, so that no
 * core consumes the answer). */
static kq_raft_msg inject_fetch(harness *h, int32_t leader, int32_t from, int64_t off, int32_t lfe)
{
    kq_raft_msg f = h_fetch_req(from, leader, h_epoch(h, leader), off, lfe, 0);
    assert_int_equal(h_inject(h, leader, &f), 0);
    const kq_raft_msg *r = h_last_msg(h, leader, KQ_RAFT_FETCH_RESP, from);
    assert_non_null(r);
    return *r;
}

static kq_raft_msg snap_req(int32_t from, int32_t to, int32_t epoch, kq_raft_snapshot_id id,
                            int64_t pos)
{
    kq_raft_msg m;
    memset(&m, 0, sizeof(m));
    m.type = KQ_RAFT_FETCH_SNAPSHOT_REQ;
    m.from = from;
    m.to = to;
    m.epoch = epoch;
    m.leader_id = -1;
    m.u.fetch_snapshot_req.snapshot_id = id;
    m.u.fetch_snapshot_req.position = pos;
    m.u.fetch_snapshot_req.max_bytes = 1 << 20;
    return m;
}

static kq_raft_msg inject_snap_req(harness *h, int32_t leader, int32_t from, kq_raft_snapshot_id id,
                                   int64_t pos)
{
    kq_raft_msg m = snap_req(from, leader, h_epoch(h, leader), id, pos);
    assert_int_equal(h_inject(h, leader, &m), 0);
    const kq_raft_msg *r = h_last_msg(h, leader, KQ_RAFT_FETCH_SNAPSHOT_RESP, from);
    assert_non_null(r);
    return *r;
}

/* Leader with committed batches and a snapshot at its HW; node 4 (an observer) stays down and
 * serves as the sender of injected requests. Returns the leader. */
static int32_t leader_with_snapshot(harness *h, kq_raft_snapshot_id *id)
{
    h_init(h, 3, 1, 11);
    H = h;
    set_chunk(h, 48);
    int32_t ids[] = {1, 2, 3, 0};
    int32_t l = elect(h, ids);
    write_batches(h, l, 10);
    int64_t end = h_node_of(h, l)->hw;
    assert_int_equal(h_take_snapshot(h, l, end), 0);
    kq_raft_status st = status_of(h, l);
    assert_int_equal(st.snapshot.end_offset, end);
    assert_int_equal(st.snapshot.epoch, h_epoch(h, l));
    *id = st.snapshot;
    return l;
}

/* ------------------------------------------------------------ leader side */

static void test_leader_answers_snapshot_below_log_start(void **state)
{
    (void)state;
    harness h;
    kq_raft_snapshot_id id;
    int32_t l = leader_with_snapshot(&h, &id);
    int32_t e = h_epoch(&h, l);
    assert_int_equal(status_of(&h, l).log_start_offset, id.end_offset);

    /* below the log start */
    kq_raft_msg r = inject_fetch(&h, l, 4, id.end_offset - 2, e);
    assert_int_equal(r.error, KQ_ERR_NONE);
    assert_true(r.u.fetch_resp.snapshot);
    assert_false(r.u.fetch_resp.diverging);
    assert_int_equal(r.u.fetch_resp.snapshot_id.end_offset, id.end_offset);
    assert_int_equal(r.u.fetch_resp.snapshot_id.epoch, id.epoch);
    assert_int_equal(r.u.fetch_resp.records_from, r.u.fetch_resp.records_to);
    /* offset 0 (a new or wiped replica): always the snapshot (item 5) */
    r = inject_fetch(&h, l, 4, 0, 0);
    assert_true(r.u.fetch_resp.snapshot);
    /* at the log start with another epoch than the snapshot's */
    r = inject_fetch(&h, l, 4, id.end_offset, id.epoch - 1);
    assert_true(r.u.fetch_resp.snapshot);
    /* at the log start with the snapshot's epoch: valid, records follow */
    r = inject_fetch(&h, l, 4, id.end_offset, id.epoch);
    assert_false(r.u.fetch_resp.snapshot);
    assert_false(r.u.fetch_resp.diverging);
    assert_int_equal(r.u.fetch_resp.records_from, id.end_offset);
    h_free(&h);
}

static void test_snapshot_rules_and_compaction(void **state)
{
    (void)state;
    harness h;
    h_init(&h, 3, 0, 5);
    H = &h;
    int32_t ids[] = {1, 2, 3, 0};
    int32_t l = elect(&h, ids);
    write_batches(&h, l, 8);
    h_node *ln = h_node_of(&h, l);
    /* many writes, no snapshot: the log is never compacted */
    assert_int_equal(ln->compactions, 0);
    assert_int_equal(status_of(&h, l).log_start_offset, 0);
    int64_t hw = ln->hw;

    /* not committed: a batch only the leader has */
    h_isolate(&h, l);
    assert_int_equal(h_propose(&h, l, 3), 0);
    h_run(&h, 10);
    assert_int_equal(h_take_snapshot(&h, l, h_leo(&h, l)), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(ln->compactions, 0);
    /* the wrong epoch for the record at end - 1 */
    kq_raft_event ev = {.type = KQ_RAFT_EV_SNAPSHOT_TAKEN};
    ev.u.snapshot.id.end_offset = hw;
    ev.u.snapshot.id.epoch = h_epoch(&h, l) + 1;
    ev.u.snapshot.size = 8;
    assert_int_equal(h_step(&h, l, &ev), KQ_ERR_INVALID_REQUEST);
    ev.u.snapshot.id.epoch = h_epoch(&h, l);
    ev.u.snapshot.size = 0; /* a snapshot file is never empty */
    assert_int_equal(h_step(&h, l, &ev), KQ_ERR_INVALID_REQUEST);

    /* a snapshot at a committed boundary below the HW: the prefix goes, not more */
    int64_t mid = ln->log[3].base;
    assert_int_equal(h_take_snapshot(&h, l, mid), 0);
    assert_int_equal(h_last(&h, l)->compact_to, mid);
    assert_int_equal(ln->compactions, 1);
    assert_int_equal(ln->log_start, mid);
    assert_int_equal(ln->log[0].base, mid); /* batches above the snapshot stay */
    assert_int_equal(h_leo(&h, l), status_of(&h, l).log_end_offset);
    assert_int_equal(status_of(&h, l).log_start_offset, mid);
    /* an older snapshot than the latest is refused; the same one again changes nothing */
    assert_int_equal(h_take_snapshot(&h, l, ln->log_start - 2), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(h_take_snapshot(&h, l, mid), 0);
    assert_int_equal(h_last(&h, l)->compact_to, -1);
    assert_int_equal(ln->compactions, 1);
    /* the leader still leads and its epoch cache answers for the snapshot epoch */
    int32_t ep;
    int64_t end;
    assert_true(kq_raft_end_offset_for_epoch(ln->r, h_epoch(&h, l), &ep, &end));
    assert_int_equal(ep, h_epoch(&h, l));
    assert_int_equal(end, h_leo(&h, l));
    h_free(&h);
}

static void test_fetch_snapshot_errors(void **state)
{
    (void)state;
    harness h;
    kq_raft_snapshot_id id;
    int32_t l = leader_with_snapshot(&h, &id);
    int64_t size = (int64_t)h_node_of(&h, l)->snap_len;

    kq_raft_msg r = inject_snap_req(&h, l, 4, id, 0);
    assert_int_equal(r.error, KQ_ERR_NONE);
    assert_int_equal(r.u.fetch_snapshot_resp.size, size);
    assert_int_equal(r.u.fetch_snapshot_resp.position, 0);
    assert_true(size > 48);
    assert_int_equal(r.u.fetch_snapshot_resp.len, 48); /* the configured chunk size */
    r = inject_snap_req(&h, l, 4, id, 48);
    assert_int_equal(r.error, KQ_ERR_NONE);
    assert_int_equal(r.u.fetch_snapshot_resp.position, 48);
    assert_int_equal((int64_t)r.u.fetch_snapshot_resp.len, size - 48 < 48 ? size - 48 : 48);
    r = inject_snap_req(&h, l, 4, id, size);
    assert_int_equal(r.error, KQ_ERR_POSITION_OUT_OF_RANGE);
    r = inject_snap_req(&h, l, 4, id, -1);
    assert_int_equal(r.error, KQ_ERR_POSITION_OUT_OF_RANGE);
    kq_raft_snapshot_id unknown = {id.end_offset + 2, id.epoch};
    r = inject_snap_req(&h, l, 4, unknown, 0);
    assert_int_equal(r.error, KQ_ERR_SNAPSHOT_NOT_FOUND);
    kq_raft_snapshot_id bootstrap = {0, 0}; /* never served */
    r = inject_snap_req(&h, l, 4, bootstrap, 0);
    assert_int_equal(r.error, KQ_ERR_SNAPSHOT_NOT_FOUND);
    /* leader-only checks come first */
    kq_raft_msg m = snap_req(4, l, h_epoch(&h, l) - 1, id, 0);
    assert_int_equal(h_inject(&h, l, &m), 0);
    assert_int_equal(h_last_msg(&h, l, KQ_RAFT_FETCH_SNAPSHOT_RESP, 4)->error,
                     KQ_ERR_FENCED_LEADER_EPOCH);
    m = snap_req(4, l, h_epoch(&h, l) + 1, id, 0);
    assert_int_equal(h_inject(&h, l, &m), 0);
    assert_int_equal(h_last_msg(&h, l, KQ_RAFT_FETCH_SNAPSHOT_RESP, 4)->error,
                     KQ_ERR_UNKNOWN_LEADER_EPOCH);
    /* a follower is not the leader */
    int32_t f = other_voter(&h, l);
    m = snap_req(4, f, h_epoch(&h, f), id, 0);
    assert_int_equal(h_inject(&h, f, &m), 0);
    assert_int_equal(h_last_msg(&h, f, KQ_RAFT_FETCH_SNAPSHOT_RESP, 4)->error,
                     KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    h_free(&h);
}

static void test_leader_never_installs(void **state)
{
    (void)state;
    harness h;
    kq_raft_snapshot_id id;
    int32_t l = leader_with_snapshot(&h, &id);
    kq_raft_event ev = {.type = KQ_RAFT_EV_SNAPSHOT_INSTALLED};
    ev.u.snapshot.id = id;
    assert_int_equal(h_step(&h, l, &ev), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(h_role(&h, l), KQ_RAFT_LEADER);
    assert_int_equal(status_of(&h, l).log_end_offset, h_leo(&h, l));
    /* a FetchSnapshot answer arriving at a leader is ignored, never written */
    kq_raft_msg m;
    memset(&m, 0, sizeof(m));
    uint8_t b[4] = {1, 2, 3, 4};
    m.type = KQ_RAFT_FETCH_SNAPSHOT_RESP;
    m.from = other_voter(&h, l);
    m.epoch = h_epoch(&h, l);
    m.leader_id = l;
    m.u.fetch_snapshot_resp.snapshot_id = id;
    m.u.fetch_snapshot_resp.size = 4;
    m.u.fetch_snapshot_resp.data = b;
    m.u.fetch_snapshot_resp.len = 4;
    assert_int_equal(h_inject(&h, l, &m), 0);
    assert_false(h_last(&h, l)->snapshot_chunk);
    assert_false(h_last(&h, l)->install_snapshot);
    h_free(&h);
}

/* ------------------------------------------------------------ follower side */

/* Node `f` misses the leader's snapshot and compaction, then comes back wiped (or with its
 * old log): it must install the snapshot through FetchSnapshot and end with the same image. */
static void rejoin_through_snapshot(int observers, bool wipe, uint32_t chunk)
{
    harness h;
    h_init(&h, 3, observers, 21);
    H = &h;
    set_chunk(&h, chunk);
    int32_t ids[] = {1, 2, 3, 0};
    int32_t l = elect(&h, ids);
    int32_t f = observers ? 4 : other_voter(&h, l);
    if (observers)
        h_start(&h, 4);
    write_batches(&h, l, 3);
    h_crash(&h, f);
    write_batches(&h, l, 12);
    int64_t end = h_node_of(&h, l)->hw;
    assert_int_equal(h_take_snapshot(&h, l, end), 0);
    write_batches(&h, l, 4); /* records above the snapshot too */
    if (wipe)
        h_wipe(&h, f);
    h_start(&h, f);
    WATCH = f;
    assert_true(h_run_until(&h, 60000, watched_installed));

    h_node *fn = h_node_of(&h, f), *ln = h_node_of(&h, l);
    assert_int_equal(fn->installs, 1);
    assert_int_equal(fn->chunk_errors, 0);
    assert_int_equal(fn->install_failures, 0);
    assert_true(fn->chunks_written >= (int)((ln->snap_len + chunk - 1) / chunk));
    assert_int_equal(fn->snap.end_offset, end);
    assert_int_equal(fn->snap_len, ln->snap_len);
    assert_memory_equal(fn->snap_bytes, ln->snap_bytes, ln->snap_len);
    assert_int_equal(fn->log_start, end);
    /* continued fetching from the snapshot end: same log and same image at the HW */
    assert_int_equal(h_leo(&h, f), h_leo(&h, l));
    assert_true(h_committed_prefix_matches(&h));
    size_t la, fa;
    uint8_t *li = h_image(&h, l, ln->hw, &la), *fi = h_image(&h, f, ln->hw, &fa);
    assert_non_null(li);
    assert_non_null(fi);
    assert_int_equal(la, fa);
    assert_memory_equal(li, fi, la);
    free(li);
    free(fi);
    kq_raft_status st = status_of(&h, f);
    assert_int_equal(st.log_start_offset, end);
    assert_false(st.fetching_snapshot);
    assert_false(st.installing_snapshot);
    assert_int_equal(fn->step_errors, 0);
    assert_int_equal(fn->append_errors, 0);
    assert_false(fn->fatal);
    h_free(&h);
}

static void test_wiped_voter_rejoins_through_fetch_snapshot(void **state)
{
    (void)state;
    rejoin_through_snapshot(0, true, 16); /* 16-byte chunks: many FetchSnapshot rounds */
}

static void test_lagging_voter_with_old_log_gets_snapshot(void **state)
{
    (void)state;
    rejoin_through_snapshot(0, false, 24);
}

static void test_wiped_observer_rejoins_through_fetch_snapshot(void **state)
{
    (void)state;
    rejoin_through_snapshot(1, true, 16);
}

static void test_restart_after_install_recovers_start_and_epochs(void **state)
{
    (void)state;
    harness h;
    h_init(&h, 3, 0, 31);
    H = &h;
    set_chunk(&h, 16);
    int32_t ids[] = {1, 2, 3, 0};
    int32_t l = elect(&h, ids);
    int32_t f = other_voter(&h, l);
    h_crash(&h, f);
    write_batches(&h, l, 10);
    int64_t end = h_node_of(&h, l)->hw;
    assert_int_equal(h_take_snapshot(&h, l, end), 0);
    h_wipe(&h, f);
    h_start(&h, f);
    WATCH = f;
    assert_true(h_run_until(&h, 60000, watched_installed));
    int32_t snap_epoch = h_node_of(&h, f)->snap.epoch;

    /* restart with only the snapshot and the log above it */
    h_crash(&h, f);
    h_start(&h, f);
    kq_raft_status st = status_of(&h, f);
    assert_int_equal(st.log_start_offset, end);
    assert_int_equal(st.snapshot.end_offset, end);
    assert_int_equal(st.snapshot.epoch, snap_epoch);
    int32_t ep;
    int64_t eoff;
    assert_true(kq_raft_end_offset_for_epoch(h_node_of(&h, f)->r, snap_epoch, &ep, &eoff));
    assert_int_equal(ep, snap_epoch);
    write_batches(&h, l, 3);
    assert_int_equal(h_node_of(&h, f)->installs, 1); /* no second snapshot needed */
    assert_int_equal(h_leo(&h, f), h_leo(&h, l));
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

static void test_snapshot_not_found_goes_back_to_fetch(void **state)
{
    (void)state;
    harness h;
    h_init(&h, 3, 0, 41);
    H = &h;
    set_chunk(&h, 16);
    int32_t ids[] = {1, 2, 3, 0};
    int32_t l = elect(&h, ids);
    int32_t f = other_voter(&h, l);
    h_crash(&h, f);
    write_batches(&h, l, 10);
    assert_int_equal(h_take_snapshot(&h, l, h_node_of(&h, l)->hw), 0);
    h_wipe(&h, f);
    h_start(&h, f);
    /* deliver one message at a time until the follower's first FetchSnapshot is queued */
    for (int i = 0; i < 100000 && h_find(&h, KQ_RAFT_FETCH_SNAPSHOT_REQ, f, l) < 0; i++) {
        if (h.nq > 0) {
            h_deliver(&h, 0);
            continue;
        }
        h.now += 5;
        for (int32_t id = 1; id <= h.n; id++)
            if (h_node_of(&h, id)->up && h_node_of(&h, id)->deadline <= h.now)
                h_tick(&h, id);
    }
    assert_true(h_find(&h, KQ_RAFT_FETCH_SNAPSHOT_REQ, f, l) >= 0);
    assert_true(status_of(&h, f).fetching_snapshot);
    /* the leader answers SNAPSHOT_NOT_FOUND (its snapshot was replaced) */
    kq_raft_msg nf;
    memset(&nf, 0, sizeof(nf));
    nf.type = KQ_RAFT_FETCH_SNAPSHOT_RESP;
    nf.from = l;
    nf.epoch = h_epoch(&h, l);
    nf.leader_id = l;
    nf.error = KQ_ERR_SNAPSHOT_NOT_FOUND;
    nf.u.fetch_snapshot_resp.snapshot_id = status_of(&h, l).snapshot;
    nf.u.fetch_snapshot_resp.size = -1;
    assert_int_equal(h_inject(&h, f, &nf), 0);
    assert_true(h_last(&h, f)->snapshot_abort);
    assert_false(status_of(&h, f).fetching_snapshot);
    assert_int_equal(h_node_of(&h, f)->aborts, 1);
    /* it starts over with a Fetch and gets there */
    WATCH = f;
    assert_true(h_run_until(&h, 60000, watched_installed));
    assert_int_equal(h_node_of(&h, f)->installs, 1);
    assert_int_equal(h_node_of(&h, f)->chunk_errors, 0);
    h_free(&h);
}

static void test_failed_install_fetches_again(void **state)
{
    (void)state;
    harness h;
    h_init(&h, 3, 0, 51);
    H = &h;
    set_chunk(&h, 32);
    int32_t ids[] = {1, 2, 3, 0};
    int32_t l = elect(&h, ids);
    int32_t f = other_voter(&h, l);
    h_crash(&h, f);
    write_batches(&h, l, 10);
    assert_int_equal(h_take_snapshot(&h, l, h_node_of(&h, l)->hw), 0);
    h_wipe(&h, f);
    h_node_of(&h, f)->corrupt_next_install = true; /* e.g. a CRC mismatch */
    h_start(&h, f);
    WATCH = f;
    assert_true(h_run_until(&h, 60000, watched_installed));
    assert_int_equal(h_node_of(&h, f)->install_failures, 1);
    assert_int_equal(h_node_of(&h, f)->installs, 1);
    assert_memory_equal(h_node_of(&h, f)->snap_bytes, h_node_of(&h, l)->snap_bytes,
                        h_node_of(&h, l)->snap_len);
    h_free(&h);
}

static void test_installing_node_never_campaigns(void **state)
{
    (void)state;
    harness h;
    h_init(&h, 3, 0, 61);
    H = &h;
    int32_t ids[] = {1, 2, 3, 0};
    int32_t l = elect(&h, ids);
    int32_t f = other_voter(&h, l);
    h_crash(&h, f);
    write_batches(&h, l, 6);
    assert_int_equal(h_take_snapshot(&h, l, h_node_of(&h, l)->hw), 0);
    h_wipe(&h, f);
    h_node *fn = h_node_of(&h, f);
    fn->hold_install = true;
    h_start(&h, f);
    for (int i = 0; i < 2000 && !fn->install_pending; i++)
        h_run(&h, 5);
    assert_true(fn->install_pending);
    assert_true(status_of(&h, f).installing_snapshot);
    /* the leader goes silent for many election timeouts: no campaign, no Fetch */
    h_isolate(&h, f);
    fn->sent[KQ_RAFT_VOTE_REQ] = 0;
    fn->sent[KQ_RAFT_FETCH_REQ] = 0;
    h_run(&h, 10000);
    assert_int_equal(fn->sent[KQ_RAFT_VOTE_REQ], 0);
    assert_int_equal(fn->sent[KQ_RAFT_FETCH_REQ], 0);
    assert_int_equal(h_role(&h, f), KQ_RAFT_FOLLOWER);
    /* once installed it fetches from the snapshot end */
    h_heal(&h);
    assert_int_equal(h_finish_install(&h, f), 0);
    kq_raft_status st = status_of(&h, f);
    assert_false(st.installing_snapshot);
    assert_int_equal(st.log_end_offset, fn->snap.end_offset);
    assert_int_equal(st.high_watermark, fn->snap.end_offset);
    fn->hold_install = false;
    WATCH = f;
    assert_true(h_run_until(&h, 60000, watched_installed));
    assert_int_equal(fn->installs, 1);
    h_free(&h);
}

static bool leader_one(harness *h)
{
    return h_leader(h) != 0;
}

static void test_fetch_snapshot_counts_for_check_quorum(void **state)
{
    (void)state;
    for (int with = 0; with < 2; with++) {
        harness h;
        kq_raft_snapshot_id id;
        int32_t l = leader_with_snapshot(&h, &id);
        (void)leader_one;
        int32_t e = h_epoch(&h, l);
        h_isolate(&h, l); /* no Fetch reaches it any more */
        for (int t = 0; t < 20; t++) {
            if (with) {
                for (int32_t v = 1; v <= 3; v++) {
                    if (v == l)
                        continue;
                    kq_raft_msg m = snap_req(v, l, e, id, 0);
                    assert_int_equal(h_inject(&h, l, &m), 0);
                }
            }
            h_run(&h, 250);
        }
        /* 5 s > 1.5 x fetch timeout: only FetchSnapshot kept the leader in office */
        kq_raft_status st = status_of(&h, l);
        if (with)
            assert_true(st.role == KQ_RAFT_LEADER && st.epoch == e);
        else
            assert_true(st.role != KQ_RAFT_LEADER);
        h_free(&h);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leader_answers_snapshot_below_log_start),
        cmocka_unit_test(test_snapshot_rules_and_compaction),
        cmocka_unit_test(test_fetch_snapshot_errors),
        cmocka_unit_test(test_leader_never_installs),
        cmocka_unit_test(test_wiped_voter_rejoins_through_fetch_snapshot),
        cmocka_unit_test(test_lagging_voter_with_old_log_gets_snapshot),
        cmocka_unit_test(test_wiped_observer_rejoins_through_fetch_snapshot),
        cmocka_unit_test(test_restart_after_install_recovers_start_and_epochs),
        cmocka_unit_test(test_snapshot_not_found_goes_back_to_fetch),
        cmocka_unit_test(test_failed_install_fetches_again),
        cmocka_unit_test(test_installing_node_never_campaigns),
        cmocka_unit_test(test_fetch_snapshot_counts_for_check_quorum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
