/* Model configs: the built-in presets and the reader of Hugging Face config.json files. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/fileio.h"
#include "core/json_util.h"

/* Absurd-size limits: anything above is a typo or a hostile file, never a real model. */
#define CFG_MAX_D_MODEL (INT64_C(1) << 20)
#define CFG_MAX_LAYERS ((int64_t)MODEL_MAX_LAYERS)
#define CFG_MAX_HEADS (INT64_C(1) << 14)
#define CFG_MAX_HEAD_DIM (INT64_C(1) << 14)
#define CFG_MAX_D_FF (INT64_C(1) << 24)
#define CFG_MAX_VOCAB (INT64_C(1) << 24)
#define CFG_MAX_CTX (INT64_C(1) << 27)
#define CFG_PI 3.14159265358979323846
#define CFG_MAX_EXPERTS INT64_C(65536)

/* Values from each model's published Hugging Face config.json (llama2.c's ModelArgs for the
 * stories models, which share the classifier with the token embedding). */
/* A dense preset with plain RoPE and no bias beyond qwen2's Q/K/V ones. */
#define XF_DENSE(nm, ar, L, d, h, kv, hd, ff, V, ctx, theta, eps, tied, bias)                                            \
    {.name = nm, .arch = ar, .n_layers = L, .d_model = d, .n_heads = h, .n_kv_heads = kv, .head_dim = hd, .d_ff = ff,     \
     .vocab = V, .max_ctx = ctx, .rope_theta = theta, .norm_eps = eps, .tied_embeddings = tied, .qkv_bias = bias}
/* Llama 3.1 / 3.2 RoPE: llama3 scaling with low_freq_factor 1, high_freq_factor 4 over 8192 positions. */
#define XF_LLAMA3_ROPE(f) {.kind = ROPE_LLAMA3, .factor = f, .low_freq_factor = 1.0, .high_freq_factor = 4.0, .original_ctx = 8192}

static const model_config k_presets[] = {
    /* name, arch, layers, d_model, heads, kv, head_dim, d_ff, vocab, ctx, theta, eps, tied, bias */
    XF_DENSE("stories15m", "llama", 6, 288, 6, 6, 48, 768, 32000, 256, 10000.0, 1e-5, 1, 0),
    XF_DENSE("stories110m", "llama", 12, 768, 12, 12, 64, 2048, 32000, 1024, 10000.0, 1e-5, 1, 0),
    /* TinyLlama/TinyLlama-1.1B-Chat-v1.0 */
    XF_DENSE("tinyllama-1.1b", "llama", 22, 2048, 32, 4, 64, 5632, 32000, 2048, 10000.0, 1e-5, 0, 0),
    /* meta-llama/Llama-2-{7,13,70}b-hf */
    XF_DENSE("llama-2-7b", "llama", 32, 4096, 32, 32, 128, 11008, 32000, 4096, 10000.0, 1e-5, 0, 0),
    XF_DENSE("llama-2-13b", "llama", 40, 5120, 40, 40, 128, 13824, 32000, 4096, 10000.0, 1e-5, 0, 0),
    XF_DENSE("llama-2-70b", "llama", 80, 8192, 64, 8, 128, 28672, 32000, 4096, 10000.0, 1e-5, 0, 0),
    /* meta-llama/Meta-Llama-3-{8,70}B */
    XF_DENSE("llama-3-8b", "llama", 32, 4096, 32, 8, 128, 14336, 128256, 8192, 500000.0, 1e-5, 0, 0),
    XF_DENSE("llama-3-70b", "llama", 80, 8192, 64, 8, 128, 28672, 128256, 8192, 500000.0, 1e-5, 0, 0),
    /* mistralai/Mistral-7B-v0.1: a 4096-token sliding window on every layer */
    {.name = "mistral-7b", .arch = "mistral", .n_layers = 32, .d_model = 4096, .n_heads = 32, .n_kv_heads = 8, .head_dim = 128,
     .d_ff = 14336, .vocab = 32000, .max_ctx = 32768, .rope_theta = 10000.0, .norm_eps = 1e-5, .sliding_window = 4096,
     .window_layers = {UINT64_C(0xffffffff)}},
    /* Qwen/Qwen2.5-7B */
    XF_DENSE("qwen2.5-7b", "qwen2", 28, 3584, 28, 4, 128, 18944, 152064, 131072, 1000000.0, 1e-6, 0, 1),
    /* meta-llama/Llama-3.1-8B: llama3 RoPE, factor 8 */
    {.name = "llama-3.1-8b", .arch = "llama", .n_layers = 32, .d_model = 4096, .n_heads = 32, .n_kv_heads = 8, .head_dim = 128,
     .d_ff = 14336, .vocab = 128256, .max_ctx = 131072, .rope_theta = 500000.0, .norm_eps = 1e-5, .rope = XF_LLAMA3_ROPE(8.0)},
    /* meta-llama/Llama-3.2-1B: llama3 RoPE, factor 32, tied embeddings */
    {.name = "llama-3.2-1b", .arch = "llama", .n_layers = 16, .d_model = 2048, .n_heads = 32, .n_kv_heads = 8, .head_dim = 64,
     .d_ff = 8192, .vocab = 128256, .max_ctx = 131072, .rope_theta = 500000.0, .norm_eps = 1e-5, .tied_embeddings = 1,
     .rope = XF_LLAMA3_ROPE(32.0)},
    /* mistralai/Mixtral-8x7B-v0.1: 8 experts of 14336, top-2, no window */
    {.name = "mixtral-8x7b", .arch = "mixtral", .n_layers = 32, .d_model = 4096, .n_heads = 32, .n_kv_heads = 8, .head_dim = 128,
     .d_ff = 14336, .vocab = 32000, .max_ctx = 32768, .rope_theta = 1000000.0, .norm_eps = 1e-5, .n_experts = 8,
     .experts_per_tok = 2, .d_ff_expert = 14336, .norm_topk_prob = 1},
    /* Qwen/Qwen3-30B-A3B: 128 experts of 768, top-8, every layer sparse, q/k norm */
    {.name = "qwen3-30b-a3b", .arch = "qwen3_moe", .n_layers = 48, .d_model = 2048, .n_heads = 32, .n_kv_heads = 4,
     .head_dim = 128, .d_ff = 6144, .vocab = 151936, .max_ctx = 40960, .rope_theta = 1000000.0, .norm_eps = 1e-6, .qk_norm = 1,
     .n_experts = 128, .experts_per_tok = 8, .d_ff_expert = 768, .norm_topk_prob = 1},
    /* Qwen/Qwen3-8B: q/k RMSNorm, no biases */
    {.name = "qwen3-8b", .arch = "qwen3", .n_layers = 36, .d_model = 4096, .n_heads = 32, .n_kv_heads = 8, .head_dim = 128,
     .d_ff = 12288, .vocab = 151936, .max_ctx = 40960, .rope_theta = 1000000.0, .norm_eps = 1e-6, .qk_norm = 1},
    /* deepseek-ai/DeepSeek-V3: multi-head latent attention (q rank 1536, kv rank 512, heads of 128 + 64
     * for Q/K and 128 for V), yarn RoPE (factor 40 over 4096, mscale = mscale_all_dim = 1), 3 dense
     * layers then 58 MoE layers of 256 routed experts of 2048 (top-8 within 4 of 8 groups, sigmoid
     * scores, x2.5) and one shared expert; the MTP module is not part of the decoder */
    {.name = "deepseek-v3", .arch = "deepseek_v3", .n_layers = 61, .d_model = 7168, .n_heads = 128, .n_kv_heads = 128,
     .head_dim = 64, .d_ff = 18432, .vocab = 129280, .max_ctx = 163840, .rope_theta = 10000.0, .norm_eps = 1e-6,
     .rope = {.kind = ROPE_YARN, .factor = 40.0, .original_ctx = 4096, .beta_fast = 32.0, .beta_slow = 1.0,
              .attention_factor = 1.0, .truncate = 1, .mscale_all_dim = 1.0},
     .n_experts = 256, .experts_per_tok = 8, .d_ff_expert = 2048, .norm_topk_prob = 1, .dense_layers = {UINT64_C(0x7)},
     .q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope_head_dim = 128, .qk_rope_head_dim = 64, .v_head_dim = 128,
     .rope_interleave = 1, .moe_score = MOE_SCORE_SIGMOID_GROUPED, .n_group = 8, .topk_group = 4, .routed_scaling_factor = 2.5,
     .d_ff_shared = 2048},
    /* google/gemma-3-1b-pt (gemma3_text): local layers windowed at 512 with RoPE base 1e4, every 6th
     * layer global at 1e6; embedding x sqrt(1152) as fp32; four norms per layer, q/k norm, GeGLU,
     * head_dim 256 over 4 heads of a 1152 model; query_pre_attn_scalar 256 */
    {.name = "gemma-3-1b", .arch = "gemma3_text", .n_layers = 26, .d_model = 1152, .n_heads = 4, .n_kv_heads = 1, .head_dim = 256,
     .d_ff = 6912, .vocab = 262144, .max_ctx = 32768, .rope_theta = 1000000.0, .norm_eps = 1e-6, .tied_embeddings = 1, .qk_norm = 1,
     .sliding_window = 512, .window_layers = {UINT64_C(0x37df7df)}, .embed_scale = 33.941123962402344, .sandwich_norms = 1,
     .ffn_gelu = 1, .attn_scalar = 256.0, .rope_local_theta = 10000.0},
    /* google/gemma-3-4b-pt's text_config (the language model; the vision tower and projector are not
     * modelled): window 1024, the global layers' RoPE linear x8 */
    {.name = "gemma-3-4b", .arch = "gemma3", .n_layers = 34, .d_model = 2560, .n_heads = 8, .n_kv_heads = 4, .head_dim = 256,
     .d_ff = 10240, .vocab = 262208, .max_ctx = 131072, .rope_theta = 1000000.0, .norm_eps = 1e-6, .tied_embeddings = 1, .qk_norm = 1,
     .rope = {.kind = ROPE_LINEAR, .factor = 8.0}, .sliding_window = 1024, .window_layers = {UINT64_C(0x3df7df7df)},
     .embed_scale = 50.59644317626953, .sandwich_norms = 1, .ffn_gelu = 1, .attn_scalar = 256.0, .rope_local_theta = 10000.0},
};
#undef XF_DENSE
#undef XF_LLAMA3_ROPE
#define N_PRESETS ((int)(sizeof k_presets / sizeof k_presets[0]))

