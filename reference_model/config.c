/* Model configs: the built-in presets and the reader of Hugging Face config.json files. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/fileio.h"
#include "core/json_util.h"

/* Absurd-size limits: anything above is a typo or a hostile file, never a real model. */
#define CFG_MAX_D_MODEL (INT64_C(1) << 20)
#define CFG_MAX_LAYERS INT64_C(4096)
#define CFG_MAX_HEADS (INT64_C(1) << 14)
#define CFG_MAX_HEAD_DIM (INT64_C(1) << 14)
#define CFG_MAX_D_FF (INT64_C(1) << 24)
#define CFG_MAX_VOCAB (INT64_C(1) << 24)
#define CFG_MAX_CTX (INT64_C(1) << 27)

/* Values from each model's published Hugging Face config.json (llama2.c's ModelArgs for the
 * stories models, which share the classifier with the token embedding). */
static const model_config k_presets[] = {
    /* name, arch, layers, d_model, heads, kv, head_dim, d_ff, vocab, ctx, theta, eps, tied, bias */
    {"stories15m", "llama", 6, 288, 6, 6, 48, 768, 32000, 256, 10000.0, 1e-5, 1, 0},
    {"stories110m", "llama", 12, 768, 12, 12, 64, 2048, 32000, 1024, 10000.0, 1e-5, 1, 0},
    /* TinyLlama/TinyLlama-1.1B-Chat-v1.0 */
    {"tinyllama-1.1b", "llama", 22, 2048, 32, 4, 64, 5632, 32000, 2048, 10000.0, 1e-5, 0, 0},
    /* meta-llama/Llama-2-{7,13,70}b-hf */
    {"llama-2-7b", "llama", 32, 4096, 32, 32, 128, 11008, 32000, 4096, 10000.0, 1e-5, 0, 0},
    {"llama-2-13b", "llama", 40, 5120, 40, 40, 128, 13824, 32000, 4096, 10000.0, 1e-5, 0, 0},
    {"llama-2-70b", "llama", 80, 8192, 64, 8, 128, 28672, 32000, 4096, 10000.0, 1e-5, 0, 0},
    /* meta-llama/Meta-Llama-3-{8,70}B */
    {"llama-3-8b", "llama", 32, 4096, 32, 8, 128, 14336, 128256, 8192, 500000.0, 1e-5, 0, 0},
    {"llama-3-70b", "llama", 80, 8192, 64, 8, 128, 28672, 128256, 8192, 500000.0, 1e-5, 0, 0},
    /* mistralai/Mistral-7B-v0.1 */
    {"mistral-7b", "mistral", 32, 4096, 32, 8, 128, 14336, 32000, 32768, 10000.0, 1e-5, 0, 0},
    /* Qwen/Qwen2.5-7B */
    {"qwen2.5-7b", "qwen2", 28, 3584, 28, 4, 128, 18944, 152064, 131072, 1000000.0, 1e-6, 0, 1},
};
#define N_PRESETS ((int)(sizeof k_presets / sizeof k_presets[0]))

int config_preset_count(void) { return N_PRESETS; }

const char *config_preset_name(int i) {
    if (i < 0 || i >= N_PRESETS) return NULL;
    return k_presets[i].name;
}

xf_status config_preset(const char *name, model_config *cfg) {
    if (!name || !*name) return xf_errorf(XF_EINVAL, "no model name given");
    for (int i = 0; i < N_PRESETS; i++) {
        if (strcasecmp(name, k_presets[i].name) == 0) {
            *cfg = k_presets[i];
            return XF_OK;
        }
    }
    char list[512] = "";
    size_t used = 0;
    for (int i = 0; i < N_PRESETS; i++) {
        int n = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", k_presets[i].name);
        if (n < 0 || (size_t)n >= sizeof list - used) break;
        used += (size_t)n;
    }
    return xf_errorf(XF_EINVAL, "unknown model '%s': give one of the presets (%s) or a path to a Hugging Face config.json", name, list);
}

static xf_status check_range(const char *field, int64_t v, int64_t hi) {
    if (v <= 0) return xf_errorf(XF_EINVAL, "model config: %s must be > 0, got %lld", field, (long long)v);
    if (v > hi) return xf_errorf(XF_EINVAL, "model config: %s = %lld is absurdly large (limit %lld)", field, (long long)v, (long long)hi);
    return XF_OK;
}

