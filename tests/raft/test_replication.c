/* Raft rule tests against the pure core: Fetch, divergence, truncation, high watermark,
 * long poll, observers, proposals (reference/kraft-semantics.md 1.5-1.6). One rule per test. */
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

/* h_disk_append, and the node's stored quorum epoch follows the batch's epoch. */
static void disk_append(harness *h, int32_t id, int32_t epoch, int32_t count)
{
    h_disk_append(h, id, epoch, count);
    h_node *nd = h_node_of(h, id);
    if (nd->qs.epoch < epoch)
        nd->qs.epoch = epoch;
}

static kq_raft_msg vote_resp(int32_t from, int32_t epoch, bool granted)
{
    kq_raft_msg g;
    memset(&g, 0, sizeof(g));
    g.type = KQ_RAFT_VOTE_RESP;
    g.from = from;
    g.epoch = epoch;
    g.leader_id = -1;
    g.u.vote_resp.granted = granted;
    return g;
}

/* Node 1 of `voters` (+ observers) becomes leader through node 2's votes. The other nodes stay
 * down so the test drives every message itself. Returns the leader epoch. */
static int32_t make_leader(harness *h, int voters, int observers)
{
    h_start(h, 1);
    h_expire(h, 1);
    int32_t e = h_epoch(h, 1);
    kq_raft_msg g = vote_resp(2, e, true);
    h_inject(h, 1, &g);
    if (voters > 3) {
        g.from = 3;
        h_inject(h, 1, &g);
    }
    g = vote_resp(2, e + 1, true);
    h_inject(h, 1, &g);
    if (voters > 3) {
        g.from = 3;
        h_inject(h, 1, &g);
    }
    assert_int_equal(h_role(h, 1), KQ_RAFT_LEADER);
    return h_epoch(h, 1);
}

static const kq_raft_msg *fetch(harness *h, int32_t from, int32_t to, int32_t epoch, int64_t offset,
                                int32_t last_epoch, int32_t max_wait)
{
    kq_raft_msg f = h_fetch_req(from, to, epoch, offset, last_epoch, max_wait);
    h_inject(h, to, &f);
    return h_last_msg(h, to, KQ_RAFT_FETCH_RESP, from);
}

static void make_follower(harness *h, int32_t id, int32_t leader, int32_t epoch)
{
    kq_raft_msg b;
    memset(&b, 0, sizeof(b));
    b.type = KQ_RAFT_BEGIN_EPOCH_REQ;
    b.from = leader;
    b.epoch = epoch;
    b.leader_id = leader;
    h_inject(h, id, &b);
    assert_int_equal(h_role(h, id), KQ_RAFT_FOLLOWER);
}

/* A Fetch response from `leader` to node 1 carrying `n` batches. */
static int fetch_resp(harness *h, int32_t leader, int32_t epoch, int64_t hw, const kq_raft_batch *b,
                      size_t n)
{
    kq_raft_msg r;
    memset(&r, 0, sizeof(r));
    r.type = KQ_RAFT_FETCH_RESP;
    r.from = leader;
    r.epoch = epoch;
    r.leader_id = leader;
    r.u.fetch_resp.high_watermark = hw;
    r.u.fetch_resp.batches = b;
    r.u.fetch_resp.n_batches = n;
    return h_inject(h, 1, &r);
}

static uint64_t payload_ids[8] = {101, 102, 103, 104, 105, 106, 107, 108};

static kq_raft_batch batch(int64_t base, int32_t epoch, int32_t count, int k)
{
    kq_raft_batch b;
    memset(&b, 0, sizeof(b));
    b.base_offset = base;
    b.epoch = epoch;
    b.count = count;
    b.kind = KQ_RAFT_BATCH_FETCHED;
    b.data = (const uint8_t *)&payload_ids[k];
    b.len = sizeof(uint64_t);
    return b;
}

static int64_t hw_of(harness *h, int32_t id)
{
    kq_raft_status s;
    kq_raft_get_status(h_node_of(h, id)->r, &s);
    return s.high_watermark;
}

/* ------------------------------------------------------------ high watermark (1.6) */

static void test_leader_hw_requires_entry_of_current_epoch(void **state)
{
    harness h;
    h_init(&h, 3, 0, 1);
    disk_append(&h, 1, 1, 5); /* offsets 0..4 of epoch 1 */
    int32_t e = make_leader(&h, 3, 0);
    assert_int_equal(e, 2);
    assert_int_equal(h_leo(&h, 1), 6); /* LeaderChange at 5 */
    /* a majority has everything of epoch 1, but nothing of epoch 2 */
    fetch(&h, 2, 1, e, 5, 1, 0);
    assert_int_equal(hw_of(&h, 1), -1);
    /* once a majority has the LeaderChange batch, everything below is committed */
    fetch(&h, 2, 1, e, 6, 2, 0);
    assert_int_equal(hw_of(&h, 1), 6);
    assert_true(h_last(&h, 1)->hw_changed);
    h_free(&h);
}

static void test_leader_hw_counts_only_durable_own_offset(void **state)
{
    harness h;
    h_init(&h, 3, 0, 2);
    h_node_of(&h, 1)->hold_persist = true;
    int32_t e = make_leader(&h, 3, 0);
    h_propose(&h, 1, 3); /* leo 4, nothing durable yet */
    fetch(&h, 2, 1, e, 4, e, 0);
    assert_int_equal(hw_of(&h, 1), -1);
    h_persist(&h, 1);
    assert_int_equal(hw_of(&h, 1), 4);
    h_free(&h);
}

static void test_observer_fetches_do_not_move_hw(void **state)
{
    harness h;
    h_init(&h, 3, 1, 3);
    int32_t e = make_leader(&h, 3, 1);
    h_propose(&h, 1, 2);
    const kq_raft_msg *r = fetch(&h, 4, 1, e, 3, e, 0);
    assert_non_null(r);
    assert_int_equal(r->error, KQ_ERR_NONE);
    assert_int_equal(hw_of(&h, 1), -1);
    fetch(&h, 2, 1, e, 3, e, 0);
    assert_int_equal(hw_of(&h, 1), 3);
    h_free(&h);
}

