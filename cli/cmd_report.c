/* xfprof report: renders saved records as one self-contained HTML report (or Markdown), and the
 * op timeline as a Chrome trace. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/fileio.h"
#include "reports/gnuplot.h"
#include "reports/html.h"
#include "reports/record_json.h"
#include "reports/render_text.h"
#include "reports/trace.h"
#include "args.h"

static const char *CMD = "report";

static void help(void) {
    printf("Usage: xfprof report RECORD.json... [-o report.html] [--trace trace.json] [--format html|md]\n\n"
           "Renders records (from predict, run, kv or sweep) without rerunning anything: one self-contained\n"
           "HTML file (summary and verdict, the pipeline at a glance, the roofline, time per layer by op, every\n"
           "op, measured against predicted, KV, sweeps, environment) that opens offline in any browser.\n"
           "Charts are drawn by gnuplot (Debian: gnuplot-nox); without it the report has the tables and says so.\n\n"
           "Options:\n"
           "  -o, --output FILE   where to write (default report.html for html, stdout for md); '-' = stdout\n"
           "  --format FMT        html (default) or md (a compact Markdown summary, e.g. for a CI comment)\n"
           "  --trace FILE        also write the op timeline of the first record as Chrome Trace Event JSON\n"
           "                      (opens in https://ui.perfetto.dev and chrome://tracing)\n"
           "  --point N           the point of a sweep drawn in the detailed sections (1-based; default 1); a record\n"
           "                      above 64 MiB is read in a stream, which keeps every point's summary and the ops\n"
           "                      of the first 256 points and of this one (docs/record.md)\n"
           "  --title TEXT        the page title\n"
           "  --no-charts         do not run gnuplot (tables only)\n"
           "  -h, --help          this help\n\n"
           "Environment: XFPROF_GNUPLOT=PATH picks the gnuplot executable.\n"
           "Exit status: 0 written, 2 bad arguments or a record of another format or version, 4 I/O error.\n");
}

int cmd_report(int argc, char **argv) {
    enum { O_FORMAT = 1000, O_TRACE, O_POINT, O_TITLE, O_NOCHARTS };
    static const struct option opts[] = {{"output", required_argument, 0, 'o'},
                                         {"format", required_argument, 0, O_FORMAT},
                                         {"trace", required_argument, 0, O_TRACE},
                                         {"point", required_argument, 0, O_POINT},
                                         {"title", required_argument, 0, O_TITLE},
                                         {"no-charts", no_argument, 0, O_NOCHARTS},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *out = NULL, *trace = NULL;
    int md = 0;
    report_options ro;
    report_options_default(&ro);
    int64_t point = 0;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'h': help(); return CLI_EXIT_OK;
        case 'o': out = optarg; break;
        case O_FORMAT:
            if (strcmp(optarg, "html") == 0)
                md = 0;
            else if (strcmp(optarg, "md") == 0 || strcmp(optarg, "markdown") == 0)
                md = 1;
            else
                return cli_usage_error(CMD, "--format must be html or md, not '%.64s'", optarg);
            break;
        case O_TRACE: trace = optarg; break;
        case O_POINT: {
            xf_status s = args_int("--point", optarg, 1, 1000000000, &point);
            if (s) return cli_fail(CMD, s);
            ro.detail_point = (int)(point - 1);
            break;
        }
        case O_TITLE: ro.title = optarg; break;
        case O_NOCHARTS: ro.charts = 0; break;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    int n = argc - optind;
    if (n < 1) return cli_usage_error(CMD, "give at least one record file (made by predict, run, kv or sweep with -o)");
    if (n > 64) return cli_usage_error(CMD, "at most 64 records in one report, not %d", n);
    record *recs = calloc((size_t)n, sizeof *recs);
    if (!recs) return cli_fail(CMD, xf_errorf(XF_ENOMEM, "out of memory"));
    int rc = CLI_EXIT_OK, loaded = 0;
    for (int i = 0; i < n; i++) {
        xf_status s = record_load_keep(argv[optind + i], point - 1, &recs[i]); /* a big sweep keeps the ops of --point */
        loaded = i + 1;
        if (s) {
            rc = cli_fail(CMD, s);
            goto done;
        }
        if (point > recs[i].n_points && recs[i].n_points > 0) {
            rc = cli_usage_error(CMD, "--point %lld: %s has %d points", (long long)point, argv[optind + i], recs[i].n_points);
            goto done;
        }
    }
    if (md && n > 1 && out && strcmp(out, "-") != 0) {
        rc = cli_usage_error(CMD, "--format md with -o takes one record (or write several to stdout)");
    } else if (md) {
        for (int i = 0; i < n && rc == CLI_EXIT_OK; i++) {
            char *text = NULL;
            xf_status s = render_text(&recs[i], RENDER_MD, NULL, &text);
            if (s == XF_OK) s = file_write_atomic(out, text, strlen(text));
            free(text);
            if (s) rc = cli_fail(CMD, s);
        }
    } else {
        if (!out) out = "report.html";
        if (ro.charts) {
            char exe[4096];
            if (gnuplot_find(exe, sizeof exe) != XF_OK)
                fprintf(stderr, "xfprof report: %s; the report has the tables only\n", xf_error_msg());
        }
        xf_status s = report_html_write(recs, n, out, &ro);
        if (s) {
            rc = cli_fail(CMD, s);
            goto done;
        }
        if (strcmp(out, "-") != 0) fprintf(stderr, "xfprof report: wrote %s\n", out);
    }
    if (rc == CLI_EXIT_OK && trace) {
        xf_status s = report_trace_write(&recs[0], trace);
        if (s) {
            rc = cli_fail(CMD, s);
            goto done;
        }
        if (strcmp(trace, "-") != 0) fprintf(stderr, "xfprof report: wrote the trace %s\n", trace);
    }
done:
    for (int i = 0; i < loaded; i++) record_free(&recs[i]);
    free(recs);
    return rc;
}
