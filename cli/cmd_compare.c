/* xfprof compare: the regression gate. BASE NEW compares two records (points matched by workload,
 * ops by (phase, layer, op); measured figures through the U test and a bootstrap CI over the
 * repetitions, deterministic figures exactly); --ab runs two builds interleaved and compares the
 * rounds (paired); --calibrate runs one build against itself to measure the noise. Headline metrics
 * (TTFT, TPOT, tokens/s) decide; every verdict names its method. Exit 0 no regression,
 * 1 regression, 2 bad input. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analyzers/compare.h"
#include "args.h"
#include "compare_ab.h"
#include "signals.h"
#include "cli.h"
#include "core/fileio.h"
#include "core/json_util.h"
#include "reports/record_json.h"
#include "reports/render_text.h"
#include "reports/sbuf.h"

static const char *CMD = "compare";

static void help(void) {
    printf("Usage: xfprof compare BASE NEW [options]\n"
           "       xfprof compare --ab BASE_XFPROF NEW_XFPROF [options] -- run|sweep [their options]\n"
           "       xfprof compare --calibrate XFPROF [options] -- run|sweep [their options]\n\n"
           "The regression gate. TTFT, TPOT and tokens/s decide (the per-op times explain them, with the\n"
           "family-wise error controlled by Holm's method; with --ab / --calibrate the steps' CPU time decides,\n"
           "cpu_ttft and cpu_tpot, and the wall-clock ones explain too); when no headline metric is compared,\n"
           "the per-op times decide. A measured item is a regression when the confidence interval (level 1 - alpha) of its\n"
           "change lies wholly beyond the threshold, and for per-op items also its Holm-adjusted p < alpha;\n"
           "deterministic figures (predicted times, FLOPs, bytes) are compared exactly. Every row names its method:\n"
           "  paired    --ab: the builds run alternately, round after round (ABAB..., the order drawn at random\n"
           "            per round), each round's medians give a paired ratio; Wilcoxon signed-rank test on the log\n"
           "            ratios, bootstrap CI of their Hodges-Lehmann estimate over the rounds. A drift of the\n"
           "            machine moves both alike.\n"
           "  u-test    two records: Mann-Whitney U on the repetitions, bootstrap CI of the median ratio over the\n"
           "            repetitions. One run per side cannot see the drift between runs: prefer --ab.\n"
           "  exact     deterministic figures: any change beyond --exact-threshold.\n\n"
           "  --metric LIST        time, tokens_per_s, ttft, tpot, bytes, flops, instructions, cpu_ttft, cpu_tpot\n"
           "                       (comma list; default time,ttft,tpot,tokens_per_s; --ab and --calibrate add\n"
           "                       cpu_ttft,cpu_tpot, which then decide while the wall-clock ttft, tpot and\n"
           "                       tokens_per_s are shown as explanation). cpu_ttft / cpu_tpot: the step's\n"
           "                       CPU time (with --threads 1 its thread's, else the process's), which does\n"
           "                       not grow while other jobs hold the CPUs.\n"
           "                       instructions: per-op counts, compared exactly (beyond --exact-threshold):\n"
           "                       from run --callgrind (identical run to run) or the perf_event probe (they\n"
           "                       vary a little: give 1%%); counts of the two kinds are refused together\n"
           "  --alpha A            family-wise significance level and 1 - the CI level (default 0.05)\n"
           "  --threshold T        relative change that counts for measured figures: 5%% or 0.05 (default 5%%;\n"
           "                       3%% with --ab / --calibrate, whose paired CPU step times are tighter)\n"
           "  --exact-threshold T  the same for deterministic figures (default 0: any change counts)\n"
           "  --ab                 BASE and NEW are two xfprof builds: run the command after -- with each,\n"
           "                       interleaved, and compare the rounds\n"
           "  --calibrate          one build against itself (A/A): measures this machine's run-to-run spread\n"
           "                       and prints the smallest slowdown the gate detects with these rounds\n"
           "  --rounds N           --ab / --calibrate: rounds, one run of each side per round (default 20, 5 to 1000)\n"
           "  --seed N             --ab / --calibrate: seed of the order within rounds (default: from the clock)\n"
           "  --keep DIR           --ab / --calibrate: keep every run's record and stderr in DIR\n"
           "  --force              compare records of different models, devices or workloads (what matches)\n"
           "  --all                table/md: list unchanged items too\n"
           "  --format F           table (default), json or md (a summary for a pull-request comment)\n"
           "  -o, --output FILE    write there instead of stdout\n\n"
           "Records of different models, devices or workloads are refused (naming what differs) unless --force;\n"
           "so is a measured record whose op lacks its samples. --ab refuses a build that is not xfprof and stops\n"
           "when one side's run fails, quoting its error. Fewer than 5 samples per side: a warning.\n\n"
           "Exit status: 0 no regression, 1 regression, 2 bad arguments, bad records or a failing run, 4 I/O error.\n"
           "Examples: xfprof compare base.json new.json --metric time,tpot --threshold 10%%\n"
           "          xfprof compare --ab base/xfprof pr/xfprof -- run --model stories15m --prompt 16 --gen 8 --reps 3\n");
}

/* "5%" -> 0.05, "0.05" -> 0.05. */
static xf_status parse_fraction(const char *flag, const char *s, double *out) {
    char buf[64];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof buf) return xf_errorf(XF_EINVAL, "%s needs a value like 5%% or 0.05", flag);
    memcpy(buf, s, n + 1);
    int pct = buf[n - 1] == '%';
    if (pct) buf[n - 1] = '\0';
    double v;
    xf_status st = args_double(flag, buf, 0, pct ? 1e6 : 1e4, &v);
    if (st) return st;
    *out = pct ? v / 100 : v;
    return XF_OK;
}

