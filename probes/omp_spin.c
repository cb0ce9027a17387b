#include "omp_spin.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "callgrind.h"
#include "timer.h"

extern char **environ;

/* ---- the CPUs' idle share over 50 ms (the tie-breaker) ---- */

/* The "cpu " line's fields (user nice system idle iowait irq softirq steal; later ones, guest
 * time, are already in user): idle + iowait and the sum of all eight, in USER_HZ ticks. */
static int stat_cpu_ticks(const char *text, double *idle, double *total) {
    if (!text || strncmp(text, "cpu ", 4) != 0) return -1;
    const char *s = text + 4;
    unsigned long long v[8];
    for (int i = 0; i < 8; i++) {
        while (*s == ' ') s++;
        if (*s < '0' || *s > '9') return -1;
        char *end;
        errno = 0;
        v[i] = strtoull(s, &end, 10);
        if (errno || end == s) return -1;
        s = end;
    }
    *idle = (double)v[3] + (double)v[4];
    *total = 0;
    for (int i = 0; i < 8; i++) *total += (double)v[i];
    return 0;
}

double omp_spin_idle_cpus(const char *stat_before, const char *stat_after, int ncpu, double own_ticks) {
    double i0, t0, i1, t1;
    if (ncpu < 1 || !(own_ticks >= 0) || stat_cpu_ticks(stat_before, &i0, &t0) || stat_cpu_ticks(stat_after, &i1, &t1)) return -1;
    if (!(t1 > t0) || i1 < i0 || i1 - i0 > t1 - t0) return -1; /* no time passed, or counters that went back */
    double free_share = (i1 - i0 + own_ticks) / (t1 - t0);
    return (double)ncpu * (free_share < 1 ? free_share : 1);
}

const char *omp_spin_for_idle(double idle_cpus, int ncpu) {
    return idle_cpus >= 0 && ncpu >= 1 && idle_cpus >= (double)ncpu - 0.5 ? OMP_SPIN_LONG : OMP_SPIN_SHORT;
}

