/*
 * libFuzzer target: kq_data_decode_{produce,fetch,list_offsets,metadata}_response.
 *
 * Input: byte 0 picks the API (byte0 % 4: Produce, Fetch, ListOffsets, Metadata); the rest is
 * the body message, wrapped into a valid envelope with error_code 0. A first byte >= 0xF0
 * means the rest is a whole envelope, unwrapped (then byte 1 % 4 picks the decoder).
 *
 * Checks: a failed decode returns MALFORMED / INVALID_REQUEST / CORRUPT_MESSAGE with a
 * message and owns nothing; a successful one obeys every "Valid:" rule of
 * proto/kq_data.proto (batch CRCs, contiguity, bounds, duplicates, subsets); without a
 * whole-request error, the answer re-encodes (kq_data_encode_*_response) to one that decodes
 * to the same value.
 */
#include "fuzz_check.h"
#include "fuzz_wire.h"
#include "kq/data_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_rc(int rc, const char *err)
{
    FUZZ_CHECK(rc == KQ_ERR_MALFORMED || rc == KQ_ERR_INVALID_REQUEST ||
               rc == KQ_ERR_CORRUPT_MESSAGE);
    FUZZ_CHECK(err[0] != '\0');
}

static bool same_bytes(const void *a, const void *b, size_t n)
{
    return n == 0 || !memcmp(a, b, n);
}

/* ---- Produce ---- */

static void produce(const uint8_t *msg, size_t len)
{
    kq_produce_response r, again;
    kq_buf b = {0};
    char err[256] = "";
    int rc = kq_data_decode_produce_response(msg, len, &r, err, sizeof err);

    if (rc) {
        check_rc(rc, err);
        return;
    }
    FUZZ_CHECK(r.error >= 0);
    if (r.error == 0)
        FUZZ_CHECK(r.base_offset >= 0 && r.log_start_offset >= 0 &&
                   r.log_start_offset <= r.base_offset);
    else
        FUZZ_CHECK(r.base_offset >= -1 && r.log_start_offset >= -1);
    FUZZ_CHECK(strlen(r.error_message) <= KQ_DATA_MAX_ERROR_MESSAGE);
    FUZZ_CHECK(kq_data_encode_produce_response(&r, &b) == 0);
    FUZZ_CHECK(kq_data_decode_produce_response(b.data, b.len, &again, err, sizeof err) == 0);
    FUZZ_CHECK(r.error == again.error && r.base_offset == again.base_offset &&
               r.log_start_offset == again.log_start_offset &&
               !strcmp(r.error_message, again.error_message));
    kq_buf_free(&b);
}

/* ---- Fetch ---- */

static void check_batch_fields(const kq_data_batch *x)
{
    FUZZ_CHECK(x->base_offset >= 0 && x->leader_epoch >= 0 && x->count >= 1);
    FUZZ_CHECK((x->producer_id == -1 && x->producer_epoch == -1 && x->base_sequence == -1) ||
               (x->producer_id >= 0 && x->producer_epoch >= 0 && x->base_sequence >= 0));
    FUZZ_CHECK(kq_data_batch_crc(x) == x->crc32c);
}

static void check_fetch_partition(const kq_data_fetch_partition_result *p)
{
    FUZZ_CHECK(!kq_uuid_is_zero(p->topic_id) && p->partition >= 0 && p->error >= 0);
    FUZZ_CHECK(p->high_watermark >= -1 && p->log_start_offset >= -1);
    if (p->error == 0)
        FUZZ_CHECK(p->log_start_offset >= 0 && p->log_start_offset <= p->high_watermark);
    if (p->diverging_epoch >= 0)
        FUZZ_CHECK(p->diverging_end_offset >= 0 && p->n_batches == 0);
    else
        FUZZ_CHECK(p->diverging_epoch == -1);
    FUZZ_CHECK(p->current_leader_id >= -1 && p->current_leader_epoch >= -1);
    FUZZ_CHECK(p->n_batches <= KQ_DATA_MAX_BATCHES);
    if (p->n_batches)
        FUZZ_CHECK(p->error == 0);
    for (size_t i = 0; i < p->n_batches; i++) {
        const kq_data_batch *x = &p->batches[i];

        check_batch_fields(x);
        if (i > 0) {
            FUZZ_CHECK(x->base_offset == p->batches[i - 1].base_offset + p->batches[i - 1].count);
            FUZZ_CHECK(x->leader_epoch >= p->batches[i - 1].leader_epoch);
        }
    }
}

