/* xfprof sweep: every combination of the list flags, predicted (--predict, the cost model) or
 * measured (each point a run plan for the runner, in process: the code `xfprof run` measures with). Each finished point is appended to a JSONL file at once (one self-contained line, written
 * in one write() and fsync'ed), so an interrupted sweep loses nothing it finished; --resume skips
 * the points already there. The finished sweep is one record of kind "sweep". */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analyzers/predict.h"
#include "analyzers/predict_parallel.h"
#include "args.h"
#include "cli.h"
#include "core/fileio.h"
#include "core/json_util.h"
#include "output.h"
#include "reports/record_json.h"
#include "reference_model/cuda_backend.h"
#include "runner/runner.h"
#include "sweep_grid.h"
#include "signals.h"
#include "probes/timer.h"
#include "sweep_file.h"
#include "sweep_store.h"
#include "sweep_line.h"
#include "sweep_shard.h"

static const char *CMD = "sweep";

static void help(void) {
    printf("Usage: xfprof sweep [--predict] [options]\n\n"
           "Runs every combination of the list flags (as llama-bench does), predicted by the cost model\n"
           "(--predict, no hardware needed) or measured by the reference model (each point measured as\n"
           "'xfprof run' measures it, with -r repetitions after a warm-up).\n\n"
           "  --predict          cost model against a device's roofline instead of measuring\n"
           "  --model LIST       presets or config.json paths (default stories15m)\n"
           "  --device LIST      --predict: device spec names (default h100-sxm); measured: cpu (default) or cuda\n"
           "  --device-file F    a devices file of your own (--predict)\n"
           "  --batch LIST       sequences per step (default 1)\n"
           "  --prompt LIST      prompt tokens per sequence (default 128)\n"
           "  --gen LIST         tokens generated per sequence (default 128; the first by the prefill)\n"
           "  --wdtype LIST      weight dtypes (default bf16 predicted, fp32 measured)\n"
           "  --adtype LIST      activation dtypes (--predict only; default from the weights)\n"
           "  --kvdtype LIST     KV cache dtypes (default: activation dtype predicted, fp32 measured)\n"
           "  --group N          elements per int8/int4 scale (default 128)\n"
           "  --kv-policy LIST   measured: KV manager policies, e.g. reserve,paged:16 (default paged:16)\n"
           "  --threads LIST     measured: CPU threads (default 0 = all)\n"
           "  -r, --reps N       measured repetitions per point after the warm-up (default 5)\n"
           "  --warmup N         measured: warm-up repetitions per point, discarded (default 1); --no-warmup is\n"
           "                     the old spelling of --warmup 0, still accepted\n"
           "  --jsonl FILE       append each finished point to FILE at once (one JSON object per line)\n"
           "  --tp LIST, --pp LIST, --micro-batches N, --gpus N\n"
           "                     --predict: the model split over devices, as xfprof predict (default 1: one device)\n"
           "  --resume           skip the points already in --jsonl FILE (a truncated last line is dropped)\n"
           "  --shard i/n        run shard i of n only: the grid points k (0-based, in the grid's order) with\n"
           "                     k mod n = i - 1, so n shards never overlap or miss a point (Slurm job arrays, CI\n"
           "                     matrices); 'xfprof merge' joins the shards' --jsonl files (docs/cluster.md)\n"
           "%s"
           "  --report FILE      also write the HTML report\n"
           "With -o FILE and no --format the sweep record is written as JSON. A sweep over several models or\n"
           "devices writes one record per model and device: FILE with -MODEL-DEVICE before its extension.\n\n"
           "LIST: comma list and ranges: 1,2,4..64 (doubling) | 128..2048*2 | 0..512+128. All combinations run.\n"
           "Progress (point i of n, elapsed, ETA) goes to stderr when it is a terminal. Ctrl-C or SIGTERM\n"
           "keeps every finished point and exits with status 130 / 143 (a measured point stops after its\n"
           "current repetition and is not kept); rerun the same command with --resume to complete the\n"
           "sweep. A second Ctrl-C stops at once. With JSON output (-o FILE) the points stream through a\n"
           "temporary file in $TMPDIR and memory stays flat however many points; --format table/csv/md,\n"
           "--report and --trace hold every op.\n\n"
           "Example: xfprof sweep --predict --model llama-2-7b --device h100-sxm --batch 1..64 --prompt 128..2048*4 \\\n"
           "           --jsonl sweep.jsonl -o sweep.json && xfprof report sweep.json -o sweep.html\n",
           cli_output_help);
}

/* ---------- one point ---------- */

typedef struct sweep_ctx {
    sweep_grid *g;
    model_config *cfgs;  /* (n_models) */
    device_spec *devs;   /* (n_devices), predict only */
} sweep_ctx;

