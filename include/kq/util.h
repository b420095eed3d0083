/*
 * Small helpers shared by every program: clock, Kafka-style uuids, crc32c, PRNG, latency
 * histograms.
 */
#ifndef KQ_UTIL_H
#define KQ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Monotonic milliseconds / nanoseconds (CLOCK_MONOTONIC); wall-clock epoch milliseconds.
 * Not for common/raft or common/image, which read no clock. */
uint64_t kq_now_ms(void);
uint64_t kq_now_ns(void);
int64_t kq_wall_ms(void);

/* Kafka uuid: 16 random bytes, URL-safe base64 without padding, 22 chars + NUL. Never the
 * reserved values (all zero, one) and never contains '-' anywhere (KAFKA-20072). */
#define KQ_UUID_STR_LEN 22
int kq_uuid_random(char out[KQ_UUID_STR_LEN + 1]);
/* Validate and decode; returns false if `s` is not 22 chars of URL-safe base64 of 16 bytes. */
bool kq_uuid_parse(const char *s, uint8_t out[16]);
void kq_uuid_format(const uint8_t in[16], char out[KQ_UUID_STR_LEN + 1]);
/* True for the all-zero id (Kafka's Uuid.ZERO: "no id"). Inline: pure modules use it too. */
static inline bool kq_uuid_is_zero(const uint8_t id[16])
{
    for (int i = 0; i < 16; i++)
        if (id[i])
            return false;
    return true;
}
/* Kafka's topic name rules: [a-zA-Z0-9._-]{1,249}, not "." or "..". */
#define KQ_TOPIC_NAME_MAX 249
bool kq_topic_name_valid(const char *name);

/* True for the ids no topic may have: the zero uuid and Kafka's Uuid.ONE (15 zero bytes, then
 * 1), the id of the __cluster_metadata topic. */
static inline bool kq_topic_id_reserved(const uint8_t id[16])
{
    for (int i = 0; i < 15; i++)
        if (id[i])
            return false;
    return id[15] <= 1;
}

/* The min.insync.replicas rule, the one copy that the partition leader (HW freeze, acks=all),
 * its metrics, the controller (ELR) and kq topics --describe's filters all use. As in Kafka 4.x
 * (Partition.effectiveMinIsr), the effective minimum is the configured one capped at the
 * replica count: a topic whose min.insync.replicas exceeds its replication factor needs every
 * replica in the ISR. configured < 1 counts as 1; n_replicas <= 0 is not a cap. */
static inline int32_t kq_min_isr_effective(int32_t configured, int32_t n_replicas)
{
    int32_t m = configured;
    if (n_replicas > 0 && n_replicas < m)
        m = n_replicas;
    return m < 1 ? 1 : m;
}

/* -1: the ISR is under the effective minimum (acks=all refused, HW frozen), 0: at it, 1: above. */
static inline int kq_min_isr_cmp(int32_t n_isr, int32_t configured, int32_t n_replicas)
{
    int32_t m = kq_min_isr_effective(configured, n_replicas);
    return n_isr < m ? -1 : n_isr > m;
}

/* CRC-32C (Castagnoli), as Kafka uses for record batches. */
uint32_t kq_crc32c(uint32_t crc, const void *data, size_t len);

/* splitmix64 PRNG (deterministic, seedable): used by the simulator and the cores. */
typedef struct kq_prng {
    uint64_t s;
} kq_prng;
void kq_prng_seed(kq_prng *p, uint64_t seed);
uint64_t kq_prng_next(kq_prng *p);
/* Uniform in [0, n); n > 0 (0 and 1 give 0, after drawing once). */
uint64_t kq_prng_below(kq_prng *p, uint64_t n);
/* Uniform in [lo, hi]; lo <= hi. */
uint64_t kq_prng_range(kq_prng *p, uint64_t lo, uint64_t hi);
/* True with probability permille / 1000. */
bool kq_prng_permille(kq_prng *p, uint32_t permille);

/* Latency histogram with fixed log-linear buckets (1 us .. ~100 s, < 1% relative error),
 * for benchmarks and /metrics. Not thread-safe. */
typedef struct kq_hist {
    uint64_t counts[2048];
    uint64_t n;
    uint64_t sum_ns;
    uint64_t min_ns;
    uint64_t max_ns;
} kq_hist;
void kq_hist_init(kq_hist *h);
void kq_hist_add(kq_hist *h, uint64_t ns);
void kq_hist_merge(kq_hist *dst, const kq_hist *src);
/* q in [0, 1]; returns nanoseconds (upper bound of the bucket), 0 if empty. */
uint64_t kq_hist_quantile(const kq_hist *h, double q);

#endif
