/* A rank's shard of the weights (reference_model/cpu_parallel.h): the rows and columns of
 * Megatron-LM's splits, the replicated KV heads, and what the split reference model refuses. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "reference_model/cpu_parallel.h"
#include "reference_model/safetensors.h"

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

/* Latent attention of rank r's shard S against the whole layer F: q_a (or q_proj's rows of its
 * heads), kv_a and both RMSNorms whole; q_b's and kv_b's rows of its heads; o_proj's v_head_dim
 * columns of them. */
static void check_mla_blocks(const model_config *cfg, const parallel_split *sp, int r, const layer_weights *F, const layer_weights *S) {
    const int64_t d = cfg->d_model, hs = sp->shard.n_heads, h0 = r * hs, qh = cfg->qk_nope_head_dim + cfg->qk_rope_head_dim,
                  kvh = cfg->qk_nope_head_dim + cfg->v_head_dim, lat = cfg->kv_lora_rank + cfg->qk_rope_head_dim,
                  qr = cfg->q_lora_rank, fq = qr > 0 ? qr : cfg->n_heads * qh, sq = qr > 0 ? qr : hs * qh, dv = cfg->v_head_dim;
    cr_assert_eq(S->qkv.rows, sq + lat);
    same_block(&S->qkv, 0, &F->qkv, qr > 0 ? 0 : h0 * qh, 0, sq, d); /* q_a whole, or q_proj's rows of its heads */
    same_block(&S->qkv, sq, &F->qkv, fq, 0, lat, d);                 /* kv_a whole: the latent replicated */
    if (qr > 0) {
        cr_assert_eq(S->q_b.rows, hs * qh);
        same_block(&S->q_b, 0, &F->q_b, h0 * qh, 0, hs * qh, qr);
        cr_assert_eq(memcmp(S->q_a_norm, F->q_a_norm, (size_t)qr * sizeof(float)), 0);
    }
    cr_assert_eq(S->kv_b.rows, hs * kvh);
    same_block(&S->kv_b, 0, &F->kv_b, h0 * kvh, 0, hs * kvh, cfg->kv_lora_rank);
    cr_assert_eq(memcmp(S->kv_a_norm, F->kv_a_norm, (size_t)cfg->kv_lora_rank * sizeof(float)), 0);
    cr_assert_eq(S->o.cols, hs * dv);
    same_block(&S->o, 0, &F->o, 0, h0 * dv, d, hs * dv);
}

/* Every rank's shard of `full` (fp32, the whole model) at dtype dt equals the block of `ref` (the
 * whole model at dt: int8 quantized whole) it should hold; biases sliced, o/down biases on rank 0. */
