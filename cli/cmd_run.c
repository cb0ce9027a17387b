/* xfprof run: runs the reference model for real, op by op under the probes, and puts every
 * measured op beside its roofline prediction against this machine's measured ceilings. On
 * --device cuda[:N] the same runner drives the CUDA backend: host-timed ops with a device sync
 * after each, CUPTI kernel activity per op range, optional Range Profiler counters, and the decode
 * step with and without a CUDA graph (docs/cuda.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "analyzers/predict.h"
#include "analyzers/roofline.h"
#include "args.h"
#include "cli.h"
#include "signals.h"
#include "test_hooks.h"
#include "core/device.h"
#include "cuda_cli.h"
#include "output.h"
#include "probes/ceilings.h"
#include "probes/cupti_collect.h"
#include "probes/cupti_probe.h"
#include "probes/gpu_ceilings.h"
#include "probes/perf_event.h"
#include "probes/timer.h"
#include "reference_model/config.h"
#include "reference_model/cpu_kernels.h"
#include "reference_model/cuda_backend.h"
#include "reference_model/model.h"
#include "reports/html.h"
#include "reports/record_json.h"
#include "reports/trace.h"

static const char *CMD = "run";

char *openblas_get_config(void);   /* OpenBLAS (linked by the CPU backend): its build string */

char *openblas_get_corename(void); /* and the kernel set it picked at run time */

/* The embedded default: small enough to run in a few seconds on 2 cores. */
#define DEF_MODEL "stories15m"
#define DEF_BATCH "1"
#define DEF_PROMPT "64"
#define DEF_GEN "32"

static void help(void) {
    printf("Usage: xfprof run [options]\n\n"
           "Runs the reference LLaMA-style decoder for real (prefill, then gen decode steps), times every op of\n"
           "every layer, and sets each against this machine's measured ceilings: measured time (median and\n"
           "spread over the repetitions), FLOPs, bytes, intensity, utilization of each ceiling, the measured\n"
           "class, the predicted time and measured/predicted; then TTFT, TPOT, tokens/s and peak memory.\n"
           "With no options: %s, batch %s, prompt %s, gen %s on the CPU.\n\n"
           "  --model M         preset name (xfprof models) or a Hugging Face config.json (default %s)\n"
           "  --weights DIR     real weights: a local Hugging Face folder (config.json + *.safetensors);\n"
           "                    default: random weights from --seed at the config's shapes\n"
           "  --batch LIST      sequences run together (default %s)\n"
           "  --prompt LIST     prompt tokens per sequence (default %s)\n"
           "  --gen LIST        decode steps per sequence (default %s)\n"
           "  --prompt-ids IDS  the prompt as token ids (1,15043,29892), the same for every sequence\n"
           "  --wdtype T        weights: fp32 (default; bf16 on cuda), bf16 or int8 (weight-only, per-group scales;\n"
           "                    their input is rounded to a 16-bit grid per group: record env int8_inputs)\n"
           "  --kvdtype T       KV cache: fp32 (default), fp16 or bf16\n"
           "  --group N         elements per int8 scale (default 128)\n"
           "  --threads N       CPU threads (default: all online CPUs)\n"
           "  --reps N          measured repetitions after the warm-up (default 5)\n"
           "  --warmup N        warm-up repetitions, discarded (default 1)\n"
           "  --seed N          weights and prompt ids (default 1)\n"
           "  --kv-policy P     KV manager policy, e.g. paged:16 (default) or reserve\n"
           "  --kv-alloc A      pool (default) or system (grow each sequence's KV by realloc + copy)\n"
           "  --device D        cpu (default), cuda or cuda:N (GPU N; exit status 3 when there is none). On cuda:\n"
           "                    weights on the GPU are bf16, GEMMs run on tensor cores (cuBLAS), every op is\n"
           "                    host-timed with a device sync after it; ceilings from 'xfprof machine --device\n"
           "                    cuda' when it measured this GPU, else its spec sheet, else its attributes\n"
           "  --cupti MODE      cuda only: off, activity (default when CUPTI loads: each op's kernel time from\n"
           "                    CUPTI activity, counter gpu_kernel_time_s) or counters (activity, then the\n"
           "                    Range Profiler replays the request for DRAM bytes and FLOPs per op; without\n"
           "                    profiling permission it says how to enable it and keeps activity timing)\n"
           "  --cuda-graph      cuda only: also time the decode step with and without a CUDA graph (no per-op\n"
           "                    sync, no probes) and report both (record env cuda_graph_p<N>)\n"
           "  --no-probes       no per-op timing (whole-step times only): the probe-overhead baseline\n"
           "  --no-perf         do not open hardware counters\n"
           "%s"
           "  --report FILE     also write the HTML report\n"
           "  --trace FILE      also write the Chrome trace (Perfetto) of the measured steps\n"
           "  -o FILE saves the record (JSON) there; stdout still gets the --format rendering.\n\n"
           "Ceilings: the machine file ($XFPROF_MACHINE_FILE or ~/.cache/xfprof/machine.json, made by 'xfprof\n"
           "machine'); without one a quick measurement runs first. A model whose weights fit in the last-level\n"
           "cache is judged against the in-cache bandwidth.\n",
           DEF_MODEL, DEF_BATCH, DEF_PROMPT, DEF_GEN, DEF_MODEL, DEF_BATCH, DEF_PROMPT, DEF_GEN, cli_output_help);
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double median_of(const double *x, int n) {
    double med, iqr;
    timer_stats(x, n, &med, &iqr);
    return med;
}

static double peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)ru.ru_maxrss * 1024.0; /* Linux: KiB */
}

/* The ceilings to judge against: the machine file, else a quick measurement (not saved). */
static xf_status load_ceilings(int threads, device_spec *dev, int *from_file, char *path, size_t path_len) {
    *from_file = 0;
    xf_status s = ceilings_machine_path(path, path_len);
    if (s == XF_OK && access(path, R_OK) == 0) {
        if ((s = ceilings_load(path, dev)) != XF_OK) return s;
        if (dev->bandwidth_Bps <= 0 || dev->peak_flops[XF_COMPUTE_FP32] <= 0)
            return xf_errorf(XF_EINVAL, "%s: the machine file has no bandwidth or FP32 peak; run 'xfprof machine' again", path);
        *from_file = 1;
        const char *t = strstr(dev->source, " threads");
        if (t) { /* "..., N threads": warn when the ceilings were measured with another count */
            const char *c = t;
            while (c > dev->source && c[-1] >= '0' && c[-1] <= '9') c--;
            int mt = atoi(c);
            if (c < t && mt != threads)
                fprintf(stderr, "xfprof run: note: the machine file was measured with %d threads, this run uses %d; "
                                "run 'xfprof machine --threads %d' for matching ceilings\n", mt, threads, threads);
        }
        return XF_OK;
    }
    fprintf(stderr,
            "xfprof run: no machine file%s%s: measuring the ceilings quickly first (run 'xfprof machine' once to save them)\n",
            s == XF_OK ? " at " : "", s == XF_OK ? path : "");
    xf_error_clear();
    ceilings_opts o;
    memset(&o, 0, sizeof o);
    o.threads = threads;
    o.quick = 1;
    o.reps = 2;
    ceilings_result r;
    if ((s = ceilings_measure(&o, &r)) != XF_OK) return s;
    ceilings_to_device(&r, dev);
    return XF_OK;
}

