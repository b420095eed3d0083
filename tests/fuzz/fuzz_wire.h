/*
 * Helpers shared by the libFuzzer targets and their seed writer (tests/fuzz only): a minimal
 * protobuf writer that wraps fuzz bytes as the body of a Request or Response envelope
 * (proto/kq_rpc.proto), so a target can steer the api key from its first input byte and spend
 * its time inside the body decoders; a field finder that takes an encoded envelope apart again
 * (seed writer); the api key -> envelope body field tables; temp directories.
 *
 * Ownership: fuzz_wrap_* return a malloc'd buffer (the caller frees it; NULL when out of
 * memory). fuzz_find_field points into the message it is given. fuzz_tmpdir returns a
 * malloc'd path of a new directory that fuzz_rmtree removes again.
 */
#ifndef KQ_FUZZ_WIRE_H
#define KQ_FUZZ_WIRE_H

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kq/codec.h"
#include "pb_wire.h"

typedef struct fuzz_api {
    uint32_t api_key;
    uint32_t field; /* the envelope's oneof body field number for this API */
} fuzz_api;

/* Controller APIs (kq_ctl.proto), in kq_rpc.proto's body order. */
static const fuzz_api fuzz_ctl_apis[] = {
    {KQ_API_BROKER_REGISTRATION, 20},
    {KQ_API_BROKER_HEARTBEAT, 21},
    {KQ_API_UNREGISTER_BROKER, 22},
    {KQ_API_ALTER_PARTITION, 23},
    {KQ_API_CREATE_TOPICS, 24},
    {KQ_API_DELETE_TOPICS, 25},
    {KQ_API_CREATE_PARTITIONS, 26},
    {KQ_API_ELECT_LEADERS, 27},
    {KQ_API_INCREMENTAL_ALTER_CONFIGS, 28},
    {KQ_API_DESCRIBE_CONFIGS, 29},
    {KQ_API_UPDATE_FEATURES, 30},
    {KQ_API_DESCRIBE_FEATURES, 31},
    {KQ_API_DESCRIBE_CLUSTER, 32},
    {KQ_API_DESCRIBE_TOPICS, 33},
    {KQ_API_CREATE_ACLS, 34},
    {KQ_API_DESCRIBE_ACLS, 35},
    {KQ_API_DELETE_ACLS, 36},
};
#define FUZZ_N_CTL_APIS (sizeof fuzz_ctl_apis / sizeof fuzz_ctl_apis[0])

/* Data-plane APIs (kq_data.proto). */
static const fuzz_api fuzz_data_apis[] = {
    {KQ_API_PRODUCE, 50},
    {KQ_API_DATA_FETCH, 51},
    {KQ_API_LIST_OFFSETS, 52},
    {KQ_API_METADATA, 53},
};
#define FUZZ_N_DATA_APIS (sizeof fuzz_data_apis / sizeof fuzz_data_apis[0])

/* First input byte at or above this: the rest of the input is a whole envelope, unwrapped. */
#define FUZZ_RAW_ENVELOPE 0xF0

/* A varint field (wire type 0); int32 values are sign-extended as protobuf does. */
static inline size_t fuzz_put_uint(uint8_t *p, uint32_t field, uint64_t v)
{
    size_t n = kq_pb_put_varint(p, (uint64_t)field << 3);

    return n + kq_pb_put_varint(p + n, v);
}

/* A length-delimited field (wire type 2). */
static inline size_t fuzz_put_bytes(uint8_t *p, uint32_t field, const void *data, size_t len)
{
    size_t n = kq_pb_put_varint(p, (uint64_t)field << 3 | 2);

    n += kq_pb_put_varint(p + n, len);
    if (len)
        memcpy(p + n, data, len);
    return n + len;
}

