/* The CPU backend: plain C with OpenMP threads, OpenBLAS for the GEMMs of prefill, own
 * vectorized kernels for decode (cpu_kernels.c).
 *
 * Projections: with fewer than CPU_GEMM_MIN_TOKENS rows (decode) the own matmul kernel reads the
 * weights in their stored dtype (bf16 / int8 read at 2 / ~1 bytes per weight: what makes quantized
 * decode faster; int8 weights are packed at load and take int8 inputs, cpu_kernels.h: the u8 x s8
 * kernel, batched decode included). With more rows (prefill) the output rows go in fixed chunks of CPU_GEMM_ROWS
 * to the threads, one single-threaded cblas_sgemm call per chunk (fixed shapes: OpenBLAS picks its
 * kernel by shape, so per-thread ranges made the sums' order, and the logits, depend on the thread
 * count); bf16 / int8 weights are first dequantized into a (bf16 prefill goes to oneDNN's AMX GEMMs
 * where the build has oneDNN, int8 prefill to the int8 kernel where the CPU has AVX-512 VNNI or the
 * OS grants AMX; this is their fallback; where AMX-BF16 is granted, bf16 steps of CPU_AMX_MIN_TOKENS or more tokens, batched
 * decode included, run on the own tiles of cpu_amx.h instead, the weights in place)
 * per-thread fp32 tile of a few MB (the dequantization costs O(rows * cols) against the GEMM's
 * O(tokens * rows * cols), so it is amortized over the prompt). OpenBLAS is set to one thread:
 * all parallelism is OpenMP's, so BLAS threads never compete with OpenMP threads for the cores,
 * and every output row is computed by one thread in a fixed order whatever the thread count.
 *
 * Attention (cpu_attention.c): decode queries run the vectorized decode kernel through
 * xk_attention_batch (items (token, context part) over all KV heads, split-K when the batch is small),
 * reading K and V in place through the slot table. A sequence with CPU_ATT_MIN_TOKENS or more new tokens (prefill) runs the
 * blocked causal kernel: work items (sequence, KV head, query block); each thread gathers a KV
 * head's K and V once into its own fp32 tiles (sized at init for max_seq_len), then score tiles and
 * P.V go through single-threaded cblas_sgemm. The blocking depends on the shapes only, so results
 * do not depend on the thread count either. Sliding-window layers run the per-query kernel on the
 * window's slots in both phases; with a paged policy their KV lives in a pool of their own
 * (kv_win, when the model also has full layers) whose manager releases the blocks out of the
 * window after each step, so a windowed layer holds at most ceil(window / B) + 1 blocks per
 * sequence in decode (other policies keep the whole context). Latent attention (deepseek_v3) takes its own qkv, rope, kv_append
 * and attention (cpu_mla_op, kernels in cpu_mla.c), in the naive or the absorbed form
 * (model_config.mla_absorbed; the absorbed form's W_UV runs in o_proj): the pool holds one latent
 * row per token. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/cpu_dispatch.h"
#include "core/hugemem.h"
#include "reference_model/backend.h"
#include "reference_model/cpu_amx.h"
#include "reference_model/cpu_attention.h"
#include "reference_model/cpu_dnnl.h"
#include "reference_model/cpu_kernels.h"
#include "reference_model/cpu_mla.h"
#include "reference_model/cpu_moe.h"
#include "reference_model/kv_cache.h"
#include "reference_model/weights.h"

#define CPU_TILE_FLOATS (1 << 20)  /* per-thread fp32 dequantization tile: 4 MiB */
#define CPU_GEMM_ROWS 256          /* output rows per BLAS GEMM call (a multiple of 16) */
#define CPU_MM_CHUNK 16            /* output rows per OpenMP work item in the own matmul */
#define CPU_AMX_MIN_TOKENS 4       /* bf16 steps of this many tokens or more run on AMX tiles where granted (cpu_amx.h) */
#define CPU_AMX_ROWS 64            /* output rows per OpenMP work item of the int8 tiles, and of the bf16 tiles
                                      where the input fits L2 (small: 768-row matrices
                                      split evenly over the threads; the B panel is read per 32 rows anyway) */
#define CPU_AMX_BF16_ROWS 1024     /* at most this many output rows per work item of the bf16 tiles: each K
                                      block's input panel then serves that many rows from L2 (64-row items
                                      fetched the whole input from L3 once per 64 rows: 1.1-1.75x slower
                                      on tinyllama's shapes, docs/performance.md) */
#define CPU_AMX_BF16_SCRATCH (4 << 20) /* bytes of C scratch per thread the bf16 work items may need */
#define CPU_AMX_BF16_L2 (1 << 20)  /* packed inputs up to this size stay in L2 whatever the item: 64-row items
                                      there (their C scratch stays small; larger ones measured 0.78-0.95x) */
#define CPU_AMX_I8_BYTES (1 << 20) /* int8 tiles in prefill: packed weight bytes per work item (they stay in L2
                                      for every 16-token block; 64-row items measured 0.81-0.87x at 2048
                                      columns, 512 rows of 5632 columns (2.8 MiB) 0.64x) */
#define CPU_AMX_I8_ROWS 512        /* and at most this many rows */
#define CPU_ATT_MIN_TOKENS 16     /* sequences with this many new tokens take the blocked (prefill)
                                      attention; fewer (decode) the per-query kernel */

typedef struct cpu_seq {
    int64_t *slots; /* (max_seq_len) KV slot of each position resolved so far */
    int64_t *wslots; /* (max_seq_len) the same in the windowed layers' pool (kv_win); NULL without one */
    int64_t len;    /* positions resolved in slots */
    /* system mode: this sequence's KV, per layer, grown by allocate + copy */
    void **k, **v;  /* (n_layers) each (cap, kv_dim) in kv dtype */
    int64_t cap;    /* positions the buffers hold */
} cpu_seq;

typedef struct cpu_ctx {
    model_config cfg;
    const model_weights *w;
    kv_cache *kv;
    kv_cache *kvw;     /* the windowed layers' pool (backend_init_args.kv_win); NULL: kv serves every layer */
    int64_t kvw_slots; /* its slots */
    const int *kvw_ids; /* (max_seqs) each sequence's id in kvw (the model's, borrowed) */
    xf_dtype kvdt;
    int64_t kv_esz; /* bytes per KV element */
    kv_alloc_mode mode;
    int threads;
    xk_isa isa;
    int64_t max_seqs, max_seq_len, max_tokens, kv_slots;
    int64_t q_dim, kv_dim, qkv_dim, n_rep;
    void **kpool, **vpool; /* pool mode: (n_layers) each (kv_slots, kv_dim) in kv dtype */
    cpu_seq *seqs;         /* (max_seqs) */
    int64_t *tok_seq;      /* (max_tokens) sequence of each packed row of this step */
    float *x;              /* (max_tokens, d_model) residual stream */
    float *xn;             /* (max_tokens, d_model) normed */
    float *qkv;            /* (max_tokens, q_dim + 2 kv_dim) */
    float *att;            /* (max_tokens, q_dim) attention output */
    float *proj;           /* (max_tokens, d_model) o_proj / down output */
    float *gu;             /* (max_tokens, 2 d_ff) gate then up */
    float *hff;            /* (max_tokens, d_ff) swiglu output */
    float *last;           /* (max_seqs, d_model) final-normed last row of each sequence */
    float *logits;         /* (max_seqs, vocab) */
    int32_t *sampled;      /* (max_seqs) */
    float *att_scratch;    /* (threads, att_scratch_n) */
    int64_t att_scratch_n;
    float *att_tiles;      /* (threads, att_tiles_n) prefill attention: a KV head's K and V as fp32
                              tiles (2, max_seq_len, head_dim) + the block scratch; NULL when
                              max_tokens < CPU_ATT_MIN_TOKENS */
    int64_t att_tiles_n;
    int64_t *att_items;    /* (max_seqs + 1) blocked attention items before each sequence */
    xk_attn_query *att_q;  /* (max_tokens) the decode attention's queries */
    xk_attn_work att_w;    /* its buffers (scratch: att_scratch) */
    float *tiles;          /* (threads, CPU_TILE_FLOATS) dequantization tiles; NULL for fp32 */
    int16_t *aq;           /* int8 weights: (max_cols) one token's input on the 16-bit grid */
    float *as;             /* int8 weights: (max_cols) its per-group scales (at most one per column) */
    int8_t *a8q;           /* int8 packed weights: (a8_tokens, a8_cols) the decode input quantized to int8 */
    float *a8s;            /* (a8_tokens, a8_groups) its per-group scales */
    int32_t *a8c;          /* (a8_tokens, a8_groups) 128 * each group's sum of q */
    int64_t a8_tokens;     /* steps of up to this many tokens take the int8 kernel: max_tokens where xk_a8_prefill
                              (VNNI or AMX tiles), else min(max_tokens, CPU_GEMM_MIN_TOKENS - 1) (prefill: fp32
                              GEMM on the grid) */
    uint16_t *bfx;         /* bf16 weights with oneDNN: (max_tokens, 3, max_cols) prefill input as 3 bf16 parts */
    cpu_dnnl *dnnl;        /* bf16 weights, prefill, oneDNN built: its engine; NULL otherwise */
    int amx_bf16;          /* bf16 weights: 1 when steps of CPU_AMX_MIN_TOKENS..amx_tokens tokens run on own AMX tiles */
    int64_t amx_tokens, amx_cols; /* the most tokens and input columns amx_xb holds */
    uint16_t *amx_xb;      /* (parts, ceil(amx_tokens / 16) * 16, amx_cols) a step's input packed for the tiles
                              (amx_bf16_pack_input; parts 1 rounded, 3 exact3); also oneDNN's bfx when both exist */
    float *amx_c;          /* (threads, amx_c_n) the tile kernel's C scratch */
    int64_t amx_c_n;
    int64_t amx_rows;      /* the most output rows of one bf16 tile work item (amx_c_n holds their C) */
    int bf16_round;        /* bf16 weights: 1 = every projection's input rounded to bf16 (BACKEND_BF16_ROUNDED) */
    double *rope_inv;      /* (head_dim / 2) RoPE inverse frequencies (config_rope_freqs) */
    double rope_scale;     /* what cos and sin are multiplied by (yarn's attention factor; else 1) */
    double *rope_inv_local; /* (head_dim / 2) gemma3's windowed layers' frequencies (config_rope_freqs_layer); NULL otherwise */
    double rope_scale_local;
    /* RoPE's cos | sin of every position a sequence may reach, [0] the global frequencies, [1]
     * gemma3's local ones (NULL without): made once at init, as engines keep a cos/sin cache. Made
     * in every layer of every step instead (head_dim libm sin/cos a token a layer), it was a third of
     * a decode rope's time and 13-15% of a prefill one's (tinyllama, docs/performance.md, thirteenth
     * session). Latent attention (cpu_mla_op) still makes its own per layer. */
    float *rope_tab[2];    /* (max_seq_len, head_dim) row p: cos[0 .. head_dim/2) | sin[0 .. head_dim/2) at position p */
    cpu_moe *moe;          /* the experts' buffers and router choices (cpu_moe.h); NULL for a dense model */
    /* latent attention (cpu_mla.h): kpool rows are the latent (kv_dim = kv_lora_rank + qk_rope_head_dim),
     * no vpool; qkv rows [q_a or q | c_kv | k_rope] (qkv_dim = q_rows + kv_dim); att rows n_heads * v_head_dim */
    int64_t q_rows;        /* q_lora_rank, or n_heads * qk_head_dim without a q rank */
    float *mla_q;          /* (max_tokens, n_heads * qk_head_dim) the queries */
    float *mla_qa;         /* (max_tokens, q_lora_rank) the normed q_a rows, q_b's input */
    float *mla_ckv;        /* (max_seq_len, kv_lora_rank) one sequence's cached c_kv, fp32 */
    float *mla_krope;      /* (max_seq_len, qk_rope_head_dim) its k_rope */
    float *mla_kvdec;      /* naive form: (max_seq_len, n_heads * (qk_nope + v)) kv_b(c_kv): per head [K_nope | V] */
    float *mla_qabs;       /* absorbed form: (max_tokens, n_heads, kv_lora_rank + qk_rope) per head [W_UK^T q_nope | q_rot] */
    float *mla_olat;       /* absorbed form: (max_tokens, n_heads, kv_lora_rank) each head's latent attention output */
    float *mla_wabs;       /* absorbed form: (threads, mla_wabs_n) one head's W_UK or W_UV block of kv_b, fp32 */
    int64_t mla_wabs_n;
    float *mla_scores;     /* (threads, mla_scores_n) scores of one (query, head), the rope's scratch, or a latent row */
    int64_t mla_scores_n;
    int64_t bytes;         /* everything allocated above, KV included */
    xf_status (*allreduce)(void *ctx, float *buf, int64_t n, const char *what); /* tensor parallel; NULL on one device */
    void *allreduce_ctx;
} cpu_ctx;

