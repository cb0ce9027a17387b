/* The CUPTI probe (C interface; cupti_probe.cpp with CUDA, cupti_stub.c without). libcupti is
 * loaded with dlopen at cupti_probe_init, so a binary without it still starts.
 *
 * Two uses, never mixed in one run (times come from runs without counter collection):
 *  - activity: per-kernel start/end/name (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, records
 *    CUpti_ActivityKernel10) attributed to op ranges through external correlation ids pushed at
 *    range_begin (the RUNTIME and DRIVER kinds are enabled as well: CUPTI emits the external
 *    correlation records only in front of API records); dropped records are checked at flush.
 *  - counters: the Range Profiler with user ranges and user replay, one range per op (named by
 *    cupti_range_name). The caller re-runs the same work from the same state until
 *    cupti_probe_pass_end says every pass was submitted:
 *        for (set = 0; set < CUPTI_METRIC_SETS; set++) {
 *            cupti_probe_pass_begin(p, set);         // first call of a set configures it
 *                                                    // (in a range profiler object of its own)
 *            do { reset model; run prefill + decode steps with the probe; }
 *            while (cupti_probe_pass_end(p, &done) == XF_OK && !done);
 *        }
 *    then cupti_probe_results(). Set 0: time, DRAM read/write, L2, tensor; set 1: FP32 SASS ops.
 * Every range also pushes an NVTX range of the same name, so Nsight Systems shows xfprof's ops. */
#ifndef XF_CUPTI_PROBE_H
#define XF_CUPTI_PROBE_H

#include "core/status.h"
#include "probes/cupti_host.h"
#include "core/probe.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cupti_mode { CUPTI_MODE_ACTIVITY = 0, CUPTI_MODE_COUNTERS = 1 } cupti_mode;

#define CUPTI_METRIC_SETS 2

typedef struct cupti_probe cupti_probe;

/* Opens CUPTI on device `ordinal`. XF_EUNSUPPORTED when the build has no CUDA, there is no device,
 * or libcupti cannot be loaded, and for every CUPTI answer cupti_result_status() classes as "not
 * available here" (no profiling permission: the message is cupti_privileges_hint(), and the caller
 * falls back to activity mode; not supported on this device, driver or virtualization). max_ranges: most op ranges in one pass (0: 4096).
 * *out is the caller's: cupti_probe_free. */
xf_status cupti_probe_init(cupti_probe **out, int ordinal, cupti_mode mode, int max_ranges);
void cupti_probe_free(cupti_probe *p); /* NULL is fine */

/* The probe table for probe_set (range_begin / range_end push and pop the external id, the
 * profiler range and the NVTX range). The probe stays owned by the caller: the table's free is a
 * no-op. */
probe cupti_probe_as_probe(cupti_probe *p);

/* Activity: flushes the buffers and attributes every kernel seen since init (or the last flush)
 * to its range. XF_EIO (cupti_check_dropped's message) when records were dropped; *out is still
 * filled then. *out is the caller's: cupti_attribution_free. */
xf_status cupti_probe_flush(cupti_probe *p, cupti_attribution *out);

/* Counters: see the header comment. */
xf_status cupti_probe_pass_begin(cupti_probe *p, int metric_set);
xf_status cupti_probe_pass_end(cupti_probe *p, int *all_passes_done);

/* Counters: the values per range after every set ran. *names and *values are (n) arrays the
 * caller frees with free(); names are cupti_range_name strings, parsed back by the caller with
 * cupti_range_parse. Metrics a set did not return stay NaN. */
xf_status cupti_probe_results(cupti_probe *p, int *n, probe_range **ranges, cupti_metric_values **values);

/* A probe that only pushes NVTX ranges named like the CUPTI ranges, so that a user's Nsight Systems
 * timeline shows xfprof's ops in runs without CUPTI. Stateless; no-ops in builds without CUDA
 * (NVTX does nothing unless a tool injects itself). */
probe cupti_nvtx_probe(void);

/* Counters: a range of any name (e.g. "calibration/gemm" around the tensor-unit calibration GEMM)
 * while a pass is open, and its values afterwards (XF_EINVAL when no range has that name). */
void cupti_probe_push_named(cupti_probe *p, const char *name);
void cupti_probe_pop_named(cupti_probe *p);
xf_status cupti_probe_named_values(cupti_probe *p, const char *name, cupti_metric_values *out);

#ifdef __cplusplus
}
#endif

#endif
