/* The whole model on the GPU against the CPU backend: bf16 weights from the same seed, FP32
 * accumulation. Teacher-forced: the GPU is fed the CPU's greedy tokens, so one flipped argmax
 * (the GPU rounds GEMM inputs to bf16, the CPU keeps activations in fp32) cannot make the rest
 * diverge; every step's logits must agree within 5e-2 of max(1, max |logit|), and the tokens only
 * where the CPU's top-2 gap is more than twice that (cuda_check_logits). Also --kv-alloc system
 * gives the pool's tokens, and CUDA graph replay gives op-by-op's tokens and logits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_common.h"
#include "reference_model/cuda_check.h"
#include "reference_model/model.h"

enum { NSEQ = 2, PROMPT = 12, GEN = 8 };
#define TOL_BF16 5e-2
#define TOL_SAME 1e-5 /* the same kernels on the same inputs: graph replay, system allocator */

/* Runs prefill and GEN - 1 decode steps; `forced` (GEN, NSEQ) feeds forced[g-1] at step g (NULL:
 * greedy). tokens (NSEQ, GEN) and logits (GEN, NSEQ, vocab) receive every step's results. */
static void run_model(const char *backend, kv_alloc_mode alloc, int graph, const int32_t *forced, int32_t *tokens,
                      float *logits, int64_t vocab) {
    model_config cfg;
    cr_assert_eq(config_preset("stories15m", &cfg), XF_OK, "%s", xf_error_msg());
    model_options o;
    model_options_default(&o);
    o.seed = 11;
    o.wdtype = XF_BF16;
    o.kvdtype = XF_FP16;
    o.backend = backend;
    o.kv_alloc = alloc;
    o.threads = 2;
    o.max_seqs = NSEQ;
    o.max_prompt = PROMPT;
    o.max_seq_len = PROMPT + GEN + 1;
    model *m = NULL;
    cr_assert_eq(model_init(&m, &cfg, &o), XF_OK, "%s: %s", backend, xf_error_msg());
    if (graph) cuda_backend_set_graph(model_backend_ctx(m), 1);
    int32_t prompts[NSEQ * PROMPT];
    for (int i = 0; i < NSEQ * PROMPT; i++) prompts[i] = (int32_t)((i * 7919 + 13) % cfg.vocab);
    int64_t lens[NSEQ] = {PROMPT, PROMPT - 4};
    for (int g = 0; g < GEN; g++) {
        if (g == 0) cr_assert_eq(model_prefill(m, NSEQ, prompts, lens, NULL), XF_OK, "%s", xf_error_msg());
        else cr_assert_eq(model_decode_step(m, forced ? forced + (g - 1) * NSEQ : NULL, NULL), XF_OK, "step %d: %s", g, xf_error_msg());
        int64_t ns, v;
        const float *lg = model_logits(m, &ns, &v);
        cr_assert_eq(v, vocab);
        cr_assert_eq(ns, NSEQ);
        memcpy(logits + (size_t)g * NSEQ * vocab, lg, sizeof(float) * (size_t)(NSEQ * vocab));
    }
    for (int s = 0; s < NSEQ; s++) {
        int64_t n;
        const int32_t *t = model_tokens(m, s, &n);
        cr_assert_eq(n, GEN);
        memcpy(tokens + s * GEN, t, sizeof(int32_t) * GEN);
    }
    model_free(m);
}

/* Every step of every sequence, a against b (the reference); the summary line on failure. */
static void compare_steps(const float *a, const float *b, int64_t V, double tol, const char *what) {
    cuda_check_summary sm;
    cuda_check_summary_init(&sm);
    for (int i = 0; i < GEN * NSEQ; i++) {
        cuda_check_step st;
        cr_assert_eq(cuda_check_logits(a + (size_t)i * V, b + (size_t)i * V, V, tol, &st), XF_OK, "%s: %s", what, xf_error_msg());
        cuda_check_summary_add(&sm, &st);
    }
    char line[256];
    cuda_check_summary_line(&sm, tol, line, sizeof line);
    cr_log_info("%s: %s", what, line);
    cr_assert_eq(sm.failures, 0, "%s: %s (steps counted step-major: index = step * %d + sequence)", what, line, NSEQ);
}

Test(gpu_model, teacher_forced_logits_match_cpu_bf16) {
    GPU_REQUIRE_DEVICE();
    model_config cfg;
    config_preset("stories15m", &cfg);
    const int64_t V = cfg.vocab;
    const size_t nl = (size_t)GEN * NSEQ * (size_t)V;
    int32_t tc[NSEQ * GEN], tg[NSEQ * GEN], forced[GEN * NSEQ];
    float *lc = malloc(sizeof(float) * nl), *lg = malloc(sizeof(float) * nl);
    cr_assert(lc && lg);
    run_model("cpu", KV_ALLOC_POOL, 0, NULL, tc, lc, V);
    for (int g = 0; g < GEN; g++)
        for (int s = 0; s < NSEQ; s++) forced[g * NSEQ + s] = tc[s * GEN + g];
    run_model("cuda", KV_ALLOC_POOL, 0, forced, tg, lg, V);
    compare_steps(lg, lc, V, TOL_BF16, "gpu vs cpu, teacher-forced");
    free(lc);
    free(lg);
}

Test(gpu_model, system_allocator_and_graph_replay_match_op_by_op) {
    GPU_REQUIRE_DEVICE();
    model_config cfg;
    config_preset("stories15m", &cfg);
    const int64_t V = cfg.vocab;
    const size_t nl = (size_t)GEN * NSEQ * (size_t)V;
    int32_t tp[NSEQ * GEN], ts[NSEQ * GEN], tgr[NSEQ * GEN];
    float *lp = malloc(sizeof(float) * nl), *ls = malloc(sizeof(float) * nl), *lgr = malloc(sizeof(float) * nl);
    cr_assert(lp && ls && lgr);
    run_model("cuda", KV_ALLOC_POOL, 0, NULL, tp, lp, V);
    run_model("cuda", KV_ALLOC_SYSTEM, 0, NULL, ts, ls, V);
    run_model("cuda", KV_ALLOC_POOL, 1, NULL, tgr, lgr, V);
    for (int i = 0; i < NSEQ * GEN; i++) cr_assert_eq(ts[i], tp[i], "system allocator token %d: %d, pool %d", i, ts[i], tp[i]);
    for (int i = 0; i < NSEQ * GEN; i++) cr_assert_eq(tgr[i], tp[i], "graph replay token %d: %d, op by op %d", i, tgr[i], tp[i]);
    compare_steps(ls, lp, V, TOL_SAME, "system allocator vs pool");
    compare_steps(lgr, lp, V, TOL_SAME, "graph replay vs op by op");
    free(lp);
    free(ls);
    free(lgr);
}
