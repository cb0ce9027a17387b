/* The CPU attention kernels (cpu_attention.h) against straight double-precision loops and
 * hand-computed values: the per-query (decode) kernel, and the blocked causal (prefill) kernel in
 * every ISA variant this CPU runs, over fp32 / fp16 / bf16 KV reached through scattered slot tables. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference_model/cpu_attention.h"
#include "reference_model/cpu_kernels.h"
#include "tests/test_wmat.h"

/* A KV cache of n_slots rows of n_kv heads x hd elements in dt (K in [-2, 2), V in [-1, 1)). */
typedef struct kvc {
    char *K, *V;
    int64_t row, esz;
    xf_dtype dt;
} kvc;

static kvc make_kv(xf_dtype dt, int64_t n_slots, int64_t n_kv, int64_t hd, uint32_t seed) {
    kvc c = {NULL, NULL, n_kv * hd, dt == XF_FP32 ? 4 : 2, dt};
    c.K = malloc((size_t)(n_slots * c.row * c.esz));
    c.V = malloc((size_t)(n_slots * c.row * c.esz));
    float *tmp = malloc((size_t)c.row * sizeof(float));
    for (int64_t i = 0; i < n_slots; i++) {
        for (int64_t j = 0; j < c.row; j++) tmp[j] = frand(&seed) * 2.0f;
        xk_store(c.K + i * c.row * c.esz, dt, tmp, c.row);
        for (int64_t j = 0; j < c.row; j++) tmp[j] = frand(&seed);
        xk_store(c.V + i * c.row * c.esz, dt, tmp, c.row);
    }
    free(tmp);
    return c;
}

static void free_kv(kvc *c) {
    free(c->K);
    free(c->V);
}

/* One KV element as stored, as a double. */
static double kv_at(const kvc *c, const char *base, int64_t slot, int64_t elem) {
    float f;
    xk_load(&f, base + (slot * c->row + elem) * c->esz, c->dt, 1);
    return f;
}

/* want (n_rep, hd): softmax over keys 0 .. n_keys - 1 of scale * q[h] . K[j], times V, all in
 * double, K and V of KV head `head` read through slots. */
static void ref_attention(double *want, const float *q, int64_t n_rep, int64_t hd, const kvc *c, int64_t head,
                          const int64_t *slots, int64_t n_keys, double scale) {
    double *sc = malloc((size_t)n_keys * sizeof(double));
    for (int64_t h = 0; h < n_rep; h++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n_keys; j++) {
            double d = 0;
            for (int64_t i = 0; i < hd; i++) d += (double)q[h * hd + i] * kv_at(c, c->K, slots[j], head * hd + i);
            sc[j] = d * scale;
            mx = fmax(mx, sc[j]);
        }
        for (int64_t j = 0; j < n_keys; j++) sum += (sc[j] = exp(sc[j] - mx));
        for (int64_t i = 0; i < hd; i++) {
            double o = 0;
            for (int64_t j = 0; j < n_keys; j++) o += sc[j] * kv_at(c, c->V, slots[j], head * hd + i);
            want[h * hd + i] = o / sum;
        }
    }
    free(sc);
}

/* ---- decode kernel ---- */

static void check_attention(xf_dtype dt, int64_t n_ctx) {
    const int64_t n_rep = 3, hd = 20, n_kv = 2, n_slots = 300, head = 1; /* KV head 1 of 2 */
    kvc c = make_kv(dt, n_slots, n_kv, hd, 9);
    uint32_t s = 99;
    int64_t *slots = malloc((size_t)n_ctx * sizeof(int64_t));
    for (int64_t j = 0; j < n_ctx; j++) slots[j] = (j * 37 + 11) % n_slots; /* scattered, like blocks */
    float q[3 * 20], out[3 * 20], scratch[3 * 66 + 40];
    double want[3 * 20];
    for (int i = 0; i < n_rep * hd; i++) q[i] = frand(&s);
    const float scale = 1.0f / sqrtf((float)hd);
    xk_attention(out, q, n_rep, hd, c.K, c.V, dt, c.row, head * hd, slots, n_ctx, scale, scratch);
    ref_attention(want, q, n_rep, hd, &c, head, slots, n_ctx, scale);
    /* float scores, exp and sums against double: errors measured ~1e-7 on outputs of ~0.1-1 */
    for (int64_t i = 0; i < n_rep * hd; i++)
        cr_assert(fabs(out[i] - want[i]) <= 2e-6, "%s ctx %lld elem %lld: %.8g vs %.8g", dtype_name(dt),
                  (long long)n_ctx, (long long)i, out[i], want[i]);
    free(slots);
    free_kv(&c);
}

Test(cpu_attention, decode_online_softmax) {
    xf_dtype dts[3] = {XF_FP32, XF_FP16, XF_BF16};
    for (int d = 0; d < 3; d++) {
        check_attention(dts[d], 1);   /* one key: out = V */
        check_attention(dts[d], 64);  /* exactly one block */
        check_attention(dts[d], 150); /* three blocks, the last partial: rescaling exercised */
    }
}

/* The vectorized decode kernel (xk_attention_decode) in every ISA variant, whole and cut into parts
 * merged by xk_attention_merge (the backend's split-K), against the double reference: GQA groups of
 * 1, 4, 8 and 16 heads (on AVX-512 4, 8 and 16 take the head-lane variant where head_dim allows,
 * head_dim 13 the per-head one), head_dim 64, 128 and odd ones, contexts across the 16-key blocks. */
