/* The controller node (controller/node.h) against a fake Raft host: an in-memory log the test
 * commits by moving the high watermark by hand, and a record of every answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kq/codec.h"
#include "kq/ctl_codec.h"
#include "kq/error.h"
#include "node.h"

#define CLUSTER "node-test-cluster-0001"
#define MAX_LOG 64
#define MAX_ANSWERS 32

typedef struct batch {
    int64_t base;
    int32_t epoch, count;
    kq_buf data;
} batch;

typedef struct answer {
    int req;      /* the test's request number */
    int err;      /* 0: a response */
    int64_t wait; /* the offset it waited for */
    kq_buf resp;
} answer;

typedef struct host {
    const char *principal; /* who sends the next requests (NULL: identities not checked) */
    kq_raft_status st;
    kq_ctl_node node;
    batch log[MAX_LOG];
    int n_log;
    answer answers[MAX_ANSWERS];
    int n_answers;
    int dropped;
    int activations, deactivations, fatals;
    bool resign_on_propose; /* the next proposal's step resigns (as check-quorum may) */
} host;

static int reqs[64]; /* request handles: &reqs[i] is request i */

static int req_no(void *req)
{
    return (int)((int *)req - reqs);
}

static void append(host *h, int32_t count, const kq_buf *payload)
{
    batch *b = &h->log[h->n_log++];
    b->base = h->st.log_end_offset;
    b->epoch = h->st.epoch;
    b->count = count;
    b->data = (kq_buf){malloc(payload->len ? payload->len : 1), payload->len};
    assert_non_null(b->data.data);
    memcpy(b->data.data, payload->data, payload->len);
    h->st.log_end_offset += count;
}

static int op_propose(void *ctx, const kq_buf *payload, int32_t count, int64_t *base,
                      int32_t *epoch)
{
    host *h = ctx;
    if (h->st.role != KQ_RAFT_LEADER)
        return KQ_ERR_NOT_LEADER_OR_FOLLOWER;
    *base = h->st.log_end_offset;
    *epoch = h->st.epoch;
    append(h, count, payload);
    if (h->resign_on_propose) { /* the host calls after_step inside the step, as kq_raft_host */
        kq_raft_update u = {.role_changed = true, .role = KQ_RAFT_RESIGNED, .epoch = h->st.epoch};
        h->resign_on_propose = false;
        h->st.role = KQ_RAFT_RESIGNED;
        kq_ctl_node_after_step(&h->node, &u, h->node.now);
    }
    return 0;
}

static int op_read(void *ctx, int64_t from, int64_t to, kq_ctl_batch_fn fn, void *arg)
{
    host *h = ctx;
    for (int i = 0; i < h->n_log; i++)
        if (h->log[i].base >= from && h->log[i].base < to &&
            fn(arg, h->log[i].base, h->log[i].epoch, h->log[i].count, 0, h->log[i].data.data,
               h->log[i].data.len) != 0)
            break;
    return 0;
}

static answer *new_answer(host *h, void *req, int err, int64_t wait)
{
    assert_true(h->n_answers < MAX_ANSWERS);
    answer *a = &h->answers[h->n_answers++];
    *a = (answer){.req = req_no(req), .err = err, .wait = wait};
    return a;
}

static void op_reply(void *ctx, void *req, kq_buf *resp, int64_t wait)
{
    answer *a = new_answer(ctx, req, 0, wait);
    a->resp = *resp;
    *resp = (kq_buf){0};
}

static void op_reply_error(void *ctx, void *req, uint32_t api, int err, const char *msg)
{
    (void)api;
    (void)msg;
    new_answer(ctx, req, err, -1);
}

static void op_drop(void *ctx, void *req)
{
    (void)req;
    ((host *)ctx)->dropped++;
}

static void op_event(void *ctx, kq_ctl_node_event ev, int64_t arg)
{
    host *h = ctx;
    (void)arg;
    h->activations += ev == KQ_CTL_NODE_ACTIVATED;
    h->deactivations += ev == KQ_CTL_NODE_DEACTIVATED;
}

static void op_fatal(void *ctx, const char *what, const char *detail)
{
    (void)what;
    (void)detail;
    ((host *)ctx)->fatals++;
}

/* node.principal.template and the authorizer of the hosts host_new makes (NULL: none). */
static const char *node_template;
static const kq_authorizer_config *node_authorizer;