int config_preset_count(void) { return N_PRESETS; }

const char *config_preset_name(int i) {
    if (i < 0 || i >= N_PRESETS) return NULL;
    return k_presets[i].name;
}

xf_status config_preset(const char *name, model_config *cfg) {
    if (!name || !*name) return xf_errorf(XF_EINVAL, "no model name given");
    for (int i = 0; i < N_PRESETS; i++) {
        if (strcasecmp(name, k_presets[i].name) == 0) {
            *cfg = k_presets[i];
            return XF_OK;
        }
    }
    char list[1024] = "";
    size_t used = 0;
    for (int i = 0; i < N_PRESETS; i++) {
        int n = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", k_presets[i].name);
        if (n < 0 || (size_t)n >= sizeof list - used) break;
        used += (size_t)n;
    }
    return xf_errorf(XF_EINVAL, "unknown model '%s': give one of the presets (%s) or a path to a Hugging Face config.json", name, list);
}

static xf_status rope_validate(const rope_scaling *r, int64_t max_ctx, const char *ctx) {
    if ((int)r->kind < 0 || r->kind >= ROPE_KIND_COUNT)
        return xf_errorf(XF_EINVAL, "%s: unknown rope type %d", ctx, (int)r->kind);
    if (r->kind == ROPE_DEFAULT) return XF_OK;
    if (!isfinite(r->factor) || r->factor <= 0 || r->factor > 1e6)
        return xf_errorf(XF_EINVAL, "%s: 'factor' must be a finite number in (0, 1e6], got %g", ctx, r->factor);
    if (r->kind == ROPE_LLAMA3) {
        if (!isfinite(r->low_freq_factor) || !isfinite(r->high_freq_factor) || r->low_freq_factor <= 0 ||
            r->high_freq_factor <= r->low_freq_factor)
            return xf_errorf(XF_EINVAL, "%s: llama3 needs 0 < low_freq_factor < high_freq_factor, got %g and %g", ctx,
                             r->low_freq_factor, r->high_freq_factor);
    }
    if (r->kind == ROPE_LLAMA3 || r->kind == ROPE_YARN) {
        if (r->original_ctx <= 0 || r->original_ctx > CFG_MAX_CTX)
            return xf_errorf(XF_EINVAL, "%s: 'original_max_position_embeddings' must lie in [1, %lld], got %lld", ctx,
                             (long long)CFG_MAX_CTX, (long long)r->original_ctx);
    }
    if (r->kind == ROPE_YARN) {
        if (!isfinite(r->beta_fast) || !isfinite(r->beta_slow) || r->beta_fast <= 0 || r->beta_slow <= 0)
            return xf_errorf(XF_EINVAL, "%s: yarn needs beta_fast and beta_slow > 0, got %g and %g", ctx, r->beta_fast,
                             r->beta_slow);
        if (!isfinite(r->attention_factor) || r->attention_factor <= 0 || r->attention_factor > 1e3)
            return xf_errorf(XF_EINVAL, "%s: yarn's attention_factor must lie in (0, 1000], got %g", ctx, r->attention_factor);
        if (r->truncate != 0 && r->truncate != 1) return xf_errorf(XF_EINVAL, "%s: truncate must be 0 or 1", ctx);
    }
    (void)max_ctx;
    return XF_OK;
}

/* transformers' yarn helpers (modeling_rope_utils._compute_yarn_parameters). */
static double yarn_correction_dim(double rotations, double dim, double base, double ctx) {
    return dim * log(ctx / (rotations * 2.0 * CFG_PI)) / (2.0 * log(base));
}

