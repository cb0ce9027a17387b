/* The tiny Hugging Face fixtures (tests/data/hf/<name>, scripts/make-hf-fixtures.py) on the GPU:
 * mixture of experts (mixtral, qwen3-moe with q/k norm and a dense layer, deepseek-moe with
 * grouped sigmoid routing and a shared expert), latent attention (deepseek-mla, deepseek-mla-yarn)
 * and sliding windows (mistral-window, qwen3-window); also q/k norm (qwen3, qwen3-bias), o_proj and
 * MLP biases (llama-attn-bias, llama-mlp-bias) and scaled RoPE (llama-rope-llama3, -yarn). bf16
 * weights (the fixtures' own dtype, so the weights are exact), fp32 KV.
 *
 *   greedy:          the GPU's own 16 greedy tokens against transformers' (expected.json); the
 *                    criterion is at least 12 of 16 (the CPU reference's bf16 check_lowp bound;
 *                    the GPU also rounds GEMM inputs to bf16), the number is logged;
 *   teacher-forced:  fed transformers' tokens, every step's logits against the CPU backend's
 *                    (bf16 weights, the same forced tokens) within 5e-2 of max(1, max |logit|),
 *                    tokens where the CPU's top-2 gap is decisive (cuda_check_logits);
 *   routing:         MoE: the tokens per expert per layer of the prefill and of the decode steps
 *                    (teacher-forced, so the same tokens) on the GPU against the CPU's; the totals
 *                    must be tokens * k per layer. Where a choice differs (a near tie under bf16
 *                    GEMM inputs reroutes a token, as int8 does on the CPU: test_hf_models) the
 *                    logits are logged, not bounded (at most 2 rerouted choices, as the CPU's int8
 *                    check allows); with the same routing they are.
 * Not run yet: no GPU has been lent to this project's sessions (docs/cuda.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "gpu_common.h"
#include "reference_model/config.h"
#include "reference_model/cuda_check.h"
#include "reference_model/cuda_moe_index.h"
#include "reference_model/model.h"

#define GEN 16
#define TOL_BF16 5e-2
#define MIN_GREEDY 12

typedef struct hf_case {
    char dir[600];
    model_config cfg;
    int32_t prompt[64];
    int64_t n_prompt;
    int32_t greedy[GEN];
} hf_case;

static void load_case(const char *name, hf_case *h) {
    const char *root = getenv("XF_SOURCE_DIR");
#ifdef XF_SOURCE_DIR
    if (!root || !*root) root = XF_SOURCE_DIR;
#endif
    cr_assert(root && *root, "set XF_SOURCE_DIR to the source tree (the fixtures are in tests/data/hf)");
    snprintf(h->dir, sizeof h->dir, "%s/tests/data/hf/%s", root, name);
    cr_assert_eq(config_resolve(h->dir, &h->cfg), XF_OK, "%s: %s", h->dir, xf_error_msg());
    char path[700], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/expected.json", h->dir);
    cr_assert_eq(file_read_all(path, 1 << 24, &text, &len), XF_OK, "%s: %s", path, xf_error_msg());
    cJSON *j = cJSON_Parse(text);
    free(text);
    cr_assert(j, "%s: not JSON", path);
    const cJSON *fmt = cJSON_GetObjectItem(j, "format"), *p = cJSON_GetObjectItem(j, "prompt"), *g = cJSON_GetObjectItem(j, "greedy");
    cr_assert(cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "xfprof-hf-fixture"), "%s: not an xfprof-hf-fixture", path);
    cr_assert(cJSON_IsArray(p) && cJSON_GetArraySize(p) >= 1 && cJSON_GetArraySize(p) <= 64 && cJSON_IsArray(g) &&
              cJSON_GetArraySize(g) == GEN, "%s: prompt (1..64) and %d greedy ids expected", path, GEN);
    h->n_prompt = 0;
    for (const cJSON *e = p->child; e; e = e->next) h->prompt[h->n_prompt++] = e->valueint;
    int i = 0;
    for (const cJSON *e = g->child; e; e = e->next) h->greedy[i++] = e->valueint;
    cJSON_Delete(j);
}

/* The fixture's model on `backend` (bf16 weights from its folder, fp32 KV, one sequence of the
 * prompt + GEN tokens); the caller frees it with model_free. */
static model *open_case(const hf_case *h, const char *backend) {
    model_options o;
    model_options_default(&o);
    o.backend = backend;
    o.wdtype = XF_BF16;
    o.kvdtype = XF_FP32;
    o.threads = 2;
    o.max_seqs = 1;
    o.max_prompt = h->n_prompt;
    o.max_seq_len = h->n_prompt + GEN;
    o.weights_dir = h->dir;
    model *m = NULL;
    cr_assert_eq(model_init(&m, &h->cfg, &o), XF_OK, "%s on %s: %s", h->dir, backend, xf_error_msg());
    return m;
}

