/* A tiny streaming JSON emitter for the kq tool's --json output. */
#include <assert.h>
#include <inttypes.h>

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

void kq_json_write_escaped(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
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