xf_status config_rope_freqs(const model_config *cfg, double *inv_freq, double *attn_factor) {
    xf_status st = config_validate(cfg);
    if (st) return st;
    const rope_scaling *r = &cfg->rope;
    const int64_t half = cfg->head_dim / 2;
    const double dim = (double)cfg->head_dim, base = cfg->rope_theta;
    *attn_factor = 1.0;
    for (int64_t i = 0; i < half; i++) inv_freq[i] = pow(base, -2.0 * (double)i / dim);
    switch (r->kind) {
    case ROPE_DEFAULT:
    case ROPE_DYNAMIC: /* sequences never exceed max_ctx here: the frequencies stay the default ones */
        break;
    case ROPE_LINEAR:
        for (int64_t i = 0; i < half; i++) inv_freq[i] /= r->factor;
        break;
    case ROPE_LLAMA3: {
        const double old = (double)r->original_ctx;
        const double low_wl = old / r->low_freq_factor, high_wl = old / r->high_freq_factor;
        for (int64_t i = 0; i < half; i++) {
            const double f = inv_freq[i], wl = 2.0 * CFG_PI / f;
            if (wl > low_wl) {
                inv_freq[i] = f / r->factor;
            } else if (!(wl < high_wl)) { /* medium frequency: a smooth ramp */
                const double sm = (old / wl - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
                inv_freq[i] = (1.0 - sm) * f / r->factor + sm * f;
            }
        }
        break;
    }
    case ROPE_YARN: {
        double lo = yarn_correction_dim(r->beta_fast, dim, base, (double)r->original_ctx);
        double hi = yarn_correction_dim(r->beta_slow, dim, base, (double)r->original_ctx);
        if (r->truncate) {
            lo = floor(lo);
            hi = ceil(hi);
        }
        if (lo < 0) lo = 0;
        if (hi > dim - 1) hi = dim - 1;
        if (lo == hi) hi += 0.001; /* transformers: prevent a singularity */
        for (int64_t i = 0; i < half; i++) {
            double ramp = ((double)i - lo) / (hi - lo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            const double extra = 1.0 - ramp; /* weight of extrapolation (the unscaled frequency) */
            inv_freq[i] = inv_freq[i] / r->factor * (1.0 - extra) + inv_freq[i] * extra;
        }
        *attn_factor = r->attention_factor;
        break;
    }
    default:
        return xf_errorf(XF_EINVAL, "model config: unknown rope type %d", (int)r->kind);
    }
    return XF_OK;
}

xf_status config_rope_freqs_layer(const model_config *cfg, int64_t layer, double *inv_freq, double *attn_factor) {
    if (!cfg || cfg->rope_local_theta <= 0 || model_layer_window(cfg, layer) <= 0) return config_rope_freqs(cfg, inv_freq, attn_factor);
    model_config local = *cfg; /* gemma3's local layers: plain RoPE at rope_local_base_freq */
    memset(&local.rope, 0, sizeof local.rope);
    local.rope.kind = ROPE_DEFAULT;
    local.rope_theta = cfg->rope_local_theta;
    local.rope_local_theta = 0;
    return config_rope_freqs(&local, inv_freq, attn_factor);
}

int config_is_gemma3(const model_config *cfg) {
    return cfg && (cfg->sandwich_norms || cfg->embed_scale != 0 || cfg->ffn_gelu || cfg->attn_scalar != 0 || cfg->rope_local_theta != 0);
}

double config_softmax_scale(const model_config *cfg) {
    if (!cfg || cfg->head_dim <= 0) return 0.0;
    if (!model_is_mla(cfg) && cfg->attn_scalar > 0) return 1.0 / sqrt(cfg->attn_scalar); /* gemma3's query_pre_attn_scalar */
    if (!model_is_mla(cfg)) return 1.0 / sqrt((double)cfg->head_dim);
    double scale = 1.0 / sqrt((double)(cfg->qk_nope_head_dim + cfg->qk_rope_head_dim));
    const rope_scaling *r = &cfg->rope;
    if (r->kind != ROPE_DEFAULT && r->mscale_all_dim != 0 && r->factor > 1.0) { /* yarn_apply_mscale */
        const double m = 0.1 * r->mscale_all_dim * log(r->factor) + 1.0;
        scale *= m * m;
    }
    return scale;
}

const char *config_first_extension(const model_config *cfg) {
    if (!cfg) return NULL;
    if (config_is_gemma3(cfg))
        return "model_type gemma3_text (embedding scale, post-attention/post-feedforward norms, GeGLU, query_pre_attn_scalar, "
               "rope_local_base_freq)";
    if (model_is_mla(cfg)) return "kv_lora_rank (multi-head latent attention)";
    if (cfg->rope.kind != ROPE_DEFAULT && cfg->rope.kind != ROPE_DYNAMIC) return "rope_scaling";
    if (cfg->o_bias) return "attention_bias (o_proj.bias)";
    if (cfg->mlp_bias) return "mlp_bias";
    if (cfg->qk_norm) return "q/k RMSNorm (q_norm, k_norm)";
    if (cfg->sliding_window > 0) return "sliding_window";
    if (cfg->n_experts > 0) return "mixture of experts (num_experts)";
    return NULL;
}

static xf_status check_range(const char *field, int64_t v, int64_t hi) {
    if (v <= 0) return xf_errorf(XF_EINVAL, "model config: %s must be > 0, got %lld", field, (long long)v);
    if (v > hi) return xf_errorf(XF_EINVAL, "model config: %s = %lld is absurdly large (limit %lld)", field, (long long)v, (long long)hi);
    return XF_OK;
}

/* The MLA and DeepSeek-routing fields: all zero unless used, and consistent when used. */
static xf_status mla_validate(const model_config *cfg) {
    xf_status s;
    if (cfg->rope_interleave != 0 && cfg->rope_interleave != 1) return xf_errorf(XF_EINVAL, "model config: rope_interleave must be 0 or 1");
    if (cfg->mla_absorbed != 0 && cfg->mla_absorbed != 1) return xf_errorf(XF_EINVAL, "model config: mla_absorbed must be 0 or 1");
    if (!isfinite(cfg->rope.mscale_all_dim) || cfg->rope.mscale_all_dim < 0 || cfg->rope.mscale_all_dim > 1e3)
        return xf_errorf(XF_EINVAL, "model config: mscale_all_dim must lie in [0, 1000], got %g", cfg->rope.mscale_all_dim);
    if (cfg->kv_lora_rank == 0) {
        if (cfg->q_lora_rank || cfg->qk_nope_head_dim || cfg->qk_rope_head_dim || cfg->v_head_dim || cfg->mla_absorbed ||
            cfg->rope_interleave)
            return xf_errorf(XF_EINVAL, "model config: q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, mla_absorbed and "
                             "rope_interleave need kv_lora_rank > 0 (multi-head latent attention)");
    } else {
        if ((s = check_range("kv_lora_rank", cfg->kv_lora_rank, CFG_MAX_D_MODEL)) != XF_OK) return s;
        if ((s = check_range("qk_nope_head_dim", cfg->qk_nope_head_dim, CFG_MAX_HEAD_DIM)) != XF_OK) return s;
        if ((s = check_range("v_head_dim", cfg->v_head_dim, CFG_MAX_HEAD_DIM)) != XF_OK) return s;
        if (cfg->q_lora_rank < 0 || cfg->q_lora_rank > CFG_MAX_D_MODEL)
            return xf_errorf(XF_EINVAL, "model config: q_lora_rank = %lld out of range [0, %lld]", (long long)cfg->q_lora_rank,
                             (long long)CFG_MAX_D_MODEL);
        if (cfg->qk_rope_head_dim != cfg->head_dim)
            return xf_errorf(XF_EINVAL, "model config: latent attention needs head_dim (%lld) == qk_rope_head_dim (%lld)",
                             (long long)cfg->head_dim, (long long)cfg->qk_rope_head_dim);
        if (cfg->n_kv_heads != cfg->n_heads)
            return xf_errorf(XF_EINVAL, "model config: latent attention needs n_kv_heads (%lld) == n_heads (%lld)",
                             (long long)cfg->n_kv_heads, (long long)cfg->n_heads);
        if (cfg->sliding_window > 0)
            return xf_errorf(XF_EINVAL, "model config: latent attention with a sliding window is not implemented (no such family)");
        if (cfg->qkv_bias || cfg->o_bias || cfg->qk_norm)
            return xf_errorf(XF_EINVAL, "model config: latent attention with qkv_bias, o_bias or qk_norm is not implemented");
        if (cfg->n_heads * (cfg->qk_nope_head_dim + cfg->qk_rope_head_dim + cfg->v_head_dim) > 4 * CFG_MAX_D_MODEL)
            return xf_errorf(XF_EINVAL, "model config: n_heads * (qk_nope + qk_rope + v head dims) is absurdly large");
    }
    if (cfg->moe_score != MOE_SCORE_SIGMOID_GROUPED) {
        if (cfg->n_group || cfg->topk_group || cfg->routed_scaling_factor != 0)
            return xf_errorf(XF_EINVAL, "model config: n_group, topk_group and routed_scaling_factor belong to DeepSeek routing "
                             "(sigmoid, grouped)");
        return XF_OK;
    }
    if (cfg->n_experts <= 0) return xf_errorf(XF_EINVAL, "model config: DeepSeek routing needs n_experts > 0");
    if (cfg->n_group < 1 || cfg->n_experts % cfg->n_group != 0 || cfg->n_experts / cfg->n_group < 2)
        return xf_errorf(XF_EINVAL, "model config: n_experts (%lld) must split into n_group (%lld) groups of at least 2",
                         (long long)cfg->n_experts, (long long)cfg->n_group);
    if (cfg->topk_group < 1 || cfg->topk_group > cfg->n_group ||
        cfg->experts_per_tok > cfg->topk_group * (cfg->n_experts / cfg->n_group))
        return xf_errorf(XF_EINVAL, "model config: topk_group (%lld) must lie in [1, n_group = %lld] and keep at least "
                         "experts_per_tok (%lld) experts (topk_group * n_experts / n_group)", (long long)cfg->topk_group,
                         (long long)cfg->n_group, (long long)cfg->experts_per_tok);
    if (!isfinite(cfg->routed_scaling_factor) || cfg->routed_scaling_factor <= 0 || cfg->routed_scaling_factor > 1e6)
        return xf_errorf(XF_EINVAL, "model config: routed_scaling_factor must lie in (0, 1e6], got %g", cfg->routed_scaling_factor);
    if (cfg->shared_expert_gate)
        return xf_errorf(XF_EINVAL, "model config: DeepSeek routing's shared experts have no gate (shared_expert_gate)");
    return XF_OK;
}

xf_status config_validate(const model_config *cfg) {
    if (!cfg) return xf_errorf(XF_EINVAL, "model config: missing");
    if (!memchr(cfg->name, '\0', sizeof cfg->name) || !memchr(cfg->arch, '\0', sizeof cfg->arch))
        return xf_errorf(XF_EINVAL, "model config: name or arch is not a terminated string");
    xf_status s;
    if ((s = check_range("n_layers", cfg->n_layers, CFG_MAX_LAYERS)) != XF_OK) return s;
    if ((s = check_range("d_model", cfg->d_model, CFG_MAX_D_MODEL)) != XF_OK) return s;
    if ((s = check_range("n_heads", cfg->n_heads, CFG_MAX_HEADS)) != XF_OK) return s;
    if ((s = check_range("n_kv_heads", cfg->n_kv_heads, CFG_MAX_HEADS)) != XF_OK) return s;
    if ((s = check_range("head_dim", cfg->head_dim, CFG_MAX_HEAD_DIM)) != XF_OK) return s;
    if ((s = check_range("d_ff", cfg->d_ff, CFG_MAX_D_FF)) != XF_OK) return s;
    if ((s = check_range("vocab", cfg->vocab, CFG_MAX_VOCAB)) != XF_OK) return s;
    if ((s = check_range("max_ctx", cfg->max_ctx, CFG_MAX_CTX)) != XF_OK) return s;
    if (cfg->n_kv_heads > cfg->n_heads)
        return xf_errorf(XF_EINVAL, "model config: n_kv_heads (%lld) exceeds n_heads (%lld)", (long long)cfg->n_kv_heads, (long long)cfg->n_heads);
    if (cfg->n_heads % cfg->n_kv_heads != 0)
        return xf_errorf(XF_EINVAL, "model config: n_heads (%lld) is not a multiple of n_kv_heads (%lld): each KV head must serve a whole group of query heads",
                         (long long)cfg->n_heads, (long long)cfg->n_kv_heads);
    /* The query width n_heads*head_dim need not equal d_model (head_dim is explicit in some
     * models), but it must stay within the same absurd-size limit. */
    if (cfg->n_heads * cfg->head_dim > CFG_MAX_D_MODEL)
        return xf_errorf(XF_EINVAL, "model config: n_heads * head_dim = %lld is absurdly large (limit %lld)",
                         (long long)(cfg->n_heads * cfg->head_dim), (long long)CFG_MAX_D_MODEL);
    if (cfg->head_dim % 2 != 0)
        return xf_errorf(XF_EINVAL, "model config: head_dim (%lld) must be even: RoPE rotates pairs of dimensions", (long long)cfg->head_dim);
    if (!isfinite(cfg->rope_theta) || cfg->rope_theta <= 0)
        return xf_errorf(XF_EINVAL, "model config: rope_theta must be a finite number > 0, got %g", cfg->rope_theta);
    if (!isfinite(cfg->norm_eps) || cfg->norm_eps <= 0 || cfg->norm_eps >= 1)
        return xf_errorf(XF_EINVAL, "model config: norm_eps (rms_norm_eps) must lie in (0, 1), got %g", cfg->norm_eps);
    if (cfg->tied_embeddings != 0 && cfg->tied_embeddings != 1)
        return xf_errorf(XF_EINVAL, "model config: tied_embeddings must be 0 or 1");
    if (cfg->qkv_bias != 0 && cfg->qkv_bias != 1) return xf_errorf(XF_EINVAL, "model config: qkv_bias must be 0 or 1");
    if ((cfg->o_bias != 0 && cfg->o_bias != 1) || (cfg->mlp_bias != 0 && cfg->mlp_bias != 1) ||
        (cfg->qk_norm != 0 && cfg->qk_norm != 1))
        return xf_errorf(XF_EINVAL, "model config: o_bias, mlp_bias and qk_norm must be 0 or 1");
    if (cfg->sliding_window < 0 || cfg->sliding_window > CFG_MAX_CTX)
        return xf_errorf(XF_EINVAL, "model config: sliding_window = %lld out of range [0, %lld]", (long long)cfg->sliding_window,
                         (long long)CFG_MAX_CTX);
    if ((cfg->sliding_window > 0) != (model_windowed_layers(cfg) > 0))
        return xf_errorf(XF_EINVAL, "model config: sliding_window = %lld but %lld windowed layers", (long long)cfg->sliding_window,
                         (long long)model_windowed_layers(cfg));
    if (cfg->n_experts < 0 || cfg->n_experts > CFG_MAX_EXPERTS)
        return xf_errorf(XF_EINVAL, "model config: n_experts = %lld out of range [0, %lld]", (long long)cfg->n_experts,
                         (long long)CFG_MAX_EXPERTS);
    if (cfg->n_experts > 0) {
        if (cfg->experts_per_tok < 1 || cfg->experts_per_tok > cfg->n_experts)
            return xf_errorf(XF_EINVAL, "model config: experts_per_tok (top-k) = %lld must lie in [1, n_experts = %lld]",
                             (long long)cfg->experts_per_tok, (long long)cfg->n_experts);
        xf_status s2 = check_range("d_ff_expert", cfg->d_ff_expert, CFG_MAX_D_FF);
        if (s2) return s2;
        if (cfg->norm_topk_prob != 0 && cfg->norm_topk_prob != 1)
            return xf_errorf(XF_EINVAL, "model config: norm_topk_prob must be 0 or 1");
        if ((int)cfg->moe_score < 0 || cfg->moe_score >= MOE_SCORING_COUNT)
            return xf_errorf(XF_EINVAL, "model config: router scoring %d is unknown", (int)cfg->moe_score);
    }
    if (cfg->d_ff_shared < 0 || cfg->d_ff_shared > CFG_MAX_D_FF || (cfg->d_ff_shared > 0 && cfg->n_experts <= 0))
        return xf_errorf(XF_EINVAL, "model config: d_ff_shared = %lld: a shared expert needs routed experts and a size in [1, %lld]",
                         (long long)cfg->d_ff_shared, (long long)CFG_MAX_D_FF);
    if ((cfg->shared_expert_gate != 0 && cfg->shared_expert_gate != 1) || (cfg->shared_expert_gate && cfg->d_ff_shared <= 0))
        return xf_errorf(XF_EINVAL, "model config: shared_expert_gate must be 0 or 1, and 1 only with a shared expert (d_ff_shared)");
    if (!isfinite(cfg->embed_scale) || cfg->embed_scale < 0 || !isfinite(cfg->attn_scalar) || cfg->attn_scalar < 0 ||
        !isfinite(cfg->rope_local_theta) || cfg->rope_local_theta < 0)
        return xf_errorf(XF_EINVAL, "model config: embed_scale, query_pre_attn_scalar and rope_local_base_freq must be finite and >= 0");
    if ((cfg->sandwich_norms != 0 && cfg->sandwich_norms != 1) || (cfg->ffn_gelu != 0 && cfg->ffn_gelu != 1))
        return xf_errorf(XF_EINVAL, "model config: sandwich_norms and ffn_gelu must be 0 or 1");
    if (config_is_gemma3(cfg) && (model_is_mla(cfg) || cfg->n_experts > 0))
        return xf_errorf(XF_EINVAL, "model config: gemma3 with experts or latent attention is not implemented (no such family)");
    if ((s = mla_validate(cfg)) != XF_OK) return s;
    return rope_validate(&cfg->rope, cfg->max_ctx, "model config: rope scaling");
}

/* a*b + c in int64 with overflow reported as -1 (all inputs >= 0). */
static int64_t mul_add(int64_t a, int64_t b, int64_t c) {
    int64_t p, r;
    if (a < 0 || b < 0 || c < 0) return -1;
    if (__builtin_mul_overflow(a, b, &p) || __builtin_add_overflow(p, c, &r)) return -1;
    return r;
}

/* Parameters of one MLA attention block (DeepseekV3Attention, no biases): q_a (q_lora, d), its
 * RMSNorm (q_lora) and q_b (h * qk_head, q_lora), or q_proj (h * qk_head, d) without a q rank;
 * kv_a_proj_with_mqa (kv_lora + qk_rope, d), its RMSNorm (kv_lora), kv_b (h * (qk_nope + v),
 * kv_lora), o_proj (d, h * v). -1 on overflow. */
static int64_t mla_attn_params(const model_config *cfg) {
    const int64_t d = cfg->d_model, h = cfg->n_heads, r = cfg->kv_lora_rank, qr = cfg->q_lora_rank;
    const int64_t q_out = mul_add(h, cfg->qk_nope_head_dim + cfg->qk_rope_head_dim, 0);
    int64_t n = qr > 0 ? mul_add(d, qr, mul_add(qr, q_out, qr)) : mul_add(d, q_out, 0);
    n = mul_add(d, r + cfg->qk_rope_head_dim, mul_add(1, r, n));
    n = mul_add(r, mul_add(h, cfg->qk_nope_head_dim + cfg->v_head_dim, 0), n);
    return mul_add(mul_add(h, cfg->v_head_dim, 0), d, n);
}

/* Parameters of the model, counting `experts` routed experts per MoE layer (all of them for the
 * total, experts_per_tok for the active count). */
static int64_t param_count(const model_config *cfg, int64_t experts) {
    if (!cfg || cfg->n_layers <= 0 || cfg->d_model <= 0 || cfg->n_heads <= 0 || cfg->n_kv_heads <= 0 ||
        cfg->head_dim <= 0 || cfg->d_ff <= 0 || cfg->vocab <= 0)
        return -1;
    const int64_t d = cfg->d_model;
    int64_t q_width = mul_add(cfg->n_heads, cfg->head_dim, 0);   /* n_heads*head_dim */
    int64_t kv_width = mul_add(cfg->n_kv_heads, cfg->head_dim, 0);
    if (q_width < 0 || kv_width < 0) return -1;
    int64_t layer = 0;
    if (model_is_mla(cfg)) {
        layer = mla_attn_params(cfg);
    } else {
        layer = mul_add(d, q_width, layer);        /* wq (q_width, d) */
        layer = mul_add(d, 2 * kv_width, layer);   /* wk, wv (kv_width, d) each */
        layer = mul_add(q_width, d, layer);        /* wo (d, q_width) */
    }
    if (cfg->qkv_bias) layer = mul_add(1, q_width + 2 * kv_width, layer);
    if (cfg->o_bias) layer = mul_add(1, d, layer);
    if (cfg->qk_norm) layer = mul_add(2, cfg->head_dim, layer); /* q_norm, k_norm (head_dim) */
    layer = mul_add(2, d, layer);              /* attention and FFN RMSNorm weights */
    if (cfg->sandwich_norms) layer = mul_add(2, d, layer); /* gemma3: post-attention and post-feedforward norms */
    int64_t dense = mul_add(3 * d, cfg->d_ff, 0); /* w_gate, w_up (d_ff, d), w_down (d, d_ff) */
    if (cfg->mlp_bias) dense = mul_add(2, cfg->d_ff, mul_add(1, d, dense)); /* gate, up (d_ff), down (d) biases */
    /* MoE layer: the router (n_experts, d) and `experts` SwiGLU experts of d_ff_expert */
    int64_t moe = cfg->n_experts > 0 ? mul_add(cfg->n_experts, d, mul_add(experts, mul_add(3 * d, cfg->d_ff_expert, 0), 0)) : 0;
    /* deepseek_v3's shared experts are one ungated MLP of d_ff_shared (the router's
     * e_score_correction_bias is a buffer, not a parameter: transformers does not count it);
     * qwen2_moe's shared expert and its gate (1, d) */
    if (cfg->n_experts > 0 && cfg->d_ff_shared > 0) moe = mul_add(3 * d, cfg->d_ff_shared, moe);
    if (cfg->n_experts > 0 && cfg->shared_expert_gate) moe = mul_add(1, d, moe);
    const int64_t n_moe = model_moe_layers(cfg);
    if (layer < 0 || dense < 0 || moe < 0) return -1;
    int64_t total = mul_add(layer, cfg->n_layers, 0);
    total = mul_add(dense, cfg->n_layers - n_moe, total);
    total = mul_add(moe, n_moe, total);
    total = mul_add(cfg->vocab, d, total);     /* token embedding (vocab, d) */
    total = mul_add(1, d, total);              /* final norm */
    if (!cfg->tied_embeddings) total = mul_add(cfg->vocab, d, total); /* lm_head (vocab, d) */
    return total;
}

int64_t config_param_count(const model_config *cfg) { return param_count(cfg, cfg ? cfg->n_experts : 0); }

int64_t config_active_param_count(const model_config *cfg) { return param_count(cfg, cfg ? cfg->experts_per_tok : 0); }

int64_t config_kv_elems_per_token(const model_config *cfg) {
    if (!cfg || cfg->n_layers <= 0 || cfg->n_kv_heads <= 0 || cfg->head_dim <= 0) return -1;
    if (model_is_mla(cfg)) return mul_add(cfg->n_layers, cfg->kv_lora_rank + cfg->qk_rope_head_dim, 0); /* c_kv, k_rope */
    int64_t r = mul_add(cfg->n_layers, cfg->n_kv_heads, 0);
    r = mul_add(r, cfg->head_dim, 0);
    return mul_add(r, 2, 0);
}

/* ---- Hugging Face config.json ---- */

/* cfg->name from a path: the folder name for ".../<model>/config.json", else the file name. */
static void name_from_path(const char *path, char *buf, size_t len) {
    const char *end = path + strlen(path);
    while (end > path && end[-1] == '/') end--;
    const char *base = end;
    while (base > path && base[-1] != '/') base--;
    size_t blen = (size_t)(end - base);
    if (blen == strlen("config.json") && strncmp(base, "config.json", blen) == 0 && base > path) {
        const char *dend = base;
        while (dend > path && dend[-1] == '/') dend--;
        const char *dbase = dend;
        while (dbase > path && dbase[-1] != '/') dbase--;
        if (dend > dbase && !(dend - dbase == 1 && *dbase == '.')) {
            base = dbase;
            blen = (size_t)(dend - dbase);
        }
    }
    if (blen == 0) {
        snprintf(buf, len, "hf-config");
        return;
    }
    if (blen >= len) blen = len - 1;
    memcpy(buf, base, blen);
    buf[blen] = '\0';
}

/* One number of a rope object: required (present must end 1) or optional. */
static xf_status rope_num(const cJSON *o, const char *key, const char *ctx, int required, double *out) {
    int present = 0;
    xf_status s = json_opt_number(o, key, ctx, out, &present);
    if (s) return s;
    if (required && !present) return xf_errorf(XF_EINVAL, "%s: field '%s' is missing (this rope type needs it)", ctx, key);
    return XF_OK;
}

/* rope_theta and the scaling object: transformers 4 writes "rope_theta" and "rope_scaling"
 * ({"rope_type" or "type": ...}), transformers 5 one "rope_parameters" object holding both. */
static xf_status parse_rope(const cJSON *root, const char *ctx, model_config *cfg) {
    xf_status s;
    int present = 0;
    cfg->rope_theta = 10000.0;
    memset(&cfg->rope, 0, sizeof cfg->rope);
    if ((s = json_opt_number(root, "rope_theta", ctx, &cfg->rope_theta, &present)) != XF_OK) return s;
    const char *names[2] = {"rope_parameters", "rope_scaling"};
    const cJSON *obj = NULL;
    const char *oname = NULL;
    char octx[2][256];
    for (int i = 0; i < 2; i++) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, names[i]);
        if (!o || cJSON_IsNull(o)) continue;
        if (!cJSON_IsObject(o)) return xf_errorf(XF_EINVAL, "%s: field '%s' must be an object", ctx, names[i]);
        snprintf(octx[i], sizeof octx[i], "%s: %s", ctx, names[i]);
        if (i == 0 && !present) {
            if ((s = json_opt_number(o, "rope_theta", octx[i], &cfg->rope_theta, &present)) != XF_OK) return s;
        }
        if (!obj) {
            obj = o;
            oname = names[i];
        } else {
            /* both spellings: they must agree on the type */
            char t0[32] = "default", t1[32] = "default";
            int p0 = 0, p1 = 0;
            json_opt_string(obj, "rope_type", ctx, t0, sizeof t0, &p0);
            if (!p0) json_opt_string(obj, "type", ctx, t0, sizeof t0, &p0);
            json_opt_string(o, "rope_type", ctx, t1, sizeof t1, &p1);
            if (!p1) json_opt_string(o, "type", ctx, t1, sizeof t1, &p1);
            if (strcmp(t0, t1) != 0)
                return xf_errorf(XF_EINVAL, "%s: fields 'rope_parameters' (type '%s') and 'rope_scaling' (type '%s') disagree", ctx,
                                 t0, t1);
        }
    }
    if (present && !(cfg->rope_theta > 0 && isfinite(cfg->rope_theta)))
        return xf_errorf(XF_EINVAL, "%s: field 'rope_theta' must be > 0, got %g", ctx, cfg->rope_theta);
    if (!obj) return XF_OK;
    const char *rctx = octx[oname == names[0] ? 0 : 1];
    /* every key must be one xfprof knows: an unknown one may change the math */
    static const char *const k_keys[] = {"rope_type", "type", "rope_theta", "factor", "low_freq_factor", "high_freq_factor",
                                         "original_max_position_embeddings", "beta_fast", "beta_slow", "attention_factor",
                                         "mscale", "mscale_all_dim", "truncate", "partial_rotary_factor"};
    for (const cJSON *e = obj->child; e; e = e->next) {
        size_t k = 0;
        while (k < sizeof k_keys / sizeof k_keys[0] && strcmp(e->string, k_keys[k]) != 0) k++;
        if (k == sizeof k_keys / sizeof k_keys[0])
            return xf_errorf(XF_EINVAL, "%s: field '%.60s' is not one xfprof implements; refusing rather than "
                             "ignoring it", rctx, e->string);
    }
    char type[32] = "default";
    if ((s = json_opt_string(obj, "rope_type", rctx, type, sizeof type, &present)) != XF_OK) return s;
    if (!present && (s = json_opt_string(obj, "type", rctx, type, sizeof type, &present)) != XF_OK) return s;
    int kind = rope_kind_parse(type);
    if (kind < 0)
        return xf_errorf(XF_EINVAL, "%s: field 'rope_type' is '%.32s'; xfprof implements default, linear, dynamic, "
                         "llama3 and yarn RoPE", rctx, type);
    double prf = 1.0;
    if ((s = rope_num(obj, "partial_rotary_factor", rctx, 0, &prf)) != XF_OK) return s;
    if (prf != 1.0)
        return xf_errorf(XF_EINVAL, "%s: field 'partial_rotary_factor' is %g; xfprof rotates whole heads only", rctx, prf);
    rope_scaling *r = &cfg->rope;
    r->kind = (rope_kind)kind;
    r->factor = 1.0;
    if (kind == ROPE_DEFAULT) return XF_OK;
    if ((s = rope_num(obj, "mscale_all_dim", rctx, 0, &r->mscale_all_dim)) != XF_OK) return s; /* deepseek_v3's softmax scale */
    int64_t orig = 0;
    if ((s = json_opt_int(obj, "original_max_position_embeddings", rctx, 1, CFG_MAX_CTX, &orig, &present)) != XF_OK) return s;
    if (kind == ROPE_LINEAR || kind == ROPE_DYNAMIC || kind == ROPE_LLAMA3) {
        if ((s = rope_num(obj, "factor", rctx, 1, &r->factor)) != XF_OK) return s;
    }
    if (kind == ROPE_LLAMA3) {
        if (!present) return xf_errorf(XF_EINVAL, "%s: field 'original_max_position_embeddings' is missing (llama3 needs it)", rctx);
        r->original_ctx = orig;
        if ((s = rope_num(obj, "low_freq_factor", rctx, 1, &r->low_freq_factor)) != XF_OK) return s;
        if ((s = rope_num(obj, "high_freq_factor", rctx, 1, &r->high_freq_factor)) != XF_OK) return s;
    }
    if (kind == ROPE_YARN) {
        r->original_ctx = present ? orig : cfg->max_ctx;
        int fp = 0;
        if ((s = json_opt_number(obj, "factor", rctx, &r->factor, &fp)) != XF_OK) return s;
        if (!fp) r->factor = (double)cfg->max_ctx / (double)r->original_ctx; /* DeepSeek-style configs */
        double mscale = 0, mscale_all = 0, af = 0;
        int afp = 0;
        if ((s = rope_num(obj, "mscale", rctx, 0, &mscale)) != XF_OK) return s;
        if ((s = rope_num(obj, "mscale_all_dim", rctx, 0, &mscale_all)) != XF_OK) return s;
        if ((s = json_opt_number(obj, "attention_factor", rctx, &af, &afp)) != XF_OK) return s;
        r->beta_fast = 32;
        r->beta_slow = 1;
        if ((s = rope_num(obj, "beta_fast", rctx, 0, &r->beta_fast)) != XF_OK) return s;
        if ((s = rope_num(obj, "beta_slow", rctx, 0, &r->beta_slow)) != XF_OK) return s;
        if (r->beta_fast == 0) r->beta_fast = 32; /* transformers: `get("beta_fast") or 32` */
        if (r->beta_slow == 0) r->beta_slow = 1;
        r->truncate = 1;
        if ((s = json_opt_bool(obj, "truncate", rctx, &r->truncate, &present)) != XF_OK) return s;
        if (!(r->factor > 0 && isfinite(r->factor)))
            return xf_errorf(XF_EINVAL, "%s: field 'factor' must be a finite number > 0, got %g", rctx, r->factor);
        if (afp) {
            r->attention_factor = af;
        } else {
            /* transformers' get_mscale: 0.1 * m * ln(factor) + 1 for factor > 1, else 1 */
            double f = r->factor;
#define XF_MSCALE(m) (f <= 1.0 ? 1.0 : 0.1 * (m) * log(f) + 1.0)
            r->attention_factor = (mscale != 0 && mscale_all != 0) ? XF_MSCALE(mscale) / XF_MSCALE(mscale_all) : XF_MSCALE(1.0);
#undef XF_MSCALE
        }
    }
    if ((s = rope_validate(r, cfg->max_ctx, rctx)) != XF_OK) return s;
    return XF_OK;
}

