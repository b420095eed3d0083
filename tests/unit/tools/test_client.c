/* kq_tools_call_controller against fake controllers on 127.0.0.1: leader hints are followed
 * (at most 3 hops), dead and leaderless controllers are skipped, a non-retriable error stops
 * the search, retriable failures are retried (passes with backoff) until the overall timeout,
 * and a create whose answer was lost is recognised by its topic id on the retry. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kq/codec.h"
#include "kq/ctl_codec.h"
#include "kq/error.h"
#include "kq/rpc.h"
#include "kq/util.h"
#include "answers.h" /* the controller's CreateTopics answer */
#include "kq_tools.h"

/* Generous: the fakes answer at once, so only a dead address ever waits this long. */
#define CALL_TIMEOUT_MS 3000u
#define DEAD_TIMEOUT_MS 200u

typedef enum fake_mode {
    FAKE_ANSWER = 0, /* the active controller: answers DescribeQuorum / Write */
    FAKE_HINT,       /* NOT_CONTROLLER with leader_endpoint = hint */
    FAKE_NOT_LEADER, /* NOT_LEADER_OR_FOLLOWER with leader_endpoint = hint */
    FAKE_NO_LEADER,  /* LEADER_NOT_AVAILABLE */
    FAKE_INVALID,    /* INVALID_REQUEST (not retriable) */
    FAKE_GARBAGE,    /* bytes that are no response */
    FAKE_NOT_YET,    /* a new leader not active yet: the first `not_yet` requests get
                        NOT_CONTROLLER with leader_endpoint = hint (itself), then answers */
} fake_mode;

typedef struct fake {
    fake_mode mode;
    char hint[64];
    int not_yet;
    int port;
    atomic_int requests;
    atomic_int bad_requests; /* requests that did not decode or had a wrong api key */
    kq_rpc_server *server;
} fake;

static int free_port(void)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port = -1;
    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static void describe_sample(kq_quorum_description *d)
{
    memset(d, 0, sizeof *d);
    snprintf(d->cluster_id, sizeof d->cluster_id, "fMCL8kv1SWm87L_Md-I2hg");
    d->leader_id = 2;
    d->leader_epoch = 5;
    d->high_watermark = 40;
    d->n_voters = 2;
    d->voters[0].id = 2;
    d->voters[0].log_end_offset = 41;
    d->voters[0].last_fetch_timestamp = -1;
    d->voters[0].last_caught_up_timestamp = -1;
    d->voters[1].id = 1;
    d->voters[1].log_end_offset = 38;
    d->voters[1].last_fetch_timestamp = 1000;
    d->voters[1].last_caught_up_timestamp = 900;
    d->n_nodes = 1;
    d->nodes[0].id = 2;
    snprintf(d->nodes[0].listener, sizeof d->nodes[0].listener, "CONTROLLER");
    snprintf(d->nodes[0].host, sizeof d->nodes[0].host, "127.0.0.1");
    d->nodes[0].port = 9094;
}

