/* Comparing two records (BASE and NEW): points matched by workload and run settings, ops by
 * (phase, layer, op); for each metric the medians, the ratio NEW/BASE, a two-sided Mann-Whitney
 * U test on the raw samples where both sides have them (measured records), and a verdict.
 * Deterministic figures (predicted times, FLOPs, bytes) are compared exactly: no test, any change
 * larger than exact_threshold counts. Pure function of the two records, no I/O. */
#ifndef XF_COMPARE_H
#define XF_COMPARE_H

#include <stdint.h>

#include "core/record.h"

typedef enum compare_metric {
    CMP_TIME = 0,     /* per op: time_s (measured samples_s, or the predicted time) */
    CMP_TOKENS_PER_S, /* per point: end-to-end tokens/s (higher is better) */
    CMP_TTFT,         /* per point: prefill step time */
    CMP_TPOT,         /* per point: decode step time */
    CMP_BYTES,        /* per op: compulsory (or counter) bytes, deterministic */
    CMP_FLOPS,        /* per op: FLOPs, deterministic */
    CMP_INSTRUCTIONS, /* per op: the perf_event probe's retired instructions, where both records counted
                         them; compared exactly (beyond exact_threshold): counts, not times */
    CMP_CPU_TTFT,     /* per point: the prefill step's process CPU time (record_point.cpu_prefill_s) */
    CMP_CPU_TPOT,     /* per point: the decode step's process CPU time (record_point.cpu_decode_s) */
    CMP_METRIC_COUNT
} compare_metric;

const char *compare_metric_name(compare_metric m); /* "time", "tokens_per_s", "ttft", "tpot", "bytes", "flops", "instructions",
                                                      "cpu_ttft", "cpu_tpot" */

/* Parses a comma list of metric names into a bit mask (1 << metric). XF_EINVAL naming the bad one. */
xf_status compare_metrics_parse(const char *s, unsigned *mask);

typedef struct compare_options {
    unsigned metrics;       /* bit mask of (1 << compare_metric); 0 = time only */
    double alpha;           /* significance level (family-wise, Holm) and 1 - the CI level (default 0.05) */
    double threshold;       /* relative change that counts, measured figures (default 0.05 = 5%) */
    double exact_threshold; /* relative change that counts, deterministic figures (default 0: any) */
    int force;              /* 1: compare records of different models, devices or workloads */
    int min_samples;        /* warn when a side has fewer samples (default 5) */
    int n_boot;             /* bootstrap resamples for the confidence intervals (default 2000) */
    uint64_t seed;          /* the bootstrap's seed: the same records give the same intervals */
    unsigned explain;       /* bit mask of headline metrics shown and tested but never deciding (default 0);
                               compare --ab: the wall-clock ttft, tpot, tokens/s when the CPU step times decide */
} compare_options;

void compare_options_default(compare_options *o);

/* Which method made an item's verdict. A measured item is a regression when the confidence
 * interval of its change lies wholly beyond the threshold (and, for per-op items, its
 * Holm-adjusted p < alpha); a deterministic one when it changed beyond exact_threshold. */
typedef enum compare_method {
    CMP_METHOD_EXACT = 0, /* deterministic figure (cost model, FLOPs, bytes): no test */
    CMP_METHOD_U,         /* two records: Mann-Whitney U on the repetitions, bootstrap CI over repetitions */
    CMP_METHOD_PAIRED,    /* interleaved A/B rounds: signed-rank test on per-round log ratios, bootstrap CI over rounds */
    CMP_METHOD_UNTESTED   /* measured but without per-repetition samples: shown, never a verdict */
} compare_method;
const char *compare_method_name(compare_method m); /* "exact", "u-test", "paired", "untested" */
/* One sentence saying how the method decides, for the output's legend. */
const char *compare_method_desc(compare_method m);

typedef enum compare_verdict { CMP_UNCHANGED = 0, CMP_REGRESSION, CMP_IMPROVEMENT } compare_verdict;
const char *compare_verdict_name(compare_verdict v); /* "unchanged", "regression", "improvement" */

