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

/* ---- concurrent ceilings (record_concurrent: pulses around the repetitions) ---- */

/* The default share by which a concurrent ceiling must fall below the machine file's for the run
 * to be called contended. */
#define ROOFLINE_CONTENDED_SHARE 0.15

/* The ceilings repetition r was measured between: the mean of the read bandwidths and of the
 * FP32 rates of the two pulses around it. Returns 0 (outputs untouched) when cc has no pulses or
 * r is out of range. */
int roofline_rep_ceiling(const record_concurrent *cc, int r, double *bw_Bps, double *fp32_flops);

/* The utilizations of repetition r of op (its sample r): against d's ceilings, or, when cc has
 * pulses, against the read bandwidth around r and the peak of the op's compute type scaled by
 * the FP32 rate around r over cc->machine_fp32_flops. Zero when the sample is not positive. */
void roofline_rep_utils(const record_op *op, const device_spec *d, const record_concurrent *cc, int r, double *u_compute,
                        double *u_memory);

/* roofline_measure_op, and then, when cc has pulses and the op one sample per repetition (reps
 * of them): util_compute_machine / util_memory_machine keep the machine file's utilizations,
 * util_compute / util_memory become the medians over the repetitions of roofline_rep_utils, and
 * the class is theirs. cc NULL or without pulses: roofline_measure_op, the machine figures copied. */
void roofline_measure_op_concurrent(record_op *out, const device_spec *d, const record_concurrent *cc, int reps,
                                    const roofline_thresholds *t);

/* From cc's pulses (n_pulses, pulse_every set) and machine figures: the medians over `reps`
 * repetitions of the ceilings around each, and contended = either median more than `threshold`
 * below the machine's, or the model's threads waiting for a CPU more than `threshold` of the
 * time (cpu_wait_share, when measured). */
void roofline_concurrent_finish(record_concurrent *cc, int reps, double threshold);

/* 1 when cc's CPU wait was measured and is above cc->threshold: the model's threads waited for a
 * CPU that another process held, and every op time of the point holds those waits. */
int roofline_cpu_contended(const record_concurrent *cc);

#endif
