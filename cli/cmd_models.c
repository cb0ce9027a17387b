/* xfprof models: the built-in model presets (or given configs) with their sizes, parameter
 * counts and KV bytes per token. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "cli/args.h"
#include "core/dtype.h"
#include "core/json_util.h"
#include "reference_model/config.h"
#include "reference_model/cost_model.h"

static const char *CMD = "models";

static void usage(FILE *f) {
    fprintf(f,
            "Usage: xfprof models [--model NAME|PATH[,...]] [--kvdtype DTYPE] [--format table|json]\n\n"
            "Lists the built-in model presets: d_model, layers, query/KV heads, head_dim, FFN size,\n"
            "vocabulary, context, parameter count (total, and active: what one token uses, which for a\n"
            "mixture-of-experts model counts only top-k of the routed experts) and KV-cache bytes per token.\n\n"
            "Options:\n"
            "  -m, --model LIST     presets or Hugging Face config.json paths (or folders holding one)\n"
            "                       to show instead of all presets; comma-separated\n"
            "      --kvdtype DTYPE  KV-cache storage type for the bytes-per-token column (default fp16)\n"
            "  -f, --format FMT     table (default) or json\n"
            "  -h, --help           this help\n");
}

/* "6.74B", "15.2M": three significant figures. buf holds at least 16 bytes. */
static void human_count(double v, char *buf, size_t len) {
    const char *suf = "";
    if (v >= 1e9) { v /= 1e9; suf = "B"; }
    else if (v >= 1e6) { v /= 1e6; suf = "M"; }
    else if (v >= 1e3) { v /= 1e3; suf = "K"; }
    if (v < 10) snprintf(buf, len, "%.2f%s", v, suf);
    else if (v < 100) snprintf(buf, len, "%.1f%s", v, suf);
    else snprintf(buf, len, "%.0f%s", v, suf);
}

