#include "predict_calibrated.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu_dispatch.h"
#include "roofline.h"

int predcal_family_of(const cost_op *op) {
    switch (op->kind) {
    case OP_QKV:
    case OP_O_PROJ:
    case OP_GATE_UP:
    case OP_DOWN: return op->phase == XF_PREFILL ? CALIB_GEMM : CALIB_GEMV;
    case OP_LM_HEAD: return CALIB_GEMV; /* prefill: the last token of each sequence only */
    case OP_ATTENTION: return op->phase == XF_PREFILL ? CALIB_ATTN_PREFILL : CALIB_ATTN_DECODE;
    case OP_ATTN_NORM:
    case OP_FFN_NORM:
    case OP_FINAL_NORM: return CALIB_NORM;
    case OP_ROPE: return CALIB_ROPE;
    case OP_SWIGLU: return CALIB_SWIGLU;
    case OP_ATTN_RESIDUAL:
    case OP_FFN_RESIDUAL: return CALIB_RESIDUAL;
    case OP_KV_APPEND: return CALIB_KV_APPEND;
    case OP_EMBEDDING: return CALIB_EMBEDDING;
    case OP_SAMPLING: return CALIB_SAMPLING;
    default: return -1;
    }
}

/* 2^(round(4 log2 v) / 4): a quarter octave, so that keys that differ by a scale factor's bytes
 * land in the same row. */
static double quarter_octave(double v) { return v > 0 ? exp2(round(4.0 * log2(v)) / 4.0) : 1.0; }

static double nominal_bytes(xf_dtype d) { return d == XF_INT8 ? 1.0 : d == XF_BF16 || d == XF_FP16 ? 2.0 : 4.0; }

void predcal_keys(const cost_op *op, calib_family f, xf_dtype wdtype, double working_set, int threads, double *x, double *y, double *z) {
    *y = 1.0;
    *z = 1.0;
    switch (f) {
    case CALIB_GEMV:
        *x = op->weight_bytes;
        if (op->weight_bytes > 0) *y = quarter_octave(op->flops / (2.0 * op->weight_bytes / nominal_bytes(wdtype)));
        if (working_set > 0) *z = working_set; /* a decode step streams every layer's weights: cached or not is the step's */
        break;
    case CALIB_GEMM: {
        /* N x K from the weights (a quantized dtype's scales at the default group size), K / N from
         * the activations read over written (one dtype) */
        const double per = dtype_bits(wdtype) / 8.0 + (dtype_is_quantized(wdtype) ? XF_QUANT_SCALE_BYTES / (double)XF_DEFAULT_QUANT_GROUP : 0);
        const double nk = op->weight_bytes / per;
        *x = op->weight_bytes; /* without activations (never for a real op): the bytes, N = 1 */
        if (op->weight_bytes > 0) *y = quarter_octave(op->flops / (2.0 * nk));
        if (nk > 0 && op->act_in_bytes > 0 && op->act_out_bytes > 0) {
            const double r = op->act_in_bytes / op->act_out_bytes;
            *x = sqrt(nk * r);
            *z = sqrt(nk / r);
        }
        break;
    }
    case CALIB_ATTN_DECODE:
        *x = op->kv_read_bytes;
        if (op->kv_read_bytes > 0) *y = quarter_octave(op->flops / op->kv_read_bytes);
        break;
    case CALIB_ATTN_PREFILL: *x = op->flops; break;
    default: /* element-wise: the bytes, and the threads it runs on (one below CPU_PAR_MIN's split, else all) */
        *x = op->bytes;
        if (threads > 1) *y = threads;
        break;
    }
}

double predcal_working_set(const calib_table *t, double weights_bytes) {
    return t->cache_bytes > 0 && weights_bytes > 0 ? weights_bytes / t->cache_bytes : 1.0;
}

calib_tier predcal_tier(const calib_table *t, calib_family f, double weights_bytes) {
    if (!(t->cache_Bps > 0) || f == CALIB_GEMV) return CALIB_TIER_DRAM; /* gemv: the working set is its z key */
    if (f != CALIB_GEMM) return CALIB_TIER_CACHE;
    return t->cache_bytes > 0 && weights_bytes > 0 && weights_bytes <= t->cache_bytes ? CALIB_TIER_CACHE : CALIB_TIER_DRAM;
}

