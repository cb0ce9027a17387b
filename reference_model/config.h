/* The shape of a LLaMA-style decoder: built-in presets and Hugging Face config.json files. */
#ifndef XF_CONFIG_H
#define XF_CONFIG_H

#include <stdint.h>

#include "core/status.h"

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

/* Elements of one token's K plus V over all layers: 2 * n_layers * n_kv_heads * head_dim.
 * -1 when a size is <= 0 or on overflow. */
int64_t config_kv_elems_per_token(const model_config *cfg);

#endif
