/*
 * kq-bench: commit latency and throughput of the metadata quorum.
 *
 * N writer threads each send Write requests (one opaque record of --size bytes) to the
 * active controller, one at a time, and time each until the controller answers, which it does
 * only after the record committed (a majority fsynced it). Prints one result line:
 *
 *   writers=16 requests=32000 seconds=2.01 ops_per_s=15920 p50_ms=0.98 p99_ms=2.10 errors=0
 */
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kq/codec.h"
#include "kq/error.h"
#include "kq/rpc.h"
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

static int write_once(kq_rpc_client *cl, const kq_buf *req, int32_t *leader_port_hint,
                      char *hint, size_t hintlen)
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
    }
    (void)leader_port_hint;
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
    if (payload == NULL || kq_rpc_client_open(w->url, KQ_RPC_DEFAULT_MAX_MSG, &cl, err,
                                              sizeof(err)) != 0)
        goto out;
    if (kq_codec_encode_write_request("", recs, lens, 1, &req) != 0)
        goto out;
    for (;;) {
        uint64_t t0 = kq_now_ns();
        if (t0 / 1000000 >= w->end_ms)
            break;
        int rc = write_once(cl, &req, NULL, NULL, 0);
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
            snprintf(cand, sizeof(cand), "tcp://%s", hp);
            for (int hop = 0; hop < 3; hop++) {
                if (kq_rpc_client_open(cand, KQ_RPC_DEFAULT_MAX_MSG, &cl, err, sizeof(err)) != 0)
                    break;
                kq_codec_encode_write_request("", recs, lens, 1, &req);
                int rc = write_once(cl, &req, NULL, hint, sizeof(hint));
                kq_buf_free(&req);
                kq_rpc_client_close(cl);
                cl = NULL;
                if (rc == 0) {
                    snprintf(url, urllen, "%s", cand);
                    return 0;
                }
                if (hint[0] == '\0')
                    break;
                snprintf(cand, sizeof(cand), "tcp://%s", hint);
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

int main(int argc, char **argv)
{
    const char *bootstrap = NULL;
    int writers = 1;
    double seconds = 5;
    double warmup = 0.5;
    size_t size = 100;
    static const struct option opts[] = {{"bootstrap-controller", required_argument, NULL, 'b'},
                                         {"writers", required_argument, NULL, 'w'},
                                         {"seconds", required_argument, NULL, 's'},
                                         {"warmup", required_argument, NULL, 'W'},
                                         {"size", required_argument, NULL, 'z'},
                                         {"fsync-probe", required_argument, NULL, 'f'},
                                         {NULL, 0, NULL, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "b:w:s:W:z:f:", opts, NULL)) != -1) {
        switch (o) {
        case 'f':
            return fsync_probe(optarg);
        case 'b':
            bootstrap = optarg;
            break;
        case 'w':
            writers = atoi(optarg);
            break;
        case 's':
            seconds = atof(optarg);
            break;
        case 'W':
            warmup = atof(optarg);
            break;
        case 'z':
            size = (size_t)atol(optarg);
            break;
        default:
            goto usage;
        }
    }
    if (bootstrap == NULL || writers < 1 || writers > 4096 || seconds <= 0)
        goto usage;
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
                    "[--seconds S] [--warmup S] [--size BYTES]\n"
                    "       kq-bench --fsync-probe DIR\n");
    return 2;
}
