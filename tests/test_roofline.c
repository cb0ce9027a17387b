/* The roofline analyzer: the measured rule on synthetic utilizations, predicted times, and the
 * roll-ups of a hand-made point (arithmetic in the comments). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/roofline.h"

#define NEAR(actual, expected)                                                                              \
    cr_assert(fabs((double)(actual) - (double)(expected)) <= 1e-12 * fmax(1.0, fabs((double)(expected))), \
              "%s = %.17g, expected %.17g", #actual, (double)(actual), (double)(expected))

/* A synthetic device with round figures: 1 TB/s, FP32 10 TFLOP/s, tensor16 100 TFLOP/s,
 * no FP8 (falls back to tensor16), INT8 200 TOP/s. */
static device_spec dev(void) {
    device_spec d;
    memset(&d, 0, sizeof d);
    strcpy(d.name, "synthetic");
    strcpy(d.kind, "gpu");
    d.memory_bytes = 80e9;
    d.bandwidth_Bps = 1e12;
    d.peak_flops[XF_COMPUTE_FP32] = 10e12;
    d.peak_flops[XF_COMPUTE_TENSOR16] = 100e12;
    d.peak_flops[XF_COMPUTE_FP8] = 0;
    d.peak_flops[XF_COMPUTE_INT8] = 200e12;
    return d;
}

static cost_op op(xf_phase ph, int layer, op_kind k, xf_compute c, double flops, double bytes) {
    cost_op o;
    memset(&o, 0, sizeof o);
    o.phase = ph;
    o.layer = layer;
    o.kind = k;
    o.compute = c;
    o.flops = flops;
    o.weight_bytes = bytes;
    o.bytes = bytes;
    return o;
}

Test(roofline, thresholds_default) {
    roofline_thresholds t;
    roofline_thresholds_default(&t);
    NEAR(t.saturated, 0.80);
    NEAR(t.latency, 0.60);
    NEAR(t.gap, 0.10);
}

