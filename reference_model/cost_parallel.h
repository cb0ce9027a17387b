/* The cost model of a model split over devices: tensor parallel (Megatron-LM's splits), pipeline
 * parallel (layers in stages), expert parallel for MoE layers, and the collectives between the
 * devices as ops of their own. Pure functions of config, workload, plan and the device's links;
 * the per-device op formulas are the base cost model's (cost_model.h) on the shard one device
 * holds, never copied here.
 *
 * Splits (tensor parallel over tp devices, as Megatron-LM, Shoeybi et al. 2019, section 3):
 * - q/k/v and gate/up are column-parallel (each device computes its heads / its d_ff / tp
 *   columns), o_proj and down row-parallel (each device a partial sum of the d_model outputs);
 *   one all-reduce of the N x d_model activations after o_proj and one after down;
 * - query heads n_heads / tp per device; KV heads n_kv_heads / tp, or, when n_kv_heads < tp, one
 *   KV head per device, each held by tp / n_kv_heads devices (replicated: its weights and its KV);
 * - embedding and lm_head vocabulary-parallel (ceil(vocab / tp) rows each): an all-reduce of the
 *   embedded rows; greedy sampling takes each device's argmax of its slice and all-gathers the
 *   (value, index) pairs (8 bytes per sequence and device);
 * - MoE layers (expert parallel over the same tp devices): n_experts / tp whole experts per
 *   device; after the attention all-reduce each device keeps N / tp of the (replicated) token rows,
 *   routes them, sends each token's k copies to the devices of its experts (all-to-all, dispatch),
 *   runs its experts, sends the outputs back (all-to-all, combine), adds them into its rows and
 *   all-gathers the rows for the next layer (GShard / DeepSpeed-MoE's dispatch and combine);
 * - pipeline parallel: the layers in pp stages of consecutive layers (the first n_layers % pp
 *   stages one layer more), stage 0 with the embedding, the last with the final norm, lm_head and
 *   sampling (a copy of the embedding matrix when tied and pp > 1); a send/recv of the N x d_model
 *   activations between consecutive stages.
 *
 * Collectives' bytes (what each device sends over its link, nccl-tests' "bus bytes"; PERFORMANCE.md
 * of nccl-tests): ring all-reduce of S bytes over n devices 2(n-1)/n S in 2(n-1) steps; ring
 * all-gather of an S-byte result (n-1)/n S in n-1 steps; all-to-all of a per-device buffer S
 * (n-1)/n S (the share bound for other devices) in n-1 steps; send/recv S in one step. Time: steps x
 * the link's latency + bytes / the link's per-device bandwidth (analyzers/roofline.c). */
#ifndef XF_COST_PARALLEL_H
#define XF_COST_PARALLEL_H

#include <stdint.h>

#include "core/device.h"
#include "core/op.h"
#include "core/workload.h"
#include "reference_model/config.h"
#include "reference_model/cost_model.h"

/* How a model is split: the degrees, the pipeline's micro-batches and the devices available. */
typedef struct parallel_plan {
    int tp;            /* tensor-parallel degree (1: none) */
    int pp;            /* pipeline stages (1: none) */
    int micro_batches; /* pipeline micro-batches per step (1: none; needs pp > 1, divides the batch) */
    int gpus;          /* devices the user has (--gpus); 0: tp * pp */
    int replicate_vocab; /* 1: the split the reference model runs over MPI (`run --tp`): embedding, lm_head and
                            sampling whole on every device (no all-reduce after the embedding, no all-gather
                            after sampling), and MoE layers split as the dense FFN: every device all experts,
                            each expert's d_ff_expert / tp columns and the shared expert's d_ff_shared / tp, one
                            all-reduce after down, no all-to-all (split.experts_tp); 0: vocabulary-parallel and
                            expert parallel (below) */
} parallel_plan;

