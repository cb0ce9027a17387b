/* A growable text buffer for the renderers (HTML, trace, gnuplot scripts and data). Appends never
 * fail loudly: the first allocation failure sets `oom`, later appends are no-ops, and the caller
 * checks sbuf_ok() once at the end. */
#ifndef XF_SBUF_H
#define XF_SBUF_H

#include <stddef.h>

#include "core/status.h"

typedef struct sbuf {
    char *data; /* NUL-terminated when len > 0 or after sbuf_init; owned */
    size_t len;
    size_t cap;
    int oom;    /* 1 after an allocation failed or a size overflowed */
} sbuf;

void sbuf_init(sbuf *b);
void sbuf_free(sbuf *b); /* NULL is fine */

void sbuf_putn(sbuf *b, const char *s, size_t n);
void sbuf_puts(sbuf *b, const char *s);
void sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* XF_OK, or XF_ENOMEM with a message when an append failed. */
xf_status sbuf_status(const sbuf *b);

/* Hands the text to the caller (freed with free()) and leaves *b empty; NULL after an OOM. */
char *sbuf_take(sbuf *b);

#endif
