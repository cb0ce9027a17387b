/* safetensors: a tiny Hugging Face folder written here from the random weights loads and gives
 * the same logits as the random-weight run; malformed files are refused with clear messages. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reference_model/model.h"
#include "reference_model/safetensors.h"
#include "reference_model/weights.h"

/* ---- a minimal safetensors writer (the test's own) ---- */

typedef struct wt {
    char name[96];
    const char *dtype; /* "F32", "BF16", "F16" */
    int64_t rows, cols; /* cols = 0: a vector */
    float *v;           /* (rows, cols or 1) values */
} wt;

static int64_t wt_esz(const wt *t) { return strcmp(t->dtype, "F32") ? 2 : 4; }
static int64_t wt_n(const wt *t) { return t->rows * (t->cols ? t->cols : 1); }

static void write_st(const char *path, const wt *ts, int n) {
    char *hdr = malloc(1 << 20);
    size_t o = 0;
    int64_t off = 0;
    o += (size_t)sprintf(hdr + o, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        int64_t b = wt_n(&ts[i]) * wt_esz(&ts[i]);
        if (ts[i].cols)
            o += (size_t)sprintf(hdr + o, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%lld,%lld]}", ts[i].name,
                                 ts[i].dtype, (long long)ts[i].rows, (long long)ts[i].cols, (long long)off, (long long)(off + b));
        else
            o += (size_t)sprintf(hdr + o, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%lld,%lld]}", ts[i].name,
                                 ts[i].dtype, (long long)ts[i].rows, (long long)off, (long long)(off + b));
        off += b;
    }
    o += (size_t)sprintf(hdr + o, "}");
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    uint64_t len = o;
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(len >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(hdr, 1, o, f);
    for (int i = 0; i < n; i++) {
        for (int64_t j = 0; j < wt_n(&ts[i]); j++) {
            float v = ts[i].v[j];
            if (!strcmp(ts[i].dtype, "F32")) {
                fwrite(&v, 4, 1, f);
            } else {
                uint16_t h = !strcmp(ts[i].dtype, "BF16") ? weights_f32_to_bf16(v) : weights_f32_to_f16(v);
                fwrite(&h, 2, 1, f);
            }
        }
    }
    fclose(f);
    free(hdr);
}

static model_config test_cfg(void) {
    model_config c;
    memset(&c, 0, sizeof c);
    strcpy(c.name, "st-test");
    strcpy(c.arch, "qwen2");
    c.n_layers = 2;
    c.d_model = 32;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 8;
    c.d_ff = 48;
    c.vocab = 64;
    c.max_ctx = 128;
    c.rope_theta = 10000.0;
    c.norm_eps = 1e-6;
    c.tied_embeddings = 0;
    c.qkv_bias = 1;
    return c;
}

static void write_config(const char *dir, const model_config *c) {
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "{\"model_type\":\"qwen2\",\"hidden_size\":%lld,\"num_hidden_layers\":%lld,\"num_attention_heads\":%lld,"
            "\"num_key_value_heads\":%lld,\"head_dim\":%lld,\"intermediate_size\":%lld,\"vocab_size\":%lld,"
            "\"max_position_embeddings\":%lld,\"rope_theta\":%g,\"rms_norm_eps\":%g,\"tie_word_embeddings\":false,"
            "\"hidden_act\":\"silu\"}\n",
            (long long)c->d_model, (long long)c->n_layers, (long long)c->n_heads, (long long)c->n_kv_heads,
            (long long)c->head_dim, (long long)c->d_ff, (long long)c->vocab, (long long)c->max_ctx, c->rope_theta, c->norm_eps);
    fclose(f);
}

static float *mat_vals(const wmat *m, int64_t row0, int64_t rows) {
    float *v = malloc((size_t)(rows * m->cols) * sizeof(float));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < m->cols; c++) v[r * m->cols + c] = weights_get(m, row0 + r, c);
    return v;
}

static float *vec_vals(const float *src, int64_t n) {
    float *v = malloc((size_t)n * sizeof(float));
    memcpy(v, src, (size_t)n * sizeof(float));
    return v;
}

