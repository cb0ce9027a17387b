/* The AMX tile kernels (cpu_amx.h): the bf16 input packing against its definition, the scalar
 * reference of the stated order against double, the tile kernel against that reference, and a
 * token's result independent of its batch, the tokens beside it and the row split (bitwise). The
 * int8 tiles are checked against the VNNI kernel here (every token count, the cuts of the backend's work
 * items) and in test_cpu_kernels. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference_model/cpu_amx.h"
#include "reference_model/cpu_kernels.h"
#include "reference_model/weights.h"
#include "tests/test_wmat.h"

/* Inputs with full 24-bit significands over a few decades, so the three parts all matter. */
static float *make_x(int64_t n, int64_t cols, uint32_t seed) {
    float *x = malloc((size_t)(n * cols) * sizeof(float));
    for (int64_t i = 0; i < n * cols; i++) x[i] = frand(&seed) * powf(10.0f, 2.0f * frand(&seed));
    return x;
}

static uint16_t *pack(const float *x, int64_t n, int64_t cols, int parts) {
    uint16_t *xb = malloc((size_t)amx_bf16_input_elems(n, cols, parts) * 2);
    amx_bf16_pack_input(x, n, cols, parts, 0, (n + 15) / 16, xb);
    return xb;
}

static float bf(uint16_t h) { return weights_bf16_to_f32(h); }

Test(cpu_amx, pack_input_layout_and_exact_parts) {
    const int64_t n = 21, cols = 64, nb = 2;
    float *x = make_x(n, cols, 3);
    uint16_t *x3 = pack(x, n, cols, 3), *x1 = pack(x, n, cols, 1);
    for (int64_t t = 0; t < nb * 16; t++)
        for (int64_t k = 0; k < cols; k++) {
            const int64_t at = ((t / 16) * (cols / 2) + k / 2) * 32 + (t % 16) * 2 + (k & 1), ps = nb * (cols / 2) * 32;
            const double sum = (double)bf(x3[at]) + bf(x3[ps + at]) + bf(x3[2 * ps + at]);
            const float want = t < n ? x[t * cols + k] : 0.0f;
            cr_assert_eq(sum, (double)want, "t %lld k %lld: hi + mid + lo = %.10g, x = %.10g", (long long)t, (long long)k, sum, want);
            cr_assert_eq(x1[at], t < n ? weights_f32_to_bf16(want) : 0, "rounded part at t %lld k %lld", (long long)t, (long long)k);
        }
    /* the scalar loop (amx_avoid) and the vector one give the same bits, NaN and infinities included */
    x[5] = NAN, x[70] = INFINITY, x[71] = -INFINITY, x[100] = 1e-40f;
    uint16_t *v3 = pack(x, n, cols, 3);
    amx_avoid(1);
    uint16_t *s3 = pack(x, n, cols, 3);
    amx_avoid(0);
    cr_assert(memcmp(v3, s3, (size_t)amx_bf16_input_elems(n, cols, 3) * 2) == 0, "vector and scalar packing differ");
    free(x), free(x3), free(x1), free(v3), free(s3);
}

/* |y - double product| <= 1e-5 * sum |w x| (the other kernels' tolerance, test_cpu_kernels): parts
 * 3 against x itself, parts 1 against x rounded to bf16. Also y of the rounded input differs from
 * the exact product by more than exact3's error (so the test sees a dropped part). */
Test(cpu_amx, reference_order_matches_double) {
    const int64_t n = 19, rows = 40, cols = 256;
    wmat W = make_wmat(XF_BF16, rows, cols, 0, 7);
    float *x = make_x(n, cols, 11);
    uint16_t *x3 = pack(x, n, cols, 3), *x1 = pack(x, n, cols, 1);
    float *y3 = malloc((size_t)(n * rows) * 4), *y1 = malloc((size_t)(n * rows) * 4);
    amx_matmul_bf16_ref(&W, x3, 3, n, y3, rows, 0, rows);
    amx_matmul_bf16_ref(&W, x1, 1, n, y1, rows, 0, rows);
    double worst3 = 0, worst1 = 0;
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < rows; r++) {
            double want = 0, want1 = 0, mag = 0;
            for (int64_t c = 0; c < cols; c++) {
                const double w = weights_get(&W, r, c), v = x[t * cols + c];
                want += w * v, mag += fabs(w * v);
                want1 += w * weights_bf16_to_f32(weights_f32_to_bf16((float)v));
            }
            cr_assert(fabs(y3[t * rows + r] - want) <= 1e-5 * mag, "exact3 t %lld r %lld: %.9g vs %.9g", (long long)t,
                      (long long)r, y3[t * rows + r], want);
            cr_assert(fabs(y1[t * rows + r] - want1) <= 1e-5 * mag, "rounded t %lld r %lld", (long long)t, (long long)r);
            worst3 = fmax(worst3, fabs(y3[t * rows + r] - want) / mag);
            worst1 = fmax(worst1, fabs(y1[t * rows + r] - want) / mag);
        }
    cr_log_info("relative to sum|wx|: exact3 %.3g, rounded %.3g (against the fp32 input)", worst3, worst1);
    cr_assert(worst1 > 10 * worst3, "rounding the input should cost more than exact3's summation error");
    free(W.data), free(x), free(x3), free(x1), free(y3), free(y1);
}

