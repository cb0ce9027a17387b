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

void mla_attend_head(float *out, const float *q, int64_t dn, int64_t dr, int64_t dv, const float *kvdec, int64_t ld,
                     const float *krope, int64_t n_keys, float scale, float *scores) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n_keys; j++) {
        const float *k = kvdec + j * ld, *kr = krope + j * dr;
        float s = 0;
        for (int64_t i = 0; i < dn; i++) s += q[i] * k[i];
        for (int64_t i = 0; i < dr; i++) s += q[dn + i] * kr[i];
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
        const float w = scores[j] * inv, *v = kvdec + j * ld + dn;
        for (int64_t i = 0; i < dv; i++) out[i] += w * v[i];
    }
}
