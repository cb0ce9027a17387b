/* xfprof show: re-renders saved records without rerunning anything. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "output.h"
#include "reports/record_json.h"

static const char *CMD = "show";

int cmd_show(int argc, char **argv) {
    enum { O_FORMAT = 1000, O_PERLAYER };
    static const struct option opts[] = {{"format", required_argument, 0, O_FORMAT},
                                         {"output", required_argument, 0, 'o'},
                                         {"per-layer", no_argument, 0, O_PERLAYER},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    cli_output out = {RENDER_TABLE, NULL, 0, NULL, NULL};
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            printf("Usage: xfprof show RECORD.json [options]\n\n"
                   "Renders a saved record (from predict, run, kv or sweep) again, in any format, without rerunning.\n\n%s",
                   cli_output_help);
            return CLI_EXIT_OK;
        case O_FORMAT: if (cli_output_option(CMD, "format", optarg, &out) < 0) return CLI_EXIT_USAGE; break;
        case 'o': out.path = optarg; break;
        case O_PERLAYER: out.per_layer = 1; break;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1) return cli_usage_error(CMD, "give exactly one record file");
    record r;
    xf_status s = record_load(argv[optind], &r);
    if (s) {
        record_free(&r);
        return cli_fail(CMD, s);
    }
    int rc = cli_output_write(CMD, &r, &out);
    record_free(&r);
    return rc;
}
