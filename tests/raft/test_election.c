/* Raft rule tests against the pure core: states, start-up, elections, pre-vote, resignation
 * (reference/kraft-semantics.md 1.2-1.4). One rule per test, named after the rule. */
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

/* 3 voters (ids 1-3), all started; runs until a leader exists. Returns the leader id. */
static int32_t elect(harness *h, int voters, int observers, uint64_t seed)
{
    h_init(h, voters, observers, seed);
    h_start_all(h);
    assert_true(h_run_until(h, 30000, h_has_leader));
    return h_leader(h);
}

/* A voter (id 1 of 3) that became Follower of `leader` at `epoch` through BeginQuorumEpoch. */
static void make_follower(harness *h, int32_t leader, int32_t epoch)
{
    kq_raft_msg b;
    memset(&b, 0, sizeof(b));
    b.type = KQ_RAFT_BEGIN_EPOCH_REQ;
    b.from = leader;
    b.epoch = epoch;
    b.leader_id = leader;
    assert_int_equal(h_inject(h, 1, &b), 0);
    assert_int_equal(h_role(h, 1), KQ_RAFT_FOLLOWER);
}

static void one_node(harness *h, int voters)
{
    h_init(h, voters, 0, 7);
    h_start(h, 1);
}

/* ------------------------------------------------------------ start-up (1.2) */

static void test_single_voter_elects_itself_at_start(void **state)
{
    harness h;
    h_init(&h, 1, 0, 1);
    h_start(&h, 1);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_LEADER);
    assert_int_equal(h_epoch(&h, 1), 1);
    assert_int_equal(h_node_of(&h, 1)->qs.leader_id, 1);
    /* its LeaderChange batch became durable and is therefore committed */
    assert_int_equal(h_node_of(&h, 1)->hw, 1);
    h_free(&h);
}

static void test_restart_as_leader_becomes_resigned(void **state)
{
    harness h;
    h_init(&h, 3, 0, 2);
    h_node_of(&h, 1)->qs = (kq_raft_qstate){.epoch = 4, .voted_id = 1, .leader_id = 1};
    h_disk_append(&h, 1, 4, 3);
    h_start(&h, 1);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_RESIGNED);
    assert_int_equal(h_epoch(&h, 1), 4);
    /* resigned is in memory only */
    assert_false(h_last(&h, 1)->persist_qstate);
    /* it never grants a vote in that epoch */
    kq_raft_msg v = h_vote_req(2, 1, 4, 4, 100, false);
    h_inject(&h, 1, &v);
    const kq_raft_msg *r = h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 2);
    assert_non_null(r);
    assert_false(r->u.vote_resp.granted);
    /* nor answers a Fetch as leader */
    kq_raft_msg f = h_fetch_req(2, 1, 4, 0, 0, 0);
    h_inject(&h, 1, &f);
    r = h_last_msg(&h, 1, KQ_RAFT_FETCH_RESP, 2);
    assert_non_null(r);
    assert_int_equal(r->error, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    h_free(&h);
}

static void test_restart_with_self_vote_becomes_candidate(void **state)
{
    harness h;
    h_init(&h, 3, 0, 3);
    h_node_of(&h, 1)->qs = (kq_raft_qstate){.epoch = 5, .voted_id = 1, .leader_id = -1};
    h_start(&h, 1);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_CANDIDATE);
    assert_int_equal(h_epoch(&h, 1), 5);
    /* it asks the others for real votes in the same epoch */
    int i = h_find(&h, KQ_RAFT_VOTE_REQ, 1, 2);
    assert_true(i >= 0);
    assert_int_equal(h_msg(&h, i)->epoch, 5);
    assert_false(h_msg(&h, i)->u.vote_req.pre_vote);
    h_free(&h);
}

static void test_restart_with_other_vote_keeps_that_vote(void **state)
{
    harness h;
    h_init(&h, 3, 0, 4);
    h_node_of(&h, 1)->qs = (kq_raft_qstate){.epoch = 5, .voted_id = 2, .leader_id = -1};
    h_start(&h, 1);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_UNATTACHED);
    kq_raft_msg v3 = h_vote_req(3, 1, 5, 0, 0, false);
    h_inject(&h, 1, &v3);
    assert_false(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 3)->u.vote_resp.granted);
    kq_raft_msg v2 = h_vote_req(2, 1, 5, 0, 0, false);
    h_inject(&h, 1, &v2);
    assert_true(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 2)->u.vote_resp.granted);
    h_free(&h);
}

static void test_restart_with_known_leader_becomes_follower(void **state)
{
    harness h;
    h_init(&h, 3, 0, 5);
    h_node_of(&h, 1)->qs = (kq_raft_qstate){.epoch = 6, .voted_id = -1, .leader_id = 3};
    h_start(&h, 1);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_FOLLOWER);
    int i = h_find(&h, KQ_RAFT_FETCH_REQ, 1, 3);
    assert_true(i >= 0);
    assert_int_equal(h_msg(&h, i)->epoch, 6);
    h_free(&h);
}

static void test_restart_with_stale_qstate_epoch_uses_log_epoch(void **state)
{
    harness h;
    h_init(&h, 3, 0, 6);
    h_node_of(&h, 1)->qs = (kq_raft_qstate){.epoch = 2, .voted_id = 1, .leader_id = -1};
    h_disk_append(&h, 1, 2, 1);
    h_disk_append(&h, 1, 7, 1);
    h_start(&h, 1);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_UNATTACHED);
    assert_int_equal(h_epoch(&h, 1), 7);
    assert_true(h_last(&h, 1)->persist_qstate);
    assert_int_equal(h_node_of(&h, 1)->qs.epoch, 7);
    assert_int_equal(h_node_of(&h, 1)->qs.voted_id, -1);
    h_free(&h);
}

