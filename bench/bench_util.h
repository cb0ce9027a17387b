/* What the benchmarks under bench/ share: their error exit, a median and the clocks. Header only
 * (static inline): each bench is one program of one .c file. */
#ifndef XF_BENCH_UTIL_H
#define XF_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/status.h"
#include "core/workload.h"
#include "probes/timer.h"
#include "reference_model/cost_model.h"

/* Seconds on clock c (CLOCK_MONOTONIC for intervals, CLOCK_PROCESS_CPUTIME_ID for CPU time). */
static inline double bench_clock_s(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Monotonic seconds, for intervals. */
static inline double bench_now_s(void) { return bench_clock_s(CLOCK_MONOTONIC); }

/* The median of x[0..n) (timer_stats': x is not reordered). */
static inline double bench_median(const double *x, int n) {
    double m, iqr;
    timer_stats(x, n, &m, &iqr);
    return m;
}

/* "BENCH: WHAT: <the library's last error>" on stderr; returns code, the bench's exit status. */
static inline int bench_die(const char *bench, const char *what, int code) {
    fprintf(stderr, "%s: %s: %s\n", bench, what, xf_error_msg());
    return code;
}

/* The cost model's ops of one decode step of workload_decode(batch, context, wdtype) at `context`
 * tokens (*n of them; the caller frees); NULL on error (the library's message says why). */
static inline cost_op *bench_decode_ops(const model_config *c, int64_t batch, int64_t context, xf_dtype wdtype, int64_t *n) {
    const workload w = workload_decode(batch, context, wdtype);
    *n = cost_step_op_count(c);
    cost_op *ops = calloc((size_t)*n, sizeof *ops);
    if (ops && cost_step(c, &w, workload_decode_step(&w, context), ops, *n) != XF_OK) {
        free(ops);
        return NULL;
    }
    return ops;
}

#endif