/* This process's CPU time, all its threads, in seconds. */
static double own_cpu_s(void) {
    struct timespec ts;
    return clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0 ? (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec : 0;
}

/* The first line of /proc/stat into buf (empty when unreadable). */
static void read_proc_stat(char *buf, size_t len) {
    buf[0] = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return;
    if (!fgets(buf, (int)len, f)) buf[0] = 0;
    fclose(f);
}

/* CPUs free of other programs over the next 50 ms (5 USER_HZ ticks a CPU); -1 when unknown. */
static double idle_cpus_now(int ncpu) {
    char a[512], b[512];
    double own0 = own_cpu_s();
    read_proc_stat(a, sizeof a);
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    read_proc_stat(b, sizeof b);
    double own = own_cpu_s() - own0, hz = (double)sysconf(_SC_CLK_TCK);
    return omp_spin_idle_cpus(a, b, ncpu, own > 0 && hz > 0 ? own * hz : 0);
}

/* ---- the step, timed under the spin in force ---- */

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void busy_wait(double s) {
    const double t0 = timer_now_s();
    while (timer_now_s() - t0 < s) {
    }
}

xf_status omp_spin_step_time(int threads, int regions, double *out_s) {
    enum { BATCHES = 5 };
    if (threads < 1 || threads > 4096 || regions < BATCHES || regions > 100000 || !out_s)
        return xf_errorf(XF_EINVAL, "omp_spin_step_time: threads %d, regions %d out of range", threads, regions);
    const int per = regions / BATCHES;
    double batch[BATCHES];
#pragma omp parallel num_threads(threads)
    busy_wait(OMP_SPIN_STEP_WORK_S); /* the pool exists before the first timed region */
    for (int b = 0; b < BATCHES; b++) {
        const double t0 = timer_now_s();
        for (int i = 0; i < per; i++) {
            busy_wait(OMP_SPIN_STEP_GAP_S); /* the serial gap between two ops */
#pragma omp parallel num_threads(threads)
            busy_wait(OMP_SPIN_STEP_WORK_S);
        }
        batch[b] = (timer_now_s() - t0) / per;
    }
    qsort(batch, BATCHES, sizeof batch[0], cmp_d);
    *out_s = batch[BATCHES / 2];
    return XF_OK;
}

void omp_spin_probe_child(void) {
    if (!getenv(OMP_SPIN_PROBE_ENV)) return;
    int threads = omp_get_max_threads();
    double s = 0;
    if (threads < 1 || threads > 4096 || omp_spin_step_time(threads, 200, &s)) _exit(1);
    printf("%.9g\n", s);
    fflush(stdout);
    _exit(0);
}

/* ---- the choice: the step under each spin, each in a child process ---- */

const char *omp_spin_pick(double long_s, double short_s, double idle_cpus, int ncpu) {
    const int measured = long_s > 0 && isfinite(long_s) && short_s > 0 && isfinite(short_s);
    if (measured && long_s * (1 + OMP_SPIN_TIE_SHARE) < short_s) return OMP_SPIN_LONG;
    if (measured && short_s * (1 + OMP_SPIN_TIE_SHARE) < long_s) return OMP_SPIN_SHORT;
    return omp_spin_for_idle(idle_cpus, ncpu);
}

/* This program again (/proc/self/exe, no arguments) with GOMP_SPINCOUNT=spin, timing the step
 * (omp_spin_probe_child). Its seconds a region; -1 when it could not start, failed, printed
 * nonsense or took over 5 s (then it is killed). One OpenBLAS thread: its pool would spin beside
 * the step right after loading. */
static double step_in_child(const char *spin) {
    size_t n = 0;
    while (environ && environ[n]) n++;
    char **envp = calloc(n + 4, sizeof *envp);
    char spin_var[64];
    if (!envp) return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) /* everything but what is set below */
        if (strncmp(environ[i], "GOMP_SPINCOUNT=", 15) && strncmp(environ[i], "OMP_WAIT_POLICY=", 16) &&
            strncmp(environ[i], "OPENBLAS_NUM_THREADS=", 21) && strncmp(environ[i], OMP_SPIN_PROBE_ENV "=", sizeof OMP_SPIN_PROBE_ENV))
            envp[k++] = environ[i];
    snprintf(spin_var, sizeof spin_var, "GOMP_SPINCOUNT=%s", spin);
    envp[k++] = spin_var;
    envp[k++] = OMP_SPIN_PROBE_ENV "=1";
    envp[k++] = "OPENBLAS_NUM_THREADS=1";
    envp[k] = NULL;
    int fd[2];
    double out = -1;
    if (pipe(fd)) {
        free(envp);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    posix_spawn_file_actions_addclose(&fa, fd[1]);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0); /* e.g. valgrind refusing to start its tool directly */
    char *argv[] = {"xfprof-omp-spin-probe", NULL};
    pid_t pid;
    const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    close(fd[1]);
    if (rc) {
        close(fd[0]);
        return -1;
    }
    char buf[64];
    size_t got = 0;
    const double deadline = timer_now_s() + 5;
    for (;;) {
        const double left = deadline - timer_now_s();
        struct pollfd p = {fd[0], POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0) break;
        ssize_t r = read(fd[0], buf + got, sizeof buf - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
        if (got >= sizeof buf - 1) break;
    }
    close(fd[0]);
    int st = 0;
    if (timer_now_s() >= deadline) kill(pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    buf[got] = 0;
    char *end;
    const double s = strtod(buf, &end);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && end != buf && *end == '\n' && s > 0 && s < 1) out = s;
    return out;
}

/* Waits (at most 0.5 s) until this process's own threads are quiet: OpenBLAS's pool spins for
 * ~0.1 s after the library loads, on a CPU the children's step needs (measured here: the step
 * under 3000 spins took 163-179 us instead of 61-76 beside it; the wait was 0.11-0.12 s). */
static void wait_own_threads_quiet(void) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 50; i++) {
        const double c0 = own_cpu_s();
        nanosleep(&ts, NULL);
        if (own_cpu_s() - c0 < 1e-3) break; /* under a tenth of a CPU over 10 ms */
    }
}

