/* The model runner: see model.h. */
#include "reference_model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "reference_model/cpu_attention.h"
#include "reference_model/cpu_moe.h"
#include "reference_model/kv_cache.h"
#include "core/cpu_dispatch.h"
#include "core/limits.h"
#include "core/sysmem.h"
#include "reference_model/safetensors.h"
#include "reference_model/weights.h"
#include "reference_model/cpu_dnnl.h"

#ifdef XFPROF_HAVE_CUDA_BACKEND
extern const backend_ops cuda_backend_ops; /* defined by the CUDA backend when it is built */
#endif

const backend_ops *backend_find(const char *name) {
    if (!name || !strcasecmp(name, "cpu")) return &cpu_backend_ops;
#ifdef XFPROF_HAVE_CUDA_BACKEND
    if (!strncasecmp(name, "cuda", 4)) return &cuda_backend_ops;
#endif
    return NULL;
}

struct model {
    model_config cfg;
    model_options opt;
    char kv_policy[32];
    char backend_name[16];
    model_weights *w;
    kv_cache *kv;           /* pool mode only */
    kv_cache *kvw;          /* the windowed layers' own pool (win_pool_layers < n_layers), else NULL */
    int *kvw_ids;           /* (max_seqs) their ids in kvw, -1 when none */
    int win_all;            /* 1: every layer windowed and kv releases their out-of-window blocks */
    const backend_ops *be;
    void *bctx;
    model_mem mem;
    int64_t max_tokens;     /* max_seqs * max_prompt */
    int n_seqs;             /* live sequences, 0 before the first prefill */
    int *kv_ids;            /* (max_seqs) KV manager ids, -1 when none */
    int64_t *seq_len;       /* (max_seqs) tokens in KV */
    int32_t *gen;           /* (max_seqs, max_seq_len) generated tokens */
    int64_t *n_gen;         /* (max_seqs) */
    float *logits;          /* (max_seqs, vocab) last step's logits */
    int64_t decode_steps;
    step_seq *sseq;         /* (max_seqs) */
    int64_t *tok_off;       /* (max_seqs + 1) */
    int32_t *tok;           /* (max_tokens) */
    int32_t *sampled;       /* (max_seqs) */
    int64_t *exp_tokens;    /* (XF_PHASE_COUNT, n_layers, n_experts) MoE: tokens per expert since the prefill */
    int64_t *exp_distinct;  /* (XF_PHASE_COUNT, n_layers) distinct experts read, summed over steps */
    int64_t exp_steps[XF_PHASE_COUNT];
};

void model_options_default(model_options *o) {
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->wdtype = XF_FP32;
    o->quant_group = XF_DEFAULT_QUANT_GROUP;
    o->kvdtype = XF_FP32;
    o->threads = 0;
    o->kv_policy.kind = KV_POLICY_PAGED;
    o->kv_policy.block = KV_DEFAULT_BLOCK;
    o->kv_alloc = KV_ALLOC_POOL;
    o->backend = "cpu";
    o->max_seqs = 1;
    o->max_prompt = 128;
    o->max_seq_len = 256;
}

static int mul_ok(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || (a != 0 && b > INT64_MAX / a)) return 0;
    *out = a * b;
    return 1;
}

static int add_ok(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || a > INT64_MAX - b) return 0;
    *out = a + b;
    return 1;
}

static xf_status check_options(const model_config *cfg, const model_options *o) {
    xf_status st = config_validate(cfg);
    if (st) return st;
    if (cfg->mla_absorbed && o->backend && strcasecmp(o->backend, "cpu"))
        return xf_errorf(XF_EINVAL, "%s: the absorbed form of latent attention runs on the CPU backend only: use the naive form "
                         "(--mla naive) or --device cpu", cfg->name);
    if (o->wdtype != XF_FP32 && o->wdtype != XF_BF16 && o->wdtype != XF_FP16 && o->wdtype != XF_INT8)
        return xf_errorf(XF_EINVAL, "weight dtype %s is not supported by the reference model: use fp32, bf16, fp16 or int8",
                         dtype_name(o->wdtype));
    if (o->kvdtype != XF_FP32 && o->kvdtype != XF_FP16 && o->kvdtype != XF_BF16)
        return xf_errorf(XF_EINVAL, "KV dtype %s is not supported by the reference model: use fp32, fp16 or bf16",
                         dtype_name(o->kvdtype));
    if (o->bf16_inputs != BACKEND_BF16_EXACT3 && o->bf16_inputs != BACKEND_BF16_ROUNDED)
        return xf_errorf(XF_EINVAL, "bf16 inputs mode %d is not exact3 or rounded", (int)o->bf16_inputs);
    if (o->bf16_inputs == BACKEND_BF16_ROUNDED && (o->wdtype != XF_BF16 || (o->backend && strcmp(o->backend, "cpu"))))
        return xf_errorf(XF_EINVAL, "bf16 inputs rounded: only bf16 weights on the CPU backend take them (weights %s, backend %s)",
                         dtype_name(o->wdtype), o->backend ? o->backend : "cpu");
    if (o->bf16_inputs == BACKEND_BF16_ROUNDED && (cfg->n_experts > 0 || model_is_mla(cfg)))
        return xf_errorf(XF_EUNSUPPORTED, "bf16 inputs rounded is not implemented for %s models (%s): their expert and latent "
                         "projections take the fp32 input; use exact3", cfg->n_experts > 0 ? "mixture-of-experts" : "latent-attention",
                         cfg->name);
    if (o->quant_group < 0 || o->quant_group > 65536)
        return xf_errorf(XF_EINVAL, "quant group %d out of range: use 1..65536 (0 = 128)", o->quant_group);
    if (o->threads < 0 || o->threads > 4096) return xf_errorf(XF_EINVAL, "threads %d out of range: use 1..4096 (0 = all)", o->threads);
    if (o->max_seqs < 1 || o->max_seqs > XF_BATCH_MAX)
        return xf_errorf(XF_EINVAL, "batch %lld out of range: use 1..%d", (long long)o->max_seqs, XF_BATCH_MAX);
    if (o->max_prompt < 1 || o->max_seq_len < o->max_prompt)
        return xf_errorf(XF_EINVAL, "prompt length %lld and sequence length %lld: need 1 <= prompt <= prompt + generated",
                         (long long)o->max_prompt, (long long)o->max_seq_len);
    if (cfg->max_ctx > 0 && o->max_seq_len > cfg->max_ctx)
        return xf_errorf(XF_EINVAL, "prompt + generated = %lld tokens exceeds %s's context of %lld tokens",
                         (long long)o->max_seq_len, cfg->name, (long long)cfg->max_ctx);
    if (o->max_seq_len > INT32_MAX) return xf_errorf(XF_EINVAL, "sequence length %lld is too long", (long long)o->max_seq_len);
    if (o->kv_pool_bytes < 0) return xf_errorf(XF_EINVAL, "KV pool budget must not be negative");
    if ((int)o->kv_policy.kind < 0 || o->kv_policy.kind >= KV_POLICY_COUNT ||
        (o->kv_policy.kind == KV_POLICY_PAGED && (o->kv_policy.block < 1 || o->kv_policy.block > KV_MAX_BLOCK)))
        return xf_errorf(XF_EINVAL, "KV policy %d with block %lld: use reserve, pow2, oracle or paged:B (1 <= B <= %d)",
                         (int)o->kv_policy.kind, (long long)o->kv_policy.block, KV_MAX_BLOCK);
    if (o->kv_alloc != KV_ALLOC_POOL && o->kv_alloc != KV_ALLOC_SYSTEM)
        return xf_errorf(XF_EINVAL, "unknown kv_alloc mode %d: use pool or system", (int)o->kv_alloc);
    return XF_OK;
}