double predcal_reference_time(const calib_table *t, const cost_op *op, calib_tier tier) {
    device_spec d;
    memset(&d, 0, sizeof d);
    d.bandwidth_Bps = tier == CALIB_TIER_CACHE && t->cache_Bps > 0 ? t->cache_Bps : t->dram_Bps;
    for (int c = 0; c < XF_COMPUTE_COUNT; c++) d.peak_flops[c] = t->peak_flops[c];
    return roofline_predict_time(op, &d);
}

static int near(double a, double b) { return fabs(a - b) <= 1e-6 * fmax(fabs(a), fabs(b)); }

/* Efficiencies are ratios (t_ref / t): they are interpolated geometrically (linearly in log
 * efficiency), which gives the same answer whether efficiency or its inverse, the time over the
 * reference, is interpolated, and is exact where the efficiency is a power of the key (a fixed cost:
 * efficiency proportional to the bytes; a bandwidth-bound op: constant). Linear in efficiency leant
 * to the faster neighbour (since run 10; docs/verdicts.md). */
static double lerp_log(double e0, double e1, double w) { return exp(log(e0) + w * (log(e1) - log(e0))); }

/* Geometrically in log x over the entries of one row (sorted by x). */
static double row_at(const calib_entry *const *row, int n, double x, int *clamped) {
    if (x <= row[0]->x) {
        if (!near(x, row[0]->x)) *clamped = 1;
        return row[0]->efficiency;
    }
    if (x >= row[n - 1]->x) {
        if (!near(x, row[n - 1]->x)) *clamped = 1;
        return row[n - 1]->efficiency;
    }
    int i = 1;
    while (i < n - 1 && row[i]->x < x) i++;
    double w = (log(x) - log(row[i - 1]->x)) / (log(row[i]->x) - log(row[i - 1]->x));
    return lerp_log(row[i - 1]->efficiency, row[i]->efficiency, w);
}

/* A row of entries of several z (gemm: (K, N) pairs): inverse-distance weighting, power 2, in
 * (log x, log z), of the entries' log efficiency (a weighted geometric mean); exact on an entry; x or z outside the row's range is clamped to it first (and
 * said), so beyond the table the nearest edge's entries decide: weighted from outside, every
 * entry's weight tends to the same and the answer drifted to the row's mean (a 6x-LLC decode was
 * predicted 7% slower than the 1.6x entries it should follow; measured: flat from 1.1x to 5.9x). */
static double row_plane_at(const calib_entry *const *row, int n, double x, double z, int *clamped) {
    double x0 = row[0]->x, x1 = x0, z0 = row[0]->z, z1 = z0, sw = 0, swe = 0;
    for (int i = 1; i < n; i++)
        x0 = fmin(x0, row[i]->x), x1 = fmax(x1, row[i]->x), z0 = fmin(z0, row[i]->z), z1 = fmax(z1, row[i]->z);
    if ((x < x0 && !near(x, x0)) || (x > x1 && !near(x, x1)) || (z < z0 && !near(z, z0)) || (z > z1 && !near(z, z1))) *clamped = 1;
    x = fmin(fmax(x, x0), x1);
    z = fmin(fmax(z, z0), z1);
    for (int i = 0; i < n; i++) {
        double dx = log(x) - log(row[i]->x), dz = log(z) - log(row[i]->z), d2 = dx * dx + dz * dz;
        if (d2 < 1e-18) return row[i]->efficiency; /* on an entry */
        sw += 1.0 / d2;
        swe += log(row[i]->efficiency) / d2;
    }
    return exp(swe / sw);
}

/* One row: in log x when its entries share one z (z outside it is clamped), else in the plane. */
static double row_eval(const calib_entry *const *row, int n, double x, double z, int *clamped) {
    int one_z = 1;
    for (int i = 1; i < n && one_z; i++) one_z = near(row[i]->z, row[0]->z);
    if (!one_z) return row_plane_at(row, n, x, z, clamped);
    if (!near(z, row[0]->z)) *clamped = 1;
    return row_at(row, n, x, clamped);
}

