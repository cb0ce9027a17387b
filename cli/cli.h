/* The xfprof command line: one file per subcommand (cmd_<name>.c), registered in commands.c.
 * Only cli/ decides exit codes. */
#ifndef XF_CLI_H
#define XF_CLI_H

#include <stdio.h>

#include "core/status.h"

/* Exit codes, the same for every command (docs/cli.md). */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_REGRESSION = 1, /* compare found a regression */
    CLI_EXIT_USAGE = 2,      /* bad arguments or bad input files */
    CLI_EXIT_UNSUPPORTED = 3,/* asked for hardware this machine lacks (no GPU, no counters) */
    CLI_EXIT_FAILURE = 4     /* I/O error, out of memory, internal failure */
};

/* A subcommand: argv[0] is the command name; returns an exit code. */
typedef int (*cli_command_fn)(int argc, char **argv);

typedef struct cli_command {
    const char *name;
    const char *summary; /* one line for `xfprof help` */
    cli_command_fn run;
} cli_command;

extern const cli_command cli_commands[];
extern const int cli_command_count;

/* Maps a status to an exit code (CLI_EXIT_USAGE for input errors, ...). */
int cli_exit_code(xf_status s);

/* Prints "xfprof <cmd>: <message of the last error>" to stderr and returns cli_exit_code(s). */
int cli_fail(const char *cmd, xf_status s);

/* Prints "xfprof <cmd>: <message>" plus a hint to see --help, returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
