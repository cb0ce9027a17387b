/* KV analysis helpers for `xfprof kv`: the serving simulator's step time from the cost model
 * and a device's ceilings, the default KV budget, and the KV size of a model. */
#ifndef XF_ANALYZERS_KV_H
#define XF_ANALYZERS_KV_H

#include <stdint.h>

#include "core/record_kv.h"
#include "core/device.h"
#include "core/status.h"
#include "reference_model/config.h"
#include "reference_model/serving_sim.h"
#include "core/workload.h"

/* Step time = roofline_predict_time summed over the ops of cost_step_of_sums: the prefill part
 * (sums: seqs = n_prefill, rows = prefill_tokens, pairs = prefill_pairs, kv_tokens =
 * prefill_tokens) plus the decode part (seqs = rows = n_decode, pairs = kv_tokens =
 * decode_context), each a step of the cost model. Every op's FLOPs and bytes are affine in those
 * four sums, so sim_cost_init takes each distinct op's coefficients from the cost model once
 * (finite differences; the n_layers identical layers folded into one) and a step costs ~16
 * roofline evaluations instead of 4 + 12 n_layers; steps with more new tokens than the vocabulary
 * (where the embedding gather stops growing) are evaluated exactly. */
typedef struct sim_cost sim_cost;

/* *out is freed with sim_cost_free. cfg, w (dtypes; batch/prompt/gen ignored) and d are copied.
 * Checks that the folded coefficients reproduce cost_step_of_sums (relative error < 1e-9) at
 * a few probe steps, else XF_EINVAL naming the op. */
xf_status sim_cost_init(sim_cost **out, const model_config *cfg, const workload *w, const device_spec *d);
void sim_cost_free(sim_cost *c); /* NULL fine */

/* A sim_step_time_fn: ctx is a sim_cost. */
double sim_cost_step_time(void *ctx, const sim_step *s);

/* The same through cost_step_of_sums over every op (slow; for checks). 0 on error. */
double sim_cost_step_time_exact(sim_cost *c, const sim_step *s);

/* Largest relative difference between the two over n random steps (batch <= max_batch, lengths
 * <= max_len, seeded). */
double sim_cost_max_error(sim_cost *c, int n, int64_t max_batch, int64_t max_len, uint64_t seed);

/* The default KV budget: device memory - weights (cost_weight_bytes) - the activations of one
 * prefill of max_len tokens (cost_memory_of, batch 1), in *out (bytes, >= 1). Refuses, with a
 * message naming the sizes (exact bytes and binary units), when the model or that prefill is
 * outside the cost model's range (its activations could not be counted: the budget would
 * silently leave them out), when the device's memory is unknown, or when weights and activations
 * leave less than one byte; *out is then 0. */
xf_status kv_budget_default(const model_config *cfg, const workload *w, const device_spec *d, int64_t max_len, double *out);

/* kv_budget_default's budget, or 0 when it refuses (the message is set). */
double kv_default_budget(const model_config *cfg, const workload *w, const device_spec *d, int64_t max_len);

/* The shares of the memory a policy holds (the pool minus its free bytes: token states, reserved,
 * internal, external fragmentation over their sum, as the vLLM paper's Figure 2 plots them), from
 * the shares of the pool; held[KV_CAT_FREE] is 0. Returns the held fraction of the pool (0: all
 * free, then every held share is 0). */
double kv_held_shares(const record_kv_policy *p, double held[KV_CAT_COUNT]);

#endif
