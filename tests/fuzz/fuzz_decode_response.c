/* libFuzzer target: kq_codec_decode_response on arbitrary bytes. */
#include "fuzz_check.h"
#include "kq_rpc.pb-c.h"
#include "wire.h" /* kq_wire_owned: what priv_ holds */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kq_response r, again;
    kq_codec_batch batches[KQ_RAFT_MAX_BATCHES];
    kq_buf b = {0};
    char err[256] = "";
    int rc = kq_codec_decode_response(data, size, 3, &r, err, sizeof err);

    if (rc) {
        fuzz_check_error(rc, err);
        FUZZ_CHECK(r.priv_ == NULL && r.batches == NULL);
        kq_response_free(&r);
        return 0;
    }
    FUZZ_CHECK(r.error >= 0 && r.leader_id >= -1 && r.leader_epoch >= -1);
    FUZZ_CHECK(r.n_batches <= KQ_RAFT_MAX_BATCHES);
    for (size_t i = 0; i < r.n_batches; i++) {
        const kq_raft_batch *x = &r.batches[i];

        FUZZ_CHECK(x->count > 0 && x->epoch >= 0 && x->base_offset >= 0);
        FUZZ_CHECK(kq_crc32c(0, x->data, x->len) == x->crc32c);
        if (i > 0)
            FUZZ_CHECK(x->base_offset == r.batches[i - 1].base_offset + r.batches[i - 1].count);
        batches[i].base_offset = x->base_offset;
        batches[i].epoch = x->epoch;
        batches[i].count = x->count;
        batches[i].crc32c = x->crc32c;
        batches[i].records = x->data;
        batches[i].len = x->len;
    }
    if (r.api_key == KQ_API_DESCRIBE_QUORUM && r.error == 0) {
        FUZZ_CHECK(r.describe.n_voters <= KQ_RAFT_MAX_VOTERS &&
                   r.describe.n_observers <= KQ_RAFT_MAX_OBSERVERS &&
                   r.describe.n_nodes <= KQ_RAFT_MAX_VOTERS);
        /* a description the codec accepted re-encodes */
        FUZZ_CHECK(kq_codec_encode_describe_response(&r.describe, &b) == 0);
        FUZZ_CHECK(kq_codec_decode_response(b.data, b.len, 3, &again, err, sizeof err) == 0);
        FUZZ_CHECK(!memcmp(&r.describe, &again.describe, sizeof r.describe));
        kq_response_free(&again);
        kq_buf_free(&b);
    }
    if (r.raft.type && ((Kq__Response *)((kq_wire_owned *)r.priv_)->msg)->body_case !=
                           KQ__RESPONSE__BODY__NOT_SET) {
        FUZZ_CHECK(kq_codec_encode_raft_response(&r.raft, batches, r.n_batches, &b) == 0);
        FUZZ_CHECK(kq_codec_decode_response(b.data, b.len, 3, &again, err, sizeof err) == 0);
        fuzz_check_same_msg(&r.raft, &again.raft);
        kq_response_free(&again);
        kq_buf_free(&b);
    }
    kq_response_free(&r);
    return 0;
}