/* float scores and sums against double, outputs of ~0.1-1: the same 2e-6 as the scalar kernel's
 * (measured ~3e-7 at 1000 keys) */
#define TOL_DEC 2e-6

static void check_decode(xk_isa isa, xf_dtype dt, int64_t n_rep, int64_t hd, int64_t n_ctx, int64_t n_parts,
                         double scale_mul) {
    const int64_t n_kv = 2, n_slots = n_ctx + 40, head = 1;
    kvc c = make_kv(dt, n_slots, n_kv, hd, (uint32_t)(n_ctx * 7 + hd));
    int64_t *slots = malloc((size_t)n_ctx * sizeof(int64_t));
    /* blocks of 16 slots in a scattered order (a paged table), 16 and n_slots / 16 coprime-ish */
    for (int64_t j = 0; j < n_ctx; j++) slots[j] = ((j / 16) * 7 % ((n_slots + 15) / 16)) * 16 + j % 16;
    for (int64_t j = 0; j < n_ctx; j++) slots[j] = slots[j] % n_slots;
    uint32_t s = (uint32_t)(5 + n_ctx);
    float *q = malloc((size_t)(n_rep * hd) * sizeof(float)), *out = malloc((size_t)(n_rep * hd) * sizeof(float));
    for (int64_t i = 0; i < n_rep * hd; i++) q[i] = frand(&s);
    const int64_t scr_n = xk_attn_decode_scratch(n_rep, hd);
    float *scr = aligned_alloc(64, (size_t)((scr_n + 15) / 16 * 16) * sizeof(float));
    float *po = malloc((size_t)(n_parts * n_rep * hd) * sizeof(float));
    float *pml = malloc((size_t)(n_parts * n_rep * 2) * sizeof(float)), ml[2 * 16];
    double *want = malloc((size_t)(n_rep * hd) * sizeof(double));
    const float scale = (float)(scale_mul / sqrt((double)hd));
    /* a float score's error grows with its size, and the weights' relative error with it */
    const double tol = TOL_DEC * scale_mul;
    ref_attention(want, q, n_rep, hd, &c, head, slots, n_ctx, scale);
    for (int64_t i = 0; i < n_rep * hd; i++) out[i] = NAN;
    xk_attention_decode(isa, out, q, n_rep, hd, c.K, c.V, dt, c.row, head * hd, slots, n_ctx, scale, scr, ml);
    for (int64_t i = 0; i < n_rep * hd; i++)
        cr_assert(fabs(out[i] - want[i]) <= tol, "%s %s n_rep %lld hd %lld ctx %lld elem %lld: %.8g vs %.8g", xk_isa_name(isa),
                  dtype_name(dt), (long long)n_rep, (long long)hd, (long long)n_ctx, (long long)i, out[i], want[i]);
    const int64_t plen = (n_ctx + n_parts - 1) / n_parts;
    for (int64_t p = 0; p < n_parts; p++) {
        const int64_t j0 = p * plen, j1 = j0 + plen < n_ctx ? j0 + plen : n_ctx;
        if (j1 <= j0) { /* an empty part: the merge must skip it */
            for (int64_t h = 0; h < n_rep; h++) pml[(p * n_rep + h) * 2] = -INFINITY, pml[(p * n_rep + h) * 2 + 1] = 0;
            continue;
        }
        xk_attention_part(isa, po + p * n_rep * hd, pml + p * n_rep * 2, q, n_rep, hd, c.K, c.V, dt, c.row, head * hd,
                          slots + j0, j1 - j0, scale, scr);
    }
    xk_attention_merge(out, po, pml, n_parts, n_rep, hd);
    for (int64_t i = 0; i < n_rep * hd; i++)
        cr_assert(fabs(out[i] - want[i]) <= tol, "%s %s split in %lld n_rep %lld hd %lld ctx %lld elem %lld: %.8g vs %.8g",
                  xk_isa_name(isa), dtype_name(dt), (long long)n_parts, (long long)n_rep, (long long)hd, (long long)n_ctx,
                  (long long)i, out[i], want[i]);
    free(want);
    free(pml);
    free(po);
    free(scr);
    free(out);
    free(q);
    free(slots);
    free_kv(&c);
}

static void check_decode_isas(xf_dtype dt) {
    /* head_dim 80: the head-lane variant's P.V tiles of 4 vectors then one (fp32) or two (bf16, rows padded to 96) */
    const int64_t reps[4] = {1, 4, 8, 16}, hds[5] = {64, 128, 20, 13, 80}, ctxs[6] = {1, 15, 16, 17, 333, 1000};
    int ran = 0;
    for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
        if (!xk_isa_supported((xk_isa)isa)) continue;
        ran++;
        for (int r = 0; r < 4; r++)
            for (int h = 0; h < 5; h++)
                for (int k = 0; k < 6; k++) {
                    check_decode((xk_isa)isa, dt, reps[r], hds[h], ctxs[k], ctxs[k] >= 333 ? 3 : 2, 1.0);
                    if (ctxs[k] == 1000) check_decode((xk_isa)isa, dt, reps[r], hds[h], ctxs[k], 8, 12.0); /* sharp softmax */
                }
    }
    cr_assert_geq(ran, 1, "the scalar variant always runs");
}

Test(cpu_attention, decode_vectorized_fp32) { check_decode_isas(XF_FP32); }
Test(cpu_attention, decode_vectorized_fp16) { check_decode_isas(XF_FP16); }
Test(cpu_attention, decode_vectorized_bf16) { check_decode_isas(XF_BF16); }

