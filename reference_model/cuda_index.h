/* The per-element index math of every CUDA kernel (cuda_backend.cu), as __host__ __device__
 * functions so that the CPU tests (tests/test_cuda_index.c) run exactly the arithmetic the GPU
 * runs. Each kernel is "one thread per element (or per pair / per row)": the kernel computes a
 * flat index and calls the function here to find what it reads and writes. Nothing here touches
 * memory except through the pointers it is given.
 *
 * Layouts (the same as the CPU backend's, backend.h and kv_cache.h):
 *   activations      (n_tokens, width) row-major, row = packed token (step_batch.tok_off)
 *   qkv              (n_tokens, q_dim + 2 * kv_dim): Q | K | V, q_dim = n_heads * head_dim
 *   gate_up          (n_tokens, 2 * d_ff): gate | up
 *   KV pool          per layer K (n_slots, kv_dim) and V (n_slots, kv_dim), stored as one array
 *                    (n_layers, n_slots, kv_dim) for K and one for V
 *   block table      entry e = first slot of logical block e, tokens_per_entry positions each
 *                    (paged: B; contiguous policies and the system allocator: one entry) */
#ifndef XF_CUDA_INDEX_H
#define XF_CUDA_INDEX_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define XF_HD __host__ __device__
#else
#define XF_HD
#endif

/* ---- Element-wise ops over a (rows, width) matrix: embedding, residual, RMSNorm scale. */

/* Flat index -> (row, col) of a (rows, width) matrix. */
XF_HD static inline void xf_idx_row_col(int64_t idx, int64_t width, int64_t *row, int64_t *col) {
    *row = idx / width;
    *col = idx - *row * width;
}

/* Embedding: element idx of the (n_tokens, d_model) output reads row tokens[row] of the
 * (vocab, d_model) table. Returns the table offset; *out_off gets the output offset. */
XF_HD static inline int64_t xf_embed_src(int64_t idx, int64_t d_model, const int32_t *tokens, int64_t *out_off) {
    int64_t row, col;
    xf_idx_row_col(idx, d_model, &row, &col);
    *out_off = idx;
    return (int64_t)tokens[row] * d_model + col;
}

/* ---- RMSNorm: one block per row; thread t sums columns t, t + T, t + 2T, ... then a tree
 * reduction over the T partial sums. */

/* Number of columns thread t of T handles in a row of `width`. */
XF_HD static inline int64_t xf_strided_count(int64_t width, int t, int T) {
    return t >= width ? 0 : (width - 1 - t) / T + 1;
}

/* Column of the k-th element thread t handles. */
XF_HD static inline int64_t xf_strided_col(int t, int T, int64_t k) {
    return (int64_t)t + k * T;
}

/* Tree reduction step: at stride s (T/2, T/4, ..., 1) thread t < s adds partner t + s. */
XF_HD static inline int xf_tree_partner(int t, int s) {
    return t + s;
}

/* ---- RoPE, rotate-half convention (HF LLaMA): within each head, element i pairs with
 * i + head_dim/2, rotated by angle pos * theta^(-2i/head_dim). One thread per pair. */

typedef struct xf_rope_pair {
    int64_t a;   /* offset of element i of the head */
    int64_t b;   /* offset of element i + head_dim/2 */
    int64_t tok; /* packed token row */
    int64_t i;   /* pair index in [0, head_dim/2) */
} xf_rope_pair;

/* Pair `idx` of (n_tokens, n_heads, head_dim/2) in a buffer whose rows are `row_stride` elements
 * apart and whose heads start at column `col0` (Q at 0, K at q_dim inside the qkv buffer). */
XF_HD static inline xf_rope_pair xf_rope_index(int64_t idx, int64_t n_heads, int64_t head_dim, int64_t row_stride,
                                               int64_t col0) {
    int64_t half = head_dim / 2;
    xf_rope_pair p;
    p.i = idx % half;
    int64_t th = idx / half; /* token * n_heads + head */
    int64_t head = th % n_heads;
    p.tok = th / n_heads;
    p.a = p.tok * row_stride + col0 + head * head_dim + p.i;
    p.b = p.a + half;
    return p;
}

/* The rotation angle of pair i at position pos: pos * theta^(-2i / head_dim), in double on the
 * host and in float on the device is the caller's choice (the backend uses double for the
 * frequency and float for the rotation, as the CPU backend does). */