xf_status config_validate(const model_config *cfg) {
    if (!cfg) return xf_errorf(XF_EINVAL, "model config: missing");
    if (!memchr(cfg->name, '\0', sizeof cfg->name) || !memchr(cfg->arch, '\0', sizeof cfg->arch))
        return xf_errorf(XF_EINVAL, "model config: name or arch is not a terminated string");
    xf_status s;
    if ((s = check_range("n_layers", cfg->n_layers, CFG_MAX_LAYERS)) != XF_OK) return s;
    if ((s = check_range("d_model", cfg->d_model, CFG_MAX_D_MODEL)) != XF_OK) return s;
    if ((s = check_range("n_heads", cfg->n_heads, CFG_MAX_HEADS)) != XF_OK) return s;
    if ((s = check_range("n_kv_heads", cfg->n_kv_heads, CFG_MAX_HEADS)) != XF_OK) return s;
    if ((s = check_range("head_dim", cfg->head_dim, CFG_MAX_HEAD_DIM)) != XF_OK) return s;
    if ((s = check_range("d_ff", cfg->d_ff, CFG_MAX_D_FF)) != XF_OK) return s;
    if ((s = check_range("vocab", cfg->vocab, CFG_MAX_VOCAB)) != XF_OK) return s;
    if ((s = check_range("max_ctx", cfg->max_ctx, CFG_MAX_CTX)) != XF_OK) return s;
    if (cfg->n_kv_heads > cfg->n_heads)
        return xf_errorf(XF_EINVAL, "model config: n_kv_heads (%lld) exceeds n_heads (%lld)", (long long)cfg->n_kv_heads, (long long)cfg->n_heads);
    if (cfg->n_heads % cfg->n_kv_heads != 0)
        return xf_errorf(XF_EINVAL, "model config: n_heads (%lld) is not a multiple of n_kv_heads (%lld): each KV head must serve a whole group of query heads",
                         (long long)cfg->n_heads, (long long)cfg->n_kv_heads);
    /* The query width n_heads*head_dim need not equal d_model (head_dim is explicit in some
     * models), but it must stay within the same absurd-size limit. */
    if (cfg->n_heads * cfg->head_dim > CFG_MAX_D_MODEL)
        return xf_errorf(XF_EINVAL, "model config: n_heads * head_dim = %lld is absurdly large (limit %lld)",
                         (long long)(cfg->n_heads * cfg->head_dim), (long long)CFG_MAX_D_MODEL);
    if (cfg->head_dim % 2 != 0)
        return xf_errorf(XF_EINVAL, "model config: head_dim (%lld) must be even: RoPE rotates pairs of dimensions", (long long)cfg->head_dim);
    if (!isfinite(cfg->rope_theta) || cfg->rope_theta <= 0)
        return xf_errorf(XF_EINVAL, "model config: rope_theta must be a finite number > 0, got %g", cfg->rope_theta);
    if (!isfinite(cfg->norm_eps) || cfg->norm_eps <= 0 || cfg->norm_eps >= 1)
        return xf_errorf(XF_EINVAL, "model config: norm_eps (rms_norm_eps) must lie in (0, 1), got %g", cfg->norm_eps);
    if (cfg->tied_embeddings != 0 && cfg->tied_embeddings != 1)
        return xf_errorf(XF_EINVAL, "model config: tied_embeddings must be 0 or 1");
    if (cfg->qkv_bias != 0 && cfg->qkv_bias != 1) return xf_errorf(XF_EINVAL, "model config: qkv_bias must be 0 or 1");
    return XF_OK;
}

/* a*b + c in int64 with overflow reported as -1 (all inputs >= 0). */
static int64_t mul_add(int64_t a, int64_t b, int64_t c) {
    int64_t p, r;
    if (a < 0 || b < 0 || c < 0) return -1;
    if (__builtin_mul_overflow(a, b, &p) || __builtin_add_overflow(p, c, &r)) return -1;
    return r;
}

