/* libFuzzer harness: a devices file (data/devices.json format) -> device_list_parse. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    device_list l = {0, NULL};
    if (device_list_parse(text, "fuzz", &l) == XF_OK) {
        for (int i = 0; i < l.n; i++) {
            (void)device_ridge(&l.items[i], XF_COMPUTE_TENSOR16);
            free(device_spec_to_json(&l.items[i]));
        }
    }
    device_list_free(&l);
    free(text);
    return 0;
}
