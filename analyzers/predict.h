/* Predictions: the cost model against a device's ceilings, no hardware needed. Fills record
 * points (per-op roofline predictions, summary, memory) that every report renders. */
#ifndef XF_PREDICT_H
#define XF_PREDICT_H

#include "core/device.h"
#include "core/record.h"
#include "reference_model/config.h"
#include "reference_model/cost_model.h"
#include "core/workload.h"

/* Fills *out for one workload: out->wl, out->ops (the prefill step's ops, then the decode step's
 * at workload_mean_decode_context; prefill only when gen == 0), the summary (roofline roll-ups,
 * decode_context, max_batch against d->memory_bytes) and memory (cost_memory_of, capacity).
 * *out is overwritten and must own nothing (a point fresh from record_add_point); on success its
 * ops are owned by it (freed by record_free on the owning record); on error it is left zeroed. */
xf_status predict_point(const model_config *cfg, const workload *w, const device_spec *d, record_point *out);

/* The end every predicted point shares (predict_point, predict_parallel_point): out takes w, the
 * ops (n_ops; ownership passes to out), the roofline summary with decode_ctx, and the memory of m
 * (weights, KV, activations, total; active weights and max_batch are the caller's) against
 * capacity_bytes. */
void predict_point_finish(record_point *out, const workload *w, record_op *ops, int64_t n_ops, int64_t decode_ctx,
                          const cost_memory *m, double capacity_bytes);

/* Fills a whole "predict" record: model, model_params, kv_bytes_per_token at the first workload's
 * KV dtype, device, one point per workload (n >= 1), creation time. *out is record_init'ed by this
 * call; free it with record_free (also after an error). */
xf_status predict_record(const model_config *cfg, const device_spec *d, const workload *points, int n, record *out);

/* Predicted time of one step (the sum over its ops of max(F/P, Q/B)) without allocating: every
 * layer costs the same, so one layer is costed and counted n_layers times. Fast enough to call at
 * every step of a serving simulation (a few microseconds). */
xf_status predict_step_time(const model_config *cfg, const workload *w, const cost_step_sums *s,
                            const device_spec *d, double *time_s);

#endif