/* A GQA group gives every head what that head gets alone: on AVX-512 a group of 4 or 8k heads runs
 * the head-lane variant (the heads side by side in the lanes, other sums' order) and one head the
 * per-head one, so they agree to the kernels' tolerance; chunks of 8 heads are independent, so a
 * group of 16 gives bitwise the two groups of 8 it is made of. */
Test(cpu_attention, decode_gqa_group_equals_single_heads) {
    const int64_t hd = 64, n_ctx = 300, n_rep = 16;
    kvc c = make_kv(XF_FP32, n_ctx, 1, hd, 3);
    int64_t *slots = malloc((size_t)n_ctx * sizeof(int64_t));
    for (int64_t j = 0; j < n_ctx; j++) slots[j] = n_ctx - 1 - j;
    float q[16 * 64], grp[16 * 64], half[8 * 64], one[64], ml[32];
    uint32_t s = 1;
    for (int i = 0; i < n_rep * hd; i++) q[i] = frand(&s);
    float *scr = aligned_alloc(64, (size_t)((xk_attn_decode_scratch(n_rep, hd) + 15) / 16 * 16) * sizeof(float));
    const xk_isa isa = xk_isa_best();
    xk_attention_decode(isa, grp, q, n_rep, hd, c.K, c.V, XF_FP32, c.row, 0, slots, n_ctx, 0.125f, scr, ml);
    for (int64_t g = 0; g < 2; g++) {
        xk_attention_decode(isa, half, q + g * 8 * hd, 8, hd, c.K, c.V, XF_FP32, c.row, 0, slots, n_ctx, 0.125f, scr, ml);
        for (int64_t i = 0; i < 8 * hd; i++)
            cr_assert_eq(half[i], grp[g * 8 * hd + i], "%s half %lld elem %lld", xk_isa_name(isa), (long long)g, (long long)i);
    }
    for (int64_t h = 0; h < n_rep; h++) {
        xk_attention_decode(isa, one, q + h * hd, 1, hd, c.K, c.V, XF_FP32, c.row, 0, slots, n_ctx, 0.125f, scr, ml);
        for (int64_t i = 0; i < hd; i++)
            cr_assert(fabs(one[i] - grp[h * hd + i]) <= TOL_DEC, "%s head %lld elem %lld: %.8g vs %.8g", xk_isa_name(isa),
                      (long long)h, (long long)i, one[i], grp[h * hd + i]);
    }
    free(scr);
    free(slots);
    free_kv(&c);
}

/* xk_attention_batch, the backend's decode entry: items (query, part) over every KV head, split-K
 * when n_q * n_kv < XK_ATT_SPLIT_ITEMS. Against the double reference per (query, KV head), and the
 * same bits on 1 and 2 threads (the cut is a rule of the shapes). n_kv 3: the KV heads of a row
 * side by side, as in the cache. */
static void check_batch(xk_isa isa, xf_dtype dt, int64_t n_q, int64_t n_rep, int64_t hd) {
    const int64_t n_kv = 3, nh = n_kv * n_rep, n_slots = 700;
    kvc c = make_kv(dt, n_slots, n_kv, hd, (uint32_t)(n_q * 31 + n_rep * 7 + hd));
    int64_t *slots = malloc((size_t)n_slots * sizeof(int64_t));
    for (int64_t j = 0; j < n_slots; j++) slots[j] = (j * 53 + 17) % n_slots; /* scattered, distinct */
    float *q = malloc((size_t)(n_q * nh * hd) * sizeof(float)), *out1 = malloc((size_t)(n_q * nh * hd) * sizeof(float));
    float *out2 = malloc((size_t)(n_q * nh * hd) * sizeof(float));
    double *want = malloc((size_t)(n_rep * hd) * sizeof(double));
    uint32_t s = (uint32_t)(3 + n_q);
    for (int64_t i = 0; i < n_q * nh * hd; i++) q[i] = frand(&s);
    xk_attn_query *qs = malloc((size_t)n_q * sizeof *qs);
    const int64_t tf = xk_attn_thread_floats(nh, hd);
    xk_attn_work w = {malloc((size_t)(n_q + 1) * sizeof(int64_t)),
                      malloc((size_t)(XK_ATT_SPLIT_ITEMS * XK_ATT_MAX_PARTS * n_rep * hd) * sizeof(float)),
                      malloc((size_t)(XK_ATT_SPLIT_ITEMS * XK_ATT_MAX_PARTS * 2 * n_rep) * sizeof(float)),
                      aligned_alloc(64, (size_t)(2 * tf) * sizeof(float)), tf};
    const float scale = 1.0f / sqrtf((float)hd);
    for (int th = 1; th <= 2; th++) {
        float *out = th == 1 ? out1 : out2;
        for (int64_t i = 0; i < n_q; i++) {
            const int64_t ctx = 1 + (i * 211 + 600) % n_slots; /* 600, 111, 322, ...: split into 3, 1, 2 parts */
            qs[i] = (xk_attn_query){q + i * nh * hd, out + i * nh * hd, c.K, c.V, slots, ctx};
        }
        xk_attention_batch(isa, th, qs, n_q, n_kv, n_rep, hd, dt, c.row, scale, &w);
    }
    for (int64_t i = 0; i < n_q; i++)
        for (int64_t g = 0; g < n_kv; g++) {
            ref_attention(want, q + (i * nh + g * n_rep) * hd, n_rep, hd, &c, g, slots, qs[i].n_ctx, scale);
            for (int64_t e = 0; e < n_rep * hd; e++) {
                const int64_t k = (i * nh + g * n_rep) * hd + e;
                cr_assert(fabs(out1[k] - want[e]) <= TOL_DEC, "%s %s n_q %lld n_rep %lld hd %lld query %lld head %lld elem %lld: %.8g vs %.8g",
                          xk_isa_name(isa), dtype_name(dt), (long long)n_q, (long long)n_rep, (long long)hd, (long long)i,
                          (long long)g, (long long)e, out1[k], want[e]);
                cr_assert_eq(out1[k], out2[k], "%s: 1 and 2 threads differ at query %lld", xk_isa_name(isa), (long long)i);
            }
        }
    free(w.items);
    free(w.part_o);
    free(w.part_ml);
    free(w.scratch);
    free(qs);
    free(want);
    free(out2);
    free(out1);
    free(q);
    free(slots);
    free_kv(&c);
}

