/* CPU attention kernels: see cpu_attention.h. */
#include "reference_model/cpu_attention.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "reference_model/cpu_simd.h"

/* ---- decode: one query row per (token, KV head) item, keys read through the slot table ---- */

static inline float dot(const float *a, const float *b, int64_t n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

#define XK_ATT_BLOCK 64 /* keys per online-softmax block; scratch sizes in cpu_attention.h assume it */

void xk_attention(float *out, const float *q, int64_t n_rep, int64_t head_dim, const void *k_base,
                  const void *v_base, xf_dtype dtype, int64_t row_elems, int64_t head_off, const int64_t *slots,
                  int64_t n_ctx, float scale, float *scratch) {
    const int64_t esz = dtype == XF_FP32 ? 4 : 2;
    float *sc = scratch;                         /* (n_rep, XK_ATT_BLOCK) scores, then weights */
    float *kbuf = sc + n_rep * XK_ATT_BLOCK;     /* (head_dim) a converted K row */
    float *vbuf = kbuf + head_dim;               /* (head_dim) a converted V row */
    float *mx = vbuf + head_dim, *sum = mx + n_rep; /* (n_rep) running max and sum */
    for (int64_t h = 0; h < n_rep; h++) {
        mx[h] = -INFINITY;
        sum[h] = 0.0f;
    }
    memset(out, 0, (size_t)(n_rep * head_dim) * sizeof(float));
    for (int64_t j0 = 0; j0 < n_ctx; j0 += XK_ATT_BLOCK) {
        const int64_t jb = n_ctx - j0 < XK_ATT_BLOCK ? n_ctx - j0 : XK_ATT_BLOCK;
        for (int64_t jj = 0; jj < jb; jj++) {
            const char *kr = (const char *)k_base + (slots[j0 + jj] * row_elems + head_off) * esz;
            const float *k = (const float *)kr;
            if (dtype != XF_FP32) {
                xk_load(kbuf, kr, dtype, head_dim);
                k = kbuf;
            }
            for (int64_t h = 0; h < n_rep; h++) sc[h * XK_ATT_BLOCK + jj] = scale * dot(q + h * head_dim, k, head_dim);
        }
        for (int64_t h = 0; h < n_rep; h++) {
            float *s = sc + h * XK_ATT_BLOCK;
            float bm = s[0];
            for (int64_t jj = 1; jj < jb; jj++) bm = s[jj] > bm ? s[jj] : bm;
            float mnew = bm > mx[h] ? bm : mx[h];
            float corr = expf(mx[h] - mnew); /* exp(-inf) = 0 on the first block */
            float bs = 0.0f;
            for (int64_t jj = 0; jj < jb; jj++) {
                s[jj] = expf(s[jj] - mnew);
                bs += s[jj];
            }
            sum[h] = sum[h] * corr + bs;
            mx[h] = mnew;
            if (corr != 1.0f) {
                float *o = out + h * head_dim;
#pragma omp simd
                for (int64_t i = 0; i < head_dim; i++) o[i] *= corr;
            }
        }
        for (int64_t jj = 0; jj < jb; jj++) {
            const char *vr = (const char *)v_base + (slots[j0 + jj] * row_elems + head_off) * esz;
            const float *v = (const float *)vr;
            if (dtype != XF_FP32) {
                xk_load(vbuf, vr, dtype, head_dim);
                v = vbuf;
            }
            for (int64_t h = 0; h < n_rep; h++) {
                const float p = sc[h * XK_ATT_BLOCK + jj];
                float *o = out + h * head_dim;
#pragma omp simd
                for (int64_t i = 0; i < head_dim; i++) o[i] += p * v[i];
            }
        }
    }
    for (int64_t h = 0; h < n_rep; h++) {
        const float inv = sum[h] > 0.0f ? 1.0f / sum[h] : 0.0f;
        float *o = out + h * head_dim;
        for (int64_t i = 0; i < head_dim; i++) o[i] *= inv;
    }
}

/* ---- prefill: blocked causal attention on gathered fp32 tiles ---- */

static int64_t round16(int64_t n) { return (n + 15) & ~(int64_t)15; } /* keeps every part 64-byte aligned */

int64_t xk_attn_block_queries(int64_t n_rep) {
    int64_t qb = n_rep > 0 ? XK_ATT_ROWS / n_rep : 1;
    return qb < 1 ? 1 : qb;
}

int64_t xk_attn_block_scratch(int64_t n_rep, int64_t head_dim) {
    const int64_t rows = xk_attn_block_queries(n_rep) * n_rep; /* at most max(XK_ATT_ROWS, n_rep) */
    /* Q and O (rows, head_dim), scores (rows, XK_ATT_KEYS), running max, sum and correction (rows) */
    return 2 * round16(rows * head_dim) + round16(rows * XK_ATT_KEYS) + 3 * round16(rows);
}

int64_t xk_attn_prefill_floats(int64_t max_ctx, int64_t n_rep, int64_t head_dim) {
    if (max_ctx < 1 || n_rep < 1 || head_dim < 1 || n_rep > INT32_MAX || head_dim > INT32_MAX) return -1;
    if (max_ctx > INT64_MAX / 16 / head_dim) return -1; /* 2 tiles + scratch stay far from overflow */
    const int64_t tiles = 2 * round16(max_ctx * head_dim);
    return tiles + xk_attn_block_scratch(n_rep, head_dim);
}

void xk_attn_gather(float *kt, float *vt, const void *k_base, const void *v_base, xf_dtype dtype,
                    int64_t row_elems, int64_t head_off, const int64_t *slots, int64_t from, int64_t to,
                    int64_t head_dim) {
    const int64_t esz = dtype == XF_FP32 ? 4 : 2;
    for (int64_t j = from; j < to; j++) {
        const int64_t off = (slots[j] * row_elems + head_off) * esz;
        xk_load(kt + j * head_dim, (const char *)k_base + off, dtype, head_dim);
        xk_load(vt + j * head_dim, (const char *)v_base + off, dtype, head_dim);
    }
}

/* The online-softmax update of one row of a score tile: s (nk) the scores of keys kb .. kb+nk-1,
 * nv of them visible (the rest are after the row's own position: weight 0). s becomes the weights
 * exp(s - m_new); *m, *l take the new running max and sum; returns exp(m_old - m_new), the factor
 * the row's output so far is scaled by (on the row's first tile m_old = -inf and the factor, then
 * 1.6e-38 from the clamp, multiplies l = 0 and an output the caller has not started yet). */
static inline __attribute__((always_inline)) float row_update(float *s, int64_t nv, int64_t nk, float *m, float *l) {
    /* the portable variant: plain loops (no omp simd: clang cannot vectorize exp_le0's selects
     * without AVX-512 masks and warns; the x86 variants below are hand-vectorized) */
    float bm = -INFINITY;
    for (int64_t j = 0; j < nv; j++) bm = s[j] > bm ? s[j] : bm;
    const float mold = *m, mnew = bm > mold ? bm : mold;
    float bs = 0.0f;
    for (int64_t j = 0; j < nv; j++) {
        const float e = exp_le0(s[j] - mnew);
        s[j] = e;
        bs += e;
    }
    for (int64_t j = nv; j < nk; j++) s[j] = 0.0f;
    const float cr = exp_le0(mold - mnew);
    *l = *l * cr + bs;
    *m = mnew;
    return cr;
}

/* The softmax step of one score tile: queries [i_lo, n_q) (rows i * n_rep + h, query i at position
 * pos0 + i), S (rows from i_lo * n_rep, lds) the scores of keys kb .. kb + nk - 1. Keys after a
 * query's own position are masked (only on tiles that cross the diagonal; the others take the
 * constant-width path the compiler unrolls). corr[r]: row r's rescale factor. */
static inline __attribute__((always_inline)) void softmax_tile(float *S, int64_t lds, int64_t i_lo, int64_t n_q,
                                                              int64_t n_rep, int64_t pos0, int64_t kb, int64_t nk,
                                                              float *m, float *l, float *corr) {
    for (int64_t i = i_lo; i < n_q; i++) {
        int64_t nv = pos0 + i - kb + 1; /* keys kb .. own position */
        if (nv > nk) nv = nk;
        for (int64_t r = i * n_rep; r < (i + 1) * n_rep; r++) {
            float *s = S + (r - i_lo * n_rep) * lds;
            corr[r] = nv == XK_ATT_KEYS ? row_update(s, XK_ATT_KEYS, XK_ATT_KEYS, m + r, l + r)
                                        : row_update(s, nv, nk, m + r, l + r);
        }
    }
}

static void softmax_tile_scalar(float *S, int64_t lds, int64_t i_lo, int64_t n_q, int64_t n_rep, int64_t pos0,
                                int64_t kb, int64_t nk, float *m, float *l, float *corr) {
    softmax_tile(S, lds, i_lo, n_q, n_rep, pos0, kb, nk, m, l, corr);
}

#if XK_X86
/* row_update with the exp loop in AVX2 intrinsics (SSE / AVX2 do not if-convert exp_le0's clamps
 * under the default -ftrapping-math, so the plain loop would stay scalar). */
static inline TGT_AVX2 __attribute__((always_inline)) float row_update_avx2(float *s, int64_t nv, int64_t nk, float *m,
                                                                           float *l) {
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 8 <= nv; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + j));
    __m128 hm = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    hm = _mm_max_ps(hm, _mm_movehl_ps(hm, hm));
    hm = _mm_max_ss(hm, _mm_movehdup_ps(hm));
    float bm = _mm_cvtss_f32(hm);
    for (; j < nv; j++) bm = s[j] > bm ? s[j] : bm;
    const float mold = *m, mnew = bm > mold ? bm : mold;
    const __m256 mv = _mm256_set1_ps(mnew);
    __m256 acc = _mm256_setzero_ps();
    j = 0;
    for (; j + 8 <= nv; j += 8) {
        const __m256 e = exp8_le0(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
        _mm256_storeu_ps(s + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float bs = _mm_cvtss_f32(h);
    for (; j < nv; j++) {
        const float e = exp_le0(s[j] - mnew);
        s[j] = e;
        bs += e;
    }
    for (j = nv; j < nk; j++) s[j] = 0.0f;
    const float cr = exp_le0(mold - mnew);
    *l = *l * cr + bs;
    *m = mnew;
    return cr;
}
static TGT_AVX2 void softmax_tile_avx2(float *S, int64_t lds, int64_t i_lo, int64_t n_q, int64_t n_rep, int64_t pos0,
                                       int64_t kb, int64_t nk, float *m, float *l, float *corr) {
    for (int64_t i = i_lo; i < n_q; i++) {
        int64_t nv = pos0 + i - kb + 1;
        if (nv > nk) nv = nk;
        for (int64_t r = i * n_rep; r < (i + 1) * n_rep; r++) {
            float *s = S + (r - i_lo * n_rep) * lds;
            corr[r] = nv == XK_ATT_KEYS ? row_update_avx2(s, XK_ATT_KEYS, XK_ATT_KEYS, m + r, l + r)
                                        : row_update_avx2(s, nv, nk, m + r, l + r);
        }
    }
}
/* row_update in AVX-512 intrinsics: the compiler's omp simd reductions end in a serial scalar
 * loop over the 16 lanes, which cost as much as the exps on 64-key rows. The partial last vector
 * is masked. */
static inline TGT_AVX512 __attribute__((always_inline)) float row_update_avx512(float *s, int64_t nv, int64_t nk,
                                                                               float *m, float *l) {
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 16 <= nv; j += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(s + j));
    const __mmask16 tail = (__mmask16)((1u << (nv - j)) - 1u); /* nv - j < 16 */
    if (tail) vmax = _mm512_mask_max_ps(vmax, tail, vmax, _mm512_maskz_loadu_ps(tail, s + j));
    const float bm = _mm512_reduce_max_ps(vmax);
    const float mold = *m, mnew = bm > mold ? bm : mold;
    const __m512 mv = _mm512_set1_ps(mnew);
    __m512 acc = _mm512_setzero_ps();
    for (j = 0; j + 16 <= nv; j += 16) {
        const __m512 e = exp16_le0(_mm512_sub_ps(_mm512_loadu_ps(s + j), mv));
        _mm512_storeu_ps(s + j, e);
        acc = _mm512_add_ps(acc, e);
    }
    if (tail) {
        const __m512 e = exp16_le0(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, s + j), mv));
        _mm512_mask_storeu_ps(s + j, tail, e);
        acc = _mm512_mask_add_ps(acc, tail, acc, e);
    }
    const float bs = _mm512_reduce_add_ps(acc);
    for (j = nv; j < nk; j++) s[j] = 0.0f;
    const float cr = exp_le0(mold - mnew);
    *l = *l * cr + bs;
    *m = mnew;
    return cr;
}
static TGT_AVX512 void softmax_tile_avx512(float *S, int64_t lds, int64_t i_lo, int64_t n_q, int64_t n_rep, int64_t pos0,
                                           int64_t kb, int64_t nk, float *m, float *l, float *corr) {
    for (int64_t i = i_lo; i < n_q; i++) {
        int64_t nv = pos0 + i - kb + 1;
        if (nv > nk) nv = nk;
        for (int64_t r = i * n_rep; r < (i + 1) * n_rep; r++) {
            float *s = S + (r - i_lo * n_rep) * lds;
            corr[r] = nv == XK_ATT_KEYS ? row_update_avx512(s, XK_ATT_KEYS, XK_ATT_KEYS, m + r, l + r)
                                        : row_update_avx512(s, nv, nk, m + r, l + r);
        }
    }
}
#endif