/* Slots one sequence of max_seq_len tokens takes under the policy. */
static int64_t slots_per_seq(const kv_policy *p, int64_t len) {
    if (p->kind == KV_POLICY_PAGED) return (len + p->block - 1) / p->block * p->block;
    if (p->kind == KV_POLICY_POW2) {
        int64_t v = 1;
        while (v < len) v *= 2;
        return v;
    }
    return len;
}

/* The sliding-window layers whose KV the reference keeps to their window: with paged policies on
 * the CPU backend, the manager releases the blocks no later query sees (kv_cache.h,
 * window_deferred: after each step). 0 when windowed layers keep their whole context (contiguous
 * policies, system mode, latent attention, another backend) or the model has none. */
static int64_t win_pool_layers(const model_config *cfg, const model_options *o) {
    if (o->kv_alloc != KV_ALLOC_POOL || o->kv_policy.kind != KV_POLICY_PAGED || cfg->sliding_window <= 0 || model_is_mla(cfg))
        return 0;
    if (o->backend && strcasecmp(o->backend, "cpu")) return 0;
    return model_windowed_layers(cfg);
}

/* Slots per sequence of a windowed paged pool: a prefill writes (and its queries read) the whole
 * prompt; a decode step holds at most the window's positions, in ceil(window / B) + 1 blocks. */
static int64_t win_slots_per_seq(const kv_policy *p, int64_t window, int64_t max_prompt, int64_t max_seq_len) {
    const int64_t B = p->block;
    int64_t nb = (window + B - 1) / B + 1, np = (max_prompt + B - 1) / B, nall = (max_seq_len + B - 1) / B;
    if (np > nb) nb = np;
    if (nb > nall) nb = nall;
    return nb * B;
}

