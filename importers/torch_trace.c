/* torch.profiler Chrome traces -> records. The JSON is parsed streaming with yajl (64 KiB at a
 * time): each event is reduced, as soon as its object closes, to a fixed-size entry (times, ids,
 * and the FLOPs and bytes its shapes give), so memory grows with the number of kept events, never
 * with the size of their text. Python-function events are dropped except module ranges
 * ("nn.Module: ..."); metadata events are dropped. Then, per thread: the ops are nested (an op
 * that overlaps another without nesting is refused), each outermost op owns its time, its FLOPs
 * and bytes come from its leaves (counted once), modules give layers and op kinds, steps are the
 * outermost module ranges (else the embedding ops), phases come from the attention's query
 * length. docs/import.md is the description. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yajl/yajl_parse.h>

#include "importer.h"
#include "torch_events.h"
#include "torch_ops.h"

#define MAX_DEPTH 64
#define MAX_EVENTS ((int64_t)1 << 26)   /* 64 Mi events kept: far beyond any trace we can read */
#define MAX_NAMES_BYTES ((size_t)1 << 28) /* interned event names */
#define NAME_MAX_LEN 255

typedef struct name_pool {
    char *buf;
    size_t len, cap;
    uint32_t *slots; /* open addressing: offset + 1, 0 empty */
    size_t n_slots, n_used;
} name_pool;

typedef struct parser {
    const char *source;
    xf_status err;        /* first error, reported after yajl stops */
    /* containers */
    int depth;
    char kind[MAX_DEPTH]; /* 'm' map, 'a' array */
    char key[MAX_DEPTH][32]; /* last key at each map depth (truncated) */
    int top_is_array;
    int ev_depth;         /* depth of an event object (3 under {"traceEvents": [...]}, 2 in a bare array) */
    int in_events;
    /* the trace's own flags */
    int record_shapes;    /* -1 absent, 0, 1 */
    int with_modules;
    /* the event being read */
    int in_ev;
    char name[NAME_MAX_LEN + 1];
    char cat[32];
    char ph[4];
    double ts, dur;
    double base_ts;       /* ts of the first event kept */
    int has_ts, has_dur;
    int64_t tid, ext, corr;
    int has_shape_field;  /* "Input Dims" seen */
    int in_dims, in_types, in_conc;
    torch_op_args args;
    int n_types;
    char types[TORCH_MAX_INPUTS][24];
    int cur_in;           /* index of the input whose dims are being read */
    int list_cur_ndim;    /* TensorList: dims of the tensor being read */
    double list_cur_elems;
    int64_t list_cur_last;
    /* output */
    tt_ev *ev;
    int64_t n_ev, cap_ev;
    int64_t n_read;       /* events seen */
    int64_t n_ops_no_shapes, n_ops;
    name_pool names;
} parser;

/* ---------- names ---------- */

