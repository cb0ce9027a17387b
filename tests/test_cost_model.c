/* The cost model against hand-computed FLOPs and bytes (arithmetic in the comments). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/roofline.h"
#include "core/device.h"
#include "reference_model/config.h"
#include "reference_model/cost_model.h"
#include "core/workload.h"

#define EXACT(actual, expected)                                                                                 \
    cr_assert((double)(actual) == (double)(expected), "%s = %.17g, expected %.17g", #actual, (double)(actual), \
              (double)(expected))
#define NEAR(actual, expected, rel)                                                                      \
    cr_assert(fabs((double)(actual) - (double)(expected)) <= (rel) * fabs((double)(expected)),          \
              "%s = %.17g, expected %.17g within %g", #actual, (double)(actual), (double)(expected), (rel))

static model_config preset(const char *name) {
    model_config c;
    xf_status s = config_preset(name, &c);
    cr_assert_eq(s, XF_OK, "preset %s: %s", name, xf_error_msg());
    return c;
}

static workload wl(int64_t batch, int64_t prompt, int64_t gen, xf_dtype w, xf_dtype a, xf_dtype kv) {
    workload x = {batch, prompt, gen, w, a, kv, 0};
    return x;
}

/* Index of a per-layer op, or of an op outside the layers (layer -1), in cost_step's order. */
static int64_t op_index(const model_config *c, int layer, op_kind k) {
    if (k == OP_EMBEDDING) return 0;
    if (op_kind_is_per_layer(k)) return 1 + 12 * (int64_t)layer + (k - OP_ATTN_NORM);
    return 1 + 12 * c->n_layers + (k - OP_FINAL_NORM);
}

/* Runs cost_step into a fresh array; caller frees. */
static cost_op *step(const model_config *c, const workload *w, step_shape s) {
    int64_t n = cost_step_op_count(c);
    cost_op *ops = calloc((size_t)n, sizeof *ops);
    cr_assert_not_null(ops);
    xf_status st = cost_step(c, w, s, ops, n);
    cr_assert_eq(st, XF_OK, "cost_step: %s", xf_error_msg());
    return ops;
}

static device_spec device(const char *name) {
    device_spec d;
    xf_status s = device_lookup(name, NULL, &d);
    cr_assert_eq(s, XF_OK, "device %s (XFPROF_DATA_DIR=%s): %s", name,
                 getenv("XFPROF_DATA_DIR") ? getenv("XFPROF_DATA_DIR") : "unset", xf_error_msg());
    return d;
}

/* A tiny config small enough to cost by hand: 1 layer, d 8, 2 query heads, 1 KV head of dim 4,
 * d_ff 16, vocab 10, qkv bias on. q_dim = 8, kv_dim = 4, q_dim + 2 kv_dim = 16. */
static model_config tiny(void) {
    model_config c;
    memset(&c, 0, sizeof c);
    strcpy(c.name, "tiny");
    strcpy(c.arch, "qwen2");
    c.n_layers = 1;
    c.d_model = 8;
    c.n_heads = 2;
    c.n_kv_heads = 1;
    c.head_dim = 4;
    c.d_ff = 16;
    c.vocab = 10;
    c.max_ctx = 64;
    c.rope_theta = 10000.0;
    c.norm_eps = 1e-5;
    c.tied_embeddings = 0;
    c.qkv_bias = 1;
    return c;
}

Test(cost_model, op_names_round_trip) {
    for (int k = 0; k < OP_KIND_COUNT; k++) {
        op_kind back;
        cr_assert_eq(op_kind_parse(op_kind_name((op_kind)k), &back), XF_OK);
        cr_assert_eq(back, (op_kind)k);
    }
    cr_assert_str_eq(op_kind_name(OP_QKV), "qkv");
    cr_assert_str_eq(op_kind_name(OP_LM_HEAD), "lm_head");
    cr_assert_str_eq(op_kind_name(OP_KIND_COUNT), "?");
    op_kind k;
    cr_assert_eq(op_kind_parse("matmul", &k), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "matmul") != NULL);
    cr_assert_eq(op_kind_parse(NULL, &k), XF_EINVAL);
    /* 12 ops inside each layer, 5 GEMMs. */
    int per_layer = 0, gemms = 0;
    for (int i = 0; i < OP_KIND_COUNT; i++) {
        per_layer += op_kind_is_per_layer((op_kind)i);
        gemms += op_kind_is_gemm((op_kind)i);
    }
    cr_assert_eq(per_layer, 12);
    cr_assert_eq(gemms, 5);
    model_config c = preset("llama-2-7b");
    cr_assert_eq(cost_step_op_count(&c), 4 + 12 * 32);
}

Test(cost_model, kv_bytes_per_token) {
    /* DESIGN.md: LLaMA-2-7B fp16 2*32*32*128*2 = 524,288 B. */
    model_config c7 = preset("llama-2-7b");
    EXACT(cost_kv_bytes_per_token(&c7, XF_FP16, 0), 524288);
    /* GQA: LLaMA-2-70B fp16 2*80*8*128*2 = 327,680; LLaMA-3-8B bf16 2*32*8*128*2 = 131,072. */
    model_config c70 = preset("llama-2-70b");
    EXACT(cost_kv_bytes_per_token(&c70, XF_FP16, 0), 327680);
    model_config c3 = preset("llama-3-8b");
    EXACT(cost_kv_bytes_per_token(&c3, XF_BF16, 0), 131072);
    /* OPT-13B-shaped MHA (40 layers, 40 heads of 128): 2*40*40*128*2 = 819,200. */
    model_config opt = c7;
    opt.n_layers = 40;
    opt.n_heads = opt.n_kv_heads = 40;
    opt.d_model = 5120;
    EXACT(cost_kv_bytes_per_token(&opt, XF_FP16, 0), 819200);
    /* Quantized KV: one fp16 scale per head vector of 128 (group 128). 2*32*32 = 2048 vectors;
     * int8: 2048 * (128 + 2) = 266,240; int4: 2048 * (64 + 2) = 135,168;
     * int8 group 64: 2048 * (128 + 2*2) = 270,336. */
    EXACT(cost_kv_bytes_per_token(&c7, XF_INT8, 0), 266240);
    EXACT(cost_kv_bytes_per_token(&c7, XF_INT4, 128), 135168);
    EXACT(cost_kv_bytes_per_token(&c7, XF_INT8, 64), 270336);
    /* The same figure through the config helper: elements 2*32*32*128 = 262,144, times 2 B. */
    EXACT(config_kv_elems_per_token(&c7) * 2, cost_kv_bytes_per_token(&c7, XF_FP16, 0));
    /* Memory: batch 4 * (512 + 128) tokens * 524,288 = 1,342,177,280 B. */
    workload w = wl(4, 512, 128, XF_FP16, XF_FP16, XF_FP16);
    cost_memory m;
    cost_memory_of(&c7, &w, &m);
    EXACT(m.kv_bytes_per_token, 524288);
    EXACT(m.kv_bytes, 1342177280.0);
}

