/* compare's verdicts on synthetic records built here, with the expected figures worked out. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/compare.h"

/* A record of one model/device with one point per batch in `batches`; each point has two ops:
 * decode layer 0 gate_up and decode layer 0 attention; predicted unless `samples` > 0. */
static void make_record(record *r, const char *model, const char *device, int batch, int samples) {
    record_init(r, samples ? "run" : "predict");
    snprintf(r->model.name, sizeof r->model.name, "%s", model);
    r->model.n_layers = 1;
    r->model.d_model = 64;
    r->model.n_heads = 4;
    r->model.n_kv_heads = 4;
    r->model.head_dim = 16;
    r->model.d_ff = 128;
    r->model.vocab = 100;
    snprintf(r->device.name, sizeof r->device.name, "%s", device);
    record_point *p = record_add_point(r);
    cr_assert_not_null(p);
    p->wl.batch = batch;
    p->wl.prompt = 16;
    p->wl.gen = 4;
    p->n_ops = 2;
    p->ops = calloc(2, sizeof *p->ops);
    op_kind kinds[2] = {OP_GATE_UP, OP_ATTENTION};
    for (int i = 0; i < 2; i++) {
        record_op *op = &p->ops[i];
        op->cost.phase = XF_DECODE;
        op->cost.layer = 0;
        op->cost.kind = kinds[i];
        op->cost.flops = 1000.0 * (i + 1);
        op->cost.bytes = 500.0 * (i + 1);
        op->time_s = 1e-3 * (i + 1);
        if (samples) {
            op->measured = 1;
            op->n_samples = samples;
            op->samples_s = calloc((size_t)samples, sizeof(double));
            /* samples 10, 11, 12, ... ms times (i + 1): median of 5 is 12 ms */
            for (int k = 0; k < samples; k++) op->samples_s[k] = 1e-3 * (10 + k) * (i + 1);
        }
    }
    p->summary.ttft_s = 0.010;
    p->summary.tpot_s = 0.003;
    p->summary.tokens_per_s = 100;
    if (samples) snprintf(p->run.backend, sizeof p->run.backend, "cpu");
}

/* Two identical records of model "m" on device "d", batch 1: BASE and NEW before a test changes one. */
static void make_pair(record *a, record *b, int samples) {
    make_record(a, "m", "d", 1, samples);
    make_record(b, "m", "d", 1, samples);
}

static const compare_item *find(const compare_result *c, op_kind k, compare_metric m) {
    for (int64_t i = 0; i < c->n_items; i++)
        if (c->items[i].is_op && c->items[i].kind == k && c->items[i].metric == m) return &c->items[i];
    return NULL;
}

static const compare_item *find_point(const compare_result *c, compare_metric m) {
    for (int64_t i = 0; i < c->n_items; i++)
        if (!c->items[i].is_op && c->items[i].metric == m) return &c->items[i];
    return NULL;
}

Test(compare, identical_predictions_unchanged) {
    record a, b;
    make_pair(&a, &b, 0);
    compare_options o;
    compare_options_default(&o);
    o.metrics = (1u << CMP_TIME) | (1u << CMP_BYTES) | (1u << CMP_FLOPS) | (1u << CMP_TTFT);
    compare_result c;
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(c.n_items, 2 * 3 + 1); /* 2 ops x (time, bytes, flops) + ttft */
    cr_assert_eq(c.n_regressions, 0);
    cr_assert_eq(c.n_improvements, 0);
    for (int64_t i = 0; i < c.n_items; i++) {
        cr_assert_eq(c.items[i].verdict, CMP_UNCHANGED);
        cr_assert_eq(c.items[i].tested, 0);
        cr_assert(isnan(c.items[i].p));
        cr_assert_float_eq(c.items[i].ratio, 1.0, 0);
    }
    compare_result_free(&c);
    record_free(&a);
    record_free(&b);
}

