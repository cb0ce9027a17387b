/* The HTML report's summary section: the verdict, memory and class bars, the key figures. */
#include "html_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/rollup.h"
#include "analyzers/roofline.h"
#include "core/fileio.h"
#include "core/record_kv.h"
#include "core/units.h"
#include "escape.h"
#include "gnuplot.h"
#include "sbuf.h"

/* ------------------------------------------------------------------------------------------
 * Summary. */

static void verdict(html_ctx *c, const record *r, const record_point *p) {
    rollup_verdict v;
    rollup_verdict_of(p, &v);
    double req = v.request_s;
    int top = (int)v.top_class;
    char bw[48], pk[48], shp[32], shc[32], shd[32];
    units_si(r->device.bandwidth_Bps, "B/s", bw, sizeof bw);
    html_fmt_pct(shc, sizeof shc, v.top_class_share);
    html_fmt_pct(shd, sizeof shd, v.dom_share);
    const char *phase = v.top_phase == XF_DECODE ? "Decode" : "Prefill";
    html_fmt_pct(shp, sizeof shp, v.top_phase_share);
    double main_peak = device_peak(&r->device, XF_COMPUTE_TENSOR16);
    if (p->wl.adtype == XF_FP32) main_peak = device_peak(&r->device, XF_COMPUTE_FP32);
    units_si(main_peak, "FLOP/s", pk, sizeof pk);
    html_put(c, "<p class=\"verdict\"><b>Verdict:</b> ");
    if (req <= 0) {
        html_put(c, "the record has no op times, so there is nothing to judge.</p>\n");
        return;
    }
    sbuf_printf(c->b, "%s takes %s of the request time, and %s of the request time is in %s-bound ops", phase, shp, shc,
                bound_name((xf_bound)top));
    if (p->summary.verdict_boot > 0) /* analyzers/confidence.h */
        sbuf_printf(c->b, " (confidence %.0f%%: share of %d bootstrap resamples of the repetitions giving this class)",
                    100 * p->summary.verdict_confidence, p->summary.verdict_boot);
    if (top == XF_BOUND_MEMORY)
        sbuf_printf(c->b, ": speed is set by the %s memory bandwidth, not by compute", bw);
    else if (top == XF_BOUND_COMPUTE)
        sbuf_printf(c->b, ": speed is set by the %s compute peak; more bandwidth would not help", pk);
    else if (top == XF_BOUND_LATENCY)
        html_put(c, ": ops are too small to load either unit (launches, synchronisation); fuse ops or batch more");
    else if (top == XF_BOUND_COMM)
        html_put(c, ": the collectives between devices set the speed; a faster link, fewer devices or overlapping them would help");
    else
        html_put(c, ": compute and memory are both near their ceilings");
    sbuf_printf(c->b, "; the largest single cost is %s in %s (%s of the request, %s-bound).",
                op_kind_name(v.dom_kind), phase_name(v.dom_phase), shd, bound_name(v.dom_class));
    const record_concurrent *cc = &p->concurrent;
    if (cc->n_pulses >= 2 && cc->machine_bandwidth_Bps > 0 && cc->machine_fp32_flops > 0)
        sbuf_printf(c->b, " The machine was %s while it ran: the read ceiling measured around the repetitions was %.2f GB/s "
                          "(%+.0f%% vs the machine file), FP32 %.1f GFLOP/s (%+.0f%%); the classes use these.",
                    cc->contended ? "<b>contended</b>" : "not contended", cc->bandwidth_Bps / 1e9,
                    100 * (cc->bandwidth_Bps / cc->machine_bandwidth_Bps - 1), cc->fp32_flops / 1e9,
                    100 * (cc->fp32_flops / cc->machine_fp32_flops - 1));
    if (cc->n_pulses >= 2 && cc->machine_bandwidth_Bps > 0 && cc->machine_fp32_flops > 0 && cc->cpu_wait_measured)
        sbuf_printf(c->b, " The model's threads waited for a CPU %.0f%% of the time%s.", 100 * cc->cpu_wait_share,
                    roofline_cpu_contended(cc) ? ": another process shares their cores, and the op times include those waits"
                                                       : "");
    html_put(c, "</p>\n");
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
    html_fmt_pct(a, sizeof a, b->share[KV_CAT_TOKEN]);
    html_fmt_pct(bb, sizeof bb, waste[0]);
    html_fmt_pct(cc, sizeof cc, w->share[KV_CAT_TOKEN]);
    html_fmt_pct(dd, sizeof dd, waste[1]);
    units_si(b->tokens_per_s, "tokens/s", e, sizeof e);
    units_si(w->tokens_per_s, "tokens/s", f, sizeof f);
    html_put(c, "<p class=\"verdict\"><b>Verdict:</b> ");
    html_esc(c, b->policy);
    sbuf_printf(c->b, " keeps the most of the KV pool in token states (%s, with %s reserved or fragmented) and serves %s", a, bb, e);
    if (worst != best) {
        html_put(c, "; ");
        html_esc(c, w->policy);
        sbuf_printf(c->b, " wastes the most (%s reserved or fragmented, %s token states) and serves %s", dd, cc, f);
    }
    html_put(c, ".</p>\n");
}

