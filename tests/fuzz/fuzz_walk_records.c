/* libFuzzer target: a batch payload of records as the Raft host and kq log-dump read it; the
 * first byte picks the record count. Each record decodes (kq_record_decode_next) and renders,
 * or is refused cleanly; a refused record's body (after its length) is described
 * (kq_record_describe_raw), as kq log-dump does, or refused. */
#include "fuzz_check.h"

#include "kq/records.h"
#include "pb_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256], desc[512];
    size_t pos = 0;
    int32_t count;

    if (size < 1)
        return 0;
    count = data[0] % 64;
    for (int32_t i = 0; i < count; i++) {
        kq_record r;
        size_t at = pos;
        int rc = kq_record_decode_next(data + 1, size - 1, &pos, &r, err, sizeof err);

        if (rc) {
            uint64_t n;

            FUZZ_CHECK(rc == KQ_ERR_MALFORMED || rc == KQ_ERR_INVALID_REQUEST);
            FUZZ_CHECK(pos == at && err[0]);
            if (!kq_pb_read_varint(data + 1, size - 1, &pos, &n) || n > size - 1 - pos)
                return 0; /* no body to describe */
            rc = kq_record_describe_raw(data + 1 + pos, (size_t)n, desc, sizeof desc);
            FUZZ_CHECK(rc == 0 || rc == KQ_ERR_MALFORMED);
            FUZZ_CHECK(rc != 0 || strlen(desc) < sizeof desc);
            return 0;
        }
        FUZZ_CHECK(pos > at && pos <= size - 1);
        FUZZ_CHECK(kq_record_render(&r, desc, sizeof desc) < sizeof desc);
        kq_record_free(&r);
    }
    return 0;
}
