/* The CPU backend's kernels: plain C loops (vectorized by the compiler under `omp simd`), and
 * hand-vectorized matrix-vector kernels for fp32 / bf16 / int8 weights in AVX2 and AVX-512
 * variants chosen at run time, with a portable scalar fallback. Every kernel works on a range so
 * the backend can split the work between OpenMP threads; none allocates or spawns threads. */
#ifndef XF_CPU_KERNELS_H
#define XF_CPU_KERNELS_H

#include <stdint.h>

#include "core/dtype.h"
#include "reference_model/weights.h"

typedef enum xk_isa { XK_ISA_SCALAR = 0, XK_ISA_AVX2, XK_ISA_AVX512, XK_ISA_COUNT } xk_isa;

/* The best variant this CPU runs (AVX-512 needs avx512f+bw+vl+fma, AVX2 needs avx2+fma+f16c). */
xk_isa xk_isa_best(void);
const char *xk_isa_name(xk_isa isa); /* "scalar", "avx2", "avx512" */
/* 1 when `isa` can run here. */
int xk_isa_supported(xk_isa isa);

/* y[t][r] = sum_c W[r][c] * x[t][c] for tokens t in [0, n) and rows r in [r0, r1) (packed int8
 * weights, weights.h, take the scalar path here: their fast kernel is xk_matmul_a8).
 * x (n, W->cols) row-major; y (n, ldy) row-major, columns r0..r1 written. Weights fp32, bf16, fp16
 * or int8 (dequantized per group with W->scales). One token: 8 rows at a time (from 8 runs of a
 * range of 64+ rows); two: 4 rows x 2 tokens (from 4 runs); three or more (fp32 / bf16 / fp16): 4
 * rows x 4 tokens in groups of 16 rows with column chunks outermost (cpu_kernels.c). Each (row, token) sum runs in the same lane order whatever the
 * tiling, so a token's result does not depend on its batch, nor on how [r0, r1) is split. */
void xk_matmul(xk_isa isa, const wmat *W, const float *x, int64_t n, float *y, int64_t ldy, int64_t r0,
               int64_t r1);

/* Thread id's share of nt of `rows` rows in chunks of `step`: [*r0, *r1), contiguous, the chunks
 * dealt as evenly as they go (*r0 == *r1 for a thread with none). How the backend gives each
 * OpenMP thread its rows in one call at 1-2 tokens, which the kernels then read as runs. */
void xk_share_rows(int64_t rows, int64_t step, int64_t id, int64_t nt, int64_t *r0, int64_t *r1);

/* One token over 64 rows or more reads them as 8 runs side by side, two tokens as 4 runs
 * (cpu_kernels.c); 1: as blocks of adjacent rows instead (the same bits; for tests and side-by-side
 * benchmarks). */
void xk_mm1_avoid_runs(int avoid);

/* int8 weights take their input on a 16-bit grid: per group of `group` elements (the weights'
 * quantization group), s = max|x| / 32767 and q = round(x / s), so x is kept to 2^-16 of the group's
 * largest element (finer than the fp16 activations of GPU weight-only kernels) and the products are
 * exact in int32. Decode at one token multiplies q by the int8 weights directly (VNNI vpdpwssd or
 * pmaddwd: a third of the instructions of converting each weight to fp32, which made int8 decode
 * compute-bound); more tokens use x rounded to the same grid in fp32, so every int8 projection
 * computes the same values whatever the batch or phase. A non-finite group gives s = NaN (the
 * result is NaN, as in fp32). */
#define XK_ACT16_MAX 32767.0f

/* q (cols) and s (ceil(cols / group)) of x (cols). */
void xk_act16_quantize(const float *x, int64_t cols, int64_t group, int16_t *q, float *s);
/* Each of the n rows of x (n, cols) replaced by its grid value s * q, in place. */
void xk_act16_round(float *x, int64_t n, int64_t cols, int64_t group);
/* y[r] = sum_g W->scales[r][g] * s[g] * sum_{c in g} W[r][c] * q[c] for rows r in [r0, r1); W int8
 * with W->group the grid's group. */
void xk_matvec_i8a16(xk_isa isa, const wmat *W, const int16_t *q, const float *s, float *y, int64_t r0, int64_t r1);
/* (Row-major int8 only in vector form; a packed W takes the scalar path.) */
/* The variant xk_matvec_i8a16 runs for isa here: "avx512 vnni vpdpwssd", "avx512 pmaddwd", "avx2 pmaddwd" or "scalar". */
const char *xk_i8a16_name(xk_isa isa);
/* Tests: 1 makes the AVX-512 variant use pmaddwd even where VNNI exists (so both are checked). */
void xk_i8a16_avoid_vnni(int avoid);

