/* See cuda_cli.h. */
#include "cuda_cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_cuda_unsupported(const char *cmd) {
    const char *msg = xf_error_msg();
    if (!msg || !msg[0]) msg = "the CUDA runtime gave no reason";
    static const char *const prefixes[] = {"no CUDA device present: ", "no CUDA device: "};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(msg, prefixes[i], strlen(prefixes[i]))) {
            msg += strlen(prefixes[i]);
            break;
        }
    fprintf(stderr, "xfprof %s: no CUDA device present: %s\n", cmd, msg);
    return CLI_EXIT_UNSUPPORTED;
}
