/* The HTML report: records in (made here), documents out. Each section is present exactly when
 * the record has its data; the numbers in the page are the record's; every untrusted string is
 * escaped (HTML and gnuplot); without gnuplot the report is still written with a note. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analyzers/predict.h"
#include "core/fileio.h"
#include "core/record_kv.h"
#include "reports/escape.h"
#include "reports/gnuplot.h"
#include "reports/html.h"

/* ---- a small hand-made record: 2 layers, ops embedding, per layer qkv + attention, lm_head,
 * in prefill and decode, with known times. */
static void add_op(record_point *p, xf_phase ph, int layer, op_kind k, double flops, double bytes, double t, xf_bound b) {
    record_op *op = &p->ops[p->n_ops++];
    memset(op, 0, sizeof *op);
    op->cost.phase = ph;
    op->cost.layer = layer;
    op->cost.kind = k;
    op->cost.compute = op_kind_is_gemm(k) ? XF_COMPUTE_TENSOR16 : XF_COMPUTE_FP32;
    op->cost.flops = flops;
    op->cost.bytes = bytes;
    op->cost.weight_bytes = bytes;
    op->intensity = flops / bytes;
    op->bound = b;
    op->time_s = t;
    op->predicted_time_s = t;
}

static void fill_point(record_point *p, int64_t batch, int64_t prompt, double scale) {
    workload_default(&p->wl);
    p->wl.batch = batch;
    p->wl.prompt = prompt;
    p->wl.gen = 4;
    p->ops = calloc(16, sizeof *p->ops);
    cr_assert(p->ops);
    for (int ph = 0; ph < 2; ph++) {
        double f = ph == XF_PREFILL ? 8.0 : 1.0; /* prefill: 8x the work */
        add_op(p, ph, -1, OP_EMBEDDING, 0, 1e3, 1e-6 * scale, XF_BOUND_MEMORY);
        for (int l = 0; l < 2; l++) {
            add_op(p, ph, l, OP_QKV, 2e9 * f, 1e7, 0.00125 * f * scale, ph == XF_PREFILL ? XF_BOUND_COMPUTE : XF_BOUND_MEMORY);
            add_op(p, ph, l, OP_ATTENTION, 1e7 * f, 1e7, 1e-4 * scale, XF_BOUND_MEMORY);
        }
        add_op(p, ph, -1, OP_LM_HEAD, 1e8 * f, 5e7, 5e-5 * scale, XF_BOUND_MEMORY);
    }
    p->summary.ttft_s = 0.0123456 * scale;
    p->summary.tpot_s = 0.00234 * scale;
    p->summary.tokens_per_s = 123.456 / scale;
    p->summary.share_bound[XF_BOUND_MEMORY] = 0.75;
    p->summary.share_bound[XF_BOUND_COMPUTE] = 0.25;
    p->summary.decode_context = prompt + 2;
    p->memory.weights_bytes = 2e9;
    p->memory.kv_bytes = 1e9;
    p->memory.activations_bytes = 1e8;
    p->memory.capacity_bytes = 16e9;
}

static void make_record(record *r, const char *model_name, int n_points) {
    record_init(r, "predict");
    snprintf(r->model.name, sizeof r->model.name, "%s", model_name);
    snprintf(r->model.arch, sizeof r->model.arch, "llama");
    r->model.n_layers = 2;
    r->model.d_model = 64;
    r->model.n_heads = 4;
    r->model.n_kv_heads = 4;
    r->model.head_dim = 16;
    r->model.d_ff = 128;
    r->model.vocab = 100;
    r->model_params = 123456;
    r->kv_bytes_per_token = 1024;
    snprintf(r->device.name, sizeof r->device.name, "testdev");
    r->device.bandwidth_Bps = 1e12;
    r->device.memory_bytes = 16e9;
    r->device.peak_flops[XF_COMPUTE_FP32] = 1e13;
    r->device.peak_flops[XF_COMPUTE_TENSOR16] = 1e14;
    static const int64_t batches[] = {1, 2, 4, 8};
    for (int i = 0; i < n_points; i++) {
        record_point *p = record_add_point(r);
        cr_assert(p);
        fill_point(p, batches[i % 4], 8 * (1 + i / 4), 1.0 + i);
    }
}

