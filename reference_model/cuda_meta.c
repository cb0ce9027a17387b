/* Step metadata packing for the CUDA kernels (cuda_meta.h). */
#include "reference_model/cuda_meta.h"

#include <string.h>

#include "reference_model/config.h"
#include "reference_model/cuda_index.h"
#include "reference_model/cuda_moe_index.h"
#include "reference_model/kv_cache.h"

cuda_meta_layout cuda_meta_layout_of(int64_t S, int64_t T, int64_t table_cap) {
    cuda_meta_layout L;
    size_t o = 0;
    L.tok_off = o;
    o += (size_t)(S + 1) * 8;
    L.seq_pos = o;
    o += (size_t)S * 8;
    L.table_off = o;
    o += (size_t)S * 8;
    L.tpe = o;
    o += (size_t)S * 8;
    L.n_slots = o;
    o += (size_t)S * 8;
    L.kbase = o;
    o += (size_t)S * 8;
    L.vbase = o;
    o += (size_t)S * 8;
    L.tokens = o;
    o += ((size_t)T * 4 + 7) & ~(size_t)7;
    L.tables = o;
    o += (size_t)table_cap * 4;
    L.total = (o + 255) & ~(size_t)255;
    return L;
}

cuda_meta_view cuda_meta_view_of(void *block, const cuda_meta_layout *L) {
    char *b = block;
    cuda_meta_view v;
    v.tok_off = (int64_t *)(void *)(b + L->tok_off);
    v.seq_pos = (int64_t *)(void *)(b + L->seq_pos);
    v.table_off = (int64_t *)(void *)(b + L->table_off);
    v.tpe = (int64_t *)(void *)(b + L->tpe);
    v.n_slots = (int64_t *)(void *)(b + L->n_slots);
    v.kbase = (void **)(void *)(b + L->kbase);
    v.vbase = (void **)(void *)(b + L->vbase);
    v.tokens = (int32_t *)(void *)(b + L->tokens);
    v.tables = (int32_t *)(void *)(b + L->tables);
    return v;
}

xf_status cuda_meta_pack(cuda_meta_view *v, const step_batch *b, const struct kv_cache *kv, int64_t kv_slots,
                         const int64_t *sys_caps, int64_t max_seqs, int64_t max_tokens, int64_t max_seq_len,
                         int64_t table_cap, int64_t vocab) {
    if (b->n_seqs < 1 || b->n_seqs > max_seqs || b->n_tokens < 1 || b->n_tokens > max_tokens)
        return xf_errorf(XF_EINVAL, "cuda backend: a step of %lld tokens in %d sequences exceeds the sizes given at init (%lld, %lld)",
                         (long long)b->n_tokens, b->n_seqs, (long long)max_tokens, (long long)max_seqs);
    if (b->tok_off[0] != 0 || b->tok_off[b->n_seqs] != b->n_tokens)
        return xf_errorf(XF_EINVAL, "cuda backend: tok_off must run from 0 to n_tokens");
    int64_t used = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        const step_seq *q = &b->seqs[s];
        const int64_t need = q->pos + q->n_new;
        if (q->pos < 0 || q->n_new < 1 || need > max_seq_len)
            return xf_errorf(XF_EINVAL, "cuda backend: sequence %d at position %lld + %lld new tokens exceeds max_seq_len %lld", s,
                             (long long)q->pos, (long long)q->n_new, (long long)max_seq_len);
        if (b->tok_off[s + 1] - b->tok_off[s] != q->n_new)
            return xf_errorf(XF_EINVAL, "cuda backend: tok_off of sequence %d disagrees with its %lld new tokens", s, (long long)q->n_new);
        v->tok_off[s] = b->tok_off[s];
        v->seq_pos[s] = q->pos;
        v->table_off[s] = used;
        if (!sys_caps) {
            const int32_t *tab;
            int64_t ne, per;
            if (!kv || q->kv_seq < 0 || q->kv_seq > INT32_MAX)
                return xf_errorf(XF_EINVAL, "cuda backend: sequence %d has no KV manager id", s);
            xf_status st = kv_cache_block_table(kv, (int)q->kv_seq, &tab, &ne, &per);
            if (st) return st;
            if (per < 1 || ne < 0 || ne * per < need)
                return xf_errorf(XF_EINVAL, "cuda backend: the KV manager holds %lld positions for sequence %lld, the step needs %lld",
                                 (long long)(ne * per), (long long)q->kv_seq, (long long)need);
            if (ne > table_cap - used)
                return xf_errorf(XF_EOVERFLOW, "cuda backend: block tables of the step exceed %lld entries", (long long)table_cap);
            for (int64_t e = 0; e < ne; e++) {
                if (tab[e] < 0 || tab[e] > kv_slots - per)
                    return xf_errorf(XF_EINVAL, "cuda backend: block table entry %d of sequence %lld lies outside the %lld-slot pool",
                                     tab[e], (long long)q->kv_seq, (long long)kv_slots);
                v->tables[used + e] = tab[e];
            }
            used += ne;
            v->tpe[s] = per;
            v->n_slots[s] = kv_slots;
        } else {
            if (sys_caps[s] < need)
                return xf_errorf(XF_EINVAL, "cuda backend: sequence %d holds %lld positions, the step needs %lld", s,
                                 (long long)sys_caps[s], (long long)need);
            if (used >= table_cap) return xf_errorf(XF_EOVERFLOW, "cuda backend: block tables exceed their buffer");
            v->tables[used++] = 0;
            v->tpe[s] = sys_caps[s];
            v->n_slots[s] = sys_caps[s];
        }
    }
    v->tok_off[b->n_seqs] = b->n_tokens;
    for (int64_t t = 0; t < b->n_tokens; t++) {
        if (b->tokens[t] < 0 || b->tokens[t] >= vocab)
            return xf_errorf(XF_EINVAL, "cuda backend: token %d at row %lld is outside the vocabulary [0, %lld)", b->tokens[t],
                             (long long)t, (long long)vocab);
        v->tokens[t] = b->tokens[t];
    }
    return XF_OK;
}

