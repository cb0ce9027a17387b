#include "compare.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

const char *compare_metric_name(compare_metric m) {
    static const char *names[CMP_METRIC_COUNT] = {"time", "tokens_per_s", "ttft", "tpot", "bytes", "flops", "instructions",
                                                   "cpu_ttft", "cpu_tpot"};
    return (m >= 0 && m < CMP_METRIC_COUNT) ? names[m] : "?";
}

const char *compare_verdict_name(compare_verdict v) {
    switch (v) {
    case CMP_UNCHANGED: return "unchanged";
    case CMP_REGRESSION: return "regression";
    case CMP_IMPROVEMENT: return "improvement";
    }
    return "?";
}

const char *compare_method_name(compare_method m) {
    switch (m) {
    case CMP_METHOD_EXACT: return "exact";
    case CMP_METHOD_U: return "u-test";
    case CMP_METHOD_PAIRED: return "paired";
    case CMP_METHOD_UNTESTED: return "untested";
    }
    return "?";
}

const char *compare_method_desc(compare_method m) {
    switch (m) {
    case CMP_METHOD_EXACT: return "deterministic figure compared exactly: any change beyond the exact threshold counts";
    case CMP_METHOD_U:
        return "two records: Mann-Whitney U on the repetitions (Holm over the per-op items), bootstrap CI of the "
               "median ratio over repetitions; one run per side cannot see the drift between runs (use --ab)";
    case CMP_METHOD_PAIRED:
        return "interleaved A/B rounds: Wilcoxon signed-rank test on the per-round log ratios (Holm over the per-op items), "
               "expanded-percentile bootstrap CI of "
               "the Hodges-Lehmann ratio (median of pairwise means of the log ratios) over rounds";
    case CMP_METHOD_UNTESTED: return "measured without per-repetition samples: shown, not tested";
    }
    return "?";
}

xf_status compare_metrics_parse(const char *s, unsigned *mask) {
    *mask = 0;
    if (!s || !*s) return xf_errorf(XF_EINVAL, "--metric needs a comma list of time, tokens_per_s, ttft, tpot, bytes, flops, instructions, "
                                               "cpu_ttft, cpu_tpot");
    const char *p = s;
    while (1) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int found = -1;
        for (int m = 0; m < CMP_METRIC_COUNT; m++) {
            const char *nm = compare_metric_name((compare_metric)m);
            if (len == strlen(nm) && strncmp(p, nm, len) == 0) found = m;
        }
        if (len == 5 && strncmp(p, "tok/s", 5) == 0) found = CMP_TOKENS_PER_S;
        if (found < 0)
            return xf_errorf(XF_EINVAL, "--metric: unknown metric '%.*s' (use time, tokens_per_s, ttft, tpot, bytes, flops, instructions, "
                                                "cpu_ttft, cpu_tpot)",
                             (int)(len > 32 ? 32 : len), p);
        *mask |= 1u << found;
        if (!comma) break;
        p = comma + 1;
    }
    return XF_OK;
}

void compare_options_default(compare_options *o) {
    o->metrics = 1u << CMP_TIME;
    o->alpha = 0.05;
    o->threshold = 0.05;
    o->exact_threshold = 0;
    o->force = 0;
    o->min_samples = 5;
    o->n_boot = 2000;
    o->seed = 0x5eed2021u;
    o->explain = 0;
}

void compare_result_free(compare_result *r) {
    if (!r) return;
    free(r->items);
    r->items = NULL;
    r->n_items = 0;
}

const char *compare_point_label(const record_point *p, char *buf, size_t len) {
    const workload *w = &p->wl;
    int n = snprintf(buf, len, "batch %lld, prompt %lld, gen %lld, w %s a %s kv %s", (long long)w->batch, (long long)w->prompt,
                     (long long)w->gen, dtype_name(w->wdtype), dtype_name(w->adtype), dtype_name(w->kvdtype));
    if (p->run.backend[0] && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ", %s %d threads, %s", p->run.backend, p->run.threads, p->run.kv_policy);
    return buf;
}