static void *cpu_alloc(cpu_ctx *c, int64_t n, int64_t esz, xf_status *st) {
    if (*st) return NULL;
    if (n < 1) n = 1;
    if (n > INT64_MAX / esz - 64) {
        *st = xf_errorf(XF_EOVERFLOW, "cpu backend: a buffer of %lld x %lld bytes overflows", (long long)n,
                        (long long)esz);
        return NULL;
    }
    size_t bytes = ((size_t)(n * esz) + 63u) & ~(size_t)63u;
    void *p = hugemem_alloc((int64_t)bytes); /* the KV pool's layers on huge pages from 2 MiB, as the weights */
    if (!p) {
        *st = xf_errorf(XF_ENOMEM, "cpu backend: out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    c->bytes += (int64_t)bytes;
    return p;
}

/* 1 when layer l keeps its KV in the windowed layers' own pool (kvw). */
static inline int kv_layer_windowed(const cpu_ctx *c, int64_t l) { return c->kvw && model_layer_window(&c->cfg, l) > 0; }

/* The slot table of sequence s for layer l: position -> row of that layer's K and V. */
static inline const int64_t *kv_slot_table(const cpu_ctx *c, int64_t l, int64_t s) {
    return kv_layer_windowed(c, l) ? c->seqs[s].wslots : c->seqs[s].slots;
}

static void cpu_seq_free_kv(cpu_ctx *c, cpu_seq *s) {
    for (int64_t l = 0; l < c->cfg.n_layers; l++) { /* k or v may be missing after a failed cpu_init */
        if (s->k) free(s->k[l]), s->k[l] = NULL;
        if (s->v) free(s->v[l]), s->v[l] = NULL;
    }
    if (s->cap > 0) c->bytes -= 2 * c->cfg.n_layers * s->cap * c->kv_dim * c->kv_esz;
    s->cap = 0;
}

static void cpu_free(void *ctx) {
    cpu_ctx *c = ctx;
    if (!c) return;
    if (c->seqs) {
        for (int64_t s = 0; s < c->max_seqs; s++) {
            cpu_seq_free_kv(c, &c->seqs[s]);
            free(c->seqs[s].k);
            free(c->seqs[s].v);
            free(c->seqs[s].slots);
            free(c->seqs[s].wslots);
        }
        free(c->seqs);
    }
    /* either pool may be missing when cpu_init ran out of memory between the two callocs */
    for (int64_t l = 0; l < c->cfg.n_layers; l++) {
        if (c->kpool) free(c->kpool[l]);
        if (c->vpool) free(c->vpool[l]);
    }
    free(c->kpool);
    free(c->vpool);
    free(c->tok_seq);
    free(c->x);
    free(c->xn);
    free(c->qkv);
    free(c->att);
    free(c->proj);
    free(c->gu);
    free(c->hff);
    free(c->last);
    free(c->logits);
    free(c->sampled);
    free(c->att_scratch);
    free(c->att_tiles);
    free(c->att_items);
    free(c->att_q);
    free(c->att_w.items);
    free(c->att_w.part_o);
    free(c->att_w.part_ml);
    free(c->tiles);
    free(c->aq);
    free(c->as);
    free(c->a8q);
    free(c->a8s);
    free(c->a8c);
    if (c->bfx != c->amx_xb) free(c->bfx);
    free(c->amx_xb);
    free(c->amx_c);
    cpu_dnnl_free(c->dnnl);
    free(c->rope_inv);
    free(c->rope_inv_local);
    free(c->rope_tab[0]);
    free(c->rope_tab[1]);
    free(c->mla_q);
    free(c->mla_qa);
    free(c->mla_ckv);
    free(c->mla_krope);
    free(c->mla_kvdec);
    free(c->mla_qabs);
    free(c->mla_olat);
    free(c->mla_wabs);
    free(c->mla_scores);
    cpu_moe_free(c->moe);
    free(c);
}

/* The widest input of a dense layer's projections: d_model (qkv, gate_up), d_ff (down) or the
 * query width q_dim (o_proj). */
static int64_t cpu_dense_max_cols(const model_config *cfg, int64_t q_dim) {
    const int64_t m = cfg->d_model > cfg->d_ff ? cfg->d_model : cfg->d_ff;
    return m > q_dim ? m : q_dim;
}

static xf_status cpu_init(void **out, const backend_init_args *a) {
    *out = NULL;
    if (!a || !a->cfg || !a->weights) return xf_errorf(XF_EINVAL, "cpu backend: NULL config or weights");
    if (a->kvdtype != XF_FP32 && a->kvdtype != XF_FP16 && a->kvdtype != XF_BF16)
        return xf_errorf(XF_EINVAL, "cpu backend: KV dtype %s is not supported: use fp32, fp16 or bf16",
                         dtype_name(a->kvdtype));
    if (a->max_seqs < 1 || a->max_seq_len < 1 || a->max_step_tokens < 1)
        return xf_errorf(XF_EINVAL, "cpu backend: max_seqs, max_seq_len and max_step_tokens must be >= 1");
    if (a->kv_alloc == KV_ALLOC_POOL && (!a->kv || a->kv_slots < 1))
        return xf_errorf(XF_EINVAL, "cpu backend: pool KV needs the KV manager and its slot count");
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!c) return xf_errorf(XF_ENOMEM, "cpu backend: out of memory");
    const model_config *cfg = a->cfg;
    c->cfg = *cfg;
    c->w = a->weights;
    c->kv = a->kv;
    c->kvdt = a->kvdtype;
    c->kv_esz = a->kvdtype == XF_FP32 ? 4 : 2;
    c->mode = a->kv_alloc;
    c->threads = a->threads > 0 ? a->threads : omp_get_num_procs();
    c->allreduce = a->allreduce;
    c->allreduce_ctx = a->allreduce_ctx;
    c->isa = xk_isa_best();
    c->bf16_round = a->bf16_inputs == BACKEND_BF16_ROUNDED;
    c->max_seqs = a->max_seqs;
    c->max_seq_len = a->max_seq_len;
    c->max_tokens = a->max_step_tokens;
    c->kv_slots = a->kv_slots;
    c->kvw = a->kv_alloc == KV_ALLOC_POOL ? a->kv_win : NULL;
    c->kvw_slots = c->kvw ? a->kv_win_slots : 0;
    c->kvw_ids = a->kv_win_ids;
    if (c->kvw && (c->kvw_slots < 1 || !c->kvw_ids || model_is_mla(cfg))) {
        free(c);
        return xf_errorf(XF_EINVAL, "cpu backend: a windowed layers' pool needs its slot count, sequence ids and K/V rows (not latent attention)");
    }
    c->q_dim = cfg->n_heads * cfg->head_dim;
    c->kv_dim = cfg->n_kv_heads * cfg->head_dim;
    c->qkv_dim = c->q_dim + 2 * c->kv_dim;
    c->n_rep = cfg->n_heads / cfg->n_kv_heads;
    const int mla = model_is_mla(cfg);
    if (mla) { /* the latent row is the cached "K"; att holds the larger of Q's and the output's rows */
        const int64_t qh = cfg->qk_nope_head_dim + cfg->qk_rope_head_dim;
        c->q_rows = cfg->q_lora_rank > 0 ? cfg->q_lora_rank : cfg->n_heads * qh;
        c->kv_dim = cfg->kv_lora_rank + cfg->qk_rope_head_dim;
        c->qkv_dim = c->q_rows + c->kv_dim;
        c->q_dim = cfg->n_heads * (qh > cfg->v_head_dim ? qh : cfg->v_head_dim);
        c->n_rep = 1;
        if (a->kv_alloc != KV_ALLOC_POOL) {
            free(c);
            return xf_errorf(XF_EINVAL, "cpu backend: latent attention (kv_lora_rank) keeps its KV in the pool only: "
                             "--kv-alloc system is not implemented for it");
        }
    }
    /* All parallelism is OpenMP's (see the top of this file). */
    openblas_set_num_threads(1);

    xf_status st = XF_OK;
    const int64_t T = c->max_tokens, L = cfg->n_layers;
    c->seqs = calloc((size_t)c->max_seqs, sizeof *c->seqs);
    if (!c->seqs) st = xf_errorf(XF_ENOMEM, "cpu backend: out of memory");
    for (int64_t s = 0; !st && s < c->max_seqs; s++) {
        c->seqs[s].slots = cpu_alloc(c, c->max_seq_len, sizeof(int64_t), &st);
        if (c->kvw) c->seqs[s].wslots = cpu_alloc(c, c->max_seq_len, sizeof(int64_t), &st);
        if (!st && c->mode == KV_ALLOC_SYSTEM) {
            c->seqs[s].k = calloc((size_t)L, sizeof(void *));
            c->seqs[s].v = calloc((size_t)L, sizeof(void *));
            if (!c->seqs[s].k || !c->seqs[s].v) st = xf_errorf(XF_ENOMEM, "cpu backend: out of memory");
        }
    }
    if (!st && c->mode == KV_ALLOC_POOL) {
        c->kpool = calloc((size_t)L, sizeof(void *));
        c->vpool = calloc((size_t)L, sizeof(void *));
        if (!c->kpool || !c->vpool) st = xf_errorf(XF_ENOMEM, "cpu backend: out of memory");
        if (!st && (c->kv_slots > INT64_MAX / c->kv_dim || c->kvw_slots > INT64_MAX / c->kv_dim))
            st = xf_errorf(XF_EOVERFLOW, "cpu backend: KV pool of %lld slots overflows", (long long)c->kv_slots);
        for (int64_t l = 0; !st && l < L; l++) {
            const int64_t slots = kv_layer_windowed(c, l) ? c->kvw_slots : c->kv_slots; /* windowed layers: their own pool */
            c->kpool[l] = cpu_alloc(c, slots * c->kv_dim, c->kv_esz, &st);
            if (!mla) c->vpool[l] = cpu_alloc(c, slots * c->kv_dim, c->kv_esz, &st); /* MLA: one latent row */
        }
    }
    c->tok_seq = cpu_alloc(c, T, sizeof(int64_t), &st);
    c->x = cpu_alloc(c, T * cfg->d_model, 4, &st);
    c->xn = cpu_alloc(c, T * cfg->d_model, 4, &st);
    c->qkv = cpu_alloc(c, T * c->qkv_dim, 4, &st);
    c->att = cpu_alloc(c, T * c->q_dim, 4, &st);
    c->proj = cpu_alloc(c, T * cfg->d_model, 4, &st);
    c->gu = cpu_alloc(c, T * 2 * cfg->d_ff, 4, &st);
    c->hff = cpu_alloc(c, T * cfg->d_ff, 4, &st);
    c->last = cpu_alloc(c, c->max_seqs * cfg->d_model, 4, &st);
    c->logits = cpu_alloc(c, c->max_seqs * cfg->vocab, 4, &st);
    c->sampled = cpu_alloc(c, c->max_seqs, sizeof(int32_t), &st);
    c->att_scratch_n = xk_attn_thread_floats(cfg->n_kv_heads * c->n_rep, cfg->head_dim);
    c->att_scratch = cpu_alloc(c, c->threads * c->att_scratch_n, 4, &st);
    c->att_items = cpu_alloc(c, c->max_seqs + 1, sizeof(int64_t), &st);
    c->att_q = cpu_alloc(c, T, sizeof(xk_attn_query), &st);
    c->att_w.items = cpu_alloc(c, T + 1, sizeof(int64_t), &st);
    c->att_w.part_o = cpu_alloc(c, XK_ATT_SPLIT_ITEMS * XK_ATT_MAX_PARTS * c->n_rep * cfg->head_dim, 4, &st);
    c->att_w.part_ml = cpu_alloc(c, XK_ATT_SPLIT_ITEMS * XK_ATT_MAX_PARTS * 2 * c->n_rep, 4, &st);
    c->att_w.scratch = c->att_scratch;
    c->att_w.scratch_n = c->att_scratch_n;
    if (!st && T >= CPU_ATT_MIN_TOKENS) {
        /* counted by model_mem_of too (reference_model/model.c) */
        c->att_tiles_n = xk_attn_prefill_floats(c->max_seq_len, c->n_rep, cfg->head_dim);
        if (c->att_tiles_n < 0 || c->att_tiles_n > INT64_MAX / c->threads)
            st = xf_errorf(XF_EOVERFLOW, "cpu backend: attention tiles of %d threads x %lld positions x head_dim %lld overflow: "
                           "give a smaller --prompt + --gen or fewer --threads", c->threads, (long long)c->max_seq_len,
                           (long long)cfg->head_dim);
        c->att_tiles = cpu_alloc(c, (int64_t)c->threads * c->att_tiles_n, 4, &st);
    }
    if (mla) {
        const int64_t qh = cfg->qk_nope_head_dim + cfg->qk_rope_head_dim, dec = cfg->n_heads * (cfg->qk_nope_head_dim + cfg->v_head_dim);
        c->mla_q = cpu_alloc(c, T * cfg->n_heads * qh, 4, &st);
        c->mla_qa = cpu_alloc(c, T * (cfg->q_lora_rank > 0 ? cfg->q_lora_rank : 1), 4, &st);
        c->mla_ckv = cpu_alloc(c, c->max_seq_len * cfg->kv_lora_rank, 4, &st);
        c->mla_krope = cpu_alloc(c, c->max_seq_len * cfg->qk_rope_head_dim, 4, &st);
        if (!cfg->mla_absorbed) { /* the naive form decompresses a whole context */
            if (!st && c->max_seq_len > INT64_MAX / 4 / dec) st = xf_errorf(XF_EOVERFLOW, "cpu backend: the decompressed K and V overflow");
            c->mla_kvdec = cpu_alloc(c, c->max_seq_len * dec, 4, &st);
        } else { /* the absorbed form: queries and outputs in the latent space, one head's kv_b block per thread */
            const int64_t r = cfg->kv_lora_rank, wide = cfg->qk_nope_head_dim > cfg->v_head_dim ? cfg->qk_nope_head_dim : cfg->v_head_dim;
            c->mla_qabs = cpu_alloc(c, T * cfg->n_heads * (r + cfg->qk_rope_head_dim), 4, &st);
            c->mla_olat = cpu_alloc(c, T * cfg->n_heads * r, 4, &st);
            c->mla_wabs_n = (wide * r + 15) & ~(int64_t)15;
            c->mla_wabs = cpu_alloc(c, (int64_t)c->threads * c->mla_wabs_n, 4, &st);
        }
        c->mla_scores_n = ((c->max_seq_len > c->kv_dim ? c->max_seq_len : c->kv_dim) + 15) & ~(int64_t)15; /* scores, a latent row */
        c->mla_scores = cpu_alloc(c, (int64_t)c->threads * c->mla_scores_n, 4, &st);
    }
    if (c->w->dtype == XF_INT8) {
        int64_t max_cols = cpu_dense_max_cols(cfg, c->q_dim);
        if (mla && cfg->q_lora_rank > max_cols) max_cols = cfg->q_lora_rank;
        if (mla && cfg->kv_lora_rank > max_cols) max_cols = cfg->kv_lora_rank;
        max_cols = max_cols > cfg->d_ff_expert ? max_cols : cfg->d_ff_expert; /* the experts' down inputs */
        max_cols = max_cols > cfg->d_ff_shared ? max_cols : cfg->d_ff_shared;
        c->aq = cpu_alloc(c, max_cols, sizeof(int16_t), &st);
        c->as = cpu_alloc(c, max_cols, sizeof(float), &st);
        /* decode's int8 inputs (cpu_kernels.h), sized for the widest packed matrix of any layer: layers
         * differ (a mixture-of-experts layer has no dense FFN, mlp_only_layers / first_k_dense_replace do) */
        int64_t qc = 1, ng = 1;
        for (int64_t l = 0; l <= cfg->n_layers; l++) {
            const layer_weights *L = l < cfg->n_layers ? &c->w->layers[l] : NULL;
            const wmat *ms[4] = {L ? &L->qkv : &c->w->lm_head, L ? &L->o : NULL, L ? &L->gate_up : NULL, L ? &L->down : NULL};
            for (int i = 0; i < 4; i++) {
                if (!ms[i] || !ms[i]->packed) continue;
                qc = xk_act8_cols(ms[i]) > qc ? xk_act8_cols(ms[i]) : qc;
                ng = ms[i]->n_groups > ng ? ms[i]->n_groups : ng;
            }
        }
        /* with AVX-512 VNNI or AMX tiles prefill runs the same kernel (xk_a8_prefill): buffers for every
         * token of a step. Without it, prefill's fp32 GEMM on dequantized tiles ran 9-14x slower than
         * the VNNI kernel at 32-64 tokens on a Zen 5 (tinyllama TTFT 824 ms at 32 tokens, 77 ms at 31) */
        c->a8_tokens = xk_a8_prefill(c->isa) ? T : T < CPU_GEMM_MIN_TOKENS - 1 ? T : CPU_GEMM_MIN_TOKENS - 1;
        c->a8q = cpu_alloc(c, c->a8_tokens * qc, 1, &st);
        c->a8s = cpu_alloc(c, c->a8_tokens * ng, sizeof(float), &st);
        c->a8c = cpu_alloc(c, c->a8_tokens * ng, sizeof(int32_t), &st);
    }
    const int own_amx = c->w->dtype == XF_BF16 && T >= CPU_AMX_MIN_TOKENS && c->isa == XK_ISA_AVX512 && amx_bf16_granted();
    if (!st && c->w->dtype == XF_BF16 && T >= CPU_GEMM_MIN_TOKENS && cpu_dnnl_bf16_here()) {
        /* prefill GEMMs on AMX through oneDNN (cpu_dnnl.h): the input as 3 bf16 parts, or rounded (one) */
        int64_t max_cols = cpu_dense_max_cols(cfg, c->q_dim);
        if (cpu_dnnl_init(&c->dnnl, c->threads) == XF_OK && !own_amx) /* else the fp32 path, as without oneDNN */
            c->bfx = cpu_alloc(c, T * (c->bf16_round ? 1 : 3) * max_cols, sizeof(uint16_t), &st);
    }
    if (!st && own_amx) {
        /* batched decode and prefill on own AMX tiles (cpu_amx.h); wider inputs (experts, latent
         * ranks) than these, or more rows (kv_b over a context), take the other paths */
        int64_t max_cols = cpu_dense_max_cols(cfg, c->q_dim);
        const int parts = c->bf16_round ? 1 : 3;
        c->amx_bf16 = 1;
        c->amx_tokens = T;
        c->amx_cols = max_cols;
        c->amx_xb = cpu_alloc(c, amx_bf16_input_elems(T, max_cols, parts), sizeof(uint16_t), &st);
        /* work items of up to CPU_AMX_BF16_ROWS rows, fewer where T tokens' C would pass the budget */
        const int64_t rb_fit = CPU_AMX_BF16_SCRATCH / (((T + 31) / 32) * 4096) * 32;
        c->amx_rows = rb_fit < CPU_AMX_ROWS ? CPU_AMX_ROWS : rb_fit > CPU_AMX_BF16_ROWS ? CPU_AMX_BF16_ROWS : rb_fit;
        c->amx_c_n = amx_bf16_scratch_floats(c->amx_rows, T);
        c->amx_c = cpu_alloc(c, (int64_t)c->threads * c->amx_c_n, sizeof(float), &st);
        /* touched now, not in the first prefill that reaches their end (its page faults were
         * timed as the tiles' cost) */
        if (!st) memset(c->amx_xb, 0, (size_t)amx_bf16_input_elems(T, max_cols, parts) * sizeof(uint16_t));
        if (!st) memset(c->amx_c, 0, (size_t)((int64_t)c->threads * c->amx_c_n) * sizeof(float));
        if (c->dnnl) c->bfx = c->amx_xb; /* oneDNN's planar parts fit the same buffer: (parts, T, cols) <= it */
    }
    c->rope_inv = cpu_alloc(c, cfg->head_dim / 2, sizeof(double), &st);
    if (!st) st = config_rope_freqs(cfg, c->rope_inv, &c->rope_scale);
    if (!st && cfg->rope_local_theta > 0) {
        int64_t lw = 0; /* a windowed layer, whose table the local one is */
        while (lw < cfg->n_layers && model_layer_window(cfg, lw) == 0) lw++;
        c->rope_inv_local = cpu_alloc(c, cfg->head_dim / 2, sizeof(double), &st);
        if (!st) st = config_rope_freqs_layer(cfg, lw, c->rope_inv_local, &c->rope_scale_local);
    }
    for (int k = 0; !st && k < (c->rope_inv_local ? 2 : 1); k++) { /* latent attention: head_dim is qk_rope_head_dim */
        const double *inv = k ? c->rope_inv_local : c->rope_inv, sc = k ? c->rope_scale_local : c->rope_scale;
        const int64_t hd = cfg->head_dim, np = c->max_seq_len;
        float *tab = c->rope_tab[k] = cpu_alloc(c, np * hd, 4, &st);
        if (!st) {
#pragma omp parallel for num_threads(c->threads) schedule(static)
            for (int64_t p = 0; p < np; p++) xk_rope_table_freqs(tab + p * hd, tab + p * hd + hd / 2, p, inv, hd / 2, sc);
        }
    }
    if (!st && cfg->n_experts > 0) {
        st = cpu_moe_init(&c->moe, cfg, T, c->threads);
        c->bytes += cpu_moe_bytes(c->moe);
    }
    /* latent attention's kv_b runs over a whole context: as many rows as max_seq_len */
    if (c->w->dtype != XF_FP32 && (T >= CPU_GEMM_MIN_TOKENS || (mla && c->max_seq_len >= CPU_GEMM_MIN_TOKENS))) c->tiles = cpu_alloc(c, (int64_t)c->threads * CPU_TILE_FLOATS, 4, &st);
    if (st) {
        cpu_free(c);
        return st;
    }
    *out = c;
    return XF_OK;
}

/* ---- projections ---- */

/* Output rows per work item of the AMX tiles: each thread's share of the rows in equal pieces of at
 * most `most` rows, multiples of `align`, contiguous per thread under the static schedule. */
static int64_t cpu_amx_step(int64_t rows, int threads, int64_t most, int64_t align) {
    const int64_t per = (rows + threads - 1) / threads, pieces = (per + most - 1) / most;
    const int64_t step = ((per + pieces - 1) / pieces + align - 1) / align * align;
    return step > most ? most : step;
}

/* y (n, W->rows) = x (n, W->cols) . W^T. With packed int8 weights x is quantized to int8 (decode,
 * and prefill where xk_a8_prefill: AVX-512 VNNI or AMX tiles) or rounded to that grid in place
 * (prefill elsewhere: the fp32 GEMM);
 * bf16 prefill goes to oneDNN where built (cpu_dnnl.h); row-major int8 weights put x on the 16-bit grid of
 * cpu_kernels.h, in place for more than one token (every input buffer feeds one projection only). */
static void cpu_linear(cpu_ctx *c, const wmat *W, float *x, int64_t n, float *y) {
    const int64_t rows = W->rows, cols = W->cols;
    if (W->dtype == XF_INT8 && W->packed && n <= c->a8_tokens) { /* decode (and prefill, xk_a8_prefill): int8 inputs, u8 x s8 kernel */
        const int64_t qc = xk_act8_cols(W), ng = W->n_groups;
        if (n == 1) xk_act8_quantize_isa(c->isa, W, x, 1, c->a8q, c->a8s, c->a8c);
        /* on AMX tiles (4+ tokens) 64 rows a work item: the tiles take 4 blocks of 16 rows per input
         * tile (the same bits whatever the chunk); in prefill up to CPU_AMX_I8_BYTES of weights an
         * item, which stay in L2 for every token block */
        const int amx = n >= 4 && xk_a8_amx() && c->isa == XK_ISA_AVX512;
        int64_t most = CPU_AMX_I8_BYTES / (ng * W->gpad) / CPU_AMX_ROWS * CPU_AMX_ROWS;
        most = n <= 32 || most < CPU_AMX_ROWS ? CPU_AMX_ROWS : most > CPU_AMX_I8_ROWS ? CPU_AMX_I8_ROWS : most;
        const int64_t step = amx ? cpu_amx_step(rows, c->threads, most, CPU_AMX_ROWS) : CPU_MM_CHUNK;
        const int64_t chunks = (rows + step - 1) / step;
        const xk_isa isa = c->isa;
        if (n == 1) { /* decode at batch 1: each thread's chunks in one call, which reads them as several streams */
#pragma omp parallel num_threads(c->threads)
            {
                int64_t r0, r1;
                xk_share_rows(rows, step, omp_get_thread_num(), omp_get_num_threads(), &r0, &r1);
                if (r0 < r1) xk_matmul_a8(isa, W, c->a8q, c->a8s, c->a8c, 1, y, rows, r0, r1);
            }
            return;
        }
        /* more tokens: one parallel region, the tokens quantized (split over the threads), then the
         * fixed chunks of rows (one fork and wake-up a call, not two) */
#pragma omp parallel num_threads(c->threads)
        {
#pragma omp for schedule(static)
            for (int64_t t = 0; t < n; t++)
                xk_act8_quantize_isa(isa, W, x + t * cols, 1, c->a8q + t * qc, c->a8s + t * ng, c->a8c + t * ng);
#pragma omp for schedule(static)
            for (int64_t ch = 0; ch < chunks; ch++) {
                int64_t r0 = ch * step, r1 = r0 + step < rows ? r0 + step : rows;
                xk_matmul_a8(isa, W, c->a8q, c->a8s, c->a8c, n, y, rows, r0, r1);
            }
        }
        return;
    }
    if (c->amx_bf16 && n >= CPU_AMX_MIN_TOKENS && n <= c->amx_tokens && cols <= c->amx_cols && amx_bf16_fits(W)) {
        /* bf16 on own AMX tiles (batched decode and prefill): x packed as 1 rounded or 3 exact parts */
        const int parts = c->bf16_round ? 1 : 3;
        /* work items: each thread's share of the rows in equal pieces of at most amx_rows, 32-row
         * multiples, contiguous per thread under the static schedule; 64 rows where the input fits L2 */
        const int64_t most = amx_bf16_input_elems(n, cols, parts) * 2 > CPU_AMX_BF16_L2 ? c->amx_rows : CPU_AMX_ROWS;
        const int64_t step = cpu_amx_step(rows, c->threads, most, 32);
        const int64_t nb = (n + 15) / 16, chunks = (rows + step - 1) / step;
        /* one parallel region: the input's token blocks, then fixed chunks of rows (the threads
         * split N; a row's sums do not depend on the chunk anyway) */
#pragma omp parallel num_threads(c->threads)
        {
#pragma omp for schedule(static)
            for (int64_t b = 0; b < nb; b++) {
                const int64_t t1 = (b + 1) * 16 < n ? (b + 1) * 16 : n;
                if (c->bf16_round) xk_bf16_round(x + b * 16 * cols, t1 - b * 16, cols, NULL);
                amx_bf16_pack_input(x, n, cols, parts, b, b + 1, c->amx_xb);
            }
#pragma omp for schedule(static)
            for (int64_t ch = 0; ch < chunks; ch++) {
                const int64_t r0 = ch * step, r1 = r0 + step < rows ? r0 + step : rows;
                amx_matmul_bf16(W, c->amx_xb, parts, n, y, rows, r0, r1, c->amx_c + (int64_t)omp_get_thread_num() * c->amx_c_n);
            }
        }
        return;
    }
    if (W->dtype == XF_BF16 && c->bf16_round) { /* rounded inputs: x to bf16 in place, every phase */
        /* decode keeps the widen-and-FMA kernel on the rounded x (each product exact in fp32): a
         * one-part vdpbf16ps kernel measured 10% slower from cache at 16 tokens (224 vs 248 GFLOP/s,
         * 2 threads, busy machine), where batched bf16 decode is compute-bound */
        const int dn = c->dnnl && n >= CPU_GEMM_MIN_TOKENS;
#pragma omp parallel for num_threads(c->threads) schedule(static) if (n >= 4)
        for (int64_t t = 0; t < n; t++) xk_bf16_round(x + t * cols, 1, cols, dn ? c->bfx + t * cols : NULL);
        if (dn && cpu_dnnl_gemm_bf16(c->dnnl, W, c->bfx, n, y, rows) == XF_OK) return; /* one AMX pass */
    } else if (W->dtype == XF_BF16 && c->dnnl && n >= CPU_GEMM_MIN_TOKENS) { /* prefill: oneDNN (AMX where granted) */
#pragma omp parallel for num_threads(c->threads) schedule(static)
        for (int64_t t = 0; t < n; t++) xk_bf16x3_split_planar(x, n, cols, t, t + 1, c->bfx);
        if (cpu_dnnl_gemm_bf16x3(c->dnnl, W, c->bfx, n, y, rows) == XF_OK) return;
        /* a oneDNN failure (it said why in the thread's message) leaves y to the fp32 path below */
    }
    if (W->dtype == XF_INT8 && W->packed) xk_act8_round(x, n, cols, W->group); /* prefill: the same int8 grid in fp32 */
    const int q16 = W->dtype == XF_INT8 && !W->packed && n == 1; /* row-major int8: the int16 x int8 kernel */
    if (q16) xk_act16_quantize(x, cols, W->group, c->aq, c->as);
    else if (W->dtype == XF_INT8 && !W->packed) xk_act16_round(x, n, cols, W->group);
    if (n <= 2 && !q16) {
        /* one or two tokens: each thread its share of the rows in one call, which the kernel reads as
         * 8 (4) runs side by side (cpu_kernels.c; 4 runs at 4-16 tokens measured 0.84-0.96x) */
        const xk_isa isa = c->isa;
#pragma omp parallel num_threads(c->threads)
        {
            int64_t r0, r1;
            xk_share_rows(rows, CPU_MM_CHUNK, omp_get_thread_num(), omp_get_num_threads(), &r0, &r1);
            if (r0 < r1) xk_matmul(isa, W, x, n, y, rows, r0, r1);
        }
        return;
    }
    if (n < CPU_GEMM_MIN_TOKENS) {
        const int64_t chunks = (rows + CPU_MM_CHUNK - 1) / CPU_MM_CHUNK;
        const xk_isa isa = c->isa;
#pragma omp parallel for num_threads(c->threads) schedule(static)
        for (int64_t ch = 0; ch < chunks; ch++) {
            int64_t r0 = ch * CPU_MM_CHUNK, r1 = r0 + CPU_MM_CHUNK < rows ? r0 + CPU_MM_CHUNK : rows;
            if (q16) xk_matvec_i8a16(isa, W, c->aq, c->as, y, r0, r1);
            else xk_matmul(isa, W, x, n, y, rows, r0, r1);
        }
        return;
    }
    int64_t tile_rows = CPU_TILE_FLOATS / cols;
    if (tile_rows < 1) tile_rows = 1;
    /* Fixed chunks of CPU_GEMM_ROWS output rows, one GEMM call each, dealt to the threads: the
     * calls' shapes (and so OpenBLAS's choice of kernel and blocking, which decides the order of
     * each sum) do not depend on the thread count. */
    const int64_t n_chunks = (rows + CPU_GEMM_ROWS - 1) / CPU_GEMM_ROWS;
#pragma omp parallel for num_threads(c->threads) schedule(static)
    for (int64_t ch = 0; ch < n_chunks; ch++) {
        const int64_t r0 = ch * CPU_GEMM_ROWS, r1 = r0 + CPU_GEMM_ROWS < rows ? r0 + CPU_GEMM_ROWS : rows;
        if (W->dtype == XF_FP32) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)(r1 - r0), (blasint)cols, 1.0f, x,
                        (blasint)cols, (const float *)W->data + r0 * cols, (blasint)cols, 0.0f, y + r0, (blasint)rows);
        } else {
            float *tile = c->tiles + (int64_t)omp_get_thread_num() * CPU_TILE_FLOATS;
            for (int64_t t0 = r0; t0 < r1; t0 += tile_rows) {
                int64_t t1 = t0 + tile_rows < r1 ? t0 + tile_rows : r1;
                xk_dequant_rows(W, t0, t1, tile);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)(t1 - t0), (blasint)cols,
                            1.0f, x, (blasint)cols, tile, (blasint)cols, 0.0f, y + t0, (blasint)rows);
            }
        }
    }
}