static void same_fetch(const kq_data_fetch_response *a, const kq_data_fetch_response *b)
{
    FUZZ_CHECK(a->error == b->error && a->n_partitions == b->n_partitions);
    for (size_t i = 0; i < a->n_partitions; i++) {
        const kq_data_fetch_partition_result *p = &a->partitions[i], *q = &b->partitions[i];

        FUZZ_CHECK(!memcmp(p->topic_id, q->topic_id, 16) && p->partition == q->partition &&
                   p->error == q->error && p->high_watermark == q->high_watermark &&
                   p->log_start_offset == q->log_start_offset &&
                   p->diverging_epoch == q->diverging_epoch &&
                   p->current_leader_id == q->current_leader_id &&
                   p->current_leader_epoch == q->current_leader_epoch &&
                   p->n_batches == q->n_batches);
        if (p->diverging_epoch >= 0)
            FUZZ_CHECK(p->diverging_end_offset == q->diverging_end_offset);
        for (size_t k = 0; k < p->n_batches; k++) {
            const kq_data_batch *x = &p->batches[k], *y = &q->batches[k];

            FUZZ_CHECK(x->base_offset == y->base_offset && x->leader_epoch == y->leader_epoch &&
                       x->count == y->count && x->crc32c == y->crc32c &&
                       x->producer_id == y->producer_id && x->producer_epoch == y->producer_epoch &&
                       x->base_sequence == y->base_sequence && x->len == y->len &&
                       same_bytes(x->records, y->records, x->len));
        }
    }
}

static void fetch(const uint8_t *msg, size_t len)
{
    kq_data_fetch_response r, again;
    kq_buf b = {0};
    char err[256] = "";
    int rc = kq_data_decode_fetch_response(msg, len, &r, err, sizeof err);

    if (rc) {
        check_rc(rc, err);
        FUZZ_CHECK(r.priv_ == NULL && r.partitions == NULL);
        kq_data_fetch_response_free(&r);
        return;
    }
    FUZZ_CHECK(r.error >= 0 && r.n_partitions <= KQ_DATA_MAX_FETCH_PARTITIONS);
    if (r.error)
        FUZZ_CHECK(r.n_partitions == 0);
    for (size_t i = 0; i < r.n_partitions; i++)
        check_fetch_partition(&r.partitions[i]);
    if (r.error == 0) {
        FUZZ_CHECK(kq_data_encode_fetch_response(&r, &b) == 0);
        FUZZ_CHECK(kq_data_decode_fetch_response(b.data, b.len, &again, err, sizeof err) == 0);
        same_fetch(&r, &again);
        kq_data_fetch_response_free(&again);
        kq_buf_free(&b);
    }
    kq_data_fetch_response_free(&r);
    FUZZ_CHECK(r.priv_ == NULL && r.n_partitions == 0);
}

/* ---- ListOffsets ---- */