static void note(compare_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(compare_result *r, const char *fmt, ...) {
    if (r->n_notes == COMPARE_MAX_NOTES) {
        r->notes_dropped++;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->notes[r->n_notes++], sizeof r->notes[0], fmt, ap);
    va_end(ap);
}

static int same_model(const model_config *a, const model_config *b) {
    return strcmp(a->name, b->name) == 0 && a->n_layers == b->n_layers && a->d_model == b->d_model &&
           a->n_heads == b->n_heads && a->n_kv_heads == b->n_kv_heads && a->head_dim == b->head_dim && a->d_ff == b->d_ff &&
           a->vocab == b->vocab;
}

/* The workload and the run settings that change what is measured (not reps, warm-up or seed). */
static int same_point(const record_point *a, const record_point *b) {
    const workload *x = &a->wl, *y = &b->wl;
    return x->batch == y->batch && x->prompt == y->prompt && x->gen == y->gen && x->wdtype == y->wdtype &&
           x->adtype == y->adtype && x->kvdtype == y->kvdtype && x->quant_group == y->quant_group &&
           strcmp(a->run.backend, b->run.backend) == 0 && a->run.threads == b->run.threads &&
           strcmp(a->run.kv_policy, b->run.kv_policy) == 0 && strcmp(a->run.kv_alloc, b->run.kv_alloc) == 0;
}

static int point_measured(const record_point *p) {
    for (int64_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].measured) return 1;
    return 0;
}

static const char *op_label(const record_op *op, char *buf, size_t len) {
    if (op->cost.layer >= 0) snprintf(buf, len, "%s layer %d %s", phase_name(op->cost.phase), op->cost.layer, op_kind_name(op->cost.kind));
    else snprintf(buf, len, "%s %s", phase_name(op->cost.phase), op_kind_name(op->cost.kind));
    return buf;
}

/* Every op a measured point says it measured must carry its samples. (An op the runner did not
 * time keeps measured = 0 and its predicted time, compared exactly.) */
static xf_status check_samples(const record_point *p, int idx, const char *side) {
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        if (op->measured && (op->n_samples < 1 || !op->samples_s)) {
            char ol[64], pl[160];
            return xf_errorf(XF_EINVAL,
                             "%s record, point %d (%s): op '%s' has no samples (samples_s) although the point was measured; "
                             "a comparison needs the raw samples of every op: rerun with a current xfprof",
                             side, idx + 1, compare_point_label(p, pl, sizeof pl), op_label(op, ol, sizeof ol));
        }
    }
    return XF_OK;
}

/* Imported ops of kind "other" are told apart by their source (the traced op's name). */
static int same_op(const record_op *a, const record_op *want) {
    const cost_op *c = &a->cost;
    return c->phase == want->cost.phase && c->layer == want->cost.layer && c->kind == want->cost.kind &&
           (c->kind != OP_OTHER || strcmp(a->source, want->source) == 0);
}

static int64_t find_op(const record_point *p, const record_op *want, int64_t hint, const unsigned char *used) {
    if (hint >= 0 && hint < p->n_ops && !used[hint] && same_op(&p->ops[hint], want)) return hint;
    for (int64_t i = 0; i < p->n_ops; i++)
        if (!used[i] && same_op(&p->ops[i], want)) return i;
    return -1;
}

typedef struct builder {
    compare_result *r;
    const compare_options *o;
    int64_t cap;
    int rounds; /* 1: a round of compare_rounds (its medians are paired later; no U-test notes) */
    int64_t instr_missing; /* ops of the current point without instructions on a side */
} builder;

static compare_item *push(builder *b) {
    compare_result *r = b->r;
    if (r->n_items == b->cap) {
        int64_t nc = b->cap ? b->cap * 2 : 256;
        compare_item *ni = realloc(r->items, (size_t)nc * sizeof *ni);
        if (!ni) return NULL;
        r->items = ni;
        b->cap = nc;
    }
    compare_item *it = &r->items[r->n_items++];
    memset(it, 0, sizeof *it);
    it->p = it->p_adj = it->ci_lo = it->ci_hi = it->detectable = NAN;
    return it;
}

/* Sets ratio, change and, for deterministic figures, the verdict. Measured figures get theirs in
 * finalize(), once the whole family's p-values are known (Holm). it->ci_lo / ci_hi arrive as the
 * CI of the ratio NEW / BASE and leave as the CI of the oriented change. */
static void decide(builder *b, compare_item *it, int higher_is_better, int deterministic) {
    double x = it->base, y = it->new_;
    if (x == y) it->ratio = 1;
    else if (x == 0) it->ratio = INFINITY;
    else it->ratio = y / x;
    double rel = (x == y) ? 0 : (x == 0 ? INFINITY : y / x - 1);
    it->change = higher_is_better ? -rel : rel;
    double rlo = it->ci_lo, rhi = it->ci_hi;
    if (higher_is_better) {
        it->ci_lo = 1 - rhi; /* change = 1 - NEW / BASE: fewer tokens/s is worse */
        it->ci_hi = 1 - rlo;
    } else {
        it->ci_lo = rlo - 1;
        it->ci_hi = rhi - 1;
    }
    it->verdict = CMP_UNCHANGED;
    if (deterministic) {
        it->method = CMP_METHOD_EXACT;
        double thr = fmax(b->o->exact_threshold, 1e-9); /* 1e-9: a double's JSON round trip, nothing more */
        if (it->change > thr) it->verdict = CMP_REGRESSION;
        else if (it->change < -thr) it->verdict = CMP_IMPROVEMENT;
        it->ci_lo = it->ci_hi = NAN;
    } else if (!it->tested) {
        it->method = CMP_METHOD_UNTESTED;
    }
}

