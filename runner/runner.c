/* The runner: a typed run plan -> repetitions -> a record (runner.h). The GPU-only parts are in
 * runner_cuda.c. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "analyzers/confidence.h"
#include "analyzers/predict.h"
#include "analyzers/predict_parallel.h"
#include "analyzers/roofline.h"
#include "analyzers/stats.h"
#include "core/hugemem.h"
#include "core/limits.h"
#include "probes/ceilings.h"
#include "probes/omp_spin.h"
#include "probes/cupti_probe.h"
#include "reference_model/cpu_amx.h"
#include "reference_model/cpu_kernels.h"
#include "reference_model/cpu_dnnl.h"
#include "reference_model/weights.h"
#include "runner/runner_int.h"


/* The input width of a dense model's projection op (0 for other ops, MoE and latent attention,
 * whose projections the backend may run elsewhere): with bf16 weights a multiple of 32 runs on
 * the AMX tiles (cpu_amx.h) at 4+ tokens a step. */
static int64_t amx_bf16_k(const model_config *cfg, op_kind k) {
    if (cfg->n_experts > 0 || cfg->kv_lora_rank > 0) return 0;
    switch (k) {
    case OP_QKV: case OP_GATE_UP: case OP_LM_HEAD: return cfg->d_model;
    case OP_O_PROJ: return (int64_t)cfg->n_heads * cfg->head_dim;
    case OP_DOWN: return cfg->d_ff;
    default: return 0;
    }
}

/* Tokens one call of a projection op takes: the whole prompt in prefill (lm_head: the last
 * token of each sequence), one per sequence in decode. */
static int64_t op_step_tokens(const cost_op *op, const workload *w) {
    return op->phase == XF_PREFILL && op->kind != OP_LM_HEAD ? w->batch * w->prompt : w->batch;
}

/* Whether this CPU runs every int8 projection (packed weights) on AVX512-VNNI: the int8 kernel at
 * every token count (xk_a8_prefill) and no AMX tiles for 4+ tokens. */
static int int8_on_vnni(void) { return !xk_a8_amx() && xk_a8_prefill(xk_isa_best()); }

xf_compute runner_cpu_op_compute(const model_config *cfg, const workload *w, const cost_op *op, const device_spec *dev, int ran) {
    const int64_t tokens = op_step_tokens(op, w);
    /* bf16 prefill GEMMs that oneDNN ran on AMX tiles (cpu_dnnl.h; every one of this process's):
     * judged against the AMX BF16 peak, a CPU's tensor16 (env.gemm_bf16 says what ran); before a
     * run (ran 0), where the backend would give them to oneDNN: no own tiles, AMX granted */
    const int own_tiles = ran ? amx_bf16_calls() > 0 : amx_bf16_granted() && xk_isa_best() == XK_ISA_AVX512;
    const int dnnl_amx = ran ? cpu_dnnl_amx_state() == 1 : !own_tiles && cpu_dnnl_bf16_here() && amx_bf16_granted();
    const int proj = op->kind == OP_QKV || op->kind == OP_O_PROJ || op->kind == OP_GATE_UP || op->kind == OP_DOWN;
    if (w->wdtype == XF_BF16 && op->phase == XF_PREFILL && w->batch * w->prompt >= 32 && proj && dnnl_amx &&
        dev->peak_flops[XF_COMPUTE_TENSOR16] > 0)
        return XF_COMPUTE_TENSOR16;
    /* bf16 projections of 4+ tokens a step on the backend's own AMX tiles (cpu_amx.h: a dense
     * model's projections whose input width is a multiple of 32): the AMX BF16 peak, tensor16 */
    const int64_t amx_k = amx_bf16_k(cfg, op->kind);
    if (w->wdtype == XF_BF16 && own_tiles && amx_k > 0 && amx_k % 32 == 0 && tokens >= 4 && dev->peak_flops[XF_COMPUTE_TENSOR16] > 0)
        return XF_COMPUTE_TENSOR16;
    /* int8 projections of 4+ tokens a step ran on AMX INT8 tiles (cpu_kernels.h): that peak */
    if (w->wdtype == XF_INT8 && xk_a8_amx() && xk_isa_best() == XK_ISA_AVX512 && op_kind_is_gemm(op->kind) && tokens >= 4 &&
        dev->peak_flops[XF_COMPUTE_INT8] > 0)
        return XF_COMPUTE_INT8;
    /* without AMX, a dense model's int8 projections (packed: weights.c) ran on AVX512-VNNI at every
     * token count (xk_a8_prefill): the VNNI INT8 peak, which the machine file keeps as int8 there
     * (ceilings_to_device). A mixture of experts' and latent attention's extra matrices are not
     * packed (the 16-bit-input kernel or dequantized tiles): fp32, as before. */
    if (w->wdtype == XF_INT8 && int8_on_vnni() && op_kind_is_gemm(op->kind) &&
        cfg->n_experts == 0 && !model_is_mla(cfg) && dev->peak_flops[XF_COMPUTE_INT8] > 0)
        return XF_COMPUTE_INT8;
    return op->compute;
}