/* ------------------------------------------------------------ pre-vote (KIP-996) */

static void test_election_timeout_starts_prevote_without_epoch_bump(void **state)
{
    harness h;
    one_node(&h, 3);
    int writes = h_node_of(&h, 1)->n_qstate_writes;
    h_expire(&h, 1);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_PROSPECTIVE);
    assert_int_equal(h_epoch(&h, 1), 0);
    assert_int_equal(h_node_of(&h, 1)->n_qstate_writes, writes); /* not durable */
    for (int32_t to = 2; to <= 3; to++) {
        const kq_raft_msg *m = h_last_msg(&h, 1, KQ_RAFT_VOTE_REQ, to);
        assert_non_null(m);
        assert_true(m->u.vote_req.pre_vote);
        assert_int_equal(m->epoch, 1); /* candidate epoch = epoch + 1 */
    }
    h_free(&h);
}

static void test_election_timer_is_randomized_within_t_and_2t(void **state)
{
    for (uint64_t seed = 1; seed < 40; seed++) {
        harness h;
        h_init(&h, 3, 0, seed);
        h_start(&h, 1);
        uint64_t d = h_node_of(&h, 1)->deadline - h.now;
        assert_true(d >= 1000 && d < 2000);
        h_free(&h);
    }
}

static void test_prevote_does_not_change_receiver_epoch(void **state)
{
    harness h;
    one_node(&h, 3);
    kq_raft_msg v = h_vote_req(2, 1, 9, 0, 0, true);
    h_inject(&h, 1, &v);
    const kq_raft_msg *r = h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 2);
    assert_non_null(r);
    assert_true(r->u.vote_resp.granted);
    assert_int_equal(r->epoch, 0);
    assert_int_equal(h_epoch(&h, 1), 0);
    assert_false(h_last(&h, 1)->persist_qstate);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_UNATTACHED);
    /* and a pre-vote grant is not a vote: a real candidate of epoch 9 still gets one */
    kq_raft_msg v3 = h_vote_req(3, 1, 9, 0, 0, false);
    h_inject(&h, 1, &v3);
    assert_true(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 3)->u.vote_resp.granted);
    h_free(&h);
}

static void test_prevote_rejected_when_candidate_epoch_not_higher(void **state)
{
    harness h;
    one_node(&h, 3);
    kq_raft_msg hi = h_vote_req(2, 1, 3, 0, 0, false); /* moves node 1 to epoch 3 */
    h_inject(&h, 1, &hi);
    kq_raft_msg v = h_vote_req(3, 1, 3, 0, 0, true);
    h_inject(&h, 1, &v);
    const kq_raft_msg *r = h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 3);
    assert_false(r->u.vote_resp.granted);
    assert_int_equal(r->error, KQ_ERR_NONE);
    h_free(&h);
}

static void test_prevote_majority_makes_candidate_with_durable_self_vote(void **state)
{
    harness h;
    one_node(&h, 3);
    h_expire(&h, 1);
    kq_raft_msg g;
    memset(&g, 0, sizeof(g));
    g.type = KQ_RAFT_VOTE_RESP;
    g.from = 2;
    g.epoch = 0;
    g.leader_id = -1;
    g.u.vote_resp.granted = true;
    h_inject(&h, 1, &g);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_CANDIDATE);
    assert_int_equal(h_epoch(&h, 1), 1);
    const kq_raft_update *u = h_last(&h, 1);
    assert_true(u->persist_qstate);
    assert_int_equal(u->qstate.epoch, 1);
    assert_int_equal(u->qstate.voted_id, 1);
    /* the real vote goes to node 2 now; node 3's pre-vote is still in flight */
    const kq_raft_msg *m = h_last_msg(&h, 1, KQ_RAFT_VOTE_REQ, 2);
    assert_non_null(m);
    assert_false(m->u.vote_req.pre_vote);
    assert_int_equal(m->epoch, 1);
    assert_null(h_last_msg(&h, 1, KQ_RAFT_VOTE_REQ, 3));
    /* when node 3's late pre-vote answer arrives, the real request follows */
    g.from = 3;
    h_inject(&h, 1, &g);
    m = h_last_msg(&h, 1, KQ_RAFT_VOTE_REQ, 3);
    assert_non_null(m);
    assert_false(m->u.vote_req.pre_vote);
    h_free(&h);
}

static void test_follower_with_live_leader_rejects_prevote(void **state)
{
    harness h;
    one_node(&h, 3);
    make_follower(&h, 2, 1);
    /* a successful (empty) Fetch response from the leader */
    kq_raft_msg f;
    memset(&f, 0, sizeof(f));
    f.type = KQ_RAFT_FETCH_RESP;
    f.from = 2;
    f.epoch = 1;
    f.leader_id = 2;
    f.u.fetch_resp.high_watermark = -1;
    h_inject(&h, 1, &f);
    kq_raft_msg v = h_vote_req(3, 1, 2, 0, 0, true);
    h_inject(&h, 1, &v);
    const kq_raft_msg *r = h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 3);
    assert_false(r->u.vote_resp.granted);
    assert_int_equal(r->leader_id, 2);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_FOLLOWER);
    h_free(&h);
}

/* kq refinement of KIP-996: a follower whose latest Fetch to the leader failed in transport
 * (the leader's process is gone: connection refused or reset) no longer speaks for that leader,
 * so a crashed leader is replaced after one fetch timeout instead of two. */
