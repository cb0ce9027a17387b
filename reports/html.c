#include "html.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/record_kv.h"
#include "core/units.h"
#include "escape.h"
#include "gnuplot.h"
#include "sbuf.h"

/* ------------------------------------------------------------------------------------------
 * Numbers. Display: core/units.h (sizes in binary units, rates and counts with decimal prefixes,
 * three significant figures); the exact record value goes in
 * each table cell's data-v attribute (shortest text that reads back to the same double), which
 * is also what the sort uses. */

static void fmt_pct(char *buf, size_t n, double f) {
    if (!isfinite(f))
        snprintf(buf, n, "n/a");
    else if (f > 0 && f < 0.0005) { /* not nothing, even if it rounds to 0.0 (no '<': raw HTML) */
        if (f >= 0.00005)
            snprintf(buf, n, "%.2f%%", f * 100);
        else
            snprintf(buf, n, "\xe2\x89\x88" "0%%"); /* "≈0%" */
    } else
        snprintf(buf, n, "%.1f%%", f * 100);
}

static void fmt_exact(char *buf, size_t n, double v) {
    if (!isfinite(v)) {
        snprintf(buf, n, "NaN");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

static double safe_div(double a, double b) { return (b != 0 && isfinite(a) && isfinite(b)) ? a / b : 0.0; }

/* ------------------------------------------------------------------------------------------
 * Colours: one per class, one per op kind. */

static const char *class_color(xf_bound b) {
    switch (b) {
    case XF_BOUND_MEMORY: return "#2f74c0";
    case XF_BOUND_COMPUTE: return "#d0463c";
    case XF_BOUND_LATENCY: return "#e0a100";
    case XF_BOUND_BALANCED: return "#8660c0";
    default: return "#888888";
    }
}

static const char *kind_color(int k) {
    static const char *c[] = {"#7f7f7f", "#c5b0d5", "#1f77b4", "#aec7e8", "#9edae5", "#d62728", "#ff7f0e", "#dbdb8d",
                              "#c49c94", "#2ca02c", "#98df8a", "#9467bd", "#e377c2", "#bcbd22", "#8c564b", "#17becf",
                              "#393b79"};
    return (k >= 0 && k < (int)(sizeof c / sizeof c[0])) ? c[k] : "#444444";
}

/* ------------------------------------------------------------------------------------------
 * Roll-ups of a point: per (phase, op kind) sums, and per pipeline stage. */

typedef struct agg {
    double flops, bytes, time, pred;
    double class_time[XF_BOUND_COUNT];
    int n, measured;
} agg;

static int valid_phase(int ph) { return ph >= 0 && ph < XF_PHASE_COUNT; }
static int valid_kind(int k) { return k >= 0 && k < OP_KIND_COUNT; }
static double op_t(const record_op *op) { return (isfinite(op->time_s) && op->time_s > 0) ? op->time_s : 0.0; }

static void point_aggregate(const record_point *p, agg out[XF_PHASE_COUNT][OP_KIND_COUNT]) {
    memset(out, 0, sizeof(agg) * XF_PHASE_COUNT * OP_KIND_COUNT);
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        if (!valid_phase(op->cost.phase) || !valid_kind(op->cost.kind)) continue;
        agg *a = &out[op->cost.phase][op->cost.kind];
        a->flops += op->cost.flops;
        a->bytes += (op->bytes_from_counters && op->measured_bytes > 0) ? op->measured_bytes : op->cost.bytes;
        a->time += op_t(op);
        a->pred += isfinite(op->predicted_time_s) ? op->predicted_time_s : 0;
        if (op->bound >= 0 && op->bound < XF_BOUND_COUNT) a->class_time[op->bound] += op_t(op);
        a->n++;
        a->measured |= op->measured;
    }
}

static xf_bound agg_class(const agg *a) {
    int best = 0;
    for (int b = 1; b < XF_BOUND_COUNT; b++)
        if (a->class_time[b] > a->class_time[best]) best = b;
    return (xf_bound)best;
}

/* Weight of a phase's step in a whole request: one prefill step, gen - 1 decode steps. */
static double phase_weight(const record_point *p, int ph) {
    return ph == XF_PREFILL ? 1.0 : (double)workload_decode_steps(&p->wl);
}

static int point_has_phase(const record_point *p, int ph) {
    for (int64_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].cost.phase == (xf_phase)ph) return 1;
    return 0;
}

/* The op (phase, kind) holding the most request time. */
static void point_dominant(const record_point *p, int *phase, int *kind, xf_bound *cls, double *share) {
    agg a[XF_PHASE_COUNT][OP_KIND_COUNT];
    point_aggregate(p, a);
    double best = -1, total = 0;
    *phase = 0;
    *kind = 0;
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int k = 0; k < OP_KIND_COUNT; k++) {
            double t = a[ph][k].time * phase_weight(p, ph);
            total += t;
            if (t > best) {
                best = t;
                *phase = ph;
                *kind = k;
            }
        }
    *cls = agg_class(&a[*phase][*kind]);
    if (share) *share = safe_div(best, total);
}

enum { ST_EMBED, ST_ATTN, ST_FFN, ST_HEAD, ST_COUNT };
static int stage_of(int kind) {
    if (kind == OP_EMBEDDING) return ST_EMBED;
    if ((kind >= OP_ATTN_NORM && kind <= OP_ATTN_RESIDUAL) || kind == OP_KV_ALLOC) return ST_ATTN;
    if (kind >= OP_FFN_NORM && kind <= OP_FFN_RESIDUAL) return ST_FFN;
    return ST_HEAD;
}

/* ------------------------------------------------------------------------------------------
 * Output context. */

typedef struct html_ctx {
    sbuf *b;
    gnuplot_session gp;
    int gp_ok;          /* gnuplot found and the temp folder made */
    char gp_why[512];   /* why there are no charts */
    int n_charts_ok;
    const report_options *opt;
} html_ctx;

static void put(html_ctx *c, const char *s) { sbuf_puts(c->b, s); }
static void esc(html_ctx *c, const char *s) { esc_html(c->b, s); }

/* A table cell holding a number: exact value in data-v, formatted text shown. */
static void td_num(html_ctx *c, double v, const char *shown) {
    char ex[40];
    fmt_exact(ex, sizeof ex, v);
    sbuf_printf(c->b, "<td data-v=\"%s\">", ex);
    esc(c, shown);
    put(c, "</td>");
}
static void td_si(html_ctx *c, double v, const char *unit) {
    char s[48];
    units_si(v, unit, s, sizeof s);
    td_num(c, v, s);
}
static void td_bytes(html_ctx *c, double v) {
    char s[48];
    units_bytes(v, s, sizeof s);
    td_num(c, v, s);
}
static void td_time(html_ctx *c, double v) {
    char s[48];
    units_time(v, s, sizeof s);
    td_num(c, v, s);
}
static void td_pct(html_ctx *c, double v) {
    char s[48];
    fmt_pct(s, sizeof s, v);
    td_num(c, v, s);
}
static void td_int(html_ctx *c, int64_t v) {
    sbuf_printf(c->b, "<td data-v=\"%lld\">%lld</td>", (long long)v, (long long)v);
}
static void td_str(html_ctx *c, const char *s) {
    put(c, "<td data-v=\"");
    esc(c, s);
    put(c, "\">");
    esc(c, s);
    put(c, "</td>");
}
static void td_class(html_ctx *c, xf_bound b) {
    sbuf_printf(c->b, "<td data-v=\"%s\"><span class=\"cls\" style=\"background:%s\">%s</span></td>", bound_name(b),
                class_color(b), bound_name(b));
}

/* A "key: value" row of a definition table. */
static void kv_row(html_ctx *c, const char *key, const char *value) {
    put(c, "<tr><th>");
    esc(c, key);
    put(c, "</th><td>");
    esc(c, value);
    put(c, "</td></tr>\n");
}

static void section_open(html_ctx *c, int ri, const char *name, const char *title) {
    sbuf_printf(c->b, "<section class=\"sec-%s\" id=\"r%d-%s\">\n<h3>", name, ri, name);
    esc(c, title);
    put(c, "</h3>\n");
}
static void section_close(html_ctx *c) { put(c, "</section>\n"); }

/* Draws a chart with gnuplot, or leaves a note saying why it is missing. */
static void chart(html_ctx *c, const char *name, int w, int h, const char *body, const char *caption) {
    put(c, "<figure class=\"chart\">");
    if (!c->gp_ok) {
        put(c, "<div class=\"chart-missing\">Chart not drawn: ");
        esc(c, c->gp_why);
        put(c, "</div>");
    } else {
        char *svg = NULL;
        xf_status st = gnuplot_render_svg(&c->gp, name, w, h, body, &svg);
        if (st == XF_OK) {
            put(c, svg);
            c->n_charts_ok++;
        } else {
            put(c, "<div class=\"chart-missing\">Chart not drawn: ");
            esc(c, xf_error_msg());
            put(c, "</div>");
        }
        free(svg);
    }
    if (caption) {
        put(c, "<figcaption>");
        esc(c, caption);
        put(c, "</figcaption>");
    }
    put(c, "</figure>\n");
}

