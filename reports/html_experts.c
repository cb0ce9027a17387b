/* The HTML report's expert-load section (mixture-of-experts runs): per phase, a gnuplot heat map
 * of the share of each layer's routed tokens that went to each expert, and a table per MoE layer
 * (distinct experts read per step, the busiest expert and its share, idle experts). From the
 * record's router statistics (record_point.expert_tokens); nothing is drawn without them. */
#include "html_int.h"

#include <stdio.h>
#include <string.h>

#include "analyzers/experts.h"
#include "core/units.h"
#include "sbuf.h"

/* One phase: the heat map, then the table. */
static void experts_phase(html_ctx *c, const record *r, int ri, const record_point *p, xf_phase ph, const experts_load *ld) {
    const int64_t E = p->n_experts, L = p->n_expert_layers;
    sbuf_printf(c->b, "<h4>%s: %lld step%s</h4>\n", phase_name(ph), (long long)ld->steps, ld->steps == 1 ? "" : "s");
    sbuf data;
    sbuf_init(&data);
    for (int64_t l = 0; l < L; l++) { /* a matrix: one row per layer, one column per expert, % of the layer's tokens */
        const int64_t *t = p->expert_tokens + ((int64_t)ph * L + l) * E;
        int64_t sum = 0;
        for (int64_t e = 0; e < E; e++) sum += t[e];
        for (int64_t e = 0; e < E; e++) sbuf_printf(&data, e ? " %.6g" : "%.6g", sum > 0 ? 100.0 * (double)t[e] / (double)sum : 0.0);
        sbuf_puts(&data, "\n");
    }
    char dname[64], lit[4400], name[40];
    snprintf(dname, sizeof dname, "r%d_experts_%d.dat", ri, (int)ph);
    snprintf(name, sizeof name, "r%d_experts_%d", ri, (int)ph);
    if (html_chart_data(c, dname, &data, lit, sizeof lit)) {
        sbuf g;
        sbuf_init(&g);
        sbuf_printf(&g, "set xlabel 'expert'\nset ylabel 'layer'\nset cblabel '%% of the layer''s routed tokens'\n"
                        "set palette defined (0 '#ffffff', 1 '#9cc3e6', 2 '#2f74c0', 3 '#b03a2e')\nset cbrange [0:*]\n"
                        "set xrange [-0.5:%lld.5]\nset yrange [-0.5:%lld.5]\nset tics out nomirror font ',9'\nset border 3 lc rgb '#666666'\n"
                        "plot %s matrix with image notitle\n",
                    (long long)(E - 1), (long long)(L - 1), lit);
        char cap[320];
        snprintf(cap, sizeof cap,
                 "%s: share of each layer's routed tokens per expert (uniform routing: %.1f%% each; dense layers blank). "
                 "Busiest: expert %lld of layer %d with %.0f%% (%.2fx the mean).",
                 phase_name(ph), 100.0 / (double)E, (long long)ld->hot_expert, ld->worst_layer, 100 * ld->hot_share, ld->max_over_mean);
        if (sbuf_status(&g) == XF_OK) html_chart(c, name, 900, L > 24 ? 560 : 360, g.data, cap);
        sbuf_free(&g);
    }
    sbuf_free(&data);
    html_put(c, "<table class=\"sortable\"><thead><tr><th>layer</th><th>experts read per step</th><th>busiest expert</th>"
                "<th>its share</th><th>busiest / mean</th><th>idle experts</th></tr></thead><tbody>\n");
    for (int64_t l = 0; l < L; l++) {
        const int64_t *t = p->expert_tokens + ((int64_t)ph * L + l) * E;
        int64_t sum = 0, mx = 0, hot = 0, idle = 0;
        for (int64_t e = 0; e < E; e++) {
            sum += t[e];
            idle += t[e] == 0;
            if (t[e] > mx) mx = t[e], hot = e;
        }
        if (sum == 0) continue; /* dense */
        char s[32];
        html_put(c, "<tr>");
        html_td_int(c, l);
        const double dps = (double)p->expert_distinct[(int64_t)ph * L + l] / (double)ld->steps;
        snprintf(s, sizeof s, "%.2f of %lld", dps, (long long)E);
        html_td_num(c, dps, s);
        html_td_int(c, hot);
        html_td_pct(c, (double)mx / (double)sum);
        snprintf(s, sizeof s, "%.2f\xc3\x97", (double)mx * (double)E / (double)sum);
        html_td_num(c, (double)mx * (double)E / (double)sum, s);
        html_td_int(c, idle);
        html_put(c, "</tr>\n");
    }
    html_put(c, "</tbody></table>\n");
    (void)r;
}

void html_experts(html_ctx *c, const record *r, int ri, const record_point *p) {
    experts_load ld[XF_PHASE_COUNT];
    int any = 0;
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++) any |= experts_load_of(r, p, (xf_phase)ph, &ld[ph]);
    if (!any) return;
    html_section_open(c, ri, "experts", "Expert load");
    sbuf_printf(c->b, "<p class=\"hint\">The router's choices in the last repetition: %lld routed experts, top-%lld per token. "
                      "A measured MoE layer's gate_up and down ops read the weights of the distinct experts chosen (the "
                      "&ldquo;experts read per step&rdquo; below); <code>predict</code> assumes uniform routing.</p>\n",
                (long long)p->n_experts, (long long)r->model.experts_per_tok);
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        if (ld[ph].steps > 0) experts_phase(c, r, ri, p, (xf_phase)ph, &ld[ph]);
    html_section_close(c);
}
