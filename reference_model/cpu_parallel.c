/* One rank's shard of the weights (cpu_parallel.h). */
#include "reference_model/cpu_parallel.h"

#include "reference_model/safetensors.h"

#include <stdlib.h>
#include <string.h>

/* Rows [r0, r0 + n) of src, columns [c0, c0 + cols) into rows [dst_r0, ...) of dst, through fp32
 * (exact for fp32, bf16 and fp16: the values come back to the same grid). */
static xf_status copy_block(const wmat *src, int64_t r0, int64_t n, int64_t c0, wmat *dst, int64_t dst_r0) {
    const int64_t cols = dst->cols;
    float *row = malloc((size_t)cols * sizeof *row);
    if (!row) return xf_errorf(XF_ENOMEM, "out of memory slicing the weights");
    for (int64_t r = 0; r < n; r++) {
        for (int64_t c = 0; c < cols; c++) row[c] = weights_get(src, r0 + r, c0 + c);
        weights_set_rows(dst, dst_r0 + r, 1, row);
    }
    free(row);
    return XF_OK;
}

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        const int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

xf_status cpu_parallel_check(const model_config *cfg, const parallel_split *sp, xf_dtype dtype, int group) {
    if (!cfg || !sp || sp->tp < 1) return xf_errorf(XF_EINVAL, "cpu_parallel_check: bad arguments");
    if (cfg->n_experts > 0)
        return xf_errorf(XF_EINVAL, "--tp: %s is a mixture of experts: experts split over the ranks are not implemented in the "
                         "split reference model (predict --tp prices it)", cfg->name);
    if (model_is_mla(cfg))
        return xf_errorf(XF_EINVAL, "--tp: %s uses latent attention (MLA): its split is not implemented in the split reference "
                         "model (predict --tp prices it)", cfg->name);
    if (sp->shard.vocab != cfg->vocab) return xf_errorf(XF_EINVAL, "cpu_parallel: the split must keep the vocabulary whole");
    if (group <= 0) group = XF_DEFAULT_QUANT_GROUP;
    if (dtype == XF_INT8 && sp->tp > 1) {
        /* row-parallel o_proj and down: each rank quantizes its columns; a scale group must lie in
         * one rank's columns, else the shard's scales would differ from the whole model's */
        const int64_t q_full = cfg->n_heads * cfg->head_dim, qs = sp->shard.n_heads * cfg->head_dim, fs = sp->shard.d_ff;
        const char *what = qs % group ? "o_proj" : fs % group ? "down" : NULL;
        if (what) {
            const int64_t full = qs % group ? q_full : cfg->d_ff, part = qs % group ? qs : fs;
            int64_t g = gcd64(qs, fs), fit = 1; /* the largest group <= --group that divides both */
            for (int64_t k = 1; k <= g && k <= group; k++)
                if (g % k == 0) fit = k;
            g = fit;
            return xf_errorf(XF_EINVAL,
                             "--tp %d with int8 --group %d: %s's %lld input columns split into %d x %lld, and %lld is not a "
                             "multiple of %d, so a scale group would straddle two ranks; give a --group that divides %lld "
                             "and %lld (e.g. --group %lld)",
                             sp->tp, group, what, (long long)full, sp->tp, (long long)part, (long long)part, group, (long long)qs,
                             (long long)fs, (long long)g);
        }
    }
    return XF_OK;
}

/* The first Q, KV and d_ff rows of rank's slice. */
static void slice_of(const model_config *cfg, const parallel_split *sp, int rank, int64_t *q0, int64_t *kv0, int64_t *f0) {
    const int64_t hd = cfg->head_dim;
    *q0 = rank * sp->shard.n_heads * hd;
    *kv0 = (rank / sp->kv_copies) * sp->shard.n_kv_heads * hd;
    *f0 = rank * sp->shard.d_ff;
}

