/* safetensors reading and Hugging Face LLaMA-family folders: see safetensors.h. */
#include "reference_model/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json_util.h"

struct st_file {
    char path[1024];
    void *map;          /* the whole file, read-only */
    size_t map_len;
    int n;
    st_tensor *t;       /* (n) */
};

void st_file_close(st_file *f) {
    if (!f) return;
    if (f->map && f->map != MAP_FAILED) munmap(f->map, f->map_len);
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    free(f->t);
    free(f);
}

int st_file_count(const st_file *f) { return f ? f->n : 0; }
const st_tensor *st_file_tensor(const st_file *f, int i) { return f && i >= 0 && i < f->n ? &f->t[i] : NULL; }

const st_tensor *st_file_find(const st_file *f, const char *name) {
    for (int i = 0; f && i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

/* Element size of a safetensors dtype name; 0 when unknown. */
static int st_elem_size(const char *d, st_dtype *kind) {
    static const struct { const char *name; int size; st_dtype kind; } table[] = {
        {"F32", 4, ST_F32},   {"F16", 2, ST_F16},    {"BF16", 2, ST_BF16},  {"F64", 8, ST_OTHER},
        {"I64", 8, ST_OTHER}, {"I32", 4, ST_OTHER},  {"I16", 2, ST_OTHER},  {"I8", 1, ST_OTHER},
        {"U8", 1, ST_OTHER},  {"U16", 2, ST_OTHER},  {"U32", 4, ST_OTHER},  {"U64", 8, ST_OTHER},
        {"BOOL", 1, ST_OTHER}, {"F8_E4M3", 1, ST_OTHER}, {"F8_E5M2", 1, ST_OTHER},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(d, table[i].name)) {
            *kind = table[i].kind;
            return table[i].size;
        }
    return 0;
}

/* A non-negative integer JSON number below 2^53 (exact in a double). */
static int json_uint(const cJSON *v, int64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0.0 && d <= 9007199254740992.0) || d != (double)(int64_t)d) return 0;
    *out = (int64_t)d;
    return 1;
}

static int cmp_begin(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    const char *px = x->data, *py = y->data;
    return px < py ? -1 : px > py;
}

