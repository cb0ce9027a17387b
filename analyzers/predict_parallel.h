/* Predictions of a model split over devices (tensor / pipeline / expert parallel): the parallel
 * cost model (reference_model/cost_parallel.h) against a device's ceilings and links. */
#ifndef XF_PREDICT_PARALLEL_H
#define XF_PREDICT_PARALLEL_H

#include "core/device.h"
#include "core/record.h"
#include "reference_model/config.h"
#include "reference_model/cost_parallel.h"

/* As predict_point (analyzers/predict.h) for a model split by `plan`: out->ops are one device's of
 * every stage (parallel_step) for the prefill step and the decode step at the mean decode context,
 * the collectives classified against the device's links; out->memory and summary.max_batch per
 * device (the fullest stage); out->par the split, the bubble, the micro-batched step times and the
 * collectives' share. *out must own nothing; on success it owns its ops; on error it is zeroed. */
xf_status predict_parallel_point(const model_config *cfg, const workload *w, const parallel_plan *plan, const device_spec *d,
                                 record_point *out);

/* The two all-reduces of each layer (after o_proj and after down) as one op, the first: what a
 * measured run times under one probe key (phase, layer, all_reduce). Bytes, hops and the predicted
 * time add up; the point's shares and summary are computed again. */
void predict_parallel_merge_allreduces(record_point *p);

/* par.comm_share from the point's op times: the collectives' share of the request's op time
 * (prefill + gen - 1 decode steps of the ops' sums); for a measured point, after its times. */
void predict_parallel_comm_share(record_point *p);

/* As predict_record, every point split by plans[i] (n >= 1). Free *out with record_free. */
xf_status predict_parallel_record(const model_config *cfg, const device_spec *d, const workload *points,
                                  const parallel_plan *plans, int n, record *out);

#endif
