/* The CUDA kernels' index math (reference_model/cuda_index.h), run on the CPU the way the kernels
 * run it (flat thread indices, strided loops, tree reductions) and checked against straight loops
 * and hand-computed values. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference_model/cuda_index.h"
#include "reference_model/kv_cache.h"

/* RMSNorm's per-row sum of squares as a block of T threads computes it. */
static float block_sumsq(const float *x, int64_t width, int T) {
    float part[64];
    for (int t = 0; t < T; t++) {
        part[t] = 0;
        for (int64_t k = 0; k < xf_strided_count(width, t, T); k++) {
            float v = x[xf_strided_col(t, T, k)];
            part[t] += v * v;
        }
    }
    for (int s = T / 2; s > 0; s /= 2)
        for (int t = 0; t < s; t++) part[t] += part[xf_tree_partner(t, s)];
    return part[0];
}

Test(cuda_index, strided_counts_cover_row_once) {
    /* width 37, T 8: threads 0..4 get 5 columns (t, t+8, ..., t+32 <= 36), threads 5..7 get 4. */
    cr_assert_eq(xf_strided_count(37, 0, 8), 5);
    cr_assert_eq(xf_strided_count(37, 4, 8), 5);
    cr_assert_eq(xf_strided_count(37, 5, 8), 4);
    cr_assert_eq(xf_strided_count(3, 5, 8), 0); /* more threads than columns */
    int seen[37] = {0};
    for (int t = 0; t < 8; t++)
        for (int64_t k = 0; k < xf_strided_count(37, t, 8); k++) seen[xf_strided_col(t, 8, k)]++;
    for (int c = 0; c < 37; c++) cr_assert_eq(seen[c], 1, "column %d seen %d times", c, seen[c]);
}

Test(cuda_index, rmsnorm_block_sum_matches_loop) {
    /* x = 1..37: sum of squares = 37*38*75/6 = 17575. */
    float x[37];
    for (int i = 0; i < 37; i++) x[i] = (float)(i + 1);
    cr_assert_float_eq(block_sumsq(x, 37, 8), 17575.0f, 1e-3);
    cr_assert_float_eq(block_sumsq(x, 37, 32), 17575.0f, 1e-3);
    int64_t row, col;
    xf_idx_row_col(75, 37, &row, &col); /* 75 = 2*37 + 1 */
    cr_assert_eq(row, 2);
    cr_assert_eq(col, 1);
}

Test(cuda_index, embedding_gathers_rows) {
    int32_t tokens[3] = {5, 0, 2};
    int64_t out;
    /* element 9 of (3, 4): row 2, col 1 -> token 2 -> table offset 2*4+1 = 9 */
    cr_assert_eq(xf_embed_src(9, 4, tokens, &out), 9);
    cr_assert_eq(out, 9);
    /* element 3: row 0, col 3 -> token 5 -> 5*4+3 = 23 */
    cr_assert_eq(xf_embed_src(3, 4, tokens, &out), 23);
}

Test(cuda_index, rope_pairs_rotate_half) {
    /* 2 tokens, 2 heads, head_dim 4 (half 2), row stride 20, K block at column 8. Pair idx 5 =
     * token 1 (5 / (2*2)), head 0 ((5/2) % 2 = 0), i = 1: a = 1*20 + 8 + 0*4 + 1 = 29, b = 31. */
    xf_rope_pair p = xf_rope_index(5, 2, 4, 20, 8);
    cr_assert_eq(p.tok, 1);
    cr_assert_eq(p.i, 1);
    cr_assert_eq(p.a, 29);
    cr_assert_eq(p.b, 31);
    /* idx 3: token 0, head 1, i 1: a = 0 + 8 + 4 + 1 = 13 */
    p = xf_rope_index(3, 2, 4, 20, 8);
    cr_assert_eq(p.a, 13);
    cr_assert_eq(p.b, 15);
    /* angle(pos 3, i 1, head_dim 4, theta 10000) = 3 * 10000^(-1/2) = 0.03 */
    cr_assert_float_eq(xf_rope_angle(3, 1, 4, 10000.0), 0.03, 1e-12);
    cr_assert_float_eq(xf_rope_angle(3, 0, 4, 10000.0), 3.0, 1e-12);
    /* rotating (1, 0) by 90 degrees gives (0, 1); (2, 3) by 180 gives (-2, -3) */
    float y0, y1;
    xf_rope_rotate(1, 0, 0, 1, &y0, &y1);
    cr_assert_float_eq(y0, 0.0f, 1e-7);
    cr_assert_float_eq(y1, 1.0f, 1e-7);
    xf_rope_rotate(2, 3, -1, 0, &y0, &y1);
    cr_assert_float_eq(y0, -2.0f, 1e-7);
    cr_assert_float_eq(y1, -3.0f, 1e-7);
}