Test(roofline, measured_rule_branches_and_boundaries) {
    roofline_thresholds t;
    roofline_thresholds_default(&t);
    struct {
        double uc, um;
        xf_bound want;
        const char *why;
    } cases[] = {
        {0.80, 0.80, XF_BOUND_BALANCED, "both exactly saturated and equal"},
        {0.85, 0.50, XF_BOUND_COMPUTE, "compute saturated"},
        {0.50, 0.85, XF_BOUND_MEMORY, "memory saturated"},
        {0.80, 0.79, XF_BOUND_COMPUTE, "0.80 is saturated (>=)"},
        {0.79, 0.80, XF_BOUND_MEMORY, "0.80 is saturated (>=)"},
        {0.95, 0.85, XF_BOUND_COMPUTE, "both saturated: the higher"},
        {0.85, 0.95, XF_BOUND_MEMORY, "both saturated: the higher"},
        {0.59, 0.59, XF_BOUND_LATENCY, "both below 0.60"},
        {0.00, 0.00, XF_BOUND_LATENCY, "nothing used"},
        {0.10, 0.59, XF_BOUND_LATENCY, "both below 0.60 despite a large gap"},
        {0.70, 0.65, XF_BOUND_BALANCED, "gap 0.05 < 0.10"},
        {0.75, 0.60, XF_BOUND_COMPUTE, "0.60 is not below 0.60; gap 0.15"},
        {0.60, 0.70, XF_BOUND_MEMORY, "gap exactly 0.10 names the higher"},
        {0.70, 0.60, XF_BOUND_COMPUTE, "gap exactly 0.10 (0.7 - 0.6 = 0.0999.. in binary)"},
        {0.65, 0.60, XF_BOUND_BALANCED, "gap 0.05"},
        {0.79, 0.10, XF_BOUND_COMPUTE, "one at 0.79, the other low: gap 0.69"},
        {0.61, 0.55, XF_BOUND_BALANCED, "gap 0.06, not both below 0.60"},
        {1.30, 0.20, XF_BOUND_COMPUTE, "above 100% (cache hits) still saturated"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        xf_bound got = roofline_class_measured(cases[i].uc, cases[i].um, &t);
        cr_assert_eq(got, cases[i].want, "u_c %.2f u_m %.2f (%s): got %s, want %s", cases[i].uc, cases[i].um,
                     cases[i].why, bound_name(got), bound_name(cases[i].want));
    }
    /* NULL thresholds mean the defaults; NaN counts as 0. */
    cr_assert_eq(roofline_class_measured(0.85, 0.5, NULL), XF_BOUND_COMPUTE);
    cr_assert_eq(roofline_class_measured(NAN, 0.9, NULL), XF_BOUND_MEMORY);
    cr_assert_eq(roofline_class_measured(NAN, NAN, NULL), XF_BOUND_LATENCY);
    /* Thresholds are parameters: saturated 0.9, latency 0.3, gap 0.2. */
    roofline_thresholds s = {0.9, 0.3, 0.2};
    cr_assert_eq(roofline_class_measured(0.85, 0.5, &s), XF_BOUND_COMPUTE); /* gap 0.35 */
    cr_assert_eq(roofline_class_measured(0.85, 0.7, &s), XF_BOUND_BALANCED); /* gap 0.15 < 0.2 */
    cr_assert_eq(roofline_class_measured(0.29, 0.2, &s), XF_BOUND_LATENCY);
    cr_assert_eq(roofline_class_measured(0.5, 0.92, &s), XF_BOUND_MEMORY);
}

Test(roofline, predicted_class_and_attainable) {
    cr_assert_eq(roofline_class_predicted(99.9, 100.0), XF_BOUND_MEMORY);
    cr_assert_eq(roofline_class_predicted(100.0, 100.0), XF_BOUND_COMPUTE); /* at the ridge */
    cr_assert_eq(roofline_class_predicted(0.0, 100.0), XF_BOUND_MEMORY);
    /* min(P, I*B): I = 10 FLOP/B at 1 TB/s -> 10 TFLOP/s below a 100 TFLOP/s peak; I = 500 ->
     * capped at 100 TFLOP/s. */
    NEAR(roofline_attainable(10.0, 100e12, 1e12), 10e12);
    NEAR(roofline_attainable(500.0, 100e12, 1e12), 100e12);
}

Test(roofline, predict_time_uses_the_ops_compute_type) {
    device_spec d = dev();
    /* F = 1e12, Q = 1e9 on tensor16: F/P = 1e12/100e12 = 0.01 s, Q/B = 1e9/1e12 = 0.001 s. */
    cost_op g = op(XF_PREFILL, 0, OP_QKV, XF_COMPUTE_TENSOR16, 1e12, 1e9);
    NEAR(roofline_predict_time(&g, &d), 0.01);
    /* The same work on FP32 units: 1e12/10e12 = 0.1 s. */
    g.compute = XF_COMPUTE_FP32;
    NEAR(roofline_predict_time(&g, &d), 0.1);
    /* INT8: 1e12/200e12 = 0.005 s. FP8 absent: falls back to tensor16, 0.01 s. */
    g.compute = XF_COMPUTE_INT8;
    NEAR(roofline_predict_time(&g, &d), 0.005);
    g.compute = XF_COMPUTE_FP8;
    NEAR(roofline_predict_time(&g, &d), 0.01);
    /* Memory side: F = 1e9, Q = 1e10 -> max(1e-5, 0.01) = 0.01 s. */
    cost_op m = op(XF_DECODE, 3, OP_ATTENTION, XF_COMPUTE_TENSOR16, 1e9, 1e10);
    NEAR(roofline_predict_time(&m, &d), 0.01);

    /* roofline_predict_op: intensity 1e12/1e9 = 1000 >= ridge 100 -> compute, time 0.01. */
    record_op r;
    g.compute = XF_COMPUTE_TENSOR16;
    roofline_predict_op(&g, &d, &r);
    NEAR(r.intensity, 1000.0);
    cr_assert_eq(r.bound, XF_BOUND_COMPUTE);
    NEAR(r.predicted_time_s, 0.01);
    NEAR(r.time_s, 0.01);
    cr_assert_eq(r.measured, 0);
    cr_assert_eq(r.cost.kind, OP_QKV);
    NEAR(r.cost.flops, 1e12);
    /* Intensity 0.1 < 100 -> memory. */
    roofline_predict_op(&m, &d, &r);
    NEAR(r.intensity, 0.1);
    cr_assert_eq(r.bound, XF_BOUND_MEMORY);
    /* An FP32 op at intensity 50: tensor16 ridge would say memory (50 < 100), the FP32 ridge
     * 10e12/1e12 = 10 says compute. */
    cost_op n = op(XF_PREFILL, 0, OP_ATTN_NORM, XF_COMPUTE_FP32, 50e9, 1e9);
    roofline_predict_op(&n, &d, &r);
    cr_assert_eq(r.bound, XF_BOUND_COMPUTE);
    NEAR(r.time_s, 50e9 / 10e12);
    /* Zero bytes and zero FLOPs: intensity 0, no division by zero. */
    cost_op z = op(XF_PREFILL, -1, OP_EMBEDDING, XF_COMPUTE_FP32, 0, 0);
    roofline_predict_op(&z, &d, &r);
    NEAR(r.intensity, 0.0);
    NEAR(r.time_s, 0.0);
}

Test(roofline, measure_op) {
    device_spec d = dev();
    roofline_thresholds t;
    roofline_thresholds_default(&t);
    record_op r;
    memset(&r, 0, sizeof r);
    r.cost = op(XF_PREFILL, 0, OP_GATE_UP, XF_COMPUTE_TENSOR16, 1e12, 1e10);
    r.measured = 1;
    r.time_s = 0.02;
    /* u_c = (1e12 / 0.02) / 100e12 = 0.5; u_m = (1e10 / 0.02) / 1e12 = 0.5: latency. */
    roofline_measure_op(&r, &d, &t);
    NEAR(r.util_compute, 0.5);
    NEAR(r.util_memory, 0.5);
    NEAR(r.intensity, 100.0);
    NEAR(r.predicted_time_s, 0.01); /* max(0.01, 0.01) */
    cr_assert_eq(r.bound, XF_BOUND_LATENCY);
    /* Counters saw 1.8e10 bytes: u_m = 9e11 / 1e12 = 0.9, memory; I = 1e12 / 1.8e10. */
    r.bytes_from_counters = 1;
    r.measured_bytes = 1.8e10;
    roofline_measure_op(&r, &d, &t);
    NEAR(r.util_memory, 0.9);
    NEAR(r.intensity, 1e12 / 1.8e10);
    cr_assert_eq(r.bound, XF_BOUND_MEMORY);
    /* Faster run, 0.0118 s with the cost model's bytes: u_c = 0.847, u_m = 0.847: balanced. */
    r.bytes_from_counters = 0;
    r.time_s = 0.0118;
    roofline_measure_op(&r, &d, &t);
    cr_assert_eq(r.bound, XF_BOUND_BALANCED);
    /* No time: utilizations 0, latency. */
    r.time_s = 0.0;
    roofline_measure_op(&r, &d, &t);
    NEAR(r.util_compute, 0.0);
    cr_assert_eq(r.bound, XF_BOUND_LATENCY);
}

/* A point by hand: batch 2, prompt 10, gen 4. Prefill: A (layer -1, compute, 0.3 s),
 * B (layer 0, memory, 0.1 s). Decode: C (layer 0, memory, 0.02 s), D (layer 1, latency, 0.03 s). */
static record_point hand_point(record_op *ops) {
    record_point p;
    memset(&p, 0, sizeof p);
    workload w = {2, 10, 4, XF_BF16, XF_BF16, XF_BF16, 0};
    p.wl = w;
    memset(ops, 0, 4 * sizeof *ops);
    const struct {
        xf_phase ph;
        int layer;
        xf_bound b;
        double t;
    } spec[4] = {{XF_PREFILL, -1, XF_BOUND_COMPUTE, 0.3},
                 {XF_PREFILL, 0, XF_BOUND_MEMORY, 0.1},
                 {XF_DECODE, 0, XF_BOUND_MEMORY, 0.02},
                 {XF_DECODE, 1, XF_BOUND_LATENCY, 0.03}};
    for (int i = 0; i < 4; i++) {
        ops[i].cost.phase = spec[i].ph;
        ops[i].cost.layer = spec[i].layer;
        ops[i].bound = spec[i].b;
        ops[i].time_s = spec[i].t;
    }
    p.n_ops = 4;
    p.ops = ops;
    p.summary.max_batch = 77;
    p.summary.decode_context = 12;
    return p;
}

Test(roofline, summarize_point) {
    record_op ops[4];
    record_point p = hand_point(ops);
    roofline_summarize_point(&p);
    const record_summary *s = &p.summary;
    /* TTFT = 0.3 + 0.1 = 0.4; TPOT = 0.02 + 0.03 = 0.05; gen 4 = the prefill's token + 3 decode
     * steps: request = 0.4 + 3 * 0.05 = 0.55 s. */
    NEAR(s->prefill_time_s, 0.4);
    NEAR(s->decode_time_s, 0.05);
    NEAR(s->ttft_s, 0.4);
    NEAR(s->tpot_s, 0.05);
    /* tokens/s = 2 * 4 / 0.55 = 14.55; prefill 2 * 10 / 0.4 = 50; decode 2 / 0.05 = 40. */
    NEAR(s->tokens_per_s, 8.0 / 0.55);
    NEAR(s->prefill_tokens_per_s, 50.0);
    NEAR(s->decode_tokens_per_s, 40.0);
    /* Shares of their phase: 0.3/0.4, 0.1/0.4, 0.02/0.05, 0.03/0.05. */
    NEAR(ops[0].share, 0.75);
    NEAR(ops[1].share, 0.25);
    NEAR(ops[2].share, 0.4);
    NEAR(ops[3].share, 0.6);
    /* Request shares: compute 0.3/0.55; memory (0.1 + 3*0.02)/0.55; latency 3*0.03/0.55; balanced 0. */
    NEAR(s->share_bound[XF_BOUND_COMPUTE], 0.3 / 0.55);
    NEAR(s->share_bound[XF_BOUND_MEMORY], 0.16 / 0.55);
    NEAR(s->share_bound[XF_BOUND_LATENCY], 0.09 / 0.55);
    NEAR(s->share_bound[XF_BOUND_BALANCED], 0.0);
    /* Fields the caller owns are kept. */
    cr_assert_eq(s->max_batch, 77);
    cr_assert_eq(s->decode_context, 12);

    /* gen = 0: no decode, tokens/s 0, the request is the prefill alone. Only the prefill ops. */
    record_op ops0[4];
    record_point q = hand_point(ops0);
    q.wl.gen = 0;
    q.n_ops = 2;
    roofline_summarize_point(&q);
    NEAR(q.summary.tpot_s, 0.0);
    NEAR(q.summary.tokens_per_s, 0.0);
    NEAR(q.summary.decode_tokens_per_s, 0.0);
    NEAR(q.summary.share_bound[XF_BOUND_COMPUTE], 0.75);
    NEAR(q.summary.share_bound[XF_BOUND_MEMORY], 0.25);
}

Test(roofline, layer_times) {
    record_op ops[4];
    record_point p = hand_point(ops);
    double t[3];
    /* Prefill: outside the layers 0.3, layer 0 0.1, layer 1 nothing. */
    roofline_layer_times(&p, XF_PREFILL, 2, t);
    NEAR(t[0], 0.3);
    NEAR(t[1], 0.1);
    NEAR(t[2], 0.0);
    roofline_layer_times(&p, XF_DECODE, 2, t);
    NEAR(t[0], 0.0);
    NEAR(t[1], 0.02);
    NEAR(t[2], 0.03);
    /* A layer beyond n_layers is ignored rather than written out of bounds. */
    double one[2] = {-1, -1};
    roofline_layer_times(&p, XF_DECODE, 1, one);
    NEAR(one[0], 0.0);
    NEAR(one[1], 0.02);
}
