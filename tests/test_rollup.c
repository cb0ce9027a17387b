/* Roll-ups (analyzers/rollup.c): sums per (phase, kind), the one class rule the table and the HTML
 * report share, phase weights, the dominant op and the verdict. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/rollup.h"
#include "reports/render_text.h"

static void op(record_op *o, xf_phase ph, int layer, op_kind k, xf_bound b, double t) {
    memset(o, 0, sizeof *o);
    o->cost.phase = ph;
    o->cost.layer = layer;
    o->cost.kind = k;
    o->cost.flops = 100;
    o->cost.bytes = 10;
    o->bound = b;
    o->time_s = t;
    o->predicted_time_s = t;
}

/* Predicted: the longest instance is memory-bound, but compute-bound instances hold more of the
 * time: the summed op is compute-bound, in the roll-up and in the table (which once took the class
 * of the longest instance while the HTML took the class holding most time). */
Test(rollup, predicted_class_is_the_class_holding_most_time) {
    record_op ops[4];
    op(&ops[0], XF_PREFILL, 0, OP_QKV, XF_BOUND_MEMORY, 0.5);
    op(&ops[1], XF_PREFILL, 1, OP_QKV, XF_BOUND_COMPUTE, 0.3);
    op(&ops[2], XF_PREFILL, 2, OP_QKV, XF_BOUND_COMPUTE, 0.3);
    op(&ops[3], XF_PREFILL, -1, OP_LM_HEAD, XF_BOUND_MEMORY, 0.1);
    record_point p;
    memset(&p, 0, sizeof p);
    p.ops = ops;
    p.n_ops = 4;
    rollup_agg a[XF_PHASE_COUNT][OP_KIND_COUNT];
    rollup_by_kind(&p, a);
    cr_assert_eq(a[XF_PREFILL][OP_QKV].n, 3);
    cr_assert_float_eq(a[XF_PREFILL][OP_QKV].time_s, 1.1, 1e-12);
    cr_assert_eq(a[XF_PREFILL][OP_QKV].first_layer, 0);
    cr_assert_eq(a[XF_PREFILL][OP_QKV].last_layer, 2);
    cr_assert_eq(rollup_class(&a[XF_PREFILL][OP_QKV]), XF_BOUND_COMPUTE);
    cr_assert_eq(a[XF_DECODE][OP_QKV].n, 0);
    render_rollup *rows;
    int64_t n;
    cr_assert_eq(render_rollup_point(&p, &rows, &n), XF_OK);
    cr_assert_eq(n, 2);
    cr_assert_eq(rows[0].kind, OP_QKV);
    cr_assert_eq(rows[0].bound, XF_BOUND_COMPUTE, "table class %s", bound_name(rows[0].bound));
    cr_assert_eq(rows[0].count, 3);
    free(rows);
}

/* Measured: the class of the combined utilizations (time-weighted), not of any one instance. */
Test(rollup, measured_class_from_combined_utilizations) {
    record_op ops[2];
    op(&ops[0], XF_DECODE, 0, OP_DOWN, XF_BOUND_LATENCY, 1.0);
    op(&ops[1], XF_DECODE, 1, OP_DOWN, XF_BOUND_MEMORY, 3.0);
    ops[0].measured = ops[1].measured = 1;
    ops[0].util_memory = 0.40; /* alone: latency (both < 60%) */
    ops[1].util_memory = 0.95;
    ops[0].util_compute = ops[1].util_compute = 0.05;
    record_point p;
    memset(&p, 0, sizeof p);
    p.ops = ops;
    p.n_ops = 2;
    rollup_agg *rows;
    int64_t n;
    cr_assert_eq(rollup_point_ops(&p, &rows, &n), XF_OK);
    cr_assert_eq(n, 1);
    cr_assert_float_eq(rows[0].util_memory, (0.40 * 1 + 0.95 * 3) / 4, 1e-12);
    cr_assert_eq(rollup_class(&rows[0]), XF_BOUND_MEMORY);
    free(rows);
}

/* Phase weights: one prefill, gen - 1 decode steps; the dominant op weighs its phase; the verdict's
 * request time is TTFT + (gen - 1) TPOT. */
Test(rollup, verdict_weighs_decode_by_gen_minus_one) {
    record_op ops[2];
    op(&ops[0], XF_PREFILL, 0, OP_ATTENTION, XF_BOUND_COMPUTE, 0.5);
    op(&ops[1], XF_DECODE, 0, OP_GATE_UP, XF_BOUND_MEMORY, 0.1);
    record_point p;
    memset(&p, 0, sizeof p);
    p.ops = ops;
    p.n_ops = 2;
    p.wl.batch = 1;
    p.wl.prompt = 16;
    p.wl.gen = 5; /* 4 decode steps: 0.4 s of decode vs 0.5 s of prefill */
    p.summary.ttft_s = 0.5;
    p.summary.tpot_s = 0.1;
    p.summary.share_bound[XF_BOUND_COMPUTE] = 0.5 / 0.9;
    p.summary.share_bound[XF_BOUND_MEMORY] = 0.4 / 0.9;
    cr_assert_eq(rollup_phase_weight(&p, XF_PREFILL), 1.0);
    cr_assert_eq(rollup_phase_weight(&p, XF_DECODE), 4.0);
    rollup_verdict v;
    rollup_verdict_of(&p, &v);
    cr_assert_float_eq(v.request_s, 0.9, 1e-12);
    cr_assert_eq(v.top_class, XF_BOUND_COMPUTE);
    cr_assert_eq(v.top_phase, XF_PREFILL);
    cr_assert_float_eq(v.top_phase_share, 0.5 / 0.9, 1e-12);
    cr_assert_eq(v.dom_kind, OP_ATTENTION);
    cr_assert_eq(v.dom_class, XF_BOUND_COMPUTE);
    cr_assert_float_eq(v.dom_share, 0.5 / 0.9, 1e-12);
    p.wl.gen = 7; /* 6 decode steps: decode's 0.6 s now dominates */
    rollup_verdict_of(&p, &v);
    cr_assert_eq(v.top_phase, XF_DECODE);
    cr_assert_eq(v.dom_kind, OP_GATE_UP);
    cr_assert_eq(v.dom_phase, XF_DECODE);
}