static void test_follower_whose_fetch_to_leader_failed_grants_prevote(void **state)
{
    harness h;
    one_node(&h, 3);
    make_follower(&h, 2, 1);
    kq_raft_msg f;
    memset(&f, 0, sizeof(f));
    f.type = KQ_RAFT_FETCH_RESP;
    f.from = 2;
    f.epoch = 1;
    f.leader_id = 2;
    f.u.fetch_resp.high_watermark = -1;
    h_inject(&h, 1, &f); /* a successful Fetch: the leader is live */
    kq_raft_msg v = h_vote_req(3, 1, 2, 0, 0, true);
    h_inject(&h, 1, &v);
    assert_false(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 3)->u.vote_resp.granted);
    /* the next Fetch fails: connection refused */
    kq_raft_msg e;
    memset(&e, 0, sizeof(e));
    e.type = KQ_RAFT_FETCH_RESP;
    e.from = 2;
    e.epoch = 1;
    e.leader_id = -1;
    e.error = KQ_ERR_NETWORK_EXCEPTION;
    h_inject(&h, 1, &e);
    h_inject(&h, 1, &v);
    assert_true(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 3)->u.vote_resp.granted);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_FOLLOWER);
    assert_int_equal(h_epoch(&h, 1), 1);
    h_free(&h);
}

static void test_follower_that_never_fetched_grants_prevote(void **state)
{
    harness h;
    one_node(&h, 3);
    make_follower(&h, 2, 1);
    kq_raft_msg v = h_vote_req(3, 1, 2, 0, 0, true);
    h_inject(&h, 1, &v);
    assert_true(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 3)->u.vote_resp.granted);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_FOLLOWER);
    assert_int_equal(h_epoch(&h, 1), 1);
    h_free(&h);
}

static void test_leader_rejects_prevote(void **state)
{
    harness h;
    int32_t l = elect(&h, 3, 0, 11);
    int32_t other = l == 1 ? 2 : 1;
    kq_raft_msg v = h_vote_req(other, l, h_epoch(&h, l) + 1, h_epoch(&h, l), 1000, true);
    h_inject(&h, l, &v);
    assert_false(h_last_msg(&h, l, KQ_RAFT_VOTE_RESP, other)->u.vote_resp.granted);
    assert_int_equal(h_role(&h, l), KQ_RAFT_LEADER);
    h_free(&h);
}

static void test_prospective_returns_to_follower_on_leader_hint(void **state)
{
    harness h;
    one_node(&h, 3);
    make_follower(&h, 2, 1);
    h_expire(&h, 1); /* fetch timeout */
    assert_int_equal(h_role(&h, 1), KQ_RAFT_PROSPECTIVE);
    kq_raft_msg r;
    memset(&r, 0, sizeof(r));
    r.type = KQ_RAFT_VOTE_RESP;
    r.from = 3;
    r.epoch = 1;
    r.leader_id = 2;
    r.u.vote_resp.granted = false;
    h_inject(&h, 1, &r);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_FOLLOWER);
    assert_int_equal(h_epoch(&h, 1), 1);
    assert_int_equal(h_last(&h, 1)->leader_id, 2);
    h_free(&h);
}

static void test_failed_prevote_round_backs_off_and_retries_without_epoch_bump(void **state)
{
    harness h;
    one_node(&h, 3);
    h_expire(&h, 1);
    kq_raft_msg r;
    memset(&r, 0, sizeof(r));
    r.type = KQ_RAFT_VOTE_RESP;
    r.epoch = 0;
    r.leader_id = -1;
    for (int32_t from = 2; from <= 3; from++) {
        r.from = from;
        h_inject(&h, 1, &r);
    }
    assert_int_equal(h_role(&h, 1), KQ_RAFT_PROSPECTIVE);
    /* back-off is 100 ms x random(0 .. 1) after the first failure */
    if (!h_last_msg(&h, 1, KQ_RAFT_VOTE_REQ, 0)) {
        assert_int_equal(h_node_of(&h, 1)->deadline - h.now, 100);
        h_expire(&h, 1); /* back-off over: a new round */
    }
    assert_int_equal(h_role(&h, 1), KQ_RAFT_PROSPECTIVE);
    assert_int_equal(h_epoch(&h, 1), 0);
    assert_int_equal(h_node_of(&h, 1)->n_qstate_writes, 0);
    assert_int_equal(h_node_of(&h, 1)->sent[KQ_RAFT_VOTE_REQ], 4);
    const kq_raft_msg *m = h_last_msg(&h, 1, KQ_RAFT_VOTE_REQ, 2);
    assert_non_null(m);
    assert_true(m->u.vote_req.pre_vote);
    h_free(&h);
}

/* ------------------------------------------------------------ real votes (1.4) */

static void test_vote_rejected_when_candidate_log_is_behind(void **state)
{
    harness h;
    h_init(&h, 3, 0, 8);
    h_disk_append(&h, 1, 1, 5);
    h_node_of(&h, 1)->qs.epoch = 1;
    h_start(&h, 1);
    kq_raft_msg v = h_vote_req(2, 1, 2, 1, 3, false); /* same last epoch, shorter */
    h_inject(&h, 1, &v);
    const kq_raft_msg *r = h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 2);
    assert_false(r->u.vote_resp.granted);
    assert_int_equal(r->error, KQ_ERR_NONE);
    /* the higher epoch was still adopted, durably, with no vote */
    assert_int_equal(h_epoch(&h, 1), 2);
    assert_int_equal(h_node_of(&h, 1)->qs.epoch, 2);
    assert_int_equal(h_node_of(&h, 1)->qs.voted_id, -1);
    h_free(&h);
}

static void test_vote_log_comparison_is_epoch_first(void **state)
{
    harness h;
    h_init(&h, 3, 0, 9);
    h_disk_append(&h, 1, 1, 10);
    h_node_of(&h, 1)->qs.epoch = 1;
    h_start(&h, 1);
    /* a shorter log with a higher last epoch is more up to date */
    kq_raft_msg v = h_vote_req(2, 1, 3, 2, 4, false);
    h_inject(&h, 1, &v);
    assert_true(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 2)->u.vote_resp.granted);
    h_free(&h);
}

