#include "predict.h"

#include <stdlib.h>
#include <string.h>

#include "roofline.h"

xf_status predict_point(const model_config *cfg, const workload *w, const device_spec *d, record_point *out) {
    if (!out) return xf_errorf(XF_EINVAL, "predict: no output point");
    memset(out, 0, sizeof *out);
    if (!cfg || !w || !d) return xf_errorf(XF_EINVAL, "predict: missing model, workload or device");
    xf_status st = config_validate(cfg);
    if (st != XF_OK) return st;
    st = workload_validate(w);
    if (st != XF_OK) return st;

    /* Byte counts are 64-bit in records and in every reader: a workload whose memory would not
     * fit one is refused before anything is allocated, with the sizes (the doubles are exact
     * enough to say how far over it is). */
    cost_memory need;
    cost_memory_of(cfg, w, &need);
    if (!(need.total_bytes < 0x1p63))
        return xf_errorf(XF_EOVERFLOW,
                         "predict: %s at batch %lld, prompt %lld, gen %lld needs %.4g bytes (weights %.4g, KV %.4g, "
                         "activations %.4g): more than a 64-bit byte count holds (9.22e18); use a smaller batch, prompt or gen",
                         cfg->name, (long long)w->batch, (long long)w->prompt, (long long)w->gen, need.total_bytes,
                         need.weights_bytes, need.kv_bytes, need.activations_bytes);

    int64_t per_step = cost_step_op_count(cfg);
    int64_t n_steps = workload_decode_steps(w) > 0 ? 2 : 1;
    if (per_step <= 0 || per_step > (int64_t)(SIZE_MAX / sizeof(record_op) / 2))
        return xf_errorf(XF_EOVERFLOW, "predict: %lld ops per step is too many", (long long)per_step);
    cost_op *costs = calloc((size_t)per_step, sizeof *costs);
    record_op *ops = calloc((size_t)(per_step * n_steps), sizeof *ops);
    if (!costs || !ops) {
        free(costs);
        free(ops);
        return xf_errorf(XF_ENOMEM, "predict: out of memory for %lld ops", (long long)(per_step * n_steps));
    }

    int64_t decode_ctx = n_steps > 1 ? workload_mean_decode_context(w) : 0;
    for (int64_t s = 0; s < n_steps; s++) {
        step_shape shape = s == 0 ? workload_prefill_step(w) : workload_decode_step(w, decode_ctx);
        st = cost_step(cfg, w, shape, costs, per_step);
        if (st != XF_OK) {
            free(costs);
            free(ops);
            return st;
        }
        for (int64_t i = 0; i < per_step; i++) roofline_predict_op(&costs[i], d, &ops[s * per_step + i]);
    }
    free(costs);

    predict_point_finish(out, w, ops, per_step * n_steps, decode_ctx, &need, d->memory_bytes);
    out->summary.max_batch = cost_max_batch(cfg, w, d->memory_bytes);
    out->memory.active_weights_bytes = need.active_weights_bytes;
    return XF_OK;
}

void predict_point_finish(record_point *out, const workload *w, record_op *ops, int64_t n_ops, int64_t decode_ctx,
                          const cost_memory *m, double capacity_bytes) {
    out->wl = *w;
    out->n_ops = n_ops;
    out->ops = ops;
    roofline_summarize_point(out);
    out->summary.decode_context = decode_ctx;
    out->memory.weights_bytes = m->weights_bytes;
    out->memory.kv_bytes = m->kv_bytes;
    out->memory.kv_bytes_per_token = m->kv_bytes_per_token;
    out->memory.activations_bytes = m->activations_bytes;
    out->memory.total_bytes = m->total_bytes;
    out->memory.capacity_bytes = capacity_bytes;
}

xf_status predict_record(const model_config *cfg, const device_spec *d, const workload *points, int n, record *out) {
    if (!out) return xf_errorf(XF_EINVAL, "predict: no output record");
    record_init(out, "predict");
    if (!cfg || !d || !points || n < 1)
        return xf_errorf(XF_EINVAL, "predict: need a model, a device and at least one workload");
    xf_status st = config_validate(cfg);
    if (st != XF_OK) return st;
    out->model = *cfg;
    out->model_params = config_param_count(cfg);
    out->model_active_params = config_active_param_count(cfg);
    out->kv_bytes_per_token = cost_kv_bytes_per_token(cfg, points[0].kvdtype, points[0].quant_group);
    out->device = *d;
    out->ceilings_measured = d->measured;
    for (int i = 0; i < n; i++) {
        record_point *p = record_add_point(out);
        if (!p) return xf_errorf(XF_ENOMEM, "predict: out of memory for point %d", i + 1);
        st = predict_point(cfg, &points[i], d, p);
        if (st != XF_OK) return xf_error_prefix(st, "point %d of %d: ", i + 1, n);
    }
    record_stamp_time(out);
    return XF_OK;
}

xf_status predict_step_time(const model_config *cfg, const workload *w, const cost_step_sums *s,
                            const device_spec *d, double *time_s) {
    if (!cfg || !w || !s || !d || !time_s) return xf_errorf(XF_EINVAL, "predict: missing model, workload, step or device");
    xf_status st = config_validate(cfg);
    if (st != XF_OK) return st;
    model_config one = *cfg;
    one.n_layers = 1;
    cost_op ops[16]; /* 4 + 12 * 1 */
    st = cost_step_of_sums(&one, w, s, ops, 16);
    if (st != XF_OK) return st;
    double outside = 0.0, layer = 0.0;
    for (int i = 0; i < 16; i++) {
        double t = roofline_predict_time(&ops[i], d);
        if (ops[i].layer < 0)
            outside += t;
        else
            layer += t;
    }
    *time_s = outside + (double)cfg->n_layers * layer;
    return XF_OK;
}
