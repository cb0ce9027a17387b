/* The cost model: analytic FLOPs and compulsory bytes of every op of one forward step.
 *
 * Notation (one step): B sequences, T new tokens each, context C tokens per sequence (C
 * includes the T new tokens), N = B * T token rows. d = d_model, h = n_heads, kv = n_kv_heads,
 * hd = head_dim, q_dim = h * hd, kv_dim = kv * hd, f = d_ff, V = vocab, L = n_layers.
 *
 * Byte conventions:
 * - weights at wdtype; int8 / int4 weights carry one fp16 scale per quant_group elements along
 *   the input (reduction) dimension, so a matrix's row length is its input dimension;
 * - norm weights and biases stay 16-bit (fp16) when the weights are quantized or fp8, else they
 *   are stored at wdtype (fp32 / fp16 / bf16) like the matrices;
 * - activations at adtype (int8 activations: one scale per quant_group along the row);
 * - KV at kvdtype; int8 / int4 KV carry ceil(hd / quant_group) scales per head vector;
 * - logits are fp32 (sampling needs the full range), token ids are int32.
 * Every count is a double: exact below 2^53, and a 70B prefill of thousands of tokens stays far
 * below that. */
#include "cost_model.h"

#include <math.h>
#include <string.h>

/* FLOPs per element of the element-wise ops (the constants the analysis rests on):
 * - RMSNorm: square, accumulate, scale by rsqrt(mean), multiply by the weight: 4 per element;
 * - RoPE: each pair (x0, x1) -> (x0 c - x1 s, x0 s + x1 c) is 4 mul + 2 add: 3 per element;
 * - SwiGLU: silu(g) = g / (1 + exp(-g)) counted as 4 (neg, exp, add, div), times up: 5 per
 *   element of d_ff;
 * - softmax: max, subtract, exp, sum, divide: 5 per score;
 * - residual add: 1 per element; greedy argmax: 1 compare per logit. */
#define FLOPS_NORM 4.0
#define FLOPS_ROPE 3.0
#define FLOPS_SWIGLU 5.0
#define FLOPS_GEGLU 9.0 /* gelu_pytorch_tanh(g) * u: x^3, the affine, tanh, 1 +, 0.5 x *, * u (tanh counted as one) */
#define FLOPS_SOFTMAX 5.0
#define LOGIT_BYTES 4.0 /* fp32 logits */
#define TOKEN_BYTES 4.0 /* int32 token ids */

int64_t cost_step_op_count(const model_config *cfg) {
    if (!cfg || cfg->n_layers < 0) return 0;
    return 4 + 12 * cfg->n_layers;
}

xf_compute cost_compute_of(xf_dtype adtype) {
    switch (adtype) {
    case XF_FP16:
    case XF_BF16: return XF_COMPUTE_TENSOR16;
    case XF_FP8: return XF_COMPUTE_FP8;
    case XF_INT8: return XF_COMPUTE_INT8;
    default: return XF_COMPUTE_FP32;
    }
}

/* Storage type of norm weights and biases (see the header comment). */
static xf_dtype small_param_dtype(xf_dtype wdtype) {
    return (wdtype == XF_FP32 || wdtype == XF_FP16 || wdtype == XF_BF16) ? wdtype : XF_FP16;
}

static int group_of(const workload *w) { return w->quant_group > 0 ? w->quant_group : XF_DEFAULT_QUANT_GROUP; }

/* Bytes of a weight matrix of `elems` elements whose input dimension is `in_dim`. */
static double wbytes(const workload *w, double elems, int64_t in_dim) {
    return dtype_bytes(w->wdtype, elems, in_dim, group_of(w));
}

/* Bytes of `rows` activation rows of `row_len` elements. */
static double abytes(const workload *w, double rows, int64_t row_len) {
    return dtype_bytes(w->adtype, rows * (double)row_len, row_len, group_of(w));
}

/* Bytes of `vectors` K or V head vectors of head_dim elements. */
static double kvbytes(const model_config *cfg, const workload *w, double vectors) {
    return dtype_bytes(w->kvdtype, vectors * (double)cfg->head_dim, cfg->head_dim, group_of(w));
}

double cost_kv_bytes_per_token(const model_config *cfg, xf_dtype kvdtype, int quant_group) {
    if (!cfg || cfg->n_layers <= 0 || cfg->n_kv_heads <= 0 || cfg->head_dim <= 0) return 0.0;
    int g = quant_group > 0 ? quant_group : XF_DEFAULT_QUANT_GROUP;
    if (model_is_mla(cfg)) { /* one latent row [c_kv | k_rope] per layer, shared by every head */
        const int64_t row = cfg->kv_lora_rank + cfg->qk_rope_head_dim;
        return dtype_bytes(kvdtype, (double)cfg->n_layers * (double)row, row, g);
    }
    /* K and V, every layer, every KV head: 2 * L * kv head vectors. */
    double vectors = 2.0 * (double)cfg->n_layers * (double)cfg->n_kv_heads;
    return dtype_bytes(kvdtype, vectors * (double)cfg->head_dim, cfg->head_dim, g);
}

