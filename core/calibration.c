#include "calibration.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cJSON.h"
#include "core/fileio.h"
#include "core/json_util.h"

static const char *const FAMILY_NAMES[CALIB_FAMILY_COUNT] = {
    "gemv", "gemm", "attn_decode", "attn_prefill", "norm", "rope", "swiglu", "residual", "kv_append", "embedding", "sampling"};

const char *calib_family_name(calib_family f) { return f >= 0 && f < CALIB_FAMILY_COUNT ? FAMILY_NAMES[f] : "?"; }

xf_status calib_family_parse(const char *s, calib_family *out) {
    for (int i = 0; s && i < CALIB_FAMILY_COUNT; i++)
        if (!strcmp(s, FAMILY_NAMES[i])) {
            *out = (calib_family)i;
            return XF_OK;
        }
    return xf_errorf(XF_EINVAL, "unknown op family '%s' (gemv, gemm, attn_decode, attn_prefill, norm, rope, swiglu, residual, "
                     "kv_append, embedding, sampling)", s ? s : "");
}

const char *calib_tier_name(calib_tier t) { return t == CALIB_TIER_CACHE ? "cache" : "dram"; }

void calib_table_init(calib_table *t) { memset(t, 0, sizeof *t); }

void calib_table_free(calib_table *t) {
    if (!t) return;
    free(t->entries);
    calib_table_init(t);
}

static int pos_finite(double v) { return isfinite(v) && v > 0; }

xf_status calib_table_add(calib_table *t, const calib_entry *e) {
    if (!pos_finite(e->x) || !pos_finite(e->y) || !pos_finite(e->z) || !pos_finite(e->efficiency) || e->family < 0 || e->family >= CALIB_FAMILY_COUNT ||
        (e->tier != CALIB_TIER_DRAM && e->tier != CALIB_TIER_CACHE))
        return xf_errorf(XF_EINVAL, "calibration: an entry needs a known family and tier and positive finite x, y, z and efficiency");
    if (t->n >= CALIB_MAX_ENTRIES) return xf_errorf(XF_EINVAL, "calibration: more than %d entries", CALIB_MAX_ENTRIES);
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        calib_entry *p = realloc(t->entries, (size_t)cap * sizeof *p);
        if (!p) return xf_errorf(XF_ENOMEM, "calibration: out of memory for %d entries", cap);
        t->entries = p;
        t->cap = cap;
    }
    t->entries[t->n++] = *e;
    return XF_OK;
}

static int same_key(double a, double b) { return fabs(a - b) <= 1e-6 * fmax(fabs(a), fabs(b)); }

static int cmp_key(const calib_entry *a, const calib_entry *b) {
    if (a->family != b->family) return a->family < b->family ? -1 : 1;
    if (a->wdtype != b->wdtype) return a->wdtype < b->wdtype ? -1 : 1;
    if (a->tier != b->tier) return a->tier < b->tier ? -1 : 1;
    if (!same_key(a->y, b->y)) return a->y < b->y ? -1 : 1;
    if (!same_key(a->z, b->z)) return a->z < b->z ? -1 : 1;
    if (!same_key(a->x, b->x)) return a->x < b->x ? -1 : 1;
    return 0;
}

static int cmp_entry(const void *pa, const void *pb) {
    const calib_entry *a = pa, *b = pb;
    int c = cmp_key(a, b);
    if (c) return c;
    return a->efficiency < b->efficiency ? -1 : a->efficiency > b->efficiency;
}

void calib_table_merge(calib_table *t) {
    if (!t || t->n < 2) return;
    qsort(t->entries, (size_t)t->n, sizeof *t->entries, cmp_entry);
    int out = 0;
    for (int i = 0; i < t->n;) {
        int j = i, n = 0;
        while (j < t->n && cmp_key(&t->entries[i], &t->entries[j]) == 0) {
            n += t->entries[j].n > 0 ? t->entries[j].n : 1;
            j++;
        }
        int m = j - i; /* sorted by efficiency within the group: the median */
        calib_entry e = t->entries[i];
        e.efficiency = m % 2 ? t->entries[i + m / 2].efficiency
                             : 0.5 * (t->entries[i + m / 2 - 1].efficiency + t->entries[i + m / 2].efficiency);
        e.n = n;
        t->entries[out++] = e;
        i = j;
    }
    t->n = out;
}

