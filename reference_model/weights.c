/* Model weights: allocation, deterministic random values, dtype conversion. */
#include "reference_model/weights.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hugemem.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- scalar conversions ---- */

uint16_t weights_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

float weights_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t weights_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return (uint16_t)(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504: infinity */
    if (x < 0x38800000u) {
        /* Below 2^-14: a half subnormal (or zero). v * 2^24 is exact; rint rounds to even. */
        float v;
        memcpy(&v, &x, 4);
        return (uint16_t)(sign | (uint16_t)rintf(v * 16777216.0f));
    }
    /* Rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even; a carry
     * moves into the exponent, which is the right result. */
    x += 0xc8000fffu + ((x >> 13) & 1u);
    return (uint16_t)(sign | (x >> 13));
}

float weights_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    float f;
    if (exp == 0) {
        f = (float)mant * (1.0f / 16777216.0f); /* mant * 2^-24, exact */
        return sign ? -f : f;
    }
    uint32_t u = exp == 31 ? (sign | 0x7f800000u | (mant << 13)) : (sign | ((exp + 112u) << 23) | (mant << 13));
    memcpy(&f, &u, 4);
    return f;
}

/* ---- sizes ---- */

static int mul_ok(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0) return 0;
    if (a != 0 && b > INT64_MAX / a) return 0;
    *out = a * b;
    return 1;
}

static int add_ok(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || a > INT64_MAX - b) return 0;
    *out = a + b;
    return 1;
}

/* Bytes of one (rows, cols) matrix at dtype; 0 on overflow (never a real size). */
static int64_t wmat_bytes(xf_dtype dt, int64_t rows, int64_t cols, int group) {
    int64_t n, b;
    if (!mul_ok(rows, cols, &n)) return 0;
    if (dt == XF_FP32) return mul_ok(n, 4, &b) ? b : 0;
    if (dt == XF_BF16 || dt == XF_FP16) return mul_ok(n, 2, &b) ? b : 0;
    int64_t ng = (cols + group - 1) / group, s;
    if (!mul_ok(rows, ng, &s) || !mul_ok(s, 4, &s) || !add_ok(n, s, &b)) return 0;
    return b;
}

static xf_status check_dtype(xf_dtype dtype, int group) {
    if (dtype != XF_FP32 && dtype != XF_BF16 && dtype != XF_FP16 && dtype != XF_INT8)
        return xf_errorf(XF_EINVAL, "weight dtype %s is not supported by the reference model: use fp32, bf16, fp16 or int8",
                         dtype_name(dtype));
    if (dtype == XF_INT8 && (group < 1 || group > 65536))
        return xf_errorf(XF_EINVAL, "int8 group size %d is out of range: use 1..65536 (default 128)", group);
    return XF_OK;
}

/* Columns per group in the packed layout: the group (at most cols) rounded up to 4. */
static int64_t pack_gpad(int64_t cols, int group) {
    const int64_t g = group < cols ? group : cols;
    return (g + 3) / 4 * 4;
}

int64_t weights_packed_values_bytes(int64_t rows, int64_t cols, int group) {
    if (rows < 0 || cols < 1 || group < 1) return 0;
    const int64_t rp = (rows + WMAT_PACK_ROWS - 1) / WMAT_PACK_ROWS * WMAT_PACK_ROWS, ng = (cols + group - 1) / group;
    int64_t n;
    return mul_ok(rp, ng, &n) && mul_ok(n, pack_gpad(cols, group), &n) ? n : 0;
}

int64_t weights_packed_scales_bytes(int64_t rows, int64_t cols, int group) {
    if (rows < 0 || cols < 1 || group < 1) return 0;
    const int64_t rp = (rows + WMAT_PACK_ROWS - 1) / WMAT_PACK_ROWS * WMAT_PACK_ROWS, ng = (cols + group - 1) / group;
    int64_t n;
    return mul_ok(rp, ng, &n) && mul_ok(n, 4, &n) ? n : 0;
}

/* The int8 values (scales 0) or the scales (values 0) of a matrix as held: int8 in the packed
 * layout (weights.h), its padding included, for the matrices weights_pack packs (packed 1: qkv, o,
 * the dense FFN, embeddings); row-major with fp32 scales for the others (the router, the experts,
 * the shared expert, latent attention's q_b and kv_b). */
static int64_t wmat_part(xf_dtype dt, int64_t rows, int64_t cols, int group, int scales, int packed) {
    if (dt != XF_INT8) return scales ? 0 : wmat_bytes(dt, rows, cols, group);
    int64_t b;
    if (packed) b = scales ? weights_packed_scales_bytes(rows, cols, group) : weights_packed_values_bytes(rows, cols, group);
    else if (rows < 0 || cols < 1 || group < 1) b = 0;
    else if (scales) b = mul_ok(rows, (cols + group - 1) / group, &b) && mul_ok(b, 4, &b) ? b : 0;
    else b = mul_ok(rows, cols, &b) ? b : 0;
    return b > 0 || rows == 0 ? b : -1;
}

/* Latent attention: the layer's matrices as layer_weights holds them (weights.h): qkv, o, gate_up,
 * down, then q_b (rows 0 without a q rank) and kv_b. Rewrites shapes[0], [1], fills [4], [5];
 * returns 6, or 4 for another model (shapes untouched). Sizes validated by config_validate. */
