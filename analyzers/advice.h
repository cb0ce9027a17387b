/* Advice: what a record's findings mean, ranked, each with its evidence and the gain the cost
 * model predicts for acting on it (the same cost model and device ceilings as `predict`, with the
 * workload changed). Pure functions of the record; no I/O.
 *
 * Findings (core/record.h record_advice.kind):
 *   weight_precision  decode projections memory-bound -> lower weight precision (int8, int4)
 *   batch             decode projections memory-bound -> the batch at which they reach the ridge
 *   kv_precision      attention's KV reads dominate decode -> fp8 KV (and a GQA note)
 *   kv_policy         the record's KV section shows a policy wasting memory -> paged, and the
 *                     sequences it fits
 *   fusion            latency-bound ops (measured) or many tiny kernels (predicted on a GPU,
 *                     launch cost ADVICE_LAUNCH_S assumed) -> fusion, CUDA Graphs; not from
 *                     measured ops whose threads waited for a CPU (cpu_contention instead)
 *   cpu_contention    measured: the model's threads waited for a CPU more than the contended
 *                     share of the time (concurrent.cpu_wait_share) -> idle cores, fewer threads
 *   expert_imbalance  MoE, measured: the busiest expert of a layer gets ADVICE_MOE_IMBALANCE x the
 *                     mean or more (the record's router counts) -> balance before expert parallelism
 *   expert_parallelism MoE: the routed experts hold most weights and the weights most of memory ->
 *                     shard the experts over N devices, weights per device predicted
 *   expert_batching   MoE decode: fewer than ADVICE_MOE_TOKENS_PER_READ tokens per expert read
 *                     (measured choices, else uniform routing) -> the batch that amortizes it */
#ifndef XF_ADVICE_H
#define XF_ADVICE_H

#include "core/record.h"

#define ADVICE_MIN_SHARE 0.30    /* an op group must take this share of its step to matter */
#define ADVICE_LAUNCH_S 4e-6     /* assumed cost of one GPU kernel launch (typical: 3-5 us) */
#define ADVICE_MAX_POINTS 256    /* points of a sweep analysed (the first ones) */
#define ADVICE_MOE_IMBALANCE 1.5 /* busiest expert / mean tokens per expert from which the load is uneven */
#define ADVICE_MOE_TOKENS_PER_READ 4.0 /* tokens per expert weight read below which batching is advised */

/* Findings of the record, ranked by score (best first), one per kind (the point where it scores
 * highest). Writes at most `max` into out[]; *n gets the count. Records without points give 0. */
xf_status advice_find(const record *r, record_advice *out, int max, int *n);

/* advice_find into r->advice / r->n_advice (at most RECORD_MAX_ADVICE). */
xf_status advice_record(record *r);

/* The smallest batch >= 1 at which the decode projections (gate_up of layer 0, the largest GEMM)
 * reach the ridge of their compute type on d: intensity >= ridge, with the workload's dtypes and
 * context. Doubling then bisection over the cost model, up to `limit`; *out = 0 when even
 * `limit` stays below the ridge. */
xf_status advice_ridge_batch(const model_config *cfg, const workload *w, const device_spec *d, int64_t limit, int64_t *out);

#endif
