#include "calibrate.h"

#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analyzers/predict_calibrated.h"
#include "core/record.h"
#include "probes/ceilings.h"
#include "probes/omp_spin.h"
#include "probes/omp_fork.h"
#include "reference_model/config.h"
#include "reference_model/cpu_dnnl.h"
#include "reference_model/weights.h"
#include "runner.h"
#include "probes/timer.h"

/* The grid's shapes: none is a preset's (d_model, d_ff, heads, KV heads, head_dim), and none of their
 * GEMMs' (N, K) is stories110m's or tinyllama-1.1b's (bench/bench_predict.sh and
 * tests/cli_calibrate.sh check it): the calibration's GEMM keys are M, N and K. */
typedef struct calib_shape {
    const char *name;
    int64_t d_model, d_ff, n_heads, n_kv_heads, head_dim, vocab;
} calib_shape;

static const calib_shape SHAPES[] = {
    {"calib-512", 512, 1408, 8, 8, 64, 24000},     /* MHA */
    {"calib-1280", 1280, 3456, 20, 5, 64, 12000},  /* 4 query heads per KV head */
    {"calib-2560", 2560, 6912, 32, 2, 80, 2000},   /* 16 query heads per KV head; a small vocabulary so one fp32 layer fits the cache */
};
#define N_SHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

static double nominal_bytes(xf_dtype d) { return d == XF_INT8 ? 1.0 : d == XF_BF16 ? 2.0 : 4.0; }

static xf_status shape_config(const calib_shape *sh, int64_t layers, model_config *cfg) {
    xf_status s = config_preset("stories15m", cfg);
    if (s) return s;
    snprintf(cfg->name, sizeof cfg->name, "%s-%lldL", sh->name, (long long)layers);
    cfg->n_layers = layers;
    cfg->d_model = sh->d_model;
    cfg->d_ff = sh->d_ff;
    cfg->n_heads = sh->n_heads;
    cfg->n_kv_heads = sh->n_kv_heads;
    cfg->head_dim = sh->head_dim;
    cfg->vocab = sh->vocab;
    cfg->max_ctx = 512;
    cfg->tied_embeddings = 0;
    return config_validate(cfg);
}

/* Weights of `layers` layers of sh at dtype d, and of the embeddings (nominal bytes). */
static double layer_bytes(const calib_shape *sh, xf_dtype d) {
    double kv = (double)sh->n_kv_heads * sh->head_dim, q = (double)sh->n_heads * sh->head_dim;
    double p = sh->d_model * (q + 2 * kv) + q * sh->d_model + 3.0 * sh->d_model * sh->d_ff;
    return p * nominal_bytes(d);
}
static double embed_bytes(const calib_shape *sh, xf_dtype d) { return 2.0 * sh->vocab * sh->d_model * nominal_bytes(d); }

/* The shape with the vocabulary its cache-sized models get: its own, or where the embeddings would
 * take more than a quarter of the last-level cache the most that keeps them within it (a multiple
 * of 64, at least 256). On a 32 MiB L3 calib-512's 24000-token fp32 embeddings alone are 98 MB, and
 * without this no model of the quick grid fitted (a 480 MiB LLC keeps every shape's own). */
static calib_shape cache_vocab(const calib_shape *sh, xf_dtype d, double llc) {
    calib_shape f = *sh;
    if (llc > 0 && embed_bytes(sh, d) > 0.25 * llc) {
        int64_t v = (int64_t)floor(0.25 * llc / (2.0 * sh->d_model * nominal_bytes(d)) / 64.0) * 64;
        f.vocab = v < 256 ? 256 : v;
    }
    return f;
}