static int mla_shapes(const model_config *c, int64_t shapes[6][2]) {
    if (!model_is_mla(c)) return 4;
    const int64_t qh = c->qk_nope_head_dim + c->qk_rope_head_dim, q_width = c->n_heads * qh;
    const int64_t q_rows = c->q_lora_rank > 0 ? c->q_lora_rank : q_width;
    shapes[0][0] = q_rows + c->kv_lora_rank + c->qk_rope_head_dim;
    shapes[1][1] = c->n_heads * c->v_head_dim;
    shapes[4][0] = c->q_lora_rank > 0 ? q_width : 0;
    shapes[4][1] = c->q_lora_rank > 0 ? c->q_lora_rank : 1;
    shapes[5][0] = c->n_heads * (c->qk_nope_head_dim + c->v_head_dim);
    shapes[5][1] = c->kv_lora_rank;
    return 6;
}

xf_status weights_bytes_kinds(const model_config *c, xf_dtype dtype, int group, weights_kinds *out) {
    if (!c || !out) return xf_errorf(XF_EINVAL, "weights_bytes: NULL argument");
    if (group <= 0) group = XF_DEFAULT_QUANT_GROUP;
    xf_status st = check_dtype(dtype, group);
    if (st) return st;
    memset(out, 0, sizeof *out);
    int64_t q_dim, kv_dim, qkv_rows;
    if (!mul_ok(c->n_heads, c->head_dim, &q_dim) || !mul_ok(c->n_kv_heads, c->head_dim, &kv_dim) ||
        !add_ok(q_dim, 2 * kv_dim, &qkv_rows) || kv_dim > INT64_MAX / 4)
        return xf_errorf(XF_EOVERFLOW, "weights of %s: head sizes overflow 64 bits", c->name);
    /* the matrices of every layer (attention), of a dense FFN and of an MoE FFN (router, experts,
     * shared expert), as (rows, cols, count) */
    const int64_t fe = c->d_ff_expert, fs = c->d_ff_shared, E = c->n_experts;
    int64_t mla_sh[6][2] = {{qkv_rows, c->d_model}, {c->d_model, q_dim}, {0, 0}, {0, 0}};
    const int mla = mla_shapes(c, mla_sh) == 6; /* latent attention: its qkv rows, o columns, q_b and kv_b */
    const int64_t shapes[9][3] = {{mla_sh[0][0], c->d_model, 1}, {c->d_model, mla_sh[1][1], 1}, /* attention */
                                  {2 * c->d_ff, c->d_model, 1}, {c->d_model, c->d_ff, 1},     /* dense FFN */
                                  {E, c->d_model, 1}, {2 * fe, c->d_model, E}, {c->d_model, fe, E}, /* MoE */
                                  {2 * fs, c->d_model, 1}, {c->d_model, fs, 1}};
    int64_t vals[3] = {0, 0, 0}, scl[3] = {0, 0, 0}; /* attention, dense FFN, MoE FFN of one layer */
    for (int i = 0; i < 9; i++) {
        const int part = i < 2 ? 0 : i < 4 ? 1 : 2;
        if (part == 2 && E <= 0) break;
        if (i >= 7 && fs <= 0) break;
        const int packed = i < 4; /* weights_pack: attention and the dense FFN */
        int64_t v = wmat_part(dtype, shapes[i][0], shapes[i][1], group, 0, packed),
                q = wmat_part(dtype, shapes[i][0], shapes[i][1], group, 1, packed);
        if (v <= 0 || q < 0 || !mul_ok(v, shapes[i][2], &v) || !mul_ok(q, shapes[i][2], &q) || !add_ok(vals[part], v, &vals[part]) ||
            !add_ok(scl[part], q, &scl[part]))
            return xf_errorf(XF_EOVERFLOW, "weights of %s: a layer's size overflows 64 bits", c->name);
    }
    for (int i = 4; mla && i < 6; i++) { /* q_b (none without a q rank) and kv_b: attention's */
        if (mla_sh[i][0] == 0) continue;
        const int64_t v = wmat_part(dtype, mla_sh[i][0], mla_sh[i][1], group, 0, 0),
                      q = wmat_part(dtype, mla_sh[i][0], mla_sh[i][1], group, 1, 0);
        if (v <= 0 || q < 0 || !add_ok(vals[0], v, &vals[0]) || !add_ok(scl[0], q, &scl[0]))
            return xf_errorf(XF_EOVERFLOW, "weights of %s: a layer's size overflows 64 bits", c->name);
    }
    const int64_t n_moe = model_moe_layers(c), n_dense = c->n_layers - n_moe;
    /* norms and biases, fp32 (mlp biases on dense FFNs only; the shared expert's gate on MoE layers) */
    int64_t small = (c->sandwich_norms ? 4 : 2) * c->d_model + (c->qkv_bias ? qkv_rows : 0) + (c->o_bias ? c->d_model : 0) +
                    (c->qk_norm ? 2 * c->head_dim : 0) +
                    (model_is_mla(c) ? c->q_lora_rank + c->kv_lora_rank : 0); /* q_a and kv_a RMSNorms */
    const int64_t small_dense = c->mlp_bias ? 2 * c->d_ff + c->d_model : 0, small_moe = (c->shared_expert_gate ? c->d_model : 0) +
                          (c->moe_score == MOE_SCORE_SIGMOID_GROUPED ? c->n_experts : 0); /* e_score_correction_bias */
    const int64_t n_emb = c->tied_embeddings ? 1 : 2;
    const int64_t ev = wmat_part(dtype, c->vocab, c->d_model, group, 0, 1);
    int64_t es = wmat_part(dtype, c->vocab, c->d_model, group, 1, 1);
    int64_t nb, a, b2;
    if (ev <= 0 || es < 0 || !mul_ok(vals[0], c->n_layers, &out->layer_matrices) || !mul_ok(vals[1], n_dense, &a) ||
        !add_ok(out->layer_matrices, a, &out->layer_matrices) || !mul_ok(vals[2], n_moe, &a) ||
        !add_ok(out->layer_matrices, a, &out->layer_matrices) || !mul_ok(ev, n_emb, &out->embeddings) ||
        !mul_ok(scl[0], c->n_layers, &out->scales) || !mul_ok(scl[1], n_dense, &a) || !add_ok(out->scales, a, &out->scales) ||
        !mul_ok(scl[2], n_moe, &a) || !add_ok(out->scales, a, &out->scales) || !mul_ok(es, n_emb, &es) ||
        !add_ok(out->scales, es, &out->scales) || !mul_ok(small, 4 * (int64_t)c->n_layers, &nb) ||
        !mul_ok(small_dense, 4 * n_dense, &a) || !mul_ok(small_moe, 4 * n_moe, &b2) || !add_ok(nb, a, &nb) || !add_ok(nb, b2, &nb) ||
        !add_ok(nb, c->d_model * 4, &out->norms_biases))
        return xf_errorf(XF_EOVERFLOW, "weights of %s overflow 64 bits", c->name);
    int64_t t;
    if (!add_ok(out->layer_matrices, out->embeddings, &t) || !add_ok(t, out->scales, &t) || !add_ok(t, out->norms_biases, &t))
        return xf_errorf(XF_EOVERFLOW, "weights of %s overflow 64 bits", c->name);
    return XF_OK;
}