static int is_measured_method(compare_method m) { return m == CMP_METHOD_U || m == CMP_METHOD_PAIRED; }

/* Holm over one family (per-op items, or the point items), then the verdicts of measured items:
 * the CI wholly beyond the threshold, and for per-op items also the adjusted p below alpha; which
 * items decide the exit status; the counts. */
static xf_status finalize(compare_result *r, const compare_options *o) {
    r->headline_gate = 0;
    r->n_regressions = r->n_improvements = r->n_gate_regressions = 0;
    for (int64_t i = 0; i < r->n_items; i++)
        if (!r->items[i].is_op && is_measured_method(r->items[i].method) && !(o->explain & (1u << r->items[i].metric)))
            r->headline_gate = 1;
    size_t n = (size_t)(r->n_items > 0 ? r->n_items : 1);
    double *p = malloc(2 * n * sizeof *p);
    if (!p) return xf_errorf(XF_ENOMEM, "out of memory comparing records");
    double *adj = p + n;
    for (int fam = 0; fam < 2; fam++) { /* 0: per-op items; 1: point items (TTFT, TPOT, tokens/s) */
        for (int64_t i = 0; i < r->n_items; i++) {
            const compare_item *it = &r->items[i];
            p[i] = (it->is_op == (fam == 0) && is_measured_method(it->method)) ? it->p : NAN;
        }
        xf_status s = stats_holm(p, (size_t)r->n_items, adj);
        if (s) {
            free(p);
            return s;
        }
        for (int64_t i = 0; i < r->n_items; i++)
            if (!isnan(p[i])) r->items[i].p_adj = adj[i];
    }
    free(p);
    for (int64_t i = 0; i < r->n_items; i++) {
        compare_item *it = &r->items[i];
        if (is_measured_method(it->method)) {
            int sig = !it->is_op || it->p_adj < o->alpha;
            it->verdict = CMP_UNCHANGED;
            if (sig && it->ci_lo > o->threshold) it->verdict = CMP_REGRESSION;
            else if (sig && it->ci_hi < -o->threshold) it->verdict = CMP_IMPROVEMENT;
            it->gate = (!it->is_op || !r->headline_gate) && !(o->explain & (1u << it->metric));
        } else {
            it->gate = it->method == CMP_METHOD_EXACT;
        }
        if (it->verdict == CMP_REGRESSION) r->n_regressions++;
        if (it->verdict == CMP_IMPROVEMENT) r->n_improvements++;
        if (it->verdict == CMP_REGRESSION && it->gate) r->n_gate_regressions++;
    }
    return XF_OK;
}

static xf_status test_samples(builder *b, compare_item *it, const double *xs, int nx, const double *ys, int ny) {
    stats_u_result u;
    xf_status s = stats_mann_whitney(xs, (size_t)nx, ys, (size_t)ny, &u);
    if (s) return s;
    it->tested = 1;
    it->p = u.p;
    it->n_base = nx;
    it->n_new = ny;
    it->base = stats_median(xs, (size_t)nx);
    it->new_ = stats_median(ys, (size_t)ny);
    it->few_samples = nx < b->o->min_samples || ny < b->o->min_samples;
    if (isnan(it->base) || isnan(it->new_)) return xf_errorf(XF_ENOMEM, "out of memory comparing samples");
    it->method = CMP_METHOD_U;
    /* The CI of the median ratio over repetitions (a base median of 0 has no ratio: no interval,
     * so never a verdict). The seed moves with the item, the same records give the same CIs. */
    uint64_t seed = b->o->seed ^ ((uint64_t)b->r->n_items * 0x9E3779B97F4A7C15ULL);
    int positive = 1;
    for (int i = 0; i < nx; i++) positive &= xs[i] > 0;
    if (positive) {
        s = stats_bootstrap_median_ratio(xs, (size_t)nx, ys, (size_t)ny, 1 - b->o->alpha, b->o->n_boot, seed, &it->ci_lo, &it->ci_hi);
        if (s) return s;
    }
    return XF_OK;
}

/* The op's counter `name` when it was counted (supported), else NULL. */
static const record_counter *find_counter(const record_op *op, const char *name) {
    for (int i = 0; i < op->n_counters && i < RECORD_MAX_COUNTERS; i++)
        if (op->counters[i].supported && strcmp(op->counters[i].name, name) == 0) return &op->counters[i];
    return NULL;
}