static void test_vote_persisted_before_response(void **state)
{
    harness h;
    one_node(&h, 3);
    kq_raft_msg v = h_vote_req(2, 1, 1, 0, 0, false);
    h_inject(&h, 1, &v);
    const kq_raft_update *u = h_last(&h, 1);
    /* the grant and the durable vote are in the same update: the host writes, then sends */
    assert_true(u->persist_qstate);
    assert_int_equal(u->qstate.epoch, 1);
    assert_int_equal(u->qstate.voted_id, 2);
    assert_true(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 2)->u.vote_resp.granted);
    h_free(&h);
}

static void test_only_one_vote_per_epoch(void **state)
{
    harness h;
    one_node(&h, 3);
    kq_raft_msg v2 = h_vote_req(2, 1, 1, 0, 0, false);
    kq_raft_msg v3 = h_vote_req(3, 1, 1, 0, 0, false);
    h_inject(&h, 1, &v2);
    h_inject(&h, 1, &v3);
    assert_false(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 3)->u.vote_resp.granted);
    h_inject(&h, 1, &v2); /* a retry from the same candidate is granted again */
    assert_true(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 2)->u.vote_resp.granted);
    assert_int_equal(h_node_of(&h, 1)->qs.voted_id, 2);
    h_free(&h);
}

static void test_stale_epoch_vote_is_fenced(void **state)
{
    harness h;
    one_node(&h, 3);
    kq_raft_msg hi = h_vote_req(2, 1, 5, 0, 0, false);
    h_inject(&h, 1, &hi);
    kq_raft_msg lo = h_vote_req(3, 1, 4, 0, 0, false);
    h_inject(&h, 1, &lo);
    const kq_raft_msg *r = h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 3);
    assert_int_equal(r->error, KQ_ERR_FENCED_LEADER_EPOCH);
    assert_int_equal(r->epoch, 5);
    assert_false(r->u.vote_resp.granted);
    h_free(&h);
}

static void test_invalid_vote_requests_are_rejected(void **state)
{
    harness h;
    one_node(&h, 3);
    kq_raft_msg bad[4];
    bad[0] = h_vote_req(2, 1, 3, 3, 0, false);  /* last epoch >= candidate epoch */
    bad[1] = h_vote_req(2, 1, 3, 1, -1, false); /* negative last offset */
    bad[2] = h_vote_req(2, 1, 3, -1, 0, false); /* negative last epoch */
    bad[3] = h_vote_req(2, 1, 3, 0, 0, false);
    bad[3].u.vote_req.candidate_id = 1; /* asks us to vote for ourselves */
    for (int i = 0; i < 4; i++) {
        h_inject(&h, 1, &bad[i]);
        const kq_raft_msg *r = h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 2);
        assert_non_null(r);
        assert_int_equal(r->error, KQ_ERR_INVALID_REQUEST);
        assert_false(r->u.vote_resp.granted);
    }
    assert_int_equal(h_epoch(&h, 1), 0);
    h_free(&h);
}

static void test_candidate_wins_with_majority(void **state)
{
    harness h;
    int32_t l = elect(&h, 3, 0, 12);
    assert_int_equal(h_leaders_in_epoch(&h, h_epoch(&h, l)), 1);
    h_run(&h, 3000);
    for (int32_t id = 1; id <= 3; id++) {
        if (id != l) {
            assert_int_equal(h_role(&h, id), KQ_RAFT_FOLLOWER);
            assert_int_equal(h_epoch(&h, id), h_epoch(&h, l));
        }
    }
    h_free(&h);
}

static void test_candidate_backs_off_after_losing(void **state)
{
    harness h;
    one_node(&h, 5);
    h_expire(&h, 1);
    kq_raft_msg g;
    memset(&g, 0, sizeof(g));
    g.type = KQ_RAFT_VOTE_RESP;
    g.leader_id = -1;
    g.u.vote_resp.granted = true;
    g.from = 2;
    h_inject(&h, 1, &g);
    g.from = 3;
    h_inject(&h, 1, &g);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_CANDIDATE);
    /* the late pre-vote answers of 4 and 5 belong to the finished round: ignored, and the
     * real requests follow */
    g.u.vote_resp.granted = false;
    for (int32_t from = 4; from <= 5; from++) {
        g.from = from;
        h_inject(&h, 1, &g);
        assert_int_equal(h_role(&h, 1), KQ_RAFT_CANDIDATE);
        assert_false(h_last_msg(&h, 1, KQ_RAFT_VOTE_REQ, from)->u.vote_req.pre_vote);
    }
    /* real vote rejections from 2, 3, 4: granted (1) + unrecorded (1) < majority (3) */
    g.epoch = 1;
    g.u.vote_resp.granted = false;
    for (int32_t from = 2; from <= 4; from++) {
        g.from = from;
        h_inject(&h, 1, &g);
    }
    /* it lost: no new real vote requests; after a back-off (possibly 0) it is Prospective
     * again in the same epoch, not a Candidate of a higher one */
    const kq_raft_msg *again = h_last_msg(&h, 1, KQ_RAFT_VOTE_REQ, 0);
    assert_true(again == NULL || again->u.vote_req.pre_vote);
    if (h_role(&h, 1) == KQ_RAFT_CANDIDATE) {
        assert_true(h_node_of(&h, 1)->deadline - h.now <= 100);
        h_expire(&h, 1);
    }
    assert_int_equal(h_role(&h, 1), KQ_RAFT_PROSPECTIVE);
    assert_int_equal(h_epoch(&h, 1), 1);
    h_free(&h);
}