Test(cost_model, decode_gemm_intensity_is_about_batch) {
    /* LLaMA-2-7B bf16, decode batch 8 at context 576. qkv: N = 8 rows, out 3*4096 = 12288.
     * F = 2*8*4096*12288 = 805,306,368. Weights 4096*12288*2 = 100,663,296; in 8*4096*2 = 65,536;
     * out 8*12288*2 = 196,608; Q = 100,925,440. I = 7.979: within 1% of the batch. */
    model_config c = preset("llama-2-7b");
    workload w = wl(8, 512, 128, XF_BF16, XF_BF16, XF_BF16);
    cost_op *ops = step(&c, &w, workload_decode_step(&w, 576));
    const cost_op *qkv = &ops[op_index(&c, 0, OP_QKV)];
    cr_assert_eq(qkv->kind, OP_QKV);
    cr_assert_eq(qkv->phase, XF_DECODE);
    cr_assert_eq(qkv->compute, XF_COMPUTE_TENSOR16);
    EXACT(qkv->flops, 805306368.0);
    EXACT(qkv->weight_bytes, 100663296.0);
    EXACT(qkv->act_in_bytes, 65536.0);
    EXACT(qkv->act_out_bytes, 196608.0);
    EXACT(qkv->bytes, 100925440.0);
    NEAR(qkv->flops / qkv->bytes, 8.0, 0.01);
    /* Every per-layer GEMM and lm_head: 2*b*n*k / (2*n*k + activations) ≈ b within 1%. */
    const op_kind gemms[] = {OP_QKV, OP_O_PROJ, OP_GATE_UP, OP_DOWN};
    for (int l = 0; l < 32; l += 31)
        for (size_t i = 0; i < sizeof gemms / sizeof gemms[0]; i++) {
            const cost_op *o = &ops[op_index(&c, l, gemms[i])];
            cr_assert_eq(o->kind, gemms[i]);
            cr_assert_eq(o->layer, l);
            NEAR(o->flops / o->bytes, 8.0, 0.01);
        }
    /* lm_head: F = 2*8*4096*32000; weights 32000*4096*2; logits fp32 8*32000*4 add a little
     * more traffic: I = 2,097,152,000 / (262,144,000 + 65,536 + 1,024,000) = 7.97. */
    const cost_op *lm = &ops[op_index(&c, -1, OP_LM_HEAD)];
    EXACT(lm->flops, 2097152000.0);
    EXACT(lm->bytes, 262144000.0 + 65536.0 + 1024000.0);
    NEAR(lm->flops / lm->bytes, 8.0, 0.01);
    free(ops);
}

Test(cost_model, attention_decode_intensity_mha_and_gqa) {
    /* MHA, LLaMA-2-7B bf16, batch 1 decode at context 1024: 1024 (query, key) pairs per head,
     * F = 1024 * 32 heads * (4*128 + 5) = 16,941,056. KV read: 2*1024*32*128 = 8,388,608
     * elements = 16,777,216 B; Q and O 32*128*2 = 8,192 B each.
     * F per KV element = 2.02 ≈ 2*h/kv = 2; per byte ≈ 1 (bf16 halves it). */
    model_config c = preset("llama-2-7b");
    workload w = wl(1, 1000, 48, XF_BF16, XF_BF16, XF_BF16);
    cost_op *ops = step(&c, &w, workload_decode_step(&w, 1024));
    const cost_op *a = &ops[op_index(&c, 0, OP_ATTENTION)];
    cr_assert_eq(a->kind, OP_ATTENTION);
    EXACT(a->flops, 16941056.0);
    EXACT(a->kv_read_bytes, 16777216.0);
    EXACT(a->act_in_bytes, 8192.0);
    EXACT(a->act_out_bytes, 8192.0);
    EXACT(a->weight_bytes, 0.0);
    EXACT(a->bytes, 16777216.0 + 16384.0);
    double elems = 2.0 * 1024 * 32 * 128;
    NEAR(a->flops / elems, 2.0 * 32 / 32, 0.02);
    NEAR(a->flops / a->bytes, 2.0 * 32 / 32 / 2, 0.02);
    free(ops);

    /* GQA, LLaMA-2-70B (64 query heads, 8 KV heads): F = 1024 * 64 * (512 + 5) = 33,882,112;
     * KV elements 2*1024*8*128 = 2,097,152 (4,194,304 B). F per element = 16.16 ≈ 2*64/8 = 16;
     * Q and O 64*128*2 = 16,384 B each: I = 33,882,112 / 4,227,072 = 8.02 ≈ 16 / 2. */
    model_config g = preset("llama-2-70b");
    ops = step(&g, &w, workload_decode_step(&w, 1024));
    a = &ops[op_index(&g, 5, OP_ATTENTION)];
    EXACT(a->flops, 33882112.0);
    EXACT(a->kv_read_bytes, 4194304.0);
    EXACT(a->bytes, 4194304.0 + 32768.0);
    NEAR(a->flops / (2.0 * 1024 * 8 * 128), 2.0 * 64 / 8, 0.02);
    NEAR(a->flops / a->bytes, 2.0 * 64 / 8 / 2, 0.02);
    double i1 = a->flops / a->bytes;
    free(ops);

    /* Batch does not raise it: each sequence reads its own KV. Batch 64, same context. */
    workload w64 = wl(64, 1000, 48, XF_BF16, XF_BF16, XF_BF16);
    ops = step(&g, &w64, workload_decode_step(&w64, 1024));
    a = &ops[op_index(&g, 5, OP_ATTENTION)];
    EXACT(a->flops, 64.0 * 33882112.0);
    NEAR(a->flops / a->bytes, i1, 1e-12);
    device_spec h100 = device("h100-sxm");
    cr_assert_lt(a->flops / a->bytes, device_ridge(&h100, a->compute));
    free(ops);
}

