/* Device specs as data: the built-in sheets, ridge points, peak fallback and the file reader
 * against malformed, foreign and newer files. Needs XFPROF_DATA_DIR (set by CTest). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"

static device_spec get(const char *name) {
    device_spec d;
    xf_status s = device_lookup(name, NULL, &d);
    cr_assert_eq(s, XF_OK, "device %s: %s", name, xf_error_msg());
    return d;
}

/* ---- built-in sheets ---- */

Test(device_builtin, all_required_devices_present) {
    const char *want[] = {"a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "l4", "rtx-4090"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        device_spec d = get(want[i]);
        cr_assert_str_eq(d.name, want[i]);
        cr_assert_str_eq(d.kind, "gpu");
        cr_assert(d.memory_bytes > 0 && d.bandwidth_Bps > 0 && d.peak_flops[XF_COMPUTE_FP32] > 0);
        cr_assert(strlen(d.source) > 10, "%s has no source", want[i]);
        cr_assert_eq(d.measured, 0);
    }
}

Test(device_builtin, figures) {
    device_spec a = get("a100-40gb");
    cr_assert_float_eq(a.memory_bytes, 40.0 * 1024 * 1024 * 1024, 1.0); /* 40 GiB */
    cr_assert_float_eq(a.bandwidth_Bps, 1.555e12, 1e3);
    cr_assert_float_eq(a.peak_flops[XF_COMPUTE_TENSOR16], 312e12, 1e6);
    cr_assert_float_eq(a.peak_flops[XF_COMPUTE_FP8], 0.0, 0.0); /* Ampere has no FP8 */
    cr_assert_float_eq(a.cache_bytes, 40.0 * 1024 * 1024, 1.0);
    device_spec h = get("h200");
    cr_assert_float_eq(h.memory_bytes, 141e9, 1.0);
    cr_assert_float_eq(h.peak_flops[XF_COMPUTE_FP8], 1978.9e12, 1e6);
}

Test(device_builtin, case_insensitive_and_unknown) {
    device_spec d;
    cr_assert_eq(device_lookup("H100-SXM", NULL, &d), XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(d.name, "h100-sxm");
    cr_assert_eq(device_lookup("tpu-v5", NULL, &d), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "tpu-v5") && strstr(xf_error_msg(), "h100-sxm") && strstr(xf_error_msg(), "rtx-4090"),
              "message should list the known devices: %s", xf_error_msg());
    cr_assert_eq(device_lookup(NULL, NULL, &d), XF_EINVAL);
}

/* ---- ridge points (DESIGN.md) ---- */

Test(device_ridge, datacenter_gpus) {
    device_spec a = get("a100-40gb"), h = get("h100-sxm"), h2 = get("h200");
    /* 312e12 / 1.555e12 = 200.64 FLOP/B */
    cr_assert_float_eq(device_ridge(&a, XF_COMPUTE_TENSOR16), 312.0 / 1.555, 1e-9);
    cr_assert(fabs(device_ridge(&a, XF_COMPUTE_TENSOR16) - 200.6) < 0.1);
    /* 989.4e12 / 3.35e12 = 295.34 */
    cr_assert(fabs(device_ridge(&h, XF_COMPUTE_TENSOR16) - 295.3) < 0.1);
    /* 989.4e12 / 4.8e12 = 206.125 */
    cr_assert(fabs(device_ridge(&h2, XF_COMPUTE_TENSOR16) - 206.1) < 0.1);
    /* FP32 CUDA cores: 19.5 / 1.555 = 12.54; 67 / 3.35 = 20.0 */
    cr_assert(fabs(device_ridge(&a, XF_COMPUTE_FP32) - 12.54) < 0.01);
    cr_assert(fabs(device_ridge(&h, XF_COMPUTE_FP32) - 20.0) < 1e-9);
    /* batch-64 decode GEMMs (intensity ~64) stay under every ridge */
    cr_assert(64 < device_ridge(&a, XF_COMPUTE_TENSOR16) && 64 < device_ridge(&h2, XF_COMPUTE_TENSOR16));
}

