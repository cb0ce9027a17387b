/* The HTML report's primitives: numbers, colours, the roll-up glue, table cells, sections, charts. */
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
 * Numbers. Display: core/units.h (sizes in binary units, rates and counts with decimal prefixes,
 * three significant figures); the exact record value goes in
 * each table cell's data-v attribute (shortest text that reads back to the same double), which
 * is also what the sort uses. */

void html_fmt_pct(char *buf, size_t n, double f) {
    if (!isfinite(f))
        snprintf(buf, n, "n/a");
    else if (f > 0 && f < 0.0005) { /* not nothing, even if it rounds to 0.0 (no '<': raw HTML) */
        if (f >= 0.00005)
            snprintf(buf, n, "%.2f%%", f * 100);
        else
            snprintf(buf, n, "\xe2\x89\x88" "0%%"); /* "≈0%" */
    } else
        snprintf(buf, n, "%.1f%%", f * 100);
}

void html_fmt_exact(char *buf, size_t n, double v) {
    if (!isfinite(v)) {
        snprintf(buf, n, "NaN");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

double html_safe_div(double a, double b) { return (b != 0 && isfinite(a) && isfinite(b)) ? a / b : 0.0; }

/* ------------------------------------------------------------------------------------------
 * Colours: one per class, one per op kind. */

const char *html_class_color(xf_bound b) {
    switch (b) {
    case XF_BOUND_MEMORY: return "#2f74c0";
    case XF_BOUND_COMPUTE: return "#d0463c";
    case XF_BOUND_LATENCY: return "#e0a100";
    case XF_BOUND_BALANCED: return "#8660c0";
    case XF_BOUND_COMM: return "#2a9d6f";
    default: return "#888888";
    }
}

const char *html_kind_color(int k) {
    static const char *c[] = {"#7f7f7f", "#c5b0d5", "#1f77b4", "#aec7e8", "#9edae5", "#d62728", "#ff7f0e", "#dbdb8d",
                              "#c49c94", "#2ca02c", "#98df8a", "#9467bd", "#e377c2", "#bcbd22", "#8c564b", "#17becf",
                              "#393b79"};
    return (k >= 0 && k < (int)(sizeof c / sizeof c[0])) ? c[k] : "#444444";
}

/* ------------------------------------------------------------------------------------------
 * Roll-ups of a point (analyzers/rollup.h), and the pipeline stages they sum into. */

int html_valid_kind(int k) { return k >= 0 && k < OP_KIND_COUNT; }
double html_op_t(const record_op *op) { return (isfinite(op->time_s) && op->time_s > 0) ? op->time_s : 0.0; }
int html_point_has_phase(const record_point *p, int ph) {
    for (int64_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].cost.phase == (xf_phase)ph) return 1;
    return 0;
}

/* The op (phase, kind) holding the most request time. */
void html_point_dominant(const record_point *p, int *phase, int *kind, xf_bound *cls, double *share) {
    rollup_verdict v;
    rollup_verdict_of(p, &v);
    *phase = (int)v.dom_phase;
    *kind = (int)v.dom_kind;
    *cls = v.dom_class;
    if (share) *share = v.dom_share;
}

int html_stage_of(int kind) {
    if (kind == OP_EMBEDDING) return ST_EMBED;
    if ((kind >= OP_ATTN_NORM && kind <= OP_ATTN_RESIDUAL) || kind == OP_KV_ALLOC) return ST_ATTN;
    if (kind >= OP_FFN_NORM && kind <= OP_FFN_RESIDUAL) return ST_FFN;
    return ST_HEAD;
}

/* ------------------------------------------------------------------------------------------
 * Output context. */


void html_put(html_ctx *c, const char *s) { sbuf_puts(c->b, s); }
void html_esc(html_ctx *c, const char *s) { esc_html(c->b, s); }

/* A table cell holding a number: exact value in data-v, formatted text shown. */
void html_td_num(html_ctx *c, double v, const char *shown) {
    char ex[40];
    html_fmt_exact(ex, sizeof ex, v);
    sbuf_printf(c->b, "<td data-v=\"%s\">", ex);
    html_esc(c, shown);
    html_put(c, "</td>");
}
void html_td_si(html_ctx *c, double v, const char *unit) {
    char s[48];
    units_si(v, unit, s, sizeof s);
    html_td_num(c, v, s);
}
void html_td_bytes(html_ctx *c, double v) {
    char s[48];
    units_bytes(v, s, sizeof s);
    html_td_num(c, v, s);
}
void html_td_time(html_ctx *c, double v) {
    char s[48];
    units_time(v, s, sizeof s);
    html_td_num(c, v, s);
}
void html_td_pct(html_ctx *c, double v) {
    char s[48];
    html_fmt_pct(s, sizeof s, v);
    html_td_num(c, v, s);
}
void html_td_int(html_ctx *c, int64_t v) {
    sbuf_printf(c->b, "<td data-v=\"%lld\">%lld</td>", (long long)v, (long long)v);
}
void html_td_str(html_ctx *c, const char *s) {
    html_put(c, "<td data-v=\"");
    html_esc(c, s);
    html_put(c, "\">");
    html_esc(c, s);
    html_put(c, "</td>");
}
void html_td_class(html_ctx *c, xf_bound b) {
    sbuf_printf(c->b, "<td data-v=\"%s\"><span class=\"cls\" style=\"background:%s\">%s</span></td>", bound_name(b),
                html_class_color(b), bound_name(b));
}

/* A "key: value" row of a definition table. */
void html_kv_row(html_ctx *c, const char *key, const char *value) {
    html_put(c, "<tr><th>");
    html_esc(c, key);
    html_put(c, "</th><td>");
    html_esc(c, value);
    html_put(c, "</td></tr>\n");
}

void html_section_open(html_ctx *c, int ri, const char *name, const char *title) {
    sbuf_printf(c->b, "<section class=\"sec-%s\" id=\"r%d-%s\">\n<h3>", name, ri, name);
    html_esc(c, title);
    html_put(c, "</h3>\n");
}
void html_section_close(html_ctx *c) { html_put(c, "</section>\n"); }

/* Draws a chart with gnuplot, or leaves a note saying why it is missing. */
void html_chart(html_ctx *c, const char *name, int w, int h, const char *body, const char *caption) {
    html_put(c, "<figure class=\"chart\">");
    if (!c->gp_ok) {
        html_put(c, "<div class=\"chart-missing\">Chart not drawn: ");
        html_esc(c, c->gp_why);
        html_put(c, "</div>");
    } else {
        char *svg = NULL;
        xf_status st = gnuplot_render_svg(&c->gp, name, w, h, body, &svg);
        if (st == XF_OK) {
            html_put(c, svg);
            c->n_charts_ok++;
        } else {
            html_put(c, "<div class=\"chart-missing\">Chart not drawn: ");
            html_esc(c, xf_error_msg());
            html_put(c, "</div>");
        }
        free(svg);
    }
    if (caption) {
        html_put(c, "<figcaption>");
        html_esc(c, caption);
        html_put(c, "</figcaption>");
    }
    html_put(c, "</figure>\n");
}

/* Writes a data file for a chart; returns 0 (and leaves a note) when it cannot. */
int html_chart_data(html_ctx *c, const char *name, const sbuf *data, char *lit, size_t lit_len) {
    if (!c->gp_ok) return 1; /* the chart call will leave the note */
    xf_status st = sbuf_status(data);
    if (st == XF_OK) st = gnuplot_write_data(&c->gp, name, data->data ? data->data : "", data->len, lit, lit_len);
    if (st != XF_OK) {
        html_put(c, "<div class=\"chart-missing\">Chart not drawn: ");
        html_esc(c, xf_error_msg());
        html_put(c, "</div>");
        return 0;
    }
    return 1;
}