static host *host_new(size_t max_waiting)
{
    host *h = calloc(1, sizeof(*h));
    assert_non_null(h);
    h->st.role = KQ_RAFT_FOLLOWER;
    h->st.epoch = 1;
    h->st.high_watermark = -1;
    kq_ctl_node_config cfg = {.node_id = 3001,
                              .voters = {3001, 3002, 3003},
                              .n_voters = 3,
                              .cluster_id = CLUSTER,
                              .rebalance_interval_ms = 300000,
                              .unclean_interval_ms = 30000,
                              .snapshot_max_bytes = 1 << 20,
                              .max_write_bytes = 1 << 20,
                              .max_batch_bytes = 4 << 20,
                              .max_waiting = max_waiting,
                              .seed = 7,
                              .node_principal_template = node_template,
                              .authorizer = node_authorizer};
    kq_decide_settings_default(&cfg.decide);
    kq_ctl_node_ops ops = {.ctx = h,
                           .propose = op_propose,
                           .read_committed = op_read,
                           .reply = op_reply,
                           .reply_error = op_reply_error,
                           .drop = op_drop,
                           .event = op_event,
                           .fatal = op_fatal};
    assert_int_equal(kq_ctl_node_init(&h->node, &cfg, &h->st, &ops, 1000), 0);
    return h;
}

static void host_free(host *h)
{
    kq_ctl_node_free(&h->node);
    for (int i = 0; i < h->n_log; i++)
        kq_buf_free(&h->log[i].data);
    for (int i = 0; i < h->n_answers; i++)
        kq_buf_free(&h->answers[i].resp);
    free(h);
}

static void commit_to(host *h, int64_t hw, uint64_t now)
{
    h->st.high_watermark = hw;
    kq_ctl_node_committed(&h->node, now);
}

/* Elected in a new epoch: the LeaderChange batch, committed: the node is active. */
static void become_active(host *h, uint64_t now)
{
    kq_raft_update u = {.role_changed = true, .role = KQ_RAFT_LEADER};
    h->st.role = KQ_RAFT_LEADER;
    h->st.epoch++;
    h->st.leader_id = 3001;
    kq_ctl_node_after_step(&h->node, &u, now);
    kq_buf rec = {0};
    int64_t base = h->st.log_end_offset;
    assert_int_equal(kq_ctl_node_leader_change(&h->node, base, now, &rec), 0);
    append(h, 1, &rec);
    kq_buf_free(&rec);
    commit_to(h, h->st.log_end_offset, now);
    assert_true(h->node.meta.active);
    kq_ctl_node_run(&h->node, now); /* proposes the bootstrap feature records */
    commit_to(h, h->st.log_end_offset, now);
}

static void lose_leadership(host *h, uint64_t now)
{
    kq_raft_update u = {.role_changed = true, .role = KQ_RAFT_FOLLOWER, .epoch = h->st.epoch + 1};
    h->st.role = KQ_RAFT_FOLLOWER;
    h->st.epoch++;
    h->st.leader_id = 3002;
    kq_ctl_node_after_step(&h->node, &u, now);
}

/* Decode a request as the daemon does, then hand it to the node. */
static int send_encoded(host *h, int no, const kq_buf *wire, uint64_t now)
{
    kq_request env;
    char err[256];
    memset(&env, 0, sizeof(env));
    assert_int_equal(kq_codec_decode_request(wire->data, wire->len, &env, err, sizeof(err)), 0);
    int rc = kq_ctl_node_request(&h->node, &reqs[no], &env, h->principal, now);
    kq_request_free(&env);
    return rc;
}

static void send_write(host *h, int no, int n_records, uint64_t now)
{
    const uint8_t *recs[4] = {(const uint8_t *)"a", (const uint8_t *)"bb", (const uint8_t *)"c",
                              (const uint8_t *)"d"};
    size_t lens[4] = {1, 2, 1, 1};
    kq_buf wire = {0};
    assert_int_equal(kq_codec_encode_write_request(CLUSTER, recs, lens, (size_t)n_records, &wire),
                     0);
    assert_int_equal(send_encoded(h, no, &wire, now), 0);
    kq_buf_free(&wire);
}

static void send_registration(host *h, int no, int32_t broker, uint64_t now)
{
    kq_rec_endpoint ep = {.name = "PLAINTEXT", .host = "b", .port = 9092};
    kq_ctl_request r;
    kq_buf wire = {0};
    memset(&r, 0, sizeof(r));
    r.api_key = KQ_API_BROKER_REGISTRATION;
    r.broker_registration.broker_id = broker;
    r.broker_registration.cluster_id = CLUSTER;
    memset(r.broker_registration.incarnation_id, broker, 16);
    r.broker_registration.endpoints = &ep;
    r.broker_registration.n_endpoints = 1;
    assert_int_equal(kq_ctl_encode_request(CLUSTER, broker, &r, &wire), 0);
    assert_int_equal(send_encoded(h, no, &wire, now), 0);
    kq_buf_free(&wire);
}

static void send_heartbeat(host *h, int no, int32_t broker, uint64_t now)
{
    kq_ctl_request r;
    kq_buf wire = {0};
    const kq_broker *b = kq_image_broker(h->node.meta.img, broker);
    assert_non_null(b);
    memset(&r, 0, sizeof(r));
    r.api_key = KQ_API_BROKER_HEARTBEAT;
    r.broker_heartbeat.broker_id = broker;
    r.broker_heartbeat.broker_epoch = b->epoch;
    r.broker_heartbeat.current_metadata_offset = h->st.high_watermark;
    assert_int_equal(kq_ctl_encode_request(CLUSTER, broker, &r, &wire), 0);
    assert_int_equal(send_encoded(h, no, &wire, now), 0);
    kq_buf_free(&wire);
}

