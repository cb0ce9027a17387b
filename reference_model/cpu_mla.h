/* Multi-head latent attention on the CPU (DeepseekV3Attention), in two forms (model.mla.form):
 * naive, as transformers runs it (every step decompresses the cached latents into each head's K
 * and V), and absorbed (W_UK folded into the query, W_UV into the output, attention over the
 * latents themselves). The kernels here
 * are pure functions of their buffers; cpu_backend.c owns the buffers, the GEMMs and the order:
 *
 *   qkv    [q_a | c_kv | k_rope] = x . [W_qa; W_kva]  (or [q | c_kv | k_rope] without a q rank);
 *          q_a and c_kv RMSNorm'd (eps 1e-6, DeepseekV3RMSNorm's default); q = q_b(q_a)
 *   rope   the last qk_rope_head_dim of every Q head and k_rope rotated (mla_rope)
 *   kv_append  the latent row [c_kv | k_rope] (kv_lora_rank + qk_rope_head_dim) into the cache
 *   attention  per sequence: the context's latents gathered, kv_b(c_kv) = per head [K_nope | V],
 *          then every (query, head): softmax(scale (q_nope . K_nope + q_rot . k_rope)) . V
 *          (mla_attend_head)
 *   o_proj  (n_heads * v_head_dim) -> d_model
 * The absorbed form (kv_b's rows of head h: W_UK (qk_nope, r) then W_UV (v_head_dim, r)):
 *   qkv    as above, then each head's q_lat = W_UK^T q_nope (r), beside its q_rot
 *   attention  every (query, head): softmax(scale (q_lat . c_kv + q_rot . k_rope)) . c_kv, an
 *          r-wide latent output (mla_attend_latent); nothing decompressed
 *   o_proj  each head's W_UV . latent output (v_head_dim), then o_proj as above
 * Both give q_nope . K_nope = (W_UK^T q_nope) . c_kv and P . V = W_UV (P . c_kv) in exact
 * arithmetic; in float they differ by rounding only. */
#ifndef XF_CPU_MLA_H
#define XF_CPU_MLA_H

#include <stdint.h>

#define MLA_NORM_EPS 1e-6f /* q_a_layernorm and kv_a_layernorm: DeepseekV3RMSNorm(dim) keeps its default eps */

/* Rotates one rotary part x (dim elements, dim even) at the angles of cos_t / sin_t (dim / 2
 * each, one per pair). interleave 0: pairs (x_i, x_{i + dim/2}) as rotate_half does; 1: pairs
 * (x_{2i}, x_{2i+1}), written back as transformers' apply_rotary_pos_emb_interleave writes them,
 * de-interleaved ([x_{2i} c - x_{2i+1} s ..., x_{2i+1} c + x_{2i} s ...]): Q and K get the same
 * layout, so their dot products are those of the interleaved rotation. scratch: dim floats. */
void mla_rope(float *x, int64_t dim, const float *cos_t, const float *sin_t, int interleave, float *scratch);

/* One head of one query over keys 0 .. n_keys - 1: out (dv) = sum_j softmax_j(s_j) V_j with
 * s_j = scale * (q[0 .. dn) . kvdec_j[0 .. dn) + q[dn .. dn + dr) . krope_j), V_j = kvdec_j[dn ..
 * dn + dv). kvdec: row j at kvdec + j * ld (this head's [K_nope | V]); krope: (n_keys, dr).
 * scores: n_keys floats. n_keys >= 1. */
void mla_attend_head(float *out, const float *q, int64_t dn, int64_t dr, int64_t dv, const float *kvdec, int64_t ld,
                     const float *krope, int64_t n_keys, float scale, float *scores);

/* The absorbed form's attention of one head of one query: out (r) = sum_j softmax_j(s_j) ckv_j
 * with s_j = scale * (q[0 .. r) . ckv_j + q[r .. r + dr) . krope_j); ckv (n_keys, r), krope
 * (n_keys, dr). scores: n_keys floats. n_keys >= 1. */
void mla_attend_latent(float *out, const float *q, int64_t r, int64_t dr, const float *ckv, const float *krope, int64_t n_keys,
                       float scale, float *scores);

/* One head's absorption with w (rows, cols) row-major fp32: transpose 1: out (cols) = w^T x, x
 * (rows) (q_lat = W_UK^T q_nope); 0: out (rows) = w x, x (cols) (W_UV . latent output). */
void mla_absorb_rows(float *out, const float *w, const float *x, int64_t rows, int64_t cols, int transpose);

#endif
