/* The HTML report's per-layer, op-table and measured-vs-predicted sections. */
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
 * Per-layer time by op, and the phase split. */

void html_layers(html_ctx *c, const record *r, int ri, const record_point *p) {
    html_section_open(c, ri, "layers", "Time by layer and phase");
    /* phase split of the request */
    double pre = p->summary.ttft_s, dec = (double)workload_decode_steps(&p->wl) * p->summary.tpot_s, req = pre + dec;
    char a[48], b2[48], s1[32], s2[32];
    units_time(pre, a, sizeof a);
    units_time(dec, b2, sizeof b2);
    html_fmt_pct(s1, sizeof s1, html_safe_div(pre, req));
    html_fmt_pct(s2, sizeof s2, html_safe_div(dec, req));
    html_put(c, "<h4>Phase split of one request</h4>\n<div class=\"bar\">");
    if (req > 0)
        sbuf_printf(c->b, "<span style=\"width:%.3f%%;background:#6a8caf\"></span><span style=\"width:%.3f%%;background:#c9a66b\"></span>",
                    100 * pre / req, 100 * dec / req);
    sbuf_printf(c->b, "</div>\n<p class=\"legend\"><span class=\"sw\" style=\"background:#6a8caf\"></span>prefill %s (%s) &nbsp; "
                "<span class=\"sw\" style=\"background:#c9a66b\"></span>decode %lld steps &times; TPOT = %s (%s)</p>\n",
                a, s1, (long long)workload_decode_steps(&p->wl), b2, s2);
    int64_t L = r->model.n_layers;
    if (L <= 0 || L > 100000) {
        html_section_close(c);
        return;
    }
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++) {
        if (!html_point_has_phase(p, ph)) continue;
        /* rows: "in" (before the layers), layers, "out"; columns: op kinds (ms) */
        double *t = calloc((size_t)(L + 2) * OP_KIND_COUNT, sizeof *t); /* (L + 2, OP_KIND_COUNT) */
        if (!t) {
            html_put(c, "<p class=\"note\">out of memory for the layer chart</p>");
            continue;
        }
        int present[OP_KIND_COUNT] = {0};
        for (int64_t i = 0; i < p->n_ops; i++) {
            const record_op *op = &p->ops[i];
            if (op->cost.phase != (xf_phase)ph || !html_valid_kind(op->cost.kind)) continue;
            int64_t row = op->cost.layer >= 0 && op->cost.layer < L ? op->cost.layer + 1
                          : (op->cost.kind == OP_EMBEDDING ? 0 : L + 1);
            t[row * OP_KIND_COUNT + op->cost.kind] += html_op_t(op) * 1e3;
            if (html_op_t(op) > 0) present[op->cost.kind] = 1;
        }
        sbuf data;
        sbuf_init(&data);
        int64_t step = L > 40 ? (L + 19) / 20 : 1; /* at most ~20 tick labels */
        for (int64_t row = 0; row < L + 2; row++) {
            if (row == 0)
                sbuf_puts(&data, "in");
            else if (row == L + 1)
                sbuf_puts(&data, "out");
            else if ((row - 1) % step == 0)
                sbuf_printf(&data, "%lld", (long long)(row - 1));
            else
                sbuf_puts(&data, "\"\"");
            for (int k = 0; k < OP_KIND_COUNT; k++) sbuf_printf(&data, " %.9g", t[row * OP_KIND_COUNT + k]);
            sbuf_puts(&data, "\n");
        }
        free(t);
        char dname[64], lit[4400], name[32];
        snprintf(dname, sizeof dname, "r%d_layers_%d.dat", ri, ph);
        snprintf(name, sizeof name, "r%d_layers_%d", ri, ph);
        int ok = html_chart_data(c, dname, &data, lit, sizeof lit);
        sbuf_free(&data);
        if (!ok) continue;
        sbuf g;
        sbuf_init(&g);
        sbuf_printf(&g, "set style data histograms\nset style histogram rowstacked\nset style fill solid 1.0 border rgb '#ffffff'\n"
                        "set boxwidth 0.85\nset key outside right top\nset xlabel 'layer (in: embedding; out: final norm, lm_head, "
                        "sampling)'\nset ylabel '%s step time (ms)'\nset yrange [0:*]\nset grid ytics lc rgb '#e5e5e5'\n"
                        "set xtics nomirror scale 0 font ',9'\nset border 3 lc rgb '#666666'\n",
                    phase_name((xf_phase)ph));
        sbuf_puts(&g, "plot ");
        int first = 1;
        for (int k = 0; k < OP_KIND_COUNT; k++) {
            if (!present[k]) continue;
            sbuf_printf(&g, "%s%s using %d%s lc rgb '%s' title ", first ? "" : ", ", lit, k + 2, first ? ":xtic(1)" : "",
                        html_kind_color(k));
            esc_gnuplot(&g, op_kind_name((op_kind)k));
            first = 0;
        }
        sbuf_puts(&g, "\n");
        char cap[128];
        snprintf(cap, sizeof cap, "%s step: time of each layer, stacked by op.", phase_name((xf_phase)ph));
        if (!first && sbuf_status(&g) == XF_OK) html_chart(c, name, 1000, 380, g.data, cap);
        sbuf_free(&g);
    }
    html_section_close(c);
}

