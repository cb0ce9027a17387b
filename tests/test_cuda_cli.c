/* What `xfprof run --device cuda` needs that needs no GPU: per-op kernel times from recorded CUPTI
 * activity (probes/kernel_times.c, through the real cupti_attribute), the GPU machine file's path
 * (probes/ceilings.c), and the plain "no CUDA device present" message (cli/cuda_cli.c, linked
 * from the xfprof_cli library). */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cuda_cli.h"
#include "probes/ceilings.h"
#include "probes/kernel_times.h"

static cupti_kernel_rec krec(uint64_t s, uint64_t e, uint32_t corr) {
    cupti_kernel_rec k;
    memset(&k, 0, sizeof k);
    k.start_ns = s;
    k.end_ns = e;
    k.correlation_id = corr;
    snprintf(k.name, sizeof k.name, "k%u", corr);
    return k;
}

static void set_op(record_op *op, xf_phase ph, int layer, op_kind k) {
    memset(op, 0, sizeof *op);
    op->cost.phase = ph;
    op->cost.layer = layer;
    op->cost.kind = k;
}

/* One repetition of recorded activity for a 2-layer model, 2 decode steps (times in ns):
 *   prefill L0 qkv: kernels of 10000 + 1000 r and 5000        -> 15 + r us
 *   prefill L1 qkv: one kernel of 7000 + 1000 r, not in rep 1  -> 7 us (rep 0), 9 us (rep 2)
 *   decode  L0 qkv: step 1 3000 + 1000 r, step 2 5000          -> (8 + r) us over 2 steps
 *   decode  L1 qkv: 2000 (an op the point lacks: ignored)
 *   one kernel with no external id (unattributed). */
static void one_rep(int r, cupti_attribution *out) {
    probe_range p0 = {XF_PREFILL, 0, OP_QKV, 0}, p1 = {XF_PREFILL, 1, OP_QKV, 0};
    probe_range d1 = {XF_DECODE, 0, OP_QKV, 1}, d2 = {XF_DECODE, 0, OP_QKV, 2}, x = {XF_DECODE, 1, OP_QKV, 1};
    uint64_t u = (uint64_t)r * 1000;
    cupti_kernel_rec k[7];
    cupti_extcorr_rec e[6];
    int nk = 0, ne = 0;
    k[nk++] = krec(1000, 11000 + u, 1);
    k[nk++] = krec(12000, 17000, 2);
    e[ne++] = (cupti_extcorr_rec){1, cupti_extid_encode(&p0)};
    e[ne++] = (cupti_extcorr_rec){2, cupti_extid_encode(&p0)};
    if (r != 1) {
        k[nk++] = krec(20000, 27000 + u, 3);
        e[ne++] = (cupti_extcorr_rec){3, cupti_extid_encode(&p1)};
    }
    k[nk++] = krec(30000, 33000 + u, 4);
    e[ne++] = (cupti_extcorr_rec){4, cupti_extid_encode(&d1)};
    k[nk++] = krec(40000, 45000, 5);
    e[ne++] = (cupti_extcorr_rec){5, cupti_extid_encode(&d2)};
    k[nk++] = krec(50000, 52000, 6);
    e[ne++] = (cupti_extcorr_rec){6, cupti_extid_encode(&x)};
    k[nk++] = krec(60000, 61000, 99); /* a memcpy-side kernel with no external id */
    cr_assert_eq(cupti_attribute(k, nk, e, ne, out), XF_OK);
}

