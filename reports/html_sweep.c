/* The HTML report's sweep section: latency and throughput against batch, one series each. */
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
 * Sweeps: latency and throughput against batch, one series per everything-but-batch, and the
 * class of the dominant op over batch x prompt. */

static int same_series(const workload *a, const workload *b) {
    return a->prompt == b->prompt && a->gen == b->gen && a->wdtype == b->wdtype && a->adtype == b->adtype &&
           a->kvdtype == b->kvdtype && a->quant_group == b->quant_group;
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

typedef struct series {
    int first;   /* index of its first point: the key */
    int n;
    int *points; /* (n) point indices sorted by batch; owned */
} series;

static int g_sort_points_batch_cmp(const void *x, const void *y, void *arg) {
    const record *r = arg;
    int64_t a = r->points[*(const int *)x].wl.batch, b = r->points[*(const int *)y].wl.batch;
    return (a > b) - (a < b);
}

/* insertion sort by batch (qsort_r is not C11; series are short) */
static void sort_by_batch(const record *r, int *idx, int n) {
    for (int i = 1; i < n; i++) {
        int v = idx[i], j = i - 1;
        while (j >= 0 && g_sort_points_batch_cmp(&idx[j], &v, (void *)r) > 0) {
            idx[j + 1] = idx[j];
            j--;
        }
        idx[j + 1] = v;
    }
}

static void series_title(const record *r, const series *s, const int vary[4], char *buf, size_t n) {
    const workload *w = &r->points[s->first].wl;
    int off = snprintf(buf, n, "prompt %lld", (long long)w->prompt);
    if (vary[0] && off >= 0 && (size_t)off < n) off += snprintf(buf + off, n - (size_t)off, ", gen %lld", (long long)w->gen);
    if (vary[1] && off >= 0 && (size_t)off < n) off += snprintf(buf + off, n - (size_t)off, ", w %s", dtype_name(w->wdtype));
    if (vary[2] && off >= 0 && (size_t)off < n) off += snprintf(buf + off, n - (size_t)off, ", a %s", dtype_name(w->adtype));
    if (vary[3] && off >= 0 && (size_t)off < n) snprintf(buf + off, n - (size_t)off, ", kv %s", dtype_name(w->kvdtype));
}

void html_sweep(html_ctx *c, const record *r, int ri) {
    html_section_open(c, ri, "sweep", "Sweep");
    int np = r->n_points;
    series *ser = calloc((size_t)np, sizeof *ser);
    int *of = calloc((size_t)np, sizeof *of); /* (np) series of each point */
    int64_t *batches = calloc((size_t)np, sizeof *batches);
    if (!ser || !of || !batches) {
        free(ser);
        free(of);
        free(batches);
        html_put(c, "<p class=\"note\">out of memory for the sweep section</p>");
        html_section_close(c);
        return;
    }
    int ns = 0;
    for (int i = 0; i < np; i++) {
        int s = 0;
        while (s < ns && !same_series(&r->points[ser[s].first].wl, &r->points[i].wl)) s++;
        if (s == ns) ser[ns++].first = i;
        of[i] = s;
        ser[s].n++;
        batches[i] = r->points[i].wl.batch;
    }
    int ok = 1;
    for (int s = 0; s < ns && ok; s++) {
        ser[s].points = malloc((size_t)ser[s].n * sizeof(int));
        if (!ser[s].points) ok = 0;
        ser[s].n = 0;
    }
    if (!ok) goto out;
    for (int i = 0; i < np; i++) ser[of[i]].points[ser[of[i]].n++] = i;
    for (int s = 0; s < ns; s++) sort_by_batch(r, ser[s].points, ser[s].n);
    /* sort series by prompt (then first index): insertion sort on small counts */
    for (int i = 1; i < ns; i++) {
        series v = ser[i];
        int j = i - 1;
        while (j >= 0 && r->points[ser[j].first].wl.prompt > r->points[v.first].wl.prompt) {
            ser[j + 1] = ser[j];
            j--;
        }
        ser[j + 1] = v;
    }
    qsort(batches, (size_t)np, sizeof *batches, cmp_i64);
    int nb = 0;
    for (int i = 0; i < np; i++)
        if (nb == 0 || batches[nb - 1] != batches[i]) batches[nb++] = batches[i];
    int vary[4] = {0, 0, 0, 0};
    for (int i = 1; i < np; i++) {
        const workload *a = &r->points[0].wl, *b = &r->points[i].wl;
        vary[0] |= a->gen != b->gen;
        vary[1] |= a->wdtype != b->wdtype;
        vary[2] |= a->adtype != b->adtype;
        vary[3] |= a->kvdtype != b->kvdtype;
    }
    sbuf_printf(c->b, "<p>%d points: %d batch sizes &times; %d series (prompt length%s).</p>\n", np, nb, ns,
                (vary[0] || vary[1] || vary[2] || vary[3]) ? " and the other swept parameters" : "");
    /* charts: TTFT, TPOT, tokens/s against batch */
    sbuf data;
    sbuf_init(&data);
    for (int s = 0; s < ns; s++) {
        for (int j = 0; j < ser[s].n; j++) {
            const record_point *p = &r->points[ser[s].points[j]];
            sbuf_printf(&data, "%lld %.9g %.9g %.9g\n", (long long)p->wl.batch, p->summary.ttft_s * 1e3,
                        p->summary.tpot_s * 1e3, p->summary.tokens_per_s);
        }
        sbuf_puts(&data, "\n\n");
    }
    char dname[64], lit[4400], title[160];
    snprintf(dname, sizeof dname, "r%d_sweep.dat", ri);
    if (html_chart_data(c, dname, &data, lit, sizeof lit)) {
        static const char *ylab[3] = {"TTFT (ms)", "TPOT (ms)", "throughput (tokens/s)"};
        static const char *cap[3] = {"Time to first token against batch.", "Time per output token against batch.",
                                     "Output tokens per second against batch."};
        html_put(c, "<div class=\"charts3\">\n");
        for (int m = 0; m < 3; m++) {
            sbuf g;
            sbuf_init(&g);
            sbuf_printf(&g, "set logscale x 2\nset logscale y 10\nset xlabel 'batch'\nset ylabel '%s'\nset format y '%%g'\n"
                            "set key outside below font ',9' maxrows 4\nset grid xtics ytics lc rgb '#e5e5e5'\nset border 3 lc rgb '#666666'\n"
                            "set xtics nomirror\nset ytics nomirror\nplot ",
                        ylab[m]);
            /* more than 12 lines are unreadable: draw 12 spread evenly over the series */
            int shown = ns < 12 ? ns : 12;
            for (int i = 0; i < shown; i++) {
                int s = shown > 1 ? (int)(((int64_t)i * (ns - 1) + (shown - 1) / 2) / (shown - 1)) : 0;
                series_title(r, &ser[s], vary, title, sizeof title);
                static const char *pal[12] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                              "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#ad494a"};
                sbuf_printf(&g, "%s%s index %d using 1:%d with linespoints pt 7 ps 0.7 lw 2 lc rgb '%s' title ", i ? ", " : "",
                            lit, s, m + 2, pal[i]);
                esc_gnuplot(&g, title);
            }
            sbuf_puts(&g, "\n");
            char name[32];
            snprintf(name, sizeof name, "r%d_sweep_%d", ri, m);
            if (sbuf_status(&g) == XF_OK) html_chart(c, name, 560, 440, g.data, cap[m]);
            sbuf_free(&g);
        }
        html_put(c, "</div>\n");
        if (ns > 12) sbuf_printf(c->b, "<p class=\"note\">The charts show 12 of the %d series, spread evenly; the table has all.</p>\n", ns);
    }
    sbuf_free(&data);
    /* grid of the dominant op's class */
    html_put(c, "<h4>Dominant op and its class over batch &times; series</h4>\n<div class=\"scroll\"><table class=\"grid\"><thead><tr><th></th>");
    for (int j = 0; j < nb; j++) sbuf_printf(c->b, "<th>batch %lld</th>", (long long)batches[j]);
    html_put(c, "</tr></thead><tbody>\n");
    for (int s = 0; s < ns; s++) {
        series_title(r, &ser[s], vary, title, sizeof title);
        html_put(c, "<tr><th>");
        html_esc(c, title);
        html_put(c, "</th>");
        int j = 0;
        for (int b = 0; b < nb; b++) {
            const record_point *p = NULL;
            while (j < ser[s].n && r->points[ser[s].points[j]].wl.batch < batches[b]) j++;
            if (j < ser[s].n && r->points[ser[s].points[j]].wl.batch == batches[b]) p = &r->points[ser[s].points[j]];
            if (!p || p->n_ops == 0) {
                html_put(c, "<td></td>");
                continue;
            }
            int dph, dk;
            xf_bound cls;
            double share;
            html_point_dominant(p, &dph, &dk, &cls, &share);
            char sh[32];
            html_fmt_pct(sh, sizeof sh, share);
            sbuf_printf(c->b, "<td class=\"cell\" style=\"background:%s\" title=\"%s %s, %s of the request\">%s<br><small>%s %s</small></td>",
                        html_class_color(cls), phase_name((xf_phase)dph), op_kind_name((op_kind)dk), sh, bound_name(cls),
                        phase_name((xf_phase)dph), op_kind_name((op_kind)dk));
        }
        html_put(c, "</tr>\n");
    }
    html_put(c, "</tbody></table></div>\n");
    /* every point */
    sbuf_printf(c->b, "<h4>Every point</h4>\n<div class=\"scroll\"><table class=\"sortable\" id=\"r%d-points\"><thead><tr><th>#</th>"
                      "<th>batch</th><th>prompt</th><th>gen</th><th>dtypes w/a/kv</th><th>TTFT</th><th>TPOT</th><th>tokens/s</th>"
                      "<th>memory-bound</th><th>compute-bound</th><th>memory</th><th>dominant op</th></tr></thead><tbody>\n",
                ri);
    for (int i = 0; i < np; i++) {
        const record_point *p = &r->points[i];
        html_put(c, "<tr>");
        html_td_int(c, i);
        html_td_int(c, p->wl.batch);
        html_td_int(c, p->wl.prompt);
        html_td_int(c, p->wl.gen);
        snprintf(title, sizeof title, "%s/%s/%s", dtype_name(p->wl.wdtype), dtype_name(p->wl.adtype), dtype_name(p->wl.kvdtype));
        if (p->par.tp > 0) /* split over devices: memory is per device */
            snprintf(title + strlen(title), sizeof title - strlen(title), ", tp %d pp %d", p->par.tp, p->par.pp);
        html_td_str(c, title);
        html_td_time(c, p->summary.ttft_s);
        html_td_time(c, p->summary.tpot_s);
        html_td_si(c, p->summary.tokens_per_s, "");
        html_td_pct(c, p->summary.share_bound[XF_BOUND_MEMORY]);
        html_td_pct(c, p->summary.share_bound[XF_BOUND_COMPUTE]);
        html_td_bytes(c, p->memory.total_bytes);
        if (p->n_ops > 0) {
            int dph, dk;
            xf_bound cls;
            html_point_dominant(p, &dph, &dk, &cls, NULL);
            snprintf(title, sizeof title, "%s %s (%s)", phase_name((xf_phase)dph), op_kind_name((op_kind)dk), bound_name(cls));
            html_td_str(c, title);
        } else {
            html_td_str(c, "");
        }
        html_put(c, "</tr>\n");
    }
    html_put(c, "</tbody></table></div>\n");
out:
    for (int s = 0; s < ns; s++) free(ser[s].points);
    free(ser);
    free(of);
    free(batches);
    html_section_close(c);
}