/* deepseek_v3's multi-head latent attention (DeepseekV3Attention): the ranks and head parts, and
 * the shapes they must agree with. `head_dim_given`: the config holds head_dim (transformers writes
 * qk_rope_head_dim there). */
static xf_status parse_mla(const cJSON *root, const char *ctx, int head_dim_given, model_config *cfg) {
    xf_status s;
    int present = 0;
    cfg->q_lora_rank = 0;
    if ((s = json_opt_int(root, "q_lora_rank", ctx, 1, CFG_MAX_D_MODEL, &cfg->q_lora_rank, &present)) != XF_OK) return s;
    if ((s = json_get_int(root, "kv_lora_rank", ctx, 1, CFG_MAX_D_MODEL, &cfg->kv_lora_rank)) != XF_OK) return s;
    if ((s = json_get_int(root, "qk_nope_head_dim", ctx, 1, CFG_MAX_HEAD_DIM, &cfg->qk_nope_head_dim)) != XF_OK) return s;
    if ((s = json_get_int(root, "qk_rope_head_dim", ctx, 1, CFG_MAX_HEAD_DIM, &cfg->qk_rope_head_dim)) != XF_OK) return s;
    if ((s = json_get_int(root, "v_head_dim", ctx, 1, CFG_MAX_HEAD_DIM, &cfg->v_head_dim)) != XF_OK) return s;
    if (cfg->qk_rope_head_dim % 2 != 0)
        return xf_errorf(XF_EINVAL, "%s: field 'qk_rope_head_dim' (%lld) must be even: RoPE rotates pairs of dimensions", ctx,
                         (long long)cfg->qk_rope_head_dim);
    if (head_dim_given && cfg->head_dim != cfg->qk_rope_head_dim)
        return xf_errorf(XF_EINVAL, "%s: field 'head_dim' (%lld) must equal 'qk_rope_head_dim' (%lld): deepseek_v3's head_dim "
                         "is the rotated part of each head", ctx, (long long)cfg->head_dim, (long long)cfg->qk_rope_head_dim);
    cfg->head_dim = cfg->qk_rope_head_dim;
    int64_t qk_head = 0;
    if ((s = json_opt_int(root, "qk_head_dim", ctx, 1, 2 * CFG_MAX_HEAD_DIM, &qk_head, &present)) != XF_OK) return s;
    if (present && qk_head != cfg->qk_nope_head_dim + cfg->qk_rope_head_dim)
        return xf_errorf(XF_EINVAL, "%s: field 'qk_head_dim' is %lld but qk_nope_head_dim + qk_rope_head_dim = %lld + %lld = %lld",
                         ctx, (long long)qk_head, (long long)cfg->qk_nope_head_dim, (long long)cfg->qk_rope_head_dim,
                         (long long)(cfg->qk_nope_head_dim + cfg->qk_rope_head_dim));
    if (cfg->n_kv_heads != cfg->n_heads)
        return xf_errorf(XF_EINVAL, "%s: field 'num_key_value_heads' (%lld) must equal num_attention_heads (%lld) for latent "
                         "attention: kv_b_proj makes one K and V per query head (num_attention_heads * (qk_nope_head_dim + "
                         "v_head_dim) = %lld * (%lld + %lld) outputs)", ctx, (long long)cfg->n_kv_heads, (long long)cfg->n_heads,
                         (long long)cfg->n_heads, (long long)cfg->qk_nope_head_dim, (long long)cfg->v_head_dim);
    cfg->rope_interleave = 1; /* DeepseekV3Config's default */
    if ((s = json_opt_bool(root, "rope_interleave", ctx, &cfg->rope_interleave, &present)) != XF_OK) return s;
    cfg->mla_absorbed = 0;    /* transformers' form */
    return XF_OK;
}

