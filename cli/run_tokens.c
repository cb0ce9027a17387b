/* See run_tokens.h. */
#include "run_tokens.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/fileio.h"
#include <cjson/cJSON.h>

void run_tokens_init(run_tokens *t, const model_config *cfg, int logits) {
    t->logits = logits;
    sbuf_init(&t->text);
    cJSON *h = cJSON_CreateObject(); /* the header: cJSON escapes the model's name */
    char *line = NULL;
    if (h && cJSON_AddStringToObject(h, "format", RUN_TOKENS_FORMAT) && cJSON_AddNumberToObject(h, "version", RUN_TOKENS_VERSION) &&
        cJSON_AddStringToObject(h, "model", cfg->name) && cJSON_AddNumberToObject(h, "vocab", (double)cfg->vocab) &&
        cJSON_AddBoolToObject(h, "logits", logits))
        line = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    if (line) sbuf_printf(&t->text, "%s\n", line);
    else t->text.oom = 1;
    cJSON_free(line);
}

static void ids_array(sbuf *b, const int32_t *v, int64_t n) {
    sbuf_puts(b, "[");
    for (int64_t i = 0; i < n; i++) sbuf_printf(b, "%s%d", i ? "," : "", (int)v[i]);
    sbuf_puts(b, "]");
}

xf_status run_tokens_step(void *ctx, const run_step_view *v) {
    run_tokens *t = ctx;
    sbuf *b = &t->text;
    sbuf_printf(b, "{\"point\":%d,\"step\":%lld", v->point, (long long)v->step);
    if (v->prompt) {
        sbuf_puts(b, ",\"prompt\":[");
        for (int64_t s = 0; s < v->n_seqs; s++) {
            if (s) sbuf_puts(b, ",");
            ids_array(b, v->prompt + s * v->prompt_len, v->prompt_len);
        }
        sbuf_puts(b, "]");
    }
    sbuf_puts(b, ",\"tokens\":");
    ids_array(b, v->tokens, v->n_seqs);
    if (t->logits) {
        sbuf_puts(b, ",\"logits\":[");
        for (int64_t s = 0; s < v->n_seqs; s++) {
            sbuf_puts(b, s ? ",[" : "[");
            for (int64_t j = 0; j < v->vocab; j++) {
                float x = v->logits[s * v->vocab + j];
                if (isfinite(x)) sbuf_printf(b, "%s%.9g", j ? "," : "", (double)x);
                else sbuf_printf(b, "%snull", j ? "," : ""); /* JSON has no inf or NaN */
            }
            sbuf_puts(b, "]");
        }
        sbuf_puts(b, "]");
    }
    sbuf_puts(b, "}\n");
    return sbuf_status(b);
}

xf_status run_tokens_write(run_tokens *t, const char *path) {
    xf_status s = sbuf_status(&t->text);
    if (!s) s = file_write_atomic(path, t->text.data, t->text.len);
    run_tokens_free(t);
    return s;
}

void run_tokens_free(run_tokens *t) {
    if (t) sbuf_free(&t->text);
}
