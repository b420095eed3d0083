/*
 * The Raft host (kq/raft_host.h) with the real core and a recording disk and network: writes go
 * to the disk before anything is sent, a vote is durable before the requests that ask for
 * votes leave, a leader's Fetch answers leave before its own commit, the core hears PERSISTED
 * after each commit, an observer drops answers, and a failed commit stops the node.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kq/error.h"
#include "kq/raft_host.h"

enum {
    J_QSTATE = 1,
    J_TRUNCATE,
    J_APPEND,
    J_OWN,
    J_COMMIT,
    J_PERSISTED,
    J_REQUEST,
    J_RESPONSE,
    J_CHUNK,
    J_INSTALL,
    J_COMMIT_START
};

typedef struct entry {
    int kind;
    bool pending; /* the disk's batch was open when it happened */
    kq_raft_msg_type type;
    int64_t offset;
} entry;

typedef struct fake {
    kq_raft_host h;
    kq_raft *r;
    bool open;  /* a batch is open */
    bool async; /* the disk commits with commit_start; the test says when it is durable */
    uint64_t started, durable;
    int fail_commit; /* the next commit fails with this */
    entry j[256];
    size_t n;
    jmp_buf stop; /* ops.fatal jumps here */
    char fatal_what[128];
    uint64_t tokens;
} fake;

static void note(fake *f, int kind, kq_raft_msg_type type, int64_t offset)
{
    assert_true(f->n < sizeof f->j / sizeof f->j[0]);
    f->j[f->n++] = (entry){kind, f->open || f->started > f->durable, type, offset};
}

static int put_qstate(void *ctx, const kq_raft_qstate *qs)
{
    (void)qs;
    fake *f = ctx;
    f->open = true;
    note(f, J_QSTATE, 0, -1);
    return 0;
}

static int truncate_log(void *ctx, int64_t end)
{
    fake *f = ctx;
    f->open = true;
    note(f, J_TRUNCATE, 0, end);
    return 0;
}

static int append(void *ctx, int64_t base, int32_t epoch, int32_t count, const uint8_t *rec,
                  size_t len)
{
    (void)epoch, (void)count, (void)rec, (void)len;
    fake *f = ctx;
    f->open = true;
    note(f, J_APPEND, 0, base);
    return 0;
}

static int remove_prefix(void *ctx, int64_t start)
{
    (void)ctx, (void)start;
    return 0;
}

static int chunk(void *ctx, kq_raft_snapshot_id id, int64_t pos, const uint8_t *d, size_t n)
{
    (void)id, (void)d, (void)n;
    note(ctx, J_CHUNK, 0, pos);
    return 0;
}

static int install(void *ctx, kq_raft_snapshot_id id, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    note(ctx, J_INSTALL, 0, id.end_offset);
    return 0;
}

static void abort_part(void *ctx, kq_raft_snapshot_id id)
{
    (void)ctx, (void)id;
}

static bool pending(void *ctx)
{
    return ((fake *)ctx)->open;
}

static int commit(void *ctx)
{
    fake *f = ctx;
    if (f->fail_commit)
        return f->fail_commit;
    note(f, J_COMMIT, 0, -1);
    f->open = false;
    return 0;
}

static int commit_start(void *ctx, uint64_t seq)
{
    fake *f = ctx;
    f->open = false;
    f->started = seq;
    note(f, J_COMMIT_START, 0, (int64_t)seq);
    return 0;
}

/* The asynchronous disk finished batch seq. */
static void make_durable(fake *f, uint64_t seq)
{
    f->durable = seq;
    kq_raft_host_durable(&f->h, seq);
}

static int send_request(void *ctx, const kq_raft_msg *m)
{
    note(ctx, J_REQUEST, m->type, -1);
    return 0;
}

static void send_response(void *ctx, const kq_raft_msg *m)
{
    note(ctx, J_RESPONSE, m->type, -1);
}

static void append_own(void *ctx, const kq_raft_batch *b)
{
    fake *f = ctx;
    static const uint8_t rec[] = {1, 2, 3};
    note(f, J_OWN, 0, b->base_offset);
    assert_int_equal(
        f->h.disk.append(f->h.disk.ctx, b->base_offset, b->epoch, b->count, rec, sizeof rec), 0);
}

