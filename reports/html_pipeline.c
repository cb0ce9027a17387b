/* The HTML report's pipeline section: each phase's step as stages, their share and class. */
#include "html_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/rollup.h"
#include "core/fileio.h"
#include "core/record_kv.h"
#include "core/units.h"
#include "escape.h"
#include "gnuplot.h"
#include "sbuf.h"

/* ------------------------------------------------------------------------------------------
 * Pipeline at a glance. */

static void pipeline_row(html_ctx *c, const record *r, const record_point *p, int ph) {
    agg a[XF_PHASE_COUNT][OP_KIND_COUNT];
    rollup_by_kind(p, a);
    agg st[ST_COUNT];
    memset(st, 0, sizeof st);
    double total = 0;
    for (int k = 0; k < OP_KIND_COUNT; k++) {
        rollup_agg_merge(&st[html_stage_of(k)], &a[ph][k]);
        total += a[ph][k].time_s;
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
        xf_bound cls = rollup_class(&st[s]);
        double share = html_safe_div(st[s].time_s, total);
        html_fmt_pct(sh, sizeof sh, share);
        units_time(st[s].time_s, t, sizeof t);
        sbuf_printf(c->b,
                    "<div class=\"stage\" style=\"border-color:%s\" title=\"%s-bound\"><div class=\"sname\">%s</div>"
                    "<div class=\"sshare\">%s</div><div class=\"stime\">%s &middot; %s-bound</div>"
                    "<div class=\"sbar\"><span style=\"width:%.2f%%;background:%s\"></span></div>",
                    html_class_color(cls), bound_name(cls), names[s], sh, t, bound_name(cls), 100 * share, html_class_color(cls));
        /* the ops that make up most of the stage */
        html_put(c, "<div class=\"sops\">");
        for (int k = 0; k < OP_KIND_COUNT; k++) {
            if (html_stage_of(k) != s || a[ph][k].n == 0) continue;
            double os = html_safe_div(a[ph][k].time_s, total);
            if (os < 0.01) continue;
            html_fmt_pct(sh, sizeof sh, os);
            xf_bound oc = rollup_class(&a[ph][k]);
            sbuf_printf(c->b, "<span style=\"color:%s\">%s %s</span> ", html_class_color(oc), op_kind_name((op_kind)k), sh);
        }
        html_put(c, "</div></div>\n");
        if (s == ST_ATTN) html_put(c, "<div class=\"plus\">+</div>\n");
        if (s == ST_FFN) html_put(c, "</div>\n");
        html_put(c, "<div class=\"arrow\">&rarr;</div>\n");
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
        t += html_op_t(op);
        q += op->cost.bytes;
        double pk = device_peak(&r->device, op->cost.compute);
        if (pk > peak) peak = pk;
    }
    if (intensity) *intensity = html_safe_div(f, q);
    return html_safe_div(html_safe_div(f, t), peak);
}

void html_pipeline(html_ctx *c, const record *r, int ri, const record_point *p) {
    html_section_open(c, ri, "pipeline", "The pipeline at a glance");
    html_put(c, "<p class=\"hint\">Each stage is coloured by the class that holds most of its time and labelled with its share "
           "of the step time; the ops inside it that take at least 1% are listed.</p>\n");
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
        if (html_point_has_phase(p, ph)) pipeline_row(c, r, p, ph);
    /* The three bottlenecks, each called out where the data shows it. */
    const record_summary *s = &p->summary;
    char a[64], b2[64], d[64], e[64];
    html_put(c, "<div class=\"callouts\">\n");
    /* bandwidth */
    {
        int hot = s->share_bound[XF_BOUND_MEMORY] >= 0.5;
        html_fmt_pct(a, sizeof a, s->share_bound[XF_BOUND_MEMORY]);
        units_si(r->device.bandwidth_Bps, "B/s", b2, sizeof b2);
        double q = 0;
        for (int64_t i = 0; i < p->n_ops; i++)
            if (p->ops[i].cost.phase == XF_DECODE) q += p->ops[i].cost.bytes;
        sbuf_printf(c->b, "<div class=\"callout%s\" id=\"r%d-bottleneck-bandwidth\"><b>Bandwidth</b>: %s of the request time is "
                    "in memory-bound ops.", hot ? " hot" : "", ri, a);
        if (q > 0) {
            units_bytes(q, d, sizeof d);
            units_time(html_safe_div(q, r->device.bandwidth_Bps), e, sizeof e);
            sbuf_printf(c->b, " Each decode step moves %s (weights, activations and KV); at %s that alone takes %s.", d, b2, e);
        }
        html_put(c, "</div>\n");
    }
    /* compute utilisation */
    {
        double ip = 0, id = 0;
        double up = html_point_has_phase(p, XF_PREFILL) ? gemm_util(r, p, XF_PREFILL, &ip) : 0;
        double ud = html_point_has_phase(p, XF_DECODE) ? gemm_util(r, p, XF_DECODE, &id) : 0;
        int hot = s->share_bound[XF_BOUND_COMPUTE] >= 0.5 || (ud > 0 && ud < 0.1);
        sbuf_printf(c->b, "<div class=\"callout%s\" id=\"r%d-bottleneck-compute\"><b>Compute utilisation</b>:", hot ? " hot" : "", ri);
        if (up > 0) {
            html_fmt_pct(a, sizeof a, up);
            sbuf_printf(c->b, " prefill GEMMs use %s of the peak FLOP/s (intensity %.0f FLOP/B);", a, ip);
        }
        if (ud > 0) {
            html_fmt_pct(a, sizeof a, ud);
            sbuf_printf(c->b, " decode GEMMs use %s (intensity %.1f FLOP/B, about the batch of %lld)%s", a, id,
                        (long long)p->wl.batch, ud < 0.1 ? ": the compute units mostly wait for memory." : ".");
        }
        html_put(c, "</div>\n");
    }
    /* KV memory */
    if (p->memory.kv_bytes > 0) {
        double cap = p->memory.capacity_bytes;
        agg ag[XF_PHASE_COUNT][OP_KIND_COUNT];
        rollup_by_kind(p, ag);
        double dec = 0;
        for (int k = 0; k < OP_KIND_COUNT; k++) dec += ag[XF_DECODE][k].time_s;
        double att = html_safe_div(ag[XF_DECODE][OP_ATTENTION].time_s, dec);
        int hot = html_safe_div(p->memory.kv_bytes, cap) >= 0.2 || att >= 0.2;
        units_bytes(p->memory.kv_bytes, a, sizeof a);
        html_fmt_pct(b2, sizeof b2, html_safe_div(p->memory.kv_bytes, cap));
        sbuf_printf(c->b, "<div class=\"callout%s\" id=\"r%d-bottleneck-kv\"><b>KV memory</b>: the KV cache of %lld &times; %lld "
                    "tokens takes %s", hot ? " hot" : "", ri, (long long)p->wl.batch, (long long)(p->wl.prompt + p->wl.gen), a);
        if (cap > 0) sbuf_printf(c->b, " (%s of device memory)", b2);
        html_put(c, ".");
        if (p->summary.max_batch > 0) sbuf_printf(c->b, " At most %lld sequences fit.", (long long)p->summary.max_batch);
        if (dec > 0) {
            html_fmt_pct(d, sizeof d, att);
            sbuf_printf(c->b, " Attention, which reads the whole KV of each sequence, takes %s of a decode step.", d);
        }
        html_put(c, "</div>\n");
    }
    html_put(c, "</div>\n");
    html_section_close(c);
}