Test(compare, predicted_op_slowed_is_a_regression_naming_it) {
    record a, b;
    make_pair(&a, &b, 0);
    b.points[0].ops[0].time_s *= 1.3; /* gate_up: 1 ms -> 1.3 ms */
    compare_options o;
    compare_options_default(&o);
    compare_result c;
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK);
    cr_assert_eq(c.n_regressions, 1);
    const compare_item *g = find(&c, OP_GATE_UP, CMP_TIME);
    cr_assert_not_null(g);
    cr_assert_eq(g->verdict, CMP_REGRESSION);
    cr_assert_float_eq(g->ratio, 1.3, 1e-12);
    cr_assert_float_eq(g->change, 0.3, 1e-12); /* 1.3 / 1 - 1 */
    cr_assert_eq(find(&c, OP_ATTENTION, CMP_TIME)->verdict, CMP_UNCHANGED);
    compare_result_free(&c);
    record_free(&a);
    record_free(&b);
}

Test(compare, deterministic_figures_are_exact) {
    record a, b;
    make_pair(&a, &b, 0);
    b.points[0].ops[1].cost.bytes = 1010;  /* attention bytes 1000 -> 1010: +1% */
    b.points[0].ops[0].cost.flops = 900;   /* gate_up FLOPs 1000 -> 900: -10% */
    compare_options o;
    compare_options_default(&o);
    o.metrics = (1u << CMP_BYTES) | (1u << CMP_FLOPS);
    compare_result c;
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK);
    /* exact threshold 0: the 1% byte increase is a regression, the FLOP decrease an improvement */
    cr_assert_eq(find(&c, OP_ATTENTION, CMP_BYTES)->verdict, CMP_REGRESSION);
    cr_assert_float_eq(find(&c, OP_ATTENTION, CMP_BYTES)->change, 0.01, 1e-12);
    cr_assert_eq(find(&c, OP_GATE_UP, CMP_FLOPS)->verdict, CMP_IMPROVEMENT);
    cr_assert_eq(c.n_regressions, 1);
    cr_assert_eq(c.n_improvements, 1);
    compare_result_free(&c);
    o.exact_threshold = 0.05; /* 1% is below 5%: unchanged; -10% still an improvement */
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK);
    cr_assert_eq(find(&c, OP_ATTENTION, CMP_BYTES)->verdict, CMP_UNCHANGED);
    cr_assert_eq(find(&c, OP_GATE_UP, CMP_FLOPS)->verdict, CMP_IMPROVEMENT);
    compare_result_free(&c);
    record_free(&a);
    record_free(&b);
}

static void scale_samples(record *r, int op, double f, double add) {
    record_op *x = &r->points[0].ops[op];
    for (int k = 0; k < x->n_samples; k++) x->samples_s[k] = x->samples_s[k] * f + add;
}

