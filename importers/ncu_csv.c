/* Nsight Compute CSV (ncu --csv --page raw) -> records, and the kernel-name map
 * (data/kernel_ops.json). The CSV is RFC 4180 (quoted fields, "" for a quote); its first row
 * names the columns, an optional second row gives units ("nsecond", "Kbyte", ...), then one row
 * per profiled kernel launch. docs/import.md lists the columns read. */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json_util.h"
#include "importer.h"

#define MAX_COLS 4096
#define MAX_KERNELS 100000

/* ---------- the kernel map ---------- */

xf_status import_kernel_map_parse(const char *text, const char *source, import_kernel_map *m) {
    cJSON *root;
    xf_status s = json_parse(text, source, &root);
    if (s) return s;
    char fmt[32];
    int64_t ver;
    if ((s = json_get_string(root, "format", source, fmt, sizeof fmt)) || (s = json_get_int(root, "version", source, 1, 1 << 20, &ver)))
        goto done;
    if (strcmp(fmt, "xfprof-kernel-map") != 0) {
        s = xf_errorf(XF_EFORMAT, "%s: format '%s' is not xfprof-kernel-map", source, fmt);
        goto done;
    }
    if (ver > 1) {
        s = xf_errorf(XF_EFORMAT, "%s: version %lld is newer than this xfprof reads (1): upgrade xfprof", source, (long long)ver);
        goto done;
    }
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "map");
    if (!cJSON_IsArray(arr)) {
        s = xf_errorf(XF_EINVAL, "%s: missing array 'map'", source);
        goto done;
    }
    int n = cJSON_GetArraySize(arr), i = 0;
    if (n > 100000) {
        s = xf_errorf(XF_EINVAL, "%s: more than 100000 patterns", source);
        goto done;
    }
    char(*pat)[128] = realloc(m->pattern, (size_t)(m->n + n + 1) * sizeof *pat);
    if (pat) m->pattern = pat;
    op_kind *kind = realloc(m->kind, (size_t)(m->n + n + 1) * sizeof *kind);
    if (kind) m->kind = kind;
    if (!pat || !kind) {
        s = xf_errorf(XF_ENOMEM, "%s: out of memory", source);
        goto done;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        char ctx[96], op[32];
        snprintf(ctx, sizeof ctx, "%.60s: map[%d]", source, i++);
        if ((s = json_get_string(e, "pattern", ctx, m->pattern[m->n], sizeof m->pattern[0])) ||
            (s = json_get_string(e, "op", ctx, op, sizeof op)))
            goto done;
        if ((s = op_kind_parse(op, &m->kind[m->n]))) {
            xf_error_prefix(s, "%s: ", ctx);
            goto done;
        }
        m->n++;
    }
done:
    cJSON_Delete(root);
    return s;
}

xf_status import_kernel_map_load(const char *user_file, import_kernel_map *m) {
    char *text;
    size_t len;
    xf_status s;
    if (user_file) {
        if ((s = file_read_all(user_file, 16u << 20, &text, &len))) return s;
        s = import_kernel_map_parse(text, user_file, m);
        free(text);
        if (s) return s;
    }
    char dir[4096], path[4200];
    if ((s = device_data_dir(dir, sizeof dir))) return s;
    snprintf(path, sizeof path, "%s/kernel_ops.json", dir);
    if ((s = file_read_all(path, 16u << 20, &text, &len))) return s;
    s = import_kernel_map_parse(text, path, m);
    free(text);
    return s;
}

op_kind import_kernel_map_find(const import_kernel_map *m, const char *kernel) {
    for (int i = 0; m && i < m->n; i++)
        if (fnmatch(m->pattern[i], kernel, 0) == 0) return m->kind[i];
    return OP_OTHER;
}

void import_kernel_map_free(import_kernel_map *m) {
    if (!m) return;
    free(m->pattern);
    free(m->kind);
    memset(m, 0, sizeof *m);
}

/* ---------- CSV ---------- */

typedef struct csv_row {
    int n;
    char **f;   /* (n) fields, pointing into buf */
    char *buf;  /* the unquoted text of the row */
} csv_row;

