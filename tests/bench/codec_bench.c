/*
 * kq-codec-bench: CPU cost of the quorum codec's hot messages, one process, no I/O. Prints
 * microseconds per call for decoding a Write of 10 records of 100 bytes, a Fetch answer of
 * 8 batches of 1 KiB (checksums included) and a Fetch request, and for encoding the last two.
 * Used to compare two builds side by side (docs/performance.md); never in CI.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kq/codec.h"
#include "kq/util.h"
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
int main(void)
{
    /* a Write request of 10 records of 100 bytes; a Fetch answer with 8 batches of 1 KiB; a Fetch
     * request */
    uint8_t rec[100];
    memset(rec, 7, sizeof rec);
    const uint8_t *recs[10];
    size_t lens[10];
    for (int i = 0; i < 10; i++) {
        recs[i] = rec;
        lens[i] = sizeof rec;
    }
    kq_buf w = {0};
    kq_codec_encode_write_request("cid", recs, lens, 10, &w);
    static uint8_t payload[8][1024];
    kq_codec_batch bs[8];
    for (int i = 0; i < 8; i++) {
        memset(payload[i], i, 1024);
        bs[i] = (kq_codec_batch){.base_offset = i * 10,
                                 .epoch = 3,
                                 .count = 10,
                                 .crc32c = kq_crc32c(0, payload[i], 1024),
                                 .records = payload[i],
                                 .len = 1024};
    }
    kq_raft_msg m;
    memset(&m, 0, sizeof m);
    m.type = KQ_RAFT_FETCH_RESP;
    m.leader_id = 1;
    m.epoch = 3;
    m.u.fetch_resp.high_watermark = 70;
    m.u.fetch_resp.log_start_offset = 0;
    kq_buf f = {0};
    if (kq_codec_encode_raft_response(&m, bs, 8, &f))
        return 1;
    kq_raft_msg q;
    memset(&q, 0, sizeof q);
    q.type = KQ_RAFT_FETCH_REQ;
    q.from = 2;
    q.epoch = 3;
    q.u.fetch_req.fetch_offset = 5;
    q.u.fetch_req.last_fetched_epoch = 3;
    q.u.fetch_req.max_wait_ms = 500;
    kq_buf fq = {0};
    kq_codec_encode_raft_request(&q, "cid", &fq);
    int N = 200000;
    char err[256];
    double t;
    t = now();
    for (int i = 0; i < N; i++) {
        kq_request r;
        if (kq_codec_decode_request(w.data, w.len, &r, err, sizeof err)) {
            puts(err);
            return 1;
        }
        kq_request_free(&r);
    }
    printf("decode write(10x100B)   %.2f us\n", (now() - t) / N * 1e6);
    t = now();
    for (int i = 0; i < N; i++) {
        kq_response r;
        if (kq_codec_decode_response(f.data, f.len, 1, &r, err, sizeof err)) {
            puts(err);
            return 1;
        }
        kq_response_free(&r);
    }
    printf("decode fetch answer(8x1K) %.2f us\n", (now() - t) / N * 1e6);
    t = now();
    for (int i = 0; i < N; i++) {
        kq_request r;
        if (kq_codec_decode_request(fq.data, fq.len, &r, err, sizeof err)) {
            puts(err);
            return 1;
        }
        kq_request_free(&r);
    }
    printf("decode fetch request    %.2f us\n", (now() - t) / N * 1e6);
    t = now();
    for (int i = 0; i < N; i++) {
        kq_buf b;
        kq_codec_encode_raft_response(&m, bs, 8, &b);
        kq_buf_free(&b);
    }
    printf("encode fetch answer(8x1K) %.2f us\n", (now() - t) / N * 1e6);
    t = now();
    for (int i = 0; i < N; i++) {
        kq_buf b;
        kq_codec_encode_raft_request(&q, "cid", &b);
        kq_buf_free(&b);
    }
    printf("encode fetch request    %.2f us\n", (now() - t) / N * 1e6);
    return 0;
}