xf_status model_mem_of(const model_config *cfg, const model_options *o, model_mem *out) {
    xf_status st = check_options(cfg, o);
    if (st) return st;
    memset(out, 0, sizeof *out);
    int group = o->quant_group > 0 ? o->quant_group : XF_DEFAULT_QUANT_GROUP;
    if ((st = weights_bytes(cfg, o->wdtype, group, &out->weights_bytes))) return st;
    int64_t bps = model_is_mla(cfg) ? kv_bytes_per_latent_slot(cfg->n_layers, cfg->kv_lora_rank + cfg->qk_rope_head_dim, o->kvdtype, 0)
                                    : kv_bytes_per_slot(cfg->n_layers, cfg->n_kv_heads, cfg->head_dim, o->kvdtype, 0);
    if (bps <= 0) return xf_errorf(XF_EOVERFLOW, "KV bytes per token of %s overflow", cfg->name);
    kv_policy pol = o->kv_policy;
    int64_t slots;
    if (o->kv_alloc == KV_ALLOC_SYSTEM) {
        if (!mul_ok(o->max_seqs, o->max_seq_len, &slots) || !mul_ok(slots, bps, &out->kv_bytes))
            return xf_errorf(XF_EOVERFLOW, "KV of %lld sequences x %lld tokens x %lld bytes per token = %.3g bytes overflows 64 bits: "
                             "give a smaller --batch, --prompt or --gen", (long long)o->max_seqs, (long long)o->max_seq_len,
                             (long long)bps, (double)o->max_seqs * (double)o->max_seq_len * (double)bps);
    } else if (o->kv_pool_bytes > 0) {
        out->kv_bytes = o->kv_pool_bytes / bps * bps;
    } else if (!mul_ok(o->max_seqs, slots_per_seq(&pol, o->max_seq_len), &slots) || !mul_ok(slots, bps, &out->kv_bytes)) {
        return xf_errorf(XF_EOVERFLOW, "KV of %lld sequences x %lld tokens x %lld bytes per token = %.3g bytes overflows 64 bits: "
                         "give a smaller --batch, --prompt or --gen", (long long)o->max_seqs, (long long)o->max_seq_len,
                         (long long)bps, (double)o->max_seqs * (double)o->max_seq_len * (double)bps);
    }
    const int64_t nw = win_pool_layers(cfg, o);
    if (nw > 0) { /* two pools: the full layers' (the budget above, per their bytes) and the windowed layers' */
        const int64_t nf = cfg->n_layers - nw;
        const int64_t bw = kv_bytes_per_slot(nw, cfg->n_kv_heads, cfg->head_dim, o->kvdtype, 0);
        const int64_t bf = nf > 0 ? kv_bytes_per_slot(nf, cfg->n_kv_heads, cfg->head_dim, o->kvdtype, 0) : 0;
        int64_t wslots, full = 0;
        if (bw <= 0 || (nf > 0 && bf <= 0)) return xf_errorf(XF_EOVERFLOW, "KV bytes per token of %s overflow", cfg->name);
        if (nf == 0 && o->kv_pool_bytes > 0) out->kv_win_bytes = o->kv_pool_bytes / bw * bw;
        else if (!mul_ok(o->max_seqs, win_slots_per_seq(&pol, cfg->sliding_window, o->max_prompt, o->max_seq_len), &wslots) ||
                 !mul_ok(wslots, bw, &out->kv_win_bytes))
            return xf_errorf(XF_EOVERFLOW, "the windowed layers' KV of %lld sequences overflows 64 bits: give a smaller --batch or --prompt",
                             (long long)o->max_seqs);
        if (nf > 0) full = o->kv_pool_bytes > 0 ? o->kv_pool_bytes / bf * bf : out->kv_bytes / bps * bf; /* same slots, fewer layers */
        if (!add_ok(full, out->kv_win_bytes, &out->kv_bytes))
            return xf_errorf(XF_EOVERFLOW, "the KV pools of %s overflow 64 bits", cfg->name);
    }
    /* Activations: what cpu_backend.c allocates (rows = max_seqs * max_prompt). */
    int64_t T, per_tok, acts, q_dim = cfg->n_heads * cfg->head_dim, kv_dim = cfg->n_kv_heads * cfg->head_dim;
    per_tok = 3 * cfg->d_model + (q_dim + 2 * kv_dim) + q_dim + 3 * cfg->d_ff + 2; /* floats + tok_seq */
    per_tok += cpu_moe_floats_per_token(cfg); /* the experts' buffers (cpu_moe.c) */
    int64_t tail = (cfg->d_model + cfg->vocab + 1) * o->max_seqs + o->max_seqs * o->max_seq_len * 2;
    int threads = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    /* RoPE's cos | sin table (cpu_backend.c rope_tab): every position, gemma3 a local one too (latent
     * attention's head_dim is its qk_rope_head_dim) */
    tail += o->max_seq_len * cfg->head_dim * (cfg->rope_local_theta > 0 ? 2 : 1);
    if (model_is_mla(cfg)) { /* cpu_backend.c's latent buffers: Q and q_a per token, one sequence's decompressed context */
        const int64_t lat = cfg->kv_lora_rank + cfg->qk_rope_head_dim;
        per_tok += cfg->n_heads * (cfg->qk_nope_head_dim + cfg->qk_rope_head_dim + cfg->v_head_dim) + cfg->q_lora_rank;
        tail += o->max_seq_len * lat;
        /* each thread's scores of one (query, head) or a latent row (mla_scores) */
        tail += (int64_t)threads * ((o->max_seq_len > lat ? o->max_seq_len : lat) + 16);
        if (!cfg->mla_absorbed) tail += o->max_seq_len * cfg->n_heads * (cfg->qk_nope_head_dim + cfg->v_head_dim);
        else { /* the absorbed form: latent queries and outputs per token, one head's kv_b block per thread */
            const int64_t wide = cfg->qk_nope_head_dim > cfg->v_head_dim ? cfg->qk_nope_head_dim : cfg->v_head_dim;
            per_tok += cfg->n_heads * (2 * cfg->kv_lora_rank + cfg->qk_rope_head_dim);
            tail += (int64_t)threads * (wide * cfg->kv_lora_rank + 16);
        }
    }
    /* decode attention's buffers (cpu_backend.c att_w, att_scratch): the split-K parts' outputs, max
     * and sum (a fixed number of items), and each thread's scratch */
    const int64_t n_rep = cfg->n_heads / cfg->n_kv_heads;
    tail += (int64_t)XK_ATT_SPLIT_ITEMS * XK_ATT_MAX_PARTS * n_rep * (cfg->head_dim + 2) +
            (int64_t)threads * xk_attn_thread_floats(cfg->n_heads, cfg->head_dim);
    /* each buffer rounded up to 64 bytes (16 floats): about 48 of the backend's own, K and V a layer
     * (2 pools at most), two slot tables a sequence */
    tail += 16 * (48 + 4 * (int64_t)cfg->n_layers + 2 * o->max_seqs);
    if (!mul_ok(o->max_seqs, o->max_prompt, &T) || !mul_ok(T, per_tok, &acts) || !add_ok(acts, tail, &acts) ||
        !mul_ok(acts, 4, &acts) ||
        (o->wdtype != XF_FP32 && (T >= CPU_GEMM_MIN_TOKENS || (model_is_mla(cfg) && o->max_seq_len >= 32)) &&
         !add_ok(acts, (int64_t)threads * (4 << 20), &acts)))
        return xf_errorf(XF_EOVERFLOW, "activations of %lld sequences x %lld prompt tokens overflow 64-bit byte counts: give a "
                         "smaller --batch or --prompt", (long long)o->max_seqs, (long long)o->max_prompt);
    /* The CPU backend's prefill attention tiles: per thread, a KV head's K and V over max_seq_len in
     * fp32 plus the block scratch (cpu_backend.c allocates them when a step holds >= 16 tokens). */
    if (T >= 16) {
        int64_t att = xk_attn_prefill_floats(o->max_seq_len, cfg->n_heads / cfg->n_kv_heads, cfg->head_dim);
        if (att < 0 || !mul_ok(att, 4 * (int64_t)threads, &att) || !add_ok(acts, att, &acts))
            return xf_errorf(XF_EOVERFLOW, "attention tiles of %d threads x %lld positions overflow 64-bit byte counts: give a "
                             "smaller --prompt + --gen or fewer --threads", threads, (long long)o->max_seq_len);
    }
    /* bf16 prefill through oneDNN (cpu_dnnl.h): the input as 3 bf16 parts, (T, 3, widest input) */
    int64_t wide = cfg->d_model > cfg->d_ff ? cfg->d_model : cfg->d_ff, bfx;
    wide = wide > q_dim ? wide : q_dim;
    if (o->wdtype == XF_BF16 && T >= 32 && cpu_dnnl_bf16_here() && (!mul_ok(T, 6 * wide, &bfx) || !add_ok(acts, bfx, &acts)))
        return xf_errorf(XF_EOVERFLOW, "bf16 prefill inputs of %lld tokens overflow 64-bit byte counts: give a smaller --batch or "
                         "--prompt", (long long)T);
    out->activations_bytes = acts;
    if (!add_ok(out->weights_bytes, out->kv_bytes, &out->total_bytes) || !add_ok(out->total_bytes, acts, &out->total_bytes))
        return xf_errorf(XF_EOVERFLOW, "the model's memory (weights %.3g + KV %.3g + activations %.3g bytes) overflows 64 bits",
                         (double)out->weights_bytes, (double)out->kv_bytes, (double)acts);
    return XF_OK;
}