static void persisted(void *ctx, int64_t end)
{
    note(ctx, J_PERSISTED, 0, end);
}

static void host_fatal(void *ctx, const char *what, const char *detail)
{
    fake *f = ctx;
    (void)detail;
    snprintf(f->fatal_what, sizeof f->fatal_what, "%s", what);
    longjmp(f->stop, 1);
}

/* Node 1 of voters {1, 2, 3} (or an observer, id 9), started on an empty log. */
static void setup_disk(fake *f, bool observer, bool async)
{
    kq_raft_config cfg;
    char err[256];
    memset(f, 0, sizeof *f);
    kq_raft_config_defaults(&cfg);
    cfg.node_id = observer ? 9 : 1;
    cfg.voters[0] = 1, cfg.voters[1] = 2, cfg.voters[2] = 3;
    cfg.n_voters = 3;
    cfg.seed = 7;
    f->r = kq_raft_new(&cfg, err, sizeof err);
    assert_non_null(f->r);
    kq_raft_disk disk = {.ctx = f,
                         .put_qstate = put_qstate,
                         .truncate = truncate_log,
                         .append = append,
                         .remove_prefix = remove_prefix,
                         .snapshot_chunk = chunk,
                         .snapshot_abort = abort_part,
                         .pending = pending,
                         .commit = commit,
                         .commit_start = async ? commit_start : NULL};
    kq_raft_host_ops ops = {.ctx = f,
                            .send_request = send_request,
                            .send_response = observer ? NULL : send_response,
                            .append_own = observer ? NULL : append_own,
                            .persisted = persisted,
                            .install_snapshot = install,
                            .fatal = host_fatal};
    assert_int_equal(kq_raft_host_init(&f->h, f->r, &disk, &ops), 0);
    kq_raft_event ev = {.type = KQ_RAFT_EV_START};
    assert_int_equal(kq_raft_host_step(&f->h, &ev, NULL), 0);
    f->async = async;
    f->n = 0;
}

static void setup(fake *f, bool observer)
{
    setup_disk(f, observer, false);
}

/* The host's rule over everything a test saw: no message left while the disk had a batch
 * open (or, asynchronous, one not durable yet), except a leader's Fetch answers (which depend
 * on nothing it still has to write). */
static void teardown(fake *f)
{
    for (size_t i = 0; i < f->n; i++) {
        const entry *e = &f->j[i];
        if ((e->kind == J_REQUEST || e->kind == J_RESPONSE) && e->type != KQ_RAFT_FETCH_RESP &&
            e->pending)
            fail_msg("journal entry %zu: message type %d sent with a batch open", i, (int)e->type);
    }
    kq_raft_host_free(&f->h);
    kq_raft_free(f->r);
}

static size_t first(const fake *f, int kind)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->j[i].kind == kind)
            return i;
    return SIZE_MAX;
}

static void tick_until(fake *f, kq_raft_role role)
{
    for (int i = 0; i < 100 && f->h.st.role != role; i++) {
        f->h.now = f->h.deadline > f->h.now ? f->h.deadline : f->h.now + 1;
        kq_raft_event ev = {.type = KQ_RAFT_EV_TICK};
        assert_int_equal(kq_raft_host_step(&f->h, &ev, NULL), 0);
        kq_raft_host_flush(&f->h);
    }
    assert_int_equal(f->h.st.role, role);
}

/* Every VOTE_REQ sent so far answered with a grant from node 2. */
static void grant_from_2(fake *f, bool pre_vote)
{
    kq_raft_msg m = {
        .type = KQ_RAFT_VOTE_RESP, .from = 2, .to = 1, .epoch = f->h.st.epoch, .leader_id = -1};
    (void)pre_vote;
    m.u.vote_resp.granted = true;
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE, .u.msg = &m};
    assert_int_equal(kq_raft_host_step(&f->h, &ev, NULL), 0);
}

static void become_leader(fake *f)
{
    tick_until(f, KQ_RAFT_PROSPECTIVE);
    grant_from_2(f, true);
    assert_int_equal(f->h.st.role, KQ_RAFT_CANDIDATE);
    kq_raft_host_flush(&f->h);
    grant_from_2(f, false);
    assert_int_equal(f->h.st.role, KQ_RAFT_LEADER);
    kq_raft_host_flush(&f->h);
}