static xf_status predict_one(sweep_ctx *c, const sweep_param *p, record *out) {
    parallel_plan plan;
    sweep_param_plan(c->g, p, &plan);
    xf_status s = predict_parallel_record(&c->cfgs[p->model], &c->devs[p->device], &p->wl, &plan, 1, out);
    if (s) return s;
    snprintf(out->kind, sizeof out->kind, "sweep");
    return sweep_test_slow_op(out);
}

/* A measured point: a run plan of this one combination, measured in process by the runner (the
 * same code path as `xfprof run`: ceilings, memory gate, probes, warm-up). */
static xf_status run_one(sweep_ctx *c, const sweep_param *p, record *out) {
    record_init(out, "run");
    sweep_grid *g = c->g;
    run_plan pl;
    run_plan_default(&pl, &c->cfgs[p->model]);
    xf_status s = config_validate(&pl.cfg);
    if (s) return s;
    const char *dev = g->devices[p->device];
    if (strcmp(dev, "cpu") != 0) {
        if (cuda_device_parse(dev, &pl.ordinal) != XF_OK)
            return xf_errorf(XF_EINVAL, "--device: '%s' is not cpu, cuda or cuda:N (N a GPU index)", dev);
        pl.cuda = 1;
    }
    int64_t batch = p->wl.batch, prompt = p->wl.prompt, gen = p->wl.gen;
    pl.batch = &batch;
    pl.prompt = &prompt;
    pl.gen = &gen;
    pl.n_batch = pl.n_prompt = pl.n_gen = 1;
    pl.wdtype = p->wl.wdtype;
    pl.kvdtype = p->wl.kvdtype;
    pl.quant_group = p->wl.quant_group > 0 ? p->wl.quant_group : XF_DEFAULT_QUANT_GROUP;
    if (p->threads > 0) pl.threads = p->threads;
    pl.kv_policy = g->policy[p->policy]; /* parsed once, by the grid */
    pl.reps = g->reps;
    pl.warmup = g->warmup;
    pl.quiet = 1; /* the sweep's own progress line stays readable */
    pl.stop = cli_signal_pending; /* Ctrl-C: the repetition finishes, the point is not kept */
    if ((s = runner_run(&pl, out, NULL))) return s;
    /* stopped inside its repetitions (or before it): not a complete point, --resume runs it again */
    if (out->partial) return xf_errorf(XF_EIO, "this point was interrupted: %s", out->partial_reason);
    if (out->n_points != 1) return xf_errorf(XF_EINVAL, "the runner measured %d points for one combination", out->n_points);
    snprintf(out->kind, sizeof out->kind, "sweep");
    return sweep_test_slow_op(out);
}

/* ---------- the command ---------- */

