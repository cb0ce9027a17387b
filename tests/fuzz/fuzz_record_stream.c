/* libFuzzer harness: a record of any kind -> record_load_stream, the reader of records too big to
 * parse whole. It must never take what the whole reader (record_from_json) refuses, and what both
 * take must be the same record: the same bytes written back. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "reports/record_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz-record", 0);
    if (fd < 0) return 0;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) {
            close(fd);
            return 0;
        }
        done += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    record st;
    xf_status s = record_load_stream(path, -1, &st);
    close(fd);
    char *text = malloc(size + 1);
    if (!text) {
        record_free(&st);
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    record whole;
    xf_status w = record_from_json(text, "fuzz", &whole);
    if (s == XF_OK && w != XF_OK && w != XF_ENOMEM) abort(); /* the streamed reader took what the whole reader refuses */
    if (s == XF_OK && w == XF_OK && st.ops_left_out == 0) {
        char *a = NULL, *b = NULL;
        if (record_json_text(&st, &a) == XF_OK && record_json_text(&whole, &b) == XF_OK && strcmp(a, b) != 0) abort();
        free(a);
        free(b);
    }
    record_free(&whole);
    record_free(&st);
    free(text);
    return 0;
}