static xf_status parse_header(st_file *f, const char *json, const char *data, int64_t data_len) {
    cJSON *root = NULL;
    xf_status st = json_parse(json, f->path, &root);
    if (st == XF_ENOMEM) return st; /* not the file's fault */
    if (st) return xf_errorf(XF_EFORMAT, "%s: the safetensors header is not valid JSON (%s)", f->path, xf_error_msg());
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return xf_errorf(XF_EFORMAT, "%s: the safetensors header is not a JSON object", f->path);
    }
    int count = 0;
    for (const cJSON *it = root->child; it; it = it->next) count++;
    f->t = calloc((size_t)(count > 0 ? count : 1), sizeof *f->t);
    if (!f->t) {
        cJSON_Delete(root);
        return xf_errorf(XF_ENOMEM, "out of memory");
    }
    for (const cJSON *it = root->child; it && !st; it = it->next) {
        const char *name = it->string ? it->string : "";
        if (!strcmp(name, "__metadata__")) continue;
        if (!cJSON_IsObject(it)) {
            st = xf_errorf(XF_EFORMAT, "%s: tensor '%s' is not a JSON object", f->path, name);
            break;
        }
        for (int i = 0; i < f->n; i++)
            if (!strcmp(f->t[i].name, name)) st = xf_errorf(XF_EFORMAT, "%s: tensor '%s' appears twice", f->path, name);
        if (st) break;
        st_tensor *t = &f->t[f->n];
        if (!(t->name = strdup(name))) {
            st = xf_errorf(XF_ENOMEM, "out of memory");
            break;
        }
        f->n++;
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        if (!cJSON_IsString(dt) || strlen(dt->valuestring) >= sizeof t->dtype_name) {
            st = xf_errorf(XF_EFORMAT, "%s: tensor '%s' has no valid \"dtype\" string", f->path, name);
            break;
        }
        snprintf(t->dtype_name, sizeof t->dtype_name, "%s", dt->valuestring);
        int esz = st_elem_size(t->dtype_name, &t->dtype);
        if (!esz) {
            st = xf_errorf(XF_EFORMAT, "%s: tensor '%s' has unknown dtype '%s'", f->path, name, t->dtype_name);
            break;
        }
        if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > ST_MAX_DIMS) {
            st = xf_errorf(XF_EFORMAT, "%s: tensor '%s' needs a \"shape\" array of at most %d sizes", f->path, name, ST_MAX_DIMS);
            break;
        }
        t->n_dims = cJSON_GetArraySize(sh);
        t->n_elems = 1;
        for (int d = 0; d < t->n_dims && !st; d++) {
            int64_t v;
            if (!json_uint(cJSON_GetArrayItem(sh, d), &v)) {
                st = xf_errorf(XF_EFORMAT, "%s: tensor '%s' shape[%d] is not a non-negative integer", f->path, name, d);
            } else {
                t->shape[d] = v;
                if (v != 0 && t->n_elems > INT64_MAX / 8 / v)
                    st = xf_errorf(XF_EFORMAT, "%s: tensor '%s' shape overflows 64 bits", f->path, name);
                else
                    t->n_elems *= v;
            }
        }
        if (st) break;
        int64_t b0, b1;
        if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !json_uint(cJSON_GetArrayItem(off, 0), &b0) ||
            !json_uint(cJSON_GetArrayItem(off, 1), &b1)) {
            st = xf_errorf(XF_EFORMAT, "%s: tensor '%s' needs \"data_offsets\": [begin, end] of non-negative integers", f->path, name);
            break;
        }
        if (b1 < b0 || b1 > data_len) {
            st = xf_errorf(XF_EFORMAT, "%s: tensor '%s' data_offsets [%lld, %lld] lie outside the file's %lld data bytes",
                           f->path, name, (long long)b0, (long long)b1, (long long)data_len);
            break;
        }
        t->n_bytes = b1 - b0;
        if (t->n_bytes != t->n_elems * esz) {
            st = xf_errorf(XF_EFORMAT, "%s: tensor '%s' spans %lld bytes but its shape of %lld %s elements needs %lld",
                           f->path, name, (long long)t->n_bytes, (long long)t->n_elems, t->dtype_name,
                           (long long)(t->n_elems * esz));
            break;
        }
        t->data = data + b0;
    }
    cJSON_Delete(root);
    if (st) return st;
    /* No two tensors may share bytes. */
    st_tensor **order = malloc((size_t)(f->n > 0 ? f->n : 1) * sizeof *order);
    if (!order) return xf_errorf(XF_ENOMEM, "out of memory");
    int m = 0;
    for (int i = 0; i < f->n; i++)
        if (f->t[i].n_bytes > 0) order[m++] = &f->t[i];
    qsort(order, (size_t)m, sizeof *order, cmp_begin);
    for (int i = 1; i < m && !st; i++) {
        const char *prev_end = (const char *)order[i - 1]->data + order[i - 1]->n_bytes;
        if ((const char *)order[i]->data < prev_end)
            st = xf_errorf(XF_EFORMAT, "%s: tensors '%s' and '%s' overlap in the file", f->path, order[i - 1]->name, order[i]->name);
    }
    free(order);
    return st;
}

xf_status st_file_open(const char *path, st_file **out) {
    if (!path || !out) return xf_errorf(XF_EINVAL, "st_file_open: NULL argument");
    *out = NULL;
    st_file *f = calloc(1, sizeof *f);
    if (!f) return xf_errorf(XF_ENOMEM, "out of memory");
    snprintf(f->path, sizeof f->path, "%s", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        xf_status st = xf_errorf(XF_EIO, "%s: cannot open: %s", path, strerror(errno));
        st_file_close(f);
        return st;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        st_file_close(f);
        return xf_errorf(XF_EIO, "%s: not a regular file", path);
    }
    if (sb.st_size < 8) {
        close(fd);
        st_file_close(f);
        return xf_errorf(XF_EFORMAT, "%s: %lld bytes is too short for a safetensors file (8-byte header length first)", path,
                         (long long)sb.st_size);
    }
    f->map_len = (size_t)sb.st_size;
    f->map = mmap(NULL, f->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        xf_status st = xf_errorf(XF_EIO, "%s: mmap failed: %s", path, strerror(errno));
        st_file_close(f);
        return st;
    }
    const unsigned char *p = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | p[i]; /* little-endian */
    int64_t size = (int64_t)sb.st_size;
    if (hlen > (uint64_t)(size - 8)) {
        st_file_close(f);
        return xf_errorf(XF_EFORMAT, "%s: header length %llu exceeds the file's %lld bytes: not a safetensors file or truncated",
                         path, (unsigned long long)hlen, (long long)size);
    }
    if (hlen > ST_MAX_HEADER || hlen < 2) {
        st_file_close(f);
        return xf_errorf(XF_EFORMAT, "%s: header length %llu is out of range (2 .. %d)", path, (unsigned long long)hlen, ST_MAX_HEADER);
    }
    char *json = malloc((size_t)hlen + 1);
    if (!json) {
        st_file_close(f);
        return xf_errorf(XF_ENOMEM, "out of memory");
    }
    memcpy(json, p + 8, (size_t)hlen);
    json[hlen] = '\0';
    xf_status st = parse_header(f, json, (const char *)p + 8 + hlen, size - 8 - (int64_t)hlen);
    free(json);
    if (st) {
        st_file_close(f);
        return st;
    }
    *out = f;
    return XF_OK;
}

