/* The runner: a typed run plan in, a record out. It owns the measuring loop that `xfprof run` and a
 * measured `xfprof sweep` share:
 *   1. the memory gate (model_mem_gate: host memory, and the GPU's on --device cuda), before
 *      anything is measured or allocated;
 *   2. the ceilings (the machine file, else a quick measurement; on cuda the GPU machine file, the
 *      spec sheet or the device's attributes) and the bandwidth choice (in-cache when the weights
 *      fit in the last-level cache);
 *   3. the probes, as one probe_set of function tables (core/probe.h): CUPTI (cuda, outermost),
 *      perf_event (CPU), the timer (innermost);
 *   4. per point of the grid: warm-up and measured repetitions, the probes' samples into the ops,
 *      the roofline class, TTFT/TPOT, the generated tokens; on cuda the Range Profiler counters and
 *      the CUDA-graph A/B;
 *   5. the record's env entries (host, CPU/GPU, BLAS, timer overhead, counters).
 * Library code: it prints progress and notes to stderr like the model does, never exits. */
#ifndef XF_RUNNER_H
#define XF_RUNNER_H

#include <stdint.h>
#include <stdio.h>

#include "core/dtype.h"
#include "core/model_config.h"
#include "core/record.h"
#include "core/status.h"
#include "reference_model/backend.h"
#include "reference_model/kv_cache.h"
#include "probes/callgrind.h"

typedef enum runner_cupti {
    RUNNER_CUPTI_DEFAULT = -1, /* activity when CUPTI loads, else off with a note */
    RUNNER_CUPTI_OFF = 0,
    RUNNER_CUPTI_ACTIVITY,     /* each op's kernel time from CUPTI activity (counter gpu_kernel_time_s) */
    RUNNER_CUPTI_COUNTERS      /* activity, then the Range Profiler replays for DRAM bytes and FLOPs */
} runner_cupti;

/* One step of the replay run_plan.on_step asks for. */
typedef struct run_step_view {
    int point;             /* index of the point in the record */
    int64_t step;          /* 0: the prefill (logits of the last prompt position), k: the k-th decode step */
    int64_t n_seqs, vocab;
    const float *logits;   /* (n_seqs, vocab) the last position's logits; valid during the call */
    const int32_t *tokens; /* (n_seqs) the token each sequence sampled from them (greedy) */
    const int32_t *prompt; /* step 0 only: (n_seqs, prompt_len) the prompt ids; NULL otherwise */
    int64_t prompt_len;
} run_step_view;

/* What to run. Every (batch, prompt, gen) combination of the grid is one point, batch-major.
 * Pointers are borrowed (the caller keeps them alive during runner_run). */
/* Concurrent ceilings: each pulse takes this share of a repetition's wall time, within these bounds. */
#define RUNNER_PULSE_SHARE 0.006
#define RUNNER_PULSE_MIN_S 3e-4
#define RUNNER_PULSE_MAX_S 1e-2