Test(cost_model, decode_batch64_memory_bound_prefill_compute_bound) {
    /* Ridges (tensor16): A100 312e12/1.555e12 = 200.6; H100 SXM 989.4e12/3.35e12 = 295.3;
     * H200 989.4e12/4.8e12 = 206.1. Decode batch 64 GEMMs have I ≈ 64: memory-bound on all three.
     * Prefill of 512 tokens: I of a per-layer GEMM ≈ 2*512*n*k / (2*n*k + 2*512*(n + k)),
     * for qkv (k 4096, n 12288) = 6.4e10 / (1.0066e8 + 1.678e7) ≈ 437 > every ridge. */
    const char *names[] = {"a100-40gb", "h100-sxm", "h200"};
    const double ridges[] = {312e12 / 1.555e12, 989.4e12 / 3.35e12, 989.4e12 / 4.8e12};
    model_config c = preset("llama-2-7b");
    workload w = wl(64, 512, 128, XF_BF16, XF_BF16, XF_BF16);
    cost_op *dec = step(&c, &w, workload_decode_step(&w, workload_mean_decode_context(&w)));
    workload w1 = wl(1, 512, 128, XF_BF16, XF_BF16, XF_BF16);
    cost_op *pre = step(&c, &w1, workload_prefill_step(&w1));
    const op_kind gemms[] = {OP_QKV, OP_O_PROJ, OP_GATE_UP, OP_DOWN};
    for (int di = 0; di < 3; di++) {
        device_spec d = device(names[di]);
        NEAR(device_ridge(&d, XF_COMPUTE_TENSOR16), ridges[di], 1e-9);
        for (int l = 0; l < 32; l++)
            for (int g = 0; g < 4; g++) {
                record_op r;
                roofline_predict_op(&dec[op_index(&c, l, gemms[g])], &d, &r);
                cr_assert_eq(r.bound, XF_BOUND_MEMORY, "%s decode b64 %s layer %d: I %.1f", names[di],
                             op_kind_name(gemms[g]), l, r.intensity);
                cr_assert_gt(r.intensity, 60.0);
                cr_assert_lt(r.intensity, 64.0);
                roofline_predict_op(&pre[op_index(&c, l, gemms[g])], &d, &r);
                cr_assert_eq(r.bound, XF_BOUND_COMPUTE, "%s prefill 512 %s layer %d: I %.1f", names[di],
                             op_kind_name(gemms[g]), l, r.intensity);
            }
        /* Decode lm_head (64 rows) is memory-bound too; attention in decode always is. */
        record_op r;
        roofline_predict_op(&dec[op_index(&c, -1, OP_LM_HEAD)], &d, &r);
        cr_assert_eq(r.bound, XF_BOUND_MEMORY);
        roofline_predict_op(&dec[op_index(&c, 0, OP_ATTENTION)], &d, &r);
        cr_assert_eq(r.bound, XF_BOUND_MEMORY);
    }
    free(dec);
    free(pre);
}

Test(cost_model, lm_head_only_last_prefill_token) {
    /* Prefill batch 4, prompt 512, LLaMA-2-7B bf16: lm_head F = 2*4*4096*32000 = 1,048,576,000
     * (not 2*4*512*4096*32000); in 4*4096*2 = 32,768; logits fp32 4*32000*4 = 512,000;
     * weights 32000*4096*2 = 262,144,000. Final norm and sampling also on 4 rows:
     * final norm F = 4*4*4096 = 65,536; sampling F = 4*32000 = 128,000, reads 512,000 B of
     * logits, writes 4 int32 tokens = 16 B. */
    model_config c = preset("llama-2-7b");
    workload w = wl(4, 512, 0, XF_BF16, XF_BF16, XF_BF16);
    cost_op *ops = step(&c, &w, workload_prefill_step(&w));
    const cost_op *lm = &ops[op_index(&c, -1, OP_LM_HEAD)];
    cr_assert_eq(lm->kind, OP_LM_HEAD);
    cr_assert_eq(lm->layer, -1);
    EXACT(lm->flops, 1048576000.0);
    EXACT(lm->act_in_bytes, 32768.0);
    EXACT(lm->act_out_bytes, 512000.0);
    EXACT(lm->weight_bytes, 262144000.0);
    const cost_op *fn = &ops[op_index(&c, -1, OP_FINAL_NORM)];
    EXACT(fn->flops, 65536.0);
    const cost_op *sm = &ops[op_index(&c, -1, OP_SAMPLING)];
    EXACT(sm->flops, 128000.0);
    EXACT(sm->act_in_bytes, 512000.0);
    EXACT(sm->act_out_bytes, 16.0);
    /* The layers still see all 4*512 = 2048 rows: qkv F = 2*2048*4096*12288. */
    EXACT(ops[op_index(&c, 0, OP_QKV)].flops, 2.0 * 2048 * 4096 * 12288);
    /* Tied embeddings: the embedding matrix is still read by lm_head. */
    model_config t = c;
    t.tied_embeddings = 1;
    free(ops);
    ops = step(&t, &w, workload_prefill_step(&w));
    EXACT(ops[op_index(&t, -1, OP_LM_HEAD)].weight_bytes, 262144000.0);
    free(ops);
}

Test(cost_model, int4_bytes_with_group_scales) {
    /* LLaMA-2-7B o_proj, 4096 x 4096 int4, group 128: 4096*4096/2 = 8,388,608 B of values plus
     * 4096 rows * 32 groups * 2 B = 262,144 B of scales: 8,650,752. */
    model_config c = preset("llama-2-7b");
    workload w = wl(1, 16, 1, XF_INT4, XF_BF16, XF_BF16);
    cost_op *ops = step(&c, &w, workload_decode_step(&w, 17));
    EXACT(ops[op_index(&c, 0, OP_O_PROJ)].weight_bytes, 8650752.0);
    /* down: input 11008, 4096 rows: 11008*4096/2 = 22,544,384 + 4096 * ceil(11008/128) = 86
     * groups * 2 B = 704,512: 23,248,896. */
    EXACT(ops[op_index(&c, 3, OP_DOWN)].weight_bytes, 23248896.0);
    free(ops);
    /* Group 64: 8,388,608 + 4096*64*2 = 8,912,896. */
    w.quant_group = 64;
    ops = step(&c, &w, workload_decode_step(&w, 17));
    EXACT(ops[op_index(&c, 0, OP_O_PROJ)].weight_bytes, 8912896.0);
    free(ops);
    /* int8, group 128: 4096*4096 + 4096*32*2 = 17,039,360. */
    w.wdtype = XF_INT8;
    w.quant_group = 0;
    ops = step(&c, &w, workload_decode_step(&w, 17));
    EXACT(ops[op_index(&c, 0, OP_O_PROJ)].weight_bytes, 17039360.0);
    /* Norm weights stay fp16 when the matrices are quantized: 4096*2 = 8,192. */
    EXACT(ops[op_index(&c, 0, OP_ATTN_NORM)].weight_bytes, 8192.0);
    free(ops);
}

