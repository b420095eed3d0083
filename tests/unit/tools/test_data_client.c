/* The kq produce / consume client (tools/data_client.h) against two fake brokers on
 * 127.0.0.1 that serve Metadata, Produce (deduplicating by producer id and sequence, as a
 * leader does), ListOffsets and Fetch for topic "ledger" partition 0: dead bootstrap addresses
 * are skipped, a record is retried with the same sequence until it is written, a leader move
 * is followed through a metadata refresh, the delivery timeout and non-retriable errors end a
 * record, and fetched batches carry the produced values. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "data_client.h"
#include "kq/error.h"
#include "kq/rpc.h"

#define REQUEST_TIMEOUT_MS 3000u /* the fakes answer at once; only a lost answer waits */
#define MAX_LOG 64
#define MAX_SCRIPT 16
#define MAX_SEEN 256

static const uint8_t ledger_id[16] = {7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

typedef struct entry {
    int64_t pid;
    int32_t seq;
    char value[64];
} entry;

typedef struct seen {
    int broker;
    int64_t pid;
    int32_t seq;
    int32_t acks;
} seen;

/* The cluster both fakes share (under mu). */
typedef struct cluster {
    pthread_mutex_t mu;
    int ports[3];           /* [1], [2]: broker ports */
    int leader;             /* broker id leading ledger-0, -1 none */
    int32_t epoch;          /* its leader epoch */
    int script[MAX_SCRIPT]; /* errors the leader answers to the next Produces, in order */
    int n_script, script_pos;
    int always;      /* if non-zero: every Produce gets this error */
    bool garbage;    /* answer Produce with bytes that do not parse */
    bool silent[3];  /* by broker id: drops every request (a paused broker) */
    int requests[3]; /* by broker id */
    entry log[MAX_LOG];
    int n_log;
    int64_t hw;
    seen seen[MAX_SEEN];
    int n_seen;
    int metadata_requests;
    int bad_requests;
} cluster;

static cluster g;

typedef struct fake {
    int id;
    kq_rpc_server *server;
} fake;

static fake fakes[3];

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

static int answer_metadata(const kq_data_metadata_request *m, kq_buf *out)
{
    kq_data_metadata_broker b[2] = {{.id = 1, .host = "127.0.0.1", .port = g.ports[1]},
                                    {.id = 2, .host = "127.0.0.1", .port = g.ports[2]}};
    static const int32_t reps[2] = {1, 2};
    kq_data_metadata_partition p = {.partition = 0,
                                    .leader_id = g.leader,
                                    .leader_epoch = g.epoch,
                                    .replicas = reps,
                                    .n_replicas = 2,
                                    .isr = reps,
                                    .n_isr = 2};
    kq_data_metadata_topic t[4];
    kq_data_metadata_response r;
    size_t n = m->n_topics < 4 ? m->n_topics : 4;

    if (g.leader < 0)
        p.error = KQ_ERR_LEADER_NOT_AVAILABLE;
    memset(t, 0, sizeof t);
    for (size_t i = 0; i < n; i++) {
        t[i].name = m->topics[i];
        if (strcmp(m->topics[i], "ledger") == 0) {
            memcpy(t[i].topic_id, ledger_id, 16);
            t[i].partitions = &p;
            t[i].n_partitions = 1;
        } else {
            t[i].error = KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        }
    }
    memset(&r, 0, sizeof r);
    r.brokers = b;
    r.n_brokers = 2;
    r.topics = t;
    r.n_topics = n;
    g.metadata_requests++;
    return kq_data_encode_metadata_response(&r, out);
}

static bool our_partition(const uint8_t id[16], int32_t partition)
{
    return memcmp(id, ledger_id, 16) == 0 && partition == 0;
}

static int answer_produce(int me, const kq_produce_request *p, kq_buf *out)
{
    kq_produce_response r = {.base_offset = -1, .log_start_offset = -1};

    if (g.n_seen < MAX_SEEN)
        g.seen[g.n_seen++] = (seen){me, p->producer_id, p->base_sequence, p->acks};
    if (!our_partition(p->topic_id, p->partition) || p->n_records != 1)
        g.bad_requests++;
    if (me != g.leader)
        r.error = KQ_ERR_NOT_LEADER_OR_FOLLOWER;
    else if (g.always)
        r.error = g.always;
    else if (g.script_pos < g.n_script)
        r.error = g.script[g.script_pos++];
    if (r.error == 0) {
        int found = -1;

        for (int i = 0; i < g.n_log && found < 0; i++)
            if (g.log[i].pid == p->producer_id && g.log[i].seq == p->base_sequence)
                found = i; /* a retry: the original offset */
        if (found < 0 && g.n_log < MAX_LOG) {
            entry *e = &g.log[g.n_log];

            e->pid = p->producer_id;
            e->seq = p->base_sequence;
            snprintf(e->value, sizeof e->value, "%.*s", (int)p->record_lens[0],
                     (const char *)p->records[0]);
            found = g.n_log++;
            g.hw = g.n_log;
        }
        r.base_offset = found;
        r.log_start_offset = 0;
    }
    return kq_data_encode_produce_response(&r, out);
}

static int answer_list_offsets(const kq_list_offsets_request *l, kq_buf *out)
{
    kq_list_offsets_partition_result p = {.partition = 0, .leader_epoch = g.epoch};
    kq_list_offsets_response r = {.partitions = &p, .n_partitions = 1};

    memcpy(p.topic_id, ledger_id, 16);
    if (l->n_partitions != 1 || !our_partition(l->partitions[0].topic_id, 0))
        g.bad_requests++;
    p.offset = l->partitions[0].timestamp == KQ_DATA_EARLIEST_TIMESTAMP ? 0 : g.hw;
    return kq_data_encode_list_offsets_response(&r, out);
}

/* One batch per record below the HW, from offset 0 (a batch may start before the fetch
 * offset: the caller skips). */
static int answer_fetch(const kq_data_fetch_request *f, kq_buf *out)
{
    kq_data_batch b[MAX_LOG];
    kq_buf payload[MAX_LOG];
    kq_data_fetch_partition_result p = {.partition = 0,
                                        .high_watermark = g.hw,
                                        .diverging_epoch = -1,
                                        .diverging_end_offset = -1,
                                        .current_leader_id = -1,
                                        .current_leader_epoch = -1};
    kq_data_fetch_response r = {.partitions = &p, .n_partitions = 1};
    int rc = 0, n = 0;

    memcpy(p.topic_id, ledger_id, 16);
    if (f->replica_id != -1 || f->broker_epoch != -1 || f->n_partitions != 1 ||
        !our_partition(f->partitions[0].topic_id, 0))
        g.bad_requests++;
    for (; n < g.hw; n++) {
        const uint8_t *v = (const uint8_t *)g.log[n].value;
        size_t len = strlen(g.log[n].value);

        if (kq_data_records_pack(&v, &len, 1, &payload[n]) != 0) { /* no cmocka off-thread */
            g.bad_requests++;
            break;
        }
        b[n] = (kq_data_batch){.base_offset = n,
                               .leader_epoch = g.epoch,
                               .count = 1,
                               .producer_id = g.log[n].pid,
                               .producer_epoch = 0,
                               .base_sequence = g.log[n].seq,
                               .records = payload[n].data,
                               .len = payload[n].len};
        b[n].crc32c = kq_data_batch_crc(&b[n]);
    }
    p.batches = n ? b : NULL;
    p.n_batches = (size_t)n;
    rc = kq_data_encode_fetch_response(&r, out);
    for (int i = 0; i < n; i++)
        kq_buf_free(&payload[i]);
    return rc;
}

static void on_request(void *arg, kq_rpc_req *req)
{
    fake *f = arg;
    kq_data_request r;
    kq_buf out = {NULL, 0};
    char err[256];
    int rc;

    rc = kq_data_decode_request(kq_rpc_req_data(req), kq_rpc_req_len(req), &r, err, sizeof err);
    pthread_mutex_lock(&g.mu);
    g.requests[f->id]++;
    if (g.silent[f->id]) {
        pthread_mutex_unlock(&g.mu);
        kq_data_request_free(&r);
        kq_rpc_req_drop(req);
        return;
    }
    if (rc != 0 || r.cluster_id[0] != 0 || r.sender_id != -1) {
        g.bad_requests++;
        pthread_mutex_unlock(&g.mu);
        kq_data_request_free(&r);
        kq_rpc_req_drop(req);
        return;
    }
    if (r.api_key == KQ_API_METADATA) {
        rc = answer_metadata(&r.u.metadata, &out);
    } else if (r.api_key == KQ_API_PRODUCE) {
        if (g.garbage) {
            pthread_mutex_unlock(&g.mu);
            kq_data_request_free(&r);
            kq_rpc_reply(req, (const uint8_t *)"\xff\xff\xff", 3);
            return;
        }
        rc = answer_produce(f->id, &r.u.produce, &out);
    } else if (r.api_key == KQ_API_LIST_OFFSETS) {
        rc = answer_list_offsets(&r.u.list_offsets, &out);
    } else {
        rc = answer_fetch(&r.u.fetch, &out);
    }
    pthread_mutex_unlock(&g.mu);
    kq_data_request_free(&r);
    if (rc) {
        kq_rpc_req_drop(req);
        return;
    }
    kq_rpc_reply(req, out.data, out.len);
    kq_buf_free(&out);
}

static int setup(void **state)
{
    (void)state;
    memset(&g, 0, sizeof g);
    pthread_mutex_init(&g.mu, NULL);
    g.leader = 1;
    g.epoch = 3;
    for (int id = 1; id <= 2; id++) {
        char url[64], err[256] = "";
        int ok = 0;

        fakes[id].id = id;
        for (int attempt = 0; attempt < 20 && !ok; attempt++) {
            g.ports[id] = free_port();
            snprintf(url, sizeof url, "tcp://127.0.0.1:%d", g.ports[id]);
            ok = kq_rpc_server_start(url, 4, KQ_RPC_DEFAULT_MAX_MSG, on_request, &fakes[id],
                                     &fakes[id].server, err, sizeof err) == 0;
        }
        if (!ok)
            fail_msg("cannot start a fake broker: %s", err);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int id = 1; id <= 2; id++)
        kq_rpc_server_stop(fakes[id].server);
    assert_int_equal(g.bad_requests, 0);
    pthread_mutex_destroy(&g.mu);
    return 0;
}

static kq_tools_addr addr_of(int port)
{
    kq_tools_addr a;

    snprintf(a.host, sizeof a.host, "127.0.0.1");
    a.port = port;
    return a;
}

/* A client whose bootstrap list starts with a dead address, then broker 2. */
static kq_dc *open_client(void)
{
    kq_tools_addr b[2] = {addr_of(free_port()), addr_of(g.ports[2])};
    kq_dc *dc = NULL;

    assert_int_equal(kq_dc_open(b, 2, REQUEST_TIMEOUT_MS, &dc), 0);
    return dc;
}

static void locked(void (*fn)(void *), void *arg)
{
    pthread_mutex_lock(&g.mu);
    fn(arg);
    pthread_mutex_unlock(&g.mu);
}

static void test_produce_in_order_with_sequences(void **state)
{
    (void)state;
    kq_dc *dc = open_client();
    kq_dc_producer p;
    kq_dc_produce_result r;
    char detail[512];
    static const char *values[3] = {"deposit 100", "deposit 50", ""};

    assert_int_equal(kq_dc_producer_init(&p, "ledger", 0, -1, REQUEST_TIMEOUT_MS, 10000), 0);
    assert_true(p.producer_id >= 0);
    int64_t pid = p.producer_id;
    for (int i = 0; i < 3; i++) {
        kq_dc_send_record(dc, &p, (const uint8_t *)values[i], strlen(values[i]), &r, detail,
                          sizeof detail);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.offset, i);
        assert_int_equal(r.attempts, 1);
        assert_int_equal(p.sequence, i + 1);
    }
    pthread_mutex_lock(&g.mu);
    assert_int_equal(g.n_log, 3);
    assert_string_equal(g.log[0].value, "deposit 100");
    assert_string_equal(g.log[1].value, "deposit 50");
    assert_string_equal(g.log[2].value, "");
    assert_int_equal(g.n_seen, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(g.seen[i].broker, 1); /* the leader, not the bootstrap broker 2 */
        assert_int_equal(g.seen[i].pid, pid);
        assert_int_equal(g.seen[i].seq, i);
        assert_int_equal(g.seen[i].acks, -1);
    }
    assert_int_equal(g.metadata_requests, 1); /* the cache served the later records */
    pthread_mutex_unlock(&g.mu);
    kq_dc_close(dc);
}

