/* The CPU backend's attention kernels (part of the cpu_kernels family, hence the xk_ prefix):
 * the per-query kernel used for decode (one query per sequence), and a blocked causal kernel for
 * prefill that works on contiguous fp32 tiles of a KV head's K and V, computing
 * (query block x key block) score tiles, an online softmax per row (running max and sum, the causal
 * mask only on the blocks that cross the diagonal), and the P.V product: on AVX-512 (head_dim a
 * multiple of 16) by the file's own register tiles, otherwise by single-threaded cblas_sgemm. None allocates or spawns threads: the backend splits the work
 * over (sequence, KV head, query block) items and gives each thread its own scratch. */
#ifndef XF_CPU_ATTENTION_H
#define XF_CPU_ATTENTION_H

#include <stdint.h>

#include "core/dtype.h"
#include "reference_model/cpu_kernels.h"

/* Attention of n_rep query heads sharing one KV head (GQA group) over n_ctx cached positions:
 * out[h] = sum_j softmax_j(scale * q[h] . K[j]) V[j], with K[j] and V[j] the head_dim elements at
 * element offset head_off of rows slots[j] of k_base / v_base (rows of row_elems elements, in
 * dtype). Online softmax over blocks of 64 keys (running max and sum, one rescale per block).
 * q, out: (n_rep, head_dim). scratch: at least n_rep * 66 + 2 * head_dim floats. */
void xk_attention(float *out, const float *q, int64_t n_rep, int64_t head_dim, const void *k_base,
                  const void *v_base, xf_dtype dtype, int64_t row_elems, int64_t head_off, const int64_t *slots,
                  int64_t n_ctx, float scale, float *scratch);

/* ---- decode, vectorized, split over the context ----
 * The same attention as xk_attention (which stays the scalar reference) in the variant for isa:
 * AVX-512 takes 16 keys at a time (16 dot products over head_dim reduced into one vector of
 * scores, the online softmax on that vector, P.V with the weights broadcast; the n_rep query heads
 * of a GQA group reuse each block of K and V from L1, so the cache is read once per KV head), and
 * prefetches the rows of the block ahead through the slot table. A GQA group of 8k heads (head_dim
 * even) or 4k heads (head_dim a multiple of 4) takes AVX-512's head-lane variant instead: 8 (or 4)
 * heads side by side in the 16 lanes, 2 (or 4) elements of a K row broadcast to all of them, so
 * a key costs head_dim / 2 (or / 4) FMAs for the chunk's heads in QK with no horizontal sums, and
 * P.V runs on register tiles of 4 heads x 4 vectors of the V rows (each output sums the keys in
 * order); bf16 rows are widened 32 elements at a time, even elements then odd (the dot products
 * and P.V sum in that order). The head-lane variant reads each block's rows whole and in order
 * into fp32 buffers of every KV head (fp32 copied, 16-bit widened), fetching the row 8 ahead, then computes one KV head after the other from there. With one query head per KV head AVX-512 reads each row whole (every
 * KV head's slice of it; fp16 / bf16 widened in the register), K row r of a block beside V row r
 * of the block before, each head's sums in the per-head order (the same bits). AVX2 runs the per-head steps on 8 lanes over rows
 * converted to fp32 first; the scalar variant is xk_attention's code. Every variant's sums run in
 * an order fixed by n_rep, head_dim and dtype only (tolerance against double: test_cpu_attention).
 * A context may be cut into parts (split-K): xk_attention_part gives a part's unnormalized output
 * and its running max and sum, xk_attention_merge combines parts. */

/* Floats of scratch xk_attention_part / _decode need (64-byte aligned): at least xk_attention's. */
int64_t xk_attn_decode_scratch(int64_t n_rep, int64_t head_dim);

/* Keys slots[0 .. n_ctx) of one KV head: o (n_rep, head_dim) = sum_j exp(s_j - m) V[j] unnormalized,
 * ml (n_rep, 2) = (m, l) the max of the scores s_j = scale * q[h] . K[j] and sum_j exp(s_j - m).
 * n_ctx >= 1. scratch: xk_attn_decode_scratch(n_rep, head_dim) floats, 64-byte aligned. */