static void test_vote_is_durable_before_the_vote_requests_leave(void **state)
{
    fake f;
    (void)state;
    setup(&f, false);
    tick_until(&f, KQ_RAFT_PROSPECTIVE); /* pre-vote: nothing to persist */
    f.n = 0;
    grant_from_2(&f, true); /* a candidate now: votes for itself, asks the others */
    assert_int_equal(f.h.st.role, KQ_RAFT_CANDIDATE);
    assert_int_not_equal(first(&f, J_QSTATE), SIZE_MAX);
    assert_int_equal(first(&f, J_REQUEST), SIZE_MAX); /* held in the outbox */
    assert_true(f.h.n_outbox >= 1);
    kq_raft_host_flush(&f.h);
    size_t c = first(&f, J_COMMIT), r = first(&f, J_REQUEST);
    assert_int_not_equal(r, SIZE_MAX);
    assert_true(c < r);
    assert_int_equal(f.j[r].type, KQ_RAFT_VOTE_REQ);
    assert_false(f.j[r].pending);
    assert_true(first(&f, J_PERSISTED) < r); /* the core heard PERSISTED first */
    assert_int_equal(f.h.n_outbox, 0);
    teardown(&f);
}

static void test_leader_writes_its_leader_change_before_it_announces_itself(void **state)
{
    fake f;
    (void)state;
    setup(&f, false);
    tick_until(&f, KQ_RAFT_PROSPECTIVE);
    grant_from_2(&f, true);
    kq_raft_host_flush(&f.h);
    f.n = 0;
    grant_from_2(&f, false);
    assert_int_equal(f.h.st.role, KQ_RAFT_LEADER);
    size_t own = first(&f, J_OWN);
    assert_int_not_equal(own, SIZE_MAX);
    assert_int_equal(f.j[own].offset, 0);
    assert_int_equal(first(&f, J_APPEND), own + 1); /* through the disk */
    kq_raft_host_flush(&f.h);
    size_t c = first(&f, J_COMMIT), r = first(&f, J_REQUEST);
    assert_true(c < r);
    assert_int_equal(f.j[r].type, KQ_RAFT_BEGIN_EPOCH_REQ);
    assert_int_equal(f.h.durable_end, 1);
    teardown(&f);
}

/* A Fetch from node 2 at offset `offset` (last fetched epoch 0: an empty log below it). */
static kq_raft_msg fetch_from_2(const fake *f, uint64_t token, int64_t offset)
{
    kq_raft_msg fr = {.type = KQ_RAFT_FETCH_REQ,
                      .from = 2,
                      .to = 1,
                      .epoch = f->h.st.epoch,
                      .token = token,
                      .leader_id = -1};
    fr.u.fetch_req.fetch_offset = offset;
    fr.u.fetch_req.last_fetched_epoch = 0;
    fr.u.fetch_req.max_wait_ms = 500;
    return fr;
}

static void test_fetch_answers_leave_before_the_leaders_commit(void **state)
{
    fake f;
    (void)state;
    setup(&f, false);
    become_leader(&f);
    /* Node 2 fetches from the end of the log: answered at once (it learns the high
     * watermark), then, asking again, parked until there is more. */
    for (int round = 0; round < 2; round++) {
        kq_raft_msg fr = {.type = KQ_RAFT_FETCH_REQ,
                          .from = 2,
                          .to = 1,
                          .epoch = f.h.st.epoch,
                          .token = 42 + (uint64_t)round,
                          .leader_id = -1};
        fr.u.fetch_req.fetch_offset = f.h.st.log_end_offset;
        fr.u.fetch_req.last_fetched_epoch = f.h.st.epoch;
        fr.u.fetch_req.max_wait_ms = 500;
        kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE, .u.msg = &fr};
        f.n = 0;
        assert_int_equal(kq_raft_host_step(&f.h, &ev, NULL), 0);
        kq_raft_host_flush(&f.h);
        if (round == 0)
            assert_int_not_equal(first(&f, J_RESPONSE), SIZE_MAX);
        else
            assert_int_equal(first(&f, J_RESPONSE), SIZE_MAX); /* parked */
    }
    f.n = 0;
    kq_raft_event pe = {.type = KQ_RAFT_EV_PROPOSE, .u.propose_count = 1};
    kq_raft_update u;
    assert_int_equal(kq_raft_host_step(&f.h, &pe, &u), 0);
    assert_int_equal(u.propose_error, 0);
    assert_true(f.open); /* the proposal is in the open batch */
    kq_raft_host_send_fetch_answers(&f.h);
    size_t a = first(&f, J_RESPONSE);
    assert_int_not_equal(a, SIZE_MAX);
    assert_int_equal(f.j[a].type, KQ_RAFT_FETCH_RESP);
    assert_true(f.j[a].pending);                     /* before this node's own commit */
    assert_int_equal(first(&f, J_COMMIT), SIZE_MAX); /* not committed yet */
    kq_raft_host_flush(&f.h);
    assert_int_not_equal(first(&f, J_COMMIT), SIZE_MAX);
    assert_false(f.open);
    teardown(&f);
}

