/* libFuzzer harness: a machine file's "calibration" object (core/calibration.h) ->
 * calib_table_parse_machine, then what the predictor does with a table it accepted: merge,
 * interpolate at a few shapes (x, y, z), and write it back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/predict_calibrated.h"
#include "core/calibration.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    calib_table t;
    int present = 0;
    if (calib_table_parse_machine((const char *)data, size, "fuzz", &t, &present) == XF_OK && present) {
        calib_table_merge(&t);
        static const double xs[] = {1, 1e3, 1e6, 1e9, 1e15};
        for (int f = 0; f < CALIB_FAMILY_COUNT; f++)
            for (int k = 0; k < 5; k++) {
                double e;
                int cl, ot;
                (void)predcal_efficiency(&t, (calib_family)f, XF_FP32, (calib_tier)(k & 1), xs[k], xs[4 - k], xs[(k + 2) % 5], &e, &cl, &ot);
            }
        free(calib_table_to_json(&t));
    }
    calib_table_free(&t);
    return 0;
}