static int cmp_yx(const void *pa, const void *pb) {
    const calib_entry *a = *(const calib_entry *const *)pa, *b = *(const calib_entry *const *)pb;
    if (!near(a->y, b->y)) return a->y < b->y ? -1 : 1;
    if (!near(a->z, b->z)) return a->z < b->z ? -1 : 1;
    return a->x < b->x ? -1 : a->x > b->x;
}

static int gather(const calib_table *t, calib_family f, xf_dtype wd, calib_tier tier, const calib_entry **sel) {
    int n = 0;
    for (int i = 0; i < t->n; i++) {
        const calib_entry *e = &t->entries[i];
        if (e->family == f && e->wdtype == wd && e->tier == tier) sel[n++] = e;
    }
    qsort(sel, (size_t)n, sizeof *sel, cmp_yx);
    return n;
}

/* The y above which a family's kernels take another path, whose rows an op on the other side never
 * takes (0: none): a GEMM's tokens above CPU_AMX_PATH_TOKENS (the AMX tiles' panels, run 14); an
 * element-wise op's threads above 1 (under CPU_PAR_MIN elements it runs on the calling thread, above
 * it pays a fork and, when the other threads went to sleep, their wake-up: docs/verdicts.md, run 16). */
static double path_split(calib_family f) {
    switch (f) {
    case CALIB_GEMM: return CPU_AMX_PATH_TOKENS * (1 + 1e-6);
    case CALIB_GEMV:
    case CALIB_ATTN_DECODE:
    case CALIB_ATTN_PREFILL: return 0;
    default: return 1 + 1e-6; /* the element-wise families */
    }
}

xf_status predcal_efficiency(const calib_table *t, calib_family f, xf_dtype wdtype, calib_tier tier, double x, double y,
                             double z, double *eff, int *clamped, int *other_tier) {
    *clamped = 0;
    *other_tier = 0;
    if (!t || t->n <= 0 || !(x > 0) || !(y > 0) || !(z > 0)) return XF_EUNSUPPORTED;
    const calib_entry **sel = malloc((size_t)t->n * sizeof *sel);
    if (!sel) return xf_errorf(XF_ENOMEM, "calibration: out of memory");
    int n = gather(t, f, wdtype, tier, sel);
    if (n == 0) {
        n = gather(t, f, wdtype, tier == CALIB_TIER_CACHE ? CALIB_TIER_DRAM : CALIB_TIER_CACHE, sel);
        *other_tier = n > 0;
    }
    if (n == 0) {
        free(sel);
        return XF_EUNSUPPORTED;
    }
    const double split = path_split(f);
    if (split > 0) { /* only rows of the op's side of its family's path split, where it has any */
        const int side = y > split;
        int m = 0;
        for (int i = 0; i < n; i++) m += (sel[i]->y > split) == side;
        if (m > 0 && m < n) {
            int k = 0;
            for (int i = 0; i < n; i++)
                if ((sel[i]->y > split) == side) sel[k++] = sel[i];
            n = k;
        }
    }
    /* rows: runs of the same y */
    int lo = 0, lo_n = 0, hi = -1, hi_n = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && near(sel[j]->y, sel[i]->y)) j++;
        if (sel[i]->y <= y || near(sel[i]->y, y)) {
            lo = i;
            lo_n = j - i;
        } else if (hi < 0) {
            hi = i;
            hi_n = j - i;
        }
        i = j;
    }
    double e;
    if (lo_n == 0) { /* y below every row */
        *clamped = 1;
        e = row_eval(sel + hi, hi_n, x, z, clamped);
    } else if (hi < 0 || near(sel[lo]->y, y)) {
        if (hi < 0 && !near(sel[lo]->y, y)) *clamped = 1; /* y above every row */
        e = row_eval(sel + lo, lo_n, x, z, clamped);
    } else {
        double e0 = row_eval(sel + lo, lo_n, x, z, clamped), e1 = row_eval(sel + hi, hi_n, x, z, clamped);
        double w = (log(y) - log(sel[lo]->y)) / (log(sel[hi]->y) - log(sel[lo]->y));
        e = lerp_log(e0, e1, w);
    }
    free(sel);
    if (!(e > 0) || !isfinite(e)) return XF_EUNSUPPORTED;
    *eff = e;
    return XF_OK;
}

