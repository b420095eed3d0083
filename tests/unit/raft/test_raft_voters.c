/* The Raft core on a voter set that changes (KIP-853), through its API: the set found at start,
 * a set in force as soon as a follower appends it (before it commits), a truncation that takes
 * it back, a removed voter that no longer campaigns, an observer that becomes a voter, and a
 * follower that keeps fetching from a leader that left the set. Records the core must refuse
 * change nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kq/error.h"
#include "kq/raft.h"
#include "kq/voters.h"

/* Node ids 1..n with directory id bytes equal to the id. */
static kq_voter_set ids(int n, const int32_t *id)
{
    kq_voter_set s;

    memset(&s, 0, sizeof(s));
    for (int i = 0; i < n; i++) {
        kq_voter *v = &s.v[s.n++];
        v->key.id = id[i];
        memset(v->key.dir, (int)id[i], sizeof(v->key.dir));
        snprintf(v->host, sizeof(v->host), "c%d", id[i]);
        v->port = 9090 + id[i];
        v->kraft_max = 1;
    }
    return s;
}
#define SET(...) ids(sizeof((int32_t[]){__VA_ARGS__}) / 4, (int32_t[]){__VA_ARGS__})

static kq_raft *core(int32_t self)
{
    kq_raft_config c;

    kq_raft_config_defaults(&c);
    c.node_id = self;
    memset(c.directory_id, (int)self, sizeof(c.directory_id));
    c.n_voters = 3;
    for (int i = 0; i < 3; i++)
        c.voters[i] = i + 1;
    c.seed = 7;
    return kq_raft_new(&c, NULL, 0);
}

static kq_raft_persisted disk(int32_t epoch, int32_t leader, int64_t end)
{
    static kq_epoch_entry e[1];
    kq_raft_persisted p;

    memset(&p, 0, sizeof(p));
    p.qstate.epoch = epoch;
    p.qstate.voted_id = -1;
    p.qstate.leader_id = leader;
    p.log_end_offset = end;
    if (end > 0) {
        e[0].epoch = 1;
        e[0].start_offset = 0;
        p.epochs = e;
        p.n_epochs = 1;
    }
    return p;
}

static int step(kq_raft *r, kq_raft_event_type t, uint64_t now, kq_raft_update *u)
{
    kq_raft_event ev = {.type = t, .now_ms = now};
    return kq_raft_step(r, &ev, u);
}

static int start(kq_raft *r, const kq_raft_persisted *p, kq_raft_update *u)
{
    kq_raft_event ev = {.type = KQ_RAFT_EV_START, .now_ms = 100};
    ev.u.start = *p;
    return kq_raft_step(r, &ev, u);
}

/* The Fetch the core sent to `to` in u (fails the test when none). */
static const kq_raft_msg *fetch_to(const kq_raft_update *u, int32_t to)
{
    for (size_t i = 0; i < u->n_msgs; i++)
        if (u->msgs[i].type == KQ_RAFT_FETCH_REQ && u->msgs[i].to == to)
            return &u->msgs[i];
    fail_msg("no Fetch to %d", to);
    return NULL;
}

/* Leader `from` answers a Fetch at epoch 1 with one batch [base, base + count) carrying `ctl`,
 * or a divergence when count is 0 (truncate to base). */
static int32_t answer_epoch = 1; /* the leader's epoch in answer() */

static int answer(kq_raft *r, int32_t from, int64_t base, int32_t count, const kq_raft_control *ctl,
                  size_t n_ctl, uint64_t now, kq_raft_update *u)
{
    kq_raft_batch b = {
        .base_offset = base, .epoch = 1, .count = count, .control = ctl, .n_control = n_ctl};
    kq_raft_msg m;
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE, .now_ms = now};

    memset(&m, 0, sizeof(m));
    m.type = KQ_RAFT_FETCH_RESP;
    m.from = from;
    m.epoch = answer_epoch;
    m.leader_id = from;
    m.u.fetch_resp.high_watermark = 0;
    if (count > 0) {
        m.u.fetch_resp.batches = &b;
        m.u.fetch_resp.n_batches = 1;
    } else {
        m.u.fetch_resp.diverging = true;
        m.u.fetch_resp.diverging_epoch = 1;
        m.u.fetch_resp.diverging_end_offset = base;
    }
    ev.u.msg = &m;
    kq_raft_status st;
    kq_raft_get_status(r, &st);
    m.to = st.node_id;
    return kq_raft_step(r, &ev, u);
}