/* ---- peak fallback ---- */

Test(device_peak, fallback_chain) {
    device_spec a = get("a100-40gb");
    /* A100 lacks FP8: runs as FP16 tensor */
    cr_assert_float_eq(device_peak(&a, XF_COMPUTE_FP8), 312e12, 1e6);
    cr_assert_float_eq(device_peak(&a, XF_COMPUTE_INT8), 624e12, 1e6);
    cr_assert_float_eq(device_ridge(&a, XF_COMPUTE_FP8), device_ridge(&a, XF_COMPUTE_TENSOR16), 1e-12);

    device_spec d;
    memset(&d, 0, sizeof d);
    d.bandwidth_Bps = 100e9;
    d.peak_flops[XF_COMPUTE_FP32] = 2e12; /* a CPU: FP32 only */
    cr_assert_float_eq(device_peak(&d, XF_COMPUTE_TENSOR16), 2e12, 1);
    cr_assert_float_eq(device_peak(&d, XF_COMPUTE_FP8), 2e12, 1);
    cr_assert_float_eq(device_peak(&d, XF_COMPUTE_INT8), 2e12, 1);
    cr_assert_float_eq(device_ridge(&d, XF_COMPUTE_INT8), 20.0, 1e-12); /* 2e12 / 100e9 */
    d.peak_flops[XF_COMPUTE_INT8] = 8e12; /* int8 dot products but no 16-bit tensor unit */
    cr_assert_float_eq(device_peak(&d, XF_COMPUTE_INT8), 8e12, 1);
    cr_assert_float_eq(device_peak(&d, XF_COMPUTE_FP8), 2e12, 1);
    cr_assert_float_eq(device_peak(&d, XF_COMPUTE_COUNT), 0.0, 0.0);
    cr_assert_str_eq(compute_name(XF_COMPUTE_TENSOR16), "tensor16");
    cr_assert_str_eq(compute_name(XF_COMPUTE_INT8), "int8");
}

/* ---- the user's own file ---- */

#define CUSTOM XF_SOURCE_DIR "/tests/data/devices_custom.json"

