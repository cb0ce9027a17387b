/* The bounds and defaults of the parameters every command shares: one table, so that a flag has
 * the same name, bounds and default in every command (DESIGN.md's conventions). The parsers
 * (cli/args.h: args_flag_int, args_flag_list) look flags up here; the runner, the model and the
 * KV manager check the same constants. A command whose purpose needs another default says so in
 * its --help. */
#ifndef XF_LIMITS_H
#define XF_LIMITS_H

#include <stdint.h>

#define XF_BATCH_MAX (1 << 24)   /* sequences run together (kv --size sizes batches this large) */
#define XF_TOKENS_MAX (1 << 24)  /* prompt or generated tokens per sequence */
#define XF_THREADS_MAX 1024
#define XF_REPS_MAX 10000
#define XF_WARMUP_MAX 1000
#define XF_GROUP_MAX (1 << 20)   /* elements per int8/int4 scale */
#define XF_SHARDS_MAX 10000      /* sweep --shard i/n: at most n shards (Slurm arrays default to 1001 tasks) */
#define XF_PARALLEL_MAX 4096     /* --tp, --pp, --gpus: devices a model is split over */

#define XF_DEFAULT_REPS 5
#define XF_DEFAULT_WARMUP 1
#define XF_DEFAULT_SEED 1
#define XF_DEFAULT_KV_POLICY "paged:16"
/* The workload of the commands that model a request (predict, sweep): a 128-token prompt and 128
 * generated tokens. `run` measures the small embedded model in a few seconds by default and uses
 * its own (its help says why). */
#define XF_DEFAULT_PROMPT 128
#define XF_DEFAULT_GEN 128

/* One row per shared integer flag. */
typedef struct xf_limit {
    const char *flag;  /* "--batch" */
    int64_t min, max;
    const char *def;   /* default as the user would type it; NULL when the command decides */
} xf_limit;

/* The row for `flag` ("--batch"), NULL when it is not a shared flag. */
const xf_limit *limits_find(const char *flag);

#endif
