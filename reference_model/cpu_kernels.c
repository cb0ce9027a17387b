/* CPU kernels: see cpu_kernels.h. */
#include "reference_model/cpu_kernels.h"

#include <math.h>
#include <string.h>

#include "reference_model/cpu_amx.h"
#include "reference_model/cpu_simd.h"

/* ---- ISA selection ---- */

#if XK_X86
#include <cpuid.h>
/* F16C (CPUID.1:ECX bit 29), asked of the CPU directly (clang's __builtin_cpu_supports does not
 * know the name), once: under a hypervisor CPUID exits to it, and on a 2-vCPU AMD EPYC VM each one
 * took ~11 us, two per kernel call (xk_isa_best and the kernel's own check), 70% of a 64 x 2048
 * int8 product from L2. */
static int has_f16c(void) {
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        unsigned a, b, c, d;
        v = __get_cpuid(1, &a, &b, &c, &d) ? (int)((c >> 29) & 1u) : 0;
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

int xk_isa_supported(xk_isa isa) {
    if (isa == XK_ISA_SCALAR) return 1;
#if XK_X86
    __builtin_cpu_init();
    if (isa == XK_ISA_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    if (isa == XK_ISA_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
#endif
    return 0;
}

xk_isa xk_isa_best(void) {
    if (xk_isa_supported(XK_ISA_AVX512)) return XK_ISA_AVX512;
    if (xk_isa_supported(XK_ISA_AVX2)) return XK_ISA_AVX2;
    return XK_ISA_SCALAR;
}

/* ---- per-CPU choices: what the kernels' speed depends on and their bits do not ----
 * Chosen once per process by CPU vendor and family, each from side-by-side runs on that CPU
 * (docs/performance.md); a CPU not listed takes the defaults, measured on the 2-vCPU Xeon (Emerald
 * Rapids) where they were chosen. */
typedef struct xk_tune {
    int a8_streams;  /* int8 one-token decode with AVX-512 VNNI: a call's blocks read as this many streams */
    int prefetch_l1; /* 1: the weight streams' software prefetch (XK_PREFETCH) into L1 (T0), 0: into L2 (T1) */
    const char *cpu; /* the row's name */
} xk_tune;
/* XK_A8_STREAMS streams, into L2: on the Xeon 8 streams read 1.04-1.09x one, and the prefetch
 * distances were chosen into L2. AMD family 26 (Zen 5; a 2-vCPU EPYC, tinyllama's matrices from
 * DRAM, 2 threads, interleaved): one stream read 1.08-1.22x eight (medians, 4 runs; the eleventh
 * session 1.37x), and bf16 decode prefetching into L1 1.02-1.12x into L2 (5 runs). */
static const xk_tune xk_tune_default = {8, 0, "default"}, xk_tune_zen5 = {1, 1, "AMD family 26 (Zen 5)"};
static const xk_tune *xk_tune_cpu = &xk_tune_default;
int xk_prefetch_to_l1; /* xk_tune_cpu->prefetch_l1 (cpu_kernels.h) */
static int a8_streams_set; /* xk_a8_set_streams; 0: the CPU's choice */

#if XK_X86
/* Before main, so that no kernel runs before the choice (one CPUID: each exits to a hypervisor). */
__attribute__((constructor)) static void xk_tune_init(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    const int amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u; /* "AuthenticAMD" */
    if (!amd || !__get_cpuid(1, &a, &b, &c, &d)) return;
    const unsigned family = ((a >> 8) & 0xfu) + (((a >> 8) & 0xfu) == 0xfu ? (a >> 20) & 0xffu : 0u);
    if (family == 0x1a) xk_tune_cpu = &xk_tune_zen5;
    xk_prefetch_to_l1 = xk_tune_cpu->prefetch_l1;
}
#endif

const char *xk_tune_name(void) { return xk_tune_cpu->cpu; }
void xk_a8_set_streams(int streams) { __atomic_store_n(&a8_streams_set, streams, __ATOMIC_RELAXED); }

const char *xk_isa_name(xk_isa isa) {
    switch (isa) {
    case XK_ISA_SCALAR: return "scalar";
    case XK_ISA_AVX2: return "avx2";
    case XK_ISA_AVX512: return "avx512";
    default: return "?";
    }
}

/* ---- matrix times a few vectors ---- */

static inline float w_at(const wmat *W, int64_t off) {
    if (W->dtype == XF_FP32) return ((const float *)W->data)[off];
    if (W->dtype == XF_BF16) return weights_bf16_to_f32(((const uint16_t *)W->data)[off]);
    if (W->dtype == XF_FP16) return weights_f16_to_f32(((const uint16_t *)W->data)[off]);
    return (float)((const int8_t *)W->data)[off];
}

/* The portable reference: per row, per token, per group, float accumulation. */
static void mm_scalar(const wmat *W, const float *x, int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1) {
    const int64_t cols = W->cols;
    const int is_q = W->dtype == XF_INT8;
    const int64_t group = is_q ? W->group : cols, ng = is_q ? W->n_groups : 1;
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t t = 0; t < n; t++) {
            const float *xt = x + t * cols;
            float acc = 0.0f;
            for (int64_t g = 0; g < ng; g++) {
                int64_t c0 = g * group, c1 = c0 + group < cols ? c0 + group : cols;
                float p = 0.0f;
                for (int64_t c = c0; c < c1; c++) p += w_at(W, r * cols + c) * xt[c];
                acc += is_q ? p * W->scales[r * ng + g] : p;
            }
            y[t * ldy + r] = acc;
        }
    }
}

/* One vectorized body for every ISA and weight type: 4 rows x 2 tokens of accumulators, a group
 * loop (one group spanning the row for fp32/bf16, whose scale is 1), vector columns then a scalar
 * tail per group. Rows and tokens past the end reuse the last valid one and are not stored. */
#define XK_MM_BODY(VT, VW, SETZERO, SET1, FMADD, LOADU, HSUM, LOADW)                                        \
    const int64_t cols = W->cols;                                                                           \
    const int is_q = W->dtype == XF_INT8;                                                                   \
    const int64_t group = is_q ? W->group : cols, ng = is_q ? W->n_groups : 1;                              \
    const void *wd = W->data;                                                                               \
    const int64_t esz = W->dtype == XF_FP32 ? 4 : W->dtype == XF_INT8 ? 1 : 2;                              \
    /* two tokens over XK_MM1_RUNS_MIN+ rows: blocks 0..run-1 take row i from run i of 4, each stream  \
     * prefetched XK_MM1_RUNS_PF ahead (as XK_MM_BODY1); the rest, and more tokens, 4 adjacent rows */  \
    const int64_t run = n == 2 && r1 - r0 >= XK_MM1_RUNS_MIN && !__atomic_load_n(&mm1_runs_off, __ATOMIC_RELAXED) ? (r1 - r0) / 4 : 0; \
    const int64_t nblk = run + (r1 - r0 - 4 * run + 3) / 4;                                                 \
    for (int64_t bi = 0; bi < nblk; bi++) {                                                                 \
        const int64_t r = bi < run ? r0 + bi : r0 + 4 * run + 4 * (bi - run);                               \
        const int64_t rb = bi < run ? 4 : r1 - r < 4 ? r1 - r : 4, rstep = bi < run ? run : 1;              \
        int64_t row[4], ro[4];                                                                              \
        for (int i = 0; i < 4; i++) {                                                                       \
            row[i] = r + (i < rb ? i : 0) * rstep;                                                          \
            ro[i] = row[i] * cols;                                                                          \
        }                                                                                                   \
        /* row base pointers: loads address [base + c * size] with no per-load arithmetic */              \
        const char *wp0 = (const char *)wd + ro[0] * esz, *wp1 = (const char *)wd + ro[1] * esz;           \
        const char *wp2 = (const char *)wd + ro[2] * esz, *wp3 = (const char *)wd + ro[3] * esz;           \
        const int pf = bi < run;                                                                            \
        for (int64_t t = 0; t < n; t += 2) {                                                                \
            const int64_t tb = n - t < 2 ? n - t : 2;                                                       \
            const float *xa = x + t * cols, *xb = x + (t + tb - 1) * cols;                                  \
            VT a0 = SETZERO(), a1 = SETZERO(), a2 = SETZERO(), a3 = SETZERO();                              \
            VT a4 = SETZERO(), a5 = SETZERO(), a6 = SETZERO(), a7 = SETZERO();                              \
            float tl[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                         \
            for (int64_t g = 0; g < ng; g++) {                                                              \
                const int64_t c0 = g * group, c1 = c0 + group < cols ? c0 + group : cols;                   \
                const int64_t cv = c0 + ((c1 - c0) / VW) * VW;                                              \
                VT p0 = SETZERO(), p1 = SETZERO(), p2 = SETZERO(), p3 = SETZERO();                          \
                VT p4 = SETZERO(), p5 = SETZERO(), p6 = SETZERO(), p7 = SETZERO();                          \
                for (int64_t c = c0; c < cv; c += VW) {                                                     \
                    const VT va = LOADU(xa + c), vb = LOADU(xb + c);                                        \
                    if (pf && ((c * esz) & 63) == 0) {                                                      \
                        const int64_t o = XK_MM1_RUNS_PF + c * esz;                                         \
                        XK_PREFETCH(wp0 + o), XK_PREFETCH(wp1 + o), XK_PREFETCH(wp2 + o), XK_PREFETCH(wp3 + o); \
                    }                                                                                       \
                    VT w = LOADW(wp0, c);                                                            \
                    p0 = FMADD(w, va, p0);                                                                  \
                    p1 = FMADD(w, vb, p1);                                                                  \
                    w = LOADW(wp1, c);                                                               \
                    p2 = FMADD(w, va, p2);                                                                  \
                    p3 = FMADD(w, vb, p3);                                                                  \
                    w = LOADW(wp2, c);                                                               \
                    p4 = FMADD(w, va, p4);                                                                  \
                    p5 = FMADD(w, vb, p5);                                                                  \
                    w = LOADW(wp3, c);                                                               \
                    p6 = FMADD(w, va, p6);                                                                  \
                    p7 = FMADD(w, vb, p7);                                                                  \
                }                                                                                           \
                float sc[4] = {1.0f, 1.0f, 1.0f, 1.0f};                                                     \
                if (is_q)                                                                                   \
                    for (int i = 0; i < 4; i++) sc[i] = W->scales[row[i] * ng + g];                         \
                a0 = FMADD(p0, SET1(sc[0]), a0);                                                            \
                a1 = FMADD(p1, SET1(sc[0]), a1);                                                            \
                a2 = FMADD(p2, SET1(sc[1]), a2);                                                            \
                a3 = FMADD(p3, SET1(sc[1]), a3);                                                            \
                a4 = FMADD(p4, SET1(sc[2]), a4);                                                            \
                a5 = FMADD(p5, SET1(sc[2]), a5);                                                            \
                a6 = FMADD(p6, SET1(sc[3]), a6);                                                            \
                a7 = FMADD(p7, SET1(sc[3]), a7);                                                            \
                for (int64_t c = cv; c < c1; c++) {                                                         \
                    for (int i = 0; i < 4; i++) {                                                           \
                        float wv = sc[i] * w_at(W, ro[i] + c);                                              \
                        tl[i * 2] += wv * xa[c];                                                            \
                        tl[i * 2 + 1] += wv * xb[c];                                                        \
                    }                                                                                       \
                }                                                                                           \
            }                                                                                               \
            const float s[8] = {HSUM(a0) + tl[0], HSUM(a1) + tl[1], HSUM(a2) + tl[2], HSUM(a3) + tl[3],     \
                                HSUM(a4) + tl[4], HSUM(a5) + tl[5], HSUM(a6) + tl[6], HSUM(a7) + tl[7]};    \
            for (int i = 0; i < rb; i++)                                                                    \
                for (int j = 0; j < tb; j++) y[(t + j) * ldy + row[i]] = s[i * 2 + j];                      \
        }                                                                                                   \
    }


/* Software prefetch of the rows the next block will read, into L2 (into L1 where the CPU's row of
 * xk_tune says so). Decode streams every weight once: 8 rows of 2 KB (int8) to 8 KB (fp32) are read
 * side by side, too short for the hardware prefetcher to run far enough ahead on a high-latency
 * machine; fetching the next block one cache line per row per line consumed raised int8 decode
 * from ~19 to ~27 GB/s on a 2-core Xeon VM (docs/performance.md). A prefetch never faults; the block
 * is only fetched when it exists. */
#define XK_PREFETCH(p) (xk_prefetch_to_l1 ? __builtin_prefetch((p), 0, 3) : __builtin_prefetch((p), 0, 2))

/* Batched decode with unquantized weights (fp32 / bf16 / fp16, one group per row): 4 rows x 4
 * tokens of accumulators, so each weight vector loaded (and converted) feeds 4 FMAs and each input
 * vector 4: twice the FMAs per load of XK_MM_BODY, which made batch 8-16 compute-bound. Rows go in
 * groups of 16 and, within a group, columns in chunks outermost: the chunk's inputs of every token
 * (XK_MM_KC_BYTES of fp32: 512 columns at 16 tokens) stay in L1 across the group's 4 row blocks
 * and each block's chunk of weights in L1 across the token groups, the accumulators of the group
 * (16 rows x n tokens) waiting in memory between chunks; the next group's rows are prefetched into
 * L2, spread over this group's work. Without the chunks every token's whole input row was reloaded
 * from L2 for every block of 4 rows (4x the weights' bytes at 16 tokens). Each sum still runs in
 * the lane order of XK_MM_BODY / XK_MM_BODY1 (lanes over the columns in order, one horizontal sum
 * at the end; a chunk only pauses it), so a token's result does not depend on the batch it is in
 * (tested bitwise). Tokens past n reuse the last one and are not stored; more than XK_MM_MAX_TOKENS
 * tokens go in slices of that many over each group (its rows then come from L2; at 31 tokens in
 * one slice the accumulators alone filled L1 and it measured 13% slower than the unchunked kernel).
 * Measured against the unchunked kernel (docs/performance.md); a column-blocked variant with the
 * inputs copied side by side (16 rows x 128 columns, each weight read once per 32 tokens) was
 * slower than both. */
#define XK_MM_KC_BYTES 32768
#define XK_MM_MAX_TOKENS 16
#define XK_MM_BODY4(VT, VW, SETZERO, FMADD, LOADU, HSUM, LOADW)                                            \
    const int64_t cols = W->cols;                                                                           \
    const int64_t esz = W->dtype == XF_FP32 ? 4 : 2;                                                        \
    const int64_t cv = (cols / VW) * VW;                                                                    \
    VT acc[4][XK_MM_MAX_TOKENS / 4][16]; /* (row block, token group, 4 rows x 4 tokens) */                 \
    for (int64_t rg = r0; rg < r1; rg += 16)                                                                \
    for (int64_t ts = 0; ts < n; ts += XK_MM_MAX_TOKENS) { /* the group's rows stay in L2 across slices */ \
        const int64_t nn = n - ts < XK_MM_MAX_TOKENS ? n - ts : XK_MM_MAX_TOKENS, ntg = (nn + 3) / 4;        \
        const float *xs = x + ts * cols;                                                                    \
        float *ys = y + ts * ldy;                                                                           \
        /* columns per chunk: the chunk's inputs of the slice's tokens in XK_MM_KC_BYTES */               \
        int64_t kc = XK_MM_KC_BYTES / (4 * nn) / VW * VW;                                                  \
        kc = kc < 4 * VW ? 4 * VW : kc;                                                                     \
        const int64_t rge = rg + 16 < r1 ? rg + 16 : r1, nrb = (rge - rg + 3) / 4;                         \
        /* the next group's 16 rows, during the first slice: lines spread over its vector steps */         \
        const char *pfp = (const char *)W->data + rge * cols * esz;                                         \
        const int pf = ts == 0 && rge + 16 <= W->rows;                                                      \
        const int64_t steps = nrb * ntg * (cv / VW), lines = 16 * cols * esz / 64;                          \
        /* per lines every `every` steps, spread over the group's work (issued in bursts at the start   \
         * of each pass instead, they measured 12% slower from DRAM) */                                    \
        const int64_t per = steps > 0 && lines >= steps ? (lines + steps - 1) / steps : 1;                 \
        const int64_t every = steps > 0 && lines < steps && lines > 0 ? steps / lines : 1;                  \
        int64_t sc = 0;                                                                                     \
        for (int64_t k0 = 0; k0 < cv; k0 += kc) {                                                           \
            const int64_t k1 = k0 + kc < cv ? k0 + kc : cv;                                                 \
            for (int64_t b = 0; b < nrb; b++) {                                                             \
                const int64_t r = rg + 4 * b, rb = rge - r < 4 ? rge - r : 4;                               \
                const char *wp0 = (const char *)W->data + r * cols * esz;                                   \
                const char *wp1 = (const char *)W->data + (r + (rb > 1 ? 1 : 0)) * cols * esz;              \
                const char *wp2 = (const char *)W->data + (r + (rb > 2 ? 2 : 0)) * cols * esz;              \
                const char *wp3 = (const char *)W->data + (r + (rb > 3 ? 3 : 0)) * cols * esz;              \
                for (int64_t tg = 0; tg < ntg; tg++) {                                                      \
                    const int64_t t = 4 * tg, tb = nn - t < 4 ? nn - t : 4;                                   \
                    const float *x0 = xs + t * cols, *x1 = xs + (t + (tb > 1 ? 1 : 0)) * cols;                \
                    const float *x2 = xs + (t + (tb > 2 ? 2 : 0)) * cols, *x3 = xs + (t + (tb > 3 ? 3 : 0)) * cols; \
                    VT a[16];                                                                               \
                    for (int i = 0; i < 16; i++) a[i] = k0 == 0 ? SETZERO() : acc[b][tg][i];                \
                    for (int64_t c = k0; c < k1; c += VW) {                                                 \
                        if (pf && ++sc >= every) {                                                          \
                            sc = 0;                                                                         \
                            for (int64_t k = 0; k < per; k++, pfp += 64) XK_PREFETCH(pfp);                  \
                        }                                                                                   \
                        const VT v0 = LOADU(x0 + c), v1 = LOADU(x1 + c), v2 = LOADU(x2 + c), v3 = LOADU(x3 + c); \
                        VT w = LOADW(wp0, c);                                                               \
                        a[0] = FMADD(w, v0, a[0]), a[1] = FMADD(w, v1, a[1]);                               \
                        a[2] = FMADD(w, v2, a[2]), a[3] = FMADD(w, v3, a[3]);                               \
                        w = LOADW(wp1, c);                                                                  \
                        a[4] = FMADD(w, v0, a[4]), a[5] = FMADD(w, v1, a[5]);                               \
                        a[6] = FMADD(w, v2, a[6]), a[7] = FMADD(w, v3, a[7]);                               \
                        w = LOADW(wp2, c);                                                                  \
                        a[8] = FMADD(w, v0, a[8]), a[9] = FMADD(w, v1, a[9]);                               \
                        a[10] = FMADD(w, v2, a[10]), a[11] = FMADD(w, v3, a[11]);                           \
                        w = LOADW(wp3, c);                                                                  \
                        a[12] = FMADD(w, v0, a[12]), a[13] = FMADD(w, v1, a[13]);                           \
                        a[14] = FMADD(w, v2, a[14]), a[15] = FMADD(w, v3, a[15]);                           \
                    }                                                                                       \
                    for (int i = 0; i < 16; i++) acc[b][tg][i] = a[i];                                      \
                }                                                                                           \
            }                                                                                               \
        }                                                                                                   \
        for (int64_t b = 0; b < nrb; b++) {                                                                 \
            const int64_t r = rg + 4 * b, rb = rge - r < 4 ? rge - r : 4;                                   \
            for (int64_t tg = 0; tg < ntg; tg++) {                                                          \
                const int64_t t = 4 * tg, tb = nn - t < 4 ? nn - t : 4;                                       \
                for (int i = 0; i < rb; i++)                                                                \
                    for (int j = 0; j < tb; j++) {                                                          \
                        float tl = 0.0f;                                                                    \
                        for (int64_t c = cv; c < cols; c++) tl += w_at(W, (r + i) * cols + c) * xs[(t + j) * cols + c]; \
                        ys[(t + j) * ldy + r + i] = (cv > 0 ? HSUM(acc[b][tg][i * 4 + j]) : 0.0f) + tl;     \
                    }                                                                                       \
            }                                                                                               \
        }                                                                                                   \
    }


/* The one-token case (decode at batch 1): 8 rows x 1 token of accumulators, so the 8 FMA chains
 * are independent and none is wasted on a duplicate token. A range of XK_MM1_RUNS_MIN rows or more
 * (the backend gives each thread its whole share in one call) is read as 8 runs side by side, as
 * the read ceiling's kernel reads 8 streams and the int8 kernel 8 runs of blocks (XK_A8_STREAMS):
 * block i takes row i of each run, so each of the 8 accumulators streams its own region, where 8
 * adjacent rows were one region read 8 rows at a time. Each row's sum is computed as before (the
 * same bits: only which rows share a block changed). From DRAM, 2 threads, 11264 x 2048 matrices
 * (24 bf16, 12 fp32), 15 rounds side by side, speed over the 8-adjacent-row kernel (median of the
 * rounds' ratios): bf16 1.08-1.10, fp32 1.02-1.06 (docs/performance.md). Two tokens (XK_MM_BODY)
 * read 4 runs the same way, which also gave them a software prefetch they lacked: tinyllama's
 * matrices, bf16 1.14-1.20, fp32 1.10-1.12 against 4 adjacent rows without it. */
#define XK_MM1_RUNS_MIN 64
/* Prefetch distance in each run's stream: bf16 as above, runs / adjacent speed (median of 15
 * rounds) 1.03 prefetching each run's next row (4 KiB ahead at 2048 columns), 1.06-1.08 at 1 KiB,
 * 1.08-1.10 at 512 B (two runs), 1.07 at 256 B. */
#define XK_MM1_RUNS_PF 512
static int mm1_runs_off; /* xk_mm1_avoid_runs */
#define XK_MM_BODY1(VT, VW, SETZERO, SET1, FMADD, LOADU, HSUM, LOADW)                                       \
    const int64_t cols = W->cols;                                                                           \
    const int is_q = W->dtype == XF_INT8;                                                                   \
    const int64_t group = is_q ? W->group : cols, ng = is_q ? W->n_groups : 1;                              \
    const void *wd = W->data;                                                                               \
    const int64_t esz = W->dtype == XF_FP32 ? 4 : W->dtype == XF_INT8 ? 1 : 2;                              \
    /* blocks 0..run-1: row i of a block from run i (XK_MM1_RUNS_MIN); the rest 8 adjacent rows each */   \
    const int64_t run = r1 - r0 >= XK_MM1_RUNS_MIN && !__atomic_load_n(&mm1_runs_off, __ATOMIC_RELAXED) ? (r1 - r0) / 8 : 0; \
    const int64_t nblk = run + (r1 - r0 - 8 * run + 7) / 8;                                                 \
    for (int64_t bi = 0; bi < nblk; bi++) {                                                                 \
        const int64_t r = bi < run ? r0 + bi : r0 + 8 * run + 8 * (bi - run);                               \
        const int64_t rb = bi < run ? 8 : r1 - r < 8 ? r1 - r : 8, rstep = bi < run ? run : 1;              \
        int64_t row[8], ro[8];                                                                              \
        for (int i = 0; i < 8; i++) {                                                                       \
            row[i] = r + (i < rb ? i : 0) * rstep;                                                          \
            ro[i] = row[i] * cols;                                                                          \
        }                                                                                                   \
        const char *wp0 = (const char *)wd + ro[0] * esz, *wp1 = (const char *)wd + ro[1] * esz;           \
        const char *wp2 = (const char *)wd + ro[2] * esz, *wp3 = (const char *)wd + ro[3] * esz;           \
        const char *wp4 = (const char *)wd + ro[4] * esz, *wp5 = (const char *)wd + ro[5] * esz;           \
        const char *wp6 = (const char *)wd + ro[6] * esz, *wp7 = (const char *)wd + ro[7] * esz;           \
        /* fetched into L2 while this block is computed (see XK_PREFETCH): in a run, its stream        \
         * XK_MM1_RUNS_PF bytes ahead (into the run's next row at the end of one); else the next 8 rows */ \
        const int pf = bi < run || r + 16 <= W->rows;                                                       \
        const int64_t nxt = bi < run ? XK_MM1_RUNS_PF : 8 * cols * esz;                                     \
        VT a0 = SETZERO(), a1 = SETZERO(), a2 = SETZERO(), a3 = SETZERO();                                  \
        VT a4 = SETZERO(), a5 = SETZERO(), a6 = SETZERO(), a7 = SETZERO();                                  \
        float tl[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                             \
        for (int64_t g = 0; g < ng; g++) {                                                                  \
            const int64_t c0 = g * group, c1 = c0 + group < cols ? c0 + group : cols;                       \
            const int64_t cv = c0 + ((c1 - c0) / VW) * VW;                                                  \
            VT p0 = SETZERO(), p1 = SETZERO(), p2 = SETZERO(), p3 = SETZERO();                              \
            VT p4 = SETZERO(), p5 = SETZERO(), p6 = SETZERO(), p7 = SETZERO();                              \
            for (int64_t c = c0; c < cv; c += VW) {                                                         \
                const VT va = LOADU(x + c);                                                                 \
                if (pf && ((c * esz) & 63) == 0) {                                                          \
                    const int64_t o = nxt + c * esz;                                                        \
                    XK_PREFETCH(wp0 + o), XK_PREFETCH(wp1 + o), XK_PREFETCH(wp2 + o), XK_PREFETCH(wp3 + o); \
                    XK_PREFETCH(wp4 + o), XK_PREFETCH(wp5 + o), XK_PREFETCH(wp6 + o), XK_PREFETCH(wp7 + o); \
                }                                                                                           \
                p0 = FMADD(LOADW(wp0, c), va, p0);                                                   \
                p1 = FMADD(LOADW(wp1, c), va, p1);                                                   \
                p2 = FMADD(LOADW(wp2, c), va, p2);                                                   \
                p3 = FMADD(LOADW(wp3, c), va, p3);                                                   \
                p4 = FMADD(LOADW(wp4, c), va, p4);                                                   \
                p5 = FMADD(LOADW(wp5, c), va, p5);                                                   \
                p6 = FMADD(LOADW(wp6, c), va, p6);                                                   \
                p7 = FMADD(LOADW(wp7, c), va, p7);                                                   \
            }                                                                                               \
            float sc[8] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};                                 \
            if (is_q)                                                                                       \
                for (int i = 0; i < 8; i++) sc[i] = W->scales[row[i] * ng + g];                             \
            if (is_q) {                                                                                     \
                a0 = FMADD(p0, SET1(sc[0]), a0);                                                            \
                a1 = FMADD(p1, SET1(sc[1]), a1);                                                            \
                a2 = FMADD(p2, SET1(sc[2]), a2);                                                            \
                a3 = FMADD(p3, SET1(sc[3]), a3);                                                            \
                a4 = FMADD(p4, SET1(sc[4]), a4);                                                            \
                a5 = FMADD(p5, SET1(sc[5]), a5);                                                            \
                a6 = FMADD(p6, SET1(sc[6]), a6);                                                            \
                a7 = FMADD(p7, SET1(sc[7]), a7);                                                            \
            } else {                                                                                        \
                a0 = p0, a1 = p1, a2 = p2, a3 = p3, a4 = p4, a5 = p5, a6 = p6, a7 = p7;                     \
            }                                                                                               \
            for (int64_t c = cv; c < c1; c++)                                                               \
                for (int i = 0; i < 8; i++) tl[i] += sc[i] * w_at(W, ro[i] + c) * x[c];                     \
        }                                                                                                   \
        const float s[8] = {HSUM(a0) + tl[0], HSUM(a1) + tl[1], HSUM(a2) + tl[2], HSUM(a3) + tl[3],         \
                            HSUM(a4) + tl[4], HSUM(a5) + tl[5], HSUM(a6) + tl[6], HSUM(a7) + tl[7]};        \
        for (int i = 0; i < rb; i++) y[row[i]] = s[i];                                                      \
    }

/* The one-token kernel as a function of its own: inlined beside XK_MM_BODY4 and XK_MM_BODY in one
 * function, gcc kept its 8 row pointers on the stack and reloaded them for every load and
 * prefetch (16 extra loads per 8 vectors); alone it keeps them in registers. */
#define XK_MM1_FN(NAME, TGT, VT, VW, SETZERO, SET1, FMADD, LOADU, HSUM, LOADW)                                 \
    static __attribute__((noinline)) TGT void NAME(const wmat *W, const float *x, float *y, int64_t r0, int64_t r1) { \
        XK_MM_BODY1(VT, VW, SETZERO, SET1, FMADD, LOADU, HSUM, LOADW)                                       \
    }

/* One ISA x weight dtype's matmul, NAME, with its one-token kernel NAME1: 3+ tokens through the
 * 4-token body where FOUR is 1 (fp32, bf16, fp16), one token through NAME1, the rest (int8's 2+
 * tokens, FOUR 0) through XK_MM_BODY. */
#define XK_MM_FN(NAME, NAME1, FOUR, TGT, VT, VW, SETZERO, SET1, FMADD, LOADU, HSUM, LOADW)                   \
    XK_MM1_FN(NAME1, TGT, VT, VW, SETZERO, SET1, FMADD, LOADU, HSUM, LOADW)                                  \
    static TGT void NAME(const wmat *W, const float *x, int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1) { \
        if (FOUR && n >= 3) {                                                                               \
            XK_MM_BODY4(VT, VW, SETZERO, FMADD, LOADU, HSUM, LOADW)                                         \
        } else if (n == 1) {                                                                                \
            NAME1(W, x, y, r0, r1);                                                                         \
        } else {                                                                                            \
            XK_MM_BODY(VT, VW, SETZERO, SET1, FMADD, LOADU, HSUM, LOADW)                                    \
        }                                                                                                   \
    }

#if XK_X86

/* AVX2: 8 lanes. */
static inline TGT_AVX2 float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline TGT_AVX2 __m256 ld8_f32(const void *w, int64_t off) { return _mm256_loadu_ps((const float *)w + off); }
static inline TGT_AVX2 __m256 ld8_bf16(const void *w, int64_t off) {
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + off));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
static inline TGT_AVX2 __m256 ld8_f16(const void *w, int64_t off) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + off)));
}
static inline TGT_AVX2 __m256 ld8_i8(const void *w, int64_t off) {
    __m128i b = _mm_loadl_epi64((const __m128i *)((const int8_t *)w + off));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}
