/* Predictions of a model split over devices: one device's ops of every stage, the collectives,
 * memory per device, the pipeline's micro-batched step (predict_parallel.h). */
#include "predict_parallel.h"

#include <stdlib.h>
#include <string.h>

#include "predict.h"
#include "roofline.h"

/* The time of each stage for one step of `shape` (ops outside the layers: those before the first
 * layer's to stage 0, those after to the last). */
static xf_status stage_times(const model_config *cfg, const workload *w, const parallel_split *sp, const device_spec *d,
                             step_shape shape, cost_op *ops, int64_t count, double *times) {
    cost_step_sums sums = cost_sums_of_shape(shape);
    xf_status s = parallel_step(cfg, w, sp, &sums, ops, count);
    if (s) return s;
    memset(times, 0, sizeof(double) * (size_t)sp->pp);
    int seen_layer = 0;
    for (int64_t i = 0; i < count; i++) {
        seen_layer |= ops[i].layer >= 0;
        times[parallel_stage_of(sp, ops[i].layer, seen_layer)] += roofline_predict_time(&ops[i], d);
    }
    return XF_OK;
}

xf_status predict_parallel_point(const model_config *cfg, const workload *w, const parallel_plan *plan, const device_spec *d,
                                 record_point *out) {
    if (!out) return xf_errorf(XF_EINVAL, "predict: no output point");
    memset(out, 0, sizeof *out);
    if (!cfg || !w || !plan || !d) return xf_errorf(XF_EINVAL, "predict: missing model, workload, plan or device");
    xf_status st = workload_validate(w);
    if (st) return st;
    parallel_split sp;
    if ((st = parallel_split_of(cfg, plan, d, &sp))) return st;
    const int m = plan->micro_batches > 1 ? plan->micro_batches : 1;
    if (w->batch % m)
        return xf_errorf(XF_EINVAL, "--micro-batches %d: a batch of %lld does not split into %d equal micro-batches; give a divisor of the batch",
                         m, (long long)w->batch, m);
    cost_memory need;
    parallel_memory_max(cfg, w, &sp, &need);
    if (!(need.total_bytes < 0x1p63))
        return xf_errorf(XF_EOVERFLOW, "predict: %s at batch %lld needs %.4g bytes per device: more than a 64-bit byte count holds",
                         cfg->name, (long long)w->batch, need.total_bytes);
    const int64_t per_step = parallel_step_op_count(cfg, &sp), n_steps = workload_decode_steps(w) > 0 ? 2 : 1;
    cost_op *costs = calloc((size_t)per_step, sizeof *costs);
    record_op *ops = calloc((size_t)(per_step * n_steps), sizeof *ops);
    double *times = calloc((size_t)sp.pp, sizeof *times);
    if (!costs || !ops || !times) {
        st = xf_errorf(XF_ENOMEM, "predict: out of memory for %lld ops", (long long)(per_step * n_steps));
        goto fail;
    }
    const int64_t decode_ctx = n_steps > 1 ? workload_mean_decode_context(w) : 0;
    double step_s[XF_PHASE_COUNT] = {0, 0}, comm_b[XF_PHASE_COUNT] = {0, 0};
    for (int64_t s = 0; s < n_steps; s++) {
        step_shape shape = s == 0 ? workload_prefill_step(w) : workload_decode_step(w, decode_ctx);
        cost_step_sums sums = cost_sums_of_shape(shape);
        if ((st = parallel_step(cfg, w, &sp, &sums, costs, per_step))) goto fail;
        for (int64_t i = 0; i < per_step; i++) {
            record_op *o = &ops[s * per_step + i];
            roofline_predict_op(&costs[i], d, o);
            if (op_kind_is_comm(costs[i].kind)) comm_b[shape.phase] += costs[i].comm_bytes;
        }
        /* the whole batch in m micro-batches of batch / m through the stages */
        step_shape mb = shape;
        mb.batch = shape.batch / m;
        if ((st = stage_times(cfg, w, &sp, d, mb, costs, per_step, times))) goto fail;
        step_s[shape.phase] = parallel_pipeline_time(times, sp.pp, m);
    }
    free(costs);
    free(times);
    predict_point_finish(out, w, ops, per_step * n_steps, decode_ctx, &need, d->memory_bytes);
    out->summary.max_batch = parallel_max_batch(cfg, w, &sp, d->memory_bytes);
    record_parallel *q = &out->par;
    q->tp = sp.tp;
    q->pp = sp.pp;
    q->micro_batches = m;
    q->devices = sp.tp * sp.pp;
    q->kv_copies = sp.kv_copies;
    q->experts_per_device = (int)sp.experts_per_device;
    q->bubble = parallel_bubble(sp.pp, m);
    q->prefill_step_s = step_s[XF_PREFILL];
    q->decode_step_s = step_s[XF_DECODE];
    q->comm_bytes = comm_b[XF_PREFILL] + (double)workload_decode_steps(w) * comm_b[XF_DECODE];
    predict_parallel_comm_share(out);
    return XF_OK;
fail:
    free(costs);
    free(ops);
    free(times);
    memset(out, 0, sizeof *out);
    return st;
}