static void list_offsets(const uint8_t *msg, size_t len)
{
    kq_list_offsets_response r, again;
    kq_buf b = {0};
    char err[256] = "";
    int rc = kq_data_decode_list_offsets_response(msg, len, &r, err, sizeof err);

    if (rc) {
        check_rc(rc, err);
        FUZZ_CHECK(r.priv_ == NULL && r.partitions == NULL);
        kq_data_list_offsets_response_free(&r);
        return;
    }
    FUZZ_CHECK(r.error >= 0 && r.n_partitions <= KQ_DATA_MAX_FETCH_PARTITIONS);
    if (r.error)
        FUZZ_CHECK(r.n_partitions == 0);
    for (size_t i = 0; i < r.n_partitions; i++) {
        const kq_list_offsets_partition_result *p = &r.partitions[i];

        FUZZ_CHECK(!kq_uuid_is_zero(p->topic_id) && p->partition >= 0 && p->error >= 0);
        FUZZ_CHECK(p->error ? p->offset >= -1 : p->offset >= 0);
        FUZZ_CHECK(p->leader_epoch >= -1);
    }
    if (r.error == 0) {
        FUZZ_CHECK(kq_data_encode_list_offsets_response(&r, &b) == 0);
        FUZZ_CHECK(kq_data_decode_list_offsets_response(b.data, b.len, &again, err, sizeof err) ==
                   0);
        FUZZ_CHECK(again.error == 0 && again.n_partitions == r.n_partitions);
        for (size_t i = 0; i < r.n_partitions; i++) {
            const kq_list_offsets_partition_result *p = &r.partitions[i], *q = &again.partitions[i];

            FUZZ_CHECK(!memcmp(p->topic_id, q->topic_id, 16) && p->partition == q->partition &&
                       p->error == q->error && p->offset == q->offset &&
                       p->leader_epoch == q->leader_epoch);
        }
        kq_data_list_offsets_response_free(&again);
        kq_buf_free(&b);
    }
    kq_data_list_offsets_response_free(&r);
}

/* ---- Metadata ---- */

static bool has_id(const int32_t *ids, int n, int32_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

static void check_ids(const int32_t *ids, int n)
{
    FUZZ_CHECK(n >= 0 && n <= KQ_DATA_MAX_METADATA_REPLICAS);
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(ids[i] >= 0);
        FUZZ_CHECK(!has_id(ids, i, ids[i]));
    }
}

static void check_metadata(const kq_data_metadata_response *r)
{
    size_t total = 0;

    FUZZ_CHECK(r->error >= 0 && r->n_brokers <= KQ_DATA_MAX_METADATA_BROKERS &&
               r->n_topics <= KQ_DATA_MAX_METADATA_TOPICS);
    if (r->error)
        FUZZ_CHECK(r->n_brokers == 0 && r->n_topics == 0);
    for (size_t i = 0; i < r->n_brokers; i++) {
        const kq_data_metadata_broker *b = &r->brokers[i];
        size_t hl = strlen(b->host);

        FUZZ_CHECK(b->id >= 0 && hl >= 1 && hl <= KQ_CODEC_MAX_ENDPOINT - 1);
        FUZZ_CHECK(b->port >= 1 && b->port <= 65535);
        FUZZ_CHECK(!b->rack || strlen(b->rack) <= KQ_DATA_MAX_RACK);
        if (i < 256) /* quadratic: only the first few */
            for (size_t k = 0; k < i; k++)
                FUZZ_CHECK(r->brokers[k].id != b->id);
    }
    for (size_t i = 0; i < r->n_topics; i++) {
        const kq_data_metadata_topic *t = &r->topics[i];
        size_t nl = strlen(t->name);

        FUZZ_CHECK(nl >= 1 && nl <= KQ_DATA_MAX_TOPIC_NAME && t->error >= 0);
        if (t->error == 0)
            FUZZ_CHECK(!kq_uuid_is_zero(t->topic_id));
        else /* a topic with an error lists no partitions */
            FUZZ_CHECK(t->n_partitions == 0);
        if (i < 256)
            for (size_t k = 0; k < i; k++)
                FUZZ_CHECK(strcmp(r->topics[k].name, t->name) != 0);
        total += t->n_partitions;
        for (size_t k = 0; k < t->n_partitions; k++) {
            const kq_data_metadata_partition *p = &t->partitions[k];

            FUZZ_CHECK(p->partition >= 0 && p->error >= 0);
            FUZZ_CHECK(p->leader_id >= -1 && p->leader_epoch >= -1);
            check_ids(p->replicas, p->n_replicas);
            check_ids(p->isr, p->n_isr);
            for (int m = 0; m < p->n_isr; m++)
                FUZZ_CHECK(has_id(p->replicas, p->n_replicas, p->isr[m]));
            FUZZ_CHECK(p->leader_id == -1 || has_id(p->replicas, p->n_replicas, p->leader_id));
            if (k < 256)
                for (size_t m = 0; m < k; m++)
                    FUZZ_CHECK(t->partitions[m].partition != p->partition);
        }
    }
    FUZZ_CHECK(total <= KQ_DATA_MAX_METADATA_PARTITIONS);
}