const char *cuda_meta_unsupported(const model_config *cfg, xf_dtype wdtype, kv_alloc_mode mode) {
    if (!cfg) return NULL;
    /* Everything beyond the Llama-2 decoder that config_first_extension names, less what the GPU
     * runs now: a feature added to the config later is refused here until the GPU runs it. */
    model_config rest = *cfg;
    rest.kv_lora_rank = 0;          /* latent attention: cuda_mla.cu */
    rest.rope.kind = ROPE_DEFAULT;  /* every kind: config_rope_freqs' table */
    rest.qk_norm = 0;               /* k_head_norm */
    rest.sliding_window = 0;        /* k_attention's window */
    rest.n_experts = 0;             /* cuda_moe.cu */
    rest.o_bias = 0;                /* k_bias after o_proj */
    rest.mlp_bias = 0;              /* k_bias after gate_up and down */
    const char *ext = config_first_extension(&rest);
    if (ext) return ext;
    if (model_is_mla(cfg)) {
        if (cfg->mla_absorbed) return "the absorbed form of multi-head latent attention (mla_absorbed; the GPU runs the naive form)";
        if (mode != KV_ALLOC_POOL) return "--kv-alloc system with multi-head latent attention (kv_lora_rank)";
        if (cfg->qk_rope_head_dim > XF_MLA_MAX_ROPE || cfg->qk_rope_head_dim % 2)
            return "qk_rope_head_dim above 256 or odd (multi-head latent attention)";
    }
    if (cfg->n_experts > 0) {
        if (wdtype == XF_INT8) return "int8 experts (mixture of experts with --wdtype int8)";
        if (cfg->n_experts > XF_MOE_MAX_EXPERTS) return "more than 1024 experts (num_experts)";
        if (cfg->experts_per_tok > XF_MOE_MAX_TOPK) return "more than 64 experts per token (num_experts_per_tok)";
        if ((int)cfg->moe_score < 0 || cfg->moe_score >= MOE_SCORING_COUNT) return "this router scoring (moe scoring)";
    }
    return NULL;
}