void xk_attention_part(xk_isa isa, float *o, float *ml, const float *q, int64_t n_rep, int64_t head_dim,
                       const void *k_base, const void *v_base, xf_dtype dtype, int64_t row_elems, int64_t head_off,
                       const int64_t *slots, int64_t n_ctx, float scale, float *scratch);

/* xk_attention_part over the whole context, normalized into out (n_rep, head_dim); ml (n_rep, 2)
 * is the caller's. */
void xk_attention_decode(xk_isa isa, float *out, const float *q, int64_t n_rep, int64_t head_dim, const void *k_base,
                         const void *v_base, xf_dtype dtype, int64_t row_elems, int64_t head_off, const int64_t *slots,
                         int64_t n_ctx, float scale, float *scratch, float *ml);

/* out (n_rep, head_dim) = the attention over n_parts parts: o (n_parts, n_rep, head_dim) and
 * ml (n_parts, n_rep, 2) from xk_attention_part, rescaled to the largest max and normalized. */
void xk_attention_merge(float *out, const float *o, const float *ml, int64_t n_parts, int64_t n_rep, int64_t head_dim);

/* ---- decode attention of a batch: threads over (query, part), every KV head in each ---- */

#define XK_ATT_SPLIT_ITEMS 32 /* fewer (query, KV head) pairs than this split each context into parts */
#define XK_ATT_MAX_PARTS 8    /* at most this many parts per pair ... */
#define XK_ATT_PART_MIN 256   /* ... of at least this many keys */

typedef struct xk_attn_query {
    const float *q;               /* (n_kv * n_rep, head_dim) one token's query heads */
    float *out;                   /* (n_kv * n_rep, head_dim) its attention output */
    const void *k_base, *v_base;  /* the KV rows (of row_elems elements) its slots index */
    const int64_t *slots;         /* (n_ctx) the slot of each position */
    int64_t n_ctx;                /* keys it attends to, >= 1 */
} xk_attn_query;

/* The caller's buffers for xk_attention_batch (sizes from xk_attn_work_floats). */
typedef struct xk_attn_work {
    int64_t *items;     /* (max_queries + 1) */
    float *part_o;      /* (XK_ATT_SPLIT_ITEMS * XK_ATT_MAX_PARTS, n_rep, head_dim) split-K partial outputs:
                         * (n_kv * n_rep, head_dim) a (query, part) item, fewer than XK_ATT_SPLIT_ITEMS / n_kv
                         * queries of at most XK_ATT_MAX_PARTS parts */
    float *part_ml;     /* (XK_ATT_SPLIT_ITEMS * XK_ATT_MAX_PARTS, n_rep, 2) their max and sum, likewise */
    float *scratch;     /* (threads, scratch_n) 64-byte aligned */
    int64_t scratch_n;  /* xk_attn_thread_floats(n_kv * n_rep, head_dim) */
} xk_attn_work;

/* Floats per thread of xk_attn_work.scratch for tokens of n_heads query heads (n_kv * n_rep: an
 * item takes all of them): the kernel's scratch and a (n_heads, 2) max and sum, a multiple of 16. */
int64_t xk_attn_thread_floats(int64_t n_heads, int64_t head_dim);

/* Decode attention of n_q queries on n_kv KV heads of n_rep query heads each, on `threads` OpenMP
 * threads: work items (query, part), each over all n_kv KV heads (on AVX-512 the heads of a row
 * are read together, so a part's rows stream in order: the rows hold every KV head of a token);
 * when n_q * n_kv < XK_ATT_SPLIT_ITEMS each context is cut into parts of >= XK_ATT_PART_MIN keys
 * (at most XK_ATT_MAX_PARTS, a multiple of 16 keys each) merged afterwards. The cut depends on
 * n_q, n_kv and the contexts only, never on the thread count, so the results do not either. */
void xk_attention_batch(xk_isa isa, int threads, const xk_attn_query *qs, int64_t n_q, int64_t n_kv, int64_t n_rep,
                        int64_t head_dim, xf_dtype dtype, int64_t row_elems, float scale, const xk_attn_work *w);

