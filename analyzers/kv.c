#include "kv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/roofline.h"
#include "core/units.h"
#include "reference_model/cost_model.h"

#define N_SUMS 4 /* seqs, rows, pairs, kv_tokens */

/* One distinct op: FLOPs and bytes affine in the step's sums, times its multiplicity. */
typedef struct cost_lin {
    xf_compute compute;
    double f[N_SUMS + 1]; /* constant, then per sum */
    double q[N_SUMS + 1];
    double mult;
    /* The decode form (seqs = rows = b, pairs = kv_tokens = C): constant, per b, per C. */
    double fd[3], qd[3];
    /* roofline_predict_time's max(F / P, Q / B) as multiplications: 1 / P (0 when the device has
     * no such peak) and 1 / B. build_phase checks the result against roofline_predict_time. */
    double inv_peak, inv_bw;
} cost_lin;

struct sim_cost {
    model_config cfg;
    workload w;
    device_spec d;
    int64_t n_ops;
    cost_op *ops;          /* (n_ops) scratch for exact evaluation */
    int n_lin[XF_PHASE_COUNT];
    cost_lin *lin[XF_PHASE_COUNT]; /* (n_lin[phase]) */
};

static void sums_vec(const cost_step_sums *s, double v[N_SUMS]) {
    v[0] = s->seqs;
    v[1] = s->rows;
    v[2] = s->pairs;
    v[3] = s->kv_tokens;
}

static double lin_eval(const double *c, const double v[N_SUMS]) {
    double x = c[0];
    for (int j = 0; j < N_SUMS; j++) x += c[j + 1] * v[j];
    return x;
}

static double exact_time(sim_cost *c, const cost_step_sums *s) {
    if (cost_step_of_sums(&c->cfg, &c->w, s, c->ops, c->n_ops) != XF_OK) return 0.0;
    double t = 0;
    for (int64_t i = 0; i < c->n_ops; i++) t += roofline_predict_time(&c->ops[i], &c->d);
    return t;
}

static double lin_time(const sim_cost *c, const cost_step_sums *s) {
    double v[N_SUMS];
    sums_vec(s, v);
    double t = 0;
    const cost_lin *L = c->lin[s->phase];
    int n = c->n_lin[s->phase];
    if (s->phase == XF_DECODE && s->seqs == s->rows && s->pairs == s->kv_tokens) {
        const double b = s->seqs, C = s->kv_tokens;
        for (int i = 0; i < n; i++) {
            double tc = (L[i].fd[0] + L[i].fd[1] * b + L[i].fd[2] * C) * L[i].inv_peak;
            double tm = (L[i].qd[0] + L[i].qd[1] * b + L[i].qd[2] * C) * L[i].inv_bw;
            t += L[i].mult * (tc > tm ? tc : tm);
        }
        return t;
    }
    for (int i = 0; i < n; i++) {
        double tc = lin_eval(L[i].f, v) * L[i].inv_peak, tm = lin_eval(L[i].q, v) * L[i].inv_bw;
        t += L[i].mult * (tc > tm ? tc : tm);
    }
    return t;
}

static double phase_time(sim_cost *c, const cost_step_sums *s) {
    if (s->seqs < 1) return 0.0;
    /* Past the vocabulary the embedding gathers the whole table at most: not affine. Windowed
     * layers' attention (min(window, context) keys per query) and the experts an MoE step reads
     * (E (1 - (1 - k/E)^N)) are not affine either. */
    if (s->rows > (double)c->cfg.vocab || c->cfg.sliding_window > 0 || c->cfg.n_experts > 0) return exact_time(c, s);
    return lin_time(c, s);
}

/* Affine coefficients of every op of one phase by finite differences around a base step, then
 * ops with identical coefficients folded (the layers). */
