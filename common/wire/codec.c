/*
 * kq_codec: protobuf-c wire messages <-> plain C structs, with validation of everything that
 * is decoded (see include/kq/codec.h for the contract and ownership rules).
 *
 * Every body and the answer envelope is a wire table (common/wire/wire.h) over the Raft core's
 * message, kq_request or kq_response, with the limits next to each field; the rules that span
 * fields (vote epochs, a Fetch's sender, batch order and checksums, snapshot chunks) follow
 * each decode. Encoders point the protobuf-c structs at the caller's data (never copying it)
 * and pack them into one malloc'd buffer; decoders keep the unpacked tree and an arena in
 * priv_ (kq_wire_owned) so that pointers into them stay valid.
 */
#include "kq/codec.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/records.h"
#include "kq/util.h"
#include "kq_record.pb-c.h"
#include "kq_rpc.pb-c.h"
#include "kq_rpc_tables.h"
#include "pb_wire.h"
#include "wire.h"

#define KQ_CODEC_MAX_ERROR_MESSAGE 255
#define KQ_CODEC_DIRECTORY_ID_LEN 22

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

/* The name of an API this codec decodes (the quorum and controller APIs; data-plane bodies
 * are kq_datacodec's), or NULL. */
static const char *api_name(uint32_t key)
{
    const kq_api_info *api = kq_api_find(key);

    return api && api->kind != KQ_API_KIND_DATA ? api->name : NULL;
}

static const char *body_name(int body_case)
{
    const kq_api_info *api = kq_api_by_body(body_case);

    return api ? api->body : "unknown";
}

/* ---------------------------------------------------------------------------------------- */
/* the tables                                                                                */

/* The quorum APIs: their Raft message types and their request and answer tables, generated
 * from proto/kq_rpc.proto over the Raft core's message (requests, the envelope's sender is its
 * `from`) and kq_response (answers, the Raft message in `raft`). */
static const struct quorum_api {
    uint32_t api_key;
    kq_raft_msg_type req_type, resp_type;
    const kq_wire_msg *req, *resp;
} quorum_apis[] = {
    {KQ_API_VOTE, KQ_RAFT_VOTE_REQ, KQ_RAFT_VOTE_RESP, &kq_wt_vote_request, &kq_wt_vote_response},
    {KQ_API_BEGIN_QUORUM_EPOCH, KQ_RAFT_BEGIN_EPOCH_REQ, KQ_RAFT_BEGIN_EPOCH_RESP,
     &kq_wt_begin_quorum_epoch_request, &kq_wt_begin_quorum_epoch_response},
    {KQ_API_END_QUORUM_EPOCH, KQ_RAFT_END_EPOCH_REQ, KQ_RAFT_END_EPOCH_RESP,
     &kq_wt_end_quorum_epoch_request, &kq_wt_end_quorum_epoch_response},
    {KQ_API_FETCH, KQ_RAFT_FETCH_REQ, KQ_RAFT_FETCH_RESP, &kq_wt_fetch_request,
     &kq_wt_fetch_response},
    {KQ_API_FETCH_SNAPSHOT, KQ_RAFT_FETCH_SNAPSHOT_REQ, KQ_RAFT_FETCH_SNAPSHOT_RESP,
     &kq_wt_fetch_snapshot_request, &kq_wt_fetch_snapshot_response},
    {KQ_API_ADD_RAFT_VOTER, KQ_RAFT_ADD_VOTER_REQ, KQ_RAFT_ADD_VOTER_RESP,
     &kq_wt_add_raft_voter_request, &kq_wt_add_raft_voter_response},
    {KQ_API_REMOVE_RAFT_VOTER, KQ_RAFT_REMOVE_VOTER_REQ, KQ_RAFT_REMOVE_VOTER_RESP,
     &kq_wt_remove_raft_voter_request, &kq_wt_remove_raft_voter_response},
    {KQ_API_UPDATE_RAFT_VOTER, KQ_RAFT_UPDATE_VOTER_REQ, KQ_RAFT_UPDATE_VOTER_RESP,
     &kq_wt_update_raft_voter_request, &kq_wt_update_raft_voter_response},
    {KQ_API_DESCRIBE_QUORUM, 0, 0, &kq_wt_describe_quorum_request, &kq_wt_describe_quorum_response},
    {KQ_API_WRITE, 0, 0, &kq_wt_write_request, &kq_wt_write_response},
};