static const answer *answer_for(const host *h, int no)
{
    for (int i = 0; i < h->n_answers; i++)
        if (h->answers[i].req == no)
            return &h->answers[i];
    return NULL;
}

/* The decoded envelope of answer a, which must be a response (kq_response_free it). */
static void answer_env(const answer *a, kq_response *resp)
{
    char err[256];

    assert_non_null(a);
    assert_int_equal(a->err, 0);
    assert_int_equal(kq_codec_decode_response(a->resp.data, a->resp.len, -1, resp, err, sizeof err),
                     0);
}

/* The per-item results of answer a (kq_ctl_item_results_free them). */
static void answer_items(const answer *a, kq_ctl_item_results *items)
{
    kq_response resp;
    char err[256];

    answer_env(a, &resp);
    assert_int_equal(kq_ctl_decode_item_results(&resp, items, err, sizeof err), 0);
    kq_response_free(&resp);
}

/* A Write is answered once its last record commits, with the offset of its first. */
static void test_write_answered_after_its_last_record_commits(void **state)
{
    (void)state;
    host *h = host_new(16);
    become_active(h, 1000);
    int64_t first = h->st.log_end_offset;
    send_write(h, 1, 3, 1001);
    assert_null(answer_for(h, 1));
    kq_ctl_node_run(&h->node, 1001); /* proposes the batch */
    assert_int_equal(h->st.log_end_offset, first + 3);
    commit_to(h, first + 2, 1002); /* two of its three records */
    assert_null(answer_for(h, 1));
    commit_to(h, first + 3, 1003);
    const answer *a = answer_for(h, 1);
    assert_non_null(a);
    assert_int_equal(a->err, 0);
    assert_int_equal(a->wait, first + 2);
    kq_response resp;
    memset(&resp, 0, sizeof(resp));
    answer_env(a, &resp);
    assert_int_equal(resp.write_base_offset, first);
    kq_response_free(&resp);
    assert_int_equal(h->fatals, 0);
    host_free(h);
}

/* A controller API's answer waits for its records; losing leadership first fails it with
 * NOT_CONTROLLER and rolls the image back to what committed. */
static void test_leadership_lost_fails_parked_and_rolls_back(void **state)
{
    (void)state;
    host *h = host_new(16);
    become_active(h, 1000);
    send_registration(h, 2, 7, 1001);
    kq_ctl_node_run(&h->node, 1001);
    assert_null(answer_for(h, 2));
    assert_non_null(kq_image_broker(h->node.meta.img, 7)); /* applied, not committed */
    lose_leadership(h, 1002);
    const answer *a = answer_for(h, 2);
    assert_non_null(a);
    assert_int_equal(a->err, KQ_ERR_NOT_CONTROLLER);
    assert_false(h->node.meta.active);
    assert_null(kq_image_broker(h->node.meta.img, 7));
    assert_int_equal(h->deactivations, 1);
    assert_int_equal(kq_ctl_node_waiting(&h->node), 0);
    host_free(h);
}

/* With identities checked, a request that speaks for a broker is accepted only from that
 * broker's principal: CLUSTER_AUTHORIZATION_FAILED otherwise, and nothing is written. */
static void test_requests_for_a_broker_need_its_principal(void **state)
{
    (void)state;
    node_template = "User:CN=node-{id}";
    host *h = host_new(16);
    node_template = NULL;
    become_active(h, 1000);
    int64_t end = h->st.log_end_offset;

    static const char *const impostors[] = {"User:CN=node-8", "User:ANONYMOUS", "User:CN=node-70",
                                            "User:CN=admin"};
    for (int i = 0; i < 4; i++) {
        h->principal = impostors[i];
        send_registration(h, 10 + i, 7, 1001);
        const answer *a = answer_for(h, 10 + i);
        assert_non_null(a);
        assert_int_equal(a->err, KQ_ERR_CLUSTER_AUTHORIZATION_FAILED);
    }
    kq_ctl_node_run(&h->node, 1001);
    assert_int_equal(h->st.log_end_offset, end); /* nothing proposed */
    assert_null(kq_image_broker(h->node.meta.img, 7));

    h->principal = "User:CN=node-7";
    send_registration(h, 20, 7, 1002);
    kq_ctl_node_run(&h->node, 1002);
    commit_to(h, h->st.log_end_offset, 1003);
    const answer *a = answer_for(h, 20);
    assert_non_null(a);
    assert_int_equal(a->err, 0);
    assert_non_null(kq_image_broker(h->node.meta.img, 7));

    /* broker 7's heartbeat: from another broker's certificate refused, from its own served */
    h->principal = "User:CN=node-8";
    send_heartbeat(h, 21, 7, 1004);
    a = answer_for(h, 21);
    assert_non_null(a);
    assert_int_equal(a->err, KQ_ERR_CLUSTER_AUTHORIZATION_FAILED);
    h->principal = "User:CN=node-7";
    send_heartbeat(h, 22, 7, 1005);
    kq_ctl_node_run(&h->node, 1005);
    commit_to(h, h->st.log_end_offset, 1006);
    a = answer_for(h, 22);
    assert_non_null(a);
    assert_int_equal(a->err, 0);
    assert_int_equal(h->fatals, 0);
    host_free(h);
}