static void on_request(void *arg, kq_rpc_req *req)
{
    fake *f = arg;
    kq_request r;
    char err[256];
    kq_buf out = {NULL, 0};
    int nth = atomic_fetch_add(&f->requests, 1) + 1;
    memset(&r, 0, sizeof r);
    int rc =
        kq_codec_decode_request(kq_rpc_req_data(req), kq_rpc_req_len(req), &r, err, sizeof err);
    if (rc != 0) {
        atomic_fetch_add(&f->bad_requests, 1);
        kq_rpc_req_drop(req);
        return;
    }
    uint32_t api = r.api_key;
    if ((api != KQ_API_DESCRIBE_QUORUM && api != KQ_API_WRITE) || r.cluster_id[0] != '\0')
        atomic_fetch_add(&f->bad_requests, 1);
    fake_mode mode = f->mode;
    if (mode == FAKE_NOT_YET)
        mode = nth > f->not_yet ? FAKE_ANSWER : FAKE_HINT;
    switch (mode) {
    case FAKE_NOT_YET:
    case FAKE_ANSWER:
        if (api == KQ_API_WRITE) {
            rc = kq_codec_encode_write_response(100 + (int64_t)r.n_records, 5, &out);
        } else {
            kq_quorum_description d;
            describe_sample(&d);
            rc = kq_codec_encode_describe_response(&d, &out);
        }
        break;
    case FAKE_HINT:
        rc = kq_codec_encode_error_response(api, KQ_ERR_NOT_CONTROLLER, "not the leader", 2, 5,
                                            f->hint[0] ? f->hint : NULL, &out);
        break;
    case FAKE_NOT_LEADER:
        rc = kq_codec_encode_error_response(api, KQ_ERR_NOT_LEADER_OR_FOLLOWER, NULL, 2, 5, f->hint,
                                            &out);
        break;
    case FAKE_NO_LEADER:
        rc = kq_codec_encode_error_response(api, KQ_ERR_LEADER_NOT_AVAILABLE, "election", -1, -1,
                                            NULL, &out);
        break;
    case FAKE_INVALID:
        rc = kq_codec_encode_error_response(api, KQ_ERR_INVALID_REQUEST, "bad request", -1, -1,
                                            NULL, &out);
        break;
    case FAKE_GARBAGE:
        kq_request_free(&r);
        kq_rpc_reply(req, (const uint8_t *)"\xff\xff\xff garbage", 11);
        return;
    }
    kq_request_free(&r);
    if (rc != 0) {
        atomic_fetch_add(&f->bad_requests, 1);
        kq_rpc_req_drop(req);
        return;
    }
    kq_rpc_reply(req, out.data, out.len);
    kq_buf_free(&out);
}

static void fake_start(fake *f, fake_mode mode)
{
    char url[64], err[256];
    memset(f, 0, sizeof *f);
    f->mode = mode;
    for (int attempt = 0; attempt < 20; attempt++) {
        f->port = free_port();
        assert_true(f->port > 0);
        snprintf(url, sizeof url, "tcp://127.0.0.1:%d", f->port);
        if (kq_rpc_server_start(url, 4, KQ_RPC_DEFAULT_MAX_MSG, on_request, f, &f->server, err,
                                sizeof err) == 0)
            return;
    }
    fail_msg("cannot start a fake controller: %s", err);
}

static void fake_hint_to(fake *f, const fake *target)
{
    snprintf(f->hint, sizeof f->hint, "127.0.0.1:%d", target->port);
}

static void fake_hint_to_port(fake *f, int port)
{
    snprintf(f->hint, sizeof f->hint, "127.0.0.1:%d", port);
}

static void fake_stop(fake *f)
{
    kq_rpc_server_stop(f->server);
    assert_int_equal(atomic_load(&f->bad_requests), 0);
}

static kq_tools_addr addr_of(int port)
{
    kq_tools_addr a;
    snprintf(a.host, sizeof a.host, "127.0.0.1");
    a.port = port;
    return a;
}

/* DescribeQuorum with an overall timeout (also the per-attempt one); *passes (may be NULL) gets
 * the passes made over the bootstrap list. */
static int describe_passes(const kq_tools_addr *addrs, int n, uint32_t timeout_ms, int *passes,
                           FILE *verbose, kq_response *resp)
{
    kq_buf req = {NULL, 0};
    assert_int_equal(kq_codec_encode_describe_request("", &req), 0);
    kq_tools_call_opts o = {.bootstrap = addrs,
                            .n_bootstrap = n,
                            .timeout_ms = timeout_ms,
                            .max_hops = 3,
                            .verbose = verbose,
                            .passes = passes};
    int rc = kq_tools_call_controller(&o, KQ_API_DESCRIBE_QUORUM, &req, resp);
    kq_buf_free(&req);
    return rc;
}

static int describe(const kq_tools_addr *addrs, int n, uint32_t timeout_ms, kq_response *resp)
{
    return describe_passes(addrs, n, timeout_ms, NULL, NULL, resp);
}