Test(cuda_cli, kernel_times_per_op_median_per_step) {
    record_op ops[5];
    set_op(&ops[0], XF_PREFILL, 0, OP_QKV);
    set_op(&ops[1], XF_PREFILL, 1, OP_QKV);
    set_op(&ops[2], XF_DECODE, 0, OP_QKV);
    set_op(&ops[3], XF_DECODE, -1, OP_LM_HEAD); /* no kernels: no counter */
    set_op(&ops[4], XF_PREFILL, -1, OP_KV_ALLOC);
    ops[4].n_counters = RECORD_MAX_COUNTERS; /* every slot taken (counters mode): nothing appended */
    record_point p;
    memset(&p, 0, sizeof p);
    p.ops = ops;
    p.n_ops = 5;
    kernel_times kt;
    cr_assert_eq(kernel_times_init(&kt, &p, 2, 3), XF_OK);
    for (int r = -1; r < 3; r++) { /* r = -1: a warm-up, ignored */
        cupti_attribution a;
        one_rep(r < 0 ? 5 : r, &a);
        kernel_times_add(&kt, &a, r);
        cupti_attribution_free(&a);
    }
    cr_assert_eq(kt.unattributed, 3); /* one per kept repetition */
    cr_assert_eq(kt.bad_records, 0);
    /* prefill L0: 15, 16, 17 us -> median 16 us */
    cr_assert_eq(kernel_times_fill(&kt, 0, 2, &ops[0]), 1);
    cr_assert_eq(ops[0].n_counters, 1);
    cr_assert_str_eq(ops[0].counters[0].name, "gpu_kernel_time_s");
    cr_assert_eq(ops[0].counters[0].supported, 1);
    cr_assert_float_eq(ops[0].counters[0].value, 16e-6, 1e-15);
    /* prefill L1: 7 and 9 us (rep 1 saw none) -> median of two = 8 us */
    cr_assert_eq(kernel_times_fill(&kt, 1, 2, &ops[1]), 1);
    cr_assert_float_eq(ops[1].counters[0].value, 8e-6, 1e-15);
    /* decode L0: (8 + r) us over 2 steps -> 4, 4.5, 5 us per step -> median 4.5 us */
    cr_assert_eq(kernel_times_fill(&kt, 2, 2, &ops[2]), 1);
    cr_assert_float_eq(ops[2].counters[0].value, 4.5e-6, 1e-15);
    cr_assert_eq(kernel_times_fill(&kt, 3, 2, &ops[3]), 0);
    cr_assert_eq(ops[3].n_counters, 0);
    cr_assert_eq(kernel_times_fill(&kt, 4, 2, &ops[4]), 0);
    cr_assert_eq(ops[4].n_counters, RECORD_MAX_COUNTERS);
    cr_assert_eq(kernel_times_fill(&kt, 5, 2, &ops[0]), 0); /* op index out of range */
    kernel_times_free(&kt);
    kernel_times_free(&kt); /* zeroed: a no-op */
    kernel_times_free(NULL);
}

Test(cuda_cli, kernel_times_bad_sizes) {
    record_point p;
    memset(&p, 0, sizeof p);
    kernel_times kt;
    cr_assert_eq(kernel_times_init(&kt, &p, 2, 0), XF_EINVAL);
    cr_assert_eq(kernel_times_init(&kt, &p, 0, 3), XF_EINVAL);
    cr_assert_eq(kernel_times_init(&kt, NULL, 2, 3), XF_EINVAL);
    kernel_times_add(&kt, NULL, 0); /* after a failed init: ignored */
}

Test(cuda_cli, gpu_machine_path) {
    char buf[4096];
    setenv("XFPROF_GPU_MACHINE_FILE", "/tmp/x/gpu.json", 1);
    cr_assert_eq(ceilings_gpu_machine_path(buf, sizeof buf), XF_OK);
    cr_assert_str_eq(buf, "/tmp/x/gpu.json");
    unsetenv("XFPROF_GPU_MACHINE_FILE");
    setenv("XFPROF_MACHINE_FILE", "/tmp/x/machine.json", 1);
    cr_assert_eq(ceilings_gpu_machine_path(buf, sizeof buf), XF_OK);
    cr_assert_str_eq(buf, "/tmp/x/machine-cuda.json");
    setenv("XFPROF_MACHINE_FILE", "/tmp/x/m", 1);
    cr_assert_eq(ceilings_gpu_machine_path(buf, sizeof buf), XF_OK);
    cr_assert_str_eq(buf, "/tmp/x/m-cuda.json");
    cr_assert_eq(ceilings_gpu_machine_path(buf, 8), XF_EINVAL); /* does not fit */
    unsetenv("XFPROF_MACHINE_FILE");
}

Test(cuda_cli, unsupported_message_is_plain, .init = cr_redirect_stderr) {
    xf_errorf(XF_EUNSUPPORTED, "no CUDA device: this xfprof was built without CUDA");
    cr_assert_eq(cli_cuda_unsupported("run"), CLI_EXIT_UNSUPPORTED);
    xf_errorf(XF_EUNSUPPORTED, "no CUDA device present: the driver reports 0 devices");
    cr_assert_eq(cli_cuda_unsupported("machine"), CLI_EXIT_UNSUPPORTED);
    xf_errorf(XF_EUNSUPPORTED, "libcupti.so.13 not found");
    cr_assert_eq(cli_cuda_unsupported("run"), CLI_EXIT_UNSUPPORTED);
    fflush(stderr);
    cr_assert_stderr_eq_str("xfprof run: no CUDA device present: this xfprof was built without CUDA\n"
                            "xfprof machine: no CUDA device present: the driver reports 0 devices\n"
                            "xfprof run: no CUDA device present: libcupti.so.13 not found\n");
}
