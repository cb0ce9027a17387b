#include "render_text.h"

#include "analyzers/rollup.h"
#include "reports/kv_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analyzers/advice.h"
#include "analyzers/experts.h"
#include "analyzers/confidence.h"
#include "core/units.h"
#include "analyzers/roofline.h"
#include "escape.h"
#include "sbuf.h"

xf_status render_format_parse(const char *s, render_format *out) {
    static const struct {
        const char *name;
        render_format f;
    } names[] = {{"table", RENDER_TABLE}, {"csv", RENDER_CSV}, {"md", RENDER_MD}, {"markdown", RENDER_MD}, {"json", RENDER_JSON}};
    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].f;
            return XF_OK;
        }
    return xf_errorf(XF_EINVAL, "unknown format '%.32s': use table, json, csv or md", s ? s : "");
}

xf_status render_rollup_point(const record_point *p, render_rollup **out, int64_t *n) {
    *out = NULL;
    *n = 0;
    rollup_agg *agg = NULL;
    int64_t m = 0;
    xf_status s = rollup_point_ops(p, &agg, &m);
    if (s) return s;
    render_rollup *rows = calloc((size_t)(m > 0 ? m : 1), sizeof *rows);
    if (!rows) {
        free(agg);
        return xf_errorf(XF_ENOMEM, "out of memory rendering the op table");
    }
    for (int64_t j = 0; j < m; j++) {
        const rollup_agg *a = &agg[j];
        render_rollup *r = &rows[j];
        r->phase = a->phase;
        r->kind = a->kind;
        r->first_layer = a->first_layer;
        r->last_layer = a->last_layer;
        r->count = a->n;
        r->flops = a->flops;
        r->bytes = a->bytes;
        r->time_s = a->time_s;
        r->predicted_time_s = a->predicted_time_s;
        r->calibrated_time_s = a->calibrated_time_s;
        r->spread_s = a->spread_s;
        r->share = a->share;
        r->bound = rollup_class(a); /* the one rule the HTML report uses too */
        r->measured = a->measured;
        r->util_compute = a->util_compute;
        r->util_memory = a->util_memory;
    }
    free(agg);
    *out = rows;
    *n = m;
    return XF_OK;
}

static const char *layers_label(const render_rollup *r, char *buf, size_t len) {
    if (r->first_layer < 0) snprintf(buf, len, "-");
    else if (r->first_layer == r->last_layer) snprintf(buf, len, "%d", r->first_layer);
    else snprintf(buf, len, "%d..%d", r->first_layer, r->last_layer);
    return buf;
}

static void point_heading(sbuf *b, const record *r, const record_point *p, int idx) {
    const workload *w = &p->wl;
    sbuf_printf(b, "== point %d: %s on %s (%s) | batch %lld, prompt %lld, gen %lld | weights %s, activations %s, KV %s\n", idx + 1,
                r->model.name, r->device.name, r->ceilings_measured || r->device.measured ? "measured ceilings" : "spec sheet",
                (long long)w->batch, (long long)w->prompt, (long long)w->gen, dtype_name(w->wdtype), dtype_name(w->adtype),
                dtype_name(w->kvdtype));
    if (p->run.backend[0])
        sbuf_printf(b, "   run: backend %s, %d threads, %d reps after %d warm-up, KV %s (%s), timer overhead %.0f ns subtracted\n",
                    p->run.backend, p->run.threads, p->run.reps, p->run.warmup, p->run.kv_policy, p->run.kv_alloc,
                    p->run.timer_overhead_s * 1e9);
}