/* The tile kernel against the scalar statement of its order, bit for bit, rows not a multiple of 16, both
 * input modes, token counts around the 16 / 32 tile edges and past AMX_BF16_KB columns; nothing
 * written outside [0, n) x [r0, r1). */
Test(cpu_amx, tiles_match_reference) {
    if (!amx_bf16_granted()) cr_skip_test("no AMX-BF16 here (CPU or OS)");
    const int64_t rows = 77, cols = AMX_BF16_KB + 96;
    const int64_t ns[] = {1, 2, 4, 9, 16, 17, 33, 70, AMX_BF16_KB_TOKENS + 19}; /* the last: rounded inputs' smaller K blocks */
    wmat W = make_wmat(XF_BF16, rows, cols, 0, 5);
    for (int parts = 1; parts <= 3; parts += 2)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            const int64_t n = ns[i], ldy = rows + 3;
            float *x = make_x(n, cols, (uint32_t)(13 + n));
            uint16_t *xb = pack(x, n, cols, parts);
            float *y = malloc((size_t)(n * ldy) * 4), *ref = malloc((size_t)(n * ldy) * 4);
            float *c = aligned_alloc(64, (size_t)amx_bf16_scratch_floats(rows, n) * 4);
            for (int64_t j = 0; j < n * ldy; j++) y[j] = ref[j] = -12345.0f;
            amx_matmul_bf16(&W, xb, parts, n, y, ldy, 16, rows, c);
            amx_matmul_bf16_ref(&W, xb, parts, n, ref, ldy, 16, rows);
            int64_t diff = 0;
            double worst = 0;
            for (int64_t j = 0; j < n * ldy; j++) {
                if (y[j] != ref[j]) diff++;
                const double d = fabs((double)y[j] - ref[j]) / (fabs(ref[j]) + 1e-3);
                worst = d > worst ? d : worst;
            }
            cr_log_info("parts %d, n %lld: %lld of %lld values differ from the scalar order (worst %.2g)", parts, (long long)n,
                        (long long)diff, (long long)(n * ldy), worst);
            /* the order is Intel's to choose; on this CPU (Sapphire Rapids) the statement of cpu_amx.h is exact */
            cr_assert(diff == 0, "parts %d n %lld: %lld values differ from the stated order (worst %.3g relative)", parts, (long long)n,
                      (long long)diff, worst);
            for (int64_t t = 0; t < n; t++)
                for (int64_t r = 0; r < ldy; r++)
                    if (r < 16 || r >= rows) cr_assert_eq(y[t * ldy + r], -12345.0f, "wrote outside at t %lld r %lld", (long long)t, (long long)r);
            free(x), free(xb), free(y), free(ref), free(c);
        }
    free(W.data);
}

/* One token's row of y, alone, in batches of 5, 16, 37 and 600 (the prefill's K blocks) at each
 * position, and with the rows split in 16-row pieces (another thread count): the same bits. */
Test(cpu_amx, token_result_independent_of_batch_and_split) {
    if (!amx_bf16_granted()) cr_skip_test("no AMX-BF16 here (CPU or OS)");
    const int64_t rows = 96, cols = AMX_BF16_KB * 2 + 64, nmax = 600;
    wmat W = make_wmat(XF_BF16, rows, cols, 0, 9);
    float *x = make_x(nmax, cols, 21);
    float *c = aligned_alloc(64, (size_t)amx_bf16_scratch_floats(rows, nmax) * 4);
    float *alone = malloc((size_t)rows * 4), *y = malloc((size_t)(nmax * rows) * 4);
    const int64_t tok = 3; /* token of x whose result is followed */
    for (int parts = 1; parts <= 3; parts += 2) {
        uint16_t *xb = pack(x + tok * cols, 1, cols, parts);
        amx_matmul_bf16(&W, xb, parts, 1, alone, rows, 0, rows, c);
        free(xb);
        const int64_t ns[] = {5, 16, 37, nmax};
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            const int64_t n = ns[i], at = (n * 7) / 10; /* where the token sits in the batch */
            float *xs = malloc((size_t)(n * cols) * 4);
            for (int64_t t = 0; t < n; t++) memcpy(xs + t * cols, x + (t == at ? tok : (t + 50) % nmax) * cols, (size_t)cols * 4);
            xb = pack(xs, n, cols, parts);
            amx_matmul_bf16(&W, xb, parts, n, y, rows, 0, rows, c);
            cr_assert(memcmp(y + at * rows, alone, (size_t)rows * 4) == 0, "parts %d: token at %lld of %lld differs from alone",
                      parts, (long long)at, (long long)n);
            for (int64_t r0 = 0; r0 < rows; r0 += 16) amx_matmul_bf16(&W, xb, parts, n, y, rows, r0, r0 + 16, c);
            cr_assert(memcmp(y + at * rows, alone, (size_t)rows * 4) == 0, "parts %d n %lld: 16-row split differs", parts, (long long)n);
            free(xs), free(xb);
        }
    }
    free(W.data), free(x), free(c), free(alone), free(y);
}

