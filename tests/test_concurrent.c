/* Concurrent ceilings and class confidence (issue 17): the per-repetition ceilings and
 * utilizations (analyzers/roofline.c), the contended flag, the bootstrap confidence
 * (analyzers/confidence.c), the CPU wait (probes/cpu_wait.c), the record's new fields through
 * JSON, and a real disturbance: memory-streaming threads sharing a core with a tinyllama-shaped
 * model (3 layers, its matrix shapes), after which the record must say the run was contended and
 * that the model's threads waited for a CPU. No wall-time asserts. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyzers/confidence.h"
#include "analyzers/roofline.h"
#include "probes/cpu_wait.h"
#include "reference_model/config.h"
#include "reports/record_json.h"
#include "runner/runner.h"
#include "tests/test_machine_file.h"

static device_spec dev(void) {
    device_spec d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "test");
    d.bandwidth_Bps = 10e9;
    d.peak_flops[XF_COMPUTE_FP32] = 100e9;
    return d;
}

/* A decode-projection-like op: 1 MB, 0.25 FLOP/B; one sample per repetition. */
static record_op op_with(const double *samples, int n) {
    record_op o;
    memset(&o, 0, sizeof o);
    o.cost.phase = XF_DECODE;
    o.cost.kind = OP_DOWN;
    o.cost.compute = XF_COMPUTE_FP32;
    o.cost.bytes = 1e6;
    o.cost.flops = 2.5e5;
    o.measured = 1;
    o.n_samples = n;
    o.samples_s = malloc((size_t)n * sizeof *o.samples_s);
    memcpy(o.samples_s, samples, (size_t)n * sizeof *samples);
    o.time_s = samples[n / 2];
    return o;
}

static void pulses(record_concurrent *cc, const double *bw, int n) {
    memset(cc, 0, sizeof *cc);
    cc->n_pulses = n;
    cc->pulse_every = 1;
    for (int i = 0; i < n; i++) {
        cc->pulse_bandwidth_Bps[i] = bw[i];
        cc->pulse_fp32_flops[i] = 100e9;
    }
    cc->machine_bandwidth_Bps = 10e9;
    cc->machine_fp32_flops = 100e9;
}

Test(concurrent, rep_ceiling_is_the_mean_of_the_pulses_around_it) {
    record_concurrent cc;
    double bw[] = {10e9, 6e9, 4e9};
    pulses(&cc, bw, 3);
    double b, f;
    cr_assert(roofline_rep_ceiling(&cc, 0, &b, &f));
    cr_assert_float_eq(b, 8e9, 1);
    cr_assert(roofline_rep_ceiling(&cc, 1, &b, &f));
    cr_assert_float_eq(b, 5e9, 1);
    cr_assert_not(roofline_rep_ceiling(&cc, 2, &b, &f), "no pulse after repetition 2");
    cc.pulse_every = 2; /* pulses before 0, 2 and after the last: repetitions 0 and 1 share pulses 0 and 1 */
    cr_assert(roofline_rep_ceiling(&cc, 1, &b, &f));
    cr_assert_float_eq(b, 8e9, 1);
    cr_assert(roofline_rep_ceiling(&cc, 3, &b, &f));
    cr_assert_float_eq(b, 5e9, 1);
}

/* The machine was halved: the op takes twice as long; against the machine file it looks
 * latency-bound (50%), against the concurrent ceiling it is memory-bound (100%). */
Test(concurrent, class_uses_the_concurrent_ceiling_and_keeps_both) {
    device_spec d = dev();
    double s[] = {2e-4, 2e-4, 2e-4}; /* 1 MB in 200 us = 5 GB/s */
    record_op o = op_with(s, 3);
    record_concurrent cc;
    double bw[] = {5e9, 5e9, 5e9, 5e9};
    pulses(&cc, bw, 4);
    roofline_thresholds t;
    roofline_thresholds_default(&t);
    roofline_measure_op_concurrent(&o, &d, &cc, 3, &t);
    cr_assert_float_eq(o.util_memory_machine, 0.5, 1e-9);
    cr_assert_float_eq(o.util_memory, 1.0, 1e-9);
    cr_assert_eq(o.bound, XF_BOUND_MEMORY);
    roofline_measure_op_concurrent(&o, &d, NULL, 3, &t); /* no pulses: the machine file's class */
    cr_assert_eq(o.bound, XF_BOUND_LATENCY);
    cr_assert_float_eq(o.util_memory, o.util_memory_machine, 1e-12);
    free(o.samples_s);
}

