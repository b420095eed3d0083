/*
 * libFuzzer target: metadata records (kq_record_decode, kq_record_decode_next,
 * kq_record_check_batch) and applying them to an image (kq_image_apply, rollback, snapshots).
 *
 * Input: byte 0 even: the rest is one packed kq.Record for kq_record_decode. Byte 0 odd: the
 * rest is a batch payload of length-prefixed records, decoded one by one with
 * kq_record_decode_next and applied to a fresh image at offsets 0, 1, ...
 *
 * Checks: a failed decode returns MALFORMED or INVALID_REQUEST with a message and leaves the
 * record empty; a decoded record passes kq_record_validate, renders to a NUL-terminated line,
 * deep-copies, and re-encodes to bytes that decode and re-encode to the same bytes;
 * kq_record_check_batch agrees with the record-by-record decode; a failed apply leaves the
 * image unchanged; rolling back to the start empties the image; the image's snapshot reloads
 * into a fresh image that writes the same snapshot.
 */
#include "fuzz_check.h"
#include "kq/image.h"
#include "kq/records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RECORDS 64

static void check_failed(int rc, const char *err, const kq_record *r)
{
    FUZZ_CHECK(rc == KQ_ERR_MALFORMED || rc == KQ_ERR_INVALID_REQUEST);
    FUZZ_CHECK(err[0] != '\0');
    FUZZ_CHECK(r->type == KQ_REC_NOOP || r->type == KQ_REC_NONE);
}

static bool same(const kq_buf *a, const kq_buf *b)
{
    return a->len == b->len && (!a->len || !memcmp(a->data, b->data, a->len));
}

/* A decoded record: valid, renders, copies, and survives encode -> decode -> encode. */
static void check_record(const kq_record *r)
{
    kq_record again, copy;
    kq_buf e1 = {0}, e2 = {0}, e3 = {0};
    char err[256] = "", line[4096], small[8];
    size_t n;

    FUZZ_CHECK(kq_record_validate(r, err, sizeof err) == 0);
    FUZZ_CHECK(strcmp(kq_rec_type_name(r->type), "Unknown") != 0);
    n = kq_record_render(r, line, sizeof line);
    FUZZ_CHECK(n == strlen(line) && n < sizeof line);
    n = kq_record_render(r, small, sizeof small);
    FUZZ_CHECK(n == strlen(small) && n < sizeof small);

    FUZZ_CHECK(kq_record_encode(r, &e1, err, sizeof err) == 0);
    FUZZ_CHECK(kq_record_decode(e1.data, e1.len, &again, err, sizeof err) == 0);
    FUZZ_CHECK(again.type == r->type);
    FUZZ_CHECK(kq_record_encode(&again, &e2, err, sizeof err) == 0);
    FUZZ_CHECK(same(&e1, &e2));
    FUZZ_CHECK(kq_record_copy(&copy, r) == 0);
    FUZZ_CHECK(kq_record_encode(&copy, &e3, err, sizeof err) == 0);
    FUZZ_CHECK(same(&e1, &e3));
    kq_record_free(&copy);
    kq_record_free(&again);
    kq_buf_free(&e1);
    kq_buf_free(&e2);
    kq_buf_free(&e3);
}

static void snapshot(const kq_image *img, kq_buf *out)
{
    memset(out, 0, sizeof *out);
    FUZZ_CHECK(kq_image_snapshot_write(img, out, NULL) == 0);
}

static void one_record(const uint8_t *data, size_t size)
{
    kq_record r;
    char err[256] = "";
    int rc = kq_record_decode(data, size, &r, err, sizeof err);

    if (rc) {
        check_failed(rc, err, &r);
        return;
    }
    check_record(&r);
    kq_record_free(&r);
    FUZZ_CHECK(r.type == KQ_REC_NOOP);
}

static void batch(const uint8_t *data, size_t size)
{
    kq_image *img = kq_image_new(), *fresh;
    kq_buf before, after, empty, s1, s2;
    size_t pos = 0;
    int32_t count = 0;
    bool bad = false;
    char err[256] = "";

    FUZZ_CHECK(img);
    snapshot(img, &empty);
    while (pos < size && count < MAX_RECORDS) {
        kq_record r;
        size_t at = pos;
        int rc = kq_record_decode_next(data, size, &pos, &r, err, sizeof err);

        if (rc) {
            check_failed(rc, err, &r);
            FUZZ_CHECK(pos == at);
            bad = true;
            break;
        }
        FUZZ_CHECK(pos > at && pos <= size);
        check_record(&r);
        snapshot(img, &before);
        rc = kq_image_apply(img, count, &r);
        if (rc) { /* a record that cannot apply changes nothing */
            snapshot(img, &after);
            FUZZ_CHECK(same(&before, &after));
            kq_buf_free(&after);
        }
        kq_buf_free(&before);
        kq_record_free(&r);
        count++;
    }
    /* The batch check agrees with the record-by-record decode. */
    if (bad) /* the record that did not decode */
        FUZZ_CHECK(kq_record_check_batch(NULL, 0, count + 1, data, size, err, sizeof err) != 0);
    else if (pos == size)
        FUZZ_CHECK(kq_record_check_batch(NULL, 0, count, data, size, err, sizeof err) == 0);
    else /* MAX_RECORDS reached: bytes are left after `count` records */
        FUZZ_CHECK(kq_record_check_batch(NULL, 0, count, data, size, err, sizeof err) != 0);

    /* The image's snapshot reloads into a fresh image that writes the same snapshot. */
    snapshot(img, &s1);
    fresh = kq_image_new();
    FUZZ_CHECK(fresh);
    FUZZ_CHECK(kq_image_snapshot_load(fresh, s1.data, s1.len, count, err, sizeof err) == 0);
    snapshot(fresh, &s2);
    FUZZ_CHECK(same(&s1, &s2));
    kq_image_free(fresh);
    kq_buf_free(&s1);
    kq_buf_free(&s2);

    /* Nothing was committed: rolling back to before the first record empties the image. */
    FUZZ_CHECK(kq_image_rollback(img, -1) == 0);
    snapshot(img, &s1);
    FUZZ_CHECK(same(&s1, &empty));
    kq_buf_free(&s1);
    kq_buf_free(&empty);
    kq_image_free(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        batch(data + 1, size - 1);
    else
        one_record(data + 1, size - 1);
    return 0;
}
