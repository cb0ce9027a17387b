/* Importers: other engines' traces -> xfprof records (kind "import"). They fill the ops' time,
 * FLOPs and compulsory bytes, the model and workload the trace shows; the caller (cli/) sets the
 * device and classifies (analyzers/roofline). Depend on core/ only; know nothing of reports.
 * Every input is untrusted: errors are XF_EINVAL / XF_EPARSE / XF_EFORMAT with a message that says
 * what was wrong and what to do; *out is then empty. docs/import.md describes the rules. */
#ifndef XF_IMPORTER_H
#define XF_IMPORTER_H

#include <stddef.h>
#include <stdint.h>

#include "core/record.h"
#include "core/status.h"

/* The largest file an importer reads unless told otherwise (--max-size). */
#define IMPORT_DEFAULT_MAX_BYTES ((int64_t)1 << 30)

/* A byte count an op may carry: records hold them as 64-bit counts (docs/record.md), so an input
 * whose shapes or counters sum past 2^63 is refused (XF_EINVAL naming `source` and `what`)
 * rather than written as a record that no reader accepts. */
static inline xf_status import_check_bytes(const char *source, const char *what, double bytes) {
    if (bytes < 0x1p63) return XF_OK;
    return xf_errorf(XF_EINVAL, "%s: %s: %g bytes is beyond a 64-bit byte count (2^63 = 9.22e18): the input is corrupt",
                     source, what, bytes);
}

typedef struct import_options {
    int64_t max_bytes; /* files larger than this are refused before reading; 0 = the default */
} import_options;

/* What the import accounted for, beside the record (also written into the record's env). */
typedef struct import_stats {
    char time_level[96];     /* which events own the time: "cpu_op (outermost)" or "kernel" */
    double window_s;         /* first event start to last event end (the traced window) */
    double busy_s;           /* time of the events that own time: sum over the record's ops */
    double idle_s;           /* window minus busy (host time outside any op: Python, sync, idle) */
    double unattributed_s;   /* kernels joined to no cpu_op (kept as ops "other", source "unattributed") */
    double matrix_flops;     /* FLOPs of the matrix ops (mm, addmm, bmm, ...) over the whole trace */
    int64_t n_events;        /* trace events read */
    int64_t n_ops;           /* cpu_op events */
    int64_t n_kernels;       /* GPU kernel events */
    int64_t n_unknown;       /* outermost ops with no formula (class unknown) */
    double unknown_s;        /* their time */
    int64_t n_steps[2];      /* prefill and decode steps found */
    int have_modules;        /* 1: module names (with_stack=True) gave layers and op kinds */
    int pattern_layers;      /* 1: no module names; layers came from the repeating pattern of the steps */
} import_stats;

/* A torch.profiler Chrome trace (prof.export_chrome_trace) read streaming from `path`.
 * record_shapes=True is required (refused with that advice otherwise). On success *out is a
 * record of kind "import" (free with record_free) and *st (may be NULL) is filled. */
xf_status import_torch_trace_file(const char *path, const import_options *o, record *out, import_stats *st);

/* The same from memory (tests, fuzzing); `source` names the input in messages. */
xf_status import_torch_trace_buffer(const char *buf, size_t len, const char *source, record *out, import_stats *st);

/* Kernel names -> op kinds (data/kernel_ops.json, format "xfprof-kernel-map"): shell glob
 * patterns tried in order, first match wins. */
typedef struct import_kernel_map {
    int n;
    char (*pattern)[128]; /* (n) */
    op_kind *kind;        /* (n) */
} import_kernel_map;

/* Parses a map; `source` names it in messages. Appends to *m (zeroed the first time). */
xf_status import_kernel_map_parse(const char *json_text, const char *source, import_kernel_map *m);

/* The user's file (may be NULL) first, then data/kernel_ops.json from device_data_dir(). */
xf_status import_kernel_map_load(const char *user_file, import_kernel_map *m);

/* OP_OTHER when no pattern matches. */
op_kind import_kernel_map_find(const import_kernel_map *m, const char *kernel);

void import_kernel_map_free(import_kernel_map *m); /* NULL and empty maps are fine */

/* An Nsight Compute CSV (ncu --csv --page raw --metrics ..., the columns docs/import.md names):
 * one op per kernel name, its launches the samples; time from gpu__time_duration.sum, bytes from
 * dram__bytes_read.sum + dram__bytes_write.sum (bytes_source counters), FLOPs from the SASS FP
 * instruction counts (an FMA counts 2) and the tensor-pipe op counts. Missing columns are named. */
xf_status import_ncu_csv_buffer(const char *buf, size_t len, const char *source, const import_kernel_map *m, record *out,
                                import_stats *st);
xf_status import_ncu_csv_file(const char *path, const import_options *o, const import_kernel_map *m, record *out,
                              import_stats *st);

/* An Nsight Systems SQLite export (nsys export --type sqlite): the kernel activity table
 * (CUPTI_ACTIVITY_KIND_KERNEL, names through StringIds), joined by correlationId to the runtime
 * call (CUPTI_ACTIVITY_KIND_RUNTIME) that launched it; the innermost NVTX push/pop or start/end
 * range (NVTX_EVENTS) around that call on its thread is the op, each range instance a sample, else
 * the kernel's name. An export has no FLOPs or bytes: every op's class is unknown. */
xf_status import_nsys_sqlite_file(const char *path, const import_kernel_map *m, record *out, import_stats *st);

#endif