static xf_status compare_op(builder *b, int bi, int ni, const record_op *x, const record_op *y, int measured) {
    for (int m = 0; m < CMP_METRIC_COUNT; m++) {
        if (!(b->o->metrics & (1u << m)) || m == CMP_TTFT || m == CMP_TPOT || m == CMP_TOKENS_PER_S || m == CMP_CPU_TTFT ||
            m == CMP_CPU_TPOT)
            continue;
        const record_counter *cx = NULL, *cy = NULL;
        if (m == CMP_INSTRUCTIONS) {
            cx = find_counter(x, "instructions");
            cy = find_counter(y, "instructions");
            if (!cx || !cy) { /* not counted on a side: no item, one note per point */
                b->instr_missing++;
                continue;
            }
        }
        compare_item *it = push(b);
        if (!it) return xf_errorf(XF_ENOMEM, "out of memory comparing records");
        it->base_point = bi;
        it->new_point = ni;
        it->is_op = 1;
        it->phase = x->cost.phase;
        it->layer = x->cost.layer;
        it->kind = x->cost.kind;
        it->metric = (compare_metric)m;
        int deterministic = 1;
        if (m == CMP_TIME) {
            if (measured && x->measured && y->measured) {
                xf_status s = test_samples(b, it, x->samples_s, x->n_samples, y->samples_s, y->n_samples);
                if (s) return s;
                deterministic = 0;
            } else {
                it->base = x->time_s;
                it->new_ = y->time_s;
                deterministic = !x->measured && !y->measured;
            }
        } else if (m == CMP_BYTES) {
            it->base = x->bytes_from_counters ? x->measured_bytes : x->cost.bytes;
            it->new_ = y->bytes_from_counters ? y->measured_bytes : y->cost.bytes;
            deterministic = !x->bytes_from_counters && !y->bytes_from_counters;
        } else if (m == CMP_INSTRUCTIONS) {
            it->base = cx->value;
            it->new_ = cy->value;
        } else {
            it->base = x->cost.flops;
            it->new_ = y->cost.flops;
        }
        decide(b, it, 0, deterministic);
    }
    return XF_OK;
}

/* Per-repetition step times of one phase: sample i of the step is the sum of sample i of its ops
 * (the runner records repetition i of every op as its i-th sample). 0 when the phase has no ops
 * or its ops' sample counts differ. *out (n) freed by the caller. */
static int step_samples(const record_point *p, xf_phase ph, double **out) {
    *out = NULL;
    int n = -1;
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        if (op->cost.phase != ph) continue;
        if (!op->measured || !op->samples_s) return 0;
        if (n < 0) n = op->n_samples;
        else if (n != op->n_samples) return 0;
    }
    if (n <= 0) return 0;
    double *s = calloc((size_t)n, sizeof *s);
    if (!s) return -1;
    for (int64_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].cost.phase == ph)
            for (int k = 0; k < n; k++) s[k] += p->ops[i].samples_s[k];
    *out = s;
    return n;
}

static double tps_of(const record_point *p, double ttft, double tpot) {
    double gen = (double)p->wl.gen, den = ttft + (double)workload_decode_steps(&p->wl) * tpot;
    return den > 0 ? (double)p->wl.batch * gen / den : 0;
}

/* Samples of a point metric for a measured point: n, or 0 when not derivable; -1 on OOM. */
static int point_samples(const record_point *p, compare_metric m, double **out) {
    *out = NULL;
    if (m == CMP_CPU_TTFT || m == CMP_CPU_TPOT) { /* the runner's CPU step times, one per repetition */
        if (p->n_cpu <= 0) return 0;
        double *s = malloc((size_t)p->n_cpu * sizeof *s);
        if (!s) return -1;
        memcpy(s, m == CMP_CPU_TTFT ? p->cpu_prefill_s : p->cpu_decode_s, (size_t)p->n_cpu * sizeof *s);
        *out = s;
        return p->n_cpu;
    }
    if (m == CMP_TTFT) return step_samples(p, XF_PREFILL, out);
    if (m == CMP_TPOT) return step_samples(p, XF_DECODE, out);
    double *pre, *dec;
    int np = step_samples(p, XF_PREFILL, &pre);
    if (np <= 0) return np;
    int nd = p->wl.gen > 0 ? step_samples(p, XF_DECODE, &dec) : 0;
    if (p->wl.gen > 0 && nd != np) {
        free(pre);
        if (nd > 0) free(dec);
        return nd < 0 ? -1 : 0;
    }
    for (int k = 0; k < np; k++) pre[k] = tps_of(p, pre[k], p->wl.gen > 0 ? dec[k] : 0);
    if (p->wl.gen > 0) free(dec);
    *out = pre;
    return np;
}