Test(cost_model, tiny_config_exact_prefill) {
    /* tiny(), fp32 everywhere, prefill batch 2, prompt 3: N = 6 rows. Every figure by hand. */
    model_config c = tiny();
    workload w = wl(2, 3, 5, XF_FP32, XF_FP32, XF_FP32);
    cost_op *ops = step(&c, &w, workload_prefill_step(&w));
    struct {
        op_kind k;
        double flops, weight, in, out, kv_r, kv_w;
    } want[] = {
        /* embedding: 6 rows of 8 fp32 = 192; 6 int32 ids = 24; out 6*8*4 = 192 */
        {OP_EMBEDDING, 0, 192, 24, 192, 0, 0},
        /* attn_norm: 4*6*8 = 192 FLOPs; weight 8*4 = 32 */
        {OP_ATTN_NORM, 192, 32, 192, 192, 0, 0},
        /* qkv: 2*6*8*16 = 1536 + bias 6*16 = 96 -> 1632; weights 8*16*4 = 512 + bias 16*4 = 64;
         * out 6*16*4 = 384 */
        {OP_QKV, 1632, 576, 192, 384, 0, 0},
        /* rope: 3*6*(8 + 4) = 216; in/out 6*12*4 = 288 */
        {OP_ROPE, 216, 0, 288, 288, 0, 0},
        /* kv_append: reads 6*2*4 elements * 4 B = 192, writes 192 of KV */
        {OP_KV_APPEND, 0, 0, 192, 0, 0, 192},
        /* attention: pairs per sequence 3*4/2 = 6, 12 over the batch; F = 12 * 2 heads *
         * (4*4 + 5) = 504; Q 6*8*4 = 192 in, O 192 out; KV 2 seqs * 3 ctx * 2 * 4 * 4 B = 192 */
        {OP_ATTENTION, 504, 0, 192, 192, 192, 0},
        /* o_proj: 2*6*8*8 = 768; weights 8*8*4 = 256 */
        {OP_O_PROJ, 768, 256, 192, 192, 0, 0},
        /* residual: 6*8 = 48; reads two 192 B tensors */
        {OP_ATTN_RESIDUAL, 48, 0, 384, 192, 0, 0},
        {OP_FFN_NORM, 192, 32, 192, 192, 0, 0},
        /* gate_up: 2*6*8*32 = 3072; weights 2*8*16*4 = 1024; out 2*6*16*4 = 768 */
        {OP_GATE_UP, 3072, 1024, 192, 768, 0, 0},
        /* swiglu: 5*6*16 = 480; in 768, out 384 */
        {OP_SWIGLU, 480, 0, 768, 384, 0, 0},
        /* down: 2*6*16*8 = 1536; weights 16*8*4 = 512 */
        {OP_DOWN, 1536, 512, 384, 192, 0, 0},
        {OP_FFN_RESIDUAL, 48, 0, 384, 192, 0, 0},
        /* final_norm on the 2 last rows: 4*2*8 = 64; in/out 2*8*4 = 64 */
        {OP_FINAL_NORM, 64, 32, 64, 64, 0, 0},
        /* lm_head: 2*2*8*10 = 320; weights 10*8*4 = 320; logits 2*10*4 = 80 */
        {OP_LM_HEAD, 320, 320, 64, 80, 0, 0},
        /* sampling: 2*10 = 20 compares; reads 80, writes 2 ids = 8 */
        {OP_SAMPLING, 20, 0, 80, 8, 0, 0},
    };
    cr_assert_eq(cost_step_op_count(&c), 16);
    for (int i = 0; i < 16; i++) {
        const cost_op *o = &ops[i];
        cr_assert_eq(o->kind, want[i].k, "op %d is %s", i, op_kind_name(o->kind));
        cr_assert_eq(o->phase, XF_PREFILL);
        cr_assert_eq(o->layer, op_kind_is_per_layer(o->kind) ? 0 : -1);
        EXACT(o->flops, want[i].flops);
        EXACT(o->weight_bytes, want[i].weight);
        EXACT(o->act_in_bytes, want[i].in);
        EXACT(o->act_out_bytes, want[i].out);
        EXACT(o->kv_read_bytes, want[i].kv_r);
        EXACT(o->kv_write_bytes, want[i].kv_w);
        EXACT(o->bytes, want[i].weight + want[i].in + want[i].out + want[i].kv_r + want[i].kv_w);
        cr_assert_eq(o->compute, XF_COMPUTE_FP32); /* fp32 activations: GEMMs on FP32 too */
    }
    /* Total: 192+1632+216+504+768+48+192+3072+480+1536+48+64+320+20 = 9,092 FLOPs. */
    double fl, by;
    cost_step_totals(ops, 16, &fl, &by);
    EXACT(fl, 9092.0);
    free(ops);

    /* Decode at context 4: 1 new token after 3 cached, 4 pairs per sequence, 8 in all:
     * F = 8 * 2 * 21 = 336; KV read 2 seqs * 4 * 2 * 4 * 4 B = 256. */
    ops = step(&c, &w, workload_decode_step(&w, 4));
    EXACT(ops[op_index(&c, 0, OP_ATTENTION)].flops, 336.0);
    EXACT(ops[op_index(&c, 0, OP_ATTENTION)].kv_read_bytes, 256.0);
    cr_assert_eq(ops[0].phase, XF_DECODE);
    free(ops);

    /* Chunked step: 2 new tokens at the end of context 5 sit at positions 4 and 5: 9 pairs. */
    EXACT(cost_attention_pairs(2, 5), 9.0);
    EXACT(cost_attention_pairs(512, 512), 512.0 * 513 / 2);
    EXACT(cost_attention_pairs(1, 1000), 1000.0);
}

Test(cost_model, compute_types) {
    cr_assert_eq(cost_compute_of(XF_BF16), XF_COMPUTE_TENSOR16);
    cr_assert_eq(cost_compute_of(XF_FP16), XF_COMPUTE_TENSOR16);
    cr_assert_eq(cost_compute_of(XF_FP8), XF_COMPUTE_FP8);
    cr_assert_eq(cost_compute_of(XF_INT8), XF_COMPUTE_INT8);
    cr_assert_eq(cost_compute_of(XF_FP32), XF_COMPUTE_FP32);
    model_config c = tiny();
    workload w = wl(1, 4, 1, XF_FP8, XF_FP8, XF_FP8);
    cost_op *ops = step(&c, &w, workload_prefill_step(&w));
    for (int i = 0; i < 16; i++) {
        xf_compute want = (op_kind_is_gemm(ops[i].kind) || ops[i].kind == OP_ATTENTION) ? XF_COMPUTE_FP8 : XF_COMPUTE_FP32;
        cr_assert_eq(ops[i].compute, want, "%s", op_kind_name(ops[i].kind));
    }
    free(ops);
}

