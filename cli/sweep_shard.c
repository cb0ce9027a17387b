/* `sweep --shard i/n` and the grid identity every JSONL line carries (sweep_shard.h). */
#include "sweep_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "args.h"
#include "core/limits.h"

xf_status sweep_shard_parse(const char *flag, const char *s, sweep_shard *out) {
    const char *slash = s ? strchr(s, '/') : NULL;
    char a[32];
    if (!slash || slash == s || (size_t)(slash - s) >= sizeof a)
        return xf_errorf(XF_EINVAL, "%s: '%.40s' is not i/n (this is shard i of n, 1 <= i <= n <= %d; e.g. 2/3)", flag, s ? s : "",
                         XF_SHARDS_MAX);
    memcpy(a, s, (size_t)(slash - s));
    a[slash - s] = '\0';
    int64_t i, n;
    char fl[64];
    snprintf(fl, sizeof fl, "%.40s i/n: n", flag);
    xf_status st = args_int(fl, slash + 1, 1, XF_SHARDS_MAX, &n);
    if (st) return st;
    snprintf(fl, sizeof fl, "%.40s i/n: i", flag);
    if ((st = args_int(fl, a, 1, n, &i))) return st;
    out->index = i;
    out->count = n;
    return XF_OK;
}

void sweep_shard_name(const sweep_shard *sh, char *buf, size_t len) {
    snprintf(buf, len, "%lld/%lld", (long long)sh->index, (long long)sh->count);
}

int sweep_shard_has(const sweep_shard *sh, int64_t k) { return k % sh->count == sh->index - 1; }

uint64_t sweep_keys_hash(const char *const *keys, int64_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (int64_t i = 0; i < n; i++) {
        for (const unsigned char *c = (const unsigned char *)keys[i]; *c; c++) h = (h ^ *c) * 1099511628211ULL;
        h = (h ^ '\n') * 1099511628211ULL;
    }
    return h;
}

int sweep_key_field(const char *key, const char *name, char *buf, size_t len) {
    size_t nl = strlen(name);
    for (const char *f = key; f && *f; f = strchr(f, ';') ? strchr(f, ';') + 1 : NULL) {
        if (strncmp(f, name, nl) != 0 || f[nl] != '=') continue;
        const char *v = f + nl + 1, *end = strchr(v, ';');
        size_t vl = end ? (size_t)(end - v) : strlen(v);
        if (vl + 1 > len) return -1;
        memcpy(buf, v, vl);
        buf[vl] = '\0';
        return 0;
    }
    return -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The distinct values of one key field, in order of first appearance. */
typedef struct axis {
    char name[32];
    cJSON *values; /* array of strings, owned by the axes object */
    char last[SWEEP_KEY_LEN];
} axis;

static xf_status add_axes(cJSON *root, axis *ax, int *n_ax, const char *key) {
    char buf[SWEEP_KEY_LEN];
    snprintf(buf, sizeof buf, "%s", key);
    for (char *save = NULL, *f = strtok_r(buf, ";", &save); f; f = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(f, '=');
        if (!eq || eq == f || (size_t)(eq - f) >= sizeof ax->name)
            return xf_errorf(XF_EINVAL, "point key '%.200s': field '%.40s' is not name=value (a model or device name with ';'?)", key, f);
        *eq = '\0';
        const char *v = eq + 1;
        int a = 0;
        while (a < *n_ax && strcmp(ax[a].name, f) != 0) a++;
        if (a == *n_ax) {
            if (*n_ax == 32) return xf_errorf(XF_EINVAL, "point key '%.200s' has more than 32 fields", key);
            snprintf(ax[a].name, sizeof ax[a].name, "%s", f);
            ax[a].values = cJSON_AddArrayToObject(root, f);
            ax[a].last[0] = '\0';
            if (!ax[a].values) return xf_errorf(XF_ENOMEM, "out of memory");
            (*n_ax)++;
        } else if (strcmp(ax[a].last, v) == 0) {
            continue; /* the usual case: the same value as the previous point */
        }
        snprintf(ax[a].last, sizeof ax[a].last, "%s", v);
        int seen = 0;
        for (const cJSON *e = ax[a].values->child; e && !seen; e = e->next) seen = strcmp(e->valuestring, v) == 0;
        if (!seen && !cJSON_AddItemToArray(ax[a].values, cJSON_CreateString(v))) return xf_errorf(XF_ENOMEM, "out of memory");
    }
    return XF_OK;
}

xf_status sweep_meta_build(const sweep_param *ps, int64_t n, sweep_meta *m) {
    memset(m, 0, sizeof *m);
    const char **keys = malloc((size_t)(n > 0 ? n : 1) * sizeof *keys);
    axis *ax = calloc(32, sizeof *ax);
    cJSON *root = cJSON_CreateObject();
    xf_status s = XF_OK;
    int n_ax = 0;
    if (!keys || !ax || !root) s = xf_errorf(XF_ENOMEM, "out of memory for the grid of %lld points", (long long)n);
    for (int64_t i = 0; s == XF_OK && i < n; i++) {
        keys[i] = ps[i].key;
        s = add_axes(root, ax, &n_ax, ps[i].key);
    }
    if (s == XF_OK) {
        m->n_points = n;
        m->hash = sweep_keys_hash(keys, n);
        qsort(keys, (size_t)n, sizeof *keys, cmp_str);
        for (int64_t i = 1; i < n && s == XF_OK; i++)
            if (strcmp(keys[i - 1], keys[i]) == 0)
                s = xf_errorf(XF_EINVAL, "the grid lists the point %.300s twice: remove the repeated value from its list", keys[i]);
    }
    if (s == XF_OK && !(m->axes = cJSON_PrintUnformatted(root))) s = xf_errorf(XF_ENOMEM, "out of memory");
    cJSON_Delete(root);
    free(ax);
    free(keys);
    if (s) sweep_meta_free(m);
    return s;
}

void sweep_meta_free(sweep_meta *m) {
    if (!m) return;
    free(m->axes);
    memset(m, 0, sizeof *m);
}

xf_status sweep_shard_select(const sweep_shard *sh, sweep_param *ps, int64_t *n, int64_t **gidx) {
    *gidx = malloc((size_t)(*n > 0 ? *n : 1) * sizeof **gidx);
    if (!*gidx) return xf_errorf(XF_ENOMEM, "out of memory");
    int64_t m = 0;
    for (int64_t k = 0; k < *n; k++) {
        if (!sweep_shard_has(sh, k)) continue;
        if (m != k) ps[m] = ps[k];
        (*gidx)[m++] = k;
    }
    *n = m;
    return XF_OK;
}

xf_status sweep_shard_apply(const sweep_shard *sh, sweep_param *ps, int64_t *n, sweep_meta *meta, int64_t **gidx) {
    *gidx = NULL;
    xf_status s = sweep_meta_build(ps, *n, meta);
    if (s) return s;
    int64_t all = *n;
    if ((s = sweep_shard_select(sh, ps, n, gidx))) {
        sweep_meta_free(meta);
        return s;
    }
    if (*n == 0)
        fprintf(stderr, "xfprof sweep: note: shard %lld/%lld has no points (the grid has %lld): nothing to run\n", (long long)sh->index,
                (long long)sh->count, (long long)all);
    return XF_OK;
}
