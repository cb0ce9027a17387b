/* Each CPU kernel against straight loops (in double) or hand-computed values; every vectorized
 * variant this CPU runs against the scalar fallback. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "reference_model/cpu_kernels.h"
#include "reference_model/weights.h"
#include "tests/test_wmat.h"

/* y (n_max, ldy) after a kernel wrote tokens [0, n), rows [r0, r1): the sentinel -12345 untouched
 * elsewhere, and each value within float accumulation error (1e-5 of the sum of |terms|) of the
 * double product of W with x (n, W->cols). */
static void check_vs_double(const wmat *W, const float *x, int64_t n, int64_t n_max, const float *y, int64_t ldy, int64_t r0,
                            int64_t r1, const char *what) {
    for (int64_t t = 0; t < n_max; t++)
        for (int64_t r = 0; r < ldy; r++) {
            if (t >= n || r < r0 || r >= r1) {
                cr_assert_eq(y[t * ldy + r], -12345.0f, "%s wrote outside at t=%lld r=%lld", what, (long long)t, (long long)r);
                continue;
            }
            double want = 0, mag = 0;
            for (int64_t c = 0; c < W->cols; c++) {
                const double pr = (double)weights_get(W, r, c) * x[t * W->cols + c];
                want += pr;
                mag += fabs(pr);
            }
            cr_assert(fabs(y[t * ldy + r] - want) <= 1e-5 * mag + 1e-7, "%s n=%lld row %lld tok %lld: %.8g vs %.8g", what,
                      (long long)n, (long long)r, (long long)t, y[t * ldy + r], want);
        }
}

/* n 1..n_max tokens (n_max 9: the 4 x 4 blocks, whole and partial; 40: past the 31 rows a step
 * gives the own kernels) */
static void check_matmul_n(xf_dtype dt, int64_t rows, int64_t cols, int group, int64_t n_max) {
    wmat W = make_wmat(dt, rows, cols, group, 17);
    uint32_t s = 3;
    const int64_t r0 = 3, r1 = rows - 2, ldy = rows + 3;
    float *x = malloc((size_t)(n_max * cols) * sizeof(float));
    for (int64_t i = 0; i < n_max * cols; i++) x[i] = frand(&s);
    float *y = malloc((size_t)(n_max * ldy) * sizeof(float)), *ys = malloc((size_t)(n_max * ldy) * sizeof(float));
    for (int64_t n = 1; n <= n_max; n++) {
        for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
            if (!xk_isa_supported((xk_isa)isa)) continue;
            for (int64_t i = 0; i < n_max * ldy; i++) y[i] = -12345.0f; /* sentinel */
            xk_matmul((xk_isa)isa, &W, x, n, y, ldy, r0, r1);
            for (int64_t t = 0; t < n_max; t++) {
                for (int64_t r = 0; r < ldy; r++) {
                    float got = y[t * ldy + r];
                    if (t >= n || r < r0 || r >= r1) {
                        cr_assert_eq(got, -12345.0f, "%s n=%lld: wrote outside rows [%lld,%lld) at t=%lld r=%lld",
                                     xk_isa_name((xk_isa)isa), (long long)n, (long long)r0, (long long)r1, (long long)t, (long long)r);
                        continue;
                    }
                    double want = 0, mag = 0;
                    for (int64_t c = 0; c < cols; c++) {
                        double p = (double)weights_get(&W, r, c) * x[t * cols + c];
                        want += p;
                        mag += fabs(p);
                    }
                    /* float accumulation of `cols` terms: error << 1e-5 of the sum of |terms| */
                    cr_assert(fabs(got - want) <= 1e-5 * mag + 1e-7, "%s %s n=%lld row %lld tok %lld: %.8g vs %.8g",
                              xk_isa_name((xk_isa)isa), dtype_name(dt), (long long)n, (long long)r, (long long)t, got, want);
                }
            }
        }
        /* unquantized weights: a token's result does not depend on the batch it is computed in */
        if (dt != XF_INT8) {
            for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
                if (!xk_isa_supported((xk_isa)isa)) continue;
                xk_matmul((xk_isa)isa, &W, x, n, y, ldy, r0, r1);
                for (int64_t t = 0; t < n; t++) {
                    xk_matmul((xk_isa)isa, &W, x + t * cols, 1, ys, ldy, r0, r1);
                    for (int64_t r = r0; r < r1; r++)
                        cr_assert_eq(y[t * ldy + r], ys[r], "%s %s: token %lld of %lld differs from it alone at row %lld",
                                     xk_isa_name((xk_isa)isa), dtype_name(dt), (long long)t, (long long)n, (long long)r);
                }
            }
        }
        /* bf16: the vdpbf16ps kernel on the 3-part input (where this CPU has it; else xk_matmul), the
         * same bound against double, and each token's result independent of its batch */
        if (dt == XF_BF16) {
            cr_log_info("bf16x3 vdpbf16ps here: %d", xk_bf16x3_supported());
            uint16_t *p = malloc((size_t)(n * 3 * cols) * sizeof(uint16_t));
            xk_bf16x3_split(x, n, cols, p);
            for (int64_t i = 0; i < n * cols; i++) {
                const int64_t t = i / cols, c = i % cols;
                const float sum = weights_bf16_to_f32(p[t * 3 * cols + c]) + weights_bf16_to_f32(p[t * 3 * cols + cols + c]) +
                                  weights_bf16_to_f32(p[t * 3 * cols + 2 * cols + c]);
                cr_assert_eq(sum, x[i], "3-part split of x[%lld] not exact", (long long)i);
            }
            for (int64_t i = 0; i < n_max * ldy; i++) y[i] = -12345.0f;
            xk_matmul_bf16x3(xk_isa_best(), &W, p, x, n, y, ldy, r0, r1);
            check_vs_double(&W, x, n, n_max, y, ldy, r0, r1, "bf16x3");
            for (int64_t t = 0; t < n; t++) {
                xk_matmul_bf16x3(xk_isa_best(), &W, p + t * 3 * cols, x + t * cols, 1, ys, ldy, r0, r1);
                for (int64_t r = r0; r < r1; r++)
                    cr_assert_eq(y[t * ldy + r], ys[r], "bf16x3: token %lld of %lld differs from it alone at row %lld", (long long)t,
                                 (long long)n, (long long)r);
            }
            free(p);
            /* rounded inputs (xk_bf16_round): values and bits agree, each within 2^-8 of x */
            float *xr = malloc((size_t)(n * cols) * sizeof(float));
            uint16_t *b = malloc((size_t)(n * cols) * sizeof(uint16_t));
            memcpy(xr, x, (size_t)(n * cols) * sizeof(float));
            xk_bf16_round(xr, n, cols, b);
            for (int64_t i = 0; i < n * cols; i++) {
                cr_assert_eq(weights_bf16_to_f32(b[i]), xr[i], "bits and values of the rounded x differ at %lld", (long long)i);
                cr_assert(fabsf(xr[i] - x[i]) <= fabsf(x[i]) * 0x1p-8f, "x[%lld] rounded by more than 2^-8 of itself", (long long)i);
            }
            free(xr);
            free(b);
        }
        /* the vectorized variant against the scalar fallback */
        xk_matmul(XK_ISA_SCALAR, &W, x, n, ys, ldy, r0, r1);
        xk_matmul(xk_isa_best(), &W, x, n, y, ldy, r0, r1);
        for (int64_t t = 0; t < n; t++)
            for (int64_t r = r0; r < r1; r++)
                cr_assert(fabsf(y[t * ldy + r] - ys[t * ldy + r]) <= 1e-5f, "best vs scalar at %lld,%lld", (long long)t, (long long)r);
    }
    free(x);
    free(y);
    free(ys);
    free(W.data);
    free(W.scales);
}
static void check_matmul(xf_dtype dt, int64_t rows, int64_t cols, int group) { check_matmul_n(dt, rows, cols, group, 9); }

