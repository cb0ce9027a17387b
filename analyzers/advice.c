#include "advice.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/experts.h"
#include "analyzers/kv.h"
#include "analyzers/predict.h"
#include "analyzers/roofline.h"
#include "core/record_kv.h"
#include "core/units.h"
#include "reference_model/cost_model.h"

/* Predicted decode step time of workload w at its mean decode context. */
static xf_status tpot_of(const model_config *cfg, const workload *w, const device_spec *d, double *t) {
    cost_step_sums s = cost_sums_of_shape(workload_decode_step(w, workload_mean_decode_context(w)));
    return predict_step_time(cfg, w, &s, d, t);
}

/* Intensity and ridge of the decode gate_up projection at batch b. */
static xf_status gate_up_at(const model_config *cfg, const workload *w, const device_spec *d, int64_t b, double *intensity,
                            double *ridge) {
    model_config one = *cfg;
    one.n_layers = 1; /* every layer costs the same */
    workload x = *w;
    x.batch = b;
    cost_op ops[16];
    cost_step_sums s = cost_sums_of_shape(workload_decode_step(&x, workload_mean_decode_context(&x)));
    xf_status st = cost_step_of_sums(&one, &x, &s, ops, 16);
    if (st) return st;
    for (int i = 0; i < 16; i++)
        if (ops[i].kind == OP_GATE_UP) {
            *intensity = ops[i].bytes > 0 ? ops[i].flops / ops[i].bytes : 0;
            *ridge = device_ridge(d, ops[i].compute);
            return XF_OK;
        }
    return xf_errorf(XF_EINVAL, "advice: no gate_up op in the cost model's step");
}

xf_status advice_ridge_batch(const model_config *cfg, const workload *w, const device_spec *d, int64_t limit, int64_t *out) {
    *out = 0;
    double I, R;
    xf_status s;
    if ((s = gate_up_at(cfg, w, d, 1, &I, &R))) return s;
    if (I >= R) {
        *out = 1;
        return XF_OK;
    }
    int64_t lo = 1, hi = 2; /* invariant: lo below the ridge */
    while (1) {
        if (hi > limit) hi = limit;
        if ((s = gate_up_at(cfg, w, d, hi, &I, &R))) return s;
        if (I >= R) break;
        if (hi == limit) return XF_OK; /* never reaches it */
        lo = hi;
        hi *= 2;
    }
    while (hi - lo > 1) { /* intensity grows with the batch: bisect */
        int64_t mid = lo + (hi - lo) / 2;
        if ((s = gate_up_at(cfg, w, d, mid, &I, &R))) return s;
        if (I >= R) hi = mid;
        else lo = mid;
    }
    *out = hi;
    return XF_OK;
}

typedef struct finding_list {
    record_advice *a;
    int n, max;
} finding_list;

/* Keeps the best finding of each kind. */
static void offer(finding_list *l, const record_advice *f) {
    if (!(f->score > 0) || !isfinite(f->score)) return;
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->a[i].kind, f->kind) == 0) {
            if (f->score > l->a[i].score) l->a[i] = *f;
            return;
        }
    if (l->n < l->max) l->a[l->n++] = *f;
}

/* Starts one finding: zeroed, its kind, point, the metric its gain is in, and its title. */
__attribute__((format(printf, 5, 6))) static void advice_begin(record_advice *f, const char *kind, int point,
                                                              const char *gain_metric, const char *title, ...) {
    memset(f, 0, sizeof *f);
    snprintf(f->kind, sizeof f->kind, "%s", kind);
    f->point = point;
    snprintf(f->gain_metric, sizeof f->gain_metric, "%s", gain_metric);
    va_list ap;
    va_start(ap, title);
    vsnprintf(f->title, sizeof f->title, title, ap);
    va_end(ap);
}

/* Ends one finding: its figure before and after, its score; offered to the list. */
static void advice_offer(finding_list *l, record_advice *f, double before, double after, double score) {
    f->before = before;
    f->after = after;
    f->score = score;
    offer(l, f);
}

