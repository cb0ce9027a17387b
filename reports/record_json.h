/* The record as JSON: {"format":"xfprof-record","version":1,...}. docs/record.md is the schema.
 * Readers treat the text as untrusted: every field is type- and range-checked, and other
 * formats or newer versions are refused with a message that says so. */
#ifndef XF_RECORD_JSON_H
#define XF_RECORD_JSON_H

#include <stdio.h>

#include "core/record.h"

/* Serializes the record into *out (caller frees with free()). XF_ENOMEM, or XF_EINVAL naming the
 * field when a figure is not finite (the schema has a number there: nothing is written then). */
xf_status record_json_text(const record *r, char **out);

/* record_json_text without the status: NULL on any failure (the message is in xf_error_msg()). */
char *record_to_json(const record *r);

/* Parses a record text into *r (record_init'ed by this call; free with record_free, also on
 * error). `source` (a path, may be NULL) prefixes messages. */
xf_status record_from_json(const char *text, const char *source, record *r);

/* Reads a record file (at most 1 GiB). */
xf_status record_load(const char *path, record *r);

/* Writes the record to `path` atomically (temporary file in the same folder, then rename), or
 * to stdout when path is NULL or "-". */
xf_status record_save(const record *r, const char *path);

/* One point as JSON text (the form it takes in "points"); caller frees *out. XF_EINVAL naming
 * the field when a figure is not finite. */
xf_status record_point_json_text(const record_point *p, char **out);

/* A record whose points are too many to hold: r gives everything but the points (its own points
 * are ignored; n_points of them are written), and point_text(ctx, j, &text, &len) gives the JSON of
 * point j (from record_point_json_text; the callback keeps ownership, valid until the next call).
 * Written as record_save does, piece by piece: the bytes are those of record_save of the whole
 * record. */
typedef xf_status (*record_point_text_fn)(void *ctx, int64_t j, const char **text, size_t *len);
xf_status record_save_stream(const record *r, int64_t n_points, record_point_text_fn point_text, void *ctx, const char *path);

#endif
