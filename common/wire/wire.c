/*
 * The table-driven message layer: see wire.h.
 */
#include "wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/api.h"
#include "kq/error.h"
#include "kq_rpc.pb-c.h"

/* ---- errors, pack, clip ----------------------------------------------------------------- */

int kq_wire_fail(char *errbuf, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;

    if (errbuf && errlen) {
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

int kq_wire_pack(const ProtobufCMessage *msg, kq_buf *out)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *p = malloc(n ? n : 1);

    if (!p)
        return KQ_ERR_NOMEM;
    out->len = protobuf_c_message_pack(msg, p);
    out->data = p;
    return 0;
}

char *kq_wire_clip(const char *m, char *buf, size_t max)
{
    size_t n;

    if (!m || !m[0])
        return NULL;
    n = strnlen(m, max + 1);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)m[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(buf, m, n);
    buf[n] = '\0';
    return buf;
}

/* ---- protobuf-c member access ----------------------------------------------------------- */

#define AT(base, off) ((void *)((char *)(base) + (off)))
#define CAT(base, off) ((const void *)((const char *)(base) + (off)))

static bool pb_present(const ProtobufCFieldDescriptor *fd, const void *pb)
{
    if (fd->label == PROTOBUF_C_LABEL_REQUIRED)
        return true;
    if (fd->label == PROTOBUF_C_LABEL_REPEATED)
        return *(const size_t *)CAT(pb, fd->quantifier_offset) > 0;
    if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        return *(const uint32_t *)CAT(pb, fd->quantifier_offset) == fd->id;
    if (fd->type == PROTOBUF_C_TYPE_STRING || fd->type == PROTOBUF_C_TYPE_MESSAGE)
        return *(void *const *)CAT(pb, fd->offset) != NULL;
    return *(const protobuf_c_boolean *)CAT(pb, fd->quantifier_offset);
}

static void pb_set_present(const ProtobufCFieldDescriptor *fd, void *pb)
{
    if (fd->label == PROTOBUF_C_LABEL_OPTIONAL && fd->type != PROTOBUF_C_TYPE_STRING &&
        fd->type != PROTOBUF_C_TYPE_MESSAGE)
        *(protobuf_c_boolean *)AT(pb, fd->quantifier_offset) = 1;
}

static bool pb_is_64(const ProtobufCFieldDescriptor *fd)
{
    switch (fd->type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return true;
    default:
        return false;
    }
}

static int64_t pb_get_int(const ProtobufCFieldDescriptor *fd, const void *p)
{
    switch (fd->type) {
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return *(const uint32_t *)p;
    case PROTOBUF_C_TYPE_BOOL:
        return *(const protobuf_c_boolean *)p != 0;
    default:
        return pb_is_64(fd) ? *(const int64_t *)p : *(const int32_t *)p;
    }
}

static void pb_put_int(const ProtobufCFieldDescriptor *fd, void *p, int64_t v)
{
    if (fd->type == PROTOBUF_C_TYPE_BOOL)
        *(protobuf_c_boolean *)p = v != 0;
    else if (pb_is_64(fd))
        *(int64_t *)p = v;
    else
        *(int32_t *)p = (int32_t)v;
}

static int64_t c_get_int(uint8_t kind, const void *p)
{
    switch (kind) {
    case KQ_WK_I8:
        return *(const int8_t *)p;
    case KQ_WK_I16:
        return *(const int16_t *)p;
    case KQ_WK_I32:
        return *(const int32_t *)p;
    case KQ_WK_BOOL:
        return *(const bool *)p;
    default:
        return *(const int64_t *)p;
    }
}

static void c_put_int(uint8_t kind, void *p, int64_t v)
{
    switch (kind) {
    case KQ_WK_I8:
        *(int8_t *)p = (int8_t)v;
        break;
    case KQ_WK_I16:
        *(int16_t *)p = (int16_t)v;
        break;
    case KQ_WK_I32:
        *(int32_t *)p = (int32_t)v;
        break;
    case KQ_WK_BOOL:
        *(bool *)p = v != 0;
        break;
    default:
        *(int64_t *)p = v;
    }
}

static bool is_int_kind(uint8_t kind)
{
    return kind <= KQ_WK_BOOL;
}

/* A list's count in the C struct: int32_t, or size_t with KQ_WF_SIZE. */
static int64_t c_count(const kq_wire_field *f, const void *c)
{
    return (f->flags & KQ_WF_SIZE) ? (int64_t) * (const size_t *)CAT(c, f->aux)
                                   : *(const int32_t *)CAT(c, f->aux);
}

static void c_set_count(const kq_wire_field *f, void *c, size_t n)
{
    if (f->flags & KQ_WF_SIZE)
        *(size_t *)AT(c, f->aux) = n;
    else
        *(int32_t *)AT(c, f->aux) = (int32_t)n;
}

/* The descriptor of f's field. Tables mostly list fields in .proto order, so the same position
 * is tried first (one strcmp) before protobuf-c's search by name. */
static const ProtobufCFieldDescriptor *pb_field(const kq_wire_msg *m, const kq_wire_field *f)
{
    size_t i = (size_t)(f - m->fields);

    if (i < m->desc->n_fields && !strcmp(m->desc->fields[i].name, f->name))
        return &m->desc->fields[i];
    return protobuf_c_message_descriptor_get_field_by_name(m->desc, f->name);
}

/* ---- decode ----------------------------------------------------------------------------- */

typedef struct dec {
    kq_arena *a; /* NULL: malloc and own */
    char *errbuf;
    size_t errlen;
} dec;

static void *dalloc(dec *d, size_t n, size_t size)
{
    return d->a ? kq_arena_alloc(d->a, n, size) : calloc(n ? n : 1, size ? size : 1);
}

/* A copy of n bytes at p, or p itself when the arena lets the result borrow the tree. */
static void *dkeep(dec *d, const void *p, size_t n, bool nul)
{
    char *q;

    if (d->a)
        return (void *)p;
    if (!(q = malloc(n + (nul ? 1 : 0) ? n + (nul ? 1 : 0) : 1)))
        return NULL;
    memcpy(q, p, n);
    if (nul)
        q[n] = '\0';
    return q;
}

/* Where a decode is, from the field being decoded up to the message: formatted only for an
 * error message ("AlterPartitionRequest.topics[2].partitions[0].leader_epoch"). */
typedef struct where {
    const struct where *up;
    const char *name; /* a field (the message's name at the top), or NULL for an element */
    size_t index;     /* the element's index in the list above it */
} where;

static size_t where_str(const where *w, char *buf, size_t cap)
{
    size_t n = w->up ? where_str(w->up, buf, cap) : 0;
    int k = n >= cap  ? 0
            : w->name ? snprintf(buf + n, cap - n, "%s%s", w->up ? "." : "", w->name)
                      : snprintf(buf + n, cap - n, "[%zu]", w->index);

    return k < 0 ? n : n + (size_t)k < cap ? n + (size_t)k : cap;
}

/* The field at `at`, then what is wrong with it ("[i] ..." for an element of it). */
__attribute__((format(printf, 4, 5))) static int bad_at(const dec *d, const where *at, int code,
                                                        const char *fmt, ...)
{
    char path[256], msg[256];
    va_list ap;

    where_str(at, path, sizeof path);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return kq_wire_fail(d->errbuf, d->errlen, code, "%s%s%s", path, msg[0] == '[' ? "" : " ", msg);
}

#define BAD(...) bad_at(d, at, KQ_ERR_INVALID_REQUEST, __VA_ARGS__)
#define NOMEM() bad_at(d, at, KQ_ERR_NOMEM, "could not be decoded: out of memory")

static int decode_msg(dec *d, const kq_wire_msg *m, const ProtobufCMessage *pb, void *c,
                      const where *at);

/* Repeated strings: each checked; the pointer array is borrowed (arena) or copied with every
 * string (no arena). */
static int decode_strs(dec *d, const kq_wire_field *f, char *const *v, size_t n, void *c,
                       const where *at)
{
    char **out = d->a ? (char **)v : calloc(n, sizeof *out);

    if (!out)
        return NOMEM();
    *(char ***)AT(c, f->off) = out;
    c_set_count(f, c, n);
    for (size_t i = 0; i < n; i++) {
        size_t len = strnlen(v[i], (size_t)f->elem_max + 1);

        if (len > (size_t)f->elem_max)
            return BAD("[%zu] is longer than %lld bytes", i, (long long)f->elem_max);
        if (!len && (f->flags & KQ_WF_NONEMPTY))
            return BAD("[%zu] is empty", i);
        if (!d->a && !(out[i] = dkeep(d, v[i], len, true)))
            return NOMEM();
    }
    return 0;
}

/* Repeated bytes: a pointer array at off and a length array at aux2; each value borrowed
 * (arena; an empty one points at a static byte, never NULL) or copied (no arena). */
static int decode_blobs(dec *d, const kq_wire_field *f, const ProtobufCBinaryData *v, size_t n,
                        void *c, const where *at)
{
    static const uint8_t empty[1];
    const uint8_t **ptrs = dalloc(d, n, sizeof *ptrs);
    size_t *lens = dalloc(d, n, sizeof *lens);

    *(const uint8_t ***)AT(c, f->off) = ptrs;
    *(size_t **)AT(c, f->aux2) = lens;
    if (!ptrs || !lens)
        return NOMEM();
    c_set_count(f, c, n);
    for (size_t i = 0; i < n; i++) {
        if (v[i].len > (uint64_t)f->elem_max)
            return BAD("[%zu] is %zu bytes (at most %lld)", i, v[i].len, (long long)f->elem_max);
        lens[i] = v[i].len;
        if (!(ptrs[i] = v[i].len ? dkeep(d, v[i].data, v[i].len, false)
                                 : (d->a ? empty : dkeep(d, empty, 0, false))))
            return NOMEM();
    }
    return 0;
}

/* Every integer of an inline sub-table (its fields live in the parent) set to `absent`. */
static void put_absent(const kq_wire_msg *m, void *c, int64_t absent)
{
    for (size_t i = 0; i < m->n_fields; i++)
        if (is_int_kind(m->fields[i].kind))
            c_put_int(m->fields[i].kind, AT(c, m->fields[i].off), absent);
}

static int decode_field(dec *d, const kq_wire_field *f, const ProtobufCFieldDescriptor *fd,
                        const ProtobufCMessage *pb, void *c, const where *at)
{
    const void *src = CAT(pb, fd->offset);
    void *dst = AT(c, f->off);
    bool present = pb_present(fd, pb);

    if (is_int_kind(f->kind)) {
        int64_t v = pb_get_int(fd, src);

        if (!present && (f->flags & KQ_WF_ABSENT))
            v = f->absent;
        else if (v < f->min || v > f->max)
            return BAD("%lld is out of range [%lld, %lld]", (long long)v, (long long)f->min,
                       (long long)f->max);
        c_put_int(f->kind, dst, v);
        return 0;
    }
    switch (f->kind) {
    case KQ_WK_STR: {
        const char *s = *(const char *const *)src;
        size_t n;

        if (!s)
            return 0;
        n = strnlen(s, (size_t)f->max + 1);
        if (n > (size_t)f->max)
            return BAD("is longer than %lld bytes", (long long)f->max);
        if (!n && (f->flags & KQ_WF_NONEMPTY))
            return BAD("is empty");
        if (!(*(const char **)dst = dkeep(d, s, n, true)))
            return NOMEM();
        return 0;
    }
    case KQ_WK_UUID: {
        const ProtobufCBinaryData *b = src;

        if (present && b->len != 16)
            return BAD("has %zu bytes, not 16", b->len);
        if (f->flags & KQ_WF_HAS)
            *(bool *)AT(c, f->aux) = present;
        if (present)
            memcpy(dst, b->data, 16);
        if ((f->flags & KQ_WF_NONZERO) && (!present || !memcmp(dst, (uint8_t[16]){0}, 16)))
            return BAD("is %s", present ? "all zero" : "missing");
        return 0;
    }
    case KQ_WK_CONST: {
        int64_t v = pb_get_int(fd, src);

        if (v < f->min || v > f->max)
            return BAD("%lld is out of range [%lld, %lld]", (long long)v, (long long)f->min,
                       (long long)f->max);
        return 0;
    }
    case KQ_WK_TEXT:
        if (present && (f->flags & KQ_WF_STRICT) &&
            strnlen(*(const char *const *)src, (size_t)f->max + 1) > (size_t)f->max)
            return BAD("is longer than %lld bytes", (long long)f->max);
        if (!present || !kq_wire_clip(*(const char *const *)src, dst, (size_t)f->max))
            *(char *)dst = '\0';
        return 0;
    case KQ_WK_BYTES: {
        static const uint8_t empty[1];
        const ProtobufCBinaryData *b = src;

        if (b->len > (uint64_t)f->max)
            return BAD("has %zu bytes (max %lld)", b->len, (long long)f->max);
        if (b->len && !(*(void **)dst = dkeep(d, b->data, b->len, false)))
            return NOMEM();
        if (!b->len && d->a) /* a borrowed empty value is never NULL */
            *(const uint8_t **)dst = empty;
        *(size_t *)AT(c, f->aux) = b->len;
        return 0;
    }
    case KQ_WK_IDS:
    case KQ_WK_STRS:
    case KQ_WK_BLOBS:
    case KQ_WK_MSGS: {
        size_t n = *(const size_t *)CAT(pb, fd->quantifier_offset);
        void *arr;

        if (n > (uint64_t)f->max)
            return BAD("has %zu entries (max %lld)", n, (long long)f->max);
        if (!n && (f->flags & KQ_WF_NONEMPTY) && f->kind != KQ_WK_STRS)
            return BAD("has no entries");
        if (!n)
            return 0;
        if (f->kind == KQ_WK_STRS)
            return decode_strs(d, f, *(char *const *const *)src, n, c, at);
        if (f->kind == KQ_WK_BLOBS)
            return decode_blobs(d, f, *(ProtobufCBinaryData *const *)src, n, c, at);
        if (f->flags & KQ_WF_FIXED) /* the array is inline, of f->max elements */
            arr =
                f->kind == KQ_WK_IDS ? memcpy(dst, *(void *const *)src, n * sizeof(int32_t)) : dst;
        else
            arr = f->kind == KQ_WK_IDS ? dkeep(d, *(void *const *)src, n * sizeof(int32_t), false)
                                       : dalloc(d, n, f->sub->size);
        if (!arr)
            return NOMEM();
        if (!(f->flags & KQ_WF_FIXED))
            *(void **)dst = arr;
        c_set_count(f, c, n);
        for (size_t i = 0; f->kind == KQ_WK_MSGS && i < n; i++) {
            where elem = {at, NULL, i};
            int rc;

            if ((rc = decode_msg(d, f->sub, (*(ProtobufCMessage *const *const *)src)[i],
                                 (char *)arr + i * f->sub->size, &elem)))
                return rc;
        }
        return 0;
    }
    case KQ_WK_MSG:
        if ((f->flags & KQ_WF_INLINE) && !present)
            put_absent(f->sub, c, f->absent);
        if (f->flags & KQ_WF_HAS)
            *(bool *)AT(c, f->aux) = present;
        return present ? decode_msg(d, f->sub, *(ProtobufCMessage *const *)src, dst, at) : 0;
    default:
        return BAD("has an unknown kind %d", f->kind);
    }
}

static int decode_msg(dec *d, const kq_wire_msg *m, const ProtobufCMessage *pb, void *c,
                      const where *at)
{
    for (size_t i = 0; i < m->n_fields; i++) {
        const kq_wire_field *f = &m->fields[i];
        const ProtobufCFieldDescriptor *fd = pb_field(m, f);
        where field = {at, f->name, 0};
        int rc;

        if (!fd)
            return kq_wire_fail(d->errbuf, d->errlen, KQ_ERR_INTERNAL,
                                "%s has no field %s (wire table)", m->desc->name, f->name);
        if ((rc = decode_field(d, f, fd, pb, c, &field)))
            return rc;
    }
    return 0;
}

int kq_wire_decode(const kq_wire_msg *m, const ProtobufCMessage *pb, void *c, kq_arena *a,
                   char *errbuf, size_t errlen)
{
    dec d = {a, errbuf, errlen};
    where top = {NULL, m->desc->short_name, 0};

    if (!m->in_place)
        memset(c, 0, m->size);
    return decode_msg(&d, m, pb, c, &top);
}

void kq_wire_free(const kq_wire_msg *m, void *c)
{
    for (size_t i = 0; c && i < m->n_fields; i++) {
        const kq_wire_field *f = &m->fields[i];
        void *p;

        if (f->kind == KQ_WK_MSG) {
            kq_wire_free(f->sub, AT(c, f->off));
            continue;
        }
        if (f->kind != KQ_WK_STR && f->kind != KQ_WK_BYTES && f->kind != KQ_WK_IDS &&
            f->kind != KQ_WK_STRS && f->kind != KQ_WK_BLOBS && f->kind != KQ_WK_MSGS)
            continue;
        if (f->flags & KQ_WF_FIXED) {
            for (int64_t k = 0; f->kind == KQ_WK_MSGS && k < c_count(f, c); k++)
                kq_wire_free(f->sub, (char *)AT(c, f->off) + (size_t)k * f->sub->size);
            continue;
        }
        p = *(void **)AT(c, f->off);
        for (int64_t k = 0;
             p && (f->kind == KQ_WK_STRS || f->kind == KQ_WK_BLOBS) && k < c_count(f, c); k++)
            free(((void **)p)[k]);
        for (int64_t k = 0; p && f->kind == KQ_WK_MSGS && k < c_count(f, c); k++)
            kq_wire_free(f->sub, (char *)p + (size_t)k * f->sub->size);
        if (f->kind == KQ_WK_BLOBS)
            free(*(void **)AT(c, f->aux2));
        free(p);
    }
}

/* ---- encode ----------------------------------------------------------------------------- */

static const uint8_t empty_bytes[1];

/* An inline sub-message is sent when one of its keys (or, with none, of its integers) is not
 * the absent value. */
static bool inline_present(const kq_wire_field *f, const void *c)
{
    bool keys = false, any = false;

    for (size_t i = 0; i < f->sub->n_fields; i++) {
        const kq_wire_field *g = &f->sub->fields[i];
        bool set = is_int_kind(g->kind) && c_get_int(g->kind, CAT(c, g->off)) != f->absent;

        if (g->flags & KQ_WF_KEY) {
            if (set)
                return true;
            keys = true;
        }
        any = any || set;
    }
    return !keys && any;
}

static int encode_field(const kq_wire_field *f, const ProtobufCFieldDescriptor *fd, const void *c,
                        ProtobufCMessage *pb, kq_arena *a)
{
    const void *src = CAT(c, f->off);
    void *dst = AT(pb, fd->offset);

    if (is_int_kind(f->kind)) {
        int64_t v = c_get_int(f->kind, src);

        if ((f->flags & KQ_WF_ABSENT) && v == f->absent)
            return 0;
        pb_put_int(fd, dst, v);
        pb_set_present(fd, pb);
        return 0;
    }
    switch (f->kind) {
    case KQ_WK_STR: {
        const char *s = *(const char *const *)src;

        if (!s && fd->label == PROTOBUF_C_LABEL_REQUIRED)
            s = "";
        *(const char **)dst = s;
        return 0;
    }
    case KQ_WK_UUID:
        if ((f->flags & KQ_WF_HAS)
                ? !*(const bool *)CAT(c, f->aux)
                : fd->label != PROTOBUF_C_LABEL_REQUIRED && !memcmp(src, (uint8_t[16]){0}, 16))
            return 0;
        *(ProtobufCBinaryData *)dst = (ProtobufCBinaryData){16, (uint8_t *)src};
        pb_set_present(fd, pb);
        return 0;
    case KQ_WK_CONST:
        pb_put_int(fd, dst, f->absent);
        pb_set_present(fd, pb);
        return 0;
    case KQ_WK_TEXT: /* a required string is sent empty; an optional one only when not */
        if (strnlen(src, (size_t)f->max + 1) > (size_t)f->max) /* no NUL in the array */
            return KQ_ERR_INVALID_REQUEST;
        if (*(const char *)src || fd->label == PROTOBUF_C_LABEL_REQUIRED)
            *(const char **)dst = src;
        return 0;
    case KQ_WK_BYTES: /* no data is sent empty, whatever the length says */
        *(ProtobufCBinaryData *)dst =
            *(uint8_t *const *)src
                ? (ProtobufCBinaryData){*(const size_t *)CAT(c, f->aux), *(uint8_t *const *)src}
                : (ProtobufCBinaryData){0, (uint8_t *)empty_bytes};
        if (((ProtobufCBinaryData *)dst)->len)
            pb_set_present(fd, pb);
        return 0;
    case KQ_WK_IDS:
    case KQ_WK_STRS: {
        int64_t n = c_count(f, c);
        const void *arr = (f->flags & KQ_WF_FIXED) ? src : *(const void *const *)src;

        if (n < 0 || (n > 0 && !arr) || ((f->flags & KQ_WF_FIXED) && n > f->max))
            return KQ_ERR_INVALID_REQUEST;
        for (int64_t i = 0; f->kind == KQ_WK_STRS && i < n; i++)
            if (!((const char *const *)arr)[i]) { /* a NULL string is sent empty */
                const char **copy = kq_arena_alloc(a, (size_t)n, sizeof *copy);

                if (!copy)
                    return KQ_ERR_NOMEM;
                for (int64_t k = 0; k < n; k++)
                    copy[k] = ((const char *const *)arr)[k] ? ((const char *const *)arr)[k] : "";
                arr = copy;
                break;
            }
        *(size_t *)AT(pb, fd->quantifier_offset) = (size_t)n;
        *(const void **)dst = n ? arr : NULL;
        return 0;
    }
    case KQ_WK_BLOBS: {
        static const uint8_t empty[1];
        int64_t n = c_count(f, c);
        const uint8_t *const *ptrs = *(const uint8_t *const *const *)src;
        const size_t *lens = *(const size_t *const *)CAT(c, f->aux2);
        ProtobufCBinaryData *v;

        if (n < 0 || (n > 0 && (!ptrs || !lens)))
            return KQ_ERR_INVALID_REQUEST;
        if (!n)
            return 0;
        if (!(v = kq_arena_alloc(a, (size_t)n, sizeof *v)))
            return KQ_ERR_NOMEM;
        for (int64_t i = 0; i < n; i++)
            v[i] = ptrs[i] ? (ProtobufCBinaryData){lens[i], (uint8_t *)ptrs[i]}
                           : (ProtobufCBinaryData){0, (uint8_t *)empty};
        *(size_t *)AT(pb, fd->quantifier_offset) = (size_t)n;
        *(ProtobufCBinaryData **)dst = v;
        return 0;
    }
    case KQ_WK_MSG:
        if ((f->flags & KQ_WF_HAS) ? !*(const bool *)CAT(c, f->aux)
                                   : (f->flags & KQ_WF_INLINE) && !inline_present(f, c))
            return 0;
        if (!(*(ProtobufCMessage **)dst = kq_arena_alloc(a, 1, f->sub->desc->sizeof_message)))
            return KQ_ERR_NOMEM;
        return kq_wire_encode(f->sub, src, *(ProtobufCMessage **)dst, a);
    case KQ_WK_MSGS: {
        int64_t n = c_count(f, c);
        const ProtobufCMessageDescriptor *sd = f->sub->desc;
        const char *arr = (f->flags & KQ_WF_FIXED) ? src : *(const char *const *)src;
        ProtobufCMessage **ptrs;
        char *msgs;

        if (n < 0 || (n > 0 && !arr) || ((f->flags & KQ_WF_FIXED) && n > f->max))
            return KQ_ERR_INVALID_REQUEST;
        if (!n)
            return 0;
        ptrs = kq_arena_alloc(a, (size_t)n, sizeof *ptrs);
        msgs = kq_arena_alloc(a, (size_t)n, sd->sizeof_message);
        if (!ptrs || !msgs)
            return KQ_ERR_NOMEM;
        for (int64_t i = 0; i < n; i++) {
            const void *elem = arr + (size_t)i * f->sub->size;
            int rc;

            ptrs[i] = (ProtobufCMessage *)(msgs + (size_t)i * sd->sizeof_message);
            if ((rc = kq_wire_encode(f->sub, elem, ptrs[i], a)))
                return rc;
        }
        *(size_t *)AT(pb, fd->quantifier_offset) = (size_t)n;
        *(ProtobufCMessage ***)dst = ptrs;
        return 0;
    }
    default:
        return KQ_ERR_INTERNAL;
    }
}

int kq_wire_encode(const kq_wire_msg *m, const void *c, ProtobufCMessage *pb, kq_arena *a)
{
    if (!m->in_place)
        protobuf_c_message_init(m->desc, pb);
    for (size_t i = 0; i < m->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = pb_field(m, &m->fields[i]);
        int rc;

        if (!fd)
            return KQ_ERR_INTERNAL;
        if ((rc = encode_field(&m->fields[i], fd, c, pb, a)))
            return rc;
    }
    return 0;
}

ProtobufCMessage *kq_wire_encode_new(const kq_wire_msg *m, const void *c, kq_arena *a, int *rc)
{
    ProtobufCMessage *pb = kq_arena_alloc(a, 1, m->desc->sizeof_message);

    if (pb)
        protobuf_c_message_init(m->desc, pb);
    *rc = pb ? kq_wire_encode(m, c, pb, a) : KQ_ERR_NOMEM;
    return *rc ? NULL : pb;
}

/* ---- envelopes -------------------------------------------------------------------------- */

void kq_wire_owned_free(kq_wire_owned *o)
{
    if (!o)
        return;
    if (o->msg)
        protobuf_c_message_free_unpacked(o->msg, NULL);
    kq_arena_free(&o->a);
    free(o);
}

ProtobufCMessage **kq_wire_body_slot(const ProtobufCMessageDescriptor *envelope, const void *env,
                                     uint32_t api_key)
{
    const kq_api_info *api = kq_api_find(api_key);
    const ProtobufCFieldDescriptor *fd =
        api ? protobuf_c_message_descriptor_get_field(envelope, (unsigned)api->body_case) : NULL;

    return fd ? (ProtobufCMessage **)((char *)env + fd->offset) : NULL;
}

int kq_wire_send(uint32_t api_key, const char *cluster_id, int32_t sender_id, const kq_wire_msg *m,
                 const void *c, kq_buf *out)
{
    return kq_wire_send_view(api_key, cluster_id, sender_id, m, c, NULL, NULL, out);
}

int kq_wire_send_view(uint32_t api_key, const char *cluster_id, int32_t sender_id,
                      const kq_wire_msg *m, const void *c, const kq_wire_msg *view,
                      const void *view_c, kq_buf *out)
{
    Kq__Request rq = KQ__REQUEST__INIT;
    Kq__Response rs = KQ__RESPONSE__INIT;
    bool answer = cluster_id == KQ_WIRE_ANSWER;
    ProtobufCMessage **slot = answer ? kq_wire_body_slot(&kq__response__descriptor, &rs, api_key)
                                     : kq_wire_body_slot(&kq__request__descriptor, &rq, api_key);
    int body_case = slot ? kq_api_find(api_key)->body_case : 0;
    kq_arena a = {0};
    int rc;

    if (!out)
        return KQ_ERR_INVALID_REQUEST;
    out->data = NULL;
    out->len = 0;
    if (!slot)
        return KQ_ERR_INVALID_REQUEST;
    rq.api_key = rs.api_key = api_key;
    rq.api_version = 0;
    rq.cluster_id = (char *)(cluster_id && !answer ? cluster_id : "");
    rq.sender_id = sender_id;
    rq.body_case = (Kq__Request__BodyCase)body_case;
    rs.body_case = (Kq__Response__BodyCase)body_case;
    if ((*slot = kq_wire_encode_new(m, c, &a, &rc)) && view)
        rc = kq_wire_encode(view, view_c, *slot, &a);
    if (*slot && !rc)
        rc = kq_wire_pack(answer ? &rs.base : &rq.base, out);
    kq_arena_free(&a);
    return rc;
}
