/* The op vocabulary every part shares: the kinds of op of one forward step, their record names,
 * and the cost-model op (one op of one step, with its analytic FLOPs and compulsory bytes). The
 * cost model (reference_model/cost_model.h) fills cost_ops; probes, records, analyzers and reports
 * name ops with op_kind. */
#ifndef XF_OP_H
#define XF_OP_H

#include "core/device.h"
#include "core/status.h"
#include "core/workload.h"

typedef enum op_kind {
    OP_EMBEDDING = 0, /* layer -1: gather rows of the embedding table */
    OP_ATTN_NORM,     /* RMSNorm before attention */
    OP_QKV,           /* Q, K, V projections (GQA shapes, optional bias) */
    OP_ROPE,          /* rotary embedding of Q and K (qwen3: after the per-head q/k RMSNorm) */
    OP_KV_APPEND,     /* write the new K and V into the cache */
    OP_ATTENTION,     /* QK^T, softmax, PV: fused, compulsory traffic Q + K + V read, O written */
    OP_O_PROJ,        /* output projection (optional bias) */
    OP_ATTN_RESIDUAL, /* x += attn_out */
    OP_FFN_NORM,      /* RMSNorm before the FFN */
    OP_GATE_UP,       /* gate and up projections, d_model -> 2 * d_ff */
    OP_SWIGLU,        /* silu(gate) * up */
    OP_DOWN,          /* down projection, d_ff -> d_model */
    OP_FFN_RESIDUAL,  /* x += ffn_out */
    OP_FINAL_NORM,    /* layer -1: RMSNorm after the last layer */
    OP_LM_HEAD,       /* layer -1: logits; prefill computes them for the last token only */
    OP_SAMPLING,      /* layer -1: greedy argmax over the vocabulary */
    OP_KV_ALLOC,      /* measured only: time spent growing KV memory with the system allocator */
    OP_OTHER,         /* imported only: an op of another engine's trace that maps to none of the above */
    /* Collectives of a model split over devices (reference_model/cost_parallel.h): bytes over the
     * link, no FLOPs; the cost op's comm_bytes are the bus bytes of the named algorithm. */
    OP_ALL_REDUCE,    /* ring all-reduce: after the attention block and after the MLP (tensor parallel) */
    OP_ALL_GATHER,    /* ring all-gather: the token rows of an expert-parallel block, the greedy argmax of the vocabulary slices */
    OP_ALL_TO_ALL,    /* expert parallel: the tokens to their experts' devices (dispatch) and back (combine) */
    OP_SEND_RECV,     /* pipeline parallel: the activations from one stage to the next */
    OP_KIND_COUNT
} op_kind;

const char *op_kind_name(op_kind k);             /* "qkv", "attention", ... : record names */
xf_status op_kind_parse(const char *s, op_kind *out);
int op_kind_is_per_layer(op_kind k);             /* 1 for the ops inside each layer */
int op_kind_is_gemm(op_kind k);                  /* qkv, o_proj, gate_up, down, lm_head */
int op_kind_is_comm(op_kind k);                  /* all_reduce, all_gather, all_to_all, send_recv */

/* One op of one step. FLOPs and bytes are doubles (exact below 2^53; they feed ratios). */
typedef struct cost_op {
    xf_phase phase;
    int layer;          /* 0..n_layers-1, or -1 for ops outside the layers */
    op_kind kind;
    xf_compute compute; /* which peak applies */
    double flops;
    double weight_bytes;  /* parameters read */
    double act_in_bytes;  /* activations read */
    double act_out_bytes; /* activations written */
    double kv_read_bytes;
    double kv_write_bytes;
    double bytes;         /* sum of the five above: the compulsory traffic */
    /* Collectives only (op_kind_is_comm), else 0: */
    double comm_bytes;    /* bytes each device sends over the link: nccl-tests' bus bytes (ring all-reduce 2(N-1)/N of the buffer) */
    int comm_hops;        /* sequential link steps of the algorithm (ring all-reduce 2(N-1)): each costs the link's latency */
    int comm_node;        /* 1: over the link between nodes (device_spec.node_link); 0: within a node (device_spec.link) */
} cost_op;

#endif
