/* Text from files on a terminal: every string that came from a file (a record's model name, a
 * config's field, an error that quotes a value) is made safe before it reaches a terminal or a
 * Markdown comment. C0 controls (but tab and, where asked, newline), DEL, C1 controls (U+0080 to
 * U+009F) and bytes that are not well-formed UTF-8 are written as \xNN, so ESC]0;... BEL shows
 * as \x1b]0;...\x07 instead of retitling the terminal. */
#ifndef XF_TEXT_H
#define XF_TEXT_H

#include <stddef.h>

/* Length (1 to 4) of the printable, well-formed UTF-8 character at s, or 0 when the byte at s
 * must be escaped. keep_newlines: '\n' counts as printable. *s must not be NUL. */
size_t text_safe_char(const char *s, int keep_newlines);

/* Copies `in` into out (cap bytes, always NUL-terminated, cut at a character boundary) with
 * every unsafe byte as \xNN. Returns the length written. No allocation (safe for OOM messages). */
size_t text_sanitize(const char *in, char *out, size_t cap, int keep_newlines);

#endif
