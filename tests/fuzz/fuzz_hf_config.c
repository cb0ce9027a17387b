/* libFuzzer harness: Hugging Face config.json text -> config_parse_hf (+ validate, counts). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reference_model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    model_config cfg;
    if (config_parse_hf(text, "fuzz", &cfg) == XF_OK) {
        /* A config that parsed must be usable by everything downstream without overflow. */
        (void)config_param_count(&cfg);
        (void)config_kv_elems_per_token(&cfg);
    }
    free(text);
    return 0;
}
