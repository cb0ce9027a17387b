#include "output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/fileio.h"
#include "reports/html.h"
#include "reports/record_json.h"
#include "reports/trace.h"

const char cli_output_help[] =
    "  --format F        table (default), json (the record), csv (every op) or md (summary for a CI comment)\n"
    "  -o, --output FILE save the record (JSON) there, replaced atomically; stdout still gets the\n"
    "                    --format rendering (except json, which is then only in the file)\n"
    "  --per-layer       table: one row per op per layer instead of each op summed over the layers\n";

int cli_output_option(const char *cmd, const char *opt, const char *arg, cli_output *o) {
    if (strcmp(opt, "format") == 0) {
        if (render_format_parse(arg, &o->format) != XF_OK) return cli_usage_error(cmd, "%s", xf_error_msg()), -1;
        return 1;
    }
    if (strcmp(opt, "output") == 0) {
        o->path = arg;
        return 1;
    }
    if (strcmp(opt, "per-layer") == 0) {
        o->per_layer = 1;
        return 1;
    }
    if (strcmp(opt, "report") == 0) {
        o->report = arg;
        return 1;
    }
    if (strcmp(opt, "trace") == 0) {
        o->trace = arg;
        return 1;
    }
    return 0;
}

int cli_output_write(const char *cmd, const record *r, const cli_output *o) {
    xf_status s;
    int to_file = o->path && strcmp(o->path, "-") != 0;
    /* -o FILE saves the record; stdout gets the chosen rendering (nothing more for json to a
     * file: the record is already there). */
    if (to_file) {
        if ((s = record_save(r, o->path))) return cli_fail(cmd, s);
        fprintf(stderr, "xfprof %s: wrote the record to %s\n", cmd, o->path);
    }
    if (o->format == RENDER_JSON && !to_file) {
        if ((s = record_save(r, NULL))) return cli_fail(cmd, s);
    } else if (o->format != RENDER_JSON) {
        render_options ro = {o->per_layer};
        char *text = NULL;
        s = render_text(r, o->format, &ro, &text);
        if (s == XF_OK) s = file_write_atomic(NULL, text, strlen(text));
        free(text);
        if (s) return cli_fail(cmd, s);
    }
    if (o->report) {
        if ((s = report_html_write(r, 1, o->report, NULL))) return cli_fail(cmd, s);
        fprintf(stderr, "xfprof %s: wrote the report %s\n", cmd, o->report);
    }
    if (o->trace) {
        if ((s = report_trace_write(r, o->trace))) return cli_fail(cmd, s);
        fprintf(stderr, "xfprof %s: wrote the trace %s (open it in Perfetto or chrome://tracing)\n", cmd, o->trace);
    }
    return CLI_EXIT_OK;
}