/* Writes a data file for a chart; returns 0 (and leaves a note) when it cannot. */
static int chart_data(html_ctx *c, const char *name, const sbuf *data, char *lit, size_t lit_len) {
    if (!c->gp_ok) return 1; /* the chart call will leave the note */
    xf_status st = sbuf_status(data);
    if (st == XF_OK) st = gnuplot_write_data(&c->gp, name, data->data ? data->data : "", data->len, lit, lit_len);
    if (st != XF_OK) {
        put(c, "<div class=\"chart-missing\">Chart not drawn: ");
        esc(c, xf_error_msg());
        put(c, "</div>");
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Summary. */

static void verdict(html_ctx *c, const record *r, const record_point *p) {
    const record_summary *s = &p->summary;
    double pre = s->ttft_s, dec = (double)workload_decode_steps(&p->wl) * s->tpot_s, req = pre + dec;
    int top = 0;
    for (int b = 1; b < XF_BOUND_COUNT; b++)
        if (s->share_bound[b] > s->share_bound[top]) top = b;
    int dph, dk;
    xf_bound dcls;
    double dshare;
    point_dominant(p, &dph, &dk, &dcls, &dshare);
    char bw[48], pk[48], shp[32], shc[32], shd[32];
    units_si(r->device.bandwidth_Bps, "B/s", bw, sizeof bw);
    fmt_pct(shc, sizeof shc, s->share_bound[top]);
    fmt_pct(shd, sizeof shd, dshare);
    const char *phase = dec >= pre ? "Decode" : "Prefill";
    fmt_pct(shp, sizeof shp, safe_div(dec >= pre ? dec : pre, req));
    double main_peak = device_peak(&r->device, XF_COMPUTE_TENSOR16);
    if (p->wl.adtype == XF_FP32) main_peak = device_peak(&r->device, XF_COMPUTE_FP32);
    units_si(main_peak, "FLOP/s", pk, sizeof pk);
    put(c, "<p class=\"verdict\"><b>Verdict:</b> ");
    if (req <= 0) {
        put(c, "the record has no op times, so there is nothing to judge.</p>\n");
        return;
    }
    sbuf_printf(c->b, "%s takes %s of the request time, and %s of the request time is in %s-bound ops", phase, shp, shc,
                bound_name((xf_bound)top));
    if (top == XF_BOUND_MEMORY)
        sbuf_printf(c->b, ": speed is set by the %s memory bandwidth, not by compute", bw);
    else if (top == XF_BOUND_COMPUTE)
        sbuf_printf(c->b, ": speed is set by the %s compute peak; more bandwidth would not help", pk);
    else if (top == XF_BOUND_LATENCY)
        put(c, ": ops are too small to load either unit (launches, synchronisation); fuse ops or batch more");
    else
        put(c, ": compute and memory are both near their ceilings");
    sbuf_printf(c->b, "; the largest single cost is %s in %s (%s of the request, %s-bound).</p>\n",
                op_kind_name((op_kind)dk), phase_name((xf_phase)dph), shd, bound_name(dcls));
}

/* The KV record's one sentence: which policy keeps the most of the pool in token states and
 * which wastes the most in reservations and fragmentation. */
static void kv_verdict(html_ctx *c, const record_kv *kv) {
    if (kv->n_policies <= 0 || !kv->policies) return;
    int best = 0, worst = 0;
    double waste[2] = {0, 0};
    for (int i = 0; i < kv->n_policies; i++) {
        const double *sh = kv->policies[i].share;
        if (sh[KV_CAT_TOKEN] > kv->policies[best].share[KV_CAT_TOKEN]) best = i;
        double w = sh[KV_CAT_RESERVED] + sh[KV_CAT_INTERNAL] + sh[KV_CAT_EXTERNAL];
        const double *sw = kv->policies[worst].share;
        if (w > sw[KV_CAT_RESERVED] + sw[KV_CAT_INTERNAL] + sw[KV_CAT_EXTERNAL]) worst = i;
    }
    const record_kv_policy *b = &kv->policies[best], *w = &kv->policies[worst];
    waste[0] = b->share[KV_CAT_RESERVED] + b->share[KV_CAT_INTERNAL] + b->share[KV_CAT_EXTERNAL];
    waste[1] = w->share[KV_CAT_RESERVED] + w->share[KV_CAT_INTERNAL] + w->share[KV_CAT_EXTERNAL];
    char a[32], bb[32], cc[32], dd[32], e[48], f[48];
    fmt_pct(a, sizeof a, b->share[KV_CAT_TOKEN]);
    fmt_pct(bb, sizeof bb, waste[0]);
    fmt_pct(cc, sizeof cc, w->share[KV_CAT_TOKEN]);
    fmt_pct(dd, sizeof dd, waste[1]);
    units_si(b->tokens_per_s, "tokens/s", e, sizeof e);
    units_si(w->tokens_per_s, "tokens/s", f, sizeof f);
    put(c, "<p class=\"verdict\"><b>Verdict:</b> ");
    esc(c, b->policy);
    sbuf_printf(c->b, " keeps the most of the KV pool in token states (%s, with %s reserved or fragmented) and serves %s", a, bb, e);
    if (worst != best) {
        put(c, "; ");
        esc(c, w->policy);
        sbuf_printf(c->b, " wastes the most (%s reserved or fragmented, %s token states) and serves %s", dd, cc, f);
    }
    put(c, ".</p>\n");
}

static void memory_bar(html_ctx *c, const record_memory *m) {
    double cap = m->capacity_bytes;
    double parts[3] = {m->weights_bytes, m->kv_bytes, m->activations_bytes};
    static const char *names[3] = {"weights", "KV cache", "activations"};
    static const char *colors[3] = {"#5b7fa6", "#d08a2e", "#8aa85a"};
    double used = parts[0] + parts[1] + parts[2];
    double scale = cap > used ? cap : used;
    if (scale <= 0) return;
    put(c, "<div class=\"bar\" title=\"memory\">");
    char s[48], t[48];
    for (int i = 0; i < 3; i++) {
        if (parts[i] <= 0) continue;
        units_bytes(parts[i], s, sizeof s);
        sbuf_printf(c->b, "<span style=\"width:%.3f%%;background:%s\" title=\"%s %s\"></span>", 100 * parts[i] / scale,
                    colors[i], names[i], s);
    }
    if (cap > used)
        sbuf_printf(c->b, "<span style=\"width:%.3f%%;background:#e6e6e6\" title=\"free\"></span>",
                    100 * (cap - used) / scale);
    put(c, "</div>\n<p class=\"legend\">");
    for (int i = 0; i < 3; i++) {
        units_bytes(parts[i], s, sizeof s);
        fmt_pct(t, sizeof t, safe_div(parts[i], cap));
        sbuf_printf(c->b, "<span class=\"sw\" style=\"background:%s\"></span>%s %s (%s) &nbsp; ", colors[i], names[i],
                    s, cap > 0 ? t : "capacity unknown");
    }
    if (cap > 0) {
        units_bytes(cap - used, s, sizeof s);
        units_bytes(cap, t, sizeof t);
        if (cap >= used)
            sbuf_printf(c->b, "<span class=\"sw\" style=\"background:#e6e6e6\"></span>free %s of %s", s, t);
        else
            sbuf_printf(c->b, "<b class=\"warn\">does not fit: needs %s more than the %s the device has</b>", s + (s[0] == '-'), t);
    }
    put(c, "</p>\n");
}

static void share_bar(html_ctx *c, const double *share) {
    put(c, "<div class=\"bar\">");
    for (int b = 0; b < XF_BOUND_COUNT; b++)
        if (share[b] > 0)
            sbuf_printf(c->b, "<span style=\"width:%.3f%%;background:%s\" title=\"%s-bound\"></span>", 100 * share[b],
                        class_color((xf_bound)b), bound_name((xf_bound)b));
    put(c, "</div>\n<p class=\"legend\">");
    char s[32];
    for (int b = 0; b < XF_BOUND_COUNT; b++) {
        fmt_pct(s, sizeof s, share[b]);
        sbuf_printf(c->b, "<span class=\"sw\" style=\"background:%s\"></span>%s-bound <b class=\"share-%s\">%s</b> &nbsp; ",
                    class_color((xf_bound)b), bound_name((xf_bound)b), bound_name((xf_bound)b), s);
    }
    put(c, "</p>\n");
}

static void render_summary(html_ctx *c, const record *r, int ri, const record_point *p, int dp) {
    section_open(c, ri, "summary", "Summary");
    char v[400], a[64], b2[64], w[64];
    if (p)
        verdict(c, r, p);
    else if (r->kv)
        kv_verdict(c, r->kv);
    put(c, "<div class=\"cards\">\n");
    /* model */
    put(c, "<table class=\"kv\"><caption>Model</caption>\n");
    kv_row(c, "name", r->model.name);
    kv_row(c, "architecture", r->model.arch);
    units_si((double)r->model_params, "", w, sizeof w);
    snprintf(v, sizeof v, "%lld (%s)", (long long)r->model_params, w);
    kv_row(c, "parameters", v);
    snprintf(v, sizeof v, "%lld layers, d_model %lld, d_ff %lld, vocab %lld", (long long)r->model.n_layers,
             (long long)r->model.d_model, (long long)r->model.d_ff, (long long)r->model.vocab);
    kv_row(c, "shape", v);
    snprintf(v, sizeof v, "%lld query heads, %lld KV heads, head_dim %lld%s", (long long)r->model.n_heads,
             (long long)r->model.n_kv_heads, (long long)r->model.head_dim,
             r->model.n_kv_heads < r->model.n_heads ? " (GQA)" : "");
    kv_row(c, "attention", v);
    units_bytes(r->kv_bytes_per_token, a, sizeof a);
    snprintf(v, sizeof v, "%.0f B (%s)", r->kv_bytes_per_token, a);
    kv_row(c, "KV bytes per token", v);
    put(c, "</table>\n");
    /* device */
    put(c, "<table class=\"kv\"><caption>Device</caption>\n");
    kv_row(c, "name", r->device.name);
    if (r->device.description[0]) kv_row(c, "description", r->device.description);
    units_bytes(r->device.memory_bytes, v, sizeof v);
    kv_row(c, "memory", v);
    units_si(r->device.bandwidth_Bps, "B/s", v, sizeof v);
    kv_row(c, "bandwidth", v);
    if (r->device.cache_bandwidth_Bps > 0) {
        units_si(r->device.cache_bandwidth_Bps, "B/s", a, sizeof a);
        units_bytes(r->device.cache_bytes, b2, sizeof b2);
        snprintf(v, sizeof v, "%s inside %s of last-level cache", a, b2);
        kv_row(c, "cache bandwidth", v);
    }
    for (int k = 0; k < XF_COMPUTE_COUNT; k++) {
        if (r->device.peak_flops[k] <= 0) continue;
        units_si(r->device.peak_flops[k], "FLOP/s", a, sizeof a);
        snprintf(b2, sizeof b2, "peak %s", compute_name((xf_compute)k));
        kv_row(c, b2, a);
    }
    kv_row(c, "ceilings used", (r->ceilings_measured || r->device.measured) ? "measured on this machine (xfprof machine)"
                                                                            : "spec sheet");
    if (r->device.source[0]) kv_row(c, "source", r->device.source);
    put(c, "</table>\n");
    if (p) {
        put(c, "<table class=\"kv\"><caption>Workload</caption>\n");
        if (r->n_points > 1) {
            snprintf(v, sizeof v, "point %d of a %d-point sweep (the sweep section has them all)", dp + 1, r->n_points);
            kv_row(c, "shown", v);
        }
        snprintf(v, sizeof v, "%lld", (long long)p->wl.batch);
        kv_row(c, "batch", v);
        snprintf(v, sizeof v, "%lld tokens", (long long)p->wl.prompt);
        kv_row(c, "prompt", v);
        snprintf(v, sizeof v, "%lld tokens", (long long)p->wl.gen);
        kv_row(c, "generated", v);
        snprintf(v, sizeof v, "weights %s, activations %s, KV %s", dtype_name(p->wl.wdtype), dtype_name(p->wl.adtype),
                 dtype_name(p->wl.kvdtype));
        kv_row(c, "dtypes", v);
        if (p->summary.decode_context > 0) {
            snprintf(v, sizeof v, "%lld tokens (the mean over the request)", (long long)p->summary.decode_context);
            kv_row(c, "decode context", v);
        }
        if (p->run.backend[0]) {
            snprintf(v, sizeof v, "%.15s, %d threads, %d repetitions after %d warm-up", p->run.backend, p->run.threads,
                     p->run.reps, p->run.warmup);
            kv_row(c, "run", v);
            if (p->run.kv_policy[0]) {
                snprintf(v, sizeof v, "%.31s (%.15s allocator)", p->run.kv_policy, p->run.kv_alloc);
                kv_row(c, "KV policy", v);
            }
        }
        put(c, "</table>\n");
        /* results */
        const record_summary *s = &p->summary;
        put(c, "<table class=\"kv results\"><caption>Results</caption>\n");
        units_time(s->ttft_s, v, sizeof v);
        sbuf_printf(c->b, "<tr><th>TTFT</th><td class=\"big\" id=\"r%d-ttft\">%s</td></tr>\n", ri, v);
        units_time(s->tpot_s, v, sizeof v);
        sbuf_printf(c->b, "<tr><th>TPOT</th><td class=\"big\" id=\"r%d-tpot\">%s</td></tr>\n", ri, v);
        units_si(s->tokens_per_s, "tokens/s", v, sizeof v);
        sbuf_printf(c->b, "<tr><th>throughput</th><td class=\"big\" id=\"r%d-tps\">%s</td></tr>\n", ri, v);
        units_si(s->prefill_tokens_per_s, "tokens/s", v, sizeof v);
        kv_row(c, "prefill rate", v);
        units_si(s->decode_tokens_per_s, "tokens/s", v, sizeof v);
        kv_row(c, "decode rate", v);
        if (s->max_batch > 0) {
            snprintf(v, sizeof v, "%lld sequences", (long long)s->max_batch);
            kv_row(c, "largest batch that fits", v);
        } else if (p->memory.capacity_bytes > 0) {
            kv_row(c, "largest batch that fits", "none: not even batch 1 fits the device memory");
        }
        put(c, "</table>\n");
    }
    put(c, "</div>\n");
    if (p) {
        put(c, "<h4>Share of request time by class</h4>\n");
        share_bar(c, p->summary.share_bound);
        if (p->memory.weights_bytes > 0 || p->memory.capacity_bytes > 0) {
            put(c, "<h4>Device memory</h4>\n");
            memory_bar(c, &p->memory);
        }
    } else if (r->kv && r->kv->n_policies > 0 && r->kv->policies) {
        put(c, "<p class=\"hint\">A KV record: the KV section below has every figure.</p>\n");
    } else {
        put(c, "<p class=\"note\">This record has no workload points (no per-op data to show).</p>\n");
    }
    section_close(c);
}

/* ------------------------------------------------------------------------------------------
 * Pipeline at a glance. */

static void pipeline_row(html_ctx *c, const record *r, const record_point *p, int ph) {
    agg a[XF_PHASE_COUNT][OP_KIND_COUNT];
    point_aggregate(p, a);
    agg st[ST_COUNT];
    memset(st, 0, sizeof st);
    double total = 0;
    for (int k = 0; k < OP_KIND_COUNT; k++) {
        agg *s = &st[stage_of(k)];
        const agg *x = &a[ph][k];
        s->time += x->time;
        s->flops += x->flops;
        s->bytes += x->bytes;
        for (int b = 0; b < XF_BOUND_COUNT; b++) s->class_time[b] += x->class_time[b];
        total += x->time;
    }
    char t[64], sh[32];
    units_time(total, t, sizeof t);
    sbuf_printf(c->b, "<div class=\"pipe\"><div class=\"pipe-phase\">%s step<br><b>%s</b></div>\n", phase_name((xf_phase)ph), t);
    if (ph == XF_PREFILL)
        sbuf_printf(c->b, "<div class=\"stage io\">input<br>%lld &times; %lld tokens</div><div class=\"arrow\">&rarr;</div>\n",
                    (long long)p->wl.batch, (long long)p->wl.prompt);
    else
        sbuf_printf(c->b, "<div class=\"stage io\">input<br>%lld &times; 1 token<br>context %lld</div><div class=\"arrow\">&rarr;</div>\n",
                    (long long)p->wl.batch, (long long)p->summary.decode_context);
    static const char *names[ST_COUNT] = {"embedding", "attention", "FFN", "lm_head"};
    for (int s = 0; s < ST_COUNT; s++) {
        if (s == ST_ATTN)
            sbuf_printf(c->b, "<div class=\"layers\"><div class=\"layers-label\">%lld &times; layer</div>\n",
                        (long long)r->model.n_layers);
        xf_bound cls = agg_class(&st[s]);
        double share = safe_div(st[s].time, total);
        fmt_pct(sh, sizeof sh, share);
        units_time(st[s].time, t, sizeof t);
        sbuf_printf(c->b,
                    "<div class=\"stage\" style=\"border-color:%s\" title=\"%s-bound\"><div class=\"sname\">%s</div>"
                    "<div class=\"sshare\">%s</div><div class=\"stime\">%s &middot; %s-bound</div>"
                    "<div class=\"sbar\"><span style=\"width:%.2f%%;background:%s\"></span></div>",
                    class_color(cls), bound_name(cls), names[s], sh, t, bound_name(cls), 100 * share, class_color(cls));
        /* the ops that make up most of the stage */
        put(c, "<div class=\"sops\">");
        for (int k = 0; k < OP_KIND_COUNT; k++) {
            if (stage_of(k) != s || a[ph][k].n == 0) continue;
            double os = safe_div(a[ph][k].time, total);
            if (os < 0.01) continue;
            fmt_pct(sh, sizeof sh, os);
            xf_bound oc = agg_class(&a[ph][k]);
            sbuf_printf(c->b, "<span style=\"color:%s\">%s %s</span> ", class_color(oc), op_kind_name((op_kind)k), sh);
        }
        put(c, "</div></div>\n");
        if (s == ST_ATTN) put(c, "<div class=\"plus\">+</div>\n");
        if (s == ST_FFN) put(c, "</div>\n");
        put(c, "<div class=\"arrow\">&rarr;</div>\n");
    }
    sbuf_printf(c->b, "<div class=\"stage io\">output<br>%lld next token%s</div></div>\n", (long long)p->wl.batch,
                p->wl.batch == 1 ? "" : "s");
}

/* Time-weighted utilisation of the peak by GEMMs in one phase: (sum F / sum t) / P. */
static double gemm_util(const record *r, const record_point *p, int ph, double *intensity) {
    double f = 0, t = 0, q = 0, peak = 0;
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        if (op->cost.phase != (xf_phase)ph || !op_kind_is_gemm(op->cost.kind)) continue;
        f += op->cost.flops;
        t += op_t(op);
        q += op->cost.bytes;
        double pk = device_peak(&r->device, op->cost.compute);
        if (pk > peak) peak = pk;
    }
    if (intensity) *intensity = safe_div(f, q);
    return safe_div(safe_div(f, t), peak);
}

static void render_pipeline(html_ctx *c, const record *r, int ri, const record_point *p) {
    section_open(c, ri, "pipeline", "The pipeline at a glance");
    put(c, "<p class=\"hint\">Each stage is coloured by the class that holds most of its time and labelled with its share "
           "of the step time; the ops inside it that take at least 1% are listed.</p>\n");
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        if (point_has_phase(p, ph)) pipeline_row(c, r, p, ph);
    /* The three bottlenecks, each called out where the data shows it. */
    const record_summary *s = &p->summary;
    char a[64], b2[64], d[64], e[64];
    put(c, "<div class=\"callouts\">\n");
    /* bandwidth */
    {
        int hot = s->share_bound[XF_BOUND_MEMORY] >= 0.5;
        fmt_pct(a, sizeof a, s->share_bound[XF_BOUND_MEMORY]);
        units_si(r->device.bandwidth_Bps, "B/s", b2, sizeof b2);
        double q = 0;
        for (int64_t i = 0; i < p->n_ops; i++)
            if (p->ops[i].cost.phase == XF_DECODE) q += p->ops[i].cost.bytes;
        sbuf_printf(c->b, "<div class=\"callout%s\" id=\"r%d-bottleneck-bandwidth\"><b>Bandwidth</b>: %s of the request time is "
                    "in memory-bound ops.", hot ? " hot" : "", ri, a);
        if (q > 0) {
            units_bytes(q, d, sizeof d);
            units_time(safe_div(q, r->device.bandwidth_Bps), e, sizeof e);
            sbuf_printf(c->b, " Each decode step moves %s (weights, activations and KV); at %s that alone takes %s.", d, b2, e);
        }
        put(c, "</div>\n");
    }
    /* compute utilisation */
    {
        double ip = 0, id = 0;
        double up = point_has_phase(p, XF_PREFILL) ? gemm_util(r, p, XF_PREFILL, &ip) : 0;
        double ud = point_has_phase(p, XF_DECODE) ? gemm_util(r, p, XF_DECODE, &id) : 0;
        int hot = s->share_bound[XF_BOUND_COMPUTE] >= 0.5 || (ud > 0 && ud < 0.1);
        sbuf_printf(c->b, "<div class=\"callout%s\" id=\"r%d-bottleneck-compute\"><b>Compute utilisation</b>:", hot ? " hot" : "", ri);
        if (up > 0) {
            fmt_pct(a, sizeof a, up);
            sbuf_printf(c->b, " prefill GEMMs use %s of the peak FLOP/s (intensity %.0f FLOP/B);", a, ip);
        }
        if (ud > 0) {
            fmt_pct(a, sizeof a, ud);
            sbuf_printf(c->b, " decode GEMMs use %s (intensity %.1f FLOP/B, about the batch of %lld)%s", a, id,
                        (long long)p->wl.batch, ud < 0.1 ? ": the compute units mostly wait for memory." : ".");
        }
        put(c, "</div>\n");
    }
    /* KV memory */
    if (p->memory.kv_bytes > 0) {
        double cap = p->memory.capacity_bytes;
        agg ag[XF_PHASE_COUNT][OP_KIND_COUNT];
        point_aggregate(p, ag);
        double dec = 0;
        for (int k = 0; k < OP_KIND_COUNT; k++) dec += ag[XF_DECODE][k].time;
        double att = safe_div(ag[XF_DECODE][OP_ATTENTION].time, dec);
        int hot = safe_div(p->memory.kv_bytes, cap) >= 0.2 || att >= 0.2;
        units_bytes(p->memory.kv_bytes, a, sizeof a);
        fmt_pct(b2, sizeof b2, safe_div(p->memory.kv_bytes, cap));
        sbuf_printf(c->b, "<div class=\"callout%s\" id=\"r%d-bottleneck-kv\"><b>KV memory</b>: the KV cache of %lld &times; %lld "
                    "tokens takes %s", hot ? " hot" : "", ri, (long long)p->wl.batch, (long long)(p->wl.prompt + p->wl.gen), a);
        if (cap > 0) sbuf_printf(c->b, " (%s of device memory)", b2);
        put(c, ".");
        if (p->summary.max_batch > 0) sbuf_printf(c->b, " At most %lld sequences fit.", (long long)p->summary.max_batch);
        if (dec > 0) {
            fmt_pct(d, sizeof d, att);
            sbuf_printf(c->b, " Attention, which reads the whole KV of each sequence, takes %s of a decode step.", d);
        }
        put(c, "</div>\n");
    }
    put(c, "</div>\n");
    section_close(c);
}

/* ------------------------------------------------------------------------------------------
 * Roofline. */

static void render_roofline(html_ctx *c, const record *r, int ri, const record_point *p) {
    section_open(c, ri, "roofline", "Roofline");
    agg a[XF_PHASE_COUNT][OP_KIND_COUNT];
    point_aggregate(p, a);
    const device_spec *d = &r->device;
    /* Units of the y axis. */
    double maxpeak = 0;
    int used[XF_COMPUTE_COUNT] = {0};
    for (int64_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].cost.compute >= 0 && p->ops[i].cost.compute < XF_COMPUTE_COUNT) used[p->ops[i].cost.compute] = 1;
    for (int k = 0; k < XF_COMPUTE_COUNT; k++)
        if (used[k] && device_peak(d, (xf_compute)k) > maxpeak) maxpeak = device_peak(d, (xf_compute)k);
    double unit = maxpeak >= 1e12 ? 1e12 : 1e9;
    const char *uname = unit == 1e12 ? "TFLOP/s" : "GFLOP/s";
    /* The points: one per (phase, op kind), its layers summed. */
    sbuf data;
    sbuf_init(&data);
    double xmin = INFINITY, xmax = 0, ymin = INFINITY;
    double phase_total[XF_PHASE_COUNT] = {0, 0};
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int k = 0; k < OP_KIND_COUNT; k++) phase_total[ph] += a[ph][k].time;
    /* Point labels: only ops with at least 1% of their step are named (the table below names
     * all), and ops that land on the same spot share one label "qkv+o_proj+..." */
    char names[XF_PHASE_COUNT][OP_KIND_COUNT][160];
    memset(names, 0, sizeof names);
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int k = 0; k < OP_KIND_COUNT; k++) {
            const agg *x = &a[ph][k];
            if (x->n == 0 || x->flops <= 0 || x->bytes <= 0 || x->time <= 0) continue;
            if (safe_div(x->time, phase_total[ph]) < 0.01) continue;
            double lx = log10(x->flops / x->bytes), ly = log10(x->flops / x->time);
            int head = -1;
            for (int j = 0; j < k && head < 0; j++) {
                const agg *y = &a[ph][j];
                if (!names[ph][j][0]) continue;
                if (fabs(log10(y->flops / y->bytes) - lx) < 0.08 && fabs(log10(y->flops / y->time) - ly) < 0.08) head = j;
            }
            if (head >= 0) {
                size_t used_len = strlen(names[ph][head]);
                snprintf(names[ph][head] + used_len, sizeof names[ph][head] - used_len, "+%s", op_kind_name((op_kind)k));
            } else {
                snprintf(names[ph][k], sizeof names[ph][k], "%s", op_kind_name((op_kind)k));
            }
        }
    int blocks[XF_PHASE_COUNT * XF_BOUND_COUNT] = {0};
    int nblock = 0, npts = 0;
    int block_id[XF_PHASE_COUNT * XF_BOUND_COUNT];
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int b = 0; b < XF_BOUND_COUNT; b++) {
            int bi = ph * XF_BOUND_COUNT + b;
            block_id[bi] = -1;
            int any = 0;
            for (int k = 0; k < OP_KIND_COUNT; k++) {
                const agg *x = &a[ph][k];
                if (x->n == 0 || x->flops <= 0 || x->bytes <= 0 || x->time <= 0 || agg_class(x) != (xf_bound)b) continue;
                double I = x->flops / x->bytes, y = x->flops / x->time / unit;
                sbuf_printf(&data, "%.9g %.9g ", I, y);
                if (names[ph][k][0])
                    esc_gnuplot_datum(&data, names[ph][k]);
                else
                    sbuf_puts(&data, "\"\"");
                sbuf_puts(&data, "\n");
                any = 1;
                npts++;
                if (I < xmin) xmin = I;
                if (I > xmax) xmax = I;
                if (y < ymin) ymin = y;
            }
            if (any) {
                sbuf_puts(&data, "\n\n");
                block_id[bi] = nblock++;
                blocks[bi] = 1;
            }
        }
    if (npts == 0 || d->bandwidth_Bps <= 0 || maxpeak <= 0) {
        put(c, "<p class=\"note\">No op has both FLOPs and a time, or the device has no ceilings: nothing to place.</p>\n");
        sbuf_free(&data);
        section_close(c);
        return;
    }
    double B = d->bandwidth_Bps / unit;
    xf_compute main_c = XF_COMPUTE_FP32;
    double main_p = 0;
    for (int k = 0; k < XF_COMPUTE_COUNT; k++)
        if (used[k] && device_peak(d, (xf_compute)k) >= main_p) {
            main_p = device_peak(d, (xf_compute)k);
            main_c = (xf_compute)k;
        }
    double P = main_p / unit, R = P / B;
    if (R > xmax) xmax = R;
    if (R < xmin) xmin = R;
    xmin /= 4;
    xmax *= 4;
    double ylo = fmin(ymin, xmin * B) / 3, yhi = P * 4;
    /* Measured ceilings: the spec sheet of the same device, when xfprof has one, is drawn beside
     * them so the gap between datasheet and reality shows. */
    int have_spec = 0;
    double spec_b = 0, spec_p = 0;
    char spec_lab[200] = "";
    if (r->ceilings_measured || d->measured) {
        device_spec spec;
        if (device_lookup(d->name, NULL, &spec) == XF_OK && !spec.measured && spec.bandwidth_Bps > 0 &&
            device_peak(&spec, main_c) > 0) {
            char sbw[48], spk[48];
            spec_b = spec.bandwidth_Bps / unit;
            spec_p = device_peak(&spec, main_c) / unit;
            units_si(spec.bandwidth_Bps, "B/s", sbw, sizeof sbw);
            units_si(device_peak(&spec, main_c), "FLOP/s", spk, sizeof spk);
            snprintf(spec_lab, sizeof spec_lab, "spec roofline: %s peak %s, bandwidth %s", compute_name(main_c), spk, sbw);
            if (spec_p * 4 > yhi) yhi = spec_p * 4;
            have_spec = 1;
        }
        xf_error_clear();
    }
    char lit[4400];
    char dname[64];
    snprintf(dname, sizeof dname, "r%d_roofline.dat", ri);
    if (!chart_data(c, dname, &data, lit, sizeof lit)) {
        sbuf_free(&data);
        section_close(c);
        return;
    }
    sbuf_free(&data);
    const char *how = (r->ceilings_measured || d->measured) ? "measured" : "spec";
    sbuf g;
    sbuf_init(&g);
    char bw[48], pk[48], lab[160];
    units_si(d->bandwidth_Bps, "B/s", bw, sizeof bw);
    sbuf_printf(&g, "set logscale xy 10\nset xrange [%.6g:%.6g]\nset yrange [%.6g:%.6g]\nset samples 400\n", xmin, xmax, ylo, yhi);
    sbuf_printf(&g, "set xlabel 'arithmetic intensity (FLOP/byte)'\nset ylabel 'attained %s'\n", uname);
    sbuf_puts(&g, "set format x '%g'\nset format y '%g'\nset grid xtics ytics lc rgb '#e5e5e5'\n"
                  "set key outside right top spacing 1.1 box lc rgb '#cccccc'\nset border lc rgb '#666666'\n");
    sbuf_printf(&g, "B=%.9g\nP=%.9g\nroof(x)=(x*B<P)?x*B:P\n", B, P);
    snprintf(lab, sizeof lab, "ridge %.3g FLOP/B", R);
    sbuf_printf(&g, "set arrow from %.9g,%.9g to %.9g,%.9g nohead dt 2 lc rgb '#999999'\n", R, ylo, R, P);
    sbuf_puts(&g, "set label 1 ");
    esc_gnuplot(&g, lab);
    sbuf_printf(&g, " at %.9g,%.9g point pt 7 ps 1.2 lc rgb '#222222' offset 1,-1.2 tc rgb '#222222'\n", R, P);
    /* bandwidth ceiling label, near the left end of the slope */
    snprintf(lab, sizeof lab, "%s bandwidth %s", how, bw);
    sbuf_puts(&g, "set label 2 ");
    esc_gnuplot(&g, lab);
    sbuf_printf(&g, " at %.9g,%.9g left tc rgb '#333333'\n", xmin * 1.3, xmin * 1.3 * B * 2.2);
    sbuf_puts(&g, "plot roof(x) with lines lw 2.5 lc rgb '#333333' title ");
    units_si(main_p, "FLOP/s", pk, sizeof pk);
    snprintf(lab, sizeof lab, "%s roofline: %s peak %s", how, compute_name(main_c), pk);
    esc_gnuplot(&g, lab);
    for (int k = 0; k < XF_COMPUTE_COUNT; k++) {
        double pkk = device_peak(d, (xf_compute)k);
        if (!used[k] || (xf_compute)k == main_c || pkk <= 0 || pkk == main_p) continue;
        units_si(pkk, "FLOP/s", pk, sizeof pk);
        snprintf(lab, sizeof lab, "%s %s peak %s", how, compute_name((xf_compute)k), pk);
        sbuf_printf(&g, ", (x*B<%.9g?x*B:%.9g) with lines lw 1.5 dt 2 lc rgb '#777777' title ", pkk / unit, pkk / unit);
        esc_gnuplot(&g, lab);
    }
    if (have_spec) {
        sbuf_printf(&g, ", (x*%.9g<%.9g?x*%.9g:%.9g) with lines lw 1.5 dt 4 lc rgb '#b07aa1' title ", spec_b, spec_p, spec_b,
                    spec_p);
        esc_gnuplot(&g, spec_lab);
    }
    if (d->cache_bandwidth_Bps > 0) {
        units_si(d->cache_bandwidth_Bps, "B/s", pk, sizeof pk);
        snprintf(lab, sizeof lab, "%s cache bandwidth %s", how, pk);
        sbuf_printf(&g, ", (x*%.9g<P?x*%.9g:P) with lines lw 1.5 dt 3 lc rgb '#2a9d8f' title ", d->cache_bandwidth_Bps / unit,
                    d->cache_bandwidth_Bps / unit);
        esc_gnuplot(&g, lab);
    }
    for (int bi = 0; bi < XF_PHASE_COUNT * XF_BOUND_COUNT; bi++) {
        if (!blocks[bi]) continue;
        int ph = bi / XF_BOUND_COUNT, b = bi % XF_BOUND_COUNT;
        snprintf(lab, sizeof lab, "%s, %s-bound", phase_name((xf_phase)ph), bound_name((xf_bound)b));
        sbuf_printf(&g, ", %s index %d using 1:2 with points pt %d ps 1.6 lc rgb '%s' title ", lit, block_id[bi],
                    ph == XF_PREFILL ? 7 : 9, class_color((xf_bound)b));
        esc_gnuplot(&g, lab);
        sbuf_printf(&g, ", %s index %d using 1:2:3 with labels left offset 1,%s font ',10' tc rgb '%s' notitle", lit,
                    block_id[bi], ph == XF_PREFILL ? "0.5" : "-0.5", ph == XF_PREFILL ? "#333333" : "#555555");
    }
    sbuf_puts(&g, "\n");
    char name[32];
    snprintf(name, sizeof name, "r%d_roofline", ri);
    if (sbuf_status(&g) == XF_OK)
        chart(c, name, 1200, 620, g.data,
              "Each op kind is one point per phase (its layers summed): circles prefill, triangles decode; colour is the "
              "class; ops with at least 1% of their step are named. Points on the slope are limited by bandwidth, on the "
              "flat line by compute.");
    sbuf_free(&g);
    /* the points as a table too: the chart's legend names the classes, this names every op */
    put(c, c->n_charts_ok ? "<details>" : "<details open>"); /* no chart drawn: the table is the chart */
    put(c, "<summary>The points of the chart</summary><table class=\"sortable\"><thead><tr><th>phase</th><th>op"
           "</th><th>intensity (FLOP/B)</th><th>attained FLOP/s</th><th>class</th></tr></thead><tbody>\n");
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int k = 0; k < OP_KIND_COUNT; k++) {
            const agg *x = &a[ph][k];
            if (x->n == 0 || x->flops <= 0 || x->bytes <= 0 || x->time <= 0) continue;
            put(c, "<tr>");
            td_str(c, phase_name((xf_phase)ph));
            td_str(c, op_kind_name((op_kind)k));
            td_si(c, x->flops / x->bytes, "");
            td_si(c, x->flops / x->time, "FLOP/s");
            td_class(c, agg_class(x));
            put(c, "</tr>\n");
        }
    put(c, "</tbody></table></details>\n");
    section_close(c);
}

