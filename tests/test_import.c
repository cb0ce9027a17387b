/* importers/: torch.profiler traces -> records. Small traces written here exercise one rule
 * each (nesting, counting once, kernels joined to ops, refusals); the real traces under
 * tests/data/torch/ (made by scripts/make-torch-traces.py) are checked against sums over their
 * own events in tests/cli_import.sh. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/record.h"
#include "importers/importer.h"
#include "importers/torch_ops.h"

static xf_status imp(const char *json, record *r, import_stats *st) {
    return import_torch_trace_buffer(json, strlen(json), "t.json", r, st);
}

/* ---------- formulas ---------- */

static torch_input tensor(int eb, int nd, const int64_t *d) {
    torch_input t;
    memset(&t, 0, sizeof t);
    t.ndim = nd;
    t.elem_bytes = eb;
    for (int i = 0; i < nd; i++) t.dims[i] = d[i];
    return t;
}

Test(torch_ops, mm_addmm_bmm_linear) {
    torch_op_args a;
    torch_op_cost c;
    memset(&a, 0, sizeof a);
    a.n_inputs = 2;
    a.in[0] = tensor(4, 2, (int64_t[]){8, 64});
    a.in[1] = tensor(4, 2, (int64_t[]){64, 32});
    torch_op_cost_of("aten::mm", &a, &c);
    cr_assert_eq(c.cls, TORCH_OP_MATRIX);
    cr_assert_float_eq(c.flops, 2.0 * 8 * 64 * 32, 0);
    cr_assert_float_eq(c.bytes, (8 * 64 + 64 * 32 + 8 * 32) * 4.0, 0);
    a.n_inputs = 3;
    a.in[2] = a.in[1];
    a.in[1] = a.in[0];
    a.in[0] = tensor(2, 1, (int64_t[]){32});
    a.in[1].elem_bytes = a.in[2].elem_bytes = 2;
    torch_op_cost_of("aten::addmm", &a, &c);
    cr_assert_float_eq(c.flops, 2.0 * 8 * 64 * 32 + 8 * 32, 0);
    memset(&a, 0, sizeof a);
    a.n_inputs = 2;
    a.in[0] = tensor(2, 3, (int64_t[]){4, 8, 16});
    a.in[1] = tensor(2, 3, (int64_t[]){4, 16, 8});
    torch_op_cost_of("aten::bmm", &a, &c);
    cr_assert_float_eq(c.flops, 2.0 * 4 * 8 * 16 * 8, 0);
    memset(&a, 0, sizeof a);
    a.n_inputs = 3;
    a.in[0] = tensor(4, 3, (int64_t[]){1, 8, 64});
    a.in[1] = tensor(4, 2, (int64_t[]){172, 64}); /* weight (out, in) */
    a.in[2].ndim = -1;                             /* no bias */
    torch_op_cost_of("aten::linear", &a, &c);
    cr_assert_float_eq(c.flops, 2.0 * 8 * 64 * 172, 0);
    /* mismatched inner dims: no formula */
    a.in[1] = tensor(4, 2, (int64_t[]){172, 63});
    torch_op_cost_of("aten::linear", &a, &c);
    cr_assert_eq(c.cls, TORCH_OP_UNKNOWN);
}

Test(torch_ops, attention_causal_and_decode) {
    torch_op_args a;
    torch_op_cost c;
    memset(&a, 0, sizeof a);
    a.n_inputs = 3;
    a.in[0] = tensor(4, 4, (int64_t[]){1, 4, 8, 16});
    a.in[1] = tensor(4, 4, (int64_t[]){1, 2, 8, 16});
    a.in[2] = tensor(4, 4, (int64_t[]){1, 2, 8, 16});
    a.n_concrete = 5;
    strcpy(a.concrete[4], "True");
    torch_op_cost_of("aten::_scaled_dot_product_flash_attention_for_cpu", &a, &c);
    cr_assert_eq(c.cls, TORCH_OP_ATTENTION);
    cr_assert_float_eq(c.flops, 2.0 * 4 * (8 * 9 / 2.0) * (16 + 16), 0); /* causal: T(T+1)/2 pairs */
    cr_assert_eq(c.q_len, 8);
    strcpy(a.concrete[4], "False");
    torch_op_cost_of("aten::_scaled_dot_product_flash_attention_for_cpu", &a, &c);
    cr_assert_float_eq(c.flops, 2.0 * 4 * 64 * 32, 0);
}