static bool has(const fake *f, kq_raft_msg_type type)
{
    for (size_t i = 0; i < f->h.n_outbox; i++)
        if (f->h.outbox[i].type == type)
            return true;
    return false;
}

/* A Fetch answer in the outbox reads the log when it is sent: the host names the lowest offset
 * such answers read, so a snapshot does not compact it away first. */
static void test_outbox_reads_from_names_what_answers_will_read(void **state)
{
    fake f;
    (void)state;
    setup(&f, false);
    become_leader(&f);
    assert_true(f.h.st.log_end_offset > 0);
    assert_true(kq_raft_host_outbox_reads_from(&f.h) == INT64_MAX);
    kq_raft_msg fr = fetch_from_2(&f, 7, 0); /* a follower with an empty log */
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE, .u.msg = &fr};
    assert_int_equal(kq_raft_host_step(&f.h, &ev, NULL), 0);
    assert_true(has(&f, KQ_RAFT_FETCH_RESP));
    assert_true(kq_raft_host_outbox_reads_from(&f.h) == 0);
    kq_raft_host_flush(&f.h); /* sent */
    assert_true(kq_raft_host_outbox_reads_from(&f.h) == INT64_MAX);
    teardown(&f);
}

static void test_a_node_that_does_not_lead_sends_nothing_early(void **state)
{
    fake f;
    (void)state;
    setup(&f, false);
    /* Past the election timeout, without a flush: the pre-vote requests wait in the outbox. */
    for (int i = 0; i < 100 && f.h.n_outbox == 0; i++) {
        f.h.now = f.h.deadline > f.h.now ? f.h.deadline : f.h.now + 1;
        kq_raft_event ev = {.type = KQ_RAFT_EV_TICK};
        assert_int_equal(kq_raft_host_step(&f.h, &ev, NULL), 0);
    }
    assert_true(has(&f, KQ_RAFT_VOTE_REQ));
    assert_int_not_equal(f.h.st.role, KQ_RAFT_LEADER);
    size_t before = f.h.n_outbox;
    f.n = 0;
    kq_raft_host_send_fetch_answers(&f.h);
    assert_int_equal(f.h.n_outbox, before);
    assert_int_equal(f.n, 0);
    kq_raft_host_flush(&f.h); /* now they go */
    assert_int_not_equal(first(&f, J_REQUEST), SIZE_MAX);
    assert_int_equal(f.h.n_outbox, 0);
    teardown(&f);
}

static void test_an_observer_drops_the_answers_it_is_asked_for(void **state)
{
    fake f;
    (void)state;
    setup(&f, true);
    /* A Vote request reaching an observer is answered by the core; its host (no
     * send_response) drops the answer instead of sending it. */
    kq_raft_msg vr = {
        .type = KQ_RAFT_VOTE_REQ, .from = 2, .to = 9, .epoch = 5, .token = 3, .leader_id = -1};
    vr.u.vote_req.candidate_id = 2;
    vr.u.vote_req.last_epoch = 0;
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE, .u.msg = &vr};
    assert_int_equal(kq_raft_host_step(&f.h, &ev, NULL), 0);
    assert_true(has(&f, KQ_RAFT_VOTE_RESP));
    kq_raft_host_flush(&f.h);
    assert_false(has(&f, KQ_RAFT_VOTE_RESP));
    assert_int_equal(first(&f, J_RESPONSE), SIZE_MAX);
    teardown(&f);
}

