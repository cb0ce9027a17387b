/* AMX tile kernels: see cpu_amx.h. */
#include "reference_model/cpu_amx.h"

#include <math.h>
#include <string.h>

#include "reference_model/cpu_simd.h"

#if XK_X86
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

static int amx_off;           /* amx_avoid */
static int64_t bf16_calls;    /* amx_bf16_calls */

int64_t amx_bf16_calls(void) { return __atomic_load_n(&bf16_calls, __ATOMIC_RELAXED); }

static int bf16_off; /* amx_avoid_bf16 */

void amx_avoid(int avoid) { __atomic_store_n(&amx_off, avoid != 0, __ATOMIC_RELAXED); }
void amx_avoid_bf16(int avoid) { __atomic_store_n(&bf16_off, avoid != 0, __ATOMIC_RELAXED); }

#if XK_X86
/* Bit 0: AMX-INT8 usable, bit 1: AMX-BF16 usable; asked once (CPUID leaf 7 EDX: AMX-BF16 bit 22,
 * AMX-TILE 24, AMX-INT8 25; then the OS's permission for the tile data, XTILEDATA = 18). */
static int amx_bits(void) {
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        unsigned a, b, c, d;
        v = 0;
        __builtin_cpu_init();
        const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
        if (avx512 && __get_cpuid_max(0, NULL) >= 7) {
            __cpuid_count(7, 0, a, b, c, d);
            (void)a, (void)b, (void)c;
            const int tile = (d >> 24) & 1u, i8 = ((d >> 25) & 1u) && __builtin_cpu_supports("avx512vnni"), bf = (d >> 22) & 1u;
            if (tile && (i8 || bf) && syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18) == 0) v = i8 | bf << 1;
        }
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}
int amx_int8_granted(void) { return !__atomic_load_n(&amx_off, __ATOMIC_RELAXED) && (amx_bits() & 1); }
int amx_bf16_granted(void) {
    return !__atomic_load_n(&amx_off, __ATOMIC_RELAXED) && !__atomic_load_n(&bf16_off, __ATOMIC_RELAXED) && (amx_bits() & 2);
}

typedef struct amx_tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_tilecfg;

#define TGT_AMX8 __attribute__((target("avx512f,avx512bw,avx512vl,fma,avx512vnni,amx-tile,amx-int8")))
#define TGT_AMXBF __attribute__((target("avx512f,avx512bw,avx512vl,fma,amx-tile,amx-bf16")))

static void amx_load_config(const amx_tilecfg *c) {
    __asm__ __volatile__("ldtilecfg %0" : : "m"(*c) : "memory");
}
static void amx_release(void) { __asm__ __volatile__("tilerelease" : : : "memory"); }

/* ---- int8 (tdpbsud: s8 inputs x u8 packed weights) ----
 * For 4 consecutive columns, 16 rows x 4 bytes per 64 bytes, so Kc / 4 such lines are one B tile
 * (Kc columns of 16 weight rows). A tile: up to 16 tokens x Kc input bytes, row stride the token's
 * q row. Per group the int32 tile C (tokens x 16 rows) is stored and finished as the VNNI kernel
 * finishes its lanes (minus 128 * sum(q), times the weight scale times s, one fp32 FMA), so both
 * give the same bits. */
#define XK_AMX8_PF 2048 /* bytes ahead the weights are prefetched (measured: 2 KiB best of 0-16 KiB, one thread) */
static void a8_config(int m, int kc) {
    amx_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 4; i++) c.rows[i] = (uint8_t)m, c.colsb[i] = 64;           /* C: tokens x 16 int32, per block */
    c.rows[4] = (uint8_t)m, c.colsb[4] = (uint16_t)kc;                           /* A: tokens x Kc int8 */
    for (int i = 5; i < 8; i++) c.rows[i] = (uint8_t)(kc / 4), c.colsb[i] = 64;  /* B: Kc / 4 lines of 16 rows x 4 */
    amx_load_config(&c);
}

/* One group's products for up to A8_RB row blocks sharing the input tile: C tile i (0..3) for
 * block i, A 4, B 5, 6, 7 (block 3 takes 5 again). */
#define A8_RB 4
#define A8_TDP(I, T, BT)                                                                                \
    if (nbk > (I)) {                                                                                    \
        _tile_loadd(BT, wg + (I) * bstr + k * WMAT_PACK_ROWS, 64);                                      \
        _tile_dpbsud(T, 4, BT);                                                                         \
    }

