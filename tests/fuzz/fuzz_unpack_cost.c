/*
 * libFuzzer target: the limits before allocation (common/wire/pb_wire.c). The cost that
 * kq_pb_unpack_cost counts from the bytes must bound what protobuf-c really allocates for
 * them, or a request could pass the limit and cost more.
 *
 * Input: byte 0 picks the message type (kq.Request, kq.Response, kq.Record); the rest is the
 * message. Check: when the walk accepts the bytes, protobuf_c_message_unpack through a
 * counting allocator never holds more than the walk counted (chunks sized as glibc carves
 * them), and kq_pb_unpack agrees with the walk. Whenever kq_pb_unpack decodes, the NUL flag
 * it returns agrees with a separate, naive walk of the bytes (has_nul below).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "kq_record.pb-c.h"
#include "kq_rpc.pb-c.h"
#include "pb_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t live, peak;

static size_t chunk(size_t n)
{
    if (n >= ((size_t)128 << 10))
        return (n + 16 + 4095) & ~(size_t)4095;
    return n <= 24 ? 32 : (n + 8 + 15) & ~(size_t)15;
}

static void *count_alloc(void *arg, size_t n)
{
    size_t *p = malloc(n + 16);

    (void)arg;
    if (p == NULL)
        return NULL;
    p[0] = n;
    live += chunk(n);
    if (live > peak)
        peak = live;
    return (char *)p + 16;
}

static void count_free(void *arg, void *q)
{
    (void)arg;
    if (q != NULL) {
        size_t *p = (size_t *)(void *)((char *)q - 16);

        live -= chunk(p[0]);
        free(p);
    }
}

static ProtobufCAllocator counting = {count_alloc, count_free, NULL};

/* The oracle for kq_pb_unpack's *nul: does a string field, at any depth, hold a NUL byte?
 * Only called on bytes protobuf-c unpacked, so they parse. */
static bool has_nul(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len)
{
    size_t pos = 0;

    while (pos < len) {
        uint64_t key, v = 0;
        const ProtobufCFieldDescriptor *f;

        if (!kq_pb_read_varint(p, len, &pos, &key))
            return false;
        if ((key & 7) == 0 && !kq_pb_read_varint(p, len, &pos, &v))
            return false;
        if ((key & 7) == 1 || (key & 7) == 5)
            pos += (key & 7) == 1 ? 8 : 4;
        if ((key & 7) != 2)
            continue;
        if (!kq_pb_read_varint(p, len, &pos, &v) || v > len - pos)
            return false;
        f = (key >> 3) <= UINT32_MAX
                ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3))
                : NULL;
        if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p + pos, 0, (size_t)v))
            return true;
        if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && has_nul(f->descriptor, p + pos, (size_t)v))
            return true;
        pos += (size_t)v;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const ProtobufCMessageDescriptor *types[] = {
        &kq__request__descriptor, &kq__response__descriptor, &kq__record__descriptor};
    static const uint8_t empty[1];
    const ProtobufCMessageDescriptor *d;
    const uint8_t *p = size > 1 ? data + 1 : empty;
    size_t len = size > 1 ? size - 1 : 0, cost = 0;
    ProtobufCMessage *m;
    char why[256];
    int err = 0;
    bool ok, kq_parsed, nul = false;

    if (size == 0)
        return 0;
    d = types[data[0] % 3];
    ok = kq_pb_unpack_cost(d, p, len, SIZE_MAX, &cost, why, sizeof why);
    m = kq_pb_unpack(d, p, len, KQ_PB_REQUEST, &err, &nul, why, sizeof why);
    kq_parsed = m != NULL;
    if (m != NULL)
        protobuf_c_message_free_unpacked(m, NULL);
    if (kq_parsed)
        FUZZ_CHECK(nul == has_nul(d, p, len));
    if (!ok) {
        /* refused: a repeated singular message or too deep, never for its cost */
        FUZZ_CHECK(!kq_parsed && err == KQ_ERR_INVALID_REQUEST && why[0] != '\0');
        return 0;
    }
    live = peak = 0;
    m = protobuf_c_message_unpack(d, &counting, len, p);
    if (m != NULL)
        protobuf_c_message_free_unpacked(m, &counting);
    FUZZ_CHECK(live == 0);
    FUZZ_CHECK(peak <= cost);
    if (cost > kq_pb_decode_budget(len)) {
        FUZZ_CHECK(!kq_parsed && err == KQ_ERR_INVALID_REQUEST);
    } else {
        /* within the budget kq_pb_unpack decodes exactly what protobuf-c decodes */
        FUZZ_CHECK(kq_parsed == (m != NULL));
        FUZZ_CHECK(kq_parsed || err == KQ_ERR_MALFORMED);
    }
    return 0;
}
