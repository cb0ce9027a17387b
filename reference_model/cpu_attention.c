/* CPU attention kernels: see cpu_attention.h. */
#include "reference_model/cpu_attention.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
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

/* The online softmax's bookkeeping, one helper for every vectorized variant (decode and prefill,
 * AVX-512, AVX2 and portable): a block whose largest score is bm moves the running max m to
 * softmax_max(m, bm); once the block's weights exp(s - m_new) are summed into bs, softmax_commit
 * folds them into the running sum l, stores the new max and returns exp(m_old - m_new), the factor
 * the output so far is scaled by (0 on the first block, where m_old = -inf and l = 0). */
static inline __attribute__((always_inline)) float softmax_max(float m, float bm) { return bm > m ? bm : m; }
static inline __attribute__((always_inline)) float softmax_commit(float *m, float *l, float mnew, float bs) {
    const float c = *m == -INFINITY ? 0.0f : exp_le0(*m - mnew);
    *l = *l * c + bs;
    *m = mnew;
    return c;
}

/* The scalar reference of one part: keys [0, n_ctx) of slots, o (n_rep, head_dim) unnormalized,
 * ml (n_rep, 2) the running max and sum. scratch: n_rep * 66 + 2 * head_dim floats. */
static void attn_part_scalar(float *o, float *ml, const float *q, int64_t n_rep, int64_t head_dim, const void *k_base,
                             const void *v_base, xf_dtype dtype, int64_t row_elems, int64_t head_off,
                             const int64_t *slots, int64_t n_ctx, float scale, float *scratch) {
    const int64_t esz = dtype == XF_FP32 ? 4 : 2;
    float *sc = scratch;                         /* (n_rep, XK_ATT_BLOCK) scores, then weights */
    float *kbuf = sc + n_rep * XK_ATT_BLOCK;     /* (head_dim) a converted K row */
    float *vbuf = kbuf + head_dim;               /* (head_dim) a converted V row */
    for (int64_t h = 0; h < n_rep; h++) {
        ml[2 * h] = -INFINITY;
        ml[2 * h + 1] = 0.0f;
    }
    memset(o, 0, (size_t)(n_rep * head_dim) * sizeof(float));
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
            float mnew = bm > ml[2 * h] ? bm : ml[2 * h];
            float corr = expf(ml[2 * h] - mnew); /* exp(-inf) = 0 on the first block */
            float bs = 0.0f;
            for (int64_t jj = 0; jj < jb; jj++) {
                s[jj] = expf(s[jj] - mnew);
                bs += s[jj];
            }
            ml[2 * h + 1] = ml[2 * h + 1] * corr + bs;
            ml[2 * h] = mnew;
            if (corr != 1.0f) {
                float *oh = o + h * head_dim;
#pragma omp simd
                for (int64_t i = 0; i < head_dim; i++) oh[i] *= corr;
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
                float *oh = o + h * head_dim;
#pragma omp simd
                for (int64_t i = 0; i < head_dim; i++) oh[i] += p * v[i];
            }
        }
    }
}

/* out (n_rep, head_dim) = o / l per head (0 where l = 0). */
static void attn_normalize(float *out, const float *o, const float *ml, int64_t n_rep, int64_t head_dim) {
    for (int64_t h = 0; h < n_rep; h++) {
        const float l = ml[2 * h + 1], inv = l > 0.0f ? 1.0f / l : 0.0f;
        for (int64_t i = 0; i < head_dim; i++) out[h * head_dim + i] = o[h * head_dim + i] * inv;
    }
}

void xk_attention(float *out, const float *q, int64_t n_rep, int64_t head_dim, const void *k_base,
                  const void *v_base, xf_dtype dtype, int64_t row_elems, int64_t head_off, const int64_t *slots,
                  int64_t n_ctx, float scale, float *scratch) {
    float *ml = scratch + n_rep * XK_ATT_BLOCK + 2 * head_dim; /* the scratch's (n_rep, 2) tail */
    attn_part_scalar(out, ml, q, n_rep, head_dim, k_base, v_base, dtype, row_elems, head_off, slots, n_ctx, scale, scratch);
    attn_normalize(out, out, ml, n_rep, head_dim);
}

/* ---- decode, vectorized: blocks of XK_DEC_KEYS keys ----
 * In-cache cost measured on the 2-core Xeon VM (busy machine; CPU time of one thread, head_dim
 * 64, fp32 KV, 1024 keys): per key, 13-14 ns for one query head (AVX2 19, scalar 28-30) and
 * 43-48 ns for a GQA group of 8 (AVX2 59, scalar 143). */

#define XK_DEC_KEYS 64   /* keys per online-softmax block: four AVX-512 vectors of scores */

static int64_t round16(int64_t n) { return (n + 15) & ~(int64_t)15; } /* keeps every part 64-byte aligned */

/* Floats of scratch the AVX-512 head-lane variant (attn_part_heads) needs for n_rep query heads in
 * all: its K and V blocks hold every KV head of the part, at most n_rep / 4 of them (the variant
 * runs for 4 or more query heads per KV head). */
static int64_t heads_scratch(int64_t n_rep, int64_t hd) {
    const int64_t hdp = (hd + 31) & ~(int64_t)31; /* bf16 rows are converted in 32-element pieces */
    const int64_t n_g = n_rep / 4 > 1 ? n_rep / 4 : 1;
    return 2 * n_rep * hdp + 2 * XK_DEC_KEYS * n_g * hdp + 64 * 16 + round16(8 * n_rep);
}

int64_t xk_attn_decode_scratch(int64_t n_rep, int64_t head_dim) {
    const int64_t hdp = round16(head_dim);
    const int64_t vec = round16(n_rep * hdp) + (2 * XK_DEC_KEYS + 1) * hdp + round16(n_rep * XK_DEC_KEYS) + round16(n_rep);
    const int64_t ref = n_rep * 66 + 2 * head_dim; /* the scalar variant's */
    const int64_t hl = heads_scratch(n_rep, head_dim); /* the AVX-512 head-lane variant's */
    /* the AVX-512 whole-row variant's (n_rep KV heads of one query head each) */
    const int64_t rows = 3 * n_rep * hdp + (256 + 2 * XK_DEC_KEYS) * n_rep + round16(n_rep * head_dim) + round16(n_rep);
    const int64_t m = vec > ref ? vec : ref, m2 = hl > m ? hl : m;
    return rows > m2 ? rows : m2;
}

#if XK_X86
/* r[i] = the sum (MX 0) or the max (MX 1) of the 16 lanes of v[i], for i in [0, 16): a
 * transpose-and-combine tree (pairs within 128-bit lanes, then quadruples, then across the four
 * 128-bit lanes), 30 shuffles and 15 adds or maxes. */
static inline TGT_AVX512 __attribute__((always_inline)) __m512 hop(__m512 a, __m512 b, const int MX) {
    return MX ? _mm512_max_ps(a, b) : _mm512_add_ps(a, b);
}
static inline TGT_AVX512 __attribute__((always_inline)) __m512 hred16x16(const __m512 *v, const int MX) {
    __m512 w[8], u[4];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        w[i] = hop(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]), MX);
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        u[i] = hop(_mm512_shuffle_ps(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                   _mm512_shuffle_ps(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)), MX);
    const __m512 e = hop(_mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)), MX);
    const __m512 f = hop(_mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)), MX);
    return hop(_mm512_shuffle_f32x4(e, f, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_f32x4(e, f, _MM_SHUFFLE(3, 1, 3, 1)),
               MX);
}
static inline TGT_AVX512 __attribute__((always_inline)) __m512 hsum16x16(const __m512 *v) { return hred16x16(v, 0); }

/* n elements of a 16-bit KV row as fp32 into dst (padded with zeros to a multiple of 16). */
static inline TGT_AVX512 __attribute__((always_inline)) void cvt_row512(float *dst, const uint16_t *src, xf_dtype dt,
                                                                        int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        const __m256i h = _mm256_maskz_loadu_epi16(m, src + i);
        const __m512 f = dt == XF_FP16 ? _mm512_cvtph_ps(h)
                                       : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        _mm512_store_ps(dst + i, f);
    }
}

/* n fp32 elements of a KV row into dst (padded with zeros to a multiple of 16): inline, since a
 * libc memcpy of a 256-byte head slice took 27% of tinyllama's decode attention in cache. */
static inline TGT_AVX512 __attribute__((always_inline)) void copy_row512(float *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        _mm512_store_ps(dst + i, _mm512_maskz_loadu_ps(m, src + i));
    }
}

/* The element at position p of a row converted for attn_part_heads: bf16 rows in 32-element
 * pieces, even elements then odd ones; the others in order. */
static inline int64_t row_dim(int64_t p, xf_dtype dt) {
    if (dt != XF_BF16) return p;
    const int64_t r = p % 32;
    return p - r + (r < 16 ? 2 * r : 2 * (r - 16) + 1);
}
/* n bf16 elements as fp32 in row_dim's order into dst (round32(n) floats, zeros past n): the
 * even elements of a 32-element piece are its dwords shifted left by 16, the odd ones the dwords
 * with the low half cleared. */
static inline TGT_AVX512 __attribute__((always_inline)) void cvt_row_bf16eo(float *dst, const uint16_t *src, int64_t n) {
    for (int64_t i = 0; i < n; i += 32) {
        const __mmask32 m = n - i >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << (n - i)) - 1u);
        const __m512i x = _mm512_maskz_loadu_epi16(m, src + i);
        _mm512_store_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)));
        _mm512_store_ps(dst + i + 16, _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32((int)0xffff0000u))));
    }
}
/* The first n rows of the slot table (bytes of each from off_bytes) of K and V into L1: the first
 * block of a part (prefetch_next brings the later ones ahead while the block before is computed). */
static inline TGT_AVX512 __attribute__((always_inline)) void prefetch_rows(const char *kbase, const char *vbase,
                                                                           const int64_t *slots, int64_t n, int64_t row_bytes,
                                                                           int64_t off_bytes, int64_t bytes) {
    for (int64_t j = 0; j < n; j++) {
        const char *a = kbase + slots[j] * row_bytes + off_bytes, *b = vbase + slots[j] * row_bytes + off_bytes;
        for (int64_t x = 0; x < bytes; x += 64) {
            _mm_prefetch(a + x, _MM_HINT_T0);
            _mm_prefetch(b + x, _MM_HINT_T0);
        }
        if ((uintptr_t)a & 63) { /* a row that does not start on a line: its last line */
            _mm_prefetch(a + bytes - 1, _MM_HINT_T0);
            _mm_prefetch(b + bytes - 1, _MM_HINT_T0);
        }
    }
}

/* One block's row pointers for one KV head (attn_part_avx512): kr / vr [0, n) = the K and V rows of
 * slots[0 .. jb) (the zero row from jb on) at byte offset goff. fp32 rows are used where they are;
 * 16-bit ones are converted in order into kb / vb (rows of hdp floats). */
static inline TGT_AVX512 __attribute__((always_inline)) void
block_rows(const float **kr, const float **vr, const char *kbase, const char *vbase, const int64_t *slots, int64_t jb,
           int64_t n, int64_t row_bytes, int64_t goff, xf_dtype dt, float *kb, float *vb, int64_t hdp, int64_t hd,
           const float *zero) {
    for (int64_t jj = 0; jj < n; jj++) {
        const char *kr8 = kbase + slots[jj < jb ? jj : 0] * row_bytes + goff, *vr8 = vbase + slots[jj < jb ? jj : 0] * row_bytes + goff;
        if (jj >= jb) kr[jj] = vr[jj] = zero;
        else if (dt == XF_FP32) {
            kr[jj] = (const float *)(const void *)kr8;
            vr[jj] = (const float *)(const void *)vr8;
        } else {
            cvt_row512(kb + jj * hdp, (const uint16_t *)(const void *)kr8, dt, hd);
            cvt_row512(vb + jj * hdp, (const uint16_t *)(const void *)vr8, dt, hd);
            kr[jj] = kb + jj * hdp;
            vr[jj] = vb + jj * hdp;
        }
    }
}

/* A line of a stream read ahead: into L2 (T1), or L1 (T0) where the CPU's choice says so
 * (xk_prefetch_to_l1: Zen 5, where the rows kernel read 1.02-1.3x as fast, docs/performance.md). */
