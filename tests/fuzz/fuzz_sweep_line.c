/* libFuzzer harness: one line of a sweep's JSONL -> sweep_line_parse (what --resume reads back)
 * and sweep_line_parse_meta (what merge reads: index, shard, grid). */
#include <stdint.h>
#include <stdlib.h>

#include "cli/sweep_line.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char key[640];
    record r;
    (void)sweep_line_parse((const char *)data, size, "fuzz", key, sizeof key, &r);
    record_free(&r);
    sweep_line_meta m;
    (void)sweep_line_parse_meta((const char *)data, size, "fuzz", &m);
    sweep_line_meta_free(&m);
    return 0;
}
