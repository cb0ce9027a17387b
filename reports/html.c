/* The HTML report: the page (CSS, JS, navigation) around the sections of html_<section>.c. */
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
 * The page. */

static const char *k_css =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;margin:0;color:#1d2330;"
    "background:#f4f5f7;line-height:1.45}\n"
    "header{background:#1d2a3a;color:#fff;padding:18px 32px}header h1{margin:0 0 4px;font-size:22px}"
    "header p{margin:0;color:#c8d2de;font-size:13px}\n"
    "nav{background:#fff;border-bottom:1px solid #dde1e6;padding:8px 32px;font-size:13px;position:sticky;top:0;z-index:2}"
    "nav a{margin-right:14px;color:#2f5f9a;text-decoration:none}\n"
    "main{padding:8px 32px 40px;max-width:1400px}\n"
    "article>h2{font-size:19px;margin:22px 0 8px}\n"
    "section{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:14px 20px;margin:14px 0}\n"
    "section h3{margin:0 0 10px;font-size:17px}section h4{margin:14px 0 6px;font-size:14px;color:#444}\n"
    ".verdict{font-size:16px;background:#eef4fb;border-left:4px solid #2f74c0;padding:10px 14px;margin:0 0 12px}\n"
    ".cards{display:flex;flex-wrap:wrap;gap:16px}.cards table{flex:1 1 300px}\n"
    "table{border-collapse:collapse;font-size:13px}caption{text-align:left;font-weight:600;padding:4px 0;color:#333}\n"
    "table.kv th{text-align:left;font-weight:normal;color:#555;padding:3px 12px 3px 0;vertical-align:baseline}"
    "table.kv td{padding:3px 0;vertical-align:baseline}td.big{font-size:18px;font-weight:600}\n"
    "table.sortable th{cursor:pointer;background:#eef0f3;position:sticky;top:0}"
    "table.sortable th,table.sortable td,table.grid td,table.grid th{border:1px solid #e1e4e8;padding:3px 7px;text-align:right}"
    "table.sortable td:nth-child(-n+5){text-align:left}\n"
    ".scroll{max-height:600px;overflow:auto}\n"
    ".cls{color:#fff;border-radius:3px;padding:0 5px;font-size:12px}\n"
    ".bar{display:flex;height:18px;border-radius:3px;overflow:hidden;background:#f0f0f0;max-width:900px}"
    ".bar span{display:block;height:100%}\n"
    ".legend{font-size:13px;margin:4px 0}.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:4px;"
    "vertical-align:-1px}\n.warn{color:#b3261e}\n"
    ".pipe{display:flex;align-items:stretch;flex-wrap:wrap;gap:4px;margin:10px 0}"
    ".pipe-phase{width:80px;font-size:13px;color:#555;align-self:center}\n"
    ".stage{border:3px solid #999;border-radius:6px;padding:6px 9px;min-width:110px;max-width:200px;background:#fff;font-size:12px}"
    ".stage.io{border:2px dashed #aaa;color:#555;min-width:60px;align-self:center}\n"
    ".sname{font-weight:600;font-size:14px}.sshare{font-size:20px;font-weight:700}.stime{color:#555}"
    ".sbar{height:5px;background:#eee;margin:4px 0}.sbar span{display:block;height:100%}.sops{color:#444}\n"
    ".layers{display:flex;gap:4px;border:1px solid #c8cdd4;border-radius:8px;padding:18px 6px 6px;position:relative;"
    "background:#f7f8fa}.layers-label{position:absolute;top:2px;left:8px;font-size:12px;color:#555;font-weight:600}\n"
    ".arrow,.plus{align-self:center;color:#888;font-size:18px}\n"
    ".callouts{display:flex;flex-wrap:wrap;gap:10px;margin-top:8px}.callout{flex:1 1 300px;border:1px solid #dde1e6;"
    "border-radius:6px;padding:8px 12px;font-size:13px;background:#fafbfc}.callout.hot{border-color:#d0463c;background:#fdf1f0}\n"
    "figure.chart{margin:10px 0}figure.chart svg{max-width:100%;height:auto;display:block}"
    "figcaption{font-size:12px;color:#555}\n"
    ".charts3{display:flex;flex-wrap:wrap;gap:8px}.charts3 figure{flex:1 1 420px;margin:0}\n"
    ".chart-missing,.note{background:#fff8e1;border:1px solid #e8d48a;padding:8px 12px;border-radius:4px;font-size:13px}\n"
    "table.grid td.cell{color:#fff;text-align:center;font-size:12px;min-width:80px}\n"
    "table.kvbars{width:100%;max-width:1000px}table.kvbars th{text-align:left;width:110px;font-weight:600;padding:3px 8px 3px 0}"
    ".bar.wide{height:22px;max-width:none}.bar.wide span{color:#fff;font-size:11px;text-align:center;line-height:22px;"
    "overflow:hidden}\n"
    "ol.advice li{margin:0 0 10px;font-size:14px}\n"
    ".hint{font-size:12px;color:#666;margin:0 0 6px}details{margin-top:8px;font-size:13px}\n";

