/* The calibrated predictor: per op, predicted time = the roofline time against the calibration's
 * ceilings divided by the efficiency this machine achieved on that op family, weight dtype, memory
 * tier and shape (core/calibration.h, measured by runner/calibrate.c). Pure functions; no I/O.
 *
 * Families and shape keys (x, y, z), from the cost op:
 *   gemv         decode-step matrix ops and the prefill's lm_head: x = weight bytes, y = M (tokens
 *                per matrix, F / (2 x weights), rounded to a quarter octave), z = the step's working
 *                set: the model's weight bytes over the last-level cache (a step streams every
 *                layer's weights, so whether a matrix comes from the cache is the step's, not the
 *                matrix's); always the dram tier (reference: the DRAM read)
 *   gemm         prefill-step matrix ops (qkv, o_proj, gate_up, down): x = K (input features),
 *                y = M (batch x prompt, a quarter octave as gemv's), z = N (output features);
 *                N x K = the weights (bytes / the dtype's nominal bytes), K / N = the op's input
 *                over output activation bytes
 *   attn_decode  x = KV bytes read, y = F / Q rounded to a quarter octave (about 2 n_heads / n_kv_heads
 *                per KV byte's element size)
 *   attn_prefill x = FLOPs, y = 1
 *   norm, rope, swiglu, residual, kv_append, embedding, sampling: x = the op's bytes, y = the
 *                threads it runs on (1 under the backend's CPU_PAR_MIN split, and for final_norm and
 *                sampling; else the run's threads: predcal_regions), whose rows an op on the other
 *                side never takes (version 5; docs/verdicts.md, run 16)
 *                (rope keyed by the model's head_dim as well was measured worse: docs/verdicts.md, run 12)
 * The tier of a gemm is "cache" when the model's weights fit in the calibration's last-level cache,
 * else "dram", as the runner chooses its bandwidth ceiling; gemv is always dram (z says how much of
 * the step the cache holds).
 * Every family but gemm and gemv has z = 1. Interpolation, always of log efficiency (geometric; an
 * efficiency is a ratio): within a row (entries of one y), linear in log x between the two nearest
 * entries when the row has one z; gemm's rows hold entries of many (N, K), gemv's of many (bytes,
 * working set): inverse-distance weighting (power 2) over the row's entries in the plane (log x,
 * log z), exact on an entry. Then linear in log y between the two nearest rows. Outside the table: clamped to the nearest entry (the op is marked
 * calib_clamped and the output says how many; for gemm: K or N outside the row's range, or M
 * outside the rows'). A family/dtype with no entry in the op's tier uses
 * the other tier's; with none at all the op keeps the roofline bound (counted as uncalibrated).
 * Collectives, kv_alloc and imported ops are never calibrated. */
#ifndef XF_PREDICT_CALIBRATED_H
#define XF_PREDICT_CALIBRATED_H

#include "core/calibration.h"
#include "core/record.h"

/* The op's family, or -1 when it has none (collectives, kv_alloc, other). */
int predcal_family_of(const cost_op *op);

/* The op's shape keys for family f (wdtype: the run's weight dtype; working_set: the model's
 * weights over the LLC, predcal_working_set, gemv's z; threads: the threads the op runs on, an
 * element-wise family's y); *z = 1 unless f is gemm or gemv. */
void predcal_keys(const cost_op *op, calib_family f, xf_dtype wdtype, double working_set, int threads, double *x, double *y,
                  double *z);

/* The OpenMP parallel regions the CPU backend (reference_model/cpu_backend.c) opens for op in a
 * step of `tokens` rows (prefill: batch x prompt; decode and lm_head: batch) of cfg at weight dtype wdtype
 * with `threads` threads: 0 with one thread and for the ops it runs on the calling thread
 * (final_norm, sampling, swiglu of one token, element-wise ops under CPU_PAR_MIN elements), 1 for
 * attention and the other element-wise ops, 1 for a projection plus 1 for the pass over its input
 * before the product (bf16 at 32+: the split or rounding before oneDNN; int8 quantizes its inputs
 * inside the projection's own region). With the table's fork_term each region costs its fork_short_s. */
