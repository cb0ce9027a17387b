#include "trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "sbuf.h"

/* Written directly rather than through cJSON: a 1,000-point sweep has ~800k events, and a cJSON
 * tree of them took 21 s to build and print. Every string goes through json_str. */

static double op_time(const record_op *op) {
    return (isfinite(op->time_s) && op->time_s > 0) ? op->time_s : 0.0;
}

/* A JSON string literal: quotes, backslashes and control characters escaped. */
static void json_str(sbuf *b, const char *s) {
    sbuf_putn(b, "\"", 1);
    const char *run = s;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\' || c < 0x20) {
            sbuf_putn(b, run, (size_t)(p - run));
            if (c == '"')
                sbuf_puts(b, "\\\"");
            else if (c == '\\')
                sbuf_puts(b, "\\\\");
            else
                sbuf_printf(b, "\\u%04x", c);
            run = p + 1;
        }
    }
    sbuf_puts(b, run);
    sbuf_putn(b, "\"", 1);
}

/* A JSON number: whole numbers below 2^53 exactly (FLOPs, bytes), others to 15 significant
 * digits (relative error below 1e-15); null when not finite. */
static void json_num(sbuf *b, double v) {
    if (!isfinite(v)) {
        sbuf_puts(b, "null");
        return;
    }
    char buf[40];
    if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        /* integer fast path: snprintf of doubles dominates the time of large traces */
        long long x = (long long)v;
        char *p = buf + sizeof buf;
        *--p = '\0';
        int neg = x < 0;
        unsigned long long u = neg ? (unsigned long long)(-x) : (unsigned long long)x;
        do {
            *--p = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (neg) *--p = '-';
        sbuf_puts(b, p);
        return;
    }
    snprintf(buf, sizeof buf, "%.15g", v);
    sbuf_puts(b, buf);
}

static void meta_name(sbuf *b, const char *what, int pid, int tid, const char *name) {
    sbuf_printf(b, ",\n{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", what, pid, tid);
    json_str(b, name);
    sbuf_puts(b, "}}");
}

static void meta_sort(sbuf *b, const char *what, int pid, int tid, int index) {
    sbuf_printf(b, ",\n{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}", what, pid, tid,
                index);
}

static void op_event(sbuf *b, const record_op *op, int pid, double ts_us) {
    int tid = op->cost.layer >= 0 ? op->cost.layer + 1 : 0;
    sbuf_puts(b, ",\n{\"name\":");
    json_str(b, op_kind_name(op->cost.kind));
    sbuf_puts(b, ",\"cat\":");
    json_str(b, phase_name(op->cost.phase));
    sbuf_puts(b, ",\"ph\":\"X\",\"ts\":");
    json_num(b, ts_us);
    sbuf_puts(b, ",\"dur\":");
    json_num(b, op_time(op) * 1e6);
    sbuf_printf(b, ",\"pid\":%d,\"tid\":%d,\"args\":{\"layer\":%d,\"flops\":", pid, tid, op->cost.layer);
    json_num(b, op->cost.flops);
    sbuf_puts(b, ",\"bytes\":");
    json_num(b, op->cost.bytes);
    sbuf_puts(b, ",\"intensity\":");
    json_num(b, op->intensity);
    sbuf_puts(b, ",\"bound\":");
    json_str(b, bound_name(op->bound));
    sbuf_puts(b, ",\"compute\":");
    json_str(b, compute_name(op->cost.compute));
    /* the time itself is dur; a prediction beside a measurement is worth its bytes */
    if (op->measured) {
        sbuf_puts(b, ",\"predicted_time_s\":");
        json_num(b, op->predicted_time_s);
        sbuf_printf(b, ",\"samples\":%d,\"spread_s\":", op->n_samples);
        json_num(b, op->spread_s);
        sbuf_puts(b, ",\"util_compute\":");
        json_num(b, op->util_compute);
        sbuf_puts(b, ",\"util_memory\":");
        json_num(b, op->util_memory);
        if (op->bytes_from_counters) {
            sbuf_puts(b, ",\"measured_bytes\":");
            json_num(b, op->measured_bytes);
        }
    }
    sbuf_puts(b, "}}");
}

xf_status report_trace_text(const record *r, char **out) {
    *out = NULL;
    sbuf b;
    sbuf_init(&b);
    /* the first event is a metadata record naming the source, so every later one starts ",\n" */
    sbuf_puts(&b, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"format\":\"xfprof-trace\",\"record_kind\":");
    json_str(&b, r->kind);
    sbuf_puts(&b, ",\"model\":");
    json_str(&b, r->model.name);
    sbuf_puts(&b, ",\"device\":");
    json_str(&b, r->device.name);
    sbuf_puts(&b, "},\"traceEvents\":[");
    size_t first = b.len; /* every event starts ",\n"; the first one's comma becomes a space */
    for (int pi = 0; pi < r->n_points; pi++) {
        const record_point *p = &r->points[pi];
        double cursor_us = 0; /* decode starts where prefill ends */
        for (int ph = 0; ph < XF_PHASE_COUNT; ph++) {
            int64_t max_layer = -1;
            int has = 0, outside = 0;
            for (int64_t i = 0; i < p->n_ops; i++) {
                const record_op *op = &p->ops[i];
                if (op->cost.phase != (xf_phase)ph) continue;
                has = 1;
                if (op->cost.layer > max_layer) max_layer = op->cost.layer;
                if (op->cost.layer < 0) outside = 1;
            }
            if (!has) continue;
            int pid = 1 + pi * XF_PHASE_COUNT + ph;
            char name[160];
            if (r->n_points > 1)
                snprintf(name, sizeof name, "%s, batch %lld, prompt %lld (point %d)", phase_name((xf_phase)ph),
                         (long long)p->wl.batch, (long long)p->wl.prompt, pi + 1);
            else
                snprintf(name, sizeof name, "%s step, batch %lld, prompt %lld", phase_name((xf_phase)ph),
                         (long long)p->wl.batch, (long long)p->wl.prompt);
            meta_name(&b, "process_name", pid, 0, name);
            meta_sort(&b, "process_sort_index", pid, 0, pid);
            if (outside) {
                meta_name(&b, "thread_name", pid, 0, "outside layers (embedding, lm_head, sampling)");
                meta_sort(&b, "thread_sort_index", pid, 0, 0);
            }
            for (int64_t l = 0; l <= max_layer; l++) {
                snprintf(name, sizeof name, "layer %lld", (long long)l);
                meta_name(&b, "thread_name", pid, (int)l + 1, name);
                meta_sort(&b, "thread_sort_index", pid, (int)l + 1, (int)l + 1);
            }
            for (int64_t i = 0; i < p->n_ops; i++) {
                const record_op *op = &p->ops[i];
                if (op->cost.phase != (xf_phase)ph) continue;
                op_event(&b, op, pid, cursor_us);
                cursor_us += op_time(op) * 1e6;
            }
        }
    }
    sbuf_puts(&b, "\n]}\n");
    xf_status st = sbuf_status(&b);
    if (st == XF_OK && b.data[first] == ',') b.data[first] = ' ';
    if (st != XF_OK) {
        sbuf_free(&b);
        return xf_error_prefix(st, "trace: ");
    }
    *out = sbuf_take(&b);
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
