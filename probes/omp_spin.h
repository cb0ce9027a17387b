/* The OpenMP spin the CPU backend runs under: how long an idle OpenMP thread spins at a barrier
 * before it sleeps (libgomp's GOMP_SPINCOUNT, read once when the library loads). Every parallel op
 * of a decode step pays a fork after a serial gap of 5-15 us; whether the other threads are still
 * spinning then, or asleep and woken by a futex, moved a 2-thread fork from under 1 us to 36-45 us
 * on a KVM guest (docs/performance.md), while on a busy machine a long spin holds a CPU that a
 * descheduled partner needs. So measuring programs choose it when they start (ceilings_env_reexec
 * restarts them with it set): a short step of such ops is timed under both spins, each in a child
 * process, and the faster one is kept; the CPUs' idle share over 50 ms decides only a tie or a
 * failed measurement. A value the user set is never changed. */
#ifndef XF_OMP_SPIN_H
#define XF_OMP_SPIN_H

#include <stddef.h>

#include "core/status.h"

#define OMP_SPIN_LONG "3000" /* ~150 us: the other threads stay awake across a step's serial gaps */
#define OMP_SPIN_SHORT "200" /* ~10 us: sleeps almost at once, leaving the CPU to whoever needs it */

/* The step the choice is timed on: regions in which every thread busy-waits OMP_SPIN_STEP_WORK_S
 * (about a small decode projection's share), each after a serial gap of OMP_SPIN_STEP_GAP_S. */
#define OMP_SPIN_STEP_WORK_S 50e-6
#define OMP_SPIN_STEP_GAP_S 10e-6

/* Two step times count as different when the slower is more than this share above the faster. */
#define OMP_SPIN_TIE_SHARE 0.03

/* How many CPUs were free of other programs between two readings of /proc/stat (their texts):
 * the aggregate "cpu " line's idle + iowait share of all its time, plus own_ticks (this
 * process's CPU time over the same window, in the same USER_HZ ticks: OpenBLAS's threads spin for
 * a while after it loads), times ncpu, at most ncpu. Returns -1 when a text has no well-formed
 * "cpu " line first, ncpu < 1, own_ticks < 0, or no time passed between them. */
double omp_spin_idle_cpus(const char *stat_before, const char *stat_after, int ncpu, double own_ticks);

/* The spin the idle share alone points to: OMP_SPIN_LONG when every CPU but half of one was free
 * (a tick of kernel work in 50 ms is a fifth of a CPU), OMP_SPIN_SHORT otherwise or when unknown
 * (idle_cpus < 0). Static string. */
const char *omp_spin_for_idle(double idle_cpus, int ncpu);

/* The choice from the step timed under each spin (seconds a region; <= 0 or not finite: not
 * measured): the faster one when they differ by more than OMP_SPIN_TIE_SHARE, else
 * omp_spin_for_idle(idle_cpus, ncpu). Static string. */
const char *omp_spin_pick(double long_s, double short_s, double idle_cpus, int ncpu);

/* The step's time a region with `threads` threads under the spin in force: the median of 5
 * batches of `regions` / 5 regions after one warm-up region. threads 1 .. 4096, regions 5 .. 100000. */
xf_status omp_spin_step_time(int threads, int regions, double *out_s);

/* For main() of every measuring program, first thing: in a child started by omp_spin_choose
 * (XFPROF_OMP_SPIN_PROBE set), times the step, prints its seconds a region on stdout and exits;
 * otherwise returns at once. */
void omp_spin_probe_child(void);

/* The spin this process's children should run under now, and why into why (a line for records,
 * e.g. "xfprof's choice: 2-thread 60 us ops took 61 us each under 3000 spins, 106 under 200; 1.98
 * of 2 CPUs free over 50 ms"). Takes 0.3-0.5 s: up to 0.5 s for this process's own
 * threads to settle (OpenBLAS's pool spins ~0.1 s after loading), 50 ms, four children. */
const char *omp_spin_choose(char *why, size_t len);

/* What OpenMP waiting is in force, for records and benchmarks: "OMP_WAIT_POLICY=..., GOMP_SPINCOUNT=..."
 * and, when xfprof chose the spin, why in brackets. Into buf (224 bytes, a record's env value, hold it). */
void omp_spin_describe(char *buf, size_t len);

/* The OpenMP spin in force, as the calibration records it and run / predict compare it: spin gets
 * "GOMP_SPINCOUNT=<value>", else "OMP_WAIT_POLICY=<value>", else "libgomp default"; by gets
 * "xfprof" when ceilings_env_reexec chose it (XFPROF_OMP_SPIN_WHY set), "user" when the environment
 * had it, "nobody" when neither is set. choose = 1 (a process that runs nothing, e.g. predict):
 * when neither is set, the spin `xfprof run` would choose now (omp_spin_choose), by "xfprof". */
void omp_spin_in_force(char *spin, size_t len, char *by, size_t by_len, int choose);

/* The environment variables xfprof sets with the chosen spin: the reason, and the child's mark. */
#define OMP_SPIN_WHY_ENV "XFPROF_OMP_SPIN_WHY"
#define OMP_SPIN_PROBE_ENV "XFPROF_OMP_SPIN_PROBE"

#endif