/* One group's int32 sums of NBK blocks (ct (NBK, M, 16), stored from the C tiles) finished into
 * out (NBK, M, 16) as the VNNI kernel finishes its lanes: minus corr, to fp32, times the weight
 * scale times s, one FMA. With M and NBK constants (amx_matmul_a8 instantiates M = 1..16 for 4
 * blocks) the token loop is unrolled: 1.05-1.16x at 16 tokens, group 32-128, one thread, from
 * DRAM to L2 (busy machine); the same bits. */
static inline __attribute__((always_inline)) TGT_AMX8 void a8_finish(const float *sc, int64_t ng, const int32_t *ct, const int32_t *cr,
                                                                     const float *st, float *out, const int NBK, const int M) {
    for (int i = 0; i < NBK; i++) {
        const __m512 sv = _mm512_loadu_ps(sc + i * ng * WMAT_PACK_ROWS);
#pragma GCC unroll 16
        for (int j = 0; j < M; j++) {
            const __m512i d = _mm512_sub_epi32(_mm512_load_si512((const void *)(ct + i * 256 + j * 16)), _mm512_set1_epi32(cr[j * ng]));
            _mm512_store_ps(out + i * 256 + j * 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(sv, _mm512_set1_ps(st[j * ng])),
                                                                   _mm512_load_ps(out + i * 256 + j * 16)));
        }
    }
}
#define A8_FIN(M)                                                                                      \
    case M:                                                                                            \
        a8_finish(sc, ng, ct, cr + g, st + g, out, A8_RB, M);                                          \
        break;
#define A8_FIN_CASES                                                                                   \
    A8_FIN(1) A8_FIN(2) A8_FIN(3) A8_FIN(4) A8_FIN(5) A8_FIN(6) A8_FIN(7) A8_FIN(8) A8_FIN(9) A8_FIN(10) \
    A8_FIN(11) A8_FIN(12) A8_FIN(13) A8_FIN(14) A8_FIN(15) default: a8_finish(sc, ng, ct, cr + g, st + g, out, A8_RB, 16);

TGT_AMX8 void amx_matmul_a8(const wmat *W, const int8_t *q, const float *s, const int32_t *corr, int64_t n, float *y,
                            int64_t ldy, int64_t r0, int64_t r1) {
    const int64_t ng = W->n_groups, gp = W->gpad, qc = ng * gp, bstr = ng * gp * WMAT_PACK_ROWS; /* bytes a block */
    const int kc = (int)(gp % 64 == 0 ? 64 : gp % 32 == 0 ? 32 : gp % 16 == 0 ? 16 : gp % 8 == 0 ? 8 : 4);
    int32_t ct[A8_RB * 16 * 16] __attribute__((aligned(64)));
    float out[A8_RB * 16 * 16] __attribute__((aligned(64)));
    for (int64_t t = 0; t < n; t += 16) {
        const int m = (int)(n - t < 16 ? n - t : 16);
        a8_config(m, kc);
        const int8_t *qt = q + t * qc;
        const float *st = s + t * ng;
        const int32_t *cr = corr + t * ng;
        /* A8_RB blocks of 16 rows at a time: each input tile loaded once for all of them (prefill
         * streamed the whole input once per block before) */
        for (int64_t b0 = r0 / WMAT_PACK_ROWS; b0 * WMAT_PACK_ROWS < r1; b0 += A8_RB) {
            int nbk = 0;
            while (nbk < A8_RB && (b0 + nbk) * WMAT_PACK_ROWS < r1) nbk++;
            const uint8_t *wb = (const uint8_t *)W->data + b0 * bstr;
            for (int i = 0; i < nbk; i++)
                for (int j = 0; j < m; j++) _mm512_store_ps(out + i * 256 + j * 16, _mm512_setzero_ps());
            for (int64_t g = 0; g < ng; g++) {
                _tile_zero(0);
                if (nbk > 1) _tile_zero(1);
                if (nbk > 2) _tile_zero(2);
                if (nbk > 3) _tile_zero(3);
                const uint8_t *wg = wb + g * gp * WMAT_PACK_ROWS;
                for (int64_t k = 0; k < gp; k += kc) {
                    for (int i = 0; i < nbk; i++)
                        for (int l = 0; l < kc / 4; l++)
                            _mm_prefetch((const char *)(wg + i * bstr + k * WMAT_PACK_ROWS + XK_AMX8_PF + l * 64), _MM_HINT_T0);
                    _tile_loadd(4, qt + g * gp + k, qc);
                    A8_TDP(0, 0, 5)
                    A8_TDP(1, 1, 6)
                    A8_TDP(2, 2, 7)
                    A8_TDP(3, 3, 5)
                }
                _tile_stored(0, ct, 64);
                if (nbk > 1) _tile_stored(1, ct + 256, 64);
                if (nbk > 2) _tile_stored(2, ct + 512, 64);
                if (nbk > 3) _tile_stored(3, ct + 768, 64);
                const float *sc = W->scales + (b0 * ng + g) * WMAT_PACK_ROWS;
                if (nbk == A8_RB) {
                    switch (m) { /* the token count a constant: the finishing unrolled */
                        A8_FIN_CASES
                    }
                } else {
                    for (int i = 0; i < nbk; i++) a8_finish(sc + i * ng * WMAT_PACK_ROWS, ng, ct + i * 256, cr + g, st + g, out + i * 256, 1, m);
                }
            }
            for (int i = 0; i < nbk; i++) {
                const int64_t b = b0 + i;
                const int64_t lo = b * WMAT_PACK_ROWS > r0 ? b * WMAT_PACK_ROWS : r0;
                const int64_t hi = (b + 1) * WMAT_PACK_ROWS < r1 ? (b + 1) * WMAT_PACK_ROWS : r1;
                for (int j = 0; j < m; j++)
                    for (int64_t r = lo; r < hi; r++) y[(t + j) * ldy + r] = out[i * 256 + j * 16 + r - b * WMAT_PACK_ROWS];
            }
        }
    }
    amx_release();
}