/* A leader sends the batches its host read (kq_codec_batch) after the rest of its Fetch
 * answer, through this second view of FetchResponse.batches (the Batch table reads them into
 * the Raft core's kq_raft_batch). */
typedef struct sent_batches {
    const kq_codec_batch *batches;
    size_t n;
} sent_batches;
#define CB(f) .off = offsetof(kq_codec_batch, f)
static const kq_wire_field codec_batch_f[] = {
    {.name = "base_offset", .kind = KQ_WK_I64, CB(base_offset), .max = INT64_MAX},
    {.name = "epoch", .kind = KQ_WK_I32, CB(epoch), .max = INT32_MAX},
    {.name = "count", .kind = KQ_WK_I32, CB(count), .min = 1, .max = KQ_CODEC_MAX_BATCH_COUNT},
    {.name = "crc32c", .kind = KQ_WK_I32, CB(crc32c), .max = UINT32_MAX},
    {.name = "records",
     .kind = KQ_WK_BYTES,
     CB(records),
     .aux = offsetof(kq_codec_batch, len),
     .max = INT64_MAX},
};
#undef CB
static const kq_wire_msg codec_batch_m = {&kq__batch__descriptor, sizeof(kq_codec_batch),
                                          codec_batch_f,
                                          sizeof codec_batch_f / sizeof codec_batch_f[0], false};
static const kq_wire_field sent_batches_f[] = {
    {.name = "batches",
     .kind = KQ_WK_MSGS,
     .flags = KQ_WF_SIZE,
     .off = offsetof(sent_batches, batches),
     .aux = offsetof(sent_batches, n),
     .max = KQ_RAFT_MAX_BATCHES,
     .sub = &codec_batch_m},
};
static const kq_wire_msg sent_batches_m = {&kq__fetch_response__descriptor, sizeof(sent_batches),
                                           sent_batches_f,
                                           sizeof sent_batches_f / sizeof sent_batches_f[0], true};

/* BeginQuorumEpochRequest's leader endpoint, a second view of the request over
 * kq_codec_endpoint (the first is the Raft core's message). */
static const kq_wire_field begin_endpoint_f[] = {
    {.name = "leader_host",
     .kind = KQ_WK_TEXT,
     .flags = KQ_WF_STRICT,
     .off = offsetof(kq_codec_endpoint, host),
     .max = KQ_CODEC_MAX_ENDPOINT - 1},
    {.name = "leader_port",
     .kind = KQ_WK_I32,
     .flags = KQ_WF_ABSENT,
     .off = offsetof(kq_codec_endpoint, port),
     .min = 0,
     .max = 65535,
     .absent = 0},
};
static const kq_wire_msg begin_endpoint_m = {
    &kq__begin_quorum_epoch_request__descriptor, sizeof(kq_codec_endpoint), begin_endpoint_f,
    sizeof begin_endpoint_f / sizeof begin_endpoint_f[0], true};

const kq_wire_msg *const kq_wire_quorum_tables[] = {
    &kq_wt_vote_request,
    &kq_wt_begin_quorum_epoch_request,
    &kq_wt_end_quorum_epoch_request,
    &kq_wt_fetch_request,
    &kq_wt_fetch_snapshot_request,
    &kq_wt_write_request,
    &kq_wt_add_raft_voter_request,
    &kq_wt_remove_raft_voter_request,
    &kq_wt_update_raft_voter_request,
    &kq_wt_response,
    &kq_wt_vote_response,
    &kq_wt_begin_quorum_epoch_response,
    &kq_wt_fetch_response,
    &kq_wt_fetch_snapshot_response,
    &kq_wt_describe_quorum_response,
    &kq_wt_write_response,
    &sent_batches_m,
    &begin_endpoint_m,
    NULL,
};

