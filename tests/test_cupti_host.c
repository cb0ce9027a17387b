/* CUPTI host-side logic on recorded inputs: hand-made activity records and metric tables. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probes/cupti_host.h"

Test(cupti_host, range_names_round_trip) {
    char buf[CUPTI_RANGE_NAME_MAX];
    probe_range r = {XF_PREFILL, 3, OP_QKV, 0}, back;
    cr_assert_str_eq(cupti_range_name(&r, buf, sizeof buf), "prefill/L3/qkv/s0");
    cr_assert_eq(cupti_range_parse(buf, &back), XF_OK, "%s", xf_error_msg());
    cr_assert(back.phase == XF_PREFILL && back.layer == 3 && back.kind == OP_QKV && back.step == 0);
    probe_range g = {XF_DECODE, -1, OP_LM_HEAD, 17};
    cr_assert_str_eq(cupti_range_name(&g, buf, sizeof buf), "decode/G/lm_head/s17");
    cr_assert_eq(cupti_range_parse(buf, &back), XF_OK);
    cr_assert(back.phase == XF_DECODE && back.layer == -1 && back.kind == OP_LM_HEAD && back.step == 17);
}

Test(cupti_host, range_names_rejected) {
    probe_range r;
    const char *bad[] = {"", "prefill/L3/qkv", "prefill/L3/qkv/s0/x", "warmup/L3/qkv/s0", "prefill/3/qkv/s0",
                         "prefill/L/qkv/s0", "prefill/L3x/qkv/s0", "prefill/L3/frobnicate/s0", "prefill/L3/qkv/0",
                         "prefill/L3/qkv/s-1", "prefill/L-2/qkv/s0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(cupti_range_parse(bad[i], &r), XF_EPARSE, "accepted '%s'", bad[i]);
    cr_assert_neq(strstr(xf_error_msg(), "L-2"), NULL, "message names the bad part: %s", xf_error_msg());
}

Test(cupti_host, external_ids_round_trip) {
    probe_range r = {XF_DECODE, 31, OP_ATTENTION, 1000}, back;
    uint64_t id = cupti_extid_encode(&r);
    /* bit 63 | 1000 << 24 | 1 << 22 | 32 << 6 | 5 */
    uint64_t expect = (1ULL << 63) | (1000ULL << 24) | (1ULL << 22) | (32ULL << 6) | (uint64_t)OP_ATTENTION;
    cr_assert_eq(id, expect);
    cr_assert_eq(cupti_extid_decode(id, &back), 1);
    cr_assert(back.phase == XF_DECODE && back.layer == 31 && back.kind == OP_ATTENTION && back.step == 1000);
    probe_range g = {XF_PREFILL, -1, OP_EMBEDDING, 0};
    cr_assert_eq(cupti_extid_decode(cupti_extid_encode(&g), &back), 1);
    cr_assert(back.layer == -1 && back.kind == OP_EMBEDDING && back.step == 0);
    cr_assert_eq(cupti_extid_decode(42, &back), 0);                        /* not tagged */
    cr_assert_eq(cupti_extid_decode((1ULL << 63) | 63, &back), 0);         /* kind out of range */
}

static cupti_kernel_rec krec(uint64_t s, uint64_t e, uint32_t corr, const char *name) {
    cupti_kernel_rec k;
    memset(&k, 0, sizeof k);
    k.start_ns = s;
    k.end_ns = e;
    k.correlation_id = corr;
    snprintf(k.name, sizeof k.name, "%s", name);
    return k;
}

