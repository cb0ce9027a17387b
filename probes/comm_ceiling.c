/* The interconnect ceiling as nccl-tests measures it (comm_ceiling.h). */
#include "probes/comm_ceiling.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double comm_busbw_allreduce(double bytes, double seconds, int n) {
    if (!(seconds > 0) || n < 2) return 0.0;
    return bytes / seconds * 2.0 * (n - 1) / n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

xf_status comm_ceiling_measure(const comm_ceiling_ops *ops, double min_bytes, double max_bytes, int reps,
                               comm_ceiling_result *out) {
    memset(out, 0, sizeof *out);
    if (!ops || !ops->allreduce || !ops->max || !ops->now) return xf_errorf(XF_EINVAL, "comm ceiling: no transport");
    if (ops->ranks < 2) return xf_errorf(XF_EINVAL, "comm ceiling: %d rank(s): an all-reduce needs 2 or more", ops->ranks);
    if (!(min_bytes >= 4) || !(max_bytes >= min_bytes) || max_bytes > 4e9 || reps < 1 || reps > 1000)
        return xf_errorf(XF_EINVAL, "comm ceiling: sizes %.0f..%.0f bytes, %d repetitions: give 4 <= min <= max <= 4e9 and 1..1000",
                         min_bytes, max_bytes, reps);
    const int64_t max_n = (int64_t)(max_bytes / 4);
    float *buf = malloc((size_t)max_n * sizeof *buf);
    double *t = malloc((size_t)reps * sizeof *t);
    if (!buf || !t) {
        free(buf);
        free(t);
        return xf_errorf(XF_ENOMEM, "comm ceiling: out of memory for %.0f bytes", max_bytes);
    }
    for (int64_t i = 0; i < max_n; i++) buf[i] = 1.0f;
    xf_status s = XF_OK;
    out->ranks = ops->ranks;
    for (double b = min_bytes; b <= max_bytes && out->n_sizes < COMM_CEILING_MAX_SIZES; b *= 2) {
        const int64_t n = (int64_t)(b / 4);
        if ((s = ops->allreduce(ops->ctx, buf, n))) break; /* warm-up */
        for (int r = 0; r < reps && !s; r++) {
            double t0 = ops->now(ops->ctx);
            s = ops->allreduce(ops->ctx, buf, n);
            t[r] = ops->now(ops->ctx) - t0;
        }
        if (s) break;
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        double med = t[reps / 2];
        if ((s = ops->max(ops->ctx, &med))) break; /* the slowest rank sets the time */
        const int k = out->n_sizes++;
        out->bytes[k] = (double)n * 4;
        out->time_s[k] = med;
        out->algbw[k] = med > 0 ? out->bytes[k] / med : 0;
        out->busbw[k] = comm_busbw_allreduce(out->bytes[k], med, ops->ranks);
        if (out->busbw[k] > out->bandwidth_Bps) out->bandwidth_Bps = out->busbw[k];
    }
    free(buf);
    free(t);
    if (s) return s;
    if (out->n_sizes > 0) out->latency_s = out->time_s[0] / (2.0 * (ops->ranks - 1));
    return XF_OK;
}

void comm_ceiling_link(const comm_ceiling_result *r, const char *name, device_link *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name ? name : "measured");
    out->bandwidth_Bps = r->bandwidth_Bps;
    out->latency_s = r->latency_s;
    snprintf(out->source, sizeof out->source,
             "measured by xfprof machine: all-reduce over %d ranks, %.0f B to %.0f B, largest bus bandwidth (nccl-tests' "
             "2(n-1)/n convention), latency = the smallest message's time / 2(n-1)",
             r->ranks, r->n_sizes ? r->bytes[0] : 0.0, r->n_sizes ? r->bytes[r->n_sizes - 1] : 0.0);
}