/* Every tensor of w in HF names; matrices in `mdtype`, norms in F16 (1.0 is exact). */
static int hf_tensors(const model_weights *w, const char *mdtype, wt *ts) {
    const model_config *c = &w->cfg;
    int64_t q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    int n = 0;
#define ADD(nm, dt, r, cc, vals) (snprintf(ts[n].name, sizeof ts[n].name, "%s", nm), ts[n].dtype = dt, ts[n].rows = r, ts[n].cols = cc, ts[n].v = vals, n++)
    ADD("model.embed_tokens.weight", mdtype, c->vocab, c->d_model, mat_vals(&w->embed, 0, c->vocab));
    ADD("lm_head.weight", mdtype, c->vocab, c->d_model, mat_vals(&w->lm_head, 0, c->vocab));
    ADD("model.norm.weight", "F16", c->d_model, 0, vec_vals(w->final_norm, c->d_model));
    char nm[96];
    for (int l = 0; l < c->n_layers; l++) {
        const layer_weights *L = &w->layers[l];
#define NM(s) (snprintf(nm, sizeof nm, "model.layers.%d.%s", l, s), nm)
        ADD(NM("self_attn.q_proj.weight"), mdtype, q, c->d_model, mat_vals(&L->qkv, 0, q));
        ADD(NM("self_attn.k_proj.weight"), mdtype, kv, c->d_model, mat_vals(&L->qkv, q, kv));
        ADD(NM("self_attn.v_proj.weight"), mdtype, kv, c->d_model, mat_vals(&L->qkv, q + kv, kv));
        ADD(NM("self_attn.q_proj.bias"), "F32", q, 0, vec_vals(L->qkv_bias, q));
        ADD(NM("self_attn.k_proj.bias"), "F32", kv, 0, vec_vals(L->qkv_bias + q, kv));
        ADD(NM("self_attn.v_proj.bias"), "F32", kv, 0, vec_vals(L->qkv_bias + q + kv, kv));
        ADD(NM("self_attn.o_proj.weight"), mdtype, c->d_model, q, mat_vals(&L->o, 0, c->d_model));
        ADD(NM("mlp.gate_proj.weight"), mdtype, c->d_ff, c->d_model, mat_vals(&L->gate_up, 0, c->d_ff));
        ADD(NM("mlp.up_proj.weight"), mdtype, c->d_ff, c->d_model, mat_vals(&L->gate_up, c->d_ff, c->d_ff));
        ADD(NM("mlp.down_proj.weight"), mdtype, c->d_model, c->d_ff, mat_vals(&L->down, 0, c->d_model));
        ADD(NM("input_layernorm.weight"), "F16", c->d_model, 0, vec_vals(L->attn_norm, c->d_model));
        ADD(NM("post_attention_layernorm.weight"), "F16", c->d_model, 0, vec_vals(L->ffn_norm, c->d_model));
#undef NM
    }
#undef ADD
    return n;
}

static void free_tensors(wt *ts, int n) {
    for (int i = 0; i < n; i++) free(ts[i].v);
}

static char *make_dir(void) {
    char *d = strdup("/tmp/xfprof-st-XXXXXX");
    cr_assert_not_null(mkdtemp(d));
    return d;
}

static void rm_dir(const char *d) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    cr_assert_eq(system(cmd), 0);
}

static model *make_model(const model_config *c, xf_dtype wdt, const char *dir) {
    model_options o;
    model_options_default(&o);
    o.seed = 21;
    o.wdtype = wdt;
    o.threads = 2;
    o.max_seqs = 2;
    o.max_prompt = 10;
    o.max_seq_len = 16;
    o.weights_dir = dir;
    model *m = NULL;
    cr_assert_eq(model_init(&m, c, &o), XF_OK, "model_init: %s", xf_error_msg());
    return m;
}

/* Prefill + 3 decode steps; all logits. */
static float *run(model *m, int64_t vocab) {
    int32_t p[15] = {1, 5, 9, 2, 33, 60, 7, 7, 12, 0, 63, 4, 18, 22, 40};
    int64_t lens[2] = {5, 10};
    float *all = malloc((size_t)(4 * 2 * vocab) * sizeof(float));
    cr_assert_eq(model_prefill(m, 2, p, lens, NULL), XF_OK, "%s", xf_error_msg());
    for (int s = 0; s < 4; s++) {
        if (s) cr_assert_eq(model_decode_step(m, NULL, NULL), XF_OK);
        memcpy(all + s * 2 * vocab, model_logits(m, NULL, NULL), (size_t)(2 * vocab) * sizeof(float));
    }
    return all;
}

