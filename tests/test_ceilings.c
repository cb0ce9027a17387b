/* Ceilings: the bandwidth kernels move the bytes they claim, the measurement reports
 * bytes / time of what it ran, the compute peaks run, and the machine file round-trips. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/device.h"
#include "core/hugemem.h"
#include "probes/ceilings.h"

Test(ceilings, kernel_bytes_arithmetic) {
    /* STREAM counting, 4-byte floats: read n, copy 2n, triad 3n elements. */
    cr_assert_float_eq(ceilings_kernel_bytes(CEIL_READ, 1000), 4000.0, 1e-9);
    cr_assert_float_eq(ceilings_kernel_bytes(CEIL_COPY, 1000), 8000.0, 1e-9);
    cr_assert_float_eq(ceilings_kernel_bytes(CEIL_TRIAD, 1000), 12000.0, 1e-9);
    cr_assert_eq(ceilings_kernel_arrays(CEIL_READ), 1);
    cr_assert_eq(ceilings_kernel_arrays(CEIL_COPY), 2);
    cr_assert_eq(ceilings_kernel_arrays(CEIL_TRIAD), 3);
    cr_assert_str_eq(ceilings_kernel_name(CEIL_TRIAD), "triad");
}

/* The kernels touch every element they are given (n odd: the SIMD tails too), so the bytes
 * claimed match the work done. */
Test(ceilings, kernels_touch_every_element) {
    const int64_t n = 1003;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    cr_assert(a && b && c);
    for (int64_t i = 0; i < n; i++) {
        a[i] = 1.0f;
        b[i] = (float)i;
        c[i] = 1.0f;
    }
    /* read: the sum of 1003 ones is 1003. */
    cr_assert_float_eq(ceilings_kernel_run(CEIL_READ, a, NULL, NULL, n), 1003.0, 1e-9);
    /* copy: a = b. */
    ceilings_kernel_run(CEIL_COPY, a, b, NULL, n);
    for (int64_t i = 0; i < n; i++) cr_assert_eq(a[i], (float)i);
    /* triad: a = b + 3 c = i + 3. */
    ceilings_kernel_run(CEIL_TRIAD, a, b, c, n);
    for (int64_t i = 0; i < n; i++) cr_assert_eq(a[i], (float)i + 3.0f);
    /* read of 0..1002: n (n - 1) / 2 = 502,503. */
    cr_assert_float_eq(ceilings_kernel_run(CEIL_READ, b, NULL, NULL, n), 502503.0, 1e-6);
    free(a);
    free(b);
    free(c);
}

Test(ceilings, bandwidth_reports_bytes_over_time) {
    ceilings_bw bw;
    /* 4 MiB over the copy kernel's 2 arrays: n = 4 MiB / (2 * 4 B) = 524,288 floats per array. */
    cr_assert_eq(ceilings_bandwidth(CEIL_COPY, 4.0 * 1024 * 1024, 1, 2, &bw), XF_OK);
    cr_assert_eq(bw.n_elems, 524288);
    cr_assert(bw.sweeps >= 1);
    cr_assert_float_eq(bw.bytes_per_rep, 8.0 * 524288 * bw.sweeps, 1e-3);
    cr_assert(bw.best_s > 0);
    cr_assert_float_eq(bw.Bps, bw.bytes_per_rep / bw.best_s, bw.Bps * 1e-12);
    cr_assert(bw.Bps > 1e8 && bw.Bps < 1e13, "copy bandwidth %g B/s is implausible", bw.Bps);
    /* Two threads split the same arrays. */
    cr_assert_eq(ceilings_bandwidth(CEIL_TRIAD, 3.0 * 1024 * 1024, 2, 1, &bw), XF_OK);
    cr_assert_eq(bw.n_elems, 262144); /* 3 MiB / (3 * 4 B) */
    cr_assert_float_eq(bw.bytes_per_rep, 12.0 * 262144 * bw.sweeps, 1e-3);
    cr_assert_eq(ceilings_bandwidth(CEIL_READ, 100, 1, 1, &bw), XF_EINVAL);
    cr_assert_eq(ceilings_bandwidth(CEIL_READ, 1e6, 0, 1, &bw), XF_EINVAL);
    cr_assert_eq(ceilings_bandwidth(CEIL_READ, 1e6, 1, 0, &bw), XF_EINVAL);
}

/* The read's arrays go on huge pages as the weights do (core/hugemem.h): from 2 MiB an array is
 * eligible, and what the kernel granted is within it; below 2 MiB nothing is asked for. */
