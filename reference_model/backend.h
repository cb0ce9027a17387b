/* The backend interface: one table of functions with a context. The model runner (model.c) owns
 * the weights, the KV manager and the order of ops; a backend owns its activation buffers and its
 * KV storage and runs one op at a time. The CPU backend (cpu_backend.c) and the CUDA backend
 * (.cu) implement the same table, so `--device` picks one and nothing else changes.
 *
 * Activations live inside the backend (host memory on the CPU, device memory on the GPU); the
 * runner only ever passes the step's description (step_batch) and reads results back through
 * `read_logits` / `read_tokens`, which is where a GPU backend copies device -> host. */
#ifndef XF_BACKEND_H
#define XF_BACKEND_H

#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"
#include "reference_model/config.h"
#include "reference_model/cost_model.h"
#include "core/workload.h"

struct model_weights; /* weights.h */
struct kv_cache;      /* kv_cache.h: the KV manager (block tables over a pool of token slots) */

/* Where KV memory comes from. */
typedef enum kv_alloc_mode {
    KV_ALLOC_POOL = 0, /* one pool of token slots, per layer K[n_slots][kv_dim] and V[n_slots][kv_dim],
                          addressed through the KV manager's slot index */
    KV_ALLOC_SYSTEM    /* per sequence, per layer, a buffer grown by allocate + copy + free on every
                          step that lengthens it (what naive engines do); timed as OP_KV_ALLOC */
} kv_alloc_mode;

/* One sequence of a step. Sequence s of a step is the model's sequence s (0..max_seqs-1): the
 * backend keys its per-sequence state (system-mode KV buffers, slot tables) by that index. */
typedef struct step_seq {
    int64_t kv_seq; /* sequence id in the KV manager (pool mode) */
    int64_t pos;    /* position of the first new token = tokens of this sequence already in KV */
    int64_t n_new;  /* new tokens this step: the prompt length in prefill, 1 in decode */
} step_seq;

/* What one forward step runs: n_seqs sequences with ragged numbers of new tokens. The new tokens
 * of all sequences are packed one after another (sequence 0's, then sequence 1's, ...): activation
 * buffers are (n_tokens, width) with row tok_off[s] + i holding token i of sequence s. */
typedef struct step_batch {
    xf_phase phase;
    int64_t step;           /* 0 for prefill, k for the k-th decode step (probe ranges use it) */
    int n_seqs;
    const step_seq *seqs;   /* (n_seqs) */
    int64_t n_tokens;       /* sum of seqs[s].n_new */
    const int64_t *tok_off; /* (n_seqs + 1) first packed row of each sequence; tok_off[n_seqs] = n_tokens */
    const int32_t *tokens;  /* (n_tokens) token ids of the new tokens, packed */
    /* lm_head runs on one row per sequence: the last new token of each (prefill needs logits only
     * for the last token; decode has one token per sequence anyway). Logits are (n_seqs, vocab). */
} step_batch;

/* What a backend is built from. All pointers are borrowed and outlive the backend. */
/* What a projection with bf16 weights multiplies them by (`run --bf16-inputs`, record env bf16_inputs):
 * the fp32 input exactly (on AMX as its 3-part bf16 split, three GEMMs: 3x the op's FLOPs), or the
 * input rounded once to bf16 (round to nearest even) in every phase, so each product is exact in
 * fp32 and a prefill GEMM on AMX is one pass; the error is the input's rounding, 2^-8 of each
 * element at most. */
typedef enum backend_bf16_inputs { BACKEND_BF16_EXACT3 = 0, BACKEND_BF16_ROUNDED } backend_bf16_inputs;

