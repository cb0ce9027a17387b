/* Serving simulator: small deterministic scenarios with a constant step time (1 s per step), the
 * results worked out by hand step by step; the cost-model step time against cost_step; and bad
 * input (pools too small, rates, malformed traces, unknown policies and distributions). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "analyzers/kv.h"
#include "core/device.h"
#include "reference_model/serving_sim.h"

static double one_second(void *ctx, const sim_step *s) {
    (void)ctx;
    (void)s;
    return 1.0;
}

/* A pool of n_slots slots of 4 bytes (toy model: 1 layer, 1 KV head, head_dim 1, fp16). */
static sim_config toy(const char *policy, int64_t n_slots, int64_t max_len) {
    sim_config c;
    memset(&c, 0, sizeof c);
    c.kv.n_layers = 1;
    c.kv.n_kv_heads = 1;
    c.kv.head_dim = 1;
    c.kv.dtype = XF_FP16;
    c.kv.budget_bytes = n_slots * 4;
    cr_assert_eq(kv_policy_parse(policy, &c.kv.policy), XF_OK);
    c.max_len = max_len;
    c.step_time = one_second;
    return c;
}

static sim_trace trace_of(const sim_request *r, int64_t n) {
    sim_trace t = {n, malloc((size_t)n * sizeof *r)};
    cr_assert(t.req);
    memcpy(t.req, r, (size_t)n * sizeof *r);
    return t;
}

#define EPS 1e-12

Test(serving_sim, oracle_two_requests) {
    /* 2 requests at 0, prompt 4, output 3: final KV 4 + 3 - 1 = 6 each, 12 of 20 slots.
     * step 1 (0-1): both prefilled, token 1; held: tok 8, reserved 4, free 8
     * step 2 (1-2): decode, token 2; tok 10, reserved 2
     * step 3 (2-3): decode, token 3, both finish; tok 12, reserved 0
     * time-averaged: tok (8+10+12)/3/20 = 0.5, reserved (4+2+0)/60 = 0.1, free 24/60 = 0.4 */
    sim_request r[2] = {{1, 0, 4, 3}, {2, 0, 4, 3}};
    sim_trace t = trace_of(r, 2);
    sim_config c = toy("oracle", 20, 64);
    record_kv_policy p;
    cr_assert_eq(sim_run(&c, &t, &p), XF_OK, "%s", xf_error_msg());
    cr_expect_str_eq(p.policy, "oracle");
    cr_expect_eq(p.n_steps, 3);
    cr_expect_eq(p.n_completed, 2);
    cr_expect_float_eq(p.duration_s, 3.0, EPS);
    cr_expect_float_eq(p.output_tokens, 6.0, EPS);
    cr_expect_float_eq(p.prompt_tokens, 8.0, EPS);
    cr_expect_float_eq(p.tokens_per_s, 2.0, EPS);
    cr_expect_float_eq(p.requests_per_s, 2.0 / 3.0, EPS);
    cr_expect_float_eq(p.share[KV_CAT_TOKEN], 0.5, EPS);
    cr_expect_float_eq(p.share[KV_CAT_RESERVED], 0.1, EPS);
    cr_expect_float_eq(p.share[KV_CAT_INTERNAL], 0.0, EPS);
    cr_expect_float_eq(p.share[KV_CAT_EXTERNAL], 0.0, EPS);
    cr_expect_float_eq(p.share[KV_CAT_FREE], 0.4, EPS);
    cr_expect_float_eq(p.bytes[KV_CAT_TOKEN], 0.5 * 80, EPS); /* pool 20 slots * 4 B */
    /* TTFT 1 s each; TPOT (3 - 1) / 2 = 1 s */
    for (int k = 0; k < 3; k++) {
        cr_expect_float_eq(p.ttft_s[k], 1.0, EPS);
        cr_expect_float_eq(p.tpot_s[k], 1.0, EPS);
    }
    cr_expect_eq(p.max_live, 2);
    cr_expect_float_eq(p.mean_live, 2.0, EPS);
    cr_expect_float_eq(p.mean_batch, 2.0, EPS);
    cr_expect_eq(p.preemptions, 0);
    cr_expect_eq(p.alloc_failures, 0);
    cr_expect_eq(p.n_requests_kept, 2);
    /* the series: 3 intervals of 1 s, averages recompute the totals */
    cr_assert_eq(p.n_series, 3);
    double tok = 0, T = 0;
    for (int64_t i = 0; i < p.n_series; i++) {
        tok += p.series[i].share[KV_CAT_TOKEN] * p.series[i].dt_s;
        T += p.series[i].dt_s;
    }
    cr_expect_float_eq(tok / T, 0.5, EPS);
    cr_expect_float_eq(p.series[0].share[KV_CAT_TOKEN], 8.0 / 20, EPS);
    record_kv_policy_clear(&p);
    sim_trace_free(&t);
}

Test(serving_sim, reserve_and_pow2_over_reserve) {
    /* Same trace; reserve 16 slots each (max_len 16): step 1 tok 8, reserved 4, internal
     * 2 * (16 - 6) = 20 of 40 ... pool 40 slots holds both regions (32), free 8.
     * steps: tok 8, 10, 12; reserved 4, 2, 0; internal 20 each; free 8 each.
     * time-averaged over 3 s of a 40-slot pool: tok 30/120 = 0.25, reserved 6/120 = 0.05,
     * internal 60/120 = 0.5, free 24/120 = 0.2 */
    sim_request r[2] = {{1, 0, 4, 3}, {2, 0, 4, 3}};
    sim_trace t = trace_of(r, 2);
    sim_config c = toy("reserve", 40, 16);
    record_kv_policy p;
    cr_assert_eq(sim_run(&c, &t, &p), XF_OK, "%s", xf_error_msg());
    cr_expect_float_eq(p.share[KV_CAT_TOKEN], 0.25, EPS);
    cr_expect_float_eq(p.share[KV_CAT_RESERVED], 0.05, EPS);
    cr_expect_float_eq(p.share[KV_CAT_INTERNAL], 0.5, EPS);
    cr_expect_float_eq(p.share[KV_CAT_FREE], 0.2, EPS);
    record_kv_policy_clear(&p);
    /* pow2: final 6 -> 8 slots each, internal 2 * 2 = 4 per step: 12/120 = 0.1; free
     * 40 - 16 = 24 per step: 72/120 = 0.6 */
    c = toy("pow2", 40, 16);
    cr_assert_eq(sim_run(&c, &t, &p), XF_OK, "%s", xf_error_msg());
    cr_expect_float_eq(p.share[KV_CAT_TOKEN], 0.25, EPS);
    cr_expect_float_eq(p.share[KV_CAT_INTERNAL], 0.1, EPS);
    cr_expect_float_eq(p.share[KV_CAT_FREE], 0.6, EPS);
    record_kv_policy_clear(&p);
    sim_trace_free(&t);
}