static void check_blocks(const model_config *cfg, const parallel_split *sp, int r, const model_weights *sh, const model_weights *ref) {
    const int64_t hd = cfg->head_dim, d = cfg->d_model, qf = cfg->n_heads * hd, kvf = cfg->n_kv_heads * hd;
    const int64_t qs = sp->shard.n_heads * hd, kvs = sp->shard.n_kv_heads * hd, fs = sp->shard.d_ff;
    cr_assert_eq(sh->cfg.n_heads, sp->shard.n_heads);
    cr_assert_eq(sh->dtype, ref->dtype);
    const int64_t kv0 = (r / sp->kv_copies) * kvs;
    for (int64_t l = 0; l < cfg->n_layers; l += cfg->n_layers - 1) { /* first and last layer */
        const layer_weights *F = &ref->layers[l], *S = &sh->layers[l];
        if (model_is_mla(cfg)) {
            check_mla_blocks(cfg, sp, r, F, S);
        } else {
            same_block(&S->qkv, 0, &F->qkv, r * qs, 0, qs, d);                 /* Q of its heads */
            same_block(&S->qkv, qs, &F->qkv, qf + kv0, 0, kvs, d);             /* K of its KV heads */
            same_block(&S->qkv, qs + kvs, &F->qkv, qf + kvf + kv0, 0, kvs, d); /* V */
            same_block(&S->o, 0, &F->o, 0, r * qs, d, qs);                     /* o_proj's columns */
        }
        if (model_layer_is_moe(cfg, l)) { /* router whole; every expert's FFN split as the dense one */
            same_block(&S->router, 0, &F->router, 0, 0, cfg->n_experts, d);
            const int64_t fe = sp->shard.d_ff_expert, fsh = sp->shard.d_ff_shared;
            for (int64_t e = 0; e < cfg->n_experts; e += cfg->n_experts - 1) {
                same_block(&S->exp_gate_up[e], 0, &F->exp_gate_up[e], r * fe, 0, fe, d);
                same_block(&S->exp_gate_up[e], fe, &F->exp_gate_up[e], cfg->d_ff_expert + r * fe, 0, fe, d);
                same_block(&S->exp_down[e], 0, &F->exp_down[e], 0, r * fe, d, fe);
            }
            if (fsh > 0) {
                same_block(&S->sh_gate_up, 0, &F->sh_gate_up, r * fsh, 0, fsh, d);
                same_block(&S->sh_gate_up, fsh, &F->sh_gate_up, cfg->d_ff_shared + r * fsh, 0, fsh, d);
                same_block(&S->sh_down, 0, &F->sh_down, 0, r * fsh, d, fsh);
            }
            if (F->sh_gate) cr_assert_eq(memcmp(S->sh_gate, F->sh_gate, (size_t)d * sizeof(float)), 0);
        } else {
            same_block(&S->gate_up, 0, &F->gate_up, r * fs, 0, fs, d);         /* gate rows */
            same_block(&S->gate_up, fs, &F->gate_up, cfg->d_ff + r * fs, 0, fs, d); /* up rows */
            same_block(&S->down, 0, &F->down, 0, r * fs, d, fs);               /* down's columns */
        }
        cr_assert_eq(memcmp(S->attn_norm, F->attn_norm, (size_t)d * sizeof(float)), 0);
        if (cfg->qkv_bias) {
            cr_assert_eq(memcmp(S->qkv_bias, F->qkv_bias + r * qs, (size_t)qs * sizeof(float)), 0);
            cr_assert_eq(memcmp(S->qkv_bias + qs, F->qkv_bias + qf + kv0, (size_t)kvs * sizeof(float)), 0);
            cr_assert_eq(memcmp(S->qkv_bias + qs + kvs, F->qkv_bias + qf + kvf + kv0, (size_t)kvs * sizeof(float)), 0);
        }
        if (cfg->mlp_bias) {
            cr_assert_eq(memcmp(S->gate_up_bias, F->gate_up_bias + r * fs, (size_t)fs * sizeof(float)), 0);
            cr_assert_eq(memcmp(S->gate_up_bias + fs, F->gate_up_bias + cfg->d_ff + r * fs, (size_t)fs * sizeof(float)), 0);
        }
        /* the row-parallel biases once: rank 0 holds them whole, the others none */
        const float *rb[2][2] = {{S->o_bias, F->o_bias}, {S->down_bias, F->down_bias}};
        for (int k = 0; k < 2; k++) {
            if (!rb[k][1] || r > 0) {
                cr_assert_null(rb[k][0], "rank %d holds a row-parallel bias", r);
                continue;
            }
            cr_assert_not_null(rb[k][0]);
            cr_assert_eq(memcmp(rb[k][0], rb[k][1], (size_t)d * sizeof(float)), 0);
        }
    }
    for (int64_t v = 0; v < cfg->vocab; v += v + 61 < cfg->vocab ? 61 : (v + 1 < cfg->vocab ? cfg->vocab - 1 - v : 1)) {
        same_block(&sh->embed, v, &ref->embed, v, 0, 1, d); /* whole on every rank: every 61st row and the last */
        same_block(&sh->lm_head, v, &ref->lm_head, v, 0, 1, d);
    }
}