static void test_follows_not_controller_hint(void **state)
{
    fake leader, follower;
    fake_start(&leader, FAKE_ANSWER);
    fake_start(&follower, FAKE_HINT);
    fake_hint_to(&follower, &leader);

    kq_tools_addr a[1] = {addr_of(follower.port)};
    kq_response resp;
    assert_int_equal(describe(a, 1, CALL_TIMEOUT_MS, &resp), KQ_EXIT_OK);
    assert_int_equal(resp.error, KQ_ERR_NONE);
    assert_string_equal(resp.describe.cluster_id, "fMCL8kv1SWm87L_Md-I2hg");
    assert_int_equal(resp.describe.leader_id, 2);
    assert_int_equal(resp.describe.n_voters, 2);
    assert_int_equal(atomic_load(&follower.requests), 1);
    assert_int_equal(atomic_load(&leader.requests), 1);

    /* What the tool prints from that answer. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    kq_tools_print_status(f, &resp.describe, false);
    fclose(f);
    assert_non_null(strstr(text, "LeaderId:               2\n"));
    assert_non_null(strstr(text, "MaxFollowerLag:         3\n"));
    assert_non_null(strstr(text, "MaxFollowerLagTimeMs:   -1\n"));
    assert_non_null(strstr(
        text, "[{\"id\": 2, \"endpoints\": [\"CONTROLLER://127.0.0.1:9094\"]}, {\"id\": 1}]"));
    free(text);
    kq_response_free(&resp);
    fake_stop(&follower);
    fake_stop(&leader);
}

static void test_follows_not_leader_hint_for_write(void **state)
{
    fake leader, follower;
    fake_start(&leader, FAKE_ANSWER);
    fake_start(&follower, FAKE_NOT_LEADER);
    fake_hint_to(&follower, &leader);

    const uint8_t r0[] = "a", r1[] = "bb", r2[] = "ccc";
    const uint8_t *recs[] = {r0, r1, r2};
    size_t lens[] = {1, 2, 3};
    kq_buf req = {NULL, 0};
    assert_int_equal(kq_codec_encode_write_request("", recs, lens, 3, &req), 0);
    kq_tools_addr a[1] = {addr_of(follower.port)};
    kq_tools_call_opts o = {
        .bootstrap = a, .n_bootstrap = 1, .timeout_ms = CALL_TIMEOUT_MS, .max_hops = 3};
    kq_response resp;
    assert_int_equal(kq_tools_call_controller(&o, KQ_API_WRITE, &req, &resp), KQ_EXIT_OK);
    assert_int_equal(resp.write_base_offset, 103); /* the fake encodes the record count */
    assert_int_equal(resp.write_epoch, 5);
    kq_response_free(&resp);
    kq_buf_free(&req);
    assert_int_equal(atomic_load(&leader.requests), 1);
    fake_stop(&follower);
    fake_stop(&leader);
}

static void test_skips_dead_leaderless_and_garbage(void **state)
{
    fake leaderless, garbage, leader;
    fake_start(&leaderless, FAKE_NO_LEADER);
    fake_start(&garbage, FAKE_GARBAGE);
    fake_start(&leader, FAKE_ANSWER);
    int dead = free_port();
    assert_true(dead > 0);

    kq_tools_addr a[4] = {addr_of(dead), addr_of(leaderless.port), addr_of(garbage.port),
                          addr_of(leader.port)};
    kq_response resp;
    assert_int_equal(describe(a, 4, DEAD_TIMEOUT_MS, &resp), KQ_EXIT_OK);
    assert_int_equal(resp.describe.leader_epoch, 5);
    kq_response_free(&resp);
    assert_int_equal(atomic_load(&leaderless.requests), 1);
    assert_int_equal(atomic_load(&garbage.requests), 1);
    assert_int_equal(atomic_load(&leader.requests), 1);
    fake_stop(&leaderless);
    fake_stop(&garbage);
    fake_stop(&leader);
}

