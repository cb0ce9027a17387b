/* libFuzzer harness: a record of any kind -> record_from_json. Whatever xfprof reads it can write,
 * and what it writes reads back and writes again to the same bytes (write -> read -> write). */
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
        char *a = NULL;
        xf_status s = record_json_text(&r, &a);
        if (s != XF_OK && s != XF_ENOMEM) abort(); /* a record we accept must write (no null, no refusal) */
        if (a) {
            record back;
            if (record_from_json(a, "fuzz-again", &back) != XF_OK) abort(); /* our own output must read back */
            char *b = NULL;
            s = record_json_text(&back, &b);
            if (s != XF_OK && s != XF_ENOMEM) abort();
            if (b && strcmp(a, b) != 0) abort(); /* the same bytes */
            free(b);
            record_free(&back);
        }
        free(a);
    }
    record_free(&r);
    free(text);
    return 0;
}
