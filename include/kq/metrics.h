/*
 * kq_metrics: a small Prometheus registry and the /metrics, /healthz, /readyz HTTP server
 * (DESIGN.md section 10, reference/conventions.md sections 3.1 and 5.1).
 *
 * Registry (common/io/metrics.c). Metric families are gauges, counters (names must end in
 * "_total") and histograms with fixed "le" bounds in seconds. A family may hold several
 * children with different fixed label sets (kq_raft_state{state="leader"}, ...); it is
 * rendered once, grouped, with one HELP and one TYPE line. Every registry also exports
 * kq_build_info{version="..."} 1 and process_start_time_seconds.
 *
 * Threads: registration is meant for start-up; it is serialised by a mutex and publishes new
 * families with release stores, so it never corrupts a concurrent render. Updates
 * (kq_metric_set/add/inc/observe) are lock-free C11 atomics, callable from any thread while
 * another thread renders. A render is not a consistent snapshot across metrics, but within one
 * histogram the "+Inf" bucket always equals "_count".
 *
 * Errors: a registration that fails (bad name, bad labels, type clash, bad bounds, no memory)
 * returns NULL and leaves a message naming the problem in kq_metrics_last_error(). Every update
 * function accepts NULL and then does nothing, so a failed registration never crashes the
 * caller's loop.
 *
 * Ownership: the caller owns the kq_metrics from kq_metrics_new until kq_metrics_free. The
 * registry owns every kq_metric it hands out; those pointers stay valid until
 * kq_metrics_free. name, help, labels and bounds are copied.
 *
 * HTTP server (common/io/http.c): HTTP/1.1 on nng 1.5.2's byte streams, on host:port.
 *   GET /metrics -> 200, Content-Type: text/plain; version=0.0.4; charset=utf-8
 *   GET /healthz -> 200 "ok\n" while the process runs
 *   GET /readyz  -> 200 "ready\n", or 503 "not ready: <reason>\n" (reason from the callback)
 * Other paths get 404, other methods on these paths 405 (HEAD works like GET).
 */
#ifndef KQ_METRICS_H
#define KQ_METRICS_H

#include <stddef.h>
#include <stdint.h>

#ifndef KQ_VERSION
#define KQ_VERSION "0.1.0"
#endif

/* Content-Type of a /metrics answer. */
#define KQ_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* Histogram bounds per family: at most this many finite bounds (+Inf is implicit). */
#define KQ_METRICS_MAX_BUCKETS 64

typedef struct kq_metrics kq_metrics;
typedef struct kq_metric kq_metric;

/* NULL when out of memory. The caller owns the result. */
kq_metrics *kq_metrics_new(void);
/* Frees the registry and every kq_metric it handed out. NULL is fine. The HTTP server
 * serving it must be stopped first. */
void kq_metrics_free(kq_metrics *m);
/* Message of the last failed registration ("" if none). Points into m; valid until the next
 * registration call or kq_metrics_free. */
const char *kq_metrics_last_error(const kq_metrics *m);

/*
 * Registration. name matches [a-zA-Z_:][a-zA-Z0-9_:]* and does not start with "__"; help is
 * free text (escaped on output); labels is NULL, "" or Prometheus label syntax,
 * e.g. "state=\"leader\"" or "api=\"fetch\",kind=\"raft\"", with \\ \" \n escapes inside
 * values (a raw newline is accepted too); label names may not start with "__" nor repeat.
 * Registering an existing name with the same type and the same labels returns the existing
 * metric; a different type, or a different help text, is an error.
 */
/* Gauge holding a double. */
kq_metric *kq_metrics_gauge(kq_metrics *m, const char *name, const char *help, const char *labels);
/* Gauge holding an exact int64 (offsets, epochs, ids). */
kq_metric *kq_metrics_gauge_int(kq_metrics *m, const char *name, const char *help,
                                const char *labels);
/* Counter (uint64): the name must end in "_total". */
kq_metric *kq_metrics_counter(kq_metrics *m, const char *name, const char *help,
                              const char *labels);
/* Histogram: bounds_s are n (1..KQ_METRICS_MAX_BUCKETS) finite, strictly increasing upper
 * bounds in seconds (le is inclusive); a "+Inf" bucket is added. No labels. */
