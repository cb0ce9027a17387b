/* The mixture-of-experts kernels' index math (cuda_backend.cu's MoE ops), as __host__ __device__
 * functions beside cuda_index.h, so that the CPU tests (tests/test_cuda_moe_index.c) run exactly
 * the arithmetic and the order of choices the GPU runs, and check it against cpu_moe.c on the same
 * inputs. The routing functions are the CPU reference's choices restated one token at a time (a
 * kernel thread per token): the same selection loops, the same tie-breaks, the same float
 * operations in the same order. On the host the tests get cpu_moe.c's results bit for bit; on the
 * device expf is CUDA's (within 2 ulp of the correctly rounded value), so a softmax weight may
 * differ from the CPU's by an ulp, and the grouped sigmoid's choice (score + bias compared across
 * experts) can differ only where two experts are within that of each other.
 *
 * Layouts (cpu_moe.c's):
 *   logits   (n_tokens, E) fp32 router logits
 *   sel, selw (n_tokens, k) the chosen experts of each token in increasing expert order, and their
 *            weights
 *   counts   (E) rows routed to each expert; off (E + 1) their prefix sums, off[0] = 0
 *   row_of   (n_tokens * k) the grouped row of assignment a = token * k + j: expert sel[a]'s rows
 *            start at off[sel[a]], tokens in increasing order within an expert
 *   xg / y   (n_tokens * k, d_model) the grouped inputs and the experts' down outputs */
#ifndef XF_CUDA_MOE_INDEX_H
#define XF_CUDA_MOE_INDEX_H

#include <math.h>
#include <stdint.h>

#include "reference_model/cuda_index.h" /* XF_HD */

/* Largest n_experts the routing kernels handle (their per-token scratch lives in global memory,
 * (n_tokens, 2 E + n_group) floats; this bounds the selection's O(k E) loop, not memory). */
#define XF_MOE_MAX_EXPERTS 1024
/* Largest experts_per_tok (per-thread arrays). */
#define XF_MOE_MAX_TOPK 64

/* Sorts the k choices into increasing expert order, their weights with them (insertion sort, as
 * cpu_moe.c's sort_choices). */
XF_HD static inline void xf_moe_sort_choices(int32_t *idx, float *w, int64_t k) {
    for (int64_t a = 1; a < k; a++)
        for (int64_t b = a; b > 0 && idx[b] < idx[b - 1]; b--) {
            int32_t ti = idx[b];
            idx[b] = idx[b - 1];
            idx[b - 1] = ti;
            float tw = w[b];
            w[b] = w[b - 1];
            w[b - 1] = tw;
        }
}

/* Index of the best of v[0..E) not among taken[0..n_taken) and not -INFINITY when skip_masked:
 * the strictly greater wins, so the lowest index wins a tie. -1 when none is left. */
XF_HD static inline int64_t xf_moe_best_untaken(const float *v, int64_t E, const int32_t *taken, int64_t n_taken,
                                                int skip_masked) {
    int64_t best = -1;
    for (int64_t e = 0; e < E; e++) {
        int t = 0;
        for (int64_t i = 0; i < n_taken; i++) t |= taken[i] == (int32_t)e;
        if (t || (skip_masked && v[e] == -INFINITY)) continue;
        if (best < 0 || v[e] > v[best]) best = e;
    }
    return best;
}

/* Softmax routing (mixtral, qwen2_moe, qwen3_moe): top-k of the logits (the softmax is monotonic),
 * weights softmax(logits)[chosen], renormalized over the k when norm; then increasing expert
 * order. idx, w: k each. */
XF_HD static inline void xf_moe_route_softmax(const float *logits, int64_t E, int64_t k, int norm, int32_t *idx, float *w) {
    float mx = logits[0];
    for (int64_t e = 1; e < E; e++) mx = logits[e] > mx ? logits[e] : mx;
    float sum = 0;
    for (int64_t e = 0; e < E; e++) sum += expf(logits[e] - mx);
    for (int64_t j = 0; j < k; j++) idx[j] = (int32_t)xf_moe_best_untaken(logits, E, idx, j, 0);
    float wsum = 0;
    for (int64_t j = 0; j < k; j++) {
        w[j] = expf(logits[idx[j]] - mx) / sum;
        wsum += w[j];
    }
    if (norm)
        for (int64_t j = 0; j < k; j++) w[j] /= wsum;
    xf_moe_sort_choices(idx, w, k);
}

/* Group-limited masking (DeepSeek-V3): each of the n_group groups of E / n_group experts scores
 * the sum of its two best choices; the n_group - topk_group worst groups are dropped (the higher
 * index on a tie), their experts' choices set to -INFINITY. gscore: n_group floats of scratch. */
