/* Measured CPU ceilings: STREAM-like bandwidth (read, copy, triad) over a working set well
 * above the last-level cache and once inside it, FP32 peak (an FMA-bound register-blocked
 * kernel: AVX-512, AVX2+FMA or portable, picked at run time) and BF16 peak where the CPU has
 * AVX512_BF16 (vdpbf16ps), each with the given number of threads (pthreads; every thread works
 * on its own first-touched slice), best of N repetitions.
 *
 * Read runs 8 interleaved streams per thread (as a GEMV reads several weight rows at once: one
 * stream per core leaves DRAM bandwidth unused on server cores); copy and triad are STREAM's.
 * Bytes counted as STREAM does: read = n elements read; copy = n read + n written; triad =
 * 2n read + n written (4-byte floats); write-allocate traffic is not counted.
 * `xfprof machine` saves the result as a devices file (data/devices.json's format) that `run`
 * and `predict --device cpu` read. */
#ifndef XF_CEILINGS_H
#define XF_CEILINGS_H

#include <stdint.h>

#include "core/device.h"

typedef enum ceilings_kernel { CEIL_READ = 0, CEIL_COPY, CEIL_TRIAD, CEIL_KERNEL_COUNT } ceilings_kernel;

const char *ceilings_kernel_name(ceilings_kernel k); /* "read", "copy", "triad" */

/* Arrays a kernel uses (1 read, 2 copy, 3 triad). */
int ceilings_kernel_arrays(ceilings_kernel k);

/* Bytes one sweep over n elements per array moves: 4n (read), 8n (copy), 12n (triad). */
double ceilings_kernel_bytes(ceilings_kernel k, int64_t n);

/* Runs one sweep of kernel k over n floats: read sums a (returned), copy a = b, triad
 * a = b + s * c (s = 3). Arrays unused by the kernel may be NULL. Uses the widest SIMD the CPU
 * has. Returns the read sum (0 for copy and triad). */
double ceilings_kernel_run(ceilings_kernel k, float *a, const float *b, const float *c, int64_t n);

/* The SIMD flavour picked at run time: "avx512", "avx2" or "portable". */
const char *ceilings_isa(void);

typedef struct ceilings_opts {
    int threads;           /* >= 1 */
    int quick;             /* 2x LLC instead of 4x, 3 repetitions instead of 5 */
    int reps;              /* best-of-N; 0 = default */
    double dram_ws_bytes;  /* working set for the DRAM figures; 0 = max(4 x LLC, 256 MiB), capped at 1/4 of RAM */
    double cache_ws_bytes; /* working set inside the LLC; 0 = LLC / 4 */
    int skip_compute;      /* bandwidth only (tests) */
    int skip_dram;         /* no DRAM-sized working set (tests) */
} ceilings_opts;

typedef struct ceilings_bw {
    double Bps;            /* best of reps */
    double bytes_per_rep;  /* bytes one timed repetition moves (sweeps * kernel bytes) */
    double best_s;         /* time of the best repetition */
    int64_t n_elems;       /* floats per array */
    int sweeps;            /* sweeps per timed repetition */
    int64_t huge_eligible; /* bytes of the arrays allocated on huge pages (core/hugemem.h: 2 MiB and up) */
    int64_t huge_bytes;    /* of those, backed by huge pages after the sweeps (/proc/self/smaps); -1 unknown */
} ceilings_bw;

typedef struct ceilings_result {
    int threads;
    int reps;
    double llc_bytes;              /* from sysfs; 0 unknown */
    double dram_ws_bytes, cache_ws_bytes;
    ceilings_bw dram[CEIL_KERNEL_COUNT];
    ceilings_bw cache[CEIL_KERNEL_COUNT];
    double fp32_flops;             /* best of reps */
    char fp32_isa[16];
    double bf16_flops;             /* 0 when the CPU lacks AVX512_BF16 */
    char bf16_isa[24];
    double vnni_int8_ops;          /* vpdpbusd, int8 multiply-adds x 2 per second; 0 without AVX512_VNNI */
    double amx_bf16_flops;         /* AMX tile peaks (tdpbf16ps, tdpbssd); 0 when absent or not granted */
    double amx_int8_ops;           /* int8 multiply-adds x 2 per second */
    char amx_note[256];            /* what ran, or why not (no AMX; the OS refused the tile state) */
    double seconds;                /* wall time of the whole measurement */
} ceilings_result;