Test(torch_ops, elementwise_broadcast_and_types) {
    torch_op_args a;
    torch_op_cost c;
    memset(&a, 0, sizeof a);
    a.n_inputs = 2;
    a.in[0] = tensor(2, 3, (int64_t[]){1, 8, 64});
    a.in[1] = tensor(2, 3, (int64_t[]){1, 8, 1});
    torch_op_cost_of("aten::mul", &a, &c);
    cr_assert_eq(c.cls, TORCH_OP_ELEMENTWISE);
    cr_assert_float_eq(c.flops, 512, 0);
    cr_assert_float_eq(c.bytes, (512 + 8 + 512) * 2.0, 0);
    cr_assert_eq(torch_type_bytes("c10::BFloat16"), 2);
    cr_assert_eq(torch_type_bytes("long int"), 8);
    cr_assert_eq(torch_type_bytes("Scalar"), 0);
    torch_op_cost_of("aten::some_new_op", &a, &c);
    cr_assert_eq(c.cls, TORCH_OP_UNKNOWN);
    torch_op_cost_of("aten::view", &a, &c);
    cr_assert_eq(c.cls, TORCH_OP_FREE);
    cr_assert_float_eq(c.flops + c.bytes, 0, 0);
}

/* ---------- traces ---------- */

#define OP(name, ts, dur, ext, types, dims) \
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"" name "\",\"pid\":1,\"tid\":1,\"ts\":" #ts ",\"dur\":" #dur \
    ",\"args\":{\"External id\":" #ext ",\"Input type\":" types ",\"Input Dims\":" dims "}}"
#define MOD(name, ts, dur) \
    "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"nn.Module: " name "\",\"pid\":1,\"tid\":1,\"ts\":" #ts \
    ",\"dur\":" #dur ",\"args\":{}}"

/* One step: a decoder layer whose attention has one Linear (8x64 @ 64x64) done as linear -> t, matmul -> mm. */
static const char *k_linear =
    "{\"record_shapes\":1,\"traceEvents\":["
    MOD("LlamaForCausalLM_0", 0, 100) "," MOD("LlamaDecoderLayer_0", 1, 90) "," MOD("LlamaAttention_0", 2, 80) ","
    MOD("Linear_0", 3, 30) "," MOD("Linear_1", 40, 30) ","
    OP("aten::linear", 4, 20, 1, "[\"float\",\"float\",\"\"]", "[[1,8,64],[64,64],[]]") ","
    OP("aten::t", 5, 2, 2, "[\"float\"]", "[[64,64]]") ","
    OP("aten::matmul", 8, 15, 3, "[\"float\",\"float\"]", "[[1,8,64],[64,64]]") ","
    OP("aten::mm", 9, 12, 4, "[\"float\",\"float\"]", "[[8,64],[64,64]]") ","
    OP("aten::linear", 41, 10, 5, "[\"float\",\"float\",\"\"]", "[[1,8,64],[64,64],[]]") ","
    OP("aten::mm", 42, 8, 6, "[\"float\",\"float\"]", "[[8,64],[64,64]]") ","
    OP("aten::frobnicate", 75, 3, 7, "[\"float\"]", "[[8,64]]")
    "]}";

