/*
 * kq-fake-broker: a test client that plays one broker against real controllers.
 *
 *   kq-fake-broker --bootstrap-controller H:P[,H:P...] --cluster-id ID --broker-id N [--rack R]
 *                  [--heartbeat-ms 2000] [--port P] [--start-fenced]
 *
 * It registers (a new incarnation id per start), heartbeats every --heartbeat-ms reporting a
 * metadata offset equal to its broker epoch (its own registration record, so it counts as
 * caught up), follows NOT_CONTROLLER hints across failovers, and prints one line per event.
 * With --start-fenced it reports the offset just below its registration (not caught up, so the
 * controller keeps it fenced) until the `catch-up` command.
 *
 *   registered broker=1 epoch=42
 *   state broker=1 fenced=false caught_up=true shutdown=false
 *   heartbeats stopped broker=1 last_heartbeat_ms=1795963654593 last_heartbeat_sent_ms=...
 *     (wall clock when the last answered heartbeat was answered / was sent)
 *   alter error=NONE partition_error=NONE leader=1 leader_epoch=0 partition_epoch=3 isr=1,2
 *
 * Commands on stdin, one per line:
 *   alter TOPIC_ID PARTITION LEADER_EPOCH PARTITION_EPOCH ISR[,ISR...]
 *   stop-heartbeats | start-heartbeats | catch-up | shutdown | quit
 * start-heartbeats, catch-up and shutdown answer `ok COMMAND broker=N`.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kq/codec.h"
#include "kq/ctl_codec.h"
#include "kq/error.h"
#include "kq/rpc.h"
#include "kq/util.h"

#define MAX_CONTROLLERS 8
#define CALL_TIMEOUT_MS 2000

typedef struct fake {
    char addrs[MAX_CONTROLLERS][300];
    int n_addrs;
    int current;
    char hint[300]; /* leader endpoint from the last NOT_CONTROLLER, "" if none */
    int32_t id;
    const char *cluster_id;
    const char *rack;
    int port;
    uint8_t incarnation[16];
    int64_t epoch; /* -1 until registered */
    int heartbeats;
    int want_shutdown;
    int behind; /* report metadata offset epoch - 1 (not caught up) */
    int last_fenced, last_caught_up, last_shutdown;
    int64_t last_ok_wall_ms; /* wall clock of the last answered heartbeat */
    int64_t last_ok_sent_ms; /* wall clock just before that heartbeat was sent */
} fake;

/* Send req (already encoded) to the active controller, following hints; *resp decoded. */
static int call(fake *f, uint32_t api, const kq_buf *req, kq_response *resp)
{
    for (int attempt = 0; attempt < 2 * MAX_CONTROLLERS + 4; attempt++) {
        char url[320], err[256];
        const char *target = f->hint[0] ? f->hint : f->addrs[f->current];
        kq_rpc_client *cl = NULL;
        uint8_t *data = NULL;
        size_t len = 0;
        snprintf(url, sizeof(url), "tcp://%s", target);
        int rc = kq_rpc_client_open(url, KQ_RPC_DEFAULT_MAX_MSG, &cl, err, sizeof(err));
        if (rc == 0)
            rc = kq_rpc_call(cl, req->data, req->len, CALL_TIMEOUT_MS, &data, &len);
        if (cl != NULL)
            kq_rpc_client_close(cl);
        if (rc == 0) {
            memset(resp, 0, sizeof(*resp));
            rc = kq_codec_decode_response(data, len, -1, resp, err, sizeof(err));
            free(data);
            if (rc == 0 && resp->api_key == api &&
                (resp->error == KQ_ERR_NOT_CONTROLLER ||
                 resp->error == KQ_ERR_NOT_LEADER_OR_FOLLOWER ||
                 resp->error == KQ_ERR_BROKER_NOT_AVAILABLE)) {
                snprintf(f->hint, sizeof(f->hint), "%s",
                         strcmp(resp->leader_endpoint, target) != 0 ? resp->leader_endpoint : "");
                kq_response_free(resp);
                if (f->hint[0] == '\0')
                    f->current = (f->current + 1) % f->n_addrs;
                struct timespec ts = {0, 100 * 1000 * 1000};
                nanosleep(&ts, NULL);
                continue;
            }
            if (rc == 0)
                return 0;
        }
        f->hint[0] = '\0';
        f->current = (f->current + 1) % f->n_addrs;
    }
    return KQ_ERR_REQUEST_TIMED_OUT;
}

