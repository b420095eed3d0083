/*
 * kq_codec: protobuf-c wire messages <-> plain C structs, with validation of everything that
 * is decoded (see include/kq/codec.h for the contract and ownership rules).
 *
 * Encoders build the protobuf-c structs on the stack (pointing at the caller's data, never
 * copying it) and pack them into one malloc'd buffer. Decoders unpack with protobuf-c's
 * default allocator, keep the unpacked tree in priv_ so that pointers into it stay valid, and
 * check every field a core or tool will rely on before returning 0.
 */
#include "kq/codec.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/util.h"
#include "kq_record.pb-c.h"
#include "kq_rpc.pb-c.h"
#include "pb_wire.h"

/* Largest record count one batch may claim. */
#define KQ_CODEC_MAX_BATCH_COUNT 1000000
/* max_bytes a follower asks for in Fetch (the leader's host applies its own limit too). */
#define KQ_CODEC_FETCH_MAX_BYTES (8 * 1024 * 1024)
#define KQ_CODEC_MAX_ERROR_MESSAGE 255
#define KQ_CODEC_DIRECTORY_ID_LEN 22
#define KQ_CODEC_MAX_LISTENER 31
/* Nesting depth of our schemas is 3 (Response > FetchResponse > Batch); allow some slack. */

static const uint8_t empty_input[1];

