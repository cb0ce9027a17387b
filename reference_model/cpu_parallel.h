/* The CPU reference model split over ranks (tensor parallel, Megatron-LM's splits): what one rank
 * holds of the weights. With random weights each rank builds the whole model's fp32 weights from
 * the seed (every value depends on the seed and its place only, weights.h), keeps its slice and
 * frees the rest; from a weights folder it reads only its blocks of the tensors; the KV
 * manager and the backend then hold only the shard's heads. The all-reduces are the model's
 * OP_ALL_REDUCE (model.h: model_options.allreduce), through MPI (runner/comm.h). */
#ifndef XF_CPU_PARALLEL_H
#define XF_CPU_PARALLEL_H

#include "reference_model/cost_parallel.h"
#include "reference_model/weights.h"

/* What the split reference model cannot run, as XF_EINVAL with the reason: MoE layers on a split
 * that is not the reference model's (experts_tp: every expert split by columns); int8 weights whose
 * scale groups would straddle two ranks' columns of the row-parallel o_proj or down (the shard's
 * columns, n_heads / tp * head_dim (v_head_dim with MLA) and d_ff / tp, must be multiples of group:
 * the message gives the arithmetic and a group that fits). */
xf_status cpu_parallel_check(const model_config *cfg, const parallel_split *sp, xf_dtype dtype, int group);

/* The shard of rank `rank` (0..tp-1) of `full` (fp32 or bf16, the whole model) for split sp
 * (parallel_split_of with replicate_vocab: the embedding, final norm and lm_head whole on every
 * rank), converted to dtype (int8: each shard quantizes its own block with `group`): the Q rows of
 * its heads, the K and V rows of its KV heads (KV head rank / kv_copies when replicated), o_proj's
 * columns of its heads, gate and up rows and down's columns of its d_ff / tp slice, the q/k/v and
 * gate/up biases of those rows; norms whole; the row-parallel o_proj and down biases on rank 0
 * only (added once, before the all-reduce; the other ranks' are NULL); latent attention (MLA,
 * DeepSeek-V3 as Megatron-LM and vLLM split it): q_a (or q_proj's rows of its heads), kv_a and
 * their RMSNorms whole (the latent KV cache replicated on every rank), q_b's and kv_b's rows of its
 * heads, o_proj's v_head_dim columns of them; MoE layers: the router (its
 * bias, the shared expert's gate) whole, every expert's and the shared expert's FFN split as the
 * dense one (d_ff_expert / tp, d_ff_shared / tp). XF_EINVAL for what
 * cpu_parallel_check refuses. *out is the caller's: weights_free. */
xf_status cpu_parallel_shard(const model_weights *full, const parallel_split *sp, int rank, xf_dtype dtype, int group,
                             model_weights **out);

/* The same shard read from a Hugging Face folder holding cfg: only its blocks of the tensors
 * (st_load_weights_slice), never the whole model. *out is the caller's: weights_free. */
xf_status cpu_parallel_load(const char *dir, const model_config *cfg, const parallel_split *sp, int rank, xf_dtype dtype, int group,
                            model_weights **out);

/* A row-parallel bias of the shard: rank 0 keeps the whole model's (copied from full), the others
 * free theirs (*bias NULL: not added). */
void cpu_parallel_row_bias(const float *full, int rank, int64_t d, float **bias);

#endif