/* The folder's config.json must describe the same shapes as cfg. */
static xf_status check_dir_config(const char *dir, const model_config *cfg) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        return xf_errorf(XF_EINVAL, "weights folder path is too long");
    model_config f;
    xf_status st = config_load_hf(path, &f);
    if (st) return st;
#define XF_SAME(field)                                                                                          \
    if (f.field != cfg->field)                                                                                  \
        return xf_errorf(XF_EINVAL, "%s: " #field " is %lld but the model asked for has %lld: use the folder's own config (--model %s)", \
                         path, (long long)f.field, (long long)cfg->field, dir);
    XF_SAME(n_layers) XF_SAME(d_model) XF_SAME(n_heads) XF_SAME(n_kv_heads) XF_SAME(head_dim) XF_SAME(d_ff)
    XF_SAME(vocab) XF_SAME(tied_embeddings) XF_SAME(qkv_bias) XF_SAME(o_bias) XF_SAME(mlp_bias) XF_SAME(qk_norm)
    XF_SAME(rope.kind) XF_SAME(sliding_window) XF_SAME(q_lora_rank) XF_SAME(kv_lora_rank) XF_SAME(qk_nope_head_dim)
    XF_SAME(v_head_dim) XF_SAME(rope_interleave)
    XF_SAME(n_experts) XF_SAME(experts_per_tok) XF_SAME(d_ff_expert) XF_SAME(norm_topk_prob) XF_SAME(d_ff_shared)
    XF_SAME(shared_expert_gate)
    if (memcmp(f.dense_layers, cfg->dense_layers, sizeof f.dense_layers) != 0)
        return xf_errorf(XF_EINVAL, "%s: its dense (non-MoE) layers differ from the model asked for: use the folder's own config (--model %s)",
                         path, dir);
#undef XF_SAME
    return XF_OK;
}

xf_status model_check_weights_dir(const char *dir, const model_config *cfg) { return check_dir_config(dir, cfg); }

static void fmt_bytes(char *buf, size_t n, int64_t b) {
    snprintf(buf, n, "%.2f GiB (%lld bytes)", (double)b / (1024.0 * 1024.0 * 1024.0), (long long)b);
}

void model_free(model *m) {
    if (!m) return;
    if (m->be && m->bctx) m->be->free_ctx(m->bctx);
    kv_cache_free(m->kv);
    kv_cache_free(m->kvw);
    if (!m->opt.weights) weights_free(m->w); /* given weights are the caller's */
    free(m->kv_ids);
    free(m->kvw_ids);
    free(m->seq_len);
    free(m->gen);
    free(m->n_gen);
    free(m->logits);
    free(m->sseq);
    free(m->tok_off);
    free(m->tok);
    free(m->sampled);
    free(m->exp_tokens);
    free(m->exp_distinct);
    free(m);
}

