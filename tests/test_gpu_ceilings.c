/* GPU ceiling arithmetic from given attributes (A100, H100, H200), spec-sheet matching by name,
 * the measured-spec assembly, and the no-GPU path of the device-side functions. */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "probes/gpu_ceilings.h"

/* Attribute values as the CUDA runtime reports them for these parts (kHz, bits). */
static gpu_attrs a100_40 = {"NVIDIA A100-SXM4-40GB", 8, 0, 108, 1410000, 1215000, 5120, 41943040, 42298834944LL};
static gpu_attrs h100_sxm = {"NVIDIA H100 80GB HBM3", 9, 0, 132, 1980000, 2619000, 5120, 52428800, 84929347584LL};
static gpu_attrs h200 = {"NVIDIA H200", 9, 0, 132, 1980000, 3201000, 6144, 62914560, 150110011392LL};

Test(gpu_ceilings, a100_theory) {
    gpu_theory t;
    cr_assert_eq(gpu_ceilings_theory(&a100_40, &t), XF_OK, "%s", xf_error_msg());
    /* 2 * 1.215e9 * 5120 / 8 = 1.5552e12 B/s */
    cr_assert_float_eq(t.bandwidth_Bps, 1.5552e12, 1e3);
    /* 108 * 64 * 2 * 1.41e9 = 19.49184e12 */
    cr_assert_eq(t.fp32_lanes_per_sm, 64);
    cr_assert_float_eq(t.fp32_flops, 19.49184e12, 1e3);
    /* 108 * 2048 * 1.41e9 = 311.86944e12 */
    cr_assert_float_eq(t.tensor16_flops, 311.86944e12, 1e3);
}

Test(gpu_ceilings, h100_theory) {
    gpu_theory t;
    cr_assert_eq(gpu_ceilings_theory(&h100_sxm, &t), XF_OK);
    /* 2 * 2.619e9 * 640 = 3.35232e12 */
    cr_assert_float_eq(t.bandwidth_Bps, 3.35232e12, 1e3);
    /* 132 * 128 * 2 * 1.98e9 = 66.90816e12 */
    cr_assert_eq(t.fp32_lanes_per_sm, 128);
    cr_assert_float_eq(t.fp32_flops, 66.90816e12, 1e3);
    /* 132 * 4096 = 540672; * 1.98e9 = 1070.53056e12 at the attribute's max clock (the sheet's 989 is at 1.83 GHz) */
    cr_assert_float_eq(t.tensor16_flops, 1070.53056e12, 1e3);
}

Test(gpu_ceilings, h200_theory) {
    gpu_theory t;
    cr_assert_eq(gpu_ceilings_theory(&h200, &t), XF_OK);
    /* 2 * 3.201e9 * 6144 / 8 = 4.916736e12 */
    cr_assert_float_eq(t.bandwidth_Bps, 4.916736e12, 1e3);
    cr_assert_float_eq(t.fp32_flops, 66.90816e12, 1e3);
}

Test(gpu_ceilings, theory_rejects_bad_attributes) {
    gpu_attrs bad = h200;
    gpu_theory t;
    bad.mem_clock_khz = 0; /* what CUDA 13's removed cudaDeviceProp field would have left */
    cr_assert_eq(gpu_ceilings_theory(&bad, &t), XF_EINVAL);
    cr_assert_neq(strstr(xf_error_msg(), "memory clock 0"), NULL, "%s", xf_error_msg());
    bad = h200;
    bad.cc_major = 6;
    cr_assert_eq(gpu_ceilings_theory(&bad, &t), XF_EINVAL);
    /* an Ada part: FP32 known (128 lanes), tensor rate unknown -> 0 */
    gpu_attrs ada = {"NVIDIA L4", 8, 9, 58, 2040000, 6251000, 192, 50331648, 23580639232LL};
    cr_assert_eq(gpu_ceilings_theory(&ada, &t), XF_OK);
    cr_assert_eq(t.tensor16_flops, 0);
    cr_assert_float_eq(t.fp32_flops, 58 * 128 * 2 * 2.04e9, 1e3);
}