static int do_register(fake *f)
{
    kq_ctl_request req;
    kq_rec_endpoint ep = {.name = "PLAINTEXT", .host = "127.0.0.1", .port = f->port};
    kq_buf b = {0};
    kq_response resp;
    char err[256];
    memset(&req, 0, sizeof(req));
    req.api_key = KQ_API_BROKER_REGISTRATION;
    req.broker_registration.broker_id = f->id;
    req.broker_registration.cluster_id = f->cluster_id;
    memcpy(req.broker_registration.incarnation_id, f->incarnation, 16);
    req.broker_registration.endpoints = &ep;
    req.broker_registration.n_endpoints = 1;
    req.broker_registration.rack = f->rack;
    if (kq_ctl_encode_request(f->cluster_id, f->id, &req, &b) != 0)
        return KQ_ERR_INTERNAL;
    int rc = call(f, KQ_API_BROKER_REGISTRATION, &b, &resp);
    kq_buf_free(&b);
    if (rc != 0)
        return rc;
    if (resp.error != 0) {
        printf("register error=%s message=\"%s\"\n", kq_err_name(resp.error), resp.error_message);
        rc = resp.error;
    } else if ((rc = kq_ctl_decode_broker_registration_response(&resp, &f->epoch, err,
                                                                sizeof(err))) == 0) {
        printf("registered broker=%d epoch=%lld\n", f->id, (long long)f->epoch);
    }
    kq_response_free(&resp);
    fflush(stdout);
    return rc;
}

static int do_heartbeat(fake *f)
{
    kq_ctl_request req;
    kq_buf b = {0};
    kq_response resp;
    kq_heartbeat_result hr;
    char err[256];
    memset(&req, 0, sizeof(req));
    memset(&hr, 0, sizeof(hr));
    req.api_key = KQ_API_BROKER_HEARTBEAT;
    req.broker_heartbeat.broker_id = f->id;
    req.broker_heartbeat.broker_epoch = f->epoch;
    req.broker_heartbeat.current_metadata_offset = f->behind ? f->epoch - 1 : f->epoch;
    req.broker_heartbeat.want_shutdown = f->want_shutdown;
    if (kq_ctl_encode_request(f->cluster_id, f->id, &req, &b) != 0)
        return KQ_ERR_INTERNAL;
    int64_t sent_ms = kq_wall_ms();
    int rc = call(f, KQ_API_BROKER_HEARTBEAT, &b, &resp);
    kq_buf_free(&b);
    if (rc != 0)
        return rc;
    if (resp.error == KQ_ERR_STALE_BROKER_EPOCH) {
        /* The controller forgot or fenced this incarnation away: register again. */
        printf("heartbeat error=STALE_BROKER_EPOCH: registering again\n");
        kq_response_free(&resp);
        f->epoch = -1;
        fflush(stdout);
        return 0;
    }
    if (resp.error == 0 &&
        kq_ctl_decode_broker_heartbeat_response(&resp, &hr, err, sizeof(err)) == 0) {
        f->last_ok_wall_ms = kq_wall_ms();
        f->last_ok_sent_ms = sent_ms;
        if (hr.is_fenced != f->last_fenced || hr.is_caught_up != f->last_caught_up ||
            hr.should_shutdown != f->last_shutdown) {
            printf("state broker=%d fenced=%s caught_up=%s shutdown=%s\n", f->id,
                   hr.is_fenced ? "true" : "false", hr.is_caught_up ? "true" : "false",
                   hr.should_shutdown ? "true" : "false");
            f->last_fenced = hr.is_fenced;
            f->last_caught_up = hr.is_caught_up;
            f->last_shutdown = hr.should_shutdown;
        }
    } else if (resp.error != 0) {
        printf("heartbeat error=%s message=\"%s\"\n", kq_err_name(resp.error), resp.error_message);
    }
    kq_response_free(&resp);
    fflush(stdout);
    return 0;
}

static void print_ids(const int32_t *ids, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        printf("%s%d", i ? "," : "", ids[i]);
}