/* Decode-step figures of a point, from its ops (measured or predicted times alike). */
typedef struct decode_view {
    double step;        /* sum of decode op times */
    double gemm_time;   /* projections (qkv, o_proj, gate_up, down, lm_head) */
    double gemm_mem;    /* ... of which in memory-bound ops */
    double gemm_weight_bytes, gemm_flops;
    double attn_time;   /* attention */
    double kv_read;     /* KV bytes read by attention */
    double bytes;       /* all decode bytes */
    double lat_time, lat_pred; /* latency-bound ops: measured time and their predicted time */
    int n_ops, n_lat;
    int n_tiny;         /* ops predicted under ADVICE_LAUNCH_S */
    double gemm_mem_conf, lat_conf; /* time-weighted class confidence of those ops (confidence.h); -1 none */
} decode_view;

/* ", class confidence 97%" when the ops' classes carry a bootstrap confidence, else "". */
static const char *conf_note(double conf, char *buf, size_t len) {
    if (conf >= 0) snprintf(buf, len, ", class confidence %.0f%%", 100 * conf);
    else buf[0] = 0;
    return buf;
}

static void view_phase(const record_point *p, xf_phase ph, decode_view *v) {
    memset(v, 0, sizeof *v);
    double gc = 0, gt = 0, lc = 0, lt = 0;
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        if (op->cost.phase != ph) continue;
        v->n_ops++;
        v->step += op->time_s;
        v->bytes += op->cost.bytes;
        if (op_kind_is_gemm(op->cost.kind)) {
            v->gemm_time += op->time_s;
            v->gemm_weight_bytes += op->cost.weight_bytes;
            v->gemm_flops += op->cost.flops;
            if (op->bound == XF_BOUND_MEMORY) v->gemm_mem += op->time_s;
            if (op->bound == XF_BOUND_MEMORY && op->confidence_boot > 0) {
                gc += op->confidence * op->time_s;
                gt += op->time_s;
            }
        }
        if (op->cost.kind == OP_ATTENTION) {
            v->attn_time += op->time_s;
            v->kv_read += op->cost.kv_read_bytes;
        }
        if (op->measured && op->bound == XF_BOUND_LATENCY) {
            v->n_lat++;
            v->lat_time += op->time_s;
            v->lat_pred += op->predicted_time_s;
            if (op->confidence_boot > 0) {
                lc += op->confidence * op->time_s;
                lt += op->time_s;
            }
        }
        if (!op->measured && op->predicted_time_s < ADVICE_LAUNCH_S) v->n_tiny++;
    }
    v->gemm_mem_conf = gt > 0 ? gc / gt : -1;
    v->lat_conf = lt > 0 ? lc / lt : -1;
}

