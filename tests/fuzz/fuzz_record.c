/* libFuzzer harness: a record of any kind -> record_from_json; what parses must serialize, and
 * parse again to the same text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reports/record_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    record r;
    if (record_from_json(text, "fuzz", &r) == XF_OK) {
        char *a = record_to_json(&r);
        if (a) {
            record back;
            if (record_from_json(a, "fuzz-again", &back) != XF_OK) abort(); /* our own output must read back */
            char *b = record_to_json(&back);
            if (b && strcmp(a, b) != 0) abort();
            free(b);
            record_free(&back);
        }
        free(a);
    }
    record_free(&r);
    free(text);
    return 0;
}