Test(ceilings, read_arrays_huge_pages_said) {
    hugemem_set_enabled(1);
    ceilings_bw bw;
    cr_assert_eq(ceilings_bandwidth(CEIL_READ, 8.0 * 1024 * 1024, 1, 1, &bw), XF_OK);
    cr_expect_eq(bw.huge_eligible, 8 << 20);
    cr_expect(bw.huge_bytes >= -1 && bw.huge_bytes <= bw.huge_eligible, "granted %lld", (long long)bw.huge_bytes);
    if (strcmp(hugemem_thp_mode(), "never") == 0) cr_expect_eq(bw.huge_bytes, 0);
    cr_assert_eq(ceilings_bandwidth(CEIL_COPY, 2.0 * 1024 * 1024, 1, 1, &bw), XF_OK); /* 2 arrays of 1 MiB */
    cr_expect_eq(bw.huge_eligible, 0);
    cr_expect_eq(bw.huge_bytes, 0);
    ceilings_result r;
    memset(&r, 0, sizeof r);
    char buf[160];
    ceilings_huge_describe(&r, buf, sizeof buf);
    cr_expect(strstr(buf, "no DRAM working set") != NULL, "%s", buf);
    r.dram_ws_bytes = 8 << 20;
    r.dram[CEIL_READ].huge_eligible = 8 << 20;
    r.dram[CEIL_READ].huge_bytes = 0;
    ceilings_huge_describe(&r, buf, sizeof buf);
    cr_expect(strstr(buf, "not granted") != NULL, "%s", buf);
}

Test(ceilings, compute_peaks_run) {
    double f = 0;
    char isa[16];
    cr_assert_eq(ceilings_fp32_peak(1, 2, &f, isa, sizeof isa), XF_OK);
    cr_assert_str_eq(isa, ceilings_isa());
    cr_assert(f > 1e8 && f < 1e13, "fp32 peak %g FLOP/s is implausible", f);
    double b = 0;
    xf_status s = ceilings_bf16_peak(1, 2, &b);
    if (s == XF_EUNSUPPORTED)
        cr_assert_eq(b, 0);
    else {
        cr_assert_eq(s, XF_OK);
        cr_assert(b > 1e8 && b < 1e14, "bf16 peak %g FLOP/s is implausible", b);
    }
}

/* VNNI: where the CPU has AVX512_VNNI, the vpdpbusd peak (128 ops per instruction against 32 FLOP
 * per FP32 FMA) must be above the FP32 FMA peak of the same thread (measured 8.1x on a Zen 5, 2
 * threads); otherwise XF_EUNSUPPORTED naming VNNI and a zero. The device file keeps it as int8 where
 * there is no AMX INT8 peak, and the AMX one where there is. */
Test(ceilings, vnni_peak_or_the_reason) {
    double v = -1, f = 0;
    xf_status s = ceilings_vnni_peak(1, 2, &v);
    if (s == XF_EUNSUPPORTED) {
        cr_assert(v == 0);
        cr_assert(strstr(xf_error_msg(), "VNNI") != NULL, "the reason names VNNI: %s", xf_error_msg());
    } else {
        cr_assert_eq(s, XF_OK, "%s", xf_error_msg());
        char isa[16];
        cr_assert_eq(ceilings_fp32_peak(1, 2, &f, isa, sizeof isa), XF_OK);
        cr_assert(v > 2 * f, "VNNI INT8 %g op/s should be several times the FP32 peak %g", v, f);
    }
    ceilings_result r;
    memset(&r, 0, sizeof r);
    r.threads = 1;
    r.fp32_flops = 1e11, r.vnni_int8_ops = 8e11;
    device_spec d;
    ceilings_to_device(&r, &d);
    cr_assert_float_eq(d.peak_flops[XF_COMPUTE_INT8], 8e11, 1.0, "no AMX: the VNNI peak");
    r.amx_int8_ops = 3e12;
    ceilings_to_device(&r, &d);
    cr_assert_float_eq(d.peak_flops[XF_COMPUTE_INT8], 3e12, 1.0, "AMX: its tiles' peak");
}

/* AMX: where the CPU has it (CPUID) and the OS grants the tile state, the tile peaks must be far
 * above the FP32 FMA peak of the same thread (16 x 16 x 32 products per tdpbf16ps against 16 per
 * FMA; measured 5-15x here, busy machine); otherwise XF_EUNSUPPORTED with a reason and zeros. */