/* ------------------------------------------------------------------------------------------
 * The op table. */

int html_point_any_measured(const record_point *p) {
    for (int64_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].measured) return 1;
    return 0;
}

void html_optable(html_ctx *c, int ri, const record_point *p) {
    html_section_open(c, ri, "optable", "Every op");
    int meas = html_point_any_measured(p);
    html_put(c, "<p class=\"hint\">Click a column header to sort. Bytes are the compulsory traffic of the cost model");
    html_put(c, meas ? "; measured columns come from the run's repetitions.</p>\n" : ".</p>\n");
    sbuf_printf(c->b, "<div class=\"scroll\"><table class=\"sortable ops\" id=\"r%d-ops\"><thead><tr>", ri);
    static const char *cols[] = {"#", "phase", "layer", "op", "compute", "FLOPs", "bytes", "weights", "act in", "act out",
                                 "KV read", "KV write", "intensity", "bound", "time", "predicted", "share"};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) sbuf_printf(c->b, "<th>%s</th>", cols[i]);
    if (meas) html_put(c, "<th>samples</th><th>spread</th><th>util compute</th><th>util memory</th><th>measured bytes</th>");
    html_put(c, "</tr></thead><tbody>\n");
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        html_put(c, "<tr>");
        html_td_int(c, i);
        html_td_str(c, phase_name(op->cost.phase));
        if (op->cost.layer >= 0)
            html_td_int(c, op->cost.layer);
        else
            html_put(c, "<td data-v=\"-1\">&ndash;</td>");
        if (op->source[0]) { /* imported: the traced ops or kernel it sums */
            char nm[160];
            snprintf(nm, sizeof nm, "%s: %s", op_kind_name(op->cost.kind), op->source);
            html_td_str(c, nm);
        } else {
            html_td_str(c, op_kind_name(op->cost.kind));
        }
        html_td_str(c, compute_name(op->cost.compute));
        html_td_si(c, op->cost.flops, "");
        html_td_bytes(c, op->cost.bytes);
        html_td_bytes(c, op->cost.weight_bytes);
        html_td_bytes(c, op->cost.act_in_bytes);
        html_td_bytes(c, op->cost.act_out_bytes);
        html_td_bytes(c, op->cost.kv_read_bytes);
        html_td_bytes(c, op->cost.kv_write_bytes);
        html_td_si(c, op->intensity, "");
        html_td_class(c, op->bound);
        html_td_time(c, op->time_s);
        html_td_time(c, op->predicted_time_s);
        html_td_pct(c, op->share);
        if (meas) {
            html_td_int(c, op->n_samples);
            html_td_time(c, op->spread_s);
            html_td_pct(c, op->util_compute);
            html_td_pct(c, op->util_memory);
            if (op->bytes_from_counters)
                html_td_bytes(c, op->measured_bytes);
            else
                html_put(c, "<td data-v=\"\">&ndash;</td>");
        }
        html_put(c, "</tr>\n");
    }
    html_put(c, "</tbody></table></div>\n");
    html_section_close(c);
}

/* ------------------------------------------------------------------------------------------
 * Measured against predicted. */