static uint64_t hash_str(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static xf_status pool_grow_slots(name_pool *p) {
    size_t n = p->n_slots ? p->n_slots * 2 : 1024;
    uint32_t *s = calloc(n, sizeof *s);
    if (!s) return xf_errorf(XF_ENOMEM, "out of memory interning event names");
    for (size_t i = 0; i < p->n_slots; i++) {
        if (!p->slots[i]) continue;
        const char *str = p->buf + p->slots[i] - 1;
        size_t j = hash_str(str, strlen(str)) & (n - 1);
        while (s[j]) j = (j + 1) & (n - 1);
        s[j] = p->slots[i];
    }
    free(p->slots);
    p->slots = s;
    p->n_slots = n;
    return XF_OK;
}

/* Offset of `s` in the pool (added once). */
static xf_status pool_intern(name_pool *p, const char *s, uint32_t *out) {
    size_t n = strlen(s);
    if ((p->n_used + 1) * 2 > p->n_slots && pool_grow_slots(p)) return XF_ENOMEM;
    size_t j = hash_str(s, n) & (p->n_slots - 1);
    while (p->slots[j]) {
        if (strcmp(p->buf + p->slots[j] - 1, s) == 0) {
            *out = p->slots[j] - 1;
            return XF_OK;
        }
        j = (j + 1) & (p->n_slots - 1);
    }
    if (p->len + n + 1 > p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 65536;
        while (cap < p->len + n + 1) cap *= 2;
        if (cap > MAX_NAMES_BYTES)
            return xf_errorf(XF_EINVAL, "more than %zu MiB of distinct event names: not a trace xfprof can read",
                             MAX_NAMES_BYTES >> 20);
        char *b = realloc(p->buf, cap);
        if (!b) return xf_errorf(XF_ENOMEM, "out of memory interning event names");
        p->buf = b;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, s, n + 1);
    p->slots[j] = (uint32_t)p->len + 1;
    *out = (uint32_t)p->len;
    p->len += n + 1;
    p->n_used++;
    return XF_OK;
}

static void pool_free(name_pool *p) {
    free(p->buf);
    free(p->slots);
    memset(p, 0, sizeof *p);
}

/* ---------- the streaming parser ---------- */

static int fail(parser *p, xf_status s) {
    if (!p->err) p->err = s;
    return 0; /* yajl: stop */
}

static const char *cur_key(const parser *p) { return p->depth > 0 && p->kind[p->depth - 1] == 'm' ? p->key[p->depth - 1] : ""; }

static void ev_reset(parser *p) {
    p->name[0] = p->cat[0] = p->ph[0] = 0;
    p->ts = p->dur = 0;
    p->has_ts = p->has_dur = 0;
    p->tid = 0;
    p->ext = p->corr = -1;
    p->has_shape_field = 0;
    p->in_dims = p->in_types = p->in_conc = 0;
    memset(&p->args, 0, sizeof p->args);
    p->n_types = 0;
    p->cur_in = -1;
}

static int dtype_of_type(const char *t) {
    if (strcmp(t, "c10::BFloat16") == 0) return XF_BF16;
    if (strcmp(t, "c10::Half") == 0) return XF_FP16;
    if (strncmp(t, "c10::Float8", 11) == 0) return XF_FP8;
    if (strcmp(t, "signed char") == 0) return XF_INT8;
    return XF_FP32;
}

/* The event's object closed: keep what it says. */
static int ev_finish(parser *p) {
    p->n_read++;
    if (strcmp(p->ph, "X") != 0) return 1; /* complete events only: metadata, instants, flows dropped */
    int type;
    if (strcmp(p->cat, "cpu_op") == 0) type = EV_OP;
    else if (strcmp(p->cat, "python_function") == 0 && strncmp(p->name, "nn.Module: ", 11) == 0) type = EV_MODULE;
    else if (strcmp(p->cat, "kernel") == 0 || strcmp(p->cat, "gpu_memcpy") == 0 || strcmp(p->cat, "gpu_memset") == 0)
        type = EV_KERNEL;
    else if (strcmp(p->cat, "cuda_runtime") == 0 || strcmp(p->cat, "cuda_driver") == 0) type = EV_RUNTIME;
    else return 1;
    if (!p->has_ts || !p->has_dur)
        return fail(p, xf_errorf(XF_EINVAL, "%s: event %lld ('%.80s', cat %s) has no '%s'", p->source, (long long)p->n_read - 1,
                                 p->name, p->cat, p->has_ts ? "dur" : "ts"));
    if (!isfinite(p->ts) || !isfinite(p->dur) || fabs(p->ts) > 1e18 || p->dur > 1e15)
        return fail(p, xf_errorf(XF_EINVAL, "%s: event %lld ('%.80s') has an out-of-range ts or dur", p->source,
                                 (long long)p->n_read - 1, p->name));
    if (p->dur < 0)
        return fail(p, xf_errorf(XF_EINVAL,
                                 "%s: event %lld ('%.80s', cat %s) has a negative duration (%g us): the trace is damaged; "
                                 "export it again with prof.export_chrome_trace",
                                 p->source, (long long)p->n_read - 1, p->name, p->cat, p->dur));
    if (p->n_ev == MAX_EVENTS)
        return fail(p, xf_errorf(XF_EINVAL, "%s: more than %lld events: split the trace (profile fewer steps)", p->source,
                                 (long long)MAX_EVENTS));
    if (p->n_ev == p->cap_ev) {
        int64_t cap = p->cap_ev ? p->cap_ev * 2 : 4096;
        tt_ev *e = realloc(p->ev, (size_t)cap * sizeof *e);
        if (!e) return fail(p, xf_errorf(XF_ENOMEM, "%s: out of memory after %lld events", p->source, (long long)p->n_ev));
        p->ev = e;
        p->cap_ev = cap;
    }
    tt_ev *e = &p->ev[p->n_ev];
    memset(e, 0, sizeof *e);
    if (p->n_ev == 0) p->base_ts = p->ts;
    e->ts = p->ts - p->base_ts;
    e->end = e->ts + p->dur;
    e->dur = p->dur;
    e->tid = p->tid;
    e->ext = p->ext;
    e->corr = p->corr;
    e->type = (uint8_t)type;
    e->parent = e->module = -1;
    if (pool_intern(&p->names, p->name, &e->name)) return fail(p, xf_error_status() ? xf_error_status() : XF_ENOMEM);
    if (type == EV_OP) {
        p->n_ops++;
        if (!p->has_shape_field) p->n_ops_no_shapes++;
        torch_op_args *a = &p->args;
        for (int i = 0; i < a->n_inputs && i < p->n_types; i++)
            if (!a->in[i].is_list) a->in[i].elem_bytes = torch_type_bytes(p->types[i]);
        for (int i = a->n_inputs; i < p->n_types && i < TORCH_MAX_INPUTS; i++) a->in[i].ndim = -1;
        if (p->n_types > a->n_inputs) a->n_inputs = p->n_types < TORCH_MAX_INPUTS ? p->n_types : TORCH_MAX_INPUTS;
        torch_op_cost c;
        torch_op_cost_of(p->name, a, &c);
        e->cls = (uint8_t)c.cls;
        e->flops = c.flops;
        e->bytes = c.bytes;
        e->list_elems = c.list_elems;
        e->q_len = c.q_len;
        e->kv_len = c.kv_len;
        e->cat_last = (uint8_t)c.is_cat_last;
        for (int i = 0; i < p->n_types; i++)
            if (torch_type_bytes(p->types[i]) > 0) {
                e->dtype = (uint8_t)dtype_of_type(p->types[i]);
                break;
            }
        /* Shapes the model is inferred from: embedding (vocab, d_model); attention (batch, heads,
         * kv heads, head dim); linear (out features, in features). */
        if (c.cls == TORCH_OP_ATTENTION) {
            e->dim_a = a->in[0].dims[0];
            e->dim_b = a->in[0].dims[1];
            e->dim_c = a->in[1].dims[1];
            e->dim_d = a->in[0].dims[3];
        } else if (strcmp(p->name, "aten::embedding") == 0 && c.cls == TORCH_OP_MOVE) {
            e->dim_a = a->in[0].dims[0];
            e->dim_b = a->in[0].dims[1];
        } else if (strcmp(p->name, "aten::linear") == 0 && c.cls == TORCH_OP_MATRIX) {
            e->dim_a = a->in[1].dims[0];
            e->dim_b = a->in[1].dims[1];
        }
    }
    p->n_ev++;
    return 1;
}

static int on_start_map(void *ctx) {
    parser *p = ctx;
    if (p->depth == MAX_DEPTH) return fail(p, xf_errorf(XF_EPARSE, "%s: JSON nested deeper than %d levels", p->source, MAX_DEPTH));
    if (p->depth == 0) p->top_is_array = 0;
    p->kind[p->depth] = 'm';
    p->key[p->depth][0] = 0;
    p->depth++;
    if (p->in_events && p->depth == p->ev_depth) {
        p->in_ev = 1;
        ev_reset(p);
    }
    return 1;
}

static int on_end_map(void *ctx) {
    parser *p = ctx;
    int ok = 1;
    if (p->in_ev && p->depth == p->ev_depth) {
        p->in_ev = 0;
        ok = ev_finish(p);
    }
    p->depth--;
    return ok;
}

static int on_start_array(void *ctx) {
    parser *p = ctx;
    if (p->depth == MAX_DEPTH) return fail(p, xf_errorf(XF_EPARSE, "%s: JSON nested deeper than %d levels", p->source, MAX_DEPTH));
    if (p->depth == 0) {
        p->top_is_array = 1;
        p->in_events = 1;
        p->ev_depth = 2;
    } else if (p->depth == 1 && !p->top_is_array && strcmp(cur_key(p), "traceEvents") == 0) {
        p->in_events = 1;
        p->ev_depth = 3;
    } else if (p->in_ev) {
        int d = p->depth - p->ev_depth; /* 0: a field of the event; 1: a field of args */
        if (d == 1 && strcmp(cur_key(p), "Input Dims") == 0) {
            p->in_dims = 1;
            p->has_shape_field = 1;
        } else if (d == 1 && strcmp(cur_key(p), "Input type") == 0) {
            p->in_types = 1;
        } else if (d == 1 && strcmp(cur_key(p), "Concrete Inputs") == 0) {
            p->in_conc = 1;
        } else if (p->in_dims && d == 2) { /* one input's dims */
            torch_op_args *a = &p->args;
            if (a->n_inputs == TORCH_MAX_INPUTS) {
                a->truncated = 1;
                p->cur_in = -1;
            } else {
                p->cur_in = a->n_inputs++;
                torch_input *t = &a->in[p->cur_in];
                memset(t, 0, sizeof *t);
                t->list_last_dim0 = -1;
                t->list_same_last = 1;
            }
        } else if (p->in_dims && d == 3 && p->cur_in >= 0) { /* a TensorList: one tensor's dims */
            torch_input *t = &p->args.in[p->cur_in];
            t->is_list = 1;
            p->list_cur_ndim = 0;
            p->list_cur_elems = 1.0;
            p->list_cur_last = -1;
        } else if (p->in_dims && d > 3) {
            p->args.truncated = 1;
        }
    }
    p->kind[p->depth] = 'a';
    p->depth++;
    return 1;
}

static int on_end_array(void *ctx) {
    parser *p = ctx;
    p->depth--;
    if (p->depth == p->ev_depth - 1 && p->in_events && !p->in_ev) {
        p->in_events = 0; /* the events array closed */
    } else if (p->in_ev) {
        int d = p->depth - p->ev_depth;
        if (d == 1) p->in_dims = p->in_types = p->in_conc = 0;
        else if (p->in_dims && d == 2 && p->cur_in >= 0) {
            torch_input *t = &p->args.in[p->cur_in];
            if (t->ndim == 0 && p->cur_in < p->n_types && !t->is_list) { /* [] : a scalar tensor or not a tensor */
            }
            p->cur_in = -1;
        } else if (p->in_dims && d == 3 && p->cur_in >= 0) {
            torch_input *t = &p->args.in[p->cur_in];
            t->list_elems += p->list_cur_elems;
            if (t->list_last_dim0 < 0) t->list_last_dim0 = p->list_cur_last;
            else if (t->list_last_dim0 != p->list_cur_last) t->list_same_last = 0;
        }
    }
    return 1;
}

static int on_map_key(void *ctx, const unsigned char *k, size_t len) {
    parser *p = ctx;
    size_t n = len < sizeof p->key[0] - 1 ? len : sizeof p->key[0] - 1;
    memcpy(p->key[p->depth - 1], k, n);
    p->key[p->depth - 1][n] = 0;
    if (len >= sizeof p->key[0]) p->key[p->depth - 1][n - 1] = '~'; /* a long key matches nothing we read */
    return 1;
}

static void copy_str(char *dst, size_t cap, const unsigned char *s, size_t len) {
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(dst, s, n);
    dst[n] = 0;
}

static int on_string(void *ctx, const unsigned char *s, size_t len) {
    parser *p = ctx;
    if (!p->in_ev) return 1;
    int d = p->depth - p->ev_depth;
    const char *k = cur_key(p);
    if (d == 0) {
        if (strcmp(k, "name") == 0) copy_str(p->name, sizeof p->name, s, len);
        else if (strcmp(k, "cat") == 0) copy_str(p->cat, sizeof p->cat, s, len);
        else if (strcmp(k, "ph") == 0) copy_str(p->ph, sizeof p->ph, s, len);
        else if (strcmp(k, "tid") == 0 || strcmp(k, "pid") == 0) {
            /* string ids ("stream 7", "Spans"): hashed, kept apart from numeric ids */
            if (strcmp(k, "tid") == 0) p->tid = (int64_t)(hash_str((const char *)s, len) | (1ULL << 62));
        }
    } else if (d == 2 && p->in_types) {
        if (p->n_types < TORCH_MAX_INPUTS) copy_str(p->types[p->n_types++], sizeof p->types[0], s, len);
        else p->args.truncated = 1;
    } else if (d == 2 && p->in_conc) {
        if (p->args.n_concrete < TORCH_MAX_CONCRETE)
            copy_str(p->args.concrete[p->args.n_concrete++], sizeof p->args.concrete[0], s, len);
    }
    return 1;
}

/* An id from a JSON number; -1 for what no int64 holds (NaN, huge). */
static int64_t to_id(double v) { return (v >= -9e18 && v <= 9e18) ? (int64_t)v : -1; }

static int on_number(void *ctx, const char *s, size_t len) {
    parser *p = ctx;
    char buf[64];
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, s, len);
    buf[len] = 0;
    double v = strtod(buf, NULL);
    if (p->depth == 1 && !p->top_is_array) {
        const char *k = cur_key(p);
        if (strcmp(k, "record_shapes") == 0) p->record_shapes = v != 0;
        else if (strcmp(k, "with_modules") == 0) p->with_modules = v != 0;
        return 1;
    }
    if (!p->in_ev) return 1;
    int d = p->depth - p->ev_depth;
    const char *k = cur_key(p);
    if (d == 0) {
        if (strcmp(k, "ts") == 0) {
            p->ts = v;
            p->has_ts = 1;
        } else if (strcmp(k, "dur") == 0) {
            p->dur = v;
            p->has_dur = 1;
        } else if (strcmp(k, "tid") == 0) {
            p->tid = to_id(v);
        }
    } else if (d == 1) {
        if (strcmp(k, "External id") == 0) p->ext = to_id(v);
        else if (strcmp(k, "correlation") == 0) p->corr = to_id(v);
    } else if (p->in_dims && p->cur_in >= 0) {
        torch_input *t = &p->args.in[p->cur_in];
        int64_t dim = (v >= 0 && v < 9e15) ? (int64_t)v : -1;
        if (dim < 0) {
            p->args.truncated = 1; /* a negative or huge dim: no formula applies */
            return 1;
        }
        if (d == 3 && !t->is_list) {
            if (t->ndim == TORCH_MAX_DIMS) p->args.truncated = 1;
            else t->dims[t->ndim++] = dim;
        } else if (d == 4 && t->is_list) {
            p->list_cur_ndim++;
            p->list_cur_elems *= (double)dim;
            p->list_cur_last = dim;
        }
    }
    return 1;
}

