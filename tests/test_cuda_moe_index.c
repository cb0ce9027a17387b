/* The index math of the CUDA backend's mixture-of-experts, latent-attention, q/k-norm and
 * sliding-window kernels (reference_model/cuda_moe_index.h, cuda_index.h), run on the CPU the
 * way the kernels run it (one thread per token for the routing, one per expert for the
 * permutation, one per element for gathers) and checked against the CPU reference on the same
 * inputs: the routing against an independent sorted statement of the rules and against cpu_moe.c
 * (which calls the same functions; ties included, exactly), cpu_moe's whole MoE FFN, mla_rope and
 * mla_attend_head (cpu_mla.c), xk_rope_table_freqs, and the KV manager's block tables. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference_model/config.h"
#include "reference_model/cpu_kernels.h"
#include "reference_model/cpu_mla.h"
#include "reference_model/cpu_moe.h"
#include "reference_model/cuda_index.h"
#include "reference_model/cuda_moe_index.h"
#include "reference_model/kv_cache.h"
#include "reference_model/safetensors.h"
#include "reference_model/weights.h"

#define HF_DIR XF_SOURCE_DIR "/tests/data/hf/"

static uint64_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

/* Logits on a grid of 0.25 in [-2, 2): many exact ties. */
static void tied_logits(float *v, int64_t n, uint64_t *s) {
    for (int64_t i = 0; i < n; i++) v[i] = (float)((int)(rng_next(s) % 16) - 8) * 0.25f;
}

/* An independent statement of the routing rules (sorting where the kernels select): experts
 * ordered by value, the lower index first on a tie; groups dropped worst first, the higher index
 * first on a tie; the weights by the same float formulas. cpu_moe.c calls the index functions
 * themselves (one routing for both devices), so this is what they are checked against; its own
 * tests check it against transformers' router (test_cpu_moe). */
static const float *g_key;
static int by_value_then_index(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (g_key[x] != g_key[y]) return g_key[x] > g_key[y] ? -1 : 1;
    return x < y ? -1 : 1;
}

static void ref_topk(const float *v, int64_t E, int64_t k, int32_t *idx) {
    int32_t order[1024];
    for (int32_t e = 0; e < E; e++) order[e] = e;
    g_key = v;
    qsort(order, (size_t)E, sizeof order[0], by_value_then_index);
    for (int64_t j = 0; j < k; j++) idx[j] = order[j];
}

/* sorts (idx, w) by expert index */
static void ref_sort(int32_t *idx, float *w, int64_t k) {
    for (int64_t a = 0; a < k; a++)
        for (int64_t b = a + 1; b < k; b++)
            if (idx[b] < idx[a]) {
                int32_t ti = idx[a];
                idx[a] = idx[b];
                idx[b] = ti;
                float tw = w[a];
                w[a] = w[b];
                w[b] = tw;
            }
}

static void ref_softmax(const float *lg, int64_t E, int64_t k, int norm, int32_t *idx, float *w) {
    float mx = lg[0], sum = 0, wsum = 0;
    for (int64_t e = 1; e < E; e++) mx = lg[e] > mx ? lg[e] : mx;
    for (int64_t e = 0; e < E; e++) sum += expf(lg[e] - mx);
    ref_topk(lg, E, k, idx);
    for (int64_t j = 0; j < k; j++) wsum += w[j] = expf(lg[idx[j]] - mx) / sum;
    if (norm)
        for (int64_t j = 0; j < k; j++) w[j] /= wsum;
    ref_sort(idx, w, k);
}