/* The op table of one point: rows rolled up over layers, or every op. */
static xf_status table_ops(sbuf *b, const record *rec, const record_point *p, const render_options *opt) {
    int measured = 0;
    for (int64_t i = 0; i < p->n_ops; i++) measured |= p->ops[i].measured;
    render_rollup *rows = NULL;
    int64_t n = 0;
    if (opt && opt->per_layer) {
        rows = calloc((size_t)(p->n_ops > 0 ? p->n_ops : 1), sizeof *rows);
        if (!rows) return xf_errorf(XF_ENOMEM, "out of memory rendering the op table");
        for (int64_t i = 0; i < p->n_ops; i++) {
            const record_op *op = &p->ops[i];
            render_rollup *r = &rows[n++];
            r->phase = op->cost.phase;
            r->kind = op->cost.kind;
            r->first_layer = r->last_layer = op->cost.layer;
            r->count = 1;
            r->flops = op->cost.flops;
            r->bytes = op->bytes_from_counters ? op->measured_bytes : op->cost.bytes;
            r->time_s = op->time_s;
            r->predicted_time_s = op->predicted_time_s;
            r->calibrated_time_s = op->calibrated_time_s > 0 ? op->calibrated_time_s : op->predicted_time_s;
            r->spread_s = op->spread_s;
            r->share = op->share;
            r->bound = op->bound;
            r->measured = op->measured;
            r->util_compute = op->util_compute;
            r->util_memory = op->util_memory;
            r->confidence = op->confidence_boot > 0 ? op->confidence : -1;
        }
    } else {
        xf_status s = render_rollup_point(p, &rows, &n);
        if (s) return s;
        /* the roll-ups' confidence: the same bootstrap over the repetitions (analyzers/confidence.h) */
        double kc[XF_PHASE_COUNT][OP_KIND_COUNT];
        roofline_thresholds th;
        roofline_thresholds_default(&th);
        if (measured && (s = confidence_kinds(p, &rec->device, &th, CONFIDENCE_BOOT, CONFIDENCE_SEED, kc))) {
            free(rows);
            return s;
        }
        for (int64_t i = 0; i < n; i++) rows[i].confidence = measured ? kc[rows[i].phase][rows[i].kind] : -1;
    }
    /* issue 17: with a calibration, "predicted" is the calibrated prediction and "roofline" the bound beside it */
    int cal = !strcmp(rec->prediction, "calibrated") || !strcmp(rec->prediction, "default efficiencies");
    sbuf_printf(b, "%-8s %-14s %-7s %10s %10s %9s %-9s %10s", "phase", "op", "layers", "FLOPs", "bytes", "FLOP/B", "bound",
                measured ? "time(med)" : "time");
    if (measured) sbuf_printf(b, " %9s %9s %9s %10s %6s %6s %6s", "spread", "GFLOP/s", "GB/s", "predicted", "meas/p", "u_comp", "u_mem");
    if (cal) sbuf_printf(b, " %10s", "roofline");
    sbuf_printf(b, " %6s%s\n", "share", measured ? "   conf" : "");
    for (int64_t i = 0; i < n; i++) {
        const render_rollup *r = &rows[i];
        char lay[24], f[24], q[24], t[24], sp[24], pt[24], inten[24];
        double I = r->bytes > 0 ? r->flops / r->bytes : 0;
        snprintf(inten, sizeof inten, "%.2f", I);
        sbuf_printf(b, "%-8s %-14s %-7s %10s %10s %9s %-9s %10s", phase_name(r->phase), op_kind_name(r->kind),
                    layers_label(r, lay, sizeof lay), units_si(r->flops, "", f, sizeof f), units_bytes(r->bytes, q, sizeof q),
                    inten, bound_name(r->bound), units_time(r->time_s, t, sizeof t));
        double pred = cal && measured ? r->calibrated_time_s : r->predicted_time_s;
        if (measured)
            sbuf_printf(b, " %9s %9.2f %9.2f %10s %6.2f %5.1f%% %5.1f%%", units_time(r->spread_s, sp, sizeof sp),
                        r->time_s > 0 ? r->flops / r->time_s / 1e9 : 0, r->time_s > 0 ? r->bytes / r->time_s / 1e9 : 0,
                        units_time(pred, pt, sizeof pt), pred > 0 ? r->time_s / pred : 0, 100 * r->util_compute,
                        100 * r->util_memory);
        if (cal) sbuf_printf(b, " %10s", units_time(r->predicted_time_s, pt, sizeof pt));
        sbuf_printf(b, " %5.1f%%", 100 * r->share);
        if (measured && r->confidence >= 0) sbuf_printf(b, " %5.0f%%", 100 * r->confidence);
        else if (measured) sbuf_printf(b, " %6s", "-");
        sbuf_printf(b, "\n");
    }
    free(rows);
    return XF_OK;
}

