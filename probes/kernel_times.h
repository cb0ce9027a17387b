/* GPU kernel time per op range from CUPTI activity (cupti_probe_flush's attributions). */
#ifndef XF_KERNEL_TIMES_H
#define XF_KERNEL_TIMES_H

#include <stdint.h>

#include "core/record.h"
#include "core/status.h"
#include "probes/cupti_host.h"
#include "probes/range_table.h"

/* GPU kernel time per op from CUPTI activity: every repetition's attribution (cupti_attribute /
 * cupti_probe_flush) is summed per (phase, layer, op) into that op's cell; the record counter is
 * the median over the repetitions, and for decode ops the per-step figure (divided by the decode
 * steps of a repetition), the same convention as the timer probe's samples. */
typedef struct kernel_times {
    int64_t n_ops;
    int reps;
    range_table rt;   /* per (phase, layer, op): each repetition's summed kernel seconds */
    double *scratch;  /* (reps) */
    int64_t unattributed, bad_records; /* over the kept repetitions */
} kernel_times;

/* Sized for point p (its ops) of a model of n_layers layers and `reps` kept repetitions. XF_ENOMEM,
 * XF_EINVAL for reps < 1 or n_layers < 1. Free with kernel_times_free (zeroed struct: no-op). */
xf_status kernel_times_init(kernel_times *k, const record_point *p, int64_t n_layers, int reps);
void kernel_times_free(kernel_times *k);

/* Adds repetition `rep`'s attribution (0 <= rep < reps; others are ignored, e.g. warm-up). Ranges of
 * ops the point lacks are ignored. */
void kernel_times_add(kernel_times *k, const cupti_attribution *a, int rep);

/* Appends the counter "gpu_kernel_time_s" to op i of the point (the median over the repetitions
 * that saw kernels, divided by n_decode_steps for a decode op) when it has kernels and the op has a
 * free counter slot. Returns 1 when appended, 0 otherwise. */
int kernel_times_fill(const kernel_times *k, int64_t i, int64_t n_decode_steps, record_op *op);

#endif
