/* GPU ceiling arithmetic and spec-sheet match (plain C; the measuring kernels are in
 * gpu_ceilings.cu). */
#include "probes/gpu_ceilings.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* FP32 lanes per SM: Volta, Turing and GA100 have 64; GA10x, Ada, Hopper and Blackwell 128. */
static int fp32_lanes(int major, int minor) {
    if (major == 7) return 64;
    if (major == 8 && minor == 0) return 64;
    return 128;
}

/* Dense FP16/BF16 tensor FLOP per clock per SM with FP32 accumulate, where published:
 * A100 312 TFLOP/s = 108 SMs * 2048 * 1.41 GHz; H100 SXM 989 TFLOP/s = 132 * 4096 * 1.83 GHz. */
static int tensor16_rate(int major, int minor) {
    if (major == 8 && minor == 0) return 2048;
    if (major == 9 && minor == 0) return 4096;
    return 0;
}

xf_status gpu_ceilings_theory(const gpu_attrs *a, gpu_theory *out) {
    if (a->sm_count <= 0 || a->clock_khz <= 0 || a->mem_clock_khz <= 0 || a->bus_width_bits <= 0)
        return xf_errorf(XF_EINVAL, "GPU attributes of '%s': SM count %d, clock %d kHz, memory clock %d kHz and bus "
                                    "width %d bits must all be positive",
                         a->name, a->sm_count, a->clock_khz, a->mem_clock_khz, a->bus_width_bits);
    if (a->cc_major < 7)
        return xf_errorf(XF_EINVAL, "GPU '%s' has compute capability %d.%d; xfprof needs 7.0 or newer (built for sm_80, sm_90)",
                         a->name, a->cc_major, a->cc_minor);
    memset(out, 0, sizeof *out);
    out->bandwidth_Bps = 2.0 * (double)a->mem_clock_khz * 1e3 * (double)a->bus_width_bits / 8.0;
    out->fp32_lanes_per_sm = fp32_lanes(a->cc_major, a->cc_minor);
    out->fp32_flops = (double)a->sm_count * out->fp32_lanes_per_sm * 2.0 * (double)a->clock_khz * 1e3;
    out->tensor16_per_clk_sm = tensor16_rate(a->cc_major, a->cc_minor);
    out->tensor16_flops = (double)a->sm_count * out->tensor16_per_clk_sm * (double)a->clock_khz * 1e3;
    return XF_OK;
}

/* Case-insensitive substring search. */
static int has(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return 1;
    }
    return 0;
}

const char *gpu_spec_id(const char *name, int64_t total_mem_bytes) {
    if (!name) return NULL;
    if (has(name, "H200")) return "h200";
    if (has(name, "H100")) {
        if (has(name, "PCIe")) return "h100-pcie";
        if (has(name, "NVL")) return NULL; /* H100 NVL (94 GB) has its own figures, not in the sheet */
        return "h100-sxm";                  /* "NVIDIA H100 80GB HBM3" is the SXM5 part */
    }
    if (has(name, "A100")) {
        /* "NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe" (the sheet has
         * the SXM figures; PCIe parts share them except bandwidth, close enough to name, not to claim) */
        if (has(name, "PCIe")) return NULL;
        return total_mem_bytes > (int64_t)60 << 30 || has(name, "80GB") ? "a100-80gb" : "a100-40gb";
    }
    if (has(name, "RTX 4090")) return "rtx-4090";
    if (has(name, "NVIDIA L4") && !has(name, "L40")) return "l4";
    return NULL;
}

xf_status gpu_spec_for(const gpu_attrs *a, device_spec *out) {
    const char *id = gpu_spec_id(a->name, a->total_mem_bytes);
    if (!id)
        return xf_errorf(XF_EUNSUPPORTED, "no spec sheet for GPU '%s' in devices.json: use the measured ceilings "
                                          "(`xfprof machine --device cuda`) or --device-file", a->name);
    return device_lookup(id, NULL, out);
}