/* ---- bf16 (tdpbf16ps: weights as A, tokens as B) ----
 * Tiles: C00 0, C01 1 (A0 x B0, B1), C10 2, C11 3 (A1 x B0, B1), A0 4, A1 5, B0 6, B1 7. A tile:
 * ra weight rows x 64 bytes (32 columns), stride the row; B: 16 lines (column pairs) x 16 tokens
 * x 2; C: ra rows x 16 fp32 (tokens; the padded ones are computed and not stored). */
static void bf_config(int ra0, int ra1) {
    amx_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) c.colsb[i] = 64, c.rows[i] = 16;
    c.rows[0] = c.rows[1] = c.rows[4] = (uint8_t)ra0;
    c.rows[2] = c.rows[3] = c.rows[5] = (uint8_t)(ra1 > 0 ? ra1 : 16);
    amx_load_config(&c);
}
#endif /* XK_X86 */

int amx_bf16_fits(const wmat *W) { return W->dtype == XF_BF16 && W->cols > 0 && W->cols % 32 == 0 && amx_bf16_granted(); }

int64_t amx_bf16_input_elems(int64_t n, int64_t cols, int parts) { return (int64_t)parts * ((n + 15) / 16) * 16 * cols; }

int64_t amx_bf16_scratch_floats(int64_t rows, int64_t n) { return ((rows + 31) / 32) * ((n + 31) / 32) * 1024 + 32 * AMX_BF16_KB / 2; }

#if XK_X86
/* weights_f32_to_bf16 on 16 lanes: the rounded values as fp32 (bf16 in the upper half, the lower zero). */
static inline TGT_AVX512 __m512i bf_round16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const __m512i q = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x400000)); /* NaN: quiet, not rounded */
    return _mm512_and_si512(q, _mm512_set1_epi32((int)0xffff0000u));
}
/* 16 x 16 32-bit transpose in registers: r[i][j] -> r[j][i]. */
static inline TGT_AVX512 void tr16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44), r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44), r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
        }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}
/* amx_bf16_pack_input with AVX-512: per 16 tokens and 32 columns, each token's parts as 16 column
 * pairs (one vector), then the 16 x 16 pairs transposed into the 16 lines of the B tile. */