static bool is_voter(const kq_raft *r)
{
    kq_raft_status st;

    kq_raft_get_status(r, &st);
    return st.is_voter;
}

static void test_start_takes_the_latest_set(void **state)
{
    kq_voter_set boot = SET(1, 2, 3), grown = SET(1, 2, 3, 4);
    kq_raft_control ctl[2] = {{.offset = -1, .kraft_version = 1, .voters = &boot},
                              {.offset = 4, .kraft_version = -1, .voters = &grown}};
    kq_raft_persisted p = disk(1, -1, 10);
    kq_raft_update u;
    kq_raft_status st;
    int64_t at;
    kq_raft *r = core(4); /* not in the static set 1, 2, 3 */

    (void)state;
    p.control = ctl;
    p.n_control = 2;
    assert_int_equal(start(r, &p, &u), 0);
    kq_raft_get_status(r, &st);
    assert_true(st.is_voter);
    assert_int_equal(st.kraft_version, 1);
    assert_int_equal(kq_raft_voters(r, &at)->n, 4);
    assert_int_equal(at, 4);
    kq_raft_free(r);

    /* a snapshot's KRaftVersion and Voters records share its last offset; an uncompacted log
     * below the snapshot's end repeats them: each counts once */
    kq_raft_control snap[4] = {{.offset = -1, .kraft_version = 1, .voters = &boot},
                               {.offset = 7, .kraft_version = 1, .voters = NULL},
                               {.offset = 7, .kraft_version = -1, .voters = &grown},
                               {.offset = 7, .kraft_version = -1, .voters = &grown}};
    r = core(4);
    p.control = snap;
    p.n_control = 4;
    assert_int_equal(start(r, &p, &u), 0);
    assert_int_equal(kq_raft_voters(r, &at)->n, 4);
    assert_int_equal(at, 7);
    assert_true(is_voter(r));
    kq_raft_free(r);
    p.n_control = 2;

    /* a record past the log end, or two changes at once, is refused and START can be retried */
    kq_voter_set far = SET(1, 5, 6);
    kq_raft_control bad[2] = {{.offset = 2, .kraft_version = 1, .voters = &boot},
                              {.offset = 3, .kraft_version = -1, .voters = &far}};
    r = core(4);
    p.control = bad;
    assert_int_equal(start(r, &p, &u), KQ_ERR_INVALID_REQUEST);
    ctl[1].offset = 10;
    p.control = ctl;
    assert_int_equal(start(r, &p, &u), KQ_ERR_INVALID_REQUEST);
    assert_false(is_voter(r));
    ctl[1].offset = 4;
    assert_int_equal(start(r, &p, &u), 0);
    assert_true(is_voter(r));
    kq_raft_free(r);
}