typedef struct backend_init_args {
    const model_config *cfg;
    const struct model_weights *weights; /* host weights (fp32 / bf16 / int8 + scales) */
    struct kv_cache *kv;                 /* KV manager; used for slot addressing in KV_ALLOC_POOL */
    xf_dtype kvdtype;                    /* XF_FP32, XF_FP16 or XF_BF16 */
    kv_alloc_mode kv_alloc;
    int64_t kv_slots;       /* pool mode: token slots in the pool (the KV manager's capacity) */
    /* Models mixing sliding-window and full layers, paged pools (the CPU backend only): the
     * windowed layers' own pool, whose manager releases the blocks out of their window, and its
     * slots; NULL / 0 otherwise (then kv serves every layer: a windowed pool when every layer is). */
    struct kv_cache *kv_win;
    int64_t kv_win_slots;
    const int *kv_win_ids;  /* (max_seqs) sequence s's id in kv_win, kept current by the model (-1 none) */
    int64_t max_seqs;       /* most sequences in one step; sequence ids are 0..max_seqs-1 */
    int64_t max_seq_len;    /* most tokens one sequence may hold (prompt + generated) */
    int64_t max_step_tokens;/* most new tokens in one step (activation rows) */
    int threads;            /* CPU threads (OpenMP and BLAS); ignored by GPU backends */
    int device_index;       /* GPU ordinal; ignored by the CPU backend */
    backend_bf16_inputs bf16_inputs; /* bf16 weights, CPU: exact (default) or rounded inputs */
    /* Tensor parallel (reference_model/cpu_parallel.h): sums the row-parallel outputs over the
     * ranks (OP_ALL_REDUCE after o_proj and down, in place on their (n_tokens, d_model) output);
     * NULL on one device. */
    xf_status (*allreduce)(void *ctx, float *buf, int64_t n, const char *what);
    void *allreduce_ctx;
} backend_init_args;

typedef struct backend_ops {
    const char *name; /* "cpu", "cuda" */
    /* Allocates the backend's buffers and KV storage (uploads weights on a GPU). On success *ctx is
     * the backend's; free it with free_ctx. XF_EUNSUPPORTED when the device is absent. */
    xf_status (*init)(void **ctx, const backend_init_args *args);
    void (*free_ctx)(void *ctx); /* NULL is a no-op */
    /* Runs op `k` of layer `layer` (-1 for embedding, final_norm, lm_head, sampling, kv_alloc) for
     * the step `b`. Ops are called in cost_model order; OP_KV_ALLOC comes first in every step: it
     * makes room for the new tokens (system mode: grows each sequence's buffers) and resolves
     * every position the step touches to a KV slot. A GPU backend may return before the work is
     * done (asynchronous launch); `sync` waits for it. */
    xf_status (*run_op)(void *ctx, op_kind k, int layer, const step_batch *b);
    xf_status (*sync)(void *ctx); /* no-op on the CPU; stream synchronize on a GPU */
    /* Copies the last step's logits, (n_seqs, vocab) floats, into out. */
    xf_status (*read_logits)(void *ctx, float *out, int64_t n_seqs);
    /* Copies the last step's sampled token ids, (n_seqs), into out. */
    xf_status (*read_tokens)(void *ctx, int32_t *out, int64_t n_seqs);
    /* Forgets the KV of the model's sequence `seq` (0..max_seqs-1) (system mode frees its buffers; pool mode holds no per-sequence
     * memory: the KV manager frees its slots). */
    void (*seq_release)(void *ctx, int64_t seq);
    /* Bytes the backend allocated for activations and KV (for the memory report). */
    int64_t (*mem_bytes)(void *ctx);
    /* Mixture of experts: tokens the router of layer `layer` sent to each expert in the last step,
     * (n_experts) counts owned by the backend; NULL for a dense layer. Optional: a backend that does
     * not run experts leaves it NULL. */
    const int64_t *(*expert_counts)(void *ctx, int layer);
} backend_ops;

/* The CPU backend's table (cpu_backend.c). */
extern const backend_ops cpu_backend_ops;

/* Finds a backend by name ("cpu"; "cuda" where built). NULL when unknown. model.c defines it; the
 * CUDA backend registers by defining `const backend_ops cuda_backend_ops` and compiling the library
 * with XFPROF_HAVE_CUDA_BACKEND defined (a line in CMakeLists.txt where its .cu sources are added). */
const backend_ops *backend_find(const char *name);

#endif