/* The int8 tiles against the VNNI kernel (xk_matmul_a8 kept off AMX), bit for bit, for every token
 * count of a tile (1..16, each an unrolled finishing of its own) and past it, on rows that fill
 * the 4-block steps (64 rows) and rows that leave a partial step and a partial block; cut into the
 * backend's 64-row work items or into ranges inside blocks, with nothing written outside them. */
static void check_a8_tiles(int64_t rows, int64_t cols, int group) {
    wmat W = make_wmat(XF_INT8, rows, cols, group, 31);
    cr_assert_eq(weights_pack_int8(&W), XF_OK);
    const int64_t nmax = 33, qc = xk_act8_cols(&W), ng = W.n_groups, ldy = rows + 2;
    uint32_t sd = 41;
    float *x = malloc((size_t)(nmax * cols) * sizeof(float));
    for (int64_t i = 0; i < nmax * cols; i++) x[i] = frand(&sd) * (1.0f + (float)(i % 5));
    int8_t *q = malloc((size_t)(nmax * qc));
    float *s = malloc((size_t)(nmax * ng) * sizeof(float));
    int32_t *corr = malloc((size_t)(nmax * ng) * sizeof(int32_t));
    float *y = malloc((size_t)(nmax * ldy) * sizeof(float)), *yv = malloc((size_t)(nmax * ldy) * sizeof(float));
    xk_act8_quantize(&W, x, nmax, q, s, corr);
    for (int64_t n = 1; n <= nmax; n++) {
        xk_a8_avoid_amx(1);
        xk_matmul_a8(xk_isa_best(), &W, q, s, corr, n, yv, ldy, 0, rows);
        xk_a8_avoid_amx(0);
        const int64_t cuts[][2] = {{0, rows}, {5, rows - 3}, {64, rows}, {17, 70}};
        for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
            for (int64_t j = 0; j < nmax * ldy; j++) y[j] = -777.0f;
            const int64_t r0 = cuts[k][0], r1 = cuts[k][1];
            if (k == 0)
                for (int64_t a = 0; a < rows; a += 64) amx_matmul_a8(&W, q, s, corr, n, y, ldy, a, a + 64 < rows ? a + 64 : rows);
            else amx_matmul_a8(&W, q, s, corr, n, y, ldy, r0, r1);
            for (int64_t t = 0; t < n; t++)
                for (int64_t r = 0; r < ldy; r++) {
                    if (r >= r0 && r < r1)
                        cr_assert_eq(y[t * ldy + r], yv[t * ldy + r], "n %lld cut %zu tok %lld row %lld: tiles %.9g, vnni %.9g",
                                     (long long)n, k, (long long)t, (long long)r, y[t * ldy + r], yv[t * ldy + r]);
                    else cr_assert_eq(y[t * ldy + r], -777.0f, "n %lld cut %zu: wrote outside at tok %lld row %lld", (long long)n, k,
                                      (long long)t, (long long)r);
                }
        }
    }
    free(x), free(q), free(s), free(corr), free(y), free(yv), free(W.data), free(W.scales);
}

Test(cpu_amx, int8_tiles_match_vnni_group128) {
    if (!xk_a8_amx()) cr_skip_test("no AMX-INT8 here (CPU or OS)");
    check_a8_tiles(2 * 64 + 16 + 5, 384, 128); /* K tiles of 64, 3 groups */
}
Test(cpu_amx, int8_tiles_match_vnni_group32) {
    if (!xk_a8_amx()) cr_skip_test("no AMX-INT8 here (CPU or OS)");
    check_a8_tiles(64 + 37, 200, 32); /* K tiles of 32, 7 groups (the last padded) */
}