static void loads_like_random(const char *mdtype, xf_dtype wdt) {
    model_config c = test_cfg();
    model *rnd = make_model(&c, XF_FP32, NULL);
    wt ts[64];
    int n = hf_tensors(model_get_weights(rnd), mdtype, ts);
    char *dir = make_dir();
    write_config(dir, &c);
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s/model-00001-of-00002.safetensors", dir);
    snprintf(p2, sizeof p2, "%s/model-00002-of-00002.safetensors", dir);
    write_st(p1, ts, 10); /* two shards: tensors are looked up across files */
    write_st(p2, ts + 10, n - 10);
    model *ref = wdt == XF_FP32 ? rnd : make_model(&c, wdt, NULL);
    model *ld = make_model(&c, wdt, dir);
    float *a = run(ref, c.vocab), *b = run(ld, c.vocab);
    /* Same values in, same arithmetic: identical logits. For BF16 files the random fp32 values
     * were rounded to bf16 by the writer exactly as weights_init_random rounds them. */
    for (int64_t i = 0; i < 4 * 2 * c.vocab; i++) cr_assert_eq(a[i], b[i], "%s logit %lld: %g vs %g", mdtype, (long long)i, a[i], b[i]);
    free(a);
    free(b);
    if (ref != rnd) model_free(ref);
    model_free(ld);
    model_free(rnd);
    free_tensors(ts, n);
    rm_dir(dir);
    free(dir);
}

Test(safetensors, f32_folder_matches_random_weights) { loads_like_random("F32", XF_FP32); }
Test(safetensors, bf16_folder_matches_random_bf16_weights) { loads_like_random("BF16", XF_BF16); }

Test(safetensors, folder_errors_name_the_tensor) {
    model_config c = test_cfg();
    model *rnd = make_model(&c, XF_FP32, NULL);
    wt ts[64];
    int n = hf_tensors(model_get_weights(rnd), "F32", ts);
    char *dir = make_dir();
    write_config(dir, &c);
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    model_weights *w = NULL;

    /* a missing tensor (the last: layer 1's post_attention_layernorm) */
    write_st(p, ts, n - 1);
    cr_assert_eq(st_load_weights(dir, &c, XF_FP32, 128, &w), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "model.layers.1.post_attention_layernorm.weight") && strstr(xf_error_msg(), "missing"),
              "%s", xf_error_msg());

    /* a mis-shaped tensor: layer 0's k_proj (index 4) written as [8, 32] instead of [16, 32] */
    int64_t keep = ts[4].rows;
    ts[4].rows = 8;
    write_st(p, ts, n);
    cr_assert_eq(st_load_weights(dir, &c, XF_FP32, 128, &w), XF_EFORMAT);
    cr_assert(strstr(xf_error_msg(), "model.layers.0.self_attn.k_proj.weight") && strstr(xf_error_msg(), "[8, 32]") &&
                  strstr(xf_error_msg(), "[16, 32]"),
              "%s", xf_error_msg());
    ts[4].rows = keep;

    /* a config whose shapes differ from the model asked for */
    write_st(p, ts, n);
    model_config c2 = c;
    c2.d_ff = 40;
    model_options o;
    model_options_default(&o);
    o.max_prompt = 4;
    o.max_seq_len = 8;
    o.weights_dir = dir;
    model *m = NULL;
    cr_assert_eq(model_init(&m, &c2, &o), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "d_ff"), "%s", xf_error_msg());

    /* a tensor in two files */
    char p2[600];
    snprintf(p2, sizeof p2, "%s/extra.safetensors", dir);
    write_st(p2, ts, 1);
    cr_assert_eq(st_load_weights(dir, &c, XF_FP32, 128, &w), XF_EFORMAT);
    cr_assert(strstr(xf_error_msg(), "more than one"), "%s", xf_error_msg());
    unlink(p2);

    /* no safetensors at all */
    unlink(p);
    cr_assert_eq(st_load_weights(dir, &c, XF_FP32, 128, &w), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "no *.safetensors"), "%s", xf_error_msg());
    cr_assert_null(w);
    free_tensors(ts, n);
    model_free(rnd);
    rm_dir(dir);
    free(dir);
}

/* ---- malformed files ---- */

