/* xfprof kv --size (kv_size.c). */
#ifndef XF_KV_SIZE_H
#define XF_KV_SIZE_H

#include "core/dtype.h"
#include "core/model_config.h"

/* Prints (json 0) or writes (json 1 to stdout, or out_path) the KV sizes of cfg at kvd for every
 * context of ctx_s (NULL: the model's) and batch of batch_s (NULL: 1); budget > 0 adds the share of
 * the budget and how many sequences fit. Returns an exit code. */
int cli_kv_size(const model_config *cfg, xf_dtype kvd, const char *ctx_s, const char *batch_s, int json, const char *out_path,
                double budget);

#endif
