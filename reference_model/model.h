/* The model runner: a LLaMA-style decoder run for real, op by op, on a backend (CPU, or CUDA where
 * built). It owns the weights, the KV manager and the backend; it calls the probes around every
 * op of every layer in cost_model order, so every op becomes a sample:
 *   [kv_alloc], embedding, per layer (attn_norm, qkv, rope, kv_append, attention, o_proj,
 *   attn_residual, ffn_norm, gate_up, swiglu, down, ffn_residual), final_norm, lm_head, sampling.
 * kv_alloc (layer -1) comes first in every step: the time to make room for the step's new KV
 * (the pool's slot bookkeeping, or the system allocator's allocate + copy). Sampling is greedy. */
#ifndef XF_MODEL_H
#define XF_MODEL_H

#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"
#include "core/probe.h"
#include "reference_model/backend.h"
#include "reference_model/config.h"
#include "reference_model/kv_cache.h"

typedef struct model_options {
    uint64_t seed;         /* random weights (and nothing else: prompts are the caller's) */
    xf_dtype wdtype;       /* XF_FP32, XF_BF16, XF_FP16 or XF_INT8 (per-group fp32 scales, packed at load; CPU
                              projections quantize their input to int8, cpu_kernels.h) */
    int quant_group;       /* int8: elements per scale along the input dim; 0 = 128 */
    xf_dtype kvdtype;      /* XF_FP32, XF_FP16 or XF_BF16 */
    int threads;           /* OpenMP / BLAS threads; 0 = all online CPUs */
    kv_policy kv_policy;   /* KV manager policy (kv_policy_parse); default paged:16 */
    int64_t kv_pool_bytes; /* KV pool budget in bytes; 0 = exactly enough for max_seqs * max_seq_len */
    kv_alloc_mode kv_alloc;/* KV_ALLOC_POOL (default) or KV_ALLOC_SYSTEM */
    const char *backend;   /* "cpu" (default) or "cuda" */
    int device_index;      /* GPU ordinal for "cuda" */
    const char *weights_dir; /* NULL: random weights from seed; else a HF folder (config.json +
                                *.safetensors) whose config must match the model_config given */
    int64_t max_seqs;      /* most sequences held at once (the batch); >= 1 */
    int64_t max_prompt;    /* longest prompt (sizes prefill activations: max_seqs * max_prompt rows) */
    int64_t max_seq_len;   /* most tokens per sequence, prompt + generated; <= cfg->max_ctx */
    /* Tensor parallel (reference_model/cpu_parallel.h; NULL / 0 on one device): the shard's weights,
     * borrowed (they must outlive the model; their config must be the one given), and the sum over
     * the ranks that runs as OP_ALL_REDUCE after o_proj and after down. */
    const struct model_weights *weights;
    xf_status (*allreduce)(void *ctx, float *buf, int64_t n, const char *what);
    void *allreduce_ctx;
    backend_bf16_inputs bf16_inputs; /* bf16 weights on the CPU: BACKEND_BF16_EXACT3 (default) or _ROUNDED */
    int sync_each_op;      /* 1: call the backend's sync after every op, inside the probe range (what
                              a host-clock timer needs on an asynchronous GPU backend); the CPU's
                              sync is a no-op */
} model_options;

/* Defaults: seed 1, fp32 weights, group 128, fp32 KV, all threads, "paged:16", pool, "cpu",
 * max_seqs 1, max_prompt 128, max_seq_len 256. */
void model_options_default(model_options *o);

typedef struct model model;

/* Memory a model needs, computed before anything is allocated. */
typedef struct model_mem {
    int64_t weights_bytes;     /* resident weights at wdtype (scales counted) */
    int64_t kv_bytes;          /* KV storage: pool, or max_seqs * max_seq_len tokens in system mode */
    int64_t kv_win_bytes;      /* of kv_bytes, the sliding-window layers' own pool (paged policies on the CPU:
                                  the prompt's blocks or the window's + 1 per sequence, whichever is more);
                                  0 when windowed layers share the pool and keep their whole context */
    int64_t activations_bytes; /* backend working buffers */
    int64_t total_bytes;
} model_mem;

/* Sizes for cfg + opts, with overflow checks (XF_EOVERFLOW when a size does not fit 63 bits). */
xf_status model_mem_of(const model_config *cfg, const model_options *opts, model_mem *out);

/* The one memory gate: model_mem_of, then weights + KV + activations against this machine's
 * physical memory (device_bytes 0: the CPU backend), or, with device_bytes > 0, the same at
 * device_wdtype against the GPU's memory plus the host copy of the weights at opts->wdtype against
 * physical memory (*out then holds the device's figures). XF_EOVERFLOW with every size in the
 * message ("nothing was allocated") when it does not fit. */
