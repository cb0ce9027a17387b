#include "trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "core/json_util.h"

static double op_time(const record_op *op) {
    return (isfinite(op->time_s) && op->time_s > 0) ? op->time_s : 0.0;
}

static int add_meta(cJSON *events, const char *what, int pid, int tid, const char *name, int sort) {
    cJSON *e = cJSON_CreateObject();
    if (!e) return 0;
    cJSON_AddItemToArray(events, e);
    cJSON *args = cJSON_CreateObject();
    if (!cJSON_AddStringToObject(e, "name", what) || !cJSON_AddStringToObject(e, "ph", "M") ||
        !cJSON_AddNumberToObject(e, "pid", pid) || !cJSON_AddNumberToObject(e, "tid", tid) || !args)
        return (cJSON_Delete(args), 0);
    cJSON_AddItemToObject(e, "args", args);
    if (name) return cJSON_AddStringToObject(args, "name", name) != NULL;
    return cJSON_AddNumberToObject(args, "sort_index", sort) != NULL;
}

/* Adds one op's complete event at ts (microseconds). */
static int add_op(cJSON *events, const record_op *op, int pid, double ts_us) {
    cJSON *e = cJSON_CreateObject();
    if (!e) return 0;
    cJSON_AddItemToArray(events, e);
    int tid = op->cost.layer >= 0 ? op->cost.layer + 1 : 0;
    cJSON *args = cJSON_CreateObject();
    if (!args) return 0;
    cJSON_AddItemToObject(e, "args", args);
    int ok = cJSON_AddStringToObject(e, "name", op_kind_name(op->cost.kind)) != NULL &&
             cJSON_AddStringToObject(e, "cat", phase_name(op->cost.phase)) != NULL &&
             cJSON_AddStringToObject(e, "ph", "X") != NULL && json_add_number(e, "ts", ts_us) &&
             json_add_number(e, "dur", op_time(op) * 1e6) && cJSON_AddNumberToObject(e, "pid", pid) != NULL &&
             cJSON_AddNumberToObject(e, "tid", tid) != NULL;
    ok = ok && cJSON_AddNumberToObject(args, "layer", op->cost.layer) && json_add_number(args, "flops", op->cost.flops) &&
         json_add_number(args, "bytes", op->cost.bytes) && json_add_number(args, "intensity", op->intensity) &&
         cJSON_AddStringToObject(args, "bound", bound_name(op->bound)) &&
         cJSON_AddStringToObject(args, "compute", compute_name(op->cost.compute)) &&
         json_add_number(args, "time_s", op->time_s) && json_add_number(args, "predicted_time_s", op->predicted_time_s) &&
         json_add_number(args, "share", op->share);
    if (ok && op->measured) {
        ok = cJSON_AddNumberToObject(args, "samples", op->n_samples) && json_add_number(args, "spread_s", op->spread_s) &&
             json_add_number(args, "util_compute", op->util_compute) && json_add_number(args, "util_memory", op->util_memory);
        if (ok && op->bytes_from_counters) ok = json_add_number(args, "measured_bytes", op->measured_bytes) != 0;
    }
    return ok;
}

static cJSON *build(const record *r) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON *events = cJSON_AddArrayToObject(root, "traceEvents");
    int ok = events && cJSON_AddStringToObject(root, "displayTimeUnit", "ns");
    cJSON *other = ok ? cJSON_AddObjectToObject(root, "otherData") : NULL;
    ok = ok && other && cJSON_AddStringToObject(other, "format", "xfprof-trace") &&
         cJSON_AddStringToObject(other, "record_kind", r->kind) && cJSON_AddStringToObject(other, "model", r->model.name) &&
         cJSON_AddStringToObject(other, "device", r->device.name);
    for (int pi = 0; ok && pi < r->n_points; pi++) {
        const record_point *p = &r->points[pi];
        double cursor_us = 0; /* decode starts where prefill ends */
        for (int ph = 0; ok && ph < XF_PHASE_COUNT; ph++) {
            int has = 0;
            for (int64_t i = 0; i < p->n_ops && !has; i++) has = p->ops[i].cost.phase == (xf_phase)ph;
            if (!has) continue;
            int pid = 1 + pi * XF_PHASE_COUNT + ph;
            char name[160];
            if (r->n_points > 1)
                snprintf(name, sizeof name, "%s, batch %lld, prompt %lld (point %d)", phase_name((xf_phase)ph),
                         (long long)p->wl.batch, (long long)p->wl.prompt, pi);
            else
                snprintf(name, sizeof name, "%s step, batch %lld, prompt %lld", phase_name((xf_phase)ph),
                         (long long)p->wl.batch, (long long)p->wl.prompt);
            ok = add_meta(events, "process_name", pid, 0, name, 0) && add_meta(events, "process_sort_index", pid, 0, NULL, pid);
            int64_t max_layer = -1;
            int outside = 0;
            for (int64_t i = 0; i < p->n_ops; i++) {
                const record_op *op = &p->ops[i];
                if (op->cost.phase != (xf_phase)ph) continue;
                if (op->cost.layer > max_layer) max_layer = op->cost.layer;
                if (op->cost.layer < 0) outside = 1;
            }
            if (ok && outside)
                ok = add_meta(events, "thread_name", pid, 0, "outside layers (embedding, lm_head, sampling)", 0) &&
                     add_meta(events, "thread_sort_index", pid, 0, NULL, 0);
            for (int64_t l = 0; ok && l <= max_layer; l++) {
                snprintf(name, sizeof name, "layer %lld", (long long)l);
                ok = add_meta(events, "thread_name", pid, (int)l + 1, name, 0) &&
                     add_meta(events, "thread_sort_index", pid, (int)l + 1, NULL, (int)l + 1);
            }
            for (int64_t i = 0; ok && i < p->n_ops; i++) {
                const record_op *op = &p->ops[i];
                if (op->cost.phase != (xf_phase)ph) continue;
                ok = add_op(events, op, pid, cursor_us);
                cursor_us += op_time(op) * 1e6;
            }
        }
    }
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

xf_status report_trace_text(const record *r, char **out) {
    *out = NULL;
    cJSON *root = build(r);
    if (!root) return xf_errorf(XF_ENOMEM, "out of memory while building the trace");
    *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!*out) return xf_errorf(XF_ENOMEM, "out of memory while printing the trace");
    return XF_OK;
}

xf_status report_trace_write(const record *r, const char *path) {
    char *text = NULL;
    xf_status st = report_trace_text(r, &text);
    if (st != XF_OK) return st;
    st = file_write_atomic(path, text, strlen(text));
    free(text);
    if (st != XF_OK) return xf_error_prefix(st, "trace: ");
    return XF_OK;
}