static void ref_grouped(const float *lg, const float *bias, int64_t E, int64_t k, int64_t G, int64_t TG, int norm, double scale,
                        int32_t *idx, float *w) {
    float score[1024], choice[1024], gs[64];
    const int64_t per = E / G;
    for (int64_t e = 0; e < E; e++) {
        score[e] = 1.0f / (1.0f + expf(-lg[e]));
        choice[e] = score[e] + (bias ? bias[e] : 0.0f);
    }
    for (int64_t g = 0; g < G; g++) {
        int32_t top[2];
        ref_topk(choice + g * per, per, 2, top);
        gs[g] = choice[g * per + top[0]] + choice[g * per + top[1]];
    }
    /* drop the G - TG worst groups: ascending score, the higher index first on a tie */
    int32_t gorder[64];
    for (int32_t g = 0; g < G; g++) gorder[g] = g;
    for (int64_t a = 0; a < G; a++)
        for (int64_t b = a + 1; b < G; b++) {
            const int32_t x = gorder[a], y = gorder[b];
            if (gs[y] < gs[x] || (gs[y] == gs[x] && y > x)) gorder[a] = y, gorder[b] = x;
        }
    for (int64_t j = 0; j < G - TG; j++)
        for (int64_t e = gorder[j] * per; e < (gorder[j] + 1) * per; e++) choice[e] = -INFINITY;
    ref_topk(choice, E, k, idx);
    float wsum = 0;
    for (int64_t j = 0; j < k; j++) wsum += w[j] = score[idx[j]];
    for (int64_t j = 0; j < k; j++) w[j] = (float)((norm ? w[j] / (wsum + 1e-20f) : w[j]) * scale);
    ref_sort(idx, w, k);
}

static void assert_same_choice(const int32_t *ia, const float *wa, const int32_t *ib, const float *wb, int64_t k, const char *what,
                               int row) {
    for (int64_t j = 0; j < k; j++) {
        cr_assert_eq(ia[j], ib[j], "%s row %d choice %lld: gpu index math %d, cpu_moe %d", what, row, (long long)j, ia[j], ib[j]);
        cr_assert(memcmp(&wa[j], &wb[j], sizeof(float)) == 0, "%s row %d choice %lld: weight %.9g vs %.9g", what, row, (long long)j,
                  (double)wa[j], (double)wb[j]);
    }
}

Test(cuda_moe_index, softmax_routing_is_cpu_moe_ties_included) {
    uint64_t s = 1;
    const int64_t Es[] = {8, 60, 128}, ks[] = {1, 2, 8};
    float lg[128], wa[8], wb[8];
    int32_t ia[8], ib[8];
    int ties = 0;
    for (int ei = 0; ei < 3; ei++)
        for (int ki = 0; ki < 3; ki++)
            for (int norm = 0; norm < 2; norm++)
                for (int r = 0; r < 200; r++) {
                    const int64_t E = Es[ei], k = ks[ki];
                    tied_logits(lg, E, &s);
                    xf_moe_route_softmax(lg, E, k, norm, ia, wa);
                    ref_softmax(lg, E, k, norm, ib, wb);
                    assert_same_choice(ia, wa, ib, wb, k, "softmax vs the sorted reference", r);
                    cpu_moe_route(MOE_SCORE_SOFTMAX, lg, E, k, norm, ib, wb);
                    assert_same_choice(ia, wa, ib, wb, k, "softmax vs cpu_moe", r);
                    /* a tie at the k-th place: the lower expert index was taken */
                    for (int64_t e = 0; e < E; e++) ties += lg[e] == lg[ia[0]] && e != ia[0];
                }
    cr_assert_gt(ties, 100, "the grid makes ties (%d)", ties);
    /* all equal: experts 0 .. k-1 */
    for (int64_t e = 0; e < 8; e++) lg[e] = 0.5f;
    xf_moe_route_softmax(lg, 8, 3, 1, ia, wa);
    cr_assert(ia[0] == 0 && ia[1] == 1 && ia[2] == 2);
}