/* ------------------------------------------------------------------------------------------
 * Per-layer time by op, and the phase split. */

static void render_layers(html_ctx *c, const record *r, int ri, const record_point *p) {
    section_open(c, ri, "layers", "Time by layer and phase");
    /* phase split of the request */
    double pre = p->summary.ttft_s, dec = (double)workload_decode_steps(&p->wl) * p->summary.tpot_s, req = pre + dec;
    char a[48], b2[48], s1[32], s2[32];
    units_time(pre, a, sizeof a);
    units_time(dec, b2, sizeof b2);
    fmt_pct(s1, sizeof s1, safe_div(pre, req));
    fmt_pct(s2, sizeof s2, safe_div(dec, req));
    put(c, "<h4>Phase split of one request</h4>\n<div class=\"bar\">");
    if (req > 0)
        sbuf_printf(c->b, "<span style=\"width:%.3f%%;background:#6a8caf\"></span><span style=\"width:%.3f%%;background:#c9a66b\"></span>",
                    100 * pre / req, 100 * dec / req);
    sbuf_printf(c->b, "</div>\n<p class=\"legend\"><span class=\"sw\" style=\"background:#6a8caf\"></span>prefill %s (%s) &nbsp; "
                "<span class=\"sw\" style=\"background:#c9a66b\"></span>decode %lld steps &times; TPOT = %s (%s)</p>\n",
                a, s1, (long long)p->wl.gen, b2, s2);
    int64_t L = r->model.n_layers;
    if (L <= 0 || L > 100000) {
        section_close(c);
        return;
    }
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++) {
        if (!point_has_phase(p, ph)) continue;
        /* rows: "in" (before the layers), layers, "out"; columns: op kinds (ms) */
        double *t = calloc((size_t)(L + 2) * OP_KIND_COUNT, sizeof *t); /* (L + 2, OP_KIND_COUNT) */
        if (!t) {
            put(c, "<p class=\"note\">out of memory for the layer chart</p>");
            continue;
        }
        int present[OP_KIND_COUNT] = {0};
        for (int64_t i = 0; i < p->n_ops; i++) {
            const record_op *op = &p->ops[i];
            if (op->cost.phase != (xf_phase)ph || !valid_kind(op->cost.kind)) continue;
            int64_t row = op->cost.layer >= 0 && op->cost.layer < L ? op->cost.layer + 1
                          : (op->cost.kind == OP_EMBEDDING ? 0 : L + 1);
            t[row * OP_KIND_COUNT + op->cost.kind] += op_t(op) * 1e3;
            if (op_t(op) > 0) present[op->cost.kind] = 1;
        }
        sbuf data;
        sbuf_init(&data);
        int64_t step = L > 40 ? (L + 19) / 20 : 1; /* at most ~20 tick labels */
        for (int64_t row = 0; row < L + 2; row++) {
            if (row == 0)
                sbuf_puts(&data, "in");
            else if (row == L + 1)
                sbuf_puts(&data, "out");
            else if ((row - 1) % step == 0)
                sbuf_printf(&data, "%lld", (long long)(row - 1));
            else
                sbuf_puts(&data, "\"\"");
            for (int k = 0; k < OP_KIND_COUNT; k++) sbuf_printf(&data, " %.9g", t[row * OP_KIND_COUNT + k]);
            sbuf_puts(&data, "\n");
        }
        free(t);
        char dname[64], lit[4400], name[32];
        snprintf(dname, sizeof dname, "r%d_layers_%d.dat", ri, ph);
        snprintf(name, sizeof name, "r%d_layers_%d", ri, ph);
        int ok = chart_data(c, dname, &data, lit, sizeof lit);
        sbuf_free(&data);
        if (!ok) continue;
        sbuf g;
        sbuf_init(&g);
        sbuf_printf(&g, "set style data histograms\nset style histogram rowstacked\nset style fill solid 1.0 border rgb '#ffffff'\n"
                        "set boxwidth 0.85\nset key outside right top\nset xlabel 'layer (in: embedding; out: final norm, lm_head, "
                        "sampling)'\nset ylabel '%s step time (ms)'\nset yrange [0:*]\nset grid ytics lc rgb '#e5e5e5'\n"
                        "set xtics nomirror scale 0 font ',9'\nset border 3 lc rgb '#666666'\n",
                    phase_name((xf_phase)ph));
        sbuf_puts(&g, "plot ");
        int first = 1;
        for (int k = 0; k < OP_KIND_COUNT; k++) {
            if (!present[k]) continue;
            sbuf_printf(&g, "%s%s using %d%s lc rgb '%s' title ", first ? "" : ", ", lit, k + 2, first ? ":xtic(1)" : "",
                        kind_color(k));
            esc_gnuplot(&g, op_kind_name((op_kind)k));
            first = 0;
        }
        sbuf_puts(&g, "\n");
        char cap[128];
        snprintf(cap, sizeof cap, "%s step: time of each layer, stacked by op.", phase_name((xf_phase)ph));
        if (!first && sbuf_status(&g) == XF_OK) chart(c, name, 1000, 380, g.data, cap);
        sbuf_free(&g);
    }
    section_close(c);
}