static void op_set(cost_op *op, xf_phase phase, int layer, op_kind kind, xf_compute compute, double flops,
                   double weight, double act_in, double act_out, double kv_read, double kv_write) {
    op->phase = phase;
    op->layer = layer;
    op->kind = kind;
    op->compute = compute;
    op->flops = flops;
    op->weight_bytes = weight;
    op->act_in_bytes = act_in;
    op->act_out_bytes = act_out;
    op->kv_read_bytes = kv_read;
    op->kv_write_bytes = kv_write;
    op->bytes = weight + act_in + act_out + kv_read + kv_write;
    op->comm_bytes = 0; /* collectives only (reference_model/cost_parallel.c) */
    op->comm_hops = op->comm_node = 0;
}

/* (query, key) pairs of one sequence under the causal mask: new token i (1..T) sits at
 * position C - T + i and attends to that many keys, so the sum is T * (C - T) + T (T + 1) / 2.
 * Prefill (C == T): T (T + 1) / 2. Decode (T == 1): C. */
double cost_attention_pairs(int64_t tokens, int64_t context) {
    double t = (double)tokens, c = (double)context;
    return t * (c - t) + t * (t + 1.0) / 2.0;
}

double cost_window_pairs(double t, double c, double w) {
    if (!(w > 0) || w >= c) return t * (c - t) + t * (t + 1.0) / 2.0;
    const double a = c - t + 1.0; /* first query's position, 1-based */
    if (a > w) return t * w;      /* every query sees a full window */
    /* q = a .. w sees q keys, q = w + 1 .. c sees w */
    return (w - a + 1.0) * (a + w) / 2.0 + (c - w) * w;
}

double cost_moe_experts_read(int64_t n_experts, int64_t top_k, double tokens) {
    if (n_experts <= 0 || top_k <= 0 || !(tokens > 0)) return 0.0;
    const double E = (double)n_experts, k = (double)(top_k < n_experts ? top_k : n_experts);
    return E * (1.0 - pow(1.0 - k / E, tokens));
}

/* Weights an MoE layer's gate_up (router, `experts` experts' gate/up, the shared expert's gate/up
 * and gate) or down (`experts` experts' down, the shared expert's) reads; 0 for other kinds. */
static double moe_weight_bytes(const model_config *cfg, const workload *w, op_kind kind, double experts) {
    const int64_t d = cfg->d_model, fe = cfg->d_ff_expert, fs = cfg->d_ff_shared;
    if (kind == OP_GATE_UP)
        return wbytes(w, (double)d * (double)cfg->n_experts, d) + experts * wbytes(w, 2.0 * (double)d * (double)fe, d) +
               (fs > 0 ? wbytes(w, 2.0 * (double)d * (double)fs, d) : 0) +
               (cfg->shared_expert_gate ? dtype_bytes(small_param_dtype(w->wdtype), (double)d, 0, 0) : 0);
    if (kind == OP_DOWN) return experts * wbytes(w, (double)fe * (double)d, fe) + (fs > 0 ? wbytes(w, (double)fs * (double)d, fs) : 0);
    return 0;
}

void cost_moe_set_experts(const model_config *cfg, const workload *w, cost_op *op, double experts) {
    if (!cfg || !w || !op || !(experts >= 0) || !model_layer_is_moe(cfg, op->layer) || (op->kind != OP_GATE_UP && op->kind != OP_DOWN))
        return;
    op->weight_bytes = moe_weight_bytes(cfg, w, op->kind, experts);
    op->bytes = op->weight_bytes + op->act_in_bytes + op->act_out_bytes + op->kv_read_bytes + op->kv_write_bytes;
}

cost_step_sums cost_sums_of_shape(step_shape s) {
    cost_step_sums r = {s.phase, 0, 0, 0, 0, 0, 0, 0};
    if (s.batch < 1 || s.tokens < 1 || s.context < s.tokens) return r; /* cost_step_of_sums refuses it */
    r.seqs = (double)s.batch;
    r.rows = (double)s.batch * (double)s.tokens;
    r.pairs = (double)s.batch * cost_attention_pairs(s.tokens, s.context);
    r.kv_tokens = (double)s.batch * (double)s.context;
    return r;
}

xf_status cost_sums_add(cost_step_sums *s, int64_t tokens, int64_t context) {
    if (!s) return xf_errorf(XF_EINVAL, "cost_sums_add: no sums");
    if (tokens < 1 || context < tokens)
        return xf_errorf(XF_EINVAL, "cost_sums_add: a sequence with %lld new tokens at context %lld: need tokens >= 1 and "
                         "context >= tokens", (long long)tokens, (long long)context);
    s->seqs += 1.0;
    s->rows += (double)tokens;
    s->pairs += cost_attention_pairs(tokens, context);
    s->kv_tokens += (double)context;
    if (s->window > 0) {
        s->win_pairs += cost_window_pairs((double)tokens, (double)context, (double)s->window);
        double seen = (double)tokens + (double)s->window - 1.0;
        s->win_kv_tokens += seen < (double)context ? seen : (double)context;
    }
    return XF_OK;
}