Test(cpu_kernels, matmul_fp32) { check_matmul(XF_FP32, 37, 200, 0); }
Test(cpu_kernels, matmul_bf16) { check_matmul(XF_BF16, 37, 200, 0); }
Test(cpu_kernels, matmul_fp16) { check_matmul(XF_FP16, 37, 200, 0); }
Test(cpu_kernels, matmul_int8_group128) { check_matmul(XF_INT8, 37, 200, 128); } /* groups of 128 and 72 */
Test(cpu_kernels, matmul_int8_group32) { check_matmul(XF_INT8, 21, 96, 32); }
Test(cpu_kernels, matmul_int8_odd_group) { check_matmul(XF_INT8, 9, 61, 24); } /* vector + scalar tail per group */
Test(cpu_kernels, matmul_tiny) { check_matmul(XF_BF16, 6, 7, 0); }           /* narrower than one vector */
Test(cpu_kernels, matmul_bf16_wide) { check_matmul(XF_BF16, 29, 32 * 9 + 5, 0); } /* vdpbf16ps steps + a tail */
/* every batch a decode step gives the own kernels (up to 31 tokens, and past it), rows of several
 * hundred columns with a vector and scalar tail */
Test(cpu_kernels, matmul_fp32_batches) { check_matmul_n(XF_FP32, 13, 256 * 2 + 48 + 5, 0, 40); }
Test(cpu_kernels, matmul_bf16_batches) { check_matmul_n(XF_BF16, 13, 256 * 2 + 48 + 5, 0, 40); }
Test(cpu_kernels, matmul_fp16_batches) { check_matmul_n(XF_FP16, 11, 256 + 16, 0, 36); }

/* 1..20 tokens over 64+ rows read them as runs side by side (XK_MM1_RUNS_MIN: 8 runs for one
 * token, 4 for more): each row's value within the double bound, nothing written outside [r0, r1),
 * the same bits as blocks of adjacent rows (xk_mm1_avoid_runs), per ISA, and each token the bits it
 * has alone (up to 16 tokens a slice, then a second); ranges of 64 rows (runs of 8 or 16, none left
 * over), 189 (runs and rows left over) and 63 (below the threshold). */
static void check_mm1_runs(xf_dtype dt, int64_t nrow, int64_t cols) {
    const int64_t r0 = 3, r1 = r0 + nrow, rows = r1 + 2, ldy = rows;
    wmat W = make_wmat(dt, rows, cols, 0, 23);
    uint32_t sd = 5;
    const int64_t nm = 20;
    float *x = malloc((size_t)(nm * cols) * sizeof(float)), *y = malloc((size_t)(nm * ldy) * sizeof(float));
    float *yb = malloc((size_t)(nm * ldy) * sizeof(float)), *y1 = malloc((size_t)ldy * sizeof(float));
    for (int64_t i = 0; i < nm * cols; i++) x[i] = frand(&sd);
    for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
        if (!xk_isa_supported((xk_isa)isa)) continue;
        for (int64_t n = 1; n <= nm; n++) {
            for (int64_t i = 0; i < nm * ldy; i++) y[i] = yb[i] = -12345.0f;
            xk_matmul((xk_isa)isa, &W, x, n, y, ldy, r0, r1);
            xk_mm1_avoid_runs(1);
            xk_matmul((xk_isa)isa, &W, x, n, yb, ldy, r0, r1);
            xk_mm1_avoid_runs(0);
            check_vs_double(&W, x, n, nm, y, ldy, r0, r1, "runs");
            for (int64_t i = 0; i < nm * ldy; i++)
                cr_assert_eq(y[i], yb[i], "%s %s, %lld rows, %lld tokens: runs %.9g, adjacent blocks %.9g at %lld", xk_isa_name((xk_isa)isa),
                             dtype_name(dt), (long long)nrow, (long long)n, y[i], yb[i], (long long)i);
            for (int64_t t = 0; t < n; t++) {
                xk_matmul((xk_isa)isa, &W, x + t * cols, 1, y1, ldy, r0, r1);
                for (int64_t r = r0; r < r1; r++)
                    cr_assert_eq(y[t * ldy + r], y1[r], "%s %s: token %lld of %lld differs from it alone at row %lld", xk_isa_name((xk_isa)isa),
                                 dtype_name(dt), (long long)t, (long long)n, (long long)r);
            }
        }
    }
    free(x), free(y), free(yb), free(y1), free(W.data), free(W.scales);
}

/* The threads' shares of rows tile [0, rows) in order, each starting on a chunk boundary. */
Test(cpu_kernels, share_rows_tile_the_rows) {
    const int64_t cases[][3] = {{11264, 16, 2}, {2048, 16, 3}, {37, 16, 4}, {5, 16, 8}, {100, 64, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int64_t rows = cases[k][0], step = cases[k][1], nt = cases[k][2];
        int64_t next = 0;
        for (int64_t id = 0; id < nt; id++) {
            int64_t r0, r1;
            xk_share_rows(rows, step, id, nt, &r0, &r1);
            cr_assert(r0 == next && r1 >= r0 && (r0 % step == 0 || r0 == rows), "%lld rows, step %lld, thread %lld of %lld: [%lld, %lld)",
                      (long long)rows, (long long)step, (long long)id, (long long)nt, (long long)r0, (long long)r1);
            next = r1;
        }
        cr_assert_eq(next, rows, "%lld rows: the shares end at %lld", (long long)rows, (long long)next);
    }
}

Test(cpu_kernels, mm1_runs_fp32) { check_mm1_runs(XF_FP32, 189, 200); }
Test(cpu_kernels, mm1_runs_bf16) { check_mm1_runs(XF_BF16, 64, 32 * 9 + 5); }
Test(cpu_kernels, mm1_runs_fp16) { check_mm1_runs(XF_FP16, 189, 96); }
Test(cpu_kernels, mm1_runs_bf16_below_threshold) { check_mm1_runs(XF_BF16, 63, 40); }

/* bf16 weights widen to fp32 exactly and in column order, so every kernel computes the same sums as
 * on the same values held in fp32: bit for bit, at 1 (8-row blocks), 2 and 3-16 tokens (4 x 4
 * blocks), rows not a multiple of a block, columns with a vector and a scalar tail. A widening that
 * put a value in another lane (or the wrong value) changes the sums' order or terms. */
Test(cpu_kernels, matmul_bf16_widens_as_fp32) {
    const int64_t rows = 29, cols = 16 * 13 + 5, r0 = 1, r1 = rows - 3, n_max = 6;
    wmat B = make_wmat(XF_BF16, rows, cols, 0, 23), F = make_wmat(XF_FP32, rows, cols, 0, 1);
    for (int64_t i = 0; i < rows * cols; i++) ((float *)F.data)[i] = weights_bf16_to_f32(((const uint16_t *)B.data)[i]);
    uint32_t s = 11;
    float *x = malloc((size_t)(n_max * cols) * sizeof(float));
    float *yb = malloc((size_t)(n_max * rows) * sizeof(float)), *yf = malloc((size_t)(n_max * rows) * sizeof(float));
    for (int64_t i = 0; i < n_max * cols; i++) x[i] = frand(&s);
    for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
        if (!xk_isa_supported((xk_isa)isa)) continue;
        for (int64_t n = 1; n <= n_max; n++) {
            xk_matmul((xk_isa)isa, &B, x, n, yb, rows, r0, r1);
            xk_matmul((xk_isa)isa, &F, x, n, yf, rows, r0, r1);
            for (int64_t t = 0; t < n; t++)
                for (int64_t r = r0; r < r1; r++)
                    cr_assert_eq(yb[t * rows + r], yf[t * rows + r], "%s n=%lld: bf16 %.9g vs fp32 %.9g at token %lld row %lld",
                                 xk_isa_name((xk_isa)isa), (long long)n, yb[t * rows + r], yf[t * rows + r], (long long)t, (long long)r);
        }
    }
    free(x), free(yb), free(yf), free(B.data), free(F.data);
}