XK_MM_FN(mm_avx2_f32, mm1_avx2_f32, 1, TGT_AVX2, __m256, 8, _mm256_setzero_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_loadu_ps, hsum8, ld8_f32)
XK_MM_FN(mm_avx2_bf16, mm1_avx2_bf16, 1, TGT_AVX2, __m256, 8, _mm256_setzero_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_loadu_ps, hsum8, ld8_bf16)
XK_MM_FN(mm_avx2_f16, mm1_avx2_f16, 1, TGT_AVX2, __m256, 8, _mm256_setzero_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_loadu_ps, hsum8, ld8_f16)
XK_MM_FN(mm_avx2_i8, mm1_avx2_i8, 0, TGT_AVX2, __m256, 8, _mm256_setzero_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_loadu_ps, hsum8, ld8_i8)

/* AVX-512: 16 lanes. */
static inline TGT_AVX512 float hsum16(__m512 v) { return _mm512_reduce_add_ps(v); }
static inline TGT_AVX512 __m512 ld16_f32(const void *w, int64_t off) { return _mm512_loadu_ps((const float *)w + off); }
/* 16 bf16 to fp32 in column order: one masked vpermw puts word i in the high half of lane i and
 * zeros the low half, where widening then shifting took two vector ops (the same lanes and bits;
 * from DRAM at batch 1 medians 1-4% faster on a busy machine, docs/performance.md). */