static void test_hint_loop_stops_after_three_hops(void **state)
{
    fake a, b;
    fake_start(&a, FAKE_HINT);
    fake_start(&b, FAKE_HINT);
    fake_hint_to(&a, &b);
    fake_hint_to(&b, &a);

    kq_tools_addr addrs[1] = {addr_of(a.port)};
    kq_response resp;
    int passes = 0;
    assert_int_equal(describe_passes(addrs, 1, 1000u, &passes, NULL, &resp), KQ_EXIT_FAILURE);
    /* Each pass: the bootstrap address plus 3 hops: a, b, a, b (NOT_CONTROLLER is retriable,
     * so passes repeat until the timeout; the last pass may run out of time early, even before
     * its first request on a loaded machine). */
    int na = atomic_load(&a.requests), nb = atomic_load(&b.requests);
    assert_true(passes >= 2);
    assert_true(na <= 2 * passes && nb <= 2 * passes);
    assert_true(na >= 2 * (passes - 1) && nb >= 2 * (passes - 1));
    fake_stop(&a);
    fake_stop(&b);
}

static void test_non_retriable_error_stops(void **state)
{
    fake bad, leader;
    fake_start(&bad, FAKE_INVALID);
    fake_start(&leader, FAKE_ANSWER);
    kq_tools_addr a[2] = {addr_of(bad.port), addr_of(leader.port)};
    kq_response resp;
    /* A long timeout: reads move on to the next address when the first has not answered
     * within min(timeout / 4, 2 s); the error answer must win well before that even on a
     * loaded machine. */
    assert_int_equal(describe(a, 2, 30000u, &resp), KQ_EXIT_FAILURE);
    assert_int_equal(atomic_load(&bad.requests), 1);
    assert_int_equal(atomic_load(&leader.requests), 0);
    fake_stop(&bad);
    fake_stop(&leader);
}

static void test_nobody_answers(void **state)
{
    fake leaderless;
    fake_start(&leaderless, FAKE_NO_LEADER);
    int dead = free_port();
    kq_tools_addr a[2] = {addr_of(dead), addr_of(leaderless.port)};
    kq_response resp;
    int passes = 0;
    assert_int_equal(describe_passes(a, 2, DEAD_TIMEOUT_MS, &passes, NULL, &resp), KQ_EXIT_FAILURE);
    assert_true(passes >= 1);
    /* One request per pass (the last one may have had no time left for it). */
    int n = atomic_load(&leaderless.requests);
    assert_true(n == passes || (passes > 1 && n == passes - 1));
    fake_stop(&leaderless);
}

/* A dead first address (connection refused) must not cost the per-address timeout: with a 30 s
 * timeout the call must come back long before that (the deadline below is generous). */
#define LONG_TIMEOUT_MS 30000u
#define WELL_UNDER_MS 10000

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_first_address_dead_answers_well_under_timeout(void **state)
{
    fake leader;
    fake_start(&leader, FAKE_ANSWER);
    int dead = free_port();
    assert_true(dead > 0);
    kq_tools_addr a[2] = {addr_of(dead), addr_of(leader.port)};
    kq_response resp;
    long long t0 = mono_ms();
    assert_int_equal(describe(a, 2, LONG_TIMEOUT_MS, &resp), KQ_EXIT_OK);
    assert_true(mono_ms() - t0 < WELL_UNDER_MS);
    assert_int_equal(resp.describe.leader_id, 2);
    kq_response_free(&resp);
    assert_int_equal(atomic_load(&leader.requests), 1);
    fake_stop(&leader);
}

