/* The runner's parts (runner.c: the plan, the points, the env; runner_cuda.c: what only the GPU
 * path does). Not for use outside runner/. */
#ifndef XF_RUNNER_INT_H
#define XF_RUNNER_INT_H

#include "analyzers/predict_calibrated.h"
#include "core/probe.h"
#include "probes/ceilings.h"
#include "probes/cpu_wait.h"
#include "probes/perf_event.h"
#include "probes/timer.h"
#include "reference_model/cuda_backend.h"
#include "reference_model/model.h"
#include "runner/runner.h"

struct cupti_run;

typedef struct run_ctx {
    const run_plan *plan;
    model *m;
    probe_set ps;           /* cupti (cuda, outermost), perf, timer (innermost); owns the probes */
    timer_probe *timer;     /* in ps; NULL with --no-probes */
    perf_probe *perf;       /* in ps; NULL when no counter is open or --no-perf */
    callgrind_probe *callgrind; /* in ps (innermost); NULL unless plan->callgrind */
    struct cupti_run *cupti;/* in ps; NULL when CUPTI is off */
    device_spec dev;        /* the ceilings the ops are judged against */
    ceilings_pulser *pulser;/* concurrent ceilings' pulses; NULL when off (--no-concurrent, cuda) */
    cpu_wait *waits;        /* the model's threads' run-queue waits around each repetition; NULL: not measured */
    double pulse_scale;     /* what the pulser is asked for per second of pulse budget (learned; 0: not yet) */
    cuda_device_info gpu;
    runner_cupti cupti_sel; /* what this run does (after the fallbacks) */
    int counters_off;       /* counters refused once (no permission): not tried again */
    run_notes *notes;
    record *rec;
    int point_index;
    int reps_done;         /* repetitions the last run_point kept: reps, or fewer when stopped (Ctrl-C) */
    calib_table cal;        /* the machine file's calibration (issue 17); n == 0: none, the roofline bound */
    predcal_stats cal_counts; /* ops calibrated, clamped, from the other tier, over the points */
} run_ctx;

/* The GPU's ceilings: the GPU machine file when `xfprof machine --device cuda` measured this GPU,
 * else the spec sheet matched by name, else the device's attributes. *measured: 1 for the file. */
xf_status runner_gpu_ceilings(int ordinal, device_spec *dev, int *measured, char *what, size_t what_len);

/* The CUPTI activity probe of a run, as a probe table entry (point_begin opens CUPTI activity for
 * the point, rep_end flushes a repetition's kernels, point_end closes it and leaves the NVTX ranges,
 * fill appends gpu_kernel_time_s). XF_EUNSUPPORTED when CUPTI cannot be opened. *out: its free. */
xf_status runner_cupti_probe(int ordinal, int64_t n_layers, int reps, probe *out, struct cupti_run **cr);
/* "activity: gpu_kernel_time_s = ... on N ops; ..." for the env and the notes. */
void runner_cupti_note(const struct cupti_run *cr, char *buf, size_t len);

/* --cuda-graph: the decode step with and without the graph; a line per point into notes->graph
 * and env cuda_graph_p<N>. */
xf_status runner_graph_compare(run_ctx *c, record_point *p, const int32_t *prompts, const int64_t *lens);

/* --cupti counters: the Range Profiler replays the request; its DRAM bytes and FLOPs go into the
 * point's ops. No permission: a note, activity timing kept, not tried again. */
void runner_collect_counters(run_ctx *c, record_point *p, const int32_t *prompts, const int64_t *lens);

#endif