float st_tensor_get(const st_tensor *t, int64_t i) {
    if (t->dtype == ST_F32) {
        float v;
        memcpy(&v, (const char *)t->data + i * 4, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, (const char *)t->data + i * 2, 2);
    return t->dtype == ST_BF16 ? weights_bf16_to_f32(h) : weights_f16_to_f32(h);
}

/* ---- LLaMA-family folders ---- */

typedef struct st_set {
    int n;
    st_file **files; /* (n) */
} st_set;

static void st_set_free(st_set *s) {
    for (int i = 0; i < s->n; i++) st_file_close(s->files[i]);
    free(s->files);
    s->files = NULL;
    s->n = 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static xf_status st_set_open(st_set *s, const char *dir) {
    memset(s, 0, sizeof *s);
    DIR *d = opendir(dir);
    if (!d) return xf_errorf(XF_EIO, "%s: cannot open the weights folder: %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0;
    xf_status st = XF_OK;
    struct dirent *e;
    while ((e = readdir(d)) && !st) {
        size_t len = strlen(e->d_name);
        if (len <= 12 || strcmp(e->d_name + len - 12, ".safetensors")) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            char **nn = realloc(names, (size_t)cap * sizeof *names);
            if (!nn) {
                st = xf_errorf(XF_ENOMEM, "out of memory");
                break;
            }
            names = nn;
        }
        if (!(names[n] = strdup(e->d_name))) st = xf_errorf(XF_ENOMEM, "out of memory");
        else n++;
    }
    closedir(d);
    if (!st && n == 0) st = xf_errorf(XF_EINVAL, "%s: no *.safetensors file in the weights folder", dir);
    if (!st) {
        qsort(names, (size_t)n, sizeof *names, cmp_str);
        s->files = calloc((size_t)n, sizeof *s->files);
        if (!s->files) st = xf_errorf(XF_ENOMEM, "out of memory");
    }
    for (int i = 0; !st && i < n; i++) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path) {
            st = xf_errorf(XF_EINVAL, "%s: path too long", dir);
            break;
        }
        st = st_file_open(path, &s->files[i]);
        if (!st) s->n++;
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    if (st) st_set_free(s);
    return st;
}

/* The tensor `name` across the folder's files, found once, marked used, of a dtype the reference
 * model reads; its shape is the caller's to check. */
static xf_status st_set_take(const st_set *s, const char *name, const st_tensor **out) {
    const st_tensor *found = NULL;
    for (int i = 0; i < s->n; i++) {
        const st_tensor *t = st_file_find(s->files[i], name);
        if (t && found) return xf_errorf(XF_EFORMAT, "tensor '%s' appears in more than one safetensors file", name);
        if (t) found = t;
    }
    if (!found) return xf_errorf(XF_EINVAL, "tensor '%s' is missing from the weights folder", name);
    ((st_tensor *)found)->used = 1; /* the set's own tensors: st_set_open mapped them */
    if (found->dtype == ST_OTHER)
        return xf_errorf(XF_EFORMAT, "tensor '%s' has dtype %s: the reference model reads F32, F16 and BF16", name, found->dtype_name);
    *out = found;
    return XF_OK;
}

/* "d0, d1, ..." of t's shape into got (len bytes). */
static const char *shape_str(const st_tensor *t, char *got, size_t len) {
    size_t o = 0;
    got[0] = '\0';
    for (int d = 0; d < t->n_dims && o < len; d++) o += (size_t)snprintf(got + o, len - o, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    return got;
}

/* The tensor `name`, checked for dtype and shape (rows, cols); cols = 0 for a vector. */
static xf_status st_set_get(const st_set *s, const char *name, int64_t rows, int64_t cols, const st_tensor **out) {
    const st_tensor *found;
    xf_status st = st_set_take(s, name, &found);
    if (st) return st;
    int want_dims = cols ? 2 : 1;
    if (found->n_dims != want_dims || found->shape[0] != rows || (cols && found->shape[1] != cols)) {
        char got[128];
        if (cols)
            return xf_errorf(XF_EFORMAT, "tensor '%s' has shape [%s] but the config needs [%lld, %lld]", name,
                             shape_str(found, got, sizeof got), (long long)rows, (long long)cols);
        return xf_errorf(XF_EFORMAT, "tensor '%s' has shape [%s] but the config needs [%lld]", name, shape_str(found, got, sizeof got),
                         (long long)rows);
    }
    *out = found;
    return XF_OK;
}

/* Rows [row0, row0 + rows) of m from t's elements starting at elem0, row r's m->cols elements at
 * elem0 + r * stride (stride = m->cols for whole rows; the tensor's width for a column slice). */
static xf_status convert_block(const st_tensor *t, int64_t elem0, int64_t stride, const char *name, wmat *m, int64_t row0,
                               int64_t rows) {
    const int64_t cols = m->cols;
    int failed = 0;
#pragma omp parallel
    {
        float *buf = malloc((size_t)cols * sizeof(float));
        if (!buf) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!buf) continue;
            for (int64_t c = 0; c < cols; c++) buf[c] = st_tensor_get(t, elem0 + r * stride + c);
            weights_set_rows(m, row0 + r, 1, buf);
        }
        free(buf);
    }
    return failed ? xf_errorf(XF_ENOMEM, "out of memory converting '%s'", name) : XF_OK;
}

