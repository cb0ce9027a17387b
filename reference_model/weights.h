/* Model weights on the host: random from a seed at the config's real shapes, or converted from a
 * Hugging Face safetensors folder (safetensors.h). Matrices are stored row-major as (out, in), the
 * PyTorch nn.Linear layout, in fp32, bf16, fp16 (what a GPU backend may upload) or int8 with one fp32 scale per group of `group`
 * elements along the input dimension. Q, K and V are stored as one matrix (rows: Q, then K, then
 * V), and gate and up as one (rows: gate, then up), so each projection op is one GEMM. */
#ifndef XF_WEIGHTS_H
#define XF_WEIGHTS_H

#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"
#include "reference_model/config.h"

/* One weight matrix, (rows, cols) = (out features, in features). */
typedef struct wmat {
    xf_dtype dtype;  /* XF_FP32, XF_BF16, XF_FP16 or XF_INT8 */
    int64_t rows, cols;
    int group;       /* int8: elements per scale along cols; 0 otherwise */
    int64_t n_groups;/* int8: ceil(cols / group) */
    void *data;      /* (rows, cols): float, uint16_t (bf16 / fp16 bits) or int8_t */
    float *scales;   /* int8: (rows, n_groups); NULL otherwise */
    int owned;       /* 1 when data/scales are this struct's to free (0 for the tied lm_head) */
    int packed;      /* int8: 1 once weights_pack_int8 put data and scales in the VNNI layout below */
    int64_t gpad;    /* int8 packed: columns per group in the layout (group rounded up to 4) */
} wmat;

/* The packed int8 layout (what the u8 x s8 `vpdpbusd` kernels of cpu_kernels.h stream): rows in
 * blocks of WMAT_PACK_ROWS (the last one padded with zero weights), and within a block, group by
 * group, 4 consecutive columns of the 16 rows side by side, so one 64-byte load holds 16 rows x 4
 * columns and each 32-bit lane is one row's dot product of 4:
 *   data   (ceil(rows / 16), n_groups, gpad / 4, 16, 4) uint8: the int8 weight + 128 (the
 *          kernels take the weights as the unsigned operand and correct with 128 * the sum of the
 *          int8 activations, computed once per token and group); columns past the group's end 128
 *   scales (ceil(rows / 16), n_groups, 16) fp32: the same per-group scales, 0 for padded rows
 * Bytes: the unpacked ones when rows is a multiple of 16 and the group one of 4 dividing cols. */
#define WMAT_PACK_ROWS 16