static const struct quorum_api *quorum_api(uint32_t api_key, kq_raft_msg_type type)
{
    for (size_t i = 0; i < sizeof quorum_apis / sizeof quorum_apis[0]; i++)
        if (quorum_apis[i].api_key == api_key ||
            (type && (quorum_apis[i].req_type == type || quorum_apis[i].resp_type == type)))
            return &quorum_apis[i];
    return NULL;
}

/* The answer to AddRaftVoter, RemoveRaftVoter or UpdateRaftVoter (kq_raft_msg_is_voter_change;
 * their request bodies are a kq_codec_voter_req, the core's message points at the voter). */
static bool is_voter_answer(kq_raft_msg_type t)
{
    return kq_raft_msg_is_voter_change((kq_raft_msg_type)((int)t - 1)); /* answer = request + 1 */
}

static int check_cluster_id(const char *cluster_id)
{
    return cluster_id && strnlen(cluster_id, KQ_CODEC_MAX_CLUSTER_ID + 1) > KQ_CODEC_MAX_CLUSTER_ID
               ? KQ_ERR_INVALID_REQUEST
               : 0;
}

/* ---------------------------------------------------------------------------------------- */
/* request encoders                                                                          */

static int start(kq_buf *out)
{
    if (!out)
        return KQ_ERR_INVALID_REQUEST;
    out->data = NULL;
    out->len = 0;
    return 0;
}

int kq_codec_encode_raft_request(const kq_raft_msg *m, const char *cluster_id, kq_buf *out)
{
    return kq_codec_encode_raft_request_from(m, cluster_id, NULL, out);
}

int kq_codec_encode_raft_request_from(const kq_raft_msg *m, const char *cluster_id,
                                      const kq_codec_endpoint *ep, kq_buf *out)
{
    const struct quorum_api *q = m ? quorum_api(0, m->type) : NULL;
    const kq_raft_snapshot_id *sid;

    if (start(out) || !m || check_cluster_id(cluster_id) || !q || q->req_type != m->type)
        return KQ_ERR_INVALID_REQUEST;
    sid = &m->u.fetch_snapshot_req.snapshot_id;
    if (m->type == KQ_RAFT_FETCH_SNAPSHOT_REQ &&
        (m->u.fetch_snapshot_req.position < 0 || m->u.fetch_snapshot_req.max_bytes < 0 ||
         sid->end_offset < 0 || sid->epoch < 0))
        return KQ_ERR_INVALID_REQUEST;
    if (kq_raft_msg_is_voter_change(m->type)) {
        kq_codec_voter_req vr = {.epoch = m->type == KQ_RAFT_UPDATE_VOTER_REQ ? m->epoch : 0};

        if (!m->u.voter_req.voter || vr.epoch < 0)
            return KQ_ERR_INVALID_REQUEST;
        vr.voter = *m->u.voter_req.voter;
        return kq_wire_send(q->api_key, cluster_id, m->from, q->req, &vr, out);
    }
    if (m->type == KQ_RAFT_BEGIN_EPOCH_REQ && ep && ep->host[0]) {
        if (!memchr(ep->host, '\0', sizeof ep->host) || ep->port < 0 || ep->port > 65535)
            return KQ_ERR_INVALID_REQUEST;
        return kq_wire_send_view(q->api_key, cluster_id, m->from, q->req, m, &begin_endpoint_m, ep,
                                 out);
    }
    return kq_wire_send(q->api_key, cluster_id, m->from, q->req, m, out);
}

int kq_codec_encode_describe_request(const char *cluster_id, kq_buf *out)
{
    if (start(out) || check_cluster_id(cluster_id))
        return KQ_ERR_INVALID_REQUEST;
    return kq_wire_send(KQ_API_DESCRIBE_QUORUM, cluster_id, -1, &kq_wt_describe_quorum_request,
                        NULL, out);
}

