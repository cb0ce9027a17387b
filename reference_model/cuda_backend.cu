/* The CUDA backend (cuda_backend.h): the CPU backend's ops on a GPU. cuBLAS for the projections and
 * lm_head (cublasGemmEx, 16-bit inputs, CUBLAS_COMPUTE_32F, FP32 output); own kernels for the rest,
 * their per-element index math in cuda_index.h (tested on the CPU by tests/test_cuda_index.c).
 *
 * Device buffers (T = max_step_tokens rows, S = max_seqs):
 *   x      fp32 (T, d_model)        residual stream
 *   xn     16-bit (T, d_model)      RMSNorm output, GEMM input
 *   qkv    fp32 (T, q_dim + 2 kv_dim)
 *   att    16-bit (T, q_dim)        attention output, o_proj input
 *   tmp    fp32 (T, d_model)        o_proj / down output, added by the residual ops
 *   gu     fp32 (T, 2 d_ff)         gate | up
 *   h      16-bit (T, d_ff)         SwiGLU output, down input
 *   last   16-bit (S, d_model)      final norm of each sequence's last row
 *   logits fp32 (S, vocab), next int32 (S)
 *   meta   one block of step metadata (tok_off, positions, block tables, KV base pointers, tokens),
 *          filled on the host in pinned memory and copied by one cudaMemcpyAsync in kv_alloc, so a
 *          captured CUDA graph replays with the next step's values.
 * KV: pool mode: K and V arrays (n_layers, kv_slots, kv_dim) addressed through the KV manager's
 * block tables; system mode: per sequence K and V arrays (n_layers, cap, kv_dim) grown with
 * cudaMalloc + copy + cudaFree on every step that lengthens the sequence. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference_model/cuda_index.h"
#include "reference_model/cuda_kern.cuh"
#include "reference_model/cuda_mla.cuh"
#include "reference_model/cuda_moe.cuh"
#include "reference_model/cuda_moe_index.h"
extern "C" {
#include "reference_model/cpu_mla.h"
#include "reference_model/cuda_check.h"
#include "reference_model/cuda_meta.h"
#include "reference_model/kv_cache.h"
#include "reference_model/weights.h"
}
#include "reference_model/cuda_backend.h"
#include "reference_model/cuda_common.cuh"

namespace {

__global__ void k_embed(float *x, const void *emb, int wst, const int32_t *tokens, int64_t n, int64_t d) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * d) return;
    int64_t out;
    int64_t src = xf_embed_src(idx, d, tokens, &out);
    x[out] = ld(emb, src, wst);
}

/* One block per row. tok_off_last: row r of the output is the last new row of sequence r. */
__global__ void k_rmsnorm(void *y, int yst, const float *x, const float *w, int64_t d, float eps,
                          const int64_t *tok_off_last) {
    __shared__ float part[NT];
    int64_t out_row = blockIdx.x;
    int64_t in_row = tok_off_last ? xf_last_row(tok_off_last, (int)blockIdx.x) : out_row;
    block_rmsnorm(st_at(y, out_row * d, yst), yst, x + in_row * d, w, d, eps, part);
}

__global__ void k_bias(float *y, const float *bias, int64_t n, int64_t width) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * width) return;
    int64_t row, col;
    xf_idx_row_col(idx, width, &row, &col);
    y[idx] += bias[col];
}

/* Pairs of Q heads first (n_tokens * n_heads * half), then K heads. */
__global__ void k_rope(float *qkv, meta_dev m, int n_seqs, int64_t n, int64_t n_heads, int64_t n_kv_heads,
                       int64_t hd, int64_t width, int64_t q_dim, const double *inv_freq, double scale) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t half = hd / 2, nq = n * n_heads * half, nk = n * n_kv_heads * half;
    if (idx >= nq + nk) return;
    xf_rope_pair p = idx < nq ? xf_rope_index(idx, n_heads, hd, width, 0) : xf_rope_index(idx - nq, n_kv_heads, hd, width, q_dim);
    int s = xf_seq_of_row(m.tok_off, n_seqs, p.tok);
    int64_t pos = m.seq_pos[s] + (p.tok - m.tok_off[s]);
    float c, sn, y0, y1;
    xf_rope_cos_sin(pos, inv_freq, p.i, scale, &c, &sn);
    xf_rope_rotate(qkv[p.a], qkv[p.b], c, sn, &y0, &y1);
    qkv[p.a] = y0;
    qkv[p.b] = y1;
}

/* q/k RMSNorm (qwen3): one block per (token, head), Q heads then K heads, in place. */
__global__ void k_head_norm(float *qkv, const float *q_norm, const float *k_norm, int64_t n, int64_t n_heads, int64_t n_kv_heads,
                            int64_t hd, int64_t width, int64_t q_dim, float eps) {
    __shared__ float part[NT];
    int is_k;
    int64_t off = xf_head_norm_offset(blockIdx.x, n, n_heads, n_kv_heads, hd, width, q_dim, &is_k);
    block_rmsnorm(qkv + off, ST_F32, qkv + off, is_k ? k_norm : q_norm, hd, eps, part);
}

/* K elements first (n * kv_dim), then V. */
__global__ void k_kv_append(const float *qkv, meta_dev m, int n_seqs, int64_t n, int64_t kv_dim, int64_t width,
                            int64_t q_dim, int64_t layer, int kst) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= 2 * n * kv_dim) return;
    int is_v = idx >= n * kv_dim;
    int64_t e = is_v ? idx - n * kv_dim : idx;
    int s;
    int64_t dst;
    int64_t src = xf_kv_append_index(e, kv_dim, width, q_dim + (is_v ? kv_dim : 0), m.tok_off, n_seqs, m.seq_pos,
                                     m.tables, m.table_off, m.tpe, layer, m.n_slots, &s, &dst);
    st_(is_v ? m.vbase[s] : m.kbase[s], dst, qkv[src], kst);
}

/* One block per (row, head); scores of keys 0..pos in dynamic shared memory. */
__global__ void k_attention(const float *qkv, void *att, int ast, meta_dev m, int n_seqs, int64_t n_heads,
                            int64_t n_kv_heads, int64_t hd, int64_t width, int64_t layer, int64_t kv_dim, int kst,
                            float scale, int64_t window) {
    extern __shared__ float sm[]; /* q (hd) | red (NT) | scores (pos + 1 - first key) */
    float *q = sm, *red = sm + hd, *sc = red + NT;
    int t = threadIdx.x;
    xf_attn_task task = xf_attn_index(blockIdx.x, n_heads, n_kv_heads, hd, width, m.tok_off, n_seqs, m.seq_pos);
    const int32_t *table = m.tables + m.table_off[task.seq];
    int64_t tpe = m.tpe[task.seq], ns = m.n_slots[task.seq];
    const void *K = m.kbase[task.seq], *V = m.vbase[task.seq];
    for (int64_t d = t; d < hd; d += NT) q[d] = qkv[task.q_off + d];
    __syncthreads();
    /* a sliding-window layer reads keys first .. pos only (window 0: all of 0 .. pos) */
    const int64_t first = xf_window_first_key(task.pos, window), nkeys = task.pos + 1 - first;
    float mx = -INFINITY;
    for (int64_t j = t; j < nkeys; j += NT) {
        float s = 0.f;
        for (int64_t d = 0; d < hd; d++)
            s += q[d] * ld(K, xf_attn_kv_offset(&task, first + j, d, hd, table, tpe, layer, ns, kv_dim), kst);
        s *= scale;
        sc[j] = s;
        mx = fmaxf(mx, s);
    }
    const float inv = block_softmax(sc, nkeys, mx, red);
    for (int64_t d = t; d < hd; d += NT) {
        float acc = 0.f;
        for (int64_t j = 0; j < nkeys; j++)
            acc += sc[j] * ld(V, xf_attn_kv_offset(&task, first + j, d, hd, table, tpe, layer, ns, kv_dim), kst);
        st_(att, task.out_off + d, acc * inv, ast);
    }
}

__global__ void k_add(float *y, const float *x, int64_t n) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) y[idx] += x[idx];
}

__global__ void k_swiglu(void *h, int hst, const float *gu, int64_t n, int64_t d_ff) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * d_ff) return;
    xf_swiglu_index i = xf_swiglu_at(idx, d_ff);
    float g = gu[i.gate];
    st_(h, i.out, g / (1.0f + expf(-g)) * gu[i.up], hst);
}