/* "name needs X (weights W at dtype, KV K, activations A) but <where> has C: nothing was allocated; <hint>" */
static xf_status refuse_mem(const model_config *cfg, const model_mem *m, xf_dtype wd, const char *where, double cap,
                            const char *hint) {
    char a[64], b[64], c[64], d[64], e[64];
    fmt_bytes(a, sizeof a, (double)m->total_bytes);
    fmt_bytes(b, sizeof b, (double)m->weights_bytes);
    fmt_bytes(c, sizeof c, (double)m->kv_bytes);
    fmt_bytes(d, sizeof d, (double)m->activations_bytes);
    fmt_bytes(e, sizeof e, cap);
    return xf_errorf(XF_EOVERFLOW, "%s needs %s (weights %s at %s, KV %s, activations %s) but %s has %s: nothing was allocated; %s",
                     cfg->name, a, b, dtype_name(wd), c, d, where, e, hint);
}

/* The memory available now (MemAvailable, a container's limit), not the total: the rest belongs
 * to other processes, and a run past it swaps or is killed. */
double model_host_memory_bytes(void) {
    int64_t avail = sysmem_available_bytes();
    return avail > 0 ? (double)avail : (double)sysmem_total_bytes();
}

/* "this machine (available now, of T in all)" for the refusals. */
static const char *host_where(char *buf, size_t len) {
    char t[64];
    fmt_bytes(t, sizeof t, (double)sysmem_total_bytes());
    snprintf(buf, len, "this machine (available now, of %s in all)", t);
    return buf;
}

xf_status model_mem_gate(const model_config *cfg, const model_options *opts, xf_dtype device_wdtype, double device_bytes,
                         model_mem *out) {
    xf_status st = model_mem_of(cfg, opts, out);
    if (st) return st;
    double phys = model_host_memory_bytes();
    char where[128];
    if (device_bytes <= 0) {
        if (phys > 0 && (double)out->total_bytes > phys)
            return refuse_mem(cfg, out, opts->wdtype, host_where(where, sizeof where), phys,
                              "try a smaller model, --wdtype int8, or a smaller --batch/--prompt/--gen");
        return XF_OK;
    }
    /* On the GPU: weights at device_wdtype, KV and activations against the GPU's memory; the host
     * still holds the weights at opts->wdtype until they are uploaded. */
    model_options d = *opts;
    d.wdtype = device_wdtype;
    model_mem dm;
    if ((st = model_mem_of(cfg, &d, &dm))) return st;
    if ((double)dm.total_bytes > device_bytes)
        return refuse_mem(cfg, &dm, device_wdtype, "the GPU", device_bytes,
                          "try a smaller model or a smaller --batch/--prompt/--gen");
    if (phys > 0 && (double)out->weights_bytes > phys) {
        char a[64], b[64];
        fmt_bytes(a, sizeof a, (double)out->weights_bytes);
        fmt_bytes(b, sizeof b, phys);
        return xf_errorf(XF_EOVERFLOW, "%s's weights take %s at %s on the host before the upload but %s has %s: "
                         "nothing was allocated; use --wdtype bf16", cfg->name, a, dtype_name(opts->wdtype),
                         host_where(where, sizeof where), b);
    }
    out->weights_bytes = dm.weights_bytes; /* what the device holds */
    out->total_bytes = dm.total_bytes;
    return XF_OK;
}