/* The same for a write, which must reach exactly one controller exactly once. */
static void test_write_skips_dead_first_address_sent_once(void **state)
{
    fake leader, follower;
    fake_start(&leader, FAKE_ANSWER);
    fake_start(&follower, FAKE_HINT);
    fake_hint_to(&follower, &leader);
    int dead = free_port();
    assert_true(dead > 0);

    const uint8_t r0[] = "x";
    const uint8_t *recs[] = {r0};
    size_t lens[] = {1};
    kq_buf req = {NULL, 0};
    assert_int_equal(kq_codec_encode_write_request("", recs, lens, 1, &req), 0);
    kq_tools_addr a[3] = {addr_of(dead), addr_of(follower.port), addr_of(leader.port)};
    kq_tools_call_opts o = {
        .bootstrap = a, .n_bootstrap = 3, .timeout_ms = LONG_TIMEOUT_MS, .max_hops = 3};
    kq_response resp;
    long long t0 = mono_ms();
    assert_int_equal(kq_tools_call_controller(&o, KQ_API_WRITE, &req, &resp), KQ_EXIT_OK);
    assert_true(mono_ms() - t0 < WELL_UNDER_MS);
    assert_int_equal(resp.write_base_offset, 101);
    kq_response_free(&resp);
    kq_buf_free(&req);
    /* Bootstrap order: the follower (hint) first, then the leader once; never twice. */
    assert_int_equal(atomic_load(&follower.requests), 1);
    assert_int_equal(atomic_load(&leader.requests), 1);
    fake_stop(&follower);
    fake_stop(&leader);
}

/* A live but silent controller first (it never answers): a read goes on to the next address
 * without waiting out the 30 s timeout. */
static void on_request_silent(void *arg, kq_rpc_req *req)
{
    atomic_int *n = arg;
    atomic_fetch_add(n, 1);
    kq_rpc_req_drop(req);
}

static void test_read_does_not_wait_for_silent_controller(void **state)
{
    fake leader;
    fake_start(&leader, FAKE_ANSWER);
    atomic_int silent_requests = 0;
    kq_rpc_server *silent = NULL;
    char url[64], err[256];
    int port = -1;
    for (int attempt = 0; attempt < 20 && silent == NULL; attempt++) {
        port = free_port();
        snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
        if (kq_rpc_server_start(url, 4, KQ_RPC_DEFAULT_MAX_MSG, on_request_silent, &silent_requests,
                                &silent, err, sizeof err) != 0)
            silent = NULL;
    }
    assert_non_null(silent);
    kq_tools_addr a[2] = {addr_of(port), addr_of(leader.port)};
    kq_response resp;
    long long t0 = mono_ms();
    assert_int_equal(describe(a, 2, LONG_TIMEOUT_MS, &resp), KQ_EXIT_OK);
    assert_true(mono_ms() - t0 < WELL_UNDER_MS);
    assert_int_equal(resp.describe.leader_epoch, 5);
    kq_response_free(&resp);
    assert_int_equal(atomic_load(&silent_requests), 1);
    assert_int_equal(atomic_load(&leader.requests), 1);
    kq_rpc_server_stop(silent);
    fake_stop(&leader);
}

/* Every address dead (refusing connections: controllers restarting): retried with backoff
 * until the overall timeout, then a failure. No pass starts after the timeout, and the last
 * one starts no earlier than the longest backoff (+20% jitter) before it. */
#define RETRY_TIMEOUT_MS 3000
#define MAX_WAIT_MS (KQ_TOOLS_BACKOFF_MAX_MS * 12 / 10)

static void test_all_dead_retried_until_timeout(void **state)
{
    int d1 = free_port(), d2 = free_port();
    assert_true(d1 > 0 && d2 > 0);
    kq_tools_addr a[2] = {addr_of(d1), addr_of(d2)};
    kq_response resp;
    int passes = 0;
    long long t0 = mono_ms();
    assert_int_equal(describe_passes(a, 2, RETRY_TIMEOUT_MS, &passes, NULL, &resp),
                     KQ_EXIT_FAILURE);
    long long took = mono_ms() - t0;
    assert_true(passes >= 3);
    assert_true(took + MAX_WAIT_MS >= RETRY_TIMEOUT_MS);
    assert_true(took < RETRY_TIMEOUT_MS + WELL_UNDER_MS);
}

