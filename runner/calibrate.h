/* The calibration run: measures, on this machine, the efficiency the reference engine's own
 * kernels achieve per op family, weight dtype, memory tier and shape (core/calibration.h), by
 * running the runner (the CPU backend's op entry points, the same probes as `xfprof run`) on a
 * grid of synthetic models whose shapes are none of the presets':
 *   - in-cache models (weights at most 3/4 of the last-level cache): prompts 32 and 128 (GEMMs at
 *     M = 32 and 128, prefill attention, decode attention at contexts about 35 and 131, every
 *     element-wise op) and their decode projections;
 *   - the in-cache -> DRAM transition of the decode projections (gemv, keyed by the model's weights
 *     over the LLC): a short prompt and decode steps on a model of about the LLC's size (d_model
 *     512) and, beyond it, (1.5x the LLC and at least 512 MiB: d_model 1280 and 2560, at
 *     prompts 32 and 128: the prefill GEMMs of the DRAM tier too).
 * Three shapes (d_model 512/1280/2560, d_ff 1408/3456/6912, query heads per KV head 1/4/16) at
 * each weight dtype asked for; concurrent pulses off; each op's time is the median of the
 * repetitions, as `run` records it. --quick: the two smaller shapes in cache only, one
 * repetition (for tests). On a small last-level cache (32 MiB) the cache-sized models take a
 * vocabulary whose embeddings fit a quarter of it, and a shape no layer of which fits measures
 * every family beyond it (--quick: one layer from DRAM). Before the grid: the OpenMP spin in force (omp_spin_in_force) and the fork
 * cost of an empty parallel region under it (probes/omp_fork.h, after a short and a long serial
 * gap), recorded (the fork term, off in the table it makes: calib_table.fork_term). Without `quiet` it prints each
 * stage's seconds. */
#ifndef XF_CALIBRATE_H
#define XF_CALIBRATE_H

#include "core/calibration.h"
#include "core/device.h"
#include "core/dtype.h"

typedef struct calibrate_opts {
    int threads;              /* >= 1 */
    int quick;                /* the test grid */
    const xf_dtype *wdtypes;  /* (n_wdtypes) fp32, bf16, int8 */
    int n_wdtypes;
    int quiet;                /* no progress lines */
    calib_table *fork_alt;    /* NULL, or also filled (init'ed by the call, caller frees) with the same measurements'
                                 entries under the fork term (fork_term 1; the main table has it off), for the
                                 A/B of bench/bench_predict.sh */
} calibrate_opts;

/* Runs the grid against `machine` (the ceilings `xfprof machine` just measured, which the runner
 * also reads from the machine file) and fills *out (init'ed by this call; free with
 * calib_table_free), merged. The table's reference ceilings are machine's. */
xf_status calibrate_measure(const calibrate_opts *o, const device_spec *machine, calib_table *out);

/* 1: from now on glibc's malloc serves every size from the heap and keeps what is freed there
 * (M_MMAP_MAX 0, M_TRIM_THRESHOLD INT_MAX), so one model's set-up reuses the pages the one before
 * freed instead of faulting in fresh zeroed ones (calibrate_measure, around its grid); 0: glibc's
 * defaults again (M_MMAP_MAX 65536, M_TRIM_THRESHOLD 128 KiB; the dynamic mmap threshold stays
 * off) and the heap trimmed. Process-wide; not thread-safe against other allocations' tuning. */
void calibrate_keep_heap(int on);

#endif