Test(cuda_moe_index, grouped_sigmoid_routing_is_cpu_moe_ties_included) {
    uint64_t s = 7;
    float lg[64], bias[64], scr[2 * 64 + 16], scr2[2 * 64 + 16], wa[8], wb[8];
    int32_t ia[8], ib[8];
    const int64_t groups[][2] = {{1, 1}, {4, 2}, {8, 3}, {8, 8}, {16, 4}};
    for (int gi = 0; gi < 5; gi++)
        for (int norm = 0; norm < 2; norm++)
            for (int r = 0; r < 300; r++) {
                const int64_t E = 64, k = r % 2 ? 8 : 2, G = groups[gi][0], TG = groups[gi][1];
                tied_logits(lg, E, &s);
                tied_logits(bias, E, &s);
                const float *b = r % 3 ? bias : NULL;
                xf_moe_route_grouped(lg, b, E, k, G, TG, norm, 2.5, scr, ia, wa);
                ref_grouped(lg, b, E, k, G, TG, norm, 2.5, ib, wb);
                assert_same_choice(ia, wa, ib, wb, k, "grouped vs the sorted reference", r);
                cpu_moe_route_grouped(lg, b, E, k, G, TG, norm, 2.5, scr2, ib, wb);
                assert_same_choice(ia, wa, ib, wb, k, "grouped vs cpu_moe", r);
                /* every choice lies in one of the topk_group kept groups */
                int kept[16] = {0};
                for (int64_t j = 0; j < k; j++) kept[ia[j] / (E / G)] = 1;
                int n_kept = 0;
                for (int g = 0; g < G; g++) n_kept += kept[g];
                cr_assert_leq(n_kept, TG);
            }
}

Test(cuda_moe_index, group_mask_drops_the_higher_group_on_a_tie) {
    /* 4 groups of 2: sums 3, 3, 1, 3 (groups 0, 1, 3 tied); keep 2: drop group 2, then of the
     * tied ones the highest index, group 3. */
    float ch[8] = {1, 2, 2, 1, 0.5f, 0.5f, 2, 1}, gs[4];
    xf_moe_group_mask(ch, 8, 4, 2, gs);
    for (int e = 0; e < 4; e++) cr_assert(ch[e] != -INFINITY, "expert %d kept", e);
    for (int e = 4; e < 8; e++) cr_assert(ch[e] == -INFINITY, "expert %d masked", e);
}

/* Routes the fixture's MoE layers on realistic inputs (its prompt tokens' embedding rows through
 * the layer's FFN norm; logits by a plain fp32 loop shared by both sides) with the index math and
 * with cpu_moe.c: the same experts, the same weights, bit for bit. */
