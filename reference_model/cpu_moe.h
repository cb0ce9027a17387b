/* The mixture-of-experts FFN on the CPU: router, scoring and top-k, the routed SwiGLU experts and
 * the shared expert, as the three FFN ops of an MoE layer (the cost model's split):
 *   gate_up: router logits (n, E) = x . router^T, scores and the top-k choice of every token, the
 *            tokens grouped by expert and each chosen expert's gate/up GEMM on its tokens only
 *            (and the shared expert's gate/up on every token);
 *   swiglu:  silu(gate) * up of every (token, chosen expert) row (and of the shared expert);
 *   down:    each chosen expert's down GEMM on its rows, then per token the sum of its k outputs
 *            weighted by the router, in increasing expert order (transformers' index_add_ order),
 *            plus sigmoid(x . w_gate) times the shared expert's output.
 * Only the experts some token chose are read: an expert with no token costs nothing. The router's
 * choices of the last step are kept per layer (cpu_moe_counts) for the record.
 *
 * The projections go through the backend's own linear function (cpu_moe_linear_fn), so every
 * dtype (fp32, bf16, fp16, int8) and both paths (own matmul for few rows, BLAS for many) are the
 * dense FFN's. */
#ifndef XF_CPU_MOE_H
#define XF_CPU_MOE_H

#include <stdint.h>

#include "core/model_config.h"
#include "core/status.h"
#include "reference_model/weights.h"

/* count projections y[i] (n[i], W[i]->rows) = x[i] (n[i], W[i]->cols) . W[i]^T, in one parallel
 * region where the backend can (decode: every chosen expert's rows dealt to the threads at once, so
 * a step pays one fork and barrier, not one per expert), else one after the other in index order;
 * x[i] may be overwritten (int8 inputs are rounded in place). */
typedef void (*cpu_moe_linear_fn)(void *be, int count, const wmat *const *W, float *const *x, const int64_t *n, float *const *y);

typedef struct cpu_moe cpu_moe;

/* Floats of the buffers cpu_moe_init allocates per token of a step (what model_mem_of counts);
 * 0 for a dense model. */
int64_t cpu_moe_floats_per_token(const model_config *cfg);

/* Buffers for steps of at most max_tokens tokens. On success *out is the caller's: free with
 * cpu_moe_free. XF_EINVAL when cfg has no experts or an unknown scoring. */
xf_status cpu_moe_init(cpu_moe **out, const model_config *cfg, int64_t max_tokens, int threads);
void cpu_moe_free(cpu_moe *m); /* NULL is a no-op */
int64_t cpu_moe_bytes(const cpu_moe *m); /* bytes allocated */

/* The three ops of MoE layer `layer` for a step of n tokens. xn (n, d_model) is the normed input
 * (left unchanged by gate_up until its last use, the shared expert's GEMM, which may round it for
 * int8); out (n, d_model) receives the FFN's output. lin/be: the backend's projection. */
xf_status cpu_moe_gate_up(cpu_moe *m, const layer_weights *L, int layer, float *xn, int64_t n, cpu_moe_linear_fn lin, void *be);
void cpu_moe_swiglu(cpu_moe *m, int64_t n);
void cpu_moe_down(cpu_moe *m, const layer_weights *L, int64_t n, float *out, cpu_moe_linear_fn lin, void *be);

/* Tokens routed to each expert by layer `layer` in the last step that ran it: (n_experts) counts
 * summing to n * experts_per_tok; zeros for a dense layer. Owned by m. */
const int64_t *cpu_moe_counts(const cpu_moe *m, int layer);

/* The softmax scoring and top-k choice of one token, exposed for tests: logits (E) -> idx (k) the chosen
 * experts in increasing order and w (k) their weights (the probabilities, renormalized to sum 1
 * when norm). Ties go to the lower index (torch.topk's order on distinct values). */
void cpu_moe_route(moe_scoring scoring, const float *logits, int64_t E, int64_t k, int norm, int32_t *idx, float *w);

/* DeepSeek-V3's routing (MOE_SCORE_SIGMOID_GROUPED, DeepseekV3TopkRouter): scores = sigmoid(logits);
 * the choice adds bias (E, e_score_correction_bias; NULL: zeros), keeps the topk_group of n_group
 * groups (E / n_group experts each) whose two best choices sum highest, and takes the top-k of
 * the kept experts; the weights are their sigmoid scores, divided by their sum (+ 1e-20) when
 * norm, times scale. idx in increasing order. scratch: 2 E + n_group floats. */
void cpu_moe_route_grouped(const float *logits, const float *bias, int64_t E, int64_t k, int64_t n_group, int64_t topk_group,
                           int norm, double scale, float *scratch, int32_t *idx, float *w);

#endif