/* reps: measured repetitions (the quick grid: 1); each op's entry is then the median over its layers too */
static xf_status run_one(const calibrate_opts *o, const model_config *cfg, xf_dtype wd, const int64_t *prompts, int n_prompts,
                         int64_t gen, unsigned families, int reps, calib_table *t, calib_table *alt, double *stage_s,
                         double *setup_s) {
    run_plan pl;
    run_plan_default(&pl, cfg);
    static const int64_t batch1 = 1;
    pl.batch = &batch1;
    pl.n_batch = 1;
    pl.prompt = prompts;
    pl.n_prompt = n_prompts;
    pl.gen = &gen;
    pl.n_gen = 1;
    pl.wdtype = wd;
    pl.threads = o->threads;
    pl.reps = o->quick ? 1 : reps;
    pl.warmup = 1;
    pl.perf = 0;
    pl.concurrent = 0;
    pl.quiet = 1;
    if (!o->quiet)
        fprintf(stderr, "xfprof machine: calibrating on %s (%s weights, prompt%s", cfg->name, dtype_name(wd),
                n_prompts > 1 ? "s" : "");
    for (int i = 0; !o->quiet && i < n_prompts; i++) fprintf(stderr, " %lld", (long long)prompts[i]);
    if (!o->quiet) fprintf(stderr, ", gen %lld)...\n", (long long)gen);
    record rec;
    run_notes notes;
    memset(&notes, 0, sizeof notes);
    const double t0 = timer_now_s();
    xf_status s = runner_run(&pl, &rec, &notes);
    double steps = 0; /* the measured steps' wall time (warm-up included): the rest is setting the model up */
    for (int i = 0; s == XF_OK && i < rec.n_points; i++)
        steps += (pl.warmup + pl.reps) * (rec.points[i].summary.ttft_s + (double)(gen - 1) * rec.points[i].summary.tpot_s);
    for (int i = 0; s == XF_OK && i < rec.n_points; i++) s = predcal_add_point(t, &rec.points[i], &rec.model, families);
    for (int i = 0; s == XF_OK && alt && i < rec.n_points; i++) s = predcal_add_point(alt, &rec.points[i], &rec.model, families);
    record_free(&rec);
    const double dt = timer_now_s() - t0;
    *stage_s += dt;
    *setup_s += dt - steps;
    if (!o->quiet && s == XF_OK)
        fprintf(stderr, "xfprof machine:   %.1f s: %d+%d repetitions' steps %.1f s, the model's set-up (weights) and the rest %.1f s\n", dt,
                pl.warmup, pl.reps, steps, dt - steps);
    if (s) return xf_error_prefix(s, "calibration on %s (%s): ", cfg->name, dtype_name(wd));
    return XF_OK;
}

/* The grid's models run one after the other, each allocating about what the one before freed: kept
 * in the heap (no mmap, no trim) their pages stay mapped, so a model's set-up does not fault and
 * zero its hundreds of MiB again. The matrices are 35-141 MiB, above any M_MMAP_THRESHOLD glibc
 * takes (32 MiB at most), so mmap is turned off instead. */
static int g_no_mmap, g_no_trim;
void calibrate_keep_heap(int on) {
    if (on) {
        g_no_mmap = g_no_mmap || mallopt(M_MMAP_MAX, 0) == 1;
        g_no_trim = g_no_trim || mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
        return;
    }
    if (g_no_mmap) mallopt(M_MMAP_MAX, 65536); /* glibc's defaults */
    if (g_no_trim) mallopt(M_TRIM_THRESHOLD, 128 * 1024);
    if (g_no_mmap || g_no_trim) malloc_trim(0);
    g_no_mmap = g_no_trim = 0;
}