static double min_of(const double *x, int n) {
    double v = INFINITY;
    for (int i = 0; i < n; i++) v = fmin(v, x[i]);
    return v;
}

static double summary_value(const record_point *p, compare_metric m) {
    if (m == CMP_CPU_TTFT || m == CMP_CPU_TPOT)
        return p->n_cpu > 0 ? stats_median(m == CMP_CPU_TTFT ? p->cpu_prefill_s : p->cpu_decode_s, (size_t)p->n_cpu) : 0;
    return m == CMP_TTFT ? p->summary.ttft_s : m == CMP_TPOT ? p->summary.tpot_s : p->summary.tokens_per_s;
}

static xf_status compare_point_metrics(builder *b, int bi, int ni, const record_point *x, const record_point *y, int measured) {
    static const compare_metric pm[] = {CMP_TTFT, CMP_TPOT, CMP_TOKENS_PER_S, CMP_CPU_TTFT, CMP_CPU_TPOT};
    for (size_t k = 0; k < sizeof pm / sizeof pm[0]; k++) {
        compare_metric m = pm[k];
        if (!(b->o->metrics & (1u << m))) continue;
        if (m == CMP_TPOT && (x->wl.gen == 0 || y->wl.gen == 0)) continue; /* no decode step */
        if (m == CMP_CPU_TPOT && (workload_decode_steps(&x->wl) == 0 || workload_decode_steps(&y->wl) == 0)) continue;
        if ((m == CMP_CPU_TTFT || m == CMP_CPU_TPOT) && (!measured || x->n_cpu <= 0 || y->n_cpu <= 0)) {
            if (m == CMP_CPU_TTFT) { /* one note for both */
                char pl[160];
                note(b->r, "point %d (%s): no CPU step times on a side (old record, or reps > %d): cpu_ttft, cpu_tpot "
                           "not compared", bi + 1, compare_point_label(x, pl, sizeof pl), RECORD_MAX_CPU_REPS);
            }
            continue;
        }
        compare_item *it = push(b);
        if (!it) return xf_errorf(XF_ENOMEM, "out of memory comparing records");
        it->base_point = bi;
        it->new_point = ni;
        it->metric = m;
        it->layer = -1;
        int deterministic = !measured;
        if (measured) {
            double *xs, *ys;
            int nx = point_samples(x, m, &xs);
            int ny = nx > 0 ? point_samples(y, m, &ys) : 0;
            if (nx < 0 || ny < 0) {
                free(xs);
                return xf_errorf(XF_ENOMEM, "out of memory comparing records");
            }
            if (nx > 0 && ny > 0) {
                xf_status s = test_samples(b, it, xs, nx, ys, ny);
                if (s == XF_OK && b->rounds && (m == CMP_CPU_TTFT || m == CMP_CPU_TPOT)) {
                    /* a round's CPU figure: the least over its repetitions (other jobs only add to it:
                     * memory and cache contention); measured, it halves the per-round spread */
                    it->base = min_of(xs, nx);
                    it->new_ = min_of(ys, ny);
                }
                free(xs);
                free(ys);
                if (s) return s;
            } else {
                if (nx > 0) free(xs);
                it->base = summary_value(x, m);
                it->new_ = summary_value(y, m);
                char pl[160];
                note(b->r, "point %d (%s): %s has no per-repetition samples (op sample counts differ); medians shown, not tested",
                     bi + 1, compare_point_label(x, pl, sizeof pl), compare_metric_name(m));
            }
        } else {
            it->base = summary_value(x, m);
            it->new_ = summary_value(y, m);
        }
        decide(b, it, m == CMP_TOKENS_PER_S, deterministic);
    }
    return XF_OK;
}

