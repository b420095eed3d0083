/* The broker's metadata image: see metadata.h. */
#include "metadata.h"

#include <stdio.h>
#include <string.h>

#include "kq/error.h"

int kq_bmeta_init(kq_bmeta *m)
{
    memset(m, 0, sizeof *m);
    m->ready_target = -1;
    m->img = kq_image_new();
    return m->img ? 0 : KQ_ERR_NOMEM;
}

void kq_bmeta_free(kq_bmeta *m)
{
    kq_image_free(m->img);
    memset(m, 0, sizeof *m);
}

int kq_bmeta_apply_batch(kq_bmeta *m, int64_t base, int32_t count, const uint8_t *records,
                         size_t len, char *errbuf, size_t errlen)
{
    if (base + count <= m->applied_end)
        return 0;
    if (base != m->applied_end) {
        snprintf(errbuf, errlen, "batch at %lld does not start at the next offset %lld",
                 (long long)base, (long long)m->applied_end);
        return KQ_ERR_CORRUPT_MESSAGE;
    }
    int rc = kq_image_replay(m->img, records, len, base, count, errbuf, errlen);
    if (rc != 0)
        return rc;
    m->applied_end = base + count;
    kq_image_commit(m->img, m->applied_end - 1);
    return 0;
}

int kq_bmeta_load_snapshot(kq_bmeta *m, const uint8_t *payload, size_t len, int64_t end_offset,
                           char *errbuf, size_t errlen)
{
    kq_image_clear(m->img);
    m->applied_end = 0;
    int rc = kq_image_snapshot_load(m->img, payload, len, end_offset, errbuf, errlen);
    if (rc != 0) {
        kq_image_clear(m->img);
        return rc;
    }
    m->applied_end = end_offset;
    return 0;
}

bool kq_bmeta_caught_up(kq_bmeta *m, int64_t hw)
{
    if (m->ready_target < 0 && hw >= 0)
        m->ready_target = hw;
    return m->ready_target >= 0 && m->applied_end >= m->ready_target;
}

bool kq_bmeta_publishable(kq_bmeta *m, int64_t hw, bool registration_caught_up)
{
    bool caught_up = kq_bmeta_caught_up(m, hw);
    if (!m->published && caught_up && registration_caught_up)
        m->published = true;
    return m->published;
}
