/* The shared flags' bounds and defaults (limits.h). */
#include "core/limits.h"

#include <string.h>

static const xf_limit k_limits[] = {
    {"--batch", 1, XF_BATCH_MAX, "1"},
    {"--prompt", 1, XF_TOKENS_MAX, XF_DEFAULT_PROMPT},
    {"--gen", 0, XF_TOKENS_MAX, XF_DEFAULT_GEN},
    {"--threads", 1, XF_THREADS_MAX, NULL},
    {"--reps", 1, XF_REPS_MAX, "5"},
    {"--warmup", 0, XF_WARMUP_MAX, "1"},
    {"--group", 1, XF_GROUP_MAX, "128"},
    {"--seed", 0, INT64_MAX, "1"},
};

const xf_limit *limits_find(const char *flag) {
    for (size_t i = 0; flag && i < sizeof k_limits / sizeof k_limits[0]; i++)
        if (!strcmp(k_limits[i].flag, flag)) return &k_limits[i];
    return NULL;
}
