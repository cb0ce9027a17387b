/* Roofline analysis: intensity, ridge, predicted time and the class of each op, and the roll-ups
 * of a point (phase times, shares, TTFT / TPOT / tokens/s). Pure functions, no I/O. */
#include "roofline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/stats.h"

/* Utilizations come from ratios of measured doubles: 0.7 - 0.6 is 0.0999...98 in binary, so
 * comparisons against the thresholds allow this much slack. */
#define THRESH_EPS 1e-9

void roofline_thresholds_default(roofline_thresholds *t) {
    if (!t) return;
    t->saturated = 0.80;
    t->latency = 0.60;
    t->gap = 0.10;
}

xf_bound roofline_class_predicted(double intensity, double ridge) {
    return intensity < ridge ? XF_BOUND_MEMORY : XF_BOUND_COMPUTE;
}

xf_bound roofline_class_measured(double u_compute, double u_memory, const roofline_thresholds *t) {
    roofline_thresholds def;
    if (!t) {
        roofline_thresholds_default(&def);
        t = &def;
    }
    /* NaN (no time, no bytes) is no evidence of saturation. */
    if (!(u_compute >= 0.0)) u_compute = 0.0;
    if (!(u_memory >= 0.0)) u_memory = 0.0;
    int c_sat = u_compute >= t->saturated - THRESH_EPS;
    int m_sat = u_memory >= t->saturated - THRESH_EPS;
    double diff = u_compute - u_memory;
    if (c_sat || m_sat) {
        /* One saturated unit is the bottleneck; both saturated: the higher, a tie is balanced. */
        if (c_sat && m_sat) {
            if (fabs(diff) <= THRESH_EPS) return XF_BOUND_BALANCED;
            return diff > 0 ? XF_BOUND_COMPUTE : XF_BOUND_MEMORY;
        }
        return c_sat ? XF_BOUND_COMPUTE : XF_BOUND_MEMORY;
    }
    if (u_compute < t->latency - THRESH_EPS && u_memory < t->latency - THRESH_EPS) return XF_BOUND_LATENCY;
    if (fabs(diff) >= t->gap - THRESH_EPS) return diff > 0 ? XF_BOUND_COMPUTE : XF_BOUND_MEMORY;
    return XF_BOUND_BALANCED;
}

double roofline_attainable(double intensity, double peak_flops, double bandwidth_Bps) {
    double mem = intensity * bandwidth_Bps;
    return mem < peak_flops ? mem : peak_flops;
}

const device_link *roofline_link_of(const cost_op *op, const device_spec *d) {
    if (!op || !d || !op_kind_is_comm(op->kind)) return NULL;
    return op->comm_node ? &d->node_link : &d->link;
}

/* A collective: hops * latency + bus bytes / link bandwidth (the alpha-beta model of the named
 * algorithm; nccl-tests' bus bandwidth is what the link's figure bounds). */
static void comm_terms(const cost_op *op, const device_spec *d, double *t_latency, double *t_bandwidth) {
    const device_link *l = roofline_link_of(op, d);
    *t_latency = l ? (double)op->comm_hops * l->latency_s : 0.0;
    *t_bandwidth = l && l->bandwidth_Bps > 0.0 ? op->comm_bytes / l->bandwidth_Bps : 0.0;
}

/* A ceiling of 0 (unknown) leaves its term out rather than dividing by zero; devices that pass
 * device_list_parse have positive bandwidth and FP32 peak. */
double roofline_predict_time(const cost_op *op, const device_spec *d) {
    if (!op || !d) return 0.0;
    if (op_kind_is_comm(op->kind)) {
        double tl, tb;
        comm_terms(op, d, &tl, &tb);
        return tl + tb;
    }
    double peak = device_peak(d, op->compute);
    double t_compute = peak > 0.0 ? op->flops / peak : 0.0;
    double t_memory = d->bandwidth_Bps > 0.0 ? op->bytes / d->bandwidth_Bps : 0.0;
    return t_compute > t_memory ? t_compute : t_memory;
}

static double safe_div(double a, double b) { return b > 0.0 ? a / b : 0.0; }