/* int8 weights times the 16-bit grid: every variant against straight loops in double on the grid
 * values (each product exact), and against the float kernel fed the same grid values. */
static void check_i8a16(int64_t rows, int64_t cols, int group) {
    wmat W = make_wmat(XF_INT8, rows, cols, group, 29);
    uint32_t sd = 11;
    float *x = malloc((size_t)cols * sizeof(float)), *xr = malloc((size_t)cols * sizeof(float));
    int16_t *q = malloc((size_t)cols * sizeof(int16_t));
    float *s = malloc((size_t)W.n_groups * sizeof(float));
    for (int64_t c = 0; c < cols; c++) x[c] = frand(&sd) * (c % 7 == 0 ? 4.0f : 1.0f);
    xk_act16_quantize(x, cols, group, q, s);
    memcpy(xr, x, (size_t)cols * sizeof(float));
    xk_act16_round(xr, 1, cols, group);
    for (int64_t c = 0; c < cols; c++) {
        const int64_t g = c / group;
        cr_assert_eq(xr[c], (float)q[c] * s[g], "round and quantize disagree at %lld", (long long)c);
        /* half a step, plus the float rounding of x / s at a tie */
        cr_assert(fabsf(xr[c] - x[c]) <= 0.5f * s[g] + 4.0f * fabsf(x[c]) * FLT_EPSILON, "grid error at %lld: %.9g vs %.9g (step %g, q %d)", (long long)c, xr[c],
                  x[c], s[g], q[c]);
    }
    float *y = malloc((size_t)rows * sizeof(float)), *yf = malloc((size_t)rows * sizeof(float));
    xk_matmul(XK_ISA_SCALAR, &W, xr, 1, yf, rows, 0, rows);
    for (int v = 0; v < XK_ISA_COUNT + 1; v++) { /* every ISA, then AVX-512 without VNNI */
        const xk_isa isa = v < XK_ISA_COUNT ? (xk_isa)v : XK_ISA_AVX512;
        if (!xk_isa_supported(isa)) continue;
        xk_i8a16_avoid_vnni(v == XK_ISA_COUNT);
        cr_log_info("int8 grid kernel: %s", xk_i8a16_name(isa));
        for (int64_t r = 0; r < rows; r++) y[r] = -12345.0f;
        xk_matvec_i8a16(isa, &W, q, s, y, 1, rows - 1);
        xk_i8a16_avoid_vnni(0);
        cr_assert_eq(y[0], -12345.0f, "%s wrote row 0", xk_i8a16_name(isa));
        cr_assert_eq(y[rows - 1], -12345.0f, "%s wrote the last row", xk_i8a16_name(isa));
        for (int64_t r = 1; r < rows - 1; r++) {
            double want = 0, mag = 0;
            for (int64_t c = 0; c < cols; c++) {
                double p = (double)weights_get(&W, r, c) * xr[c];
                want += p;
                mag += fabs(p);
            }
            cr_assert(fabs(y[r] - want) <= 1e-6 * mag + 1e-9, "%s row %lld: %.9g vs %.9g", xk_i8a16_name(isa),
                      (long long)r, y[r], want);
            cr_assert(fabs(y[r] - yf[r]) <= 2e-6 * mag + 1e-9, "%s row %lld vs the float kernel: %.9g vs %.9g",
                      xk_i8a16_name(isa), (long long)r, y[r], yf[r]);
        }
    }
    free(x), free(xr), free(q), free(s), free(y), free(yf), free(W.data), free(W.scales);
}

Test(cpu_kernels, int8_grid_group128) { check_i8a16(37, 2048 + 128 + 72, 128); } /* last group 72: vector + tail */
Test(cpu_kernels, int8_grid_group32) { check_i8a16(21, 96, 32); }
Test(cpu_kernels, int8_grid_odd_group) { check_i8a16(9, 61, 24); }   /* no full vector in a group */
Test(cpu_kernels, int8_grid_big_group) { check_i8a16(5, 1300, 1300); } /* one group over several int32 spans */

/* Packed int8 weights times int8 inputs (xk_matmul_a8): the packing keeps every value and scale;
 * every variant against exact dot products in double on the grid values, over partial row ranges
 * and 1..9 tokens; and the whole scheme against the double product of the unquantized inputs,
 * within its stated bound. */