static const char *fmt_value(compare_metric m, double v, char *buf, size_t len) {
    if (!isfinite(v)) snprintf(buf, len, "-");
    else if (m == CMP_BYTES) render_bytes(v, buf, len);
    else if (m == CMP_FLOPS || m == CMP_INSTRUCTIONS) render_si(v, "", buf, len);
    else if (m == CMP_TOKENS_PER_S) snprintf(buf, len, "%.1f", v);
    else render_time(v, buf, len);
    return buf;
}

static const char *item_what(const compare_item *it, char *buf, size_t len) {
    if (!it->is_op) snprintf(buf, len, "%s", "(point)");
    else if (it->layer >= 0) snprintf(buf, len, "%s L%d %s", phase_name(it->phase), it->layer, op_kind_name(it->kind));
    else snprintf(buf, len, "%s %s", phase_name(it->phase), op_kind_name(it->kind));
    return buf;
}

static const char *fmt_p(const compare_item *it, char *buf, size_t len) {
    if (it->method == CMP_METHOD_EXACT) snprintf(buf, len, "exact");
    else if (!it->tested) snprintf(buf, len, "-");
    else snprintf(buf, len, "%.3g%s", isnan(it->p_adj) ? it->p : it->p_adj, it->few_samples ? "*" : "");
    return buf;
}

static const char *fmt_change(double c, char *buf, size_t len) {
    if (!isfinite(c)) snprintf(buf, len, c > 0 ? "+inf" : "-inf");
    else snprintf(buf, len, "%+.1f%%", 100 * c);
    return buf;
}

static const char *fmt_ci(const compare_item *it, char *buf, size_t len) {
    if (isnan(it->ci_lo) || isnan(it->ci_hi)) snprintf(buf, len, "-");
    else snprintf(buf, len, "[%+.1f%%,%+.1f%%]", 100 * it->ci_lo, 100 * it->ci_hi);
    return buf;
}

/* Items to list: regressions, then improvements, then (with --all) the rest. */
static int listed(const compare_item *it, int pass, int all) {
    return (pass == 0 && it->verdict == CMP_REGRESSION) || (pass == 1 && it->verdict == CMP_IMPROVEMENT) ||
           (pass == 2 && all && it->verdict == CMP_UNCHANGED);
}

#define MAX_ROWS 200

/* What an A/B or calibration run adds to the output. */
typedef struct ab_info {
    int calibrate;
    int rounds;
    uint64_t seed;
    const char *order;
    double wall_s;
} ab_info;

static const char *item_name(const compare_item *it) { return it->is_op ? op_kind_name(it->kind) : compare_metric_name(it->metric); }