Test(cpu_attention, decode_batch_all_heads) {
    const xf_dtype dts[3] = {XF_FP32, XF_FP16, XF_BF16};
    const int64_t reps[3] = {1, 4, 8}, hds[2] = {64, 20}, nqs[2] = {2, 11}; /* 2 x 3 < 32: split; 11 x 3 >= 32: not */
    for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
        if (!xk_isa_supported((xk_isa)isa)) continue;
        for (int d = 0; d < 3; d++)
            for (int r = 0; r < 3; r++)
                for (int h = 0; h < 2; h++)
                    for (int n = 0; n < 2; n++) check_batch((xk_isa)isa, dts[d], nqs[n], reps[r], hds[h]);
    }
}

/* A query whose context is one part is normalized in its item, not merged: the bits must be those
 * of the merge of that one part (its weight exp(0) is 1), in every ISA and dtype. */
Test(cpu_attention, decode_batch_one_part_equals_merge) {
    const xf_dtype dts[3] = {XF_FP32, XF_FP16, XF_BF16};
    const int64_t n_kv = 2, n_rep = 8, hd = 64, nh = n_kv * n_rep, n_ctx = 111; /* 2 x 2 < 32: split, 111 keys: one part */
    int64_t slots[111];
    for (int64_t j = 0; j < n_ctx; j++) slots[j] = (j * 29 + 5) % n_ctx;
    float q[2 * 16 * 64], out[2 * 16 * 64], po[16 * 64], pml[32], want[16 * 64];
    uint32_t s = 17;
    for (int i = 0; i < 2 * nh * hd; i++) q[i] = frand(&s);
    const int64_t tf = xk_attn_thread_floats(nh, hd);
    xk_attn_work w = {malloc(3 * sizeof(int64_t)), malloc((size_t)(XK_ATT_SPLIT_ITEMS * XK_ATT_MAX_PARTS * n_rep * hd) * sizeof(float)),
                      malloc((size_t)(XK_ATT_SPLIT_ITEMS * XK_ATT_MAX_PARTS * 2 * n_rep) * sizeof(float)),
                      aligned_alloc(64, (size_t)(2 * tf) * sizeof(float)), tf};
    float *scr = aligned_alloc(64, (size_t)((xk_attn_decode_scratch(n_rep, hd) + 15) / 16 * 16) * sizeof(float));
    for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
        if (!xk_isa_supported((xk_isa)isa)) continue;
        for (int d = 0; d < 3; d++) {
            kvc c = make_kv(dts[d], n_ctx, n_kv, hd, (uint32_t)(40 + d));
            xk_attn_query qs[2] = {{q, out, c.K, c.V, slots, n_ctx}, {q + nh * hd, out + nh * hd, c.K, c.V, slots, 37}}; /* 111 and 37 keys */
            xk_attention_batch((xk_isa)isa, 2, qs, 2, n_kv, n_rep, hd, dts[d], c.row, 0.125f, &w);
            for (int64_t i = 0; i < 2; i++)
                for (int64_t g = 0; g < n_kv; g++) {
                    const float *qg = q + (i * nh + g * n_rep) * hd;
                    xk_attention_part((xk_isa)isa, po, pml, qg, n_rep, hd, c.K, c.V, dts[d], c.row, g * hd, slots, qs[i].n_ctx,
                                      0.125f, scr);
                    xk_attention_merge(want, po, pml, 1, n_rep, hd);
                    for (int64_t e = 0; e < n_rep * hd; e++)
                        cr_assert_eq(out[(i * nh + g * n_rep) * hd + e], want[e], "%s %s query %lld KV head %lld elem %lld: %.9g vs %.9g",
                                     xk_isa_name((xk_isa)isa), dtype_name(dts[d]), (long long)i, (long long)g, (long long)e,
                                     out[(i * nh + g * n_rep) * hd + e], want[e]);
                }
            free_kv(&c);
        }
    }
    free(scr);
    free(w.items);
    free(w.part_o);
    free(w.part_ml);
    free(w.scratch);
}

/* AVX-512's whole-row variant (one query head per KV head: every KV head's slice of a row read
 * together, K rows of one block beside V rows of the block before) keeps each head's sums in the
 * per-head order: the bits of that head run by the per-head variant, which a GQA group of 2 heads
 * takes (each head its own dot products, softmax and P.V). Every dtype, head_dim 64 and odd ones,
 * contexts across the 64-key blocks, slots in a scattered order (a paged table). */
