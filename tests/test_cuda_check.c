/* reference_model/cuda_check: the GPU path's host-side checks on recorded inputs (logit rows as a
 * bf16 GPU and an fp32 CPU give them, library versions as cuBLAS / CUPTI report them). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "reference_model/cuda_check.h"

Test(cuda_check, debug_env) {
    cr_assert_eq(cuda_check_debug_env(NULL), 0);
    cr_assert_eq(cuda_check_debug_env(""), 0);
    cr_assert_eq(cuda_check_debug_env("0"), 0);
    cr_assert_eq(cuda_check_debug_env("off"), 0);
    cr_assert_eq(cuda_check_debug_env("1"), 1);
    cr_assert_eq(cuda_check_debug_env("ON"), 1);
    cr_assert_eq(cuda_check_debug_env("yes"), 1);
}

Test(cuda_check, op_label_names_the_op) {
    char b[96];
    cr_assert_str_eq(cuda_check_op_label(b, sizeof b, XF_DECODE, 3, OP_ATTENTION, 7), "op decode/L3/attention (step 7)");
    cr_assert_str_eq(cuda_check_op_label(b, sizeof b, XF_PREFILL, -1, OP_EMBEDDING, 0), "op prefill/G/embedding");
    char small[8];
    cuda_check_op_label(small, sizeof small, XF_DECODE, 3, OP_ATTENTION, 7);
    cr_assert_eq(strlen(small), 7, "truncated, terminated");
}

Test(cuda_check, library_versions) {
    /* cuptiGetVersion: CUDA 13 uses xxyyzz, CUDA 12.x the small API numbers */
    cr_assert_eq(cuda_check_cupti_major(130001), 13);
    cr_assert_eq(cuda_check_cupti_major(130000), 13);
    cr_assert_eq(cuda_check_cupti_major(28), 12);
    cr_assert_eq(cuda_check_cupti_major(19), 12);
    cr_assert_eq(cuda_check_cupti_major(18), 11);
    cr_assert_eq(cuda_check_cupti_major(12), 10);
    cr_assert_eq(cuda_check_cupti_major(0), 0);
    cr_assert_eq(cuda_check_lib_version("cuBLAS", "/x/libcublas.so.13", 13, 13), XF_OK);
    cr_assert_eq(cuda_check_lib_version("CUPTI", "/usr/lib/x86_64-linux-gnu/libcupti.so", 12, 13), XF_EUNSUPPORTED);
    const char *m = xf_error_msg();
    cr_assert(strstr(m, "CUPTI") && strstr(m, "/usr/lib/x86_64-linux-gnu/libcupti.so") && strstr(m, "CUDA 12") &&
                  strstr(m, "CUDA 13") && strstr(m, "LD_LIBRARY_PATH"),
              "names the library, the file, both versions and the fix: %s", m);
    cr_assert_eq(cuda_check_lib_version("cuBLAS", NULL, -1, 13), XF_EUNSUPPORTED);
    cr_assert_neq(strstr(xf_error_msg(), "unknown file"), NULL, "%s", xf_error_msg());
}

enum { V = 64 };

/* A CPU row with a clear winner at `top` (gap `gap`), values about +-8, and its GPU copy moved
 * by `noise` (a bf16-like relative error) with an optional swap of the top two. */
static void rows(float *cpu, float *gpu, int top, double gap, double noise, int swap_top) {
    for (int i = 0; i < V; i++) cpu[i] = (float)(8.0 * sin(0.7 * i) - 9.0); /* all below -1 */
    cpu[top] = 4.0f;
    cpu[(top + 1) % V] = (float)(4.0 - gap);
    for (int i = 0; i < V; i++) gpu[i] = (float)(cpu[i] * (1.0 + noise * ((i % 3) - 1)));
    if (swap_top) {
        float t = gpu[top];
        gpu[top] = gpu[(top + 1) % V];
        gpu[(top + 1) % V] = t;
    }
}

Test(cuda_check, logits_within_tolerance) {
    float c[V], g[V];
    cuda_check_step st;
    rows(c, g, 5, 2.0, 0.004, 0);
    cr_assert_eq(cuda_check_logits(g, c, V, 0.02, &st), XF_OK, "%s", xf_error_msg());
    cr_assert_float_eq(st.scale, 17.0, 1.0); /* max |cpu| */
    cr_assert_lt(st.max_err, 0.02);
    cr_assert_eq(st.cpu_top, 5);
    cr_assert_eq(st.gpu_top, 5);
    cr_assert_eq(st.decisive, 1, "gap 2 / scale 17 = 0.12 > 2 * 0.02");
    cr_assert_eq(st.ok, 1);
}

