/* Checked access to untrusted JSON (cJSON): every getter checks presence and type and names the
 * field in its message. `ctx` is a prefix for messages (a path or "record.points[3]"). */
#ifndef XF_JSON_UTIL_H
#define XF_JSON_UTIL_H

#include <stdint.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "status.h"

/* Parses text; XF_EPARSE with the position of the error (and "truncated" when it ends early). */
xf_status json_parse(const char *text, const char *ctx, cJSON **out);

/* cJSON_ParseWithLength that tells a failed allocation (XF_ENOMEM, "ctx: out of memory parsing
 * JSON") from bad text (XF_EPARSE "ctx: not valid JSON"), for callers that word their own error.
 * *out is freed by the caller with cJSON_Delete. */
xf_status json_parse_len(const char *text, size_t len, const char *ctx, cJSON **out);

/* Required fields: XF_EINVAL "ctx: missing field 'x'" / "field 'x' must be a number". */
xf_status json_get_number(const cJSON *obj, const char *key, const char *ctx, double *out);
xf_status json_get_int(const cJSON *obj, const char *key, const char *ctx, int64_t lo, int64_t hi, int64_t *out);
xf_status json_get_string(const cJSON *obj, const char *key, const char *ctx, char *buf, size_t len);
xf_status json_get_bool(const cJSON *obj, const char *key, const char *ctx, int *out);

/* Optional fields: *present = 0 and *out untouched when absent (or JSON null); type errors as above. */
xf_status json_opt_number(const cJSON *obj, const char *key, const char *ctx, double *out, int *present);
xf_status json_opt_int(const cJSON *obj, const char *key, const char *ctx, int64_t lo, int64_t hi, int64_t *out, int *present);
xf_status json_opt_string(const cJSON *obj, const char *key, const char *ctx, char *buf, size_t len, int *present);
xf_status json_opt_bool(const cJSON *obj, const char *key, const char *ctx, int *out, int *present);

/* Adds a number; non-finite values become null (JSON has no NaN). Returns 0 on OOM. */
int json_add_number(cJSON *obj, const char *key, double v);

/* The first syntax error of text[0..len) as strict JSON: returns 1 and fills the byte offset, its
 * line and column (from 1), whether the text ended early (*truncated) and what was wrong; 0 when
 * the text is valid JSON. json_parse's messages come from here. */
int json_syntax_error(const char *text, size_t len, size_t *offset, int *line, int *column, int *truncated, char *what,
                      size_t what_len);

#endif