xf_status predict_parallel_record(const model_config *cfg, const device_spec *d, const workload *points,
                                  const parallel_plan *plans, int n, record *out) {
    if (!plans && out) record_init(out, "predict");
    if (!plans) return xf_errorf(XF_EINVAL, "predict: no plans");
    /* the record as for one device (its head and every point), then the split points again */
    xf_status st = predict_record(cfg, d, points, n, out);
    for (int i = 0; !st && i < n; i++) {
        const parallel_plan *pl = &plans[i];
        if (!(pl->tp > 1 || pl->pp > 1 || pl->micro_batches > 1)) continue; /* one device: the plain prediction */
        record_point *p = &out->points[i];
        free(p->ops); /* a prediction owns nothing else */
        st = predict_parallel_point(cfg, &points[i], pl, d, p);
        if (st) st = xf_error_prefix(st, "point %d of %d: ", i + 1, n);
    }
    return st;
}

void predict_parallel_comm_share(record_point *p) {
    if (!p) return;
    double t[XF_PHASE_COUNT] = {0, 0}, all[XF_PHASE_COUNT] = {0, 0}; /* collectives', every op's */
    for (int64_t i = 0; i < p->n_ops; i++) {
        const record_op *o = &p->ops[i];
        if (o->cost.phase < 0 || o->cost.phase >= XF_PHASE_COUNT) continue;
        all[o->cost.phase] += o->time_s;
        if (op_kind_is_comm(o->cost.kind)) t[o->cost.phase] += o->time_s;
    }
    const double steps = (double)workload_decode_steps(&p->wl);
    const double req = all[XF_PREFILL] + steps * all[XF_DECODE];
    p->par.comm_share = req > 0 ? (t[XF_PREFILL] + steps * t[XF_DECODE]) / req : 0.0;
}

void predict_parallel_merge_allreduces(record_point *p) {
    if (!p || !p->ops) return;
    int64_t j = 0;
    for (int64_t i = 0; i < p->n_ops; i++) {
        record_op *o = &p->ops[i];
        int64_t k = -1; /* an earlier all-reduce of the same phase and layer */
        if (o->cost.kind == OP_ALL_REDUCE && o->cost.layer >= 0)
            for (int64_t m = j - 1; m >= 0 && k < 0; m--)
                if (p->ops[m].cost.kind == OP_ALL_REDUCE && p->ops[m].cost.layer == o->cost.layer &&
                    p->ops[m].cost.phase == o->cost.phase)
                    k = m;
        if (k >= 0) {
            record_op *a = &p->ops[k];
            a->cost.comm_bytes += o->cost.comm_bytes;
            a->cost.comm_hops += o->cost.comm_hops;
            a->predicted_time_s += o->predicted_time_s;
            a->time_s += o->time_s;
            free(o->samples_s);
            continue;
        }
        p->ops[j++] = *o;
    }
    p->n_ops = j;
    roofline_summarize_point(p);
}
