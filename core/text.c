#include "text.h"

#include <stdio.h>
#include <string.h>

size_t text_safe_char(const char *str, int keep_newlines) {
    const unsigned char *s = (const unsigned char *)str;
    unsigned c = s[0];
    if (c < 0x80) {
        if (c == '\t' || (c == '\n' && keep_newlines)) return 1;
        return (c < 0x20 || c == 0x7f) ? 0 : 1;
    }
    size_t n;
    unsigned cp, min;
    if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07, min = 0x10000;
    else return 0; /* a continuation byte alone, an overlong lead (C0, C1) or past U+10FFFF */
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0; /* includes the NUL that ends the string */
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0; /* overlong, too large, surrogate */
    if (cp >= 0x80 && cp <= 0x9f) return 0; /* C1 controls: CSI (U+009B) is ESC [ on many terminals */
    return n;
}

size_t text_sanitize(const char *in, char *out, size_t cap, int keep_newlines) {
    if (cap == 0) return 0;
    size_t o = 0;
    for (const char *p = in; p && *p;) {
        size_t n = text_safe_char(p, keep_newlines);
        if (n > 0) {
            if (o + n >= cap) break;
            memcpy(out + o, p, n);
            o += n;
            p += n;
        } else {
            if (o + 4 >= cap) break;
            snprintf(out + o, 5, "\\x%02x", (unsigned char)*p);
            o += 4;
            p++;
        }
    }
    out[o] = '\0';
    return o;
}