__global__ void k_argmax(int32_t *out, const float *logits, int64_t vocab) {
    __shared__ float bv[NT];
    __shared__ int64_t bi[NT];
    int t = threadIdx.x;
    const float *row = logits + (int64_t)blockIdx.x * vocab;
    float v = -INFINITY;
    int64_t iv = INT64_MAX;
    for (int64_t k = 0; k < xf_strided_count(vocab, t, NT); k++) {
        int64_t c = xf_strided_col(t, NT, k);
        if (xf_argmax_better(row[c], c, v, iv)) {
            v = row[c];
            iv = c;
        }
    }
    bv[t] = v;
    bi[t] = iv;
    __syncthreads();
    for (int s = NT / 2; s > 0; s /= 2) {
        if (t < s) {
            int u = xf_tree_partner(t, s);
            if (xf_argmax_better(bv[u], bi[u], bv[t], bi[t])) {
                bv[t] = bv[u];
                bi[t] = bi[u];
            }
        }
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = (int32_t)(bi[0] == INT64_MAX ? 0 : bi[0]);
}

/* ---- context ---- */

struct dev_layer {
    float *attn_norm, *ffn_norm, *qkv_bias;
    void *wqkv, *wo, *wgu, *wdown;
    float *q_norm, *k_norm;     /* (head_dim) qwen3's q/k RMSNorm; NULL without */
    float *o_bias;              /* (d_model) attention_bias's o_proj.bias; NULL without */
    float *gu_bias, *down_bias; /* (2 d_ff) gate then up, (d_model): mlp_bias; NULL without */
    /* mixture of experts (an MoE layer; NULL otherwise) */
    float *router;              /* (E, d_model) fp32: the router GEMM runs in fp32, as the CPU's does */
    float *router_bias;         /* (E) e_score_correction_bias; NULL without */
    void **exp_gu, **exp_down;  /* host arrays (E) of device matrices (2 d_ff_expert, d_model), (d_model, d_ff_expert) */
    void *sh_gu, *sh_down;      /* the shared expert (2 d_ff_shared, d_model), (d_model, d_ff_shared); NULL without */
    float *sh_gate;             /* (d_model) qwen2_moe's shared-expert gate; NULL without */
    /* latent attention */
    void *q_b, *kv_b;           /* (n_heads (nope + rope), q_rank) or NULL, (n_heads (nope + v), kv_rank) */
    float *q_a_norm, *kv_a_norm;/* (q_rank) or NULL, (kv_rank) */
};

/* The experts' buffers (T = max_step_tokens, k = experts_per_tok). */
struct moe_bufs {
    int64_t E, k, fe, fs;
    float *xnf;       /* (T, d_model) fp32 FFN norm output: the router's and the shared gate's input */
    float *logits;    /* (T, E) */
    float *scratch;   /* (T, 2 E + n_group) routing scratch */
    int32_t *sel;     /* (T k) */
    float *selw;      /* (T k) */
    int64_t *counts;  /* (E) device; then off (E + 1) right after it */
    int64_t *row_of;  /* (T k) */
    void *xg;         /* 16-bit (T k, d_model) grouped inputs */
    float *gu;        /* (T k, 2 fe) */
    void *h;          /* 16-bit (T k, fe) */
    float *y;         /* (T k, d_model) */
    float *sgu;       /* (T, 2 fs) */
    void *sh;         /* 16-bit (T, fs) */
    float *sgate;     /* (T) */
    int64_t *host;    /* pinned (2 E + 1): counts | off of the last routed layer */
    int64_t *layer_counts; /* host (n_layers, E): what expert_counts returns */
};

/* Latent attention's buffers (S = max_seq_len). */
struct mla_bufs {
    cuda_mla_dims D;
    void *qa;         /* 16-bit (T, q_rank), q_b's input */
    float *q;         /* (T, n_heads (nope + rope)) */
    void *ckv;        /* 16-bit (S, kv_rank) one sequence's c_kv, kv_b's input */
    float *krope;     /* (S, rope) */
    float *kvdec;     /* (S, n_heads (nope + v)) */
    size_t smem_max;  /* attention's dynamic shared memory for S keys */
    float scale;      /* softmax scale (config_softmax_scale: yarn's mscale included) */
};

struct seq_state { /* system mode */
    void *k, *v;    /* (n_layers, cap, kv_dim) */
    int64_t cap;
};

struct cuda_ctx {
    model_config cfg;
    int64_t d, q_dim, kv_dim, width, ff, vocab, hd;
    kv_cache *kv;
    kv_alloc_mode mode;
    int kst, wst; /* storage of KV, of weights and GEMM inputs */
    size_t kesz, wesz;
    int64_t kv_slots, max_seqs, max_seq_len, max_tok, table_cap;
    int ordinal;
    cudaStream_t st;
    xf_status (*allreduce)(void *ctx, float *buf, int64_t n, const char *what); /* tensor parallel (NCCL, cli/run_tp.c); NULL on one device */
    void *allreduce_ctx;
    const cuda_blas_api *blas;
    cublasHandle_t h;
    void *blas_ws;
    /* weights */
    void *embed, *lm_head;
    float *final_norm;
    dev_layer *layers;
    /* activations */
    float *x, *qkv, *tmp, *gu, *logits;
    void *xn, *att, *hbuf, *last;
    int32_t *next;
    /* KV */
    void *kpool, *vpool;
    seq_state *seqs;
    /* metadata */
    size_t meta_bytes;
    char *meta_host, *meta_dev_buf;
    meta_dev md;
    int n_seqs;   /* of the current step */
    int64_t n_tok;
    size_t attn_smem_max;
    int64_t bytes;
    /* graphs */
    int graph_on, capturing;
    cudaGraphExec_t graph;
    int graph_n_seqs;
    cudaEvent_t ev0, ev1;
    float last_ms; /* embedding .. sampling of the last step, cudaEvents */
    int step_timing;
    int debug_sync; /* XFPROF_CUDA_SYNC_DEBUG=1: synchronise after every op, name the op of a fault */
    double *rope_inv;   /* device (head_dim / 2) config_rope_freqs' inverse frequencies */
    double rope_scale;  /* yarn's attention factor; 1 otherwise */
    int moe, mla;       /* the model has experts / latent attention */
    moe_bufs mo;
    mla_bufs ml;
};

xf_status blas_status(cuda_ctx *c, cublasStatus_t s, const char *what) {
    return xf_errorf(XF_EIO, "cuBLAS %s: %s", what, c->blas->status_string(s));
}

template <typename T> xf_status dalloc(cuda_ctx *c, T **p, int64_t bytes, const char *what) {
    *p = NULL;
    if (bytes <= 0) return XF_OK;
    cudaError_t e = cudaMalloc((void **)p, (size_t)bytes);
    if (e != cudaSuccess) {
        *p = NULL;
        return cuda_status(e, what);
    }
    c->bytes += bytes;
    return XF_OK;
}

/* Uploads a host matrix as 16-bit (bf16 or fp16), converting fp32 / int8 on the host. */
xf_status upload_w(cuda_ctx *c, void **dst, const wmat *m, const char *what) {
    int64_t n = m->rows * m->cols;
    xf_status s = dalloc(c, dst, n * 2, what);
    if (s) return s;
    if (m->dtype == XF_BF16 && c->wst == ST_BF16) {
        XF_CUDA_TRY(cudaMemcpy(*dst, m->data, (size_t)n * 2, cudaMemcpyHostToDevice), what);
        return XF_OK;
    }
    const int64_t chunk_rows = m->cols > 0 ? (((int64_t)1 << 24) / m->cols) + 1 : 1;
    uint16_t *buf = (uint16_t *)malloc((size_t)(chunk_rows * m->cols) * 2);
    if (!buf) return xf_errorf(XF_ENOMEM, "cuda backend: out of host memory converting %s", what);
    for (int64_t r0 = 0; r0 < m->rows; r0 += chunk_rows) {
        int64_t nr = m->rows - r0 < chunk_rows ? m->rows - r0 : chunk_rows;
        for (int64_t r = 0; r < nr; r++)
            for (int64_t col = 0; col < m->cols; col++) {
                float f = m->dtype == XF_FP32 ? ((const float *)m->data)[(r0 + r) * m->cols + col] : weights_get(m, r0 + r, col);
                buf[r * m->cols + col] = c->wst == ST_BF16 ? weights_f32_to_bf16(f) : weights_f32_to_f16(f);
            }
        cudaError_t e = cudaMemcpy((char *)*dst + r0 * m->cols * 2, buf, (size_t)(nr * m->cols) * 2, cudaMemcpyHostToDevice);
        if (e != cudaSuccess) {
            free(buf);
            return cuda_status(e, what);
        }
    }
    free(buf);
    return XF_OK;
}

xf_status upload_f(cuda_ctx *c, float **dst, const float *src, int64_t n, const char *what) {
    xf_status s = dalloc(c, dst, n * 4, what);
    if (s) return s;
    XF_CUDA_TRY(cudaMemcpy(*dst, src, (size_t)n * 4, cudaMemcpyHostToDevice), what);
    return XF_OK;
}

/* An MoE layer's router (fp32), correction bias, experts and shared expert. */
xf_status upload_experts(cuda_ctx *c, dev_layer *L, const layer_weights *lw) {
    const model_config *cfg = &c->cfg;
    const int64_t E = cfg->n_experts, d = c->d;
    if (lw->router.rows != E || lw->router.cols != d)
        return xf_errorf(XF_EINVAL, "cuda backend: the router is %lld x %lld, the config says %lld x %lld", (long long)lw->router.rows,
                         (long long)lw->router.cols, (long long)E, (long long)d);
    float *r = (float *)malloc((size_t)(E * d) * sizeof(float));
    if (!r) return xf_errorf(XF_ENOMEM, "cuda backend: out of host memory converting the router");
    for (int64_t e = 0; e < E; e++)
        for (int64_t i = 0; i < d; i++) r[e * d + i] = weights_get(&lw->router, e, i);
    xf_status s = upload_f(c, &L->router, r, E * d, "router");
    free(r);
    if (s) return s;
    if (lw->router_bias && (s = upload_f(c, &L->router_bias, lw->router_bias, E, "e_score_correction_bias"))) return s;
    L->exp_gu = (void **)calloc((size_t)E, sizeof(void *));
    L->exp_down = (void **)calloc((size_t)E, sizeof(void *));
    if (!L->exp_gu || !L->exp_down) return xf_errorf(XF_ENOMEM, "cuda backend: out of memory");
    for (int64_t e = 0; e < E; e++) {
        if ((s = upload_w(c, &L->exp_gu[e], &lw->exp_gate_up[e], "expert gate_up"))) return s;
        if ((s = upload_w(c, &L->exp_down[e], &lw->exp_down[e], "expert down"))) return s;
    }
    if (cfg->d_ff_shared > 0) {
        if ((s = upload_w(c, &L->sh_gu, &lw->sh_gate_up, "shared expert gate_up"))) return s;
        if ((s = upload_w(c, &L->sh_down, &lw->sh_down, "shared expert down"))) return s;
    }
    if (lw->sh_gate && (s = upload_f(c, &L->sh_gate, lw->sh_gate, d, "shared_expert_gate"))) return s;
    return XF_OK;
}

void cuda_free_ctx(void *ctx) {
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (!c) return;
    if (c->st) cudaStreamSynchronize(c->st);
    if (c->graph) cudaGraphExecDestroy(c->graph);
    if (c->h && c->blas) c->blas->destroy(c->h);
    void *ptrs[] = {c->embed, c->lm_head == c->embed ? NULL : c->lm_head, c->final_norm, c->x, c->qkv, c->tmp, c->gu,
                    c->logits, c->xn, c->att, c->hbuf, c->last, c->next, c->kpool, c->vpool, c->meta_dev_buf, c->blas_ws,
                    c->rope_inv, c->mo.xnf, c->mo.logits, c->mo.scratch, c->mo.sel, c->mo.selw, c->mo.counts, c->mo.row_of,
                    c->mo.xg, c->mo.gu, c->mo.h, c->mo.y, c->mo.sgu, c->mo.sh, c->mo.sgate, c->ml.qa, c->ml.q, c->ml.ckv,
                    c->ml.krope, c->ml.kvdec};
    for (void *p : ptrs)
        if (p) cudaFree(p);
    if (c->layers) {
        for (int64_t l = 0; l < c->cfg.n_layers; l++) {
            dev_layer *L = &c->layers[l];
            void *lp[] = {L->attn_norm, L->ffn_norm, L->qkv_bias, L->wqkv, L->wo, L->wgu, L->wdown, L->q_norm, L->k_norm, L->o_bias,
                          L->gu_bias, L->down_bias,
                          L->router, L->router_bias, L->sh_gu, L->sh_down, L->sh_gate, L->q_b, L->kv_b, L->q_a_norm, L->kv_a_norm};
            for (void *p : lp)
                if (p) cudaFree(p);
            for (int64_t e = 0; e < c->cfg.n_experts; e++) { /* the arrays are (n_experts) wherever allocated */
                if (L->exp_gu && L->exp_gu[e]) cudaFree(L->exp_gu[e]);
                if (L->exp_down && L->exp_down[e]) cudaFree(L->exp_down[e]);
            }
            free(L->exp_gu);
            free(L->exp_down);
        }
        free(c->layers);
    }
    if (c->seqs) {
        for (int64_t s = 0; s < c->max_seqs; s++) {
            if (c->seqs[s].k) cudaFree(c->seqs[s].k);
            if (c->seqs[s].v) cudaFree(c->seqs[s].v);
        }
        free(c->seqs);
    }
    if (c->meta_host) cudaFreeHost(c->meta_host);
    if (c->mo.host) cudaFreeHost(c->mo.host);
    free(c->mo.layer_counts);
    if (c->ev0) cudaEventDestroy(c->ev0);
    if (c->ev1) cudaEventDestroy(c->ev1);
    if (c->st) cudaStreamDestroy(c->st);
    free(c);
}

xf_status upload_rope(cuda_ctx *c);
xf_status alloc_moe(cuda_ctx *c);
xf_status alloc_mla(cuda_ctx *c);

xf_status cuda_init(void **out, const backend_init_args *a) {
    *out = NULL;
    if (!a || !a->cfg) return xf_errorf(XF_EINVAL, "cuda backend: no config");
    /* Refused before any device is opened: the input is what is wrong, on any machine. */
    const char *ext = cuda_meta_unsupported(a->cfg, a->weights ? a->weights->dtype : XF_FP32, a->kv_alloc);
    if (ext)
        return xf_errorf(XF_EINVAL, "cuda backend: %s (%s) is not implemented on the GPU yet: run it with --device cpu", ext,
                         a->cfg->name);
    xf_status s = cuda_device_open(a->device_index, NULL);
    if (s) return s;
    if (!a->weights) return xf_errorf(XF_EINVAL, "cuda backend: no weights");
    if (a->kvdtype != XF_FP32 && a->kvdtype != XF_FP16 && a->kvdtype != XF_BF16)
        return xf_errorf(XF_EINVAL, "cuda backend: KV dtype %s is not supported (fp32, fp16, bf16)", dtype_name(a->kvdtype));
    if (a->max_seqs < 1 || a->max_seq_len < 1 || a->max_step_tokens < 1)
        return xf_errorf(XF_EINVAL, "cuda backend: max_seqs, max_seq_len and max_step_tokens must be >= 1");
    if (a->kv_alloc == KV_ALLOC_POOL && (!a->kv || a->kv_slots < 1))
        return xf_errorf(XF_EINVAL, "cuda backend: pool mode needs the KV manager and its slot count");
    const cuda_blas_api *blas;
    if ((s = cuda_blas_load(&blas))) return s;
    cuda_ctx *c = (cuda_ctx *)calloc(1, sizeof *c);
    if (!c) return xf_errorf(XF_ENOMEM, "cuda backend: out of memory");
    const model_config *cfg = a->cfg;
    c->cfg = *cfg;
    c->d = cfg->d_model;
    c->hd = cfg->head_dim;
    c->q_dim = cfg->n_heads * cfg->head_dim;
    c->kv_dim = cfg->n_kv_heads * cfg->head_dim;
    c->width = c->q_dim + 2 * c->kv_dim;
    c->ff = cfg->d_ff;
    c->vocab = cfg->vocab;
    c->moe = cfg->n_experts > 0;
    c->mla = model_is_mla(cfg);
    if (c->mla) { /* the latent row is the cached "K" (no V array); att holds n_heads * v_head_dim */
        cuda_mla_dims *D = &c->ml.D;
        D->n_heads = cfg->n_heads;
        D->nope = cfg->qk_nope_head_dim;
        D->rope = cfg->qk_rope_head_dim;
        D->v = cfg->v_head_dim;
        D->kv_rank = cfg->kv_lora_rank;
        D->q_rank = cfg->q_lora_rank;
        D->q_rows = D->q_rank > 0 ? D->q_rank : D->n_heads * (D->nope + D->rope);
        D->qkv_width = D->q_rows + D->kv_rank + D->rope;
        c->q_dim = D->n_heads * D->v;
        c->kv_dim = D->kv_rank + D->rope;
        c->width = D->qkv_width;
        c->ml.scale = (float)config_softmax_scale(cfg);
    }
    c->kv = a->kv;
    c->mode = a->kv_alloc;
    c->kst = a->kvdtype == XF_FP32 ? ST_F32 : a->kvdtype == XF_BF16 ? ST_BF16 : ST_F16;
    c->kesz = a->kvdtype == XF_FP32 ? 4 : 2;
    c->debug_sync = cuda_check_debug_env(getenv("XFPROF_CUDA_SYNC_DEBUG"));
    c->allreduce = a->allreduce;
    c->allreduce_ctx = a->allreduce_ctx;
    const char *wenv = getenv("XFPROF_CUDA_WEIGHTS");
    c->wst = wenv && !strcmp(wenv, "fp16") ? ST_F16 : ST_BF16;
    c->wesz = 2;
    c->kv_slots = a->kv_slots;
    c->max_seqs = a->max_seqs;
    c->max_seq_len = a->max_seq_len;
    c->max_tok = a->max_step_tokens;
    c->table_cap = a->max_seqs * (a->max_seq_len + 1);
    c->ordinal = a->device_index;
    c->blas = blas;
    const int64_t T = c->max_tok, S = c->max_seqs, d = c->d;
#define TRY(x)                  \
    do {                        \
        if ((s = (x))) goto fail; \
    } while (0)
#define CTRY(x, what)                                 \
    do {                                              \
        cudaError_t e_ = (x);                         \
        if (e_ != cudaSuccess) {                      \
            s = cuda_status(e_, what);                \
            goto fail;                                \
        }                                             \
    } while (0)
    {
        CTRY(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking), "cudaStreamCreate");
        CTRY(cudaEventCreate(&c->ev0), "cudaEventCreate");
        CTRY(cudaEventCreate(&c->ev1), "cudaEventCreate");
        cublasStatus_t bs = blas->create(&c->h);
        if (bs != CUBLAS_STATUS_SUCCESS) {
            s = blas_status(c, bs, "create");
            goto fail;
        }
        /* Stream first: cublasSetStream "unconditionally resets the cuBLAS library workspace back to
         * the default workspace pool" (cuBLAS docs, cublasSetStream), which would undo the next call. */
        if ((bs = blas->set_stream(c->h, c->st)) != CUBLAS_STATUS_SUCCESS) {
            s = blas_status(c, bs, "set stream");
            goto fail;
        }
        /* A fixed workspace so that GEMMs can be captured into a CUDA graph without cuBLAS
         * allocating (cuBLAS docs, CUDA Graphs support); 32 MiB is the size the docs recommend for
         * Hopper, cudaMalloc's alignment meets the 256-byte minimum. */
        TRY(dalloc(c, &c->blas_ws, 32 << 20, "cuBLAS workspace"));
        if ((bs = blas->set_workspace(c->h, c->blas_ws, 32 << 20)) != CUBLAS_STATUS_SUCCESS) {
            s = blas_status(c, bs, "set workspace");
            goto fail;
        }
        const model_weights *w = a->weights;
        TRY(upload_w(c, &c->embed, &w->embed, "embedding"));
        if (cfg->tied_embeddings && w->lm_head.data == w->embed.data) c->lm_head = c->embed;
        else TRY(upload_w(c, &c->lm_head, &w->lm_head, "lm_head"));
        TRY(upload_f(c, &c->final_norm, w->final_norm, d, "final norm"));
        c->layers = (dev_layer *)calloc((size_t)cfg->n_layers, sizeof *c->layers);
        if (!c->layers) {
            s = xf_errorf(XF_ENOMEM, "cuda backend: out of memory");
            goto fail;
        }
        for (int64_t l = 0; l < cfg->n_layers; l++) {
            const layer_weights *lw = &w->layers[l];
            dev_layer *L = &c->layers[l];
            TRY(upload_f(c, &L->attn_norm, lw->attn_norm, d, "attn norm"));
            TRY(upload_f(c, &L->ffn_norm, lw->ffn_norm, d, "ffn norm"));
            if (lw->qkv_bias) TRY(upload_f(c, &L->qkv_bias, lw->qkv_bias, c->width, "qkv bias"));
            TRY(upload_w(c, &L->wqkv, &lw->qkv, "qkv"));
            TRY(upload_w(c, &L->wo, &lw->o, "o_proj"));
            if (lw->q_norm) TRY(upload_f(c, &L->q_norm, lw->q_norm, c->hd, "q_norm"));
            if (lw->k_norm) TRY(upload_f(c, &L->k_norm, lw->k_norm, c->hd, "k_norm"));
            if (lw->o_bias) TRY(upload_f(c, &L->o_bias, lw->o_bias, d, "o_proj bias"));
            if (lw->gate_up_bias) TRY(upload_f(c, &L->gu_bias, lw->gate_up_bias, 2 * c->ff, "gate_up bias"));
            if (lw->down_bias) TRY(upload_f(c, &L->down_bias, lw->down_bias, d, "down bias"));
            if (c->mla) {
                if (cfg->q_lora_rank > 0) {
                    TRY(upload_w(c, &L->q_b, &lw->q_b, "q_b_proj"));
                    TRY(upload_f(c, &L->q_a_norm, lw->q_a_norm, cfg->q_lora_rank, "q_a_layernorm"));
                }
                TRY(upload_w(c, &L->kv_b, &lw->kv_b, "kv_b_proj"));
                TRY(upload_f(c, &L->kv_a_norm, lw->kv_a_norm, cfg->kv_lora_rank, "kv_a_layernorm"));
            }
            if (!lw->exp_gate_up) {
                TRY(upload_w(c, &L->wgu, &lw->gate_up, "gate_up"));
                TRY(upload_w(c, &L->wdown, &lw->down, "down"));
                continue;
            }
            TRY(upload_experts(c, L, lw));
        }
        TRY(dalloc(c, &c->x, T * d * 4, "activations"));
        TRY(dalloc(c, &c->xn, T * d * 2, "activations"));
        TRY(dalloc(c, &c->qkv, T * c->width * 4, "activations"));
        TRY(dalloc(c, &c->att, T * c->q_dim * 2, "activations"));
        TRY(dalloc(c, &c->tmp, T * d * 4, "activations"));
        TRY(dalloc(c, &c->gu, T * 2 * c->ff * 4, "activations"));
        TRY(dalloc(c, &c->hbuf, T * c->ff * 2, "activations"));
        TRY(dalloc(c, &c->last, S * d * 2, "activations"));
        TRY(dalloc(c, &c->logits, S * c->vocab * 4, "logits"));
        TRY(dalloc(c, &c->next, S * 4, "tokens"));
        if (c->mode == KV_ALLOC_POOL) {
            int64_t kvb = cfg->n_layers * c->kv_slots * c->kv_dim * (int64_t)c->kesz;
            TRY(dalloc(c, &c->kpool, kvb, "KV pool"));
            if (!c->mla) TRY(dalloc(c, &c->vpool, kvb, "KV pool")); /* MLA: one latent row per token */
        }
        TRY(upload_rope(c));
        if (c->moe) TRY(alloc_moe(c));
        if (c->mla) TRY(alloc_mla(c));
        c->seqs = (seq_state *)calloc((size_t)S, sizeof *c->seqs);
        if (!c->seqs) {
            s = xf_errorf(XF_ENOMEM, "cuda backend: out of memory");
            goto fail;
        }
        cuda_meta_layout ML = cuda_meta_layout_of(S, T, c->table_cap);
        c->meta_bytes = ML.total;
        CTRY(cudaMallocHost((void **)&c->meta_host, ML.total), "pinned metadata");
        memset(c->meta_host, 0, ML.total);
        TRY(dalloc(c, &c->meta_dev_buf, (int64_t)ML.total, "metadata"));
        char *b = c->meta_dev_buf;
        c->md.tok_off = (const int64_t *)(b + ML.tok_off);
        c->md.seq_pos = (const int64_t *)(b + ML.seq_pos);
        c->md.table_off = (const int64_t *)(b + ML.table_off);
        c->md.tpe = (const int64_t *)(b + ML.tpe);
        c->md.n_slots = (const int64_t *)(b + ML.n_slots);
        c->md.kbase = (void *const *)(b + ML.kbase);
        c->md.vbase = (void *const *)(b + ML.vbase);
        c->md.tokens = (const int32_t *)(b + ML.tokens);
        c->md.tables = (const int32_t *)(b + ML.tables);
        /* attention's shared memory: q + reduction + scores of up to max_seq_len keys */
        c->attn_smem_max = (size_t)(c->hd + NT + c->max_seq_len) * 4;
        int optin = 0;
        CTRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, c->ordinal),
             "shared memory per block (cudaDeviceGetAttribute)");
        if (c->attn_smem_max > (size_t)optin) {
            s = xf_errorf(XF_EUNSUPPORTED, "cuda backend: attention keeps %lld scores in shared memory, more than the %d bytes "
                                           "this GPU offers a block: use max_seq_len <= %lld",
                          (long long)c->max_seq_len, optin, (long long)(optin / 4 - c->hd - NT));
            goto fail;
        }
        CTRY(cudaFuncSetAttribute(k_attention, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c->attn_smem_max),
             "attention shared memory");
        CTRY(cudaStreamSynchronize(c->st), "init");
    }
