/*
 * Prometheus registry: families of gauges, counters and histograms with C11 atomic values,
 * rendered in text format 0.0.4. See include/kq/metrics.h for the contract.
 *
 * Families and their children form append-only singly linked lists whose next pointers are
 * atomics: registration (serialised by reg_lock) fully builds a node before publishing it
 * with a release store, and render walks the lists with acquire loads, so a render never sees
 * a half-built node. Nodes are only freed by kq_metrics_free.
 */
#include "kq/metrics.h"

#include <inttypes.h>
#include <math.h> /* isnan, isinf, isfinite: macros, no libm needed */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kq/error.h"
#include "kq/util.h"

#define MAX_LABELS 16

typedef enum fam_kind { FAM_GAUGE, FAM_GAUGE_INT, FAM_COUNTER, FAM_HISTOGRAM } fam_kind;

typedef struct family family;

struct kq_metric {
    family *fam;
    char *labels; /* canonical, escaped label text ("" when none) */
    /* gauge: double bits; int gauge: int64 bits; counter: uint64 */
    _Atomic uint64_t v;
    /* histogram: nb + 1 non-cumulative bucket counts (last is +Inf) and the sum (double bits) */
    _Atomic uint64_t *buckets;
    _Atomic uint64_t sum_bits;
    _Atomic(kq_metric *) next;
};

struct family {
    char *name;
    char *help;
    fam_kind kind;
    double *bounds;
    int nb;
    _Atomic(kq_metric *) first;
    kq_metric *last; /* registration side only */
    _Atomic(family *) next;
};

struct kq_metrics {
    pthread_mutex_t reg_lock;
    _Atomic(family *) first;
    family *last; /* registration side only */
    char err[256];
};

/* ---- doubles in atomics ---------------------------------------------------------------- */

static uint64_t dbl_bits(double d)
{
    uint64_t u;

    memcpy(&u, &d, sizeof(u));
    return u;
}

static double bits_dbl(uint64_t u)
{
    double d;

    memcpy(&d, &u, sizeof(d));
    return d;
}

