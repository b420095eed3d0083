/*
 * Clock, Kafka-style uuids, CRC-32C, splitmix64 PRNG and latency histograms.
 */
#include "kq/util.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "kq/error.h"

/* ---- clock ------------------------------------------------------------------------------ */

uint64_t kq_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t kq_now_ms(void)
{
    return kq_now_ns() / 1000000u;
}

int64_t kq_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + (int64_t)(ts.tv_nsec / 1000000);
}

/* ---- uuid ------------------------------------------------------------------------------- */

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static int b64url_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return -1;
}

void kq_uuid_format(const uint8_t in[16], char out[KQ_UUID_STR_LEN + 1])
{
    size_t o = 0;
    size_t i = 0;
    for (; i + 3 <= 15; i += 3) { /* 5 full groups: bytes 0..14 */
        uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8) | in[i + 2];
        out[o++] = b64url[(v >> 18) & 63];
        out[o++] = b64url[(v >> 12) & 63];
        out[o++] = b64url[(v >> 6) & 63];
        out[o++] = b64url[v & 63];
    }
    /* last byte: two characters, no padding */
    out[o++] = b64url[in[15] >> 2];
    out[o++] = b64url[(in[15] & 3) << 4];
    out[o] = '\0';
}

bool kq_uuid_parse(const char *s, uint8_t out[16])
{
    int v[KQ_UUID_STR_LEN];
    if (s == NULL)
        return false;
    for (size_t i = 0; i < KQ_UUID_STR_LEN; i++) {
        if (s[i] == '\0')
            return false;
        v[i] = b64url_value(s[i]);
        if (v[i] < 0)
            return false;
    }
    if (s[KQ_UUID_STR_LEN] != '\0')
        return false;
    /* The last character carries 2 bits; the low 4 must be zero (canonical encoding). */
    if (v[21] & 15)
        return false;
    size_t o = 0;
    for (size_t i = 0; i < 20; i += 4) {
        uint32_t x = ((uint32_t)v[i] << 18) | ((uint32_t)v[i + 1] << 12) |
                     ((uint32_t)v[i + 2] << 6) | (uint32_t)v[i + 3];
        out[o++] = (uint8_t)(x >> 16);
        out[o++] = (uint8_t)(x >> 8);
        out[o++] = (uint8_t)x;
    }
    out[15] = (uint8_t)((v[20] << 2) | (v[21] >> 4));
    return true;
}

/* Reserved: all zero, ONE (0..01), and the first 100 values Kafka keeps for directory ids. */
static bool uuid_reserved(const uint8_t b[16])
{
    for (int i = 0; i < 15; i++) {
        if (b[i] != 0)
            return false;
    }
    return b[15] < 100;
}

static int fill_random(uint8_t *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = getrandom(buf + got, len - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return KQ_ERR_IO;
        }
        got += (size_t)r;
    }
    return 0;
}

int kq_uuid_random(char out[KQ_UUID_STR_LEN + 1])
{
    uint8_t b[16];
    for (;;) {
        int rc = fill_random(b, sizeof(b));
        if (rc != 0) {
            out[0] = '\0';
            return rc;
        }
        if (uuid_reserved(b))
            continue;
        kq_uuid_format(b, out);
        if (strchr(out, '-') == NULL)
            return 0;
    }
}

/* ---- crc32c (slice-by-8) ---------------------------------------------------------------- */

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_tab[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = crc_tab[0][n];
        for (int t = 1; t < 8; t++) {
            c = crc_tab[0][c & 0xff] ^ (c >> 8);
            crc_tab[t][n] = c;
        }
    }
}

uint32_t kq_crc32c(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    pthread_once(&crc_once, crc_init);
    crc = ~crc;
    while (len > 0 && ((uintptr_t)p & 7) != 0) {
        crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        len--;
    }
    while (len >= 8) {
        /* byte-wise loads keep this independent of host endianness and alignment rules */
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                             (uint32_t)p[3] << 24);
        uint32_t hi =
            (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        crc = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^ crc_tab[5][(lo >> 16) & 0xff] ^
              crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^
              crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len > 0) {
        crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        len--;
    }
    return ~crc;
}

/* ---- splitmix64 ------------------------------------------------------------------------- */

void kq_prng_seed(kq_prng *p, uint64_t seed)
{
    p->s = seed;
}