#undef TRY
#undef CTRY
    *out = c;
    return XF_OK;
fail:
    cuda_free_ctx(c);
    return s;
}

/* config_rope_freqs' table (head_dim / 2 doubles) on the device, the CPU's RoPE exactly. */
xf_status upload_rope(cuda_ctx *c) {
    const int64_t half = c->hd / 2;
    double *inv = (double *)malloc((size_t)(half > 0 ? half : 1) * sizeof(double));
    if (!inv) return xf_errorf(XF_ENOMEM, "cuda backend: out of memory");
    xf_status s = config_rope_freqs(&c->cfg, inv, &c->rope_scale);
    if (!s) s = dalloc(c, &c->rope_inv, half * 8, "RoPE table");
    cudaError_t e = s ? cudaSuccess : cudaMemcpy(c->rope_inv, inv, (size_t)half * 8, cudaMemcpyHostToDevice);
    free(inv);
    if (s) return s;
    XF_CUDA_TRY(e, "RoPE table");
    return XF_OK;
}

/* The experts' buffers for steps of max_tok tokens. */
xf_status alloc_moe(cuda_ctx *c) {
    const model_config *cfg = &c->cfg;
    moe_bufs *M = &c->mo;
    M->E = cfg->n_experts;
    M->k = cfg->experts_per_tok;
    M->fe = cfg->d_ff_expert;
    M->fs = cfg->d_ff_shared;
    const int64_t T = c->max_tok, TK = T * M->k, d = c->d, G = cfg->n_group > 0 ? cfg->n_group : 1;
    xf_status s;
    if ((s = dalloc(c, &M->xnf, T * d * 4, "MoE buffers")) || (s = dalloc(c, &M->logits, T * M->E * 4, "MoE buffers")) ||
        (s = dalloc(c, &M->scratch, T * (2 * M->E + G) * 4, "MoE buffers")) || (s = dalloc(c, &M->sel, TK * 4, "MoE buffers")) ||
        (s = dalloc(c, &M->selw, TK * 4, "MoE buffers")) || (s = dalloc(c, &M->counts, (2 * M->E + 1) * 8, "MoE buffers")) ||
        (s = dalloc(c, &M->row_of, TK * 8, "MoE buffers")) || (s = dalloc(c, &M->xg, TK * d * 2, "MoE buffers")) ||
        (s = dalloc(c, &M->gu, TK * 2 * M->fe * 4, "MoE buffers")) || (s = dalloc(c, &M->h, TK * M->fe * 2, "MoE buffers")) ||
        (s = dalloc(c, &M->y, TK * d * 4, "MoE buffers")))
        return s;
    if (M->fs > 0 && ((s = dalloc(c, &M->sgu, T * 2 * M->fs * 4, "MoE buffers")) || (s = dalloc(c, &M->sh, T * M->fs * 2, "MoE buffers"))))
        return s;
    if (cfg->shared_expert_gate && (s = dalloc(c, &M->sgate, T * 4, "MoE buffers"))) return s;
    XF_CUDA_TRY(cudaMallocHost((void **)&M->host, (size_t)(2 * M->E + 1) * 8), "pinned expert counts");
    M->layer_counts = (int64_t *)calloc((size_t)(cfg->n_layers * M->E), sizeof(int64_t));
    if (!M->layer_counts) return xf_errorf(XF_ENOMEM, "cuda backend: out of memory");
    return XF_OK;
}

