/* The shared flags' bounds and defaults (limits.h). */
#include "core/limits.h"

#include <string.h>

static const xf_limit k_limits[] = {
    {"--batch", 1, XF_BATCH_MAX, "1"},
    {"--prompt", 1, XF_TOKENS_MAX, "128"},
    {"--gen", 0, XF_TOKENS_MAX, "128"},
    {"--threads", 1, XF_THREADS_MAX, NULL},
    {"--reps", 1, XF_REPS_MAX, "5"},
    {"--warmup", 0, XF_WARMUP_MAX, "1"},
    {"--group", 1, XF_GROUP_MAX, "128"},
    {"--seed", 0, ((int64_t)1 << 53) - 1, "1"}, /* records keep seeds as JSON numbers: exact below 2^53 */
    {"--tp", 1, XF_PARALLEL_MAX, "1"},
    {"--pp", 1, XF_PARALLEL_MAX, "1"},
    {"--micro-batches", 1, XF_BATCH_MAX, "1"},
    {"--gpus", 1, XF_PARALLEL_MAX, NULL}, /* NULL: tp * pp */
};

const xf_limit *limits_find(const char *flag) {
    for (size_t i = 0; flag && i < sizeof k_limits / sizeof k_limits[0]; i++)
        if (!strcmp(k_limits[i].flag, flag)) return &k_limits[i];
    return NULL;
}