Test(cuda_index, rope_covers_every_element_once) {
    enum { T = 3, H = 5, D = 8, W = 64, C0 = 7 };
    int seen[T * W];
    memset(seen, 0, sizeof seen);
    for (int64_t idx = 0; idx < T * H * (D / 2); idx++) {
        xf_rope_pair p = xf_rope_index(idx, H, D, W, C0);
        seen[p.a]++;
        seen[p.b]++;
    }
    for (int t = 0; t < T; t++)
        for (int c = 0; c < W; c++) {
            int expect = (c >= C0 && c < C0 + H * D) ? 1 : 0;
            cr_assert_eq(seen[t * W + c], expect, "token %d column %d", t, c);
        }
}

Test(cuda_index, seq_of_row_binary_search) {
    int64_t off[4] = {0, 3, 4, 9}; /* sequences of 3, 1, 5 new tokens */
    int expect[9] = {0, 0, 0, 1, 2, 2, 2, 2, 2};
    for (int r = 0; r < 9; r++) cr_assert_eq(xf_seq_of_row(off, 3, r), expect[r], "row %d", r);
    int64_t one[2] = {0, 1};
    cr_assert_eq(xf_seq_of_row(one, 1, 0), 0);
}

Test(cuda_index, kv_slot_through_block_table) {
    /* paged B = 2, table {6, 2, 10}: positions 0,1 -> 6,7; 2,3 -> 2,3; 4 -> 10 */
    int32_t table[3] = {6, 2, 10};
    int64_t expect[5] = {6, 7, 2, 3, 10};
    for (int p = 0; p < 5; p++) cr_assert_eq(xf_kv_slot(table, 2, p), expect[p]);
    /* contiguous region at base 40 holding 100 positions: pos 57 -> 97 */
    int32_t region[1] = {40};
    cr_assert_eq(xf_kv_slot(region, 100, 57), 97);
    /* (layer 2, slot 3, col 5) in (4, 10, 8): (2*10 + 3)*8 + 5 = 189 */
    cr_assert_eq(xf_kv_offset(2, 3, 5, 10, 8), 189);
}

Test(cuda_index, kv_append_scatter) {
    /* Two sequences: seq 0 has 2 new tokens at positions 3,4 (table {6,2,10}, B 2); seq 1 has 1
     * new token at position 0 (table {0}, B 2). kv_dim 2, qkv width 10, K at column 4, layer 1,
     * 12 slots. Row 0 = seq0 pos 3 -> slot 3; row 1 = seq0 pos 4 -> slot 10; row 2 = seq1 pos 0
     * -> slot 0. Element idx 3 = row 1 col 1: src 1*10 + 4 + 1 = 15, dst (1*12 + 10)*2 + 1 = 45. */
    int64_t tok_off[3] = {0, 2, 3};
    int64_t seq_pos[2] = {3, 0};
    int32_t tables[4] = {6, 2, 10, 0};
    int64_t table_off[2] = {0, 3};
    int64_t tpe[2] = {2, 2};
    int64_t n_slots[2] = {12, 12};
    int64_t dst;
    int seq = -1;
    cr_assert_eq(xf_kv_append_index(3, 2, 10, 4, tok_off, 2, seq_pos, tables, table_off, tpe, 1, n_slots, &seq, &dst), 15);
    cr_assert_eq(dst, 45);
    cr_assert_eq(seq, 0);
    /* idx 0: row 0 col 0: src 4, slot 3: dst (12 + 3)*2 = 30 */
    cr_assert_eq(xf_kv_append_index(0, 2, 10, 4, tok_off, 2, seq_pos, tables, table_off, tpe, 1, n_slots, &seq, &dst), 4);
    cr_assert_eq(dst, 30);
    /* idx 4: row 2 col 0 (seq 1 pos 0 -> slot 0): src 20 + 4 = 24, dst 24 */
    cr_assert_eq(xf_kv_append_index(4, 2, 10, 4, tok_off, 2, seq_pos, tables, table_off, tpe, 1, n_slots, &seq, &dst), 24);
    cr_assert_eq(dst, 24);
    cr_assert_eq(seq, 1);
    /* system allocator: sequence 1 owns a buffer of 5 slots per layer, table {0}, tpe 5:
     * idx 4 -> slot 0 of layer 1 -> (1*5 + 0)*2 = 10 */
    int64_t own_slots[2] = {12, 5};
    int64_t tpe2[2] = {2, 5};
    cr_assert_eq(xf_kv_append_index(4, 2, 10, 4, tok_off, 2, seq_pos, tables, table_off, tpe2, 1, own_slots, &seq, &dst), 24);
    cr_assert_eq(dst, 10);
}