/* Writes a file of an 8-byte length `hlen`, the header text and `data_len` zero bytes. */
static void write_raw(const char *path, uint64_t hlen, const char *hdr, size_t data_len) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(hlen >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(hdr, 1, strlen(hdr), f);
    for (size_t i = 0; i < data_len; i++) fputc(0, f);
    fclose(f);
}

static void expect_refused(const char *hdr, size_t data_len, int64_t hlen_override, const char *needle) {
    char path[] = "/tmp/xfprof-st-bad-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    write_raw(path, hlen_override >= 0 ? (uint64_t)hlen_override : strlen(hdr), hdr, data_len);
    st_file *f = NULL;
    xf_status st = st_file_open(path, &f);
    unlink(path);
    cr_assert_eq(st, XF_EFORMAT, "header %s: status %d (%s)", hdr, st, xf_error_msg());
    cr_assert_null(f);
    cr_assert(strstr(xf_error_msg(), needle), "message '%s' lacks '%s'", xf_error_msg(), needle);
}

Test(safetensors, corrupt_headers_refused) {
    /* offset past the end: 16 data bytes, tensor claims [0, 32) */
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", 16, -1, "outside the file");
    /* overlapping: b starts inside a */
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
                   24, -1, "overlap");
    /* wrong size for the dtype and shape: 4 F32 = 16 bytes, offsets span 8 */
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,8]}}", 16, -1, "needs 16");
    /* unknown dtype */
    expect_refused("{\"a\":{\"dtype\":\"Q4_K\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, -1, "unknown dtype");
    /* header length larger than the file */
    expect_refused("{}", 0, 1000, "exceeds the file");
    /* not JSON */
    expect_refused("{\"a\":", 0, -1, "not valid JSON");
    /* negative / fractional offsets */
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, -1, "data_offsets");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 8, -1, "shape[0]");
    /* too short to hold the length */
    char path[] = "/tmp/xfprof-st-bad-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, "abc", 3), 3);
    close(fd);
    st_file *f = NULL;
    cr_assert_eq(st_file_open(path, &f), XF_EFORMAT);
    unlink(path);
}

Test(safetensors, wrong_dtype_in_folder_refused) {
    /* a well-formed file whose tensor is I32: the loader names it and the dtypes it reads */
    model_config c = test_cfg();
    c.n_layers = 1;
    char *dir = make_dir();
    write_config(dir, &c);
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    size_t nb = (size_t)(c.vocab * c.d_model * 4);
    char hdr[256];
    snprintf(hdr, sizeof hdr, "{\"model.embed_tokens.weight\":{\"dtype\":\"I32\",\"shape\":[%lld,%lld],\"data_offsets\":[0,%zu]}}",
             (long long)c.vocab, (long long)c.d_model, nb);
    write_raw(p, strlen(hdr), hdr, nb);
    model_weights *w = NULL;
    cr_assert_eq(st_load_weights(dir, &c, XF_FP32, 128, &w), XF_EFORMAT);
    cr_assert(strstr(xf_error_msg(), "model.embed_tokens.weight") && strstr(xf_error_msg(), "I32"), "%s", xf_error_msg());
    rm_dir(dir);
    free(dir);
}

Test(safetensors, reads_values_of_each_dtype) {
    char *dir = make_dir();
    char p[600];
    snprintf(p, sizeof p, "%s/t.safetensors", dir);
    float v[3] = {1.5f, -2.0f, 0.333251953125f}; /* all exact in F16; the last not in BF16 */
    wt ts[3] = {{"f", "F32", 3, 0, v}, {"h", "F16", 3, 0, v}, {"b", "BF16", 3, 0, v}};
    write_st(p, ts, 3);
    st_file *f = NULL;
    cr_assert_eq(st_file_open(p, &f), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(st_file_count(f), 3);
    const st_tensor *tf = st_file_find(f, "f"), *th = st_file_find(f, "h"), *tb = st_file_find(f, "b");
    cr_assert(tf && th && tb);
    cr_assert_null(st_file_find(f, "__metadata__"));
    cr_assert_eq(th->n_bytes, 6);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(st_tensor_get(tf, i), v[i]);
        cr_assert_eq(st_tensor_get(th, i), v[i]);
    }
    cr_assert_eq(st_tensor_get(tb, 0), 1.5f);
    cr_assert_eq(st_tensor_get(tb, 2), 0.333984375f); /* bf16(0.33325) = 0x3eab = 0.333984375 */
    st_file_close(f);
    rm_dir(dir);
    free(dir);
}