static void test_observer_never_becomes_candidate(void **state)
{
    harness h;
    h_init(&h, 3, 1, 13);
    h_start(&h, 4); /* the voters are down */
    for (int i = 0; i < 10; i++)
        h_run(&h, 5000);
    assert_int_equal(h_role(&h, 4), KQ_RAFT_UNATTACHED);
    assert_int_equal(h_count(&h, KQ_RAFT_VOTE_REQ, 4, 0), 0);
    assert_int_equal(h_epoch(&h, 4), 0);
    /* it keeps looking for a leader */
    assert_true(h_node_of(&h, 4)->sent[KQ_RAFT_FETCH_REQ] >= 10);
    kq_raft_msg v = h_vote_req(2, 4, 3, 0, 0, false);
    h_inject(&h, 4, &v);
    assert_false(h_last_msg(&h, 4, KQ_RAFT_VOTE_RESP, 2)->u.vote_resp.granted);
    h_free(&h);
}

static void test_at_most_one_leader_per_epoch_under_partitions(void **state)
{
    for (uint64_t seed = 1; seed <= 12; seed++) {
        harness h;
        h_init(&h, 5, 0, seed);
        h_start_all(&h);
        for (int round = 0; round < 12; round++) {
            h_heal(&h);
            h_isolate(&h, (int32_t)(1 + (seed + (uint64_t)round) % 5));
            if (round % 3 == 0)
                h_cut(&h, 1 + (round % 5), 1 + ((round + 2) % 5));
            h_run(&h, 2500);
            for (int32_t e = 0; e <= 60; e++)
                assert_true(h_leaders_in_epoch(&h, e) <= 1);
        }
        h_heal(&h);
        assert_true(h_run_until(&h, 30000, h_has_leader));
        h_free(&h);
    }
}

/* ------------------------------------------------------------ becoming leader */

static void test_new_leader_appends_leader_change_and_sends_begin_epoch(void **state)
{
    harness h;
    one_node(&h, 3);
    h_node_of(&h, 1)->hold_persist = true;
    h_expire(&h, 1);
    kq_raft_msg g;
    memset(&g, 0, sizeof(g));
    g.type = KQ_RAFT_VOTE_RESP;
    g.from = 2;
    g.leader_id = -1;
    g.u.vote_resp.granted = true;
    h_inject(&h, 1, &g); /* pre-vote */
    g.epoch = 1;
    h_inject(&h, 1, &g); /* real vote */
    assert_int_equal(h_role(&h, 1), KQ_RAFT_LEADER);
    const kq_raft_update *u = h_last(&h, 1);
    assert_true(u->persist_qstate);
    assert_int_equal(u->qstate.leader_id, 1);
    assert_int_equal(u->n_append, 1);
    assert_int_equal(u->append[0].kind, KQ_RAFT_BATCH_LEADER_CHANGE);
    assert_int_equal(u->append[0].base_offset, 0);
    assert_int_equal(u->append[0].count, 1);
    assert_int_equal(u->append[0].epoch, 1);
    assert_non_null(h_last_msg(&h, 1, KQ_RAFT_BEGIN_EPOCH_REQ, 2));
    assert_non_null(h_last_msg(&h, 1, KQ_RAFT_BEGIN_EPOCH_REQ, 3));
    assert_int_equal(u->high_watermark, -1);
    int32_t ep;
    int64_t end;
    kq_raft_status s;
    kq_raft_get_status(h_node_of(&h, 1)->r, &s);
    assert_true(kq_raft_end_offset_for_epoch(h_node_of(&h, 1)->r, 1, &ep, &end));
    assert_int_equal(ep, 1);
    assert_int_equal(end, 1);
    h_free(&h);
}

static void test_begin_epoch_resent_every_half_fetch_timeout(void **state)
{
    harness h;
    int32_t l = elect(&h, 3, 0, 14);
    h_run(&h, 100);
    h_node_of(&h, l)->sent[KQ_RAFT_BEGIN_EPOCH_REQ] = 0;
    h_run(&h, 4050); /* fetch timeout 2000: one round to both followers every 1000 ms */
    int n = h_node_of(&h, l)->sent[KQ_RAFT_BEGIN_EPOCH_REQ];
    assert_true(n >= 6 && n <= 10);
    h_free(&h);
}

static void test_begin_epoch_makes_unattached_voter_follower(void **state)
{
    harness h;
    one_node(&h, 3);
    make_follower(&h, 3, 2);
    assert_int_equal(h_epoch(&h, 1), 2);
    assert_int_equal(h_node_of(&h, 1)->qs.leader_id, 3);
    assert_int_equal(h_node_of(&h, 1)->qs.epoch, 2);
    assert_int_equal(h_last_msg(&h, 1, KQ_RAFT_BEGIN_EPOCH_RESP, 3)->error, KQ_ERR_NONE);
    assert_non_null(h_last_msg(&h, 1, KQ_RAFT_FETCH_REQ, 3));
    h_free(&h);
}

static void test_stale_begin_epoch_is_fenced(void **state)
{
    harness h;
    one_node(&h, 3);
    make_follower(&h, 3, 4);
    kq_raft_msg b;
    memset(&b, 0, sizeof(b));
    b.type = KQ_RAFT_BEGIN_EPOCH_REQ;
    b.from = 2;
    b.epoch = 3;
    b.leader_id = 2;
    h_inject(&h, 1, &b);
    const kq_raft_msg *r = h_last_msg(&h, 1, KQ_RAFT_BEGIN_EPOCH_RESP, 2);
    assert_int_equal(r->error, KQ_ERR_FENCED_LEADER_EPOCH);
    assert_int_equal(r->epoch, 4);
    assert_int_equal(r->leader_id, 3);
    assert_int_equal(h_last(&h, 1)->leader_id, 3);
    h_free(&h);
}

/* ------------------------------------------------------------ resignation */

