/* GPU ceilings: the theoretical figures from the device's attributes (plain C, tested with A100,
 * H100 and H200 values), the spec sheet matched by device name (data/devices.json), and the
 * measured ones (gpu_ceilings.cu: a device-to-device copy kernel and a read kernel with the L2
 * flushed between timings for bandwidth, a large cuBLAS BF16 GEMM for the tensor peak), driven by
 * `xfprof machine --device cuda`. CUDA 13 removed clockRate / memoryClockRate from cudaDeviceProp:
 * the attributes come from cudaDeviceGetAttribute. */
#ifndef XF_GPU_CEILINGS_H
#define XF_GPU_CEILINGS_H

#include <stdint.h>

#include "core/device.h"
#include "core/status.h"

/* What cudaDeviceGetAttribute and cudaGetDeviceProperties say about a device. */
typedef struct gpu_attrs {
    char name[256];         /* cudaDeviceProp.name: "NVIDIA H100 80GB HBM3" */
    int cc_major, cc_minor; /* compute capability */
    int sm_count;           /* cudaDevAttrMultiProcessorCount */
    int clock_khz;          /* cudaDevAttrClockRate: peak SM clock, kHz */
    int mem_clock_khz;      /* cudaDevAttrMemoryClockRate: peak memory clock, kHz */
    int bus_width_bits;     /* cudaDevAttrGlobalMemoryBusWidth */
    int l2_bytes;           /* cudaDevAttrL2CacheSize */
    int64_t total_mem_bytes;/* cudaDeviceProp.totalGlobalMem */
} gpu_attrs;

/* Theoretical peaks from the attributes. */
typedef struct gpu_theory {
    double bandwidth_Bps;    /* 2 (double data rate) * mem_clock * bus_width / 8 */
    double fp32_flops;       /* sm_count * fp32_lanes * 2 (FMA) * clock */
    double tensor16_flops;   /* sm_count * dense FP16/BF16 tensor FLOP per clock per SM * clock; 0 unknown */
    int fp32_lanes_per_sm;   /* FP32 units per SM for this compute capability */
    int tensor16_per_clk_sm; /* dense FP16/BF16 tensor FLOP per clock per SM (FP32 accumulate) */
} gpu_theory;

/* Computes *out from a. XF_EINVAL when a field is not positive or the compute capability is
 * older than 7.0 (xfprof targets sm_80 and sm_90; other Ampere/Ada/Hopper/Blackwell parts get
 * FP32 figures, and tensor16 only where the per-SM rate is known: 8.0, 9.0). */
xf_status gpu_ceilings_theory(const gpu_attrs *a, gpu_theory *out);

/* The built-in spec sheet id for a CUDA device name (and its memory, which tells the A100 40GB
 * from the 80GB): "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "l4", "rtx-4090";
 * NULL when the name is not known. Static string. */
const char *gpu_spec_id(const char *device_name, int64_t total_mem_bytes);

/* Looks up the spec sheet of the device (gpu_spec_id + device_lookup). XF_EUNSUPPORTED naming the
 * device when there is no sheet for it (then use the theoretical or measured ceilings). */
xf_status gpu_spec_for(const gpu_attrs *a, device_spec *out);

/* What the microbenchmarks measured (gpu_ceilings.cu). */
typedef struct gpu_measured {
    double copy_Bps;         /* device-to-device copy kernel: (bytes read + bytes written) / time */
    double read_Bps;         /* read-only kernel, L2 flushed before each timing */
    double tensor16_flops;   /* cuBLAS BF16 GEMM, FP32 accumulate: 2*M*N*K / time */
    double fp32_flops;       /* FMA chain kernel */
    int64_t bytes;           /* working set of the bandwidth kernels */
    int64_t gemm_n;          /* M = N = K of the GEMM */
    int reps;
} gpu_measured;

/* A device_spec for the measured ceilings: bandwidth = the larger of copy and read, tensor16 and
 * fp32 as measured, memory and L2 from the attributes, fp8/int8 from the spec sheet `sheet` when
 * given (NULL: 0), source naming what was measured. */
void gpu_measured_spec(const gpu_attrs *a, const gpu_measured *m, const device_spec *sheet, device_spec *out);

/* ---- Device side (gpu_ceilings.cu where built with CUDA; otherwise XF_EUNSUPPORTED saying the
 * build has no CUDA). */

/* Reads the attributes of device `ordinal`. XF_EUNSUPPORTED when there is no driver or device. */
xf_status gpu_attrs_query(int ordinal, gpu_attrs *out);

/* Runs the microbenchmarks on device `ordinal` with a working set of `bytes` (0: 8 x L2, at least
 * 1 GiB) and a GEMM of n (0: 8192), `reps` timed repetitions (0: 10), median kept. */
xf_status gpu_ceilings_measure(int ordinal, int64_t bytes, int64_t gemm_n, int reps, gpu_measured *out);

/* Everything `xfprof machine --device cuda` needs in one call: attributes, theory, spec sheet
 * (when the name is known), the microbenchmarks, and the measured device_spec (*out, to be saved
 * with device_spec_to_json). attrs/theory/measured may be NULL. XF_EUNSUPPORTED without a device. */
xf_status gpu_machine_measure(int ordinal, device_spec *out, gpu_attrs *attrs, gpu_theory *theory, gpu_measured *measured);

/* Known kernels for the probe checks: a copy of `bytes` (reads `bytes`, writes `bytes`) and a BF16
 * GEMM m x n x k (2·m·n·k FLOPs) on device `ordinal`. The job's buffers (and the GEMM's cuBLAS
 * handle) are allocated and initialised by _init, synchronised, so that nothing but the kernel
 * runs inside the range a probe measures: gpu_ceilings_job_run launches it and synchronises;
 * whatever probe is active (CUPTI activity or a counter pass) sees only that kernel.
 * *out is the caller's: gpu_ceilings_job_free (NULL is fine). XF_EUNSUPPORTED without a device. */
typedef struct gpu_ceilings_job gpu_ceilings_job;
xf_status gpu_ceilings_job_copy_init(gpu_ceilings_job **out, int ordinal, int64_t bytes);
xf_status gpu_ceilings_job_gemm_init(gpu_ceilings_job **out, int ordinal, int64_t m, int64_t n, int64_t k);
xf_status gpu_ceilings_job_run(gpu_ceilings_job *j);
void gpu_ceilings_job_free(gpu_ceilings_job *j);

#endif
