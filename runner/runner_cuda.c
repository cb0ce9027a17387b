/* What only the GPU path of the runner does: the GPU's ceilings, CUPTI activity as a probe, the
 * Range Profiler counters and the CUDA-graph A/B (docs/cuda.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probes/ceilings.h"
#include "probes/cupti_probe.h"
#include "probes/gpu_ceilings.h"
#include "probes/kernel_times.h"
#include "runner/cupti_collect.h"
#include "runner/runner_int.h"

/* The GPU's ceilings: the GPU machine file when `xfprof machine --device cuda` measured this GPU
 * (same device name), else the spec sheet matched by name, else the theoretical figures from the
 * device's attributes. *measured: 1 for the machine file. *what names the choice (for stderr). */
xf_status runner_gpu_ceilings(int ordinal, device_spec *dev, int *measured, char *what, size_t what_len) {
    gpu_attrs a;
    xf_status s = gpu_attrs_query(ordinal, &a);
    if (s) return s;
    *measured = 0;
    char path[4096];
    if (ceilings_gpu_machine_path(path, sizeof path) == XF_OK && access(path, R_OK) == 0) {
        device_spec f;
        if (ceilings_load(path, &f) == XF_OK && !strcmp(f.kind, "gpu") && !strncmp(f.description, a.name, sizeof f.description - 1) &&
            f.bandwidth_Bps > 0 && f.peak_flops[XF_COMPUTE_FP32] > 0) {
            *dev = f;
            *measured = 1;
            snprintf(what, what_len, "%.3000s (measured by xfprof machine --device cuda)", path);
            return XF_OK;
        }
        fprintf(stderr, "xfprof run: note: %s is not a measurement of this GPU (%s): using its spec sheet\n", path, a.name);
    }
    xf_error_clear();
    if (gpu_spec_for(&a, dev) == XF_OK) {
        snprintf(what, what_len, "the spec sheet %s (run 'xfprof machine --device cuda' to measure them)", dev->name);
        return XF_OK;
    }
    xf_error_clear();
    gpu_theory t;
    if ((s = gpu_ceilings_theory(&a, &t))) return s;
    memset(dev, 0, sizeof *dev);
    snprintf(dev->name, sizeof dev->name, "cuda-attributes");
    snprintf(dev->description, sizeof dev->description, "%.127s", a.name);
    snprintf(dev->kind, sizeof dev->kind, "gpu");
    snprintf(dev->source, sizeof dev->source,
             "theoretical, from cudaDeviceGetAttribute (no spec sheet for %.120s): bandwidth 2 x memory clock x bus width, peaks "
             "SMs x rate x boost clock",
             a.name);
    dev->memory_bytes = (double)a.total_mem_bytes;
    dev->bandwidth_Bps = t.bandwidth_Bps;
    dev->cache_bytes = (double)a.l2_bytes;
    dev->peak_flops[XF_COMPUTE_FP32] = t.fp32_flops;
    dev->peak_flops[XF_COMPUTE_TENSOR16] = t.tensor16_flops;
    snprintf(what, what_len, "the device's attributes (no spec sheet for %s; run 'xfprof machine --device cuda')", a.name);
    return XF_OK;
}

/* CUPTI activity as a probe table entry. Activity is on only while a point's repetitions run: it
 * is closed before the counter replays and the graph timings, which must not be traced; between
 * points the ranges are NVTX only (Nsight Systems still sees xfprof's ops). */
typedef struct cupti_run {
    int ordinal, reps;
    int64_t n_layers;
    cupti_probe *cp;   /* the activity probe of the point being run; NULL between points */
    probe inner;       /* cp's table, or cupti_nvtx_probe() */
    kernel_times kt;   /* the point's kernel times, kept for fill after point_end */
    int64_t unattributed, bad, drop_warnings, kernel_ops;
} cupti_run;

static void cr_begin(void *ctx, const probe_range *r) {
    cupti_run *c = ctx;
    c->inner.range_begin(c->inner.ctx, r);
}

static void cr_end(void *ctx, const probe_range *r) {
    cupti_run *c = ctx;
    c->inner.range_end(c->inner.ctx, r);
}

/* Flushes the kernels of one repetition into kt (kept repetitions: rep >= 0; the others are
 * dropped). Dropped records are a warning (the times then undercount). */