static int on_bool(void *ctx, int b) {
    parser *p = ctx;
    if (p->depth == 1 && !p->top_is_array) {
        const char *k = cur_key(p);
        if (strcmp(k, "record_shapes") == 0) p->record_shapes = b;
        else if (strcmp(k, "with_modules") == 0) p->with_modules = b;
    }
    return 1;
}

static int on_null(void *ctx) {
    (void)ctx;
    return 1;
}

static const yajl_callbacks k_callbacks = {on_null, on_bool, NULL, NULL, on_number, on_string,
                                           on_start_map, on_map_key, on_end_map, on_start_array, on_end_array};

static void parser_init(parser *p, const char *source) {
    memset(p, 0, sizeof *p);
    p->source = source;
    p->record_shapes = -1;
    p->with_modules = -1;
}

static void parser_free(parser *p) {
    free(p->ev);
    pool_free(&p->names);
}

/* yajl's message for a syntax error, with the byte offset. */
static xf_status yajl_failure(parser *p, yajl_handle h, const unsigned char *chunk, size_t len, int64_t offset, int at_end) {
    if (p->err) return p->err;
    if (at_end)
        return xf_errorf(XF_EPARSE,
                         "%s: the JSON ends early (after %lld bytes): the trace is truncated; export it again and "
                         "let prof.export_chrome_trace finish",
                         p->source, (long long)offset);
    unsigned char *m = yajl_get_error(h, 0, chunk, len);
    size_t at = yajl_get_bytes_consumed(h);
    xf_status s = xf_errorf(XF_EPARSE, "%s: not valid JSON near byte %lld: %s", p->source, (long long)(offset + (int64_t)at),
                            m ? (const char *)m : "parse error");
    if (m) yajl_free_error(h, m);
    return s;
}


