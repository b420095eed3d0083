/*
 * Writes a seed corpus for the fuzz targets: one valid encoding of every request and response
 * type, and a few record payloads. Usage: fuzz_seeds REQUEST_DIR RESPONSE_DIR RECORDS_DIR
 */
#include <stdio.h>
#include <string.h>

#include "kq/codec.h"
#include "kq/util.h"

static int put(const char *dir, const char *name, const uint8_t *data, size_t len)
{
    char path[4096];
    FILE *f;
    int rc = 0;

    snprintf(path, sizeof path, "%s/seed_%s", dir, name);
    f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "fuzz_seeds: cannot write %s\n", path);
        return 1;
    }
    if (len && fwrite(data, 1, len, f) != len)
        rc = 1;
    if (fclose(f))
        rc = 1;
    return rc;
}

static int put_buf(const char *dir, const char *name, kq_buf *b)
{
    int rc = put(dir, name, b->data, b->len);

    kq_buf_free(b);
    return rc;
}

int main(int argc, char **argv)
{
    kq_raft_msg m;
    kq_buf b = {0}, p = {0};
    kq_codec_batch batch;
    kq_quorum_description d;
    const int32_t voters[] = {1, 2, 3};
    static const uint8_t rec[] = {1, 2, 3, 4};
    const uint8_t *recs[1] = {rec};
    size_t lens[1] = {sizeof rec};
    uint8_t walk[512];
    int rc = 0;

    if (argc != 4) {
        fprintf(stderr, "usage: fuzz_seeds REQUEST_DIR RESPONSE_DIR RECORDS_DIR\n");
        return 2;
    }
    memset(&m, 0, sizeof m);
    m.from = 1;
    m.leader_id = 1;
    m.epoch = 3;
    m.type = KQ_RAFT_VOTE_REQ;
    m.u.vote_req.candidate_id = 1;
    m.u.vote_req.last_epoch = 2;
    m.u.vote_req.last_offset = 10;
    rc |= kq_codec_encode_raft_request(&m, "cluster", &b) || put_buf(argv[1], "vote", &b);
    m.type = KQ_RAFT_BEGIN_EPOCH_REQ;
    rc |= kq_codec_encode_raft_request(&m, "cluster", &b) || put_buf(argv[1], "begin", &b);
    m.type = KQ_RAFT_END_EPOCH_REQ;
    m.u.end_req.n_preferred = 2;
    m.u.end_req.preferred[0] = 2;
    m.u.end_req.preferred[1] = 3;
    rc |= kq_codec_encode_raft_request(&m, "cluster", &b) || put_buf(argv[1], "end", &b);
    memset(&m.u, 0, sizeof m.u);
    m.type = KQ_RAFT_FETCH_REQ;
    m.u.fetch_req.fetch_offset = 10;
    m.u.fetch_req.last_fetched_epoch = 2;
    m.u.fetch_req.max_wait_ms = 500;
    rc |= kq_codec_encode_raft_request(&m, "cluster", &b) || put_buf(argv[1], "fetch", &b);
    rc |= kq_codec_encode_describe_request("cluster", &b) || put_buf(argv[1], "describe", &b);
    rc |= kq_codec_encode_write_request("", recs, lens, 1, &b) || put_buf(argv[1], "write", &b);

    memset(&m, 0, sizeof m);
    m.leader_id = 1;
    m.epoch = 3;
    m.type = KQ_RAFT_VOTE_RESP;
    m.u.vote_resp.granted = true;
    rc |= kq_codec_encode_raft_response(&m, NULL, 0, &b) || put_buf(argv[2], "vote", &b);
    m.type = KQ_RAFT_BEGIN_EPOCH_RESP;
    rc |= kq_codec_encode_raft_response(&m, NULL, 0, &b) || put_buf(argv[2], "begin", &b);
    m.type = KQ_RAFT_END_EPOCH_RESP;
    rc |= kq_codec_encode_raft_response(&m, NULL, 0, &b) || put_buf(argv[2], "end", &b);
    memset(&m.u, 0, sizeof m.u);
    m.type = KQ_RAFT_FETCH_RESP;
    m.u.fetch_resp.high_watermark = 1;
    m.u.fetch_resp.diverging = true;
    m.u.fetch_resp.diverging_epoch = 1;
    m.u.fetch_resp.diverging_end_offset = 1;
    rc |= kq_codec_append_leader_change(&p, 1, voters, 3, voters, 2);
    rc |= kq_codec_append_noop(&p);
    rc |= kq_codec_append_opaque(&p, rec, sizeof rec);
    batch.base_offset = 0;
    batch.epoch = 3;
    batch.count = 3;
    batch.records = p.data;
    batch.len = p.len;
    batch.crc32c = kq_crc32c(0, p.data, p.len);
    rc |= kq_codec_encode_raft_response(&m, &batch, 1, &b) || put_buf(argv[2], "fetch", &b);
    memset(&d, 0, sizeof d);
    strcpy(d.cluster_id, "cluster");
    d.leader_id = 1;
    d.leader_epoch = 3;
    d.high_watermark = 3;
    d.n_voters = 1;
    d.voters[0].id = 1;
    strcpy(d.voters[0].directory_id, "AAAAAAAAAAAAAAAAAAAAAg");
    d.n_observers = 1;
    d.observers[0].id = 7;
    d.observers[0].last_fetch_timestamp = -1;
    d.n_nodes = 1;
    d.nodes[0].id = 1;
    strcpy(d.nodes[0].listener, "CONTROLLER");
    strcpy(d.nodes[0].host, "localhost");
    d.nodes[0].port = 9093;
    rc |= kq_codec_encode_describe_response(&d, &b) || put_buf(argv[2], "describe", &b);
    rc |= kq_codec_encode_write_response(5, 3, &b) || put_buf(argv[2], "write", &b);
    rc |= kq_codec_encode_error_response(KQ_API_WRITE, 41, "not the active controller", 2, 3,
                                         "localhost:9093", &b) ||
          put_buf(argv[2], "error", &b);

    /* walk_records input: first byte is the record count */
    if (p.len + 1 <= sizeof walk) {
        walk[0] = 3;
        memcpy(walk + 1, p.data, p.len);
        rc |= put(argv[3], "mixed", walk, p.len + 1);
    }
    kq_buf_free(&p);
    if (rc)
        fprintf(stderr, "fuzz_seeds: failed\n");
    return rc ? 1 : 0;
}