/* alter TOPIC_ID PARTITION LEADER_EPOCH PARTITION_EPOCH ISR */
static void do_alter(fake *f, char *args)
{
    char topic[64], isr_s[512];
    int part, le, pe;
    uint8_t tid[16];
    kq_ap_isr_member isr[64];
    int32_t n_isr = 0;
    if (sscanf(args, "%63s %d %d %d %511s", topic, &part, &le, &pe, isr_s) != 5 ||
        !kq_uuid_parse(topic, tid)) {
        printf("alter usage: alter TOPIC_ID PARTITION LEADER_EPOCH PARTITION_EPOCH ISR\n");
        fflush(stdout);
        return;
    }
    for (char *save = NULL, *t = strtok_r(isr_s, ",", &save); t && n_isr < 64;
         t = strtok_r(NULL, ",", &save))
        isr[n_isr++] = (kq_ap_isr_member){atoi(t), -1};
    kq_ap_partition p = {.partition_index = part,
                         .leader_epoch = le,
                         .partition_epoch = pe,
                         .leader_recovery_state = 0,
                         .new_isr = isr,
                         .n_new_isr = n_isr};
    kq_ap_topic t = {.partitions = &p, .n_partitions = 1};
    memcpy(t.topic_id, tid, 16);
    kq_ctl_request req;
    memset(&req, 0, sizeof(req));
    req.api_key = KQ_API_ALTER_PARTITION;
    req.alter_partition.version = 3;
    req.alter_partition.broker_id = f->id;
    req.alter_partition.broker_epoch = f->epoch;
    req.alter_partition.topics = &t;
    req.alter_partition.n_topics = 1;
    kq_buf b = {0};
    kq_response resp;
    kq_alter_partition_result res;
    char err[256];
    memset(&res, 0, sizeof(res));
    if (kq_ctl_encode_request(f->cluster_id, f->id, &req, &b) != 0) {
        printf("alter error=INTERNAL\n");
        fflush(stdout);
        return;
    }
    int rc = call(f, KQ_API_ALTER_PARTITION, &b, &resp);
    kq_buf_free(&b);
    if (rc != 0) {
        printf("alter error=%s\n", kq_err_name(rc));
    } else if (resp.error != 0) {
        printf("alter error=%s\n", kq_err_name(resp.error));
        kq_response_free(&resp);
    } else if (kq_ctl_decode_alter_partition_response(&resp, &res, err, sizeof(err)) != 0 ||
               res.n_results < 1) {
        printf("alter error=MALFORMED detail=\"%s\"\n", err);
        kq_response_free(&resp);
    } else {
        const kq_ap_result *r = &res.results[0];
        printf("alter error=%s partition_error=%s leader=%d leader_epoch=%d partition_epoch=%d "
               "isr=",
               kq_err_name(res.error), kq_err_name(r->error), r->leader_id, r->leader_epoch,
               r->partition_epoch);
        print_ids(r->isr, r->n_isr);
        printf("\n");
        kq_ctl_alter_partition_response_free(&res);
        kq_response_free(&resp);
    }
    fflush(stdout);
}

