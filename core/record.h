/* The record: one run's (or sweep's) results in memory. The JSON form (reports/record_json.c,
 * docs/record.md) is the contract between measuring and reporting; this struct mirrors it.
 * Producers (predict, run, kv, sweep) fill it; reports read it. */
#ifndef XF_RECORD_H
#define XF_RECORD_H

#include <stdint.h>

#include "device.h"
#include "core/model_config.h"
#include "core/op.h"
#include "core/workload.h"

#define RECORD_FORMAT "xfprof-record"
#define RECORD_VERSION 1

typedef enum xf_bound {
    XF_BOUND_MEMORY = 0,
    XF_BOUND_COMPUTE,
    XF_BOUND_LATENCY,
    XF_BOUND_BALANCED,
    XF_BOUND_UNKNOWN, /* imported ops whose FLOPs and bytes the importer cannot compute */
    XF_BOUND_COMM,    /* collectives whose time is the link's bandwidth: "communication" */
    XF_BOUND_COUNT
} xf_bound;

const char *bound_name(xf_bound b); /* "memory", "compute", "latency", "balanced", "unknown", "communication" */
xf_status bound_parse(const char *s, xf_bound *out);

/* A hardware counter read over an op's range (perf_event on the CPU, CUPTI on the GPU). */
#define RECORD_MAX_COUNTERS 12
typedef struct record_counter {
    char name[48];  /* "cycles", "instructions", "dram__bytes_read.sum", ... */
    int supported;  /* 0: this machine does not offer it (written as "unsupported") */
    double value;   /* summed over the range, median over repetitions */
} record_counter;

/* One op of one step, with what the analysis made of it. */
typedef struct record_op {
    cost_op cost;            /* phase, layer, kind, compute type, FLOPs and compulsory bytes */
    double intensity;        /* flops / bytes used (measured bytes when from counters) */
    xf_bound bound;
    double time_s;           /* predicted time for predict records; measured median for run */
    double predicted_time_s; /* max(F/P, Q/B) against the record's device */
    double share;            /* time_s over its phase's step time */
    /* Measured runs only (measured == 1): */
    int measured;
    int n_samples;
    double *samples_s;       /* (n_samples) raw times, seconds; owned, freed by record_free */
    double spread_s;         /* interquartile range of samples_s */
    double util_compute;     /* (flops / time) / peak */
    double util_memory;      /* (bytes / time) / bandwidth */
    double util_link;        /* collectives: (comm_bytes / time) / the link's bandwidth (measured bus bandwidth over the ceiling) */
    int bytes_from_counters; /* 1: bytes are measured (CUPTI / perf); 0: the cost model's */
    double measured_bytes;   /* counter bytes when bytes_from_counters, else 0 */
    int n_counters;
    record_counter counters[RECORD_MAX_COUNTERS]; /* hardware counters for this op's range */
    char source[96];         /* imported ops: the traced ops or kernels it sums ("aten::linear"); "" otherwise */
    /* With concurrent ceilings (the point's `concurrent.n_pulses` > 0), util_compute / util_memory and
     * the class are against the ceilings measured around each repetition (median over repetitions);
     * these two are against the machine file's, as without them. Optional on read. */
    double util_compute_machine;
    double util_memory_machine;
    int confidence_boot;     /* bootstrap resamples behind `confidence`; 0: none (not measured, old record) */
    double confidence;       /* share of resamples of the repetitions giving `bound`, 0..1 */
    /* The calibrated prediction (analyzers/predict_calibrated.h): the roofline time against the
     * calibration's ceilings over the efficiency interpolated in the machine's calibration table
     * (or a spec-sheet device's default efficiencies). 0: none (the record's `prediction` says
     * "roofline bound"; old records). Optional on read. */
    double calibrated_time_s;
    int calib_clamped;       /* 1: the op's shape lay outside the table's range and its efficiency was clamped to the nearest entry */
} record_op;

typedef struct record_summary {
    double ttft_s;               /* prefill step time (first token out) */
    double tpot_s;               /* decode step time at the mean decode context */
    double tokens_per_s;         /* batch * gen / (ttft + gen * tpot): end-to-end output rate */
    double prefill_tokens_per_s; /* batch * prompt / ttft */
    double decode_tokens_per_s;  /* batch / tpot */
    int64_t decode_context;      /* context of the decode step summarised */
    double prefill_time_s;       /* sum of the prefill step's op times */
    double decode_time_s;        /* sum of the decode step's op times */
    double share_bound[XF_BOUND_COUNT]; /* share of request time (prefill + gen - 1 decode steps) per class */
    int64_t max_batch;           /* largest batch that fits device memory; 0 none */
    int verdict_boot;            /* bootstrap resamples behind verdict_confidence; 0: none */
    double verdict_confidence;   /* share of resamples whose request time is mostly in the same class */
    /* Predicted step times of a measured point (sum of its ops' predictions: calibrated when the
     * record's `prediction` is "calibrated", else the roofline bound). 0: none. Optional on read. */
    double predicted_ttft_s;
    double predicted_tpot_s;
} record_summary;