Test(concurrent, contended_when_a_ceiling_falls_past_the_threshold) {
    record_concurrent cc;
    double quiet[] = {9.9e9, 9.5e9, 10e9}, busy[] = {6e9, 7e9, 5e9};
    pulses(&cc, quiet, 3);
    roofline_concurrent_finish(&cc, 2, ROOFLINE_CONTENDED_SHARE);
    cr_assert_not(cc.contended);
    cr_assert_float_eq(cc.bandwidth_Bps, 0.5 * (9.7e9 + 9.75e9), 1e3);
    pulses(&cc, busy, 3);
    roofline_concurrent_finish(&cc, 2, ROOFLINE_CONTENDED_SHARE);
    cr_assert(cc.contended);
    cr_assert_float_eq(cc.threshold, ROOFLINE_CONTENDED_SHARE, 1e-12);
    pulses(&cc, quiet, 3);
    for (int i = 0; i < 3; i++) cc.pulse_fp32_flops[i] = 50e9; /* compute halved, bandwidth not */
    roofline_concurrent_finish(&cc, 2, ROOFLINE_CONTENDED_SHARE);
    cr_assert(cc.contended);
    pulses(&cc, quiet, 3); /* quiet pulses, but the threads waited for a CPU: a shared core */
    cc.cpu_wait_measured = 1;
    cc.cpu_wait_share = 0.10;
    roofline_concurrent_finish(&cc, 2, ROOFLINE_CONTENDED_SHARE);
    cr_assert_not(cc.contended, "10%% of the time waiting is within the 15%% threshold");
    cc.cpu_wait_share = 0.5;
    roofline_concurrent_finish(&cc, 2, ROOFLINE_CONTENDED_SHARE);
    cr_assert(cc.contended);
    cc.cpu_wait_measured = 0; /* not measured: the share is not read */
    roofline_concurrent_finish(&cc, 2, ROOFLINE_CONTENDED_SHARE);
    cr_assert_not(cc.contended);
}

Test(concurrent, cpu_wait_share_is_the_slowest_thread_over_the_wall) {
    double before[] = {1.0, 2.0, 3.0}, after[] = {1.1, 2.4, 3.2};
    cr_assert_float_eq(cpu_wait_share(before, after, 3, 1.0), 0.4, 1e-12);
    cr_assert_float_eq(cpu_wait_share(before, after, 3, 0.2), 1.0, 1e-12, "clamped: a wait is never more than the wall");
    cr_assert_float_eq(cpu_wait_share(before, after, 3, 0.0), 0.0, 0);
    cr_assert_float_eq(cpu_wait_share(after, before, 3, 1.0), 0.0, 0, "a counter that went back is no wait");
}

/* The team's schedstat files open and read, or the kernel has none (then NULL, XF_OK). */
Test(concurrent, cpu_wait_reads_the_team_threads) {
    cpu_wait *w = NULL;
    cr_assert_eq(cpu_wait_open(0, &w), XF_EINVAL);
    cr_assert_eq(cpu_wait_open(2, &w), XF_OK, "%s", xf_error_msg());
    if (!w) cr_skip_test("this kernel has no /proc/self/task/TID/schedstat");
    cr_assert_eq(cpu_wait_threads(w), 2);
    double a[2], b[2];
    cr_assert(cpu_wait_read(w, a));
    usleep(2000);
    cr_assert(cpu_wait_read(w, b));
    for (int i = 0; i < 2; i++) cr_assert(b[i] >= a[i] && a[i] >= 0, "thread %d: %g then %g s", i, a[i], b[i]);
    cpu_wait_free(w);
}

static record_point point_of(record_op *ops, int n, int reps) {
    record_point p;
    memset(&p, 0, sizeof p);
    p.wl.batch = 1;
    p.wl.prompt = 4;
    p.wl.gen = 3;
    p.run.reps = reps;
    p.n_ops = n;
    p.ops = ops;
    return p;
}

