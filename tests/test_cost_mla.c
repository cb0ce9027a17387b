/* The cost model of multi-head latent attention (both forms) and DeepSeek's MoE layers against
 * hand-computed FLOPs and bytes (arithmetic in the comments). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/workload.h"
#include "reference_model/config.h"
#include "reference_model/cost_model.h"

#define EXACT(actual, expected)                                                                                 \
    cr_assert((double)(actual) == (double)(expected), "%s = %.17g, expected %.17g", #actual, (double)(actual), \
              (double)(expected))

/* A small MLA model: d 64, 4 heads, q rank 16, kv rank 32, qk_nope 16, qk_rope 8 (= head_dim), v
 * 16, 2 dense layers of d_ff 128, vocab 512. qh = 24, the latent row r + dr = 40. */
static model_config mla(void) {
    model_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "mla-small");
    snprintf(c.arch, sizeof c.arch, "deepseek_v3");
    c.n_layers = 2, c.d_model = 64, c.n_heads = 4, c.n_kv_heads = 4, c.head_dim = 8, c.d_ff = 128, c.vocab = 512;
    c.max_ctx = 256, c.rope_theta = 10000, c.norm_eps = 1e-6;
    c.q_lora_rank = 16, c.kv_lora_rank = 32, c.qk_nope_head_dim = 16, c.qk_rope_head_dim = 8, c.v_head_dim = 16;
    c.rope_interleave = 1;
    cr_assert_eq(config_validate(&c), XF_OK, "%s", xf_error_msg());
    return c;
}

static workload fp32(void) {
    workload w = {1, 16, 4, XF_FP32, XF_FP32, XF_FP32, 0};
    return w;
}

static cost_op *step(const model_config *c, const workload *w, step_shape s) {
    int64_t n = cost_step_op_count(c);
    cost_op *ops = calloc((size_t)n, sizeof *ops);
    cr_assert_not_null(ops);
    cr_assert_eq(cost_step(c, w, s, ops, n), XF_OK, "cost_step: %s", xf_error_msg());
    return ops;
}

/* layer 0's op of kind k */
static const cost_op *op0(const cost_op *ops, op_kind k) { return &ops[1 + (k - OP_ATTN_NORM)]; }

Test(cost_mla, kv_bytes_per_token_is_the_latent) {
    model_config c;
    cr_assert_eq(config_preset("deepseek-v3", &c), XF_OK);
    /* 61 layers x (512 + 64) x 2 B = 70,272 B in bf16, against 2 x 61 x 128 x (192 + 128) / 2 x 2 B
     * for K and V of every head: 54.6 times less */
    EXACT(cost_kv_bytes_per_token(&c, XF_BF16, 0), 70272);
    /* int8: one fp16 scale per 128 elements of the 576-element row: ceil(576 / 128) = 5 */
    EXACT(cost_kv_bytes_per_token(&c, XF_INT8, 128), 61.0 * (576 + 5 * 2));
    model_config s = mla();
    EXACT(cost_kv_bytes_per_token(&s, XF_FP32, 0), 2 * 40 * 4);
    /* the memory of a request: batch 3 x (16 + 4) tokens of it */
    workload w = fp32();
    w.batch = 3;
    cost_memory m;
    cost_memory_of(&s, &w, &m);
    EXACT(m.kv_bytes_per_token, 320);
    EXACT(m.kv_bytes, 3.0 * 20 * 320);
}

