/*
 * kq-bench: commit latency and throughput of the metadata quorum.
 *
 * N writer threads each send Write requests (one opaque record of --size bytes) to the
 * active controller, one at a time, and time each until the controller answers, which it does
 * only after the record committed (a majority fsynced it). Prints one result line:
 *
 *   writers=16 requests=32000 seconds=2.01 ops_per_s=15920 p50_ms=0.98 p99_ms=2.10 errors=0
 *
 * --alter-partition --cluster-id ID [--brokers K] [--partitions P] (with --writers N as the
 * client count): registers K brokers in-process (ids 1..K, heartbeating every 500 ms so they
 * stay unfenced), creates a topic with P (default N) partitions and replication factor 3, then
 * N client threads each send AlterPartition for their own partition as its leader broker, one
 * at a time, alternating shrink (the last non-leader replica leaves the ISR) and expand (all
 * replicas) with the current epochs. Each answer comes after the PartitionChange committed.
 *
 *   alter_partition clients=16 partitions=16 brokers=3 requests=... seconds=... ops_per_s=...
 *       p50_ms=... p99_ms=... errors=0
 *
 * --metadata-lag --broker-metrics HOST:PORT,... [--requests N] [--interval-ms MS]
 * [--poll-us US]: metadata propagation. N times (default 200), after a pause of MS (default
 * 30) so that each change starts from an idle cluster, one Write (one opaque record) to the
 * active controller, which answers once it committed, with the record's offset; then each
 * broker's /metrics (HTTP/1.1, kept alive) is polled, one GET per broker per round and US
 * (default 500) microseconds between rounds, until its kq_metadata_last_applied_offset reaches
 * that offset. A broker's time is the end of the first GET that shows it (an upper bound: the
 * resolution is one poll round). answer_to_all: Write answer -> applied on every broker (the
 * propagation latency); send_to_all: Write sent -> applied on every broker (commit included);
 * write: the Write round trip; answer_to_first: answer -> the first broker.
 *
 *   metadata_lag brokers=3 requests=200 interval_ms=30 poll_us=500 answer_to_all_p50_ms=...
 *       answer_to_all_p99_ms=... answer_to_all_max_ms=... send_to_all_... write_...
 *       answer_to_first_... polls=... errors=0
 */
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kq_cli.h"
#include "kq/codec.h"
#include "kq/ctl_codec.h"
#include "kq/error.h"
#include "kq/rpc.h"
#include "kq_tools.h"
#include "kq/util.h"

typedef struct worker {
    pthread_t th;
    char url[320];
    size_t size;
    uint64_t end_ms;
    uint64_t warm_ms;
    kq_hist hist;
    uint64_t errors;
} worker;

/* One Write, answered once committed. hint (may be NULL) gets the leader endpoint of an error
 * answer; base (may be NULL) the offset of the first record written. */
static int write_once(kq_rpc_client *cl, const kq_buf *req, char *hint, size_t hintlen,
                      int64_t *base)
{
    uint8_t *resp = NULL;
    size_t len = 0;
    kq_response r;
    char err[256];
    memset(&r, 0, sizeof(r));
    int rc = kq_rpc_call(cl, req->data, req->len, 5000, &resp, &len);
    if (rc != 0)
        return rc;
    rc = kq_codec_decode_response(resp, len, -1, &r, err, sizeof(err));
    free(resp);
    if (rc == 0 && r.error != 0) {
        rc = r.error;
        if (hint != NULL)
            snprintf(hint, hintlen, "%s", r.leader_endpoint);
    } else if (rc == 0 && base != NULL) {
        if (r.write_base_offset < 0)
            rc = KQ_ERR_MALFORMED;
        else
            *base = r.write_base_offset;
    }
    kq_response_free(&r);
    return rc;
}

static void *run_worker(void *arg)
{
    worker *w = arg;
    kq_rpc_client *cl = NULL;
    char err[256];
    kq_buf req = {0};
    uint8_t *payload = calloc(1, w->size ? w->size : 1);
    const uint8_t *recs[1] = {payload};
    size_t lens[1] = {w->size};
    if (payload == NULL ||
        kq_rpc_client_open(w->url, KQ_RPC_DEFAULT_MAX_MSG, &cl, err, sizeof(err)) != 0)
        goto out;
    if (kq_codec_encode_write_request("", recs, lens, 1, &req) != 0)
        goto out;
    for (;;) {
        uint64_t t0 = kq_now_ns();
        if (t0 / 1000000 >= w->end_ms)
            break;
        int rc = write_once(cl, &req, NULL, 0, NULL);
        uint64_t t1 = kq_now_ns();
        if (rc != 0) {
            if (w->errors++ == 0)
                fprintf(stderr, "kq-bench: write failed: %s\n", kq_err_name(rc));
            continue;
        }
        if (t0 / 1000000 >= w->warm_ms)
            kq_hist_add(&w->hist, t1 - t0);
    }
out:
    kq_buf_free(&req);
    if (cl != NULL)
        kq_rpc_client_close(cl);
    free(payload);
    return NULL;
}