static void script_retriable(void *arg)
{
    (void)arg;
    g.script[0] = KQ_ERR_NOT_ENOUGH_REPLICAS;
    g.script[1] = KQ_ERR_REQUEST_TIMED_OUT;
    g.script[2] = KQ_ERR_KAFKA_STORAGE_ERROR;
    g.n_script = 3;
}

static void test_retries_keep_the_sequence(void **state)
{
    (void)state;
    kq_dc *dc = open_client();
    kq_dc_producer p;
    kq_dc_produce_result r;
    char detail[512];

    assert_int_equal(kq_dc_producer_init(&p, "ledger", 0, 1, REQUEST_TIMEOUT_MS, 60000), 0);
    p.sequence = 41;
    locked(script_retriable, NULL);
    kq_dc_send_record(dc, &p, (const uint8_t *)"withdraw 30", 11, &r, detail, sizeof detail);
    assert_int_equal(r.error, 0);
    assert_int_equal(r.attempts, 4);
    assert_int_equal(r.offset, 0);
    assert_int_equal(p.sequence, 42);
    pthread_mutex_lock(&g.mu);
    assert_int_equal(g.n_seen, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(g.seen[i].seq, 41);
        assert_int_equal(g.seen[i].pid, p.producer_id);
        assert_int_equal(g.seen[i].acks, 1);
    }
    assert_int_equal(g.n_log, 1);
    pthread_mutex_unlock(&g.mu);
    kq_dc_close(dc);
}