/* Latent attention's buffers: queries for max_tok rows, one sequence's decompressed context of
 * max_seq_len rows; attention's shared memory checked against the device's. */
xf_status alloc_mla(cuda_ctx *c) {
    mla_bufs *B = &c->ml;
    const cuda_mla_dims *D = &B->D;
    const int64_t T = c->max_tok, S = c->max_seq_len, qw = D->n_heads * (D->nope + D->rope);
    xf_status s;
    if ((D->q_rank > 0 && (s = dalloc(c, &B->qa, T * D->q_rank * 2, "MLA buffers"))) || (s = dalloc(c, &B->q, T * qw * 4, "MLA buffers")) ||
        (s = dalloc(c, &B->ckv, S * D->kv_rank * 2, "MLA buffers")) || (s = dalloc(c, &B->krope, S * D->rope * 4, "MLA buffers")) ||
        (s = dalloc(c, &B->kvdec, S * D->n_heads * (D->nope + D->v) * 4, "MLA buffers")))
        return s;
    B->smem_max = (size_t)(D->nope + D->rope + NT + S) * 4;
    int optin = 0;
    XF_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, c->ordinal), "shared memory per block");
    if (B->smem_max > (size_t)optin)
        return xf_errorf(XF_EUNSUPPORTED, "cuda backend: latent attention keeps %lld scores in shared memory, more than the %d bytes "
                         "this GPU offers a block: use max_seq_len <= %lld", (long long)S, optin,
                         (long long)(optin / 4 - NT - D->nope - D->rope));
    XF_CUDA_TRY(cuda_mla_attention_smem(B->smem_max), "latent attention shared memory");
    return XF_OK;
}

