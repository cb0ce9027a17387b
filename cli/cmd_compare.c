/* xfprof compare BASE NEW: the regression gate. Points matched by workload, ops by (phase, layer,
 * op); measured times through a two-sided Mann-Whitney U test on the raw samples, deterministic
 * figures exactly. Exit 0 no regression, 1 regression, 2 bad input. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "analyzers/compare.h"
#include "args.h"
#include "cli.h"
#include "core/fileio.h"
#include "core/json_util.h"
#include "reports/record_json.h"
#include "reports/render_text.h"
#include "reports/sbuf.h"

static const char *CMD = "compare";

static void help(void) {
    printf("Usage: xfprof compare BASE NEW [options]\n\n"
           "Compares two records (predict, run or sweep) point by point and op by op. Measured times are tested\n"
           "with a two-sided Mann-Whitney U test on the raw samples (samples_s); deterministic figures (predicted\n"
           "times, FLOPs, bytes) are compared exactly. A change is a regression when it is significant (p < alpha,\n"
           "or any difference for deterministic figures) and worse than the threshold; improvements likewise.\n\n"
           "  --metric LIST        time (default), tokens_per_s, ttft, tpot, bytes, flops (comma list)\n"
           "  --alpha A            significance level of the U test (default 0.05)\n"
           "  --threshold T        relative change that counts for measured figures: 5%% (default) or 0.05\n"
           "  --exact-threshold T  the same for deterministic figures (default 0: any change counts)\n"
           "  --force              compare records of different models, devices or workloads (what matches)\n"
           "  --all                table/md: list unchanged items too\n"
           "  --format F           table (default), json or md (a summary for a pull-request comment)\n"
           "  -o, --output FILE    write there instead of stdout\n\n"
           "Records of different models, devices or workloads are refused unless --force. A measured record\n"
           "whose op lacks its samples is refused with the op named. Fewer than 5 samples per side: a warning\n"
           "(the U test cannot become significant with 3 samples a side).\n\n"
           "Exit status: 0 no regression, 1 regression, 2 bad arguments or bad records, 4 I/O error.\n"
           "Example: xfprof compare base.json new.json --metric time,tpot --threshold 10%%\n");
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
    else if (m == CMP_FLOPS) render_si(v, "", buf, len);
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
    if (!it->tested) snprintf(buf, len, "exact");
    else snprintf(buf, len, "%.3g%s", it->p, it->few_samples ? "*" : "");
    return buf;
}

static const char *fmt_change(double c, char *buf, size_t len) {
    if (!isfinite(c)) snprintf(buf, len, c > 0 ? "+inf" : "-inf");
    else snprintf(buf, len, "%+.1f%%", 100 * c);
    return buf;
}

/* Items to list: regressions, then improvements, then (with --all) the rest. */
static int listed(const compare_item *it, int pass, int all) {
    return (pass == 0 && it->verdict == CMP_REGRESSION) || (pass == 1 && it->verdict == CMP_IMPROVEMENT) ||
           (pass == 2 && all && it->verdict == CMP_UNCHANGED);
}

#define MAX_ROWS 200