Test(cost_model, memory_and_max_batch_tiny) {
    /* tiny() parameters: per layer q/k/v 8*16 = 128 + o 64 + bias 16 + FFN 3*8*16 = 384 + norms 16
     * = 608; embedding 80, final norm 8, lm_head 80: 776 params, 3,104 B at fp32.
     * Activation peak of the prefill (batch 2, prompt 3, N = 6, fp32):
     *   attention 2*6*8*4 + 6*8*4 + 2*6*4*4 + 6*8*4 = 384 + 192 + 192 + 192 = 960;
     *   FFN 384 + 2*6*16*4 + 6*16*4 = 384 + 768 + 384 = 1,536;
     *   head 6*8*4 + 2*8*4 + 2*10*4 + 2*4 = 192 + 64 + 80 + 8 = 344; peak 1,536.
     * KV per token 2*1*1*4*4 = 32; batch 2 * (3 + 5) tokens = 512 B. Total 5,152. */
    model_config c = tiny();
    cr_assert_eq(config_param_count(&c), 776);
    workload w = wl(2, 3, 5, XF_FP32, XF_FP32, XF_FP32);
    cost_memory m;
    cost_memory_of(&c, &w, &m);
    EXACT(m.weights_bytes, 3104.0);
    EXACT(m.activations_bytes, 1536.0);
    EXACT(m.kv_bytes_per_token, 32.0);
    EXACT(m.kv_bytes, 512.0);
    EXACT(m.total_bytes, 5152.0);
    /* Per sequence: KV 8*32 = 256 + FFN activations 768 = 1,024 B over the 3,104 B of weights.
     * Capacity 3,104 + 10*1,024 = 13,344 fits 10; one byte less fits 9; below the weights 0. */
    EXACT(cost_max_batch(&c, &w, 13344.0), 10);
    EXACT(cost_max_batch(&c, &w, 13343.0), 9);
    EXACT(cost_max_batch(&c, &w, 4127.0), 0);
    EXACT(cost_max_batch(&c, &w, 4128.0), 1);
    EXACT(cost_max_batch(&c, &w, 0.0), 0);
    /* Invalid input: zeros, no crash. */
    workload bad = w;
    bad.batch = 0;
    cost_memory_of(&c, &bad, &m);
    EXACT(m.total_bytes, 0.0);
}

Test(cost_model, weights_match_param_count) {
    /* bf16: 2 bytes per parameter, norms included, for every preset. LLaMA-2-7B has
     * 6,738,415,616 parameters (the published 6.74B): 13,476,831,232 B. */
    workload w = wl(1, 128, 16, XF_BF16, XF_BF16, XF_BF16);
    for (int i = 0; i < config_preset_count(); i++) {
        model_config c = preset(config_preset_name(i));
        EXACT(cost_weight_bytes(&c, &w), 2.0 * (double)config_param_count(&c));
    }
    model_config c = preset("llama-2-7b");
    EXACT(cost_weight_bytes(&c, &w), 13476831232.0);
    /* fp32: 4 B per parameter. */
    w.wdtype = XF_FP32;
    EXACT(cost_weight_bytes(&c, &w), 4.0 * 6738415616.0);
}

Test(cost_model, llama70b_prefill_does_not_overflow) {
    /* Batch 64, prompt 4096: N = 262,144 rows. qkv F = 2 * 262,144 * 8192 * (8192 + 2*1024)
     * = 43,980,465,111,040 (exact in a double). Per-layer GEMMs over 80 layers:
     * 2 * N * 80 * (8192*10240 + 8192*8192 + 3*8192*28672) = 2 * N * 80 * 855,638,016. */
    model_config c = preset("llama-2-70b");
    workload w = wl(64, 4096, 0, XF_BF16, XF_BF16, XF_BF16);
    cost_op *ops = step(&c, &w, workload_prefill_step(&w));
    EXACT(ops[op_index(&c, 79, OP_QKV)].flops, 43980465111040.0);
    double gemm = 0.0, fl, by;
    for (int64_t i = 0; i < cost_step_op_count(&c); i++)
        if (op_kind_is_gemm(ops[i].kind) && ops[i].layer >= 0) gemm += ops[i].flops;
    EXACT(gemm, 2.0 * 262144.0 * 80.0 * 855638016.0);
    cost_step_totals(ops, cost_step_op_count(&c), &fl, &by);
    cr_assert(isfinite(fl) && fl > gemm && fl < 1e18, "total %g", fl);
    cr_assert(isfinite(by) && by > 0);
    /* Attention: 64 * 4096*4097/2 pairs * 64 heads * 517 per layer. */
    EXACT(ops[op_index(&c, 0, OP_ATTENTION)].flops, 64.0 * (4096.0 * 4097.0 / 2.0) * 64.0 * 517.0);
    free(ops);
    cost_memory m;
    cost_memory_of(&c, &w, &m);
    cr_assert(m.total_bytes > 1e11 && isfinite(m.total_bytes));
}

Test(cost_model, invalid_input) {
    model_config c = tiny();
    workload w = wl(2, 3, 5, XF_FP32, XF_FP32, XF_FP32);
    cost_op ops[16];
    step_shape s = workload_prefill_step(&w);
    cr_assert_eq(cost_step(&c, &w, s, ops, 15), XF_EINVAL); /* array too small */
    cr_assert(strstr(xf_error_msg(), "16") != NULL, "%s", xf_error_msg());
    step_shape bad = {XF_DECODE, 2, 4, 3}; /* context < tokens */
    cr_assert_eq(cost_step(&c, &w, bad, ops, 16), XF_EINVAL);
    bad = (step_shape){XF_DECODE, 0, 1, 3};
    cr_assert_eq(cost_step(&c, &w, bad, ops, 16), XF_EINVAL);
    workload bw = w;
    bw.prompt = 0;
    cr_assert_eq(cost_step(&c, &bw, s, ops, 16), XF_EINVAL);
    model_config bc = c;
    bc.n_heads = 3; /* not a multiple of n_kv_heads = 2 */
    bc.n_kv_heads = 2;
    cr_assert_eq(cost_step(&bc, &w, s, ops, 16), XF_EINVAL);
    bc = c;
    bc.d_model = -8;
    cr_assert_eq(cost_step(&bc, &w, s, ops, 16), XF_EINVAL);
    cr_assert_eq(cost_max_batch(&bc, &w, 1e12), 0);
    cr_assert_eq(cost_step(NULL, &w, s, ops, 16), XF_EINVAL);
}