/* ------------------------------------------------------------------------------------------
 * The op table. */

static int point_any_measured(const record_point *p) {
    for (int64_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].measured) return 1;
    return 0;
}

static void render_optable(html_ctx *c, int ri, const record_point *p) {
    section_open(c, ri, "optable", "Every op");
    int meas = point_any_measured(p);
    put(c, "<p class=\"hint\">Click a column header to sort. Bytes are the compulsory traffic of the cost model");
    put(c, meas ? "; measured columns come from the run's repetitions.</p>\n" : ".</p>\n");
    sbuf_printf(c->b, "<div class=\"scroll\"><table class=\"sortable ops\" id=\"r%d-ops\"><thead><tr>", ri);
    static const char *cols[] = {"#", "phase", "layer", "op", "compute", "FLOPs", "bytes", "weights", "act in", "act out",
                                 "KV read", "KV write", "intensity", "bound", "time", "predicted", "share"};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) sbuf_printf(c->b, "<th>%s</th>", cols[i]);
    if (meas) put(c, "<th>samples</th><th>spread</th><th>util compute</th><th>util memory</th><th>measured bytes</th>");
    put(c, "</tr></thead><tbody>\n");
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *op = &p->ops[i];
        put(c, "<tr>");
        td_int(c, i);
        td_str(c, phase_name(op->cost.phase));
        if (op->cost.layer >= 0)
            td_int(c, op->cost.layer);
        else
            put(c, "<td data-v=\"-1\">&ndash;</td>");
        if (op->source[0]) { /* imported: the traced ops or kernel it sums */
            char nm[160];
            snprintf(nm, sizeof nm, "%s: %s", op_kind_name(op->cost.kind), op->source);
            td_str(c, nm);
        } else {
            td_str(c, op_kind_name(op->cost.kind));
        }
        td_str(c, compute_name(op->cost.compute));
        td_si(c, op->cost.flops, "");
        td_bytes(c, op->cost.bytes);
        td_bytes(c, op->cost.weight_bytes);
        td_bytes(c, op->cost.act_in_bytes);
        td_bytes(c, op->cost.act_out_bytes);
        td_bytes(c, op->cost.kv_read_bytes);
        td_bytes(c, op->cost.kv_write_bytes);
        td_si(c, op->intensity, "");
        td_class(c, op->bound);
        td_time(c, op->time_s);
        td_time(c, op->predicted_time_s);
        td_pct(c, op->share);
        if (meas) {
            td_int(c, op->n_samples);
            td_time(c, op->spread_s);
            td_pct(c, op->util_compute);
            td_pct(c, op->util_memory);
            if (op->bytes_from_counters)
                td_bytes(c, op->measured_bytes);
            else
                put(c, "<td data-v=\"\">&ndash;</td>");
        }
        put(c, "</tr>\n");
    }
    put(c, "</tbody></table></div>\n");
    section_close(c);
}

