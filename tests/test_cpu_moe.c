/* The CPU mixture-of-experts FFN (reference_model/cpu_moe.c) against a plain double-precision
 * MoE written here with straight loops over weights_get: the router's scoring and top-k, the
 * experts' SwiGLU, the weighted sum, the shared expert and its sigmoid gate; and that only the
 * experts some token chose are read. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference_model/config.h"
#include "reference_model/cpu_moe.h"
#include "reference_model/weights.h"

static model_config moe_cfg(int64_t E, int64_t k, int norm, int64_t fs, int gate) {
    model_config c;
    memset(&c, 0, sizeof c);
    strcpy(c.name, "test-moe");
    strcpy(c.arch, fs ? "qwen2_moe" : "qwen3_moe");
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 8;
    c.d_model = 40; /* 2 * 16 + 8: vector tails */
    c.d_ff = 24;
    c.vocab = 64;
    c.max_ctx = 64;
    c.rope_theta = 10000.0;
    c.norm_eps = 1e-5;
    c.n_experts = E;
    c.experts_per_tok = k;
    c.d_ff_expert = 24;
    c.norm_topk_prob = norm;
    c.d_ff_shared = fs;
    c.shared_expert_gate = gate;
    c.dense_layers[0] = 1; /* layer 0 dense, layer 1 MoE */
    return c;
}

/* The linear function the tests hand to cpu_moe: fp32 straight loops; records which matrices it
 * was asked to read. */
typedef struct lin_log {
    const wmat *seen[64];
    int n;
} lin_log;

static void plain_lin(void *be, int count, const wmat *const *Ws, float *const *xs, const int64_t *ns, float *const *ys) {
    lin_log *lg = be;
    for (int i = 0; i < count; i++) {
        const wmat *W = Ws[i];
        const float *x = xs[i];
        float *y = ys[i];
        if (lg && lg->n < 64) lg->seen[lg->n++] = W;
        for (int64_t t = 0; t < ns[i]; t++)
            for (int64_t r = 0; r < W->rows; r++) {
                double s = 0;
                for (int64_t c = 0; c < W->cols; c++) s += (double)weights_get(W, r, c) * x[t * W->cols + c];
                y[t * W->rows + r] = (float)s;
            }
    }
}

static double dsilu(double g) { return g / (1.0 + exp(-g)); }

/* The reference: out (d) of one token x (d) through layer L's MoE, in double. */
static void ref_moe(const model_config *c, const layer_weights *L, const float *x, double *out, int32_t *chosen) {
    const int64_t E = c->n_experts, k = c->experts_per_tok, d = c->d_model, fe = c->d_ff_expert;
    double lg[64], p[64], mx = -1e300, sum = 0;
    for (int64_t e = 0; e < E; e++) {
        lg[e] = 0;
        for (int64_t i = 0; i < d; i++) lg[e] += (double)weights_get(&L->router, e, i) * x[i];
        mx = lg[e] > mx ? lg[e] : mx;
    }
    for (int64_t e = 0; e < E; e++) sum += p[e] = exp(lg[e] - mx);
    int used[64] = {0};
    double w[8], wsum = 0;
    for (int64_t j = 0; j < k; j++) {
        int64_t b = -1;
        for (int64_t e = 0; e < E; e++)
            if (!used[e] && (b < 0 || p[e] > p[b])) b = e;
        used[b] = 1;
        chosen[j] = (int32_t)b;
        w[j] = p[b] / sum;
        wsum += w[j];
    }
    for (int64_t i = 0; i < d; i++) out[i] = 0;
    for (int64_t j = 0; j < k; j++) {
        const int64_t e = chosen[j];
        const double wj = c->norm_topk_prob ? w[j] / wsum : w[j];
        for (int64_t f = 0; f < fe; f++) {
            double g = 0, u = 0;
            for (int64_t i = 0; i < d; i++) {
                g += (double)weights_get(&L->exp_gate_up[e], f, i) * x[i];
                u += (double)weights_get(&L->exp_gate_up[e], fe + f, i) * x[i];
            }
            const double h = dsilu(g) * u;
            for (int64_t i = 0; i < d; i++) out[i] += wj * h * (double)weights_get(&L->exp_down[e], i, f);
        }
    }
    if (c->d_ff_shared > 0) {
        const int64_t fs = c->d_ff_shared;
        double gate = 1;
        if (c->shared_expert_gate) {
            double s = 0;
            for (int64_t i = 0; i < d; i++) s += (double)L->sh_gate[i] * x[i];
            gate = 1.0 / (1.0 + exp(-s));
        }
        for (int64_t f = 0; f < fs; f++) {
            double g = 0, u = 0;
            for (int64_t i = 0; i < d; i++) {
                g += (double)weights_get(&L->sh_gate_up, f, i) * x[i];
                u += (double)weights_get(&L->sh_gate_up, fs + f, i) * x[i];
            }
            const double h = dsilu(g) * u;
            for (int64_t i = 0; i < d; i++) out[i] += gate * h * (double)weights_get(&L->sh_down, i, f);
        }
    }
}