/* The bytes xk_attention_batch(isa, threads, qs, ...) reads, in its order and with its split over
 * threads (the same items, scheduled alike), loaded by plain vector loads and summed, with no
 * arithmetic of attention: a probe that tells the access order's cost from the kernel's instructions
 * (bench_cpu --attention). AVX-512, one query head per KV head: rows whole, K row r of block b
 * beside V row r of block b - 1; the head-lane GQA variants: rows whole in order, K row r then V
 * row r; else per 64-key block every KV head's slice of the rows, K rows then V rows (K and V row
 * by row where the kernel converts 16-bit rows first); prefetch 1 adds the kernel's software
 * prefetches. Other ISAs: one KV head after the other, K and V row by row.
 * Returns the sum of every byte read (each byte of each slice once, whatever the order).
 * items: (n_q + 1) scratch. */
uint64_t xk_attention_replay(xk_isa isa, int threads, const xk_attn_query *qs, int64_t n_q, int64_t n_kv, int64_t n_rep,
                             int64_t hd, xf_dtype dtype, int64_t row_elems, int prefetch, int64_t *items);

/* ---- blocked causal attention (prefill) ---- */

#define XK_ATT_ROWS 256     /* query rows (queries x n_rep heads) per block: the score tile's height */
#define XK_ATT_KEYS 64      /* keys per block: the score tile's width */

/* Queries per block for a GQA group of n_rep heads: max(1, XK_ATT_ROWS / n_rep). Depends on n_rep
 * only, so the blocking (hence every result) is the same whatever the thread count. */
int64_t xk_attn_block_queries(int64_t n_rep);

/* Floats of scratch xk_attention_causal needs for n_rep and head_dim (Q, O, scores, row state). */
int64_t xk_attn_block_scratch(int64_t n_rep, int64_t head_dim);

/* Floats per thread for prefill attention over contexts of up to max_ctx positions: the K tile at
 * 0, the V tile at R and the block scratch at 2 R, R = max_ctx * head_dim rounded up to a multiple
 * of 16 floats (so each part stays 64-byte aligned). -1 when that could overflow int64. */
int64_t xk_attn_prefill_floats(int64_t max_ctx, int64_t n_rep, int64_t head_dim);

/* Gathers positions [from, to) of one KV head into contiguous fp32 tiles: kt[j] and vt[j]
 * (each head_dim floats, kt/vt (to, head_dim)) = the head_dim elements at element offset head_off
 * of rows slots[j] of k_base / v_base (rows of row_elems elements in dtype: fp32, fp16 or bf16),
 * converted exactly (every fp16 / bf16 value is a float). */
void xk_attn_gather(float *kt, float *vt, const void *k_base, const void *v_base, xf_dtype dtype,
                    int64_t row_elems, int64_t head_off, const int64_t *slots, int64_t from, int64_t to,
                    int64_t head_dim);

/* Causal attention of n_q consecutive queries at positions pos0 .. pos0 + n_q - 1 of one sequence,
 * n_rep heads each, on one KV head: query i attends to keys 0 .. pos0 + i of kt / vt
 * (pos0 + n_q, head_dim) (from xk_attn_gather). q: n_q rows of n_rep * head_dim floats, row i at
 * q + i * ldq; out likewise with ldo. Scores (scale * q) . k and softmax in float with a running
 * max per row, exp by a polynomial within ~2 ulp of expf (equal to xk_attention's within float
 * rounding: the query rows are scaled first, the sums run in another order). n_q <= xk_attn_block_queries(n_rep);
 * scratch: xk_attn_block_scratch(n_rep, head_dim) floats, 64-byte aligned. isa picks the variant
 * of the softmax loops and of the GEMMs: AVX-512 with head_dim a multiple of 16 runs register
 * tiles of 6 rows x 64 keys (QK^T on the key block transposed once, head_dim summed in order) and
 * 6 rows x 64 outputs (P.V, the block's keys summed in order, the rescale folded in); the others
 * OpenBLAS sgemm, single-threaded under OpenMP. */
void xk_attention_causal(xk_isa isa, float *out, int64_t ldo, const float *q, int64_t ldq, int64_t n_q,
                         int64_t n_rep, int64_t head_dim, int64_t pos0, const float *kt, const float *vt,
                         float scale, float *scratch);

#endif
