/* The HTML report's roofline section: every op against the device's roofs (gnuplot). */
#include "html_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/confidence.h"
#include "analyzers/rollup.h"
#include "core/fileio.h"
#include "core/record_kv.h"
#include "core/units.h"
#include "escape.h"
#include "gnuplot.h"
#include "sbuf.h"

/* ------------------------------------------------------------------------------------------
 * Roofline. */

void html_roofline(html_ctx *c, const record *r, int ri, const record_point *p) {
    html_section_open(c, ri, "roofline", "Roofline");
    agg a[XF_PHASE_COUNT][OP_KIND_COUNT];
    rollup_by_kind(p, a);
    const device_spec *d = &r->device;
    /* Units of the y axis. */
    double maxpeak = 0;
    int used[XF_COMPUTE_COUNT] = {0};
    for (int64_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].cost.compute >= 0 && p->ops[i].cost.compute < XF_COMPUTE_COUNT) used[p->ops[i].cost.compute] = 1;
    for (int k = 0; k < XF_COMPUTE_COUNT; k++)
        if (used[k] && device_peak(d, (xf_compute)k) > maxpeak) maxpeak = device_peak(d, (xf_compute)k);
    double unit = maxpeak >= 1e12 ? 1e12 : 1e9;
    const char *uname = unit == 1e12 ? "TFLOP/s" : "GFLOP/s";
    /* The points: one per (phase, op kind), its layers summed. */
    sbuf data;
    sbuf_init(&data);
    double xmin = INFINITY, xmax = 0, ymin = INFINITY;
    double phase_total[XF_PHASE_COUNT] = {0, 0};
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int k = 0; k < OP_KIND_COUNT; k++) phase_total[ph] += a[ph][k].time_s;
    /* Point labels: only ops with at least 1% of their step are named (the table below names
     * all), and ops that land on the same spot share one label "qkv+o_proj+..." */
    char names[XF_PHASE_COUNT][OP_KIND_COUNT][160];
    memset(names, 0, sizeof names);
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int k = 0; k < OP_KIND_COUNT; k++) {
            const agg *x = &a[ph][k];
            if (x->n == 0 || x->flops <= 0 || x->bytes <= 0 || x->time_s <= 0) continue;
            if (html_safe_div(x->time_s, phase_total[ph]) < 0.01) continue;
            double lx = log10(x->flops / x->bytes), ly = log10(x->flops / x->time_s);
            int head = -1;
            for (int j = 0; j < k && head < 0; j++) {
                const agg *y = &a[ph][j];
                if (!names[ph][j][0]) continue;
                if (fabs(log10(y->flops / y->bytes) - lx) < 0.08 && fabs(log10(y->flops / y->time_s) - ly) < 0.08) head = j;
            }
            if (head >= 0) {
                size_t used_len = strlen(names[ph][head]);
                snprintf(names[ph][head] + used_len, sizeof names[ph][head] - used_len, "+%s", op_kind_name((op_kind)k));
            } else {
                snprintf(names[ph][k], sizeof names[ph][k], "%s", op_kind_name((op_kind)k));
            }
        }
    int blocks[XF_PHASE_COUNT * XF_BOUND_COUNT] = {0};
    int nblock = 0, npts = 0;
    int block_id[XF_PHASE_COUNT * XF_BOUND_COUNT];
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int b = 0; b < XF_BOUND_COUNT; b++) {
            int bi = ph * XF_BOUND_COUNT + b;
            block_id[bi] = -1;
            int any = 0;
            for (int k = 0; k < OP_KIND_COUNT; k++) {
                const agg *x = &a[ph][k];
                if (x->n == 0 || x->flops <= 0 || x->bytes <= 0 || x->time_s <= 0 || rollup_class(x) != (xf_bound)b) continue;
                double I = x->flops / x->bytes, y = x->flops / x->time_s / unit;
                sbuf_printf(&data, "%.9g %.9g ", I, y);
                if (names[ph][k][0])
                    esc_gnuplot_datum(&data, names[ph][k]);
                else
                    sbuf_puts(&data, "\"\"");
                sbuf_puts(&data, "\n");
                any = 1;
                npts++;
                if (I < xmin) xmin = I;
                if (I > xmax) xmax = I;
                if (y < ymin) ymin = y;
            }
            if (any) {
                sbuf_puts(&data, "\n\n");
                block_id[bi] = nblock++;
                blocks[bi] = 1;
            }
        }
    if (npts == 0 || d->bandwidth_Bps <= 0 || maxpeak <= 0) {
        html_put(c, "<p class=\"note\">No op has both FLOPs and a time, or the device has no ceilings: nothing to place.</p>\n");
        sbuf_free(&data);
        html_section_close(c);
        return;
    }
    double B = d->bandwidth_Bps / unit;
    xf_compute main_c = XF_COMPUTE_FP32;
    double main_p = 0;
    for (int k = 0; k < XF_COMPUTE_COUNT; k++)
        if (used[k] && device_peak(d, (xf_compute)k) >= main_p) {
            main_p = device_peak(d, (xf_compute)k);
            main_c = (xf_compute)k;
        }
    double P = main_p / unit, R = P / B;
    if (R > xmax) xmax = R;
    if (R < xmin) xmin = R;
    xmin /= 4;
    xmax *= 4;
    double ylo = fmin(ymin, xmin * B) / 3, yhi = P * 4;
    /* Measured ceilings: the spec sheet of the same device, when xfprof has one, is drawn beside
     * them so the gap between datasheet and reality shows. */
    int have_spec = 0;
    double spec_b = 0, spec_p = 0;
    char spec_lab[200] = "";
    if (r->ceilings_measured || d->measured) {
        device_spec spec;
        if (device_lookup(d->name, NULL, &spec) == XF_OK && !spec.measured && spec.bandwidth_Bps > 0 &&
            device_peak(&spec, main_c) > 0) {
            char sbw[48], spk[48];
            spec_b = spec.bandwidth_Bps / unit;
            spec_p = device_peak(&spec, main_c) / unit;
            units_si(spec.bandwidth_Bps, "B/s", sbw, sizeof sbw);
            units_si(device_peak(&spec, main_c), "FLOP/s", spk, sizeof spk);
            snprintf(spec_lab, sizeof spec_lab, "spec roofline: %s peak %s, bandwidth %s", compute_name(main_c), spk, sbw);
            if (spec_p * 4 > yhi) yhi = spec_p * 4;
            have_spec = 1;
        }
        xf_error_clear();
    }
    char lit[4400];
    char dname[64];
    snprintf(dname, sizeof dname, "r%d_roofline.dat", ri);
    if (!html_chart_data(c, dname, &data, lit, sizeof lit)) {
        sbuf_free(&data);
        html_section_close(c);
        return;
    }
    sbuf_free(&data);
    const char *how = (r->ceilings_measured || d->measured) ? "measured" : "spec";
    sbuf g;
    sbuf_init(&g);
    char bw[48], pk[48], lab[160];
    units_si(d->bandwidth_Bps, "B/s", bw, sizeof bw);
    sbuf_printf(&g, "set logscale xy 10\nset xrange [%.6g:%.6g]\nset yrange [%.6g:%.6g]\nset samples 400\n", xmin, xmax, ylo, yhi);
    sbuf_printf(&g, "set xlabel 'arithmetic intensity (FLOP/byte)'\nset ylabel 'attained %s'\n", uname);
    sbuf_puts(&g, "set format x '%g'\nset format y '%g'\nset grid xtics ytics lc rgb '#e5e5e5'\n"
                  "set key outside right top spacing 1.1 box lc rgb '#cccccc'\nset border lc rgb '#666666'\n");
    sbuf_printf(&g, "B=%.9g\nP=%.9g\nroof(x)=(x*B<P)?x*B:P\n", B, P);
    snprintf(lab, sizeof lab, "ridge %.3g FLOP/B", R);
    sbuf_printf(&g, "set arrow from %.9g,%.9g to %.9g,%.9g nohead dt 2 lc rgb '#999999'\n", R, ylo, R, P);
    sbuf_puts(&g, "set label 1 ");
    esc_gnuplot(&g, lab);
    sbuf_printf(&g, " at %.9g,%.9g point pt 7 ps 1.2 lc rgb '#222222' offset 1,-1.2 tc rgb '#222222'\n", R, P);
    /* bandwidth ceiling label, near the left end of the slope */
    snprintf(lab, sizeof lab, "%s bandwidth %s", how, bw);
    sbuf_puts(&g, "set label 2 ");
    esc_gnuplot(&g, lab);
    sbuf_printf(&g, " at %.9g,%.9g left tc rgb '#333333'\n", xmin * 1.3, xmin * 1.3 * B * 2.2);
    sbuf_puts(&g, "plot roof(x) with lines lw 2.5 lc rgb '#333333' title ");
    units_si(main_p, "FLOP/s", pk, sizeof pk);
    snprintf(lab, sizeof lab, "%s roofline: %s peak %s", how, compute_name(main_c), pk);
    esc_gnuplot(&g, lab);
    for (int k = 0; k < XF_COMPUTE_COUNT; k++) {
        double pkk = device_peak(d, (xf_compute)k);
        if (!used[k] || (xf_compute)k == main_c || pkk <= 0 || pkk == main_p) continue;
        units_si(pkk, "FLOP/s", pk, sizeof pk);
        snprintf(lab, sizeof lab, "%s %s peak %s", how, compute_name((xf_compute)k), pk);
        sbuf_printf(&g, ", (x*B<%.9g?x*B:%.9g) with lines lw 1.5 dt 2 lc rgb '#777777' title ", pkk / unit, pkk / unit);
        esc_gnuplot(&g, lab);
    }
    if (have_spec) {
        sbuf_printf(&g, ", (x*%.9g<%.9g?x*%.9g:%.9g) with lines lw 1.5 dt 4 lc rgb '#b07aa1' title ", spec_b, spec_p, spec_b,
                    spec_p);
        esc_gnuplot(&g, spec_lab);
    }
    if (d->cache_bandwidth_Bps > 0) {
        units_si(d->cache_bandwidth_Bps, "B/s", pk, sizeof pk);
        snprintf(lab, sizeof lab, "%s cache bandwidth %s", how, pk);
        sbuf_printf(&g, ", (x*%.9g<P?x*%.9g:P) with lines lw 1.5 dt 3 lc rgb '#2a9d8f' title ", d->cache_bandwidth_Bps / unit,
                    d->cache_bandwidth_Bps / unit);
        esc_gnuplot(&g, lab);
    }
    for (int bi = 0; bi < XF_PHASE_COUNT * XF_BOUND_COUNT; bi++) {
        if (!blocks[bi]) continue;
        int ph = bi / XF_BOUND_COUNT, b = bi % XF_BOUND_COUNT;
        snprintf(lab, sizeof lab, "%s, %s-bound", phase_name((xf_phase)ph), bound_name((xf_bound)b));
        sbuf_printf(&g, ", %s index %d using 1:2 with points pt %d ps 1.6 lc rgb '%s' title ", lit, block_id[bi],
                    ph == XF_PREFILL ? 7 : 9, html_class_color((xf_bound)b));
        esc_gnuplot(&g, lab);
        sbuf_printf(&g, ", %s index %d using 1:2:3 with labels left offset 1,%s font ',10' tc rgb '%s' notitle", lit,
                    block_id[bi], ph == XF_PREFILL ? "0.5" : "-0.5", ph == XF_PREFILL ? "#333333" : "#555555");
    }
    sbuf_puts(&g, "\n");
    char name[32];
    snprintf(name, sizeof name, "r%d_roofline", ri);
    if (sbuf_status(&g) == XF_OK)
        html_chart(c, name, 1200, 620, g.data,
              "Each op kind is one point per phase (its layers summed): circles prefill, triangles decode; colour is the "
              "class; ops with at least 1% of their step are named. Points on the slope are limited by bandwidth, on the "
              "flat line by compute.");
    sbuf_free(&g);
    /* the points as a table too: the chart's legend names the classes, this names every op */
    html_put(c, c->n_charts_ok ? "<details>" : "<details open>"); /* no chart drawn: the table is the chart */
    html_put(c, "<summary>The points of the chart</summary><table class=\"sortable\"><thead><tr><th>phase</th><th>op"
           "</th><th>intensity (FLOP/B)</th><th>attained FLOP/s</th><th>class</th><th>confidence</th></tr></thead><tbody>\n");
    /* the class's confidence: bootstrap over the repetitions (analyzers/confidence.h); -1 none */
    double conf[XF_PHASE_COUNT][OP_KIND_COUNT];
    roofline_thresholds th;
    roofline_thresholds_default(&th);
    if (confidence_kinds(p, &r->device, &th, CONFIDENCE_BOOT, CONFIDENCE_SEED, conf) != XF_OK) {
        xf_error_clear();
        for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
            for (int k = 0; k < OP_KIND_COUNT; k++) conf[ph][k] = -1;
    }
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int k = 0; k < OP_KIND_COUNT; k++) {
            const agg *x = &a[ph][k];
            if (x->n == 0 || x->flops <= 0 || x->bytes <= 0 || x->time_s <= 0) continue;
            html_put(c, "<tr>");
            html_td_str(c, phase_name((xf_phase)ph));
            html_td_str(c, op_kind_name((op_kind)k));
            html_td_si(c, x->flops / x->bytes, "");
            html_td_si(c, x->flops / x->time_s, "FLOP/s");
            html_td_class(c, rollup_class(x));
            if (conf[ph][k] >= 0) html_td_pct(c, conf[ph][k]);
            else html_td_str(c, "-");
            html_put(c, "</tr>\n");
        }
    html_put(c, "</tbody></table></details>\n");
    html_section_close(c);
}