/* Grows sequence s's own KV arrays to `need` slots per layer (system mode). */
xf_status grow_seq(cuda_ctx *c, seq_state *q, int64_t keep, int64_t need) {
    const size_t row = (size_t)c->kv_dim * c->kesz;
    const int64_t L = c->cfg.n_layers;
    void *nk = NULL, *nv = NULL;
    cudaError_t e = cudaMalloc(&nk, (size_t)(L * need) * row);
    if (e == cudaSuccess) e = cudaMalloc(&nv, (size_t)(L * need) * row);
    const char *what = "KV grow (cudaMalloc)";
    if (e == cudaSuccess && keep > 0) {
        /* layer l's rows move from l * cap to l * need: one 2D copy per array */
        what = "KV grow (copy)";
        e = cudaMemcpy2DAsync(nk, (size_t)need * row, q->k, (size_t)q->cap * row, (size_t)keep * row, (size_t)L,
                              cudaMemcpyDeviceToDevice, c->st);
        if (e == cudaSuccess)
            e = cudaMemcpy2DAsync(nv, (size_t)need * row, q->v, (size_t)q->cap * row, (size_t)keep * row, (size_t)L,
                                  cudaMemcpyDeviceToDevice, c->st);
    }
    if (e != cudaSuccess) {
        /* the new arrays are ours until they replace the old ones: free them on every failure
         * (the stream is synchronised first, a copy may still be reading into them) */
        cudaStreamSynchronize(c->st);
        cudaFree(nk);
        cudaFree(nv);
        return cuda_status(e, what);
    }
    /* cudaFree synchronises: part of the cost. The new arrays hold the KV from here on. */
    void *ok = q->k, *ov = q->v;
    c->bytes += 2 * L * (need - q->cap) * (int64_t)row;
    q->k = nk;
    q->v = nv;
    q->cap = need;
    if (ok) XF_CUDA_TRY(cudaFree(ok), "KV grow (cudaFree)");
    if (ov) XF_CUDA_TRY(cudaFree(ov), "KV grow (cudaFree)");
    return XF_OK;
}

xf_status kv_alloc(cuda_ctx *c, const step_batch *b) {
    if (c->mode == KV_ALLOC_POOL) {
        int64_t ncp = 0;
        const kv_copy *cp = kv_cache_copies(c->kv, &ncp);
        const size_t row = (size_t)c->kv_dim * c->kesz;
        for (int64_t i = 0; i < ncp; i++)
            for (int64_t l = 0; l < c->cfg.n_layers; l++) {
                size_t src = (size_t)(l * c->kv_slots + cp[i].src_slot) * row, dst = (size_t)(l * c->kv_slots + cp[i].dst_slot) * row;
                XF_CUDA_TRY(cudaMemcpyAsync((char *)c->kpool + dst, (char *)c->kpool + src, (size_t)cp[i].n_slots * row,
                                            cudaMemcpyDeviceToDevice, c->st), "KV copy-on-write");
                if (c->vpool)
                    XF_CUDA_TRY(cudaMemcpyAsync((char *)c->vpool + dst, (char *)c->vpool + src, (size_t)cp[i].n_slots * row,
                                                cudaMemcpyDeviceToDevice, c->st), "KV copy-on-write");
            }
        if (ncp) kv_cache_clear_copies(c->kv);
    }
    if (b->n_seqs < 1 || b->n_seqs > c->max_seqs) return xf_errorf(XF_EINVAL, "cuda backend: %d sequences", b->n_seqs);
    /* system mode: grow each sequence's own arrays to what the step needs first */
    int64_t caps[1024];
    const int64_t *sys_caps = NULL;
    if (c->mode == KV_ALLOC_SYSTEM) {
        if (b->n_seqs > 1024) return xf_errorf(XF_EINVAL, "cuda backend: system KV mode handles at most 1024 sequences per step");
        for (int s = 0; s < b->n_seqs; s++) {
            const step_seq *q = &b->seqs[s];
            seq_state *st = &c->seqs[s];
            const int64_t need = q->pos + q->n_new;
            if (q->pos < 0 || q->n_new < 1 || need > c->max_seq_len)
                return xf_errorf(XF_EINVAL, "cuda backend: sequence %d at position %lld + %lld new tokens exceeds max_seq_len %lld", s,
                                 (long long)q->pos, (long long)q->n_new, (long long)c->max_seq_len);
            if (need > st->cap) {
                xf_status e = grow_seq(c, st, q->pos < st->cap ? q->pos : st->cap, need);
                if (e) return e;
            }
            caps[s] = st->cap;
        }
        sys_caps = caps;
    }
    /* The pinned block may still be read by the previous step's copy: wait for it. */
    XF_CUDA_TRY(cudaStreamSynchronize(c->st), "kv_alloc");
    cuda_meta_layout ML = cuda_meta_layout_of(c->max_seqs, c->max_tok, c->table_cap);
    cuda_meta_view v = cuda_meta_view_of(c->meta_host, &ML);
    xf_status st = cuda_meta_pack(&v, b, c->kv, c->kv_slots, sys_caps, c->max_seqs, c->max_tok, c->max_seq_len, c->table_cap,
                                  c->vocab);
    if (st) return st;
    for (int s = 0; s < b->n_seqs; s++) {
        v.kbase[s] = sys_caps ? c->seqs[s].k : c->kpool;
        v.vbase[s] = sys_caps ? c->seqs[s].v : c->vpool;
    }
    c->n_seqs = b->n_seqs;
    c->n_tok = b->n_tokens;
    XF_CUDA_TRY(cudaMemcpyAsync(c->meta_dev_buf, c->meta_host, c->meta_bytes, cudaMemcpyHostToDevice, c->st), "metadata upload");
    return XF_OK;
}