Test(compare, measured_samples_use_the_u_test) {
    record a, b;
    compare_options o;
    compare_options_default(&o);
    compare_result c;
    make_pair(&a, &b, 5);
    /* gate_up: BASE 10..14 ms, NEW 15..21 ms (x1.5): all NEW above all BASE, U = 0,
     * exact p = 2 / C(10,5) = 2/252 = 0.0079 < 0.05; medians 12 -> 18 ms: +50% > 5% -> regression */
    scale_samples(&b, 0, 1.5, 0);
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK, "%s", xf_error_msg());
    const compare_item *g = find(&c, OP_GATE_UP, CMP_TIME);
    cr_assert_eq(g->tested, 1);
    cr_assert_float_eq(g->p, 2.0 / 252.0, 1e-12);
    cr_assert_float_eq(g->base, 0.012, 1e-15);
    cr_assert_float_eq(g->new_, 0.018, 1e-15);
    cr_assert_float_eq(g->change, 0.5, 1e-12);
    cr_assert_eq(g->verdict, CMP_REGRESSION);
    /* attention: the same samples on both sides: every value tied in pairs -> p = 1, unchanged */
    const compare_item *at = find(&c, OP_ATTENTION, CMP_TIME);
    cr_assert_float_eq(at->p, 1.0, 1e-12);
    cr_assert_eq(at->verdict, CMP_UNCHANGED);
    cr_assert_eq(c.n_regressions, 1); /* metric time only: gate_up */
    compare_result_free(&c);
    record_free(&b);
    /* x1.02: NEW 10.2, 11.22, 12.24, 13.26, 14.28 ms against 10..14 interleave:
     * BASE ranks 1,3,5,7,9: R1 = 25, U1 = 25 - 15 = 10; exact p = 2 P(U <= 10) for (5,5)
     * = 2 * 87/252 = 0.6905 (scipy 0.6904761904761905): not significant, unchanged */
    make_record(&b, "m", "d", 1, 5);
    scale_samples(&b, 0, 1.02, 0);
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK);
    g = find(&c, OP_GATE_UP, CMP_TIME);
    cr_assert_float_eq(g->p, 174.0 / 252.0, 1e-12);
    cr_assert_eq(g->verdict, CMP_UNCHANGED);
    compare_result_free(&c);
    record_free(&b);
    /* every sample shifted by +4.5 ms: 14.5..18.5 against 10..14, separated: p = 2/252 < 0.05;
     * medians 12 -> 16.5 ms: +37.5%, significant but below a 50% threshold -> unchanged */
    make_record(&b, "m", "d", 1, 5);
    scale_samples(&b, 0, 1.0, 4.5e-3);
    o.threshold = 0.5;
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK);
    g = find(&c, OP_GATE_UP, CMP_TIME);
    cr_assert(g->p < 0.05);
    cr_assert_float_eq(g->change, 0.375, 1e-9);
    cr_assert_eq(g->verdict, CMP_UNCHANGED);
    compare_result_free(&c);
    o.threshold = 0.05;
    record_free(&b);
    /* faster by 30%: an improvement, symmetric */
    make_record(&b, "m", "d", 1, 5);
    scale_samples(&b, 1, 0.7, 0);
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK);
    const compare_item *att = find(&c, OP_ATTENTION, CMP_TIME);
    cr_assert_eq(att->verdict, CMP_IMPROVEMENT);
    cr_assert_float_eq(att->change, -0.3, 1e-9);
    cr_assert_eq(c.n_improvements, 1);
    compare_result_free(&c);
    record_free(&a);
    record_free(&b);
}

Test(compare, few_samples_warn_and_cannot_be_significant) {
    record a, b;
    make_pair(&a, &b, 3);
    scale_samples(&b, 0, 2.0, 0); /* twice as slow, but 3 vs 3: min exact p = 2/20 = 0.1 > 0.05 */
    compare_options o;
    compare_options_default(&o);
    compare_result c;
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK);
    const compare_item *g = find(&c, OP_GATE_UP, CMP_TIME);
    cr_assert_float_eq(g->p, 0.1, 1e-12);
    cr_assert_eq(g->few_samples, 1);
    cr_assert_eq(g->verdict, CMP_UNCHANGED);
    int warned = 0;
    for (int i = 0; i < c.n_notes; i++) warned |= strstr(c.notes[i], "fewer than 5 samples") != NULL;
    cr_assert(warned);
    compare_result_free(&c);
    record_free(&a);
    record_free(&b);
}