static void find_weights(const record *r, int pi, const decode_view *v, finding_list *l) {
    const record_point *p = &r->points[pi];
    const workload *w = &p->wl;
    if (v->step <= 0 || v->gemm_time < ADVICE_MIN_SHARE * v->step || v->gemm_mem < 0.5 * v->gemm_time) return;
    double before;
    if (tpot_of(&r->model, w, &r->device, &before) || !(before > 0)) return;
    char t1[24], t2[24], t3[24], b1[24], cn[40];
    double gi = v->gemm_weight_bytes > 0 ? v->gemm_flops / (v->gemm_weight_bytes) : 0;
    /* Lower weight precision: int8 from 16/32-bit weights (bf16 named too from fp32, int4 from
     * 16-bit), int4 from int8. */
    if (w->wdtype != XF_INT4) {
        workload q = *w;
        q.wdtype = w->wdtype == XF_INT8 ? XF_INT4 : XF_INT8;
        double after, alt = NAN;
        xf_dtype alt_t = w->wdtype == XF_FP32 ? XF_BF16 : XF_INT4;
        if (tpot_of(&r->model, &q, &r->device, &after) == XF_OK && after < before) {
            workload qa = *w;
            qa.wdtype = alt_t;
            if (q.wdtype == XF_INT8 && tpot_of(&r->model, &qa, &r->device, &alt) != XF_OK) alt = NAN;
            record_advice f;
            advice_begin(&f, "weight_precision", pi, "tpot_s", "decode projections are memory-bound: lower the weight precision");
            snprintf(f.evidence, sizeof f.evidence,
                     "point %d (batch %lld): projections take %.0f%% of the decode step, %.0f%% of that memory-bound%s; "
                     "they read %s of %s weights per step at %.2f FLOP/B",
                     pi + 1, (long long)w->batch, 100 * v->gemm_time / v->step, 100 * v->gemm_mem / v->gemm_time,
                     conf_note(v->gemm_mem_conf, cn, sizeof cn), units_bytes(v->gemm_weight_bytes, b1, sizeof b1),
                     dtype_name(w->wdtype), gi);
            if (isfinite(alt))
                snprintf(f.action, sizeof f.action, "quantize weights %s -> %s (weight-only, group scales): predicted TPOT %s -> %s; %s: %s",
                         dtype_name(w->wdtype), dtype_name(q.wdtype), units_time(before, t1, sizeof t1), units_time(after, t2, sizeof t2),
                         dtype_name(alt_t), units_time(alt, t3, sizeof t3));
            else
                snprintf(f.action, sizeof f.action, "quantize weights %s -> %s (weight-only, group scales): predicted TPOT %s -> %s",
                         dtype_name(w->wdtype), dtype_name(q.wdtype), units_time(before, t1, sizeof t1), units_time(after, t2, sizeof t2));
            advice_offer(l, &f, before, after, 1 - after / before);
        }
    }
    /* Larger batch: up to where the projections reach the ridge, within memory. */
    int64_t ridge_b;
    if (advice_ridge_batch(&r->model, w, &r->device, 1 << 16, &ridge_b) != XF_OK) return;
    int64_t fit = cost_max_batch(&r->model, w, r->device.memory_bytes);
    if (fit <= 0) return; /* not even batch 1 fits: never recommend a batch that does not fit */
    int64_t target = ridge_b > 0 ? ridge_b : (1 << 16);
    int mem_limited = 0;
    if (fit < target) {
        target = fit;
        mem_limited = 1;
    }
    if (target <= w->batch) return;
    workload big = *w;
    big.batch = target;
    double after;
    if (tpot_of(&r->model, &big, &r->device, &after) || !(after > 0)) return;
    double tps0 = (double)w->batch / before, tps1 = (double)target / after;
    if (!(tps1 > tps0)) return;
    record_advice f;
    advice_begin(&f, "batch", pi, "decode_tokens_per_s", "decode projections are memory-bound: batch more sequences");
    if (ridge_b > 0)
        snprintf(f.evidence, sizeof f.evidence,
                 "point %d: decode projections at batch %lld run at %.2f FLOP/B; they reach the ridge of %s at batch %lld "
                 "(cost model)%s",
                 pi + 1, (long long)w->batch, gi, r->device.name, (long long)ridge_b,
                 mem_limited ? "; memory fits fewer sequences" : "");
    else
        snprintf(f.evidence, sizeof f.evidence, "point %d: decode projections at batch %lld run at %.2f FLOP/B and stay below the ridge",
                 pi + 1, (long long)w->batch, gi);
    snprintf(f.action, sizeof f.action, "run batch %lld%s (continuous batching): predicted decode %.1f -> %.1f tokens/s, TPOT %s -> %s",
             (long long)target, mem_limited ? " (the most that fits memory)" : "", tps0, tps1, units_time(before, t1, sizeof t1),
             units_time(after, t2, sizeof t2));
    advice_offer(l, &f, tps0, tps1, 1 - tps0 / tps1);
}