/* What one device of a tensor-parallel group holds and computes, and the stages. */
typedef struct parallel_split {
    model_config shard;        /* n_heads / tp, KV heads per device, d_ff / tp, ceil(vocab / tp); the rest as the model */
    int tp, pp;
    int kv_copies;             /* devices holding each KV head (tp / n_kv_heads when replicated, else 1) */
    int64_t experts_per_device;/* MoE: n_experts / tp; 0 dense */
    int tp_node;               /* 1: a tensor-parallel group spans nodes (tp > gpus_per_node): its collectives use node_link */
    int gpus_per_node;         /* the device's (0 = unknown: one node) */
    int replicate_vocab;       /* the plan's */
    int experts_tp;            /* 1 (replicate_vocab plans): MoE experts split by columns (experts_per_device then 0) */
    int64_t stage_first[65];   /* (pp + 1) first layer of each stage; stage_first[pp] = n_layers */
} parallel_split;

#define PARALLEL_MAX_STAGES 64

/* Checks the plan against the model and the device and fills *out. XF_EINVAL with a message
 * saying why and what to give: tp that does not divide n_heads (Megatron gives each device whole
 * heads), n_kv_heads (unless tp is a multiple of it: then replicated), d_ff, or n_experts; pp
 * above n_layers or PARALLEL_MAX_STAGES; tp * pp above plan->gpus; micro_batches without pp > 1;
 * a split over devices on a device whose file gives no link (or no node_link when tp * pp exceeds
 * gpus_per_node). */
xf_status parallel_split_of(const model_config *cfg, const parallel_plan *plan, const device_spec *d, parallel_split *out);

/* The stage that layer `layer` belongs to (layer -1: `head` 0 gives stage 0, the embedding's; 1 the
 * last stage, the head's). */
int parallel_stage_of(const parallel_split *sp, int layer, int head);

/* Ops of one step of one device per stage: the base cost model's ops of the shard for each
 * stage's layers, in order, with the collectives between them. */
int64_t parallel_step_op_count(const model_config *cfg, const parallel_split *sp);

/* Fills ops[0..count) for one step of batch sums->seqs (all the batch, not a micro-batch):
 * stage 0 (embedding[, all_reduce]), every layer in order (attn_norm .. o_proj[, all_reduce],
 * attn_residual, ffn_norm[, all_to_all], gate_up, swiglu, down[, all_to_all | all_reduce],
 * ffn_residual[, all_gather]), a send_recv after the last layer of every stage but the last (its
 * layer index), then final_norm, lm_head, sampling[, all_gather]. Collectives carry comm_bytes,
 * comm_hops and comm_node; their memory bytes are 0. XF_EINVAL on invalid input. */
xf_status parallel_step(const model_config *cfg, const workload *w, const parallel_split *sp, const cost_step_sums *sums,
                        cost_op *ops, int64_t count);

/* Memory of one device of stage `stage` (weights it holds, its KV for batch w->batch of
 * prompt + gen tokens, the shard's prefill activations); fields as cost_memory. */
void parallel_memory_of(const model_config *cfg, const workload *w, const parallel_split *sp, int stage, cost_memory *out);

/* The fullest stage's memory (what must fit every device), and the largest batch whose fullest
 * stage fits `capacity_bytes` (0 when batch 1 does not). */
void parallel_memory_max(const model_config *cfg, const workload *w, const parallel_split *sp, cost_memory *out);
int64_t parallel_max_batch(const model_config *cfg, const workload *w, const parallel_split *sp, double capacity_bytes);

/* The pipeline bubble: (pp - 1) / (m + pp - 1), the idle share of each stage in a step of m
 * micro-batches (GPipe, Huang et al. 2019; Narayanan et al. 2021). 0 for pp = 1. */
double parallel_bubble(int pp, int micro_batches);

/* Time of a step of m micro-batches through the stages given each stage's time for one
 * micro-batch: sum over stages + (m - 1) x the slowest stage. (n_stages) times. */
double parallel_pipeline_time(const double *stage_time_s, int n_stages, int micro_batches);

/* Bus bytes and steps of the ring algorithms over n devices (see the header comment). */
double parallel_allreduce_bytes(double buffer_bytes, int n);
double parallel_allgather_bytes(double result_bytes, int n);

#endif
