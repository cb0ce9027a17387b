/* The shape of a LLaMA-style decoder: built-in presets and Hugging Face config.json files. */
#ifndef XF_CONFIG_H
#define XF_CONFIG_H

#include <stdint.h>

#include "core/status.h"

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
    char arch[16];       /* "llama", "mistral", "qwen2" or "qwen3" */
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
} model_config;

/* Fills *cfg with preset `name` (case-insensitive). XF_EINVAL, naming the presets, if unknown. */
xf_status config_preset(const char *name, model_config *cfg);

/* Number of presets and the i-th one's name, for `xfprof models` (a static string, not freed; NULL
 * when i is out of range). */
int config_preset_count(void);
const char *config_preset_name(int i);

/* Parses a Hugging Face config.json text. Errors name the offending field; `source` (a path,
 * may be NULL) prefixes messages. */
xf_status config_parse_hf(const char *json_text, const char *source, model_config *cfg);

/* Reads and parses the file at `path` (at most 16 MiB). cfg->name becomes the model folder's
 * name for ".../<model>/config.json", else the file's name. A missing file is XF_EINVAL. */
xf_status config_load_hf(const char *path, model_config *cfg);

/* A preset name, or a path to a config.json (or a folder holding one). */
xf_status config_resolve(const char *name_or_path, model_config *cfg);

/* Checks every field for presence, sign and sanity (e.g. head_dim > 0, n_heads divisible by
 * n_kv_heads, sizes below absurd limits). Messages name the field. */
xf_status config_validate(const model_config *cfg);

/* Parameter count: embeddings, every layer's attention and FFN matrices, norms, biases,
 * lm_head unless tied. -1 when a size is <= 0 or the count would overflow 64 bits. */
int64_t config_param_count(const model_config *cfg);

/* The RoPE inverse frequencies of cfg, inv_freq (head_dim / 2), and the factor cos and sin are
 * multiplied by (*attn_factor: 1 except for yarn), as transformers computes them. XF_EINVAL on an
 * invalid config. */
xf_status config_rope_freqs(const model_config *cfg, double *inv_freq, double *attn_factor);

/* "default", "linear", "dynamic", "llama3", "yarn" (the transformers rope_type names). */
const char *config_rope_kind_name(rope_kind k);
/* The kind named `s`; -1 when unknown. */
int config_rope_kind_parse(const char *s);

/* The first feature of cfg beyond the Llama-2 decoder (biases other than qkv, q/k norm, scaled
 * RoPE) as the config field that turns it on, for backends that do not run it yet; NULL when none.
 * A static string. */
const char *config_first_extension(const model_config *cfg);

/* Elements of one token's K plus V over all layers: 2 * n_layers * n_kv_heads * head_dim.
 * -1 when a size is <= 0 or on overflow. */
int64_t config_kv_elems_per_token(const model_config *cfg);

#endif
