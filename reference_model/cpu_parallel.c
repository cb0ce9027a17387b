/* One rank's shard of the weights (cpu_parallel.h). */
#include "reference_model/cpu_parallel.h"

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

xf_status cpu_parallel_shard(const model_weights *full, const parallel_split *sp, int rank, model_weights **out) {
    *out = NULL;
    if (!full || !sp || rank < 0 || rank >= sp->tp) return xf_errorf(XF_EINVAL, "cpu_parallel_shard: bad arguments");
    const model_config *cfg = &full->cfg, *sh = &sp->shard;
    if (full->dtype == XF_INT8)
        return xf_errorf(XF_EINVAL, "--tp with int8 weights: a shard would regroup the scales; use --wdtype fp32 or bf16");
    if (cfg->o_bias || cfg->mlp_bias)
        return xf_errorf(XF_EINVAL, "--tp: %s has a bias on o_proj or down (row-parallel): not implemented in the split reference model",
                         cfg->name);
    if (cfg->n_experts > 0)
        return xf_errorf(XF_EINVAL, "--tp: %s is a mixture of experts, which the reference model does not run", cfg->name);
    if (sh->vocab != cfg->vocab) return xf_errorf(XF_EINVAL, "cpu_parallel_shard: the split must keep the vocabulary whole");
    model_weights *w = NULL;
    xf_status s = weights_alloc(&w, sh, full->dtype, full->group);
    if (s) return s;
    const int64_t hd = cfg->head_dim, q_full = cfg->n_heads * hd, kv_full = cfg->n_kv_heads * hd;
    const int64_t qs = sh->n_heads * hd, kvs = sh->n_kv_heads * hd, fs = sh->d_ff, d = cfg->d_model;
    const int64_t q0 = rank * qs, kv0 = (rank / sp->kv_copies) * kvs, f0 = rank * fs;
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
        /* row-parallel: o_proj's columns of its heads; gate and up rows, down's columns of its d_ff slice */
        if (!s) s = copy_block(&F->o, 0, d, q0, &L->o, 0);
        if (!s) s = copy_block(&F->gate_up, f0, fs, 0, &L->gate_up, 0);
        if (!s) s = copy_block(&F->gate_up, cfg->d_ff + f0, fs, 0, &L->gate_up, fs);
        if (!s) s = copy_block(&F->down, 0, d, f0, &L->down, 0);
    }
    if (s) {
        weights_free(w);
        return s;
    }
    *out = w;
    return XF_OK;
}