/* "tpot, tokens_per_s" of the regressed items with gate == want_gate, each name once. */
static void name_regressions(sbuf *b, const compare_result *c, int want_gate) {
    int named = 0;
    for (int64_t i = 0; i < c->n_items && named < 12; i++) {
        const compare_item *it = &c->items[i];
        if (it->verdict != CMP_REGRESSION || it->gate != want_gate) continue;
        int dup = 0;
        for (int64_t k = 0; k < i && !dup; k++) {
            const compare_item *q = &c->items[k];
            dup = q->verdict == CMP_REGRESSION && q->gate == want_gate && strcmp(item_name(q), item_name(it)) == 0;
        }
        if (dup) continue;
        sbuf_printf(b, "%s %s", named ? "," : "", item_name(it));
        named++;
    }
}

/* The methods behind the listed verdicts, once each, with what they mean. */
static void legend(sbuf *b, const compare_result *c, const char *bullet) {
    int used[CMP_METHOD_UNTESTED + 1] = {0};
    for (int64_t i = 0; i < c->n_items; i++) used[c->items[i].method] = 1;
    for (int m = 0; m <= CMP_METHOD_UNTESTED; m++)
        if (used[m]) sbuf_printf(b, "%s%s: %s\n", bullet, compare_method_name((compare_method)m), compare_method_desc((compare_method)m));
}

/* The noise the paired rounds measured, per headline item, and what it lets the gate see. */
static void noise_lines(sbuf *b, const compare_result *c, const compare_options *o, const char *bullet) {
    for (int64_t i = 0; i < c->n_items; i++) {
        const compare_item *it = &c->items[i];
        if (it->is_op || it->method != CMP_METHOD_PAIRED) continue;
        sbuf_printf(b, "%spoint %d %s: run-to-run spread %.2f%% (sd of the per-round log ratios), change %+.2f%% CI [%+.2f%%, %+.2f%%]; "
                       "smallest slowdown caught in 80%% of gates with %d rounds at threshold %.1f%%: %.1f%%\n",
                    bullet, it->base_point + 1, compare_metric_name(it->metric), 100 * it->sd_log, 100 * it->change, 100 * it->ci_lo,
                    100 * it->ci_hi, it->n_rounds, 100 * o->threshold, 100 * it->detectable);
    }
}

