/*
 * libFuzzer target: snapshot files. kq_store_snapshot_file_load reads a file holding the input
 * (what kq log-dump --snapshot and a follower's FetchSnapshot copy go through), then
 * kq_image_snapshot_load replays its payload into an empty image.
 *
 * Input: byte 0 bit 0 clear: the rest is the whole file. Set: the rest is {end offset i64 BE,
 * epoch i32 BE} then the payload, and this target writes the header around it (magic, payload
 * length, both CRCs), so the fuzzer spends its time in the payload.
 *
 * Checks: a file that loads has a well-formed header, and the id, size and payload it reports
 * are the file's; a failure is CORRUPT_MESSAGE with a message naming the file; a well-formed
 * file always loads. A payload that does not replay leaves the image empty; one that does
 * leaves it at end offset - 1 and its snapshot reloads to the same snapshot.
 */
#include <fcntl.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "fuzz_wire.h"
#include "kq/image.h"
#include "kq/records.h"
#include "kq/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *dir;
static char path[4200];

static void cleanup(void)
{
    fuzz_rmtree(dir);
    free(dir);
    dir = NULL;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static void write_file(const uint8_t *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(len == 0 || write(fd, buf, len) == (ssize_t)len);
    FUZZ_CHECK(close(fd) == 0);
}

static bool image_empty(const kq_image *img)
{
    kq_image_counts c;

    kq_image_get_counts(img, &c);
    return kq_image_offset(img) == -1 && !c.brokers && !c.topics && !c.configs && !c.features;
}

static void replay(const uint8_t *payload, size_t len, int64_t end_offset)
{
    kq_image *img = kq_image_new(), *again;
    kq_buf s1 = {0}, s2 = {0};
    char err[256] = "";
    int rc;

    FUZZ_CHECK(img);
    rc = kq_image_snapshot_load(img, payload, len, end_offset, err, sizeof err);
    if (rc) {
        FUZZ_CHECK(err[0] != '\0' && image_empty(img));
        kq_image_free(img);
        return;
    }
    FUZZ_CHECK(end_offset >= 0 && kq_image_offset(img) == end_offset - 1 &&
               kq_image_committed_offset(img) == end_offset - 1);
    FUZZ_CHECK(kq_image_snapshot_write(img, &s1, NULL) == 0);
    again = kq_image_new();
    FUZZ_CHECK(again);
    FUZZ_CHECK(kq_image_snapshot_load(again, s1.data, s1.len, end_offset, err, sizeof err) == 0);
    FUZZ_CHECK(kq_image_snapshot_write(again, &s2, NULL) == 0);
    FUZZ_CHECK(s1.len == s2.len && (!s1.len || !memcmp(s1.data, s2.data, s1.len)));
    kq_buf_free(&s1);
    kq_buf_free(&s2);
    kq_image_free(again);
    kq_image_free(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kq_raft_snapshot_id id = {-9, -9};
    uint8_t *file, *payload = NULL;
    size_t flen, len = 0;
    int64_t fsize = -9;
    bool well_formed = false;
    char err[4400] = "";
    int rc;

    if (size < 1)
        return 0;
    if (!dir) {
        dir = fuzz_tmpdir("snapshot");
        snprintf(path, sizeof path, "%s/00000000000000000010-0000000001.checkpoint", dir);
        atexit(cleanup);
    }
    if ((data[0] & 1) && size >= 13) {
        flen = KQ_STORE_SNAPSHOT_HEADER_LEN + (size - 13);
        file = malloc(flen);
        FUZZ_CHECK(file);
        memcpy(file, "KQSNAP01", 8);
        memcpy(file + 8, data + 1, 12); /* end offset, epoch */
        for (int i = 0; i < 8; i++)
            file[20 + i] = (uint8_t)((uint64_t)(size - 13) >> (56 - 8 * i));
        memcpy(file + KQ_STORE_SNAPSHOT_HEADER_LEN, data + 13, size - 13);
        put_be32(file + 28, kq_crc32c(0, data + 13, size - 13));
        put_be32(file + 32, kq_crc32c(0, file, 32));
        well_formed = true;
    } else {
        flen = size - 1;
        file = malloc(flen ? flen : 1);
        FUZZ_CHECK(file);
        memcpy(file, data + 1, flen);
    }
    write_file(file, flen);

    rc = kq_store_snapshot_file_load(path, &id, &payload, &len, &fsize, err, sizeof err);
    if (rc) {
        FUZZ_CHECK(!well_formed);
        FUZZ_CHECK(rc == KQ_ERR_CORRUPT_MESSAGE && strstr(err, path) && payload == NULL);
        free(file);
        return 0;
    }
    FUZZ_CHECK(flen >= KQ_STORE_SNAPSHOT_HEADER_LEN && !memcmp(file, "KQSNAP01", 8));
    FUZZ_CHECK(fsize == (int64_t)flen && len == flen - KQ_STORE_SNAPSHOT_HEADER_LEN);
    FUZZ_CHECK(get_be64(file + 20) == len);
    FUZZ_CHECK(kq_crc32c(0, file, 32) == (uint32_t)get_be64(file + 28));
    FUZZ_CHECK(id.end_offset == (int64_t)get_be64(file + 8) &&
               id.epoch == (int32_t)(get_be64(file + 12) & 0xffffffffu));
    FUZZ_CHECK(payload && (!len || !memcmp(payload, file + KQ_STORE_SNAPSHOT_HEADER_LEN, len)));
    replay(payload, len, id.end_offset);
    free(payload);
    free(file);
    return 0;
}