static inline TGT_AVX512 __attribute__((always_inline)) void prefetch_ahead(const char *p) {
    if (xk_prefetch_to_l1) _mm_prefetch(p, _MM_HINT_T0);
    else _mm_prefetch(p, _MM_HINT_T1);
}
/* One row of the slot table ahead (prefetch_ahead), `bytes` of it from off_bytes, K and V: issued
 * for each KV head's slice while the same keys of the block before are computed for that head
 * (attn_part_avx512), or for whole rows 8 ahead of the one read (block_rows_whole), so the stream
 * ahead of the arithmetic is a steady trickle rather than a burst that fills the line-fill buffers. */
static inline TGT_AVX512 __attribute__((always_inline)) void prefetch_row(const char *kbase, const char *vbase,
                                                                          int64_t slot, int64_t row_bytes, int64_t off_bytes,
                                                                          int64_t bytes) {
    const char *a = kbase + slot * row_bytes + off_bytes, *b = vbase + slot * row_bytes + off_bytes;
    for (int64_t x = 0; x < bytes; x += 64) {
        prefetch_ahead(a + x);
        prefetch_ahead(b + x);
    }
    if ((uintptr_t)a & 63) { /* rows that do not start on a line: their last line */
        prefetch_ahead(a + bytes - 1);
        prefetch_ahead(b + bytes - 1);
    }
}
/* The 16 rows from j (those below n_ctx) ahead at once (prefetch_row). */
static inline TGT_AVX512 __attribute__((always_inline)) void prefetch_next(const char *kbase, const char *vbase,
                                                                           const int64_t *slots, int64_t j, int64_t n_ctx,
                                                                           int64_t row_bytes, int64_t off_bytes, int64_t bytes) {
    const int64_t j1 = j + 16 < n_ctx ? j + 16 : n_ctx;
    for (; j < j1; j++) prefetch_row(kbase, vbase, slots[j], row_bytes, off_bytes, bytes);
}

/* Rows ahead of the one converted that block_rows_whole fetches: on a 2-vCPU AMD EPYC (Zen 5),
 * tinyllama's GQA from DRAM, 2 threads, 4, 8 and 16 rows ran within the noise of each other, 32 and
 * 64 (the whole next block) slower; there into L1 (T0, the CPU's choice, xk_prefetch_to_l1)
 * 1.09-1.37x as fast as into L2 (T1) at every point (docs/performance.md). */
#define XK_DEC_ROWS_PF 8
/* One block's rows whole, in row order: K and V row jj (every KV head's slice of it, n_g slices of
 * hd elements from off_bytes) as fp32 into kb / vb at (g * XK_DEC_KEYS + jj) * hdp for jj in [0, jb)
 * (fp32 copied, 16-bit converted, each zero-padded to a multiple of 16: in row_dim's order when
 * eo), row jj + XK_DEC_ROWS_PF (below left, the keys from the block's first on) fetched whole
 * beside it (prefetch_row); rows [jb, jb rounded up to 16) zeros. The kernel then takes one KV head
 * after the other from L2; reading each KV head's slices of the rows in turn made the memory see
 * n_g strided passes over every block (read 0.4-0.9x as fast, docs/performance.md). */
static inline TGT_AVX512 __attribute__((always_inline)) void
block_rows_whole(float *kb, float *vb, const char *kbase, const char *vbase, const int64_t *slots, int64_t jb, int64_t left,
                 int64_t row_bytes, int64_t off_bytes, int64_t n_g, xf_dtype dt, const int eo, int64_t hdp, int64_t hd) {
    const int64_t hbytes = hd * (dt == XF_FP32 ? 4 : 2);
    for (int64_t jj = 0; jj < jb; jj++) {
        if (jj + XK_DEC_ROWS_PF < left) prefetch_row(kbase, vbase, slots[jj + XK_DEC_ROWS_PF], row_bytes, off_bytes, n_g * hbytes);
        const char *kr8 = kbase + slots[jj] * row_bytes + off_bytes, *vr8 = vbase + slots[jj] * row_bytes + off_bytes;
        for (int64_t g = 0; g < n_g; g++) {
            float *kd = kb + (g * XK_DEC_KEYS + jj) * hdp, *vd = vb + (g * XK_DEC_KEYS + jj) * hdp;
            const char *ks = kr8 + g * hbytes, *vs = vr8 + g * hbytes;
            if (dt == XF_FP32) {
                copy_row512(kd, (const float *)(const void *)ks, hd);
                copy_row512(vd, (const float *)(const void *)vs, hd);
            } else if (eo) {
                cvt_row_bf16eo(kd, (const uint16_t *)(const void *)ks, hd);
                cvt_row_bf16eo(vd, (const uint16_t *)(const void *)vs, hd);
            } else {
                cvt_row512(kd, (const uint16_t *)(const void *)ks, dt, hd);
                cvt_row512(vd, (const uint16_t *)(const void *)vs, dt, hd);
            }
        }
    }
    for (int64_t g = 0; g < n_g; g++) /* the last block's keys up to a multiple of 16: zeros (their scores are masked) */
        for (int64_t jj = jb; jj < ((jb + 15) & ~(int64_t)15); jj++) {
            memset(kb + (g * XK_DEC_KEYS + jj) * hdp, 0, (size_t)hdp * sizeof(float));
            memset(vb + (g * XK_DEC_KEYS + jj) * hdp, 0, (size_t)hdp * sizeof(float));
        }
}

/* One part in AVX-512, in blocks of XK_DEC_KEYS keys: the scores of 16 keys at a time (16 dot
 * products over head_dim, one accumulator each, reduced by hsum16x16), one online-softmax update
 * per block (max, exp, sum over the block's score vectors), then P.V with the weights broadcast and
 * the output row in registers. GQA's n_rep heads reuse each block of K and V from L1. The rows of
 * the block ahead are prefetched (the slot table makes the stream irregular to the hardware
 * prefetchers). */
/* 16 elements from element i of a KV row: fp32 as stored (direct = 0, or rows converted to fp32
 * first), or fp16 / bf16 read in place and widened in the register (direct = 1). */
static inline TGT_AVX512 __attribute__((always_inline)) __m512 ld_kv(const float *p, int64_t i, __mmask16 m, xf_dtype dt,
                                                                     const int direct) {
    if (!direct) return _mm512_maskz_loadu_ps(m, p + i);
    const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)(const void *)p + i);
    return dt == XF_FP16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* qs (n, round16(hd)) = scale * q (n, hd), zero-padded, and each head's running max and sum reset
 * (ml (n, 2)): the start of the per-head and whole-row AVX-512 variants. */
static inline TGT_AVX512 __attribute__((always_inline)) void scale_q_reset(float *qs, float *ml, const float *q, int64_t n,
                                                                           int64_t hd, float scale) {
    const int64_t hdp = round16(hd), nvec = hdp / 16;
    const __mmask16 tail = hd % 16 ? (__mmask16)((1u << (hd % 16)) - 1u) : (__mmask16)0xffff;
    const __m512 vs = _mm512_set1_ps(scale);
    for (int64_t h = 0; h < n; h++) {
        for (int64_t v = 0; v < nvec; v++) {
            const __mmask16 m = v == nvec - 1 ? tail : (__mmask16)0xffff;
            _mm512_store_ps(qs + h * hdp + v * 16, _mm512_mul_ps(vs, _mm512_maskz_loadu_ps(m, q + h * hd + v * 16)));
        }
        ml[2 * h] = -INFINITY;
        ml[2 * h + 1] = 0.0f;
    }
}

static TGT_AVX512 void attn_part_avx512(float *o, float *ml, const float *q, int64_t n_g, int64_t n_rep, int64_t hd,
                                        const void *k_base, const void *v_base, xf_dtype dt, int64_t row_elems,
                                        int64_t head_off, const int64_t *slots, int64_t n_ctx, float scale, float *scratch) {
    const int64_t hdp = round16(hd), nvec = hdp / 16, esz = dt == XF_FP32 ? 4 : 2, nh = n_g * n_rep;
    const int64_t row_bytes = row_elems * esz, off_bytes = head_off * esz, hbytes = hd * esz;
    const __mmask16 tail = hd % 16 ? (__mmask16)((1u << (hd % 16)) - 1u) : (__mmask16)0xffff;
    float *qs = scratch;                                  /* (nh, hdp) scale * q, zero-padded */
    float *kb = qs + round16(nh * hdp);                   /* (XK_DEC_KEYS, hdp) a block of K as fp32 */
    float *vb = kb + XK_DEC_KEYS * hdp;                   /* (XK_DEC_KEYS, hdp) a block of V as fp32 */
    float *zero = vb + XK_DEC_KEYS * hdp;                 /* (hdp) zeros: the rows past n_ctx */
    float *pw = zero + hdp;                               /* (n_rep, XK_DEC_KEYS) this block's weights */
    float *cr = pw + round16(n_rep * XK_DEC_KEYS);        /* (n_rep) this block's rescale factors */
    scale_q_reset(qs, ml, q, nh, hd, scale);
    for (int64_t v = 0; v < nvec; v++) _mm512_store_ps(zero + v * 16, _mm512_setzero_ps());
    memset(o, 0, (size_t)(nh * hd) * sizeof(float));
    const char *kbase = k_base, *vbase = v_base;
    prefetch_rows(kbase, vbase, slots, n_ctx < XK_DEC_KEYS ? n_ctx : XK_DEC_KEYS, row_bytes, off_bytes, n_g * hbytes);
    const float *kr[XK_DEC_KEYS], *vr[XK_DEC_KEYS];
    for (int64_t j0 = 0; j0 < n_ctx; j0 += XK_DEC_KEYS) {
        const int64_t jb = n_ctx - j0 < XK_DEC_KEYS ? n_ctx - j0 : XK_DEC_KEYS, nsub = (jb + 15) / 16;
      for (int64_t g = 0; g < n_g; g++) { /* the KV heads of a row one after the other: the block's rows stream in order */
        const int64_t goff = off_bytes + g * hbytes;
        block_rows(kr, vr, kbase, vbase, slots + j0, jb, nsub * 16, row_bytes, goff, dt, kb, vb, hdp, hd, zero);
        for (int64_t h = 0; h < n_rep; h++) {
            const int64_t hh = g * n_rep + h;
            __m512 sv[XK_DEC_KEYS / 16];
            __m512 vmax = _mm512_set1_ps(-INFINITY);
            for (int64_t sb = 0; sb < nsub; sb++) {
                const float *const *kk = kr + sb * 16;
                /* the same 16 keys of the next block, all at once (spread one row every nvec / 16 steps
                 * of the dot products, fp32 rows measured 0.87-0.93x) */
                if (h == 0) prefetch_next(kbase, vbase, slots, j0 + XK_DEC_KEYS + sb * 16, n_ctx, row_bytes, goff, hbytes);
                __m512 acc[16]; /* in registers: every loop over them is unrolled */
#pragma GCC unroll 16
                for (int jj = 0; jj < 16; jj++) acc[jj] = _mm512_setzero_ps();
                for (int64_t v = 0; v < nvec; v++) {
                    const __m512 qv = _mm512_load_ps(qs + hh * hdp + v * 16);
                    /* fp32 rows are read in place: the last vector masked (the zero-padded q makes
                     * the tail's value irrelevant, but the load must not leave the row) */
                    const __mmask16 m = v == nvec - 1 && dt == XF_FP32 ? tail : (__mmask16)0xffff;
#pragma GCC unroll 16
                    for (int jj = 0; jj < 16; jj++) acc[jj] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, kk[jj] + v * 16), acc[jj]);
                }
                const int64_t left = jb - sb * 16;
                const __mmask16 live = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
                sv[sb] = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), live, hsum16x16(acc));
                vmax = _mm512_max_ps(vmax, sv[sb]);
            }
            const float mnew = softmax_max(ml[2 * hh], _mm512_reduce_max_ps(vmax));
            const __m512 mv = _mm512_set1_ps(mnew);
            __m512 sum = _mm512_setzero_ps();
            for (int64_t sb = 0; sb < nsub; sb++) {
                /* -inf lanes (past n_ctx) would give exp(-87): zeroed */
                const __mmask16 live = _mm512_cmp_ps_mask(sv[sb], _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
                const __m512 p = _mm512_maskz_mov_ps(live, exp16_le0(_mm512_sub_ps(sv[sb], mv)));
                _mm512_store_ps(pw + h * XK_DEC_KEYS + sb * 16, p);
                sum = _mm512_add_ps(sum, p);
            }
            cr[h] = softmax_commit(&ml[2 * hh], &ml[2 * hh + 1], mnew, _mm512_reduce_add_ps(sum));
        }
        for (int64_t h = 0; h < n_rep; h++) {
            const __m512 c = _mm512_set1_ps(cr[h]);
            const float *ph = pw + h * XK_DEC_KEYS;
            float *oh = o + (g * n_rep + h) * hd;
            for (int64_t v0 = 0; v0 < nvec; v0 += 4) { /* 4 vectors of the output row in registers */
                const int64_t nv = nvec - v0 < 4 ? nvec - v0 : 4;
                __mmask16 m[4];
                __m512 ov[4];
#pragma GCC unroll 4
                for (int u = 0; u < 4; u++) {
                    m[u] = u >= nv ? (__mmask16)0 : v0 + u == nvec - 1 ? tail : (__mmask16)0xffff;
                    ov[u] = _mm512_mul_ps(c, _mm512_maskz_loadu_ps(m[u], oh + (v0 + u) * 16));
                }
                /* even and odd keys into two sets of accumulators: 8 FMA chains in flight, so
                 * the FMA latency does not bound the loop (the rows past jb are zero, weight 0) */
                __m512 ow[4];
#pragma GCC unroll 4
                for (int u = 0; u < 4; u++) ow[u] = _mm512_setzero_ps();
                for (int64_t jj = 0; jj < jb; jj += 2) {
                    const __m512 pj = _mm512_set1_ps(ph[jj]), pk = _mm512_set1_ps(ph[jj + 1]);
#pragma GCC unroll 4
                    for (int u = 0; u < 4; u++) {
                        ov[u] = _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(m[u], vr[jj] + (v0 + u) * 16), ov[u]);
                        ow[u] = _mm512_fmadd_ps(pk, _mm512_maskz_loadu_ps(m[u], vr[jj + 1] + (v0 + u) * 16), ow[u]);
                    }
                }
#pragma GCC unroll 4
                for (int u = 0; u < 4; u++) _mm512_mask_storeu_ps(oh + (v0 + u) * 16, m[u], _mm512_add_ps(ov[u], ow[u]));
            }
        }
      }
    }
}

