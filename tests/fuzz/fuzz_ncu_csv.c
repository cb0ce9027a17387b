/* libFuzzer harness: any bytes as an Nsight Compute CSV -> import_ncu_csv_buffer (the CSV
 * reader, units, the kernel map). What imports must be a record that xfprof's own reader accepts
 * and that serializes to the same text again. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importers/importer.h"
#include "reports/record_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static import_kernel_map map;
    static int have_map;
    if (!have_map) {
        const char *j = "{\"format\":\"xfprof-kernel-map\",\"version\":1,\"map\":[{\"pattern\":\"*flash*\",\"op\":\"attention\"},"
                        "{\"pattern\":\"*norm*\",\"op\":\"attn_norm\"}]}";
        if (import_kernel_map_parse(j, "fuzz-map", &map) != XF_OK) abort();
        have_map = 1;
    }
    record r;
    if (import_ncu_csv_buffer((const char *)data, size, "fuzz", &map, &r, NULL) == XF_OK) {
        snprintf(r.device.name, sizeof r.device.name, "fuzz"); /* the caller's part: any valid device */
        r.device.bandwidth_Bps = 1e12;
        r.device.peak_flops[XF_COMPUTE_FP32] = 1e13;
        char *a = record_to_json(&r);
        if (a) {
            record back;
            if (record_from_json(a, "fuzz-again", &back) != XF_OK) {
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
