/* The mixture-of-experts kernels (cuda_moe.cuh). */
#include "reference_model/cuda_kern.cuh"
#include "reference_model/cuda_moe.cuh"
#include "reference_model/cuda_moe_index.h"

namespace {

/* One thread per token: the CPU reference's routing (cuda_moe_index.h). */
__global__ void k_moe_route(const float *logits, int64_t n, int64_t E, int64_t k, int grouped, const float *bias, int64_t n_group,
                            int64_t topk_group, int norm, double scale, float *scratch, int32_t *sel, float *selw) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    if (grouped)
        xf_moe_route_grouped(logits + t * E, bias, E, k, n_group, topk_group, norm, scale, scratch + t * (2 * E + n_group),
                             sel + t * k, selw + t * k);
    else
        xf_moe_route_softmax(logits + t * E, E, k, norm, sel + t * k, selw + t * k);
}

/* One block: thread e (stride over experts) counts, thread 0 sums, thread e scatters in token
 * order: the CPU's grouping, deterministic. */
__global__ void k_moe_permute(const int32_t *sel, int64_t nk, int64_t E, int64_t *counts, int64_t *off, int64_t *row_of) {
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) counts[e] = xf_moe_count(sel, nk, (int32_t)e);
    __syncthreads();
    if (threadIdx.x == 0) xf_moe_prefix(counts, E, off);
    __syncthreads();
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) xf_moe_scatter(sel, nk, (int32_t)e, off[e], row_of);
}

__global__ void k_moe_gather(void *xg, int xst, const float *x, int64_t total, int64_t k, int64_t d, const int64_t *row_of) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    int64_t dst, src = xf_moe_gather(idx, d, k, row_of, &dst);
    st_(xg, dst, x[src], xst);
}

/* One block per token; the dot product in double, as cpu_moe_gate_up computes it. */
__global__ void k_moe_shared_gate(float *gate, const float *x, const float *w, int64_t d) {
    __shared__ double part[NT];
    int t = threadIdx.x;
    const float *xr = x + (int64_t)blockIdx.x * d;
    double s = 0;
    for (int64_t k = 0; k < xf_strided_count(d, t, NT); k++) {
        int64_t c = xf_strided_col(t, NT, k);
        s += (double)xr[c] * (double)w[c];
    }
    part[t] = s;
    __syncthreads();
    for (int h = NT / 2; h > 0; h /= 2) {
        if (t < h) part[t] += part[xf_tree_partner(t, h)];
        __syncthreads();
    }
    if (t == 0) gate[blockIdx.x] = 1.0f / (1.0f + expf(-(float)part[0]));
}

__global__ void k_moe_combine(float *out, const float *y, const float *selw, const int64_t *row_of, const float *gate, int shared,
                              int64_t n, int64_t k, int64_t d) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * d) return;
    int64_t t, i;
    xf_idx_row_col(idx, d, &t, &i);
    float s = 0.0f;
    for (int64_t j = 0; j < k; j++) s += selw[t * k + j] * y[xf_moe_combine_src(t, j, i, k, d, row_of)];
    out[idx] = shared ? s + out[idx] * (gate ? gate[t] : 1.0f) : s;
}

} // namespace

void cuda_moe_route(cudaStream_t st, const float *logits, int64_t n, int64_t E, int64_t k, int grouped, const float *bias,
                    int64_t n_group, int64_t topk_group, int norm, double scale, float *scratch, int32_t *sel, float *selw) {
    k_moe_route<<<blocks_for(n, 64), 64, 0, st>>>(logits, n, E, k, grouped, bias, n_group, topk_group, norm, scale, scratch, sel,
                                                   selw);
}

void cuda_moe_permute(cudaStream_t st, const int32_t *sel, int64_t nk, int64_t E, int64_t *counts, int64_t *off, int64_t *row_of) {
    k_moe_permute<<<1, (unsigned)(E < 1024 ? E : 1024), 0, st>>>(sel, nk, E, counts, off, row_of);
}

void cuda_moe_gather(cudaStream_t st, void *xg, int xst, const float *x, int64_t n, int64_t k, int64_t d, const int64_t *row_of) {
    k_moe_gather<<<blocks_for(n * k * d, NT), NT, 0, st>>>(xg, xst, x, n * k * d, k, d, row_of);
}

void cuda_moe_shared_gate(cudaStream_t st, float *gate, const float *x, const float *w, int64_t n, int64_t d) {
    k_moe_shared_gate<<<(unsigned)n, NT, 0, st>>>(gate, x, w, d);
}

void cuda_moe_combine(cudaStream_t st, float *out, const float *y, const float *selw, const int64_t *row_of, const float *gate,
                      int shared, int64_t n, int64_t k, int64_t d) {
    k_moe_combine<<<blocks_for(n * d, NT), NT, 0, st>>>(out, y, selw, row_of, gate, shared, n, k, d);
}