static void test_end_quorum_epoch_preferred_successor_campaigns_first(void **state)
{
    harness h;
    one_node(&h, 5);
    make_follower(&h, 2, 3);
    kq_raft_msg e;
    memset(&e, 0, sizeof(e));
    e.type = KQ_RAFT_END_EPOCH_REQ;
    e.from = 2;
    e.epoch = 3;
    e.leader_id = 2;
    e.u.end_req.n_preferred = 4;
    int32_t order[4] = {1, 3, 4, 5};
    memcpy(e.u.end_req.preferred, order, sizeof(order));
    h_inject(&h, 1, &e);
    /* first in the list: campaigns at once */
    assert_int_equal(h_role(&h, 1), KQ_RAFT_PROSPECTIVE);
    assert_non_null(h_last_msg(&h, 1, KQ_RAFT_VOTE_REQ, 3));

    /* third in the list of 4: waits (1000 >> 3) << 1 = 250 ms */
    harness h2;
    one_node(&h2, 5);
    make_follower(&h2, 2, 3);
    int32_t order2[4] = {3, 4, 1, 5};
    memcpy(e.u.end_req.preferred, order2, sizeof(order2));
    h_inject(&h2, 1, &e);
    assert_int_equal(h_role(&h2, 1), KQ_RAFT_FOLLOWER);
    assert_int_equal(h_node_of(&h2, 1)->deadline - h2.now, 250);
    h_free(&h);
    h_free(&h2);
}

static void test_graceful_resign_sends_end_epoch_and_never_campaigns(void **state)
{
    harness h;
    int32_t l = elect(&h, 3, 0, 15);
    h_run(&h, 500);
    h_propose(&h, l, 2);
    h_run(&h, 500);
    h_resign(&h, l);
    assert_int_equal(h_role(&h, l), KQ_RAFT_RESIGNED);
    const kq_raft_update *u = h_last(&h, l);
    assert_false(u->persist_qstate);
    int n = 0;
    for (size_t i = 0; i < u->n_msgs; i++) {
        if (u->msgs[i].type == KQ_RAFT_END_EPOCH_REQ) {
            n++;
            assert_int_equal(u->msgs[i].u.end_req.n_preferred, 2);
            assert_int_equal(u->msgs[i].leader_id, l);
        }
    }
    assert_int_equal(n, 2);
    /* proposals are refused now */
    h_propose(&h, l, 1);
    assert_int_equal(h_last(&h, l)->propose_error, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    /* another voter takes over; the resigned node never campaigns again */
    int32_t old_epoch = h_epoch(&h, l);
    h_run(&h, 20000);
    int32_t nl = h_leader(&h);
    assert_true(nl != 0 && nl != l);
    assert_true(h_epoch(&h, nl) > old_epoch);
    h_isolate(&h, nl);
    h_run(&h, 20000);
    assert_int_not_equal(h_role(&h, l), KQ_RAFT_CANDIDATE);
    assert_int_not_equal(h_role(&h, l), KQ_RAFT_PROSPECTIVE);
    assert_int_not_equal(h_role(&h, l), KQ_RAFT_LEADER);
    h_free(&h);
}

/* Rule: a voter leaves a known leader only for a higher epoch. Graceful shutdown (RESIGN) of a
 * voter that is not leader stops campaigning and voting without changing its stored state. */
static void test_shutdown_of_non_leader_keeps_stored_leader_of_its_epoch(void **state)
{
    harness h;
    one_node(&h, 3);
    make_follower(&h, 3, 4); /* stored {e4, no vote, leader 3} */
    h_expire(&h, 1);         /* fetch timeout: pre-vote round, leader 3 still known */
    assert_int_equal(h_role(&h, 1), KQ_RAFT_PROSPECTIVE);
    int writes = h_node_of(&h, 1)->n_qstate_writes;
    assert_int_equal(h_resign(&h, 1), 0);
    assert_false(h_last(&h, 1)->persist_qstate);
    assert_int_equal(h_node_of(&h, 1)->n_qstate_writes, writes);
    assert_int_equal(h_node_of(&h, 1)->qs.epoch, 4);
    assert_int_equal(h_node_of(&h, 1)->qs.leader_id, 3);
    assert_int_not_equal(h_role(&h, 1), KQ_RAFT_PROSPECTIVE);
    assert_int_equal(h_epoch(&h, 1), 4);
    /* it neither campaigns nor votes any more */
    h_node_of(&h, 1)->sent[KQ_RAFT_VOTE_REQ] = 0;
    h_run(&h, 20000);
    assert_int_equal(h_node_of(&h, 1)->sent[KQ_RAFT_VOTE_REQ], 0);
    assert_int_equal(h_epoch(&h, 1), 4);
    assert_int_equal(h_node_of(&h, 1)->qs.leader_id, 3);
    kq_raft_msg v = h_vote_req(2, 1, 4, 3, 100, false);
    h_inject(&h, 1, &v);
    assert_false(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 2)->u.vote_resp.granted);
    h_free(&h);
}

/* Same rule for a former leader: Resigned, then a pre-vote round in the epoch it led, then
 * shutdown. Its stored state still names itself leader, so a restart is Resigned again and
 * never a Candidate in the epoch it led. */