char *calib_table_to_json(const calib_table *t) {
    cJSON *o = cJSON_CreateObject();
    int ok = o && cJSON_AddStringToObject(o, "format", CALIB_FORMAT) && cJSON_AddNumberToObject(o, "version", CALIB_VERSION) &&
             cJSON_AddNumberToObject(o, "threads", t->threads) && cJSON_AddStringToObject(o, "grid", t->grid) &&
             cJSON_AddStringToObject(o, "created", t->created) && cJSON_AddStringToObject(o, "source", t->source) &&
             json_add_number(o, "dram_bandwidth_Bps", t->dram_Bps) && json_add_number(o, "cache_bandwidth_Bps", t->cache_Bps) &&
             json_add_number(o, "cache_bytes", t->cache_bytes) && cJSON_AddStringToObject(o, "omp_spin", t->omp_spin) &&
             cJSON_AddStringToObject(o, "omp_spin_by", t->omp_spin_by) && json_add_number(o, "fork_short_s", t->fork_short_s) &&
             json_add_number(o, "fork_long_s", t->fork_long_s) && cJSON_AddBoolToObject(o, "fork_term", t->fork_term != 0);
    cJSON *pk = ok ? cJSON_AddObjectToObject(o, "peak_flops") : NULL;
    ok = ok && pk;
    for (int c = 0; ok && c < XF_COMPUTE_COUNT; c++) ok = json_add_number(pk, compute_name((xf_compute)c), t->peak_flops[c]);
    cJSON *arr = ok ? cJSON_AddArrayToObject(o, "entries") : NULL;
    ok = ok && arr;
    for (int i = 0; ok && i < t->n; i++) {
        const calib_entry *e = &t->entries[i];
        cJSON *x = cJSON_CreateObject();
        ok = x && cJSON_AddStringToObject(x, "family", calib_family_name(e->family)) &&
             cJSON_AddStringToObject(x, "wdtype", dtype_name(e->wdtype)) && cJSON_AddStringToObject(x, "tier", calib_tier_name(e->tier)) &&
             json_add_number(x, "x", e->x) && json_add_number(x, "y", e->y) && json_add_number(x, "z", e->z) && json_add_number(x, "efficiency", e->efficiency) &&
             cJSON_AddNumberToObject(x, "n", e->n);
        if (x) cJSON_AddItemToArray(arr, x);
    }
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return text;
}

static xf_status get_pos(const cJSON *o, const char *key, const char *ctx, int allow_zero, double *out) {
    xf_status s = json_get_number(o, key, ctx, out);
    if (s) return s;
    if (!isfinite(*out) || *out < 0 || (!allow_zero && *out == 0))
        return xf_errorf(XF_EINVAL, "%s: \"%s\" must be a %s finite number, not %g", ctx, key, allow_zero ? "non-negative" : "positive",
                         *out);
    return XF_OK;
}

