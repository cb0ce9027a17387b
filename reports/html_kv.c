/* The HTML report's KV section: the policies' breakdown of the pool over time. */
#include "html_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/rollup.h"
#include "core/fileio.h"
#include "core/record_kv.h"
#include "core/units.h"
#include "escape.h"
#include "gnuplot.h"
#include "sbuf.h"

/* ------------------------------------------------------------------------------------------
 * KV. */

static const char *kv_color(int cat) {
    static const char *c[KV_CAT_COUNT] = {"#2e8b57", "#8fbc8f", "#e07b39", "#c0392b", "#dcdcdc"};
    return (cat >= 0 && cat < KV_CAT_COUNT) ? c[cat] : "#888888";
}

void html_kv(html_ctx *c, const record *r, int ri) {
    html_section_open(c, ri, "kv", "KV cache");
    const record_kv *kv = r->kv;
    char a[64], b2[64];
    /* memory budget: weights, KV budget, activations, free */
    const record_point *p = r->n_points > 0 ? &r->points[0] : NULL;
    double cap = r->device.memory_bytes;
    double parts[3] = {p ? p->memory.weights_bytes : 0, kv->budget_bytes, p ? p->memory.activations_bytes : 0};
    static const char *pn[3] = {"weights", "KV budget", "activations"};
    static const char *pc[3] = {"#5b7fa6", "#d08a2e", "#8aa85a"};
    double used = parts[0] + parts[1] + parts[2];
    double scale = cap > used ? cap : used;
    html_put(c, "<h4>Memory budget</h4>\n");
    if (scale > 0) {
        html_put(c, "<div class=\"bar\">");
        for (int i = 0; i < 3; i++)
            if (parts[i] > 0)
                sbuf_printf(c->b, "<span style=\"width:%.3f%%;background:%s\"></span>", 100 * parts[i] / scale, pc[i]);
        if (cap > used) sbuf_printf(c->b, "<span style=\"width:%.3f%%;background:#e6e6e6\"></span>", 100 * (cap - used) / scale);
        html_put(c, "</div>\n<p class=\"legend\">");
        for (int i = 0; i < 3; i++) {
            if (parts[i] <= 0 && i != 1) continue;
            units_bytes(parts[i], a, sizeof a);
            sbuf_printf(c->b, "<span class=\"sw\" style=\"background:%s\"></span>%s %s &nbsp; ", pc[i], pn[i], a);
        }
        if (cap > 0) {
            units_bytes(cap > used ? cap - used : 0, a, sizeof a);
            units_bytes(cap, b2, sizeof b2);
            sbuf_printf(c->b, "<span class=\"sw\" style=\"background:#e6e6e6\"></span>%s %s of %s",
                        parts[0] > 0 ? "free" : "the rest (weights, activations, free)", a, b2);
        }
        html_put(c, "</p>\n");
    }
    units_bytes((double)kv->bytes_per_token, a, sizeof a);
    html_put(c, "<p>KV dtype ");
    html_esc(c, kv->kvdtype);
    sbuf_printf(c->b, ": %s per token; longest request %lld tokens; %lld requests, arrivals ", a, (long long)kv->max_len,
                (long long)kv->n_requests);
    html_esc(c, kv->arrivals);
    if (kv->rate > 0) sbuf_printf(c->b, " at %.3g requests/s", kv->rate);
    if (kv->prompt_dist[0]) {
        html_put(c, "; prompt lengths ");
        html_esc(c, kv->prompt_dist);
        html_put(c, ", output lengths ");
        html_esc(c, kv->output_dist);
    }
    if (kv->trace_file[0]) {
        html_put(c, "; trace ");
        html_esc(c, kv->trace_file);
    }
    html_put(c, "; on a full pool: ");
    html_esc(c, kv->preempt);
    if (kv->step_model[0]) {
        html_put(c, ". Step times: ");
        html_esc(c, kv->step_model);
    }
    html_put(c, ".</p>\n");
    if (kv->n_policies <= 0 || !kv->policies) {
        html_put(c, "<p class=\"note\">The KV section has no policy results.</p>\n");
        html_section_close(c);
        return;
    }
    /* fragmentation breakdown per policy */
    html_put(c, "<h4>Where the KV pool goes, per policy (time-averaged)</h4>\n<table class=\"kvbars\">\n");
    for (int i = 0; i < kv->n_policies; i++) {
        const record_kv_policy *pp = &kv->policies[i];
        html_put(c, "<tr><th>");
        html_esc(c, pp->policy);
        html_put(c, "</th><td><div class=\"bar wide\">");
        for (int k = 0; k < KV_CAT_COUNT; k++) {
            double sh = pp->share[k];
            if (!(sh > 0)) continue;
            html_fmt_pct(a, sizeof a, sh);
            sbuf_printf(c->b, "<span style=\"width:%.3f%%;background:%s\" title=\"%s %s\">%s</span>", 100 * sh, kv_color(k),
                        kv_category_name((kv_category)k), a, sh >= 0.06 ? a : "");
        }
        html_put(c, "</div></td></tr>\n");
    }
    html_put(c, "</table>\n<p class=\"legend\">");
    for (int k = 0; k < KV_CAT_COUNT; k++)
        sbuf_printf(c->b, "<span class=\"sw\" style=\"background:%s\"></span>%s &nbsp; ", kv_color(k),
                    kv_category_name((kv_category)k));
    html_put(c, "</p>\n");
    /* the table of every figure */
    html_put(c, "<div class=\"scroll\"><table class=\"sortable\"><thead><tr><th>policy</th>");
    for (int k = 0; k < KV_CAT_COUNT; k++) sbuf_printf(c->b, "<th>%s</th>", kv_category_name((kv_category)k));
    html_put(c, "<th>pool</th><th>max live</th><th>mean live</th><th>mean batch</th><th>tokens/s</th><th>requests/s</th>"
           "<th>TTFT p50</th><th>TTFT p90</th><th>TTFT p99</th><th>TPOT p50</th><th>TPOT p90</th><th>TPOT p99</th>"
           "<th>preemptions</th><th>alloc failures</th><th>completed</th></tr></thead><tbody>\n");
    for (int i = 0; i < kv->n_policies; i++) {
        const record_kv_policy *pp = &kv->policies[i];
        html_put(c, "<tr>");
        html_td_str(c, pp->policy);
        for (int k = 0; k < KV_CAT_COUNT; k++) html_td_pct(c, pp->share[k]);
        html_td_bytes(c, pp->pool_bytes);
        html_td_int(c, pp->max_live);
        html_td_si(c, pp->mean_live, "");
        html_td_si(c, pp->mean_batch, "");
        html_td_si(c, pp->tokens_per_s, "");
        html_td_si(c, pp->requests_per_s, "");
        for (int q = 0; q < RECORD_KV_PCT_COUNT; q++) html_td_time(c, pp->ttft_s[q]);
        for (int q = 0; q < RECORD_KV_PCT_COUNT; q++) html_td_time(c, pp->tpot_s[q]);
        html_td_int(c, pp->preemptions);
        html_td_int(c, pp->alloc_failures);
        html_td_int(c, pp->n_completed);
        html_put(c, "</tr>\n");
    }
    html_put(c, "</tbody></table></div>\n");
    /* over time: token-state share and live sequences, one line per policy */
    sbuf data;
    sbuf_init(&data);
    int nser = 0;
    for (int i = 0; i < kv->n_policies; i++) {
        const record_kv_policy *pp = &kv->policies[i];
        if (pp->n_series <= 0 || !pp->series) {
            sbuf_puts(&data, "0 0 0 0\n\n\n"); /* keep index i = policy i */
            continue;
        }
        nser++;
        /* at most ~2000 rows per policy: a chart cannot show more */
        int64_t stride = pp->n_series > 2000 ? (pp->n_series + 1999) / 2000 : 1;
        for (int64_t j = 0; j < pp->n_series; j += stride) {
            const record_kv_sample *sm = &pp->series[j];
            double used_share = sm->share[KV_CAT_TOKEN] + sm->share[KV_CAT_RESERVED] + sm->share[KV_CAT_INTERNAL];
            sbuf_printf(&data, "%.9g %.9g %.9g %.9g\n", sm->t_s, 100 * sm->share[KV_CAT_TOKEN], sm->live, 100 * used_share);
        }
        sbuf_puts(&data, "\n\n");
    }
    char dname[64], lit[4400];
    snprintf(dname, sizeof dname, "r%d_kv.dat", ri);
    if (nser > 0 && html_chart_data(c, dname, &data, lit, sizeof lit)) {
        static const char *ylab[2] = {"token states (% of the pool)", "live sequences"};
        static const char *cap[2] = {"Share of the KV pool holding token states over time, per policy.",
                                     "Live sequences in the pool over time, per policy."};
        html_put(c, "<div class=\"charts3\">\n");
        for (int m = 0; m < 2; m++) {
            sbuf g;
            sbuf_init(&g);
            sbuf_printf(&g, "set xlabel 'time (s)'\nset ylabel '%s'\nset key top right font ',9'\nset grid ytics lc rgb "
                            "'#e5e5e5'\nset border 3 lc rgb '#666666'\nset xtics nomirror\nset ytics nomirror\n%s\nplot ",
                        ylab[m], m == 0 ? "set yrange [0:105]" : "set yrange [0:*]");
            int first = 1;
            for (int i = 0; i < kv->n_policies; i++) {
                const record_kv_policy *pp = &kv->policies[i];
                if (pp->n_series <= 0 || !pp->series) continue;
                sbuf_printf(&g, "%s%s index %d using 1:%d with lines lw 2 title ", first ? "" : ", ", lit, i, m == 0 ? 2 : 3);
                esc_gnuplot(&g, pp->policy);
                first = 0;
            }
            sbuf_puts(&g, "\n");
            char name[32];
            snprintf(name, sizeof name, "r%d_kv_%d", ri, m);
            if (sbuf_status(&g) == XF_OK) html_chart(c, name, 620, 380, g.data, cap[m]);
            sbuf_free(&g);
        }
        html_put(c, "</div>\n");
    }
    sbuf_free(&data);
    html_section_close(c);
}
