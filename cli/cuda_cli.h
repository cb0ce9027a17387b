/* What `xfprof run --device cuda` and `xfprof machine --device cuda` share: the plain "no CUDA
 * device present" answer (exit 3) and where the measured GPU ceilings are kept. */
#ifndef XF_CUDA_CLI_H
#define XF_CUDA_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "core/record.h"
#include "core/status.h"
#include "probes/cupti_host.h"

/* Prints "xfprof <cmd>: no CUDA device present: <reason>" when the last error says there is no
 * device (its leading "no CUDA device[ present]: " not repeated), else "xfprof <cmd>: CUDA device
 * not usable: <reason>" (a missing or wrong-version cuBLAS / CUPTI, named in the reason); returns
 * CLI_EXIT_UNSUPPORTED. */
int cli_cuda_unsupported(const char *cmd);

/* The GPU machine file (`xfprof machine --device cuda` writes it, `xfprof run --device cuda`
 * reads it): $XFPROF_GPU_MACHINE_FILE, else the CPU machine file's path (ceilings_machine_path)
 * with ".json" replaced by "-cuda.json" (~/.cache/xfprof/machine-cuda.json), so the CPU's and
 * the GPU's ceilings never overwrite each other. */
xf_status cli_gpu_machine_path(char *buf, size_t len);

/* GPU kernel time per op from CUPTI activity: every repetition's attribution (cupti_attribute /
 * cupti_probe_flush) is summed per (phase, layer, op) into that op's cell; the record counter is
 * the median over the repetitions, and for decode ops the per-step figure (divided by the decode
 * steps of a repetition), the same convention as the timer probe's samples. */
typedef struct cli_kernel_times {
    int64_t n_layers, n_ops;
    int reps;
    int64_t *slot_op; /* (XF_PHASE_COUNT, n_layers + 1, OP_KIND_COUNT) index of the point's op, -1 none */
    double *kt;       /* (n_ops, reps) summed kernel seconds; NaN: no kernel seen in that repetition */
    double *scratch;  /* (reps) */
    int64_t unattributed, bad_records; /* over the kept repetitions */
} cli_kernel_times;

/* Sized for point p (its ops) of a model of n_layers layers and `reps` kept repetitions. XF_ENOMEM,
 * XF_EINVAL for reps < 1 or n_layers < 1. Free with cli_kernel_times_free (zeroed struct: no-op). */
xf_status cli_kernel_times_init(cli_kernel_times *k, const record_point *p, int64_t n_layers, int reps);
void cli_kernel_times_free(cli_kernel_times *k);

/* Adds repetition `rep`'s attribution (0 <= rep < reps; others are ignored, e.g. warm-up). Ranges of
 * ops the point lacks are ignored. */
void cli_kernel_times_add(cli_kernel_times *k, const cupti_attribution *a, int rep);

/* Appends the counter "gpu_kernel_time_s" to op i of the point (the median over the repetitions
 * that saw kernels, divided by n_decode_steps for a decode op) when it has kernels and the op has a
 * free counter slot. Returns 1 when appended, 0 otherwise. */
int cli_kernel_times_fill(const cli_kernel_times *k, int64_t i, int64_t n_decode_steps, record_op *op);

#endif
