/* The mixture-of-experts FFN on the CPU: see cpu_moe.h. */
#include "reference_model/cpu_moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference_model/cpu_kernels.h"
#include "reference_model/cuda_moe_index.h"

#define MOE_PAR_MIN 16384 /* element-wise work below this runs on one thread (cpu_backend.c's rule) */

struct cpu_moe {
    model_config cfg;
    int64_t max_tokens, E, k, d, fe, fs;
    int threads;
    float *xr;        /* (max_tokens, d) the router's input (a copy: int8 rounds it in place) */
    float *logits;    /* (max_tokens, E) */
    int32_t *sel;     /* (max_tokens, k) chosen experts of each token, increasing */
    float *selw;      /* (max_tokens, k) their weights */
    float *route_scr; /* (2 E + n_group) cpu_moe_route_grouped's scratch */
    int64_t *off;     /* (E + 1) first row of each expert in the grouped buffers */
    int64_t *fill;    /* (E) rows placed so far (grouping) */
    int64_t *row_of;  /* (max_tokens, k) grouped row of each (token, choice) */
    float *xg;        /* (max_tokens * k, d) the tokens' inputs grouped by expert */
    float *gu;        /* (max_tokens * k, 2 fe) gate then up, grouped */
    float *h;         /* (max_tokens * k, fe) swiglu, grouped */
    float *y;         /* (max_tokens * k, d) each expert's down output, grouped */
    float *sgu;       /* (max_tokens, 2 fs) shared expert gate then up; NULL without */
    float *sh;        /* (max_tokens, fs) its swiglu */
    float *sgate;     /* (max_tokens) sigmoid(x . w_gate); NULL without the shared gate */
    int64_t *counts;  /* (n_layers, E) tokens per expert, last step */
    const wmat **lw;  /* (E + 1) the projections handed to the backend at once, and their */
    float **lx, **ly; /* (E + 1) inputs and outputs */
    int64_t *ln;      /* (E + 1) rows */
    int64_t bytes;
};

int64_t cpu_moe_floats_per_token(const model_config *c) {
    if (!c || c->n_experts <= 0) return 0;
    const int64_t k = c->experts_per_tok, d = c->d_model, fe = c->d_ff_expert, fs = c->d_ff_shared;
    /* xr, logits, sel, selw, row_of (8 bytes: 2 floats), xg, gu, h, y, sgu, sh, sgate */
    return d + c->n_experts + k + k + 2 * k + k * (d + 3 * fe + d) + 3 * fs + (c->shared_expert_gate ? 1 : 0);
}

static void *moe_alloc(cpu_moe *m, int64_t n, int64_t esz, xf_status *st) {
    if (*st) return NULL;
    if (n < 1) n = 1;
    if (n > (INT64_MAX - 64) / esz) {
        *st = xf_errorf(XF_EOVERFLOW, "cpu backend: an expert buffer of %lld x %lld bytes overflows", (long long)n, (long long)esz);
        return NULL;
    }
    size_t bytes = ((size_t)(n * esz) + 63u) & ~(size_t)63u;
    void *p = aligned_alloc(64, bytes);
    if (!p) *st = xf_errorf(XF_ENOMEM, "cpu backend: out of memory allocating %zu bytes for the experts", bytes);
    else m->bytes += (int64_t)bytes;
    return p;
}

void cpu_moe_free(cpu_moe *m) {
    if (!m) return;
    free(m->xr);
    free(m->logits);
    free(m->sel);
    free(m->selw);
    free(m->route_scr);
    free(m->off);
    free(m->fill);
    free(m->row_of);
    free(m->xg);
    free(m->gu);
    free(m->h);
    free(m->y);
    free(m->sgu);
    free(m->sh);
    free(m->sgate);
    free(m->counts);
    free(m->lw);
    free(m->lx);
    free(m->ly);
    free(m->ln);
    free(m);
}

