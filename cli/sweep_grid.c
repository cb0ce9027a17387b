#include "sweep_grid.h"

#include "core/limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "reference_model/cost_parallel.h"
#include "reference_model/kv_cache.h"

void sweep_grid_init(sweep_grid *g) {
    memset(g, 0, sizeof *g);
    g->reps = 5;
    g->warmup = 1;
    g->n_wd = 0; /* default depends on the mode: set at expansion */
}

void sweep_grid_free(sweep_grid *g) {
    if (!g) return;
    args_str_list_free(g->models, g->n_models);
    args_str_list_free(g->devices, g->n_devices);
    args_str_list_free(g->policies, g->n_policies);
    free(g->device_file);
    free(g->batch);
    free(g->prompt);
    free(g->gen);
    free(g->threads);
    free(g->tp);
    free(g->pp);
    memset(g, 0, sizeof *g);
}

static xf_status set_ints(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t **dst, int *n) {
    int64_t *vals;
    int k;
    xf_status s = args_int_list(flag, v, lo, hi, &vals, &k);
    if (s) return s;
    free(*dst);
    *dst = vals;
    *n = k;
    return XF_OK;
}

static xf_status set_dtypes(const char *flag, const char *v, xf_dtype *dst, int *n) {
    char **items;
    int k;
    xf_status s = args_str_list(flag, v, &items, &k);
    if (s) return s;
    if (k > XF_DTYPE_COUNT * 4) {
        args_str_list_free(items, k);
        return xf_errorf(XF_EINVAL, "%s: too many values (%d)", flag, k);
    }
    xf_dtype tmp[XF_DTYPE_COUNT * 4];
    for (int i = 0; i < k; i++)
        if ((s = dtype_parse(items[i], &tmp[i]))) {
            args_str_list_free(items, k);
            return xf_error_prefix(s, "%s: ", flag);
        }
    args_str_list_free(items, k);
    memcpy(dst, tmp, (size_t)k * sizeof *tmp);
    *n = k;
    return XF_OK;
}

static xf_status set_strs(const char *flag, const char *v, char ***dst, int *n) {
    char **items;
    int k;
    xf_status s = args_str_list(flag, v, &items, &k);
    if (s) return s;
    if (k > 4096) {
        args_str_list_free(items, k);
        return xf_errorf(XF_EINVAL, "%s: too many values (%d)", flag, k);
    }
    args_str_list_free(*dst, *n);
    *dst = items;
    *n = k;
    return XF_OK;
}

xf_status sweep_grid_set(sweep_grid *g, const char *flag, const char *v) {
    if (!v) return xf_errorf(XF_EINVAL, "%s needs a value", flag);
    const xf_limit *l = limits_find(flag); /* the shared bounds (core/limits.h) */
    if (strcmp(flag, "--batch") == 0) return set_ints(flag, v, l->min, l->max, &g->batch, &g->n_batch);
    if (strcmp(flag, "--prompt") == 0) return set_ints(flag, v, l->min, l->max, &g->prompt, &g->n_prompt);
    if (strcmp(flag, "--gen") == 0) return set_ints(flag, v, l->min, l->max, &g->gen, &g->n_gen);
    if (strcmp(flag, "--threads") == 0) return set_ints(flag, v, 0, l->max, &g->threads, &g->n_threads); /* 0 = all */
    if (strcmp(flag, "--wdtype") == 0) return set_dtypes(flag, v, g->wd, &g->n_wd);
    if (strcmp(flag, "--adtype") == 0) return set_dtypes(flag, v, g->ad, &g->n_ad);
    if (strcmp(flag, "--kvdtype") == 0) return set_dtypes(flag, v, g->kv, &g->n_kv);
    if (strcmp(flag, "--tp") == 0 || strcmp(flag, "--pp") == 0) /* the split over devices */
        return flag[2] == 't' ? set_ints(flag, v, l->min, l->max, &g->tp, &g->n_tp) : set_ints(flag, v, l->min, l->max, &g->pp, &g->n_pp);
    if (strcmp(flag, "--model") == 0) return set_strs(flag, v, &g->models, &g->n_models);
    if (strcmp(flag, "--device") == 0) return set_strs(flag, v, &g->devices, &g->n_devices);
    if (strcmp(flag, "--kv-policy") == 0) {
        char **items;
        int k;
        xf_status s = args_str_list(flag, v, &items, &k);
        if (s) return s;
        if (k > SWEEP_MAX_POLICIES) {
            args_str_list_free(items, k);
            return xf_errorf(XF_EINVAL, "%s: at most %d policies", flag, SWEEP_MAX_POLICIES);
        }
        kv_policy pols[SWEEP_MAX_POLICIES];
        for (int i = 0; i < k; i++) {
            kv_policy *pol = &pols[i];
            char canon[32];
            if ((s = kv_policy_parse(items[i], pol))) {
                args_str_list_free(items, k);
                return xf_error_prefix(s, "%s: ", flag);
            }
            kv_policy_name(pol, canon, sizeof canon);
            char *c = strdup(canon);
            if (!c) {
                args_str_list_free(items, k);
                return xf_errorf(XF_ENOMEM, "out of memory");
            }
            free(items[i]);
            items[i] = c;
        }
        args_str_list_free(g->policies, g->n_policies);
        g->policies = items;
        g->n_policies = k;
        memcpy(g->policy, pols, (size_t)k * sizeof *pols);
        return XF_OK;
    }
    return xf_errorf(XF_EINVAL, "sweep: unknown list flag '%.32s'", flag);
}