uint64_t kq_prng_next(kq_prng *p)
{
    uint64_t z = (p->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t kq_prng_below(kq_prng *p, uint64_t n)
{
    if (n <= 1) {
        (void)kq_prng_next(p);
        return 0;
    }
    /* Reject the low (2^64 mod n) values so every residue is equally likely. */
    uint64_t threshold = (0 - n) % n;
    for (;;) {
        uint64_t r = kq_prng_next(p);
        if (r >= threshold)
            return r % n;
    }
}

uint64_t kq_prng_range(kq_prng *p, uint64_t lo, uint64_t hi)
{
    return lo + kq_prng_below(p, hi - lo + 1);
}

bool kq_prng_permille(kq_prng *p, uint32_t permille)
{
    return kq_prng_below(p, 1000) < permille;
}

/* ---- histogram -------------------------------------------------------------------------- */

/*
 * Bucket i holds values in (upper[i-1], upper[i]]; bucket 0 holds [0, 1 us]. The bounds grow
 * geometrically from 1 us (upper[0]) to 100 s (upper[2047]) by a factor r = 1e8^(1/2047)
 * ~ 1.00904, so an upper bound overstates any value of its bucket by less than 0.91 %.
 * Values above 100 s are counted in the last bucket.
 */
#define HIST_BUCKETS 2048
#define HIST_LOW_NS 1000ull
#define HIST_HIGH_NS 100000000000ull
#define HIST_RATIO 1.0090394785290029 /* exp(ln(1e8) / 2047) */

static uint64_t hist_upper[HIST_BUCKETS];
static pthread_once_t hist_once = PTHREAD_ONCE_INIT;

static void hist_bounds_init(void)
{
    double b = (double)HIST_LOW_NS;
    hist_upper[0] = HIST_LOW_NS;
    for (int i = 1; i < HIST_BUCKETS; i++) {
        b *= HIST_RATIO;
        hist_upper[i] = (uint64_t)(b + 0.5);
        if (hist_upper[i] <= hist_upper[i - 1])
            hist_upper[i] = hist_upper[i - 1] + 1;
    }
    hist_upper[HIST_BUCKETS - 1] = HIST_HIGH_NS;
}

static size_t hist_bucket(uint64_t ns)
{
    if (ns <= HIST_LOW_NS)
        return 0;
    if (ns > hist_upper[HIST_BUCKETS - 2])
        return HIST_BUCKETS - 1;
    size_t lo = 1, hi = HIST_BUCKETS - 2; /* first i with ns <= upper[i] */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ns <= hist_upper[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

_Static_assert(sizeof(((kq_hist *)0)->counts) / sizeof(uint64_t) == HIST_BUCKETS,
               "kq_hist bucket count");

void kq_hist_init(kq_hist *h)
{
    pthread_once(&hist_once, hist_bounds_init);
    memset(h, 0, sizeof(*h));
}

void kq_hist_add(kq_hist *h, uint64_t ns)
{
    pthread_once(&hist_once, hist_bounds_init);
    h->counts[hist_bucket(ns)]++;
    if (h->n == 0 || ns < h->min_ns)
        h->min_ns = ns;
    if (h->n == 0 || ns > h->max_ns)
        h->max_ns = ns;
    h->n++;
    h->sum_ns += ns;
}

void kq_hist_merge(kq_hist *dst, const kq_hist *src)
{
    if (src->n == 0)
        return;
    for (size_t i = 0; i < HIST_BUCKETS; i++)
        dst->counts[i] += src->counts[i];
    if (dst->n == 0 || src->min_ns < dst->min_ns)
        dst->min_ns = src->min_ns;
    if (dst->n == 0 || src->max_ns > dst->max_ns)
        dst->max_ns = src->max_ns;
    dst->n += src->n;
    dst->sum_ns += src->sum_ns;
}

uint64_t kq_hist_quantile(const kq_hist *h, double q)
{
    if (h->n == 0)
        return 0;
    pthread_once(&hist_once, hist_bounds_init);
    if (!(q > 0.0)) /* also catches NaN */
        q = 0.0;
    if (q > 1.0)
        q = 1.0;
    /* rank = ceil(q * n), at least 1: the smallest value with at least q of the data at or
     * below it */
    double want = q * (double)h->n;
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want)
        rank++;
    if (rank < 1)
        rank = 1;
    if (rank > h->n)
        rank = h->n;
    uint64_t seen = 0;
    size_t i = 0;
    for (; i < HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank)
            break;
    }
    if (i == HIST_BUCKETS)
        i = HIST_BUCKETS - 1;
    uint64_t v = hist_upper[i];
    /* The true value lies in the bucket and within [min, max]: tighten to those. */
    if (v > h->max_ns)
        v = h->max_ns;
    if (v < h->min_ns)
        v = h->min_ns;
    return v;
}

bool kq_topic_name_valid(const char *name)
{
    size_t n;

    if (!name)
        return false;
    n = strnlen(name, KQ_TOPIC_NAME_MAX + 1);
    if (n == 0 || n > KQ_TOPIC_NAME_MAX || !strcmp(name, ".") || !strcmp(name, ".."))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}
