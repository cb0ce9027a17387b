/* xfprof: where do the time and the memory of Transformer inference go, and why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "probes/ceilings.h"
#include "signals.h"

static void print_help(FILE *f) {
    fprintf(f,
            "xfprof %s: profiles Transformer inference and explains its bottlenecks.\n\n"
            "Usage: xfprof <command> [options]   (xfprof <command> --help for its options)\n\n"
            "Commands:\n",
            XFPROF_VERSION);
    for (int i = 0; i < cli_command_count; i++) fprintf(f, "  %-10s %s\n", cli_commands[i].name, cli_commands[i].summary);
    fprintf(f, "\nExit status: 0 ok, 1 regression found (compare), 2 bad arguments or input, 3 hardware not\n"
               "present (no GPU, no counters), 4 I/O error or out of memory.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        if (argc >= 3 && strcmp(argv[1], "help") == 0) {
            for (int i = 0; i < cli_command_count; i++) {
                if (strcmp(argv[2], cli_commands[i].name) == 0) {
                    char *args[] = {argv[2], "--help", NULL};
                    return cli_commands[i].run(2, args);
                }
            }
            fprintf(stderr, "xfprof: unknown command '%s'; run 'xfprof help' for the list\n", argv[2]);
            return CLI_EXIT_USAGE;
        }
        print_help(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("xfprof %s\n", XFPROF_VERSION);
#ifdef XFPROF_HAVE_CUDA
        printf("CUDA backend: built\n");
#else
        printf("CUDA backend: not built (no CUDA toolkit at build time)\n");
#endif
        return CLI_EXIT_OK;
    }
    /* Every command: a signal removes the temporaries before the process dies (run and sweep
     * install their own two-step handling on top). */
    cli_signals_install_default();
    /* The commands that time the CPU backend want its libraries set up for it. */
    if (strcmp(argv[1], "run") == 0 || strcmp(argv[1], "machine") == 0) ceilings_env_reexec(argc, argv);
    for (int i = 0; i < cli_command_count; i++)
        if (strcmp(argv[1], cli_commands[i].name) == 0) return cli_commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "xfprof: unknown command '%s'; run 'xfprof help' for the list\n", argv[1]);
    return CLI_EXIT_USAGE;
}