static char *render(const record *r, int n, int charts) {
    report_options o;
    report_options_default(&o);
    o.charts = charts;
    char *html = NULL;
    xf_status st = report_html_text(r, n, &o, &html);
    cr_assert_eq(st, XF_OK, "report_html_text: %s", xf_error_msg());
    cr_assert(html);
    return html;
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static int has_gnuplot(void) {
    char exe[4096];
    return gnuplot_find(exe, sizeof exe) == XF_OK;
}

/* ---- sections */

Test(html, single_point_sections) {
    record r;
    make_record(&r, "tiny", 1);
    char *h = render(&r, 1, 0);
    cr_assert(strstr(h, "class=\"sec-summary\""));
    cr_assert(strstr(h, "class=\"sec-pipeline\""));
    cr_assert(strstr(h, "class=\"sec-roofline\""));
    cr_assert(strstr(h, "class=\"sec-layers\""));
    cr_assert(strstr(h, "class=\"sec-optable\""));
    /* no measured op, no KV section, one point, no env: those sections are absent */
    cr_assert_null(strstr(h, "class=\"sec-measured\""));
    cr_assert_null(strstr(h, "class=\"sec-kv\""));
    cr_assert_null(strstr(h, "class=\"sec-sweep\""));
    cr_assert_null(strstr(h, "class=\"sec-env\""));
    cr_assert_null(strstr(h, "class=\"sec-advice\""));
    /* self-contained: nothing fetched */
    cr_assert_null(strstr(h, "src=\"http"));
    cr_assert_null(strstr(h, "href=\"http"));
    cr_assert_null(strstr(h, "<link"));
    free(h);
    record_free(&r);
}

Test(html, optional_sections_follow_the_data) {
    record r;
    make_record(&r, "tiny", 1);
    r.points[0].ops[1].measured = 1; /* prefill qkv of layer 0 */
    r.points[0].ops[1].n_samples = 3;
    record_set_env(&r, "host", "box");
    char *h = render(&r, 1, 0);
    cr_assert(strstr(h, "class=\"sec-measured\""));
    cr_assert(strstr(h, "class=\"sec-env\""));
    cr_assert_null(strstr(h, "class=\"sec-kv\""));
    free(h);
    record_free(&r);
}

Test(html, record_without_points_has_summary_only) {
    record r;
    make_record(&r, "tiny", 0);
    char *h = render(&r, 1, 0);
    cr_assert(strstr(h, "class=\"sec-summary\""));
    cr_assert_null(strstr(h, "class=\"sec-pipeline\""));
    cr_assert_null(strstr(h, "class=\"sec-roofline\""));
    cr_assert_null(strstr(h, "class=\"sec-optable\""));
    free(h);
    record_free(&r);
}

/* ---- numbers equal the record's */

Test(html, numbers_are_the_records) {
    record r;
    make_record(&r, "tiny", 1);
    char *h = render(&r, 1, 0);
    /* TTFT 0.0123456 s = 12.3456 ms -> three figures "12.3 ms"; TPOT 0.00234 s -> "2.34 ms";
     * 123.456 tokens/s -> "123 tokens/s". */
    cr_assert(strstr(h, "id=\"r0-ttft\">12.3 ms<"), "TTFT");
    cr_assert(strstr(h, "id=\"r0-tpot\">2.34 ms<"), "TPOT");
    cr_assert(strstr(h, "id=\"r0-tps\">123 tokens/s<"), "tokens/s");
    /* the op table carries the exact value and the shown one: qkv prefill 0.00125 * 8 = 0.01 s */
    cr_assert(strstr(h, "<td data-v=\"0.01\">10.0 ms</td>"));
    /* its FLOPs 2e9 * 8 = 1.6e10 -> "16.0 G" */
    cr_assert(strstr(h, "<td data-v=\"16000000000\">16.0 G</td>"));
    /* shares of request time: 75.0% memory, 25.0% compute */
    cr_assert(strstr(h, "class=\"share-memory\">75.0%<"));
    cr_assert(strstr(h, "class=\"share-compute\">25.0%<"));
    /* the op table has one row per op: per phase embedding + 2 layers x 2 + lm_head = 6, two
     * phases = 12 rows with an index cell 0..11 */
    cr_assert_eq(r.points[0].n_ops, 12);
    cr_assert(strstr(h, "<tr><td data-v=\"11\">11</td>"));
    cr_assert_null(strstr(h, "<tr><td data-v=\"12\">12</td>"));
    free(h);
    record_free(&r);
}

/* A real record from the cost model: the page shows the record's own TTFT and TPOT. */
Test(html, predicted_record_numbers) {
    model_config cfg;
    device_spec d;
    cr_assert_eq(config_preset("llama-2-7b", &cfg), XF_OK);
    cr_assert_eq(device_lookup("h100-sxm", NULL, &d), XF_OK, "%s", xf_error_msg());
    workload w;
    workload_default(&w);
    record r;
    cr_assert_eq(predict_record(&cfg, &d, &w, 1, &r), XF_OK, "%s", xf_error_msg());
    char *h = render(&r, 1, 0);
    double ttft = r.points[0].summary.ttft_s, tpot = r.points[0].summary.tpot_s;
    /* both are milliseconds for a 7B model at batch 1 on an H100: 1..10 ms -> "%.2f ms" */
    cr_assert(ttft >= 1e-3 && ttft < 1e-2, "ttft %g", ttft);
    cr_assert(tpot >= 1e-3 && tpot < 1e-2, "tpot %g", tpot);
    char want[96];
    snprintf(want, sizeof want, "id=\"r0-ttft\">%.2f ms<", ttft * 1e3);
    cr_assert(strstr(h, want), "%s", want);
    snprintf(want, sizeof want, "id=\"r0-tpot\">%.2f ms<", tpot * 1e3);
    cr_assert(strstr(h, want), "%s", want);
    /* every op of the point is a table row: 4 + 12 * 32 = 388 per step, two steps */
    snprintf(want, sizeof want, "<tr><td data-v=\"%lld\">", (long long)(r.points[0].n_ops - 1));
    cr_assert_eq(r.points[0].n_ops, 2 * 388);
    cr_assert(strstr(h, want));
    free(h);
    record_free(&r);
}

/* ---- escaping */

Test(html, hostile_strings_render_as_text) {
    record r;
    make_record(&r, "<script>alert(1)</script>", 1);
    record_set_env(&r, "k\"><img src=x onerror=f()>", "a & b <b>bold</b> 'q'"); /* keys hold 31 chars */
    snprintf(r.device.description, sizeof r.device.description, "</table><script>alert(3)</script>");
    char *h = render(&r, 1, 0);
    cr_assert_null(strstr(h, "<script>alert"));
    cr_assert_null(strstr(h, "<img"));
    cr_assert_null(strstr(h, "<b>bold"));
    cr_assert(strstr(h, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    cr_assert(strstr(h, "k&quot;&gt;&lt;img src=x onerror=f()&gt;"));
    cr_assert(strstr(h, "a &amp; b &lt;b&gt;bold&lt;/b&gt; &#39;q&#39;"));
    /* exactly one script element: the table sorter */
    cr_assert_eq(count(h, "<script"), 1);
    free(h);
    record_free(&r);
}

Test(escape, html_and_gnuplot) {
    sbuf b;
    sbuf_init(&b);
    esc_html(&b, "<a href=\"x\">'&'</a>\x01");
    cr_assert_str_eq(b.data, "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;&#xFFFD;");
    sbuf_free(&b);
    sbuf_init(&b);
    /* a quote is doubled; a newline (which would end the command) becomes a space */
    esc_gnuplot(&b, "it's\nset output 'x'");
    cr_assert_str_eq(b.data, "'it''s set output ''x'''");
    sbuf_free(&b);
    sbuf_init(&b);
    esc_gnuplot_datum(&b, "a b\"c");
    esc_gnuplot_datum(&b, "");
    cr_assert_str_eq(b.data, "a_b_c-");
    sbuf_free(&b);
    char *d = esc_html_dup("x<y");
    cr_assert_str_eq(d, "x&lt;y");
    free(d);
}

/* ---- gnuplot absent / present */

Test(html, without_gnuplot_the_report_has_tables_and_a_note) {
    setenv("XFPROF_GNUPLOT", "/nonexistent/gnuplot", 1);
    record r;
    make_record(&r, "tiny", 1);
    char path[] = "/tmp/xfprof-test-html-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    report_options o;
    report_options_default(&o);
    cr_assert_eq(report_html_write(&r, 1, path, &o), XF_OK, "%s", xf_error_msg());
    char *h = NULL;
    size_t len = 0;
    cr_assert_eq(file_read_all(path, 1 << 26, &h, &len), XF_OK);
    cr_assert(strstr(h, "id=\"gnuplot-note\""));
    cr_assert(strstr(h, "Charts need gnuplot"));
    cr_assert(strstr(h, "class=\"sec-optable\""));
    cr_assert_null(strstr(h, "<svg"));
    cr_assert(strstr(h, "</html>"));
    free(h);
    unlink(path);
    record_free(&r);
    unsetenv("XFPROF_GNUPLOT");
}

Test(html, with_gnuplot_the_charts_are_inline_svg) {
    if (!has_gnuplot()) cr_skip_test("gnuplot not installed");
    record r;
    make_record(&r, "tiny", 1);
    char *h = render(&r, 1, 1);
    cr_assert_null(strstr(h, "id=\"gnuplot-note\""));
    cr_assert_null(strstr(h, "Chart not drawn"), "a chart failed: %.300s", strstr(h, "Chart not drawn") ? strstr(h, "Chart not drawn") : "");
    /* roofline + per-layer prefill + per-layer decode = 3 charts, with no XML prolog inside */
    cr_assert_eq(count(h, "<svg"), 3);
    cr_assert_eq(count(h, "</svg>"), 3);
    cr_assert_null(strstr(h, "<?xml"));
    /* chart ids are unique per chart */
    cr_assert(strstr(h, "id='xc0_gpPt0'") || strstr(h, "id=\"xc0_gnuplot_canvas\""));
    cr_assert(strstr(h, "id=\"xc1_gnuplot_canvas\""));
    free(h);
    record_free(&r);
}

Test(html, write_failure_leaves_the_old_file) {
    record r;
    make_record(&r, "tiny", 1);
    report_options o;
    report_options_default(&o);
    o.charts = 0;
    xf_status st = report_html_write(&r, 1, "/nonexistent-dir/report.html", &o);
    cr_assert_eq(st, XF_EIO);
    cr_assert(strlen(xf_error_msg()) > 0);
    /* an existing file is replaced only by a whole new one: /dev/full refuses the write */
    record_free(&r);
}

/* ---- KV and sweep sections */

static record_kv *make_kv(const char *name0) {
    record_kv *kv = calloc(1, sizeof *kv);
    cr_assert(kv);
    kv->budget_bytes = 8e9;
    kv->bytes_per_token = 819200;
    snprintf(kv->kvdtype, sizeof kv->kvdtype, "fp16");
    kv->max_len = 2048;
    snprintf(kv->arrivals, sizeof kv->arrivals, "poisson");
    kv->rate = 2;
    kv->n_requests = 100;
    snprintf(kv->preempt, sizeof kv->preempt, "recompute");
    kv->n_policies = 2;
    kv->policies = calloc(2, sizeof *kv->policies);
    cr_assert(kv->policies);
    static const double shares[2][KV_CAT_COUNT] = {{0.25, 0.30, 0.20, 0.05, 0.20}, {0.963, 0.0, 0.012, 0.0, 0.025}};
    for (int i = 0; i < 2; i++) {
        record_kv_policy *p = &kv->policies[i];
        snprintf(p->policy, sizeof p->policy, "%s", i == 0 ? name0 : "paged:16");
        memcpy(p->share, shares[i], sizeof p->share);
        p->pool_bytes = 8e9;
        p->max_live = 10 + 30 * i;
        p->tokens_per_s = 1000 * (i + 1);
        p->n_series = 3;
        p->series = calloc(3, sizeof *p->series); /* (3) */
        cr_assert(p->series);
        for (int j = 0; j < 3; j++) {
            p->series[j].t_s = j;
            p->series[j].dt_s = 1;
            p->series[j].live = 5 + j;
            memcpy(p->series[j].share, shares[i], sizeof p->series[j].share);
        }
    }
    return kv;
}

Test(html, kv_section_when_the_record_has_one) {
    record r;
    make_record(&r, "tiny", 1);
    r.kv = make_kv("reserve");
    char *h = render(&r, 1, 0);
    cr_assert(strstr(h, "class=\"sec-kv\""));
    cr_assert(strstr(h, ">reserve<"));
    cr_assert(strstr(h, ">paged:16<"));
    /* token states 0.963 -> "96.3%"; reserved 0.30 -> "30.0%" */
    cr_assert(strstr(h, "<td data-v=\"0.963\">96.3%</td>"));
    cr_assert(strstr(h, "<td data-v=\"0.3\">30.0%</td>"));
    /* the budget: 8e9 B is a size, binary units: 8e9 / 2^30 = 7.4506 -> "7.45 GiB" */
    cr_assert(strstr(h, "KV budget 7.45 GiB"));
    /* the pool column too: exact bytes in data-v, the same binary text shown */
    cr_assert(strstr(h, "<td data-v=\"8000000000\">7.45 GiB</td>"));
    cr_assert_null(strstr(h, " GB<")); /* no decimal size anywhere in the section's cells */
    free(h);
    record_free(&r);
}

Test(html, kv_policy_names_are_escaped_for_gnuplot_too) {
    if (!has_gnuplot()) cr_skip_test("gnuplot not installed");
    unlink("/tmp/xfp.svg");
    record r;
    make_record(&r, "tiny", 1);
    /* a name that would end the gnuplot string and command if it were not escaped */
    r.kv = make_kv("x'\nset output '/tmp/xfp.svg'\n#"); /* 31 chars at most */
    char *h = render(&r, 1, 1);
    cr_assert_null(strstr(h, "Chart not drawn"), "%.300s", strstr(h, "Chart not drawn") ? strstr(h, "Chart not drawn") : "");
    cr_assert_neq(access("/tmp/xfp.svg", F_OK), 0);
    /* in the page the name is text: quotes as entities, newlines kept as text */
    cr_assert(strstr(h, "x&#39;\nset output &#39;/tmp/xfp.svg&#39;"));
    free(h);
    record_free(&r);
}

Test(html, sweep_section_for_several_points) {
    record r;
    make_record(&r, "tiny", 8); /* batches 1,2,4,8 x prompts 8,16 */
    char *h = render(&r, 1, 0);
    cr_assert(strstr(h, "class=\"sec-sweep\""));
    cr_assert(strstr(h, "8 points: 4 batch sizes &times; 2 series"));
    /* the grid: one row per prompt, one column per batch */
    cr_assert(strstr(h, "<th>batch 8</th>"));
    cr_assert(strstr(h, "<th>prompt 16</th>"));
    /* every point in the point table: point 7 is batch 8, prompt 16, TTFT 0.0123456 * 8 s =
     * 98.7648 ms -> "98.8 ms" */
    cr_assert(strstr(h, "<tr><td data-v=\"7\">7</td><td data-v=\"8\">8</td><td data-v=\"16\">16</td>"));
    cr_assert(strstr(h, ">98.8 ms<"));
    free(h);
    record_free(&r);
}

Test(html, several_records_in_one_page) {
    record r[2];
    make_record(&r[0], "first-model", 1);
    make_record(&r[1], "second-model", 1);
    r[1].kv = make_kv("reserve");
    char *h = render(r, 2, 0);
    cr_assert(strstr(h, "id=\"r0-summary\""));
    cr_assert(strstr(h, "id=\"r1-summary\""));
    cr_assert(strstr(h, "id=\"r1-kv\""));
    cr_assert_null(strstr(h, "id=\"r0-kv\""));
    cr_assert(strstr(h, "second-model"));
    free(h);
    record_free(&r[0]);
    record_free(&r[1]);
}

Test(html, advice_section_when_the_record_has_advice) {
    record r;
    make_record(&r, "tiny", 1);
    r.n_advice = 1;
    record_advice *a = &r.advice[0];
    snprintf(a->kind, sizeof a->kind, "weight_precision");
    snprintf(a->title, sizeof a->title, "Quantize <weights>");
    snprintf(a->evidence, sizeof a->evidence, "decode reads 2.00 GB of weights per step");
    snprintf(a->action, sizeof a->action, "use --wdtype int8");
    snprintf(a->gain_metric, sizeof a->gain_metric, "tpot_s");
    a->before = 0.00234; /* 2.34 ms */
    a->after = 0.00125;  /* 1.25 ms */
    a->score = 0.4;
    char *h = render(&r, 1, 0);
    cr_assert(strstr(h, "class=\"sec-advice\""));
    cr_assert(strstr(h, "Quantize &lt;weights&gt;"));
    cr_assert(strstr(h, "tpot_s 2.34 ms &rarr; 1.25 ms (score 40.0%)"));
    /* advice comes right after the summary */
    cr_assert(strstr(h, "class=\"sec-advice\"") < strstr(h, "class=\"sec-pipeline\""));
    free(h);
    record_free(&r);
}

Test(html, kv_only_record_has_a_kv_verdict) {
    record r;
    make_record(&r, "tiny", 0);
    r.kv = make_kv("reserve");
    char *h = render(&r, 1, 0);
    cr_assert(strstr(h, "class=\"sec-kv\""));
    cr_assert_null(strstr(h, "class=\"sec-pipeline\""));
    /* paged:16 holds 96.3% token states and 0.0 + 1.2 + 0.0 = 1.2% reserved or fragmented;
     * reserve wastes 30 + 20 + 5 = 55.0% and holds 25.0% */
    cr_assert(strstr(h, "paged:16 keeps the most of the KV pool in token states (96.3%, with 1.2% reserved or fragmented)"));
    cr_assert(strstr(h, "reserve wastes the most (55.0% reserved or fragmented, 25.0% token states)"));
    free(h);
    record_free(&r);
}

/* ---- the gnuplot driver against stand-ins: one that hangs, one that fails */

static void fake_gnuplot(char *path, size_t len, const char *body) {
    snprintf(path, len, "/tmp/xfprof-fake-gnuplot-XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    cr_assert(f);
    fprintf(f, "#!/bin/sh\n%s\n", body);
    fclose(f);
    cr_assert_eq(chmod(path, 0700), 0);
}

Test(gnuplot, a_hanging_gnuplot_is_stopped_at_the_timeout) {
    char exe[64];
    fake_gnuplot(exe, sizeof exe, "exec sleep 30");
    setenv("XFPROF_GNUPLOT", exe, 1);
    gnuplot_session g;
    cr_assert_eq(gnuplot_session_init(&g, 0.3), XF_OK, "%s", xf_error_msg());
    char *svg = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    xf_status st = gnuplot_render_svg(&g, "hang", 400, 300, "plot x\n", &svg);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    cr_assert_eq(st, XF_EIO);
    cr_assert_null(svg);
    cr_assert(strstr(xf_error_msg(), "timeout"), "%s", xf_error_msg());
    cr_assert(dt >= 0.3 && dt < 5.0, "stopped after %.2f s", dt);
    char dir[sizeof g.dir];
    memcpy(dir, g.dir, sizeof dir);
    gnuplot_session_free(&g);
    cr_assert_neq(access(dir, F_OK), 0, "the temporary folder is removed");
    unlink(exe);
    unsetenv("XFPROF_GNUPLOT");
}

Test(gnuplot, a_failing_gnuplot_leaves_a_note_in_the_report) {
    char exe[64];
    fake_gnuplot(exe, sizeof exe, "echo 'line 3: undefined variable: zz' >&2; exit 1");
    setenv("XFPROF_GNUPLOT", exe, 1);
    record r;
    make_record(&r, "tiny", 1);
    char *h = render(&r, 1, 1);
    /* gnuplot was found, so no global note; each chart says why it is missing */
    cr_assert_null(strstr(h, "id=\"gnuplot-note\""));
    cr_assert(strstr(h, "Chart not drawn: chart r0_roofline: gnuplot failed (exit status 1): line 3: undefined variable: zz"));
    cr_assert(strstr(h, "class=\"sec-optable\""));
    free(h);
    record_free(&r);
    unlink(exe);
    unsetenv("XFPROF_GNUPLOT");
}

Test(gnuplot, data_and_script_names_are_checked) {
    if (!has_gnuplot()) cr_skip_test("gnuplot not installed");
    /* a hostile temporary folder (a quote and a newline) changes nothing: scripts name files
     * relative to it */
    char tmp[] = "/tmp/xfprof-q'\nXXXXXX";
    cr_assert(mkdtemp(tmp));
    setenv("TMPDIR", tmp, 1);
    gnuplot_session g;
    cr_assert_eq(gnuplot_session_init(&g, 10), XF_OK);
    char lit[256];
    cr_assert_eq(gnuplot_write_data(&g, "../escape.dat", "1 2\n", 4, lit, sizeof lit), XF_EINVAL);
    cr_assert_eq(gnuplot_write_data(&g, "ok.dat", "1 2\n2 4\n", 8, lit, sizeof lit), XF_OK);
    /* the literal is the quoted bare name: gnuplot runs inside the session folder */
    cr_assert_str_eq(lit, "'ok.dat'");
    char body[400];
    snprintf(body, sizeof body, "plot %s using 1:2 with lines title 'y=2x'\n", lit);
    char *svg = NULL;
    cr_assert_eq(gnuplot_render_svg(&g, "ok", 400, 300, body, &svg), XF_OK, "%s", xf_error_msg());
    cr_assert(strncmp(svg, "<svg", 4) == 0);
    cr_assert(strstr(svg, "</svg>"));
    cr_assert(strstr(svg, "y=2x"));
    free(svg);
    gnuplot_session_free(&g);
    unsetenv("TMPDIR");
    cr_assert_eq(rmdir(tmp), 0, "the session folder inside was removed");
}

Test(html, advice_rates_are_not_times) {
    record r;
    make_record(&r, "tiny", 1);
    r.n_advice = 1;
    snprintf(r.advice[0].kind, sizeof r.advice[0].kind, "batch");
    snprintf(r.advice[0].gain_metric, sizeof r.advice[0].gain_metric, "decode_tokens_per_s");
    r.advice[0].before = 251.8;   /* -> "252 tokens/s" */
    r.advice[0].after = 26115.6;  /* -> 26.1 k */
    char *h = render(&r, 1, 0);
    cr_assert(strstr(h, "decode_tokens_per_s 252 tokens/s &rarr; 26.1 ktokens/s"));
    free(h);
    record_free(&r);
}

/* Measured ceilings are drawn with the device's spec sheet beside them, each labelled. */
Test(html, measured_ceilings_beside_the_spec_sheet) {
    if (!has_gnuplot()) cr_skip_test("gnuplot not installed");
    record r;
    make_record(&r, "tiny", 1);
    snprintf(r.device.name, sizeof r.device.name, "h100-sxm");
    r.device.measured = 1;
    r.ceilings_measured = 1;
    r.device.bandwidth_Bps = 3.0e12; /* "3.00 TB/s" measured against the 3.35 TB/s datasheet */
    char *h = render(&r, 1, 1);
    cr_assert(strstr(h, "measured roofline: tensor16 peak 100 TFLOP/s"), "measured label");
    cr_assert(strstr(h, "measured bandwidth 3.00 TB/s"));
    cr_assert(strstr(h, "spec roofline: tensor16 peak 989 TFLOP/s, bandwidth 3.35 TB/s"), "spec label");
    free(h);
    /* a spec-sheet record draws its one roofline, labelled spec */
    r.device.measured = 0;
    r.ceilings_measured = 0;
    h = render(&r, 1, 1);
    cr_assert(strstr(h, "spec roofline: tensor16 peak 100 TFLOP/s"));
    cr_assert_null(strstr(h, "989 TFLOP/s"));
    free(h);
    record_free(&r);
}
