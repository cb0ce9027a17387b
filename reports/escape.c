#include "escape.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "core/text.h"

void esc_html(sbuf *b, const char *s) {
    if (!s) return;
    const char *run = s; /* start of the pending run of characters that need no escaping */
    for (const char *p = s; *p; p++) {
        const char *rep = NULL;
        unsigned char c = (unsigned char)*p;
        switch (c) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        default:
            if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) rep = "&#xFFFD;";
        }
        if (rep) {
            sbuf_putn(b, run, (size_t)(p - run));
            sbuf_puts(b, rep);
            run = p + 1;
        }
    }
    sbuf_puts(b, run);
}

char *esc_html_dup(const char *s) {
    sbuf b;
    sbuf_init(&b);
    esc_html(&b, s ? s : "");
    return sbuf_take(&b);
}

void esc_gnuplot(sbuf *b, const char *s) {
    sbuf_putn(b, "'", 1);
    for (const char *p = s ? s : ""; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '\'')
            sbuf_putn(b, "''", 2);
        else if (c < 0x20 || c == 0x7f)
            sbuf_putn(b, " ", 1);
        else
            sbuf_putn(b, p, 1);
    }
    sbuf_putn(b, "'", 1);
}

void esc_gnuplot_datum(sbuf *b, const char *s) {
    if (!s || !*s) {
        sbuf_putn(b, "-", 1);
        return;
    }
    for (const char *p = s; *p; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                 c == ':' || c == '+' || c == '-';
        sbuf_putn(b, ok ? p : "_", 1);
    }
}

void esc_terminal(sbuf *b, const char *s, int keep_newlines) {
    if (!s) return;
    const char *run = s;
    for (const char *p = s; *p;) {
        size_t n = text_safe_char(p, keep_newlines);
        if (n > 0) {
            p += n;
            continue;
        }
        sbuf_putn(b, run, (size_t)(p - run));
        sbuf_printf(b, "\\x%02x", (unsigned char)*p);
        run = ++p;
    }
    sbuf_puts(b, run);
}