/* ------------------------------------------------------------------------------------------
 * Measured against predicted. */

static void render_measured(html_ctx *c, int ri, const record_point *p) {
    section_open(c, ri, "measured", "Measured against predicted");
    agg a[XF_PHASE_COUNT][OP_KIND_COUNT];
    point_aggregate(p, a);
    sbuf data;
    sbuf_init(&data);
    int rows = 0;
    /* the table goes after the chart: build it aside */
    sbuf table;
    sbuf_init(&table);
    sbuf *page = c->b;
    c->b = &table;
    put(c, "<table class=\"sortable\"><thead><tr><th>phase</th><th>op</th><th>measured</th><th>predicted</th>"
           "<th>measured / predicted</th><th>measured class</th></tr></thead><tbody>\n");
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        for (int k = 0; k < OP_KIND_COUNT; k++) {
            const agg *x = &a[ph][k];
            if (x->n == 0 || !x->measured) continue;
            put(c, "<tr>");
            td_str(c, phase_name((xf_phase)ph));
            td_str(c, op_kind_name((op_kind)k));
            td_time(c, x->time);
            td_time(c, x->pred);
            char s[32];
            double ratio = safe_div(x->time, x->pred);
            snprintf(s, sizeof s, "%.2f\xc3\x97", ratio);
            td_num(c, ratio, x->pred > 0 ? s : "n/a");
            td_class(c, agg_class(x));
            put(c, "</tr>\n");
            sbuf_printf(&data, "%s:", ph == XF_PREFILL ? "P" : "D");
            esc_gnuplot_datum(&data, op_kind_name((op_kind)k));
            sbuf_printf(&data, " %.9g %.9g\n", x->time * 1e3, x->pred * 1e3);
            rows++;
        }
    put(c, "</tbody></table>\n");
    c->b = page;
    char dname[64], lit[4400], name[32];
    snprintf(dname, sizeof dname, "r%d_measured.dat", ri);
    snprintf(name, sizeof name, "r%d_measured", ri);
    if (rows > 0 && chart_data(c, dname, &data, lit, sizeof lit)) {
        sbuf g;
        sbuf_init(&g);
        sbuf_printf(&g, "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 1.0 border rgb '#ffffff'\n"
                        "set logscale y 10\nset format y '%%g'\nset ylabel 'time per step (ms)'\nset xtics rotate by -45 font ',9' nomirror\n"
                        "set key top right\nset grid ytics lc rgb '#e5e5e5'\n"
                        "plot %s using 2:xtic(1) lc rgb '#2f74c0' title 'measured (median)', %s using 3 lc rgb '#bbbbbb' title "
                        "'predicted'\n",
                    lit, lit);
        if (sbuf_status(&g) == XF_OK)
            chart(c, name, 1000, 420, g.data, "Measured median and predicted time of each op kind per step (P: prefill, D: decode).");
        sbuf_free(&g);
    }
    sbuf_free(&data);
    if (table.oom) c->b->oom = 1;
    if (table.data) put(c, table.data);
    sbuf_free(&table);
    /* counters, when the run read any: one row per op, one column per counter name */
    char cnames[RECORD_MAX_COUNTERS * 2][sizeof p->ops[0].counters[0].name + 1];
    int nc = 0;
    for (int64_t i = 0; i < p->n_ops; i++)
        for (int j = 0; j < p->ops[i].n_counters && j < RECORD_MAX_COUNTERS; j++) {
            char nm[sizeof cnames[0]];
            memcpy(nm, p->ops[i].counters[j].name, sizeof nm - 1);
            nm[sizeof nm - 1] = '\0';
            int k = 0;
            while (k < nc && strcmp(cnames[k], nm) != 0) k++;
            if (k == nc && nc < (int)(sizeof cnames / sizeof cnames[0])) memcpy(cnames[nc++], nm, sizeof nm);
        }
    if (nc > 0) {
        put(c, "<details><summary>Hardware counters per op</summary><div class=\"scroll\"><table class=\"sortable\"><thead><tr>"
               "<th>phase</th><th>layer</th><th>op</th>");
        for (int k = 0; k < nc; k++) {
            put(c, "<th>");
            esc(c, cnames[k]);
            put(c, "</th>");
        }
        put(c, "</tr></thead><tbody>\n");
        for (int64_t i = 0; i < p->n_ops; i++) {
            const record_op *op = &p->ops[i];
            if (op->n_counters <= 0) continue;
            put(c, "<tr>");
            td_str(c, phase_name(op->cost.phase));
            td_int(c, op->cost.layer);
            td_str(c, op_kind_name(op->cost.kind));
            for (int k = 0; k < nc; k++) {
                int found = 0;
                for (int j = 0; j < op->n_counters && j < RECORD_MAX_COUNTERS && !found; j++) {
                    if (strncmp(op->counters[j].name, cnames[k], sizeof op->counters[j].name) != 0) continue;
                    found = 1;
                    if (op->counters[j].supported)
                        td_si(c, op->counters[j].value, "");
                    else
                        put(c, "<td data-v=\"\">unsupported</td>");
                }
                if (!found) put(c, "<td data-v=\"\"></td>");
            }
            put(c, "</tr>\n");
        }
        put(c, "</tbody></table></div></details>\n");
    }
    section_close(c);
}

/* ------------------------------------------------------------------------------------------
 * KV. */

static const char *kv_color(int cat) {
    static const char *c[KV_CAT_COUNT] = {"#2e8b57", "#8fbc8f", "#e07b39", "#c0392b", "#dcdcdc"};
    return (cat >= 0 && cat < KV_CAT_COUNT) ? c[cat] : "#888888";
}