/* Whether the DRAM read's arrays were on huge pages, as core/hugemem.h's hugemem_describe says it
 * ("1200.0 MiB of 1200.0 MiB in huge pages (THP madvise)", "not granted ..."), into buf. */
void ceilings_huge_describe(const ceilings_result *r, char *buf, size_t len);

/* Measures one kernel: `ws_bytes` total over its arrays, `threads` threads, best of `reps`
 * timed repetitions, each at least ~20 ms (several sweeps when the set is small). */
xf_status ceilings_bandwidth(ceilings_kernel k, double ws_bytes, int threads, int reps, ceilings_bw *out);

/* FP32 FMA peak in FLOP/s over `threads` threads, best of reps; isa gets the variant used. */
xf_status ceilings_fp32_peak(int threads, int reps, double *flops, char *isa, size_t isa_len);

/* BF16 dot-product peak (vdpbf16ps: 64 FLOP per instruction); XF_EUNSUPPORTED without
 * AVX512_BF16. */
xf_status ceilings_bf16_peak(int threads, int reps, double *flops);

/* AVX512-VNNI int8 peak (vpdpbusd: 128 ops per instruction) in ops/s; XF_EUNSUPPORTED without
 * AVX512_VNNI. */
xf_status ceilings_vnni_peak(int threads, int reps, double *ops);

/* AMX BF16 (tdpbf16ps) and INT8 (tdpbssd) tile peaks over `threads` threads, best of reps, after
 * asking the OS for the tile state (arch_prctl ARCH_REQ_XCOMP_PERM, once per process).
 * XF_EUNSUPPORTED, with the reason in xf_error_msg(), when the CPU has no AMX or the OS refuses. */
xf_status ceilings_amx_peak(int threads, int reps, double *bf16_flops, double *int8_ops);

/* Last-level cache size from /sys/devices/system/cpu/cpu0/cache (largest level); 0 unknown. */
double ceilings_llc_bytes(void);

/* Everything above, as `xfprof machine` does. */
xf_status ceilings_measure(const ceilings_opts *o, ceilings_result *out);

/* A device_spec from a result: kind "cpu", name "cpu", measured = 1, bandwidth = DRAM read,
 * cache_bandwidth = in-cache read, peaks fp32 (and tensor16 = bf16 when measured), memory =
 * physical RAM, description = the CPU model, source "measured by xfprof machine on <host>
 * <date>, <threads> threads". */
void ceilings_to_device(const ceilings_result *r, device_spec *out);

/* The per-machine file: $XFPROF_MACHINE_FILE, else $HOME/.cache/xfprof/machine.json. */
xf_status ceilings_machine_path(char *buf, size_t len);

/* Writes {"format":"xfprof-devices","version":1,"devices":[d]} atomically to path (creating
 * its folder); `r` (may be NULL) adds a "measured_detail" object with every figure. */
xf_status ceilings_save(const device_spec *d, const ceilings_result *r, const char *path);

/* Loads the first device of a machine file. XF_EIO when it does not exist. */
xf_status ceilings_load(const char *path, device_spec *out);

/* OpenBLAS (DYNAMIC_ARCH) picks its kernels by CPU model; on a CPU it does not know (e.g. a
 * newer Xeon in a VM) it falls back to generic SSE3 "Prescott" kernels, 6x slower at SGEMM. The
 * choice is made when the library loads, so only the environment of a new process can change it.
 * Returns the OPENBLAS_CORETYPE this CPU warrants ("SkylakeX" with AVX-512, "Haswell" with
 * AVX2+FMA) when OpenBLAS picked a weaker fallback and OPENBLAS_CORETYPE is unset; NULL
 * otherwise. Static string. */
const char *ceilings_blas_coretype_fix(void);

/* When OPENBLAS_CORETYPE is set in the environment to a core without AVX-512 kernels (Haswell, Zen,
 * ...) on a CPU with AVX-512, a line saying so into buf and 1 (xfprof keeps a user's setting; this
 * sandbox's environment set Haswell, and fp32 prefill GEMMs ran 0.47x OpenBLAS's own choice on a
 * Zen 5: docs/performance.md); else 0 and buf empty. */