Test(cuda_index, kv_slot_matches_kv_manager) {
    /* The KV manager's paged tables, read with the kernel's rule, give kv_cache_slot's answers. */
    kv_cache_config kc = {.n_layers = 2, .n_kv_heads = 1, .head_dim = 4, .dtype = XF_FP16,
                          .budget_bytes = 64 * kv_bytes_per_slot(2, 1, 4, XF_FP16, 0),
                          .policy = {KV_POLICY_PAGED, 4}, .max_len = 32};
    kv_cache *kv = NULL;
    cr_assert_eq(kv_cache_init(&kv, &kc), XF_OK, "%s", xf_error_msg());
    int a, b;
    cr_assert_eq(kv_cache_add_seq(kv, 5, 20, 32, &a), XF_OK);
    cr_assert_eq(kv_cache_add_seq(kv, 3, 20, 32, &b), XF_OK);
    for (int k = 0; k < 6; k++) {
        cr_assert_eq(kv_cache_append(kv, a, 1), XF_OK);
        cr_assert_eq(kv_cache_append(kv, b, 1), XF_OK); /* interleaved: blocks alternate */
    }
    int ids[2] = {a, b};
    for (int s = 0; s < 2; s++) {
        const int32_t *table;
        int64_t n, tpe;
        cr_assert_eq(kv_cache_block_table(kv, ids[s], &table, &n, &tpe), XF_OK);
        cr_assert_eq(tpe, 4);
        for (int64_t p = 0; p < kv_cache_seq_len(kv, ids[s]); p++)
            cr_assert_eq(xf_kv_slot(table, tpe, p), kv_cache_slot(kv, ids[s], p), "seq %d pos %ld", s, (long)p);
    }
    kv_cache_free(kv);
}

/* Decode attention for one (token, head) task as the kernel does it, reading K/V through tables:
 * keys first .. pos (first = xf_window_first_key; 0 without a window). */
static void attn_task_paged(const xf_attn_task *t, const float *qkv, const float *kpool, const float *vpool,
                            const int32_t *table, int64_t tpe, int64_t layer, int64_t n_slots, int64_t kv_dim,
                            int64_t head_dim, float *out, int64_t first) {
    float scores[64];
    float mx = -INFINITY;
    for (int64_t j = first; j <= t->pos; j++) {
        float s = 0;
        for (int64_t d = 0; d < head_dim; d++)
            s += qkv[t->q_off + d] * kpool[xf_attn_kv_offset(t, j, d, head_dim, table, tpe, layer, n_slots, kv_dim)];
        scores[j] = s / sqrtf((float)head_dim);
        if (scores[j] > mx) mx = scores[j];
    }
    float sum = 0;
    for (int64_t j = first; j <= t->pos; j++) sum += (scores[j] = expf(scores[j] - mx));
    for (int64_t d = 0; d < head_dim; d++) {
        float acc = 0;
        for (int64_t j = first; j <= t->pos; j++)
            acc += scores[j] * vpool[xf_attn_kv_offset(t, j, d, head_dim, table, tpe, layer, n_slots, kv_dim)];
        out[t->out_off + d] = acc / sum;
    }
}

