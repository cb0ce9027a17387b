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
    MOE_SCORE_SIGMOID_GROUPED, /* deepseek_v3: sigmoid scores; the choice adds e_score_correction_bias,
                                  keeps the topk_group of n_group groups with the best sum of their
                                  two best, then top-k among them; the weights are the chosen experts'
                                  sigmoid scores (renormalized when norm_topk_prob) times
                                  routed_scaling_factor */
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
    double mscale_all_dim;   /* deepseek_v3 (any scaled type): the softmax scale is multiplied by
                                (0.1 mscale_all_dim ln(factor) + 1)^2 when factor > 1; 0: unchanged */
} rope_scaling;

typedef struct model_config {
    char name[64];       /* preset name or the path's last components */
    char arch[16];       /* "llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe" or "deepseek_v3" */
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
    moe_scoring moe_score;   /* the router's scoring (MOE_SCORE_SOFTMAX, 0, but for deepseek_v3) */
    int64_t d_ff_shared;     /* qwen2_moe, deepseek_v3: intermediate size of the shared expert every token of an MoE
                                layer runs beside the routed ones; 0: none */
    int shared_expert_gate;  /* qwen2_moe: the shared expert's output is scaled by sigmoid(x . w), w (d_model) */
    /* Multi-head latent attention (deepseek_v3), on when kv_lora_rank > 0. Per token and layer:
     * Q = q_b(RMSNorm(q_a(x))) (or q_proj(x) when q_lora_rank is 0), (n_heads, qk_nope + qk_rope);
     * [c_kv | k_rope] = kv_a(x), (kv_lora_rank + qk_rope_head_dim): the cache holds c_kv after its
     * RMSNorm and k_rope after RoPE, one row shared by every head; kv_b(c_kv) gives each head's
     * K_nope (qk_nope_head_dim) and V (v_head_dim); o_proj reads n_heads * v_head_dim. head_dim is
     * qk_rope_head_dim (the rotated part, as transformers sets it) and n_kv_heads == n_heads. */
    int64_t q_lora_rank;      /* 0: Q straight from q_proj */
    int64_t kv_lora_rank;     /* 0: not MLA */
    int64_t qk_nope_head_dim; /* un-rotated part of each Q/K head */
    int64_t qk_rope_head_dim; /* rotated part (== head_dim) */
    int64_t v_head_dim;
    int rope_interleave;      /* rotate pairs (x0, x1), (x2, x3)... instead of (x_i, x_{i+d/2}) */
    int mla_absorbed;         /* how the cost model prices MLA (not a property of the weights):
                                 0 naive (decompress every cached c_kv into K and V per head, as
                                 transformers runs it), 1 absorbed (kv_b folded into Q and the
                                 output: attention in the latent space) */
    /* DeepSeek routing (moe_score MOE_SCORE_SIGMOID_GROUPED, deepseek_v3): the groups and the
     * scaling factor; its shared experts are d_ff_shared = n_shared_experts * moe_intermediate_size
     * (one ungated SwiGLU MLP). 0 for the other scorings. */
    int64_t n_group;              /* experts split into n_group groups of n_experts / n_group */
    int64_t topk_group;           /* groups kept: those with the best sum of their two best scores */
    double routed_scaling_factor; /* the chosen experts' weights are multiplied by it */
    /* Gemma 3 (arch "gemma3_text", or "gemma3" read from a multimodal config's text_config); zero
     * for every other family. */
    double embed_scale;      /* the embedding rows are multiplied by it (gemma3: sqrt(d_model) in fp32); 0: by 1 */
    int sandwich_norms;      /* gemma3: RMSNorm of the attention's and the FFN's outputs (post_attention_layernorm,
                                post_feedforward_layernorm) before each residual add */
    int ffn_gelu;            /* the FFN's gate activation: 0 SiLU (SwiGLU), 1 gelu_pytorch_tanh (GeGLU, gemma3) */
    double attn_scalar;      /* softmax scale 1 / sqrt(attn_scalar) (gemma3's query_pre_attn_scalar); 0: head_dim */
    double rope_local_theta; /* gemma3: the windowed layers' RoPE base (rope_local_base_freq), plain RoPE
                                with no scaling; `rope` applies to the global layers only. 0: every layer
                                uses rope_theta and `rope` */
} model_config;

/* 1 when cfg uses multi-head latent attention. */
static inline int model_is_mla(const model_config *c) { return c->kv_lora_rank > 0; }

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
