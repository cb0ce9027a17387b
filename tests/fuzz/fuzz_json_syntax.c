/* libFuzzer harness: core/json_util.c's syntax check (json_syntax_error), which names the first
 * error of a JSON text: it must never read past the text, its offset lies within it, and its line
 * and column agree with the offset. (cJSON is more lenient in places, e.g. "01", and stricter in
 * others, e.g. lone UTF-16 surrogates, so the two are not compared.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size ? size : 1); /* exactly the bytes: ASan sees any read past them */
    if (!text) return 0;
    memcpy(text, data, size);
    size_t off;
    int line, col, trunc;
    char what[96];
    if (json_syntax_error(text, size, &off, &line, &col, &trunc, what, sizeof what)) {
        if (off > size || line < 1 || col < 1 || !what[0]) abort();
        int nl = 1;
        for (size_t i = 0; i < off; i++) nl += text[i] == '\n';
        if (nl != line) abort();
    }
    free(text);
    return 0;
}