/* A point split over devices: the split, the links, the collectives' share and the pipeline. */
static void render_parallel(sbuf *b, const record *r, const record_point *p) {
    const record_parallel *q = &p->par;
    char a[24], c[24], d[24];
    sbuf_printf(b, "split: tp %d x pp %d = %d devices", q->tp, q->pp, q->devices);
    if (r->device.link.bandwidth_Bps > 0)
        sbuf_printf(b, ", link %s %s per device", r->device.link.name, units_si(r->device.link.bandwidth_Bps, "B/s", a, sizeof a));
    if (r->device.node_link.bandwidth_Bps > 0 && r->device.gpus_per_node > 0 && q->devices > r->device.gpus_per_node)
        sbuf_printf(b, ", between nodes %s %s per device", r->device.node_link.name,
                    units_si(r->device.node_link.bandwidth_Bps, "B/s", c, sizeof c));
    if (q->kv_copies > 1) sbuf_printf(b, "; each KV head replicated on %d devices (fewer KV heads than --tp)", q->kv_copies);
    if (q->experts_per_device > 0) sbuf_printf(b, "; %d experts per device (expert parallel)", q->experts_per_device);
    if (q->tp > 1 && model_is_mla(&r->model)) sbuf_printf(b, "; the latent KV cache (MLA) replicated on every device");
    sbuf_printf(b, "\ncollectives: %.1f%% of the request time (communication-bound %.1f%%), %s sent per device per request (bus bytes: a ring all-reduce sends 2(N-1)/N of its buffer)\n",
                100 * q->comm_share, 100 * p->summary.share_bound[XF_BOUND_COMM], units_bytes(q->comm_bytes, d, sizeof d));
    if (q->pp > 1)
        sbuf_printf(b, "pipeline: %d micro-batches, bubble %.1f%% = (pp-1)/(m+pp-1); a step of the batch: prefill %s, decode %s\n",
                    q->micro_batches, 100 * q->bubble, units_time(q->prefill_step_s, a, sizeof a),
                    units_time(q->decode_step_s, c, sizeof c));
    sbuf_printf(b, "memory and the largest batch below are per device (the fullest stage)\n");
}

/* Mixture of experts: total against active weights, and the router's load of a measured point. */
static void table_experts(sbuf *b, const record *r, const record_point *p) {
    const model_config *c = &r->model;
    if (c->n_experts <= 0) return;
    char t[32], a[32], wt[32], wa[32];
    sbuf_printf(b, "experts: %lld routed (top-%lld%s) in %lld of %lld layers%s | parameters %s total, %s active per token",
                (long long)c->n_experts, (long long)c->experts_per_tok, c->norm_topk_prob ? ", renormalized" : "",
                (long long)model_moe_layers(c), (long long)c->n_layers, c->d_ff_shared > 0 ? ", a shared expert" : "",
                units_si((double)r->model_params, "", t, sizeof t), units_si((double)r->model_active_params, "", a, sizeof a));
    if (p->memory.active_weights_bytes > 0)
        sbuf_printf(b, " | weights %s total, %s active", units_bytes(p->memory.weights_bytes, wt, sizeof wt),
                    units_bytes(p->memory.active_weights_bytes, wa, sizeof wa));
    sbuf_printf(b, "\n");
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++) {
        experts_load ld;
        if (!experts_load_of(r, p, (xf_phase)ph, &ld)) continue;
        sbuf_printf(b, "router (%s, %lld step%s): %.2f of %lld experts read per step and layer; busiest: expert %lld of layer %d "
                       "with %.0f%% of its tokens (%.2fx the mean)\n",
                    phase_name((xf_phase)ph), (long long)ld.steps, ld.steps == 1 ? "" : "s", ld.distinct_per_step,
                    (long long)c->n_experts, (long long)ld.hot_expert, ld.worst_layer, 100 * ld.hot_share, ld.max_over_mean);
    }
}