/* n tokens through layer 1 of cfg, against the reference; returns the experts read. */
static void check_layer(const model_config *c, int64_t n, lin_log *lg) {
    model_weights *w = NULL;
    cr_assert_eq(weights_init_random(&w, c, 7, XF_FP32, 0), XF_OK, "%s", xf_error_msg());
    /* the router's N(0, 0.02) logits are nearly equal: scale it so the choice is clear-cut, and
     * the experts so their outputs are not tiny */
    const layer_weights *L = &w->layers[1];
    cr_assert_null(w->layers[0].exp_gate_up, "layer 0 is dense");
    cr_assert_not_null(L->exp_gate_up);
    for (int64_t i = 0; i < L->router.rows * L->router.cols; i++) ((float *)L->router.data)[i] *= 40.0f;
    cpu_moe *m = NULL;
    cr_assert_eq(cpu_moe_init(&m, c, n, 2), XF_OK, "%s", xf_error_msg());
    float *x = malloc((size_t)(n * c->d_model) * sizeof(float)), *out = malloc((size_t)(n * c->d_model) * sizeof(float));
    float *x0 = malloc((size_t)(n * c->d_model) * sizeof(float));
    for (int64_t i = 0; i < n * c->d_model; i++) x0[i] = x[i] = (float)sin(0.37 * (double)i + 0.1) * 2.0f;
    cr_assert_eq(cpu_moe_gate_up(m, L, 1, x, n, plain_lin, lg), XF_OK, "%s", xf_error_msg());
    cpu_moe_swiglu(m, n);
    cpu_moe_down(m, L, n, out, plain_lin, lg);
    int64_t want[64] = {0}, total = 0;
    for (int64_t t = 0; t < n; t++) {
        double ref[64];
        int32_t ch[8];
        ref_moe(c, L, x0 + t * c->d_model, ref, ch);
        for (int64_t j = 0; j < c->experts_per_tok; j++) want[ch[j]]++;
        for (int64_t i = 0; i < c->d_model; i++)
            cr_assert(fabs(out[t * c->d_model + i] - ref[i]) <= 1e-5 + 1e-4 * fabs(ref[i]), "token %lld, element %lld: %g vs %g",
                      (long long)t, (long long)i, out[t * c->d_model + i], ref[i]);
    }
    const int64_t *cnt = cpu_moe_counts(m, 1);
    for (int64_t e = 0; e < c->n_experts; e++) {
        cr_assert_eq(cnt[e], want[e], "expert %lld: %lld tokens routed, the reference chose it %lld times", (long long)e,
                     (long long)cnt[e], (long long)want[e]);
        total += cnt[e];
    }
    cr_assert_eq(total, n * c->experts_per_tok);
    /* only the router and the chosen experts' matrices were read (and the shared expert's) */
    for (int i = 0; i < lg->n; i++)
        for (int64_t e = 0; e < c->n_experts; e++)
            if (lg->seen[i] == &L->exp_gate_up[e] || lg->seen[i] == &L->exp_down[e])
                cr_assert_gt(cnt[e], 0, "expert %lld was read but no token chose it", (long long)e);
    free(x);
    free(x0);
    free(out);
    cpu_moe_free(m);
    weights_free(w);
}

Test(cpu_moe, one_token_reads_only_its_k_experts) {
    model_config c = moe_cfg(8, 2, 1, 0, 0);
    lin_log lg = {{0}, 0};
    check_layer(&c, 1, &lg);
    cr_assert_eq(lg.n, 1 + 2 + 2, "the router, 2 gate_up and 2 down GEMMs: %d matrices read", lg.n);
}

Test(cpu_moe, a_prefill_groups_tokens_by_expert) {
    model_config c = moe_cfg(8, 2, 1, 0, 0);
    lin_log lg = {{0}, 0};
    check_layer(&c, 12, &lg);
}

Test(cpu_moe, without_renormalization_top3) {
    model_config c = moe_cfg(6, 3, 0, 0, 0);
    lin_log lg = {{0}, 0};
    check_layer(&c, 5, &lg);
}

Test(cpu_moe, shared_expert_with_sigmoid_gate) {
    model_config c = moe_cfg(4, 2, 0, 16, 1);
    lin_log lg = {{0}, 0};
    check_layer(&c, 3, &lg);
}