/* Y (n, out) fp32 = X (n, in) 16-bit · W^T, W (out, in) row-major 16-bit. */
xf_status gemm(cuda_ctx *c, const void *W, const void *X, float *Y, int64_t out, int64_t in, int64_t n, const char *what) {
    const float one = 1.f, zero = 0.f;
    cudaDataType_t t = c->wst == ST_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    cublasStatus_t s = c->blas->gemm_ex(c->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)n, (int)in, &one, W, t, (int)in, X, t,
                                        (int)in, &zero, Y, CUDA_R_32F, (int)out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) return blas_status(c, s, what);
    return XF_OK;
}

xf_status launch_check(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_status(e, what);
    return XF_OK;
}

/* Y (n, out) fp32 = X (n, in) fp32 . W^T, W (out, in) fp32: the router, in the CPU's precision. */
xf_status gemm_f32(cuda_ctx *c, const float *W, const float *X, float *Y, int64_t out, int64_t in, int64_t n, const char *what) {
    const float one = 1.f, zero = 0.f;
    cublasStatus_t s = c->blas->gemm_ex(c->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)n, (int)in, &one, W, CUDA_R_32F, (int)in, X,
                                        CUDA_R_32F, (int)in, &zero, Y, CUDA_R_32F, (int)out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) return blas_status(c, s, what);
    return XF_OK;
}

/* An MoE layer's gate_up: router, routing, permutation (its counts read back: the experts' GEMM
 * sizes, and expert_counts' answer), gather, the chosen experts' and the shared expert's gate/up. */
xf_status moe_gate_up(cuda_ctx *c, const dev_layer *L, int layer, int64_t n) {
    const model_config *cfg = &c->cfg;
    moe_bufs *M = &c->mo;
    const int64_t E = M->E, k = M->k, d = c->d;
    xf_status s = gemm_f32(c, L->router, M->xnf, M->logits, E, d, n, "router");
    if (s) return s;
    cuda_moe_route(c->st, M->logits, n, E, k, cfg->moe_score == MOE_SCORE_SIGMOID_GROUPED, L->router_bias, cfg->n_group, cfg->topk_group,
                   cfg->norm_topk_prob, cfg->routed_scaling_factor, M->scratch, M->sel, M->selw);
    if ((s = launch_check("router top-k"))) return s;
    int64_t *off = M->counts + E;
    cuda_moe_permute(c->st, M->sel, n * k, E, M->counts, off, M->row_of);
    if ((s = launch_check("expert permutation"))) return s;
    XF_CUDA_TRY(cudaMemcpyAsync(M->host, M->counts, (size_t)(2 * E + 1) * 8, cudaMemcpyDeviceToHost, c->st), "expert counts");
    XF_CUDA_TRY(cudaStreamSynchronize(c->st), "expert counts");
    const int64_t *cnt = M->host, *hoff = M->host + E;
    memcpy(M->layer_counts + (int64_t)layer * E, cnt, (size_t)E * sizeof(int64_t));
    cuda_moe_gather(c->st, M->xg, c->wst, M->xnf, n, k, d, M->row_of);
    if ((s = launch_check("expert gather"))) return s;
    for (int64_t e = 0; e < E; e++)
        if (cnt[e] > 0 && (s = gemm(c, L->exp_gu[e], st_at(M->xg, hoff[e] * d, c->wst), M->gu + hoff[e] * 2 * M->fe, 2 * M->fe, d, cnt[e],
                                    "expert gate_up")))
            return s;
    if (M->fs > 0 && (s = gemm(c, L->sh_gu, c->xn, M->sgu, 2 * M->fs, d, n, "shared expert gate_up"))) return s;
    if (L->sh_gate) {
        cuda_moe_shared_gate(c->st, M->sgate, M->xnf, L->sh_gate, n, d);
        if ((s = launch_check("shared expert gate"))) return s;
    }
    return XF_OK;
}

/* An MoE layer's down: the chosen experts' down GEMMs on their rows, the shared expert's into
 * tmp, then the weighted sum (+ gate * shared) into tmp. */
xf_status moe_down(cuda_ctx *c, const dev_layer *L, int64_t n) {
    moe_bufs *M = &c->mo;
    const int64_t E = M->E, d = c->d, *cnt = M->host, *hoff = M->host + E;
    xf_status s;
    for (int64_t e = 0; e < E; e++)
        if (cnt[e] > 0 && (s = gemm(c, L->exp_down[e], st_at(M->h, hoff[e] * M->fe, c->wst), M->y + hoff[e] * d, d, M->fe, cnt[e],
                                    "expert down")))
            return s;
    if (M->fs > 0 && (s = gemm(c, L->sh_down, M->sh, c->tmp, d, M->fs, n, "shared expert down"))) return s;
    cuda_moe_combine(c->st, c->tmp, M->y, M->selw, M->row_of, M->sgate, M->fs > 0, n, M->k, d);
    return launch_check("expert combine");
}

/* Latent attention's qkv, rope, kv_append and attention (cuda_mla.cuh). */
xf_status mla_op(cuda_ctx *c, op_kind k, const dev_layer *L, int layer, const step_batch *b) {
    mla_bufs *B = &c->ml;
    const cuda_mla_dims *D = &B->D;
    const int64_t n = c->n_tok;
    xf_status s;
    switch (k) {
    case OP_QKV:
        if ((s = gemm(c, L->wqkv, c->xn, c->qkv, D->qkv_width, c->d, n, "qkv (q_a | kv_a)"))) return s;
        cuda_mla_norms(c->st, D, c->qkv, B->qa, c->wst, B->q, L->q_a_norm, L->kv_a_norm, n, MLA_NORM_EPS);
        if ((s = launch_check("q_a / kv_a norms"))) return s;
        if (D->q_rank > 0) return gemm(c, L->q_b, B->qa, B->q, D->n_heads * (D->nope + D->rope), D->q_rank, n, "q_b");
        return XF_OK;
    case OP_ROPE:
        cuda_mla_rope(c->st, D, c->qkv, B->q, c->md, c->n_seqs, n, c->rope_inv, c->rope_scale, c->cfg.rope_interleave);
        return launch_check("latent rope");
    case OP_KV_APPEND:
        cuda_mla_append(c->st, D, c->qkv, c->md, c->n_seqs, n, layer, c->kst);
        return launch_check("latent kv_append");
    case OP_ATTENTION:
        for (int sq = 0; sq < b->n_seqs; sq++) {
            const int64_t ctx = b->seqs[sq].pos + b->seqs[sq].n_new;
            cuda_mla_gather(c->st, D, c->md, sq, ctx, layer, c->kst, B->ckv, c->wst, B->krope);
            if ((s = launch_check("latent gather"))) return s;
            if ((s = gemm(c, L->kv_b, B->ckv, B->kvdec, D->n_heads * (D->nope + D->v), D->kv_rank, ctx, "kv_b (decompression)"))) return s;
            cuda_mla_attention(c->st, D, B->q, B->kvdec, B->krope, c->att, c->wst, b->tok_off[sq], b->seqs[sq].pos, b->seqs[sq].n_new,
                               B->scale, (size_t)(D->nope + D->rope + NT + ctx) * 4);
            if ((s = launch_check("latent attention"))) return s;
        }
        return XF_OK;
    default:
        return xf_errorf(XF_EINVAL, "cuda backend: op %d is not one of latent attention's", (int)k);
    }
}

