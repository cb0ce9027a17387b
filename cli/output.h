/* What every measuring or predicting command does with its record: render it in the chosen
 * format to stdout or -o FILE, and write the HTML report and the trace when asked. One place,
 * so predict, run, kv and sweep behave the same. */
#ifndef XF_CLI_OUTPUT_H
#define XF_CLI_OUTPUT_H

#include "core/record.h"
#include "reports/render_text.h"

typedef struct cli_output {
    render_format format;   /* --format (default table) */
    const char *path;       /* -o FILE, NULL = stdout */
    int per_layer;          /* --per-layer */
    const char *report;     /* --report FILE (HTML), NULL = none */
    const char *trace;      /* --trace FILE (Chrome trace), NULL = none */
} cli_output;

/* Writes the record as asked; messages go to stderr prefixed by `cmd`. Returns an exit code. */
int cli_output_write(const char *cmd, const record *r, const cli_output *o);

/* Handles one output option shared by the commands (--format, -o/--output, --per-layer,
 * --report, --trace); returns 1 when `opt` was one of them (value in `arg`), 0 otherwise, and
 * -1 after printing a usage error for a bad value. */
int cli_output_option(const char *cmd, const char *opt, const char *arg, cli_output *o);

/* The help lines for those options. */
extern const char cli_output_help[];

#endif
