/* What `xfprof run --device cuda` and `xfprof machine --device cuda` share: the plain "no CUDA
 * device present" answer (exit 3) (the runner, runner/, measures; the GPU machine file is probes/ceilings.h). */
#ifndef XF_CUDA_CLI_H
#define XF_CUDA_CLI_H

#include <stddef.h>

#include "core/status.h"

/* Prints "xfprof <cmd>: no CUDA device present: <reason>" when the last error says there is no
 * device (its leading "no CUDA device[ present]: " not repeated), else "xfprof <cmd>: CUDA device
 * not usable: <reason>" (a missing or wrong-version cuBLAS / CUPTI, named in the reason); returns
 * CLI_EXIT_UNSUPPORTED. */
int cli_cuda_unsupported(const char *cmd);

#endif
