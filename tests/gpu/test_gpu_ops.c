/* Every CUDA op against the CPU backend's kernels (cpu_kernels.h) or straight loops, on the GPU's
 * own inputs, one op at a time. Tolerances (bf16 weights and GEMM inputs, fp16 KV, FP32 accumulate):
 * exact for the embedding gather; 1e-2 relative for RMSNorm outputs stored as bf16 (2^-8 rounding
 * plus margin); 2e-3 for GEMMs in FP32 against double sums of the same bf16 operands; 1e-4 for
 * RoPE and residuals in fp32; 2e-3 for fp16 KV rows; 2e-2 for attention outputs stored as bf16. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_common.h"
#include "reference_model/cpu_kernels.h"
#include "reference_model/kv_cache.h"
#include "reference_model/weights.h"

typedef struct fixture {
    model_config cfg;
    model_weights *w;
    kv_cache *kv;
    const backend_ops *ops;
    void *ctx;
    int ids[2];
    step_seq seqs[2];
    int64_t tok_off[3];
    int32_t tokens[8];
    step_batch b;
    int64_t q_dim, kv_dim, width, T;
} fixture;

static void setup(fixture *f) {
    memset(f, 0, sizeof *f);
    model_config *c = &f->cfg;
    snprintf(c->name, sizeof c->name, "gpu-ops-test");
    snprintf(c->arch, sizeof c->arch, "llama");
    c->n_layers = 2;
    c->d_model = 128;
    c->n_heads = 4;
    c->n_kv_heads = 2;
    c->head_dim = 32;
    c->d_ff = 256;
    c->vocab = 512;
    c->max_ctx = 64;
    c->rope_theta = 10000.0;
    c->norm_eps = 1e-5;
    cr_assert_eq(config_validate(c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(weights_init_random(&f->w, c, 7, XF_BF16, 0), XF_OK, "%s", xf_error_msg());
    kv_cache_config kc = {.n_layers = c->n_layers, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim, .dtype = XF_FP16,
                          .budget_bytes = 64 * kv_bytes_per_slot(c->n_layers, c->n_kv_heads, c->head_dim, XF_FP16, 0),
                          .policy = {KV_POLICY_PAGED, 4}, .max_len = 32};
    cr_assert_eq(kv_cache_init(&f->kv, &kc), XF_OK, "%s", xf_error_msg());
    f->ops = backend_find("cuda");
    cr_assert_not_null(f->ops);
    backend_init_args a = {.cfg = c, .weights = f->w, .kv = f->kv, .kvdtype = XF_FP16, .kv_alloc = KV_ALLOC_POOL,
                           .kv_slots = kv_cache_n_slots(f->kv), .max_seqs = 2, .max_seq_len = 32, .max_step_tokens = 8,
                           .threads = 1, .device_index = 0};
    cr_assert_eq(f->ops->init(&f->ctx, &a), XF_OK, "%s", xf_error_msg());
    /* two sequences: 5 and 3 prompt tokens; a fork-free paged pool with interleaved blocks */
    cr_assert_eq(kv_cache_add_seq(f->kv, 5, 32, 32, &f->ids[0]), XF_OK);
    cr_assert_eq(kv_cache_add_seq(f->kv, 3, 32, 32, &f->ids[1]), XF_OK);
    int32_t toks[8] = {1, 17, 300, 42, 511, 7, 0, 256};
    memcpy(f->tokens, toks, sizeof toks);
    f->seqs[0] = (step_seq){f->ids[0], 0, 5};
    f->seqs[1] = (step_seq){f->ids[1], 0, 3};
    f->tok_off[0] = 0;
    f->tok_off[1] = 5;
    f->tok_off[2] = 8;
    f->b = (step_batch){XF_PREFILL, 0, 2, f->seqs, 8, f->tok_off, f->tokens};
    f->q_dim = c->n_heads * c->head_dim;
    f->kv_dim = c->n_kv_heads * c->head_dim;
    f->width = f->q_dim + 2 * f->kv_dim;
    f->T = 8;
}

static void teardown(fixture *f) {
    if (f->ops) f->ops->free_ctx(f->ctx);
    kv_cache_free(f->kv);
    weights_free(f->w);
}

static float *rd(fixture *f, const char *which, int64_t n) {
    float *p = malloc((size_t)n * sizeof *p);
    cr_assert_not_null(p);
    cr_assert_eq(cuda_backend_debug_read(f->ctx, which, p, n), XF_OK, "%s", xf_error_msg());
    return p;
}

