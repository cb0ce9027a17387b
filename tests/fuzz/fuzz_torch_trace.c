/* libFuzzer harness: any bytes as a torch.profiler trace -> import_torch_trace_buffer (the yajl
 * streaming parser, the nesting and grouping); what imports must read back (fuzz_import_check.h). */
#include <stdint.h>

#include "fuzz_import_check.h"
#include "importers/importer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    record r;
    import_stats st;
    if (import_torch_trace_buffer((const char *)data, size, "fuzz", &r, &st) == XF_OK) fuzz_import_check(&r);
    record_free(&r);
    return 0;
}