/* The five attention ops of an MLA layer (DeepseekV3Attention), into ops[0..5): qkv, rope,
 * kv_append, attention, o_proj. h heads, dn = qk_nope, dr = qk_rope, dv = v_head, r = kv_lora,
 * qr = q_lora, qh = dn + dr; N rows, P causal pairs, C context tokens summed over sequences.
 * - qkv: Q = q_b(RMSNorm(q_a(x))) (or q_proj(x)), [c_kv | k_rope] = kv_a(x), RMSNorm of c_kv;
 *   absorbed, also q_nope times each head's K block of kv_b (dn x r): Q in the latent space, h (r + dr);
 * - rope: the rotated parts, h + 1 vectors of dr per row (k_rope is one vector shared by the heads);
 * - kv_append: the latent row (r + dr) per token into the cache;
 * - attention, naive (transformers' form): kv_b decompresses every cached c_kv of the context into
 *   K_nope and V per head (2 C r h (dn + dv) FLOPs, kv_b read once, the K and V written and read
 *   back: transformers materializes them), then h heads of qh-dim scores and dv-dim values;
 *   absorbed: scores and values in the latent space, the cache row read once for every head,
 *   h heads of (r + dr)-dim scores and r-dim values;
 * - o_proj: h dv -> d; absorbed, first each head's latent output times its V block of kv_b (r x dv).
 * kv_b's weights are read in one op (naive: attention) or split over qkv and o_proj (absorbed):
 * the same bytes per layer either way. */
static void mla_attention_ops(const model_config *cfg, const workload *w, xf_phase ph, int layer, double N, double P,
                              double C, cost_op *o) {
    const int64_t d = cfg->d_model, r = cfg->kv_lora_rank, qr = cfg->q_lora_rank, dn = cfg->qk_nope_head_dim,
                  dr = cfg->qk_rope_head_dim, dv = cfg->v_head_dim, qh = dn + dr, lat = r + dr;
    const double h = (double)cfg->n_heads;
    const xf_dtype small = small_param_dtype(w->wdtype);
    const xf_compute gemm = cost_compute_of(w->adtype), ew = XF_COMPUTE_FP32;
    const int absorbed = cfg->mla_absorbed;
    const int64_t q_width = cfg->n_heads * qh;
    /* Q side */
    double fl, wb;
    if (qr > 0) {
        fl = 2.0 * N * (double)d * (double)qr + FLOPS_NORM * N * (double)qr + 2.0 * N * (double)qr * (double)q_width;
        wb = wbytes(w, (double)d * (double)qr, d) + dtype_bytes(small, (double)qr, 0, 0) + wbytes(w, (double)qr * (double)q_width, qr);
    } else {
        fl = 2.0 * N * (double)d * (double)q_width;
        wb = wbytes(w, (double)d * (double)q_width, d);
    }
    /* KV side: kv_a and the latent's RMSNorm */
    fl += 2.0 * N * (double)d * (double)lat + FLOPS_NORM * N * (double)r;
    wb += wbytes(w, (double)d * (double)lat, d) + dtype_bytes(small, (double)r, 0, 0);
    double q_out = abytes(w, N * h, qh); /* Q as the attention reads it */
    if (absorbed) {
        fl += 2.0 * N * h * (double)dn * (double)r;
        wb += wbytes(w, h * (double)dn * (double)r, dn); /* W_UK: (h, dn, r), reduced over dn */
        q_out = abytes(w, N * h, lat);
    }
    op_set(&o[0], ph, layer, OP_QKV, gemm, fl, wb, abytes(w, N, d), q_out + abytes(w, N, lat), 0, 0);
    const double rope_io = abytes(w, N * (h + 1.0), dr);
    op_set(&o[1], ph, layer, OP_ROPE, ew, FLOPS_ROPE * N * (h + 1.0) * (double)dr, 0, rope_io, rope_io, 0, 0);
    op_set(&o[2], ph, layer, OP_KV_APPEND, ew, 0.0, 0, abytes(w, N, lat), 0, 0,
           dtype_bytes(w->kvdtype, N * (double)lat, lat, group_of(w)));
    const double kv_read = dtype_bytes(w->kvdtype, C * (double)lat, lat, group_of(w));
    if (!absorbed) {
        const double kvb_fl = 2.0 * C * (double)r * h * (double)(dn + dv);
        const double kv_mat = abytes(w, C * h, dn + dv); /* the decompressed K_nope and V */
        const double att = P * h * (2.0 * (double)qh + 2.0 * (double)dv + FLOPS_SOFTMAX);
        op_set(&o[3], ph, layer, OP_ATTENTION, gemm, kvb_fl + att, wbytes(w, (double)r * h * (double)(dn + dv), r),
               abytes(w, N * h, qh) + kv_mat, kv_mat + abytes(w, N * h, dv), kv_read, 0);
        op_set(&o[4], ph, layer, OP_O_PROJ, gemm, 2.0 * N * h * (double)dv * (double)d,
               wbytes(w, h * (double)dv * (double)d, cfg->n_heads * dv), abytes(w, N * h, dv), abytes(w, N, d), 0, 0);
    } else {
        const double att = P * h * (2.0 * (double)lat + 2.0 * (double)r + FLOPS_SOFTMAX);
        op_set(&o[3], ph, layer, OP_ATTENTION, gemm, att, 0, abytes(w, N * h, lat), abytes(w, N * h, r), kv_read, 0);
        op_set(&o[4], ph, layer, OP_O_PROJ, gemm, 2.0 * N * h * (double)r * (double)dv + 2.0 * N * h * (double)dv * (double)d,
               wbytes(w, h * (double)r * (double)dv, r) + wbytes(w, h * (double)dv * (double)d, cfg->n_heads * dv),
               abytes(w, N * h, r), abytes(w, N, d), 0, 0);
    }
}

