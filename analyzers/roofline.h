/* Roofline analysis: where an op sits against a device's ceilings, and its class.
 * Pure functions; no I/O. DESIGN.md "Classification" is the rule. */
#ifndef XF_ROOFLINE_H
#define XF_ROOFLINE_H

#include "core/device.h"
#include "core/record.h"
#include "reference_model/cost_model.h"

/* Nsight Compute's speed-of-light rule, as parameters. */
typedef struct roofline_thresholds {
    double saturated; /* a unit at or above this utilization is the bottleneck (0.80) */
    double latency;   /* both below this: latency-bound (0.60) */
    double gap;       /* otherwise a gap of at least this names the higher one (0.10) */
} roofline_thresholds;

void roofline_thresholds_default(roofline_thresholds *t);

/* From the cost model alone: intensity below the ridge -> memory, else compute. */
xf_bound roofline_class_predicted(double intensity, double ridge);

/* From measured utilizations u_c (compute) and u_m (memory), both fractions of peak. */
xf_bound roofline_class_measured(double u_compute, double u_memory, const roofline_thresholds *t);

/* Attainable FLOP/s at intensity I: min(P, I * B). */
double roofline_attainable(double intensity, double peak_flops, double bandwidth_Bps);

/* The link a collective (op_kind_is_comm) runs over: d->node_link when op->comm_node, else
 * d->link; NULL for any other op. Points into d. */
const device_link *roofline_link_of(const cost_op *op, const device_spec *d);

/* Predicted time max(F / P, Q / B) with P the peak for the op's compute type. A collective:
 * comm_hops * latency + comm_bytes / bandwidth of its link (0 for a term the link does not know).
 * Its class: communication-bound when the bandwidth term is the larger, else latency-bound;
 * measured, communication-bound when its link utilization (util_link) reaches the latency
 * threshold (60%), else latency-bound. */
double roofline_predict_time(const cost_op *op, const device_spec *d);

/* Fills a record_op from a cost_op with the predicted time and class (not measured). */
void roofline_predict_op(const cost_op *op, const device_spec *d, record_op *out);

/* Given out->time_s measured (and out->cost / measured_bytes filled), sets utilizations,
 * intensity and the measured class. */
void roofline_measure_op(record_op *out, const device_spec *d, const roofline_thresholds *t);

/* Fills a point's shares (each op's share of its phase step) and summary from its ops and
 * workload: TTFT, TPOT, tokens/s, phase times, share of request time per class. */
void roofline_summarize_point(record_point *p);

/* Per-layer roll-up: time per layer for a phase. times[layer + 1] gets layer `layer`'s time
 * (index 0 is the ops outside the layers). `times` holds n_layers + 1 entries. */
void roofline_layer_times(const record_point *p, xf_phase phase, int64_t n_layers, double *times);

#endif