static void table_summary(sbuf *b, const record *r, const record_point *p) {
    const record_summary *s = &p->summary;
    const record_memory *m = &p->memory;
    char a[24], c[24], d[24], e[24], f[24];
    sbuf_printf(b, "\n%-8s %10s %12s %12s\n", "phase", "step time", "FLOPs", "bytes");
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++) {
        double fl = 0, by = 0;
        int any = 0;
        for (int64_t i = 0; i < p->n_ops; i++)
            if (p->ops[i].cost.phase == (xf_phase)ph) {
                fl += p->ops[i].cost.flops;
                by += p->ops[i].bytes_from_counters ? p->ops[i].measured_bytes : p->ops[i].cost.bytes;
                any = 1;
            }
        if (!any) continue;
        sbuf_printf(b, "%-8s %10s %12s %12s%s\n", phase_name((xf_phase)ph),
                    units_time(ph == XF_PREFILL ? s->prefill_time_s : s->decode_time_s, a, sizeof a),
                    units_si(fl, "", c, sizeof c), units_bytes(by, d, sizeof d),
                    ph == XF_DECODE ? " (one step at the mean decode context)" : "");
    }
    sbuf_printf(b, "\nTTFT %s | TPOT %s at context %lld | %.1f tokens/s end to end (prefill %.0f tok/s, decode %.1f tok/s)\n",
                units_time(s->ttft_s, a, sizeof a), units_time(s->tpot_s, c, sizeof c), (long long)s->decode_context,
                s->tokens_per_s, s->prefill_tokens_per_s, s->decode_tokens_per_s);
    sbuf_printf(b, "time by class over the request: memory %.1f%%, compute %.1f%%, latency %.1f%%, balanced %.1f%%\n",
                100 * s->share_bound[XF_BOUND_MEMORY], 100 * s->share_bound[XF_BOUND_COMPUTE],
                100 * s->share_bound[XF_BOUND_LATENCY], 100 * s->share_bound[XF_BOUND_BALANCED]);
    if (s->share_bound[XF_BOUND_COMM] > 0 || p->par.tp > 0) render_parallel(b, r, p);
    if (s->verdict_boot > 0) {
        rollup_verdict v;
        rollup_verdict_of(p, &v);
        sbuf_printf(b, "verdict: mostly %s-bound, confidence %.0f%% (%d bootstrap resamples of the repetitions)\n",
                    bound_name(v.top_class), 100 * s->verdict_confidence, s->verdict_boot);
    }
    const record_concurrent *cc = &p->concurrent;
    if (cc->n_pulses >= 2 && cc->machine_bandwidth_Bps > 0 && cc->machine_fp32_flops > 0) {
        sbuf_printf(b, "machine: %s (concurrent read %.2f GB/s, %+.0f%% vs the machine file; FP32 %.1f GFLOP/s, %+.0f%%; "
                       "contended past -%.0f%%",
                    cc->contended ? "CONTENDED" : "not contended", cc->bandwidth_Bps / 1e9,
                    100 * (cc->bandwidth_Bps / cc->machine_bandwidth_Bps - 1), cc->fp32_flops / 1e9,
                    100 * (cc->fp32_flops / cc->machine_fp32_flops - 1), 100 * cc->threshold);
        if (cc->cpu_wait_measured)
            sbuf_printf(b, "; threads waited for a CPU %.0f%% of the time", 100 * cc->cpu_wait_share);
        sbuf_printf(b, "): classes against the concurrent ceilings\n");
    }
    sbuf_printf(b, "memory: weights %s + KV %s + activations %s = %s", units_bytes(m->weights_bytes, a, sizeof a),
                units_bytes(m->kv_bytes, c, sizeof c), units_bytes(m->activations_bytes, d, sizeof d),
                units_bytes(m->total_bytes, e, sizeof e));
    if (m->capacity_bytes > 0) {
        sbuf_printf(b, " of %s (%.1f%%)%s", units_bytes(m->capacity_bytes, f, sizeof f), 100 * m->total_bytes / m->capacity_bytes,
                    m->total_bytes > m->capacity_bytes ? " -- DOES NOT FIT" : "");
        sbuf_printf(b, " | largest batch that fits: %lld", (long long)s->max_batch);
    }
    sbuf_printf(b, "\n");
    table_experts(b, r, p);
}

