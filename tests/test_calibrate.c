/* runner/calibrate.c: the calibration grid (which models it runs for a machine's last-level cache,
 * what the table then holds) and its set-up (the heap kept while the grid runs). The prediction
 * rules that read the table are tests/test_predict_calibrated.c's. */
#include <criterion/criterion.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/calibration.h"
#include "core/device.h"
#include "runner/calibrate.h"
#include "tests/test_machine_file.h"

/* A CPU with the given last-level cache (0: unknown) and ceilings of this order: the
 * entries' efficiencies are against these, their keys do not depend on them. */
static device_spec cpu_with_cache(double cache_bytes) {
    device_spec m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "test-cpu");
    snprintf(m.kind, sizeof m.kind, "cpu");
    m.measured = 1;
    m.bandwidth_Bps = 20e9;
    m.cache_bytes = cache_bytes;
    m.cache_bandwidth_Bps = cache_bytes > 0 ? 100e9 : 0;
    m.peak_flops[XF_COMPUTE_FP32] = 100e9;
    return m;
}

/* The quick fp32 grid against a machine of that cache; the runner reads the same ceilings from a
 * machine file of the test's own (not the user's, and no quick measurement first). */
static calib_table quick_fp32(double cache_bytes) {
    static const xf_dtype fp32 = XF_FP32;
    calibrate_opts o = {.threads = 1, .quick = 1, .wdtypes = &fp32, .n_wdtypes = 1, .quiet = 1, .fork_alt = NULL};
    device_spec m = cpu_with_cache(cache_bytes);
    char dir[] = "/tmp/xfprof-calibrate-XXXXXX", path[96];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/machine.json", dir);
    test_machine_file_write(path, m.bandwidth_Bps, m.cache_bytes, m.cache_bandwidth_Bps, m.peak_flops[XF_COMPUTE_FP32],
                            "the calibrate test");
    setenv("XFPROF_MACHINE_FILE", path, 1);
    calib_table t;
    xf_status s = calibrate_measure(&o, &m, &t);
    unsetenv("XFPROF_MACHINE_FILE");
    unlink(path);
    rmdir(dir);
    cr_assert_eq(s, XF_OK, "%s", xf_error_msg());
    return t;
}

static int has_family(const calib_table *t, calib_family f) {
    for (int i = 0; i < t->n; i++)
        if (t->entries[i].family == f) return 1;
    return 0;
}

/* a gemv entry of x bytes of fp32 weights (an lm_head of vocab x d_model) */
static int has_gemv_bytes(const calib_table *t, double x) {
    for (int i = 0; i < t->n; i++)
        if (t->entries[i].family == CALIB_GEMV && fabs(t->entries[i].x - x) < 1e-6 * x) return 1;
    return 0;
}

/* a GEMM entry of N x K (z, x) */
static int has_gemm(const calib_table *t, double n, double k) {
    for (int i = 0; i < t->n; i++)
        if (t->entries[i].family == CALIB_GEMM && t->entries[i].z == n && t->entries[i].x == k) return 1;
    return 0;
}

/* A 32 MiB L3 (a 2-core AMD EPYC): no grid shape fitted 3/4 of it with its own vocabulary, and the
 * quick grid measured nothing. Now d_model 512 runs in cache with the vocabulary whose fp32
 * embeddings fit a quarter of it (2048 tokens: its lm_head 2048 x 512), d_model 1280 (no layer of
 * which fits) one layer from DRAM with 768, and every family is there. */