Test(cuda_index, paged_gqa_attention_matches_contiguous_loop) {
    /* 2 sequences decoding one token each at positions 6 and 2; 4 query heads over 2 KV heads,
     * head_dim 4; paged B 2 with scattered tables; layer 1 of 2, 16 slots. Reference: straight
     * loops over contiguous per-sequence K/V (pos, kv_dim). */
    enum { NH = 4, NKV = 2, HD = 4, KVD = NKV * HD, QD = NH * HD, W = QD + 2 * KVD, NS = 16, L = 2 };
    int64_t tok_off[3] = {0, 1, 2};
    int64_t seq_pos[2] = {6, 2};
    int32_t tables[6] = {8, 2, 12, 4, 14, 0}; /* seq 0: {8,2,12,4}, seq 1: {14, 0} */
    int64_t table_off[2] = {0, 4};
    float qkv[2 * W], kpool[L * NS * KVD], vpool[L * NS * KVD], kc[2][8][KVD], vc[2][8][KVD];
    unsigned r = 12345;
    for (int i = 0; i < 2 * W; i++) qkv[i] = (float)((r = r * 1103515245u + 12345u) >> 16 & 1023) / 512.0f - 1.0f;
    for (int i = 0; i < L * NS * KVD; i++) kpool[i] = vpool[i] = NAN; /* unwritten slots poison */
    for (int s = 0; s < 2; s++)
        for (int64_t p = 0; p <= seq_pos[s]; p++)
            for (int c = 0; c < KVD; c++) {
                float kvv = (float)((r = r * 1103515245u + 12345u) >> 16 & 1023) / 512.0f - 1.0f;
                kc[s][p][c] = kvv;
                vc[s][p][c] = kvv * 0.5f + 0.25f;
                int64_t slot = xf_kv_slot(tables + table_off[s], 2, p);
                kpool[xf_kv_offset(1, slot, c, NS, KVD)] = kc[s][p][c];
                vpool[xf_kv_offset(1, slot, c, NS, KVD)] = vc[s][p][c];
            }
    float out[2 * QD];
    for (int64_t bid = 0; bid < 2 * NH; bid++) {
        xf_attn_task t = xf_attn_index(bid, NH, NKV, HD, W, tok_off, 2, seq_pos);
        attn_task_paged(&t, qkv, kpool, vpool, tables + table_off[t.seq], 2, 1, NS, KVD, HD, out, 0);
    }
    /* Straight loops. */
    for (int s = 0; s < 2; s++)
        for (int h = 0; h < NH; h++) {
            int kvh = h / (NH / NKV);
            double sc[8], mx = -INFINITY, sum = 0;
            for (int j = 0; j <= seq_pos[s]; j++) {
                double d = 0;
                for (int e = 0; e < HD; e++) d += (double)qkv[s * W + h * HD + e] * kc[s][j][kvh * HD + e];
                sc[j] = d / 2.0; /* sqrt(4) */
                if (sc[j] > mx) mx = sc[j];
            }
            for (int j = 0; j <= seq_pos[s]; j++) sum += (sc[j] = exp(sc[j] - mx));
            for (int e = 0; e < HD; e++) {
                double acc = 0;
                for (int j = 0; j <= seq_pos[s]; j++) acc += sc[j] * vc[s][j][kvh * HD + e];
                cr_assert_float_eq(out[s * QD + h * HD + e], acc / sum, 1e-5, "seq %d head %d dim %d", s, h, e);
            }
        }
    /* GQA mapping by hand: heads 0,1 -> kv head 0; 2,3 -> 1 */
    cr_assert_eq(xf_gqa_kv_head(1, 4, 2), 0);
    cr_assert_eq(xf_gqa_kv_head(2, 4, 2), 1);
    cr_assert_eq(xf_gqa_kv_head(7, 8, 1), 0); /* MQA */
}