/* Weight bytes of one MLA attention block (the matrices of mla_attention_ops, kv_b whole). */
static double mla_weight_bytes(const model_config *cfg, const workload *w) {
    const int64_t d = cfg->d_model, r = cfg->kv_lora_rank, qr = cfg->q_lora_rank, dn = cfg->qk_nope_head_dim,
                  dr = cfg->qk_rope_head_dim, dv = cfg->v_head_dim;
    const double h = (double)cfg->n_heads, q_width = h * (double)(dn + dr);
    const xf_dtype small = small_param_dtype(w->wdtype);
    double b = qr > 0 ? wbytes(w, (double)d * (double)qr, d) + dtype_bytes(small, (double)qr, 0, 0) + wbytes(w, (double)qr * q_width, qr)
                      : wbytes(w, (double)d * q_width, d);
    b += wbytes(w, (double)d * (double)(r + dr), d) + dtype_bytes(small, (double)r, 0, 0);
    b += cfg->mla_absorbed ? wbytes(w, h * (double)dn * (double)r, dn) + wbytes(w, h * (double)r * (double)dv, r)
                           : wbytes(w, (double)r * h * (double)(dn + dv), r);
    return b + wbytes(w, h * (double)dv * (double)d, cfg->n_heads * dv);
}

xf_status cost_step(const model_config *cfg, const workload *w, step_shape s, cost_op *ops, int64_t count) {
    if (s.batch < 1 || s.tokens < 1 || s.context < s.tokens)
        return xf_errorf(XF_EINVAL,
                         "cost_step: step of batch %lld, %lld new tokens, context %lld: need batch >= 1, "
                         "tokens >= 1 and context >= tokens",
                         (long long)s.batch, (long long)s.tokens, (long long)s.context);
    cost_step_sums sums = cost_sums_of_shape(s);
    return cost_step_of_sums(cfg, w, &sums, ops, count);
}