void roofline_predict_op(const cost_op *op, const device_spec *d, record_op *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!op) return;
    out->cost = *op;
    out->intensity = safe_div(op->flops, op->bytes);
    out->bound = d ? roofline_class_predicted(out->intensity, device_ridge(d, op->compute)) : XF_BOUND_MEMORY;
    if (d && op_kind_is_comm(op->kind)) { /* the link's bandwidth or its latency, whichever term is larger */
        double tl, tb;
        comm_terms(op, d, &tl, &tb);
        out->bound = tb >= tl ? XF_BOUND_COMM : XF_BOUND_LATENCY;
    }
    out->predicted_time_s = roofline_predict_time(op, d);
    out->time_s = out->predicted_time_s; /* utilizations stay 0: they are for measured ops */
}

void roofline_measure_op(record_op *out, const device_spec *d, const roofline_thresholds *t) {
    if (!out || !d) return;
    double bytes = (out->bytes_from_counters && out->measured_bytes > 0.0) ? out->measured_bytes : out->cost.bytes;
    out->intensity = safe_div(out->cost.flops, bytes);
    out->predicted_time_s = roofline_predict_time(&out->cost, d);
    if (out->time_s > 0.0) {
        out->util_compute = safe_div(out->cost.flops / out->time_s, device_peak(d, out->cost.compute));
        out->util_memory = safe_div(bytes / out->time_s, d->bandwidth_Bps);
    } else {
        out->util_compute = 0.0;
        out->util_memory = 0.0;
    }
    out->util_compute_machine = out->util_compute; /* no concurrent ceilings: the same figures */
    out->util_memory_machine = out->util_memory;
    out->bound = roofline_class_measured(out->util_compute, out->util_memory, t);
    if (op_kind_is_comm(out->cost.kind)) { /* the link is the one unit: its utilization decides */
        roofline_thresholds def;
        if (!t) {
            roofline_thresholds_default(&def);
            t = &def;
        }
        const device_link *l = roofline_link_of(&out->cost, d);
        out->util_link = out->time_s > 0.0 && l ? safe_div(out->cost.comm_bytes / out->time_s, l->bandwidth_Bps) : 0.0;
        out->bound = out->util_link >= t->latency - THRESH_EPS ? XF_BOUND_COMM : XF_BOUND_LATENCY;
    }
}

void roofline_summarize_point(record_point *p) {
    if (!p) return;
    record_summary *s = &p->summary;
    double phase_time[XF_PHASE_COUNT] = {0.0, 0.0};
    double bound_time[XF_PHASE_COUNT][XF_BOUND_COUNT];
    memset(bound_time, 0, sizeof bound_time);
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        if (op->cost.phase < 0 || op->cost.phase >= XF_PHASE_COUNT) continue;
        phase_time[op->cost.phase] += op->time_s;
        if (op->bound >= 0 && op->bound < XF_BOUND_COUNT) bound_time[op->cost.phase][op->bound] += op->time_s;
    }
    for (int64_t i = 0; i < p->n_ops; i++) {
        record_op *op = &p->ops[i];
        if (op->cost.phase < 0 || op->cost.phase >= XF_PHASE_COUNT) continue;
        op->share = safe_div(op->time_s, phase_time[op->cost.phase]);
    }
    const double B = (double)p->wl.batch, gen = (double)p->wl.gen, prompt = (double)p->wl.prompt;
    const double steps = (double)workload_decode_steps(&p->wl);
    s->prefill_time_s = phase_time[XF_PREFILL];
    s->decode_time_s = phase_time[XF_DECODE];
    s->ttft_s = s->prefill_time_s;
    s->tpot_s = s->decode_time_s;
    /* A request: one prefill step (the first token), then gen - 1 decode steps (each at the
     * summarised context). */
    double request = s->ttft_s + steps * s->tpot_s;
    s->tokens_per_s = safe_div(B * gen, request);
    s->prefill_tokens_per_s = safe_div(B * prompt, s->ttft_s);
    s->decode_tokens_per_s = safe_div(B, s->tpot_s);
    for (int b = 0; b < XF_BOUND_COUNT; b++)
        s->share_bound[b] = safe_div(bound_time[XF_PREFILL][b] + steps * bound_time[XF_DECODE][b], request);
}