Test(cpu_attention, decode_rows_keep_the_per_head_bits) {
    if (!xk_isa_supported(XK_ISA_AVX512)) return; /* the variant is AVX-512's */
    const xf_dtype dts[3] = {XF_FP32, XF_FP16, XF_BF16};
    const int64_t hds[4] = {64, 20, 13, 80}, ctxs[7] = {1, 15, 64, 65, 130, 333, 1000}, n_kv = 3, n_slots = 1104; /* 69 blocks of 16 */
    int64_t *slots = malloc((size_t)n_slots * sizeof(int64_t));
    for (int64_t j = 0; j < n_slots; j++) slots[j] = ((j / 16) * 29 % 69) * 16 + j % 16; /* 16-slot blocks out of order */
    for (int d = 0; d < 3; d++)
        for (int h = 0; h < 4; h++) {
            const int64_t hd = hds[h];
            kvc c = make_kv(dts[d], n_slots, n_kv, hd, (uint32_t)(d * 11 + h));
            float *scr = aligned_alloc(64, (size_t)((xk_attn_decode_scratch(2, hd) + 15) / 16 * 16) * sizeof(float));
            float q2[2 * 80], one[80], two[2 * 80], ml1[2], ml2[4];
            uint32_t s = (uint32_t)(7 + hd);
            for (int64_t i = 0; i < hd; i++) q2[i] = q2[hd + i] = frand(&s);
            for (int k = 0; k < 7; k++)
                for (int64_t g = 0; g < n_kv; g++) {
                    xk_attention_decode(XK_ISA_AVX512, one, q2, 1, hd, c.K, c.V, dts[d], c.row, g * hd, slots, ctxs[k], 0.3f, scr, ml1);
                    xk_attention_decode(XK_ISA_AVX512, two, q2, 2, hd, c.K, c.V, dts[d], c.row, g * hd, slots, ctxs[k], 0.3f, scr, ml2);
                    for (int64_t i = 0; i < hd; i++)
                        cr_assert_eq(one[i], two[i], "%s hd %lld ctx %lld KV head %lld elem %lld: %.9g vs %.9g", dtype_name(dts[d]),
                                     (long long)hd, (long long)ctxs[k], (long long)g, (long long)i, one[i], two[i]);
                    cr_assert(ml1[0] == ml2[0] && ml1[1] == ml2[1], "%s hd %lld ctx %lld: max and sum", dtype_name(dts[d]),
                              (long long)hd, (long long)ctxs[k]);
                }
            free(scr);
            free_kv(&c);
        }
    free(slots);
}

/* The whole-row variant over every KV head of a row at once (xk_attention_batch, stories110m's 12
 * heads): batch 8 (items whole contexts) gives each (query, KV head) the bits of that head alone,
 * batch 1 (contexts cut into parts, merged) the double reference's values; every dtype, contexts
 * not a multiple of 64, 16-slot blocks out of order. A head's slice taken at another head's offset,
 * or a K row of one block paired with the weights of another, fails both. */
static void check_rows_batch(xf_dtype dt, int64_t n_q, int64_t hd) {
    const int64_t n_kv = 12, n_slots = 1104; /* 69 blocks of 16 */
    kvc c = make_kv(dt, n_slots, n_kv, hd, (uint32_t)(n_q * 3 + hd));
    int64_t *slots = malloc((size_t)n_slots * sizeof(int64_t));
    for (int64_t j = 0; j < n_slots; j++) slots[j] = ((j / 16) * 29 % 69) * 16 + j % 16;
    float *q = malloc((size_t)(n_q * n_kv * hd) * sizeof(float)), *out = malloc((size_t)(n_q * n_kv * hd) * sizeof(float));
    uint32_t s = (uint32_t)(11 + n_q);
    for (int64_t i = 0; i < n_q * n_kv * hd; i++) q[i] = frand(&s);
    xk_attn_query qs[8];
    for (int64_t i = 0; i < n_q; i++) /* 1000, 793, 586, ...: 4, 4, 3 ... parts at batch 1 */
        qs[i] = (xk_attn_query){q + i * n_kv * hd, out + i * n_kv * hd, c.K, c.V, slots + i * 13, 1000 - i * 207 % 1000};
    const int64_t tf = xk_attn_thread_floats(n_kv, hd);
    xk_attn_work w = {malloc((size_t)(n_q + 1) * sizeof(int64_t)),
                      malloc((size_t)(XK_ATT_SPLIT_ITEMS * XK_ATT_MAX_PARTS * hd) * sizeof(float)),
                      malloc((size_t)(XK_ATT_SPLIT_ITEMS * XK_ATT_MAX_PARTS * 2) * sizeof(float)),
                      aligned_alloc(64, (size_t)(2 * tf) * sizeof(float)), tf};
    const float scale = 1.0f / sqrtf((float)hd);
    xk_attention_batch(XK_ISA_AVX512, 2, qs, n_q, n_kv, 1, hd, dt, c.row, scale, &w);
    float *scr = aligned_alloc(64, (size_t)((xk_attn_decode_scratch(1, hd) + 15) / 16 * 16) * sizeof(float)), one[64], ml[2];
    double want[64];
    for (int64_t i = 0; i < n_q; i++)
        for (int64_t g = 0; g < n_kv; g++) {
            const float *got = out + (i * n_kv + g) * hd, *qg = q + (i * n_kv + g) * hd;
            ref_attention(want, qg, 1, hd, &c, g, qs[i].slots, qs[i].n_ctx, scale);
            xk_attention_decode(XK_ISA_AVX512, one, qg, 1, hd, c.K, c.V, dt, c.row, g * hd, qs[i].slots, qs[i].n_ctx, scale, scr, ml);
            for (int64_t e = 0; e < hd; e++) {
                cr_assert(fabs(got[e] - want[e]) <= TOL_DEC, "%s n_q %lld hd %lld query %lld KV head %lld elem %lld: %.8g vs %.8g",
                          dtype_name(dt), (long long)n_q, (long long)hd, (long long)i, (long long)g, (long long)e, got[e], want[e]);
                if (n_q * n_kv >= XK_ATT_SPLIT_ITEMS) /* whole contexts: that head's bits */
                    cr_assert_eq(got[e], one[e], "%s n_q %lld hd %lld query %lld KV head %lld elem %lld: %.9g vs %.9g", dtype_name(dt),
                                 (long long)n_q, (long long)hd, (long long)i, (long long)g, (long long)e, got[e], one[e]);
            }
        }
    free(scr);
    free(w.items);
    free(w.part_o);
    free(w.part_ml);
    free(w.scratch);
    free(out);
    free(q);
    free(slots);
    free_kv(&c);
}