/* int8 weights in the packed layout (weights.h, what loading makes) take int8 inputs: per token
 * and per group of W->group elements (the weights' quantization group), symmetric, s = max|x| / 127
 * (fp32) and q = round-half-even(x * 127 / max|x|) in [-127, 127]. The kernels run u8 x s8
 * `vpdpbusd` with the weights as the unsigned operand (int8 + 128, stored so at load) and the
 * int8 inputs as the signed one, and subtract the offset's share, 128 * sum(q) per group, computed
 * once per token: exact int32 dot products per group (int32 wraps modulo 2^32, and the true dot
 * product |sum w q| <= 127 * 127 * 65536 < 2^31 fits), then one fp32 FMA per group with the
 * weight scale times s. Prefill runs the same kernel where xk_a8_prefill says so (AVX-512 with VNNI
 * or AMX), else rounds its input to the same grid in fp32 (xk_act8_round), so every int8
 * projection computes the same values whatever the batch or phase. A non-finite group
 * gives s = NaN (the result is NaN, as in fp32). */
#define XK_ACT8_MAX 127.0f

/* Elements per token of xk_act8_quantize's q: n_groups * gpad (W int8 packed). */
int64_t xk_act8_cols(const wmat *W);
/* x (n, W->cols) to q (n, xk_act8_cols(W)) int8 (each group padded to W->gpad with zeros), s (n,
 * W->n_groups) and corr (n, W->n_groups) = 128 * sum of the group's q. */
void xk_act8_quantize(const wmat *W, const float *x, int64_t n, int8_t *q, float *s, int32_t *corr);
/* The same with the variant for isa (AVX-512, AVX2 or the scalar reference: the same bits);
 * xk_act8_quantize takes the best this CPU runs. */
void xk_act8_quantize_isa(xk_isa isa, const wmat *W, const float *x, int64_t n, int8_t *q, float *s, int32_t *corr);
/* Each of the n rows of x (n, cols) replaced by its grid value s * q, in place. */
void xk_act8_round(float *x, int64_t n, int64_t cols, int64_t group);
/* y[t][r] = sum_g W->scales[r][g] * s[t][g] * sum_{c in g} W[r][c] * q[t][c], tokens t in [0, n),
 * rows r in [r0, r1) (any range; blocks of 16 rows are computed whole and only [r0, r1) stored);
 * y (n, ldy). W int8 packed. Tokens go 4 at a time over each block, so each weight vector loaded
 * feeds up to 4 `vpdpbusd` and a batched decode step reads the weights once. */
void xk_matmul_a8(xk_isa isa, const wmat *W, const int8_t *q, const float *s, const int32_t *corr, int64_t n, float *y,
                  int64_t ldy, int64_t r0, int64_t r1);
/* The variant xk_matmul_a8 runs for isa here: "amx tdpbsud (4+ tokens), avx512 vnni vpdpbusd",
 * "avx512 vnni vpdpbusd", "avx2 pmaddubsw" or "scalar". With AVX-512 and 4 or more tokens it runs on
 * AMX tiles where the CPU has AMX-INT8 and the OS grants the tile state (asked once per process,
 * arch_prctl ARCH_REQ_XCOMP_PERM), the same bits as the VNNI kernel. */
const char *xk_a8_name(xk_isa isa);
/* 1 when the AMX path runs here (CPU and OS). */
int xk_a8_amx(void);
/* 1 when prefill's int8 projections run on xk_matmul_a8 too (the input quantized to int8, as in
 * decode) for isa: AVX-512 with AMX-INT8 granted or with VNNI. Otherwise prefill rounds its input
 * to the same grid and runs the fp32 GEMM. */
int xk_a8_prefill(xk_isa isa);
/* Streams a one-token xk_matmul_a8 call reads its row blocks as, side by side (the range cut in
 * that many equal runs of blocks): with AVX-512 VNNI the CPU's choice (xk_tune_name: 8, or 1 on
 * AMD Zen 5), XK_A8_STREAMS_AVX2 with AVX2, else 1. The bits do not depend on it nor on the range. */
int xk_a8_streams(void);
/* Tests and benchmarks: the AVX-512 VNNI one-token streams, 1 or 8 (0: the CPU's choice again). */
void xk_a8_set_streams(int streams);
/* The per-CPU choices the kernels run with (cpu_kernels.c, xk_tune: int8 decode streams, the weight
 * streams' prefetch level), chosen once per process by CPU vendor and family: "default" or the row's
 * CPU, e.g. "AMD family 26 (Zen 5)". Static storage. */
const char *xk_tune_name(void);
/* 1 when the streams' software prefetch (weights, and the KV rows of decode attention) goes into
 * L1 (T0) here, 0 into L2 (T1): the CPU's choice, set before main; read it, never write it. */
extern int xk_prefetch_to_l1;
/* Tests and benchmarks: 1 keeps xk_matmul_a8 off AMX (the VNNI kernel for every token count), and the
 * bf16 tiles too (amx_avoid, cpu_amx.h, where the AMX kernels live). */
void xk_a8_avoid_amx(int avoid);
/* Tests and benchmarks: 1 keeps 5+ token xk_matmul_a8 calls on the AVX-512 VNNI kernel's passes of
 * 4 tokens (a8_tile512), 0 (the default) on its one pass of up to 16 tokens (the same bits). */