/* deepseek_v3's MoE (DeepseekV3MoE, DeepseekV3TopkRouter): dense first layers, sigmoid scores
 * with a correction bias, group-limited top-k, a scaling factor and shared experts. All layers may
 * be dense (first_k_dense_replace >= num_hidden_layers): then n_experts stays 0, but the routing
 * fields given must still agree. */
static xf_status parse_deepseek_moe(const cJSON *root, const char *ctx, model_config *cfg) {
    xf_status s;
    int present = 0;
    char str[32];
    /* the original (remote-code) config's switches: transformers implements one choice of each */
    static const struct { const char *key, *only; } k_only[] = {{"scoring_func", "sigmoid"}, {"topk_method", "noaux_tc"}};
    for (size_t i = 0; i < sizeof k_only / sizeof k_only[0]; i++) {
        if ((s = json_opt_string(root, k_only[i].key, ctx, str, sizeof str, &present)) != XF_OK) return s;
        if (present && strcmp(str, k_only[i].only) != 0)
            return xf_errorf(XF_EINVAL, "%s: field '%s' is '%s'; xfprof implements deepseek_v3's '%s' only", ctx, k_only[i].key, str,
                             k_only[i].only);
    }
    int64_t freq = 1;
    if ((s = json_opt_int(root, "moe_layer_freq", ctx, 1, CFG_MAX_LAYERS, &freq, &present)) != XF_OK) return s;
    if (freq != 1)
        return xf_errorf(XF_EINVAL, "%s: field 'moe_layer_freq' is %lld; xfprof implements 1 (every layer from "
                         "first_k_dense_replace on is MoE, as transformers builds it)", ctx, (long long)freq);
    int64_t E = 256, k = 8, first_dense = 3, groups = 8, topk_group = 4, shared = 1;
    int e_present = 0;
    if ((s = json_opt_int(root, "n_routed_experts", ctx, 1, CFG_MAX_EXPERTS, &E, &e_present)) != XF_OK) return s;
    if ((s = json_opt_int(root, "num_experts_per_tok", ctx, 1, CFG_MAX_EXPERTS, &k, &present)) != XF_OK) return s;
    if ((s = json_opt_int(root, "first_k_dense_replace", ctx, 0, CFG_MAX_LAYERS, &first_dense, &present)) != XF_OK) return s;
    if ((s = json_opt_int(root, "n_group", ctx, 1, CFG_MAX_EXPERTS, &groups, &present)) != XF_OK) return s;
    if ((s = json_opt_int(root, "topk_group", ctx, 1, CFG_MAX_EXPERTS, &topk_group, &present)) != XF_OK) return s;
    if ((s = json_opt_int(root, "n_shared_experts", ctx, 0, CFG_MAX_EXPERTS, &shared, &present)) != XF_OK) return s;
    int64_t fe = 2048;
    if ((s = json_opt_int(root, "moe_intermediate_size", ctx, 1, CFG_MAX_D_FF, &fe, &present)) != XF_OK) return s;
    double scale = 2.5;
    if ((s = json_opt_number(root, "routed_scaling_factor", ctx, &scale, &present)) != XF_OK) return s;
    int norm = 1;
    if ((s = json_opt_bool(root, "norm_topk_prob", ctx, &norm, &present)) != XF_OK) return s;
    const int any_moe = first_dense < cfg->n_layers;
    if (any_moe && !e_present)
        return xf_errorf(XF_EINVAL, "%s: missing field 'n_routed_experts' (layers %lld.. are MoE: first_k_dense_replace = %lld < "
                         "num_hidden_layers = %lld)", ctx, (long long)first_dense, (long long)first_dense, (long long)cfg->n_layers);
    if (!e_present) return XF_OK; /* an all-dense model without routing fields */
    if (k > E)
        return xf_errorf(XF_EINVAL, "%s: field 'num_experts_per_tok' (%lld) exceeds n_routed_experts (%lld)", ctx, (long long)k,
                         (long long)E);
    if (E % groups != 0)
        return xf_errorf(XF_EINVAL, "%s: field 'n_routed_experts' (%lld) is not divisible by n_group (%lld): %lld = %lld * %lld + %lld",
                         ctx, (long long)E, (long long)groups, (long long)E, (long long)groups, (long long)(E / groups),
                         (long long)(E % groups));
    if (topk_group > groups)
        return xf_errorf(XF_EINVAL, "%s: field 'topk_group' (%lld) exceeds n_group (%lld)", ctx, (long long)topk_group,
                         (long long)groups);
    if (E / groups < 2)
        return xf_errorf(XF_EINVAL, "%s: n_routed_experts / n_group = %lld / %lld = %lld expert(s) per group; the group score sums "
                         "each group's two best experts, so a group needs at least 2", ctx, (long long)E, (long long)groups,
                         (long long)(E / groups));
    if (k > topk_group * (E / groups))
        return xf_errorf(XF_EINVAL, "%s: field 'num_experts_per_tok' (%lld) exceeds the experts of the kept groups: topk_group * "
                         "n_routed_experts / n_group = %lld * %lld = %lld", ctx, (long long)k, (long long)topk_group,
                         (long long)(E / groups), (long long)(topk_group * (E / groups)));
    if (!(isfinite(scale) && scale > 0 && scale <= 1e6))
        return xf_errorf(XF_EINVAL, "%s: field 'routed_scaling_factor' must be a finite number in (0, 1e6], got %g", ctx, scale);
    if (!any_moe) return XF_OK;
    cfg->n_experts = E;
    cfg->experts_per_tok = k;
    cfg->d_ff_expert = fe;
    cfg->norm_topk_prob = norm;
    cfg->moe_score = MOE_SCORE_SIGMOID_GROUPED;
    cfg->n_group = groups;
    cfg->topk_group = topk_group;
    cfg->routed_scaling_factor = scale;
    cfg->d_ff_shared = shared * fe; /* DeepseekV3MLP(intermediate_size = moe_intermediate_size * n_shared_experts) */
    for (int64_t l = 0; l < first_dense && l < cfg->n_layers; l++) cfg->dense_layers[l / 64] |= UINT64_C(1) << (l % 64);
    return XF_OK;
}

