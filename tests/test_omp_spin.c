/* probes/omp_spin: the OpenMP spin a measuring program runs under, and why. */
#include <criterion/criterion.h>

#include "probes/omp_spin.h"

/* One window of the OpenMP spin choice: idle CPUs from two /proc/stat first lines, taken
 * on this 2-CPU VM (the second one second, 200 ticks, later: idle, then one CPU busy), and malformed texts. */
Test(omp_spin, idle_cpus_from_proc_stat) {
    const char *t0 = "cpu  4705 356 584 3699176 23 0 12 0 0 0\n";
    const char *idle = "cpu  4706 356 584 3699374 24 0 12 0 0 0\n";  /* 200 ticks: 198 idle + 1 iowait */
    const char *busy = "cpu  4805 356 584 3699276 23 0 12 0 0 0\n";  /* 200 ticks: 100 idle */
    cr_assert_float_eq(omp_spin_idle_cpus(t0, idle, 2, 0), 2.0 * 199 / 200, 1e-12);
    cr_assert_float_eq(omp_spin_idle_cpus(t0, busy, 2, 0), 1.0, 1e-12);
    cr_assert(omp_spin_window_free(omp_spin_idle_cpus(t0, idle, 2, 0), 2));
    cr_assert(!omp_spin_window_free(omp_spin_idle_cpus(t0, busy, 2, 0), 2));
    cr_assert(!omp_spin_window_free(1.45, 2), "more than half a CPU busy is busy");
    cr_assert(omp_spin_window_free(1.6, 2), "a tick of kernel work is not");
    cr_assert(omp_spin_window_free(15.8, 16));
    cr_assert(!omp_spin_window_free(-1, 2), "unknown: the short spin");
    cr_assert_lt(omp_spin_idle_cpus(t0, t0, 2, 0), 0, "no time passed");
    cr_assert_lt(omp_spin_idle_cpus(idle, t0, 2, 0), 0, "counters that went back");
    cr_assert_lt(omp_spin_idle_cpus(t0, idle, 0, 0), 0);
    cr_assert_lt(omp_spin_idle_cpus(NULL, idle, 2, 0), 0);
    cr_assert_lt(omp_spin_idle_cpus("", idle, 2, 0), 0);
    cr_assert_lt(omp_spin_idle_cpus("cpu0 4705 356 584 3699176 23 0 12 0\n", idle, 2, 0), 0, "a per-CPU line is not the total");
    cr_assert_lt(omp_spin_idle_cpus("cpu  4705 356 584 3699176 23 0 12\n", idle, 2, 0), 0, "seven fields");
    cr_assert_lt(omp_spin_idle_cpus("cpu  4705 356 -584 3699176 23 0 12 0\n", idle, 2, 0), 0);
    cr_assert_lt(omp_spin_idle_cpus("cpu  99999999999999999999999 0 0 0 0 0 0 0\n", idle, 2, 0), 0, "overflow");
    /* this process's own ticks count as free (its OpenBLAS threads spinning at start), up to ncpu */
    cr_assert_float_eq(omp_spin_idle_cpus(t0, busy, 2, 60), 2.0 * 160 / 200, 1e-12);
    cr_assert_float_eq(omp_spin_idle_cpus(t0, busy, 2, 500), 2.0, 1e-12);
    cr_assert_lt(omp_spin_idle_cpus(t0, busy, 2, -1), 0);
    /* a field that went back (user -50) and idle more than the time that passed: refused */
    cr_assert_lt(omp_spin_idle_cpus(t0, "cpu  4655 356 584 3699276 23 0 12 0\n", 2, 0), 0);
}

/* The windows are looked at until one is free: one free window is enough for the long spin (a
 * program that ended as xfprof started: this host's 2026-12-07 run chose 200 at "1.05 of 2 CPUs
 * free" in a single window); busy in every window, or no window, is the short one. */
Test(omp_spin, one_free_window_is_enough) {
    const double busy_then_free[] = {1.05, 0.98, 2.0}, busy[] = {1.05, 1.0, 0.99, 1.1, 1.2}, unknown[] = {-1};
    cr_assert_str_eq(omp_spin_for_windows(busy_then_free, 3, 2), OMP_SPIN_LONG);
    cr_assert_str_eq(omp_spin_for_windows(busy_then_free, 2, 2), OMP_SPIN_SHORT, "the free one not yet looked at");
    cr_assert_str_eq(omp_spin_for_windows(busy, 5, 2), OMP_SPIN_SHORT);
    cr_assert_str_eq(omp_spin_for_windows(unknown, 1, 2), OMP_SPIN_SHORT);
    cr_assert_str_eq(omp_spin_for_windows(busy, 0, 2), OMP_SPIN_SHORT, "nothing looked at");
    cr_assert_str_eq(omp_spin_for_windows(busy_then_free, 3, 0), OMP_SPIN_SHORT, "no CPUs: refused");
}
