/* xfprof run --save-tokens FILE [--save-logits]: the prompt and generated ids of every sequence, and
 * optionally the last-position logits of every step, of every point, for checking a run against
 * another engine. The file is JSON Lines (format "xfprof-tokens", version 1, docs/record.md): a
 * header line, then one line per (point, step). */
#ifndef XF_RUN_TOKENS_H
#define XF_RUN_TOKENS_H

#include "core/record.h"
#include "reports/sbuf.h"
#include "runner/runner.h"

#define RUN_TOKENS_FORMAT "xfprof-tokens"
#define RUN_TOKENS_VERSION 1

typedef struct run_tokens {
    int logits; /* 1: each line carries the logits */
    sbuf text;  /* the lines so far */
} run_tokens;

/* Starts the file's text for the model; run_tokens_step is the run plan's on_step. */
void run_tokens_init(run_tokens *t, const model_config *cfg, int logits);
xf_status run_tokens_step(void *ctx, const run_step_view *v);
/* Writes the text to path atomically (nothing is left behind on failure) and frees it. */
xf_status run_tokens_write(run_tokens *t, const char *path);
void run_tokens_free(run_tokens *t);

#endif
