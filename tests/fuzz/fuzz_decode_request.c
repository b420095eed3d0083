/* libFuzzer target: kq_codec_decode_request on arbitrary bytes. */
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kq_request r, again;
    kq_buf b = {0};
    char err[256] = "";
    int rc = kq_codec_decode_request(data, size, &r, err, sizeof err);

    if (rc) {
        fuzz_check_error(rc, err);
        FUZZ_CHECK(r.priv_ == NULL && r.records == NULL);
        kq_request_free(&r);
        return 0;
    }
    FUZZ_CHECK(r.api_version == 0 && strlen(r.cluster_id) <= KQ_CODEC_MAX_CLUSTER_ID);
    FUZZ_CHECK(r.sender_id >= -1 && r.raft.to == -1);
    if (r.raft.type == KQ_RAFT_VOTE_REQ)
        FUZZ_CHECK(r.raft.u.vote_req.last_epoch < r.raft.epoch &&
                   r.raft.u.vote_req.last_offset >= 0);
    if (r.api_key == KQ_API_WRITE) {
        FUZZ_CHECK(r.n_records > 0 && r.n_records <= KQ_CODEC_MAX_WRITE_RECORDS);
        for (size_t i = 0; i < r.n_records; i++)
            if (r.record_lens[i]) { /* the whole range is readable (ASan checks) */
                volatile uint8_t last = r.records[i][r.record_lens[i] - 1];
                (void)last;
            }
    }
    if (r.raft.type) {
        /* a request the codec accepted re-encodes to the same message */
        FUZZ_CHECK(kq_codec_encode_raft_request(&r.raft, r.cluster_id, &b) == 0);
        FUZZ_CHECK(kq_codec_decode_request(b.data, b.len, &again, err, sizeof err) == 0);
        fuzz_check_same_msg(&r.raft, &again.raft);
        FUZZ_CHECK(!strcmp(r.cluster_id, again.cluster_id));
        kq_request_free(&again);
        kq_buf_free(&b);
    }
    kq_request_free(&r);
    return 0;
}