static xf_status convert_rows(const st_tensor *t, int64_t elem0, const char *name, wmat *m, int64_t row0, int64_t rows) {
    return convert_block(t, elem0, m->cols, name, m, row0, rows);
}

static xf_status load_mat(const st_set *s, const char *name, wmat *m, int64_t row0, int64_t rows) {
    const st_tensor *t;
    xf_status st = st_set_get(s, name, rows, m->cols, &t);
    return st ? st : convert_rows(t, 0, name, m, row0, rows);
}

/* A block of the (t_rows, t_cols) tensor `name`: its rows [src_r0, src_r0 + rows), columns
 * [src_c0, src_c0 + m->cols) into rows [row0, row0 + rows) of m (a tensor-parallel shard). */
static xf_status load_block(const st_set *s, const char *name, int64_t t_rows, int64_t t_cols, int64_t src_r0, int64_t src_c0,
                            wmat *m, int64_t row0, int64_t rows) {
    const st_tensor *t;
    xf_status st = st_set_get(s, name, t_rows, t_cols, &t);
    if (st) return st;
    if (src_r0 < 0 || src_c0 < 0 || src_r0 + rows > t_rows || src_c0 + m->cols > t_cols)
        return xf_errorf(XF_EINVAL, "tensor '%s': the shard's block lies outside it", name);
    return convert_block(t, src_r0 * t_cols + src_c0, t_cols, name, m, row0, rows);
}

/* Elements [i0, i0 + n) of the vector `name` of n_full elements. */
static xf_status load_vec_part(const st_set *s, const char *name, float *v, int64_t n_full, int64_t i0, int64_t n) {
    const st_tensor *t;
    xf_status st = st_set_get(s, name, n_full, 0, &t);
    if (st) return st;
    if (i0 < 0 || i0 + n > n_full) return xf_errorf(XF_EINVAL, "tensor '%s': the shard's slice lies outside it", name);
    for (int64_t i = 0; i < n; i++) v[i] = st_tensor_get(t, i0 + i);
    return XF_OK;
}

static xf_status load_vec(const st_set *s, const char *name, float *v, int64_t n) { return load_vec_part(s, name, v, n, 0, n); }