static void render_table(sbuf *b, const record *x, const record *y, const char *bp, const char *np, const compare_result *c,
                         const compare_options *o, int all, const ab_info *ab) {
    if (ab)
        sbuf_printf(b, "%s: %d rounds in %.0f s, order %s (A: BASE first, B: NEW first; --seed %llu)\n",
                    ab->calibrate ? "calibration (A/A, one build against itself)" : "interleaved A/B", ab->rounds, ab->wall_s,
                    ab->order, (unsigned long long)ab->seed);
    sbuf_printf(b, "BASE %s: %s, %s on %s, %d points\nNEW  %s: %s, %s on %s, %d points\n", bp, x->kind, x->model.name,
                x->device.name, x->n_points, np, y->kind, y->model.name, y->device.name, y->n_points);
    sbuf_printf(b, "measured: regression when the %g%% CI of the change lies beyond %.1f%% (per-op items also Holm-adjusted p < %g); "
                   "deterministic: exact, threshold %.1f%%\n",
                100 * (1 - o->alpha), 100 * o->threshold, o->alpha, 100 * o->exact_threshold);
    sbuf_printf(b, "decided by: %s\n\n",
                !c->headline_gate ? "the items compared (no measured headline metric)"
                : o->explain      ? "the CPU step times cpu_ttft / cpu_tpot (wall-clock TTFT / TPOT / tokens/s and per-op times explain)"
                                  : "TTFT / TPOT / tokens/s (per-op times explain)");
    int64_t shown = 0, hidden = 0;
    sbuf_printf(b, "%-5s %-24s %-12s %10s %10s %7s %8s %-17s %9s %-8s %s\n", "point", "op", "metric", "base", "new", "ratio",
                "change", "CI", "p(adj)", "method", "verdict");
    for (int pass = 0; pass < 3; pass++)
        for (int64_t i = 0; i < c->n_items; i++) {
            const compare_item *it = &c->items[i];
            if (!listed(it, pass, all)) continue;
            if (shown == MAX_ROWS && !all) {
                hidden++;
                continue;
            }
            char w[64], v1[24], v2[24], p[24], ch[24], ci[48];
            sbuf_printf(b, "%-5d %-24s %-12s %10s %10s %7.3f %8s %-17s %9s %-8s %s%s\n", it->base_point + 1,
                        item_what(it, w, sizeof w), compare_metric_name(it->metric), fmt_value(it->metric, it->base, v1, sizeof v1),
                        fmt_value(it->metric, it->new_, v2, sizeof v2), it->ratio, fmt_change(it->change, ch, sizeof ch),
                        fmt_ci(it, ci, sizeof ci), fmt_p(it, p, sizeof p), compare_method_name(it->method),
                        it->verdict == CMP_REGRESSION ? "REGRESSION" : compare_verdict_name(it->verdict),
                        it->verdict != CMP_UNCHANGED && !it->gate ? " (explains)" : "");
            shown++;
        }
    if (hidden) sbuf_printf(b, "... and %lld more changed items (--format json lists them all)\n", (long long)hidden);
    int few = 0;
    for (int64_t i = 0; i < c->n_items; i++) /* a listed row carries the star */
        few |= c->items[i].few_samples && (all || c->items[i].verdict != CMP_UNCHANGED);
    if (few) sbuf_printf(b, "(p*: fewer than %d samples on a side: the test has little power)\n", o->min_samples);
    if (shown == 0) sbuf_printf(b, "(no item changed)\n");
    int64_t unchanged = c->n_items - c->n_regressions - c->n_improvements;
    sbuf_printf(b, "\n%lld items compared over %d matched points: %lld regressions, %lld improvements, %lld unchanged\n",
                (long long)c->n_items, c->n_points_matched, (long long)c->n_regressions, (long long)c->n_improvements,
                (long long)unchanged);
    if (c->n_items) {
        sbuf_printf(b, "methods:\n");
        legend(b, c, "  - ");
    }
    if (c->n_rounds) {
        sbuf_printf(b, "noise (measured by these rounds):\n");
        noise_lines(b, c, o, "  - ");
    }
    if (c->n_notes) sbuf_printf(b, "notes:\n");
    for (int i = 0; i < c->n_notes; i++) sbuf_printf(b, "  - %s\n", c->notes[i]);
    if (c->notes_dropped) sbuf_printf(b, "  - (%d more notes)\n", c->notes_dropped);
    int64_t explaining = c->n_regressions - c->n_gate_regressions;
    if (c->n_gate_regressions) {
        /* Name the regressed items once each, so a CI log says what got slower at a glance. */
        sbuf_printf(b, "verdict: REGRESSION in");
        name_regressions(b, c, 1);
        if (explaining) {
            sbuf_printf(b, " (slower ops:");
            name_regressions(b, c, 0);
            sbuf_printf(b, ")");
        }
        sbuf_printf(b, "\n");
    } else {
        sbuf_printf(b, "verdict: no regression");
        if (explaining) {
            sbuf_printf(b, " (slower ops within the headline threshold:");
            name_regressions(b, c, 0);
            sbuf_printf(b, ")");
        }
        sbuf_printf(b, "\n");
    }
}

static void md_cell(sbuf *b, const char *s) {
    for (const char *ch = s; *ch; ch++) {
        if (strchr("|*_`<>[]\\#", *ch)) sbuf_putn(b, "\\", 1);
        sbuf_putn(b, ch, 1);
    }
}