xf_status cost_step_of_sums(const model_config *cfg, const workload *w, const cost_step_sums *sums, cost_op *ops,
                            int64_t count) {
    if (!cfg || !w || !sums || !ops) return xf_errorf(XF_EINVAL, "cost_step: missing config, workload, step or output");
    xf_status st = config_validate(cfg);
    if (st != XF_OK) return st;
    st = workload_validate(w);
    if (st != XF_OK) return st;
    if (sums->phase != XF_PREFILL && sums->phase != XF_DECODE)
        return xf_errorf(XF_EINVAL, "cost_step: unknown phase %d", (int)sums->phase);
    /* Each sequence has at least one new token, each new token at least itself as context. */
    if (!(sums->seqs >= 1.0) || !(sums->rows >= sums->seqs) || !(sums->pairs >= sums->rows) ||
        !(sums->kv_tokens >= sums->rows) || !isfinite(sums->pairs + sums->kv_tokens + sums->rows))
        return xf_errorf(XF_EINVAL,
                         "cost_step: inconsistent step (%.0f sequences, %.0f new tokens, %.0f attention pairs, %.0f "
                         "context tokens): need at least one sequence with one new token",
                         sums->seqs, sums->rows, sums->pairs, sums->kv_tokens);
    int64_t need = cost_step_op_count(cfg);
    if (count < need)
        return xf_errorf(XF_EINVAL, "cost_step: output holds %lld ops, the step has %lld", (long long)count,
                         (long long)need);

    const double B = sums->seqs, N = sums->rows, KVT = sums->kv_tokens;
    /* windowed layers: what their attention reads (see cost_step_sums) */
    double win_pairs = 0, win_kvt = 0;
    if (cfg->sliding_window > 0) {
        const double W = (double)cfg->sliding_window;
        if (sums->window == cfg->sliding_window) {
            win_pairs = sums->win_pairs;
            win_kvt = sums->win_kv_tokens;
        } else {
            const double t = N / B, c = KVT / B, seen = t + W - 1.0;
            win_pairs = B * cost_window_pairs(t, c, W);
            win_kvt = B * (seen < c ? seen : c);
        }
    }
    const int64_t d = cfg->d_model, hd = cfg->head_dim, f = cfg->d_ff, V = cfg->vocab;
    const int64_t q_dim = cfg->n_heads * hd, kv_dim = cfg->n_kv_heads * hd;
    const int64_t qkv_out = q_dim + 2 * kv_dim; /* GQA: K and V are d x kv_dim each */
    const double h = (double)cfg->n_heads, kvh = (double)cfg->n_kv_heads;
    const xf_dtype small = small_param_dtype(w->wdtype);
    const xf_compute gemm = cost_compute_of(w->adtype);
    const xf_compute ew = XF_COMPUTE_FP32;
    const xf_phase ph = sums->phase;
    int64_t i = 0;

    /* Embedding: gather N rows (at most the whole table) and the N token ids; write N x d. */
    double rows = N < (double)V ? N : (double)V;
    /* gemma3 scales the rows by sqrt(d): one multiply per element */
    op_set(&ops[i++], ph, -1, OP_EMBEDDING, ew, cfg->embed_scale != 0 ? N * (double)d : 0.0, wbytes(w, rows * (double)d, d),
           N * TOKEN_BYTES, abytes(w, N, d), 0, 0);

    const double norm_w = dtype_bytes(small, (double)d, 0, 0);
    /* gemma3's post-attention / post-feedforward norms run in the residual ops (on the sublayer's
     * output, before the add): their FLOPs and weights */
    const double post_fl = cfg->sandwich_norms ? FLOPS_NORM * N * (double)d : 0, post_w = cfg->sandwich_norms ? norm_w : 0;
    const double act_fl = cfg->ffn_gelu ? FLOPS_GEGLU : FLOPS_SWIGLU;
    for (int64_t l = 0; l < cfg->n_layers; l++) {
        int layer = (int)l;
        op_set(&ops[i++], ph, layer, OP_ATTN_NORM, ew, FLOPS_NORM * N * (double)d, norm_w, abytes(w, N, d),
               abytes(w, N, d), 0, 0);

        const int windowed = model_layer_window(cfg, l) > 0;
        if (model_is_mla(cfg)) {
            mla_attention_ops(cfg, w, ph, layer, N, sums->pairs, KVT, &ops[i]);
            i += 5; /* qkv, rope, kv_append, attention, o_proj */
            goto residual;
        }
        double qkv_flops = 2.0 * N * (double)d * (double)qkv_out;
        double qkv_w = wbytes(w, (double)d * (double)qkv_out, d);
        if (cfg->qkv_bias) {
            qkv_flops += N * (double)qkv_out;
            qkv_w += dtype_bytes(small, (double)qkv_out, 0, 0);
        }
        op_set(&ops[i++], ph, layer, OP_QKV, gemm, qkv_flops, qkv_w, abytes(w, N, d), abytes(w, N, qkv_out), 0, 0);

        /* RoPE rotates Q and K in place: read and write N x (q_dim + kv_dim). cos/sin are
         * computed on the fly or from a table small enough to stay in cache: not counted. Scaled RoPE
         * (linear, llama3, yarn) changes the frequencies only: the same FLOPs and bytes. */
        double rope_in = abytes(w, N * h, hd) + abytes(w, N * kvh, hd);
        double rope_flops = FLOPS_ROPE * N * (double)(q_dim + kv_dim), rope_w = 0;
        if (cfg->qk_norm) { /* qwen3: RMSNorm of every Q and K head (head_dim weights each) first, in the same pass */
            rope_flops += FLOPS_NORM * N * (double)(q_dim + kv_dim);
            rope_w = dtype_bytes(small, 2.0 * (double)hd, 0, 0);
        }
        op_set(&ops[i++], ph, layer, OP_ROPE, ew, rope_flops, rope_w, rope_in, rope_in, 0, 0);

        /* KV append: read the new K and V rows, write them into the cache at kvdtype. */
        op_set(&ops[i++], ph, layer, OP_KV_APPEND, ew, 0.0, 0, 2.0 * abytes(w, N * kvh, hd), 0, 0,
               kvbytes(cfg, w, 2.0 * N * kvh));

        /* Attention, fused (FlashAttention-style compulsory traffic): QK^T and PV are 2 FLOPs per
         * multiply-add over hd for each (query, key) pair and query head: 2 * 2 * hd; softmax adds
         * FLOPS_SOFTMAX per score. Q read once, each sequence's K and V read once (shared by the
         * h / kv query heads of a group), O written once; no score matrix reaches memory. */
        /* A sliding-window layer's queries see at most the window: fewer pairs, and only the
         * keys some query of the step sees are read. */
        double pairs = windowed ? win_pairs : sums->pairs, kv_read_tokens = windowed ? win_kvt : KVT;
        double att_flops = pairs * h * (4.0 * (double)hd + FLOPS_SOFTMAX);
        double q_bytes = abytes(w, N * h, hd);
        op_set(&ops[i++], ph, layer, OP_ATTENTION, gemm, att_flops, 0, q_bytes, q_bytes,
               kvbytes(cfg, w, 2.0 * kv_read_tokens * kvh), 0);

        double o_bias_fl = cfg->o_bias ? N * (double)d : 0, o_bias_w = cfg->o_bias ? dtype_bytes(small, (double)d, 0, 0) : 0;
        op_set(&ops[i++], ph, layer, OP_O_PROJ, gemm, 2.0 * N * (double)q_dim * (double)d + o_bias_fl,
               wbytes(w, (double)q_dim * (double)d, q_dim) + o_bias_w, abytes(w, N, q_dim), abytes(w, N, d), 0, 0);

    residual:
        op_set(&ops[i++], ph, layer, OP_ATTN_RESIDUAL, ew, N * (double)d + post_fl, post_w, 2.0 * abytes(w, N, d), abytes(w, N, d),
               0, 0);

        op_set(&ops[i++], ph, layer, OP_FFN_NORM, ew, FLOPS_NORM * N * (double)d, norm_w, abytes(w, N, d),
               abytes(w, N, d), 0, 0);

        if (model_layer_is_moe(cfg, l)) {
            /* Mixture of experts. gate_up: the router (d -> E logits, softmax and top-k: 5 FLOPs per
             * logit), the chosen experts' gate/up GEMMs, k per token, and the shared expert's (with
             * its gate's dot product); the weights read are those of the distinct experts the
             * step's N tokens select: the expected number under uniform routing,
             * E (1 - (1 - k/E)^N) (cost_moe_experts_read); a measured run sets the number its
             * router chose (cost_moe_set_experts). down: the experts' down GEMMs, the sum of the k
             * outputs weighted by the router (2 FLOPs per element), the shared expert's down, its
             * gate and add (2 per element). deepseek_v3's sigmoid scores and group choice count
             * like the softmax (5 FLOPs per logit), its ungated shared MLP like qwen2_moe's. */
            const double k = (double)cfg->experts_per_tok, fe = (double)cfg->d_ff_expert, fs = (double)cfg->d_ff_shared;
            const double E = (double)cfg->n_experts, D = cost_moe_experts_read(cfg->n_experts, cfg->experts_per_tok, N);
            const double sh_fl = fs > 0 ? 2.0 * N * (double)d * 2.0 * fs : 0, gate_fl = cfg->shared_expert_gate ? 2.0 * N * (double)d : 0;
            const double rows_ff = N * k * fe + N * fs; /* expert and shared intermediate elements */
            const double ff_b = abytes(w, N * k, cfg->d_ff_expert) + (fs > 0 ? abytes(w, N, cfg->d_ff_shared) : 0); /* their bytes */
            op_set(&ops[i++], ph, layer, OP_GATE_UP, gemm,
                   2.0 * N * (double)d * E + FLOPS_SOFTMAX * N * E + 2.0 * N * k * (double)d * 2.0 * fe + sh_fl + gate_fl,
                   moe_weight_bytes(cfg, w, OP_GATE_UP, D), abytes(w, N, d), 2.0 * ff_b, 0, 0);
            op_set(&ops[i++], ph, layer, OP_SWIGLU, ew, FLOPS_SWIGLU * rows_ff, 0, 2.0 * ff_b, ff_b, 0, 0);
            op_set(&ops[i++], ph, layer, OP_DOWN, gemm,
                   2.0 * N * k * fe * (double)d + 2.0 * N * k * (double)d + (fs > 0 ? 2.0 * N * fs * (double)d + 2.0 * N * (double)d : 0),
                   moe_weight_bytes(cfg, w, OP_DOWN, D), ff_b, abytes(w, N, d), 0, 0);
            op_set(&ops[i++], ph, layer, OP_FFN_RESIDUAL, ew, N * (double)d, 0, 2.0 * abytes(w, N, d), abytes(w, N, d), 0, 0);
            continue;
        }
        /* mlp_bias (llama): 2 * d_ff biases on gate/up, d_model on down, one add per output */
        const double gu_b = cfg->mlp_bias ? 2.0 * (double)f : 0, dn_b = cfg->mlp_bias ? (double)d : 0;
        op_set(&ops[i++], ph, layer, OP_GATE_UP, gemm, 2.0 * N * (double)d * 2.0 * (double)f + N * gu_b,
               wbytes(w, 2.0 * (double)d * (double)f, d) + dtype_bytes(small, gu_b, 0, 0), abytes(w, N, d),
               2.0 * abytes(w, N, f), 0, 0);

        op_set(&ops[i++], ph, layer, OP_SWIGLU, ew, act_fl * N * (double)f, 0, 2.0 * abytes(w, N, f),
               abytes(w, N, f), 0, 0);

        op_set(&ops[i++], ph, layer, OP_DOWN, gemm, 2.0 * N * (double)f * (double)d + N * dn_b,
               wbytes(w, (double)f * (double)d, f) + dtype_bytes(small, dn_b, 0, 0), abytes(w, N, f), abytes(w, N, d), 0, 0);

        op_set(&ops[i++], ph, layer, OP_FFN_RESIDUAL, ew, N * (double)d + post_fl, post_w, 2.0 * abytes(w, N, d), abytes(w, N, d),
               0, 0);
    }

    /* Only the last token of each sequence needs logits (prefill) and decode has one token per
     * sequence: the final norm, lm_head and sampling work on B rows in both phases. */
    op_set(&ops[i++], ph, -1, OP_FINAL_NORM, ew, FLOPS_NORM * B * (double)d, norm_w, abytes(w, B, d),
           abytes(w, B, d), 0, 0);
    /* lm_head reads the whole V x d matrix (the embedding matrix when tied) and writes fp32 logits. */
    op_set(&ops[i++], ph, -1, OP_LM_HEAD, gemm, 2.0 * B * (double)d * (double)V, wbytes(w, (double)V * (double)d, d),
           abytes(w, B, d), B * (double)V * LOGIT_BYTES, 0, 0);
    op_set(&ops[i++], ph, -1, OP_SAMPLING, ew, B * (double)V, 0, B * (double)V * LOGIT_BYTES, B * TOKEN_BYTES, 0, 0);
    return XF_OK;
}

