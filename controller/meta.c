#include "meta.h"

#include <stdio.h>
#include <string.h>

#include "kq/error.h"
#include "kq/log.h"
#include "kq/records.h"

int kq_meta_init(kq_meta *m, const kq_decide_settings *settings, const char *cluster_id,
                 uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    m->settings = *settings;
    snprintf(m->cluster_id, sizeof(m->cluster_id), "%s", cluster_id);
    m->settings.cluster_id = m->cluster_id;
    m->epoch_start = -1;
    kq_prng_seed(&m->rng, seed);
    m->img = kq_image_new();
    m->cc = kq_cc_new(&m->settings);
    if (m->img == NULL || m->cc == NULL) {
        kq_meta_free(m);
        return KQ_ERR_NOMEM;
    }
    return 0;
}

void kq_meta_free(kq_meta *m)
{
    kq_image_free(m->img);
    kq_cc_free(m->cc);
    m->img = NULL;
    m->cc = NULL;
}

static int apply_one(kq_meta *m, int64_t offset, const kq_record *r, char *errbuf, size_t errlen)
{
    int rc = kq_image_apply(m->img, offset, r);
    if (rc != 0) {
        char what[200];
        kq_record_render(r, what, sizeof(what));
        snprintf(errbuf, errlen, "record at offset %lld cannot apply (%s: %s): %s",
                 (long long)offset, kq_err_name(rc), kq_image_error(m->img), what);
        return rc;
    }
    m->applied_end = offset + 1;
    m->applied_records++;
    return 0;
}

int kq_meta_apply_batch(kq_meta *m, int64_t base, int32_t count, const uint8_t *records, size_t len,
                        char *errbuf, size_t errlen)
{
    size_t pos = 0;
    int rc = 0;
    for (int32_t i = 0; i < count; i++) {
        kq_record r;
        memset(&r, 0, sizeof(r));
        char why[256];
        rc = kq_record_decode_next(records, len, &pos, &r, why, sizeof(why));
        if (rc != 0) {
            snprintf(errbuf, errlen, "record at offset %lld does not decode: %s",
                     (long long)(base + i), why);
            return rc;
        }
        if (base + i >= m->applied_end)
            rc = apply_one(m, base + i, &r, errbuf, errlen);
        kq_record_free(&r);
        if (rc != 0)
            return rc;
    }
    if (pos != len) {
        snprintf(errbuf, errlen, "batch at offset %lld has %zu bytes after its %d records",
                 (long long)base, len - pos, count);
        return KQ_ERR_CORRUPT_MESSAGE;
    }
    return 0;
}

void kq_meta_committed(kq_meta *m, int64_t hw)
{
    int64_t upto = hw - 1 < m->applied_end - 1 ? hw - 1 : m->applied_end - 1;
    if (upto >= 0 && upto > kq_image_committed_offset(m->img))
        kq_image_commit(m->img, upto);
}

int kq_meta_load_snapshot(kq_meta *m, const uint8_t *payload, size_t len, int64_t end_offset,
                          char *errbuf, size_t errlen)
{
    if (m->active) {
        snprintf(errbuf, errlen, "the active controller never loads a snapshot");
        return KQ_ERR_INVALID_REQUEST;
    }
    kq_image_clear(m->img);
    int rc = kq_image_snapshot_load(m->img, payload, len, end_offset, errbuf, errlen);
    if (rc != 0)
        return rc;
    m->applied_end = end_offset;
    return 0;
}

void kq_meta_became_leader(kq_meta *m, int64_t epoch_start)
{
    m->epoch_start = epoch_start;
}

bool kq_meta_try_activate(kq_meta *m, bool is_leader, int64_t hw, int64_t leo, int64_t now_ms)
{
    if (m->active || !is_leader || m->epoch_start < 0)
        return false;
    if (hw <= m->epoch_start || hw != leo || m->applied_end != hw)
        return false;
    kq_cc_activate(m->cc, m->img, now_ms);
    m->active = true;
    return true;
}

int kq_meta_deactivate(kq_meta *m, char *errbuf, size_t errlen)
{
    m->epoch_start = -1;
    if (!m->active)
        return 0;
    m->active = false;
    int64_t committed = kq_image_committed_offset(m->img);
    int rc = kq_image_rollback(m->img, committed);
    if (rc != 0) {
        snprintf(errbuf, errlen, "cannot roll the image back to offset %lld: %s",
                 (long long)committed, kq_image_error(m->img));
        return rc;
    }
    m->applied_end = committed + 1;
    return 0;
}

int kq_meta_add(kq_meta *m, const kq_record *r, kq_buf *batch, int64_t batch_base,
                int32_t *batch_count, char *errbuf, size_t errlen)
{
    size_t len0 = batch->len;
    int64_t offset = batch_base + *batch_count;
    if (!m->active) { /* leadership was lost: the image is back at the committed offset */
        snprintf(errbuf, errlen, "this controller is no longer the active controller");
        return KQ_ERR_NOT_CONTROLLER;
    }
    int rc = kq_record_append(batch, r, errbuf, errlen);
    if (rc != 0)
        return rc;
    rc = apply_one(m, offset, r, errbuf, errlen);
    if (rc != 0) {
        batch->len = len0;
        return rc;
    }
    (*batch_count)++;
    return 0;
}