static void move_leader(void *arg)
{
    g.leader = *(int *)arg;
    g.epoch++;
}

static void test_follows_a_leader_move(void **state)
{
    (void)state;
    kq_dc *dc = open_client();
    kq_dc_producer p;
    kq_dc_produce_result r;
    char detail[512];
    int two = 2;

    assert_int_equal(kq_dc_producer_init(&p, "ledger", 0, -1, REQUEST_TIMEOUT_MS, 60000), 0);
    kq_dc_send_record(dc, &p, (const uint8_t *)"a", 1, &r, detail, sizeof detail);
    assert_int_equal(r.error, 0);
    locked(move_leader, &two);
    /* Broker 1 now answers NOT_LEADER_OR_FOLLOWER; the refreshed metadata names broker 2. */
    kq_dc_send_record(dc, &p, (const uint8_t *)"b", 1, &r, detail, sizeof detail);
    assert_int_equal(r.error, 0);
    assert_int_equal(r.attempts, 2);
    assert_int_equal(r.offset, 1);
    pthread_mutex_lock(&g.mu);
    assert_int_equal(g.n_seen, 3);
    assert_int_equal(g.seen[1].broker, 1);
    assert_int_equal(g.seen[2].broker, 2);
    assert_int_equal(g.seen[1].seq, 1);
    assert_int_equal(g.seen[2].seq, 1);
    assert_int_equal(g.metadata_requests, 2);
    pthread_mutex_unlock(&g.mu);
    kq_dc_close(dc);
}