/* Find the active controller by following NOT_CONTROLLER hints from the bootstrap list. */
static int find_leader(const char *bootstrap, char *url, size_t urllen)
{
    char list[1024];
    snprintf(list, sizeof(list), "%s", bootstrap);
    for (int attempt = 0; attempt < 50; attempt++) {
        char *save = NULL;
        for (char *hp = strtok_r(list, ",", &save); hp != NULL; hp = strtok_r(NULL, ",", &save)) {
            char cand[320], hint[300] = "", err[256];
            kq_rpc_client *cl = NULL;
            kq_buf req = {0};
            const uint8_t *recs[1] = {(const uint8_t *)"x"};
            size_t lens[1] = {1};
            snprintf(cand, sizeof(cand), "%s%s", kq_tools_scheme(), hp);
            for (int hop = 0; hop < 3; hop++) {
                if (kq_rpc_client_open(cand, KQ_RPC_DEFAULT_MAX_MSG, &cl, err, sizeof(err)) != 0)
                    break;
                kq_codec_encode_write_request("", recs, lens, 1, &req);
                int rc = write_once(cl, &req, hint, sizeof(hint), NULL);
                kq_buf_free(&req);
                kq_rpc_client_close(cl);
                cl = NULL;
                if (rc == 0) {
                    snprintf(url, urllen, "%s", cand);
                    return 0;
                }
                if (hint[0] == '\0')
                    break;
                snprintf(cand, sizeof(cand), "%s%s", kq_tools_scheme(), hint);
                hint[0] = '\0';
            }
        }
        snprintf(list, sizeof(list), "%s", bootstrap);
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return KQ_ERR_TIMEOUT;
}

/* The physical floor, measured in the same run: 4 KiB pwrite + fdatasync, averaged. */
static int fsync_probe(const char *dir)
{
    char path[4096];
    uint8_t buf[4096];
    const int rounds = 200;
    memset(buf, 0xab, sizeof(buf));
    snprintf(path, sizeof(path), "%s/kq-bench-fsync.probe", dir);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0) {
        fprintf(stderr, "kq-bench: cannot create %s\n", path);
        return 1;
    }
    kq_hist h;
    kq_hist_init(&h);
    for (int i = 0; i < rounds; i++) {
        uint64_t t0 = kq_now_ns();
        if (pwrite(fd, buf, sizeof(buf), (off_t)i * (off_t)sizeof(buf)) != (ssize_t)sizeof(buf) ||
            fdatasync(fd) != 0) {
            fprintf(stderr, "kq-bench: write/fdatasync failed on %s\n", path);
            close(fd);
            unlink(path);
            return 1;
        }
        kq_hist_add(&h, kq_now_ns() - t0);
    }
    close(fd);
    unlink(path);
    printf("fdatasync_4k rounds=%d p50_ms=%.3f p99_ms=%.3f mean_ms=%.3f\n", rounds,
           (double)kq_hist_quantile(&h, 0.5) / 1e6, (double)kq_hist_quantile(&h, 0.99) / 1e6,
           (double)h.sum_ns / (double)h.n / 1e6);
    return 0;
}

/* ---- --alter-partition mode ---------------------------------------------------------------- */

#define AP_MAX_BROKERS 64

typedef struct ap_setup {
    char url[320];
    const char *cluster_id;
    int n_brokers;
    int64_t epochs[AP_MAX_BROKERS + 1]; /* by broker id 1..n_brokers */
    atomic_int fenced[AP_MAX_BROKERS + 1];
    atomic_int stop;
    pthread_t hb_th;
} ap_setup;

typedef struct ap_worker {
    pthread_t th;
    const ap_setup *setup;
    uint8_t topic_id[16];
    int32_t partition, leader, leader_epoch, partition_epoch;
    int32_t replicas[16];
    int32_t n_replicas;
    uint64_t end_ms, warm_ms;
    kq_hist hist;
    uint64_t errors;
} ap_worker;

/* One controller RPC on an open client: 0 with *resp decoded (resp->error may be set). */
static int ctl_call(kq_rpc_client *cl, const char *cluster_id, int32_t sender,
                    const kq_ctl_request *req, kq_response *resp)
{
    kq_buf b = {0};
    uint8_t *data = NULL;
    size_t len = 0;
    char err[256];
    int rc = kq_ctl_encode_request(cluster_id, sender, req, &b);
    if (rc == 0)
        rc = kq_rpc_call(cl, b.data, b.len, 5000, &data, &len);
    kq_buf_free(&b);
    if (rc != 0)
        return rc;
    memset(resp, 0, sizeof(*resp));
    rc = kq_codec_decode_response(data, len, -1, resp, err, sizeof(err));
    free(data);
    if (rc == 0 && resp->api_key != req->api_key) {
        kq_response_free(resp);
        rc = KQ_ERR_MALFORMED;
    }
    return rc;
}