/* An observer behind the leader's log start fetches its snapshot, installs it between commits,
 * and fetches the log from the snapshot's end. */
static void test_a_fetched_snapshot_is_installed_then_the_log_follows(void **state)
{
    fake f;
    (void)state;
    setup(&f, true);
    kq_raft_msg fetch = {0};
    for (int i = 0; i < 100 && fetch.type != KQ_RAFT_FETCH_REQ; i++) {
        f.n = 0;
        f.h.now = f.h.deadline > f.h.now ? f.h.deadline : f.h.now + 1;
        kq_raft_event ev = {.type = KQ_RAFT_EV_TICK};
        assert_int_equal(kq_raft_host_step(&f.h, &ev, NULL), 0);
        for (size_t k = 0; k < f.h.n_outbox; k++)
            if (f.h.outbox[k].type == KQ_RAFT_FETCH_REQ)
                fetch = f.h.outbox[k];
        kq_raft_host_flush(&f.h);
    }
    assert_int_equal(fetch.type, KQ_RAFT_FETCH_REQ);
    /* The leader (fetch.to) answers: the log starts above you, fetch snapshot (10, 1). */
    kq_raft_snapshot_id id = {.end_offset = 10, .epoch = 1};
    kq_raft_msg fr = {
        .type = KQ_RAFT_FETCH_RESP, .from = fetch.to, .to = 9, .epoch = 1, .leader_id = fetch.to};
    fr.u.fetch_resp.high_watermark = 10;
    fr.u.fetch_resp.log_start_offset = 10;
    fr.u.fetch_resp.diverging_epoch = -1;
    fr.u.fetch_resp.diverging_end_offset = -1;
    fr.u.fetch_resp.snapshot = true;
    fr.u.fetch_resp.snapshot_id = id;
    kq_raft_event ev = {.type = KQ_RAFT_EV_RECEIVE, .u.msg = &fr};
    /* The first answer, from a new epoch, makes it a follower of fetch.to that fetches again
     * in that epoch; the answer to that one sends it to the snapshot. */
    for (int round = 0; round < 3 && !has(&f, KQ_RAFT_FETCH_SNAPSHOT_REQ); round++) {
        kq_raft_host_flush(&f.h);
        assert_int_equal(kq_raft_host_step(&f.h, &ev, NULL), 0);
    }
    assert_true(has(&f, KQ_RAFT_FETCH_SNAPSHOT_REQ));
    kq_raft_host_flush(&f.h);
    /* The whole file in one chunk. */
    static const uint8_t file[32] = {1, 2, 3};
    kq_raft_msg sr = {.type = KQ_RAFT_FETCH_SNAPSHOT_RESP,
                      .from = fetch.to,
                      .to = 9,
                      .epoch = 1,
                      .leader_id = fetch.to};
    sr.u.fetch_snapshot_resp.snapshot_id = id;
    sr.u.fetch_snapshot_resp.size = sizeof file;
    sr.u.fetch_snapshot_resp.position = 0;
    sr.u.fetch_snapshot_resp.data = file;
    sr.u.fetch_snapshot_resp.len = sizeof file;
    f.n = 0;
    ev.u.msg = &sr;
    assert_int_equal(kq_raft_host_step(&f.h, &ev, NULL), 0);
    assert_int_not_equal(first(&f, J_CHUNK), SIZE_MAX);
    assert_true(f.h.pending_install);
    assert_int_equal(first(&f, J_INSTALL), SIZE_MAX); /* not inside the step */
    kq_raft_host_flush(&f.h);
    size_t in = first(&f, J_INSTALL);
    assert_int_not_equal(in, SIZE_MAX);
    assert_int_equal(f.j[in].offset, 10);
    assert_false(f.h.pending_install);
    assert_int_equal(f.h.durable_end, 10);
    /* Then it fetches the log from the snapshot's end. */
    bool fetched = false;
    for (size_t i = in + 1; i < f.n; i++)
        fetched |= f.j[i].kind == J_REQUEST && f.j[i].type == KQ_RAFT_FETCH_REQ;
    for (size_t k = 0; k < f.h.n_outbox; k++)
        fetched |= f.h.outbox[k].type == KQ_RAFT_FETCH_REQ;
    assert_true(fetched);
    teardown(&f);
}