void xk_a8_avoid_wide(int avoid);

/* bf16 weights with AVX512-BF16 (`vdpbf16ps`): the input split exactly into three bf16 parts,
 * x = hi + mid + lo (8 + 8 + 8 significant bits: fp32's 24), so every bf16 x bf16 product the
 * instruction forms is exact in fp32 and the sums are as close to the fp32 kernel's as two fp32
 * summation orders are (inputs below 2^-126, which the instruction flushes, excepted). p (n, 3,
 * cols): per token hi, mid, lo. */
void xk_bf16x3_split(const float *x, int64_t n, int64_t cols, uint16_t *p);
/* The same parts of tokens [t0, t1) planar, p (3, n, cols): all hi rows, then mid, then lo (dense
 * GEMM operands for cpu_dnnl.h). */
void xk_bf16x3_split_planar(const float *x, int64_t n, int64_t cols, int64_t t0, int64_t t1, uint16_t *p);
/* 1 when xk_matmul_bf16x3 runs vdpbf16ps here (avx512_bf16 and the AVX-512 variant). */
int xk_bf16x3_supported(void);
/* What xk_matmul computes for bf16 W, from p (xk_bf16x3_split of x) and x (n, W->cols): rows 8 at
 * a time for one token, 4 rows x 4 tokens otherwise; each (row, token) sum in the same order
 * whatever the tiling, so a token's result does not depend on its batch. Without avx512_bf16 it
 * is xk_matmul(isa, ...). */
void xk_matmul_bf16x3(xk_isa isa, const wmat *W, const uint16_t *p, const float *x, int64_t n, float *y, int64_t ldy,
                      int64_t r0, int64_t r1);

/* bf16 weights with rounded inputs (backend.h BACKEND_BF16_ROUNDED): each of the n rows of x (n,
 * cols) rounded to bf16 in place (nearest even, NaN kept), and where b is not NULL the same values'
 * bf16 bits into b (n, cols) (a dense GEMM operand for cpu_dnnl.h). */
void xk_bf16_round(float *x, int64_t n, int64_t cols, uint16_t *b);

/* Rows [r0, r1) of W as fp32 into dst (r1 - r0, W->cols): the tile the BLAS GEMM reads. */
void xk_dequant_rows(const wmat *W, int64_t r0, int64_t r1, float *dst);

/* y = x / sqrt(mean(x^2) + eps) * w over n elements (sum of squares in double). */
void xk_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);

/* Rotate-half (GPT-NeoX / Hugging Face LLaMA) RoPE tables for position pos:
 * cos_t[i] = cos(pos * theta^(-2i/head_dim)), sin_t likewise, i in [0, head_dim/2). Angles in
 * double. */
void xk_rope_table(float *cos_t, float *sin_t, int64_t pos, int64_t head_dim, double theta);

/* The same from precomputed inverse frequencies (config_rope_freqs: scaled RoPE): cos_t[i] =
 * scale * cos(pos * inv_freq[i]), sin_t likewise, i in [0, half). xk_rope_table is this with
 * inv_freq[i] = theta^(-2i/head_dim) and scale 1, bit for bit. */
void xk_rope_table_freqs(float *cos_t, float *sin_t, int64_t pos, const double *inv_freq, int64_t half, double scale);

/* Applies RoPE to n_heads vectors of head_dim (v (n_heads, head_dim)): for i < head_dim/2,
 * (a, b) = (v[i], v[i + head_dim/2]) -> (a cos - b sin, b cos + a sin). */
void xk_rope(float *v, int64_t n_heads, int64_t head_dim, const float *cos_t, const float *sin_t);

/* Stores n floats into dst as dtype (fp32, fp16, bf16; round to nearest even), and loads back. */
void xk_store(void *dst, xf_dtype dtype, const float *src, int64_t n);
void xk_load(float *dst, const void *src, xf_dtype dtype, int64_t n);

/* h[i] = silu(g[i]) * u[i], silu(g) = g / (1 + exp(-g)), with the variant for isa (the exp of
 * cpu_simd.h: within a few ulp of expf; |g| > 87 saturates the sigmoid's tail at exp(-87)). */
void xk_swiglu_isa(xk_isa isa, float *h, const float *g, const float *u, int64_t n);
/* The same with the best variant this CPU runs. */
void xk_swiglu(float *h, const float *g, const float *u, int64_t n);

/* y[i] += x[i]. */
void xk_add(float *y, const float *x, int64_t n);

/* h[i] = gelu_tanh(g[i]) * u[i] (gemma3's GeGLU; PyTorch's gelu approximate='tanh':
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))), scalar. h may alias neither input. */
void xk_geglu(float *h, const float *g, const float *u, int64_t n);

/* Index of the largest of n values (the first one on ties). */
int64_t xk_argmax(const float *v, int64_t n);

#endif
