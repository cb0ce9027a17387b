/* The HTML report's parts (html.c: the page; html_prim.c: numbers, colours, table cells, sections,
 * charts; html_<section>.c: one section each). Not for use outside reports/. */
#ifndef XF_HTML_INT_H
#define XF_HTML_INT_H

#include <stddef.h>
#include <stdint.h>

#include "analyzers/rollup.h"
#include "core/record.h"
#include "core/record_kv.h"
#include "reports/html.h"
#include "reports/gnuplot.h"
#include "reports/sbuf.h"

typedef rollup_agg agg;
enum { ST_EMBED, ST_ATTN, ST_FFN, ST_HEAD, ST_COUNT };

typedef struct html_ctx {
    sbuf *b;
    gnuplot_session gp;
    int gp_ok;          /* gnuplot found and the temp folder made */
    char gp_why[512];   /* why there are no charts */
    int n_charts_ok;
    const report_options *opt;
} html_ctx;

void html_fmt_pct(char *buf, size_t n, double f);
void html_fmt_exact(char *buf, size_t n, double v);
double html_safe_div(double a, double b);
const char *html_class_color(xf_bound b);
const char *html_kind_color(int k);
int html_valid_kind(int k);
double html_op_t(const record_op *op);
int html_point_has_phase(const record_point *p, int ph);
void html_point_dominant(const record_point *p, int *phase, int *kind, xf_bound *cls, double *share);
int html_stage_of(int kind);
void html_put(html_ctx *c, const char *s);
void html_esc(html_ctx *c, const char *s);
void html_td_num(html_ctx *c, double v, const char *shown);
void html_td_si(html_ctx *c, double v, const char *unit);
void html_td_bytes(html_ctx *c, double v);
void html_td_time(html_ctx *c, double v);
void html_td_pct(html_ctx *c, double v);
void html_td_int(html_ctx *c, int64_t v);
void html_td_str(html_ctx *c, const char *s);
void html_td_class(html_ctx *c, xf_bound b);
void html_kv_row(html_ctx *c, const char *key, const char *value);
void html_section_open(html_ctx *c, int ri, const char *name, const char *title);
void html_section_close(html_ctx *c);
void html_chart(html_ctx *c, const char *name, int w, int h, const char *body, const char *caption);
int html_chart_data(html_ctx *c, const char *name, const sbuf *data, char *lit, size_t lit_len);

/* 1 when any op of p was measured. */
int html_point_any_measured(const record_point *p);

/* The sections. */
void html_summary(html_ctx *c, const record *r, int ri, const record_point *p, int dp);
void html_pipeline(html_ctx *c, const record *r, int ri, const record_point *p);
void html_roofline(html_ctx *c, const record *r, int ri, const record_point *p);
void html_layers(html_ctx *c, const record *r, int ri, const record_point *p);
void html_experts(html_ctx *c, const record *r, int ri, const record_point *p); /* MoE runs only (html_experts.c) */
void html_optable(html_ctx *c, int ri, const record_point *p);
void html_measured(html_ctx *c, int ri, const record_point *p);
void html_kv(html_ctx *c, const record *r, int ri);
void html_sweep(html_ctx *c, const record *r, int ri);
void html_advice(html_ctx *c, const record *r, int ri);
void html_env(html_ctx *c, const record *r, int ri);

#endif
