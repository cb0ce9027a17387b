/* The timer probe: CLOCK_MONOTONIC around every op range, its own overhead measured at init and
 * subtracted from every range.
 *
 * Samples: one per (phase, layer, op) per repetition.
 *   - prefill: the op's time summed over the ranges of that repetition's prefill (one range per
 *     layer when the batch runs as one step);
 *   - decode: the op's time summed over that repetition's decode steps, divided by the number of
 *     distinct decode steps seen, i.e. the mean per-step time. Attention grows linearly with the
 *     context, so the mean step is the step at the mean decode context, which is the step the
 *     cost model predicts (workload_mean_decode_context).
 * Repetitions are delimited by timer_probe_rep_begin / timer_probe_rep_end.
 *
 * Single-threaded: begin/end are called by the thread that drives the model (ops may use many
 * threads inside a range). begin/end never allocate: all storage is sized at init. Ranges may
 * nest up to TIMER_MAX_DEPTH deep (e.g. kv_alloc inside kv_append); deeper ones are dropped. */
#ifndef XF_TIMER_H
#define XF_TIMER_H

#include <stdint.h>

#include "core/probe.h"

#define TIMER_MAX_DEPTH 8

typedef struct timer_probe timer_probe;

/* A clock for tests: returns nanoseconds. NULL = CLOCK_MONOTONIC. */
typedef int64_t (*timer_clock_fn)(void *arg);

/* Creates a timer for a model of n_layers layers keeping up to max_reps samples per op, and
 * measures its own overhead (median of `calib_pairs` empty ranges; 0 = 20000). On success *out
 * is owned by the caller: free with timer_probe_free, or hand it to a probe_set through
 * timer_probe_as_probe (then the probe's free releases it). */
xf_status timer_probe_init(int64_t n_layers, int max_reps, int calib_pairs, timer_probe **out);

/* The same with an injected clock (tests): clock(arg) gives nanoseconds. */
xf_status timer_probe_init_clock(int64_t n_layers, int max_reps, int calib_pairs, timer_clock_fn clock, void *arg,
                                 timer_probe **out);

void timer_probe_free(timer_probe *t); /* NULL is fine */

/* The probe table entry for a probe_set; its free calls timer_probe_free. Put the timer last in
 * the set: it is then innermost and does not time the other probes. */
probe timer_probe_as_probe(timer_probe *t);

/* Measured cost of one empty range in seconds (median), subtracted from every range. */
double timer_probe_overhead_s(const timer_probe *t);

/* Starts a repetition: clears the accumulators. */
void timer_probe_rep_begin(timer_probe *t);

/* Ends a repetition: every (phase, layer, op) seen during it gets one sample. XF_EOVERFLOW when
 * max_reps samples are already kept (the repetition is dropped). */
xf_status timer_probe_rep_end(timer_probe *t);

/* Drops all samples kept so far (after warm-up repetitions). */
void timer_probe_clear(timer_probe *t);

/* Samples kept for (phase, layer, kind); layer -1 for ops outside the layers. Returns how many
 * and points *samples at them (seconds; owned by the timer, valid until the next rep_end or
 * clear). 0 when the op was never seen or the key is out of range. */
int timer_probe_samples(const timer_probe *t, xf_phase phase, int layer, op_kind kind, const double **samples);

/* Number of ranges dropped (nesting deeper than TIMER_MAX_DEPTH, unbalanced ends, out-of-range
 * layers). A correct runner gives 0. */
int64_t timer_probe_dropped(const timer_probe *t);

/* Median and interquartile range of x[0..n) (linear interpolation between order statistics,
 * Hyndman-Fan type 7). Does not modify x. n = 0 gives 0, 0. */
void timer_stats(const double *x, int n, double *median, double *iqr);

/* Monotonic now in seconds (CLOCK_MONOTONIC). */
double timer_now_s(void);

#endif
