/* The record's "kv" section as JSON; docs/kv.md describes every field. */
#include "record_kv_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_util.h"

#define KV_MAX_POLICIES 64
#define KV_MAX_SERIES 1000000
#define SEED_MAX 9007199254740991.0 /* 2^53 - 1: seeds travel as JSON numbers */

static const char *pct_key[RECORD_KV_PCT_COUNT] = {"p50", "p90", "p99"};

/* ---- writing ---- */

/* The section is written exactly (json_exact_number: the shortest decimal that reads back as the
 * same double). Non-finite values become null. */

static int put_number(cJSON *o, const char *k, double v) {
    cJSON *n = json_exact_number(v);
    if (!n) return 0;
    if (!cJSON_AddItemToObject(o, k, n)) {
        cJSON_Delete(n);
        return 0;
    }
    return 1;
}

static int add_str(cJSON *o, const char *k, const char *v) { return cJSON_AddStringToObject(o, k, v) != NULL; }

static cJSON *num_array(const double *v, int64_t n, size_t stride) {
    cJSON *a = cJSON_CreateArray();
    for (int64_t i = 0; a && i < n; i++) {
        double x = *(const double *)((const char *)v + (size_t)i * stride);
        cJSON *e = json_exact_number(x);
        if (!e || !cJSON_AddItemToArray(a, e)) {
            cJSON_Delete(e);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

static int add_array(cJSON *o, const char *k, const double *v, int64_t n, size_t stride) {
    cJSON *a = num_array(v, n, stride);
    if (!a) return 0;
    if (!cJSON_AddItemToObject(o, k, a)) {
        cJSON_Delete(a);
        return 0;
    }
    return 1;
}

static int add_obj(cJSON *parent, const char *k, cJSON *o) {
    if (!o) return 0;
    if (!cJSON_AddItemToObject(parent, k, o)) {
        cJSON_Delete(o);
        return 0;
    }
    return 1;
}

static cJSON *latency_json(const double *pct, double mean) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    int ok = 1;
    for (int k = 0; k < RECORD_KV_PCT_COUNT; k++) ok &= put_number(o, pct_key[k], pct[k]);
    ok &= put_number(o, "mean", mean);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Written when a pool has a window or there are two (optional on reading): each layer group's
 * own pool and shares. */
static int groups_json(cJSON *o, const record_kv_policy *p) {
    if (p->n_groups < 2 && !(p->n_groups == 1 && p->groups[0].window > 0)) return 1;
    cJSON *arr = cJSON_CreateArray();
    int ok = arr != NULL;
    for (int g = 0; ok && g < p->n_groups; g++) {
        const record_kv_group *gr = &p->groups[g];
        cJSON *e = cJSON_CreateObject();
        ok = e && put_number(e, "n_layers", (double)gr->n_layers) && put_number(e, "window", (double)gr->window) &&
             put_number(e, "n_slots", (double)gr->n_slots) && put_number(e, "pool_bytes", gr->pool_bytes);
        for (int c = 0; ok && c < KV_CAT_COUNT; c++) ok = put_number(e, kv_category_name((kv_category)c), gr->share[c]);
        if (!ok || !cJSON_AddItemToArray(arr, e)) {
            cJSON_Delete(e);
            ok = 0;
        }
    }
    return add_obj(o, "groups", ok ? arr : (cJSON_Delete(arr), NULL));
}

static cJSON *policy_json(const record_kv_policy *p) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    int ok = add_str(o, "policy", p->policy) & put_number(o, "n_slots", (double)p->n_slots) &
             put_number(o, "block_tokens", (double)p->block_tokens) & put_number(o, "pool_bytes", p->pool_bytes);
    for (int c = 0; c < KV_CAT_COUNT; c++) ok &= put_number(o, kv_category_name((kv_category)c), p->share[c]);
    cJSON *bytes = cJSON_CreateObject();
    for (int c = 0; bytes && c < KV_CAT_COUNT; c++) ok &= put_number(bytes, kv_category_name((kv_category)c), p->bytes[c]);
    ok &= add_obj(o, "bytes", bytes);
    ok &= put_number(o, "max_live", (double)p->max_live) & put_number(o, "mean_live", p->mean_live) &
          put_number(o, "max_batch", (double)p->max_batch) & put_number(o, "mean_batch", p->mean_batch) &
          put_number(o, "n_completed", (double)p->n_completed) & put_number(o, "preemptions", (double)p->preemptions) &
          put_number(o, "alloc_failures", (double)p->alloc_failures) & put_number(o, "n_steps", (double)p->n_steps) &
          put_number(o, "duration_s", p->duration_s) & put_number(o, "busy_s", p->busy_s) &
          put_number(o, "output_tokens", p->output_tokens) & put_number(o, "prompt_tokens", p->prompt_tokens) &
          put_number(o, "tokens_per_s", p->tokens_per_s) & put_number(o, "requests_per_s", p->requests_per_s);
    ok &= groups_json(o, p);
    ok &= add_obj(o, "ttft_s", latency_json(p->ttft_s, p->ttft_mean_s));
    ok &= add_obj(o, "tpot_s", latency_json(p->tpot_s, p->tpot_mean_s));
    if (ok && p->n_requests_kept > 0) {
        cJSON *r = cJSON_CreateObject();
        ok &= r && add_array(r, "ttft_s", p->req_ttft_s, p->n_requests_kept, sizeof(double)) &&
              add_array(r, "tpot_s", p->req_tpot_s, p->n_requests_kept, sizeof(double));
        ok &= add_obj(o, "requests", r);
    }
    if (ok) {
        cJSON *s = cJSON_CreateObject();
        const record_kv_sample *x = p->series;
        size_t st = sizeof *x;
        int64_t n = p->n_series;
        ok &= s && add_array(s, "t_s", &x->t_s, n, st) && add_array(s, "dt_s", &x->dt_s, n, st);
        for (int c = 0; ok && s && c < KV_CAT_COUNT; c++) ok &= add_array(s, kv_category_name((kv_category)c), &x->share[c], n, st);
        ok &= s && add_array(s, "batch", &x->batch, n, st) && add_array(s, "live", &x->live, n, st);
        ok &= add_obj(o, "series", s);
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *record_kv_to_json(const record_kv *kv) {
    if (!kv) return NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    int ok = put_number(o, "budget_bytes", kv->budget_bytes) & put_number(o, "bytes_per_token", (double)kv->bytes_per_token) &
             add_str(o, "kvdtype", kv->kvdtype) & put_number(o, "max_len", (double)kv->max_len) &
             add_str(o, "arrivals", kv->arrivals) & put_number(o, "rate", kv->rate) &
             put_number(o, "n_requests", (double)kv->n_requests) & add_str(o, "prompt_dist", kv->prompt_dist) &
             add_str(o, "output_dist", kv->output_dist) & add_str(o, "trace_file", kv->trace_file) &
             put_number(o, "seed", (double)kv->seed) & add_str(o, "preempt", kv->preempt) &
             add_str(o, "step_model", kv->step_model) & put_number(o, "mean_prompt", kv->mean_prompt) &
             put_number(o, "mean_output", kv->mean_output);
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; ok && arr && i < kv->n_policies; i++) {
        cJSON *p = policy_json(&kv->policies[i]);
        if (!p || !cJSON_AddItemToArray(arr, p)) {
            cJSON_Delete(p);
            ok = 0;
        }
    }
    ok &= add_obj(o, "policies", arr);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* ---- reading (untrusted) ---- */

static xf_status get_nonneg(const cJSON *o, const char *k, const char *ctx, double *out) {
    xf_status s = json_get_number(o, k, ctx, out);
    if (s != XF_OK) return s;
    if (*out < 0) return xf_errorf(XF_EINVAL, "%s: field '%s' = %g must be >= 0", ctx, k, *out);
    return XF_OK;
}

static xf_status get_share(const cJSON *o, const char *k, const char *ctx, double *out) {
    xf_status s = json_get_number(o, k, ctx, out);
    if (s != XF_OK) return s;
    if (!(*out >= -1e-9 && *out <= 1 + 1e-9)) return xf_errorf(XF_EINVAL, "%s: share '%s' = %g must be within [0, 1]", ctx, k, *out);
    return XF_OK;
}

/* A number array of exactly n entries (n < 0: any length, *n_out set), each >= lo (or == -1
 * when allow_minus_one). *out malloc'ed (NULL for an empty array), caller frees. */
static xf_status get_array(const cJSON *o, const char *k, const char *ctx, int64_t n, int64_t max_n, double lo, int allow_minus_one,
                           double **out, int64_t *n_out) {
    *out = NULL;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!a) return xf_errorf(XF_EINVAL, "%s: missing field '%s'", ctx, k);
    if (!cJSON_IsArray(a)) return xf_errorf(XF_EINVAL, "%s: field '%s' must be an array of numbers", ctx, k);
    int64_t len = cJSON_GetArraySize(a);
    if (n >= 0 && len != n) return xf_errorf(XF_EINVAL, "%s: array '%s' has %lld entries, expected %lld", ctx, k, (long long)len, (long long)n);
    if (len > max_n) return xf_errorf(XF_EINVAL, "%s: array '%s' has %lld entries, at most %lld accepted", ctx, k, (long long)len, (long long)max_n);
    double *v = len > 0 ? malloc((size_t)len * sizeof *v) : NULL;
    if (len > 0 && !v) return xf_errorf(XF_ENOMEM, "%s: out of memory reading '%s'", ctx, k);
    int64_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || !(e->valuedouble >= lo || (allow_minus_one && e->valuedouble == -1))) {
            free(v);
            return xf_errorf(XF_EINVAL, "%s: %s[%lld] must be a finite number >= %g", ctx, k, (long long)i, lo);
        }
        v[i++] = e->valuedouble;
    }
    *out = v;
    if (n_out) *n_out = len;
    return XF_OK;
}

static xf_status latency_from(const cJSON *o, const char *k, const char *ctx, double *pct, double *mean) {
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(o, k);
    char sub[160];
    snprintf(sub, sizeof sub, "%s.%s", ctx, k);
    if (!l) return xf_errorf(XF_EINVAL, "%s: missing field '%s'", ctx, k);
    if (!cJSON_IsObject(l)) return xf_errorf(XF_EINVAL, "%s: field '%s' must be an object", ctx, k);
    xf_status s;
    for (int i = 0; i < RECORD_KV_PCT_COUNT; i++)
        if ((s = get_nonneg(l, pct_key[i], sub, &pct[i]))) return s;
    for (int i = 1; i < RECORD_KV_PCT_COUNT; i++)
        if (pct[i] < pct[i - 1]) return xf_errorf(XF_EINVAL, "%s: %s < %s: percentiles must not decrease", sub, pct_key[i], pct_key[i - 1]);
    return get_nonneg(l, "mean", sub, mean);
}

static xf_status get_count(const cJSON *o, const char *k, const char *ctx, int64_t *out) {
    return json_get_int(o, k, ctx, 0, (int64_t)1 << 53, out);
}

static xf_status groups_from(const cJSON *o, const char *ctx, record_kv_policy *p) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "groups");
    p->n_groups = 0;
    if (!a || cJSON_IsNull(a)) return XF_OK; /* older records, and single pools without a window */
    char sub[160];
    snprintf(sub, sizeof sub, "%s.groups", ctx);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) < 1 || cJSON_GetArraySize(a) > RECORD_KV_MAX_GROUPS)
        return xf_errorf(XF_EINVAL, "%s: must be an array of 1 or %d layer groups", sub, RECORD_KV_MAX_GROUPS);
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        record_kv_group *g = &p->groups[p->n_groups];
        char gctx[192];
        snprintf(gctx, sizeof gctx, "%s[%d]", sub, p->n_groups);
        if (!cJSON_IsObject(e)) return xf_errorf(XF_EINVAL, "%s: must be an object", gctx);
        xf_status s;
        if ((s = json_get_int(e, "n_layers", gctx, 1, 1 << 16, &g->n_layers)) ||
            (s = json_get_int(e, "window", gctx, 0, INT32_MAX, &g->window)) ||
            (s = json_get_int(e, "n_slots", gctx, 1, INT32_MAX, &g->n_slots)) || (s = get_nonneg(e, "pool_bytes", gctx, &g->pool_bytes)))
            return s;
        double sum = 0;
        for (int c = 0; c < KV_CAT_COUNT; c++) {
            if ((s = get_share(e, kv_category_name((kv_category)c), gctx, &g->share[c]))) return s;
            sum += g->share[c];
        }
        if (fabs(sum - 1.0) > 1e-6) return xf_errorf(XF_EINVAL, "%s: the five shares add up to %.9g, not 1", gctx, sum);
        p->n_groups++;
    }
    return XF_OK;
}