Test(cupti_host, kernels_attributed_to_ranges) {
    probe_range qkv = {XF_DECODE, 0, OP_QKV, 1}, att = {XF_DECODE, 0, OP_ATTENTION, 1};
    /* qkv: one GEMM kernel 1000..1600 (600 ns) and a bias kernel 1700..1750 (50 ns): kernel time 650,
     * span 750. attention: 2000..2900 (900). Correlation 7 has no external id (a memset). Correlation
     * 9 is tagged with a foreign id. One record has end < start. Records arrive out of order. */
    cupti_kernel_rec k[] = {
        krec(2000, 2900, 5, "attn_decode"), krec(1700, 1750, 4, "bias_add"), krec(1000, 1600, 3, "gemm"),
        krec(2950, 2960, 7, "memset"),     krec(3000, 3100, 9, "other"),    krec(4000, 3000, 10, "broken"),
    };
    cupti_extcorr_rec e[] = {
        {5, cupti_extid_encode(&att)}, {3, cupti_extid_encode(&qkv)}, {4, cupti_extid_encode(&qkv)}, {9, 12345},
    };
    cupti_attribution a;
    cr_assert_eq(cupti_attribute(k, 6, e, 4, &a), XF_OK);
    cr_assert_eq(a.n, 2);
    cr_assert_eq(a.unattributed, 2);
    cr_assert_eq(a.bad_records, 1);
    /* sorted by first start: qkv then attention */
    cr_assert_eq(a.items[0].range.kind, OP_QKV);
    const cupti_range_time *t = cupti_attribution_find(&a, &qkv);
    cr_assert_not_null(t);
    cr_assert_eq(t->n_kernels, 2);
    cr_assert_float_eq(t->kernel_s, 650e-9, 1e-15);
    cr_assert_float_eq(t->span_s, 750e-9, 1e-15);
    t = cupti_attribution_find(&a, &att);
    cr_assert_eq(t->n_kernels, 1);
    cr_assert_float_eq(t->kernel_s, 900e-9, 1e-15);
    probe_range none = {XF_PREFILL, 0, OP_QKV, 0};
    cr_assert_null(cupti_attribution_find(&a, &none));
    cupti_attribution_free(&a);
    cupti_attribution_free(NULL);
    /* no external records at all: everything unattributed */
    cr_assert_eq(cupti_attribute(k, 3, NULL, 0, &a), XF_OK);
    cr_assert_eq(a.n, 0);
    cr_assert_eq(a.unattributed, 3);
    cupti_attribution_free(&a);
}

Test(cupti_host, dropped_records_reported) {
    cr_assert_eq(cupti_check_dropped(0, 8 << 20), XF_OK);
    cr_assert_eq(cupti_check_dropped(12, 8 << 20), XF_EIO);
    cr_assert_neq(strstr(xf_error_msg(), "dropped 12"), NULL, "%s", xf_error_msg());
    cr_assert_neq(strstr(xf_error_msg(), "8192 KiB"), NULL, "%s", xf_error_msg());
}

Test(cupti_host, metric_values_and_missing) {
    cupti_metric_values m;
    cupti_metric_values_clear(&m);
    /* a copy kernel of 1 MiB: read 1048576, write 1048576; time 2000 ns; FP32: 10 fadd, 20 fmul, 30 ffma */
    cr_assert_eq(cupti_metric_values_set(&m, "dram__bytes_read.sum", 1048576), XF_OK);
    cr_assert_eq(cupti_metric_values_set(&m, "dram__bytes_write.sum", 1048576), XF_OK);
    cr_assert_eq(cupti_metric_values_set(&m, "gpu__time_duration.sum", 2000), XF_OK);
    cr_assert_eq(cupti_metric_values_set(&m, "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", 10), XF_OK);
    cr_assert_eq(cupti_metric_values_set(&m, "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", 20), XF_OK);
    cr_assert_eq(cupti_metric_values_set(&m, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 30), XF_OK);
    cr_assert_eq(cupti_metric_values_set(&m, "dram__bytes.sum", 1), XF_EINVAL);
    cr_assert_eq(cupti_metric_values_set(&m, "lts__t_bytes.sum", -1), XF_EINVAL);
    cr_assert_eq(cupti_metric_values_set(&m, "lts__t_bytes.sum", NAN), XF_EINVAL);
    cupti_op_counts c;
    cupti_op_counts_of(&m, 0, &c);
    cr_assert_eq(c.have_bytes, 1);
    cr_assert_float_eq(c.dram_bytes, 2097152.0, 1e-9); /* 2 x 1 MiB */
    cr_assert_float_eq(c.gpu_time_s, 2e-6, 1e-18);
    cr_assert_float_eq(c.fp32_flops, 10 + 20 + 2 * 30.0, 1e-9);
    cr_assert_eq(c.have_flops, 0); /* tensor metric missing and not calibrated */
    cr_assert_eq(c.n_missing, 2);  /* lts and tensor */

    record_op op;
    memset(&op, 0, sizeof op);
    cupti_fill_record_op(&m, 0, &op);
    cr_assert_eq(op.n_counters, 8);
    cr_assert_eq(op.bytes_from_counters, 1);
    cr_assert_float_eq(op.measured_bytes, 2097152.0, 1e-9);
    cr_assert_str_eq(op.counters[1].name, "dram__bytes_read.sum");
    cr_assert_eq(op.counters[3].supported, 0); /* lts missing -> "unsupported" */
    cr_assert_eq(op.counters[4].supported, 0);
    cr_assert_eq(op.counters[7].supported, 1);
    cr_assert_float_eq(op.counters[7].value, 30.0, 1e-12);
    for (int i = 0; i < op.n_counters; i++) cr_assert_lt(strlen(op.counters[i].name), sizeof op.counters[i].name);

    /* no DRAM write: bytes not from counters */
    cupti_metric_values m2;
    cupti_metric_values_clear(&m2);
    cupti_metric_values_set(&m2, "dram__bytes_read.sum", 5);
    memset(&op, 0, sizeof op);
    cupti_fill_record_op(&m2, 0, &op);
    cr_assert_eq(op.bytes_from_counters, 0);
    cr_assert_eq(op.measured_bytes, 0);
}