/* Feeds `read` chunks to yajl. `next` returns the next chunk (len 0 at the end) or an error. */
typedef xf_status (*chunk_fn)(void *src, const unsigned char **chunk, size_t *len);

static xf_status parse_stream(parser *p, chunk_fn next, void *src) {
    yajl_handle h = yajl_alloc(&k_callbacks, NULL, p);
    if (!h) return xf_errorf(XF_ENOMEM, "out of memory");
    int64_t offset = 0;
    xf_status s = XF_OK;
    for (;;) {
        const unsigned char *c;
        size_t n;
        if ((s = next(src, &c, &n))) break;
        if (n == 0) {
            if (yajl_complete_parse(h) != yajl_status_ok) s = yajl_failure(p, h, NULL, 0, offset, 1);
            break;
        }
        if (yajl_parse(h, c, n) != yajl_status_ok) {
            s = yajl_failure(p, h, c, n, offset, 0);
            break;
        }
        offset += (int64_t)n;
    }
    yajl_free(h);
    if (!s && p->depth != 0) s = xf_errorf(XF_EPARSE, "%s: the JSON ends early: the trace is truncated", p->source);
    return s;
}

typedef struct file_src {
    FILE *f;
    const char *path;
    unsigned char buf[1 << 16];
} file_src;

