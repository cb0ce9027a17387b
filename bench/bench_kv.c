/* bench_kv: the serving simulator's speed (100,000 requests per policy, the target is under 2 s
 * on one core) and the paged manager's grow cost per operation at 10^3 and 10^6 live blocks
 * (O(1) amortized: the two figures should be close). Prints wall and CPU time: on a shared
 * machine the CPU time is the one to read.
 * Usage: bench_kv [n_requests] (default 100000). Needs the data files (XFPROF_DATA_DIR). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyzers/kv.h"
#include "core/device.h"
#include "reference_model/config.h"
#include "reference_model/kv_cache.h"
#include "reference_model/serving_sim.h"
#include "bench_util.h"

static double now(clockid_t c) { return bench_clock_s(c); }

static int die(const char *what) { return bench_die("bench_kv", what, 1); }

/* Steady churn at about `live_blocks` blocks: sequences grow one token at a time, round robin;
 * one that reaches 20 blocks is freed and a new one admitted with a one-block prompt. Returns
 * seconds (wall, cpu) per append over `ops` appends. */
static int grow_bench(int64_t live_blocks, int64_t ops, double *wall_per_op, double *cpu_per_op, int64_t *blocks_seen) {
    const int64_t B = 16, target = 20 * B;
    int64_t n_seqs = live_blocks / 10; /* lengths spread over 1..20 blocks: about 10 blocks each */
    kv_cache_config c = {.n_layers = 1, .n_kv_heads = 1, .head_dim = 1, .dtype = XF_FP16, .max_len = 0};
    c.policy.kind = KV_POLICY_PAGED;
    c.policy.block = B;
    c.budget_bytes = 4 * B * (live_blocks * 3 + 64); /* 4-byte slots, room to spare */
    kv_cache *kv;
    if (kv_cache_init(&kv, &c) != XF_OK) return die("kv_cache_init");
    int *ids = malloc((size_t)n_seqs * sizeof *ids);
    if (!ids) return die("malloc");
    for (int64_t i = 0; i < n_seqs; i++) {
        int64_t len = 1 + (i * (target - 1)) / n_seqs; /* staggered, so sequences finish at different times */
        if (kv_cache_add_seq(kv, len, target, 0, &ids[i]) != XF_OK) return die("add");
    }
    kv_cache_stats st;
    kv_cache_stats_get(kv, 0, &st);
    *blocks_seen = (st.n_slots - st.free_slots) / B;
    double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
    int64_t k = 0;
    for (int64_t op = 0; op < ops; op++) {
        int id = ids[k];
        if (kv_cache_append(kv, id, 1) != XF_OK) return die("append");
        if (kv_cache_seq_len(kv, id) >= target) {
            kv_cache_free_seq(kv, id);
            if (kv_cache_add_seq(kv, B, target, 0, &ids[k]) != XF_OK) return die("re-add");
        }
        if (++k == n_seqs) k = 0;
    }
    double w1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_PROCESS_CPUTIME_ID);
    *wall_per_op = (w1 - w0) / (double)ops;
    *cpu_per_op = (c1 - c0) / (double)ops;
    if (kv_cache_check(kv) != XF_OK) return die("invariants after the churn");
    free(ids);
    kv_cache_free(kv);
    return 0;
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 100000;
    if (n < 1) n = 100000;
    model_config cfg;
    device_spec dev;
    workload w;
    if (config_preset("llama-2-13b", &cfg) != XF_OK) return die("config");
    if (device_lookup("a100-40gb", NULL, &dev) != XF_OK) return die("device");
    workload_default(&w);
    w.wdtype = w.adtype = w.kvdtype = XF_FP16;
    sim_cost *cost;
    if (sim_cost_init(&cost, &cfg, &w, &dev) != XF_OK) return die("sim_cost_init");
    int64_t max_len = cfg.max_ctx;
    double budget = kv_default_budget(&cfg, &w, &dev, max_len);
    double err = sim_cost_max_error(cost, 2000, 256, max_len, 1);
    printf("bench_kv: llama-2-13b on a100-40gb, fp16, KV budget %.3f GB, max length %lld\n", budget / 1e9, (long long)max_len);
    printf("step-time model: largest relative difference from cost_step over 2000 random steps: %.2e\n", err);

    sim_dist pd, od;
    sim_dist_parse("p", "lognormal:4.7:0.9", &pd);
    sim_dist_parse("o", "lognormal:5.5:0.8", &od);
    const double rates[2] = {INFINITY, 3.0};
    const char *pols[] = {"reserve", "pow2", "oracle", "paged:16", "paged:64"};
    for (int ri = 0; ri < 2; ri++) {
        sim_trace tr;
        if (sim_trace_generate(n, rates[ri], &pd, &od, 42, max_len, &tr) != XF_OK) return die("trace");
        printf("\n%lld requests, %s, ShareGPT-like lengths (lognormal:4.7:0.9 / lognormal:5.5:0.8), seed 42\n", (long long)n,
               isfinite(rates[ri]) ? "Poisson 3/s" : "all at t=0");
        printf("%-9s %10s %10s %12s %10s %8s %8s %10s %s\n", "policy", "wall_s", "cpu_s", "steps", "preempt", "token%", "free%", "tokens/s",
               "under 2 s (cpu)");
        for (int i = 0; i < 5; i++) {
            sim_config sc;
            memset(&sc, 0, sizeof sc);
            sc.kv.n_layers = cfg.n_layers;
            sc.kv.n_kv_heads = cfg.n_kv_heads;
            sc.kv.head_dim = cfg.head_dim;
            sc.kv.dtype = XF_FP16;
            sc.kv.budget_bytes = (int64_t)budget;
            kv_policy_parse(pols[i], &sc.kv.policy);
            sc.max_len = max_len;
            sc.step_time = sim_cost_step_time;
            sc.step_ctx = cost;
            record_kv_policy out;
            double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
            if (sim_run(&sc, &tr, &out) != XF_OK) return die(pols[i]);
            double w1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_PROCESS_CPUTIME_ID);
            printf("%-9s %10.3f %10.3f %12lld %10lld %8.1f %8.1f %10.1f %s\n", out.policy, w1 - w0, c1 - c0, (long long)out.n_steps,
                   (long long)out.preemptions, 100 * out.share[KV_CAT_TOKEN], 100 * out.share[KV_CAT_FREE], out.tokens_per_s,
                   c1 - c0 < 2.0 ? "yes" : "NO");
            record_kv_policy_clear(&out);
        }
        sim_trace_free(&tr);
    }
    sim_cost_free(cost);

    printf("\npaged:16 grow (append one token; a new block every 16; finished sequences freed and replaced)\n");
    printf("%14s %14s %14s %14s\n", "live blocks", "appends", "wall ns/op", "cpu ns/op");
    const int64_t sizes[2] = {1000, 1000000};
    for (int i = 0; i < 2; i++) {
        double wp = 0, cp = 0;
        int64_t seen = 0;
        int64_t ops = 4000000;
        if (grow_bench(sizes[i], ops, &wp, &cp, &seen)) return 1;
        printf("%14lld %14lld %14.1f %14.1f\n", (long long)seen, (long long)ops, wp * 1e9, cp * 1e9);
    }
    return 0;
}
