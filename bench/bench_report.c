/* Rendering a 1,000-point sweep record (llama-2-7b on an H100, predicted over 40 batch sizes x 25
 * prompt lengths) as the HTML report, charts included; target under 5 s. Prints its figures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analyzers/predict.h"
#include "reports/gnuplot.h"
#include "reports/html.h"
#include "reports/trace.h"
#include "bench_util.h"

static double now_s(void) { return bench_now_s(); }

int main(int argc, char **argv) {
    const char *out = argc > 1 ? argv[1] : NULL;
    model_config cfg;
    device_spec d;
    if (config_preset("llama-2-7b", &cfg) != XF_OK || device_lookup("h100-sxm", NULL, &d) != XF_OK) {
        fprintf(stderr, "bench_report: %s (set XFPROF_DATA_DIR to the build's data folder)\n", xf_error_msg());
        return 1;
    }
    enum { NB = 40, NP = 25 };
    workload *w = calloc(NB * NP, sizeof *w); /* (NB * NP) */
    if (!w) return 1;
    int n = 0;
    for (int p = 0; p < NP; p++)
        for (int b = 0; b < NB; b++) {
            workload_default(&w[n]);
            w[n].batch = b + 1;
            w[n].prompt = 128 * (p + 1);
            w[n].gen = 128;
            n++;
        }
    record r;
    double t0 = now_s();
    if (predict_record(&cfg, &d, w, n, &r) != XF_OK) {
        fprintf(stderr, "bench_report: %s\n", xf_error_msg());
        return 1;
    }
    double t1 = now_s();
    char path[] = "/tmp/xfprof-bench-report-XXXXXX";
    if (!out) {
        int fd = mkstemp(path);
        if (fd < 0) return 1;
        close(fd);
        out = path;
    }
    report_options o;
    report_options_default(&o);
    xf_status st = report_html_write(&r, 1, out, &o);
    double t2 = now_s();
    if (st != XF_OK) {
        fprintf(stderr, "bench_report: %s\n", xf_error_msg());
        return 1;
    }
    char *html = NULL;
    o.charts = 0;
    st = report_html_text(&r, 1, &o, &html);
    double t3 = now_s();
    size_t len = html ? strlen(html) : 0;
    free(html);
    char exe[4096];
    int gp = gnuplot_find(exe, sizeof exe) == XF_OK;
    char *trace = NULL;
    double t4 = now_s();
    xf_status st2 = report_trace_text(&r, &trace);
    double t5 = now_s();
    size_t tlen = trace ? strlen(trace) : 0;
    free(trace);
    printf("bench_report: %d-point sweep (%d batch sizes x %d prompt lengths), %lld ops per point\n", n, NB, NP,
           (long long)r.points[0].n_ops);
    printf("  predict_record:               %.3f s\n", t1 - t0);
    printf("  report_html_write (charts %s): %.3f s  (target < 5 s: %s)\n", gp ? "by gnuplot" : "absent", t2 - t1,
           t2 - t1 < 5.0 ? "met" : "MISSED");
    printf("  report_html_text (no charts): %.3f s, %.2f MB of HTML\n", t3 - t2, (double)len / 1e6);
    printf("  report_trace_text:            %.3f s, %.2f MB of JSON%s\n", t5 - t4, (double)tlen / 1e6,
           st2 == XF_OK ? "" : " (failed)");
    if (out == path) unlink(path);
    record_free(&r);
    free(w);
    return st == XF_OK && t2 - t1 < 5.0 ? 0 : 1;
}
