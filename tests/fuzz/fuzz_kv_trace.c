/* libFuzzer harness: a KV request trace (CSV or JSONL) -> sim_trace_parse. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reference_model/serving_sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    sim_trace t;
    memset(&t, 0, sizeof t);
    if (sim_trace_parse(text, "fuzz", 1 << 20, &t) == XF_OK) {
        for (int64_t i = 1; i < t.n; i++)
            if (t.req[i].arrival_s < t.req[i - 1].arrival_s) abort(); /* promised sorted */
    }
    sim_trace_free(&t);
    free(text);
    return 0;
}
