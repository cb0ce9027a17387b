/* The router's load of a measured MoE point: see experts.h. */
#include "analyzers/experts.h"

#include <string.h>

int experts_load_of(const record *r, const record_point *p, xf_phase ph, experts_load *out) {
    memset(out, 0, sizeof *out);
    if (!r || !p || ph < 0 || ph >= XF_PHASE_COUNT || p->n_experts <= 0 || !p->expert_tokens || !p->expert_distinct ||
        p->expert_steps[ph] <= 0 || p->n_expert_layers != r->model.n_layers)
        return 0;
    const int64_t E = p->n_experts, L = p->n_expert_layers;
    double dist = 0;
    int64_t idle = 0;
    for (int64_t l = 0; l < L; l++) {
        const int64_t *t = p->expert_tokens + ((int64_t)ph * L + l) * E;
        int64_t sum = 0, mx = 0, hot = 0, zero = 0;
        for (int64_t e = 0; e < E; e++) {
            sum += t[e];
            zero += t[e] == 0;
            if (t[e] > mx) mx = t[e], hot = e;
        }
        if (sum == 0) continue; /* a dense layer */
        out->moe_layers++;
        idle += zero;
        dist += (double)p->expert_distinct[(int64_t)ph * L + l] / (double)p->expert_steps[ph];
        const double ratio = (double)mx / ((double)sum / (double)E);
        if (ratio > out->max_over_mean) {
            out->max_over_mean = ratio;
            out->worst_layer = (int)l;
            out->hot_expert = hot;
            out->hot_share = (double)mx / (double)sum;
        }
        out->tokens = sum / p->expert_steps[ph];
    }
    if (out->moe_layers == 0) {
        memset(out, 0, sizeof *out);
        return 0;
    }
    out->steps = p->expert_steps[ph];
    out->distinct_per_step = dist / (double)out->moe_layers;
    out->idle_share = (double)idle / ((double)out->moe_layers * (double)E);
    return 1;
}