/* Prefill then GEN - 1 decode steps on `backend`; forced: transformers' tokens (NULL: greedy).
 * tokens (GEN), logits (GEN, vocab), routed (2, n_layers * n_experts: the prefill's counts, then
 * the decode steps' summed; MoE). */
static void run_case(const hf_case *h, const char *backend, int forced, int32_t *tokens, float *logits, int64_t *routed) {
    model *m = open_case(h, backend);
    int64_t lens[1] = {h->n_prompt};
    const int64_t V = h->cfg.vocab;
    cr_assert_eq(model_prefill(m, 1, h->prompt, lens, NULL), XF_OK, "%s: %s", backend, xf_error_msg());
    memcpy(logits, model_logits(m, NULL, NULL), sizeof(float) * (size_t)V);
    if (routed && h->cfg.n_experts > 0) {
        const int64_t *r = NULL;
        cr_assert_eq(model_expert_stats(m, XF_PREFILL, &r, NULL, NULL), XF_OK, "%s", xf_error_msg());
        memcpy(routed, r, sizeof(int64_t) * (size_t)(h->cfg.n_layers * h->cfg.n_experts));
    }
    for (int s = 1; s < GEN; s++) {
        int32_t f = h->greedy[s - 1];
        cr_assert_eq(model_decode_step(m, forced ? &f : NULL, NULL), XF_OK, "%s step %d: %s", backend, s, xf_error_msg());
        memcpy(logits + (size_t)s * V, model_logits(m, NULL, NULL), sizeof(float) * (size_t)V);
    }
    if (routed && h->cfg.n_experts > 0) {
        const int64_t *r = NULL;
        cr_assert_eq(model_expert_stats(m, XF_DECODE, &r, NULL, NULL), XF_OK, "%s", xf_error_msg());
        memcpy(routed + h->cfg.n_layers * h->cfg.n_experts, r, sizeof(int64_t) * (size_t)(h->cfg.n_layers * h->cfg.n_experts));
    }
    int64_t n;
    const int32_t *t = model_tokens(m, 0, &n);
    cr_assert_eq(n, GEN);
    memcpy(tokens, t, sizeof(int32_t) * GEN);
    model_free(m);
}

static void check_case(const char *name) {
    GPU_REQUIRE_DEVICE();
    hf_case h;
    load_case(name, &h);
    const int64_t V = h.cfg.vocab, LE = h.cfg.n_layers * (h.cfg.n_experts > 0 ? h.cfg.n_experts : 1);
    float *lg = malloc(sizeof(float) * (size_t)(GEN * V)), *lc = malloc(sizeof(float) * (size_t)(GEN * V));
    int64_t *rg = calloc((size_t)(2 * LE), sizeof(int64_t)), *rc = calloc((size_t)(2 * LE), sizeof(int64_t));
    cr_assert(lg && lc && rg && rc);
    int32_t tg[GEN], tc[GEN];
    /* greedy on the GPU against transformers' ids */
    run_case(&h, "cuda", 0, tg, lg, NULL);
    int same = 0;
    for (int i = 0; i < GEN; i++) same += tg[i] == h.greedy[i];
    cr_log_info("%s: GPU greedy tokens equal to transformers': %d of %d", name, same, GEN);
    /* teacher-forced, GPU against CPU */
    run_case(&h, "cuda", 1, tg, lg, rg);
    run_case(&h, "cpu", 1, tc, lc, rc);
    cuda_check_summary sm;
    cuda_check_summary_init(&sm);
    for (int i = 0; i < GEN; i++) {
        cuda_check_step st;
        cr_assert_eq(cuda_check_logits(lg + (size_t)i * V, lc + (size_t)i * V, V, TOL_BF16, &st), XF_OK, "%s", xf_error_msg());
        cuda_check_summary_add(&sm, &st);
    }
    char line[256];
    cuda_check_summary_line(&sm, TOL_BF16, line, sizeof line);
    cr_log_info("%s: teacher-forced GPU vs CPU: %s", name, line);
    int64_t differ = 0;
    if (h.cfg.n_experts > 0)
        for (int ph = 0; ph < 2; ph++)
            for (int64_t l = 0; l < h.cfg.n_layers; l++) {
                int64_t tot_g = 0, tot_c = 0;
                for (int64_t e = 0; e < h.cfg.n_experts; e++) {
                    const int64_t i = ph * LE + l * h.cfg.n_experts + e;
                    tot_g += rg[i];
                    tot_c += rc[i];
                    differ += rg[i] != rc[i];
                }
                const int64_t toks = ph == 0 ? h.n_prompt : GEN - 1;
                const int64_t want = model_layer_is_moe(&h.cfg, l) ? toks * h.cfg.experts_per_tok : 0;
                cr_assert_eq(tot_g, want, "%s %s layer %lld: the GPU routed %lld (token, expert) pairs, %lld expected", name,
                             ph ? "decode" : "prefill", (long long)l, (long long)tot_g, (long long)want);
                cr_assert_eq(tot_c, want);
            }
    if (h.cfg.n_experts > 0)
        cr_log_info("%s: tokens per expert, GPU vs CPU: %lld of %lld (phase, layer, expert) counts differ", name, (long long)differ,
                    (long long)(2 * LE));
    /* a rerouted choice moves two counts; more than two reroutes is not a near tie but a fault */
    cr_assert_leq(differ, 4, "%s: %lld expert counts differ from the CPU's (at most 2 rerouted choices expected)", name, (long long)differ);
    if (differ == 0) cr_assert_eq(sm.failures, 0, "%s: %s", name, line);
    else cr_log_warn("%s: a token was routed to another expert on the GPU: its logits are logged, not bounded (%s)", name, line);
    cr_assert_geq(same, MIN_GREEDY, "%s: %d of %d greedy tokens equal transformers' (criterion %d)", name, same, GEN, MIN_GREEDY);
    free(lg);
    free(lc);
    free(rg);
    free(rc);
}

