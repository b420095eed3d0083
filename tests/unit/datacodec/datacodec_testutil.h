/*
 * Shared fixtures for the kq_datacodec tests: valid example messages of every data-plane
 * type and independent checks of the decode rules (include/kq/data_codec.h).
 * Ownership: fixtures are static test data; nothing here allocates except the kq_bufs the
 * callers free.
 */
#ifndef KQ_DATACODEC_TESTUTIL_H
#define KQ_DATACODEC_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kq/data_codec.h"
#include "kq/error.h"
#include "kq/util.h"

#define TEST_CLUSTER "Zx3pQ9cYR0a1b2c3d4e5fA"

static const uint8_t topic_a[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint8_t topic_b[16] = {0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};

static const uint8_t rec0[] = "hello";
static const uint8_t rec2[] = {0, 1, 2, 0, 0xff};
static const uint8_t *const example_records[3] = {rec0, NULL, rec2};
static const size_t example_lens[3] = {5, 0, sizeof rec2};

static inline kq_produce_request example_produce(void)
{
    kq_produce_request r;

    memset(&r, 0, sizeof r);
    memcpy(r.topic_id, topic_a, 16);
    r.partition = 3;
    r.acks = KQ_DATA_ACKS_ALL;
    r.timeout_ms = 30000;
    r.producer_id = 4242;
    r.producer_epoch = 7;
    r.base_sequence = 100;
    r.records = example_records;
    r.record_lens = example_lens;
    r.n_records = 3;
    return r;
}

/* parts must have room for 2. */
static inline kq_data_fetch_request example_fetch(kq_data_fetch_partition *parts, bool follower)
{
    kq_data_fetch_request r;

    memset(&r, 0, sizeof r);
    memset(parts, 0, 2 * sizeof *parts);
    memcpy(parts[0].topic_id, topic_a, 16);
    parts[0].partition = 0;
    parts[0].current_leader_epoch = 5;
    parts[0].fetch_offset = 1000;
    parts[0].last_fetched_epoch = follower ? 4 : -1;
    parts[0].log_start_offset = follower ? 10 : -1;
    parts[0].partition_max_bytes = 1 << 20;
    memcpy(parts[1].topic_id, topic_b, 16);
    parts[1].partition = 1;
    parts[1].current_leader_epoch = -1;
    parts[1].fetch_offset = 0;
    parts[1].last_fetched_epoch = -1;
    parts[1].log_start_offset = follower ? 0 : -1;
    parts[1].partition_max_bytes = 4096;
    r.replica_id = follower ? 2 : KQ_DATA_CONSUMER_REPLICA_ID;
    r.broker_epoch = follower ? 77 : -1;
    r.max_wait_ms = 500;
    r.min_bytes = 1;
    r.max_bytes = 50 << 20;
    r.partitions = parts;
    r.n_partitions = 2;
    return r;
}

static const uint8_t payload0[] = "batch zero records";
static const uint8_t payload1[] = "one";
static const uint8_t payload2[] = {9, 8, 7, 6, 5, 4, 3, 2, 1};

/* batches must have room for 3, parts for 3. */
static inline kq_data_fetch_response example_fetch_response(kq_data_fetch_partition_result *parts,
                                                            kq_data_batch *b)
{
    kq_data_fetch_response r;

    memset(&r, 0, sizeof r);
    memset(parts, 0, 3 * sizeof *parts);
    memset(b, 0, 3 * sizeof *b);
    b[0] = (kq_data_batch){.base_offset = 100,
                           .leader_epoch = 3,
                           .count = 2,
                           .producer_id = -1,
                           .producer_epoch = -1,
                           .base_sequence = -1,
                           .records = payload0,
                           .len = sizeof payload0};
    b[1] = (kq_data_batch){.base_offset = 102,
                           .leader_epoch = 3,
                           .count = 1,
                           .producer_id = 55,
                           .producer_epoch = 2,
                           .base_sequence = 9,
                           .records = payload1,
                           .len = sizeof payload1};
    b[2] = (kq_data_batch){.base_offset = 103,
                           .leader_epoch = 5,
                           .count = 4,
                           .producer_id = -1,
                           .producer_epoch = -1,
                           .base_sequence = -1,
                           .records = payload2,
                           .len = sizeof payload2};
    for (int i = 0; i < 3; i++)
        b[i].crc32c = kq_data_batch_crc(&b[i]);
    memcpy(parts[0].topic_id, topic_a, 16);
    parts[0].partition = 0;
    parts[0].high_watermark = 105;
    parts[0].log_start_offset = 50;
    parts[0].diverging_epoch = -1;
    parts[0].diverging_end_offset = -1;
    parts[0].current_leader_id = -1;
    parts[0].current_leader_epoch = -1;
    parts[0].batches = b;
    parts[0].n_batches = 3;
    memcpy(parts[1].topic_id, topic_b, 16);
    parts[1].partition = 4;
    parts[1].high_watermark = 10;
    parts[1].log_start_offset = 0;
    parts[1].diverging_epoch = 2;
    parts[1].diverging_end_offset = 8;
    parts[1].current_leader_id = 1;
    parts[1].current_leader_epoch = 6;
    memcpy(parts[2].topic_id, topic_b, 16);
    parts[2].partition = 5;
    parts[2].error = KQ_ERR_NOT_LEADER_OR_FOLLOWER;
    parts[2].high_watermark = -1;
    parts[2].log_start_offset = -1;
    parts[2].diverging_epoch = -1;
    parts[2].diverging_end_offset = -1;
    parts[2].current_leader_id = 3;
    parts[2].current_leader_epoch = 9;
    r.partitions = parts;
    r.n_partitions = 3;
    return r;
}

/* parts must have room for 2. */
static inline kq_list_offsets_request example_list_offsets(kq_list_offsets_partition *parts)
{
    kq_list_offsets_request r;

    memset(&r, 0, sizeof r);
    memset(parts, 0, 2 * sizeof *parts);
    memcpy(parts[0].topic_id, topic_a, 16);
    parts[0].partition = 0;
    parts[0].current_leader_epoch = 4;
    parts[0].timestamp = KQ_DATA_EARLIEST_TIMESTAMP;
    memcpy(parts[1].topic_id, topic_a, 16);
    parts[1].partition = 1;
    parts[1].current_leader_epoch = -1;
    parts[1].timestamp = KQ_DATA_LATEST_TIMESTAMP;
    r.replica_id = -1;
    r.partitions = parts;
    r.n_partitions = 2;
    return r;
}

/* parts must have room for 2. */
static inline kq_list_offsets_response
example_list_offsets_response(kq_list_offsets_partition_result *parts)
{
    kq_list_offsets_response r;

    memset(&r, 0, sizeof r);
    memset(parts, 0, 2 * sizeof *parts);
    memcpy(parts[0].topic_id, topic_a, 16);
    parts[0].partition = 0;
    parts[0].offset = 12;
    parts[0].leader_epoch = 4;
    memcpy(parts[1].topic_id, topic_a, 16);
    parts[1].partition = 1;
    parts[1].error = KQ_ERR_NOT_LEADER_OR_FOLLOWER;
    parts[1].offset = -1;
    parts[1].leader_epoch = -1;
    r.partitions = parts;
    r.n_partitions = 2;
    return r;
}

static const char *const example_md_names[2] = {"ledger", "payments.eu-1"};

static inline kq_data_metadata_request example_metadata_request(void)
{
    kq_data_metadata_request r = {.topics = example_md_names, .n_topics = 2};

    return r;
}

static const int32_t md_reps_a[3] = {1, 2, 3};
static const int32_t md_isr_a[2] = {2, 1};
static const int32_t md_reps_b[2] = {3, 1};

/* brokers must have room for 3, topics for 3, parts for 2. Topic 0 "ledger" has partitions
 * 0 (leader 1, isr 2,1) and 1 (no leader); topic 1 is unknown; topic 2 has no partitions. */
static inline kq_data_metadata_response example_metadata_response(kq_data_metadata_broker *brokers,
                                                                  kq_data_metadata_topic *topics,
                                                                  kq_data_metadata_partition *parts)
{
    kq_data_metadata_response r;

    memset(&r, 0, sizeof r);
    memset(brokers, 0, 3 * sizeof *brokers);
    memset(topics, 0, 3 * sizeof *topics);
    memset(parts, 0, 2 * sizeof *parts);
    brokers[0] = (kq_data_metadata_broker){.id = 1, .host = "127.0.0.1", .port = 19092};
    brokers[1] = (kq_data_metadata_broker){
        .id = 2, .host = "broker-2.example", .port = 19093, .rack = "rack-b"};
    brokers[2] = (kq_data_metadata_broker){.id = 3, .host = "::1", .port = 65535, .rack = ""};
    parts[0] = (kq_data_metadata_partition){.partition = 0,
                                            .leader_id = 1,
                                            .leader_epoch = 4,
                                            .replicas = md_reps_a,
                                            .n_replicas = 3,
                                            .isr = md_isr_a,
                                            .n_isr = 2};
    parts[1] = (kq_data_metadata_partition){.partition = 1,
                                            .error = KQ_ERR_LEADER_NOT_AVAILABLE,
                                            .leader_id = -1,
                                            .leader_epoch = -1,
                                            .replicas = md_reps_b,
                                            .n_replicas = 2};
    topics[0].name = "ledger";
    memcpy(topics[0].topic_id, topic_a, 16);
    topics[0].partitions = parts;
    topics[0].n_partitions = 2;
    topics[1].name = "nope";
    topics[1].error = KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    topics[2].name = "empty";
    memcpy(topics[2].topic_id, topic_b, 16);
    r.brokers = brokers;
    r.n_brokers = 3;
    r.topics = topics;
    r.n_topics = 3;
    return r;
}

#endif