static inline TGT_AVX512 __m512 ld16_bf16(const void *w, int64_t off) {
    const __m512i idx = _mm512_set_epi16(15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0, 8, 0, 7, 0, 6, 0, 5, 0, 4, 0, 3, 0, 2, 0, 1, 0, 0, 0);
    const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + off));
    return _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, idx, _mm512_castsi256_si512(h)));
}
static inline TGT_AVX512 __m512 ld16_f16(const void *w, int64_t off) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + off)));
}
static inline TGT_AVX512 __m512 ld16_i8(const void *w, int64_t off) {
    __m128i b = _mm_loadu_si128((const __m128i *)((const int8_t *)w + off));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
}
XK_MM_FN(mm_avx512_f32, mm1_avx512_f32, 1, TGT_AVX512, __m512, 16, _mm512_setzero_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_loadu_ps, hsum16, ld16_f32)
XK_MM_FN(mm_avx512_bf16, mm1_avx512_bf16, 1, TGT_AVX512, __m512, 16, _mm512_setzero_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_loadu_ps, hsum16, ld16_bf16)
XK_MM_FN(mm_avx512_f16, mm1_avx512_f16, 1, TGT_AVX512, __m512, 16, _mm512_setzero_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_loadu_ps, hsum16, ld16_f16)
XK_MM_FN(mm_avx512_i8, mm1_avx512_i8, 0, TGT_AVX512, __m512, 16, _mm512_setzero_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_loadu_ps, hsum16, ld16_i8)
#endif

/* Packed int8 (weights.h) through the float interface: element by element, the sums as mm_scalar's. */
static void mm_scalar_packed(const wmat *W, const float *x, int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1) {
    const int64_t cols = W->cols, group = W->group, ng = W->n_groups;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t t = 0; t < n; t++) {
            float acc = 0.0f;
            for (int64_t g = 0; g < ng; g++) {
                const int64_t c0 = g * group, c1 = c0 + group < cols ? c0 + group : cols;
                float p = 0.0f;
                for (int64_t c = c0; c < c1; c++) p += (float)weights_i8_at(W, r, c) * x[t * cols + c];
                acc += p * W->scales[weights_scale_index(W, r, c0)];
            }
            y[t * ldy + r] = acc;
        }
}

void xk_matmul(xk_isa isa, const wmat *W, const float *x, int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1) {
    if (n <= 0 || r1 <= r0) return;
    if (W->dtype == XF_INT8 && W->packed) {
        mm_scalar_packed(W, x, n, y, ldy, r0, r1);
        return;
    }
#if XK_X86
    if (isa == XK_ISA_AVX512) {
        if (W->dtype == XF_FP32) mm_avx512_f32(W, x, n, y, ldy, r0, r1);
        else if (W->dtype == XF_BF16) mm_avx512_bf16(W, x, n, y, ldy, r0, r1);
        else if (W->dtype == XF_FP16) mm_avx512_f16(W, x, n, y, ldy, r0, r1);
        else mm_avx512_i8(W, x, n, y, ldy, r0, r1);
        return;
    }
    if (isa == XK_ISA_AVX2) {
        if (W->dtype == XF_FP32) mm_avx2_f32(W, x, n, y, ldy, r0, r1);
        else if (W->dtype == XF_BF16) mm_avx2_bf16(W, x, n, y, ldy, r0, r1);
        else if (W->dtype == XF_FP16) mm_avx2_f16(W, x, n, y, ldy, r0, r1);
        else mm_avx2_i8(W, x, n, y, ldy, r0, r1);
        return;
    }
#else
    (void)isa;
#endif
    mm_scalar(W, x, n, y, ldy, r0, r1);
}

/* ---- int8 weights times a 16-bit input grid ---- */

/* The grid of one group of n values: s = max|x| / qmax (NaN when one is not finite) and the
 * factor that maps x to q. */
static float grid_scale(const float *x, int64_t n, float qmax, float *inv) {
    float m = 0.0f;
    int finite = 1;
    for (int64_t c = 0; c < n; c++) {
        const float a = fabsf(x[c]);
        finite &= isfinite(a);
        m = a > m ? a : m;
    }
    *inv = finite && m > 0.0f ? qmax / m : 0.0f;
    return finite ? m / qmax : NAN;
}

void xk_act16_quantize(const float *x, int64_t cols, int64_t group, int16_t *q, float *s) {
    for (int64_t g = 0, c0 = 0; c0 < cols; g++, c0 += group) {
        const int64_t c1 = c0 + group < cols ? c0 + group : cols;
        float inv;
        s[g] = grid_scale(x + c0, c1 - c0, XK_ACT16_MAX, &inv);
        for (int64_t c = c0; c < c1; c++) q[c] = (int16_t)lrintf(x[c] * inv);
    }
}

/* Each row of x (n, cols) to its grid value per group: s * round(x / s), |q| <= qmax. */
static void grid_round(float *x, int64_t n, int64_t cols, int64_t group, float qmax) {
    const long qm = (long)qmax;
    for (int64_t t = 0; t < n; t++) {
        float *xt = x + t * cols;
        for (int64_t c0 = 0; c0 < cols; c0 += group) {
            const int64_t c1 = c0 + group < cols ? c0 + group : cols;
            float inv;
            const float s = grid_scale(xt + c0, c1 - c0, qmax, &inv);
            for (int64_t c = c0; c < c1; c++) {
                long v = lrintf(xt[c] * inv);
                v = v > qm ? qm : v < -qm ? -qm : v;
                xt[c] = (float)v * s;
            }
        }
    }
}

void xk_act16_round(float *x, int64_t n, int64_t cols, int64_t group) { grid_round(x, n, cols, group, XK_ACT16_MAX); }