static void test_leader_hw_never_moves_backward(void **state)
{
    harness h;
    h_init(&h, 3, 0, 4);
    int32_t e = make_leader(&h, 3, 0);
    h_propose(&h, 1, 4);
    fetch(&h, 2, 1, e, 5, e, 0);
    assert_int_equal(hw_of(&h, 1), 5);
    /* the voter comes back with a shorter log (it lost unflushed data) */
    fetch(&h, 2, 1, e, 2, e, 0);
    assert_int_equal(hw_of(&h, 1), 5);
    h_free(&h);
}

static void test_fetch_records_caught_up_time(void **state)
{
    harness h;
    h_init(&h, 3, 0, 5);
    int32_t e = make_leader(&h, 3, 0);
    uint64_t t0 = h.now;
    fetch(&h, 2, 1, e, 1, e, 0); /* at the LEO: caught up now */
    h_propose(&h, 1, 2);
    h.now += 50;
    fetch(&h, 2, 1, e, 0, 0, 0); /* behind, and below the previous LEO: not caught up */
    kq_raft_status s;
    kq_raft_get_status(h_node_of(&h, 1)->r, &s);
    assert_int_equal(s.voters[1].id, 2);
    assert_int_equal(s.voters[1].last_caught_up_ms, t0);
    assert_int_equal(s.voters[1].last_fetch_ms, t0 + 50);
    h.now += 50;
    fetch(&h, 2, 1, e, 1, e, 0); /* reached the LEO seen at the previous fetch (3)? no: 1 < 3 */
    kq_raft_get_status(h_node_of(&h, 1)->r, &s);
    assert_int_equal(s.voters[1].last_caught_up_ms, t0);
    h.now += 50;
    fetch(&h, 2, 1, e, 3, e, 0); /* at the LEO again */
    kq_raft_get_status(h_node_of(&h, 1)->r, &s);
    assert_int_equal(s.voters[1].last_caught_up_ms, t0 + 150);
    assert_int_equal(s.voters[1].log_end_offset, 3);
    h_free(&h);
}

/* ------------------------------------------------------------ leader-side Fetch (1.5) */

static void test_fetch_validation_errors(void **state)
{
    harness h;
    h_init(&h, 3, 0, 6);
    int32_t e = make_leader(&h, 3, 0);
    assert_int_equal(fetch(&h, 2, 1, e - 1, 0, 0, 0)->error, KQ_ERR_FENCED_LEADER_EPOCH);
    assert_int_equal(fetch(&h, 2, 1, e + 1, 0, 0, 0)->error, KQ_ERR_UNKNOWN_LEADER_EPOCH);
    assert_int_equal(fetch(&h, 2, 1, e, 0, 0, -1)->error, KQ_ERR_INVALID_REQUEST);
    assert_int_equal(fetch(&h, 2, 1, e, -1, 0, 0)->error, KQ_ERR_INVALID_REQUEST);
    assert_int_equal(fetch(&h, 2, 1, e, 0, -1, 0)->error, KQ_ERR_INVALID_REQUEST);
    assert_int_equal(fetch(&h, 2, 1, e, 0, e + 1, 0)->error, KQ_ERR_INVALID_REQUEST);
    /* none of them counted as a replica position */
    assert_int_equal(hw_of(&h, 1), -1);
    h_free(&h);
}