int cmd_sweep(int argc, char **argv) {
    enum { O_PREDICT = 1000, O_MODEL, O_DEVICE, O_DEVFILE, O_BATCH, O_PROMPT, O_GEN, O_WD, O_AD, O_KV, O_GROUP, O_POLICY,
           O_THREADS, O_NOWARM, O_WARMUP, O_JSONL, O_RESUME, O_SHARD, O_FORMAT, O_PERLAYER, O_REPORT, O_TRACE };
    enum { O_TP = 2000, O_PP, O_MICRO, O_GPUS }; /* the split over devices (reference_model/cost_parallel.h) */
    static const struct option opts[] = {
        {"predict", no_argument, 0, O_PREDICT},     {"model", required_argument, 0, O_MODEL},
        {"device", required_argument, 0, O_DEVICE}, {"device-file", required_argument, 0, O_DEVFILE},
        {"batch", required_argument, 0, O_BATCH},   {"prompt", required_argument, 0, O_PROMPT},
        {"gen", required_argument, 0, O_GEN},       {"wdtype", required_argument, 0, O_WD},
        {"adtype", required_argument, 0, O_AD},     {"kvdtype", required_argument, 0, O_KV},
        {"group", required_argument, 0, O_GROUP},   {"kv-policy", required_argument, 0, O_POLICY},
        {"threads", required_argument, 0, O_THREADS}, {"reps", required_argument, 0, 'r'},
        {"no-warmup", no_argument, 0, O_NOWARM},    {"warmup", required_argument, 0, O_WARMUP},    {"jsonl", required_argument, 0, O_JSONL},
        {"resume", no_argument, 0, O_RESUME},       {"format", required_argument, 0, O_FORMAT},
        {"shard", required_argument, 0, O_SHARD},
        {"output", required_argument, 0, 'o'},      {"per-layer", no_argument, 0, O_PERLAYER},
        {"report", required_argument, 0, O_REPORT}, {"trace", required_argument, 0, O_TRACE},
        {"tp", required_argument, 0, O_TP},         {"pp", required_argument, 0, O_PP},
        {"micro-batches", required_argument, 0, O_MICRO}, {"gpus", required_argument, 0, O_GPUS},
        {"help", no_argument, 0, 'h'},              {0, 0, 0, 0}};
    sweep_grid g;
    sweep_grid_init(&g);
    cli_output out = {RENDER_TABLE, NULL, 0, NULL, NULL};
    int format_given = 0, resume = 0, c, rc = CLI_EXIT_OK;
    const char *jsonl = NULL;
    sweep_shard shard = {1, 1}; /* the whole grid */
    int64_t v;
    xf_status s = XF_OK;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hr:o:", opts, NULL)) != -1) {
        const char *flag = NULL;
        switch (c) {
        case 'h': help(); sweep_grid_free(&g); return CLI_EXIT_OK;
        case O_PREDICT: g.predict = 1; break;
        case O_MODEL: flag = "--model"; break;
        case O_DEVICE: flag = "--device"; break;
        case O_BATCH: flag = "--batch"; break;
        case O_PROMPT: flag = "--prompt"; break;
        case O_GEN: flag = "--gen"; break;
        case O_WD: flag = "--wdtype"; break;
        case O_AD: flag = "--adtype"; break;
        case O_KV: flag = "--kvdtype"; break;
        case O_POLICY: flag = "--kv-policy"; break;
        case O_THREADS: flag = "--threads"; break;
        case O_TP: flag = "--tp"; break;
        case O_PP: flag = "--pp"; break;
        case O_MICRO: case O_GPUS:
            if (args_flag_int(c == O_MICRO ? "--micro-batches" : "--gpus", optarg, &v)) goto usage;
            *(c == O_MICRO ? &g.micro_batches : &g.gpus) = (int)v;
            break;
        case O_DEVFILE:
            free(g.device_file);
            g.device_file = strdup(optarg);
            break;
        case O_GROUP:
            if (args_flag_int("--group", optarg, &v)) goto usage;
            g.group = v;
            break;
        case 'r':
            if (args_flag_int("--reps", optarg, &v)) goto usage;
            g.reps = (int)v;
            break;
        case O_NOWARM: g.warmup = 0; break;
        case O_WARMUP:
            if (args_flag_int("--warmup", optarg, &v)) goto usage;
            g.warmup = (int)v;
            break;
        case O_JSONL: jsonl = optarg; break;
        case O_RESUME: resume = 1; break;
        case O_SHARD:
            if (sweep_shard_parse("--shard", optarg, &shard)) goto usage;
            break;
        case O_FORMAT:
            if (cli_output_option(CMD, "format", optarg, &out) < 0) {
                sweep_grid_free(&g);
                return CLI_EXIT_USAGE;
            }
            format_given = 1;
            break;
        case 'o': cli_output_option(CMD, "output", optarg, &out); break;
        case O_PERLAYER: cli_output_option(CMD, "per-layer", NULL, &out); break;
        case O_REPORT: cli_output_option(CMD, "report", optarg, &out); break;
        case O_TRACE: cli_output_option(CMD, "trace", optarg, &out); break;
        case ':': sweep_grid_free(&g); return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: sweep_grid_free(&g); return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
        if (flag && sweep_grid_set(&g, flag, optarg)) goto usage;
    }
    if (optind < argc) {
        sweep_grid_free(&g);
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    }
    if (resume && !jsonl) {
        sweep_grid_free(&g);
        return cli_usage_error(CMD, "--resume needs --jsonl FILE (the file of the interrupted sweep)");
    }
    if (!g.predict && g.n_ad) {
        sweep_grid_free(&g);
        return cli_usage_error(CMD, "--adtype applies to --predict only (the runner computes in its own types)");
    }
    if (g.predict && (g.n_threads || g.n_policies))
        fprintf(stderr, "xfprof %s: note: --threads and --kv-policy apply to measured sweeps; ignored with --predict\n", CMD);
    if (out.path && !format_given) out.format = RENDER_JSON;

    sweep_param *ps = NULL;
    int64_t n = 0;
    if ((s = sweep_grid_expand(&g, &ps, &n))) {
        sweep_grid_free(&g);
        return cli_fail(CMD, s);
    }
    sweep_meta meta; /* the whole grid's identity, in every JSONL line */
    int64_t *gidx = NULL; /* (n) each kept point's index in the whole grid */
    if ((s = sweep_shard_apply(&shard, ps, &n, &meta, &gidx))) {
        free(ps);
        sweep_grid_free(&g);
        return cli_fail(CMD, s);
    }
    sweep_ctx ctx = {&g, NULL, NULL};
    sweep_store store;
    memset(&store, 0, sizeof store);
    store.spool = -1;
    record cur; /* the point being run */
    record_init(&cur, "sweep");
    unsigned char *done = calloc((size_t)n, 1);
    ctx.cfgs = calloc((size_t)g.n_models, sizeof *ctx.cfgs);
    ctx.devs = calloc((size_t)g.n_devices, sizeof *ctx.devs);
    int fd = -1;
    off_t good = 0;
    int64_t n_resumed = 0, n_done = 0;
    if (!done || !ctx.cfgs || !ctx.devs) {
        s = xf_errorf(XF_ENOMEM, "out of memory for %lld points", (long long)n);
        goto fail;
    }
    for (int i = 0; i < g.n_models; i++)
        if ((s = config_resolve(g.models[i], &ctx.cfgs[i]))) goto fail;
    for (int i = 0; g.predict && i < g.n_devices; i++)
        if ((s = device_lookup(g.devices[i], g.device_file, &ctx.devs[i]))) goto fail;
    /* JSON out: points stream through the store's spool and memory stays flat; a text rendering,
     * --report or --trace need every op in memory. */
    int full = out.format != RENDER_JSON || out.report || out.trace;
    const char *tmpdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if ((s = sweep_store_init(&store, ps, n, g.n_devices, full, tmpdir, out.path))) goto fail;
    if (jsonl) {
        fd = open(jsonl, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) {
            s = xf_errorf(XF_EIO, "cannot open %s: %s", jsonl, strerror(errno));
            goto fail;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            s = xf_errorf(XF_EIO, "%s is in use by another sweep (locked)", jsonl);
            goto fail;
        }
        struct stat st;
        if (fstat(fd, &st) != 0) {
            s = xf_errorf(XF_EIO, "cannot stat %s: %s", jsonl, strerror(errno));
            goto fail;
        }
        if (resume) {
            if ((s = sweep_resume_load(fd, jsonl, ps, n, &store, done, &n_resumed, &good))) goto fail;
            fprintf(stderr, "xfprof %s: resuming: %lld of %lld points already in %s\n", CMD, (long long)n_resumed, (long long)n, jsonl);
        } else if (st.st_size > 0) {
            s = xf_errorf(XF_EINVAL, "%s already holds points: add --resume to continue that sweep, or remove the file", jsonl);
            goto fail;
        }
    }
    cli_signals_install();
    int tty = isatty(STDERR_FILENO);
    double t0 = timer_now_s();
    int64_t todo = n - n_resumed, finished = 0;
    for (int64_t i = 0; i < n && !cli_signal_pending(); i++) {
        if (done[i]) continue;
        if (tty) sweep_progress(n_resumed + finished + 1, n, timer_now_s() - t0, finished, todo);
        record_free(&cur);
        s = g.predict ? predict_one(&ctx, &ps[i], &cur) : run_one(&ctx, &ps[i], &cur);
        if (s && cli_signal_pending()) { /* Ctrl-C inside the point: it is lost, the others are kept */
            s = XF_OK;
            break;
        }
        if (s) {
            if (tty) fprintf(stderr, "\r\033[K");
            xf_error_prefix(s, "point %lld (%s): ", (long long)i + 1, ps[i].key);
            goto fail;
        }
        if (fd >= 0) {
            size_t len;
            sweep_line_place place = {gidx[i], &shard, &meta};
            char *line = sweep_line_make(ps[i].key, &place, &cur, &len);
            if (!line) {
                s = xf_errorf(XF_ENOMEM, "out of memory writing a sweep line");
                goto fail;
            }
            s = sweep_append_line(fd, jsonl, line, len, &good);
            free(line);
            if (s) goto fail;
        }
        if ((s = sweep_store_put(&store, ps, i, &cur))) goto fail;
        done[i] = 1;
        finished++;
    }
    if (tty) fprintf(stderr, "\r\033[K");
    for (int64_t i = 0; i < n; i++) n_done += done[i];
    if (cli_signal_pending()) {
        fprintf(stderr, "xfprof %s: interrupted by %s after %lld of %lld points%s%s%s\n", CMD, cli_signal_name(cli_signal_pending()),
                (long long)n_done, (long long)n, jsonl ? "; they are in " : " (no --jsonl: nothing kept)", jsonl ? jsonl : "",
                jsonl ? ": rerun with --resume to finish" : "");
        rc = 128 + cli_signal_pending();
        goto cleanup;
    }
    /* One record per (model, device), with the advice of what it found. */
    sweep_writer w = {CMD, out, full, &store};
    rc = sweep_write_records(&w, ps, done, g.models, g.n_models, g.devices, g.n_devices, &shard);
    goto cleanup;
usage:
    rc = cli_usage_error(CMD, "%s", xf_error_msg());
    sweep_grid_free(&g);
    return rc;
fail:
    rc = cli_fail(CMD, s);
cleanup:
    if (fd >= 0) close(fd);
    record_free(&cur);
    sweep_store_free(&store);
    free(done);
    free(ctx.cfgs);
    free(ctx.devs);
    free(ps);
    free(gidx);
    sweep_meta_free(&meta);
    sweep_grid_free(&g);
    return rc;
}
