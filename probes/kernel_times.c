/* See kernel_times.h. */
#include "probes/kernel_times.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probes/range_table.h"
#include "probes/timer.h"

xf_status kernel_times_init(kernel_times *k, const record_point *p, int64_t n_layers, int reps) {
    memset(k, 0, sizeof *k);
    if (!p || reps < 1 || n_layers < 1 || n_layers > (1 << 20) || p->n_ops < 0)
        return xf_errorf(XF_EINVAL, "kernel times: bad sizes (reps %d, layers %lld)", reps, (long long)n_layers);
    k->n_ops = p->n_ops;
    k->reps = reps;
    xf_status s = range_table_init(&k->rt, n_layers, 1, reps);
    if (s) return xf_error_prefix(s, "kernel times: ");
    k->scratch = malloc((size_t)reps * sizeof *k->scratch);
    if (!k->scratch) {
        kernel_times_free(k);
        return xf_errorf(XF_ENOMEM, "out of memory for the kernel times");
    }
    return XF_OK;
}

void kernel_times_free(kernel_times *k) {
    if (!k) return;
    range_table_free(&k->rt);
    free(k->scratch);
    memset(k, 0, sizeof *k);
}

void kernel_times_add(kernel_times *k, const cupti_attribution *a, int rep) {
    if (!k || !k->scratch || !a || rep < 0 || rep >= k->reps) return;
    k->unattributed += a->unattributed;
    k->bad_records += a->bad_records;
    range_table_rep_begin(&k->rt);
    for (int j = 0; j < a->n; j++) {
        const probe_range *q = &a->items[j].range;
        double v = a->items[j].kernel_s;
        range_table_add(&k->rt, range_table_key(&k->rt, q->phase, q->layer, q->kind), q->step, &v);
    }
    /* one sample per op range seen in this repetition: the summed kernel time, undivided (fill
     * divides decode ops by the decode steps of a repetition) */
    if (range_table_rep_end(&k->rt, 1) != XF_OK) xf_error_clear();
}

int kernel_times_fill(const kernel_times *k, int64_t i, int64_t n_decode_steps, record_op *op) {
    if (!k || !k->scratch || !op || i < 0 || i >= k->n_ops || op->n_counters >= RECORD_MAX_COUNTERS) return 0;
    double div = op->cost.phase == XF_DECODE && n_decode_steps > 0 ? (double)n_decode_steps : 1.0;
    const double *smp;
    int n = range_table_samples(&k->rt, range_table_key(&k->rt, op->cost.phase, op->cost.layer, op->cost.kind), 0, &smp);
    if (n == 0) return 0;
    for (int r = 0; r < n; r++) k->scratch[r] = smp[r] / div;
    double med, iqr;
    timer_stats(k->scratch, n, &med, &iqr);
    record_counter *rc = &op->counters[op->n_counters++];
    memset(rc, 0, sizeof *rc);
    snprintf(rc->name, sizeof rc->name, "gpu_kernel_time_s");
    rc->supported = 1;
    rc->value = med;
    return 1;
}
