/* bench_concurrent: what the concurrent ceilings cost (issue 17: at most 2% of the run). The same
 * run (a model, batch 1, prompt, gen, 2 threads, 5 repetitions after 1 warm-up) with the pulses
 * and without (--no-concurrent), interleaved `rounds` times, side by side in one process:
 *   - the pulses' own wall time over the repetitions' wall time (record concurrent.pulse_s /
 *     run_s), the figure the target is about;
 *   - the median ratio of the whole runner_run wall time with / without (it also counts the
 *     pulser's setup and the bootstrap), noisier on a shared machine.
 * Uses the machine file ($XFPROF_MACHINE_FILE or ~/.cache/xfprof/machine.json; without one the
 * runner measures quick ceilings in every run). Usage: bench_concurrent [model] [prompt] [gen]
 * [rounds] (default stories15m 64 32 5). stories15m's weights fit the LLC (in-cache pulses); a model
 * whose weights do not (stories110m on a 260 MiB LLC) takes DRAM pulses, which flush their array
 * first: `bench_concurrent stories110m 64 12 5` measures those (docs/verdicts.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyzers/stats.h"
#include "probes/ceilings.h"
#include "reference_model/config.h"
#include "runner/runner.h"
#include "bench_util.h"

static double now(void) { return bench_now_s(); }

static int run_once(const run_plan *pl, double *wall, double *pulse_share, int *contended) {
    record r;
    record_init(&r, "run");
    double t0 = now();
    xf_status s = runner_run(pl, &r, NULL);
    *wall = now() - t0;
    if (s != XF_OK) {
        fprintf(stderr, "bench_concurrent: %s\n", xf_error_msg());
        record_free(&r);
        return 1;
    }
    const record_concurrent *cc = &r.points[0].concurrent;
    *pulse_share = cc->run_s > 0 ? cc->pulse_s / cc->run_s : 0;
    *contended = cc->contended;
    record_free(&r);
    return 0;
}

int main(int argc, char **argv) {
    ceilings_env_reexec(argc, argv); /* as xfprof does: OpenMP's bounded spin, OpenBLAS's kernels */
    const char *model = argc > 1 ? argv[1] : "stories15m";
    int64_t prompt[1] = {argc > 2 ? atoll(argv[2]) : 64}, gen[1] = {argc > 3 ? atoll(argv[3]) : 32}, batch[1] = {1};
    int rounds = argc > 4 ? atoi(argv[4]) : 5;
    if (rounds < 1 || rounds > 100 || prompt[0] < 1 || gen[0] < 1) {
        fprintf(stderr, "usage: bench_concurrent [model] [prompt >= 1] [gen >= 1] [rounds 1..100]\n");
        return 2;
    }
    model_config cfg;
    if (config_resolve(model, &cfg) != XF_OK) {
        fprintf(stderr, "bench_concurrent: %s\n", xf_error_msg());
        return 2;
    }
    run_plan pl;
    run_plan_default(&pl, &cfg);
    pl.batch = batch;
    pl.prompt = prompt;
    pl.gen = gen;
    pl.n_batch = pl.n_prompt = pl.n_gen = 1;
    pl.threads = 2;
    pl.reps = 5;
    pl.warmup = 1;
    pl.perf = 0;
    pl.quiet = 1;
    double *on = calloc((size_t)rounds, sizeof *on), *off = calloc((size_t)rounds, sizeof *off);
    double *share = calloc((size_t)rounds, sizeof *share), *ratio = calloc((size_t)rounds, sizeof *ratio);
    if (!on || !off || !share || !ratio) return 1;
    int n_contended = 0;
    for (int k = 0; k < rounds; k++) { /* alternate which goes first, so drift hits both alike */
        int c = 0;
        double dummy;
        for (int j = 0; j < 2; j++) {
            int with = (j == 0) == (k % 2 == 0);
            pl.concurrent = with;
            if (run_once(&pl, with ? &on[k] : &off[k], with ? &share[k] : &dummy, with ? &c : &(int){0})) return 1;
        }
        n_contended += c;
        ratio[k] = on[k] / off[k];
        printf("round %d: with pulses %.3f s, without %.3f s (ratio %.3f); pulses %.2f%% of the repetitions%s\n", k + 1, on[k],
               off[k], ratio[k], 100 * share[k], c ? " (machine contended)" : "");
    }
    printf("%s, prompt %lld, gen %lld, 2 threads, 5+1 reps, %d rounds:\n", cfg.name, (long long)prompt[0], (long long)gen[0], rounds);
    printf("  pulse overhead (pulse time / repetitions' time), median: %.2f%% (target <= 2%%)\n",
           100 * stats_median(share, (size_t)rounds));
    printf("  whole run with / without pulses (setup and bootstrap included), median ratio: %.3f\n",
           stats_median(ratio, (size_t)rounds));
    printf("  rounds the run said the machine was contended: %d of %d\n", n_contended, rounds);
    /* a pulse alone: its wall time against the budget it was given (in-cache, 2 threads) */
    for (int ic = 1; ic >= 0; ic--) {
        ceilings_pulser *ps;
        if (ceilings_pulser_init(2, ic, 20e9, 150e9, RUNNER_PULSE_MAX_S, &ps) != XF_OK) return 1;
        const double budgets[] = {3e-4, 1e-3, 3e-3, 1e-2};
        for (int b = 0; b < 4; b++) {
            double t[20];
            ceilings_pulse pu;
            for (int k = 0; k < 20; k++) {
                if (ceilings_pulser_run(ps, budgets[b], &pu) != XF_OK) return 1;
                t[k] = pu.seconds;
            }
            printf("  %s pulse, budget %.1f ms: median %.2f ms\n", ic ? "in-cache" : "DRAM", budgets[b] * 1e3,
                   stats_median(t, 20) * 1e3);
        }
        ceilings_pulser_free(ps);
    }
    free(on);
    free(off);
    free(share);
    free(ratio);
    return 0;
}
