/* Class confidence by bootstrap over the repetitions (confidence.h). */
#include "analyzers/confidence.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/rollup.h"
#include "analyzers/stats.h"

/* Median of x[0..n), sorting x in place (n is the repetitions: small). */
static double median_small(double *x, int n) {
    for (int i = 1; i < n; i++) {
        double v = x[i];
        int j = i - 1;
        while (j >= 0 && x[j] > v) {
            x[j + 1] = x[j];
            j--;
        }
        x[j + 1] = v;
    }
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static double safe_div(double a, double b) { return b > 0.0 ? a / b : 0.0; }

static int usable(const record_op *op) {
    return op->measured && op->n_samples >= 1 && op->samples_s && op->bound != XF_BOUND_UNKNOWN &&
           (int)op->cost.phase >= 0 && op->cost.phase < XF_PHASE_COUNT && (int)op->cost.kind >= 0 && op->cost.kind < OP_KIND_COUNT;
}

/* One op under one resample idx[0..n): its median time and utilizations, as the runner computes
 * them (concurrent: median of the repetitions' utilizations; else from the median time). */
static void op_resampled(const record_op *op, const device_spec *d, const record_concurrent *cc, const size_t *idx, int n,
                         double *work, double *t_med, double *uc, double *um) {
    double bw, fp;
    int conc = roofline_rep_ceiling(cc, 0, &bw, &fp) && cc->machine_fp32_flops > 0;
    for (int k = 0; k < n; k++) work[k] = op->samples_s[idx[k]];
    *t_med = median_small(work, n);
    if (conc) {
        double *wc = work, *wm = work + n;
        for (int k = 0; k < n; k++) roofline_rep_utils(op, d, cc, (int)idx[k], &wc[k], &wm[k]);
        *uc = median_small(wc, n);
        *um = median_small(wm, n);
        return;
    }
    double bytes = (op->bytes_from_counters && op->measured_bytes > 0.0) ? op->measured_bytes : op->cost.bytes;
    *uc = *t_med > 0 ? safe_div(op->cost.flops / *t_med, device_peak(d, op->cost.compute)) : 0.0;
    *um = *t_med > 0 ? safe_div(bytes / *t_med, d->bandwidth_Bps) : 0.0;
}

typedef struct boot_out {
    int64_t *op_hits;  /* (n_ops) or NULL */
    int64_t verdict_hits;
    xf_bound verdict_ref;
    int64_t (*kind_hits)[OP_KIND_COUNT]; /* [XF_PHASE_COUNT][OP_KIND_COUNT] or NULL */
    xf_bound kind_ref[XF_PHASE_COUNT][OP_KIND_COUNT];
    int kind_measured[XF_PHASE_COUNT][OP_KIND_COUNT];
} boot_out;

static xf_status boot_run(const record_point *p, const device_spec *d, const roofline_thresholds *t, int n_boot, uint64_t seed,
                          boot_out *o) {
    if (n_boot < 1 || n_boot > 100000) return xf_errorf(XF_EINVAL, "confidence: %d resamples out of range (1 to 100000)", n_boot);
    int n_ref = p->run.reps, n_max = 0;
    for (int64_t i = 0; i < p->n_ops; i++)
        if (usable(&p->ops[i]) && p->ops[i].n_samples > n_max) n_max = p->ops[i].n_samples;
    if (n_max == 0) return XF_OK;
    if (n_ref < 1) n_ref = n_max;
    if (n_ref > n_max) n_max = n_ref;
    size_t *idx = malloc(2 * (size_t)n_max * sizeof *idx);
    double *work = malloc(2 * (size_t)n_max * sizeof *work);
    if (!idx || !work) {
        free(idx);
        free(work);
        return xf_errorf(XF_ENOMEM, "out of memory for the class confidence");
    }
    size_t *own = idx + n_max;
    const double steps = (double)workload_decode_steps(&p->wl);
    uint64_t st = seed;
    for (int b = 0; b < n_boot; b++) {
        stats_boot_indexes(&st, (size_t)n_ref, idx);
        double class_time[XF_BOUND_COUNT] = {0};
        double kt[XF_PHASE_COUNT][OP_KIND_COUNT], kc[XF_PHASE_COUNT][OP_KIND_COUNT], km[XF_PHASE_COUNT][OP_KIND_COUNT];
        if (o->kind_hits) {
            memset(kt, 0, sizeof kt);
            memset(kc, 0, sizeof kc);
            memset(km, 0, sizeof km);
        }
        for (int64_t i = 0; i < p->n_ops; i++) {
            const record_op *op = &p->ops[i];
            double w = op->cost.phase == XF_DECODE ? steps : 1.0;
            if (!usable(op)) {
                if ((int)op->bound >= 0 && op->bound < XF_BOUND_COUNT) class_time[op->bound] += w * op->time_s;
                continue;
            }
            const size_t *use = idx;
            if (op->n_samples != n_ref) {
                stats_boot_indexes(&st, (size_t)op->n_samples, own);
                use = own;
            }
            double tm, uc, um;
            op_resampled(op, d, &p->concurrent, use, op->n_samples, work, &tm, &uc, &um);
            xf_bound cls = roofline_class_measured(uc, um, t);
            if (o->op_hits && cls == op->bound) o->op_hits[i]++;
            class_time[cls] += w * tm;
            if (o->kind_hits) {
                kt[op->cost.phase][op->cost.kind] += tm;
                kc[op->cost.phase][op->cost.kind] += uc * tm;
                km[op->cost.phase][op->cost.kind] += um * tm;
            }
        }
        int top = 0;
        for (int c = 1; c < XF_BOUND_COUNT; c++)
            if (class_time[c] > class_time[top]) top = c;
        if ((xf_bound)top == o->verdict_ref) o->verdict_hits++;
        for (int ph = 0; o->kind_hits && ph < XF_PHASE_COUNT; ph++)
            for (int k = 0; k < OP_KIND_COUNT; k++) {
                if (!o->kind_measured[ph][k] || !(kt[ph][k] > 0)) continue;
                xf_bound c = roofline_class_measured(kc[ph][k] / kt[ph][k], km[ph][k] / kt[ph][k], t);
                if (c == o->kind_ref[ph][k]) o->kind_hits[ph][k]++;
            }
    }
    free(idx);
    free(work);
    return XF_OK;
}

static xf_bound top_class(const record_point *p) {
    rollup_verdict v;
    rollup_verdict_of(p, &v);
    return v.top_class;
}

xf_status confidence_point(record_point *p, const device_spec *d, const roofline_thresholds *t, int n_boot, uint64_t seed) {
    if (!p || !d) return xf_errorf(XF_EINVAL, "confidence: no point or device");
    boot_out o;
    memset(&o, 0, sizeof o);
    o.op_hits = calloc((size_t)(p->n_ops > 0 ? p->n_ops : 1), sizeof *o.op_hits);
    if (!o.op_hits) return xf_errorf(XF_ENOMEM, "out of memory for the class confidence");
    o.verdict_ref = top_class(p);
    int any = 0;
    for (int64_t i = 0; i < p->n_ops; i++) any |= usable(&p->ops[i]);
    xf_status s = any ? boot_run(p, d, t, n_boot, seed, &o) : XF_OK;
    if (s == XF_OK && any) {
        for (int64_t i = 0; i < p->n_ops; i++) {
            record_op *op = &p->ops[i];
            if (!usable(op)) continue;
            op->confidence_boot = n_boot;
            op->confidence = (double)o.op_hits[i] / n_boot;
        }
        p->summary.verdict_boot = n_boot;
        p->summary.verdict_confidence = (double)o.verdict_hits / n_boot;
    }
    free(o.op_hits);
    return s;
}

xf_status confidence_kinds(const record_point *p, const device_spec *d, const roofline_thresholds *t, int n_boot, uint64_t seed,
                           double conf[XF_PHASE_COUNT][OP_KIND_COUNT]) {
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int k = 0; k < OP_KIND_COUNT; k++) conf[ph][k] = -1.0;
    if (!p || !d) return xf_errorf(XF_EINVAL, "confidence: no point or device");
    boot_out *o = calloc(1, sizeof *o);
    int64_t(*hits)[OP_KIND_COUNT] = calloc(XF_PHASE_COUNT, sizeof *hits);
    if (!o || !hits) {
        free(o);
        free(hits);
        return xf_errorf(XF_ENOMEM, "out of memory for the class confidence");
    }
    o->kind_hits = hits;
    o->verdict_ref = top_class(p);
    rollup_agg a[XF_PHASE_COUNT][OP_KIND_COUNT];
    rollup_by_kind(p, a);
    int any = 0;
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        if (!usable(op)) continue;
        o->kind_measured[op->cost.phase][op->cost.kind] = 1;
        any = 1;
    }
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int k = 0; k < OP_KIND_COUNT; k++)
            if (o->kind_measured[ph][k]) o->kind_ref[ph][k] = rollup_class(&a[ph][k]);
    xf_status s = any ? boot_run(p, d, t, n_boot, seed, o) : XF_OK;
    for (int ph = 0; s == XF_OK && ph < XF_PHASE_COUNT; ph++)
        for (int k = 0; k < OP_KIND_COUNT; k++)
            if (o->kind_measured[ph][k]) conf[ph][k] = (double)hits[ph][k] / n_boot;
    free(hits);
    free(o);
    return s;
}