static void find_kv(const record *r, int pi, const decode_view *v, finding_list *l) {
    const record_point *p = &r->points[pi];
    const workload *w = &p->wl;
    if (v->step <= 0 || v->attn_time < ADVICE_MIN_SHARE * v->step) return;
    if (w->kvdtype == XF_FP8 || w->kvdtype == XF_INT8 || w->kvdtype == XF_INT4) return;
    double before, after;
    workload q = *w;
    q.kvdtype = XF_FP8;
    if (tpot_of(&r->model, w, &r->device, &before) || tpot_of(&r->model, &q, &r->device, &after)) return;
    if (!(after < before)) return;
    const model_config *m = &r->model;
    char t1[24], t2[24], b1[24], gqa[128];
    if (m->n_kv_heads == m->n_heads)
        snprintf(gqa, sizeof gqa, "; the model uses MHA: a GQA variant with %lld KV heads would read %lldx less KV",
                 (long long)(m->n_heads >= 8 ? 8 : 1), (long long)(m->n_heads >= 8 ? m->n_heads / 8 : 1));
    else
        snprintf(gqa, sizeof gqa, "; GQA already shares each KV head among %lld query heads", (long long)(m->n_heads / m->n_kv_heads));
    record_advice f;
    advice_begin(&f, "kv_precision", pi, "tpot_s", "KV reads dominate decode: store the KV cache in fp8");
    snprintf(f.evidence, sizeof f.evidence,
             "point %d (batch %lld, context %lld): attention takes %.0f%% of the decode step and reads %s of %s KV "
             "(%.0f%% of the step's bytes)%s",
             pi + 1, (long long)w->batch, (long long)p->summary.decode_context, 100 * v->attn_time / v->step,
             units_bytes(v->kv_read, b1, sizeof b1), dtype_name(w->kvdtype), v->bytes > 0 ? 100 * v->kv_read / v->bytes : 0, gqa);
    snprintf(f.action, sizeof f.action, "KV cache %s -> fp8: predicted TPOT %s -> %s, and %s the tokens per byte of KV memory",
             dtype_name(w->kvdtype), units_time(before, t1, sizeof t1), units_time(after, t2, sizeof t2),
             w->kvdtype == XF_FP32 ? "4x" : "2x");
    advice_offer(l, &f, before, after, 1 - after / before);
}

static void find_fusion(const record *r, int pi, const decode_view *v, finding_list *l) {
    if (v->step <= 0) return;
    char t1[24], t2[24], t3[24], cn[40];
    record_advice f;
    double before, after;
    /* where the threads waited for a CPU, latency-bound ops are the waits and say nothing of fusion */
    if (v->n_lat > 0 && v->lat_time >= 0.1 * v->step && !roofline_cpu_contended(&r->points[pi].concurrent)) {
        /* Measured latency-bound ops: what the roofline says they could take. */
        before = v->step;
        after = v->step - v->lat_time + v->lat_pred;
        advice_begin(&f, "fusion", pi, "step_s", "latency-bound ops: fuse them, launch fewer kernels");
        snprintf(f.evidence, sizeof f.evidence,
                 "point %d: %d decode ops are latency-bound (neither compute nor memory near its ceiling%s): %s of the %s step",
                 pi + 1, v->n_lat, conf_note(v->lat_conf, cn, sizeof cn), units_time(v->lat_time, t1, sizeof t1),
                 units_time(v->step, t2, sizeof t2));
        snprintf(f.action, sizeof f.action,
                 "fuse element-wise ops into their neighbours (norm+projection, SwiGLU into gate_up), replay the step as a "
                 "CUDA Graph on GPUs: at their roofline time the step would take %s",
                 units_time(after, t3, sizeof t3));
    } else if (strcmp(r->device.kind, "gpu") == 0 && v->n_tiny > 0 &&
               (double)v->n_tiny * ADVICE_LAUNCH_S >= 0.2 * v->step) {
        /* Predicted on a GPU: kernels too small to hide a launch. */
        double launches = (double)v->n_tiny * ADVICE_LAUNCH_S;
        before = v->step + launches;
        after = v->step;
        advice_begin(&f, "fusion", pi, "step_s", "many tiny kernels: launch overhead is a large part of decode");
        snprintf(f.evidence, sizeof f.evidence,
                 "point %d: %d of the %d decode ops are predicted under %.0f us; at ~%.0f us per kernel launch (assumed) the "
                 "launches alone take %s against a predicted step of %s",
                 pi + 1, v->n_tiny, v->n_ops, ADVICE_LAUNCH_S * 1e6, ADVICE_LAUNCH_S * 1e6, units_time(launches, t1, sizeof t1),
                 units_time(v->step, t2, sizeof t2));
        snprintf(f.action, sizeof f.action,
                 "capture the decode step in a CUDA Graph and fuse element-wise ops: the step moves from about %s (with "
                 "launches) toward its roofline %s",
                 units_time(v->step + launches, t3, sizeof t3), units_time(v->step, t2, sizeof t2));
    } else {
        return;
    }
    advice_offer(l, &f, before, after, before > 0 ? 1 - after / before : 0);
}

/* cpu_contention: another process held the cores the model's threads ran on (they waited for a
 * CPU a share w of each repetition). The waits come off the step: before = the decode step,
 * after = step x (1 - w), an upper bound on what idle cores give (a wait may overlap another
 * thread's work). */