Test(cpu_attention, decode_batch_rows_mha) {
    if (!xk_isa_supported(XK_ISA_AVX512)) return; /* the variant is AVX-512's */
    const xf_dtype dts[3] = {XF_FP32, XF_FP16, XF_BF16};
    for (int d = 0; d < 3; d++) {
        check_rows_batch(dts[d], 1, 64);
        check_rows_batch(dts[d], 8, 64);
        check_rows_batch(dts[d], 8, 20);
    }
}

/* xk_attention_replay (bench_cpu's probe of the kernel's access order) reads every byte of every
 * KV head's slice of each query's rows once, whatever its split, ISA, thread count or prefetch:
 * its byte sum against a plain one, queries split into parts and not, 16-bit rows with odd head_dim
 * (slices that end inside a line and a word). n_rep 1 takes AVX-512's whole-row order (K rows of a
 * block beside V rows of the block before: contexts of 111, 322 and 600 keys end mid-block), 4 and 8
 * the per-head one. */
Test(cpu_attention, replay_reads_the_kernels_bytes) {
    const xf_dtype dts[3] = {XF_FP32, XF_FP16, XF_BF16};
    const int64_t reps[3] = {1, 4, 8}, hds[3] = {64, 20, 13}, nqs[2] = {2, 11}, n_kv = 3, n_slots = 700;
    int64_t slots[700], items[12];
    for (int64_t j = 0; j < n_slots; j++) slots[j] = (j * 53 + 17) % n_slots;
    for (int d = 0; d < 3; d++)
        for (int h = 0; h < 3; h++) {
            kvc c = make_kv(dts[d], n_slots, n_kv, hds[h], (uint32_t)(d * 5 + h));
            for (int n = 0; n < 2; n++) {
                xk_attn_query qs[11];
                uint64_t want = 0;
                for (int64_t i = 0; i < nqs[n]; i++) {
                    const int64_t ctx = 1 + (i * 211 + 600) % n_slots; /* 600, 111, 322, ...: 3, 1, 2 parts when split */
                    qs[i] = (xk_attn_query){NULL, NULL, c.K, c.V, slots, ctx};
                    for (int64_t j = 0; j < ctx; j++)
                        for (int64_t b = 0; b < c.row * c.esz; b++)
                            want += (unsigned char)c.K[slots[j] * c.row * c.esz + b] + (unsigned char)c.V[slots[j] * c.row * c.esz + b];
                }
                for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
                    if (!xk_isa_supported((xk_isa)isa)) continue;
                    for (int r = 0; r < 3; r++)
                        for (int th = 1; th <= 2; th++)
                            for (int pf = 0; pf < 2; pf++) {
                                const uint64_t got = xk_attention_replay((xk_isa)isa, th, qs, nqs[n], n_kv, reps[r], hds[h], dts[d],
                                                                         c.row, pf, items);
                                cr_assert_eq(got, want, "%s %s hd %lld n_q %lld n_rep %lld threads %d prefetch %d: %llu vs %llu",
                                             xk_isa_name((xk_isa)isa), dtype_name(dts[d]), (long long)hds[h], (long long)nqs[n],
                                             (long long)reps[r], th, pf, (unsigned long long)got, (unsigned long long)want);
                            }
                }
            }
            free_kv(&c);
        }
}

/* ---- blocked causal kernel ---- */

/* A prefill of the last n_q of n_ctx positions (pos0 = n_ctx - n_q) of one sequence, n_kv KV heads
 * of n_rep query heads each, head_dim hd, KV in dt through a scattered slot table: the backend's
 * way (gather each KV head, in two parts to exercise the incremental gather, then query blocks of
 * xk_attn_block_queries) against ref_attention per query, and against the decode kernel.
 * scale_mul sharpens the softmax (large spreads exercise the clamp below -87 and the rescaling). */
