/*
 * Metadata (API 3): round trips of request and response, the whole-request error answer,
 * every request and response validation rule, and NULL arguments.
 */
#include <stdio.h>
#include <stdlib.h>

#include "datacodec_testutil.h"

static void test_request_roundtrip(void **state)
{
    (void)state;
    kq_data_metadata_request in = example_metadata_request();
    kq_data_request out;
    kq_buf b;
    char err[256] = "";

    assert_int_equal(kq_data_encode_metadata_request("", -1, &in, &b), 0);
    assert_int_equal(kq_data_decode_request(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.api_key, KQ_API_METADATA);
    assert_true(kq_data_is_data_api(KQ_API_METADATA));
    assert_string_equal(out.cluster_id, "");
    assert_int_equal(out.sender_id, -1);
    assert_int_equal(out.u.metadata.n_topics, 2);
    assert_string_equal(out.u.metadata.topics[0], "ledger");
    assert_string_equal(out.u.metadata.topics[1], "payments.eu-1");
    kq_data_request_free(&out);
    assert_null(out.priv_);
    kq_buf_free(&b);

    /* No topics: all of them. */
    in.n_topics = 0;
    in.topics = NULL;
    assert_int_equal(kq_data_encode_metadata_request(TEST_CLUSTER, 4, &in, &b), 0);
    assert_int_equal(kq_data_decode_request(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.api_key, KQ_API_METADATA);
    assert_string_equal(out.cluster_id, TEST_CLUSTER);
    assert_int_equal(out.sender_id, 4);
    assert_int_equal(out.u.metadata.n_topics, 0);
    assert_null(out.u.metadata.topics);
    kq_data_request_free(&out);
    kq_buf_free(&b);
}

static void check_response_equal(const kq_data_metadata_response *in,
                                 const kq_data_metadata_response *out)
{
    assert_int_equal(out->error, 0);
    assert_int_equal(out->n_brokers, in->n_brokers);
    for (size_t i = 0; i < in->n_brokers; i++) {
        assert_int_equal(out->brokers[i].id, in->brokers[i].id);
        assert_string_equal(out->brokers[i].host, in->brokers[i].host);
        assert_int_equal(out->brokers[i].port, in->brokers[i].port);
        if (in->brokers[i].rack)
            assert_string_equal(out->brokers[i].rack, in->brokers[i].rack);
        else
            assert_null(out->brokers[i].rack);
    }
    assert_int_equal(out->n_topics, in->n_topics);
    for (size_t i = 0; i < in->n_topics; i++) {
        const kq_data_metadata_topic *a = &in->topics[i], *t = &out->topics[i];

        assert_string_equal(t->name, a->name);
        assert_memory_equal(t->topic_id, a->topic_id, 16);
        assert_int_equal(t->error, a->error);
        assert_int_equal(t->n_partitions, a->n_partitions);
        for (size_t j = 0; j < a->n_partitions; j++) {
            const kq_data_metadata_partition *p = &a->partitions[j], *q = &t->partitions[j];

            assert_int_equal(q->partition, p->partition);
            assert_int_equal(q->error, p->error);
            assert_int_equal(q->leader_id, p->leader_id);
            assert_int_equal(q->leader_epoch, p->leader_epoch);
            assert_int_equal(q->n_replicas, p->n_replicas);
            assert_int_equal(q->n_isr, p->n_isr);
            if (p->n_replicas)
                assert_memory_equal(q->replicas, p->replicas, p->n_replicas * sizeof(int32_t));
            if (p->n_isr)
                assert_memory_equal(q->isr, p->isr, p->n_isr * sizeof(int32_t));
            else
                assert_null(q->isr);
        }
    }
}

static void test_response_roundtrip(void **state)
{
    (void)state;
    kq_data_metadata_broker brokers[3];
    kq_data_metadata_topic topics[3];
    kq_data_metadata_partition parts[2];
    kq_data_metadata_response in = example_metadata_response(brokers, topics, parts), out;
    kq_buf b;
    char err[256] = "";

    assert_int_equal(kq_data_encode_metadata_response(&in, &b), 0);
    assert_int_equal(kq_data_decode_metadata_response(b.data, b.len, &out, err, sizeof err), 0);
    check_response_equal(&in, &out);
    assert_null(out.brokers[0].rack);
    assert_string_equal(out.brokers[2].rack, "");
    assert_int_equal(out.topics[1].error, KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    kq_data_metadata_response_free(&out);
    assert_null(out.priv_);
    assert_int_equal(out.n_topics, 0);
    kq_data_metadata_response_free(&out); /* twice is safe */
    kq_buf_free(&b);

    /* An empty cluster: no brokers, no topics. */
    in.n_brokers = 0;
    in.brokers = NULL;
    in.n_topics = 0;
    in.topics = NULL;
    assert_int_equal(kq_data_encode_metadata_response(&in, &b), 0);
    assert_int_equal(kq_data_decode_metadata_response(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.error, 0);
    assert_int_equal(out.n_brokers, 0);
    assert_int_equal(out.n_topics, 0);
    kq_data_metadata_response_free(&out);
    kq_buf_free(&b);

    /* A whole-request error answer. */
    assert_int_equal(kq_codec_encode_error_response(
                         KQ_API_METADATA, KQ_ERR_INVALID_REQUEST,
                         "Metadata request topics[0] topic name is empty", -1, -1, NULL, &b),
                     0);
    assert_int_equal(kq_data_decode_metadata_response(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.error, KQ_ERR_INVALID_REQUEST);
    assert_string_equal(out.error_message, "Metadata request topics[0] topic name is empty");
    assert_int_equal(out.n_brokers, 0);
    assert_int_equal(out.n_topics, 0);
    kq_data_metadata_response_free(&out);
    kq_buf_free(&b);
}

static void test_request_rules(void **state)
{
    (void)state;
    char long_name[KQ_DATA_MAX_TOPIC_NAME + 2];
    char max_name[KQ_DATA_MAX_TOPIC_NAME + 1];
    const char *names[2];
    const char **many = NULL;
    static const struct {
        int field; /* 0 empty, 1 too long, 2 duplicate, 3 too many, 4 no body */
        const char *expect;
    } cases[] = {
        {0, "MetadataRequest.topics[1] is empty"},
        {1, "MetadataRequest.topics[0] is longer than 249 bytes"},
        {2, "Metadata request names topic \"ledger\" twice"},
        {3, "MetadataRequest.topics has 10001 entries (max 10000)"},
    };

    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    memset(max_name, 'y', sizeof max_name - 1);
    max_name[sizeof max_name - 1] = 0;
    many = calloc(KQ_DATA_MAX_METADATA_TOPICS + 1, sizeof *many);
    assert_non_null(many);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kq_data_metadata_request r = {.topics = names, .n_topics = 2};
        kq_data_request out;
        kq_buf b;
        char err[256] = "";

        names[0] = "ledger";
        names[1] = "other";
        switch (cases[i].field) {
        case 0:
            names[1] = "";
            break;
        case 1:
            names[0] = long_name;
            break;
        case 2:
            names[1] = "ledger";
            break;
        default:
            for (size_t j = 0; j <= KQ_DATA_MAX_METADATA_TOPICS; j++)
                many[j] = "t";
            r.topics = many;
            r.n_topics = KQ_DATA_MAX_METADATA_TOPICS + 1;
            break;
        }
        assert_int_equal(kq_data_encode_metadata_request("", -1, &r, &b), 0);
        int rc = kq_data_decode_request(b.data, b.len, &out, err, sizeof err);
        if (rc != KQ_ERR_INVALID_REQUEST || !strstr(err, cases[i].expect))
            fail_msg("case %zu: got %d \"%s\", want \"%s\"", i, rc, err, cases[i].expect);
        assert_int_equal(out.api_key, KQ_API_METADATA);
        assert_null(out.priv_);
        kq_buf_free(&b);
    }
    free(many);

    /* A 249-byte name is fine. */
    {
        kq_data_metadata_request r = {.topics = names, .n_topics = 1};
        kq_data_request out;
        kq_buf b;
        char err[256] = "";

        names[0] = max_name;
        assert_int_equal(kq_data_encode_metadata_request("", -1, &r, &b), 0);
        assert_int_equal(kq_data_decode_request(b.data, b.len, &out, err, sizeof err), 0);
        assert_int_equal(strlen(out.u.metadata.topics[0]), KQ_DATA_MAX_TOPIC_NAME);
        kq_data_request_free(&out);
        kq_buf_free(&b);
    }

    /* The Metadata api key with another body. */
    {
        kq_list_offsets_partition lp[2];
        kq_list_offsets_request lq = example_list_offsets(lp);
        kq_data_request out;
        kq_buf b;
        char err[256] = "";

        assert_int_equal(kq_data_encode_list_offsets_request("", -1, &lq, &b), 0);
        /* The api_key is field 1, a varint: the first two bytes are 0x08 0x02. */
        assert_true(b.len > 2 && b.data[0] == 0x08 && b.data[1] == KQ_API_LIST_OFFSETS);
        b.data[1] = KQ_API_METADATA;
        assert_int_equal(kq_data_decode_request(b.data, b.len, &out, err, sizeof err),
                         KQ_ERR_INVALID_REQUEST);
        assert_non_null(strstr(err, "Metadata request has no Metadata body"));
        assert_int_equal(out.api_key, KQ_API_METADATA);
        kq_buf_free(&b);
    }
}

typedef enum md_break {
    BROKER_ID,
    BROKER_HOST_EMPTY,
    BROKER_HOST_LONG,
    BROKER_PORT_ZERO,
    BROKER_PORT_BIG,
    BROKER_RACK_LONG,
    BROKER_TWICE,
    TOPIC_NAME_EMPTY,
    TOPIC_NAME_LONG,
    TOPIC_ID_ZERO,
    TOPIC_ERROR_NEGATIVE,
    TOPIC_ERROR_WITH_PARTITIONS,
    TOPIC_TWICE,
    PART_NEGATIVE,
    PART_TWICE,
    PART_ERROR,
    PART_LEADER,
    PART_EPOCH,
    PART_REPLICA_NEGATIVE,
    PART_REPLICA_TWICE,
    PART_ISR_NOT_REPLICA,
    PART_ISR_TWICE,
    PART_LEADER_NOT_REPLICA,
} md_break;

static const struct {
    md_break what;
    const char *expect;
} resp_cases[] = {
    {BROKER_ID, "MetadataResponse.brokers[1].node_id -1 is out of range [0, 2147483647]"},
    {BROKER_HOST_EMPTY, "MetadataResponse.brokers[0].host is empty"},
    {BROKER_HOST_LONG, "MetadataResponse.brokers[0].host is longer than 255 bytes"},
    {BROKER_PORT_ZERO, "MetadataResponse.brokers[2].port 0 is out of range [1, 65535]"},
    {BROKER_PORT_BIG, "MetadataResponse.brokers[2].port 65536 is out of range [1, 65535]"},
    {BROKER_RACK_LONG, "MetadataResponse.brokers[1].rack is longer than 255 bytes"},
    {BROKER_TWICE, "Metadata response names broker 2 twice"},
    {TOPIC_NAME_EMPTY, "MetadataResponse.topics[2].name is empty"},
    {TOPIC_NAME_LONG, "MetadataResponse.topics[0].name is longer than 249 bytes"},
    {TOPIC_ID_ZERO, "Metadata response topics[0] (ledger) topic_id is all zero"},
    {TOPIC_ERROR_NEGATIVE,
     "MetadataResponse.topics[2].error_code -3 is out of range [0, 2147483647]"},
    {TOPIC_ERROR_WITH_PARTITIONS,
     "Metadata response topics[0] (ledger) has error UNKNOWN_TOPIC_OR_PARTITION and 2 partitions"},
    {TOPIC_TWICE, "Metadata response names topic \"ledger\" twice"},
    {PART_NEGATIVE,
     "MetadataResponse.topics[0].partitions[1].partition -1 is out of range [0, 2147483647]"},
    {PART_TWICE, "Metadata response topics[0] (ledger) names partition 0 twice"},
    {PART_ERROR,
     "MetadataResponse.topics[0].partitions[0].error_code -6 is out of range [0, 2147483647]"},
    {PART_LEADER,
     "MetadataResponse.topics[0].partitions[0].leader_id -2 is out of range [-1, 2147483647]"},
    {PART_EPOCH,
     "MetadataResponse.topics[0].partitions[1].leader_epoch -5 is out of range [-1, 2147483647]"},
    {PART_REPLICA_NEGATIVE,
     "Metadata response topic ledger partitions[0] replicas id -3 is invalid (must be >= 0)"},
    {PART_REPLICA_TWICE,
     "Metadata response topic ledger partitions[0] replicas name broker 1 twice"},
    {PART_ISR_NOT_REPLICA, "Metadata response topic ledger partitions[0] isr member 7 is not a "
                           "replica"},
    {PART_ISR_TWICE, "Metadata response topic ledger partitions[0] isr name broker 2 twice"},
    {PART_LEADER_NOT_REPLICA, "Metadata response topic ledger partitions[1] leader 2 is not a "
                              "replica"},
};

static void test_response_rules(void **state)
{
    (void)state;
    char long_host[KQ_CODEC_MAX_ENDPOINT + 1];
    char long_rack[KQ_DATA_MAX_RACK + 2];
    char long_topic[KQ_DATA_MAX_TOPIC_NAME + 2];
    static const int32_t reps_neg[3] = {1, 2, -3};
    static const int32_t reps_dup[3] = {1, 2, 1};
    static const int32_t isr_out[2] = {2, 7};
    static const int32_t isr_dup[2] = {2, 2};

    memset(long_host, 'h', sizeof long_host - 1);
    long_host[sizeof long_host - 1] = 0;
    memset(long_rack, 'r', sizeof long_rack - 1);
    long_rack[sizeof long_rack - 1] = 0;
    memset(long_topic, 'z', sizeof long_topic - 1);
    long_topic[sizeof long_topic - 1] = 0;
    for (size_t i = 0; i < sizeof resp_cases / sizeof resp_cases[0]; i++) {
        kq_data_metadata_broker brokers[3];
        kq_data_metadata_topic topics[3];
        kq_data_metadata_partition parts[2];
        kq_data_metadata_response r = example_metadata_response(brokers, topics, parts), out;
        kq_buf b;
        char err[256] = "";

        switch (resp_cases[i].what) {
        case BROKER_ID:
            brokers[1].id = -1;
            break;
        case BROKER_HOST_EMPTY:
            brokers[0].host = "";
            break;
        case BROKER_HOST_LONG:
            brokers[0].host = long_host;
            break;
        case BROKER_PORT_ZERO:
            brokers[2].port = 0;
            break;
        case BROKER_PORT_BIG:
            brokers[2].port = 65536;
            break;
        case BROKER_RACK_LONG:
            brokers[1].rack = long_rack;
            break;
        case BROKER_TWICE:
            brokers[2].id = 2;
            break;
        case TOPIC_NAME_EMPTY:
            topics[2].name = "";
            break;
        case TOPIC_NAME_LONG:
            topics[0].name = long_topic;
            break;
        case TOPIC_ID_ZERO:
            memset(topics[0].topic_id, 0, 16);
            break;
        case TOPIC_ERROR_NEGATIVE:
            topics[2].error = -3;
            break;
        case TOPIC_ERROR_WITH_PARTITIONS:
            topics[0].error = KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
            break;
        case TOPIC_TWICE:
            topics[2].name = "ledger";
            break;
        case PART_NEGATIVE:
            parts[1].partition = -1;
            break;
        case PART_TWICE:
            parts[1].partition = 0;
            break;
        case PART_ERROR:
            parts[0].error = -6;
            break;
        case PART_LEADER:
            parts[0].leader_id = -2;
            break;
        case PART_EPOCH:
            parts[1].leader_epoch = -5;
            break;
        case PART_REPLICA_NEGATIVE:
            parts[0].replicas = reps_neg;
            break;
        case PART_REPLICA_TWICE:
            parts[0].replicas = reps_dup;
            break;
        case PART_ISR_NOT_REPLICA:
            parts[0].isr = isr_out;
            break;
        case PART_ISR_TWICE:
            parts[0].isr = isr_dup;
            break;
        case PART_LEADER_NOT_REPLICA:
            parts[1].leader_id = 2;
            break;
        }
        assert_int_equal(kq_data_encode_metadata_response(&r, &b), 0);
        int rc = kq_data_decode_metadata_response(b.data, b.len, &out, err, sizeof err);
        if (rc != KQ_ERR_INVALID_REQUEST || !strstr(err, resp_cases[i].expect))
            fail_msg("case %zu: got %d \"%s\", want \"%s\"", i, rc, err, resp_cases[i].expect);
        assert_null(out.priv_);
        assert_int_equal(out.n_topics, 0);
        assert_int_equal(out.n_brokers, 0);
        kq_buf_free(&b);
    }
}

static void test_response_limits(void **state)
{
    (void)state;
    kq_data_metadata_broker brokers[3];
    kq_data_metadata_topic topics[3];
    kq_data_metadata_partition parts[2];
    kq_data_metadata_response r = example_metadata_response(brokers, topics, parts), out;
    int32_t *many = calloc(KQ_DATA_MAX_METADATA_REPLICAS + 1, sizeof *many);
    kq_buf b;
    char err[256] = "";

    assert_non_null(many);
    for (int i = 0; i <= KQ_DATA_MAX_METADATA_REPLICAS; i++)
        many[i] = i;
    parts[1].replicas = many;
    parts[1].n_replicas = KQ_DATA_MAX_METADATA_REPLICAS + 1;
    assert_int_equal(kq_data_encode_metadata_response(&r, &b), 0);
    assert_int_equal(kq_data_decode_metadata_response(b.data, b.len, &out, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "partitions[1].replicas has 1001 entries (max 1000)"));
    kq_buf_free(&b);

    /* Exactly the maximum is accepted. */
    parts[1].n_replicas = KQ_DATA_MAX_METADATA_REPLICAS;
    assert_int_equal(kq_data_encode_metadata_response(&r, &b), 0);
    assert_int_equal(kq_data_decode_metadata_response(b.data, b.len, &out, err, sizeof err), 0);
    assert_int_equal(out.topics[0].partitions[1].n_replicas, KQ_DATA_MAX_METADATA_REPLICAS);
    kq_data_metadata_response_free(&out);
    kq_buf_free(&b);
    free(many);

    /* A Metadata response with a body of another API, and a wrong api key. */
    kq_produce_response ok = {.base_offset = 1, .log_start_offset = 0};
    assert_int_equal(kq_data_encode_produce_response(&ok, &b), 0);
    assert_int_equal(kq_data_decode_metadata_response(b.data, b.len, &out, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "Metadata response has api key 1101"));
    kq_buf_free(&b);

    /* Bytes that do not parse. */
    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    assert_int_equal(kq_data_decode_metadata_response(junk, sizeof junk, &out, err, sizeof err),
                     KQ_ERR_MALFORMED);
    assert_non_null(strstr(err, "Metadata response does not parse"));
    assert_null(out.priv_);
}

static void test_null_arguments(void **state)
{
    (void)state;
    kq_data_metadata_request rq = {.topics = NULL, .n_topics = 1};
    kq_data_metadata_response rs;
    kq_buf b;
    char err[128] = "";

    memset(&rs, 0, sizeof rs);
    assert_int_equal(kq_data_encode_metadata_request("", -1, NULL, &b), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_data_encode_metadata_request("", -1, &rq, &b), KQ_ERR_INVALID_REQUEST);
    assert_null(b.data);
    rq.n_topics = 0;
    assert_int_equal(kq_data_encode_metadata_request("", -1, &rq, NULL), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_data_encode_metadata_response(NULL, &b), KQ_ERR_INVALID_REQUEST);
    rs.n_topics = 1;
    assert_int_equal(kq_data_encode_metadata_response(&rs, &b), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_data_decode_metadata_response(NULL, 0, NULL, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_int_equal(kq_data_decode_metadata_response(NULL, 5, &rs, err, sizeof err),
                     KQ_ERR_MALFORMED);
    kq_data_metadata_response_free(NULL);
    kq_data_metadata_response_free(&rs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_roundtrip), cmocka_unit_test(test_response_roundtrip),
        cmocka_unit_test(test_request_rules),     cmocka_unit_test(test_response_rules),
        cmocka_unit_test(test_response_limits),   cmocka_unit_test(test_null_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
