/* The CPU backend's AMX tile kernels (Sapphire Rapids and later): int8 weights (tdpbsud, the
 * packed layout of weights.h) and bf16 weights (tdpbf16ps, the plain row-major layout). The tile
 * state needs the kernel's permission (arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA), asked once per
 * process; each call loads its own tile configuration (another library, oneDNN, may have loaded
 * one on the thread since) and releases the tiles at the end. None allocates or spawns threads. */
#ifndef XF_CPU_AMX_H
#define XF_CPU_AMX_H

#include <stdint.h>

#include "reference_model/weights.h"

/* 1 when the CPU has AMX-TILE and AMX-INT8 (with AVX-512 VNNI) and the OS grants the tile state. */
int amx_int8_granted(void);
/* 1 when the CPU has AMX-TILE and AMX-BF16 (with AVX-512) and the OS grants the tile state. */
int amx_bf16_granted(void);
/* Tests and benchmarks: 1 makes both report 0 (the vector kernels run instead). */
void amx_avoid(int avoid);
/* Benchmarks: 1 makes amx_bf16_granted report 0 only (bf16 prefill then goes to oneDNN where built:
 * bench_cpu runs both side by side). */
void amx_avoid_bf16(int avoid);

/* int8: what xk_matmul_a8 computes (cpu_kernels.h), bit for bit, on tiles of up to 16 tokens x 64
 * input bytes: W int8 packed (its packed layout is AMX's B-tile layout), q (n, xk_act8_cols(W)),
 * s and corr (n, W->n_groups), y (n, ldy), rows [r0, r1). Only where amx_int8_granted(). */
void amx_matmul_a8(const wmat *W, const int8_t *q, const float *s, const int32_t *corr, int64_t n, float *y, int64_t ldy,
                   int64_t r0, int64_t r1);

/* bf16: y = x . W^T with the weights as the A operand in their plain row-major layout (a tile is 16
 * weight rows x 32 columns, loaded with the row stride, so nothing is repacked or held twice) and
 * the tokens as the B operand, packed per step into AMX's VNNI-2 layout (pairs of columns side by
 * side). C tiles: 16 weight rows x 16 tokens, 2 x 2 of them per block (32 rows x 32 tokens).
 *
 * Input parts: 1 = the input rounded to bf16 (nearest even; BACKEND_BF16_ROUNDED, where the
 * backend has already rounded x, so the packing is exact), 3 = its exact 3-part split x = hi + mid
 * + lo (xk_bf16x3_split's parts): the three parts are three B tiles accumulated into the same fp32
 * C tile against the same A tile (the weights read once, 3x the tile ops), so every product is
 * exact in fp32 and the result is the fp32 product up to summation order.
 *
 * Summation order of y[t][r], whatever the batch, the tokens beside t, the row range or the thread:
 * columns in chunks of 32 in increasing order; within a chunk, part by part (hi, mid, lo); within
 * a part, tdpbf16ps's order: the 16 even columns summed in order from 0, the 16 odd ones likewise,
 * their sum added to C (fp32, round to nearest even, denormal inputs and results flushed to zero).
 * Intel documents only the fp32 accumulation and the flushing; amx_matmul_bf16_ref states this
 * order in scalar code and matches the tiles bit for bit on this CPU (tested). The K blocking for
 * the cache (AMX_BF16_KB) stores the fp32 C tiles and reloads them, which changes nothing. So a
 * token's result does not depend on its batch (tested bitwise), but it is not the order of the
 * vector kernels of cpu_kernels.h (fewer tokens a step): the backend says which steps run here.
 * Needs W->cols % 32 == 0 (amx_bf16_fits). */
#define AMX_BF16_KB 512 /* input columns per cache block in prefill: the B panel (tokens x KB x parts) stays in L2 */
#define AMX_BF16_KB3 256 /* the same for exact3's three parts (measured 1.07-1.12x over 512 at 512 tokens, one thread),
                          and for rounded inputs past AMX_BF16_KB_TOKENS tokens */
#define AMX_BF16_KB_TOKENS 128 /* rounded inputs, 256-column blocks past this (with y written once per call: 1.02-1.12x
                                  at 256-1024 tokens, 0.86-0.91x at 61-128 tokens, one thread, busy machine) */

/* 1 when amx_bf16_granted() and W is bf16 with cols a multiple of 32. */
int amx_bf16_fits(const wmat *W);
/* uint16 elements of the packed input of n tokens x cols at parts: parts * ceil(n / 16) * 16 * cols. */
int64_t amx_bf16_input_elems(int64_t n, int64_t cols, int parts);
/* Packs token blocks [b0, b1) (16 tokens each; tokens at and past n are zeros) of x (n, cols) into
 * xb (parts, ceil(n / 16), cols / 2, 16, 2): per part, block and column pair, 16 tokens' pairs. */
void amx_bf16_pack_input(const float *x, int64_t n, int64_t cols, int parts, int64_t b0, int64_t b1, uint16_t *xb);
/* floats of the C scratch amx_matmul_bf16 needs for rows (at most) r1 - r0 and n tokens. */
int64_t amx_bf16_scratch_floats(int64_t rows, int64_t n);
/* y[t][r] for tokens [0, n) and rows [r0, r1) (r0 a multiple of 16), from xb (amx_bf16_pack_input
 * of all blocks); c a scratch of amx_bf16_scratch_floats(r1 - r0, n) floats (64-byte aligned). Only
 * where amx_bf16_fits(W). */
void amx_matmul_bf16(const wmat *W, const uint16_t *xb, int parts, int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1,
                     float *c);
/* amx_matmul_bf16 calls this process made (the record says the bf16 projections ran on the tiles). */
int64_t amx_bf16_calls(void);
/* The order above in scalar fp32 (products exact, each sum rounded to nearest even, denormals
 * flushed): the reference the tile kernel is tested against. Same arguments but no scratch. */
void amx_matmul_bf16_ref(const wmat *W, const uint16_t *xb, int parts, int64_t n, float *y, int64_t ldy, int64_t r0,
                         int64_t r1);

#endif