Test(gpu_ceilings, spec_ids_by_name) {
    cr_assert_str_eq(gpu_spec_id("NVIDIA A100-SXM4-40GB", 42298834944LL), "a100-40gb");
    cr_assert_str_eq(gpu_spec_id("NVIDIA A100-SXM4-80GB", 85198045184LL), "a100-80gb");
    cr_assert_str_eq(gpu_spec_id("NVIDIA H100 80GB HBM3", 84929347584LL), "h100-sxm");
    cr_assert_str_eq(gpu_spec_id("NVIDIA H100 PCIe", 85520809984LL), "h100-pcie");
    cr_assert_str_eq(gpu_spec_id("NVIDIA H200", 150110011392LL), "h200");
    cr_assert_str_eq(gpu_spec_id("NVIDIA GeForce RTX 4090", 25393692672LL), "rtx-4090");
    cr_assert_str_eq(gpu_spec_id("NVIDIA L4", 23580639232LL), "l4");
    cr_assert_null(gpu_spec_id("NVIDIA L40S", 48305799168LL));
    cr_assert_null(gpu_spec_id("NVIDIA H100 NVL", 100485038080LL));
    cr_assert_null(gpu_spec_id("Tesla V100-SXM2-16GB", 16945512448LL));
}

Test(gpu_ceilings, spec_sheet_lookup) {
    device_spec d;
    cr_assert_eq(gpu_spec_for(&h200, &d), XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(d.name, "h200");
    cr_assert_float_eq(d.bandwidth_Bps, 4.8e12, 1e3);
    gpu_attrs v100 = {"Tesla V100-SXM2-16GB", 7, 0, 80, 1530000, 877000, 4096, 6291456, 16945512448LL};
    cr_assert_eq(gpu_spec_for(&v100, &d), XF_EUNSUPPORTED);
}

Test(gpu_ceilings, measured_spec) {
    gpu_measured m = {.copy_Bps = 4.0e12, .read_Bps = 4.2e12, .tensor16_flops = 700e12, .fp32_flops = 60e12,
                      .bytes = 2LL << 30, .gemm_n = 8192, .reps = 10};
    device_spec sheet;
    cr_assert_eq(gpu_spec_for(&h200, &sheet), XF_OK);
    device_spec d;
    gpu_measured_spec(&h200, &m, &sheet, &d);
    cr_assert_str_eq(d.name, "h200-measured");
    cr_assert_eq(d.measured, 1);
    cr_assert_float_eq(d.bandwidth_Bps, 4.2e12, 1.0); /* the larger of copy and read */
    cr_assert_float_eq(d.peak_flops[XF_COMPUTE_TENSOR16], 700e12, 1.0);
    cr_assert_float_eq(d.peak_flops[XF_COMPUTE_FP8], sheet.peak_flops[XF_COMPUTE_FP8], 1.0);
    cr_assert_float_eq(d.cache_bytes, 62914560.0, 0.5);
    cr_assert_neq(strstr(d.source, "2048 MiB"), NULL, "%s", d.source);
}

Test(gpu_ceilings, no_device_is_unsupported) {
    /* This test machine class has no NVIDIA driver; where one exists, the answer may be either. */
    gpu_attrs a;
    xf_status s = gpu_attrs_query(0, &a);
    if (access("/dev/nvidiactl", F_OK) != 0) {
        cr_assert_eq(s, XF_EUNSUPPORTED, "got %d: %s", s, xf_error_msg());
        cr_assert_neq(strstr(xf_error_msg(), "no CUDA device"), NULL, "%s", xf_error_msg());
        gpu_measured m;
        cr_assert_eq(gpu_ceilings_measure(0, 0, 0, 0, &m), XF_EUNSUPPORTED);
        device_spec d;
        cr_assert_eq(gpu_machine_measure(0, &d, NULL, NULL, NULL), XF_EUNSUPPORTED);
        gpu_ceilings_job *j = (gpu_ceilings_job *)&a; /* must be overwritten with NULL */
        cr_assert_eq(gpu_ceilings_job_copy_init(&j, 0, 1 << 20), XF_EUNSUPPORTED);
        cr_assert_null(j);
        cr_assert_eq(gpu_ceilings_job_gemm_init(&j, 0, 64, 64, 64), XF_EUNSUPPORTED);
        cr_assert_null(j);
        gpu_ceilings_job_free(NULL);
    } else {
        cr_assert(s == XF_OK || s == XF_EUNSUPPORTED);
    }
}