int predcal_regions(const cost_op *op, const model_config *cfg, int64_t tokens, xf_dtype wdtype, int threads);

/* A model of weights_bytes as a working set: weights_bytes / t->cache_bytes (1 when either is unknown). */
double predcal_working_set(const calib_table *t, double weights_bytes);

/* The tier of an op of family f in a model of weights_bytes: gemv always dram (its z is the working
 * set); gemm (which streams the weights) cache when 0 < weights_bytes <= t->cache_bytes and the
 * table has an in-cache bandwidth, else dram; every other family reads activations and KV, which
 * stay in the caches, and is always the cache tier (dram when the table has no in-cache bandwidth). */
calib_tier predcal_tier(const calib_table *t, calib_family f, double weights_bytes);

/* max(F / P, Q / B) against the table's ceilings (P of the op's compute type, B of the tier). */
double predcal_reference_time(const calib_table *t, const cost_op *op, calib_tier tier);

/* The efficiency interpolated at (x, y, z) for (f, wdtype, tier), from the rows on y's side of the
 * family's path split where it has any (gemm: tokens above CPU_AMX_PATH_TOKENS or not; element-wise
 * families: more than one thread or not). *clamped = 1 when a key lay outside
 * the entries' range; *other_tier = 1 when the tier had no entries and the other's were used.
 * XF_EUNSUPPORTED (no message) when no entry has that family and dtype. */
xf_status predcal_efficiency(const calib_table *t, calib_family f, xf_dtype wdtype, calib_tier tier, double x, double y,
                             double z, double *eff, int *clamped, int *other_tier);

/* Adds an entry for every measured op of p (time_s > 0) of a family in `families` (a bit mask,
 * 1 << calib_family) of model cfg: efficiency = the reference time over its measured time (with
 * t->fork_term: less t->fork_short_s per parallel region it opened, predcal_regions; at least a
 * fifth of the time is kept). Call calib_table_merge when all points are in. */
xf_status predcal_add_point(calib_table *t, const record_point *p, const model_config *cfg, unsigned families);

typedef struct predcal_stats {
    int64_t ops;          /* ops with a family */
    int64_t calibrated;   /* of them, with a calibrated time */
    int64_t clamped;      /* of the calibrated, outside the table (clamped) */
    int64_t other_tier;   /* of the calibrated, from the other memory tier's entries */
} predcal_stats;

/* Sets every op's calibrated_time_s (and calib_clamped) from t: the reference time over the
 * efficiency (with t->fork_term: plus t->fork_short_s per parallel region, predcal_regions, with
 * p->run.threads, or the table's threads when the point has none); p->memory.weights_bytes picks the tier, cfg (the
 * record's model; NULL: no regions) the dimensions the regions follow (its head_dim, not d_model /
 * n_heads). prediction = 1 (a predict record: no measurement): op->time_s becomes the calibrated time
 * where there is one and the summary is computed again from it (decode_context and max_batch
 * kept). Always sets summary.predicted_ttft_s / predicted_tpot_s. st (may be NULL) gets the counts. */
void predcal_apply_point(const calib_table *t, record_point *p, const model_config *cfg, int prediction, predcal_stats *st);

/* The summary's predicted TTFT / TPOT from the ops: calibrated times where set, else the bound. */
void predcal_step_times(record_point *p);

/* A spec-sheet GPU's default efficiencies (no measurement; docs/verdicts.md names the sources):
 * memory-bound families at PREDCAL_GPU_MEMORY_EFF of the HBM bandwidth, GEMMs and prefill
 * attention at PREDCAL_GPU_GEMM_EFF of the tensor peak, at every dtype, both tiers, one point each
 * (so every shape is "clamped" to the one figure). *out is init'ed; free with calib_table_free. */
#define PREDCAL_GPU_MEMORY_EFF 0.85
#define PREDCAL_GPU_GEMM_EFF 0.70
xf_status predcal_gpu_defaults(const device_spec *d, calib_table *out);

#endif