Test(cost_model, mixed_step_sums) {
    /* tiny(), fp32. A prefill of two prompts of 3 and 5 tokens: rows 8, pairs 3*4/2 + 5*6/2 =
     * 6 + 15 = 21, context tokens 8, 2 sequences. Attention F = 21 * 2 heads * 21 = 882;
     * KV read 8 tokens * 2 * 4 * 4 B = 256; qkv F = 2*8*8*16 + 8*16 = 2,176. */
    model_config c = tiny();
    workload w = wl(2, 3, 5, XF_FP32, XF_FP32, XF_FP32);
    cost_step_sums s = {XF_PREFILL, 0, 0, 0, 0, 0, 0, 0};
    cr_assert_eq(cost_sums_add(&s, 3, 3), XF_OK);
    cr_assert_eq(cost_sums_add(&s, 5, 5), XF_OK);
    EXACT(s.seqs, 2);
    EXACT(s.rows, 8);
    EXACT(s.pairs, 21);
    EXACT(s.kv_tokens, 8);
    cost_op ops[16];
    cr_assert_eq(cost_step_of_sums(&c, &w, &s, ops, 16), XF_OK, "%s", xf_error_msg());
    EXACT(ops[op_index(&c, 0, OP_ATTENTION)].flops, 882.0);
    EXACT(ops[op_index(&c, 0, OP_ATTENTION)].kv_read_bytes, 256.0);
    EXACT(ops[op_index(&c, 0, OP_QKV)].flops, 2176.0);
    EXACT(ops[op_index(&c, -1, OP_LM_HEAD)].flops, 2.0 * 2 * 8 * 10);
    cr_assert_eq(ops[0].phase, XF_PREFILL);
    /* A uniform shape through the sums is cost_step exactly. */
    cost_op a[16];
    step_shape sh = workload_decode_step(&w, 7);
    cost_step_sums u = cost_sums_of_shape(sh);
    EXACT(u.seqs, 2);
    EXACT(u.rows, 2);
    EXACT(u.pairs, 14);
    EXACT(u.kv_tokens, 14);
    cr_assert_eq(cost_step(&c, &w, sh, a, 16), XF_OK);
    cr_assert_eq(cost_step_of_sums(&c, &w, &u, ops, 16), XF_OK);
    cr_assert_eq(memcmp(a, ops, sizeof a), 0);
    /* Decode of two sequences at contexts 5 and 9 costs what two at context 7 cost (linear). */
    cost_step_sums m = {XF_DECODE, 0, 0, 0, 0, 0, 0, 0};
    cr_assert_eq(cost_sums_add(&m, 1, 5), XF_OK);
    cr_assert_eq(cost_sums_add(&m, 1, 9), XF_OK);
    cr_assert_eq(cost_step_of_sums(&c, &w, &m, ops, 16), XF_OK);
    cr_assert_eq(memcmp(a, ops, sizeof a), 0);
    /* Refused: a sequence with no new token, context below tokens, an empty step. */
    cr_assert_eq(cost_sums_add(&m, 0, 5), XF_EINVAL);
    cr_assert_eq(cost_sums_add(&m, 6, 5), XF_EINVAL);
    cost_step_sums empty = {XF_DECODE, 0, 0, 0, 0, 0, 0, 0};
    cr_assert_eq(cost_step_of_sums(&c, &w, &empty, ops, 16), XF_EINVAL);
    cost_step_sums nan_s = {XF_DECODE, 1, 1, NAN, 1, 0, 0, 0};
    cr_assert_eq(cost_step_of_sums(&c, &w, &nan_s, ops, 16), XF_EINVAL);
}

Test(cost_model, embedding_reads_at_most_the_table) {
    /* tiny() has 10 vocabulary rows of 8 fp32 (320 B). Prefill of 4 x 3 = 12 tokens gathers at
     * most the 10 distinct rows: 320 B of weights, 12 ids (48 B), writes 12*8*4 = 384 B. */
    model_config c = tiny();
    workload w = wl(4, 3, 1, XF_FP32, XF_FP32, XF_FP32);
    cost_op ops[16];
    cr_assert_eq(cost_step(&c, &w, workload_prefill_step(&w), ops, 16), XF_OK, "%s", xf_error_msg());
    EXACT(ops[0].weight_bytes, 320.0);
    EXACT(ops[0].act_in_bytes, 48.0);
    EXACT(ops[0].act_out_bytes, 384.0);
    /* Decode: 4 rows, 4*8*4 = 128 B. */
    cr_assert_eq(cost_step(&c, &w, workload_decode_step(&w, 4), ops, 16), XF_OK);
    EXACT(ops[0].weight_bytes, 128.0);
}

/* ---- newer architectures ---- */

Test(cost_model, window_pairs_closed_form) {
    /* brute force: sum over query positions q = C - T + 1 .. C of min(W, q) */
    for (int t = 1; t <= 12; t++)
        for (int c = t; c <= 30; c++)
            for (int w = 1; w <= 35; w++) {
                double want = 0;
                for (int q = c - t + 1; q <= c; q++) want += q < w ? q : w;
                cr_assert_float_eq(cost_window_pairs(t, c, w), want, 1e-9, "T %d C %d W %d", t, c, w);
            }
    cr_assert_float_eq(cost_window_pairs(5, 9, 100), cost_attention_pairs(5, 9), 0);
}

