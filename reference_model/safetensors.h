/* Reading Hugging Face safetensors files and LLaMA-family weight folders.
 *
 * A .safetensors file is: an 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "F32"|"F16"|"BF16"|..., "shape": [...], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {...}}, then the data; offsets are relative to the end of the header. Files are
 * memory-mapped read-only; every offset and size is checked against the file size, tensors may
 * not overlap, and a tensor's byte size must equal its shape times its element size. The file is
 * untrusted input: any violation is XF_EFORMAT with the file and tensor named. */
#ifndef XF_SAFETENSORS_H
#define XF_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"
#include "reference_model/config.h"
#include "reference_model/weights.h"

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER (100 * 1024 * 1024) /* header JSON larger than this is refused */

typedef enum st_dtype { ST_F32 = 0, ST_F16, ST_BF16, ST_OTHER } st_dtype;

typedef struct st_tensor {
    char *name;               /* owned by the file */
    st_dtype dtype;
    char dtype_name[16];      /* as written in the file ("F32", "I64", ...) */
    int n_dims;
    int64_t shape[ST_MAX_DIMS];
    int64_t n_elems;
    const void *data;         /* into the mapping */
    int64_t n_bytes;
    int used;                 /* set by st_load_weights when a tensor is read */
} st_tensor;

typedef struct st_file st_file;

/* Maps and validates `path`. On success *out is the caller's: close with st_file_close. */
xf_status st_file_open(const char *path, st_file **out);
void st_file_close(st_file *f); /* NULL is a no-op */

int st_file_count(const st_file *f);
const st_tensor *st_file_tensor(const st_file *f, int i);
const st_tensor *st_file_find(const st_file *f, const char *name); /* NULL when absent */

/* Reads element i of a F32/F16/BF16 tensor as fp32. */
float st_tensor_get(const st_tensor *t, int64_t i);

/* Loads a LLaMA-family model folder: every *.safetensors file in `dir` (a weights index is not
 * needed: tensors are looked up by name across the files). Names are Hugging Face's:
 * model.embed_tokens.weight, model.layers.N.self_attn.{q,k,v,o}_proj.weight (+ q/k/v .bias when
 * cfg->qkv_bias), model.layers.N.mlp.{gate,up,down}_proj.weight,
 * model.layers.N.{input_layernorm,post_attention_layernorm}.weight, model.norm.weight, and
 * lm_head.weight unless cfg->tied_embeddings. Every tensor's shape is checked against cfg; a
 * missing, duplicated or mis-shaped tensor is an error naming it. Values are converted to
 * `dtype` (fp32, bf16, int8 with `group`); the files are unmapped before returning.
 * Biases (o_proj, mlp) and q_norm / k_norm are read when cfg asks for them. Tensors of the folder
 * that the config does not use are listed in a warning on stderr (never silently skipped).
 * Q and K keep Hugging Face's rotate-half RoPE layout, which is the convention the backends use.
 * On success *out is the caller's: free with weights_free. */
xf_status st_load_weights(const char *dir, const model_config *cfg, xf_dtype dtype, int group,
                          model_weights **out);

/* What one rank of a tensor-parallel split (cpu_parallel.h) loads of a folder holding `full`:
 * blocks of the tensors, never the whole model. cfg (st_load_weights_slice's) is the shard's
 * config, what the weights are allocated at; every tensor's shape is checked against full. */
typedef struct st_slice {
    const model_config *full; /* the model the files hold */
    int64_t q0;               /* first Q row of the rank's heads (its first head q0 / head_dim) = first column of o_proj
                               * (latent attention: that head's v_head_dim columns) */
    int64_t kv0;              /* first K and V row of its KV heads */
    int64_t f0;               /* first gate and up row of its d_ff slice = first column of down */
    int64_t e0;               /* the same in every expert's d_ff_expert (MoE split by columns) */
    int64_t s0;               /* the same in the shared expert's d_ff_shared */
    int row_bias;             /* 1: this rank holds the o_proj and down biases (added once, before the all-reduce); 0: NULL */
} st_slice;

/* st_load_weights of the block sl names (NULL: the whole model, as st_load_weights). Column-
 * parallel tensors (q, k, v, gate, up and their biases) give rows, row-parallel ones (o_proj, down)
 * columns; norms, embedding and lm_head whole. Values are converted (int8: quantized per group of
 * the shard's columns) from the block alone; MoE layers: the router whole, every expert's and the
 * shared expert's FFN sliced as the dense one; latent attention (MLA): q_a, kv_a and their norms
 * whole, q_proj / q_b / kv_b the rows of the rank's heads, o_proj their v_head_dim columns.
 * *out is the caller's: weights_free. */
xf_status st_load_weights_slice(const char *dir, const model_config *cfg, xf_dtype dtype, int group, const st_slice *sl,
                                model_weights **out);

#endif
