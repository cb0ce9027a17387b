/* A probe turns op ranges into samples. The model runner brackets every op of every layer with
 * range_begin / range_end; each probe (timer, perf_event, CUPTI) records what it measures for
 * that range. A probe is a table of functions with a context, like a backend. */
#ifndef XF_PROBE_H
#define XF_PROBE_H

#include "core/status.h"
#include "core/op.h"
#include "core/workload.h"

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

#endif
