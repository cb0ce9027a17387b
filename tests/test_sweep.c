/* Sweep grid parsing: every list and range form, malformed ones, the combinations and their keys.
 * The grid code lives in cli/ (the xfprof_cli library the binary and this suite link). */
#include <criterion/criterion.h>
#include <string.h>

#include "cli/args.h"
#include "cli/sweep_grid.h"

static sweep_grid g;

static void init(void) { sweep_grid_init(&g); }
static void fini(void) { sweep_grid_free(&g); }

TestSuite(sweep, .init = init, .fini = fini);

Test(sweep, list_and_range_forms) {
    cr_assert_eq(sweep_grid_set(&g, "--batch", "1,2,4..64"), XF_OK, "%s", xf_error_msg());
    /* 1, 2, then 4..64 doubling: 4 8 16 32 64 */
    int64_t want_b[] = {1, 2, 4, 8, 16, 32, 64};
    cr_assert_eq(g.n_batch, 7);
    for (int i = 0; i < 7; i++) cr_assert_eq(g.batch[i], want_b[i]);
    cr_assert_eq(sweep_grid_set(&g, "--prompt", "128..2048*2"), XF_OK);
    /* 128 256 512 1024 2048 */
    cr_assert_eq(g.n_prompt, 5);
    cr_assert_eq(g.prompt[4], 2048);
    cr_assert_eq(sweep_grid_set(&g, "--gen", "0..512+128"), XF_OK);
    /* 0 128 256 384 512 */
    cr_assert_eq(g.n_gen, 5);
    cr_assert_eq(g.gen[3], 384);
    cr_assert_eq(sweep_grid_set(&g, "--prompt", "100..1000*3"), XF_OK);
    /* 100 300 900 (2700 > 1000 stops) */
    cr_assert_eq(g.n_prompt, 3);
    cr_assert_eq(g.prompt[2], 900);
    cr_assert_eq(sweep_grid_set(&g, "--threads", "1,2"), XF_OK);
    cr_assert_eq(g.n_threads, 2);
    cr_assert_eq(sweep_grid_set(&g, "--wdtype", "fp32,bf16,int8"), XF_OK);
    cr_assert_eq(g.n_wd, 3);
    cr_assert_eq(g.wd[2], XF_INT8);
    cr_assert_eq(sweep_grid_set(&g, "--kvdtype", "fp16"), XF_OK);
    cr_assert_eq(g.kv[0], XF_FP16);
    cr_assert_eq(sweep_grid_set(&g, "--kv-policy", "reserve,paged:16,paged"), XF_OK);
    cr_assert_eq(g.n_policies, 3);
    cr_assert_str_eq(g.policies[1], "paged:16");
    cr_assert_str_eq(g.policies[2], "paged:16"); /* canonical name of "paged" */
    cr_assert_eq(sweep_grid_set(&g, "--model", "stories15m,stories110m"), XF_OK);
    cr_assert_eq(g.n_models, 2);
    cr_assert_str_eq(g.models[1], "stories110m");
}

Test(sweep, malformed_values_are_refused_and_named) {
    static const struct {
        const char *flag, *value, *part;
    } bad[] = {
        {"--batch", "", "--batch"},          {"--batch", "1,,2", "empty"},       {"--batch", "0", "out of range"},
        {"--batch", "4..1", "goes down"},    {"--batch", "1..", "malformed"},    {"--batch", "..8", "malformed"},
        {"--batch", "1..64*1", "factor"},    {"--batch", "a,b", "not a whole"},  {"--prompt", "0..512+128", "out of range"},
        {"--gen", "-1", "out of range"},     {"--threads", "1.5", "not a whole"}, {"--wdtype", "int3", "int3"},
        {"--wdtype", "bf16,", "empty"},      {"--kv-policy", "paged:0", "paged"}, {"--kv-policy", "lru", "lru"},
        {"--model", "a,,b", "empty"},        {"--bogus", "1", "unknown"},
    };
    cr_assert_eq(sweep_grid_set(&g, "--batch", "8"), XF_OK);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_neq(sweep_grid_set(&g, bad[i].flag, bad[i].value), XF_OK, "%s %s was accepted", bad[i].flag, bad[i].value);
        cr_assert(strstr(xf_error_msg(), bad[i].part), "%s %s: message '%s' lacks '%s'", bad[i].flag, bad[i].value,
                  xf_error_msg(), bad[i].part);
    }
    /* the earlier value survives a refused one */
    cr_assert_eq(g.n_batch, 1);
    cr_assert_eq(g.batch[0], 8);
}