static void pause_leader_and_move(void *arg)
{
    (void)arg;
    g.silent[1] = true;
    g.leader = 2;
    g.epoch++;
    g.requests[1] = 0;
}

/* A paused leader times out; the metadata refresh asks another broker first (not the one
 * that just failed), and the record goes to the new leader with the same sequence. */
static void test_paused_leader_is_asked_last(void **state)
{
    (void)state;
    kq_dc *dc = open_client();
    kq_dc_producer p;
    kq_dc_produce_result r;
    char detail[512];

    assert_int_equal(kq_dc_producer_init(&p, "ledger", 0, -1, 300, 60000), 0);
    kq_dc_send_record(dc, &p, (const uint8_t *)"a", 1, &r, detail, sizeof detail);
    assert_int_equal(r.error, 0);
    locked(pause_leader_and_move, NULL);
    kq_dc_send_record(dc, &p, (const uint8_t *)"b", 1, &r, detail, sizeof detail);
    assert_int_equal(r.error, 0);
    assert_int_equal(r.attempts, 2);
    assert_int_equal(r.offset, 1);
    pthread_mutex_lock(&g.mu);
    assert_int_equal(g.requests[1], 1); /* the Produce that timed out, no Metadata */
    assert_int_equal(g.seen[g.n_seen - 1].broker, 2);
    assert_int_equal(g.seen[g.n_seen - 1].seq, 1);
    pthread_mutex_unlock(&g.mu);
    kq_dc_close(dc);
}

