/* CUPTI on kernels of known work: a copy of N bytes moves about 2N DRAM bytes (within 10%: the
 * buffers are far larger than L2); a BF16 GEMM of 2·M·N·K FLOPs, with the tensor metric's unit
 * calibrated on another shape, within 5%; kernel activity attributes the copy to its range. */
#include <string.h>

#include "gpu_common.h"
#include "probes/cupti_probe.h"
#include "probes/gpu_ceilings.h"

Test(gpu_cupti, activity_attributes_kernels) {
    GPU_REQUIRE_DEVICE();
    cupti_probe *p = NULL;
    xf_status s = cupti_probe_init(&p, 0, CUPTI_MODE_ACTIVITY, 0);
    if (s == XF_EUNSUPPORTED) cr_skip_test("no CUDA device: %s", xf_error_msg());
    cr_assert_eq(s, XF_OK, "%s", xf_error_msg());
    probe pr = cupti_probe_as_probe(p);
    probe_range r = {XF_DECODE, 3, OP_ATTENTION, 2};
    pr.range_begin(pr.ctx, &r);
    cr_assert_eq(gpu_ceilings_run_copy(0, 64 << 20), XF_OK, "%s", xf_error_msg());
    pr.range_end(pr.ctx, &r);
    cupti_attribution a;
    cr_assert_eq(cupti_probe_flush(p, &a), XF_OK, "%s", xf_error_msg());
    const cupti_range_time *t = cupti_attribution_find(&a, &r);
    cr_assert_not_null(t, "the copy kernel was not attributed to its range");
    cr_assert_geq(t->n_kernels, 1);
    cr_assert_gt(t->kernel_s, 0);
    cupti_attribution_free(&a);
    cupti_probe_free(p);
}

static cupti_probe *counters_or_skip(void) {
    cupti_probe *p = NULL;
    xf_status s = cupti_probe_init(&p, 0, CUPTI_MODE_COUNTERS, 16);
    if (s == XF_EUNSUPPORTED) cr_skip_test("no CUDA device counters: %s", xf_error_msg());
    cr_assert_eq(s, XF_OK, "%s", xf_error_msg());
    return p;
}

Test(gpu_cupti, copy_dram_bytes_and_gemm_flops) {
    GPU_REQUIRE_DEVICE();
    cupti_probe *p = counters_or_skip();
    const int64_t N = 512LL << 20;
    int done = 0;
    cr_assert_eq(cupti_probe_pass_begin(p, 0), XF_OK, "%s", xf_error_msg());
    for (int pass = 0; !done; pass++) {
        if (pass) cr_assert_eq(cupti_probe_pass_begin(p, 0), XF_OK, "%s", xf_error_msg());
        cupti_probe_push_named(p, "copy");
        cr_assert_eq(gpu_ceilings_run_copy(0, N), XF_OK, "%s", xf_error_msg());
        cupti_probe_pop_named(p);
        cupti_probe_push_named(p, "calibration");
        cr_assert_eq(gpu_ceilings_run_gemm(0, 4096, 4096, 4096), XF_OK, "%s", xf_error_msg());
        cupti_probe_pop_named(p);
        cupti_probe_push_named(p, "gemm");
        cr_assert_eq(gpu_ceilings_run_gemm(0, 2048, 4096, 1024), XF_OK, "%s", xf_error_msg());
        cupti_probe_pop_named(p);
        cr_assert_eq(cupti_probe_pass_end(p, &done), XF_OK, "%s", xf_error_msg());
        cr_assert_lt(pass, 64, "more than 64 passes");
    }
    cupti_metric_values copy, cal, gemm;
    cr_assert_eq(cupti_probe_named_values(p, "copy", &copy), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(cupti_probe_named_values(p, "calibration", &cal), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(cupti_probe_named_values(p, "gemm", &gemm), XF_OK, "%s", xf_error_msg());
    cupti_op_counts c;
    cupti_op_counts_of(&copy, 0, &c);
    cr_assert_eq(c.have_bytes, 1, "DRAM metrics missing");
    cr_assert_float_eq(c.dram_bytes, 2.0 * (double)N, 0.10 * 2.0 * (double)N, "copy of %lld bytes: DRAM %g", (long long)N, c.dram_bytes);
    double unit = 0;
    cr_assert_eq(cupti_tensor_calibrate(cal.v[CUPTI_M_TENSOR], 4096, 4096, 4096, &unit), XF_OK, "%s", xf_error_msg());
    double expect = 2.0 * 2048 * 4096 * 1024;
    cr_assert_float_eq(gemm.v[CUPTI_M_TENSOR] * unit, expect, 0.05 * expect, "GEMM tensor FLOPs %g",
                       gemm.v[CUPTI_M_TENSOR] * unit);
    cupti_probe_free(p);
}