static void test_non_leader_answers_fetch_with_leader_hint(void **state)
{
    harness h;
    h_init(&h, 3, 0, 7);
    h_start(&h, 1);
    make_follower(&h, 1, 3, 4);
    const kq_raft_msg *r = fetch(&h, 2, 1, 4, 0, 0, 0);
    assert_int_equal(r->error, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(r->leader_id, 3);
    assert_int_equal(r->epoch, 4);
    h_free(&h);
}

static void test_fetch_with_diverging_epoch_gets_epoch_end(void **state)
{
    harness h;
    h_init(&h, 3, 0, 8);
    disk_append(&h, 1, 1, 5);
    int32_t e = make_leader(&h, 3, 0); /* epoch 2 starts at 5 */
    const kq_raft_msg *r = fetch(&h, 2, 1, e, 7, 1, 0);
    assert_int_equal(r->error, KQ_ERR_NONE);
    assert_true(r->u.fetch_resp.diverging);
    assert_int_equal(r->u.fetch_resp.diverging_epoch, 1);
    assert_int_equal(r->u.fetch_resp.diverging_end_offset, 5);
    assert_int_equal(r->u.fetch_resp.records_from, r->u.fetch_resp.records_to);
    /* the follower's end offset was not taken from a diverging fetch */
    kq_raft_status s;
    kq_raft_get_status(h_node_of(&h, 1)->r, &s);
    assert_int_equal(s.voters[1].log_end_offset, -1);
    h_free(&h);
}

static void test_valid_fetch_returns_records_to_leo(void **state)
{
    harness h;
    h_init(&h, 3, 0, 9);
    int32_t e = make_leader(&h, 3, 0);
    h_propose(&h, 1, 4);
    const kq_raft_msg *r = fetch(&h, 2, 1, e, 0, 0, 500);
    assert_false(r->u.fetch_resp.diverging);
    assert_int_equal(r->u.fetch_resp.records_from, 0);
    assert_int_equal(r->u.fetch_resp.records_to, 5);
    h_free(&h);
}

static void test_fetch_parked_until_new_data(void **state)
{
    harness h;
    h_init(&h, 3, 0, 10);
    int32_t e = make_leader(&h, 3, 0);
    fetch(&h, 2, 1, e, 1, e, 500); /* moves the HW: answered at once */
    assert_int_equal(hw_of(&h, 1), 1);
    assert_null(fetch(&h, 2, 1, e, 1, e, 500)); /* nothing new: parked */
    assert_true(h_last(&h, 1)->next_deadline_ms <= h.now + 500);
    h_propose(&h, 1, 2);
    const kq_raft_msg *r = h_last_msg(&h, 1, KQ_RAFT_FETCH_RESP, 2);
    assert_non_null(r);
    assert_int_equal(r->u.fetch_resp.records_from, 1);
    assert_int_equal(r->u.fetch_resp.records_to, 3);
    h_free(&h);
}

static void test_parked_fetch_expires_after_max_wait(void **state)
{
    harness h;
    h_init(&h, 3, 0, 11);
    int32_t e = make_leader(&h, 3, 0);
    fetch(&h, 2, 1, e, 1, e, 300);
    assert_null(fetch(&h, 2, 1, e, 1, e, 300));
    h.now += 299;
    h_tick(&h, 1);
    assert_null(h_last_msg(&h, 1, KQ_RAFT_FETCH_RESP, 2));
    h.now += 1;
    h_tick(&h, 1);
    const kq_raft_msg *r = h_last_msg(&h, 1, KQ_RAFT_FETCH_RESP, 2);
    assert_non_null(r);
    assert_int_equal(r->error, KQ_ERR_NONE);
    assert_int_equal(r->u.fetch_resp.records_from, r->u.fetch_resp.records_to);
    h_free(&h);
}

static void test_parked_fetch_completed_when_hw_moves(void **state)
{
    harness h;
    h_init(&h, 3, 0, 12);
    h_node_of(&h, 1)->hold_persist = true;
    int32_t e = make_leader(&h, 3, 0);
    h_propose(&h, 1, 2);
    assert_null(fetch(&h, 2, 1, e, 3, e, 500)); /* parked: HW unknown, leader not durable */
    h_persist(&h, 1);
    const kq_raft_msg *r = h_last_msg(&h, 1, KQ_RAFT_FETCH_RESP, 2);
    assert_non_null(r);
    assert_int_equal(r->u.fetch_resp.high_watermark, 3);
    h_free(&h);
}

/* A replica whose last answer carried an older high watermark than the leader's is answered
 * at once, not parked for the whole wait: the high watermark moved between its two Fetches
 * (another voter's Fetch moved it), so a parked Fetch would wait for nothing (issue 8, item 7:
 * brokers learnt every commit 500 ms late). Voters and observers alike. */
static void test_fetch_answered_at_once_when_fetcher_has_an_older_hw(void **state)
{
    harness h;
    h_init(&h, 3, 0, 46);
    int32_t e = make_leader(&h, 3, 0);
    fetch(&h, 2, 1, e, 1, e, 500); /* HW 1: the LeaderChange is committed */
    assert_int_equal(hw_of(&h, 1), 1);
    h_propose(&h, 1, 2);                                    /* LEO 3 */
    const kq_raft_msg *r = fetch(&h, 100, 1, e, 1, e, 500); /* observer gets [1,3), HW 1 */
    assert_non_null(r);
    assert_int_equal(r->u.fetch_resp.high_watermark, 1);
    r = fetch(&h, 3, 1, e, 1, e, 500); /* voter 3 gets [1,3), HW 1 */
    assert_non_null(r);
    assert_int_equal(r->u.fetch_resp.high_watermark, 1);
    r = fetch(&h, 2, 1, e, 3, e, 500); /* voter 2 has [1,3): HW 3 */
    assert_non_null(r);
    assert_int_equal(hw_of(&h, 1), 3);
    r = fetch(&h, 100, 1, e, 3, e, 500); /* nothing new, but the HW moved since its last answer */
    assert_non_null(r);
    assert_int_equal(r->u.fetch_resp.high_watermark, 3);
    r = fetch(&h, 3, 1, e, 3, e, 500); /* the follower voter, by the same rule */
    assert_non_null(r);
    assert_int_equal(r->u.fetch_resp.high_watermark, 3);
    /* Both know HW 3 now: the next Fetches long-poll again. */
    assert_null(fetch(&h, 100, 1, e, 3, e, 500));
    assert_null(fetch(&h, 3, 1, e, 3, e, 500));
    h_free(&h);
}

static void test_parked_fetch_answered_not_leader_on_resign(void **state)
{
    harness h;
    h_init(&h, 3, 0, 13);
    int32_t e = make_leader(&h, 3, 0);
    fetch(&h, 2, 1, e, 1, e, 500);
    assert_null(fetch(&h, 2, 1, e, 1, e, 500));
    h_resign(&h, 1);
    const kq_raft_msg *r = h_last_msg(&h, 1, KQ_RAFT_FETCH_RESP, 2);
    assert_non_null(r);
    assert_int_equal(r->error, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    h_free(&h);
}

static void test_too_many_parked_fetches_are_answered_at_once(void **state)
{
    harness h;
    h_init(&h, 3, 0, 14);
    int32_t e = make_leader(&h, 3, 0);
    fetch(&h, 2, 1, e, 1, e, 500);
    /* observers 100.. park until the table is full (each one's first Fetch is answered at
     * once: it has not seen the high watermark yet) */
    int answered = 0;
    for (int32_t id = 100; id < 100 + KQ_RAFT_MAX_PARKED + 5; id++) {
        assert_non_null(fetch(&h, id, 1, e, 1, e, 500));
        if (fetch(&h, id, 1, e, 1, e, 500))
            answered++;
    }
    assert_int_equal(answered, 5);
    h_free(&h);
}

/* ------------------------------------------------------------ follower-side Fetch */

static void test_follower_fetch_carries_leo_and_last_epoch(void **state)
{
    harness h;
    h_init(&h, 3, 0, 15);
    disk_append(&h, 1, 1, 3);
    disk_append(&h, 1, 2, 2);
    h_start(&h, 1);
    make_follower(&h, 1, 2, 3);
    const kq_raft_msg *m = h_last_msg(&h, 1, KQ_RAFT_FETCH_REQ, 2);
    assert_non_null(m);
    assert_int_equal(m->epoch, 3);
    assert_int_equal(m->u.fetch_req.fetch_offset, 5);
    assert_int_equal(m->u.fetch_req.last_fetched_epoch, 2);
    assert_int_equal(m->u.fetch_req.max_wait_ms, 500);
    h_free(&h);
}

/* The status says whether the leader a node follows has answered it, and when: what readiness
 * and kq_raft_leader_fetch_age_seconds go by, since leader_id alone may name a dead leader
 * (issue 8, item 8). */
static void test_status_tells_when_the_followed_leader_last_answered(void **state)
{
    harness h;
    h_init(&h, 3, 0, 47);
    h_start(&h, 1);
    make_follower(&h, 1, 2, 1);
    kq_raft_status s;
    kq_raft_get_status(h_node_of(&h, 1)->r, &s);
    assert_int_equal(s.leader_id, 2);
    assert_false(s.leader_answered); /* following, not answered yet */
    assert_int_equal(kq_raft_leader_answer_age_ms(&s, h.now), -1);
    kq_raft_batch b[1] = {batch(0, 1, 1, 0)};
    fetch_resp(&h, 2, 1, 1, b, 1);
    uint64_t answered_at = h.now;
    kq_raft_get_status(h_node_of(&h, 1)->r, &s);
    assert_true(s.leader_answered);
    assert_int_equal(s.leader_answer_ms, answered_at);
    assert_int_equal(kq_raft_leader_answer_age_ms(&s, answered_at + 700), 700);
    /* The leader goes silent: past the fetch timeout the node campaigns (prospective) and
     * still names leader 2, but nobody it follows has answered. */
    h_isolate(&h, 1);
    h_run(&h, 5000);
    kq_raft_get_status(h_node_of(&h, 1)->r, &s);
    assert_int_not_equal(s.role, KQ_RAFT_FOLLOWER);
    assert_false(s.leader_answered);
    assert_int_equal(kq_raft_leader_answer_age_ms(&s, h.now), -1);
    h_free(&h);
}

static void test_follower_sends_next_fetch_only_after_persisted(void **state)
{
    harness h;
    h_init(&h, 3, 0, 16);
    h_start(&h, 1);
    h_node_of(&h, 1)->hold_persist = true;
    make_follower(&h, 1, 2, 1);
    kq_raft_batch b[2] = {batch(0, 1, 1, 0), batch(1, 1, 3, 1)};
    fetch_resp(&h, 2, 1, -1, b, 2);
    const kq_raft_update *u = h_last(&h, 1);
    assert_int_equal(u->n_append, 2);
    assert_int_equal(u->append[1].kind, KQ_RAFT_BATCH_FETCHED);
    assert_ptr_equal(u->append[1].data, b[1].data);
    assert_null(h_last_msg(&h, 1, KQ_RAFT_FETCH_REQ, 0));
    h_tick(&h, 1);
    assert_null(h_last_msg(&h, 1, KQ_RAFT_FETCH_REQ, 0));
    h_persist(&h, 1);
    const kq_raft_msg *m = h_last_msg(&h, 1, KQ_RAFT_FETCH_REQ, 2);
    assert_non_null(m);
    assert_int_equal(m->u.fetch_req.fetch_offset, 4);
    assert_int_equal(m->u.fetch_req.last_fetched_epoch, 1);
    h_free(&h);
}

static void test_follower_hw_is_min_of_leader_hw_and_durable_end(void **state)
{
    harness h;
    h_init(&h, 3, 0, 17);
    h_start(&h, 1);
    h_node_of(&h, 1)->hold_persist = true;
    make_follower(&h, 1, 2, 1);
    kq_raft_batch b[1] = {batch(0, 1, 4, 0)};
    fetch_resp(&h, 2, 1, 10, b, 1);
    assert_int_equal(hw_of(&h, 1), 0); /* nothing durable yet */
    kq_raft_status st;
    kq_raft_get_status(h_node_of(&h, 1)->r, &st);
    assert_int_equal(st.leader_high_watermark, 10); /* what a broker's readiness waits for */
    h_persist(&h, 1);
    assert_int_equal(hw_of(&h, 1), 4);
    assert_true(h_last(&h, 1)->hw_changed);
    h_free(&h);
}

static void test_follower_hw_never_decreases(void **state)
{
    harness h;
    h_init(&h, 3, 0, 18);
    disk_append(&h, 1, 1, 6);
    h_start(&h, 1);
    make_follower(&h, 1, 2, 1);
    fetch_resp(&h, 2, 1, 5, NULL, 0);
    assert_int_equal(hw_of(&h, 1), 5);
    h_deliver_all(&h); /* drop the next fetch on the floor: node 2 is down */
    h_run(&h, 5);
    fetch_resp(&h, 2, 1, 3, NULL, 0);
    assert_int_equal(hw_of(&h, 1), 5);
    fetch_resp(&h, 2, 1, -1, NULL, 0);
    assert_int_equal(hw_of(&h, 1), 5);
    h_free(&h);
}

static void test_diverging_epoch_truncates_follower(void **state)
{
    harness h;
    h_init(&h, 3, 0, 19);
    disk_append(&h, 1, 1, 3); /* 0..2 */
    disk_append(&h, 1, 2, 2); /* 3..4, never committed */
    h_start(&h, 1);
    make_follower(&h, 1, 2, 3);
    kq_raft_msg r;
    memset(&r, 0, sizeof(r));
    r.type = KQ_RAFT_FETCH_RESP;
    r.from = 2;
    r.epoch = 3;
    r.leader_id = 2;
    r.u.fetch_resp.high_watermark = 3;
    r.u.fetch_resp.diverging = true;
    r.u.fetch_resp.diverging_epoch = 1;
    r.u.fetch_resp.diverging_end_offset = 4; /* leader's epoch 1 ends later than ours */
    h_inject(&h, 1, &r);
    const kq_raft_update *u = h_last(&h, 1);
    assert_int_equal(u->truncate_to, 3); /* min(4, our end of epoch 1 = 3, LEO 5) */
    assert_false(u->fatal);
    assert_int_equal(h_leo(&h, 1), 3);
    const kq_raft_msg *m = h_last_msg(&h, 1, KQ_RAFT_FETCH_REQ, 2);
    assert_non_null(m);
    assert_int_equal(m->u.fetch_req.fetch_offset, 3);
    assert_int_equal(m->u.fetch_req.last_fetched_epoch, 1);
    h_free(&h);
}

static void test_truncation_below_hw_is_fatal(void **state)
{
    harness h;
    h_init(&h, 3, 0, 20);
    disk_append(&h, 1, 1, 6);
    h_start(&h, 1);
    make_follower(&h, 1, 2, 2);
    fetch_resp(&h, 2, 2, 5, NULL, 0);
    assert_int_equal(hw_of(&h, 1), 5);
    h_run(&h, 5);
    kq_raft_msg r;
    memset(&r, 0, sizeof(r));
    r.type = KQ_RAFT_FETCH_RESP;
    r.from = 2;
    r.epoch = 2;
    r.leader_id = 2;
    r.u.fetch_resp.diverging = true;
    r.u.fetch_resp.diverging_epoch = 1;
    r.u.fetch_resp.diverging_end_offset = 3;
    h_inject(&h, 1, &r);
    const kq_raft_update *u = h_last(&h, 1);
    assert_true(u->fatal);
    assert_non_null(u->fatal_reason);
    assert_int_equal(u->truncate_to, -1);
    assert_int_equal(h_leo(&h, 1), 6);
    h_free(&h);
}

static kq_raft_msg diverging_resp(int32_t leader, int32_t epoch, int64_t hw, int32_t div_epoch,
                                  int64_t div_end)
{
    kq_raft_msg r;
    memset(&r, 0, sizeof(r));
    r.type = KQ_RAFT_FETCH_RESP;
    r.from = leader;
    r.epoch = epoch;
    r.leader_id = leader;
    r.u.fetch_resp.high_watermark = hw;
    r.u.fetch_resp.diverging = true;
    r.u.fetch_resp.diverging_epoch = div_epoch;
    r.u.fetch_resp.diverging_end_offset = div_end;
    return r;
}

/* Rule: the follower's own end offset for a diverging epoch it does not hold, when it has no
 * cached epoch <= that epoch, is the start of its first cached epoch (its log start); it
 * truncates to min(leader's end, own end, LEO). */
static void test_diverging_epoch_older_than_whole_log_truncates_to_log_start(void **state)
{
    harness h;
    h_init(&h, 3, 0, 40);
    disk_append(&h, 1, 2, 20); /* epoch 2 only: 0..19, 20..34 */
    disk_append(&h, 1, 2, 15);
    h_start(&h, 1);
    make_follower(&h, 1, 2, 3);
    /* the leader holds epoch 1 at [0,15), then epoch 3 */
    kq_raft_msg r = diverging_resp(2, 3, -1, 1, 15);
    h_inject(&h, 1, &r);
    const kq_raft_update *u = h_last(&h, 1);
    assert_false(u->fatal);
    assert_int_equal(u->truncate_to, 0);
    assert_int_equal(h_leo(&h, 1), 0);
    assert_int_equal(h_node_of(&h, 1)->truncate_errors, 0);
    const kq_raft_msg *m = h_last_msg(&h, 1, KQ_RAFT_FETCH_REQ, 2);
    assert_non_null(m);
    assert_int_equal(m->u.fetch_req.fetch_offset, 0);
    assert_int_equal(m->u.fetch_req.last_fetched_epoch, 0);
    /* the public lookup keeps its documented meaning: no cached epoch <= 1 */
    int32_t oe = -1;
    int64_t oend = -1;
    disk_append(&h, 3, 2, 4);
    h_start(&h, 3);
    assert_false(kq_raft_end_offset_for_epoch(h_node_of(&h, 3)->r, 1, &oe, &oend));
    h_free(&h);
}

/* The same situation end to end: the follower converges on the leader's log instead of
 * refetching the same diverging offset forever. */
static void test_follower_holding_only_a_later_epoch_converges(void **state)
{
    harness h;
    h_init(&h, 3, 0, 41);
    for (int32_t id = 2; id <= 3; id++) {
        disk_append(&h, id, 1, 15); /* epoch 1 at [0,15), epoch 3 at [15,20) */
        disk_append(&h, id, 3, 5);
    }
    disk_append(&h, 1, 2, 20); /* node 1: epoch 2 only, [0,35) */
    disk_append(&h, 1, 2, 15);
    h_start_all(&h);
    assert_true(h_run_until(&h, 30000, h_has_leader));
    int32_t l = h_leader(&h);
    assert_int_not_equal(l, 1);
    h_propose(&h, l, 2);
    h_run(&h, 5000);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_FOLLOWER);
    assert_int_equal(h_leo(&h, 1), h_leo(&h, l));
    assert_int_equal(h_node_of(&h, 1)->hw, h_node_of(&h, l)->hw);
    assert_int_equal(h_node_of(&h, 1)->truncate_errors, 0);
    assert_false(h_node_of(&h, 1)->fatal);
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

/* Rule: the core only asks to truncate at batch boundaries of its own log. When the follower
 * does not hold the diverging epoch, the leader's end of that epoch may fall inside one of the
 * follower's batches of an earlier epoch: it truncates to the start of its next epoch instead
 * (nothing above it is on the leader) and the next Fetch gets the exact end. */
static void test_truncation_target_inside_a_batch_goes_to_a_known_boundary(void **state)
{
    harness h;
    h_init(&h, 3, 0, 42);
    disk_append(&h, 1, 1, 3); /* epoch 1: 0..2, 3..7; epoch 3: 8..9 */
    disk_append(&h, 1, 1, 5);
    disk_append(&h, 1, 3, 2);
    h_start(&h, 1);
    make_follower(&h, 1, 2, 4);
    /* the leader holds epoch 1 at [0,3), epoch 2 at [3,5), then epoch 4: for our last epoch 3
     * it answers its end of epoch 2, offset 5, inside our epoch-1 batch 3..7 */
    kq_raft_msg r = diverging_resp(2, 4, -1, 2, 5);
    h_inject(&h, 1, &r);
    const kq_raft_update *u = h_last(&h, 1);
    assert_false(u->fatal);
    assert_int_equal(u->truncate_to, 8);
    assert_int_equal(h_node_of(&h, 1)->truncate_errors, 0);
    const kq_raft_msg *m = h_last_msg(&h, 1, KQ_RAFT_FETCH_REQ, 2);
    assert_non_null(m);
    assert_int_equal(m->u.fetch_req.fetch_offset, 8);
    assert_int_equal(m->u.fetch_req.last_fetched_epoch, 1);
    /* the leader's end of epoch 1 is a boundary of both logs: taken exactly */
    r = diverging_resp(2, 4, -1, 1, 3);
    h_inject(&h, 1, &r);
    u = h_last(&h, 1);
    assert_false(u->fatal);
    assert_int_equal(u->truncate_to, 3);
    assert_int_equal(h_leo(&h, 1), 3);
    assert_int_equal(h_node_of(&h, 1)->truncate_errors, 0);
    m = h_last_msg(&h, 1, KQ_RAFT_FETCH_REQ, 2);
    assert_non_null(m);
    assert_int_equal(m->u.fetch_req.fetch_offset, 3);
    assert_int_equal(m->u.fetch_req.last_fetched_epoch, 1);
    h_free(&h);
}

/* Rule: the follower never truncates deeper than the diverging point into an epoch it shares
 * with the leader: entries there may be committed although it has not learnt the HW yet. */
static void test_truncation_never_goes_below_the_diverging_point_of_a_shared_epoch(void **state)
{
    harness h;
    h_init(&h, 3, 0, 43);
    disk_append(&h, 1, 1, 3); /* epoch 1: 0..2, 3..7; epoch 2: 8..9 */
    disk_append(&h, 1, 1, 5);
    disk_append(&h, 1, 2, 2);
    h_start(&h, 1);
    make_follower(&h, 1, 2, 3);
    kq_raft_msg r = diverging_resp(2, 3, -1, 1, 3); /* the leader's epoch 1 ends at 3 */
    h_inject(&h, 1, &r);
    const kq_raft_update *u = h_last(&h, 1);
    assert_false(u->fatal);
    assert_int_equal(u->truncate_to, 3); /* not 0, the start of our epoch-1 segment */
    assert_int_equal(h_leo(&h, 1), 3);
    assert_int_equal(h_node_of(&h, 1)->truncate_errors, 0);
    h_free(&h);
}

/* Rule: a truncation below the HW is fatal, also for the HW a node knew before it led an epoch
 * (a new leader's HW is unknown again, the committed offset it knew is not). */
static void test_former_leader_never_truncates_below_the_hw_it_knew(void **state)
{
    harness h;
    h_init(&h, 3, 0, 45);
    disk_append(&h, 1, 1, 3); /* epoch 1: 0..2, 3..7, 8..11 */
    disk_append(&h, 1, 1, 5);
    disk_append(&h, 1, 1, 4);
    h_start(&h, 1);
    make_follower(&h, 1, 2, 1);
    fetch_resp(&h, 2, 1, 8, NULL, 0);
    assert_int_equal(hw_of(&h, 1), 8);
    /* it wins epoch 2 (LeaderChange at 12) and its HW is unknown again */
    h_expire(&h, 1);
    kq_raft_msg g = vote_resp(2, 1, true);
    h_inject(&h, 1, &g);
    g = vote_resp(2, 2, true);
    h_inject(&h, 1, &g);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_LEADER);
    assert_int_equal(h_epoch(&h, 1), 2);
    assert_int_equal(hw_of(&h, 1), -1);
    /* a leader of epoch 3 claims epoch 1 ended at 3: offsets 3..7 were committed */
    make_follower(&h, 1, 3, 3);
    kq_raft_msg r = diverging_resp(3, 3, -1, 1, 3);
    h_inject(&h, 1, &r);
    const kq_raft_update *u = h_last(&h, 1);
    assert_true(u->fatal);
    assert_non_null(u->fatal_reason);
    assert_int_equal(u->truncate_to, -1);
    assert_int_equal(h_leo(&h, 1), 13);
    h_free(&h);
}

static void test_follower_rejects_non_contiguous_batches(void **state)
{
    harness h;
    h_init(&h, 3, 0, 21);
    h_start(&h, 1);
    make_follower(&h, 1, 2, 2);
    kq_raft_batch gap[1] = {batch(1, 1, 2, 0)};                     /* base != LEO */
    kq_raft_batch future[1] = {batch(0, 3, 2, 0)};                  /* epoch above the leader's */
    kq_raft_batch back[2] = {batch(0, 2, 1, 0), batch(1, 1, 1, 1)}; /* epochs go down */
    const kq_raft_batch *bad[3] = {gap, future, back};
    size_t n[3] = {1, 1, 2};
    for (int i = 0; i < 3; i++) {
        fetch_resp(&h, 2, 2, -1, bad[i], n[i]);
        assert_int_equal(h_last(&h, 1)->n_append, 0);
        assert_int_equal(h_leo(&h, 1), 0);
        /* it backs off retry_backoff_ms and fetches again */
        assert_null(h_last_msg(&h, 1, KQ_RAFT_FETCH_REQ, 0));
        assert_int_equal(h_last(&h, 1)->next_deadline_ms, h.now + 20);
        h_expire(&h, 1);
        assert_non_null(h_last_msg(&h, 1, KQ_RAFT_FETCH_REQ, 2));
    }
    h_free(&h);
}

static void test_follower_retries_after_transport_error(void **state)
{
    harness h;
    h_init(&h, 3, 0, 22);
    h_start(&h, 1);
    make_follower(&h, 1, 2, 2);
    kq_raft_msg r;
    memset(&r, 0, sizeof(r));
    r.type = KQ_RAFT_FETCH_RESP;
    r.from = 2;
    r.error = KQ_ERR_REQUEST_TIMED_OUT;
    h_inject(&h, 1, &r);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_FOLLOWER);
    assert_null(h_last_msg(&h, 1, KQ_RAFT_FETCH_REQ, 0));
    assert_int_equal(h_last(&h, 1)->next_deadline_ms, h.now + 20);
    h_expire(&h, 1);
    assert_non_null(h_last_msg(&h, 1, KQ_RAFT_FETCH_REQ, 2));
    h_free(&h);
}