/* gemma3's RoPE (Gemma3TextConfig.convert_rope_params_to_dict): the global (full_attention) layers
 * take rope_theta (default 1e6) and rope_scaling, the local (sliding_attention) layers plain RoPE at
 * rope_local_base_freq (default 1e4). transformers 5 writes one rope_parameters object keyed by the
 * layer type; transformers 4 the flat fields. */
static xf_status parse_gemma3_rope(const cJSON *root, const char *ctx, model_config *cfg) {
    xf_status s;
    int present = 0;
    cfg->rope_local_theta = 10000.0;
    if ((s = json_opt_number(root, "rope_local_base_freq", ctx, &cfg->rope_local_theta, &present)) != XF_OK) return s;
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (!rp || cJSON_IsNull(rp)) {
        if ((s = parse_rope(root, ctx, cfg)) != XF_OK) return s;
        if (!cJSON_GetObjectItemCaseSensitive(root, "rope_theta") || cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, "rope_theta")))
            cfg->rope_theta = 1000000.0; /* Gemma3TextConfig.default_theta["global"] */
    } else {
        if (!cJSON_IsObject(rp)) return xf_errorf(XF_EINVAL, "%s: field 'rope_parameters' must be an object", ctx);
        const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
        if (rs && !cJSON_IsNull(rs))
            return xf_errorf(XF_EINVAL, "%s: both 'rope_parameters' and 'rope_scaling' are set on a gemma3 config; keep one", ctx);
        const cJSON *full = NULL, *local = NULL;
        for (const cJSON *e = rp->child; e; e = e->next) {
            if (strcmp(e->string, "full_attention") == 0) full = e;
            else if (strcmp(e->string, "sliding_attention") == 0) local = e;
            else
                return xf_errorf(XF_EINVAL, "%s: field 'rope_parameters.%.40s': a gemma3 config keys its RoPE by layer type "
                                 "(full_attention, sliding_attention)", ctx, e->string);
        }
        cJSON *tmp = cJSON_CreateObject();
        if (!tmp || (full && !cJSON_IsNull(full) && !cJSON_AddItemToObject(tmp, "rope_parameters", cJSON_Duplicate(full, 1)))) {
            cJSON_Delete(tmp);
            return xf_errorf(XF_ENOMEM, "out of memory");
        }
        char fctx[300];
        snprintf(fctx, sizeof fctx, "%s: rope_parameters.full_attention", ctx);
        s = parse_rope(tmp, fctx, cfg);
        const int theta_given = full && cJSON_IsObject(full) && cJSON_GetObjectItemCaseSensitive(full, "rope_theta");
        cJSON_Delete(tmp);
        if (s) return s;
        if (!theta_given) cfg->rope_theta = 1000000.0;
        if (local && !cJSON_IsNull(local)) {
            char lctx[300];
            snprintf(lctx, sizeof lctx, "%s: rope_parameters.sliding_attention", ctx);
            if (!cJSON_IsObject(local)) return xf_errorf(XF_EINVAL, "%s must be an object", lctx);
            for (const cJSON *e = local->child; e; e = e->next)
                if (strcmp(e->string, "rope_type") != 0 && strcmp(e->string, "rope_theta") != 0)
                    return xf_errorf(XF_EINVAL, "%s: field '%.40s' is not implemented (the local layers run plain RoPE)", lctx, e->string);
            char type[32] = "default";
            if ((s = json_opt_string(local, "rope_type", lctx, type, sizeof type, &present)) != XF_OK) return s;
            if (strcmp(type, "default") != 0)
                return xf_errorf(XF_EINVAL, "%s: field 'rope_type' is '%s'; xfprof implements default RoPE on gemma3's local layers", lctx, type);
            if ((s = json_opt_number(local, "rope_theta", lctx, &cfg->rope_local_theta, &present)) != XF_OK) return s;
        }
    }
    if (!(cfg->rope_local_theta > 0))
        return xf_errorf(XF_EINVAL, "%s: field 'rope_local_base_freq' must be > 0, got %g", ctx, cfg->rope_local_theta);
    return XF_OK;
}

/* gemma3's own math beside what parse_obj reads for every family: the embedding scale, the
 * sandwich norms, GeGLU, query_pre_attn_scalar. */
static xf_status parse_gemma3(const cJSON *root, const char *ctx, model_config *cfg) {
    xf_status s;
    int present = 0, bidir = 0;
    if ((s = json_opt_bool(root, "use_bidirectional_attention", ctx, &bidir, &present)) != XF_OK) return s;
    if (bidir)
        return xf_errorf(XF_EINVAL, "%s: field 'use_bidirectional_attention' is true; xfprof runs causal decoders only", ctx);
    char act[32] = "gelu_pytorch_tanh";
    if ((s = json_opt_string(root, "hidden_activation", ctx, act, sizeof act, &present)) != XF_OK) return s;
    if (strcmp(act, "gelu_pytorch_tanh") != 0)
        return xf_errorf(XF_EINVAL, "%s: field 'hidden_activation' is '%s'; xfprof implements gemma3's gelu_pytorch_tanh only", ctx, act);
    cfg->ffn_gelu = 1;
    cfg->sandwich_norms = 1;
    cfg->qk_norm = 1;
    /* Gemma3TextScaledWordEmbedding: hidden_size ** 0.5 as a float32 tensor */
    cfg->embed_scale = (double)(float)sqrt((double)cfg->d_model);
    cfg->attn_scalar = 256;
    if ((s = json_opt_number(root, "query_pre_attn_scalar", ctx, &cfg->attn_scalar, &present)) != XF_OK) return s;
    if (!(cfg->attn_scalar > 0))
        return xf_errorf(XF_EINVAL, "%s: field 'query_pre_attn_scalar' must be > 0, got %g", ctx, cfg->attn_scalar);
    return XF_OK;
}

static xf_status parse_obj(const cJSON *root, const char *ctx, model_config *cfg);

/* A multimodal gemma3 config: its text_config is the decoder xfprof profiles (the vision tower
 * and the projector are not modelled; the counts are the language model's). */
