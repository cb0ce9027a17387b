/* xfprof kv: where the KV cache's memory goes under each allocation policy, for a model, a
 * device and a traffic (synthetic or a trace), by a discrete-event simulation of a
 * continuous-batching server; and, with --size, how big the KV cache is. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analyzers/kv.h"
#include "args.h"
#include "kv_size.h"
#include "cli.h"
#include "core/device.h"
#include "core/fileio.h"
#include "core/record.h"
#include "core/record_kv.h"
#include "core/sysmem.h"
#include "core/units.h"
#include "reference_model/config.h"
#include "reference_model/cost_model.h"
#include "reference_model/kv_cache.h"
#include "reference_model/serving_sim.h"
#include "reports/record_json.h"
#include "reports/render_text.h"

static const char *CMD = "kv";

#define DEF_MODEL "llama-2-13b"
#define DEF_DEVICE "a100-40gb"
#define DEF_POLICIES "reserve,pow2,oracle,paged:16,paged:64"
#define DEF_PROMPT "lognormal:4.7:0.9"
#define DEF_OUTPUT "lognormal:5.5:0.8"

static void help(void) {
    printf("Usage: xfprof kv [options]\n"
           "       xfprof kv --size [--model M] [--kvdtype T] [--context LIST] [--batch LIST] [--device D | --kv-budget SIZE]\n\n"
           "Simulates a continuous-batching server over one KV pool per allocation policy, all on the same\n"
           "requests, and shows where the pool's memory goes (the vLLM paper's breakdown), time-averaged over the\n"
           "run: token states (written K/V), reserved (held for tokens still to come), internal fragmentation (held,\n"
           "never used), external fragmentation (free, but no extent fits the waiting request), free; with live\n"
           "sequences, throughput, TTFT/TPOT percentiles and preemptions. Step times: the cost model against the\n"
           "device's roofline. No hardware needed.\n\n"
           "  --model M          preset or Hugging Face config.json (default " DEF_MODEL ")\n"
           "  --device D         device spec (xfprof devices; default " DEF_DEVICE ")\n"
           "  --device-file F    a devices file of your own\n"
           "  --kv-policy LIST   reserve, pow2, oracle, paged, paged:B (default " DEF_POLICIES ");\n"
           "                     --policy is the old spelling, still accepted\n"
           "  --rate R           Poisson arrivals, requests/s; inf = all at time 0 (default inf)\n"
           "  --requests N       synthetic requests (default 1000; at most 10000000, and no more than half the\n"
           "                     memory available holds at 96 bytes each); a progress line with ETA on a terminal\n"
           "  --prompt-dist D    prompt lengths: fixed:N, uniform:LO:HI, normal:MEAN:STD, lognormal:MU:SIGMA\n"
           "                     (length = e^(MU + SIGMA z)); default " DEF_PROMPT " (ShareGPT-like)\n"
           "  --output-dist D    output lengths, same forms (default " DEF_OUTPUT ", ShareGPT-like)\n"
           "  --trace-file F     requests from a file instead: CSV arrival_s,prompt,output or JSONL\n"
           "                     {\"arrival\":s,\"prompt\":n,\"output\":n} per line\n"
           "  --max-len N        longest request (prompt + output) and the reserve policy's region\n"
           "                     (default the model's context)\n"
           "  --kv-budget SIZE   KV pool, e.g. 20GiB (default: device memory - weights - one max-len prefill's\n"
           "                     activations)\n"
           "  --kvdtype T        KV dtype (default fp16)\n"
           "  --wdtype T         weights dtype, for the default budget and step times (default fp16)\n"
           "  --seed N           seed of the synthetic requests (default 42)\n"
           "  --preempt P        recompute (evict the newest sequence, recompute it later) or wait (default recompute)\n"
           "  --max-batch N      most sequences per step (default 0: no limit)\n"
           "  --series N         points kept in each time series (default 256)\n"
           "  --size             only print KV bytes per token, per sequence at --context, and for --batch; with\n"
           "                     --device or --kv-budget also the share of the budget and how many sequences fit\n"
           "  --context LIST     contexts for --size (default the model's context)\n"
           "  --batch LIST       batches for --size (default 1)\n"
           "  --format F         table or json (default table)\n"
           "  -o, --output FILE  write the xfprof record (JSON, with its kv section) to FILE\n\n"
           "Example: xfprof kv --model llama-2-13b --device a100-40gb --kv-policy reserve,paged:16 --rate 2 --requests 1000\n");
}

/* ---- the simulation ---- */

