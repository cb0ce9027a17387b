#include "sweep_line.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/json_util.h"
#include "reports/record_json.h"

#define LINE_FORMAT SWEEP_LINE_FORMAT
#define LINE_VERSION SWEEP_LINE_VERSION

/* See sweep_line.h. *out freed by the caller; NULL on OOM. */
char *sweep_line_make(const char *key, const sweep_line_place *pl, const record *r, size_t *len) {
    char *rec = record_to_json(r);
    if (!rec) return NULL;
    cJSON *k = cJSON_CreateString(key);
    char *ks = k ? cJSON_PrintUnformatted(k) : NULL;
    cJSON_Delete(k);
    if (!ks) {
        free(rec);
        return NULL;
    }
    char place[128] = "";
    const char *axes = "";
    if (pl) {
        char sh[48];
        sweep_shard_name(pl->shard, sh, sizeof sh);
        snprintf(place, sizeof place, ",\"index\":%lld,\"shard\":\"%s\",\"grid\":{\"points\":%lld,\"hash\":\"%016" PRIx64 "\",\"axes\":",
                 (long long)pl->index, sh, (long long)pl->grid->n_points, pl->grid->hash);
        axes = pl->grid->axes;
    }
    size_t n = strlen(rec) + strlen(ks) + strlen(place) + strlen(axes) + 128;
    char *line = malloc(n);
    if (line)
        *len = (size_t)snprintf(line, n, "{\"format\":\"%s\",\"version\":%d,\"key\":%s%s%s%s,\"record\":%s}\n", LINE_FORMAT,
                                LINE_VERSION, ks, place, axes, pl ? "}" : "", rec);
    free(rec);
    free(ks);
    return line;
}

/* The line's root, its format and version checked. */
static xf_status line_root(const char *text, size_t len, const char *ctx, cJSON **root) {
    xf_status s = json_parse_len(text, len, ctx, root); /* out of memory is not a bad line */
    if (s != XF_OK) return s;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(*root, "format");
    int64_t ver;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, LINE_FORMAT) != 0)
        return xf_errorf(XF_EFORMAT, "%s: not an xfprof sweep line (\"format\" must be \"%s\")", ctx, LINE_FORMAT);
    if ((s = json_get_int(*root, "version", ctx, 1, 1 << 20, &ver)) == XF_OK && ver > LINE_VERSION)
        s = xf_errorf(XF_EFORMAT, "%s: sweep line version %lld is newer than this xfprof reads (%d)", ctx, (long long)ver, LINE_VERSION);
    return s;
}

/* Parses one line into key and record. */
xf_status sweep_line_parse(const char *text, size_t len, const char *ctx, char *key, size_t keylen, record *r) {
    record_init(r, "");
    cJSON *root = NULL;
    xf_status s = line_root(text, len, ctx, &root);
    if (s == XF_OK) s = json_get_string(root, "key", ctx, key, keylen);
    if (s == XF_OK) {
        const cJSON *rj = cJSON_GetObjectItemCaseSensitive(root, "record");
        if (!cJSON_IsObject(rj)) s = xf_errorf(XF_EINVAL, "%s: missing object 'record'", ctx);
        else {
            record_free(r);
            s = record_from_cjson(rj, ctx, r); /* the numbers exactly as written */
            if (s == XF_OK && r->n_points != 1) s = xf_errorf(XF_EINVAL, "%s: the record must hold exactly one point", ctx);
        }
    }
    cJSON_Delete(root);
    return s;
}

static uint64_t fnv_add(uint64_t h, const char *s) {
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) h = (h ^ *c) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL;
}

/* record.model and record.device printed and hashed: two lines of one group must agree. */
static xf_status setup_hash(const cJSON *rec, const char *ctx, uint64_t *h) {
    *h = 1469598103934665603ULL;
    static const char *const parts[] = {"model", "device"};
    for (int i = 0; i < 2; i++) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(rec, parts[i]);
        if (!cJSON_IsObject(o)) return xf_errorf(XF_EINVAL, "%s: record: missing object '%s'", ctx, parts[i]);
        char *t = cJSON_PrintUnformatted(o);
        if (!t) return xf_errorf(XF_ENOMEM, "out of memory");
        *h = fnv_add(*h, t);
        free(t);
    }
    return XF_OK;
}

xf_status sweep_line_parse_meta(const char *text, size_t len, const char *ctx, sweep_line_meta *m) {
    memset(m, 0, sizeof *m);
    cJSON *root = NULL;
    xf_status s = line_root(text, len, ctx, &root);
    if (s == XF_OK) s = json_get_string(root, "key", ctx, m->key, sizeof m->key);
    const cJSON *rec = cJSON_GetObjectItemCaseSensitive(root, "record");
    if (s == XF_OK && !cJSON_IsObject(rec)) s = xf_errorf(XF_EINVAL, "%s: missing object 'record'", ctx);
    if (s == XF_OK && (s = json_get_string(rec, "tool_version", ctx, m->tool_version, sizeof m->tool_version)) == XF_OK &&
        (s = json_get_string(rec, "created", ctx, m->created, sizeof m->created)) == XF_OK)
        s = setup_hash(rec, ctx, &m->setup_hash);
    const cJSON *grid = cJSON_GetObjectItemCaseSensitive(root, "grid");
    if (s || !grid) { /* no grid: a line written before sharding (the caller says so) */
        cJSON_Delete(root);
        return s;
    }
    m->has_place = 1;
    char sh[48], hex[24], extra;
    const cJSON *axes = cJSON_GetObjectItemCaseSensitive(grid, "axes");
    unsigned long long hv = 0;
    if (!cJSON_IsObject(grid)) s = xf_errorf(XF_EINVAL, "%s: field 'grid' must be an object", ctx);
    else if ((s = json_get_int(grid, "points", ctx, 1, SWEEP_MAX_POINTS, &m->n_points)) ||
             (s = json_get_string(grid, "hash", ctx, hex, sizeof hex)) || (s = json_get_string(root, "shard", ctx, sh, sizeof sh)) ||
             (s = json_get_int(root, "index", ctx, 0, m->n_points - 1, &m->index))) {
    } else if (strlen(hex) != 16 || sscanf(hex, "%16llx%c", &hv, &extra) != 1) {
        s = xf_errorf(XF_EINVAL, "%s: grid.hash must be 16 hex digits", ctx);
    } else if (!cJSON_IsObject(axes)) {
        s = xf_errorf(XF_EINVAL, "%s: missing object 'grid.axes'", ctx);
    } else if ((s = sweep_shard_parse("shard", sh, &m->shard)) != XF_OK) {
        xf_error_prefix(s, "%s: ", ctx);
    } else if (!sweep_shard_has(&m->shard, m->index)) {
        s = xf_errorf(XF_EINVAL, "%s: point index %lld is not one of shard %s's (index mod %lld must be %lld)", ctx,
                      (long long)m->index, sh, (long long)m->shard.count, (long long)m->shard.index - 1);
    } else if (!(m->axes = cJSON_PrintUnformatted(axes))) {
        s = xf_errorf(XF_ENOMEM, "out of memory");
    }
    m->hash = (uint64_t)hv;
    cJSON_Delete(root);
    return s;
}

void sweep_line_meta_free(sweep_line_meta *m) {
    if (!m) return;
    free(m->axes);
    m->axes = NULL;
}
