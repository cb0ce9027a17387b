/* Advice: ridge batch solved against a hand computation, findings with the cost model's gains,
 * the KV-policy and latency findings on synthetic records, and the record's "advice" JSON. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/advice.h"
#include "analyzers/predict.h"
#include "core/record_kv.h"
#include "reports/record_json.h"

static void setup(model_config *cfg, device_spec *dev, const char *model, const char *device) {
    cr_assert_eq(config_resolve(model, cfg), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(device_lookup(device, NULL, dev), XF_OK, "%s", xf_error_msg());
}

static workload wl(int64_t batch, int64_t prompt, int64_t gen, xf_dtype w, xf_dtype kv) {
    workload x = {0};
    x.batch = batch;
    x.prompt = prompt;
    x.gen = gen;
    x.wdtype = w;
    x.adtype = XF_BF16;
    x.kvdtype = kv;
    return x;
}

/* The cost model's record of one point of w, then its advice. */
static void advise(const model_config *cfg, const device_spec *dev, workload w, record *r) {
    cr_assert_eq(predict_record(cfg, dev, &w, 1, r), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(advice_record(r), XF_OK, "%s", xf_error_msg());
}

static const record_advice *find_kind(const record *r, const char *kind) {
    for (int i = 0; i < r->n_advice; i++)
        if (strcmp(r->advice[i].kind, kind) == 0) return &r->advice[i];
    return NULL;
}

Test(advice, ridge_batch_llama2_7b_h100) {
    /* gate_up in decode, bf16: FLOPs 4 b d f; bytes 4 d f (weights) + 2 b d (in) + 4 b f (out).
     * d = 4096, f = 11008, ridge R = 989.4e12 / 3.35e12 = 295.343 FLOP/B.
     * I(b) >= R  <=>  b >= 4 R d f / (4 d f - 2 R d - 4 R f) = 5.32667e10 / 1.64931e8 = 322.96
     * -> b = 323 (I(322) = 294.54 < R, I(323) = 295.37 >= R). */
    model_config cfg;
    device_spec dev;
    setup(&cfg, &dev, "llama-2-7b", "h100-sxm");
    workload w = wl(1, 128, 16, XF_BF16, XF_BF16);
    int64_t b;
    cr_assert_eq(advice_ridge_batch(&cfg, &w, &dev, 1 << 16, &b), XF_OK);
    cr_assert_eq(b, 323);
    cr_assert_eq(advice_ridge_batch(&cfg, &w, &dev, 100, &b), XF_OK);
    cr_assert_eq(b, 0); /* never reached below 100 */
}

Test(advice, memory_bound_decode_gets_precision_and_batch) {
    model_config cfg;
    device_spec dev;
    setup(&cfg, &dev, "llama-2-7b", "h100-sxm");
    workload w = wl(1, 128, 16, XF_BF16, XF_BF16);
    record r;
    advise(&cfg, &dev, w, &r);
    const record_advice *wp = find_kind(&r, "weight_precision");
    cr_assert_not_null(wp);
    /* before: the bf16 decode step the cost model predicts; after: the same with int8 weights */
    workload q = w;
    q.wdtype = XF_INT8;
    cost_step_sums s = cost_sums_of_shape(workload_decode_step(&w, workload_mean_decode_context(&w)));
    double t16, t8;
    cr_assert_eq(predict_step_time(&cfg, &w, &s, &dev, &t16), XF_OK);
    cr_assert_eq(predict_step_time(&cfg, &q, &s, &dev, &t8), XF_OK);
    cr_assert_float_eq(wp->before, t16, 1e-15);
    cr_assert_float_eq(wp->after, t8, 1e-15);
    /* At batch 1 the step is almost all weight reads: int8 with one fp16 scale per 128 weights
     * is (1 + 2/128) / 2 = 0.508 of the bf16 bytes; the other traffic keeps the ratio a bit above. */
    cr_assert(wp->after / wp->before > 0.50 && wp->after / wp->before < 0.56, "ratio %g", wp->after / wp->before);
    cr_assert(strstr(wp->action, "int4"), "%s", wp->action);
    /* batch: the ridge batch 323 fits in 80 GiB at 144 tokens per sequence -> target 323 */
    const record_advice *bt = find_kind(&r, "batch");
    cr_assert_not_null(bt);
    cr_assert(strstr(bt->action, "batch 323"), "%s", bt->action);
    cr_assert(bt->after > bt->before);
    /* ranked best first, one per kind */
    for (int i = 1; i < r.n_advice; i++) cr_assert(r.advice[i - 1].score >= r.advice[i].score);
    record_free(&r);
}

/* LLaMA-2-70B in bf16 (128 GiB of weights) on an 80 GiB A100: not even batch 1 fits, so no
 * batch is recommended (it once said "run batch 157"); where a batch is recommended, it fits. */
Test(advice, never_a_batch_that_does_not_fit) {
    model_config cfg;
    device_spec dev;
    setup(&cfg, &dev, "llama-2-70b", "a100-80gb");
    workload w = wl(1, 128, 128, XF_BF16, XF_BF16);
    cr_assert_eq(cost_max_batch(&cfg, &w, dev.memory_bytes), 0);
    record r;
    advise(&cfg, &dev, w, &r);
    cr_assert_null(find_kind(&r, "batch"), "%s", find_kind(&r, "batch") ? find_kind(&r, "batch")->action : "");
    cr_assert_not_null(find_kind(&r, "weight_precision")); /* int8 / int4 weights are what would make it fit */
    record_free(&r);
    /* int4 weights (about 35 GiB) fit: the batch recommended is at most the largest that fits */
    w.wdtype = XF_INT4;
    int64_t fit = cost_max_batch(&cfg, &w, dev.memory_bytes);
    cr_assert(fit > 1, "int4 70B fits %lld sequences", (long long)fit);
    advise(&cfg, &dev, w, &r);
    const record_advice *bt = find_kind(&r, "batch");
    cr_assert_not_null(bt);
    long long b = 0;
    cr_assert_eq(sscanf(bt->action, "run batch %lld", &b), 1, "%s", bt->action);
    cr_assert(b >= 1 && b <= fit, "batch %lld recommended, %lld fit", b, (long long)fit);
    workload big = w;
    big.batch = b;
    cr_assert(cost_max_batch(&cfg, &big, dev.memory_bytes) >= b);
    record_free(&r);
}

Test(advice, kv_reads_at_long_context) {
    model_config cfg;
    device_spec dev;
    /* llama-2-7b is MHA (32 KV heads): batch 16 at ~4000 tokens reads 16 * 4032 * 512 KiB = 31.5 GiB
     * of fp16 KV per decode step against 12.3 GiB of weights: attention dominates */
    setup(&cfg, &dev, "llama-2-7b", "h100-sxm");
    workload w = wl(16, 4000, 64, XF_BF16, XF_FP16);
    record r;
    advise(&cfg, &dev, w, &r);
    const record_advice *kv = find_kind(&r, "kv_precision");
    cr_assert_not_null(kv);
    cr_assert(kv->after < kv->before);
    cr_assert(strstr(kv->evidence, "MHA"), "%s", kv->evidence);
    record_free(&r);
    /* llama-3-8b: GQA, 32 query heads over 8 KV heads */
    setup(&cfg, &dev, "llama-3-8b", "h100-sxm");
    w = wl(64, 4000, 64, XF_BF16, XF_FP16);
    advise(&cfg, &dev, w, &r);
    kv = find_kind(&r, "kv_precision");
    cr_assert_not_null(kv);
    cr_assert(strstr(kv->evidence, "GQA already shares each KV head among 4"), "%s", kv->evidence);
    record_free(&r);
}

Test(advice, prefill_only_has_no_decode_findings) {
    model_config cfg;
    device_spec dev;
    setup(&cfg, &dev, "llama-2-7b", "h100-sxm");
    workload w = wl(1, 512, 0, XF_BF16, XF_BF16);
    record r;
    advise(&cfg, &dev, w, &r);
    cr_assert_eq(r.n_advice, 0);
    record_free(&r);
}

Test(advice, kv_policy_from_the_kv_section) {
    model_config cfg;
    device_spec dev;
    setup(&cfg, &dev, "stories15m", "h100-sxm");
    workload w = wl(1, 64, 0, XF_BF16, XF_BF16);
    record r;
    cr_assert_eq(predict_record(&cfg, &dev, &w, 1, &r), XF_OK);
    r.kv = calloc(1, sizeof *r.kv);
    r.kv->n_policies = 2;
    r.kv->policies = calloc(2, sizeof *r.kv->policies);
    record_kv_policy *res = &r.kv->policies[0], *pg = &r.kv->policies[1];
    strcpy(res->policy, "reserve");
    /* reserve: token 30%, reserved 20%, internal 25%, external 5%, free 20% -> held 80%, of it
     * 0.30 / 0.80 = 37.5% token states. paged:16: token 76%, internal 2%, free 22% -> 0.76 / 0.78 = 97.4% */
    double rs[KV_CAT_COUNT] = {0.30, 0.20, 0.25, 0.05, 0.20}, ps[KV_CAT_COUNT] = {0.76, 0, 0.02, 0, 0.22};
    memcpy(res->share, rs, sizeof rs);
    memcpy(pg->share, ps, sizeof ps);
    strcpy(pg->policy, "paged:16");
    pg->block_tokens = 16;
    res->max_live = 10;
    pg->max_live = 40;
    cr_assert_eq(advice_record(&r), XF_OK);
    const record_advice *a = find_kind(&r, "kv_policy");
    cr_assert_not_null(a);
    cr_assert_float_eq(a->score, 0.76 / 0.78 - 0.30 / 0.80, 1e-12);
    cr_assert_float_eq(a->before, 10, 0);
    cr_assert_float_eq(a->after, 40, 0);
    /* 0.30 / 0.80 is 0.37499999... in binary: printed as 37% */
    cr_assert(strstr(a->evidence, "reserve keeps 37%") && strstr(a->evidence, "paged:16 keeps 97%"), "%s", a->evidence);
    record_free(&r);
}

/* A stories15m bf16 prediction whose decode ops are all made "measured" at 10 us and
 * latency-bound: *step = n * 10 us, *pred = the sum of their roofline times. */
static void latency_bound_record(record *r, double *step, double *pred) {
    model_config cfg;
    device_spec dev;
    setup(&cfg, &dev, "stories15m", "h100-sxm");
    workload w = wl(1, 16, 4, XF_BF16, XF_BF16);
    cr_assert_eq(predict_record(&cfg, &dev, &w, 1, r), XF_OK);
    record_point *p = &r->points[0];
    *step = *pred = 0;
    for (int64_t i = 0; i < p->n_ops; i++) {
        record_op *op = &p->ops[i];
        if (op->cost.phase != XF_DECODE) continue;
        op->measured = 1;
        op->time_s = 10e-6;
        op->bound = XF_BOUND_LATENCY;
        *step += 10e-6;
        *pred += op->predicted_time_s;
    }
}

/* after = n * 10 us - n * 10 us + sum(predicted): the ops at their roofline */
Test(advice, latency_bound_measured_ops) {
    record r;
    double step, pred;
    latency_bound_record(&r, &step, &pred);
    cr_assert_eq(advice_record(&r), XF_OK);
    const record_advice *a = find_kind(&r, "fusion");
    cr_assert_not_null(a);
    cr_assert_float_eq(a->before, step, 1e-15);
    cr_assert_float_eq(a->after, pred, 1e-12);
    cr_assert(strstr(a->title, "latency-bound"));
    record_free(&r);
}

/* The same latency-bound ops, but the model's threads waited for a CPU half the time: no fusion
 * advice (the waits, not the ops, made them latency-bound), the contention instead. */
Test(advice, cpu_wait_replaces_fusion) {
    record r;
    double step, pred;
    latency_bound_record(&r, &step, &pred);
    record_point *p = &r.points[0];
    p->run.threads = 2;
    p->concurrent.cpu_wait_measured = 1;
    p->concurrent.threshold = 0.15;
    p->concurrent.cpu_wait_share = 0.10; /* within the threshold: fusion stands, no contention */
    cr_assert_eq(advice_record(&r), XF_OK);
    cr_assert_not_null(find_kind(&r, "fusion"));
    cr_assert_null(find_kind(&r, "cpu_contention"));
    p->concurrent.cpu_wait_share = 0.5;
    cr_assert_eq(advice_record(&r), XF_OK);
    cr_assert_null(find_kind(&r, "fusion"), "latency-bound from waiting for a CPU is not advice to fuse");
    const record_advice *a = find_kind(&r, "cpu_contention");
    cr_assert_not_null(a);
    cr_assert_float_eq(a->before, step, 1e-15);
    cr_assert_float_eq(a->after, 0.5 * step, 1e-15);
    cr_assert_float_eq(a->score, 0.5, 1e-12);
    cr_assert(strstr(a->evidence, "waited in the run queue 50%") && strstr(a->action, "--threads"), "%s | %s", a->evidence, a->action);
    p->concurrent.cpu_wait_measured = 0; /* not measured: nothing said of it */
    cr_assert_eq(advice_record(&r), XF_OK);
    cr_assert_null(find_kind(&r, "cpu_contention"));
    cr_assert_not_null(find_kind(&r, "fusion"));
    record_free(&r);
}

Test(advice, json_round_trip_and_checked_read) {
    model_config cfg;
    device_spec dev;
    setup(&cfg, &dev, "llama-2-7b", "h100-sxm");
    workload w = wl(1, 128, 16, XF_BF16, XF_BF16);
    record r, back;
    advise(&cfg, &dev, w, &r);
    cr_assert(r.n_advice >= 2);
    char *text = record_to_json(&r);
    cr_assert_not_null(text);
    cr_assert_eq(record_from_json(text, "t", &back), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(back.n_advice, r.n_advice);
    for (int i = 0; i < r.n_advice; i++) {
        cr_assert_str_eq(back.advice[i].kind, r.advice[i].kind);
        cr_assert_str_eq(back.advice[i].evidence, r.advice[i].evidence);
        cr_assert_float_eq(back.advice[i].after, r.advice[i].after, 0);
        cr_assert_eq(back.advice[i].point, r.advice[i].point);
    }
    record_free(&back);
    /* a damaged entry is refused with its path */
    char *bad = strstr(text, "\"gain\"");
    cr_assert_not_null(bad);
    memcpy(bad, "\"gaiX\"", 6); /* "gain" -> "gaiX", same length: the entry has no gain object */
    cr_assert_neq(record_from_json(text, "t", &back), XF_OK);
    cr_assert(strstr(xf_error_msg(), "record.advice[0]"), "%s", xf_error_msg());
    record_free(&back);
    free(text);
    record_free(&r);
}

/* Mixture of experts. mixtral-8x7b bf16 on an H100 (80 GiB) at batch 1: 87 GiB of weights, the
 * experts 84 of them -> shard the experts (2 devices: 3 + 84 / 2 = 45 GiB each); one token reads 2
 * of 8 experts, 1 token per expert read -> batch 16 (8 (1 - (3/4)^16) = 7.92 experts for 32
 * routed tokens: 4.04 per read, the first power of two past 4). */
Test(advice, moe_expert_parallelism_and_batching) {
    model_config cfg;
    device_spec dev;
    setup(&cfg, &dev, "mixtral-8x7b", "h100-sxm");
    workload w = wl(1, 128, 16, XF_BF16, XF_BF16);
    record r;
    advise(&cfg, &dev, w, &r);
    const record_advice *ep = find_kind(&r, "expert_parallelism"), *eb = find_kind(&r, "expert_batching");
    cr_assert_not_null(ep);
    cr_assert_not_null(eb);
    const double gib = 1024.0 * 1024 * 1024;
    cr_assert(fabs(ep->before / gib - 87.0) < 0.1, "%g GiB", ep->before / gib);
    cr_assert(fabs(ep->after / gib - 45.0) < 0.1, "%g GiB", ep->after / gib);
    cr_assert(strstr(ep->action, "2 devices"), "%s", ep->action);
    cr_assert(strstr(eb->action, "batch 16"), "%s", eb->action);
    cr_assert(strstr(eb->evidence, "1.00 tokens per expert read"), "%s", eb->evidence);
    cr_assert_gt(eb->after, eb->before);
    cr_assert_null(find_kind(&r, "expert_imbalance"), "a prediction has no router counts");
    record_free(&r);
    /* a dense model gets none of them */
    setup(&cfg, &dev, "llama-2-7b", "h100-sxm");
    advise(&cfg, &dev, w, &r);
    cr_assert(!find_kind(&r, "expert_parallelism") && !find_kind(&r, "expert_batching"));
    record_free(&r);
}

/* The router's counts of a measured point: expert 3 of layer 1 gets 12 of 16 routed decode tokens
 * (4 steps x batch 2 x top-2), 6x the mean of 2 -> expert_imbalance; a balanced load gets none. */
Test(advice, moe_imbalance_from_the_router_counts) {
    model_config cfg;
    device_spec dev;
    setup(&cfg, &dev, "mixtral-8x7b", "h100-sxm");
    cfg.n_layers = 2;
    workload w = wl(2, 16, 5, XF_BF16, XF_BF16);
    record r;
    cr_assert_eq(predict_record(&cfg, &dev, &w, 1, &r), XF_OK);
    record_point *p = &r.points[0];
    for (int64_t i = 0; i < p->n_ops; i++) p->ops[i].measured = 1; /* as a run's */
    const int64_t E = 8, L = 2;
    p->n_experts = E;
    p->n_expert_layers = L;
    p->expert_tokens = calloc(XF_PHASE_COUNT * L * E, sizeof(int64_t));
    p->expert_distinct = calloc(XF_PHASE_COUNT * L, sizeof(int64_t));
    p->expert_steps[XF_PREFILL] = 1;
    p->expert_steps[XF_DECODE] = 4;
    for (int64_t l = 0; l < L; l++) {
        for (int64_t e = 0; e < E; e++) p->expert_tokens[(XF_PREFILL * L + l) * E + e] = 8; /* 64 = 32 tokens x 2 */
        p->expert_distinct[XF_PREFILL * L + l] = 8;
        int64_t *d = p->expert_tokens + (XF_DECODE * L + l) * E;
        for (int64_t e = 0; e < E; e++) d[e] = 2; /* balanced: 16 */
        p->expert_distinct[XF_DECODE * L + l] = 4 * 4;
    }
    cr_assert_eq(advice_record(&r), XF_OK);
    cr_assert_null(find_kind(&r, "expert_imbalance"), "a balanced load is not advised on");
    int64_t *d = p->expert_tokens + (XF_DECODE * L + 1) * E;
    memset(d, 0, (size_t)E * sizeof *d);
    d[0] = 2, d[1] = 2, d[3] = 12; /* 16 */
    cr_assert_eq(advice_record(&r), XF_OK);
    const record_advice *im = find_kind(&r, "expert_imbalance");
    cr_assert_not_null(im);
    cr_assert_float_eq(im->before, 6.0, 1e-9);
    cr_assert(strstr(im->evidence, "expert 3 of layer 1 got 75%"), "%s", im->evidence);
    cr_assert(strstr(im->action, "6.0x"), "%s", im->action);
    record_free(&r);
}