xf_status calib_table_from_json(const cJSON *o, const char *ctx, calib_table *out) {
    calib_table_init(out);
    char c0[320];
    snprintf(c0, sizeof c0, "%s: calibration", ctx ? ctx : "machine file");
    if (!cJSON_IsObject(o)) return xf_errorf(XF_EINVAL, "%s: not an object; run 'xfprof machine --calibrate' again", c0);
    char fmt[32];
    xf_status s = json_get_string(o, "format", c0, fmt, sizeof fmt);
    if (s) return s;
    if (strcmp(fmt, CALIB_FORMAT))
        return xf_errorf(XF_EFORMAT, "%s: format '%s' is not %s; run 'xfprof machine --calibrate' again", c0, fmt, CALIB_FORMAT);
    int64_t v, th;
    if ((s = json_get_int(o, "version", c0, 0, 1000000, &v))) return s;
    if (v < CALIB_VERSION_MIN || v > CALIB_VERSION)
        return xf_errorf(XF_EFORMAT, "%s: version %lld is not one this build reads (%d to %d)%s; run 'xfprof machine --calibrate' again",
                         c0, (long long)v, CALIB_VERSION_MIN, CALIB_VERSION,
                         v == 1 ? " (GEMMs are now keyed by M, N and K; decode projections by the step's working set)"
                         : v < CALIB_VERSION_MIN ? " (decode projections are now keyed by the step's working set over the last-level cache)"
                                                 : "");
    if ((s = json_get_int(o, "threads", c0, 1, 4096, &th))) return s;
    out->threads = (int)th;
    if ((s = json_get_string(o, "grid", c0, out->grid, sizeof out->grid)) ||
        (s = json_get_string(o, "created", c0, out->created, sizeof out->created)) ||
        (s = json_get_string(o, "source", c0, out->source, sizeof out->source)) ||
        (s = get_pos(o, "dram_bandwidth_Bps", c0, 0, &out->dram_Bps)) ||
        (s = get_pos(o, "cache_bandwidth_Bps", c0, 1, &out->cache_Bps)) || (s = get_pos(o, "cache_bytes", c0, 1, &out->cache_bytes)))
        goto fail;
    /* version 4: the OpenMP spin it was measured under and the fork costs (a version-3 table has
     * neither: unknown spin, no fork term) */
    if (v >= 4 && ((s = json_get_string(o, "omp_spin", c0, out->omp_spin, sizeof out->omp_spin)) ||
                   (s = json_get_string(o, "omp_spin_by", c0, out->omp_spin_by, sizeof out->omp_spin_by)) ||
                   (s = get_pos(o, "fork_short_s", c0, 1, &out->fork_short_s)) || (s = get_pos(o, "fork_long_s", c0, 1, &out->fork_long_s))))
        goto fail;
    if (v >= 4) {
        const cJSON *ft = cJSON_GetObjectItemCaseSensitive(o, "fork_term");
        if (!cJSON_IsBool(ft)) {
            s = xf_errorf(XF_EINVAL, "%s: \"fork_term\" is missing or not true/false", c0);
            goto fail;
        }
        out->fork_term = cJSON_IsTrue(ft);
    }
    if (v >= 4 && (out->fork_short_s > 1e-2 || out->fork_long_s > 1e-2)) {
        s = xf_errorf(XF_EINVAL, "%s: fork costs of %g / %g s are not an OpenMP fork's (at most 10 ms)", c0, out->fork_short_s, out->fork_long_s);
        goto fail;
    }
    const cJSON *pk = cJSON_GetObjectItemCaseSensitive(o, "peak_flops");
    if (!cJSON_IsObject(pk)) {
        s = xf_errorf(XF_EINVAL, "%s: \"peak_flops\" is missing or not an object", c0);
        goto fail;
    }
    char c1[352];
    snprintf(c1, sizeof c1, "%s.peak_flops", c0);
    for (int c = 0; c < XF_COMPUTE_COUNT; c++)
        if ((s = get_pos(pk, compute_name((xf_compute)c), c1, c != XF_COMPUTE_FP32, &out->peak_flops[c]))) goto fail;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "entries");
    if (!cJSON_IsArray(arr)) {
        s = xf_errorf(XF_EINVAL, "%s: \"entries\" is missing or not an array", c0);
        goto fail;
    }
    int n = cJSON_GetArraySize(arr);
    if (n > CALIB_MAX_ENTRIES) {
        s = xf_errorf(XF_EINVAL, "%s: %d entries, more than %d", c0, n, CALIB_MAX_ENTRIES);
        goto fail;
    }
    int i = 0;
    for (const cJSON *x = arr ? arr->child : NULL; x; x = x->next, i++) {
        char ce[384], name[32];
        snprintf(ce, sizeof ce, "%s.entries[%d]", c0, i);
        calib_entry e;
        memset(&e, 0, sizeof e);
        int64_t cnt;
        if (!cJSON_IsObject(x)) {
            s = xf_errorf(XF_EINVAL, "%s: not an object", ce);
            goto fail;
        }
        if ((s = json_get_string(x, "family", ce, name, sizeof name)) || (s = calib_family_parse(name, &e.family))) goto bad;
        if ((s = json_get_string(x, "wdtype", ce, name, sizeof name)) || (s = dtype_parse(name, &e.wdtype))) goto bad;
        if ((s = json_get_string(x, "tier", ce, name, sizeof name))) goto bad;
        if (!strcmp(name, "dram")) e.tier = CALIB_TIER_DRAM;
        else if (!strcmp(name, "cache")) e.tier = CALIB_TIER_CACHE;
        else {
            s = xf_errorf(XF_EINVAL, "%s: tier '%s' is not dram or cache", ce, name);
            goto fail;
        }
        if ((s = get_pos(x, "x", ce, 0, &e.x)) || (s = get_pos(x, "y", ce, 0, &e.y)) || (s = get_pos(x, "z", ce, 0, &e.z)) ||
            (s = get_pos(x, "efficiency", ce, 0, &e.efficiency)) || (s = json_get_int(x, "n", ce, 1, 1 << 30, &cnt)))
            goto fail;
        e.n = (int)cnt;
        if ((s = calib_table_add(out, &e))) goto fail;
        continue;
    bad:
        s = xf_error_prefix(s, "%s: ", ce);
        goto fail;
    }
    return XF_OK;