const char *omp_spin_choose(char *why, size_t len) {
    const int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN), threads = omp_get_max_threads();
    wait_own_threads_quiet();
    const double idle = idle_cpus_now(ncpu);
    char idle_txt[64];
    if (idle < 0) snprintf(idle_txt, sizeof idle_txt, "/proc/stat unreadable");
    else snprintf(idle_txt, sizeof idle_txt, "%.2f of %d CPUs free over 50 ms", idle, ncpu);
    if (callgrind_running()) { /* /proc/self/exe is valgrind's tool, which will not start by itself */
        snprintf(why, len, "xfprof's choice: under valgrind, the step not timed; %s", idle_txt);
        return omp_spin_for_idle(idle, ncpu);
    }
    if (threads < 2) {
        snprintf(why, len, "xfprof's choice: one OpenMP thread, nothing to time; %s", idle_txt);
        return omp_spin_for_idle(idle, ncpu);
    }
    /* short, long, long, short: a machine that gets busier or quieter meanwhile weighs on both alike */
    double t_short = -1, t_long = -1, t[4];
    const char *order[4] = {OMP_SPIN_SHORT, OMP_SPIN_LONG, OMP_SPIN_LONG, OMP_SPIN_SHORT};
    for (int i = 0; i < 4; i++) t[i] = step_in_child(order[i]);
    /* the faster of each pair: a hiccup only ever slows a child (one of 12 here took 144 us where
     * its pair took 62) */
    if (t[0] > 0 && t[3] > 0) t_short = fmin(t[0], t[3]);
    if (t[1] > 0 && t[2] > 0) t_long = fmin(t[1], t[2]);
    const char *spin = omp_spin_pick(t_long, t_short, idle, ncpu);
    const int tie = !(t_long * (1 + OMP_SPIN_TIE_SHARE) < t_short || t_short * (1 + OMP_SPIN_TIE_SHARE) < t_long);
    if (t_short > 0 && t_long > 0)
        snprintf(why, len, "xfprof's choice: %d-thread %.0f us ops took %.0f us each under %s spins, %.0f under %s%s; %s",
                 threads, 1e6 * (OMP_SPIN_STEP_WORK_S + OMP_SPIN_STEP_GAP_S), 1e6 * t_long, OMP_SPIN_LONG, 1e6 * t_short,
                 OMP_SPIN_SHORT, tie ? " (a tie: idle share decides)" : "",
                 idle_txt);
    else snprintf(why, len, "xfprof's choice: the step could not be timed in a child process; %s", idle_txt);
    return spin;
}

/* ---- what is in force ---- */

void omp_spin_describe(char *buf, size_t len) {
    const char *pol = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT"), *why = getenv(OMP_SPIN_WHY_ENV);
    snprintf(buf, len, "OMP_WAIT_POLICY=%.40s, GOMP_SPINCOUNT=%.40s%s%.200s%s", pol ? pol : "(unset)", spin ? spin : "(unset)",
             why ? " (" : "", why ? why : "", why ? ")" : "");
}

void omp_spin_in_force(char *spin, size_t len, char *by, size_t by_len, int choose) {
    const char *pol = getenv("OMP_WAIT_POLICY"), *sc = getenv("GOMP_SPINCOUNT");
    if (sc) snprintf(spin, len, "GOMP_SPINCOUNT=%.32s", sc);
    else if (pol) snprintf(spin, len, "OMP_WAIT_POLICY=%.32s", pol);
    else if (choose) {
        char why[256];
        snprintf(spin, len, "GOMP_SPINCOUNT=%s", omp_spin_choose(why, sizeof why));
        snprintf(by, by_len, "xfprof");
        return;
    } else snprintf(spin, len, "libgomp default");
    snprintf(by, by_len, "%s", sc && getenv(OMP_SPIN_WHY_ENV) ? "xfprof" : sc || pol ? "user" : "nobody");
}
