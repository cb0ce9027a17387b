/* reference_model/weights: int8 random weights quantized straight into the packed layout at
 * allocation (weights_init_random) hold the same bytes, padding included, as the loaders' path:
 * row-major weights_alloc, weights_set_rows from the fp32 values, then weights_pack. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference_model/config.h"
#include "reference_model/weights.h"

/* A dense model whose shapes leave padding in the packed layout: qkv rows (4 + 2 * 2) * 12 = 96
 * and o / down rows 52 (not multiples of 16), vocab 101, d_ff 88. */
static model_config cfg_of(int tied, int64_t d_model) {
    model_config c;
    memset(&c, 0, sizeof c);
    strcpy(c.name, "test-weights");
    strcpy(c.arch, "llama");
    c.n_layers = 3;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 12;
    c.d_model = d_model;
    c.d_ff = 88;
    c.vocab = 101;
    c.max_ctx = 64;
    c.rope_theta = 10000.0;
    c.norm_eps = 1e-5;
    c.tied_embeddings = tied;
    return c;
}

/* Rows [row0, row0 + n) of m := tensor (tensor, layer)'s rows [0, n), through weights_set_rows. */
static void fill_ref(wmat *m, int64_t row0, int64_t n, uint64_t seed, int tensor, int layer) {
    float *buf = malloc((size_t)m->cols * sizeof *buf);
    cr_assert(buf);
    for (int64_t r = 0; r < n; r++) {
        for (int64_t c = 0; c < m->cols; c++) buf[c] = weights_random_value(seed, tensor, layer, r, c);
        weights_set_rows(m, row0 + r, 1, buf);
    }
    free(buf);
}

/* The loaders' path: row-major matrices, set from the fp32 values, then packed. reuse: every layer
 * holds layer 0's values (weights_random_reuse_layers). */
static model_weights *reference(const model_config *c, uint64_t seed, int group, int reuse) {
    model_weights *w = NULL;
    cr_assert_eq(weights_alloc(&w, c, XF_INT8, group), XF_OK, "%s", xf_error_msg());
    cr_assert(!w->embed.packed && !w->layers[0].qkv.packed, "weights_alloc: row-major");
    const int64_t q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    fill_ref(&w->embed, 0, c->vocab, seed, WT_EMBED, -1);
    if (!c->tied_embeddings) fill_ref(&w->lm_head, 0, c->vocab, seed, WT_LM_HEAD, -1);
    for (int l = 0; l < (int)c->n_layers; l++) {
        layer_weights *L = &w->layers[l];
        const int lv = reuse ? 0 : l;
        fill_ref(&L->qkv, 0, q, seed, WT_Q, lv);
        fill_ref(&L->qkv, q, kv, seed, WT_K, lv);
        fill_ref(&L->qkv, q + kv, kv, seed, WT_V, lv);
        fill_ref(&L->o, 0, c->d_model, seed, WT_O, lv);
        fill_ref(&L->gate_up, 0, c->d_ff, seed, WT_GATE, lv);
        fill_ref(&L->gate_up, c->d_ff, c->d_ff, seed, WT_UP, lv);
        fill_ref(&L->down, 0, c->d_model, seed, WT_DOWN, lv);
    }
    cr_assert_eq(weights_pack(w), XF_OK, "%s", xf_error_msg());
    return w;
}

/* a and b: the same packed matrix, byte for byte (values with their padding, scales with theirs) */
static void same_packed(const wmat *a, const wmat *b, const char *what, int layer, const char *how) {
    cr_assert(a->packed && b->packed, "%s (layer %d, %s): packed %d / %d", what, layer, how, a->packed, b->packed);
    cr_assert(a->rows == b->rows && a->cols == b->cols && a->group == b->group && a->n_groups == b->n_groups && a->gpad == b->gpad,
              "%s (layer %d, %s): another shape or layout", what, layer, how);
    const int64_t vb = weights_packed_values_bytes(a->rows, a->cols, a->group), sb = weights_packed_scales_bytes(a->rows, a->cols, a->group);
    cr_assert(vb > 0 && sb > 0);
    int64_t first = -1;
    for (int64_t i = 0; i < vb && first < 0; i++)
        if (((const uint8_t *)a->data)[i] != ((const uint8_t *)b->data)[i]) first = i;
    cr_assert(first < 0, "%s (layer %d, %s): values differ first at byte %lld of %lld (%u, want %u)", what, layer, how, (long long)first,
              (long long)vb, ((const uint8_t *)a->data)[first], ((const uint8_t *)b->data)[first]);
    cr_assert(!memcmp(a->scales, b->scales, (size_t)sb), "%s (layer %d, %s): scales differ", what, layer, how);
}