static TGT_AVX512 void pack_avx512(const float *x, int64_t n, int64_t cols, int parts, int64_t b0, int64_t b1, uint16_t *xb) {
    const int64_t nb = (n + 15) / 16, half = cols / 2;
    /* the upper halves of 32 lanes (two vectors of 16) in order: 16 pairs (col 2i, 2i + 1) */
    const __m512i hi16 = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27, 25, 23, 21, 19, 17, 15,
                                          13, 11, 9, 7, 5, 3, 1);
    __m512 rows[3][16];
    for (int64_t b = b0; b < b1; b++)
        for (int64_t k = 0; k < cols; k += 32) {
            for (int64_t tt = 0; tt < 16; tt++) {
                const int64_t t = b * 16 + tt;
                __m512 v0 = t < n ? _mm512_loadu_ps(x + t * cols + k) : _mm512_setzero_ps();
                __m512 v1 = t < n ? _mm512_loadu_ps(x + t * cols + k + 16) : _mm512_setzero_ps();
                for (int p = 0; p < parts; p++) {
                    const __m512i h0 = bf_round16(v0), h1 = bf_round16(v1);
                    rows[p][tt] = _mm512_castsi512_ps(_mm512_permutex2var_epi16(h0, hi16, h1));
                    v0 = _mm512_sub_ps(v0, _mm512_castsi512_ps(h0)); /* exact, as in the scalar code */
                    v1 = _mm512_sub_ps(v1, _mm512_castsi512_ps(h1));
                }
            }
            for (int p = 0; p < parts; p++) {
                tr16(rows[p]);
                uint16_t *dst = xb + ((p * nb + b) * half + k / 2) * 32;
                for (int l = 0; l < 16; l++) _mm512_storeu_ps((float *)(dst + l * 32), rows[p][l]);
            }
        }
}
#endif

void amx_bf16_pack_input(const float *x, int64_t n, int64_t cols, int parts, int64_t b0, int64_t b1, uint16_t *xb) {
    const int64_t nb = (n + 15) / 16, half = cols / 2;
#if XK_X86
    if (cols % 32 == 0 && amx_bf16_granted()) { /* AMX implies AVX-512; amx_avoid: the scalar loop */
        pack_avx512(x, n, cols, parts, b0, b1, xb);
        return;
    }
#endif
    for (int64_t b = b0; b < b1; b++)
        for (int64_t tt = 0; tt < 16; tt++) {
            const int64_t t = b * 16 + tt;
            for (int64_t k = 0; k < cols; k++) {
                float v = t < n ? x[t * cols + k] : 0.0f;
                for (int p = 0; p < parts; p++) {
                    const uint16_t h = weights_f32_to_bf16(v);
                    xb[((p * nb + b) * half + k / 2) * 32 + tt * 2 + (k & 1)] = h;
                    v -= weights_bf16_to_f32(h); /* exact: v and its bf16 rounding share the exponent range */
                }
            }
        }
}

/* fp32 with denormals flushed to zero (AMX's inputs and results). */
static inline float ftz(float v) { return fabsf(v) < 0x1p-126f ? copysignf(0.0f, v) : v; }

void amx_matmul_bf16_ref(const wmat *W, const uint16_t *xb, int parts, int64_t n, float *y, int64_t ldy, int64_t r0,
                         int64_t r1) {
    const int64_t cols = W->cols, nb = (n + 15) / 16, half = cols / 2;
    const uint16_t *w = (const uint16_t *)W->data;
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = r0; r < r1; r++) {
            float acc = 0.0f;
            for (int64_t kk = 0; kk < cols; kk += 32)
                for (int p = 0; p < parts; p++) {
                    float s2[2] = {0.0f, 0.0f}; /* the chunk's even and odd columns */
                    for (int64_t k = kk; k < kk + 32; k++) {
                        const float a = ftz(weights_bf16_to_f32(w[r * cols + k]));
                        const float b = ftz(weights_bf16_to_f32(xb[((p * nb + t / 16) * half + k / 2) * 32 + (t % 16) * 2 + (k & 1)]));
                        s2[k & 1] = ftz(s2[k & 1] + a * b); /* a * b is exact in fp32 (8 x 8 significant bits) */
                    }
                    acc = ftz(acc + ftz(s2[0] + s2[1]));
                }
            y[t * ldy + r] = acc;
        }
}