static xf_status file_next(void *v, const unsigned char **c, size_t *n) {
    file_src *s = v;
    *n = fread(s->buf, 1, sizeof s->buf, s->f);
    *c = s->buf;
    if (*n == 0 && ferror(s->f)) return xf_errorf(XF_EIO, "%s: read error: %s", s->path, strerror(errno));
    return XF_OK;
}

typedef struct mem_src {
    const unsigned char *p;
    size_t left;
} mem_src;

static xf_status mem_next(void *v, const unsigned char **c, size_t *n) {
    mem_src *s = v;
    *n = s->left < (1 << 16) ? s->left : (1 << 16);
    *c = s->p;
    s->p += *n;
    s->left -= *n;
    return XF_OK;
}

static xf_status import_run(parser *p, chunk_fn next, void *src, record *out, import_stats *st) {
    record_init(out, "import");
    import_stats local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    xf_status s = parse_stream(p, next, src);
    if (!s) {
        tt_trace t = {p->source, p->ev, p->n_ev, p->names.buf, p->record_shapes, p->with_modules,
                      p->n_read, p->n_ops, p->n_ops_no_shapes};
        s = torch_build_record(&t, out, st);
    }
    if (s) record_free(out), record_init(out, "import");
    return s;
}

xf_status import_torch_trace_buffer(const char *buf, size_t len, const char *source, record *out, import_stats *st) {
    parser p;
    parser_init(&p, source ? source : "trace");
    mem_src m = {(const unsigned char *)buf, len};
    xf_status s = import_run(&p, mem_next, &m, out, st);
    parser_free(&p);
    return s;
}