/* The record's advice (analyzers/advice.h), or, for a record made without it, the advice the
 * analyzer finds now: the three best findings, each with its evidence and predicted gain. */
static void table_advice(sbuf *b, const record *r) {
    record_advice local[RECORD_MAX_ADVICE];
    const record_advice *a = r->advice;
    int n = r->n_advice;
    if (n == 0) {
        if (advice_find(r, local, RECORD_MAX_ADVICE, &n) != XF_OK) n = 0;
        a = local;
    }
    if (n == 0) return;
    sbuf_printf(b, "\nadvice (best first; gains predicted by the cost model):\n");
    for (int i = 0; i < n && i < 3; i++)
        sbuf_printf(b, "%d. %s\n   evidence: %s\n   action:   %s\n", i + 1, a[i].title, a[i].evidence, a[i].action);
    if (n > 3) sbuf_printf(b, "   (%d more in the JSON record's \"advice\")\n", n - 3);
}

static xf_status render_table(sbuf *b, const record *r, const render_options *opt) {
    if (r->partial) sbuf_printf(b, "PARTIAL RECORD: %s\n\n", r->partial_reason[0] ? r->partial_reason : "stopped before the end");
    for (int i = 0; i < r->n_points; i++) {
        if (i) sbuf_puts(b, "\n");
        point_heading(b, r, &r->points[i], i);
        if (r->ops_left_out > 0 && r->points[i].n_ops == 0) { /* read in a stream: see record_load_stream */
            sbuf_puts(b, "   (ops not kept: the record was read in a stream, which keeps the ops of its first points only)\n");
        } else {
            xf_status s = table_ops(b, r, &r->points[i], opt);
            if (s) return s;
        }
        table_summary(b, r, &r->points[i]);
        const record_summary *sm = &r->points[i].summary;
        if (sm->predicted_ttft_s > 0 && r->points[i].ops && r->points[i].ops[0].measured) /* issue 17 */
            sbuf_printf(b, "predicted (%s): TTFT %.3f ms (measured %.3f), TPOT %.3f ms (measured %.3f)\n",
                        r->prediction[0] ? r->prediction : "roofline bound", sm->predicted_ttft_s * 1e3, sm->ttft_s * 1e3,
                        sm->predicted_tpot_s * 1e3, sm->tpot_s * 1e3);
    }
    if (r->n_points && r->prediction[0] && !r->kv) /* issue 17: how "predicted" was made */
        sbuf_printf(b, "\npredicted = %s%s%s%s\n", r->prediction,
                    strcmp(r->prediction, "roofline bound") ? " (\"roofline\": the bound max(F/P, Q/B) beside it)" : "",
                    r->prediction_note[0] ? ": " : "", r->prediction_note);
    if (r->kv) { /* a kv record: the policies' table, as `xfprof kv` printed it */
        if (r->n_points) sbuf_puts(b, "\n");
        render_kv_table(b, r);
    }
    table_advice(b, r);
    return XF_OK;
}