Test(ceilings, amx_peaks_or_the_reason) {
    double bf = -1, i8 = -1, f = 0;
    xf_status s = ceilings_amx_peak(1, 2, &bf, &i8);
    if (s == XF_EUNSUPPORTED) {
        cr_assert(bf == 0 && i8 == 0);
        cr_assert(strstr(xf_error_msg(), "AMX") != NULL, "the reason names AMX: %s", xf_error_msg());
        return;
    }
    cr_assert_eq(s, XF_OK, "%s", xf_error_msg());
    char isa[16];
    cr_assert_eq(ceilings_fp32_peak(1, 2, &f, isa, sizeof isa), XF_OK);
    /* margins wide enough for a busy machine's noise (measured 5-15x here) */
    cr_assert(bf > 2 * f, "AMX BF16 %g FLOP/s should be several times the FP32 peak %g", bf, f);
    cr_assert(i8 > 2 * f, "AMX INT8 %g op/s should be several times the FP32 peak %g", i8, f);
}

Test(ceilings, measure_small_and_machine_file_roundtrip) {
    ceilings_opts o;
    memset(&o, 0, sizeof o);
    o.threads = 1;
    o.reps = 1;
    o.skip_dram = 1;
    o.skip_compute = 1;
    o.cache_ws_bytes = 1 << 20;
    ceilings_result r;
    cr_assert_eq(ceilings_measure(&o, &r), XF_OK);
    cr_assert_eq(r.threads, 1);
    cr_assert_float_eq(r.cache_ws_bytes, 1048576.0, 1e-9);
    for (int k = 0; k < CEIL_KERNEL_COUNT; k++) cr_assert(r.cache[k].Bps > 0);
    cr_assert_eq(r.dram[CEIL_READ].Bps, 0);
    r.fp32_flops = 1.5e11; /* so the device carries a peak */
    device_spec d;
    ceilings_to_device(&r, &d);
    cr_assert_str_eq(d.kind, "cpu");
    cr_assert_eq(d.measured, 1);
    cr_assert(strstr(d.source, "measured by xfprof machine on ") == d.source);
    cr_assert(strstr(d.source, ", 1 threads") != NULL);
    cr_assert_float_eq(d.cache_bandwidth_Bps, r.cache[CEIL_READ].Bps, 1e-6);
    cr_assert_float_eq(d.peak_flops[XF_COMPUTE_FP32], 1.5e11, 1e-3);
    d.bandwidth_Bps = 1.25e10; /* skip_dram left it 0, which a devices file refuses */

    char dir[] = "/tmp/xfprof_ceil_XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/sub/machine.json", dir); /* the folder is created */
    setenv("XFPROF_MACHINE_FILE", path, 1);
    char got[256];
    cr_assert_eq(ceilings_machine_path(got, sizeof got), XF_OK);
    cr_assert_str_eq(got, path);
    cr_assert_eq(ceilings_save(&d, &r, got), XF_OK, "%s", xf_error_msg());
    device_spec back;
    cr_assert_eq(ceilings_load(got, &back), XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(back.name, "cpu");
    cr_assert_eq(back.measured, 1);
    cr_assert_float_eq(back.bandwidth_Bps, 1.25e10, 1.0);
    cr_assert_float_eq(back.peak_flops[XF_COMPUTE_FP32], 1.5e11, 1.0);
    cr_assert_str_eq(back.source, d.source);
    unlink(path);
    snprintf(path, sizeof path, "%s/sub", dir);
    rmdir(path);
    rmdir(dir);
    unsetenv("XFPROF_MACHINE_FILE");
    cr_assert_eq(ceilings_load("/nonexistent/xfprof/machine.json", &back), XF_EIO);
}

Test(ceilings, llc_size_from_sysfs) {
    if (access("/sys/devices/system/cpu/cpu0/cache/index0/size", R_OK) != 0) cr_skip("no cache information in sysfs");
    double llc = ceilings_llc_bytes();
    cr_assert(llc >= 64 * 1024, "last-level cache %g bytes", llc);
}

char *openblas_get_corename(void);