static void test_follower_uses_a_set_once_appended_and_drops_it_when_truncated(void **state)
{
    kq_voter_set boot = SET(1, 2, 3), grown = SET(1, 2, 3, 4);
    kq_raft_control b0 = {.offset = -1, .kraft_version = 1, .voters = &boot};
    kq_raft_control add4 = {.offset = 12, .kraft_version = -1, .voters = &grown};
    kq_raft_persisted p = disk(1, 1, 10); /* follows leader 1 in epoch 1 */
    kq_raft_update u;
    int64_t at;
    kq_raft *r = core(4);

    (void)state;
    p.control = &b0;
    p.n_control = 1;
    assert_int_equal(start(r, &p, &u), 0);
    assert_false(is_voter(r));
    assert_int_equal(u.role, KQ_RAFT_FOLLOWER);
    fetch_to(&u, 1);

    /* the batch [10, 15) holds the VotersRecord adding node 4: in force at once, uncommitted */
    assert_int_equal(answer(r, 1, 10, 5, &add4, 1, 200, &u), 0);
    assert_int_equal(u.n_append, 1);
    assert_true(is_voter(r));
    assert_int_equal(kq_raft_voters(r, &at)->n, 4);
    assert_int_equal(at, 12);

    /* the leader diverges at 10: the record at 12 is gone, so is the set */
    kq_raft_event pe = {.type = KQ_RAFT_EV_PERSISTED, .now_ms = 210, .u.persisted_end = 15};
    assert_int_equal(kq_raft_step(r, &pe, &u), 0);
    fetch_to(&u, 1);
    assert_int_equal(answer(r, 1, 10, 0, NULL, 0, 220, &u), 0);
    assert_int_equal(u.truncate_to, 10);
    assert_false(is_voter(r));
    assert_int_equal(kq_raft_voters(r, &at)->n, 3);
    assert_int_equal(at, -1);

    /* a non-voter follower whose leader is silent goes looking for one; it does not campaign */
    assert_int_equal(step(r, KQ_RAFT_EV_TICK, 220 + 2000, &u), 0);
    assert_int_equal(u.role, KQ_RAFT_UNATTACHED);
    assert_int_equal(step(r, KQ_RAFT_EV_TICK, 220 + 10000, &u), 0);
    assert_int_equal(u.role, KQ_RAFT_UNATTACHED);
    kq_raft_free(r);
}

static void test_removed_voter_stops_campaigning_and_added_one_starts(void **state)
{
    kq_voter_set boot = SET(1, 2, 3), shrunk = SET(1, 2);
    kq_raft_control b0 = {.offset = -1, .kraft_version = 1, .voters = &boot};
    kq_raft_control rm3 = {.offset = 10, .kraft_version = -1, .voters = &shrunk};
    kq_raft_persisted p = disk(1, 1, 10);
    kq_raft_update u;
    kq_raft *r = core(3);

    (void)state;
    p.control = &b0;
    p.n_control = 1;
    assert_int_equal(start(r, &p, &u), 0);
    assert_true(is_voter(r));
    assert_int_equal(answer(r, 1, 10, 1, &rm3, 1, 200, &u), 0);
    assert_false(is_voter(r));
    /* its leader goes quiet for a fetch timeout before node 3 knows the removal committed: it
     * campaigns, since it may hold the only copy of the record (with two voters the other one
     * would need its vote, refused to a shorter log), asking the voters of its latest set and
     * not counting itself */
    assert_int_equal(step(r, KQ_RAFT_EV_TICK, 200 + 2000, &u), 0);
    assert_int_equal(u.role, KQ_RAFT_PROSPECTIVE);
    int asked = 0;
    for (size_t i = 0; i < u.n_msgs; i++)
        if (u.msgs[i].type == KQ_RAFT_VOTE_REQ) {
            assert_true(u.msgs[i].to == 1 || u.msgs[i].to == 2);
            asked++;
        }
    assert_int_equal(asked, 2);
    kq_raft_free(r);

    /* once the high watermark passed the removal, node 3 rediscovers the leader instead */
    r = core(3);
    assert_int_equal(start(r, &p, &u), 0);
    assert_int_equal(answer(r, 1, 10, 1, &rm3, 1, 200, &u), 0);
    kq_raft_event pe3 = {.type = KQ_RAFT_EV_PERSISTED, .now_ms = 200, .u.persisted_end = 11};
    assert_int_equal(kq_raft_step(r, &pe3, &u), 0);
    kq_raft_msg hw;
    memset(&hw, 0, sizeof(hw));
    hw.type = KQ_RAFT_FETCH_RESP;
    hw.from = 1;
    hw.to = 3;
    hw.epoch = 1;
    hw.leader_id = 1;
    hw.u.fetch_resp.high_watermark = 11;
    kq_raft_event he = {.type = KQ_RAFT_EV_RECEIVE, .now_ms = 210, .u.msg = &hw};
    assert_int_equal(kq_raft_step(r, &he, &u), 0);
    kq_raft_status st;
    kq_raft_get_status(r, &st);
    assert_int_equal(st.high_watermark, 11);
    assert_int_equal(step(r, KQ_RAFT_EV_TICK, 210 + 2000, &u), 0);
    assert_int_equal(u.role, KQ_RAFT_UNATTACHED);
    for (size_t i = 0; i < u.n_msgs; i++)
        assert_int_not_equal(u.msgs[i].type, KQ_RAFT_VOTE_REQ);
    assert_int_equal(step(r, KQ_RAFT_EV_TICK, 210 + 10000, &u), 0);
    assert_int_equal(u.role, KQ_RAFT_UNATTACHED);
    kq_raft_free(r);

    /* node 4, an observer waiting for a leader, is added: it now has an election timer */
    kq_voter_set grown = SET(1, 2, 3, 4);
    kq_raft_control add4 = {.offset = 10, .kraft_version = -1, .voters = &grown};
    r = core(4);
    p = disk(1, 1, 10);
    p.control = &b0;
    p.n_control = 1;
    assert_int_equal(start(r, &p, &u), 0);
    assert_int_equal(answer(r, 1, 10, 1, &add4, 1, 200, &u), 0);
    assert_true(is_voter(r));
    kq_raft_event pe = {.type = KQ_RAFT_EV_PERSISTED, .now_ms = 200, .u.persisted_end = 11};
    assert_int_equal(kq_raft_step(r, &pe, &u), 0);
    /* the leader goes quiet: node 4, a voter now, becomes a prospective candidate */
    assert_int_equal(step(r, KQ_RAFT_EV_TICK, 200 + 2000, &u), 0);
    assert_int_equal(u.role, KQ_RAFT_PROSPECTIVE);
    kq_raft_free(r);
}