Test(concurrent, confidence_is_one_when_every_repetition_agrees_and_less_when_they_straddle) {
    device_spec d = dev();
    roofline_thresholds t;
    roofline_thresholds_default(&t);
    /* op 0: every repetition at 100% of bandwidth. op 1: repetitions at 90%, 55%, 85%, 50%, 88%
     * of it: the median (85%) says memory, resamples with two slow ones say latency. */
    double a[] = {1e-4, 1e-4, 1e-4, 1e-4, 1e-4};
    double b[] = {1e-4 / 0.90, 1e-4 / 0.55, 1e-4 / 0.85, 1e-4 / 0.50, 1e-4 / 0.88};
    record_op ops[2] = {op_with(a, 5), op_with(b, 5)};
    for (int i = 0; i < 2; i++) roofline_measure_op(&ops[i], &d, &t);
    cr_assert_eq(ops[0].bound, XF_BOUND_MEMORY);
    cr_assert_eq(ops[1].bound, XF_BOUND_MEMORY);
    record_point p = point_of(ops, 2, 5);
    roofline_summarize_point(&p);
    cr_assert_eq(confidence_point(&p, &d, &t, CONFIDENCE_BOOT, CONFIDENCE_SEED), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(ops[0].confidence_boot, CONFIDENCE_BOOT);
    cr_assert_float_eq(ops[0].confidence, 1.0, 1e-12);
    cr_assert(ops[1].confidence > 0.5 && ops[1].confidence < 0.99, "straddling op: confidence %g", ops[1].confidence);
    cr_assert(p.summary.verdict_boot == CONFIDENCE_BOOT && p.summary.verdict_confidence > 0.5);
    double again = ops[1].confidence;
    cr_assert_eq(confidence_point(&p, &d, &t, CONFIDENCE_BOOT, CONFIDENCE_SEED), XF_OK);
    cr_assert_float_eq(ops[1].confidence, again, 0, "same record, same seed: same confidence");
    double kc[XF_PHASE_COUNT][OP_KIND_COUNT];
    cr_assert_eq(confidence_kinds(&p, &d, &t, CONFIDENCE_BOOT, CONFIDENCE_SEED, kc), XF_OK);
    cr_assert(kc[XF_DECODE][OP_DOWN] > 0 && kc[XF_DECODE][OP_DOWN] <= 1);
    cr_assert_float_eq(kc[XF_PREFILL][OP_DOWN], -1.0, 0, "no prefill op: no confidence");
    cr_assert_eq(confidence_point(&p, &d, &t, 0, 1), XF_EINVAL);
    for (int i = 0; i < 2; i++) free(ops[i].samples_s);
}

Test(concurrent, record_json_round_trip_and_old_records_load) {
    record r;
    record_init(&r, "run");
    cr_assert_eq(config_preset("stories15m", &r.model), XF_OK);
    r.device = dev();
    record_point *p = record_add_point(&r);
    p->wl.batch = 1;
    p->wl.prompt = 4;
    p->wl.gen = 2;
    p->wl.wdtype = p->wl.adtype = p->wl.kvdtype = XF_FP32;
    double bw[] = {5e9, 6e9, 7e9};
    pulses(&p->concurrent, bw, 3);
    p->concurrent.cpu_wait_measured = 1;
    p->concurrent.cpu_wait_share = 0.25;
    roofline_concurrent_finish(&p->concurrent, 2, 0.15);
    p->ops = calloc(1, sizeof *p->ops);
    double s[] = {1e-4, 2e-4};
    p->ops[0] = op_with(s, 2);
    p->n_ops = 1;
    p->ops[0].util_memory = 0.9;
    p->ops[0].util_memory_machine = 0.6;
    p->ops[0].confidence = 0.75;
    p->ops[0].confidence_boot = 1000;
    p->summary.verdict_confidence = 0.5;
    p->summary.verdict_boot = 1000;
    char *text = NULL;
    cr_assert_eq(record_json_text(&r, &text), XF_OK, "%s", xf_error_msg());
    record q;
    cr_assert_eq(record_from_json(text, "test", &q), XF_OK, "%s", xf_error_msg());
    const record_point *x = &q.points[0];
    cr_assert_eq(x->concurrent.n_pulses, 3);
    cr_assert_float_eq(x->concurrent.pulse_bandwidth_Bps[2], 7e9, 0);
    cr_assert_eq(x->concurrent.contended, 1);
    cr_assert_eq(x->concurrent.cpu_wait_measured, 1);
    cr_assert_float_eq(x->concurrent.cpu_wait_share, 0.25, 0);
    { /* a record from before the CPU wait: the concurrent block loads, the wait not measured */
        char *older = strdup(text), *h = strstr(older, "\"cpu_wait_share\"");
        cr_assert_not_null(h);
        h[1] = 'X';
        record o;
        cr_assert_eq(record_from_json(older, "test", &o), XF_OK, "%s", xf_error_msg());
        cr_assert_eq(o.points[0].concurrent.n_pulses, 3);
        cr_assert_eq(o.points[0].concurrent.cpu_wait_measured, 0);
        record_free(&o);
        free(older);
    }
    cr_assert_float_eq(x->ops[0].util_memory_machine, 0.6, 0);
    cr_assert_float_eq(x->ops[0].confidence, 0.75, 0);
    cr_assert_eq(x->ops[0].confidence_boot, 1000);
    cr_assert_float_eq(x->summary.verdict_confidence, 0.5, 0);
    record_free(&q);
    /* an old record: none of the fields; it loads, machine utilizations = the op's, no confidence */
    char *old = strdup(text);
    const char *keys[] = {"\"concurrent\"", "\"util_compute_machine\"", "\"util_memory_machine\"", "\"confidence\"",
                          "\"confidence_boot\"", "\"verdict_confidence\"", "\"verdict_boot\""};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) { /* rename each key out of the reader's sight */
        char *h;
        while ((h = strstr(old, keys[k]))) h[1] = 'X';
    }
    cr_assert_eq(record_from_json(old, "old", &q), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(q.points[0].concurrent.n_pulses, 0);
    cr_assert_eq(q.points[0].ops[0].confidence_boot, 0);
    cr_assert_float_eq(q.points[0].ops[0].util_memory_machine, q.points[0].ops[0].util_memory, 0);
    record_free(&q);
    /* hostile values are refused, naming the field */
    char *bad = strdup(text), *h = strstr(bad, "\"threshold\":");
    cr_assert_not_null(h);
    memcpy(h + 12, "7", 1);
    cr_assert_eq(record_from_json(bad, "bad", &q), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "threshold"), "%s", xf_error_msg());
    record_free(&q);
    free(bad);
    free(old);
    free(text);
    record_free(&r);
}

