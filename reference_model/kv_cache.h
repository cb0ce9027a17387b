/* The KV cache manager: a pool of token slots under a fixed byte budget, handed to sequences by
 * an allocation policy, with the vLLM paper's breakdown of where the pool's bytes go.
 *
 * One slot holds one token's K and V for one sequence position, every layer. The backends lay
 * the pool out as, per layer, K[n_slots][kv_dim] and V[n_slots][kv_dim]
 * (kv_dim = n_kv_heads * head_dim), so the manager deals only in slot indices and byte
 * accounting; a backend finds (layer, seq, pos) at row kv_cache_slot(kv, seq, pos) of that
 * layer's K and V.
 *
 * Policies:
 *   reserve  contiguous region of max_len slots per sequence, reserved when admitted
 *   pow2     contiguous, next power of two of the request's final length
 *   oracle   contiguous, exactly the request's final length
 *   paged:B  blocks of B slots (default 16), a block table per sequence, a free list; blocks
 *            for the prompt at admission, one more block whenever the last one is full;
 *            fork shares blocks with reference counts, copy-on-write of a shared last block.
 * Contiguous policies place regions first-fit in the pool, so holes form between them; a
 * contiguous sequence that outgrows its region extends in place when the slots after it are
 * free, else the append fails.
 *
 * "Does not fit" is XF_EOVERFLOW from kv_cache_add_seq / kv_cache_append / kv_cache_fork: the
 * pool has no room now, the state is unchanged, and kv_cache_stats().alloc_failures counts it.
 * (Overflowing sizes in a config are XF_EINVAL from kv_cache_init.) kv_cache_can_add /
 * kv_cache_can_append answer the same question without an error message, for hot loops. */
#ifndef XF_KV_CACHE_H
#define XF_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"

#define KV_CACHE_FULL XF_EOVERFLOW   /* the pool has no room now; state unchanged */
#define KV_DEFAULT_BLOCK 16          /* tokens per block for "paged" without ":B" */
#define KV_MAX_BLOCK 65536           /* largest B accepted by kv_policy_parse */

typedef enum kv_policy_kind {
    KV_POLICY_RESERVE = 0,
    KV_POLICY_POW2,
    KV_POLICY_ORACLE,
    KV_POLICY_PAGED,
    KV_POLICY_COUNT
} kv_policy_kind;

typedef struct kv_policy {
    kv_policy_kind kind;
    int64_t block;  /* tokens per block for paged (>= 1); 0 for contiguous policies */
} kv_policy;

/* Parses "reserve", "pow2", "oracle", "paged" (B = 16) or "paged:B" (1 <= B <= 65536).
 * XF_EINVAL naming the accepted forms otherwise. */
xf_status kv_policy_parse(const char *s, kv_policy *out);

/* Writes the canonical name ("reserve", "paged:16") into buf; returns buf. */
const char *kv_policy_name(const kv_policy *p, char *buf, size_t len);

/* Bytes of one slot: 2 (K and V) * n_layers * bytes of a kv_dim row at dtype, int8/int4
 * scales counted per head (one fp16 scale per `quant_group` elements of a head's row, 0 =
 * default 128), rounded up to a whole byte. 0 when a size is not positive or overflows. */
int64_t kv_bytes_per_slot(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, xf_dtype dtype, int quant_group);

typedef struct kv_cache_config {
    int64_t n_layers;
    int64_t n_kv_heads;
    int64_t head_dim;
    xf_dtype dtype;       /* KV storage type */
    int quant_group;      /* int8/int4 scale group, 0 = default */
    int64_t budget_bytes; /* n_slots = budget / bytes_per_slot, rounded down to whole blocks for
                             paged; the remainder (< one block) is outside the pool */
    kv_policy policy;
    int64_t max_len;      /* reserve: slots per sequence when kv_cache_add_seq gets max_len <= 0 */
    /* Added for newer architectures (zero: the Llama-2 behaviour). */
    int64_t window;       /* sliding-window layers: a query sees at most `window` keys, its own
                             included; 0 = all earlier tokens. Paged: after each admission and
                             append, the blocks whose positions no later query sees (all <=
                             len - window) are released. Contiguous: a region holds at most
                             `window` slots, used as a ring (position p at base + p % region) */
    int window_deferred;  /* windowed paged pools of an engine (the reference model): 1 = admission
                             and append release nothing; kv_cache_release_window does, after the step
                             whose queries (all of a prefill's prompt) read the older positions. 0 =
                             the simulator's rule above (released at once) */
    int64_t latent_dim;   /* latent attention (MLA): a slot holds one row of latent_dim elements
                             (kv_lora_rank + qk_rope_head_dim) per layer instead of K and V;
                             n_kv_heads and head_dim are then unused; 0 = K and V */
} kv_cache_config;

