/* xfprof run: parses and validates the options into a run plan, calls the runner (runner/runner.h:
 * the reference model op by op under the probes, against this machine's measured ceilings; on
 * --device cuda[:N] the CUDA backend with CUPTI, docs/cuda.md), writes the outputs. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "core/limits.h"
#include "cuda_cli.h"
#include "output.h"
#include "reference_model/config.h"
#include "reference_model/cuda_backend.h"
#include "run_callgrind.h"
#include "run_tokens.h"
#include "run_tp.h"
#include "runner/runner.h"
#include "signals.h"
#include "sweep_file.h"

static const char *CMD = "run";

/* The embedded default: small enough to run in a few seconds on 2 cores. */
#define DEF_MODEL "stories15m"
#define DEF_BATCH "1"
#define DEF_PROMPT "64"
#define DEF_GEN "32"

static void help(void) {
    printf("Usage: xfprof run [options]\n\n"
           "Runs the reference LLaMA-style decoder for real (prefill, then gen - 1 decode steps), times every op of\n"
           "every layer, and sets each against this machine's measured ceilings: measured time (median and\n"
           "spread over the repetitions), FLOPs, bytes, intensity, utilization of each ceiling, the measured\n"
           "class, the predicted time and measured/predicted; then TTFT, TPOT, tokens/s and peak memory.\n"
           "With no options: %s, batch %s, prompt %s, gen %s on the CPU (a shorter request than predict's and\n"
           "sweep's default 128 + 128, so that the embedded model runs in seconds).\n\n"
           "  --model M         preset name (xfprof models) or a Hugging Face config.json (default %s, or the\n"
           "                    --weights folder's config.json)\n"
           "  --weights DIR     real weights: a local Hugging Face folder (config.json + *.safetensors);\n"
           "                    default: random weights from --seed at the config's shapes\n"
           "  --batch LIST      sequences run together (default %s)\n"
           "  --prompt LIST     prompt tokens per sequence (default %s)\n"
           "  --gen LIST        tokens generated per sequence (default %s): the prefill samples the first (TTFT\n"
           "                    covers it), gen - 1 decode steps the rest, as max_new_tokens and llama-bench -n\n"
           "  --prompt-ids IDS  the prompt as token ids (1,15043,29892), the same for every sequence\n"
           "  --wdtype T        weights: fp32 (default; bf16 on cuda), bf16 or int8 (per-group fp32 scales; the\n"
           "                    input is quantized to int8 per group, max|x|/127: record env int8_inputs)\n"
           "  --bf16-inputs M   bf16 weights on the CPU: exact3 (default: the fp32 input exactly; on AMX as three\n"
           "                    bf16 parts, 3x the op's FLOPs) or rounded (the input rounded once to bf16 in every\n"
           "                    phase: one AMX pass; error <= 2^-8 of each input element): record env bf16_inputs\n"
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
           "  --tp N            tensor parallel over N MPI ranks, one shard each (Megatron-LM's splits: heads,\n"
           "                    d_ff columns and rows; embedding and lm_head whole), an all-reduce after o_proj and\n"
           "                    after down timed as one op per layer and set against the link measured by 'mpirun\n"
           "                    -np N xfprof machine --comm'; start it as mpirun -np N xfprof run --tp N (as root\n"
           "                    --allow-run-as-root, on fewer cores --oversubscribe); rank 0 writes the record, every\n"
           "                    rank's samples in it; random weights or --weights (each rank reads only its\n"
           "                    blocks), fp32, bf16 or int8 (each rank quantizes its block: --group must divide\n"
           "                    the shard's o_proj and down columns), biases (o_proj/down added once, on rank 0,\n"
           "                    before the all-reduce); MoE with every expert split by columns like the FFN (the\n"
           "                    router whole on every rank); MLA with q_a/kv_a whole on every rank, q_b/kv_b by\n"
           "                    heads, o_proj's columns of them, the latent KV cache replicated on every rank.\n"
           "                    --device cuda: NCCL (libnccl.so.2 at run time), local rank i on GPU i (compiled,\n"
           "                    host logic tested, not yet run on a GPU)\n"
           "  --pp N            refused: pipeline stages are not measured by run (predict --pp prices them)\n"
           "  --comm-timeout S  --tp: a collective that takes longer (a rank died or hangs) ends every rank, no\n"
           "                    record written (default 60)\n"
           "  --mla FORM        latent attention (deepseek_v3): naive (default; kv_b decompresses every cached\n"
           "                    latent into each head's K and V, as transformers runs it) or absorbed (W_UK folded\n"
           "                    into the query, W_UV into the output, attention over the cached latents; CPU\n"
           "                    only); the record's model.mla.form says which ran, its ops are predict --mla's\n"
           "  --no-probes       no per-op timing (whole-step times only): the probe-overhead baseline\n"
           "  --no-perf         do not open hardware counters\n"
           "  --callgrind       run under valgrind's callgrind (started by xfprof itself; --threads 1): exact per-op\n"
           "                    instruction counts (counter \"instructions\", for compare --metric instructions),\n"
           "                    identical run to run whatever the machine's load; times are not comparable\n"
           "  --callgrind-cache --callgrind with its cache simulation: also simulated L1 and last-level misses\n"
           "                    (counters sim_l1_misses, sim_ll_misses); slower still (docs/ci.md)\n"
           "  --no-concurrent   no concurrent ceilings: by default short read and FMA pulses (about 0.6%% of a\n"
           "                    repetition each) run before, between and after the repetitions, each\n"
           "                    repetition is judged against the ceilings measured around it, and the notes\n"
           "                    say when the machine was contended (a ceiling more than 15%% below the machine\n"
           "                    file's, or the model's threads waiting for a CPU more than 15%% of the time);\n"
           "                    the record keeps both utilizations (CPU only)\n"
           "%s"
           "  --report FILE     also write the HTML report\n"
           "  --trace FILE      also write the Chrome trace (Perfetto) of the measured steps\n"
           "  --save-tokens F   also write every sequence's prompt and generated ids, one line per step (JSON Lines,\n"
           "                    format xfprof-tokens), from one more untimed repetition\n"
           "  --save-logits     with --save-tokens: each step's last-position logits too (vocab floats per sequence)\n"
           "  -o FILE saves the record (JSON) there; stdout still gets the --format rendering.\n\n"
           "Ctrl-C (or SIGTERM) once: the repetition being measured finishes, what is complete is written and\n"
           "the record is marked partial (\"partial\": true and why), exit status 130 (143); a second Ctrl-C\n"
           "stops at once and writes nothing.\n\n"
           "Ceilings: the machine file ($XFPROF_MACHINE_FILE or ~/.cache/xfprof/machine.json, made by 'xfprof\n"
           "machine'); without one a quick measurement runs first. A model whose weights fit in the last-level\n"
           "cache is judged against the in-cache bandwidth.\n",
           DEF_MODEL, DEF_BATCH, DEF_PROMPT, DEF_GEN, DEF_MODEL, DEF_BATCH, DEF_PROMPT, DEF_GEN, cli_output_help);
}

