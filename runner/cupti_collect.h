/* Counter collection for a whole request with the Range Profiler's user replay: every pass resets
 * the model and re-runs the same prefill and decode steps from the same state (same prompts, same
 * weights, greedy), so each pass sees the same kernels in the same op ranges. The first metric set
 * also profiles a BF16 GEMM of 4096^3 in a range named "calibration" to calibrate the tensor
 * metric's unit. Plain C over cupti_probe.h (XF_EUNSUPPORTED in builds without CUDA). */
#ifndef XF_CUPTI_COLLECT_H
#define XF_CUPTI_COLLECT_H

#include <stdint.h>

#include "core/record.h"
#include "probes/cupti_host.h"
#include "probes/cupti_probe.h"

struct model;

typedef struct cupti_collect_args {
    struct model *m;        /* built with the cuda backend on device `ordinal` */
    int ordinal;
    int n_seqs;
    const int32_t *prompts; /* (sum lens) */
    const int64_t *lens;    /* (n_seqs) */
    int n_decode;           /* decode steps after the prefill (keep small: ranges per pass grow with it) */
} cupti_collect_args;

typedef struct cupti_collect_result {
    int n;
    probe_range *ranges;          /* (n) owned */
    cupti_metric_values *values;  /* (n) owned */
    double flops_per_unit;        /* tensor metric calibration; 0 when it failed (then no tensor FLOPs) */
    int passes[CUPTI_METRIC_SETS];/* passes each metric set needed */
} cupti_collect_result;

/* Runs the passes. XF_EUNSUPPORTED (cupti_privileges_hint() in the message when counters are not
 * permitted): the caller keeps activity timing and says so. *out: cupti_collect_result_free. */
xf_status cupti_collect_counters(const cupti_collect_args *a, cupti_collect_result *out);
void cupti_collect_result_free(cupti_collect_result *r); /* NULL is fine */

/* Writes the counters of the matching range (same phase, layer, op; step 0 for prefill ops, step
 * `decode_step` for decode ops) into every op of pt (cupti_fill_record_op). Returns the number of
 * ops that got counters. Pure function of its inputs. */
int cupti_collect_apply(const cupti_collect_result *r, int64_t decode_step, record_point *pt);

#endif
