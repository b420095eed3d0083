/*
 * libFuzzer target: kq_data_decode_request, every data-plane request body (Produce, Fetch,
 * ListOffsets, Metadata).
 *
 * Input: byte 0 picks the API (byte0 % 4: Produce, Fetch, ListOffsets, Metadata) and byte 1 the
 * envelope's sender id (as int8); the rest is the body message, wrapped into a valid envelope
 * here. A first byte >= 0xF0 means the rest is a whole envelope, unwrapped.
 *
 * Checks: a rejected request gets MALFORMED / INVALID_REQUEST / UNSUPPORTED_VERSION (NOT_FOUND
 * for a non-data API) with a message and owns nothing; an accepted one obeys every "Valid:"
 * rule of proto/kq_data.proto (as include/kq/data_codec.h decodes it), and re-encodes to a request
 * that decodes to the same value and encodes to the same bytes.
 */
#include "fuzz_check.h"
#include "fuzz_wire.h"
#include "kq/data_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct tp_key {
    uint8_t id[16];
    int32_t partition;
} tp_key;

static int cmp_tp(const void *a, const void *b)
{
    const tp_key *x = a, *y = b;
    int c = memcmp(x->id, y->id, 16);

    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool tp_dup(tp_key *keys, size_t n)
{
    qsort(keys, n, sizeof *keys, cmp_tp);
    for (size_t i = 1; i < n; i++)
        if (!cmp_tp(&keys[i - 1], &keys[i]))
            return true;
    return false;
}

static void check_produce(const kq_produce_request *p)
{
    size_t total = 0;

    FUZZ_CHECK(!kq_uuid_is_zero(p->topic_id) && p->partition >= 0);
    FUZZ_CHECK(p->acks == -1 || p->acks == 0 || p->acks == 1);
    FUZZ_CHECK(p->timeout_ms >= 0);
    FUZZ_CHECK((p->producer_id == -1 && p->producer_epoch == -1 && p->base_sequence == -1) ||
               (p->producer_id >= 0 && p->producer_epoch >= 0 && p->producer_epoch <= 32767 &&
                p->base_sequence >= 0));
    FUZZ_CHECK(p->n_records >= 1 && p->n_records <= KQ_DATA_MAX_RECORDS);
    for (size_t i = 0; i < p->n_records; i++) {
        FUZZ_CHECK(p->record_lens[i] <= KQ_DATA_MAX_RECORD_BYTES);
        if (p->record_lens[i]) { /* the whole value is readable (ASan checks) */
            volatile uint8_t last = p->records[i][p->record_lens[i] - 1];
            (void)last;
        }
        total += p->record_lens[i];
    }
    FUZZ_CHECK(total <= KQ_DATA_MAX_PRODUCE_BYTES);
}

static void check_fetch(const kq_data_fetch_request *f, int32_t sender)
{
    tp_key *keys;

    if (f->replica_id == KQ_DATA_CONSUMER_REPLICA_ID)
        FUZZ_CHECK(f->broker_epoch == -1);
    else
        FUZZ_CHECK(f->replica_id >= 0 && f->replica_id == sender && f->broker_epoch >= 0);
    FUZZ_CHECK(f->max_wait_ms >= 0 && f->min_bytes >= 0 && f->max_bytes > 0);
    FUZZ_CHECK(f->n_partitions >= 1 && f->n_partitions <= KQ_DATA_MAX_FETCH_PARTITIONS);
    keys = calloc(f->n_partitions, sizeof *keys);
    FUZZ_CHECK(keys);
    for (size_t i = 0; i < f->n_partitions; i++) {
        const kq_data_fetch_partition *p = &f->partitions[i];

        FUZZ_CHECK(!kq_uuid_is_zero(p->topic_id) && p->partition >= 0);
        FUZZ_CHECK(p->current_leader_epoch >= -1 && p->fetch_offset >= 0 &&
                   p->last_fetched_epoch >= -1 && p->log_start_offset >= -1);
        FUZZ_CHECK(p->log_start_offset < 0 || p->log_start_offset <= p->fetch_offset);
        FUZZ_CHECK(p->partition_max_bytes > 0);
        if (f->replica_id == KQ_DATA_CONSUMER_REPLICA_ID)
            FUZZ_CHECK(p->log_start_offset == -1);
        memcpy(keys[i].id, p->topic_id, 16);
        keys[i].partition = p->partition;
    }
    FUZZ_CHECK(!tp_dup(keys, f->n_partitions));
    free(keys);
}

static void check_list_offsets(const kq_list_offsets_request *l, int32_t sender)
{
    tp_key *keys;

    FUZZ_CHECK(l->replica_id == -1 || l->replica_id == sender);
    FUZZ_CHECK(l->n_partitions >= 1 && l->n_partitions <= KQ_DATA_MAX_FETCH_PARTITIONS);
    keys = calloc(l->n_partitions, sizeof *keys);
    FUZZ_CHECK(keys);
    for (size_t i = 0; i < l->n_partitions; i++) {
        const kq_list_offsets_partition *p = &l->partitions[i];

        FUZZ_CHECK(!kq_uuid_is_zero(p->topic_id) && p->partition >= 0 &&
                   p->current_leader_epoch >= -1);
        FUZZ_CHECK(p->timestamp == KQ_DATA_EARLIEST_TIMESTAMP ||
                   p->timestamp == KQ_DATA_LATEST_TIMESTAMP);
        memcpy(keys[i].id, p->topic_id, 16);
        keys[i].partition = p->partition;
    }
    FUZZ_CHECK(!tp_dup(keys, l->n_partitions));
    free(keys);
}

static void check_metadata(const kq_data_metadata_request *m)
{
    const char **names;

    FUZZ_CHECK(m->n_topics <= KQ_DATA_MAX_METADATA_TOPICS);
    names = calloc(m->n_topics + 1, sizeof *names);
    FUZZ_CHECK(names);
    for (size_t i = 0; i < m->n_topics; i++) {
        size_t n = strlen(m->topics[i]);

        FUZZ_CHECK(n >= 1 && n <= KQ_DATA_MAX_TOPIC_NAME);
        names[i] = m->topics[i];
    }
    qsort(names, m->n_topics, sizeof *names, cmp_str);
    for (size_t i = 1; i < m->n_topics; i++)
        FUZZ_CHECK(strcmp(names[i - 1], names[i]) != 0);
    free(names);
}

static int encode(const kq_data_request *r, kq_buf *out)
{
    switch (r->api_key) {
    case KQ_API_PRODUCE:
        return kq_data_encode_produce_request(r->cluster_id, r->sender_id, &r->u.produce, out);
    case KQ_API_DATA_FETCH:
        return kq_data_encode_fetch_request(r->cluster_id, r->sender_id, &r->u.fetch, out);
    case KQ_API_LIST_OFFSETS:
        return kq_data_encode_list_offsets_request(r->cluster_id, r->sender_id, &r->u.list_offsets,
                                                   out);
    default:
        return kq_data_encode_metadata_request(r->cluster_id, r->sender_id, &r->u.metadata, out);
    }
}

static void same_request(const kq_data_request *a, const kq_data_request *b)
{
    FUZZ_CHECK(a->api_key == b->api_key && a->sender_id == b->sender_id &&
               !strcmp(a->cluster_id, b->cluster_id));
    switch (a->api_key) {
    case KQ_API_PRODUCE: {
        const kq_produce_request *x = &a->u.produce, *y = &b->u.produce;

        FUZZ_CHECK(!memcmp(x->topic_id, y->topic_id, 16) && x->partition == y->partition &&
                   x->acks == y->acks && x->timeout_ms == y->timeout_ms &&
                   x->producer_id == y->producer_id && x->producer_epoch == y->producer_epoch &&
                   x->base_sequence == y->base_sequence && x->n_records == y->n_records);
        for (size_t i = 0; i < x->n_records; i++)
            FUZZ_CHECK(
                x->record_lens[i] == y->record_lens[i] &&
                (!x->record_lens[i] || !memcmp(x->records[i], y->records[i], x->record_lens[i])));
        break;
    }
    case KQ_API_DATA_FETCH: {
        const kq_data_fetch_request *x = &a->u.fetch, *y = &b->u.fetch;

        FUZZ_CHECK(x->replica_id == y->replica_id && x->broker_epoch == y->broker_epoch &&
                   x->max_wait_ms == y->max_wait_ms && x->min_bytes == y->min_bytes &&
                   x->max_bytes == y->max_bytes && x->n_partitions == y->n_partitions);
        for (size_t i = 0; i < x->n_partitions; i++) {
            const kq_data_fetch_partition *p = &x->partitions[i], *q = &y->partitions[i];

            FUZZ_CHECK(!memcmp(p->topic_id, q->topic_id, 16) && p->partition == q->partition &&
                       p->current_leader_epoch == q->current_leader_epoch &&
                       p->fetch_offset == q->fetch_offset &&
                       p->last_fetched_epoch == q->last_fetched_epoch &&
                       p->log_start_offset == q->log_start_offset &&
                       p->partition_max_bytes == q->partition_max_bytes);
        }
        break;
    }
    case KQ_API_LIST_OFFSETS: {
        const kq_list_offsets_request *x = &a->u.list_offsets, *y = &b->u.list_offsets;

        FUZZ_CHECK(x->replica_id == y->replica_id && x->n_partitions == y->n_partitions);
        for (size_t i = 0; i < x->n_partitions; i++) {
            const kq_list_offsets_partition *p = &x->partitions[i], *q = &y->partitions[i];

            FUZZ_CHECK(!memcmp(p->topic_id, q->topic_id, 16) && p->partition == q->partition &&
                       p->current_leader_epoch == q->current_leader_epoch &&
                       p->timestamp == q->timestamp);
        }
        break;
    }
    default:
        FUZZ_CHECK(a->u.metadata.n_topics == b->u.metadata.n_topics);
        for (size_t i = 0; i < a->u.metadata.n_topics; i++)
            FUZZ_CHECK(!strcmp(a->u.metadata.topics[i], b->u.metadata.topics[i]));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kq_data_request r, again;
    kq_buf b1 = {0}, b2 = {0};
    char err[256] = "";
    uint8_t *msg;
    size_t len;
    int rc;

    if (size < 2)
        return 0;
    msg = fuzz_envelope(data, size, fuzz_data_apis, FUZZ_N_DATA_APIS, 1, &len);
    FUZZ_CHECK(msg);
    rc = kq_data_decode_request(msg, len, &r, err, sizeof err);
    free(msg); /* the decoded request owns its memory */
    if (rc) {
        FUZZ_CHECK(rc == KQ_ERR_MALFORMED || rc == KQ_ERR_INVALID_REQUEST ||
                   rc == KQ_ERR_UNSUPPORTED_VERSION ||
                   (rc == KQ_ERR_NOT_FOUND && !kq_data_is_data_api(r.api_key)));
        FUZZ_CHECK(err[0] != '\0' && r.priv_ == NULL && r.sender_id == -1);
        kq_data_request_free(&r);
        return 0;
    }
    FUZZ_CHECK(kq_data_is_data_api(r.api_key));
    FUZZ_CHECK(strlen(r.cluster_id) <= KQ_CODEC_MAX_CLUSTER_ID && r.sender_id >= -1);
    switch (r.api_key) {
    case KQ_API_PRODUCE:
        check_produce(&r.u.produce);
        break;
    case KQ_API_DATA_FETCH:
        check_fetch(&r.u.fetch, r.sender_id);
        break;
    case KQ_API_LIST_OFFSETS:
        check_list_offsets(&r.u.list_offsets, r.sender_id);
        break;
    default:
        check_metadata(&r.u.metadata);
    }

    FUZZ_CHECK(encode(&r, &b1) == 0);
    FUZZ_CHECK(kq_data_decode_request(b1.data, b1.len, &again, err, sizeof err) == 0);
    same_request(&r, &again);
    FUZZ_CHECK(encode(&again, &b2) == 0);
    FUZZ_CHECK(b1.len == b2.len && !memcmp(b1.data, b2.data, b1.len));
    kq_buf_free(&b1);
    kq_buf_free(&b2);
    kq_data_request_free(&again);
    kq_data_request_free(&r);
    return 0;
}
