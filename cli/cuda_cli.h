/* What `xfprof run --device cuda` and `xfprof machine --device cuda` share: the plain "no CUDA
 * device present" answer (exit 3) (the runner, runner/, measures; the GPU machine file is probes/ceilings.h). */
#ifndef XF_CUDA_CLI_H
#define XF_CUDA_CLI_H

#include <stddef.h>

#include "core/status.h"

/* Prints "xfprof <cmd>: no CUDA device present: <reason>" (the reason from the last error, with a
 * leading "no CUDA device[ present]: " not repeated) and returns CLI_EXIT_UNSUPPORTED. */
int cli_cuda_unsupported(const char *cmd);

#endif