static xf_status compare_pair(builder *b, int bi, int ni, const record_point *x, const record_point *y) {
    int mx = point_measured(x), my = point_measured(y);
    char pl[160];
    compare_point_label(x, pl, sizeof pl);
    if (mx != my) {
        if (!b->o->force)
            return xf_errorf(XF_EINVAL,
                             "point %d (%s) is %s in BASE but %s in NEW: a measurement and a prediction are not comparable "
                             "(--force compares them anyway, without a test)",
                             bi + 1, pl, mx ? "measured" : "predicted", my ? "measured" : "predicted");
        note(b->r, "point %d (%s): measured on one side only, times compared without a test", bi + 1, pl);
    }
    int measured = mx && my;
    unsigned char *used = calloc((size_t)(y->n_ops > 0 ? y->n_ops : 1), 1);
    if (!used) return xf_errorf(XF_ENOMEM, "out of memory comparing records");
    int min_x = 1 << 30, min_y = 1 << 30;
    xf_status s = XF_OK;
    int64_t unmatched = 0;
    for (int64_t k = 0; k < x->n_ops && s == XF_OK; k++) {
        const record_op *xo = &x->ops[k];
        int64_t j = find_op(y, xo, k, used);
        if (j < 0) {
            char ol[64];
            if (!b->o->force) {
                s = xf_errorf(XF_EINVAL, "point %d (%s): op '%s' is in BASE but not in NEW (--force compares the rest)", bi + 1,
                              pl, op_label(xo, ol, sizeof ol));
                break;
            }
            unmatched++;
            continue;
        }
        used[j] = 1;
        if (measured) {
            if (xo->n_samples < min_x) min_x = xo->n_samples;
            if (y->ops[j].n_samples < min_y) min_y = y->ops[j].n_samples;
        }
        s = compare_op(b, bi, ni, xo, &y->ops[j], measured);
    }
    for (int64_t j = 0; s == XF_OK && j < y->n_ops; j++) {
        if (used[j]) continue;
        char ol[64];
        if (!b->o->force) {
            s = xf_errorf(XF_EINVAL, "point %d (%s): op '%s' is in NEW but not in BASE (--force compares the rest)", bi + 1, pl,
                          op_label(&y->ops[j], ol, sizeof ol));
            break;
        }
        unmatched++;
    }
    free(used);
    if (s) return s;
    if (unmatched) note(b->r, "point %d (%s): %lld ops are on one side only and were not compared", bi + 1, pl, (long long)unmatched);
    if (b->instr_missing)
        note(b->r, "point %d (%s): %lld ops have no instruction count on a side (the perf_event probe could not count them "
                   "there): not compared", bi + 1, pl, (long long)b->instr_missing);
    b->instr_missing = 0;
    const unsigned timed = (1u << CMP_TIME) | (1u << CMP_TTFT) | (1u << CMP_TPOT) | (1u << CMP_TOKENS_PER_S) |
                           (1u << CMP_CPU_TTFT) | (1u << CMP_CPU_TPOT);
    if (measured && !b->rounds && (b->o->metrics & timed) && (min_x < b->o->min_samples || min_y < b->o->min_samples))
        note(b->r,
             "point %d (%s): fewer than %d samples per op (BASE %d, NEW %d): the U test has little power; "
             "run more repetitions (-r)",
             bi + 1, pl, b->o->min_samples, min_x, min_y);
    return compare_point_metrics(b, bi, ni, x, y, measured);
}

/* Where a record's instruction counts come from: "callgrind" (xfprof run --callgrind, env
 * instructions_source) or "perf_event" (the hardware counter). */
static const char *instruction_source(const record *r) {
    for (int i = 0; i < r->n_env && i < RECORD_MAX_ENV; i++)
        if (!strcmp(r->env[i].key, "instructions_source")) return strncmp(r->env[i].value, "callgrind", 9) ? r->env[i].value : "callgrind";
    return "perf_event";
}

/* Counts of two kinds do not compare: callgrind counts the program on valgrind's simulated CPU,
 * perf_event the hardware's retired instructions (and the OpenMP runtime's spinning). */
static xf_status check_instruction_source(const record *base, const record *new_, const compare_options *opt, compare_result *out) {
    const char *sb = instruction_source(base), *sn = instruction_source(new_);
    if (strcmp(sb, sn) != 0) {
        if (!opt->force)
            return xf_errorf(XF_EINVAL, "instructions counted by %s in BASE and by %s in NEW: counts of two kinds do not compare "
                                        "(make both records the same way; --force compares them anyway)", sb, sn);
        note(out, "instructions counted by %s in BASE and by %s in NEW, compared because of --force", sb, sn);
    } else if (!strcmp(sb, "callgrind"))
        note(out, "instructions: callgrind's counts per op range (deterministic: identical builds give identical counts; "
                  "memory stalls and waiting are not instructions)");
    return XF_OK;
}