/* int32 lanes hold at most 2 * XK_I8A16_SPAN / LANES products of |127 * 32767|: flushed to float
 * every XK_I8A16_SPAN elements, far from overflow. */
#define XK_I8A16_SPAN 512

#if defined(__clang__)
#define XK_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define XK_UNROLL _Pragma("GCC unroll 8")
#else
#define XK_UNROLL
#endif

static void i8a16_scalar(const wmat *W, const int16_t *q, const float *s, float *y, int64_t r0, int64_t r1) {
    const int64_t cols = W->cols, group = W->group, ng = W->n_groups;
    for (int64_t r = r0; r < r1; r++) {
        float acc = 0.0f;
        for (int64_t g = 0; g < ng; g++) {
            const int64_t c0 = g * group, c1 = c0 + group < cols ? c0 + group : cols;
            const float sc = W->scales[weights_scale_index(W, r, c0)] * s[g];
            for (int64_t k0 = c0; k0 < c1; k0 += XK_I8A16_SPAN) {
                const int64_t k1 = k0 + XK_I8A16_SPAN < c1 ? k0 + XK_I8A16_SPAN : c1;
                int32_t p = 0;
                for (int64_t c = k0; c < k1; c++) p += (int32_t)weights_i8_at(W, r, c) * q[c];
                acc += sc * (float)p;
            }
        }
        y[r] = acc;
    }
}

/* ROWS rows at a time; per span, int32 dot products of LANES int16 lanes, then one float FMA with
 * the combined scale; a scalar int32 tail per span. The next block of rows is prefetched into L2
 * as in XK_MM_BODY1. */
#define XK_I8A16_BODY(ROWS, VI, VF, LANES, LOADQ, LOADW, DOT, ZEROI, ZEROF, CVT, FMADD, SET1, HSUM)               \
    const int64_t cols = W->cols, group = W->group, ng = W->n_groups;                                      \
    const int8_t *wd = W->data;                                                                            \
    for (int64_t r = r0; r < r1; r += ROWS) {                                                              \
        const int64_t rb = r1 - r < ROWS ? r1 - r : ROWS;                                                  \
        const int8_t *wp[ROWS];                                                                            \
        int64_t row[ROWS];                                                                                 \
        for (int i = 0; i < ROWS; i++) {                                                                   \
            row[i] = r + (i < rb ? i : 0);                                                                 \
            wp[i] = wd + row[i] * cols;                                                                    \
        }                                                                                                  \
        const int pf = r + 2 * ROWS <= W->rows;                                                            \
        const int64_t nxt = ROWS * cols;                                                                   \
        VF a[ROWS];                                                                                        \
        float tl[ROWS];                                                                                    \
        XK_UNROLL for (int i = 0; i < ROWS; i++) a[i] = ZEROF(), tl[i] = 0.0f;                              \
        for (int64_t g = 0; g < ng; g++) {                                                                 \
            const int64_t c0 = g * group, c1 = c0 + group < cols ? c0 + group : cols;                      \
            for (int64_t k0 = c0; k0 < c1; k0 += XK_I8A16_SPAN) {                                          \
                const int64_t k1 = k0 + XK_I8A16_SPAN < c1 ? k0 + XK_I8A16_SPAN : c1;                      \
                const int64_t kv = k0 + ((k1 - k0) / LANES) * LANES;                                       \
                VI p[ROWS];                                                                                \
                XK_UNROLL for (int i = 0; i < ROWS; i++) p[i] = ZEROI();                                   \
                for (int64_t c = k0; c < kv; c += LANES) {                                                 \
                    const VI xq = LOADQ(q + c);                                                            \
                    if (pf && (c & 63) == 0) {                                                             \
                        XK_UNROLL for (int i = 0; i < ROWS; i++) XK_PREFETCH(wp[i] + nxt + c);              \
                    }                                                                                      \
                    XK_UNROLL for (int i = 0; i < ROWS; i++) p[i] = DOT(p[i], LOADW(wp[i] + c), xq);       \
                }                                                                                          \
                XK_UNROLL for (int i = 0; i < ROWS; i++) {                                                 \
                    int32_t it = 0;                                                                        \
                    for (int64_t c = kv; c < k1; c++) it += (int32_t)wp[i][c] * q[c];                      \
                    const float sc = W->scales[row[i] * ng + g] * s[g];                                    \
                    a[i] = FMADD(CVT(p[i]), SET1(sc), a[i]);                                               \
                    tl[i] += sc * (float)it;                                                               \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
        for (int i = 0; i < rb; i++) y[r + i] = HSUM(a[i]) + tl[i];                                        \
    }

#if XK_X86
#define TGT_AVX512VNNI __attribute__((target("avx512f,avx512bw,avx512vl,fma,avx512vnni")))
static inline TGT_AVX512 __m512i ld32_q16(const int16_t *p) { return _mm512_loadu_si512((const void *)p); }
static inline TGT_AVX512 __m512i ld32_i8(const int8_t *p) {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p));
}
static inline TGT_AVX512 __m512i dot_madd512(__m512i acc, __m512i w, __m512i x) {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(w, x));
}
static inline TGT_AVX512VNNI __m512i dot_vnni512(__m512i acc, __m512i w, __m512i x) { return _mm512_dpwssd_epi32(acc, w, x); }
static inline TGT_AVX2 __m256i ld16_q16(const int16_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline TGT_AVX2 __m256i ld16_i8w(const int8_t *p) { return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)); }
static inline TGT_AVX2 __m256i dot_madd256(__m256i acc, __m256i w, __m256i x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(w, x));
}

static TGT_AVX512VNNI void i8a16_avx512vnni(const wmat *W, const int16_t *q, const float *s, float *y, int64_t r0, int64_t r1) {
    XK_I8A16_BODY(8, __m512i, __m512, 32, ld32_q16, ld32_i8, dot_vnni512, _mm512_setzero_si512, _mm512_setzero_ps,
                  _mm512_cvtepi32_ps, _mm512_fmadd_ps, _mm512_set1_ps, hsum16)
}
static TGT_AVX512 void i8a16_avx512(const wmat *W, const int16_t *q, const float *s, float *y, int64_t r0, int64_t r1) {
    XK_I8A16_BODY(8, __m512i, __m512, 32, ld32_q16, ld32_i8, dot_madd512, _mm512_setzero_si512, _mm512_setzero_ps,
                  _mm512_cvtepi32_ps, _mm512_fmadd_ps, _mm512_set1_ps, hsum16)
}
/* 4 rows: 8 accumulators of 16 ymm registers */
static TGT_AVX2 void i8a16_avx2(const wmat *W, const int16_t *q, const float *s, float *y, int64_t r0, int64_t r1) {
    XK_I8A16_BODY(4, __m256i, __m256, 16, ld16_q16, ld16_i8w, dot_madd256, _mm256_setzero_si256, _mm256_setzero_ps,
                  _mm256_cvtepi32_ps, _mm256_fmadd_ps, _mm256_set1_ps, hsum8)
}

static int vnni_off; /* xk_i8a16_avoid_vnni */

static int have_vnni(void) {
    static int cached = -1;
    if (__atomic_load_n(&vnni_off, __ATOMIC_RELAXED)) return 0;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = xk_isa_supported(XK_ISA_AVX512) && __builtin_cpu_supports("avx512vnni");
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

void xk_i8a16_avoid_vnni(int avoid) {
#if XK_X86
    __atomic_store_n(&vnni_off, avoid != 0, __ATOMIC_RELAXED);
#else
    (void)avoid;
#endif
}

const char *xk_i8a16_name(xk_isa isa) {
#if XK_X86
    if (isa == XK_ISA_AVX512) return have_vnni() ? "avx512 vnni vpdpwssd" : "avx512 pmaddwd";
    if (isa == XK_ISA_AVX2) return "avx2 pmaddwd";
#else
    (void)isa;
#endif
    return "scalar";
}

void xk_matvec_i8a16(xk_isa isa, const wmat *W, const int16_t *q, const float *s, float *y, int64_t r0, int64_t r1) {
    if (r1 <= r0) return;
    if (W->packed) {
        i8a16_scalar(W, q, s, y, r0, r1);
        return;
    }
#if XK_X86
    if (isa == XK_ISA_AVX512) {
        if (have_vnni()) i8a16_avx512vnni(W, q, s, y, r0, r1);
        else i8a16_avx512(W, q, s, y, r0, r1);
        return;
    }
    if (isa == XK_ISA_AVX2) {
        i8a16_avx2(W, q, s, y, r0, r1);
        return;
    }
#else
    (void)isa;
#endif
    i8a16_scalar(W, q, s, y, r0, r1);
}

/* ---- packed int8 weights times int8 inputs (u8 x s8 vpdpbusd) ---- */

int64_t xk_act8_cols(const wmat *W) { return W->n_groups * W->gpad; }

/* One group of len inputs to q (gp bytes, zero past len), its step and 128 * sum(q): the portable
 * reference the vector variants match bit for bit. */
static float act8_group_scalar(const float *x, int64_t len, int64_t gp, int8_t *q, int32_t *corr) {
    float inv;
    const float s = grid_scale(x, len, XK_ACT8_MAX, &inv);
    int32_t sum = 0;
    for (int64_t k = 0; k < len; k++) {
        long v = lrintf(x[k] * inv); /* |x * inv| <= 127 up to rounding; NaN: s is NaN */
        v = v > 127 ? 127 : v < -127 ? -127 : v;
        q[k] = (int8_t)v;
        sum += (int32_t)v;
    }
    for (int64_t k = len; k < gp; k++) q[k] = 0;
    *corr = 128 * sum;
    return s;
}

#if XK_X86
/* The same steps on 16 lanes: max|x| and the finiteness of the group (|x| <= FLT_MAX is false for
 * NaN and infinities), the same fp32 product x * inv rounded to nearest even by vcvtps2dq as
 * lrintf rounds it (NaN converts to INT_MIN and clamps to -127, as lrintf's LONG_MIN does), the
 * same clamp; masked loads for the group's last partial vector. */
static TGT_AVX512 float act8_group_avx512(const float *x, int64_t len, int64_t gp, int8_t *q, int32_t *corr) {
    const __m512 fmax = _mm512_set1_ps(3.40282347e38f);
    __m512 vm = _mm512_setzero_ps();
    __mmask16 fin = 0xffff;
    for (int64_t k = 0; k < len; k += 16) {
        const __mmask16 m = len - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (len - k)) - 1);
        const __m512 a = _mm512_abs_ps(_mm512_maskz_loadu_ps(m, x + k));
        fin &= _mm512_cmp_ps_mask(a, fmax, _CMP_LE_OQ);
        vm = _mm512_max_ps(vm, a);
    }
    const float mx = _mm512_reduce_max_ps(vm);
    const int finite = fin == 0xffff;
    const float inv = finite && mx > 0.0f ? XK_ACT8_MAX / mx : 0.0f;
    const __m512 vi = _mm512_set1_ps(inv);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    __m512i vs = _mm512_setzero_si512();
    for (int64_t k = 0; k < gp; k += 16) {
        const __mmask16 m = k >= len ? 0 : len - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (len - k)) - 1);
        __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + k), vi));
        v = _mm512_maskz_mov_epi32(m, _mm512_min_epi32(_mm512_max_epi32(v, lo), hi));
        vs = _mm512_add_epi32(vs, v);
        const __mmask16 st = gp - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (gp - k)) - 1);
        _mm_mask_storeu_epi8(q + k, st, _mm512_cvtepi32_epi8(v));
    }
    *corr = 128 * _mm512_reduce_add_epi32(vs);
    return finite ? mx / XK_ACT8_MAX : NAN;
}