xf_status weights_bytes(const model_config *c, xf_dtype dtype, int group, int64_t *out) {
    if (!c || !out) return xf_errorf(XF_EINVAL, "weights_bytes: NULL argument");
    weights_kinds k;
    xf_status st = weights_bytes_kinds(c, dtype, group, &k);
    if (st) return st;
    *out = k.layer_matrices + k.embeddings + k.scales + k.norms_biases; /* checked by weights_bytes_kinds */
    return XF_OK;
}

/* ---- allocation ---- */

/* 64-byte aligned, size rounded up, on huge pages from 2 MiB up (core/hugemem.h, as the read
 * ceiling's arrays); NULL on failure; freed with free(). */
static void *alloc64(int64_t bytes) { return hugemem_alloc(bytes); }

/* The packed layout's buffers for a rows x cols int8 matrix of `group` (weights.h): values and
 * scales, their padding (rows past a multiple of WMAT_PACK_ROWS, columns of a group past a multiple
 * of 4) already weight 0 (128) and scale 0; the rest is the caller's to write, every element of it.
 * Both NULL on failure (said). */
static xf_status packed_alloc(int64_t rows, int64_t cols, int group, uint8_t **d, float **sc) {
    *d = NULL, *sc = NULL;
    const int64_t vb = weights_packed_values_bytes(rows, cols, group), sb = weights_packed_scales_bytes(rows, cols, group);
    if (vb <= 0 || sb <= 0) return xf_errorf(XF_EOVERFLOW, "a %lld x %lld int8 matrix in the packed layout: its size overflows",
                                             (long long)rows, (long long)cols);
    *d = alloc64(vb);
    *sc = alloc64(sb);
    if (!*d || !*sc) {
        free(*d), free(*sc);
        *d = NULL, *sc = NULL;
        return xf_errorf(XF_ENOMEM, "out of memory for a %lld x %lld int8 matrix in the packed layout (%lld bytes)", (long long)rows,
                         (long long)cols, (long long)(vb + sb));
    }
    /* padding only where there is some: the rest is written */
    if (vb != rows * cols) memset(*d, 128, (size_t)vb);
    if (sb != rows * ((cols + group - 1) / group) * (int64_t)sizeof(float)) memset(*sc, 0, (size_t)sb);
    return XF_OK;
}

/* packed: an int8 matrix directly in weights_pack's layout (weights.h), its padding already what
 * weights_pack_int8 gives it (weight 0, i.e. 128, and scale 0), for weights_set_rows to fill: the
 * random weights' path (weights_init_random), which then skips the row-major copy and the packing
 * pass. Ignored for other dtypes. */
static xf_status wmat_alloc_as(wmat *m, xf_dtype dt, int64_t rows, int64_t cols, int group, int packed) {
    memset(m, 0, sizeof *m);
    m->dtype = dt;
    m->rows = rows;
    m->cols = cols;
    m->owned = 1;
    if (dt == XF_INT8 && packed && rows > 0 && cols > 0) {
        m->group = group;
        m->n_groups = (cols + group - 1) / group;
        m->packed = 1;
        m->gpad = pack_gpad(cols, group);
        uint8_t *d;
        xf_status st = packed_alloc(rows, cols, group, &d, &m->scales);
        m->data = d;
        return st;
    }
    int64_t n = rows * cols; /* checked by weights_bytes before */
    int64_t esz = dt == XF_FP32 ? 4 : dt == XF_INT8 ? 1 : 2;
    m->data = alloc64(n * esz);
    if (!m->data) return xf_errorf(XF_ENOMEM, "out of memory allocating a %lld x %lld weight matrix",
                                   (long long)rows, (long long)cols);
    if (dt == XF_INT8) {
        m->group = group;
        m->n_groups = (cols + group - 1) / group;
        m->scales = alloc64(rows * m->n_groups * 4);
        if (!m->scales) return xf_errorf(XF_ENOMEM, "out of memory allocating int8 scales");
    }
    return XF_OK;
}