Test(cost_model, sliding_window_attention_and_kv_memory) {
    /* mistral-7b: every layer windowed at 4096. Decode at context 10000 reads 4096 tokens of KV per
     * sequence and layer, not 10000; prefill of 8192 sees min(W, q) keys per query. */
    model_config c = preset("mistral-7b");
    workload w = wl(2, 8192, 1808, XF_FP16, XF_FP16, XF_FP16);
    cost_op *d = step(&c, &w, (step_shape){XF_DECODE, 2, 1, 10000});
    const cost_op *a = &d[op_index(&c, 5, OP_ATTENTION)];
    /* K and V, 8 KV heads of 128 fp16: 2 * 8 * 128 * 2 = 4096 bytes per token and layer */
    cr_assert_float_eq(a->kv_read_bytes, 2.0 * 4096 * 4096.0, 1e-3);
    cr_assert_float_eq(a->flops, 2.0 * 4096 * 32 * (4.0 * 128 + 5.0), 1e-3);
    free(d);
    cost_op *p = step(&c, &w, (step_shape){XF_PREFILL, 2, 8192, 8192});
    a = &p[op_index(&c, 0, OP_ATTENTION)];
    double pairs = 4096.0 * 4097.0 / 2.0 + (8192.0 - 4096.0) * 4096.0;
    cr_assert_float_eq(a->flops, 2.0 * pairs * 32 * (4.0 * 128 + 5.0), 1e-3);
    cr_assert_float_eq(a->kv_read_bytes, 2.0 * 8192 * 4096.0, 1e-3, "prefill reads the whole prompt once");
    free(p);
    /* memory: each sequence holds at most 4096 of its 10000 tokens in every layer */
    cost_memory m;
    cost_memory_of(&c, &w, &m);
    cr_assert_float_eq(m.kv_bytes, 2.0 * 4096 * m.kv_bytes_per_token, 1e-3);
    /* the same config without the window holds all 10000 */
    c.sliding_window = 0;
    memset(c.window_layers, 0, sizeof c.window_layers);
    cost_memory_of(&c, &w, &m);
    cr_assert_float_eq(m.kv_bytes, 2.0 * 10000 * m.kv_bytes_per_token, 1e-3);
}

Test(cost_model, ragged_window_sums_exact) {
    /* sums built sequence by sequence with the window set give the exact windowed figures */
    model_config c = preset("mistral-7b");
    workload w = wl(2, 100, 100, XF_FP16, XF_FP16, XF_FP16);
    cost_step_sums s = {XF_DECODE, 0, 0, 0, 0, 4096, 0, 0};
    cr_assert_eq(cost_sums_add(&s, 1, 100), XF_OK);
    cr_assert_eq(cost_sums_add(&s, 1, 9000), XF_OK);
    int64_t n = cost_step_op_count(&c);
    cost_op *ops = calloc((size_t)n, sizeof *ops);
    cr_assert_eq(cost_step_of_sums(&c, &w, &s, ops, n), XF_OK, "%s", xf_error_msg());
    cr_assert_float_eq(ops[op_index(&c, 0, OP_ATTENTION)].kv_read_bytes, (100.0 + 4096.0) * 4096.0, 1e-3);
    free(ops);
}

Test(cost_model, biases_and_qk_norm_counted) {
    model_config c = tiny();
    workload w = wl(1, 4, 0, XF_FP32, XF_FP32, XF_FP32);
    cost_op *base = step(&c, &w, (step_shape){XF_PREFILL, 1, 4, 4});
    c.o_bias = 1;
    c.mlp_bias = 1;
    c.qk_norm = 1;
    cost_op *x = step(&c, &w, (step_shape){XF_PREFILL, 1, 4, 4});
    /* o_proj: d = 8 biases (4 bytes each), one add per output */
    cr_assert_float_eq(x[op_index(&c, 0, OP_O_PROJ)].weight_bytes - base[op_index(&c, 0, OP_O_PROJ)].weight_bytes, 32.0, 0);
    cr_assert_float_eq(x[op_index(&c, 0, OP_O_PROJ)].flops - base[op_index(&c, 0, OP_O_PROJ)].flops, 4.0 * 8, 0);
    cr_assert_float_eq(x[op_index(&c, 0, OP_GATE_UP)].weight_bytes - base[op_index(&c, 0, OP_GATE_UP)].weight_bytes, 2 * 16 * 4.0, 0);
    cr_assert_float_eq(x[op_index(&c, 0, OP_DOWN)].weight_bytes - base[op_index(&c, 0, OP_DOWN)].weight_bytes, 8 * 4.0, 0);
    /* q/k norm: 2 * head_dim weights, 4 FLOPs per element of q_dim + kv_dim = 12, 4 tokens */
    cr_assert_float_eq(x[op_index(&c, 0, OP_ROPE)].weight_bytes, 2 * 4 * 4.0, 0);
    cr_assert_float_eq(x[op_index(&c, 0, OP_ROPE)].flops - base[op_index(&c, 0, OP_ROPE)].flops, 4.0 * 4 * 12, 0);
    /* the weight total follows the parameter count */
    cr_assert_float_eq(cost_weight_bytes(&c, &w), 4.0 * (double)config_param_count(&c), 0);
    free(base);
    free(x);
}

Test(cost_model, moe_reads_the_distinct_experts) {
    /* E (1 - (1 - k/E)^T): one token reads k experts, many tokens all of them */
    cr_assert_float_eq(cost_moe_experts_read(8, 2, 1), 2.0, 1e-12);
    cr_assert_float_eq(cost_moe_experts_read(8, 2, 2), 8.0 * (1 - 0.75 * 0.75), 1e-12);
    cr_assert_float_eq(cost_moe_experts_read(128, 8, 4096), 128.0, 1e-9);
    cr_assert(cost_moe_experts_read(128, 8, 4) <= 32.0);
    cr_assert_float_eq(cost_moe_experts_read(0, 2, 5), 0.0, 0);
    model_config c = preset("mixtral-8x7b");
    workload w = wl(1, 128, 16, XF_BF16, XF_BF16, XF_BF16);
    cost_op *d = step(&c, &w, (step_shape){XF_DECODE, 1, 1, 200});
    const cost_op *gu = &d[op_index(&c, 3, OP_GATE_UP)], *dn = &d[op_index(&c, 3, OP_DOWN)];
    /* decode of one token: the router (8 x 4096) and 2 experts' gate+up (2 x 2 x 4096 x 14336), bf16 */
    cr_assert_float_eq(gu->weight_bytes, 2.0 * (8.0 * 4096 + 2 * 2.0 * 4096 * 14336), 1e-3);
    cr_assert_float_eq(dn->weight_bytes, 2.0 * (2 * 14336.0 * 4096), 1e-3);
    cr_assert_float_eq(gu->flops, 2.0 * 4096 * 8 + 5.0 * 8 + 2.0 * 2 * 4096 * 2 * 14336, 1e-3);
    free(d);
    /* the resident weights hold every expert: cost_weight_bytes follows the total parameter count */
    cr_assert_float_eq(cost_weight_bytes(&c, &w), 2.0 * (double)config_param_count(&c), 1.0);
}

/* qwen2_moe's shared expert is read by every step, its gate too; a measured run's chosen count
 * (cost_moe_set_experts) replaces the uniform-routing expectation in the expert ops only. */