static void check_fixture_routing(const char *name) {
    char dir[512];
    snprintf(dir, sizeof dir, HF_DIR "%s", name);
    model_config c;
    cr_assert_eq(config_resolve(dir, &c), XF_OK, "%s: %s", dir, xf_error_msg());
    model_weights *w = NULL;
    cr_assert_eq(st_load_weights(dir, &c, XF_FP32, 0, &w), XF_OK, "%s: %s", name, xf_error_msg());
    const int64_t E = c.n_experts, k = c.experts_per_tok, d = c.d_model;
    float *x = malloc(sizeof(float) * (size_t)d), *xn = malloc(sizeof(float) * (size_t)d), *lg = malloc(sizeof(float) * (size_t)E);
    float *scr = malloc(sizeof(float) * (size_t)(2 * E + c.n_group + 1)), *scr2 = malloc(sizeof(float) * (size_t)(2 * E + c.n_group + 1));
    int32_t ia[XF_MOE_MAX_TOPK], ib[XF_MOE_MAX_TOPK];
    float wa[XF_MOE_MAX_TOPK], wb[XF_MOE_MAX_TOPK];
    int layers = 0;
    for (int64_t l = 0; l < c.n_layers; l++) {
        if (!model_layer_is_moe(&c, l)) continue;
        layers++;
        const layer_weights *L = &w->layers[l];
        for (int64_t tok = 0; tok < c.vocab; tok += 3) {
            for (int64_t i = 0; i < d; i++) x[i] = weights_get(&w->embed, tok, i) * 8.0f;
            xk_rmsnorm(xn, x, L->ffn_norm, d, (float)c.norm_eps);
            for (int64_t e = 0; e < E; e++) {
                float sum = 0;
                for (int64_t i = 0; i < d; i++) sum += weights_get(&L->router, e, i) * xn[i];
                lg[e] = sum;
            }
            if (c.moe_score == MOE_SCORE_SIGMOID_GROUPED) {
                xf_moe_route_grouped(lg, L->router_bias, E, k, c.n_group, c.topk_group, c.norm_topk_prob, c.routed_scaling_factor,
                                     scr, ia, wa);
                ref_grouped(lg, L->router_bias, E, k, c.n_group, c.topk_group, c.norm_topk_prob, c.routed_scaling_factor, ib, wb);
                assert_same_choice(ia, wa, ib, wb, k, name, (int)tok);
                cpu_moe_route_grouped(lg, L->router_bias, E, k, c.n_group, c.topk_group, c.norm_topk_prob, c.routed_scaling_factor,
                                      scr2, ib, wb);
            } else {
                xf_moe_route_softmax(lg, E, k, c.norm_topk_prob, ia, wa);
                ref_softmax(lg, E, k, c.norm_topk_prob, ib, wb);
                assert_same_choice(ia, wa, ib, wb, k, name, (int)tok);
                cpu_moe_route(c.moe_score, lg, E, k, c.norm_topk_prob, ib, wb);
            }
            assert_same_choice(ia, wa, ib, wb, k, name, (int)tok);
        }
    }
    cr_assert_gt(layers, 0, "%s has MoE layers", name);
    free(x);
    free(xn);
    free(lg);
    free(scr);
    free(scr2);
    weights_free(w);
}

Test(cuda_moe_index, fixture_routing_mixtral) { check_fixture_routing("mixtral"); }
Test(cuda_moe_index, fixture_routing_qwen3_moe) { check_fixture_routing("qwen3-moe"); }
Test(cuda_moe_index, fixture_routing_qwen2_moe) { check_fixture_routing("qwen2-moe"); }
Test(cuda_moe_index, fixture_routing_deepseek_moe) { check_fixture_routing("deepseek-moe"); }

/* fp32 straight loops: the linear function cpu_moe calls, and the GPU emulation's GEMM. */
static void lin_rows(const wmat *W, const float *x, int64_t n, float *y) {
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < W->rows; r++) {
            double s = 0;
            for (int64_t c = 0; c < W->cols; c++) s += (double)weights_get(W, r, c) * x[t * W->cols + c];
            y[t * W->rows + r] = (float)s;
        }
}

static void plain_lin(void *be, int count, const wmat *const *Ws, float *const *xs, const int64_t *ns, float *const *ys) {
    (void)be;
    for (int i = 0; i < count; i++) lin_rows(Ws[i], xs[i], ns[i], ys[i]);
}

static float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

/* The whole MoE FFN as the GPU runs it (route per token; count, prefix and scatter per expert;
 * gather; each chosen expert's GEMMs on its rows; combine), against cpu_moe's three ops. */
