/* A tiny streaming JSON emitter for the kq tool's --json output. */
#include <assert.h>
#include <inttypes.h>
#include <string.h>

#include "kq_tools.h"

void kq_json_init(kq_json *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->need_comma[0] = false;
    j->after_key = false;
}

/* Called before every value and every key: writes the separating comma if needed. */
static void before_item(kq_json *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (j->need_comma[j->depth])
        fputc(',', j->f);
    j->need_comma[j->depth] = true;
}

static void open_level(kq_json *j, int c)
{
    before_item(j);
    fputc(c, j->f);
    assert(j->depth < KQ_JSON_MAX_DEPTH);
    if (j->depth < KQ_JSON_MAX_DEPTH)
        j->depth++;
    j->need_comma[j->depth] = false;
}

static void close_level(kq_json *j, int c)
{
    assert(j->depth > 0);
    if (j->depth > 0)
        j->depth--;
    fputc(c, j->f);
}

void kq_json_begin_object(kq_json *j)
{
    open_level(j, '{');
}

void kq_json_end_object(kq_json *j)
{
    close_level(j, '}');
}

void kq_json_begin_array(kq_json *j)
{
    open_level(j, '[');
}

void kq_json_end_array(kq_json *j)
{
    close_level(j, ']');
}

void kq_json_key(kq_json *j, const char *key)
{
    before_item(j);
    kq_json_write_escaped(j->f, key);
    fputc(':', j->f);
    j->after_key = true;
}

void kq_json_string(kq_json *j, const char *s)
{
    before_item(j);
    if (s)
        kq_json_write_escaped(j->f, s);
    else
        fputs("null", j->f);
}

void kq_json_int(kq_json *j, int64_t v)
{
    before_item(j);
    fprintf(j->f, "%" PRId64, v);
}

void kq_json_bool(kq_json *j, bool v)
{
    before_item(j);
    fputs(v ? "true" : "false", j->f);
}

void kq_json_null(kq_json *j)
{
    before_item(j);
    fputs("null", j->f);
}

size_t kq_json_utf8_len(const uint8_t *p, size_t n)
{
    uint32_t cp;
    size_t k;

    if (n == 0)
        return 0;
    if (p[0] < 0x80)
        return 1;
    if ((p[0] & 0xE0) == 0xC0) {
        k = 2;
        cp = p[0] & 0x1F;
    } else if ((p[0] & 0xF0) == 0xE0) {
        k = 3;
        cp = p[0] & 0x0F;
    } else if ((p[0] & 0xF8) == 0xF0) {
        k = 4;
        cp = p[0] & 0x07;
    } else {
        return 0;
    }
    if (k > n)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    /* overlong forms, surrogates, beyond U+10FFFF */
    if ((k == 2 && cp < 0x80) || (k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
        return 0;
    return k;
}

static void write_escaped_n(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s, *e = p + n; p < e; p++) {
        if (*p >= 0x80) {
            size_t k = kq_json_utf8_len(p, (size_t)(e - p));

            if (k == 0) {
                fputs("\\ufffd", f); /* not UTF-8: the replacement character */
            } else {
                fwrite(p, 1, k, f);
                p += k - 1;
            }
            continue;
        }
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        case '\b':
            fputs("\\b", f);
            break;
        case '\f':
            fputs("\\f", f);
            break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", (unsigned)*p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void kq_json_write_escaped(FILE *f, const char *s)
{
    write_escaped_n(f, s, strlen(s));
}

void kq_json_string_n(kq_json *j, const char *s, size_t n)
{
    before_item(j);
    write_escaped_n(j->f, s, n);
}