static xf_status compare_impl(const record *base, const record *new_, const compare_options *opt, compare_result *out,
                              int finalize_now) {
    memset(out, 0, sizeof *out);
    compare_options def;
    if (!opt) {
        compare_options_default(&def);
        opt = &def;
    }
    builder b = {out, opt, 0, !finalize_now, 0};
    if (!same_model(&base->model, &new_->model)) {
        if (!opt->force)
            return xf_errorf(XF_EINVAL, "the records are of different models (BASE %s, NEW %s): --force compares them anyway",
                             base->model.name, new_->model.name);
        note(out, "different models (BASE %s, NEW %s), compared because of --force", base->model.name, new_->model.name);
    }
    if (strcmp(base->device.name, new_->device.name) != 0) {
        if (!opt->force)
            return xf_errorf(XF_EINVAL, "the records are of different devices (BASE %s, NEW %s): --force compares them anyway",
                             base->device.name, new_->device.name);
        note(out, "different devices (BASE %s, NEW %s), compared because of --force", base->device.name, new_->device.name);
    }
    if (opt->metrics & (1u << CMP_INSTRUCTIONS)) {
        xf_status s = check_instruction_source(base, new_, opt, out);
        if (s) return s;
    }
    for (int i = 0; i < base->n_points; i++) {
        xf_status s;
        if (point_measured(&base->points[i]) && (s = check_samples(&base->points[i], i, "BASE"))) return s;
    }
    for (int i = 0; i < new_->n_points; i++) {
        xf_status s;
        if (point_measured(&new_->points[i]) && (s = check_samples(&new_->points[i], i, "NEW"))) return s;
    }
    unsigned char *used = calloc((size_t)(new_->n_points > 0 ? new_->n_points : 1), 1);
    if (!used) return xf_errorf(XF_ENOMEM, "out of memory comparing records");
    xf_status s = XF_OK;
    char pl[160];
    for (int i = 0; i < base->n_points && s == XF_OK; i++) {
        const record_point *x = &base->points[i];
        int j = (i < new_->n_points && !used[i] && same_point(x, &new_->points[i])) ? i : -1;
        for (int k = 0; j < 0 && k < new_->n_points; k++)
            if (!used[k] && same_point(x, &new_->points[k])) j = k;
        if (j < 0) {
            if (!opt->force) {
                s = xf_errorf(XF_EINVAL, "BASE point %d (%s) has no match in NEW: the records are of different workloads "
                              "(--force compares the points that match)", i + 1, compare_point_label(x, pl, sizeof pl));
                break;
            }
            note(out, "BASE point %d (%s) has no match in NEW", i + 1, compare_point_label(x, pl, sizeof pl));
            continue;
        }
        used[j] = 1;
        out->n_points_matched++;
        s = compare_pair(&b, i, j, x, &new_->points[j]);
    }
    for (int j = 0; s == XF_OK && j < new_->n_points; j++) {
        if (used[j]) continue;
        if (!opt->force) {
            s = xf_errorf(XF_EINVAL, "NEW point %d (%s) has no match in BASE: the records are of different workloads "
                          "(--force compares the points that match)", j + 1, compare_point_label(&new_->points[j], pl, sizeof pl));
            break;
        }
        note(out, "NEW point %d (%s) has no match in BASE", j + 1, compare_point_label(&new_->points[j], pl, sizeof pl));
    }
    free(used);
    if (s == XF_OK && out->n_points_matched == 0) s = xf_errorf(XF_EINVAL, "no point of BASE matches a point of NEW: nothing to compare");
    if (s == XF_OK && finalize_now) s = finalize(out, opt);
    if (s) compare_result_free(out);
    return s;
}

xf_status compare_records(const record *base, const record *new_, const compare_options *opt, compare_result *out) {
    return compare_impl(base, new_, opt, out, 1);
}

/* ---------- interleaved A/B rounds ---------- */

static int same_item(const compare_item *a, const compare_item *b) {
    return a->base_point == b->base_point && a->new_point == b->new_point && a->is_op == b->is_op && a->metric == b->metric &&
           (!a->is_op || (a->phase == b->phase && a->layer == b->layer && a->kind == b->kind)) && a->method == b->method;
}

