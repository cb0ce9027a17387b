/* The optional probe slots over a set (see probe.h). */
#include "core/probe.h"

#include <string.h>

#include "core/record.h"

xf_status probe_set_point_begin(const probe_set *ps, const struct record_point *p) {
    for (int i = 0; ps && i < ps->n; i++) {
        if (!ps->items[i].point_begin) continue;
        xf_status s = ps->items[i].point_begin(ps->items[i].ctx, p);
        if (s) return s;
    }
    return XF_OK;
}

void probe_set_rep_begin(const probe_set *ps) {
    for (int i = 0; ps && i < ps->n; i++)
        if (ps->items[i].rep_begin) ps->items[i].rep_begin(ps->items[i].ctx);
}

xf_status probe_set_rep_end(const probe_set *ps, int rep) {
    for (int i = 0; ps && i < ps->n; i++) {
        if (!ps->items[i].rep_end) continue;
        xf_status s = ps->items[i].rep_end(ps->items[i].ctx, rep);
        if (s) return s;
    }
    return XF_OK;
}

void probe_set_point_end(const probe_set *ps) {
    for (int i = 0; ps && i < ps->n; i++)
        if (ps->items[i].point_end) ps->items[i].point_end(ps->items[i].ctx);
}

xf_status probe_set_fill(const probe_set *ps, int64_t i, int64_t n_decode_steps, struct record_op *op) {
    for (int k = ps ? ps->n - 1 : -1; k >= 0; k--) {
        if (!ps->items[k].fill) continue;
        xf_status s = ps->items[k].fill(ps->items[k].ctx, i, n_decode_steps, op);
        if (s) return s;
        if (!op->measured) break; /* the model did not run this op (e.g. no decode) */
    }
    return XF_OK;
}

void probe_set_free(probe_set *ps) {
    if (!ps) return;
    for (int i = ps->n - 1; i >= 0; i--)
        if (ps->items[i].free) ps->items[i].free(ps->items[i].ctx);
    memset(ps, 0, sizeof *ps);
}
