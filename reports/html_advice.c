/* The HTML report's advice and environment sections. */
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

void html_advice(html_ctx *c, const record *r, int ri) {
    html_section_open(c, ri, "advice", "Advice");
    html_put(c, "<ol class=\"advice\">\n");
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
        html_put(c, "<li><b>");
        html_esc(c, title);
        html_put(c, "</b> <span class=\"hint\">(");
        html_esc(c, kind);
        if (r->n_points > 1) sbuf_printf(c->b, ", point %d", a->point + 1);
        html_put(c, ")</span><br>");
        html_esc(c, ev);
        html_put(c, "<br><b>Do:</b> ");
        html_esc(c, act);
        if (metric[0]) {
            char b1[48], b2[48], sh[32];
            fmt_metric(b1, sizeof b1, metric, a->before);
            fmt_metric(b2, sizeof b2, metric, a->after);
            html_fmt_pct(sh, sizeof sh, a->score);
            html_put(c, "<br><b>Predicted:</b> ");
            html_esc(c, metric);
            sbuf_printf(c->b, " %s &rarr; %s (score %s)", b1, b2, sh);
        }
        html_put(c, "</li>\n");
    }
    html_put(c, "</ol>\n");
    html_section_close(c);
}

/* ------------------------------------------------------------------------------------------
 * Environment. */

void html_env(html_ctx *c, const record *r, int ri) {
    html_section_open(c, ri, "env", "Environment");
    html_put(c, "<table class=\"kv\">\n");
    html_kv_row(c, "record kind", r->kind);
    html_kv_row(c, "created", r->created);
    html_kv_row(c, "xfprof", r->tool_version);
    for (int i = 0; i < r->n_env && i < RECORD_MAX_ENV; i++) {
        char k[sizeof r->env[i].key + 1], v[sizeof r->env[i].value + 1];
        memcpy(k, r->env[i].key, sizeof r->env[i].key);
        k[sizeof r->env[i].key] = '\0';
        memcpy(v, r->env[i].value, sizeof r->env[i].value);
        v[sizeof r->env[i].value] = '\0';
        html_kv_row(c, k, v);
    }
    html_put(c, "</table>\n");
    html_section_close(c);
}
