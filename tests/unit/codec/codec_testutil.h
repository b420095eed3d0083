/*
 * Shared helpers for the codec unit tests (header-only, static functions).
 *
 * check_request_ok / check_response_ok assert that a struct returned by a successful decode
 * satisfies every rule the codec promises to validate, so the mutation tests can assert "error
 * or a decode that passes validation".
 */
#ifndef KQ_CODEC_TESTUTIL_H
#define KQ_CODEC_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kq/codec.h"
#include "kq/error.h"
#include "kq/util.h"

/* A batch payload of `count` opaque records of `size` bytes each; caller frees b->data. */
static inline void tu_opaque_payload(kq_buf *b, int count, size_t size, uint8_t fill)
{
    uint8_t *data = malloc(size ? size : 1);

    assert_non_null(data);
    memset(data, fill, size);
    b->data = NULL;
    b->len = 0;
    for (int i = 0; i < count; i++)
        assert_int_equal(kq_codec_append_opaque(b, data, size), 0);
    free(data);
}

static inline kq_codec_batch tu_batch(int64_t base, int32_t epoch, int32_t count,
                                      const kq_buf *payload)
{
    kq_codec_batch b;

    b.base_offset = base;
    b.epoch = epoch;
    b.count = count;
    b.records = payload->data;
    b.len = payload->len;
    b.crc32c = kq_crc32c(0, payload->data, payload->len);
    return b;
}

static inline int tu_is_decode_error(int rc)
{
    return rc == KQ_ERR_MALFORMED || rc == KQ_ERR_INVALID_REQUEST ||
           rc == KQ_ERR_UNSUPPORTED_VERSION || rc == KQ_ERR_CORRUPT_MESSAGE;
}

static inline void tu_check_str(const char *s, size_t cap)
{
    assert_true(strnlen(s, cap) < cap);
}

static inline void check_request_ok(const kq_request *r)
{
    assert_int_equal(r->api_version, 0);
    tu_check_str(r->cluster_id, sizeof r->cluster_id);
    assert_true(r->sender_id >= -1);
    assert_int_equal(r->raft.to, -1);
    switch (r->api_key) {
    case KQ_API_VOTE:
        assert_int_equal(r->raft.type, KQ_RAFT_VOTE_REQ);
        assert_int_equal(r->raft.from, r->sender_id);
        assert_true(r->raft.epoch >= 0);
        assert_true(r->raft.u.vote_req.candidate_id >= -1);
        assert_true(r->raft.u.vote_req.last_epoch >= 0);
        assert_true(r->raft.u.vote_req.last_epoch < r->raft.epoch);
        assert_true(r->raft.u.vote_req.last_offset >= 0);
        break;
    case KQ_API_BEGIN_QUORUM_EPOCH:
        assert_int_equal(r->raft.type, KQ_RAFT_BEGIN_EPOCH_REQ);
        assert_true(r->raft.leader_id >= -1);
        assert_true(r->raft.epoch >= 0);
        break;
    case KQ_API_END_QUORUM_EPOCH:
        assert_int_equal(r->raft.type, KQ_RAFT_END_EPOCH_REQ);
        assert_true(r->raft.leader_id >= -1);
        assert_true(r->raft.epoch >= 0);
        assert_true(r->raft.u.end_req.n_preferred >= 0);
        assert_true(r->raft.u.end_req.n_preferred <= KQ_RAFT_MAX_VOTERS);
        for (int i = 0; i < r->raft.u.end_req.n_preferred; i++)
            assert_true(r->raft.u.end_req.preferred[i] >= -1);
        break;
    case KQ_API_FETCH:
        assert_int_equal(r->raft.type, KQ_RAFT_FETCH_REQ);
        assert_int_equal(r->raft.from, r->sender_id);
        assert_true(r->raft.epoch >= 0);
        assert_true(r->raft.u.fetch_req.fetch_offset >= 0);
        assert_true(r->raft.u.fetch_req.last_fetched_epoch >= 0);
        assert_true(r->raft.u.fetch_req.max_wait_ms >= 0);
        break;
    case KQ_API_FETCH_SNAPSHOT:
        assert_int_equal(r->raft.type, KQ_RAFT_FETCH_SNAPSHOT_REQ);
        assert_int_equal(r->raft.from, r->sender_id);
        assert_true(r->raft.epoch >= 0);
        assert_true(r->raft.u.fetch_snapshot_req.position >= 0);
        assert_true(r->raft.u.fetch_snapshot_req.max_bytes >= 0);
        assert_true(r->raft.u.fetch_snapshot_req.snapshot_id.end_offset >= 0);
        assert_true(r->raft.u.fetch_snapshot_req.snapshot_id.epoch >= 0);
        break;
    case KQ_API_ADD_RAFT_VOTER:
    case KQ_API_REMOVE_RAFT_VOTER:
    case KQ_API_UPDATE_RAFT_VOTER: {
        const kq_voter *v = r->raft.u.voter_req.voter;
        bool removal = r->api_key == KQ_API_REMOVE_RAFT_VOTER;

        assert_int_equal(r->raft.type, r->api_key == KQ_API_ADD_RAFT_VOTER ? KQ_RAFT_ADD_VOTER_REQ
                                       : removal ? KQ_RAFT_REMOVE_VOTER_REQ
                                                 : KQ_RAFT_UPDATE_VOTER_REQ);
        assert_ptr_equal(v, &r->voter_req.voter);
        assert_int_equal(r->raft.from, r->sender_id);
        assert_true(r->raft.epoch >= 0);
        assert_true(v->key.id >= 0);
        assert_false(kq_uuid_is_zero(v->key.dir));
        tu_check_str(v->host, sizeof v->host);
        assert_true(removal ? v->port == 0 : v->port >= 1 && v->port <= 65535);
        assert_true(v->kraft_min >= 0 && v->kraft_max >= 0);
        break;
    }
    case KQ_API_CREATE_TOPICS:
    case KQ_API_DELETE_TOPICS:
    case KQ_API_DESCRIBE_CONFIGS:
    case KQ_API_CREATE_PARTITIONS:
    case KQ_API_ELECT_LEADERS:
    case KQ_API_INCREMENTAL_ALTER_CONFIGS:
    case KQ_API_ALTER_PARTITION:
    case KQ_API_UPDATE_FEATURES:
    case KQ_API_DESCRIBE_CLUSTER:
    case KQ_API_BROKER_REGISTRATION:
    case KQ_API_BROKER_HEARTBEAT:
    case KQ_API_UNREGISTER_BROKER:
    case KQ_API_DESCRIBE_TOPICS:
    case KQ_API_DESCRIBE_FEATURES:
        /* controller APIs: only the envelope is checked here (ctl_codec decodes bodies) */
    case KQ_API_DESCRIBE_QUORUM:
        assert_int_equal(r->raft.type, 0);
        break;
    case KQ_API_WRITE:
        assert_true(r->n_records > 0);
        assert_true(r->n_records <= KQ_CODEC_MAX_WRITE_RECORDS);
        for (size_t i = 0; i < r->n_records; i++) {
            assert_non_null(r->records[i]);
            if (r->record_lens[i] > 0) { /* the whole range is readable (ASan checks) */
                volatile uint8_t last = r->records[i][r->record_lens[i] - 1];
                (void)last;
            }
        }
        break;
    default:
        fail_msg("decode accepted api key %u", r->api_key);
    }
}