Test(sweep, all_combinations_with_unique_keys) {
    g.predict = 1;
    cr_assert_eq(sweep_grid_set(&g, "--batch", "1..8"), XF_OK);          /* 4 */
    cr_assert_eq(sweep_grid_set(&g, "--prompt", "64,128"), XF_OK);      /* 2 */
    cr_assert_eq(sweep_grid_set(&g, "--gen", "0,16"), XF_OK);           /* 2 */
    cr_assert_eq(sweep_grid_set(&g, "--wdtype", "bf16,int8"), XF_OK);   /* 2 */
    cr_assert_eq(sweep_grid_set(&g, "--threads", "1,2"), XF_OK);        /* predict: dropped */
    cr_assert_eq(sweep_grid_set(&g, "--model", "stories15m,stories110m"), XF_OK); /* 2 */
    sweep_param *ps;
    int64_t n;
    cr_assert_eq(sweep_grid_expand(&g, &ps, &n), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(n, 4 * 2 * 2 * 2 * 2); /* 64: threads do not multiply a prediction */
    /* batch varies fastest */
    cr_assert_eq(ps[0].wl.batch, 1);
    cr_assert_eq(ps[1].wl.batch, 2);
    cr_assert_eq(ps[3].wl.batch, 8);
    cr_assert_eq(ps[4].wl.gen, 16);
    cr_assert_str_eq(ps[0].key, "mode=predict;model=stories15m;device=h100-sxm;batch=1;prompt=64;gen=0;wdtype=bf16;adtype=bf16;"
                                "kvdtype=bf16;group=0");
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i + 1; j < n; j++) cr_assert(strcmp(ps[i].key, ps[j].key) != 0, "duplicate key %s", ps[i].key);
    free(ps);
}

Test(sweep, measured_keys_carry_run_settings) {
    cr_assert_eq(sweep_grid_set(&g, "--threads", "1,2"), XF_OK);
    cr_assert_eq(sweep_grid_set(&g, "--kv-policy", "reserve,paged:16"), XF_OK);
    g.reps = 3;
    g.warmup = 0;
    sweep_param *ps;
    int64_t n;
    cr_assert_eq(sweep_grid_expand(&g, &ps, &n), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(n, 4);
    cr_assert(strstr(ps[0].key, "mode=run;") && strstr(ps[0].key, "device=cpu;") &&
                  strstr(ps[0].key, "wdtype=fp32;") && strstr(ps[0].key, ";threads=1;kv_policy=reserve;reps=3;warmup=0"),
              "%s", ps[0].key);
    free(ps);
}

Test(sweep, bad_names_fail_before_running) {
    g.predict = 1;
    sweep_param *ps;
    int64_t n;
    cr_assert_eq(sweep_grid_set(&g, "--model", "stories15m,no-such-model"), XF_OK);
    cr_assert_neq(sweep_grid_expand(&g, &ps, &n), XF_OK);
    cr_assert(strstr(xf_error_msg(), "no-such-model"), "%s", xf_error_msg());
    cr_assert_eq(sweep_grid_set(&g, "--model", "stories15m"), XF_OK);
    cr_assert_eq(sweep_grid_set(&g, "--device", "h100-sxm,tpu-v9"), XF_OK);
    cr_assert_neq(sweep_grid_expand(&g, &ps, &n), XF_OK);
    cr_assert(strstr(xf_error_msg(), "tpu-v9"), "%s", xf_error_msg());
    /* too many combinations */
    cr_assert_eq(sweep_grid_set(&g, "--device", "h100-sxm"), XF_OK);
    cr_assert_eq(sweep_grid_set(&g, "--batch", "1..4096+1"), XF_OK);   /* 4096 */
    cr_assert_eq(sweep_grid_set(&g, "--prompt", "1..4096+1"), XF_OK);  /* x 4096 */
    cr_assert_neq(sweep_grid_expand(&g, &ps, &n), XF_OK);
    cr_assert(strstr(xf_error_msg(), "more than 100000"), "%s", xf_error_msg());
}
