/* The runner (runner/runner.c): a typed plan in, a record out. A tiny model, a machine file written
 * here (so no ceiling is measured), one repetition: the grid's points in order, gen tokens per
 * sequence, the plan's checks, the memory gate before anything runs, the stop callback between
 * points and the on_step replay. */
#define _GNU_SOURCE /* CPU affinity: sched_getcpu, pthread_setaffinity_np */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reference_model/config.h"
#include "runner/runner.h"

static char g_dir[64];

static void setup(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/xfprof-runner-XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
    char path[128];
    snprintf(path, sizeof path, "%s/machine.json", g_dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("{\"format\":\"xfprof-devices\",\"version\":1,\"devices\":[{\"name\":\"test-cpu\",\"kind\":\"cpu\",\"memory_bytes\":8e9,"
          "\"bandwidth_Bps\":1e10,\"cache_bytes\":1048576,\"cache_bandwidth_Bps\":5e10,\"peak_flops\":{\"fp32\":1e11},"
          "\"source\":\"the runner's test, 1 threads\"}]}\n",
          f);
    fclose(f);
    setenv("XFPROF_MACHINE_FILE", path, 1);
}

static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    cr_assert_eq(system(cmd), 0);
    unsetenv("XFPROF_MACHINE_FILE");
}

TestSuite(runner, .init = setup, .fini = teardown);

static model_config tiny(void) {
    model_config c;
    cr_assert_eq(config_parse_hf("{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,\"num_attention_heads\":4,"
                                 "\"num_key_value_heads\":2,\"num_hidden_layers\":2,\"vocab_size\":256,"
                                 "\"max_position_embeddings\":64,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,"
                                 "\"tie_word_embeddings\":false}",
                                 "tiny", &c),
                 XF_OK, "%s", xf_error_msg());
    return c;
}

static const int64_t k_batch[] = {1, 2}, k_prompt[] = {4}, k_gen[] = {3, 1};

static void plan_of(run_plan *p, const model_config *c) {
    run_plan_default(p, c);
    p->batch = k_batch;
    p->n_batch = 2;
    p->prompt = k_prompt;
    p->n_prompt = 1;
    p->gen = k_gen;
    p->n_gen = 2;
    p->threads = 1;
    p->reps = 2;
    p->warmup = 0;
    p->perf = 0;
    p->quiet = 1;
}

Test(runner, grid_points_tokens_and_probes) {
    model_config c = tiny();
    run_plan p;
    plan_of(&p, &c);
    record r;
    record_init(&r, "run");
    run_notes n;
    cr_assert_eq(runner_run(&p, &r, &n), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(r.n_points, 4); /* batch-major: (1,3) (1,1) (2,3) (2,1) */
    cr_assert_eq(n.points_planned, 4);
    int64_t want_b[] = {1, 1, 2, 2}, want_g[] = {3, 1, 3, 1};
    for (int i = 0; i < 4; i++) {
        const record_point *pt = &r.points[i];
        cr_assert_eq(pt->wl.batch, want_b[i]);
        cr_assert_eq(pt->wl.gen, want_g[i]);
        cr_assert_eq(pt->n_seqs, want_b[i]);
        cr_assert_eq(pt->n_tokens_per_seq, want_g[i]); /* gen tokens: the prefill's and gen - 1 decode steps' */
        cr_assert_eq(pt->run.reps, 2);
        cr_assert_str_eq(pt->run.kv_policy, "paged:16");
        int measured = 0, decode_measured = 0;
        for (int64_t k = 0; k < pt->n_ops; k++) {
            const record_op *op = &pt->ops[k];
            if (!op->measured) continue;
            measured++;
            decode_measured += op->cost.phase == XF_DECODE;
            cr_assert_eq(op->n_samples, 2);
        }
        cr_assert(measured > 0);
        cr_assert_eq(decode_measured > 0, want_g[i] > 1, "point %d: decode ops measured %d", i, decode_measured);
        cr_assert(pt->summary.ttft_s > 0);
        cr_assert_eq(pt->summary.tpot_s > 0, want_g[i] > 1);
    }
    cr_assert_str_eq(r.device.name, "test-cpu");
    cr_assert(n.probes && n.timer_overhead_s >= 0);
    record_free(&r);
}

Test(runner, plan_checks_and_the_memory_gate) {
    model_config c = tiny();
    run_plan p;
    plan_of(&p, &c);
    record r;
    int64_t long_prompt[] = {60};
    p.prompt = long_prompt; /* prompt 60 + gen 8 = 68 tokens > the context of 64 */
    int64_t gen8[] = {8};
    p.gen = gen8;
    p.n_gen = 1;
    record_init(&r, "run");
    cr_assert_eq(runner_run(&p, &r, NULL), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "context of 64"), "%s", xf_error_msg());
    cr_assert_eq(r.n_points, 0);
    record_free(&r);
    plan_of(&p, &c);
    int64_t huge[] = {(int64_t)1 << 25};
    p.batch = huge;
    p.n_batch = 1;
    record_init(&r, "run");
    cr_assert_eq(runner_run(&p, &r, NULL), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "--batch"), "%s", xf_error_msg());
    record_free(&r);
    /* a model far beyond this machine's memory is refused by the gate, with its sizes, before
     * anything is measured or allocated */
    model_config big;
    cr_assert_eq(config_preset("llama-2-70b", &big), XF_OK);
    plan_of(&p, &big);
    int64_t b1[] = {4096};
    p.batch = b1;
    p.n_batch = 1;
    record_init(&r, "run");
    cr_assert_eq(runner_run(&p, &r, NULL), XF_EOVERFLOW);
    cr_assert(strstr(xf_error_msg(), "nothing was allocated") && strstr(xf_error_msg(), "weights"), "%s", xf_error_msg());
    cr_assert_eq(r.n_points, 0);
    record_free(&r);
}

