#include "timer.h"

#include "core/record.h"
#include "probes/range_table.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct timer_probe {
    range_table rt;       /* one value per range: seconds */
    int64_t stack_t0[TIMER_MAX_DEPTH];
    int depth;
    int64_t dropped;
    double overhead_ns;
    timer_clock_fn clock;
    void *clock_arg;
    /* Calibration: end() stores raw elapsed here instead of accumulating. */
    int64_t *calib;
    int calib_n, calib_cap;
};

static inline int64_t now_ns(const timer_probe *t) {
    if (t->clock) return t->clock(t->clock_arg);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double timer_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void timer_begin(void *ctx, const probe_range *r) {
    (void)r;
    timer_probe *t = ctx;
    if (t->depth >= TIMER_MAX_DEPTH) {
        t->depth++; /* keep balance; the matching end drops it */
        return;
    }
    t->stack_t0[t->depth++] = now_ns(t); /* last thing before the op runs */
}

static void timer_end(void *ctx, const probe_range *r) {
    timer_probe *t = ctx;
    int64_t t1 = now_ns(t); /* first thing after the op ran */
    if (t->depth <= 0) {
        t->dropped++;
        return;
    }
    t->depth--;
    if (t->depth >= TIMER_MAX_DEPTH) {
        t->dropped++;
        return;
    }
    int64_t raw = t1 - t->stack_t0[t->depth];
    if (t->calib) {
        if (t->calib_n < t->calib_cap) t->calib[t->calib_n++] = raw;
        return;
    }
    int64_t k = range_table_key(&t->rt, r->phase, r->layer, r->kind);
    if (k < 0) {
        t->dropped++;
        return;
    }
    /* The overhead is a median in ns; subtract its rounded value (sub-ns is far below noise). */
    double s = (double)(raw - (int64_t)(t->overhead_ns + 0.5)) * 1e-9;
    range_table_add(&t->rt, k, r->step, &s);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

xf_status timer_probe_init_clock(int64_t n_layers, int max_reps, int calib_pairs, timer_clock_fn clock, void *arg,
                                 timer_probe **out) {
    *out = NULL;
    if (n_layers < 0 || n_layers > 100000) return xf_errorf(XF_EINVAL, "timer probe: n_layers %lld out of range (0 to 100000)", (long long)n_layers);
    if (max_reps < 1 || max_reps > 100000) return xf_errorf(XF_EINVAL, "timer probe: max_reps %d out of range (1 to 100000)", max_reps);
    if (calib_pairs < 0 || calib_pairs > 10000000) return xf_errorf(XF_EINVAL, "timer probe: calib_pairs %d out of range", calib_pairs);
    if (calib_pairs == 0) calib_pairs = 20000;
    timer_probe *t = calloc(1, sizeof *t);
    if (!t) return xf_errorf(XF_ENOMEM, "timer probe: out of memory");
    t->clock = clock;
    t->clock_arg = arg;
    xf_status st = range_table_init(&t->rt, n_layers, 1, max_reps);
    if (st) {
        free(t);
        return xf_error_prefix(st, "timer: ");
    }
    t->calib = malloc((size_t)calib_pairs * sizeof *t->calib);
    if (!t->calib) {
        timer_probe_free(t);
        return xf_errorf(XF_ENOMEM, "timer probe: out of memory for %d calibration pairs", calib_pairs);
    }
    /* Overhead: empty ranges through the same function pointers a probe_set uses. */
    t->calib_cap = calib_pairs;
    probe p = timer_probe_as_probe(t);
    probe_range r = {XF_PREFILL, -1, OP_EMBEDDING, 0};
    for (int i = 0; i < calib_pairs; i++) {
        p.range_begin(p.ctx, &r);
        p.range_end(p.ctx, &r);
    }
    qsort(t->calib, (size_t)t->calib_n, sizeof *t->calib, cmp_i64);
    t->overhead_ns = t->calib_n ? (double)t->calib[t->calib_n / 2] : 0.0;
    free(t->calib);
    t->calib = NULL;
    t->calib_n = t->calib_cap = 0;
    *out = t;
    return XF_OK;
}

xf_status timer_probe_init(int64_t n_layers, int max_reps, int calib_pairs, timer_probe **out) {
    return timer_probe_init_clock(n_layers, max_reps, calib_pairs, NULL, NULL, out);
}

void timer_probe_free(timer_probe *t) {
    if (!t) return;
    range_table_free(&t->rt);
    free(t->calib);
    free(t);
}

static void timer_free_ctx(void *ctx) { timer_probe_free(ctx); }

static xf_status timer_point_begin(void *ctx, const struct record_point *p) {
    (void)p;
    timer_probe_clear(ctx);
    return XF_OK;
}

static void timer_rep_begin(void *ctx) { timer_probe_rep_begin(ctx); }

static xf_status timer_rep_end(void *ctx, int rep) { return rep < 0 ? XF_OK : timer_probe_rep_end(ctx); }

/* The op's samples, their median (time_s) and interquartile range (spread_s); sets measured. */
static xf_status timer_fill(void *ctx, int64_t i, int64_t n_decode_steps, record_op *op) {
    (void)i;
    (void)n_decode_steps;
    const double *smp;
    int n = timer_probe_samples(ctx, op->cost.phase, op->cost.layer, op->cost.kind, &smp);
    if (n <= 0) return XF_OK; /* the model did not run this op */
    free(op->samples_s);
    op->samples_s = malloc((size_t)n * sizeof *op->samples_s);
    if (!op->samples_s) return xf_errorf(XF_ENOMEM, "out of memory for samples");
    memcpy(op->samples_s, smp, (size_t)n * sizeof *smp);
    op->n_samples = n;
    op->measured = 1;
    timer_stats(smp, n, &op->time_s, &op->spread_s);
    return XF_OK;
}

probe timer_probe_as_probe(timer_probe *t) {
    probe p = {"timer", t, timer_begin, timer_end, timer_free_ctx, timer_point_begin, timer_rep_begin, timer_rep_end, NULL, timer_fill};
    return p;
}

double timer_probe_overhead_s(const timer_probe *t) { return t ? t->overhead_ns * 1e-9 : 0.0; }

void timer_probe_rep_begin(timer_probe *t) {
    range_table_rep_begin(&t->rt);
    t->depth = 0;
}

xf_status timer_probe_rep_end(timer_probe *t) {
    xf_status s = range_table_rep_end(&t->rt, 0);
    return s ? xf_error_prefix(s, "timer: ") : XF_OK;
}

void timer_probe_clear(timer_probe *t) { range_table_clear(&t->rt); }

int timer_probe_samples(const timer_probe *t, xf_phase phase, int layer, op_kind kind, const double **samples) {
    return range_table_samples(&t->rt, range_table_key(&t->rt, phase, layer, kind), 0, samples);
}

int64_t timer_probe_dropped(const timer_probe *t) { return t->dropped; }

static double quantile_sorted(const double *s, int n, double q) {
    double pos = q * (double)(n - 1);
    int lo = (int)pos;
    if (lo >= n - 1) return s[n - 1];
    double f = pos - lo;
    return s[lo] + f * (s[lo + 1] - s[lo]);
}

void timer_stats(const double *x, int n, double *median, double *iqr) {
    *median = 0;
    *iqr = 0;
    if (n <= 0) return;
    double small[64];
    double *s = n <= 64 ? small : malloc((size_t)n * sizeof *s);
    if (!s) { /* out of memory: fall back to the first sample, no spread */
        *median = x[0];
        return;
    }
    memcpy(s, x, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_dbl);
    *median = quantile_sorted(s, n, 0.5);
    *iqr = quantile_sorted(s, n, 0.75) - quantile_sorted(s, n, 0.25);
    if (s != small) free(s);
}
