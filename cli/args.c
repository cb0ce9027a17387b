#include "args.h"

#include "core/limits.h"

#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_LIST 4096

xf_status args_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s) return xf_errorf(XF_EINVAL, "%s needs a whole number", flag);
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s) return xf_errorf(XF_EINVAL, "%s: '%.64s' is not a whole number", flag, s);
    if (v < lo || v > hi)
        return xf_errorf(XF_EINVAL, "%s: %lld is out of range (%lld to %lld)", flag, v, (long long)lo, (long long)hi);
    *out = v;
    return XF_OK;
}

xf_status args_double(const char *flag, const char *s, double lo, double hi, double *out) {
    if (!s || !*s) return xf_errorf(XF_EINVAL, "%s needs a number", flag);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !isfinite(v)) return xf_errorf(XF_EINVAL, "%s: '%.64s' is not a number", flag, s);
    if (v < lo || v > hi) return xf_errorf(XF_EINVAL, "%s: %g is out of range (%g to %g)", flag, v, lo, hi);
    *out = v;
    return XF_OK;
}

static xf_status push(const char *flag, int64_t v, int64_t **vals, int *n, int *cap) {
    if (*n >= MAX_LIST) return xf_errorf(XF_EINVAL, "%s: more than %d values", flag, MAX_LIST);
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        int64_t *nv = realloc(*vals, (size_t)nc * sizeof *nv);
        if (!nv) return xf_errorf(XF_ENOMEM, "out of memory parsing %s", flag);
        *vals = nv;
        *cap = nc;
    }
    (*vals)[(*n)++] = v;
    return XF_OK;
}

/* One item: "N", "A..B", "A..B*K" or "A..B+K". */
static xf_status parse_item(const char *flag, const char *item, int64_t lo, int64_t hi, int64_t **vals, int *n, int *cap) {
    const char *dots = strstr(item, "..");
    if (!dots) {
        int64_t v;
        xf_status s = args_int(flag, item, lo, hi, &v);
        return s == XF_OK ? push(flag, v, vals, n, cap) : s;
    }
    char a[32], b[32], k[32] = "";
    char op = '*';
    size_t alen = (size_t)(dots - item);
    if (alen == 0 || alen >= sizeof a) return xf_errorf(XF_EINVAL, "%s: malformed range '%.64s' (use A..B, A..B*K or A..B+K)", flag, item);
    memcpy(a, item, alen);
    a[alen] = '\0';
    const char *rest = dots + 2;
    const char *opp = strpbrk(rest, "*+");
    size_t blen = opp ? (size_t)(opp - rest) : strlen(rest);
    if (blen == 0 || blen >= sizeof b) return xf_errorf(XF_EINVAL, "%s: malformed range '%.64s' (use A..B, A..B*K or A..B+K)", flag, item);
    memcpy(b, rest, blen);
    b[blen] = '\0';
    int64_t va, vb, vk = 2;
    xf_status s;
    if ((s = args_int(flag, a, lo, hi, &va)) != XF_OK) return s;
    if ((s = args_int(flag, b, lo, hi, &vb)) != XF_OK) return s;
    if (opp) {
        op = *opp;
        if (strlen(opp + 1) >= sizeof k) return xf_errorf(XF_EINVAL, "%s: malformed range step in '%.64s'", flag, item);
        strcpy(k, opp + 1);
        if ((s = args_int(flag, k, 1, INT64_MAX / 4, &vk)) != XF_OK) return s;
    }
    if (vb < va) return xf_errorf(XF_EINVAL, "%s: range '%.64s' goes down; write it as A..B with A <= B", flag, item);
    if (op == '*' && (vk < 2 || va <= 0))
        return xf_errorf(XF_EINVAL, "%s: a multiplying range needs a start above 0 and a factor of at least 2 ('%.64s')", flag, item);
    for (int64_t v = va; v <= vb;) {
        if ((s = push(flag, v, vals, n, cap)) != XF_OK) return s;
        if (op == '*') {
            if (v > INT64_MAX / vk) break;
            v *= vk;
        } else {
            if (v > INT64_MAX - vk) break;
            v += vk;
        }
    }
    return XF_OK;
}

xf_status args_int_list(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t **out, int *n) {
    *out = NULL;
    *n = 0;
    if (!s || !*s) return xf_errorf(XF_EINVAL, "%s needs a value (e.g. 1,8,64 or 1..64)", flag);
    int cap = 0;
    const char *p = s;
    while (1) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[96];
        if (len == 0 || len >= sizeof item) {
            free(*out);
            *out = NULL;
            *n = 0;
            return xf_errorf(XF_EINVAL, "%s: empty or overlong item in list '%.64s'", flag, s);
        }
        memcpy(item, p, len);
        item[len] = '\0';
        xf_status st = parse_item(flag, item, lo, hi, out, n, &cap);
        if (st != XF_OK) {
            free(*out);
            *out = NULL;
            *n = 0;
            return st;
        }
        if (!comma) break;
        p = comma + 1;
    }
    return XF_OK;
}