/* The variants of a part as functions of attn_part_g's parameters: an always-inline body
 * instantiated with its dtype (dt, or a constant) and its last, constant, argument. */
#define ATTN_PART_VARIANT(name, body, dt_arg, last)                                                                   \
    static TGT_AVX512 void name(float *o, float *ml, const float *q, int64_t n_g, int64_t n_rep, int64_t hd,           \
                                const void *k_base, const void *v_base, xf_dtype dt, int64_t row_elems,                \
                                int64_t head_off, const int64_t *slots, int64_t n_ctx, float scale, float *scratch) {  \
        (void)dt;                                                                                                      \
        body(o, ml, q, n_g, n_rep, hd, k_base, v_base, dt_arg, row_elems, head_off, slots, n_ctx, scale, scratch, last); \
    }

/* ---- AVX-512, one query head per KV head: each row read whole, K and V rows side by side ----
 * A KV row holds every KV head of a token. Reading one head's slice of a block's rows before the
 * next head's (attn_part_avx512_t's order) read 0.45-0.62 of the DRAM read ceiling in replays of
 * stories110m / tinyllama shapes where reading each row whole, a K row beside a V row, read
 * 0.67-0.82 (2026-12-02, docs/performance.md, tenth session). So the block loop is pipelined: step
 * r reads K row r of block b for every head's scores and V row r of block b - 1 for every head's
 * P.V, and prefetches (prefetch_span) the rows the next stage reads. Each head's state stays apart
 * and its sums run in attn_part_avx512_t's order, so the bits are its bits: the dot product of each
 * key summed over head_dim in order, 16 keys reduced by hsum16x16, one softmax update per block,
 * P.V's even and odd keys in two chains added at the end of the block. n_rep is 1. */
/* bytes from a ahead (prefetch_ahead) */
static inline TGT_AVX512 __attribute__((always_inline)) void prefetch_span(const char *a, int64_t bytes) {
    for (int64_t x = 0; x < bytes; x += 64) prefetch_ahead(a + x);
    if ((uintptr_t)a & 63) prefetch_ahead(a + bytes - 1); /* a row that does not start on a line */
}

static inline TGT_AVX512 __attribute__((always_inline)) void
attn_part_rows_t(float *o, float *ml, const float *q, int64_t n_g, int64_t n_rep, int64_t hd, const void *k_base,
                 const void *v_base, xf_dtype dt, int64_t row_elems, int64_t head_off, const int64_t *slots, int64_t n_ctx,
                 float scale, float *scratch, const int direct) {
    (void)n_rep;
    const int64_t hdp = round16(hd), nvec = hdp / 16, esz = dt == XF_FP32 ? 4 : 2;
    const int64_t row_bytes = row_elems * esz, off_bytes = head_off * esz, hbytes = hd * esz, rbytes = n_g * hbytes;
    const __mmask16 tail = hd % 16 ? (__mmask16)((1u << (hd % 16)) - 1u) : (__mmask16)0xffff;
    float *qs = scratch;                  /* (n_g, hdp) scale * q, zero-padded */
    float *acc = qs + n_g * hdp;          /* (n_g, 16, 16) the dot products of a sub-block's 16 keys */
    float *sc = acc + n_g * 256;          /* (n_g, XK_DEC_KEYS) block b's scores */
    float *pw = sc + n_g * XK_DEC_KEYS;   /* (n_g, XK_DEC_KEYS) block b - 1's weights */
    float *ov = pw + n_g * XK_DEC_KEYS;   /* (n_g, hdp) P.V of block b - 1's even keys ... */
    float *ow = ov + n_g * hdp;           /* (n_g, hdp) ... and of its odd keys */
    float *zero = ow + n_g * hdp;         /* (round16(n_g * hd)) zeros: the rows past n_ctx */
    float *cr = zero + round16(n_g * hd); /* (n_g) block b - 1's rescale factors */
    scale_q_reset(qs, ml, q, n_g, hd, scale);
    memset(zero, 0, (size_t)round16(n_g * hd) * sizeof(float));
    memset(o, 0, (size_t)(n_g * hd) * sizeof(float));
    const char *kbase = k_base, *vbase = v_base;
    prefetch_rows(kbase, vbase, slots, n_ctx < XK_DEC_KEYS ? n_ctx : XK_DEC_KEYS, row_bytes, off_bytes, rbytes);
    const int64_t nblk = (n_ctx + XK_DEC_KEYS - 1) / XK_DEC_KEYS;
    int64_t jbp = 0; /* keys of block b - 1 */
    for (int64_t b = 0; b <= nblk; b++) { /* stage b: block b's scores, block b - 1's P.V */
        const int64_t j0 = b * XK_DEC_KEYS, jb = b == nblk ? 0 : n_ctx - j0 < XK_DEC_KEYS ? n_ctx - j0 : XK_DEC_KEYS;
        const int64_t nk = (jb + 15) & ~(int64_t)15, npv = (jbp + 1) & ~(int64_t)1; /* zero rows to 16 keys, to a pair */
        for (int64_t g = 0; b > 0 && g < n_g; g++) { /* the output so far rescaled: the even keys' chain starts there */
            const __m512 c = _mm512_set1_ps(cr[g]);
            for (int64_t v = 0; v < nvec; v++) {
                const __mmask16 m = v == nvec - 1 ? tail : (__mmask16)0xffff;
                _mm512_store_ps(ov + g * hdp + v * 16, _mm512_mul_ps(c, _mm512_maskz_loadu_ps(m, o + g * hd + v * 16)));
                _mm512_store_ps(ow + g * hdp + v * 16, _mm512_setzero_ps());
            }
        }
        for (int64_t r = 0; r < (nk > npv ? nk : npv); r++) {
            if (r < nk) {
                const int64_t j = j0 + r;
                if (j + XK_DEC_KEYS < n_ctx) prefetch_span(kbase + slots[j + XK_DEC_KEYS] * row_bytes + off_bytes, rbytes);
                if (b > 0 && r < jb) prefetch_span(vbase + slots[j] * row_bytes + off_bytes, rbytes);
                const char *kr = r < jb ? kbase + slots[j] * row_bytes + off_bytes : (const char *)zero;
                for (int64_t g = 0; g < n_g; g++) {
                    const float *kg = (const float *)(const void *)(kr + g * hbytes);
                    __m512 a = _mm512_setzero_ps();
                    for (int64_t v = 0; v < nvec; v++)
                        a = _mm512_fmadd_ps(_mm512_load_ps(qs + g * hdp + v * 16),
                                            ld_kv(kg, v * 16, v == nvec - 1 ? tail : (__mmask16)0xffff, dt, direct), a);
                    _mm512_store_ps(acc + g * 256 + (r % 16) * 16, a);
                }
                if (r % 16 == 15) { /* a sub-block's 16 scores per head */
                    const int64_t left = jb - (r - 15);
                    const __mmask16 live = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
                    for (int64_t g = 0; g < n_g; g++)
                        _mm512_store_ps(sc + g * XK_DEC_KEYS + r - 15,
                                        _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), live, hsum16x16((const __m512 *)(const void *)(acc + g * 256))));
                }
            }
            if (r < npv) {
                const char *vr = r < jbp ? vbase + slots[j0 - XK_DEC_KEYS + r] * row_bytes + off_bytes : (const char *)zero;
                float *dst = r % 2 ? ow : ov;
                for (int64_t g = 0; g < n_g; g++) {
                    const float *vg = (const float *)(const void *)(vr + g * hbytes);
                    const __m512 p = _mm512_set1_ps(pw[g * XK_DEC_KEYS + r]);
                    for (int64_t v = 0; v < nvec; v++) {
                        float *d = dst + g * hdp + v * 16;
                        _mm512_store_ps(d, _mm512_fmadd_ps(p, ld_kv(vg, v * 16, v == nvec - 1 ? tail : (__mmask16)0xffff, dt, direct),
                                                           _mm512_load_ps(d)));
                    }
                }
            }
        }
        for (int64_t g = 0; b > 0 && g < n_g; g++)
            for (int64_t v = 0; v < nvec; v++)
                _mm512_mask_storeu_ps(o + g * hd + v * 16, v == nvec - 1 ? tail : (__mmask16)0xffff,
                                      _mm512_add_ps(_mm512_load_ps(ov + g * hdp + v * 16), _mm512_load_ps(ow + g * hdp + v * 16)));
        for (int64_t g = 0; g < n_g && jb > 0; g++) { /* block b's softmax update */
            const float *s = sc + g * XK_DEC_KEYS;
            __m512 vmax = _mm512_set1_ps(-INFINITY);
            for (int64_t sb = 0; sb < nk / 16; sb++) vmax = _mm512_max_ps(vmax, _mm512_load_ps(s + sb * 16));
            const float mnew = softmax_max(ml[2 * g], _mm512_reduce_max_ps(vmax));
            const __m512 mv = _mm512_set1_ps(mnew);
            __m512 sum = _mm512_setzero_ps();
            for (int64_t sb = 0; sb < nk / 16; sb++) {
                const __m512 sv = _mm512_load_ps(s + sb * 16);
                /* -inf lanes (past n_ctx) would give exp(-87): zeroed */
                const __mmask16 live = _mm512_cmp_ps_mask(sv, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
                const __m512 p = _mm512_maskz_mov_ps(live, exp16_le0(_mm512_sub_ps(sv, mv)));
                _mm512_store_ps(pw + g * XK_DEC_KEYS + sb * 16, p);
                sum = _mm512_add_ps(sum, p);
            }
            cr[g] = softmax_commit(&ml[2 * g], &ml[2 * g + 1], mnew, _mm512_reduce_add_ps(sum));
        }
        jbp = jb;
    }
}
ATTN_PART_VARIANT(attn_part_rows, attn_part_rows_t, dt, 0)
ATTN_PART_VARIANT(attn_part_rows_f16, attn_part_rows_t, XF_FP16, 1)
ATTN_PART_VARIANT(attn_part_rows_b16, attn_part_rows_t, XF_BF16, 1)

