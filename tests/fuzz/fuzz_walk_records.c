/* libFuzzer target: kq_codec_walk_records on arbitrary payloads; the first byte picks count. */
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cb(void *arg, int64_t offset, kq_record_type type, const char *desc)
{
    int *seen = arg;

    FUZZ_CHECK(offset == *seen);
    FUZZ_CHECK(type >= KQ_RECORD_UNKNOWN && type <= KQ_RECORD_OPAQUE);
    FUZZ_CHECK(strlen(desc) < 512);
    (*seen)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int seen = 0;
    int32_t count;
    int rc;

    if (size < 1)
        return 0;
    count = data[0] % 64;
    rc = kq_codec_walk_records(data + 1, size - 1, 0, count, cb, &seen);
    FUZZ_CHECK(rc == 0 || rc == KQ_ERR_MALFORMED);
    if (rc == 0)
        FUZZ_CHECK(seen == count);
    return 0;
}