/* OpenBLAS's fallback to generic kernels is caught, and an explicit OPENBLAS_CORETYPE is left alone. */
Test(ceilings, blas_coretype_fix) {
    const char *saved = getenv("OPENBLAS_CORETYPE");
    char keep[64] = "";
    if (saved) snprintf(keep, sizeof keep, "%s", saved);
    setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    cr_assert_null(ceilings_blas_coretype_fix(), "a coretype the user set is never overridden");
    unsetenv("OPENBLAS_CORETYPE");
    const char *core = openblas_get_corename();
    const char *fix = ceilings_blas_coretype_fix();
    __builtin_cpu_init();
    if (!strcmp(core, "Prescott") && __builtin_cpu_supports("avx512f"))
        cr_assert_str_eq(fix, "SkylakeX"); /* the case this machine had: SSE3 kernels on an AVX-512 Xeon */
    else if (!strcmp(core, "SkylakeX") || !strcmp(core, "Cooperlake") || !strcmp(core, "SapphireRapids") ||
             !strcmp(core, "Haswell") || !strcmp(core, "Zen"))
        cr_assert_null(fix, "OpenBLAS already uses %s kernels", core);
    if (saved) setenv("OPENBLAS_CORETYPE", keep, 1);
}

/* The concurrent ceilings' pulser (issue 17): its arguments are checked, and a pulse of any
 * budget (capped at the max) measures a positive read bandwidth and FMA rate and reports its own
 * wall time, in-cache and DRAM (its array reserved for a small budget first, then grown by the
 * larger ones). No wall-time bound is asserted. */
Test(ceilings, pulser_checks_arguments_and_pulses) {
    ceilings_pulser *p = NULL;
    cr_assert_eq(ceilings_pulser_init(0, 1, 1e10, 1e11, 1e-3, &p), XF_EINVAL);
    cr_assert_eq(ceilings_pulser_init(1, 1, 0, 1e11, 1e-3, &p), XF_EINVAL);
    cr_assert_eq(ceilings_pulser_init(1, 1, 1e10, 1e11, 5.0, &p), XF_EINVAL, "budgets above 0.1 s are refused");
    cr_assert_null(p);
    ceilings_pulse pu;
    cr_assert_eq(ceilings_pulser_run(NULL, 1e-3, &pu), XF_EINVAL);
    cr_assert_eq(ceilings_pulser_reserve(NULL, 1e-3), XF_EINVAL);
    const double budgets[] = {3e-4, 1e-2, 1.0 /* capped at the max, not refused */, 0 /* 0: the max */};
    for (int in_cache = 0; in_cache <= 1; in_cache++) {
        cr_assert_eq(ceilings_pulser_init(2, in_cache, 1e10, 1e11, 1e-2, &p), XF_OK, "%s", xf_error_msg());
        cr_assert_eq(ceilings_pulser_reserve(p, 3e-4), XF_OK, "%s", xf_error_msg());
        for (int k = 0; k < 3; k++)
            for (int b = 0; b < 4; b++) {
                cr_assert_eq(ceilings_pulser_run(p, budgets[b], &pu), XF_OK, "%s", xf_error_msg());
                cr_assert(pu.bandwidth_Bps > 0 && isfinite(pu.bandwidth_Bps) && pu.fp32_flops > 0 && isfinite(pu.fp32_flops) &&
                              pu.seconds > 0,
                          "%s pulse, budget %g: %g B/s, %g FLOP/s, %g s", in_cache ? "in-cache" : "DRAM", budgets[b],
                          pu.bandwidth_Bps, pu.fp32_flops, pu.seconds);
            }
        ceilings_pulser_free(p);
        p = NULL;
    }
    ceilings_pulser_free(NULL);
}


/* OPENBLAS_CORETYPE from the environment naming a core without AVX-512 kernels on an AVX-512 CPU is
 * said (this sandbox set Haswell: fp32 prefill GEMMs at 0.47x OpenBLAS's own Cooperlake); an
 * AVX-512 core, or none set, is not. */
Test(ceilings, blas_coretype_from_the_environment) {
    char buf[160];
    const char *saved = getenv("OPENBLAS_CORETYPE");
    char keep[64] = "";
    if (saved) snprintf(keep, sizeof keep, "%s", saved);
    __builtin_cpu_init();
    const int avx512 = __builtin_cpu_supports("avx512f") != 0;
    setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    cr_assert_eq(ceilings_blas_coretype_weak(buf, sizeof buf), avx512);
    if (avx512) cr_assert(strstr(buf, "OPENBLAS_CORETYPE=Haswell") && strstr(buf, "AVX-512"), "%s", buf);
    setenv("OPENBLAS_CORETYPE", "cooperlake", 1);
    cr_assert_eq(ceilings_blas_coretype_weak(buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "");
    unsetenv("OPENBLAS_CORETYPE");
    cr_assert_eq(ceilings_blas_coretype_weak(buf, sizeof buf), 0);
    if (saved) setenv("OPENBLAS_CORETYPE", keep, 1);
}