static void find_cpu_contention(const record *r, int pi, const decode_view *v, finding_list *l) {
    const record_point *p = &r->points[pi];
    if (v->step <= 0 || !roofline_cpu_contended(&p->concurrent)) return;
    const double w = p->concurrent.cpu_wait_share;
    char t1[24], t2[24];
    record_advice f;
    advice_begin(&f, "cpu_contention", pi, "step_s", "another process shares the cores: the model's threads waited for a CPU");
    snprintf(f.evidence, sizeof f.evidence,
             "point %d: the model's %d threads waited in the run queue %.0f%% of each repetition (the longest wait of any "
             "thread, median over the repetitions); every op time here holds those waits, and latency-bound classes among "
             "them are the waits, not the op",
             pi + 1, p->run.threads, 100 * w);
    snprintf(f.action, sizeof f.action,
             "run on idle cores, or with --threads below the cores other processes leave free, and measure again: without "
             "the waits the %s decode step would take about %s",
             units_time(v->step, t1, sizeof t1), units_time(v->step * (1 - w), t2, sizeof t2));
    advice_offer(l, &f, v->step, v->step * (1 - w), w);
}

static void find_kv_policy(const record *r, finding_list *l) {
    const record_kv *kv = r->kv;
    if (!kv || kv->n_policies < 2) return;
    const record_kv_policy *best = NULL, *worst = NULL;
    for (int i = 0; i < kv->n_policies; i++) {
        const record_kv_policy *p = &kv->policies[i];
        if (p->block_tokens > 0 && (!best || p->share[KV_CAT_TOKEN] > best->share[KV_CAT_TOKEN])) best = p;
        if (p->block_tokens == 0 && (!worst || p->share[KV_CAT_TOKEN] < worst->share[KV_CAT_TOKEN])) worst = p;
    }
    if (!best || !worst) return;
    /* Token states as a share of the memory held (pool less the plain free bytes). */
    double held_w[KV_CAT_COUNT], held_b[KV_CAT_COUNT];
    kv_held_shares(worst, held_w);
    kv_held_shares(best, held_b);
    double eff_w = held_w[KV_CAT_TOKEN], eff_b = held_b[KV_CAT_TOKEN];
    if (!(eff_b > eff_w + 0.1)) return;
    record_advice f;
    advice_begin(&f, "kv_policy", 0, "max_live", "the KV policy wastes memory: use paged blocks");
    snprintf(f.evidence, sizeof f.evidence,
             "policy %s keeps %.0f%% of its held KV memory in token states (reserved %.0f%%, internal %.0f%%, external %.0f%% "
             "of the pool); %s keeps %.0f%%",
             worst->policy, 100 * eff_w, 100 * worst->share[KV_CAT_RESERVED], 100 * worst->share[KV_CAT_INTERNAL],
             100 * worst->share[KV_CAT_EXTERNAL], best->policy, 100 * eff_b);
    snprintf(f.action, sizeof f.action,
             "allocate KV in %s blocks: at most %lld sequences live at once instead of %lld (%.1f vs %.1f tokens/s in the "
             "simulation)",
             best->policy, (long long)best->max_live, (long long)worst->max_live, best->tokens_per_s, worst->tokens_per_s);
    advice_offer(l, &f, (double)worst->max_live, (double)best->max_live, eff_b - eff_w);
}

/* Mixture of experts. expert_imbalance (measured runs): the router sends far more tokens to some
 * experts than uniform routing would; with experts sharded over devices the busiest one sets the
 * MoE layers' time. */