static void set_always(void *arg)
{
    g.always = *(int *)arg;
}

static void test_delivery_timeout_ends_a_record(void **state)
{
    (void)state;
    kq_dc *dc = open_client();
    kq_dc_producer p;
    kq_dc_produce_result r;
    char detail[512];
    int err = KQ_ERR_NOT_ENOUGH_REPLICAS, none = 0;

    assert_int_equal(kq_dc_producer_init(&p, "ledger", 0, -1, 300, 700), 0);
    int64_t pid = p.producer_id;
    locked(set_always, &err);
    kq_dc_send_record(dc, &p, (const uint8_t *)"withdraw 30", 11, &r, detail, sizeof detail);
    assert_int_equal(r.error, KQ_ERR_NOT_ENOUGH_REPLICAS);
    assert_true(r.attempts >= 2);
    assert_int_equal(r.offset, -1);
    assert_non_null(strstr(detail, "NOT_ENOUGH_REPLICAS"));
    /* The next record starts over under a new producer id. */
    assert_int_equal(p.sequence, 0);
    assert_true(p.producer_id != pid && p.producer_id >= 0);
    locked(set_always, &none);
    kq_dc_send_record(dc, &p, (const uint8_t *)"x", 1, &r, detail, sizeof detail);
    assert_int_equal(r.error, 0);
    assert_int_equal(r.offset, 0);
    pthread_mutex_lock(&g.mu);
    for (int i = 0; i < g.n_seen - 1; i++)
        assert_int_equal(g.seen[i].seq, 0);
    assert_int_equal(g.seen[g.n_seen - 1].pid, p.producer_id);
    pthread_mutex_unlock(&g.mu);
    kq_dc_close(dc);
}