fail:
    calib_table_free(out);
    return s;
}

xf_status calib_table_parse_machine(const char *text, size_t len, const char *path, calib_table *out, int *present) {
    calib_table_init(out);
    *present = 0;
    cJSON *root = NULL;
    xf_status s = json_parse_len(text, len, path, &root);
    if (s) return s;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "calibration");
    if (c && !cJSON_IsNull(c)) {
        s = calib_table_from_json(c, path, out);
        *present = s == XF_OK;
    }
    cJSON_Delete(root);
    return s;
}

#define MACHINE_FILE_MAX (64u << 20)

xf_status calib_table_load_machine(const char *path, calib_table *out, int *present) {
    calib_table_init(out);
    *present = 0;
    char *text = NULL;
    size_t len = 0;
    xf_status s = file_read_all(path, MACHINE_FILE_MAX, &text, &len);
    if (s) return s;
    s = calib_table_parse_machine(text, len, path, out, present);
    free(text);
    return s;
}

int calib_spin_check(const calib_table *t, const char *spin, const char *by, char *msg, size_t len) {
    if (!t->omp_spin[0]) {
        snprintf(msg, len, "the calibration (an older table) does not say its OpenMP spin; this run's is %.40s (by %.12s): run "
                 "'xfprof machine --calibrate' again to have it checked", spin, by);
        return -1;
    }
    if (!strcmp(t->omp_spin, spin)) {
        snprintf(msg, len, "same as the calibration's: %.40s (by %.12s)", spin, by);
        return 0;
    }
    const int assign = strchr(t->omp_spin, '=') != NULL; /* "GOMP_SPINCOUNT=3000", not "libgomp default" */
    snprintf(msg, len, "calibrated under %.40s (by %.12s), this run under %.40s (by %.12s): fork costs differ, so do predictions; "
             "calibrate again under the same conditions or %s%.40s", t->omp_spin, t->omp_spin_by, spin, by,
             assign ? "set " : "unset GOMP_SPINCOUNT and OMP_WAIT_POLICY", assign ? t->omp_spin : "");
    return 1;
}

xf_status calib_table_save_machine(const calib_table *t, const char *path) {
    char *text = NULL;
    size_t len = 0;
    xf_status s = file_read_all(path, MACHINE_FILE_MAX, &text, &len);
    if (s) return s;
    cJSON *root = NULL;
    s = json_parse_len(text, len, path, &root);
    free(text);
    if (s) return s;
    char *ct = calib_table_to_json(t);
    cJSON *c = ct ? cJSON_Parse(ct) : NULL;
    free(ct);
    if (!c) {
        cJSON_Delete(root);
        return xf_errorf(XF_ENOMEM, "out of memory writing the calibration");
    }
    cJSON_DeleteItemFromObjectCaseSensitive(root, "calibration");
    cJSON_AddItemToObject(root, "calibration", c);
    char *out = cJSON_Print(root);
    cJSON_Delete(root);
    if (!out) return xf_errorf(XF_ENOMEM, "out of memory writing the calibration");
    size_t n = strlen(out);
    out[n] = '\n';
    s = file_write_atomic(path, out, n + 1);
    free(out);
    return s;
}