Test(cupti_host, tensor_calibration) {
    /* GEMM 4096^3: 2*4096^3 = 137438953472 FLOPs. A metric of 268435456 (= 2^28) means 512 FLOPs per unit. */
    double unit = 0;
    cr_assert_eq(cupti_tensor_calibrate(268435456.0, 4096, 4096, 4096, &unit), XF_OK, "%s", xf_error_msg());
    cr_assert_float_eq(unit, 512.0, 1e-12);
    /* 1% off (launch extras counted) still rounds to 512 */
    cr_assert_eq(cupti_tensor_calibrate(268435456.0 * 1.01, 4096, 4096, 4096, &unit), XF_OK);
    cr_assert_float_eq(unit, 512.0, 1e-12);
    /* ratio 1.5 * 2^k: rejected */
    cr_assert_eq(cupti_tensor_calibrate(268435456.0 / 1.5, 4096, 4096, 4096, &unit), XF_EINVAL);
    cr_assert_eq(cupti_tensor_calibrate(0, 4096, 4096, 4096, &unit), XF_EINVAL);
    cr_assert_eq(cupti_tensor_calibrate(1, 0, 4096, 4096, &unit), XF_EINVAL);

    cupti_metric_values m;
    cupti_metric_values_clear(&m);
    for (int i = 0; i < CUPTI_M_COUNT; i++) cupti_metric_values_set(&m, cupti_metric_names[i], 0);
    cupti_metric_values_set(&m, "sm__ops_path_tensor_src_bf16_dst_fp32.sum", 1000);
    cupti_metric_values_set(&m, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 7);
    cupti_op_counts c;
    cupti_op_counts_of(&m, 512, &c);
    cr_assert_eq(c.have_flops, 1);
    cr_assert_float_eq(c.tensor_flops, 512000.0, 1e-9);
    cr_assert_float_eq(c.flops, 512000.0 + 14.0, 1e-9);
    cr_assert_eq(c.n_missing, 0);
}

Test(cupti_host, metric_list_lookup) {
    const char *list = "chips: GA100 GH100\n"
                       "0 dram__bytes_read\n"
                       "0 LTS.TriageCompute.lts__t_bytes\n"
                       "1 LTS.TriageCompute.lts__average_t_sector_hit_rate\n"
                       "2 FBSP.TriageCompute.dramc__read_throughput\n";
    cr_assert_eq(cupti_metric_in_list(list, "dram__bytes_read.sum"), 1);
    cr_assert_eq(cupti_metric_in_list(list, "lts__t_bytes.sum"), 1);
    cr_assert_eq(cupti_metric_in_list(list, "lts__t_bytes.ratio"), 0);
    cr_assert_eq(cupti_metric_in_list(list, "lts__average_t_sector_hit_rate.ratio"), 1);
    cr_assert_eq(cupti_metric_in_list(list, "dramc__read_throughput.pct_of_peak_sustained_elapsed"), 1);
    cr_assert_eq(cupti_metric_in_list(list, "dram__bytes.sum"), 0); /* prefix of a name is not a name */
    cr_assert_eq(cupti_metric_in_list(list, "dram__bytes_read"), 0); /* no rollup */
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = NULL; }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

Test(cupti_host, every_metric_exists_on_ga100_and_gh100) {
    const char *chips[2] = {"GA100", "GH100"};
    for (int c = 0; c < 2; c++) {
        char path[512];
        snprintf(path, sizeof path, "%s/../shared/cupti/list_%s.txt", XF_SOURCE_DIR, chips[c]);
        char *text = slurp(path);
        if (!text) {
            snprintf(path, sizeof path, "/work/shared/cupti/list_%s.txt", chips[c]);
            text = slurp(path);
        }
        if (!text) cr_skip_test("metric list %s not present in this checkout", path);
        for (int i = 0; i < CUPTI_M_COUNT; i++)
            cr_assert_eq(cupti_metric_in_list(text, cupti_metric_names[i]), 1, "%s missing on %s",
                         cupti_metric_names[i], chips[c]);
        free(text);
    }
}