void run_plan_default(run_plan *p, const model_config *cfg) {
    memset(p, 0, sizeof *p);
    if (cfg) p->cfg = *cfg;
    p->wdtype = XF_FP32;
    p->kvdtype = XF_FP32;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    p->threads = ncpu > 0 ? (int)ncpu : 1;
    p->reps = XF_DEFAULT_REPS;
    p->warmup = XF_DEFAULT_WARMUP;
    p->seed = XF_DEFAULT_SEED;
    p->kv_policy.kind = KV_POLICY_PAGED;
    p->kv_policy.block = KV_DEFAULT_BLOCK;
    p->kv_alloc = KV_ALLOC_POOL;
    p->probes = 1;
    p->perf = 1;
    p->cupti = RUNNER_CUPTI_DEFAULT;
    p->concurrent = 1;
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

/* plan->on_step: one more repetition, untimed and without probes, each step's logits and ids. */
static xf_status replay_steps(run_ctx *c, const record_point *p, const int32_t *prompts, const int64_t *lens) {
    const workload *w = &p->wl;
    int32_t *ids = malloc((size_t)w->batch * sizeof *ids);
    if (!ids) return xf_errorf(XF_ENOMEM, "out of memory");
    model_reset(c->m);
    xf_status s = model_prefill(c->m, (int)w->batch, prompts, lens, NULL);
    for (int64_t k = 0; !s && k < w->gen; k++) {
        if (k > 0 && (s = model_decode_step(c->m, NULL, NULL))) break;
        run_step_view v;
        memset(&v, 0, sizeof v);
        v.point = c->point_index;
        v.step = k;
        v.logits = model_logits(c->m, &v.n_seqs, &v.vocab);
        for (int64_t b = 0; b < w->batch; b++) {
            int64_t n = 0;
            const int32_t *t = model_tokens(c->m, (int)b, &n);
            ids[b] = t && n > 0 ? t[n - 1] : -1;
        }
        v.tokens = ids;
        if (k == 0) {
            v.prompt = prompts;
            v.prompt_len = w->prompt;
        }
        s = c->plan->on_step(c->plan->on_step_ctx, &v);
    }
    free(ids);
    return s;
}

/* Mixture of experts: the router's choices of the last repetition into the point, and the expert
 * ops' bytes set to the distinct experts it really chose (the mean per step of the phase), through
 * the cost model. Nothing for a dense model. */
static xf_status fill_experts(run_ctx *c, record_point *p) {
    const model_config *cfg = &c->plan->cfg;
    if (cfg->n_experts <= 0) return XF_OK;
    const int64_t L = cfg->n_layers, E = cfg->n_experts;
    p->expert_tokens = calloc((size_t)(XF_PHASE_COUNT * L * E), sizeof *p->expert_tokens);
    p->expert_distinct = calloc((size_t)(XF_PHASE_COUNT * L), sizeof *p->expert_distinct);
    if (!p->expert_tokens || !p->expert_distinct) return xf_errorf(XF_ENOMEM, "out of memory for the router's statistics");
    p->n_experts = E;
    p->n_expert_layers = L;
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++) {
        const int64_t *tok, *dis;
        int64_t steps;
        if (model_expert_stats(c->m, (xf_phase)ph, &tok, &dis, &steps) != XF_OK) {
            xf_error_clear(); /* a backend without router statistics: the uniform-routing figures stay */
            continue;
        }
        memcpy(p->expert_tokens + (int64_t)ph * L * E, tok, (size_t)(L * E) * sizeof *tok);
        memcpy(p->expert_distinct + (int64_t)ph * L, dis, (size_t)L * sizeof *dis);
        p->expert_steps[ph] = steps;
        for (int64_t i = 0; steps > 0 && i < p->n_ops; i++) {
            cost_op *op = &p->ops[i].cost;
            if ((int)op->phase == ph && op->layer >= 0 && op->layer < L)
                cost_moe_set_experts(cfg, &p->wl, op, (double)dis[op->layer] / (double)steps);
        }
    }
    return XF_OK;
}

/* The CPU time of the steps, seconds: with one thread the calling thread's (CLOCK_THREAD_CPUTIME_ID),
 * not the process's: OpenBLAS's server thread (idle: all parallelism is OpenMP's) spins for about
 * 0.1 s after it starts, and on an idle second CPU that spin doubled the process's CPU time of the
 * first repetitions (measured: 4.4 ms of CPU per decode step of 2.2 ms wall time, stories15m, one
 * thread; docs/ci.md). With more threads, the process's (every thread: the OpenMP team's work and
 * waiting, and any other thread's spin); a sum over the team read in a parallel region was tried
 * and counted its own wake-up, milliseconds on a busy machine. */