static void check_a8(int64_t rows, int64_t cols, int group, float xscale) {
    wmat W = make_wmat(XF_INT8, rows, cols, group, 41);
    float *before = malloc((size_t)(rows * cols) * sizeof(float));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) before[r * cols + c] = weights_get(&W, r, c);
    cr_assert_eq(weights_pack_int8(&W), XF_OK);
    cr_assert(W.packed && W.gpad % 4 == 0 && W.gpad >= (group < cols ? group : cols));
    float *drow = malloc((size_t)cols * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        xk_dequant_rows(&W, r, r + 1, drow);
        for (int64_t c = 0; c < cols; c++) {
            cr_assert_eq(weights_get(&W, r, c), before[r * cols + c], "packing changed (%lld, %lld)", (long long)r, (long long)c);
            cr_assert_eq(drow[c], before[r * cols + c], "packed dequant differs at (%lld, %lld)", (long long)r, (long long)c);
        }
    }
    const int64_t n_max = 9, r0 = 3, r1 = rows - 2, ldy = rows + 3, qc = xk_act8_cols(&W), ng = W.n_groups;
    uint32_t sd = 7;
    float *x = malloc((size_t)(n_max * cols) * sizeof(float)), *xr = malloc((size_t)(n_max * cols) * sizeof(float));
    for (int64_t i = 0; i < n_max * cols; i++) x[i] = frand(&sd) * xscale * (i % 5 == 0 ? 3.0f : 1.0f);
    int8_t *q = malloc((size_t)(n_max * qc));
    float *s = malloc((size_t)(n_max * ng) * sizeof(float));
    int32_t *corr = malloc((size_t)(n_max * ng) * sizeof(int32_t));
    xk_act8_quantize(&W, x, n_max, q, s, corr);
    memcpy(xr, x, (size_t)(n_max * cols) * sizeof(float));
    xk_act8_round(xr, n_max, cols, group);
    for (int64_t t = 0; t < n_max; t++)
        for (int64_t g = 0; g < ng; g++) {
            int32_t sum = 0;
            for (int64_t k = 0; k < W.gpad; k++) {
                const int64_t c = g * group + k;
                const int8_t v = q[t * qc + g * W.gpad + k];
                sum += v;
                if (k >= group || c >= cols) {
                    cr_assert_eq(v, 0, "padding of group %lld not zero", (long long)g);
                    continue;
                }
                cr_assert_eq(xr[t * cols + c], (float)v * s[t * ng + g], "round and quantize disagree at %lld", (long long)c);
                cr_assert(fabsf(xr[t * cols + c] - x[t * cols + c]) <= 0.5f * s[t * ng + g] * (1.0f + 1e-5f), "grid error at %lld",
                          (long long)c);
            }
            cr_assert_eq(corr[t * ng + g], 128 * sum);
        }
    float *y = malloc((size_t)(n_max * ldy) * sizeof(float));
    double worst_rel = 0;
    for (int64_t n = 1; n <= n_max; n++) {
        for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
            if (!xk_isa_supported((xk_isa)isa)) continue;
            for (int64_t i = 0; i < n_max * ldy; i++) y[i] = -12345.0f;
            xk_matmul_a8((xk_isa)isa, &W, q, s, corr, n, y, ldy, r0, r1);
            for (int64_t t = 0; t < n_max; t++)
                for (int64_t r = 0; r < ldy; r++) {
                    const float got = y[t * ldy + r];
                    if (t >= n || r < r0 || r >= r1) {
                        cr_assert_eq(got, -12345.0f, "%s n=%lld wrote outside at t=%lld r=%lld", xk_a8_name((xk_isa)isa),
                                     (long long)n, (long long)t, (long long)r);
                        continue;
                    }
                    double want = 0, mag = 0, exact = 0, bound = 0;
                    for (int64_t c = 0; c < cols; c++) {
                        const double w = weights_get(&W, r, c), p = w * xr[t * cols + c];
                        want += p;
                        mag += fabs(p);
                        exact += w * x[t * cols + c];
                        bound += fabs(w) * 0.5 * s[t * ng + c / group];
                    }
                    /* on the grid: exact int32 per group, one fp32 product and sum per group */
                    cr_assert(fabs(got - want) <= 1e-6 * mag + 1e-9, "%s n=%lld row %lld tok %lld: %.9g vs %.9g",
                              xk_a8_name((xk_isa)isa), (long long)n, (long long)r, (long long)t, got, want);
                    /* the scheme: half a step per input at most, times |w| (stated in docs/record.md) */
                    cr_assert(fabs(got - exact) <= bound * (1.0 + 1e-5) + 1e-6 * mag + 1e-9,
                              "%s row %lld: %.9g vs exact %.9g beyond the bound %.3g", xk_a8_name((xk_isa)isa), (long long)r, got,
                              exact, bound);
                    const double ex_mag = mag > 0 ? mag : 1;
                    if (fabs(got - exact) / ex_mag > worst_rel) worst_rel = fabs(got - exact) / ex_mag;
                }
        }
    }
    cr_log_info("a8 %lldx%lld group %d (%s): worst |y - exact| / sum|w x| = %.3g", (long long)rows, (long long)cols, group,
                xk_a8_name(xk_isa_best()), worst_rel);
    free(before), free(drow), free(x), free(xr), free(q), free(s), free(corr), free(y), free(W.data), free(W.scales);
}

Test(cpu_kernels, a8_group128) { check_a8(37, 2048 + 128 + 72, 128, 1.0f); } /* 3 row blocks, last one partial */
Test(cpu_kernels, a8_group32) { check_a8(21, 96, 32, 1.0f); }
Test(cpu_kernels, a8_odd_group) { check_a8(9, 61, 22, 1.0f); }          /* gpad 24: columns padded in every group */
Test(cpu_kernels, a8_group_over_cols) { check_a8(18, 100, 65536, 50.0f); } /* one group, gpad 100 */
Test(cpu_kernels, a8_streams) { check_a8(16 * 9 + 3, 256, 128, 1.0f); } /* every variant's runs side by side */

/* The extremes every kernel must hold without saturating: weights -128 and 127 (an int8 file
 * may hold -128), inputs at +-127, so each pair of products is 2 * 128 * 127 in magnitude; every
 * variant against the exact product in double (a saturated int16 pair would be off by ~2^15
 * quanta), within float rounding of the per-group sums. */
Test(cpu_kernels, a8_extremes_do_not_saturate) {
    const int64_t rows = 32, cols = 256;
    wmat W = make_wmat(XF_INT8, rows, cols, 128, 5);
    int8_t *v = W.data;
    for (int64_t i = 0; i < rows * cols; i++) v[i] = (i / cols) % 3 == 0 ? -128 : (i / cols) % 3 == 1 ? 127 : (i % 2 ? -128 : 127);
    int8_t *w0 = malloc((size_t)(rows * cols));
    memcpy(w0, v, (size_t)(rows * cols));
    cr_assert_eq(weights_pack_int8(&W), XF_OK);
    const int64_t qc = xk_act8_cols(&W), ng = W.n_groups;
    float x[2 * 256];
    for (int64_t i = 0; i < 2 * cols; i++) x[i] = (i / 7) % 2 ? -1.0f : 1.0f; /* q = +-127 */
    int8_t *q = malloc((size_t)(2 * qc));
    float s[2 * 2], y[2 * 32];
    int32_t corr[2 * 2];
    xk_act8_quantize(&W, x, 2, q, s, corr);
    for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
        if (!xk_isa_supported((xk_isa)isa)) continue;
        xk_matmul_a8((xk_isa)isa, &W, q, s, corr, 2, y, rows, 0, rows);
        for (int64_t t = 0; t < 2; t++)
            for (int64_t r = 0; r < rows; r++) {
                double want = 0, mag = 0;
                for (int64_t g = 0; g < ng; g++) {
                    int64_t dot = 0;
                    for (int64_t k = 0; k < 128; k++) dot += (int64_t)w0[r * cols + g * 128 + k] * q[t * qc + g * W.gpad + k];
                    const double ws = W.scales[weights_scale_index(&W, r, g * 128)];
                    want += ws * s[t * ng + g] * (double)dot;
                    mag += fabs(ws * s[t * ng + g]) * 128.0 * 127.0 * 128.0;
                }
                cr_assert(fabs(y[t * rows + r] - want) <= 1e-6 * mag, "%s: token %lld row %lld: %.9g, exact %.9g",
                          xk_a8_name((xk_isa)isa), (long long)t, (long long)r, y[t * rows + r], want);
            }
    }
    free(w0);
    free(q), free(W.data), free(W.scales);
}