xf_status cpu_moe_init(cpu_moe **out, const model_config *c, int64_t max_tokens, int threads) {
    *out = NULL;
    if (!c || c->n_experts <= 0 || c->experts_per_tok < 1 || c->experts_per_tok > c->n_experts || max_tokens < 1)
        return xf_errorf(XF_EINVAL, "cpu_moe_init: a config with experts and a step size are needed");
    if ((int)c->moe_score < 0 || c->moe_score >= MOE_SCORING_COUNT)
        return xf_errorf(XF_EINVAL, "cpu backend: router scoring %d is not implemented", (int)c->moe_score);
    cpu_moe *m = calloc(1, sizeof *m);
    if (!m) return xf_errorf(XF_ENOMEM, "out of memory");
    m->cfg = *c;
    m->max_tokens = max_tokens;
    m->E = c->n_experts;
    m->k = c->experts_per_tok;
    m->d = c->d_model;
    m->fe = c->d_ff_expert;
    m->fs = c->d_ff_shared;
    m->threads = threads > 0 ? threads : 1;
    xf_status st = XF_OK;
    const int64_t T = max_tokens, TK = T * m->k; /* max_tokens is the backend's, checked against memory */
    m->xr = moe_alloc(m, T * m->d, 4, &st);
    m->logits = moe_alloc(m, T * m->E, 4, &st);
    m->sel = moe_alloc(m, TK, sizeof(int32_t), &st);
    m->selw = moe_alloc(m, TK, 4, &st);
    m->route_scr = moe_alloc(m, 2 * c->n_experts + (c->n_group > 0 ? c->n_group : 1), 4, &st);
    m->off = moe_alloc(m, m->E + 1, sizeof(int64_t), &st);
    m->fill = moe_alloc(m, m->E, sizeof(int64_t), &st);
    m->row_of = moe_alloc(m, TK, sizeof(int64_t), &st);
    m->xg = moe_alloc(m, TK * m->d, 4, &st);
    m->gu = moe_alloc(m, TK * 2 * m->fe, 4, &st);
    m->h = moe_alloc(m, TK * m->fe, 4, &st);
    m->y = moe_alloc(m, TK * m->d, 4, &st);
    if (m->fs > 0) {
        m->sgu = moe_alloc(m, T * 2 * m->fs, 4, &st);
        m->sh = moe_alloc(m, T * m->fs, 4, &st);
    }
    if (c->shared_expert_gate) m->sgate = moe_alloc(m, T, 4, &st);
    m->lw = moe_alloc(m, m->E + 1, sizeof *m->lw, &st);
    m->lx = moe_alloc(m, m->E + 1, sizeof *m->lx, &st);
    m->ly = moe_alloc(m, m->E + 1, sizeof *m->ly, &st);
    m->ln = moe_alloc(m, m->E + 1, sizeof *m->ln, &st);
    if (!st) {
        m->counts = calloc((size_t)(c->n_layers * m->E), sizeof *m->counts);
        if (!m->counts) st = xf_errorf(XF_ENOMEM, "out of memory");
        else m->bytes += c->n_layers * m->E * (int64_t)sizeof *m->counts;
    }
    if (st) {
        cpu_moe_free(m);
        return st;
    }
    *out = m;
    return XF_OK;
}

int64_t cpu_moe_bytes(const cpu_moe *m) { return m ? m->bytes : 0; }

const int64_t *cpu_moe_counts(const cpu_moe *m, int layer) {
    if (!m || layer < 0 || layer >= m->cfg.n_layers) return NULL;
    return m->counts + (int64_t)layer * m->E;
}

/* ---- scoring ---- */

/* The scoring and top-k of one token: the same functions the CUDA kernels run
 * (cuda_moe_index.h), so both devices choose the same experts by construction. */
void cpu_moe_route_grouped(const float *logits, const float *bias, int64_t E, int64_t k, int64_t n_group, int64_t topk_group,
                           int norm, double scale, float *scratch, int32_t *idx, float *w) {
    xf_moe_route_grouped(logits, bias, E, k, n_group, topk_group, norm, scale, scratch, idx, w);
}

void cpu_moe_route(moe_scoring scoring, const float *logits, int64_t E, int64_t k, int norm, int32_t *idx, float *w) {
    switch (scoring) {
    case MOE_SCORE_SOFTMAX:
    default: /* cpu_moe_init refuses any other */
        xf_moe_route_softmax(logits, E, k, norm, idx, w);
        return;
    }
}

/* ---- the three ops ---- */