XF_HD static inline double xf_rope_angle(int64_t pos, int64_t i, int64_t head_dim, double theta) {
    return (double)pos * pow(theta, -2.0 * (double)i / (double)head_dim);
}

/* Rotates (x0, x1) by angle (cos c, sin s): x0' = x0 c - x1 s, x1' = x0 s + x1 c. */
XF_HD static inline void xf_rope_rotate(float x0, float x1, float c, float s, float *y0, float *y1) {
    *y0 = x0 * c - x1 * s;
    *y1 = x0 * s + x1 * c;
}

/* ---- Which sequence a packed token row belongs to: the largest s with tok_off[s] <= row
 * (binary search over the (n_seqs + 1) offsets). */
XF_HD static inline int xf_seq_of_row(const int64_t *tok_off, int n_seqs, int64_t row) {
    int lo = 0, hi = n_seqs - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (tok_off[mid] <= row) lo = mid; else hi = mid - 1;
    }
    return lo;
}

/* ---- KV addressing through the block table (kv_cache_slot's rule). */

/* Slot of position pos: table[pos / tpe] + pos % tpe. */
XF_HD static inline int64_t xf_kv_slot(const int32_t *table, int64_t tokens_per_entry, int64_t pos) {
    return (int64_t)table[pos / tokens_per_entry] + pos % tokens_per_entry;
}

/* Offset of element (layer, slot, column c of kv_dim) in a (n_layers, n_slots, kv_dim) array. */
XF_HD static inline int64_t xf_kv_offset(int64_t layer, int64_t slot, int64_t c, int64_t n_slots, int64_t kv_dim) {
    return (layer * n_slots + slot) * kv_dim + c;
}

/* KV append: element idx of the step's new K (or V), (n_tokens, kv_dim). Returns the source
 * offset inside the qkv buffer (row stride qkv_width, K or V block at column col0) and writes the
 * destination offset into the sequence's KV array (*seq: which sequence, so the kernel picks that
 * sequence's base pointer: the pool for every sequence in pool mode, the sequence's own buffer with
 * the system allocator). The token's sequence s has its block table at tables + table_off[s] with
 * tpe[s] positions per entry, its array n_slots[s] slots per layer; its position is
 * seq_pos[s] + (row - tok_off[s]). */
XF_HD static inline int64_t xf_kv_append_index(int64_t idx, int64_t kv_dim, int64_t qkv_width, int64_t col0,
                                               const int64_t *tok_off, int n_seqs, const int64_t *seq_pos,
                                               const int32_t *tables, const int64_t *table_off, const int64_t *tpe,
                                               int64_t layer, const int64_t *n_slots, int *seq, int64_t *dst) {
    int64_t row, c;
    xf_idx_row_col(idx, kv_dim, &row, &c);
    int s = xf_seq_of_row(tok_off, n_seqs, row);
    int64_t pos = seq_pos[s] + (row - tok_off[s]);
    int64_t slot = xf_kv_slot(tables + table_off[s], tpe[s], pos);
    *seq = s;
    *dst = xf_kv_offset(layer, slot, c, n_slots[s], kv_dim);
    return row * qkv_width + col0 + c;
}

/* ---- Attention: one block per (packed token row, query head). GQA: query head h reads KV head
 * h / (n_heads / n_kv_heads). Causal: the token at position p attends over positions 0..p. */

XF_HD static inline int64_t xf_gqa_kv_head(int64_t h, int64_t n_heads, int64_t n_kv_heads) {
    return h / (n_heads / n_kv_heads);
}

typedef struct xf_attn_task {
    int64_t row;    /* packed token row */
    int64_t head;   /* query head */
    int64_t kv_head;
    int seq;        /* sequence of the row */
    int64_t pos;    /* the token's position; keys 0..pos are visible */
    int64_t q_off;  /* offset of the query head in the qkv buffer */
    int64_t out_off;/* offset of the head's output in the (n_tokens, q_dim) buffer */
} xf_attn_task;