static int g_stop_calls;
/* plan.stop is polled before each point and after each repetition (issue 19): with 2 repetitions
 * and no warm-up, call 0 is before point 1, calls 1 and 2 after its repetitions, call 3 before
 * point 2. */
static int stop_after_one(void) { return g_stop_calls++ >= 3 ? 2 : 0; }
static int stop_after_first_rep(void) { return g_stop_calls++ >= 1 ? 2 : 0; }

typedef struct steps_seen {
    int n, last_point;
    int64_t last_step;
} steps_seen;

static xf_status on_step(void *ctx, const run_step_view *v) {
    steps_seen *s = ctx;
    cr_assert_eq(v->n_seqs, 1);
    cr_assert_eq(v->vocab, 256);
    cr_assert((v->step == 0) == (v->prompt != NULL));
    int best = 0;
    for (int j = 1; j < 256; j++)
        if (v->logits[j] > v->logits[best]) best = j;
    cr_assert_eq(v->tokens[0], best, "greedy: the token is the argmax of its logits");
    s->n++;
    s->last_point = v->point;
    s->last_step = v->step;
    return XF_OK;
}

Test(runner, stop_between_points_and_the_step_replay) {
    model_config c = tiny();
    run_plan p;
    plan_of(&p, &c);
    p.n_batch = 1; /* batch 1: points (1,3) and (1,1) */
    g_stop_calls = 0;
    p.stop = stop_after_one;
    steps_seen seen = {0, -1, -1};
    p.on_step = on_step;
    p.on_step_ctx = &seen;
    record r;
    record_init(&r, "run");
    run_notes n;
    cr_assert_eq(runner_run(&p, &r, &n), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(r.n_points, 1); /* the second point was not started */
    cr_assert_eq(n.stopped_by, 2);
    cr_assert_eq(seen.n, 3); /* gen 3: the prefill's step and two decode steps */
    cr_assert_eq(seen.last_point, 0);
    cr_assert_eq(seen.last_step, 2);
    for (int k = 0; k < 3; k++) cr_assert(r.points[0].tokens[k] >= 0);
    record_free(&r);
}

/* Ctrl-C inside a point: the repetition finishes, the point is kept with the repetitions it has,
 * the record says partial and why; nothing else runs (no replay, no second point). */
Test(runner, stop_inside_a_point_keeps_the_finished_repetitions) {
    model_config c = tiny();
    run_plan p;
    plan_of(&p, &c);
    p.n_batch = 1;
    p.reps = 5;
    g_stop_calls = 0;
    p.stop = stop_after_first_rep;
    steps_seen seen = {0, -1, -1};
    p.on_step = on_step;
    p.on_step_ctx = &seen;
    record r;
    record_init(&r, "run");
    run_notes n;
    cr_assert_eq(runner_run(&p, &r, &n), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(n.stopped_by, 2);
    cr_assert_eq(r.n_points, 1);
    cr_assert_eq(r.points[0].run.reps, 1);
    for (int64_t i = 0; i < r.points[0].n_ops; i++)
        if (r.points[0].ops[i].measured) cr_assert_eq(r.points[0].ops[i].n_samples, 1, "op %lld", (long long)i);
    cr_assert(r.partial);
    cr_assert(strstr(r.partial_reason, "1 of 5 repetitions") != NULL, "%s", r.partial_reason);
    cr_assert_eq(seen.n, 0); /* the replay is not run for a cut point */
    record_free(&r);
}

/* Mixture of experts: the record keeps the router's choices of the last repetition, and every MoE
 * layer's gate_up / down op reads the bytes of the distinct experts it really chose (mean per step),
 * not the uniform-routing expectation; the counts survive the JSON round trip. */
#include "reference_model/cost_model.h"
#include "reports/record_json.h"

Test(runner, moe_bytes_follow_the_chosen_experts) {
    model_config c;
    cr_assert_eq(config_resolve(XF_SOURCE_DIR "/tests/data/hf/qwen3-moe", &c), XF_OK, "%s", xf_error_msg());
    run_plan p;
    plan_of(&p, &c);
    static const int64_t b[] = {2}, pr[] = {8}, g[] = {5};
    p.batch = b, p.n_batch = 1, p.prompt = pr, p.n_prompt = 1, p.gen = g, p.n_gen = 1;
    p.weights_dir = XF_SOURCE_DIR "/tests/data/hf/qwen3-moe";
    record r;
    record_init(&r, "run");
    run_notes n;
    cr_assert_eq(runner_run(&p, &r, &n), XF_OK, "%s", xf_error_msg());
    const record_point *pt = &r.points[0];
    const int64_t E = c.n_experts, L = c.n_layers, k = c.experts_per_tok, d = c.d_model, fe = c.d_ff_expert;
    cr_assert_eq(pt->n_experts, E);
    cr_assert_eq(pt->expert_steps[XF_PREFILL], 1);
    cr_assert_eq(pt->expert_steps[XF_DECODE], 4); /* gen 5: 4 decode steps */
    int differs = 0;
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++) {
        const int64_t steps = pt->expert_steps[ph], tokens_per_step = ph == XF_PREFILL ? 2 * 8 : 2;
        for (int64_t l = 0; l < L; l++) {
            const int64_t *t = pt->expert_tokens + ((int64_t)ph * L + l) * E;
            int64_t sum = 0, used = 0;
            for (int64_t e = 0; e < E; e++) sum += t[e], used += t[e] > 0;
            const int64_t dis = pt->expert_distinct[(int64_t)ph * L + l];
            if (!model_layer_is_moe(&c, l)) {
                cr_assert(sum == 0 && dis == 0, "dense layer %lld has router counts", (long long)l);
                continue;
            }
            cr_assert_eq(sum, steps * tokens_per_step * k, "layer %lld: %lld routed tokens", (long long)l, (long long)sum);
            if (ph == XF_PREFILL) cr_assert_eq(dis, used); /* one step: the experts that got a token */
            cr_assert(dis >= used || ph == XF_PREFILL);
            cr_assert(dis <= steps * (tokens_per_step * k < E ? tokens_per_step * k : E));
            /* the op's weights: the router (E x d) and the chosen experts' gate/up (2 fe x d), fp32 */
            const double D = (double)dis / (double)steps;
            for (int64_t i = 0; i < pt->n_ops; i++) {
                const cost_op *op = &pt->ops[i].cost;
                if ((int)op->phase != ph || op->layer != l) continue;
                if (op->kind == OP_GATE_UP)
                    cr_assert_float_eq(op->weight_bytes, 4.0 * ((double)E * d + D * 2.0 * fe * d), 1e-6, "layer %lld phase %d", (long long)l, ph);
                if (op->kind == OP_DOWN) cr_assert_float_eq(op->weight_bytes, 4.0 * D * fe * d, 1e-6);
            }
            differs |= fabs(D - cost_moe_experts_read(E, k, (double)tokens_per_step)) > 1e-9;
        }
    }
    cr_assert(differs, "the chosen counts equal the uniform expectation everywhere: the test would not see the difference");
    char *js = record_to_json(&r);
    cr_assert_not_null(js);
    record back;
    cr_assert_eq(record_from_json(js, "test", &back), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(back.points[0].n_experts, E);
    cr_assert_eq(memcmp(back.points[0].expert_tokens, pt->expert_tokens, (size_t)(XF_PHASE_COUNT * L * E) * sizeof(int64_t)), 0);
    cr_assert_eq(memcmp(back.points[0].expert_distinct, pt->expert_distinct, (size_t)(XF_PHASE_COUNT * L) * sizeof(int64_t)), 0);
    cr_assert_eq(back.points[0].expert_steps[XF_DECODE], 4);
    /* a record without them (older, or a dense model) still loads; a wrong one is refused naming it */
    char *at = strstr(js, "\"experts\":{\"n_experts\":8");
    cr_assert_not_null(at);
    at[strlen("\"experts\":{\"n_experts\":")] = '9';
    record bad;
    cr_assert_eq(record_from_json(js, "test", &bad), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "experts"), "%s", xf_error_msg());
    record_free(&bad);
    free(js);
    record_free(&back);
    record_free(&r);
}

/* The CPU step times (cpu_step_s, what compare --ab decides on) with one thread are that thread's
 * CPU time, not the process's: another thread of the process spinning all the while (as OpenBLAS's
 * idle server thread does for ~0.1 s after it starts) is not counted. The spinner is pinned to the
 * run's CPU, so the scheduler gives it about half of that CPU whatever else the machine runs: the
 * process's clock would count that half (the figure about doubles), the thread's does not. So
 * with the spinner the run's thread gets about half of the wall time, and its CPU per step is
 * about half the wall per step, where the process's clock would give about all of it (the least
 * of two runs' median ratio is checked under 0.8: another program on that CPU only lowers both).
 * The two runs' figures against each other were checked before (spun < 1.4 x alone), but the
 * thread's own CPU time grows with a spinner on its CPU (its caches refilled after every switch):
 * 1.53x on a 2-vCPU AMD EPYC (2026-12-02), where it failed. Also, one thread's CPU time over an
 * interval cannot exceed the interval's wall time. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

static atomic_int g_spin_stop;

static void *spin_thread(void *arg) {
    (void)arg;
    volatile unsigned long x = 0;
    while (!atomic_load_explicit(&g_spin_stop, memory_order_relaxed)) x++;
    return NULL;
}

static double median_of(const double *x, int n) {
    double s[RECORD_MAX_CPU_REPS];
    memcpy(s, x, (size_t)n * sizeof *s);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && s[j] < s[j - 1]; j--) {
            double t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* One run of c (batch 1, prompt 8, gen 48, 5 repetitions) with or without the spinner; returns the
 * median decode CPU figure over the median decode wall time per step (TPOT), and checks each figure
 * against the wall time. */
static double run_cpu_decode(const model_config *c, int spin, const cpu_set_t *cpu) {
    static const int64_t batch[] = {1}, prompt[] = {8}, gen[] = {48};
    run_plan p;
    plan_of(&p, c);
    p.batch = batch, p.n_batch = 1, p.prompt = prompt, p.n_prompt = 1, p.gen = gen, p.n_gen = 1;
    p.reps = 5;
    p.warmup = 1;
    p.concurrent = 0;
    atomic_store(&g_spin_stop, 0);
    pthread_t th;
    if (spin) {
        pthread_attr_t at;
        cr_assert_eq(pthread_attr_init(&at), 0);
        cr_assert_eq(pthread_attr_setaffinity_np(&at, sizeof *cpu, cpu), 0);
        cr_assert_eq(pthread_create(&th, &at, spin_thread, NULL), 0);
        pthread_attr_destroy(&at);
    }
    record r;
    record_init(&r, "run");
    run_notes n;
    xf_status s = runner_run(&p, &r, &n);
    atomic_store(&g_spin_stop, 1);
    if (spin) pthread_join(th, NULL);
    cr_assert_eq(s, XF_OK, "%s", xf_error_msg());
    const record_point *pt = &r.points[0];
    cr_assert_eq(pt->n_cpu, 5);
    for (int k = 0; k < pt->n_cpu; k++) cr_assert(pt->cpu_prefill_s[k] > 0 && pt->cpu_decode_s[k] > 0);
    /* tolerance: the two clocks are read one after the other */
    double slack = 50e-6, n_dec = (double)workload_decode_steps(&pt->wl);
    double cpu_pre = median_of(pt->cpu_prefill_s, pt->n_cpu), cpu_dec = median_of(pt->cpu_decode_s, pt->n_cpu);
    cr_assert(cpu_pre <= pt->summary.ttft_s + slack, "prefill CPU %.3g s > wall %.3g s", cpu_pre, pt->summary.ttft_s);
    cr_assert(cpu_dec <= pt->summary.tpot_s + slack / n_dec, "decode CPU %.3g s/step > wall %.3g s/step", cpu_dec, pt->summary.tpot_s);
    const double share = cpu_dec / pt->summary.tpot_s;
    record_free(&r);
    return share;
}

Test(runner, cpu_step_times_with_one_thread_are_that_threads) {
    model_config c;
    cr_assert_eq(config_parse_hf("{\"model_type\":\"llama\",\"hidden_size\":256,\"intermediate_size\":768,\"num_attention_heads\":4,"
                                 "\"num_key_value_heads\":2,\"num_hidden_layers\":4,\"vocab_size\":512,"
                                 "\"max_position_embeddings\":128,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,"
                                 "\"tie_word_embeddings\":false}",
                                 "small", &c),
                 XF_OK, "%s", xf_error_msg());
    cpu_set_t cpu; /* this thread and the spinner on one CPU (Criterion runs each test in its own process) */
    CPU_ZERO(&cpu);
    int here = sched_getcpu();
    CPU_SET(here >= 0 ? here : 0, &cpu);
    cr_assert_eq(pthread_setaffinity_np(pthread_self(), sizeof cpu, &cpu), 0);
    double alone = INFINITY, spun = INFINITY;
    for (int k = 0; k < 2; k++) {
        alone = fmin(alone, run_cpu_decode(&c, 0, &cpu));
        spun = fmin(spun, run_cpu_decode(&c, 1, &cpu));
    }
    cr_log_info("decode CPU per step over wall per step: %.2f alone, %.2f with a spinner on the run's CPU", alone, spun);
    cr_assert(spun < 0.8, "decode CPU per step is %.2f of the wall per step with a spinner taking half the run's CPU "
              "(%.2f alone): the process's CPU time, not the thread's?", spun, alone);
}

/* The unit an op is judged against (runner_cpu_op_compute): a dense model's int8 projections ran on
 * AVX512-VNNI at every token count where there is no AMX (xk_a8_prefill), so they carry int8 when
 * the device has an int8 peak; fp32 without one (an older machine file), for fp32 weights, for
 * element-wise ops, and for a mixture of experts (its experts are not packed). */
#include "reference_model/cpu_kernels.h"
Test(runner, int8_projections_on_vnni_are_judged_as_int8) {
    model_config c;
    cr_assert_eq(config_preset("stories15m", &c), XF_OK);
    workload w = {.batch = 1, .prompt = 64, .gen = 4, .wdtype = XF_INT8, .adtype = XF_FP32, .kvdtype = XF_FP32};
    device_spec d;
    memset(&d, 0, sizeof d);
    d.bandwidth_Bps = 3e10, d.peak_flops[XF_COMPUTE_FP32] = 4e11, d.peak_flops[XF_COMPUTE_INT8] = 3e12;
    cost_op gemm, norm;
    memset(&gemm, 0, sizeof gemm);
    gemm.kind = OP_QKV, gemm.phase = XF_PREFILL, gemm.compute = XF_COMPUTE_FP32;
    norm = gemm;
    norm.kind = OP_ATTN_NORM;
    const int vnni_only = xk_a8_prefill(xk_isa_best()) && !xk_a8_amx();
    cr_log_info("int8 projections here: %s", vnni_only ? "AVX512-VNNI" : xk_a8_amx() ? "AMX tiles (4+ tokens)" : "no VNNI");
    if (vnni_only) cr_assert_eq(runner_cpu_op_compute(&c, &w, &gemm, &d, 1), XF_COMPUTE_INT8);
    if (!xk_a8_prefill(xk_isa_best())) cr_assert_eq(runner_cpu_op_compute(&c, &w, &gemm, &d, 1), XF_COMPUTE_FP32);
    cr_assert_eq(runner_cpu_op_compute(&c, &w, &norm, &d, 1), XF_COMPUTE_FP32);
    workload wf = w;
    wf.wdtype = XF_FP32;
    cr_assert_eq(runner_cpu_op_compute(&c, &wf, &gemm, &d, 1), XF_COMPUTE_FP32);
    if (vnni_only) {
        model_config moe = c;
        moe.n_experts = 4, moe.experts_per_tok = 2;
        cr_assert_eq(runner_cpu_op_compute(&moe, &w, &gemm, &d, 1), XF_COMPUTE_FP32);
        d.peak_flops[XF_COMPUTE_INT8] = 0;
        cr_assert_eq(runner_cpu_op_compute(&c, &w, &gemm, &d, 1), XF_COMPUTE_FP32, "no int8 peak: fp32, as before");
    }
}