Test(cost_model, moe_shared_expert_and_chosen_experts) {
    model_config c;
    cr_assert_eq(config_resolve(XF_SOURCE_DIR "/tests/data/hf/qwen2-moe", &c), XF_OK, "%s", xf_error_msg());
    workload w = wl(1, 8, 4, XF_FP32, XF_FP32, XF_FP32);
    cost_op *d = step(&c, &w, (step_shape){XF_DECODE, 1, 1, 9});
    cost_op *gu = &d[op_index(&c, 1, OP_GATE_UP)], *dn = &d[op_index(&c, 1, OP_DOWN)];
    /* d 64, E 8, k 2, expert 32, shared 48: router 8 x 64, 2 experts' gate+up 2 x 64 x 32, the shared
     * expert's 2 x 64 x 48 and its gate 64; fp32 */
    cr_assert_float_eq(gu->weight_bytes, 4.0 * (8 * 64 + 2 * 2 * 64 * 32 + 2 * 64 * 48 + 64), 1e-9);
    cr_assert_float_eq(dn->weight_bytes, 4.0 * (2 * 32 * 64 + 48 * 64), 1e-9);
    const double gu_other = gu->bytes - gu->weight_bytes, dn_other = dn->bytes - dn->weight_bytes;
    cost_moe_set_experts(&c, &w, gu, 5.0);
    cost_moe_set_experts(&c, &w, dn, 5.0);
    cr_assert_float_eq(gu->weight_bytes, 4.0 * (8 * 64 + 5 * 2 * 64 * 32 + 2 * 64 * 48 + 64), 1e-9);
    cr_assert_float_eq(dn->weight_bytes, 4.0 * (5 * 32 * 64 + 48 * 64), 1e-9);
    cr_assert_float_eq(gu->bytes - gu->weight_bytes, gu_other, 1e-9);
    cr_assert_float_eq(dn->bytes - dn->weight_bytes, dn_other, 1e-9);
    /* other ops are left alone */
    cost_op *qkv = &d[op_index(&c, 1, OP_QKV)];
    const double q0 = qkv->weight_bytes;
    cost_moe_set_experts(&c, &w, qkv, 5.0);
    cr_assert_float_eq(qkv->weight_bytes, q0, 0);
    free(d);
    /* every weight once: fp32 bytes = 4 x the parameter count (transformers': 208,576) */
    cr_assert_float_eq(cost_weight_bytes(&c, &w), 4.0 * 208576, 0);
}

/* gemma3: the scaled embedding (one multiply per element), the post-attention / post-feedforward
 * norms in the residual ops (4 FLOPs per element and d weights each), GeGLU at 9 FLOPs per
 * element, weights following the parameter count; gemma-3-1b's local layers read at most their
 * 512-token window, the global ones the whole context, and the KV memory sums the layers. */
Test(cost_model, gemma3_norms_embedding_geglu_and_windows) {
    model_config c = tiny();
    workload w = wl(1, 4, 0, XF_FP32, XF_FP32, XF_FP32);
    cost_op *base = step(&c, &w, (step_shape){XF_PREFILL, 1, 4, 4});
    c.embed_scale = sqrt(8.0);
    c.sandwich_norms = 1;
    c.ffn_gelu = 1;
    c.attn_scalar = 16;
    c.rope_local_theta = 10000;
    cost_op *x = step(&c, &w, (step_shape){XF_PREFILL, 1, 4, 4});
    EXACT(x[op_index(&c, 0, OP_EMBEDDING)].flops - base[op_index(&c, 0, OP_EMBEDDING)].flops, 4 * 8);
    for (op_kind k = OP_ATTN_RESIDUAL; k <= OP_FFN_RESIDUAL; k = (op_kind)(k + (OP_FFN_RESIDUAL - OP_ATTN_RESIDUAL))) {
        EXACT(x[op_index(&c, 0, k)].flops - base[op_index(&c, 0, k)].flops, 4.0 * 4 * 8);
        EXACT(x[op_index(&c, 0, k)].weight_bytes - base[op_index(&c, 0, k)].weight_bytes, 8 * 4.0);
    }
    EXACT(x[op_index(&c, 0, OP_SWIGLU)].flops, base[op_index(&c, 0, OP_SWIGLU)].flops / 5.0 * 9.0);
    EXACT(cost_weight_bytes(&c, &w), 4.0 * (double)config_param_count(&c));
    free(base);
    free(x);

    c = preset("gemma-3-1b");
    w = wl(2, 8192, 1808, XF_BF16, XF_BF16, XF_BF16);
    EXACT(cost_weight_bytes(&c, &w), 2.0 * (double)config_param_count(&c));
    cost_op *d = step(&c, &w, (step_shape){XF_DECODE, 2, 1, 10000});
    /* one KV head of 256, bf16: 2 * 256 * 2 = 1024 bytes per token and layer */
    EXACT(d[op_index(&c, 0, OP_ATTENTION)].kv_read_bytes, 2.0 * 512 * 1024);
    EXACT(d[op_index(&c, 5, OP_ATTENTION)].kv_read_bytes, 2.0 * 10000 * 1024);
    free(d);
    cost_memory m;
    cost_memory_of(&c, &w, &m);
    EXACT(m.kv_bytes, 2.0 * (22 * 512.0 + 4 * 10000.0) * 1024);
}

/* workload_decode: the CPU reference's decode workload (fp32 activations and KV, the weights'
 * dtype as given): a decode step of tinyllama reads each weight once in that dtype (fp32 4 bytes a
 * weight, bf16 2) and one token's KV row per layer and position in fp32. */
Test(cost_model, workload_decode_is_the_cpu_reference_workload) {
    model_config c = preset("tinyllama-1.1b");
    const workload w = workload_decode(4, 100, XF_BF16);
    cr_assert(w.batch == 4 && w.prompt == 100 && w.gen == 2 && w.wdtype == XF_BF16 && w.adtype == XF_FP32 &&
              w.kvdtype == XF_FP32 && w.quant_group == 0);
    cost_op *o = step(&c, &w, workload_decode_step(&w, 101));
    const workload w32 = workload_decode(4, 100, XF_FP32);
    cost_op *o32 = step(&c, &w32, workload_decode_step(&w32, 101));
    const cost_op *q = &o[op_index(&c, 0, OP_QKV)], *q32 = &o32[op_index(&c, 0, OP_QKV)];
    EXACT(q->weight_bytes, 2.0 * (double)c.d_model * (double)(c.n_heads + 2 * c.n_kv_heads) * (double)c.head_dim);
    EXACT(q32->weight_bytes, 2 * q->weight_bytes);
    const cost_op *a = &o[op_index(&c, 0, OP_ATTENTION)]; /* 4 sequences x 101 positions x K and V, fp32 */
    EXACT(a->kv_read_bytes, 4.0 * 101 * 2 * (double)(c.n_kv_heads * c.head_dim) * 4);
    free(o);
    free(o32);
}