/* The experts' projections (cpu_moe.h): with fp32 / bf16 / fp16 weights and few rows each (decode),
 * the output rows of all of them in CPU_MM_CHUNK chunks dealt to the threads in one parallel
 * region (one fork and barrier per op, not per expert; every chunk is computed as cpu_linear
 * computes it, so the results are the same); otherwise cpu_linear one after the other. */
static void cpu_moe_lin(void *be, int count, const wmat *const *W, float *const *x, const int64_t *n, float *const *y) {
    cpu_ctx *c = be;
    int direct = count <= 1024;
    for (int i = 0; direct && i < count; i++) direct = W[i]->dtype != XF_INT8 && n[i] < CPU_GEMM_MIN_TOKENS;
    if (!direct) {
        for (int i = 0; i < count; i++) cpu_linear(c, W[i], x[i], n[i], y[i]);
        return;
    }
    int64_t pre[1025]; /* chunks before projection i */
    pre[0] = 0;
    for (int i = 0; i < count; i++) pre[i + 1] = pre[i] + (W[i]->rows + CPU_MM_CHUNK - 1) / CPU_MM_CHUNK;
    const xk_isa isa = c->isa;
#pragma omp parallel for num_threads(c->threads) schedule(static) if (pre[count] > 1)
    for (int64_t ch = 0; ch < pre[count]; ch++) {
        int lo = 0, hi = count - 1; /* the projection holding chunk ch: pre[lo] <= ch < pre[lo + 1] */
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (pre[mid] <= ch) lo = mid;
            else hi = mid - 1;
        }
        const int64_t rows = W[lo]->rows, r0 = (ch - pre[lo]) * CPU_MM_CHUNK, r1 = r0 + CPU_MM_CHUNK < rows ? r0 + CPU_MM_CHUNK : rows;
        xk_matmul(isa, W[lo], x[lo], n[lo], y[lo], rows, r0, r1);
    }
}