/* cpu_backend.c's thresholds (core/cpu_dispatch.h): element-wise ops on fewer than CPU_PAR_MIN
 * elements run on one thread, projections of CPU_GEMM_MIN_TOKENS tokens or more go to the GEMM
 * (bf16: after a pass that splits or rounds the input) */

int predcal_regions(const cost_op *op, const model_config *cfg, int64_t tokens, xf_dtype wdtype, int threads) {
    if (threads <= 1 || !cfg || tokens < 1) return 0;
    const double n = (double)tokens, d = (double)cfg->d_model, hd = (double)cfg->head_dim;
    const double kv = (double)cfg->n_kv_heads * hd, qkv = (double)cfg->n_heads * hd + 2 * kv;
    switch (op->kind) {
    case OP_QKV:
    case OP_O_PROJ:
    case OP_GATE_UP:
    case OP_DOWN:
    case OP_LM_HEAD: return 1 + (wdtype == XF_BF16 && n >= CPU_GEMM_MIN_TOKENS); /* int8 quantizes inside its region */
    case OP_ATTENTION: return 1;
    case OP_EMBEDDING:
    case OP_ATTN_NORM:
    case OP_FFN_NORM:
    case OP_ATTN_RESIDUAL:
    case OP_FFN_RESIDUAL: return n * d >= CPU_PAR_MIN;
    case OP_ROPE: return n * qkv >= CPU_PAR_MIN;
    case OP_KV_APPEND: return n * kv >= CPU_PAR_MIN;
    case OP_SWIGLU: return n > 1 && n * (double)cfg->d_ff >= CPU_PAR_MIN / 8;
    default: return 0; /* final_norm, sampling: the calling thread */
    }
}

/* The rows an op of p works on: prefill batch x prompt, decode batch; lm_head the last token of each sequence. */
static int64_t step_tokens(const record_point *p, const cost_op *op) {
    return op->phase == XF_PREFILL && op->kind != OP_LM_HEAD ? p->wl.batch * p->wl.prompt : p->wl.batch;
}

/* The threads p ran with (the table's when the point does not say). */
static int point_threads(const calib_table *t, const record_point *p) { return p->run.threads > 0 ? p->run.threads : t->threads; }

/* What the op pays for its parallel regions' forks: the table's short-gap fork per region. */
static double fork_time(const calib_table *t, const record_point *p, const model_config *cfg, const cost_op *op) {
    if (!t->fork_term || !(t->fork_short_s > 0)) return 0;
    return t->fork_short_s * predcal_regions(op, cfg, step_tokens(p, op), p->wl.wdtype, point_threads(t, p));
}

/* The threads an op runs on, as the element-wise keys take it: all of the point's where it opens a
 * parallel region, else 1 (the calling thread). */
static int op_threads(const calib_table *t, const record_point *p, const model_config *cfg, const cost_op *op) {
    const int th = point_threads(t, p);
    return predcal_regions(op, cfg, step_tokens(p, op), p->wl.wdtype, th) > 0 ? th : 1;
}

xf_status predcal_add_point(calib_table *t, const record_point *p, const model_config *cfg, unsigned families) {
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        int f = predcal_family_of(&op->cost);
        if (f < 0 || !(families & (1u << f)) || !op->measured || !(op->time_s > 0)) continue;
        calib_tier tier = predcal_tier(t, (calib_family)f, p->memory.weights_bytes);
        double ref = predcal_reference_time(t, &op->cost, tier);
        if (!(ref > 0)) continue;
        calib_entry e;
        memset(&e, 0, sizeof e);
        e.family = (calib_family)f;
        e.wdtype = p->wl.wdtype;
        e.tier = tier;
        predcal_keys(&op->cost, e.family, e.wdtype, predcal_working_set(t, p->memory.weights_bytes), op_threads(t, p, cfg, &op->cost), &e.x,
                     &e.y, &e.z);
        /* the op's own work: its time less its forks (at least a fifth kept: a fork measured apart can exceed a tiny op's) */
        const double work = fmax(op->time_s - fork_time(t, p, cfg, &op->cost), 0.2 * op->time_s);
        e.efficiency = ref / work;
        e.n = 1;
        if (!(e.x > 0)) continue;
        xf_status s = calib_table_add(t, &e);
        if (s) return s;
    }
    return XF_OK;
}