void xk_attention_causal(xk_isa isa, float *out, int64_t ldo, const float *q, int64_t ldq, int64_t n_q,
                         int64_t n_rep, int64_t head_dim, int64_t pos0, const float *kt, const float *vt,
                         float scale, float *scratch) {
    if (n_q < 1) return;
    const int64_t hd = head_dim, gw = n_rep * hd; /* gw: one query's n_rep heads */
    const int64_t rows = n_q * n_rep, max_rows = xk_attn_block_queries(n_rep) * n_rep;
    float *Q = scratch;                               /* (rows, hd) scaled queries, row r = (i, h) */
    float *O = Q + round16(max_rows * hd);            /* (rows, hd) unnormalized outputs */
    float *S = O + round16(max_rows * hd);            /* (rows, XK_ATT_KEYS) scores, then weights */
    float *m = S + round16(max_rows * XK_ATT_KEYS);   /* (rows) running max */
    float *l = m + round16(max_rows);                 /* (rows) running sum */
    float *corr = l + round16(max_rows);              /* (rows) this tile's rescale factor */
    void (*tile)(float *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float *, float *, float *) =
        softmax_tile_scalar;
#if XK_X86
    if (isa == XK_ISA_AVX512) tile = softmax_tile_avx512;
    else if (isa == XK_ISA_AVX2) tile = softmax_tile_avx2;
#else
    (void)isa;
#endif
    for (int64_t i = 0; i < n_q; i++) {
        const float *src = q + i * ldq;
        float *dst = Q + i * gw;
#pragma omp simd
        for (int64_t e = 0; e < gw; e++) dst[e] = scale * src[e];
    }
    for (int64_t r = 0; r < rows; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    const int64_t n_keys = pos0 + n_q; /* the last query sees keys 0 .. pos0 + n_q - 1 */
    for (int64_t kb = 0; kb < n_keys; kb += XK_ATT_KEYS) {
        const int64_t nk = n_keys - kb < XK_ATT_KEYS ? n_keys - kb : XK_ATT_KEYS;
        /* rows whose position is before kb see none of these keys: queries i < kb - pos0 */
        const int64_t i_lo = kb > pos0 ? kb - pos0 : 0, r_lo = i_lo * n_rep, mr = rows - r_lo;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)mr, (blasint)nk, (blasint)hd, 1.0f,
                    Q + r_lo * hd, (blasint)hd, kt + kb * hd, (blasint)hd, 0.0f, S, XK_ATT_KEYS);
        tile(S, XK_ATT_KEYS, i_lo, n_q, n_rep, pos0, kb, nk, m, l, corr);
        if (kb > 0) {
            for (int64_t r = r_lo; r < rows; r++) {
                const float cr = corr[r];
                if (cr == 1.0f) continue;
                float *o = O + r * hd;
#pragma omp simd
                for (int64_t e = 0; e < hd; e++) o[e] *= cr;
            }
        }
        /* kb == 0 reaches every row (all positions >= 0): beta 0 initializes O */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)mr, (blasint)hd, (blasint)nk, 1.0f, S,
                    XK_ATT_KEYS, vt + kb * hd, (blasint)hd, kb > 0 ? 1.0f : 0.0f, O + r_lo * hd, (blasint)hd);
    }
    for (int64_t i = 0; i < n_q; i++) {
        for (int64_t h = 0; h < n_rep; h++) {
            const int64_t r = i * n_rep + h;
            const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
            const float *o = O + r * hd;
            float *dst = out + i * ldo + h * hd;
#pragma omp simd
            for (int64_t e = 0; e < hd; e++) dst[e] = o[e] * inv;
        }
    }
}