static bool same_opt_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static void same_metadata(const kq_data_metadata_response *a, const kq_data_metadata_response *b)
{
    FUZZ_CHECK(a->error == b->error && a->n_brokers == b->n_brokers && a->n_topics == b->n_topics);
    for (size_t i = 0; i < a->n_brokers; i++)
        FUZZ_CHECK(a->brokers[i].id == b->brokers[i].id &&
                   !strcmp(a->brokers[i].host, b->brokers[i].host) &&
                   a->brokers[i].port == b->brokers[i].port &&
                   same_opt_str(a->brokers[i].rack, b->brokers[i].rack));
    for (size_t i = 0; i < a->n_topics; i++) {
        const kq_data_metadata_topic *s = &a->topics[i], *t = &b->topics[i];

        FUZZ_CHECK(!strcmp(s->name, t->name) && !memcmp(s->topic_id, t->topic_id, 16) &&
                   s->error == t->error && s->n_partitions == t->n_partitions);
        for (size_t k = 0; k < s->n_partitions; k++) {
            const kq_data_metadata_partition *p = &s->partitions[k], *q = &t->partitions[k];

            FUZZ_CHECK(p->partition == q->partition && p->error == q->error &&
                       p->leader_id == q->leader_id && p->leader_epoch == q->leader_epoch &&
                       p->n_replicas == q->n_replicas && p->n_isr == q->n_isr);
            FUZZ_CHECK(
                same_bytes(p->replicas, q->replicas, sizeof(int32_t) * (size_t)p->n_replicas));
            FUZZ_CHECK(same_bytes(p->isr, q->isr, sizeof(int32_t) * (size_t)p->n_isr));
        }
    }
}

static void metadata(const uint8_t *msg, size_t len)
{
    kq_data_metadata_response r, again;
    kq_buf b = {0};
    char err[256] = "";
    int rc = kq_data_decode_metadata_response(msg, len, &r, err, sizeof err);

    if (rc) {
        check_rc(rc, err);
        FUZZ_CHECK(r.priv_ == NULL && r.brokers == NULL && r.topics == NULL);
        kq_data_metadata_response_free(&r);
        return;
    }
    check_metadata(&r);
    if (r.error == 0) {
        FUZZ_CHECK(kq_data_encode_metadata_response(&r, &b) == 0);
        FUZZ_CHECK(kq_data_decode_metadata_response(b.data, b.len, &again, err, sizeof err) == 0);
        same_metadata(&r, &again);
        kq_data_metadata_response_free(&again);
        kq_buf_free(&b);
    }
    kq_data_metadata_response_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *msg;
    size_t len;
    unsigned which;

    if (size < 2)
        return 0;
    if (data[0] >= FUZZ_RAW_ENVELOPE) {
        which = data[1] % FUZZ_N_DATA_APIS;
        len = size - 2;
        msg = malloc(len ? len : 1);
        FUZZ_CHECK(msg);
        memcpy(msg, data + 2, len);
    } else {
        const fuzz_api *api = &fuzz_data_apis[data[0] % FUZZ_N_DATA_APIS];

        which = data[0] % FUZZ_N_DATA_APIS;
        msg = fuzz_wrap_response(api->api_key, 0, api->field, data + 1, size - 1, &len);
        FUZZ_CHECK(msg);
    }
    switch (fuzz_data_apis[which].api_key) {
    case KQ_API_PRODUCE:
        produce(msg, len);
        break;
    case KQ_API_DATA_FETCH:
        fetch(msg, len);
        break;
    case KQ_API_LIST_OFFSETS:
        list_offsets(msg, len);
        break;
    default:
        metadata(msg, len);
    }
    free(msg);
    return 0;
}
