/* probes/omp_spin: the OpenMP spin a measuring program runs under, and why. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "probes/omp_spin.h"

/* The OpenMP spin choice (the tie-breaker): idle CPUs from two /proc/stat first lines, taken
 * on this 2-CPU VM (the second one second, 200 ticks, later: idle, then one CPU busy), and malformed texts. */
Test(omp_spin, idle_cpus_from_proc_stat) {
    const char *t0 = "cpu  4705 356 584 3699176 23 0 12 0 0 0\n";
    const char *idle = "cpu  4706 356 584 3699374 24 0 12 0 0 0\n";  /* 200 ticks: 198 idle + 1 iowait */
    const char *busy = "cpu  4805 356 584 3699276 23 0 12 0 0 0\n";  /* 200 ticks: 100 idle */
    cr_assert_float_eq(omp_spin_idle_cpus(t0, idle, 2, 0), 2.0 * 199 / 200, 1e-12);
    cr_assert_float_eq(omp_spin_idle_cpus(t0, busy, 2, 0), 1.0, 1e-12);
    cr_assert_str_eq(omp_spin_for_idle(omp_spin_idle_cpus(t0, idle, 2, 0), 2), OMP_SPIN_LONG);
    cr_assert_str_eq(omp_spin_for_idle(omp_spin_idle_cpus(t0, busy, 2, 0), 2), OMP_SPIN_SHORT);
    cr_assert_str_eq(omp_spin_for_idle(1.45, 2), OMP_SPIN_SHORT, "more than half a CPU busy is busy");
    cr_assert_str_eq(omp_spin_for_idle(1.6, 2), OMP_SPIN_LONG, "a tick of kernel work is not");
    cr_assert_str_eq(omp_spin_for_idle(15.8, 16), OMP_SPIN_LONG);
    cr_assert_str_eq(omp_spin_for_idle(-1, 2), OMP_SPIN_SHORT, "unknown: the short spin");
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

/* The step timed under each spin decides; a tie (within OMP_SPIN_TIE_SHARE) or a step that could
 * not be timed falls back to the idle share. Times measured on this 2-CPU KVM guest (2026-12-08):
 * idle, 61 us a step under 3000 spins and 106 under 200; one busy-looping process beside, 220-247
 * and 129. */
Test(omp_spin, the_faster_step_decides) {
    cr_assert_str_eq(omp_spin_pick(61e-6, 106e-6, 1.0, 2), OMP_SPIN_LONG, "idle machine misread as busy: the step decides");
    cr_assert_str_eq(omp_spin_pick(220e-6, 129e-6, 2.0, 2), OMP_SPIN_SHORT, "busy machine misread as idle: the step decides");
    cr_assert_str_eq(omp_spin_pick(100e-6, 102e-6, 2.0, 2), OMP_SPIN_LONG, "a tie: the idle share");
    cr_assert_str_eq(omp_spin_pick(102e-6, 100e-6, 1.0, 2), OMP_SPIN_SHORT, "a tie: the idle share");
    cr_assert_str_eq(omp_spin_pick(-1, 100e-6, 2.0, 2), OMP_SPIN_LONG, "not measured: the idle share");
    cr_assert_str_eq(omp_spin_pick(NAN, 100e-6, 1.0, 2), OMP_SPIN_SHORT);
    cr_assert_str_eq(omp_spin_pick(100e-6, INFINITY, -1, 2), OMP_SPIN_SHORT, "nothing known: the short spin");
    cr_assert_str_eq(omp_spin_pick(100e-6, 0, 2.0, 2), OMP_SPIN_LONG);
}

/* The step's time a region can never be under its busy-waits (work and gap: a lower bound, not a
 * speed target); bad arguments are refused. */
Test(omp_spin, step_time_is_at_least_its_work) {
    double s = 0;
    cr_assert_eq(omp_spin_step_time(2, 20, &s), XF_OK);
    cr_assert(s >= OMP_SPIN_STEP_WORK_S + OMP_SPIN_STEP_GAP_S && s < 1, "%g s a region", s);
    cr_assert_eq(omp_spin_step_time(1, 5, &s), XF_OK);
    cr_assert(s >= OMP_SPIN_STEP_WORK_S + OMP_SPIN_STEP_GAP_S, "%g s a region", s);
    cr_assert_eq(omp_spin_step_time(0, 20, &s), XF_EINVAL);
    cr_assert_eq(omp_spin_step_time(2, 4, &s), XF_EINVAL);
    cr_assert_eq(omp_spin_step_time(2, 20, NULL), XF_EINVAL);
}
