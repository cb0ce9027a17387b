#include "omp_spin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the CPUs' idle share, in windows of 50 ms ---- */

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

/* CPUs free of other programs over the next window; -1 when unknown. */
static double idle_cpus_now(int ncpu) {
    char a[512], b[512];
    double own0 = own_cpu_s();
    read_proc_stat(a, sizeof a);
    struct timespec ts = {0, (long)(OMP_SPIN_WINDOW_S * 1e9)};
    nanosleep(&ts, NULL);
    read_proc_stat(b, sizeof b);
    double own = own_cpu_s() - own0, hz = (double)sysconf(_SC_CLK_TCK);
    return omp_spin_idle_cpus(a, b, ncpu, own > 0 && hz > 0 ? own * hz : 0);
}

int omp_spin_window_free(double idle_cpus, int ncpu) { return idle_cpus >= 0 && ncpu >= 1 && idle_cpus >= (double)ncpu - 0.5; }

const char *omp_spin_for_windows(const double *idle_cpus, int n, int ncpu) {
    for (int i = 0; i < n; i++)
        if (omp_spin_window_free(idle_cpus[i], ncpu)) return OMP_SPIN_LONG;
    return OMP_SPIN_SHORT;
}

const char *omp_spin_choose(char *why, size_t len) {
    const int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    double idle[OMP_SPIN_WINDOWS], most = -1;
    int n = 0;
    while (n < OMP_SPIN_WINDOWS && !(n > 0 && omp_spin_window_free(idle[n - 1], ncpu))) {
        idle[n] = idle_cpus_now(ncpu);
        most = idle[n] > most ? idle[n] : most;
        if (idle[n++] < 0) break; /* /proc/stat unreadable: it will not get readable */
    }
    const char *spin = omp_spin_for_windows(idle, n, ncpu);
    if (most < 0) snprintf(why, len, "xfprof's choice: /proc/stat unreadable, the short spin");
    else if (!strcmp(spin, OMP_SPIN_LONG))
        snprintf(why, len, "xfprof's choice: %.2f of %d CPUs free of other programs in %.0f ms window %d of up to %d", idle[n - 1], ncpu,
                 1e3 * OMP_SPIN_WINDOW_S, n, OMP_SPIN_WINDOWS);
    else
        snprintf(why, len, "xfprof's choice: at most %.2f of %d CPUs free of other programs in %d windows of %.0f ms", most, ncpu, n,
                 1e3 * OMP_SPIN_WINDOW_S);
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