static void test_non_retriable_error_stops_at_once(void **state)
{
    (void)state;
    kq_dc *dc = open_client();
    kq_dc_producer p;
    kq_dc_produce_result r;
    char detail[512];
    int err = KQ_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER;

    assert_int_equal(kq_dc_producer_init(&p, "ledger", 0, -1, REQUEST_TIMEOUT_MS, 60000), 0);
    locked(set_always, &err);
    kq_dc_send_record(dc, &p, (const uint8_t *)"v", 1, &r, detail, sizeof detail);
    assert_int_equal(r.error, KQ_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_int_equal(r.attempts, 1);
    assert_non_null(strstr(detail, "Produce answer from leader 1"));
    kq_dc_close(dc);
}

static void set_garbage(void *arg)
{
    (void)arg;
    g.garbage = true;
}

static void test_garbage_answer_is_an_error(void **state)
{
    (void)state;
    kq_dc *dc = open_client();
    int64_t off = 5;
    char detail[512] = "";

    locked(set_garbage, NULL);
    int rc = kq_dc_produce(dc, "ledger", 0, 1, 1000, 1, 0, 0, (const uint8_t *)"v", 1, &off, detail,
                           sizeof detail);
    assert_int_equal(rc, KQ_ERR_MALFORMED);
    assert_int_equal(off, -1);
    assert_non_null(strstr(detail, "malformed Produce answer"));
    kq_dc_close(dc);
}

static void test_unknown_topic_partition_and_no_leader(void **state)
{
    (void)state;
    kq_dc *dc = open_client();
    kq_dc_route route;
    char detail[512] = "";
    int none = -1;

    assert_int_equal(kq_dc_route_for(dc, "nope", 0, &route, detail, sizeof detail),
                     KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    assert_non_null(strstr(detail, "topic nope"));
    assert_int_equal(kq_dc_route_for(dc, "ledger", 3, &route, detail, sizeof detail),
                     KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    assert_non_null(strstr(detail, "topic ledger has no partition 3"));
    assert_int_equal(kq_dc_route_for(dc, "ledger", 0, &route, detail, sizeof detail), 0);
    assert_int_equal(route.leader_id, 1);
    assert_int_equal(route.leader_epoch, 3);
    assert_memory_equal(route.topic_id, ledger_id, 16);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", g.ports[1]);
    assert_string_equal(route.leader, want);

    locked(move_leader, &none);
    kq_dc_invalidate(dc);
    assert_int_equal(kq_dc_route_for(dc, "ledger", 0, &route, detail, sizeof detail),
                     KQ_ERR_LEADER_NOT_AVAILABLE);
    kq_dc_close(dc);
}

static void test_no_broker_answers(void **state)
{
    (void)state;
    kq_tools_addr b[2] = {addr_of(free_port()), addr_of(free_port())};
    kq_dc *dc = NULL;
    char detail[1024] = "", tried[128];

    for (int i = 0; i < 20 && b[1].port == b[0].port; i++)
        b[1] = addr_of(free_port());
    assert_true(b[0].port > 0 && b[1].port > 0 && b[0].port != b[1].port);

    assert_int_equal(kq_dc_open(b, 2, 2000, &dc), 0);
    assert_int_equal(kq_dc_refresh(dc, "ledger", detail, sizeof detail), KQ_ERR_NETWORK_EXCEPTION);
    snprintf(tried, sizeof tried,
             "no broker answered within 2000 ms (tried 127.0.0.1:%d,127.0.0.1:%d)", b[0].port,
             b[1].port);
    if (strncmp(detail, tried, strlen(tried)) != 0)
        fail_msg("got \"%s\", want it to start with \"%s\"", detail, tried);
    assert_non_null(strstr(detail, "cannot connect"));
    kq_dc_close(dc);
}

typedef struct collect {
    int64_t from;
    char values[8][64];
    int64_t offsets[8];
    int n;
} collect;

static int on_record(void *arg, int64_t offset, const uint8_t *value, size_t len)
{
    collect *c = arg;

    if (offset < c->from || c->n >= 8)
        return 0;
    snprintf(c->values[c->n], sizeof c->values[0], "%.*s", (int)len, (const char *)value);
    c->offsets[c->n++] = offset;
    return 0;
}

static void test_list_offsets_and_fetch(void **state)
{
    (void)state;
    kq_dc *dc = open_client();
    kq_dc_producer p;
    kq_dc_produce_result r;
    kq_dc_fetch_result fr;
    collect c;
    char detail[512] = "";
    int64_t off = -1;
    static const char *values[3] = {"deposit 100", "deposit 50", "withdraw 20"};

    assert_int_equal(kq_dc_producer_init(&p, "ledger", 0, -1, REQUEST_TIMEOUT_MS, 10000), 0);
    for (int i = 0; i < 3; i++) {
        kq_dc_send_record(dc, &p, (const uint8_t *)values[i], strlen(values[i]), &r, detail,
                          sizeof detail);
        assert_int_equal(r.error, 0);
    }
    assert_int_equal(
        kq_dc_list_offset(dc, "ledger", 0, KQ_DATA_EARLIEST_TIMESTAMP, &off, detail, sizeof detail),
        0);
    assert_int_equal(off, 0);
    assert_int_equal(
        kq_dc_list_offset(dc, "ledger", 0, KQ_DATA_LATEST_TIMESTAMP, &off, detail, sizeof detail),
        0);
    assert_int_equal(off, 3);

    assert_int_equal(kq_dc_fetch(dc, "ledger", 0, 1, 100, &fr, detail, sizeof detail), 0);
    assert_int_equal(fr.high_watermark, 3);
    assert_int_equal(fr.n_batches, 3);
    memset(&c, 0, sizeof c);
    c.from = 1;
    for (size_t i = 0; i < fr.n_batches; i++)
        assert_int_equal(kq_data_records_walk(fr.batches[i].records, fr.batches[i].len,
                                              fr.batches[i].base_offset, fr.batches[i].count,
                                              on_record, &c, detail, sizeof detail),
                         0);
    kq_dc_fetch_result_free(&fr);
    assert_null(fr.resp_.priv_);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.values[0], "deposit 50");
    assert_int_equal(c.offsets[0], 1);
    assert_string_equal(c.values[1], "withdraw 20");

    assert_int_equal(kq_dc_fetch(dc, "nope", 0, 0, 100, &fr, detail, sizeof detail),
                     KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    assert_null(fr.resp_.priv_);
    kq_dc_close(dc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_produce_in_order_with_sequences, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retries_keep_the_sequence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follows_a_leader_move, setup, teardown),
        cmocka_unit_test_setup_teardown(test_paused_leader_is_asked_last, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delivery_timeout_ends_a_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_non_retriable_error_stops_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbage_answer_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_topic_partition_and_no_leader, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_broker_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_offsets_and_fetch, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