/* ---- a real disturbance ---- */

static volatile int g_stop;

static void *streamer(void *arg) {
    int cpu = *(int *)arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    size_t n = (size_t)64 << 20; /* 2 x 256 MiB: a copy that streams from DRAM */
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) b[i] = (float)i;
    while (!g_stop)
        for (size_t i = 0; i < n && !g_stop; i += 4096) memcpy(a + i, b + i, 4096 * sizeof *a);
    free(a);
    free(b);
    return NULL;
}

/* cache_bytes 1 MiB read at bw: the runner's in-cache ceiling is the DRAM one */
static void write_machine(const char *path, double bw, double fp32) {
    test_machine_file_write(path, bw, 1048576, bw, fp32, "the concurrent test, 2 threads");
}

/* A one-point plan (batch, prompt, gen: one value each), quiet, no perf counters. */
static void plan_one(run_plan *pl, const model_config *cfg, const int64_t *batch, const int64_t *prompt, const int64_t *gen,
                     int threads, int reps, int warmup) {
    run_plan_default(pl, cfg);
    pl->batch = batch;
    pl->prompt = prompt;
    pl->gen = gen;
    pl->n_batch = pl->n_prompt = pl->n_gen = 1;
    pl->threads = threads;
    pl->reps = reps;
    pl->warmup = warmup;
    pl->perf = 0;
    pl->quiet = 1;
}

static int is_projection(op_kind k) { return k == OP_QKV || k == OP_O_PROJ || k == OP_GATE_UP || k == OP_DOWN; }

/* Runs the plan, returns the share of decode projection time classed memory-bound. */
static double run_share(const run_plan *pl, record *r) {
    record_init(r, "run");
    cr_assert_eq(runner_run(pl, r, NULL), XF_OK, "%s", xf_error_msg());
    const record_point *p = &r->points[0];
    double mem = 0, all = 0;
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *o = &p->ops[i];
        if (o->cost.phase != XF_DECODE || !is_projection(o->cost.kind) || !o->measured) continue;
        all += o->time_s;
        if (o->bound == XF_BOUND_MEMORY) mem += o->time_s;
        cr_assert_eq(o->confidence_boot, CONFIDENCE_BOOT);
    }
    cr_assert(all > 0);
    return mem / all;
}