typedef struct layer_weights {
    float *attn_norm; /* (d_model) */
    wmat qkv;         /* (q_dim + 2 * kv_dim, d_model): q_dim = n_heads * head_dim, kv_dim = n_kv_heads * head_dim */
    float *qkv_bias;  /* (q_dim + 2 * kv_dim), NULL without bias */
    wmat o;           /* (d_model, q_dim) */
    float *o_bias;    /* (d_model), NULL unless cfg.o_bias */
    float *q_norm;    /* (head_dim) RMSNorm weight shared by every Q head, NULL unless cfg.qk_norm */
    float *k_norm;    /* (head_dim) the same for K heads */
    float *ffn_norm;  /* (d_model) (gemma3: pre_feedforward_layernorm) */
    float *post_attn_norm; /* (d_model) gemma3's post_attention_layernorm on o_proj's output; NULL unless cfg.sandwich_norms */
    float *post_ffn_norm;  /* (d_model) gemma3's post_feedforward_layernorm on down's output; NULL unless cfg.sandwich_norms.
                              Every norm weight is the multiplier itself: gemma3's (1 + w) is added when read from a folder */
    wmat gate_up;     /* (2 * d_ff, d_model): gate rows then up rows */
    float *gate_up_bias; /* (2 * d_ff) gate then up, NULL unless cfg.mlp_bias */
    wmat down;        /* (d_model, d_ff) */
    float *down_bias; /* (d_model), NULL unless cfg.mlp_bias */
    /* Mixture of experts, in the layers model_layer_is_moe marks (gate_up and down above are then
     * empty: rows 0, data NULL). Each expert is stored like the dense FFN, at the same dtype. */
    wmat router;      /* (n_experts, d_model), at the matrices' dtype */
    wmat *exp_gate_up;/* (n_experts) each (2 * d_ff_expert, d_model): gate rows then up rows */
    wmat *exp_down;   /* (n_experts) each (d_model, d_ff_expert) */
    wmat sh_gate_up;  /* (2 * d_ff_shared, d_model) the shared expert (qwen2_moe); empty without */
    wmat sh_down;     /* (d_model, d_ff_shared) */
    float *sh_gate;   /* (d_model) shared_expert_gate weight, fp32; NULL unless cfg.shared_expert_gate */
    float *router_bias; /* (n_experts) deepseek_v3's e_score_correction_bias (the choice only), fp32; NULL otherwise */
    /* Latent attention (cfg.kv_lora_rank > 0): qkv is then (q_rows + kv_lora_rank + qk_rope_head_dim,
     * d_model), rows q_a (q_rows = q_lora_rank) or q_proj (q_rows = n_heads * qk_head_dim) then
     * kv_a_proj_with_mqa; o is (d_model, n_heads * v_head_dim). */
    wmat q_b;         /* (n_heads * qk_head_dim, q_lora_rank); rows 0 without a q rank */
    wmat kv_b;        /* (n_heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank): per head K_nope then V rows */
    float *q_a_norm;  /* (q_lora_rank), NULL without a q rank */
    float *kv_a_norm; /* (kv_lora_rank) */
} layer_weights;

typedef struct model_weights {
    model_config cfg;
    xf_dtype dtype;      /* of the matrices */
    int group;           /* int8 group size */
    wmat embed;          /* (vocab, d_model) */
    layer_weights *layers; /* (n_layers) */
    float *final_norm;   /* (d_model) */
    wmat lm_head;        /* (vocab, d_model); shares embed's memory when tied (owned = 0) */
} model_weights;

/* Resident bytes of the weights of cfg at dtype (int8: group scales at 4 bytes each), norms and
 * biases in fp32; XF_EOVERFLOW when it does not fit int64. */
xf_status weights_bytes(const model_config *cfg, xf_dtype dtype, int group, int64_t *out);

/* The bytes weights_bytes counts, by tensor kind, as this model holds them: sum = the total. */
typedef struct weights_kinds {
    int64_t layer_matrices; /* qkv, o, gate_up, down of every layer at dtype (int8: the int8 values) */
    int64_t embeddings;     /* the embedding table, and the lm_head when untied, at dtype */
    int64_t scales;         /* int8: one fp32 scale per group of every matrix above; 0 otherwise */
    int64_t norms_biases;   /* RMSNorm weights (q/k norms included) and biases, fp32 whatever dtype */
} weights_kinds;
xf_status weights_bytes_kinds(const model_config *cfg, xf_dtype dtype, int group, weights_kinds *out);

/* Deterministic random weights: every value depends only on (seed, tensor, row, column), never
 * on the dtype or thread count. Matrices and embeddings ~ N(0, 0.02^2) (a sum of four uniforms,
 * scaled), biases ~ N(0, 0.02^2), norms (q/k norms too) = 1. Generated in fp32 and converted to `dtype`
 * (bf16 / fp16 round-to-nearest-even; int8 symmetric per group, scale = max|w| / 127). int8: the
 * matrices weights_pack packs come already packed (quantized straight into that layout, the same
 * bytes as weights_alloc + weights_set_rows + weights_pack give; weights_pack is then a no-op on them).
 * On success *out is the caller's: free with weights_free. */
xf_status weights_init_random(model_weights **out, const model_config *cfg, uint64_t seed,
                              xf_dtype dtype, int group);

/* Process-wide, off by default: with it on, weights_init_random gives every layer of a dense model
 * (no experts, no latent attention, layers of one shape) a copy of layer 0's matrices' values in its
 * own buffers instead of values of its own. For callers that time kernels and not what they
 * compute (runner/calibrate.c): the same shapes, dtype, layout, distribution and addresses, in a
 * fraction of the set-up time; the model's outputs are no longer weights_random_value's. */