void kq_buf_free(kq_buf *b)
{
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

/* ---------------------------------------------------------------------------------------- */
/* helpers                                                                                   */

__attribute__((format(printf, 4, 5))) static int fail(char *errbuf, size_t errlen, int code,
                                                      const char *fmt, ...)
{
    va_list ap;

    if (errbuf && errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* The name of an API this codec decodes (the quorum and controller APIs; data-plane bodies
 * are kq_datacodec's), or NULL. */
static const char *api_name(uint32_t key)
{
    const kq_api_info *api = kq_api_find(key);

    return api && api->kind != KQ_API_KIND_DATA ? api->name : NULL;
}

/* Oneof case (same numbering for Request and Response bodies) carrying `key`, 0 if none. */
static int body_case_for_api(uint32_t key)
{
    const kq_api_info *api = kq_api_find(key);

    return api && api->kind != KQ_API_KIND_DATA ? api->body_case : 0;
}

static const char *body_name(int body_case)
{
    const kq_api_info *api = kq_api_by_body(body_case);

    return api ? api->body : "unknown";
}

/* Length of s if it is at most max bytes long, else max + 1. */
static size_t bounded_len(const char *s, size_t max)
{
    return s ? strnlen(s, max + 1) : 0;
}

/* Copy a validated string (length <= cap - 1) into a fixed array. */
static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strnlen(src, cap - 1) : 0;

    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
}

static int pack_message(const ProtobufCMessage *msg, kq_buf *out)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *p = malloc(n ? n : 1);

    if (!p)
        return KQ_ERR_NOMEM;
    out->len = protobuf_c_message_pack(msg, p);
    out->data = p;
    return 0;
}

static int check_cluster_id(const char *cluster_id)
{
    return bounded_len(cluster_id, KQ_CODEC_MAX_CLUSTER_ID) > KQ_CODEC_MAX_CLUSTER_ID
               ? KQ_ERR_INVALID_REQUEST
               : 0;
}

/* ---------------------------------------------------------------------------------------- */
/* request encoders                                                                          */

int kq_codec_encode_raft_request(const kq_raft_msg *m, const char *cluster_id, kq_buf *out)
{
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__VoteRequest vote = KQ__VOTE_REQUEST__INIT;
    Kq__BeginQuorumEpochRequest begin = KQ__BEGIN_QUORUM_EPOCH_REQUEST__INIT;
    Kq__EndQuorumEpochRequest end = KQ__END_QUORUM_EPOCH_REQUEST__INIT;
    Kq__FetchRequest fetch = KQ__FETCH_REQUEST__INIT;
    Kq__FetchSnapshotRequest fsnap = KQ__FETCH_SNAPSHOT_REQUEST__INIT;
    Kq__EpochEndOffset snap_id = KQ__EPOCH_END_OFFSET__INIT;

    if (!out)
        return KQ_ERR_INVALID_REQUEST;
    out->data = NULL;
    out->len = 0;
    if (!m || check_cluster_id(cluster_id))
        return KQ_ERR_INVALID_REQUEST;

    rq.api_version = 0;
    rq.cluster_id = (char *)(cluster_id ? cluster_id : "");
    rq.sender_id = m->from;
    switch ((int)m->type) {
    case KQ_RAFT_VOTE_REQ:
        vote.candidate_epoch = m->epoch;
        vote.candidate_id = m->u.vote_req.candidate_id;
        vote.last_offset_epoch = m->u.vote_req.last_epoch;
        vote.last_offset = m->u.vote_req.last_offset;
        vote.pre_vote = m->u.vote_req.pre_vote;
        rq.api_key = KQ_API_VOTE;
        rq.body_case = KQ__REQUEST__BODY_VOTE;
        rq.vote = &vote;
        break;
    case KQ_RAFT_BEGIN_EPOCH_REQ:
        begin.leader_id = m->leader_id;
        begin.leader_epoch = m->epoch;
        rq.api_key = KQ_API_BEGIN_QUORUM_EPOCH;
        rq.body_case = KQ__REQUEST__BODY_BEGIN_QUORUM_EPOCH;
        rq.begin_quorum_epoch = &begin;
        break;
    case KQ_RAFT_END_EPOCH_REQ:
        if (m->u.end_req.n_preferred < 0 || m->u.end_req.n_preferred > KQ_RAFT_MAX_VOTERS)
            return KQ_ERR_INVALID_REQUEST;
        end.leader_id = m->leader_id;
        end.leader_epoch = m->epoch;
        end.n_preferred_successors = (size_t)m->u.end_req.n_preferred;
        end.preferred_successors = (int32_t *)m->u.end_req.preferred;
        rq.api_key = KQ_API_END_QUORUM_EPOCH;
        rq.body_case = KQ__REQUEST__BODY_END_QUORUM_EPOCH;
        rq.end_quorum_epoch = &end;
        break;
    case KQ_RAFT_FETCH_REQ:
        fetch.replica_id = m->from;
        fetch.current_leader_epoch = m->epoch;
        fetch.fetch_offset = m->u.fetch_req.fetch_offset;
        fetch.last_fetched_epoch = m->u.fetch_req.last_fetched_epoch;
        fetch.max_wait_ms = m->u.fetch_req.max_wait_ms;
        fetch.max_bytes = KQ_CODEC_FETCH_MAX_BYTES;
        rq.api_key = KQ_API_FETCH;
        rq.body_case = KQ__REQUEST__BODY_FETCH;
        rq.fetch = &fetch;
        break;
    case (int)KQ_RAFT_FETCH_SNAPSHOT_REQ:
        if (m->u.fetch_snapshot_req.position < 0 || m->u.fetch_snapshot_req.max_bytes < 0 ||
            m->u.fetch_snapshot_req.snapshot_id.end_offset < 0 ||
            m->u.fetch_snapshot_req.snapshot_id.epoch < 0)
            return KQ_ERR_INVALID_REQUEST;
        snap_id.end_offset = m->u.fetch_snapshot_req.snapshot_id.end_offset;
        snap_id.epoch = m->u.fetch_snapshot_req.snapshot_id.epoch;
        fsnap.replica_id = m->from;
        fsnap.current_leader_epoch = m->epoch;
        fsnap.snapshot_id = &snap_id;
        fsnap.position = m->u.fetch_snapshot_req.position;
        fsnap.max_bytes = m->u.fetch_snapshot_req.max_bytes;
        rq.api_key = KQ_API_FETCH_SNAPSHOT;
        rq.body_case = KQ__REQUEST__BODY_FETCH_SNAPSHOT;
        rq.fetch_snapshot = &fsnap;
        break;
    default:
        return KQ_ERR_INVALID_REQUEST;
    }
    return pack_message(&rq.base, out);
}

int kq_codec_encode_describe_request(const char *cluster_id, kq_buf *out)
{
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__DescribeQuorumRequest body = KQ__DESCRIBE_QUORUM_REQUEST__INIT;

    if (!out)
        return KQ_ERR_INVALID_REQUEST;
    out->data = NULL;
    out->len = 0;
    if (check_cluster_id(cluster_id))
        return KQ_ERR_INVALID_REQUEST;
    rq.api_key = KQ_API_DESCRIBE_QUORUM;
    rq.api_version = 0;
    rq.cluster_id = (char *)(cluster_id ? cluster_id : "");
    rq.sender_id = -1;
    rq.body_case = KQ__REQUEST__BODY_DESCRIBE_QUORUM;
    rq.describe_quorum = &body;
    return pack_message(&rq.base, out);
}

int kq_codec_encode_write_request(const char *cluster_id, const uint8_t *const *records,
                                  const size_t *lens, size_t n, kq_buf *out)
{
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__WriteRequest body = KQ__WRITE_REQUEST__INIT;
    ProtobufCBinaryData *items = NULL;
    size_t i;
    int rc;

    if (!out)
        return KQ_ERR_INVALID_REQUEST;
    out->data = NULL;
    out->len = 0;
    if (check_cluster_id(cluster_id) || n == 0 || n > KQ_CODEC_MAX_WRITE_RECORDS || !records ||
        !lens)
        return KQ_ERR_INVALID_REQUEST;
    items = calloc(n, sizeof *items);
    if (!items)
        return KQ_ERR_NOMEM;
    for (i = 0; i < n; i++) {
        if (!records[i] && lens[i] > 0) {
            rc = KQ_ERR_INVALID_REQUEST;
            goto out;
        }
        items[i].data = (uint8_t *)records[i];
        items[i].len = lens[i];
    }
    body.n_records = n;
    body.records = items;
    rq.api_key = KQ_API_WRITE;
    rq.api_version = 0;
    rq.cluster_id = (char *)(cluster_id ? cluster_id : "");
    rq.sender_id = -1;
    rq.body_case = KQ__REQUEST__BODY_WRITE;
    rq.write = &body;
    rc = pack_message(&rq.base, out);
out:
    free(items);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* response encoders                                                                         */

/* Copy message into buf, cut to at most KQ_CODEC_MAX_ERROR_MESSAGE bytes on a UTF-8 boundary. */
static char *clip_message(const char *message, char *buf)
{
    size_t n;

    if (!message)
        return NULL;
    n = strnlen(message, KQ_CODEC_MAX_ERROR_MESSAGE + 1);
    if (n > KQ_CODEC_MAX_ERROR_MESSAGE) {
        n = KQ_CODEC_MAX_ERROR_MESSAGE;
        while (n > 0 && ((unsigned char)message[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(buf, message, n);
    buf[n] = '\0';
    return buf;
}

int kq_codec_encode_raft_response(const kq_raft_msg *m, const kq_codec_batch *batches,
                                  size_t n_batches, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__VoteResponse vote = KQ__VOTE_RESPONSE__INIT;
    Kq__BeginQuorumEpochResponse begin = KQ__BEGIN_QUORUM_EPOCH_RESPONSE__INIT;
    Kq__EndQuorumEpochResponse end = KQ__END_QUORUM_EPOCH_RESPONSE__INIT;
    Kq__FetchResponse fetch = KQ__FETCH_RESPONSE__INIT;
    Kq__EpochEndOffset diverging = KQ__EPOCH_END_OFFSET__INIT;
    Kq__EpochEndOffset snap_id = KQ__EPOCH_END_OFFSET__INIT;
    Kq__FetchSnapshotResponse fsnap = KQ__FETCH_SNAPSHOT_RESPONSE__INIT;
    Kq__Batch wire[KQ_RAFT_MAX_BATCHES];
    Kq__Batch *wire_ptrs[KQ_RAFT_MAX_BATCHES];
    size_t i;

    if (!out)
        return KQ_ERR_INVALID_REQUEST;
    out->data = NULL;
    out->len = 0;
    if (!m || n_batches > KQ_RAFT_MAX_BATCHES || (n_batches > 0 && !batches))
        return KQ_ERR_INVALID_REQUEST;
    if (n_batches > 0 && m->type != KQ_RAFT_FETCH_RESP)
        return KQ_ERR_INVALID_REQUEST;

    rs.error_code = m->error;
    if (m->leader_id >= 0) {
        rs.has_leader_id = 1;
        rs.leader_id = m->leader_id;
    }
    if (m->epoch >= 0) {
        rs.has_leader_epoch = 1;
        rs.leader_epoch = m->epoch;
    }
    switch ((int)m->type) {
    case KQ_RAFT_VOTE_RESP:
        vote.leader_id = m->leader_id;
        vote.leader_epoch = m->epoch;
        vote.vote_granted = m->u.vote_resp.granted;
        rs.api_key = KQ_API_VOTE;
        rs.body_case = KQ__RESPONSE__BODY_VOTE;
        rs.vote = &vote;
        break;
    case KQ_RAFT_BEGIN_EPOCH_RESP:
        begin.leader_id = m->leader_id;
        begin.leader_epoch = m->epoch;
        rs.api_key = KQ_API_BEGIN_QUORUM_EPOCH;
        rs.body_case = KQ__RESPONSE__BODY_BEGIN_QUORUM_EPOCH;
        rs.begin_quorum_epoch = &begin;
        break;
    case KQ_RAFT_END_EPOCH_RESP:
        end.leader_id = m->leader_id;
        end.leader_epoch = m->epoch;
        rs.api_key = KQ_API_END_QUORUM_EPOCH;
        rs.body_case = KQ__RESPONSE__BODY_END_QUORUM_EPOCH;
        rs.end_quorum_epoch = &end;
        break;
    case KQ_RAFT_FETCH_RESP:
        fetch.leader_id = m->leader_id;
        fetch.leader_epoch = m->epoch;
        fetch.high_watermark = m->u.fetch_resp.high_watermark;
        fetch.log_start_offset = m->u.fetch_resp.log_start_offset;
        if (m->u.fetch_resp.diverging) {
            diverging.epoch = m->u.fetch_resp.diverging_epoch;
            diverging.end_offset = m->u.fetch_resp.diverging_end_offset;
            fetch.diverging_epoch = &diverging;
        }
        if (m->u.fetch_resp.snapshot) {
            if (n_batches > 0 || m->u.fetch_resp.diverging ||
                m->u.fetch_resp.snapshot_id.end_offset < 0 || m->u.fetch_resp.snapshot_id.epoch < 0)
                return KQ_ERR_INVALID_REQUEST;
            snap_id.end_offset = m->u.fetch_resp.snapshot_id.end_offset;
            snap_id.epoch = m->u.fetch_resp.snapshot_id.epoch;
            fetch.snapshot_id = &snap_id;
        }
        for (i = 0; i < n_batches; i++) {
            if (!batches[i].records && batches[i].len > 0)
                return KQ_ERR_INVALID_REQUEST;
            kq__batch__init(&wire[i]);
            wire[i].base_offset = batches[i].base_offset;
            wire[i].epoch = batches[i].epoch;
            wire[i].count = batches[i].count;
            wire[i].crc32c = batches[i].crc32c;
            wire[i].records.data = (uint8_t *)batches[i].records;
            wire[i].records.len = batches[i].len;
            wire_ptrs[i] = &wire[i];
        }
        fetch.n_batches = n_batches;
        fetch.batches = n_batches ? wire_ptrs : NULL;
        rs.api_key = KQ_API_FETCH;
        rs.body_case = KQ__RESPONSE__BODY_FETCH;
        rs.fetch = &fetch;
        break;
    case (int)KQ_RAFT_FETCH_SNAPSHOT_RESP: {
        const __typeof__(m->u.fetch_snapshot_resp) *f = &m->u.fetch_snapshot_resp;
        if (f->len > KQ_CODEC_MAX_SNAPSHOT_CHUNK || (!f->data && f->len > 0) ||
            f->snapshot_id.end_offset < 0 || f->snapshot_id.epoch < 0 || f->position < 0 ||
            f->size < -1 ||
            (m->error == 0 && (f->size <= 0 || f->position > f->size - (int64_t)f->len)))
            return KQ_ERR_INVALID_REQUEST;
        snap_id.end_offset = f->snapshot_id.end_offset;
        snap_id.epoch = f->snapshot_id.epoch;
        fsnap.leader_id = m->leader_id;
        fsnap.leader_epoch = m->epoch;
        fsnap.snapshot_id = &snap_id;
        fsnap.size = f->size;
        fsnap.position = f->position;
        fsnap.unaligned_records.data = (uint8_t *)f->data;
        fsnap.unaligned_records.len = f->data ? f->len : 0;
        rs.api_key = KQ_API_FETCH_SNAPSHOT;
        rs.body_case = KQ__RESPONSE__BODY_FETCH_SNAPSHOT;
        rs.fetch_snapshot = &fsnap;
        break;
    }
    default:
        return KQ_ERR_INVALID_REQUEST;
    }
    return pack_message(&rs.base, out);
}

static int fill_replica(Kq__ReplicaState *w, const kq_quorum_replica *r)
{
    if (bounded_len(r->directory_id, KQ_CODEC_DIRECTORY_ID_LEN) > KQ_CODEC_DIRECTORY_ID_LEN)
        return KQ_ERR_INVALID_REQUEST;
    kq__replica_state__init(w);
    w->replica_id = r->id;
    w->directory_id = (char *)r->directory_id;
    w->log_end_offset = r->log_end_offset;
    w->last_fetch_timestamp = r->last_fetch_timestamp;
    w->last_caught_up_timestamp = r->last_caught_up_timestamp;
    return 0;
}

int kq_codec_encode_describe_response(const kq_quorum_description *d, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__DescribeQuorumResponse body = KQ__DESCRIBE_QUORUM_RESPONSE__INIT;
    Kq__ReplicaState voters[KQ_RAFT_MAX_VOTERS], observers[KQ_RAFT_MAX_OBSERVERS];
    Kq__ReplicaState *voter_ptrs[KQ_RAFT_MAX_VOTERS], *observer_ptrs[KQ_RAFT_MAX_OBSERVERS];
    Kq__NodeEndpoint nodes[KQ_RAFT_MAX_VOTERS];
    Kq__NodeEndpoint *node_ptrs[KQ_RAFT_MAX_VOTERS];
    int i;

    if (!out)
        return KQ_ERR_INVALID_REQUEST;
    out->data = NULL;
    out->len = 0;
    if (!d || d->n_voters < 0 || d->n_voters > KQ_RAFT_MAX_VOTERS || d->n_observers < 0 ||
        d->n_observers > KQ_RAFT_MAX_OBSERVERS || d->n_nodes < 0 ||
        d->n_nodes > KQ_RAFT_MAX_VOTERS || check_cluster_id(d->cluster_id))
        return KQ_ERR_INVALID_REQUEST;
    for (i = 0; i < d->n_voters; i++) {
        if (fill_replica(&voters[i], &d->voters[i]))
            return KQ_ERR_INVALID_REQUEST;
        voter_ptrs[i] = &voters[i];
    }
    for (i = 0; i < d->n_observers; i++) {
        if (fill_replica(&observers[i], &d->observers[i]))
            return KQ_ERR_INVALID_REQUEST;
        observer_ptrs[i] = &observers[i];
    }
    for (i = 0; i < d->n_nodes; i++) {
        const kq_quorum_node *n = &d->nodes[i];

        if (bounded_len(n->listener, KQ_CODEC_MAX_LISTENER) > KQ_CODEC_MAX_LISTENER ||
            bounded_len(n->host, KQ_CODEC_MAX_ENDPOINT - 1) > KQ_CODEC_MAX_ENDPOINT - 1)
            return KQ_ERR_INVALID_REQUEST;
        kq__node_endpoint__init(&nodes[i]);
        nodes[i].node_id = n->id;
        nodes[i].listener = (char *)n->listener;
        nodes[i].host = (char *)n->host;
        nodes[i].port = n->port;
        node_ptrs[i] = &nodes[i];
    }
    body.cluster_id = (char *)d->cluster_id;
    body.leader_id = d->leader_id;
    body.leader_epoch = d->leader_epoch;
    body.high_watermark = d->high_watermark;
    body.n_current_voters = (size_t)d->n_voters;
    body.current_voters = d->n_voters ? voter_ptrs : NULL;
    body.n_observers = (size_t)d->n_observers;
    body.observers = d->n_observers ? observer_ptrs : NULL;
    body.n_nodes = (size_t)d->n_nodes;
    body.nodes = d->n_nodes ? node_ptrs : NULL;

    rs.api_key = KQ_API_DESCRIBE_QUORUM;
    rs.error_code = 0;
    rs.body_case = KQ__RESPONSE__BODY_DESCRIBE_QUORUM;
    rs.describe_quorum = &body;
    return pack_message(&rs.base, out);
}

int kq_codec_encode_write_response(int64_t base_offset, int32_t epoch, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    Kq__WriteResponse body = KQ__WRITE_RESPONSE__INIT;

    if (!out)
        return KQ_ERR_INVALID_REQUEST;
    out->data = NULL;
    out->len = 0;
    body.base_offset = base_offset;
    body.epoch = epoch;
    rs.api_key = KQ_API_WRITE;
    rs.error_code = 0;
    rs.body_case = KQ__RESPONSE__BODY_WRITE;
    rs.write = &body;
    return pack_message(&rs.base, out);
}

int kq_codec_encode_error_response(uint32_t api_key, int error, const char *message,
                                   int32_t leader_id, int32_t leader_epoch,
                                   const char *leader_endpoint, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    char msg[KQ_CODEC_MAX_ERROR_MESSAGE + 1];

    if (!out)
        return KQ_ERR_INVALID_REQUEST;
    out->data = NULL;
    out->len = 0;
    if (bounded_len(leader_endpoint, KQ_CODEC_MAX_ENDPOINT - 1) > KQ_CODEC_MAX_ENDPOINT - 1)
        return KQ_ERR_INVALID_REQUEST;
    rs.api_key = api_key;
    rs.error_code = error;
    rs.error_message = clip_message(message, msg);
    if (leader_id >= 0) {
        rs.has_leader_id = 1;
        rs.leader_id = leader_id;
    }
    if (leader_epoch >= 0) {
        rs.has_leader_epoch = 1;
        rs.leader_epoch = leader_epoch;
    }
    if (leader_endpoint && leader_endpoint[0])
        rs.leader_endpoint = (char *)leader_endpoint;
    return pack_message(&rs.base, out);
}

/* ---------------------------------------------------------------------------------------- */
/* request decoder                                                                           */

void kq_request_free(kq_request *r)
{
    if (!r)
        return;
    if (r->priv_)
        kq__request__free_unpacked(r->priv_, NULL);
    free(r->records);
    free(r->record_lens);
    r->priv_ = NULL;
    r->records = NULL;
    r->record_lens = NULL;
    r->n_records = 0;
}

static void raft_msg_defaults(kq_raft_msg *m)
{
    memset(m, 0, sizeof *m);
    m->from = KQ_RAFT_NO_ID;
    m->to = KQ_RAFT_NO_ID;
    m->leader_id = KQ_RAFT_NO_ID;
    m->epoch = -1;
}

#define BAD(...) fail(errbuf, errlen, KQ_ERR_INVALID_REQUEST, __VA_ARGS__)

static int decode_vote_req(const Kq__VoteRequest *v, kq_raft_msg *m, char *errbuf, size_t errlen)
{
    if (v->candidate_epoch < 0)
        return BAD("vote candidate_epoch %d is negative", v->candidate_epoch);
    if (v->candidate_id < -1)
        return BAD("vote candidate_id %d is invalid", v->candidate_id);
    if (v->last_offset_epoch < 0)
        return BAD("vote last_offset_epoch %d is negative", v->last_offset_epoch);
    if (v->last_offset < 0)
        return BAD("vote last_offset %lld is negative", (long long)v->last_offset);
    if (v->last_offset_epoch >= v->candidate_epoch)
        return BAD("vote last_offset_epoch %d is not below candidate_epoch %d",
                   v->last_offset_epoch, v->candidate_epoch);
    m->type = KQ_RAFT_VOTE_REQ;
    m->epoch = v->candidate_epoch;
    m->u.vote_req.candidate_id = v->candidate_id;
    m->u.vote_req.last_epoch = v->last_offset_epoch;
    m->u.vote_req.last_offset = v->last_offset;
    m->u.vote_req.pre_vote = v->pre_vote != 0;
    return 0;
}

static int check_leader(const char *what, int32_t leader_id, int32_t leader_epoch, char *errbuf,
                        size_t errlen)
{
    if (leader_id < -1)
        return BAD("%s leader_id %d is invalid", what, leader_id);
    if (leader_epoch < 0)
        return BAD("%s leader_epoch %d is negative", what, leader_epoch);
    return 0;
}

static int decode_end_req(const Kq__EndQuorumEpochRequest *e, kq_raft_msg *m, char *errbuf,
                          size_t errlen)
{
    size_t i;
    int rc = check_leader("end_quorum_epoch", e->leader_id, e->leader_epoch, errbuf, errlen);

    if (rc)
        return rc;
    if (e->n_preferred_successors > KQ_RAFT_MAX_VOTERS)
        return BAD("end_quorum_epoch has %zu preferred successors (max %d)",
                   e->n_preferred_successors, KQ_RAFT_MAX_VOTERS);
    for (i = 0; i < e->n_preferred_successors; i++) {
        if (e->preferred_successors[i] < -1)
            return BAD("end_quorum_epoch preferred successor %d is invalid",
                       e->preferred_successors[i]);
        m->u.end_req.preferred[i] = e->preferred_successors[i];
    }
    m->type = KQ_RAFT_END_EPOCH_REQ;
    m->leader_id = e->leader_id;
    m->epoch = e->leader_epoch;
    m->u.end_req.n_preferred = (int)e->n_preferred_successors;
    return 0;
}

static int decode_fetch_req(const Kq__FetchRequest *f, int32_t sender_id, kq_raft_msg *m,
                            char *errbuf, size_t errlen)
{
    if (f->replica_id != sender_id)
        return BAD("fetch replica_id %d does not match sender_id %d", f->replica_id, sender_id);
    if (f->current_leader_epoch < 0)
        return BAD("fetch current_leader_epoch %d is negative", f->current_leader_epoch);
    if (f->fetch_offset < 0)
        return BAD("fetch fetch_offset %lld is negative", (long long)f->fetch_offset);
    if (f->last_fetched_epoch < 0)
        return BAD("fetch last_fetched_epoch %d is negative", f->last_fetched_epoch);
    if (f->max_wait_ms < 0)
        return BAD("fetch max_wait_ms %d is negative", f->max_wait_ms);
    if (f->max_bytes < 0)
        return BAD("fetch max_bytes %d is negative", f->max_bytes);
    m->type = KQ_RAFT_FETCH_REQ;
    m->epoch = f->current_leader_epoch;
    m->u.fetch_req.fetch_offset = f->fetch_offset;
    m->u.fetch_req.last_fetched_epoch = f->last_fetched_epoch;
    m->u.fetch_req.max_wait_ms = f->max_wait_ms;
    return 0;
}

static int decode_fetch_snapshot_req(const Kq__FetchSnapshotRequest *f, int32_t sender_id,
                                     kq_raft_msg *m, char *errbuf, size_t errlen)
{
    if (f->replica_id != sender_id)
        return BAD("fetch_snapshot replica_id %d does not match sender_id %d", f->replica_id,
                   sender_id);
    if (f->current_leader_epoch < 0)
        return BAD("fetch_snapshot current_leader_epoch %d is negative", f->current_leader_epoch);
    if (!f->snapshot_id)
        return BAD("fetch_snapshot request has no snapshot_id");
    if (f->snapshot_id->end_offset < 0 || f->snapshot_id->epoch < 0)
        return BAD("fetch_snapshot snapshot_id %lld-%d is negative",
                   (long long)f->snapshot_id->end_offset, f->snapshot_id->epoch);
    if (f->position < 0)
        return BAD("fetch_snapshot position %lld is negative", (long long)f->position);
    if (f->max_bytes < 0)
        return BAD("fetch_snapshot max_bytes %d is negative", f->max_bytes);
    m->type = KQ_RAFT_FETCH_SNAPSHOT_REQ;
    m->epoch = f->current_leader_epoch;
    m->u.fetch_snapshot_req.snapshot_id.end_offset = f->snapshot_id->end_offset;
    m->u.fetch_snapshot_req.snapshot_id.epoch = f->snapshot_id->epoch;
    m->u.fetch_snapshot_req.position = f->position;
    m->u.fetch_snapshot_req.max_bytes = f->max_bytes;
    return 0;
}

static int decode_write_req(const Kq__WriteRequest *w, kq_request *out, char *errbuf, size_t errlen)
{
    size_t i;

    if (w->n_records == 0)
        return BAD("write request has no records");
    if (w->n_records > KQ_CODEC_MAX_WRITE_RECORDS)
        return BAD("write request has %zu records (max %d)", w->n_records,
                   KQ_CODEC_MAX_WRITE_RECORDS);
    out->records = calloc(w->n_records, sizeof *out->records);
    out->record_lens = calloc(w->n_records, sizeof *out->record_lens);
    if (!out->records || !out->record_lens)
        return fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding write request");
    for (i = 0; i < w->n_records; i++) {
        /* protobuf-c leaves data NULL for an empty bytes field; callers get a valid pointer. */
        out->records[i] = w->records[i].data ? w->records[i].data : empty_input;
        out->record_lens[i] = w->records[i].len;
    }
    out->n_records = w->n_records;
    return 0;
}

int kq_codec_decode_request(const uint8_t *buf, size_t len, kq_request *out, char *errbuf,
                            size_t errlen)
{
    Kq__Request *rq;
    const char *name;
    int want, rc;

    if (!out)
        return fail(errbuf, errlen, KQ_ERR_INVALID_REQUEST, "no output for decoded request");
    memset(out, 0, sizeof *out);
    out->sender_id = KQ_RAFT_NO_ID;
    raft_msg_defaults(&out->raft);
    if ((rc = kq_pb_unpack_request(buf, len, &rq, &out->api_key, errbuf, errlen)) != 0)
        return rc;
    out->priv_ = rq;
    out->api_key = rq->api_key;
    out->api_version = rq->api_version;
    if (rq->sender_id >= -1)
        out->sender_id = rq->sender_id;

    name = api_name(rq->api_key);
    if (!name) {
        rc = BAD("unknown api key %u", rq->api_key);
        goto out;
    }
    if (rq->api_version != 0) {
        rc = fail(errbuf, errlen, KQ_ERR_UNSUPPORTED_VERSION,
                  "%s version %u is not supported (only version 0)", name, rq->api_version);
        goto out;
    }
    if (!kq_pb_strings_ok(&kq__request__descriptor, buf ? buf : empty_input, len)) {
        rc = BAD("%s request has a string with a NUL byte", name);
        goto out;
    }
    if (bounded_len(rq->cluster_id, KQ_CODEC_MAX_CLUSTER_ID) > KQ_CODEC_MAX_CLUSTER_ID) {
        rc = BAD("%s request cluster_id is longer than %d bytes", name, KQ_CODEC_MAX_CLUSTER_ID);
        goto out;
    }
    copy_str(out->cluster_id, sizeof out->cluster_id, rq->cluster_id);
    if (rq->sender_id < -1) {
        rc = BAD("%s request sender_id %d is invalid", name, rq->sender_id);
        goto out;
    }
    want = body_case_for_api(rq->api_key);
    if (!want) {
        rc = BAD("%s is not supported", name);
        goto out;
    }
    if (rq->body_case == KQ__REQUEST__BODY__NOT_SET) {
        rc = BAD("%s request has no body", name);
        goto out;
    }
    if ((int)rq->body_case != want) {
        rc = BAD("%s request carries a %s body", name, body_name(rq->body_case));
        goto out;
    }

    out->raft.from = rq->sender_id;
    switch (rq->body_case) {
    case KQ__REQUEST__BODY_VOTE:
        rc = decode_vote_req(rq->vote, &out->raft, errbuf, errlen);
        break;
    case KQ__REQUEST__BODY_BEGIN_QUORUM_EPOCH:
        rc = check_leader("begin_quorum_epoch", rq->begin_quorum_epoch->leader_id,
                          rq->begin_quorum_epoch->leader_epoch, errbuf, errlen);
        if (!rc) {
            out->raft.type = KQ_RAFT_BEGIN_EPOCH_REQ;
            out->raft.leader_id = rq->begin_quorum_epoch->leader_id;
            out->raft.epoch = rq->begin_quorum_epoch->leader_epoch;
        }
        break;
    case KQ__REQUEST__BODY_END_QUORUM_EPOCH:
        rc = decode_end_req(rq->end_quorum_epoch, &out->raft, errbuf, errlen);
        break;
    case KQ__REQUEST__BODY_FETCH:
        rc = decode_fetch_req(rq->fetch, rq->sender_id, &out->raft, errbuf, errlen);
        break;
    case KQ__REQUEST__BODY_FETCH_SNAPSHOT:
        rc = decode_fetch_snapshot_req(rq->fetch_snapshot, rq->sender_id, &out->raft, errbuf,
                                       errlen);
        break;
    case KQ__REQUEST__BODY_DESCRIBE_QUORUM:
        out->raft.from = KQ_RAFT_NO_ID;
        rc = 0;
        break;
    case KQ__REQUEST__BODY_WRITE:
        out->raft.from = KQ_RAFT_NO_ID;
        rc = decode_write_req(rq->write, out, errbuf, errlen);
        break;
    default:
        /* A controller API: its body (the matching one, checked above) is decoded and
         * validated by kq_ctl_request_from_envelope (include/kq/ctl_codec.h). */
        out->raft.from = KQ_RAFT_NO_ID;
        rc = 0;
        break;
    }
out:
    if (rc) {
        kq_request_free(out);
        raft_msg_defaults(&out->raft);
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* response decoder                                                                          */

void kq_response_free(kq_response *r)
{
    if (!r)
        return;
    if (r->priv_)
        kq__response__free_unpacked(r->priv_, NULL);
    free(r->batches);
    r->priv_ = NULL;
    r->batches = NULL;
    r->n_batches = 0;
    r->raft.u.fetch_resp.batches = NULL;
    r->raft.u.fetch_resp.n_batches = 0;
}

static int decode_batches(const Kq__FetchResponse *f, kq_response *out, char *errbuf, size_t errlen)
{
    size_t i;
    int64_t next = 0;

    if (f->n_batches > KQ_RAFT_MAX_BATCHES)
        return BAD("fetch response has %zu batches (max %d)", f->n_batches, KQ_RAFT_MAX_BATCHES);
    if (f->n_batches == 0)
        return 0;
    out->batches = calloc(f->n_batches, sizeof *out->batches);
    if (!out->batches)
        return fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding fetch response");
    for (i = 0; i < f->n_batches; i++) {
        const Kq__Batch *b = f->batches[i];
        kq_raft_batch *d = &out->batches[i];
        uint32_t crc;

        if (b->base_offset < 0)
            return BAD("fetch batch %zu base_offset %lld is negative", i,
                       (long long)b->base_offset);
        if (b->epoch < 0)
            return BAD("fetch batch %zu epoch %d is negative", i, b->epoch);
        if (b->count <= 0 || b->count > KQ_CODEC_MAX_BATCH_COUNT)
            return BAD("fetch batch %zu count %d is out of range 1..%d", i, b->count,
                       KQ_CODEC_MAX_BATCH_COUNT);
        if (b->base_offset > INT64_MAX - b->count)
            return BAD("fetch batch %zu base_offset %lld + count %d overflows", i,
                       (long long)b->base_offset, b->count);
        if (i > 0 && b->base_offset != next)
            return BAD("fetch batch %zu base_offset %lld does not follow the previous batch "
                       "(expected %lld)",
                       i, (long long)b->base_offset, (long long)next);
        if (b->records.len < (size_t)b->count)
            return BAD("fetch batch %zu holds %zu bytes, too few for %d records", i, b->records.len,
                       b->count);
        crc = kq_crc32c(0, b->records.data, b->records.len);
        if (crc != b->crc32c)
            return fail(errbuf, errlen, KQ_ERR_CORRUPT_MESSAGE,
                        "fetch batch %zu at offset %lld: crc32c 0x%08x does not match the "
                        "records (0x%08x)",
                        i, (long long)b->base_offset, b->crc32c, crc);
        next = b->base_offset + b->count;
        d->base_offset = b->base_offset;
        d->epoch = b->epoch;
        d->count = b->count;
        d->kind = KQ_RAFT_BATCH_FETCHED;
        d->data = b->records.data;
        d->len = b->records.len;
        d->crc32c = b->crc32c;
    }
    out->n_batches = f->n_batches;
    return 0;
}

static int decode_fetch_resp(const Kq__FetchResponse *f, kq_response *out, char *errbuf,
                             size_t errlen)
{
    kq_raft_msg *m = &out->raft;
    int rc = check_leader("fetch response", f->leader_id, f->leader_epoch, errbuf, errlen);

    if (rc)
        return rc;
    if (f->high_watermark < -1)
        return BAD("fetch response high_watermark %lld is invalid", (long long)f->high_watermark);
    if (f->log_start_offset < 0)
        return BAD("fetch response log_start_offset %lld is negative",
                   (long long)f->log_start_offset);
    if (f->diverging_epoch) {
        if (f->diverging_epoch->epoch < 0)
            return BAD("fetch response diverging epoch %d is negative", f->diverging_epoch->epoch);
        if (f->diverging_epoch->end_offset < 0)
            return BAD("fetch response diverging end_offset %lld is negative",
                       (long long)f->diverging_epoch->end_offset);
    }
    if (f->snapshot_id) {
        if (f->snapshot_id->end_offset <= 0 || f->snapshot_id->epoch < 0)
            return BAD("fetch response snapshot_id %lld-%d is invalid",
                       (long long)f->snapshot_id->end_offset, f->snapshot_id->epoch);
        if (f->diverging_epoch || f->n_batches > 0)
            return BAD("fetch response with a snapshot_id also carries %s",
                       f->diverging_epoch ? "a diverging epoch" : "records");
        m->u.fetch_resp.snapshot = true;
        m->u.fetch_resp.snapshot_id.end_offset = f->snapshot_id->end_offset;
        m->u.fetch_resp.snapshot_id.epoch = f->snapshot_id->epoch;
    }
    rc = decode_batches(f, out, errbuf, errlen);
    if (rc)
        return rc;
    m->type = KQ_RAFT_FETCH_RESP;
    m->leader_id = f->leader_id;
    m->epoch = f->leader_epoch;
    m->u.fetch_resp.high_watermark = f->high_watermark;
    m->u.fetch_resp.log_start_offset = f->log_start_offset;
    if (f->diverging_epoch) {
        m->u.fetch_resp.diverging = true;
        m->u.fetch_resp.diverging_epoch = f->diverging_epoch->epoch;
        m->u.fetch_resp.diverging_end_offset = f->diverging_epoch->end_offset;
    }
    if (out->n_batches > 0) {
        const kq_raft_batch *last = &out->batches[out->n_batches - 1];

        m->u.fetch_resp.records_from = out->batches[0].base_offset;
        m->u.fetch_resp.records_to = last->base_offset + last->count;
    }
    m->u.fetch_resp.batches = out->batches;
    m->u.fetch_resp.n_batches = out->n_batches;
    return 0;
}

static int decode_fetch_snapshot_resp(const Kq__FetchSnapshotResponse *f, kq_response *out,
                                      char *errbuf, size_t errlen)
{
    kq_raft_msg *m = &out->raft;
    int rc = check_leader("fetch_snapshot response", f->leader_id, f->leader_epoch, errbuf, errlen);

    if (rc)
        return rc;
    if (!f->snapshot_id)
        return BAD("fetch_snapshot response has no snapshot_id");
    if (f->snapshot_id->end_offset < 0 || f->snapshot_id->epoch < 0)
        return BAD("fetch_snapshot response snapshot_id %lld-%d is negative",
                   (long long)f->snapshot_id->end_offset, f->snapshot_id->epoch);
    if (f->unaligned_records.len > KQ_CODEC_MAX_SNAPSHOT_CHUNK)
        return BAD("fetch_snapshot response chunk of %zu bytes is over the %d byte limit",
                   f->unaligned_records.len, KQ_CODEC_MAX_SNAPSHOT_CHUNK);
    if (f->position < 0)
        return BAD("fetch_snapshot response position %lld is negative", (long long)f->position);
    if (out->error == 0) {
        if (f->size <= 0)
            return BAD("fetch_snapshot response size %lld is not positive", (long long)f->size);
        if (f->position > f->size - (int64_t)f->unaligned_records.len)
            return BAD("fetch_snapshot response chunk at %lld + %zu bytes runs past size %lld",
                       (long long)f->position, f->unaligned_records.len, (long long)f->size);
    } else if (f->size < -1) {
        return BAD("fetch_snapshot response size %lld is invalid", (long long)f->size);
    }
    m->type = KQ_RAFT_FETCH_SNAPSHOT_RESP;
    m->leader_id = f->leader_id;
    m->epoch = f->leader_epoch;
    m->u.fetch_snapshot_resp.snapshot_id.end_offset = f->snapshot_id->end_offset;
    m->u.fetch_snapshot_resp.snapshot_id.epoch = f->snapshot_id->epoch;
    m->u.fetch_snapshot_resp.size = f->size;
    m->u.fetch_snapshot_resp.position = f->position;
    m->u.fetch_snapshot_resp.data = f->unaligned_records.len ? f->unaligned_records.data : NULL;
    m->u.fetch_snapshot_resp.len = f->unaligned_records.len;
    return 0;
}

static bool is_base64url(const char *s)
{
    for (; *s; s++) {
        char c = *s;

        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
    }
    return true;
}

static int decode_replica(const char *what, size_t i, const Kq__ReplicaState *w,
                          kq_quorum_replica *r, char *errbuf, size_t errlen)
{
    size_t n = bounded_len(w->directory_id, KQ_CODEC_DIRECTORY_ID_LEN);

    if (w->replica_id < -1)
        return BAD("describe %s %zu replica_id %d is invalid", what, i, w->replica_id);
    if ((n != 0 && n != KQ_CODEC_DIRECTORY_ID_LEN) || !is_base64url(w->directory_id))
        return BAD("describe %s %zu directory_id is not a 22-character uuid", what, i);
    if (w->log_end_offset < -1)
        return BAD("describe %s %zu log_end_offset %lld is invalid", what, i,
                   (long long)w->log_end_offset);
    if (w->last_fetch_timestamp < -1 || w->last_caught_up_timestamp < -1)
        return BAD("describe %s %zu has an invalid timestamp", what, i);
    r->id = w->replica_id;
    copy_str(r->directory_id, sizeof r->directory_id, w->directory_id);
    r->log_end_offset = w->log_end_offset;
    r->last_fetch_timestamp = w->last_fetch_timestamp;
    r->last_caught_up_timestamp = w->last_caught_up_timestamp;
    return 0;
}

static int decode_describe_resp(const Kq__DescribeQuorumResponse *w, kq_quorum_description *d,
                                char *errbuf, size_t errlen)
{
    size_t i;
    int rc;

    if (bounded_len(w->cluster_id, KQ_CODEC_MAX_CLUSTER_ID) > KQ_CODEC_MAX_CLUSTER_ID)
        return BAD("describe cluster_id is longer than %d bytes", KQ_CODEC_MAX_CLUSTER_ID);
    rc = check_leader("describe", w->leader_id, w->leader_epoch, errbuf, errlen);
    if (rc)
        return rc;
    if (w->high_watermark < -1)
        return BAD("describe high_watermark %lld is invalid", (long long)w->high_watermark);
    if (w->n_current_voters > KQ_RAFT_MAX_VOTERS)
        return BAD("describe has %zu voters (max %d)", w->n_current_voters, KQ_RAFT_MAX_VOTERS);
    if (w->n_observers > KQ_RAFT_MAX_OBSERVERS)
        return BAD("describe has %zu observers (max %d)", w->n_observers, KQ_RAFT_MAX_OBSERVERS);
    if (w->n_nodes > KQ_RAFT_MAX_VOTERS)
        return BAD("describe has %zu node endpoints (max %d)", w->n_nodes, KQ_RAFT_MAX_VOTERS);
    copy_str(d->cluster_id, sizeof d->cluster_id, w->cluster_id);
    d->leader_id = w->leader_id;
    d->leader_epoch = w->leader_epoch;
    d->high_watermark = w->high_watermark;
    for (i = 0; i < w->n_current_voters; i++) {
        rc = decode_replica("voter", i, w->current_voters[i], &d->voters[i], errbuf, errlen);
        if (rc)
            return rc;
    }
    d->n_voters = (int)w->n_current_voters;
    for (i = 0; i < w->n_observers; i++) {
        rc = decode_replica("observer", i, w->observers[i], &d->observers[i], errbuf, errlen);
        if (rc)
            return rc;
    }
    d->n_observers = (int)w->n_observers;
    for (i = 0; i < w->n_nodes; i++) {
        const Kq__NodeEndpoint *n = w->nodes[i];

        if (n->node_id < -1)
            return BAD("describe node %zu id %d is invalid", i, n->node_id);
        if (bounded_len(n->listener, KQ_CODEC_MAX_LISTENER) > KQ_CODEC_MAX_LISTENER)
            return BAD("describe node %zu listener is longer than %d bytes", i,
                       KQ_CODEC_MAX_LISTENER);
        if (bounded_len(n->host, KQ_CODEC_MAX_ENDPOINT - 1) > KQ_CODEC_MAX_ENDPOINT - 1)
            return BAD("describe node %zu host is longer than %d bytes", i,
                       KQ_CODEC_MAX_ENDPOINT - 1);
        if (n->port < 0 || n->port > 65535)
            return BAD("describe node %zu port %d is out of range 0..65535", i, n->port);
        d->nodes[i].id = n->node_id;
        copy_str(d->nodes[i].listener, sizeof d->nodes[i].listener, n->listener);
        copy_str(d->nodes[i].host, sizeof d->nodes[i].host, n->host);
        d->nodes[i].port = n->port;
    }
    d->n_nodes = (int)w->n_nodes;
    return 0;
}

static kq_raft_msg_type raft_resp_type(uint32_t api_key)
{
    switch (api_key) {
    case KQ_API_VOTE:
        return KQ_RAFT_VOTE_RESP;
    case KQ_API_BEGIN_QUORUM_EPOCH:
        return KQ_RAFT_BEGIN_EPOCH_RESP;
    case KQ_API_END_QUORUM_EPOCH:
        return KQ_RAFT_END_EPOCH_RESP;
    case KQ_API_FETCH:
        return KQ_RAFT_FETCH_RESP;
    case KQ_API_FETCH_SNAPSHOT:
        return KQ_RAFT_FETCH_SNAPSHOT_RESP;
    default:
        return 0;
    }
}

int kq_codec_decode_response(const uint8_t *buf, size_t len, int32_t from, kq_response *out,
                             char *errbuf, size_t errlen)
{
    Kq__Response *rs;
    const char *name;
    int want, rc;

    if (!out)
        return fail(errbuf, errlen, KQ_ERR_INVALID_REQUEST, "no output for decoded response");
    memset(out, 0, sizeof *out);
    out->leader_id = -1;
    out->leader_epoch = -1;
    out->write_base_offset = -1;
    out->write_epoch = -1;
    out->describe.leader_id = -1;
    out->describe.leader_epoch = -1;
    out->describe.high_watermark = -1;
    raft_msg_defaults(&out->raft);
    if (!buf && len > 0)
        return fail(errbuf, errlen, KQ_ERR_MALFORMED, "response does not parse (no buffer)");

    rs = (Kq__Response *)kq_pb_unpack(&kq__response__descriptor, buf ? buf : empty_input, len,
                                      KQ_PB_ANSWER, &rc, errbuf, errlen);
    if (!rs && rc == KQ_ERR_MALFORMED)
        return fail(errbuf, errlen, rc, "response does not parse (%zu bytes)", len);
    if (!rs)
        return rc;
    out->priv_ = rs;
    out->api_key = rs->api_key;

    name = api_name(rs->api_key);
    if (!name) {
        rc = BAD("response for unknown api key %u", rs->api_key);
        goto out;
    }
    if (!kq_pb_strings_ok(&kq__response__descriptor, buf ? buf : empty_input, len)) {
        rc = BAD("%s response has a string with a NUL byte", name);
        goto out;
    }
    if (rs->error_code < 0) {
        rc = BAD("%s response error_code %d is negative", name, rs->error_code);
        goto out;
    }
    if (bounded_len(rs->error_message, KQ_CODEC_MAX_ERROR_MESSAGE) > KQ_CODEC_MAX_ERROR_MESSAGE) {
        rc = BAD("%s response error_message is longer than %d bytes", name,
                 KQ_CODEC_MAX_ERROR_MESSAGE);
        goto out;
    }
    if (rs->has_leader_id && rs->leader_id < -1) {
        rc = BAD("%s response leader hint %d is invalid", name, rs->leader_id);
        goto out;
    }
    if (rs->has_leader_epoch && rs->leader_epoch < -1) {
        rc = BAD("%s response leader epoch hint %d is invalid", name, rs->leader_epoch);
        goto out;
    }
    if (bounded_len(rs->leader_endpoint, KQ_CODEC_MAX_ENDPOINT - 1) > KQ_CODEC_MAX_ENDPOINT - 1) {
        rc = BAD("%s response leader_endpoint is longer than %d bytes", name,
                 KQ_CODEC_MAX_ENDPOINT - 1);
        goto out;
    }
    out->error = rs->error_code;
    copy_str(out->error_message, sizeof out->error_message, rs->error_message);
    if (rs->has_leader_id)
        out->leader_id = rs->leader_id;
    if (rs->has_leader_epoch)
        out->leader_epoch = rs->leader_epoch;
    copy_str(out->leader_endpoint, sizeof out->leader_endpoint, rs->leader_endpoint);

    want = body_case_for_api(rs->api_key);
    if (!want) {
        rc = BAD("%s is not supported", name);
        goto out;
    }
    if (rs->body_case == KQ__RESPONSE__BODY__NOT_SET && rs->error_code == 0) {
        rc = BAD("%s response has neither an error nor a body", name);
        goto out;
    }
    if (rs->body_case != KQ__RESPONSE__BODY__NOT_SET && (int)rs->body_case != want) {
        rc = BAD("%s response carries a %s body", name, body_name(rs->body_case));
        goto out;
    }

    out->raft.type = raft_resp_type(rs->api_key);
    out->raft.from = from;
    out->raft.error = rs->error_code;
    out->raft.leader_id = out->leader_id;
    out->raft.epoch = out->leader_epoch;
    rc = 0;
    switch (rs->body_case) {
    case KQ__RESPONSE__BODY_VOTE:
        rc = check_leader("vote response", rs->vote->leader_id, rs->vote->leader_epoch, errbuf,
                          errlen);
        out->raft.leader_id = rs->vote->leader_id;
        out->raft.epoch = rs->vote->leader_epoch;
        out->raft.u.vote_resp.granted = rs->vote->vote_granted != 0;
        break;
    case KQ__RESPONSE__BODY_BEGIN_QUORUM_EPOCH:
        rc = check_leader("begin_quorum_epoch response", rs->begin_quorum_epoch->leader_id,
                          rs->begin_quorum_epoch->leader_epoch, errbuf, errlen);
        out->raft.leader_id = rs->begin_quorum_epoch->leader_id;
        out->raft.epoch = rs->begin_quorum_epoch->leader_epoch;
        break;
    case KQ__RESPONSE__BODY_END_QUORUM_EPOCH:
        rc = check_leader("end_quorum_epoch response", rs->end_quorum_epoch->leader_id,
                          rs->end_quorum_epoch->leader_epoch, errbuf, errlen);
        out->raft.leader_id = rs->end_quorum_epoch->leader_id;
        out->raft.epoch = rs->end_quorum_epoch->leader_epoch;
        break;
    case KQ__RESPONSE__BODY_FETCH:
        rc = decode_fetch_resp(rs->fetch, out, errbuf, errlen);
        break;
    case KQ__RESPONSE__BODY_FETCH_SNAPSHOT:
        rc = decode_fetch_snapshot_resp(rs->fetch_snapshot, out, errbuf, errlen);
        break;
    case KQ__RESPONSE__BODY_DESCRIBE_QUORUM:
        rc = decode_describe_resp(rs->describe_quorum, &out->describe, errbuf, errlen);
        break;
    case KQ__RESPONSE__BODY_WRITE:
        if (rs->write->base_offset < 0)
            rc = BAD("write response base_offset %lld is negative",
                     (long long)rs->write->base_offset);
        else if (rs->write->epoch < 0)
            rc = BAD("write response epoch %d is negative", rs->write->epoch);
        out->write_base_offset = rs->write->base_offset;
        out->write_epoch = rs->write->epoch;
        break;
    default:
        break; /* error response without a body */
    }
out:
    if (rc) {
        kq_response_free(out);
        raft_msg_defaults(&out->raft);
        memset(&out->describe, 0, sizeof out->describe);
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* records                                                                                   */

static int append_record(kq_buf *b, const Kq__Record *rec)
{
    uint8_t hdr[10];
    size_t n, h;
    uint8_t *p;

    if (!b || (!b->data && b->len > 0))
        return KQ_ERR_INVALID_REQUEST;
    n = kq__record__get_packed_size(rec);
    h = kq_pb_put_varint(hdr, n);
    if (b->len > SIZE_MAX - n - h)
        return KQ_ERR_NOMEM;
    p = realloc(b->data, b->len + h + n);
    if (!p)
        return KQ_ERR_NOMEM;
    memcpy(p + b->len, hdr, h);
    kq__record__pack(rec, p + b->len + h);
    b->data = p;
    b->len += h + n;
    return 0;
}

int kq_codec_append_leader_change(kq_buf *b, int32_t leader_id, const int32_t *voters, int n_voters,
                                  const int32_t *granting, int n_granting)
{
    Kq__Record rec = KQ__RECORD__INIT;
    Kq__LeaderChangeRecord lc = KQ__LEADER_CHANGE_RECORD__INIT;

    if (n_voters < 0 || n_granting < 0 || (n_voters > 0 && !voters) ||
        (n_granting > 0 && !granting))
        return KQ_ERR_INVALID_REQUEST;
    lc.leader_id = leader_id;
    lc.n_voters = (size_t)n_voters;
    lc.voters = (int32_t *)voters;
    lc.n_granting_voters = (size_t)n_granting;
    lc.granting_voters = (int32_t *)granting;
    rec.body_case = KQ__RECORD__BODY_LEADER_CHANGE;
    rec.leader_change = &lc;
    return append_record(b, &rec);
}

int kq_codec_append_noop(kq_buf *b)
{
    Kq__Record rec = KQ__RECORD__INIT;
    Kq__NoOpRecord noop = KQ__NO_OP_RECORD__INIT;

    rec.body_case = KQ__RECORD__BODY_NOOP;
    rec.noop = &noop;
    return append_record(b, &rec);
}

int kq_codec_append_opaque(kq_buf *b, const uint8_t *data, size_t len)
{
    Kq__Record rec = KQ__RECORD__INIT;
    Kq__OpaqueRecord op = KQ__OPAQUE_RECORD__INIT;

    if (!data && len > 0)
        return KQ_ERR_INVALID_REQUEST;
    op.data.data = (uint8_t *)data;
    op.data.len = len;
    rec.body_case = KQ__RECORD__BODY_OPAQUE;
    rec.opaque = &op;
    return append_record(b, &rec);
}

/* Append s to desc at *pos if it fits while leaving room for "..." and the NUL; otherwise
 * append "..." once and mark desc full (*pos = cap). Invariant: *pos + 4 <= cap or *pos == cap. */
static bool put_str(char *desc, size_t cap, size_t *pos, const char *s)
{
    size_t n = strlen(s);

    if (*pos >= cap)
        return false;
    if (*pos + n + 4 > cap) {
        memcpy(desc + *pos, "...", 4);
        *pos = cap;
        return false;
    }
    memcpy(desc + *pos, s, n + 1);
    *pos += n;
    return true;
}

/* Append " label=a,b,c" to desc. */
static void render_ids(char *desc, size_t cap, size_t *pos, const char *label, const int32_t *ids,
                       size_t n)
{
    char item[32];
    size_t i;

    snprintf(item, sizeof item, " %s=", label);
    if (!put_str(desc, cap, pos, item))
        return;
    for (i = 0; i < n; i++) {
        snprintf(item, sizeof item, "%s%d", i ? "," : "", ids[i]);
        if (!put_str(desc, cap, pos, item))
            return;
    }
}

/* A record other than the three this module renders (e.g. the metadata records that
 * include/kq/records.h decodes): its body's name from the schema, as "Topic bytes=23", or
 * "Unknown bytes=N" for a body this build does not know. */
static void describe_other(const Kq__Record *rec, size_t n, char *desc, size_t cap)
{
    const ProtobufCFieldDescriptor *f = NULL;
    const ProtobufCMessageDescriptor *md;
    size_t len;

    if (rec->body_case != KQ__RECORD__BODY__NOT_SET)
        f = protobuf_c_message_descriptor_get_field(&kq__record__descriptor,
                                                    (unsigned)rec->body_case);
    md = f && f->type == PROTOBUF_C_TYPE_MESSAGE ? f->descriptor : NULL;
    if (!md || !md->short_name) {
        snprintf(desc, cap, "Unknown bytes=%zu", n);
        return;
    }
    len = strlen(md->short_name);
    if (len > 6 && !strcmp(md->short_name + len - 6, "Record"))
        len -= 6;
    snprintf(desc, cap, "%.*s bytes=%zu", (int)len, md->short_name, n);
}

int kq_codec_walk_records(const uint8_t *records, size_t len, int64_t base_offset, int32_t count,
                          kq_record_cb cb, void *arg)
{
    char desc[512];
    size_t pos = 0;
    int32_t i;
    int rc = 0;

    if (count < 0 || (!records && len > 0) || !cb || base_offset > INT64_MAX - count)
        return KQ_ERR_MALFORMED;
    for (i = 0; i < count; i++) {
        uint64_t n;
        Kq__Record *rec;
        kq_record_type type = KQ_RECORD_UNKNOWN;
        size_t dpos = 0;

        if (!kq_pb_read_varint(records, len, &pos, &n) || n > len - pos)
            return KQ_ERR_MALFORMED;
        rec = (Kq__Record *)kq_pb_unpack(&kq__record__descriptor, n ? records + pos : empty_input,
                                         (size_t)n, KQ_PB_REQUEST, &rc, NULL, 0);
        if (!rec)
            return KQ_ERR_MALFORMED;
        pos += (size_t)n;
        switch (rec->body_case) {
        case KQ__RECORD__BODY_LEADER_CHANGE:
            type = KQ_RECORD_LEADER_CHANGE;
            dpos = (size_t)snprintf(desc, sizeof desc, "LeaderChange leader=%d",
                                    rec->leader_change->leader_id);
            render_ids(desc, sizeof desc, &dpos, "voters", rec->leader_change->voters,
                       rec->leader_change->n_voters);
            render_ids(desc, sizeof desc, &dpos, "granting", rec->leader_change->granting_voters,
                       rec->leader_change->n_granting_voters);
            break;
        case KQ__RECORD__BODY_NOOP:
            type = KQ_RECORD_NOOP;
            snprintf(desc, sizeof desc, "NoOp");
            break;
        case KQ__RECORD__BODY_OPAQUE:
            type = KQ_RECORD_OPAQUE;
            snprintf(desc, sizeof desc, "Opaque bytes=%zu", rec->opaque->data.len);
            break;
        default:
            describe_other(rec, (size_t)n, desc, sizeof desc);
            break;
        }
        kq__record__free_unpacked(rec, NULL);
        rc = cb(arg, base_offset + i, type, desc);
        if (rc)
            return rc;
    }
    if (pos != len)
        return KQ_ERR_MALFORMED;
    return 0;
}