static cJSON *model_json(const model_config *c, xf_dtype kv) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    int64_t params = config_param_count(c);
    double kvb = cost_kv_bytes_per_token(c, kv, XF_DEFAULT_QUANT_GROUP);
    int ok = cJSON_AddStringToObject(o, "name", c->name) && cJSON_AddStringToObject(o, "arch", c->arch) &&
             json_add_number(o, "n_layers", (double)c->n_layers) && json_add_number(o, "d_model", (double)c->d_model) &&
             json_add_number(o, "n_heads", (double)c->n_heads) && json_add_number(o, "n_kv_heads", (double)c->n_kv_heads) &&
             json_add_number(o, "head_dim", (double)c->head_dim) && json_add_number(o, "d_ff", (double)c->d_ff) &&
             json_add_number(o, "vocab", (double)c->vocab) && json_add_number(o, "max_ctx", (double)c->max_ctx) &&
             json_add_number(o, "rope_theta", c->rope_theta) && json_add_number(o, "norm_eps", c->norm_eps) &&
             cJSON_AddBoolToObject(o, "tied_embeddings", c->tied_embeddings) && cJSON_AddBoolToObject(o, "qkv_bias", c->qkv_bias) &&
             json_add_number(o, "params", (double)params) && json_add_number(o, "active_params", (double)config_active_param_count(c)) &&
             json_add_number(o, "n_experts", (double)c->n_experts) && json_add_number(o, "experts_per_tok", (double)c->experts_per_tok) &&
             json_add_number(o, "kv_lora_rank", (double)c->kv_lora_rank) &&
             cJSON_AddStringToObject(o, "kv_dtype", dtype_name(kv)) &&
             json_add_number(o, "kv_bytes_per_token", kvb);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int cmd_models(int argc, char **argv) {
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'}, {"kvdtype", required_argument, NULL, 'k'},
        {"format", required_argument, NULL, 'f'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    const char *model_arg = NULL, *format = "table";
    xf_dtype kv = XF_FP16;
    xf_status s;
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":m:f:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model_arg = optarg; break;
        case 'k':
            if ((s = dtype_parse(optarg, &kv)) != XF_OK) return cli_usage_error(CMD, "--kvdtype: %s", xf_error_msg());
            break;
        case 'f': format = optarg; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    int json = 0;
    if (args_table_or_json("--format", format, &json) != XF_OK) return cli_usage_error(CMD, "%s", xf_error_msg());

    char **names = NULL;
    int n = 0;
    if (model_arg) {
        if ((s = args_str_list("--model", model_arg, &names, &n)) != XF_OK) return cli_fail(CMD, s);
    } else {
        n = config_preset_count();
    }
    model_config *cfgs = calloc((size_t)n, sizeof *cfgs);
    if (!cfgs) {
        args_str_list_free(names, n);
        return cli_fail(CMD, xf_errorf(XF_ENOMEM, "out of memory"));
    }
    for (int i = 0; i < n; i++) {
        s = names ? config_resolve(names[i], &cfgs[i]) : config_preset(config_preset_name(i), &cfgs[i]);
        if (s != XF_OK) {
            free(cfgs);
            args_str_list_free(names, n);
            return cli_fail(CMD, s);
        }
    }
    args_str_list_free(names, n);

    int rc = CLI_EXIT_OK;
    if (json) {
        cJSON *root = cJSON_CreateObject();
        int ok0 = root && cJSON_AddStringToObject(root, "format", "xfprof-models") && json_add_number(root, "version", 1);
        cJSON *arr = ok0 ? cJSON_AddArrayToObject(root, "models") : NULL;
        int ok = arr != NULL;
        for (int i = 0; ok && i < n; i++) {
            cJSON *m = model_json(&cfgs[i], kv);
            ok = m && cJSON_AddItemToArray(arr, m);
        }
        char *text = ok ? cJSON_Print(root) : NULL;
        if (text) {
            fputs(text, stdout);
            fputc('\n', stdout);
            free(text);
        } else {
            rc = cli_fail(CMD, xf_errorf(XF_ENOMEM, "out of memory building the JSON output"));
        }
        cJSON_Delete(root);
    } else {
        printf("%-20s %-11s %7s %6s %9s %8s %6s %7s %6s %8s %8s %6s %12s\n", "model", "arch", "d_model", "layers", "heads/kv",
               "head_dim", "d_ff", "vocab", "ctx", "params", "active", "tied", "KV B/token");
        for (int i = 0; i < n; i++) {
            const model_config *m = &cfgs[i];
            char params[32], heads[32];
            char active[32];
            human_count((double)config_param_count(m), params, sizeof params);
            human_count((double)config_active_param_count(m), active, sizeof active);
            snprintf(heads, sizeof heads, "%lld/%lld", (long long)m->n_heads, (long long)m->n_kv_heads);
            double kvb = cost_kv_bytes_per_token(m, kv, XF_DEFAULT_QUANT_GROUP);
            printf("%-20s %-11s %7lld %6lld %9s %8lld %6lld %7lld %6lld %8s %8s %6s %12.0f\n", m->name, m->arch, (long long)m->d_model,
                   (long long)m->n_layers, heads, (long long)m->head_dim, (long long)m->d_ff, (long long)m->vocab,
                   (long long)m->max_ctx, params, active, m->tied_embeddings ? "yes" : "no", kvb);
        }
        printf("\nKV B/token: K and V of every layer for one token, stored as %s (2 * layers * kv_heads * head_dim * bytes;\n"
               "latent attention caches one row per layer instead: layers * (kv_lora_rank + qk_rope_head_dim) * bytes).\n",
               dtype_name(kv));
        printf("active: the parameters one token uses (mixture-of-experts models: experts_per_tok of the routed experts per MoE\n"
               "layer, the router and shared experts included; the total for a dense model).\n");
    }
    free(cfgs);
    return rc;
}