static void find_expert_imbalance(const record *r, int pi, const decode_view *v, finding_list *l) {
    const record_point *p = &r->points[pi];
    experts_load ld;
    xf_phase ph = XF_DECODE;
    if (!experts_load_of(r, p, ph, &ld) && !experts_load_of(r, p, ph = XF_PREFILL, &ld)) return;
    if (!(ld.max_over_mean >= ADVICE_MOE_IMBALANCE)) return;
    double moe_t = 0, step = 0; /* the phase's time in MoE layers' expert ops */
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        if (op->cost.phase != ph) continue;
        step += op->time_s;
        if (model_layer_is_moe(&r->model, op->cost.layer) &&
            (op->cost.kind == OP_GATE_UP || op->cost.kind == OP_SWIGLU || op->cost.kind == OP_DOWN))
            moe_t += op->time_s;
    }
    (void)v;
    if (!(step > 0)) return;
    record_advice f;
    advice_begin(&f, "expert_imbalance", pi, "expert_max_over_mean", "the router's load is uneven: the busiest expert gets %.1fx its share",
                 ld.max_over_mean);
    snprintf(f.evidence, sizeof f.evidence,
             "point %d %s (%lld steps, %lld routed tokens per layer and step): expert %lld of layer %d got %.0f%% of the "
             "layer's tokens where uniform routing gives %.1f%%; %.0f%% of the (layer, expert) pairs got no token; the expert ops "
             "take %.0f%% of the step",
             pi + 1, phase_name(ph), (long long)ld.steps, (long long)ld.tokens, (long long)ld.hot_expert, ld.worst_layer,
             100 * ld.hot_share, 100.0 / (double)r->model.n_experts, 100 * ld.idle_share, 100 * moe_t / step);
    snprintf(f.action, sizeof f.action,
             "before sharding experts over devices (expert parallelism), balance them: the device holding the busiest expert "
             "would take %.1fx the balanced time; replicate hot experts or cap tokens per expert (capacity factor)",
             ld.max_over_mean);
    /* score: the expert ops' time lost to the imbalance */
    advice_offer(l, &f, ld.max_over_mean, 1.0, (1.0 - 1.0 / ld.max_over_mean) * moe_t / step);
}

/* expert_parallelism: the routed experts hold most of the weights and the weights most of the
 * device's memory; sharding the experts over N devices divides that part by N. */
static void find_expert_parallelism(const record *r, int pi, finding_list *l) {
    const record_point *p = &r->points[pi];
    const model_config *m = &r->model;
    const double W = p->memory.weights_bytes, A = p->memory.active_weights_bytes, cap = p->memory.capacity_bytes;
    if (m->n_experts <= m->experts_per_tok || !(A > 0) || !(W > A) || !(cap > 0)) return;
    const double experts = (W - A) * (double)m->n_experts / (double)(m->n_experts - m->experts_per_tok);
    if (experts < 0.5 * W || W < 0.5 * cap) return;
    const double rest = p->memory.total_bytes - W; /* KV and activations stay per device */
    int n = 2;
    while (n < 64 && W - experts + experts / n + rest > 0.8 * cap) n *= 2;
    if (n > m->n_experts) n = (int)m->n_experts;
    const double per = W - experts + experts / n;
    char b1[24], b2[24], b3[24], b4[24], b5[24];
    record_advice f;
    advice_begin(&f, "expert_parallelism", pi, "weights_per_device", "the experts fill the device's memory: shard them (expert parallelism)");
    snprintf(f.evidence, sizeof f.evidence,
             "point %d: the %lld routed experts hold %s of the %s of weights (a token reads %s of them); with KV and "
             "activations the point needs %s of %s",
             pi + 1, (long long)m->n_experts, units_bytes(experts, b1, sizeof b1), units_bytes(W, b2, sizeof b2),
             units_bytes(A, b3, sizeof b3), units_bytes(p->memory.total_bytes, b4, sizeof b4), units_bytes(cap, b5, sizeof b5));
    snprintf(f.action, sizeof f.action,
             "shard the experts over %d devices (%lld experts each; attention and the shared weights replicated): weights per "
             "device %s -> %s, the rest of memory for KV and a larger batch",
             n, (long long)(m->n_experts / n), units_bytes(W, b2, sizeof b2), units_bytes(per, b3, sizeof b3));
    /* score: the memory saved; more when it does not fit */
    advice_offer(l, &f, W, per, (1.0 - per / W) * (p->memory.total_bytes > cap ? 1.0 : 0.5));
}

/* expert_batching: a decode step reads the weights of every distinct expert its tokens choose; at
 * a small batch each expert read serves few tokens. A larger batch reads E (1 - (1 - k/E)^B)
 * experts (uniform routing) for B tokens: the weights read per token fall. */