/* ---- KV ---- */

static inline char *kv_k_base(cpu_ctx *c, int layer, int64_t s) {
    return c->mode == KV_ALLOC_POOL ? c->kpool[layer] : c->seqs[s].k[layer];
}
static inline char *kv_v_base(cpu_ctx *c, int layer, int64_t s) {
    return c->mode == KV_ALLOC_POOL ? c->vpool[layer] : c->seqs[s].v[layer];
}

/* Makes room for the step's new tokens and resolves their positions to slots. */
static xf_status cpu_kv_alloc(cpu_ctx *c, const step_batch *b) {
    const int64_t row_bytes = c->kv_dim * c->kv_esz;
    if (c->mode == KV_ALLOC_POOL) {
        /* Copies the managers ask for (copy-on-write of shared blocks) come first, each pool's in its layers. */
        for (int pool = 0; pool < (c->kvw ? 2 : 1); pool++) {
            kv_cache *kv = pool ? c->kvw : c->kv;
            int64_t ncp = 0;
            const kv_copy *cp = kv_cache_copies(kv, &ncp);
            for (int64_t i = 0; i < ncp; i++) {
                for (int64_t l = 0; l < c->cfg.n_layers; l++) {
                    if (kv_layer_windowed(c, l) != pool) continue;
                    memmove((char *)c->kpool[l] + cp[i].dst_slot * row_bytes, (char *)c->kpool[l] + cp[i].src_slot * row_bytes,
                            (size_t)(cp[i].n_slots * row_bytes));
                    if (c->vpool[l]) /* none for latent attention */
                        memmove((char *)c->vpool[l] + cp[i].dst_slot * row_bytes, (char *)c->vpool[l] + cp[i].src_slot * row_bytes,
                                (size_t)(cp[i].n_slots * row_bytes));
                }
            }
            if (ncp) kv_cache_clear_copies(kv);
        }
    }
    for (int s = 0; s < b->n_seqs; s++) {
        const step_seq *q = &b->seqs[s];
        cpu_seq *cs = &c->seqs[s];
        const int64_t need = q->pos + q->n_new;
        if (q->pos < 0 || q->n_new < 1 || need > c->max_seq_len)
            return xf_errorf(XF_EINVAL, "cpu backend: sequence %d at position %lld + %lld new tokens exceeds max_seq_len %lld",
                             s, (long long)q->pos, (long long)q->n_new, (long long)c->max_seq_len);
        if (c->mode == KV_ALLOC_POOL) {
            for (int64_t p = q->pos; p < need; p++) {
                int64_t slot = kv_cache_slot(c->kv, (int)q->kv_seq, p);
                if (slot < 0 || slot >= c->kv_slots)
                    return xf_errorf(XF_EINVAL, "cpu backend: the KV manager has no slot for sequence %lld position %lld",
                                     (long long)q->kv_seq, (long long)p);
                cs->slots[p] = slot;
                if (!c->kvw) continue;
                slot = kv_cache_slot(c->kvw, c->kvw_ids[s], p);
                if (slot < 0 || slot >= c->kvw_slots)
                    return xf_errorf(XF_EINVAL, "cpu backend: the windowed layers' KV manager has no slot for sequence %d position %lld",
                                     c->kvw_ids[s], (long long)p);
                cs->wslots[p] = slot;
            }
        } else {
            if (need > cs->cap) {
                /* What a naive engine does: a new buffer of exactly the new length, copy, free. */
                const int64_t keep = q->pos < cs->cap ? q->pos : cs->cap;
                for (int64_t l = 0; l < c->cfg.n_layers; l++) {
                    void *nk = malloc((size_t)(need * row_bytes)), *nv = malloc((size_t)(need * row_bytes));
                    if (!nk || !nv) {
                        free(nk);
                        free(nv);
                        return xf_errorf(XF_ENOMEM, "cpu backend: out of memory growing the KV of sequence %d to %lld tokens",
                                         s, (long long)need);
                    }
                    if (keep > 0) {
                        memcpy(nk, cs->k[l], (size_t)(keep * row_bytes));
                        memcpy(nv, cs->v[l], (size_t)(keep * row_bytes));
                    }
                    free(cs->k[l]);
                    free(cs->v[l]);
                    cs->k[l] = nk;
                    cs->v[l] = nv;
                }
                c->bytes += 2 * c->cfg.n_layers * (need - cs->cap) * row_bytes;
                cs->cap = need;
            }
            for (int64_t p = q->pos; p < need; p++) cs->slots[p] = p;
        }
        cs->len = need;
        for (int64_t t = b->tok_off[s]; t < b->tok_off[s + 1]; t++) c->tok_seq[t] = s;
    }
    return XF_OK;
}