#if XK_X86
/* One block: rows of ra0 + ra1 x tokens of 16 nb, columns [k0, k1); C from the scratch cs unless
 * first, always back to the scratch (bf_store_y takes it to y once every K block is done). The A
 * tiles: at a0 + a * aoff + (kk - k0) * amul with row stride ald bytes (the weights in place, or
 * the panel amx_matmul_bf16 copied). */
#define BF_TDP(P)                                                                                      \
    do {                                                                                               \
        _tile_loadd(6, xp + (int64_t)(P) * pstride + kk * 16, 64);                                     \
        if (NB == 2) _tile_loadd(7, xp + (int64_t)(P) * pstride + bstride + kk * 16, 64);              \
        _tile_dpbf16ps(0, 4, 6);                                                                       \
        if (NB == 2) _tile_dpbf16ps(1, 4, 7);                                                          \
        if (NA == 2) _tile_dpbf16ps(2, 5, 6);                                                          \
        if (NA == 2 && NB == 2) _tile_dpbf16ps(3, 5, 7);                                               \
    } while (0)


static inline __attribute__((always_inline)) TGT_AMXBF void bf_block(const int NA, const int NB, const uint16_t *a0, int64_t aoff,
                                                                     int64_t amul, int64_t ald, const uint16_t *xp,
                                                                     int64_t pstride, int64_t bstride, int parts, int64_t k0,
                                                                     int64_t k1, int first, float *cs) {
    if (first) {
        _tile_zero(0);
        if (NB == 2) _tile_zero(1);
        if (NA == 2) _tile_zero(2);
        if (NA == 2 && NB == 2) _tile_zero(3);
    } else {
        _tile_loadd(0, cs, 64);
        if (NB == 2) _tile_loadd(1, cs + 256, 64);
        if (NA == 2) _tile_loadd(2, cs + 512, 64);
        if (NA == 2 && NB == 2) _tile_loadd(3, cs + 768, 64);
    }
    for (int64_t kk = k0; kk < k1; kk += 32) {
        const uint16_t *at = a0 + (kk - k0) * amul;
        _tile_loadd(4, at, ald);
        if (NA == 2) _tile_loadd(5, at + aoff, ald);
        BF_TDP(0);
        if (parts == 3) {
            BF_TDP(1);
            BF_TDP(2);
        }
    }
    _tile_stored(0, cs, 64);
    if (NB == 2) _tile_stored(1, cs + 256, 64);
    if (NA == 2) _tile_stored(2, cs + 512, 64);
    if (NA == 2 && NB == 2) _tile_stored(3, cs + 768, 64);
}

/* The C tiles of rows [r0, r1) x n tokens from the scratch (amx_matmul_bf16's order: row block,
 * token pair, tile) into y, token by token: a token's rows of the call are written in order.
 * (Writing each block's 32 rows x 32 tokens into y as its last K block ended, 32 token rows of y
 * apart, measured 1.04-1.18x slower in prefill, one thread; decode is level.) */
static TGT_AMXBF void bf_store_y(const float *c, int64_t ntp, int64_t r0, int64_t r1, int64_t n, float *y, int64_t ldy) {
    const __m512i col = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(16));
    for (int64_t tp = 0; tp < ntp; tp++)
        for (int64_t rb = r0; rb < r1; rb += 32) {
            const float *cs = c + (((rb - r0) / 32) * ntp + tp) * 1024;
            for (int a = 0; a < 2 && rb + a * 16 < r1; a++) {
                const int64_t left = r1 - rb - a * 16;
                const __mmask16 mk = (__mmask16)((1u << (left < 16 ? left : 16)) - 1u);
                for (int b = 0; b < 2 && tp * 32 + b * 16 < n; b++) {
                    const float *o = cs + (a * 2 + b) * 256;
                    for (int64_t j = 0; j < 16 && tp * 32 + b * 16 + j < n; j++) /* token j's column of the tile: its rows of y */
                        _mm512_mask_storeu_ps(y + (tp * 32 + b * 16 + j) * ldy + rb + a * 16, mk,
                                              _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mk, col, o + j, 4));
                }
            }
        }
}

/* Rows [rb, rb + ra) x columns [k0, k1) of w (cols) into ap as tiles of 16 rows x 32 columns,
 * contiguous (ap (ceil(ra / 16), (k1 - k0) / 32, 16, 32)); rows past ra left as they are (the
 * tile configuration does not load them). */