XF_HD static inline void xf_moe_group_mask(float *choice, int64_t E, int64_t n_group, int64_t topk_group, float *gscore) {
    const int64_t per = E / n_group;
    for (int64_t g = 0; g < n_group; g++) {
        float b1 = -INFINITY, b2 = -INFINITY;
        for (int64_t e = g * per; e < (g + 1) * per; e++) {
            if (choice[e] > b1) b2 = b1, b1 = choice[e];
            else if (choice[e] > b2) b2 = choice[e];
        }
        gscore[g] = b1 + b2;
    }
    for (int64_t j = 0; j < n_group - topk_group; j++) {
        int64_t worst = -1;
        for (int64_t g = 0; g < n_group; g++)
            if (gscore[g] != -INFINITY && (worst < 0 || gscore[g] <= gscore[worst])) worst = g;
        gscore[worst] = -INFINITY;
        for (int64_t e = worst * per; e < (worst + 1) * per; e++) choice[e] = -INFINITY;
    }
}

/* Sigmoid routing with the correction bias and group-limited top-k (deepseek_v3): score =
 * sigmoid(logit), choice = score + bias (bias may be NULL), groups masked, top-k of the choices;
 * weights the chosen plain scores, renormalized when norm (+1e-20), times scale; then increasing
 * expert order. scratch: 2 E + n_group floats. */
XF_HD static inline void xf_moe_route_grouped(const float *logits, const float *bias, int64_t E, int64_t k, int64_t n_group,
                                              int64_t topk_group, int norm, double scale, float *scratch, int32_t *idx, float *w) {
    float *score = scratch, *choice = scratch + E;
    for (int64_t e = 0; e < E; e++) {
        score[e] = 1.0f / (1.0f + expf(-logits[e]));
        choice[e] = score[e] + (bias ? bias[e] : 0.0f);
    }
    xf_moe_group_mask(choice, E, n_group, topk_group, scratch + 2 * E);
    for (int64_t j = 0; j < k; j++) {
        idx[j] = (int32_t)xf_moe_best_untaken(choice, E, idx, j, 1);
        w[j] = score[idx[j]];
    }
    float wsum = 0;
    for (int64_t j = 0; j < k; j++) wsum += w[j];
    for (int64_t j = 0; j < k; j++) w[j] = (float)((norm ? w[j] / (wsum + 1e-20f) : w[j]) * scale);
    xf_moe_sort_choices(idx, w, k);
}

/* ---- The permutation: tokens grouped by expert. One block; thread e (stride over experts)
 * counts expert e's assignments and later scatters them in token order, so the grouping is the
 * CPU's exactly (and deterministic: no atomics). */

/* Assignments (of nk = n_tokens * k) that chose expert e. */
XF_HD static inline int64_t xf_moe_count(const int32_t *sel, int64_t nk, int32_t e) {
    int64_t c = 0;
    for (int64_t a = 0; a < nk; a++) c += sel[a] == e;
    return c;
}

/* off (E + 1) = exclusive prefix sums of counts (E); off[E] = the total. */
XF_HD static inline void xf_moe_prefix(const int64_t *counts, int64_t E, int64_t *off) {
    off[0] = 0;
    for (int64_t e = 0; e < E; e++) off[e + 1] = off[e] + counts[e];
}

/* row_of[a] for every assignment a that chose expert e: off_e, off_e + 1, ... in increasing a. */
XF_HD static inline void xf_moe_scatter(const int32_t *sel, int64_t nk, int32_t e, int64_t off_e, int64_t *row_of) {
    int64_t fill = 0;
    for (int64_t a = 0; a < nk; a++)
        if (sel[a] == e) row_of[a] = off_e + fill++;
}

/* Gather: element idx of the (n_tokens * k, d) grouped input: assignment a = idx / d reads token
 * a / k's row. Returns the source offset in the (n_tokens, d) input; *dst the grouped offset. */
XF_HD static inline int64_t xf_moe_gather(int64_t idx, int64_t d, int64_t k, const int64_t *row_of, int64_t *dst) {
    int64_t a, i;
    xf_idx_row_col(idx, d, &a, &i);
    *dst = row_of[a] * d + i;
    return (a / k) * d + i;
}

/* Combine: offset in y of token t's j-th choice, column i (the weighted sum runs j = 0 .. k-1, in
 * increasing expert order: transformers' index_add_ order, cpu_moe_down's). */
XF_HD static inline int64_t xf_moe_combine_src(int64_t t, int64_t j, int64_t i, int64_t k, int64_t d, const int64_t *row_of) {
    return row_of[t * k + j] * d + i;
}

#endif