static void check_causal(xk_isa isa, xf_dtype dt, int64_t n_rep, int64_t n_kv, int64_t hd, int64_t n_ctx, int64_t n_q,
                         double scale_mul, double tol) {
    const int64_t n_slots = 3 * n_ctx + 7, pos0 = n_ctx - n_q, qw = n_kv * n_rep * hd;
    const int64_t ldq = qw + 5, ldo = qw + 3; /* rows wider than the heads, like the backend's qkv */
    kvc c = make_kv(dt, n_slots, n_kv, hd, (uint32_t)(n_ctx * 131 + hd));
    int64_t *slots = malloc((size_t)n_ctx * sizeof(int64_t));
    for (int64_t j = 0; j < n_ctx; j++) slots[j] = (j * 53 + 17) % n_slots; /* 53 and n_slots coprime: distinct */
    float *q = malloc((size_t)(n_q * ldq) * sizeof(float)), *out = malloc((size_t)(n_q * ldo) * sizeof(float));
    uint32_t s = (uint32_t)(7 + n_ctx);
    for (int64_t i = 0; i < n_q * ldq; i++) q[i] = frand(&s);
    for (int64_t i = 0; i < n_q * ldo; i++) out[i] = NAN; /* every element must be written */
    float *kt = aligned_alloc(64, (size_t)(((n_ctx * hd + 15) / 16) * 16) * sizeof(float));
    float *vt = aligned_alloc(64, (size_t)(((n_ctx * hd + 15) / 16) * 16) * sizeof(float));
    const int64_t scr_n = xk_attn_block_scratch(n_rep, hd);
    float *scr = aligned_alloc(64, (size_t)scr_n * sizeof(float));
    float *dscr = malloc((size_t)(n_rep * 66 + 2 * hd) * sizeof(float)), *dout = malloc((size_t)(n_rep * hd) * sizeof(float));
    double *want = malloc((size_t)(n_rep * hd) * sizeof(double));
    const float scale = (float)(scale_mul / sqrt((double)hd));
    const int64_t qpb = xk_attn_block_queries(n_rep);
    for (int64_t g = 0; g < n_kv; g++) {
        const int64_t half = n_ctx / 2;
        xk_attn_gather(kt, vt, c.K, c.V, dt, c.row, g * hd, slots, 0, half, hd);
        xk_attn_gather(kt, vt, c.K, c.V, dt, c.row, g * hd, slots, half, n_ctx, hd);
        for (int64_t q0 = 0; q0 < n_q; q0 += qpb) {
            const int64_t nq = n_q - q0 < qpb ? n_q - q0 : qpb;
            xk_attention_causal(isa, out + q0 * ldo + g * n_rep * hd, ldo, q + q0 * ldq + g * n_rep * hd, ldq, nq, n_rep,
                                hd, pos0 + q0, kt, vt, scale, scr);
        }
    }
    for (int64_t i = 0; i < n_q; i++) {
        for (int64_t g = 0; g < n_kv; g++) {
            const float *qi = q + i * ldq + g * n_rep * hd;
            const float *oi = out + i * ldo + g * n_rep * hd;
            ref_attention(want, qi, n_rep, hd, &c, g, slots, pos0 + i + 1, scale);
            xk_attention(dout, qi, n_rep, hd, c.K, c.V, dt, c.row, g * hd, slots, pos0 + i + 1, scale, dscr);
            for (int64_t e = 0; e < n_rep * hd; e++) {
                cr_assert(fabs(oi[e] - want[e]) <= tol, "%s %s n_rep %lld hd %lld ctx %lld query %lld head %lld elem %lld: %.8g vs %.8g",
                          xk_isa_name(isa), dtype_name(dt), (long long)n_rep, (long long)hd, (long long)n_ctx,
                          (long long)(pos0 + i), (long long)g, (long long)e, oi[e], want[e]);
                cr_assert(fabs(oi[e] - dout[e]) <= tol, "%s: blocked vs decode kernel at query %lld: %.8g vs %.8g",
                          xk_isa_name(isa), (long long)(pos0 + i), oi[e], dout[e]);
            }
        }
    }
    free(want);
    free(dout);
    free(dscr);
    free(scr);
    free(kt);
    free(vt);
    free(out);
    free(q);
    free(slots);
    free_kv(&c);
}

/* Tolerance: float scores (|s| <~ 5 at scale 1), exp within ~2 ulp, float sums of <= 200 terms,
 * outputs of ~0.1-1 (V in [-1, 1)): max error measured 2.4e-7 against double; stated 2e-6, as for
 * the decode kernel. The same for fp16 / bf16 KV: both sides read the same stored values. */
#define TOL 2e-6

static void check_all_lengths(xk_isa isa, xf_dtype dt, int64_t n_rep, int64_t n_kv, int64_t hd) {
    const int64_t ctx[5] = {1, 63, 64, 65, 200};
    for (int i = 0; i < 5; i++) {
        check_causal(isa, dt, n_rep, n_kv, hd, ctx[i], ctx[i], 1.0, TOL); /* a whole prompt from position 0 */
        if (ctx[i] > 17) check_causal(isa, dt, n_rep, n_kv, hd, ctx[i], 17, 1.0, TOL); /* 17 new after a cached prefix */
    }
}

static void check_isas(xf_dtype dt, int64_t n_rep, int64_t n_kv, int64_t hd) {
    int ran = 0;
    for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
        if (!xk_isa_supported((xk_isa)isa)) continue;
        check_all_lengths((xk_isa)isa, dt, n_rep, n_kv, hd);
        ran++;
    }
    cr_assert_geq(ran, 1, "the scalar variant always runs");
}

/* MHA: n_rep 1 (256 queries per block: every length here is one query block); head_dim 20 is not
 * a multiple of 8 or 16 lanes. */
Test(cpu_attention, causal_mha_fp32) { check_isas(XF_FP32, 1, 2, 20); }
Test(cpu_attention, causal_mha_fp16) { check_isas(XF_FP16, 1, 2, 20); }
Test(cpu_attention, causal_mha_bf16) { check_isas(XF_BF16, 1, 2, 20); }
/* GQA: 3 query heads per KV head -> 85 queries per block (200 = 85 + 85 + 30: blocks start off the
 * 64-key grid); head_dim 13. */
