/* Escaping of untrusted strings (model names, device names, env values, anything from a config,
 * record or trace) for the places the reports put them. Every such string goes through one of
 * these; a model named "<script>alert(1)</script>" renders as text. */
#ifndef XF_ESCAPE_H
#define XF_ESCAPE_H

#include "sbuf.h"

/* Appends s escaped for HTML text and for a quoted attribute value (& < > " ' become entities;
 * control characters other than tab and newline become U+FFFD). NULL appends nothing. */
void esc_html(sbuf *b, const char *s);

/* The same into a new string; caller frees with free(). NULL on OOM. */
char *esc_html_dup(const char *s);

/* Appends s as a complete gnuplot single-quoted string literal: the quotes, ' doubled, and
 * control characters (a newline would end the command) replaced by spaces. Use with the
 * `noenhanced` terminal option so ^ _ @ { } are not markup. */
void esc_gnuplot(sbuf *b, const char *s);

/* Appends s as one whitespace-free token of a gnuplot data file: every character outside
 * [A-Za-z0-9_.:+-] becomes '_'; an empty string becomes "-". */
void esc_gnuplot_datum(sbuf *b, const char *s);

/* Appends s for a terminal or Markdown: unsafe bytes as \xNN (core/text.h). keep_newlines: '\n'
 * passes (a rendered table); else it is escaped too (one field). NULL appends nothing. */
void esc_terminal(sbuf *b, const char *s, int keep_newlines);

#endif