/* Reads one row from *p (advancing it); 0 at the end of the input. */
static xf_status csv_next(const char **p, const char *end, csv_row *r, int *got, int64_t line) {
    *got = 0;
    if (*p >= end) return XF_OK;
    const char *q = *p;
    size_t cap = (size_t)(end - q) + 1;
    /* the row's length bounds its buffer */
    const char *scan = q;
    int inq = 0;
    while (scan < end && (inq || (*scan != '\n'))) {
        if (*scan == '"') inq = !inq;
        scan++;
    }
    cap = (size_t)(scan - q) + 1;
    free(r->buf);
    r->buf = malloc(cap);
    if (!r->buf) return xf_errorf(XF_ENOMEM, "out of memory");
    r->n = 0;
    char *w = r->buf;
    int field_start = 1;
    inq = 0;
    while (q < scan) {
        if (field_start) {
            if (r->n == MAX_COLS) return xf_errorf(XF_EINVAL, "line %lld: more than %d columns", (long long)line, MAX_COLS);
            char **f = realloc(r->f, (size_t)(r->n + 1) * sizeof *f);
            if (!f) return xf_errorf(XF_ENOMEM, "out of memory");
            r->f = f;
            r->f[r->n++] = w;
            field_start = 0;
        }
        char c = *q++;
        if (inq) {
            if (c == '"' && q < scan && *q == '"') *w++ = '"', q++;
            else if (c == '"') inq = 0;
            else *w++ = c;
        } else if (c == '"') {
            inq = 1;
        } else if (c == ',') {
            *w++ = 0;
            field_start = 1;
        } else if (c != '\r') {
            *w++ = c;
        }
    }
    if (inq) return xf_errorf(XF_EPARSE, "line %lld: a quoted field is not closed (truncated file?)", (long long)line);
    if (field_start) { /* a trailing comma: one more empty field */
        char **f = realloc(r->f, (size_t)(r->n + 1) * sizeof *f);
        if (!f) return xf_errorf(XF_ENOMEM, "out of memory");
        r->f = f;
        r->f[r->n++] = w;
    }
    *w = 0;
    *p = scan < end ? scan + 1 : end;
    *got = 1;
    return XF_OK;
}

/* A number as ncu prints it ("1,234.5", "12"); 0 on success. */
static int parse_num(const char *s, double *v) {
    char buf[64];
    size_t n = 0;
    for (; *s && n < sizeof buf - 1; s++)
        if (*s != ',' && *s != ' ') buf[n++] = *s;
    if (*s || n == 0) return -1;
    buf[n] = 0;
    char *end;
    *v = strtod(buf, &end);
    return (*end || !isfinite(*v) || *v < 0) ? -1 : 0;
}

/* The factor of a unit to base units (seconds, bytes, counts); -1 unknown. */
static double unit_scale(const char *u) {
    static const struct {
        const char *name;
        double f;
    } k[] = {{"", 1},           {"nsecond", 1e-9},  {"usecond", 1e-6},  {"msecond", 1e-3},  {"second", 1},
             {"byte", 1},       {"Kbyte", 1e3},     {"Mbyte", 1e6},     {"Gbyte", 1e9},     {"Tbyte", 1e12},
             {"KB", 1e3},       {"MB", 1e6},        {"GB", 1e9},        {"KiB", 1024.0},    {"MiB", 1048576.0},
             {"GiB", 1073741824.0}, {"inst", 1},    {"Kinst", 1e3},     {"Minst", 1e6},     {"Ginst", 1e9},
             {"Tinst", 1e12},   {"op", 1},          {"Kop", 1e3},       {"Mop", 1e6},       {"Gop", 1e9}, {"Top", 1e12}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strcmp(u, k[i].name) == 0) return k[i].f;
    return -1;
}

enum { C_NAME, C_TIME, C_DRAM_R, C_DRAM_W, C_FADD, C_FMUL, C_FFMA, C_REQUIRED };
static const char *const k_required[C_REQUIRED] = {
    "Kernel Name",
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
};
/* Optional FLOP columns and the FLOPs per count. */
static const struct {
    const char *name;
    double flops;
} k_optional[] = {
    {"smsp__sass_thread_inst_executed_op_hadd_pred_on.sum", 1}, {"smsp__sass_thread_inst_executed_op_hmul_pred_on.sum", 1},
    {"smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", 2}, {"smsp__sass_thread_inst_executed_op_dadd_pred_on.sum", 1},
    {"smsp__sass_thread_inst_executed_op_dmul_pred_on.sum", 1}, {"smsp__sass_thread_inst_executed_op_dfma_pred_on.sum", 2},
};

