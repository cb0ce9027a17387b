#include "json_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cJSON reports an allocation failure while parsing exactly as a syntax error (NULL and an error
 * position). Its allocations go through this hook, which notes a failure, so json_parse can say
 * "out of memory" instead of blaming a valid file. Installed once before main (single-threaded). */
static _Thread_local int g_json_alloc_failed;

static void *json_hook_malloc(size_t n) {
    void *p = malloc(n);
    if (!p) g_json_alloc_failed = 1;
    return p;
}

__attribute__((constructor)) static void json_hooks_install(void) {
    cJSON_Hooks hooks = {.malloc_fn = json_hook_malloc, .free_fn = free};
    cJSON_InitHooks(&hooks);
}

/* 1 when the text ends inside a string or with objects/arrays still open: the mark of a file
 * cut short (an interrupted write, a full disk), worth saying plainly. */
static int json_looks_truncated(const char *text) {
    int depth = 0, in_str = 0, esc = 0;
    for (const char *c = text; *c; c++) {
        if (in_str) {
            if (esc) esc = 0;
            else if (*c == '\\') esc = 1;
            else if (*c == '"') in_str = 0;
        } else if (*c == '"') in_str = 1;
        else if (*c == '{' || *c == '[') depth++;
        else if (*c == '}' || *c == ']') depth--;
    }
    return in_str || depth > 0;
}

/* The deepest nesting of objects and arrays in the first n bytes (strings skipped). */
static int json_max_depth(const char *text, size_t n) {
    int depth = 0, max = 0, in_str = 0, esc = 0;
    for (size_t i = 0; i < n && text[i]; i++) {
        char c = text[i];
        if (in_str) {
            if (esc) esc = 0;
            else if (c == '\\') esc = 1;
            else if (c == '"') in_str = 0;
        } else if (c == '"') in_str = 1;
        else if (c == '{' || c == '[') max = ++depth > max ? depth : max;
        else if (c == '}' || c == ']') depth--;
    }
    return max;
}

xf_status json_parse(const char *text, const char *ctx, cJSON **out) {
    *out = NULL;
    const char *end = NULL;
    g_json_alloc_failed = 0;
    cJSON *j = cJSON_ParseWithOpts(text, &end, 1);
    if (!j) {
        if (!end || g_json_alloc_failed) return xf_errorf(XF_ENOMEM, "%s: out of memory parsing JSON", ctx);
        size_t off = (size_t)(end - text);
        size_t len = strlen(text);
        int line = 1;
        for (size_t i = 0; i < off && i < len; i++)
            if (text[i] == '\n') line++;
        if (json_max_depth(text, off + 1) > CJSON_NESTING_LIMIT)
            return xf_errorf(XF_EPARSE, "%s: JSON nested too deeply (more than %d levels of objects and arrays at byte %zu)", ctx,
                             CJSON_NESTING_LIMIT, off);
        if (off >= len || json_looks_truncated(text))
            return xf_errorf(XF_EPARSE, "%s: JSON is truncated (ends at byte %zu before the document is complete)", ctx, len);
        return xf_errorf(XF_EPARSE, "%s: invalid JSON at line %d (byte %zu)", ctx, line, off);
    }
    *out = j;
    return XF_OK;
}

xf_status json_parse_len(const char *text, size_t len, const char *ctx, cJSON **out) {
    g_json_alloc_failed = 0;
    *out = cJSON_ParseWithLength(text, len);
    if (*out) return XF_OK;
    if (g_json_alloc_failed) return xf_errorf(XF_ENOMEM, "%s: out of memory parsing JSON", ctx);
    if (json_max_depth(text, len) > CJSON_NESTING_LIMIT)
        return xf_errorf(XF_EPARSE, "%s: not valid JSON (nested more than %d levels deep)", ctx, CJSON_NESTING_LIMIT);
    return xf_errorf(XF_EPARSE, "%s: not valid JSON", ctx);
}

static const cJSON *field(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}

xf_status json_opt_number(const cJSON *obj, const char *key, const char *ctx, double *out, int *present) {
    const cJSON *v = field(obj, key);
    *present = 0;
    if (!v) return XF_OK;
    if (!cJSON_IsNumber(v)) return xf_errorf(XF_EINVAL, "%s: field '%s' must be a number", ctx, key);
    if (!isfinite(v->valuedouble)) return xf_errorf(XF_EINVAL, "%s: field '%s' is not a finite number", ctx, key);
    *out = v->valuedouble;
    *present = 1;
    return XF_OK;
}