xf_status compare_rounds(const record *base, const record *new_, int n_rounds, const compare_options *opt,
                         compare_result *out) {
    memset(out, 0, sizeof *out);
    compare_options def;
    if (!opt) {
        compare_options_default(&def);
        opt = &def;
    }
    if (n_rounds < COMPARE_MIN_ROUNDS)
        return xf_errorf(XF_EINVAL,
                         "a paired comparison needs at least %d rounds (got %d): over fewer, an interval is no wider than the "
                         "rounds' own spread and noise passes for a change",
                         COMPARE_MIN_ROUNDS, n_rounds);
    xf_status s = compare_impl(&base[0], &new_[0], opt, out, 0);
    if (s) return xf_error_prefix(s, "round 1: ");
    out->n_rounds = n_rounds;
    if (n_rounds < 10)
        note(out, "only %d rounds: the interval is wide and the signed-rank test cannot name an op among many (its smallest p "
                  "is 2/2^rounds); use 10 or more (--rounds)", n_rounds);
    int64_t n = out->n_items;
    size_t cells = (size_t)(n > 0 ? n : 1) * (size_t)n_rounds;
    double *bv = malloc(2 * cells * sizeof *bv); /* (n_items, n_rounds) BASE medians, then NEW */
    double *lr = malloc((size_t)n_rounds * sizeof *lr);
    if (!bv || !lr) {
        free(bv);
        free(lr);
        compare_result_free(out);
        return xf_errorf(XF_ENOMEM, "out of memory comparing rounds");
    }
    double *nv = bv + cells;
    for (int64_t i = 0; i < n; i++) {
        bv[(size_t)i * (size_t)n_rounds] = out->items[i].base;
        nv[(size_t)i * (size_t)n_rounds] = out->items[i].new_;
    }
    for (int k = 1; k < n_rounds && s == XF_OK; k++) {
        compare_result rk;
        s = compare_impl(&base[k], &new_[k], opt, &rk, 0);
        if (s) {
            s = xf_error_prefix(s, "round %d: ", k + 1);
            break;
        }
        if (rk.n_items != n) {
            s = xf_errorf(XF_EINVAL, "round %d compares %lld items but round 1 compares %lld: the rounds are of different runs",
                          k + 1, (long long)rk.n_items, (long long)n);
        }
        for (int64_t i = 0; s == XF_OK && i < n; i++) {
            if (!same_item(&rk.items[i], &out->items[i])) {
                s = xf_errorf(XF_EINVAL, "round %d: item %lld (%s) differs from round 1's: the rounds are of different runs", k + 1,
                              (long long)i + 1, compare_metric_name(rk.items[i].metric));
                break;
            }
            bv[(size_t)i * (size_t)n_rounds + (size_t)k] = rk.items[i].base;
            nv[(size_t)i * (size_t)n_rounds + (size_t)k] = rk.items[i].new_;
        }
        compare_result_free(&rk);
    }
    builder b = {out, opt, n, 1, 0};
    for (int64_t i = 0; s == XF_OK && i < n; i++) {
        compare_item *it = &out->items[i];
        if (it->method != CMP_METHOD_U) continue; /* exact (round 1's figures) or untested */
        const double *xb = bv + (size_t)i * (size_t)n_rounds, *xn = nv + (size_t)i * (size_t)n_rounds;
        int ok = 1;
        for (int k = 0; k < n_rounds; k++) {
            ok &= xb[k] > 0 && xn[k] > 0 && isfinite(xb[k]) && isfinite(xn[k]);
            lr[k] = ok ? log(xn[k] / xb[k]) : 0;
        }
        if (!ok) {
            it->method = CMP_METHOD_UNTESTED;
            it->tested = 0;
            it->p = NAN;
            note(out, "point %d: %s has a zero or non-finite median in some round: shown, not tested", it->base_point + 1,
                 compare_metric_name(it->metric));
            continue;
        }
        stats_paired_result pr;
        s = stats_paired(lr, (size_t)n_rounds, 1 - opt->alpha, opt->n_boot, opt->seed ^ ((uint64_t)i * 0x9E3779B97F4A7C15ULL), &pr);
        if (s) break;
        /* medians over the rounds of each round's median, for display */
        it->base = stats_median(xb, (size_t)n_rounds);
        it->new_ = stats_median(xn, (size_t)n_rounds);
        if (isnan(it->base) || isnan(it->new_)) {
            s = xf_errorf(XF_ENOMEM, "out of memory comparing rounds");
            break;
        }
        it->method = CMP_METHOD_PAIRED;
        it->p = pr.p;
        it->n_rounds = n_rounds;
        it->sd_log = pr.sd;
        it->ci_lo = exp(pr.ci_lo); /* the ratio's CI; decide() orients it */
        it->ci_hi = exp(pr.ci_hi);
        int hib = it->metric == CMP_TOKENS_PER_S;
        decide(&b, it, hib, 0);
        /* ratio and change from the Hodges-Lehmann estimate of the per-round log ratios (robust to
         * a round that a burst of load hit on one side), not from the two medians */
        double est = exp(pr.hl);
        it->ratio = est;
        it->change = hib ? 1 - est : est - 1;
        if (!it->is_op) {
            /* what the CI's width lets the gate see: its half-width as t sd / sqrt n */
            double t = stats_t_quantile(1 - opt->alpha / 2, (double)(n_rounds - 1));
            double sd_eff = (pr.ci_hi - pr.ci_lo) / (2 * t) * sqrt((double)n_rounds);
            it->detectable = stats_detectable_slowdown(sd_eff, (size_t)n_rounds, opt->threshold, opt->alpha, 0.8);
        }
    }
    free(bv);
    free(lr);
    if (s == XF_OK) s = finalize(out, opt);
    if (s) compare_result_free(out);
    return s;
}