static xf_status wmat_alloc(wmat *m, xf_dtype dt, int64_t rows, int64_t cols, int group) { return wmat_alloc_as(m, dt, rows, cols, group, 0); }

static void wmat_free(wmat *m) {
    if (m->owned) {
        free(m->data);
        free(m->scales);
    }
    m->data = NULL;
    m->scales = NULL;
}

void weights_free(model_weights *w) {
    if (!w) return;
    if (w->layers) {
        for (int64_t l = 0; l < w->cfg.n_layers; l++) {
            layer_weights *L = &w->layers[l];
            free(L->attn_norm);
            free(L->ffn_norm);
            free(L->post_attn_norm);
            free(L->post_ffn_norm);
            free(L->qkv_bias);
            free(L->o_bias);
            free(L->q_norm);
            free(L->k_norm);
            free(L->gate_up_bias);
            free(L->down_bias);
            wmat_free(&L->qkv);
            wmat_free(&L->o);
            wmat_free(&L->gate_up);
            wmat_free(&L->down);
            wmat_free(&L->q_b);
            wmat_free(&L->kv_b);
            free(L->q_a_norm);
            free(L->kv_a_norm);
            for (int64_t e = 0; e < w->cfg.n_experts; e++) {
                if (L->exp_gate_up) wmat_free(&L->exp_gate_up[e]);
                if (L->exp_down) wmat_free(&L->exp_down[e]);
            }
            free(L->exp_gate_up);
            free(L->exp_down);
            wmat_free(&L->router);
            wmat_free(&L->sh_gate_up);
            wmat_free(&L->sh_down);
            free(L->sh_gate);
            free(L->router_bias);
        }
        free(w->layers);
    }
    wmat_free(&w->lm_head);
    wmat_free(&w->embed);
    free(w->final_norm);
    free(w);
}

/* Appends m's buffers of HUGEMEM_PAGE or more (the ones hugemem_alloc puts on huge pages). */
static int huge_ranges_add(hugemem_range **r, int *n, int *cap, const wmat *m) {
    if (!m->data || !m->owned) return 0;
    const void *ps[2] = {m->data, m->scales}; /* the buffers' bytes as held, as weights_bytes counts them */
    const int64_t bs[2] = {wmat_part(m->dtype, m->rows, m->cols, m->group, 0, m->packed),
                           wmat_part(m->dtype, m->rows, m->cols, m->group, 1, m->packed)};
    for (int i = 0; i < 2; i++) {
        if (!ps[i] || bs[i] < (int64_t)HUGEMEM_PAGE) continue;
        if (*n == *cap) {
            int nc = *cap ? *cap * 2 : 64;
            hugemem_range *nr = realloc(*r, (size_t)nc * sizeof *nr);
            if (!nr) return -1;
            *r = nr, *cap = nc;
        }
        (*r)[(*n)++] = (hugemem_range){ps[i], bs[i]};
    }
    return 0;
}

xf_status weights_huge_pages(const model_weights *w, int64_t *granted, int64_t *eligible) {
    if (!w || !granted || !eligible) return xf_errorf(XF_EINVAL, "weights_huge_pages: NULL argument");
    hugemem_range *r = NULL;
    int n = 0, cap = 0, bad = 0;
    bad |= huge_ranges_add(&r, &n, &cap, &w->embed) | huge_ranges_add(&r, &n, &cap, &w->lm_head);
    for (int64_t l = 0; w->layers && l < w->cfg.n_layers; l++) {
        const layer_weights *L = &w->layers[l];
        const wmat *ms[] = {&L->qkv, &L->o, &L->gate_up, &L->down, &L->q_b, &L->kv_b, &L->router, &L->sh_gate_up, &L->sh_down};
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) bad |= huge_ranges_add(&r, &n, &cap, ms[i]);
        for (int64_t e = 0; e < w->cfg.n_experts; e++) {
            if (L->exp_gate_up) bad |= huge_ranges_add(&r, &n, &cap, &L->exp_gate_up[e]);
            if (L->exp_down) bad |= huge_ranges_add(&r, &n, &cap, &L->exp_down[e]);
        }
    }
    if (bad) {
        free(r);
        return xf_errorf(XF_ENOMEM, "weights_huge_pages: out of memory");
    }
    *eligible = 0;
    for (int i = 0; i < n; i++) *eligible += r[i].bytes;
    *granted = n ? hugemem_granted(r, n) : 0;
    free(r);
    return XF_OK;
}

/* The MoE FFN of one layer: router, experts, shared expert (cfg.d_ff_shared > 0) and its gate. */
static xf_status weights_alloc_moe(layer_weights *L, const model_config *c, xf_dtype dtype, int group) {
    xf_status st = wmat_alloc(&L->router, dtype, c->n_experts, c->d_model, group);
    if (st) return st;
    L->exp_gate_up = calloc((size_t)c->n_experts, sizeof *L->exp_gate_up);
    L->exp_down = calloc((size_t)c->n_experts, sizeof *L->exp_down);
    if (!L->exp_gate_up || !L->exp_down) return xf_errorf(XF_ENOMEM, "out of memory");
    for (int64_t e = 0; e < c->n_experts; e++) {
        if ((st = wmat_alloc(&L->exp_gate_up[e], dtype, 2 * c->d_ff_expert, c->d_model, group))) return st;
        if ((st = wmat_alloc(&L->exp_down[e], dtype, c->d_model, c->d_ff_expert, group))) return st;
    }
    if (c->d_ff_shared > 0) {
        if ((st = wmat_alloc(&L->sh_gate_up, dtype, 2 * c->d_ff_shared, c->d_model, group))) return st;
        if ((st = wmat_alloc(&L->sh_down, dtype, c->d_model, c->d_ff_shared, group))) return st;
    }
    if (c->shared_expert_gate && !(L->sh_gate = alloc64(c->d_model * 4))) return xf_errorf(XF_ENOMEM, "out of memory");
    return XF_OK;
}

