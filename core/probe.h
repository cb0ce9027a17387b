/* A probe turns op ranges into samples. The model brackets every op of every layer with
 * range_begin / range_end; each probe (timer, perf_event, CUPTI) records what it measures for
 * that range. A probe is a table of functions with a context, like a backend: range_begin,
 * range_end and free are always set; the other slots are optional (NULL when the probe has nothing
 * to do there). The runner (runner/runner.h) calls them through the probe_set_* helpers below, for
 * every point of a run, in this order:
 *     point_begin(point)                      drop what was kept (an earlier point, the weight upload)
 *     for rep = -warmup .. reps-1:
 *         rep_begin; the model's steps call range_begin/range_end; rep_end(rep)   (rep < 0: warm-up)
 *     point_end                               the point's repetitions are over (before any replay)
 *     fill(i, op) for every op i of the point the model ran, in reverse set order (innermost first)
 * The table lives in core/ because the model (reference_model/) calls it and the probes (probes/)
 * implement it: neither includes the other. */
#ifndef XF_PROBE_H
#define XF_PROBE_H

#include <stdint.h>

#include "core/op.h"
#include "core/status.h"
#include "core/workload.h"

struct record_point;
struct record_op;

/* Which op range: one op of one layer in one step. */
typedef struct probe_range {
    xf_phase phase;
    int layer; /* -1 for ops outside the layers */
    op_kind kind;
    int64_t step; /* 0 for prefill, k for the k-th decode step */
} probe_range;

typedef struct probe {
    const char *name; /* "timer", "perf", "cupti" */
    void *ctx;
    /* Called around every op; must be cheap (the timer's own overhead is measured). */
    void (*range_begin)(void *ctx, const probe_range *r);
    void (*range_end)(void *ctx, const probe_range *r);
    /* Frees ctx. */
    void (*free)(void *ctx);
    /* Optional slots (NULL: nothing to do). */
    /* A point starts: drop every sample kept so far; `p` (its ops) sizes per-op storage. */
    xf_status (*point_begin)(void *ctx, const struct record_point *p);
    /* A repetition starts: clear the per-repetition accumulators. */
    void (*rep_begin)(void *ctx);
    /* A repetition ended: keep its samples as repetition `rep` (rep < 0: warm-up, discard). */
    xf_status (*rep_end)(void *ctx, int rep);
    /* The point's repetitions are over (e.g. stop tracing before a replay). */
    void (*point_end)(void *ctx);
    /* Writes what the probe measured for op i of the point into *op (samples, counters).
     * n_decode_steps: the decode steps of one repetition (per-step figures divide by it). The
     * innermost probe that fills (the timer) sets op->measured when it has samples; the others are
     * called only for measured ops. XF_ENOMEM etc. on failure. */
    xf_status (*fill)(void *ctx, int64_t i, int64_t n_decode_steps, struct record_op *op);
} probe;

/* Up to a few probes run together. */
#define PROBE_SET_MAX 4
typedef struct probe_set {
    int n;
    probe items[PROBE_SET_MAX];
} probe_set;

static inline void probe_set_begin(const probe_set *ps, const probe_range *r) {
    if (!ps) return;
    for (int i = 0; i < ps->n; i++) ps->items[i].range_begin(ps->items[i].ctx, r);
}

/* Ends run in reverse order so the innermost probe stops first. */
static inline void probe_set_end(const probe_set *ps, const probe_range *r) {
    if (!ps) return;
    for (int i = ps->n - 1; i >= 0; i--) ps->items[i].range_end(ps->items[i].ctx, r);
}

/* The optional slots over a set (NULL set or NULL slots: nothing). The first error stops the
 * call and is returned. */
xf_status probe_set_point_begin(const probe_set *ps, const struct record_point *p);
void probe_set_rep_begin(const probe_set *ps);
xf_status probe_set_rep_end(const probe_set *ps, int rep);
void probe_set_point_end(const probe_set *ps);
/* fill in reverse order (innermost first), stopping when the innermost left the op unmeasured. */
xf_status probe_set_fill(const probe_set *ps, int64_t i, int64_t n_decode_steps, struct record_op *op);

/* Frees every probe of the set (its free slot) and empties it. */
void probe_set_free(probe_set *ps);

#endif