/* 8 lanes; the int8 bytes go out through a 32-bit lane per half. */
static TGT_AVX2 float act8_group_avx2(const float *x, int64_t len, int64_t gp, int8_t *q, int32_t *corr) {
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), fmax = _mm256_set1_ps(3.40282347e38f);
    const int64_t lv = len / 8 * 8;
    __m256 vm = _mm256_setzero_ps();
    int fin = 1;
    for (int64_t k = 0; k < lv; k += 8) {
        const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + k), absm);
        fin &= _mm256_movemask_ps(_mm256_cmp_ps(a, fmax, _CMP_LE_OQ)) == 0xff;
        vm = _mm256_max_ps(vm, a);
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, vm);
    float mx = 0.0f;
    for (int i = 0; i < 8; i++) mx = lanes[i] > mx ? lanes[i] : mx;
    for (int64_t k = lv; k < len; k++) {
        const float a = fabsf(x[k]);
        fin &= isfinite(a) != 0;
        mx = a > mx ? a : mx;
    }
    const float inv = fin && mx > 0.0f ? XK_ACT8_MAX / mx : 0.0f;
    const __m256 vi = _mm256_set1_ps(inv);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    __m256i vs = _mm256_setzero_si256();
    for (int64_t k = 0; k < lv; k += 8) {
        const __m256i v = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + k), vi)), lo), hi);
        vs = _mm256_add_epi32(vs, v);
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v, v), _mm256_setzero_si256()); /* bytes 0-3 of each half */
        const int32_t b0 = _mm256_extract_epi32(p, 0), b1 = _mm256_extract_epi32(p, 4);
        memcpy(q + k, &b0, 4);
        memcpy(q + k + 4, &b1, 4);
    }
    int32_t lanes_i[8], sum = 0;
    _mm256_storeu_si256((__m256i *)lanes_i, vs);
    for (int i = 0; i < 8; i++) sum += lanes_i[i];
    for (int64_t k = lv; k < len; k++) {
        long v = lrintf(x[k] * inv);
        v = v > 127 ? 127 : v < -127 ? -127 : v;
        q[k] = (int8_t)v;
        sum += (int32_t)v;
    }
    for (int64_t k = len; k < gp; k++) q[k] = 0;
    *corr = 128 * sum;
    return fin ? mx / XK_ACT8_MAX : NAN;
}
#endif

void xk_act8_quantize_isa(xk_isa isa, const wmat *W, const float *x, int64_t n, int8_t *q, float *s, int32_t *corr) {
    const int64_t cols = W->cols, group = W->group, ng = W->n_groups, gp = W->gpad, qc = ng * gp;
#if XK_X86
    float (*grp)(const float *, int64_t, int64_t, int8_t *, int32_t *) =
        isa == XK_ISA_AVX512 ? act8_group_avx512 : isa == XK_ISA_AVX2 ? act8_group_avx2 : act8_group_scalar;
#else
    float (*grp)(const float *, int64_t, int64_t, int8_t *, int32_t *) = act8_group_scalar;
    (void)isa;
#endif
    for (int64_t t = 0; t < n; t++)
        for (int64_t g = 0; g < ng; g++) {
            const int64_t c0 = g * group, len = (c0 + group < cols ? c0 + group : cols) - c0;
            s[t * ng + g] = grp(x + t * cols + c0, len, gp, q + t * qc + g * gp, &corr[t * ng + g]);
        }
}

void xk_act8_quantize(const wmat *W, const float *x, int64_t n, int8_t *q, float *s, int32_t *corr) {
    xk_act8_quantize_isa(xk_isa_best(), W, x, n, q, s, corr);
}

void xk_act8_round(float *x, int64_t n, int64_t cols, int64_t group) { grid_round(x, n, cols, group, XK_ACT8_MAX); }

/* The portable reference: exact dot products per group in uint32 (modulo 2^32, as the vector
 * lanes), then the group's fp32 scale product. */
static void a8_scalar(const wmat *W, const int8_t *q, const float *s, const int32_t *corr, int64_t n, float *y, int64_t ldy,
                      int64_t r0, int64_t r1) {
    const int64_t ng = W->n_groups, gp = W->gpad, qc = ng * gp;
    const uint8_t *wd = W->data;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t b = r / WMAT_PACK_ROWS, i = r % WMAT_PACK_ROWS;
        for (int64_t t = 0; t < n; t++) {
            float acc = 0.0f;
            for (int64_t g = 0; g < ng; g++) {
                const uint8_t *wg = wd + (b * ng + g) * gp * WMAT_PACK_ROWS + i * 4;
                const int8_t *qg = q + t * qc + g * gp;
                uint32_t p = 0;
                for (int64_t k = 0; k < gp; k++) p += (uint32_t)((int32_t)wg[(k >> 2) * 4 * WMAT_PACK_ROWS + (k & 3)] * qg[k]);
                const int32_t d = (int32_t)(p - (uint32_t)corr[t * ng + g]);
                acc += (float)d * (W->scales[(b * ng + g) * WMAT_PACK_ROWS + i] * s[t * ng + g]);
            }
            y[t * ldy + r] = acc;
        }
    }
}

/* The next weights, fetched ahead of the stream: a block's groups are contiguous and blocks follow
 * each other, so this runs on into the next block (a prefetch never faults). The packed layout
 * makes each thread's rows one sequential stream, which this machine's hardware prefetcher
 * alone does not run far enough ahead of: 6 KiB ahead (3 of tinyllama's 16-row blocks) streamed
 * 5-11% faster than 1 KiB, 8-16 KiB about the same as 6 (docs/performance.md, busy machine). */
#define XK_A8_PF 6144
/* Decode at batch 1 (AVX-512 VNNI): a thread's blocks are read as this many streams side by side
 * (where the CPU's row of xk_tune says 8; one stream on Zen 5),
 * as the read ceiling's kernel reads 8: 2 and 4 streams measured 3-8% faster than one stream on a
 * busy machine, 1-3% (median of 11 pairs) on a quiet one; 8 streams then 3-4% faster than 2 (50 of
 * 61 rounds, tinyllama and stories110m from DRAM, 2 threads, interleaved, busy), on a quiet minute
 * the same for tinyllama and 4% faster for stories110m (docs/performance.md).
 * 8 x 3 accumulators fit the 32 vector registers. */
#define XK_A8_STREAMS 8
/* Batched decode without AMX: tokens per pass over a 16-row block (a8_tile512_wide) */
#define XK_A8_WIDE 16
static int a8_wide_off; /* xk_a8_avoid_wide */

#if XK_X86
/* One 16-row block times TB tokens (TB a constant after inlining): two accumulator chains per
 * token (columns k and k + 4) so one token's vpdpbusd do not wait on each other. */
static inline __attribute__((always_inline)) TGT_AVX512VNNI void a8_tile512(const uint8_t *wb, const float *sb, int64_t ng,
                                                                            int64_t gp, const int8_t *q, int64_t qc,
                                                                            const float *s, const int32_t *corr, const int TB,
                                                                            float *out) {
    __m512 f[4];
    for (int j = 0; j < TB; j++) f[j] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *wg = wb + g * gp * WMAT_PACK_ROWS;
        const int8_t *qg = q + g * gp;
        __m512i aa[4], ab[4];
        for (int j = 0; j < TB; j++) aa[j] = _mm512_setzero_si512(), ab[j] = _mm512_setzero_si512();
        int64_t k = 0;
        for (; k + 8 <= gp; k += 8) {
            const __m512i w0 = _mm512_loadu_si512((const void *)(wg + k * WMAT_PACK_ROWS));
            const __m512i w1 = _mm512_loadu_si512((const void *)(wg + k * WMAT_PACK_ROWS + 64));
            XK_PREFETCH(wg + k * WMAT_PACK_ROWS + XK_A8_PF);
            XK_PREFETCH(wg + k * WMAT_PACK_ROWS + 64 + XK_A8_PF);
            for (int j = 0; j < TB; j++) {
                int32_t x0, x1;
                memcpy(&x0, qg + j * qc + k, 4);
                memcpy(&x1, qg + j * qc + k + 4, 4);
                aa[j] = _mm512_dpbusd_epi32(aa[j], w0, _mm512_set1_epi32(x0));
                ab[j] = _mm512_dpbusd_epi32(ab[j], w1, _mm512_set1_epi32(x1));
            }
        }
        if (k < gp) {
            const __m512i w0 = _mm512_loadu_si512((const void *)(wg + k * WMAT_PACK_ROWS));
            for (int j = 0; j < TB; j++) {
                int32_t x0;
                memcpy(&x0, qg + j * qc + k, 4);
                aa[j] = _mm512_dpbusd_epi32(aa[j], w0, _mm512_set1_epi32(x0));
            }
        }
        const __m512 sv = _mm512_loadu_ps(sb + g * WMAT_PACK_ROWS);
        for (int j = 0; j < TB; j++) {
            const __m512i d = _mm512_sub_epi32(_mm512_add_epi32(aa[j], ab[j]), _mm512_set1_epi32(corr[j * ng + g]));
            f[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(sv, _mm512_set1_ps(s[j * ng + g])), f[j]);
        }
    }
    for (int j = 0; j < TB; j++) _mm512_storeu_ps(out + j * WMAT_PACK_ROWS, f[j]);
}

/* vpdpbusd on 8 rows of 4 bytes without VNNI, minus the u8 offset's share: the stored weights
 * (int8 + 128) back to int8 (xor 0x80), pmaddubsw of |w| (unsigned, <= 128) by the inputs
 * carrying w's sign (psignb; |q| <= 127, so negating never overflows), each int16 pair sum <=
 * 2 * 128 * 127 = 32512 (never saturated), and pmaddwd by ones to the 4-byte sums in int32. These
 * are the signed dot products themselves: the kernel does not subtract corr and gets the same
 * int32, so the same bits, as the VNNI kernel; 4 multiplies and ~22% fewer instructions per 64
 * weight bytes than widening both operands to int16 (measured: docs/performance.md). */
static inline TGT_AVX2 __m256i dp4_avx2(__m256i acc, __m256i wa, __m256i ws, __m256i x) {
    const __m256i p = _mm256_maddubs_epi16(wa, _mm256_sign_epi8(x, ws));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}
static inline __attribute__((always_inline)) TGT_AVX2 void a8_tile256(const uint8_t *wb, const float *sb, int64_t ng, int64_t gp,
                                                                      const int8_t *q, int64_t qc, const float *s,
                                                                      const int32_t *corr, const int TB, float *out) {
    (void)corr; /* the signed products need no offset correction (dp4_avx2) */
    const __m256i off = _mm256_set1_epi8((char)0x80);
    __m256 f[4][2];
    for (int j = 0; j < TB; j++) f[j][0] = f[j][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *wg = wb + g * gp * WMAT_PACK_ROWS;
        const int8_t *qg = q + g * gp;
        __m256i a[4][2];
        for (int j = 0; j < TB; j++) a[j][0] = a[j][1] = _mm256_setzero_si256();
        for (int64_t k = 0; k < gp; k += 4) {
            const __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wg + k * WMAT_PACK_ROWS)), off);
            const __m256i w1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wg + k * WMAT_PACK_ROWS + 32)), off);
            const __m256i a0 = _mm256_abs_epi8(w0), a1 = _mm256_abs_epi8(w1);
            XK_PREFETCH(wg + k * WMAT_PACK_ROWS + XK_A8_PF);
            for (int j = 0; j < TB; j++) {
                int32_t x4;
                memcpy(&x4, qg + j * qc + k, 4);
                const __m256i v = _mm256_set1_epi32(x4);
                a[j][0] = dp4_avx2(a[j][0], a0, w0, v);
                a[j][1] = dp4_avx2(a[j][1], a1, w1, v);
            }
        }
        for (int h = 0; h < 2; h++) {
            const __m256 sv = _mm256_loadu_ps(sb + g * WMAT_PACK_ROWS + 8 * h);
            for (int j = 0; j < TB; j++)
                f[j][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[j][h]), _mm256_mul_ps(sv, _mm256_set1_ps(s[j * ng + g])), f[j][h]);
        }
    }
    for (int j = 0; j < TB; j++) {
        _mm256_storeu_ps(out + j * WMAT_PACK_ROWS, f[j][0]);
        _mm256_storeu_ps(out + j * WMAT_PACK_ROWS + 8, f[j][1]);
    }
}

/* Decode at batch 1 (AVX2): a thread's blocks read as this many streams side by side. One stream
 * read 31-35 GB/s of a ~40 GB/s ceiling on a 2-vCPU AMD EPYC (Zen 3; 2 threads, 8 x 23 MB from
 * DRAM, best of 6, three rounds); 2, 3, 4 and 8 streams 1.14-1.17x, 1.16-1.20x, 1.17-1.19x and
 * 0.92-0.97x of it (8 x 2 int32 accumulators and their operands pass AVX2's 16 registers). */
#define XK_A8_STREAMS_AVX2 4

/* One token over S blocks side by side (S a constant after inlining): each block's sums are
 * a8_tile256's for one token (the same int32, the same fp32 steps per group, the group sums kept
 * in `out` between groups), so the bits do not depend on S. */