xf_status calibrate_measure(const calibrate_opts *o, const device_spec *m, calib_table *t) {
    calib_table_init(t);
    if (o && o->fork_alt) calib_table_init(o->fork_alt);
    if (!o || !m || o->threads < 1 || o->n_wdtypes < 1) return xf_errorf(XF_EINVAL, "calibration: no threads or weight dtypes");
    t->threads = o->threads;
    snprintf(t->grid, sizeof t->grid, "%s", o->quick ? "quick" : "full");
    t->dram_Bps = m->bandwidth_Bps;
    t->cache_Bps = m->cache_bandwidth_Bps;
    t->cache_bytes = m->cache_bytes;
    for (int c = 0; c < XF_COMPUTE_COUNT; c++) t->peak_flops[c] = m->peak_flops[c];
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(t->created, sizeof t->created, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    /* the unit the GEMMs run on is whatever the backend picks (bf16 prefill: oneDNN, AMX where granted): named here */
    snprintf(t->source, sizeof t->source, "measured by xfprof machine --calibrate%s on %.48s, %d threads; bf16 prefill GEMMs: %.80s",
             o->quick ? " --quick" : "", host, o->threads, cpu_dnnl_describe());
    if (!(t->dram_Bps > 0) || !(t->peak_flops[XF_COMPUTE_FP32] > 0))
        return xf_errorf(XF_EINVAL, "calibration: the ceilings have no DRAM bandwidth or FP32 peak");
    /* The OpenMP waiting in force, and what a region's fork and join cost under it (the fork is a
     * term of its own in the prediction, not inside each op's efficiency: docs/verdicts.md) */
    omp_spin_in_force(t->omp_spin, sizeof t->omp_spin, t->omp_spin_by, sizeof t->omp_spin_by, 0);
    double ts0 = timer_now_s(), stage_fork = 0, stage_cache = 0, stage_dram = 0, setup_cache = 0, setup_dram = 0;
    xf_status s = omp_fork_cost(o->threads, OMP_FORK_GAP_SHORT_S, 2001, &t->fork_short_s);
    if (s == XF_OK) s = omp_fork_cost(o->threads, OMP_FORK_GAP_LONG_S, 51, &t->fork_long_s);
    if (s) return s;
    stage_fork = timer_now_s() - ts0;
    if (!o->quiet)
        fprintf(stderr, "xfprof machine: calibration under %s (by %s): an OpenMP fork of %d threads costs %.2f us after a %.0f us gap, "
                "%.2f us after %.0f ms (%.2f s)\n", t->omp_spin, t->omp_spin_by, o->threads, 1e6 * t->fork_short_s,
                1e6 * OMP_FORK_GAP_SHORT_S, 1e6 * t->fork_long_s, 1e3 * OMP_FORK_GAP_LONG_S, stage_fork);
    t->fork_term = 0; /* measured no better than the forks inside the efficiencies (docs/verdicts.md, run 12) */
    calib_table *nf = o->fork_alt;
    if (nf) {
        *nf = *t; /* the same header, no entries, the fork term on */
        nf->entries = NULL;
        nf->n = nf->cap = 0;
        nf->fork_term = 1;
    }
    /* 48: a row above the AMX tiles' path split (core/cpu_dispatch.h, CPU_AMX_PATH_TOKENS), whose
     * GEMMs at 33+ tokens are interpolated from rows on their side only (32 is on the other) */
    static const int64_t prompts[] = {32, 48, 128}, short_prompt = 8;
    /* Tokens generated: 6 (5 decode steps a prompt) in the in-cache models (decode attention at 5
     * contexts) and the prompt-8 projections-only models of d_model 512 (one prompt: with one step
     * their gemv entries moved beyond the spread of two old runs where the model had 1 layer,
     * docs/verdicts.md, eleventh session); 2 (one decode step after each prefill) in the models at
     * 1.5x the LLC, whose entries (gemv: the matrix's bytes, M 1 and the model's working set; gemm:
     * prefill) do not depend on the context and merge over their layers and 3 prompts. */
    const int64_t gen_cache = 6, gen_beyond = 2;
    const unsigned all = (1u << CALIB_FAMILY_COUNT) - 1, gemv = 1u << CALIB_GEMV, gemm = 1u << CALIB_GEMM;
    double llc = m->cache_bytes;
    /* What is measured is the kernels' time, which does not depend on the weights' values: every
     * layer of a grid model gets a copy of layer 0's (its own buffers, the same shapes, dtype,
     * layout and distribution), which the set-up makes in a fraction of the time (docs/verdicts.md) */
    weights_random_reuse_layers(1);
    calibrate_keep_heap(1);
    for (int k = 0; k < o->n_wdtypes && s == XF_OK; k++) {
        xf_dtype wd = o->wdtypes[k];
        for (int i = 0; i < N_SHAPES && s == XF_OK; i++) {
            const calib_shape *sh = &SHAPES[i];
            if (o->quick && i > 1) break;
            const calib_shape fit = cache_vocab(sh, wd, llc); /* the cache-sized models' vocabulary */
            double lb = layer_bytes(sh, wd), eb = embed_bytes(&fit, wd);
            /* in cache: up to 3/4 of the LLC (at most 8 layers); none when even one layer does not fit */
            const int in_cache = llc > 0 && m->cache_bandwidth_Bps > 0 && lb + eb <= 0.75 * llc;
            if (in_cache) {
                int64_t layers = (int64_t)floor((0.75 * llc - eb) / lb);
                if (layers > (o->quick ? 2 : 8)) layers = o->quick ? 2 : 8;
                model_config cfg;
                if ((s = shape_config(&fit, layers, &cfg)) == XF_OK) s = run_one(o, &cfg, wd, prompts, 3, gen_cache, all, 3, t, nf, &stage_cache, &setup_cache);
                /* The smallest shape's in-cache model is at 0.2 (bf16) or 0.1 (int8) of the LLC: its
                 * small matrices also at 0.45 of it (decode projections only), where a model like
                 * stories110m bf16 (0.44) streams them; they ran 12-18% slower there than the 0.2
                 * entries said (2026-12-01 19:00, three quiet runs). */
                const double ws = (layers * lb + eb) / llc;
                if (s == XF_OK && !o->quick && i == 0 && ws < 0.3) {
                    int64_t more = (int64_t)floor((0.45 * llc - eb) / lb + 0.5);
                    if (more > layers && (s = shape_config(&fit, more, &cfg)) == XF_OK)
                        s = run_one(o, &cfg, wd, &short_prompt, 1, gen_cache, gemv, 1, t, nf, &stage_cache, &setup_cache);
                }
            }
            /* The in-cache -> DRAM transition of the decode projections (gemv's z: the model's weights
             * over the LLC; a decode step streams them all): the smallest shape at the LLC's size
             * (decode projections only; the larger shapes' matrices have their in-cache model at
             * 0.6-0.7 of the LLC), and the two larger beyond it, at 1.5x the LLC (a cyclic
             * stream over more than an LRU cache holds misses every line) and at least 512 MiB, with
             * the prefill GEMMs too (at prompts 32 and 128: the DRAM tier's GEMMs, whose weights
             * stream from DRAM once per call, which the AMX paths' fast compute no longer hides). */
            /* A shape none of whose layers fits the cache (a 32 MiB L3: calib-1280 and calib-2560 at every
             * dtype but int8; under about 26 MB calib-512 too) has no in-cache model, and its ops other
             * than the projections would have no entry at all: its model beyond (or, calib-512, at) the
             * LLC measures every family then (the families but
             * gemv and gemm read activations and KV, and are the cache tier whatever the weights'
             * size: predcal_tier), and the quick grid, which has no transition models, runs one layer
             * of it from DRAM for them. */
            if (o->quick && !in_cache && s == XF_OK) {
                model_config cfg;
                if ((s = shape_config(&fit, 1, &cfg)) == XF_OK) s = run_one(o, &cfg, wd, prompts, 3, gen_cache, all, 1, t, nf, &stage_dram, &setup_dram);
            }
            const int at_llc = i == 0; /* the smallest shape at the LLC's size, the others beyond it */
            if (!o->quick && s == XF_OK && (!at_llc || llc > 0)) {
                double target = at_llc ? llc : fmax(1.5 * llc, 512.0 * 1048576.0);
                const double ebm = at_llc ? eb : embed_bytes(sh, wd); /* beyond the LLC: the shape's own vocabulary */
                int64_t layers = (int64_t)(at_llc ? floor((target - ebm) / lb + 0.5) : ceil((target - ebm) / lb));
                if (layers < 1) layers = 1;
                model_config cfg;
                /* 1 repetition after the warm-up: these models have 3-150 layers of the same shapes, whose
                 * entries merge into their median, so a second repetition measured the same keys again
                 * (2 until 2026-12-01 23:40: a third of the transition's steps) */
                if ((s = shape_config(at_llc ? &fit : sh, layers, &cfg)) == XF_OK)
                    s = at_llc ? run_one(o, &cfg, wd, &short_prompt, 1, gen_cache, in_cache ? gemv : all, 1, t, nf, &stage_dram, &setup_dram)
                               : run_one(o, &cfg, wd, prompts, 3, gen_beyond, in_cache ? gemv | gemm : all, 1, t, nf, &stage_dram, &setup_dram);
            }
        }
    }
    weights_random_reuse_layers(0);
    calibrate_keep_heap(0);
    if (s) {
        calib_table_free(t);
        if (nf) calib_table_free(nf);
        return s;
    }
    calib_table_merge(t);
    if (nf) calib_table_merge(nf);
    if (!o->quiet)
        fprintf(stderr, "xfprof machine: calibration stages: fork costs %.1f s, in-cache models %.1f s (set-up %.1f s), the in-cache -> DRAM "
                "transition %.1f s (set-up %.1f s); %.1f s in all\n", stage_fork, stage_cache, setup_cache, stage_dram, setup_dram,
                timer_now_s() - ts0);
    if (t->n == 0) return xf_errorf(XF_EINVAL, "calibration: no op was measured (is the last-level cache size known?)");
    return XF_OK;
}
