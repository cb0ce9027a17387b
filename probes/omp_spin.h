/* The OpenMP spin the CPU backend runs under: how long an idle OpenMP thread spins at a barrier
 * before it sleeps (libgomp's GOMP_SPINCOUNT, read once when the library loads). Every parallel op
 * of a decode step pays a fork after a serial gap of 5-15 us; whether the other threads are still
 * spinning then, or asleep and woken by a futex, moved a 2-thread fork from under 1 us to 36-45 us
 * on a KVM guest, while on a busy machine a long spin holds a CPU that a descheduled partner needs
 * (docs/performance.md has the runs). So measuring programs choose it when they start
 * (ceilings_env_reexec restarts them with it set): the long spin when the CPUs are free of other
 * programs, the short one when they stay busy. A value the user set is never changed. */
#ifndef XF_OMP_SPIN_H
#define XF_OMP_SPIN_H

#include <stddef.h>

#define OMP_SPIN_LONG "3000" /* ~150 us: the other threads stay awake across a step's serial gaps */
#define OMP_SPIN_SHORT "200" /* ~10 us: sleeps almost at once, leaving the CPU to whoever needs it */

/* The CPUs are looked at in windows of OMP_SPIN_WINDOW_S, at most OMP_SPIN_WINDOWS of them: a load
 * that ends within them (a program finishing as xfprof starts) is not a busy machine. */
#define OMP_SPIN_WINDOW_S 0.05
#define OMP_SPIN_WINDOWS 5

/* How many CPUs were free of other programs between two readings of /proc/stat (their texts):
 * the aggregate "cpu " line's idle + iowait share of all its time, plus own_ticks (this
 * process's CPU time over the same window, in the same USER_HZ ticks: OpenBLAS's threads spin for
 * a while after it loads), times ncpu, at most ncpu. Returns -1 when a text has no well-formed
 * "cpu " line first, ncpu < 1, own_ticks < 0, or no time passed between them. */
double omp_spin_idle_cpus(const char *stat_before, const char *stat_after, int ncpu, double own_ticks);

/* Whether one window's idle_cpus of ncpu count as free: every CPU but half of one (a tick of
 * kernel work in 50 ms is a fifth of a CPU). Unknown (idle_cpus < 0) is not free. */
int omp_spin_window_free(double idle_cpus, int ncpu);

/* The spin for the windows looked at, in order: OMP_SPIN_LONG when one of them was free,
 * OMP_SPIN_SHORT otherwise (n = 0 included). Static string. */
const char *omp_spin_for_windows(const double *idle_cpus, int n, int ncpu);

/* The spin this process's children should run under now, and why into why (a line for records,
 * e.g. "xfprof's choice: 2.00 of 2 CPUs free of other programs in the 1st 50 ms window"): looks
 * at windows until one is free, at most OMP_SPIN_WINDOWS (50-250 ms). */
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

/* The environment variable with the reason, set beside GOMP_SPINCOUNT when xfprof chose it. */
#define OMP_SPIN_WHY_ENV "XFPROF_OMP_SPIN_WHY"

#endif