static void *ap_heartbeats(void *arg)
{
    ap_setup *s = arg;
    kq_rpc_client *cl = NULL;
    char err[256];
    if (kq_rpc_client_open(s->url, KQ_RPC_DEFAULT_MAX_MSG, &cl, err, sizeof(err)) != 0) {
        fprintf(stderr, "kq-bench: heartbeat client: %s\n", err);
        return NULL;
    }
    while (!atomic_load(&s->stop)) {
        for (int id = 1; id <= s->n_brokers; id++) {
            kq_ctl_request req;
            kq_response resp;
            kq_heartbeat_result hr;
            memset(&req, 0, sizeof(req));
            memset(&hr, 0, sizeof(hr));
            req.api_key = KQ_API_BROKER_HEARTBEAT;
            req.broker_heartbeat.broker_id = id;
            req.broker_heartbeat.broker_epoch = s->epochs[id];
            req.broker_heartbeat.current_metadata_offset = s->epochs[id];
            if (ctl_call(cl, s->cluster_id, id, &req, &resp) != 0)
                continue;
            if (resp.error == 0 &&
                kq_ctl_decode_broker_heartbeat_response(&resp, &hr, err, sizeof(err)) == 0)
                atomic_store(&s->fenced[id], hr.is_fenced ? 1 : 0);
            else if (resp.error != 0)
                fprintf(stderr, "kq-bench: heartbeat of broker %d: %s\n", id,
                        kq_err_name(resp.error));
            kq_response_free(&resp);
        }
        struct timespec ts = {0, 500 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kq_rpc_client_close(cl);
    return NULL;
}

static int ap_register(ap_setup *s, kq_rpc_client *cl)
{
    for (int id = 1; id <= s->n_brokers; id++) {
        kq_ctl_request req;
        kq_response resp;
        char u[KQ_UUID_STR_LEN + 1], err[256];
        kq_rec_endpoint ep = {.name = "PLAINTEXT", .host = "127.0.0.1", .port = 9000 + id};
        memset(&req, 0, sizeof(req));
        req.api_key = KQ_API_BROKER_REGISTRATION;
        req.broker_registration.broker_id = id;
        req.broker_registration.cluster_id = s->cluster_id;
        kq_uuid_random(u);
        kq_uuid_parse(u, req.broker_registration.incarnation_id);
        req.broker_registration.endpoints = &ep;
        req.broker_registration.n_endpoints = 1;
        int rc = ctl_call(cl, s->cluster_id, id, &req, &resp);
        if (rc != 0) {
            fprintf(stderr, "kq-bench: registering broker %d: %s\n", id, kq_err_name(rc));
            return rc;
        }
        rc = resp.error;
        if (rc == 0)
            rc =
                kq_ctl_decode_broker_registration_response(&resp, &s->epochs[id], err, sizeof(err));
        if (rc != 0)
            fprintf(stderr, "kq-bench: registering broker %d: %s %s\n", id, kq_err_name(rc),
                    resp.error_message);
        kq_response_free(&resp);
        if (rc != 0)
            return rc;
        atomic_store(&s->fenced[id], 1);
    }
    return 0;
}

/* Creates the topic and fills each worker's partition state from DescribeTopics. */
static int ap_create_topic(ap_setup *s, kq_rpc_client *cl, const char *name, int partitions,
                           ap_worker *ws, int n_workers)
{
    kq_ctl_request req;
    kq_response resp;
    char err[256];
    int rc;
    kq_create_topic ct = {.name = name, .num_partitions = partitions, .replication_factor = 3};
    memset(&req, 0, sizeof(req));
    req.api_key = KQ_API_CREATE_TOPICS;
    req.create_topics.topics = &ct;
    req.create_topics.n = 1;
    if ((rc = ctl_call(cl, s->cluster_id, -1, &req, &resp)) != 0)
        return rc;
    kq_ctl_item_results items = {0};
    rc = resp.error;
    if (rc == 0 && (rc = kq_ctl_decode_item_results(&resp, &items, err, sizeof(err))) == 0 &&
        items.n == 1 && items.items[0].error != 0) {
        rc = items.items[0].error;
        fprintf(stderr, "kq-bench: creating topic %s: %s %s\n", name, kq_err_name(rc),
                items.items[0].message ? items.items[0].message : "");
    }
    kq_ctl_item_results_free(&items);
    kq_response_free(&resp);
    if (rc != 0)
        return rc;

    const char *names[1] = {name};
    memset(&req, 0, sizeof(req));
    req.api_key = KQ_API_DESCRIBE_TOPICS;
    req.describe_topics.names = names;
    req.describe_topics.n = 1;
    if ((rc = ctl_call(cl, s->cluster_id, -1, &req, &resp)) != 0)
        return rc;
    kq_ctl_topics_desc d = {0};
    rc = resp.error;
    if (rc == 0)
        rc = kq_ctl_decode_describe_topics_response(&resp, &d, err, sizeof(err));
    kq_response_free(&resp);
    if (rc == 0 && (d.n_topics != 1 || d.topics[0].error != 0 || !d.topics[0].has_id ||
                    d.topics[0].n_partitions != partitions))
        rc = KQ_ERR_MALFORMED;
    for (int i = 0; rc == 0 && i < n_workers; i++) {
        const kq_ctl_partition_desc *p = &d.topics[0].partitions[i % partitions];
        ap_worker *w = &ws[i];
        memcpy(w->topic_id, d.topics[0].topic_id, 16);
        w->partition = p->partition;
        w->leader = p->leader;
        w->leader_epoch = p->leader_epoch;
        w->partition_epoch = p->partition_epoch;
        w->n_replicas = p->replicas.n < 16 ? p->replicas.n : 16;
        memcpy(w->replicas, p->replicas.ids, (size_t)w->n_replicas * sizeof(int32_t));
        if (p->leader < 1 || p->leader > s->n_brokers || p->isr.n != p->replicas.n ||
            w->n_replicas < 2)
            rc = KQ_ERR_INVALID_REQUEST; /* every partition needs a leader and a full ISR */
    }
    kq_ctl_topics_desc_free(&d);
    return rc;
}

static void *ap_run_worker(void *arg)
{
    ap_worker *w = arg;
    const ap_setup *s = w->setup;
    kq_rpc_client *cl = NULL;
    char err[256];
    int shrink = 1;
    if (kq_rpc_client_open(s->url, KQ_RPC_DEFAULT_MAX_MSG, &cl, err, sizeof(err)) != 0) {
        w->errors++;
        return NULL;
    }
    for (;;) {
        kq_ap_isr_member isr[16];
        int32_t n_isr = 0;
        /* Shrink: every replica but the last non-leader one; expand: every replica. */
        int32_t drop = -1;
        for (int32_t i = w->n_replicas - 1; shrink && i >= 0 && drop < 0; i--)
            if (w->replicas[i] != w->leader)
                drop = w->replicas[i];
        for (int32_t i = 0; i < w->n_replicas; i++)
            if (w->replicas[i] != drop)
                isr[n_isr++] = (kq_ap_isr_member){w->replicas[i], s->epochs[w->replicas[i]]};
        kq_ap_partition p = {.partition_index = w->partition,
                             .leader_epoch = w->leader_epoch,
                             .partition_epoch = w->partition_epoch,
                             .leader_recovery_state = 0,
                             .new_isr = isr,
                             .n_new_isr = n_isr};
        kq_ap_topic t = {.partitions = &p, .n_partitions = 1};
        memcpy(t.topic_id, w->topic_id, 16);
        kq_ctl_request req;
        memset(&req, 0, sizeof(req));
        req.api_key = KQ_API_ALTER_PARTITION;
        req.alter_partition.version = 3;
        req.alter_partition.broker_id = w->leader;
        req.alter_partition.broker_epoch = s->epochs[w->leader];
        req.alter_partition.topics = &t;
        req.alter_partition.n_topics = 1;

        uint64_t t0 = kq_now_ns();
        if (t0 / 1000000 >= w->end_ms)
            break;
        kq_response resp;
        kq_alter_partition_result res;
        memset(&res, 0, sizeof(res));
        int rc = ctl_call(cl, s->cluster_id, w->leader, &req, &resp);
        uint64_t t1 = kq_now_ns();
        if (rc == 0) {
            rc = resp.error;
            if (rc == 0 &&
                (rc = kq_ctl_decode_alter_partition_response(&resp, &res, err, sizeof(err))) == 0) {
                rc = res.error ? res.error
                               : (res.n_results == 1 ? res.results[0].error : KQ_ERR_MALFORMED);
                if (rc == 0) {
                    w->partition_epoch = res.results[0].partition_epoch;
                    w->leader_epoch = res.results[0].leader_epoch;
                }
                kq_ctl_alter_partition_response_free(&res);
            }
            kq_response_free(&resp);
        }
        if (rc != 0) {
            if (w->errors++ == 0)
                fprintf(stderr, "kq-bench: AlterPartition of partition %d failed: %s\n",
                        w->partition, kq_err_name(rc));
            break; /* the epochs are unknown now: this client stops */
        }
        shrink = !shrink;
        if (t0 / 1000000 >= w->warm_ms)
            kq_hist_add(&w->hist, t1 - t0);
    }
    kq_rpc_client_close(cl);
    return NULL;
}

static int alter_partition_bench(const char *bootstrap, const char *cluster_id, int clients,
                                 int brokers, int partitions, double seconds, double warmup)
{
    static ap_setup s;
    ap_worker *ws = NULL;
    kq_rpc_client *cl = NULL;
    char err[256], name[128];
    int rc = 1, hb_started = 0;
    if (partitions <= 0)
        partitions = clients;
    if (brokers < 3 || brokers > AP_MAX_BROKERS || partitions < clients) {
        fprintf(stderr,
                "kq-bench: --alter-partition needs 3..%d brokers and at least as many "
                "partitions as clients\n",
                AP_MAX_BROKERS);
        return 2;
    }
    memset(&s, 0, sizeof(s));
    s.cluster_id = cluster_id;
    s.n_brokers = brokers;
    if (find_leader(bootstrap, s.url, sizeof(s.url)) != 0) {
        fprintf(stderr, "kq-bench: no active controller found via %s\n", bootstrap);
        return 1;
    }
    if (kq_rpc_client_open(s.url, KQ_RPC_DEFAULT_MAX_MSG, &cl, err, sizeof(err)) != 0) {
        fprintf(stderr, "kq-bench: %s: %s\n", s.url, err);
        goto out;
    }
    if (ap_register(&s, cl) != 0)
        goto out;
    if (pthread_create(&s.hb_th, NULL, ap_heartbeats, &s) != 0)
        goto out;
    hb_started = 1;
    for (int waited = 0;; waited += 100) {
        int fenced = 0;
        for (int id = 1; id <= brokers; id++)
            fenced += atomic_load(&s.fenced[id]);
        if (fenced == 0)
            break;
        if (waited > 30000) {
            fprintf(stderr, "kq-bench: %d broker(s) still fenced after 30 s\n", fenced);
            goto out;
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ws = calloc((size_t)clients, sizeof(*ws));
    if (ws == NULL)
        goto out;
    snprintf(name, sizeof(name), "kq-bench-ap-%d-%llu", (int)getpid(),
             (unsigned long long)kq_now_ms());
    if ((rc = ap_create_topic(&s, cl, name, partitions, ws, clients)) != 0) {
        fprintf(stderr, "kq-bench: creating/describing topic %s: %s\n", name, kq_err_name(rc));
        rc = 1;
        goto out;
    }
    uint64_t start = kq_now_ms();
    for (int i = 0; i < clients; i++) {
        ws[i].setup = &s;
        ws[i].warm_ms = start + (uint64_t)(warmup * 1000);
        ws[i].end_ms = ws[i].warm_ms + (uint64_t)(seconds * 1000);
        kq_hist_init(&ws[i].hist);
        pthread_create(&ws[i].th, NULL, ap_run_worker, &ws[i]);
    }
    kq_hist total;
    uint64_t errors = 0;
    kq_hist_init(&total);
    for (int i = 0; i < clients; i++) {
        pthread_join(ws[i].th, NULL);
        kq_hist_merge(&total, &ws[i].hist);
        errors += ws[i].errors;
    }
    printf("alter_partition clients=%d partitions=%d brokers=%d requests=%llu seconds=%.2f "
           "ops_per_s=%.0f p50_ms=%.3f p99_ms=%.3f errors=%llu\n",
           clients, partitions, brokers, (unsigned long long)total.n, seconds,
           (double)total.n / seconds, (double)kq_hist_quantile(&total, 0.50) / 1e6,
           (double)kq_hist_quantile(&total, 0.99) / 1e6, (unsigned long long)errors);
    rc = errors == 0 ? 0 : 1;
out:
    if (hb_started) {
        atomic_store(&s.stop, 1);
        pthread_join(s.hb_th, NULL);
    }
    if (cl != NULL)
        kq_rpc_client_close(cl);
    free(ws);
    return rc;
}

/* ---- --metadata-lag mode ------------------------------------------------------------------- */

#define ML_MAX_BROKERS 16
#define ML_METRIC "kq_metadata_last_applied_offset"

/* One broker's /metrics endpoint, read over a kept-alive HTTP/1.1 connection (reopened when
 * the server closes it). */
typedef struct ml_broker {
    char hostport[128];
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int fd;
    char *buf;
    size_t cap;
    uint64_t polls;
} ml_broker;

static int ml_resolve(ml_broker *b)
{
    char host[128];
    const char *colon = strrchr(b->hostport, ':');
    if (colon == NULL || colon == b->hostport || colon[1] == '\0' ||
        (size_t)(colon - b->hostport) >= sizeof(host))
        return KQ_ERR_CONFIG;
    memcpy(host, b->hostport, (size_t)(colon - b->hostport));
    host[colon - b->hostport] = '\0';
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0 || ai == NULL)
        return KQ_ERR_CONFIG;
    memcpy(&b->addr, ai->ai_addr, ai->ai_addrlen);
    b->addrlen = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

static void ml_close(ml_broker *b)
{
    if (b->fd >= 0)
        close(b->fd);
    b->fd = -1;
}

/* One GET /metrics on the open connection; 0 with *applied set, or an error (the connection is
 * closed then). */
static int ml_get_once(ml_broker *b, int64_t *applied)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: kq-bench\r\n\r\n";
    if (b->fd < 0) {
        int one = 1;
        b->fd = socket(b->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (b->fd < 0)
            return KQ_ERR_IO;
        setsockopt(b->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(b->fd, (struct sockaddr *)&b->addr, b->addrlen) != 0) {
            ml_close(b);
            return KQ_ERR_NETWORK_EXCEPTION;
        }
    }
    if (send(b->fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(req) - 1)) {
        ml_close(b);
        return KQ_ERR_NETWORK_EXCEPTION;
    }
    size_t len = 0, body = 0, clen = 0;
    for (;;) {
        if (len + 4096 > b->cap) {
            size_t cap = b->cap ? b->cap * 2 : 65536;
            char *nb = realloc(b->buf, cap + 1);
            if (nb == NULL) {
                ml_close(b);
                return KQ_ERR_NOMEM;
            }
            b->buf = nb;
            b->cap = cap;
        }
        ssize_t n = recv(b->fd, b->buf + len, b->cap - len, 0);
        if (n <= 0) {
            ml_close(b);
            return KQ_ERR_NETWORK_EXCEPTION;
        }
        len += (size_t)n;
        b->buf[len] = '\0';
        if (body == 0) {
            char *end = strstr(b->buf, "\r\n\r\n");
            if (end == NULL)
                continue;
            body = (size_t)(end - b->buf) + 4;
            *end = '\0';
            const char *cl = strcasestr(b->buf, "\r\ncontent-length:");
            int ok = strncmp(b->buf, "HTTP/1.1 200", 12) == 0 && cl != NULL;
            if (ok)
                clen = (size_t)strtoull(cl + 17, NULL, 10);
            *end = '\r';
            if (!ok) {
                ml_close(b);
                return KQ_ERR_MALFORMED;
            }
        }
        if (len >= body + clen)
            break;
    }
    if (len != body + clen) { /* nothing is pipelined: more bytes mean a confused stream */
        ml_close(b);
        return KQ_ERR_MALFORMED;
    }
    b->polls++;
    /* The sample line: "kq_metadata_last_applied_offset 123" (no labels) at a line start. */
    for (const char *p = b->buf + body; (p = strstr(p, ML_METRIC " ")) != NULL;
         p += sizeof(ML_METRIC)) {
        if (p[-1] != '\n')
            continue;
        char *e = NULL;
        double v = strtod(p + sizeof(ML_METRIC), &e);
        if (e == p + sizeof(ML_METRIC))
            break;
        *applied = (int64_t)v;
        return 0;
    }
    return KQ_ERR_MALFORMED;
}

/* GET with one reconnect (the server may have closed a kept-alive connection). */
static int ml_get(ml_broker *b, int64_t *applied)
{
    int rc = ml_get_once(b, applied);
    if (rc == KQ_ERR_NETWORK_EXCEPTION)
        rc = ml_get_once(b, applied);
    return rc;
}

static void ml_sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Polls every broker (one GET each per round, --poll-us apart) until each has applied `offset`;
 * done_ns[i] is when broker i was first seen to have it: the end of that GET, an upper bound
 * (the resolution is one poll round). 0 when all did before deadline_ns. */
static int ml_wait_applied(ml_broker *bs, int n, int64_t offset, uint64_t deadline_ns, long poll_us,
                           uint64_t *done_ns)
{
    int left = n;
    for (int i = 0; i < n; i++)
        done_ns[i] = 0;
    for (;;) {
        for (int i = 0; i < n; i++) {
            int64_t applied = -1;
            if (done_ns[i] != 0)
                continue;
            int rc = ml_get(&bs[i], &applied);
            if (rc != 0) {
                fprintf(stderr, "kq-bench: GET http://%s/metrics: %s\n", bs[i].hostport,
                        kq_err_name(rc));
                return rc;
            }
            if (applied >= offset) {
                done_ns[i] = kq_now_ns();
                left--;
            }
        }
        if (left == 0)
            return 0;
        if (kq_now_ns() >= deadline_ns)
            return KQ_ERR_TIMEOUT;
        if (poll_us > 0)
            ml_sleep_us(poll_us);
    }
}

static void ml_print_hist(const char *name, const kq_hist *h)
{
    printf(" %s_p50_ms=%.3f %s_p99_ms=%.3f %s_max_ms=%.3f", name,
           (double)kq_hist_quantile(h, 0.50) / 1e6, name, (double)kq_hist_quantile(h, 0.99) / 1e6,
           name, (double)h->max_ns / 1e6);
}

static int metadata_lag_bench(const char *bootstrap, const char *metrics_list, int requests,
                              int interval_ms, long poll_us, size_t size)
{
    static ml_broker bs[ML_MAX_BROKERS];
    uint64_t done[ML_MAX_BROKERS];
    char list[2048], url[320], err[256];
    int n = 0, rc = 1;
    uint64_t errors = 0;
    kq_rpc_client *cl = NULL;
    kq_buf req = {0};
    uint8_t *payload = calloc(1, size ? size : 1);
    const uint8_t *recs[1] = {payload};
    size_t lens[1] = {size};
    kq_hist h_answer, h_send, h_write, h_first;
    kq_hist_init(&h_answer);
    kq_hist_init(&h_send);
    kq_hist_init(&h_write);
    kq_hist_init(&h_first);

    snprintf(list, sizeof(list), "%s", metrics_list);
    char *save = NULL;
    for (char *hp = strtok_r(list, ",", &save); hp != NULL; hp = strtok_r(NULL, ",", &save)) {
        if (n == ML_MAX_BROKERS) {
            fprintf(stderr, "kq-bench: --broker-metrics: at most %d brokers\n", ML_MAX_BROKERS);
            goto out;
        }
        snprintf(bs[n].hostport, sizeof(bs[n].hostport), "%s", hp);
        bs[n].fd = -1;
        if (ml_resolve(&bs[n]) != 0) {
            fprintf(stderr, "kq-bench: --broker-metrics: '%s' is not HOST:PORT\n", hp);
            rc = 2;
            goto out;
        }
        n++;
    }
    if (n == 0) {
        fprintf(stderr, "kq-bench: --broker-metrics names no broker\n");
        rc = 2;
        goto out;
    }
    if (payload == NULL)
        goto out;
    if (find_leader(bootstrap, url, sizeof(url)) != 0) {
        fprintf(stderr, "kq-bench: no active controller found via %s\n", bootstrap);
        goto out;
    }
    if (kq_rpc_client_open(url, KQ_RPC_DEFAULT_MAX_MSG, &cl, err, sizeof(err)) != 0 ||
        kq_codec_encode_write_request("", recs, lens, 1, &req) != 0) {
        fprintf(stderr, "kq-bench: %s: %s\n", url, err);
        goto out;
    }
    /* Warm-up: one write, then every broker must have applied it (and be reachable). */
    int64_t base = -1;
    if ((rc = write_once(cl, &req, NULL, 0, &base)) != 0 ||
        (rc = ml_wait_applied(bs, n, base, kq_now_ns() + 30000000000ull, 1000, done)) != 0) {
        fprintf(stderr, "kq-bench: warm-up write (offset %lld) not applied by every broker: %s\n",
                (long long)base, kq_err_name(rc));
        rc = 1;
        goto out;
    }
    for (int i = 0; i < requests; i++) {
        ml_sleep_us((long)interval_ms * 1000); /* each write starts from an idle cluster */
        uint64_t t0 = kq_now_ns();
        int wrc = write_once(cl, &req, NULL, 0, &base);
        uint64_t t1 = kq_now_ns();
        if (wrc != 0) {
            if (errors++ == 0)
                fprintf(stderr, "kq-bench: write failed: %s\n", kq_err_name(wrc));
            continue;
        }
        wrc = ml_wait_applied(bs, n, base, t1 + 5000000000ull, poll_us, done);
        if (wrc != 0) {
            if (errors++ == 0)
                fprintf(stderr, "kq-bench: offset %lld not applied by every broker: %s\n",
                        (long long)base, kq_err_name(wrc));
            if (wrc != KQ_ERR_TIMEOUT)
                goto out;
            continue;
        }
        uint64_t last = 0, first = UINT64_MAX;
        for (int b = 0; b < n; b++) {
            last = done[b] > last ? done[b] : last;
            first = done[b] < first ? done[b] : first;
        }
        kq_hist_add(&h_write, t1 - t0);
        kq_hist_add(&h_answer, last - t1);
        kq_hist_add(&h_send, last - t0);
        kq_hist_add(&h_first, first - t1);
    }
    uint64_t polls = 0;
    for (int b = 0; b < n; b++)
        polls += bs[b].polls;
    printf("metadata_lag brokers=%d requests=%llu interval_ms=%d poll_us=%ld", n,
           (unsigned long long)h_answer.n, interval_ms, poll_us);
    ml_print_hist("answer_to_all", &h_answer);
    ml_print_hist("send_to_all", &h_send);
    ml_print_hist("write", &h_write);
    ml_print_hist("answer_to_first", &h_first);
    printf(" polls=%llu errors=%llu\n", (unsigned long long)polls, (unsigned long long)errors);
    rc = errors == 0 && h_answer.n > 0 ? 0 : 1;
out:
    for (int b = 0; b < n; b++) {
        ml_close(&bs[b]);
        free(bs[b].buf);
    }
    kq_buf_free(&req);
    if (cl != NULL)
        kq_rpc_client_close(cl);
    free(payload);
    return rc;
}

int main(int argc, char **argv)
{
    const char *bootstrap = NULL;
    int writers = 1;
    double seconds = 5;
    double warmup = 0.5;
    size_t size = 100;
    int alter = 0, brokers = 3, partitions = 0;
    int lag = 0, requests = 200, interval_ms = 30;
    long poll_us = 500;
    const char *cluster_id = NULL, *broker_metrics = NULL;
    static const struct option opts[] = {{"alter-partition", no_argument, NULL, 'A'},
                                         {"cluster-id", required_argument, NULL, 'c'},
                                         {"brokers", required_argument, NULL, 'k'},
                                         {"partitions", required_argument, NULL, 'P'},
                                         {"bootstrap-controller", required_argument, NULL, 'b'},
                                         {"writers", required_argument, NULL, 'w'},
                                         {"seconds", required_argument, NULL, 's'},
                                         {"warmup", required_argument, NULL, 'W'},
                                         {"size", required_argument, NULL, 'z'},
                                         {"fsync-probe", required_argument, NULL, 'f'},
                                         {"metadata-lag", no_argument, NULL, 'L'},
                                         {"broker-metrics", required_argument, NULL, 'm'},
                                         {"requests", required_argument, NULL, 'n'},
                                         {"interval-ms", required_argument, NULL, 'i'},
                                         {"poll-us", required_argument, NULL, 'p'},
                                         {"command-config", required_argument, NULL, 'C'},
                                         {NULL, 0, NULL, 0}};
    int o;
    uint64_t v = 0;
    /* Numbers through kq_cli (tests/lib/kq_cli.h): a bad value is named, never read as 0. */
#define NUM(lo, hi, dst)                                                                           \
    do {                                                                                           \
        if (kq_cli_u64("kq-bench", optname, optarg, (lo), (hi), &v))                               \
            return 2;                                                                              \
        (dst) = v;                                                                                 \
    } while (0)
#define REAL(lo, hi, dst)                                                                          \
    do {                                                                                           \
        if (kq_cli_double("kq-bench", optname, optarg, (lo), (hi), &(dst)))                        \
            return 2;                                                                              \
    } while (0)
    int optidx = 0;
    while ((o = getopt_long(argc, argv, "b:w:s:W:z:f:Ac:k:P:Lm:n:i:p:C:", opts, &optidx)) != -1) {
        for (int k = 0; opts[k].name; k++) /* the short form too names its long option */
            if (opts[k].val == o)
                optidx = k;
        char optname[40];
        snprintf(optname, sizeof optname, "--%s", opts[optidx].name);
        switch (o) {
        case 'f':
            return fsync_probe(optarg);
        case 'C': { /* TLS: security.protocol=SSL and the ssl.* keys, as kq's --command-config */
            char err[2048];
            if (kq_tools_command_config(optarg, err, sizeof err) != 0) {
                fprintf(stderr, "kq-bench: %s\n", err);
                return 2;
            }
            break;
        }
        case 'A':
            alter = 1;
            break;
        case 'L':
            lag = 1;
            break;
        case 'm':
            broker_metrics = optarg;
            break;
        case 'n':
            NUM(1, 1000000, requests);
            break;
        case 'i':
            NUM(0, 3600000, interval_ms);
            break;
        case 'p':
            NUM(0, 10000000, poll_us);
            break;
        case 'c':
            cluster_id = optarg;
            break;
        case 'k':
            NUM(1, 64, brokers);
            break;
        case 'P':
            NUM(0, 1000000, partitions);
            break;
        case 'b':
            bootstrap = optarg;
            break;
        case 'w':
            NUM(1, 4096, writers);
            break;
        case 's':
            REAL(0.001, 86400, seconds);
            break;
        case 'W':
            REAL(0, 3600, warmup);
            break;
        case 'z':
            NUM(0, 1024 * 1024, size);
            break;
        default:
            goto usage;
        }
    }
#undef NUM
#undef REAL
    if (bootstrap == NULL || writers < 1 || writers > 4096 || seconds <= 0)
        goto usage;
    if (lag) {
        if (broker_metrics == NULL || requests < 1 || interval_ms < 0 || poll_us < 0)
            goto usage;
        return metadata_lag_bench(bootstrap, broker_metrics, requests, interval_ms, poll_us, size);
    }
    if (alter) {
        if (cluster_id == NULL)
            goto usage;
        return alter_partition_bench(bootstrap, cluster_id, writers, brokers, partitions, seconds,
                                     warmup);
    }
    char url[320];
    if (find_leader(bootstrap, url, sizeof(url)) != 0) {
        fprintf(stderr, "kq-bench: no active controller found via %s\n", bootstrap);
        return 1;
    }
    worker *ws = calloc((size_t)writers, sizeof(*ws));
    if (ws == NULL)
        return 1;
    uint64_t start = kq_now_ms();
    for (int i = 0; i < writers; i++) {
        snprintf(ws[i].url, sizeof(ws[i].url), "%s", url);
        ws[i].size = size;
        ws[i].warm_ms = start + (uint64_t)(warmup * 1000);
        ws[i].end_ms = ws[i].warm_ms + (uint64_t)(seconds * 1000);
        kq_hist_init(&ws[i].hist);
        pthread_create(&ws[i].th, NULL, run_worker, &ws[i]);
    }
    kq_hist total;
    uint64_t errors = 0;
    kq_hist_init(&total);
    for (int i = 0; i < writers; i++) {
        pthread_join(ws[i].th, NULL);
        kq_hist_merge(&total, &ws[i].hist);
        errors += ws[i].errors;
    }
    printf("writers=%d requests=%llu seconds=%.2f ops_per_s=%.0f p50_ms=%.3f p99_ms=%.3f "
           "errors=%llu\n",
           writers, (unsigned long long)total.n, seconds, (double)total.n / seconds,
           (double)kq_hist_quantile(&total, 0.50) / 1e6,
           (double)kq_hist_quantile(&total, 0.99) / 1e6, (unsigned long long)errors);
    free(ws);
    return 0;
usage:
    fprintf(stderr, "usage: kq-bench --bootstrap-controller HOST:PORT[,...] [--writers N] "
                    "[--seconds S] [--warmup S] [--size BYTES] [--command-config FILE]\n"
                    "       kq-bench --alter-partition --bootstrap-controller HOST:PORT[,...] "
                    "--cluster-id ID [--writers CLIENTS] [--brokers K] [--partitions P] "
                    "[--seconds S] [--warmup S]\n"
                    "       kq-bench --metadata-lag --bootstrap-controller HOST:PORT[,...] "
                    "--broker-metrics HOST:PORT[,...] [--requests N] [--interval-ms MS] "
                    "[--poll-us US] [--size BYTES]\n"
                    "       kq-bench --fsync-probe DIR\n");
    return 2;
}