Test(serving_sim, paged_preempts_newest_and_recomputes) {
    /* paged:2 over 8 slots (4 blocks). A and B at 0: prompt 2, output 4 (final 5: 3 blocks).
     * step 1: both admitted (1 block each), token 1 at t=1
     * step 2: both grow to 3 tokens (a block each; pool full), token 2 at t=2
     * step 3: both grow to 4 (inside their blocks), token 3 at t=3
     * step 4: A needs a 3rd block: B (newest) is preempted; A grows; no admissions; token 4
     *         of A at t=4: A finishes
     * step 5: B re-admitted, prefill of 2 + 3 = 5 tokens (3 blocks), token 4 at t=5: done.
     * TTFT 1 and 1; TPOT A (4 - 1) / 3 = 1, B (5 - 1) / 3 = 4/3. */
    sim_request r[2] = {{1, 0, 2, 4}, {2, 0, 2, 4}};
    sim_trace t = trace_of(r, 2);
    sim_config c = toy("paged:2", 8, 64);
    record_kv_policy p;
    cr_assert_eq(sim_run(&c, &t, &p), XF_OK, "%s", xf_error_msg());
    cr_expect_eq(p.preemptions, 1);
    cr_expect_eq(p.alloc_failures, 1); /* A's growth at step 4 */
    cr_expect_eq(p.n_steps, 5);
    cr_expect_float_eq(p.duration_s, 5.0, EPS);
    cr_expect_float_eq(p.output_tokens, 8.0, EPS);
    cr_expect_float_eq(p.prompt_tokens, 2 + 2 + 5, EPS);
    cr_assert_eq(p.n_requests_kept, 2);
    cr_expect_float_eq(p.req_ttft_s[0], 1.0, EPS);
    cr_expect_float_eq(p.req_ttft_s[1], 1.0, EPS);
    cr_expect_float_eq(p.req_tpot_s[0], 1.0, EPS);
    cr_expect_float_eq(p.req_tpot_s[1], 4.0 / 3.0, EPS);
    /* written slots per step: 4, 6, 8, (A 5) 5, (B 5) 5 = 28 of 5 * 8 = 40 -> 0.7 */
    cr_expect_float_eq(p.share[KV_CAT_TOKEN], 28.0 / 40.0, EPS);
    record_kv_policy_clear(&p);

    /* --preempt wait: at step 4 both wait for a block only the other could free */
    c.preempt = SIM_PREEMPT_WAIT;
    cr_expect_eq(sim_run(&c, &t, &p), XF_EINVAL);
    cr_expect(strstr(xf_error_msg(), "deadlock") != NULL, "%s", xf_error_msg());
    sim_trace_free(&t);
}

Test(serving_sim, external_fragmentation) {
    /* oracle over 12 slots. A (prompt 4, output 1: final 4) at [0,4); B (prompt 4, output 3:
     * final 6) at [4,10); C (prompt 5, output 1: final 5) waits.
     * step 1: A, B admitted; free [10,12) = 2 < 5: shortage, not fragmentation.
     *         tok 8, reserved 2, free 2. A finishes.
     * step 2: free [0,4) + [10,12) = 6 >= 5 but no extent holds 5: external 6. tok 5, res 1.
     * step 3: tok 6, res 0, external 6. B finishes.
     * step 4: C at [0,5): tok 5, free 7.
     * over 4 s * 12 slots = 48: tok 24/48, reserved 3/48, external 12/48, free 9/48 */
    sim_request r[3] = {{1, 0, 4, 1}, {2, 0, 4, 3}, {3, 0, 5, 1}};
    sim_trace t = trace_of(r, 3);
    sim_config c = toy("oracle", 12, 64);
    record_kv_policy p;
    cr_assert_eq(sim_run(&c, &t, &p), XF_OK, "%s", xf_error_msg());
    cr_expect_eq(p.n_steps, 4);
    cr_expect_eq(p.alloc_failures, 3); /* C refused at steps 1, 2 and 3 */
    cr_expect_float_eq(p.share[KV_CAT_TOKEN], 24.0 / 48, EPS);
    cr_expect_float_eq(p.share[KV_CAT_RESERVED], 3.0 / 48, EPS);
    cr_expect_float_eq(p.share[KV_CAT_INTERNAL], 0.0, EPS);
    cr_expect_float_eq(p.share[KV_CAT_EXTERNAL], 12.0 / 48, EPS);
    cr_expect_float_eq(p.share[KV_CAT_FREE], 9.0 / 48, EPS);
    /* TTFT 1, 1, 4: nearest rank p50 = 2nd = 1, p90 = p99 = 3rd = 4 */
    cr_expect_float_eq(p.ttft_s[0], 1.0, EPS);
    cr_expect_float_eq(p.ttft_s[1], 4.0, EPS);
    cr_expect_float_eq(p.ttft_s[2], 4.0, EPS);
    cr_expect_float_eq(p.ttft_mean_s, 2.0, EPS);
    /* one-token outputs have no TPOT: only B's (3 - 1) / 2 = 1 */
    cr_expect_float_eq(p.tpot_s[0], 1.0, EPS);
    cr_expect_float_eq(p.req_tpot_s[0], -1.0, EPS);
    record_kv_policy_clear(&p);
    sim_trace_free(&t);
}

