/* libFuzzer harness: a /proc/self/smaps text -> hugemem_granted_in over ranges taken from the
 * first bytes; the bytes granted must be -1 (unreadable) or >= 0, and 0 for a text without an
 * AnonHugePages field. A mapping listed twice counts twice, so the ranges' total is no bound. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/hugemem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 8) return 0;
    /* two ranges from the first 8 bytes: starts and lengths in units of 1 MiB below 64 GiB */
    hugemem_range r[2];
    for (int i = 0; i < 2; i++) {
        uintptr_t start = ((uintptr_t)data[4 * i] << 8 | data[4 * i + 1]) << 20;
        int64_t len = (int64_t)(data[4 * i + 2] << 8 | data[4 * i + 3]) << 20;
        r[i].p = (const void *)start;
        r[i].bytes = len;
    }
    data += 8, size -= 8;
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    int64_t g = hugemem_granted_in(s, r, 2);
    if (g < 0 || (!strstr(s, "AnonHugePages:") && g != 0)) abort();
    free(s);
    return 0;
}
