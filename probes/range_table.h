/* The probes' one accumulator per (phase, layer, op) range: the timer's times, perf_event's counter
 * values and CUPTI's kernel times all go through it, so they share one convention:
 *   - within a repetition, every range of a key adds its values to the key's sums, and the distinct
 *     steps (probe_range.step) it was seen in are counted;
 *   - at the repetition's end every key seen gets one sample per value: prefill keys their sum,
 *     decode keys their sum over the decode steps (the mean per-step figure: attention grows with
 *     the context, so the mean step is the step at the mean decode context, the one the cost model
 *     predicts);
 *   - the record gets the median over the repetitions.
 * Sized at init; add and the repetition calls never allocate. */
#ifndef XF_RANGE_TABLE_H
#define XF_RANGE_TABLE_H

#include <stdint.h>

#include "core/op.h"
#include "core/status.h"
#include "core/workload.h"

typedef struct range_table {
    int64_t n_layers;
    int n_values;         /* values per range: 1 for times, one per counter */
    int max_reps;
    int64_t n_keys;       /* XF_PHASE_COUNT * (n_layers + 1) * OP_KIND_COUNT */
    double *sum;          /* (n_keys, n_values) this repetition */
    int64_t *last_step;   /* (n_keys) last step seen this repetition */
    int32_t *n_steps;     /* (n_keys) distinct steps seen this repetition */
    unsigned char *seen;  /* (n_keys) 1 when the key had a range this repetition */
    double *samples;      /* (n_keys, n_values, max_reps) */
    int *n_samples;       /* (n_keys) repetitions that saw the key */
    int n_reps;           /* repetitions ended */
} range_table;

/* Sizes the table (zeroed first). XF_EINVAL for sizes out of range, XF_ENOMEM. Free with
 * range_table_free (a zeroed or freed table: no-op). */
xf_status range_table_init(range_table *t, int64_t n_layers, int n_values, int max_reps);
void range_table_free(range_table *t);

/* The key of (phase, layer, kind), layer -1 for ops outside the layers; -1 when out of range. */
int64_t range_table_key(const range_table *t, xf_phase phase, int layer, op_kind kind);

/* Adds v[0..n_values) to key's sums for a range of step `step`. key < 0 is ignored. */
void range_table_add(range_table *t, int64_t key, int64_t step, const double *v);

/* Clears the sums of the repetition (rep_begin), or every sample too (clear). */
void range_table_rep_begin(range_table *t);
void range_table_clear(range_table *t);

/* Ends a repetition: one sample per value for every key seen, negative sums clamped to 0. Decode
 * keys are divided by `decode_divisor` when > 0, else by the distinct steps they were seen in.
 * XF_EOVERFLOW when max_reps repetitions were kept already (the repetition is dropped). */
xf_status range_table_rep_end(range_table *t, int64_t decode_divisor);

/* Samples of value `value` of key: returns how many and points *samples at them (owned by the
 * table, valid until the next rep_end or clear); 0 when none or out of range. */
int range_table_samples(const range_table *t, int64_t key, int value, const double **samples);

#endif
