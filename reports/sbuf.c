#include "sbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sbuf_init(sbuf *b) { memset(b, 0, sizeof *b); }

void sbuf_free(sbuf *b) {
    if (!b) return;
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* Makes room for `extra` more bytes plus the NUL. */
static int sbuf_reserve(sbuf *b, size_t extra) {
    if (b->oom) return 0;
    if (extra > SIZE_MAX - b->len - 1) {
        b->oom = 1;
        return 0;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void sbuf_putn(sbuf *b, const char *s, size_t n) {
    if (!sbuf_reserve(b, n)) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void sbuf_puts(sbuf *b, const char *s) { sbuf_putn(b, s, strlen(s)); }

void sbuf_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        sbuf_putn(b, small, (size_t)n);
        return;
    }
    if (!sbuf_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

xf_status sbuf_status(const sbuf *b) {
    return b->oom ? xf_errorf(XF_ENOMEM, "out of memory while building a report text") : XF_OK;
}

char *sbuf_take(sbuf *b) {
    if (b->oom) {
        sbuf_free(b);
        return NULL;
    }
    char *p = b->data;
    if (!p) p = calloc(1, 1);
    memset(b, 0, sizeof *b);
    return p;
}