static xf_status build_phase(sim_cost *c, xf_phase ph) {
    const double base[N_SUMS] = {8, 256, 4096, 512}, h = 64;
    int64_t n = c->n_ops;
    cost_op *at[N_SUMS + 1];
    cost_lin *all = calloc((size_t)n, sizeof *all);
    xf_status st = all ? XF_OK : xf_errorf(XF_ENOMEM, "out of memory for the step-cost model");
    for (int j = 0; j <= N_SUMS; j++) at[j] = NULL;
    for (int j = 0; j <= N_SUMS && st == XF_OK; j++) {
        at[j] = malloc((size_t)n * sizeof *at[j]);
        if (!at[j]) {
            st = xf_errorf(XF_ENOMEM, "out of memory for the step-cost model");
            break;
        }
        double v[N_SUMS];
        memcpy(v, base, sizeof v);
        if (j > 0) v[j - 1] += h;
        cost_step_sums s = {ph, v[0], v[1], v[2], v[3], 0, 0, 0};
        st = cost_step_of_sums(&c->cfg, &c->w, &s, at[j], n);
    }
    int nl = 0;
    for (int64_t i = 0; i < n && st == XF_OK; i++) {
        cost_lin L;
        memset(&L, 0, sizeof L);
        L.compute = at[0][i].compute;
        L.mult = 1;
        for (int j = 1; j <= N_SUMS; j++) {
            L.f[j] = (at[j][i].flops - at[0][i].flops) / h;
            L.q[j] = (at[j][i].bytes - at[0][i].bytes) / h;
        }
        L.f[0] = at[0][i].flops;
        L.q[0] = at[0][i].bytes;
        for (int j = 0; j < N_SUMS; j++) {
            L.f[0] -= L.f[j + 1] * base[j];
            L.q[0] -= L.q[j + 1] * base[j];
        }
        double peak = device_peak(&c->d, L.compute);
        L.inv_peak = peak > 0 ? 1.0 / peak : 0.0;
        L.inv_bw = c->d.bandwidth_Bps > 0 ? 1.0 / c->d.bandwidth_Bps : 0.0;
        L.fd[0] = L.f[0];
        L.fd[1] = L.f[1] + L.f[2];
        L.fd[2] = L.f[3] + L.f[4];
        L.qd[0] = L.q[0];
        L.qd[1] = L.q[1] + L.q[2];
        L.qd[2] = L.q[3] + L.q[4];
        int k;
        for (k = 0; k < nl; k++)
            if (all[k].compute == L.compute && memcmp(all[k].f, L.f, sizeof L.f) == 0 && memcmp(all[k].q, L.q, sizeof L.q) == 0) break;
        if (k < nl) all[k].mult += 1;
        else all[nl++] = L;
    }
    for (int j = 0; j <= N_SUMS; j++) free(at[j]);
    if (st != XF_OK) {
        free(all);
        return st;
    }
    c->lin[ph] = all;
    c->n_lin[ph] = nl;
    /* Check the folded model against the cost model at probe steps away from the base. */
    const double probes[6][N_SUMS] = {{1, 1, 1, 1},         {1, 2000, 2001000, 2000}, {64, 64, 64 * 3000, 64 * 3000},
                                      {3, 700, 90000, 5000}, {256, 256, 4e6, 4e6},      {7, 7, 7, 7}};
    for (int p = 0; p < 6; p++) {
        cost_step_sums s = {ph, probes[p][0], probes[p][1], probes[p][2], probes[p][3], 0, 0, 0};
        if (s.rows > (double)c->cfg.vocab || c->cfg.sliding_window > 0 || c->cfg.n_experts > 0) continue; /* exact_time there */
        double a = lin_time(c, &s), e = exact_time(c, &s);
        if (!(e > 0) || fabs(a - e) > 1e-9 * e)
            return xf_errorf(XF_EINVAL, "the step-cost model is not affine in the step's sums (%s probe %d: %.9g s vs %.9g s)",
                             phase_name(ph), p, a, e);
    }
    return XF_OK;
}

xf_status sim_cost_init(sim_cost **out, const model_config *cfg, const workload *w, const device_spec *d) {
    if (!out || !cfg || !w || !d) return xf_errorf(XF_EINVAL, "sim_cost_init: NULL argument");
    *out = NULL;
    xf_status st = config_validate(cfg);
    if (st != XF_OK) return st;
    sim_cost *c = calloc(1, sizeof *c);
    if (!c) return xf_errorf(XF_ENOMEM, "out of memory for the step-cost model");
    c->cfg = *cfg;
    c->w = *w;
    c->w.batch = 1;
    c->w.prompt = 1;
    c->w.gen = 1;
    c->d = *d;
    c->n_ops = cost_step_op_count(cfg);
    c->ops = malloc((size_t)c->n_ops * sizeof *c->ops);
    if (!c->ops) st = xf_errorf(XF_ENOMEM, "out of memory for the step-cost model");
    if (st == XF_OK) st = build_phase(c, XF_PREFILL);
    if (st == XF_OK) st = build_phase(c, XF_DECODE);
    if (st != XF_OK) {
        sim_cost_free(c);
        return st;
    }
    *out = c;
    return XF_OK;
}

void sim_cost_free(sim_cost *c) {
    if (!c) return;
    free(c->ops);
    free(c->lin[0]);
    free(c->lin[1]);
    free(c);
}

static void step_sums(const sim_step *s, cost_step_sums *p, cost_step_sums *d) {
    *p = (cost_step_sums){XF_PREFILL, (double)s->n_prefill, (double)s->prefill_tokens, s->prefill_pairs, (double)s->prefill_tokens, 0, 0, 0};
    *d = (cost_step_sums){XF_DECODE, (double)s->n_decode, (double)s->n_decode, (double)s->decode_context, (double)s->decode_context, 0, 0, 0};
}

double sim_cost_step_time(void *ctx, const sim_step *s) {
    sim_cost *c = ctx;
    cost_step_sums p, d;
    step_sums(s, &p, &d);
    return phase_time(c, &p) + phase_time(c, &d);
}

double sim_cost_step_time_exact(sim_cost *c, const sim_step *s) {
    cost_step_sums p, d;
    step_sums(s, &p, &d);
    return (p.seqs >= 1 ? exact_time(c, &p) : 0) + (d.seqs >= 1 ? exact_time(c, &d) : 0);
}