Test(calibrate, a_small_cache_gets_cache_sized_models_and_every_family, .timeout = 300) {
    calib_table t = quick_fp32(32.0 * 1048576);
    cr_assert_gt(t.n, 0);
    static const calib_family fams[] = {CALIB_GEMV, CALIB_GEMM, CALIB_NORM, CALIB_ATTN_DECODE, CALIB_ATTN_PREFILL};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++)
        cr_assert(has_family(&t, fams[i]), "family %s missing", calib_family_name(fams[i]));
    cr_assert(has_gemv_bytes(&t, 2048.0 * 512 * 4), "d_model 512's lm_head at the fitted vocabulary 2048");
    cr_assert(has_gemv_bytes(&t, 768.0 * 1280 * 4), "d_model 1280's lm_head at the fitted vocabulary 768");
    cr_assert(!has_gemv_bytes(&t, 24000.0 * 512 * 4), "d_model 512's own vocabulary does not fit this cache");
    cr_assert(has_gemm(&t, 1920, 1280) && has_gemm(&t, 1536, 512), "both shapes' qkv GEMMs");
    calib_table_free(&t);
}

/* A 480 MiB LLC (the project's Xeon): every shape keeps its own vocabulary (d_model 512: 24000,
 * 1280: 12000), as before the small-cache rule. */
Test(calibrate, a_large_cache_keeps_the_shapes_own_vocabularies, .timeout = 300) {
    calib_table t = quick_fp32(480.0 * 1048576);
    cr_assert(has_gemv_bytes(&t, 24000.0 * 512 * 4), "d_model 512's lm_head at its own vocabulary");
    cr_assert(has_gemv_bytes(&t, 12000.0 * 1280 * 4), "d_model 1280's lm_head at its own vocabulary");
    cr_assert(has_family(&t, CALIB_ATTN_DECODE) && has_family(&t, CALIB_NORM));
    calib_table_free(&t);
}

/* An unknown cache size: no model is "in cache", and the quick grid still measures every family
 * (from DRAM) instead of failing. */
Test(calibrate, an_unknown_cache_still_measures_every_family, .timeout = 300) {
    calib_table t = quick_fp32(0);
    cr_assert(has_family(&t, CALIB_GEMM) && has_family(&t, CALIB_ATTN_DECODE) && has_family(&t, CALIB_NORM));
    calib_table_free(&t);
}

/* runner/calibrate.c's set-up: while the grid runs (calibrate_keep_heap(1)) a model-sized block
 * comes from the heap and stays there when freed (the next model's set-up reuses its pages);
 * after it (0) glibc's defaults are back: such a block is mmapped again and the heap trimmed. */
#if defined(__SANITIZE_ADDRESS__)
#define XF_SANITIZER_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define XF_SANITIZER_MALLOC 1
#endif
#endif
Test(calibrate, keep_heap_serves_large_blocks_from_the_heap_then_restores_the_defaults) {
#ifdef XF_SANITIZER_MALLOC
    cr_skip_test("the sanitizer's malloc is not glibc's: mallopt and mallinfo2 do not reach it");
#else
    const size_t big = (size_t)64 << 20;
    struct mallinfo2 a = mallinfo2();
    char *p = malloc(big);
    cr_assert(p);
    struct mallinfo2 b = mallinfo2();
    cr_assert_eq(b.hblks, a.hblks + 1, "by default a 64 MiB block is mmapped (%zu -> %zu)", a.hblks, b.hblks);
    free(p);
    calibrate_keep_heap(1);
    a = mallinfo2();
    p = malloc(big);
    cr_assert(p);
    p[0] = p[big - 1] = 1;
    b = mallinfo2();
    cr_assert_eq(b.hblks, a.hblks, "kept: the block is not mmapped");
    cr_assert_geq(b.arena, a.arena + big, "kept: the block is the heap's (%zu -> %zu)", a.arena, b.arena);
    free(p);
    struct mallinfo2 c = mallinfo2();
    cr_assert_geq(c.arena, b.arena, "kept: freeing does not trim the heap");
    calibrate_keep_heap(0);
    struct mallinfo2 d = mallinfo2();
    cr_assert_lt(d.arena + big / 2, c.arena, "restored: the heap is trimmed (%zu -> %zu)", c.arena, d.arena);
    a = mallinfo2();
    p = malloc(big);
    cr_assert(p);
    b = mallinfo2();
    cr_assert_eq(b.hblks, a.hblks + 1, "restored: a 64 MiB block is mmapped again");
    free(p);
    calibrate_keep_heap(0); /* a second restore: a no-op */
#endif
}
