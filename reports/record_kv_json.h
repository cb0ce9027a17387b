/* The record's "kv" section as JSON (helper kv owns this file). */
#ifndef XF_RECORD_KV_JSON_H
#define XF_RECORD_KV_JSON_H

#include <cjson/cJSON.h>

#include "core/record_kv.h"
#include "core/status.h"

/* New cJSON object for the section; caller owns it. NULL on OOM. */
cJSON *record_kv_to_json(const record_kv *kv);

/* Parses the section (untrusted); *out owned by the caller (record_kv_free), also set on error. */
xf_status record_kv_from_json(const cJSON *j, const char *ctx, record_kv **out);

#endif
