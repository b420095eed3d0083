/*
 * Protobuf wire-format helpers; see pb_wire.h.
 */
#include "pb_wire.h"

#include <stdio.h>
#include <string.h>

#include "kq/error.h"

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

/* ---------------------------------------------------------------------------------------- */
/* What protobuf-c 1.4.1's protobuf_c_message_unpack allocates, counted from the bytes: per
 * message its struct, a 32-byte ScannedMember per field beyond the first 16 (in doubling
 * slabs), one array per repeated field, one ProtobufCMessageUnknownField per unknown field
 * plus a copy of it, and a copy of every string (NUL added) and non-empty bytes value. */

#define SCANNED_MEMBER_BYTES 32 /* sizeof(ScannedMember) in protobuf-c.c */
#define FIRST_SLAB_MEMBERS 16   /* the first slab lives on protobuf-c's stack */
#define MAX_TRACKED_FIELDS 256  /* per message: repeats of singular messages, array sizes */

typedef struct unpack_walk {
    size_t cost;
    size_t budget;
    bool nul; /* a string field holds a NUL byte */
    char *why;
    size_t whylen;
} unpack_walk;

/* One glibc malloc chunk for n bytes: an 8-byte header, 16-byte aligned, 32 at the least;
 * from 128 KiB (glibc's first mmap threshold) whole pages. */
static size_t heap_bytes(size_t n)
{
    if (n >= ((size_t)128 << 10))
        return (n + 16 + 4095) & ~(size_t)4095;
    return n <= 24 ? 32 : (n + 8 + 15) & ~(size_t)15;
}

static size_t repeated_elt_bytes(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    default:
        return 4; /* 32-bit integers, float, enum */
    }
}

static bool packable(ProtobufCType t)
{
    return t != PROTOBUF_C_TYPE_STRING && t != PROTOBUF_C_TYPE_BYTES &&
           t != PROTOBUF_C_TYPE_MESSAGE;
}

/* Elements protobuf-c counts in a packed run of type t (it allocates that many before it
 * parses them): 0 for a fixed-width run it refuses; varints are the bytes that end one, an
 * unterminated last one included in the run's length. */
static size_t packed_count(ProtobufCType t, const uint8_t *p, size_t len)
{
    size_t n = 0;

    switch (t) {
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return len % 8 ? 0 : len / 8;
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        return len % 4 ? 0 : len / 4;
    case PROTOBUF_C_TYPE_BOOL: /* protobuf-c counts every byte as one */
        return len;
    default: /* varints */
        for (size_t i = 0; i < len; i++)
            n += !(p[i] & 0x80);
        return n;
    }
}

/* A field key as protobuf-c 1.4.1 reads it: at most 5 bytes, the first with a non-zero field
 * number, bits past 32 dropped. Returns the bytes used, 0 where protobuf-c stops. */
static size_t read_key(const uint8_t *p, size_t len, uint32_t *field, unsigned *wire_type)
{
    size_t max = len < 5 ? len : 5;
    uint32_t f;

    if (len == 0 || (p[0] & 0xf8) == 0)
        return 0;
    *wire_type = p[0] & 7;
    f = (p[0] & 0x7f) >> 3;
    if (!(p[0] & 0x80)) {
        *field = f;
        return 1;
    }
    for (size_t i = 1, shift = 4; i < max; i++, shift += 7) {
        f |= (uint32_t)(p[i] & 0x7f) << shift;
        if (!(p[i] & 0x80)) {
            *field = f;
            return i + 1;
        }
    }
    return 0;
}

static bool walk_add(unpack_walk *w, size_t n)
{
    if (n > w->budget - w->cost) {
        kq_errf(w->why, w->whylen,
                "decoding it would take more than %zu bytes of memory (the limit for a message "
                "of this size)",
                w->budget);
        return false;
    }
    w->cost += n;
    return true;
}

/* false: over the limits (w->why says why); true: within them, or the bytes stop parsing
 * (protobuf-c then fails at the same place, having allocated no more than counted). */