/* Request {api_key, api_version 0, cluster_id "fuzz", sender_id, body field = body bytes}. */
static inline uint8_t *fuzz_wrap_request(uint32_t api_key, uint32_t field, int32_t sender_id,
                                         const uint8_t *body, size_t len, size_t *out_len)
{
    uint8_t *p = malloc(len + 64);
    size_t n = 0;

    if (!p)
        return NULL;
    n += fuzz_put_uint(p + n, 1, api_key);
    n += fuzz_put_uint(p + n, 2, 0);
    n += fuzz_put_bytes(p + n, 3, "fuzz", 4);
    n += fuzz_put_uint(p + n, 4, (uint64_t)(int64_t)sender_id);
    n += fuzz_put_bytes(p + n, field, body, len);
    *out_len = n;
    return p;
}

/* Response {api_key, error_code, body field = body bytes}. */
static inline uint8_t *fuzz_wrap_response(uint32_t api_key, int32_t error, uint32_t field,
                                          const uint8_t *body, size_t len, size_t *out_len)
{
    uint8_t *p = malloc(len + 48);
    size_t n = 0;

    if (!p)
        return NULL;
    n += fuzz_put_uint(p + n, 1, api_key);
    n += fuzz_put_uint(p + n, 2, (uint64_t)(int64_t)error);
    n += fuzz_put_bytes(p + n, field, body, len);
    *out_len = n;
    return p;
}

/* The envelope a steered target decodes (malloc'd; NULL when the input is too short): byte 0
 * at or above FUZZ_RAW_ENVELOPE, the rest as it is; otherwise byte 0 picks one of apis, for a
 * request byte 1 is the sender id, and the rest is the body wrapped into an envelope. */
static inline uint8_t *fuzz_envelope(const uint8_t *data, size_t size, const fuzz_api *apis,
                                     size_t n_apis, int request, size_t *len)
{
    const fuzz_api *api;
    size_t head = request ? 2 : 1;
    uint8_t *msg;

    if (size < head)
        return NULL;
    if (data[0] >= FUZZ_RAW_ENVELOPE) {
        *len = size - 1;
        msg = malloc(*len ? *len : 1);
        if (msg)
            memcpy(msg, data + 1, *len);
        return msg;
    }
    api = &apis[data[0] % n_apis];
    return request ? fuzz_wrap_request(api->api_key, api->field, (int8_t)data[1], data + head,
                                       size - head, len)
                   : fuzz_wrap_response(api->api_key, 0, api->field, data + head, size - head, len);
}

/* The payload of the first top-level length-delimited field `field` of an encoded message:
 * 0, or -1 if it is absent or the message does not parse. */
static inline int fuzz_find_field(const uint8_t *msg, size_t len, uint32_t field,
                                  const uint8_t **body, size_t *body_len)
{
    size_t pos = 0;

    while (pos < len) {
        uint64_t tag, v;

        if (!kq_pb_read_varint(msg, len, &pos, &tag))
            return -1;
        switch (tag & 7) {
        case 0:
            if (!kq_pb_read_varint(msg, len, &pos, &v))
                return -1;
            break;
        case 1:
            pos += 8;
            break;
        case 5:
            pos += 4;
            break;
        case 2:
            if (!kq_pb_read_varint(msg, len, &pos, &v) || v > len - pos)
                return -1;
            if ((tag >> 3) == field) {
                *body = msg + pos;
                *body_len = (size_t)v;
                return 0;
            }
            pos += (size_t)v;
            break;
        default:
            return -1;
        }
    }
    return -1;
}

/* A fresh directory under $TMPDIR (/dev/shm when there is one: no disk writes, no fsync
 * cost), malloc'd path; aborts on failure (a target cannot run without it). */
static inline char *fuzz_tmpdir(const char *name)
{
    const char *base = getenv("TMPDIR");
    char *path;

    if (!base || !base[0])
        base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    if (asprintf(&path, "%s/kq-%s-XXXXXX", base, name) < 0 || !mkdtemp(path))
        abort();
    return path;
}

static inline int fuzz_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static inline void fuzz_rmtree(const char *path)
{
    if (path)
        nftw(path, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