/* The AMX tile path (4+ tokens, where the CPU and OS allow it) gives the VNNI kernel's bits, the
 * VNNI kernel's one pass of 5..16 tokens (a8_tile512_wide) the bits of its passes of 4, and every
 * token's result is the same whatever batch it is computed in (1..20 tokens: tile rows 4..16 and a
 * second tile of tokens; one wide pass, then a slice of 1..4 tokens). */
static void check_a8_batches(int64_t rows, int64_t cols, int group) {
    wmat W = make_wmat(XF_INT8, rows, cols, group, 77);
    cr_assert_eq(weights_pack_int8(&W), XF_OK);
    const int64_t n_max = 20, qc = xk_act8_cols(&W), ng = W.n_groups;
    uint32_t sd = 19;
    float *x = malloc((size_t)(n_max * cols) * sizeof(float));
    for (int64_t i = 0; i < n_max * cols; i++) x[i] = frand(&sd);
    int8_t *q = malloc((size_t)(n_max * qc));
    float *s = malloc((size_t)(n_max * ng) * sizeof(float)), *y = malloc((size_t)(n_max * rows) * sizeof(float));
    float *y1 = malloc((size_t)rows * sizeof(float)), *yv = malloc((size_t)(n_max * rows) * sizeof(float));
    float *y4 = malloc((size_t)(n_max * rows) * sizeof(float));
    int32_t *corr = malloc((size_t)(n_max * ng) * sizeof(int32_t));
    xk_act8_quantize(&W, x, n_max, q, s, corr);
    cr_log_info("a8 AMX here: %d (%s)", xk_a8_amx(), xk_a8_name(xk_isa_best()));
    for (int64_t n = 1; n <= n_max; n++) {
        xk_matmul_a8(xk_isa_best(), &W, q, s, corr, n, y, rows, 1, rows);
        xk_a8_avoid_amx(1);
        xk_matmul_a8(xk_isa_best(), &W, q, s, corr, n, yv, rows, 1, rows);
        xk_a8_avoid_wide(1);
        xk_matmul_a8(xk_isa_best(), &W, q, s, corr, n, y4, rows, 1, rows);
        xk_a8_avoid_wide(0);
        xk_a8_avoid_amx(0);
        for (int64_t t = 0; t < n; t++) {
            for (int64_t r = 1; r < rows; r++)
                cr_assert_eq(yv[t * rows + r], y4[t * rows + r], "n=%lld tok %lld row %lld: one pass %.9g, passes of 4 %.9g", (long long)n,
                             (long long)t, (long long)r, yv[t * rows + r], y4[t * rows + r]);
            xk_matmul_a8(xk_isa_best(), &W, q + t * qc, s + t * ng, corr + t * ng, 1, y1, rows, 1, rows);
            for (int64_t r = 1; r < rows; r++) {
                cr_assert_eq(y[t * rows + r], yv[t * rows + r], "n=%lld tok %lld row %lld: tiles %.9g, vnni %.9g", (long long)n,
                             (long long)t, (long long)r, y[t * rows + r], yv[t * rows + r]);
                cr_assert_eq(y[t * rows + r], y1[r], "n=%lld: token %lld differs from it alone at row %lld", (long long)n, (long long)t,
                             (long long)r);
            }
        }
    }
    free(x), free(q), free(s), free(y), free(y1), free(yv), free(y4), free(corr), free(W.data), free(W.scales);
}

Test(cpu_kernels, a8_batches_group128) { check_a8_batches(35, 384, 128); } /* K tiles of 64 */
Test(cpu_kernels, a8_batches_odd_group) { check_a8_batches(20, 70, 22); }  /* gpad 24: K tiles of 8 */
Test(cpu_kernels, a8_batches_group32_wide) { check_a8_batches(16 * 3 + 5, 32 * 9 + 12, 32); } /* 10 groups, the last short */
/* 10 blocks of 16 rows: one token reads them as runs side by side (XK_A8_RUNS: 2 runs of 4 and 2
 * left over on AVX2, 1 run of 8 and 2 left over with VNNI), the same bits as in a batch */
Test(cpu_kernels, a8_batches_streams) { check_a8_batches(16 * 9 + 3, 256, 128); }

/* Decode at batch 1 reads a call's row blocks as several streams side by side (XK_A8_STREAMS, or
 * one stream where the CPU's choice says so; both are run): a row's bits do not depend on the range
 * it is computed in (one call, block by block, cuts at rows inside blocks: how threads split the
 * rows) nor on the streams, they equal the 2-token kernel's, and every range stores its rows only.
 * Groups of 20 leave a 4-column step at the end of each group. */
static void check_a8_streams(int64_t rows, int64_t cols, int group) {
    wmat W = make_wmat(XF_INT8, rows, cols, group, 53);
    cr_assert_eq(weights_pack_int8(&W), XF_OK);
    const int64_t qc = xk_act8_cols(&W), ng = W.n_groups;
    uint32_t sd = 23;
    float *x = malloc((size_t)(2 * cols) * sizeof(float));
    for (int64_t i = 0; i < 2 * cols; i++) x[i] = frand(&sd);
    int8_t *q = malloc((size_t)(2 * qc));
    float *s = malloc((size_t)(2 * ng) * sizeof(float));
    int32_t *corr = malloc((size_t)(2 * ng) * sizeof(int32_t));
    float *ya = malloc((size_t)rows * sizeof(float)), *yb = malloc((size_t)rows * sizeof(float));
    float *y2 = malloc((size_t)(2 * rows) * sizeof(float));
    xk_act8_quantize(&W, x, 2, q, s, corr);
    const xk_isa isa = xk_isa_best();
    xk_a8_avoid_amx(1);
    xk_matmul_a8(isa, &W, q, s, corr, 2, y2, rows, 0, rows);
    xk_a8_avoid_amx(0);
    static const int streams[2] = {1, 8};
    for (int si = 0; si < 2; si++) {
        xk_a8_set_streams(streams[si]);
        xk_matmul_a8(isa, &W, q, s, corr, 1, ya, rows, 0, rows);
        for (int64_t r = 0; r < rows; r++)
            cr_assert_eq(ya[r], y2[r], "%d streams, row %lld: batch 1 %.9g, token 0 of 2 %.9g", xk_a8_streams(), (long long)r, ya[r], y2[r]);
        const int64_t cuts[][4] = {{0, 16, 32, 48}, {0, 5, 21, 70}, {0, 3, 77, 100}, {0, 1, 2, 17}};
        for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
            for (int64_t r = 0; r < rows; r++) yb[r] = -12345.0f;
            int64_t r0 = 0;
            for (int i = 1; r0 < rows; i++) { /* ranges at the cuts, then 16-row pieces to the end */
                const int64_t r1 = i < 4 && cuts[k][i] < rows ? cuts[k][i] : r0 + 16 < rows ? r0 + 16 : rows;
                xk_matmul_a8(isa, &W, q, s, corr, 1, yb, rows, r0, r1);
                for (int64_t r = r1; r < rows; r++) cr_assert_eq(yb[r], -12345.0f, "range [%lld, %lld) wrote row %lld", (long long)r0, (long long)r1, (long long)r);
                r0 = r1;
            }
            for (int64_t r = 0; r < rows; r++)
                cr_assert_eq(yb[r], ya[r], "cuts %zu row %lld: %.9g vs one call %.9g", k, (long long)r, yb[r], ya[r]);
        }
    }
    xk_a8_set_streams(0);
    free(x), free(q), free(s), free(corr), free(ya), free(yb), free(y2), free(W.data), free(W.scales);
}