static double trace_mean(const sim_trace *t, int output) {
    double s = 0;
    for (int64_t i = 0; i < t->n; i++) s += (double)(output ? t->req[i].output : t->req[i].prompt);
    return t->n ? s / (double)t->n : 0;
}

static int parse_dtype_flag(const char *flag, const char *s, xf_dtype *out) {
    if (dtype_parse(s, out) != XF_OK) return cli_usage_error(CMD, "%s: %s", flag, xf_error_msg());
    return 0;
}

/* --requests: the simulation holds sim_bytes_per_request() bytes per request while it runs; at
 * most half the memory available now, and never more than KV_MAX_REQUESTS (docs/robustness.md has
 * the time it takes). */
#define KV_MAX_REQUESTS 10000000LL
static int check_requests(int64_t n) {
    int64_t per = sim_bytes_per_request(), avail = sysmem_available_bytes();
    int64_t fit = avail > 0 ? avail / 2 / per : KV_MAX_REQUESTS;
    int64_t lim = fit < KV_MAX_REQUESTS ? fit : KV_MAX_REQUESTS;
    if (n <= lim) return 0;
    char a[24], b[24];
    units_bytes((double)n * (double)per, a, sizeof a);
    units_bytes((double)avail, b, sizeof b);
    return cli_usage_error(CMD,
                           "--requests %lld: at most %lld here: each request holds %lld bytes while it is simulated (%s for %lld), "
                           "the bound is half the %s available now, and %lld requests in any case; simulate fewer requests, or a "
                           "--trace-file sample of yours",
                           (long long)n, (long long)lim, (long long)per, a, (long long)n, b, KV_MAX_REQUESTS);
}

/* The progress line on a terminal: policy i of n, requests completed, elapsed, ETA. */
typedef struct kv_progress {
    const char *policy;
    int index, count;
    double t0, last;
} kv_progress;

static double kv_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void kv_progress_print(void *ctx, int64_t done, int64_t n) {
    kv_progress *p = ctx;
    double now = kv_now_s(), el = now - p->t0;
    if (now - p->last < 0.2) return; /* five lines a second at most */
    p->last = now;
    char eta[32] = "?";
    if (done > 0) snprintf(eta, sizeof eta, "%.0f s", el / (double)done * (double)(n - done));
    fprintf(stderr, "\r\033[Kxfprof kv: policy %s (%d of %d): %lld of %lld requests done | elapsed %.1f s | ETA %s", p->policy,
            p->index + 1, p->count, (long long)done, (long long)n, el, eta);
    fflush(stderr);
}