void weights_random_reuse_layers(int on);

/* An empty set with every tensor allocated at cfg's shapes (values unset), for loaders. */
xf_status weights_alloc(model_weights **out, const model_config *cfg, xf_dtype dtype, int group);

/* Fills rows [row0, row0 + n_rows) of m from fp32 values src (n_rows, m->cols), converting. */
void weights_set_rows(wmat *m, int64_t row0, int64_t n_rows, const float *src);

/* Reads element (r, c) of m as fp32 (dequantized), packed or not: for tests and references. */
float weights_get(const wmat *m, int64_t r, int64_t c);

/* The int8 value of element (r, c) (before its scale) and the index of its scale, packed or not. */
int8_t weights_i8_at(const wmat *m, int64_t r, int64_t c);
int64_t weights_scale_index(const wmat *m, int64_t r, int64_t c);

/* Puts an int8 matrix in the packed layout above (in place: new buffers, the row-major ones freed;
 * a no-op for other dtypes and packed matrices). XF_ENOMEM leaves m as it was. */
xf_status weights_pack_int8(wmat *m);

/* The bytes of w's matrices held in buffers of 2 MiB or more (*eligible: allocated on huge pages,
 * core/hugemem.h) and how many of them the kernel backs with huge pages now (*granted; -1 when
 * /proc/self/smaps cannot be read). XF_EINVAL, XF_ENOMEM. */
xf_status weights_huge_pages(const model_weights *w, int64_t *granted, int64_t *eligible);
/* Every int8 matrix of w (the tied lm_head follows the embedding): what loading does last. */
xf_status weights_pack(model_weights *w);
/* Packed bytes of the values and of the scales of an int8 (rows, cols) matrix at group; 0 on
 * overflow. */
int64_t weights_packed_values_bytes(int64_t rows, int64_t cols, int group);
int64_t weights_packed_scales_bytes(int64_t rows, int64_t cols, int group);

void weights_free(model_weights *w); /* NULL is a no-op */

/* The names of the random tensors, for reproducible streams. */
enum {
    WT_EMBED = 0, WT_Q, WT_K, WT_V, WT_O, WT_GATE, WT_UP, WT_DOWN, WT_ATTN_NORM, WT_FFN_NORM,
    WT_BQ, WT_BK, WT_BV, WT_FINAL_NORM, WT_LM_HEAD, WT_BO, WT_BGATE, WT_BUP, WT_BDOWN, WT_Q_NORM, WT_K_NORM,
    WT_ROUTER, WT_SH_GATE, WT_SH_UP, WT_SH_DOWN, WT_SH_GATE_W,
    WT_EXP_GATE, WT_EXP_UP, WT_EXP_DOWN, /* expert e of these is tensor WT_EXP_* + (e + 1) * WT_EXPERT_STRIDE */
    WT_Q_B, WT_KV_B, WT_Q_A_NORM, WT_KV_A_NORM, WT_ROUTER_BIAS, /* latent attention (WT_Q: q_a or q_proj, WT_K: kv_a) */
    WT_POST_ATTN_NORM, WT_POST_FFN_NORM, /* gemma3's sandwich norms */
    WT_COUNT
};
#define WT_EXPERT_STRIDE 256

/* The random value of element (row, col) of tensor `tensor` (WT_*; layer -1 for global tensors).
 * What weights_init_random stores, before conversion; tests use it to rebuild weights in double. */
float weights_random_value(uint64_t seed, int tensor, int layer, int64_t row, int64_t col);

/* fp32 <-> bf16 (round to nearest even; NaN kept quiet) and fp16 (IEEE half, round to nearest even). */
uint16_t weights_f32_to_bf16(float f);
float weights_bf16_to_f32(uint16_t h);
uint16_t weights_f32_to_f16(float f);
float weights_f16_to_f32(uint16_t h);

#endif