void roofline_layer_times(const record_point *p, xf_phase phase, int64_t n_layers, double *times) {
    if (!times || n_layers < 0) return;
    for (int64_t i = 0; i <= n_layers; i++) times[i] = 0.0;
    if (!p) return;
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        if (op->cost.phase != phase) continue;
        if (op->cost.layer < 0)
            times[0] += op->time_s;
        else if (op->cost.layer < n_layers)
            times[op->cost.layer + 1] += op->time_s;
    }
}

int roofline_rep_ceiling(const record_concurrent *cc, int r, double *bw_Bps, double *fp32_flops) {
    if (!cc || cc->n_pulses < 2 || cc->pulse_every < 1 || r < 0) return 0;
    int a = r / cc->pulse_every, b = a + 1;
    if (b >= cc->n_pulses) return 0;
    *bw_Bps = 0.5 * (cc->pulse_bandwidth_Bps[a] + cc->pulse_bandwidth_Bps[b]);
    *fp32_flops = 0.5 * (cc->pulse_fp32_flops[a] + cc->pulse_fp32_flops[b]);
    return 1;
}

void roofline_rep_utils(const record_op *op, const device_spec *d, const record_concurrent *cc, int r, double *u_compute,
                        double *u_memory) {
    *u_compute = *u_memory = 0.0;
    if (!op || !d || r < 0 || r >= op->n_samples || !op->samples_s) return;
    double t = op->samples_s[r];
    if (!(t > 0.0)) return;
    double bytes = (op->bytes_from_counters && op->measured_bytes > 0.0) ? op->measured_bytes : op->cost.bytes;
    double bw = d->bandwidth_Bps, peak = device_peak(d, op->cost.compute), cbw, cfp;
    if (cc && cc->machine_fp32_flops > 0 && roofline_rep_ceiling(cc, r, &cbw, &cfp)) {
        bw = cbw;
        peak *= cfp / cc->machine_fp32_flops;
    }
    *u_compute = safe_div(op->cost.flops / t, peak);
    *u_memory = safe_div(bytes / t, bw);
}

void roofline_measure_op_concurrent(record_op *out, const device_spec *d, const record_concurrent *cc, int reps,
                                    const roofline_thresholds *t) {
    if (!out || !d) return;
    roofline_measure_op(out, d, t);
    double bw, fp;
    if (!cc || reps < 1 || out->n_samples != reps || !out->samples_s || !roofline_rep_ceiling(cc, 0, &bw, &fp)) return;
    double *uc = malloc(2 * (size_t)reps * sizeof *uc);
    if (!uc) return; /* out of memory: the machine file's class stands */
    double *um = uc + reps;
    for (int r = 0; r < reps; r++) roofline_rep_utils(out, d, cc, r, &uc[r], &um[r]);
    double mc = stats_median(uc, (size_t)reps), mm = stats_median(um, (size_t)reps);
    free(uc);
    if (!isfinite(mc) || !isfinite(mm)) return;
    out->util_compute = mc;
    out->util_memory = mm;
    out->bound = roofline_class_measured(mc, mm, t);
}

void roofline_concurrent_finish(record_concurrent *cc, int reps, double threshold) {
    if (!cc) return;
    cc->threshold = threshold;
    cc->contended = 0;
    cc->bandwidth_Bps = cc->fp32_flops = 0.0;
    if (reps < 1 || cc->n_pulses < 2) return;
    double *bw = malloc(2 * (size_t)reps * sizeof *bw);
    if (!bw) return;
    double *fp = bw + reps;
    int n = 0;
    for (int r = 0; r < reps; r++)
        if (roofline_rep_ceiling(cc, r, &bw[n], &fp[n])) n++;
    if (n > 0) {
        cc->bandwidth_Bps = stats_median(bw, (size_t)n);
        cc->fp32_flops = stats_median(fp, (size_t)n);
    }
    free(bw);
    if (cc->machine_bandwidth_Bps > 0 && cc->bandwidth_Bps < (1.0 - threshold) * cc->machine_bandwidth_Bps) cc->contended = 1;
    if (cc->machine_fp32_flops > 0 && cc->fp32_flops < (1.0 - threshold) * cc->machine_fp32_flops) cc->contended = 1;
    if (roofline_cpu_contended(cc)) cc->contended = 1; /* a core shared with another process */
}

int roofline_cpu_contended(const record_concurrent *cc) {
    return cc && cc->cpu_wait_measured && cc->cpu_wait_share > cc->threshold;
}