/* r[i] = the sum of the 8 lanes of v[i], for i in [0, 8): hadd tree then the two 128-bit halves. */
static inline TGT_AVX2 __attribute__((always_inline)) __m256 hsum8x8(const __m256 *v) {
    const __m256 a = _mm256_hadd_ps(v[0], v[1]), b = _mm256_hadd_ps(v[2], v[3]);
    const __m256 c = _mm256_hadd_ps(v[4], v[5]), d = _mm256_hadd_ps(v[6], v[7]);
    const __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d); /* lanes: (0 1 2 3 | 0 1 2 3) halves */
    const __m256 lo = _mm256_permute2f128_ps(ab, cd, 0x20), hi = _mm256_permute2f128_ps(ab, cd, 0x31);
    return _mm256_add_ps(lo, hi);
}

static inline TGT_AVX2 __attribute__((always_inline)) float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
static inline TGT_AVX2 __attribute__((always_inline)) float hadd8(__m256 v) {
    __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* The AVX2 part: the AVX-512 one's steps on 8 lanes, every row converted to fp32 into the block
 * buffers first (AVX2 has no masked float loads of 16-bit data, and head_dim need not be a
 * multiple of 8), so the loops run on zero-padded rows of hdp floats. */
static TGT_AVX2 void attn_part_avx2(float *o, float *ml, const float *q, int64_t n_rep, int64_t hd, const void *k_base,
                                    const void *v_base, xf_dtype dt, int64_t row_elems, int64_t head_off,
                                    const int64_t *slots, int64_t n_ctx, float scale, float *scratch) {
    const int64_t hdp = round16(hd), nvec = (hd + 7) / 8, esz = dt == XF_FP32 ? 4 : 2;
    const int64_t row_bytes = row_elems * esz, off_bytes = head_off * esz;
    float *qs = scratch;                           /* (n_rep, hdp) scale * q, zero-padded */
    float *kb = qs + round16(n_rep * hdp);         /* (XK_DEC_KEYS, hdp) a block of K as fp32 */
    float *vb = kb + XK_DEC_KEYS * hdp;            /* (XK_DEC_KEYS, hdp) a block of V as fp32 */
    float *pw = vb + XK_DEC_KEYS * hdp + hdp;      /* (n_rep, XK_DEC_KEYS) this block's weights */
    float *cr = pw + round16(n_rep * XK_DEC_KEYS); /* (n_rep) this block's rescale factors */
    for (int64_t h = 0; h < n_rep; h++) {
        for (int64_t i = 0; i < hdp; i++) qs[h * hdp + i] = i < hd ? scale * q[h * hd + i] : 0.0f;
        ml[2 * h] = -INFINITY;
        ml[2 * h + 1] = 0.0f;
    }
    memset(o, 0, (size_t)(n_rep * hd) * sizeof(float));
    memset(kb, 0, (size_t)(2 * XK_DEC_KEYS * hdp) * sizeof(float)); /* the padding stays zero */
    const char *kbase = k_base, *vbase = v_base;
    for (int64_t j0 = 0; j0 < n_ctx; j0 += XK_DEC_KEYS) {
        const int64_t jb = n_ctx - j0 < XK_DEC_KEYS ? n_ctx - j0 : XK_DEC_KEYS, nsub = (jb + 7) / 8;
        for (int64_t jj = 0; jj < nsub * 8; jj++) {
            float *kd = kb + jj * hdp, *vd = vb + jj * hdp;
            if (jj >= jb) {
                memset(kd, 0, (size_t)hd * sizeof(float));
                memset(vd, 0, (size_t)hd * sizeof(float));
                continue;
            }
            const char *kr = kbase + slots[j0 + jj] * row_bytes + off_bytes, *vr = vbase + slots[j0 + jj] * row_bytes + off_bytes;
            if (j0 + jj + XK_DEC_KEYS < n_ctx) { /* the row one block ahead */
                const int64_t nx = slots[j0 + jj + XK_DEC_KEYS] * row_bytes + off_bytes;
                for (int64_t b = 0; b < hd * esz; b += 64) {
                    _mm_prefetch(kbase + nx + b, _MM_HINT_T0);
                    _mm_prefetch(vbase + nx + b, _MM_HINT_T0);
                }
            }
            if (dt == XF_FP32) {
                memcpy(kd, kr, (size_t)hd * sizeof(float));
                memcpy(vd, vr, (size_t)hd * sizeof(float));
            } else {
                xk_load(kd, kr, dt, hd);
                xk_load(vd, vr, dt, hd);
            }
        }
        for (int64_t h = 0; h < n_rep; h++) {
            __m256 sv[XK_DEC_KEYS / 8];
            __m256 vmax = _mm256_set1_ps(-INFINITY);
            for (int64_t sb = 0; sb < nsub; sb++) {
                const float *kk = kb + sb * 8 * hdp;
                __m256 acc[8];
#pragma GCC unroll 8
                for (int jj = 0; jj < 8; jj++) acc[jj] = _mm256_setzero_ps();
                for (int64_t v = 0; v < nvec; v++) {
                    const __m256 qv = _mm256_loadu_ps(qs + h * hdp + v * 8);
#pragma GCC unroll 8
                    for (int jj = 0; jj < 8; jj++) acc[jj] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kk + jj * hdp + v * 8), acc[jj]);
                }
                const int64_t left = jb - sb * 8;
                __m256 sc = hsum8x8(acc);
                if (left < 8) { /* lanes past n_ctx: -inf */
                    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                    const __m256 dead = _mm256_castsi256_ps(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32((int)left - 1)));
                    sc = _mm256_blendv_ps(sc, _mm256_set1_ps(-INFINITY), dead);
                }
                sv[sb] = sc;
                vmax = _mm256_max_ps(vmax, sc);
            }
            const float mnew = softmax_max(ml[2 * h], hmax8(vmax));
            const __m256 mv = _mm256_set1_ps(mnew);
            __m256 sum = _mm256_setzero_ps();
            for (int64_t sb = 0; sb < nsub; sb++) {
                const __m256 live = _mm256_cmp_ps(sv[sb], _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ);
                const __m256 p = _mm256_and_ps(live, exp8_le0(_mm256_sub_ps(sv[sb], mv)));
                _mm256_storeu_ps(pw + h * XK_DEC_KEYS + sb * 8, p);
                sum = _mm256_add_ps(sum, p);
            }
            cr[h] = softmax_commit(&ml[2 * h], &ml[2 * h + 1], mnew, hadd8(sum));
        }
        for (int64_t h = 0; h < n_rep; h++) {
            const float *ph = pw + h * XK_DEC_KEYS;
            float *oh = o + h * hd;
            float tmp[16];
            for (int64_t v0 = 0; v0 < nvec; v0 += 2) { /* 2 vectors of the output row, even and odd keys */
                const int two = v0 + 1 < nvec;
                __m256 ov[2], ow[2];
                for (int u = 0; u < 2; u++) {
                    const int64_t e0 = (v0 + u) * 8, ne = hd - e0 < 8 ? hd - e0 : 8;
                    memset(tmp, 0, sizeof tmp);
                    if (u == 0 || two) memcpy(tmp, oh + e0, (size_t)(ne > 0 ? ne : 0) * sizeof(float));
                    ov[u] = _mm256_mul_ps(_mm256_set1_ps(cr[h]), _mm256_loadu_ps(tmp));
                    ow[u] = _mm256_setzero_ps();
                }
                for (int64_t jj = 0; jj < jb; jj += 2) {
                    const __m256 pj = _mm256_set1_ps(ph[jj]), pk = _mm256_set1_ps(ph[jj + 1]);
                    const float *vj = vb + jj * hdp + v0 * 8, *vk = vj + hdp;
                    ov[0] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj), ov[0]);
                    ow[0] = _mm256_fmadd_ps(pk, _mm256_loadu_ps(vk), ow[0]);
                    ov[1] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8), ov[1]); /* padding: hdp >= 8 * (v0 + 2) */
                    ow[1] = _mm256_fmadd_ps(pk, _mm256_loadu_ps(vk + 8), ow[1]);
                }
                for (int u = 0; u < 2; u++) {
                    const int64_t e0 = (v0 + u) * 8, ne = hd - e0 < 8 ? hd - e0 : 8;
                    if (u == 1 && !two) break;
                    _mm256_storeu_ps(tmp, _mm256_add_ps(ov[u], ow[u]));
                    memcpy(oh + e0, tmp, (size_t)ne * sizeof(float));
                }
            }
        }
    }
}

/* ---- AVX-512, GQA groups of 4 or 8k query heads: the heads side by side in the lanes ----
 * W = 16 / H lanes per head for chunks of H heads (H = 8: W = 2; H = 4: W = 4). A query chunk is
 * laid out as hd / W vectors Q'[c], lane i = (head i / W, dim W c + i % W); W elements of a key row
 * broadcast to all 16 lanes (one load-port broadcast, no shuffle) times Q'[c] give every head's
 * partial products at once, so a key costs hd / W FMAs for the H heads with no horizontal sums: 16
 * keys' accumulators are reduced over their W dims by one or two shuffle-and-add stages (R vectors:
 * lane 4 L + p = head L (4 / W) + p % (4 / W), key p / (4 / W) of the group of W keys). P.V runs
 * in the rows' own layout (O[h] += P[h][j] V[j], register tiles of 4 heads x 4 vectors, the weights
 * broadcast from the R vectors), which needs half the loads per FMA of the head layout. */
static inline TGT_AVX512 __attribute__((always_inline)) __m512 bcast_w(const float *p, const int W) {
    if (W == 2) {
        double d;
        memcpy(&d, p, sizeof d);
        return _mm512_castpd_ps(_mm512_set1_pd(d));
    }
    return _mm512_broadcast_f32x4(_mm_loadu_ps(p));
}
/* the lanes of each head in the R layout combined by op (max or add): W = 2 pairs p, p ^ 2 */
static inline TGT_AVX512 __attribute__((always_inline)) __m512 rl_max(__m512 v, const int W) {
    v = _mm512_max_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
    if (W == 4) v = _mm512_max_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
    return v;
}
static inline TGT_AVX512 __attribute__((always_inline)) __m512 rl_add(__m512 v, const int W) {
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
    if (W == 4) v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
    return v;
}