void predcal_step_times(record_point *p) {
    double ttft = 0, tpot = 0;
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        double t = op->calibrated_time_s > 0 ? op->calibrated_time_s : op->predicted_time_s;
        if (!isfinite(t)) continue;
        if (op->cost.phase == XF_PREFILL) ttft += t;
        else tpot += t;
    }
    p->summary.predicted_ttft_s = ttft;
    p->summary.predicted_tpot_s = tpot;
}

void predcal_apply_point(const calib_table *t, record_point *p, const model_config *cfg, int prediction, predcal_stats *st) {
    predcal_stats z;
    memset(&z, 0, sizeof z);
    int defaults = !strcmp(t->grid, "default");
    for (int64_t i = 0; i < p->n_ops; i++) {
        record_op *op = &p->ops[i];
        op->calibrated_time_s = 0;
        op->calib_clamped = 0;
        int f = predcal_family_of(&op->cost);
        if (f < 0) continue;
        z.ops++;
        double x, y, zk, eff;
        int clamped, other;
        calib_tier tier = predcal_tier(t, (calib_family)f, p->memory.weights_bytes);
        predcal_keys(&op->cost, (calib_family)f, p->wl.wdtype, predcal_working_set(t, p->memory.weights_bytes), op_threads(t, p, cfg, &op->cost),
                     &x, &y, &zk);
        if (predcal_efficiency(t, (calib_family)f, p->wl.wdtype, tier, x, y, zk, &eff, &clamped, &other) != XF_OK) continue;
        if (other) tier = tier == CALIB_TIER_CACHE ? CALIB_TIER_DRAM : CALIB_TIER_CACHE; /* the entries' reference */
        double ref = predcal_reference_time(t, &op->cost, tier);
        if (!(ref > 0)) continue;
        op->calibrated_time_s = ref / eff + fork_time(t, p, cfg, &op->cost);
        op->calib_clamped = clamped && !defaults;
        z.calibrated++;
        z.clamped += op->calib_clamped;
        z.other_tier += other;
        if (prediction) op->time_s = op->calibrated_time_s;
    }
    if (prediction) {
        int64_t ctx = p->summary.decode_context, mb = p->summary.max_batch;
        roofline_summarize_point(p);
        p->summary.decode_context = ctx;
        p->summary.max_batch = mb;
    }
    predcal_step_times(p);
    if (st) *st = z;
}

xf_status predcal_gpu_defaults(const device_spec *d, calib_table *out) {
    calib_table_init(out);
    snprintf(out->grid, sizeof out->grid, "default");
    snprintf(out->source, sizeof out->source,
             "default efficiencies for a spec-sheet GPU (not measured): memory-bound ops %.0f%% of the HBM bandwidth, GEMMs %.0f%% of "
             "the tensor peak (docs/verdicts.md names the sources)",
             100 * PREDCAL_GPU_MEMORY_EFF, 100 * PREDCAL_GPU_GEMM_EFF);
    out->threads = 1;
    out->dram_Bps = d->bandwidth_Bps;
    for (int c = 0; c < XF_COMPUTE_COUNT; c++) out->peak_flops[c] = d->peak_flops[c];
    if (!(out->dram_Bps > 0)) return xf_errorf(XF_EINVAL, "device %s has no bandwidth", d->name);
    const xf_dtype dts[] = {XF_FP32, XF_BF16, XF_FP16, XF_INT8, XF_FP8, XF_INT4};
    for (int f = 0; f < CALIB_FAMILY_COUNT; f++)
        for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
            calib_entry e = {(calib_family)f, dts[k], CALIB_TIER_DRAM, 1.0, 1.0, 1.0,
                             f == CALIB_GEMM || f == CALIB_ATTN_PREFILL ? PREDCAL_GPU_GEMM_EFF : PREDCAL_GPU_MEMORY_EFF, 1};
            xf_status s = calib_table_add(out, &e);
            if (s) {
                calib_table_free(out);
                return s;
            }
        }
    return XF_OK;
}