xf_status model_init(model **out, const model_config *cfg, const model_options *opts) {
    if (!out || !cfg || !opts) return xf_errorf(XF_EINVAL, "model_init: NULL argument");
    *out = NULL;
    model_mem mem;
    xf_status st = model_mem_of(cfg, opts, &mem);
    if (st) return st;
    const backend_ops *be = backend_find(opts->backend);
    if (!be) {
        if (opts->backend && !strncasecmp(opts->backend, "cuda", 4))
            return xf_errorf(XF_EUNSUPPORTED, "backend %s: this build has no CUDA backend", opts->backend);
        return xf_errorf(XF_EINVAL, "unknown backend '%s': use cpu or cuda", opts->backend);
    }
    /* Refuse before allocating anything large (the one memory gate; the runner calls it first). */
    if (!strcmp(be->name, "cpu") && (st = model_mem_gate(cfg, opts, XF_BF16, 0, &mem))) return st;
    model *m = calloc(1, sizeof *m);
    if (!m) return xf_errorf(XF_ENOMEM, "out of memory");
    m->cfg = *cfg;
    m->opt = *opts;
    kv_policy_name(&opts->kv_policy, m->kv_policy, sizeof m->kv_policy);
    snprintf(m->backend_name, sizeof m->backend_name, "%s", be->name);
    m->opt.backend = m->backend_name;
    m->opt.weights_dir = NULL; /* not kept: the caller's string */
    m->mem = mem;
    m->be = be;
    const int64_t S = opts->max_seqs;
    m->max_tokens = S * opts->max_prompt; /* checked in model_mem_of */
    int group = opts->quant_group > 0 ? opts->quant_group : XF_DEFAULT_QUANT_GROUP;
    m->kv_ids = malloc((size_t)S * sizeof *m->kv_ids);
    m->kvw_ids = malloc((size_t)S * sizeof *m->kvw_ids);
    m->seq_len = calloc((size_t)S, sizeof *m->seq_len);
    m->gen = malloc((size_t)(S * opts->max_seq_len) * sizeof *m->gen);
    m->n_gen = calloc((size_t)S, sizeof *m->n_gen);
    m->logits = malloc((size_t)(S * cfg->vocab) * sizeof *m->logits);
    m->sseq = calloc((size_t)S, sizeof *m->sseq);
    m->tok_off = calloc((size_t)S + 1, sizeof *m->tok_off);
    m->tok = malloc((size_t)m->max_tokens * sizeof *m->tok);
    m->sampled = malloc((size_t)S * sizeof *m->sampled);
    if (cfg->n_experts > 0) {
        m->exp_tokens = calloc((size_t)(XF_PHASE_COUNT * cfg->n_layers * cfg->n_experts), sizeof *m->exp_tokens);
        m->exp_distinct = calloc((size_t)(XF_PHASE_COUNT * cfg->n_layers), sizeof *m->exp_distinct);
    }
    if ((cfg->n_experts > 0 && (!m->exp_tokens || !m->exp_distinct)) || !m->kv_ids || !m->kvw_ids || !m->seq_len || !m->gen || !m->n_gen || !m->logits || !m->sseq || !m->tok_off || !m->tok || !m->sampled) {
        model_free(m);
        return xf_errorf(XF_ENOMEM, "out of memory");
    }
    for (int64_t s = 0; s < S; s++) m->kv_ids[s] = m->kvw_ids[s] = -1;
    if (opts->weights) { /* a tensor-parallel shard, built by the caller for this config */
        const model_config *wc = &opts->weights->cfg;
        m->w = (model_weights *)opts->weights;
        if (wc->n_layers != cfg->n_layers || wc->d_model != cfg->d_model || wc->n_heads != cfg->n_heads ||
            wc->n_kv_heads != cfg->n_kv_heads || wc->d_ff != cfg->d_ff || wc->vocab != cfg->vocab || opts->weights->dtype != opts->wdtype)
            st = xf_errorf(XF_EINVAL, "model_init: the weights given are of another shape or dtype than the config");
    } else if (opts->weights_dir) {
        st = check_dir_config(opts->weights_dir, cfg);
        if (!st) st = st_load_weights(opts->weights_dir, cfg, opts->wdtype, group, &m->w);
    } else {
        st = weights_init_random(&m->w, cfg, opts->seed, opts->wdtype, group);
    }
    if (!st) st = weights_pack(m->w); /* int8: the layout the decode kernels stream (weights.h) */
    int64_t kv_slots = 0, kvw_slots = 0;
    if (!st && opts->kv_alloc == KV_ALLOC_POOL) {
        const int64_t nw = win_pool_layers(cfg, opts);
        kv_cache_config kc;
        memset(&kc, 0, sizeof kc);
        kc.n_layers = cfg->n_layers - nw;
        kc.n_kv_heads = cfg->n_kv_heads;
        kc.head_dim = cfg->head_dim;
        kc.latent_dim = model_is_mla(cfg) ? cfg->kv_lora_rank + cfg->qk_rope_head_dim : 0;
        kc.dtype = opts->kvdtype;
        kc.budget_bytes = mem.kv_bytes - mem.kv_win_bytes;
        kc.max_len = opts->max_seq_len;
        kc.policy = opts->kv_policy;
        kv_cache_config kw = kc; /* the windowed layers': out-of-window blocks released after each step */
        kw.n_layers = nw;
        kw.budget_bytes = mem.kv_win_bytes;
        kw.window = cfg->sliding_window;
        kw.window_deferred = 1;
        m->win_all = nw == cfg->n_layers;
        if (m->win_all) st = kv_cache_init(&m->kv, &kw);
        else {
            st = kv_cache_init(&m->kv, &kc);
            if (!st && nw > 0) st = kv_cache_init(&m->kvw, &kw);
        }
        if (!st) kv_slots = kv_cache_n_slots(m->kv);
        if (!st && m->kvw) kvw_slots = kv_cache_n_slots(m->kvw);
    }
    if (!st) {
        backend_init_args a;
        memset(&a, 0, sizeof a);
        a.cfg = cfg;
        a.weights = m->w;
        a.kv = m->kv;
        a.kvdtype = opts->kvdtype;
        a.kv_alloc = opts->kv_alloc;
        a.kv_slots = kv_slots;
        a.kv_win = m->kvw;
        a.kv_win_slots = kvw_slots;
        a.kv_win_ids = m->kvw_ids;
        a.max_seqs = S;
        a.max_seq_len = opts->max_seq_len;
        a.max_step_tokens = m->max_tokens;
        a.threads = opts->threads;
        a.device_index = opts->device_index;
        a.bf16_inputs = opts->bf16_inputs;
        a.allreduce = opts->allreduce;
        a.allreduce_ctx = opts->allreduce_ctx;
        st = be->init(&m->bctx, &a);
    }
    if (st) {
        model_free(m);
        return st;
    }
    *out = m;
    return XF_OK;
}

void model_reset(model *m) {
    if (!m) return;
    for (int64_t s = 0; s < m->opt.max_seqs; s++) {
        if (m->kv && m->kv_ids[s] >= 0) kv_cache_free_seq(m->kv, m->kv_ids[s]);
        if (m->kvw && m->kvw_ids[s] >= 0) kv_cache_free_seq(m->kvw, m->kvw_ids[s]);
        m->kv_ids[s] = m->kvw_ids[s] = -1;
        if (m->bctx) m->be->seq_release(m->bctx, s);
        m->seq_len[s] = 0;
        m->n_gen[s] = 0;
    }
    m->n_seqs = 0;
    m->decode_steps = 0;
    if (m->exp_tokens) {
        memset(m->exp_tokens, 0, (size_t)(XF_PHASE_COUNT * m->cfg.n_layers * m->cfg.n_experts) * sizeof *m->exp_tokens);
        memset(m->exp_distinct, 0, (size_t)(XF_PHASE_COUNT * m->cfg.n_layers) * sizeof *m->exp_distinct);
        memset(m->exp_steps, 0, sizeof m->exp_steps);
    }
}

