/* xfprof predict: the cost model against a device's roofline, for every combination of the
 * list flags (as llama-bench does). No hardware needed. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/advice.h"
#include "analyzers/predict.h"
#include "args.h"
#include "cli.h"
#include "core/device.h"
#include "output.h"
#include "reference_model/config.h"

static const char *CMD = "predict";

static void help(void) {
    printf("Usage: xfprof predict [options]\n\n"
           "The cost model against a device's roofline: for every op of one prefill step and one decode step\n"
           "(at the mean decode context), its FLOPs, bytes, intensity, bound and predicted time; then TTFT, TPOT,\n"
           "tokens/s, memory against the device's capacity and the largest batch that fits. No hardware needed.\n\n"
           "  --model M         preset name (xfprof models) or a Hugging Face config.json (default stories15m)\n"
           "  --device D        device spec name (xfprof devices; default h100-sxm)\n"
           "  --device-file F   a devices file of your own (format of data/devices.json, or xfprof machine's)\n"
           "  --batch LIST      sequences per step (default 1)\n"
           "  --prompt LIST     prompt tokens per sequence (default 128)\n"
           "  --gen LIST        tokens generated per sequence (default 128)\n"
           "  --wdtype LIST     weights: fp32, fp16, bf16, fp8, int8, int4 (default bf16)\n"
           "  --adtype LIST     activations and GEMM compute type (default: fp32 for fp32 weights, fp16 for fp16, else bf16)\n"
           "  --kvdtype LIST    KV cache dtype (default: the activation dtype)\n"
           "  --group N         elements per scale of int8/int4 weights (default 128)\n"
           "%s"
           "  --report FILE     also write the HTML report\n"
           "  --trace FILE      also write the Chrome trace of the predicted step timeline\n\n"
           "LIST: comma list and ranges: 1,8,64 | 1..64 (doubling) | 128..2048*2 | 0..512+128. All combinations run.\n"
           "Example: xfprof predict --model llama-2-7b --device h100-sxm --batch 1,8,64 --prompt 512 --gen 128\n",
           cli_output_help);
}

typedef struct dtype_list {
    int n;
    xf_dtype v[XF_DTYPE_COUNT * 4];
} dtype_list;

static int parse_dtypes(const char *flag, const char *s, dtype_list *out) {
    char **items;
    int n;
    if (args_str_list(flag, s, &items, &n) != XF_OK) return cli_usage_error(CMD, "%s", xf_error_msg());
    if (n > (int)(sizeof out->v / sizeof out->v[0])) {
        args_str_list_free(items, n);
        return cli_usage_error(CMD, "%s: too many values", flag);
    }
    out->n = 0;
    for (int i = 0; i < n; i++) {
        if (dtype_parse(items[i], &out->v[out->n]) != XF_OK) {
            args_str_list_free(items, n);
            return cli_usage_error(CMD, "%s: %s", flag, xf_error_msg());
        }
        out->n++;
    }
    args_str_list_free(items, n);
    return 0;
}

static xf_dtype default_adtype(xf_dtype w) { return w == XF_FP32 ? XF_FP32 : w == XF_FP16 ? XF_FP16 : XF_BF16; }

int cmd_predict(int argc, char **argv) {
    enum { O_MODEL = 1000, O_DEVICE, O_DEVFILE, O_BATCH, O_PROMPT, O_GEN, O_WD, O_AD, O_KV, O_GROUP, O_FORMAT, O_PERLAYER, O_REPORT, O_TRACE };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},   {"device", required_argument, 0, O_DEVICE},
        {"device-file", required_argument, 0, O_DEVFILE}, {"batch", required_argument, 0, O_BATCH},
        {"prompt", required_argument, 0, O_PROMPT}, {"gen", required_argument, 0, O_GEN},
        {"wdtype", required_argument, 0, O_WD},     {"adtype", required_argument, 0, O_AD},
        {"kvdtype", required_argument, 0, O_KV},    {"group", required_argument, 0, O_GROUP},
        {"format", required_argument, 0, O_FORMAT}, {"output", required_argument, 0, 'o'},
        {"per-layer", no_argument, 0, O_PERLAYER},  {"report", required_argument, 0, O_REPORT},
        {"trace", required_argument, 0, O_TRACE},   {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *model = "stories15m", *device = NULL, *device_file = NULL;
    const char *batch_s = "1", *prompt_s = "128", *gen_s = "128";
    dtype_list wd = {1, {XF_BF16}}, ad = {0, {0}}, kv = {0, {0}};
    int64_t group = 0;
    cli_output out = {RENDER_TABLE, NULL, 0, NULL, NULL};
    int c, rc;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'h': help(); return CLI_EXIT_OK;
        case O_MODEL: model = optarg; break;
        case O_DEVICE: device = optarg; break;
        case O_DEVFILE: device_file = optarg; break;
        case O_BATCH: batch_s = optarg; break;
        case O_PROMPT: prompt_s = optarg; break;
        case O_GEN: gen_s = optarg; break;
        case O_WD: if ((rc = parse_dtypes("--wdtype", optarg, &wd))) return rc; break;
        case O_AD: if ((rc = parse_dtypes("--adtype", optarg, &ad))) return rc; break;
        case O_KV: if ((rc = parse_dtypes("--kvdtype", optarg, &kv))) return rc; break;
        case O_GROUP:
            if (args_int("--group", optarg, 1, 1 << 20, &group) != XF_OK) return cli_usage_error(CMD, "%s", xf_error_msg());
            break;
        case O_FORMAT: if (cli_output_option(CMD, "format", optarg, &out) < 0) return CLI_EXIT_USAGE; break;
        case 'o': cli_output_option(CMD, "output", optarg, &out); break;
        case O_PERLAYER: cli_output_option(CMD, "per-layer", NULL, &out); break;
        case O_REPORT: cli_output_option(CMD, "report", optarg, &out); break;
        case O_TRACE: cli_output_option(CMD, "trace", optarg, &out); break;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);

    model_config cfg;
    xf_status s = config_resolve(model, &cfg);
    if (s) return cli_fail(CMD, s);
    device_spec dev;
    if (!device && !device_file) device = "h100-sxm";
    if ((s = device_lookup(device, device_file, &dev))) return cli_fail(CMD, s);

    int64_t *batches = NULL, *prompts = NULL, *gens = NULL;
    int nb = 0, np = 0, ng = 0;
    if (args_int_list("--batch", batch_s, 1, 1 << 20, &batches, &nb) ||
        args_int_list("--prompt", prompt_s, 1, 1 << 24, &prompts, &np) ||
        args_int_list("--gen", gen_s, 0, 1 << 24, &gens, &ng)) {
        free(batches);
        free(prompts);
        free(gens);
        return cli_usage_error(CMD, "%s", xf_error_msg());
    }
    int nad = ad.n ? ad.n : 1, nkv = kv.n ? kv.n : 1;
    size_t total = (size_t)nb * np * ng * wd.n * nad * nkv;
    workload *wls = total <= 100000 ? calloc(total, sizeof *wls) : NULL;
    if (!wls) {
        free(batches);
        free(prompts);
        free(gens);
        return total > 100000 ? cli_usage_error(CMD, "%zu combinations is too many for one predict (at most 100000)", total)
                              : cli_fail(CMD, xf_errorf(XF_ENOMEM, "out of memory"));
    }
    size_t n = 0;
    int warned_ctx = 0;
    for (int iw = 0; iw < wd.n; iw++)
        for (int ia = 0; ia < nad; ia++)
            for (int ik = 0; ik < nkv; ik++)
                for (int ip = 0; ip < np; ip++)
                    for (int ig = 0; ig < ng; ig++)
                        for (int ib = 0; ib < nb; ib++) {
                            workload *w = &wls[n++];
                            w->batch = batches[ib];
                            w->prompt = prompts[ip];
                            w->gen = gens[ig];
                            w->wdtype = wd.v[iw];
                            w->adtype = ad.n ? ad.v[ia] : default_adtype(w->wdtype);
                            w->kvdtype = kv.n ? kv.v[ik] : w->adtype;
                            w->quant_group = (int)group;
                            if (w->prompt + w->gen > cfg.max_ctx && !warned_ctx) {
                                fprintf(stderr, "xfprof predict: note: prompt + gen = %lld exceeds %s's context of %lld tokens\n",
                                        (long long)(w->prompt + w->gen), cfg.name, (long long)cfg.max_ctx);
                                warned_ctx = 1;
                            }
                        }
    free(batches);
    free(prompts);
    free(gens);
    record rec;
    s = predict_record(&cfg, &dev, wls, (int)n, &rec);
    free(wls);
    if (s) {
        record_free(&rec);
        return cli_fail(CMD, s);
    }
    if ((s = advice_record(&rec))) {
        record_free(&rec);
        return cli_fail(CMD, s);
    }
    rc = cli_output_write(CMD, &rec, &out);
    record_free(&rec);
    return rc;
}