static void run(fixture *f, op_kind k, int layer) {
    cr_assert_eq(f->ops->run_op(f->ctx, k, layer, &f->b), XF_OK, "%s: %s", op_kind_name(k), xf_error_msg());
    cr_assert_eq(f->ops->sync(f->ctx), XF_OK, "%s", xf_error_msg());
}

/* y (n, rows) = x (n, cols) . W^T in double, W read as stored (bf16). */
static void ref_gemm(const wmat *W, const float *x, int64_t n, double *y) {
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < W->rows; r++) {
            double s = 0;
            for (int64_t c = 0; c < W->cols; c++) s += (double)weights_get(W, r, c) * x[t * W->cols + c];
            y[t * W->rows + r] = s;
        }
}

Test(gpu_ops, each_op_matches_cpu_reference) {
    GPU_REQUIRE_DEVICE();
    fixture F, *f = &F;
    setup(f);
    const model_config *c = &f->cfg;
    const int64_t d = c->d_model, T = f->T, hd = c->head_dim;
    double *ref = malloc(sizeof(double) * (size_t)(T * 2 * c->d_ff + T * f->width + 1024));
    cr_assert_not_null(ref);

    run(f, OP_KV_ALLOC, -1);
    run(f, OP_EMBEDDING, -1);
    float *x = rd(f, "x", T * d);
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < d; j++)
            cr_assert_eq(x[t * d + j], weights_get(&f->w->embed, f->tokens[t], j), "embedding row %ld col %ld", (long)t, (long)j);

    /* layer 0, op by op */
    run(f, OP_ATTN_NORM, 0);
    float *xn = rd(f, "xn", T * d), *tmpf = malloc(sizeof(float) * (size_t)(T * f->width));
    for (int64_t t = 0; t < T; t++) xk_rmsnorm(tmpf + t * d, x + t * d, f->w->layers[0].attn_norm, d, (float)c->norm_eps);
    for (int64_t i = 0; i < T * d; i++) ref[i] = tmpf[i];
    cr_assert_lt(gpu_rel_err(xn, ref, T * d), 1e-2, "attn_norm");

    run(f, OP_QKV, 0);
    float *qkv = rd(f, "qkv", T * f->width);
    ref_gemm(&f->w->layers[0].qkv, xn, T, ref);
    cr_assert_lt(gpu_rel_err(qkv, ref, T * f->width), 2e-3, "qkv");

    run(f, OP_ROPE, 0);
    float *qkv2 = rd(f, "qkv", T * f->width);
    float cs[64];
    for (int s = 0; s < 2; s++)
        for (int64_t t = f->tok_off[s]; t < f->tok_off[s + 1]; t++) {
            xk_rope_table(cs, cs + hd / 2, t - f->tok_off[s], hd, c->rope_theta);
            xk_rope(qkv + t * f->width, c->n_heads, hd, cs, cs + hd / 2);
            xk_rope(qkv + t * f->width + f->q_dim, c->n_kv_heads, hd, cs, cs + hd / 2);
        }
    for (int64_t i = 0; i < T * f->width; i++) ref[i] = qkv[i];
    cr_assert_lt(gpu_rel_err(qkv2, ref, T * f->width), 1e-4, "rope");

    run(f, OP_KV_APPEND, 0);
    int64_t npool = c->n_layers * kv_cache_n_slots(f->kv) * f->kv_dim;
    float *kp = rd(f, "kpool", npool), *vp = rd(f, "vpool", npool);
    for (int s = 0; s < 2; s++)
        for (int64_t p = 0; p < f->seqs[s].n_new; p++) {
            int64_t slot = kv_cache_slot(f->kv, f->ids[s], p), t = f->tok_off[s] + p;
            for (int64_t j = 0; j < f->kv_dim; j++) {
                double kref = qkv2[t * f->width + f->q_dim + j], vref = qkv2[t * f->width + f->q_dim + f->kv_dim + j];
                cr_assert_float_eq(kp[slot * f->kv_dim + j], kref, 2e-3 * (1 + fabs(kref)), "K seq %d pos %ld", s, (long)p);
                cr_assert_float_eq(vp[slot * f->kv_dim + j], vref, 2e-3 * (1 + fabs(vref)), "V seq %d pos %ld", s, (long)p);
            }
        }

    run(f, OP_ATTENTION, 0);
    float *att = rd(f, "att", T * f->q_dim);
    int64_t rep = c->n_heads / c->n_kv_heads;
    for (int s = 0; s < 2; s++)
        for (int64_t i = 0; i < f->seqs[s].n_new; i++) {
            int64_t t = f->tok_off[s] + i;
            for (int64_t h = 0; h < c->n_heads; h++) {
                int64_t kvh = h / rep;
                double sc[8], mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j <= i; j++) {
                    int64_t tj = f->tok_off[s] + j;
                    double dot = 0;
                    for (int64_t e = 0; e < hd; e++)
                        dot += (double)qkv2[t * f->width + h * hd + e] * qkv2[tj * f->width + f->q_dim + kvh * hd + e];
                    sc[j] = dot / sqrt((double)hd);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int64_t j = 0; j <= i; j++) sum += (sc[j] = exp(sc[j] - mx));
                for (int64_t e = 0; e < hd; e++) {
                    double o = 0;
                    for (int64_t j = 0; j <= i; j++)
                        o += sc[j] * qkv2[(f->tok_off[s] + j) * f->width + f->q_dim + f->kv_dim + kvh * hd + e];
                    ref[t * f->q_dim + h * hd + e] = o / sum;
                }
            }
        }
    cr_assert_lt(gpu_rel_err(att, ref, T * f->q_dim), 2e-2, "attention");

    run(f, OP_O_PROJ, 0);
    float *o = rd(f, "tmp", T * d);
    ref_gemm(&f->w->layers[0].o, att, T, ref);
    cr_assert_lt(gpu_rel_err(o, ref, T * d), 2e-3, "o_proj");

    run(f, OP_ATTN_RESIDUAL, 0);
    float *x2 = rd(f, "x", T * d);
    for (int64_t i = 0; i < T * d; i++) ref[i] = (double)x[i] + o[i];
    cr_assert_lt(gpu_rel_err(x2, ref, T * d), 1e-5, "attn_residual");

    run(f, OP_FFN_NORM, 0);
    float *xn2 = rd(f, "xn", T * d);
    run(f, OP_GATE_UP, 0);
    float *gu = rd(f, "gu", T * 2 * c->d_ff);
    ref_gemm(&f->w->layers[0].gate_up, xn2, T, ref);
    cr_assert_lt(gpu_rel_err(gu, ref, T * 2 * c->d_ff), 2e-3, "gate_up");

    run(f, OP_SWIGLU, 0);
    float *hb = rd(f, "h", T * c->d_ff), hv[256];
    for (int64_t t = 0; t < T; t++) {
        xk_swiglu(hv, gu + t * 2 * c->d_ff, gu + t * 2 * c->d_ff + c->d_ff, c->d_ff);
        for (int64_t j = 0; j < c->d_ff; j++) ref[t * c->d_ff + j] = hv[j];
    }
    cr_assert_lt(gpu_rel_err(hb, ref, T * c->d_ff), 1e-2, "swiglu");

    run(f, OP_DOWN, 0);
    float *dn = rd(f, "tmp", T * d);
    ref_gemm(&f->w->layers[0].down, hb, T, ref);
    cr_assert_lt(gpu_rel_err(dn, ref, T * d), 2e-3, "down");
    run(f, OP_FFN_RESIDUAL, 0);

    for (int k = OP_ATTN_NORM; k <= OP_FFN_RESIDUAL; k++) run(f, (op_kind)k, 1);
    float *xl = rd(f, "x", T * d);
    run(f, OP_FINAL_NORM, -1);
    float *last = rd(f, "last", 2 * d);
    for (int s = 0; s < 2; s++) {
        xk_rmsnorm(tmpf, xl + (f->tok_off[s + 1] - 1) * d, f->w->final_norm, d, (float)c->norm_eps);
        for (int64_t j = 0; j < d; j++) ref[s * d + j] = tmpf[j];
    }
    cr_assert_lt(gpu_rel_err(last, ref, 2 * d), 1e-2, "final_norm (last row of each sequence)");

    run(f, OP_LM_HEAD, -1);
    float *lg = rd(f, "logits", 2 * c->vocab);
    ref_gemm(&f->w->lm_head, last, 2, ref);
    cr_assert_lt(gpu_rel_err(lg, ref, 2 * c->vocab), 2e-3, "lm_head");

    run(f, OP_SAMPLING, -1);
    int32_t next[2];
    cr_assert_eq(f->ops->read_tokens(f->ctx, next, 2), XF_OK);
    for (int s = 0; s < 2; s++) cr_assert_eq(next[s], xk_argmax(lg + s * c->vocab, c->vocab), "sampling seq %d", s);

    free(x); free(xn); free(tmpf); free(qkv); free(qkv2); free(kp); free(vp); free(att); free(o); free(x2);
    free(xn2); free(gu); free(hb); free(dn); free(xl); free(last); free(lg); free(ref);
    teardown(f);
}
