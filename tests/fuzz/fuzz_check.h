/*
 * Shared checks for the libFuzzer targets: a decode that succeeds must satisfy the codec's
 * validation rules, and a raft message must survive encode -> decode unchanged. Any violation
 * aborts, which libFuzzer reports as a crash with the input saved.
 */
#ifndef KQ_FUZZ_CHECK_H
#define KQ_FUZZ_CHECK_H

#include <stdlib.h>
#include <string.h>

#include "kq/codec.h"
#include "kq/error.h"
#include "kq/util.h"

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            abort();                                                                               \
    } while (0)

static inline void fuzz_check_error(int rc, const char *err)
{
    FUZZ_CHECK(rc == KQ_ERR_MALFORMED || rc == KQ_ERR_INVALID_REQUEST ||
               rc == KQ_ERR_UNSUPPORTED_VERSION || rc == KQ_ERR_CORRUPT_MESSAGE);
    FUZZ_CHECK(err[0] != '\0');
}

/* Same wire-visible fields (the codec does not carry `to`, `token`, records_from/to). */
static inline void fuzz_check_same_msg(const kq_raft_msg *a, const kq_raft_msg *b)
{
    FUZZ_CHECK(a->type == b->type && a->from == b->from && a->epoch == b->epoch &&
               a->leader_id == b->leader_id && a->error == b->error);
    switch (a->type) {
    case KQ_RAFT_VOTE_REQ:
        FUZZ_CHECK(a->u.vote_req.candidate_id == b->u.vote_req.candidate_id &&
                   a->u.vote_req.last_epoch == b->u.vote_req.last_epoch &&
                   a->u.vote_req.last_offset == b->u.vote_req.last_offset &&
                   a->u.vote_req.pre_vote == b->u.vote_req.pre_vote);
        break;
    case KQ_RAFT_VOTE_RESP:
        FUZZ_CHECK(a->u.vote_resp.granted == b->u.vote_resp.granted);
        break;
    case KQ_RAFT_END_EPOCH_REQ:
        FUZZ_CHECK(a->u.end_req.n_preferred == b->u.end_req.n_preferred);
        FUZZ_CHECK(!memcmp(a->u.end_req.preferred, b->u.end_req.preferred,
                           sizeof(int32_t) * (size_t)a->u.end_req.n_preferred));
        break;
    case KQ_RAFT_FETCH_REQ:
        FUZZ_CHECK(a->u.fetch_req.fetch_offset == b->u.fetch_req.fetch_offset &&
                   a->u.fetch_req.last_fetched_epoch == b->u.fetch_req.last_fetched_epoch &&
                   a->u.fetch_req.max_wait_ms == b->u.fetch_req.max_wait_ms);
        break;
    case KQ_RAFT_FETCH_RESP:
        FUZZ_CHECK(a->u.fetch_resp.high_watermark == b->u.fetch_resp.high_watermark &&
                   a->u.fetch_resp.log_start_offset == b->u.fetch_resp.log_start_offset &&
                   a->u.fetch_resp.diverging == b->u.fetch_resp.diverging &&
                   a->u.fetch_resp.n_batches == b->u.fetch_resp.n_batches);
        if (a->u.fetch_resp.diverging)
            FUZZ_CHECK(a->u.fetch_resp.diverging_epoch == b->u.fetch_resp.diverging_epoch &&
                       a->u.fetch_resp.diverging_end_offset ==
                           b->u.fetch_resp.diverging_end_offset);
        for (size_t i = 0; i < a->u.fetch_resp.n_batches; i++) {
            const kq_raft_batch *x = &a->u.fetch_resp.batches[i], *y = &b->u.fetch_resp.batches[i];

            FUZZ_CHECK(x->base_offset == y->base_offset && x->epoch == y->epoch &&
                       x->count == y->count && x->crc32c == y->crc32c && x->len == y->len &&
                       !memcmp(x->data, y->data, x->len));
        }
        break;
    default:
        break;
    }
}

#endif