static inline __attribute__((always_inline)) TGT_AVX2 void a8_tile256_streams(const uint8_t *const *wb, const float *const *sb,
                                                                              int64_t ng, int64_t gp, const int8_t *q,
                                                                              const float *s, const int S, float *out) {
    const __m256i off = _mm256_set1_epi8((char)0x80);
    for (int j = 0; j < S; j++) memset(out + j * WMAT_PACK_ROWS, 0, WMAT_PACK_ROWS * sizeof *out);
    for (int64_t g = 0; g < ng; g++) {
        const int8_t *qg = q + g * gp;
        const int64_t go = g * gp * WMAT_PACK_ROWS;
        __m256i a[XK_A8_STREAMS_AVX2][2];
        for (int j = 0; j < S; j++) a[j][0] = a[j][1] = _mm256_setzero_si256();
        for (int64_t k = 0; k < gp; k += 4) {
            int32_t x4;
            memcpy(&x4, qg + k, 4);
            const __m256i v = _mm256_set1_epi32(x4);
            for (int j = 0; j < S; j++) {
                const uint8_t *wg = wb[j] + go + k * WMAT_PACK_ROWS; /* no software prefetch: the 4 streams ran
                                                                       * 1.07-1.09x without it, 0.93-1.05x with */
                const __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)wg), off);
                const __m256i w1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wg + 32)), off);
                a[j][0] = dp4_avx2(a[j][0], _mm256_abs_epi8(w0), w0, v);
                a[j][1] = dp4_avx2(a[j][1], _mm256_abs_epi8(w1), w1, v);
            }
        }
        for (int j = 0; j < S; j++)
            for (int h = 0; h < 2; h++) {
                float *o = out + j * WMAT_PACK_ROWS + 8 * h;
                const __m256 sv = _mm256_loadu_ps(sb[j] + g * WMAT_PACK_ROWS + 8 * h);
                _mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[j][h]), _mm256_mul_ps(sv, _mm256_set1_ps(s[g])), _mm256_loadu_ps(o)));
            }
    }
}

/* The blocks meeting [r0, r1) (in scope) cut into S equal runs, each call BLOCKS(bj, S) reading
 * blocks bj[0..S) side by side; the blocks left over one at a time. */
#define XK_A8_RUNS(BLOCKS, S)                                                                               \
    const int64_t b0 = r0 / WMAT_PACK_ROWS, nb = (r1 + WMAT_PACK_ROWS - 1) / WMAT_PACK_ROWS - b0;          \
    const int64_t run = nb / (S);                                                                           \
    for (int64_t i = 0; i < run; i++) {                                                                     \
        int64_t bj[S];                                                                                      \
        for (int j = 0; j < (S); j++) bj[j] = b0 + i + j * run;                                             \
        BLOCKS(bj, S);                                                                                      \
    }                                                                                                       \
    for (int64_t i = (S) * run; i < nb; i++) {                                                              \
        const int64_t bj = b0 + i;                                                                          \
        BLOCKS(&bj, 1);                                                                                     \
    }

/* Blocks bj[0..S) (S a constant after inlining) of W for one token through TILE(wb, sb, S, out),
 * only their rows in [r0, r1) stored into y, through a local tile. */
#define XK_A8_BLOCKS_1(TILE, SMAX)                                                                          \
    const int64_t ng = W->n_groups, gp = W->gpad, bsz = ng * gp * WMAT_PACK_ROWS;                          \
    const uint8_t *wb[SMAX];                                                                                \
    const float *sb[SMAX];                                                                                  \
    for (int j = 0; j < S; j++) {                                                                           \
        wb[j] = (const uint8_t *)W->data + bj[j] * bsz;                                                     \
        sb[j] = W->scales + bj[j] * ng * WMAT_PACK_ROWS;                                                    \
    }                                                                                                       \
    float out[SMAX * WMAT_PACK_ROWS];                                                                       \
    TILE;                                                                                                   \
    for (int j = 0; j < S; j++) {                                                                           \
        const int64_t lo = bj[j] * WMAT_PACK_ROWS > r0 ? bj[j] * WMAT_PACK_ROWS : r0;                       \
        const int64_t hi = (bj[j] + 1) * WMAT_PACK_ROWS < r1 ? (bj[j] + 1) * WMAT_PACK_ROWS : r1;           \
        for (int64_t r = lo; r < hi; r++) y[r] = out[j * WMAT_PACK_ROWS + r - bj[j] * WMAT_PACK_ROWS];      \
    }

static inline __attribute__((always_inline)) TGT_AVX2 void a8_blocks_1_avx2(const wmat *W, const int8_t *q, const float *s, float *y,
                                                                            int64_t r0, int64_t r1, const int64_t *bj, const int S) {
    XK_A8_BLOCKS_1(a8_tile256_streams(wb, sb, ng, gp, q, s, S, out), XK_A8_STREAMS_AVX2)
}

/* Decode at batch 1 without VNNI: XK_A8_STREAMS_AVX2 runs of blocks side by side. */
static TGT_AVX2 void a8_avx2_1(const wmat *W, const int8_t *q, const float *s, float *y, int64_t r0, int64_t r1) {
#define XK_A8_B256(bj, S) a8_blocks_1_avx2(W, q, s, y, r0, r1, bj, S)
    XK_A8_RUNS(XK_A8_B256, XK_A8_STREAMS_AVX2)
#undef XK_A8_B256
}

/* Blocks of 16 rows meeting [r0, r1), tokens 4 at a time; the block's results go through a local
 * tile so that only rows in [r0, r1) are stored. */
#define XK_A8_DRIVER(TILE)                                                                                  \
    const int64_t ng = W->n_groups, gp = W->gpad, qc = ng * gp;                                             \
    for (int64_t b = r0 / WMAT_PACK_ROWS; b * WMAT_PACK_ROWS < r1; b++) {                                   \
        const uint8_t *wb = (const uint8_t *)W->data + b * ng * gp * WMAT_PACK_ROWS;                       \
        const float *sb = W->scales + b * ng * WMAT_PACK_ROWS;                                              \
        const int64_t lo = b * WMAT_PACK_ROWS > r0 ? b * WMAT_PACK_ROWS : r0;                               \
        const int64_t hi = (b + 1) * WMAT_PACK_ROWS < r1 ? (b + 1) * WMAT_PACK_ROWS : r1;                   \
        for (int64_t t = 0; t < n; t += 4) {                                                                \
            float out[4 * WMAT_PACK_ROWS];                                                                  \
            const int8_t *qt = q + t * qc;                                                                  \
            const float *st = s + t * ng;                                                                   \
            const int32_t *ct = corr + t * ng;                                                              \
            const int64_t tb = n - t < 4 ? n - t : 4;                                                       \
            if (tb == 1) TILE(wb, sb, ng, gp, qt, qc, st, ct, 1, out);                                      \
            else if (tb == 2) TILE(wb, sb, ng, gp, qt, qc, st, ct, 2, out);                                 \
            else if (tb == 3) TILE(wb, sb, ng, gp, qt, qc, st, ct, 3, out);                                 \
            else TILE(wb, sb, ng, gp, qt, qc, st, ct, 4, out);                                              \
            for (int64_t j = 0; j < tb; j++)                                                                \
                for (int64_t r = lo; r < hi; r++) y[(t + j) * ldy + r] = out[j * WMAT_PACK_ROWS + r - b * WMAT_PACK_ROWS]; \
        }                                                                                                   \
    }

/* One token over S blocks side by side (S a constant after inlining): each block's sums are
 * a8_tile512's for one token (the integer dot products exact, then the same fp32 steps per group),
 * so the bits do not depend on S; the S blocks are S streams through memory. */
static inline __attribute__((always_inline)) TGT_AVX512VNNI void a8_tile512_streams(const uint8_t *const *wb, const float *const *sb,
                                                                                    int64_t ng, int64_t gp, const int8_t *q,
                                                                                    const float *s, const int32_t *corr, const int S,
                                                                                    float *out) {
    __m512 f[XK_A8_STREAMS];
    for (int j = 0; j < S; j++) f[j] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        const int8_t *qg = q + g * gp;
        const int64_t go = g * gp * WMAT_PACK_ROWS;
        __m512i aa[XK_A8_STREAMS], ab[XK_A8_STREAMS];
        for (int j = 0; j < S; j++) aa[j] = _mm512_setzero_si512(), ab[j] = _mm512_setzero_si512();
        int64_t k = 0;
        for (; k + 8 <= gp; k += 8) {
            int32_t x0, x1;
            memcpy(&x0, qg + k, 4);
            memcpy(&x1, qg + k + 4, 4);
            const __m512i b0 = _mm512_set1_epi32(x0), b1 = _mm512_set1_epi32(x1);
            for (int j = 0; j < S; j++) {
                const uint8_t *wg = wb[j] + go + k * WMAT_PACK_ROWS;
                XK_PREFETCH(wg + XK_A8_PF);
                XK_PREFETCH(wg + 64 + XK_A8_PF);
                aa[j] = _mm512_dpbusd_epi32(aa[j], _mm512_loadu_si512((const void *)wg), b0);
                ab[j] = _mm512_dpbusd_epi32(ab[j], _mm512_loadu_si512((const void *)(wg + 64)), b1);
            }
        }
        if (k < gp) {
            int32_t x0;
            memcpy(&x0, qg + k, 4);
            for (int j = 0; j < S; j++)
                aa[j] = _mm512_dpbusd_epi32(aa[j], _mm512_loadu_si512((const void *)(wb[j] + go + k * WMAT_PACK_ROWS)), _mm512_set1_epi32(x0));
        }
        for (int j = 0; j < S; j++) {
            const __m512 sv = _mm512_loadu_ps(sb[j] + g * WMAT_PACK_ROWS);
            const __m512i d = _mm512_sub_epi32(_mm512_add_epi32(aa[j], ab[j]), _mm512_set1_epi32(corr[g]));
            f[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(sv, _mm512_set1_ps(s[g])), f[j]);
        }
    }
    for (int j = 0; j < S; j++) _mm512_storeu_ps(out + j * WMAT_PACK_ROWS, f[j]);
}

/* Blocks bj[0..S) (S a constant after inlining) for one token, side by side. */
static inline __attribute__((always_inline)) TGT_AVX512VNNI void a8_blocks_1(const wmat *W, const int8_t *q, const float *s,
                                                                             const int32_t *corr, float *y, int64_t r0,
                                                                             int64_t r1, const int64_t *bj, const int S) {
    XK_A8_BLOCKS_1(a8_tile512_streams(wb, sb, ng, gp, q, s, corr, S, out), XK_A8_STREAMS)
}

/* Decode at batch 1: the blocks meeting [r0, r1) cut into xk_a8_streams() equal runs read side by
 * side (XK_A8_RUNS: XK_A8_STREAMS, or one stream). */
static TGT_AVX512VNNI void a8_avx512vnni_1(const wmat *W, const int8_t *q, const float *s, const int32_t *corr, float *y,
                                           int64_t r0, int64_t r1) {
#define XK_A8_B512(bj, S) a8_blocks_1(W, q, s, corr, y, r0, r1, bj, S)
    if (xk_a8_streams() == 1) {
        XK_A8_RUNS(XK_A8_B512, 1)
    } else {
        XK_A8_RUNS(XK_A8_B512, XK_A8_STREAMS)
    }
#undef XK_A8_B512
}

/* acc += w (u8) . the 4 signed bytes at x broadcast to every lane: the broadcast as the instruction's
 * memory operand ({1to16}), which gcc 12 does not fold from _mm512_set1_epi32 (a separate
 * vpbroadcastd per product); the same operation. */
#if defined(__GNUC__) && !defined(__clang__)
typedef int32_t xk_i32_any __attribute__((aligned(1), may_alias)); /* 4 bytes anywhere, of any type */
#define XK_DPBUSD_BCAST(acc, w, x) __asm__("vpdpbusd %[m]%{1to16%}, %[wv], %[a]" : [a] "+v"(acc) : [wv] "v"(w), [m] "m"(*(const xk_i32_any *)(const void *)(x)))
#else
#define XK_DPBUSD_BCAST(acc, w, x)                                                                          \
    do {                                                                                                    \
        int32_t x4_;                                                                                        \
        memcpy(&x4_, (x), 4);                                                                               \
        (acc) = _mm512_dpbusd_epi32((acc), (w), _mm512_set1_epi32(x4_));                                    \
    } while (0)
#endif

/* Batched decode without AMX: one 16-row block times TB tokens (5..16, a constant after inlining)
 * in one pass over the block's weights, where a8_tile512 reads them once per 4 tokens. Each 64-byte
 * weight vector (16 rows x 4 columns) is loaded once and feeds TB vpdpbusd, one int32 chain per
 * token (TB independent chains). The integer sums are exact (modulo 2^32, as a8_tile512's two
 * chains a token added), and each group is finished as a8_tile512 finishes it (minus corr, to fp32,
 * times the weight scale times s, one FMA into the token's sum, groups in order), the sums kept in
 * `out` between groups: the same bits. */
