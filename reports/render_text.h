/* Text renderings of a record: the terminal table, CSV of the op table, and Markdown (a compact
 * summary for a CI comment). Pure functions from a record to text. */
#ifndef XF_RENDER_TEXT_H
#define XF_RENDER_TEXT_H

#include "core/record.h"
#include "core/units.h"

typedef enum render_format { RENDER_TABLE = 0, RENDER_CSV, RENDER_MD, RENDER_JSON } render_format;

/* Parses "table", "csv", "md" (or "markdown"), "json". */
xf_status render_format_parse(const char *s, render_format *out);

typedef struct render_options {
    int per_layer; /* 1: a row per op per layer; 0: each op summed over the layers (default) */
} render_options;

/* Renders every point of the record (table, csv or md; json is record_to_json's job). The text
 * is returned in *out, freed by the caller with free(). */
xf_status render_text(const record *r, render_format fmt, const render_options *opt, char **out);

/* Human units: the one rule lives in core/units.h (sizes binary: "13.5 GiB"; rates and counts
 * decimal: "6.74 G", "2.04 TB/s"; times "1.25 ms"). These names stay for existing callers. */
static inline const char *render_si(double v, const char *unit, char *buf, size_t len) { return units_si(v, unit, buf, len); }
static inline const char *render_bytes(double bytes, char *buf, size_t len) { return units_bytes(bytes, buf, len); }
static inline const char *render_time(double seconds, char *buf, size_t len) { return units_time(seconds, buf, len); }

/* One row of an op table rolled up over layers: ops of the same (phase, kind) summed. */
typedef struct render_rollup {
    xf_phase phase;
    op_kind kind;
    int first_layer, last_layer; /* -1, -1 for ops outside the layers */
    int64_t count;               /* ops summed */
    double flops, bytes, time_s, predicted_time_s, spread_s, share;
    double calibrated_time_s;    /* the calibrated prediction (the bound where an op has none) */
    xf_bound bound;              /* the class of the summed op (rollup_class, as the HTML report) */
    int measured;
    double util_compute, util_memory; /* time-weighted over the instances */
    double confidence;           /* share of bootstrap resamples giving `bound` (table only); -1 none */
} render_rollup;

/* Rolls a point's ops up over layers (analyzers/rollup.h), in op order, prefill first. *out (n
 * entries) is freed by the caller with free(). */
xf_status render_rollup_point(const record_point *p, render_rollup **out, int64_t *n);

#endif
