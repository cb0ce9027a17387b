/* libFuzzer harness: one line of a sweep's JSONL (what --resume reads back) -> sweep_line_parse. */
#include <stdint.h>
#include <stdlib.h>

#include "cli/sweep_line.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char key[640];
    record r;
    (void)sweep_line_parse((const char *)data, size, "fuzz", key, sizeof key, &r);
    record_free(&r);
    return 0;
}
