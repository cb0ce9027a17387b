/* See cpu_mla.h. */
#include "reference_model/cpu_mla.h"

#include <math.h>

void mla_rope(float *x, int64_t dim, const float *cos_t, const float *sin_t, int interleave, float *scratch) {
    const int64_t half = dim / 2;
    if (!interleave) {
        for (int64_t i = 0; i < half; i++) {
            const float a = x[i], b = x[i + half];
            x[i] = a * cos_t[i] - b * sin_t[i];
            x[i + half] = b * cos_t[i] + a * sin_t[i];
        }
        return;
    }
    for (int64_t i = 0; i < half; i++) {
        const float a = x[2 * i], b = x[2 * i + 1];
        scratch[i] = a * cos_t[i] - b * sin_t[i];
        scratch[i + half] = b * cos_t[i] + a * sin_t[i];
    }
    for (int64_t i = 0; i < dim; i++) x[i] = scratch[i];
}

/* softmax(scale (q[0 .. dk) . K_j + q[dk .. dk + dr) . krope_j)) . V_j over keys 0 .. n_keys - 1:
 * K_j at K + j * ldk (dk), V_j at V + j * ldv (dv). The one loop both forms run. */
static void attend(float *out, const float *q, int64_t dk, int64_t dr, int64_t dv, const float *K, int64_t ldk, const float *V,
                   int64_t ldv, const float *krope, int64_t n_keys, float scale, float *scores) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n_keys; j++) {
        const float *k = K + j * ldk, *kr = krope + j * dr;
        float s = 0;
        for (int64_t i = 0; i < dk; i++) s += q[i] * k[i];
        for (int64_t i = 0; i < dr; i++) s += q[dk + i] * kr[i];
        s *= scale;
        scores[j] = s;
        mx = s > mx ? s : mx;
    }
    double sum = 0;
    for (int64_t j = 0; j < n_keys; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < dv; i++) out[i] = 0;
    for (int64_t j = 0; j < n_keys; j++) {
        const float w = scores[j] * inv, *v = V + j * ldv;
        for (int64_t i = 0; i < dv; i++) out[i] += w * v[i];
    }
}

void mla_attend_head(float *out, const float *q, int64_t dn, int64_t dr, int64_t dv, const float *kvdec, int64_t ld,
                     const float *krope, int64_t n_keys, float scale, float *scores) {
    attend(out, q, dn, dr, dv, kvdec, ld, kvdec + dn, ld, krope, n_keys, scale, scores);
}

void mla_attend_latent(float *out, const float *q, int64_t r, int64_t dr, const float *ckv, const float *krope, int64_t n_keys,
                       float scale, float *scores) {
    attend(out, q, r, dr, r, ckv, r, ckv, r, krope, n_keys, scale, scores);
}

void mla_absorb_rows(float *out, const float *w, const float *x, int64_t rows, int64_t cols, int transpose) {
    if (transpose) { /* out (cols) = w^T x: x (rows) */
        for (int64_t i = 0; i < cols; i++) out[i] = 0;
        for (int64_t a = 0; a < rows; a++) {
            const float xa = x[a], *wr = w + a * cols;
            for (int64_t i = 0; i < cols; i++) out[i] += xa * wr[i];
        }
        return;
    }
    for (int64_t a = 0; a < rows; a++) { /* out (rows) = w x: x (cols) */
        const float *wr = w + a * cols;
        float s = 0;
        for (int64_t i = 0; i < cols; i++) s += wr[i] * x[i];
        out[a] = s;
    }
}