Test(cupti_host, privileges_hint_names_the_setting) {
    cr_assert_neq(strstr(cupti_privileges_hint(), "NVreg_RestrictProfilingToAdminUsers=0"), NULL);
}

#include "runner/cupti_collect.h"

Test(cupti_host, collected_counters_go_to_matching_ops) {
    /* Results for prefill L0 qkv (step 0), decode L0 qkv at steps 1 and 2; a record point with a
     * prefill qkv, a decode qkv and a decode attention op; decode step 2 is the one summarised. */
    probe_range rr[3] = {{XF_PREFILL, 0, OP_QKV, 0}, {XF_DECODE, 0, OP_QKV, 1}, {XF_DECODE, 0, OP_QKV, 2}};
    cupti_metric_values vv[3];
    for (int i = 0; i < 3; i++) {
        cupti_metric_values_clear(&vv[i]);
        cupti_metric_values_set(&vv[i], "dram__bytes_read.sum", 1000.0 * (i + 1));
        cupti_metric_values_set(&vv[i], "dram__bytes_write.sum", 10.0);
    }
    cupti_collect_result r = {3, rr, vv, 0, {1, 1}};
    record_op ops[3];
    memset(ops, 0, sizeof ops);
    ops[0].cost.phase = XF_PREFILL; ops[0].cost.layer = 0; ops[0].cost.kind = OP_QKV;
    ops[1].cost.phase = XF_DECODE;  ops[1].cost.layer = 0; ops[1].cost.kind = OP_QKV;
    ops[2].cost.phase = XF_DECODE;  ops[2].cost.layer = 0; ops[2].cost.kind = OP_ATTENTION;
    record_point pt;
    memset(&pt, 0, sizeof pt);
    pt.n_ops = 3;
    pt.ops = ops;
    cr_assert_eq(cupti_collect_apply(&r, 2, &pt), 2);
    cr_assert_float_eq(ops[0].measured_bytes, 1010.0, 1e-9); /* prefill: 1000 + 10 */
    cr_assert_float_eq(ops[1].measured_bytes, 3010.0, 1e-9); /* decode step 2: 3000 + 10 */
    cr_assert_eq(ops[2].bytes_from_counters, 0);              /* no attention range: cost model bytes */
    cr_assert_eq(ops[2].n_counters, 0);
}

Test(cupti_host, collect_without_device_is_unsupported) {
    cupti_collect_args a = {0};
    cupti_collect_result r;
    cr_assert_eq(cupti_collect_counters(&a, &r), XF_EINVAL); /* no model */
    cupti_collect_result_free(&r);
    cupti_collect_result_free(NULL);
}

Test(cupti_host, nvtx_probe_is_callable_without_a_tool) {
    /* NVTX with no tool injected (or a build without CUDA) does nothing; the probe must still be
     * a complete table that the model runner can call. */
    probe p = cupti_nvtx_probe();
    cr_assert_str_eq(p.name, "nvtx");
    cr_assert_not_null(p.range_begin);
    cr_assert_not_null(p.range_end);
    cr_assert_not_null(p.free);
    probe_range r = {XF_DECODE, 2, OP_SWIGLU, 4};
    p.range_begin(p.ctx, &r);
    p.range_end(p.ctx, &r);
    p.free(p.ctx);
}

/* CUptiResult values as cupti_result.h (CUDA 13) numbers them; cupti_probe.cpp static_asserts them. */
Test(cupti_host, cupti_results_classified) {
    int priv = -1;
    cr_assert_eq(cupti_result_status(0, &priv), XF_OK); /* CUPTI_SUCCESS */
    cr_assert_eq(priv, 0);
    cr_assert_eq(cupti_result_status(35, &priv), XF_EUNSUPPORTED); /* INSUFFICIENT_PRIVILEGES */
    cr_assert_eq(priv, 1);
    cr_assert_eq(cupti_result_status(40, &priv), XF_EUNSUPPORTED); /* VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES */
    cr_assert_eq(priv, 1);
    /* not available in this setup: degrade, no permission hint */
    const int unsupported[] = {11, 14, 15, 26, 27, 33, 36, 38, 39, 41, 42, 43, 44, 45, 46};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        priv = -1;
        cr_assert_eq(cupti_result_status(unsupported[i], &priv), XF_EUNSUPPORTED, "code %d", unsupported[i]);
        cr_assert_eq(priv, 0, "code %d", unsupported[i]);
    }
    /* misuse or a broken install: an error, not a silent downgrade */
    const int errors[] = {1, 3, 7, 8, 17, 999};
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        cr_assert_eq(cupti_result_status(errors[i], NULL), XF_EIO, "code %d", errors[i]);
}