/* The prompt as token ids ("1,15043,29892"), each below the vocabulary. *ids: the caller frees. */
static int parse_prompt_ids(const char *s, const model_config *cfg, int32_t **ids, int64_t *n_ids) {
    int64_t *v = NULL;
    int n = 0;
    if (args_int_list("--prompt-ids", s, 0, cfg->vocab - 1, &v, &n) != XF_OK)
        return cli_usage_error(CMD, "%s (%s has a vocabulary of %lld)", xf_error_msg(), cfg->name, (long long)cfg->vocab);
    *ids = malloc((size_t)n * sizeof **ids);
    if (!*ids) {
        free(v);
        return cli_fail(CMD, xf_errorf(XF_ENOMEM, "out of memory"));
    }
    for (int i = 0; i < n; i++) (*ids)[i] = (int32_t)v[i];
    *n_ids = n;
    free(v);
    return CLI_EXIT_OK;
}

int cmd_run(int argc, char **argv) {
    enum {
        O_MODEL = 1000, O_WEIGHTS, O_BATCH, O_PROMPT, O_GEN, O_PIDS, O_WD, O_KV, O_GROUP, O_THREADS, O_REPS, O_WARMUP,
        O_SEED, O_POLICY, O_ALLOC, O_DEVICE, O_NOPROBES, O_NOPERF, O_FORMAT, O_PERLAYER, O_REPORT, O_TRACE, O_CUPTI, O_GRAPH,
        O_SAVE_TOKENS, O_SAVE_LOGITS, O_CALLGRIND, O_CALLGRIND_CACHE, O_NOCONC
    };
    enum { O_TP = 2000, O_COMM_TIMEOUT, O_PP }; /* a split over MPI ranks (cli/run_tp.c) */
    enum { O_MLA = 2100 };                     /* latent attention's form */
    enum { O_BF16_INPUTS = 3000 };             /* bf16 weights' input mode (reference_model/backend.h) */
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
        {"save-tokens", required_argument, 0, O_SAVE_TOKENS}, {"save-logits", no_argument, 0, O_SAVE_LOGITS},
        {"tp", required_argument, 0, O_TP},           {"comm-timeout", required_argument, 0, O_COMM_TIMEOUT},
        {"callgrind", no_argument, 0, O_CALLGRIND},   {"callgrind-cache", no_argument, 0, O_CALLGRIND_CACHE},
        {"no-concurrent", no_argument, 0, O_NOCONC}, {"pp", required_argument, 0, O_PP},
        {"mla", required_argument, 0, O_MLA},
        {"bf16-inputs", required_argument, 0, O_BF16_INPUTS},
        {0, 0, 0, 0}};
    int tp = 1;
    double comm_timeout = 60;
    const char *model_s = NULL, *weights = NULL, *batch_s = DEF_BATCH, *prompt_s = NULL, *gen_s = DEF_GEN;
    const char *pids_s = NULL, *device = "cpu", *tokens_path = NULL;
    int save_logits = 0, threads_given = 0, mla_form = -1;
    run_plan pl;
    run_plan_default(&pl, NULL);
    int64_t v;
    int wd_given = 0;
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
            s = dtype_parse(optarg, &pl.wdtype);
            wd_given = 1;
            if (s == XF_OK && pl.wdtype != XF_FP32 && pl.wdtype != XF_BF16 && pl.wdtype != XF_INT8)
                return cli_usage_error(CMD, "--wdtype: the CPU model runs fp32, bf16 or int8 weights, not %s", optarg);
            break;
        case O_KV:
            s = dtype_parse(optarg, &pl.kvdtype);
            if (s == XF_OK && pl.kvdtype != XF_FP32 && pl.kvdtype != XF_FP16 && pl.kvdtype != XF_BF16)
                return cli_usage_error(CMD, "--kvdtype: the KV cache holds fp32, fp16 or bf16, not %s", optarg);
            break;
        case O_BF16_INPUTS:
            if (!strcmp(optarg, "exact3")) pl.bf16_inputs = BACKEND_BF16_EXACT3;
            else if (!strcmp(optarg, "rounded")) pl.bf16_inputs = BACKEND_BF16_ROUNDED;
            else return cli_usage_error(CMD, "--bf16-inputs: '%s' is not exact3 or rounded", optarg);
            break;
        case O_GROUP: if (!(s = args_flag_int("--group", optarg, &v))) pl.quant_group = (int)v; break;
        case O_THREADS: if (!(s = args_flag_int("--threads", optarg, &v))) pl.threads = (int)v; threads_given = 1; break;
        case O_REPS: if (!(s = args_flag_int("--reps", optarg, &v))) pl.reps = (int)v; break;
        case O_WARMUP: if (!(s = args_flag_int("--warmup", optarg, &v))) pl.warmup = (int)v; break;
        case O_SEED: if (!(s = args_flag_int("--seed", optarg, &v))) pl.seed = (uint64_t)v; break;
        case O_TP: if (!(s = args_flag_int("--tp", optarg, &v))) tp = (int)v; break;
        case O_PP:
            return cli_usage_error(CMD, "--pp %.16s: pipeline stages are not implemented in the measured run (each rank would hold "
                                        "a stage's layers); predict --pp and sweep --predict --pp price them", optarg);
        case O_COMM_TIMEOUT: {
            char *end = NULL;
            comm_timeout = strtod(optarg, &end);
            if (!end || *end || !(comm_timeout >= 1 && comm_timeout <= 86400))
                s = xf_errorf(XF_EINVAL, "--comm-timeout '%.32s': give seconds from 1 to 86400", optarg);
            break;
        }
        case O_POLICY: s = args_kv_policy("--kv-policy", optarg, &pl.kv_policy); break;
        case O_ALLOC:
            if (!strcmp(optarg, "pool")) pl.kv_alloc = KV_ALLOC_POOL;
            else if (!strcmp(optarg, "system")) pl.kv_alloc = KV_ALLOC_SYSTEM;
            else return cli_usage_error(CMD, "--kv-alloc: '%s' is not pool or system", optarg);
            break;
        case O_DEVICE:
            device = optarg;
            if (!strcmp(device, "cpu")) pl.cuda = 0;
            else if (cuda_device_parse(device, &pl.ordinal) == XF_OK) pl.cuda = 1;
            else return cli_usage_error(CMD, "--device: '%s' is not cpu, cuda or cuda:N (N a GPU index)", device);
            break;
        case O_CUPTI:
            if (!strcmp(optarg, "off")) pl.cupti = RUNNER_CUPTI_OFF;
            else if (!strcmp(optarg, "activity")) pl.cupti = RUNNER_CUPTI_ACTIVITY;
            else if (!strcmp(optarg, "counters")) pl.cupti = RUNNER_CUPTI_COUNTERS;
            else return cli_usage_error(CMD, "--cupti: '%s' is not off, activity or counters", optarg);
            break;
        case O_GRAPH: pl.cuda_graph = 1; break;
        case O_SAVE_TOKENS: tokens_path = optarg; break;
        case O_SAVE_LOGITS: save_logits = 1; break;
        case O_NOPROBES: pl.probes = 0; break;
        case O_NOPERF: pl.perf = 0; break;
        case O_CALLGRIND: if (pl.callgrind < 1) pl.callgrind = 1; break;
        case O_CALLGRIND_CACHE: pl.callgrind = 2; break;
        case O_NOCONC: pl.concurrent = 0; break;
        case O_MLA: s = args_mla_form("--mla", optarg, &mla_form); break;
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

    if (!pl.cuda && pl.cupti > RUNNER_CUPTI_OFF) return cli_usage_error(CMD, "--cupti needs --device cuda (CUPTI traces GPU kernels)");
    if (!pl.cuda && pl.cuda_graph) return cli_usage_error(CMD, "--cuda-graph needs --device cuda");
    if (pl.callgrind) {
        int cg_rc = run_callgrind_check(&pl, threads_given, argc, argv);
        if (cg_rc >= 0) return cg_rc; /* refused, or the run under callgrind has finished */
    }
    if (pl.bf16_inputs == BACKEND_BF16_ROUNDED && (pl.cuda || pl.wdtype != XF_BF16))
        return cli_usage_error(CMD, "--bf16-inputs rounded: only bf16 weights on the CPU take it (give --wdtype bf16 and --device cpu)");
    if (save_logits && !tokens_path) return cli_usage_error(CMD, "--save-logits goes with --save-tokens FILE (the file it writes to)");
    /* The device first: without one, say so plainly (exit 3) before anything is resolved or measured. */
    if (pl.cuda) {
        cuda_device_info gpu;
        xf_status ds = cuda_device_open(pl.ordinal, &gpu);
        if (ds == XF_EUNSUPPORTED) return cli_cuda_unsupported(CMD);
        if (ds) return cli_fail(CMD, ds);
        if (!backend_find("cuda"))
            return cli_fail(CMD, xf_errorf(XF_EUNSUPPORTED, "--device %s: this build has the CUDA runtime but not the CUDA "
                                                            "backend; use --device cpu", device));
        if (!wd_given) pl.wdtype = XF_BF16; /* the GPU holds bf16 weights whatever the host has: do not make fp32 ones */
        if (pl.cuda_graph && pl.kv_alloc == KV_ALLOC_SYSTEM)
            fprintf(stderr, "xfprof run: note: CUDA graphs need the KV pool (the system allocator moves KV every step): "
                            "with --kv-alloc system both --cuda-graph timings launch op by op\n");
    }

    /* A weights folder implies its own config.json: --model is then optional. */
    if (!model_s) model_s = weights ? weights : DEF_MODEL;
    xf_status s = config_resolve(model_s, &pl.cfg);
    if (s) return cli_fail(CMD, s);
    if ((s = config_validate(&pl.cfg))) return cli_fail(CMD, s);
    if (pl.cuda && pl.cuda_graph && (pl.cfg.n_experts > 0 || model_is_mla(&pl.cfg)))
        return cli_usage_error(CMD, "--cuda-graph with %s is not implemented on the GPU yet (the GEMM sizes are read back from the "
                               "device every step): run without --cuda-graph", pl.cfg.n_experts > 0 ? "mixture of experts" :
                               "multi-head latent attention");
    if (mla_form >= 0 && !model_is_mla(&pl.cfg)) return cli_usage_error(CMD, "--mla: %s has no latent attention (kv_lora_rank)", pl.cfg.name);
    if (mla_form == 1 && pl.cuda)
        return cli_usage_error(CMD, "--mla absorbed runs on the CPU backend only: use --device cpu or --mla naive");
    if (mla_form >= 0) pl.cfg.mla_absorbed = mla_form;
    pl.weights_dir = weights;

    /* Prompt ids: given, or random from the seed. */
    int32_t *pids = NULL;
    char n_pids_s[32] = "";
    if (pids_s) {
        if (prompt_s) return cli_usage_error(CMD, "give either --prompt or --prompt-ids, not both");
        int rc = parse_prompt_ids(pids_s, &pl.cfg, &pids, &pl.n_prompt_ids);
        if (rc != CLI_EXIT_OK) return rc;
        pl.prompt_ids = pids;
        snprintf(n_pids_s, sizeof n_pids_s, "%lld", (long long)pl.n_prompt_ids);
    }
    int64_t *batches = NULL, *prompts = NULL, *gens = NULL;
    int rc = CLI_EXIT_OK;
    if (args_flag_list("--batch", batch_s, &batches, &pl.n_batch) ||
        args_flag_list("--prompt", pids ? n_pids_s : prompt_s ? prompt_s : DEF_PROMPT, &prompts, &pl.n_prompt) ||
        args_flag_list("--gen", gen_s, &gens, &pl.n_gen)) {
        rc = cli_usage_error(CMD, "%s", xf_error_msg());
        goto out;
    }
    pl.batch = batches;
    pl.prompt = prompts;
    pl.gen = gens;
    pl.stop = cli_signal_pending; /* Ctrl-C / SIGTERM: the repetition being measured finishes, what is complete is written (partial) */
    run_tokens toks;
    run_tokens_init(&toks, &pl.cfg, save_logits);
    if (tokens_path) {
        pl.on_step = run_tokens_step;
        pl.on_step_ctx = &toks;
    }
    if (tp > 1) { /* a split over MPI ranks: its own path (cli/run_tp.c) */
        int writer = 1;
        rc = run_tp(CMD, &pl, tp, comm_timeout, &out, &writer);
        if (tokens_path && rc == CLI_EXIT_OK && writer && (s = run_tokens_write(&toks, tokens_path))) rc = cli_fail(CMD, s);
        run_tokens_free(&toks);
        goto out;
    }
    record rec;
    record_init(&rec, "run");
    run_notes notes;
    cli_signals_install();
    if ((s = runner_run(&pl, &rec, &notes))) {
        run_tokens_free(&toks);
        rc = s == XF_EUNSUPPORTED && pl.cuda ? cli_cuda_unsupported(CMD) : cli_fail(CMD, s);
        record_free(&rec);
        goto out;
    }
    if (notes.stopped_by)
        fprintf(stderr, "xfprof run: interrupted by %s: writing what is complete, marked partial: %s\n",
                cli_signal_name(notes.stopped_by), rec.partial_reason);
    if (sweep_test_slow_op(&rec) != XF_OK) { /* test only (tests/cli_ab.sh, bench/ci_ab.sh) */
        rc = cli_fail(CMD, XF_EINVAL);
        record_free(&rec);
        goto out;
    }
    rc = cli_output_write(CMD, &rec, &out);
    if (tokens_path && rc == CLI_EXIT_OK) {
        if ((s = run_tokens_write(&toks, tokens_path))) rc = cli_fail(CMD, s);
        else fprintf(stderr, "xfprof run: wrote the tokens%s to %s\n", save_logits ? " and logits" : "", tokens_path);
    }
    run_tokens_free(&toks);
    /* Under the table: how it was measured (ceilings used, counters, BLAS kernels). */
    if (rc == CLI_EXIT_OK && out.format == RENDER_TABLE && !(out.path && !strcmp(out.path, "-"))) runner_print_notes(stdout, &rec, &notes);
    if (rc == CLI_EXIT_OK && notes.stopped_by) rc = 128 + notes.stopped_by;
    record_free(&rec);
out:
    free(batches);
    free(prompts);
    free(gens);
    free(pids);
    return rc;
}