static void csv_field(sbuf *b, const char *s) {
    /* RFC 4180: quote fields holding a comma, quote or newline; double the quotes. */
    if (!strpbrk(s, ",\"\n\r")) {
        sbuf_puts(b, s);
        return;
    }
    sbuf_puts(b, "\"");
    for (const char *c = s; *c; c++) sbuf_putn(b, c, 1), (*c == '"' ? sbuf_putn(b, "\"", 1) : (void)0);
    sbuf_puts(b, "\"");
}

static xf_status render_csv(sbuf *b, const record *r) {
    sbuf_puts(b, "point,model,device,batch,prompt,gen,wdtype,adtype,kvdtype,phase,layer,op,compute,flops,bytes,bytes_source,"
                 "intensity,bound,time_s,predicted_time_s,share,measured,n_samples,spread_s,util_compute,util_memory,tp,pp,comm_bytes,"
                 "util_compute_machine,util_memory_machine,confidence,calibrated_time_s\n");
    for (int i = 0; i < r->n_points; i++) {
        const record_point *p = &r->points[i];
        for (int64_t k = 0; k < p->n_ops; k++) {
            const record_op *op = &p->ops[k];
            sbuf_printf(b, "%d,", i);
            csv_field(b, r->model.name);
            sbuf_puts(b, ",");
            csv_field(b, r->device.name);
            sbuf_printf(b, ",%lld,%lld,%lld,%s,%s,%s,%s,%d,%s,%s,%.17g,%.17g,%s,%.17g,%s,%.17g,%.17g,%.17g,%d,%d,%.17g,%.17g,%.17g,%d,%d,%.17g",
                        (long long)p->wl.batch, (long long)p->wl.prompt, (long long)p->wl.gen, dtype_name(p->wl.wdtype),
                        dtype_name(p->wl.adtype), dtype_name(p->wl.kvdtype), phase_name(op->cost.phase), op->cost.layer,
                        op_kind_name(op->cost.kind), compute_name(op->cost.compute), op->cost.flops,
                        op->bytes_from_counters ? op->measured_bytes : op->cost.bytes,
                        op->bytes_from_counters ? "counters" : "model", op->intensity, bound_name(op->bound), op->time_s,
                        op->predicted_time_s, op->share, op->measured, op->n_samples, op->spread_s, op->util_compute,
                        op->util_memory, p->par.tp > 0 ? p->par.tp : 1, p->par.pp > 0 ? p->par.pp : 1, op->cost.comm_bytes);
            /* the machine file's utilizations and the confidence (empty: none) */
            sbuf_printf(b, ",%.17g,%.17g,", op->util_compute_machine, op->util_memory_machine);
            if (op->confidence_boot > 0) sbuf_printf(b, "%.17g", op->confidence);
            sbuf_puts(b, ",");
            if (op->calibrated_time_s > 0) sbuf_printf(b, "%.17g", op->calibrated_time_s); /* empty: the roofline bound only */
            sbuf_puts(b, "\n");
        }
    }
    return XF_OK;
}

/* Markdown: escape the characters that break a table cell or start markup. */
static void md_text(sbuf *b, const char *s) {
    for (const char *c = s; *c; c++) {
        if (strchr("|*_`<>[]\\#", *c)) sbuf_putn(b, "\\", 1);
        if (*c == '\n' || *c == '\r') sbuf_putn(b, " ", 1);
        else sbuf_putn(b, c, 1);
    }
}