static void test_follower_keeps_fetching_from_a_leader_that_left_the_set(void **state)
{
    kq_voter_set boot = SET(1, 2, 3), without1 = SET(2, 3);
    kq_raft_control b0 = {.offset = -1, .kraft_version = 1, .voters = &boot};
    kq_raft_control rm1 = {.offset = 10, .kraft_version = -1, .voters = &without1};
    kq_raft_persisted p = disk(1, 1, 10);
    kq_raft_update u;
    kq_raft *r = core(2);

    (void)state;
    p.control = &b0;
    p.n_control = 1;
    assert_int_equal(start(r, &p, &u), 0);
    assert_int_equal(answer(r, 1, 10, 1, &rm1, 1, 200, &u), 0);
    assert_int_equal(kq_raft_voters(r, NULL)->n, 2);
    assert_int_equal(u.role, KQ_RAFT_FOLLOWER);
    kq_raft_event pe = {.type = KQ_RAFT_EV_PERSISTED, .now_ms = 200, .u.persisted_end = 11};
    assert_int_equal(kq_raft_step(r, &pe, &u), 0);
    /* node 1 leads until its removal commits: node 2 fetches from it and takes its answers */
    const kq_raft_msg *f = fetch_to(&u, 1);
    assert_int_equal(f->u.fetch_req.fetch_offset, 11);
    assert_int_equal(answer(r, 1, 11, 2, NULL, 0, 300, &u), 0);
    assert_int_equal(u.n_append, 1);
    kq_raft_free(r);
}