typedef struct kernel_acc {
    char name[96];
    op_kind kind;
    xf_compute compute;
    int64_t n, cap;
    double *t;          /* (n) seconds per launch */
    double flops, bytes, tensor, dram_r, dram_w;
} kernel_acc;

static void truncate_name(char *dst, size_t cap, const char *s) {
    if (strlen(s) < cap) {
        snprintf(dst, cap, "%s", s);
        return;
    }
    snprintf(dst, cap, "%.*s~", (int)cap - 2, s);
}

xf_status import_ncu_csv_buffer(const char *buf, size_t len, const char *source, const import_kernel_map *map, record *out,
                                import_stats *st) {
    record_init(out, "import");
    import_stats local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    const char *p = buf, *end = buf + len;
    csv_row hdr = {0}, row = {0};
    kernel_acc *ks = NULL;
    int64_t nk = 0, line = 1;
    int got, col[C_REQUIRED], *tensor_cols = NULL, n_tensor = 0, opt_col[sizeof k_optional / sizeof k_optional[0]];
    double *scale = NULL;
    xf_status s;
    /* ncu prints "==PROF==" lines and the application's output before the CSV when not given --log-file */
    while (p < end && *p != '"') {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
        line++;
    }
    if ((s = csv_next(&p, end, &hdr, &got, line))) goto fail;
    if (!got) {
        s = xf_errorf(XF_EINVAL, "%s: no CSV header: not the output of ncu --csv --page raw", source);
        goto fail;
    }
    char missing[1024] = "";
    for (int c = 0; c < C_REQUIRED; c++) {
        col[c] = -1;
        for (int i = 0; i < hdr.n; i++)
            if (strcmp(hdr.f[i], k_required[c]) == 0) col[c] = i;
        if (col[c] < 0)
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", missing[0] ? ", " : "", k_required[c]);
    }
    if (missing[0]) {
        s = xf_errorf(XF_EINVAL,
                      "%s: missing columns: %s. Profile with ncu --csv --page raw --metrics "
                      "gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,"
                      "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum,smsp__sass_thread_inst_executed_op_fmul_pred_on.sum,"
                      "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum (and sm__ops_path_tensor_* for tensor cores)",
                      source, missing);
        goto fail;
    }
    for (size_t k = 0; k < sizeof k_optional / sizeof k_optional[0]; k++) {
        opt_col[k] = -1;
        for (int i = 0; i < hdr.n; i++)
            if (strcmp(hdr.f[i], k_optional[k].name) == 0) opt_col[k] = i;
    }
    tensor_cols = malloc((size_t)hdr.n * sizeof *tensor_cols);
    scale = malloc((size_t)hdr.n * sizeof *scale);
    if (!tensor_cols || !scale) {
        s = xf_errorf(XF_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < hdr.n; i++) {
        scale[i] = 1;
        if (strncmp(hdr.f[i], "sm__ops_path_tensor", 19) == 0) tensor_cols[n_tensor++] = i;
    }
    /* The units row: its Kernel Name cell is empty and its time cell is not a number. */
    const char *save = p;
    line++;
    if ((s = csv_next(&p, end, &row, &got, line))) goto fail;
    double dummy;
    if (got && row.n == hdr.n && row.f[col[C_NAME]][0] == 0 && parse_num(row.f[col[C_TIME]], &dummy) != 0) {
        for (int i = 0; i < hdr.n; i++) {
            double f = unit_scale(row.f[i]);
            int used = i == col[C_TIME] || i == col[C_DRAM_R] || i == col[C_DRAM_W] || i == col[C_FADD] || i == col[C_FMUL] ||
                       i == col[C_FFMA];
            for (size_t k = 0; k < sizeof k_optional / sizeof k_optional[0]; k++) used |= i == opt_col[k];
            for (int k = 0; k < n_tensor; k++) used |= i == tensor_cols[k];
            if (f < 0 && used) {
                s = xf_errorf(XF_EINVAL, "%s: column '%.80s' has the unit '%.32s', which xfprof does not know", source, hdr.f[i],
                              row.f[i]);
                goto fail;
            }
            scale[i] = f < 0 ? 1 : f;
        }
        if (scale[col[C_TIME]] == 1 && row.f[col[C_TIME]][0] == 0) scale[col[C_TIME]] = 1e-9;
    } else {
        p = save; /* no units row: ncu's base units (ns, bytes, counts) */
        line--;
        scale[col[C_TIME]] = 1e-9;
    }
    for (;;) {
        line++;
        if ((s = csv_next(&p, end, &row, &got, line))) goto fail;
        if (!got) break;
        if (row.n == 1 && row.f[0][0] == 0) continue; /* empty line */
        if (row.n != hdr.n) {
            s = xf_errorf(XF_EINVAL, "%s: line %lld has %d fields, the header %d (truncated or not one CSV)", source, (long long)line,
                          row.n, hdr.n);
            goto fail;
        }
        double v[C_REQUIRED];
        for (int c = 1; c < C_REQUIRED; c++) {
            if (parse_num(row.f[col[c]], &v[c])) {
                s = xf_errorf(XF_EINVAL, "%s: line %lld, column %s: '%.40s' is not a non-negative number", source, (long long)line,
                              k_required[c], row.f[col[c]]);
                goto fail;
            }
            v[c] *= scale[col[c]];
        }
        double flops = v[C_FADD] + v[C_FMUL] + 2 * v[C_FFMA], tensor = 0;
        for (size_t k = 0; k < sizeof k_optional / sizeof k_optional[0]; k++) {
            double x;
            if (opt_col[k] >= 0 && parse_num(row.f[opt_col[k]], &x) == 0) flops += k_optional[k].flops * x * scale[opt_col[k]];
        }
        xf_compute comp = XF_COMPUTE_FP32;
        for (int k = 0; k < n_tensor; k++) {
            double x;
            if (parse_num(row.f[tensor_cols[k]], &x) == 0 && x > 0) {
                tensor += x * scale[tensor_cols[k]];
                const char *nm = hdr.f[tensor_cols[k]];
                comp = strstr(nm, "fp8") ? XF_COMPUTE_FP8 : (strstr(nm, "int8") || strstr(nm, "s8")) ? XF_COMPUTE_INT8 : XF_COMPUTE_TENSOR16;
            }
        }
        char name[96];
        truncate_name(name, sizeof name, row.f[col[C_NAME]][0] ? row.f[col[C_NAME]] : "(unnamed kernel)");
        kernel_acc *k = NULL;
        for (int64_t i = 0; i < nk; i++)
            if (strcmp(ks[i].name, name) == 0) k = &ks[i];
        if (!k) {
            if (nk == MAX_KERNELS) {
                s = xf_errorf(XF_EINVAL, "%s: more than %d distinct kernels", source, MAX_KERNELS);
                goto fail;
            }
            kernel_acc *g = realloc(ks, (size_t)(nk + 1) * sizeof *ks);
            if (!g) {
                s = xf_errorf(XF_ENOMEM, "out of memory");
                goto fail;
            }
            ks = g;
            k = &ks[nk++];
            memset(k, 0, sizeof *k);
            snprintf(k->name, sizeof k->name, "%s", name);
            k->kind = import_kernel_map_find(map, row.f[col[C_NAME]]);
        }
        if (k->n == k->cap) {
            int64_t cap = k->cap ? k->cap * 2 : 8;
            double *t = realloc(k->t, (size_t)cap * sizeof *t);
            if (!t) {
                s = xf_errorf(XF_ENOMEM, "out of memory");
                goto fail;
            }
            k->t = t;
            k->cap = cap;
        }
        if (k->n >= 1000000) {
            s = xf_errorf(XF_EINVAL, "%s: more than 1000000 launches of %s", source, k->name);
            goto fail;
        }
        k->t[k->n++] = v[C_TIME];
        k->flops += flops + tensor;
        k->tensor += tensor;
        k->dram_r += v[C_DRAM_R];
        k->dram_w += v[C_DRAM_W];
        if (comp != XF_COMPUTE_FP32) k->compute = comp;
        st->busy_s += v[C_TIME];
        st->n_kernels++;
    }
    if (nk == 0) {
        s = xf_errorf(XF_EINVAL, "%s: no kernel rows after the header: ncu profiled no kernel (check --kernel-name / -k)", source);
        goto fail;
    }
    record_point *pt = record_add_point(out);
    if (!pt || !(pt->ops = calloc((size_t)nk, sizeof *pt->ops))) {
        s = xf_errorf(XF_ENOMEM, "out of memory");
        goto fail;
    }
    for (int64_t i = 0; i < nk; i++) {
        kernel_acc *k = &ks[i];
        record_op *o = &pt->ops[pt->n_ops++];
        double n = (double)k->n;
        o->cost.phase = XF_DECODE;
        o->cost.layer = -1;
        o->cost.kind = k->kind;
        o->cost.compute = k->compute;
        o->cost.flops = k->flops / n;
        o->cost.act_in_bytes = (k->dram_r + k->dram_w) / n;
        o->cost.bytes = o->cost.act_in_bytes;
        o->bytes_from_counters = 1;
        o->measured_bytes = o->cost.bytes;
        if ((s = import_check_bytes(source, k->name, o->cost.bytes))) goto fail;
        o->measured = 1;
        o->n_samples = (int)k->n;
        o->samples_s = k->t;
        k->t = NULL;
        o->bound = XF_BOUND_LATENCY;
        snprintf(o->source, sizeof o->source, "%s", k->name);
        const struct {
            const char *nm;
            double v;
        } cs[] = {{"dram__bytes_read.sum", k->dram_r / n}, {"dram__bytes_write.sum", k->dram_w / n},
                  {"flops_sass_fp", (k->flops - k->tensor) / n}, {"flops_tensor_pipe", k->tensor / n}};
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            record_counter *rc = &o->counters[o->n_counters++];
            snprintf(rc->name, sizeof rc->name, "%s", cs[c].nm);
            rc->supported = 1;
            rc->value = cs[c].v;
        }
    }
    snprintf(out->model.name, sizeof out->model.name, "ncu");
    snprintf(out->model.arch, sizeof out->model.arch, "import");
    out->model.n_layers = out->model.d_model = out->model.n_heads = out->model.n_kv_heads = out->model.head_dim = 1;
    out->model.d_ff = out->model.vocab = out->model.max_ctx = 1;
    pt->wl.batch = pt->wl.prompt = 1;
    pt->wl.gen = 2; /* one decode step (the kernels), as gen counts tokens: the prefill samples the first */
    pt->wl.wdtype = pt->wl.adtype = pt->wl.kvdtype = XF_BF16;
    st->window_s = st->busy_s; /* ncu serializes and replays kernels: there is no timeline */
    st->n_events = st->n_kernels;
    st->n_steps[XF_DECODE] = 1;
    snprintf(st->time_level, sizeof st->time_level, "kernel (gpu__time_duration.sum per launch, Nsight Compute)");
    s = XF_OK;
fail:
    for (int64_t i = 0; i < nk; i++) free(ks[i].t);
    free(ks);
    free(hdr.buf), free(hdr.f), free(row.buf), free(row.f), free(tensor_cols), free(scale);
    if (s) {
        record_free(out);
        record_init(out, "import");
        if (!strstr(xf_error_msg(), source)) xf_error_prefix(s, "%s: ", source);
    }
    return s;
}

xf_status import_ncu_csv_file(const char *path, const import_options *o, const import_kernel_map *m, record *out,
                              import_stats *st) {
    record_init(out, "import");
    int64_t max = o && o->max_bytes > 0 ? o->max_bytes : IMPORT_DEFAULT_MAX_BYTES;
    char *text;
    size_t len;
    xf_status s = file_read_all(path, (size_t)max, &text, &len);
    if (s) return s;
    s = import_ncu_csv_buffer(text, len, path, m, out, st);
    free(text);
    return s;
}
