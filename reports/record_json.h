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

/* record_from_json of a document already parsed (a record inside another object, as in a sweep's
 * JSONL line): the numbers as parsed, not printed again (cJSON's printing keeps 15 digits). */
struct cJSON;
xf_status record_from_cjson(const struct cJSON *root, const char *source, record *r);

/* Reads a record file. One of up to 64 MiB is parsed whole (at most about 10 times its size in
 * memory, refused when that is not available); a larger one is read in a stream
 * (record_load_stream). */
xf_status record_load(const char *path, record *r);

/* Points of a streamed record that keep their ops (and tokens): the first RECORD_STREAM_KEEP_OPS
 * (the ones the advice analyses, analyzers/advice.h ADVICE_MAX_POINTS) and one more a renderer
 * asks for. The others keep workload, run, summary and memory: every table of points still has
 * them, and memory holds under a kilobyte per point (measured: 0.8 KiB) whatever the file's size. */
#define RECORD_STREAM_KEEP_OPS 256

/* record_load; a streamed read also keeps the ops of point `also` (0-based; -1 none). */
xf_status record_load_keep(const char *path, int64_t also, record *r);

/* Reads a record in a stream whatever its size: the file is scanned once for the byte spans of
 * its points (the rest, at most 1 GiB, is parsed whole), then each point is parsed on its own,
 * checked as record_from_json checks it, and keeps its ops only if it is among the first
 * RECORD_STREAM_KEEP_OPS or is `also`. Refuses what record_from_json refuses. */
xf_status record_load_stream(const char *path, int64_t also, record *r);

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