void html_measured(html_ctx *c, int ri, const record_point *p) {
    html_section_open(c, ri, "measured", "Measured against predicted");
    agg a[XF_PHASE_COUNT][OP_KIND_COUNT];
    rollup_by_kind(p, a);
    sbuf data;
    sbuf_init(&data);
    int rows = 0;
    /* the table goes after the chart: build it aside */
    sbuf table;
    sbuf_init(&table);
    sbuf *page = c->b;
    c->b = &table;
    /* predicted: the calibrated prediction where the ops have one (issue 17), else the bound; the bound beside it */
    html_put(c, "<table class=\"sortable\"><thead><tr><th>phase</th><th>op</th><th>measured</th><th>predicted</th>"
           "<th>measured / predicted</th><th>roofline bound</th><th>measured class</th></tr></thead><tbody>\n");
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int k = 0; k < OP_KIND_COUNT; k++) {
            const agg *x = &a[ph][k];
            if (x->n == 0 || !x->measured) continue;
            html_put(c, "<tr>");
            html_td_str(c, phase_name((xf_phase)ph));
            html_td_str(c, op_kind_name((op_kind)k));
            html_td_time(c, x->time_s);
            html_td_time(c, x->calibrated_time_s);
            char s[32];
            double ratio = html_safe_div(x->time_s, x->calibrated_time_s);
            snprintf(s, sizeof s, "%.2f\xc3\x97", ratio);
            html_td_num(c, ratio, x->calibrated_time_s > 0 ? s : "n/a");
            html_td_time(c, x->predicted_time_s);
            html_td_class(c, rollup_class(x));
            html_put(c, "</tr>\n");
            sbuf_printf(&data, "%s:", ph == XF_PREFILL ? "P" : "D");
            esc_gnuplot_datum(&data, op_kind_name((op_kind)k));
            sbuf_printf(&data, " %.9g %.9g\n", x->time_s * 1e3, x->calibrated_time_s * 1e3);
            rows++;
        }
    html_put(c, "</tbody></table>\n");
    c->b = page;
    char dname[64], lit[4400], name[32];
    snprintf(dname, sizeof dname, "r%d_measured.dat", ri);
    snprintf(name, sizeof name, "r%d_measured", ri);
    if (rows > 0 && html_chart_data(c, dname, &data, lit, sizeof lit)) {
        sbuf g;
        sbuf_init(&g);
        sbuf_printf(&g, "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 1.0 border rgb '#ffffff'\n"
                        "set logscale y 10\nset format y '%%g'\nset ylabel 'time per step (ms)'\nset xtics rotate by -45 font ',9' nomirror\n"
                        "set key top right\nset grid ytics lc rgb '#e5e5e5'\n"
                        "plot %s using 2:xtic(1) lc rgb '#2f74c0' title 'measured (median)', %s using 3 lc rgb '#bbbbbb' title "
                        "'predicted'\n",
                    lit, lit);
        if (sbuf_status(&g) == XF_OK)
            html_chart(c, name, 1000, 420, g.data, "Measured median and predicted time of each op kind per step (P: prefill, D: decode).");
        sbuf_free(&g);
    }
    sbuf_free(&data);
    if (table.oom) c->b->oom = 1;
    if (table.data) html_put(c, table.data);
    sbuf_free(&table);
    /* counters, when the run read any: one row per op, one column per counter name */
    char cnames[RECORD_MAX_COUNTERS * 2][sizeof p->ops[0].counters[0].name + 1];
    int nc = 0;
    for (int64_t i = 0; i < p->n_ops; i++)
        for (int j = 0; j < p->ops[i].n_counters && j < RECORD_MAX_COUNTERS; j++) {
            char nm[sizeof cnames[0]];
            memcpy(nm, p->ops[i].counters[j].name, sizeof nm - 1);
            nm[sizeof nm - 1] = '\0';
            int k = 0;
            while (k < nc && strcmp(cnames[k], nm) != 0) k++;
            if (k == nc && nc < (int)(sizeof cnames / sizeof cnames[0])) memcpy(cnames[nc++], nm, sizeof nm);
        }
    if (nc > 0) {
        html_put(c, "<details><summary>Hardware counters per op</summary><div class=\"scroll\"><table class=\"sortable\"><thead><tr>"
               "<th>phase</th><th>layer</th><th>op</th>");
        for (int k = 0; k < nc; k++) {
            html_put(c, "<th>");
            html_esc(c, cnames[k]);
            html_put(c, "</th>");
        }
        html_put(c, "</tr></thead><tbody>\n");
        for (int64_t i = 0; i < p->n_ops; i++) {
            const record_op *op = &p->ops[i];
            if (op->n_counters <= 0) continue;
            html_put(c, "<tr>");
            html_td_str(c, phase_name(op->cost.phase));
            html_td_int(c, op->cost.layer);
            html_td_str(c, op_kind_name(op->cost.kind));
            for (int k = 0; k < nc; k++) {
                int found = 0;
                for (int j = 0; j < op->n_counters && j < RECORD_MAX_COUNTERS && !found; j++) {
                    if (strncmp(op->counters[j].name, cnames[k], sizeof op->counters[j].name) != 0) continue;
                    found = 1;
                    if (op->counters[j].supported)
                        html_td_si(c, op->counters[j].value, "");
                    else
                        html_put(c, "<td data-v=\"\">unsupported</td>");
                }
                if (!found) html_put(c, "<td data-v=\"\"></td>");
            }
            html_put(c, "</tr>\n");
        }
        html_put(c, "</tbody></table></div></details>\n");
    }
    html_section_close(c);
}