void sweep_param_key(const sweep_grid *g, const sweep_param *p, char *buf, size_t len) {
    const workload *w = &p->wl;
    int n = snprintf(buf, len, "mode=%s;model=%s;device=%s;batch=%lld;prompt=%lld;gen=%lld;wdtype=%s;adtype=%s;kvdtype=%s;group=%d",
                     g->predict ? "predict" : "run", g->models[p->model], g->devices[p->device], (long long)w->batch,
                     (long long)w->prompt, (long long)w->gen, dtype_name(w->wdtype), dtype_name(w->adtype),
                     dtype_name(w->kvdtype), w->quant_group);
    if (!g->predict && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ";threads=%d;kv_policy=%s;reps=%d;warmup=%d", p->threads, g->policies[p->policy],
                 g->reps, g->warmup);
    size_t at = strlen(buf); /* a split over devices (one device: the key as before) */
    if ((p->tp > 1 || p->pp > 1) && at < len)
        snprintf(buf + at, len - at, ";tp=%d;pp=%d;micro_batches=%d;gpus=%d", p->tp, p->pp,
                 g->micro_batches > 1 ? g->micro_batches : 1, g->gpus);
}

void sweep_param_plan(const sweep_grid *g, const sweep_param *p, parallel_plan *out) {
    out->tp = p->tp > 1 ? p->tp : 1;
    out->pp = p->pp > 1 ? p->pp : 1;
    out->micro_batches = g->micro_batches > 1 ? g->micro_batches : 1;
    out->gpus = g->gpus;
    out->replicate_vocab = 0;
}

/* Every point once per (tp, pp) of the lists, tp then pp outermost; keys again. */
static xf_status expand_parallel(const sweep_grid *g, sweep_param **ps, int64_t *k) {
    const int ntp = g->n_tp ? g->n_tp : 1, npp = g->n_pp ? g->n_pp : 1;
    for (int64_t i = 0; i < *k; i++) (*ps)[i].tp = (*ps)[i].pp = 1;
    if (ntp * npp == 1 && (!g->n_tp || g->tp[0] == 1) && (!g->n_pp || g->pp[0] == 1)) return XF_OK;
    if (!g->predict)
        return xf_errorf(XF_EINVAL, "--tp / --pp: measuring a model split over devices is not implemented; use sweep --predict "
                                    "for the cost model's split");
    const double total = (double)*k * ntp * npp;
    if (total > SWEEP_MAX_POINTS)
        return xf_errorf(XF_EINVAL, "the sweep has %.0f points, more than %d: narrow the lists", total, SWEEP_MAX_POINTS);
    sweep_param *out = calloc((size_t)total, sizeof *out);
    if (!out) return xf_errorf(XF_ENOMEM, "out of memory for %.0f sweep points", total);
    int64_t n = 0;
    for (int it = 0; it < ntp; it++)
        for (int ip = 0; ip < npp; ip++)
            for (int64_t i = 0; i < *k; i++) {
                out[n] = (*ps)[i];
                out[n].tp = g->n_tp ? (int)g->tp[it] : 1;
                out[n].pp = g->n_pp ? (int)g->pp[ip] : 1;
                sweep_param_key(g, &out[n], out[n].key, sizeof out[n].key);
                n++;
            }
    free(*ps);
    *ps = out;
    *k = n;
    return XF_OK;
}

static xf_status default_strs(char ***dst, int *n, const char *v) {
    if (*n) return XF_OK;
    return args_str_list("default", v, dst, n);
}

static xf_status default_ints(int64_t **dst, int *n, int64_t v) {
    if (*n) return XF_OK;
    if (!(*dst = malloc(sizeof **dst))) return xf_errorf(XF_ENOMEM, "out of memory");
    (*dst)[0] = v;
    *n = 1;
    return XF_OK;
}