static xf_status policy_from(const cJSON *o, const char *ctx, record_kv_policy *p) {
    if (!cJSON_IsObject(o)) return xf_errorf(XF_EINVAL, "%s: must be an object", ctx);
    xf_status s;
    if ((s = json_get_string(o, "policy", ctx, p->policy, sizeof p->policy)) ||
        (s = json_get_int(o, "n_slots", ctx, 1, INT32_MAX, &p->n_slots)) ||
        (s = json_get_int(o, "block_tokens", ctx, 0, 65536, &p->block_tokens)) || (s = get_nonneg(o, "pool_bytes", ctx, &p->pool_bytes)))
        return s;
    double sum = 0;
    for (int c = 0; c < KV_CAT_COUNT; c++) {
        if ((s = get_share(o, kv_category_name((kv_category)c), ctx, &p->share[c]))) return s;
        sum += p->share[c];
    }
    if (fabs(sum - 1.0) > 1e-6) return xf_errorf(XF_EINVAL, "%s: the five shares add up to %.9g, not 1", ctx, sum);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "bytes");
    char sub[160];
    snprintf(sub, sizeof sub, "%s.bytes", ctx);
    if (!b || !cJSON_IsObject(b)) return xf_errorf(XF_EINVAL, "%s: field 'bytes' must be an object", ctx);
    for (int c = 0; c < KV_CAT_COUNT; c++)
        if ((s = get_nonneg(b, kv_category_name((kv_category)c), sub, &p->bytes[c]))) return s;
    if ((s = get_count(o, "max_live", ctx, &p->max_live)) || (s = get_nonneg(o, "mean_live", ctx, &p->mean_live)) ||
        (s = get_count(o, "max_batch", ctx, &p->max_batch)) || (s = get_nonneg(o, "mean_batch", ctx, &p->mean_batch)) ||
        (s = get_count(o, "n_completed", ctx, &p->n_completed)) || (s = get_count(o, "preemptions", ctx, &p->preemptions)) ||
        (s = get_count(o, "alloc_failures", ctx, &p->alloc_failures)) || (s = get_count(o, "n_steps", ctx, &p->n_steps)) ||
        (s = get_nonneg(o, "duration_s", ctx, &p->duration_s)) || (s = get_nonneg(o, "busy_s", ctx, &p->busy_s)) ||
        (s = get_nonneg(o, "output_tokens", ctx, &p->output_tokens)) || (s = get_nonneg(o, "prompt_tokens", ctx, &p->prompt_tokens)) ||
        (s = get_nonneg(o, "tokens_per_s", ctx, &p->tokens_per_s)) || (s = get_nonneg(o, "requests_per_s", ctx, &p->requests_per_s)) ||
        (s = latency_from(o, "ttft_s", ctx, p->ttft_s, &p->ttft_mean_s)) ||
        (s = latency_from(o, "tpot_s", ctx, p->tpot_s, &p->tpot_mean_s)))
        return s;
    if ((double)p->max_live < p->mean_live - 1e-9 || (double)p->max_batch < p->mean_batch - 1e-9)
        return xf_errorf(XF_EINVAL, "%s: a mean (live %g, batch %g) exceeds its maximum (%lld, %lld)", ctx, p->mean_live, p->mean_batch,
                         (long long)p->max_live, (long long)p->max_batch);
    if ((s = groups_from(o, ctx, p))) return s;
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "requests");
    if (r && !cJSON_IsNull(r)) {
        snprintf(sub, sizeof sub, "%s.requests", ctx);
        if (!cJSON_IsObject(r)) return xf_errorf(XF_EINVAL, "%s: must be an object", sub);
        if ((s = get_array(r, "ttft_s", sub, -1, RECORD_KV_MAX_PER_REQUEST, 0, 0, &p->req_ttft_s, &p->n_requests_kept))) return s;
        if ((s = get_array(r, "tpot_s", sub, p->n_requests_kept, RECORD_KV_MAX_PER_REQUEST, 0, 1, &p->req_tpot_s, NULL))) return s;
    }
    const cJSON *se = cJSON_GetObjectItemCaseSensitive(o, "series");
    snprintf(sub, sizeof sub, "%s.series", ctx);
    if (!se || !cJSON_IsObject(se)) return xf_errorf(XF_EINVAL, "%s: field 'series' must be an object", ctx);
    double *t = NULL;
    int64_t n = 0;
    if ((s = get_array(se, "t_s", sub, -1, KV_MAX_SERIES, 0, 0, &t, &n))) return s;
    p->series = n > 0 ? calloc((size_t)n, sizeof *p->series) : NULL;
    if (n > 0 && !p->series) {
        free(t);
        return xf_errorf(XF_ENOMEM, "%s: out of memory", sub);
    }
    p->n_series = n;
    for (int64_t i = 0; i < n; i++) p->series[i].t_s = t[i];
    free(t);
    const char *cols[KV_CAT_COUNT + 3] = {"dt_s", "token_states", "reserved", "internal", "external", "free", "batch", "live"};
    for (int k = 0; k < KV_CAT_COUNT + 3; k++) {
        double *v = NULL;
        if ((s = get_array(se, cols[k], sub, n, KV_MAX_SERIES, 0, 0, &v, NULL))) return s;
        for (int64_t i = 0; i < n; i++) {
            record_kv_sample *x = &p->series[i];
            if (k == 0) x->dt_s = v[i];
            else if (k <= KV_CAT_COUNT) x->share[k - 1] = v[i];
            else if (k == KV_CAT_COUNT + 1) x->batch = v[i];
            else x->live = v[i];
        }
        free(v);
        if (k >= 1 && k <= KV_CAT_COUNT)
            for (int64_t i = 0; i < n; i++)
                if (p->series[i].share[k - 1] > 1 + 1e-9) return xf_errorf(XF_EINVAL, "%s: %s[%lld] is over 1", sub, cols[k], (long long)i);
    }
    for (int64_t i = 1; i < n; i++)
        if (p->series[i].t_s < p->series[i - 1].t_s) return xf_errorf(XF_EINVAL, "%s: t_s[%lld] goes back in time", sub, (long long)i);
    return XF_OK;
}