Test(compare, point_metrics_from_repetitions) {
    record a, b;
    make_pair(&a, &b, 5);
    scale_samples(&b, 0, 1.5, 0);
    compare_options o;
    compare_options_default(&o);
    o.metrics = (1u << CMP_TPOT) | (1u << CMP_TOKENS_PER_S);
    compare_result c;
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK);
    /* decode step per repetition k: gate_up (10+k) ms + attention 2 (10+k) ms = 3 (10+k) ms:
     * BASE 30,33,36,39,42 ms (median 36); NEW (1.5 + 2)(10+k) = 35,38.5,42,45.5,49 (median 42).
     * sorted: 30a 33a 35b 36a 38.5b 39a 42a 42b 45.5b 49b: BASE ranks 1,2,4,6,7.5: R1 = 20.5,
     * U1 = 5.5; a tie -> normal: var = 25/12 (11 - 6/90) = 22.7778, z = (7 - 0.5)/4.77261 = 1.36194,
     * p = 0.17322 (scipy 0.1732171126447002): +16.7% but not significant -> unchanged */
    const compare_item *t = find_point(&c, CMP_TPOT);
    cr_assert_not_null(t);
    cr_assert_eq(t->tested, 1);
    cr_assert_float_eq(t->base, 0.036, 1e-12);
    cr_assert_float_eq(t->new_, 0.042, 1e-12);
    cr_assert_float_eq(t->p, 0.1732171126447002, 1e-9);
    cr_assert_eq(t->verdict, CMP_UNCHANGED);
    /* tokens/s has no prefill ops here: not derivable, medians of the summary and a note */
    const compare_item *tp = find_point(&c, CMP_TOKENS_PER_S);
    cr_assert_not_null(tp);
    cr_assert_eq(tp->tested, 0);
    cr_assert_eq(tp->verdict, CMP_UNCHANGED);
    compare_result_free(&c);
    record_free(&a);
    record_free(&b);
}

Test(compare, tokens_per_s_higher_is_better) {
    record a, b;
    make_pair(&a, &b, 0);
    b.points[0].summary.tokens_per_s = 80; /* 100 -> 80: 20% fewer tokens/s: worse */
    compare_options o;
    compare_options_default(&o);
    o.metrics = 1u << CMP_TOKENS_PER_S;
    compare_result c;
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK);
    cr_assert_eq(c.n_items, 1);
    cr_assert_float_eq(c.items[0].ratio, 0.8, 1e-12);
    cr_assert_float_eq(c.items[0].change, 0.2, 1e-12);
    cr_assert_eq(c.items[0].verdict, CMP_REGRESSION);
    compare_result_free(&c);
    record_free(&a);
    record_free(&b);
}

Test(compare, refuses_other_models_devices_workloads_unless_forced) {
    record a, b;
    compare_options o;
    compare_options_default(&o);
    compare_result c;
    make_record(&a, "m", "d", 1, 0);
    make_record(&b, "other", "d", 1, 0);
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "different models"), "%s", xf_error_msg());
    o.force = 1;
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK);
    cr_assert(c.n_notes >= 1);
    compare_result_free(&c);
    o.force = 0;
    record_free(&b);
    make_record(&b, "m", "d2", 1, 0);
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "different devices"), "%s", xf_error_msg());
    record_free(&b);
    make_record(&b, "m", "d", 8, 0); /* batch 8 vs batch 1 */
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "different workloads"), "%s", xf_error_msg());
    o.force = 1; /* nothing matches at all: still refused */
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_EINVAL);
    o.force = 0;
    record_free(&b);
    /* an op missing on one side */
    make_record(&b, "m", "d", 1, 0);
    b.points[0].n_ops = 1;
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "decode layer 0 attention"), "%s", xf_error_msg());
    record_free(&b);
    /* measured against predicted */
    make_record(&b, "m", "d", 1, 5);
    b.points[0].run.backend[0] = '\0';
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "measured"), "%s", xf_error_msg());
    record_free(&a);
    record_free(&b);
}

Test(compare, measured_op_without_samples_is_refused_by_name) {
    record a, b;
    make_pair(&a, &b, 5);
    free(b.points[0].ops[1].samples_s);
    b.points[0].ops[1].samples_s = NULL;
    b.points[0].ops[1].n_samples = 0;
    compare_options o;
    compare_options_default(&o);
    o.force = 1; /* not even with force */
    compare_result c;
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "NEW record") && strstr(xf_error_msg(), "decode layer 0 attention"), "%s", xf_error_msg());
    record_free(&a);
    record_free(&b);
}

