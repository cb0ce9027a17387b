/* The step metadata the CUDA kernels read (positions, block tables, KV array sizes, tokens),
 * packed on the host into one block that kv_alloc copies to the device in one cudaMemcpyAsync (so
 * a captured CUDA graph replays with the next step's values). Plain C, no CUDA: the packing is
 * tested on the CPU (tests/test_cuda_index.c) with the KV manager's real block tables. */
#ifndef XF_CUDA_META_H
#define XF_CUDA_META_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "reference_model/backend.h"

struct kv_cache;

/* Byte offsets of the arrays inside the block; every array is 8-byte aligned. */
typedef struct cuda_meta_layout {
    size_t tok_off;   /* int64 (S + 1) */
    size_t seq_pos;   /* int64 (S) position of each sequence's first new token */
    size_t table_off; /* int64 (S) first entry of the sequence's table in `tables` */
    size_t tpe;       /* int64 (S) positions per table entry */
    size_t n_slots;   /* int64 (S) slots per layer of the sequence's K/V arrays */
    size_t kbase;     /* pointer (S) K array of the sequence (filled by the backend) */
    size_t vbase;     /* pointer (S) */
    size_t tokens;    /* int32 (T) */
    size_t tables;    /* int32 (table_cap) */
    size_t total;     /* rounded up to 256 */
} cuda_meta_layout;

/* Layout for S sequences, T tokens and table_cap table entries. */
cuda_meta_layout cuda_meta_layout_of(int64_t S, int64_t T, int64_t table_cap);

/* Typed views of a block laid out by L. */
typedef struct cuda_meta_view {
    int64_t *tok_off, *seq_pos, *table_off, *tpe, *n_slots;
    void **kbase, **vbase;
    int32_t *tokens, *tables;
} cuda_meta_view;

cuda_meta_view cuda_meta_view_of(void *block, const cuda_meta_layout *L);

/* Fills the view for step b. Pool mode (sys_caps == NULL): every sequence's table is the KV
 * manager's block table of b->seqs[s].kv_seq, n_slots = kv_slots; checks that it covers
 * pos + n_new positions and stays inside the pool. System mode (sys_caps = (n_seqs) capacities):
 * one entry {0} with tpe = n_slots = sys_caps[s]. Also tok_off and the tokens (checked against
 * vocab). kbase/vbase are left to the caller. XF_EINVAL / XF_EOVERFLOW naming what is wrong. */
xf_status cuda_meta_pack(cuda_meta_view *v, const step_batch *b, const struct kv_cache *kv, int64_t kv_slots,
                         const int64_t *sys_caps, int64_t max_seqs, int64_t max_tokens, int64_t max_seq_len,
                         int64_t table_cap, int64_t vocab);

/* What the CUDA backend does not run yet for cfg with host weights at wdtype and KV allocation
 * `mode`, as the config field (or option) that asks for it; NULL when it runs all of it. It runs
 * dense, windowed (sliding_window, layer_types), q/k-norm, biased (attention_bias, mlp_bias), every
 * RoPE kind config_rope_freqs computes, mixture-of-experts (softmax or DeepSeek's grouped sigmoid
 * routing, shared experts) and latent-attention (naive form, pool KV) models; anything else
 * config_first_extension names (whatever is added there later) stays refused. Pure C: the refusals are
 * tested on the CPU. */
const char *cuda_meta_unsupported(const model_config *cfg, xf_dtype wdtype, kv_alloc_mode mode);

#endif