/* Task `bid` of (n_tokens, n_heads). */
XF_HD static inline xf_attn_task xf_attn_index(int64_t bid, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                                               int64_t qkv_width, const int64_t *tok_off, int n_seqs,
                                               const int64_t *seq_pos) {
    xf_attn_task t;
    t.row = bid / n_heads;
    t.head = bid - t.row * n_heads;
    t.kv_head = xf_gqa_kv_head(t.head, n_heads, n_kv_heads);
    t.seq = xf_seq_of_row(tok_off, n_seqs, t.row);
    t.pos = seq_pos[t.seq] + (t.row - tok_off[t.seq]);
    t.q_off = t.row * qkv_width + t.head * head_dim;
    t.out_off = t.row * (n_heads * head_dim) + t.head * head_dim;
    return t;
}

/* Offset of key (or value) j's element d for a task, read through the sequence's block table
 * from the layer's pool: the paged read. */
XF_HD static inline int64_t xf_attn_kv_offset(const xf_attn_task *t, int64_t j, int64_t d, int64_t head_dim,
                                              const int32_t *table, int64_t tpe, int64_t layer, int64_t n_slots,
                                              int64_t kv_dim) {
    int64_t slot = xf_kv_slot(table, tpe, j);
    return xf_kv_offset(layer, slot, t->kv_head * head_dim + d, n_slots, kv_dim);
}

/* ---- SwiGLU: element idx of (n_tokens, d_ff): out = silu(gate) * up, gate and up side by side
 * in the (n_tokens, 2 * d_ff) buffer. */
typedef struct xf_swiglu_index {
    int64_t gate, up, out;
} xf_swiglu_index;

XF_HD static inline xf_swiglu_index xf_swiglu_at(int64_t idx, int64_t d_ff) {
    int64_t row, j;
    xf_idx_row_col(idx, d_ff, &row, &j);
    xf_swiglu_index r;
    r.gate = row * 2 * d_ff + j;
    r.up = r.gate + d_ff;
    r.out = idx;
    return r;
}

/* ---- Which row of a step's activations lm_head reads for sequence s: its last new token. */
XF_HD static inline int64_t xf_last_row(const int64_t *tok_off, int s) {
    return tok_off[s + 1] - 1;
}

/* ---- Argmax: one block per row of logits; thread t scans columns t, t + T, ... keeping the
 * first maximum, then a tree reduction where the lower index wins ties, so the result is the
 * first maximum of the row, as a straight loop finds it. */
XF_HD static inline int xf_argmax_better(float v_new, int64_t i_new, float v_old, int64_t i_old) {
    return v_new > v_old || (v_new == v_old && i_new < i_old);
}

/* ---- RoPE from the config's inverse-frequency table (config_rope_freqs: default, linear,
 * dynamic, llama3, yarn all give a table and a factor): cos and sin of pos * inv_freq[i], in double,
 * rounded to float and times `scale` (yarn's attention factor; 1 otherwise), as
 * xk_rope_table_freqs computes them on the CPU. */
XF_HD static inline void xf_rope_cos_sin(int64_t pos, const double *inv_freq, int64_t i, double scale, float *c, float *s) {
    double a = (double)pos * inv_freq[i];
    *c = scale == 1.0 ? (float)cos(a) : (float)(cos(a) * scale);
    *s = scale == 1.0 ? (float)sin(a) : (float)(sin(a) * scale);
}

/* ---- q/k RMSNorm (qwen3): one block per (token, head) over Q heads then K heads, each head's
 * head_dim elements normed in place with the Q or K weight. Returns the head's first offset in the
 * qkv buffer (row stride `width`, K heads from column q_dim); *is_k says which weight. */
XF_HD static inline int64_t xf_head_norm_offset(int64_t bid, int64_t n_tokens, int64_t n_heads, int64_t n_kv_heads,
                                                int64_t head_dim, int64_t width, int64_t q_dim, int *is_k) {
    const int64_t nq = n_tokens * n_heads;
    *is_k = bid >= nq;
    if (!*is_k) return (bid / n_heads) * width + (bid % n_heads) * head_dim;
    const int64_t b = bid - nq;
    return (b / n_kv_heads) * width + q_dim + (b % n_kv_heads) * head_dim;
}

/* ---- Sliding windows (mistral, qwen2/qwen3 layer_types): the query at position pos sees keys
 * pos - window + 1 .. pos (transformers' key > query - window); window 0: all of 0 .. pos. The
 * kernel reads keys first .. pos through the block table (xf_kv_slot of each), nothing before. */
XF_HD static inline int64_t xf_window_first_key(int64_t pos, int64_t window) {
    return window > 0 && pos + 1 > window ? pos + 1 - window : 0;
}