static int handle_line(fake *f, char *line)
{
    line[strcspn(line, "\r\n")] = '\0';
    if (strncmp(line, "alter ", 6) == 0)
        do_alter(f, line + 6);
    else if (strcmp(line, "stop-heartbeats") == 0) {
        f->heartbeats = 0;
        printf("heartbeats stopped broker=%d last_heartbeat_ms=%lld last_heartbeat_sent_ms=%lld\n",
               f->id, (long long)f->last_ok_wall_ms, (long long)f->last_ok_sent_ms);
    } else if (strcmp(line, "start-heartbeats") == 0) {
        f->heartbeats = 1;
        printf("ok start-heartbeats broker=%d\n", f->id);
    } else if (strcmp(line, "catch-up") == 0) {
        f->behind = 0;
        printf("ok catch-up broker=%d\n", f->id);
    } else if (strcmp(line, "shutdown") == 0) {
        f->want_shutdown = 1;
        printf("ok shutdown broker=%d\n", f->id);
    } else if (strcmp(line, "quit") == 0)
        return 1;
    else if (line[0] != '\0')
        printf("unknown command: %s\n", line);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    static fake f;
    const char *bootstrap = NULL;
    int heartbeat_ms = 2000;
    static const struct option opts[] = {{"bootstrap-controller", required_argument, NULL, 'b'},
                                         {"broker-id", required_argument, NULL, 'i'},
                                         {"cluster-id", required_argument, NULL, 'c'},
                                         {"rack", required_argument, NULL, 'r'},
                                         {"heartbeat-ms", required_argument, NULL, 'h'},
                                         {"port", required_argument, NULL, 'p'},
                                         {"start-fenced", no_argument, NULL, 'F'},
                                         {NULL, 0, NULL, 0}};
    int o;
    f.id = -1;
    f.port = 9092;
    while ((o = getopt_long(argc, argv, "b:i:c:r:h:p:F", opts, NULL)) != -1) {
        switch (o) {
        case 'c':
            f.cluster_id = optarg;
            break;
        case 'b':
            bootstrap = optarg;
            break;
        case 'i':
            f.id = atoi(optarg);
            break;
        case 'r':
            f.rack = optarg;
            break;
        case 'h':
            heartbeat_ms = atoi(optarg);
            break;
        case 'p':
            f.port = atoi(optarg);
            break;
        case 'F':
            f.behind = 1;
            break;
        default:
            goto usage;
        }
    }
    if (bootstrap == NULL || f.id < 0 || heartbeat_ms < 10 || f.cluster_id == NULL)
        goto usage;
    char list[2048];
    snprintf(list, sizeof(list), "%s", bootstrap);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t && f.n_addrs < MAX_CONTROLLERS;
         t = strtok_r(NULL, ",", &save))
        snprintf(f.addrs[f.n_addrs++], sizeof(f.addrs[0]), "%s", t);
    char u[KQ_UUID_STR_LEN + 1];
    kq_uuid_random(u);
    kq_uuid_parse(u, f.incarnation);
    f.epoch = -1;
    f.heartbeats = 1;
    f.last_fenced = f.last_caught_up = f.last_shutdown = -1;
    setvbuf(stdout, NULL, _IOLBF, 0);

    uint64_t next_hb = 0;
    int stdin_open = 1;
    static struct {
        char buf[4096];
        size_t len;
    } in;
    for (;;) {
        uint64_t now = kq_now_ms();
        if (f.epoch < 0 && now >= next_hb) {
            if (do_register(&f) != 0)
                next_hb = now + 500;
            else
                next_hb = now; /* heartbeat right away */
        } else if (f.epoch >= 0 && f.heartbeats && now >= next_hb) {
            do_heartbeat(&f);
            next_hb = now + (uint64_t)heartbeat_ms;
            if (f.last_shutdown == 1) {
                printf("shutdown complete broker=%d\n", f.id);
                return 0;
            }
        }
        /* Lines already read from stdin are handled before waiting again. */
        char *nl;
        if ((nl = memchr(in.buf, '\n', in.len)) != NULL) {
            *nl = '\0';
            int stop = handle_line(&f, in.buf);
            size_t used = (size_t)(nl - in.buf) + 1;
            memmove(in.buf, in.buf + used, in.len - used);
            in.len -= used;
            if (stop)
                return 0;
            continue;
        }
        struct pollfd pfd = {.fd = 0, .events = POLLIN};
        int wait = next_hb > now ? (int)(next_hb - now) : 0;
        if (wait > 100)
            wait = 100;
        if (stdin_open && poll(&pfd, 1, wait) > 0) {
            if (in.len == sizeof(in.buf) - 1)
                in.len = 0; /* an over-long line: drop it */
            ssize_t n = read(0, in.buf + in.len, sizeof(in.buf) - 1 - in.len);
            if (n > 0)
                in.len += (size_t)n;
            else if (n == 0 || (errno != EINTR && errno != EAGAIN))
                stdin_open = 0; /* keep heartbeating until killed */
        } else if (!stdin_open) {
            struct timespec ts = {0, (long)wait * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
usage:
    fprintf(stderr, "usage: kq-fake-broker --bootstrap-controller H:P[,H:P...] --cluster-id ID "
                    "--broker-id N "
                    "[--rack R] [--heartbeat-ms MS] [--port P] [--start-fenced]\n");
    return 2;
}