/* An authorizer where nobody is identified: a broker's own requests need ClusterAction (as in
 * Kafka: a super user here), admin requests what Kafka's rules say, the Write super users. */
static void test_authorizer_without_identities(void **state)
{
    kq_authorizer_config authz = {.enabled = true};
    char err[256];

    (void)state;
    assert_int_equal(kq_authorizer_parse_super_users("User:admin", &authz, err, sizeof err), 0);
    node_authorizer = &authz;
    host *h = host_new(16);
    node_authorizer = NULL;
    become_active(h, 1000);

    h->principal = NULL; /* User:ANONYMOUS */
    send_registration(h, 1, 7, 1001);
    assert_non_null(answer_for(h, 1));
    assert_int_equal(answer_for(h, 1)->err, KQ_ERR_CLUSTER_AUTHORIZATION_FAILED);
    send_write(h, 2, 1, 1001);
    assert_int_equal(answer_for(h, 2)->err, KQ_ERR_CLUSTER_AUTHORIZATION_FAILED);
    h->principal = "User:admin";
    send_registration(h, 3, 7, 1002);
    kq_ctl_node_run(&h->node, 1002);
    commit_to(h, h->st.log_end_offset, 1003);
    assert_non_null(answer_for(h, 3));
    assert_int_equal(answer_for(h, 3)->err, 0);
    assert_non_null(kq_image_broker(h->node.meta.img, 7));
    host_free(h);
}

static void send_ctl(host *h, int no, kq_ctl_request *r, uint64_t now)
{
    kq_buf wire = {0};
    assert_int_equal(kq_ctl_encode_request(CLUSTER, -1, r, &wire), 0);
    assert_int_equal(send_encoded(h, no, &wire, now), 0);
    kq_buf_free(&wire);
}

/* Run the loop and commit everything, so that request `no` is answered. */
static const answer *settle(host *h, int no, uint64_t now)
{
    kq_ctl_node_run(&h->node, now);
    commit_to(h, h->st.log_end_offset, now + 1);
    return answer_for(h, no);
}

static void describe_acls(host *h, int no, uint64_t now, kq_ctl_acls_desc *out)
{
    kq_ctl_request r = {.api_key = KQ_API_DESCRIBE_ACLS};
    kq_response resp;
    char err[256];
    const answer *a;

    r.describe_acls.filter =
        (kq_acl_filter){KQ_ACL_ANY, NULL, KQ_ACL_ANY, NULL, NULL, KQ_ACL_ANY, KQ_ACL_ANY};
    send_ctl(h, no, &r, now);
    a = settle(h, no, now);
    answer_env(a, &resp);
    assert_int_equal(kq_ctl_decode_describe_acls_response(&resp, out, err, sizeof err), 0);
    kq_response_free(&resp);
}

/* ACLs created by a super user through CreateAcls decide for everyone else at once (Describe
 * granted: DescribeCluster allowed, CreateTopics refused); DescribeAcls lists them, an
 * invalid one is refused per creation, and DeleteAcls takes the grant back. */