/* ---- the ops ---- */

/* y (n, width) += bias (width) on every row: the projections' biases. */
static void cpu_add_bias(cpu_ctx *c, float *y, const float *bias, int64_t n, int64_t width) {
#pragma omp parallel for num_threads(c->threads) schedule(static) if (n * width >= CPU_PAR_MIN)
    for (int64_t t = 0; t < n; t++) xk_add(y + t * width, bias, width);
}

/* The absorbed form's two absorptions (cpu_mla.h), head by head with that head's block of kv_b
 * dequantized once: out_side 0, qabs = [W_UK^T q_nope | q_rot] of every token (qkv); 1, att rows
 * (n_heads * v_head_dim) = W_UV . each head's latent output (o_proj, before the o matrix). */
static void cpu_mla_absorb(cpu_ctx *c, const layer_weights *Lw, int64_t n, int out_side) {
    const model_config *cfg = &c->cfg;
    const int64_t h = cfg->n_heads, dn = cfg->qk_nope_head_dim, dr = cfg->qk_rope_head_dim, dv = cfg->v_head_dim,
                  r = cfg->kv_lora_rank, qh = dn + dr, rows = out_side ? dv : dn;
#pragma omp parallel num_threads(c->threads) if (n * h * rows * r >= CPU_PAR_MIN)
    {
        float *w = c->mla_wabs + (int64_t)omp_get_thread_num() * c->mla_wabs_n;
#pragma omp for schedule(static)
        for (int64_t hh = 0; hh < h; hh++) {
            const int64_t row0 = hh * (dn + dv) + (out_side ? dn : 0);
            xk_dequant_rows(&Lw->kv_b, row0, row0 + rows, w);
            for (int64_t t = 0; t < n; t++) {
                if (out_side) {
                    mla_absorb_rows(c->att + t * h * dv + hh * dv, w, c->mla_olat + (t * h + hh) * r, dv, r, 0);
                    continue;
                }
                float *qa = c->mla_qabs + (t * h + hh) * (r + dr);
                const float *q = c->mla_q + t * h * qh + hh * qh;
                mla_absorb_rows(qa, w, q, dn, r, 1);
                memcpy(qa + r, q + dn, (size_t)dr * sizeof(float)); /* rotated by the rope op */
            }
        }
    }
}

