/* See kv_text.h. */
#include "reports/kv_text.h"

#include <stdio.h>
#include <string.h>

#include "analyzers/kv.h"
#include "core/record_kv.h"
#include "core/units.h"

/* Sliding-window models: each layer group's own pool (the windowed layers free what falls out of
 * the window, docs/kv.md), when the record has them. */
static void render_kv_groups(sbuf *b, const record_kv *kv) {
    int any = 0;
    for (int i = 0; i < kv->n_policies; i++)
        if (kv->policies[i].n_groups >= 2 || (kv->policies[i].n_groups == 1 && kv->policies[i].groups[0].window > 0)) any = 1;
    if (!any) return;
    char b2[32];
    sbuf_printf(b, "\nKV pool per layer group (windowed layers keep at most the window), time-averaged shares (%% of its pool):\n");
    sbuf_printf(b, "%-10s %7s %8s %10s %8s %9s %9s %9s %7s\n", "policy", "layers", "window", "pool", "token%", "reserved%", "internal%",
                "external%", "free%");
    for (int i = 0; i < kv->n_policies; i++) {
        const record_kv_policy *p = &kv->policies[i];
        for (int g = 0; g < p->n_groups; g++) {
            const record_kv_group *q = &p->groups[g];
            char win[24];
            if (q->window > 0) snprintf(win, sizeof win, "%lld", (long long)q->window);
            else snprintf(win, sizeof win, "full");
            sbuf_printf(b, "%-10s %7lld %8s %10s %8.1f %9.1f %9.1f %9.1f %7.1f\n", p->policy, (long long)q->n_layers, win,
                        units_bytes(q->pool_bytes, b2, sizeof b2), 100 * q->share[KV_CAT_TOKEN], 100 * q->share[KV_CAT_RESERVED],
                        100 * q->share[KV_CAT_INTERNAL], 100 * q->share[KV_CAT_EXTERNAL], 100 * q->share[KV_CAT_FREE]);
        }
    }
}

void render_kv_table(sbuf *b, const record *rec) {
    const record_kv *kv = rec->kv;
    if (!kv) return;
    char b1[32], b2[32];
    sbuf_printf(b, "xfprof kv: %s on %s, KV %s %lld B/token, pool budget %s\n", rec->model.name, rec->device.name, kv->kvdtype,
                (long long)kv->bytes_per_token, units_bytes(kv->budget_bytes, b1, sizeof b1));
    if (!strcmp(kv->arrivals, "trace"))
        sbuf_printf(b, "%lld requests from %s", (long long)kv->n_requests, kv->trace_file);
    else if (!strcmp(kv->arrivals, "burst"))
        sbuf_printf(b, "%lld requests all at t=0; prompt %s, output %s, seed %llu", (long long)kv->n_requests, kv->prompt_dist,
                    kv->output_dist, (unsigned long long)kv->seed);
    else
        sbuf_printf(b, "%lld requests, Poisson %g/s; prompt %s, output %s, seed %llu", (long long)kv->n_requests, kv->rate,
                    kv->prompt_dist, kv->output_dist, (unsigned long long)kv->seed);
    if (kv->mean_prompt > 0 || kv->mean_output > 0)
        sbuf_printf(b, " (mean prompt %.1f, mean output %.1f tokens)", kv->mean_prompt, kv->mean_output);
    sbuf_printf(b, "; max length %lld; preempt %s\n\n", (long long)kv->max_len, kv->preempt);
    sbuf_printf(b, "KV pool, time-averaged shares (%% of the pool):\n");
    sbuf_printf(b, "%-10s %10s %8s %9s %9s %9s %7s %9s %9s %10s %11s\n", "policy", "pool", "token%", "reserved%", "internal%",
                "external%", "free%", "live max", "live mean", "batch mean", "preemptions");
    for (int i = 0; i < kv->n_policies; i++) {
        const record_kv_policy *p = &kv->policies[i];
        sbuf_printf(b, "%-10s %10s %8.1f %9.1f %9.1f %9.1f %7.1f %9lld %9.1f %10.1f %11lld\n", p->policy,
                    units_bytes(p->pool_bytes, b2, sizeof b2), 100 * p->share[KV_CAT_TOKEN], 100 * p->share[KV_CAT_RESERVED],
                    100 * p->share[KV_CAT_INTERNAL], 100 * p->share[KV_CAT_EXTERNAL], 100 * p->share[KV_CAT_FREE],
                    (long long)p->max_live, p->mean_live, p->mean_batch, (long long)p->preemptions);
    }
    sbuf_printf(b, "\nKV memory held by each policy (the pool minus free%%), time-averaged shares (%% of held; the vLLM\n"
                   "paper's Figure 2 plots these):\n");
    sbuf_printf(b, "%-10s %10s %8s %9s %9s %9s\n", "policy", "held", "token%", "reserved%", "internal%", "external%");
    for (int i = 0; i < kv->n_policies; i++) {
        const record_kv_policy *p = &kv->policies[i];
        double held[KV_CAT_COUNT];
        double h = kv_held_shares(p, held);
        sbuf_printf(b, "%-10s %10s %8.1f %9.1f %9.1f %9.1f\n", p->policy, units_bytes(h * p->pool_bytes, b2, sizeof b2),
                    100 * held[KV_CAT_TOKEN], 100 * held[KV_CAT_RESERVED], 100 * held[KV_CAT_INTERNAL], 100 * held[KV_CAT_EXTERNAL]);
    }
    render_kv_groups(b, kv);
    sbuf_printf(b, "\nThroughput and latency:\n");
    sbuf_printf(b, "%-10s %10s %8s %10s %9s %9s %9s %9s %9s %9s\n", "policy", "tokens/s", "req/s", "duration_s", "TTFT p50",
                "TTFT p90", "TTFT p99", "TPOT p50", "TPOT p90", "TPOT p99");
    for (int i = 0; i < kv->n_policies; i++) {
        const record_kv_policy *p = &kv->policies[i];
        sbuf_printf(b, "%-10s %10.1f %8.3f %10.1f %8.3fs %8.3fs %8.3fs %7.1fms %7.1fms %7.1fms\n", p->policy, p->tokens_per_s,
                    p->requests_per_s, p->duration_s, p->ttft_s[0], p->ttft_s[1], p->ttft_s[2], 1e3 * p->tpot_s[0],
                    1e3 * p->tpot_s[1], 1e3 * p->tpot_s[2]);
    }
    sbuf_printf(b, "\ntoken%%: written K/V; reserved%%: held for tokens still to come; internal%%: held, never used;\n"
                   "external%%: free but in extents too small for the waiting request; free%%: the rest. %% of the pool: of the\n"
                   "whole budget; %% of held: of what the policy holds, the pool minus free%% (docs/kv.md).\n");
}