/* packed: the matrices weights_pack packs (embeddings, qkv, o, the dense FFN) allocated packed
 * (int8; wmat_alloc_as), the others row-major; 0: all row-major (weights_alloc, for loaders). */
static xf_status weights_alloc_as(model_weights **out, const model_config *c, xf_dtype dtype, int group, int packed) {
    if (!out || !c) return xf_errorf(XF_EINVAL, "weights_alloc: NULL argument");
    *out = NULL;
    if (group <= 0) group = XF_DEFAULT_QUANT_GROUP;
    int64_t total;
    xf_status st = weights_bytes(c, dtype, group, &total);
    if (st) return st;
    model_weights *w = calloc(1, sizeof *w);
    if (!w) return xf_errorf(XF_ENOMEM, "out of memory");
    w->cfg = *c;
    w->dtype = dtype;
    w->group = dtype == XF_INT8 ? group : 0;
    int64_t q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    int64_t qkv_rows = q_dim + 2 * kv_dim;
    int64_t shapes[6][2] = {{qkv_rows, c->d_model}, {c->d_model, q_dim}, {0, 0}, {0, 0}};
    const int mla = mla_shapes(c, shapes) == 6; /* latent attention's qkv rows, o columns, q_b and kv_b */
    w->layers = calloc((size_t)c->n_layers, sizeof *w->layers);
    if (!w->layers) {
        weights_free(w);
        return xf_errorf(XF_ENOMEM, "out of memory");
    }
    st = wmat_alloc_as(&w->embed, dtype, c->vocab, c->d_model, group, packed);
    if (!st) {
        if (c->tied_embeddings) {
            w->lm_head = w->embed;
            w->lm_head.owned = 0;
        } else {
            st = wmat_alloc_as(&w->lm_head, dtype, c->vocab, c->d_model, group, packed);
        }
    }
    if (!st && !(w->final_norm = alloc64(c->d_model * 4))) st = xf_errorf(XF_ENOMEM, "out of memory");
    for (int64_t l = 0; !st && l < c->n_layers; l++) {
        layer_weights *L = &w->layers[l];
        L->attn_norm = alloc64(c->d_model * 4);
        L->ffn_norm = alloc64(c->d_model * 4);
        if (c->qkv_bias) L->qkv_bias = alloc64(qkv_rows * 4);
        if (c->o_bias) L->o_bias = alloc64(c->d_model * 4);
        if (c->qk_norm) L->q_norm = alloc64(c->head_dim * 4), L->k_norm = alloc64(c->head_dim * 4);
        if (c->sandwich_norms && (!(L->post_attn_norm = alloc64(c->d_model * 4)) || !(L->post_ffn_norm = alloc64(c->d_model * 4)))) {
            st = xf_errorf(XF_ENOMEM, "out of memory");
            break;
        }
        const int moe = model_layer_is_moe(c, l);
        if (c->mlp_bias && !moe) L->gate_up_bias = alloc64(2 * c->d_ff * 4), L->down_bias = alloc64(c->d_model * 4);
        if (!L->attn_norm || !L->ffn_norm || (c->qkv_bias && !L->qkv_bias) || (c->o_bias && !L->o_bias) ||
            (c->qk_norm && (!L->q_norm || !L->k_norm)) || (c->mlp_bias && !moe && (!L->gate_up_bias || !L->down_bias))) {
            st = xf_errorf(XF_ENOMEM, "out of memory");
            break;
        }
        if ((st = wmat_alloc_as(&L->qkv, dtype, shapes[0][0], c->d_model, group, packed))) break;
        if ((st = wmat_alloc_as(&L->o, dtype, c->d_model, shapes[1][1], group, packed))) break;
        if (mla) {
            if (shapes[4][0] > 0 && (st = wmat_alloc(&L->q_b, dtype, shapes[4][0], shapes[4][1], group))) break;
            if ((st = wmat_alloc(&L->kv_b, dtype, shapes[5][0], shapes[5][1], group))) break;
            if (c->q_lora_rank > 0 && !(L->q_a_norm = alloc64(c->q_lora_rank * 4))) st = xf_errorf(XF_ENOMEM, "out of memory");
            if (!st && !(L->kv_a_norm = alloc64(c->kv_lora_rank * 4))) st = xf_errorf(XF_ENOMEM, "out of memory");
            if (st) break;
        }
        if (moe) {
            if ((st = weights_alloc_moe(L, c, dtype, group))) break;
            if (c->moe_score == MOE_SCORE_SIGMOID_GROUPED && !(L->router_bias = alloc64(c->n_experts * 4))) {
                st = xf_errorf(XF_ENOMEM, "out of memory");
                break;
            }
            continue;
        }
        if ((st = wmat_alloc_as(&L->gate_up, dtype, 2 * c->d_ff, c->d_model, group, packed))) break;
        if ((st = wmat_alloc_as(&L->down, dtype, c->d_model, c->d_ff, group, packed))) break;
    }
    if (st) {
        weights_free(w);
        return st;
    }
    *out = w;
    return XF_OK;
}

xf_status weights_alloc(model_weights **out, const model_config *c, xf_dtype dtype, int group) {
    return weights_alloc_as(out, c, dtype, group, 0);
}