static void test_shutdown_of_former_leader_keeps_its_leadership_stored(void **state)
{
    harness h;
    h_init(&h, 3, 0, 21);
    h_node_of(&h, 1)->qs = (kq_raft_qstate){.epoch = 4, .voted_id = 1, .leader_id = 1};
    h_disk_append(&h, 1, 4, 3);
    h_start(&h, 1);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_RESIGNED);
    h_expire(&h, 1); /* election timeout: pre-vote round from Resigned */
    assert_int_equal(h_role(&h, 1), KQ_RAFT_PROSPECTIVE);
    assert_int_equal(h_last(&h, 1)->leader_id, -1); /* no longer claims to lead */
    assert_int_equal(h_resign(&h, 1), 0);
    assert_false(h_last(&h, 1)->persist_qstate);
    assert_int_equal(h_node_of(&h, 1)->qs.leader_id, 1);
    assert_int_equal(h_node_of(&h, 1)->qs.voted_id, 1);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_RESIGNED);
    h_crash(&h, 1);
    h_node_of(&h, 1)->sent[KQ_RAFT_VOTE_REQ] = 0;
    h_start(&h, 1);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_RESIGNED);
    assert_int_equal(h_epoch(&h, 1), 4);
    assert_int_equal(h_node_of(&h, 1)->sent[KQ_RAFT_VOTE_REQ], 0);
    h_free(&h);
}

/* A Prospective voter that led its epoch never follows another node in that epoch. */
static void test_former_leader_never_follows_another_leader_in_its_epoch(void **state)
{
    harness h;
    h_init(&h, 3, 0, 22);
    h_node_of(&h, 1)->qs = (kq_raft_qstate){.epoch = 4, .voted_id = 1, .leader_id = 1};
    h_disk_append(&h, 1, 4, 3);
    h_start(&h, 1);
    h_expire(&h, 1);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_PROSPECTIVE);
    kq_raft_msg b;
    memset(&b, 0, sizeof(b));
    b.type = KQ_RAFT_BEGIN_EPOCH_REQ;
    b.from = 2;
    b.epoch = 4;
    b.leader_id = 2;
    h_inject(&h, 1, &b);
    assert_int_equal(h_last_msg(&h, 1, KQ_RAFT_BEGIN_EPOCH_RESP, 2)->error, KQ_ERR_INVALID_REQUEST);
    assert_int_not_equal(h_role(&h, 1), KQ_RAFT_FOLLOWER);
    assert_int_equal(h_node_of(&h, 1)->qs.leader_id, 1);
    h_free(&h);
}

/* Rule: a candidate epoch is always above the last log epoch. A node restarting with
 * {epoch e, voted self} whose log already ends in epoch e (it led e, the stored leader was
 * lost) does not campaign in e: it is Resigned and its next candidacy is at e + 1. */
static void test_restart_with_self_vote_and_log_of_that_epoch_never_campaigns_in_it(void **state)
{
    harness h;
    h_init(&h, 3, 0, 23);
    h_node_of(&h, 1)->qs = (kq_raft_qstate){.epoch = 4, .voted_id = 1, .leader_id = -1};
    h_disk_append(&h, 1, 2, 2);
    h_disk_append(&h, 1, 4, 3);
    h_start(&h, 1);
    assert_int_not_equal(h_role(&h, 1), KQ_RAFT_CANDIDATE);
    assert_int_equal(h_epoch(&h, 1), 4);
    assert_null(h_last_msg(&h, 1, KQ_RAFT_VOTE_REQ, 0));
    /* it still never grants a vote in epoch 4 to anyone else */
    kq_raft_msg v = h_vote_req(2, 1, 4, 3, 100, false);
    h_inject(&h, 1, &v);
    assert_false(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 2)->u.vote_resp.granted);
    /* after its election timeout: pre-vote, then real votes at epoch 5 > last log epoch 4 */
    h_expire(&h, 1);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_PROSPECTIVE);
    kq_raft_msg g;
    memset(&g, 0, sizeof(g));
    g.type = KQ_RAFT_VOTE_RESP;
    g.from = 2;
    g.epoch = 4;
    g.leader_id = -1;
    g.u.vote_resp.granted = true;
    h_inject(&h, 1, &g);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_CANDIDATE);
    assert_int_equal(h_epoch(&h, 1), 5);
    const kq_raft_msg *m = h_last_msg(&h, 1, KQ_RAFT_VOTE_REQ, 2);
    assert_non_null(m);
    assert_false(m->u.vote_req.pre_vote);
    assert_int_equal(m->u.vote_req.last_epoch, 4);
    assert_true(m->u.vote_req.last_epoch < m->epoch);
    h_free(&h);
}

static void test_end_epoch_preferred_successors_sorted_by_end_offset(void **state)
{
    harness h;
    int32_t l = elect(&h, 3, 0, 16);
    h_run(&h, 500);
    int32_t slow = l == 3 ? 2 : 3, fast = l == 1 ? 2 : 1;
    if (slow == fast)
        fast = 6 - l - slow;
    h_isolate(&h, slow);
    h_propose(&h, l, 5);
    h_run(&h, 300);
    h_resign(&h, l);
    const kq_raft_msg *m = h_last_msg(&h, l, KQ_RAFT_END_EPOCH_REQ, 0);
    assert_non_null(m);
    assert_int_equal(m->u.end_req.preferred[0], fast);
    assert_int_equal(m->u.end_req.preferred[1], slow);
    h_free(&h);
}

static void test_check_quorum_resigns_leader(void **state)
{
    harness h;
    int32_t l = elect(&h, 3, 0, 17);
    h_run(&h, 1000);
    assert_int_equal(h_role(&h, l), KQ_RAFT_LEADER);
    h_isolate(&h, l);
    h_run(&h, 3100); /* 1.5 x fetch timeout, plus slack for the last window */
    assert_int_not_equal(h_role(&h, l), KQ_RAFT_LEADER);
    h_free(&h);
}

static void test_check_quorum_keeps_leader_with_majority_fetching(void **state)
{
    harness h;
    int32_t l = elect(&h, 3, 0, 18);
    int32_t lost = l == 3 ? 2 : 3;
    h_isolate(&h, lost);
    h_run(&h, 20000);
    assert_int_equal(h_role(&h, l), KQ_RAFT_LEADER);
    h_free(&h);
}

