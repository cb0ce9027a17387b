/* The HTML report: one self-contained file (inline CSS, inline SVG charts drawn by gnuplot, a
 * few lines of plain JavaScript to sort tables, nothing fetched) rendering one or more records.
 * Each section appears exactly when the record has its data; every section element carries
 * class "sec-<name>" (summary, pipeline, roofline, layers, optable, measured, kv, sweep, advice,
 * env) and an id "r<record>-<name>". Without gnuplot the report is still written, with the
 * tables and a visible note (element id "gnuplot-note") that charts need gnuplot. Numbers are
 * shown to three significant figures (times in ns/µs/ms/s); each table cell carries the record's
 * exact value in data-v. When a record's ceilings were measured and xfprof's devices.json has a
 * spec sheet of the same name, the roofline draws both, each labelled. */
#ifndef XF_HTML_H
#define XF_HTML_H

#include "core/record.h"

typedef struct report_options {
    const char *title;        /* page title; NULL: "xfprof report: <model> on <device>" */
    int detail_point;         /* point drawn in the detailed sections (pipeline, roofline, layers,
                                 op table); -1: the first point */
    int charts;               /* 0: no gnuplot at all (tables only, with the note) */
    double gnuplot_timeout_s; /* per chart; 0: 30 s */
} report_options;

/* detail_point -1, charts on, default timeout. */
void report_options_default(report_options *o);

/* The report as HTML text for recs[0..n_recs); caller frees *out with free(). opt may be NULL
 * (defaults). A failing chart is replaced by a note in the page, not an error. */
xf_status report_html_text(const record *recs, int n_recs, const report_options *opt, char **out);

/* Writes the report to `path` atomically (temporary file, then rename; stdout for "-"). */
xf_status report_html_write(const record *recs, int n_recs, const char *path, const report_options *opt);

#endif
