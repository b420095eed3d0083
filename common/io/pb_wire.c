/*
 * Protobuf wire-format helpers; see pb_wire.h.
 */
#include "pb_wire.h"

#include <string.h>

bool kq_pb_read_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;

    for (unsigned shift = 0; shift < 64; shift += 7) {
        uint8_t byte;

        if (*pos >= len)
            return false;
        byte = p[(*pos)++];
        v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

size_t kq_pb_put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;

    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

static bool strings_ok(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, int depth)
{
    size_t pos = 0;

    if (depth > KQ_PB_MAX_DEPTH)
        return false;
    while (pos < len) {
        uint64_t key, v;
        const ProtobufCFieldDescriptor *f;

        if (!kq_pb_read_varint(p, len, &pos, &key))
            return false;
        switch (key & 7) {
        case 0:
            if (!kq_pb_read_varint(p, len, &pos, &v))
                return false;
            break;
        case 1:
            if (len - pos < 8)
                return false;
            pos += 8;
            break;
        case 5:
            if (len - pos < 4)
                return false;
            pos += 4;
            break;
        case 2:
            if (!kq_pb_read_varint(p, len, &pos, &v) || v > len - pos)
                return false;
            f = (key >> 3) <= UINT32_MAX
                    ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3))
                    : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p + pos, 0, (size_t)v))
                return false;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
                !strings_ok(f->descriptor, p + pos, (size_t)v, depth + 1))
                return false;
            pos += (size_t)v;
            break;
        default:
            return false; /* groups: none in our schemas */
        }
    }
    return true;
}

bool kq_pb_strings_ok(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len)
{
    return strings_ok(d, p, len, 0);
}