/* ---- conversion ---- */

static inline int64_t pack_off(const wmat *m, int64_t r, int64_t c);
/* column k of a group, from the group's first byte of a row (pack_off(m, r, c0)): without a division */
static inline int64_t pack_in_group(int64_t k) { return (k >> 2) * 4 * WMAT_PACK_ROWS + (k & 3); }

void weights_set_rows(wmat *m, int64_t row0, int64_t n_rows, const float *src) {
    int64_t cols = m->cols;
    for (int64_t r = 0; r < n_rows; r++) {
        const float *s = src + r * cols;
        int64_t row = row0 + r;
        if (m->dtype == XF_FP32) {
            memcpy((float *)m->data + row * cols, s, (size_t)cols * 4);
        } else if (m->dtype == XF_BF16) {
            uint16_t *d = (uint16_t *)m->data + row * cols;
            for (int64_t c = 0; c < cols; c++) d[c] = weights_f32_to_bf16(s[c]);
        } else if (m->dtype == XF_FP16) {
            uint16_t *d = (uint16_t *)m->data + row * cols;
            for (int64_t c = 0; c < cols; c++) d[c] = weights_f32_to_f16(s[c]);
        } else {
            int8_t *d = m->packed ? NULL : (int8_t *)m->data + row * cols; /* packed: dg below */
            float *sc = m->packed ? NULL : m->scales + row * m->n_groups;
            for (int64_t g = 0; g < m->n_groups; g++) {
                int64_t c0 = g * m->group, c1 = c0 + m->group < cols ? c0 + m->group : cols;
                float amax = 0.0f;
                for (int64_t c = c0; c < c1; c++) {
                    float a = fabsf(s[c]);
                    amax = a > amax ? a : amax;
                }
                float scale = amax / 127.0f;
                if (m->packed) m->scales[weights_scale_index(m, row, c0)] = scale;
                else sc[g] = scale;
                float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
                uint8_t *dg = m->packed ? (uint8_t *)m->data + pack_off(m, row, c0) : NULL;
                for (int64_t c = c0; c < c1; c++) {
                    /* round to nearest even without a libm call: |q| <= 127 < 2^22, so adding and
                     * subtracting 1.5 * 2^23 leaves the rounded integer */
                    float q = (s[c] * inv + 12582912.0f) - 12582912.0f;
                    q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
                    if (q != q) q = 0.0f; /* a NaN in a loaded file: never cast NaN to an integer */
                    if (dg) dg[pack_in_group(c - c0)] = (uint8_t)((int)q + 128);
                    else d[c] = (int8_t)q;
                }
            }
        }
    }
}

/* Byte offset of element (r, c) in the packed layout (weights.h). */
static inline int64_t pack_off(const wmat *m, int64_t r, int64_t c) {
    const int64_t g = c / m->group, k = c - g * m->group;
    return (((r / WMAT_PACK_ROWS) * m->n_groups + g) * m->gpad + (k & ~(int64_t)3)) * WMAT_PACK_ROWS + (r % WMAT_PACK_ROWS) * 4 + (k & 3);
}

int8_t weights_i8_at(const wmat *m, int64_t r, int64_t c) {
    if (m->packed) return (int8_t)((int)((const uint8_t *)m->data)[pack_off(m, r, c)] - 128);
    return ((const int8_t *)m->data)[r * m->cols + c];
}

int64_t weights_scale_index(const wmat *m, int64_t r, int64_t c) {
    const int64_t g = c / m->group;
    if (m->packed) return ((r / WMAT_PACK_ROWS) * m->n_groups + g) * WMAT_PACK_ROWS + r % WMAT_PACK_ROWS;
    return r * m->n_groups + g;
}

float weights_get(const wmat *m, int64_t r, int64_t c) {
    int64_t i = r * m->cols + c;
    if (m->dtype == XF_FP32) return ((const float *)m->data)[i];
    if (m->dtype == XF_BF16) return weights_bf16_to_f32(((const uint16_t *)m->data)[i]);
    if (m->dtype == XF_FP16) return weights_f16_to_f32(((const uint16_t *)m->data)[i]);
    return (float)weights_i8_at(m, r, c) * m->scales[weights_scale_index(m, r, c)];
}

xf_status weights_pack_int8(wmat *m) {
    if (!m || m->dtype != XF_INT8 || m->packed || !m->data) return XF_OK;
    uint8_t *d;
    float *sc;
    xf_status st = packed_alloc(m->rows, m->cols, m->group, &d, &sc);
    if (st) return xf_error_prefix(st, "packing: ");
    wmat p = *m;
    p.packed = 1;
    p.gpad = pack_gpad(m->cols, m->group);
    p.data = d;
    p.scales = sc;
    const int8_t *src = m->data;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m->rows; r++) {
        const int8_t *sr = src + r * m->cols;
        for (int64_t g = 0; g < m->n_groups; g++) { /* pack_off without a division per element */
            const int64_t c0 = g * m->group, len = (c0 + m->group < m->cols ? c0 + m->group : m->cols) - c0;
            uint8_t *dg = d + pack_off(&p, r, c0);
            for (int64_t k = 0; k < len; k++) dg[pack_in_group(k)] = (uint8_t)(sr[c0 + k] + 128);
            sc[weights_scale_index(&p, r, c0)] = m->scales[r * m->n_groups + g];
        }
    }
    if (m->owned) {
        free(m->data);
        free(m->scales);
    }
    p.owned = 1;
    *m = p;
    return XF_OK;
}