static void render_md(sbuf *b, const record *x, const compare_result *c, const compare_options *o, int all, const ab_info *ab) {
    sbuf_printf(b, "### xfprof compare: %s\n\n", c->n_gate_regressions ? "regression" : "no regression");
    sbuf_puts(b, "Model ");
    md_cell(b, x->model.name);
    sbuf_puts(b, " on ");
    md_cell(b, x->device.name);
    sbuf_printf(b, "; %lld items over %d points: **%lld regressions** (%lld deciding), %lld improvements. A measured item regresses "
                   "when its %g%% CI lies beyond %.1f%% (per-op items also Holm-adjusted p < %g); deterministic figures exact.",
                (long long)c->n_items, c->n_points_matched, (long long)c->n_regressions, (long long)c->n_gate_regressions,
                (long long)c->n_improvements, 100 * (1 - o->alpha), 100 * o->threshold, o->alpha);
    if (ab) sbuf_printf(b, " %s over %d rounds in %.0f s.", ab->calibrate ? "A/A calibration" : "Interleaved A/B", ab->rounds, ab->wall_s);
    sbuf_puts(b, "\n\n");
    if (c->n_regressions + c->n_improvements > 0 || all) {
        sbuf_puts(b, "| point | op | metric | base | new | change | CI | p (adj) | method | verdict |\n"
                     "|---:|---|---|---:|---:|---:|---|---:|---|---|\n");
        int64_t shown = 0;
        for (int pass = 0; pass < 3; pass++)
            for (int64_t i = 0; i < c->n_items && shown < MAX_ROWS; i++) {
                const compare_item *it = &c->items[i];
                if (!listed(it, pass, all)) continue;
                char w[64], v1[24], v2[24], p[24], ch[24], ci[48];
                sbuf_printf(b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s%s |\n", it->base_point + 1, item_what(it, w, sizeof w),
                            compare_metric_name(it->metric), fmt_value(it->metric, it->base, v1, sizeof v1),
                            fmt_value(it->metric, it->new_, v2, sizeof v2), fmt_change(it->change, ch, sizeof ch),
                            fmt_ci(it, ci, sizeof ci), fmt_p(it, p, sizeof p), compare_method_name(it->method),
                            it->verdict == CMP_REGRESSION ? "**regression**" : compare_verdict_name(it->verdict),
                            it->verdict != CMP_UNCHANGED && !it->gate ? " (explains)" : "");
                shown++;
            }
    }
    sbuf_puts(b, "\nMethods:\n\n");
    legend(b, c, "- ");
    if (c->n_rounds) {
        sbuf_puts(b, "\nNoise measured by these rounds:\n\n");
        noise_lines(b, c, o, "- ");
    }
    if (c->n_notes) {
        sbuf_puts(b, "\n<details><summary>notes</summary>\n\n");
        for (int i = 0; i < c->n_notes; i++) {
            sbuf_puts(b, "- ");
            md_cell(b, c->notes[i]);
            sbuf_puts(b, "\n");
        }
        sbuf_puts(b, "\n</details>\n");
    }
}

static char *render_json(const char *bp, const char *np, const compare_result *c, const compare_options *o, const ab_info *ab) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    int ok = cJSON_AddStringToObject(root, "format", "xfprof-compare") != NULL && json_add_number(root, "version", 1) &&
             cJSON_AddStringToObject(root, "base", bp) != NULL && cJSON_AddStringToObject(root, "new", np) != NULL &&
             json_add_number(root, "alpha", o->alpha) && json_add_number(root, "threshold", o->threshold) &&
             json_add_number(root, "exact_threshold", o->exact_threshold) && cJSON_AddBoolToObject(root, "forced", o->force) &&
             json_add_number(root, "points_matched", c->n_points_matched) &&
             json_add_number(root, "regressions", (double)c->n_regressions) &&
             json_add_number(root, "gate_regressions", (double)c->n_gate_regressions) &&
             json_add_number(root, "improvements", (double)c->n_improvements) &&
             cJSON_AddStringToObject(root, "decided_by", c->headline_gate ? "headline" : "items") != NULL &&
             json_add_number(root, "rounds", c->n_rounds) &&
             cJSON_AddStringToObject(root, "verdict", c->n_gate_regressions ? "regression" : "pass") != NULL;
    if (ok && ab)
        ok = cJSON_AddStringToObject(root, "mode", ab->calibrate ? "calibrate" : "ab") != NULL &&
             cJSON_AddStringToObject(root, "order", ab->order) != NULL && json_add_number(root, "seed", (double)ab->seed) &&
             json_add_number(root, "wall_s", ab->wall_s);
    cJSON *notes = ok ? cJSON_AddArrayToObject(root, "notes") : NULL;
    ok = ok && notes;
    for (int i = 0; ok && i < c->n_notes; i++) {
        cJSON *s = cJSON_CreateString(c->notes[i]);
        ok = s && cJSON_AddItemToArray(notes, s);
    }
    cJSON *items = ok ? cJSON_AddArrayToObject(root, "items") : NULL;
    ok = ok && items;
    for (int64_t i = 0; ok && i < c->n_items; i++) {
        const compare_item *it = &c->items[i];
        cJSON *e = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(items, e);
        if (!ok) break;
        ok = json_add_number(e, "base_point", it->base_point) && json_add_number(e, "new_point", it->new_point) &&
             cJSON_AddStringToObject(e, "metric", compare_metric_name(it->metric)) != NULL;
        if (ok && it->is_op)
            ok = cJSON_AddStringToObject(e, "phase", phase_name(it->phase)) != NULL && json_add_number(e, "layer", it->layer) &&
                 cJSON_AddStringToObject(e, "op", op_kind_name(it->kind)) != NULL;
        ok = ok && json_add_number(e, "base", it->base) && json_add_number(e, "new", it->new_) &&
             json_add_number(e, "ratio", it->ratio) && json_add_number(e, "change", it->change) &&
             cJSON_AddBoolToObject(e, "tested", it->tested) != NULL && json_add_number(e, "p", it->p) &&
             json_add_number(e, "p_adjusted", it->p_adj) && json_add_number(e, "ci_low", it->ci_lo) &&
             json_add_number(e, "ci_high", it->ci_hi) && cJSON_AddStringToObject(e, "method", compare_method_name(it->method)) != NULL &&
             cJSON_AddBoolToObject(e, "gate", it->gate) != NULL && json_add_number(e, "n_base", it->n_base) &&
             json_add_number(e, "n_new", it->n_new) && cJSON_AddBoolToObject(e, "few_samples", it->few_samples) != NULL &&
             cJSON_AddStringToObject(e, "verdict", compare_verdict_name(it->verdict)) != NULL;
        if (ok && it->method == CMP_METHOD_PAIRED)
            ok = json_add_number(e, "rounds", it->n_rounds) && json_add_number(e, "sd_log", it->sd_log) &&
                 (it->is_op || json_add_number(e, "detectable", it->detectable));
    }
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    return text;
}