xf_status import_torch_trace_file(const char *path, const import_options *o, record *out, import_stats *st) {
    record_init(out, "import");
    int64_t max = o && o->max_bytes > 0 ? o->max_bytes : IMPORT_DEFAULT_MAX_BYTES;
    struct stat sb;
    if (stat(path, &sb) != 0) return xf_errorf(XF_EIO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return xf_errorf(XF_EINVAL, "%s: not a regular file", path);
    if ((int64_t)sb.st_size > max)
        return xf_errorf(XF_EINVAL,
                         "%s: %.2f GiB is larger than the %.2f GiB xfprof reads by default: profile fewer steps "
                         "(torch.profiler schedule), or raise the limit with --max-size",
                         path, (double)sb.st_size / (1 << 30), (double)max / (1 << 30));
    file_src *fs = malloc(sizeof *fs);
    if (!fs) return xf_errorf(XF_ENOMEM, "out of memory");
    fs->f = fopen(path, "rb");
    fs->path = path;
    if (!fs->f) {
        free(fs);
        return xf_errorf(XF_EIO, "%s: %s", path, strerror(errno));
    }
    parser p;
    parser_init(&p, path);
    xf_status s = import_run(&p, file_next, fs, out, st);
    fclose(fs->f);
    free(fs);
    parser_free(&p);
    return s;
}