xf_status cpu_parallel_shard(const model_weights *full, const parallel_split *sp, int rank, xf_dtype dtype, int group,
                             model_weights **out) {
    *out = NULL;
    if (!full || !sp || rank < 0 || rank >= sp->tp) return xf_errorf(XF_EINVAL, "cpu_parallel_shard: bad arguments");
    const model_config *cfg = &full->cfg, *sh = &sp->shard;
    if (full->dtype == XF_INT8)
        return xf_errorf(XF_EINVAL, "cpu_parallel_shard: give the whole model unquantized; each shard quantizes its own block");
    if (group <= 0) group = XF_DEFAULT_QUANT_GROUP;
    xf_status s = cpu_parallel_check(cfg, sp, dtype, group);
    if (s) return s;
    model_weights *w = NULL;
    if ((s = weights_alloc(&w, sh, dtype, group))) return s;
    const int64_t hd = cfg->head_dim, q_full = cfg->n_heads * hd, kv_full = cfg->n_kv_heads * hd;
    const int64_t qs = sh->n_heads * hd, kvs = sh->n_kv_heads * hd, fs = sh->d_ff, d = cfg->d_model;
    int64_t q0, kv0, f0;
    slice_of(cfg, sp, rank, &q0, &kv0, &f0);
    s = copy_block(&full->embed, 0, cfg->vocab, 0, &w->embed, 0);
    if (!s && w->lm_head.data != w->embed.data) s = copy_block(&full->lm_head, 0, cfg->vocab, 0, &w->lm_head, 0);
    if (!s) memcpy(w->final_norm, full->final_norm, (size_t)d * sizeof *w->final_norm);
    for (int64_t l = 0; !s && l < cfg->n_layers; l++) {
        const layer_weights *F = &full->layers[l];
        layer_weights *L = &w->layers[l];
        memcpy(L->attn_norm, F->attn_norm, (size_t)d * sizeof *L->attn_norm);
        memcpy(L->ffn_norm, F->ffn_norm, (size_t)d * sizeof *L->ffn_norm);
        if (F->q_norm) {
            memcpy(L->q_norm, F->q_norm, (size_t)hd * sizeof *L->q_norm);
            memcpy(L->k_norm, F->k_norm, (size_t)hd * sizeof *L->k_norm);
        }
        /* column-parallel: Q rows of this rank's heads, K and V rows of its KV heads */
        s = copy_block(&F->qkv, q0, qs, 0, &L->qkv, 0);
        if (!s) s = copy_block(&F->qkv, q_full + kv0, kvs, 0, &L->qkv, qs);
        if (!s) s = copy_block(&F->qkv, q_full + kv_full + kv0, kvs, 0, &L->qkv, qs + kvs);
        if (!s && F->qkv_bias) {
            memcpy(L->qkv_bias, F->qkv_bias + q0, (size_t)qs * sizeof *L->qkv_bias);
            memcpy(L->qkv_bias + qs, F->qkv_bias + q_full + kv0, (size_t)kvs * sizeof *L->qkv_bias);
            memcpy(L->qkv_bias + qs + kvs, F->qkv_bias + q_full + kv_full + kv0, (size_t)kvs * sizeof *L->qkv_bias);
        }
        if (!s && F->gate_up_bias) {
            memcpy(L->gate_up_bias, F->gate_up_bias + f0, (size_t)fs * sizeof *L->gate_up_bias);
            memcpy(L->gate_up_bias + fs, F->gate_up_bias + cfg->d_ff + f0, (size_t)fs * sizeof *L->gate_up_bias);
        }
        /* row-parallel: o_proj's columns of its heads, gate and up rows, down's columns of its d_ff
         * slice; their biases on rank 0 only, added once before the all-reduce */
        if (!s) s = copy_block(&F->o, 0, d, q0, &L->o, 0);
        if (!s) s = copy_block(&F->gate_up, f0, fs, 0, &L->gate_up, 0);
        if (!s) s = copy_block(&F->gate_up, cfg->d_ff + f0, fs, 0, &L->gate_up, fs);
        if (!s) s = copy_block(&F->down, 0, d, f0, &L->down, 0);
        if (!s) cpu_parallel_row_bias(F->o_bias, rank, d, &L->o_bias);
        if (!s) cpu_parallel_row_bias(F->down_bias, rank, d, &L->down_bias);
    }
    if (s) {
        weights_free(w);
        return s;
    }
    *out = w;
    return XF_OK;
}

void cpu_parallel_row_bias(const float *full, int rank, int64_t d, float **bias) {
    if (!*bias) return;
    if (rank == 0 && full) {
        memcpy(*bias, full, (size_t)d * sizeof **bias);
        return;
    }
    free(*bias);
    *bias = NULL;
}

xf_status cpu_parallel_load(const char *dir, const model_config *cfg, const parallel_split *sp, int rank, xf_dtype dtype, int group,
                            model_weights **out) {
    *out = NULL;
    if (!dir || !cfg || !sp || rank < 0 || rank >= sp->tp) return xf_errorf(XF_EINVAL, "cpu_parallel_load: bad arguments");
    if (group <= 0) group = XF_DEFAULT_QUANT_GROUP;
    xf_status s = cpu_parallel_check(cfg, sp, dtype, group);
    if (s) return s;
    st_slice sl = {cfg, 0, 0, 0, rank == 0};
    slice_of(cfg, sp, rank, &sl.q0, &sl.kv0, &sl.f0);
    return st_load_weights_slice(dir, &sp->shard, dtype, group, &sl, out);
}
