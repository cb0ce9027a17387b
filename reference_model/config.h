/* Model configs: built-in presets and Hugging Face config.json files (the struct is core/model_config.h). */
#ifndef XF_CONFIG_H
#define XF_CONFIG_H

#include <stdint.h>

#include "core/model_config.h"
#include "core/status.h"


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

/* Parameters one token uses: config_param_count with experts_per_tok routed experts per MoE layer
 * instead of all of them (the router counted; equal to the total for a dense model). */
int64_t config_active_param_count(const model_config *cfg);

/* The RoPE inverse frequencies of cfg, inv_freq (head_dim / 2), and the factor cos and sin are
 * multiplied by (*attn_factor: 1 except for yarn), as transformers computes them. XF_EINVAL on an
 * invalid config. */
xf_status config_rope_freqs(const model_config *cfg, double *inv_freq, double *attn_factor);

/* The same for layer `layer`: gemma3's windowed layers (rope_local_theta > 0) take plain RoPE at
 * rope_local_theta, every other layer config_rope_freqs'. */
xf_status config_rope_freqs_layer(const model_config *cfg, int64_t layer, double *inv_freq, double *attn_factor);

/* 1 when cfg uses any of gemma3's features (embed_scale, sandwich_norms, ffn_gelu, attn_scalar,
 * rope_local_theta). */
int config_is_gemma3(const model_config *cfg);

/* The first feature of cfg beyond the Llama-2 decoder (biases other than qkv, q/k norm, scaled
 * RoPE, sliding windows) as the config field that turns it on, for backends that do not run it yet; NULL when none.
 * A static string. */
const char *config_first_extension(const model_config *cfg);

/* The factor attention scores are multiplied by before the softmax: 1 / sqrt(head_dim); for latent
 * attention 1 / sqrt(qk_nope_head_dim + qk_rope_head_dim), times DeepSeek's yarn correction
 * (0.1 mscale_all_dim ln(factor) + 1)^2 when the RoPE is scaled with mscale_all_dim. 0 on invalid input. */
double config_softmax_scale(const model_config *cfg);

/* Elements of one token's K plus V over all layers: 2 * n_layers * n_kv_heads * head_dim; for
 * latent attention the cached latent, n_layers * (kv_lora_rank + qk_rope_head_dim).
 * -1 when a size is <= 0 or on overflow. */
int64_t config_kv_elems_per_token(const model_config *cfg);

#endif
