/* The cost of an OpenMP parallel region's fork and join, under the spin in force (GOMP_SPINCOUNT):
 * what every parallel op of the CPU backend pays on top of its work. The calibration measures it
 * (runner/calibrate.c) and the calibrated predictor keeps it as a term of its own
 * (analyzers/predict_calibrated.h: predcal_regions), so that an op's efficiency is of its work. */
#ifndef XF_OMP_FORK_H
#define XF_OMP_FORK_H

#include "core/status.h"

/* The gaps the calibration measures after: about the serial time between two ops of a decode step
 * (the probe's range end and start, the step's bookkeeping), and one longer than any spin xfprof
 * sets (3000 spins, ~150 us), after which the other threads sleep and the fork wakes them. */
#define OMP_FORK_GAP_SHORT_S 10e-6
#define OMP_FORK_GAP_LONG_S 2e-3

/* The median wall time of `reps` empty `omp parallel num_threads(threads)` regions, each after
 * gap_s of serial busy-waiting on the calling thread (1e-7 .. 0.1 s), after a warm-up region.
 * threads 1 .. 4096, reps 3 .. 100000. XF_EINVAL for bad arguments, XF_ENOMEM. */
xf_status omp_fork_cost(int threads, double gap_s, int reps, double *out_s);

#endif