/* Adds the last step's router choices to the phase's sums. */
static void add_expert_counts(model *m, xf_phase ph) {
    if (!m->exp_tokens || !m->be->expert_counts) return;
    const int64_t E = m->cfg.n_experts, L = m->cfg.n_layers;
    for (int64_t l = 0; l < L; l++) {
        const int64_t *c = m->be->expert_counts(m->bctx, (int)l);
        if (!c) continue;
        int64_t *t = m->exp_tokens + ((int64_t)ph * L + l) * E;
        for (int64_t e = 0; e < E; e++) {
            t[e] += c[e];
            m->exp_distinct[(int64_t)ph * L + l] += c[e] > 0;
        }
    }
    m->exp_steps[ph]++;
}

xf_status model_expert_stats(const model *m, xf_phase ph, const int64_t **tokens, const int64_t **distinct, int64_t *steps) {
    if (!m || !m->exp_tokens || !m->be->expert_counts || ph < 0 || ph >= XF_PHASE_COUNT)
        return xf_errorf(XF_EUNSUPPORTED, "no router statistics: the model has no experts or its backend does not report them");
    const int64_t L = m->cfg.n_layers;
    if (tokens) *tokens = m->exp_tokens + (int64_t)ph * L * m->cfg.n_experts;
    if (distinct) *distinct = m->exp_distinct + (int64_t)ph * L;
    if (steps) *steps = m->exp_steps[ph];
    return XF_OK;
}

/* One op inside its probe range. */
static xf_status run_op(model *m, const step_batch *b, op_kind k, int layer, const probe_set *ps) {
    probe_range r = {b->phase, layer, k, b->step};
    probe_set_begin(ps, &r);
    xf_status st = m->be->run_op(m->bctx, k, layer, b);
    if (!st && m->opt.sync_each_op) st = m->be->sync(m->bctx);
    probe_set_end(ps, &r);
    return st;
}

/* Every op after kv_alloc, in cost_model order; then the results come back to the host. */
static xf_status run_step(model *m, const step_batch *b, const probe_set *ps) {
    xf_status st = run_op(m, b, OP_EMBEDDING, -1, ps);
    for (int l = 0; !st && l < (int)m->cfg.n_layers; l++)
        for (int k = OP_ATTN_NORM; !st && k <= OP_FFN_RESIDUAL; k++) {
            st = run_op(m, b, (op_kind)k, l, ps);
            /* tensor parallel: the row-parallel outputs summed over the ranks before the residual */
            if (!st && m->opt.allreduce && (k == OP_O_PROJ || k == OP_DOWN)) st = run_op(m, b, OP_ALL_REDUCE, l, ps);
        }
    if (!st) st = run_op(m, b, OP_FINAL_NORM, -1, ps);
    if (!st) st = run_op(m, b, OP_LM_HEAD, -1, ps);
    if (!st) st = run_op(m, b, OP_SAMPLING, -1, ps);
    if (!st) st = m->be->sync(m->bctx);
    if (!st) st = m->be->read_logits(m->bctx, m->logits, b->n_seqs);
    if (!st) st = m->be->read_tokens(m->bctx, m->sampled, b->n_seqs);
    if (!st) add_expert_counts(m, b->phase);
    return st;
}

/* After a step: the windowed layers' blocks that no later query sees go back to their pool. */
static xf_status release_windows(model *m) {
    kv_cache *w = m->win_all ? m->kv : m->kvw;
    const int *ids = m->win_all ? m->kv_ids : m->kvw_ids;
    xf_status st = XF_OK;
    for (int s = 0; w && !st && s < m->n_seqs; s++) st = kv_cache_release_window(w, ids[s]);
    return st;
}

xf_status model_prefill(model *m, int n_seqs, const int32_t *prompts, const int64_t *lens, const probe_set *ps) {
    if (!m || !prompts || !lens) return xf_errorf(XF_EINVAL, "model_prefill: NULL argument");
    if (n_seqs < 1 || n_seqs > m->opt.max_seqs)
        return xf_errorf(XF_EINVAL, "prefill of %d sequences: the model was built for 1..%lld", n_seqs, (long long)m->opt.max_seqs);
    int64_t total = 0;
    for (int s = 0; s < n_seqs; s++) {
        if (lens[s] < 1 || lens[s] > m->opt.max_prompt)
            return xf_errorf(XF_EINVAL, "prompt %d has %lld tokens: the model was built for 1..%lld", s, (long long)lens[s],
                             (long long)m->opt.max_prompt);
        total += lens[s];
    }
    for (int64_t t = 0; t < total; t++)
        if (prompts[t] < 0 || prompts[t] >= m->cfg.vocab)
            return xf_errorf(XF_EINVAL, "prompt token %lld is %d, outside the vocabulary [0, %lld)", (long long)t, prompts[t],
                             (long long)m->cfg.vocab);
    model_reset(m);
    m->tok_off[0] = 0;
    for (int s = 0; s < n_seqs; s++) {
        m->sseq[s].pos = 0;
        m->sseq[s].n_new = lens[s];
        m->tok_off[s + 1] = m->tok_off[s] + lens[s];
    }
    memcpy(m->tok, prompts, (size_t)total * sizeof *m->tok);
    step_batch b = {XF_PREFILL, 0, n_seqs, m->sseq, total, m->tok_off, m->tok};

    xf_status st = XF_OK;
    probe_range r = {XF_PREFILL, -1, OP_KV_ALLOC, 0};
    probe_set_begin(ps, &r);
    for (int s = 0; st == XF_OK && s < n_seqs; s++) {
        if (m->kv) {
            st = kv_cache_add_seq(m->kv, lens[s], m->opt.max_seq_len, m->opt.max_seq_len, &m->kv_ids[s]);
            if (!st && m->kvw) st = kv_cache_add_seq(m->kvw, lens[s], m->opt.max_seq_len, m->opt.max_seq_len, &m->kvw_ids[s]);
            if (st) xf_error_prefix(st, "KV for sequence %d (%lld prompt tokens): ", s, (long long)lens[s]);
        }
        m->sseq[s].kv_seq = m->kv_ids[s];
    }
    if (!st) st = m->be->run_op(m->bctx, OP_KV_ALLOC, -1, &b);
    if (!st && m->opt.sync_each_op) st = m->be->sync(m->bctx);
    probe_set_end(ps, &r);
    m->n_seqs = n_seqs;
    if (!st) st = run_step(m, &b, ps);
    if (!st) st = release_windows(m);
    if (st) {
        model_reset(m);
        return st;
    }
    for (int s = 0; s < n_seqs; s++) {
        m->seq_len[s] = lens[s];
        m->gen[(int64_t)s * m->opt.max_seq_len] = m->sampled[s];
        m->n_gen[s] = 1;
    }
    return XF_OK;
}

