/* Random test inputs shared by the CPU kernel suites: one generator, one way to build a weight
 * matrix, so every suite's "random weights" mean the same thing. */
#ifndef XF_TEST_WMAT_H
#define XF_TEST_WMAT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reference_model/weights.h"

/* A value in [-1, 1) from the linear congruential state *s (advanced). */
static inline float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* A (rows, cols) matrix in dtype from random fp32 values in [-0.05, 0.05) (int8: groups of `group`
 * columns); the caller frees data and scales. */
static inline wmat make_wmat(xf_dtype dt, int64_t rows, int64_t cols, int group, uint32_t seed) {
    wmat m;
    memset(&m, 0, sizeof m);
    m.dtype = dt;
    m.rows = rows;
    m.cols = cols;
    m.owned = 1;
    int64_t esz = dt == XF_FP32 ? 4 : dt == XF_INT8 ? 1 : 2;
    m.data = malloc((size_t)(rows * cols * esz));
    if (dt == XF_INT8) {
        m.group = group;
        m.n_groups = (cols + group - 1) / group;
        m.scales = malloc((size_t)(rows * m.n_groups) * sizeof(float));
    }
    float *row = malloc((size_t)cols * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) row[c] = frand(&seed) * 0.05f;
        weights_set_rows(&m, r, 1, row);
    }
    free(row);
    return m;
}

#endif