Test(serving_sim, idle_gap_and_series_decimation) {
    /* A at 0 and B at 10, prompt 2, output 1: steps 0-1 and 10-11, idle 1-10 with an empty pool.
     * duration 11, busy 2; tokens/s 2/11; mean batch over busy time 1; mean live (1 + 0 + 1)/11 */
    sim_request r[2] = {{1, 0, 2, 1}, {2, 10, 2, 1}};
    sim_trace t = trace_of(r, 2);
    sim_config c = toy("paged:4", 16, 64);
    record_kv_policy p;
    cr_assert_eq(sim_run(&c, &t, &p), XF_OK, "%s", xf_error_msg());
    cr_expect_float_eq(p.duration_s, 11.0, EPS);
    cr_expect_float_eq(p.busy_s, 2.0, EPS);
    cr_expect_float_eq(p.tokens_per_s, 2.0 / 11, EPS);
    cr_expect_float_eq(p.mean_batch, 1.0, EPS);
    cr_expect_float_eq(p.mean_live, 2.0 / 11, EPS);
    /* tok 2 of 16 for 2 s: 4/176; internal 2 (rest of the block) for 2 s */
    cr_expect_float_eq(p.share[KV_CAT_TOKEN], 4.0 / 176, EPS);
    cr_expect_float_eq(p.share[KV_CAT_INTERNAL], 4.0 / 176, EPS);
    cr_expect_float_eq(p.share[KV_CAT_FREE], 1 - 8.0 / 176, EPS);
    cr_expect_eq(p.n_series, 3);
    record_kv_policy_clear(&p);
    sim_trace_free(&t);

    /* 1000 requests with a 16-point series: the points still average to the totals */
    sim_dist d;
    cr_assert_eq(sim_dist_parse("--x", "uniform:1:20", &d), XF_OK);
    cr_assert_eq(sim_trace_generate(1000, 3.0, &d, &d, 7, 64, &t), XF_OK);
    c = toy("pow2", 256, 64);
    c.max_series = 16;
    cr_assert_eq(sim_run(&c, &t, &p), XF_OK, "%s", xf_error_msg());
    cr_expect(p.n_series <= 16 && p.n_series >= 8, "%lld points", (long long)p.n_series);
    double acc[KV_CAT_COUNT] = {0}, T = 0;
    for (int64_t i = 0; i < p.n_series; i++) {
        for (int k = 0; k < KV_CAT_COUNT; k++) acc[k] += p.series[i].share[k] * p.series[i].dt_s;
        T += p.series[i].dt_s;
        if (i > 0) cr_expect_float_eq(p.series[i].t_s, p.series[i - 1].t_s + p.series[i - 1].dt_s, 1e-6);
    }
    cr_expect_float_eq(T, p.duration_s, 1e-6);
    for (int k = 0; k < KV_CAT_COUNT; k++) cr_expect_float_eq(acc[k] / T, p.share[k], 1e-9);
    cr_expect_eq(p.n_completed, 1000);
    record_kv_policy_clear(&p);
    sim_trace_free(&t);
}

Test(serving_sim, pool_too_small_is_a_clear_error) {
    /* prompt 30 + output 11 - 1 = 40 slots of KV; the pool holds 32 */
    sim_request r[2] = {{1, 0, 5, 5}, {7, 0, 30, 11}};
    sim_trace t = trace_of(r, 2);
    sim_config c = toy("paged:16", 32, 64);
    record_kv_policy p;
    cr_expect_eq(sim_run(&c, &t, &p), XF_EINVAL);
    cr_expect(strstr(xf_error_msg(), "request 7") != NULL, "%s", xf_error_msg());
    cr_expect(strstr(xf_error_msg(), "never") != NULL, "%s", xf_error_msg());
    cr_expect_null(p.series);
    /* reserve: a region of max_len 64 cannot fit 32 slots */
    c = toy("reserve", 32, 64);
    cr_expect_eq(sim_run(&c, &t, &p), XF_EINVAL);
    cr_expect(strstr(xf_error_msg(), "request 1") != NULL, "%s", xf_error_msg());
    /* less than one slot: refused by the pool */
    c = toy("oracle", 32, 64);
    c.kv.budget_bytes = 3;
    cr_expect_eq(sim_run(&c, &t, &p), XF_EINVAL);
    cr_expect(strstr(xf_error_msg(), "budget") != NULL, "%s", xf_error_msg());
    sim_trace_free(&t);
}