Test(gpu_hf, mixtral) { check_case("mixtral"); }
Test(gpu_hf, qwen3_moe) { check_case("qwen3-moe"); }
Test(gpu_hf, deepseek_moe) { check_case("deepseek-moe"); }
Test(gpu_hf, deepseek_mla) { check_case("deepseek-mla"); }
Test(gpu_hf, deepseek_mla_yarn) { check_case("deepseek-mla-yarn"); }
Test(gpu_hf, mistral_window) { check_case("mistral-window"); }
Test(gpu_hf, qwen3_window) { check_case("qwen3-window"); }
Test(gpu_hf, qwen3_qk_norm) { check_case("qwen3"); }
Test(gpu_hf, qwen3_bias_llama3_rope) { check_case("qwen3-bias"); }
Test(gpu_hf, llama_attention_bias) { check_case("llama-attn-bias"); }
Test(gpu_hf, llama_mlp_bias) { check_case("llama-mlp-bias"); }
Test(gpu_hf, llama_rope_llama3) { check_case("llama-rope-llama3"); }
Test(gpu_hf, llama_rope_yarn) { check_case("llama-rope-yarn"); }

/* --cuda-graph with experts or latent attention is refused by name (the experts' GEMM sizes are
 * read back every step), not run wrong. */
Test(gpu_hf, graph_refused_for_experts) {
    GPU_REQUIRE_DEVICE();
    hf_case h;
    load_case("mixtral", &h);
    model *m = open_case(&h, "cuda");
    cuda_backend_set_graph(model_backend_ctx(m), 1);
    int64_t lens[1] = {h.n_prompt};
    cr_assert_eq(model_prefill(m, 1, h.prompt, lens, NULL), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(model_decode_step(m, NULL, NULL), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "--cuda-graph with mixture of experts"), "%s", xf_error_msg());
    model_free(m);
}

/* The routing kernel on the device against the same functions on the host, on the device's own
 * router logits (mixtral's last MoE layer after the prefill): the same experts in the same order
 * (their weights, in the sorted choice order, within 1e-6: CUDA's expf is within 2 ulp). */
Test(gpu_hf, routing_kernel_is_the_host_routing) {
    GPU_REQUIRE_DEVICE();
    hf_case h;
    load_case("mixtral", &h);
    model *m = open_case(&h, "cuda");
    int64_t lens[1] = {h.n_prompt};
    cr_assert_eq(model_prefill(m, 1, h.prompt, lens, NULL), XF_OK, "%s", xf_error_msg());
    const int64_t E = h.cfg.n_experts, k = h.cfg.experts_per_tok, n = h.n_prompt;
    float *lg = malloc(sizeof(float) * (size_t)(n * E)), *selw = malloc(sizeof(float) * (size_t)(n * k));
    cr_assert(lg && selw && k <= 8);
    void *bctx = model_backend_ctx(m);
    cr_assert_eq(cuda_backend_debug_read(bctx, "moe_logits", lg, n * E), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(cuda_backend_debug_read(bctx, "moe_selw", selw, n * k), XF_OK, "%s", xf_error_msg());
    for (int64_t t = 0; t < n; t++) {
        int32_t idx[8];
        float w[8];
        xf_moe_route_softmax(lg + t * E, E, k, h.cfg.norm_topk_prob, idx, w);
        for (int64_t j = 0; j < k; j++)
            cr_assert(fabsf(w[j] - selw[t * k + j]) <= 1e-6f * (1.0f + fabsf(w[j])), "token %lld choice %lld: device %g, host %g",
                      (long long)t, (long long)j, (double)selw[t * k + j], (double)w[j]);
    }
    free(lg);
    free(selw);
    model_free(m);
}