static void test_acls_through_the_controller(void **state)
{
    kq_authorizer_config authz = {.enabled = true};
    char err[256];
    const kq_acl grants[] = {
        {.resource_type = KQ_ACL_RESOURCE_CLUSTER,
         .resource_name = KQ_ACL_CLUSTER_NAME,
         .pattern_type = KQ_ACL_PATTERN_LITERAL,
         .principal = "User:reader",
         .host = "*",
         .operation = KQ_ACL_OP_DESCRIBE,
         .permission = KQ_ACL_ALLOW},
        {.resource_type = KQ_ACL_RESOURCE_TOPIC,
         .resource_name = "bad topic",
         .pattern_type = KQ_ACL_PATTERN_LITERAL,
         .principal = "User:reader",
         .host = "*",
         .operation = KQ_ACL_OP_DESCRIBE,
         .permission = KQ_ACL_ALLOW},
        {.resource_type = KQ_ACL_RESOURCE_CLUSTER,
         .resource_name = KQ_ACL_CLUSTER_NAME,
         .pattern_type = KQ_ACL_PATTERN_LITERAL,
         .principal = "User:reader",
         .host = "*",
         .operation = KQ_ACL_OP_DESCRIBE,
         .permission = KQ_ACL_ALLOW}, /* again: no-op */
    };
    kq_ctl_request create = {.api_key = KQ_API_CREATE_ACLS};
    kq_ctl_request cluster = {.api_key = KQ_API_DESCRIBE_CLUSTER};
    kq_ctl_request topics = {.api_key = KQ_API_CREATE_TOPICS};
    kq_ctl_request del = {.api_key = KQ_API_DELETE_ACLS};
    kq_create_topic t = {.name = "t", .num_partitions = 1, .replication_factor = 1};
    /* both select the reader's binding: reported under each, removed once (Kafka) */
    kq_acl_filter f[2] = {
        {KQ_ACL_ANY, NULL, KQ_ACL_ANY, "User:reader", NULL, KQ_ACL_ANY, KQ_ACL_ANY},
        {KQ_ACL_RESOURCE_CLUSTER, NULL, KQ_ACL_ANY, NULL, NULL, KQ_ACL_OP_DESCRIBE, KQ_ACL_ANY}};
    kq_ctl_acls_desc d = {0};
    kq_response resp;
    const answer *a;
    size_t n;

    (void)state;
    assert_int_equal(kq_authorizer_parse_super_users("User:admin", &authz, err, sizeof err), 0);
    node_authorizer = &authz;
    host *h = host_new(16);
    node_authorizer = NULL;
    become_active(h, 1000);

    h->principal = "User:reader";
    send_ctl(h, 1, &cluster, 1001);
    assert_int_equal(answer_for(h, 1)->err, KQ_ERR_CLUSTER_AUTHORIZATION_FAILED);
    create.create_acls.acls = grants;
    create.create_acls.n = 3;
    send_ctl(h, 2, &create, 1001); /* CreateAcls needs Alter on the cluster */
    assert_int_equal(answer_for(h, 2)->err, KQ_ERR_CLUSTER_AUTHORIZATION_FAILED);

    h->principal = "User:admin";
    send_ctl(h, 3, &create, 1002);
    a = settle(h, 3, 1002);
    assert_non_null(a);
    assert_int_equal(a->err, 0);
    {
        kq_ctl_item_results items = {0};

        answer_items(a, &items);
        assert_int_equal(items.n, 3);
        assert_int_equal(items.items[0].error, 0);
        assert_int_equal(items.items[1].error, KQ_ERR_INVALID_REQUEST);
        assert_non_null(strstr(items.items[1].message, "topic name"));
        assert_int_equal(items.items[2].error, 0);
        kq_ctl_item_results_free(&items);
    }
    kq_image_acls(h->node.meta.img, &n);
    assert_int_equal(n, 1);
    describe_acls(h, 4, 1004, &d);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.acls[0].principal, "User:reader");
    assert_int_equal(d.acls[0].operation, KQ_ACL_OP_DESCRIBE);
    kq_ctl_acls_desc_free(&d);

    h->principal = "User:reader";
    send_ctl(h, 5, &cluster, 1005);
    a = settle(h, 5, 1005);
    assert_int_equal(a->err, 0);
    topics.create_topics.topics = &t;
    topics.create_topics.n = 1;
    send_ctl(h, 6, &topics, 1006); /* answered per topic, as Kafka */
    a = settle(h, 6, 1006);
    assert_int_equal(a->err, 0);
    {
        kq_ctl_item_results items = {0};

        answer_items(a, &items);
        assert_int_equal(items.n, 1);
        assert_int_equal(items.items[0].error, KQ_ERR_TOPIC_AUTHORIZATION_FAILED);
        assert_non_null(strstr(items.items[0].message,
                               "principal User:reader is not allowed to Create on Topic t"));
        kq_ctl_item_results_free(&items);
    }
    assert_null(kq_image_topic_by_name(h->node.meta.img, "t"));

    h->principal = "User:admin";
    del.delete_acls.filters = f;
    del.delete_acls.n = 2;
    send_ctl(h, 7, &del, 1007);
    a = settle(h, 7, 1007);
    assert_int_equal(a->err, 0);
    {
        kq_ctl_delete_acls_desc dd = {0};

        answer_env(a, &resp);
        assert_int_equal(kq_ctl_decode_delete_acls_response(&resp, &dd, err, sizeof err), 0);
        kq_response_free(&resp);
        assert_int_equal(dd.n, 2);
        for (int32_t i = 0; i < 2; i++) {
            assert_int_equal(dd.results[i].error, 0);
            assert_int_equal(dd.results[i].n, 1);
            assert_string_equal(dd.results[i].acls[0].principal, "User:reader");
        }
        kq_ctl_delete_acls_desc_free(&dd);
    }
    kq_image_acls(h->node.meta.img, &n);
    assert_int_equal(n, 0);
    h->principal = "User:reader";
    send_ctl(h, 8, &cluster, 1008);
    assert_int_equal(answer_for(h, 8)->err, KQ_ERR_CLUSTER_AUTHORIZATION_FAILED);
    assert_int_equal(h->fatals, 0);
    host_free(h);
}