kq_metric *kq_metrics_histogram(kq_metrics *m, const char *name, const char *help,
                                const double *bounds_s, int n);

/*
 * Updates (any thread, lock-free; NULL metric is a no-op).
 * set:     gauges only (an int gauge rounds to nearest; NaN is ignored for int gauges).
 * set_int: gauges only (a double gauge converts).
 * add:     gauges add v (may be negative); counters add v rounded down, ignoring v < 0 or NaN
 *          (a counter never goes down).
 * inc:     add 1.
 * observe: histograms only; NaN is ignored.
 * Calls of the wrong kind are ignored.
 */
void kq_metric_set(kq_metric *x, double v);
void kq_metric_set_int(kq_metric *x, int64_t v);
void kq_metric_add(kq_metric *x, double v);
void kq_metric_inc(kq_metric *x);
void kq_metric_observe(kq_metric *x, double seconds);

/* Current value (for tests and for the daemon's own use): gauges and counters return their
 * value, histograms their observation count. 0 for NULL. */
double kq_metric_value(const kq_metric *x);

/* Renders every family in Prometheus text format 0.0.4, ending in '\n'. On success *out is a
 * malloc'd NUL-terminated string (caller frees) of *len bytes (without the NUL). Returns 0 or
 * KQ_ERR_NOMEM (then *out is NULL). Safe while other threads update metrics. */
int kq_metrics_render(const kq_metrics *m, char **out, size_t *len);

typedef struct kq_http kq_http;

/* The HTTP listener sheds clients that would hold it: at most KQ_HTTP_MAX_CONNECTIONS at once
 * (one more is closed on connect), a request head must arrive whole within
 * KQ_HTTP_HEAD_TIMEOUT_MS of when the server starts waiting for it (on connect, or after the
 * previous answer on a kept-alive connection), and may be at most KQ_HTTP_HEAD_MAX bytes
 * (431 otherwise). Both kinds are counted in kq_http_connections_shed_total{reason=}. */
#define KQ_HTTP_MAX_CONNECTIONS 64
#define KQ_HTTP_HEAD_TIMEOUT_MS 10000
#define KQ_HTTP_HEAD_MAX 8192

/* Readiness callback, called on an nng thread for each GET /readyz: it must be thread-safe
 * (read atomics) and must not block. Return 1 when ready; return 0 and write a one-line reason
 * (NUL-terminated, truncated to reason_len) when not. */
typedef int (*kq_http_ready_fn)(void *arg, char *reason, size_t reason_len);

/* Serves the endpoints on host:port. host is an IPv4/IPv6 literal or a name ("0.0.0.0" or
 * "::" for all interfaces; NULL means "0.0.0.0"); port 0 picks a free port (see
 * kq_http_port). ready may be NULL (always ready). m and arg are borrowed: they must outlive
 * the server. Returns 0 and sets *out (caller owns it; stop with kq_http_stop), or
 * KQ_ERR_CONFIG (bad host or port) / KQ_ERR_IO (cannot bind, e.g. address in use) /
 * KQ_ERR_NOMEM with errbuf naming the address and the cause; KQ_ERR_INTERNAL for a NULL m or
 * out. */
int kq_http_start(const char *host, int port, kq_metrics *m, kq_http_ready_fn ready, void *arg,
                  kq_http **out, char *errbuf, size_t errlen);
/* The same over TLS (HTTPS) with server config tls (borrowed; it must stay valid while the
 * server runs: kq_rpc never frees a config it handed out). NULL tls: plain HTTP. */
struct nng_tls_config;
int kq_http_start_tls(const char *host, int port, struct nng_tls_config *tls, kq_metrics *m,
                      kq_http_ready_fn ready, void *arg, kq_http **out, char *errbuf,
                      size_t errlen);
/* New connections of an HTTPS server use tls from now on (SIGHUP rotation). 0, or an nng
 * error code. */
int kq_http_set_tls(kq_http *h, struct nng_tls_config *tls);
/* The TCP port actually bound (useful with port 0). */
int kq_http_port(const kq_http *h);
/* Closes the listener and every connection, waits for running handlers to finish, frees h.
 * NULL is fine. Do not call from the ready callback. */
void kq_http_stop(kq_http *h);

#endif