typedef struct compare_item {
    int base_point, new_point; /* point indexes in BASE and NEW */
    int is_op;                 /* 1: an op's metric; 0: a point's (ttft, tpot, tokens_per_s) */
    xf_phase phase;            /* is_op only */
    int layer;                 /* is_op only; -1 outside the layers */
    op_kind kind;              /* is_op only */
    compare_metric metric;
    double base, new_;         /* medians (measured) or the figures (deterministic) */
    double ratio;              /* new_ / base (inf when base is 0 and new_ is not; 1 when both 0) */
    double change;             /* signed relative change, oriented so > 0 is worse */
    int tested;                /* 1: U test on samples; 0: exact comparison (p is NaN) */
    double p;                  /* two-sided p of the U test; NaN when not tested */
    int n_base, n_new;         /* samples on each side (0 for deterministic figures) */
    int few_samples;           /* 1: a side has fewer than min_samples samples */
    compare_verdict verdict;
    compare_method method;     /* what made the verdict */
    double p_adj;              /* Holm-adjusted p within its family (per-op items; headline items); NaN untested */
    double ci_lo, ci_hi;       /* confidence interval (level 1 - alpha) of `change`; NaN when none */
    int gate;                  /* 1: this item decides the exit status (see compare_result.headline_gate) */
    int n_rounds;              /* paired: the rounds; 0 otherwise */
    double sd_log;             /* paired: standard deviation of the per-round log ratios (the noise) */
    double detectable;         /* paired: smallest slowdown caught with 80% power at these rounds (NaN else) */
} compare_item;

#define COMPARE_MAX_NOTES 64
typedef struct compare_result {
    int64_t n_items;
    compare_item *items;   /* (n_items) in BASE point order, ops in BASE order; owned */
    int64_t n_regressions, n_improvements;
    int64_t n_gate_regressions; /* regressions among the items that decide (gate = 1): exit status 1 */
    int headline_gate;          /* 1: measured TTFT / TPOT / tokens/s decide, per-op times explain;
                                   0: no measured headline metric was compared, per-op items decide */
    int n_rounds;               /* paired comparisons: the rounds; 0 for two records */
    int n_points_matched;
    int n_notes;
    char notes[COMPARE_MAX_NOTES][200]; /* warnings: few samples, forced mismatches, untested metrics */
    int notes_dropped;                  /* notes past COMPARE_MAX_NOTES */
} compare_result;

/* Compares NEW against BASE. Refuses (XF_EINVAL, the message says what differs and that --force
 * overrides) records of different models or devices, point sets that differ, a point measured on
 * one side and predicted on the other, or points whose op lists differ -- unless opt->force, which
 * compares what matches and notes the rest. A measured op without samples is refused (XF_EINVAL
 * naming the record, point and op) even with force. On success *out owns its items: free with
 * compare_result_free. */
xf_status compare_records(const record *base, const record *new_, const compare_options *opt, compare_result *out);

#define COMPARE_MIN_ROUNDS 5 /* fewer and a bootstrap interval is no wider than the rounds themselves */

/* Compares interleaved A/B rounds: base[k] and new_[k] (k < n_rounds, n_rounds >= COMPARE_MIN_ROUNDS) are the
 * records of round k, made by the two builds one right after the other. Every round is matched
 * as compare_records does (the same refusals); the rounds must have the same items. Each measured
 * item's per-round medians give log ratios log(NEW / BASE); the verdict comes from the paired
 * test over rounds (CMP_METHOD_PAIRED): a bootstrap CI over rounds of the Hodges-Lehmann ratio,
 * the Wilcoxon signed-rank test for the p-value, Holm over the per-op family. Deterministic items are compared exactly
 * on round 0. On success *out owns its items: free with compare_result_free. */
xf_status compare_rounds(const record *base, const record *new_, int n_rounds, const compare_options *opt,
                         compare_result *out);

void compare_result_free(compare_result *r); /* NULL is fine */

/* "point 2 (batch 8, prompt 128, gen 16, bf16/bf16/bf16 kv bf16[, cpu 2 threads paged:16])" into buf. */
const char *compare_point_label(const record_point *p, char *buf, size_t len);

#endif