Test(cuda_moe_index, emulated_moe_ffn_matches_cpu_moe) {
    model_config c;
    memset(&c, 0, sizeof c);
    strcpy(c.name, "test-moe");
    strcpy(c.arch, "qwen2_moe");
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 8;
    c.d_model = 24;
    c.d_ff = 16;
    c.vocab = 64;
    c.max_ctx = 64;
    c.rope_theta = 10000.0;
    c.norm_eps = 1e-5;
    c.n_experts = 8;
    c.experts_per_tok = 3;
    c.d_ff_expert = 12;
    c.norm_topk_prob = 1;
    c.d_ff_shared = 10;
    c.shared_expert_gate = 1;
    c.dense_layers[0] = 1;
    model_weights *w = NULL;
    cr_assert_eq(weights_init_random(&w, &c, 5, XF_FP32, 0), XF_OK, "%s", xf_error_msg());
    const layer_weights *L = &w->layers[1];
    for (int64_t i = 0; i < L->router.rows * L->router.cols; i++) ((float *)L->router.data)[i] *= 40.0f;
    enum { N = 9 };
    enum { NK = N * 3 };
    const int64_t E = 8, k = 3, d = 24, fe = 12, fs = 10;
    float x[N * 24], xc[N * 24], out_cpu[N * 24], out_gpu[N * 24];
    for (int i = 0; i < N * 24; i++) x[i] = xc[i] = (float)sin(0.41 * i + 0.3) * 2.0f;
    cpu_moe *m = NULL;
    cr_assert_eq(cpu_moe_init(&m, &c, N, 1), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(cpu_moe_gate_up(m, L, 1, xc, N, plain_lin, NULL), XF_OK, "%s", xf_error_msg());
    cpu_moe_swiglu(m, N);
    cpu_moe_down(m, L, N, out_cpu, plain_lin, NULL);
    const int64_t *cpu_counts = cpu_moe_counts(m, 1);

    /* the GPU pipeline */
    float logits[N * 8], selw[NK], xg[NK * 24], gu[NK * 24], h[NK * 12], y[NK * 24];
    int32_t sel[NK];
    int64_t counts[8], off[9], row_of[NK];
    lin_rows(&L->router, x, N, logits);
    for (int t = 0; t < N; t++) xf_moe_route_softmax(logits + t * E, E, k, 1, sel + t * k, selw + t * k);
    for (int32_t e = 0; e < E; e++) counts[e] = xf_moe_count(sel, NK, e);
    xf_moe_prefix(counts, E, off);
    for (int32_t e = 0; e < E; e++) xf_moe_scatter(sel, NK, e, off[e], row_of);
    for (int e = 0; e < E; e++) cr_assert_eq(counts[e], cpu_counts[e], "expert %d: %lld rows, cpu_moe %lld", e, (long long)counts[e],
                                             (long long)cpu_counts[e]);
    int seen[NK] = {0};
    for (int a = 0; a < NK; a++) seen[row_of[a]]++;
    for (int a = 0; a < NK; a++) cr_assert_eq(seen[a], 1, "row_of is a permutation (row %d)", a);
    for (int64_t idx = 0; idx < NK * d; idx++) {
        int64_t dst, src = xf_moe_gather(idx, d, k, row_of, &dst);
        xg[dst] = x[src];
    }
    for (int e = 0; e < E; e++)
        if (counts[e]) {
            lin_rows(&L->exp_gate_up[e], xg + off[e] * d, counts[e], gu + off[e] * 2 * fe);
        }
    for (int64_t r = 0; r < NK; r++)
        for (int64_t j = 0; j < fe; j++) h[r * fe + j] = silu_mul(gu[r * 2 * fe + j], gu[r * 2 * fe + fe + j]);
    for (int e = 0; e < E; e++)
        if (counts[e]) lin_rows(&L->exp_down[e], h + off[e] * fe, counts[e], y + off[e] * d);
    /* the shared expert and its gate */
    float sgu[N * 20], sh[N * 10], so[N * 24];
    lin_rows(&L->sh_gate_up, x, N, sgu);
    for (int t = 0; t < N; t++)
        for (int j = 0; j < fs; j++) sh[t * fs + j] = silu_mul(sgu[t * 2 * fs + j], sgu[t * 2 * fs + fs + j]);
    lin_rows(&L->sh_down, sh, N, so);
    for (int t = 0; t < N; t++) {
        double g = 0;
        for (int i = 0; i < d; i++) g += (double)x[t * d + i] * (double)L->sh_gate[i];
        const float gate = 1.0f / (1.0f + expf(-(float)g));
        for (int i = 0; i < d; i++) {
            float s = 0;
            for (int j = 0; j < k; j++) s += selw[t * k + j] * y[xf_moe_combine_src(t, j, i, k, d, row_of)];
            out_gpu[t * d + i] = s + so[t * d + i] * gate;
        }
    }
    for (int i = 0; i < N * 24; i++)
        cr_assert_float_eq(out_gpu[i], out_cpu[i], 1e-5f * (1.0f + fabsf(out_cpu[i])), "element %d: %g vs cpu_moe %g", i,
                           (double)out_gpu[i], (double)out_cpu[i]);
    cpu_moe_free(m);
    weights_free(w);
}

/* ---- sliding windows: the keys the kernel reads through the block table are exactly the CPU's
 * window (slots lo .. pos of the sequence), never more than `window` of them. */
Test(cuda_moe_index, window_reads_at_most_the_window_through_block_table) {
    kv_cache_config kc = {.n_layers = 1, .n_kv_heads = 1, .head_dim = 4, .dtype = XF_FP16,
                          .budget_bytes = 128 * kv_bytes_per_slot(1, 1, 4, XF_FP16, 0),
                          .policy = {KV_POLICY_PAGED, 4}, .max_len = 64};
    kv_cache *kv = NULL;
    cr_assert_eq(kv_cache_init(&kv, &kc), XF_OK, "%s", xf_error_msg());
    int a, b;
    cr_assert_eq(kv_cache_add_seq(kv, 3, 40, 64, &a), XF_OK);
    cr_assert_eq(kv_cache_add_seq(kv, 5, 40, 64, &b), XF_OK);
    for (int i = 0; i < 30; i++) {
        cr_assert_eq(kv_cache_append(kv, a, 1), XF_OK);
        cr_assert_eq(kv_cache_append(kv, b, 1), XF_OK);
    }
    const int32_t *table;
    int64_t ne, tpe;
    cr_assert_eq(kv_cache_block_table(kv, a, &table, &ne, &tpe), XF_OK);
    const int64_t wins[] = {0, 1, 8, 13, 100};
    for (int wi = 0; wi < 5; wi++)
        for (int64_t pos = 0; pos < kv_cache_seq_len(kv, a); pos++) {
            const int64_t win = wins[wi], lo = xf_window_first_key(pos, win);
            /* the CPU's rule: lo = win && pos + 1 > win ? pos + 1 - win : 0 (cpu_backend.c) */
            cr_assert_eq(lo, win && pos + 1 > win ? pos + 1 - win : 0);
            if (win) cr_assert_leq(pos + 1 - lo, win);
            else cr_assert_eq(lo, 0);
            for (int64_t j = lo; j <= pos; j++) cr_assert_eq(xf_kv_slot(table, tpe, j), kv_cache_slot(kv, a, j));
        }
    kv_cache_free(kv);
}

/* ---- q/k norm: the blocks cover every Q and K head element once, nothing of V. */
Test(cuda_moe_index, head_norm_blocks_cover_q_and_k_heads) {
    const int64_t n = 3, H = 4, KH = 2, hd = 8, q_dim = H * hd, width = q_dim + 2 * KH * hd;
    int seen[3 * 64] = {0};
    for (int64_t bid = 0; bid < n * (H + KH); bid++) {
        int is_k;
        int64_t o = xf_head_norm_offset(bid, n, H, KH, hd, width, q_dim, &is_k);
        cr_assert_eq(is_k, bid >= n * H);
        for (int64_t i = 0; i < hd; i++) seen[o + i]++;
    }
    for (int64_t t = 0; t < n; t++)
        for (int64_t c = 0; c < width; c++) cr_assert_eq(seen[t * width + c], c < q_dim + KH * hd ? 1 : 0, "row %ld col %ld", (long)t, (long)c);
}

/* ---- RoPE from the table: the same bits as xk_rope_table_freqs, yarn's factor included. */
static void check_rope_table(const char *fixture, int want_scaled) {
    char dir[512];
    snprintf(dir, sizeof dir, HF_DIR "%s", fixture);
    model_config c;
    cr_assert_eq(config_resolve(dir, &c), XF_OK, "%s", xf_error_msg());
    double inv[64], scale;
    cr_assert_eq(config_rope_freqs(&c, inv, &scale), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(scale != 1.0, want_scaled, "%s: attention factor %g", fixture, scale);
    const int64_t half = c.head_dim / 2;
    float cc[64], ss[64];
    for (int64_t pos = 0; pos < 300; pos += 7) {
        xk_rope_table_freqs(cc, ss, pos, inv, half, scale);
        for (int64_t i = 0; i < half; i++) {
            float cg, sg;
            xf_rope_cos_sin(pos, inv, i, scale, &cg, &sg);
            cr_assert(cg == cc[i] && sg == ss[i], "%s pos %ld pair %ld", fixture, (long)pos, (long)i);
        }
    }
}

Test(cuda_moe_index, rope_table_is_the_cpu_table_yarn_included) {
    check_rope_table("llama-rope-yarn", 1);
    check_rope_table("deepseek-mla-yarn", 0); /* mscale == mscale_all_dim: the factor is in the softmax scale */
    check_rope_table("mixtral", 0);
}

/* ---- MLA: the rotary pairs (interleaved or not) give mla_rope's result, written back as it
 * writes it; one thread per part, reading every pair before writing. */
static void rope_part_gpu(float *x, int64_t dim, const float *c, const float *s, int interleave) {
    float in[64];
    for (int64_t i = 0; i < dim; i++) in[i] = x[i];
    for (int64_t i = 0; i < dim / 2; i++) {
        int64_t s0, s1;
        xf_rope_pair_src(i, dim, interleave, &s0, &s1);
        xf_rope_rotate(in[s0], in[s1], c[i], s[i], &x[i], &x[i + dim / 2]);
    }
}

Test(cuda_moe_index, mla_rope_pairs_are_mla_rope) {
    const int64_t dim = 16;
    float c[8], s[8], a[16], b[16], scr[16];
    for (int il = 0; il < 2; il++)
        for (int r = 0; r < 20; r++) {
            for (int i = 0; i < 8; i++) c[i] = cosf(0.3f * (float)(i + r)), s[i] = sinf(0.3f * (float)(i + r));
            for (int i = 0; i < 16; i++) a[i] = b[i] = sinf(1.7f * (float)(i + 3 * r));
            mla_rope(a, dim, c, s, il, scr);
            rope_part_gpu(b, dim, c, s, il);
            for (int i = 0; i < 16; i++) cr_assert(a[i] == b[i], "interleave %d element %d: %g vs %g", il, i, (double)b[i], (double)a[i]);
        }
    /* parts: heads in q, then k_rope in qkv */
    int in_qkv;
    cr_assert_eq(xf_mla_rope_part(2, 1, 4, 16, 8, 80, 16, 32, &in_qkv), 2 * 4 * 24 + 24 + 16);
    cr_assert_eq(in_qkv, 0);
    cr_assert_eq(xf_mla_rope_part(2, 4, 4, 16, 8, 80, 16, 32, &in_qkv), 2 * 80 + 16 + 32);
    cr_assert_eq(in_qkv, 1);
}

/* ---- MLA attention through a paged latent cache, as the kernels do it (gather by block table,
 * kv_b by a plain loop, one task per (query, head)), against mla_attend_head on contiguous rows. */
Test(cuda_moe_index, mla_attention_through_block_table_is_mla_attend_head) {
    enum { H = 3, DN = 4, DR = 4, DV = 5, R = 6, W = R + DR, CTX = 7, NEW = 2, SLOTS = 16, LAYERS = 2 };
    const int32_t table[4] = {12, 2, 8, 0}; /* paged B 2: positions 0..7 */
    const int64_t tpe = 2, layer = 1, ld = H * (DN + DV);
    float cache[LAYERS * SLOTS * W], kvb[(DN + DV) * H * R], q[NEW * H * (DN + DR)];
    uint64_t sd = 3;
    for (int i = 0; i < LAYERS * SLOTS * W; i++) cache[i] = (float)((int)(rng_next(&sd) % 200) - 100) / 50.0f;
    for (int i = 0; i < (DN + DV) * H * R; i++) kvb[i] = (float)((int)(rng_next(&sd) % 200) - 100) / 80.0f;
    for (int i = 0; i < NEW * H * (DN + DR); i++) q[i] = (float)((int)(rng_next(&sd) % 200) - 100) / 60.0f;
    /* the GPU's gather and decompression */
    float ckv[CTX * R], krope[CTX * DR], kvdec[CTX * H * (DN + DV)];
    for (int64_t idx = 0; idx < CTX * W; idx++) {
        int to_ckv;
        int64_t src, dst = xf_mla_gather(idx, R, DR, table, tpe, layer, SLOTS, &to_ckv, &src);
        (to_ckv ? ckv : krope)[dst] = cache[src];
    }
    for (int64_t j = 0; j < CTX; j++)
        for (int64_t o = 0; o < ld; o++) {
            float s = 0;
            for (int64_t i = 0; i < R; i++) s += kvb[o * R + i] * ckv[j * R + i];
            kvdec[j * ld + o] = s;
        }
    /* the CPU's: contiguous latents read through kv_cache_slot's rule */
    float ckv_c[CTX * R], krope_c[CTX * DR];
    for (int64_t j = 0; j < CTX; j++) {
        const int64_t slot = table[j / tpe] + j % tpe;
        for (int64_t i = 0; i < R; i++) ckv_c[j * R + i] = cache[(layer * SLOTS + slot) * W + i];
        for (int64_t i = 0; i < DR; i++) krope_c[j * DR + i] = cache[(layer * SLOTS + slot) * W + R + i];
    }
    cr_assert(memcmp(ckv, ckv_c, sizeof ckv) == 0 && memcmp(krope, krope_c, sizeof krope) == 0);
    const float scale = 0.3f;
    const int64_t pos0 = CTX - NEW;
    for (int64_t bid = 0; bid < NEW * H; bid++) {
        xf_mla_task t = xf_mla_index(bid, H, DN, DR, DV, 0, pos0);
        float want[DV], got[DV], sc[CTX];
        mla_attend_head(want, q + t.row * H * (DN + DR) + t.head * (DN + DR), DN, DR, DV, kvdec + t.head * (DN + DV), ld, krope,
                        t.pos + 1, scale, sc);
        /* the kernel's arithmetic: scores, max, exp, sum, weighted V */
        float mx = -INFINITY;
        for (int64_t j = 0; j <= t.pos; j++) {
            float s = 0;
            for (int64_t i = 0; i < DN; i++) s += q[t.q_off + i] * kvdec[j * ld + t.kv_off + i];
            for (int64_t i = 0; i < DR; i++) s += q[t.q_off + DN + i] * krope[j * DR + i];
            sc[j] = s * scale;
            mx = fmaxf(mx, sc[j]);
        }
        float sum = 0;
        for (int64_t j = 0; j <= t.pos; j++) sum += sc[j] = expf(sc[j] - mx);
        for (int64_t i = 0; i < DV; i++) {
            float acc = 0;
            for (int64_t j = 0; j <= t.pos; j++) acc += sc[j] * kvdec[j * ld + t.kv_off + DN + i];
            got[i] = acc / sum;
        }
        cr_assert_eq(t.out_off, t.row * H * DV + t.head * DV);
        for (int i = 0; i < DV; i++)
            cr_assert_float_eq(got[i], want[i], 1e-5f, "task %ld element %d: %g vs %g", (long)bid, i, (double)got[i], (double)want[i]);
    }
}
