/* What is run: one phase of one step, or a whole request (prefill, which samples the first token, then gen - 1 decode steps). */
#ifndef XF_WORKLOAD_H
#define XF_WORKLOAD_H

#include <stdint.h>

#include "core/dtype.h"

typedef enum xf_phase { XF_PREFILL = 0, XF_DECODE = 1, XF_PHASE_COUNT } xf_phase;

const char *phase_name(xf_phase p); /* "prefill" / "decode" */

typedef struct workload {
    int64_t batch;      /* sequences run together */
    int64_t prompt;     /* prompt tokens per sequence */
    int64_t gen;        /* tokens generated per sequence: the prefill samples the first, gen - 1 decode steps the rest */
    xf_dtype wdtype;    /* weights */
    xf_dtype adtype;    /* activations (and the compute type of GEMMs) */
    xf_dtype kvdtype;   /* KV cache */
    int quant_group;    /* elements per scale for int8/int4 weights or KV; 0 = default 128 */
} workload;

/* One forward step: `tokens` new tokens per sequence, attending over `context` tokens each
 * (context includes the new tokens). Prefill: tokens = context = prompt. Decode: tokens = 1. */
typedef struct step_shape {
    xf_phase phase;
    int64_t batch;
    int64_t tokens;
    int64_t context;
} step_shape;

/* The prefill step of a request, and its decode step at context `context`. */
step_shape workload_prefill_step(const workload *w);
step_shape workload_decode_step(const workload *w, int64_t context);

/* Decode steps of a request: gen - 1 (none for gen <= 1). `gen` counts the generated tokens, as
 * transformers' max_new_tokens and llama-bench's -n do: the prefill step samples the first (TTFT
 * covers it), each decode step one more. */
int64_t workload_decode_steps(const workload *w);

/* Mean decode context: prompt + gen / 2, the context of the middle decode step (the k-th decode
 * step, k = 1..gen-1, attends over prompt + k tokens). */
int64_t workload_mean_decode_context(const workload *w);

/* Defaults: batch 1, the shared request (core/limits.h: prompt 128, gen 128), bf16 everywhere. */
void workload_default(workload *w);

/* A decode workload as the CPU reference runs it: `batch` sequences of `prompt` tokens and one
 * decode step (gen 2), weights `wdtype`, activations and KV in fp32, the default group. The
 * benchmarks' decode set-up (bench_cpu, bench_moe). */
workload workload_decode(int64_t batch, int64_t prompt, xf_dtype wdtype);

/* Checks batch >= 1, prompt >= 1, gen >= 0, and sizes below sane limits. */
xf_status workload_validate(const workload *w);

#endif