Test(concurrent, streaming_thread_on_a_shared_core, .timeout = 300) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t mine;
    if (ncpu < 2 || sched_getaffinity(0, sizeof mine, &mine) != 0 || CPU_COUNT(&mine) < 2)
        cr_skip_test("needs 2 CPUs to share one with the streaming thread");
    int cpus[2], k = 0;
    for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
        if (CPU_ISSET(c, &mine)) cpus[k++] = c;
    cpu_set_t two;
    CPU_ZERO(&two);
    CPU_SET(cpus[0], &two);
    CPU_SET(cpus[1], &two);
    cr_assert_eq(sched_setaffinity(0, sizeof two, &two), 0); /* the model's 2 threads on these 2 CPUs */
    char dir[] = "/tmp/xfprof-concurrent-XXXXXX", path[96];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/machine.json", dir);
    setenv("XFPROF_MACHINE_FILE", path, 1);
    write_machine(path, 10e9, 100e9); /* placeholder: the quiet run measures the real figures */
    /* tinyllama-1.1b's matrix shapes (d_model 2048, d_ff 5632, 32 heads, 4 KV heads), 3 layers,
     * a small vocabulary: ~600 MB of fp32 weights, above a 480 MiB last-level cache */
    model_config cfg;
    cr_assert_eq(config_parse_hf("{\"model_type\":\"llama\",\"hidden_size\":2048,\"intermediate_size\":5632,"
                                 "\"num_attention_heads\":32,\"num_key_value_heads\":4,\"num_hidden_layers\":3,"
                                 "\"vocab_size\":4096,\"max_position_embeddings\":2048,\"rms_norm_eps\":1e-5,"
                                 "\"rope_theta\":10000.0,\"tie_word_embeddings\":false}",
                                 "tinyllama-3l", &cfg),
                 XF_OK, "%s", xf_error_msg());
    static const int64_t batch[] = {1}, prompt[] = {8}, gen[] = {4};
    run_plan pl;
    plan_one(&pl, &cfg, batch, prompt, gen, 2, 5, 1);
    record quiet;
    double share_quiet = run_share(&pl, &quiet);
    const record_concurrent *qc = &quiet.points[0].concurrent;
    cr_assert_eq(qc->n_pulses, 6, "a pulse before each of the 5 repetitions and one after");
    cr_assert(qc->bandwidth_Bps > 0 && qc->fp32_flops > 0);
    /* the quiet run's best pulses become the machine file (best of several, as `xfprof machine`
     * keeps the best repetition): what this machine does unloaded */
    double best_bw = 0, best_fp = 0;
    for (int i = 0; i < qc->n_pulses; i++) {
        if (qc->pulse_bandwidth_Bps[i] > best_bw) best_bw = qc->pulse_bandwidth_Bps[i];
        if (qc->pulse_fp32_flops[i] > best_fp) best_fp = qc->pulse_fp32_flops[i];
    }
    write_machine(path, best_bw, best_fp);
    int quiet_wait_measured = qc->cpu_wait_measured;
    double quiet_wait = qc->cpu_wait_share;
    record_free(&quiet);
    g_stop = 0;
    pthread_t th[2]; /* two streamers on the second CPU: the model's thread there gets a third of it */
    for (int i = 0; i < 2; i++) cr_assert_eq(pthread_create(&th[i], NULL, streamer, &cpus[1]), 0);
    usleep(300000); /* the streamers' arrays are touched and streaming */
    record busy;
    double share_busy = run_share(&pl, &busy);
    g_stop = 1;
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    const record_point *p = &busy.points[0];
    cr_log_info("quiet: %.0f%% of decode projection time memory-bound; with the streamer %.0f%%; concurrent read %.2f GB/s "
                "vs %.2f quiet, FP32 %.1f vs %.1f GFLOP/s; CPU wait %.0f%% vs %.0f%% quiet",
                100 * share_quiet, 100 * share_busy, p->concurrent.bandwidth_Bps / 1e9, p->concurrent.machine_bandwidth_Bps / 1e9,
                p->concurrent.fp32_flops / 1e9, p->concurrent.machine_fp32_flops / 1e9, 100 * p->concurrent.cpu_wait_share,
                100 * quiet_wait);
    cr_assert(p->concurrent.contended, "the record must say the run was contended (read %.2f of %.2f GB/s, FP32 %.1f of %.1f)",
              p->concurrent.bandwidth_Bps / 1e9, p->concurrent.machine_bandwidth_Bps / 1e9, p->concurrent.fp32_flops / 1e9,
              p->concurrent.machine_fp32_flops / 1e9);
    /* The streamers take the model's thread's core two thirds of the time: its run-queue wait says
     * so however the short pulses fell (a pulse that slipped between time slices read 23 GB/s
     * while the ops waited a slice each: 2 runs in 10 classed the projections latency-bound, and
     * so did a CI run, when this test asserted their class). */
    if (p->concurrent.cpu_wait_measured) {
        cr_assert(quiet_wait_measured, "the CPU wait was measured under the disturbance but not alone");
        cr_assert(p->concurrent.cpu_wait_share >= 0.2 && p->concurrent.cpu_wait_share > quiet_wait,
                  "the model's threads waited for a CPU %.0f%% of the time with the streamers on their core, %.0f%% alone",
                  100 * p->concurrent.cpu_wait_share, 100 * quiet_wait);
    } else
        cr_log_warn("this kernel has no /proc/self/task/TID/schedstat: the CPU wait is not measured, the pulses alone judge");
    double machine_mem = 0, conc_mem = 0; /* against the quiet ceilings they look less saturated */
    for (int64_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].cost.phase == XF_DECODE && is_projection(p->ops[i].cost.kind)) {
            machine_mem += p->ops[i].util_memory_machine;
            conc_mem += p->ops[i].util_memory;
        }
    if (p->concurrent.bandwidth_Bps < p->concurrent.machine_bandwidth_Bps) /* contended on bandwidth, not FP32 alone */
        cr_assert(conc_mem > machine_mem, "concurrent utilization %.2f must exceed the machine file's %.2f", conc_mem, machine_mem);
    record_free(&busy);
    unsetenv("XFPROF_MACHINE_FILE");
    unlink(path);
    rmdir(dir);
}

