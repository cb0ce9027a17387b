/* A rank's shard of the weights (reference_model/cpu_parallel.h): the rows and columns of
 * Megatron-LM's splits, the replicated KV heads, and what the split reference model refuses. */
#include <criterion/criterion.h>
#include <string.h>

#include "reference_model/cpu_parallel.h"

static model_config preset(const char *name) {
    model_config c;
    cr_assert_eq(config_preset(name, &c), XF_OK, "%s", xf_error_msg());
    return c;
}

static parallel_split split_of(const model_config *c, int tp) {
    device_spec d;
    memset(&d, 0, sizeof d);
    d.link.bandwidth_Bps = 1e9;
    parallel_plan p = {tp, 1, 1, 0, 1};
    parallel_split sp;
    cr_assert_eq(parallel_split_of(c, &p, &d, &sp), XF_OK, "%s", xf_error_msg());
    return sp;
}

/* shard element (r, c) of m equals full element (r0 + r, c0 + c) for every r < rows, c < cols */
static void same_block(const wmat *shard, int64_t sr0, const wmat *full, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            cr_assert_eq(weights_get(shard, sr0 + r, c), weights_get(full, r0 + r, c0 + c), "(%lld, %lld)", (long long)r, (long long)c);
}

static void check_shards(const model_config *cfg, int tp, xf_dtype dt) {
    model_weights *full = NULL;
    cr_assert_eq(weights_init_random(&full, cfg, 7, dt, 0), XF_OK, "%s", xf_error_msg());
    parallel_split sp = split_of(cfg, tp);
    const int64_t hd = cfg->head_dim, d = cfg->d_model, qf = cfg->n_heads * hd, kvf = cfg->n_kv_heads * hd;
    const int64_t qs = sp.shard.n_heads * hd, kvs = sp.shard.n_kv_heads * hd, fs = sp.shard.d_ff;
    for (int r = 0; r < tp; r++) {
        model_weights *sh = NULL;
        cr_assert_eq(cpu_parallel_shard(full, &sp, r, &sh), XF_OK, "%s", xf_error_msg());
        cr_assert_eq(sh->cfg.n_heads, sp.shard.n_heads);
        const int64_t kv0 = (r / sp.kv_copies) * kvs;
        for (int64_t l = 0; l < cfg->n_layers; l += cfg->n_layers - 1) { /* first and last layer */
            const layer_weights *F = &full->layers[l], *S = &sh->layers[l];
            same_block(&S->qkv, 0, &F->qkv, r * qs, 0, qs, d);                 /* Q of its heads */
            same_block(&S->qkv, qs, &F->qkv, qf + kv0, 0, kvs, d);             /* K of its KV heads */
            same_block(&S->qkv, qs + kvs, &F->qkv, qf + kvf + kv0, 0, kvs, d); /* V */
            same_block(&S->o, 0, &F->o, 0, r * qs, d, qs);                     /* o_proj's columns */
            same_block(&S->gate_up, 0, &F->gate_up, r * fs, 0, fs, d);         /* gate rows */
            same_block(&S->gate_up, fs, &F->gate_up, cfg->d_ff + r * fs, 0, fs, d); /* up rows */
            same_block(&S->down, 0, &F->down, 0, r * fs, d, fs);               /* down's columns */
            cr_assert_eq(memcmp(S->attn_norm, F->attn_norm, (size_t)d * sizeof(float)), 0);
        }
        same_block(&sh->embed, 0, &full->embed, 0, 0, cfg->vocab, d);
        same_block(&sh->lm_head, 0, &full->lm_head, 0, 0, cfg->vocab, d);
        weights_free(sh);
    }
    weights_free(full);
}

Test(cpu_parallel, megatron_slices) {
    model_config c = preset("stories15m"); /* 6 heads, 6 KV heads, d_ff 768 */
    check_shards(&c, 2, XF_FP32);
    check_shards(&c, 3, XF_BF16);
}

/* Fewer KV heads than ranks: rank r holds KV head r / (tp / n_kv_heads). */
Test(cpu_parallel, replicated_kv_heads) {
    model_config c = preset("stories15m");
    c.n_kv_heads = 2;
    parallel_split sp = split_of(&c, 6);
    cr_assert_eq(sp.kv_copies, 3);
    cr_assert_eq(sp.shard.n_kv_heads, 1);
    check_shards(&c, 6, XF_FP32);
}

Test(cpu_parallel, refusals) {
    model_config c = preset("stories15m");
    parallel_split sp = split_of(&c, 2);
    model_weights *full = NULL, *sh = NULL;
    cr_assert_eq(weights_init_random(&full, &c, 1, XF_INT8, 32), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(cpu_parallel_shard(full, &sp, 0, &sh), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "int8") != NULL, "%s", xf_error_msg());
    cr_assert_null(sh);
    weights_free(full);
    model_weights fake;
    memset(&fake, 0, sizeof fake);
    fake.cfg = c;
    fake.dtype = XF_FP32;
    fake.cfg.o_bias = 1;
    cr_assert_eq(cpu_parallel_shard(&fake, &sp, 0, &sh), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "bias") != NULL, "%s", xf_error_msg());
    fake.cfg.o_bias = 0;
    fake.cfg.n_experts = 8;
    cr_assert_eq(cpu_parallel_shard(&fake, &sp, 0, &sh), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "mixture of experts") != NULL, "%s", xf_error_msg());
    fake.cfg.n_experts = 0;
    cr_assert_eq(cpu_parallel_shard(&fake, &sp, 2, &sh), XF_EINVAL); /* rank beyond tp */
    parallel_split vp = sp;
    vp.shard.vocab = 16000; /* a vocabulary-parallel split: the reference model keeps it whole */
    cr_assert_eq(cpu_parallel_shard(&fake, &vp, 0, &sh), XF_EINVAL);
}