static void test_stale_epoch_fetch_response_is_ignored(void **state)
{
    harness h;
    h_init(&h, 3, 0, 23);
    h_start(&h, 1);
    make_follower(&h, 1, 2, 3);
    kq_raft_batch b[1] = {batch(0, 1, 2, 0)};
    fetch_resp(&h, 2, 2, 2, b, 1);
    assert_int_equal(h_last(&h, 1)->n_append, 0);
    assert_int_equal(h_leo(&h, 1), 0);
    assert_int_equal(hw_of(&h, 1), -1);
    assert_int_equal(h_epoch(&h, 1), 3);
    h_free(&h);
}

static void test_fenced_fetch_response_follows_new_leader(void **state)
{
    harness h;
    h_init(&h, 3, 0, 24);
    h_start(&h, 1);
    make_follower(&h, 1, 2, 3);
    kq_raft_msg r;
    memset(&r, 0, sizeof(r));
    r.type = KQ_RAFT_FETCH_RESP;
    r.from = 2;
    r.error = KQ_ERR_FENCED_LEADER_EPOCH;
    r.epoch = 5;
    r.leader_id = 3;
    h_inject(&h, 1, &r);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_FOLLOWER);
    assert_int_equal(h_epoch(&h, 1), 5);
    assert_int_equal(h_node_of(&h, 1)->qs.leader_id, 3);
    assert_non_null(h_last_msg(&h, 1, KQ_RAFT_FETCH_REQ, 3));
    h_free(&h);
}

