/* What the CUDA backend's kernel files (cuda_backend.cu, cuda_moe.cu, cuda_mla.cu) share: element
 * storage (fp32 / fp16 / bf16) loads and stores, the step metadata as kernels see it, the block
 * size of the row kernels and a block's RMSNorm of one row. Device code only; the index math is
 * in cuda_index.h / cuda_moe_index.h. */
#ifndef XF_CUDA_KERN_CUH
#define XF_CUDA_KERN_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "reference_model/cuda_index.h"

enum { ST_F32 = 0, ST_F16 = 1, ST_BF16 = 2 };

static __device__ __forceinline__ float ld(const void *p, int64_t i, int st) {
    if (st == ST_F32) return ((const float *)p)[i];
    if (st == ST_BF16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return __half2float(((const __half *)p)[i]);
}

static __device__ __forceinline__ void st_(void *p, int64_t i, float v, int st) {
    if (st == ST_F32) ((float *)p)[i] = v;
    else if (st == ST_BF16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16(v);
    else ((__half *)p)[i] = __float2half(v);
}

/* Address of element i of an array at storage st (4 bytes for fp32, 2 for fp16 / bf16). */
static __host__ __device__ __forceinline__ void *st_at(void *p, int64_t i, int st) {
    return (char *)p + i * (st == ST_F32 ? 4 : 2);
}

/* Step metadata as the kernels see it (device pointers into the meta block, cuda_meta.h). */
struct meta_dev {
    const int64_t *tok_off;   /* (S + 1) */
    const int64_t *seq_pos;   /* (S) position of each sequence's first new token */
    const int64_t *table_off; /* (S) */
    const int64_t *tpe;       /* (S) positions per table entry */
    const int64_t *n_slots;   /* (S) slots per layer of the sequence's KV arrays */
    void *const *kbase;       /* (S) K array of the sequence (the pool in pool mode) */
    void *const *vbase;       /* (S) */
    const int32_t *tokens;    /* (T) */
    const int32_t *tables;    /* (table_cap) */
};

constexpr int NT = 256; /* threads per block of the row kernels */

static inline unsigned blocks_for(int64_t n, int per) {
    return (unsigned)((n + per - 1) / per);
}

/* y[c * ystride] for c < width = x[c] / rms(x) * w[c], by the NT threads of a block (strided
 * columns, tree reduction: the arithmetic of cuda_index.h's row functions). x may alias y (each
 * thread writes only the columns it read, after the reduction). part: NT floats of shared memory. */
static __device__ __forceinline__ void block_rmsnorm(void *y, int yst, const float *x, const float *w, int64_t width, float eps,
                                                     float *part) {
    int t = threadIdx.x;
    float ss = 0.f;
    for (int64_t k = 0; k < xf_strided_count(width, t, NT); k++) {
        float v = x[xf_strided_col(t, NT, k)];
        ss += v * v;
    }
    part[t] = ss;
    __syncthreads();
    for (int s = NT / 2; s > 0; s /= 2) {
        if (t < s) part[t] += part[xf_tree_partner(t, s)];
        __syncthreads();
    }
    float inv = (float)(1.0 / sqrt((double)part[0] / (double)width + (double)eps));
    for (int64_t k = 0; k < xf_strided_count(width, t, NT); k++) {
        int64_t c = xf_strided_col(t, NT, k);
        st_(y, c, x[c] * inv * w[c], yst);
    }
    __syncthreads(); /* part is reused by the caller's next norm */
}

/* The softmax of a block's scores sc[0 .. n) (thread t holds sc[t], sc[t + NT], ...; local_max
 * is the maximum of its own): the block's maximum by a tree reduction, sc[j] = exp(sc[j] - max),
 * their sum by a tree reduction. Returns 1 / sum; sc is complete for every thread on return.
 * red: NT floats of shared memory. */
static __device__ __forceinline__ float block_softmax(float *sc, int64_t n, float local_max, float *red) {
    const int t = threadIdx.x;
    red[t] = local_max;
    __syncthreads();
    for (int s = NT / 2; s > 0; s /= 2) {
        if (t < s) red[t] = fmaxf(red[t], red[xf_tree_partner(t, s)]);
        __syncthreads();
    }
    const float mx = red[0];
    __syncthreads();
    float sum = 0.f;
    for (int64_t j = t; j < n; j += NT) {
        float e = expf(sc[j] - mx);
        sc[j] = e;
        sum += e;
    }
    red[t] = sum;
    __syncthreads();
    for (int s = NT / 2; s > 0; s /= 2) {
        if (t < s) red[t] += red[xf_tree_partner(t, s)];
        __syncthreads();
    }
    return 1.f / red[0];
}

#endif