typedef struct record_memory {
    double weights_bytes;
    double kv_bytes;
    double kv_bytes_per_token;
    double activations_bytes;
    double total_bytes;
    double capacity_bytes; /* the device's memory */
    double active_weights_bytes; /* what one token reads of the weights: all but the routed experts it does
                                    not select (MoE); = weights_bytes when dense; 0 unknown (older records) */
} record_memory;

/* How a measured point was run (empty for predictions). */
typedef struct record_run_info {
    char backend[16];   /* "cpu", "cuda" */
    int threads;
    int reps;           /* repetitions kept (after warm-up) */
    int warmup;         /* warm-up repetitions discarded */
    char kv_policy[32]; /* "paged:16", "reserve", ... */
    char kv_alloc[16];  /* "pool" or "system" */
    uint64_t seed;
    double timer_overhead_s; /* measured per range and subtracted */
} record_run_info;

/* A point of a model split over devices (tp or pp > 1; reference_model/cost_parallel.h).
 * All zero otherwise, and then not written. The point's ops are one device's of every stage
 * (stage s holds its layers' ops; the ops of one device of a tensor-parallel group: its shard); its
 * memory and max_batch are per device (the fullest stage). */
typedef struct record_parallel {
    int tp;                   /* tensor-parallel degree: heads, columns and rows of the projections over tp devices; 0 = not split */
    int pp;                   /* pipeline-parallel degree: the layers in pp stages */
    int micro_batches;        /* pipeline micro-batches per step (divides the batch) */
    int devices;              /* tp * pp */
    int kv_copies;            /* devices holding each KV head: tp / n_kv_heads when n_kv_heads < tp (replicated), else 1 */
    int experts_per_device;   /* MoE: routed experts each device holds (n_experts / tp, expert parallel); 0 dense */
    double bubble;            /* pipeline bubble: (pp - 1) / (micro_batches + pp - 1) of a step */
    double prefill_step_s;    /* the batch's prefill step in micro_batches micro-batches through pp stages */
    double decode_step_s;     /* the same for the decode step at the summary's context */
    double comm_share;        /* share of request time in collectives */
    double comm_bytes;        /* bytes one device sends over the links in one request (prefill + gen - 1 decode steps) */
} record_parallel;

#define RECORD_MAX_CPU_REPS 16 /* repetitions whose CPU step times a point keeps (inline: 256 B per point) */
/* Concurrent ceilings of a measured point: short read and FMA pulses before, between and after
 * the repetitions (probes/ceilings.h), one before every `pulse_every`-th repetition and one after
 * the last; repetition r is judged against the mean of the pulses around it (r / pulse_every and
 * the next). Optional on read; n_pulses 0 when not measured (--no-concurrent, predictions, old
 * records). */
#define RECORD_MAX_PULSES 17
typedef struct record_concurrent {
    int n_pulses;                 /* ceil(reps / pulse_every) + 1, or 0 */
    int pulse_every;              /* repetitions between two pulses (1 up to 16 repetitions: fixed arrays, 272 bytes a point) */
    double pulse_bandwidth_Bps[RECORD_MAX_PULSES]; /* (n_pulses) read bandwidth of each pulse */
    double pulse_fp32_flops[RECORD_MAX_PULSES]; /* (n_pulses) FP32 FMA rate of each pulse */
    double pulse_s;               /* wall time of all the pulses (their overhead) */
    double run_s;                 /* wall time of the repetitions they surround */
    double machine_bandwidth_Bps; /* the machine file's ceiling of the same kind (DRAM or in-cache read) */
    double machine_fp32_flops;
    double bandwidth_Bps;         /* median over the repetitions of the ceiling around each */
    double fp32_flops;
    int cpu_wait_measured;        /* 1: cpu_wait_share was read (probes/cpu_wait.h); 0: not (no schedstat, old records) */
    double cpu_wait_share;        /* median over the repetitions of the longest run-queue wait of any of the model's
                                   * threads over the repetition's wall time: 0 alone on its cores, ~0.5 sharing them */
    double threshold;             /* contended when either median is more than this share below the machine file's,
                                   * or the CPU wait share above it */
    int contended;
} record_concurrent;

