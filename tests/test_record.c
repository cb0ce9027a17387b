/* The record's JSON: write -> read -> identical, and untrusted text refused with a message that
 * names what was wrong. */
#include <criterion/criterion.h>
#include <math.h>
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

/* The CPU step times (optional, issue 21): round trip exactly; a record without them loads with
 * none; arrays of different lengths or a negative time are refused. */
Test(record, cpu_step_times) {
    record r;
    make_predict(&r);
    add_measured(&r);
    record_point *p = &r.points[0];
    p->n_cpu = 3;
    for (int i = 0; i < 3; i++) {
        p->cpu_prefill_s[i] = 1e-3 * (i + 1) / 3.0;
        p->cpu_decode_s[i] = 2e-4 + 1e-6 * i;
    }
    char *a = record_to_json(&r);
    cr_assert(strstr(a, "\"cpu_step_s\""));
    record back;
    cr_assert_eq(record_from_json(a, "a.json", &back), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(back.points[0].n_cpu, 3);
    cr_assert_eq(back.points[1].n_cpu, 0);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(back.points[0].cpu_prefill_s[i], p->cpu_prefill_s[i]);
        cr_assert_eq(back.points[0].cpu_decode_s[i], p->cpu_decode_s[i]);
    }
    record_free(&back);
    const char *bad[][2] = {{"\"decode\":[", "\"decode\":[1,"}, {"\"prefill\":[", "\"prefill\":[-1,"}, {"\"cpu_step_s\":{", "\"cpu_step_s\":7,\"x\":{"}};
    const char *msg[] = {"cpu_step_s.prefill has 3 values but decode 4", "cpu_step_s.prefill[0]", "'cpu_step_s' must be an object"};
    for (int k = 0; k < 3; k++) {
        char *t = replace(a, bad[k][0], bad[k][1]);
        xf_status s = record_from_json(t, "bad.json", &back);
        cr_expect_neq(s, XF_OK, "case %d loaded", k);
        cr_expect(strstr(xf_error_msg(), msg[k]) != NULL, "case %d: %s", k, xf_error_msg());
        record_free(&back);
        free(t);
    }
    free(a);
    record_free(&r);
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

/* ---- property: generated records write -> read -> write to the same bytes ---- */

static uint64_t prng(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* A non-negative double across magnitudes (0, subnormal-free 1e-30 .. `top`), or an exact integer. */
static double gen_value(uint64_t *s, double top) {
    switch (prng(s) % 5) {
    case 0: return 0.0;
    case 1: return (double)(prng(s) % 100000);
    default: {
        double u = (double)(prng(s) >> 11) * 0x1p-53;
        double v = pow(10.0, -30.0 + u * (log10(top) + 30.0));
        return v < top ? v : top * 0.5;
    }
    }
}

/* A string of printable ASCII, multi-byte UTF-8, quotes, backslashes and control bytes. */
static void gen_string(uint64_t *s, char *buf, size_t cap) {
    static const char *pieces[] = {"a", "Z", "7", " ", "\"", "\\", "/", "<b>", "\x1b[2J", "\x07", "\t", "\n",
                                   "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xc2\x9b", "-", "_", ":"};
    size_t n = prng(s) % 12, len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *p = pieces[prng(s) % (sizeof pieces / sizeof pieces[0])];
        if (len + strlen(p) + 1 >= cap) break;
        strcpy(buf + len, p);
        len += strlen(p);
    }
}

static void gen_record(uint64_t *s, record *r) {
    static const char *kinds[] = {"predict", "run", "sweep", "import"};
    record_init(r, kinds[prng(s) % 4]);
    gen_string(s, r->created, sizeof r->created);
    r->ceilings_measured = (int)(prng(s) % 2);
    r->partial = (int)(prng(s) % 2);
    if (r->partial) gen_string(s, r->partial_reason, sizeof r->partial_reason);
    int n_env = (int)(prng(s) % 4);
    for (int i = 0; i < n_env; i++) {
        char k[16], v[64];
        snprintf(k, sizeof k, "key%d", i);
        gen_string(s, v, sizeof v);
        record_set_env(r, k, v);
    }
    cr_assert_eq(config_preset("llama-2-7b", &r->model), XF_OK);
    gen_string(s, r->model.name, sizeof r->model.name);
    r->model.n_layers = 1 + (int64_t)(prng(s) % 8);
    r->model.vocab = 1 + (int64_t)(prng(s) % 50000);
    r->model_params = (int64_t)gen_value(s, 0x1p62);
    r->kv_bytes_per_token = gen_value(s, 1e12);
    cr_assert_eq(device_lookup("h100-sxm", NULL, &r->device), XF_OK);
    gen_string(s, r->device.description, sizeof r->device.description);
    r->device.bandwidth_Bps = 1e6 + gen_value(s, 1e15);
    for (int c = 0; c < XF_COMPUTE_COUNT; c++) r->device.peak_flops[c] = c == 0 ? 1e6 + gen_value(s, 1e18) : gen_value(s, 1e18);
    int n_points = 1 + (int)(prng(s) % 3);
    for (int i = 0; i < n_points; i++) {
        record_point *p = record_add_point(r);
        cr_assert_not_null(p);
        workload_default(&p->wl);
        p->wl.batch = 1 + (int64_t)(prng(s) % 4096);
        p->wl.prompt = 1 + (int64_t)(prng(s) % 100000);
        p->wl.gen = (int64_t)(prng(s) % 100000);
        p->wl.wdtype = (xf_dtype)(prng(s) % XF_DTYPE_COUNT);
        int measured = (int)(prng(s) % 2);
        if (measured) {
            strcpy(p->run.backend, "cpu");
            p->run.threads = 1 + (int)(prng(s) % 64);
            p->run.reps = 1 + (int)(prng(s) % 100);
            strcpy(p->run.kv_policy, "paged:16");
            strcpy(p->run.kv_alloc, "pool");
            p->run.seed = prng(s) % 1000000;
            p->run.timer_overhead_s = gen_value(s, 1e-6);
        }
        p->n_ops = (int64_t)(prng(s) % 20);
        p->ops = calloc((size_t)(p->n_ops ? p->n_ops : 1), sizeof *p->ops);
        for (int64_t k = 0; k < p->n_ops; k++) {
            record_op *op = &p->ops[k];
            op->cost.phase = (xf_phase)(prng(s) % 2);
            op->cost.layer = (int)((int64_t)(prng(s) % (uint64_t)(r->model.n_layers + 1)) - 1);
            op->cost.kind = (op_kind)(prng(s) % OP_KIND_COUNT);
            op->cost.compute = (xf_compute)(prng(s) % XF_COMPUTE_COUNT);
            op->cost.flops = gen_value(s, 1e30);
            op->cost.weight_bytes = gen_value(s, 1e18);
            op->cost.act_in_bytes = gen_value(s, 1e18);
            op->cost.act_out_bytes = gen_value(s, 1e18);
            op->cost.kv_read_bytes = gen_value(s, 1e18);
            op->cost.kv_write_bytes = gen_value(s, 1e18);
            op->cost.bytes = gen_value(s, 9e18);
            op->intensity = gen_value(s, 1e12);
            op->bound = (xf_bound)(prng(s) % XF_BOUND_COUNT);
            op->time_s = gen_value(s, 1e6);
            op->predicted_time_s = gen_value(s, 1e6);
            op->share = gen_value(s, 1.0);
            if (measured && prng(s) % 2) {
                op->measured = 1;
                op->n_samples = 1 + (int)(prng(s) % 5);
                op->samples_s = malloc((size_t)op->n_samples * sizeof(double));
                for (int j = 0; j < op->n_samples; j++) op->samples_s[j] = gen_value(s, 10.0);
                op->spread_s = gen_value(s, 1.0);
                op->util_compute = gen_value(s, 2.0);
                op->util_memory = gen_value(s, 2.0);
            }
            if (prng(s) % 3 == 0) {
                op->bytes_from_counters = 1;
                op->measured_bytes = gen_value(s, 1e18);
            }
            op->n_counters = (int)(prng(s) % 3);
            for (int j = 0; j < op->n_counters; j++) {
                snprintf(op->counters[j].name, sizeof op->counters[j].name, "c%d", j);
                op->counters[j].supported = (int)(prng(s) % 2);
                op->counters[j].value = op->counters[j].supported ? gen_value(s, 1e18) : 0;
            }
        }
        record_summary *sm = &p->summary;
        sm->ttft_s = gen_value(s, 1e9);
        sm->tpot_s = gen_value(s, 1e9);
        sm->tokens_per_s = gen_value(s, 1e12);
        sm->prefill_tokens_per_s = gen_value(s, 1e12);
        sm->decode_tokens_per_s = gen_value(s, 1e12);
        sm->decode_context = (int64_t)(prng(s) % 1000000);
        sm->prefill_time_s = gen_value(s, 1e9);
        sm->decode_time_s = gen_value(s, 1e9);
        for (int b = 0; b < XF_BOUND_COUNT; b++) sm->share_bound[b] = gen_value(s, 1.0);
        sm->max_batch = (int64_t)(prng(s) % 100000);
        record_memory *m = &p->memory;
        m->weights_bytes = gen_value(s, 1e18);
        m->kv_bytes = gen_value(s, 1e18);
        m->kv_bytes_per_token = gen_value(s, 1e12);
        m->activations_bytes = gen_value(s, 1e18);
        m->total_bytes = gen_value(s, 9e18);
        m->capacity_bytes = gen_value(s, 1e16);
        if (measured && prng(s) % 2) {
            p->n_seqs = 1 + (int64_t)(prng(s) % 3);
            p->n_tokens_per_seq = 1 + (int64_t)(prng(s) % 5);
            p->tokens = malloc((size_t)(p->n_seqs * p->n_tokens_per_seq) * sizeof *p->tokens);
            for (int64_t t = 0; t < p->n_seqs * p->n_tokens_per_seq; t++) p->tokens[t] = (int32_t)(prng(s) % (uint64_t)r->model.vocab);
        }
    }
}

Test(record, generated_records_round_trip_to_the_same_bytes) {
    uint64_t seed = 19;
    for (int it = 0; it < 400; it++) {
        record r;
        gen_record(&seed, &r);
        char *a = NULL;
        cr_assert_eq(record_json_text(&r, &a), XF_OK, "record %d: %s", it, xf_error_msg());
        record back;
        xf_status s = record_from_json(a, "generated", &back);
        cr_assert_eq(s, XF_OK, "record %d does not read back: %s\n%.600s", it, xf_error_msg(), a);
        char *b = NULL;
        cr_assert_eq(record_json_text(&back, &b), XF_OK, "record %d: %s", it, xf_error_msg());
        size_t d = 0;
        while (a[d] && a[d] == b[d]) d++;
        cr_assert_str_eq(a, b, "record %d: the second write differs at byte %zu: first ...%.80s..., second ...%.80s...", it, d,
                         a + (d > 40 ? d - 40 : 0), b + (d > 40 ? d - 40 : 0));
        free(a);
        free(b);
        record_free(&back);
        record_free(&r);
    }
}

Test(record, non_finite_figure_refused_on_writing) {
    record r;
    make_predict(&r);
    r.points[1].summary.ttft_s = INFINITY;
    char *text = NULL;
    cr_assert_eq(record_json_text(&r, &text), XF_EINVAL);
    cr_assert_null(text);
    cr_expect(strstr(xf_error_msg(), "record.points[1].summary.ttft_s") != NULL, "%s", xf_error_msg());
    cr_expect_eq(record_save(&r, "/dev/null"), XF_EINVAL);
    record_free(&r);
}

static void save_tmp(const record *r, char *path) {
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(record_save(r, path), XF_OK, "%s", xf_error_msg());
}

/* The streamed reader (records above 64 MiB) gives the record the whole reader gives, on the
 * generated records: every field at random, strings with quotes, backslashes, controls, UTF-8. */
Test(record, streamed_read_is_the_whole_read) {
    uint64_t seed = 1919;
    for (int it = 0; it < 200; it++) {
        record r;
        gen_record(&seed, &r);
        char path[] = "/tmp/xfprof-test-stream-XXXXXX";
        save_tmp(&r, path);
        record whole, st;
        cr_assert_eq(record_load(path, &whole), XF_OK, "record %d: %s", it, xf_error_msg());
        cr_assert_eq(record_load_stream(path, -1, &st), XF_OK, "record %d streamed: %s", it, xf_error_msg());
        cr_assert_eq(st.ops_left_out, 0);
        char *a = NULL, *b = NULL;
        cr_assert_eq(record_json_text(&whole, &a), XF_OK);
        cr_assert_eq(record_json_text(&st, &b), XF_OK);
        cr_assert_str_eq(a, b, "record %d reads differently streamed", it);
        free(a);
        free(b);
        record_free(&whole);
        record_free(&st);
        record_free(&r);
        unlink(path);
    }
}

/* Past RECORD_STREAM_KEEP_OPS points, a streamed read keeps every point's summary but the ops of
 * the first ones and of `also` only, and refuses to write the record again. */
Test(record, streamed_read_keeps_the_ops_of_the_first_points_and_also) {
    model_config cfg;
    cr_assert_eq(config_preset("stories15m", &cfg), XF_OK, "%s", xf_error_msg());
    device_spec dev;
    cr_assert_eq(device_lookup("h100-sxm", NULL, &dev), XF_OK, "%s", xf_error_msg());
    enum { N = RECORD_STREAM_KEEP_OPS + 4 };
    workload *w = calloc(N, sizeof *w);
    for (int i = 0; i < N; i++) {
        workload_default(&w[i]);
        w[i].batch = i + 1;
    }
    record r;
    cr_assert_eq(predict_record(&cfg, &dev, w, N, &r), XF_OK, "%s", xf_error_msg());
    free(w);
    char path[] = "/tmp/xfprof-test-stream-XXXXXX";
    save_tmp(&r, path);
    record st;
    cr_assert_eq(record_load_stream(path, N - 2, &st), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(st.n_points, N);
    cr_expect_eq(st.ops_left_out, 3);
    for (int i = 0; i < N; i++) {
        int kept = i < RECORD_STREAM_KEEP_OPS || i == N - 2;
        cr_expect_eq(st.points[i].n_ops, kept ? r.points[i].n_ops : 0, "point %d", i);
        cr_expect_eq(st.points[i].wl.batch, i + 1);
        cr_expect_eq(st.points[i].summary.tpot_s, r.points[i].summary.tpot_s, "point %d", i);
    }
    char *text = NULL;
    cr_expect_eq(record_json_text(&st, &text), XF_EINVAL);
    cr_expect(strstr(xf_error_msg(), "not written again") != NULL, "%s", xf_error_msg());
    cr_expect_null(text);
    record_free(&st);
    record_free(&r);
    unlink(path);
}