Test(cpu_kernels, a8_streams_group128) { check_a8_streams(16 * 11 + 7, 384, 128); } /* 12 blocks, the last partial */
Test(cpu_kernels, a8_streams_group20) { check_a8_streams(16 * 5, 100, 20); }        /* gpad 20: a 4-column step per group */
Test(cpu_kernels, a8_streams_runs) { check_a8_streams(16 * 19 + 5, 256, 64); } /* 20 blocks: runs of every stream, blocks left over, the last partial */

/* The extreme: 65536 columns of 127 times inputs all at 127: 127 * 127 * 65536 ~ 1.06e9 in int32,
 * with (127 + 128) * 127 * 65536 ~ 2.12e9 before the correction. */
Test(cpu_kernels, a8_int32_extreme) {
    const int64_t rows = 16, cols = 65536;
    wmat W = make_wmat(XF_INT8, rows, cols, 65536, 3);
    float *ones = malloc((size_t)cols * sizeof(float)), *x = malloc((size_t)cols * sizeof(float));
    for (int64_t c = 0; c < cols; c++) ones[c] = 1.0f, x[c] = 2.0f; /* weights 127 * (1 / 127) */
    for (int64_t r = 0; r < rows; r++) weights_set_rows(&W, r, 1, ones);
    cr_assert_eq(weights_pack_int8(&W), XF_OK);
    int8_t *q = malloc((size_t)xk_act8_cols(&W));
    float s;
    int32_t corr;
    xk_act8_quantize(&W, x, 1, q, &s, &corr);
    cr_assert(q[0] == 127 && q[cols - 1] == 127 && corr == 128 * 127 * 65536);
    float y[16];
    for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
        if (!xk_isa_supported((xk_isa)isa)) continue;
        xk_matmul_a8((xk_isa)isa, &W, q, &s, &corr, 1, y, rows, 0, rows);
        for (int64_t r = 0; r < rows; r++) /* 65536 * 1 * 2 */
            cr_assert(fabsf(y[r] - 131072.0f) <= 131072.0f * 1e-6f, "%s row %lld: %.9g", xk_a8_name((xk_isa)isa), (long long)r, y[r]);
    }
    free(ones), free(x), free(q), free(W.data), free(W.scales);
}

Test(cpu_kernels, a8_grid_hand_computed_and_non_finite) {
    /* one group of 4, max |x| = 2 -> step 2 / 127: 1.0 -> 63.5 -> 64 (ties to even), -2 -> -127, 0.5 -> 31.75 -> 32 */
    wmat W = make_wmat(XF_INT8, 1, 4, 4, 9);
    cr_assert_eq(weights_pack_int8(&W), XF_OK);
    float x[4] = {1.0f, -2.0f, 0.0f, 0.5f}, s;
    int8_t q[4];
    int32_t corr;
    xk_act8_quantize(&W, x, 1, q, &s, &corr);
    cr_assert_float_eq(s, 2.0f / 127.0f, 1e-12);
    cr_assert(q[0] == 64 && q[1] == -127 && q[2] == 0 && q[3] == 32, "q %d %d %d %d", q[0], q[1], q[2], q[3]);
    cr_assert_eq(corr, 128 * (64 - 127 + 32));
    float bad[4] = {1.0f, INFINITY, 2.0f, 3.0f};
    xk_act8_quantize(&W, bad, 1, q, &s, &corr);
    cr_assert(isnan(s), "a group with inf gets a NaN scale");
    float y = 0;
    xk_matmul_a8(xk_isa_best(), &W, q, &s, &corr, 1, &y, 1, 0, 1);
    cr_assert(isnan(y), "and the result is NaN, as in fp32");
    xk_act8_round(bad, 1, 4, 2);
    cr_assert(isnan(bad[0]) && isnan(bad[1]) && bad[3] == 3.0f);
    free(W.data), free(W.scales);
}

/* The input quantization's vector variants give the scalar reference's bits: q (padding
 * included), s and corr, over full and partial vectors per group, an all-zero group, a group with
 * NaN, one with an infinity, values that round to +-127 and ties. */
static void check_act8_isas(int64_t cols, int group) {
    wmat W = make_wmat(XF_INT8, 16, cols, group, 5);
    cr_assert_eq(weights_pack_int8(&W), XF_OK);
    const int64_t n = 3, qc = xk_act8_cols(&W), ng = W.n_groups;
    float *x = malloc((size_t)(n * cols) * sizeof(float));
    uint32_t seed = 17;
    for (int64_t i = 0; i < n * cols; i++) x[i] = frand(&seed) * (i % 7 == 0 ? 40.0f : 1.0f);
    for (int64_t c = 0; c < group && c < cols; c++) x[cols + c] = 0.0f; /* token 1, group 0: zeros */
    if (ng > 1) x[cols + group + 1] = NAN;                               /* token 1, group 1 */
    if (ng > 2) x[2 * cols + 2 * group] = -INFINITY;                     /* token 2, group 2 */
    x[2 * cols + 1] = 0.5f, x[2 * cols + 2] = 1.0f;                      /* with max 1.0 below: ties */
    x[2 * cols + 3] = -1.0f;
    int8_t *q0 = malloc((size_t)(n * qc)), *q1 = malloc((size_t)(n * qc));
    float *s0 = malloc((size_t)(n * ng) * sizeof(float)), *s1 = malloc((size_t)(n * ng) * sizeof(float));
    int32_t *c0 = malloc((size_t)(n * ng) * sizeof(int32_t)), *c1 = malloc((size_t)(n * ng) * sizeof(int32_t));
    xk_act8_quantize_isa(XK_ISA_SCALAR, &W, x, n, q0, s0, c0);
    for (int isa = 1; isa < XK_ISA_COUNT; isa++) {
        if (!xk_isa_supported((xk_isa)isa)) continue;
        memset(q1, 0x55, (size_t)(n * qc));
        xk_act8_quantize_isa((xk_isa)isa, &W, x, n, q1, s1, c1);
        cr_assert(memcmp(q0, q1, (size_t)(n * qc)) == 0, "%s: q differs from the scalar reference", xk_isa_name((xk_isa)isa));
        cr_assert(memcmp(s0, s1, (size_t)(n * ng) * sizeof(float)) == 0, "%s: s differs", xk_isa_name((xk_isa)isa));
        cr_assert(memcmp(c0, c1, (size_t)(n * ng) * sizeof(int32_t)) == 0, "%s: corr differs", xk_isa_name((xk_isa)isa));
    }
    cr_assert(s0[ng] == 0.0f && c0[ng] == 0, "the zero group: step 0, sum 0");
    if (ng > 1) cr_assert(isnan(s0[ng + 1]), "the NaN group: NaN step");
    if (ng > 2) cr_assert(isnan(s0[2 * ng + 2]), "the infinite group: NaN step");
    xk_act8_quantize(&W, x, n, q1, s1, c1); /* the best variant: the same bits */
    cr_assert(memcmp(q0, q1, (size_t)(n * qc)) == 0);
    free(x), free(q0), free(q1), free(s0), free(s1), free(c0), free(c1), free(W.data), free(W.scales);
}
Test(cpu_kernels, act8_quantize_variants_group128) { check_act8_isas(2048 + 128 + 72, 128); } /* last group 72 */
Test(cpu_kernels, act8_quantize_variants_odd_group) { check_act8_isas(61, 22); }              /* gpad 24, tails */
Test(cpu_kernels, act8_quantize_variants_wide_group) { check_act8_isas(300, 300); }           /* one group, 3 lanes short */

