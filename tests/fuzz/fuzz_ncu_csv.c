/* libFuzzer harness: any bytes as an Nsight Compute CSV -> import_ncu_csv_buffer (the CSV
 * reader, units, the kernel map); what imports must read back (fuzz_import_check.h). */
#include <stdint.h>

#include "fuzz_import_check.h"
#include "importers/importer.h"

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
    if (import_ncu_csv_buffer((const char *)data, size, "fuzz", &map, &r, NULL) == XF_OK) fuzz_import_check(&r);
    record_free(&r);
    return 0;
}