xf_status weights_pack(model_weights *w) {
    if (!w || w->dtype != XF_INT8) return XF_OK;
    xf_status st = weights_pack_int8(&w->embed);
    if (!st && w->lm_head.owned) st = weights_pack_int8(&w->lm_head);
    else if (!st) {
        w->lm_head = w->embed; /* tied: the same (now packed) buffers */
        w->lm_head.owned = 0;
    }
    for (int64_t l = 0; !st && l < w->cfg.n_layers; l++) {
        layer_weights *L = &w->layers[l];
        if (!st) st = weights_pack_int8(&L->qkv);
        if (!st) st = weights_pack_int8(&L->o);
        if (!st) st = weights_pack_int8(&L->gate_up);
        if (!st) st = weights_pack_int8(&L->down);
    }
    return st;
}

/* ---- random values ---- */

static inline uint64_t mix64(uint64_t z) { /* splitmix64's finalizer */
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t row_key(uint64_t seed, int tensor, int layer, int64_t row) {
    uint64_t base = mix64(seed ^ mix64(((uint64_t)(uint32_t)tensor << 32) | (uint64_t)(uint32_t)(layer + 1)));
    return mix64(base ^ ((uint64_t)row * 0xd1b54a32d192ed03ull));
}

/* std 0.02: a sum of four 16-bit uniforms has mean 2 * 65535 and variance 4 * 65536^2 / 12, so
 * (sum - 131070) * 0.02 * sqrt(3) / 65536 has mean 0 and standard deviation ~0.02. */
static inline float elem_value(uint64_t rk, int64_t col) {
    uint64_t b = mix64(rk + (uint64_t)col * 0x9e3779b97f4a7c15ull);
    int32_t s = (int32_t)(b & 0xffff) + (int32_t)((b >> 16) & 0xffff) + (int32_t)((b >> 32) & 0xffff) +
                (int32_t)(b >> 48);
    return (float)(s - 131070) * (0.02f * 1.7320508f / 65536.0f);
}

float weights_random_value(uint64_t seed, int tensor, int layer, int64_t row, int64_t col) {
    if (tensor == WT_ATTN_NORM || tensor == WT_FFN_NORM || tensor == WT_FINAL_NORM || tensor == WT_Q_NORM ||
        tensor == WT_K_NORM || tensor == WT_POST_ATTN_NORM || tensor == WT_POST_FFN_NORM)
        return 1.0f;
    return elem_value(row_key(seed, tensor, layer, row), col);
}

/* Rows [0, n_rows) of tensor (tensor, layer) into rows [row0, row0 + n_rows) of m. */
static xf_status fill_random(wmat *m, int64_t row0, int64_t n_rows, uint64_t seed, int tensor, int layer) {
    int64_t cols = m->cols;
    int failed = 0;
#pragma omp parallel
    {
        float *buf = malloc((size_t)cols * sizeof(float));
        if (!buf) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < n_rows; r++) {
            if (!buf) continue;
            uint64_t rk = row_key(seed, tensor, layer, r);
            for (int64_t c = 0; c < cols; c++) buf[c] = elem_value(rk, c);
            weights_set_rows(m, row0 + r, 1, buf);
        }
        free(buf);
    }
    return failed ? xf_errorf(XF_ENOMEM, "out of memory generating weights") : XF_OK;
}

/* weights_random_reuse_layers: off unless a caller that times kernels only (the calibration) asks */
static int g_reuse_layers;
void weights_random_reuse_layers(int on) { g_reuse_layers = on != 0; }

/* dst's values and scales := src's (the same dtype, shape and layout, packed or not; a packed one's
 * padding too), copied in parallel
 * in 1 MiB pieces: dst keeps its own buffers, so every layer is still streamed from its own memory. */
static void wmat_copy_values(wmat *dst, const wmat *src) {
    void *db[2] = {dst->data, dst->scales};
    const void *sb[2] = {src->data, src->scales};
    for (int k = 0; k < 2; k++) {
        const int64_t n = wmat_part(src->dtype, src->rows, src->cols, src->group, k, src->packed), piece = 1 << 20;
        if (n <= 0 || !db[k] || !sb[k]) continue;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < (n + piece - 1) / piece; i++)
            memcpy((char *)db[k] + i * piece, (const char *)sb[k] + i * piece, (size_t)(n - i * piece < piece ? n - i * piece : piece));
    }
}

static int wmat_same_shape(const wmat *a, const wmat *b) {
    return a->dtype == b->dtype && a->rows == b->rows && a->cols == b->cols && a->group == b->group && a->packed == b->packed;
}

static void fill_vec(float *v, int64_t n, uint64_t seed, int tensor, int layer) {
    for (int64_t i = 0; i < n; i++) v[i] = weights_random_value(seed, tensor, layer, 0, i);
}