/* Sorting by a header click: numbers by their exact data-v, else text. */
static const char *k_js =
    "document.querySelectorAll('table.sortable th').forEach(function(th){th.addEventListener('click',function(){"
    "var t=th.closest('table'),b=t.tBodies[0],i=th.cellIndex,d=th.dataset.dir==='a'?'d':'a';th.dataset.dir=d;"
    "var rows=Array.prototype.slice.call(b.rows);rows.sort(function(x,y){var p=x.cells[i].dataset.v||'',"
    "q=y.cells[i].dataset.v||'',a=parseFloat(p),c=parseFloat(q);var r=(isNaN(a)||isNaN(c))?p.localeCompare(q):a-c;"
    "return d==='a'?r:-r;});rows.forEach(function(r){b.appendChild(r);});});});\n";

void report_options_default(report_options *o) {
    memset(o, 0, sizeof *o);
    o->detail_point = -1;
    o->charts = 1;
}

static void render_record(html_ctx *c, const record *r, int ri, int n_recs) {
    int dp = c->opt->detail_point;
    if (dp < 0 || dp >= r->n_points) dp = 0;
    const record_point *p = r->n_points > 0 ? &r->points[dp] : NULL;
    sbuf_printf(c->b, "<article class=\"record\" id=\"r%d\">\n", ri);
    if (n_recs > 1) {
        sbuf_printf(c->b, "<h2>Record %d: ", ri + 1);
        html_esc(c, r->kind);
        html_put(c, " &mdash; ");
        html_esc(c, r->model.name);
        html_put(c, " on ");
        html_esc(c, r->device.name);
        html_put(c, "</h2>\n");
    }
    html_summary(c, r, ri, p, dp);
    if (r->n_advice > 0) html_advice(c, r, ri); /* what to do, right after what was found */
    if (p && p->n_ops > 0) {
        html_pipeline(c, r, ri, p);
        html_roofline(c, r, ri, p);
        html_layers(c, r, ri, p);
        if (p->n_experts > 0) html_experts(c, r, ri, p);
        html_optable(c, ri, p);
        if (html_point_any_measured(p)) html_measured(c, ri, p);
    }
    if (r->kv) html_kv(c, r, ri);
    if (r->n_points > 1) html_sweep(c, r, ri);
    if (r->n_env > 0) html_env(c, r, ri);
    html_put(c, "</article>\n");
}

static void nav(html_ctx *c, const record *recs, int n_recs) {
    html_put(c, "<nav>");
    for (int ri = 0; ri < n_recs; ri++) {
        const record *r = &recs[ri];
        int dp = c->opt->detail_point;
        if (dp < 0 || dp >= r->n_points) dp = 0;
        const record_point *p = r->n_points > 0 ? &r->points[dp] : NULL;
        if (n_recs > 1) sbuf_printf(c->b, "<b>%d:</b> ", ri + 1);
        sbuf_printf(c->b, "<a href=\"#r%d-summary\">summary</a>", ri);
        if (p && p->n_ops > 0) {
            sbuf_printf(c->b, "<a href=\"#r%d-pipeline\">pipeline</a><a href=\"#r%d-roofline\">roofline</a>"
                              "<a href=\"#r%d-layers\">layers</a><a href=\"#r%d-optable\">ops</a>",
                        ri, ri, ri, ri);
            if (html_point_any_measured(p)) sbuf_printf(c->b, "<a href=\"#r%d-measured\">measured</a>", ri);
            if (p->n_experts > 0 && p->expert_tokens) sbuf_printf(c->b, "<a href=\"#r%d-experts\">experts</a>", ri);
        }
        if (r->kv) sbuf_printf(c->b, "<a href=\"#r%d-kv\">KV</a>", ri);
        if (r->n_points > 1) sbuf_printf(c->b, "<a href=\"#r%d-sweep\">sweep</a>", ri);
        if (r->n_advice > 0) sbuf_printf(c->b, "<a href=\"#r%d-advice\">advice</a>", ri);
        if (r->n_env > 0) sbuf_printf(c->b, "<a href=\"#r%d-env\">environment</a>", ri);
    }
    html_put(c, "</nav>\n");
}

