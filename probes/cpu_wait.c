#define _GNU_SOURCE
#include "probes/cpu_wait.h"

#include <fcntl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

struct cpu_wait {
    int threads;
    int *fd; /* (threads) /proc/self/task/TID/schedstat of team thread i */
};

void cpu_wait_free(cpu_wait *w) {
    if (!w) return;
    for (int i = 0; i < w->threads; i++)
        if (w->fd[i] >= 0) close(w->fd[i]);
    free(w->fd);
    free(w);
}

xf_status cpu_wait_open(int threads, cpu_wait **out) {
    *out = NULL;
    if (threads < 1 || threads > 4096) return xf_errorf(XF_EINVAL, "CPU wait: threads %d out of range (1 to 4096)", threads);
    cpu_wait *w = calloc(1, sizeof *w);
    long *tid = calloc((size_t)threads, sizeof *tid);
    if (w) w->fd = malloc((size_t)threads * sizeof *w->fd);
    if (!w || !tid || !w->fd) {
        free(tid);
        if (w) free(w->fd);
        free(w);
        return xf_errorf(XF_ENOMEM, "CPU wait: out of memory for %d threads", threads);
    }
    w->threads = threads;
    for (int i = 0; i < threads; i++) w->fd[i] = -1;
    int team = 0;
#pragma omp parallel num_threads(threads)
    {
        int id = omp_get_thread_num();
        if (id < threads) tid[id] = (long)syscall(SYS_gettid);
#pragma omp master
        team = omp_get_num_threads();
    }
    int ok = team == threads; /* a smaller team (OMP_THREAD_LIMIT): the threads it runs are not these */
    for (int i = 0; ok && i < threads; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid[i]);
        w->fd[i] = open(path, O_RDONLY | O_CLOEXEC);
        ok = w->fd[i] >= 0;
    }
    free(tid);
    if (ok) { /* one read now, so a file that opens but does not parse counts as not measured */
        double *all = malloc((size_t)threads * sizeof *all);
        ok = all && cpu_wait_read(w, all);
        free(all);
    }
    if (!ok) { /* no schedstat (CONFIG_SCHED_INFO off, /proc not mounted): not measured */
        cpu_wait_free(w);
        return XF_OK;
    }
    *out = w;
    return XF_OK;
}

int cpu_wait_read(const cpu_wait *w, double *wait_s) {
    if (!w || !wait_s) return 0;
    for (int i = 0; i < w->threads; i++) {
        char buf[128];
        ssize_t n = pread(w->fd[i], buf, sizeof buf - 1, 0);
        if (n <= 0) return 0; /* the thread has exited: its file reads nothing */
        buf[n] = 0;
        unsigned long long run_ns, wait_ns;
        if (sscanf(buf, "%llu %llu", &run_ns, &wait_ns) != 2) return 0;
        wait_s[i] = 1e-9 * (double)wait_ns;
    }
    return 1;
}

double cpu_wait_share(const double *before_s, const double *after_s, int threads, double wall_s) {
    if (!before_s || !after_s || !(wall_s > 0)) return 0;
    double worst = 0;
    for (int i = 0; i < threads; i++)
        if (after_s[i] - before_s[i] > worst) worst = after_s[i] - before_s[i];
    double share = worst / wall_s;
    return share > 1 ? 1 : share;
}

int cpu_wait_threads(const cpu_wait *w) { return w ? w->threads : 0; }
