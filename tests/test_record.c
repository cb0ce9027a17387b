/* The record's JSON: write -> read -> identical, and untrusted text refused with a message that
 * names what was wrong. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyzers/predict.h"
#include "core/device.h"
#include "core/record.h"
#include "reference_model/config.h"
#include "reports/record_json.h"

static void make_predict(record *r) {
    model_config cfg;
    cr_assert_eq(config_preset("llama-2-7b", &cfg), XF_OK, "%s", xf_error_msg());
    device_spec dev;
    cr_assert_eq(device_lookup("h100-sxm", NULL, &dev), XF_OK, "%s", xf_error_msg());
    workload w[2];
    workload_default(&w[0]);
    workload_default(&w[1]);
    w[1].batch = 64;
    w[1].wdtype = XF_INT4;
    cr_assert_eq(predict_record(&cfg, &dev, w, 2, r), XF_OK, "%s", xf_error_msg());
}

/* Adds what a measured run carries: samples, counters, tokens, run info, env. */
static void add_measured(record *r) {
    record_point *p = &r->points[0];
    record_op *op = &p->ops[3];
    op->measured = 1;
    op->n_samples = 3;
    op->samples_s = malloc(3 * sizeof(double));
    op->samples_s[0] = 1.5e-3;
    op->samples_s[1] = 1.25e-3;
    op->samples_s[2] = 1.0 / 3.0; /* not exactly representable in decimal: tests round trip */
    op->spread_s = 2.5e-4;
    op->util_compute = 0.125;
    op->util_memory = 0.75;
    op->n_counters = 2;
    strcpy(op->counters[0].name, "cycles");
    op->counters[0].supported = 1;
    op->counters[0].value = 123456789;
    strcpy(op->counters[1].name, "imc_bytes");
    op->counters[1].supported = 0;
    op->bytes_from_counters = 1;
    op->measured_bytes = 4096;
    strcpy(p->run.backend, "cpu");
    p->run.threads = 2;
    p->run.reps = 3;
    p->run.warmup = 1;
    strcpy(p->run.kv_policy, "paged:16");
    strcpy(p->run.kv_alloc, "pool");
    p->run.seed = 42;
    p->run.timer_overhead_s = 2.1e-8;
    p->n_seqs = 2;
    p->n_tokens_per_seq = 3;
    p->tokens = malloc(6 * sizeof(int32_t));
    for (int i = 0; i < 6; i++) p->tokens[i] = 100 * i + 7;
    record_set_env(r, "host", "test-host");
    record_set_env(r, "cpu", "Some CPU \"quoted\" <b>");
}

Test(record, write_read_write_is_identical) {
    record r;
    make_predict(&r);
    add_measured(&r);
    char *a = record_to_json(&r);
    cr_assert_not_null(a);
    record back;
    cr_assert_eq(record_from_json(a, "a.json", &back), XF_OK, "%s", xf_error_msg());
    char *b = record_to_json(&back);
    cr_assert_str_eq(a, b);
    /* Spot checks on the struct itself, not only on the text. */
    cr_assert_eq(back.n_points, 2);
    cr_assert_eq(back.points[0].n_ops, r.points[0].n_ops);
    cr_assert_eq(back.points[1].wl.wdtype, XF_INT4);
    cr_assert_eq(back.points[0].ops[3].samples_s[2], 1.0 / 3.0);
    cr_assert_eq(back.points[0].ops[3].counters[1].supported, 0);
    cr_assert_eq(back.points[0].tokens[5], 507);
    cr_assert_eq(back.model_params, r.model_params);
    cr_assert_str_eq(back.env[1].value, "Some CPU \"quoted\" <b>");
    cr_assert_eq(back.points[1].summary.ttft_s, r.points[1].summary.ttft_s);
    free(a);
    free(b);
    record_free(&back);
    record_free(&r);
}

/* Replaces the first occurrence of `from` in text with `to`; returns a new string. */
static char *replace(const char *text, const char *from, const char *to) {
    const char *at = strstr(text, from);
    cr_assert_not_null(at, "'%s' not in the record text", from);
    size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    size_t pre = (size_t)(at - text);
    memcpy(out, text, pre);
    strcpy(out + pre, to);
    strcat(out, at + strlen(from));
    return out;
}

static void expect_refused(const char *from, const char *to, xf_status want, const char *msg_part) {
    record r;
    make_predict(&r);
    char *a = record_to_json(&r);
    record_free(&r);
    char *bad = replace(a, from, to);
    record back;
    xf_status s = record_from_json(bad, "bad.json", &back);
    cr_expect_eq(s, want, "replacing %s by %s: status %d, message: %s", from, to, s, xf_error_msg());
    cr_expect(strstr(xf_error_msg(), msg_part) != NULL, "message '%s' should mention '%s'", xf_error_msg(), msg_part);
    record_free(&back);
    free(bad);
    free(a);
}

