/* libFuzzer harness: any bytes as a torch.profiler trace -> import_torch_trace_buffer (the yajl
 * streaming parser, the nesting and grouping). What imports must be a record that xfprof's own
 * reader accepts, and that serializes to the same text again. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importers/importer.h"
#include "reports/record_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    record r;
    import_stats st;
    if (import_torch_trace_buffer((const char *)data, size, "fuzz", &r, &st) == XF_OK) {
        if (r.n_points != 1) abort();
        /* the device is the caller's part (cli/cmd_import.c): any valid one */
        snprintf(r.device.name, sizeof r.device.name, "fuzz");
        r.device.bandwidth_Bps = 1e12;
        r.device.peak_flops[XF_COMPUTE_FP32] = 1e13;
        char *a = record_to_json(&r);
        if (a) {
            record back;
            if (record_from_json(a, "fuzz-again", &back) != XF_OK) { /* an import must read back */
                fprintf(stderr, "import does not read back: %s\n", xf_error_msg());
                abort();
            }
            char *b = record_to_json(&back);
            if (b && strcmp(a, b) != 0) abort();
            free(b);
            record_free(&back);
        }
        free(a);
    }
    record_free(&r);
    return 0;
}
