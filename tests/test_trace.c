/* The Chrome trace: valid JSON with the Trace Event fields on every event; each op is one
 * complete ("X") event whose duration is the op's time in the record, laid out in op order. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analyzers/predict.h"
#include "core/fileio.h"
#include "reports/trace.h"

/* A hand-made point: per phase embedding, 2 layers x (qkv, attention), lm_head; known times. */
static void make_record(record *r) {
    record_init(r, "predict");
    snprintf(r->model.name, sizeof r->model.name, "tiny\"model");
    snprintf(r->device.name, sizeof r->device.name, "testdev");
    r->model.n_layers = 2;
    record_point *p = record_add_point(r);
    cr_assert(p);
    workload_default(&p->wl);
    p->wl.batch = 2;
    p->wl.prompt = 8;
    p->ops = calloc(12, sizeof *p->ops); /* (12) */
    cr_assert(p->ops);
    static const op_kind kinds[] = {OP_EMBEDDING, OP_QKV, OP_ATTENTION, OP_QKV, OP_ATTENTION, OP_LM_HEAD};
    static const int layers[] = {-1, 0, 0, 1, 1, -1};
    for (int ph = 0; ph < 2; ph++)
        for (int i = 0; i < 6; i++) {
            record_op *op = &p->ops[p->n_ops++];
            op->cost.phase = (xf_phase)ph;
            op->cost.layer = layers[i];
            op->cost.kind = kinds[i];
            op->cost.flops = 1e6 * (i + 1);
            op->cost.bytes = 1e5 * (i + 1);
            op->intensity = 10;
            op->bound = i % 2 ? XF_BOUND_COMPUTE : XF_BOUND_MEMORY;
            /* times 1 us, 2 us, ... in prefill; 0.5 us, 1 us, ... in decode */
            op->time_s = (ph == 0 ? 1e-6 : 0.5e-6) * (i + 1);
            op->predicted_time_s = op->time_s;
        }
}

static cJSON *parse_trace(const record *r) {
    char *text = NULL;
    cr_assert_eq(report_trace_text(r, &text), XF_OK, "%s", xf_error_msg());
    cJSON *root = cJSON_Parse(text);
    free(text);
    cr_assert(root, "the trace is not JSON");
    return root;
}

/* Checks the fields every event needs; returns the number of X events. */
static int check_events(const cJSON *root) {
    const cJSON *unit = cJSON_GetObjectItemCaseSensitive(root, "displayTimeUnit");
    cr_assert(cJSON_IsString(unit) && strcmp(unit->valuestring, "ns") == 0);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    cr_assert(cJSON_IsArray(ev));
    int nx = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        cr_assert(cJSON_IsString(name) && name->valuestring[0]);
        cr_assert(cJSON_IsString(ph));
        cr_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(e, "pid")));
        cr_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(e, "tid")));
        cr_assert(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(e, "args")));
        if (strcmp(ph->valuestring, "X") == 0) {
            nx++;
            const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
            const cJSON *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
            cr_assert(cJSON_IsNumber(ts) && ts->valuedouble >= 0);
            cr_assert(cJSON_IsNumber(dur) && dur->valuedouble >= 0);
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
            cr_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(args, "flops")));
            cr_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(args, "bytes")));
            cr_assert(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(args, "bound")));
        } else {
            cr_assert_str_eq(ph->valuestring, "M");
        }
    }
    return nx;
}