/* Bytes of one slot of a latent-attention pool: n_layers rows of latent_dim at dtype (int8/int4:
 * one fp16 scale per quant_group elements of the row), rounded up to whole bytes. 0 when a size
 * is not positive or overflows. */
int64_t kv_bytes_per_latent_slot(int64_t n_layers, int64_t latent_dim, xf_dtype dtype, int quant_group);

typedef struct kv_cache kv_cache;

/* Creates an empty pool. Checks every field (positive sizes, budget holds at least one slot or
 * block, at most INT32_MAX slots). *out is freed by the caller with kv_cache_free. */
xf_status kv_cache_init(kv_cache **out, const kv_cache_config *cfg);
void kv_cache_free(kv_cache *kv); /* NULL is fine */

/* Sizes of the pool. */
int64_t kv_cache_n_slots(const kv_cache *kv);
int64_t kv_cache_bytes_per_slot(const kv_cache *kv);
int64_t kv_cache_block_tokens(const kv_cache *kv); /* B for paged, 0 for contiguous */
const kv_policy *kv_cache_policy(const kv_cache *kv);

/* Slots a new request takes at admission under this pool's policy: reserve -> max_len
 * (cfg.max_len when max_len <= 0), pow2 -> next power of two of final_len, oracle ->
 * final_len, each at most cfg.window when set; paged -> prompt_len rounded up to whole blocks. -1 when the arguments are
 * invalid (negative, final < prompt, final > reserve length). */
int64_t kv_cache_admit_slots(const kv_cache *kv, int64_t prompt_len, int64_t final_len, int64_t max_len);

/* 1 when kv_cache_add_seq with these arguments would succeed now. */
int kv_cache_can_add(const kv_cache *kv, int64_t prompt_len, int64_t final_len, int64_t max_len);

/* Admits a sequence: takes the policy's slots and marks positions [0, prompt_len) written (the
 * backend writes the prompt's K and V there next). final_len is what the request will reach
 * (prompt + output; the backend may pass max_len when it does not know); it only classifies
 * slots as reserved (will be used) or internal fragmentation (never used). XF_EINVAL for
 * invalid lengths, KV_CACHE_FULL when the pool has no room. *seq_id is valid until
 * kv_cache_free_seq. */
xf_status kv_cache_add_seq(kv_cache *kv, int64_t prompt_len, int64_t final_len, int64_t max_len, int *seq_id);

/* 1 when kv_cache_append(kv, seq_id, n_tokens) would succeed now. */
int kv_cache_can_append(const kv_cache *kv, int seq_id, int64_t n_tokens);

/* Grows a sequence by n_tokens written positions [len, len + n_tokens). Paged: allocates blocks
 * on demand (O(1) amortized) and, when the last block is shared, copies it first (a pending
 * copy, see kv_cache_copies). Contiguous: uses the region, or extends it in place.
 * KV_CACHE_FULL when there is no room (nothing changed). A sequence that grows past its
 * final_len raises final_len to its length. */
xf_status kv_cache_append(kv_cache *kv, int seq_id, int64_t n_tokens);

/* Windowed paged pools (cfg.window > 0): releases the leading blocks of seq_id that no later query
 * sees (the next query sits at position len and sees len - window + 1 .. len; the last block is
 * kept), as admission and append do by themselves unless cfg.window_deferred. An engine calls it
 * once a step's attention has read the older positions. A no-op for other pools; unknown ids:
 * XF_EINVAL. */
xf_status kv_cache_release_window(kv_cache *kv, int seq_id);

