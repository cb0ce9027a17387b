/* The interconnect ceiling, measured as nccl-tests measures it: the all-reduce's time over
 * message sizes, algorithm bandwidth algbw = bytes / time, bus bandwidth busbw = algbw * 2(n-1)/n
 * (the bytes each rank's link carries in a ring, nccl-tests' PERFORMANCE.md), the slowest rank's
 * time. The ceiling is the largest busbw over the sizes, the latency the smallest message's time
 * per ring step (2(n-1) of them). The transport is a function table (MPI on the CPU:
 * runner/comm.h; NCCL on GPUs), so this logic is tested on recorded times. */
#ifndef XF_COMM_CEILING_H
#define XF_COMM_CEILING_H

#include <stdint.h>

#include "core/device.h"
#include "core/status.h"

typedef struct comm_ceiling_ops {
    void *ctx;
    int ranks; /* n >= 2 */
    /* In-place sum of n floats over the ranks. */
    xf_status (*allreduce)(void *ctx, float *buf, int64_t n);
    /* The largest of *v over the ranks. */
    xf_status (*max)(void *ctx, double *v);
    double (*now)(void *ctx); /* seconds, monotonic */
} comm_ceiling_ops;

#define COMM_CEILING_MAX_SIZES 32

typedef struct comm_ceiling_result {
    int ranks;
    int n_sizes;
    double bytes[COMM_CEILING_MAX_SIZES];   /* (n_sizes) message size: the buffer each rank all-reduces */
    double time_s[COMM_CEILING_MAX_SIZES];  /* (n_sizes) the slowest rank's median time of one all-reduce */
    double algbw[COMM_CEILING_MAX_SIZES];   /* (n_sizes) bytes / time */
    double busbw[COMM_CEILING_MAX_SIZES];   /* (n_sizes) algbw * 2(n-1)/n */
    double bandwidth_Bps;                   /* the largest busbw: the link's ceiling */
    double latency_s;                       /* the smallest message's time / 2(n-1) */
} comm_ceiling_result;

/* nccl-tests' bus bandwidth of an all-reduce of `bytes` in `seconds` over n ranks. */
double comm_busbw_allreduce(double bytes, double seconds, int n);

/* Measures all-reduces of min_bytes .. max_bytes (doubling, fp32 elements), `reps` timed after a
 * warm-up each, into *out. XF_EINVAL for fewer than 2 ranks or bad sizes; the transport's error
 * otherwise. */
xf_status comm_ceiling_measure(const comm_ceiling_ops *ops, double min_bytes, double max_bytes, int reps,
                               comm_ceiling_result *out);

/* The result as a device link named `name` with the source saying how it was measured. */
void comm_ceiling_link(const comm_ceiling_result *r, const char *name, device_link *out);

#endif
