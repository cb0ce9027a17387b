/* The shape of a LLaMA-style decoder: the type every part shares. Its readers (presets, Hugging
 * Face config.json), checks and counts are reference_model/config.h. */
#ifndef XF_MODEL_CONFIG_H
#define XF_MODEL_CONFIG_H

#include <stdint.h>

#define MODEL_MAX_LAYERS 4096 /* the config readers refuse more */

/* RoPE variants, as transformers computes their inverse frequencies (modeling_rope_utils.py). */
typedef enum rope_kind {
    ROPE_DEFAULT = 0, /* inv_freq[i] = theta^(-2i / head_dim) */
    ROPE_LINEAR,      /* default / factor (position interpolation) */
    ROPE_DYNAMIC,     /* NTK-aware: theta grows once a sequence exceeds max_ctx; xfprof never runs past
                         max_ctx, so within it this is the default RoPE (transformers 5 behaviour) */
    ROPE_LLAMA3,      /* Llama 3.1: low frequencies / factor, high kept, a smooth ramp between */
    ROPE_YARN,        /* YaRN: per-dimension ramp between interpolation and extrapolation, and
                         cos/sin scaled by attention_factor (DeepSeek's mscale / mscale_all_dim) */
    ROPE_KIND_COUNT
} rope_kind;

/* How a router turns its logits into the experts' weights. A new scoring function (DeepSeek-V3's
 * sigmoid with a correction bias, group-limited top-k) is a new member here and a new case in
 * reference_model/cpu_moe.c's scoring switch; the rest of the expert code does not change. */
typedef enum moe_scoring {
    MOE_SCORE_SOFTMAX = 0, /* softmax over all n_experts logits, top-k of the probabilities, renormalized
                              over the chosen ones when norm_topk_prob (mixtral, qwen2_moe, qwen3_moe) */
    MOE_SCORING_COUNT
} moe_scoring;

typedef struct rope_scaling {
    rope_kind kind;
    double factor;           /* linear, dynamic, llama3, yarn; 1 for default */
    double low_freq_factor;  /* llama3 */
    double high_freq_factor; /* llama3 */
    int64_t original_ctx;    /* llama3, yarn: original_max_position_embeddings */
    double beta_fast;        /* yarn (32 when absent) */
    double beta_slow;        /* yarn (1 when absent) */
    double attention_factor; /* yarn: cos/sin scale, from the config or computed from factor and mscale */
    int truncate;            /* yarn: floor/ceil the correction range (transformers' default 1) */
} rope_scaling;

typedef struct model_config {
    char name[64];       /* preset name or the path's last components */
    char arch[16];       /* "llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe" or "qwen3_moe" */
    int64_t n_layers;
    int64_t d_model;     /* hidden size */
    int64_t n_heads;     /* query heads */
    int64_t n_kv_heads;  /* key/value heads (== n_heads for MHA, fewer for GQA) */
    int64_t head_dim;    /* not always d_model / n_heads */
    int64_t d_ff;        /* SwiGLU intermediate size */
    int64_t vocab;
    int64_t max_ctx;     /* max_position_embeddings */
    double rope_theta;
    double norm_eps;
    int tied_embeddings; /* lm_head shares the embedding matrix */
    int qkv_bias;        /* qwen2; llama/qwen3 attention_bias: bias on the Q, K and V projections */
    /* Fields below were added for newer architectures; zero means the Llama-2 behaviour, so
     * positional initializers of the older presets stay valid. */
    int o_bias;          /* llama/qwen3 attention_bias: bias on the output projection too (d_model) */
    int mlp_bias;        /* llama mlp_bias: biases on gate, up (d_ff each) and down (d_model) */
    int qk_norm;         /* qwen3: RMSNorm over head_dim on every Q and K head before RoPE */
    rope_scaling rope;   /* kind ROPE_DEFAULT (all zero) for plain RoPE */
    int64_t sliding_window; /* keys a windowed layer's query sees, its own included (transformers:
                               key > query - window); 0 when no layer is windowed */
    uint64_t window_layers[MODEL_MAX_LAYERS / 64]; /* bit l set: layer l is windowed */
    /* Mixture of experts (mixtral, qwen3_moe): n_experts routed SwiGLU experts of d_ff_expert in
     * every layer not marked dense; a router (d_model -> n_experts logits, softmax) picks
     * experts_per_tok per token, their outputs summed with the router's weights (renormalized
     * over the chosen ones when norm_topk_prob). Dense layers keep the d_ff FFN. */
    int64_t n_experts;       /* 0: a dense model */
    int64_t experts_per_tok; /* top-k */
    int64_t d_ff_expert;     /* each expert's intermediate size */
    int norm_topk_prob;
    uint64_t dense_layers[MODEL_MAX_LAYERS / 64]; /* bit l set: layer l has the dense FFN (MoE models) */
    moe_scoring moe_score;   /* the router's scoring (MOE_SCORE_SOFTMAX, 0, for every family read today) */
    int64_t d_ff_shared;     /* qwen2_moe: intermediate size of the shared expert every token of an MoE
                                layer runs beside the routed ones; 0: none */
    int shared_expert_gate;  /* qwen2_moe: the shared expert's output is scaled by sigmoid(x . w), w (d_model) */
} model_config;

/* 1 when layer l's FFN is a mixture of experts. */
static inline int model_layer_is_moe(const model_config *c, int64_t l) {
    if (c->n_experts <= 0 || l < 0 || l >= MODEL_MAX_LAYERS) return 0;
    return !((c->dense_layers[l / 64] >> (l % 64)) & 1u);
}

/* Number of MoE layers among the first n_layers. */
static inline int64_t model_moe_layers(const model_config *c) {
    int64_t n = 0;
    for (int64_t l = 0; l < c->n_layers && l < MODEL_MAX_LAYERS; l++) n += model_layer_is_moe(c, l);
    return n;
}

/* The window of layer l (0: full causal attention). */
static inline int64_t model_layer_window(const model_config *c, int64_t l) {
    if (c->sliding_window <= 0 || l < 0 || l >= MODEL_MAX_LAYERS) return 0;
    return (c->window_layers[l / 64] >> (l % 64)) & 1u ? c->sliding_window : 0;
}

/* Number of layers marked windowed in window_layers among the first n_layers (whatever
 * sliding_window says: validators compare the two). */
static inline int64_t model_windowed_layers(const model_config *c) {
    int64_t n = 0;
    for (int64_t l = 0; l < c->n_layers && l < MODEL_MAX_LAYERS; l++) n += (c->window_layers[l / 64] >> (l % 64)) & 1u;
    return n;
}

/* "default", "linear", "dynamic", "llama3", "yarn" (the transformers rope_type names; a static
 * string, "?" out of range). */
const char *rope_kind_name(rope_kind k);
/* The kind named `s`; -1 when unknown. */
int rope_kind_parse(const char *s);

#endif