int cmd_kv(int argc, char **argv) {
    enum {
        O_MODEL = 1000, O_DEVICE, O_DEVFILE, O_POLICY, O_RATE, O_REQ, O_PDIST, O_ODIST, O_TRACE, O_MAXLEN, O_BUDGET, O_KVD, O_WD,
        O_SEED, O_PREEMPT, O_MAXBATCH, O_SERIES, O_SIZE, O_CONTEXT, O_BATCH, O_FORMAT
    };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},       {"device", required_argument, 0, O_DEVICE},
        {"device-file", required_argument, 0, O_DEVFILE}, {"kv-policy", required_argument, 0, O_POLICY},
        {"policy", required_argument, 0, O_POLICY}, /* the old spelling, kept as an alias */
        {"rate", required_argument, 0, O_RATE},         {"requests", required_argument, 0, O_REQ},
        {"prompt-dist", required_argument, 0, O_PDIST}, {"output-dist", required_argument, 0, O_ODIST},
        {"trace-file", required_argument, 0, O_TRACE},  {"max-len", required_argument, 0, O_MAXLEN},
        {"kv-budget", required_argument, 0, O_BUDGET},  {"kvdtype", required_argument, 0, O_KVD},
        {"wdtype", required_argument, 0, O_WD},         {"seed", required_argument, 0, O_SEED},
        {"preempt", required_argument, 0, O_PREEMPT},   {"max-batch", required_argument, 0, O_MAXBATCH},
        {"series", required_argument, 0, O_SERIES},     {"size", no_argument, 0, O_SIZE},
        {"context", required_argument, 0, O_CONTEXT},   {"batch", required_argument, 0, O_BATCH},
        {"format", required_argument, 0, O_FORMAT},     {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},                  {0, 0, 0, 0}};
    const char *model = DEF_MODEL, *device = NULL, *device_file = NULL, *policy_s = DEF_POLICIES;
    const char *pdist_s = DEF_PROMPT, *odist_s = DEF_OUTPUT, *trace_file = NULL, *out_path = NULL;
    const char *ctx_s = NULL, *batch_s = NULL;
    double rate = INFINITY, budget = 0;
    int64_t n_req = 1000, max_len = 0, seed = 42, max_batch = 0, n_series = 256;
    xf_dtype kvd = XF_FP16, wd = XF_FP16;
    sim_preempt preempt = SIM_PREEMPT_RECOMPUTE;
    int size_only = 0, json = 0, rc, dist_given = 0, synth_given = 0;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'h': help(); return CLI_EXIT_OK;
        case O_MODEL: model = optarg; break;
        case O_DEVICE: device = optarg; break;
        case O_DEVFILE: device_file = optarg; break;
        case O_POLICY: policy_s = optarg; break;
        case O_RATE:
            synth_given = 1;
            if (!strcasecmp(optarg, "inf") || !strcasecmp(optarg, "infinity")) rate = INFINITY;
            else if (args_double("--rate", optarg, -1e300, 1e300, &rate) != XF_OK) return cli_usage_error(CMD, "%s", xf_error_msg());
            else if (!(rate > 0))
                return cli_usage_error(CMD, "--rate %s: the arrival rate must be positive (requests per second), or inf for all at time 0", optarg);
            break;
        case O_REQ:
            synth_given = 1;
            if (args_int("--requests", optarg, 1, INT64_MAX / 2, &n_req) != XF_OK) return cli_usage_error(CMD, "%s", xf_error_msg());
            if ((rc = check_requests(n_req))) return rc;
            break;
        case O_PDIST: pdist_s = optarg; dist_given = 1; break;
        case O_ODIST: odist_s = optarg; dist_given = 1; break;
        case O_TRACE: trace_file = optarg; break;
        case O_MAXLEN:
            if (args_int("--max-len", optarg, 2, (int64_t)1 << 24, &max_len) != XF_OK) return cli_usage_error(CMD, "%s", xf_error_msg());
            break;
        case O_BUDGET:
            if (args_size("--kv-budget", optarg, &budget) != XF_OK) return cli_usage_error(CMD, "%s", xf_error_msg());
            if (!(budget >= 1) || budget > 9e18) return cli_usage_error(CMD, "--kv-budget %s: must be positive", optarg);
            break;
        case O_KVD: if ((rc = parse_dtype_flag("--kvdtype", optarg, &kvd))) return rc; break;
        case O_WD: if ((rc = parse_dtype_flag("--wdtype", optarg, &wd))) return rc; break;
        case O_SEED:
            if (args_flag_int("--seed", optarg, &seed) != XF_OK) return cli_usage_error(CMD, "%s", xf_error_msg());
            break;
        case O_PREEMPT:
            if (sim_preempt_parse(optarg, &preempt) != XF_OK) return cli_usage_error(CMD, "--preempt: %s", xf_error_msg());
            break;
        case O_MAXBATCH:
            if (args_int("--max-batch", optarg, 0, (int64_t)1 << 24, &max_batch) != XF_OK) return cli_usage_error(CMD, "%s", xf_error_msg());
            break;
        case O_SERIES:
            if (args_int("--series", optarg, 2, 100000, &n_series) != XF_OK) return cli_usage_error(CMD, "%s", xf_error_msg());
            break;
        case O_SIZE: size_only = 1; break;
        case O_CONTEXT: ctx_s = optarg; break;
        case O_BATCH: batch_s = optarg; break;
        case O_FORMAT:
            if (!strcmp(optarg, "table")) json = 0;
            else if (!strcmp(optarg, "json")) json = 1;
            else return cli_usage_error(CMD, "--format %s: use table or json", optarg);
            break;
        case 'o': out_path = optarg; break;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (trace_file && (dist_given || synth_given))
        return cli_usage_error(CMD, "--trace-file gives the requests: it does not go with --rate, --requests, --prompt-dist or --output-dist");
    if (!size_only && (ctx_s || batch_s)) return cli_usage_error(CMD, "--context and --batch go with --size");

    model_config cfg;
    xf_status s = config_resolve(model, &cfg);
    if (s) return cli_fail(CMD, s);
    if (size_only) {
        if (budget == 0 && (device || device_file)) { /* the default budget of that device */
            device_spec sdev;
            if ((s = device_lookup(device, device_file, &sdev))) return cli_fail(CMD, s);
            workload sw;
            workload_default(&sw);
            sw.wdtype = wd;
            sw.adtype = dtype_default_adtype(wd);
            sw.kvdtype = kvd;
            if ((s = kv_budget_default(&cfg, &sw, &sdev, max_len > 0 ? max_len : cfg.max_ctx, &budget))) return cli_fail(CMD, s);
        }
        return cli_kv_size(&cfg, kvd, ctx_s, batch_s, json, out_path, budget);
    }

    /* policies first: a typo should not wait for the rest */
    char **pol_items = NULL;
    int n_pol = 0;
    if (args_str_list("--kv-policy", policy_s, &pol_items, &n_pol) != XF_OK) return cli_usage_error(CMD, "%s", xf_error_msg());
    kv_policy pols[64];
    if (n_pol > 64) {
        args_str_list_free(pol_items, n_pol);
        return cli_usage_error(CMD, "--policy: at most 64 policies");
    }
    for (int i = 0; i < n_pol; i++)
        if (args_kv_policy("--kv-policy", pol_items[i], &pols[i]) != XF_OK) {
            args_str_list_free(pol_items, n_pol);
            return cli_usage_error(CMD, "%s", xf_error_msg());
        }
    args_str_list_free(pol_items, n_pol);
    sim_dist pd, od;
    if (!trace_file && (sim_dist_parse("--prompt-dist", pdist_s, &pd) || sim_dist_parse("--output-dist", odist_s, &od)))
        return cli_usage_error(CMD, "%s", xf_error_msg());

    device_spec dev;
    if (!device && !device_file) device = DEF_DEVICE;
    if ((s = device_lookup(device, device_file, &dev))) return cli_fail(CMD, s);
    if (max_len == 0) max_len = cfg.max_ctx;
    if (max_len < 2) return cli_usage_error(CMD, "the model's context (%lld) is too short; give --max-len", (long long)cfg.max_ctx);

    workload w;
    workload_default(&w);
    w.wdtype = wd;
    w.adtype = dtype_default_adtype(wd);
    w.kvdtype = kvd;
    if (budget == 0) {
        if ((s = kv_budget_default(&cfg, &w, &dev, max_len, &budget))) return cli_fail(CMD, s);
    }
    int64_t bpt = sim_bytes_per_token(&cfg, kvd); /* K and V rows, or the latent row, every layer */
    if (bpt <= 0) return cli_fail(CMD, xf_errorf(XF_EINVAL, "KV bytes per token overflow"));

    sim_trace tr = {0, NULL};
    if (trace_file) s = sim_trace_load(trace_file, max_len, &tr);
    else s = sim_trace_generate(n_req, rate, &pd, &od, (uint64_t)seed, max_len, &tr);
    if (s) return cli_fail(CMD, s);

    sim_cost *cost = NULL;
    if ((s = sim_cost_init(&cost, &cfg, &w, &dev))) {
        sim_trace_free(&tr);
        return cli_fail(CMD, s);
    }
    record rec;
    record_init(&rec, "kv");
    rec.model = cfg;
    rec.model_params = config_param_count(&cfg);
    rec.model_active_params = config_active_param_count(&cfg);
    rec.kv_bytes_per_token = (double)bpt;
    rec.device = dev;
    rec.ceilings_measured = dev.measured;
    record_stamp_time(&rec);
    record_kv *kv = calloc(1, sizeof *kv);
    if (kv) kv->policies = calloc((size_t)n_pol, sizeof *kv->policies);
    rec.kv = kv;
    if (!kv || !kv->policies) {
        s = xf_errorf(XF_ENOMEM, "out of memory");
        goto fail;
    }
    kv->budget_bytes = budget;
    kv->bytes_per_token = bpt;
    snprintf(kv->kvdtype, sizeof kv->kvdtype, "%s", dtype_name(kvd));
    kv->max_len = max_len;
    kv->n_requests = tr.n;
    kv->seed = trace_file ? 0 : (uint64_t)seed;
    snprintf(kv->preempt, sizeof kv->preempt, "%s", sim_preempt_name(preempt));
    snprintf(kv->step_model, sizeof kv->step_model, "cost model + roofline, %s weights", dtype_name(wd));
    if (trace_file) {
        snprintf(kv->arrivals, sizeof kv->arrivals, "trace");
        snprintf(kv->trace_file, sizeof kv->trace_file, "%s", trace_file);
    } else {
        snprintf(kv->arrivals, sizeof kv->arrivals, "%s", isfinite(rate) ? "poisson" : "burst");
        kv->rate = isfinite(rate) ? rate : 0;
        sim_dist_format(&pd, kv->prompt_dist, sizeof kv->prompt_dist);
        sim_dist_format(&od, kv->output_dist, sizeof kv->output_dist);
    }
    int tty = isatty(STDERR_FILENO);
    for (int i = 0; i < n_pol; i++) {
        sim_config sc;
        memset(&sc, 0, sizeof sc);
        /* one pool, or one per layer group (windowed and full-attention layers), docs/kv.md */
        if ((s = sim_pools_of_model(&cfg, kvd, budget > 9e18 ? INT64_MAX : (int64_t)budget, pols[i], max_len, &sc))) goto fail;
        sc.max_len = max_len;
        sc.preempt = preempt;
        sc.max_batch = max_batch;
        sc.max_series = (int)n_series;
        sc.step_time = sim_cost_step_time;
        sc.step_ctx = cost;
        char pname[32];
        kv_progress prog = {kv_policy_name(&pols[i], pname, sizeof pname), i, n_pol, kv_now_s(), 0};
        if (tty) {
            sc.progress = kv_progress_print;
            sc.progress_ctx = &prog;
        }
        s = sim_run(&sc, &tr, &kv->policies[i]);
        if (tty) fprintf(stderr, "\r\033[K");
        if (s) {
            char name[32];
            xf_error_prefix(s, "policy %s: ", kv_policy_name(&pols[i], name, sizeof name));
            goto fail;
        }
        kv->n_policies = i + 1;
    }
    kv->mean_prompt = trace_mean(&tr, 0);
    kv->mean_output = trace_mean(&tr, 1);
    if (!json) {
        char *text = NULL;
        render_options ro = {0};
        if ((s = render_text(&rec, RENDER_TABLE, &ro, &text))) goto fail;
        fputs(text, stdout);
        free(text);
    }
    if (out_path || json) {
        s = record_save(&rec, out_path);
        if (s) goto fail;
        if (out_path) fprintf(stderr, "xfprof kv: wrote %s\n", out_path);
    }
    sim_cost_free(cost);
    sim_trace_free(&tr);
    record_free(&rec);
    return CLI_EXIT_OK;
fail:
    sim_cost_free(cost);
    sim_trace_free(&tr);
    record_free(&rec);
    return cli_fail(CMD, s);
}
