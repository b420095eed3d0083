/*
 * kq error codes: names, messages and retriability from the X-macro table in kq/error.h.
 */
#include "kq/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct err_info {
    int code;
    int retriable;
    const char *name;
    const char *msg;
} err_info;

static const err_info err_table[] = {
#define KQ_ERROR_ROW(name, num, retriable, msg) {num, retriable, #name, msg},
    KQ_ERROR_TABLE(KQ_ERROR_ROW)
#undef KQ_ERROR_ROW
};

#define ERR_TABLE_LEN (sizeof(err_table) / sizeof(err_table[0]))

static const err_info *err_lookup(int code)
{
    for (size_t i = 0; i < ERR_TABLE_LEN; i++) {
        if (err_table[i].code == code)
            return &err_table[i];
    }
    return NULL;
}

const char *kq_err_name(int code)
{
    const err_info *e = err_lookup(code);
    return e ? e->name : "UNKNOWN_ERROR";
}

const char *kq_err_message(int code)
{
    const err_info *e = err_lookup(code);
    return e ? e->msg : "unknown error";
}

int kq_err_retriable(int code)
{
    const err_info *e = err_lookup(code);
    return e ? e->retriable : 0;
}

int kq_err_from_name(const char *name)
{
    if (name == NULL)
        return -1;
    for (size_t i = 0; i < ERR_TABLE_LEN; i++) {
        if (strcmp(err_table[i].name, name) == 0)
            return err_table[i].code;
    }
    return -1;
}

void kq_errf(char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (errbuf == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(errbuf, errlen, fmt, ap);
    va_end(ap);
}