static void test_leader_refusing_the_one_change_rule_stops_the_follower(void **state)
{
    kq_voter_set boot = SET(1, 2, 3), far = SET(1, 5, 6);
    kq_raft_control b0 = {.offset = -1, .kraft_version = 1, .voters = &boot};
    kq_raft_control c = {.offset = 10, .kraft_version = -1, .voters = &far};
    kq_raft_control outside = {.offset = 12, .kraft_version = -1, .voters = &boot};
    kq_raft_control start_ctl[2] = {b0, {.offset = 5, .kraft_version = -1, .voters = &boot}};
    kq_raft_persisted p = disk(1, 1, 10);
    kq_raft_update u;
    kq_raft *r = core(2);

    (void)state;
    /* the first leader wrote the bootstrap set into the log at 5 (any set may replace the
     * bootstrap's; later ones must overlap) */
    p.control = start_ctl;
    p.n_control = 2;
    assert_int_equal(start(r, &p, &u), 0);
    /* a record outside its batch: a bad answer, nothing appended */
    assert_int_equal(answer(r, 1, 10, 1, &outside, 1, 200, &u), 0);
    assert_int_equal(u.n_append, 0);
    assert_false(u.fatal);
    /* two voters changed at once: the log breaks the rule every voter relies on */
    assert_int_equal(step(r, KQ_RAFT_EV_TICK, 300, &u), 0);
    assert_int_equal(answer(r, 1, 10, 1, &c, 1, 300, &u), 0);
    assert_true(u.fatal);
    assert_non_null(strstr(u.fatal_reason, "one-change rule"));
    kq_raft_free(r);
}

/* Node `from` answers the vote request `token` of node 3 (epoch 1, not granted). */
static int vote_no(kq_raft *r, int32_t from, uint64_t token, uint64_t now, kq_raft_update *u)
{
    kq_raft_msg m;
    memset(&m, 0, sizeof(m));
    m.type = KQ_RAFT_VOTE_RESP;
    m.from = from;
    m.to = 3;
    m.token = token;
    m.epoch = 1;
    m.leader_id = -1;
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE, .now_ms = now, .u.msg = &m};
    return kq_raft_step(r, &ev, u);
}

static int vote_reqs_to(const kq_raft_update *u, int32_t to)
{
    int n = 0;
    for (size_t i = 0; i < u->n_msgs; i++)
        n += u->msgs[i].type == KQ_RAFT_VOTE_REQ && u->msgs[i].to == to;
    return n;
}

/* A request in flight to a node that leaves the voter set and comes back is still in flight:
 * no second one of its type goes to that node before the first is answered (the host's
 * contract; found by kq-sim --voter-changes, seeds 867 and 1430). */
static void test_in_flight_request_survives_a_set_change(void **state)
{
    kq_voter_set boot = SET(1, 2, 3), no2 = SET(1, 3);
    kq_raft_control b0 = {.offset = -1, .kraft_version = 1, .voters = &boot};
    kq_raft_control rm2 = {.offset = 10, .kraft_version = -1, .voters = &no2};
    kq_raft_persisted p = disk(1, -1, 10);
    kq_raft_update u;
    kq_raft *r = core(3);

    (void)state;
    p.control = &b0;
    p.n_control = 1;
    assert_int_equal(start(r, &p, &u), 0);
    /* node 3 campaigns: pre-votes to 1 and 2; node 2's answer is slow */
    assert_int_equal(step(r, KQ_RAFT_EV_TICK, 100 + 5000, &u), 0);
    assert_int_equal(u.role, KQ_RAFT_PROSPECTIVE);
    assert_int_equal(vote_reqs_to(&u, 2), 1);
    uint64_t slow = 0;
    for (size_t i = 0; i < u.n_msgs; i++)
        if (u.msgs[i].type == KQ_RAFT_VOTE_REQ && u.msgs[i].to == 2)
            slow = u.msgs[i].token;
    for (size_t i = 0; i < u.n_msgs; i++) /* node 1 answers at once: no */
        if (u.msgs[i].type == KQ_RAFT_VOTE_REQ && u.msgs[i].to == 1) {
            assert_int_equal(vote_no(r, 1, u.msgs[i].token, 5110, &u), 0);
            break;
        }
    /* node 1 leads epoch 2; its log removes node 2, then is truncated: node 2 is back */
    kq_raft_msg b;
    memset(&b, 0, sizeof(b));
    b.type = KQ_RAFT_BEGIN_EPOCH_REQ;
    b.from = 1;
    b.to = 3;
    b.epoch = 2;
    b.leader_id = 1;
    kq_raft_event be = {.type = KQ_RAFT_EV_RECEIVE, .now_ms = 5200, .u.msg = &b};
    assert_int_equal(kq_raft_step(r, &be, &u), 0);
    assert_int_equal(u.role, KQ_RAFT_FOLLOWER);
    answer_epoch = 2;
    assert_int_equal(answer(r, 1, 10, 1, &rm2, 1, 5300, &u), 0);
    int64_t at;
    assert_int_equal(kq_raft_voters(r, &at)->n, 2);
    kq_raft_event pe = {.type = KQ_RAFT_EV_PERSISTED, .now_ms = 5300, .u.persisted_end = 11};
    assert_int_equal(kq_raft_step(r, &pe, &u), 0);
    assert_int_equal(answer(r, 1, 10, 0, NULL, 0, 5400, &u), 0);
    assert_int_equal(u.truncate_to, 10);
    assert_int_equal(kq_raft_voters(r, &at)->n, 3);
    /* node 1 goes quiet: node 3 campaigns again, but node 2 still has the first pre-vote */
    assert_int_equal(step(r, KQ_RAFT_EV_TICK, 5400 + 5000, &u), 0);
    assert_int_equal(u.role, KQ_RAFT_PROSPECTIVE);
    assert_int_equal(vote_reqs_to(&u, 1), 1);
    assert_int_equal(vote_reqs_to(&u, 2), 0);
    /* its answer comes (for an earlier round: no vote), the next request to node 2 may go */
    assert_int_equal(vote_no(r, 2, slow, 10500, &u), 0);
    assert_int_equal(vote_reqs_to(&u, 2), 1);
    answer_epoch = 1;
    kq_raft_free(r);
}