static xf_status parse_gemma3_multimodal(const cJSON *root, const char *ctx, model_config *cfg) {
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (!tc || !cJSON_IsObject(tc))
        return xf_errorf(XF_EINVAL, "%s: a model_type gemma3 config needs its 'text_config' object (the language model)", ctx);
    char tctx[300], mt[32];
    snprintf(tctx, sizeof tctx, "%s: text_config", ctx);
    xf_status s = json_get_string(tc, "model_type", tctx, mt, sizeof mt);
    if (s) return s;
    if (strcmp(mt, "gemma3_text") != 0)
        return xf_errorf(XF_EINVAL, "%s: field 'model_type' is '%s'; a gemma3 config's text_config must be gemma3_text", tctx, mt);
    if ((s = parse_obj(tc, tctx, cfg)) != XF_OK) return s;
    memset(cfg->arch, 0, sizeof cfg->arch);
    memcpy(cfg->arch, "gemma3", sizeof "gemma3");
    return XF_OK;
}

static xf_status parse_obj(const cJSON *root, const char *ctx, model_config *cfg) {
    xf_status s;
    int present = 0;
    char mtype[32];
    if (!cJSON_IsObject(root)) return xf_errorf(XF_EINVAL, "%s: a config.json must be a JSON object", ctx);
    if ((s = json_get_string(root, "model_type", ctx, mtype, sizeof mtype)) != XF_OK) {
        if (cJSON_GetObjectItemCaseSensitive(root, "model_type") && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "model_type")))
            return xf_errorf(XF_EINVAL, "%s: field 'model_type' is not supported (too long); xfprof reads llama, mistral and qwen2", ctx);
        return s;
    }
    if (strcmp(mtype, "gemma3") == 0) return parse_gemma3_multimodal(root, ctx, cfg);
    static const char *const k_types[] = {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3",
                                          "gemma3_text"};
    const char *arch = NULL;
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
        if (strcmp(mtype, k_types[i]) == 0) arch = k_types[i];
    if (!arch)
        return xf_errorf(XF_EINVAL, "%s: field 'model_type' is '%s'; xfprof reads llama, mistral, qwen2, qwen3, mixtral, "
                         "qwen2_moe, qwen3_moe, deepseek_v3, gemma3_text and gemma3", ctx, mtype);
    /* mixtral's attention is mistral's, qwen3_moe's is qwen3's */
    const int is_mixtral = strcmp(arch, "mixtral") == 0, is_qwen3_moe = strcmp(arch, "qwen3_moe") == 0;
    const int is_qwen2_moe = strcmp(arch, "qwen2_moe") == 0; /* qwen2's attention (qkv_bias), a shared expert */
    const int is_qwen2 = strcmp(arch, "qwen2") == 0 || is_qwen2_moe, is_qwen3 = strcmp(arch, "qwen3") == 0 || is_qwen3_moe;
    const int is_llama = strcmp(arch, "llama") == 0, is_mistral = strcmp(arch, "mistral") == 0 || is_mixtral;
    const int is_deepseek = strcmp(arch, "deepseek_v3") == 0, is_gemma = strcmp(arch, "gemma3_text") == 0;
    memcpy(cfg->arch, arch, strlen(arch) + 1);

    /* Required sizes: whole numbers in [1, limit]; json_get_int names the field on error. */
    if ((s = json_get_int(root, "hidden_size", ctx, 1, CFG_MAX_D_MODEL, &cfg->d_model)) != XF_OK) return s;
    if ((s = json_get_int(root, "intermediate_size", ctx, 1, CFG_MAX_D_FF, &cfg->d_ff)) != XF_OK) return s;
    if ((s = json_get_int(root, "num_hidden_layers", ctx, 1, CFG_MAX_LAYERS, &cfg->n_layers)) != XF_OK) return s;
    if ((s = json_get_int(root, "num_attention_heads", ctx, 1, CFG_MAX_HEADS, &cfg->n_heads)) != XF_OK) return s;
    if ((s = json_get_int(root, "vocab_size", ctx, 1, CFG_MAX_VOCAB, &cfg->vocab)) != XF_OK) return s;
    if ((s = json_get_int(root, "max_position_embeddings", ctx, 1, CFG_MAX_CTX, &cfg->max_ctx)) != XF_OK) return s;

    cfg->n_kv_heads = cfg->n_heads;
    if ((s = json_opt_int(root, "num_key_value_heads", ctx, 1, CFG_MAX_HEADS, &cfg->n_kv_heads, &present)) != XF_OK) return s;
    if (cfg->n_kv_heads > cfg->n_heads)
        return xf_errorf(XF_EINVAL, "%s: field 'num_key_value_heads' (%lld) exceeds num_attention_heads (%lld)", ctx,
                         (long long)cfg->n_kv_heads, (long long)cfg->n_heads);
    if (cfg->n_heads % cfg->n_kv_heads != 0)
        return xf_errorf(XF_EINVAL, "%s: field 'num_attention_heads' (%lld) is not a multiple of 'num_key_value_heads' (%lld)", ctx,
                         (long long)cfg->n_heads, (long long)cfg->n_kv_heads);

    /* head_dim, when given, is authoritative (it need not equal hidden_size / heads). */
    if ((s = json_opt_int(root, "head_dim", ctx, 1, CFG_MAX_HEAD_DIM, &cfg->head_dim, &present)) != XF_OK) return s;
    if (is_deepseek) {
        if ((s = parse_mla(root, ctx, present, cfg)) != XF_OK) return s;
    } else if (!present && is_gemma) {
        cfg->head_dim = 256; /* Gemma3TextConfig's default, whatever hidden_size / heads is */
    } else if (!present) {
        if (cfg->d_model % cfg->n_heads != 0)
            return xf_errorf(XF_EINVAL, "%s: field 'hidden_size' (%lld) is not a multiple of 'num_attention_heads' (%lld) and no 'head_dim' is given", ctx,
                             (long long)cfg->d_model, (long long)cfg->n_heads);
        cfg->head_dim = cfg->d_model / cfg->n_heads;
    }

    if ((s = (is_gemma ? parse_gemma3_rope : parse_rope)(root, ctx, cfg)) != XF_OK) return s;
    cfg->norm_eps = 1e-6;
    if ((s = json_opt_number(root, "rms_norm_eps", ctx, &cfg->norm_eps, &present)) != XF_OK) return s;
    if (present && !(cfg->norm_eps > 0 && cfg->norm_eps < 1))
        return xf_errorf(XF_EINVAL, "%s: field 'rms_norm_eps' must lie in (0, 1), got %g", ctx, cfg->norm_eps);
    cfg->tied_embeddings = is_gemma; /* Gemma3TextConfig ties by default */
    if ((s = json_opt_bool(root, "tie_word_embeddings", ctx, &cfg->tied_embeddings, &present)) != XF_OK) return s;

    /* Biases, as each family's modeling code builds its nn.Linear layers: qwen2 always has Q/K/V
     * biases and never an o_proj one; llama and qwen3 bias all four with attention_bias; mistral's
     * layers are bias-free whatever the config says; only llama reads mlp_bias. */
    int attn_bias = 0, mlp_bias = 0;
    if ((s = json_opt_bool(root, "attention_bias", ctx, &attn_bias, &present)) != XF_OK) return s;
    if ((s = json_opt_bool(root, "mlp_bias", ctx, &mlp_bias, &present)) != XF_OK) return s;
    if (is_deepseek && attn_bias)
        return xf_errorf(XF_EINVAL, "%s: field 'attention_bias' is true: biases on deepseek_v3's q_a_proj, kv_a_proj_with_mqa "
                         "and o_proj are not implemented in xfprof", ctx);
    cfg->qkv_bias = is_qwen2 ? 1 : (is_llama || is_qwen3 || is_gemma) ? attn_bias : 0;
    if (is_qwen2_moe && (s = json_opt_bool(root, "qkv_bias", ctx, &cfg->qkv_bias, &present)) != XF_OK) return s; /* default true */
    cfg->o_bias = (is_llama || is_qwen3 || is_gemma) ? attn_bias : 0;
    cfg->mlp_bias = is_llama ? mlp_bias : 0;
    cfg->qk_norm = is_qwen3;

    /* Sliding windows, as each family's code reads them: mistral windows every layer when
     * sliding_window is set; qwen2/qwen3 only with use_sliding_window, on the layers layer_types
     * names sliding_attention (or, without layer_types, layers >= max_window_layers); llama has none. */
    int64_t win = 0;
    int win_present = 0, use_sw = 0;
    memset(cfg->window_layers, 0, sizeof cfg->window_layers);
    cfg->sliding_window = 0;
    const cJSON *swf = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    const int sw_zero = is_qwen2_moe && cJSON_IsNumber(swf) && swf->valuedouble == 0; /* qwen2_moe's "no window" */
    if (!sw_zero && (s = json_opt_int(root, "sliding_window", ctx, 1, CFG_MAX_CTX, &win, &win_present)) != XF_OK) return s;
    if (is_qwen2 || is_qwen3) {
        if ((s = json_opt_bool(root, "use_sliding_window", ctx, &use_sw, &present)) != XF_OK) return s;
        if (use_sw && !win_present)
            return xf_errorf(XF_EINVAL, "%s: field 'use_sliding_window' is true but 'sliding_window' is not set", ctx);
        if (!use_sw) win_present = 0; /* transformers: sliding_window = None without use_sliding_window */
    }
    if (is_llama || is_deepseek) win_present = 0; /* LlamaAttention and DeepseekV3Attention have no window */
    if (is_gemma && !swf) win = 4096, win_present = 1; /* Gemma3TextConfig's default */
    if (is_gemma && !win_present)
        return xf_errorf(XF_EINVAL, "%s: field 'sliding_window' is null on a gemma3 config: its local layers need a window", ctx);
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (lt && !cJSON_IsNull(lt)) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != (int)cfg->n_layers)
            return xf_errorf(XF_EINVAL, "%s: field 'layer_types' must be an array of num_hidden_layers (%lld) strings", ctx,
                             (long long)cfg->n_layers);
        if (is_mistral)
            return xf_errorf(XF_EINVAL, "%s: field 'layer_types' on a mistral config: transformers' Mistral ignores it "
                             "(Ministral reads it); refusing rather than guessing which is meant", ctx);
        int li = 0;
        for (const cJSON *e = lt->child; e; e = e->next, li++) {
            if (!cJSON_IsString(e)) return xf_errorf(XF_EINVAL, "%s: field 'layer_types[%d]' must be a string", ctx, li);
            int sliding = strcmp(e->valuestring, "sliding_attention") == 0;
            if (!sliding && strcmp(e->valuestring, "full_attention") != 0)
                return xf_errorf(XF_EINVAL, "%s: field 'layer_types[%d]' is '%.40s': xfprof implements full_attention and "
                                 "sliding_attention layers", ctx, li, e->valuestring);
            if (sliding && !win_present)
                return xf_errorf(XF_EINVAL, "%s: field 'layer_types[%d]' is sliding_attention but no window is in force (%s)", ctx,
                                 li, is_llama ? "llama has no sliding window" : "set sliding_window and use_sliding_window");
            if (sliding) cfg->window_layers[li / 64] |= UINT64_C(1) << (li % 64);
        }
    } else if (is_gemma) { /* sliding_window_pattern (default 6): layer l is local unless (l + 1) % pattern == 0 */
        int64_t pattern = 6;
        if ((s = json_opt_int(root, "sliding_window_pattern", ctx, 1, CFG_MAX_LAYERS, &pattern, &present)) != XF_OK) return s;
        for (int64_t l = 0; l < cfg->n_layers; l++)
            if ((l + 1) % pattern != 0) cfg->window_layers[l / 64] |= UINT64_C(1) << (l % 64);
    } else if (win_present) {
        int64_t first = 0;
        if ((is_qwen2 || is_qwen3) && !is_qwen3_moe) { /* qwen3_moe windows every layer */
            first = 28; /* transformers' default max_window_layers */
            if ((s = json_opt_int(root, "max_window_layers", ctx, 0, CFG_MAX_LAYERS, &first, &present)) != XF_OK) return s;
        }
        for (int64_t l = first; l < cfg->n_layers; l++) cfg->window_layers[l / 64] |= UINT64_C(1) << (l % 64);
    }
    if (win_present) cfg->sliding_window = win;
    if (model_windowed_layers(cfg) == 0) cfg->sliding_window = 0;
    /* Mixture of experts. */
    cfg->n_experts = cfg->experts_per_tok = cfg->d_ff_expert = 0;
    cfg->norm_topk_prob = 0;
    cfg->d_ff_shared = 0;
    cfg->shared_expert_gate = 0;
    cfg->moe_score = MOE_SCORE_SOFTMAX;
    memset(cfg->dense_layers, 0, sizeof cfg->dense_layers);
    if (is_mixtral || is_qwen3_moe || is_qwen2_moe) {
        /* qwen writes num_experts; transformers 5 saves qwen3_moe's as num_local_experts (its attribute_map) */
        const char *ne = is_mixtral || (!cJSON_GetObjectItemCaseSensitive(root, "num_experts") &&
                                        cJSON_GetObjectItemCaseSensitive(root, "num_local_experts"))
                             ? "num_local_experts"
                             : "num_experts";
        if (!is_mixtral && cJSON_GetObjectItemCaseSensitive(root, "num_experts") &&
            cJSON_GetObjectItemCaseSensitive(root, "num_local_experts"))
            return xf_errorf(XF_EINVAL, "%s: both 'num_experts' and 'num_local_experts' are set; keep one (they name the same count)", ctx);
        if ((s = json_get_int(root, ne, ctx, 1, CFG_MAX_EXPERTS, &cfg->n_experts)) != XF_OK) return s;
        if ((s = json_get_int(root, "num_experts_per_tok", ctx, 1, cfg->n_experts, &cfg->experts_per_tok)) != XF_OK) return s;
        if (is_mixtral) {
            cfg->d_ff_expert = cfg->d_ff; /* mixtral's intermediate_size is each expert's */
            cfg->norm_topk_prob = 1;      /* MixtralTopKRouter always renormalizes the top-k weights */
        } else {
            if ((s = json_get_int(root, "moe_intermediate_size", ctx, 1, CFG_MAX_D_FF, &cfg->d_ff_expert)) != XF_OK) return s;
            if ((s = json_opt_bool(root, "norm_topk_prob", ctx, &cfg->norm_topk_prob, &present)) != XF_OK) return s;
            /* dense layers: mlp_only_layers, else every layer l with (l + 1) % decoder_sparse_step != 0 */
            int64_t step = 1;
            if ((s = json_opt_int(root, "decoder_sparse_step", ctx, 1, CFG_MAX_LAYERS, &step, &present)) != XF_OK) return s;
            for (int64_t l = 0; l < cfg->n_layers; l++)
                if ((l + 1) % step != 0) cfg->dense_layers[l / 64] |= UINT64_C(1) << (l % 64);
            if ((s = json_opt_index_bits(root, "mlp_only_layers", ctx, cfg->n_layers, cfg->dense_layers, MODEL_MAX_LAYERS / 64)) != XF_OK)
                return s;
            if (model_moe_layers(cfg) == 0)
                return xf_errorf(XF_EINVAL, "%s: %s config with no MoE layer (decoder_sparse_step / mlp_only_layers): "
                                 "give it as model_type %s", ctx, arch, is_qwen2_moe ? "qwen2" : "qwen3");
            if (is_qwen2_moe) { /* Qwen2MoeSparseMoeBlock: a shared expert and its sigmoid gate in every MoE layer */
                if ((s = json_get_int(root, "shared_expert_intermediate_size", ctx, 1, CFG_MAX_D_FF, &cfg->d_ff_shared)) != XF_OK)
                    return s;
                cfg->shared_expert_gate = 1;
            }
        }
        double jitter = 0;
        if ((s = json_opt_number(root, "router_jitter_noise", ctx, &jitter, &present)) != XF_OK) return s;
        (void)jitter; /* applied in training only */
    }
    if (is_deepseek && (s = parse_deepseek_moe(root, ctx, cfg)) != XF_OK) return s;
    if (is_gemma && (s = parse_gemma3(root, ctx, cfg)) != XF_OK) return s;
    /* Other fields that would change the math and that no supported family uses. */
    static const char *const k_unknown_math[] = {"attn_logit_softcapping", "final_logit_softcapping", "partial_rotary_factor",
                                                 "num_local_experts", "num_experts", "n_routed_experts", "kv_lora_rank",
                                                 "q_lora_rank"};
    for (size_t i = 0; i < sizeof k_unknown_math / sizeof k_unknown_math[0]; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, k_unknown_math[i]);
        if (!f || cJSON_IsNull(f)) continue;
        if (is_mixtral && strcmp(k_unknown_math[i], "num_local_experts") == 0) continue;
        if ((is_qwen3_moe || is_qwen2_moe) && (strcmp(k_unknown_math[i], "num_experts") == 0 || strcmp(k_unknown_math[i], "num_local_experts") == 0))
            continue;
        if (is_deepseek && (strcmp(k_unknown_math[i], "n_routed_experts") == 0 || strcmp(k_unknown_math[i], "kv_lora_rank") == 0 ||
                            strcmp(k_unknown_math[i], "q_lora_rank") == 0))
            continue;
        if (strcmp(k_unknown_math[i], "partial_rotary_factor") == 0 && cJSON_IsNumber(f) && f->valuedouble == 1.0) continue;
        return xf_errorf(XF_EINVAL, "%s: field '%s' is set; xfprof does not implement what it changes for model_type '%s'",
                         ctx, k_unknown_math[i], arch);
    }
    char act[32];
    if ((s = json_opt_string(root, "hidden_act", ctx, act, sizeof act, &present)) != XF_OK) return s;
    if (present && !is_gemma && strcmp(act, "silu") != 0) /* gemma3 reads hidden_activation (parse_gemma3) */
        return xf_errorf(XF_EINVAL, "%s: field 'hidden_act' is '%s'; xfprof models SwiGLU FFNs ('silu') only", ctx, act);

    if ((s = config_validate(cfg)) != XF_OK) return xf_error_prefix(s, "%s: ", ctx);
    return XF_OK;
}