static inline __attribute__((always_inline)) TGT_AVX512VNNI void a8_tile512_wide(const uint8_t *wb, const float *sb, int64_t ng,
                                                                                 int64_t gp, const int8_t *q, int64_t qc,
                                                                                 const float *s, const int32_t *corr,
                                                                                 const int TB, float *out) {
    for (int j = 0; j < TB; j++) _mm512_storeu_ps(out + j * WMAT_PACK_ROWS, _mm512_setzero_ps());
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *wg = wb + g * gp * WMAT_PACK_ROWS;
        const int8_t *qg = q + g * gp;
        __m512i a[XK_A8_WIDE];
        for (int j = 0; j < TB; j++) a[j] = _mm512_setzero_si512();
        /* the tokens' inputs through 4 row pointers (tokens 4i..4i+3 at p[i] + 0, qc, 2 qc, 3 qc), so
         * that the addresses fit the general registers (16 pointers did not, and spilled) */
        const int8_t *p[XK_A8_WIDE / 4];
        for (int i = 0; i < (TB + 3) / 4; i++) p[i] = qg + 4 * i * qc;
        const int64_t qc3 = 3 * qc;
        for (int64_t k = 0; k < gp; k += 4) {
            const __m512i w = _mm512_loadu_si512((const void *)(wg + k * WMAT_PACK_ROWS));
            XK_PREFETCH(wg + k * WMAT_PACK_ROWS + XK_A8_PF);
            for (int j = 0; j < TB; j++) {
                const int8_t *pj = p[j / 4] + k;
                const int8_t *xj = j % 4 == 0 ? pj : j % 4 == 1 ? pj + qc : j % 4 == 2 ? pj + 2 * qc : pj + qc3;
                XK_DPBUSD_BCAST(a[j], w, xj);
            }
        }
        const __m512 sv = _mm512_loadu_ps(sb + g * WMAT_PACK_ROWS);
        for (int j = 0; j < TB; j++) {
            const __m512i d = _mm512_sub_epi32(a[j], _mm512_set1_epi32(corr[j * ng + g]));
            const __m512 f = _mm512_loadu_ps(out + j * WMAT_PACK_ROWS);
            _mm512_storeu_ps(out + j * WMAT_PACK_ROWS, _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(sv, _mm512_set1_ps(s[j * ng + g])), f));
        }
    }
}

/* 5..16 tokens: blocks of 16 rows meeting [r0, r1), the tokens in one pass each (a8_tile512_wide);
 * more tokens in slices of 16, a slice of 1..4 left over by a8_tile512. */
static TGT_AVX512VNNI void a8_avx512vnni_wide(const wmat *W, const int8_t *q, const float *s, const int32_t *corr, int64_t n,
                                              float *y, int64_t ldy, int64_t r0, int64_t r1) {
    const int64_t ng = W->n_groups, gp = W->gpad, qc = ng * gp;
    for (int64_t b = r0 / WMAT_PACK_ROWS; b * WMAT_PACK_ROWS < r1; b++) {
        const uint8_t *wb = (const uint8_t *)W->data + b * ng * gp * WMAT_PACK_ROWS;
        const float *sb = W->scales + b * ng * WMAT_PACK_ROWS;
        const int64_t lo = b * WMAT_PACK_ROWS > r0 ? b * WMAT_PACK_ROWS : r0;
        const int64_t hi = (b + 1) * WMAT_PACK_ROWS < r1 ? (b + 1) * WMAT_PACK_ROWS : r1;
        for (int64_t t = 0; t < n; t += XK_A8_WIDE) {
            float out[XK_A8_WIDE * WMAT_PACK_ROWS];
            const int8_t *qt = q + t * qc;
            const float *st = s + t * ng;
            const int32_t *ct = corr + t * ng;
            const int64_t tb = n - t < XK_A8_WIDE ? n - t : XK_A8_WIDE;
            switch (tb) {
            case 1: a8_tile512(wb, sb, ng, gp, qt, qc, st, ct, 1, out); break;
            case 2: a8_tile512(wb, sb, ng, gp, qt, qc, st, ct, 2, out); break;
            case 3: a8_tile512(wb, sb, ng, gp, qt, qc, st, ct, 3, out); break;
            case 4: a8_tile512(wb, sb, ng, gp, qt, qc, st, ct, 4, out); break;
            case 5: a8_tile512_wide(wb, sb, ng, gp, qt, qc, st, ct, 5, out); break;
            case 6: a8_tile512_wide(wb, sb, ng, gp, qt, qc, st, ct, 6, out); break;
            case 7: a8_tile512_wide(wb, sb, ng, gp, qt, qc, st, ct, 7, out); break;
            case 8: a8_tile512_wide(wb, sb, ng, gp, qt, qc, st, ct, 8, out); break;
            case 9: a8_tile512_wide(wb, sb, ng, gp, qt, qc, st, ct, 9, out); break;
            case 10: a8_tile512_wide(wb, sb, ng, gp, qt, qc, st, ct, 10, out); break;
            case 11: a8_tile512_wide(wb, sb, ng, gp, qt, qc, st, ct, 11, out); break;
            case 12: a8_tile512_wide(wb, sb, ng, gp, qt, qc, st, ct, 12, out); break;
            case 13: a8_tile512_wide(wb, sb, ng, gp, qt, qc, st, ct, 13, out); break;
            case 14: a8_tile512_wide(wb, sb, ng, gp, qt, qc, st, ct, 14, out); break;
            case 15: a8_tile512_wide(wb, sb, ng, gp, qt, qc, st, ct, 15, out); break;
            default: a8_tile512_wide(wb, sb, ng, gp, qt, qc, st, ct, 16, out); break;
            }
            for (int64_t j = 0; j < tb; j++)
                for (int64_t r = lo; r < hi; r++) y[(t + j) * ldy + r] = out[j * WMAT_PACK_ROWS + r - b * WMAT_PACK_ROWS];
        }
    }
}

static TGT_AVX512VNNI void a8_avx512vnni(const wmat *W, const int8_t *q, const float *s, const int32_t *corr, int64_t n, float *y,
                                         int64_t ldy, int64_t r0, int64_t r1) {
    if (n == 1) {
        a8_avx512vnni_1(W, q, s, corr, y, r0, r1);
        return;
    }
    if (n >= 5 && !__atomic_load_n(&a8_wide_off, __ATOMIC_RELAXED)) {
        a8_avx512vnni_wide(W, q, s, corr, n, y, ldy, r0, r1);
        return;
    }
    XK_A8_DRIVER(a8_tile512)
}
static TGT_AVX2 void a8_avx2(const wmat *W, const int8_t *q, const float *s, const int32_t *corr, int64_t n, float *y,
                             int64_t ldy, int64_t r0, int64_t r1) {
    if (n == 1) {
        a8_avx2_1(W, q, s, y, r0, r1);
        return;
    }
    XK_A8_DRIVER(a8_tile256)
}
#endif

#if XK_X86
#define XK_AMX_MIN_TOKENS 4 /* fewer tokens: the VNNI kernel (decode at batch 1 is memory-bound there); AMX: cpu_amx.c */
#endif

void xk_a8_avoid_amx(int avoid) { amx_avoid(avoid); }
void xk_share_rows(int64_t rows, int64_t step, int64_t id, int64_t nt, int64_t *r0, int64_t *r1) {
    const int64_t chunks = (rows + step - 1) / step, c0 = chunks * id / nt, c1 = chunks * (id + 1) / nt;
    *r0 = c0 * step < rows ? c0 * step : rows;
    *r1 = c1 * step < rows ? c1 * step : rows;
}

void xk_mm1_avoid_runs(int avoid) { __atomic_store_n(&mm1_runs_off, avoid != 0, __ATOMIC_RELAXED); }
void xk_a8_avoid_wide(int avoid) { __atomic_store_n(&a8_wide_off, avoid != 0, __ATOMIC_RELAXED); }

int xk_a8_amx(void) { return amx_int8_granted(); }

int xk_a8_prefill(xk_isa isa) {
#if XK_X86
    return isa == XK_ISA_AVX512 && (amx_int8_granted() || have_vnni());
#else
    (void)isa;
    return 0;
#endif
}

int xk_a8_streams(void) {
#if XK_X86
    if (xk_isa_best() == XK_ISA_AVX512 && have_vnni()) {
        const int set = __atomic_load_n(&a8_streams_set, __ATOMIC_RELAXED);
        return set == 1 || set == XK_A8_STREAMS ? set : xk_tune_cpu->a8_streams;
    }
    if (xk_isa_supported(XK_ISA_AVX2)) return XK_A8_STREAMS_AVX2;
#endif
    return 1;
}

const char *xk_a8_name(xk_isa isa) {
#if XK_X86
    if (isa == XK_ISA_AVX512 && amx_int8_granted()) return "amx tdpbsud (4+ tokens), avx512 vnni vpdpbusd";
    if (isa == XK_ISA_AVX512 && have_vnni()) return "avx512 vnni vpdpbusd";
    if (isa >= XK_ISA_AVX2 && xk_isa_supported(XK_ISA_AVX2)) return "avx2 pmaddubsw";
#else
    (void)isa;
#endif
    return "scalar";
}

void xk_matmul_a8(xk_isa isa, const wmat *W, const int8_t *q, const float *s, const int32_t *corr, int64_t n, float *y,
                  int64_t ldy, int64_t r0, int64_t r1) {
    if (n <= 0 || r1 <= r0) return;
#if XK_X86
    if (isa == XK_ISA_AVX512 && n >= XK_AMX_MIN_TOKENS && amx_int8_granted()) {
        amx_matmul_a8(W, q, s, corr, n, y, ldy, r0, r1);
        return;
    }
    if (isa == XK_ISA_AVX512 && have_vnni()) {
        a8_avx512vnni(W, q, s, corr, n, y, ldy, r0, r1);
        return;
    }
    if (isa >= XK_ISA_AVX2 && xk_isa_supported(XK_ISA_AVX2)) {
        a8_avx2(W, q, s, corr, n, y, ldy, r0, r1);
        return;
    }
#else
    (void)isa;
#endif
    a8_scalar(W, q, s, corr, n, y, ldy, r0, r1);
}

/* ---- bf16 weights times an exact 3-part bf16 input (vdpbf16ps) ---- */

/* Round to nearest even bf16 (weights_f32_to_bf16 without its NaN branch, so the loop
 * vectorizes: a NaN input gives a NaN part anyway, an infinity inf then NaN parts). */