void cost_step_totals(const cost_op *ops, int64_t count, double *flops, double *bytes) {
    double fl = 0.0, by = 0.0;
    for (int64_t i = 0; ops && i < count; i++) {
        fl += ops[i].flops;
        by += ops[i].bytes;
    }
    if (flops) *flops = fl;
    if (bytes) *bytes = by;
}

double cost_weight_bytes(const model_config *cfg, const workload *w) {
    if (!cfg || !w || config_validate(cfg) != XF_OK || workload_validate(w) != XF_OK) return 0.0;
    const int64_t d = cfg->d_model, hd = cfg->head_dim, f = cfg->d_ff, V = cfg->vocab;
    const int64_t q_dim = cfg->n_heads * hd, kv_dim = cfg->n_kv_heads * hd, qkv_out = q_dim + 2 * kv_dim;
    const xf_dtype small = small_param_dtype(w->wdtype);
    double per_layer = (model_is_mla(cfg) ? mla_weight_bytes(cfg, w)
                                          : wbytes(w, (double)d * (double)qkv_out, d) + wbytes(w, (double)q_dim * (double)d, q_dim)) +
                       dtype_bytes(small, 2.0 * (double)d, 0, 0); /* attn_norm and ffn_norm */
    const double dense_ffn = wbytes(w, 2.0 * (double)d * (double)f, d) + wbytes(w, (double)f * (double)d, f);
    /* an MoE layer holds the router and every expert */
    const double E = (double)cfg->n_experts;
    const double moe_ffn = cfg->n_experts > 0 ? moe_weight_bytes(cfg, w, OP_GATE_UP, E) + moe_weight_bytes(cfg, w, OP_DOWN, E) : 0.0;
    const double n_moe = (double)model_moe_layers(cfg);
    if (cfg->qkv_bias) per_layer += dtype_bytes(small, (double)qkv_out, 0, 0);
    if (cfg->o_bias) per_layer += dtype_bytes(small, (double)d, 0, 0);
    if (cfg->qk_norm) per_layer += dtype_bytes(small, 2.0 * (double)hd, 0, 0);
    if (cfg->sandwich_norms) per_layer += dtype_bytes(small, 2.0 * (double)d, 0, 0); /* gemma3's post norms */
    if (cfg->mlp_bias) per_layer += dtype_bytes(small, 2.0 * (double)f + (double)d, 0, 0);
    double emb = wbytes(w, (double)V * (double)d, d);
    double total = emb + (double)cfg->n_layers * per_layer + ((double)cfg->n_layers - n_moe) * dense_ffn + n_moe * moe_ffn +
                   dtype_bytes(small, (double)d, 0, 0); /* final norm */
    if (!cfg->tied_embeddings) total += emb;                                                      /* lm_head */
    return total;
}