xf_status config_parse_hf(const char *json_text, const char *source, model_config *cfg) {
    const char *ctx = source ? source : "config.json";
    if (!json_text) return xf_errorf(XF_EINVAL, "%s: no text", ctx);
    model_config c;
    memset(&c, 0, sizeof c);
    if (source) name_from_path(source, c.name, sizeof c.name);
    else snprintf(c.name, sizeof c.name, "hf-config");
    cJSON *root = NULL;
    xf_status s = json_parse(json_text, ctx, &root);
    if (s != XF_OK) return s;
    s = parse_obj(root, ctx, &c);
    cJSON_Delete(root);
    if (s == XF_OK) *cfg = c;
    return s;
}

xf_status config_load_hf(const char *path, model_config *cfg) {
    if (!path || !*path) return xf_errorf(XF_EINVAL, "no config.json path given");
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT) return xf_errorf(XF_EINVAL, "%s: no such file", path);
    char *text = NULL;
    size_t len = 0;
    xf_status s = file_read_all(path, (size_t)16 << 20, &text, &len);
    if (s != XF_OK) return s;
    if (strlen(text) != len) {
        free(text);
        return xf_errorf(XF_EPARSE, "%s: the file holds a NUL byte; it is not a JSON text", path);
    }
    s = config_parse_hf(text, path, cfg);
    free(text);
    return s;
}

xf_status config_resolve(const char *name_or_path, model_config *cfg) {
    if (!name_or_path || !*name_or_path) return xf_errorf(XF_EINVAL, "no model given: a preset name or a path to a config.json");
    for (int i = 0; i < N_PRESETS; i++)
        if (strcasecmp(name_or_path, k_presets[i].name) == 0) return config_preset(name_or_path, cfg);
    struct stat st;
    if (stat(name_or_path, &st) != 0) {
        size_t n = strlen(name_or_path);
        if (strchr(name_or_path, '/') || (n > 5 && strcmp(name_or_path + n - 5, ".json") == 0)) {
            xf_status s = config_preset(name_or_path, cfg); /* builds the list of presets */
            return xf_error_prefix(s, "%s: no such file; ", name_or_path);
        }
        return config_preset(name_or_path, cfg); /* names the presets */
    }
    if (S_ISDIR(st.st_mode)) {
        size_t n = strlen(name_or_path);
        char *p = malloc(n + sizeof "/config.json");
        if (!p) return xf_errorf(XF_ENOMEM, "out of memory");
        memcpy(p, name_or_path, n);
        memcpy(p + n, "/config.json", sizeof "/config.json");
        xf_status s;
        if (stat(p, &st) != 0) s = xf_errorf(XF_EINVAL, "%s: folder holds no config.json", name_or_path);
        else s = config_load_hf(p, cfg);
        free(p);
        return s;
    }
    return config_load_hf(name_or_path, cfg);
}