static bool walk_message(unpack_walk *w, const ProtobufCMessageDescriptor *d, const uint8_t *p,
                         size_t len, int depth)
{
    uint64_t seen[MAX_TRACKED_FIELDS / 64];
    size_t array_bytes[MAX_TRACKED_FIELDS]; /* what each repeated field's array holds */
    size_t pos = 0, n_members = 0, n_unknown = 0;
    size_t scanned_room = FIRST_SLAB_MEMBERS, next_slab = 2 * FIRST_SLAB_MEMBERS;

    if (depth > KQ_PB_MAX_DEPTH) {
        kq_errf(w->why, w->whylen, "messages nest deeper than %d levels", KQ_PB_MAX_DEPTH);
        return false;
    }
    if (d->n_fields > MAX_TRACKED_FIELDS) { /* no schema of ours comes near */
        kq_errf(w->why, w->whylen, "%s has %u fields, more than the %d this check follows", d->name,
                d->n_fields, MAX_TRACKED_FIELDS);
        return false;
    }
    /* zero only what this message can use: the walk may meet many small messages */
    memset(seen, 0, (d->n_fields + 63) / 64 * sizeof seen[0]);
    memset(array_bytes, 0, d->n_fields * sizeof array_bytes[0]);
    if (!walk_add(w, heap_bytes(d->sizeof_message)))
        return false;
    if ((d->n_fields + 7) / 8 > 16 && !walk_add(w, heap_bytes((d->n_fields + 7) / 8)))
        return false;
    while (pos < len) {
        uint64_t v = 0;
        uint32_t field;
        unsigned wire_type;
        size_t start, member_len, used = read_key(p + pos, len - pos, &field, &wire_type);
        const ProtobufCFieldDescriptor *f;
        unsigned idx;
        bool first;

        if (used == 0)
            return true;
        pos += used;
        start = pos;
        switch (wire_type) {
        case 0:
            if (!kq_pb_read_varint(p, len, &pos, &v))
                return true;
            break;
        case 1:
        case 5:
            if (len - pos < (wire_type == 1 ? 8u : 4u))
                return true;
            pos += wire_type == 1 ? 8 : 4;
            break;
        case 2:
            /* protobuf-c: a length of at most 5 bytes and INT_MAX */
            if (!kq_pb_read_varint(p, pos + 5 < len ? pos + 5 : len, &pos, &v) || v > INT32_MAX ||
                v > len - pos)
                return true;
            pos += (size_t)v;
            break;
        default:
            return true; /* groups: protobuf-c refuses them */
        }
        member_len = pos - start;
        if (++n_members > scanned_room) { /* each new slab doubles the last one */
            if (!walk_add(w, heap_bytes(next_slab * SCANNED_MEMBER_BYTES)))
                return false;
            scanned_room += next_slab;
            next_slab *= 2;
        }
        f = protobuf_c_message_descriptor_get_field(d, field);
        if (f == NULL) {
            n_unknown++;
            if (!walk_add(w, heap_bytes(member_len)))
                return false;
            continue;
        }
        idx = (unsigned)(f - d->fields);
        first = !(seen[idx / 64] & ((uint64_t)1 << (idx % 64)));
        seen[idx / 64] |= (uint64_t)1 << (idx % 64);
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = wire_type == 2 && packable(f->type)
                           ? packed_count(f->type, p + pos - (size_t)v, (size_t)v)
                           : 1;

            /* elements count as they come (a long run stops the walk early); malloc's
             * overhead on the whole array is added at the end */
            array_bytes[idx] += n * repeated_elt_bytes(f->type);
            if (!walk_add(w, n * repeated_elt_bytes(f->type)))
                return false;
        } else if (f->type == PROTOBUF_C_TYPE_MESSAGE && !first) {
            kq_errf(w->why, w->whylen, "field %s of %s occurs more than once", f->name, d->name);
            return false;
        }
        if (wire_type != 2)
            continue;
        switch (f->type) {
        case PROTOBUF_C_TYPE_STRING:
            if (!walk_add(w, heap_bytes((size_t)v + 1)))
                return false;
            w->nul = w->nul || memchr(p + pos - (size_t)v, 0, (size_t)v);
            break;
        case PROTOBUF_C_TYPE_BYTES:
            if (v > 0 && !walk_add(w, heap_bytes((size_t)v)))
                return false;
            break;
        case PROTOBUF_C_TYPE_MESSAGE:
            if (!walk_message(w, f->descriptor, p + pos - (size_t)v, (size_t)v, depth + 1))
                return false;
            break;
        default:
            break;
        }
    }
    /* each array's chunk: its elements were counted already, add what malloc adds to them */
    for (unsigned i = 0; i < d->n_fields; i++)
        if (array_bytes[i] > 0 && !walk_add(w, heap_bytes(array_bytes[i]) - array_bytes[i]))
            return false;
    return (n_unknown == 0 ||
            walk_add(w, heap_bytes(n_unknown * sizeof(ProtobufCMessageUnknownField))));
}