/* Releases a sequence's slots (paged: drops one reference per block). Unknown ids: XF_EINVAL. */
xf_status kv_cache_free_seq(kv_cache *kv, int seq_id);

/* Creates a child with the parent's written positions (parallel sampling, beam search).
 * Paged: the child's block table points at the parent's blocks (reference counts +1), nothing
 * is copied until one of them writes into a shared, partly filled last block. Contiguous: the
 * child gets a region of the parent's size and a pending copy of the written slots.
 * KV_CACHE_FULL when there is no room. */
xf_status kv_cache_fork(kv_cache *kv, int parent, int *child);

/* A copy the backend must perform, for every layer's K and V, before writing the new tokens:
 * rows [src, src + n) to rows [dst, dst + n). */
typedef struct kv_copy {
    int64_t src_slot;
    int64_t dst_slot;
    int64_t n_slots;
} kv_copy;

/* The copies pending since the last kv_cache_clear_copies, in the order they must be done.
 * The array belongs to the manager and is valid until the next call that changes the pool. */
const kv_copy *kv_cache_copies(const kv_cache *kv, int64_t *n);
void kv_cache_clear_copies(kv_cache *kv);

/* Written positions of a sequence (its length), its final_len, and the slots it holds
 * (region length, or blocks * B; windowed paged pools: the blocks not yet released). -1 for an
 * unknown id. */
int64_t kv_cache_seq_len(const kv_cache *kv, int seq_id);
int64_t kv_cache_seq_final(const kv_cache *kv, int seq_id);
int64_t kv_cache_seq_capacity(const kv_cache *kv, int seq_id);

/* The slot of (seq, pos): table[pos / tokens_per_entry] + pos % tokens_per_entry. Valid for
 * 0 <= pos < capacity; -1 for an unknown sequence or position out of range. Windowed pools: -1
 * too for a position whose block was released (paged) or whose slot was overwritten by a later
 * one (contiguous ring: base + pos % region); released blocks' table entries are -1. */
int64_t kv_cache_slot(const kv_cache *kv, int seq_id, int64_t pos);

/* A sequence's block table, for backends that copy it to the device. Entry i is the first slot
 * of logical block i; a block holds *tokens_per_entry positions. Paged: n_entries blocks of B.
 * Contiguous: one entry (the region's base) holding the whole region. *table belongs to the
 * manager and is valid until the next call that changes this sequence. XF_EINVAL for an
 * unknown id. */
xf_status kv_cache_block_table(const kv_cache *kv, int seq_id, const int32_t **table, int64_t *n_entries,
                               int64_t *tokens_per_entry);

/* Where the pool's slots are at one instant. Every slot of the pool is in exactly one of the
 * five categories: token + reserved + internal + external + free == n_slots. */
typedef struct kv_cache_stats {
    int64_t n_slots;        /* the pool */
    int64_t bytes_per_slot;
    int64_t token_slots;    /* written K/V (a block shared by fork counts once) */
    int64_t reserved_slots; /* held, not yet written, and the request will still write them */
    int64_t internal_slots; /* held and never to be written (over-reservation, tail of a block) */
    int64_t external_slots; /* free, in extents too small for the waiting request, counted only
                               when that is what stops it (total free would hold it) */
    int64_t free_slots;     /* the other free slots */
    int64_t live_seqs;
    int64_t largest_free_slots; /* largest request admissible now: the largest free extent
                                   (contiguous) or all free blocks * B (paged) */
    int64_t alloc_failures;     /* KV_CACHE_FULL answers since init */
    int64_t shared_slots_saved; /* slots that sequences hold through a shared block, beyond the
                                   one physical copy: what sharing saves */
} kv_cache_stats;

/* Fills *out. waiting_slots: the slots the request at the head of the queue needs
 * (kv_cache_admit_slots), 0 when none waits. O(live sequences + free extents). */
void kv_cache_stats_get(const kv_cache *kv, int64_t waiting_slots, kv_cache_stats *out);

/* Checks every invariant (free list vs. block tables and reference counts, regions disjoint
 * and inside the pool, free extents sorted and coalesced, counters equal to a recount).
 * XF_OK, or XF_EINVAL with the first violation found. O(pool). For tests and debugging. */
xf_status kv_cache_check(const kv_cache *kv);

#endif
