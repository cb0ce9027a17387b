/* xfprof predict: the cost model against a device's roofline, for every combination of the
 * list flags (as llama-bench does). No hardware needed. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/advice.h"
#include "analyzers/predict.h"
#include "analyzers/predict_parallel.h"
#include "args.h"
#include "core/limits.h"
#include "cli.h"
#include "core/device.h"
#include "output.h"
#include "predict_cal.h"
#include "reference_model/config.h"
#include "sweep_grid.h"

static const char *CMD = "predict";

static void help(void) {
    printf("Usage: xfprof predict [options]\n\n"
           "The cost model against a device's roofline: for every op of one prefill step and one decode step\n"
           "(at the mean decode context), its FLOPs, bytes, intensity, bound and predicted time; then TTFT, TPOT,\n"
           "tokens/s, memory against the device's capacity and the largest batch that fits. No hardware needed.\n\n"
           "  --model M         preset name (xfprof models) or a Hugging Face config.json (default stories15m)\n"
           "  --device D        device spec name (xfprof devices; default h100-sxm), or cpu: this machine's file\n"
           "                    ('xfprof machine'); with its calibration ('xfprof machine --calibrate') every op's time is\n"
           "                    calibrated: the roofline time over the efficiency measured for its family, dtype and shape\n"
           "                    (clamped outside the table); spec-sheet GPUs use default efficiencies (docs/verdicts.md);\n"
           "                    the roofline bound stays beside it (the table's \"roofline\" column, predicted_time_s)\n"
           "  --device-file F   a devices file of your own (format of data/devices.json, or xfprof machine's)\n"
           "  --batch LIST      sequences per step (default 1)\n"
           "  --prompt LIST     prompt tokens per sequence (default 128)\n"
           "  --gen LIST        tokens generated per sequence (default 128; the first by the prefill, then gen - 1\n"
           "                    decode steps)\n"
           "  --wdtype LIST     weights: fp32, fp16, bf16, fp8, int8, int4 (default bf16)\n"
           "  --adtype LIST     activations and GEMM compute type (default: fp32 for fp32 weights, fp16 for fp16, else bf16)\n"
           "  --kvdtype LIST    KV cache dtype (default: the activation dtype)\n"
           "  --group N         elements per scale of int8/int4 weights (default 128)\n"
           "  --tp LIST         tensor-parallel degree: heads and projections split over N devices as Megatron-LM does,\n"
           "                    an all-reduce after attention and after the MLP (default 1); MoE experts split over the\n"
           "                    same devices (expert parallel, all-to-all); must divide the heads (KV heads replicated\n"
           "                    when fewer than N, said so), d_ff and the experts\n"
           "  --pp LIST         pipeline stages: the layers split into M stages, a send/recv between them (default 1)\n"
           "  --micro-batches N pipeline micro-batches per step, dividing the batch (needs --pp > 1; default 1): the\n"
           "                    bubble (pp-1)/(N+pp-1) and the step time in N micro-batches\n"
           "  --gpus N          devices available: tp x pp beyond it is refused (default tp x pp)\n"
           "                    Collectives are timed on the device's links (data/devices.json: NVLink or PCIe per\n"
           "                    GPU, InfiniBand per GPU between nodes of gpus_per_node): communication-bound when the\n"
           "                    bandwidth term is larger, latency-bound when the per-step latency is\n"
           "%s"
           "  --report FILE     also write the HTML report\n"
           "  --trace FILE      also write the Chrome trace of the predicted step timeline\n"
           "  --mla FORM        latent attention (deepseek_v3): naive (default; decompress every cached latent into\n"
           "                    K and V per head, as transformers runs it) or absorbed (kv_b folded into Q and the\n"
           "                    output: attention in the latent space)\n\n"
           "LIST: comma list and ranges: 1,8,64 | 1..64 (doubling) | 128..2048*2 | 0..512+128. All combinations run.\n"
           "Example: xfprof predict --model llama-2-7b --device h100-sxm --batch 1,8,64 --prompt 512 --gen 128\n",
           cli_output_help);
}

/* The points split over devices (--tp, --pp): what the split assumes said once, then the record. */
static int predict_split(const sweep_grid *g, const sweep_param *ps, int64_t n, const model_config *cfg, const device_spec *dev,
                         const workload *wls, record *rec, cli_output *out) {
    parallel_plan *plans = calloc((size_t)n, sizeof *plans);
    if (!plans) return cli_fail(CMD, xf_errorf(XF_ENOMEM, "out of memory"));
    int replicated = 0, moe = 0, split_tp = 0;
    for (int64_t i = 0; i < n; i++) {
        sweep_param_plan(g, &ps[i], &plans[i]);
        replicated |= plans[i].tp > cfg->n_kv_heads;
        moe |= plans[i].tp > 1 && cfg->n_experts > 0;
        split_tp |= plans[i].tp > 1;
    }
    if (replicated)
        fprintf(stderr, "xfprof predict: note: %s has %lld KV heads, fewer than --tp: each KV head (its K/V weights and its "
                "cache) is replicated on tp / %lld devices\n", cfg->name, (long long)cfg->n_kv_heads, (long long)cfg->n_kv_heads);
    if (split_tp && model_is_mla(cfg))
        fprintf(stderr, "xfprof predict: note: %s's latent attention is split by heads (q_b, kv_b, o_proj); q_a, kv_a and "
                "the latent KV cache are replicated on every --tp device\n", cfg->name);
    if (moe)
        fprintf(stderr, "xfprof predict: note: %s's experts are split over the --tp devices (expert parallel): each device "
                "routes 1/tp of the tokens, an all-to-all sends them to their experts and back, an all-gather joins the rows\n",
                cfg->name);
    xf_status s = predict_parallel_record(cfg, dev, wls, plans, (int)n, rec);
    free(plans);
    if (!s) s = advice_record(rec);
    if (s) return cli_fail(CMD, s);
    return cli_output_write(CMD, rec, out);
}