bool kq_pb_top_varint(const uint8_t *p, size_t len, uint32_t field, uint64_t *out)
{
    size_t pos = 0;
    bool found = false;

    while (pos < len) {
        uint32_t f;
        unsigned wire_type;
        uint64_t v;
        size_t used = read_key(p + pos, len - pos, &f, &wire_type);

        if (used == 0)
            return found;
        pos += used;
        switch (wire_type) {
        case 0:
            if (!kq_pb_read_varint(p, len, &pos, &v))
                return found;
            if (f == field) {
                *out = v;
                found = true;
            }
            break;
        case 1:
        case 5:
            if (len - pos < (wire_type == 1 ? 8u : 4u))
                return found;
            pos += wire_type == 1 ? 8 : 4;
            break;
        case 2:
            if (!kq_pb_read_varint(p, len, &pos, &v) || v > len - pos)
                return found;
            pos += (size_t)v;
            break;
        default:
            return found;
        }
    }
    return found;
}

static size_t budget(size_t frame, size_t factor, size_t slack)
{
    if (frame > (SIZE_MAX - slack) / factor)
        return SIZE_MAX;
    return frame * factor + slack;
}

size_t kq_pb_decode_budget(size_t frame)
{
    return budget(frame, KQ_PB_DECODE_FACTOR, KQ_PB_DECODE_SLACK);
}

size_t kq_pb_answer_budget(size_t frame)
{
    return budget(frame, KQ_PB_ANSWER_FACTOR, KQ_PB_ANSWER_SLACK);
}

static bool unpack_cost(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
                        size_t limit, size_t *cost, bool *nul, char *why, size_t whylen)
{
    unpack_walk w = {.budget = limit, .why = why, .whylen = whylen};
    bool ok;

    if (why && whylen)
        why[0] = '\0';
    ok = walk_message(&w, d, p, len, 0);
    if (cost)
        *cost = w.cost;
    if (nul)
        *nul = w.nul;
    return ok;
}

bool kq_pb_unpack_cost(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
                       size_t limit, size_t *cost, char *why, size_t whylen)
{
    return unpack_cost(d, p, len, limit, cost, NULL, why, whylen);
}

int kq_pb_unpack_request(const uint8_t *p, size_t len, Kq__Request **out, uint32_t *api_key,
                         bool *nul, char *why, size_t whylen)
{
    static const uint8_t empty[1];
    uint64_t key = 0;
    int rc = 0;

    *out = NULL;
    if (p == NULL && len > 0) {
        kq_errf(why, whylen, "request does not parse (no buffer)");
        return KQ_ERR_MALFORMED;
    }
    *out = (Kq__Request *)kq_pb_unpack(&kq__request__descriptor, p ? p : empty, len, KQ_PB_REQUEST,
                                       &rc, nul, why, whylen);
    if (*out != NULL)
        return 0;
    if (rc == KQ_ERR_MALFORMED)
        kq_errf(why, whylen, "request does not parse (%zu bytes)", len);
    else if (kq_pb_top_varint(p ? p : empty, len, 1, &key) && key <= UINT32_MAX)
        *api_key = (uint32_t)key; /* refused unread: still name its API */
    return rc;
}

ProtobufCMessage *kq_pb_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
                               kq_pb_source source, int *err, bool *nul, char *why, size_t whylen)
{
    size_t limit = source == KQ_PB_ANSWER ? kq_pb_answer_budget(len) : kq_pb_decode_budget(len);
    ProtobufCMessage *m;

    if (!unpack_cost(d, p, len, limit, NULL, nul, why, whylen)) {
        *err = KQ_ERR_INVALID_REQUEST;
        return NULL;
    }
    m = protobuf_c_message_unpack(d, NULL, len, p);
    if (!m)
        *err = KQ_ERR_MALFORMED;
    return m;
}