int64_t config_param_count(const model_config *cfg) {
    if (!cfg || cfg->n_layers <= 0 || cfg->d_model <= 0 || cfg->n_heads <= 0 || cfg->n_kv_heads <= 0 ||
        cfg->head_dim <= 0 || cfg->d_ff <= 0 || cfg->vocab <= 0)
        return -1;
    const int64_t d = cfg->d_model;
    int64_t q_width = mul_add(cfg->n_heads, cfg->head_dim, 0);   /* n_heads*head_dim */
    int64_t kv_width = mul_add(cfg->n_kv_heads, cfg->head_dim, 0);
    if (q_width < 0 || kv_width < 0) return -1;
    int64_t layer = 0;
    layer = mul_add(d, q_width, layer);        /* wq (q_width, d) */
    layer = mul_add(d, 2 * kv_width, layer);   /* wk, wv (kv_width, d) each */
    layer = mul_add(q_width, d, layer);        /* wo (d, q_width) */
    if (cfg->qkv_bias) layer = mul_add(1, q_width + 2 * kv_width, layer);
    layer = mul_add(3 * d, cfg->d_ff, layer);  /* w_gate, w_up (d_ff, d), w_down (d, d_ff) */
    layer = mul_add(2, d, layer);              /* attention and FFN RMSNorm weights */
    if (layer < 0) return -1;
    int64_t total = mul_add(layer, cfg->n_layers, 0);
    total = mul_add(cfg->vocab, d, total);     /* token embedding (vocab, d) */
    total = mul_add(1, d, total);              /* final norm */
    if (!cfg->tied_embeddings) total = mul_add(cfg->vocab, d, total); /* lm_head (vocab, d) */
    return total;
}

int64_t config_kv_elems_per_token(const model_config *cfg) {
    if (!cfg || cfg->n_layers <= 0 || cfg->n_kv_heads <= 0 || cfg->head_dim <= 0) return -1;
    int64_t r = mul_add(cfg->n_layers, cfg->n_kv_heads, 0);
    r = mul_add(r, cfg->head_dim, 0);
    return mul_add(r, 2, 0);
}

/* ---- Hugging Face config.json ---- */

/* cfg->name from a path: the folder name for ".../<model>/config.json", else the file name. */
static void name_from_path(const char *path, char *buf, size_t len) {
    const char *end = path + strlen(path);
    while (end > path && end[-1] == '/') end--;
    const char *base = end;
    while (base > path && base[-1] != '/') base--;
    size_t blen = (size_t)(end - base);
    if (blen == strlen("config.json") && strncmp(base, "config.json", blen) == 0 && base > path) {
        const char *dend = base;
        while (dend > path && dend[-1] == '/') dend--;
        const char *dbase = dend;
        while (dbase > path && dbase[-1] != '/') dbase--;
        if (dend > dbase && !(dend - dbase == 1 && *dbase == '.')) {
            base = dbase;
            blen = (size_t)(dend - dbase);
        }
    }
    if (blen == 0) {
        snprintf(buf, len, "hf-config");
        return;
    }
    if (blen >= len) blen = len - 1;
    memcpy(buf, base, blen);
    buf[blen] = '\0';
}

