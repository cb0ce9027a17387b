/* xfprof kv --size: KV bytes per token, per sequence and per batch, against a budget. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "args.h"
#include "cli.h"
#include "core/fileio.h"
#include "core/units.h"
#include "kv_size.h"
#include "reference_model/serving_sim.h"
#include "reference_model/kv_cache.h"

static const char *CMD = "kv";

/* ---- --size ---- */

/* A byte count for the --size table: the exact integer while it has at most 19 digits (below
 * 2^63, every such double prints exactly), else binary units: a 2^80-byte KV is "1.00 YiB", not
 * a 25-digit number. Never converted to an integer type. */
static const char *size_bytes(double b, char *buf, size_t len) {
    if (isfinite(b) && fabs(b) < 9.2e18) snprintf(buf, len, "%.0f", b);
    else units_bytes(b, buf, len);
    return buf;
}

/* budget > 0 (a device or --kv-budget was given): also how much of it each size takes and how
 * many sequences of each context fit. */
int cli_kv_size(const model_config *cfg, xf_dtype kvd, const char *ctx_s, const char *batch_s, int json, const char *out_path,
                    double budget) {
    int64_t *ctxs = NULL, *bats = NULL;
    int nc = 0, nb = 0;
    char defctx[32];
    snprintf(defctx, sizeof defctx, "%lld", (long long)cfg->max_ctx);
    if (args_int_list("--context", ctx_s ? ctx_s : defctx, 1, (int64_t)1 << 30, &ctxs, &nc) ||
        args_flag_list("--batch", batch_s ? batch_s : "1", &bats, &nb)) {
        free(ctxs);
        return cli_usage_error(CMD, "%s", xf_error_msg());
    }
    /* the KV manager's bytes per slot: the one formula, the pool's (kv_cache.h) */
    double bpt = (double)sim_bytes_per_token(cfg, kvd); /* the pools' slots over every layer (serving_sim.h) */
    if (!(bpt > 0)) {
        free(ctxs);
        free(bats);
        return cli_fail(CMD, xf_errorf(XF_EINVAL, "KV bytes per token of %s overflow", cfg->name));
    }
    int rc = CLI_EXIT_OK;
    if (!json) {
        if (model_is_mla(cfg))
            printf("%s, KV %s: %.0f bytes per token (%lld layers x the latent row, kv_lora_rank %lld + qk_rope_head_dim %lld, x %s)\n\n",
                   cfg->name, dtype_name(kvd), bpt, (long long)cfg->n_layers, (long long)cfg->kv_lora_rank,
                   (long long)cfg->qk_rope_head_dim, dtype_name(kvd));
        else
            printf("%s, KV %s: %.0f bytes per token (2 x %lld layers x %lld KV heads x %lld head_dim x %s)\n\n", cfg->name, dtype_name(kvd), bpt,
                   (long long)cfg->n_layers, (long long)cfg->n_kv_heads, (long long)cfg->head_dim, dtype_name(kvd));
        if (cfg->sliding_window > 0)
            printf("%lld of %lld layers are windowed: they hold at most %lld tokens of a sequence\n\n", (long long)model_windowed_layers(cfg),
                   (long long)cfg->n_layers, (long long)cfg->sliding_window);
        char bb[32], bu[32];
        if (budget > 0) printf("KV budget %s bytes (%s)\n\n", size_bytes(budget, bb, sizeof bb), units_bytes(budget, bu, sizeof bu));
        printf("%10s %8s %20s %10s", "context", "batch", "bytes", "size");
        if (budget > 0) printf(" %10s %10s", "budget%", "max seqs");
        printf("\n");
        for (int i = 0; i < nc; i++)
            for (int j = 0; j < nb; j++) {
                double b = sim_kv_bytes_at(cfg, kvd, ctxs[i]) * (double)bats[j]; /* windowed layers hold the window */
                printf("%10lld %8lld %20s %10s", (long long)ctxs[i], (long long)bats[j], size_bytes(b, bb, sizeof bb),
                       units_bytes(b, bu, sizeof bu));
                if (budget > 0) {
                    double pct = 100 * b / budget;
                    printf(pct < 1e7 ? " %10.1f" : " %10.3g", pct);
                    printf(" %10.0f", floor(budget / sim_kv_bytes_at(cfg, kvd, ctxs[i])));
                }
                printf("\n");
            }
    }
    if (json || out_path) {
        cJSON *o = cJSON_CreateObject(), *arr = cJSON_CreateArray();
        int ok = o && arr && cJSON_AddStringToObject(o, "format", "xfprof-kv-size") && cJSON_AddNumberToObject(o, "version", 1) &&
                 cJSON_AddStringToObject(o, "model", cfg->name) && cJSON_AddStringToObject(o, "kvdtype", dtype_name(kvd)) &&
                 cJSON_AddNumberToObject(o, "bytes_per_token", bpt);
        if (ok && budget > 0) ok = cJSON_AddNumberToObject(o, "budget_bytes", budget) != NULL;
        for (int i = 0; ok && i < nc; i++)
            for (int j = 0; ok && j < nb; j++) {
                cJSON *e = cJSON_CreateObject();
                ok = e && cJSON_AddNumberToObject(e, "context", (double)ctxs[i]) && cJSON_AddNumberToObject(e, "batch", (double)bats[j]) &&
                     cJSON_AddNumberToObject(e, "bytes", sim_kv_bytes_at(cfg, kvd, ctxs[i]) * (double)bats[j]) &&
                     (budget <= 0 || cJSON_AddNumberToObject(e, "max_seqs", floor(budget / sim_kv_bytes_at(cfg, kvd, ctxs[i])))) &&
                     cJSON_AddItemToArray(arr, e);
                if (!ok) cJSON_Delete(e);
            }
        if (ok) {
            ok = cJSON_AddItemToObject(o, "sizes", arr);
            if (ok) arr = NULL;
        }
        char *text = ok ? cJSON_Print(o) : NULL;
        cJSON_Delete(arr);
        cJSON_Delete(o);
        if (!text) rc = cli_fail(CMD, xf_errorf(XF_ENOMEM, "out of memory"));
        else {
            size_t len = strlen(text);
            text[len] = '\n';
            xf_status s = file_write_atomic(out_path, text, len + 1);
            if (s) rc = cli_fail(CMD, s);
            else if (out_path) fprintf(stderr, "xfprof kv: wrote %s\n", out_path);
            free(text);
        }
    }
    free(ctxs);
    free(bats);
    return rc;
}