static void find_expert_batching(const record *r, int pi, finding_list *l) {
    const record_point *p = &r->points[pi];
    const model_config *m = &r->model;
    const workload *w = &p->wl;
    if (m->n_experts <= 0) return;
    experts_load ld;
    const int measured = experts_load_of(r, p, XF_DECODE, &ld);
    const double E = (double)m->n_experts, k = (double)m->experts_per_tok;
    const double D = measured ? ld.distinct_per_step : cost_moe_experts_read(m->n_experts, m->experts_per_tok, (double)w->batch);
    const double per_read = D > 0 ? (double)w->batch * k / D : 0; /* tokens served per expert read */
    if (!(per_read > 0) || per_read >= ADVICE_MOE_TOKENS_PER_READ) return;
    int64_t fit = cost_max_batch(m, w, r->device.memory_bytes), target = w->batch;
    while (target < (1 << 16) && (double)target * k / cost_moe_experts_read(m->n_experts, m->experts_per_tok, (double)target) <
                                     ADVICE_MOE_TOKENS_PER_READ)
        target *= 2;
    if (fit > 0 && target > fit) target = fit;
    if (target <= w->batch) return;
    workload big = *w;
    big.batch = target;
    double before, after;
    if (tpot_of(m, w, &r->device, &before) || tpot_of(m, &big, &r->device, &after) || !(before > 0) || !(after > 0)) return;
    const double tps0 = (double)w->batch / before, tps1 = (double)target / after;
    if (!(tps1 > tps0)) return;
    const double D1 = cost_moe_experts_read(m->n_experts, m->experts_per_tok, (double)target);
    record_advice f;
    advice_begin(&f, "expert_batching", pi, "decode_tokens_per_s", "each expert read serves few tokens: batch more to amortize it");
    snprintf(f.evidence, sizeof f.evidence,
             "point %d (batch %lld, top-%lld of %lld): a decode step reads %.1f experts per MoE layer (%s) for %lld tokens: "
             "%.2f tokens per expert read",
             pi + 1, (long long)w->batch, (long long)m->experts_per_tok, (long long)m->n_experts, D,
             measured ? "the router's choices" : "uniform routing", (long long)w->batch, per_read);
    snprintf(f.action, sizeof f.action,
             "run batch %lld%s: %.1f of %.0f experts read per layer for %.1f tokens each (uniform routing); predicted decode %.1f "
             "-> %.1f tokens/s",
             (long long)target, fit > 0 && target == fit ? " (the most that fits memory)" : "", D1, E, (double)target * k / D1, tps0,
             tps1);
    advice_offer(l, &f, tps0, tps1, 1 - tps0 / tps1);
}

static int by_score(const void *a, const void *b) {
    double x = ((const record_advice *)a)->score, y = ((const record_advice *)b)->score;
    return (x < y) - (x > y);
}

xf_status advice_find(const record *r, record_advice *out, int max, int *n) {
    *n = 0;
    if (max <= 0) return XF_OK;
    record_advice all[16];
    finding_list l = {all, 0, 16};
    int np = r->n_points < ADVICE_MAX_POINTS ? r->n_points : ADVICE_MAX_POINTS;
    int valid = config_validate(&r->model) == XF_OK && r->device.bandwidth_Bps > 0;
    for (int i = 0; valid && i < np; i++) {
        const record_point *p = &r->points[i];
        if (workload_validate(&p->wl) != XF_OK) continue;
        if (p->par.tp > 0) continue; /* split over devices: the gains below are one device's predictions */
        decode_view v;
        view_phase(p, XF_DECODE, &v);
        if (v.n_ops == 0) continue; /* prefill only: the findings below are about decode */
        find_weights(r, i, &v, &l);
        find_kv(r, i, &v, &l);
        find_fusion(r, i, &v, &l);
        find_cpu_contention(r, i, &v, &l);
        find_expert_imbalance(r, i, &v, &l);
        find_expert_parallelism(r, i, &l);
        find_expert_batching(r, i, &l);
    }
    xf_error_clear(); /* a workload the cost model refused is skipped, not an error of the record */
    find_kv_policy(r, &l);
    qsort(all, (size_t)l.n, sizeof all[0], by_score);
    for (int i = 0; i < l.n && i < max; i++) out[(*n)++] = all[i];
    return XF_OK;
}

xf_status advice_record(record *r) { return advice_find(r, r->advice, RECORD_MAX_ADVICE, &r->n_advice); }
