/* Multi-head latent attention's kernels (cuda_mla.cuh). */
#include <math.h>

#include "reference_model/cuda_mla.cuh"

namespace {

/* One block per token: q_a's norm (or q's copy), then c_kv's in place. */
__global__ void k_mla_norms(cuda_mla_dims D, float *qkv, void *qa, int qst, float *q, const float *q_a_norm, const float *kv_a_norm,
                            float eps) {
    __shared__ float part[NT];
    const int64_t t = blockIdx.x;
    float *row = qkv + t * D.qkv_width;
    if (D.q_rank > 0) {
        void *dst = qst == ST_F32 ? (void *)((float *)qa + t * D.q_rank) : (void *)((uint16_t *)qa + t * D.q_rank);
        block_rmsnorm(dst, qst, row, q_a_norm, D.q_rank, eps, part);
    } else {
        for (int64_t c = threadIdx.x; c < D.q_rows; c += NT) q[t * D.q_rows + c] = row[c];
    }
    block_rmsnorm(row + D.q_rows, ST_F32, row + D.q_rows, kv_a_norm, D.kv_rank, eps, part);
}

/* One thread per rotary part: (token, head) of q, or (token, n_heads) for k_rope. */
__global__ void k_mla_rope(cuda_mla_dims D, float *qkv, float *q, meta_dev m, int n_seqs, int64_t n, const double *inv_freq,
                           double scale, int interleave) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * (D.n_heads + 1)) return;
    const int64_t t = idx / (D.n_heads + 1), h = idx % (D.n_heads + 1);
    int in_qkv;
    const int64_t off = xf_mla_rope_part(t, h, D.n_heads, D.nope, D.rope, D.qkv_width, D.q_rows, D.kv_rank, &in_qkv);
    float *x = (in_qkv ? qkv : q) + off;
    const int s = xf_seq_of_row(m.tok_off, n_seqs, t);
    const int64_t pos = m.seq_pos[s] + (t - m.tok_off[s]), half = D.rope / 2;
    float in[XF_MLA_MAX_ROPE];
    for (int64_t i = 0; i < D.rope; i++) in[i] = x[i];
    for (int64_t i = 0; i < half; i++) {
        int64_t s0, s1;
        float c, sn;
        xf_rope_pair_src(i, D.rope, interleave, &s0, &s1);
        xf_rope_cos_sin(pos, inv_freq, i, scale, &c, &sn);
        xf_rope_rotate(in[s0], in[s1], c, sn, &x[i], &x[i + half]);
    }
}

__global__ void k_mla_append(cuda_mla_dims D, const float *qkv, meta_dev m, int n_seqs, int64_t n, int64_t layer, int kst) {
    const int64_t w = D.kv_rank + D.rope;
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * w) return;
    int s;
    int64_t dst;
    int64_t src = xf_kv_append_index(idx, w, D.qkv_width, D.q_rows, m.tok_off, n_seqs, m.seq_pos, m.tables, m.table_off, m.tpe, layer,
                                     m.n_slots, &s, &dst);
    st_(m.kbase[s], dst, qkv[src], kst);
}

__global__ void k_mla_gather(cuda_mla_dims D, meta_dev m, int s, int64_t ctx, int64_t layer, int kst, void *ckv, int cst, float *krope) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= ctx * (D.kv_rank + D.rope)) return;
    int to_ckv;
    int64_t src, dst = xf_mla_gather(idx, D.kv_rank, D.rope, m.tables + m.table_off[s], m.tpe[s], layer, m.n_slots[s], &to_ckv, &src);
    float v = ld(m.kbase[s], src, kst);
    if (to_ckv) st_(ckv, dst, v, cst);
    else krope[dst] = v;
}

/* One block per (query, head); q (nope + rope) | reduction (NT) | scores (pos + 1) in shared memory. */
__global__ void k_mla_attention(cuda_mla_dims D, const float *q, const float *kvdec, const float *krope, void *att, int ast,
                                int64_t row0, int64_t pos0, float scale) {
    extern __shared__ float sm[];
    const int64_t qh = D.nope + D.rope, ld_ = D.n_heads * (D.nope + D.v);
    float *qs = sm, *red = sm + qh, *sc = red + NT;
    const int t = threadIdx.x;
    xf_mla_task task = xf_mla_index(blockIdx.x, D.n_heads, D.nope, D.rope, D.v, row0, pos0);
    for (int64_t i = t; i < qh; i += NT) qs[i] = q[task.q_off + i];
    __syncthreads();
    const int64_t nkeys = task.pos + 1;
    float mx = -INFINITY;
    for (int64_t j = t; j < nkeys; j += NT) {
        const float *k = kvdec + j * ld_ + task.kv_off, *kr = krope + j * D.rope;
        float s = 0.f;
        for (int64_t i = 0; i < D.nope; i++) s += qs[i] * k[i];
        for (int64_t i = 0; i < D.rope; i++) s += qs[D.nope + i] * kr[i];
        s *= scale;
        sc[j] = s;
        mx = fmaxf(mx, s);
    }
    const float inv = block_softmax(sc, nkeys, mx, red);
    for (int64_t i = t; i < D.v; i += NT) {
        float acc = 0.f;
        for (int64_t j = 0; j < nkeys; j++) acc += sc[j] * kvdec[j * ld_ + task.kv_off + D.nope + i];
        st_(att, task.out_off + i, acc * inv, ast);
    }
}

} // namespace

void cuda_mla_norms(cudaStream_t st, const cuda_mla_dims *D, float *qkv, void *qa, int qst, float *q, const float *q_a_norm,
                    const float *kv_a_norm, int64_t n, float eps) {
    k_mla_norms<<<(unsigned)n, NT, 0, st>>>(*D, qkv, qa, qst, q, q_a_norm, kv_a_norm, eps);
}

void cuda_mla_rope(cudaStream_t st, const cuda_mla_dims *D, float *qkv, float *q, meta_dev m, int n_seqs, int64_t n,
                   const double *inv_freq, double scale, int interleave) {
    k_mla_rope<<<blocks_for(n * (D->n_heads + 1), 64), 64, 0, st>>>(*D, qkv, q, m, n_seqs, n, inv_freq, scale, interleave);
}

void cuda_mla_append(cudaStream_t st, const cuda_mla_dims *D, const float *qkv, meta_dev m, int n_seqs, int64_t n, int64_t layer,
                     int kst) {
    k_mla_append<<<blocks_for(n * (D->kv_rank + D->rope), NT), NT, 0, st>>>(*D, qkv, m, n_seqs, n, layer, kst);
}

void cuda_mla_gather(cudaStream_t st, const cuda_mla_dims *D, meta_dev m, int s, int64_t ctx, int64_t layer, int kst, void *ckv,
                     int cst, float *krope) {
    k_mla_gather<<<blocks_for(ctx * (D->kv_rank + D->rope), NT), NT, 0, st>>>(*D, m, s, ctx, layer, kst, ckv, cst, krope);
}

void cuda_mla_attention(cudaStream_t st, const cuda_mla_dims *D, const float *q, const float *kvdec, const float *krope, void *att,
                        int ast, int64_t row0, int64_t pos0, int64_t n_new, float scale, size_t smem) {
    k_mla_attention<<<(unsigned)(n_new * D->n_heads), NT, smem, st>>>(*D, q, kvdec, krope, att, ast, row0, pos0, scale);
}

cudaError_t cuda_mla_attention_smem(size_t smem) {
    return cudaFuncSetAttribute(k_mla_attention, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}