static void render_table(sbuf *b, const record *x, const record *y, const char *bp, const char *np, const compare_result *c,
                         const compare_options *o, int all) {
    sbuf_printf(b, "BASE %s: %s, %s on %s, %d points\nNEW  %s: %s, %s on %s, %d points\n", bp, x->kind, x->model.name,
                x->device.name, x->n_points, np, y->kind, y->model.name, y->device.name, y->n_points);
    sbuf_printf(b, "measured: U test at alpha %g, threshold %.1f%%; deterministic: exact, threshold %.1f%%\n\n", o->alpha,
                100 * o->threshold, 100 * o->exact_threshold);
    int64_t shown = 0, hidden = 0;
    sbuf_printf(b, "%-5s %-24s %-12s %10s %10s %7s %8s %9s  %s\n", "point", "op", "metric", "base", "new", "ratio", "change", "p",
                "verdict");
    for (int pass = 0; pass < 3; pass++)
        for (int64_t i = 0; i < c->n_items; i++) {
            const compare_item *it = &c->items[i];
            if (!listed(it, pass, all)) continue;
            if (shown == MAX_ROWS && !all) {
                hidden++;
                continue;
            }
            char w[64], v1[24], v2[24], p[24], ch[24];
            sbuf_printf(b, "%-5d %-24s %-12s %10s %10s %7.3f %8s %9s  %s\n", it->base_point + 1, item_what(it, w, sizeof w),
                        compare_metric_name(it->metric), fmt_value(it->metric, it->base, v1, sizeof v1),
                        fmt_value(it->metric, it->new_, v2, sizeof v2), it->ratio, fmt_change(it->change, ch, sizeof ch),
                        fmt_p(it, p, sizeof p),
                        it->verdict == CMP_REGRESSION ? "REGRESSION" : compare_verdict_name(it->verdict));
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
    if (c->n_notes) sbuf_printf(b, "notes:\n");
    for (int i = 0; i < c->n_notes; i++) sbuf_printf(b, "  - %s\n", c->notes[i]);
    if (c->notes_dropped) sbuf_printf(b, "  - (%d more notes)\n", c->notes_dropped);
    if (c->n_regressions) {
        /* Name the regressed ops once each, so a CI log says what got slower at a glance. */
        sbuf_printf(b, "verdict: REGRESSION in");
        int named = 0;
        for (int64_t i = 0; i < c->n_items && named < 12; i++) {
            const compare_item *it = &c->items[i];
            if (it->verdict != CMP_REGRESSION) continue;
            const char *nm = it->is_op ? op_kind_name(it->kind) : compare_metric_name(it->metric);
            int dup = 0;
            for (int64_t k = 0; k < i; k++) {
                const compare_item *q = &c->items[k];
                if (q->verdict == CMP_REGRESSION && strcmp(q->is_op ? op_kind_name(q->kind) : compare_metric_name(q->metric), nm) == 0)
                    dup = 1;
            }
            if (dup) continue;
            sbuf_printf(b, "%s %s", named ? "," : "", nm);
            named++;
        }
        sbuf_printf(b, "\n");
    } else {
        sbuf_printf(b, "verdict: no regression\n");
    }
}

static void md_cell(sbuf *b, const char *s) {
    for (const char *ch = s; *ch; ch++) {
        if (strchr("|*_`<>[]\\#", *ch)) sbuf_putn(b, "\\", 1);
        sbuf_putn(b, ch, 1);
    }
}

static void render_md(sbuf *b, const record *x, const compare_result *c, const compare_options *o, int all) {
    sbuf_printf(b, "### xfprof compare: %s\n\n", c->n_regressions ? "regression" : "no regression");
    sbuf_puts(b, "Model ");
    md_cell(b, x->model.name);
    sbuf_puts(b, " on ");
    md_cell(b, x->device.name);
    sbuf_printf(b, "; %lld items over %d points: **%lld regressions**, %lld improvements (U test alpha %g, threshold %.1f%%; "
                   "deterministic figures exact).\n\n",
                (long long)c->n_items, c->n_points_matched, (long long)c->n_regressions, (long long)c->n_improvements, o->alpha,
                100 * o->threshold);
    if (c->n_regressions + c->n_improvements > 0 || all) {
        sbuf_puts(b, "| point | op | metric | base | new | change | p | verdict |\n|---:|---|---|---:|---:|---:|---:|---|\n");
        int64_t shown = 0;
        for (int pass = 0; pass < 3; pass++)
            for (int64_t i = 0; i < c->n_items && shown < MAX_ROWS; i++) {
                const compare_item *it = &c->items[i];
                if (!listed(it, pass, all)) continue;
                char w[64], v1[24], v2[24], p[24], ch[24];
                sbuf_printf(b, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", it->base_point + 1, item_what(it, w, sizeof w),
                            compare_metric_name(it->metric), fmt_value(it->metric, it->base, v1, sizeof v1),
                            fmt_value(it->metric, it->new_, v2, sizeof v2), fmt_change(it->change, ch, sizeof ch),
                            fmt_p(it, p, sizeof p), it->verdict == CMP_REGRESSION ? "**regression**" : compare_verdict_name(it->verdict));
                shown++;
            }
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

static char *render_json(const char *bp, const char *np, const compare_result *c, const compare_options *o) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    int ok = cJSON_AddStringToObject(root, "format", "xfprof-compare") != NULL && json_add_number(root, "version", 1) &&
             cJSON_AddStringToObject(root, "base", bp) != NULL && cJSON_AddStringToObject(root, "new", np) != NULL &&
             json_add_number(root, "alpha", o->alpha) && json_add_number(root, "threshold", o->threshold) &&
             json_add_number(root, "exact_threshold", o->exact_threshold) && cJSON_AddBoolToObject(root, "forced", o->force) &&
             json_add_number(root, "points_matched", c->n_points_matched) &&
             json_add_number(root, "regressions", (double)c->n_regressions) &&
             json_add_number(root, "improvements", (double)c->n_improvements) &&
             cJSON_AddStringToObject(root, "verdict", c->n_regressions ? "regression" : "pass") != NULL;
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
             json_add_number(e, "n_base", it->n_base) && json_add_number(e, "n_new", it->n_new) &&
             cJSON_AddBoolToObject(e, "few_samples", it->few_samples) != NULL &&
             cJSON_AddStringToObject(e, "verdict", compare_verdict_name(it->verdict)) != NULL;
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

int cmd_compare(int argc, char **argv) {
    enum { O_METRIC = 1000, O_ALPHA, O_THR, O_XTHR, O_FORCE, O_ALL, O_FORMAT };
    static const struct option opts[] = {
        {"metric", required_argument, 0, O_METRIC}, {"alpha", required_argument, 0, O_ALPHA},
        {"threshold", required_argument, 0, O_THR}, {"exact-threshold", required_argument, 0, O_XTHR},
        {"force", no_argument, 0, O_FORCE},         {"all", no_argument, 0, O_ALL},
        {"format", required_argument, 0, O_FORMAT}, {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},              {0, 0, 0, 0}};
    compare_options o;
    compare_options_default(&o);
    render_format fmt = RENDER_TABLE;
    const char *out_path = NULL;
    int all = 0, c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'h': help(); return CLI_EXIT_OK;
        case O_METRIC:
            if (compare_metrics_parse(optarg, &o.metrics)) return cli_usage_error(CMD, "%s", xf_error_msg());
            break;
        case O_ALPHA:
            if (args_double("--alpha", optarg, 1e-12, 1, &o.alpha)) return cli_usage_error(CMD, "%s", xf_error_msg());
            break;
        case O_THR:
            if (parse_fraction("--threshold", optarg, &o.threshold)) return cli_usage_error(CMD, "%s", xf_error_msg());
            break;
        case O_XTHR:
            if (parse_fraction("--exact-threshold", optarg, &o.exact_threshold)) return cli_usage_error(CMD, "%s", xf_error_msg());
            break;
        case O_FORCE: o.force = 1; break;
        case O_ALL: all = 1; break;
        case O_FORMAT:
            if (render_format_parse(optarg, &fmt) || fmt == RENDER_CSV)
                return cli_usage_error(CMD, "--format: '%s' is not one of table, json, md", optarg);
            break;
        case 'o': out_path = optarg; break;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
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
    char *text = NULL;
    if (fmt == RENDER_JSON) {
        text = render_json(bp, np, &res, &o);
        if (!text) s = xf_errorf(XF_ENOMEM, "out of memory writing the comparison");
    } else {
        sbuf b;
        sbuf_init(&b);
        if (fmt == RENDER_MD) render_md(&b, &x, &res, &o, all);
        else render_table(&b, &x, &y, bp, np, &res, &o, all);
        s = sbuf_status(&b);
        text = s ? NULL : sbuf_take(&b);
        sbuf_free(&b);
    }
    if (s == XF_OK) s = file_write_atomic(out_path, text, strlen(text));
    free(text);
    /* The notes matter in CI logs even when the table goes to a file. */
    if (s == XF_OK && out_path && strcmp(out_path, "-") != 0)
        for (int i = 0; i < res.n_notes; i++) fprintf(stderr, "xfprof %s: note: %s\n", CMD, res.notes[i]);
    int64_t regressions = res.n_regressions;
    compare_result_free(&res);
    record_free(&x);
    record_free(&y);
    if (s) return cli_fail(CMD, s);
    return regressions ? CLI_EXIT_REGRESSION : CLI_EXIT_OK;
}