static int load(const char *which, const char *path, record *r) {
    xf_status s = record_load(path, r);
    if (s == XF_OK && r->ops_left_out > 0) /* a big record read in a stream: compare goes op by op */
        s = xf_errorf(XF_EINVAL,
                      "%s is larger than 64 MiB and was read in a stream, which keeps the ops of only %d of its %d points; "
                      "compare goes op by op: split the sweep into records below 64 MiB",
                      path, r->n_points - (int)r->ops_left_out, r->n_points);
    if (s == XF_OK) return 0;
    fprintf(stderr, "xfprof %s: %s record refused: %s\n", CMD, which, xf_error_msg());
    return s == XF_ENOMEM ? CLI_EXIT_FAILURE : CLI_EXIT_USAGE; /* missing, truncated, other format: bad input */
}

/* Renders the comparison and writes it; returns the exit status. */
static int emit(const record *x, const record *y, const char *bp, const char *np, compare_result *res, const compare_options *o,
                render_format fmt, int all, const char *out_path, const ab_info *ab) {
    char *text = NULL;
    xf_status s = XF_OK;
    if (fmt == RENDER_JSON) {
        text = render_json(bp, np, res, o, ab);
        if (!text) s = xf_errorf(XF_ENOMEM, "out of memory writing the comparison");
    } else {
        sbuf b;
        sbuf_init(&b);
        if (fmt == RENDER_MD) render_md(&b, x, res, o, all, ab);
        else render_table(&b, x, y, bp, np, res, o, all, ab);
        s = sbuf_status(&b);
        text = s ? NULL : sbuf_take(&b);
        sbuf_free(&b);
    }
    if (s == XF_OK) s = file_write_atomic(out_path, text, strlen(text));
    free(text);
    /* The notes matter in CI logs even when the table goes to a file. */
    if (s == XF_OK && out_path && strcmp(out_path, "-") != 0)
        for (int i = 0; i < res->n_notes; i++) fprintf(stderr, "xfprof %s: note: %s\n", CMD, res->notes[i]);
    if (s) return cli_fail(CMD, s);
    return res->n_gate_regressions ? CLI_EXIT_REGRESSION : CLI_EXIT_OK;
}