/* A new active controller that is not ready yet answers NOT_CONTROLLER naming itself: that hint
 * is not followed at once; the next pass (after the backoff) asks again, until it answers.
 * --verbose says what was retried. */
static void test_retries_until_new_leader_is_active(void **state)
{
    fake leader;
    fake_start(&leader, FAKE_NOT_YET);
    leader.not_yet = 3;
    fake_hint_to(&leader, &leader);
    kq_tools_addr a[1] = {addr_of(leader.port)};
    kq_response resp;
    int passes = 0;
    char *text = NULL;
    size_t len = 0;
    FILE *v = open_memstream(&text, &len);
    assert_non_null(v);
    assert_int_equal(describe_passes(a, 1, LONG_TIMEOUT_MS, &passes, v, &resp), KQ_EXIT_OK);
    fclose(v);
    assert_int_equal(resp.describe.leader_epoch, 5);
    kq_response_free(&resp);
    assert_int_equal(passes, 4);
    assert_int_equal(atomic_load(&leader.requests), 4); /* one per pass: no hops to itself */
    char want[128];
    snprintf(want, sizeof want,
             " after pass 3: 127.0.0.1:%d: NOT_CONTROLLER: not the leader (leader hint "
             "127.0.0.1:%d)\n",
             leader.port, leader.port);
    assert_non_null(strstr(text, want));
    assert_int_equal(strncmp(text, "kq: retrying in ", 16), 0);
    assert_null(strstr(text, "after pass 4"));
    free(text);
    fake_stop(&leader);
}

/* The kill -9 story for a write: the old leader is dead, a standby still names it, the new
 * leader says NOT_CONTROLLER (no hint) twice while it becomes active, then takes the write.
 * The write is retried in passes and reaches the new leader exactly once. */
static void test_write_retried_through_election(void **state)
{
    fake standby, leader;
    int dead = free_port();
    assert_true(dead > 0);
    fake_start(&standby, FAKE_HINT);
    fake_hint_to_port(&standby, dead);
    fake_start(&leader, FAKE_NOT_YET);
    leader.not_yet = 2;

    const uint8_t r0[] = "x";
    const uint8_t *recs[] = {r0};
    size_t lens[] = {1};
    kq_buf req = {NULL, 0};
    assert_int_equal(kq_codec_encode_write_request("", recs, lens, 1, &req), 0);
    kq_tools_addr a[3] = {addr_of(dead), addr_of(standby.port), addr_of(leader.port)};
    int passes = 0;
    kq_tools_call_opts o = {.bootstrap = a,
                            .n_bootstrap = 3,
                            .timeout_ms = LONG_TIMEOUT_MS,
                            .attempt_timeout_ms = CALL_TIMEOUT_MS,
                            .max_hops = 3,
                            .passes = &passes};
    kq_response resp;
    assert_int_equal(kq_tools_call_controller(&o, KQ_API_WRITE, &req, &resp), KQ_EXIT_OK);
    assert_int_equal(resp.write_base_offset, 101);
    kq_response_free(&resp);
    kq_buf_free(&req);
    assert_int_equal(passes, 3);
    assert_int_equal(atomic_load(&standby.requests), 3);
    assert_int_equal(atomic_load(&leader.requests), 3); /* 2 refusals, then the write */
    fake_stop(&standby);
    fake_stop(&leader);
}

/* No controller ever becomes active: the overall timeout bounds the retries. */
static void test_overall_timeout_bounds_retries(void **state)
{
    fake follower;
    fake_start(&follower, FAKE_HINT); /* NOT_CONTROLLER without a hint */
    kq_tools_addr a[1] = {addr_of(follower.port)};
    kq_response resp;
    int passes = 0;
    long long t0 = mono_ms();
    assert_int_equal(describe_passes(a, 1, 1500u, &passes, NULL, &resp), KQ_EXIT_FAILURE);
    long long took = mono_ms() - t0;
    assert_true(passes >= 2);
    int n = atomic_load(&follower.requests);
    assert_true(n == passes || n == passes - 1); /* the last pass may have had no time left */
    assert_true(took + MAX_WAIT_MS >= 1500);
    assert_true(took < 1500 + WELL_UNDER_MS);
    fake_stop(&follower);
}