static xf_status parse_obj(const cJSON *root, const char *ctx, model_config *cfg) {
    xf_status s;
    int present = 0;
    char mtype[32];
    if (!cJSON_IsObject(root)) return xf_errorf(XF_EINVAL, "%s: a config.json must be a JSON object", ctx);
    if ((s = json_get_string(root, "model_type", ctx, mtype, sizeof mtype)) != XF_OK) {
        if (cJSON_GetObjectItemCaseSensitive(root, "model_type") && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "model_type")))
            return xf_errorf(XF_EINVAL, "%s: field 'model_type' is not supported (too long); xfprof reads llama, mistral and qwen2", ctx);
        return s;
    }
    int is_qwen2 = 0;
    if (strcmp(mtype, "qwen2") == 0) {
        is_qwen2 = 1;
    } else if (strcmp(mtype, "llama") != 0 && strcmp(mtype, "mistral") != 0) {
        return xf_errorf(XF_EINVAL, "%s: field 'model_type' is '%s'; xfprof reads llama, mistral and qwen2 decoders only", ctx, mtype);
    }
    const char *arch = is_qwen2 ? "qwen2" : strcmp(mtype, "mistral") == 0 ? "mistral" : "llama";
    memcpy(cfg->arch, arch, strlen(arch) + 1);

    /* Required sizes: whole numbers in [1, limit]; json_get_int names the field on error. */
    if ((s = json_get_int(root, "hidden_size", ctx, 1, CFG_MAX_D_MODEL, &cfg->d_model)) != XF_OK) return s;
    if ((s = json_get_int(root, "intermediate_size", ctx, 1, CFG_MAX_D_FF, &cfg->d_ff)) != XF_OK) return s;
    if ((s = json_get_int(root, "num_hidden_layers", ctx, 1, CFG_MAX_LAYERS, &cfg->n_layers)) != XF_OK) return s;
    if ((s = json_get_int(root, "num_attention_heads", ctx, 1, CFG_MAX_HEADS, &cfg->n_heads)) != XF_OK) return s;
    if ((s = json_get_int(root, "vocab_size", ctx, 1, CFG_MAX_VOCAB, &cfg->vocab)) != XF_OK) return s;
    if ((s = json_get_int(root, "max_position_embeddings", ctx, 1, CFG_MAX_CTX, &cfg->max_ctx)) != XF_OK) return s;

    cfg->n_kv_heads = cfg->n_heads;
    if ((s = json_opt_int(root, "num_key_value_heads", ctx, 1, CFG_MAX_HEADS, &cfg->n_kv_heads, &present)) != XF_OK) return s;
    if (cfg->n_kv_heads > cfg->n_heads)
        return xf_errorf(XF_EINVAL, "%s: field 'num_key_value_heads' (%lld) exceeds num_attention_heads (%lld)", ctx,
                         (long long)cfg->n_kv_heads, (long long)cfg->n_heads);
    if (cfg->n_heads % cfg->n_kv_heads != 0)
        return xf_errorf(XF_EINVAL, "%s: field 'num_attention_heads' (%lld) is not a multiple of 'num_key_value_heads' (%lld)", ctx,
                         (long long)cfg->n_heads, (long long)cfg->n_kv_heads);

    /* head_dim, when given, is authoritative (it need not equal hidden_size / heads). */
    if ((s = json_opt_int(root, "head_dim", ctx, 1, CFG_MAX_HEAD_DIM, &cfg->head_dim, &present)) != XF_OK) return s;
    if (!present) {
        if (cfg->d_model % cfg->n_heads != 0)
            return xf_errorf(XF_EINVAL, "%s: field 'hidden_size' (%lld) is not a multiple of 'num_attention_heads' (%lld) and no 'head_dim' is given", ctx,
                             (long long)cfg->d_model, (long long)cfg->n_heads);
        cfg->head_dim = cfg->d_model / cfg->n_heads;
    }

    cfg->rope_theta = 10000.0;
    if ((s = json_opt_number(root, "rope_theta", ctx, &cfg->rope_theta, &present)) != XF_OK) return s;
    if (!present) {
        /* newer transformers versions move rope_theta into a rope_parameters object */
        const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
        if (rp && !cJSON_IsNull(rp)) {
            char rctx[256];
            snprintf(rctx, sizeof rctx, "%s: rope_parameters", ctx);
            if (!cJSON_IsObject(rp)) return xf_errorf(XF_EINVAL, "%s: field 'rope_parameters' must be an object", ctx);
            if ((s = json_opt_number(rp, "rope_theta", rctx, &cfg->rope_theta, &present)) != XF_OK) return s;
        }
    }
    if (present && !(cfg->rope_theta > 0))
        return xf_errorf(XF_EINVAL, "%s: field 'rope_theta' must be > 0, got %g", ctx, cfg->rope_theta);
    cfg->norm_eps = 1e-6;
    if ((s = json_opt_number(root, "rms_norm_eps", ctx, &cfg->norm_eps, &present)) != XF_OK) return s;
    if (present && !(cfg->norm_eps > 0 && cfg->norm_eps < 1))
        return xf_errorf(XF_EINVAL, "%s: field 'rms_norm_eps' must lie in (0, 1), got %g", ctx, cfg->norm_eps);
    cfg->tied_embeddings = 0;
    if ((s = json_opt_bool(root, "tie_word_embeddings", ctx, &cfg->tied_embeddings, &present)) != XF_OK) return s;

    /* qwen2 always has Q/K/V biases; llama (and mistral) declare theirs with attention_bias. */
    int attn_bias = 0;
    if ((s = json_opt_bool(root, "attention_bias", ctx, &attn_bias, &present)) != XF_OK) return s;
    /* llama's attention_bias also biases o_proj (d_model more parameters per layer), which
     * model_config does not carry: the cost model counts Q/K/V biases only. */
    cfg->qkv_bias = is_qwen2 ? 1 : attn_bias;

    /* Features the reference decoder does not implement: refuse rather than mis-model. */
    int mlp_bias = 0;
    if ((s = json_opt_bool(root, "mlp_bias", ctx, &mlp_bias, &present)) != XF_OK) return s;
    if (mlp_bias) return xf_errorf(XF_EINVAL, "%s: field 'mlp_bias' is true; xfprof models bias-free SwiGLU FFNs only", ctx);
    char act[32];
    if ((s = json_opt_string(root, "hidden_act", ctx, act, sizeof act, &present)) != XF_OK) return s;
    if (present && strcmp(act, "silu") != 0)
        return xf_errorf(XF_EINVAL, "%s: field 'hidden_act' is '%s'; xfprof models SwiGLU FFNs ('silu') only", ctx, act);

    if ((s = config_validate(cfg)) != XF_OK) return xf_error_prefix(s, "%s: ", ctx);
    return XF_OK;
}