typedef struct record_point {
    workload wl;
    record_parallel par;
    record_concurrent concurrent;
    record_run_info run;
    int64_t n_ops;
    record_op *ops; /* (n_ops) prefill step ops then decode step ops; owned */
    record_summary summary;
    record_memory memory;
    int64_t n_seqs;           /* rows of tokens (== batch for runs, 0 for predictions) */
    int64_t n_tokens_per_seq; /* generated tokens per sequence */
    int32_t *tokens;          /* (n_seqs, n_tokens_per_seq) greedy tokens generated; owned */
    /* Mixture of experts, measured runs (0 / NULL otherwise): the router's choices in the last
     * repetition; optional in the JSON ("experts"), so older records load without them. */
    int64_t n_experts;        /* routed experts per MoE layer; 0: no router statistics */
    int64_t n_expert_layers;  /* the model's n_layers (a dense layer's rows are zero) */
    int64_t *expert_tokens;   /* (XF_PHASE_COUNT, n_expert_layers, n_experts) tokens routed to each expert,
                                 summed over the phase's steps; owned */
    int64_t *expert_distinct; /* (XF_PHASE_COUNT, n_expert_layers) distinct experts read, summed over the
                                 phase's steps (the expert ops' bytes use the mean per step); owned */
    int64_t expert_steps[XF_PHASE_COUNT]; /* steps summed in each phase */
    /* Measured runs: the process CPU time (all threads) of each repetition's prefill step and of its
     * mean decode step; unlike the wall times it does not grow while the process waits for a CPU
     * that other jobs hold. n_cpu 0: not measured (predictions, old records, reps above the cap). */
    int n_cpu;
    double cpu_prefill_s[RECORD_MAX_CPU_REPS]; /* (n_cpu) seconds */
    double cpu_decode_s[RECORD_MAX_CPU_REPS];  /* (n_cpu) seconds per decode step */
} record_point;

/* One finding of the advice analyzer (analyzers/advice.h): what the record shows, what to do,
 * and what the cost model predicts acting on it gains. */
#define RECORD_MAX_ADVICE 12
typedef struct record_advice {
    char kind[24];        /* "weight_precision", "batch", "kv_precision", "kv_policy", "fusion", "cpu_contention", ... */
    int point;            /* index of the point the finding is about */
    double score;         /* ranking key: predicted fraction of time (or memory) saved, 0..1 */
    char title[96];
    char evidence[320];   /* the figures of the record that show it */
    char action[224];     /* what to change */
    char gain_metric[24]; /* what before/after measure: "tpot_s", "tokens_per_s", "step_s", "max_live" */
    double before, after; /* the metric now and as the cost model predicts after acting */
} record_advice;

struct record_kv; /* the KV section, see record_kv.h */

#define RECORD_MAX_ENV 48
typedef struct record_env {
    char key[32];
    char value[224];
} record_env;

/* Sets (or replaces) an environment entry; silently ignores entries past RECORD_MAX_ENV. */
struct record;
void record_set_env(struct record *r, const char *key, const char *value);

typedef struct record {
    int version;            /* RECORD_VERSION when written by this build */
    char kind[16];          /* "predict", "run", "kv", "sweep", "import" */
    char created[32];       /* ISO 8601 UTC */
    char tool_version[32];
    model_config model;
    int64_t model_params;
    int64_t model_active_params; /* parameters one token uses (MoE: the selected experts only); = model_params
                                    when dense; 0 unknown (older records, imports) */
    double kv_bytes_per_token; /* at the first point's KV dtype */
    device_spec device;
    int n_points;
    record_point *points;   /* (n_points); owned */
    struct record_kv *kv;   /* NULL when the record has no KV section; owned */
    int ceilings_measured;  /* 1: device ceilings measured by `xfprof machine`; 0: spec sheet */
    int partial;            /* 1: stopped before the end (Ctrl-C): fewer points or repetitions than asked */
    char partial_reason[224]; /* what was stopped and what is in the record; "" unless partial */
    int n_env;
    record_env env[RECORD_MAX_ENV]; /* build, host, CPU/GPU, toolkit versions */
    int n_advice;
    record_advice advice[RECORD_MAX_ADVICE]; /* (n_advice) ranked, best first; written as "advice" */
    char prediction[32];    /* how the predicted times were made: "calibrated", "default efficiencies" or
                               "roofline bound"; "" (old records): the roofline bound. Optional on read */
    char prediction_note[224]; /* the calibration used (when, what grid, clamped ops) or why none; "" none */
    int64_t ops_left_out;   /* read in a stream (record_load_stream): points whose ops were not kept; such a
                               record is rendered but never written again (never in the JSON) */
} record;

/* The kinds a record can be, for messages; record_kind_known() says whether a kind is one. */
#define RECORD_KINDS "predict, run, kv, sweep or import"
int record_kind_known(const char *kind);

/* Zeroes *r and sets version and tool version. */
void record_init(record *r, const char *kind);

/* Appends a zeroed point; returns it or NULL on OOM (the record is unchanged then). The pointer
 * is valid until the next append. */
record_point *record_add_point(record *r);

/* Removes the last point (freeing what it owns); no-op on an empty record. */
void record_pop_point(record *r);

/* Frees everything the record owns (not r itself). NULL is fine. */
void record_free(record *r);

/* Sets created to the current UTC time. */
void record_stamp_time(record *r);

#endif