static xf_status cr_flush(cupti_run *c, int rep) {
    cupti_attribution att;
    xf_status s = cupti_probe_flush(c->cp, &att);
    if (s == XF_EIO) { /* records dropped: att is still filled */
        fprintf(stderr, "xfprof run: warning: %s\n", xf_error_msg());
        c->drop_warnings++;
        xf_error_clear();
        s = XF_OK;
    }
    if (!s) kernel_times_add(&c->kt, &att, rep);
    cupti_attribution_free(&att);
    return s;
}

static xf_status cr_point_begin(void *ctx, const record_point *p) {
    cupti_run *c = ctx;
    xf_status s;
    if (!c->cp) { /* every point but the first (runner_cupti_probe opened that one) */
        if ((s = cupti_probe_init(&c->cp, c->ordinal, CUPTI_MODE_ACTIVITY, 0)) != XF_OK) return s;
        c->inner = cupti_probe_as_probe(c->cp);
    }
    kernel_times_free(&c->kt);
    if ((s = kernel_times_init(&c->kt, p, c->n_layers, c->reps)) != XF_OK) return s;
    return cr_flush(c, -1); /* drops what ran before (weight upload) */
}

static xf_status cr_rep_end(void *ctx, int rep) { return cr_flush(ctx, rep); }

static void cr_point_end(void *ctx) {
    cupti_run *c = ctx;
    c->unattributed += c->kt.unattributed;
    c->bad += c->kt.bad_records;
    cupti_probe_free(c->cp);
    c->cp = NULL;
    c->inner = cupti_nvtx_probe();
}

static xf_status cr_fill(void *ctx, int64_t i, int64_t n_decode_steps, record_op *op) {
    cupti_run *c = ctx;
    /* the op's summed kernel time (counters mode may have filled every counter slot first) */
    if (c->kt.scratch) c->kernel_ops += kernel_times_fill(&c->kt, i, n_decode_steps, op);
    return XF_OK;
}

static void cr_free(void *ctx) {
    cupti_run *c = ctx;
    if (!c) return;
    cupti_probe_free(c->cp);
    kernel_times_free(&c->kt);
    free(c);
}

xf_status runner_cupti_probe(int ordinal, int64_t n_layers, int reps, probe *out, cupti_run **cr) {
    cupti_run *c = calloc(1, sizeof *c);
    if (!c) return xf_errorf(XF_ENOMEM, "out of memory");
    c->ordinal = ordinal;
    c->reps = reps;
    c->n_layers = n_layers;
    xf_status s = cupti_probe_init(&c->cp, ordinal, CUPTI_MODE_ACTIVITY, 0);
    if (s) {
        free(c);
        return s;
    }
    c->inner = cupti_probe_as_probe(c->cp);
    probe p = {"cupti", c, cr_begin, cr_end, cr_free, cr_point_begin, NULL, cr_rep_end, cr_point_end, cr_fill};
    *out = p;
    *cr = c;
    return XF_OK;
}

void runner_cupti_note(const cupti_run *c, char *buf, size_t len) {
    snprintf(buf, len,
             "activity: gpu_kernel_time_s = summed kernel time in each op range (median over reps; per "
             "step in decode) on %lld ops; %lld kernels unattributed, %lld bad records, %lld flushes dropped records",
             (long long)c->kernel_ops, (long long)c->unattributed, (long long)c->bad, (long long)c->drop_warnings);
}

/* --cuda-graph: the decode step timed both ways in the same run, without probes and without the
 * per-op sync (which would hide what the graph saves): one warm-up repetition (it captures the
 * graph), then reps; each repetition is a prefill and gen - 1 decode steps. Host wall time per decode
 * step (the step's results copied back included) and the cudaEvent time around the step's GPU
 * work, medians over the repetitions. */