Test(import, counts_once_time_on_outermost_op) {
    record r;
    import_stats st;
    cr_assert_eq(imp(k_linear, &r, &st), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(r.n_points, 1);
    cr_assert_str_eq(r.kind, "import");
    cr_assert_str_eq(r.model.name, "LlamaForCausalLM");
    const record_point *p = &r.points[0];
    double flops = 0, t = 0;
    int qkv = 0, o = 0, unknown = 0;
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        flops += op->cost.flops;
        t += op->samples_s[0];
        if (op->cost.kind == OP_QKV) {
            qkv++;
            cr_assert_float_eq(op->cost.flops, 2.0 * 8 * 64 * 64, 0);
        }
        if (op->cost.kind == OP_O_PROJ) {
            o++;
            cr_assert_float_eq(op->samples_s[0], 10e-6, 1e-12);
        }
        if (op->bound == XF_BOUND_UNKNOWN) {
            unknown++;
            cr_assert_eq(op->cost.kind, OP_OTHER);
            cr_assert_str_eq(op->source, "aten::frobnicate");
            cr_assert_float_eq(op->samples_s[0], 3e-6, 1e-12);
        }
    }
    cr_assert_eq(qkv, 1);
    cr_assert_eq(o, 1);
    cr_assert_eq(unknown, 1);
    /* linear and mm counted once each: 2 * (2 * 8 * 64 * 64) */
    cr_assert_float_eq(flops, 4.0 * 8 * 64 * 64, 0);
    cr_assert_float_eq(st.matrix_flops, 4.0 * 8 * 64 * 64, 0);
    /* time: the outermost ops (20 + 10 + 3 us); the window is 4 .. 78 */
    cr_assert_float_eq(t, 33e-6, 1e-12);
    cr_assert_float_eq(st.busy_s, 33e-6, 1e-12);
    cr_assert_float_eq(st.window_s, 74e-6, 1e-12);
    cr_assert_float_eq(st.idle_s, 41e-6, 1e-12);
    cr_assert_eq(st.n_unknown, 1);
    cr_assert_eq(p->ops[0].cost.layer, 0);
    record_free(&r);
}

Test(import, refuses_bad_traces_with_reasons) {
    record r;
    /* truncated */
    char *cut = strndup(k_linear, strlen(k_linear) / 2);
    cr_assert_eq(imp(cut, &r, NULL), XF_EPARSE);
    cr_assert(strstr(xf_error_msg(), "truncated"), "%s", xf_error_msg());
    cr_assert_eq(r.n_points, 0);
    free(cut);
    /* no shapes */
    cr_assert_eq(imp("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"ts\":1,\"dur\":2,\"tid\":1,"
                     "\"args\":{}}]}", &r, NULL), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "record_shapes=True"), "%s", xf_error_msg());
    /* negative duration */
    cr_assert_eq(imp("{\"traceEvents\":[" OP("aten::mm", 1, -2, 1, "[\"float\",\"float\"]", "[[2,2],[2,2]]") "]}", &r, NULL),
                 XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "negative duration"), "%s", xf_error_msg());
    /* overlapping without nesting */
    cr_assert_eq(imp("{\"traceEvents\":[" OP("aten::mm", 1, 10, 1, "[\"float\",\"float\"]", "[[2,2],[2,2]]") ","
                     OP("aten::add", 5, 10, 2, "[\"float\",\"float\"]", "[[2,2],[2,2]]") "]}", &r, NULL),
                 XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "overlap"), "%s", xf_error_msg());
    /* not a trace */
    cr_assert_eq(imp("{\"traceEvents\":[]}", &r, NULL), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "no cpu_op"), "%s", xf_error_msg());
    cr_assert_neq(imp("[1,2", &r, NULL), XF_OK);
    cr_assert_neq(imp("", &r, NULL), XF_OK);
    record_free(&r);
}

Test(import, refuses_a_file_over_the_limit) {
    char path[] = "/tmp/xf_import_bigXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(ftruncate(fd, (off_t)2 << 30), 0); /* a sparse 2 GiB file */
    close(fd);
    record r;
    import_options o = {0};
    cr_assert_eq(import_torch_trace_file(path, &o, &r, NULL), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "--max-size"), "%s", xf_error_msg());
    unlink(path);
    record_free(&r);
}

