/* Host-side checks of the CUDA path, plain C with no CUDA dependency, so they are built and tested
 * everywhere (tests/test_cuda_check.c) on recorded inputs:
 *  - the debug mode's switch (XFPROF_CUDA_SYNC_DEBUG) and the label that names the op of an
 *    asynchronous fault;
 *  - the version check of the libraries loaded with dlopen (a fallback name such as libcupti.so
 *    can find a CUDA 12 library);
 *  - the teacher-forced comparison of GPU logits with the CPU's: the GPU is fed the CPU's tokens,
 *    so one flipped argmax cannot make the rest of the sequence diverge; logits must agree within
 *    the bf16 tolerance, tokens only where the CPU's top-2 gap leaves no doubt. */
#ifndef XF_CUDA_CHECK_H
#define XF_CUDA_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/op.h"
#include "core/workload.h"

/* 1 when the environment value turns the debug mode on ("1", "on", "yes", "true"), else 0
 * (NULL, "", "0", "off", anything else). */
int cuda_check_debug_env(const char *value);

/* "op decode/L3/attention (step 7)" or "op prefill/G/embedding": the op a fault is reported at.
 * Writes at most len bytes into buf; returns buf. */
char *cuda_check_op_label(char *buf, size_t len, xf_phase phase, int layer, op_kind kind, int64_t step);

/* The CUDA major version of a CUPTI API version (cuptiGetVersion): 130001 -> 13 (CUDA 13 uses
 * xxyyzz); the older small numbers map to their toolkits (19..28 -> 12, 13..18 -> 11, below -> 10);
 * 0 -> 0 (unknown). */
int cuda_check_cupti_major(uint32_t api_version);

/* XF_OK when found_major == want_major; else XF_EUNSUPPORTED with a message naming the library,
 * the file it was loaded from (path, may be NULL), both versions and what to do (put CUDA
 * <want>'s library first on LD_LIBRARY_PATH; bench/gpu_check.sh finds the python wheels). */
xf_status cuda_check_lib_version(const char *lib, const char *path, int found_major, int want_major);

/* One step of one sequence, GPU logits against the CPU's (both (vocab)). */
typedef struct cuda_check_step {
    double scale;       /* max(1, max |cpu|): the errors are relative to it */
    double max_err;     /* max |gpu - cpu| / scale */
    int64_t cpu_top, gpu_top; /* argmax, the first maximum wins (as both backends' sampling) */
    double cpu_gap;     /* (cpu top-1 - cpu top-2) / scale */
    int decisive;       /* cpu_gap > 2 * tol: both logits may move by tol, so only then must the argmax agree */
    int ok;             /* max_err <= tol, and cpu_top == gpu_top when decisive */
} cuda_check_step;

/* Compares one step. XF_EINVAL for vocab < 2, tol <= 0 or a NaN / infinite logit (named by index). */
xf_status cuda_check_logits(const float *gpu, const float *cpu, int64_t vocab, double tol, cuda_check_step *out);

/* A whole teacher-forced run: the steps folded in. */
typedef struct cuda_check_summary {
    int64_t steps, decisive, close_calls; /* steps compared; of them decisive; non-decisive with different argmax */
    int64_t failures;                     /* steps not ok */
    double max_err;                       /* worst step's max_err */
    int64_t first_failure;                /* index (in the order added) of the first failed step, -1 none */
    double first_failure_err;
    int64_t first_failure_cpu_top, first_failure_gpu_top;
} cuda_check_summary;

void cuda_check_summary_init(cuda_check_summary *s);
void cuda_check_summary_add(cuda_check_summary *s, const cuda_check_step *st);
/* One line: "teacher-forced: 16 steps, 15 decisive, 1 close call, max error 0.012 (tol 0.05): ok"
 * or "... FAILED at step 3: error 0.2, argmax gpu 17 cpu 4". Returns buf. */
char *cuda_check_summary_line(const cuda_check_summary *s, double tol, char *buf, size_t len);

/* A replay against the run it replays (CUDA graph against op by op): the same kernels on the same
 * inputs, so tokens must be equal and the last step's logits within tol. tokens (n_seqs, n_tok),
 * logits (n_seqs, vocab). Returns 1 when they agree, else 0; either way `msg` gets one line
 * ("graph replay equal to op by op: 2 x 16 tokens, last logits max error 0" or where it differs).
 * XF_EINVAL (returned as -1) for bad sizes or a NaN logit. */
int cuda_check_replay(const int32_t *tok_replay, const int32_t *tok_ref, int64_t n_seqs, int64_t n_tok, const float *lg_replay,
                      const float *lg_ref, int64_t vocab, double tol, char *msg, size_t len);

#endif