int kq_codec_encode_write_request(const char *cluster_id, const uint8_t *const *records,
                                  const size_t *lens, size_t n, kq_buf *out)
{
    kq_request r = {
        .records = (const uint8_t **)records, .record_lens = (size_t *)lens, .n_records = n};

    if (start(out) || check_cluster_id(cluster_id) || n == 0 || n > KQ_CODEC_MAX_WRITE_RECORDS ||
        !records || !lens)
        return KQ_ERR_INVALID_REQUEST;
    for (size_t i = 0; i < n; i++)
        if (!records[i] && lens[i] > 0)
            return KQ_ERR_INVALID_REQUEST;
    return kq_wire_send(KQ_API_WRITE, cluster_id, -1, &kq_wt_write_request, &r, out);
}

/* ---------------------------------------------------------------------------------------- */
/* response encoders                                                                         */

/* Pack an answer for api_key: the envelope from v, and its body through m (NULL: none). */
static int send_response(uint32_t api_key, const kq_response *v, const kq_wire_msg *m,
                         const sent_batches *batches, kq_buf *out)
{
    Kq__Response rs = KQ__RESPONSE__INIT;
    kq_arena a = {0};
    int rc = kq_wire_encode(&kq_wt_response, v, &rs.base, &a);

    rs.api_key = api_key;
    if (!rc && m) {
        ProtobufCMessage **slot = kq_wire_body_slot(&kq__response__descriptor, &rs, api_key);

        rs.body_case = (Kq__Response__BodyCase)kq_api_find(api_key)->body_case;
        *slot = kq_wire_encode_new(m, v, &a, &rc);
        if (!rc && batches)
            rc = kq_wire_encode(&sent_batches_m, batches, *slot, &a);
    }
    if (!rc)
        rc = kq_wire_pack(&rs.base, out);
    kq_arena_free(&a);
    return rc;
}

int kq_codec_encode_raft_response(const kq_raft_msg *m, const kq_codec_batch *batches,
                                  size_t n_batches, kq_buf *out)
{
    const struct quorum_api *q = m ? quorum_api(0, m->type) : NULL;
    sent_batches sent = {batches, n_batches};
    kq_response v; /* only what the envelope and the body tables read is set (not describe) */

    if (start(out) || !m || !q || q->resp_type != m->type || n_batches > KQ_RAFT_MAX_BATCHES ||
        (n_batches > 0 && (!batches || m->type != KQ_RAFT_FETCH_RESP)))
        return KQ_ERR_INVALID_REQUEST;
    for (size_t i = 0; i < n_batches; i++)
        if (!batches[i].records && batches[i].len > 0)
            return KQ_ERR_INVALID_REQUEST;
    if (m->type == KQ_RAFT_FETCH_RESP && m->u.fetch_resp.snapshot &&
        (n_batches > 0 || m->u.fetch_resp.diverging || m->u.fetch_resp.snapshot_id.end_offset < 0 ||
         m->u.fetch_resp.snapshot_id.epoch < 0))
        return KQ_ERR_INVALID_REQUEST;
    if (m->type == KQ_RAFT_FETCH_SNAPSHOT_RESP) {
        const kq_raft_snapshot_id *sid = &m->u.fetch_snapshot_resp.snapshot_id;
        int64_t size = m->u.fetch_snapshot_resp.size, pos = m->u.fetch_snapshot_resp.position;
        size_t len = m->u.fetch_snapshot_resp.len;

        if (len > KQ_CODEC_MAX_SNAPSHOT_CHUNK || (!m->u.fetch_snapshot_resp.data && len > 0) ||
            sid->end_offset < 0 || sid->epoch < 0 || pos < 0 || size < -1 ||
            (m->error == 0 && (size <= 0 || pos > size - (int64_t)len)))
            return KQ_ERR_INVALID_REQUEST;
    }
    v.raft = *m;
    v.error_message[0] = v.leader_endpoint[0] = '\0';
    if (is_voter_answer(m->type) && m->error)
        kq_wire_clip(m->u.voter_resp.error_message, v.error_message, KQ_CODEC_MAX_ERROR_MESSAGE);
    v.batches = NULL;
    v.n_batches = 0;
    v.error = m->error;
    v.leader_id = m->leader_id < 0 ? -1 : m->leader_id;
    v.leader_epoch = m->epoch < 0 ? -1 : m->epoch;
    return send_response(q->api_key, &v, q->resp, n_batches ? &sent : NULL, out);
}