int cmd_predict(int argc, char **argv) {
    enum { O_MODEL = 1000, O_DEVICE, O_DEVFILE, O_BATCH, O_PROMPT, O_GEN, O_WD, O_AD, O_KV, O_GROUP, O_FORMAT, O_PERLAYER, O_REPORT, O_TRACE,
           O_TP, O_PP, O_MICRO, O_GPUS, O_MLA };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},   {"device", required_argument, 0, O_DEVICE},
        {"device-file", required_argument, 0, O_DEVFILE}, {"batch", required_argument, 0, O_BATCH},
        {"prompt", required_argument, 0, O_PROMPT}, {"gen", required_argument, 0, O_GEN},
        {"wdtype", required_argument, 0, O_WD},     {"adtype", required_argument, 0, O_AD},
        {"kvdtype", required_argument, 0, O_KV},    {"group", required_argument, 0, O_GROUP},
        {"format", required_argument, 0, O_FORMAT}, {"output", required_argument, 0, 'o'},
        {"per-layer", no_argument, 0, O_PERLAYER},  {"report", required_argument, 0, O_REPORT},
        {"trace", required_argument, 0, O_TRACE},   {"help", no_argument, 0, 'h'},
        {"tp", required_argument, 0, O_TP},         {"pp", required_argument, 0, O_PP},
        {"micro-batches", required_argument, 0, O_MICRO}, {"gpus", required_argument, 0, O_GPUS},
        {"mla", required_argument, 0, O_MLA},
        {0, 0, 0, 0}};
    /* The list flags and their combinations are the sweep's grid (cli/sweep_grid.c), in predict
     * mode: one parser and one expansion for `predict` and `sweep --predict`. */
    static const char *const list_flags[] = {
        [O_MODEL - O_MODEL] = "--model", [O_DEVICE - O_MODEL] = "--device", [O_BATCH - O_MODEL] = "--batch",
        [O_PROMPT - O_MODEL] = "--prompt", [O_GEN - O_MODEL] = "--gen", [O_WD - O_MODEL] = "--wdtype",
        [O_AD - O_MODEL] = "--adtype", [O_KV - O_MODEL] = "--kvdtype"};
    sweep_grid g;
    sweep_grid_init(&g);
    g.predict = 1;
    cli_output out = {RENDER_TABLE, NULL, 0, NULL, NULL};
    int c, rc = CLI_EXIT_USAGE, have_device = 0, mla_form = -1;
    calib_table cal; /* the predictor's calibration (issue 17); n == 0: none */
    char how[32] = "", cal_note[224] = "";
    calib_table_init(&cal);
    xf_status s;
    sweep_param *ps = NULL;
    workload *wls = NULL;
    record rec;
    record_init(&rec, "predict");
    if (sweep_grid_set(&g, "--prompt", limits_find("--prompt")->def) || sweep_grid_set(&g, "--gen", limits_find("--gen")->def)) {
        rc = cli_fail(CMD, XF_ENOMEM);
        goto done;
    }
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'h': help(); rc = CLI_EXIT_OK; goto done;
        case O_MODEL: case O_DEVICE: case O_BATCH: case O_PROMPT: case O_GEN: case O_WD: case O_AD: case O_KV:
            have_device |= c == O_DEVICE;
            if (sweep_grid_set(&g, list_flags[c - O_MODEL], optarg) != XF_OK) {
                rc = cli_usage_error(CMD, "%s", xf_error_msg());
                goto done;
            }
            break;
        case O_DEVFILE:
            free(g.device_file);
            if (!(g.device_file = strdup(optarg))) {
                rc = cli_fail(CMD, xf_errorf(XF_ENOMEM, "out of memory"));
                goto done;
            }
            break;
        case O_TP: case O_PP:
            if (sweep_grid_set(&g, c == O_TP ? "--tp" : "--pp", optarg) != XF_OK) {
                rc = cli_usage_error(CMD, "%s", xf_error_msg());
                goto done;
            }
            break;
        case O_MICRO: case O_GPUS: {
            int64_t v;
            if (args_flag_int(c == O_MICRO ? "--micro-batches" : "--gpus", optarg, &v) != XF_OK) {
                rc = cli_usage_error(CMD, "%s", xf_error_msg());
                goto done;
            }
            *(c == O_MICRO ? &g.micro_batches : &g.gpus) = (int)v;
            break;
        }
        case O_GROUP:
            if (args_flag_int("--group", optarg, &g.group) != XF_OK) {
                rc = cli_usage_error(CMD, "%s", xf_error_msg());
                goto done;
            }
            break;
        case O_FORMAT: if (cli_output_option(CMD, "format", optarg, &out) < 0) goto done; break;
        case 'o': cli_output_option(CMD, "output", optarg, &out); break;
        case O_PERLAYER: cli_output_option(CMD, "per-layer", NULL, &out); break;
        case O_REPORT: cli_output_option(CMD, "report", optarg, &out); break;
        case O_TRACE: cli_output_option(CMD, "trace", optarg, &out); break;
        case O_MLA:
            if (args_mla_form("--mla", optarg, &mla_form)) {
                rc = cli_usage_error(CMD, "%s", xf_error_msg());
                goto done;
            }
            break;
        case ':': rc = cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]); goto done;
        default: rc = cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]); goto done;
        }
    }
    if (optind < argc) {
        rc = cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    if (g.n_models > 1 || g.n_devices > 1) {
        rc = cli_usage_error(CMD, "a record is one model on one device: give one --model and one --device (xfprof sweep "
                                  "--predict takes lists of both)");
        goto done;
    }
    /* A devices file of the user's own without --device: its first device. */
    device_spec dev;
    if (g.device_file && !have_device) {
        if ((s = device_lookup(NULL, g.device_file, &dev)) || (s = sweep_grid_set(&g, "--device", dev.name))) {
            rc = cli_fail(CMD, s);
            goto done;
        }
    }
    int64_t n = 0;
    if ((s = sweep_grid_expand(&g, &ps, &n))) {
        rc = cli_fail(CMD, s);
        goto done;
    }
    model_config cfg;
    if ((s = config_resolve(g.models[0], &cfg)) ||
        (s = predict_cal_device(g.devices[0], g.device_file, &dev, &cal, how, sizeof how, cal_note, sizeof cal_note))) {
        rc = cli_fail(CMD, s);
        goto done;
    }
    if (!(wls = calloc((size_t)n, sizeof *wls))) {
        rc = cli_fail(CMD, xf_errorf(XF_ENOMEM, "out of memory"));
        goto done;
    }
    int warned_ctx = 0;
    for (int64_t i = 0; i < n; i++) {
        wls[i] = ps[i].wl;
        if (wls[i].prompt + wls[i].gen > cfg.max_ctx && !warned_ctx) {
            fprintf(stderr, "xfprof predict: note: prompt + gen = %lld exceeds %s's context of %lld tokens\n",
                    (long long)(wls[i].prompt + wls[i].gen), cfg.name, (long long)cfg.max_ctx);
            warned_ctx = 1;
        }
    }
    if (mla_form >= 0 && !model_is_mla(&cfg)) {
        rc = cli_usage_error(CMD, "--mla: %s has no latent attention (kv_lora_rank)", cfg.name);
        goto done;
    }
    if (model_is_mla(&cfg)) {
        if (mla_form >= 0) cfg.mla_absorbed = mla_form;
        fprintf(stderr, "xfprof predict: note: %s's latent attention is costed in the %s form (--mla naive|absorbed); the "
                "record's model.mla.form says which\n", cfg.name, cfg.mla_absorbed ? "absorbed" : "naive");
    }
    if (cfg.n_experts > 0) /* what the expert weights per step rest on */
        fprintf(stderr, "xfprof predict: note: %s routes each token to %lld of %lld experts; a step of T tokens is costed "
                "as reading the expected number of distinct experts under uniform routing, E(1-(1-k/E)^T) (a real router "
                "may be less even)\n", cfg.name, (long long)cfg.experts_per_tok, (long long)cfg.n_experts);
    record_free(&rec);
    if (g.n_tp || g.n_pp || g.micro_batches || g.gpus) {
        rc = predict_split(&g, ps, n, &cfg, &dev, wls, &rec, &out);
        goto done;
    }
    if ((s = predict_record(&cfg, &dev, wls, (int)n, &rec))) {
        rc = cli_fail(CMD, s);
        goto done;
    }
    predict_cal_apply(&rec, &cal, how, cal_note);
    fprintf(stderr, "xfprof predict: predicted = %s (%s)\n", how, rec.prediction_note);
    if ((s = advice_record(&rec))) {
        rc = cli_fail(CMD, s);
        goto done;
    }
    rc = cli_output_write(CMD, &rec, &out);
done:
    calib_table_free(&cal);
    record_free(&rec);
    free(wls);
    free(ps);
    sweep_grid_free(&g);
    return rc;
}
