/* libFuzzer harness: a combined callgrind dump (what xfprof run --callgrind's probe reads back after
 * every repetition) -> callgrind_parse. Every part handed over must carry an in-range label; the
 * bytes consumed never exceed the input. */
#include <stdint.h>
#include <stdlib.h>

#include "probes/callgrind.h"

static xf_status check_part(void *ctx, const callgrind_part *p) {
    (void)ctx;
    if (p->has_range && (p->range.phase < 0 || p->range.phase >= XF_PHASE_COUNT || p->range.kind < 0 ||
                         p->range.kind >= OP_KIND_COUNT || p->range.layer < -1 || p->range.step < 0))
        abort();
    return XF_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t used = 0;
    (void)callgrind_parse((const char *)data, size, check_part, NULL, &used);
    if (used > size) abort();
    return 0;
}