int kq_codec_encode_describe_response(const kq_quorum_description *d, kq_buf *out)
{
    kq_response v = {0};

    if (start(out) || !d)
        return KQ_ERR_INVALID_REQUEST;
    v.describe = *d;
    v.leader_id = v.leader_epoch = -1;
    return send_response(KQ_API_DESCRIBE_QUORUM, &v, &kq_wt_describe_quorum_response, NULL, out);
}

int kq_codec_encode_write_response(int64_t base_offset, int32_t epoch, kq_buf *out)
{
    kq_response v = {.leader_id = -1, .leader_epoch = -1};

    if (start(out))
        return KQ_ERR_INVALID_REQUEST;
    v.write_base_offset = base_offset;
    v.write_epoch = epoch;
    return send_response(KQ_API_WRITE, &v, &kq_wt_write_response, NULL, out);
}

int kq_codec_encode_error_response(uint32_t api_key, int error, const char *message,
                                   int32_t leader_id, int32_t leader_epoch,
                                   const char *leader_endpoint, kq_buf *out)
{
    kq_response v = {.error = error};

    if (start(out) || (leader_endpoint &&
                       strnlen(leader_endpoint, KQ_CODEC_MAX_ENDPOINT) > KQ_CODEC_MAX_ENDPOINT - 1))
        return KQ_ERR_INVALID_REQUEST;
    kq_wire_clip(message, v.error_message, KQ_CODEC_MAX_ERROR_MESSAGE);
    v.leader_id = leader_id < 0 ? -1 : leader_id;
    v.leader_epoch = leader_epoch < 0 ? -1 : leader_epoch;
    if (leader_endpoint)
        memcpy(v.leader_endpoint, leader_endpoint, strlen(leader_endpoint) + 1);
    return send_response(api_key, &v, NULL, NULL, out);
}

/* ---------------------------------------------------------------------------------------- */
/* request decoder                                                                           */