double sim_cost_max_error(sim_cost *c, int n, int64_t max_batch, int64_t max_len, uint64_t seed) {
    sim_rng r;
    sim_rng_seed(&r, seed);
    double worst = 0;
    if (max_batch < 1 || max_len < 2) return 0;
    for (int i = 0; i < n; i++) {
        sim_step s;
        memset(&s, 0, sizeof s);
        s.n_prefill = (int64_t)(sim_rng_next(&r) % 4);
        for (int64_t k = 0; k < s.n_prefill; k++) {
            int64_t p = 1 + (int64_t)(sim_rng_next(&r) % (uint64_t)max_len);
            s.prefill_tokens += p;
            s.prefill_pairs += (double)p * (double)(p + 1) / 2.0;
        }
        s.n_decode = (int64_t)(sim_rng_next(&r) % (uint64_t)(max_batch + 1));
        for (int64_t k = 0; k < s.n_decode; k++) s.decode_context += 1 + (int64_t)(sim_rng_next(&r) % (uint64_t)max_len);
        if (s.n_prefill == 0 && s.n_decode == 0) continue;
        double a = sim_cost_step_time(c, &s), e = sim_cost_step_time_exact(c, &s);
        if (e > 0 && fabs(a - e) / e > worst) worst = fabs(a - e) / e;
    }
    return worst;
}

xf_status kv_budget_default(const model_config *cfg, const workload *w, const device_spec *d, int64_t max_len, double *out) {
    if (!out) return xf_errorf(XF_EINVAL, "kv_budget_default: no output");
    *out = 0;
    if (!cfg || !w || !d) return xf_errorf(XF_EINVAL, "kv_budget_default: missing model, workload or device");
    xf_status s = config_validate(cfg);
    if (s) return xf_error_prefix(s, "%s: ", cfg->name);
    double mem = d->memory_bytes, weights = cost_weight_bytes(cfg, w);
    if (!(isfinite(mem) && mem > 0))
        return xf_errorf(XF_EINVAL, "%s: the device's memory size is unknown; give --kv-budget", d->name);
    if (!(isfinite(weights) && weights > 0))
        return xf_errorf(XF_EINVAL, "%s: the cost model gave no weight bytes at %s; give --kv-budget", cfg->name, dtype_name(w->wdtype));
    workload one = *w;
    one.batch = 1;
    one.prompt = max_len > 0 ? max_len : 1;
    one.gen = 0;
    /* cost_memory_of gives all zeros outside the workload limits: the budget would then count no
     * activations at all for the longest contexts. Only weights that already fill the device
     * settle it without them. */
    char why[256] = "";
    double acts = 0;
    if ((s = workload_validate(&one)) != XF_OK) {
        snprintf(why, sizeof why, "%s", xf_error_msg());
    } else {
        cost_memory m;
        cost_memory_of(cfg, &one, &m);
        acts = m.activations_bytes;
        if (!(isfinite(acts) && acts > 0)) {
            snprintf(why, sizeof why, "the cost model gave no activation bytes");
            acts = 0;
        }
    }
    double budget = mem - weights - acts;
    if (!(budget >= 1)) {
        char bw[32], ba[32], bm[32], part[160] = "", sum[48] = "";
        if (acts > 0) {
            snprintf(part, sizeof part, " and the activations of one %lld-token prefill (%.4g bytes)", (long long)one.prompt, acts);
            snprintf(sum, sizeof sum, " + %s", units_bytes(acts, ba, sizeof ba));
        }
        return xf_errorf(XF_EINVAL, "%s's weights (%.4g bytes at %s)%s leave no KV memory on %s (%.4g bytes): %s%s vs %s; give --kv-budget or a smaller --wdtype",
                         cfg->name, weights, dtype_name(w->wdtype), part, d->name, mem, units_bytes(weights, bw, sizeof bw), sum,
                         units_bytes(mem, bm, sizeof bm));
    }
    if (why[0])
        return xf_errorf(XF_EINVAL, "the activations of one %lld-token prefill cannot be counted for the default KV budget (%s); give --max-len or --kv-budget",
                         (long long)one.prompt, why);
    *out = budget;
    return XF_OK;
}

double kv_default_budget(const model_config *cfg, const workload *w, const device_spec *d, int64_t max_len) {
    double b = 0;
    return kv_budget_default(cfg, w, d, max_len, &b) == XF_OK ? b : 0;
}

double kv_held_shares(const record_kv_policy *p, double held[KV_CAT_COUNT]) {
    double h = 0;
    for (int c = 0; c < KV_CAT_COUNT; c++) held[c] = 0;
    if (!p) return 0;
    for (int c = 0; c < KV_CAT_COUNT; c++)
        if (c != KV_CAT_FREE) h += p->share[c];
    if (!(h > 0)) return 0;
    for (int c = 0; c < KV_CAT_COUNT; c++)
        if (c != KV_CAT_FREE) held[c] = p->share[c] / h;
    return h;
}