/* Round 1's records must be comparable (the same workloads and ops) before more rounds run. */
static xf_status check_first_round(const record *base, const record *new_, void *ctx) {
    compare_result r;
    xf_status s = compare_records(base, new_, (const compare_options *)ctx, &r);
    compare_result_free(&r);
    return s ? xf_error_prefix(s, "round 1: ") : XF_OK;
}

/* --ab / --calibrate: run the rounds, compare them. */
static int compare_ab_main(ab_plan *plan, int calibrate, const compare_options *o, render_format fmt, int all,
                           const char *out_path) {
    cli_signals_install();
    plan->check_first = check_first_round;
    plan->check_ctx = (void *)o;
    ab_rounds ab;
    xf_status s = ab_run(plan, &ab);
    if (s) {
        fprintf(stderr, "xfprof %s: %s\n", CMD, xf_error_msg());
        int sig = cli_signal_pending();
        return sig ? 128 + sig : cli_exit_code(s);
    }
    compare_result res;
    s = compare_rounds(ab.base, ab.new_, ab.n, o, &res);
    if (s) {
        fprintf(stderr, "xfprof %s: %s\n", CMD, xf_error_msg());
        ab_rounds_free(&ab);
        return cli_exit_code(s);
    }
    ab_info info = {calibrate, ab.n, plan->seed, ab.order, ab.wall_s};
    int rc = emit(&ab.base[0], &ab.new_[0], plan->bin[0], plan->bin[1], &res, o, fmt, all, out_path, &info);
    if (calibrate && rc == CLI_EXIT_REGRESSION)
        fprintf(stderr, "xfprof %s: the build failed against itself: at threshold %.1f%% this machine is too noisy for %d rounds; "
                        "raise --threshold or --rounds (the noise lines above say by how much)\n",
                CMD, 100 * o->threshold, ab.n);
    compare_result_free(&res);
    ab_rounds_free(&ab);
    return rc;
}

