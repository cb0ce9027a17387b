/* The shape of a LLaMA-style decoder: the type every part shares. Its readers (presets, Hugging
 * Face config.json), checks and counts are reference_model/config.h. */
#ifndef XF_MODEL_CONFIG_H
#define XF_MODEL_CONFIG_H

#include <stdint.h>

typedef struct model_config {
    char name[64];       /* preset name or the path's last components */
    char arch[16];       /* "llama", "mistral" or "qwen2" */
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
    int qkv_bias;        /* qwen2: bias on the Q, K and V projections */
} model_config;

#endif