xf_status runner_graph_compare(run_ctx *c, record_point *p, const int32_t *prompts, const int64_t *lens) {
    const workload *w = &p->wl;
    const int64_t n_dec = workload_decode_steps(w); /* graph_compare runs only when > 0 */
    void *bctx = model_backend_ctx(c->m);
    double *host[2], *ev[2];
    double med_host[2], med_ev[2], iqr;
    xf_status s = XF_OK;
    host[0] = calloc((size_t)c->plan->reps, sizeof(double));
    host[1] = calloc((size_t)c->plan->reps, sizeof(double));
    ev[0] = calloc((size_t)c->plan->reps, sizeof(double));
    ev[1] = calloc((size_t)c->plan->reps, sizeof(double));
    if (!host[0] || !host[1] || !ev[0] || !ev[1]) {
        s = xf_errorf(XF_ENOMEM, "out of memory for the graph timings");
        goto done;
    }
    model_set_sync_each_op(c->m, 0);
    for (int g = 0; g < 2 && !s; g++) {
        cuda_backend_set_graph(bctx, g);
        for (int r = -1; r < c->plan->reps && !s; r++) {
            model_reset(c->m);
            if ((s = model_prefill(c->m, (int)w->batch, prompts, lens, NULL)) != XF_OK) break;
            double evsum = 0, t1 = timer_now_s();
            for (int64_t k = 0; k < n_dec && !s; k++) {
                s = model_decode_step(c->m, NULL, NULL);
                evsum += cuda_backend_last_step_ms(bctx) * 1e-3;
            }
            double t2 = timer_now_s();
            if (s || r < 0) continue;
            host[g][r] = (t2 - t1) / (double)n_dec;
            ev[g][r] = evsum / (double)n_dec;
        }
        timer_stats(host[g], c->plan->reps, &med_host[g], &iqr);
        timer_stats(ev[g], c->plan->reps, &med_ev[g], &iqr);
    }
    cuda_backend_set_graph(bctx, 0);
    model_set_sync_each_op(c->m, 1);
    if (s) goto done;
    char key[32], val[224];
    snprintf(key, sizeof key, "cuda_graph_p%d", c->point_index);
    snprintf(val, sizeof val,
             "batch %lld: decode step without graph %.6e s, with graph %.6e s (host wall per step, no per-op sync, "
             "no probes, median of %d); GPU events %.6e / %.6e s",
             (long long)w->batch, med_host[0], med_host[1], c->plan->reps, med_ev[0], med_ev[1]);
    record_set_env(c->rec, key, val);
    size_t l = strlen(c->notes->graph);
    snprintf(c->notes->graph + l, sizeof c->notes->graph - l,
             "CUDA graph, point %d (batch %lld): decode step %.3f ms without, %.3f ms with (%.0f%% of the step was launch "
             "overhead); GPU events %.3f / %.3f ms\n",
             c->point_index, (long long)w->batch, med_host[0] * 1e3, med_host[1] * 1e3,
             med_host[0] > 0 ? 100.0 * (1.0 - med_host[1] / med_host[0]) : 0.0, med_ev[0] * 1e3, med_ev[1] * 1e3);
    fprintf(stderr, "xfprof run: %s", c->notes->graph + l);
done:
    for (int g = 0; g < 2; g++) {
        free(host[g]);
        free(ev[g]);
    }
    return s;
}

/* --cupti counters: the Range Profiler replays the request (prefill and the decode steps up to the
 * middle one, the step at about the mean decode context) and its DRAM bytes and FLOPs go into the
 * point's ops; times stay from the uncounted runs. No permission: say how to enable it, keep
 * activity timing, do not try again. */
void runner_collect_counters(run_ctx *c, record_point *p, const int32_t *prompts, const int64_t *lens) {
    const workload *w = &p->wl;
    int n_dec = workload_decode_steps(w) > 0 ? (int)(w->gen / 2) : 0; /* up to the step at the mean decode context */
    cupti_collect_args a = {c->m, c->plan->ordinal, (int)w->batch, prompts, lens, n_dec};
    cupti_collect_result cr;
    fprintf(stderr, "xfprof run: CUPTI counters: replaying prefill and %d decode step(s) under the Range Profiler...\n", n_dec);
    xf_status s = cupti_collect_counters(&a, &cr);
    if (s) {
        fprintf(stderr, "xfprof run: CUPTI counters not collected: %s\n", xf_error_msg());
        fprintf(stderr, "xfprof run: keeping CUPTI activity timing; bytes come from the cost model\n");
        snprintf(c->notes->counters, sizeof c->notes->counters, "not collected (%s): bytes from the cost model",
                 s == XF_EUNSUPPORTED ? "no profiling permission or no Range Profiler" : "error");
        if (s == XF_EUNSUPPORTED) c->counters_off = 1;
        xf_error_clear();
        return;
    }
    int applied = cupti_collect_apply(&cr, n_dec, p);
    snprintf(c->notes->counters, sizeof c->notes->counters,
             "Range Profiler, user replay (%d + %d passes), decode step %d of the replay; %d ops got counters; tensor unit "
             "%s; times from the uncounted runs",
             cr.passes[0], cr.passes[1], n_dec, applied, cr.flops_per_unit > 0 ? "calibrated" : "not calibrated (no tensor FLOPs)");
    cupti_collect_result_free(&cr);
}