Test(compare, metric_lists) {
    unsigned m;
    cr_assert_eq(compare_metrics_parse("time,tokens_per_s,ttft,tpot,bytes,flops,instructions,cpu_ttft,cpu_tpot", &m), XF_OK);
    cr_assert_eq(m, (1u << CMP_METRIC_COUNT) - 1);
    cr_assert_eq(compare_metrics_parse("bytes", &m), XF_OK);
    cr_assert_eq(m, 1u << CMP_BYTES);
    cr_assert_eq(compare_metrics_parse("time,,bytes", &m), XF_EINVAL);
    cr_assert_eq(compare_metrics_parse("latency", &m), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "latency"));
}

/* ---------- interleaved rounds, the methods, Holm, the headline gate ---------- */

/* Round k of an A/B run: both sides share the machine's drift drift[k] (every op of the run
 * moves together), each side has its own small jitter, NEW's op `slow_op` (-1 none) is slower
 * by `slow` and, with both_ops, the other op too. */
#define ROUNDS 8
static const double drift[ROUNDS] = {1.0, 1.3, 0.9, 1.2, 1.05, 0.85, 1.25, 1.1};
static double jitter(int k, int side) { return 1 + 0.01 * sin(1.7 * k + 2.1 * side); } /* within +-1% */
static void make_rounds(record *base, record *new_, double slow, int both_ops) {
    for (int k = 0; k < ROUNDS; k++) {
        make_record(&base[k], "m", "d", 1, 5);
        make_record(&new_[k], "m", "d", 1, 5);
        for (int op = 0; op < 2; op++) {
            scale_samples(&base[k], op, drift[k] * jitter(k, 0), 0);
            scale_samples(&new_[k], op, drift[k] * jitter(k, 1) * (op == 0 || both_ops ? slow : 1), 0);
        }
    }
}
static void free_rounds(record *base, record *new_) {
    for (int k = 0; k < ROUNDS; k++) {
        record_free(&base[k]);
        record_free(&new_[k]);
    }
}