void gpu_measured_spec(const gpu_attrs *a, const gpu_measured *m, const device_spec *sheet, device_spec *out) {
    memset(out, 0, sizeof *out);
    const char *id = gpu_spec_id(a->name, a->total_mem_bytes);
    snprintf(out->name, sizeof out->name, "%s-measured", id ? id : "cuda");
    snprintf(out->description, sizeof out->description, "%.127s", a->name);
    snprintf(out->kind, sizeof out->kind, "gpu");
    out->measured = 1;
    out->memory_bytes = (double)a->total_mem_bytes;
    out->bandwidth_Bps = m->copy_Bps > m->read_Bps ? m->copy_Bps : m->read_Bps;
    out->cache_bytes = (double)a->l2_bytes;
    out->peak_flops[XF_COMPUTE_FP32] = m->fp32_flops;
    out->peak_flops[XF_COMPUTE_TENSOR16] = m->tensor16_flops;
    if (sheet) {
        out->peak_flops[XF_COMPUTE_FP8] = sheet->peak_flops[XF_COMPUTE_FP8];
        out->peak_flops[XF_COMPUTE_INT8] = sheet->peak_flops[XF_COMPUTE_INT8];
    }
    snprintf(out->source, sizeof out->source,
             "measured by xfprof machine --device cuda: copy and read kernels over %lld MiB (L2 flushed), "
             "BF16 GEMM %lld^3 (cuBLAS, FP32 accumulate), FP32 FMA kernel; median of %d; fp8/int8 %s",
             (long long)(m->bytes >> 20), (long long)m->gemm_n, m->reps, sheet ? "from the spec sheet" : "not measured");
}

xf_status gpu_machine_measure(int ordinal, device_spec *out, gpu_attrs *attrs, gpu_theory *theory, gpu_measured *measured) {
    gpu_attrs a;
    gpu_theory t;
    gpu_measured m;
    memset(&a, 0, sizeof a);
    memset(&t, 0, sizeof t);
    memset(&m, 0, sizeof m);
    xf_status s = gpu_attrs_query(ordinal, &a);
    if (s) return s;
    if ((s = gpu_ceilings_theory(&a, &t))) return s;
    device_spec sheet;
    int have_sheet = gpu_spec_for(&a, &sheet) == XF_OK;
    xf_error_clear();
    if ((s = gpu_ceilings_measure(ordinal, 0, 0, 0, &m))) return s;
    gpu_measured_spec(&a, &m, have_sheet ? &sheet : NULL, out);
    if (attrs) *attrs = a;
    if (theory) *theory = t;
    if (measured) *measured = m;
    return XF_OK;
}

#ifndef XFPROF_HAVE_CUDA
xf_status gpu_attrs_query(int ordinal, gpu_attrs *out) {
    (void)ordinal;
    (void)out;
    return xf_errorf(XF_EUNSUPPORTED, "no CUDA device: this xfprof was built without CUDA (configure with -DXFPROF_CUDA=ON "
                                      "where the CUDA toolkit is installed)");
}

xf_status gpu_ceilings_measure(int ordinal, int64_t bytes, int64_t gemm_n, int reps, gpu_measured *out) {
    (void)bytes;
    (void)gemm_n;
    (void)reps;
    (void)out;
    return gpu_attrs_query(ordinal, NULL);
}

xf_status gpu_ceilings_job_copy_init(gpu_ceilings_job **out, int ordinal, int64_t bytes) {
    (void)bytes;
    *out = NULL;
    return gpu_attrs_query(ordinal, NULL);
}

xf_status gpu_ceilings_job_gemm_init(gpu_ceilings_job **out, int ordinal, int64_t m, int64_t n, int64_t k) {
    (void)m;
    (void)n;
    (void)k;
    *out = NULL;
    return gpu_attrs_query(ordinal, NULL);
}

xf_status gpu_ceilings_job_run(gpu_ceilings_job *j) {
    (void)j;
    return gpu_attrs_query(0, NULL);
}

void gpu_ceilings_job_free(gpu_ceilings_job *j) {
    (void)j;
}
#endif
