/* libFuzzer harness: the CLI's list, range and size syntax (cli/args.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    int64_t *vals = NULL;
    int n = 0;
    if (args_int_list("--fuzz", text, 0, INT64_MAX, &vals, &n) == XF_OK && n > 4096) abort();
    free(vals);
    char **items = NULL;
    if (args_str_list("--fuzz", text, &items, &n) == XF_OK) args_str_list_free(items, n);
    double bytes;
    (void)args_size("--fuzz", text, &bytes);
    free(text);
    return 0;
}
