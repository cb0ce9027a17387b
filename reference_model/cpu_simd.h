/* What the CPU kernels share for hand vectorization: x86 detection, the target attributes of the
 * AVX2 and AVX-512 variants (chosen at run time, so the library itself stays baseline x86-64), and
 * one exp for non-positive arguments in scalar, AVX2 and AVX-512 form (softmax weights in
 * cpu_attention.c, the sigmoid of SwiGLU in cpu_kernels.c). Static inline: include it from .c
 * files only. */
#ifndef XF_CPU_SIMD_H
#define XF_CPU_SIMD_H

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define XK_X86 1
#define TGT_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TGT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,fma")))
#else
#define XK_X86 0
#endif

/* exp(x) for the x <= 0 of a softmax (x - running max): Cody-Waite reduction x = n ln2 + r,
 * |r| <= ln2 / 2, then a degree-7 Taylor polynomial (truncation r^8 / 8! < 6e-9 relative) scaled by
 * 2^n built in the exponent bits: within about 2 ulp of expf (glibc's vector expf needs
 * -ffast-math). Attention's portable variant, vector tails and row rescale factors and SwiGLU's vector tails use
 * it; exp8_le0 / exp16_le0 are the same steps in AVX2 / AVX-512 intrinsics. x is clamped to [-87, 0]:
 * below -87 the result is exp(-87) = 1.6e-38 instead of expf's smaller value, a weight no float
 * sum of weights >= 1 can see; NaN stays NaN. */
static inline __attribute__((always_inline)) float exp_le0(float x) {
    float xc = x < -87.0f ? -87.0f : x;
    xc = xc > 0.0f ? 0.0f : xc;
    const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(x / ln2) by 1.5 * 2^23 */
    float r = xc - n * 0.693145751953125f;  /* ln2 high part: exact product for |n| < 2^9 */
    r = r - n * 1.42860682030941723e-6f;    /* ln2 low part */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23; /* n in [-126, 0]: a normal 2^n */
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return p * two_n;
}

#if XK_X86
/* exp_le0 on 8 lanes: the same steps in AVX2 intrinsics. max_ps / min_ps return their second
 * operand when one is NaN, so NaN passes through the clamps. */
static inline TGT_AVX2 __m256 exp8_le0(__m256 x) {
    __m256 xc = _mm256_max_ps(_mm256_set1_ps(-87.0f), x);
    xc = _mm256_min_ps(_mm256_setzero_ps(), xc);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723e-6f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
/* exp_le0 on 16 lanes (the same steps as exp8_le0). */
static inline TGT_AVX512 __m512 exp16_le0(__m512 x) {
    __m512 xc = _mm512_max_ps(_mm512_set1_ps(-87.0f), x);
    xc = _mm512_min_ps(_mm512_setzero_ps(), xc);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}
#endif

#endif
