/* See kernel_times.h. */
#include "probes/kernel_times.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probes/timer.h"

/* (phase, layer, kind) -> slot; layer -1 (outside the layers) is row 0; -1 when out of range. */
static int64_t kt_slot(int64_t n_layers, xf_phase ph, int layer, op_kind kind) {
    if ((int)ph < 0 || (int)ph >= XF_PHASE_COUNT || layer < -1 || layer >= n_layers || (int)kind < 0 || (int)kind >= OP_KIND_COUNT)
        return -1;
    return ((int64_t)ph * (n_layers + 1) + (layer + 1)) * OP_KIND_COUNT + (int64_t)kind;
}

xf_status kernel_times_init(kernel_times *k, const record_point *p, int64_t n_layers, int reps) {
    memset(k, 0, sizeof *k);
    if (!p || reps < 1 || n_layers < 1 || n_layers > (1 << 20) || p->n_ops < 0)
        return xf_errorf(XF_EINVAL, "kernel times: bad sizes (reps %d, layers %lld)", reps, (long long)n_layers);
    int64_t n_slots = (int64_t)XF_PHASE_COUNT * (n_layers + 1) * OP_KIND_COUNT;
    if (p->n_ops > INT64_MAX / reps) return xf_errorf(XF_EOVERFLOW, "kernel times: %lld ops x %d reps", (long long)p->n_ops, reps);
    k->n_layers = n_layers;
    k->n_ops = p->n_ops;
    k->reps = reps;
    k->slot_op = malloc((size_t)n_slots * sizeof *k->slot_op);
    k->kt = malloc((size_t)(p->n_ops * reps + 1) * sizeof *k->kt);
    k->scratch = malloc((size_t)reps * sizeof *k->scratch);
    if (!k->slot_op || !k->kt || !k->scratch) {
        kernel_times_free(k);
        return xf_errorf(XF_ENOMEM, "out of memory for the kernel times");
    }
    for (int64_t i = 0; i < n_slots; i++) k->slot_op[i] = -1;
    for (int64_t i = 0; i < p->n_ops * reps; i++) k->kt[i] = NAN;
    for (int64_t i = 0; i < p->n_ops; i++) {
        int64_t sl = kt_slot(n_layers, p->ops[i].cost.phase, p->ops[i].cost.layer, p->ops[i].cost.kind);
        if (sl >= 0 && k->slot_op[sl] < 0) k->slot_op[sl] = i;
    }
    return XF_OK;
}

void kernel_times_free(kernel_times *k) {
    if (!k) return;
    free(k->slot_op);
    free(k->kt);
    free(k->scratch);
    memset(k, 0, sizeof *k);
}

void kernel_times_add(kernel_times *k, const cupti_attribution *a, int rep) {
    if (!k || !k->kt || !a || rep < 0 || rep >= k->reps) return;
    k->unattributed += a->unattributed;
    k->bad_records += a->bad_records;
    for (int j = 0; j < a->n; j++) {
        const probe_range *q = &a->items[j].range;
        int64_t sl = kt_slot(k->n_layers, q->phase, q->layer, q->kind);
        int64_t i = sl >= 0 ? k->slot_op[sl] : -1;
        if (i < 0) continue;
        double *cell = &k->kt[i * k->reps + rep];
        *cell = (isnan(*cell) ? 0.0 : *cell) + a->items[j].kernel_s;
    }
}

int kernel_times_fill(const kernel_times *k, int64_t i, int64_t n_decode_steps, record_op *op) {
    if (!k || !k->kt || !op || i < 0 || i >= k->n_ops || op->n_counters >= RECORD_MAX_COUNTERS) return 0;
    double div = op->cost.phase == XF_DECODE && n_decode_steps > 0 ? (double)n_decode_steps : 1.0;
    int n = 0;
    for (int r = 0; r < k->reps; r++) {
        double v = k->kt[i * k->reps + r];
        if (!isnan(v)) k->scratch[n++] = v / div;
    }
    if (n == 0) return 0;
    double med, iqr;
    timer_stats(k->scratch, n, &med, &iqr);
    record_counter *rc = &op->counters[op->n_counters++];
    memset(rc, 0, sizeof *rc);
    snprintf(rc->name, sizeof rc->name, "gpu_kernel_time_s");
    rc->supported = 1;
    rc->value = med;
    return 1;
}
