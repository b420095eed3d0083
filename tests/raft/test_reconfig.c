/* Dynamic voters (KIP-853, reference/kraft-semantics.md 1.8) against the pure core through the
 * harness: the bootstrap set written into the log by the first leader, AddRaftVoter for a
 * caught-up observer, RemoveRaftVoter (of a follower and of the leader itself), the refusals and
 * their order, a change lost with its leader, and a removed voter that cannot disturb the
 * quorum it left. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"
#include "kq/error.h"

#include <string.h>

static int64_t hw_of(harness *h, int32_t id)
{
    return h_node_of(h, id)->hw;
}

static bool is_voter(harness *h, int32_t id)
{
    kq_raft_status s;
    kq_raft_get_status(h_node_of(h, id)->r, &s);
    return s.is_voter;
}

static const kq_raft_msg *last_answer(harness *h)
{
    assert_true(h->n_answers > 0);
    return &h->answers[h->n_answers - 1];
}

static size_t n_answers_wanted;
static bool answered(harness *h)
{
    return h->n_answers >= n_answers_wanted;
}

/* Ask the leader and run until it answers (at most 10 s). */
static const kq_raft_msg *ask(harness *h, int32_t leader, int32_t from, kq_raft_msg_type type,
                              const kq_voter *v)
{
    n_answers_wanted = h->n_answers + 1;
    h_voter_req(h, leader, from, type, v);
    assert_true(h_run_until(h, 10000, answered));
    return last_answer(h);
}

static int32_t watched;
static bool watched_caught_up(harness *h)
{
    int32_t l = h_leader(h);
    return l && h_leo(h, watched) == h_leo(h, l) && hw_of(h, watched) == hw_of(h, l) &&
           hw_of(h, l) > 0;
}

/* A started dynamic cluster of `voters` (+ observers) with a leader and a few committed
 * records everywhere. Returns the leader. */
static int32_t dynamic_cluster(harness *h, int voters, int observers, uint64_t seed)
{
    h_init(h, voters, observers, seed);
    h_bootstrap_dynamic(h);
    h_start_all(h);
    assert_true(h_run_until(h, 30000, h_has_leader));
    int32_t l = h_leader(h);
    h_propose(h, l, 3);
    watched = voters + observers;
    assert_true(h_run_until(h, 30000, watched_caught_up));
    return l;
}

static int64_t hw_target;
static bool all_up_reach_target(harness *h)
{
    for (int i = 0; i < h->n; i++)
        if (h->nodes[i].up && h->nodes[i].hw < hw_target)
            return false;
    return true;
}

/* A node formatted with --no-initial-controllers knows no voter set: it asks its bootstrap
 * servers (controller.quorum.bootstrap.servers) who leads, a dead one first, then follows the
 * leader by its id, catches up, and is added. */
static void test_new_node_finds_the_leader_through_bootstrap_servers(void **state)
{
    harness h;
    (void)state;
    h_init(&h, 3, 1, 7);
    h_bootstrap_dynamic(&h);
    h_node *n4 = h_node_of(&h, 4);
    n4->no_initial = true;
    n4->cfg.n_voters = 0;
    n4->cfg.n_bootstrap = 3;
    h.bootstrap[0] = 1;
    h.bootstrap[1] = 2;
    h.bootstrap[2] = 3;
    h.n_bootstrap = 3;
    for (int32_t id = 1; id <= 3; id++)
        h_start(&h, id);
    assert_true(h_run_until(&h, 30000, h_has_leader));
    int32_t l = h_leader(&h);
    int32_t dead = l == 3 ? 2 : 3; /* a follower, down while node 4 looks for the leader */
    h_crash(&h, dead);
    h_propose(&h, l, 3);
    h_start(&h, 4);
    kq_raft_status s;
    kq_raft_get_status(n4->r, &s);
    assert_false(s.is_voter);
    assert_int_equal(kq_raft_voters(n4->r, NULL)->n, 0); /* knows no set yet */
    watched = 4;
    assert_true(h_run_until(&h, 30000, watched_caught_up));
    kq_raft_get_status(n4->r, &s);
    assert_int_equal(s.leader_id, l);                    /* follows the leader by its real id */
    assert_int_equal(kq_raft_voters(n4->r, NULL)->n, 3); /* learnt from the log */
    assert_true(n4->sent[KQ_RAFT_FETCH_REQ] > 0);
    kq_voter v4 = h_voter(4);
    const kq_raft_msg *a = ask(&h, l, 4, KQ_RAFT_ADD_VOTER_REQ, &v4);
    assert_int_equal(a->error, KQ_ERR_NONE);
    h_start(&h, dead);
    hw_target = hw_of(&h, l);
    assert_true(h_run_until(&h, 30000, all_up_reach_target));
    assert_true(is_voter(&h, 4));
    assert_int_equal(h_voters(&h, 4)->n, 4);
    h_free(&h);
}