Test(trace, events_and_durations) {
    record r;
    make_record(&r);
    cJSON *root = parse_trace(&r);
    cr_assert_eq(check_events(root), 12);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    /* the X events in op order: duration = time_s * 1e6 us; ts = the sum of the earlier ops of
     * the phase, and decode starts where prefill ends: prefill 1+2+3+4+5+6 = 21 us. */
    int i = 0;
    double expect_ts = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev) {
        if (strcmp(cJSON_GetObjectItemCaseSensitive(e, "ph")->valuestring, "X") != 0) continue;
        const record_op *op = &r.points[0].ops[i];
        if (i == 6) cr_assert_float_eq(expect_ts, 21.0, 1e-9);
        double dur = cJSON_GetObjectItemCaseSensitive(e, "dur")->valuedouble;
        double ts = cJSON_GetObjectItemCaseSensitive(e, "ts")->valuedouble;
        cr_assert_float_eq(dur, op->time_s * 1e6, 1e-9, "op %d", i);
        cr_assert_float_eq(ts, expect_ts, 1e-9, "op %d", i);
        expect_ts += dur;
        cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring, op_kind_name(op->cost.kind));
        /* pid per phase (1 prefill, 2 decode), tid per layer (0 outside the layers) */
        cr_assert_eq(cJSON_GetObjectItemCaseSensitive(e, "pid")->valueint, 1 + (int)op->cost.phase);
        cr_assert_eq(cJSON_GetObjectItemCaseSensitive(e, "tid")->valueint, op->cost.layer + 1);
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        cr_assert_float_eq(cJSON_GetObjectItemCaseSensitive(args, "flops")->valuedouble, op->cost.flops, 1e-6);
        cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(args, "bound")->valuestring, bound_name(op->bound));
        i++;
    }
    cr_assert_eq(i, 12);
    /* metadata names each process and each layer thread: 2 process_name, and per phase 1 + 2
     * thread_name (outside + layers 0 and 1) */
    int np = 0, nt = 0;
    cJSON_ArrayForEach(e, ev) {
        const char *n = cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring;
        if (strcmp(n, "process_name") == 0) np++;
        if (strcmp(n, "thread_name") == 0) nt++;
    }
    cr_assert_eq(np, 2);
    cr_assert_eq(nt, 6);
    /* the model name with a quote survives as data */
    const cJSON *other = cJSON_GetObjectItemCaseSensitive(root, "otherData");
    cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(other, "model")->valuestring, "tiny\"model");
    cJSON_Delete(root);
    record_free(&r);
}

Test(trace, predicted_record_written_to_a_file) {
    model_config cfg;
    device_spec d;
    cr_assert_eq(config_preset("stories15m", &cfg), XF_OK);
    cr_assert_eq(device_lookup("a100-40gb", NULL, &d), XF_OK, "%s", xf_error_msg());
    workload w[2];
    workload_default(&w[0]);
    workload_default(&w[1]);
    w[1].batch = 8;
    record r;
    cr_assert_eq(predict_record(&cfg, &d, w, 2, &r), XF_OK, "%s", xf_error_msg());
    char path[] = "/tmp/xfprof-test-trace-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(report_trace_write(&r, path), XF_OK, "%s", xf_error_msg());
    char *text = NULL;
    size_t len = 0;
    cr_assert_eq(file_read_all(path, 1 << 28, &text, &len), XF_OK);
    unlink(path);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cr_assert(root);
    /* 2 points x 2 steps x (4 + 12 * 6) ops = 304 X events */
    cr_assert_eq(check_events(root), 2 * 2 * (4 + 12 * 6));
    /* the summed durations of point 1's prefill are its TTFT (the sum of its op times) */
    double sum = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "traceEvents")) {
        if (strcmp(cJSON_GetObjectItemCaseSensitive(e, "ph")->valuestring, "X") == 0 &&
            cJSON_GetObjectItemCaseSensitive(e, "pid")->valueint == 3) /* point 1, prefill */
            sum += cJSON_GetObjectItemCaseSensitive(e, "dur")->valuedouble;
    }
    cr_assert_float_eq(sum, r.points[1].summary.ttft_s * 1e6, 1e-6 * sum);
    cJSON_Delete(root);
    record_free(&r);
}

Test(trace, unwritable_path_is_an_error) {
    record r;
    make_record(&r);
    cr_assert_eq(report_trace_write(&r, "/nonexistent-dir/t.json"), XF_EIO);
    record_free(&r);
}