static void memory_bar(html_ctx *c, const record_memory *m) {
    double cap = m->capacity_bytes;
    double parts[3] = {m->weights_bytes, m->kv_bytes, m->activations_bytes};
    static const char *names[3] = {"weights", "KV cache", "activations"};
    static const char *colors[3] = {"#5b7fa6", "#d08a2e", "#8aa85a"};
    double used = parts[0] + parts[1] + parts[2];
    double scale = cap > used ? cap : used;
    if (scale <= 0) return;
    html_put(c, "<div class=\"bar\" title=\"memory\">");
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
    html_put(c, "</div>\n<p class=\"legend\">");
    for (int i = 0; i < 3; i++) {
        units_bytes(parts[i], s, sizeof s);
        html_fmt_pct(t, sizeof t, html_safe_div(parts[i], cap));
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
    html_put(c, "</p>\n");
}

static void share_bar(html_ctx *c, const double *share) {
    html_put(c, "<div class=\"bar\">");
    for (int b = 0; b < XF_BOUND_COUNT; b++)
        if (share[b] > 0)
            sbuf_printf(c->b, "<span style=\"width:%.3f%%;background:%s\" title=\"%s-bound\"></span>", 100 * share[b],
                        html_class_color((xf_bound)b), bound_name((xf_bound)b));
    html_put(c, "</div>\n<p class=\"legend\">");
    char s[32];
    for (int b = 0; b < XF_BOUND_COUNT; b++) {
        if (b == XF_BOUND_COMM && !(share[b] > 0)) continue; /* one device: no collectives */
        html_fmt_pct(s, sizeof s, share[b]);
        sbuf_printf(c->b, "<span class=\"sw\" style=\"background:%s\"></span>%s-bound <b class=\"share-%s\">%s</b> &nbsp; ",
                    html_class_color((xf_bound)b), bound_name((xf_bound)b), bound_name((xf_bound)b), s);
    }
    html_put(c, "</p>\n");
}

void html_summary(html_ctx *c, const record *r, int ri, const record_point *p, int dp) {
    html_section_open(c, ri, "summary", "Summary");
    char v[400], a[64], b2[64], w[64];
    if (p)
        verdict(c, r, p);
    else if (r->kv)
        kv_verdict(c, r->kv);
    html_put(c, "<div class=\"cards\">\n");
    /* model */
    html_put(c, "<table class=\"kv\"><caption>Model</caption>\n");
    html_kv_row(c, "name", r->model.name);
    html_kv_row(c, "architecture", r->model.arch);
    units_si((double)r->model_params, "", w, sizeof w);
    snprintf(v, sizeof v, "%lld (%s)", (long long)r->model_params, w);
    html_kv_row(c, "parameters", v);
    if (r->model.n_experts > 0) { /* mixture of experts: what one token uses of them */
        snprintf(v, sizeof v, "%lld routed, top-%lld%s, in %lld of %lld layers%s", (long long)r->model.n_experts,
                 (long long)r->model.experts_per_tok, r->model.norm_topk_prob ? " (renormalized)" : "",
                 (long long)model_moe_layers(&r->model), (long long)r->model.n_layers,
                 r->model.d_ff_shared > 0 ? ", and a shared expert every token runs" : "");
        html_kv_row(c, "experts", v);
        if (r->model_active_params > 0) {
            units_si((double)r->model_active_params, "", w, sizeof w);
            snprintf(v, sizeof v, "%lld (%s, %.1f%% of the total)", (long long)r->model_active_params, w,
                     100.0 * html_safe_div((double)r->model_active_params, (double)r->model_params));
            html_kv_row(c, "active parameters per token", v);
        }
        if (p && p->memory.active_weights_bytes > 0) {
            units_bytes(p->memory.weights_bytes, a, sizeof a);
            units_bytes(p->memory.active_weights_bytes, b2, sizeof b2);
            snprintf(v, sizeof v, "%s total, %s active per token (at %s)", a, b2, dtype_name(p->wl.wdtype));
            html_kv_row(c, "weights", v);
        }
    }
    snprintf(v, sizeof v, "%lld layers, d_model %lld, d_ff %lld, vocab %lld", (long long)r->model.n_layers,
             (long long)r->model.d_model, (long long)r->model.d_ff, (long long)r->model.vocab);
    html_kv_row(c, "shape", v);
    snprintf(v, sizeof v, "%lld query heads, %lld KV heads, head_dim %lld%s", (long long)r->model.n_heads,
             (long long)r->model.n_kv_heads, (long long)r->model.head_dim,
             r->model.n_kv_heads < r->model.n_heads ? " (GQA)" : "");
    html_kv_row(c, "attention", v);
    units_bytes(r->kv_bytes_per_token, a, sizeof a);
    snprintf(v, sizeof v, "%.0f B (%s)", r->kv_bytes_per_token, a);
    html_kv_row(c, "KV bytes per token", v);
    html_put(c, "</table>\n");
    /* device */
    html_put(c, "<table class=\"kv\"><caption>Device</caption>\n");
    html_kv_row(c, "name", r->device.name);
    if (r->device.description[0]) html_kv_row(c, "description", r->device.description);
    units_bytes(r->device.memory_bytes, v, sizeof v);
    html_kv_row(c, "memory", v);
    units_si(r->device.bandwidth_Bps, "B/s", v, sizeof v);
    html_kv_row(c, "bandwidth", v);
    if (r->device.cache_bandwidth_Bps > 0) {
        units_si(r->device.cache_bandwidth_Bps, "B/s", a, sizeof a);
        units_bytes(r->device.cache_bytes, b2, sizeof b2);
        snprintf(v, sizeof v, "%s inside %s of last-level cache", a, b2);
        html_kv_row(c, "cache bandwidth", v);
    }
    for (int k = 0; k < XF_COMPUTE_COUNT; k++) {
        if (r->device.peak_flops[k] <= 0) continue;
        units_si(r->device.peak_flops[k], "FLOP/s", a, sizeof a);
        snprintf(b2, sizeof b2, "peak %s", compute_name((xf_compute)k));
        html_kv_row(c, b2, a);
    }
    html_kv_row(c, "ceilings used", (r->ceilings_measured || r->device.measured) ? "measured on this machine (xfprof machine)"
                                                                            : "spec sheet");
    if (r->device.source[0]) html_kv_row(c, "source", r->device.source);
    html_put(c, "</table>\n");
    if (p) {
        html_put(c, "<table class=\"kv\"><caption>Workload</caption>\n");
        if (r->n_points > 1) {
            snprintf(v, sizeof v, "point %d of a %d-point sweep (the sweep section has them all)", dp + 1, r->n_points);
            html_kv_row(c, "shown", v);
        }
        snprintf(v, sizeof v, "%lld", (long long)p->wl.batch);
        html_kv_row(c, "batch", v);
        snprintf(v, sizeof v, "%lld tokens", (long long)p->wl.prompt);
        html_kv_row(c, "prompt", v);
        snprintf(v, sizeof v, "%lld tokens", (long long)p->wl.gen);
        html_kv_row(c, "generated", v);
        snprintf(v, sizeof v, "weights %s, activations %s, KV %s", dtype_name(p->wl.wdtype), dtype_name(p->wl.adtype),
                 dtype_name(p->wl.kvdtype));
        html_kv_row(c, "dtypes", v);
        if (p->summary.decode_context > 0) {
            snprintf(v, sizeof v, "%lld tokens (the mean over the request)", (long long)p->summary.decode_context);
            html_kv_row(c, "decode context", v);
        }
        if (p->run.backend[0]) {
            snprintf(v, sizeof v, "%.15s, %d threads, %d repetitions after %d warm-up", p->run.backend, p->run.threads,
                     p->run.reps, p->run.warmup);
            html_kv_row(c, "run", v);
            if (p->run.kv_policy[0]) {
                snprintf(v, sizeof v, "%.31s (%.15s allocator)", p->run.kv_policy, p->run.kv_alloc);
                html_kv_row(c, "KV policy", v);
            }
        }
        html_put(c, "</table>\n");
        /* results */
        const record_summary *s = &p->summary;
        html_put(c, "<table class=\"kv results\"><caption>Results</caption>\n");
        units_time(s->ttft_s, v, sizeof v);
        sbuf_printf(c->b, "<tr><th>TTFT</th><td class=\"big\" id=\"r%d-ttft\">%s</td></tr>\n", ri, v);
        units_time(s->tpot_s, v, sizeof v);
        sbuf_printf(c->b, "<tr><th>TPOT</th><td class=\"big\" id=\"r%d-tpot\">%s</td></tr>\n", ri, v);
        units_si(s->tokens_per_s, "tokens/s", v, sizeof v);
        sbuf_printf(c->b, "<tr><th>throughput</th><td class=\"big\" id=\"r%d-tps\">%s</td></tr>\n", ri, v);
        units_si(s->prefill_tokens_per_s, "tokens/s", v, sizeof v);
        html_kv_row(c, "prefill rate", v);
        units_si(s->decode_tokens_per_s, "tokens/s", v, sizeof v);
        html_kv_row(c, "decode rate", v);
        if (s->max_batch > 0) {
            snprintf(v, sizeof v, "%lld sequences", (long long)s->max_batch);
            html_kv_row(c, "largest batch that fits", v);
        } else if (p->memory.capacity_bytes > 0) {
            html_kv_row(c, "largest batch that fits", "none: not even batch 1 fits the device memory");
        }
        html_put(c, "</table>\n");
    }
    html_put(c, "</div>\n");
    if (p) {
        html_put(c, "<h4>Share of request time by class</h4>\n");
        share_bar(c, p->summary.share_bound);
        if (p->memory.weights_bytes > 0 || p->memory.capacity_bytes > 0) {
            html_put(c, "<h4>Device memory</h4>\n");
            memory_bar(c, &p->memory);
        }
    } else if (r->kv && r->kv->n_policies > 0 && r->kv->policies) {
        html_put(c, "<p class=\"hint\">A KV record: the KV section below has every figure.</p>\n");
    } else {
        html_put(c, "<p class=\"note\">This record has no workload points (no per-op data to show).</p>\n");
    }
    html_section_close(c);
}