/* ---- kq topics --create: a retry recognises its own topic --------------------------------- */

/* A fake active controller for CreateTopics. The first request creates the topic (remembering
 * the id the client sent) and its answer is lost (dropped: the client times out); later ones
 * answer TOPIC_ALREADY_EXISTS with the existing topic's id, as the controller does. */
typedef struct create_fake {
    atomic_int requests;
    atomic_int bad_requests;
    uint8_t id[16]; /* the created topic's */
    int created;
    kq_rpc_server *server;
    int port;
} create_fake;

static void on_create(void *arg, kq_rpc_req *req)
{
    create_fake *f = arg;
    kq_ctl_request r;
    char err[256];
    kq_buf out = {NULL, 0};
    atomic_fetch_add(&f->requests, 1);
    if (kq_ctl_decode_request(kq_rpc_req_data(req), kq_rpc_req_len(req), &r, err, sizeof err) !=
            0 ||
        r.api_key != KQ_API_CREATE_TOPICS || r.create_topics.n != 1) {
        atomic_fetch_add(&f->bad_requests, 1);
        kq_rpc_req_drop(req);
        return;
    }
    kq_create_topic_result res;
    memset(&res, 0, sizeof res);
    if (!f->created) {
        f->created = 1;
        memcpy(f->id, r.create_topics.topics[0].topic_id, 16);
        kq_ctl_request_free(&r);
        kq_rpc_req_drop(req); /* committed, but the answer is lost */
        return;
    }
    res.error = KQ_ERR_TOPIC_ALREADY_EXISTS;
    snprintf(res.message, sizeof res.message, "topic %s already exists",
             r.create_topics.topics[0].name);
    memcpy(res.topic_id, f->id, 16);
    if (kq_ctl_encode_create_topics_response(r.create_topics.topics, &res, 1, &out) != 0) {
        atomic_fetch_add(&f->bad_requests, 1);
        kq_ctl_request_free(&r);
        kq_rpc_req_drop(req);
        return;
    }
    kq_ctl_request_free(&r);
    kq_rpc_reply(req, out.data, out.len);
    kq_buf_free(&out);
}

/* kq topics --create's call: CreateTopics for `name` with topic id `id`, a short per-attempt
 * timeout; the single result in *items. */
static int create_topic(create_fake *f, const char *name, const uint8_t id[16],
                        kq_ctl_item_results *items)
{
    kq_create_topic ct = {.name = name, .num_partitions = 1, .replication_factor = 1};
    kq_ctl_request req = {.api_key = KQ_API_CREATE_TOPICS};
    kq_buf b = {NULL, 0};
    kq_response resp;
    char err[256];
    memcpy(ct.topic_id, id, 16);
    req.create_topics.topics = &ct;
    req.create_topics.n = 1;
    assert_int_equal(kq_ctl_encode_request("", -1, &req, &b), 0);
    kq_tools_addr a[1] = {addr_of(f->port)};
    kq_tools_call_opts o = {.bootstrap = a,
                            .n_bootstrap = 1,
                            .timeout_ms = LONG_TIMEOUT_MS,
                            .attempt_timeout_ms = 300u,
                            .max_hops = 3};
    int rc = kq_tools_call_controller(&o, KQ_API_CREATE_TOPICS, &b, &resp);
    kq_buf_free(&b);
    if (rc != KQ_EXIT_OK)
        return rc;
    assert_int_equal(kq_ctl_decode_item_results(&resp, items, err, sizeof err), 0);
    kq_response_free(&resp);
    assert_int_equal(items->n, 1);
    return rc;
}