Test(compare, one_run_per_side_mistakes_drift_for_a_regression_rounds_do_not) {
    record base[ROUNDS], new_[ROUNDS];
    make_rounds(base, new_, 1.0, 0); /* A/A: identical builds */
    compare_options o;
    compare_options_default(&o);
    o.metrics = (1u << CMP_TIME) | (1u << CMP_TPOT);
    compare_result c;
    /* the old way, one run per side: BASE from round 6 (drift 0.85 x jitter 1.00798), NEW from
     * round 2 (drift 1.3 x jitter 0.99394): gate_up 8.57..12.00 ms against 12.92..18.09 ms, all NEW
     * above all BASE: U = 0, exact p = 2/252, Holm over the two ops 4/252; every resampled median
     * ratio is at least 12.92 / 12.00 = 1.077, so the CI lies beyond +5%: false regressions of both
     * ops and of the decode step (TPOT: at least 38.77 / 35.98 = 1.077) */
    cr_assert_eq(compare_records(&base[5], &new_[1], &o, &c), XF_OK);
    const compare_item *g = find(&c, OP_GATE_UP, CMP_TIME);
    cr_assert_eq(g->method, CMP_METHOD_U);
    cr_assert_float_eq(g->p, 2.0 / 252.0, 1e-12);
    cr_assert_float_eq(g->p_adj, 4.0 / 252.0, 1e-12);
    cr_assert(g->ci_lo >= 12.92 / 12.00 - 1 - 1e-3, "%g", g->ci_lo);
    cr_assert_eq(g->verdict, CMP_REGRESSION);
    cr_assert_eq(find_point(&c, CMP_TPOT)->verdict, CMP_REGRESSION);
    cr_assert_gt(c.n_gate_regressions, 0);
    compare_result_free(&c);
    /* paired by round, the drift cancels: the ratios are jitter(k,1)/jitter(k,0), within +-2% */
    cr_assert_eq(compare_rounds(base, new_, ROUNDS, &o, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(c.n_rounds, ROUNDS);
    cr_assert_eq(c.n_regressions, 0);
    cr_assert_eq(c.n_improvements, 0);
    cr_assert_eq(c.n_gate_regressions, 0);
    const compare_item *t = find_point(&c, CMP_TPOT);
    cr_assert_eq(t->method, CMP_METHOD_PAIRED);
    cr_assert_eq(t->n_rounds, ROUNDS);
    cr_assert(fabs(t->change) < 0.02 && t->ci_lo > -0.03 && t->ci_hi < 0.03, "%g [%g, %g]", t->change, t->ci_lo, t->ci_hi);
    cr_assert(t->sd_log > 0 && t->sd_log < 0.02);
    cr_assert(t->detectable > o.threshold && t->detectable < 0.08, "detectable %g", t->detectable);
    cr_assert_eq(t->gate, 1);
    cr_assert_eq(find(&c, OP_GATE_UP, CMP_TIME)->gate, 0); /* a headline metric decides: ops explain */
    compare_result_free(&c);
    free_rounds(base, new_);
}

Test(compare, rounds_catch_a_slower_op_and_the_headline_decides) {
    record base[ROUNDS], new_[ROUNDS];
    compare_options o;
    compare_options_default(&o);
    o.metrics = (1u << CMP_TIME) | (1u << CMP_TPOT);
    compare_result c;
    /* gate_up x1.10: its paired ratios are 1.1 jitter(k,1)/jitter(k,0), geometric mean ~1.10, the
     * CI well above +5% and p tiny: a per-op regression. The decode step is gate_up (10+k) +
     * attention 2 (10+k) ms: (1.1 + 2) / 3 = +3.3%, below the 5% threshold: the gate passes, the
     * slower op is listed as the explanation. */
    make_rounds(base, new_, 1.10, 0);
    cr_assert_eq(compare_rounds(base, new_, ROUNDS, &o, &c), XF_OK, "%s", xf_error_msg());
    const compare_item *g = find(&c, OP_GATE_UP, CMP_TIME);
    cr_assert_eq(g->method, CMP_METHOD_PAIRED);
    cr_assert_eq(g->verdict, CMP_REGRESSION);
    cr_assert_float_eq(g->change, 0.10, 0.01);
    cr_assert(g->ci_lo > 0.05 && g->p_adj < 0.05);
    cr_assert_eq(find(&c, OP_ATTENTION, CMP_TIME)->verdict, CMP_UNCHANGED);
    const compare_item *t = find_point(&c, CMP_TPOT);
    cr_assert_float_eq(t->change, 0.1 / 3, 0.01);
    cr_assert_eq(t->verdict, CMP_UNCHANGED);
    cr_assert_eq(c.n_regressions, 1);
    cr_assert_eq(c.n_gate_regressions, 0);
    compare_result_free(&c);
    free_rounds(base, new_);
    /* both ops x1.10: the decode step is 10% slower: a gate regression */
    make_rounds(base, new_, 1.10, 1);
    cr_assert_eq(compare_rounds(base, new_, ROUNDS, &o, &c), XF_OK);
    t = find_point(&c, CMP_TPOT);
    cr_assert_eq(t->verdict, CMP_REGRESSION);
    cr_assert_float_eq(t->change, 0.10, 0.01);
    cr_assert_eq(c.n_gate_regressions, 1);
    compare_result_free(&c);
    /* per-op time only (no headline metric asked): the ops decide */
    o.metrics = 1u << CMP_TIME;
    cr_assert_eq(compare_rounds(base, new_, ROUNDS, &o, &c), XF_OK);
    cr_assert_eq(c.headline_gate, 0);
    cr_assert_eq(c.n_gate_regressions, 2);
    compare_result_free(&c);
    /* a 10% slowdown inside a 15% threshold is not a regression */
    o.metrics = (1u << CMP_TIME) | (1u << CMP_TPOT);
    o.threshold = 0.15;
    cr_assert_eq(compare_rounds(base, new_, ROUNDS, &o, &c), XF_OK);
    cr_assert_eq(c.n_regressions, 0);
    compare_result_free(&c);
    free_rounds(base, new_);
}

Test(compare, rounds_refuse_bad_input) {
    record base[ROUNDS], new_[ROUNDS];
    make_rounds(base, new_, 1.0, 0);
    compare_options o;
    compare_options_default(&o);
    compare_result c;
    cr_assert_eq(compare_rounds(base, new_, 1, &o, &c), XF_EINVAL); /* one round is no pair of rounds */
    /* round 3's NEW record is of another workload: refused, naming the round and what differs */
    new_[2].points[0].wl.batch = 4;
    cr_assert_eq(compare_rounds(base, new_, ROUNDS, &o, &c), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "round 3") && strstr(xf_error_msg(), "different workloads"), "%s", xf_error_msg());
    free_rounds(base, new_);
}

Test(compare, every_item_names_its_method) {
    record a, b;
    make_pair(&a, &b, 5);
    compare_options o;
    compare_options_default(&o);
    o.metrics = (1u << CMP_TIME) | (1u << CMP_FLOPS) | (1u << CMP_TOKENS_PER_S);
    compare_result c;
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK);
    cr_assert_eq(find(&c, OP_GATE_UP, CMP_TIME)->method, CMP_METHOD_U);
    cr_assert_eq(find(&c, OP_GATE_UP, CMP_FLOPS)->method, CMP_METHOD_EXACT);
    cr_assert_eq(find_point(&c, CMP_TOKENS_PER_S)->method, CMP_METHOD_UNTESTED); /* no prefill samples */
    for (int m = CMP_METHOD_EXACT; m <= CMP_METHOD_UNTESTED; m++) {
        cr_assert_neq(strcmp(compare_method_name((compare_method)m), "?"), 0);
        cr_assert_gt(strlen(compare_method_desc((compare_method)m)), 20);
    }
    compare_result_free(&c);
    record_free(&a);
    record_free(&b);
}