xf_status sweep_grid_expand(sweep_grid *gp, sweep_param **out, int64_t *n) {
    *out = NULL;
    *n = 0;
    xf_status s;
    /* Defaults for the lists not given; in predict mode threads and policies are one dummy value. */
    if (gp->predict) {
        args_str_list_free(gp->policies, gp->n_policies);
        gp->policies = NULL;
        gp->n_policies = 0;
        free(gp->threads);
        gp->threads = NULL;
        gp->n_threads = 0;
    }
    if (gp->n_policies == 0) { /* the default, typed as well */
        gp->policy[0].kind = KV_POLICY_PAGED;
        gp->policy[0].block = KV_DEFAULT_BLOCK;
    }
    if ((s = default_strs(&gp->models, &gp->n_models, "stories15m")) ||
        (s = default_strs(&gp->devices, &gp->n_devices, gp->predict ? "h100-sxm" : "cpu")) ||
        (s = default_strs(&gp->policies, &gp->n_policies, XF_DEFAULT_KV_POLICY)) || (s = default_ints(&gp->batch, &gp->n_batch, 1)) ||
        (s = default_ints(&gp->prompt, &gp->n_prompt, XF_DEFAULT_PROMPT)) || (s = default_ints(&gp->gen, &gp->n_gen, XF_DEFAULT_GEN)) ||
        (s = default_ints(&gp->threads, &gp->n_threads, 0)))
        return s;
    if (!gp->n_wd) gp->wd[0] = gp->predict ? XF_BF16 : XF_FP32, gp->n_wd = 1;
    const sweep_grid g = *gp;
    int nad = g.n_ad ? g.n_ad : 1, nkv = g.n_kv ? g.n_kv : 1;
    /* Check every name before anything runs. */
    for (int i = 0; i < g.n_models; i++) {
        model_config cfg;
        s = config_resolve(g.models[i], &cfg);
        if (s) return xf_error_prefix(s, "--model %.200s: ", g.models[i]);
    }
    for (int i = 0; i < g.n_devices; i++) {
        if (g.predict && !g.device_file && !strcmp(g.devices[i], "cpu")) {
            continue; /* predict --device cpu: the machine file, resolved by the command (cli/predict_cal.c) */
        } else if (g.predict) {
            device_spec d;
            s = device_lookup(g.devices[i], g.device_file, &d);
            if (s) return s;
        } else if (strcmp(g.devices[i], "cpu") != 0 && strncmp(g.devices[i], "cuda", 4) != 0) {
            return xf_errorf(XF_EINVAL, "--device %.64s: a measured sweep runs on cpu or cuda[:N] (device spec names are for --predict)",
                             g.devices[i]);
        }
    }
    double total = (double)g.n_models * g.n_devices * g.n_wd * nad * nkv * g.n_policies * g.n_threads * g.n_prompt * g.n_gen *
                   g.n_batch;
    if (total > SWEEP_MAX_POINTS)
        return xf_errorf(XF_EINVAL, "the sweep has %.0f points, more than %d: narrow the lists", total, SWEEP_MAX_POINTS);
    sweep_param *ps = calloc((size_t)total, sizeof *ps);
    if (!ps) return xf_errorf(XF_ENOMEM, "out of memory for %.0f sweep points", total);
    int64_t k = 0;
    for (int im = 0; im < g.n_models; im++)
        for (int id = 0; id < g.n_devices; id++)
            for (int iw = 0; iw < g.n_wd; iw++)
                for (int ia = 0; ia < nad; ia++)
                    for (int ik = 0; ik < nkv; ik++)
                        for (int ipol = 0; ipol < g.n_policies; ipol++)
                            for (int it = 0; it < g.n_threads; it++)
                                for (int ip = 0; ip < g.n_prompt; ip++)
                                    for (int ig = 0; ig < g.n_gen; ig++)
                                        for (int ib = 0; ib < g.n_batch; ib++) {
                                            sweep_param *p = &ps[k++];
                                            p->model = im;
                                            p->device = id;
                                            p->policy = ipol;
                                            p->threads = (int)g.threads[it];
                                            p->wl.batch = g.batch[ib];
                                            p->wl.prompt = g.prompt[ip];
                                            p->wl.gen = g.gen[ig];
                                            p->wl.wdtype = g.wd[iw];
                                            p->wl.adtype = g.n_ad ? g.ad[ia] : dtype_default_adtype(p->wl.wdtype);
                                            p->wl.kvdtype = g.n_kv ? g.kv[ik] : (g.predict ? p->wl.adtype : XF_FP32);
                                            p->wl.quant_group = (int)g.group;
                                            sweep_param_key(&g, p, p->key, sizeof p->key);
                                        }
    if ((s = expand_parallel(&g, &ps, &k))) {
        free(ps);
        return s;
    }
    *out = ps;
    *n = k;
    return XF_OK;
}