/* Lists on stderr the tensors no st_set_get asked for: weights the config does not use. */
static void warn_unused(const st_set *s, const char *dir) {
    int n = 0;
    for (int i = 0; i < s->n; i++)
        for (int j = 0; j < st_file_count(s->files[i]); j++) n += !st_file_tensor(s->files[i], j)->used;
    if (!n) return;
    fprintf(stderr, "xfprof: warning: %s: %d tensor%s the model config does not use (not loaded):", dir, n, n == 1 ? "" : "s");
    int shown = 0;
    for (int i = 0; i < s->n && shown < 8; i++)
        for (int j = 0; j < st_file_count(s->files[i]) && shown < 8; j++) {
            const st_tensor *t = st_file_tensor(s->files[i], j);
            if (t->used) continue;
            fputs(shown++ ? ", " : " ", stderr);
            for (const char *c = t->name; *c && c - t->name < 200; c++) fputc(*c >= 0x20 && *c < 0x7f ? *c : '?', stderr);
        }
    fprintf(stderr, "%s\n", n > shown ? ", ..." : "");
}

/* 1 when some file of the set holds `name` (nothing is marked used). */
static int st_set_has(const st_set *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (st_file_find(s->files[i], name)) return 1;
    return 0;
}

/* A fused expert tensor `name`, (n_experts, rows, cols), checked like st_set_get. */
static xf_status st_set_get3(const st_set *s, const char *name, int64_t n, int64_t rows, int64_t cols, const st_tensor **out) {
    const st_tensor *found;
    xf_status st = st_set_take(s, name, &found);
    if (st) return st;
    if (found->n_dims != 3 || found->shape[0] != n || found->shape[1] != rows || found->shape[2] != cols) {
        char got[128];
        return xf_errorf(XF_EFORMAT, "tensor '%s' has shape [%s] but the config needs [%lld, %lld, %lld] (experts, out, in)", name,
                         shape_str(found, got, sizeof got), (long long)n, (long long)rows, (long long)cols);
    }
    *out = found;
    return XF_OK;
}

/* The MoE FFN of layer l, in either layout: per-expert tensors (what save_pretrained writes:
 * mixtral's block_sparse_moe.experts.E.{w1,w3,w2}, qwen's mlp.experts.E.{gate,up,down}_proj) or
 * the fused ones transformers 5 holds in memory (mlp.experts.gate_up_proj (E, 2 I, H), gate rows
 * first, and mlp.experts.down_proj (E, H, I)); the router is <prefix>gate.weight (E, H); qwen2_moe's
 * shared expert mlp.shared_expert.{gate,up,down}_proj and mlp.shared_expert_gate.weight (1, H). */