xf_status model_decode_step(model *m, const int32_t *forced, const probe_set *ps) {
    if (!m) return xf_errorf(XF_EINVAL, "model_decode_step: NULL model");
    if (m->n_seqs < 1) return xf_errorf(XF_EINVAL, "decode step before prefill: run model_prefill first");
    const int n = m->n_seqs;
    for (int s = 0; s < n; s++) {
        if (m->seq_len[s] + 1 > m->opt.max_seq_len)
            return xf_errorf(XF_EINVAL, "sequence %d already holds %lld tokens, the most it was built for (prompt + generated)",
                             s, (long long)m->seq_len[s]);
        int32_t t = forced ? forced[s] : m->gen[(int64_t)s * m->opt.max_seq_len + m->n_gen[s] - 1];
        if (t < 0 || t >= m->cfg.vocab)
            return xf_errorf(XF_EINVAL, "token %d for sequence %d is outside the vocabulary [0, %lld)", t, s, (long long)m->cfg.vocab);
        m->tok[s] = t;
        m->sseq[s].kv_seq = m->kv_ids[s];
        m->sseq[s].pos = m->seq_len[s];
        m->sseq[s].n_new = 1;
        m->tok_off[s + 1] = s + 1;
    }
    m->tok_off[0] = 0;
    const int64_t step = m->decode_steps + 1;
    step_batch b = {XF_DECODE, step, n, m->sseq, n, m->tok_off, m->tok};
    xf_status st = XF_OK;
    probe_range r = {XF_DECODE, -1, OP_KV_ALLOC, step};
    probe_set_begin(ps, &r);
    for (int s = 0; st == XF_OK && m->kv && s < n; s++) {
        st = kv_cache_append(m->kv, m->kv_ids[s], 1);
        if (!st && m->kvw) st = kv_cache_append(m->kvw, m->kvw_ids[s], 1);
        if (st) xf_error_prefix(st, "KV for sequence %d at %lld tokens: ", s, (long long)m->seq_len[s]);
    }
    if (!st) st = m->be->run_op(m->bctx, OP_KV_ALLOC, -1, &b);
    if (!st && m->opt.sync_each_op) st = m->be->sync(m->bctx);
    probe_set_end(ps, &r);
    if (!st) st = run_step(m, &b, ps);
    if (!st) st = release_windows(m);
    if (st) {
        model_reset(m);
        return st;
    }
    m->decode_steps = step;
    for (int s = 0; s < n; s++) {
        m->seq_len[s] += 1;
        /* gen holds at most max_seq_len - prompt + 1 <= max_seq_len tokens */
        m->gen[(int64_t)s * m->opt.max_seq_len + m->n_gen[s]] = m->sampled[s];
        m->n_gen[s] += 1;
    }
    return XF_OK;
}

const float *model_logits(const model *m, int64_t *n_seqs, int64_t *vocab) {
    if (n_seqs) *n_seqs = m ? m->n_seqs : 0;
    if (vocab) *vocab = m ? m->cfg.vocab : 0;
    return m ? m->logits : NULL;
}

const int32_t *model_tokens(const model *m, int seq, int64_t *n) {
    if (n) *n = 0;
    if (!m || seq < 0 || seq >= m->n_seqs) return NULL;
    if (n) *n = m->n_gen[seq];
    return m->gen + (int64_t)seq * m->opt.max_seq_len;
}

int64_t model_seq_len(const model *m, int seq) {
    if (!m || seq < 0 || seq >= m->n_seqs) return -1;
    return m->seq_len[seq];
}

int64_t model_decode_steps(const model *m) { return m ? m->decode_steps : 0; }
const model_config *model_get_config(const model *m) { return m ? &m->cfg : NULL; }
struct kv_cache *model_kv(model *m) { return m ? m->kv : NULL; }
struct kv_cache *model_kv_window(model *m) { return !m ? NULL : m->win_all ? m->kv : m->kvw; }
const struct model_weights *model_get_weights(const model *m) { return m ? m->w : NULL; }
const char *model_backend_name(const model *m) { return m ? m->be->name : NULL; }

void *model_backend_ctx(model *m) { return m ? m->bctx : NULL; }
void model_set_sync_each_op(model *m, int on) {
    if (m) m->opt.sync_each_op = on != 0;
}

void model_get_mem(const model *m, model_mem *out, int64_t *backend_bytes) {
    if (out) *out = m->mem;
    if (backend_bytes) *backend_bytes = m->be->mem_bytes(m->bctx);
}