Test(cpu_moe, route_softmax_topk) {
    const float lg[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
    int32_t idx[3];
    float w[3];
    /* ties go to the lower index; the chosen come back in increasing order */
    cpu_moe_route(MOE_SCORE_SOFTMAX, lg, 5, 2, 0, idx, w);
    cr_assert(idx[0] == 1 && idx[1] == 3, "%d %d", idx[0], idx[1]);
    double z = exp(0.5) + 2 * exp(2.0) + exp(-1.0) + exp(1.0);
    cr_assert_float_eq(w[0], exp(2.0) / z, 1e-6);
    cpu_moe_route(MOE_SCORE_SOFTMAX, lg, 5, 3, 1, idx, w);
    cr_assert(idx[0] == 1 && idx[1] == 3 && idx[2] == 4, "%d %d %d", idx[0], idx[1], idx[2]);
    cr_assert_float_eq(w[0] + w[1] + w[2], 1.0, 1e-6);
    cr_assert_float_eq(w[2], exp(1.0) / (2 * exp(2.0) + exp(1.0)), 1e-6);
}

Test(cpu_moe, refuses_what_it_cannot_run) {
    model_config c = moe_cfg(4, 2, 1, 0, 0);
    cpu_moe *m = NULL;
    c.moe_score = MOE_SCORING_COUNT;
    cr_assert_eq(cpu_moe_init(&m, &c, 4, 1), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "scoring"), "%s", xf_error_msg());
    cr_assert_null(m);
    c = moe_cfg(0, 0, 0, 0, 0);
    cr_assert_eq(cpu_moe_init(&m, &c, 4, 1), XF_EINVAL);
    cpu_moe_free(NULL);
}

/* The reference model's resident weights hold every expert, the router and the shared expert:
 * fp32 bytes = 4 x the parameter count (norms and biases are fp32 too), for the MoE and the dense
 * layer of the config; int8 stores a byte per weight plus a scale per group. */
Test(cpu_moe, resident_weights_follow_the_parameter_count) {
    model_config c = moe_cfg(4, 2, 0, 16, 1);
    int64_t b = 0;
    cr_assert_eq(weights_bytes(&c, XF_FP32, 0, &b), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(b, 4 * config_param_count(&c), "%lld bytes for %lld parameters", (long long)b, (long long)config_param_count(&c));
    weights_kinds k;
    cr_assert_eq(weights_bytes_kinds(&c, XF_INT8, 8, &k), XF_OK);
    /* layer 1's MoE FFN: router 4 x 40, 4 experts x 3 x 40 x 24, shared 3 x 40 x 16, row-major; layer 0's
     * FFN 3 x 40 x 24 and every layer's attention packed for the int8-input kernels (weights.h: rows in
     * blocks of 16, so o's and down's 40 rows are held as 48) */
    const int64_t attn = (32 + 2 * 16) * 40 + 48 * 32, moe = 4 * 40 + 4 * 3 * 40 * 24 + 3 * 40 * 16, dense = 48 * 40 + 48 * 24;
    cr_assert_eq(k.layer_matrices, 2 * attn + moe + dense, "%lld", (long long)k.layer_matrices);
}

/* DeepSeek-V3's grouped sigmoid routing against transformers' DeepseekV3TopkRouter (identity router
 * weight, the logits below; 8 experts in 4 groups of 2, top-2 within the best 2 groups, x2.5).
 * sigmoid: .6225 .2689 .8808 .5622 .7311 .8176 .3775 .9526; plus the bias: .6225 .7689 .6308 .5622
 * .8561 .8176 .3775 -.0474; group sums 1.391 1.193 1.674 .330: groups 2 and 0 kept, so experts 2
 * and 7 (the two best sigmoids) are out; top-2 of {0, 1, 4, 5} by choice: 4, 5, weighted by their
 * sigmoids .7311 and .8176, renormalized and x2.5: 1.18017, 1.31983 (transformers: 1.1801674,
 * 1.3198323; without renormalizing 1.8276465, 2.0439360). */
Test(cpu_moe, deepseek_grouped_sigmoid_routing) {
    const float logits[8] = {0.5f, -1.0f, 2.0f, 0.25f, 1.0f, 1.5f, -0.5f, 3.0f};
    const float bias[8] = {0.0f, 0.5f, -0.25f, 0.0f, 0.125f, 0.0f, 0.0f, -1.0f};
    float scratch[2 * 8 + 4], w[2];
    int32_t idx[2];
    cpu_moe_route_grouped(logits, bias, 8, 2, 4, 2, 1, 2.5, scratch, idx, w);
    cr_assert(idx[0] == 4 && idx[1] == 5, "chose %d, %d", idx[0], idx[1]);
    cr_assert_float_eq(w[0], 1.1801674f, 1e-6);
    cr_assert_float_eq(w[1], 1.3198323f, 1e-6);
    cpu_moe_route_grouped(logits, bias, 8, 2, 4, 2, 0, 2.5, scratch, idx, w);
    cr_assert_float_eq(w[0], 1.8276465f, 1e-6);
    cr_assert_float_eq(w[1], 2.0439360f, 1e-6);
    /* without the bias and the group limit: the two best sigmoids, 2 and 7 */
    cpu_moe_route_grouped(logits, NULL, 8, 2, 4, 4, 1, 1.0, scratch, idx, w);
    cr_assert(idx[0] == 2 && idx[1] == 7, "chose %d, %d", idx[0], idx[1]);
}