/* A prospective node whose pre-vote a voter refuses while following a live leader at a lower
 * epoch runs a real election at once: pre-votes would be refused for as long as that leader
 * lives, and the node's epoch cannot go back (kq-sim --voter-changes seed 3008828: a lost
 * candidacy left a node at epoch 2, the leader of epoch 1 never learnt of it). */
static void test_prospective_ahead_of_a_live_leader_runs_a_real_election(void **state)
{
    kq_raft_persisted p = disk(2, -1, 10);
    kq_raft_update u;
    kq_raft *r = core(3);

    (void)state;
    assert_int_equal(start(r, &p, &u), 0);
    assert_int_equal(step(r, KQ_RAFT_EV_TICK, 100 + 5000, &u), 0);
    assert_int_equal(u.role, KQ_RAFT_PROSPECTIVE);
    uint64_t tok = 0;
    for (size_t i = 0; i < u.n_msgs; i++)
        if (u.msgs[i].type == KQ_RAFT_VOTE_REQ && u.msgs[i].to == 1) {
            assert_true(u.msgs[i].u.vote_req.pre_vote);
            tok = u.msgs[i].token;
        }
    kq_raft_msg m;
    memset(&m, 0, sizeof(m));
    m.type = KQ_RAFT_VOTE_RESP;
    m.from = 1;
    m.to = 3;
    m.token = tok;
    m.epoch = 1; /* node 1 follows leader 2 of epoch 1 */
    m.leader_id = 2;
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE, .now_ms = 5110, .u.msg = &m};
    assert_int_equal(kq_raft_step(r, &ev, &u), 0);
    assert_int_equal(u.role, KQ_RAFT_CANDIDATE);
    assert_int_equal(u.epoch, 3);
    int real = 0;
    for (size_t i = 0; i < u.n_msgs; i++)
        real += u.msgs[i].type == KQ_RAFT_VOTE_REQ && !u.msgs[i].u.vote_req.pre_vote &&
                u.msgs[i].epoch == 3;
    assert_true(real >= 1);
    kq_raft_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_takes_the_latest_set),
        cmocka_unit_test(test_follower_uses_a_set_once_appended_and_drops_it_when_truncated),
        cmocka_unit_test(test_removed_voter_stops_campaigning_and_added_one_starts),
        cmocka_unit_test(test_follower_keeps_fetching_from_a_leader_that_left_the_set),
        cmocka_unit_test(test_leader_refusing_the_one_change_rule_stops_the_follower),
        cmocka_unit_test(test_in_flight_request_survives_a_set_change),
        cmocka_unit_test(test_prospective_ahead_of_a_live_leader_runs_a_real_election),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