Test(cuda_check, close_call_may_flip) {
    /* top-2 gap 0.1 on a scale of 17: 0.006 < 2 * tol, a bf16 GEMM may order them either way */
    float c[V], g[V];
    cuda_check_step st;
    rows(c, g, 9, 0.1, 0.0, 1);
    cr_assert_eq(cuda_check_logits(g, c, V, 0.02, &st), XF_OK);
    cr_assert_eq(st.decisive, 0);
    cr_assert_neq(st.cpu_top, st.gpu_top);
    cr_assert_eq(st.ok, 1, "a flip inside the tolerance is no failure");
    cuda_check_summary sm;
    cuda_check_summary_init(&sm);
    cuda_check_summary_add(&sm, &st);
    cr_assert_eq(sm.close_calls, 1);
    cr_assert_eq(sm.failures, 0);
}

Test(cuda_check, decisive_flip_fails) {
    /* gap 3 on a scale of 17 (0.18 > 2 * 0.05) and the GPU ranks them the other way: wrong */
    float c[V], g[V];
    cuda_check_step st;
    rows(c, g, 20, 3.0, 0.0, 1);
    cr_assert_eq(cuda_check_logits(g, c, V, 0.05, &st), XF_OK);
    cr_assert_eq(st.decisive, 1);
    cr_assert_eq(st.ok, 0);
}

Test(cuda_check, large_error_fails_and_summary_says_where) {
    float c[V], g[V];
    cuda_check_step st;
    cuda_check_summary sm;
    cuda_check_summary_init(&sm);
    for (int step = 0; step < 4; step++) {
        rows(c, g, step, 2.0, step == 2 ? 0.2 : 0.002, 0);
        cr_assert_eq(cuda_check_logits(g, c, V, 0.05, &st), XF_OK);
        cuda_check_summary_add(&sm, &st);
    }
    cr_assert_eq(sm.steps, 4);
    cr_assert_eq(sm.failures, 1);
    cr_assert_eq(sm.first_failure, 2);
    cr_assert_gt(sm.max_err, 0.05);
    char line[256];
    cuda_check_summary_line(&sm, 0.05, line, sizeof line);
    cr_assert_neq(strstr(line, "FAILED"), NULL, "%s", line);
    cr_assert_neq(strstr(line, "first at step 2"), NULL, "%s", line);
    cuda_check_summary_init(&sm);
    cr_assert_neq(strstr(cuda_check_summary_line(&sm, 0.05, line, sizeof line), "nothing compared"), NULL, "%s", line);
    rows(c, g, 1, 2.0, 0.001, 0);
    cuda_check_logits(g, c, V, 0.05, &st);
    cuda_check_summary_add(&sm, &st);
    cr_assert_neq(strstr(cuda_check_summary_line(&sm, 0.05, line, sizeof line), ": ok"), NULL, "%s", line);
}

Test(cuda_check, bad_input_rejected) {
    float c[V], g[V];
    cuda_check_step st;
    rows(c, g, 1, 2.0, 0, 0);
    cr_assert_eq(cuda_check_logits(g, c, 1, 0.05, &st), XF_EINVAL);
    cr_assert_eq(cuda_check_logits(g, c, V, 0, &st), XF_EINVAL);
    g[7] = NAN;
    cr_assert_eq(cuda_check_logits(g, c, V, 0.05, &st), XF_EINVAL);
    cr_assert_neq(strstr(xf_error_msg(), "GPU logit 7"), NULL, "%s", xf_error_msg());
    g[7] = 0;
    c[3] = INFINITY;
    cr_assert_eq(cuda_check_logits(g, c, V, 0.05, &st), XF_EINVAL);
}

Test(cuda_check, replay_against_op_by_op) {
    int32_t a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 2, 3, 4, 5, 6};
    float la[2 * V], lb[2 * V];
    rows(la, lb, 3, 2.0, 0, 0);
    rows(la + V, lb + V, 4, 2.0, 0, 0);
    char msg[256];
    cr_assert_eq(cuda_check_replay(a, b, 2, 3, la, lb, V, 1e-5, msg, sizeof msg), 1, "%s", msg);
    cr_assert_neq(strstr(msg, "equal"), NULL, "%s", msg);
    a[4] = 9; /* sequence 1, token 1 */
    cr_assert_eq(cuda_check_replay(a, b, 2, 3, la, lb, V, 1e-5, msg, sizeof msg), 0);
    cr_assert_neq(strstr(msg, "sequence 1 token 1 is 9, op by op 5"), NULL, "%s", msg);
    a[4] = 5;
    la[V + 10] += 1.0f; /* logits off */
    cr_assert_eq(cuda_check_replay(a, b, 2, 3, la, lb, V, 1e-5, msg, sizeof msg), 0);
    cr_assert_neq(strstr(msg, "last logits"), NULL, "%s", msg);
    cr_assert_eq(cuda_check_replay(a, b, 0, 3, la, lb, V, 1e-5, msg, sizeof msg), -1);
}