Test(cuda_index, prefill_causal_positions) {
    /* One sequence of 3 new tokens at positions 0..2 after nothing: task (row 2, head 1) of 2
     * heads sees positions 0..2, its q at 2*W + 1*HD. */
    int64_t tok_off[2] = {0, 3};
    int64_t seq_pos[1] = {0};
    xf_attn_task t = xf_attn_index(5, 2, 1, 8, 40, tok_off, 1, seq_pos);
    cr_assert_eq(t.row, 2);
    cr_assert_eq(t.head, 1);
    cr_assert_eq(t.kv_head, 0);
    cr_assert_eq(t.pos, 2);
    cr_assert_eq(t.q_off, 2 * 40 + 8);
    cr_assert_eq(t.out_off, 2 * 16 + 8);
    cr_assert_eq(xf_last_row(tok_off, 0), 2);
}

Test(cuda_index, swiglu_layout) {
    /* d_ff 5: element 7 = row 1 col 2 -> gate 1*10 + 2 = 12, up 17, out 7 */
    xf_swiglu_index s = xf_swiglu_at(7, 5);
    cr_assert_eq(s.gate, 12);
    cr_assert_eq(s.up, 17);
    cr_assert_eq(s.out, 7);
}

/* Argmax as a block of T threads computes it. */
static int64_t block_argmax(const float *x, int64_t n, int T) {
    float bv[64];
    int64_t bi[64];
    for (int t = 0; t < T; t++) {
        bv[t] = -INFINITY;
        bi[t] = INT64_MAX;
        for (int64_t k = 0; k < xf_strided_count(n, t, T); k++) {
            int64_t c = xf_strided_col(t, T, k);
            if (xf_argmax_better(x[c], c, bv[t], bi[t])) { bv[t] = x[c]; bi[t] = c; }
        }
    }
    for (int s = T / 2; s > 0; s /= 2)
        for (int t = 0; t < s; t++) {
            int u = xf_tree_partner(t, s);
            if (xf_argmax_better(bv[u], bi[u], bv[t], bi[t])) { bv[t] = bv[u]; bi[t] = bi[u]; }
        }
    return bi[0];
}

Test(cuda_index, argmax_first_maximum) {
    float x[50];
    for (int i = 0; i < 50; i++) x[i] = (float)(i % 7);
    /* maxima (6) at 6, 13, 20, ...: the first is 6 */
    cr_assert_eq(block_argmax(x, 50, 8), 6);
    cr_assert_eq(block_argmax(x, 50, 32), 6);
    x[49] = 9;
    cr_assert_eq(block_argmax(x, 50, 16), 49);
    float one[1] = {-3};
    cr_assert_eq(block_argmax(one, 1, 32), 0);
}

/* ---- The kernels' loops emulated on the CPU, fed by the packed step metadata (cuda_meta.h) and
 * the KV manager's real block tables, against the CPU backend's attention kernel (xk_attention). */
#include "reference_model/cpu_attention.h" /* xk_attention */
#include "reference_model/cpu_kernels.h"
#include "reference_model/config.h"
#include "reference_model/cuda_meta.h"

enum { E_L = 2, E_NH = 4, E_NKV = 2, E_HD = 8, E_KVD = E_NKV * E_HD, E_QD = E_NH * E_HD, E_W = E_QD + 2 * E_KVD };

/* k_kv_append: every element of the step's new K and V, through the packed metadata. */
static void emu_kv_append(const cuda_meta_view *v, int n_seqs, int64_t n, const float *qkv, int64_t layer) {
    for (int64_t idx = 0; idx < 2 * n * E_KVD; idx++) {
        int is_v = idx >= n * E_KVD;
        int64_t e = is_v ? idx - n * E_KVD : idx, dst;
        int s;
        int64_t src = xf_kv_append_index(e, E_KVD, E_W, E_QD + (is_v ? E_KVD : 0), v->tok_off, n_seqs, v->seq_pos, v->tables,
                                         v->table_off, v->tpe, layer, v->n_slots, &s, &dst);
        ((float *)(is_v ? v->vbase[s] : v->kbase[s]))[dst] = qkv[src];
    }
}

/* k_attention for every (row, head) block; a windowed layer reads keys pos - window + 1 .. pos. */
static void emu_attention(const cuda_meta_view *v, int n_seqs, int64_t n, const float *qkv, int64_t layer, float *out,
                          int64_t window) {
    for (int64_t bid = 0; bid < n * E_NH; bid++) {
        xf_attn_task t = xf_attn_index(bid, E_NH, E_NKV, E_HD, E_W, v->tok_off, n_seqs, v->seq_pos);
        attn_task_paged(&t, qkv, v->kbase[t.seq], v->vbase[t.seq], v->tables + v->table_off[t.seq], v->tpe[t.seq], layer,
                        v->n_slots[t.seq], E_KVD, E_HD, out, xf_window_first_key(t.pos, window));
    }
}