/* ---- Multi-head latent attention (DeepSeek-V3, the naive form cpu_mla.c runs).
 * Buffers: qkv (n_tokens, q_rows + kv_lora_rank + rope_dim): [q_a | c_kv | k_rope] (q_rows =
 * q_lora_rank) or [q | c_kv | k_rope] (q_rows = n_heads * (nope + rope)); q (n_tokens, n_heads *
 * (nope + rope)), each head [q_nope | q_rope]; the latent cache row [c_kv | k_rope] (kv_lora_rank +
 * rope_dim) per token and layer; kvdec (ctx, n_heads * (nope + v)) = kv_b(c_kv), each head
 * [K_nope | V]; att (n_tokens, n_heads * v). */

/* The rotary part of head h of a query row (or, h = n_heads, the row's k_rope): its first offset.
 * Parts 0 .. n_heads - 1 of token t are in q, part n_heads in qkv. */
XF_HD static inline int64_t xf_mla_rope_part(int64_t t, int64_t h, int64_t n_heads, int64_t nope, int64_t rope,
                                             int64_t qkv_width, int64_t q_rows, int64_t kv_rank, int *in_qkv) {
    *in_qkv = h == n_heads;
    if (*in_qkv) return t * qkv_width + q_rows + kv_rank;
    return t * n_heads * (nope + rope) + h * (nope + rope) + nope;
}

/* Largest rotary part (qk_rope_head_dim) the latent rope kernel holds: one thread keeps a part in
 * a local array (cuda_meta_unsupported refuses a larger one). */
#define XF_MLA_MAX_ROPE 256

/* Pair i of a rotary part of `dim` elements: the elements it reads (*src0, *src1) and writes
 * (i and i + dim/2). interleave 0: rotate_half, (i, i + dim/2); 1: (2i, 2i + 1), written back
 * de-interleaved as mla_rope writes them. An interleaved part is rotated by one thread (it reads
 * what other pairs write). */
XF_HD static inline void xf_rope_pair_src(int64_t i, int64_t dim, int interleave, int64_t *src0, int64_t *src1) {
    if (interleave) {
        *src0 = 2 * i;
        *src1 = 2 * i + 1;
    } else {
        *src0 = i;
        *src1 = i + dim / 2;
    }
}

typedef struct xf_mla_task {
    int64_t row;     /* packed token row */
    int64_t head;
    int64_t pos;     /* the token's position: keys 0 .. pos */
    int64_t q_off;   /* the head's [q_nope | q_rope] in q */
    int64_t kv_off;  /* the head's [K_nope | V] in row 0 of kvdec (row j at + j * ld) */
    int64_t out_off; /* the head's v elements in att */
} xf_mla_task;

/* Task `bid` of (n_new, n_heads) of one sequence whose new rows start at row0 at position pos0. */
XF_HD static inline xf_mla_task xf_mla_index(int64_t bid, int64_t n_heads, int64_t nope, int64_t rope, int64_t v,
                                             int64_t row0, int64_t pos0) {
    xf_mla_task t;
    const int64_t i = bid / n_heads;
    t.head = bid - i * n_heads;
    t.row = row0 + i;
    t.pos = pos0 + i;
    t.q_off = t.row * n_heads * (nope + rope) + t.head * (nope + rope);
    t.kv_off = t.head * (nope + v);
    t.out_off = t.row * n_heads * v + t.head * v;
    return t;
}

/* The latent gather of one sequence: element idx of (ctx, kv_rank + rope) goes to c_kv (ctx,
 * kv_rank) when *to_ckv, else to k_rope (ctx, rope); returns the destination offset and writes the
 * source offset of the layer's (n_layers, n_slots, kv_rank + rope) cache through the block table. */
XF_HD static inline int64_t xf_mla_gather(int64_t idx, int64_t kv_rank, int64_t rope, const int32_t *table, int64_t tpe,
                                          int64_t layer, int64_t n_slots, int *to_ckv, int64_t *src) {
    const int64_t w = kv_rank + rope;
    int64_t j, c;
    xf_idx_row_col(idx, w, &j, &c);
    *src = xf_kv_offset(layer, xf_kv_slot(table, tpe, j), c, n_slots, w);
    *to_ckv = c < kv_rank;
    return *to_ckv ? j * kv_rank + c : j * rope + (c - kv_rank);
}

#endif
