#include "omp_fork.h"

#include <omp.h>
#include <stdlib.h>

#include "timer.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

xf_status omp_fork_cost(int threads, double gap_s, int reps, double *out_s) {
    if (threads < 1 || threads > 4096 || !(gap_s >= 1e-7 && gap_s <= 0.1) || reps < 3 || reps > 100000 || !out_s)
        return xf_errorf(XF_EINVAL, "omp_fork_cost: threads %d, gap %g s, reps %d out of range", threads, gap_s, reps);
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t) return xf_errorf(XF_ENOMEM, "omp_fork_cost: out of memory");
    volatile int sink = 0;
    (void)sink;
#pragma omp parallel num_threads(threads)
    if (omp_get_thread_num() < 0) sink = 1; /* never: the pool exists before the first timed fork */
    for (int i = 0; i < reps; i++) {
        const double g0 = timer_now_s();
        while (timer_now_s() - g0 < gap_s) { /* serial gap: the other threads spin, then sleep */
        }
        const double t0 = timer_now_s();
#pragma omp parallel num_threads(threads)
        if (omp_get_thread_num() < 0) sink = 1; /* an empty body: the fork and the closing barrier are what is timed */
        t[i] = timer_now_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    *out_s = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    free(t);
    return XF_OK;
}