/* RoPE's table (rope_tab) has rows for positions 0 .. max_seq_len - 1 (the KV manager holds no
 * more): every sequence of the step within it, or an error naming the positions. */
static xf_status rope_positions_check(const cpu_ctx *c, const step_batch *b) {
    for (int s = 0; s < b->n_seqs; s++)
        if (b->seqs[s].pos < 0 || b->seqs[s].pos + b->seqs[s].n_new > c->max_seq_len)
            return xf_errorf(XF_EINVAL, "rope: positions %lld..%lld are outside 0..%lld (max_seq_len)", (long long)b->seqs[s].pos,
                             (long long)(b->seqs[s].pos + b->seqs[s].n_new - 1), (long long)c->max_seq_len - 1);
    return XF_OK;
}

/* Latent attention's qkv, rope, kv_append and attention (cpu_mla.h), in the config's form; o_proj
 * and the rest are the common code (att rows of n_heads * v_head_dim; the absorbed form's W_UV
 * first, cpu_mla_absorb). */
static xf_status cpu_mla_op(cpu_ctx *c, op_kind k, int layer, const step_batch *b, const layer_weights *Lw) {
    const model_config *cfg = &c->cfg;
    const int64_t n = b->n_tokens, h = cfg->n_heads, dn = cfg->qk_nope_head_dim, dr = cfg->qk_rope_head_dim,
                  dv = cfg->v_head_dim, r = cfg->kv_lora_rank, qr = cfg->q_lora_rank, qh = dn + dr, qw = h * qh;
    const int nth = c->threads;
    switch (k) {
    case OP_QKV:
        cpu_linear(c, &Lw->qkv, c->xn, n, c->qkv); /* [q_a | c_kv | k_rope] or [q | c_kv | k_rope] */
#pragma omp parallel for num_threads(nth) schedule(static) if (n * c->qkv_dim >= CPU_PAR_MIN)
        for (int64_t t = 0; t < n; t++) {
            float *row = c->qkv + t * c->qkv_dim;
            if (qr > 0) xk_rmsnorm(c->mla_qa + t * qr, row, Lw->q_a_norm, qr, MLA_NORM_EPS);
            else memcpy(c->mla_q + t * qw, row, (size_t)qw * sizeof(float));
            xk_rmsnorm(row + c->q_rows, row + c->q_rows, Lw->kv_a_norm, r, MLA_NORM_EPS);
        }
        if (qr > 0) cpu_linear(c, &Lw->q_b, c->mla_qa, n, c->mla_q);
        if (cfg->mla_absorbed) cpu_mla_absorb(c, Lw, n, 0);
        return XF_OK;
    case OP_ROPE: {
        xf_status st = rope_positions_check(c, b);
        if (st) return st;
#pragma omp parallel num_threads(nth) if (n * qw >= CPU_PAR_MIN)
        {
            float *scr = c->mla_scores + (int64_t)omp_get_thread_num() * c->mla_scores_n;
#pragma omp for schedule(static)
            for (int64_t t = 0; t < n; t++) {
                const int64_t s = c->tok_seq[t], pos = b->seqs[s].pos + (t - b->tok_off[s]);
                const float *cs = c->rope_tab[0] + pos * dr; /* cos | sin */
                for (int64_t hh = 0; hh < h; hh++) /* the absorbed form rotates its own copy of q_rot */
                    mla_rope(cfg->mla_absorbed ? c->mla_qabs + (t * h + hh) * (r + dr) + r : c->mla_q + t * qw + hh * qh + dn, dr, cs,
                             cs + dr / 2, cfg->rope_interleave, scr);
                mla_rope(c->qkv + t * c->qkv_dim + c->q_rows + r, dr, cs, cs + dr / 2, cfg->rope_interleave, scr);
            }
        }
        return XF_OK;
    }
    case OP_KV_APPEND: {
        const int64_t row_bytes = c->kv_dim * c->kv_esz;
        for (int64_t t = 0; t < n; t++) {
            const int64_t s = c->tok_seq[t], pos = b->seqs[s].pos + (t - b->tok_off[s]);
            xk_store(c->kpool[layer] + c->seqs[s].slots[pos] * row_bytes, c->kvdt, c->qkv + t * c->qkv_dim + c->q_rows, c->kv_dim);
        }
        return XF_OK;
    }
    case OP_ATTENTION: {
        const float scale = (float)config_softmax_scale(cfg);
        const int64_t row_bytes = c->kv_dim * c->kv_esz, ld = h * (dn + dv);
        for (int s = 0; s < b->n_seqs; s++) {
            const int64_t ctx_len = b->seqs[s].pos + b->seqs[s].n_new;
            const int64_t *slots = c->seqs[s].slots;
            /* the context's latents, fp32: c_kv (ctx, r) and k_rope (ctx, dr) */
            float *lat = c->mla_scores; /* thread 0's scratch holds one row at a time */
            for (int64_t j = 0; j < ctx_len; j++) {
                xk_load(lat, (const char *)c->kpool[layer] + slots[j] * row_bytes, c->kvdt, c->kv_dim);
                memcpy(c->mla_ckv + j * r, lat, (size_t)r * sizeof(float));
                memcpy(c->mla_krope + j * dr, lat + r, (size_t)dr * sizeof(float));
            }
            const int64_t t0 = b->tok_off[s], nn = b->tok_off[s + 1] - t0;
            if (cfg->mla_absorbed) { /* attention in the latent space: r-wide outputs, W_UV in o_proj */
#pragma omp parallel num_threads(nth) if (nn * h * ctx_len >= CPU_PAR_MIN / 16)
                {
                    float *sc = c->mla_scores + (int64_t)omp_get_thread_num() * c->mla_scores_n;
#pragma omp for schedule(static)
                    for (int64_t it = 0; it < nn * h; it++) {
                        const int64_t i = it / h, hh = it % h, pos = b->seqs[s].pos + i, row = (t0 + i) * h + hh;
                        mla_attend_latent(c->mla_olat + row * r, c->mla_qabs + row * (r + dr), r, dr, c->mla_ckv, c->mla_krope, pos + 1,
                                          scale, sc);
                    }
                }
                continue;
            }
            /* the naive form: every cached latent decompressed into each head's K_nope and V */
            cpu_linear(c, &Lw->kv_b, c->mla_ckv, ctx_len, c->mla_kvdec);
#pragma omp parallel num_threads(nth) if (nn * h * ctx_len >= CPU_PAR_MIN / 16)
            {
                float *sc = c->mla_scores + (int64_t)omp_get_thread_num() * c->mla_scores_n;
#pragma omp for schedule(static)
                for (int64_t it = 0; it < nn * h; it++) {
                    const int64_t i = it / h, hh = it % h, pos = b->seqs[s].pos + i;
                    mla_attend_head(c->att + (t0 + i) * h * dv + hh * dv, c->mla_q + (t0 + i) * qw + hh * qh, dn, dr, dv,
                                    c->mla_kvdec + hh * (dn + dv), ld, c->mla_krope, pos + 1, scale, sc);
                }
            }
        }
        return XF_OK;
    }
    default:
        return xf_errorf(XF_EINVAL, "cpu backend: op %d is not one of latent attention's", (int)k);
    }
}

