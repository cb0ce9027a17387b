/* The host-side logic of the CUPTI probe, in plain C with no CUDA dependency, so that it is built
 * and tested everywhere (tests/test_cupti_host.c) on recorded inputs: range names and external
 * correlation ids <-> (phase, layer, op, step); kernel activity records -> per-range kernel times;
 * Range Profiler metric values -> record counters, bytes and FLOPs; missing metrics; dropped
 * records; the tensor metric's unit calibration; metric names against the chip's list.
 * probes/cupti_probe.cpp feeds it from the real CUPTI calls. */
#ifndef XF_CUPTI_HOST_H
#define XF_CUPTI_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "core/record.h"
#include "core/status.h"
#include "core/probe.h"

/* ---- Range names: "prefill/L3/qkv/s0", "decode/G/lm_head/s7" (G = outside the layers). The
 * Range Profiler's user ranges and NVTX ranges carry these names. */

/* Writes r's name into buf (at least CUPTI_RANGE_NAME_MAX bytes); returns buf. */
#define CUPTI_RANGE_NAME_MAX 64
char *cupti_range_name(const probe_range *r, char *buf, size_t len);

/* Parses a name written by cupti_range_name. XF_EPARSE naming the bad part otherwise. */
xf_status cupti_range_parse(const char *name, probe_range *out);

/* ---- External correlation ids: the probe pushes one id per op range before launching its
 * kernels, CUPTI tags each kernel with it. The id packs the range; bit 63 marks it as ours.
 * Limits: layer < 65535, step < 2^38. */
uint64_t cupti_extid_encode(const probe_range *r);
/* 0 when id is not one of ours (then *out is untouched). */
int cupti_extid_decode(uint64_t id, probe_range *out);

/* ---- Kernel activity -> per-range kernel time. */

/* What the probe keeps of one CUpti_ActivityKernel10 record. */
typedef struct cupti_kernel_rec {
    uint64_t start_ns, end_ns;
    uint32_t correlation_id;
    char name[96]; /* demangled-or-not kernel name, truncated */
} cupti_kernel_rec;

/* One CUpti_ActivityExternalCorrelation record: correlation id -> our external id. */
typedef struct cupti_extcorr_rec {
    uint32_t correlation_id;
    uint64_t external_id;
} cupti_extcorr_rec;

/* Kernel time per range. */
typedef struct cupti_range_time {
    probe_range range;
    int n_kernels;
    double kernel_s;   /* sum of kernel durations (end - start) */
    double span_s;     /* last end - first start: includes gaps between the range's kernels */
    uint64_t first_start_ns, last_end_ns;
} cupti_range_time;

typedef struct cupti_attribution {
    int n;                  /* ranges found */
    cupti_range_time *items;/* (n) in order of first kernel start; owned, cupti_attribution_free */
    int64_t unattributed;   /* kernels with no external id of ours (e.g. cuBLAS setup, our own copies) */
    int64_t bad_records;    /* end < start, or zero timestamps */
} cupti_attribution;

/* Attributes kernels to ranges through the external correlation records. Records may arrive in
 * any order. XF_ENOMEM on allocation failure. *out is the caller's: cupti_attribution_free. */
xf_status cupti_attribute(const cupti_kernel_rec *k, int64_t n_k, const cupti_extcorr_rec *e, int64_t n_e,
                          cupti_attribution *out);
void cupti_attribution_free(cupti_attribution *a); /* NULL is fine */

/* The range's entry, or NULL. */
const cupti_range_time *cupti_attribution_find(const cupti_attribution *a, const probe_range *r);

/* Dropped activity records: XF_OK when none were dropped; otherwise XF_EIO with a message saying
 * how many, that per-op kernel times undercount, and how to enlarge the buffer. */
xf_status cupti_check_dropped(uint64_t dropped, size_t buffer_bytes);

/* ---- Range Profiler metrics. */