xf_status run_op_impl(cuda_ctx *c, op_kind k, int layer, const step_batch *b) {
    const model_config *cfg = &c->cfg;
    const int64_t n = c->n_tok, d = c->d;
    const int S = c->n_seqs;
    const dev_layer *L = NULL;
    if (op_kind_is_per_layer(k)) {
        if (layer < 0 || layer >= cfg->n_layers) return xf_errorf(XF_EINVAL, "cuda backend: layer %d out of range", layer);
        L = &c->layers[layer];
    }
    if (c->mla && (k == OP_QKV || k == OP_ROPE || k == OP_KV_APPEND || k == OP_ATTENTION)) return mla_op(c, k, L, layer, b);
    const int moe_layer = c->moe && layer >= 0 && model_layer_is_moe(cfg, layer);
    switch (k) {
    case OP_KV_ALLOC:
        return kv_alloc(c, b);
    case OP_EMBEDDING:
        k_embed<<<blocks_for(n * d, NT), NT, 0, c->st>>>(c->x, c->embed, c->wst, c->md.tokens, n, d);
        return launch_check("embedding");
    case OP_ATTN_NORM:
    case OP_FFN_NORM:
        k_rmsnorm<<<(unsigned)n, NT, 0, c->st>>>(c->xn, c->wst, c->x, k == OP_ATTN_NORM ? L->attn_norm : L->ffn_norm, d,
                                                 (float)cfg->norm_eps, NULL);
        if (k == OP_FFN_NORM && moe_layer) /* the router's fp32 input, as the CPU's */
            k_rmsnorm<<<(unsigned)n, NT, 0, c->st>>>(c->mo.xnf, ST_F32, c->x, L->ffn_norm, d, (float)cfg->norm_eps, NULL);
        return launch_check("rmsnorm");
    case OP_QKV: {
        xf_status s = gemm(c, L->wqkv, c->xn, c->qkv, c->width, d, n, "qkv");
        if (s || !L->qkv_bias) return s;
        k_bias<<<blocks_for(n * c->width, NT), NT, 0, c->st>>>(c->qkv, L->qkv_bias, n, c->width);
        return launch_check("qkv bias");
    }
    case OP_ROPE: {
        if (L->q_norm) { /* qwen3: every Q and K head RMSNorm'd before the rotation */
            k_head_norm<<<(unsigned)(n * (cfg->n_heads + cfg->n_kv_heads)), NT, 0, c->st>>>(
                c->qkv, L->q_norm, L->k_norm, n, cfg->n_heads, cfg->n_kv_heads, c->hd, c->width, c->q_dim, (float)cfg->norm_eps);
            xf_status s = launch_check("q/k norm");
            if (s) return s;
        }
        int64_t pairs = n * (cfg->n_heads + cfg->n_kv_heads) * (c->hd / 2);
        k_rope<<<blocks_for(pairs, NT), NT, 0, c->st>>>(c->qkv, c->md, S, n, cfg->n_heads, cfg->n_kv_heads, c->hd, c->width,
                                                         c->q_dim, c->rope_inv, c->rope_scale);
        return launch_check("rope");
    }
    case OP_KV_APPEND:
        k_kv_append<<<blocks_for(2 * n * c->kv_dim, NT), NT, 0, c->st>>>(c->qkv, c->md, S, n, c->kv_dim, c->width, c->q_dim,
                                                                          layer, c->kst);
        return launch_check("kv_append");
    case OP_ATTENTION: {
        int64_t maxpos = 0;
        for (int s = 0; s < S; s++) {
            int64_t p = b->seqs[s].pos + b->seqs[s].n_new;
            if (p > maxpos) maxpos = p;
        }
        /* the graph replays with the largest context the backend was built for */
        size_t smem = c->graph_on && b->phase == XF_DECODE ? c->attn_smem_max : (size_t)(c->hd + NT + maxpos) * 4;
        k_attention<<<(unsigned)(n * cfg->n_heads), NT, smem, c->st>>>(c->qkv, c->att, c->wst, c->md, S, cfg->n_heads,
                                                                        cfg->n_kv_heads, c->hd, c->width, layer, c->kv_dim,
                                                                        c->kst, (float)(1.0 / sqrt((double)c->hd)),
                                                                        model_layer_window(cfg, layer));
        return launch_check("attention");
    }
    case OP_O_PROJ: {
        xf_status s = gemm(c, L->wo, c->att, c->tmp, d, c->q_dim, n, "o_proj");
        if (s || !L->o_bias) return s;
        k_bias<<<blocks_for(n * d, NT), NT, 0, c->st>>>(c->tmp, L->o_bias, n, d);
        return launch_check("o_proj bias");
    }
    case OP_ATTN_RESIDUAL:
    case OP_FFN_RESIDUAL:
        k_add<<<blocks_for(n * d, NT), NT, 0, c->st>>>(c->x, c->tmp, n * d);
        return launch_check("residual");
    case OP_GATE_UP:
        if (moe_layer) return moe_gate_up(c, L, layer, n);
        {
            xf_status s = gemm(c, L->wgu, c->xn, c->gu, 2 * c->ff, d, n, "gate_up");
            if (s || !L->gu_bias) return s;
            k_bias<<<blocks_for(n * 2 * c->ff, NT), NT, 0, c->st>>>(c->gu, L->gu_bias, n, 2 * c->ff);
            return launch_check("gate_up bias");
        }
    case OP_SWIGLU:
        if (moe_layer) {
            k_swiglu<<<blocks_for(n * c->mo.k * c->mo.fe, NT), NT, 0, c->st>>>(c->mo.h, c->wst, c->mo.gu, n * c->mo.k, c->mo.fe);
            if (c->mo.fs > 0) k_swiglu<<<blocks_for(n * c->mo.fs, NT), NT, 0, c->st>>>(c->mo.sh, c->wst, c->mo.sgu, n, c->mo.fs);
            return launch_check("expert swiglu");
        }
        k_swiglu<<<blocks_for(n * c->ff, NT), NT, 0, c->st>>>(c->hbuf, c->wst, c->gu, n, c->ff);
        return launch_check("swiglu");
    case OP_DOWN:
        if (moe_layer) return moe_down(c, L, n);
        {
            xf_status s = gemm(c, L->wdown, c->hbuf, c->tmp, d, c->ff, n, "down");
            if (s || !L->down_bias) return s;
            k_bias<<<blocks_for(n * d, NT), NT, 0, c->st>>>(c->tmp, L->down_bias, n, d);
            return launch_check("down bias");
        }
    case OP_FINAL_NORM:
        k_rmsnorm<<<(unsigned)S, NT, 0, c->st>>>(c->last, c->wst, c->x, c->final_norm, d, (float)cfg->norm_eps, c->md.tok_off);
        return launch_check("final_norm");
    case OP_LM_HEAD:
        return gemm(c, c->lm_head, c->last, c->logits, c->vocab, d, S, "lm_head");
    case OP_SAMPLING:
        k_argmax<<<(unsigned)S, NT, 0, c->st>>>(c->next, c->logits, c->vocab);
        return launch_check("sampling");
    case OP_ALL_REDUCE: { /* tensor parallel: o_proj's / down's partial sums (tmp, n x d) over the ranks, once this stream's work is done */
        if (!c->allreduce) return xf_errorf(XF_EINVAL, "cuda backend: an all-reduce on one device");
        cudaError_t e = cudaStreamSynchronize(c->st);
        if (e != cudaSuccess) return xf_errorf(XF_EIO, "cuda backend: before the all-reduce of layer %d: %s", layer, cudaGetErrorString(e));
        char what[64];
        snprintf(what, sizeof what, "the all-reduce of layer %d", layer);
        return c->allreduce(c->allreduce_ctx, c->tmp, n * d, what);
    }
    default:
        return xf_errorf(XF_EINVAL, "cuda backend: unknown op %d", (int)k);
    }
}

/* run_op_impl, and in the debug mode (XFPROF_CUDA_SYNC_DEBUG=1) a synchronisation right after it,
 * so that an asynchronous fault (an illegal address in a kernel) is reported at the op that caused
 * it rather than at the next synchronising call. Nothing is synchronised while a graph is captured
 * (the ops only record then). */
xf_status run_op_checked(cuda_ctx *c, op_kind k, int layer, const step_batch *b) {
    xf_status s = run_op_impl(c, k, layer, b);
    if (s || !c->debug_sync || c->capturing) return s;
    cudaError_t e = cudaStreamSynchronize(c->st);
    if (e == cudaSuccess) return XF_OK;
    char op[96], what[192];
    cuda_check_op_label(op, sizeof op, b->phase, layer, k, b->step);
    snprintf(what, sizeof what, "fault in %s (XFPROF_CUDA_SYNC_DEBUG: synchronised after every op)", op);
    return cuda_status(e, what);
}

/* CUDA graphs: in decode, the first step of a batch shape is captured from embedding to sampling
 * and launched at sampling; later steps of the same shape only run kv_alloc (host work and the
 * metadata copy) and launch the graph at sampling. */
