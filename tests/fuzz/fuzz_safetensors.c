/* libFuzzer harness: a .safetensors file (8-byte header length, JSON header, data) -> st_file_open
 * and every tensor read back. Offsets past the end, overlaps, wrong dtypes and huge claimed
 * headers must be refused, never read. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "reference_model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/xfprof-fuzz-st-%d.safetensors", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    st_file *st = NULL;
    if (st_file_open(path, &st) == XF_OK) {
        float sink = 0;
        for (int i = 0; i < st_file_count(st); i++) {
            const st_tensor *t = st_file_tensor(st, i);
            if (t->n_elems > 0) sink += st_tensor_get(t, 0) + st_tensor_get(t, t->n_elems - 1);
        }
        (void)sink;
    }
    st_file_close(st);
    return 0;
}