Test(compare, instructions_are_compared_exactly_where_counted) {
    record a, b;
    make_pair(&a, &b, 5);
    /* perf_event counts on every op: gate_up 1,000,000 and attention 2,000,000 instructions */
    for (int i = 0; i < 2; i++) {
        record_op *x = &a.points[0].ops[i], *y = &b.points[0].ops[i];
        x->n_counters = y->n_counters = 2;
        snprintf(x->counters[0].name, sizeof x->counters[0].name, "cycles");
        snprintf(x->counters[1].name, sizeof x->counters[1].name, "instructions");
        x->counters[1].supported = 1;
        x->counters[1].value = 1e6 * (i + 1);
        y->counters[0] = x->counters[0];
        y->counters[1] = x->counters[1];
    }
    compare_options o;
    compare_options_default(&o);
    o.metrics = (1u << CMP_INSTRUCTIONS) | (1u << CMP_TPOT);
    o.exact_threshold = 0.01;
    compare_result c;
    /* identical counts: unchanged */
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK, "%s", xf_error_msg());
    const compare_item *g = find(&c, OP_GATE_UP, CMP_INSTRUCTIONS);
    cr_assert_not_null(g);
    cr_assert_eq(g->method, CMP_METHOD_EXACT);
    cr_assert_eq(g->verdict, CMP_UNCHANGED);
    cr_assert_eq(c.n_gate_regressions, 0);
    compare_result_free(&c);
    /* 2% more instructions in gate_up: beyond the 1% threshold, always a regression, and it decides
     * (exact figures gate even when a measured headline metric is compared) */
    b.points[0].ops[0].counters[1].value = 1.02e6;
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK);
    g = find(&c, OP_GATE_UP, CMP_INSTRUCTIONS);
    cr_assert_float_eq(g->change, 0.02, 1e-12);
    cr_assert_eq(g->verdict, CMP_REGRESSION);
    cr_assert_eq(g->gate, 1);
    cr_assert_eq(find(&c, OP_ATTENTION, CMP_INSTRUCTIONS)->verdict, CMP_UNCHANGED);
    cr_assert_eq(c.n_gate_regressions, 1);
    compare_result_free(&c);
    /* not counted on NEW (unsupported): no item, a note that says so */
    b.points[0].ops[0].counters[1].supported = 0;
    cr_assert_eq(compare_records(&a, &b, &o, &c), XF_OK);
    cr_assert_null(find(&c, OP_GATE_UP, CMP_INSTRUCTIONS));
    cr_assert_not_null(find(&c, OP_ATTENTION, CMP_INSTRUCTIONS));
    int noted = 0;
    for (int i = 0; i < c.n_notes; i++) noted |= strstr(c.notes[i], "1 ops have no instruction count") != NULL;
    cr_assert(noted, "no note about the missing count");
    compare_result_free(&c);
    unsigned mask;
    cr_assert_eq(compare_metrics_parse("time,instructions", &mask), XF_OK);
    cr_assert_eq(mask, (1u << CMP_TIME) | (1u << CMP_INSTRUCTIONS));
    record_free(&a);
    record_free(&b);
}

