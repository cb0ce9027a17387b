/* Roll-ups of a record point: its ops summed per (phase, op kind) over the layers, the class of a
 * summed op, the weight of each phase in a request, the op holding the most request time, and the
 * verdict (which class the request's time is in, which phase, which op). Pure functions over
 * records; the terminal table, the Markdown, the HTML report and `show` all use these, so they
 * name the same class for the same op. */
#ifndef XF_ROLLUP_H
#define XF_ROLLUP_H

#include <stdint.h>

#include "core/record.h"

/* One (phase, kind) summed over its instances (layers). */
typedef struct rollup_agg {
    xf_phase phase;
    op_kind kind;
    int first_layer, last_layer;        /* -1, -1 for ops outside the layers */
    int64_t n;                          /* instances summed; 0: the point has no such op */
    int measured;                       /* 1 when any instance was measured */
    double flops, bytes;                /* bytes: the counters' where measured, else the cost model's */
    double time_s, predicted_time_s, spread_s, share;
    double calibrated_time_s; /* the calibrated predictions summed (an op without one counts its bound); issue 17 */
    double class_time[XF_BOUND_COUNT];  /* time of the instances of each class */
    double util_compute, util_memory;   /* time-weighted over the instances */
} rollup_agg;

/* The class of a summed op: measured -> the speed-of-light rule on its combined utilizations (short
 * layers alone can look latency-bound), predicted -> the class holding most of its time. */
xf_bound rollup_class(const rollup_agg *a);

/* Adds x into *into (a pipeline stage summed from op kinds): sums, class times, the time-weighted
 * utilizations; into->phase and kind are x's when *into was empty. */
void rollup_agg_merge(rollup_agg *into, const rollup_agg *x);

/* Every (phase, kind) of p, indexed [phase][kind] (n = 0 where the point has none). */
void rollup_by_kind(const record_point *p, rollup_agg out[XF_PHASE_COUNT][OP_KIND_COUNT]);

/* The same as a list in the point's op order (prefill first), only the kinds present; *out (n
 * entries) is freed by the caller with free(). */
xf_status rollup_point_ops(const record_point *p, rollup_agg **out, int64_t *n);

/* How many times a phase's step runs in one request: the prefill once, decode gen - 1 times. */
double rollup_phase_weight(const record_point *p, xf_phase ph);

/* The verdict of a point: the class holding most of the request's time, the phase holding most,
 * and the single (phase, kind) holding most (with its class). request_s 0: nothing to judge. */
typedef struct rollup_verdict {
    double request_s;       /* TTFT + (gen - 1) TPOT */
    xf_bound top_class;     /* of summary.share_bound */
    double top_class_share;
    xf_phase top_phase;     /* decode when it takes at least as long as the prefill */
    double top_phase_share;
    xf_phase dom_phase;     /* the op holding the most request time */
    op_kind dom_kind;
    xf_bound dom_class;
    double dom_share;
} rollup_verdict;

void rollup_verdict_of(const record_point *p, rollup_verdict *v);

#endif