xf_status config_parse_hf(const char *json_text, const char *source, model_config *cfg) {
    const char *ctx = source ? source : "config.json";
    if (!json_text) return xf_errorf(XF_EINVAL, "%s: no text", ctx);
    model_config c;
    memset(&c, 0, sizeof c);
    if (source) name_from_path(source, c.name, sizeof c.name);
    else snprintf(c.name, sizeof c.name, "hf-config");
    cJSON *root = NULL;
    xf_status s = json_parse(json_text, ctx, &root);
    if (s != XF_OK) return s;
    s = parse_obj(root, ctx, &c);
    cJSON_Delete(root);
    if (s == XF_OK) *cfg = c;
    return s;
}

xf_status config_load_hf(const char *path, model_config *cfg) {
    if (!path || !*path) return xf_errorf(XF_EINVAL, "no config.json path given");
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT) return xf_errorf(XF_EINVAL, "%s: no such file", path);
    char *text = NULL;
    size_t len = 0;
    xf_status s = file_read_all(path, (size_t)16 << 20, &text, &len);
    if (s != XF_OK) return s;
    if (strlen(text) != len) {
        free(text);
        return xf_errorf(XF_EPARSE, "%s: the file holds a NUL byte; it is not a JSON text", path);
    }
    s = config_parse_hf(text, path, cfg);
    free(text);
    return s;
}

xf_status config_resolve(const char *name_or_path, model_config *cfg) {
    if (!name_or_path || !*name_or_path) return xf_errorf(XF_EINVAL, "no model given: a preset name or a path to a config.json");
    for (int i = 0; i < N_PRESETS; i++)
        if (strcasecmp(name_or_path, k_presets[i].name) == 0) return config_preset(name_or_path, cfg);
    struct stat st;
    if (stat(name_or_path, &st) != 0) {
        size_t n = strlen(name_or_path);
        if (strchr(name_or_path, '/') || (n > 5 && strcmp(name_or_path + n - 5, ".json") == 0)) {
            xf_status s = config_preset(name_or_path, cfg); /* builds the list of presets */
            return xf_error_prefix(s, "%s: no such file; ", name_or_path);
        }
        return config_preset(name_or_path, cfg); /* names the presets */
    }
    if (S_ISDIR(st.st_mode)) {
        size_t n = strlen(name_or_path);
        char *p = malloc(n + sizeof "/config.json");
        if (!p) return xf_errorf(XF_ENOMEM, "out of memory");
        memcpy(p, name_or_path, n);
        memcpy(p + n, "/config.json", sizeof "/config.json");
        xf_status s;
        if (stat(p, &st) != 0) s = xf_errorf(XF_EINVAL, "%s: folder holds no config.json", name_or_path);
        else s = config_load_hf(p, cfg);
        free(p);
        return s;
    }
    return config_load_hf(name_or_path, cfg);
}