Test(device_file, user_file) {
    device_spec d;
    cr_assert_eq(device_lookup(NULL, CUSTOM, &d), XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(d.name, "my-gpu"); /* no name: the first device */
    cr_assert_float_eq(device_ridge(&d, XF_COMPUTE_TENSOR16), 200.0, 1e-9); /* 100e12 / 500e9 */
    cr_assert_float_eq(device_peak(&d, XF_COMPUTE_FP8), 100e12, 1);    /* absent: tensor16 */
    cr_assert_eq(device_lookup("MY-CPU", CUSTOM, &d), XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(d.kind, "cpu");
    cr_assert_eq(d.measured, 1);
    cr_assert_str_eq(d.description, "my-cpu"); /* absent: the name */
    cr_assert_float_eq(d.cache_bandwidth_Bps, 400e9, 1);
    cr_assert_eq(device_lookup("h100-sxm", CUSTOM, &d), XF_EINVAL); /* only the file's devices */
    cr_assert(strstr(xf_error_msg(), "my-gpu"), "%s", xf_error_msg());
    cr_assert_eq(device_lookup(NULL, "/nonexistent/devices.json", &d), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "/nonexistent/devices.json"), "%s", xf_error_msg());
}

Test(device_file, json_round_trip) {
    device_spec a = get("rtx-4090");
    char *t = device_spec_to_json(&a);
    cr_assert_not_null(t);
    size_t cap = strlen(t) + 128;
    char *doc = malloc(cap);
    cr_assert_not_null(doc);
    snprintf(doc, cap, "{\"format\":\"xfprof-devices\",\"version\":1,\"devices\":[%s]}", t);
    device_list l;
    cr_assert_eq(device_list_parse(doc, "round-trip", &l), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(l.n, 1);
    const device_spec *b = &l.items[0];
    cr_assert_str_eq(b->name, a.name);
    cr_assert_str_eq(b->description, a.description);
    cr_assert_str_eq(b->source, a.source);
    cr_assert_eq(b->measured, a.measured);
    cr_assert_float_eq(b->memory_bytes, a.memory_bytes, 0);
    cr_assert_float_eq(b->bandwidth_Bps, a.bandwidth_Bps, 0);
    cr_assert_float_eq(b->cache_bytes, a.cache_bytes, 0);
    for (int c = 0; c < XF_COMPUTE_COUNT; c++) cr_assert_float_eq(b->peak_flops[c], a.peak_flops[c], 0);
    device_list_free(&l);
    device_list_free(&l); /* twice is fine */
    device_list_free(NULL);
    free(doc);
    free(t);
}

/* ---- bad files ---- */

static const char *DEV_OK =
    "{\"name\":\"x\",\"kind\":\"gpu\",\"memory_bytes\":1e9,\"bandwidth_Bps\":1e11,\"peak_flops\":{\"fp32\":1e12}}";

static void expect_bad(const char *text, xf_status want, const char *needle) {
    device_list l = {7, (device_spec *)&l};
    xf_status s = device_list_parse(text, "dev.json", &l);
    cr_assert_eq(s, want, "%s: status %d, wanted %d: %s", text, s, want, xf_error_msg());
    cr_assert(strstr(xf_error_msg(), needle), "message should contain '%s': %s", needle, xf_error_msg());
    cr_assert(strstr(xf_error_msg(), "dev.json"), "%s", xf_error_msg());
    cr_assert_eq(l.n, 0);
    cr_assert_null(l.items);
}

static const char *wrap(const char *device) {
    static char buf[2048];
    snprintf(buf, sizeof buf, "{\"format\":\"xfprof-devices\",\"version\":1,\"devices\":[%s]}", device);
    return buf;
}

Test(device_file, good_minimal) {
    device_list l;
    cr_assert_eq(device_list_parse(wrap(DEV_OK), "dev.json", &l), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(l.n, 1);
    cr_assert_str_eq(l.items[0].source, "unspecified");
    device_list_free(&l);
}

Test(device_file, malformed) {
    expect_bad("{\"format\":\"xfprof-devices\",\"version\":1,\"devices\":[", XF_EPARSE, "truncated");
    expect_bad("{\"format\":\"xfprof-devices\" \"version\":1}", XF_EPARSE, "invalid JSON");
    expect_bad("{\"format\":\"xfprof-devices\",\"version\":1}", XF_EINVAL, "devices");
    expect_bad("{\"format\":\"xfprof-devices\",\"version\":1,\"devices\":[]}", XF_EINVAL, "empty");
    expect_bad("{\"format\":\"xfprof-devices\",\"version\":1,\"devices\":{}}", XF_EINVAL, "array");
    expect_bad(wrap("42"), XF_EINVAL, "devices[0]");
}

Test(device_file, other_format_and_newer_version) {
    expect_bad("{\"format\":\"xfprof-record\",\"version\":1,\"devices\":[]}", XF_EFORMAT, "xfprof-record");
    expect_bad("{\"version\":1,\"devices\":[]}", XF_EFORMAT, "format");
    expect_bad("[1,2,3]", XF_EFORMAT, "devices file");
    expect_bad("{\"format\":\"xfprof-devices\",\"version\":2,\"devices\":[]}", XF_EFORMAT, "newer");
    expect_bad("{\"format\":\"xfprof-devices\",\"version\":0,\"devices\":[]}", XF_EFORMAT, "version");
    expect_bad("{\"format\":\"xfprof-devices\",\"version\":\"1\",\"devices\":[]}", XF_EINVAL, "version");
}

Test(device_file, bad_numbers) {
    expect_bad(wrap("{\"name\":\"x\",\"kind\":\"gpu\",\"memory_bytes\":1e9,\"bandwidth_Bps\":-1e11,\"peak_flops\":{\"fp32\":1e12}}"),
               XF_EINVAL, "bandwidth_Bps");
    expect_bad(wrap("{\"name\":\"x\",\"kind\":\"gpu\",\"memory_bytes\":1e9,\"bandwidth_Bps\":0,\"peak_flops\":{\"fp32\":1e12}}"),
               XF_EINVAL, "bandwidth_Bps");
    expect_bad(wrap("{\"name\":\"x\",\"kind\":\"gpu\",\"memory_bytes\":0,\"bandwidth_Bps\":1e11,\"peak_flops\":{\"fp32\":1e12}}"),
               XF_EINVAL, "memory_bytes");
    expect_bad(wrap("{\"name\":\"x\",\"kind\":\"gpu\",\"memory_bytes\":1e9,\"bandwidth_Bps\":1e11,\"peak_flops\":{\"fp32\":0}}"),
               XF_EINVAL, "fp32");
    expect_bad(wrap("{\"name\":\"x\",\"kind\":\"gpu\",\"memory_bytes\":1e9,\"bandwidth_Bps\":1e11,\"peak_flops\":{\"tensor16\":1e12}}"),
               XF_EINVAL, "fp32");
    expect_bad(wrap("{\"name\":\"x\",\"kind\":\"gpu\",\"memory_bytes\":1e9,\"bandwidth_Bps\":1e11,\"peak_flops\":{\"fp32\":1e12,\"fp8\":-5}}"),
               XF_EINVAL, "fp8");
    expect_bad(wrap("{\"name\":\"x\",\"kind\":\"gpu\",\"memory_bytes\":1e9,\"bandwidth_Bps\":1e30,\"peak_flops\":{\"fp32\":1e12}}"),
               XF_EINVAL, "bandwidth_Bps");
    expect_bad(wrap("{\"name\":\"x\",\"kind\":\"gpu\",\"memory_bytes\":\"1e9\",\"bandwidth_Bps\":1e11,\"peak_flops\":{\"fp32\":1e12}}"),
               XF_EINVAL, "memory_bytes");
    expect_bad(wrap("{\"name\":\"x\",\"kind\":\"gpu\",\"memory_bytes\":1e9,\"bandwidth_Bps\":1e11,\"cache_bytes\":-1,\"peak_flops\":{\"fp32\":1e12}}"),
               XF_EINVAL, "cache_bytes");
    expect_bad(wrap("{\"name\":\"x\",\"kind\":\"gpu\",\"memory_bytes\":1e9,\"bandwidth_Bps\":1e11,\"peak_flops\":{\"fp32\":1e12,\"fp4\":1e15}}"),
               XF_EINVAL, "fp4");
    expect_bad(wrap("{\"name\":\"x\",\"kind\":\"gpu\",\"memory_bytes\":1e9,\"bandwidth_Bps\":1e11,\"peak_flops\":[1e12]}"),
               XF_EINVAL, "peak_flops");
}

Test(device_file, bad_fields) {
    expect_bad(wrap("{\"kind\":\"gpu\",\"memory_bytes\":1e9,\"bandwidth_Bps\":1e11,\"peak_flops\":{\"fp32\":1e12}}"), XF_EINVAL, "name");
    expect_bad(wrap("{\"name\":\"my gpu\",\"kind\":\"gpu\",\"memory_bytes\":1e9,\"bandwidth_Bps\":1e11,\"peak_flops\":{\"fp32\":1e12}}"),
               XF_EINVAL, "name");
    expect_bad(wrap("{\"name\":\"x\",\"kind\":\"tpu\",\"memory_bytes\":1e9,\"bandwidth_Bps\":1e11,\"peak_flops\":{\"fp32\":1e12}}"),
               XF_EINVAL, "kind");
    expect_bad(wrap("{\"name\":\"x\",\"kind\":\"gpu\",\"bandwidth_Bps\":1e11,\"peak_flops\":{\"fp32\":1e12}}"), XF_EINVAL,
               "memory_bytes");
    expect_bad(wrap("{\"name\":\"x\",\"kind\":\"gpu\",\"memory_bytes\":1e9,\"bandwidth_Bps\":1e11}"), XF_EINVAL, "peak_flops");
    char two[1024];
    snprintf(two, sizeof two, "%s,%s", DEV_OK, DEV_OK);
    expect_bad(wrap(two), XF_EINVAL, "twice");
}

/* ---- data folder ---- */

Test(device_data, env_overrides) {
    char buf[4096];
    setenv("XFPROF_DATA_DIR", XF_SOURCE_DIR "/data", 1);
    cr_assert_eq(device_data_dir(buf, sizeof buf), XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(buf, XF_SOURCE_DIR "/data");
    cr_assert_eq(device_data_dir(buf, 4), XF_EOVERFLOW);
}

Test(device_data, falls_back_to_exe_dir) {
    /* a folder without devices.json is skipped; the test binary sits in the build folder, whose
     * data/ holds the copied devices.json */
    char buf[4096];
    setenv("XFPROF_DATA_DIR", XF_SOURCE_DIR "/tests", 1);
    cr_assert_eq(device_data_dir(buf, sizeof buf), XF_OK, "%s", xf_error_msg());
    cr_assert(strstr(buf, "/data") != NULL, "%s", buf);
    device_list l;
    cr_assert_eq(device_list_builtin(&l), XF_OK, "%s", xf_error_msg());
    cr_assert(l.n >= 7);
    cr_assert(device_list_find(&l, "L4") >= 0);
    cr_assert_eq(device_list_find(&l, "nope"), -1);
    device_list_free(&l);
}

/* ---- robustness: prefixes and random byte flips of the built-in file never crash, and every
 * accepted list holds only valid devices ---- */

Test(device_file, prefixes_and_mutations) {
    const char *full =
        "{\"format\":\"xfprof-devices\",\"version\":1,\"devices\":[{\"name\":\"a\",\"kind\":\"gpu\",\"memory_bytes\":4e10,"
        "\"bandwidth_Bps\":1.5e12,\"cache_bytes\":4e7,\"peak_flops\":{\"fp32\":1.9e13,\"tensor16\":3e14,\"fp8\":0,\"int8\":6e14},"
        "\"source\":\"s\"},{\"name\":\"b\",\"kind\":\"cpu\",\"memory_bytes\":6e10,\"bandwidth_Bps\":8e10,\"peak_flops\":{\"fp32\":2e12}}]}";
    size_t n = strlen(full);
    char *buf = malloc(n + 1);
    cr_assert_not_null(buf);
    device_list l;
    cr_assert_eq(device_list_parse(full, "f", &l), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(l.n, 2);
    device_list_free(&l);
    for (size_t k = 0; k < n; k++) {
        memcpy(buf, full, k);
        buf[k] = '\0';
        cr_assert_neq(device_list_parse(buf, "f", &l), XF_OK, "prefix of %zu bytes accepted", k);
        cr_assert_null(l.items);
    }
    unsigned seed = 777;
    const char alphabet[] = "{}[]\",:-0123456789e.tfnul \\x";
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(buf, full, n + 1);
        for (int m = 0; m < 1 + iter % 4; m++) {
            seed = seed * 1103515245u + 12345u;
            size_t pos = (seed >> 8) % n;
            seed = seed * 1103515245u + 12345u;
            buf[pos] = alphabet[(seed >> 8) % (sizeof alphabet - 1)];
        }
        xf_error_clear();
        xf_status s = device_list_parse(buf, "m", &l);
        if (s != XF_OK) {
            cr_assert(xf_error_msg()[0] != '\0', "error without a message for %s", buf);
            continue;
        }
        for (int i = 0; i < l.n; i++) {
            const device_spec *d = &l.items[i];
            cr_assert(d->memory_bytes > 0 && d->bandwidth_Bps > 0 && d->peak_flops[XF_COMPUTE_FP32] > 0, "%s", buf);
            cr_assert(device_ridge(d, XF_COMPUTE_TENSOR16) > 0 && isfinite(device_ridge(d, XF_COMPUTE_INT8)), "%s", buf);
        }
        device_list_free(&l);
    }
    free(buf);
}