static inline void check_replica_ok(const kq_quorum_replica *q)
{
    size_t n = strnlen(q->directory_id, sizeof q->directory_id);

    assert_true(n == 0 || n == 22);
    assert_true(q->id >= -1);
    assert_true(q->log_end_offset >= -1);
    assert_true(q->last_fetch_timestamp >= -1);
    assert_true(q->last_caught_up_timestamp >= -1);
}

static inline void check_response_ok(const kq_response *r, int32_t from)
{
    assert_true(r->error >= 0);
    tu_check_str(r->error_message, sizeof r->error_message);
    tu_check_str(r->leader_endpoint, sizeof r->leader_endpoint);
    assert_true(r->leader_id >= -1);
    assert_true(r->leader_epoch >= -1);
    switch (r->api_key) {
    case KQ_API_VOTE:
    case KQ_API_BEGIN_QUORUM_EPOCH:
    case KQ_API_END_QUORUM_EPOCH:
    case KQ_API_FETCH:
        assert_true(r->raft.type == KQ_RAFT_VOTE_RESP || r->raft.type == KQ_RAFT_BEGIN_EPOCH_RESP ||
                    r->raft.type == KQ_RAFT_END_EPOCH_RESP || r->raft.type == KQ_RAFT_FETCH_RESP);
        assert_int_equal(r->raft.from, from);
        assert_int_equal(r->raft.to, -1);
        assert_int_equal(r->raft.error, r->error);
        assert_true(r->raft.leader_id >= -1);
        assert_true(r->raft.epoch >= -1);
        break;
    case KQ_API_ADD_RAFT_VOTER:
    case KQ_API_REMOVE_RAFT_VOTER:
    case KQ_API_UPDATE_RAFT_VOTER:
        assert_true(r->raft.type == KQ_RAFT_ADD_VOTER_RESP ||
                    r->raft.type == KQ_RAFT_REMOVE_VOTER_RESP ||
                    r->raft.type == KQ_RAFT_UPDATE_VOTER_RESP);
        assert_int_equal(r->raft.from, from);
        assert_int_equal(r->raft.error, r->error);
        tu_check_str(r->raft.u.voter_resp.error_message, sizeof r->raft.u.voter_resp.error_message);
        break;
    case KQ_API_FETCH_SNAPSHOT:
        assert_int_equal(r->raft.type, KQ_RAFT_FETCH_SNAPSHOT_RESP);
        assert_int_equal(r->raft.from, from);
        assert_int_equal(r->raft.error, r->error);
        assert_true(r->raft.u.fetch_snapshot_resp.len <= KQ_CODEC_MAX_SNAPSHOT_CHUNK);
        assert_true(r->raft.u.fetch_snapshot_resp.position >= 0);
        if (r->error == 0 && r->raft.u.fetch_snapshot_resp.snapshot_id.end_offset >= 0) {
            /* a decoded chunk always lies inside the file it claims */
            if (r->priv_ != NULL && r->raft.u.fetch_snapshot_resp.size > 0)
                assert_true(r->raft.u.fetch_snapshot_resp.position +
                                (int64_t)r->raft.u.fetch_snapshot_resp.len <=
                            r->raft.u.fetch_snapshot_resp.size);
        }
        break;
    case KQ_API_CREATE_TOPICS:
    case KQ_API_DELETE_TOPICS:
    case KQ_API_DESCRIBE_CONFIGS:
    case KQ_API_CREATE_PARTITIONS:
    case KQ_API_ELECT_LEADERS:
    case KQ_API_INCREMENTAL_ALTER_CONFIGS:
    case KQ_API_ALTER_PARTITION:
    case KQ_API_UPDATE_FEATURES:
    case KQ_API_DESCRIBE_CLUSTER:
    case KQ_API_BROKER_REGISTRATION:
    case KQ_API_BROKER_HEARTBEAT:
    case KQ_API_UNREGISTER_BROKER:
    case KQ_API_DESCRIBE_TOPICS:
    case KQ_API_DESCRIBE_FEATURES:
        /* controller APIs: only the envelope is checked here (ctl_codec decodes bodies) */
    case KQ_API_DESCRIBE_QUORUM:
    case KQ_API_WRITE:
        assert_int_equal(r->raft.type, 0);
        break;
    default:
        fail_msg("decode accepted a response for api key %u", r->api_key);
    }
    if (r->raft.type == KQ_RAFT_FETCH_RESP) {
        assert_true(r->raft.u.fetch_resp.high_watermark >= -1);
        assert_true(r->raft.u.fetch_resp.log_start_offset >= 0);
        assert_true(r->n_batches <= KQ_RAFT_MAX_BATCHES);
        assert_ptr_equal(r->raft.u.fetch_resp.batches, r->batches);
        assert_int_equal(r->raft.u.fetch_resp.n_batches, r->n_batches);
        for (size_t i = 0; i < r->n_batches; i++) {
            const kq_raft_batch *b = &r->batches[i];

            assert_true(b->base_offset >= 0);
            assert_true(b->epoch >= 0);
            assert_true(b->count > 0 && b->count <= 1000000);
            assert_int_equal(b->kind, KQ_RAFT_BATCH_FETCHED);
            assert_int_equal(kq_crc32c(0, b->data, b->len), b->crc32c);
            if (i > 0)
                assert_true(b->base_offset ==
                            r->batches[i - 1].base_offset + r->batches[i - 1].count);
        }
    }
    if (r->api_key == KQ_API_DESCRIBE_QUORUM && r->error == 0) {
        const kq_quorum_description *d = &r->describe;

        tu_check_str(d->cluster_id, sizeof d->cluster_id);
        assert_true(d->n_voters >= 0 && d->n_voters <= KQ_RAFT_MAX_VOTERS);
        assert_true(d->n_observers >= 0 && d->n_observers <= KQ_RAFT_MAX_OBSERVERS);
        assert_true(d->n_nodes >= 0 && d->n_nodes <= KQ_RAFT_MAX_VOTERS);
        for (int i = 0; i < d->n_voters; i++)
            check_replica_ok(&d->voters[i]);
        for (int i = 0; i < d->n_observers; i++)
            check_replica_ok(&d->observers[i]);
        for (int i = 0; i < d->n_nodes; i++) {
            tu_check_str(d->nodes[i].listener, sizeof d->nodes[i].listener);
            tu_check_str(d->nodes[i].host, sizeof d->nodes[i].host);
            assert_true(d->nodes[i].port >= 0 && d->nodes[i].port <= 65535);
        }
    }
}

#endif