/* A GPU trace: kernels own the time, joined by External id, or by correlation through the runtime call. */
Test(import, kernels_joined_to_their_ops) {
    const char *j =
        "{\"record_shapes\":1,\"traceEvents\":["
        OP("aten::mm", 10, 20, 7, "[\"c10::BFloat16\",\"c10::BFloat16\"]", "[[64,64],[64,64]]") ","
        OP("aten::add", 40, 10, 8, "[\"c10::BFloat16\",\"c10::BFloat16\"]", "[[64,64],[64,64]]") ","
        "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"tid\":1,\"ts\":12,\"dur\":5,"
        "\"args\":{\"correlation\":100,\"External id\":7}},"
        "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"tid\":1,\"ts\":42,\"dur\":5,"
        "\"args\":{\"correlation\":101}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"sm90_gemm\",\"tid\":7,\"ts\":60,\"dur\":4,"
        "\"args\":{\"correlation\":100,\"External id\":7}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"add_kernel\",\"tid\":7,\"ts\":70,\"dur\":2,\"args\":{\"correlation\":101}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"lost\",\"tid\":7,\"ts\":80,\"dur\":1,\"args\":{\"correlation\":999}}"
        "]}";
    record r;
    import_stats st;
    cr_assert_eq(imp(j, &r, &st), XF_OK, "%s", xf_error_msg());
    cr_assert(strstr(st.time_level, "kernel"));
    cr_assert_float_eq(st.busy_s, 7e-6, 1e-12);
    cr_assert_float_eq(st.unattributed_s, 1e-6, 1e-12);
    const record_point *p = &r.points[0];
    double mm = -1, add = -1, lost = -1;
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        if (strcmp(op->source, "aten::mm") == 0) mm = op->samples_s[0];
        if (strcmp(op->source, "aten::add") == 0) add = op->samples_s[0];
        if (strcmp(op->source, "unattributed kernels") == 0) lost = op->samples_s[0];
        if (strcmp(op->source, "aten::mm") == 0) cr_assert_eq(op->cost.compute, XF_COMPUTE_TENSOR16);
    }
    cr_assert_float_eq(mm, 4e-6, 1e-12);
    cr_assert_float_eq(add, 2e-6, 1e-12);
    cr_assert_float_eq(lost, 1e-6, 1e-12);
    record_free(&r);
}

/* ---------- Nsight Compute CSV ---------- */

static void load_map(import_kernel_map *m, const char *user) {
    memset(m, 0, sizeof *m);
    cr_assert_eq(import_kernel_map_load(user, m), XF_OK, "%s", xf_error_msg());
}

static const record_op *find_src(const record_point *p, const char *prefix) {
    for (int64_t i = 0; i < p->n_ops; i++)
        if (strncmp(p->ops[i].source, prefix, strlen(prefix)) == 0) return &p->ops[i];
    return NULL;
}

Test(import_ncu, documented_format_with_units_row) {
    import_kernel_map m;
    load_map(&m, NULL);
    record r;
    import_stats st;
    cr_assert_eq(import_ncu_csv_file(XF_SOURCE_DIR "/tests/data/ncu/llama-decode-h100.csv", NULL, &m, &r, &st), XF_OK, "%s",
                 xf_error_msg());
    const record_point *p = &r.points[0];
    cr_assert_eq(p->n_ops, 4); /* the GEMM's two launches are one op */
    const record_op *g = find_src(p, "sm90_xmma_gemm");
    cr_assert_not_null(g);
    cr_assert_eq(g->n_samples, 2);
    cr_assert_float_eq(g->samples_s[0], 100e-6, 1e-15);
    cr_assert_float_eq(g->samples_s[1], 110e-6, 1e-15);
    /* per launch: tensor ops + fadd + fmul + 2 ffma */
    cr_assert_float_eq(g->cost.flops, 84065e6 + 1e6 + 0.5e6 + 2 * 2e6, 1);
    cr_assert_float_eq(g->measured_bytes, 30e6, 1e-3);
    cr_assert(g->bytes_from_counters);
    cr_assert_eq(g->cost.compute, XF_COMPUTE_TENSOR16);
    cr_assert_eq(g->cost.kind, OP_OTHER);
    cr_assert_eq(find_src(p, "void flash_fwd")->cost.kind, OP_ATTENTION);
    cr_assert_eq(find_src(p, "void vllm::rms_norm")->cost.kind, OP_ATTN_NORM);
    cr_assert_eq(find_src(p, "void vllm::act_and_mul")->cost.kind, OP_SWIGLU);
    cr_assert_float_eq(st.busy_s, 275e-6, 1e-12);
    record_free(&r);
    import_kernel_map_free(&m);
}