static xf_status cpu_run_op(void *ctx, op_kind k, int layer, const step_batch *b) {
    cpu_ctx *c = ctx;
    const model_config *cfg = &c->cfg;
    const int64_t n = b->n_tokens, d = cfg->d_model, hd = cfg->head_dim;
    if (n < 1 || n > c->max_tokens || b->n_seqs < 1 || b->n_seqs > c->max_seqs)
        return xf_errorf(XF_EINVAL, "cpu backend: a step of %lld tokens in %d sequences exceeds the sizes given at init (%lld, %lld)",
                         (long long)n, b->n_seqs, (long long)c->max_tokens, (long long)c->max_seqs);
    const layer_weights *Lw = NULL;
    if (op_kind_is_per_layer(k)) {
        if (layer < 0 || layer >= cfg->n_layers) return xf_errorf(XF_EINVAL, "cpu backend: layer %d out of range", layer);
        Lw = &c->w->layers[layer];
    }
    const int nth = c->threads;
    if (model_is_mla(cfg) && (k == OP_QKV || k == OP_ROPE || k == OP_KV_APPEND || k == OP_ATTENTION))
        return cpu_mla_op(c, k, layer, b, Lw);
    switch (k) {
    case OP_KV_ALLOC:
        return cpu_kv_alloc(c, b);
    case OP_EMBEDDING: {
        const wmat *E = &c->w->embed;
        for (int64_t t = 0; t < n; t++)
            if (b->tokens[t] < 0 || b->tokens[t] >= cfg->vocab)
                return xf_errorf(XF_EINVAL, "token id %d is outside the vocabulary [0, %lld)", b->tokens[t], (long long)cfg->vocab);
        const float es = (float)cfg->embed_scale; /* gemma3: sqrt(d_model) in fp32 */
#pragma omp parallel for num_threads(nth) schedule(static) if (n * d >= CPU_PAR_MIN)
        for (int64_t t = 0; t < n; t++) {
            xk_dequant_rows(E, b->tokens[t], b->tokens[t] + 1, c->x + t * d);
            for (int64_t i = 0; es != 0 && i < d; i++) c->x[t * d + i] *= es;
        }
        return XF_OK;
    }
    case OP_ATTN_NORM:
    case OP_FFN_NORM: {
        const float *wn = k == OP_ATTN_NORM ? Lw->attn_norm : Lw->ffn_norm;
#pragma omp parallel for num_threads(nth) schedule(static) if (n * d >= CPU_PAR_MIN)
        for (int64_t t = 0; t < n; t++) xk_rmsnorm(c->xn + t * d, c->x + t * d, wn, d, (float)cfg->norm_eps);
        return XF_OK;
    }
    case OP_QKV:
        cpu_linear(c, &Lw->qkv, c->xn, n, c->qkv);
        if (Lw->qkv_bias) cpu_add_bias(c, c->qkv, Lw->qkv_bias, n, c->qkv_dim);
        return XF_OK;
    case OP_ROPE: {
        const float *tab = c->rope_tab[c->rope_inv_local && model_layer_window(cfg, layer) > 0]; /* gemma3's local RoPE base */
        xf_status st = rope_positions_check(c, b);
        if (st) return st;
#pragma omp parallel for num_threads(nth) schedule(static) if (n * c->qkv_dim >= CPU_PAR_MIN)
        for (int64_t t = 0; t < n; t++) {
            const int64_t s = c->tok_seq[t], pos = b->seqs[s].pos + (t - b->tok_off[s]);
            const float *cs = tab + pos * hd; /* cos | sin */
            float *row = c->qkv + t * c->qkv_dim;
            if (Lw->q_norm) { /* qwen3: RMSNorm of every Q and K head over head_dim, before the rotation */
                for (int64_t h = 0; h < cfg->n_heads; h++) xk_rmsnorm(row + h * hd, row + h * hd, Lw->q_norm, hd, (float)cfg->norm_eps);
                for (int64_t h = 0; h < cfg->n_kv_heads; h++)
                    xk_rmsnorm(row + c->q_dim + h * hd, row + c->q_dim + h * hd, Lw->k_norm, hd, (float)cfg->norm_eps);
            }
            xk_rope(row, cfg->n_heads, hd, cs, cs + hd / 2);
            xk_rope(row + c->q_dim, cfg->n_kv_heads, hd, cs, cs + hd / 2);
        }
        return XF_OK;
    }
    case OP_KV_APPEND: {
        const int64_t row_bytes = c->kv_dim * c->kv_esz;
#pragma omp parallel for num_threads(nth) schedule(static) if (n * c->kv_dim >= CPU_PAR_MIN)
        for (int64_t t = 0; t < n; t++) {
            const int64_t s = c->tok_seq[t], pos = b->seqs[s].pos + (t - b->tok_off[s]);
            const int64_t slot = kv_slot_table(c, layer, s)[pos];
            const float *row = c->qkv + t * c->qkv_dim;
            xk_store(kv_k_base(c, layer, s) + slot * row_bytes, c->kvdt, row + c->q_dim, c->kv_dim);
            xk_store(kv_v_base(c, layer, s) + slot * row_bytes, c->kvdt, row + c->q_dim + c->kv_dim, c->kv_dim);
        }
        return XF_OK;
    }
    case OP_ATTENTION: {
        const int64_t nkv = cfg->n_kv_heads, nrep = c->n_rep, qpb = xk_attn_block_queries(nrep);
        const float scale = (float)config_softmax_scale(cfg); /* 1 / sqrt(head_dim), gemma3's 1 / sqrt(query_pre_attn_scalar) */
        /* A sliding-window layer: query at position p sees keys p - win + 1 .. p (transformers'
         * key > query - window); it takes the per-query kernel for every sequence. */
        const int64_t win = model_layer_window(cfg, layer);
        /* Sequences with CPU_ATT_MIN_TOKENS or more new tokens: items (sequence, KV head, query
         * block), the blocks of a head last to first so the largest come first; att_items[s] =
         * items before sequence s. The others go to xk_attention_batch. */
        int64_t *io = c->att_items;
        io[0] = 0;
        for (int s = 0; s < b->n_seqs; s++) {
            const int64_t nn = b->tok_off[s + 1] - b->tok_off[s];
            io[s + 1] = io[s] + (!win && c->att_tiles && nn >= CPU_ATT_MIN_TOKENS ? (nn + qpb - 1) / qpb * nkv : 0);
        }
        const int64_t bitems = io[b->n_seqs];
#pragma omp parallel num_threads(nth) if (bitems > 0)
        {
            const int id = omp_get_thread_num();
            /* this thread's tiles hold positions [0, have_n) of KV head have_g of sequence have_s:
             * each thread gathers a (sequence, head) once, largest block first */
            float *kt = c->att_tiles ? c->att_tiles + (int64_t)id * c->att_tiles_n : NULL;
            float *vt = kt ? kt + ((c->max_seq_len * hd + 15) & ~(int64_t)15) : NULL;
            float *bscr = vt ? vt + ((c->max_seq_len * hd + 15) & ~(int64_t)15) : NULL;
            int64_t have_s = -1, have_g = -1, have_n = 0;
#pragma omp for schedule(dynamic, 1)
            for (int64_t it = 0; it < bitems; it++) {
                int64_t s = 0;
                while (io[s + 1] <= it) s++;
                const int64_t nn = b->tok_off[s + 1] - b->tok_off[s], nqb = (nn + qpb - 1) / qpb, loc = it - io[s];
                const int64_t g = loc / nqb, qb = nqb - 1 - loc % nqb;
                const int64_t q0 = qb * qpb, nq = nn - q0 < qpb ? nn - q0 : qpb, pos0 = b->seqs[s].pos + q0;
                if (have_s != s || have_g != g) {
                    have_s = s;
                    have_g = g;
                    have_n = 0;
                }
                if (pos0 + nq > have_n) {
                    xk_attn_gather(kt, vt, kv_k_base(c, layer, s), kv_v_base(c, layer, s), c->kvdt, c->kv_dim, g * hd,
                                   kv_slot_table(c, layer, s), have_n, pos0 + nq, hd);
                    have_n = pos0 + nq;
                }
                const int64_t t0 = b->tok_off[s] + q0, qoff = g * nrep * hd;
                xk_attention_causal(c->isa, c->att + t0 * c->q_dim + qoff, c->q_dim, c->qkv + t0 * c->qkv_dim + qoff,
                                    c->qkv_dim, nq, nrep, hd, pos0, kt, vt, scale, bscr);
            }
        }
        /* The other tokens (decode): one query each, keys read in place through the slot table. */
        int64_t nq = 0;
        for (int64_t t = 0; t < n; t++) {
            const int64_t s = c->tok_seq[t];
            if (io[s + 1] > io[s]) continue; /* done by the blocked items above */
            const int64_t pos = b->seqs[s].pos + (t - b->tok_off[s]);
            const int64_t lo = win && pos + 1 > win ? pos + 1 - win : 0; /* a window's first key */
            c->att_q[nq++] = (xk_attn_query){c->qkv + t * c->qkv_dim, c->att + t * c->q_dim, kv_k_base(c, layer, s),
                                             kv_v_base(c, layer, s), kv_slot_table(c, layer, s) + lo, pos + 1 - lo};
        }
        xk_attention_batch(c->isa, nth, c->att_q, nq, nkv, nrep, hd, c->kvdt, c->kv_dim, scale, &c->att_w);
        return XF_OK;
    }
    case OP_O_PROJ:
        if (model_is_mla(cfg) && cfg->mla_absorbed) cpu_mla_absorb(c, Lw, n, 1); /* W_UV . the latent outputs */
        cpu_linear(c, &Lw->o, c->att, n, c->proj);
        if (Lw->o_bias) cpu_add_bias(c, c->proj, Lw->o_bias, n, d);
        return XF_OK;
    case OP_ATTN_RESIDUAL:
    case OP_FFN_RESIDUAL: {
        /* gemma3: the sublayer's output goes through its post norm first (in this op's range) */
        const float *pn = k == OP_ATTN_RESIDUAL ? Lw->post_attn_norm : Lw->post_ffn_norm;
#pragma omp parallel for num_threads(nth) schedule(static) if (n * d >= CPU_PAR_MIN)
        for (int64_t t = 0; t < n; t++) {
            if (pn) xk_rmsnorm(c->proj + t * d, c->proj + t * d, pn, d, (float)cfg->norm_eps);
            xk_add(c->x + t * d, c->proj + t * d, d);
        }
        return XF_OK;
    }
    case OP_GATE_UP:
        if (Lw->exp_gate_up) return cpu_moe_gate_up(c->moe, Lw, layer, c->xn, n, cpu_moe_lin, c);
        cpu_linear(c, &Lw->gate_up, c->xn, n, c->gu);
        if (Lw->gate_up_bias) cpu_add_bias(c, c->gu, Lw->gate_up_bias, n, 2 * cfg->d_ff);
        return XF_OK;
    case OP_SWIGLU: {
        const int64_t ff = cfg->d_ff;
        if (Lw->exp_gate_up) {
            cpu_moe_swiglu(c->moe, n);
            return XF_OK;
        }
        /* per token; one token (decode) runs on the calling thread: a fork costs more than it */
#pragma omp parallel for num_threads(nth) schedule(static) if (n > 1 && n * ff >= CPU_PAR_MIN / 8)
        for (int64_t t = 0; t < n; t++)
            (cfg->ffn_gelu ? xk_geglu : xk_swiglu)(c->hff + t * ff, c->gu + t * 2 * ff, c->gu + t * 2 * ff + ff, ff);
        return XF_OK;
    }
    case OP_DOWN:
        if (Lw->exp_gate_up) {
            cpu_moe_down(c->moe, Lw, n, c->proj, cpu_moe_lin, c);
            return XF_OK;
        }
        cpu_linear(c, &Lw->down, c->hff, n, c->proj);
        if (Lw->down_bias) cpu_add_bias(c, c->proj, Lw->down_bias, n, d);
        return XF_OK;
    case OP_FINAL_NORM:
        for (int s = 0; s < b->n_seqs; s++)
            xk_rmsnorm(c->last + s * d, c->x + (b->tok_off[s + 1] - 1) * d, c->w->final_norm, d, (float)cfg->norm_eps);
        return XF_OK;
    case OP_LM_HEAD:
        cpu_linear(c, &c->w->lm_head, c->last, b->n_seqs, c->logits);
        return XF_OK;
    case OP_SAMPLING:
        for (int s = 0; s < b->n_seqs; s++) c->sampled[s] = (int32_t)xk_argmax(c->logits + s * cfg->vocab, cfg->vocab);
        return XF_OK;
    case OP_ALL_REDUCE: { /* tensor parallel: the partial sums of o_proj / down (row-parallel) over the ranks */
        if (!c->allreduce) return xf_errorf(XF_EINVAL, "cpu backend: an all-reduce on one device");
        char what[64];
        snprintf(what, sizeof what, "the all-reduce of layer %d", layer);
        return c->allreduce(c->allreduce_ctx, c->proj, n * d, what);
    }
    default:
        return xf_errorf(XF_EINVAL, "cpu backend: unknown op %d", (int)k);
    }
}

