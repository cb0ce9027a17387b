/* One line of a sweep's JSONL: {"format":"xfprof-sweep-line","version":1,"key":"...","record":{...}}.
 * Each line stands alone (a one-point record and the key of its point), so an interrupted sweep
 * keeps every finished point and --resume can read them back. */
#ifndef XF_SWEEP_LINE_H
#define XF_SWEEP_LINE_H

#include <stddef.h>

#include "core/record.h"

#define SWEEP_LINE_FORMAT "xfprof-sweep-line"
#define SWEEP_LINE_VERSION 1

/* The line for point `key` with its one-point record, newline included; *len its length.
 * Freed by the caller with free(); NULL on OOM. */
char *sweep_line_make(const char *key, const record *r, size_t *len);

/* Parses one line (untrusted: `len` bytes, no NUL needed) into its key and record. *r is
 * record_init'ed here; free it with record_free, also after an error. */
xf_status sweep_line_parse(const char *text, size_t len, const char *ctx, char *key, size_t keylen, record *r);

#endif
