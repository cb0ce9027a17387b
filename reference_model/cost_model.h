/* The cost model: for every op of one forward step, the analytic FLOPs and the compulsory bytes,
 * as a pure function of config and workload. The one place the formulas live; the reference
 * model's ops and the record's op names follow this list. */
#ifndef XF_COST_MODEL_H
#define XF_COST_MODEL_H

#include <stdint.h>

#include "core/device.h"
#include "core/op.h"
#include "core/workload.h"
#include "reference_model/config.h"

/* Number of ops cost_step() produces for this config: 4 + 12 * n_layers. */
int64_t cost_step_op_count(const model_config *cfg);

/* Fills ops[0..count) for one step. `ops` must hold cost_step_op_count(cfg) entries.
 * Order: embedding, then each layer's 12 ops in op_kind order, then final_norm, lm_head,
 * sampling. final_norm, lm_head and sampling work on the B last rows only (one per sequence) in
 * both phases: prefill needs logits for the last token alone. Logits are fp32. XF_EINVAL (with
 * config_validate's / workload_validate's message) on invalid input. */
xf_status cost_step(const model_config *cfg, const workload *w, step_shape s, cost_op *ops, int64_t count);

/* The compute type (which peak applies) of GEMMs and attention for activation dtype `adtype`:
 * fp16/bf16 -> tensor16, fp8 -> fp8, int8 -> int8, fp32 -> fp32. Element-wise ops are fp32. */
xf_compute cost_compute_of(xf_dtype adtype);

/* KV bytes of one token over all layers at `kvdtype` (int8/int4: ceil(head_dim / group) fp16
 * scales per head vector; quant_group 0 = default): 2 * n_layers * n_kv_heads * head_dim * bytes.
 * 0 for a config without layers or heads. */
double cost_kv_bytes_per_token(const model_config *cfg, xf_dtype kvdtype, int quant_group);

/* Causal (query, key) pairs of one sequence with `tokens` new tokens at the end of `context`:
 * tokens * (context - tokens) + tokens * (tokens + 1) / 2 (prefill T(T+1)/2, decode C). */
double cost_attention_pairs(int64_t tokens, int64_t context);

/* Distinct experts a step of `tokens` tokens reads when each picks top_k of n_experts: the
 * expected number under uniform, independent routing, E (1 - (1 - k/E)^T) (at most min(E, k T)).
 * What `predict` assumes; a measured run knows what its router chose. 0 for a dense model. */
double cost_moe_experts_read(int64_t n_experts, int64_t top_k, double tokens);

/* A measured run's expert ops: sets the weight bytes (and the total bytes) of an MoE layer's
 * gate_up or down op to those of `experts` distinct experts (the number its router really chose;
 * a mean over decode steps may be fractional), the router and the shared expert included. Any
 * other op is left as it is. */
void cost_moe_set_experts(const model_config *cfg, const workload *w, cost_op *op, double experts);

/* Sums of flops and bytes over ops[0..count); either output may be NULL. */
void cost_step_totals(const cost_op *ops, int64_t count, double *flops, double *bytes);

/* Bytes of all parameters at w->wdtype (scales counted; norms and biases 16-bit when the
 * weights are quantized or fp8, else at wdtype); lm_head counted unless tied. 0 on invalid input. */
double cost_weight_bytes(const model_config *cfg, const workload *w);

/* The aggregate shape of one step over sequences of different lengths (continuous batching, a
 * prefill of prompts of several lengths): every op's cost depends only on these sums. */
typedef struct cost_step_sums {
    xf_phase phase;   /* labels the ops */
    double seqs;      /* sequences: rows of final_norm, lm_head and sampling */
    double rows;      /* new tokens over all sequences, sum of T_i: rows of the per-layer ops */
    double pairs;     /* causal (query, key) pairs, sum of cost_attention_pairs(T_i, C_i) */
    double kv_tokens; /* context tokens whose K and V attention reads, sum of C_i */
    /* Sliding-window layers (optional): the same two sums with each query seeing at most
     * `window` keys, filled by cost_sums_add when window > 0 was set before the first add (a
     * ragged step); when window is 0 or not the config's, cost_step_of_sums derives them from
     * the mean sequence (exact for a uniform step, an estimate for a ragged one). */
    int64_t window;
    double win_pairs;     /* sum of cost_window_pairs(T_i, C_i, window) */
    double win_kv_tokens; /* sum of min(C_i, T_i + window - 1): the keys some query of the step sees */
} cost_step_sums;

/* (query, key) pairs of one sequence with `tokens` new tokens at the end of `context` when each
 * query sees at most `window` keys (its own included): sum over query positions q = C - T + 1 .. C
 * of min(window, q). Equal to cost_attention_pairs when window >= context. Doubles: the mean
 * sequence of a ragged step has fractional sizes. */
double cost_window_pairs(double tokens, double context, double window);

/* The sums of a uniform step (batch sequences of `tokens` new tokens at `context`); all zero
 * (refused by cost_step_of_sums) for an invalid shape. */
cost_step_sums cost_sums_of_shape(step_shape s);

/* Adds one sequence with `tokens` new tokens at the end of `context` (start from a zeroed struct
 * with .phase set). XF_EINVAL unless tokens >= 1 and context >= tokens. */
xf_status cost_sums_add(cost_step_sums *s, int64_t tokens, int64_t context);

/* cost_step for an aggregate step; cost_step(shape) is cost_step_of_sums(cost_sums_of_shape(shape)). */
xf_status cost_step_of_sums(const model_config *cfg, const workload *w, const cost_step_sums *s, cost_op *ops,
                            int64_t count);

/* Memory a workload needs on the device. */
typedef struct cost_memory {
    double weights_bytes;     /* all parameters at wdtype (embeddings too; scales counted) */
    double active_weights_bytes; /* what one token reads of them: all but the routed experts it does not
                                    select (experts_per_tok of n_experts per MoE layer); = weights_bytes when dense */
    double kv_bytes;          /* batch * (prompt + gen) tokens of KV at kvdtype; windowed layers hold at most the window */
    double kv_bytes_per_token;/* 2 * n_layers * n_kv_heads * head_dim * bytes(kvdtype) */
    double activations_bytes; /* peak live activations of the prefill step (working buffers) */
    double total_bytes;
} cost_memory;

void cost_memory_of(const model_config *cfg, const workload *w, cost_memory *out);

/* Largest batch whose weights + KV (prompt + gen per sequence) + activations fit in
 * `capacity_bytes`; 0 when not even batch 1 fits. */
int64_t cost_max_batch(const model_config *cfg, const workload *w, double capacity_bytes);

#endif
