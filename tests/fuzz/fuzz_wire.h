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

static inline size_t fuzz_put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;

    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* A varint field (wire type 0); int32 values are sign-extended as protobuf does. */
static inline size_t fuzz_put_uint(uint8_t *p, uint32_t field, uint64_t v)
{
    size_t n = fuzz_put_varint(p, (uint64_t)field << 3);

    return n + fuzz_put_varint(p + n, v);
}

/* A length-delimited field (wire type 2). */
static inline size_t fuzz_put_bytes(uint8_t *p, uint32_t field, const void *data, size_t len)
{
    size_t n = fuzz_put_varint(p, (uint64_t)field << 3 | 2);

    n += fuzz_put_varint(p + n, len);
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

static inline int fuzz_get_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; shift < 64 && *pos < len; shift += 7) {
        uint8_t b = p[(*pos)++];

        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
    }
    return -1;
}

/* The payload of the first top-level length-delimited field `field` of an encoded message:
 * 0, or -1 if it is absent or the message does not parse. */
static inline int fuzz_find_field(const uint8_t *msg, size_t len, uint32_t field,
                                  const uint8_t **body, size_t *body_len)
{
    size_t pos = 0;

    while (pos < len) {
        uint64_t tag, v;

        if (fuzz_get_varint(msg, len, &pos, &tag))
            return -1;
        switch (tag & 7) {
        case 0:
            if (fuzz_get_varint(msg, len, &pos, &v))
                return -1;
            break;
        case 1:
            pos += 8;
            break;
        case 5:
            pos += 4;
            break;
        case 2:
            if (fuzz_get_varint(msg, len, &pos, &v) || v > len - pos)
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