xf_status cpu_moe_gate_up(cpu_moe *m, const layer_weights *L, int layer, float *xn, int64_t n, cpu_moe_linear_fn lin, void *be) {
    if (n < 1 || n > m->max_tokens || layer < 0 || layer >= m->cfg.n_layers || !L->exp_gate_up)
        return xf_errorf(XF_EINVAL, "cpu backend: MoE step of %lld tokens at layer %d: out of range or not an MoE layer",
                         (long long)n, layer);
    const int64_t E = m->E, k = m->k, d = m->d, fe = m->fe;
    /* the shared expert's gate first, from the unrounded input */
    if (m->sgate)
        for (int64_t t = 0; t < n; t++) {
            double s = 0;
            for (int64_t i = 0; i < d; i++) s += (double)xn[t * d + i] * (double)L->sh_gate[i];
            m->sgate[t] = 1.0f / (1.0f + expf(-(float)s));
        }
    memcpy(m->xr, xn, (size_t)(n * d) * sizeof(float));
    {
        const wmat *rw = &L->router;
        int64_t rn = n;
        lin(be, 1, &rw, &m->xr, &rn, &m->logits);
    }
    for (int64_t t = 0; t < n; t++) {
        if (m->cfg.moe_score == MOE_SCORE_SIGMOID_GROUPED) /* deepseek_v3: needs the layer's correction bias */
            cpu_moe_route_grouped(m->logits + t * E, L->router_bias, E, k, m->cfg.n_group, m->cfg.topk_group, m->cfg.norm_topk_prob,
                                  m->cfg.routed_scaling_factor, m->route_scr, m->sel + t * k, m->selw + t * k);
        else
            cpu_moe_route(m->cfg.moe_score, m->logits + t * E, E, k, m->cfg.norm_topk_prob, m->sel + t * k, m->selw + t * k);
    }
    /* group the (token, choice) rows by expert, tokens in order within an expert */
    int64_t *cnt = m->counts + (int64_t)layer * E;
    memset(cnt, 0, (size_t)E * sizeof *cnt);
    for (int64_t a = 0; a < n * k; a++) cnt[m->sel[a]]++;
    m->off[0] = 0;
    for (int64_t e = 0; e < E; e++) m->off[e + 1] = m->off[e] + cnt[e], m->fill[e] = 0;
    for (int64_t a = 0; a < n * k; a++) {
        const int32_t e = m->sel[a];
        m->row_of[a] = m->off[e] + m->fill[e]++;
    }
#pragma omp parallel for num_threads(m->threads) schedule(static) if (n * k * d >= MOE_PAR_MIN)
    for (int64_t a = 0; a < n * k; a++) memcpy(m->xg + m->row_of[a] * d, xn + (a / k) * d, (size_t)d * sizeof(float));
    int q = 0; /* the chosen experts' gate/up, then the shared expert's: xn's last use (int8 may round it) */
    for (int64_t e = 0; e < E; e++)
        if (cnt[e] > 0) m->lw[q] = &L->exp_gate_up[e], m->lx[q] = m->xg + m->off[e] * d, m->ln[q] = cnt[e], m->ly[q++] = m->gu + m->off[e] * 2 * fe;
    if (m->sgu) m->lw[q] = &L->sh_gate_up, m->lx[q] = xn, m->ln[q] = n, m->ly[q++] = m->sgu;
    lin(be, q, m->lw, m->lx, m->ln, m->ly);
    return XF_OK;
}

void cpu_moe_swiglu(cpu_moe *m, int64_t n) {
    const int64_t rows = n * m->k, fe = m->fe, fs = m->fs;
    /* the dense FFN's rule (cpu_backend.c): one token (decode) on the calling thread. Its k rows are
     * microseconds of work, and a parallel region costs every thread's arrival at its barrier: on a
     * busy machine, with libgomp's default spin, a descheduled thread's time slice (measured: 4
     * such regions of 2 rows took 20-68 ms of a 4-layer MoE step at load 8-9, 0.0 ms with
     * OMP_WAIT_POLICY=passive) */
#pragma omp parallel for num_threads(m->threads) schedule(static) if (n > 1 && rows * fe >= MOE_PAR_MIN / 8)
    for (int64_t r = 0; r < rows; r++) xk_swiglu(m->h + r * fe, m->gu + r * 2 * fe, m->gu + r * 2 * fe + fe, fe);
    if (m->sgu)
        for (int64_t t = 0; t < n; t++) xk_swiglu(m->sh + t * fs, m->sgu + t * 2 * fs, m->sgu + t * 2 * fs + fs, fs);
}

void cpu_moe_down(cpu_moe *m, const layer_weights *L, int64_t n, float *out, cpu_moe_linear_fn lin, void *be) {
    const int64_t E = m->E, k = m->k, d = m->d, fe = m->fe;
    /* the shared expert's down output goes to out first, scaled by its gate, then the routed sum
     * is added to it: transformers adds expert_output + gated shared output */
    int q = 0;
    for (int64_t e = 0; e < E; e++) {
        const int64_t c = m->off[e + 1] - m->off[e];
        if (c > 0) m->lw[q] = &L->exp_down[e], m->lx[q] = m->h + m->off[e] * fe, m->ln[q] = c, m->ly[q++] = m->y + m->off[e] * d;
    }
    if (m->sgu) m->lw[q] = &L->sh_down, m->lx[q] = m->sh, m->ln[q] = n, m->ly[q++] = out;
    lin(be, q, m->lw, m->lx, m->ln, m->ly);
#pragma omp parallel for num_threads(m->threads) schedule(static) if (n * k * d >= MOE_PAR_MIN)
    for (int64_t t = 0; t < n; t++) {
        float *o = out + t * d;
        if (m->sgu) {
            const float g = m->sgate ? m->sgate[t] : 1.0f;
            for (int64_t i = 0; i < d; i++) o[i] *= g;
        }
        /* routed: 0 + w_1 y_1 + w_2 y_2 + ... in increasing expert order, then + shared */
        for (int64_t i = 0; i < d; i++) {
            float s = 0.0f;
            for (int64_t j = 0; j < k; j++) s += m->selw[t * k + j] * m->y[m->row_of[t * k + j] * d + i];
            o[i] = m->sgu ? s + o[i] : s;
        }
    }
}