static inline TGT_AVX512 __attribute__((always_inline)) void
attn_part_heads(float *o, float *ml, const float *q, int64_t n_g, int64_t n_rep, int64_t hd, const void *k_base, const void *v_base,
                xf_dtype dt, int64_t row_elems, int64_t head_off, const int64_t *slots, int64_t n_ctx, float scale,
                float *scratch, const int W) {
    const int H = 16 / W, Q = 4 / W; /* heads per chunk; heads per 128-bit lane of an R vector */
    /* a row's positions: bf16 rows are converted in 32-element pieces, even elements first (one
     * shift or mask per 16, no shuffle), so position p holds element row_dim(p) (>= hd: padding) */
    const int64_t hdp = (hd + 31) & ~(int64_t)31, rl = dt == XF_BF16 ? hdp : hd, nc = rl / W;
    const int64_t cpg = n_rep / H, nch = n_g * cpg, esz = dt == XF_FP32 ? 4 : 2; /* chunks per KV head, in all */
    const int64_t row_bytes = row_elems * esz, off_bytes = head_off * esz, hbytes = hd * esz;
    float *qp = scratch;                        /* (nch, nc, 16) the scaled query in the head layout */
    float *op = qp + n_g * n_rep * hdp;         /* (n_g * n_rep, hdp) the unnormalized output, rows at their positions */
    float *kb = op + n_g * n_rep * hdp;         /* (n_g, XK_DEC_KEYS, hdp) a block of K as fp32, every KV head */
    float *vb = kb + n_g * XK_DEC_KEYS * hdp;   /* (n_g, XK_DEC_KEYS, hdp) the same of V */
    float *rb = vb + n_g * XK_DEC_KEYS * hdp;   /* (64, 16) a block's R vectors (scores, then weights) */
    float *mls = rb + 64 * 16;                  /* (nch, 2, 16) running max and sum per chunk, R layout */
    { /* Q'[c] lane i = scale * q[head i / W][row_dim(W c + i % W)]: W positions of a chunk's piece sit
       * in one half of a bf16 piece (row_dim steps by 2 there) or in order, so one gather per vector
       * (the per-element loop cost about a third of a 16-key part, one thread, in cache) */
        const int st = dt == XF_BF16 ? 2 : 1;
        int32_t a[16], b[16]; /* lane i: element offset in the chunk's query, and its dim past d0 */
        for (int i = 0; i < 16; i++) {
            b[i] = st * (i % W);
            a[i] = (int32_t)((i / W) * hd) + b[i];
        }
        const __m512i base = _mm512_loadu_si512(a), dd = _mm512_loadu_si512(b);
        const __m512 vsc = _mm512_set1_ps(scale);
        for (int64_t ch = 0; ch < nch; ch++)
            for (int64_t c = 0; c < nc; c++) {
                const int32_t d0 = (int32_t)row_dim(W * c, dt);
                const __mmask16 in = _mm512_cmplt_epi32_mask(_mm512_add_epi32(dd, _mm512_set1_epi32(d0)), _mm512_set1_epi32((int)hd));
                const __m512 g = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), in, _mm512_add_epi32(base, _mm512_set1_epi32(d0)),
                                                          q + ch * H * hd, 4);
                _mm512_store_ps(qp + (ch * nc + c) * 16, _mm512_mul_ps(vsc, g));
            }
    }
    memset(op, 0, (size_t)(n_g * n_rep * hdp) * sizeof(float));
    for (int64_t ch = 0; ch < nch; ch++) {
        _mm512_store_ps(mls + ch * 32, _mm512_set1_ps(-INFINITY));
        _mm512_store_ps(mls + ch * 32 + 16, _mm512_setzero_ps());
    }
    /* lane i of the R layout: the key offset within its group of W keys */
    __m512i koff;
    {
        int32_t a[16];
        for (int i = 0; i < 16; i++) a[i] = (i % 4) / Q;
        koff = _mm512_loadu_si512(a);
    }
    const char *kbase = k_base, *vbase = v_base;
    prefetch_rows(kbase, vbase, slots, n_ctx < XK_DEC_KEYS ? n_ctx : XK_DEC_KEYS, row_bytes, off_bytes, n_g * hbytes);
    for (int64_t j0 = 0; j0 < n_ctx; j0 += XK_DEC_KEYS) {
        const int64_t jb = n_ctx - j0 < XK_DEC_KEYS ? n_ctx - j0 : XK_DEC_KEYS, nsub = (jb + 15) / 16;
        block_rows_whole(kb, vb, kbase, vbase, slots + j0, jb, n_ctx - j0, row_bytes, off_bytes, n_g, dt, dt == XF_BF16, hdp, hd);
      for (int64_t g = 0; g < n_g; g++) { /* then the KV heads one after the other, from L2 */
        const float *kg = kb + g * XK_DEC_KEYS * hdp, *vg = vb + g * XK_DEC_KEYS * hdp; /* (XK_DEC_KEYS, hdp) */
        const int64_t nr = nsub * 16 / W; /* R vectors of this block */
        for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ch++) {
            const float *qc = qp + ch * nc * 16;
            __m512 vmax = _mm512_set1_ps(-INFINITY);
            for (int64_t sb = 0; sb < nsub; sb++) {
                const float *kk = kg + sb * 16 * hdp; /* (16, hdp) the sub-block's K rows */
                __m512 acc[16];
#pragma GCC unroll 16
                for (int k = 0; k < 16; k++) acc[k] = _mm512_setzero_ps();
                for (int64_t c = 0; c < nc; c++) {
                    const __m512 qv = _mm512_load_ps(qc + c * 16);
#pragma GCC unroll 16
                    for (int k = 0; k < 16; k++) acc[k] = _mm512_fmadd_ps(qv, bcast_w(kk + k * hdp + W * c, W), acc[k]);
                }
                __m512 r[8];
#pragma GCC unroll 8
                for (int t = 0; t < 8; t++)
                    r[t] = _mm512_add_ps(_mm512_shuffle_ps(acc[2 * t], acc[2 * t + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                         _mm512_shuffle_ps(acc[2 * t], acc[2 * t + 1], _MM_SHUFFLE(3, 1, 3, 1)));
                if (W == 4) {
#pragma GCC unroll 4
                    for (int t = 0; t < 4; t++)
                        r[t] = _mm512_add_ps(_mm512_shuffle_ps(r[2 * t], r[2 * t + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                             _mm512_shuffle_ps(r[2 * t], r[2 * t + 1], _MM_SHUFFLE(3, 1, 3, 1)));
                }
                for (int t = 0; t < 16 / W; t++) { /* W is a constant where this is inlined: unrolled */
                    const int64_t rr = sb * (16 / W) + t, left = jb - rr * W; /* keys of this group left */
                    __m512 s = r[t];
                    if (left < W) s = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY),
                                                         _mm512_cmplt_epi32_mask(koff, _mm512_set1_epi32((int)(left > 0 ? left : 0))), s);
                    _mm512_store_ps(rb + rr * 16, s);
                    vmax = _mm512_max_ps(vmax, s);
                }
            }
            float *mc = mls + ch * 32;
            const __m512 mold = _mm512_load_ps(mc), lold = _mm512_load_ps(mc + 16);
            const __m512 mnew = _mm512_max_ps(mold, rl_max(vmax, W));
            const __mmask16 first = _mm512_cmp_ps_mask(mold, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
            const __m512 cv = _mm512_maskz_mov_ps((__mmask16)~first, exp16_le0(_mm512_sub_ps(mold, mnew)));
            __m512 sum = _mm512_setzero_ps();
            for (int64_t rr = 0; rr < nr; rr++) {
                const __m512 s = _mm512_load_ps(rb + rr * 16);
                const __mmask16 live = _mm512_cmp_ps_mask(s, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
                const __m512 p = _mm512_maskz_mov_ps(live, exp16_le0(_mm512_sub_ps(s, mnew)));
                _mm512_store_ps(rb + rr * 16, p);
                sum = _mm512_add_ps(sum, p);
            }
            _mm512_store_ps(mc, mnew);
            _mm512_store_ps(mc + 16, _mm512_fmadd_ps(lold, cv, rl_add(sum, W)));
            { /* P.V in the rows' own layout, out (H, hdp) += P (H, jb) V (jb, hdp), on register tiles of 4
               * heads x 4 vectors: a key costs 4 loads of V and 4 broadcasts of P per 16 FMAs (the head
               * layout needed a broadcast of V per FMA); each output sums the keys in order */
                float cvs[16];
                _mm512_storeu_ps(cvs, cv);
                const int64_t nvv = (rl + 15) / 16;
                const __mmask16 tl = rl % 16 ? (__mmask16)((1u << (rl % 16)) - 1u) : (__mmask16)0xffff;
                float *oc = op + ch * H * hdp;
                for (int h0 = 0; h0 < H; h0 += 4) {
                    int lo[4]; /* head h0 + t's lane in an R vector (of its key's group of W keys: + (j % W) Q) */
                    for (int t = 0; t < 4; t++) lo[t] = 4 * ((h0 + t) / Q) + (h0 + t) % Q;
                    for (int64_t v0 = 0; v0 < nvv; v0 += 4) {
                        const int64_t nv = nvv - v0 < 4 ? nvv - v0 : 4;
                        __mmask16 m[4];
                        __m512 acc[4][4];
#pragma GCC unroll 4
                        for (int u = 0; u < 4; u++) m[u] = u >= nv ? (__mmask16)0 : v0 + u == nvv - 1 ? tl : (__mmask16)0xffff;
#pragma GCC unroll 4
                        for (int t = 0; t < 4; t++) {
                            const __m512 c = _mm512_set1_ps(cvs[lo[t]]);
#pragma GCC unroll 4
                            for (int u = 0; u < 4; u++)
                                acc[t][u] = _mm512_mul_ps(c, _mm512_maskz_loadu_ps(m[u], oc + (h0 + t) * hdp + (v0 + u) * 16));
                        }
                        for (int64_t j = 0; j < jb; j++) {
                            const float *vj = vg + j * hdp + v0 * 16, *pw8 = rb + (j / W) * 16 + (j % W) * Q;
                            __m512 vv[4];
#pragma GCC unroll 4
                            for (int u = 0; u < 4; u++) vv[u] = _mm512_maskz_loadu_ps(m[u], vj + u * 16);
#pragma GCC unroll 4
                            for (int t = 0; t < 4; t++) {
                                const __m512 pv = _mm512_set1_ps(pw8[lo[t]]);
#pragma GCC unroll 4
                                for (int u = 0; u < 4; u++) acc[t][u] = _mm512_fmadd_ps(pv, vv[u], acc[t][u]);
                            }
                        }
#pragma GCC unroll 4
                        for (int t = 0; t < 4; t++)
#pragma GCC unroll 4
                            for (int u = 0; u < 4; u++) _mm512_mask_storeu_ps(oc + (h0 + t) * hdp + (v0 + u) * 16, m[u], acc[t][u]);
                    }
                }
            }
        }
      }
    }
    for (int64_t ch = 0; ch < nch; ch++)
        for (int h = 0; h < H; h++) {
            const int64_t hh = ch * H + h;
            ml[2 * hh] = mls[ch * 32 + 4 * (h / Q) + h % Q];
            ml[2 * hh + 1] = mls[ch * 32 + 16 + 4 * (h / Q) + h % Q];
            if (dt != XF_BF16) { /* positions are dims */
                memcpy(o + hh * hd, op + hh * hdp, (size_t)hd * sizeof(float));
                continue;
            }
            for (int64_t p = 0; p < rl; p += 32) { /* a piece's even elements then odd ones, interleaved back */
                const __m512 ev = _mm512_load_ps(op + hh * hdp + p), od = _mm512_load_ps(op + hh * hdp + p + 16);
                const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
                const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
                const int64_t n0 = hd - p < 16 ? hd - p : 16, n1 = hd - p - 16 < 16 ? hd - p - 16 : 16;
                _mm512_mask_storeu_ps(o + hh * hd + p, (__mmask16)((1u << n0) - 1u), _mm512_permutex2var_ps(ev, lo, od));
                if (n1 > 0) _mm512_mask_storeu_ps(o + hh * hd + p + 16, (__mmask16)((1u << n1) - 1u), _mm512_permutex2var_ps(ev, hi, od));
            }
        }
}
ATTN_PART_VARIANT(attn_part_heads8, attn_part_heads, dt, 2)
ATTN_PART_VARIANT(attn_part_heads4, attn_part_heads, dt, 4)
#endif

/* attn_part_g's AVX-512 GQA variants (query heads per KV head in groups of 8 or 4), one statement
 * for the kernel and its replay */
static int attn_heads8(int64_t n_rep, int64_t head_dim) { return n_rep % 8 == 0 && head_dim % 2 == 0; }
static int attn_heads4(int64_t n_rep, int64_t head_dim) { return n_rep % 4 == 0 && head_dim % 4 == 0; }
/* ... and the one that reads whole rows (one query head per KV head) */
static int attn_rows(int64_t n_rep) { return n_rep == 1; }

/* A part of n_g consecutive KV heads from head_off (q, o: (n_g * n_rep, head_dim), ml (n_g * n_rep, 2)).
 * The AVX-512 variants take the heads inside their block loop, so each block's rows are read whole
 * (every KV head's slice of them, one KV head after the other; the rows are (KV head, head_dim) in
 * the cache) before the next block's; the others run one KV head after the other over the part. scratch: xk_attn_decode_scratch(n_g * n_rep, head_dim) floats. */
static void attn_part_g(xk_isa isa, float *o, float *ml, const float *q, int64_t n_g, int64_t n_rep, int64_t head_dim,
                        const void *k_base, const void *v_base, xf_dtype dtype, int64_t row_elems, int64_t head_off,
                        const int64_t *slots, int64_t n_ctx, float scale, float *scratch) {
#if XK_X86
    if (isa == XK_ISA_AVX512 && attn_heads8(n_rep, head_dim)) {
        attn_part_heads8(o, ml, q, n_g, n_rep, head_dim, k_base, v_base, dtype, row_elems, head_off, slots, n_ctx, scale, scratch);
        return;
    }
    if (isa == XK_ISA_AVX512 && attn_heads4(n_rep, head_dim)) {
        attn_part_heads4(o, ml, q, n_g, n_rep, head_dim, k_base, v_base, dtype, row_elems, head_off, slots, n_ctx, scale, scratch);
        return;
    }
    if (isa == XK_ISA_AVX512 && attn_rows(n_rep)) {
        (dtype == XF_FP32 ? attn_part_rows : dtype == XF_FP16 ? attn_part_rows_f16 : attn_part_rows_b16)(
            o, ml, q, n_g, n_rep, head_dim, k_base, v_base, dtype, row_elems, head_off, slots, n_ctx, scale, scratch);
        return;
    }
    if (isa == XK_ISA_AVX512) {
        attn_part_avx512(o, ml, q, n_g, n_rep, head_dim, k_base, v_base, dtype, row_elems, head_off, slots, n_ctx, scale, scratch);
        return;
    }
#endif
    for (int64_t g = 0; g < n_g; g++) {
        const int64_t off = g * n_rep * head_dim;
#if XK_X86
        if (isa == XK_ISA_AVX2) {
            attn_part_avx2(o + off, ml + 2 * g * n_rep, q + off, n_rep, head_dim, k_base, v_base, dtype, row_elems,
                           head_off + g * head_dim, slots, n_ctx, scale, scratch);
            continue;
        }
#endif
        attn_part_scalar(o + off, ml + 2 * g * n_rep, q + off, n_rep, head_dim, k_base, v_base, dtype, row_elems,
                         head_off + g * head_dim, slots, n_ctx, scale, scratch);
    }
}

void xk_attention_part(xk_isa isa, float *o, float *ml, const float *q, int64_t n_rep, int64_t head_dim,
                       const void *k_base, const void *v_base, xf_dtype dtype, int64_t row_elems, int64_t head_off,
                       const int64_t *slots, int64_t n_ctx, float scale, float *scratch) {
    attn_part_g(isa, o, ml, q, 1, n_rep, head_dim, k_base, v_base, dtype, row_elems, head_off, slots, n_ctx, scale, scratch);
}

void xk_attention_decode(xk_isa isa, float *out, const float *q, int64_t n_rep, int64_t head_dim, const void *k_base,
                         const void *v_base, xf_dtype dtype, int64_t row_elems, int64_t head_off, const int64_t *slots,
                         int64_t n_ctx, float scale, float *scratch, float *ml) {
    xk_attention_part(isa, out, ml, q, n_rep, head_dim, k_base, v_base, dtype, row_elems, head_off, slots, n_ctx, scale,
                      scratch);
    attn_normalize(out, out, ml, n_rep, head_dim);
}

void xk_attention_merge(float *out, const float *o, const float *ml, int64_t n_parts, int64_t n_rep, int64_t head_dim) {
    for (int64_t h = 0; h < n_rep; h++) {
        float m = -INFINITY;
        for (int64_t p = 0; p < n_parts; p++) m = ml[(p * n_rep + h) * 2] > m ? ml[(p * n_rep + h) * 2] : m;
        float l = 0.0f;
        float *dst = out + h * head_dim;
        for (int64_t i = 0; i < head_dim; i++) dst[i] = 0.0f;
        for (int64_t p = 0; p < n_parts; p++) {
            const float mp = ml[(p * n_rep + h) * 2];
            if (mp == -INFINITY) continue; /* an empty part */
            const float w = exp_le0(mp - m);
            l += w * ml[(p * n_rep + h) * 2 + 1];
            const float *src = o + (p * n_rep + h) * head_dim;
#pragma omp simd
            for (int64_t i = 0; i < head_dim; i++) dst[i] += w * src[i];
        }
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        for (int64_t i = 0; i < head_dim; i++) dst[i] *= inv;
    }
}

int64_t xk_attn_thread_floats(int64_t n_heads, int64_t head_dim) {
    return round16(xk_attn_decode_scratch(n_heads, head_dim)) + round16(2 * n_heads);
}

/* Split-K: the parts of a context of ctx keys, and the keys per part (a multiple of 16). */
static int64_t attn_parts(int64_t ctx) {
    const int64_t np = (ctx + XK_ATT_PART_MIN - 1) / XK_ATT_PART_MIN;
    return np > XK_ATT_MAX_PARTS ? XK_ATT_MAX_PARTS : np < 1 ? 1 : np;
}
static int64_t attn_part_len(int64_t ctx, int64_t np) { return ((ctx + np - 1) / np + 15) & ~(int64_t)15; }

/* The work items of a batch: ti[i] (n_q + 1) the items (context parts) before query i; returns whether
 * contexts are split. One rule for the kernel and its replay, so both cut the same parts. */
static int attn_items(const xk_attn_query *qs, int64_t n_q, int64_t n_kv, int64_t *ti) {
    const int split = n_q * n_kv < XK_ATT_SPLIT_ITEMS;
    ti[0] = 0;
    for (int64_t i = 0; i < n_q; i++) ti[i + 1] = ti[i] + (split ? attn_parts(qs[i].n_ctx) : 1);
    return split;
}

/* Item it's query (*qi), its parts (*np) and its keys [*j0, *j1) (j1 <= j0: an empty part). */
static void attn_item(const xk_attn_query *qs, int64_t n_q, const int64_t *ti, int split, int64_t it, int64_t *qi,
                      int64_t *np, int64_t *j0, int64_t *j1) {
    int64_t q = it; /* one item per query unless split */
    if (split) { /* the query with ti[q] <= it < ti[q + 1] */
        int64_t lo = 0, hi = n_q;
        while (hi - lo > 1) {
            const int64_t mid = (lo + hi) / 2;
            if (ti[mid] <= it) lo = mid;
            else hi = mid;
        }
        q = lo;
    }
    const int64_t n = ti[q + 1] - ti[q], plen = attn_part_len(qs[q].n_ctx, n), a = (it - ti[q]) * plen;
    *qi = q;
    *np = n;
    *j0 = n == 1 ? 0 : a;
    *j1 = n == 1 ? qs[q].n_ctx : a + plen < qs[q].n_ctx ? a + plen : qs[q].n_ctx;
}

void xk_attention_batch(xk_isa isa, int threads, const xk_attn_query *qs, int64_t n_q, int64_t n_kv, int64_t n_rep,
                        int64_t hd, xf_dtype dtype, int64_t row_elems, float scale, const xk_attn_work *w) {
    if (n_q < 1) return;
    const int64_t nh = n_kv * n_rep; /* a token's query heads: every item takes all of them */
    int64_t *ti = w->items;
    const int split = attn_items(qs, n_q, n_kv, ti);
    const int64_t n_items = ti[n_q];
    const int merge = n_items > n_q; /* some query has parts to merge (single parts are normalized in place) */
#pragma omp parallel num_threads(threads) if (n_items > 1)
    {
        float *scr = w->scratch + (int64_t)omp_get_thread_num() * w->scratch_n;
        float *ml = scr + round16(xk_attn_decode_scratch(nh, hd)); /* (nh, 2) */
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < n_items; it++) {
            int64_t qi, np, j0, j1;
            attn_item(qs, n_q, ti, split, it, &qi, &np, &j0, &j1);
            const xk_attn_query *a = &qs[qi];
            if (np == 1) { /* one part: normalized here, the bits the merge gives (its weight exp(0) is 1) */
                attn_part_g(isa, a->out, ml, a->q, n_kv, n_rep, hd, a->k_base, a->v_base, dtype, row_elems, 0, a->slots,
                            a->n_ctx, scale, scr);
                attn_normalize(a->out, a->out, ml, nh, hd);
                continue;
            }
            float *po = w->part_o + it * nh * hd, *pml = w->part_ml + it * nh * 2;
            if (j1 > j0)
                attn_part_g(isa, po, pml, a->q, n_kv, n_rep, hd, a->k_base, a->v_base, dtype, row_elems, 0, a->slots + j0,
                            j1 - j0, scale, scr);
            else
                for (int64_t h = 0; h < nh; h++) pml[2 * h] = -INFINITY, pml[2 * h + 1] = 0.0f; /* merged as empty */
        }
        if (merge) {
#pragma omp for schedule(static)
            for (int64_t qi = 0; qi < n_q; qi++)
                if (ti[qi + 1] - ti[qi] > 1)
                    xk_attention_merge(qs[qi].out, w->part_o + ti[qi] * nh * hd, w->part_ml + ti[qi] * nh * 2, ti[qi + 1] - ti[qi],
                                   nh, hd);
        }
    }
}

/* ---- the kernel's access order without its arithmetic (a probe for bench_cpu) ---- */

#if XK_X86
/* acc plus the sum of each byte of row[0 .. bytes) (vpsadbw per 64-byte line): a replay's loads. */
static inline TGT_AVX512 __attribute__((always_inline)) __m512i sum_bytes(__m512i acc, const char *row, int64_t bytes) {
    for (int64_t x = 0; x < bytes; x += 64) {
        const __mmask64 m = bytes - x >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (bytes - x)) - 1);
        acc = _mm512_add_epi64(acc, _mm512_sad_epu8(_mm512_maskz_loadu_epi8(m, row + x), _mm512_setzero_si512()));
    }
    return acc;
}
static inline TGT_AVX512 __attribute__((always_inline)) uint64_t sum_lanes(__m512i acc) {
    uint64_t t[8];
    _mm512_storeu_si512(t, acc);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

/* The bytes of one part in the order of the AVX-512 kernel that reads per KV head (attn_part_avx512:
 * GQA groups the head-lane variants do not take):
 * blocks of XK_DEC_KEYS keys, in each every KV head's slice of the block's rows, K rows then V rows
 * (fp32) or K and V row by row (16-bit rows converted into block buffers first); each line loaded
 * once and its bytes summed (vpsadbw). pf: the kernels' prefetches too (the first block's rows into
 * L1, then per 16 keys the same 16 keys of the next block ahead). */
static TGT_AVX512 uint64_t replay_part_avx512(const char *kbase, const char *vbase, const int64_t *slots, int64_t n_ctx,
                                              int64_t n_g, int64_t hbytes, int64_t row_bytes, int rowwise, int pf) {
    __m512i acc = _mm512_setzero_si512();
    if (pf) prefetch_rows(kbase, vbase, slots, n_ctx < XK_DEC_KEYS ? n_ctx : XK_DEC_KEYS, row_bytes, 0, n_g * hbytes);
    for (int64_t j0 = 0; j0 < n_ctx; j0 += XK_DEC_KEYS) {
        const int64_t jb = n_ctx - j0 < XK_DEC_KEYS ? n_ctx - j0 : XK_DEC_KEYS;
        for (int64_t g = 0; g < n_g; g++) {
            const int64_t goff = g * hbytes;
            for (int pass = 0; pass < (rowwise ? 1 : 2); pass++) /* K then V, or both row by row */
                for (int64_t jj = 0; jj < jb; jj++) {
                    const int64_t jn = j0 + XK_DEC_KEYS + jj;
                    if (pf && pass == 0 && jj % 16 == 0) /* as the kernel: with the first head's scores of 16 keys */
                        for (int64_t r = jn; r < jn + 16 && r < n_ctx; r++) prefetch_row(kbase, vbase, slots[r], row_bytes, goff, hbytes);
                    for (int s = 0; s < (rowwise ? 2 : 1); s++) {
                        const char *row = (s || pass ? vbase : kbase) + slots[j0 + jj] * row_bytes + goff;
                        acc = sum_bytes(acc, row, hbytes);
                    }
                }
        }
    }
    return sum_lanes(acc);
}

/* The head-lane GQA variants' order (attn_part_heads, block_rows_whole): the rows in order, K row r
 * then V row r, each whole (all n_g heads, `bytes` of it); pf: its prefetches too (the first block's
 * rows into L1, then row r + XK_DEC_ROWS_PF with row r). */
static TGT_AVX512 uint64_t replay_part_whole(const char *kbase, const char *vbase, const int64_t *slots, int64_t n_ctx,
                                             int64_t bytes, int64_t row_bytes, int pf) {
    __m512i acc = _mm512_setzero_si512();
    if (pf) prefetch_rows(kbase, vbase, slots, n_ctx < XK_DEC_KEYS ? n_ctx : XK_DEC_KEYS, row_bytes, 0, bytes);
    for (int64_t r = 0; r < n_ctx; r++) {
        if (pf && r + XK_DEC_ROWS_PF < n_ctx) prefetch_row(kbase, vbase, slots[r + XK_DEC_ROWS_PF], row_bytes, 0, bytes);
        for (int s = 0; s < 2; s++) {
            const char *row = (s ? vbase : kbase) + slots[r] * row_bytes;
            acc = sum_bytes(acc, row, bytes);
        }
    }
    return sum_lanes(acc);
}

/* The whole-row variant's order (attn_part_rows_t): stage b reads K row r of block b beside V row r
 * of block b - 1, each row whole (all n_g heads, `bytes` of it); pf: its prefetches too (the first
 * block's rows into L1, then with K row r of block b that of block b + 1 and V row r of block b, ahead). */
static TGT_AVX512 uint64_t replay_part_rows(const char *kbase, const char *vbase, const int64_t *slots, int64_t n_ctx,
                                            int64_t bytes, int64_t row_bytes, int pf) {
    __m512i acc = _mm512_setzero_si512();
    if (pf) prefetch_rows(kbase, vbase, slots, n_ctx < XK_DEC_KEYS ? n_ctx : XK_DEC_KEYS, row_bytes, 0, bytes);
    const int64_t nblk = (n_ctx + XK_DEC_KEYS - 1) / XK_DEC_KEYS;
    int64_t jbp = 0;
    for (int64_t b = 0; b <= nblk; b++) {
        const int64_t j0 = b * XK_DEC_KEYS, jb = b == nblk ? 0 : n_ctx - j0 < XK_DEC_KEYS ? n_ctx - j0 : XK_DEC_KEYS;
        for (int64_t r = 0; r < (jb > jbp ? jb : jbp); r++) { /* the kernel's zero rows read no KV */
            for (int s = 0; s < 2; s++) {
                if (s == 0 && r >= jb) continue;
                if (s == 1 && r >= jbp) continue;
                if (pf && s == 0 && j0 + r + XK_DEC_KEYS < n_ctx) prefetch_span(kbase + slots[j0 + r + XK_DEC_KEYS] * row_bytes, bytes);
                if (pf && s == 0 && b > 0) prefetch_span(vbase + slots[j0 + r] * row_bytes, bytes);
                const char *row = s ? vbase + slots[j0 - XK_DEC_KEYS + r] * row_bytes : kbase + slots[j0 + r] * row_bytes;
                acc = sum_bytes(acc, row, bytes);
            }
        }
        jbp = jb;
    }
    return sum_lanes(acc);
}
#endif

/* The other variants' order: one KV head after the other over the whole part, K and V row by row. */
static uint64_t replay_part_plain(const char *kbase, const char *vbase, const int64_t *slots, int64_t n_ctx, int64_t n_g,
                                  int64_t hbytes, int64_t row_bytes) {
    uint64_t acc = 0;
    for (int64_t g = 0; g < n_g; g++)
        for (int64_t j = 0; j < n_ctx; j++)
            for (int s = 0; s < 2; s++) {
                const unsigned char *row = (const unsigned char *)(s ? vbase : kbase) + slots[j] * row_bytes + g * hbytes;
                for (int64_t x = 0; x < hbytes; x++) acc += row[x];
            }
    return acc;
}

uint64_t xk_attention_replay(xk_isa isa, int threads, const xk_attn_query *qs, int64_t n_q, int64_t n_kv, int64_t n_rep,
                             int64_t hd, xf_dtype dtype, int64_t row_elems, int prefetch, int64_t *items) {
    if (n_q < 1) return 0;
    const int split = attn_items(qs, n_q, n_kv, items);
    const int64_t n_items = items[n_q], esz = dtype == XF_FP32 ? 4 : 2, hbytes = hd * esz, row_bytes = row_elems * esz;
    uint64_t total = 0;
#pragma omp parallel for num_threads(threads) if (n_items > 1) schedule(dynamic, 1) reduction(+ : total)
    for (int64_t it = 0; it < n_items; it++) {
        int64_t qi, np, j0, j1;
        attn_item(qs, n_q, items, split, it, &qi, &np, &j0, &j1);
        if (j1 <= j0) continue;
        const char *kb = qs[qi].k_base, *vb = qs[qi].v_base;
#if XK_X86
        if (isa == XK_ISA_AVX512 && attn_rows(n_rep)) {
            total += replay_part_rows(kb, vb, qs[qi].slots + j0, j1 - j0, n_kv * hbytes, row_bytes, prefetch);
            continue;
        }
        if (isa == XK_ISA_AVX512 && (attn_heads8(n_rep, hd) || attn_heads4(n_rep, hd))) {
            total += replay_part_whole(kb, vb, qs[qi].slots + j0, j1 - j0, n_kv * hbytes, row_bytes, prefetch);
            continue;
        }
        if (isa == XK_ISA_AVX512) {
            total += replay_part_avx512(kb, vb, qs[qi].slots + j0, j1 - j0, n_kv, hbytes, row_bytes, dtype != XF_FP32, prefetch);
            continue;
        }
#endif
        total += replay_part_plain(kb, vb, qs[qi].slots + j0, j1 - j0, n_kv, hbytes, row_bytes);
    }
    return total;
}

/* ---- prefill: blocked causal attention on gathered fp32 tiles ---- */

int64_t xk_attn_block_queries(int64_t n_rep) {
    int64_t qb = n_rep > 0 ? XK_ATT_ROWS / n_rep : 1;
    return qb < 1 ? 1 : qb;
}

int64_t xk_attn_block_scratch(int64_t n_rep, int64_t head_dim) {
    const int64_t rows = xk_attn_block_queries(n_rep) * n_rep; /* at most max(XK_ATT_ROWS, n_rep) */
    /* Q and O (rows, head_dim), scores (rows, XK_ATT_KEYS), running max, sum and correction (rows),
     * a transposed key block (head_dim, XK_ATT_KEYS) */
    return 2 * round16(rows * head_dim) + round16(rows * XK_ATT_KEYS) + 3 * round16(rows) +
           round16(head_dim * XK_ATT_KEYS);
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
 * exp(s - m_new); *m, *l take the new running max and sum (softmax_commit); returns exp(m_old - m_new),
 * the factor the row's output so far is scaled by (0 on the row's first tile, m_old = -inf). */
static inline __attribute__((always_inline)) float row_update(float *s, int64_t nv, int64_t nk, float *m, float *l) {
    /* the portable variant: plain loops (no omp simd: clang cannot vectorize exp_le0's selects
     * without AVX-512 masks and warns; the x86 variants below are hand-vectorized) */
    float bm = -INFINITY;
    for (int64_t j = 0; j < nv; j++) bm = s[j] > bm ? s[j] : bm;
    const float mnew = softmax_max(*m, bm);
    float bs = 0.0f;
    for (int64_t j = 0; j < nv; j++) {
        const float e = exp_le0(s[j] - mnew);
        s[j] = e;
        bs += e;
    }
    for (int64_t j = nv; j < nk; j++) s[j] = 0.0f;
    return softmax_commit(m, l, mnew, bs);
}

/* The softmax step of one score tile with row update ROW_UPDATE (the body of a softmax_tile_*):
 * queries [i_lo, n_q) (rows i * n_rep + h, query i at position pos0 + i), S (rows from i_lo * n_rep,
 * lds) the scores of keys kb .. kb + nk - 1. Keys after a query's own position are masked (only on
 * tiles that cross the diagonal; the others take the constant-width path the compiler unrolls).
 * corr[r]: row r's rescale factor. */
#define XK_SOFTMAX_TILE(ROW_UPDATE)                                                                        \
    for (int64_t i = i_lo; i < n_q; i++) {                                                                  \
        int64_t nv = pos0 + i - kb + 1; /* keys kb .. own position */                                       \
        if (nv > nk) nv = nk;                                                                               \
        for (int64_t r = i * n_rep; r < (i + 1) * n_rep; r++) {                                             \
            float *s = S + (r - i_lo * n_rep) * lds;                                                        \
            corr[r] = nv == XK_ATT_KEYS ? ROW_UPDATE(s, XK_ATT_KEYS, XK_ATT_KEYS, m + r, l + r)             \
                                        : ROW_UPDATE(s, nv, nk, m + r, l + r);                              \
        }                                                                                                   \
    }

static void softmax_tile_scalar(float *S, int64_t lds, int64_t i_lo, int64_t n_q, int64_t n_rep, int64_t pos0,
                                int64_t kb, int64_t nk, float *m, float *l, float *corr) {
    XK_SOFTMAX_TILE(row_update)
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
    const float mnew = softmax_max(*m, bm);
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
    return softmax_commit(m, l, mnew, bs);
}
static TGT_AVX2 void softmax_tile_avx2(float *S, int64_t lds, int64_t i_lo, int64_t n_q, int64_t n_rep, int64_t pos0,
                                       int64_t kb, int64_t nk, float *m, float *l, float *corr) {
    XK_SOFTMAX_TILE(row_update_avx2)
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
    const float mnew = softmax_max(*m, bm);
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
    return softmax_commit(m, l, mnew, bs);
}
/* The softmax step of a tile in AVX-512 (XK_SOFTMAX_TILE's contract): 16 consecutive rows that all
 * see the whole block take their maxima, sums and rescales as vectors (one reduction tree and one
 * exp for 16 rows, instead of two horizontal reductions and a scalar exp per row); the rest (the
 * diagonal's rows, a short last block) row by row. */
static TGT_AVX512 void softmax_tile_avx512(float *S, int64_t lds, int64_t i_lo, int64_t n_q, int64_t n_rep, int64_t pos0,
                                           int64_t kb, int64_t nk, float *m, float *l, float *corr) {
    const int64_t r_lo = i_lo * n_rep, rows = n_q * n_rep;
    int64_t r = r_lo;
    if (nk == XK_ATT_KEYS)
        for (; r + 16 <= rows && pos0 + r / n_rep - kb + 1 >= XK_ATT_KEYS; r += 16) {
            float *s = S + (r - r_lo) * lds;
            __m512 v[16];
            float mn[16];
            for (int t = 0; t < 16; t++) {
                const float *st = s + t * lds;
                v[t] = _mm512_max_ps(_mm512_max_ps(_mm512_loadu_ps(st), _mm512_loadu_ps(st + 16)),
                                     _mm512_max_ps(_mm512_loadu_ps(st + 32), _mm512_loadu_ps(st + 48)));
            }
            const __m512 mold = _mm512_loadu_ps(m + r), mnew = _mm512_max_ps(mold, hred16x16(v, 1));
            _mm512_storeu_ps(mn, mnew);
            for (int t = 0; t < 16; t++) {
                float *st = s + t * lds;
                const __m512 mt = _mm512_set1_ps(mn[t]);
                __m512 e[4];
                for (int c = 0; c < 4; c++) {
                    e[c] = exp16_le0(_mm512_sub_ps(_mm512_loadu_ps(st + 16 * c), mt));
                    _mm512_storeu_ps(st + 16 * c, e[c]);
                }
                v[t] = _mm512_add_ps(_mm512_add_ps(e[0], e[1]), _mm512_add_ps(e[2], e[3]));
            }
            /* softmax_commit on 16 rows: the rescale is 0 on a row's first block (m_old = -inf) */
            const __mmask16 first = _mm512_cmp_ps_mask(mold, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
            const __m512 c = _mm512_maskz_mov_ps((__mmask16)~first, exp16_le0(_mm512_sub_ps(mold, mnew)));
            _mm512_storeu_ps(l + r, _mm512_fmadd_ps(_mm512_loadu_ps(l + r), c, hred16x16(v, 0)));
            _mm512_storeu_ps(m + r, mnew);
            _mm512_storeu_ps(corr + r, c);
        }
    for (; r < rows; r++) {
        int64_t nv = pos0 + r / n_rep - kb + 1; /* keys kb .. own position */
        if (nv > nk) nv = nk;
        float *s = S + (r - r_lo) * lds;
        corr[r] = nv == XK_ATT_KEYS ? row_update_avx512(s, XK_ATT_KEYS, XK_ATT_KEYS, m + r, l + r)
                                    : row_update_avx512(s, nv, nk, m + r, l + r);
    }
}

/* The AVX-512 prefill GEMMs (head_dim a multiple of 16), in place of OpenBLAS's sgemm on shapes
 * too small for it (256 x 64 x head_dim): a key block transposed once into KT (head_dim, 64), then
 * register tiles of up to 6 rows x 64 keys (QK^T: 24 accumulators, one broadcast of q per row and
 * element, 4 loads of KT) and of up to 6 rows x 64 output elements (P.V: the running rescale
 * folded into the load of O, one broadcast of a weight per row and key). Each score sums over
 * head_dim in order, each output over the block's keys in order: the order is fixed by the shapes. */
#define XK_PF_ROWS 6 /* rows per register tile */

/* KT (hd, XK_ATT_KEYS) = the transpose of keys kt[0 .. nk), zero past nk (those scores are masked),
 * in 16 x 16 pieces in registers: 4 x 4 transposes inside each 128-bit lane (unpack ps, pd), then
 * the 4 x 4 transpose of the lanes (shuffle_f32x4). A scalar transpose cost ~10% of a block. */
static TGT_AVX512 void kt_transpose(float *KT, const float *kt, int64_t nk, int64_t hd) {
    for (int64_t j0 = 0; j0 < XK_ATT_KEYS; j0 += 16)
        for (int64_t e0 = 0; e0 < hd; e0 += 16) {
            __m512 r[16], t[16];
            for (int i = 0; i < 16; i++)
                r[i] = j0 + i < nk ? _mm512_loadu_ps(kt + (j0 + i) * hd + e0) : _mm512_setzero_ps();
            for (int i = 0; i < 16; i += 2) {
                t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int i = 0; i < 16; i += 4) { /* r[i + k], lane L: column 4 L + k of rows i .. i + 3 */
                const __m512d t0 = _mm512_castps_pd(t[i]), t1 = _mm512_castps_pd(t[i + 1]),
                              t2 = _mm512_castps_pd(t[i + 2]), t3 = _mm512_castps_pd(t[i + 3]);
                r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
                r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
                r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
                r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
            }
            for (int k = 0; k < 4; k++) {
                const __m512 b0 = _mm512_shuffle_f32x4(r[k], r[4 + k], _MM_SHUFFLE(1, 0, 1, 0));
                const __m512 b1 = _mm512_shuffle_f32x4(r[k], r[4 + k], _MM_SHUFFLE(3, 2, 3, 2));
                const __m512 b2 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], _MM_SHUFFLE(1, 0, 1, 0));
                const __m512 b3 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], _MM_SHUFFLE(3, 2, 3, 2));
                float *d = KT + (e0 + k) * XK_ATT_KEYS + j0; /* column 4 L + k goes to row e0 + 4 L + k */
                _mm512_store_ps(d, _mm512_shuffle_f32x4(b0, b2, _MM_SHUFFLE(2, 0, 2, 0)));
                _mm512_store_ps(d + 4 * XK_ATT_KEYS, _mm512_shuffle_f32x4(b0, b2, _MM_SHUFFLE(3, 1, 3, 1)));
                _mm512_store_ps(d + 8 * XK_ATT_KEYS, _mm512_shuffle_f32x4(b1, b3, _MM_SHUFFLE(2, 0, 2, 0)));
                _mm512_store_ps(d + 12 * XK_ATT_KEYS, _mm512_shuffle_f32x4(b1, b3, _MM_SHUFFLE(3, 1, 3, 1)));
            }
        }
}