static void check_shards_group(const model_config *cfg, int tp, xf_dtype dt, int group) {
    model_weights *full = NULL, *ref = NULL;
    cr_assert_eq(weights_init_random(&full, cfg, 7, XF_FP32, 0), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(weights_init_random(&ref, cfg, 7, dt, group), XF_OK, "%s", xf_error_msg());
    parallel_split sp = split_of(cfg, tp);
    for (int r = 0; r < tp; r++) {
        model_weights *sh = NULL;
        cr_assert_eq(cpu_parallel_shard(full, &sp, r, dt, group, &sh), XF_OK, "%s", xf_error_msg());
        check_blocks(cfg, &sp, r, sh, ref);
        weights_free(sh);
    }
    weights_free(full);
    weights_free(ref);
}

static void check_shards(const model_config *cfg, int tp, xf_dtype dt) { check_shards_group(cfg, tp, dt, 0); }

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

/* int8: each shard quantizes its block; with groups inside one rank's columns its values and
 * scales are the whole model's (stories15m: o_proj 288 columns -> 2 x 144, down 768 -> 2 x 384). */
Test(cpu_parallel, int8_shards_quantize_their_blocks) {
    model_config c = preset("stories15m");
    check_shards_group(&c, 2, XF_INT8, 48);
    check_shards_group(&c, 3, XF_INT8, 32); /* 96 and 256 columns a rank */
}

/* MoE split by columns (qwen3-30b-a3b, shrunk): every expert's gate/up rows and down columns, the
 * router whole; int8 with a group inside every rank's expert columns. */
Test(cpu_parallel, moe_experts_split_by_columns) {
    model_config c = preset("qwen3-30b-a3b");
    c.n_layers = 2;
    c.d_model = 256;
    c.n_heads = 8;
    c.n_kv_heads = 4;
    c.d_ff = 256;
    c.d_ff_expert = 64;
    c.n_experts = 4;
    c.experts_per_tok = 2;
    c.vocab = 512;
    parallel_split sp = split_of(&c, 2);
    cr_assert(sp.experts_tp);
    cr_assert_eq(sp.shard.d_ff_expert, c.d_ff_expert / 2);
    cr_assert_eq(sp.experts_per_device, 0);
    check_shards(&c, 2, XF_FP32);
    check_shards_group(&c, 2, XF_INT8, 32);
}

/* Biases: q/k/v and gate/up sliced with their rows, o_proj and down added once (rank 0). */
Test(cpu_parallel, biases) {
    model_config c = preset("stories15m");
    c.qkv_bias = c.o_bias = c.mlp_bias = 1;
    check_shards(&c, 2, XF_FP32);
    check_shards(&c, 3, XF_BF16);
}

/* From a weights folder: each rank reads only its blocks, equal to the whole load's. */
Test(cpu_parallel, folder_shards_equal_the_whole_load) {
    static const char *const dirs[] = {"llama-mlp-bias", "llama-attn-bias", "qwen3-bias", "mixtral", "qwen2-moe", "qwen3-moe",
                                       "deepseek-mla", "deepseek-moe-yarn"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, XF_SOURCE_DIR "/tests/data/hf/%s", dirs[i]);
        model_config c;
        cr_assert_eq(config_resolve(dir, &c), XF_OK, "%s", xf_error_msg());
        model_weights *ref = NULL;
        cr_assert_eq(st_load_weights(dir, &c, XF_FP32, 0, &ref), XF_OK, "%s", xf_error_msg());
        parallel_split sp = split_of(&c, 2);
        for (int r = 0; r < 2; r++) {
            model_weights *sh = NULL;
            cr_assert_eq(cpu_parallel_load(dir, &c, &sp, r, XF_FP32, 0, &sh), XF_OK, "%s: %s", dirs[i], xf_error_msg());
            check_blocks(&c, &sp, r, sh, ref);
            weights_free(sh);
        }
        weights_free(ref);
    }
}