static xf_status load_moe_layer(const st_set *s, const model_config *c, const st_slice *sl, layer_weights *L, int64_t l) {
    /* F: what the files hold; c: the shard (its experts' widths fes, fss); e0 / s0 the slices' first rows */
    const model_config *F = sl->full;
    const int64_t E = c->n_experts, fe = F->d_ff_expert, fes = c->d_ff_expert, d = c->d_model, e0 = sl->e0;
    const int mixtral = strcmp(c->arch, "mixtral") == 0;
    char pre[96], name[256];
    snprintf(pre, sizeof pre, "model.layers.%lld.%s", (long long)l, "block_sparse_moe.");
    if (!mixtral || (snprintf(name, sizeof name, "%sgate.weight", pre), !st_set_has(s, name)))
        snprintf(pre, sizeof pre, "model.layers.%lld.mlp.", (long long)l);
#define XF_MNAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)
    xf_status st = load_mat(s, XF_MNAME("%sgate.weight", pre), &L->router, 0, E);
    if (!st && st_set_has(s, XF_MNAME("%sexperts.gate_up_proj", pre))) {
        const st_tensor *gu, *dn;
        st = st_set_get3(s, name, E, 2 * fe, d, &gu);
        if (!st) st = st_set_get3(s, XF_MNAME("%sexperts.down_proj", pre), E, d, fe, &dn);
        for (int64_t e = 0; !st && e < E; e++) { /* gate rows [e0, e0 + fes), up rows [fe + e0, ...), down's columns */
            st = convert_block(gu, (e * 2 * fe + e0) * d, d, "experts.gate_up_proj", &L->exp_gate_up[e], 0, fes);
            if (!st) st = convert_block(gu, (e * 2 * fe + fe + e0) * d, d, "experts.gate_up_proj", &L->exp_gate_up[e], fes, fes);
            if (!st) st = convert_block(dn, e * d * fe + e0, fe, "experts.down_proj", &L->exp_down[e], 0, d);
        }
    } else {
        static const char *const k_names[2][3] = {{"gate_proj", "up_proj", "down_proj"}, {"w1", "w3", "w2"}};
        const char *const *nm = k_names[mixtral && strstr(pre, "block_sparse_moe") != NULL];
        for (int64_t e = 0; !st && e < E; e++) {
            st = load_block(s, XF_MNAME("%sexperts.%lld.%s.weight", pre, (long long)e, nm[0]), fe, d, e0, 0, &L->exp_gate_up[e], 0, fes);
            if (!st)
                st = load_block(s, XF_MNAME("%sexperts.%lld.%s.weight", pre, (long long)e, nm[1]), fe, d, e0, 0, &L->exp_gate_up[e], fes, fes);
            if (!st) st = load_block(s, XF_MNAME("%sexperts.%lld.%s.weight", pre, (long long)e, nm[2]), d, fe, 0, e0, &L->exp_down[e], 0, d);
        }
    }
    /* deepseek_v3: mlp.shared_experts.* (one MLP of n_shared * moe_intermediate_size) and the
     * router's e_score_correction_bias (E) */
    const char *sh = c->moe_score == MOE_SCORE_SIGMOID_GROUPED ? "shared_experts" : "shared_expert";
    if (!st && c->d_ff_shared > 0) {
        const int64_t fs = F->d_ff_shared, fss = c->d_ff_shared, s0 = sl->s0;
        st = load_block(s, XF_MNAME("%s%s.gate_proj.weight", pre, sh), fs, d, s0, 0, &L->sh_gate_up, 0, fss);
        if (!st) st = load_block(s, XF_MNAME("%s%s.up_proj.weight", pre, sh), fs, d, s0, 0, &L->sh_gate_up, fss, fss);
        if (!st) st = load_block(s, XF_MNAME("%s%s.down_proj.weight", pre, sh), d, fs, 0, s0, &L->sh_down, 0, d);
    }
    if (!st && L->router_bias) st = load_vec(s, XF_MNAME("%sgate.e_score_correction_bias", pre), L->router_bias, E);
    if (!st && c->shared_expert_gate) {
        const st_tensor *t;
        st = st_set_get(s, XF_MNAME("%sshared_expert_gate.weight", pre), 1, d, &t);
        for (int64_t i = 0; !st && i < d; i++) L->sh_gate[i] = st_tensor_get(t, i);
    }
#undef XF_MNAME
    return st;
}

/* DeepseekV3Attention's tensors into layer_weights' MLA layout (weights.h): q_a_proj (or q_proj)
 * and kv_a_proj_with_mqa stacked in qkv, q_b_proj, kv_b_proj, the two RMSNorms (o_proj: the caller).
 * In a tensor-parallel shard of F (c: the shard's n_heads from head h0): q_a, kv_a and the norms
 * whole, q_proj / q_b_proj / kv_b_proj the rows of its heads (column-parallel). */
static xf_status load_mla(const st_set *s, const model_config *F, const model_config *c, int64_t h0, layer_weights *L, int64_t l) {
    char name[256];
    const int64_t lat = c->kv_lora_rank + c->qk_rope_head_dim, q_rows = L->qkv.rows - lat, d = c->d_model;
    const int64_t qh = c->qk_nope_head_dim + c->qk_rope_head_dim, kvh = c->qk_nope_head_dim + c->v_head_dim;
#define XF_NAME(fmt) (snprintf(name, sizeof name, "model.layers.%lld.self_attn." fmt, (long long)l), name)
    xf_status st = c->q_lora_rank > 0 ? load_mat(s, XF_NAME("q_a_proj.weight"), &L->qkv, 0, q_rows)
                                      : load_block(s, XF_NAME("q_proj.weight"), F->n_heads * qh, d, h0 * qh, 0, &L->qkv, 0, q_rows);
    if (!st) st = load_mat(s, XF_NAME("kv_a_proj_with_mqa.weight"), &L->qkv, q_rows, lat);
    if (!st && c->q_lora_rank > 0) st = load_vec(s, XF_NAME("q_a_layernorm.weight"), L->q_a_norm, c->q_lora_rank);
    if (!st && c->q_lora_rank > 0)
        st = load_block(s, XF_NAME("q_b_proj.weight"), F->n_heads * qh, c->q_lora_rank, h0 * qh, 0, &L->q_b, 0, L->q_b.rows);
    if (!st) st = load_vec(s, XF_NAME("kv_a_layernorm.weight"), L->kv_a_norm, c->kv_lora_rank);
    if (!st) st = load_block(s, XF_NAME("kv_b_proj.weight"), F->n_heads * kvh, c->kv_lora_rank, h0 * kvh, 0, &L->kv_b, 0, L->kv_b.rows);
#undef XF_NAME
    return st;
}