Test(cpu_attention, causal_gqa_fp32) { check_isas(XF_FP32, 3, 2, 13); }
Test(cpu_attention, causal_gqa_fp16) { check_isas(XF_FP16, 3, 2, 13); }
Test(cpu_attention, causal_gqa_bf16) { check_isas(XF_BF16, 3, 2, 13); }
/* GQA 8 (TinyLlama's 32 / 4): 32 queries per block, head_dim 64 (whole vectors). */
Test(cpu_attention, causal_gqa8_hd64_fp32) { check_isas(XF_FP32, 8, 1, 64); }
/* The AVX-512 register tiles' column chunks (64 output elements, then 16 * (1 .. 3)) and row
 * counts (6-row tiles and 1 .. 5 left over): head_dim 48 (3 vectors), 80 (64 + 16), 128 (2 x 64);
 * 200-key prompts of 1, 2 and 4 heads per KV head give rows of every remainder mod 6. */
Test(cpu_attention, causal_tile_widths_fp32) {
    check_isas(XF_FP32, 2, 1, 48);
    check_isas(XF_FP32, 1, 1, 80);
    check_isas(XF_FP32, 4, 1, 128);
}

/* A sharp softmax: scores spread over hundreds, so most weights underflow (the clamp at -87) and the
 * running max jumps between key blocks. Outputs are then near single V rows. Scores ~40x larger
 * carry ~40x the absolute rounding into exp: measured max error 6.6e-6, stated tolerance 2e-5. */
Test(cpu_attention, causal_sharp_softmax) {
    for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
        if (!xk_isa_supported((xk_isa)isa)) continue;
        check_causal((xk_isa)isa, XF_FP32, 2, 1, 16, 200, 200, 40.0, 2e-5);
        check_causal((xk_isa)isa, XF_BF16, 2, 1, 16, 130, 70, 40.0, 2e-5);
    }
}

Test(cpu_attention, causal_hand_computed) {
    /* head_dim 2, one head, scale 1. q0 = q1 = (1, 0); K0 = (0, 0), K1 = (ln 3, 0); V0 = (4, 0),
     * V1 = (0, 8). Query 0 sees key 0 only: out0 = V0 = (4, 0). Query 1: scores 0 and ln 3, weights
     * 1/4 and 3/4: out1 = (4/4, 8 * 3/4) = (1, 6). Slots reversed: position 0 in slot 1. */
    float Kc[4] = {logf(3.0f), 0, 0, 0}, Vc[4] = {0, 8, 4, 0}; /* slot 0 holds position 1 */
    int64_t slots[2] = {1, 0};
    float q[4] = {1, 0, 1, 0}, out[4], kt[16], vt[16];
    float *scr = aligned_alloc(64, (size_t)xk_attn_block_scratch(1, 2) * sizeof(float));
    for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
        if (!xk_isa_supported((xk_isa)isa)) continue;
        xk_attn_gather(kt, vt, Kc, Vc, XF_FP32, 2, 0, slots, 0, 2, 2);
        cr_assert_eq(kt[2], logf(3.0f));
        cr_assert_eq(vt[0], 4.0f);
        xk_attention_causal((xk_isa)isa, out, 2, q, 2, 2, 1, 2, 0, kt, vt, 1.0f, scr);
        cr_assert_float_eq(out[0], 4.0f, 1e-6);
        cr_assert_float_eq(out[1], 0.0f, 1e-6);
        cr_assert_float_eq(out[2], 1.0f, 1e-6);
        cr_assert_float_eq(out[3], 6.0f, 1e-6);
        /* query 1 alone (pos0 = 1): the same (1, 6) */
        xk_attention_causal((xk_isa)isa, out, 2, q + 2, 2, 1, 1, 2, 1, kt, vt, 1.0f, scr);
        cr_assert_float_eq(out[0], 1.0f, 1e-6);
        cr_assert_float_eq(out[1], 6.0f, 1e-6);
    }
    free(scr);
}

Test(cpu_attention, block_sizes_hand_computed) {
    cr_assert_eq(xk_attn_block_queries(1), 256);
    cr_assert_eq(xk_attn_block_queries(8), 32);  /* 256 / 8 */
    cr_assert_eq(xk_attn_block_queries(3), 85);  /* floor(256 / 3) */
    cr_assert_eq(xk_attn_block_queries(300), 1); /* never 0 */
    /* n_rep 4, head_dim 8: 64 queries -> 256 rows; Q and O 2 * 2048, scores 256 * 64 = 16384,
     * max / sum / correction 3 * 256 = 768, the transposed key block 8 * 64 = 512: 21760 floats. */
    cr_assert_eq(xk_attn_block_scratch(4, 8), 21760);
    /* + K and V tiles of 10 positions x 8 = 80 floats each (already a multiple of 16): 21920. */
    cr_assert_eq(xk_attn_prefill_floats(10, 4, 8), 21920);
    /* 3 positions x 5 = 15 -> 16 each: 32 + n_rep 1 (256 rows): 2 * round16(1280) + 16384 + 768
     * + 5 * 64 = 20032. */
    cr_assert_eq(xk_attn_prefill_floats(3, 1, 5), 32 + 20032);
    cr_assert_eq(xk_attn_prefill_floats((int64_t)1 << 60, 1, 128), -1, "overflow refused");
    cr_assert_eq(xk_attn_prefill_floats(0, 1, 128), -1);
}