static xf_status render_md(sbuf *b, const record *r) {
    char a[24], c[24], d[24];
    sbuf_puts(b, "### xfprof: ");
    md_text(b, r->model.name);
    sbuf_puts(b, " on ");
    md_text(b, r->device.name);
    sbuf_printf(b, " (%s, %s ceilings)\n\n", r->kind, r->ceilings_measured || r->device.measured ? "measured" : "spec-sheet");
    if (r->partial) {
        sbuf_puts(b, "**Partial record**: ");
        md_text(b, r->partial_reason[0] ? r->partial_reason : "stopped before the end");
        sbuf_puts(b, "\n\n");
    }
    sbuf_puts(b, "| batch | prompt | gen | weights | KV | TTFT | TPOT | tokens/s | memory-bound | memory | fits |\n"
                 "|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < r->n_points; i++) {
        const record_point *p = &r->points[i];
        sbuf_printf(b, "| %lld | %lld | %lld | %s | %s | %s | %s | %.1f | %.0f%% | %s | %s |\n", (long long)p->wl.batch,
                    (long long)p->wl.prompt, (long long)p->wl.gen, dtype_name(p->wl.wdtype), dtype_name(p->wl.kvdtype),
                    units_time(p->summary.ttft_s, a, sizeof a), units_time(p->summary.tpot_s, c, sizeof c),
                    p->summary.tokens_per_s, 100 * p->summary.share_bound[XF_BOUND_MEMORY],
                    units_bytes(p->memory.total_bytes, d, sizeof d),
                    p->memory.capacity_bytes <= 0 ? "?" : p->memory.total_bytes <= p->memory.capacity_bytes ? "yes" : "**no**");
    }
    if (r->ops_left_out > 0)
        sbuf_printf(b, "\nThe ops of %lld points are not shown: the record was read in a stream (it is larger than 64 MiB), "
                       "which keeps the ops of its first points only.\n",
                    (long long)r->ops_left_out);
    for (int i = 0; i < r->n_points; i++) {
        const record_point *p = &r->points[i];
        if (r->ops_left_out > 0 && p->n_ops == 0) continue;
        render_rollup *rows;
        int64_t n;
        xf_status s = render_rollup_point(p, &rows, &n);
        if (s) return s;
        sbuf_printf(b, "\n<details><summary>ops of point %d (batch %lld, prompt %lld)</summary>\n\n", i + 1, (long long)p->wl.batch,
                    (long long)p->wl.prompt);
        sbuf_puts(b, "| phase | op | FLOPs | bytes | FLOP/B | bound | time | share |\n|---|---|---:|---:|---:|---|---:|---:|\n");
        for (int64_t k = 0; k < n; k++) {
            const render_rollup *x = &rows[k];
            char f[24], q[24], t[24];
            sbuf_printf(b, "| %s | %s | %s | %s | %.2f | %s | %s | %.1f%% |\n", phase_name(x->phase), op_kind_name(x->kind),
                        units_si(x->flops, "", f, sizeof f), units_bytes(x->bytes, q, sizeof q),
                        x->bytes > 0 ? x->flops / x->bytes : 0, bound_name(x->bound), units_time(x->time_s, t, sizeof t),
                        100 * x->share);
        }
        sbuf_puts(b, "\n</details>\n");
        free(rows);
    }
    return XF_OK;
}

xf_status render_text(const record *r, render_format fmt, const render_options *opt, char **out) {
    *out = NULL;
    sbuf b;
    sbuf_init(&b);
    xf_status s = XF_OK;
    switch (fmt) {
    case RENDER_TABLE: s = render_table(&b, r, opt); break;
    case RENDER_CSV: s = render_csv(&b, r); break;
    case RENDER_MD: s = render_md(&b, r); break;
    case RENDER_JSON: s = xf_errorf(XF_EINVAL, "render_text does not write JSON: use record_to_json"); break;
    }
    if (s == XF_OK) s = sbuf_status(&b);
    if (s) {
        sbuf_free(&b);
        return s;
    }
    /* Every string in a record came from a file: nothing in the text may drive the terminal. */
    sbuf safe;
    sbuf_init(&safe);
    esc_terminal(&safe, b.data ? b.data : "", 1);
    sbuf_free(&b);
    if ((s = sbuf_status(&safe))) {
        sbuf_free(&safe);
        return s;
    }
    b = safe;
    *out = sbuf_take(&b);
    return *out ? XF_OK : xf_errorf(XF_ENOMEM, "out of memory rendering");
}