Test(import_ncu, base_units_without_units_row_and_user_map_first) {
    char path[] = "/tmp/xf_kmapXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    const char *j = "{\"format\":\"xfprof-kernel-map\",\"version\":1,\"map\":[{\"pattern\":\"triad*\",\"op\":\"ffn_residual\"}]}";
    cr_assert_eq(write(fd, j, strlen(j)), (ssize_t)strlen(j));
    close(fd);
    import_kernel_map m;
    load_map(&m, path);
    unlink(path);
    cr_assert_eq(import_kernel_map_find(&m, "triad_kernel(float*)"), OP_FFN_RESIDUAL);
    cr_assert_eq(import_kernel_map_find(&m, "void flash_fwd_kernel"), OP_ATTENTION); /* the shipped map after it */
    cr_assert_eq(import_kernel_map_find(&m, "nothing_known"), OP_OTHER);
    record r;
    cr_assert_eq(import_ncu_csv_file(XF_SOURCE_DIR "/tests/data/ncu/no-units.csv", NULL, &m, &r, NULL), XF_OK, "%s", xf_error_msg());
    const record_op *o = &r.points[0].ops[0];
    cr_assert_float_eq(o->samples_s[0], 5e-6, 1e-15); /* ns */
    cr_assert_float_eq(o->measured_bytes, 12e6, 1e-6);
    cr_assert_float_eq(o->cost.flops, 2e6, 1e-6);
    cr_assert_eq(o->cost.kind, OP_FFN_RESIDUAL);
    record_free(&r);
    import_kernel_map_free(&m);
}

Test(import_ncu, refusals_name_what_is_wrong) {
    import_kernel_map m = {0};
    record r;
    cr_assert_eq(import_ncu_csv_file(XF_SOURCE_DIR "/tests/data/ncu/missing-columns.csv", NULL, &m, &r, NULL), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "dram__bytes_write.sum"), "%s", xf_error_msg());
    cr_assert(strstr(xf_error_msg(), "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"), "%s", xf_error_msg());
    /* exactly the four absent ones, in the order the importer needs them */
    cr_assert(strstr(xf_error_msg(), "missing columns: dram__bytes_write.sum, smsp__sass_thread_inst_executed_op_fadd_pred_on.sum, "
                                     "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum, "
                                     "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum. "),
              "%s", xf_error_msg());
    const char *hdr = "\"Kernel Name\",\"gpu__time_duration.sum\",\"dram__bytes_read.sum\",\"dram__bytes_write.sum\","
                      "\"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum\",\"smsp__sass_thread_inst_executed_op_fmul_pred_on.sum\","
                      "\"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum\"\n";
    char buf[2048];
    snprintf(buf, sizeof buf, "%s\"k\",\"-5\",\"1\",\"1\",\"0\",\"0\",\"0\"\n", hdr);
    cr_assert_eq(import_ncu_csv_buffer(buf, strlen(buf), "neg.csv", &m, &r, NULL), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "not a non-negative number"), "%s", xf_error_msg());
    snprintf(buf, sizeof buf, "%s\"k\",\"5\",\"1\"\n", hdr);
    cr_assert_eq(import_ncu_csv_buffer(buf, strlen(buf), "short.csv", &m, &r, NULL), XF_EINVAL);
    snprintf(buf, sizeof buf, "%s\"k,\"5\n", hdr);
    cr_assert_neq(import_ncu_csv_buffer(buf, strlen(buf), "open.csv", &m, &r, NULL), XF_OK);
    snprintf(buf, sizeof buf, "%s\"\",\"furlong\",\"\",\"\",\"\",\"\",\"\"\n\"k\",\"1\",\"1\",\"1\",\"0\",\"0\",\"0\"\n", hdr);
    cr_assert_eq(import_ncu_csv_buffer(buf, strlen(buf), "unit.csv", &m, &r, NULL), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "furlong"), "%s", xf_error_msg());
    cr_assert_eq(import_ncu_csv_buffer(hdr, strlen(hdr), "empty.csv", &m, &r, NULL), XF_EINVAL);
    cr_assert_eq(r.n_points, 0);
    record_free(&r);
}