xf_status json_get_number(const cJSON *obj, const char *key, const char *ctx, double *out) {
    int present;
    xf_status s = json_opt_number(obj, key, ctx, out, &present);
    if (s != XF_OK) return s;
    if (!present) return xf_errorf(XF_EINVAL, "%s: missing field '%s'", ctx, key);
    return XF_OK;
}

xf_status json_opt_int(const cJSON *obj, const char *key, const char *ctx, int64_t lo, int64_t hi, int64_t *out, int *present) {
    double d = 0;
    xf_status s = json_opt_number(obj, key, ctx, &d, present);
    if (s != XF_OK || !*present) return s;
    if (d != floor(d)) return xf_errorf(XF_EINVAL, "%s: field '%s' must be a whole number, got %g", ctx, key, d);
    if (d < (double)lo || d > (double)hi) {
        *present = 0;
        return xf_errorf(XF_EINVAL, "%s: field '%s' = %.17g is out of range [%lld, %lld]", ctx, key, d, (long long)lo, (long long)hi);
    }
    *out = (int64_t)d;
    return XF_OK;
}

xf_status json_get_int(const cJSON *obj, const char *key, const char *ctx, int64_t lo, int64_t hi, int64_t *out) {
    int present;
    xf_status s = json_opt_int(obj, key, ctx, lo, hi, out, &present);
    if (s != XF_OK) return s;
    if (!present) return xf_errorf(XF_EINVAL, "%s: missing field '%s'", ctx, key);
    return XF_OK;
}

xf_status json_opt_string(const cJSON *obj, const char *key, const char *ctx, char *buf, size_t len, int *present) {
    const cJSON *v = field(obj, key);
    *present = 0;
    if (!v) return XF_OK;
    if (!cJSON_IsString(v) || !v->valuestring) return xf_errorf(XF_EINVAL, "%s: field '%s' must be a string", ctx, key);
    if (strlen(v->valuestring) >= len)
        return xf_errorf(XF_EINVAL, "%s: field '%s' is too long (%zu characters, at most %zu)", ctx, key, strlen(v->valuestring), len - 1);
    memcpy(buf, v->valuestring, strlen(v->valuestring) + 1);
    *present = 1;
    return XF_OK;
}

xf_status json_get_string(const cJSON *obj, const char *key, const char *ctx, char *buf, size_t len) {
    int present;
    xf_status s = json_opt_string(obj, key, ctx, buf, len, &present);
    if (s != XF_OK) return s;
    if (!present) return xf_errorf(XF_EINVAL, "%s: missing field '%s'", ctx, key);
    return XF_OK;
}

xf_status json_opt_bool(const cJSON *obj, const char *key, const char *ctx, int *out, int *present) {
    const cJSON *v = field(obj, key);
    *present = 0;
    if (!v) return XF_OK;
    if (!cJSON_IsBool(v)) return xf_errorf(XF_EINVAL, "%s: field '%s' must be true or false", ctx, key);
    *out = cJSON_IsTrue(v) ? 1 : 0;
    *present = 1;
    return XF_OK;
}

xf_status json_get_bool(const cJSON *obj, const char *key, const char *ctx, int *out) {
    int present;
    xf_status s = json_opt_bool(obj, key, ctx, out, &present);
    if (s != XF_OK) return s;
    if (!present) return xf_errorf(XF_EINVAL, "%s: missing field '%s'", ctx, key);
    return XF_OK;
}

cJSON *json_exact_number(double v) {
    if (!isfinite(v)) return cJSON_CreateNull();
    /* cJSON prints 15 significant digits whenever they read back within an epsilon, which loses
     * the last bits (a record written, read and written again then differs): the shortest of
     * %.15g, %.16g, %.17g that reads back as the same double. */
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    return cJSON_CreateRaw(buf);
}

int json_add_number(cJSON *obj, const char *key, double v) {
    cJSON *n = json_exact_number(v);
    if (!n) return 0;
    if (!cJSON_AddItemToObject(obj, key, n)) {
        cJSON_Delete(n);
        return 0;
    }
    return 1;
}