xf_status cuda_run_op(void *ctx, op_kind k, int layer, const step_batch *b) {
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (!c || !b) return xf_errorf(XF_EINVAL, "cuda backend: NULL argument");
    if (b->n_seqs < 1 || b->n_seqs > c->max_seqs || b->n_tokens < 1 || b->n_tokens > c->max_tok)
        return xf_errorf(XF_EINVAL, "cuda backend: a step of %lld tokens in %d sequences exceeds the sizes given at init (%lld, %lld)",
                         (long long)b->n_tokens, b->n_seqs, (long long)c->max_tok, (long long)c->max_seqs);
    const int use_graph = c->graph_on && b->phase == XF_DECODE && c->mode == KV_ALLOC_POOL;
    if (use_graph && (c->moe || c->mla))
        return xf_errorf(XF_EINVAL, "cuda backend: --cuda-graph with %s is not implemented on the GPU yet (%s read back from the device "
                         "every step): run without --cuda-graph", c->moe ? "mixture of experts" : "multi-head latent attention",
                         c->moe ? "the experts' GEMM sizes are" : "the context lengths of its per-sequence GEMMs are");
    if (!use_graph || k == OP_KV_ALLOC) {
        if (k == OP_EMBEDDING) XF_CUDA_TRY(cudaEventRecord(c->ev0, c->st), "event");
        xf_status s = run_op_checked(c, k, layer, b);
        if (!s && k == OP_SAMPLING) {
            XF_CUDA_TRY(cudaEventRecord(c->ev1, c->st), "event");
            c->step_timing = 1;
        }
        if (s || k != OP_KV_ALLOC || !use_graph) return s;
        if (c->graph && c->graph_n_seqs != b->n_seqs) {
            cudaGraphExecDestroy(c->graph);
            c->graph = NULL;
        }
        return XF_OK;
    }
    if (c->graph) {
        if (k != OP_SAMPLING) return XF_OK;
        XF_CUDA_TRY(cudaEventRecord(c->ev0, c->st), "event");
        XF_CUDA_TRY(cudaGraphLaunch(c->graph, c->st), "graph launch");
        XF_CUDA_TRY(cudaEventRecord(c->ev1, c->st), "event");
        c->step_timing = 1;
        return XF_OK;
    }
    if (k == OP_EMBEDDING) {
        XF_CUDA_TRY(cudaStreamBeginCapture(c->st, cudaStreamCaptureModeThreadLocal), "graph capture");
        c->capturing = 1;
    }
    xf_status s = run_op_checked(c, k, layer, b);
    if (c->capturing && (s || k == OP_SAMPLING)) {
        cudaGraph_t g = NULL;
        cudaError_t e = cudaStreamEndCapture(c->st, &g);
        c->capturing = 0;
        if (s) {
            if (g) cudaGraphDestroy(g);
            return s;
        }
        if (e != cudaSuccess) return cuda_status(e, "graph capture");
        e = cudaGraphInstantiate(&c->graph, g, 0);
        cudaGraphDestroy(g);
        if (e != cudaSuccess) return cuda_status(e, "graph instantiate");
        c->graph_n_seqs = b->n_seqs;
        XF_CUDA_TRY(cudaEventRecord(c->ev0, c->st), "event");
        XF_CUDA_TRY(cudaGraphLaunch(c->graph, c->st), "graph launch");
        XF_CUDA_TRY(cudaEventRecord(c->ev1, c->st), "event");
        c->step_timing = 1;
    }
    return s;
}

xf_status cuda_sync(void *ctx) {
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (c->capturing) return XF_OK; /* nothing runs while a graph is being captured */
    XF_CUDA_TRY(cudaStreamSynchronize(c->st),
                c->debug_sync ? "stream synchronize"
                              : "stream synchronize (a fault in an earlier op; XFPROF_CUDA_SYNC_DEBUG=1 names the op)");
    if (c->step_timing) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, c->ev0, c->ev1) == cudaSuccess) c->last_ms = ms;
        c->step_timing = 0;
    }
    return XF_OK;
}

xf_status cuda_read_logits(void *ctx, float *out, int64_t n_seqs) {
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (n_seqs < 0 || n_seqs > c->max_seqs) return xf_errorf(XF_EINVAL, "cuda backend: read_logits of %lld sequences", (long long)n_seqs);
    XF_CUDA_TRY(cudaMemcpyAsync(out, c->logits, (size_t)(n_seqs * c->vocab) * 4, cudaMemcpyDeviceToHost, c->st), "read logits");
    XF_CUDA_TRY(cudaStreamSynchronize(c->st), "read logits");
    return XF_OK;
}

xf_status cuda_read_tokens(void *ctx, int32_t *out, int64_t n_seqs) {
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (n_seqs < 0 || n_seqs > c->max_seqs) return xf_errorf(XF_EINVAL, "cuda backend: read_tokens of %lld sequences", (long long)n_seqs);
    XF_CUDA_TRY(cudaMemcpyAsync(out, c->next, (size_t)n_seqs * 4, cudaMemcpyDeviceToHost, c->st), "read tokens");
    XF_CUDA_TRY(cudaStreamSynchronize(c->st), "read tokens");
    return XF_OK;
}

void cuda_seq_release(void *ctx, int64_t seq) {
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (!c || seq < 0 || seq >= c->max_seqs) return;
    seq_state *q = &c->seqs[seq];
    if (q->k || q->v) {
        cudaStreamSynchronize(c->st);
        cudaFree(q->k);
        cudaFree(q->v);
        c->bytes -= 2 * c->cfg.n_layers * q->cap * c->kv_dim * (int64_t)c->kesz;
    }
    memset(q, 0, sizeof *q);
}

int64_t cuda_mem_bytes(void *ctx) {
    return ctx ? ((cuda_ctx *)ctx)->bytes : 0;
}

/* Tokens the router of MoE layer `layer` sent to each expert in the last step (host copy, read
 * back at the layer's gate_up); NULL for a dense layer. */
const int64_t *cuda_expert_counts(void *ctx, int layer) {
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (!c || !c->moe || layer < 0 || layer >= c->cfg.n_layers || !model_layer_is_moe(&c->cfg, layer)) return NULL;
    return c->mo.layer_counts + (int64_t)layer * c->mo.E;
}

} // namespace

extern "C" const backend_ops cuda_backend_ops = {
    "cuda", cuda_init, cuda_free_ctx, cuda_run_op, cuda_sync, cuda_read_logits, cuda_read_tokens, cuda_seq_release, cuda_mem_bytes,
    cuda_expert_counts,
};

extern "C" void cuda_backend_set_graph(void *ctx, int on) {
    if (ctx) ((cuda_ctx *)ctx)->graph_on = on != 0;
}

extern "C" double cuda_backend_last_step_ms(void *ctx) {
    return ctx ? ((cuda_ctx *)ctx)->last_ms : 0.0;
}

extern "C" xf_status cuda_backend_debug_read(void *ctx, const char *which, float *out, int64_t n) {
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (!c || !which || !out || n < 0) return xf_errorf(XF_EINVAL, "cuda_backend_debug_read: bad arguments");
    const int64_t T = c->max_tok, S = c->max_seqs;
    struct {
        const char *name;
        const void *p;
        int st;
        int64_t n;
    } bufs[] = {
        {"x", c->x, ST_F32, T * c->d},          {"xn", c->xn, c->wst, T * c->d},
        {"qkv", c->qkv, ST_F32, T * c->width},  {"att", c->att, c->wst, T * c->q_dim},
        {"tmp", c->tmp, ST_F32, T * c->d},      {"gu", c->gu, ST_F32, T * 2 * c->ff},
        {"h", c->hbuf, c->wst, T * c->ff},      {"last", c->last, c->wst, S * c->d},
        {"logits", c->logits, ST_F32, S * c->vocab},
        {"kpool", c->kpool, c->kst, c->kpool ? c->cfg.n_layers * c->kv_slots * c->kv_dim : 0},
        {"vpool", c->vpool, c->kst, c->vpool ? c->cfg.n_layers * c->kv_slots * c->kv_dim : 0},
        /* mixture of experts (the last routed layer's) and latent attention; 0 elements without */
        {"moe_logits", c->mo.logits, ST_F32, c->mo.logits ? T * c->mo.E : 0},
        {"moe_selw", c->mo.selw, ST_F32, c->mo.selw ? T * c->mo.k : 0},
        {"moe_y", c->mo.y, ST_F32, c->mo.y ? T * c->mo.k * c->d : 0},
        {"mla_q", c->ml.q, ST_F32, c->ml.q ? T * c->ml.D.n_heads * (c->ml.D.nope + c->ml.D.rope) : 0},
        {"mla_krope", c->ml.krope, ST_F32, c->ml.krope ? c->max_seq_len * c->ml.D.rope : 0},
        {"mla_kvdec", c->ml.kvdec, ST_F32, c->ml.kvdec ? c->max_seq_len * c->ml.D.n_heads * (c->ml.D.nope + c->ml.D.v) : 0},
    };
    for (auto &b : bufs) {
        if (strcmp(b.name, which) != 0) continue;
        if (n > b.n) return xf_errorf(XF_EINVAL, "cuda_backend_debug_read: %s holds %lld elements", which, (long long)b.n);
        XF_CUDA_TRY(cudaStreamSynchronize(c->st), "debug read");
        if (b.st == ST_F32) {
            XF_CUDA_TRY(cudaMemcpy(out, b.p, (size_t)n * 4, cudaMemcpyDeviceToHost), "debug read");
            return XF_OK;
        }
        uint16_t *tmp = (uint16_t *)malloc((size_t)n * 2 + 2);
        if (!tmp) return xf_errorf(XF_ENOMEM, "debug read: out of memory");
        cudaError_t e = cudaMemcpy(tmp, b.p, (size_t)n * 2, cudaMemcpyDeviceToHost);
        for (int64_t i = 0; e == cudaSuccess && i < n; i++)
            out[i] = b.st == ST_BF16 ? weights_bf16_to_f32(tmp[i]) : weights_f16_to_f32(tmp[i]);
        free(tmp);
        if (e != cudaSuccess) return cuda_status(e, "debug read");
        return XF_OK;
    }
    return xf_errorf(XF_EINVAL, "cuda_backend_debug_read: unknown buffer '%s'", which);
}