/* Setting rows of a packed matrix stores what setting them before packing does. */
Test(cpu_kernels, a8_set_rows_packed) {
    wmat A = make_wmat(XF_INT8, 19, 70, 32, 12), B = make_wmat(XF_INT8, 19, 70, 32, 12);
    cr_assert_eq(weights_pack_int8(&B), XF_OK);
    uint32_t sd = 5;
    float row[70];
    for (int c = 0; c < 70; c++) row[c] = frand(&sd);
    weights_set_rows(&A, 17, 1, row);
    weights_set_rows(&B, 17, 1, row);
    cr_assert_eq(weights_pack_int8(&A), XF_OK);
    cr_assert_eq(memcmp(A.data, B.data, (size_t)weights_packed_values_bytes(19, 70, 32)), 0);
    cr_assert_eq(memcmp(A.scales, B.scales, (size_t)weights_packed_scales_bytes(19, 70, 32)), 0);
    cr_assert_eq(weights_packed_values_bytes(19, 70, 32), 32 * 3 * 32);
    free(A.data), free(A.scales), free(B.data), free(B.scales);
}

Test(cpu_kernels, act16_grid_hand_computed_and_non_finite) {
    /* max |x| = 2 -> step 2 / 32767; 1.0 -> 16383.5 -> 16384 (ties to even), -2 -> -32767, 0 -> 0 */
    float x[4] = {1.0f, -2.0f, 0.0f, 0.5f}, s[2];
    int16_t q[4];
    xk_act16_quantize(x, 4, 4, q, s);
    cr_assert_float_eq(s[0], 2.0f / 32767.0f, 1e-12);
    cr_assert_eq(q[0], 16384);
    cr_assert_eq(q[1], -32767);
    cr_assert_eq(q[2], 0);
    cr_assert_eq(q[3], 8192); /* 8191.75 */
    float z[3] = {0.0f, 0.0f, 0.0f};
    xk_act16_quantize(z, 3, 4, q, s);
    cr_assert(s[0] == 0.0f && q[0] == 0 && q[2] == 0, "an all-zero group maps to zero");
    float bad[4] = {1.0f, INFINITY, 2.0f, 3.0f};
    xk_act16_quantize(bad, 4, 2, q, s);
    cr_assert(isnan(s[0]), "a group with inf gets a NaN scale, so the result is NaN as in fp32");
    cr_assert_float_eq(s[1], 3.0f / 32767.0f, 1e-12);
    xk_act16_round(bad, 1, 4, 2);
    cr_assert(isnan(bad[0]) && isnan(bad[1]) && bad[3] == 3.0f);
}

Test(cpu_kernels, isa_names_and_best) {
    cr_assert_str_eq(xk_isa_name(XK_ISA_SCALAR), "scalar");
    cr_assert(xk_isa_supported(XK_ISA_SCALAR));
    cr_assert(xk_isa_supported(xk_isa_best()));
    cr_log_info("best ISA here: %s", xk_isa_name(xk_isa_best()));
}

Test(cpu_kernels, dequant_rows) {
    wmat W = make_wmat(XF_INT8, 4, 40, 16, 5);
    float d[2 * 40];
    xk_dequant_rows(&W, 1, 3, d);
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 40; c++) cr_assert_eq(d[r * 40 + c], weights_get(&W, r + 1, c));
    free(W.data);
    free(W.scales);
}

Test(cpu_kernels, int8_quantization_hand_computed) {
    /* one group of 4: max |w| = 1.27 -> scale 0.01; 0.5 -> 50, -0.333 -> -33, 1.27 -> 127 */
    float row[4] = {0.5f, -1.27f, -0.333f, 1.27f};
    int8_t q[4];
    float sc;
    wmat W = {XF_INT8, 1, 4, 4, 1, q, &sc, 0, 0, 0};
    weights_set_rows(&W, 0, 1, row);
    cr_assert_float_eq(sc, 0.01f, 1e-7);
    cr_assert_eq(q[0], 50);
    cr_assert_eq(q[1], -127);
    cr_assert_eq(q[2], -33);
    cr_assert_eq(q[3], 127);
}

Test(cpu_kernels, half_conversions) {
    cr_assert_eq(weights_f32_to_f16(1.0f), 0x3c00);
    cr_assert_eq(weights_f32_to_f16(-2.0f), 0xc000);
    cr_assert_eq(weights_f32_to_f16(65504.0f), 0x7bff);       /* largest half */
    cr_assert_eq(weights_f32_to_f16(65520.0f), 0x7c00);       /* rounds to infinity */
    cr_assert_eq(weights_f32_to_f16(ldexpf(1.0f, -24)), 0x0001); /* smallest subnormal */
    cr_assert_eq(weights_f32_to_f16(ldexpf(1.0f, -25)), 0x0000); /* tie to even: 0 */
    cr_assert_eq(weights_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00); /* tie to even: 1.0 */
    cr_assert_eq(weights_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02); /* tie to even: up */
    cr_assert_eq(weights_f16_to_f32(0x3555), 0.333251953125f);  /* 1/3 in half */
    cr_assert_eq(weights_f16_to_f32(0x0001), ldexpf(1.0f, -24));
    cr_assert(isinf(weights_f16_to_f32(0xfc00)) && weights_f16_to_f32(0xfc00) < 0);
    /* bf16: 1/3 = 0x3eaaaaab -> 0x3eab (rounded up); ties to even */
    cr_assert_eq(weights_f32_to_bf16(1.0f / 3.0f), 0x3eab);
    uint32_t u = 0x3f808000u, v = 0x3f818000u;
    float fu, fv;
    memcpy(&fu, &u, 4);
    memcpy(&fv, &v, 4);
    cr_assert_eq(weights_f32_to_bf16(fu), 0x3f80);
    cr_assert_eq(weights_f32_to_bf16(fv), 0x3f82);
    cr_assert_eq(weights_bf16_to_f32(0x4049), 3.140625f);
    for (int i = -300; i <= 300; i++) { /* every value a half holds exactly round-trips */
        float f = (float)i / 64.0f;
        cr_assert_eq(weights_f16_to_f32(weights_f32_to_f16(f)), f);
    }
}

Test(cpu_kernels, rmsnorm_hand_computed) {
    /* x = [3, 4]: mean of squares 12.5, rms 3.5355339; w = [1, 2] -> [0.8485281, 2.2627417] */
    float x[2] = {3, 4}, w[2] = {1, 2}, y[2];
    xk_rmsnorm(y, x, w, 2, 1e-12f);
    cr_assert_float_eq(y[0], 0.8485281f, 1e-6);
    cr_assert_float_eq(y[1], 2.2627417f, 1e-6);
}

