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

/* A strict JSON syntax check (RFC 8259) that says where and what the first error is: cJSON only
 * gives a position, and for a trailing comma or text that is not JSON at all it points at the end,
 * which looks like a file cut short. Recursive descent, depth at most JSON_MAX_DEPTH. */
#define JSON_MAX_DEPTH 1000

typedef struct jscan {
    const char *t;
    size_t n, i;
    char what[96]; /* the error, "" while none */
    int eof;       /* 1: the error is the text ending early */
} jscan;

static int js_fail(jscan *s, const char *what) {
    if (!s->what[0]) snprintf(s->what, sizeof s->what, "%s", what);
    return 0;
}

static int js_eof(jscan *s, const char *what) {
    s->eof = 1;
    return js_fail(s, what);
}

static void js_ws(jscan *s) {
    while (s->i < s->n && (s->t[s->i] == ' ' || s->t[s->i] == '\t' || s->t[s->i] == '\n' || s->t[s->i] == '\r')) s->i++;
}

static int js_digits(jscan *s) {
    size_t st = s->i;
    while (s->i < s->n && s->t[s->i] >= '0' && s->t[s->i] <= '9') s->i++;
    return s->i > st;
}

static int js_string(jscan *s) {
    s->i++; /* the opening quote */
    while (s->i < s->n) {
        unsigned char c = (unsigned char)s->t[s->i];
        if (c == '"') {
            s->i++;
            return 1;
        }
        if (c < 0x20) return js_fail(s, "a control character inside a string (escape it, e.g. \\n)");
        if (c == '\\') {
            if (++s->i >= s->n) break;
            char e = s->t[s->i];
            if (e == 'u') {
                for (int k = 1; k <= 4; k++) {
                    if (s->i + (size_t)k >= s->n) return js_eof(s, "the text ends inside a \\u escape");
                    char h = s->t[s->i + (size_t)k];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
                        return js_fail(s, "a \\u escape needs four hexadecimal digits");
                }
                s->i += 4;
            } else if (!strchr("\"\\/bfnrt", e) || !e)
                return js_fail(s, "an unknown escape in a string (use \\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX)");
        }
        s->i++;
    }
    return js_eof(s, "the text ends inside a string (a missing closing quote)");
}

static int js_value(jscan *s, int depth);

static int js_container(jscan *s, int depth, char close) {
    if (depth >= JSON_MAX_DEPTH) return js_fail(s, "nested more than 1000 deep");
    s->i++; /* '{' or '[' */
    js_ws(s);
    if (s->i < s->n && s->t[s->i] == close) {
        s->i++;
        return 1;
    }
    for (;;) {
        js_ws(s);
        if (s->i >= s->n) return js_eof(s, close == '}' ? "the text ends inside an object" : "the text ends inside an array");
        if (close == '}') {
            if (s->t[s->i] == '}') return js_fail(s, "a ',' before '}' (a trailing comma: remove it)");
            if (s->t[s->i] != '"') return js_fail(s, "expected a key in double quotes");
            if (!js_string(s)) return 0;
            js_ws(s);
            if (s->i >= s->n) return js_eof(s, "the text ends inside an object");
            if (s->t[s->i] != ':') return js_fail(s, "expected ':' after the key");
            s->i++;
            js_ws(s);
        } else if (s->t[s->i] == ']')
            return js_fail(s, "a ',' before ']' (a trailing comma: remove it)");
        if (!js_value(s, depth + 1)) return 0;
        js_ws(s);
        if (s->i >= s->n) return js_eof(s, close == '}' ? "the text ends inside an object" : "the text ends inside an array");
        if (s->t[s->i] == close) {
            s->i++;
            return 1;
        }
        if (s->t[s->i] != ',') return js_fail(s, close == '}' ? "expected ',' or '}' after a value" : "expected ',' or ']' after a value");
        s->i++;
    }
}

static int js_word(jscan *s, const char *w) {
    size_t l = strlen(w);
    for (size_t k = 0; k < l; k++) {
        if (s->i + k >= s->n) return js_eof(s, "the text ends inside true, false or null");
        if (s->t[s->i + k] != w[k]) return js_fail(s, "not a JSON value (strings need double quotes; true, false, null are lower case)");
    }
    s->i += l;
    return 1;
}