Test(record, newer_version_refused) { expect_refused("\"version\":1", "\"version\":2", XF_EFORMAT, "newer"); }
Test(record, other_format_refused) { expect_refused("\"xfprof-record\"", "\"xfprof-devices\"", XF_EFORMAT, "not an xfprof record"); }
Test(record, unknown_op_refused) { expect_refused("\"op\":\"qkv\"", "\"op\":\"qkvz\"", XF_EINVAL, "ops["); }
Test(record, negative_bytes_refused) { expect_refused("\"weight_bytes\":", "\"weight_bytes\":-", XF_EINVAL, "weight_bytes"); }
Test(record, layer_out_of_range_refused) { expect_refused("\"layer\":0", "\"layer\":99", XF_EINVAL, "layer"); }
Test(record, wrong_type_refused) { expect_refused("\"batch\":1", "\"batch\":\"1\"", XF_EINVAL, "batch"); }
Test(record, unknown_bound_refused) { expect_refused("\"bound\":\"memory\"", "\"bound\":\"disk\"", XF_EINVAL, "bound"); }
Test(record, missing_points_refused) { expect_refused("\"points\"", "\"pointz\"", XF_EINVAL, "points"); }

Test(record, truncated_refused) {
    record r;
    make_predict(&r);
    char *a = record_to_json(&r);
    record_free(&r);
    a[strlen(a) / 2] = '\0';
    record back;
    cr_expect_eq(record_from_json(a, "cut.json", &back), XF_EPARSE);
    cr_expect(strstr(xf_error_msg(), "truncated") != NULL, "%s", xf_error_msg());
    record_free(&back);
    free(a);
}

Test(record, not_json_and_empty_refused) {
    record back;
    cr_expect_eq(record_from_json("", "e.json", &back), XF_EPARSE);
    record_free(&back);
    cr_expect_eq(record_from_json("[1,2,3]", "e.json", &back), XF_EFORMAT);
    record_free(&back);
    cr_expect_eq(record_from_json("{\"format\":\"xfprof-record\"}", "e.json", &back), XF_EFORMAT);
    record_free(&back);
}

Test(record, save_and_load_file) {
    record r;
    make_predict(&r);
    char path[] = "/tmp/xfprof-test-record-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(record_save(&r, path), XF_OK, "%s", xf_error_msg());
    record back;
    cr_assert_eq(record_load(path, &back), XF_OK, "%s", xf_error_msg());
    cr_expect_eq(back.points[0].summary.tpot_s, r.points[0].summary.tpot_s);
    record_free(&back);
    /* Loading a missing file names it. */
    cr_expect_eq(record_load("/nonexistent/x.json", &back), XF_EIO);
    cr_expect(strstr(xf_error_msg(), "/nonexistent/x.json") != NULL);
    record_free(&back);
    /* An unwritable path fails and leaves the earlier file intact. */
    cr_expect_eq(record_save(&r, "/nonexistent-dir/r.json"), XF_EIO);
    cr_expect_eq(record_save(&r, "/dev/full"), XF_EIO);
    struct stat st;
    cr_expect(stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode), "/dev/full must still be a device");
    cr_assert_eq(record_load(path, &back), XF_OK);
    record_free(&back);
    unlink(path);
    record_free(&r);
}

/* The newer architecture fields of the model (rope scaling, biases, q/k norm, windows) survive a
 * write and a read; a record without them (older) reads as a Llama-2 decoder. */
Test(record, model_architecture_fields_round_trip) {
    record r;
    make_predict(&r);
    model_config *m = &r.model;
    m->rope.kind = ROPE_YARN;
    m->rope.factor = 4.0;
    m->rope.original_ctx = 4096;
    m->rope.beta_fast = 32;
    m->rope.beta_slow = 1;
    m->rope.attention_factor = 1.1386;
    m->rope.truncate = 1;
    m->o_bias = m->mlp_bias = m->qk_norm = 1;
    m->sliding_window = 512;
    m->window_layers[0] = UINT64_C(0x401); /* layers 0 and 10 */
    char *a = record_to_json(&r);
    cr_assert_not_null(a);
    record back;
    cr_assert_eq(record_from_json(a, "a.json", &back), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(memcmp(&back.model.rope, &m->rope, sizeof m->rope), 0);
    cr_assert_eq(back.model.o_bias + back.model.mlp_bias + back.model.qk_norm, 3);
    cr_assert_eq(back.model.sliding_window, 512);
    cr_assert_eq(back.model.window_layers[0], UINT64_C(0x401));
    record_free(&back);
    /* window_layers naming a layer past n_layers (32) is refused, so is a window of 0 with windowed layers */
    char *bad = strdup(a), *p = strstr(bad, "\"window_layers\":[0,10]");
    cr_assert_not_null(p, "%s", a);
    memcpy(p, "\"window_layers\":[0,99]", strlen("\"window_layers\":[0,99]"));
    cr_assert_eq(record_from_json(bad, "bad.json", &back), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "window_layers"), "%s", xf_error_msg());
    memcpy(p, "\"window_layers\":[0,10]", strlen("\"window_layers\":[0,10]"));
    char *sw = strstr(bad, "\"sliding_window\":512");
    cr_assert_not_null(sw);
    memcpy(sw, "\"sliding_window\":0  ", strlen("\"sliding_window\":0  "));
    cr_assert_eq(record_from_json(bad, "bad.json", &back), XF_EINVAL, "%s", xf_error_msg());
    cr_assert(strstr(xf_error_msg(), "sliding_window"), "%s", xf_error_msg());
    free(bad);
    free(a);
    record_free(&r);
}