static void test_first_leader_writes_the_bootstrap_set_into_the_log(void **state)
{
    harness h;
    (void)state;
    int32_t l = dynamic_cluster(&h, 3, 0, 1);
    h_node *nd = h_node_of(&h, l);
    /* its LeaderChange batch: LeaderChange, KRaftVersion(1), Voters records */
    size_t i = 0;
    while (i < nd->n_log && nd->log[i].epoch != h_epoch(&h, l))
        i++;
    assert_true(i < nd->n_log);
    assert_int_equal(nd->log[i].count, 3);
    const h_control *c = h_control_of(&h, nd->log[i].payload);
    assert_non_null(c);
    assert_int_equal(c->n, 2);
    assert_int_equal(c->c[0].kraft_version, 1);
    assert_int_equal(c->set.n, 3);
    for (int32_t id = 1; id <= 3; id++) {
        int64_t at;
        assert_int_equal(kq_raft_voters(h_node_of(&h, id)->r, &at)->n, 3);
        assert_int_equal(at, nd->log[i].base + 2);
        assert_true(is_voter(&h, id));
    }
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

static void test_add_a_caught_up_observer(void **state)
{
    harness h;
    (void)state;
    int32_t l = dynamic_cluster(&h, 3, 1, 2);
    kq_voter v4 = h_voter(4);
    assert_false(is_voter(&h, 4));
    const kq_raft_msg *a = ask(&h, l, 4, KQ_RAFT_ADD_VOTER_REQ, &v4);
    assert_int_equal(a->type, KQ_RAFT_ADD_VOTER_RESP);
    assert_int_equal(a->error, KQ_ERR_NONE);
    /* answered once committed: the leader's HW is past the record */
    int64_t at;
    assert_int_equal(kq_raft_voters(h_node_of(&h, l)->r, &at)->n, 4);
    assert_true(hw_of(&h, l) > at);
    hw_target = hw_of(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    for (int32_t id = 1; id <= 4; id++)
        assert_int_equal(h_voters(&h, id)->n, 4);
    assert_true(is_voter(&h, 4));

    /* four voters: one down, three of four still commit */
    int32_t other = l == 1 ? 2 : 1;
    h_crash(&h, other);
    h_propose(&h, l, 2);
    hw_target = h_leo(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

static void test_refusals_in_kafkas_order(void **state)
{
    harness h;
    (void)state;
    /* static voters (kraft.version 0): no change */
    h_init(&h, 3, 1, 3);
    h_start_all(&h);
    assert_true(h_run_until(&h, 30000, h_has_leader));
    h_propose(&h, h_leader(&h), 1);
    h_run(&h, 2000);
    kq_voter v4 = h_voter(4);
    const kq_raft_msg *a = ask(&h, h_leader(&h), 4, KQ_RAFT_ADD_VOTER_REQ, &v4);
    assert_int_equal(a->error, KQ_ERR_UNSUPPORTED_VERSION);
    assert_non_null(strstr(a->u.voter_resp.error_message, "kraft.version is 0"));
    h_free(&h);

    int32_t l = dynamic_cluster(&h, 3, 2, 4);
    int32_t follower = l == 1 ? 2 : 1;
    /* not the leader */
    a = ask(&h, follower, 4, KQ_RAFT_ADD_VOTER_REQ, &v4);
    assert_int_equal(a->error, KQ_ERR_NOT_LEADER_OR_FOLLOWER);
    /* the id is a voter already, even with another directory */
    kq_voter again = h_voter(2);
    again.key.dir[0] ^= 0xff;
    a = ask(&h, l, 4, KQ_RAFT_ADD_VOTER_REQ, &again);
    assert_int_equal(a->error, KQ_ERR_DUPLICATE_VOTER);
    /* removal needs the exact key */
    a = ask(&h, l, 4, KQ_RAFT_REMOVE_VOTER_REQ, &again);
    assert_int_equal(a->error, KQ_ERR_VOTER_NOT_FOUND);
    /* a node that never fetched from the leader */
    kq_voter v7 = h_voter(7);
    a = ask(&h, l, 4, KQ_RAFT_ADD_VOTER_REQ, &v7);
    assert_int_equal(a->error, KQ_ERR_REQUEST_TIMED_OUT);
    assert_non_null(strstr(a->u.voter_resp.error_message, "does not fetch from the leader"));
    /* no directory id */
    kq_voter nodir = h_voter(4);
    memset(nodir.key.dir, 0, sizeof(nodir.key.dir));
    a = ask(&h, l, 4, KQ_RAFT_ADD_VOTER_REQ, &nodir);
    assert_int_equal(a->error, KQ_ERR_INVALID_REQUEST);
    /* one change at a time: the second waits for the first to commit */
    size_t before = h.n_answers;
    h_voter_req(&h, l, 4, KQ_RAFT_ADD_VOTER_REQ, &v4);
    kq_voter v5 = h_voter(5);
    h_voter_req(&h, l, 5, KQ_RAFT_ADD_VOTER_REQ, &v5);
    assert_int_equal(h.n_answers, before + 1);
    assert_int_equal(last_answer(&h)->error, KQ_ERR_REQUEST_TIMED_OUT);
    assert_non_null(strstr(last_answer(&h)->u.voter_resp.error_message, "in progress"));
    n_answers_wanted = before + 2;
    assert_true(h_run_until(&h, 10000, answered));
    assert_int_equal(last_answer(&h)->error, KQ_ERR_NONE);
    /* now the second one goes through */
    a = ask(&h, l, 5, KQ_RAFT_ADD_VOTER_REQ, &v5);
    assert_int_equal(a->error, KQ_ERR_NONE);
    assert_int_equal(h_voters(&h, l)->n, 5);
    h_free(&h);
}

static void test_remove_a_voter_then_kill_it(void **state)
{
    harness h;
    (void)state;
    int32_t l = dynamic_cluster(&h, 3, 1, 5);
    kq_voter v4 = h_voter(4);
    assert_int_equal(ask(&h, l, 4, KQ_RAFT_ADD_VOTER_REQ, &v4)->error, KQ_ERR_NONE);
    int32_t gone = l == 3 ? 2 : 3, x = 6 - l - gone; /* {l, x, gone, 4} */
    kq_voter vg = h_voter(gone);
    assert_int_equal(ask(&h, l, 4, KQ_RAFT_REMOVE_VOTER_REQ, &vg)->error, KQ_ERR_NONE);
    hw_target = hw_of(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    assert_false(is_voter(&h, gone));
    /* the removed node keeps fetching every record, and counts for nothing: with x and 4
     * down the leader is one of {l, x, 4} and commits nothing more */
    h_crash(&h, x);
    h_crash(&h, 4);
    int64_t hw = hw_of(&h, l);
    h_propose(&h, l, 2);
    h_run(&h, 1500);
    assert_int_equal(h_leo(&h, gone), h_leo(&h, l));
    assert_int_equal(hw_of(&h, l), hw);
    /* 4 back: two of three, it commits; then the removed node is killed: nothing changes */
    h_start(&h, 4);
    hw_target = h_leo(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    h_crash(&h, gone);
    h_propose(&h, l, 4);
    hw_target = h_leo(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

static int32_t old_leader;
static bool new_leader(harness *h)
{
    int32_t l = h_leader(h);
    return l && l != old_leader;
}

static void test_leader_removes_itself_and_hands_over(void **state)
{
    harness h;
    (void)state;
    int32_t l = dynamic_cluster(&h, 3, 0, 6);
    int32_t e = h_epoch(&h, l);
    kq_voter vl = h_voter(l);
    const kq_raft_msg *a = ask(&h, l, l == 1 ? 2 : 1, KQ_RAFT_REMOVE_VOTER_REQ, &vl);
    assert_int_equal(a->error, KQ_ERR_NONE);
    /* it led until the removal committed, then stepped down */
    assert_int_not_equal(h_role(&h, l), KQ_RAFT_LEADER);
    old_leader = l;
    assert_true(h_run_until(&h, 30000, new_leader));
    int32_t nl = h_leader(&h);
    assert_true(h_epoch(&h, nl) > e);
    int votes_before = h_node_of(&h, l)->sent[KQ_RAFT_VOTE_REQ];
    h_propose(&h, nl, 2);
    hw_target = h_leo(&h, nl);
    assert_true(h_run_until(&h, 10000, all_up_reach_target)); /* it follows as an observer */
    h_run(&h, 20000);
    assert_false(is_voter(&h, l));
    assert_int_equal(h_node_of(&h, l)->sent[KQ_RAFT_VOTE_REQ], votes_before);
    assert_int_equal(h_leader(&h), nl);
    assert_int_equal(h_leaders_in_epoch(&h, h_epoch(&h, nl)), 1);
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

/* The AddRaftVoter of node 4 was appended by leader_l (after a Fetch of node 4 that arrived
 * after it). */
static int32_t leader_l;
static bool leader_has_4_voters(harness *h)
{
    return h_voters(h, leader_l)->n == 4;
}

static bool node4_not_voter_and_leader(harness *h)
{
    return h_has_leader(h) && h_voters(h, 4)->n == 3 && !is_voter(h, 4);
}

static void test_change_lost_with_its_leader_is_undone_everywhere(void **state)
{
    harness h;
    (void)state;
    int32_t l = dynamic_cluster(&h, 3, 1, 7);
    int32_t a = l == 1 ? 2 : 1, b = 6 - l - a;
    /* the leader can reach only node 4: the change is appended there and never commits */
    h_cut(&h, l, a);
    h_cut(&h, l, b);
    kq_voter v4 = h_voter(4);
    h_voter_req(&h, l, 4, KQ_RAFT_ADD_VOTER_REQ, &v4);
    leader_l = l;
    assert_true(h_run_until(&h, 2000, leader_has_4_voters));
    h_run(&h, 300);
    assert_true(is_voter(&h, 4)); /* in force on node 4 as soon as appended */
    /* node 4 alone holds the change; the other two elect a leader without it (were node 4
     * reachable, it could win with their votes and commit the change instead: both are safe) */
    h_crash(&h, l);
    h_heal(&h);
    h_isolate(&h, 4);
    assert_true(h_run_until(&h, 30000, h_has_leader));
    h_propose(&h, h_leader(&h), 1);
    h_run(&h, 1000);
    h_heal(&h);
    assert_true(h_run_until(&h, 30000, node4_not_voter_and_leader));
    assert_int_equal(h_voters(&h, a)->n, 3);
    assert_int_equal(h_voters(&h, b)->n, 3);
    /* the operator tries again with the new leader */
    watched = 4;
    h_propose(&h, h_leader(&h), 1);
    assert_true(h_run_until(&h, 30000, watched_caught_up));
    assert_int_equal(ask(&h, h_leader(&h), 4, KQ_RAFT_ADD_VOTER_REQ, &v4)->error, KQ_ERR_NONE);
    hw_target = hw_of(&h, h_leader(&h));
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    assert_true(is_voter(&h, 4));
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

static void test_removed_voter_cannot_disturb_the_quorum_it_left(void **state)
{
    harness h;
    (void)state;
    int32_t l = dynamic_cluster(&h, 3, 1, 8);
    kq_voter v4 = h_voter(4);
    assert_int_equal(ask(&h, l, 4, KQ_RAFT_ADD_VOTER_REQ, &v4)->error, KQ_ERR_NONE);
    hw_target = hw_of(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    /* node 4 is cut off before it learns it was removed */
    h_isolate(&h, 4);
    assert_int_equal(ask(&h, l, 1 + (l % 3), KQ_RAFT_REMOVE_VOTER_REQ, &v4)->error, KQ_ERR_NONE);
    int32_t e = h_epoch(&h, l);
    h_run(&h, 10000); /* node 4 campaigns on its own (pre-votes: its epoch stays) */
    assert_true(is_voter(&h, 4));
    h_heal(&h);
    h_run(&h, 20000);
    /* its (pre-)votes were refused: same leader, same epoch; it learnt the removal */
    assert_int_equal(h_leader(&h), l);
    assert_int_equal(h_epoch(&h, l), e);
    assert_false(is_voter(&h, 4));
    assert_int_equal(h_voters(&h, 4)->n, 3);
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

static void test_reformatted_node_is_another_voter(void **state)
{
    harness h;
    (void)state;
    int32_t l = dynamic_cluster(&h, 3, 0, 9);
    int32_t a = l == 1 ? 2 : 1, b = 6 - l - a;
    /* b's disk dies; it is formatted again (a new directory id) and started */
    h_wipe(&h, b);
    memset(h_node_of(&h, b)->cfg.directory_id, 0xee, 16);
    h_start(&h, b);
    assert_false(is_voter(&h, b));
    /* with a down too, the leader and the new b are not a majority of {l, a, b-old} */
    h_crash(&h, a);
    int64_t hw = hw_of(&h, l);
    h_propose(&h, l, 2);
    h_run(&h, 2500);
    assert_int_equal(hw_of(&h, l), hw);           /* b's fetches count as an observer's */
    assert_int_equal(h_leo(&h, b), h_leo(&h, l)); /* though it has every record */
    /* a vote meant for the old b is refused with INVALID_VOTER_KEY, and not counted */
    kq_raft_msg v = h_vote_req(a, b, h_epoch(&h, b) + 1, h_epoch(&h, b), h_leo(&h, b), false);
    memset(v.to_dir, 0x11 * b, 16);
    h_inject(&h, b, &v);
    const kq_raft_msg *resp = h_last_msg(&h, b, KQ_RAFT_VOTE_RESP, a);
    assert_non_null(resp);
    assert_int_equal(resp->error, KQ_ERR_INVALID_VOTER_KEY);
    assert_false(resp->u.vote_resp.granted);
    /* the operator replaces b: remove the old key, add the new one; with a back, it commits
     * (the leader alone with an observer lost check-quorum meanwhile: whoever leads now) */
    h_start(&h, a);
    assert_true(h_run_until(&h, 30000, h_has_leader));
    h_run(&h, 5000); /* a deposed leader learns it is one */
    l = h_leader(&h);
    assert_int_equal(h_leaders_in_epoch(&h, h_epoch(&h, l)), 1);
    hw_target = h_leo(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    kq_voter old_b = h_voter(b), new_b = h_voter(b);
    memset(new_b.key.dir, 0xee, 16);
    assert_int_equal(ask(&h, l, b, KQ_RAFT_REMOVE_VOTER_REQ, &old_b)->error, KQ_ERR_NONE);
    assert_int_equal(ask(&h, l, b, KQ_RAFT_ADD_VOTER_REQ, &new_b)->error, KQ_ERR_NONE);
    hw_target = hw_of(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    assert_true(is_voter(&h, b));
    /* now two of {l, the other, new b} commit without the third */
    int32_t down = 6 - l - b; /* the voter that is neither l nor b */
    h_crash(&h, down);
    h_propose(&h, l, 1);
    hw_target = h_leo(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

static void test_a_vote_is_for_a_key_not_an_id(void **state)
{
    harness h;
    (void)state;
    h_init(&h, 3, 0, 10);
    h_bootstrap_dynamic(&h);
    h_start(&h, 1); /* alone: the test sends every message */
    kq_raft_msg v = h_vote_req(2, 1, 1, 0, 0, false);
    memset(v.from_dir, 0x22, 16);
    h_inject(&h, 1, &v);
    assert_true(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 2)->u.vote_resp.granted);
    assert_int_equal(h_node_of(&h, 1)->qs.voted_dir[0], 0x22); /* stored with the vote */
    /* node 2 re-formatted asks again in the same epoch: the vote was not for it */
    memset(v.from_dir, 0x99, 16);
    h_inject(&h, 1, &v);
    assert_false(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 2)->u.vote_resp.granted);
    /* the candidate it voted for asks again (a retry): granted again */
    memset(v.from_dir, 0x22, 16);
    h_inject(&h, 1, &v);
    assert_true(h_last_msg(&h, 1, KQ_RAFT_VOTE_RESP, 2)->u.vote_resp.granted);
    h_free(&h);
}

/* Every node knows its directory id, endpoint and kraft.version range (0..1), as a controller
 * started by this version would; the cluster itself stays static (kraft.version 0). */
static void give_keys(harness *h)
{
    for (int i = 0; i < h->n; i++) {
        kq_voter v = h_voter(h->nodes[i].id);
        memcpy(h->nodes[i].cfg.directory_id, v.key.dir, 16);
        memcpy(h->nodes[i].cfg.host, v.host, sizeof(v.host));
        h->nodes[i].cfg.port = v.port;
        h->nodes[i].cfg.kraft_min = 0;
        h->nodes[i].cfg.kraft_max = 1;
    }
}

static const kq_raft_update *upgrade(harness *h, int32_t id, int16_t level, bool validate_only)
{
    kq_raft_event ev = {.type = KQ_RAFT_EV_UPGRADE_KRAFT};
    ev.u.upgrade.level = level;
    ev.u.upgrade.validate_only = validate_only;
    h_step(h, id, &ev);
    return h_last(h, id);
}

static int16_t kraft_of(harness *h, int32_t id)
{
    kq_raft_status s;
    kq_raft_get_status(h_node_of(h, id)->r, &s);
    return s.kraft_version;
}

static void test_upgrade_a_static_cluster_then_grow_it(void **state)
{
    harness h;
    (void)state;
    h_init(&h, 3, 2, 11);
    give_keys(&h);
    h_node_of(&h, 3)->cfg.host[0] = '\0'; /* node 3 cannot say where it listens */
    h_start_all(&h);
    assert_true(h_run_until(&h, 30000, h_has_leader));
    int32_t l = h_leader(&h);
    if (l == 3) { /* the test wants node 3 to be a follower */
        h_crash(&h, 3);
        old_leader = 3;
        assert_true(h_run_until(&h, 30000, new_leader));
        h_start(&h, 3);
        l = h_leader(&h);
    }
    h_propose(&h, l, 2);
    h_run(&h, 8000); /* the followers report their keys (every 3 fetch timeouts) */
    /* node 3 has not reported: refused, nothing appended */
    int64_t leo = h_leo(&h, l);
    const kq_raft_update *u = upgrade(&h, l, 1, false);
    assert_int_equal(u->upgrade_error, KQ_ERR_INVALID_UPDATE_VERSION);
    assert_non_null(strstr(u->upgrade_message, "voter 3 has not reported its directory id"));
    assert_int_equal(h_leo(&h, l), leo);
    assert_int_equal(kraft_of(&h, l), 0);
    /* a voter change at kraft.version 0 is refused */
    kq_voter v4 = h_voter(4);
    assert_int_equal(ask(&h, l, 4, KQ_RAFT_ADD_VOTER_REQ, &v4)->error, KQ_ERR_UNSUPPORTED_VERSION);

    /* node 3 restarted knowing its endpoint: it reports, the upgrade goes through */
    /* each follower reports once per three fetch timeouts (6 s), not at every step */
    for (int32_t id = 1; id <= 2; id++)
        if (id != l)
            assert_in_range(h_node_of(&h, id)->sent[KQ_RAFT_UPDATE_VOTER_REQ], 1, 4);
    assert_int_equal(h_node_of(&h, 3)->sent[KQ_RAFT_UPDATE_VOTER_REQ], 0);
    kq_voter v3 = h_voter(3);
    memcpy(h_node_of(&h, 3)->cfg.host, v3.host, sizeof(v3.host));
    h_crash(&h, 3);
    h_start(&h, 3);
    h_run(&h, 8000);
    l = h_leader(&h);
    assert_int_equal(upgrade(&h, l, 1, true)->upgrade_error, 0); /* validate only */
    assert_int_equal(kraft_of(&h, l), 0);
    u = upgrade(&h, l, 1, false);
    assert_int_equal(u->upgrade_error, 0);
    assert_int_equal(kraft_of(&h, l), 1); /* reported at once, before it commits */
    hw_target = h_leo(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    for (int32_t id = 1; id <= 5; id++) {
        assert_int_equal(kraft_of(&h, id), 1);
        const kq_voter_set *s = h_voters(&h, id);
        assert_int_equal(s->n, 3);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(s->v[i].key.dir[0], 0x11 * s->v[i].key.id);
            assert_int_equal(s->v[i].port, 9000 + s->v[i].key.id);
        }
    }
    /* no way back; asking again is a no-op */
    u = upgrade(&h, l, 0, false);
    assert_int_equal(u->upgrade_error, KQ_ERR_INVALID_UPDATE_VERSION);
    assert_non_null(strstr(u->upgrade_message, "cannot go down"));
    assert_int_equal(upgrade(&h, l, 1, false)->upgrade_error, 0);

    /* now add a fourth and a fifth */
    kq_voter v5 = h_voter(5);
    assert_int_equal(ask(&h, l, 4, KQ_RAFT_ADD_VOTER_REQ, &v4)->error, KQ_ERR_NONE);
    assert_int_equal(ask(&h, l, 5, KQ_RAFT_ADD_VOTER_REQ, &v5)->error, KQ_ERR_NONE);
    hw_target = hw_of(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    for (int32_t id = 1; id <= 5; id++) {
        assert_int_equal(h_voters(&h, id)->n, 5);
        assert_true(is_voter(&h, id));
    }
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

static bool port_moved(harness *h)
{
    for (int32_t id = 1; id <= 3; id++) {
        const kq_voter_set *s = h_voters(h, id);
        int i = kq_voters_find_id(s, 2);
        if (i < 0 || s->v[i].port != 19002)
            return false;
    }
    return true;
}

static void test_a_voter_that_moved_updates_its_endpoint(void **state)
{
    harness h;
    (void)state;
    int32_t l = dynamic_cluster(&h, 3, 0, 12);
    if (l == 2) {
        old_leader = 2;
        h_crash(&h, 2);
        assert_true(h_run_until(&h, 30000, new_leader));
    }
    give_keys(&h);
    h_node_of(&h, 2)->cfg.port = 19002; /* node 2 restarts on another port */
    h_crash(&h, 2);
    h_start(&h, 2);
    assert_true(h_run_until(&h, 30000, port_moved));
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

/* AddRaftVoter adds a node only after a Fetch from it that arrived after the request: a late
 * attempt (a client's earlier one, delayed) does not re-add a removed voter on the strength of
 * its fetches as a voter (kq-sim --voter-changes seed 5017871) or of those it made as an
 * observer before it stopped for good (seed 8079211); its directory may be gone by then. */
static void test_a_removed_voter_is_not_re_added_before_it_fetches_again(void **state)
{
    harness h;
    (void)state;
    int32_t l = dynamic_cluster(&h, 3, 1, 21);
    kq_voter v4 = h_voter(4);
    watched = 4;
    assert_true(h_run_until(&h, 10000, watched_caught_up));
    assert_int_equal(ask(&h, l, 4, KQ_RAFT_ADD_VOTER_REQ, &v4)->error, KQ_ERR_NONE);
    /* node 4 is cut off from the leader, then removed: it fetches nothing as an observer */
    h_cut(&h, l, 4);
    assert_int_equal(ask(&h, l, 1 + (l % 3), KQ_RAFT_REMOVE_VOTER_REQ, &v4)->error, KQ_ERR_NONE);
    const kq_raft_msg *a = ask(&h, l, 1 + (l % 3), KQ_RAFT_ADD_VOTER_REQ, &v4);
    assert_int_equal(a->error, KQ_ERR_REQUEST_TIMED_OUT);
    assert_non_null(strstr(a->u.voter_resp.error_message, "has not caught up"));
    assert_int_equal(h_voters(&h, l)->n, 3);
    /* reachable again, it fetches as an observer: now it can be added */
    h_heal(&h);
    assert_true(h_run_until(&h, 10000, watched_caught_up));
    assert_int_equal(ask(&h, h_leader(&h), 4, KQ_RAFT_ADD_VOTER_REQ, &v4)->error, KQ_ERR_NONE);
    assert_int_equal(h_voters(&h, h_leader(&h))->n, 4);
    /* removed while reachable, it fetches as an observer, then stops (its directory wiped): an
     * add that arrives after that waits for a Fetch from it that never comes (seed 8079211) */
    l = h_leader(&h);
    assert_int_equal(ask(&h, l, 1 + (l % 3), KQ_RAFT_REMOVE_VOTER_REQ, &v4)->error, KQ_ERR_NONE);
    assert_true(h_run_until(&h, 10000, watched_caught_up));
    h_crash(&h, 4);
    a = ask(&h, l, 1 + (l % 3), KQ_RAFT_ADD_VOTER_REQ, &v4);
    assert_int_equal(a->error, KQ_ERR_REQUEST_TIMED_OUT);
    assert_non_null(strstr(a->u.voter_resp.error_message, "has not caught up"));
    assert_int_equal(h_voters(&h, l)->n, 3);
    h_free(&h);
}

static void test_standalone_grows_to_two_and_back(void **state)
{
    harness h;
    (void)state;
    int32_t l = dynamic_cluster(&h, 1, 1, 13); /* kq storage format --standalone */
    assert_int_equal(l, 1);
    kq_voter v2 = h_voter(2);
    assert_int_equal(ask(&h, 1, 2, KQ_RAFT_ADD_VOTER_REQ, &v2)->error, KQ_ERR_NONE);
    h_run(&h, 10000); /* check-quorum starts with the second voter, and is met */
    assert_int_equal(h_leader(&h), 1);
    assert_true(is_voter(&h, 2));
    h_propose(&h, 1, 2);
    hw_target = h_leo(&h, 1);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    /* 2 -> 1 -> 2 */
    assert_int_equal(ask(&h, 1, 2, KQ_RAFT_REMOVE_VOTER_REQ, &v2)->error, KQ_ERR_NONE);
    h_run(&h, 5000);
    assert_int_equal(h_leader(&h), 1);
    watched = 2;
    assert_true(h_run_until(&h, 10000, watched_caught_up));
    assert_int_equal(ask(&h, 1, 2, KQ_RAFT_ADD_VOTER_REQ, &v2)->error, KQ_ERR_NONE);
    h_run(&h, 10000);
    assert_int_equal(h_leader(&h), 1);
    /* with two voters, a commit needs both */
    h_crash(&h, 2);
    int64_t hw = hw_of(&h, 1);
    h_propose(&h, 1, 1);
    h_run(&h, 1000);
    assert_int_equal(hw_of(&h, 1), hw);
    h_free(&h);
}

static void test_a_voter_that_has_not_learnt_it_is_one_still_votes(void **state)
{
    harness h;
    (void)state;
    int32_t l = dynamic_cluster(&h, 3, 1, 14);
    /* the Add commits on the three old voters before node 4 fetches it: the leader hears node
     * 4's Fetch requests (caught up, so it appends the change) but node 4 gets no answer */
    h.cut[l][4] = true;
    kq_voter v4 = h_voter(4);
    h_voter_req(&h, l, 2, KQ_RAFT_ADD_VOTER_REQ, &v4);
    n_answers_wanted = h.n_answers + 1;
    assert_true(h_run_until(&h, 10000, answered));
    assert_int_equal(last_answer(&h)->error, KQ_ERR_NONE);
    assert_false(is_voter(&h, 4));
    /* the leader dies: the other two need three votes of four, node 4's among them */
    h_crash(&h, l);
    h_heal(&h);
    old_leader = l;
    assert_true(h_run_until(&h, 30000, new_leader));
    h_propose(&h, h_leader(&h), 1);
    hw_target = h_leo(&h, h_leader(&h));
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    assert_true(is_voter(&h, 4));
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

static bool four_voters_and_leader(harness *h)
{
    return h_has_leader(h) && h_voters(h, h_leader(h))->n == 4;
}

static void test_restart_and_snapshot_keep_the_set(void **state)
{
    harness h;
    (void)state;
    int32_t l = dynamic_cluster(&h, 3, 2, 15);
    kq_voter v4 = h_voter(4);
    assert_int_equal(ask(&h, l, 4, KQ_RAFT_ADD_VOTER_REQ, &v4)->error, KQ_ERR_NONE);
    h_propose(&h, l, 2);
    hw_target = h_leo(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    /* every node restarts: the set comes back from the bootstrap and the log */
    for (int32_t id = 1; id <= 5; id++)
        h_crash(&h, id);
    h_start_all(&h);
    assert_true(h_run_until(&h, 30000, four_voters_and_leader));
    for (int32_t id = 1; id <= 5; id++) {
        assert_int_equal(h_voters(&h, id)->n, 4);
        assert_int_equal(is_voter(&h, id), id != 5);
    }
    /* a snapshot past the VotersRecord, the log below it gone; node 5 starts from nothing
     * and installs it: the set comes from the snapshot */
    l = h_leader(&h);
    h_propose(&h, l, 3);
    hw_target = h_leo(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    for (int32_t id = 1; id <= 4; id++)
        assert_int_equal(h_take_snapshot(&h, id, hw_of(&h, id)), 0);
    h_wipe(&h, 5);
    h_start(&h, 5);
    watched = 5;
    assert_true(h_run_until(&h, 30000, watched_caught_up));
    assert_true(h_node_of(&h, 5)->installs > 0);
    assert_int_equal(h_voters(&h, 5)->n, 4);
    assert_false(is_voter(&h, 5));
    /* and a restart from snapshot + log */
    h_crash(&h, 5);
    h_start(&h, 5);
    assert_int_equal(h_voters(&h, 5)->n, 4);
    assert_true(h_committed_prefix_matches(&h));
    h_free(&h);
}

static void test_unsafe_recovery_on_the_last_survivor(void **state)
{
    harness h;
    (void)state;
    int32_t l = dynamic_cluster(&h, 3, 1, 16);
    h_propose(&h, l, 5);
    hw_target = h_leo(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    int32_t a = l == 1 ? 2 : 1, b = 6 - l - a;
    int64_t committed = hw_of(&h, l);
    /* two of three voters are gone for good; the survivor cannot commit */
    h_crash(&h, a);
    h_crash(&h, b);
    h_propose(&h, l, 1);
    h_run(&h, 5000);
    assert_int_not_equal(h_role(&h, l), KQ_RAFT_LEADER);
    /* the guarded command, on the stopped survivor: one batch with the set {survivor},
     * marked as a recovery, at a new epoch */
    h_crash(&h, l);
    h_node *nd = h_node_of(&h, l);
    kq_voter_set one = {.n = 1};
    one.v[0] = h_voter(l);
    kq_raft_control rec = {.kraft_version = -1, .voters = &one, .unsafe_recovery = true};
    h_disk_append_control(&h, l, nd->log[nd->n_log - 1].epoch + 1, &rec, 1);
    h_start(&h, l);
    assert_true(h_run_until(&h, 10000, h_has_leader));
    assert_int_equal(h_leader(&h), l);
    assert_int_equal(h_voters(&h, l)->n, 1);
    assert_true(hw_of(&h, l) > committed);
    /* the operator adds a fresh controller back (node 4, an observer that kept up) */
    watched = 4;
    assert_true(h_run_until(&h, 30000, watched_caught_up));
    kq_voter v4 = h_voter(4);
    assert_int_equal(ask(&h, l, 4, KQ_RAFT_ADD_VOTER_REQ, &v4)->error, KQ_ERR_NONE);
    hw_target = hw_of(&h, l);
    assert_true(h_run_until(&h, 10000, all_up_reach_target));
    assert_true(is_voter(&h, 4));
    assert_int_equal(h_voters(&h, 4)->n, 2);
    /* without the recovery mark the same record is refused: two voters removed at once */
    kq_voter_set history_check = h.boot;
    kq_voter_history vh;
    char err[160];
    kq_voter_history_init(&vh, NULL);
    assert_int_equal(kq_voter_history_add_voters(&vh, 3, &history_check, err, sizeof(err)), 0);
    assert_int_equal(kq_voter_history_add_voters(&vh, 9, &one, err, sizeof(err)),
                     KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_voter_history_force_voters(&vh, 9, &one, err, sizeof(err)), 0);
    kq_voter_history_free(&vh);
    h_free(&h);
}

static void test_catch_up_is_per_directory(void **state)
{
    harness h;
    (void)state;
    int32_t l = dynamic_cluster(&h, 3, 1, 17);
    kq_voter v4 = h_voter(4);
    assert_int_equal(ask(&h, l, 2, KQ_RAFT_ADD_VOTER_REQ, &v4)->error, KQ_ERR_NONE);
    assert_int_equal(ask(&h, l, 2, KQ_RAFT_REMOVE_VOTER_REQ, &v4)->error, KQ_ERR_NONE);
    h_run(&h, 1000); /* node 4 (its old disk) keeps fetching, as an observer now */
    /* node 4 with a new disk has not fetched anything: the old disk's progress is not its */
    kq_voter fresh = h_voter(4);
    memset(fresh.key.dir, 0xee, 16);
    const kq_raft_msg *a = ask(&h, l, 2, KQ_RAFT_ADD_VOTER_REQ, &fresh);
    assert_int_equal(a->error, KQ_ERR_REQUEST_TIMED_OUT);
    assert_non_null(strstr(a->u.voter_resp.error_message, "with this directory id does not fetch"));
    /* the old disk, which has caught up, may come back */
    assert_int_equal(ask(&h, l, 2, KQ_RAFT_ADD_VOTER_REQ, &v4)->error, KQ_ERR_NONE);
    h_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_leader_writes_the_bootstrap_set_into_the_log),
        cmocka_unit_test(test_add_a_caught_up_observer),
        cmocka_unit_test(test_refusals_in_kafkas_order),
        cmocka_unit_test(test_remove_a_voter_then_kill_it),
        cmocka_unit_test(test_leader_removes_itself_and_hands_over),
        cmocka_unit_test(test_change_lost_with_its_leader_is_undone_everywhere),
        cmocka_unit_test(test_removed_voter_cannot_disturb_the_quorum_it_left),
        cmocka_unit_test(test_reformatted_node_is_another_voter),
        cmocka_unit_test(test_a_vote_is_for_a_key_not_an_id),
        cmocka_unit_test(test_upgrade_a_static_cluster_then_grow_it),
        cmocka_unit_test(test_a_voter_that_moved_updates_its_endpoint),
        cmocka_unit_test(test_standalone_grows_to_two_and_back),
        cmocka_unit_test(test_a_removed_voter_is_not_re_added_before_it_fetches_again),
        cmocka_unit_test(test_a_voter_that_has_not_learnt_it_is_one_still_votes),
        cmocka_unit_test(test_restart_and_snapshot_keep_the_set),
        cmocka_unit_test(test_unsafe_recovery_on_the_last_survivor),
        cmocka_unit_test(test_catch_up_is_per_directory),
        cmocka_unit_test(test_new_node_finds_the_leader_through_bootstrap_servers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