Test(cpu_kernels, rope_rotate_half_hand_computed) {
    /* head_dim 4, pos 1, theta 1e4: angles 1 and 1e4^-0.5 = 0.01. Pairs (v0, v2) and (v1, v3):
     * v0' = 1 cos 1 - 3 sin 1 = 0.5403023 - 2.5244130 = -1.9841107
     * v2' = 3 cos 1 + 1 sin 1 = 1.6209069 + 0.8414710 = 2.4623779
     * v1' = 2 cos .01 - 4 sin .01 = 1.9999000 - 0.0399993 = 1.9599007
     * v3' = 4 cos .01 + 2 sin .01 = 3.9998000 + 0.0199997 = 4.0197997 */
    float v[8] = {1, 2, 3, 4, 1, 2, 3, 4}, c[2], s[2];
    xk_rope_table(c, s, 1, 4, 10000.0);
    xk_rope(v, 2, 4, c, s);
    const float want[4] = {-1.9841107f, 1.9599007f, 2.4623779f, 4.0197997f};
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++) cr_assert_float_eq(v[h * 4 + i], want[i], 2e-6, "head %d elem %d: %g", h, i, v[h * 4 + i]);
    /* position 0 is the identity */
    float z[4] = {1, 2, 3, 4};
    xk_rope_table(c, s, 0, 4, 10000.0);
    xk_rope(z, 1, 4, c, s);
    cr_assert_eq(z[0], 1.0f);
    cr_assert_eq(z[3], 4.0f);
}

/* Every SwiGLU variant against silu(g) * u in double over g in [-100, 100] (both tails of the
 * sigmoid, exact zeros, vector bodies and scalar tails), and NaN in, NaN out. */
Test(cpu_kernels, swiglu_variants_against_double) {
    enum { N = 203 }; /* 12 AVX-512 vectors + 11 tail elements */
    float g[N], u[N], h[N];
    uint32_t sd = 5;
    for (int i = 0; i < N; i++) {
        g[i] = i < 20 ? (float)(i - 10) * 10.0f : frand(&sd) * 12.0f; /* -100 .. 90, then [-12, 12) */
        u[i] = frand(&sd) + 1.5f;
    }
    g[7] = 0.0f;
    g[N - 1] = NAN;
    for (int isa = 0; isa < XK_ISA_COUNT; isa++) {
        if (!xk_isa_supported((xk_isa)isa)) continue;
        xk_swiglu_isa((xk_isa)isa, h, g, u, N);
        for (int i = 0; i < N - 1; i++) {
            const double want = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
            /* a few ulp of the exp and the divide; below g = -87 the tail saturates at
             * g * exp(-87) * u: |error| < 100 * 1.7e-38 * 2.5 */
            cr_assert(fabs(h[i] - want) <= 1e-6 * fabs(want) + 1e-35, "%s g=%g: %.9g vs %.9g", xk_isa_name((xk_isa)isa),
                      g[i], h[i], want);
        }
        cr_assert(isnan(h[N - 1]), "%s: NaN in gives NaN out", xk_isa_name((xk_isa)isa));
    }
}

Test(cpu_kernels, swiglu_add_argmax) {
    /* silu(1) = 1 / (1 + e^-1) = 0.7310586; times 2 = 1.4621172; silu(0) * 5 = 0 */
    float g[2] = {1, 0}, u[2] = {2, 5}, h[2];
    xk_swiglu(h, g, u, 2);
    cr_assert_float_eq(h[0], 1.4621172f, 1e-6);
    cr_assert_eq(h[1], 0.0f);
    float y[3] = {1, 2, 3}, x[3] = {0.5f, -2, 1};
    xk_add(y, x, 3);
    cr_assert_eq(y[0], 1.5f);
    cr_assert_eq(y[1], 0.0f);
    cr_assert_eq(y[2], 4.0f);
    float v[5] = {1, 7, 3, 7, -1};
    cr_assert_eq(xk_argmax(v, 5), 1, "first of the tied maxima");
}

Test(cpu_kernels, kv_store_load_roundtrip) {
    float src[3] = {1.5f, -0.25f, 3.0f}, back[3];
    uint16_t h[3];
    xk_store(h, XF_FP16, src, 3);
    cr_assert_eq(h[0], 0x3e00); /* 1.5 = 0x3e00 in half */
    xk_load(back, h, XF_FP16, 3);
    cr_assert_arr_eq(back, src, sizeof src);
    xk_store(h, XF_BF16, src, 3);
    cr_assert_eq(h[0], 0x3fc0); /* 1.5 = 0x3fc00000 */
    xk_load(back, h, XF_BF16, 3);
    cr_assert_arr_eq(back, src, sizeof src);
}

Test(cpu_kernels, fp16_store_matches_scalar_rounding) {
    /* xk_store may use F16C; it must store exactly what weights_f32_to_f16 (round to nearest
     * even) stores, subnormals and ties included. */
    enum { N = 4099 };
    static float src[N];
    static uint16_t got[N];
    static float back[N];
    uint32_t s = 77;
    for (int i = 0; i < N; i++) {
        float m = frand(&s);
        src[i] = i % 3 == 0 ? m * 1e-6f : i % 3 == 1 ? m * 3.0f : m * 70000.0f; /* subnormal, normal, overflow */
    }
    src[0] = 1.0f + ldexpf(1.0f, -11); /* a tie */
    xk_store(got, XF_FP16, src, N);
    for (int i = 0; i < N; i++) cr_assert_eq(got[i], weights_f32_to_f16(src[i]), "element %d (%g)", i, src[i]);
    xk_load(back, got, XF_FP16, N);
    for (int i = 0; i < N; i++) {
        float want = weights_f16_to_f32(got[i]);
        cr_assert(back[i] == want || (isinf(back[i]) && isinf(want)), "element %d", i);
    }
}

/* The per-CPU choices: the row is the one CPUID names (AMD family 26 is Zen 5's, every other CPU
 * the default's), int8 one-token streams and the prefetch level follow it, and a test's setting of
 * the streams is taken and released. */
Test(cpu_kernels, per_cpu_choices_follow_the_cpu) {
    int zen5 = 0;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &c, &d) && !memcmp(&b, "Auth", 4) && !memcmp(&d, "enti", 4) && !memcmp(&c, "cAMD", 4) &&
        __get_cpuid(1, &a, &b, &c, &d))
        zen5 = ((a >> 8) & 0xfu) == 0xfu && ((a >> 20) & 0xffu) + 0xfu == 0x1au;
#endif
    cr_assert_str_eq(xk_tune_name(), zen5 ? "AMD family 26 (Zen 5)" : "default");
    cr_assert_eq(xk_prefetch_to_l1, zen5);
    const int vnni = xk_isa_best() == XK_ISA_AVX512 && strstr(xk_a8_name(XK_ISA_AVX512), "vnni") != NULL;
    if (!vnni) return; /* the streams are the AVX2 kernel's constant, or 1 */
    cr_assert_eq(xk_a8_streams(), zen5 ? 1 : 8);
    xk_a8_set_streams(zen5 ? 8 : 1);
    cr_assert_eq(xk_a8_streams(), zen5 ? 8 : 1);
    xk_a8_set_streams(0);
    cr_assert_eq(xk_a8_streams(), zen5 ? 1 : 8);
}