static void test_create_retry_recognises_own_topic(void **state)
{
    create_fake f;
    char url[64], err[256];
    memset(&f, 0, sizeof f);
    for (int attempt = 0; attempt < 20 && f.server == NULL; attempt++) {
        f.port = free_port();
        snprintf(url, sizeof url, "tcp://127.0.0.1:%d", f.port);
        if (kq_rpc_server_start(url, 4, KQ_RPC_DEFAULT_MAX_MSG, on_create, &f, &f.server, err,
                                sizeof err) != 0)
            f.server = NULL;
    }
    assert_non_null(f.server);

    char s[KQ_UUID_STR_LEN + 1];
    uint8_t mine[16], other[16];
    assert_int_equal(kq_uuid_random(s), 0);
    assert_true(kq_uuid_parse(s, mine));
    assert_int_equal(kq_uuid_random(s), 0);
    assert_true(kq_uuid_parse(s, other));

    /* The first attempt times out (its answer was lost); the retry is told the topic exists,
     * with the id this call sent: created. */
    kq_ctl_item_results items = {0};
    assert_int_equal(create_topic(&f, "orders", mine, &items), KQ_EXIT_OK);
    assert_int_equal(atomic_load(&f.requests), 2);
    assert_memory_equal(f.id, mine, 16);
    assert_int_equal(items.items[0].error, KQ_ERR_TOPIC_ALREADY_EXISTS);
    assert_true(items.items[0].has_id);
    assert_true(kq_tools_topic_created(&items.items[0], mine));
    kq_ctl_item_results_free(&items);

    /* Another command creating the same name (another id) gets the error. */
    assert_int_equal(create_topic(&f, "orders", other, &items), KQ_EXIT_OK);
    assert_int_equal(items.items[0].error, KQ_ERR_TOPIC_ALREADY_EXISTS);
    assert_false(kq_tools_topic_created(&items.items[0], other));
    kq_ctl_item_results_free(&items);
    kq_rpc_server_stop(f.server);
    assert_int_equal(atomic_load(&f.bad_requests), 0);
}

static void test_topic_created_rules(void **state)
{
    uint8_t id[16], zero[16] = {0};
    memset(id, 0x42, 16);
    kq_ctl_item_result it = {.error = KQ_ERR_NONE};
    assert_true(kq_tools_topic_created(&it, id));
    it.error = KQ_ERR_TOPIC_ALREADY_EXISTS; /* no id in the answer (an older controller) */
    assert_false(kq_tools_topic_created(&it, id));
    it.has_id = true;
    memcpy(it.topic_id, id, 16);
    assert_true(kq_tools_topic_created(&it, id));
    assert_false(kq_tools_topic_created(&it, zero));
    it.topic_id[3] ^= 1;
    assert_false(kq_tools_topic_created(&it, id));
    it.error = KQ_ERR_INVALID_REQUEST; /* any other error is an error, whatever the id */
    memcpy(it.topic_id, id, 16);
    assert_false(kq_tools_topic_created(&it, id));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_follows_not_controller_hint),
        cmocka_unit_test(test_follows_not_leader_hint_for_write),
        cmocka_unit_test(test_skips_dead_leaderless_and_garbage),
        cmocka_unit_test(test_hint_loop_stops_after_three_hops),
        cmocka_unit_test(test_non_retriable_error_stops),
        cmocka_unit_test(test_nobody_answers),
        cmocka_unit_test(test_first_address_dead_answers_well_under_timeout),
        cmocka_unit_test(test_write_skips_dead_first_address_sent_once),
        cmocka_unit_test(test_read_does_not_wait_for_silent_controller),
        cmocka_unit_test(test_all_dead_retried_until_timeout),
        cmocka_unit_test(test_retries_until_new_leader_is_active),
        cmocka_unit_test(test_write_retried_through_election),
        cmocka_unit_test(test_overall_timeout_bounds_retries),
        cmocka_unit_test(test_create_retry_recognises_own_topic),
        cmocka_unit_test(test_topic_created_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