static inline uint16_t bf16_rne(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static inline float bf16_f32(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* One row of n values into its three parts. */
static void bf16x3_row(const float *x, int64_t n, uint16_t *hi, uint16_t *mid, uint16_t *lo) {
#pragma omp simd
    for (int64_t c = 0; c < n; c++) {
        const uint16_t h = bf16_rne(x[c]);
        const float r1 = x[c] - bf16_f32(h); /* exact: the rounding error of h */
        const uint16_t m = bf16_rne(r1);
        hi[c] = h;
        mid[c] = m;
        lo[c] = bf16_rne(r1 - bf16_f32(m));
    }
}

void xk_bf16_round(float *x, int64_t n, int64_t cols, uint16_t *b) {
    for (int64_t i = 0; i < n * cols; i++) {
        const uint16_t h = weights_f32_to_bf16(x[i]);
        x[i] = weights_bf16_to_f32(h);
        if (b) b[i] = h;
    }
}

void xk_bf16x3_split(const float *x, int64_t n, int64_t cols, uint16_t *p) {
    for (int64_t t = 0; t < n; t++) bf16x3_row(x + t * cols, cols, p + t * 3 * cols, p + t * 3 * cols + cols, p + t * 3 * cols + 2 * cols);
}

void xk_bf16x3_split_planar(const float *x, int64_t n, int64_t cols, int64_t t0, int64_t t1, uint16_t *p) {
    for (int64_t t = t0; t < t1; t++)
        bf16x3_row(x + t * cols, cols, p + t * cols, p + (n + t) * cols, p + (2 * n + t) * cols);
}

#if XK_X86
#define TGT_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,fma,avx512bf16")))
static int have_bf16dp(void) {
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = xk_isa_supported(XK_ISA_AVX512) && __builtin_cpu_supports("avx512bf16");
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}

static inline TGT_AVX512BF16 __m512bh ld_bh(const uint16_t *p) { return (__m512bh)_mm512_loadu_si512((const void *)p); }

/* R rows x T tokens (constants after inlining) from row r: 32 columns per step, three vdpbf16ps
 * per weight vector (hi, mid, lo, in that order), then one horizontal sum and a scalar tail. Rows
 * past rb reuse row r and tokens past tb token 0; neither is stored. */
static inline __attribute__((always_inline)) TGT_AVX512BF16 void bf16x3_tile(const wmat *W, const uint16_t *p, const float *x,
                                                                              int64_t r, int64_t rb, int64_t t, int64_t tb,
                                                                              float *y, int64_t ldy, const int R, const int T) {
    const int64_t cols = W->cols, cv = cols / 32 * 32;
    const uint16_t *wr[8];
    const uint16_t *xp[4];
    for (int i = 0; i < R; i++) wr[i] = (const uint16_t *)W->data + (r + (i < rb ? i : 0)) * cols;
    for (int j = 0; j < T; j++) xp[j] = p + (t + (j < tb ? j : 0)) * 3 * cols;
    const int pf = R == 8 && r + 2 * R <= W->rows; /* one token: the next block of rows into L2 (XK_PREFETCH) */
    __m512 a[8][4];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < T; j++) a[i][j] = _mm512_setzero_ps();
    for (int64_t c = 0; c < cv; c += 32) {
        __m512bh xh[4], xm[4], xl[4];
        for (int j = 0; j < T; j++) xh[j] = ld_bh(xp[j] + c), xm[j] = ld_bh(xp[j] + cols + c), xl[j] = ld_bh(xp[j] + 2 * cols + c);
        if (pf)
            for (int i = 0; i < R; i++) XK_PREFETCH(wr[i] + R * cols + c);
        for (int i = 0; i < R; i++) {
            const __m512bh w = ld_bh(wr[i] + c);
            for (int j = 0; j < T; j++) {
                a[i][j] = _mm512_dpbf16_ps(a[i][j], w, xh[j]);
                a[i][j] = _mm512_dpbf16_ps(a[i][j], w, xm[j]);
                a[i][j] = _mm512_dpbf16_ps(a[i][j], w, xl[j]);
            }
        }
    }
    for (int i = 0; i < rb && i < R; i++)
        for (int j = 0; j < tb && j < T; j++) {
            float tl = 0.0f;
            const float *xt = x + (t + j) * cols;
            for (int64_t c = cv; c < cols; c++) tl += weights_bf16_to_f32(wr[i][c]) * xt[c];
            y[(t + j) * ldy + r + i] = _mm512_reduce_add_ps(a[i][j]) + tl;
        }
}

static TGT_AVX512BF16 void bf16x3_avx512(const wmat *W, const uint16_t *p, const float *x, int64_t n, float *y, int64_t ldy,
                                         int64_t r0, int64_t r1) {
    if (n == 1) {
        for (int64_t r = r0; r < r1; r += 8) bf16x3_tile(W, p, x, r, r1 - r < 8 ? r1 - r : 8, 0, 1, y, ldy, 8, 1);
        return;
    }
    for (int64_t r = r0; r < r1; r += 4) {
        const int64_t rb = r1 - r < 4 ? r1 - r : 4;
        for (int64_t t = 0; t < n; t += 4) {
            const int64_t tb = n - t < 4 ? n - t : 4;
            if (tb == 4) bf16x3_tile(W, p, x, r, rb, t, 4, y, ldy, 4, 4);
            else if (tb == 3) bf16x3_tile(W, p, x, r, rb, t, 3, y, ldy, 4, 3);
            else if (tb == 2) bf16x3_tile(W, p, x, r, rb, t, 2, y, ldy, 4, 2);
            else bf16x3_tile(W, p, x, r, rb, t, 1, y, ldy, 4, 1);
        }
    }
}
#endif

int xk_bf16x3_supported(void) {
#if XK_X86
    return have_bf16dp();
#else
    return 0;
#endif
}

void xk_matmul_bf16x3(xk_isa isa, const wmat *W, const uint16_t *p, const float *x, int64_t n, float *y, int64_t ldy,
                      int64_t r0, int64_t r1) {
    if (n <= 0 || r1 <= r0) return;
#if XK_X86
    if (isa == XK_ISA_AVX512 && W->dtype == XF_BF16 && have_bf16dp()) {
        bf16x3_avx512(W, p, x, n, y, ldy, r0, r1);
        return;
    }
#endif
    (void)p;
    xk_matmul(isa, W, x, n, y, ldy, r0, r1);
}

void xk_dequant_rows(const wmat *W, int64_t r0, int64_t r1, float *dst) {
    const int64_t cols = W->cols;
    for (int64_t r = r0; r < r1; r++) {
        float *d = dst + (r - r0) * cols;
        if (W->dtype == XF_FP32) {
            memcpy(d, (const float *)W->data + r * cols, (size_t)cols * sizeof(float));
        } else if (W->dtype == XF_BF16) {
            const uint16_t *s = (const uint16_t *)W->data + r * cols;
#pragma omp simd
            for (int64_t c = 0; c < cols; c++) {
                uint32_t u = (uint32_t)s[c] << 16;
                float f;
                memcpy(&f, &u, 4);
                d[c] = f;
            }
        } else if (W->dtype == XF_FP16) {
            const uint16_t *s = (const uint16_t *)W->data + r * cols;
            for (int64_t c = 0; c < cols; c++) d[c] = weights_f16_to_f32(s[c]);
        } else if (W->packed) { /* one row of a 16-row block: 4 bytes of every 64 */
            const int64_t ng = W->n_groups, gp = W->gpad, i = r % WMAT_PACK_ROWS;
            const uint8_t *blk = (const uint8_t *)W->data + (r / WMAT_PACK_ROWS) * ng * gp * WMAT_PACK_ROWS;
            const float *sb = W->scales + (r / WMAT_PACK_ROWS) * ng * WMAT_PACK_ROWS;
            for (int64_t g = 0; g < ng; g++) {
                const int64_t c0 = g * W->group, c1 = c0 + W->group < cols ? c0 + W->group : cols;
                const uint8_t *wg = blk + g * gp * WMAT_PACK_ROWS + i * 4;
                const float k = sb[g * WMAT_PACK_ROWS + i];
                for (int64_t c = c0; c < c1; c++) {
                    const int64_t kk = c - c0;
                    d[c] = (float)((int)wg[(kk >> 2) * 4 * WMAT_PACK_ROWS + (kk & 3)] - 128) * k;
                }
            }
        } else {
            const int8_t *s = (const int8_t *)W->data + r * cols;
            const float *sc = W->scales + r * W->n_groups;
            for (int64_t g = 0; g < W->n_groups; g++) {
                int64_t c0 = g * W->group, c1 = c0 + W->group < cols ? c0 + W->group : cols;
                float k = sc[g];
#pragma omp simd
                for (int64_t c = c0; c < c1; c++) d[c] = (float)s[c] * k;
            }
        }
    }
}

/* ---- element-wise and small kernels ---- */

void xk_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * inv * w[i];
}

void xk_rope_table(float *cos_t, float *sin_t, int64_t pos, int64_t head_dim, double theta) {
    int64_t half = head_dim / 2;
    for (int64_t i = 0; i < half; i++) {
        double inv = pow(theta, -2.0 * (double)i / (double)head_dim);
        double a = (double)pos * inv;
        cos_t[i] = (float)cos(a);
        sin_t[i] = (float)sin(a);
    }
}

void xk_rope_table_freqs(float *cos_t, float *sin_t, int64_t pos, const double *inv_freq, int64_t half, double scale) {
    for (int64_t i = 0; i < half; i++) {
        double a = (double)pos * inv_freq[i];
        cos_t[i] = scale == 1.0 ? (float)cos(a) : (float)(cos(a) * scale);
        sin_t[i] = scale == 1.0 ? (float)sin(a) : (float)(sin(a) * scale);
    }
}

void xk_rope(float *v, int64_t n_heads, int64_t head_dim, const float *cos_t, const float *sin_t) {
    int64_t half = head_dim / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *a = v + h * head_dim, *b = a + half;
#pragma omp simd
        for (int64_t i = 0; i < half; i++) {
            float x0 = a[i], x1 = b[i];
            a[i] = x0 * cos_t[i] - x1 * sin_t[i];
            b[i] = x1 * cos_t[i] + x0 * sin_t[i];
        }
    }
}

#if XK_X86
/* fp16 <-> fp32 with F16C, 8 at a time; the hardware rounds to nearest even like
 * weights_f32_to_f16, so both paths store the same bits. */
static TGT_AVX2 void f16_load_f16c(float *dst, const uint16_t *s, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) dst[i] = weights_f16_to_f32(s[i]);
}
static TGT_AVX2 void f16_store_f16c(uint16_t *d, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) d[i] = weights_f32_to_f16(src[i]);
}
#endif

/* 1 when the F16C path may be used; decided once (relaxed atomics: every thread computes the
 * same answer). */
static int have_f16c(void) {
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        v = xk_isa_supported(XK_ISA_AVX2);
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}

void xk_store(void *dst, xf_dtype dtype, const float *src, int64_t n) {
#if XK_X86
    if (dtype == XF_FP16 && have_f16c()) {
        f16_store_f16c(dst, src, n);
        return;
    }
#endif
    if (dtype == XF_FP32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (dtype == XF_BF16) {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = weights_f32_to_bf16(src[i]);
    } else {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = weights_f32_to_f16(src[i]);
    }
}

void xk_load(float *dst, const void *src, xf_dtype dtype, int64_t n) {
#if XK_X86
    if (dtype == XF_FP16 && have_f16c()) {
        f16_load_f16c(dst, src, n);
        return;
    }
#endif
    if (dtype == XF_FP32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (dtype == XF_BF16) {
        const uint16_t *s = src;
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)s[i] << 16;
            float f;
            memcpy(&f, &u, 4);
            dst[i] = f;
        }
    } else {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = weights_f16_to_f32(s[i]);
    }
}

/* SwiGLU without overflow and with exp only of -|g| <= 0 (the vector exp of cpu_simd.h):
 * sigmoid(g) = 1 / (1 + e) for g >= 0 and e / (1 + e) for g < 0, with e = exp(-|g|). The scalar
 * form serves the portable path and the vector tails; the three give the same value to a few ulp. */
static inline float silu_mul(float g, float u) {
    const float e = exp_le0(-fabsf(g));
    return g * ((g >= 0.0f ? 1.0f : e) / (1.0f + e)) * u;
}

#if XK_X86
static TGT_AVX2 void swiglu_avx2(float *h, const float *g, const float *u, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    const __m256 sign = _mm256_set1_ps(-0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 gv = _mm256_loadu_ps(g + i);
        const __m256 e = exp8_le0(_mm256_or_ps(gv, sign)); /* -|g| */
        const __m256 num = _mm256_blendv_ps(e, one, _mm256_cmp_ps(gv, zero, _CMP_GE_OQ));
        const __m256 sig = _mm256_div_ps(num, _mm256_add_ps(one, e));
        _mm256_storeu_ps(h + i, _mm256_mul_ps(_mm256_mul_ps(gv, sig), _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) h[i] = silu_mul(g[i], u[i]);
}
static TGT_AVX512 void swiglu_avx512(float *h, const float *g, const float *u, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 gv = _mm512_loadu_ps(g + i);
        const __m512 e = exp16_le0(_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(gv), _mm512_set1_epi32(INT32_MIN))));
        const __mmask16 pos = _mm512_cmp_ps_mask(gv, _mm512_setzero_ps(), _CMP_GE_OQ);
        const __m512 sig = _mm512_div_ps(_mm512_mask_blend_ps(pos, e, one), _mm512_add_ps(one, e));
        _mm512_storeu_ps(h + i, _mm512_mul_ps(_mm512_mul_ps(gv, sig), _mm512_loadu_ps(u + i)));
    }
    for (; i < n; i++) h[i] = silu_mul(g[i], u[i]);
}
#endif

void xk_swiglu_isa(xk_isa isa, float *h, const float *g, const float *u, int64_t n) {
#if XK_X86
    if (isa == XK_ISA_AVX512) {
        swiglu_avx512(h, g, u, n);
        return;
    }
    if (isa == XK_ISA_AVX2) {
        swiglu_avx2(h, g, u, n);
        return;
    }
#else
    (void)isa;
#endif
    for (int64_t i = 0; i < n; i++) h[i] = silu_mul(g[i], u[i]);
}

void xk_swiglu(float *h, const float *g, const float *u, int64_t n) {
    static int cached = -1; /* xk_isa_best, decided once (relaxed: every thread finds the same) */
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        v = (int)xk_isa_best();
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    xk_swiglu_isa((xk_isa)v, h, g, u, n);
}

void xk_add(float *y, const float *x, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

int64_t xk_argmax(const float *v, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

void xk_geglu(float *h, const float *g, const float *u, int64_t n) {
    const double k = 0.7978845608028654; /* sqrt(2 / pi) */
    for (int64_t i = 0; i < n; i++) {
        const double x = g[i];
        h[i] = (float)(0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)))) * u[i];
    }
}