/* One decode step at context 10 (N = 1 row, P = 10 pairs, C = 10 cached tokens), fp32. */
Test(cost_mla, decode_step_by_hand_both_forms) {
    model_config c = mla();
    workload w = fp32();
    step_shape s = {XF_DECODE, 1, 1, 10};
    cost_op *nv = step(&c, &w, s);
    /* qkv: q_a 2*64*16 = 2048, its norm 4*16 = 64, q_b 2*16*(4*24) = 3072, kv_a 2*64*40 = 5120,
     * the latent's norm 4*32 = 128: 10,432 */
    EXACT(op0(nv, OP_QKV)->flops, 10432);
    /* weights: 64*16 + 16 + 16*96 + 64*40 + 32 = 5,168 floats */
    EXACT(op0(nv, OP_QKV)->weight_bytes, 5168 * 4);
    /* out: Q (96) and the latent row (40) */
    EXACT(op0(nv, OP_QKV)->act_out_bytes, (96 + 40) * 4);
    /* rope: 4 Q heads and the shared k_rope, 8 dims each: 3 * 5 * 8 = 120 */
    EXACT(op0(nv, OP_ROPE)->flops, 120);
    EXACT(op0(nv, OP_KV_APPEND)->kv_write_bytes, 40 * 4);
    /* naive attention: kv_b decompresses 10 cached latents: 2*10*32*4*(16+16) = 81,920; scores and
     * values 10 pairs * 4 heads * (2*24 + 2*16 + 5) = 3,400 */
    EXACT(op0(nv, OP_ATTENTION)->flops, 81920 + 3400);
    EXACT(op0(nv, OP_ATTENTION)->weight_bytes, 32 * 4 * 32 * 4);  /* kv_b (4 * 32, 32) */
    EXACT(op0(nv, OP_ATTENTION)->kv_read_bytes, 10 * 40 * 4);      /* the cache, once */
    /* K_nope and V materialized: 10 tokens x 4 heads x 32, written and read back */
    EXACT(op0(nv, OP_ATTENTION)->act_out_bytes, (10 * 4 * 32 + 4 * 16) * 4);
    EXACT(op0(nv, OP_O_PROJ)->flops, 2 * 4 * 16 * 64);

    c.mla_absorbed = 1;
    cost_op *ab = step(&c, &w, s);
    /* absorbed: q_nope times W_UK, 2 * 4 * 16 * 32 = 4,096 more in qkv; Q leaves as 4 x 40 */
    EXACT(op0(ab, OP_QKV)->flops, 10432 + 4096);
    EXACT(op0(ab, OP_QKV)->act_out_bytes, (4 * 40 + 40) * 4);
    /* attention in the latent space: 10 * 4 * (2*40 + 2*32 + 5) = 5,960, no weights */
    EXACT(op0(ab, OP_ATTENTION)->flops, 5960);
    EXACT(op0(ab, OP_ATTENTION)->weight_bytes, 0);
    EXACT(op0(ab, OP_ATTENTION)->kv_read_bytes, 10 * 40 * 4);
    /* o_proj: W_UV 2*4*32*16 = 4,096 then 2*64*64 = 8,192 */
    EXACT(op0(ab, OP_O_PROJ)->flops, 4096 + 8192);
    /* kv_b is read once per layer in either form: in attention (naive) or split over qkv and o_proj */
    double wn = 0, wa = 0;
    for (int64_t i = 0; i < cost_step_op_count(&c); i++) wn += nv[i].weight_bytes, wa += ab[i].weight_bytes;
    EXACT(wn, wa);
    /* and both equal the weights in memory (lm_head and the whole embedding table aside) */
    free(nv);
    free(ab);
}

Test(cost_mla, weights_match_param_count_in_both_forms) {
    model_config c;
    cr_assert_eq(config_preset("deepseek-v3", &c), XF_OK);
    workload w = {1, 128, 16, XF_BF16, XF_BF16, XF_BF16, 0};
    EXACT(cost_weight_bytes(&c, &w), 2.0 * 671026404352.0);
    c.mla_absorbed = 1;
    EXACT(cost_weight_bytes(&c, &w), 2.0 * 671026404352.0);
    model_config s = mla();
    EXACT(cost_weight_bytes(&s, &w), 2.0 * (double)config_param_count(&s));
    s.q_lora_rank = 0;
    EXACT(cost_weight_bytes(&s, &w), 2.0 * (double)config_param_count(&s));
}

/* DeepSeek-V3's MoE layers: the shared expert joins the routed ones on every token. */
Test(cost_mla, shared_experts_and_routed) {
    model_config c;
    cr_assert_eq(config_preset("deepseek-v3", &c), XF_OK);
    workload w = {1, 128, 16, XF_BF16, XF_BF16, XF_BF16, 0};
    step_shape s = {XF_DECODE, 1, 1, 129};
    cost_op *ops = step(&c, &w, s);
    const cost_op *dense = &ops[1 + 12 * 0 + (OP_GATE_UP - OP_ATTN_NORM)], *moe = &ops[1 + 12 * 3 + (OP_GATE_UP - OP_ATTN_NORM)];
    /* layer 0 dense: 2 * 7168 * 2 * 18432 */
    EXACT(dense->flops, 2.0 * 7168 * 2 * 18432);
    /* layer 3: router 2*7168*256 + 5*256, 8 experts 2*8*7168*2*2048, the shared one 2*7168*2*2048 */
    EXACT(moe->flops, 2.0 * 7168 * 256 + 5.0 * 256 + 2.0 * 8 * 7168 * 2 * 2048 + 2.0 * 7168 * 2 * 2048);
    /* weights: router, the 8 experts one token picks, the shared one (bf16) */
    EXACT(moe->weight_bytes, 2.0 * (7168.0 * 256 + 8 * 2.0 * 7168 * 2048 + 2.0 * 7168 * 2048));
    /* decode at context 129: the absorbed form does far fewer attention FLOPs than decompressing */
    const double naive = ops[1 + (OP_ATTENTION - OP_ATTN_NORM)].flops;
    c.mla_absorbed = 1;
    cost_op *ab = step(&c, &w, s);
    const double absorbed = ab[1 + (OP_ATTENTION - OP_ATTN_NORM)].flops;
    /* naive: 2*129*512*128*256 + 129*128*(2*192 + 2*128 + 5); absorbed: 129*128*(2*576 + 2*512 + 5) */
    EXACT(naive, 2.0 * 129 * 512 * 128 * 256 + 129.0 * 128 * (384 + 256 + 5));
    EXACT(absorbed, 129.0 * 128 * (1152 + 1024 + 5));
    free(ops);
    free(ab);
}
