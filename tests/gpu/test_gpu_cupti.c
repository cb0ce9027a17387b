/* CUPTI on kernels of known work: a copy of N bytes moves about 2N DRAM bytes (within 10%: the
 * buffers are far larger than L2); a BF16 GEMM of 2·M·N·K FLOPs, with the tensor metric's unit
 * calibrated on another shape, within 5%; kernel activity attributes the copy to its range. */
#include <stdio.h>
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

#include <stdlib.h>

#include "runner/cupti_collect.h"
#include "reference_model/model.h"

/* A decode step's qkv projection reads its bf16 weights once: the counters must show DRAM bytes
 * between 0.8x and 1.3x of the weight bytes (2048 x 6144 x 2 = 25,165,824 B; two layers of about
 * 100 MB each, more than L2, so the weights come from DRAM again every step). */
Test(gpu_cupti, model_counters_match_weight_bytes) {
    GPU_REQUIRE_DEVICE();
    model_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "cupti-test");
    snprintf(c.arch, sizeof c.arch, "llama");
    c.n_layers = 2;
    c.d_model = 2048;
    c.n_heads = 16;
    c.n_kv_heads = 16;
    c.head_dim = 128;
    c.d_ff = 5504;
    c.vocab = 32000;
    c.max_ctx = 256;
    c.rope_theta = 10000.0;
    c.norm_eps = 1e-5;
    model_options o;
    model_options_default(&o);
    o.wdtype = XF_BF16;
    o.kvdtype = XF_BF16;
    o.backend = "cuda";
    o.max_seqs = 1;
    o.max_prompt = 16;
    o.max_seq_len = 32;
    model *m = NULL;
    cr_assert_eq(model_init(&m, &c, &o), XF_OK, "%s", xf_error_msg());
    int32_t prompt[16];
    for (int i = 0; i < 16; i++) prompt[i] = i * 37 + 1;
    int64_t len = 16;
    cupti_collect_args a = {m, 0, 1, prompt, &len, 2};
    cupti_collect_result r;
    xf_status s = cupti_collect_counters(&a, &r);
    if (s == XF_EUNSUPPORTED) {
        model_free(m);
        cr_skip_test("no CUDA device counters: %s", xf_error_msg());
    }
    cr_assert_eq(s, XF_OK, "%s", xf_error_msg());
    const double wbytes = 2048.0 * 6144.0 * 2.0;
    int found = 0;
    for (int i = 0; i < r.n; i++)
        if (r.ranges[i].phase == XF_DECODE && r.ranges[i].layer == 0 && r.ranges[i].kind == OP_QKV && r.ranges[i].step == 2) {
            cupti_op_counts oc;
            cupti_op_counts_of(&r.values[i], r.flops_per_unit, &oc);
            cr_assert_eq(oc.have_bytes, 1);
            cr_assert(oc.dram_bytes > 0.8 * wbytes && oc.dram_bytes < 1.3 * wbytes, "decode qkv DRAM %g vs weights %g",
                      oc.dram_bytes, wbytes);
            found = 1;
        }
    cr_assert(found, "no range decode/L0/qkv/s2 among %d", r.n);
    cr_assert_gt(r.flops_per_unit, 0, "tensor calibration failed");
    cupti_collect_result_free(&r);
    model_free(m);
}