/* Gemma3RMSNorm multiplies by (1 + w) in fp32: the stored weights become those multipliers, so the
 * backends' RMSNorm stays x / rms(x) * w for every family. */
static void gemma3_norms_plus_one(model_weights *w) {
    const model_config *c = &w->cfg;
    for (int64_t i = 0; i < c->d_model; i++) w->final_norm[i] = 1.0f + w->final_norm[i];
    for (int64_t l = 0; l < c->n_layers; l++) {
        layer_weights *L = &w->layers[l];
        float *const dv[4] = {L->attn_norm, L->ffn_norm, L->post_attn_norm, L->post_ffn_norm};
        for (int k = 0; k < 4; k++)
            for (int64_t i = 0; dv[k] && i < c->d_model; i++) dv[k][i] = 1.0f + dv[k][i];
        for (int64_t i = 0; L->q_norm && i < c->head_dim; i++) L->q_norm[i] = 1.0f + L->q_norm[i], L->k_norm[i] = 1.0f + L->k_norm[i];
    }
}

xf_status st_load_weights(const char *dir, const model_config *c, xf_dtype dtype, int group, model_weights **out) {
    return st_load_weights_slice(dir, c, dtype, group, NULL, out);
}

xf_status st_load_weights_slice(const char *dir, const model_config *c, xf_dtype dtype, int group, const st_slice *sl,
                                model_weights **out) {
    if (!dir || !c || !out) return xf_errorf(XF_EINVAL, "st_load_weights: NULL argument");
    *out = NULL;
    const st_slice whole = {c, 0, 0, 0, 0, 0, 1};
    if (!sl) sl = &whole;
    const model_config *F = sl->full; /* what the files hold; c: what this process holds */
    if (!F) return xf_errorf(XF_EINVAL, "st_load_weights: a slice without its full model");
    if (strcmp(F->arch, "gemma3") == 0)
        return xf_errorf(XF_EINVAL, "%s: a multimodal gemma3 folder (its language model under language_model.*) is not read; "
                         "give a gemma3_text model (Gemma3ForCausalLM) or run the config with random weights", dir);
    if (sl != &whole && config_is_gemma3(F))
        return xf_errorf(XF_EINVAL, "%s: a tensor-parallel shard of %s: gemma3 is not implemented in the split reference model", dir, F->name);
    st_set s;
    xf_status st = st_set_open(&s, dir);
    if (st) return st;
    model_weights *w = NULL;
    st = weights_alloc(&w, c, dtype, group);
    const int64_t q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim, d = c->d_model;
    const int64_t fq = F->n_heads * F->head_dim, fkv = F->n_kv_heads * F->head_dim, ff = F->d_ff;
    const int64_t q0 = sl->q0, kv0 = sl->kv0, f0 = sl->f0;
    char name[256];
    if (!st) st = load_mat(&s, "model.embed_tokens.weight", &w->embed, 0, c->vocab);
    if (!st && !c->tied_embeddings) st = load_mat(&s, "lm_head.weight", &w->lm_head, 0, c->vocab);
    if (!st) st = load_vec(&s, "model.norm.weight", w->final_norm, d);
    for (int64_t l = 0; !st && l < c->n_layers; l++) {
        layer_weights *L = &w->layers[l];
#define XF_NAME(fmt) (snprintf(name, sizeof name, "model.layers.%lld." fmt, (long long)l), name)
        if (model_is_mla(c)) {
            st = load_mla(&s, F, c, q0 / c->head_dim, L, l);
        } else { /* column-parallel in a shard: the Q rows of its heads, the K and V rows of its KV heads */
            st = load_block(&s, XF_NAME("self_attn.q_proj.weight"), fq, d, q0, 0, &L->qkv, 0, q_dim);
            if (!st) st = load_block(&s, XF_NAME("self_attn.k_proj.weight"), fkv, d, kv0, 0, &L->qkv, q_dim, kv_dim);
            if (!st) st = load_block(&s, XF_NAME("self_attn.v_proj.weight"), fkv, d, kv0, 0, &L->qkv, q_dim + kv_dim, kv_dim);
        }
        /* row-parallel in a shard: o_proj's columns of its heads, down's of its d_ff slice */
        const int64_t o_head = L->o.cols / c->n_heads, o_full = o_head * F->n_heads; /* per head head_dim (v_head_dim with MLA) */
        if (!st) st = load_block(&s, XF_NAME("self_attn.o_proj.weight"), d, o_full, 0, q0 / c->head_dim * o_head, &L->o, 0, d);
        const int moe = model_layer_is_moe(c, l);
        if (!st && moe) st = load_moe_layer(&s, c, sl, L, l);
        if (!st && !moe) st = load_block(&s, XF_NAME("mlp.gate_proj.weight"), ff, d, f0, 0, &L->gate_up, 0, c->d_ff);
        if (!st && !moe) st = load_block(&s, XF_NAME("mlp.up_proj.weight"), ff, d, f0, 0, &L->gate_up, c->d_ff, c->d_ff);
        if (!st && !moe) st = load_block(&s, XF_NAME("mlp.down_proj.weight"), d, ff, 0, f0, &L->down, 0, d);
        if (!st) st = load_vec(&s, XF_NAME("input_layernorm.weight"), L->attn_norm, d);
        if (!st && !c->sandwich_norms) st = load_vec(&s, XF_NAME("post_attention_layernorm.weight"), L->ffn_norm, d);
        if (!st && c->sandwich_norms) { /* gemma3: four norms around the two sublayers */
            st = load_vec(&s, XF_NAME("post_attention_layernorm.weight"), L->post_attn_norm, d);
            if (!st) st = load_vec(&s, XF_NAME("pre_feedforward_layernorm.weight"), L->ffn_norm, d);
            if (!st) st = load_vec(&s, XF_NAME("post_feedforward_layernorm.weight"), L->post_ffn_norm, d);
        }
        if (!st && c->qkv_bias) {
            st = load_vec_part(&s, XF_NAME("self_attn.q_proj.bias"), L->qkv_bias, fq, q0, q_dim);
            if (!st) st = load_vec_part(&s, XF_NAME("self_attn.k_proj.bias"), L->qkv_bias + q_dim, fkv, kv0, kv_dim);
            if (!st) st = load_vec_part(&s, XF_NAME("self_attn.v_proj.bias"), L->qkv_bias + q_dim + kv_dim, fkv, kv0, kv_dim);
        }
        /* the row-parallel biases: on the rank that adds them (once, before the all-reduce); the
         * others hold none (marked used: the folder's tensor is the model's, not an unused one) */
        if (!st && c->o_bias && sl->row_bias) st = load_vec(&s, XF_NAME("self_attn.o_proj.bias"), L->o_bias, d);
        if (!st && c->o_bias && !sl->row_bias) {
            const st_tensor *t;
            st = st_set_get(&s, XF_NAME("self_attn.o_proj.bias"), d, 0, &t);
            free(L->o_bias);
            L->o_bias = NULL;
        }
        if (!st && c->qk_norm) {
            st = load_vec(&s, XF_NAME("self_attn.q_norm.weight"), L->q_norm, c->head_dim);
            if (!st) st = load_vec(&s, XF_NAME("self_attn.k_norm.weight"), L->k_norm, c->head_dim);
        }
        if (!st && c->mlp_bias && !moe) {
            st = load_vec_part(&s, XF_NAME("mlp.gate_proj.bias"), L->gate_up_bias, ff, f0, c->d_ff);
            if (!st) st = load_vec_part(&s, XF_NAME("mlp.up_proj.bias"), L->gate_up_bias + c->d_ff, ff, f0, c->d_ff);
            if (!st && sl->row_bias) st = load_vec(&s, XF_NAME("mlp.down_proj.bias"), L->down_bias, d);
            if (!st && !sl->row_bias) {
                const st_tensor *t;
                st = st_set_get(&s, XF_NAME("mlp.down_proj.bias"), d, 0, &t);
                free(L->down_bias);
                L->down_bias = NULL;
            }
        }
#undef XF_NAME
    }
    if (!st && config_is_gemma3(c)) gemma3_norms_plus_one(w);
    if (!st) warn_unused(&s, dir);
    st_set_free(&s);
    if (st) {
        xf_error_prefix(st, "%s: ", dir);
        weights_free(w);
        return st;
    }
    *out = w;
    return XF_OK;
}
