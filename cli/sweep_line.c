#include "sweep_line.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/json_util.h"
#include "reports/record_json.h"

#define LINE_FORMAT SWEEP_LINE_FORMAT
#define LINE_VERSION SWEEP_LINE_VERSION

/* One line: {"format":"xfprof-sweep-line","version":1,"key":"...","record":{...}}\n.
 * *out freed by the caller; NULL on OOM. */
char *sweep_line_make(const char *key, const record *r, size_t *len) {
    char *rec = record_to_json(r);
    if (!rec) return NULL;
    cJSON *k = cJSON_CreateString(key);
    char *ks = k ? cJSON_PrintUnformatted(k) : NULL;
    cJSON_Delete(k);
    if (!ks) {
        free(rec);
        return NULL;
    }
    size_t n = strlen(rec) + strlen(ks) + 128;
    char *line = malloc(n);
    if (line) *len = (size_t)snprintf(line, n, "{\"format\":\"%s\",\"version\":%d,\"key\":%s,\"record\":%s}\n", LINE_FORMAT, LINE_VERSION, ks, rec);
    free(rec);
    free(ks);
    return line;
}

/* Parses one line into key and record. */
xf_status sweep_line_parse(const char *text, size_t len, const char *ctx, char *key, size_t keylen, record *r) {
    record_init(r, "");
    cJSON *root = NULL;
    xf_status ps = json_parse_len(text, len, ctx, &root); /* out of memory is not a bad line */
    if (ps != XF_OK) return ps;
    xf_status s = XF_OK;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    int64_t ver;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, LINE_FORMAT) != 0) {
        s = xf_errorf(XF_EFORMAT, "%s: not an xfprof sweep line (\"format\" must be \"%s\")", ctx, LINE_FORMAT);
    } else if ((s = json_get_int(root, "version", ctx, 1, 1 << 20, &ver)) == XF_OK && ver > LINE_VERSION) {
        s = xf_errorf(XF_EFORMAT, "%s: sweep line version %lld is newer than this xfprof reads (%d)", ctx, (long long)ver, LINE_VERSION);
    }
    if (s == XF_OK) s = json_get_string(root, "key", ctx, key, keylen);
    if (s == XF_OK) {
        const cJSON *rj = cJSON_GetObjectItemCaseSensitive(root, "record");
        char *rt = cJSON_IsObject(rj) ? cJSON_PrintUnformatted(rj) : NULL;
        if (!cJSON_IsObject(rj)) s = xf_errorf(XF_EINVAL, "%s: missing object 'record'", ctx);
        else if (!rt) s = xf_errorf(XF_ENOMEM, "out of memory");
        else {
            record_free(r);
            s = record_from_json(rt, ctx, r);
            if (s == XF_OK && r->n_points != 1) s = xf_errorf(XF_EINVAL, "%s: the record must hold exactly one point", ctx);
        }
        free(rt);
    }
    cJSON_Delete(root);
    return s;
}