/* ------------------------------------------------------------ observers, proposals */

static bool observer_caught_up(harness *h)
{
    int32_t l = h_leader(h);
    return l && h_role(h, 4) == KQ_RAFT_FOLLOWER && h_leo(h, 4) == h_leo(h, l) &&
           hw_of(h, 4) == hw_of(h, l) && hw_of(h, l) > 0;
}

static void test_observer_discovers_leader_through_not_leader_hint(void **state)
{
    harness h;
    h_init(&h, 3, 1, 25);
    h_start_all(&h);
    assert_true(h_run_until(&h, 30000, h_has_leader));
    int32_t l = h_leader(&h);
    h_propose(&h, l, 3);
    assert_true(h_run_until(&h, 30000, observer_caught_up));
    kq_raft_status s;
    kq_raft_get_status(h_node_of(&h, 4)->r, &s);
    assert_int_equal(s.leader_id, l);
    assert_false(s.is_voter);
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

static void test_propose_rejected_on_non_leader(void **state)
{
    harness h;
    h_init(&h, 3, 0, 26);
    h_start(&h, 1);
    h_propose(&h, 1, 1);
    assert_int_equal(h_last(&h, 1)->propose_error, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(h_last(&h, 1)->n_append, 0);
    h_free(&h);
}

static void test_propose_rejects_non_positive_count(void **state)
{
    harness h;
    h_init(&h, 3, 0, 27);
    make_leader(&h, 3, 0);
    int64_t leo = h_leo(&h, 1);
    h_propose(&h, 1, 0);
    assert_int_equal(h_last(&h, 1)->propose_error, KQ_ERR_INVALID_REQUEST);
    h_propose(&h, 1, -3);
    assert_int_equal(h_last(&h, 1)->propose_error, KQ_ERR_INVALID_REQUEST);
    assert_int_equal(h_leo(&h, 1), leo);
    h_propose(&h, 1, 7);
    const kq_raft_update *u = h_last(&h, 1);
    assert_int_equal(u->propose_error, 0);
    assert_int_equal(u->propose_base_offset, leo);
    assert_int_equal(u->propose_epoch, h_epoch(&h, 1));
    assert_int_equal(u->append[0].count, 7);
    assert_int_equal(u->append[0].kind, KQ_RAFT_BATCH_PROPOSED);
    h_free(&h);
}

static void test_status_lists_leader_first_then_voters_then_observers(void **state)
{
    harness h;
    h_init(&h, 3, 1, 28);
    int32_t e = make_leader(&h, 3, 1);
    fetch(&h, 4, 1, e, 1, e, 0);
    fetch(&h, 3, 1, e, 1, e, 0);
    kq_raft_status s;
    kq_raft_get_status(h_node_of(&h, 1)->r, &s);
    assert_int_equal(s.n_voters, 3);
    assert_int_equal(s.voters[0].id, 1);
    assert_int_equal(s.voters[1].id, 2);
    assert_int_equal(s.voters[1].log_end_offset, -1);
    assert_int_equal(s.voters[2].id, 3);
    assert_int_equal(s.voters[2].log_end_offset, 1);
    assert_int_equal(s.n_observers, 1);
    assert_int_equal(s.observers[0].id, 4);
    /* observers that stopped fetching 300 s ago are dropped */
    h.now += 300001;
    fetch(&h, 2, 1, e, 1, e, 0); /* a voter keeps the quorum alive */
    assert_int_equal(h_role(&h, 1), KQ_RAFT_LEADER);
    kq_raft_get_status(h_node_of(&h, 1)->r, &s);
    assert_int_equal(s.n_observers, 0);
    h_free(&h);
}

/* ------------------------------------------------------------ scenarios */

static bool leader_hw_reaches_20(harness *h)
{
    int32_t l = h_leader(h);
    return l && hw_of(h, l) >= 20;
}

static void test_committed_entries_survive_leader_crash(void **state)
{
    harness h;
    h_init(&h, 3, 0, 29);
    h_start_all(&h);
    assert_true(h_run_until(&h, 30000, h_has_leader));
    int32_t l1 = h_leader(&h);
    for (int i = 0; i < 5; i++)
        h_propose(&h, l1, 2);
    h_run(&h, 200);
    int64_t committed = hw_of(&h, l1);
    assert_true(committed >= 11);
    h_crash(&h, l1);
    assert_true(h_run_until(&h, 30000, h_has_leader));
    int32_t l2 = h_leader(&h);
    assert_int_not_equal(l2, l1);
    assert_true(h_leo(&h, l2) >= committed);
    for (int i = 0; i < 5; i++)
        h_propose(&h, l2, 2);
    h_start(&h, l1);
    assert_true(h_run_until(&h, 30000, leader_hw_reaches_20));
    h_run(&h, 5000); /* the restarted node hears of the new epoch within a few timeouts */
    assert_true(h_committed_prefix_matches(&h));
    assert_int_equal(h_leo(&h, l1), h_leo(&h, l2));
    h_free(&h);
}

static int32_t old_leader;

static bool other_leader(harness *h)
{
    int32_t l = h_leader(h);
    return l && l != old_leader;
}

static void test_uncommitted_entries_of_old_leader_are_truncated(void **state)
{
    harness h;
    h_init(&h, 3, 0, 30);
    h_start_all(&h);
    assert_true(h_run_until(&h, 30000, h_has_leader));
    int32_t l1 = h_leader(&h);
    h_run(&h, 500);
    h_isolate(&h, l1);
    h_propose(&h, l1, 5); /* never replicated */
    old_leader = l1;
    assert_true(h_run_until(&h, 30000, other_leader));
    h_run(&h, 4000);
    int32_t l2 = h_leader(&h);
    assert_int_not_equal(l2, l1);
    h_propose(&h, l2, 1);
    h_heal(&h);
    h_run(&h, 5000);
    assert_int_equal(h_role(&h, l1), KQ_RAFT_FOLLOWER);
    assert_int_equal(h_leo(&h, l1), h_leo(&h, l2));
    assert_false(h_node_of(&h, l1)->fatal);
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

static void test_random_faults_keep_committed_prefix(void **state)
{
    for (uint64_t seed = 1; seed <= 40; seed++) {
        harness h;
        h_init(&h, 5, 1, seed);
        h_start_all(&h);
        uint64_t x = seed;
        for (int round = 0; round < 30; round++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            int32_t victim = (int32_t)(1 + (x >> 33) % 5);
            switch ((x >> 20) % 4) {
            case 0:
                h_heal(&h);
                break;
            case 1:
                h_isolate(&h, victim);
                break;
            case 2:
                if (h_node_of(&h, victim)->up)
                    h_crash(&h, victim);
                break;
            default:
                break;
            }
            for (int32_t id = 1; id <= 6; id++)
                if (!h_node_of(&h, id)->up && (x >> 40) % 2)
                    h_start(&h, id);
            int32_t l = h_leader(&h);
            if (l)
                h_propose(&h, l, 1 + (int32_t)((x >> 50) % 3));
            h_run(&h, 700);
            assert_true(h_committed_prefix_matches(&h));
            for (int32_t id = 1; id <= 6; id++) {
                assert_false(h_node_of(&h, id)->fatal);
                assert_int_equal(h_node_of(&h, id)->append_errors, 0);
                assert_int_equal(h_node_of(&h, id)->truncate_errors, 0);
                assert_int_equal(h_node_of(&h, id)->step_errors, 0);
            }
        }
        h_heal(&h);
        for (int32_t id = 1; id <= 6; id++)
            if (!h_node_of(&h, id)->up)
                h_start(&h, id);
        assert_true(h_run_until(&h, 30000, h_has_leader));
        int32_t l = h_leader(&h);
        h_propose(&h, l, 1);
        h_run(&h, 5000);
        l = h_leader(&h);
        assert_true(l != 0);
        for (int32_t id = 1; id <= 6; id++)
            assert_int_equal(h_leo(&h, id), h_leo(&h, l));
        assert_true(h_committed_prefix_matches(&h));
        h_free(&h);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leader_hw_requires_entry_of_current_epoch),
        cmocka_unit_test(test_leader_hw_counts_only_durable_own_offset),
        cmocka_unit_test(test_observer_fetches_do_not_move_hw),
        cmocka_unit_test(test_leader_hw_never_moves_backward),
        cmocka_unit_test(test_fetch_records_caught_up_time),
        cmocka_unit_test(test_fetch_validation_errors),
        cmocka_unit_test(test_non_leader_answers_fetch_with_leader_hint),
        cmocka_unit_test(test_fetch_with_diverging_epoch_gets_epoch_end),
        cmocka_unit_test(test_valid_fetch_returns_records_to_leo),
        cmocka_unit_test(test_fetch_parked_until_new_data),
        cmocka_unit_test(test_parked_fetch_expires_after_max_wait),
        cmocka_unit_test(test_parked_fetch_completed_when_hw_moves),
        cmocka_unit_test(test_fetch_answered_at_once_when_fetcher_has_an_older_hw),
        cmocka_unit_test(test_parked_fetch_answered_not_leader_on_resign),
        cmocka_unit_test(test_too_many_parked_fetches_are_answered_at_once),
        cmocka_unit_test(test_follower_fetch_carries_leo_and_last_epoch),
        cmocka_unit_test(test_status_tells_when_the_followed_leader_last_answered),
        cmocka_unit_test(test_follower_sends_next_fetch_only_after_persisted),
        cmocka_unit_test(test_follower_hw_is_min_of_leader_hw_and_durable_end),
        cmocka_unit_test(test_follower_hw_never_decreases),
        cmocka_unit_test(test_diverging_epoch_truncates_follower),
        cmocka_unit_test(test_truncation_below_hw_is_fatal),
        cmocka_unit_test(test_diverging_epoch_older_than_whole_log_truncates_to_log_start),
        cmocka_unit_test(test_follower_holding_only_a_later_epoch_converges),
        cmocka_unit_test(test_truncation_target_inside_a_batch_goes_to_a_known_boundary),
        cmocka_unit_test(test_truncation_never_goes_below_the_diverging_point_of_a_shared_epoch),
        cmocka_unit_test(test_former_leader_never_truncates_below_the_hw_it_knew),
        cmocka_unit_test(test_follower_rejects_non_contiguous_batches),
        cmocka_unit_test(test_follower_retries_after_transport_error),
        cmocka_unit_test(test_stale_epoch_fetch_response_is_ignored),
        cmocka_unit_test(test_fenced_fetch_response_follows_new_leader),
        cmocka_unit_test(test_observer_discovers_leader_through_not_leader_hint),
        cmocka_unit_test(test_propose_rejected_on_non_leader),
        cmocka_unit_test(test_propose_rejects_non_positive_count),
        cmocka_unit_test(test_status_lists_leader_first_then_voters_then_observers),
        cmocka_unit_test(test_committed_entries_survive_leader_crash),
        cmocka_unit_test(test_uncommitted_entries_of_old_leader_are_truncated),
        cmocka_unit_test(test_random_faults_keep_committed_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