static void render_kv(html_ctx *c, const record *r, int ri) {
    section_open(c, ri, "kv", "KV cache");
    const record_kv *kv = r->kv;
    char a[64], b2[64];
    /* memory budget: weights, KV budget, activations, free */
    const record_point *p = r->n_points > 0 ? &r->points[0] : NULL;
    double cap = r->device.memory_bytes;
    double parts[3] = {p ? p->memory.weights_bytes : 0, kv->budget_bytes, p ? p->memory.activations_bytes : 0};
    static const char *pn[3] = {"weights", "KV budget", "activations"};
    static const char *pc[3] = {"#5b7fa6", "#d08a2e", "#8aa85a"};
    double used = parts[0] + parts[1] + parts[2];
    double scale = cap > used ? cap : used;
    put(c, "<h4>Memory budget</h4>\n");
    if (scale > 0) {
        put(c, "<div class=\"bar\">");
        for (int i = 0; i < 3; i++)
            if (parts[i] > 0)
                sbuf_printf(c->b, "<span style=\"width:%.3f%%;background:%s\"></span>", 100 * parts[i] / scale, pc[i]);
        if (cap > used) sbuf_printf(c->b, "<span style=\"width:%.3f%%;background:#e6e6e6\"></span>", 100 * (cap - used) / scale);
        put(c, "</div>\n<p class=\"legend\">");
        for (int i = 0; i < 3; i++) {
            if (parts[i] <= 0 && i != 1) continue;
            units_bytes(parts[i], a, sizeof a);
            sbuf_printf(c->b, "<span class=\"sw\" style=\"background:%s\"></span>%s %s &nbsp; ", pc[i], pn[i], a);
        }
        if (cap > 0) {
            units_bytes(cap > used ? cap - used : 0, a, sizeof a);
            units_bytes(cap, b2, sizeof b2);
            sbuf_printf(c->b, "<span class=\"sw\" style=\"background:#e6e6e6\"></span>%s %s of %s",
                        parts[0] > 0 ? "free" : "the rest (weights, activations, free)", a, b2);
        }
        put(c, "</p>\n");
    }
    units_bytes((double)kv->bytes_per_token, a, sizeof a);
    put(c, "<p>KV dtype ");
    esc(c, kv->kvdtype);
    sbuf_printf(c->b, ": %s per token; longest request %lld tokens; %lld requests, arrivals ", a, (long long)kv->max_len,
                (long long)kv->n_requests);
    esc(c, kv->arrivals);
    if (kv->rate > 0) sbuf_printf(c->b, " at %.3g requests/s", kv->rate);
    if (kv->prompt_dist[0]) {
        put(c, "; prompt lengths ");
        esc(c, kv->prompt_dist);
        put(c, ", output lengths ");
        esc(c, kv->output_dist);
    }
    if (kv->trace_file[0]) {
        put(c, "; trace ");
        esc(c, kv->trace_file);
    }
    put(c, "; on a full pool: ");
    esc(c, kv->preempt);
    if (kv->step_model[0]) {
        put(c, ". Step times: ");
        esc(c, kv->step_model);
    }
    put(c, ".</p>\n");
    if (kv->n_policies <= 0 || !kv->policies) {
        put(c, "<p class=\"note\">The KV section has no policy results.</p>\n");
        section_close(c);
        return;
    }
    /* fragmentation breakdown per policy */
    put(c, "<h4>Where the KV pool goes, per policy (time-averaged)</h4>\n<table class=\"kvbars\">\n");
    for (int i = 0; i < kv->n_policies; i++) {
        const record_kv_policy *pp = &kv->policies[i];
        put(c, "<tr><th>");
        esc(c, pp->policy);
        put(c, "</th><td><div class=\"bar wide\">");
        for (int k = 0; k < KV_CAT_COUNT; k++) {
            double sh = pp->share[k];
            if (!(sh > 0)) continue;
            fmt_pct(a, sizeof a, sh);
            sbuf_printf(c->b, "<span style=\"width:%.3f%%;background:%s\" title=\"%s %s\">%s</span>", 100 * sh, kv_color(k),
                        kv_category_name((kv_category)k), a, sh >= 0.06 ? a : "");
        }
        put(c, "</div></td></tr>\n");
    }
    put(c, "</table>\n<p class=\"legend\">");
    for (int k = 0; k < KV_CAT_COUNT; k++)
        sbuf_printf(c->b, "<span class=\"sw\" style=\"background:%s\"></span>%s &nbsp; ", kv_color(k),
                    kv_category_name((kv_category)k));
    put(c, "</p>\n");
    /* the table of every figure */
    put(c, "<div class=\"scroll\"><table class=\"sortable\"><thead><tr><th>policy</th>");
    for (int k = 0; k < KV_CAT_COUNT; k++) sbuf_printf(c->b, "<th>%s</th>", kv_category_name((kv_category)k));
    put(c, "<th>pool</th><th>max live</th><th>mean live</th><th>mean batch</th><th>tokens/s</th><th>requests/s</th>"
           "<th>TTFT p50</th><th>TTFT p90</th><th>TTFT p99</th><th>TPOT p50</th><th>TPOT p90</th><th>TPOT p99</th>"
           "<th>preemptions</th><th>alloc failures</th><th>completed</th></tr></thead><tbody>\n");
    for (int i = 0; i < kv->n_policies; i++) {
        const record_kv_policy *pp = &kv->policies[i];
        put(c, "<tr>");
        td_str(c, pp->policy);
        for (int k = 0; k < KV_CAT_COUNT; k++) td_pct(c, pp->share[k]);
        td_bytes(c, pp->pool_bytes);
        td_int(c, pp->max_live);
        td_si(c, pp->mean_live, "");
        td_si(c, pp->mean_batch, "");
        td_si(c, pp->tokens_per_s, "");
        td_si(c, pp->requests_per_s, "");
        for (int q = 0; q < RECORD_KV_PCT_COUNT; q++) td_time(c, pp->ttft_s[q]);
        for (int q = 0; q < RECORD_KV_PCT_COUNT; q++) td_time(c, pp->tpot_s[q]);
        td_int(c, pp->preemptions);
        td_int(c, pp->alloc_failures);
        td_int(c, pp->n_completed);
        put(c, "</tr>\n");
    }
    put(c, "</tbody></table></div>\n");
    /* over time: token-state share and live sequences, one line per policy */
    sbuf data;
    sbuf_init(&data);
    int nser = 0;
    for (int i = 0; i < kv->n_policies; i++) {
        const record_kv_policy *pp = &kv->policies[i];
        if (pp->n_series <= 0 || !pp->series) {
            sbuf_puts(&data, "0 0 0 0\n\n\n"); /* keep index i = policy i */
            continue;
        }
        nser++;
        /* at most ~2000 rows per policy: a chart cannot show more */
        int64_t stride = pp->n_series > 2000 ? (pp->n_series + 1999) / 2000 : 1;
        for (int64_t j = 0; j < pp->n_series; j += stride) {
            const record_kv_sample *sm = &pp->series[j];
            double used_share = sm->share[KV_CAT_TOKEN] + sm->share[KV_CAT_RESERVED] + sm->share[KV_CAT_INTERNAL];
            sbuf_printf(&data, "%.9g %.9g %.9g %.9g\n", sm->t_s, 100 * sm->share[KV_CAT_TOKEN], sm->live, 100 * used_share);
        }
        sbuf_puts(&data, "\n\n");
    }
    char dname[64], lit[4400];
    snprintf(dname, sizeof dname, "r%d_kv.dat", ri);
    if (nser > 0 && chart_data(c, dname, &data, lit, sizeof lit)) {
        static const char *ylab[2] = {"token states (% of the pool)", "live sequences"};
        static const char *cap[2] = {"Share of the KV pool holding token states over time, per policy.",
                                     "Live sequences in the pool over time, per policy."};
        put(c, "<div class=\"charts3\">\n");
        for (int m = 0; m < 2; m++) {
            sbuf g;
            sbuf_init(&g);
            sbuf_printf(&g, "set xlabel 'time (s)'\nset ylabel '%s'\nset key top right font ',9'\nset grid ytics lc rgb "
                            "'#e5e5e5'\nset border 3 lc rgb '#666666'\nset xtics nomirror\nset ytics nomirror\n%s\nplot ",
                        ylab[m], m == 0 ? "set yrange [0:105]" : "set yrange [0:*]");
            int first = 1;
            for (int i = 0; i < kv->n_policies; i++) {
                const record_kv_policy *pp = &kv->policies[i];
                if (pp->n_series <= 0 || !pp->series) continue;
                sbuf_printf(&g, "%s%s index %d using 1:%d with lines lw 2 title ", first ? "" : ", ", lit, i, m == 0 ? 2 : 3);
                esc_gnuplot(&g, pp->policy);
                first = 0;
            }
            sbuf_puts(&g, "\n");
            char name[32];
            snprintf(name, sizeof name, "r%d_kv_%d", ri, m);
            if (sbuf_status(&g) == XF_OK) chart(c, name, 620, 380, g.data, cap[m]);
            sbuf_free(&g);
        }
        put(c, "</div>\n");
    }
    sbuf_free(&data);
    section_close(c);
}

/* ------------------------------------------------------------------------------------------
 * Sweeps: latency and throughput against batch, one series per everything-but-batch, and the
 * class of the dominant op over batch x prompt. */

