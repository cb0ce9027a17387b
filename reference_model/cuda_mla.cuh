/* Multi-head latent attention's kernels on the GPU (cuda_mla.cu), DeepSeek-V3 in the naive form
 * the CPU reference runs (cpu_mla.h): the GEMMs (the fused [q_a | kv_a] projection, q_b, kv_b,
 * o_proj) are cuBLAS calls in cuda_backend.cu between them. Layouts: cuda_index.h's MLA section.
 *
 *   qkv        GEMM -> cuda_mla_norms: q_a RMSNorm'd into the 16-bit q_b input (or q copied out
 *              without a q rank), c_kv RMSNorm'd in place -> q_b GEMM into q
 *   rope       cuda_mla_rope: every head's rotary part of q and the row's k_rope, interleaved or
 *              not, angles from the config's frequency table
 *   kv_append  the latent row [c_kv | k_rope] into the layer's cache through the block table
 *   attention  per sequence: cuda_mla_gather (the context's latents through the block table:
 *              c_kv as 16-bit kv_b input, k_rope fp32) -> kv_b GEMM (per head [K_nope | V]) ->
 *              cuda_mla_attention (one block per (query, head)) */
#ifndef XF_CUDA_MLA_CUH
#define XF_CUDA_MLA_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "reference_model/cuda_kern.cuh"

/* The dimensions every MLA kernel takes. */
struct cuda_mla_dims {
    int64_t n_heads, nope, rope, v, kv_rank, q_rank;
    int64_t q_rows;    /* q_rank, or n_heads * (nope + rope) without a q rank */
    int64_t qkv_width; /* q_rows + kv_rank + rope */
};

/* Per token row t < n of qkv: the norms (eps: MLA_NORM_EPS). qa (n, q_rank) at storage qst; q
 * (n, n_heads * (nope + rope)) fp32 gets the rows without a q rank. */
void cuda_mla_norms(cudaStream_t st, const cuda_mla_dims *D, float *qkv, void *qa, int qst, float *q, const float *q_a_norm,
                    const float *kv_a_norm, int64_t n, float eps);

/* RoPE of q's rotary parts and qkv's k_rope; inv_freq (rope / 2) doubles on the device. */
void cuda_mla_rope(cudaStream_t st, const cuda_mla_dims *D, float *qkv, float *q, meta_dev m, int n_seqs, int64_t n,
                   const double *inv_freq, double scale, int interleave);

/* The step's latent rows into layer `layer` of each sequence's cache (kbase, storage kst). */
void cuda_mla_append(cudaStream_t st, const cuda_mla_dims *D, const float *qkv, meta_dev m, int n_seqs, int64_t n, int64_t layer,
                     int kst);

/* Sequence s's ctx latents: ckv (ctx, kv_rank) at storage cst, krope (ctx, rope) fp32. */
void cuda_mla_gather(cudaStream_t st, const cuda_mla_dims *D, meta_dev m, int s, int64_t ctx, int64_t layer, int kst, void *ckv,
                     int cst, float *krope);

/* Sequence s's n_new queries (rows row0 .., positions pos0 ..) over kvdec (ctx, n_heads * (nope +
 * v)) and krope: att (n, n_heads * v) at storage ast. smem: the dynamic shared memory bytes. */
void cuda_mla_attention(cudaStream_t st, const cuda_mla_dims *D, const float *q, const float *kvdec, const float *krope,
                        void *att, int ast, int64_t row0, int64_t pos0, int64_t n_new, float scale, size_t smem);

/* Lets cuda_mla_attention use smem bytes of dynamic shared memory (cudaFuncSetAttribute). */
cudaError_t cuda_mla_attention_smem(size_t smem);

#endif