static void test_single_voter_leader_never_resigns_on_check_quorum(void **state)
{
    harness h;
    h_init(&h, 1, 0, 19);
    h_start(&h, 1);
    h_run(&h, 60000);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_LEADER);
    assert_int_equal(h_epoch(&h, 1), 1);
    h_free(&h);
}

static void test_higher_epoch_response_steps_leader_down(void **state)
{
    harness h;
    one_node(&h, 3);
    h_expire(&h, 1);
    kq_raft_msg g;
    memset(&g, 0, sizeof(g));
    g.type = KQ_RAFT_VOTE_RESP;
    g.from = 2;
    g.leader_id = -1;
    g.u.vote_resp.granted = true;
    h_inject(&h, 1, &g);
    g.epoch = 1;
    h_inject(&h, 1, &g);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_LEADER);
    /* node 2 answers the BeginQuorumEpoch from a later epoch */
    kq_raft_msg r;
    memset(&r, 0, sizeof(r));
    r.type = KQ_RAFT_BEGIN_EPOCH_RESP;
    r.from = 2;
    r.epoch = 4;
    r.leader_id = 3;
    h_inject(&h, 1, &r);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_FOLLOWER);
    assert_int_equal(h_epoch(&h, 1), 4);
    assert_int_equal(h_node_of(&h, 1)->qs.epoch, 4);
    assert_int_equal(h_node_of(&h, 1)->qs.leader_id, 3);
    h_free(&h);
}

static void test_unexpected_response_is_ignored(void **state)
{
    harness h;
    one_node(&h, 3);
    kq_raft_msg r;
    memset(&r, 0, sizeof(r));
    r.type = KQ_RAFT_VOTE_RESP;
    r.from = 2;
    r.epoch = 7;
    r.leader_id = 2;
    r.u.vote_resp.granted = true;
    assert_int_equal(h_inject(&h, 1, &r), 0);
    assert_int_equal(h_role(&h, 1), KQ_RAFT_UNATTACHED);
    assert_int_equal(h_epoch(&h, 1), 0);
    r.type = KQ_RAFT_FETCH_RESP;
    assert_int_equal(h_inject(&h, 1, &r), 0);
    assert_int_equal(h_epoch(&h, 1), 0);
    h_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_voter_elects_itself_at_start),
        cmocka_unit_test(test_restart_as_leader_becomes_resigned),
        cmocka_unit_test(test_restart_with_self_vote_becomes_candidate),
        cmocka_unit_test(test_restart_with_other_vote_keeps_that_vote),
        cmocka_unit_test(test_restart_with_known_leader_becomes_follower),
        cmocka_unit_test(test_restart_with_stale_qstate_epoch_uses_log_epoch),
        cmocka_unit_test(test_election_timeout_starts_prevote_without_epoch_bump),
        cmocka_unit_test(test_election_timer_is_randomized_within_t_and_2t),
        cmocka_unit_test(test_prevote_does_not_change_receiver_epoch),
        cmocka_unit_test(test_prevote_rejected_when_candidate_epoch_not_higher),
        cmocka_unit_test(test_prevote_majority_makes_candidate_with_durable_self_vote),
        cmocka_unit_test(test_follower_with_live_leader_rejects_prevote),
        cmocka_unit_test(test_follower_that_never_fetched_grants_prevote),
        cmocka_unit_test(test_follower_whose_fetch_to_leader_failed_grants_prevote),
        cmocka_unit_test(test_leader_rejects_prevote),
        cmocka_unit_test(test_prospective_returns_to_follower_on_leader_hint),
        cmocka_unit_test(test_failed_prevote_round_backs_off_and_retries_without_epoch_bump),
        cmocka_unit_test(test_vote_rejected_when_candidate_log_is_behind),
        cmocka_unit_test(test_vote_log_comparison_is_epoch_first),
        cmocka_unit_test(test_vote_persisted_before_response),
        cmocka_unit_test(test_only_one_vote_per_epoch),
        cmocka_unit_test(test_stale_epoch_vote_is_fenced),
        cmocka_unit_test(test_invalid_vote_requests_are_rejected),
        cmocka_unit_test(test_candidate_wins_with_majority),
        cmocka_unit_test(test_candidate_backs_off_after_losing),
        cmocka_unit_test(test_observer_never_becomes_candidate),
        cmocka_unit_test(test_at_most_one_leader_per_epoch_under_partitions),
        cmocka_unit_test(test_new_leader_appends_leader_change_and_sends_begin_epoch),
        cmocka_unit_test(test_begin_epoch_resent_every_half_fetch_timeout),
        cmocka_unit_test(test_begin_epoch_makes_unattached_voter_follower),
        cmocka_unit_test(test_stale_begin_epoch_is_fenced),
        cmocka_unit_test(test_end_quorum_epoch_preferred_successor_campaigns_first),
        cmocka_unit_test(test_graceful_resign_sends_end_epoch_and_never_campaigns),
        cmocka_unit_test(test_shutdown_of_non_leader_keeps_stored_leader_of_its_epoch),
        cmocka_unit_test(test_shutdown_of_former_leader_keeps_its_leadership_stored),
        cmocka_unit_test(test_former_leader_never_follows_another_leader_in_its_epoch),
        cmocka_unit_test(test_restart_with_self_vote_and_log_of_that_epoch_never_campaigns_in_it),
        cmocka_unit_test(test_end_epoch_preferred_successors_sorted_by_end_offset),
        cmocka_unit_test(test_check_quorum_resigns_leader),
        cmocka_unit_test(test_check_quorum_keeps_leader_with_majority_fetching),
        cmocka_unit_test(test_single_voter_leader_never_resigns_on_check_quorum),
        cmocka_unit_test(test_higher_epoch_response_steps_leader_down),
        cmocka_unit_test(test_unexpected_response_is_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