int ceilings_blas_coretype_weak(char *buf, size_t len);

/* OpenBLAS as loaded, for records and `xfprof machine`: its configuration, the core whose kernels
 * it runs, and ceilings_blas_coretype_weak's line where it has one. Into buf (224 bytes hold it). */
void ceilings_blas_describe(char *buf, size_t len);

/* Process-level, for main() only: restarts the program once (execv of /proc/self/exe with argv,
 * argv[0] first) with OPENBLAS_CORETYPE set when ceilings_blas_coretype_fix says so and with
 * GOMP_SPINCOUNT (probes/omp_spin.h: omp_spin_choose; XFPROF_OMP_SPIN_WHY says why)
 * when neither it nor OMP_WAIT_POLICY is set, both read by the libraries when they load. Values
 * the user set are kept. Returns when no restart is needed (or it failed, said on stderr). */
void ceilings_env_reexec(int argc, char **argv);

/* The CPU model name from /proc/cpuinfo ("unknown CPU" otherwise). */
void ceilings_cpu_model(char *buf, size_t len);

/* The GPU machine file (`xfprof machine --device cuda` writes it, `xfprof run --device cuda`
 * reads it): $XFPROF_GPU_MACHINE_FILE, else the CPU machine file's path (ceilings_machine_path)
 * with ".json" replaced by "-cuda.json" (~/.cache/xfprof/machine-cuda.json), so the CPU's and
 * the GPU's ceilings never overwrite each other. */
xf_status ceilings_gpu_machine_path(char *buf, size_t len);

/* Concurrent ceilings: a short bandwidth pulse and a short FMA pulse, run before, between and after
 * a run's repetitions so that each repetition is judged against the ceiling measured around it
 * (a busy machine lowers it). The read pulse uses the same kernel and threads as the machine's
 * read ceiling: in-cache (in_cache = 1) it sweeps 3 MiB per thread as often as its budget allows;
 * DRAM, it reads its array once, flushed from the caches first (clflushopt, else clflush; not
 * timed). Two thirds of a pulse's budget read, one
 * third FMA, sized at the machine's quiet rates (sizing at a slow pulse's rates would shrink the
 * next pulse until its own overhead is all it measures; the runner scales the budget it asks
 * for instead). */
typedef struct ceilings_pulser ceilings_pulser;

typedef struct ceilings_pulse {
    double bandwidth_Bps; /* read bandwidth of the pulse */
    double fp32_flops;    /* FP32 FMA rate of the pulse */
    double seconds;       /* wall time of the pulse (its overhead) */
} ceilings_pulse;

/* A pulser for pulses of up to max_budget_s (1e-4 .. 0.1 s) at the quiet figures given (the
 * machine file's bandwidth of the chosen kind and FP32 peak): in-cache, allocates and first-touches
 * its array; DRAM, ceilings_pulser_reserve does. *out: free with ceilings_pulser_free. XF_EINVAL
 * for bad arguments, XF_ENOMEM. */
xf_status ceilings_pulser_init(int threads, int in_cache, double bw_guess_Bps, double fp32_guess_flops, double max_budget_s,
                               ceilings_pulser **out);

/* DRAM pulser: allocates and first-touches the bytes a pulse of budget_s (capped at the max; <= 0:
 * the max) reads, if it holds fewer; a no-op in-cache. The runner calls it once a point, outside
 * the pulses' time: sized by the run's budget, not the max (a 10 ms pulse reads 194 MB at 29 GB/s,
 * whose first touch took ~1 s of a fresh process here). XF_ENOMEM. */
xf_status ceilings_pulser_reserve(ceilings_pulser *p, double budget_s);

/* One pulse of about budget_s (capped at the max; <= 0: the max): read bandwidth then FMA rate
 * (reserving the DRAM array first where it is too small). */
xf_status ceilings_pulser_run(ceilings_pulser *p, double budget_s, ceilings_pulse *out);

void ceilings_pulser_free(ceilings_pulser *p); /* NULL is fine */

#endif