/* Not the active controller: controller APIs are refused at once, naming why. */
static void test_standby_refuses_at_once(void **state)
{
    (void)state;
    host *h = host_new(16);
    send_registration(h, 3, 7, 1000);
    send_write(h, 4, 1, 1000);
    assert_int_equal(answer_for(h, 3)->err, KQ_ERR_NOT_CONTROLLER);
    assert_int_equal(answer_for(h, 4)->err, KQ_ERR_NOT_CONTROLLER);
    assert_int_equal(h->n_log, 0);
    host_free(h);
}

/* A standby replays committed batches; the leader becomes active only once everything in its
 * log has committed and applied. */
static void test_activation_waits_for_the_leader_change_to_commit(void **state)
{
    (void)state;
    host *h = host_new(16);
    kq_raft_update u = {.role_changed = true, .role = KQ_RAFT_LEADER};
    h->st.role = KQ_RAFT_LEADER;
    kq_ctl_node_after_step(&h->node, &u, 1000);
    kq_buf rec = {0};
    assert_int_equal(kq_ctl_node_leader_change(&h->node, 0, 1000, &rec), 0);
    append(h, 1, &rec);
    kq_buf_free(&rec);
    commit_to(h, 0, 1000);
    assert_false(h->node.meta.active);
    assert_int_equal(h->activations, 0);
    commit_to(h, 1, 1001);
    assert_true(h->node.meta.active);
    assert_int_equal(h->activations, 1);
    /* A new cluster: activation finalizes the feature levels, records applied and waiting in
     * the batch (the next run proposes them). */
    assert_true(h->node.batch_count > 0);
    assert_int_equal(h->node.meta.applied_end, 1 + h->node.batch_count);
    assert_int_equal(kq_ctl_node_deadline(&h->node), 0);
    host_free(h);
}

/* Overload refuses writes and controller APIs, but never a heartbeat. */
static void test_overload_refuses_writes(void **state)
{
    (void)state;
    host *h = host_new(1);
    become_active(h, 1000);
    send_write(h, 5, 1, 1001);
    send_write(h, 6, 1, 1001);
    assert_null(answer_for(h, 5));
    assert_int_equal(answer_for(h, 6)->err, KQ_ERR_BROKER_NOT_AVAILABLE);
    send_registration(h, 7, 8, 1001);
    assert_int_equal(answer_for(h, 7)->err, KQ_ERR_BROKER_NOT_AVAILABLE);
    host_free(h);
}

/* A broker whose session expires exactly now: the fence timer's next deadline is strictly
 * later (it once re-fired at the same millisecond without end), and the broker is fenced at
 * the following check. */
static void test_fence_timer_moves_forward(void **state)
{
    (void)state;
    host *h = host_new(16);
    become_active(h, 1000);
    send_registration(h, 8, 7, 1000);
    kq_ctl_node_run(&h->node, 1000);
    commit_to(h, h->st.log_end_offset, 1000);
    send_heartbeat(h, 10, 7, 1000); /* caught up: unfenced */
    kq_ctl_node_run(&h->node, 1000);
    commit_to(h, h->st.log_end_offset, 1000);
    assert_false(kq_image_broker(h->node.meta.img, 7)->fenced);
    uint64_t expiry = 1000 + h->node.meta.settings.session_timeout_ms;
    for (uint64_t now = 1000; now <= expiry; now += 100)
        kq_ctl_node_run(&h->node, now);
    kq_ctl_node_run(&h->node, expiry);
    assert_true(kq_ctl_node_deadline(&h->node) > expiry);
    kq_ctl_node_run(&h->node, kq_ctl_node_deadline(&h->node));
    commit_to(h, h->st.log_end_offset, expiry + 1);
    const kq_broker *b = kq_image_broker(h->node.meta.img, 7);
    assert_non_null(b);
    assert_true(b->fenced);
    host_free(h);
}

/* A snapshot is due after snapshot_max_bytes of applied records, only while nothing in the
 * image is uncommitted. */
static void test_snapshot_due_by_bytes(void **state)
{
    (void)state;
    host *h = host_new(64);
    kq_raft_snapshot_id id;
    become_active(h, 1000);
    assert_false(kq_ctl_node_snapshot_due(&h->node, 1000, &id)); /* 1 MiB not reached */
    h->node.cfg.snapshot_max_bytes = h->node.bytes_since_snapshot + 1;
    assert_false(kq_ctl_node_snapshot_due(&h->node, 1000, &id));
    send_write(h, 9, 4, 1001);
    kq_ctl_node_run(&h->node, 1001);
    assert_false(kq_ctl_node_snapshot_due(&h->node, 1001, &id)); /* not committed yet */
    commit_to(h, h->st.log_end_offset, 1002);
    assert_true(kq_ctl_node_snapshot_due(&h->node, 1002, &id));
    assert_int_equal(id.end_offset, h->st.log_end_offset);
    kq_ctl_node_snapshot_taken(&h->node, id, 1002);
    assert_false(kq_ctl_node_snapshot_due(&h->node, 1003, &id));
    host_free(h);
}