xf_status report_html_text(const record *recs, int n_recs, const report_options *opt, char **out) {
    *out = NULL;
    if (!recs || n_recs < 1) return xf_errorf(XF_EINVAL, "report: no record to render");
    report_options defaults;
    report_options_default(&defaults);
    sbuf b;
    sbuf_init(&b);
    html_ctx c;
    memset(&c, 0, sizeof c);
    c.b = &b;
    c.opt = opt ? opt : &defaults;
    if (!c.opt->charts) {
        snprintf(c.gp_why, sizeof c.gp_why, "charts were turned off");
    } else {
        xf_status st = gnuplot_session_init(&c.gp, c.opt->gnuplot_timeout_s);
        c.gp_ok = st == XF_OK;
        if (!c.gp_ok) snprintf(c.gp_why, sizeof c.gp_why, "%s", xf_error_msg());
        xf_error_clear();
    }
    const record *r0 = &recs[0];
    char title[320];
    if (c.opt->title)
        snprintf(title, sizeof title, "%.300s", c.opt->title);
    else
        snprintf(title, sizeof title, "xfprof report: %.64s on %.64s", r0->model.name, r0->device.name);
    html_put(&c, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    html_esc(&c, title);
    html_put(&c, "</title>\n<style>\n");
    html_put(&c, k_css);
    html_put(&c, "</style>\n</head>\n<body>\n<header><h1>");
    html_esc(&c, title);
    html_put(&c, "</h1><p>");
    if (n_recs == 1) {
        html_esc(&c, r0->kind);
        html_put(&c, " record");
        if (r0->created[0]) {
            html_put(&c, " made ");
            html_esc(&c, r0->created);
        }
        html_put(&c, " by xfprof ");
        html_esc(&c, r0->tool_version);
    } else {
        sbuf_printf(c.b, "%d records", n_recs);
    }
    html_put(&c, "; report by xfprof " XFPROF_VERSION "</p></header>\n");
    nav(&c, recs, n_recs);
    html_put(&c, "<main>\n");
    if (!c.gp_ok) {
        html_put(&c, "<p class=\"note\" id=\"gnuplot-note\"><b>Charts need gnuplot</b> (Debian: <code>apt-get install "
                "gnuplot-nox</code>); this report has the tables only. Reason: ");
        html_esc(&c, c.gp_why);
        html_put(&c, "</p>\n");
    }
    for (int ri = 0; ri < n_recs; ri++) render_record(&c, &recs[ri], ri, n_recs);
    html_put(&c, "</main>\n<script>\n");
    html_put(&c, k_js);
    html_put(&c, "</script>\n</body>\n</html>\n");
    gnuplot_session_free(&c.gp);
    xf_status st = sbuf_status(&b);
    if (st != XF_OK) {
        sbuf_free(&b);
        return st;
    }
    *out = sbuf_take(&b);
    return *out ? XF_OK : xf_errorf(XF_ENOMEM, "out of memory");
}

xf_status report_html_write(const record *recs, int n_recs, const char *path, const report_options *opt) {
    char *text = NULL;
    xf_status st = report_html_text(recs, n_recs, opt, &text);
    if (st != XF_OK) return st;
    st = file_write_atomic(path, text, strlen(text));
    free(text);
    if (st != XF_OK) return xf_error_prefix(st, "report: ");
    return XF_OK;
}