/* Peak live activations of the prefill step (N = B * prompt rows), as the largest of three
 * moments of the step; the residual stream x and the normed copy xb are live throughout a layer:
 * - attention: x + xb (2 N d) + Q, K, V (N (q_dim + 2 kv_dim)) + attention output (N q_dim);
 *   the fused kernel keeps no N x N score matrix;
 * - FFN: x + xb (2 N d) + gate and up (2 N f) + the SwiGLU output (N f);
 * - head: x (N d) + the B normed last rows (B d) + fp32 logits (B V) + B token ids.
 * Working buffers only: the KV cache is counted separately, weights too. */
static double prefill_activation_peak(const model_config *cfg, const workload *w, double B) {
    const int64_t d = cfg->d_model, hd = cfg->head_dim, f = cfg->d_ff, V = cfg->vocab;
    const int64_t q_dim = cfg->n_heads * hd, kv_dim = cfg->n_kv_heads * hd;
    const double N = B * (double)w->prompt;
    double attn = 2.0 * abytes(w, N, d) + abytes(w, N, q_dim) + 2.0 * abytes(w, N, kv_dim) + abytes(w, N, q_dim);
    if (model_is_mla(cfg)) { /* x + xb, Q, the latent rows, then (naive) the decompressed K_nope and V, the output */
        const int64_t h = cfg->n_heads, dn = cfg->qk_nope_head_dim, dr = cfg->qk_rope_head_dim, dv = cfg->v_head_dim,
                      r = cfg->kv_lora_rank;
        attn = 2.0 * abytes(w, N, d) + abytes(w, N, r + dr) + abytes(w, N * (double)h, dv) +
               (cfg->mla_absorbed ? abytes(w, N * (double)h, r + dr) + abytes(w, N * (double)h, r)
                                  : abytes(w, N * (double)h, dn + dr) + abytes(w, N * (double)h, dn + dv));
    }
    double ffn = 2.0 * abytes(w, N, d) + 2.0 * abytes(w, N, f) + abytes(w, N, f);
    if (cfg->n_experts > 0) { /* an MoE layer: k expert rows per token */
        const double k = (double)cfg->experts_per_tok;
        double moe = 2.0 * abytes(w, N, d) + 3.0 * abytes(w, N * k, cfg->d_ff_expert) + N * (double)cfg->n_experts * 4.0 +
                     3.0 * abytes(w, N, cfg->d_ff_shared);
        ffn = ffn > moe ? ffn : moe;
    }
    double head = abytes(w, N, d) + abytes(w, B, d) + B * (double)V * LOGIT_BYTES + B * TOKEN_BYTES;
    double peak = attn > ffn ? attn : ffn;
    return peak > head ? peak : head;
}