/* A snapshot is written only when the host can: its log durable up to the snapshot's end (a
 * leader counts the followers' logs for its high watermark, and may know records committed
 * before its own disk holds them: found by kq-sim), no snapshot being fetched or installed, and
 * no Fetch answer waiting to be sent that reads below its end (kq-sim seed 7300008776: a
 * leader that resigned with one in its outbox compacted the log it was to read). */
static void test_snapshot_ready_needs_durable_log(void **state)
{
    (void)state;
    host *h = host_new(64);
    kq_raft_snapshot_id id;
    become_active(h, 1000);
    h->node.cfg.snapshot_max_bytes = 1;
    send_write(h, 9, 4, 1001);
    kq_ctl_node_run(&h->node, 1001);
    commit_to(h, h->st.log_end_offset, 1002);
    int64_t end = h->st.high_watermark;
    assert_true(kq_ctl_node_snapshot_due(&h->node, 1002, &id));
    h->st.durable_end_offset = end - 1; /* the followers' logs made it committed */
    assert_false(kq_ctl_node_snapshot_ready(&h->node, &h->st, false, INT64_MAX, 1002, &id));
    h->st.durable_end_offset = end;
    assert_false(kq_ctl_node_snapshot_ready(&h->node, &h->st, true, INT64_MAX, 1002, &id));
    h->st.fetching_snapshot = true;
    assert_false(kq_ctl_node_snapshot_ready(&h->node, &h->st, false, INT64_MAX, 1002, &id));
    h->st.fetching_snapshot = false;
    h->st.installing_snapshot = true;
    assert_false(kq_ctl_node_snapshot_ready(&h->node, &h->st, false, INT64_MAX, 1002, &id));
    h->st.installing_snapshot = false;
    /* an answer waiting in the host's outbox still reads the log below the end */
    assert_false(kq_ctl_node_snapshot_ready(&h->node, &h->st, false, end - 1, 1002, &id));
    assert_true(kq_ctl_node_snapshot_ready(&h->node, &h->st, false, end, 1002, &id));
    assert_true(kq_ctl_node_snapshot_ready(&h->node, &h->st, false, INT64_MAX, 1002, &id));
    assert_int_equal(id.end_offset, end);
    host_free(h);
}

/* Overloaded, the node still takes a heartbeat (refusing it would let live brokers'
 * sessions expire, KAFKA-15019). */
static void test_overload_never_refuses_a_heartbeat(void **state)
{
    (void)state;
    host *h = host_new(2);
    become_active(h, 1000);
    send_registration(h, 11, 7, 1000);
    kq_ctl_node_run(&h->node, 1000);
    commit_to(h, h->st.log_end_offset, 1000);
    send_write(h, 12, 1, 1001);
    send_write(h, 13, 1, 1001); /* two waiting: the limit */
    send_registration(h, 14, 8, 1001);
    assert_int_equal(answer_for(h, 14)->err, KQ_ERR_BROKER_NOT_AVAILABLE);
    send_heartbeat(h, 15, 7, 1001);
    kq_ctl_node_run(&h->node, 1001);
    commit_to(h, h->st.log_end_offset, 1002);
    const answer *a = answer_for(h, 15);
    assert_non_null(a);
    assert_int_equal(a->err, 0);
    host_free(h);
}

/* Leadership lost: a write whose record committed is answered with its offset, one still
 * waiting for the proposal fails with NOT_CONTROLLER. */
static void test_leadership_lost_answers_what_committed(void **state)
{
    (void)state;
    host *h = host_new(16);
    become_active(h, 1000);
    send_write(h, 16, 1, 1001);
    kq_ctl_node_run(&h->node, 1001);             /* proposed */
    send_write(h, 17, 1, 1001);                  /* not proposed yet */
    h->st.high_watermark = h->st.log_end_offset; /* the first committed in this step */
    lose_leadership(h, 1002);
    assert_int_equal(answer_for(h, 16)->err, 0);
    assert_int_equal(answer_for(h, 17)->err, KQ_ERR_NOT_CONTROLLER);
    assert_int_equal(kq_ctl_node_waiting(&h->node), 0);
    assert_int_equal(h->node.batch_count, 0);
    host_free(h);
}

/* Shutting down fails what waits, and stops the timers and NoOps. */
static void test_stop_fails_waiting(void **state)
{
    (void)state;
    host *h = host_new(16);
    become_active(h, 1000);
    send_write(h, 18, 1, 1001);
    kq_ctl_node_run(&h->node, 1001);
    send_registration(h, 19, 7, 1001);
    kq_ctl_node_stop(&h->node);
    assert_int_equal(answer_for(h, 18)->err, KQ_ERR_NOT_CONTROLLER);
    assert_int_equal(answer_for(h, 19)->err, KQ_ERR_NOT_CONTROLLER);
    assert_int_equal(kq_ctl_node_deadline(&h->node), UINT64_MAX); /* no timers, no NoOps */
    host_free(h);
}