/* The metrics xfprof asks for, in this order; pass 0 holds the first CUPTI_PASS0_METRICS. */
enum {
    CUPTI_M_TIME = 0,   /* gpu__time_duration.sum, ns */
    CUPTI_M_DRAM_READ,  /* dram__bytes_read.sum */
    CUPTI_M_DRAM_WRITE, /* dram__bytes_write.sum */
    CUPTI_M_L2,         /* lts__t_bytes.sum */
    CUPTI_M_TENSOR,     /* sm__ops_path_tensor_src_bf16_dst_fp32.sum, in calibrated units */
    CUPTI_M_FADD,       /* smsp__sass_thread_inst_executed_op_fadd_pred_on.sum (pass 1) */
    CUPTI_M_FMUL,
    CUPTI_M_FFMA,
    CUPTI_M_COUNT
};
#define CUPTI_PASS0_METRICS 5
extern const char *const cupti_metric_names[CUPTI_M_COUNT];

/* One range's metric values; NaN = the profiler did not return it (missing). */
typedef struct cupti_metric_values {
    double v[CUPTI_M_COUNT];
} cupti_metric_values;

void cupti_metric_values_clear(cupti_metric_values *m); /* all NaN */

/* Sets value `name` (one of cupti_metric_names); XF_EINVAL for a name not in the list, for a
 * negative or non-finite value. */
xf_status cupti_metric_values_set(cupti_metric_values *m, const char *name, double value);

/* Calibration: the tensor metric counted `metric_value` on a GEMM of 2·M·N·K FLOPs; *flops_per_unit
 * = 2MNK / value. The answer must be a power of two within 2% (the metric counts whole
 * instructions' worth of work); XF_EINVAL with the ratio otherwise, or when value <= 0. */
xf_status cupti_tensor_calibrate(double metric_value, int64_t m, int64_t n, int64_t k, double *flops_per_unit);

/* What the counters say about one op. */
typedef struct cupti_op_counts {
    int have_bytes;     /* DRAM read and write both present */
    double dram_bytes;  /* read + write */
    int have_flops;     /* tensor (with a calibration) and the three FP32 metrics present */
    double tensor_flops;/* tensor metric * flops_per_unit */
    double fp32_flops;  /* fadd + fmul + 2 * ffma (thread-level instructions) */
    double flops;       /* tensor_flops + fp32_flops */
    double gpu_time_s;  /* gpu__time_duration / 1e9, NaN when missing */
    int n_missing;      /* metrics the profiler did not return */
} cupti_op_counts;

/* flops_per_unit <= 0 means "not calibrated": the tensor FLOPs are then unknown (have_flops 0). */
void cupti_op_counts_of(const cupti_metric_values *m, double flops_per_unit, cupti_op_counts *out);

/* Appends the eight metrics to op->counters (supported = 0 for missing ones, written as
 * "unsupported"), and, when DRAM bytes are present, op->measured_bytes and
 * op->bytes_from_counters = 1. Time samples are not touched: times come from runs without
 * counter collection. */
void cupti_fill_record_op(const cupti_metric_values *m, double flops_per_unit, record_op *op);

/* ---- Metric names against a chip's list (../shared/cupti/list_<chip>.txt: lines "<type> <name>",
 * name possibly prefixed by "UNIT.Group."; type 0 = counter, 1 = ratio, 2 = throughput). A
 * counter accepts the rollups .sum .avg .min .max; a ratio .ratio .pct; a throughput .pct_of_peak_*
 * and the rollups. Returns 1 when `metric` (with its rollup) is available on that chip. */
int cupti_metric_in_list(const char *list_text, const char *metric);

/* The message shown when the Range Profiler reports CUPTI_ERROR_INSUFFICIENT_PRIVILEGES. */
const char *cupti_privileges_hint(void);

/* How a CUptiResult (its numeric value as in CUDA 13's cupti_result.h; cupti_probe.cpp checks the
 * values with static_asserts) maps onto xf_status: XF_OK for CUPTI_SUCCESS; XF_EUNSUPPORTED when
 * CUPTI cannot profile in this setup (no permission, not supported on this device / chip / driver,
 * virtualized / MIG / confidential-computing GPU, another profiler or CUPTI client attached, the
 * counters busy): the caller degrades (counters off, activity from the host clock); XF_EIO for the
 * rest (a bug, or a broken installation). *privileges (may be NULL) is set to 1 when the cause is
 * missing profiling permission (show cupti_privileges_hint), else 0. */
xf_status cupti_result_status(int cupti_result, int *privileges);

#endif