Test(serving_sim, bad_rates_and_distributions) {
    sim_dist d;
    sim_trace t;
    cr_assert_eq(sim_dist_parse("--prompt-dist", "fixed:10", &d), XF_OK);
    cr_expect_eq(sim_trace_generate(10, 0.0, &d, &d, 1, 100, &t), XF_EINVAL);
    cr_expect(strstr(xf_error_msg(), "positive") != NULL, "%s", xf_error_msg());
    cr_expect_eq(sim_trace_generate(10, -2.0, &d, &d, 1, 100, &t), XF_EINVAL);
    cr_expect_eq(sim_trace_generate(10, NAN, &d, &d, 1, 100, &t), XF_EINVAL);
    cr_expect_eq(sim_trace_generate(0, 1.0, &d, &d, 1, 100, &t), XF_EINVAL);
    cr_expect_null(t.req);
    const char *bad[] = {"", "fixed", "fixed:0", "fixed:1.5", "fixed:10:3", "uniform:5", "uniform:9:3", "normal:-1:2",
                         "lognormal:4:x", "lognormal:4:9", "zipf:1.1", "fixed:1e99"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(sim_dist_parse("--prompt-dist", bad[i], &d), XF_EINVAL, "'%s' accepted", bad[i]);
    cr_expect(strstr(xf_error_msg(), "--prompt-dist") != NULL);
    kv_policy pol;
    cr_expect_eq(kv_policy_parse("slab", &pol), XF_EINVAL);
    sim_preempt pre;
    cr_expect_eq(sim_preempt_parse("evict", &pre), XF_EINVAL);
    cr_expect_eq(sim_preempt_parse("wait", &pre), XF_OK);
    cr_expect_eq(pre, SIM_PREEMPT_WAIT);
}

Test(serving_sim, synthetic_traces) {
    sim_dist f, u;
    sim_trace t, t2;
    cr_assert_eq(sim_dist_parse("--p", "fixed:100", &f), XF_OK);
    cr_assert_eq(sim_dist_parse("--o", "uniform:1:10", &u), XF_OK);
    /* all at 0 with rate inf; lengths cut to max_len: prompt 100 -> 49, output -> 50 - 49 = 1 */
    cr_assert_eq(sim_trace_generate(5, INFINITY, &f, &u, 3, 50, &t), XF_OK);
    for (int i = 0; i < 5; i++) {
        cr_expect_eq(t.req[i].arrival_s, 0.0);
        cr_expect_eq(t.req[i].prompt, 49);
        cr_expect_eq(t.req[i].output, 1);
    }
    sim_trace_free(&t);
    /* Poisson: the same seed gives the same trace; mean gap about 1/rate */
    cr_assert_eq(sim_trace_generate(20000, 4.0, &f, &u, 9, 1000, &t), XF_OK);
    cr_assert_eq(sim_trace_generate(20000, 4.0, &f, &u, 9, 1000, &t2), XF_OK);
    cr_expect(memcmp(t.req, t2.req, 20000 * sizeof *t.req) == 0);
    double gap = t.req[19999].arrival_s / 19999;
    cr_expect(fabs(gap - 0.25) < 0.01, "mean gap %g", gap);
    int64_t lo = 100, hi = 0;
    double mean = 0;
    for (int i = 0; i < 20000; i++) {
        if (t.req[i].output < lo) lo = t.req[i].output;
        if (t.req[i].output > hi) hi = t.req[i].output;
        mean += (double)t.req[i].output / 20000;
    }
    cr_expect_eq(lo, 1);
    cr_expect_eq(hi, 10);
    cr_expect(fabs(mean - 5.5) < 0.1, "uniform mean %g", mean);
    sim_trace_free(&t);
    sim_trace_free(&t2);
    /* lognormal: median e^MU */
    sim_dist ln;
    cr_assert_eq(sim_dist_parse("--p", "lognormal:5:0.5", &ln), XF_OK);
    sim_rng r;
    sim_rng_seed(&r, 5);
    int below = 0;
    for (int i = 0; i < 20000; i++) below += sim_dist_sample(&ln, &r) < 148; /* e^5 = 148.4 */
    cr_expect(below > 9600 && below < 10400, "%d of 20000 below the median", below);
}

Test(serving_sim, rng_is_xoshiro256ss) {
    /* splitmix64(42) seeding, xoshiro256**; first outputs from an independent Python model */
    sim_rng r;
    sim_rng_seed(&r, 42);
    cr_expect_eq(sim_rng_next(&r), 0x15780b2e0c2ec716ull);
    cr_expect_eq(sim_rng_next(&r), 0x6104d9866d113a7eull);
    cr_expect_eq(sim_rng_next(&r), 0xae17533239e499a1ull);
}

Test(serving_sim, trace_files) {
    sim_trace t;
    const char *csv = "arrival_s,prompt,output\n"
                      "# comment\n"
                      "0.5, 10, 20\n"
                      "\n"
                      "0.25,5,1\n";
    cr_assert_eq(sim_trace_parse(csv, "t.csv", 100, &t), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(t.n, 2);
    /* sorted by arrival; ids are line numbers */
    cr_expect_eq(t.req[0].id, 5);
    cr_expect_eq(t.req[0].prompt, 5);
    cr_expect_eq(t.req[1].id, 3);
    cr_expect_eq(t.req[1].output, 20);
    sim_trace_free(&t);
    const char *jsonl = "{\"arrival\": 1.5, \"prompt\": 7, \"output\": 3}\n{\"arrival\":0,\"prompt\":1,\"output\":1}\n";
    cr_assert_eq(sim_trace_parse(jsonl, "t.jsonl", 100, &t), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(t.n, 2);
    cr_expect_eq(t.req[1].prompt, 7);
    sim_trace_free(&t);

    struct {
        const char *text;
        const char *where;
    } bad[] = {
        {"0,10,20\n1,abc,3\n", "t:2:"},
        {"0,10,20\n\n1,10\n", "t:3:"},
        {"0,10,20,4\n", "t:1:"},
        {"-1,10,20\n", "t:1:"},
        {"0,0,20\n", "t:1:"},
        {"0,10,0\n", "t:1:"},
        {"0,10.5,3\n", "t:1:"},
        {"0,60,50\n", "t:1:"}, /* 110 > max_len 100 */
        {"nan,1,1\n", "t:1:"},
        {"time,len\n0,1,1\n", "t:1:"},
        {"{\"arrival\":0,\"prompt\":1}\n", "t:1:"},
        {"0,1,1\n{\"arrival\":0,\"prompt\":\"x\",\"output\":1}\n", "t:2:"},
        {"0,1,1\n{\"arrival\":0,\n", "t:2:"},
        {"# only comments\n\n", "no requests"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        xf_status s = sim_trace_parse(bad[i].text, "t", 100, &t);
        cr_expect(s == XF_EPARSE || s == XF_EINVAL, "case %zu accepted", i);
        cr_expect(strstr(xf_error_msg(), bad[i].where) != NULL, "case %zu: '%s' does not name '%s'", i, xf_error_msg(), bad[i].where);
        cr_expect_null(t.req);
    }
    cr_expect_eq(sim_trace_load("/nonexistent/trace.csv", 100, &t), XF_EIO);
}

Test(serving_sim, cost_model_step_time_is_exact) {
    model_config cfg;
    device_spec dev;
    workload w;
    cr_assert_eq(config_preset("llama-2-7b", &cfg), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(device_lookup("h100-sxm", NULL, &dev), XF_OK, "%s", xf_error_msg());
    workload_default(&w);
    sim_cost *c;
    cr_assert_eq(sim_cost_init(&c, &cfg, &w, &dev), XF_OK, "%s", xf_error_msg());
    double err = sim_cost_max_error(c, 300, 256, 4096, 1);
    cr_expect(err < 1e-12, "folded step time differs from cost_step by %g", err);
    /* a decode step of 8 at context 100 each, and a prefill of 2 prompts of 50: the folded model
     * against the exact sum over every op */
    sim_step s = {2, 100, 2 * 50.0 * 51 / 2, 8, 800};
    double a = sim_cost_step_time(c, &s), e = sim_cost_step_time_exact(c, &s);
    cr_expect(e > 0);
    cr_expect_float_eq(a, e, 1e-12 * e);
    /* decode at batch 8 is weight-bandwidth bound: at least the weights over the bandwidth
     * (about 13.5 GB / 3.35 TB/s = 4 ms) */
    sim_step d = {0, 0, 0, 8, 800};
    double td = sim_cost_step_time(c, &d);
    cr_expect(td > 13.4e9 / dev.bandwidth_Bps && td < 2 * 13.6e9 / dev.bandwidth_Bps, "decode step %g s", td);
    /* more tokens than the vocabulary: evaluated exactly */
    sim_step big = {20, 40000, 20 * 2000.0 * 2001 / 2, 0, 0};
    cr_expect_float_eq(sim_cost_step_time(c, &big), sim_cost_step_time_exact(c, &big), 1e-12);
    sim_cost_free(c);
}

/* ---- the record's kv section as JSON ---- */
#include "reports/record_kv_json.h"

static record_kv *small_section(void) {
    sim_request r[3] = {{1, 0, 4, 1}, {2, 0, 4, 3}, {3, 0, 5, 1}};
    sim_trace t = trace_of(r, 3);
    record_kv *kv = calloc(1, sizeof *kv);
    cr_assert(kv);
    kv->policies = calloc(2, sizeof *kv->policies);
    cr_assert(kv->policies);
    kv->budget_bytes = 48;
    kv->bytes_per_token = 4;
    strcpy(kv->kvdtype, "fp16");
    kv->max_len = 64;
    strcpy(kv->arrivals, "trace");
    kv->n_requests = 3;
    strcpy(kv->trace_file, "t.csv");
    strcpy(kv->preempt, "recompute");
    strcpy(kv->step_model, "1 s per step");
    sim_config c = toy("oracle", 12, 64);
    cr_assert_eq(sim_run(&c, &t, &kv->policies[0]), XF_OK, "%s", xf_error_msg());
    c = toy("paged:4", 12, 64);
    cr_assert_eq(sim_run(&c, &t, &kv->policies[1]), XF_OK, "%s", xf_error_msg());
    kv->n_policies = 2;
    sim_trace_free(&t);
    return kv;
}

static xf_status reparse(const char *text, record_kv **out) {
    cJSON *j = cJSON_Parse(text);
    cr_assert(j, "test JSON does not parse");
    xf_status s = record_kv_from_json(j, "record.kv", out);
    cJSON_Delete(j);
    return s;
}

Test(record_kv_json, round_trip) {
    record_kv *kv = small_section();
    cJSON *j = record_kv_to_json(kv);
    cr_assert(j);
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    record_kv *back = NULL;
    cr_assert_eq(reparse(text, &back), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(back->n_policies, 2);
    cr_expect_str_eq(back->arrivals, "trace");
    cr_expect_str_eq(back->trace_file, "t.csv");
    for (int i = 0; i < 2; i++) {
        const record_kv_policy *a = &kv->policies[i], *b = &back->policies[i];
        cr_expect_str_eq(a->policy, b->policy);
        for (int c = 0; c < KV_CAT_COUNT; c++) {
            cr_expect_eq(a->share[c], b->share[c]);
            cr_expect_eq(a->bytes[c], b->bytes[c]);
        }
        cr_expect_eq(a->n_slots, b->n_slots);
        cr_expect_eq(a->n_steps, b->n_steps);
        cr_expect_eq(a->tokens_per_s, b->tokens_per_s);
        for (int k = 0; k < RECORD_KV_PCT_COUNT; k++) cr_expect_eq(a->ttft_s[k], b->ttft_s[k]);
        cr_assert_eq(a->n_series, b->n_series);
        for (int64_t k = 0; k < a->n_series; k++) {
            cr_expect_eq(a->series[k].t_s, b->series[k].t_s);
            cr_expect_eq(a->series[k].share[KV_CAT_EXTERNAL], b->series[k].share[KV_CAT_EXTERNAL]);
            cr_expect_eq(a->series[k].live, b->series[k].live);
        }
        cr_assert_eq(a->n_requests_kept, b->n_requests_kept);
        for (int64_t k = 0; k < a->n_requests_kept; k++) cr_expect_eq(a->req_tpot_s[k], b->req_tpot_s[k]);
    }
    /* Written twice, the same text. */
    cJSON *j2 = record_kv_to_json(back);
    char *text2 = cJSON_PrintUnformatted(j2);
    cr_expect_str_eq(text, text2);
    cJSON_Delete(j2);
    free(text2);
    free(text);
    record_kv_free(back);
    record_kv_free(kv);
}

/* Replaces the first occurrence of `from` in `text` by `to` (test helper). */
static char *subst(const char *text, const char *from, const char *to) {
    const char *at = strstr(text, from);
    cr_assert(at, "'%s' not in the JSON", from);
    size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    cr_assert(out);
    size_t pre = (size_t)(at - text);
    memcpy(out, text, pre);
    strcpy(out + pre, to);
    strcat(out, at + strlen(from));
    return out;
}

Test(record_kv_json, rejects_bad_fields) {
    record_kv *kv = small_section();
    cJSON *j = record_kv_to_json(kv);
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    struct {
        const char *from, *to, *msg;
    } cases[] = {
        {"\"token_states\":", "\"token_states_x\":", "token_states"},
        {"\"policies\":[", "\"policies\":5,\"x\":[", "policies"},
        {"\"seed\":0", "\"seed\":-1", "seed"},
        {"\"seed\":0", "\"seed\":1e300", "seed"},
        {"\"arrivals\":\"trace\"", "\"arrivals\":\"gamma\"", "arrivals"},
        {"\"preempt\":\"recompute\"", "\"preempt\":\"drop\"", "preempt"},
        {"\"n_slots\":12", "\"n_slots\":\"12\"", "n_slots"},
        {"\"dt_s\":[", "\"dt_s\":[1,", "dt_s"},
        {"\"max_live\":", "\"max_live\":-", "max_live"},
        {"\"bytes_per_token\":4", "\"bytes_per_token\":0", "bytes_per_token"},
        {"\"p90\":", "\"p90\":-", "p90"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *bad = subst(text, cases[i].from, cases[i].to);
        record_kv *out = NULL;
        xf_status s = reparse(bad, &out);
        cr_expect_neq(s, XF_OK, "case %zu accepted", i);
        cr_expect(strstr(xf_error_msg(), cases[i].msg) != NULL, "case %zu: '%s' does not name '%s'", i, xf_error_msg(), cases[i].msg);
        record_kv_free(out);
        free(bad);
    }
    /* shares that do not add up to 1 */
    char *bad = subst(text, "\"free\":", "\"free\":0.5,\"free_was\":");
    record_kv *out = NULL;
    cr_expect_neq(reparse(bad, &out), XF_OK);
    record_kv_free(out);
    free(bad);
    free(text);
    record_kv_free(kv);
}

Test(serving_sim, vllm_paper_shape) {
    /* LLaMA-2-13B fp16 on an A100-40GB, ShareGPT-like lengths, 1000 requests at once: reserving
     * per request keeps well under half the pool in token states, 16-token pages over 90%
     * (Kwon et al., SOSP 2023, Fig. 2: 20-38% and 96%). */
    model_config cfg;
    device_spec dev;
    workload w;
    cr_assert_eq(config_preset("llama-2-13b", &cfg), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(device_lookup("a100-40gb", NULL, &dev), XF_OK, "%s", xf_error_msg());
    workload_default(&w);
    w.wdtype = w.adtype = w.kvdtype = XF_FP16;
    sim_cost *cost;
    cr_assert_eq(sim_cost_init(&cost, &cfg, &w, &dev), XF_OK, "%s", xf_error_msg());
    double budget = kv_default_budget(&cfg, &w, &dev, 2048);
    /* 40 GiB - 26.0 GB of weights - activations: about 16.7 GB */
    cr_expect(budget > 15e9 && budget < 17.5e9, "budget %g", budget);
    sim_dist pd, od;
    cr_assert_eq(sim_dist_parse("p", "lognormal:4.7:0.9", &pd), XF_OK);
    cr_assert_eq(sim_dist_parse("o", "lognormal:5.5:0.8", &od), XF_OK);
    sim_trace t;
    cr_assert_eq(sim_trace_generate(1000, INFINITY, &pd, &od, 42, 2048, &t), XF_OK);
    const char *pols[3] = {"reserve", "oracle", "paged:16"};
    double tok[3];
    for (int i = 0; i < 3; i++) {
        sim_config c;
        memset(&c, 0, sizeof c);
        c.kv.n_layers = cfg.n_layers;
        c.kv.n_kv_heads = cfg.n_kv_heads;
        c.kv.head_dim = cfg.head_dim;
        c.kv.dtype = XF_FP16;
        c.kv.budget_bytes = (int64_t)budget;
        cr_assert_eq(kv_policy_parse(pols[i], &c.kv.policy), XF_OK);
        c.max_len = 2048;
        c.step_time = sim_cost_step_time;
        c.step_ctx = cost;
        record_kv_policy p;
        cr_assert_eq(sim_run(&c, &t, &p), XF_OK, "%s", xf_error_msg());
        cr_expect_eq(p.n_completed, 1000);
        tok[i] = p.share[KV_CAT_TOKEN];
        record_kv_policy_clear(&p);
    }
    cr_expect(tok[0] < 0.4, "reserve keeps %.3f in token states", tok[0]);
    cr_expect(tok[1] < 0.6, "oracle keeps %.3f in token states", tok[1]);
    cr_expect(tok[2] > 0.9, "paged:16 keeps %.3f in token states", tok[2]);
    sim_trace_free(&t);
    sim_cost_free(cost);
}

/* The shares of held memory (pool minus free) follow from the pool's, and sum to 1 over the four
 * held categories; an all-free pool holds nothing. */
Test(serving_sim, held_shares_of_the_pool_minus_free) {
    record_kv_policy p;
    memset(&p, 0, sizeof p);
    p.share[KV_CAT_TOKEN] = 0.30;
    p.share[KV_CAT_RESERVED] = 0.10;
    p.share[KV_CAT_INTERNAL] = 0.05;
    p.share[KV_CAT_EXTERNAL] = 0.05;
    p.share[KV_CAT_FREE] = 0.50;
    double held[KV_CAT_COUNT];
    cr_assert_float_eq(kv_held_shares(&p, held), 0.50, 1e-12);
    cr_assert_float_eq(held[KV_CAT_TOKEN], 0.60, 1e-12);
    cr_assert_float_eq(held[KV_CAT_RESERVED], 0.20, 1e-12);
    cr_assert_float_eq(held[KV_CAT_INTERNAL], 0.10, 1e-12);
    cr_assert_float_eq(held[KV_CAT_EXTERNAL], 0.10, 1e-12);
    cr_assert_eq(held[KV_CAT_FREE], 0.0);
    memset(&p, 0, sizeof p);
    p.share[KV_CAT_FREE] = 1.0;
    cr_assert_eq(kv_held_shares(&p, held), 0.0);
    cr_assert_eq(held[KV_CAT_TOKEN], 0.0);
}

/* ---- sliding windows and latent attention ---- */

/* Every layer windowed (window 3), paged:2, a pool of 2 blocks: a request of prompt 4 and output 5
 * reaches 8 positions but never holds more than 2 blocks. After admission the next query (4)
 * sees 2..4: block 0 is released. Step by step (held = live blocks * 2; reserved = positions
 * still to write within them):
 *   1 prefill  len 4: blocks {1}     tok 2 (2, 3)  res 0  free 2
 *   2 decode   len 5: blocks {1, 2}  tok 3 (2..4)  res 1  free 0
 *   3 decode   len 6: blocks {2}     tok 2 (4, 5)  res 0  free 2
 *   4 decode   len 7: blocks {2, 3}  tok 3 (4..6)  res 1  free 0
 *   5 decode   len 8: blocks {3}     tok 2 (6, 7)  res 0  free 2
 * time-averaged over 5 s of a 4-slot pool: tok 12/20, res 2/20, free 6/20. */
Test(serving_sim, window_paged_frees_out_of_window_blocks) {
    sim_request r[1] = {{1, 0, 4, 5}};
    sim_trace t = trace_of(r, 1);
    sim_config c = toy("paged:2", 4, 64);
    record_kv_policy p;
    cr_expect_eq(sim_run(&c, &t, &p), XF_EINVAL, "8 positions in a 4-slot pool without the window");
    cr_expect(strstr(xf_error_msg(), "can never run"), "%s", xf_error_msg());
    c.kv.window = 3;
    cr_assert_eq(sim_run(&c, &t, &p), XF_OK, "%s", xf_error_msg());
    cr_expect_eq(p.n_steps, 5);
    cr_expect_eq(p.n_completed, 1);
    cr_expect_float_eq(p.share[KV_CAT_TOKEN], 12.0 / 20, EPS);
    cr_expect_float_eq(p.share[KV_CAT_RESERVED], 2.0 / 20, EPS);
    cr_expect_float_eq(p.share[KV_CAT_INTERNAL], 0.0, EPS);
    cr_expect_float_eq(p.share[KV_CAT_FREE], 6.0 / 20, EPS);
    cr_expect_eq(p.n_groups, 1);
    cr_expect_eq(p.groups[0].window, 3);
    cr_expect_float_eq(p.groups[0].share[KV_CAT_TOKEN], 12.0 / 20, EPS);
    cr_expect_eq(p.preemptions, 0);
    record_kv_policy_clear(&p);
    sim_trace_free(&t);
}

/* Two layer groups: a full-attention pool of 10 slots and a windowed one (window 2) of 4, oracle.
 * Prompt 2, output 3: final 4. The full layers hold 4 slots, the windowed ones a ring of 2:
 *   step 1 len 2: full tok 2 res 2 | window tok 2 res 0
 *   step 2 len 3: full tok 3 res 1 | window tok 2
 *   step 3 len 4: full tok 4 res 0 | window tok 2
 * per group over 3 s: full tok 9/30, res 3/30, free 18/30; window tok 6/12, free 6/12. The whole,
 * byte-weighted over 40 + 16 B: tok (16 + 20 + 24) / 3 / 56, res (8 + 4 + 0) / 3 / 56. */
Test(serving_sim, two_layer_groups) {
    sim_request r[1] = {{1, 0, 2, 3}};
    sim_trace t = trace_of(r, 1);
    sim_config c = toy("oracle", 10, 64);
    c.kv_window = c.kv;
    c.kv_window.budget_bytes = 4 * 4;
    c.kv_window.window = 2;
    record_kv_policy p;
    cr_assert_eq(sim_run(&c, &t, &p), XF_OK, "%s", xf_error_msg());
    cr_expect_eq(p.n_groups, 2);
    cr_expect_eq(p.n_slots, 10);
    cr_expect_float_eq(p.pool_bytes, 56.0, EPS);
    cr_expect_float_eq(p.groups[0].share[KV_CAT_TOKEN], 9.0 / 30, EPS);
    cr_expect_float_eq(p.groups[0].share[KV_CAT_RESERVED], 3.0 / 30, EPS);
    cr_expect_float_eq(p.groups[0].share[KV_CAT_FREE], 18.0 / 30, EPS);
    cr_expect_float_eq(p.groups[1].share[KV_CAT_TOKEN], 6.0 / 12, EPS);
    cr_expect_float_eq(p.groups[1].share[KV_CAT_FREE], 6.0 / 12, EPS);
    cr_expect_eq(p.groups[1].window, 2);
    cr_expect_float_eq(p.share[KV_CAT_TOKEN], 60.0 / 3 / 56, EPS);
    cr_expect_float_eq(p.share[KV_CAT_RESERVED], 12.0 / 3 / 56, EPS);
    record_kv_policy_clear(&p);
    /* the windowed pool must have a window and the same policy */
    c.kv_window.window = 0;
    cr_expect_eq(sim_run(&c, &t, &p), XF_EINVAL);
    sim_trace_free(&t);
}

Test(serving_sim, pools_of_models) {
    kv_policy pol;
    cr_assert_eq(kv_policy_parse("paged:16", &pol), XF_OK);
    sim_config sc;
    memset(&sc, 0, sizeof sc);
    /* a dense model: one pool, every layer */
    model_config m;
    cr_assert_eq(config_preset("llama-2-7b", &m), XF_OK);
    cr_assert_eq(sim_pools_of_model(&m, XF_FP16, 1 << 30, pol, 4096, &sc), XF_OK, "%s", xf_error_msg());
    cr_expect_eq(sc.kv.n_layers, 32);
    cr_expect_eq(sc.kv.window, 0);
    cr_expect_eq(sc.kv_window.n_layers, 0);
    cr_expect_eq(sim_bytes_per_token(&m, XF_FP16), 524288);
    /* mistral: every layer windowed at 4096: one pool with the window; a sequence at 8192 holds 4096 */
    cr_assert_eq(config_preset("mistral-7b", &m), XF_OK);
    cr_assert_eq(sim_pools_of_model(&m, XF_FP16, 1 << 30, pol, 32768, &sc), XF_OK);
    cr_expect_eq(sc.kv.window, 4096);
    cr_expect_eq(sc.kv_window.n_layers, 0);
    cr_expect_float_eq(sim_kv_bytes_at(&m, XF_FP16, 8192), 131072.0 * 4096, 0);
    cr_expect_float_eq(sim_kv_bytes_at(&m, XF_FP16, 1000), 131072.0 * 1000, 0);
    /* mixed: 3 full layers and 1 windowed at 16, max_len 64: the budget splits 3 * 64 : 1 * 16 */
    m.n_layers = 4;
    memset(m.window_layers, 0, sizeof m.window_layers);
    m.window_layers[0] = 1u << 3;
    m.sliding_window = 16;
    cr_assert_eq(config_validate(&m), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(sim_pools_of_model(&m, XF_FP16, 208000, pol, 64, &sc), XF_OK);
    cr_expect_eq(sc.kv.n_layers, 3);
    cr_expect_eq(sc.kv.window, 0);
    cr_expect_eq(sc.kv.budget_bytes, 192000);
    cr_expect_eq(sc.kv_window.n_layers, 1);
    cr_expect_eq(sc.kv_window.window, 16);
    cr_expect_eq(sc.kv_window.budget_bytes, 16000);
    /* per layer 2 * 8 heads * 128 * 2 B = 4096: at context 100, 3 layers hold 100, one 16 */
    cr_expect_float_eq(sim_kv_bytes_at(&m, XF_FP16, 100), 4096.0 * (3 * 100 + 16), 0);
    /* DeepSeek-V3: one latent row (512 + 64) per layer */
    cr_assert_eq(config_preset("deepseek-v3", &m), XF_OK);
    cr_assert_eq(sim_pools_of_model(&m, XF_BF16, 1 << 30, pol, 4096, &sc), XF_OK);
    cr_expect_eq(sc.kv.latent_dim, 576);
    cr_expect_eq(sc.kv.n_layers, 61);
    cr_expect_eq(sim_bytes_per_token(&m, XF_BF16), 70272);
    cr_expect_eq(sim_pools_of_model(&m, XF_BF16, 0, pol, 4096, &sc), XF_EINVAL);
}

/* MLA's small cache drives capacity: the same budget holds 61 * 576 elements per token, not the
 * 2 * 61 * 128 * 128 that K and V of every head would take. */
Test(serving_sim, latent_pool_capacity) {
    model_config m;
    cr_assert_eq(config_preset("deepseek-v3", &m), XF_OK);
    kv_policy pol;
    cr_assert_eq(kv_policy_parse("oracle", &pol), XF_OK);
    sim_config sc;
    memset(&sc, 0, sizeof sc);
    cr_assert_eq(sim_pools_of_model(&m, XF_BF16, INT64_C(70272) * 1000, pol, 100, &sc), XF_OK);
    sc.max_len = 100;
    sc.step_time = one_second;
    /* 20 requests of 50 tokens at once: all fit in 1000 slots */
    sim_request r[20];
    for (int i = 0; i < 20; i++) r[i] = (sim_request){i + 1, 0, 30, 21};
    sim_trace t = trace_of(r, 20);
    record_kv_policy p;
    cr_assert_eq(sim_run(&sc, &t, &p), XF_OK, "%s", xf_error_msg());
    cr_expect_eq(p.n_slots, 1000);
    cr_expect_float_eq(p.pool_bytes, 70272.0 * 1000, 0);
    cr_expect_eq(p.max_live, 20);
    record_kv_policy_clear(&p);
    sim_trace_free(&t);
}

/* The layer groups survive the JSON; a record without them reads as before; bad ones are refused. */
Test(record_kv_json, layer_groups_round_trip) {
    record_kv *kv = small_section();
    record_kv_policy *p = &kv->policies[0];
    p->n_groups = 2;
    p->groups[0] = (record_kv_group){3, 0, 100, 1200, {0.25, 0.25, 0, 0, 0.5}};
    p->groups[1] = (record_kv_group){1, 16, 40, 160, {0.75, 0, 0, 0, 0.25}};
    cJSON *j = record_kv_to_json(kv);
    cr_assert(j);
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    cr_assert(strstr(text, "\"groups\":[{\"n_layers\":3,\"window\":0,"), "%s", text);
    record_kv *back = NULL;
    cr_assert_eq(reparse(text, &back), XF_OK, "%s", xf_error_msg());
    const record_kv_policy *b = &back->policies[0];
    cr_assert_eq(b->n_groups, 2);
    cr_expect_eq(b->groups[1].window, 16);
    cr_expect_eq(b->groups[1].n_slots, 40);
    cr_expect_eq(b->groups[1].share[KV_CAT_TOKEN], 0.75);
    cr_expect_eq(back->policies[1].n_groups, 0, "the other policy has none");
    record_kv_free(back);
    char *bad = subst(text, "\"token_states\":0.75", "\"token_states\":0.5");
    cr_expect_neq(reparse(bad, &back), XF_OK, "shares not adding up to 1 are refused");
    cr_expect(strstr(xf_error_msg(), "groups[1]"), "%s", xf_error_msg());
    record_kv_free(back);
    free(bad);
    free(text);
    record_kv_free(kv);
}