/* The GPU's ceilings: the GPU machine file when `xfprof machine --device cuda` measured this GPU
 * (same device name), else the spec sheet matched by name, else the theoretical figures from the
 * device's attributes. *measured: 1 for the machine file. *what names the choice (for stderr). */
static xf_status load_gpu_ceilings(int ordinal, device_spec *dev, int *measured, char *what, size_t what_len) {
    gpu_attrs a;
    xf_status s = gpu_attrs_query(ordinal, &a);
    if (s) return s;
    *measured = 0;
    char path[4096];
    if (cli_gpu_machine_path(path, sizeof path) == XF_OK && access(path, R_OK) == 0) {
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

/* Appends the measured-only kv_alloc op of each phase in front of that phase's ops, as the runner
 * runs it (first in every step). */
static xf_status add_kv_alloc_ops(record_point *p, int with_decode) {
    int64_t extra = with_decode ? 2 : 1;
    record_op *ops = calloc((size_t)(p->n_ops + extra), sizeof *ops);
    if (!ops) return xf_errorf(XF_ENOMEM, "out of memory for the op table");
    int64_t j = 0;
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++) {
        if (ph == XF_DECODE && !with_decode) break;
        record_op *k = &ops[j++];
        k->cost.phase = (xf_phase)ph;
        k->cost.layer = -1;
        k->cost.kind = OP_KV_ALLOC;
        k->cost.compute = XF_COMPUTE_FP32;
        for (int64_t i = 0; i < p->n_ops; i++)
            if ((int)p->ops[i].cost.phase == ph) ops[j++] = p->ops[i];
    }
    free(p->ops);
    p->ops = ops;
    p->n_ops = j;
    return XF_OK;
}

/* --cupti */
enum { CUPTI_SEL_OFF = 0, CUPTI_SEL_ACTIVITY, CUPTI_SEL_COUNTERS };

typedef struct run_ctx {
    model *m;
    const model_config *cfg;
    timer_probe *timer; /* NULL with --no-probes */
    perf_probe *perf;   /* NULL when no counter is open or --no-perf */
    probe_set ps;
    int reps, warmup;
    uint64_t seed;
    const int32_t *prompt_ids; /* NULL: random */
    int64_t n_prompt_ids;
    device_spec dev; /* the ceilings the ops are judged against */
    char perf_note[224]; /* which counters are open, or why not */
    /* --device cuda[:N] */
    int cuda, ordinal;
    cuda_device_info gpu;
    int cupti_sel;         /* CUPTI_SEL_*: what this run does (after the fallbacks) */
    int cupti_slot;        /* index of the CUPTI probe (or, between points, the NVTX probe) in ps; -1 none */
    cupti_probe *cupti;    /* the activity probe of the point being run; NULL otherwise */
    int graph;             /* --cuda-graph */
    int counters_off;      /* counters refused once (no permission): not tried again */
    int64_t cupti_unattributed, cupti_bad, cupti_drop_warnings, kernel_ops;
    char cupti_note[224];  /* what CUPTI did, for env and the notes */
    char counters_note[224];
    char graph_lines[1024];/* one line per point: the decode step with and without the graph */
    record *rec;
    int point_index;
} run_ctx;

/* Activity: flushes the kernels of one repetition into kt (kept repetitions: r >= 0; the others
 * are dropped). Dropped records are a warning (the times then undercount). */
static xf_status flush_kernels(run_ctx *c, cli_kernel_times *kt, int r) {
    cupti_attribution att;
    xf_status s = cupti_probe_flush(c->cupti, &att);
    if (s == XF_EIO) { /* records dropped: att is still filled */
        fprintf(stderr, "xfprof run: warning: %s\n", xf_error_msg());
        c->cupti_drop_warnings++;
        xf_error_clear();
        s = XF_OK;
    }
    if (!s) cli_kernel_times_add(kt, &att, r);
    cupti_attribution_free(&att);
    return s;
}

/* --cuda-graph: the decode step timed both ways in the same run, without probes and without the
 * per-op sync (which would hide what the graph saves): one warm-up repetition (it captures the
 * graph), then reps; each repetition is a prefill and gen decode steps. Host wall time per decode
 * step (the step's results copied back included) and the cudaEvent time around the step's GPU
 * work, medians over the repetitions. */
static xf_status graph_compare(run_ctx *c, record_point *p, const int32_t *prompts, const int64_t *lens) {
    const workload *w = &p->wl;
    void *bctx = model_backend_ctx(c->m);
    double *host[2], *ev[2];
    double med_host[2], med_ev[2], iqr;
    xf_status s = XF_OK;
    host[0] = calloc((size_t)c->reps, sizeof(double));
    host[1] = calloc((size_t)c->reps, sizeof(double));
    ev[0] = calloc((size_t)c->reps, sizeof(double));
    ev[1] = calloc((size_t)c->reps, sizeof(double));
    if (!host[0] || !host[1] || !ev[0] || !ev[1]) {
        s = xf_errorf(XF_ENOMEM, "out of memory for the graph timings");
        goto done;
    }
    model_set_sync_each_op(c->m, 0);
    for (int g = 0; g < 2 && !s; g++) {
        cuda_backend_set_graph(bctx, g);
        for (int r = -1; r < c->reps && !s; r++) {
            model_reset(c->m);
            if ((s = model_prefill(c->m, (int)w->batch, prompts, lens, NULL)) != XF_OK) break;
            double evsum = 0, t1 = timer_now_s();
            for (int64_t k = 0; k < w->gen && !s; k++) {
                s = model_decode_step(c->m, NULL, NULL);
                evsum += cuda_backend_last_step_ms(bctx) * 1e-3;
            }
            double t2 = timer_now_s();
            if (s || r < 0) continue;
            host[g][r] = (t2 - t1) / (double)w->gen;
            ev[g][r] = evsum / (double)w->gen;
        }
        timer_stats(host[g], c->reps, &med_host[g], &iqr);
        timer_stats(ev[g], c->reps, &med_ev[g], &iqr);
    }
    cuda_backend_set_graph(bctx, 0);
    model_set_sync_each_op(c->m, 1);
    if (s) goto done;
    char key[32], val[224];
    snprintf(key, sizeof key, "cuda_graph_p%d", c->point_index);
    snprintf(val, sizeof val,
             "batch %lld: decode step without graph %.6e s, with graph %.6e s (host wall per step, no per-op sync, "
             "no probes, median of %d); GPU events %.6e / %.6e s",
             (long long)w->batch, med_host[0], med_host[1], c->reps, med_ev[0], med_ev[1]);
    record_set_env(c->rec, key, val);
    size_t l = strlen(c->graph_lines);
    snprintf(c->graph_lines + l, sizeof c->graph_lines - l,
             "CUDA graph, point %d (batch %lld): decode step %.3f ms without, %.3f ms with (%.0f%% of the step was launch "
             "overhead); GPU events %.3f / %.3f ms\n",
             c->point_index, (long long)w->batch, med_host[0] * 1e3, med_host[1] * 1e3,
             med_host[0] > 0 ? 100.0 * (1.0 - med_host[1] / med_host[0]) : 0.0, med_ev[0] * 1e3, med_ev[1] * 1e3);
    fprintf(stderr, "xfprof run: %s", c->graph_lines + l);
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
static void collect_counters(run_ctx *c, record_point *p, const int32_t *prompts, const int64_t *lens) {
    const workload *w = &p->wl;
    int n_dec = w->gen > 0 ? (int)((w->gen + 1) / 2) : 0;
    cupti_collect_args a = {c->m, c->ordinal, (int)w->batch, prompts, lens, n_dec};
    cupti_collect_result cr;
    fprintf(stderr, "xfprof run: CUPTI counters: replaying prefill and %d decode step(s) under the Range Profiler...\n", n_dec);
    xf_status s = cupti_collect_counters(&a, &cr);
    if (s) {
        fprintf(stderr, "xfprof run: CUPTI counters not collected: %s\n", xf_error_msg());
        fprintf(stderr, "xfprof run: keeping CUPTI activity timing; bytes come from the cost model\n");
        snprintf(c->counters_note, sizeof c->counters_note, "not collected (%s): bytes from the cost model",
                 s == XF_EUNSUPPORTED ? "no profiling permission or no Range Profiler" : "error");
        if (s == XF_EUNSUPPORTED) c->counters_off = 1;
        xf_error_clear();
        return;
    }
    int applied = cupti_collect_apply(&cr, n_dec, p);
    snprintf(c->counters_note, sizeof c->counters_note,
             "Range Profiler, user replay (%d + %d passes), decode step %d of the replay; %d ops got counters; tensor unit "
             "%s; times from the uncounted runs",
             cr.passes[0], cr.passes[1], n_dec, applied, cr.flops_per_unit > 0 ? "calibrated" : "not calibrated (no tensor FLOPs)");
    cupti_collect_result_free(&cr);
}

/* Runs one point: warm-up, reps; fills the measured ops, summary and tokens. */
static xf_status run_point(run_ctx *c, record_point *p) {
    const workload *w = &p->wl;
    xf_status s;
    int64_t n_tok = w->batch * w->prompt;
    int32_t *prompts = malloc((size_t)n_tok * sizeof *prompts);
    int64_t *lens = malloc((size_t)w->batch * sizeof *lens);
    double *pre_s = calloc((size_t)c->reps, sizeof *pre_s), *dec_s = calloc((size_t)c->reps, sizeof *dec_s);
    cli_kernel_times kt;
    memset(&kt, 0, sizeof kt);
    if (!prompts || !lens || !pre_s || !dec_s) {
        s = xf_errorf(XF_ENOMEM, "out of memory for %lld prompt tokens", (long long)n_tok);
        goto done;
    }
    uint64_t st = c->seed ^ 0x5eedULL;
    for (int64_t b = 0; b < w->batch; b++) {
        lens[b] = w->prompt;
        for (int64_t i = 0; i < w->prompt; i++)
            prompts[b * w->prompt + i] = c->prompt_ids ? c->prompt_ids[i] : (int32_t)(splitmix64(&st) % (uint64_t)c->cfg->vocab);
    }
    if (c->cuda && c->cupti_sel != CUPTI_SEL_OFF) {
        if (!c->cupti) { /* every point but the first (cmd_run opened that one) */
            if ((s = cupti_probe_init(&c->cupti, c->ordinal, CUPTI_MODE_ACTIVITY, 0)) != XF_OK) goto done;
            c->ps.items[c->cupti_slot] = cupti_probe_as_probe(c->cupti);
        }
        if ((s = cli_kernel_times_init(&kt, p, c->cfg->n_layers, c->reps)) != XF_OK) goto done;
        if ((s = flush_kernels(c, &kt, -1)) != XF_OK) goto done; /* drops what ran before (weight upload) */
    }
    const probe_set *ps = c->ps.n ? &c->ps : NULL;
    if (c->timer) timer_probe_clear(c->timer);
    if (c->perf) perf_probe_clear(c->perf);
    for (int r = -c->warmup; r < c->reps; r++) {
        model_reset(c->m);
        if (c->timer) timer_probe_rep_begin(c->timer);
        if (c->perf) perf_probe_rep_begin(c->perf);
        double t0 = timer_now_s();
        if ((s = model_prefill(c->m, (int)w->batch, prompts, lens, ps)) != XF_OK) goto done;
        double t1 = timer_now_s();
        for (int64_t k = 0; k < w->gen; k++)
            if ((s = model_decode_step(c->m, NULL, ps)) != XF_OK) goto done;
        double t2 = timer_now_s();
        if (c->cupti && (s = flush_kernels(c, &kt, r)) != XF_OK) goto done; /* after the timed part */
        if (r < 0) continue; /* warm-up: the accumulators are cleared by the next rep_begin */
        pre_s[r] = t1 - t0;
        dec_s[r] = w->gen > 0 ? (t2 - t1) / (double)w->gen : 0;
        if (c->timer && (s = timer_probe_rep_end(c->timer)) != XF_OK) goto done;
        if (c->perf && (s = perf_probe_rep_end(c->perf)) != XF_OK) goto done;
    }
    /* Tokens of the last repetition (greedy: every repetition gives the same), before the counter
     * replay and the graph timings run the model again. */
    int64_t per = -1;
    for (int64_t b = 0; b < w->batch; b++) {
        int64_t n;
        const int32_t *t = model_tokens(c->m, (int)b, &n);
        if (!t) n = 0;
        if (per < 0 || n < per) per = n;
    }
    if (per > 0) {
        p->tokens = malloc((size_t)(w->batch * per) * sizeof *p->tokens);
        if (!p->tokens) {
            s = xf_errorf(XF_ENOMEM, "out of memory for tokens");
            goto done;
        }
        for (int64_t b = 0; b < w->batch; b++) {
            int64_t n;
            const int32_t *t = model_tokens(c->m, (int)b, &n);
            memcpy(&p->tokens[b * per], t, (size_t)per * sizeof *t);
        }
        p->n_seqs = w->batch;
        p->n_tokens_per_seq = per;
    }
    if (c->cupti) { /* activity off before the replays and the graph timings: they must not be traced */
        cupti_probe_free(c->cupti);
        c->cupti = NULL;
        c->ps.items[c->cupti_slot] = cupti_nvtx_probe();
    }
    if (c->cuda && c->cupti_sel == CUPTI_SEL_COUNTERS && !c->counters_off) collect_counters(c, p, prompts, lens);
    /* Measured ops. */
    roofline_thresholds th;
    roofline_thresholds_default(&th);
    for (int64_t i = 0; c->timer && i < p->n_ops; i++) {
        record_op *op = &p->ops[i];
        const double *smp;
        int n = timer_probe_samples(c->timer, op->cost.phase, op->cost.layer, op->cost.kind, &smp);
        if (n <= 0) continue; /* the runner did not run this op (e.g. no decode) */
        op->samples_s = malloc((size_t)n * sizeof *op->samples_s);
        if (!op->samples_s) {
            s = xf_errorf(XF_ENOMEM, "out of memory for samples");
            goto done;
        }
        memcpy(op->samples_s, smp, (size_t)n * sizeof *smp);
        op->n_samples = n;
        op->measured = 1;
        timer_stats(smp, n, &op->time_s, &op->spread_s);
        if (!c->cuda) perf_probe_fill(c->perf, op->cost.phase, op->cost.layer, op->cost.kind, op);
        /* the op's summed kernel time (counters mode may have filled every counter slot first) */
        if (kt.kt) c->kernel_ops += cli_kernel_times_fill(&kt, i, w->gen, op);
        roofline_measure_op(op, &c->dev, &th);
    }
    roofline_summarize_point(p);
    /* TTFT and TPOT are the whole steps' wall times (ops plus the gaps between them). */
    record_summary *sm = &p->summary;
    sm->ttft_s = median_of(pre_s, c->reps);
    sm->tpot_s = w->gen > 0 ? median_of(dec_s, c->reps) : 0;
    double request = sm->ttft_s + (double)w->gen * sm->tpot_s;
    sm->tokens_per_s = request > 0 ? (double)(w->batch * w->gen) / request : 0;
    sm->prefill_tokens_per_s = sm->ttft_s > 0 ? (double)(w->batch * w->prompt) / sm->ttft_s : 0;
    sm->decode_tokens_per_s = sm->tpot_s > 0 ? (double)w->batch / sm->tpot_s : 0;
    if (!c->timer) { /* no per-op times: the phase times are the wall times */
        sm->prefill_time_s = sm->ttft_s;
        sm->decode_time_s = sm->tpot_s;
    }
    if (c->cuda && c->graph && w->gen > 0 && (s = graph_compare(c, p, prompts, lens)) != XF_OK) goto done;
    s = XF_OK;
done:
    free(prompts);
    free(lens);
    free(pre_s);
    free(dec_s);
    c->cupti_unattributed += kt.unattributed;
    c->cupti_bad += kt.bad_records;
    cli_kernel_times_free(&kt);
    return s;
}

/* "open: cycles; unsupported: imc_read_bytes, imc_write_bytes (why, for the first of them)". */
static void perf_note(const perf_probe *p, char *buf, size_t len) {
    char open[96] = "", unsup[96] = "";
    const char *why = NULL;
    for (int k = 0; k < PERF_COUNTER_COUNT; k++) {
        perf_counter_id id = (perf_counter_id)k;
        char *dst = perf_probe_supported(p, id) ? open : unsup;
        size_t l = strlen(dst);
        snprintf(dst + l, sizeof open - l, "%s%s", l ? ", " : "", perf_counter_name(id));
        if (!perf_probe_supported(p, id) && !why) {
            why = strchr(perf_probe_reason(p, id), ':');
            why = why ? why + 2 : perf_probe_reason(p, id);
        }
    }
    snprintf(buf, len, "open: %s; unsupported: %s%s%s%s", open[0] ? open : "none", unsup[0] ? unsup : "none",
             why ? " (" : "", why ? why : "", why ? ")" : "");
}

static void set_env(record *rec, int threads, const char *ceil_note, const run_ctx *c, double rss) {
    char buf[224];
    char host[64] = "unknown";
    gethostname(host, sizeof host - 1);
    record_set_env(rec, "host", host);
    ceilings_cpu_model(buf, sizeof buf);
    record_set_env(rec, "cpu", buf);
    snprintf(buf, sizeof buf, "%ld online", sysconf(_SC_NPROCESSORS_ONLN));
    record_set_env(rec, "cpus", buf);
    snprintf(buf, sizeof buf, "%d", threads);
    record_set_env(rec, "threads", buf);
#ifdef __VERSION__
    record_set_env(rec, "compiler", "gcc-compatible " __VERSION__);
#endif
    if (c->cuda) { /* the host's SIMD, BLAS and OpenMP do not compute this run's ops */
        const cuda_device_info *g = &c->gpu;
        snprintf(buf, sizeof buf, "cuda:%d %.120s, compute capability %d.%d, %d SMs, %.1f GiB", g->ordinal, g->name, g->cc_major,
                 g->cc_minor, g->sm_count, g->total_mem_bytes / 1073741824.0);
        record_set_env(rec, "gpu", buf);
        snprintf(buf, sizeof buf, "driver %d.%d, runtime %d.%d", g->driver_version / 1000, g->driver_version % 1000 / 10,
                 g->runtime_version / 1000, g->runtime_version % 1000 / 10);
        record_set_env(rec, "cuda", buf);
        record_set_env(rec, "timing", c->timer ? "host clock (CLOCK_MONOTONIC) per op with a device sync after every op "
                                                 "(sync_each_op): op times include launch latency"
                                               : "probes off (--no-probes): whole-step host wall times, sync per op");
        record_set_env(rec, "cupti", c->cupti_note);
        if (c->counters_note[0]) record_set_env(rec, "cupti_counters", c->counters_note);
        record_set_env(rec, "bandwidth_ceiling", ceil_note);
        if (c->timer) {
            snprintf(buf, sizeof buf, "%.1f ns per range, subtracted", timer_probe_overhead_s(c->timer) * 1e9);
            record_set_env(rec, "timer_overhead", buf);
        } else
            record_set_env(rec, "timer_overhead", "probes off (--no-probes): whole-step times only");
        record_set_env(rec, "perf_counters", "not opened on --device cuda (host counters do not see the GPU's work)");
        snprintf(buf, sizeof buf, "%.0f", rss);
        record_set_env(rec, "peak_rss_bytes", buf);
        return;
    }
    record_set_env(rec, "simd", ceilings_isa());
    for (int i = 0; i < rec->n_points; i++)
        if (rec->points[i].wl.wdtype == XF_INT8) {
            snprintf(buf, sizeof buf, "int8 projections take their input on a 16-bit grid per group of %d (step max|x|/32767); "
                     "one-token decode multiplies int16 by int8 (%s)",
                     rec->points[i].wl.quant_group > 0 ? rec->points[i].wl.quant_group : XF_DEFAULT_QUANT_GROUP,
                     xk_i8a16_name(xk_isa_best()));
            record_set_env(rec, "int8_inputs", buf);
            break;
        }
    snprintf(buf, sizeof buf, "%s (core %s)", openblas_get_config(), openblas_get_corename());
    record_set_env(rec, "blas", buf);
    snprintf(buf, sizeof buf, "OMP_WAIT_POLICY=%.60s, GOMP_SPINCOUNT=%.60s",
             getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "(unset)",
             getenv("GOMP_SPINCOUNT") ? getenv("GOMP_SPINCOUNT") : "(unset)");
    record_set_env(rec, "omp_wait_policy", buf);
    record_set_env(rec, "bandwidth_ceiling", ceil_note);
    if (c->timer) {
        snprintf(buf, sizeof buf, "%.1f ns per range, subtracted", timer_probe_overhead_s(c->timer) * 1e9);
        record_set_env(rec, "timer_overhead", buf);
    } else
        record_set_env(rec, "timer_overhead", "probes off (--no-probes): whole-step times only");
    record_set_env(rec, "perf_counters", c->perf_note);
    snprintf(buf, sizeof buf, "%.0f", rss);
    record_set_env(rec, "peak_rss_bytes", buf);
}

static void print_notes(FILE *f, const record *rec, const char *ceil_note, const run_ctx *c, double rss) {
    fprintf(f, "\nceilings: %s\n", rec->device.source);
    fprintf(f, "bandwidth ceiling: %s\n", ceil_note);
    if (c->timer) fprintf(f, "timer overhead: %.1f ns per range (measured, subtracted)\n", timer_probe_overhead_s(c->timer) * 1e9);
    else fprintf(f, "probes off: per-op times not measured; TTFT and TPOT are whole-step wall times\n");
    if (c->cuda) {
        fprintf(f, "GPU: cuda:%d %s; op times: host clock with a device sync after every op\n", c->gpu.ordinal, c->gpu.name);
        fprintf(f, "CUPTI: %s\n", c->cupti_note);
        if (c->counters_note[0]) fprintf(f, "CUPTI counters: %s\n", c->counters_note);
        fputs(c->graph_lines, f);
    } else if (!c->perf) fprintf(f, "hardware counters: none opened (the record says \"unsupported\"): %s\n", c->perf_note);
    for (int i = 0; i < rec->n_points; i++) {
        const record_point *p = &rec->points[i];
        const record_summary *s = &p->summary;
        fprintf(f,
                "point %d (batch %lld, prompt %lld, gen %lld): TTFT %.3f ms, TPOT %.3f ms, %.1f tokens/s (decode %.1f, "
                "prefill %.1f), memory-bound share %.0f%%\n",
                i, (long long)p->wl.batch, (long long)p->wl.prompt, (long long)p->wl.gen, s->ttft_s * 1e3, s->tpot_s * 1e3,
                s->tokens_per_s, s->decode_tokens_per_s, s->prefill_tokens_per_s, 100 * s->share_bound[XF_BOUND_MEMORY]);
    }
    fprintf(f, "peak memory (resident): %.1f MiB\n", rss / 1048576.0);
}

int cmd_run(int argc, char **argv) {
    enum {
        O_MODEL = 1000, O_WEIGHTS, O_BATCH, O_PROMPT, O_GEN, O_PIDS, O_WD, O_KV, O_GROUP, O_THREADS, O_REPS, O_WARMUP,
        O_SEED, O_POLICY, O_ALLOC, O_DEVICE, O_NOPROBES, O_NOPERF, O_FORMAT, O_PERLAYER, O_REPORT, O_TRACE, O_CUPTI, O_GRAPH
    };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},     {"weights", required_argument, 0, O_WEIGHTS},
        {"batch", required_argument, 0, O_BATCH},     {"prompt", required_argument, 0, O_PROMPT},
        {"gen", required_argument, 0, O_GEN},         {"prompt-ids", required_argument, 0, O_PIDS},
        {"wdtype", required_argument, 0, O_WD},       {"kvdtype", required_argument, 0, O_KV},
        {"group", required_argument, 0, O_GROUP},     {"threads", required_argument, 0, O_THREADS},
        {"reps", required_argument, 0, O_REPS},       {"warmup", required_argument, 0, O_WARMUP},
        {"seed", required_argument, 0, O_SEED},       {"kv-policy", required_argument, 0, O_POLICY},
        {"kv-alloc", required_argument, 0, O_ALLOC},  {"device", required_argument, 0, O_DEVICE},
        {"no-probes", no_argument, 0, O_NOPROBES},    {"no-perf", no_argument, 0, O_NOPERF},
        {"format", required_argument, 0, O_FORMAT},   {"output", required_argument, 0, 'o'},
        {"per-layer", no_argument, 0, O_PERLAYER},    {"report", required_argument, 0, O_REPORT},
        {"trace", required_argument, 0, O_TRACE},     {"help", no_argument, 0, 'h'},
        {"cupti", required_argument, 0, O_CUPTI},     {"cuda-graph", no_argument, 0, O_GRAPH},
        {0, 0, 0, 0}};
    const char *model_s = DEF_MODEL, *weights = NULL, *batch_s = DEF_BATCH, *prompt_s = NULL, *gen_s = DEF_GEN;
    const char *pids_s = NULL, *policy = "paged:16", *device = "cpu";
    xf_dtype wd = XF_FP32, kvd = XF_FP32;
    int64_t group = 0, reps = 5, warmup = 1, seed = 1;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t threads = ncpu > 0 ? ncpu : 1;
    kv_alloc_mode alloc = KV_ALLOC_POOL;
    int probes = 1, use_perf = 1;
    int cuda = 0, ordinal = 0, wd_given = 0, cupti_sel = -1 /* default */, graph = 0;
    cli_output out = {RENDER_TABLE, NULL, 0, NULL, NULL};
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        xf_status s = XF_OK;
        switch (c) {
        case 'h': help(); return CLI_EXIT_OK;
        case O_MODEL: model_s = optarg; break;
        case O_WEIGHTS: weights = optarg; break;
        case O_BATCH: batch_s = optarg; break;
        case O_PROMPT: prompt_s = optarg; break;
        case O_GEN: gen_s = optarg; break;
        case O_PIDS: pids_s = optarg; break;
        case O_WD:
            s = dtype_parse(optarg, &wd);
            wd_given = 1;
            if (s == XF_OK && wd != XF_FP32 && wd != XF_BF16 && wd != XF_INT8)
                return cli_usage_error(CMD, "--wdtype: the CPU model runs fp32, bf16 or int8 weights, not %s", optarg);
            break;
        case O_KV:
            s = dtype_parse(optarg, &kvd);
            if (s == XF_OK && kvd != XF_FP32 && kvd != XF_FP16 && kvd != XF_BF16)
                return cli_usage_error(CMD, "--kvdtype: the KV cache holds fp32, fp16 or bf16, not %s", optarg);
            break;
        case O_GROUP: s = args_int("--group", optarg, 1, 1 << 20, &group); break;
        case O_THREADS: s = args_int("--threads", optarg, 1, 1024, &threads); break;
        case O_REPS: s = args_int("--reps", optarg, 1, 10000, &reps); break;
        case O_WARMUP: s = args_int("--warmup", optarg, 0, 1000, &warmup); break;
        case O_SEED: s = args_int("--seed", optarg, 0, INT64_MAX, &seed); break;
        case O_POLICY: policy = optarg; break;
        case O_ALLOC:
            if (!strcmp(optarg, "pool")) alloc = KV_ALLOC_POOL;
            else if (!strcmp(optarg, "system")) alloc = KV_ALLOC_SYSTEM;
            else return cli_usage_error(CMD, "--kv-alloc: '%s' is not pool or system", optarg);
            break;
        case O_DEVICE:
            device = optarg;
            if (!strcmp(device, "cpu")) cuda = 0;
            else if (cuda_device_parse(device, &ordinal) == XF_OK) cuda = 1;
            else return cli_usage_error(CMD, "--device: '%s' is not cpu, cuda or cuda:N (N a GPU index)", device);
            break;
        case O_CUPTI:
            if (!strcmp(optarg, "off")) cupti_sel = CUPTI_SEL_OFF;
            else if (!strcmp(optarg, "activity")) cupti_sel = CUPTI_SEL_ACTIVITY;
            else if (!strcmp(optarg, "counters")) cupti_sel = CUPTI_SEL_COUNTERS;
            else return cli_usage_error(CMD, "--cupti: '%s' is not off, activity or counters", optarg);
            break;
        case O_GRAPH: graph = 1; break;
        case O_NOPROBES: probes = 0; break;
        case O_NOPERF: use_perf = 0; break;
        case O_FORMAT: if (cli_output_option(CMD, "format", optarg, &out) < 0) return CLI_EXIT_USAGE; break;
        case 'o': cli_output_option(CMD, "output", optarg, &out); break;
        case O_PERLAYER: cli_output_option(CMD, "per-layer", NULL, &out); break;
        case O_REPORT: cli_output_option(CMD, "report", optarg, &out); break;
        case O_TRACE: cli_output_option(CMD, "trace", optarg, &out); break;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
        if (s != XF_OK) return cli_usage_error(CMD, "%s", xf_error_msg());
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);

    if (!cuda && cupti_sel > CUPTI_SEL_OFF) return cli_usage_error(CMD, "--cupti needs --device cuda (CUPTI traces GPU kernels)");
    if (!cuda && graph) return cli_usage_error(CMD, "--cuda-graph needs --device cuda");
    /* The device first: without one, say so plainly (exit 3) before anything is resolved or measured. */
    cuda_device_info gpu;
    memset(&gpu, 0, sizeof gpu);
    if (cuda) {
        xf_status ds = cuda_device_open(ordinal, &gpu);
        if (ds == XF_EUNSUPPORTED) return cli_cuda_unsupported(CMD);
        if (ds) return cli_fail(CMD, ds);
        if (!backend_find("cuda"))
            return cli_fail(CMD, xf_errorf(XF_EUNSUPPORTED, "--device %s: this build has the CUDA runtime but not the CUDA "
                                                            "backend; use --device cpu", device));
        if (!wd_given) wd = XF_BF16; /* the GPU holds bf16 weights whatever the host has: do not make fp32 ones */
        if (graph && alloc == KV_ALLOC_SYSTEM)
            fprintf(stderr, "xfprof run: note: CUDA graphs need the KV pool (the system allocator moves KV every step): "
                            "with --kv-alloc system both --cuda-graph timings launch op by op\n");
    }

    model_config cfg;
    xf_status s = config_resolve(model_s, &cfg);
    if (s) return cli_fail(CMD, s);
    if ((s = config_validate(&cfg))) return cli_fail(CMD, s);

    /* Prompt ids: given, or random from the seed. */
    int32_t *pids = NULL;
    int64_t n_pids = 0;
    if (pids_s) {
        int64_t *v = NULL;
        int n = 0;
        if (prompt_s) return cli_usage_error(CMD, "give either --prompt or --prompt-ids, not both");
        if (args_int_list("--prompt-ids", pids_s, 0, cfg.vocab - 1, &v, &n) != XF_OK)
            return cli_usage_error(CMD, "%s (%s has a vocabulary of %lld)", xf_error_msg(), cfg.name, (long long)cfg.vocab);
        pids = malloc((size_t)n * sizeof *pids);
        if (!pids) {
            free(v);
            return cli_fail(CMD, xf_errorf(XF_ENOMEM, "out of memory"));
        }
        for (int i = 0; i < n; i++) pids[i] = (int32_t)v[i];
        n_pids = n;
        free(v);
    }
    char n_pids_s[32];
    snprintf(n_pids_s, sizeof n_pids_s, "%lld", (long long)n_pids);
    int64_t *batches = NULL, *prompts = NULL, *gens = NULL;
    int nb = 0, np = 0, ng = 0;
    if (args_int_list("--batch", batch_s, 1, 4096, &batches, &nb) ||
        args_int_list("--prompt", pids ? n_pids_s : prompt_s ? prompt_s : DEF_PROMPT, 1, 1 << 20, &prompts, &np) ||
        args_int_list("--gen", gen_s, 0, 1 << 20, &gens, &ng)) {
        free(batches);
        free(prompts);
        free(gens);
        free(pids);
        return cli_usage_error(CMD, "%s", xf_error_msg());
    }
    int rc = CLI_EXIT_OK;
    record rec;
    record_init(&rec, "run");
    run_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    snprintf(ctx.perf_note, sizeof ctx.perf_note, "%s", "not opened (--no-perf or --no-probes)");
    int64_t max_b = 0, max_p = 0, max_len = 0;
    for (int i = 0; i < nb; i++) max_b = batches[i] > max_b ? batches[i] : max_b;
    for (int i = 0; i < np; i++) max_p = prompts[i] > max_p ? prompts[i] : max_p;
    for (int i = 0; i < np; i++)
        for (int j = 0; j < ng; j++) max_len = prompts[i] + gens[j] > max_len ? prompts[i] + gens[j] : max_len;
    if (max_len > cfg.max_ctx) {
        rc = cli_usage_error(CMD, "prompt + gen = %lld tokens exceeds %s's context of %lld", (long long)max_len, cfg.name,
                             (long long)cfg.max_ctx);
        goto out;
    }

    model_options mo;
    model_options_default(&mo);
    mo.seed = (uint64_t)seed;
    mo.wdtype = wd;
    mo.quant_group = (int)group;
    mo.kvdtype = kvd;
    mo.threads = (int)threads;
    mo.kv_policy = policy;
    mo.kv_alloc = alloc;
    mo.backend = cuda ? "cuda" : device;
    mo.device_index = ordinal;
    mo.sync_each_op = cuda; /* host-clock per-op times need the asynchronous GPU to finish each op */
    mo.weights_dir = weights;
    mo.max_seqs = max_b;
    mo.max_prompt = max_p;
    mo.max_seq_len = max_len;
    /* Memory first: refuse before measuring or allocating anything. */
    model_mem mm;
    if ((s = model_mem_of(&cfg, &mo, &mm))) {
        rc = cli_fail(CMD, s);
        goto out;
    }
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    double phys = pages > 0 && psz > 0 ? (double)pages * (double)psz : 0;
    /* On the GPU: weights (bf16 there), KV and activations against the GPU's memory; the host
     * still holds the weights at --wdtype until they are uploaded. */
    xf_dtype dev_wd = XF_BF16;
    if (cuda && getenv("XFPROF_CUDA_WEIGHTS") && !strcmp(getenv("XFPROF_CUDA_WEIGHTS"), "fp16")) dev_wd = XF_FP16;
    int64_t dev_weights = mm.weights_bytes;
    if (cuda) {
        model_options dmo = mo;
        dmo.wdtype = dev_wd;
        model_mem dm;
        if ((s = model_mem_of(&cfg, &dmo, &dm))) {
            rc = cli_fail(CMD, s);
            goto out;
        }
        dev_weights = dm.weights_bytes;
        if ((double)dm.total_bytes > (double)gpu.total_mem_bytes) {
            rc = cli_fail(CMD, xf_errorf(XF_EOVERFLOW,
                                         "%s needs %.2f GiB on the GPU (weights %.2f GiB at %s, KV %.2f GiB, activations %.2f GiB) "
                                         "but cuda:%d (%s) has %.2f GiB: nothing was allocated; try a smaller model or a smaller "
                                         "--batch/--prompt/--gen",
                                         cfg.name, dm.total_bytes / 1073741824.0, dm.weights_bytes / 1073741824.0,
                                         dtype_name(dev_wd), dm.kv_bytes / 1073741824.0, dm.activations_bytes / 1073741824.0,
                                         ordinal, gpu.name, gpu.total_mem_bytes / 1073741824.0));
            goto out;
        }
        if (phys > 0 && (double)mm.weights_bytes > phys) {
            rc = cli_fail(CMD, xf_errorf(XF_EOVERFLOW,
                                         "%s's weights take %.2f GiB at %s on the host before the upload but this machine has "
                                         "%.2f GiB: nothing was allocated; use --wdtype bf16",
                                         cfg.name, mm.weights_bytes / 1073741824.0, dtype_name(wd), phys / 1073741824.0));
            goto out;
        }
    } else if (phys > 0 && (double)mm.total_bytes > phys) {
        rc = cli_fail(CMD, xf_errorf(XF_EOVERFLOW,
                                     "%s needs %.2f GiB (weights %.2f GiB at %s, KV %.2f GiB, activations %.2f GiB) but this "
                                     "machine has %.2f GiB: nothing was allocated; try a smaller model, --wdtype int8, or a "
                                     "smaller --batch/--prompt/--gen",
                                     cfg.name, mm.total_bytes / 1073741824.0, mm.weights_bytes / 1073741824.0, dtype_name(wd),
                                     mm.kv_bytes / 1073741824.0, mm.activations_bytes / 1073741824.0, phys / 1073741824.0));
        goto out;
    }

    /* Ceilings. */
    char mpath[4096];
    int from_file = 0;
    device_spec machine;
    char ceil_note[224];
    if (cuda) {
        if ((s = load_gpu_ceilings(ordinal, &machine, &from_file, mpath, sizeof mpath))) {
            rc = s == XF_EUNSUPPORTED ? cli_cuda_unsupported(CMD) : cli_fail(CMD, s);
            goto out;
        }
        ctx.dev = machine;
        snprintf(ceil_note, sizeof ceil_note, "HBM %.2f GB/s (%s; weights %.1f MiB at %s, L2 %.1f MiB)", machine.bandwidth_Bps / 1e9,
                 from_file ? "measured" : machine.name, dev_weights / 1048576.0, dtype_name(dev_wd), machine.cache_bytes / 1048576.0);
        fprintf(stderr, "xfprof run: cuda:%d %s; ceilings from %s; bandwidth ceiling: %s\n", ordinal, gpu.name, mpath, ceil_note);
    } else {
        if ((s = load_ceilings((int)threads, &machine, &from_file, mpath, sizeof mpath))) {
            rc = cli_fail(CMD, s);
            goto out;
        }
        ctx.dev = machine;
        if (machine.cache_bytes > 0 && machine.cache_bandwidth_Bps > 0 && (double)mm.weights_bytes <= machine.cache_bytes) {
            ctx.dev.bandwidth_Bps = machine.cache_bandwidth_Bps;
            size_t l = strlen(ctx.dev.source);
            snprintf(ctx.dev.source + l, sizeof ctx.dev.source - l, "; bandwidth_Bps = in-cache read (weights fit in the LLC)");
            snprintf(ceil_note, sizeof ceil_note,
                     "in-cache %.2f GB/s: the weights (%.1f MiB) fit in the %.1f MiB last-level cache (DRAM read %.2f GB/s)",
                     machine.cache_bandwidth_Bps / 1e9, mm.weights_bytes / 1048576.0, machine.cache_bytes / 1048576.0,
                     machine.bandwidth_Bps / 1e9);
        } else {
            snprintf(ceil_note, sizeof ceil_note, "DRAM read %.2f GB/s (weights %.1f MiB, last-level cache %.1f MiB)",
                     machine.bandwidth_Bps / 1e9, mm.weights_bytes / 1048576.0, machine.cache_bytes / 1048576.0);
        }
        fprintf(stderr, "xfprof run: ceilings %s; bandwidth ceiling: %s\n", from_file ? mpath : "measured now (quick)", ceil_note);
    }

    /* Probes, then the model (the perf counters must exist before the OpenMP pool). */
    ctx.cuda = cuda;
    ctx.ordinal = ordinal;
    ctx.gpu = gpu;
    ctx.graph = graph;
    ctx.cupti_slot = -1;
    ctx.rec = &rec;
    if (cuda) {
        int asked = cupti_sel >= 0;
        ctx.cupti_sel = asked ? cupti_sel : CUPTI_SEL_ACTIVITY;
        if (!probes) {
            if (asked && cupti_sel != CUPTI_SEL_OFF) {
                rc = cli_usage_error(CMD, "--cupti %s needs the probes: drop --no-probes",
                                     cupti_sel == CUPTI_SEL_COUNTERS ? "counters" : "activity");
                goto out;
            }
            ctx.cupti_sel = CUPTI_SEL_OFF;
            snprintf(ctx.cupti_note, sizeof ctx.cupti_note, "off (--no-probes)");
        } else if (ctx.cupti_sel == CUPTI_SEL_OFF) {
            snprintf(ctx.cupti_note, sizeof ctx.cupti_note, "off (--cupti off): op times from the host clock only");
        } else if ((s = cupti_probe_init(&ctx.cupti, ordinal, CUPTI_MODE_ACTIVITY, 0)) != XF_OK) {
            if (asked) {
                rc = cli_fail(CMD, s);
                goto out;
            }
            fprintf(stderr, "xfprof run: note: CUPTI off (%s); op times from the host clock only\n", xf_error_msg());
            snprintf(ctx.cupti_note, sizeof ctx.cupti_note, "off: CUPTI could not be opened (%.180s)", xf_error_msg());
            xf_error_clear();
            ctx.cupti_sel = CUPTI_SEL_OFF;
        }
        if (probes) { /* outermost: CUPTI's external ids and NVTX ranges (or NVTX alone, for Nsight Systems) */
            ctx.cupti_slot = ctx.ps.n;
            ctx.ps.items[ctx.ps.n++] = ctx.cupti ? cupti_probe_as_probe(ctx.cupti) : cupti_nvtx_probe();
        }
        snprintf(ctx.perf_note, sizeof ctx.perf_note, "not opened on --device cuda");
    }
    if (probes) {
        if (use_perf && !cuda) {
            if ((s = perf_probe_init(cfg.n_layers, (int)reps, 0, &ctx.perf))) {
                rc = cli_fail(CMD, s);
                goto out;
            }
            perf_note(ctx.perf, ctx.perf_note, sizeof ctx.perf_note);
            if (perf_probe_n_supported(ctx.perf) == 0) {
                perf_probe_free(ctx.perf);
                ctx.perf = NULL;
            } else
                ctx.ps.items[ctx.ps.n++] = perf_probe_as_probe(ctx.perf);
        }
        if ((s = timer_probe_init(cfg.n_layers, (int)reps, 0, &ctx.timer))) {
            rc = cli_fail(CMD, s);
            goto out;
        }
        ctx.ps.items[ctx.ps.n++] = timer_probe_as_probe(ctx.timer); /* last: innermost */
    }
    if ((s = model_init(&ctx.m, &cfg, &mo))) {
        rc = cli_fail(CMD, s);
        goto out;
    }
    ctx.cfg = &cfg;
    ctx.reps = (int)reps;
    ctx.warmup = (int)warmup;
    ctx.seed = (uint64_t)seed;
    ctx.prompt_ids = pids;
    ctx.n_prompt_ids = n_pids;

    rec.model = cfg;
    rec.model_params = config_param_count(&cfg);
    rec.device = ctx.dev;
    rec.ceilings_measured = cuda ? from_file : 1; /* CPU: the machine file or a quick measurement */
    /* Ctrl-C / SIGTERM: the point being measured finishes, every completed point is written. */
    cli_signals_install();
    for (int ib = 0; ib < nb && !cli_signal_pending(); ib++)
        for (int ip = 0; ip < np && !cli_signal_pending(); ip++)
            for (int ig = 0; ig < ng && !cli_signal_pending(); ig++) {
                workload w;
                memset(&w, 0, sizeof w);
                w.batch = batches[ib];
                w.prompt = prompts[ip];
                w.gen = gens[ig];
                w.wdtype = cuda ? dev_wd : wd;
                w.adtype = cuda ? dev_wd : XF_FP32; /* CPU: fp32; CUDA: 16-bit GEMM inputs on tensor cores */
                w.kvdtype = kvd;
                w.quant_group = (int)group;
                record_point *p = record_add_point(&rec);
                if (!p) {
                    rc = cli_fail(CMD, xf_errorf(XF_ENOMEM, "out of memory"));
                    goto out;
                }
                if ((s = predict_point(&cfg, &w, &ctx.dev, p)) || (s = add_kv_alloc_ops(p, w.gen > 0))) {
                    rc = cli_fail(CMD, s);
                    goto out;
                }
                p->run.threads = (int)threads;
                p->run.reps = (int)reps;
                p->run.warmup = (int)warmup;
                p->run.seed = (uint64_t)seed;
                snprintf(p->run.backend, sizeof p->run.backend, "%s", model_backend_name(ctx.m));
                snprintf(p->run.kv_policy, sizeof p->run.kv_policy, "%s", policy);
                snprintf(p->run.kv_alloc, sizeof p->run.kv_alloc, "%s", alloc == KV_ALLOC_SYSTEM ? "system" : "pool");
                p->run.timer_overhead_s = timer_probe_overhead_s(ctx.timer);
                fprintf(stderr, "xfprof run: %s batch %lld prompt %lld gen %lld, %s weights, %lld threads, %d+%d reps...\n",
                        cfg.name, (long long)w.batch, (long long)w.prompt, (long long)w.gen, dtype_name(wd), (long long)threads,
                        (int)warmup, (int)reps);
                ctx.point_index = rec.n_points - 1;
                if ((s = run_point(&ctx, p))) {
                    rc = cli_fail(CMD, s);
                    goto out;
                }
                if (rec.n_points == 1) rec.kv_bytes_per_token = p->memory.kv_bytes_per_token;
                p->memory.capacity_bytes = machine.memory_bytes;
            }
    int stopped_by = cli_signal_pending();
    if (stopped_by)
        fprintf(stderr, "xfprof run: interrupted by %s: writing the %d completed point(s) of %d\n", cli_signal_name(stopped_by),
                rec.n_points, nb * np * ng);
    if (ctx.timer && timer_probe_dropped(ctx.timer) > 0)
        fprintf(stderr, "xfprof run: warning: %lld probe ranges were unbalanced or out of range and dropped\n",
                (long long)timer_probe_dropped(ctx.timer));
    if (cuda && ctx.cupti_sel != CUPTI_SEL_OFF)
        snprintf(ctx.cupti_note, sizeof ctx.cupti_note,
                 "activity: gpu_kernel_time_s = summed kernel time in each op range (median over reps; per "
                 "step in decode) on %lld ops; %lld kernels unattributed, %lld bad records, %lld flushes dropped records",
                 (long long)ctx.kernel_ops, (long long)ctx.cupti_unattributed, (long long)ctx.cupti_bad,
                 (long long)ctx.cupti_drop_warnings);
    double rss = peak_rss_bytes();
    set_env(&rec, (int)threads, ceil_note, &ctx, rss);
    record_stamp_time(&rec);
    if (cli_test_slow_op(&rec) != XF_OK) { /* test only (tests/, bench/ci_ab.sh) */
        rc = cli_fail(CMD, XF_EINVAL);
        goto out;
    }
    rc = cli_output_write(CMD, &rec, &out);
    /* Under the table: how it was measured (ceilings used, counters, BLAS kernels). */
    if (rc == CLI_EXIT_OK && out.format == RENDER_TABLE && !(out.path && !strcmp(out.path, "-"))) print_notes(stdout, &rec, ceil_note, &ctx, rss);
    if (rc == CLI_EXIT_OK && stopped_by) rc = 128 + stopped_by;
out:
    model_free(ctx.m);
    cupti_probe_free(ctx.cupti);
    timer_probe_free(ctx.timer);
    perf_probe_free(ctx.perf);
    record_free(&rec);
    free(batches);
    free(prompts);
    free(gens);
    free(pids);
    return rc;
}