static void memory_for_batch(const model_config *cfg, const workload *w, double weights, double batch,
                             cost_memory *out) {
    out->weights_bytes = weights;
    out->kv_bytes_per_token = cost_kv_bytes_per_token(cfg, w->kvdtype, w->quant_group);
    /* a windowed layer holds at most `window` tokens of KV per sequence (an engine frees the rest) */
    const double len = (double)(w->prompt + w->gen), L = (double)cfg->n_layers, nw = (double)model_windowed_layers(cfg);
    const double wlen = cfg->sliding_window > 0 && (double)cfg->sliding_window < len ? (double)cfg->sliding_window : len;
    out->kv_bytes = batch * out->kv_bytes_per_token * ((L - nw) * len + nw * wlen) / L;
    out->activations_bytes = prefill_activation_peak(cfg, w, batch);
    out->total_bytes = out->weights_bytes + out->kv_bytes + out->activations_bytes;
}

void cost_memory_of(const model_config *cfg, const workload *w, cost_memory *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!cfg || !w || config_validate(cfg) != XF_OK || workload_validate(w) != XF_OK) return;
    memory_for_batch(cfg, w, cost_weight_bytes(cfg, w), (double)w->batch, out);
    out->active_weights_bytes = out->weights_bytes;
    if (cfg->n_experts > 0) { /* less the unselected experts of every MoE layer */
        const double E = (double)cfg->n_experts, k = (double)cfg->experts_per_tok;
        const double one = moe_weight_bytes(cfg, w, OP_GATE_UP, 1) - moe_weight_bytes(cfg, w, OP_GATE_UP, 0) +
                           moe_weight_bytes(cfg, w, OP_DOWN, 1) - moe_weight_bytes(cfg, w, OP_DOWN, 0);
        out->active_weights_bytes -= (double)model_moe_layers(cfg) * (E - k) * one;
    }
}

/* Largest batch workload_validate accepts (its MAX_BATCH). */
#define COST_MAX_BATCH_LIMIT (1LL << 20)

int64_t cost_max_batch(const model_config *cfg, const workload *w, double capacity_bytes) {
    if (!cfg || !w || !(capacity_bytes > 0.0) || config_validate(cfg) != XF_OK) return 0;
    workload one = *w;
    one.batch = 1;
    if (workload_validate(&one) != XF_OK) return 0;
    double weights = cost_weight_bytes(cfg, &one);
    cost_memory m;
    memory_for_batch(cfg, &one, weights, 1.0, &m);
    if (m.total_bytes > capacity_bytes) return 0;
    /* Total memory is weights plus terms linear in the batch: binary search the largest batch
     * that fits, which stays right whatever rounding the dtype byte counts do. */
    int64_t lo = 1, hi = COST_MAX_BATCH_LIMIT;
    memory_for_batch(cfg, &one, weights, (double)hi, &m);
    if (m.total_bytes <= capacity_bytes) return hi;
    while (hi - lo > 1) { /* invariant: lo fits, hi does not */
        int64_t mid = lo + (hi - lo) / 2;
        memory_for_batch(cfg, &one, weights, (double)mid, &m);
        if (m.total_bytes <= capacity_bytes)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

double cost_embedding_bytes(const model_config *cfg, const workload *w) {
    if (!cfg || !w || config_validate(cfg) != XF_OK || workload_validate(w) != XF_OK) return 0.0;
    return wbytes(w, (double)cfg->vocab * (double)cfg->d_model, cfg->d_model);
}

double cost_moe_router_bytes(const model_config *cfg, const workload *w) {
    if (!cfg || !w || cfg->n_experts <= 0 || config_validate(cfg) != XF_OK || workload_validate(w) != XF_OK) return 0.0;
    return wbytes(w, (double)cfg->d_model * (double)cfg->n_experts, cfg->d_model);
}

double cost_moe_expert_bytes(const model_config *cfg, const workload *w) {
    if (!cfg || !w || cfg->n_experts <= 0 || config_validate(cfg) != XF_OK || workload_validate(w) != XF_OK) return 0.0;
    const double d = (double)cfg->d_model, fe = (double)cfg->d_ff_expert;
    return wbytes(w, 2.0 * d * fe, cfg->d_model) + wbytes(w, fe * d, cfg->d_ff_expert);
}
