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

/* o_proj's input columns per head: v_head_dim with latent attention, else head_dim. */
static int64_t o_head_dim(const model_config *cfg) { return model_is_mla(cfg) ? cfg->v_head_dim : cfg->head_dim; }

xf_status cpu_parallel_check(const model_config *cfg, const parallel_split *sp, xf_dtype dtype, int group) {
    if (!cfg || !sp || sp->tp < 1) return xf_errorf(XF_EINVAL, "cpu_parallel_check: bad arguments");
    if (cfg->n_experts > 0 && !sp->experts_tp)
        return xf_errorf(XF_EINVAL, "--tp: %s is a mixture of experts: the split reference model runs its experts split by "
                         "columns (experts_tp), not expert parallel", cfg->name);
    if (sp->shard.vocab != cfg->vocab) return xf_errorf(XF_EINVAL, "cpu_parallel: the split must keep the vocabulary whole");
    if (group <= 0) group = XF_DEFAULT_QUANT_GROUP;
    if (dtype == XF_INT8 && sp->tp > 1) {
        /* row-parallel matrices (o_proj, down of the dense FFN, of an expert, of the shared expert):
         * each rank quantizes its columns; a scale group must lie in one rank's columns, else the
         * shard's scales would differ from the whole model's */
        const int dense = cfg->n_experts <= 0 || model_moe_layers(cfg) < cfg->n_layers;
        const struct {
            const char *name;
            int64_t full, part;
        } rows[] = {
            {"o_proj", cfg->n_heads * o_head_dim(cfg), sp->shard.n_heads * o_head_dim(cfg)},
            {"down", dense ? cfg->d_ff : 0, dense ? sp->shard.d_ff : 0},
            {"an expert's down", cfg->n_experts > 0 ? cfg->d_ff_expert : 0, cfg->n_experts > 0 ? sp->shard.d_ff_expert : 0},
            {"the shared expert's down", cfg->n_experts > 0 ? cfg->d_ff_shared : 0, cfg->n_experts > 0 ? sp->shard.d_ff_shared : 0},
        };
        int bad = -1;
        int64_t g = 0;
        for (int k = 0; k < 4; k++) {
            if (rows[k].part <= 0) continue;
            g = gcd64(g, rows[k].part);
            if (bad < 0 && rows[k].part % group) bad = k;
        }
        if (bad >= 0) {
            int64_t fit = 1; /* the largest group <= --group dividing every rank's columns */
            for (int64_t k = 1; k <= g && k <= group; k++)
                if (g % k == 0) fit = k;
            return xf_errorf(XF_EINVAL,
                             "--tp %d with int8 --group %d: %s's %lld input columns split into %d x %lld, and %lld is not a "
                             "multiple of %d, so a scale group would straddle two ranks; give a --group that divides every "
                             "rank's columns of the row-parallel matrices (e.g. --group %lld)",
                             sp->tp, group, rows[bad].name, (long long)rows[bad].full, sp->tp, (long long)rows[bad].part,
                             (long long)rows[bad].part, group, (long long)fit);
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

/* An FFN of width f split over the ranks: gate and up rows [r f_s, (r + 1) f_s) (f_s = its shard's
 * width), down's columns of them. */
static xf_status shard_ffn(const wmat *gu, const wmat *dn, int64_t f, int64_t fs, int rank, wmat *sgu, wmat *sdn) {
    const int64_t f0 = rank * fs;
    xf_status s = copy_block(gu, f0, fs, 0, sgu, 0);
    if (!s) s = copy_block(gu, f + f0, fs, 0, sgu, fs);
    if (!s) s = copy_block(dn, 0, dn->rows, f0, sdn, 0);
    return s;
}

/* An MoE layer split by columns (experts_tp): the router (and its correction bias, the shared
 * expert's gate) whole, every expert's and the shared expert's FFN as shard_ffn. */
static xf_status shard_moe(const model_config *cfg, const model_config *sh, int rank, const layer_weights *F, layer_weights *L) {
    xf_status s = copy_block(&F->router, 0, cfg->n_experts, 0, &L->router, 0);
    if (!s && F->router_bias) memcpy(L->router_bias, F->router_bias, (size_t)cfg->n_experts * sizeof *L->router_bias);
    if (!s && F->sh_gate) memcpy(L->sh_gate, F->sh_gate, (size_t)cfg->d_model * sizeof *L->sh_gate);
    for (int64_t e = 0; !s && e < cfg->n_experts; e++)
        s = shard_ffn(&F->exp_gate_up[e], &F->exp_down[e], cfg->d_ff_expert, sh->d_ff_expert, rank, &L->exp_gate_up[e], &L->exp_down[e]);
    if (!s && cfg->d_ff_shared > 0) s = shard_ffn(&F->sh_gate_up, &F->sh_down, cfg->d_ff_shared, sh->d_ff_shared, rank, &L->sh_gate_up, &L->sh_down);
    return s;
}

/* Latent attention of layer L (weights.h's MLA layout) for the heads [h0, h0 + hs) of the shard
 * (DeepSeek-V3 under tensor parallelism, as Megatron-LM and vLLM split it): q_a (or, without a q
 * rank, q_proj's rows of those heads), kv_a and their RMSNorms whole on every rank (the latent
 * KV cache replicated); q_b and kv_b column-parallel: the rows of those heads; o_proj row-parallel:
 * its v_head_dim columns of those heads. */
static xf_status shard_mla(const model_config *cfg, const model_config *sh, int rank, const layer_weights *F, layer_weights *L) {
    const int64_t hs = sh->n_heads, h0 = rank * hs, qh = cfg->qk_nope_head_dim + cfg->qk_rope_head_dim,
                  kvh = cfg->qk_nope_head_dim + cfg->v_head_dim, lat = cfg->kv_lora_rank + cfg->qk_rope_head_dim,
                  qr = cfg->q_lora_rank, fq = qr > 0 ? qr : cfg->n_heads * qh, sq = qr > 0 ? qr : hs * qh;
    xf_status s = copy_block(&F->qkv, qr > 0 ? 0 : h0 * qh, sq, 0, &L->qkv, 0);
    if (!s) s = copy_block(&F->qkv, fq, lat, 0, &L->qkv, sq);
    if (!s && qr > 0) s = copy_block(&F->q_b, h0 * qh, hs * qh, 0, &L->q_b, 0);
    if (!s) s = copy_block(&F->kv_b, h0 * kvh, hs * kvh, 0, &L->kv_b, 0);
    if (!s) s = copy_block(&F->o, 0, cfg->d_model, h0 * cfg->v_head_dim, &L->o, 0);
    if (!s && qr > 0) memcpy(L->q_a_norm, F->q_a_norm, (size_t)qr * sizeof *L->q_a_norm);
    if (!s) memcpy(L->kv_a_norm, F->kv_a_norm, (size_t)cfg->kv_lora_rank * sizeof *L->kv_a_norm);
    return s;
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
        if (model_is_mla(cfg)) {
            s = shard_mla(cfg, sh, rank, F, L);
        } else { /* column-parallel: Q rows of this rank's heads, K and V rows of its KV heads */
            s = copy_block(&F->qkv, q0, qs, 0, &L->qkv, 0);
            if (!s) s = copy_block(&F->qkv, q_full + kv0, kvs, 0, &L->qkv, qs);
            if (!s) s = copy_block(&F->qkv, q_full + kv_full + kv0, kvs, 0, &L->qkv, qs + kvs);
            if (!s && F->qkv_bias) {
                memcpy(L->qkv_bias, F->qkv_bias + q0, (size_t)qs * sizeof *L->qkv_bias);
                memcpy(L->qkv_bias + qs, F->qkv_bias + q_full + kv0, (size_t)kvs * sizeof *L->qkv_bias);
                memcpy(L->qkv_bias + qs + kvs, F->qkv_bias + q_full + kv_full + kv0, (size_t)kvs * sizeof *L->qkv_bias);
            }
            /* row-parallel: o_proj's columns of its heads */
            if (!s) s = copy_block(&F->o, 0, d, q0, &L->o, 0);
        }
        if (!s && F->gate_up_bias) {
            memcpy(L->gate_up_bias, F->gate_up_bias + f0, (size_t)fs * sizeof *L->gate_up_bias);
            memcpy(L->gate_up_bias + fs, F->gate_up_bias + cfg->d_ff + f0, (size_t)fs * sizeof *L->gate_up_bias);
        }
        /* row-parallel: gate and up rows, down's columns of its d_ff slice; the o_proj and down
         * biases on rank 0 only, added once before the all-reduce */
        if (!s && model_layer_is_moe(cfg, l)) {
            s = shard_moe(cfg, sh, rank, F, L);
        } else {
            if (!s) s = copy_block(&F->gate_up, f0, fs, 0, &L->gate_up, 0);
            if (!s) s = copy_block(&F->gate_up, cfg->d_ff + f0, fs, 0, &L->gate_up, fs);
            if (!s) s = copy_block(&F->down, 0, d, f0, &L->down, 0);
        }
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
    st_slice sl = {cfg, 0, 0, 0, rank * sp->shard.d_ff_expert, rank * sp->shard.d_ff_shared, rank == 0};
    slice_of(cfg, sp, rank, &sl.q0, &sl.kv0, &sl.f0);
    return st_load_weights_slice(dir, &sp->shard, dtype, group, &sl, out);
}