/* The register tiles name their 24 accumulators a<row><vector> (arrays of vectors indexed in
 * loops stay on the stack at -O2); a row or vector past R / NV (constants after inlining) folds
 * away. */
#define XK_PF_ACC(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define XK_PF_DECL(r) __m512 a##r##0 = _mm512_setzero_ps(), a##r##1 = a##r##0, a##r##2 = a##r##0, a##r##3 = a##r##0;

/* One register tile of both GEMMs: C (R, 16 NV) = C0 + A (R, K) . B (K, 16 NV), rows of A, B and C
 * lda, ldb and ldc floats apart; C0 = corr[r] * C (corr non-NULL) or 0. One broadcast of A per row
 * and k, NV loads of B per k; the sum over k runs in order. */
static inline TGT_AVX512 __attribute__((always_inline)) void gemm_tile(float *C, int64_t ldc, const float *A, int64_t lda,
                                                                      const float *B, int64_t ldb, int64_t K,
                                                                      const float *corr, const int R, const int NV) {
    XK_PF_ACC(XK_PF_DECL)
#define XK_GT_LOAD1(r, c) \
    if (NV > c) a##r##c = _mm512_mul_ps(cr, _mm512_loadu_ps(C + r * ldc + 16 * c));
#define XK_GT_LOAD(r)                                                           \
    if (R > r && corr) {                                                        \
        const __m512 cr = _mm512_set1_ps(corr[r]);                              \
        XK_GT_LOAD1(r, 0) XK_GT_LOAD1(r, 1) XK_GT_LOAD1(r, 2) XK_GT_LOAD1(r, 3) \
    }
    XK_PF_ACC(XK_GT_LOAD)
    const float *b = B;
    for (int64_t k = 0; k < K; k++, b += ldb) {
        const __m512 b0 = _mm512_loadu_ps(b), b1 = NV > 1 ? _mm512_loadu_ps(b + 16) : b0,
                     b2 = NV > 2 ? _mm512_loadu_ps(b + 32) : b0, b3 = NV > 3 ? _mm512_loadu_ps(b + 48) : b0;
#define XK_GT_FMA1(r, c) \
    if (NV > c) a##r##c = _mm512_fmadd_ps(av, b##c, a##r##c);
#define XK_GT_ROW(r)                                                            \
    if (R > r) {                                                                \
        const __m512 av = _mm512_set1_ps(A[r * lda + k]);                       \
        XK_GT_FMA1(r, 0) XK_GT_FMA1(r, 1) XK_GT_FMA1(r, 2) XK_GT_FMA1(r, 3)     \
    }
        XK_PF_ACC(XK_GT_ROW)
    }
#define XK_GT_STORE1(r, c) \
    if (NV > c) _mm512_storeu_ps(C + r * ldc + 16 * c, a##r##c);
#define XK_GT_STORE(r) \
    if (R > r) { XK_GT_STORE1(r, 0) XK_GT_STORE1(r, 1) XK_GT_STORE1(r, 2) XK_GT_STORE1(r, 3) }
    XK_PF_ACC(XK_GT_STORE)
#undef XK_GT_LOAD1
#undef XK_GT_LOAD
#undef XK_GT_FMA1
#undef XK_GT_ROW
#undef XK_GT_STORE1
#undef XK_GT_STORE
}

/* S (R, XK_ATT_KEYS) = Q (R, hd) . KT, the first NK vectors of keys. */
static inline TGT_AVX512 __attribute__((always_inline)) void qk_tile(float *S, const float *Q, const float *KT,
                                                                    int64_t hd, const int R, const int NK) {
    gemm_tile(S, XK_ATT_KEYS, Q, hd, KT, XK_ATT_KEYS, hd, NULL, R, NK);
}

/* O (R, hd) columns [c0, c0 + 16 NV) = corr * O + P (R, nk) . V (nk, hd); first: O starts at 0
 * (its first key block: O holds nothing yet). */
static inline TGT_AVX512 __attribute__((always_inline)) void pv_tile(float *O, const float *P, const float *V,
                                                                    const float *corr, int64_t hd, int64_t c0,
                                                                    int64_t nk, int first, const int R, const int NV) {
    gemm_tile(O + c0, hd, P, XK_ATT_KEYS, V + c0, hd, nk, first ? NULL : corr, R, NV);
}
#undef XK_PF_DECL
#undef XK_PF_ACC

/* The tile of R rows (1 .. XK_PF_ROWS) for a runtime R: one instantiation per count. */
#define XK_PF_SWITCH(R, CALL) \
    switch (R) {              \
    case 1: CALL(1); break;   \
    case 2: CALL(2); break;   \
    case 3: CALL(3); break;   \
    case 4: CALL(4); break;   \
    case 5: CALL(5); break;   \
    default: CALL(6); break;  \
    }

/* Keys a tile of rows [r, r + n) of a block needs: up to its last row's own position (query
 * (r0 + r + n - 1) / n_rep at key d0 + that, d0 = pos0 - kb), at most nk. The weights past a row's
 * position are 0, so the tiles skip the keys no row of theirs sees (the causal triangle of a
 * diagonal block) without changing any sum. */
static inline int64_t tile_keys(int64_t r0, int64_t r, int64_t n, int64_t n_rep, int64_t d0, int64_t nk) {
    const int64_t nv = d0 + (r0 + r + n - 1) / n_rep + 1;
    return nv < nk ? nv : nk;
}

static inline TGT_AVX512 __attribute__((always_inline)) void qk_rows(float *S, const float *Q, const float *KT,
                                                                    int64_t hd, int64_t n, const int NK) {
#define XK_QK(R) qk_tile(S, Q, KT, hd, R, NK)
    XK_PF_SWITCH(n, XK_QK)
#undef XK_QK
}

/* S (mr, XK_ATT_KEYS) = Q (mr, hd) . KT for rows r0 .. r0 + mr of the block (see tile_keys);
 * columns past a tile's keys are left unset (the softmax reads none of them). */
static TGT_AVX512 void qk_block(float *S, const float *Q, const float *KT, int64_t mr, int64_t hd, int64_t r0,
                                int64_t n_rep, int64_t d0, int64_t nk) {
    for (int64_t r = 0; r < mr; r += XK_PF_ROWS) {
        const int64_t n = mr - r < XK_PF_ROWS ? mr - r : XK_PF_ROWS;
        float *s = S + r * XK_ATT_KEYS;
        const float *q = Q + r * hd;
        switch ((tile_keys(r0, r, n, n_rep, d0, nk) + 15) / 16) {
        case 1: qk_rows(s, q, KT, hd, n, 1); break;
        case 2: qk_rows(s, q, KT, hd, n, 2); break;
        case 3: qk_rows(s, q, KT, hd, n, 3); break;
        default: qk_rows(s, q, KT, hd, n, 4); break;
        }
    }
}

static inline TGT_AVX512 __attribute__((always_inline)) void pv_cols(float *O, const float *P, const float *V,
                                                                    const float *corr, int64_t mr, int64_t hd,
                                                                    int64_t c0, int64_t r0, int64_t n_rep, int64_t d0,
                                                                    int64_t nk, int first, const int NV) {
    for (int64_t r = 0; r < mr; r += XK_PF_ROWS) {
        const int64_t n = mr - r < XK_PF_ROWS ? mr - r : XK_PF_ROWS, nt = tile_keys(r0, r, n, n_rep, d0, nk);
#define XK_PV(R) pv_tile(O + r * hd, P + r * XK_ATT_KEYS, V, corr + r, hd, c0, nt, first, R, NV)
        XK_PF_SWITCH(n, XK_PV)
#undef XK_PV
    }
}

/* O (mr, hd) = corr * O + P (mr, nk) . V (nk, hd), 64 columns at a time, each tile over the keys
 * its rows see (tile_keys). */
static TGT_AVX512 void pv_block(float *O, const float *P, const float *V, const float *corr, int64_t mr, int64_t hd,
                                int64_t r0, int64_t n_rep, int64_t d0, int64_t nk, int first) {
    for (int64_t c0 = 0; c0 < hd; c0 += 64) {
        switch ((hd - c0) / 16) {
        case 1: pv_cols(O, P, V, corr, mr, hd, c0, r0, n_rep, d0, nk, first, 1); break;
        case 2: pv_cols(O, P, V, corr, mr, hd, c0, r0, n_rep, d0, nk, first, 2); break;
        case 3: pv_cols(O, P, V, corr, mr, hd, c0, r0, n_rep, d0, nk, first, 3); break;
        default: pv_cols(O, P, V, corr, mr, hd, c0, r0, n_rep, d0, nk, first, 4); break;
        }
    }
}
#undef XK_PF_SWITCH
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
    float *KT = corr + round16(max_rows);             /* (hd, XK_ATT_KEYS) the key block transposed */
    int own = 0; /* the AVX-512 GEMM tiles instead of sgemm */
    void (*tile)(float *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float *, float *, float *) =
        softmax_tile_scalar;
#if XK_X86
    if (isa == XK_ISA_AVX512) tile = softmax_tile_avx512;
    else if (isa == XK_ISA_AVX2) tile = softmax_tile_avx2;
    own = isa == XK_ISA_AVX512 && hd % 16 == 0;
#else
    (void)isa;
    (void)KT;
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
#if XK_X86
        if (own) {
            kt_transpose(KT, kt + kb * hd, nk, hd);
            qk_block(S, Q + r_lo * hd, KT, mr, hd, r_lo, n_rep, pos0 - kb, nk);
            tile(S, XK_ATT_KEYS, i_lo, n_q, n_rep, pos0, kb, nk, m, l, corr);
            pv_block(O + r_lo * hd, S, vt + kb * hd, corr + r_lo, mr, hd, r_lo, n_rep, pos0 - kb, nk, kb == 0);
            continue;
        }
#endif
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