static void emulate_request(int system_mode, int64_t window) {
    const int64_t max_len = 16;
    kv_cache_config kc = {.n_layers = E_L, .n_kv_heads = E_NKV, .head_dim = E_HD, .dtype = XF_FP32,
                          .budget_bytes = 40 * kv_bytes_per_slot(E_L, E_NKV, E_HD, XF_FP32, 0),
                          .policy = {KV_POLICY_PAGED, 4}, .max_len = max_len};
    kv_cache *kv = NULL;
    cr_assert_eq(kv_cache_init(&kv, &kc), XF_OK, "%s", xf_error_msg());
    const int64_t n_slots = kv_cache_n_slots(kv);
    float *kpool = calloc((size_t)(E_L * n_slots * E_KVD), sizeof(float));
    float *vpool = calloc((size_t)(E_L * n_slots * E_KVD), sizeof(float));
    float *own_k[2], *own_v[2]; /* system mode: (E_L, max_len, kv_dim) per sequence */
    int64_t caps[2] = {max_len, max_len};
    for (int s = 0; s < 2; s++) {
        own_k[s] = calloc((size_t)(E_L * max_len * E_KVD), sizeof(float));
        own_v[s] = calloc((size_t)(E_L * max_len * E_KVD), sizeof(float));
    }
    int ids[2];
    int64_t lens[2] = {5, 3};
    cr_assert_eq(kv_cache_add_seq(kv, lens[0], max_len, max_len, &ids[0]), XF_OK);
    cr_assert_eq(kv_cache_add_seq(kv, lens[1], max_len, max_len, &ids[1]), XF_OK);
    cuda_meta_layout L = cuda_meta_layout_of(2, 8, 2 * (max_len + 1));
    void *block = calloc(1, L.total);
    cuda_meta_view v = cuda_meta_view_of(block, &L);
    /* K/V history per sequence, contiguous, for the reference: (pos, kv_dim) of layer 1 */
    static float hk[2][16][E_KVD], hv[2][16][E_KVD];
    unsigned r = 99;
    for (int stepi = 0; stepi < 5; stepi++) {
        step_seq seqs[2];
        int64_t tok_off[3] = {0, 0, 0};
        int32_t tokens[8] = {0};
        for (int s = 0; s < 2; s++) {
            int64_t nn = stepi == 0 ? lens[s] : 1, pos = stepi == 0 ? 0 : lens[s] + stepi - 1;
            if (stepi > 0) cr_assert_eq(kv_cache_append(kv, ids[s], 1), XF_OK);
            seqs[s] = (step_seq){system_mode ? s : ids[s], pos, nn};
            tok_off[s + 1] = tok_off[s] + nn;
        }
        step_batch b = {stepi ? XF_DECODE : XF_PREFILL, stepi, 2, seqs, tok_off[2], tok_off, tokens};
        cr_assert_eq(cuda_meta_pack(&v, &b, kv, n_slots, system_mode ? caps : NULL, 2, 8, max_len, 2 * (max_len + 1), 10),
                     XF_OK, "%s", xf_error_msg());
        for (int s = 0; s < 2; s++) {
            v.kbase[s] = system_mode ? (void *)own_k[s] : (void *)kpool;
            v.vbase[s] = system_mode ? (void *)own_v[s] : (void *)vpool;
        }
        float qkv[8 * E_W], out[8 * E_QD];
        for (int i = 0; i < 8 * E_W; i++) qkv[i] = (float)((r = r * 1103515245u + 12345u) >> 16 & 1023) / 512.0f - 1.0f;
        emu_kv_append(&v, 2, b.n_tokens, qkv, 1);
        emu_attention(&v, 2, b.n_tokens, qkv, 1, out, window);
        /* reference: the CPU backend's attention over the contiguous history, slots 0..pos (a
         * window: slots lo .. pos, lo = pos + 1 - window, as cpu_backend.c hands them over) */
        for (int s = 0; s < 2; s++)
            for (int64_t i = 0; i < seqs[s].n_new; i++) {
                int64_t row = tok_off[s] + i, pos = seqs[s].pos + i;
                memcpy(hk[s][pos], qkv + row * E_W + E_QD, sizeof hk[s][pos]);
                memcpy(hv[s][pos], qkv + row * E_W + E_QD + E_KVD, sizeof hv[s][pos]);
            }
        for (int s = 0; s < 2; s++)
            for (int64_t i = 0; i < seqs[s].n_new; i++) {
                int64_t row = tok_off[s] + i, pos = seqs[s].pos + i, slots[16];
                const int64_t lo = window && pos + 1 > window ? pos + 1 - window : 0;
                for (int64_t j = 0; j <= pos; j++) slots[j] = j;
                for (int g = 0; g < E_NKV; g++) {
                    float ref[2 * E_HD], scratch[2 * 66 + 2 * E_HD];
                    xk_attention(ref, qkv + row * E_W + g * 2 * E_HD, 2, E_HD, hk[s], hv[s], XF_FP32, E_KVD, g * E_HD, slots + lo,
                                 pos + 1 - lo, 1.0f / sqrtf((float)E_HD), scratch);
                    for (int e = 0; e < 2 * E_HD; e++)
                        cr_assert_float_eq(out[row * E_QD + g * 2 * E_HD + e], ref[e], 1e-5, "%s step %d seq %d pos %ld elem %d",
                                           system_mode ? "system" : "pool", stepi, s, (long)pos, e);
                }
            }
    }
    /* the pool rows the kernels wrote are the ones the manager assigned */
    if (!system_mode)
        for (int s = 0; s < 2; s++)
            for (int64_t p = 0; p < kv_cache_seq_len(kv, ids[s]); p++)
                cr_assert_eq(kpool[xf_kv_offset(1, kv_cache_slot(kv, ids[s], p), 3, n_slots, E_KVD)], hk[s][p][3]);
    free(block);
    free(kpool);
    free(vpool);
    for (int s = 0; s < 2; s++) {
        free(own_k[s]);
        free(own_v[s]);
    }
    kv_cache_free(kv);
}