xf_status model_mem_gate(const model_config *cfg, const model_options *opts, xf_dtype device_wdtype, double device_bytes,
                         model_mem *out);

/* Memory available now on this machine in bytes (core/sysmem.h; the total when that is unknown); 0 when unknown. */
double model_host_memory_bytes(void);

/* Builds the model: weights (random or loaded), KV manager, backend. Refuses, before allocating,
 * a model whose weights + KV + activations exceed physical memory (XF_EOVERFLOW, sizes in the
 * message). On success *out is the caller's: free with model_free. */
xf_status model_init(model **out, const model_config *cfg, const model_options *opts);
void model_free(model *m); /* NULL is a no-op */

/* Forgets every sequence (frees their KV): the next call must be model_prefill. */
void model_reset(model *m);

/* Prefill: starts n_seqs new sequences (ids 0..n_seqs-1, after a reset of any previous ones) with
 * ragged prompts: sequence s has lens[s] >= 1 tokens, packed in `prompts` one sequence after the
 * other, (sum lens). Samples each sequence's first generated token. `ps` may be NULL. */
xf_status model_prefill(model *m, int n_seqs, const int32_t *prompts, const int64_t *lens,
                        const probe_set *ps);

/* One decode step for every sequence: feeds each sequence's last generated token (or, when
 * `forced` is not NULL, forced[s], (n_seqs)) and samples the next. `ps` may be NULL.
 * A step that fails after it started (KV full, allocation failure) drops every sequence
 * (model_reset): the caller starts again with model_prefill. Argument errors change nothing. */
xf_status model_decode_step(model *m, const int32_t *forced, const probe_set *ps);

/* The last step's logits, (n_seqs, vocab) row-major: prefill's are the last prompt token's.
 * Owned by the model; valid until the next step. */
const float *model_logits(const model *m, int64_t *n_seqs, int64_t *vocab);

/* Tokens generated so far by sequence `seq` (the first comes from prefill). Owned by the model;
 * *n receives the count. NULL when seq is out of range. */
const int32_t *model_tokens(const model *m, int seq, int64_t *n);

/* Current number of tokens in KV for sequence `seq` (prompt + fed generated tokens); -1 if none. */
int64_t model_seq_len(const model *m, int seq);

/* Decode steps run since the last prefill. */
int64_t model_decode_steps(const model *m);

const model_config *model_get_config(const model *m);
struct kv_cache *model_kv(model *m);                     /* the KV manager, for KV metrics */
/* The pool the sliding-window layers use when its manager releases their out-of-window blocks
 * (paged policies on the CPU backend): model_kv itself when every layer is windowed, a pool of
 * their own when the model mixes windowed and full layers; NULL when windowed layers keep their
 * whole context (contiguous policies, system mode, CUDA) or the model has none. Owned by the model. */
struct kv_cache *model_kv_window(model *m);
const struct model_weights *model_get_weights(const model *m);
const char *model_backend_name(const model *m);
/* The backend's context, for backend-specific calls (the CUDA backend's cuda_backend_set_graph and
 * cuda_backend_last_step_ms). Owned by the model, valid until model_free; NULL for a NULL model. */
void *model_backend_ctx(model *m);
/* Turns the per-op backend sync (model_options.sync_each_op) on or off for the following steps:
 * off to time whole steps of an asynchronous backend without a sync between ops. */
void model_set_sync_each_op(model *m, int on);
/* Mixture of experts: the router's choices since the last prefill (model_reset clears them), for
 * phase ph: *tokens (n_layers, n_experts) tokens routed to each expert summed over the phase's
 * steps, *distinct (n_layers) the distinct experts each step read summed over the steps, *steps
 * the steps summed. Owned by the model. XF_EUNSUPPORTED for a dense model or a backend that does
 * not report its router. */
xf_status model_expert_stats(const model *m, xf_phase ph, const int64_t **tokens, const int64_t **distinct, int64_t *steps);

/* The memory figures model_init checked (and the backend's real allocation in backend_bytes). */
void model_get_mem(const model *m, model_mem *out, int64_t *backend_bytes);

/* XF_EINVAL unless dir/config.json describes cfg (every field that changes the math), naming the
 * field and saying to use the folder's own config: what model_init checks before loading a folder
 * (a tensor-parallel run checks the whole model before each rank loads its shard). */
xf_status model_check_weights_dir(const char *dir, const model_config *cfg);

#endif