Test(weights, int8_random_packed_at_allocation_has_the_bits_of_quantizing_then_packing) {
    /* groups: 16 (padding from the rows only), 13 (a group not a multiple of 4, the last one short:
     * padding columns too), 128 (more than d_model: one group of all columns); d_model 52 and 56;
     * tied and untied embeddings; layers of their own values and the calibration's copies of layer 0 */
    const int groups[] = {16, 13, 128};
    const int64_t dms[] = {52, 56};
    for (int gi = 0; gi < 3; gi++)
        for (int di = 0; di < 2; di++)
            for (int tied = 0; tied < 2; tied++)
                for (int reuse = 0; reuse < 2; reuse++) {
                    const model_config c = cfg_of(tied, dms[di]);
                    char how[96];
                    snprintf(how, sizeof how, "group %d, d_model %lld, %s, reuse %d", groups[gi], (long long)dms[di], tied ? "tied" : "untied", reuse);
                    model_weights *w = NULL;
                    weights_random_reuse_layers(reuse);
                    xf_status s = weights_init_random(&w, &c, 11, XF_INT8, groups[gi]);
                    weights_random_reuse_layers(0);
                    cr_assert_eq(s, XF_OK, "%s", xf_error_msg());
                    /* already packed as it comes: weights_pack (what model_init does next) leaves it as it is */
                    const void *d0 = w->layers[1].gate_up.data;
                    cr_assert(w->embed.packed && w->layers[0].qkv.packed && w->layers[2].down.packed, "%s: not packed at allocation", how);
                    cr_assert_eq(weights_pack(w), XF_OK);
                    cr_assert_eq(w->layers[1].gate_up.data, d0, "%s: weights_pack packed it again", how);
                    model_weights *r = reference(&c, 11, groups[gi], reuse);
                    same_packed(&w->embed, &r->embed, "embed", -1, how);
                    if (tied) cr_assert(w->lm_head.data == w->embed.data && !w->lm_head.owned && w->lm_head.packed, "%s: tied lm_head", how);
                    else same_packed(&w->lm_head, &r->lm_head, "lm_head", -1, how);
                    for (int l = 0; l < (int)c.n_layers; l++) {
                        const layer_weights *A = &w->layers[l], *B = &r->layers[l];
                        same_packed(&A->qkv, &B->qkv, "qkv", l, how);
                        same_packed(&A->o, &B->o, "o", l, how);
                        same_packed(&A->gate_up, &B->gate_up, "gate_up", l, how);
                        same_packed(&A->down, &B->down, "down", l, how);
                        if (l > 0) cr_assert_neq(A->qkv.data, w->layers[0].qkv.data, "%s: layer %d shares layer 0's buffer", how, l);
                    }
                    weights_free(w);
                    weights_free(r);
                }
}

Test(weights, set_rows_into_a_packed_matrix_is_quantizing_then_packing) {
    /* weights_set_rows on a packed matrix (the random path writes through it) against a row-major
     * one packed after, for rows given in two calls and a group not a multiple of 4 */
    const model_config c = cfg_of(0, 52);
    model_weights *a = NULL, *b = NULL;
    cr_assert_eq(weights_alloc(&a, &c, XF_INT8, 13), XF_OK);
    cr_assert_eq(weights_alloc(&b, &c, XF_INT8, 13), XF_OK);
    wmat *ma = &a->layers[0].o, *mb = &b->layers[0].o;
    cr_assert_eq(weights_pack_int8(ma), XF_OK); /* packed first (zero weights), then set */
    const int64_t rows = ma->rows, cols = ma->cols;
    float *src = malloc((size_t)(rows * cols) * sizeof *src);
    cr_assert(src);
    for (int64_t i = 0; i < rows * cols; i++) src[i] = weights_random_value(5, WT_O, 0, i / cols, i % cols) * (i % 7 == 0 ? 30.0f : 1.0f);
    weights_set_rows(ma, 0, 20, src);
    weights_set_rows(ma, 20, rows - 20, src + 20 * cols);
    weights_set_rows(mb, 0, rows, src);
    cr_assert_eq(weights_pack_int8(mb), XF_OK);
    same_packed(ma, mb, "o", 0, "set_rows");
    for (int64_t r = 0; r < rows; r += 5)
        for (int64_t col = 0; col < cols; col += 3) cr_assert_eq(weights_get(ma, r, col), weights_get(mb, r, col));
    free(src);
    weights_free(a);
    weights_free(b);
}