/* The CPU step times (compare --ab's default): a round's figure is the least over its repetitions
 * (one repetition hit by other jobs does not move it), the wall-clock headline explains only,
 * and a record without CPU times says so instead of comparing them. */
Test(compare, cpu_step_times_decide_by_their_least_repetition) {
    record base[ROUNDS], new_[ROUNDS];
    make_rounds(base, new_, 1.0, 0); /* wall times: A/A under drift */
    for (int k = 0; k < ROUNDS; k++) {
        record_point *pb = &base[k].points[0], *pn = &new_[k].points[0];
        pb->n_cpu = pn->n_cpu = 5;
        for (int r = 0; r < 5; r++) {
            /* BASE's repetitions 0-2 of every round hit by other jobs (x3); the rest within +-1% */
            double burst = r < 3 ? 3.0 : 1.0;
            pb->cpu_decode_s[r] = 1e-3 * burst * jitter(k + r, 0);
            pn->cpu_decode_s[r] = 1.2e-3 * jitter(k + r, 1); /* NEW: 20% more CPU per decode step */
            pb->cpu_prefill_s[r] = pn->cpu_prefill_s[r] = 2e-3;
        }
    }
    compare_options o;
    compare_options_default(&o);
    o.metrics = (1u << CMP_TIME) | (1u << CMP_TPOT) | (1u << CMP_CPU_TTFT) | (1u << CMP_CPU_TPOT);
    o.explain = 1u << CMP_TPOT;
    compare_result c;
    cr_assert_eq(compare_rounds(base, new_, ROUNDS, &o, &c), XF_OK, "%s", xf_error_msg());
    const compare_item *cpu = find_point(&c, CMP_CPU_TPOT), *wall = find_point(&c, CMP_TPOT);
    cr_assert_not_null(cpu);
    cr_assert_eq(cpu->method, CMP_METHOD_PAIRED);
    /* BASE's median is the bursts' 3 ms (NEW would look 60% faster); its least is ~1.0 ms: +20% */
    cr_assert(cpu->change > 0.17 && cpu->change < 0.23, "cpu_tpot change %g", cpu->change);
    cr_assert_eq(cpu->verdict, CMP_REGRESSION);
    cr_assert_eq(cpu->gate, 1);
    cr_assert_eq(wall->gate, 0); /* explains */
    cr_assert_eq(find(&c, OP_GATE_UP, CMP_TIME)->gate, 0);
    cr_assert_eq(find_point(&c, CMP_CPU_TTFT)->verdict, CMP_UNCHANGED);
    cr_assert_eq(c.n_gate_regressions, 1);
    compare_result_free(&c);
    /* without CPU times on a side: a note, no item */
    for (int k = 0; k < ROUNDS; k++) new_[k].points[0].n_cpu = 0;
    cr_assert_eq(compare_rounds(base, new_, ROUNDS, &o, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_null(find_point(&c, CMP_CPU_TPOT));
    int noted = 0;
    for (int i = 0; i < c.n_notes; i++) noted |= strstr(c.notes[i], "no CPU step times") != NULL;
    cr_assert(noted);
    compare_result_free(&c);
    free_rounds(base, new_);
}
