/* See range_table.h. */
#include "probes/range_table.h"

#include <stdlib.h>
#include <string.h>

xf_status range_table_init(range_table *t, int64_t n_layers, int n_values, int max_reps) {
    memset(t, 0, sizeof *t);
    if (n_layers < 0 || n_layers > 100000)
        return xf_errorf(XF_EINVAL, "probe range table: n_layers %lld out of range (0 to 100000)", (long long)n_layers);
    if (max_reps < 1 || max_reps > 100000)
        return xf_errorf(XF_EINVAL, "probe range table: max_reps %d out of range (1 to 100000)", max_reps);
    if (n_values < 1 || n_values > 64) return xf_errorf(XF_EINVAL, "probe range table: %d values per range (1 to 64)", n_values);
    t->n_layers = n_layers;
    t->n_values = n_values;
    t->max_reps = max_reps;
    t->n_keys = (int64_t)XF_PHASE_COUNT * (n_layers + 1) * OP_KIND_COUNT;
    size_t k = (size_t)t->n_keys;
    t->sum = calloc(k * (size_t)n_values, sizeof *t->sum);
    t->last_step = calloc(k, sizeof *t->last_step);
    t->n_steps = calloc(k, sizeof *t->n_steps);
    t->seen = calloc(k, 1);
    t->samples = calloc(k * (size_t)n_values * (size_t)max_reps, sizeof *t->samples);
    t->n_samples = calloc(k, sizeof *t->n_samples);
    if (!t->sum || !t->last_step || !t->n_steps || !t->seen || !t->samples || !t->n_samples) {
        long long keys = (long long)t->n_keys;
        range_table_free(t);
        return xf_errorf(XF_ENOMEM, "probe range table: out of memory for %lld op keys x %d values x %d repetitions", keys,
                         n_values, max_reps);
    }
    return XF_OK;
}

void range_table_free(range_table *t) {
    if (!t) return;
    free(t->sum);
    free(t->last_step);
    free(t->n_steps);
    free(t->seen);
    free(t->samples);
    free(t->n_samples);
    memset(t, 0, sizeof *t);
}

int64_t range_table_key(const range_table *t, xf_phase phase, int layer, op_kind kind) {
    if ((int)phase < 0 || phase >= XF_PHASE_COUNT || layer < -1 || (int64_t)layer >= t->n_layers || (int)kind < 0 ||
        kind >= OP_KIND_COUNT)
        return -1;
    return ((int64_t)phase * (t->n_layers + 1) + (layer + 1)) * OP_KIND_COUNT + kind;
}

void range_table_add(range_table *t, int64_t key, int64_t step, const double *v) {
    if (key < 0 || key >= t->n_keys) return;
    double *s = &t->sum[key * t->n_values];
    for (int i = 0; i < t->n_values; i++) s[i] += v[i];
    if (!t->seen[key] || t->last_step[key] != step) {
        t->n_steps[key]++;
        t->last_step[key] = step;
    }
    t->seen[key] = 1;
}

void range_table_rep_begin(range_table *t) {
    memset(t->sum, 0, (size_t)t->n_keys * (size_t)t->n_values * sizeof *t->sum);
    memset(t->n_steps, 0, (size_t)t->n_keys * sizeof *t->n_steps);
    memset(t->seen, 0, (size_t)t->n_keys);
}

void range_table_clear(range_table *t) {
    range_table_rep_begin(t);
    memset(t->n_samples, 0, (size_t)t->n_keys * sizeof *t->n_samples);
    t->n_reps = 0;
}

xf_status range_table_rep_end(range_table *t, int64_t decode_divisor) {
    if (t->n_reps >= t->max_reps) {
        range_table_rep_begin(t);
        return xf_errorf(XF_EOVERFLOW, "probe range table: already %d repetitions kept (the maximum given at init)", t->max_reps);
    }
    int64_t first_decode = (t->n_layers + 1) * OP_KIND_COUNT;
    for (int64_t k = 0; k < t->n_keys; k++) {
        if (!t->seen[k]) continue;
        double div = 1;
        if (k >= first_decode) div = decode_divisor > 0 ? (double)decode_divisor : (t->n_steps[k] > 0 ? t->n_steps[k] : 1);
        int r = t->n_samples[k]++;
        for (int i = 0; i < t->n_values; i++) {
            double v = t->sum[k * t->n_values + i] / div;
            t->samples[(k * t->n_values + i) * t->max_reps + r] = v < 0 ? 0 : v; /* shorter than the clock's jitter */
        }
    }
    t->n_reps++;
    range_table_rep_begin(t);
    return XF_OK;
}

int range_table_samples(const range_table *t, int64_t key, int value, const double **samples) {
    *samples = NULL;
    if (key < 0 || key >= t->n_keys || value < 0 || value >= t->n_values || t->n_samples[key] == 0) return 0;
    *samples = &t->samples[(key * t->n_values + value) * t->max_reps];
    return t->n_samples[key];
}
