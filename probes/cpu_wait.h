/* How long the model's threads waited for a CPU: each OpenMP team thread's run-queue wait (the
 * second field of /proc/self/task/TID/schedstat, kernels with CONFIG_SCHED_INFO), read around each
 * repetition. On a core shared with another process an op's wall time holds these waits, and a
 * short ceiling pulse sees them only by chance (a 0.3-10 ms sample of a time-sliced core waits a
 * whole slice or not at all), so this is the direct measure of that kind of contention. */
#ifndef XF_CPU_WAIT_H
#define XF_CPU_WAIT_H

#include "core/status.h"

typedef struct cpu_wait cpu_wait;

/* Opens the schedstat of each thread of an OpenMP team of `threads` (1 .. 4096) started here; the
 * runtime keeps those threads for later teams of that size. *out NULL with XF_OK where the kernel
 * has no schedstat (not measured); XF_EINVAL for bad arguments, XF_ENOMEM. */
xf_status cpu_wait_open(int threads, cpu_wait **out);

/* Each team thread's run-queue wait so far, in seconds, into wait_s (threads of them). Returns 0
 * (wait_s untouched) when a thread's file can no longer be read: the runtime replaced its team. */
int cpu_wait_read(const cpu_wait *w, double *wait_s);

/* The largest growth of any thread's wait between two reads of `threads` values each, as a share
 * of wall_s (the repetition's wall time): on barrier-bound work the slowest thread sets the pace.
 * Clamped to [0, 1]; 0 when wall_s <= 0. */
double cpu_wait_share(const double *before_s, const double *after_s, int threads, double wall_s);

int cpu_wait_threads(const cpu_wait *w); /* the team size it was opened for (0 for NULL) */
void cpu_wait_free(cpu_wait *w);          /* NULL is fine */

#endif