void args_str_list_free(char **list, int n) {
    if (!list) return;
    for (int i = 0; i < n; i++) free(list[i]);
    free(list);
}

xf_status args_str_list(const char *flag, const char *s, char ***out, int *n) {
    *out = NULL;
    *n = 0;
    if (!s || !*s) return xf_errorf(XF_EINVAL, "%s needs a value", flag);
    int count = 1;
    for (const char *p = s; *p; p++) count += *p == ',';
    if (count > MAX_LIST) return xf_errorf(XF_EINVAL, "%s: more than %d values", flag, MAX_LIST);
    char **list = calloc((size_t)count, sizeof *list);
    if (!list) return xf_errorf(XF_ENOMEM, "out of memory parsing %s", flag);
    const char *p = s;
    for (int i = 0; i < count; i++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0) {
            args_str_list_free(list, count);
            return xf_errorf(XF_EINVAL, "%s: empty item in list '%.64s'", flag, s);
        }
        list[i] = strndup(p, len);
        if (!list[i]) {
            args_str_list_free(list, count);
            return xf_errorf(XF_ENOMEM, "out of memory parsing %s", flag);
        }
        p = comma ? comma + 1 : p + len;
    }
    *out = list;
    *n = count;
    return XF_OK;
}

xf_status args_size(const char *flag, const char *s, double *bytes) {
    if (!s || !*s) return xf_errorf(XF_EINVAL, "%s needs a size (e.g. 20GiB)", flag);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return xf_errorf(XF_EINVAL, "%s: '%.64s' is not a size (e.g. 20GiB, 512MiB, 2e9)", flag, s);
    static const struct {
        const char *suf;
        double mul;
    } sufs[] = {{"", 1},     {"B", 1},      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
                {"TiB", 1099511627776.0}, {"KB", 1e3},   {"MB", 1e6},         {"GB", 1e9}, {"TB", 1e12},
                {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0}, {"T", 1099511627776.0}};
    for (size_t i = 0; i < sizeof sufs / sizeof sufs[0]; i++) {
        if (strcasecmp(end, sufs[i].suf) == 0 && (strcmp(end, sufs[i].suf) == 0 || strlen(end) > 1)) {
            *bytes = v * sufs[i].mul;
            if (!isfinite(*bytes) || *bytes > 1e18) return xf_errorf(XF_EINVAL, "%s: '%.64s' is too large", flag, s);
            return XF_OK;
        }
    }
    return xf_errorf(XF_EINVAL, "%s: unknown unit in '%.64s' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", flag, s);
}

static const xf_limit *flag_limit(const char *flag) {
    const xf_limit *l = limits_find(flag);
    if (!l) xf_errorf(XF_EINVAL, "%s: not a shared flag (core/limits.h)", flag ? flag : "(null)");
    return l;
}

xf_status args_flag_int(const char *flag, const char *s, int64_t *out) {
    const xf_limit *l = flag_limit(flag);
    return l ? args_int(flag, s, l->min, l->max, out) : XF_EINVAL;
}

xf_status args_flag_list(const char *flag, const char *s, int64_t **out, int *n) {
    const xf_limit *l = flag_limit(flag);
    return l ? args_int_list(flag, s, l->min, l->max, out, n) : XF_EINVAL;
}

xf_status args_kv_policy(const char *flag, const char *s, kv_policy *out) {
    xf_status st = kv_policy_parse(s, out);
    if (st) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", xf_error_msg());
        return xf_errorf(st, "%s: %s", flag, msg);
    }
    return XF_OK;
}

xf_status args_mla_form(const char *flag, const char *s, int *out) {
    if (s && !strcmp(s, "naive")) *out = 0;
    else if (s && !strcmp(s, "absorbed")) *out = 1;
    else return xf_errorf(XF_EINVAL, "%s: '%s' is not a form: give naive or absorbed", flag, s ? s : "");
    return XF_OK;
}

xf_status args_table_or_json(const char *flag, const char *s, int *json) {
    if (s && !strcmp(s, "table")) *json = 0;
    else if (s && !strcmp(s, "json")) *json = 1;
    else return xf_errorf(XF_EINVAL, "%s must be table or json, got '%.64s'", flag, s ? s : "");
    return XF_OK;
}