/* ---------- Nsight Systems SQLite ---------- */

#include <sqlite3.h>

/* Builds a database from tests/data/nsys/<sql> (plus `extra` SQL) in a temporary file. */
static void make_db(char *path, const char *sql_file, const char *extra) {
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    char full[512];
    snprintf(full, sizeof full, "%s/tests/data/nsys/%s", XF_SOURCE_DIR, sql_file);
    FILE *f = fopen(full, "rb");
    cr_assert_not_null(f);
    static char sql[1 << 16];
    size_t n = fread(sql, 1, sizeof sql - 1, f);
    fclose(f);
    sql[n] = 0;
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
    if (extra) cr_assert_eq(sqlite3_exec(db, extra, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
    sqlite3_close(db);
}

Test(import_nsys, kernels_to_the_innermost_nvtx_range) {
    char path[] = "/tmp/xf_nsysXXXXXX";
    make_db(path, "decode.sql", NULL);
    import_kernel_map m;
    load_map(&m, NULL);
    record r;
    import_stats st;
    cr_assert_eq(import_nsys_sqlite_file(path, &m, &r, &st), XF_OK, "%s", xf_error_msg());
    unlink(path);
    const record_point *p = &r.points[0];
    cr_assert_eq(p->n_ops, 4);
    const record_op *att = find_src(p, "layer0.attention"), *mlp = find_src(p, "layer0.mlp");
    const record_op *step = find_src(p, "decode_step"), *ms = find_src(p, "memset_kernel");
    cr_assert(att && mlp && step && ms);
    cr_assert_eq(att->cost.kind, OP_ATTENTION); /* the shipped map's *attention* */
    cr_assert_eq(att->n_samples, 2);           /* one per range instance: rms_norm + flash, then flash */
    cr_assert_float_eq(att->samples_s[0], 14e-6, 1e-15);
    cr_assert_float_eq(att->samples_s[1], 12e-6, 1e-15);
    cr_assert_eq(mlp->n_samples, 2); /* the name through StringIds (textId) */
    cr_assert_float_eq(mlp->samples_s[1], 22e-6, 1e-15);
    cr_assert_eq(step->n_samples, 1); /* the GEMM launched in the step outside both layers */
    cr_assert_float_eq(step->samples_s[0], 5e-6, 1e-15);
    cr_assert_float_eq(ms->samples_s[0], 1e-6, 1e-15); /* outside every range: by kernel name */
    cr_assert_eq(att->bound, XF_BOUND_UNKNOWN);
    cr_assert_float_eq(st.busy_s, 74e-6, 1e-15);
    cr_assert_float_eq(st.window_s, 393e-6, 1e-15);
    record_free(&r);
    import_kernel_map_free(&m);
}

Test(import_nsys, refusals) {
    import_kernel_map m = {0};
    record r;
    char path[] = "/tmp/xf_nsysXXXXXX";
    make_db(path, "decode.sql", "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 5 WHERE correlationId = 13;");
    cr_assert_eq(import_nsys_sqlite_file(path, &m, &r, NULL), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "negative duration"), "%s", xf_error_msg());
    unlink(path);
    char p2[] = "/tmp/xf_nsysXXXXXX";
    make_db(p2, "decode.sql", "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;");
    cr_assert_eq(import_nsys_sqlite_file(p2, &m, &r, NULL), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "--trace cuda"), "%s", xf_error_msg());
    unlink(p2);
    char p3[] = "/tmp/xf_nsysXXXXXX";
    make_db(p3, "decode.sql", "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN correlationId TO corr;");
    cr_assert_eq(import_nsys_sqlite_file(p3, &m, &r, NULL), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "correlationId"), "%s", xf_error_msg());
    unlink(p3);
    cr_assert_eq(import_nsys_sqlite_file(XF_SOURCE_DIR "/README.md", &m, &r, NULL), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "not an SQLite database"), "%s", xf_error_msg());
    cr_assert_eq(r.n_points, 0);
    record_free(&r);
}