/* Many repetitions: a pulse before every pulse_every-th one and one after the last, at most
 * RECORD_MAX_PULSES, every repetition between two of them. */
Test(concurrent, many_repetitions_share_pulses) {
    char dir[] = "/tmp/xfprof-concurrent-XXXXXX", path[96];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/machine.json", dir);
    setenv("XFPROF_MACHINE_FILE", path, 1);
    write_machine(path, 10e9, 100e9);
    model_config cfg;
    cr_assert_eq(config_parse_hf("{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,\"num_attention_heads\":4,"
                                 "\"num_key_value_heads\":2,\"num_hidden_layers\":1,\"vocab_size\":256,"
                                 "\"max_position_embeddings\":64,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0}",
                                 "tiny", &cfg),
                 XF_OK, "%s", xf_error_msg());
    static const int64_t batch[] = {1}, prompt[] = {4}, gen[] = {2};
    run_plan pl;
    plan_one(&pl, &cfg, batch, prompt, gen, 1, 40, 0);
    record r;
    record_init(&r, "run");
    cr_assert_eq(runner_run(&pl, &r, NULL), XF_OK, "%s", xf_error_msg());
    const record_concurrent *cc = &r.points[0].concurrent;
    cr_assert_eq(cc->pulse_every, 3);
    cr_assert_eq(cc->n_pulses, 15, "pulses before repetitions 0, 3, ..., 39 and after the last");
    double b, f;
    for (int k = 0; k < 40; k++) cr_assert(roofline_rep_ceiling(cc, k, &b, &f), "repetition %d has no pulses around it", k);
    cr_assert_not(roofline_rep_ceiling(cc, 42, &b, &f), "past the last pulse");
    pl.concurrent = 0;
    record q;
    record_init(&q, "run");
    cr_assert_eq(runner_run(&pl, &q, NULL), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(q.points[0].concurrent.n_pulses, 0, "--no-concurrent: no pulses");
    record_free(&q);
    record_free(&r);
    unsetenv("XFPROF_MACHINE_FILE");
    unlink(path);
    rmdir(dir);
}