static xf_status cpu_sync(void *ctx) {
    (void)ctx;
    return XF_OK;
}

static xf_status cpu_read_logits(void *ctx, float *out, int64_t n_seqs) {
    cpu_ctx *c = ctx;
    if (n_seqs < 0 || n_seqs > c->max_seqs) return xf_errorf(XF_EINVAL, "cpu backend: %lld sequences of logits asked", (long long)n_seqs);
    memcpy(out, c->logits, (size_t)(n_seqs * c->cfg.vocab) * sizeof(float));
    return XF_OK;
}

static xf_status cpu_read_tokens(void *ctx, int32_t *out, int64_t n_seqs) {
    cpu_ctx *c = ctx;
    if (n_seqs < 0 || n_seqs > c->max_seqs) return xf_errorf(XF_EINVAL, "cpu backend: %lld sequences of tokens asked", (long long)n_seqs);
    memcpy(out, c->sampled, (size_t)n_seqs * sizeof(int32_t));
    return XF_OK;
}

static void cpu_seq_release(void *ctx, int64_t seq) {
    cpu_ctx *c = ctx;
    if (!c || seq < 0 || seq >= c->max_seqs) return;
    cpu_seq_free_kv(c, &c->seqs[seq]);
    c->seqs[seq].len = 0;
}

static int64_t cpu_mem_bytes(void *ctx) { return ((cpu_ctx *)ctx)->bytes; }

static const int64_t *cpu_expert_counts(void *ctx, int layer) {
    const cpu_ctx *c = ctx;
    return c->moe && model_layer_is_moe(&c->cfg, layer) ? cpu_moe_counts(c->moe, layer) : NULL;
}

/* ---- which BLAS kernels ---- */

char *openblas_get_corename(void); /* OpenBLAS's own API (not in every cblas.h) */

const backend_ops cpu_backend_ops = {
    .name = "cpu",
    .init = cpu_init,
    .free_ctx = cpu_free,
    .run_op = cpu_run_op,
    .sync = cpu_sync,
    .read_logits = cpu_read_logits,
    .read_tokens = cpu_read_tokens,
    .seq_release = cpu_seq_release,
    .mem_bytes = cpu_mem_bytes,
    .expert_counts = cpu_expert_counts,
};
