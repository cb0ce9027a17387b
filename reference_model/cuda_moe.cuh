/* The mixture-of-experts kernels of the CUDA backend (cuda_moe.cu), launched on `st`; the GEMMs
 * (router, experts, shared expert) are cuBLAS calls in cuda_backend.cu between them:
 *
 *   gate_up: router GEMM (fp32, like the CPU's) -> cuda_moe_route (top-k per token) ->
 *            cuda_moe_permute (counts, prefix sum, scatter: tokens grouped by expert) -> the
 *            counts copied to the host (the experts' GEMM sizes) -> cuda_moe_gather (16-bit rows
 *            per expert) -> each chosen expert's gate/up GEMM on its rows; the shared expert's on
 *            every token and cuda_moe_shared_gate (qwen2_moe's sigmoid gate)
 *   swiglu:  the dense kernel over the (n * k) grouped rows (and the shared expert's n)
 *   down:    each chosen expert's down GEMM, the shared expert's into out, then cuda_moe_combine
 *            (weighted sum in increasing expert order, + gate * shared)
 * Index math: cuda_moe_index.h. */
#ifndef XF_CUDA_MOE_CUH
#define XF_CUDA_MOE_CUH

#include <cuda_runtime.h>
#include <stdint.h>

/* Per token t < n: sel/selw (n, k) from logits (n, E). grouped: DeepSeek's sigmoid, bias (E) or
 * NULL, n_group / topk_group, scale; else softmax. scratch (n, 2 E + n_group) floats. */
void cuda_moe_route(cudaStream_t st, const float *logits, int64_t n, int64_t E, int64_t k, int grouped, const float *bias,
                    int64_t n_group, int64_t topk_group, int norm, double scale, float *scratch, int32_t *sel, float *selw);

/* counts (E), off (E + 1) and row_of (n * k) from sel (n * k); one block. */
void cuda_moe_permute(cudaStream_t st, const int32_t *sel, int64_t nk, int64_t E, int64_t *counts, int64_t *off, int64_t *row_of);

/* xg (n * k, d) at storage xst = x (n, d) fp32 rows, row_of's grouping. */
void cuda_moe_gather(cudaStream_t st, void *xg, int xst, const float *x, int64_t n, int64_t k, int64_t d, const int64_t *row_of);

/* gate (n) = sigmoid(x (n, d) . w (d)), the dot product in double. */
void cuda_moe_shared_gate(cudaStream_t st, float *gate, const float *x, const float *w, int64_t n, int64_t d);

/* out (n, d) = sum_j selw[t, j] y[row_of[t k + j]] (+ gate[t] * out[t] when shared: out holds
 * the shared expert's output; gate NULL: 1). */
void cuda_moe_combine(cudaStream_t st, float *out, const float *y, const float *selw, const int64_t *row_of, const float *gate,
                      int shared, int64_t n, int64_t k, int64_t d);

#endif
