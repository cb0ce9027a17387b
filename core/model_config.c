/* The names of the RoPE kinds (core/model_config.h): records and config readers share them. */
#include "core/model_config.h"

#include <string.h>

static const char *const k_rope_names[ROPE_KIND_COUNT] = {"default", "linear", "dynamic", "llama3", "yarn"};

const char *rope_kind_name(rope_kind k) { return ((int)k >= 0 && k < ROPE_KIND_COUNT) ? k_rope_names[k] : "?"; }

int rope_kind_parse(const char *s) {
    for (int k = 0; s && k < ROPE_KIND_COUNT; k++)
        if (strcmp(s, k_rope_names[k]) == 0) return k;
    return -1;
}