static TGT_AMXBF void bf_copy_panel(const uint16_t *w, int64_t cols, int64_t rb, int ra, int64_t k0, int64_t k1, uint16_t *ap) {
    const int64_t nk = (k1 - k0) / 32;
    for (int i = 0; i < ra; i++) {
        const uint16_t *src = w + (rb + i) * cols + k0;
        uint16_t *dst = ap + (i / 16) * nk * 512 + (i % 16) * 32;
        for (int64_t j = 0; j < nk; j++) _mm512_store_si512((void *)(dst + j * 512), _mm512_loadu_si512((const void *)(src + j * 32)));
    }
}

TGT_AMXBF void amx_matmul_bf16(const wmat *W, const uint16_t *xb, int parts, int64_t n, float *y, int64_t ldy, int64_t r0,
                               int64_t r1, float *c) {
    if (n <= 0 || r1 <= r0) return;
    __atomic_fetch_add(&bf16_calls, 1, __ATOMIC_RELAXED);
    const int64_t cols = W->cols, nb = (n + 15) / 16, half = cols / 2;
    const int64_t pstride = nb * half * 32, bstride = half * 32; /* uint16 per part, per token block */
    /* one token pair: the weights streamed in place once; more: K blocks, each block's A panel
     * copied once and used by every token pair */
    const int panel = n > 32;
    const int64_t kb = panel ? (parts == 3 || n > AMX_BF16_KB_TOKENS ? AMX_BF16_KB3 : AMX_BF16_KB) : cols;
    const int64_t ntp = (nb + 1) / 2;
    const uint16_t *w = (const uint16_t *)W->data;
    uint16_t *ap = (uint16_t *)(c + ((r1 - r0 + 31) / 32) * ntp * 1024); /* (2, KB / 32, 16, 32) */
    int cfg0 = -1, cfg1 = -1;
    for (int64_t k0 = 0; k0 < cols; k0 += kb) {
        const int64_t k1 = k0 + kb < cols ? k0 + kb : cols;
        const int first = k0 == 0;
        for (int64_t rb = r0; rb < r1; rb += 32) {
            const int64_t left = r1 - rb;
            const int ra0 = (int)(left < 16 ? left : 16), ra1 = (int)(left <= 16 ? 0 : left < 32 ? left - 16 : 16);
            if (ra0 != cfg0 || ra1 != cfg1) bf_config(ra0, ra1), cfg0 = ra0, cfg1 = ra1;
            const uint16_t *a0 = w + rb * cols + k0;
            int64_t aoff = 16 * cols, amul = 1, ald = cols * 2;
            if (panel) {
                bf_copy_panel(w, cols, rb, ra0 + ra1, k0, k1, ap);
                a0 = ap, aoff = (k1 - k0) / 32 * 512, amul = 16, ald = 64;
            }
            /* (prefetching the next panel into L2 during this one's products measured 8-14% slower) */
            for (int64_t tp = 0; tp < ntp; tp++) {
                float *cs = c + (((rb - r0) / 32) * ntp + tp) * 1024;
                const uint16_t *xp = xb + tp * 2 * bstride;
                const int two = tp * 2 + 1 < nb;
#define BF_CALL(NA, NB)                                                                                                    \
    bf_block(NA, NB, a0, aoff, amul, ald, xp, pstride, bstride, parts, k0, k1, first, cs)
                if (ra1 > 0 && two) BF_CALL(2, 2);
                else if (ra1 > 0) BF_CALL(2, 1);
                else if (two) BF_CALL(1, 2);
                else BF_CALL(1, 1);
#undef BF_CALL
            }
        }
    }
    bf_store_y(c, ntp, r0, r1, n, y, ldy);
    amx_release();
}
#else
int amx_int8_granted(void) { return 0; }
int amx_bf16_granted(void) { return 0; }
void amx_matmul_a8(const wmat *W, const int8_t *q, const float *s, const int32_t *corr, int64_t n, float *y, int64_t ldy,
                   int64_t r0, int64_t r1) {
    (void)W, (void)q, (void)s, (void)corr, (void)n, (void)y, (void)ldy, (void)r0, (void)r1;
}
void amx_matmul_bf16(const wmat *W, const uint16_t *xb, int parts, int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1,
                     float *c) {
    (void)c;
    amx_matmul_bf16_ref(W, xb, parts, n, y, ldy, r0, r1);
}
#endif