static int same_series(const workload *a, const workload *b) {
    return a->prompt == b->prompt && a->gen == b->gen && a->wdtype == b->wdtype && a->adtype == b->adtype &&
           a->kvdtype == b->kvdtype && a->quant_group == b->quant_group;
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

typedef struct series {
    int first;   /* index of its first point: the key */
    int n;
    int *points; /* (n) point indices sorted by batch; owned */
} series;

static int g_sort_points_batch_cmp(const void *x, const void *y, void *arg) {
    const record *r = arg;
    int64_t a = r->points[*(const int *)x].wl.batch, b = r->points[*(const int *)y].wl.batch;
    return (a > b) - (a < b);
}

/* insertion sort by batch (qsort_r is not C11; series are short) */
static void sort_by_batch(const record *r, int *idx, int n) {
    for (int i = 1; i < n; i++) {
        int v = idx[i], j = i - 1;
        while (j >= 0 && g_sort_points_batch_cmp(&idx[j], &v, (void *)r) > 0) {
            idx[j + 1] = idx[j];
            j--;
        }
        idx[j + 1] = v;
    }
}

static void series_title(const record *r, const series *s, const int vary[4], char *buf, size_t n) {
    const workload *w = &r->points[s->first].wl;
    int off = snprintf(buf, n, "prompt %lld", (long long)w->prompt);
    if (vary[0] && off >= 0 && (size_t)off < n) off += snprintf(buf + off, n - (size_t)off, ", gen %lld", (long long)w->gen);
    if (vary[1] && off >= 0 && (size_t)off < n) off += snprintf(buf + off, n - (size_t)off, ", w %s", dtype_name(w->wdtype));
    if (vary[2] && off >= 0 && (size_t)off < n) off += snprintf(buf + off, n - (size_t)off, ", a %s", dtype_name(w->adtype));
    if (vary[3] && off >= 0 && (size_t)off < n) snprintf(buf + off, n - (size_t)off, ", kv %s", dtype_name(w->kvdtype));
}

static void render_sweep(html_ctx *c, const record *r, int ri) {
    section_open(c, ri, "sweep", "Sweep");
    int np = r->n_points;
    series *ser = calloc((size_t)np, sizeof *ser);
    int *of = calloc((size_t)np, sizeof *of); /* (np) series of each point */
    int64_t *batches = calloc((size_t)np, sizeof *batches);
    if (!ser || !of || !batches) {
        free(ser);
        free(of);
        free(batches);
        put(c, "<p class=\"note\">out of memory for the sweep section</p>");
        section_close(c);
        return;
    }
    int ns = 0;
    for (int i = 0; i < np; i++) {
        int s = 0;
        while (s < ns && !same_series(&r->points[ser[s].first].wl, &r->points[i].wl)) s++;
        if (s == ns) ser[ns++].first = i;
        of[i] = s;
        ser[s].n++;
        batches[i] = r->points[i].wl.batch;
    }
    int ok = 1;
    for (int s = 0; s < ns && ok; s++) {
        ser[s].points = malloc((size_t)ser[s].n * sizeof(int));
        if (!ser[s].points) ok = 0;
        ser[s].n = 0;
    }
    if (!ok) goto out;
    for (int i = 0; i < np; i++) ser[of[i]].points[ser[of[i]].n++] = i;
    for (int s = 0; s < ns; s++) sort_by_batch(r, ser[s].points, ser[s].n);
    /* sort series by prompt (then first index): insertion sort on small counts */
    for (int i = 1; i < ns; i++) {
        series v = ser[i];
        int j = i - 1;
        while (j >= 0 && r->points[ser[j].first].wl.prompt > r->points[v.first].wl.prompt) {
            ser[j + 1] = ser[j];
            j--;
        }
        ser[j + 1] = v;
    }
    qsort(batches, (size_t)np, sizeof *batches, cmp_i64);
    int nb = 0;
    for (int i = 0; i < np; i++)
        if (nb == 0 || batches[nb - 1] != batches[i]) batches[nb++] = batches[i];
    int vary[4] = {0, 0, 0, 0};
    for (int i = 1; i < np; i++) {
        const workload *a = &r->points[0].wl, *b = &r->points[i].wl;
        vary[0] |= a->gen != b->gen;
        vary[1] |= a->wdtype != b->wdtype;
        vary[2] |= a->adtype != b->adtype;
        vary[3] |= a->kvdtype != b->kvdtype;
    }
    sbuf_printf(c->b, "<p>%d points: %d batch sizes &times; %d series (prompt length%s).</p>\n", np, nb, ns,
                (vary[0] || vary[1] || vary[2] || vary[3]) ? " and the other swept parameters" : "");
    /* charts: TTFT, TPOT, tokens/s against batch */
    sbuf data;
    sbuf_init(&data);
    for (int s = 0; s < ns; s++) {
        for (int j = 0; j < ser[s].n; j++) {
            const record_point *p = &r->points[ser[s].points[j]];
            sbuf_printf(&data, "%lld %.9g %.9g %.9g\n", (long long)p->wl.batch, p->summary.ttft_s * 1e3,
                        p->summary.tpot_s * 1e3, p->summary.tokens_per_s);
        }
        sbuf_puts(&data, "\n\n");
    }
    char dname[64], lit[4400], title[160];
    snprintf(dname, sizeof dname, "r%d_sweep.dat", ri);
    if (chart_data(c, dname, &data, lit, sizeof lit)) {
        static const char *ylab[3] = {"TTFT (ms)", "TPOT (ms)", "throughput (tokens/s)"};
        static const char *cap[3] = {"Time to first token against batch.", "Time per output token against batch.",
                                     "Output tokens per second against batch."};
        put(c, "<div class=\"charts3\">\n");
        for (int m = 0; m < 3; m++) {
            sbuf g;
            sbuf_init(&g);
            sbuf_printf(&g, "set logscale x 2\nset logscale y 10\nset xlabel 'batch'\nset ylabel '%s'\nset format y '%%g'\n"
                            "set key outside below font ',9' maxrows 4\nset grid xtics ytics lc rgb '#e5e5e5'\nset border 3 lc rgb '#666666'\n"
                            "set xtics nomirror\nset ytics nomirror\nplot ",
                        ylab[m]);
            /* more than 12 lines are unreadable: draw 12 spread evenly over the series */
            int shown = ns < 12 ? ns : 12;
            for (int i = 0; i < shown; i++) {
                int s = shown > 1 ? (int)(((int64_t)i * (ns - 1) + (shown - 1) / 2) / (shown - 1)) : 0;
                series_title(r, &ser[s], vary, title, sizeof title);
                static const char *pal[12] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                              "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#ad494a"};
                sbuf_printf(&g, "%s%s index %d using 1:%d with linespoints pt 7 ps 0.7 lw 2 lc rgb '%s' title ", i ? ", " : "",
                            lit, s, m + 2, pal[i]);
                esc_gnuplot(&g, title);
            }
            sbuf_puts(&g, "\n");
            char name[32];
            snprintf(name, sizeof name, "r%d_sweep_%d", ri, m);
            if (sbuf_status(&g) == XF_OK) chart(c, name, 560, 440, g.data, cap[m]);
            sbuf_free(&g);
        }
        put(c, "</div>\n");
        if (ns > 12) sbuf_printf(c->b, "<p class=\"note\">The charts show 12 of the %d series, spread evenly; the table has all.</p>\n", ns);
    }
    sbuf_free(&data);
    /* grid of the dominant op's class */
    put(c, "<h4>Dominant op and its class over batch &times; series</h4>\n<div class=\"scroll\"><table class=\"grid\"><thead><tr><th></th>");
    for (int j = 0; j < nb; j++) sbuf_printf(c->b, "<th>batch %lld</th>", (long long)batches[j]);
    put(c, "</tr></thead><tbody>\n");
    for (int s = 0; s < ns; s++) {
        series_title(r, &ser[s], vary, title, sizeof title);
        put(c, "<tr><th>");
        esc(c, title);
        put(c, "</th>");
        int j = 0;
        for (int b = 0; b < nb; b++) {
            const record_point *p = NULL;
            while (j < ser[s].n && r->points[ser[s].points[j]].wl.batch < batches[b]) j++;
            if (j < ser[s].n && r->points[ser[s].points[j]].wl.batch == batches[b]) p = &r->points[ser[s].points[j]];
            if (!p || p->n_ops == 0) {
                put(c, "<td></td>");
                continue;
            }
            int dph, dk;
            xf_bound cls;
            double share;
            point_dominant(p, &dph, &dk, &cls, &share);
            char sh[32];
            fmt_pct(sh, sizeof sh, share);
            sbuf_printf(c->b, "<td class=\"cell\" style=\"background:%s\" title=\"%s %s, %s of the request\">%s<br><small>%s %s</small></td>",
                        class_color(cls), phase_name((xf_phase)dph), op_kind_name((op_kind)dk), sh, bound_name(cls),
                        phase_name((xf_phase)dph), op_kind_name((op_kind)dk));
        }
        put(c, "</tr>\n");
    }
    put(c, "</tbody></table></div>\n");
    /* every point */
    sbuf_printf(c->b, "<h4>Every point</h4>\n<div class=\"scroll\"><table class=\"sortable\" id=\"r%d-points\"><thead><tr><th>#</th>"
                      "<th>batch</th><th>prompt</th><th>gen</th><th>dtypes w/a/kv</th><th>TTFT</th><th>TPOT</th><th>tokens/s</th>"
                      "<th>memory-bound</th><th>compute-bound</th><th>memory</th><th>dominant op</th></tr></thead><tbody>\n",
                ri);
    for (int i = 0; i < np; i++) {
        const record_point *p = &r->points[i];
        put(c, "<tr>");
        td_int(c, i);
        td_int(c, p->wl.batch);
        td_int(c, p->wl.prompt);
        td_int(c, p->wl.gen);
        snprintf(title, sizeof title, "%s/%s/%s", dtype_name(p->wl.wdtype), dtype_name(p->wl.adtype), dtype_name(p->wl.kvdtype));
        td_str(c, title);
        td_time(c, p->summary.ttft_s);
        td_time(c, p->summary.tpot_s);
        td_si(c, p->summary.tokens_per_s, "");
        td_pct(c, p->summary.share_bound[XF_BOUND_MEMORY]);
        td_pct(c, p->summary.share_bound[XF_BOUND_COMPUTE]);
        td_bytes(c, p->memory.total_bytes);
        if (p->n_ops > 0) {
            int dph, dk;
            xf_bound cls;
            point_dominant(p, &dph, &dk, &cls, NULL);
            snprintf(title, sizeof title, "%s %s (%s)", phase_name((xf_phase)dph), op_kind_name((op_kind)dk), bound_name(cls));
            td_str(c, title);
        } else {
            td_str(c, "");
        }
        put(c, "</tr>\n");
    }
    put(c, "</tbody></table></div>\n");
out:
    for (int s = 0; s < ns; s++) free(ser[s].points);
    free(ser);
    free(of);
    free(batches);
    section_close(c);
}

/* ------------------------------------------------------------------------------------------
 * Advice: the advice analyzer's findings, ranked, each with its evidence and predicted gain. */

/* "*tokens_per_s" are rates, other "*_s" are times, the rest plain numbers ("max_live"). */
static void fmt_metric(char *buf, size_t n, const char *metric, double v) {
    size_t len = strlen(metric);
    if (strstr(metric, "tokens_per_s"))
        units_si(v, "tokens/s", buf, n);
    else if (strstr(metric, "per_s"))
        units_si(v, "/s", buf, n);
    else if (len >= 2 && strcmp(metric + len - 2, "_s") == 0)
        units_time(v, buf, n);
    else if (strstr(metric, "bytes"))
        units_bytes(v, buf, n);
    else
        units_si(v, "", buf, n);
}

static void render_advice(html_ctx *c, const record *r, int ri) {
    section_open(c, ri, "advice", "Advice");
    put(c, "<ol class=\"advice\">\n");
    for (int i = 0; i < r->n_advice && i < RECORD_MAX_ADVICE; i++) {
        const record_advice *a = &r->advice[i];
        /* fixed-size fields: copy with a terminator in case a reader left one full */
        char kind[sizeof a->kind + 1], title[sizeof a->title + 1], ev[sizeof a->evidence + 1], act[sizeof a->action + 1],
            metric[sizeof a->gain_metric + 1];
        memcpy(kind, a->kind, sizeof a->kind);
        kind[sizeof a->kind] = '\0';
        memcpy(title, a->title, sizeof a->title);
        title[sizeof a->title] = '\0';
        memcpy(ev, a->evidence, sizeof a->evidence);
        ev[sizeof a->evidence] = '\0';
        memcpy(act, a->action, sizeof a->action);
        act[sizeof a->action] = '\0';
        memcpy(metric, a->gain_metric, sizeof a->gain_metric);
        metric[sizeof a->gain_metric] = '\0';
        put(c, "<li><b>");
        esc(c, title);
        put(c, "</b> <span class=\"hint\">(");
        esc(c, kind);
        if (r->n_points > 1) sbuf_printf(c->b, ", point %d", a->point + 1);
        put(c, ")</span><br>");
        esc(c, ev);
        put(c, "<br><b>Do:</b> ");
        esc(c, act);
        if (metric[0]) {
            char b1[48], b2[48], sh[32];
            fmt_metric(b1, sizeof b1, metric, a->before);
            fmt_metric(b2, sizeof b2, metric, a->after);
            fmt_pct(sh, sizeof sh, a->score);
            put(c, "<br><b>Predicted:</b> ");
            esc(c, metric);
            sbuf_printf(c->b, " %s &rarr; %s (score %s)", b1, b2, sh);
        }
        put(c, "</li>\n");
    }
    put(c, "</ol>\n");
    section_close(c);
}

/* ------------------------------------------------------------------------------------------
 * Environment. */

static void render_env(html_ctx *c, const record *r, int ri) {
    section_open(c, ri, "env", "Environment");
    put(c, "<table class=\"kv\">\n");
    kv_row(c, "record kind", r->kind);
    kv_row(c, "created", r->created);
    kv_row(c, "xfprof", r->tool_version);
    for (int i = 0; i < r->n_env && i < RECORD_MAX_ENV; i++) {
        char k[sizeof r->env[i].key + 1], v[sizeof r->env[i].value + 1];
        memcpy(k, r->env[i].key, sizeof r->env[i].key);
        k[sizeof r->env[i].key] = '\0';
        memcpy(v, r->env[i].value, sizeof r->env[i].value);
        v[sizeof r->env[i].value] = '\0';
        kv_row(c, k, v);
    }
    put(c, "</table>\n");
    section_close(c);
}

