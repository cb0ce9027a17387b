/* See rollup.h. */
#include "analyzers/rollup.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/roofline.h"

static double safe_div(double a, double b) { return (b != 0 && isfinite(a) && isfinite(b)) ? a / b : 0.0; }
static double op_t(const record_op *op) { return (isfinite(op->time_s) && op->time_s > 0) ? op->time_s : 0.0; }

static void add_op(rollup_agg *a, const record_op *op) {
    if (a->n == 0) {
        a->phase = op->cost.phase;
        a->kind = op->cost.kind;
        a->first_layer = a->last_layer = op->cost.layer;
    }
    if (op->cost.layer < a->first_layer) a->first_layer = op->cost.layer;
    if (op->cost.layer > a->last_layer) a->last_layer = op->cost.layer;
    a->n++;
    a->measured |= op->measured;
    a->flops += op->cost.flops;
    a->bytes += (op->bytes_from_counters && op->measured_bytes > 0) ? op->measured_bytes : op->cost.bytes;
    double t = op_t(op);
    a->time_s += t;
    a->predicted_time_s += isfinite(op->predicted_time_s) ? op->predicted_time_s : 0;
    a->calibrated_time_s += op->calibrated_time_s > 0 ? op->calibrated_time_s : isfinite(op->predicted_time_s) ? op->predicted_time_s : 0;
    a->spread_s += isfinite(op->spread_s) ? op->spread_s : 0;
    a->share += isfinite(op->share) ? op->share : 0;
    if (op->bound >= 0 && op->bound < XF_BOUND_COUNT) a->class_time[op->bound] += t;
    a->util_compute += op->util_compute * t; /* divided by the time at the end */
    a->util_memory += op->util_memory * t;
}

static void finish(rollup_agg *a) {
    a->util_compute = safe_div(a->util_compute, a->time_s);
    a->util_memory = safe_div(a->util_memory, a->time_s);
}

void rollup_agg_merge(rollup_agg *into, const rollup_agg *x) {
    if (x->n == 0) return;
    if (into->n == 0) {
        into->phase = x->phase;
        into->kind = x->kind;
        into->first_layer = x->first_layer;
        into->last_layer = x->last_layer;
    }
    if (x->first_layer < into->first_layer) into->first_layer = x->first_layer;
    if (x->last_layer > into->last_layer) into->last_layer = x->last_layer;
    double t0 = into->time_s;
    into->n += x->n;
    into->measured |= x->measured;
    into->flops += x->flops;
    into->bytes += x->bytes;
    into->time_s += x->time_s;
    into->predicted_time_s += x->predicted_time_s;
    into->calibrated_time_s += x->calibrated_time_s;
    into->spread_s += x->spread_s;
    into->share += x->share;
    for (int b = 0; b < XF_BOUND_COUNT; b++) into->class_time[b] += x->class_time[b];
    into->util_compute = safe_div(into->util_compute * t0 + x->util_compute * x->time_s, into->time_s);
    into->util_memory = safe_div(into->util_memory * t0 + x->util_memory * x->time_s, into->time_s);
}

xf_bound rollup_class(const rollup_agg *a) {
    if (a->measured && a->time_s > 0) {
        roofline_thresholds th;
        roofline_thresholds_default(&th);
        return roofline_class_measured(a->util_compute, a->util_memory, &th);
    }
    int best = 0;
    for (int b = 1; b < XF_BOUND_COUNT; b++)
        if (a->class_time[b] > a->class_time[best]) best = b;
    return (xf_bound)best;
}

static int valid(const record_op *op) {
    return (int)op->cost.phase >= 0 && op->cost.phase < XF_PHASE_COUNT && (int)op->cost.kind >= 0 && op->cost.kind < OP_KIND_COUNT;
}

void rollup_by_kind(const record_point *p, rollup_agg out[XF_PHASE_COUNT][OP_KIND_COUNT]) {
    memset(out, 0, sizeof(rollup_agg) * XF_PHASE_COUNT * OP_KIND_COUNT);
    for (int64_t i = 0; i < p->n_ops; i++)
        if (valid(&p->ops[i])) add_op(&out[p->ops[i].cost.phase][p->ops[i].cost.kind], &p->ops[i]);
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int k = 0; k < OP_KIND_COUNT; k++) finish(&out[ph][k]);
}

xf_status rollup_point_ops(const record_point *p, rollup_agg **out, int64_t *n) {
    *out = NULL;
    *n = 0;
    rollup_agg *rows = calloc((size_t)(p->n_ops > 0 ? p->n_ops : 1), sizeof *rows);
    if (!rows) return xf_errorf(XF_ENOMEM, "out of memory rolling up the op table");
    int64_t m = 0;
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        int64_t j = 0;
        while (j < m && !(rows[j].phase == op->cost.phase && rows[j].kind == op->cost.kind)) j++;
        if (j == m) m++;
        add_op(&rows[j], op);
    }
    for (int64_t j = 0; j < m; j++) finish(&rows[j]);
    *out = rows;
    *n = m;
    return XF_OK;
}

double rollup_phase_weight(const record_point *p, xf_phase ph) {
    return ph == XF_PREFILL ? 1.0 : (double)workload_decode_steps(&p->wl);
}

void rollup_verdict_of(const record_point *p, rollup_verdict *v) {
    memset(v, 0, sizeof *v);
    const record_summary *s = &p->summary;
    double pre = s->ttft_s, dec = (double)workload_decode_steps(&p->wl) * s->tpot_s;
    v->request_s = pre + dec;
    int top = 0;
    for (int b = 1; b < XF_BOUND_COUNT; b++)
        if (s->share_bound[b] > s->share_bound[top]) top = b;
    v->top_class = (xf_bound)top;
    v->top_class_share = s->share_bound[top];
    v->top_phase = dec >= pre ? XF_DECODE : XF_PREFILL;
    v->top_phase_share = safe_div(dec >= pre ? dec : pre, v->request_s);
    rollup_agg a[XF_PHASE_COUNT][OP_KIND_COUNT];
    rollup_by_kind(p, a);
    double best = -1, total = 0;
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int k = 0; k < OP_KIND_COUNT; k++) {
            double t = a[ph][k].time_s * rollup_phase_weight(p, (xf_phase)ph);
            total += t;
            if (t > best) {
                best = t;
                v->dom_phase = (xf_phase)ph;
                v->dom_kind = (op_kind)k;
            }
        }
    v->dom_class = rollup_class(&a[v->dom_phase][v->dom_kind]);
    v->dom_share = safe_div(best, total);
}