static double cpu_now_s(int threads) {
    struct timespec ts;
    if (clock_gettime(threads <= 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One concurrent-ceiling pulse into cc (up to RECORD_MAX_PULSES), sized from a repetition's wall
 * time when *budget is 0. */
static xf_status concurrent_pulse(run_ctx *c, record_concurrent *cc, double rep_s, double *budget) {
    if (cc->n_pulses >= RECORD_MAX_PULSES) return XF_OK;
    if (*budget <= 0) {
        *budget = RUNNER_PULSE_SHARE * rep_s;
        if (*budget < RUNNER_PULSE_MIN_S) *budget = RUNNER_PULSE_MIN_S;
        if (*budget > RUNNER_PULSE_MAX_S) *budget = RUNNER_PULSE_MAX_S;
        xf_status s = ceilings_pulser_reserve(c->pulser, *budget); /* the DRAM array, outside the pulses' time */
        if (s) return s; /* its message names the concurrent ceilings and --no-concurrent */
    }
    /* What a pulse takes beyond its sizing (waking the threads after the model's ops, a busy
     * core) is learned: the pulser is asked for budget x scale, scale = budget / what the last
     * one took, so the pulses' wall time, not their sizing, keeps to the share. */
    if (!(c->pulse_scale > 0)) c->pulse_scale = 1.0;
    double ask = *budget * c->pulse_scale;
    if (ask < 1e-4) ask = 1e-4;
    ceilings_pulse pu;
    xf_status s = ceilings_pulser_run(c->pulser, ask, &pu);
    if (s) return s; /* the pulser's messages name the concurrent ceilings */
    if (pu.seconds > 0) {
        c->pulse_scale *= *budget / pu.seconds;
        if (c->pulse_scale > 1.0) c->pulse_scale = 1.0;
        if (c->pulse_scale < 0.1) c->pulse_scale = 0.1;
    }
    cc->pulse_bandwidth_Bps[cc->n_pulses] = pu.bandwidth_Bps;
    cc->pulse_fp32_flops[cc->n_pulses] = pu.fp32_flops;
    cc->n_pulses++;
    cc->pulse_s += pu.seconds;
    return XF_OK;
}

/* Runs one point: warm-up, reps; fills the measured ops, summary and tokens. */
static xf_status run_point(run_ctx *c, record_point *p) {
    const run_plan *pl = c->plan;
    const workload *w = &p->wl;
    const int64_t n_dec = workload_decode_steps(w);
    xf_status s;
    int64_t n_tok = w->batch * w->prompt;
    int32_t *prompts = malloc((size_t)n_tok * sizeof *prompts);
    int64_t *lens = malloc((size_t)w->batch * sizeof *lens);
    double *pre_s = calloc((size_t)pl->reps, sizeof *pre_s), *dec_s = calloc((size_t)pl->reps, sizeof *dec_s);
    double *wait0 = NULL, *share = NULL; /* (2, threads) waits before and after a repetition; (reps) its share */
    if (!prompts || !lens || !pre_s || !dec_s) {
        s = xf_errorf(XF_ENOMEM, "out of memory for %lld prompt tokens", (long long)n_tok);
        goto done;
    }
    uint64_t st = pl->seed ^ 0x5eedULL;
    for (int64_t b = 0; b < w->batch; b++) {
        lens[b] = w->prompt;
        for (int64_t i = 0; i < w->prompt; i++)
            prompts[b * w->prompt + i] = pl->prompt_ids ? pl->prompt_ids[i] : (int32_t)(splitmix64(&st) % (uint64_t)pl->cfg.vocab);
    }
    const probe_set *ps = c->ps.n ? &c->ps : NULL;
    if ((s = probe_set_point_begin(ps, p)) != XF_OK) goto done;
    c->reps_done = 0;
    record_concurrent *cc = &p->concurrent;
    /* A pulse before every `every`-th repetition and one after the last, each ~0.6% of a
     * repetition (the one before it, warm-up included; else the prediction), 0.3 to 10 ms: long enough
     * to span scheduler slices, so a core shared with another process shows in it as in the ops. */
    const int every = pl->reps <= RECORD_MAX_PULSES - 1 ? 1 : (pl->reps + RECORD_MAX_PULSES - 2) / (RECORD_MAX_PULSES - 1);
    double rep_guess_s = p->summary.ttft_s + (double)n_dec * p->summary.tpot_s, pulse_budget = 0;
    const int cpu_threads = pl->cuda ? 1 : pl->threads; /* 1: the steps' figure is this thread's CPU time (cpu_now_s) */
    const int n_wait = cpu_wait_threads(c->waits);
    if (n_wait && !(wait0 = malloc(2 * (size_t)n_wait * sizeof *wait0))) {
        s = xf_errorf(XF_ENOMEM, "out of memory for the CPU waits of %d threads", n_wait);
        goto done;
    }
    int n_share = 0, wait_ok = n_wait > 0;
    if (wait_ok && !(share = malloc((size_t)pl->reps * sizeof *share))) {
        s = xf_errorf(XF_ENOMEM, "out of memory for the CPU waits of %d repetitions", pl->reps);
        goto done;
    }
    for (int r = -pl->warmup; r < pl->reps; r++) {
        if (r < 0 && pl->stop && pl->stop()) break; /* Ctrl-C in the warm-up: nothing to finish */
        if (c->pulser && r >= 0 && r % every == 0 && (s = concurrent_pulse(c, cc, rep_guess_s, &pulse_budget)) != XF_OK) goto done;
        model_reset(c->m);
        probe_set_rep_begin(ps);
        int rep_wait = r >= 0 && wait_ok && cpu_wait_read(c->waits, wait0);
        double c0 = cpu_now_s(cpu_threads), t0 = timer_now_s();
        if ((s = model_prefill(c->m, (int)w->batch, prompts, lens, ps)) != XF_OK) goto done;
        double t1 = timer_now_s(), c1 = cpu_now_s(cpu_threads);
        for (int64_t k = 0; k < n_dec; k++) /* the prefill sampled the first of the gen tokens */
            if ((s = model_decode_step(c->m, NULL, ps)) != XF_OK) goto done;
        double t2 = timer_now_s(), c2 = cpu_now_s(cpu_threads);
        if ((s = probe_set_rep_end(ps, r)) != XF_OK) goto done; /* after the timed part; r < 0: warm-up */
        rep_guess_s = t2 - t0; /* the next pulse is sized from this repetition */
        pulse_budget = 0;
        if (r < 0) continue;
        if (rep_wait && cpu_wait_read(c->waits, wait0 + n_wait)) /* a replaced team: no figure for the point */
            share[n_share++] = cpu_wait_share(wait0, wait0 + n_wait, n_wait, t2 - t0);
        else
            wait_ok = 0;
        cc->run_s += t2 - t0;
        pre_s[r] = t1 - t0;
        dec_s[r] = n_dec > 0 ? (t2 - t1) / (double)n_dec : 0;
        if (r < RECORD_MAX_CPU_REPS && pl->reps <= RECORD_MAX_CPU_REPS) { /* the gate's steady figure (compare --ab) */
            p->cpu_prefill_s[r] = c1 - c0;
            p->cpu_decode_s[r] = n_dec > 0 ? (c2 - c1) / (double)n_dec : 0;
            p->n_cpu = r + 1;
        }
        c->reps_done = r + 1;
        if (pl->stop && pl->stop()) break; /* Ctrl-C: this repetition is complete, the rest are not run */
    }
    if (c->reps_done == 0) { /* stopped in the warm-up: nothing of this point was measured */
        s = XF_OK;
        goto done;
    }
    const int reps = c->reps_done, stopped = reps < pl->reps;
    if (c->pulser) { /* the pulse after the last repetition, then the medians and the verdict on contention */
        if ((s = concurrent_pulse(c, cc, rep_guess_s, &pulse_budget)) != XF_OK) goto done;
        cc->pulse_every = every;
        cc->machine_bandwidth_Bps = c->dev.bandwidth_Bps;
        cc->machine_fp32_flops = c->dev.peak_flops[XF_COMPUTE_FP32];
        cc->cpu_wait_measured = wait_ok && n_share == reps;
        cc->cpu_wait_share = cc->cpu_wait_measured ? stats_median(share, (size_t)n_share) : 0;
        roofline_concurrent_finish(cc, reps, pl->contended_share > 0 ? pl->contended_share : ROOFLINE_CONTENDED_SHARE);
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
    if (per > w->gen) per = w->gen; /* --gen 0: the prefill's sampled token is not one of the run's */
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
    if ((s = fill_experts(c, p)) != XF_OK) goto done; /* before the replays run the model again */
    probe_set_point_end(ps); /* CUPTI activity off before the replays and the graph timings */
    if (pl->on_step && w->gen > 0 && !stopped && (s = replay_steps(c, p, prompts, lens)) != XF_OK) goto done;
    if (pl->cuda && c->cupti_sel == RUNNER_CUPTI_COUNTERS && !c->counters_off && !stopped) runner_collect_counters(c, p, prompts, lens);
    /* Measured ops: every probe's samples (innermost first), then the class. */
    roofline_thresholds th;
    roofline_thresholds_default(&th);
    for (int64_t i = 0; ps && i < p->n_ops; i++) {
        record_op *op = &p->ops[i];
        if ((s = probe_set_fill(ps, i, n_dec, op)) != XF_OK) goto done;
        if (!op->measured) continue; /* the model did not run this op (e.g. no decode) */
        /* CPU without an open counter: the record lists every counter as unsupported */
        if (!pl->cuda && !c->perf) perf_probe_fill(NULL, op->cost.phase, op->cost.layer, op->cost.kind, op);
        if (!pl->cuda) op->cost.compute = runner_cpu_op_compute(&pl->cfg, w, &op->cost, &c->dev, 1);
        callgrind_probe_fill(c->callgrind, op); /* NULL: nothing */
        roofline_measure_op_concurrent(op, &c->dev, cc, reps, &th);
    }
    roofline_summarize_point(p);
    if ((s = confidence_point(p, &c->dev, &th, CONFIDENCE_BOOT, CONFIDENCE_SEED)) != XF_OK) goto done;
    /* TTFT and TPOT are the whole steps' wall times (ops plus the gaps between them). */
    record_summary *sm = &p->summary;
    sm->ttft_s = median_of(pre_s, reps);
    sm->tpot_s = n_dec > 0 ? median_of(dec_s, reps) : 0;
    p->run.reps = reps;
    double request = sm->ttft_s + (double)n_dec * sm->tpot_s;
    sm->tokens_per_s = request > 0 ? (double)(w->batch * w->gen) / request : 0;
    sm->prefill_tokens_per_s = sm->ttft_s > 0 ? (double)(w->batch * w->prompt) / sm->ttft_s : 0;
    sm->decode_tokens_per_s = sm->tpot_s > 0 ? (double)w->batch / sm->tpot_s : 0;
    if (!c->timer) { /* no per-op times: the phase times are the wall times */
        sm->prefill_time_s = sm->ttft_s;
        sm->decode_time_s = sm->tpot_s;
    }
    if (pl->cuda && pl->cuda_graph && n_dec > 0 && !stopped && (s = runner_graph_compare(c, p, prompts, lens)) != XF_OK) goto done;
    s = XF_OK;
done:
    free(prompts);
    free(lens);
    free(pre_s);
    free(dec_s);
    free(wait0);
    free(share);
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

/* The entries both backends write: the bandwidth ceiling, the timer's overhead, the counters, the
 * peak resident memory. */
static void set_env_common(record *rec, const run_ctx *c, const char *ceil_note, const char *perf, double rss) {
    char buf[64];
    record_set_env(rec, "bandwidth_ceiling", ceil_note);
    record_set_env(rec, "concurrent_ceilings", c->notes->concurrent);
    if (c->timer) {
        snprintf(buf, sizeof buf, "%.1f ns per range, subtracted", timer_probe_overhead_s(c->timer) * 1e9);
        record_set_env(rec, "timer_overhead", buf);
    } else
        record_set_env(rec, "timer_overhead", "probes off (--no-probes): whole-step times only");
    record_set_env(rec, "perf_counters", perf);
    if (c->plan->callgrind) /* compare --metric instructions reads it: counts of one kind only */
        record_set_env(rec, "instructions_source", c->plan->callgrind == 2 ? "callgrind, cache simulation on (times measured under valgrind: not comparable)"
                                                                           : "callgrind (times measured under valgrind: not comparable)");
    snprintf(buf, sizeof buf, "%.0f", rss);
    record_set_env(rec, "peak_rss_bytes", buf);
}

static void set_env(record *rec, const run_ctx *c) {
    const char *ceil_note = c->notes->ceilings;
    double rss = c->notes->peak_rss_bytes;
    int threads = c->plan->threads;
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
    if (c->plan->cuda) { /* the host's SIMD, BLAS and OpenMP do not compute this run's ops */
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
        record_set_env(rec, "cupti", c->notes->cupti);
        if (c->notes->counters[0]) record_set_env(rec, "cupti_counters", c->notes->counters);
        set_env_common(rec, c, ceil_note, "not opened on --device cuda (host counters do not see the GPU's work)", rss);
        return;
    }
    record_set_env(rec, "simd", ceilings_isa());
    snprintf(buf, sizeof buf, "%s: int8 one-token decode read as %d stream%s a thread; weight prefetch into %s", xk_tune_name(),
             xk_a8_streams(), xk_a8_streams() == 1 ? "" : "s", xk_prefetch_to_l1 ? "L1" : "L2");
    record_set_env(rec, "cpu_kernel_choices", buf);
    for (int i = 0; i < rec->n_points; i++)
        if (rec->points[i].wl.wdtype == XF_INT8) {
            /* docs/record.md says it in full; env values hold 223 characters */
            snprintf(buf, sizeof buf, "int8 inputs per token, group %d: fp32 step max|x|/127, ties to even; weights fp32 scales, "
                     "packed u8 = int8 + 128; u8 x s8 int32 minus 128 * sum(q): %s; prefill %s",
                     rec->points[i].wl.quant_group > 0 ? rec->points[i].wl.quant_group : XF_DEFAULT_QUANT_GROUP,
                     xk_a8_name(xk_isa_best()), xk_a8_amx() ? "on the tiles" : xk_a8_prefill(xk_isa_best()) ? "the same kernel" : "the same grid in fp32");
            record_set_env(rec, "int8_inputs", buf);
            break;
        }
    for (int i = 0; i < rec->n_points; i++)
        if (rec->points[i].wl.wdtype == XF_BF16) {
            const int amx = cpu_dnnl_amx_state();
            if (amx_bf16_calls() > 0)
                snprintf(buf, sizeof buf, "steps of 4+ tokens (batched decode, prefill): own AMX tiles, tdpbf16ps (ops: compute tensor16), "
                         "weights in place; %s; fewer tokens: own vector kernels",
                         c->plan->bf16_inputs == BACKEND_BF16_ROUNDED ? "1 tile product of the rounded input"
                                                                      : "3 tile products of the exact 3-part input into one C (3x the op's FLOPs)");
            else if (!cpu_dnnl_bf16_here()) /* not built, or no bf16 matmul on this CPU: describe says which */
                snprintf(buf, sizeof buf, "prefill (>= 32 tokens): fp32 OpenBLAS on dequantized tiles; %s", cpu_dnnl_describe());
            else if (!cpu_dnnl_last_impl()[0]) snprintf(buf, sizeof buf, "no prefill of 32 tokens or more ran: decode only (own kernels)");
            else
                snprintf(buf, sizeof buf, "prefill: %.60s, last %.40s, %s; %s",
                         cpu_dnnl_describe(), cpu_dnnl_last_impl(), amx == 1 ? "all on AMX (ops: compute tensor16)" : amx < 0 ? "some not on AMX (ops: fp32)" : "not on AMX (ops: fp32)",
                         c->plan->bf16_inputs == BACKEND_BF16_ROUNDED ? "1 bf16 GEMM of the rounded input"
                                                                      : "3 bf16 GEMMs of the exact 3-part input (3x the op's FLOPs)");
            record_set_env(rec, "gemm_bf16", buf);
            record_set_env(rec, "bf16_inputs", c->plan->bf16_inputs == BACKEND_BF16_ROUNDED
                                                   ? "rounded: each projection's fp32 input rounded once to bf16 (nearest even), "
                                                     "products exact in fp32, sums in fp32; prefill one oneDNN pass where built (env gemm_bf16)"
                                                   : "exact3: the fp32 input exactly (on AMX its 3-part bf16 split, 3 passes)");
            break;
        }
    ceilings_blas_describe(buf, sizeof buf);
    record_set_env(rec, "blas", buf);
    omp_spin_describe(buf, sizeof buf);
    record_set_env(rec, "omp_wait_policy", buf);
    const model_weights *mw = model_get_weights(c->m);
    int64_t huge_got, huge_asked;
    if (mw && weights_huge_pages(mw, &huge_got, &huge_asked) == XF_OK) { /* core/hugemem.h: as the read ceiling's arrays */
        hugemem_describe(buf, sizeof buf, huge_got, huge_asked);
        record_set_env(rec, "huge_pages", buf);
    } else
        xf_error_clear();
    set_env_common(rec, c, ceil_note, c->notes->perf, rss);
}

/* Plan checks the parsers already made; the runner repeats them so a plan built in code (a sweep,
 * a test) gets the same answers. Bounds from core/limits.h. */
static xf_status check_plan(const run_plan *p, int64_t *max_b, int64_t *max_p, int64_t *max_len) {
    if (p->n_batch < 1 || p->n_prompt < 1 || p->n_gen < 1 || !p->batch || !p->prompt || !p->gen)
        return xf_errorf(XF_EINVAL, "run plan: an empty batch, prompt or gen list");
    if (p->reps < 1 || p->reps > XF_REPS_MAX || p->warmup < 0 || p->warmup > XF_WARMUP_MAX)
        return xf_errorf(XF_EINVAL, "--reps %d / --warmup %d out of range: use 1..%d and 0..%d", p->reps, p->warmup, XF_REPS_MAX,
                         XF_WARMUP_MAX);
    if (p->threads < 1 || p->threads > XF_THREADS_MAX)
        return xf_errorf(XF_EINVAL, "--threads %d out of range: use 1..%d", p->threads, XF_THREADS_MAX);
    *max_b = *max_p = *max_len = 0;
    for (int i = 0; i < p->n_batch; i++) {
        if (p->batch[i] < 1 || p->batch[i] > XF_BATCH_MAX)
            return xf_errorf(XF_EINVAL, "--batch %lld out of range: use 1..%d", (long long)p->batch[i], XF_BATCH_MAX);
        if (p->batch[i] > *max_b) *max_b = p->batch[i];
    }
    for (int i = 0; i < p->n_prompt; i++) {
        if (p->prompt[i] < 1 || p->prompt[i] > XF_TOKENS_MAX)
            return xf_errorf(XF_EINVAL, "--prompt %lld out of range: use 1..%d", (long long)p->prompt[i], XF_TOKENS_MAX);
        if (p->prompt_ids && p->prompt[i] != p->n_prompt_ids)
            return xf_errorf(XF_EINVAL, "run plan: prompt %lld but %lld prompt ids", (long long)p->prompt[i], (long long)p->n_prompt_ids);
        if (p->prompt[i] > *max_p) *max_p = p->prompt[i];
    }
    for (int j = 0; j < p->n_gen; j++)
        if (p->gen[j] < 0 || p->gen[j] > XF_TOKENS_MAX)
            return xf_errorf(XF_EINVAL, "--gen %lld out of range: use 0..%d", (long long)p->gen[j], XF_TOKENS_MAX);
    for (int i = 0; i < p->n_prompt; i++)
        for (int j = 0; j < p->n_gen; j++)
            if (p->prompt[i] + p->gen[j] > *max_len) *max_len = p->prompt[i] + p->gen[j];
    if (*max_len > p->cfg.max_ctx)
        return xf_errorf(XF_EINVAL, "prompt + gen = %lld tokens exceeds %s's context of %lld", (long long)*max_len, p->cfg.name,
                         (long long)p->cfg.max_ctx);
    return XF_OK;
}

/* The CPU's bandwidth ceiling: in-cache when the weights fit in the last-level cache (a roofline
 * decision: such a model never streams its weights from DRAM), else DRAM read. */
static int weights_in_cache(const device_spec *machine, double weights_bytes) {
    return machine->cache_bytes > 0 && machine->cache_bandwidth_Bps > 0 && weights_bytes <= machine->cache_bytes;
}

static void choose_bandwidth(const device_spec *machine, double weights_bytes, device_spec *dev, char *note, size_t len) {
    *dev = *machine;
    if (weights_in_cache(machine, weights_bytes)) {
        dev->bandwidth_Bps = machine->cache_bandwidth_Bps;
        size_t l = strlen(dev->source);
        snprintf(dev->source + l, sizeof dev->source - l, "; bandwidth_Bps = in-cache read (weights fit in the LLC)");
        snprintf(note, len, "in-cache %.2f GB/s: the weights (%.1f MiB) fit in the %.1f MiB last-level cache (DRAM read %.2f GB/s)",
                 machine->cache_bandwidth_Bps / 1e9, weights_bytes / 1048576.0, machine->cache_bytes / 1048576.0,
                 machine->bandwidth_Bps / 1e9);
    } else {
        snprintf(note, len, "DRAM read %.2f GB/s (weights %.1f MiB, last-level cache %.1f MiB)", machine->bandwidth_Bps / 1e9,
                 weights_bytes / 1048576.0, machine->cache_bytes / 1048576.0);
    }
}

/* The probes, outermost first: CUPTI (cuda), perf_event (CPU), the timer (innermost). The perf
 * counters must exist before the OpenMP pool: call before model_init. */
static xf_status open_probes(run_ctx *c) {
    const run_plan *pl = c->plan;
    run_notes *n = c->notes;
    xf_status s;
    snprintf(n->perf, sizeof n->perf, "%s", "not opened (--no-perf or --no-probes)");
    if (pl->cuda) {
        int asked = pl->cupti != RUNNER_CUPTI_DEFAULT;
        c->cupti_sel = asked ? pl->cupti : RUNNER_CUPTI_ACTIVITY;
        probe cp;
        if (!pl->probes) {
            if (asked && pl->cupti != RUNNER_CUPTI_OFF)
                return xf_errorf(XF_EINVAL, "--cupti %s needs the probes: drop --no-probes",
                                 pl->cupti == RUNNER_CUPTI_COUNTERS ? "counters" : "activity");
            c->cupti_sel = RUNNER_CUPTI_OFF;
            snprintf(n->cupti, sizeof n->cupti, "off (--no-probes)");
        } else if (c->cupti_sel == RUNNER_CUPTI_OFF) {
            snprintf(n->cupti, sizeof n->cupti, "off (--cupti off): op times from the host clock only");
        } else if ((s = runner_cupti_probe(pl->ordinal, pl->cfg.n_layers, pl->reps, &cp, &c->cupti)) != XF_OK) {
            if (asked) return s;
            fprintf(stderr, "xfprof run: note: CUPTI off (%s); op times from the host clock only\n", xf_error_msg());
            snprintf(n->cupti, sizeof n->cupti, "off: CUPTI could not be opened (%.180s)", xf_error_msg());
            xf_error_clear();
            c->cupti_sel = RUNNER_CUPTI_OFF;
        }
        if (pl->probes) /* outermost: CUPTI's external ids and NVTX ranges (or NVTX alone, for Nsight Systems) */
            c->ps.items[c->ps.n++] = c->cupti ? cp : cupti_nvtx_probe();
        snprintf(n->perf, sizeof n->perf, "not opened on --device cuda");
    }
    if (!pl->probes) return XF_OK;
    if (pl->perf && !pl->cuda) {
        if ((s = perf_probe_init(pl->cfg.n_layers, pl->reps, 0, &c->perf))) return s;
        perf_note(c->perf, n->perf, sizeof n->perf);
        if (perf_probe_n_supported(c->perf) == 0) {
            perf_probe_free(c->perf);
            c->perf = NULL;
        } else
            c->ps.items[c->ps.n++] = perf_probe_as_probe(c->perf);
    }
    if ((s = timer_probe_init(pl->cfg.n_layers, pl->reps, 0, &c->timer))) return s;
    c->ps.items[c->ps.n++] = timer_probe_as_probe(c->timer); /* last: innermost */
    if (pl->callgrind) { /* inside the timer: its clock reads are not counted */
        if ((s = callgrind_probe_init(pl->cfg.n_layers, pl->reps, pl->callgrind_out, pl->callgrind == 2, &pl->callgrind_extra,
                                      &c->callgrind)))
            return s;
        c->ps.items[c->ps.n++] = callgrind_probe_as_probe(c->callgrind);
    }
    n->probes = 1;
    n->perf_open = c->perf != NULL;
    n->timer_overhead_s = timer_probe_overhead_s(c->timer);
    return XF_OK;
}

/* Stopped by plan->stop (Ctrl-C): the record says it is partial, and what it holds. `sig` is the
 * stop answer (a signal number), `planned` the points asked. */
static void mark_partial(record *rec, const run_ctx *c, int sig, int planned) {
    char name[24];
    if (sig == SIGINT) snprintf(name, sizeof name, "SIGINT");
    else if (sig == SIGTERM) snprintf(name, sizeof name, "SIGTERM");
    else snprintf(name, sizeof name, "signal %d", sig);
    int i = c->point_index + 1, after = planned - i, reps = c->plan->reps;
    rec->partial = 1;
    if (c->reps_done > 0 && c->reps_done < reps)
        snprintf(rec->partial_reason, sizeof rec->partial_reason,
                 "interrupted by %s during point %d of %d: it is kept with %d of %d repetitions (its run.reps); %d point(s) "
                 "before it complete, %d not run",
                 name, i, planned, c->reps_done, reps, i - 1, after);
    else if (c->reps_done == 0)
        snprintf(rec->partial_reason, sizeof rec->partial_reason,
                 "interrupted by %s in the warm-up of point %d of %d, which is left out: %d point(s) complete, %d not run", name, i,
                 planned, i - 1, after);
    else
        snprintf(rec->partial_reason, sizeof rec->partial_reason, "interrupted by %s after point %d of %d: %d point(s) not run",
                 name, rec->n_points, planned, planned - rec->n_points);
}

xf_status runner_run(const run_plan *pl, record *rec, run_notes *notes_out) {
    run_notes local;
    run_notes *notes = notes_out ? notes_out : &local;
    memset(notes, 0, sizeof *notes);
    int64_t max_b = 0, max_p = 0, max_len = 0;
    xf_status s = check_plan(pl, &max_b, &max_p, &max_len);
    if (s) return s;
    notes->points_planned = pl->n_batch * pl->n_prompt * pl->n_gen;
    const model_config *cfg = &pl->cfg;
    run_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.plan = pl;
    ctx.notes = notes;
    ctx.rec = rec;
    if (pl->cuda && (s = cuda_device_open(pl->ordinal, &ctx.gpu))) return s;
    if (pl->cuda)
        snprintf(notes->gpu, sizeof notes->gpu, "cuda:%d %.120s", ctx.gpu.ordinal, ctx.gpu.name);

    model_options mo;
    model_options_default(&mo);
    mo.seed = pl->seed;
    mo.wdtype = pl->wdtype;
    mo.quant_group = pl->quant_group;
    mo.bf16_inputs = pl->bf16_inputs;
    mo.kvdtype = pl->kvdtype;
    mo.threads = pl->threads;
    mo.kv_policy = pl->kv_policy;
    mo.kv_alloc = pl->kv_alloc;
    mo.backend = pl->cuda ? "cuda" : "cpu";
    mo.device_index = pl->ordinal;
    mo.sync_each_op = pl->cuda; /* host-clock per-op times need the asynchronous GPU to finish each op */
    mo.weights_dir = pl->weights_dir;
    mo.max_seqs = max_b;
    mo.max_prompt = max_p;
    mo.max_seq_len = max_len;
    const model_config *mcfg = cfg; /* what this process runs: the model, or its shard of a split over ranks */
    if (pl->tp > 1) {
        mcfg = pl->shard_cfg;
        mo.weights = pl->shard_weights;
        mo.allreduce = pl->allreduce;
        mo.allreduce_ctx = pl->allreduce_ctx;
    }
    /* Memory first: refuse before measuring or allocating anything. */
    xf_dtype dev_wd = XF_BF16;
    if (pl->cuda && getenv("XFPROF_CUDA_WEIGHTS") && !strcmp(getenv("XFPROF_CUDA_WEIGHTS"), "fp16")) dev_wd = XF_FP16;
    model_mem mm;
    if ((s = model_mem_gate(mcfg, &mo, dev_wd, pl->cuda ? (double)ctx.gpu.total_mem_bytes : 0, &mm))) return s;

    /* Ceilings and the bandwidth choice. */
    char mpath[4096];
    int from_file = 0;
    device_spec machine;
    if (pl->cuda) {
        if ((s = runner_gpu_ceilings(pl->ordinal, &machine, &from_file, mpath, sizeof mpath))) return s;
        ctx.dev = machine;
        snprintf(notes->ceilings, sizeof notes->ceilings, "HBM %.2f GB/s (%s; weights %.1f MiB at %s, L2 %.1f MiB)",
                 machine.bandwidth_Bps / 1e9, from_file ? "measured" : machine.name, mm.weights_bytes / 1048576.0,
                 dtype_name(dev_wd), machine.cache_bytes / 1048576.0);
        if (!pl->quiet)
            fprintf(stderr, "xfprof run: cuda:%d %s; ceilings from %s; bandwidth ceiling: %s\n", pl->ordinal, ctx.gpu.name, mpath,
                notes->ceilings);
    } else {
        if ((s = load_ceilings(pl->threads, &machine, &from_file, mpath, sizeof mpath))) return s;
        choose_bandwidth(&machine, (double)mm.weights_bytes, &ctx.dev, notes->ceilings, sizeof notes->ceilings);
        if (!pl->quiet)
            fprintf(stderr, "xfprof run: ceilings %s; bandwidth ceiling: %s\n", from_file ? mpath : "measured now (quick)",
                notes->ceilings);
    }
    if (!pl->concurrent)
        snprintf(notes->concurrent, sizeof notes->concurrent, "off (--no-concurrent): classes against the machine file's ceilings");
    else if (pl->cuda)
        snprintf(notes->concurrent, sizeof notes->concurrent,
                 "off on --device cuda (the pulses are CPU kernels): classes against the GPU's ceilings");
    else {
        /* the pulse reads where the weights stream from: choose_bandwidth's decision */
        int in_cache = weights_in_cache(&machine, (double)mm.weights_bytes);
        if ((s = ceilings_pulser_init(pl->threads, in_cache, ctx.dev.bandwidth_Bps, ctx.dev.peak_flops[XF_COMPUTE_FP32], RUNNER_PULSE_MAX_S,
                                      &ctx.pulser)))
            return s;
        snprintf(notes->concurrent, sizeof notes->concurrent,
                 "on: %s read and FP32 FMA pulses before, between and after the repetitions; classes against them "
                 "(contended when more than %.0f%% below the machine file)",
                 in_cache ? "in-cache" : "DRAM", 100 * (pl->contended_share > 0 ? pl->contended_share : ROOFLINE_CONTENDED_SHARE));
    }
    /* Probes, then the model (the perf counters must exist before the OpenMP pool). */
    if ((s = open_probes(&ctx)) || (s = model_init(&ctx.m, mcfg, &mo))) goto out;
    /* after the probes (perf counters before the OpenMP pool): its team is the model's */
    if (ctx.pulser && (s = cpu_wait_open(pl->threads, &ctx.waits))) goto out;

    rec->model = *cfg;
    rec->model_params = config_param_count(cfg);
    rec->model_active_params = config_active_param_count(cfg);
    rec->device = ctx.dev;
    rec->ceilings_measured = pl->cuda ? from_file : 1; /* CPU: the machine file or a quick measurement */
    if (!pl->cuda && from_file && pl->wdtype == XF_INT8 && int8_on_vnni() &&
        !(ctx.dev.peak_flops[XF_COMPUTE_INT8] > 0) && !pl->quiet)
        fprintf(stderr, "xfprof run: note: the int8 projections run on AVX512-VNNI here, but the machine file %s has no INT8 peak "
                "(written before 2026-12-08): they are judged against the FP32 peak, which they can pass; run 'xfprof machine' "
                "again to measure it\n", mpath);
    /* The predictor (issue 17): the machine file's calibration when it has one, else the roofline bound. */
    if (!pl->cuda && from_file) {
        int present = 0;
        if ((s = calib_table_load_machine(mpath, &ctx.cal, &present))) goto out;
        if (present && ctx.cal.threads != pl->threads && !pl->quiet)
            fprintf(stderr, "xfprof run: note: the calibration was measured with %d threads, this run uses %d; run 'xfprof machine "
                    "--calibrate --threads %d' for a matching one\n", ctx.cal.threads, pl->threads, pl->threads);
        if (present && ctx.cal.n > 0) { /* the OpenMP spin in force against the calibration's (its fork costs) */
            char spin[64], by[16], msg[320];
            omp_spin_in_force(spin, sizeof spin, by, sizeof by, 0);
            int sc = calib_spin_check(&ctx.cal, spin, by, msg, sizeof msg);
            if (sc && !pl->quiet) fprintf(stderr, "xfprof run: %s: %s\n", sc > 0 ? "warning" : "note", msg);
            record_set_env(rec, "calibration_omp_spin", msg);
        }
    }
    snprintf(rec->prediction, sizeof rec->prediction, "%s", ctx.cal.n > 0 ? "calibrated" : "roofline bound");
    if (ctx.cal.n > 0)
        snprintf(rec->prediction_note, sizeof rec->prediction_note, "calibration of %.32s (%.16s grid, %d threads) in %.100s",
                 ctx.cal.created, ctx.cal.grid, ctx.cal.threads, mpath);
    else
        snprintf(rec->prediction_note, sizeof rec->prediction_note, "%s",
                 pl->cuda ? "no GPU calibration exists yet: predicted = the roofline bound max(F/P, Q/B)"
                          : "the machine file has no calibration ('xfprof machine --calibrate' measures one): predicted = the "
                            "roofline bound max(F/P, Q/B)");
    char policy[32];
    kv_policy_name(&pl->kv_policy, policy, sizeof policy);
    for (int ib = 0; ib < pl->n_batch; ib++)
        for (int ip = 0; ip < pl->n_prompt; ip++)
            for (int ig = 0; ig < pl->n_gen; ig++) {
                if (pl->stop && (notes->stopped_by = pl->stop())) goto stopped;
                workload w;
                memset(&w, 0, sizeof w);
                w.batch = pl->batch[ib];
                w.prompt = pl->prompt[ip];
                w.gen = pl->gen[ig];
                w.wdtype = pl->cuda ? dev_wd : pl->wdtype;
                w.adtype = pl->cuda ? dev_wd : XF_FP32; /* CPU: fp32; CUDA: 16-bit GEMM inputs on tensor cores */
                w.kvdtype = pl->kvdtype;
                w.quant_group = pl->quant_group;
                record_point *p = record_add_point(rec);
                if (!p) {
                    s = xf_errorf(XF_ENOMEM, "out of memory");
                    goto out;
                }
                const parallel_plan tp_plan = {pl->tp, 1, 1, 0, 1}; /* the split run: vocabulary whole on every rank */
                if ((s = pl->tp > 1 ? predict_parallel_point(cfg, &w, &tp_plan, &ctx.dev, p) : predict_point(cfg, &w, &ctx.dev, p)) ||
                    (s = add_kv_alloc_ops(p, workload_decode_steps(&w) > 0)))
                    goto out;
                if (pl->tp > 1) predict_parallel_merge_allreduces(p); /* the probes key ops by (phase, layer, op) */
                p->run.threads = pl->threads;
                p->run.reps = pl->reps;
                p->run.warmup = pl->warmup;
                p->run.seed = pl->seed;
                snprintf(p->run.backend, sizeof p->run.backend, "%s", model_backend_name(ctx.m));
                snprintf(p->run.kv_policy, sizeof p->run.kv_policy, "%s", policy);
                snprintf(p->run.kv_alloc, sizeof p->run.kv_alloc, "%s", pl->kv_alloc == KV_ALLOC_SYSTEM ? "system" : "pool");
                p->run.timer_overhead_s = timer_probe_overhead_s(ctx.timer);
                if (!pl->quiet)
                    fprintf(stderr, "xfprof run: %s batch %lld prompt %lld gen %lld, %s weights, %d threads, %d+%d reps...\n",
                        cfg->name, (long long)w.batch, (long long)w.prompt, (long long)w.gen, dtype_name(pl->wdtype), pl->threads,
                        pl->warmup, pl->reps);
                ctx.point_index = rec->n_points - 1;
                if ((s = run_point(&ctx, p))) goto out;
                if (ctx.reps_done < pl->reps) { /* stopped (Ctrl-C) inside this point */
                    notes->stopped_by = pl->stop ? pl->stop() : 0;
                    mark_partial(rec, &ctx, notes->stopped_by, notes->points_planned);
                    if (ctx.reps_done == 0) record_pop_point(rec);
                    else p->memory.capacity_bytes = machine.memory_bytes;
                    goto stopped;
                }
                if (ctx.cal.n > 0) { /* the tier from the cost model's weight bytes, before the held bytes replace them */
                    predcal_stats st;
                    predcal_apply_point(&ctx.cal, p, &rec->model, 0, &st);
                    ctx.cal_counts.ops += st.ops;
                    ctx.cal_counts.calibrated += st.calibrated;
                    ctx.cal_counts.clamped += st.clamped;
                    ctx.cal_counts.other_tier += st.other_tier;
                } else {
                    predcal_step_times(p);
                }
                if (rec->n_points == 1) rec->kv_bytes_per_token = p->memory.kv_bytes_per_token;
                p->memory.capacity_bytes = machine.memory_bytes;
                /* the weight bytes this run holds (weights.c: int8 scales and norms in fp32), not the
                 * cost model's convention (fp16 scales, norms at the weight dtype) */
                p->memory.total_bytes += (double)mm.weights_bytes - p->memory.weights_bytes;
                p->memory.weights_bytes = (double)mm.weights_bytes;
                weights_kinds wk;
                if (rec->n_points == 1 && weights_bytes_kinds(cfg, pl->cuda ? dev_wd : pl->wdtype, pl->quant_group, &wk) == XF_OK) {
                    char kb[256];
                    snprintf(kb, sizeof kb, "layer matrices %lld B and embeddings %lld B at %s; int8 scales %lld B (fp32); "
                             "norms and biases %lld B (fp32)", (long long)wk.layer_matrices, (long long)wk.embeddings,
                             dtype_name(pl->cuda ? dev_wd : pl->wdtype), (long long)wk.scales, (long long)wk.norms_biases);
                    record_set_env(rec, "weights_held", kb);
                }
                if (rec->n_points == 1 && mm.kv_win_bytes > 0) { /* the reference's own KV: windowed layers in a pool of their own */
                    char kb[256];
                    snprintf(kb, sizeof kb, "%lld B: sliding-window layers %lld B (blocks out of the window released after each "
                             "step), full layers %lld B", (long long)mm.kv_bytes, (long long)mm.kv_win_bytes,
                             (long long)(mm.kv_bytes - mm.kv_win_bytes));
                    record_set_env(rec, "kv_pool", kb);
                }
            }
stopped:
    if (ctx.cal.n > 0) {
        size_t l = strlen(rec->prediction_note);
        snprintf(rec->prediction_note + l, sizeof rec->prediction_note - l, "; %lld of %lld ops calibrated, %lld clamped to the "
                 "table's range, %lld from the other memory tier", (long long)ctx.cal_counts.calibrated, (long long)ctx.cal_counts.ops,
                 (long long)ctx.cal_counts.clamped, (long long)ctx.cal_counts.other_tier);
    }
    if (notes->stopped_by && !rec->partial) mark_partial(rec, &ctx, notes->stopped_by, notes->points_planned);
    if (ctx.timer && timer_probe_dropped(ctx.timer) > 0)
        fprintf(stderr, "xfprof run: warning: %lld probe ranges were unbalanced or out of range and dropped\n",
                (long long)timer_probe_dropped(ctx.timer));
    if (ctx.cupti) runner_cupti_note(ctx.cupti, notes->cupti, sizeof notes->cupti);
    notes->peak_rss_bytes = peak_rss_bytes();
    set_env(rec, &ctx);
    record_stamp_time(rec);
out:
    calib_table_free(&ctx.cal);
    model_free(ctx.m);
    probe_set_free(&ctx.ps);
    ceilings_pulser_free(ctx.pulser);
    cpu_wait_free(ctx.waits);
    return s;
}

void runner_print_concurrent(FILE *f, const record_point *p, int i) {
    const record_concurrent *cc = &p->concurrent;
    if (cc->n_pulses < 2) return;
    double fb = cc->machine_bandwidth_Bps > 0 ? 1 - cc->bandwidth_Bps / cc->machine_bandwidth_Bps : 0;
    double ff = cc->machine_fp32_flops > 0 ? 1 - cc->fp32_flops / cc->machine_fp32_flops : 0;
    fprintf(f,
            "point %d: %s: concurrent read ceiling %.2f GB/s (%+.0f%% vs the machine file's %.2f), FP32 %.1f GFLOP/s (%+.0f%% vs "
            "%.1f)",
            i, cc->contended ? "MACHINE CONTENDED" : "not contended", cc->bandwidth_Bps / 1e9, -100 * fb,
            cc->machine_bandwidth_Bps / 1e9, cc->fp32_flops / 1e9, -100 * ff, cc->machine_fp32_flops / 1e9);
    if (cc->cpu_wait_measured)
        fprintf(f, ", the model's threads waited for a CPU %.0f%% of the time%s", 100 * cc->cpu_wait_share,
                roofline_cpu_contended(cc) ? " (another process shares their cores: op times include the waits)" : "");
    fprintf(f, "%s; pulses %.2f%% of the run\n", cc->contended ? "; the classes use the concurrent ceilings" : "",
            cc->run_s > 0 ? 100 * cc->pulse_s / cc->run_s : 0);
}

void runner_print_notes(FILE *f, const record *rec, const run_notes *c) {
    fprintf(f, "\nceilings: %s\n", rec->device.source);
    fprintf(f, "bandwidth ceiling: %s\n", c->ceilings);
    if (rec->prediction[0]) fprintf(f, "predicted: %s (%s)\n", rec->prediction, rec->prediction_note);
    for (int i = 0; i < rec->n_env; i++) /* the calibration's OpenMP spin against this run's */
        if (!strcmp(rec->env[i].key, "calibration_omp_spin")) fprintf(f, "calibration's OpenMP spin: %s\n", rec->env[i].value);
    if (c->probes) fprintf(f, "timer overhead: %.1f ns per range (measured, subtracted)\n", c->timer_overhead_s * 1e9);
    else fprintf(f, "probes off: per-op times not measured; TTFT and TPOT are whole-step wall times\n");
    if (c->gpu[0]) {
        fprintf(f, "GPU: %s; op times: host clock with a device sync after every op\n", c->gpu);
        fprintf(f, "CUPTI: %s\n", c->cupti);
        if (c->counters[0]) fprintf(f, "CUPTI counters: %s\n", c->counters);
        fputs(c->graph, f);
    } else if (!c->perf_open) fprintf(f, "hardware counters: none opened (the record says \"unsupported\"): %s\n", c->perf);
    for (int i = 0; i < rec->n_points; i++) {
        const record_point *p = &rec->points[i];
        const record_summary *s = &p->summary;
        fprintf(f,
                "point %d (batch %lld, prompt %lld, gen %lld): TTFT %.3f ms, TPOT %.3f ms, %.1f tokens/s (decode %.1f, "
                "prefill %.1f), memory-bound share %.0f%%\n",
                i, (long long)p->wl.batch, (long long)p->wl.prompt, (long long)p->wl.gen, s->ttft_s * 1e3, s->tpot_s * 1e3,
                s->tokens_per_s, s->decode_tokens_per_s, s->prefill_tokens_per_s, 100 * s->share_bound[XF_BOUND_MEMORY]);
        runner_print_concurrent(f, p, i);
    }
    fprintf(f, "peak memory (resident): %.1f MiB\n", c->peak_rss_bytes / 1048576.0);
}