/* ------------------------------------------------------------------------------------------
 * The page. */

static const char *k_css =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;margin:0;color:#1d2330;"
    "background:#f4f5f7;line-height:1.45}\n"
    "header{background:#1d2a3a;color:#fff;padding:18px 32px}header h1{margin:0 0 4px;font-size:22px}"
    "header p{margin:0;color:#c8d2de;font-size:13px}\n"
    "nav{background:#fff;border-bottom:1px solid #dde1e6;padding:8px 32px;font-size:13px;position:sticky;top:0;z-index:2}"
    "nav a{margin-right:14px;color:#2f5f9a;text-decoration:none}\n"
    "main{padding:8px 32px 40px;max-width:1400px}\n"
    "article>h2{font-size:19px;margin:22px 0 8px}\n"
    "section{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:14px 20px;margin:14px 0}\n"
    "section h3{margin:0 0 10px;font-size:17px}section h4{margin:14px 0 6px;font-size:14px;color:#444}\n"
    ".verdict{font-size:16px;background:#eef4fb;border-left:4px solid #2f74c0;padding:10px 14px;margin:0 0 12px}\n"
    ".cards{display:flex;flex-wrap:wrap;gap:16px}.cards table{flex:1 1 300px}\n"
    "table{border-collapse:collapse;font-size:13px}caption{text-align:left;font-weight:600;padding:4px 0;color:#333}\n"
    "table.kv th{text-align:left;font-weight:normal;color:#555;padding:3px 12px 3px 0;vertical-align:baseline}"
    "table.kv td{padding:3px 0;vertical-align:baseline}td.big{font-size:18px;font-weight:600}\n"
    "table.sortable th{cursor:pointer;background:#eef0f3;position:sticky;top:0}"
    "table.sortable th,table.sortable td,table.grid td,table.grid th{border:1px solid #e1e4e8;padding:3px 7px;text-align:right}"
    "table.sortable td:nth-child(-n+5){text-align:left}\n"
    ".scroll{max-height:600px;overflow:auto}\n"
    ".cls{color:#fff;border-radius:3px;padding:0 5px;font-size:12px}\n"
    ".bar{display:flex;height:18px;border-radius:3px;overflow:hidden;background:#f0f0f0;max-width:900px}"
    ".bar span{display:block;height:100%}\n"
    ".legend{font-size:13px;margin:4px 0}.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:4px;"
    "vertical-align:-1px}\n.warn{color:#b3261e}\n"
    ".pipe{display:flex;align-items:stretch;flex-wrap:wrap;gap:4px;margin:10px 0}"
    ".pipe-phase{width:80px;font-size:13px;color:#555;align-self:center}\n"
    ".stage{border:3px solid #999;border-radius:6px;padding:6px 9px;min-width:110px;max-width:200px;background:#fff;font-size:12px}"
    ".stage.io{border:2px dashed #aaa;color:#555;min-width:60px;align-self:center}\n"
    ".sname{font-weight:600;font-size:14px}.sshare{font-size:20px;font-weight:700}.stime{color:#555}"
    ".sbar{height:5px;background:#eee;margin:4px 0}.sbar span{display:block;height:100%}.sops{color:#444}\n"
    ".layers{display:flex;gap:4px;border:1px solid #c8cdd4;border-radius:8px;padding:18px 6px 6px;position:relative;"
    "background:#f7f8fa}.layers-label{position:absolute;top:2px;left:8px;font-size:12px;color:#555;font-weight:600}\n"
    ".arrow,.plus{align-self:center;color:#888;font-size:18px}\n"
    ".callouts{display:flex;flex-wrap:wrap;gap:10px;margin-top:8px}.callout{flex:1 1 300px;border:1px solid #dde1e6;"
    "border-radius:6px;padding:8px 12px;font-size:13px;background:#fafbfc}.callout.hot{border-color:#d0463c;background:#fdf1f0}\n"
    "figure.chart{margin:10px 0}figure.chart svg{max-width:100%;height:auto;display:block}"
    "figcaption{font-size:12px;color:#555}\n"
    ".charts3{display:flex;flex-wrap:wrap;gap:8px}.charts3 figure{flex:1 1 420px;margin:0}\n"
    ".chart-missing,.note{background:#fff8e1;border:1px solid #e8d48a;padding:8px 12px;border-radius:4px;font-size:13px}\n"
    "table.grid td.cell{color:#fff;text-align:center;font-size:12px;min-width:80px}\n"
    "table.kvbars{width:100%;max-width:1000px}table.kvbars th{text-align:left;width:110px;font-weight:600;padding:3px 8px 3px 0}"
    ".bar.wide{height:22px;max-width:none}.bar.wide span{color:#fff;font-size:11px;text-align:center;line-height:22px;"
    "overflow:hidden}\n"
    "ol.advice li{margin:0 0 10px;font-size:14px}\n"
    ".hint{font-size:12px;color:#666;margin:0 0 6px}details{margin-top:8px;font-size:13px}\n";

/* Sorting by a header click: numbers by their exact data-v, else text. */
static const char *k_js =
    "document.querySelectorAll('table.sortable th').forEach(function(th){th.addEventListener('click',function(){"
    "var t=th.closest('table'),b=t.tBodies[0],i=th.cellIndex,d=th.dataset.dir==='a'?'d':'a';th.dataset.dir=d;"
    "var rows=Array.prototype.slice.call(b.rows);rows.sort(function(x,y){var p=x.cells[i].dataset.v||'',"
    "q=y.cells[i].dataset.v||'',a=parseFloat(p),c=parseFloat(q);var r=(isNaN(a)||isNaN(c))?p.localeCompare(q):a-c;"
    "return d==='a'?r:-r;});rows.forEach(function(r){b.appendChild(r);});});});\n";

void report_options_default(report_options *o) {
    memset(o, 0, sizeof *o);
    o->detail_point = -1;
    o->charts = 1;
}

static void render_record(html_ctx *c, const record *r, int ri, int n_recs) {
    int dp = c->opt->detail_point;
    if (dp < 0 || dp >= r->n_points) dp = 0;
    const record_point *p = r->n_points > 0 ? &r->points[dp] : NULL;
    sbuf_printf(c->b, "<article class=\"record\" id=\"r%d\">\n", ri);
    if (n_recs > 1) {
        sbuf_printf(c->b, "<h2>Record %d: ", ri + 1);
        esc(c, r->kind);
        put(c, " &mdash; ");
        esc(c, r->model.name);
        put(c, " on ");
        esc(c, r->device.name);
        put(c, "</h2>\n");
    }
    render_summary(c, r, ri, p, dp);
    if (r->n_advice > 0) render_advice(c, r, ri); /* what to do, right after what was found */
    if (p && p->n_ops > 0) {
        render_pipeline(c, r, ri, p);
        render_roofline(c, r, ri, p);
        render_layers(c, r, ri, p);
        render_optable(c, ri, p);
        if (point_any_measured(p)) render_measured(c, ri, p);
    }
    if (r->kv) render_kv(c, r, ri);
    if (r->n_points > 1) render_sweep(c, r, ri);
    if (r->n_env > 0) render_env(c, r, ri);
    put(c, "</article>\n");
}

static void nav(html_ctx *c, const record *recs, int n_recs) {
    put(c, "<nav>");
    for (int ri = 0; ri < n_recs; ri++) {
        const record *r = &recs[ri];
        int dp = c->opt->detail_point;
        if (dp < 0 || dp >= r->n_points) dp = 0;
        const record_point *p = r->n_points > 0 ? &r->points[dp] : NULL;
        if (n_recs > 1) sbuf_printf(c->b, "<b>%d:</b> ", ri + 1);
        sbuf_printf(c->b, "<a href=\"#r%d-summary\">summary</a>", ri);
        if (p && p->n_ops > 0) {
            sbuf_printf(c->b, "<a href=\"#r%d-pipeline\">pipeline</a><a href=\"#r%d-roofline\">roofline</a>"
                              "<a href=\"#r%d-layers\">layers</a><a href=\"#r%d-optable\">ops</a>",
                        ri, ri, ri, ri);
            if (point_any_measured(p)) sbuf_printf(c->b, "<a href=\"#r%d-measured\">measured</a>", ri);
        }
        if (r->kv) sbuf_printf(c->b, "<a href=\"#r%d-kv\">KV</a>", ri);
        if (r->n_points > 1) sbuf_printf(c->b, "<a href=\"#r%d-sweep\">sweep</a>", ri);
        if (r->n_advice > 0) sbuf_printf(c->b, "<a href=\"#r%d-advice\">advice</a>", ri);
        if (r->n_env > 0) sbuf_printf(c->b, "<a href=\"#r%d-env\">environment</a>", ri);
    }
    put(c, "</nav>\n");
}

xf_status report_html_text(const record *recs, int n_recs, const report_options *opt, char **out) {
    *out = NULL;
    if (!recs || n_recs < 1) return xf_errorf(XF_EINVAL, "report: no record to render");
    report_options defaults;
    report_options_default(&defaults);
    sbuf b;
    sbuf_init(&b);
    html_ctx c;
    memset(&c, 0, sizeof c);
    c.b = &b;
    c.opt = opt ? opt : &defaults;
    if (!c.opt->charts) {
        snprintf(c.gp_why, sizeof c.gp_why, "charts were turned off");
    } else {
        xf_status st = gnuplot_session_init(&c.gp, c.opt->gnuplot_timeout_s);
        c.gp_ok = st == XF_OK;
        if (!c.gp_ok) snprintf(c.gp_why, sizeof c.gp_why, "%s", xf_error_msg());
        xf_error_clear();
    }
    const record *r0 = &recs[0];
    char title[320];
    if (c.opt->title)
        snprintf(title, sizeof title, "%.300s", c.opt->title);
    else
        snprintf(title, sizeof title, "xfprof report: %.64s on %.64s", r0->model.name, r0->device.name);
    put(&c, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    esc(&c, title);
    put(&c, "</title>\n<style>\n");
    put(&c, k_css);
    put(&c, "</style>\n</head>\n<body>\n<header><h1>");
    esc(&c, title);
    put(&c, "</h1><p>");
    if (n_recs == 1) {
        esc(&c, r0->kind);
        put(&c, " record");
        if (r0->created[0]) {
            put(&c, " made ");
            esc(&c, r0->created);
        }
        put(&c, " by xfprof ");
        esc(&c, r0->tool_version);
    } else {
        sbuf_printf(c.b, "%d records", n_recs);
    }
    put(&c, "; report by xfprof " XFPROF_VERSION "</p></header>\n");
    nav(&c, recs, n_recs);
    put(&c, "<main>\n");
    if (!c.gp_ok) {
        put(&c, "<p class=\"note\" id=\"gnuplot-note\"><b>Charts need gnuplot</b> (Debian: <code>apt-get install "
                "gnuplot-nox</code>); this report has the tables only. Reason: ");
        esc(&c, c.gp_why);
        put(&c, "</p>\n");
    }
    for (int ri = 0; ri < n_recs; ri++) render_record(&c, &recs[ri], ri, n_recs);
    put(&c, "</main>\n<script>\n");
    put(&c, k_js);
    put(&c, "</script>\n</body>\n</html>\n");
    gnuplot_session_free(&c.gp);
    xf_status st = sbuf_status(&b);
    if (st != XF_OK) {
        sbuf_free(&b);
        return st;
    }
    *out = sbuf_take(&b);
    return *out ? XF_OK : xf_errorf(XF_ENOMEM, "out of memory");
}

xf_status report_html_write(const record *recs, int n_recs, const char *path, const report_options *opt) {
    char *text = NULL;
    xf_status st = report_html_text(recs, n_recs, opt, &text);
    if (st != XF_OK) return st;
    st = file_write_atomic(path, text, strlen(text));
    free(text);
    if (st != XF_OK) return xf_error_prefix(st, "report: ");
    return XF_OK;
}