static void atomic_add_dbl(_Atomic uint64_t *a, double v)
{
    uint64_t old = atomic_load_explicit(a, memory_order_relaxed);

    while (!atomic_compare_exchange_weak_explicit(a, &old, dbl_bits(bits_dbl(old) + v),
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* ---- validation ------------------------------------------------------------------------ */

static void set_err(kq_metrics *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_err(kq_metrics *m, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(m->err, sizeof(m->err), fmt, ap);
    va_end(ap);
}

static bool valid_metric_name(const char *s)
{
    if (s == NULL || s[0] == '\0' || (s[0] == '_' && s[1] == '_'))
        return false;
    for (size_t i = 0; s[i] != '\0'; i++) {
        char c = s[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
            return false;
    }
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lx = strlen(suffix);

    return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

/* ---- string builder -------------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t len;
    size_t cap;
    bool oom;
} sbuf;

static bool sb_reserve(sbuf *b, size_t extra)
{
    size_t need, cap;
    char *np;

    if (b->oom)
        return false;
    need = b->len + extra + 1;
    if (need <= b->cap)
        return true;
    cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    np = realloc(b->p, cap);
    if (np == NULL) {
        b->oom = true;
        return false;
    }
    if (b->p == NULL)
        np[0] = '\0';
    b->p = np;
    b->cap = cap;
    return true;
}

static void sb_putn(sbuf *b, const char *s, size_t n)
{
    if (!sb_reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

static void sb_putc(sbuf *b, char c)
{
    sb_putn(b, &c, 1);
}

/* Escapes '\\' and '\n', plus '"' when quote is set (HELP text vs label values). */
static void sb_escaped(sbuf *b, const char *s, bool quote)
{
    for (; *s != '\0'; s++) {
        if (*s == '\\')
            sb_puts(b, "\\\\");
        else if (*s == '\n')
            sb_puts(b, "\\n");
        else if (quote && *s == '"')
            sb_puts(b, "\\\"");
        else
            sb_putc(b, *s);
    }
}

/* Go-style float: NaN, +Inf, -Inf, integers without exponent below 1e15, otherwise the
 * shortest of %.15g / %.17g that reads back exactly. */
static void fmt_double(char *out, size_t n, double v)
{
    if (isnan(v)) {
        snprintf(out, n, "NaN");
    } else if (isinf(v)) {
        snprintf(out, n, v > 0 ? "+Inf" : "-Inf");
    } else if (v > -1e15 && v < 1e15 && v == (double)(int64_t)v) {
        snprintf(out, n, "%.0f", v == 0 ? 0.0 : v);
    } else {
        snprintf(out, n, "%.15g", v);
        if (strtod(out, NULL) != v)
            snprintf(out, n, "%.17g", v);
    }
}

static void sb_double(sbuf *b, double v)
{
    char tmp[40];

    fmt_double(tmp, sizeof(tmp), v);
    sb_puts(b, tmp);
}

static void sb_u64(sbuf *b, uint64_t v)
{
    char tmp[24];

    snprintf(tmp, sizeof(tmp), "%" PRIu64, v);
    sb_puts(b, tmp);
}

static void sb_i64(sbuf *b, int64_t v)
{
    char tmp[24];

    snprintf(tmp, sizeof(tmp), "%" PRId64, v);
    sb_puts(b, tmp);
}

/* ---- labels ---------------------------------------------------------------------------- */

/* Parses Prometheus label syntax into canonical escaped text (*out, malloc'd). Returns 0,
 * KQ_ERR_CONFIG with m->err set, or KQ_ERR_NOMEM. */
static int parse_labels(kq_metrics *m, const char *metric, const char *in, char **out)
{
    sbuf b = {0};
    sbuf val = {0};
    const char *p = in ? in : "";
    const char *names[MAX_LABELS];
    size_t name_lens[MAX_LABELS];
    int n = 0, rc = KQ_ERR_CONFIG;

    *out = NULL;
    sb_reserve(&b, 16);
    while (*p == ' ')
        p++;
    while (*p != '\0') {
        const char *name = p;
        size_t nl;

        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_')) {
            set_err(m, "metric %s: bad label name at \"%.40s\"", metric, p);
            goto out;
        }
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
               (*p >= '0' && *p <= '9'))
            p++;
        nl = (size_t)(p - name);
        if (nl >= 2 && name[0] == '_' && name[1] == '_') {
            set_err(m, "metric %s: label name %.*s is reserved (starts with __)", metric, (int)nl,
                    name);
            goto out;
        }
        if (n == MAX_LABELS) {
            set_err(m, "metric %s: more than %d labels", metric, MAX_LABELS);
            goto out;
        }
        for (int i = 0; i < n; i++) {
            if (name_lens[i] == nl && memcmp(names[i], name, nl) == 0) {
                set_err(m, "metric %s: label %.*s appears twice", metric, (int)nl, name);
                goto out;
            }
        }
        names[n] = name;
        name_lens[n++] = nl;
        if (p[0] != '=' || p[1] != '"') {
            set_err(m, "metric %s: label %.*s must be followed by =\"value\"", metric, (int)nl,
                    name);
            goto out;
        }
        p += 2;
        val.len = 0;
        sb_reserve(&val, 16);
        while (*p != '"') {
            if (*p == '\0') {
                set_err(m, "metric %s: label %.*s has an unterminated value", metric, (int)nl,
                        name);
                goto out;
            }
            if (*p == '\\') {
                if (p[1] == '\\' || p[1] == '"')
                    sb_putc(&val, p[1]);
                else if (p[1] == 'n')
                    sb_putc(&val, '\n');
                else {
                    set_err(m, "metric %s: label %.*s has a bad escape (only \\\\ \\\" \\n)",
                            metric, (int)nl, name);
                    goto out;
                }
                p += 2;
            } else {
                sb_putc(&val, *p++);
            }
        }
        p++; /* closing quote */
        if (b.len > 0)
            sb_putc(&b, ',');
        sb_putn(&b, name, nl);
        sb_puts(&b, "=\"");
        sb_escaped(&b, val.p ? val.p : "", true);
        sb_putc(&b, '"');
        while (*p == ' ')
            p++;
        if (*p == ',') {
            p++;
            while (*p == ' ')
                p++;
        } else if (*p != '\0') {
            set_err(m, "metric %s: expected ',' between labels at \"%.40s\"", metric, p);
            goto out;
        }
    }
    if (b.oom || val.oom) {
        set_err(m, "metric %s: out of memory", metric);
        rc = KQ_ERR_NOMEM;
        goto out;
    }
    *out = b.p;
    b.p = NULL;
    rc = 0;
out:
    free(b.p);
    free(val.p);
    return rc;
}

/* ---- registry -------------------------------------------------------------------------- */

static void metric_free(kq_metric *x)
{
    free(x->labels);
    free((void *)x->buckets);
    free(x);
}

static void family_free(family *f)
{
    kq_metric *x = atomic_load(&f->first);

    while (x != NULL) {
        kq_metric *next = atomic_load(&x->next);
        metric_free(x);
        x = next;
    }
    free(f->name);
    free(f->help);
    free(f->bounds);
    free(f);
}

static family *find_family(kq_metrics *m, const char *name)
{
    for (family *f = atomic_load(&m->first); f != NULL; f = atomic_load(&f->next))
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

static const char *kind_name(fam_kind k)
{
    switch (k) {
    case FAM_GAUGE:
        return "gauge";
    case FAM_GAUGE_INT:
        return "integer gauge";
    case FAM_COUNTER:
        return "counter";
    case FAM_HISTOGRAM:
        return "histogram";
    }
    return "?";
}

/* Names a histogram would add must not collide with other families, and vice versa. */
static bool name_clash(kq_metrics *m, const char *name, fam_kind kind)
{
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    char tmp[512];

    for (family *f = atomic_load(&m->first); f != NULL; f = atomic_load(&f->next)) {
        for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
            if (f->kind == FAM_HISTOGRAM) {
                snprintf(tmp, sizeof(tmp), "%s%s", f->name, sfx[i]);
                if (strcmp(tmp, name) == 0)
                    return true;
            }
            if (kind == FAM_HISTOGRAM) {
                snprintf(tmp, sizeof(tmp), "%s%s", name, sfx[i]);
                if (strcmp(tmp, f->name) == 0)
                    return true;
            }
        }
    }
    return false;
}

static kq_metric *do_register(kq_metrics *m, const char *name, const char *help, const char *labels,
                              fam_kind kind, const double *bounds, int nb)
{
    family *f = NULL, *newf = NULL;
    kq_metric *x = NULL, *result = NULL;
    char *canon = NULL;

    if (m == NULL)
        return NULL;
    if (help == NULL)
        help = "";
    pthread_mutex_lock(&m->reg_lock);
    m->err[0] = '\0';
    if (!valid_metric_name(name)) {
        set_err(m,
                "bad metric name \"%.100s\": must match [a-zA-Z_:][a-zA-Z0-9_:]* and not "
                "start with __",
                name ? name : "(null)");
        goto out;
    }
    if (strlen(name) > 200) {
        set_err(m, "metric name %.40s... is longer than 200 characters", name);
        goto out;
    }
    if (kind == FAM_COUNTER && (!ends_with(name, "_total") || strcmp(name, "_total") == 0)) {
        set_err(m, "counter %s: name must end in _total", name);
        goto out;
    }
    if (kind == FAM_HISTOGRAM) {
        if (nb < 1 || nb > KQ_METRICS_MAX_BUCKETS || bounds == NULL) {
            set_err(m, "histogram %s: needs 1..%d bucket bounds, got %d", name,
                    KQ_METRICS_MAX_BUCKETS, nb);
            goto out;
        }
        for (int i = 0; i < nb; i++) {
            if (!isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1]))) {
                set_err(m,
                        "histogram %s: bounds must be finite and strictly increasing "
                        "(bound %d)",
                        name, i);
                goto out;
            }
        }
    }
    if (parse_labels(m, name, labels, &canon) != 0)
        goto out;

    f = find_family(m, name);
    if (f != NULL) {
        if (f->kind != kind) {
            set_err(m, "metric %s is already registered as a %s, not a %s", name,
                    kind_name(f->kind), kind_name(kind));
            goto out;
        }
        if (strcmp(f->help, help) != 0) {
            set_err(m, "metric %s is already registered with a different help text", name);
            goto out;
        }
        if (kind == FAM_HISTOGRAM &&
            (f->nb != nb || memcmp(f->bounds, bounds, sizeof(double) * (size_t)nb) != 0)) {
            set_err(m, "histogram %s is already registered with different bounds", name);
            goto out;
        }
        for (kq_metric *y = atomic_load(&f->first); y != NULL; y = atomic_load(&y->next)) {
            if (strcmp(y->labels, canon) == 0) {
                result = y;
                goto out;
            }
        }
    } else if (name_clash(m, name, kind)) {
        set_err(m, "metric %s clashes with the series of a histogram", name);
        goto out;
    }

    x = calloc(1, sizeof(*x));
    if (x == NULL)
        goto oom;
    x->labels = canon;
    canon = NULL;
    atomic_init(&x->v, 0);
    atomic_init(&x->sum_bits, dbl_bits(0.0));
    atomic_init(&x->next, NULL);
    if (kind == FAM_GAUGE)
        atomic_init(&x->v, dbl_bits(0.0));
    if (kind == FAM_HISTOGRAM) {
        x->buckets = calloc((size_t)nb + 1, sizeof(*x->buckets));
        if (x->buckets == NULL)
            goto oom;
        for (int i = 0; i <= nb; i++)
            atomic_init(&x->buckets[i], 0);
    }

    if (f == NULL) {
        newf = calloc(1, sizeof(*newf));
        if (newf == NULL)
            goto oom;
        newf->kind = kind;
        newf->name = strdup(name);
        newf->help = strdup(help);
        if (newf->name == NULL || newf->help == NULL)
            goto oom;
        if (kind == FAM_HISTOGRAM) {
            newf->bounds = malloc(sizeof(double) * (size_t)nb);
            if (newf->bounds == NULL)
                goto oom;
            memcpy(newf->bounds, bounds, sizeof(double) * (size_t)nb);
            newf->nb = nb;
        }
        atomic_init(&newf->first, NULL);
        atomic_init(&newf->next, NULL);
        f = newf;
    }
    x->fam = f;

    /* publish the child, then (for a new family) the family */
    if (f->last == NULL)
        atomic_store_explicit(&f->first, x, memory_order_release);
    else
        atomic_store_explicit(&f->last->next, x, memory_order_release);
    f->last = x;
    if (newf != NULL) {
        if (m->last == NULL)
            atomic_store_explicit(&m->first, newf, memory_order_release);
        else
            atomic_store_explicit(&m->last->next, newf, memory_order_release);
        m->last = newf;
        newf = NULL;
    }
    result = x;
    x = NULL;
    goto out;
oom:
    set_err(m, "metric %s: out of memory", name);
out:
    if (x != NULL)
        metric_free(x);
    if (newf != NULL)
        family_free(newf);
    free(canon);
    pthread_mutex_unlock(&m->reg_lock);
    return result;
}

kq_metric *kq_metrics_gauge(kq_metrics *m, const char *name, const char *help, const char *labels)
{
    return do_register(m, name, help, labels, FAM_GAUGE, NULL, 0);
}

kq_metric *kq_metrics_gauge_int(kq_metrics *m, const char *name, const char *help,
                                const char *labels)
{
    return do_register(m, name, help, labels, FAM_GAUGE_INT, NULL, 0);
}

kq_metric *kq_metrics_counter(kq_metrics *m, const char *name, const char *help, const char *labels)
{
    return do_register(m, name, help, labels, FAM_COUNTER, NULL, 0);
}

kq_metric *kq_metrics_histogram(kq_metrics *m, const char *name, const char *help,
                                const double *bounds_s, int n)
{
    return do_register(m, name, help, NULL, FAM_HISTOGRAM, bounds_s, n);
}

const char *kq_metrics_last_error(const kq_metrics *m)
{
    return m ? m->err : "no registry";
}

/* Process start from /proc (boot time + start ticks), else now. */
static double process_start_seconds(void)
{
    char buf[1024];
    double btime = -1, start_ticks = -1;
    long hz = sysconf(_SC_CLK_TCK);
    FILE *fp;

    fp = fopen("/proc/stat", "r");
    if (fp != NULL) {
        while (fgets(buf, sizeof(buf), fp) != NULL) {
            if (strncmp(buf, "btime ", 6) == 0) {
                btime = strtod(buf + 6, NULL);
                break;
            }
        }
        fclose(fp);
    }
    fp = fopen("/proc/self/stat", "r");
    if (fp != NULL) {
        size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
        char *p;

        buf[n] = '\0';
        fclose(fp);
        p = strrchr(buf, ')');
        /* after "pid (comm)": field 3 is state; starttime is field 22 */
        for (int field = 2; p != NULL && field < 22; field++)
            p = strchr(p + 1, ' ');
        if (p != NULL)
            start_ticks = strtod(p + 1, NULL);
    }
    if (btime > 0 && start_ticks >= 0 && hz > 0)
        return btime + start_ticks / (double)hz;
    return (double)kq_wall_ms() / 1000.0;
}

kq_metrics *kq_metrics_new(void)
{
    kq_metrics *m = calloc(1, sizeof(*m));
    kq_metric *info, *start;

    if (m == NULL)
        return NULL;
    if (pthread_mutex_init(&m->reg_lock, NULL) != 0) {
        free(m);
        return NULL;
    }
    atomic_init(&m->first, NULL);
    info = kq_metrics_gauge_int(m, "kq_build_info", "Build information; the value is always 1.",
                                "version=\"" KQ_VERSION "\"");
    start = kq_metrics_gauge(m, "process_start_time_seconds",
                             "Start time of the process since unix epoch in seconds.", NULL);
    if (info == NULL || start == NULL) {
        kq_metrics_free(m);
        return NULL;
    }
    kq_metric_set_int(info, 1);
    kq_metric_set(start, process_start_seconds());
    return m;
}

void kq_metrics_free(kq_metrics *m)
{
    family *f;

    if (m == NULL)
        return;
    f = atomic_load(&m->first);
    while (f != NULL) {
        family *next = atomic_load(&f->next);
        family_free(f);
        f = next;
    }
    pthread_mutex_destroy(&m->reg_lock);
    free(m);
}

/* ---- updates --------------------------------------------------------------------------- */

void kq_metric_set(kq_metric *x, double v)
{
    if (x == NULL)
        return;
    if (x->fam->kind == FAM_GAUGE) {
        atomic_store_explicit(&x->v, dbl_bits(v), memory_order_relaxed);
    } else if (x->fam->kind == FAM_GAUGE_INT && !isnan(v)) {
        int64_t i;
        if (v >= 9223372036854775807.0)
            i = INT64_MAX;
        else if (v <= -9223372036854775808.0)
            i = INT64_MIN;
        else
            i = (int64_t)(v < 0 ? v - 0.5 : v + 0.5); /* round half away from zero */
        atomic_store_explicit(&x->v, (uint64_t)i, memory_order_relaxed);
    }
}

void kq_metric_set_int(kq_metric *x, int64_t v)
{
    if (x == NULL)
        return;
    if (x->fam->kind == FAM_GAUGE_INT)
        atomic_store_explicit(&x->v, (uint64_t)v, memory_order_relaxed);
    else if (x->fam->kind == FAM_GAUGE)
        atomic_store_explicit(&x->v, dbl_bits((double)v), memory_order_relaxed);
}

void kq_metric_add(kq_metric *x, double v)
{
    if (x == NULL || isnan(v))
        return;
    switch (x->fam->kind) {
    case FAM_GAUGE:
        atomic_add_dbl(&x->v, v);
        break;
    case FAM_GAUGE_INT:
        if (v > -9.2e18 && v < 9.2e18)
            atomic_fetch_add_explicit(&x->v, (uint64_t)(int64_t)v, memory_order_relaxed);
        break;
    case FAM_COUNTER:
        if (v >= 1 && v < 1.8e19)
            atomic_fetch_add_explicit(&x->v, (uint64_t)v, memory_order_relaxed);
        break;
    case FAM_HISTOGRAM:
        break;
    }
}

void kq_metric_inc(kq_metric *x)
{
    kq_metric_add(x, 1);
}

void kq_metric_observe(kq_metric *x, double seconds)
{
    const family *f;
    int i;

    if (x == NULL || x->fam->kind != FAM_HISTOGRAM || isnan(seconds))
        return;
    f = x->fam;
    for (i = 0; i < f->nb; i++)
        if (seconds <= f->bounds[i])
            break;
    atomic_fetch_add_explicit(&x->buckets[i], 1, memory_order_relaxed);
    atomic_add_dbl(&x->sum_bits, seconds);
}

double kq_metric_value(const kq_metric *x)
{
    uint64_t u, total = 0;

    if (x == NULL)
        return 0;
    u = atomic_load_explicit(&x->v, memory_order_relaxed);
    switch (x->fam->kind) {
    case FAM_GAUGE:
        return bits_dbl(u);
    case FAM_GAUGE_INT:
        return (double)(int64_t)u;
    case FAM_COUNTER:
        return (double)u;
    case FAM_HISTOGRAM:
        for (int i = 0; i <= x->fam->nb; i++)
            total += atomic_load_explicit(&x->buckets[i], memory_order_relaxed);
        return (double)total;
    }
    return 0;
}

/* ---- rendering ------------------------------------------------------------------------- */

static void render_series_name(sbuf *b, const char *name, const char *suffix, const char *labels,
                               const char *extra)
{
    sb_puts(b, name);
    sb_puts(b, suffix);
    if (labels[0] != '\0' || extra != NULL) {
        sb_putc(b, '{');
        sb_puts(b, labels);
        if (extra != NULL) {
            if (labels[0] != '\0')
                sb_putc(b, ',');
            sb_puts(b, extra);
        }
        sb_putc(b, '}');
    }
    sb_putc(b, ' ');
}

static void render_histogram(sbuf *b, const family *f, const kq_metric *x)
{
    char le[64], num[40];
    uint64_t cum = 0;

    for (int i = 0; i <= f->nb; i++) {
        cum += atomic_load_explicit(&x->buckets[i], memory_order_relaxed);
        if (i < f->nb) {
            fmt_double(num, sizeof(num), f->bounds[i]);
            snprintf(le, sizeof(le), "le=\"%s\"", num);
        } else {
            snprintf(le, sizeof(le), "le=\"+Inf\"");
        }
        render_series_name(b, f->name, "_bucket", x->labels, le);
        sb_u64(b, cum);
        sb_putc(b, '\n');
    }
    render_series_name(b, f->name, "_sum", x->labels, NULL);
    sb_double(b, bits_dbl(atomic_load_explicit(&x->sum_bits, memory_order_relaxed)));
    sb_putc(b, '\n');
    /* _count is the +Inf bucket as read above, so the two always agree in one scrape */
    render_series_name(b, f->name, "_count", x->labels, NULL);
    sb_u64(b, cum);
    sb_putc(b, '\n');
}

int kq_metrics_render(const kq_metrics *m, char **out, size_t *len)
{
    sbuf b = {0};

    *out = NULL;
    if (len != NULL)
        *len = 0;
    if (m == NULL)
        return KQ_ERR_INTERNAL;
    sb_reserve(&b, 4096);
    for (const family *f = atomic_load_explicit(&m->first, memory_order_acquire); f != NULL;
         f = atomic_load_explicit(&f->next, memory_order_acquire)) {
        const char *type = f->kind == FAM_COUNTER     ? "counter"
                           : f->kind == FAM_HISTOGRAM ? "histogram"
                                                      : "gauge";
        sb_puts(&b, "# HELP ");
        sb_puts(&b, f->name);
        sb_putc(&b, ' ');
        sb_escaped(&b, f->help, false);
        sb_puts(&b, "\n# TYPE ");
        sb_puts(&b, f->name);
        sb_putc(&b, ' ');
        sb_puts(&b, type);
        sb_putc(&b, '\n');
        for (const kq_metric *x = atomic_load_explicit(&f->first, memory_order_acquire); x != NULL;
             x = atomic_load_explicit(&x->next, memory_order_acquire)) {
            uint64_t u = atomic_load_explicit(&x->v, memory_order_relaxed);

            if (f->kind == FAM_HISTOGRAM) {
                render_histogram(&b, f, x);
                continue;
            }
            render_series_name(&b, f->name, "", x->labels, NULL);
            if (f->kind == FAM_GAUGE)
                sb_double(&b, bits_dbl(u));
            else if (f->kind == FAM_GAUGE_INT)
                sb_i64(&b, (int64_t)u);
            else
                sb_u64(&b, u);
            sb_putc(&b, '\n');
        }
    }
    if (b.oom || b.p == NULL) {
        free(b.p);
        return KQ_ERR_NOMEM;
    }
    *out = b.p;
    if (len != NULL)
        *len = b.len;
    return 0;
}