typedef struct run_plan {
    model_config cfg;            /* validated (config_validate) */
    const char *weights_dir;     /* a Hugging Face folder of *.safetensors; NULL: random weights from seed */
    const int64_t *batch;        /* (n_batch) sequences run together, each >= 1 */
    const int64_t *prompt;       /* (n_prompt) prompt tokens per sequence, each >= 1 */
    const int64_t *gen;          /* (n_gen) tokens generated per sequence, each >= 0 */
    int n_batch, n_prompt, n_gen;
    const int32_t *prompt_ids;   /* (n_prompt_ids) the prompt of every sequence; NULL: random from seed */
    int64_t n_prompt_ids;
    xf_dtype wdtype;             /* host weights: fp32, bf16 or int8 */
    xf_dtype kvdtype;            /* fp32, fp16 or bf16 */
    int quant_group;             /* int8 scale group; 0 = default */
    backend_bf16_inputs bf16_inputs; /* bf16 weights: exact (default) or rounded inputs (--bf16-inputs) */
    int threads;                 /* >= 1 */
    int reps, warmup;            /* measured (>= 1) and discarded (>= 0) repetitions */
    uint64_t seed;
    kv_policy kv_policy;         /* the KV manager's policy */
    kv_alloc_mode kv_alloc;
    int cuda, ordinal;           /* 1: the CUDA backend on GPU `ordinal` (the caller opened it) */
    int probes;                  /* 0: whole-step times only (--no-probes) */
    int perf;                    /* 1: open the perf_event counters (CPU) */
    int callgrind;               /* 1: per-op instruction counts from callgrind (the process runs under
                                    valgrind --tool=callgrind, cli/run_callgrind.c); 2: with its cache simulation */
    const char *callgrind_out;   /* callgrind only: the dump file valgrind writes (--callgrind-out-file) */
    callgrind_test_extra callgrind_extra; /* callgrind only, test hook XFPROF_TEST_EXTRA_INSTR: more work in one op */
    runner_cupti cupti;          /* cuda only */
    int cuda_graph;              /* cuda only: the decode step with and without a CUDA graph */
    int quiet;                   /* 1: no progress lines on stderr (warnings still) */
    int concurrent;              /* 1 (default): concurrent ceilings, short read and FMA pulses before, between and
                                    after the repetitions (CPU; --no-concurrent turns them off) */
    double contended_share;      /* contended when a concurrent ceiling falls more than this share below the
                                    machine file's; 0: ROOFLINE_CONTENDED_SHARE */
    /* Called for every step of one more, untimed repetition of each point (after the measured ones,
     * without probes; greedy, so it generates the same tokens): the prompt, the sampled ids and the
     * last-position logits, e.g. to check a run against another engine. NULL: no replay. */
    xf_status (*on_step)(void *ctx, const run_step_view *v);
    void *on_step_ctx;
    /* Tensor parallel over MPI ranks (cli/run_tp.c; 0 / NULL on one device): this rank's shard of
     * the model (reference_model/cpu_parallel.h) and the sum over the ranks; the record's ops are
     * the parallel cost model's (replicate_vocab) with the two all-reduces of a layer as one op. */
    int tp;
    const model_config *shard_cfg;
    const struct model_weights *shard_weights;
    xf_status (*allreduce)(void *ctx, float *buf, int64_t n, const char *what);
    void *allreduce_ctx;
    int (*stop)(void);           /* polled between repetitions: nonzero (a signal number) stops the run after the
                                    repetition it is on, the record marked partial (Ctrl-C); NULL: never */
} run_plan;

/* Fills a plan with the defaults every command shares (core/limits.h) for `cfg`; the grid stays
 * empty (the caller points it at its lists). */
void run_plan_default(run_plan *p, const model_config *cfg);

/* How the run was measured, for the notes printed under the table (the record's env has them too). */
typedef struct run_notes {
    char ceilings[224];     /* the bandwidth ceiling chosen and why */
    char perf[224];         /* which counters are open, or why not */
    char cupti[224];        /* what CUPTI did */
    char counters[320];     /* the Range Profiler's pass, "" when not tried */
    char graph[1024];       /* one line per point: the decode step with and without the graph */
    char gpu[160];          /* "cuda:N name", "" on the CPU */
    char concurrent[224];   /* the concurrent ceilings: on (which bandwidth), off and why */
    int probes;             /* 1 when the per-op timer ran */
    int perf_open;          /* 1 when a perf counter was open */
    double timer_overhead_s;
    double peak_rss_bytes;
    int stopped_by;         /* plan->stop's last nonzero answer: the run stopped early */
    int points_planned;     /* n_batch * n_prompt * n_gen */
} run_notes;

/* Runs the plan into *rec (record_init(rec, "run") first: the caller owns it and frees it with
 * record_free; on error it holds the points completed so far). XF_EOVERFLOW when the model does
 * not fit memory (nothing allocated), XF_EUNSUPPORTED when the GPU or its ceilings are missing,
 * XF_EINVAL for a bad plan (messages name the field). *notes may be NULL. */
xf_status runner_run(const run_plan *plan, record *rec, run_notes *notes);

/* The compute unit whose peak a CPU op of cfg in workload w is judged against, as the CPU backend
 * runs it (op->compute, the cost model's, unless it is a projection on AMX tiles: bf16 on own tiles
 * or oneDNN's, tensor16; int8 at 4+ tokens, int8) on dev's peaks. ran 1: after a run (what this
 * process ran); ran 0: what a run would use now (predict --device cpu, so that its calibrated
 * prediction divides by the same peak as the calibration's and run's). */
xf_compute runner_cpu_op_compute(const model_config *cfg, const workload *w, const cost_op *op, const device_spec *dev, int ran);

/* Prints the notes under the op table: ceilings, bandwidth ceiling, timer overhead, GPU/CUPTI or
 * counters, one line per point (TTFT, TPOT, tokens/s), peak memory. */
void runner_print_notes(FILE *f, const record *rec, const run_notes *n);

/* One line on point i's concurrent ceilings: contended or not, each ceiling against the machine
 * file's (and by how much), the pulses' share of the run. Nothing when the point has none. */
void runner_print_concurrent(FILE *f, const record_point *p, int i);

#endif
