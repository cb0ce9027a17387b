/* What both importer harnesses check on an input that imports: given a device (the caller's
 * part, cli/cmd_import.c), the record must be one xfprof's own reader accepts and writes back to
 * the same text. Aborts otherwise (libFuzzer reports the input). */
#ifndef XF_FUZZ_IMPORT_CHECK_H
#define XF_FUZZ_IMPORT_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/record_json.h"

static void fuzz_import_check(record *r) {
    if (r->n_points != 1) abort();
    snprintf(r->device.name, sizeof r->device.name, "fuzz");
    r->device.bandwidth_Bps = 1e12;
    r->device.peak_flops[XF_COMPUTE_FP32] = 1e13;
    char *a = record_to_json(r);
    if (!a) return; /* out of memory */
    record back;
    if (record_from_json(a, "fuzz-again", &back) != XF_OK) {
        fprintf(stderr, "import does not read back: %s\n", xf_error_msg());
        abort();
    }
    char *b = record_to_json(&back);
    if (b && strcmp(a, b) != 0) abort();
    free(b);
    free(a);
    record_free(&back);
}

#endif