Test(cpu_parallel, refusals) {
    model_config c = preset("stories15m");
    parallel_split sp = split_of(&c, 2);
    model_weights *full = NULL, *sh = NULL;
    cr_assert_eq(weights_init_random(&full, &c, 1, XF_FP32, 0), XF_OK, "%s", xf_error_msg());
    /* a group of 128 straddles o_proj's split: 288 columns -> 2 x 144 */
    cr_assert_eq(cpu_parallel_shard(full, &sp, 0, XF_INT8, 128, &sh), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "o_proj's 288 input columns split into 2 x 144, and 144 is not a multiple of 128") != NULL, "%s",
              xf_error_msg());
    cr_assert(strstr(xf_error_msg(), "--group 48") != NULL, "%s", xf_error_msg());
    cr_assert_null(sh);
    cr_assert_eq(cpu_parallel_shard(full, &sp, 0, XF_INT8, 0, &sh), XF_EINVAL); /* 0: the default group, 128 */
    cr_assert(strstr(xf_error_msg(), "int8 --group 128") != NULL, "%s", xf_error_msg());
    cr_assert_eq(cpu_parallel_shard(full, &sp, 0, XF_INT8, 96, &sh), XF_EINVAL); /* o_proj fits (144 = 1.5 x 96: no), */
    cr_assert(strstr(xf_error_msg(), "o_proj") != NULL, "%s", xf_error_msg());
    cr_assert_eq(cpu_parallel_shard(full, &sp, 0, XF_INT8, 144, &sh), XF_EINVAL); /* o_proj fits, down's 384 does not */
    cr_assert(strstr(xf_error_msg(), "down's 768 input columns split into 2 x 384, and 384 is not a multiple of 144") != NULL, "%s",
              xf_error_msg());
    weights_free(full);
    cr_assert_eq(weights_init_random(&full, &c, 1, XF_INT8, 48), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(cpu_parallel_shard(full, &sp, 0, XF_INT8, 48, &sh), XF_EINVAL); /* the whole model already quantized */
    weights_free(full);
    model_weights fake;
    memset(&fake, 0, sizeof fake);
    fake.cfg = c;
    fake.dtype = XF_FP32;
    parallel_split ep = sp;
    ep.experts_tp = 0; /* expert parallel: predict's split, not the reference model's */
    fake.cfg.n_experts = 8;
    cr_assert_eq(cpu_parallel_check(&fake.cfg, &ep, XF_FP32, 0), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "not expert parallel") != NULL, "%s", xf_error_msg());
    fake.cfg.n_experts = 0;
    cr_assert_eq(cpu_parallel_shard(&fake, &sp, 2, XF_FP32, 0, &sh), XF_EINVAL); /* rank beyond tp */
    parallel_split vp = sp;
    vp.shard.vocab = 16000; /* a vocabulary-parallel split: the reference model keeps it whole */
    cr_assert_eq(cpu_parallel_shard(&fake, &vp, 0, XF_FP32, 0, &sh), XF_EINVAL);
}

/* A small DeepSeek-V3 (latent attention, its MoE layers after a dense one): q_a, kv_a and their
 * norms whole on every rank, q_b / kv_b / o_proj by heads, experts by columns; with a q rank and
 * without (q_proj split by heads); fp32, bf16, and int8 with a group inside a rank's o_proj and
 * down columns. */
static model_config small_deepseek(void) {
    model_config c = preset("deepseek-v3");
    c.n_layers = 2;
    memset(c.dense_layers, 0, sizeof c.dense_layers);
    c.dense_layers[0] = 1; /* layer 0 dense, layer 1 MoE */
    c.d_model = 128;
    c.n_heads = c.n_kv_heads = 4;
    c.d_ff = 128;
    c.d_ff_expert = 32;
    c.n_experts = 8;
    c.experts_per_tok = 2;
    c.n_group = 2;
    c.topk_group = 1;
    c.d_ff_shared = 32;
    c.q_lora_rank = 48;
    c.kv_lora_rank = 32;
    c.qk_nope_head_dim = 16;
    c.qk_rope_head_dim = c.head_dim = 8;
    c.v_head_dim = 24;
    c.vocab = 256;
    c.max_ctx = 64;
    return c;
}

Test(cpu_parallel, mla_split_by_heads) {
    model_config c = small_deepseek();
    cr_assert_eq(config_validate(&c), XF_OK, "%s", xf_error_msg());
    parallel_split sp = split_of(&c, 2);
    cr_assert_eq(sp.shard.n_heads, 2);
    cr_assert_eq(sp.shard.kv_lora_rank, c.kv_lora_rank); /* the latent whole: replicated */
    check_shards(&c, 2, XF_FP32);
    check_shards(&c, 4, XF_BF16);
    check_shards_group(&c, 2, XF_INT8, 16); /* o_proj 96 -> 2 x 48, down 128 -> 2 x 64, experts' 32 -> 2 x 16 */
    c.q_lora_rank = 0;                      /* q_proj, split by heads */
    check_shards(&c, 2, XF_FP32);
    model_weights *full = NULL, *sh = NULL;
    c.q_lora_rank = 48;
    cr_assert_eq(weights_init_random(&full, &c, 3, XF_FP32, 0), XF_OK, "%s", xf_error_msg());
    /* o_proj's columns are v_head_dim a head: 4 x 24 = 96 -> 2 x 48, and 48 is not a multiple of 32 */
    cr_assert_eq(cpu_parallel_shard(full, &sp, 0, XF_INT8, 32, &sh), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "o_proj's 96 input columns split into 2 x 48, and 48 is not a multiple of 32") != NULL, "%s",
              xf_error_msg());
    cr_assert_null(sh);
    weights_free(full);
}