int cmd_compare(int argc, char **argv) {
    enum { O_METRIC = 1000, O_ALPHA, O_THR, O_XTHR, O_FORCE, O_ALL, O_FORMAT, O_AB, O_CAL, O_ROUNDS, O_SEED, O_KEEP };
    static const struct option opts[] = {
        {"metric", required_argument, 0, O_METRIC}, {"alpha", required_argument, 0, O_ALPHA},
        {"threshold", required_argument, 0, O_THR}, {"exact-threshold", required_argument, 0, O_XTHR},
        {"force", no_argument, 0, O_FORCE},         {"all", no_argument, 0, O_ALL},
        {"format", required_argument, 0, O_FORMAT}, {"output", required_argument, 0, 'o'},
        {"ab", no_argument, 0, O_AB},               {"calibrate", no_argument, 0, O_CAL},
        {"rounds", required_argument, 0, O_ROUNDS}, {"seed", required_argument, 0, O_SEED},
        {"keep", required_argument, 0, O_KEEP},     {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    compare_options o;
    compare_options_default(&o);
    o.metrics = (1u << CMP_TIME) | (1u << CMP_TTFT) | (1u << CMP_TPOT) | (1u << CMP_TOKENS_PER_S);
    render_format fmt = RENDER_TABLE;
    const char *out_path = NULL, *keep = NULL;
    int all = 0, c, ab = 0, calibrate = 0, seed_given = 0, rounds_given = 0, metric_given = 0, threshold_given = 0;
    int64_t rounds = 20, seed = 0;
    /* Everything after the first "--" is the command the builds run (--ab, --calibrate). */
    int dd = argc;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) {
            dd = i;
            break;
        }
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(dd, argv, ":ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'h': help(); return CLI_EXIT_OK;
        case O_METRIC:
            if (compare_metrics_parse(optarg, &o.metrics)) return cli_usage_error(CMD, "%s", xf_error_msg());
            metric_given = 1;
            break;
        case O_ALPHA:
            if (args_double("--alpha", optarg, 1e-12, 0.5, &o.alpha)) return cli_usage_error(CMD, "%s", xf_error_msg());
            break;
        case O_THR:
            if (parse_fraction("--threshold", optarg, &o.threshold)) return cli_usage_error(CMD, "%s", xf_error_msg());
            threshold_given = 1;
            break;
        case O_XTHR:
            if (parse_fraction("--exact-threshold", optarg, &o.exact_threshold)) return cli_usage_error(CMD, "%s", xf_error_msg());
            break;
        case O_FORCE: o.force = 1; break;
        case O_ALL: all = 1; break;
        case O_AB: ab = 1; break;
        case O_CAL: calibrate = 1; break;
        case O_ROUNDS:
            if (args_int("--rounds", optarg, COMPARE_MIN_ROUNDS, 1000, &rounds)) return cli_usage_error(CMD, "%s", xf_error_msg());
            rounds_given = 1;
            break;
        case O_SEED:
            if (args_int("--seed", optarg, 0, (int64_t)1 << 53, &seed)) return cli_usage_error(CMD, "%s", xf_error_msg());
            seed_given = 1;
            break;
        case O_KEEP: keep = optarg; break;
        case O_FORMAT:
            if (render_format_parse(optarg, &fmt) || fmt == RENDER_CSV)
                return cli_usage_error(CMD, "--format: '%s' is not one of table, json, md", optarg);
            break;
        case 'o': out_path = optarg; break;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (ab && calibrate) return cli_usage_error(CMD, "--ab and --calibrate are two modes: give one");
    if ((ab || calibrate) && !metric_given) {
        /* The CPU step times decide (a busy machine moves them little: docs/ci.md measured a
         * per-round spread of ~4% against ~26% for the wall times); the wall-clock TTFT, TPOT and
         * tokens/s are shown, tested, and explain. */
        o.metrics |= (1u << CMP_CPU_TTFT) | (1u << CMP_CPU_TPOT);
        o.explain = (1u << CMP_TTFT) | (1u << CMP_TPOT) | (1u << CMP_TOKENS_PER_S);
    }
    /* 3% with the paired rounds: with the CPU step times' measured spread (s ~ 5% per round on a busy
     * machine) 20 rounds put a 10% slowdown's 95% interval beyond 3% in ~99.9% of gates (beyond 5%:
     * ~97%, too close to the 95% target); an A/A interval reaches 3% in well under 1 in 20. */
    if ((ab || calibrate) && !threshold_given) o.threshold = 0.03;
    if (ab || calibrate) {
        int want = ab ? 2 : 1;
        if (dd - optind != want)
            return cli_usage_error(CMD, ab ? "--ab needs two xfprof builds: xfprof compare --ab BASE_XFPROF NEW_XFPROF -- run ..."
                                           : "--calibrate needs one xfprof build: xfprof compare --calibrate XFPROF -- run ...");
        if (dd >= argc - 1) return cli_usage_error(CMD, "%s needs the command the builds run after --: -- run --model ...", ab ? "--ab" : "--calibrate");
        if (!seed_given) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            seed = (int64_t)(((uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 20) & (((uint64_t)1 << 53) - 1));
        }
        ab_plan plan = {{argv[optind], argv[ab ? optind + 1 : optind]}, argv + dd + 1, argc - dd - 1, (int)rounds, (uint64_t)seed, keep,
                        NULL, NULL};
        return compare_ab_main(&plan, calibrate, &o, fmt, all, out_path);
    }
    if (dd != argc) return cli_usage_error(CMD, "a command after -- needs --ab or --calibrate");
    if (keep || seed_given || rounds_given) return cli_usage_error(CMD, "--rounds, --seed and --keep go with --ab or --calibrate");
    if (argc - optind != 2) return cli_usage_error(CMD, "needs two records: xfprof compare BASE NEW");
    const char *bp = argv[optind], *np = argv[optind + 1];
    record x, y;
    int rc = load("BASE", bp, &x);
    if (rc) {
        record_free(&x);
        return rc;
    }
    if ((rc = load("NEW", np, &y))) {
        record_free(&x);
        record_free(&y);
        return rc;
    }
    compare_result res;
    xf_status s = compare_records(&x, &y, &o, &res);
    if (s) {
        record_free(&x);
        record_free(&y);
        fprintf(stderr, "xfprof %s: %s\n", CMD, xf_error_msg());
        return cli_exit_code(s);
    }
    rc = emit(&x, &y, bp, np, &res, &o, fmt, all, out_path, NULL);
    compare_result_free(&res);
    record_free(&x);
    record_free(&y);
    return rc;
}
