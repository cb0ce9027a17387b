/* Sweep grid parsing: every list and range form, malformed ones, the combinations and their keys.
 * The grid code lives in cli/ (the xfprof_cli library the binary and this suite link). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---------- --shard i/n and the grid identity (cli/sweep_shard.h) ---------- */

#include "cli/sweep_line.h"
#include "cli/sweep_shard.h"

Test(sweep, shard_parse_bounds) {
    sweep_shard sh;
    cr_assert_eq(sweep_shard_parse("--shard", "2/3", &sh), XF_OK, "%s", xf_error_msg());
    cr_assert(sh.index == 2 && sh.count == 3);
    cr_assert_eq(sweep_shard_parse("--shard", "1/1", &sh), XF_OK);
    cr_assert_eq(sweep_shard_parse("--shard", "10000/10000", &sh), XF_OK);
    const char *bad[] = {"0/3", "4/3", "3", "/3", "1/", "1/0", "1/10001", "a/b", "1/3/4", "-1/3", "", "1 /3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(sweep_shard_parse("--shard", bad[i], &sh), XF_EINVAL, "'%s' accepted", bad[i]);
        cr_assert(strstr(xf_error_msg(), "--shard"), "'%s': message does not name the flag: %s", bad[i], xf_error_msg());
    }
}

/* For every n, the n shards of a grid are disjoint and cover it, each in grid order. */
Test(sweep, shards_partition_the_grid) {
    cr_assert_eq(sweep_grid_set(&g, "--batch", "1,2,4"), XF_OK);
    cr_assert_eq(sweep_grid_set(&g, "--prompt", "16,32"), XF_OK);
    cr_assert_eq(sweep_grid_set(&g, "--gen", "0,4"), XF_OK);
    g.predict = 1;
    sweep_param *all;
    int64_t n;
    cr_assert_eq(sweep_grid_expand(&g, &all, &n), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(n, 12);
    for (int64_t count = 1; count <= 15; count++) {
        int seen[12] = {0};
        for (int64_t i = 1; i <= count; i++) {
            sweep_param *ps = malloc((size_t)n * sizeof *ps);
            memcpy(ps, all, (size_t)n * sizeof *ps);
            int64_t m = n, *gidx;
            sweep_shard sh = {i, count};
            cr_assert_eq(sweep_shard_select(&sh, ps, &m, &gidx), XF_OK);
            for (int64_t j = 0; j < m; j++) {
                cr_assert_eq(gidx[j] % count, i - 1);
                cr_assert(j == 0 || gidx[j] > gidx[j - 1], "shard %lld/%lld not in grid order", (long long)i, (long long)count);
                cr_assert_str_eq(ps[j].key, all[gidx[j]].key);
                seen[gidx[j]]++;
            }
            free(gidx);
            free(ps);
        }
        for (int k = 0; k < 12; k++) cr_assert_eq(seen[k], 1, "%lld shards: point %d run %d times", (long long)count, k, seen[k]);
    }
    free(all);
}

Test(sweep, grid_meta_hash_axes_and_duplicates) {
    cr_assert_eq(sweep_grid_set(&g, "--batch", "1,2"), XF_OK);
    cr_assert_eq(sweep_grid_set(&g, "--gen", "0,8"), XF_OK);
    g.predict = 1;
    sweep_param *ps;
    int64_t n;
    cr_assert_eq(sweep_grid_expand(&g, &ps, &n), XF_OK);
    sweep_meta m;
    cr_assert_eq(sweep_meta_build(ps, n, &m), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(m.n_points, 4);
    const char *keys[4];
    for (int i = 0; i < 4; i++) keys[i] = ps[i].key;
    cr_assert_eq(m.hash, sweep_keys_hash(keys, 4));
    const char *swapped[4] = {keys[1], keys[0], keys[2], keys[3]}; /* another order: another grid */
    cr_assert_neq(m.hash, sweep_keys_hash(swapped, 4));
    cr_assert(strstr(m.axes, "\"batch\":[\"1\",\"2\"]") && strstr(m.axes, "\"gen\":[\"0\",\"8\"]"), "%s", m.axes);
    char v[64];
    cr_assert_eq(sweep_key_field(ps[3].key, "batch", v, sizeof v), 0);
    cr_assert_str_eq(v, "2");
    cr_assert_eq(sweep_key_field(ps[3].key, "model", v, sizeof v), 0);
    cr_assert_str_eq(v, "stories15m");
    cr_assert_eq(sweep_key_field(ps[3].key, "nope", v, sizeof v), -1);
    sweep_meta_free(&m);
    memcpy(ps[2].key, ps[0].key, sizeof ps[0].key); /* a point listed twice */
    cr_assert_eq(sweep_meta_build(ps, n, &m), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "twice"), "%s", xf_error_msg());
    free(ps);
}

/* A line made with its place reads back with the same index, shard and grid; the index must be
 * one of the shard's. */
Test(sweep, line_place_round_trip) {
    g.predict = 1;
    sweep_param *ps;
    int64_t n;
    cr_assert_eq(sweep_grid_set(&g, "--batch", "1,2,4"), XF_OK);
    cr_assert_eq(sweep_grid_expand(&g, &ps, &n), XF_OK);
    sweep_meta m;
    cr_assert_eq(sweep_meta_build(ps, n, &m), XF_OK);
    record r;
    record_init(&r, "sweep");
    snprintf(r.created, sizeof r.created, "2026-01-01T00:00:00Z");
    cr_assert_not_null(record_add_point(&r));
    sweep_shard sh = {2, 2};
    sweep_line_place pl = {1, &sh, &m};
    size_t len;
    char *line = sweep_line_make(ps[1].key, &pl, &r, &len);
    cr_assert_not_null(line);
    sweep_line_meta mt;
    cr_assert_eq(sweep_line_parse_meta(line, len, "t", &mt), XF_OK, "%s", xf_error_msg());
    cr_assert(mt.has_place && mt.index == 1 && mt.shard.index == 2 && mt.shard.count == 2 && mt.n_points == 3 && mt.hash == m.hash);
    cr_assert_str_eq(mt.key, ps[1].key);
    cr_assert_str_eq(mt.axes, m.axes);
    sweep_line_meta_free(&mt);
    free(line);
    pl.index = 2; /* 2 mod 2 is 0: shard 1/2's, not 2/2's */
    line = sweep_line_make(ps[2].key, &pl, &r, &len);
    cr_assert_eq(sweep_line_parse_meta(line, len, "t", &mt), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "not one of shard 2/2"), "%s", xf_error_msg());
    sweep_line_meta_free(&mt);
    free(line);
    line = sweep_line_make(ps[0].key, NULL, &r, &len); /* the older form: no place */
    cr_assert_eq(sweep_line_parse_meta(line, len, "t", &mt), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(mt.has_place, 0);
    sweep_line_meta_free(&mt);
    free(line);
    record_free(&r);
    sweep_meta_free(&m);
    free(ps);
}