Test(cuda_index, emulated_kernels_match_cpu_attention_pool) {
    emulate_request(0, 0);
}

Test(cuda_index, emulated_kernels_match_cpu_attention_system) {
    emulate_request(1, 0);
}

/* Sliding windows of 3 and 4 over positions up to 8 (prefill of 5 and 3, four decode steps):
 * the windowed kernel through the paged tables against the CPU's windowed attention. */
Test(cuda_index, emulated_window_kernels_match_cpu_attention) {
    emulate_request(0, 3);
    emulate_request(0, 4);
    emulate_request(1, 4);
}

Test(cuda_index, meta_pack_rejects_bad_steps) {
    kv_cache_config kc = {.n_layers = 1, .n_kv_heads = 1, .head_dim = 4, .dtype = XF_FP16,
                          .budget_bytes = 16 * kv_bytes_per_slot(1, 1, 4, XF_FP16, 0), .policy = {KV_POLICY_PAGED, 4},
                          .max_len = 8};
    kv_cache *kv = NULL;
    cr_assert_eq(kv_cache_init(&kv, &kc), XF_OK);
    int id;
    cr_assert_eq(kv_cache_add_seq(kv, 3, 8, 8, &id), XF_OK);
    cuda_meta_layout L = cuda_meta_layout_of(1, 4, 16);
    /* arrays are 8-byte aligned and in order */
    cr_assert_eq(L.seq_pos, 16u);
    cr_assert_eq(L.tokens % 8, 0u);
    cr_assert(L.tables >= L.tokens + 16);
    cr_assert_eq(L.total % 256, 0u);
    void *block = calloc(1, L.total);
    cuda_meta_view v = cuda_meta_view_of(block, &L);
    step_seq q = {id, 0, 3};
    int64_t off[2] = {0, 3};
    int32_t tok[3] = {1, 2, 3};
    step_batch b = {XF_PREFILL, 0, 1, &q, 3, off, tok};
    cr_assert_eq(cuda_meta_pack(&v, &b, kv, kv_cache_n_slots(kv), NULL, 1, 4, 8, 16, 10), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(v.tpe[0], 4);
    cr_assert_eq(v.tok_off[1], 3);
    q.n_new = 5; /* the manager holds 4 positions (one block), the step would need 5 */
    off[1] = 5;
    b.n_tokens = 5;
    cr_assert_eq(cuda_meta_pack(&v, &b, kv, kv_cache_n_slots(kv), NULL, 1, 8, 8, 16, 10), XF_EINVAL);
    q.n_new = 3;
    off[1] = 3;
    b.n_tokens = 3;
    tok[2] = 10; /* outside a vocabulary of 10 */
    cr_assert_eq(cuda_meta_pack(&v, &b, kv, kv_cache_n_slots(kv), NULL, 1, 4, 8, 16, 10), XF_EINVAL);
    cr_assert_neq(strstr(xf_error_msg(), "vocabulary"), NULL, "%s", xf_error_msg());
    tok[2] = 3;
    int64_t cap = 2; /* system mode: the buffer holds 2 of the 3 positions */
    cr_assert_eq(cuda_meta_pack(&v, &b, kv, 0, &cap, 1, 4, 8, 16, 10), XF_EINVAL);
    free(block);
    kv_cache_free(kv);
}

/* What the CUDA backend still refuses, by name, before it looks for a device; what it now runs
 * (experts, latent attention, windows, q/k norm, scaled RoPE) passes. */
Test(cuda_index, unsupported_names_what_the_gpu_does_not_run) {
    model_config c;
    cr_assert_eq(config_resolve(XF_SOURCE_DIR "/tests/data/hf/deepseek-moe", &c), XF_OK, "%s", xf_error_msg());
    cr_assert_null(cuda_meta_unsupported(&c, XF_BF16, KV_ALLOC_POOL), "%s", cuda_meta_unsupported(&c, XF_BF16, KV_ALLOC_POOL));
    cr_assert_null(cuda_meta_unsupported(&c, XF_FP32, KV_ALLOC_POOL));
    cr_assert(strstr(cuda_meta_unsupported(&c, XF_INT8, KV_ALLOC_POOL), "int8 experts"));
    cr_assert(strstr(cuda_meta_unsupported(&c, XF_BF16, KV_ALLOC_SYSTEM), "--kv-alloc system"));
    c.mla_absorbed = 1;
    cr_assert(strstr(cuda_meta_unsupported(&c, XF_BF16, KV_ALLOC_POOL), "absorbed"));
    const char *runs[] = {"mixtral", "qwen3-moe", "qwen2-moe", "deepseek-mla", "deepseek-mla-yarn", "mistral-window", "qwen3-window",
                          "qwen3", "qwen3-bias", "llama-rope-llama3", "llama-rope-yarn", "llama-rope-linear"};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char dir[512];
        snprintf(dir, sizeof dir, XF_SOURCE_DIR "/tests/data/hf/%s", runs[i]);
        cr_assert_eq(config_resolve(dir, &c), XF_OK, "%s: %s", runs[i], xf_error_msg());
        const char *u = cuda_meta_unsupported(&c, XF_BF16, KV_ALLOC_POOL);
        cr_assert_null(u, "%s: %s", runs[i], u);
    }
    /* o_proj and MLP biases run on the GPU too (k_bias after the GEMM) */
    cr_assert_eq(config_resolve(XF_SOURCE_DIR "/tests/data/hf/llama-attn-bias", &c), XF_OK);
    cr_assert_null(cuda_meta_unsupported(&c, XF_BF16, KV_ALLOC_POOL));
    cr_assert_eq(config_resolve(XF_SOURCE_DIR "/tests/data/hf/llama-mlp-bias", &c), XF_OK);
    cr_assert_null(cuda_meta_unsupported(&c, XF_BF16, KV_ALLOC_POOL));
    /* the int8 refusal is for experts only: a dense int8 model is uploaded as 16-bit as before */
    cr_assert_eq(config_resolve(XF_SOURCE_DIR "/tests/data/hf/qwen3", &c), XF_OK);
    cr_assert_null(cuda_meta_unsupported(&c, XF_INT8, KV_ALLOC_SYSTEM));
}