static int js_value(jscan *s, int depth) {
    js_ws(s);
    if (s->i >= s->n) return js_eof(s, "expected a value");
    char c = s->t[s->i];
    if (c == '{') return js_container(s, depth, '}');
    if (c == '[') return js_container(s, depth, ']');
    if (c == '"') return js_string(s);
    if (c == 't') return js_word(s, "true");
    if (c == 'f') return js_word(s, "false");
    if (c == 'n') return js_word(s, "null");
    if (c == '-' || (c >= '0' && c <= '9')) {
        if (c == '-') s->i++;
        if (s->i < s->n && s->t[s->i] == '0') s->i++;
        else if (!js_digits(s)) return js_fail(s, "a '-' not followed by digits");
        if (s->i < s->n && s->t[s->i] == '.') {
            s->i++;
            if (!js_digits(s)) return js_fail(s, "a '.' not followed by digits");
        }
        if (s->i < s->n && (s->t[s->i] == 'e' || s->t[s->i] == 'E')) {
            s->i++;
            if (s->i < s->n && (s->t[s->i] == '+' || s->t[s->i] == '-')) s->i++;
            if (!js_digits(s)) return js_fail(s, "an exponent without digits");
        }
        return 1;
    }
    return js_fail(s, "not a JSON value (strings need double quotes; true, false, null are lower case)");
}

int json_syntax_error(const char *text, size_t len, size_t *offset, int *line, int *column, int *truncated, char *what,
                      size_t what_len) {
    jscan s = {text, len, 0, "", 0};
    if (js_value(&s, 0)) {
        js_ws(&s);
        if (s.i < s.n) js_fail(&s, "more text after the end of the JSON document");
    }
    if (!s.what[0]) return 0;
    *offset = s.i;
    *truncated = s.eof;
    *line = 1;
    *column = 1;
    for (size_t k = 0; k < s.i && k < len; k++) {
        if (text[k] == '\n') {
            (*line)++;
            *column = 1;
        } else
            (*column)++;
    }
    snprintf(what, what_len, "%s", s.what);
    return 1;
}

xf_status json_parse(const char *text, const char *ctx, cJSON **out) {
    *out = NULL;
    const char *end = NULL;
    g_json_alloc_failed = 0;
    cJSON *j = cJSON_ParseWithOpts(text, &end, 1);
    if (!j) {
        if (!end || g_json_alloc_failed) return xf_errorf(XF_ENOMEM, "%s: out of memory parsing JSON", ctx);
        size_t len = strlen(text), off;
        int line, col, trunc;
        char what[96];
        if (json_syntax_error(text, len, &off, &line, &col, &trunc, what, sizeof what)) {
            if (trunc)
                return xf_errorf(XF_EPARSE, "%s: JSON is truncated: %s at byte %zu (line %d, column %d), before the document is "
                                 "complete", ctx, what, off, line, col);
            return xf_errorf(XF_EPARSE, "%s: invalid JSON at line %d, column %d (byte %zu): %s", ctx, line, col, off, what);
        }
        /* cJSON refused what the check accepts (e.g. a number beyond its range): its position */
        return xf_errorf(XF_EPARSE, "%s: invalid JSON at byte %zu", ctx, (size_t)(end - text));
    }
    *out = j;
    return XF_OK;
}

xf_status json_parse_len(const char *text, size_t len, const char *ctx, cJSON **out) {
    g_json_alloc_failed = 0;
    *out = cJSON_ParseWithLength(text, len);
    if (*out) return XF_OK;
    if (g_json_alloc_failed) return xf_errorf(XF_ENOMEM, "%s: out of memory parsing JSON", ctx);
    size_t off;
    int line, col, trunc;
    char what[96];
    if (json_syntax_error(text, len, &off, &line, &col, &trunc, what, sizeof what))
        return xf_errorf(XF_EPARSE, "%s: %s JSON at line %d, column %d (byte %zu): %s", ctx, trunc ? "truncated" : "invalid", line,
                         col, off, what);
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

int json_add_number(cJSON *obj, const char *key, double v) {
    cJSON *n = isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
    if (!n) return 0;
    if (!cJSON_AddItemToObject(obj, key, n)) {
        cJSON_Delete(n);
        return 0;
    }
    return 1;
}
