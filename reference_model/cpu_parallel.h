/* The CPU reference model split over ranks (tensor parallel, Megatron-LM's splits): what one rank
 * holds of the weights. Each rank builds the whole model's weights from the seed (every value
 * depends on the seed and its place only, weights.h), keeps its slice and frees the rest; the KV
 * manager and the backend then hold only the shard's heads. The all-reduces are the model's
 * OP_ALL_REDUCE (model.h: model_options.allreduce), through MPI (runner/comm.h). */
#ifndef XF_CPU_PARALLEL_H
#define XF_CPU_PARALLEL_H

#include "reference_model/cost_parallel.h"
#include "reference_model/weights.h"

/* The shard of rank `rank` (0..tp-1) of `full` for split sp (parallel_split_of with
 * replicate_vocab: the embedding, final norm and lm_head whole on every rank): the Q rows of its
 * heads, the K and V rows of its KV heads (KV head rank / kv_copies when replicated), o_proj's
 * columns of its heads, gate and up rows and down's columns of its d_ff / tp slice; norms whole.
 * XF_EINVAL for what the split cannot run: int8 weights (their scale groups would move), biases on
 * the row-parallel o_proj / down (added once per rank), MoE layers. *out is the caller's:
 * weights_free. */
xf_status cpu_parallel_shard(const model_weights *full, const parallel_split *sp, int rank, model_weights **out);

#endif