xf_status weights_init_random(model_weights **out, const model_config *c, uint64_t seed, xf_dtype dtype,
                              int group) {
    model_weights *w;
    /* int8: the matrices weights_pack packs are allocated packed and quantized straight into that
     * layout (the same bytes as quantizing row-major and packing: tests/test_weights.c) */
    xf_status st = weights_alloc_as(&w, c, dtype, group, 1);
    if (st) return st;
    int64_t q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    st = fill_random(&w->embed, 0, c->vocab, seed, WT_EMBED, -1);
    if (!st && !c->tied_embeddings) st = fill_random(&w->lm_head, 0, c->vocab, seed, WT_LM_HEAD, -1);
    fill_vec(w->final_norm, c->d_model, seed, WT_FINAL_NORM, -1);
    for (int l = 0; !st && l < (int)c->n_layers; l++) {
        layer_weights *L = &w->layers[l];
        fill_vec(L->attn_norm, c->d_model, seed, WT_ATTN_NORM, l);
        fill_vec(L->ffn_norm, c->d_model, seed, WT_FFN_NORM, l);
        if (L->post_attn_norm) fill_vec(L->post_attn_norm, c->d_model, seed, WT_POST_ATTN_NORM, l);
        if (L->post_ffn_norm) fill_vec(L->post_ffn_norm, c->d_model, seed, WT_POST_FFN_NORM, l);
        if (L->qkv_bias) {
            fill_vec(L->qkv_bias, q_dim, seed, WT_BQ, l);
            fill_vec(L->qkv_bias + q_dim, kv_dim, seed, WT_BK, l);
            fill_vec(L->qkv_bias + q_dim + kv_dim, kv_dim, seed, WT_BV, l);
        }
        if (L->o_bias) fill_vec(L->o_bias, c->d_model, seed, WT_BO, l);
        if (L->q_norm) fill_vec(L->q_norm, c->head_dim, seed, WT_Q_NORM, l), fill_vec(L->k_norm, c->head_dim, seed, WT_K_NORM, l);
        if (L->gate_up_bias) {
            fill_vec(L->gate_up_bias, c->d_ff, seed, WT_BGATE, l);
            fill_vec(L->gate_up_bias + c->d_ff, c->d_ff, seed, WT_BUP, l);
            fill_vec(L->down_bias, c->d_model, seed, WT_BDOWN, l);
        }
        const layer_weights *L0 = &w->layers[0];
        if (g_reuse_layers && l > 0 && !model_is_mla(c) && !model_layer_is_moe(c, 0) && !model_layer_is_moe(c, l) && wmat_same_shape(&L->qkv, &L0->qkv) &&
            wmat_same_shape(&L->o, &L0->o) && wmat_same_shape(&L->gate_up, &L0->gate_up) && wmat_same_shape(&L->down, &L0->down)) {
            wmat_copy_values(&L->qkv, &L0->qkv); /* layer 0's values, this layer's buffers (weights.h) */
            wmat_copy_values(&L->o, &L0->o);
            wmat_copy_values(&L->gate_up, &L0->gate_up);
            wmat_copy_values(&L->down, &L0->down);
            continue;
        }
        if (model_is_mla(c)) { /* q_a or q_proj, kv_a; q_b, kv_b; the two norms */
            const int64_t lat = c->kv_lora_rank + c->qk_rope_head_dim, q_rows = L->qkv.rows - lat;
            if (!st) st = fill_random(&L->qkv, 0, q_rows, seed, WT_Q, l);
            if (!st) st = fill_random(&L->qkv, q_rows, lat, seed, WT_K, l);
            if (!st && L->q_b.rows > 0) st = fill_random(&L->q_b, 0, L->q_b.rows, seed, WT_Q_B, l);
            if (!st) st = fill_random(&L->kv_b, 0, L->kv_b.rows, seed, WT_KV_B, l);
            if (L->q_a_norm) fill_vec(L->q_a_norm, c->q_lora_rank, seed, WT_Q_A_NORM, l);
            fill_vec(L->kv_a_norm, c->kv_lora_rank, seed, WT_KV_A_NORM, l);
        } else {
            if (!st) st = fill_random(&L->qkv, 0, q_dim, seed, WT_Q, l);
            if (!st) st = fill_random(&L->qkv, q_dim, kv_dim, seed, WT_K, l);
            if (!st) st = fill_random(&L->qkv, q_dim + kv_dim, kv_dim, seed, WT_V, l);
        }
        if (!st) st = fill_random(&L->o, 0, c->d_model, seed, WT_O, l);
        if (model_layer_is_moe(c, l)) {
            const int64_t fe = c->d_ff_expert, fs = c->d_ff_shared;
            if (!st) st = fill_random(&L->router, 0, c->n_experts, seed, WT_ROUTER, l);
            for (int64_t e = 0; !st && e < c->n_experts; e++) {
                const int ex = (int)(e + 1) * WT_EXPERT_STRIDE;
                st = fill_random(&L->exp_gate_up[e], 0, fe, seed, WT_EXP_GATE + ex, l);
                if (!st) st = fill_random(&L->exp_gate_up[e], fe, fe, seed, WT_EXP_UP + ex, l);
                if (!st) st = fill_random(&L->exp_down[e], 0, c->d_model, seed, WT_EXP_DOWN + ex, l);
            }
            if (!st && fs > 0) st = fill_random(&L->sh_gate_up, 0, fs, seed, WT_SH_GATE, l);
            if (!st && fs > 0) st = fill_random(&L->sh_gate_up, fs, fs, seed, WT_SH_UP, l);
            if (!st && fs > 0) st = fill_random(&L->sh_down, 0, c->d_model, seed, WT_SH_DOWN, l);
            if (L->sh_gate) fill_vec(L->sh_gate, c->d_model, seed, WT_SH_GATE_W, l);
            if (L->router_bias) fill_vec(L->router_bias, c->n_experts, seed, WT_ROUTER_BIAS, l);
            continue;
        }
        if (!st) st = fill_random(&L->gate_up, 0, c->d_ff, seed, WT_GATE, l);
        if (!st) st = fill_random(&L->gate_up, c->d_ff, c->d_ff, seed, WT_UP, l);
        if (!st) st = fill_random(&L->down, 0, c->d_model, seed, WT_DOWN, l);
    }
    if (st) {
        weights_free(w);
        return st;
    }
    *out = w;
    return XF_OK;
}