xf_status record_kv_from_json(const cJSON *j, const char *ctx, record_kv **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return xf_errorf(XF_ENOMEM, "%s: out of memory", ctx);
    record_kv *kv = *out;
    if (!cJSON_IsObject(j)) return xf_errorf(XF_EINVAL, "%s: must be an object", ctx);
    xf_status s;
    double seed;
    if ((s = get_nonneg(j, "budget_bytes", ctx, &kv->budget_bytes)) ||
        (s = json_get_int(j, "bytes_per_token", ctx, 1, (int64_t)1 << 40, &kv->bytes_per_token)) ||
        (s = json_get_string(j, "kvdtype", ctx, kv->kvdtype, sizeof kv->kvdtype)) ||
        (s = json_get_int(j, "max_len", ctx, 2, (int64_t)1 << 31, &kv->max_len)) ||
        (s = json_get_string(j, "arrivals", ctx, kv->arrivals, sizeof kv->arrivals)) || (s = get_nonneg(j, "rate", ctx, &kv->rate)) ||
        (s = json_get_int(j, "n_requests", ctx, 1, 100000000, &kv->n_requests)) ||
        (s = json_get_string(j, "prompt_dist", ctx, kv->prompt_dist, sizeof kv->prompt_dist)) ||
        (s = json_get_string(j, "output_dist", ctx, kv->output_dist, sizeof kv->output_dist)) ||
        (s = json_get_string(j, "trace_file", ctx, kv->trace_file, sizeof kv->trace_file)) ||
        (s = get_nonneg(j, "seed", ctx, &seed)) || (s = json_get_string(j, "preempt", ctx, kv->preempt, sizeof kv->preempt)) ||
        (s = json_get_string(j, "step_model", ctx, kv->step_model, sizeof kv->step_model)))
        return s;
    /* mean request lengths: optional (records before they were written lack them) */
    if (cJSON_GetObjectItemCaseSensitive(j, "mean_prompt") && (s = get_nonneg(j, "mean_prompt", ctx, &kv->mean_prompt))) return s;
    if (cJSON_GetObjectItemCaseSensitive(j, "mean_output") && (s = get_nonneg(j, "mean_output", ctx, &kv->mean_output))) return s;
    if (seed > SEED_MAX || seed != floor(seed)) return xf_errorf(XF_EINVAL, "%s: seed must be a whole number below 2^53", ctx);
    kv->seed = (uint64_t)seed;
    if (strcmp(kv->arrivals, "poisson") && strcmp(kv->arrivals, "burst") && strcmp(kv->arrivals, "trace"))
        return xf_errorf(XF_EINVAL, "%s: arrivals '%s' must be poisson, burst or trace", ctx, kv->arrivals);
    if (strcmp(kv->preempt, "recompute") && strcmp(kv->preempt, "wait"))
        return xf_errorf(XF_EINVAL, "%s: preempt '%s' must be recompute or wait", ctx, kv->preempt);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "policies");
    if (!arr || !cJSON_IsArray(arr)) return xf_errorf(XF_EINVAL, "%s: field 'policies' must be an array", ctx);
    int n = cJSON_GetArraySize(arr);
    if (n < 1 || n > KV_MAX_POLICIES) return xf_errorf(XF_EINVAL, "%s: %d policies; 1 to %d accepted", ctx, n, KV_MAX_POLICIES);
    kv->policies = calloc((size_t)n, sizeof *kv->policies);
    if (!kv->policies) return xf_errorf(XF_ENOMEM, "%s: out of memory", ctx);
    kv->n_policies = n;
    int i = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, arr) {
        char sub[96];
        snprintf(sub, sizeof sub, "%s.policies[%d]", ctx, i);
        if ((s = policy_from(p, sub, &kv->policies[i]))) return s;
        i++;
    }
    return XF_OK;
}