static void test_a_failed_commit_stops_the_node(void **state)
{
    fake f;
    (void)state;
    setup(&f, false);
    tick_until(&f, KQ_RAFT_PROSPECTIVE);
    grant_from_2(&f, true); /* the vote is in the open batch */
    f.n = 0;
    f.fail_commit = KQ_ERR_IO;
    if (setjmp(f.stop) == 0) {
        kq_raft_host_flush(&f.h);
        fail_msg("a failed commit did not stop the node");
    }
    assert_string_equal(f.fatal_what, "committing the log (fsync)");
    assert_int_equal(first(&f, J_REQUEST), SIZE_MAX); /* nothing left for the peers */
    teardown(&f);
}

/* An asynchronous disk: the vote requests wait until the batch holding the vote is durable
 * (not merely started), and the core hears PERSISTED only then; a leader's Fetch answers still
 * leave while its own batch syncs. */
static void test_async_disk_holds_messages_until_durable(void **state)
{
    fake f;
    (void)state;
    setup_disk(&f, false, true);
    tick_until(&f, KQ_RAFT_PROSPECTIVE);
    f.n = 0;
    grant_from_2(&f, true); /* a candidate: votes for itself */
    kq_raft_host_flush(&f.h);
    assert_int_not_equal(first(&f, J_COMMIT_START), SIZE_MAX);
    assert_int_equal(first(&f, J_COMMIT), SIZE_MAX);
    assert_int_equal(first(&f, J_REQUEST), SIZE_MAX); /* started, not durable: held */
    assert_int_equal(first(&f, J_PERSISTED), SIZE_MAX);
    assert_true(f.h.n_outbox >= 1);
    make_durable(&f, f.started);
    size_t p = first(&f, J_PERSISTED);
    assert_int_not_equal(p, SIZE_MAX);
    kq_raft_host_flush(&f.h);
    size_t r = first(&f, J_REQUEST);
    assert_int_not_equal(r, SIZE_MAX);
    assert_true(p < r);
    assert_int_equal(f.j[r].type, KQ_RAFT_VOTE_REQ);

    grant_from_2(&f, false); /* leader: its LeaderChange batch */
    assert_int_equal(f.h.st.role, KQ_RAFT_LEADER);
    kq_raft_host_flush(&f.h);
    assert_int_equal(f.h.durable_end, 0);
    make_durable(&f, f.started);
    assert_int_equal(f.h.durable_end, 1);
    kq_raft_host_flush(&f.h);
    kq_raft_msg fr = fetch_from_2(&f, 77, 0);
    kq_raft_event fe = {.type = KQ_RAFT_EV_RECEIVE, .u.msg = &fr};
    kq_raft_event pe = {.type = KQ_RAFT_EV_PROPOSE, .u.propose_count = 1};
    assert_int_equal(kq_raft_host_step(&f.h, &pe, NULL), 0);
    f.n = 0;
    assert_int_equal(kq_raft_host_step(&f.h, &fe, NULL), 0);
    kq_raft_host_flush(&f.h); /* starts the proposal's commit */
    kq_raft_host_send_fetch_answers(&f.h);
    size_t a = first(&f, J_RESPONSE);
    assert_int_not_equal(a, SIZE_MAX);
    assert_int_equal(f.j[a].type, KQ_RAFT_FETCH_RESP);
    assert_true(f.started > f.durable); /* while its own batch syncs */
    make_durable(&f, f.started);
    kq_raft_host_flush(&f.h);
    assert_int_equal(f.h.durable_end, f.h.st.log_end_offset);
    /* the journal rule would flag the early Fetch answer only if it were not one */
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_async_disk_holds_messages_until_durable),
        cmocka_unit_test(test_vote_is_durable_before_the_vote_requests_leave),
        cmocka_unit_test(test_leader_writes_its_leader_change_before_it_announces_itself),
        cmocka_unit_test(test_fetch_answers_leave_before_the_leaders_commit),
        cmocka_unit_test(test_outbox_reads_from_names_what_answers_will_read),
        cmocka_unit_test(test_a_node_that_does_not_lead_sends_nothing_early),
        cmocka_unit_test(test_an_observer_drops_the_answers_it_is_asked_for),
        cmocka_unit_test(test_a_fetched_snapshot_is_installed_then_the_log_follows),
        cmocka_unit_test(test_a_failed_commit_stops_the_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