/* A full batch flushed in the middle of an operation, in a step that resigns: the operation
 * stops there and is answered NOT_CONTROLLER at once (never parked on a follower to be
 * answered as a success later), and the image is the committed one. */
static void test_leadership_lost_in_a_flush_mid_operation(void **state)
{
    (void)state;
    host *h = host_new(16);
    become_active(h, 1000);
    int64_t committed = h->st.high_watermark;
    h->node.cfg.max_batch_bytes = 1; /* every record fills the batch */
    h->resign_on_propose = true;
    send_registration(h, 20, 7, 1001);
    const answer *a = answer_for(h, 20);
    assert_non_null(a);
    assert_int_equal(a->err, KQ_ERR_NOT_CONTROLLER);
    assert_false(h->node.meta.active);
    assert_null(kq_image_broker(h->node.meta.img, 7));
    assert_int_equal(h->node.meta.applied_end, committed);
    assert_int_equal(kq_ctl_node_waiting(&h->node), 0);
    assert_int_equal(h->fatals, 0);
    host_free(h);
}

/* The readiness rule behind /readyz, case by case, with its reasons. */
static void test_readiness(void **state)
{
    (void)state;
    char why[200];
    kq_ctl_ready_state r = {.role = KQ_RAFT_FOLLOWER,
                            .leader_id = 2,
                            .epoch = 4,
                            .leader_answered = true,
                            .leader_answer_ms = 10000,
                            .hw = 50,
                            .applied = 50,
                            .applied_since_ms = 9000};
    assert_int_equal(kq_ctl_readiness(&r, 10500, 2000, why, sizeof why), 1);
    /* the leader stopped answering: not ready once the fetch timeout passed */
    assert_int_equal(kq_ctl_readiness(&r, 12001, 2000, why, sizeof why), 0);
    assert_non_null(strstr(why, "leader 2 has not answered a Fetch for 2001 ms"));
    kq_ctl_ready_state t = r;
    t.leader_answered = false;
    assert_int_equal(kq_ctl_readiness(&t, 10500, 2000, why, sizeof why), 0);
    assert_non_null(strstr(why, "has not answered a Fetch yet"));
    t = r;
    t.role = KQ_RAFT_CANDIDATE;
    assert_int_equal(kq_ctl_readiness(&t, 10500, 2000, why, sizeof why), 0);
    assert_non_null(strstr(why, "no leader known (state candidate, epoch 4)"));
    t = r;
    t.leader_id = -1;
    assert_int_equal(kq_ctl_readiness(&t, 10500, 2000, why, sizeof why), 0);
    t = r;
    t.hw = -1;
    assert_int_equal(kq_ctl_readiness(&t, 10500, 2000, why, sizeof why), 0);
    assert_non_null(strstr(why, "high watermark is not known yet"));
    /* behind and not moving for 5 s: stuck; behind but moving: ready */
    t = r;
    t.applied = 40;
    assert_int_equal(kq_ctl_readiness(&t, 10500, 2000, why, sizeof why), 1);
    assert_int_equal(kq_ctl_readiness(&t, 14001, 20000, why, sizeof why), 0);
    assert_non_null(strstr(why, "applied offset stuck at 39, high watermark 50"));
    /* the leader needs no answer from anyone */
    t = r;
    t.role = KQ_RAFT_LEADER;
    t.leader_answered = false;
    assert_int_equal(kq_ctl_readiness(&t, 99999, 2000, why, sizeof why), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_answered_after_its_last_record_commits),
        cmocka_unit_test(test_leadership_lost_fails_parked_and_rolls_back),
        cmocka_unit_test(test_requests_for_a_broker_need_its_principal),
        cmocka_unit_test(test_authorizer_without_identities),
        cmocka_unit_test(test_acls_through_the_controller),
        cmocka_unit_test(test_standby_refuses_at_once),
        cmocka_unit_test(test_activation_waits_for_the_leader_change_to_commit),
        cmocka_unit_test(test_overload_refuses_writes),
        cmocka_unit_test(test_fence_timer_moves_forward),
        cmocka_unit_test(test_snapshot_due_by_bytes),
        cmocka_unit_test(test_snapshot_ready_needs_durable_log),
        cmocka_unit_test(test_overload_never_refuses_a_heartbeat),
        cmocka_unit_test(test_leadership_lost_answers_what_committed),
        cmocka_unit_test(test_stop_fails_waiting),
        cmocka_unit_test(test_leadership_lost_in_a_flush_mid_operation),
        cmocka_unit_test(test_readiness),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