void kq_request_free(kq_request *r)
{
    if (!r)
        return;
    kq_wire_owned_free(r->priv_);
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

#define BAD(...) kq_wire_fail(errbuf, errlen, KQ_ERR_INVALID_REQUEST, __VA_ARGS__)

/* The rules of a Raft request that span fields. */
static int check_raft_request(const kq_raft_msg *m, const Kq__Request *rq, char *errbuf,
                              size_t errlen)
{
    switch ((int)m->type) {
    case KQ_RAFT_VOTE_REQ:
        if (m->u.vote_req.last_epoch >= m->epoch)
            return BAD("vote last_offset_epoch %d is not below candidate_epoch %d",
                       m->u.vote_req.last_epoch, m->epoch);
        return 0;
    case KQ_RAFT_END_EPOCH_REQ:
        for (int i = 0; i < m->u.end_req.n_preferred; i++)
            if (m->u.end_req.preferred[i] < -1)
                return BAD("end_quorum_epoch preferred successor %d is invalid",
                           m->u.end_req.preferred[i]);
        return 0;
    case KQ_RAFT_FETCH_REQ:
    case KQ_RAFT_FETCH_SNAPSHOT_REQ:
        if (m->from != rq->sender_id)
            return BAD("%s replica_id %d does not match sender_id %d",
                       m->type == KQ_RAFT_FETCH_REQ ? "fetch" : "fetch_snapshot", m->from,
                       rq->sender_id);
        return 0;
    default:
        return 0;
    }
}

int kq_codec_decode_request(const uint8_t *buf, size_t len, kq_request *out, char *errbuf,
                            size_t errlen)
{
    bool nul = false;
    kq_wire_owned *o;
    const struct quorum_api *q;
    Kq__Request *rq;
    ProtobufCMessage **body;
    const char *name;
    int rc;

    if (!out)
        return BAD("no output for decoded request");
    memset(out, 0, sizeof *out);
    out->sender_id = KQ_RAFT_NO_ID;
    raft_msg_defaults(&out->raft);
    if ((rc = kq_pb_unpack_request(buf, len, &rq, &out->api_key, &nul, errbuf, errlen)) != 0)
        return rc;
    if (!(o = calloc(1, sizeof *o))) {
        kq__request__free_unpacked(rq, NULL);
        return kq_wire_fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding a request");
    }
    o->msg = &rq->base;
    out->priv_ = o;
    out->api_key = rq->api_key;
    out->api_version = rq->api_version;
    if (rq->sender_id >= -1)
        out->sender_id = rq->sender_id;
    name = api_name(rq->api_key);
    body = name ? kq_wire_body_slot(&kq__request__descriptor, rq, rq->api_key) : NULL;
    q = quorum_api(rq->api_key, 0);
    if (!name)
        rc = BAD("unknown api key %u", rq->api_key);
    else if (rq->api_version != 0)
        rc = kq_wire_fail(errbuf, errlen, KQ_ERR_UNSUPPORTED_VERSION,
                          "%s version %u is not supported (only version 0)", name, rq->api_version);
    else if (nul)
        rc = BAD("%s request has a string with a NUL byte", name);
    else if (check_cluster_id(rq->cluster_id))
        rc = BAD("%s request cluster_id is longer than %d bytes", name, KQ_CODEC_MAX_CLUSTER_ID);
    if (!rc) /* kept from here on, also for an error answer */
        memcpy(out->cluster_id, rq->cluster_id, strlen(rq->cluster_id) + 1);
    if (!rc && rq->sender_id < -1)
        rc = BAD("%s request sender_id %d is invalid", name, rq->sender_id);
    else if (!rc && rq->body_case == KQ__REQUEST__BODY__NOT_SET)
        rc = BAD("%s request has no body", name);
    else if (!rc && (int)rq->body_case != kq_api_find(rq->api_key)->body_case)
        rc = BAD("%s request carries a %s body", name, body_name(rq->body_case));
    if (!rc) {
        if (q && kq_raft_msg_is_voter_change(q->req_type)) { /* the body, then the core's message */
            out->raft.type = q->req_type;
            out->raft.from = rq->sender_id;
            rc = kq_wire_decode(q->req, *body, &out->voter_req, &o->a, errbuf, errlen);
            out->raft.epoch = out->voter_req.epoch;
            out->raft.u.voter_req.voter = &out->voter_req.voter;
        } else if (q && q->req_type) { /* a Raft request: into the core's message */
            out->raft.type = q->req_type;
            out->raft.from = rq->sender_id;
            rc = kq_wire_decode(q->req, *body, &out->raft, &o->a, errbuf, errlen);
            if (!rc && q->req_type == KQ_RAFT_BEGIN_EPOCH_REQ)
                rc = kq_wire_decode(&begin_endpoint_m, *body, &out->leader_endpoint, &o->a, errbuf,
                                    errlen);
            if (!rc)
                rc = check_raft_request(&out->raft, rq, errbuf, errlen);
        } else if (rq->api_key == KQ_API_WRITE) {
            rc = kq_wire_decode(&kq_wt_write_request, *body, out, &o->a, errbuf, errlen);
        }
        /* A controller API's body is decoded and validated by kq_ctl_request_from_envelope
         * (include/kq/ctl_codec.h); DescribeQuorum has none. */
    }
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
    kq_wire_owned_free(r->priv_);
    r->priv_ = NULL;
    r->batches = NULL;
    r->n_batches = 0;
    r->raft.u.fetch_resp.batches = NULL;
    r->raft.u.fetch_resp.n_batches = 0;
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

static int check_replicas(const char *what, const kq_quorum_replica *r, int n, char *errbuf,
                          size_t errlen)
{
    for (int i = 0; i < n; i++) {
        size_t len = strlen(r[i].directory_id);

        if ((len != 0 && len != KQ_CODEC_DIRECTORY_ID_LEN) || !is_base64url(r[i].directory_id))
            return BAD("describe %s %d directory_id is not a 22-character uuid", what, i);
    }
    return 0;
}

/* A Fetch answer's rules that span fields: a snapshot comes alone; the batches follow each
 * other, hold at least a byte per record and match their checksums. */
static int check_fetch_response(kq_response *out, char *errbuf, size_t errlen)
{
    kq_raft_msg *m = &out->raft;

    if (m->u.fetch_resp.snapshot && (m->u.fetch_resp.diverging || out->n_batches > 0))
        return BAD("fetch response with a snapshot_id also carries %s",
                   m->u.fetch_resp.diverging ? "a diverging epoch" : "records");
    for (size_t i = 0; i < out->n_batches; i++) {
        kq_raft_batch *b = &out->batches[i];
        uint32_t crc;

        b->kind = KQ_RAFT_BATCH_FETCHED;
        if (b->base_offset > INT64_MAX - b->count)
            return BAD("fetch batch %zu base_offset %lld + count %d overflows", i,
                       (long long)b->base_offset, b->count);
        if (i > 0 && b->base_offset != b[-1].base_offset + b[-1].count)
            return BAD("fetch batch %zu base_offset %lld does not follow the previous batch "
                       "(expected %lld)",
                       i, (long long)b->base_offset, (long long)(b[-1].base_offset + b[-1].count));
        if (b->len < (size_t)b->count)
            return BAD("fetch batch %zu holds %zu bytes, too few for %d records", i, b->len,
                       b->count);
        if ((crc = kq_crc32c(0, b->data, b->len)) != b->crc32c)
            return kq_wire_fail(errbuf, errlen, KQ_ERR_CORRUPT_MESSAGE,
                                "fetch batch %zu at offset %lld: crc32c 0x%08x does not match "
                                "the records (0x%08x)",
                                i, (long long)b->base_offset, b->crc32c, crc);
    }
    if (out->n_batches > 0) {
        m->u.fetch_resp.records_from = out->batches[0].base_offset;
        m->u.fetch_resp.records_to =
            out->batches[out->n_batches - 1].base_offset + out->batches[out->n_batches - 1].count;
    }
    m->u.fetch_resp.batches = out->batches;
    m->u.fetch_resp.n_batches = out->n_batches;
    return 0;
}

static int check_response(kq_response *out, char *errbuf, size_t errlen)
{
    const kq_raft_msg *m = &out->raft;
    int64_t size = m->u.fetch_snapshot_resp.size;
    int rc;

    switch (out->api_key) {
    case KQ_API_FETCH:
        return check_fetch_response(out, errbuf, errlen);
    case KQ_API_FETCH_SNAPSHOT:
        if (out->error == 0 && size <= 0)
            return BAD("fetch_snapshot response size %lld is not positive", (long long)size);
        if (out->error == 0 &&
            m->u.fetch_snapshot_resp.position > size - (int64_t)m->u.fetch_snapshot_resp.len)
            return BAD("fetch_snapshot response chunk at %lld + %zu bytes runs past size %lld",
                       (long long)m->u.fetch_snapshot_resp.position, m->u.fetch_snapshot_resp.len,
                       (long long)size);
        return 0;
    case KQ_API_DESCRIBE_QUORUM:
        if ((rc = check_replicas("voter", out->describe.voters, out->describe.n_voters, errbuf,
                                 errlen)))
            return rc;
        return check_replicas("observer", out->describe.observers, out->describe.n_observers,
                              errbuf, errlen);
    default:
        return 0;
    }
}

int kq_codec_decode_response(const uint8_t *buf, size_t len, int32_t from, kq_response *out,
                             char *errbuf, size_t errlen)
{
    bool nul = false;
    const struct quorum_api *q;
    kq_wire_owned *o;
    Kq__Response *rs;
    ProtobufCMessage **body;
    const char *name;
    int rc = 0;

    if (!out)
        return BAD("no output for decoded response");
    memset(out, 0, sizeof *out);
    out->leader_id = out->leader_epoch = -1;
    out->write_base_offset = out->write_epoch = -1;
    out->describe.leader_id = out->describe.leader_epoch = -1;
    out->describe.high_watermark = -1;
    raft_msg_defaults(&out->raft);
    if (!buf && len > 0)
        return kq_wire_fail(errbuf, errlen, KQ_ERR_MALFORMED,
                            "response does not parse (no buffer)");
    rs = (Kq__Response *)kq_pb_unpack(&kq__response__descriptor, buf ? buf : empty_input, len,
                                      KQ_PB_ANSWER, &rc, &nul, errbuf, errlen);
    if (!rs && rc == KQ_ERR_MALFORMED)
        return kq_wire_fail(errbuf, errlen, rc, "response does not parse (%zu bytes)", len);
    if (!rs)
        return rc;
    if (!(o = calloc(1, sizeof *o))) {
        kq__response__free_unpacked(rs, NULL);
        return kq_wire_fail(errbuf, errlen, KQ_ERR_NOMEM, "out of memory decoding a response");
    }
    o->msg = &rs->base;
    out->priv_ = o;
    out->api_key = rs->api_key;
    name = api_name(rs->api_key);
    q = quorum_api(rs->api_key, 0);
    body = name ? kq_wire_body_slot(&kq__response__descriptor, rs, rs->api_key) : NULL;
    if (!name)
        rc = BAD("response for unknown api key %u", rs->api_key);
    else if (nul)
        rc = BAD("%s response has a string with a NUL byte", name);
    else if ((rc = kq_wire_decode(&kq_wt_response, &rs->base, out, &o->a, errbuf, errlen)))
        ;
    else if (rs->body_case == KQ__RESPONSE__BODY__NOT_SET && rs->error_code == 0)
        rc = BAD("%s response has neither an error nor a body", name);
    else if (rs->body_case != KQ__RESPONSE__BODY__NOT_SET &&
             (int)rs->body_case != kq_api_find(rs->api_key)->body_case)
        rc = BAD("%s response carries a %s body", name, body_name(rs->body_case));
    if (!rc) {
        out->raft.type = q ? q->resp_type : 0;
        out->raft.from = from;
        out->raft.error = out->error;
        out->raft.leader_id = out->leader_id;
        out->raft.epoch = out->leader_epoch;
        if (q && is_voter_answer(q->resp_type))
            kq_wire_clip(out->error_message, out->raft.u.voter_resp.error_message,
                         sizeof out->raft.u.voter_resp.error_message - 1);
        if (q && rs->body_case != KQ__RESPONSE__BODY__NOT_SET &&
            !(rc = kq_wire_decode(q->resp, *body, out, &o->a, errbuf, errlen)))
            rc = check_response(out, errbuf, errlen);
        /* A controller API's body is read by the kq_ctl_decode_*_response functions. */
    }
    if (rc) {
        kq_response_free(out);
        raft_msg_defaults(&out->raft);
        memset(&out->describe, 0, sizeof out->describe);
        out->leader_id = out->leader_epoch = -1;
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* records                                                                                   */

/* The Raft host's control records, through the record tables. */
int kq_codec_append_leader_change(kq_buf *b, int32_t leader_id, const int32_t *voters, int n_voters,
                                  const int32_t *granting, int n_granting)
{
    kq_rec_leader_change lc = {
        leader_id, {(int32_t *)voters, n_voters}, {(int32_t *)granting, n_granting}};

    return kq_wire_record_pack(KQ_REC_LEADER_CHANGE, &lc, b, true);
}

int kq_codec_append_noop(kq_buf *b)
{
    return kq_wire_record_pack(KQ_REC_NOOP, NULL, b, true);
}

int kq_codec_append_opaque(kq_buf *b, const uint8_t *data, size_t len)
{
    kq_rec_opaque op = {(uint8_t *)data, len};

    if (!data && len > 0)
        return KQ_ERR_INVALID_REQUEST;
    return kq_wire_record_pack(KQ_REC_OPAQUE, &op, b, true);
}
