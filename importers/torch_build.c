/* The reduced events of a torch.profiler trace -> a record (torch_events.h). The rules
 * (docs/import.md): time belongs to the outermost cpu_op of each thread (or, in a trace with GPU
 * kernels, to the kernels, joined to the op that launched them); FLOPs and bytes are summed over
 * the leaves of that op, unless a leaf has no formula and an op above it has one, which is then
 * used instead: each FLOP is counted once. Modules (with_modules=True) give layers and op kinds;
 * the outermost module ranges are the steps; a step whose attention has a query longer than one
 * token is a prefill step, else a decode step. Ops of one kind, layer and phase are summed per
 * step; the steps of a phase are the op's samples. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference_model/cost_model.h"
#include "torch_events.h"
#include "torch_ops.h"

#define EPS_US 0.01 /* ts and dur are printed with 3 decimals: nested ends may disagree by 0.002 us */

static const char *ev_name(const tt_trace *t, const tt_ev *e) { return t->names + e->name; }

static int cmp_time(const void *a, const void *b, void *ctx) {
    const tt_ev *ev = ctx;
    int32_t ia = *(const int32_t *)a, ib = *(const int32_t *)b;
    const tt_ev *x = &ev[ia], *y = &ev[ib];
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    if (x->end != y->end) return x->end > y->end ? -1 : 1; /* the enclosing one first */
    return ia < ib ? -1 : ia > ib;
}

/* A module's class: "nn.Module: LlamaDecoderLayer_3" -> "LlamaDecoderLayer" (len), instance 3. */
static void module_class(const char *name, const char **cls, int *len, int *inst) {
    const char *s = name + 11; /* after "nn.Module: " */
    int n = (int)strlen(s), i = n;
    while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') i--;
    *inst = -1;
    if (i > 0 && i < n && s[i - 1] == '_') {
        *inst = i < n - 6 ? -1 : atoi(s + i);
        n = i - 1;
    }
    *cls = s;
    *len = n;
}

static int has(const char *s, int len, const char *w) {
    int wl = (int)strlen(w);
    for (int i = 0; i + wl <= len; i++)
        if (memcmp(s + i, w, (size_t)wl) == 0) return 1;
    return 0;
}

static int ends(const char *s, int len, const char *w) {
    int wl = (int)strlen(w);
    return len >= wl && memcmp(s + len - wl, w, (size_t)wl) == 0;
}

typedef struct mod_info {
    const char *cls;
    int len;
    int inst;
    int32_t parent;  /* module index, -1 root */
    int32_t ordinal; /* among siblings of the same class */
    int32_t same;    /* siblings of the same class (itself included) */
    int32_t adds;    /* residual adds seen directly in it (layers) */
    int32_t step;    /* roots: step index */
    int is_layer;
} mod_info;

/* One group of the record: ops of one phase, layer and kind (or one unknown op name). */
typedef struct group {
    int phase, layer, kind, unknown;
    uint32_t name;      /* for OP_OTHER and unknown groups: the op name; else UINT32_MAX */
    double *samples;    /* (n_phase_steps[phase]) seconds */
    double flops, bytes, list_elems; /* over the whole trace */
    int tensor;         /* holds matrix or attention work */
    int dtype;
    char source[96];
    int64_t first;      /* creation order */
} group;

typedef struct builder {
    const tt_trace *t;
    int64_t n_groups, cap_groups;
    group *g;
    int32_t *slot; /* hash of groups: index + 1 */
    int64_t n_slot;
    int64_t n_phase_steps[2];
} builder;

static uint64_t group_hash(int phase, int layer, int kind, int unknown, uint32_t name) {
    uint64_t h = (uint64_t)phase * 1000003u ^ (uint64_t)(layer + 2) * 7919u ^ (uint64_t)kind * 104729u ^
                 (uint64_t)unknown * 31u ^ (uint64_t)name * 2654435761u;
    return h * 0x9E3779B97F4A7C15ULL;
}

static group *group_get(builder *b, int phase, int layer, int kind, int unknown, uint32_t name) {
    if ((b->n_groups + 1) * 2 > b->n_slot) {
        int64_t n = b->n_slot ? b->n_slot * 2 : 256;
        int32_t *s = calloc((size_t)n, sizeof *s);
        if (!s) return NULL;
        for (int64_t i = 0; i < b->n_groups; i++) {
            group *x = &b->g[i];
            uint64_t j = group_hash(x->phase, x->layer, x->kind, x->unknown, x->name) & (uint64_t)(n - 1);
            while (s[j]) j = (j + 1) & (uint64_t)(n - 1);
            s[j] = (int32_t)i + 1;
        }
        free(b->slot);
        b->slot = s;
        b->n_slot = n;
    }
    uint64_t j = group_hash(phase, layer, kind, unknown, name) & (uint64_t)(b->n_slot - 1);
    while (b->slot[j]) {
        group *x = &b->g[b->slot[j] - 1];
        if (x->phase == phase && x->layer == layer && x->kind == kind && x->unknown == unknown && x->name == name) return x;
        j = (j + 1) & (uint64_t)(b->n_slot - 1);
    }
    if (b->n_groups == b->cap_groups) {
        int64_t cap = b->cap_groups ? b->cap_groups * 2 : 64;
        group *g = realloc(b->g, (size_t)cap * sizeof *g);
        if (!g) return NULL;
        b->g = g;
        b->cap_groups = cap;
    }
    group *x = &b->g[b->n_groups];
    memset(x, 0, sizeof *x);
    x->phase = phase;
    x->layer = layer;
    x->kind = kind;
    x->unknown = unknown;
    x->name = name;
    x->first = b->n_groups;
    x->samples = calloc((size_t)(b->n_phase_steps[phase] > 0 ? b->n_phase_steps[phase] : 1), sizeof *x->samples);
    if (!x->samples) return NULL;
    b->slot[j] = (int32_t)b->n_groups + 1;
    b->n_groups++;
    return x;
}

static void group_add_source(group *g, const char *name) {
    size_t have = strlen(g->source);
    /* already listed? */
    const char *p = g->source;
    size_t nl = strlen(name);
    while (p && *p) {
        const char *q = strchr(p, '+');
        size_t l = q ? (size_t)(q - p) : strlen(p);
        if (l == nl && memcmp(p, name, l) == 0) return;
        p = q ? q + 1 : NULL;
    }
    if (have && have + 1 + nl >= sizeof g->source) {
        if (have + 2 < sizeof g->source && g->source[have - 1] != '~') strcat(g->source, "+~");
        return;
    }
    if (!have && nl >= sizeof g->source) {
        snprintf(g->source, sizeof g->source, "%.*s~", (int)sizeof g->source - 2, name);
        return;
    }
    if (have) strcat(g->source, "+");
    strcat(g->source, name);
}

static int cmp_group(const void *a, const void *b) {
    const group *x = a, *y = b;
    if (x->phase != y->phase) return x->phase - y->phase;
    return x->first < y->first ? -1 : x->first > y->first;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* (ext id, op index) pairs, sorted, for joining kernels and runtime calls to ops. */
typedef struct id_pair {
    int64_t id;
    int32_t idx;
} id_pair;

static int cmp_pair(const void *a, const void *b) {
    const id_pair *x = a, *y = b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return x->idx - y->idx;
}

static int32_t pair_find(const id_pair *p, int64_t n, int64_t id) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (p[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && p[lo].id == id ? p[lo].idx : -1;
}

/* The kind of an outermost op from its module chain (docs/import.md "Op kinds"). */
static int op_kind_of(const tt_trace *t, const tt_ev *e, mod_info *m, int32_t inner, int in_step, int *layer) {
    const char *name = ev_name(t, e);
    *layer = -1;
    int32_t lay = -1, sub = -1;
    for (int32_t k = inner, below = -1; k >= 0; below = k, k = m[k].parent) {
        if (m[k].is_layer) {
            lay = k;
            sub = below;
            break;
        }
    }
    const mod_info *in = inner >= 0 ? &m[inner] : NULL;
    if (in && has(in->cls, in->len, "Rotary")) return OP_ROPE;
    if (in && has(in->cls, in->len, "Embedding")) return OP_EMBEDDING;
    if (lay >= 0) {
        *layer = m[lay].inst >= 0 ? m[lay].inst : 0;
        if (sub < 0) { /* directly in the layer: the residual adds */
            if (strcmp(name, "aten::add") == 0 || strcmp(name, "aten::add_") == 0)
                return m[lay].adds++ == 0 ? OP_ATTN_RESIDUAL : OP_FFN_RESIDUAL;
            return OP_OTHER;
        }
        const mod_info *s = &m[sub];
        int lin = in && ends(in->cls, in->len, "Linear");
        if (has(s->cls, s->len, "Norm")) return 2 * s->ordinal < s->same ? OP_ATTN_NORM : OP_FFN_NORM;
        if (has(s->cls, s->len, "Attention") || has(s->cls, s->len, "Attn")) {
            if (lin) return in->ordinal == in->same - 1 ? OP_O_PROJ : OP_QKV;
            if (e->cls == TORCH_OP_ATTENTION) return OP_ATTENTION;
            if (in && has(in->cls, in->len, "Norm")) return OP_ATTN_NORM; /* q/k norm */
            if (strcmp(name, "aten::cat") == 0 && !e->cat_last) return OP_KV_APPEND;
            if (strcmp(name, "aten::index_copy_") == 0 || strcmp(name, "aten::index_put_") == 0) return OP_KV_APPEND;
            return OP_ROPE; /* between the projections and attention: rotary embedding and reshapes */
        }
        if (has(s->cls, s->len, "MLP") || has(s->cls, s->len, "Mlp") || has(s->cls, s->len, "FeedForward") ||
            has(s->cls, s->len, "MoE") || has(s->cls, s->len, "FFN")) {
            if (lin) return in->ordinal == in->same - 1 ? OP_DOWN : OP_GATE_UP;
            return OP_SWIGLU;
        }
        return OP_OTHER;
    }
    if (in_step) {
        if (in && has(in->cls, in->len, "Norm")) return OP_FINAL_NORM;
        if (in && ends(in->cls, in->len, "Linear")) return OP_LM_HEAD;
        if (e->cls == TORCH_OP_ATTENTION) return OP_ATTENTION;
        if (!in && strcmp(name, "aten::embedding") == 0) return OP_EMBEDDING;
        return OP_OTHER;
    }
    if (strcmp(name, "aten::embedding") == 0) return OP_EMBEDDING; /* a trace without modules */
    static const char *const sampling[] = {"aten::argmax", "aten::topk", "aten::multinomial", "aten::sort",
                                           "aten::softmax", "aten::_softmax", NULL};
    for (int i = 0; sampling[i]; i++)
        if (strcmp(name, sampling[i]) == 0) return OP_SAMPLING;
    return OP_OTHER;
}

static int is_tensor_work(int cls) { return cls == TORCH_OP_MATRIX || cls == TORCH_OP_ATTENTION; }

/* Per outermost op: what its subtree computes, counted once. */
typedef struct subtree {
    double flops, bytes, list_elems, matrix_flops;
    int unknown; /* some work has no formula */
    int tensor;  /* holds matrix or attention work */
    int dtype;   /* of the tensor work, else of the op */
} subtree;

/* Layers of one step without module names: the attention ops at a constant spacing P are one
 * per layer; a layer starts `a` ops before its attention, a the longest run before the first
 * attention that also precedes the second; ops at the same offset with the same name as in the
 * first layer belong to the layer. Kinds inside a layer: the matrix ops before the attention are
 * qkv, the first after it o_proj, the last of the layer down, the others gate_up; the attention
 * op attention; the rest other (named). Returns 1 when the step had a pattern. */
static int pattern_assign(const tt_trace *t, const tt_ev *ev, const subtree *sub, const int32_t *seq, int64_t m,
                          int32_t *pos, int32_t *pat_layer, int32_t *pat_kind) {
    int64_t L = 0;
    for (int64_t q = 0; q < m; q++)
        if (ev[seq[q]].cls == TORCH_OP_ATTENTION) pos[L++] = (int32_t)q;
    if (L < 2) return 0;
    int64_t P = pos[1] - pos[0];
    for (int64_t l = 1; l < L; l++)
        if (pos[l] - pos[l - 1] != P) return 0;
    int64_t a = 0;
    while (a < P - 1 && pos[0] - a - 1 >= 0 &&
           strcmp(ev_name(t, &ev[seq[pos[0] - a - 1]]), ev_name(t, &ev[seq[pos[1] - a - 1]])) == 0)
        a++;
    for (int64_t l = 0; l < L; l++) {
        int64_t start = pos[l] - a, end = start + P < m ? start + P : m, last_mat = -1, n_after = 0;
        for (int64_t q = start; q < end; q++) {
            int32_t i = seq[q];
            if (strcmp(ev_name(t, &ev[i]), ev_name(t, &ev[seq[pos[0] - a + (q - start)]])) != 0) break; /* the pattern ends */
            pat_layer[i] = (int32_t)l;
            pat_kind[i] = OP_OTHER;
            if (ev[i].cls == TORCH_OP_ATTENTION) pat_kind[i] = OP_ATTENTION;
            else if (sub[i].matrix_flops > 0) {
                pat_kind[i] = q < pos[l] ? OP_QKV : n_after++ == 0 ? OP_O_PROJ : OP_GATE_UP;
                if (q > pos[l]) last_mat = i;
            }
        }
        if (last_mat >= 0 && n_after > 2) pat_kind[last_mat] = OP_DOWN;
    }
    return 1;
}

static double median_i64(int64_t *v, int64_t n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    return (double)v[n / 2];
}

xf_status torch_build_record(const tt_trace *t, record *out, import_stats *st) {
    xf_status s = XF_OK;
    const int64_t n = t->n_ev;
    tt_ev *ev = t->ev;
    if (t->n_ops == 0)
        return xf_errorf(XF_EINVAL,
                         "%s: no cpu_op events: not a torch.profiler trace, or profiled without "
                         "activities=[ProfilerActivity.CPU]",
                         t->source);
    if (t->record_shapes == 0 || t->n_ops_no_shapes == t->n_ops)
        return xf_errorf(XF_EINVAL,
                         "%s: the trace has no input shapes, so FLOPs and bytes cannot be computed: profile with "
                         "torch.profiler.profile(record_shapes=True, with_modules=True, with_stack=True) and export again",
                         t->source);
    int32_t *ops = NULL, *mods = NULL, *kers = NULL, *rts = NULL, *top = NULL, *first_child = NULL, *next_sib = NULL;
    int32_t *step_of = NULL, *mstack = NULL, *ostack = NULL;
    mod_info *mi = NULL;
    subtree *sub = NULL;
    id_pair *ext_pairs = NULL, *rt_pairs = NULL;
    double *own_time = NULL, *step_start = NULL;
    int64_t *step_q = NULL, *step_kv = NULL, *step_b = NULL, *step_phase_idx = NULL, *dec_ctx = NULL;
    int *step_phase = NULL;
    int32_t *pat_layer = NULL, *pat_kind = NULL, *seq = NULL, *pos = NULL;
    builder b = {t, 0, 0, NULL, NULL, 0, {0, 0}};
    int64_t n_ops = 0, n_mods = 0, n_kers = 0, n_rts = 0, n_steps = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ev[i].type == EV_OP) n_ops++;
        else if (ev[i].type == EV_MODULE) n_mods++;
        else if (ev[i].type == EV_KERNEL) n_kers++;
        else n_rts++;
    }
    ops = malloc((size_t)(n_ops + 1) * sizeof *ops);
    mods = malloc((size_t)(n_mods + 1) * sizeof *mods);
    kers = malloc((size_t)(n_kers + 1) * sizeof *kers);
    rts = malloc((size_t)(n_rts + 1) * sizeof *rts);
    mi = calloc((size_t)(n_mods + 1), sizeof *mi);
    mstack = malloc((size_t)(n_mods + 1) * sizeof *mstack);
    ostack = malloc((size_t)(n_ops + 1) * sizeof *ostack);
    top = malloc((size_t)(n + 1) * sizeof *top);
    first_child = malloc((size_t)(n + 1) * sizeof *first_child);
    next_sib = malloc((size_t)(n + 1) * sizeof *next_sib);
    sub = calloc((size_t)(n + 1), sizeof *sub);
    own_time = calloc((size_t)(n + 1), sizeof *own_time);
    step_of = malloc((size_t)(n + 1) * sizeof *step_of);
    if (!ops || !mods || !kers || !rts || !mi || !mstack || !ostack || !top || !first_child || !next_sib || !sub ||
        !own_time || !step_of) {
        s = xf_errorf(XF_ENOMEM, "%s: out of memory for %lld events", t->source, (long long)n);
        goto done;
    }
    {
        int64_t a = 0, m = 0, k = 0, r = 0;
        for (int64_t i = 0; i < n; i++) {
            if (ev[i].type == EV_OP) ops[a++] = (int32_t)i;
            else if (ev[i].type == EV_MODULE) mods[m++] = (int32_t)i;
            else if (ev[i].type == EV_KERNEL) kers[k++] = (int32_t)i;
            else rts[r++] = (int32_t)i;
            top[i] = first_child[i] = next_sib[i] = step_of[i] = -1;
        }
    }
    qsort_r(ops, (size_t)n_ops, sizeof *ops, cmp_time, ev);
    qsort_r(mods, (size_t)n_mods, sizeof *mods, cmp_time, ev);

    /* Modules: nesting, class, ordinal among same-class siblings. mi[] is indexed by position in mods[]. */
    {
        int64_t depth = 0;
        int64_t prev_tid = 0;
        int32_t *last_child = malloc((size_t)(n_mods + 1) * sizeof *last_child);
        int32_t *mfirst = malloc((size_t)(n_mods + 1) * sizeof *mfirst), *mnext = malloc((size_t)(n_mods + 1) * sizeof *mnext);
        if (!last_child || !mfirst || !mnext) {
            free(last_child), free(mfirst), free(mnext);
            s = xf_errorf(XF_ENOMEM, "%s: out of memory", t->source);
            goto done;
        }
        for (int64_t j = 0; j < n_mods; j++) {
            const tt_ev *e = &ev[mods[j]];
            mod_info *x = &mi[j];
            module_class(ev_name(t, e), &x->cls, &x->len, &x->inst);
            x->is_layer = (ends(x->cls, x->len, "DecoderLayer") || ends(x->cls, x->len, "Layer") || ends(x->cls, x->len, "Block")) &&
                          !has(x->cls, x->len, "Norm");
            x->step = -1;
            last_child[j] = mfirst[j] = mnext[j] = -1;
            if (j == 0 || e->tid != prev_tid) depth = 0;
            prev_tid = e->tid;
            while (depth > 0 && ev[mods[mstack[depth - 1]]].end <= e->ts + EPS_US) depth--;
            x->parent = depth > 0 ? mstack[depth - 1] : -1;
            if (x->parent >= 0) {
                if (last_child[x->parent] < 0) mfirst[x->parent] = (int32_t)j;
                else mnext[last_child[x->parent]] = (int32_t)j;
                last_child[x->parent] = (int32_t)j;
            }
            mstack[depth++] = (int32_t)j;
        }
        for (int64_t pj = 0; pj < n_mods; pj++) {
            for (int32_t c = mfirst[pj]; c >= 0; c = mnext[c]) {
                int ord = 0, same = 0;
                for (int32_t d = mfirst[pj]; d >= 0; d = mnext[d]) {
                    if (mi[d].len != mi[c].len || memcmp(mi[d].cls, mi[c].cls, (size_t)mi[c].len) != 0) continue;
                    same++;
                    if (d < c) ord++;
                }
                mi[c].ordinal = ord;
                mi[c].same = same;
            }
        }
        free(last_child), free(mfirst), free(mnext);
        for (int64_t j = 0; j < n_mods; j++)
            if (mi[j].parent < 0) mi[j].step = (int32_t)n_steps++;
    }

    /* Ops: nesting (refusing partial overlaps), innermost module, outermost op. */
    {
        int64_t depth = 0, mdepth = 0, mp = 0;
        for (int64_t j = 0; j < n_ops; j++) {
            int32_t i = ops[j];
            tt_ev *e = &ev[i];
            if (j == 0 || e->tid != ev[ops[j - 1]].tid) {
                depth = 0;
                mdepth = 0;
            }
            while (depth > 0 && ev[ostack[depth - 1]].end <= e->ts + EPS_US) depth--;
            if (depth > 0) {
                tt_ev *pa = &ev[ostack[depth - 1]];
                if (e->end > pa->end + EPS_US) {
                    s = xf_errorf(XF_EINVAL,
                                  "%s: ops '%.60s' [%.3f, %.3f] us and '%.60s' [%.3f, %.3f] us overlap on one thread without "
                                  "nesting: the trace is damaged (or merged from two runs); export it again",
                                  t->source, ev_name(t, pa), pa->ts, pa->end, ev_name(t, e), e->ts, e->end);
                    goto done;
                }
                e->parent = ostack[depth - 1];
                pa->nchild++;
                next_sib[i] = first_child[e->parent];
                first_child[e->parent] = i;
                top[i] = top[e->parent];
            } else {
                top[i] = i;
            }
            ostack[depth++] = i;
            /* modules that started before this op's middle and have not ended */
            double mid = 0.5 * (e->ts + e->end);
            while (mp < n_mods && (ev[mods[mp]].tid < e->tid || (ev[mods[mp]].tid == e->tid && ev[mods[mp]].ts <= mid))) {
                if (ev[mods[mp]].tid == e->tid) {
                    while (mdepth > 0 && ev[mods[mstack[mdepth - 1]]].end <= ev[mods[mp]].ts + EPS_US) mdepth--;
                    mstack[mdepth++] = (int32_t)mp;
                }
                mp++;
            }
            while (mdepth > 0 && ev[mods[mstack[mdepth - 1]]].end < mid) mdepth--;
            e->module = mdepth > 0 ? mstack[mdepth - 1] : -1;
        }
    }

    /* Steps: outermost modules, else the outermost aten::embedding ops. */
    int have_modules = n_steps > 0;
    {
        int64_t cap = n_steps;
        if (!have_modules)
            for (int64_t j = 0; j < n_ops; j++)
                if (top[ops[j]] == ops[j] && strcmp(ev_name(t, &ev[ops[j]]), "aten::embedding") == 0) cap++;
        if (cap == 0) cap = 1;
        step_start = malloc((size_t)cap * sizeof *step_start);
        step_q = calloc((size_t)cap, sizeof *step_q);
        step_kv = calloc((size_t)cap, sizeof *step_kv);
        step_b = calloc((size_t)cap, sizeof *step_b);
        step_phase = calloc((size_t)cap, sizeof *step_phase);
        step_phase_idx = calloc((size_t)cap, sizeof *step_phase_idx);
        dec_ctx = calloc((size_t)cap, sizeof *dec_ctx);
        if (!step_start || !step_q || !step_kv || !step_b || !step_phase || !step_phase_idx || !dec_ctx) {
            s = xf_errorf(XF_ENOMEM, "%s: out of memory", t->source);
            goto done;
        }
        if (have_modules) {
            for (int64_t j = 0; j < n_mods; j++)
                if (mi[j].parent < 0) step_start[mi[j].step] = ev[mods[j]].ts;
        } else {
            for (int64_t j = 0; j < n_ops; j++)
                if (top[ops[j]] == ops[j] && strcmp(ev_name(t, &ev[ops[j]]), "aten::embedding") == 0)
                    step_start[n_steps++] = ev[ops[j]].ts;
            if (n_steps == 0) step_start[n_steps++] = -INFINITY;
        }
        /* step starts are sorted per thread; traces of one thread are the case handled */
        for (int64_t j = 0; j < n_ops; j++) {
            int32_t i = ops[j];
            const tt_ev *e = &ev[i];
            int64_t st_i = -1;
            if (have_modules && e->module >= 0) {
                int32_t k = e->module;
                while (mi[k].parent >= 0) k = mi[k].parent;
                st_i = mi[k].step;
            }
            if (st_i < 0) { /* outside every step: the last step started before it */
                int64_t lo = 0, hi = n_steps;
                while (lo < hi) {
                    int64_t mid = (lo + hi) / 2;
                    if (step_start[mid] <= e->ts + EPS_US) lo = mid + 1;
                    else hi = mid;
                }
                st_i = lo > 0 ? lo - 1 : 0;
            }
            step_of[i] = (int32_t)st_i;
            if (e->cls == TORCH_OP_ATTENTION) {
                if (e->q_len > step_q[st_i]) step_q[st_i] = e->q_len;
                if (e->kv_len > step_kv[st_i]) step_kv[st_i] = e->kv_len;
                if (e->dim_a > step_b[st_i]) step_b[st_i] = e->dim_a;
            }
        }
        int any_attention = 0;
        for (int64_t k = 0; k < n_steps; k++) any_attention |= step_q[k] > 0;
        for (int64_t k = 0; k < n_steps; k++) {
            int ph = any_attention ? (step_q[k] > 1 ? XF_PREFILL : XF_DECODE) : (k == 0 ? XF_PREFILL : XF_DECODE);
            if (any_attention && step_q[k] == 0) ph = k == 0 ? XF_PREFILL : XF_DECODE; /* a step without attention */
            step_phase[k] = ph;
            step_phase_idx[k] = b.n_phase_steps[ph]++;
        }
        if (b.n_phase_steps[XF_PREFILL] > 1000000 || b.n_phase_steps[XF_DECODE] > 1000000) {
            s = xf_errorf(XF_EINVAL, "%s: more than a million steps of one phase (a record holds at most a million samples "
                                     "per op): profile fewer steps", t->source);
            goto done;
        }
    }

    /* Subtrees, leaves first (children come after their parent in ops[]). */
    for (int64_t j = n_ops - 1; j >= 0; j--) {
        int32_t i = ops[j];
        const tt_ev *e = &ev[i];
        subtree own = {e->flops, e->bytes, e->list_elems, e->cls == TORCH_OP_MATRIX ? e->flops : 0.0,
                       e->cls == TORCH_OP_UNKNOWN, is_tensor_work(e->cls), e->dtype};
        if (first_child[i] < 0) {
            sub[i] = own;
            continue;
        }
        subtree c = {0, 0, 0, 0, 0, 0, e->dtype};
        for (int32_t k = first_child[i]; k >= 0; k = next_sib[k]) {
            c.flops += sub[k].flops;
            c.bytes += sub[k].bytes;
            c.list_elems += sub[k].list_elems;
            c.matrix_flops += sub[k].matrix_flops;
            c.unknown |= sub[k].unknown;
            if (sub[k].tensor && !c.tensor) c.dtype = sub[k].dtype;
            c.tensor |= sub[k].tensor;
        }
        /* An op with a formula whose children miss its work (no formula, or only allocation and
         * views under a kernel that computes itself, as the attention kernels): its own counts. */
        int own_known = e->cls != TORCH_OP_UNKNOWN && e->cls != TORCH_OP_FREE;
        int children_miss = c.unknown || c.flops < own.flops || (c.flops == 0 && c.bytes == 0 && c.list_elems == 0);
        sub[i] = (own_known && children_miss) ? own : c;
        /* An op without a formula whose children do no work (allocation only, as aten::arange's):
         * its work is not known. */
        if (e->cls == TORCH_OP_UNKNOWN && c.flops == 0 && c.bytes == 0 && c.list_elems == 0) sub[i].unknown = 1;
    }

    /* Time owners: the outermost ops, or the kernels when the trace has any. */
    int gpu = n_kers > 0;
    double unattributed = 0, busy = 0, win_lo = INFINITY, win_hi = -INFINITY;
    for (int64_t j = 0; j < n_ops; j++) {
        const tt_ev *e = &ev[ops[j]];
        if (e->ts < win_lo) win_lo = e->ts;
        if (e->end > win_hi) win_hi = e->end;
        if (!gpu && top[ops[j]] == ops[j]) own_time[ops[j]] = e->dur;
    }
    int64_t n_unattr = 0;
    double *unattr_step = NULL;
    if (gpu) {
        int64_t ne = 0, nr = 0;
        ext_pairs = malloc((size_t)(n_ops + 1) * sizeof *ext_pairs);
        rt_pairs = malloc((size_t)(n_rts + 1) * sizeof *rt_pairs);
        unattr_step = calloc((size_t)n_steps, sizeof *unattr_step);
        if (!ext_pairs || !rt_pairs || !unattr_step) {
            free(unattr_step);
            s = xf_errorf(XF_ENOMEM, "%s: out of memory", t->source);
            goto done;
        }
        for (int64_t j = 0; j < n_ops; j++)
            if (ev[ops[j]].ext >= 0) ext_pairs[ne++] = (id_pair){ev[ops[j]].ext, ops[j]};
        for (int64_t j = 0; j < n_rts; j++)
            if (ev[rts[j]].corr >= 0) rt_pairs[nr++] = (id_pair){ev[rts[j]].corr, rts[j]};
        qsort(ext_pairs, (size_t)ne, sizeof *ext_pairs, cmp_pair);
        qsort(rt_pairs, (size_t)nr, sizeof *rt_pairs, cmp_pair);
        /* outermost ops by (tid, ts) for a runtime call without an External id */
        for (int64_t j = 0; j < n_kers; j++) {
            const tt_ev *k = &ev[kers[j]];
            double d = k->dur;
            int32_t op = k->ext >= 0 ? pair_find(ext_pairs, ne, k->ext) : -1;
            if (op < 0 && k->corr >= 0) {
                int32_t r = pair_find(rt_pairs, nr, k->corr);
                if (r >= 0 && ev[r].ext >= 0) op = pair_find(ext_pairs, ne, ev[r].ext);
                if (r >= 0 && op < 0) { /* the outermost op around the runtime call */
                    int64_t lo = 0, hi = n_ops;
                    const tt_ev *re = &ev[r];
                    while (lo < hi) {
                        int64_t mid = (lo + hi) / 2;
                        const tt_ev *x = &ev[ops[mid]];
                        if (x->tid < re->tid || (x->tid == re->tid && x->ts <= re->ts)) lo = mid + 1;
                        else hi = mid;
                    }
                    if (lo > 0) {
                        int32_t cand = top[ops[lo - 1]];
                        if (ev[cand].tid == re->tid && ev[cand].ts <= re->ts && ev[cand].end >= re->end) op = cand;
                    }
                }
            }
            busy += d;
            if (op >= 0) {
                own_time[top[op]] += d;
            } else {
                unattributed += d;
                n_unattr++;
                int64_t lo = 0, hi = n_steps;
                while (lo < hi) {
                    int64_t mid = (lo + hi) / 2;
                    if (step_start[mid] <= k->ts) lo = mid + 1;
                    else hi = mid;
                }
                unattr_step[lo > 0 ? lo - 1 : 0] += d;
            }
            if (k->ts < win_lo) win_lo = k->ts;
            if (k->end > win_hi) win_hi = k->end;
        }
    }

    /* Activation element size for TensorList traffic: the dtype of the first matrix op. */
    int act_dtype = -1;
    for (int64_t j = 0; j < n_ops && act_dtype < 0; j++)
        if (ev[ops[j]].cls == TORCH_OP_MATRIX) act_dtype = ev[ops[j]].dtype;
    if (act_dtype < 0) act_dtype = XF_FP32;
    double act_bytes = dtype_bytes((xf_dtype)act_dtype, 1.0, 1, 0);

    /* Without module names: layers from the repeating pattern of each step (below). */
    int pattern_layers = 0;
    if (!have_modules) {
        pat_layer = malloc((size_t)(n + 1) * sizeof *pat_layer);
        pat_kind = malloc((size_t)(n + 1) * sizeof *pat_kind);
        seq = malloc((size_t)(n_ops + 1) * sizeof *seq);
        pos = malloc((size_t)(n_ops + 1) * sizeof *pos);
        if (!pat_layer || !pat_kind || !seq || !pos) {
            s = xf_errorf(XF_ENOMEM, "%s: out of memory", t->source);
            free(unattr_step);
            goto done;
        }
        for (int64_t i = 0; i < n; i++) pat_layer[i] = pat_kind[i] = -1;
        int64_t m = 0;
        for (int64_t k = 0, j0 = 0; k < n_steps; k++) {
            /* the outermost ops of step k, in order (steps are contiguous in time) */
            m = 0;
            for (; j0 < n_ops && step_of[ops[j0]] <= k; j0++)
                if (top[ops[j0]] == ops[j0] && step_of[ops[j0]] == k) seq[m++] = ops[j0];
            pattern_layers |= pattern_assign(t, ev, sub, seq, m, pos, pat_layer, pat_kind);
        }
    }

    /* Groups. */
    int64_t n_unknown = 0;
    double unknown_s = 0, matrix_flops = 0;
    int64_t d_ff = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0, d_model = 0;
    int max_layer = -1;
    for (int64_t j = 0; j < n_ops; j++) {
        int32_t i = ops[j];
        tt_ev *e = &ev[i];
        if (e->cls == TORCH_OP_ATTENTION && !heads) {
            heads = e->dim_b;
            kv_heads = e->dim_c;
            head_dim = e->dim_d;
        }
        if (top[i] != i) continue;
        const subtree *x = &sub[i];
        int in_step = e->module >= 0;
        int layer;
        int kind = op_kind_of(t, e, mi, e->module, in_step, &layer);
        if (pat_layer && pat_layer[i] >= 0) {
            layer = pat_layer[i];
            kind = pat_kind[i];
        }
        if (kind == OP_EMBEDDING && e->dim_a) {
            vocab = e->dim_a;
            d_model = e->dim_b;
        }
        if (!d_model && strcmp(ev_name(t, e), "aten::embedding") == 0 && e->dim_a) {
            vocab = e->dim_a;
            d_model = e->dim_b;
        }
        if (kind == OP_GATE_UP && e->dim_a > d_ff) d_ff = e->dim_a;
        if (layer > max_layer) max_layer = layer;
        int st_i = step_of[i];
        int ph = step_phase[st_i];
        int unknown = x->unknown;
        uint32_t nm = (kind == OP_OTHER || unknown) ? e->name : UINT32_MAX;
        if (unknown) kind = OP_OTHER;
        group *g = group_get(&b, ph, layer, kind, unknown, nm);
        if (!g) {
            s = xf_errorf(XF_ENOMEM, "%s: out of memory", t->source);
            free(unattr_step);
            goto done;
        }
        g->samples[step_phase_idx[st_i]] += own_time[i] * 1e-6;
        g->flops += x->flops;
        g->bytes += x->bytes + x->list_elems * act_bytes;
        g->tensor |= x->tensor;
        if (x->tensor) g->dtype = x->dtype;
        matrix_flops += x->matrix_flops;
        group_add_source(g, ev_name(t, e));
        if (unknown) {
            n_unknown++;
            unknown_s += own_time[i] * 1e-6;
        }
        if (!gpu) busy += own_time[i];
    }
    if (gpu && unattributed > 0) {
        for (int64_t k = 0; k < n_steps; k++) {
            if (unattr_step[k] <= 0) continue;
            group *g = group_get(&b, step_phase[k], -1, OP_OTHER, 1, UINT32_MAX - 1);
            if (!g) {
                s = xf_errorf(XF_ENOMEM, "%s: out of memory", t->source);
                free(unattr_step);
                goto done;
            }
            g->samples[step_phase_idx[k]] += unattr_step[k] * 1e-6;
            snprintf(g->source, sizeof g->source, "unattributed kernels");
        }
    }
    free(unattr_step);

    /* The record. */
    qsort(b.g, (size_t)b.n_groups, sizeof *b.g, cmp_group);
    record_point *p = record_add_point(out);
    if (!p || !(p->ops = calloc((size_t)b.n_groups + 1, sizeof *p->ops))) {
        s = xf_errorf(XF_ENOMEM, "%s: out of memory", t->source);
        goto done;
    }
    for (int64_t k = 0; k < b.n_groups; k++) {
        group *g = &b.g[k];
        record_op *o = &p->ops[p->n_ops++];
        int64_t steps = b.n_phase_steps[g->phase] > 0 ? b.n_phase_steps[g->phase] : 1;
        o->cost.phase = (xf_phase)g->phase;
        o->cost.layer = g->layer;
        o->cost.kind = (op_kind)g->kind;
        o->cost.compute = g->tensor ? cost_compute_of((xf_dtype)g->dtype) : XF_COMPUTE_FP32;
        o->cost.flops = g->flops / (double)steps;
        o->cost.act_in_bytes = g->bytes / (double)steps;
        o->cost.bytes = o->cost.act_in_bytes;
        if ((s = import_check_bytes(t->source, g->source, o->cost.bytes))) goto done;
        o->measured = 1;
        o->n_samples = (int)steps;
        o->samples_s = g->samples;
        g->samples = NULL; /* owned by the record now */
        o->bound = g->unknown ? XF_BOUND_UNKNOWN : XF_BOUND_LATENCY;
        snprintf(o->source, sizeof o->source, "%s", g->source);
    }
    /* Model and workload as the trace shows them (1 where it does not). */
    model_config *mc = &out->model;
    /* The name: the outermost module's class ("LlamaForCausalLM"), so that two traces of one model
     * compare; "imported" without modules. */
    snprintf(mc->name, sizeof mc->name, "imported");
    for (int64_t j = 0; j < n_mods; j++)
        if (mi[j].parent < 0) {
            snprintf(mc->name, sizeof mc->name, "%.*s", mi[j].len < 63 ? mi[j].len : 63, mi[j].cls);
            break;
        }
    snprintf(mc->arch, sizeof mc->arch, "import");
    mc->n_layers = max_layer + 1 > 0 ? max_layer + 1 : 1;
    mc->d_model = d_model > 0 ? d_model : 1;
    mc->vocab = vocab > 0 ? vocab : 1;
    mc->n_heads = heads > 0 ? heads : 1;
    mc->n_kv_heads = kv_heads > 0 && mc->n_heads % kv_heads == 0 ? kv_heads : mc->n_heads;
    mc->head_dim = head_dim > 0 ? head_dim : 1;
    mc->d_ff = d_ff > 0 ? d_ff : 1;
    int64_t maxkv = 1, batch = 1, prompt = 1, n_dec = 0;
    for (int64_t k = 0; k < n_steps; k++) {
        if (step_kv[k] > maxkv) maxkv = step_kv[k];
        if (step_phase[k] == XF_PREFILL && step_q[k] > prompt) prompt = step_q[k];
        if (step_b[k] > batch) batch = step_b[k];
        if (step_phase[k] == XF_DECODE) dec_ctx[n_dec++] = step_kv[k];
    }
    mc->max_ctx = maxkv;
    p->wl.batch = batch;
    p->wl.prompt = prompt;
    /* gen counts the generated tokens (workload_decode_steps): the prefill samples the first */
    p->wl.gen = b.n_phase_steps[XF_DECODE] + (b.n_phase_steps[XF_PREFILL] > 0 ? 1 : 0);
    p->wl.wdtype = p->wl.adtype = p->wl.kvdtype = (xf_dtype)act_dtype;
    p->summary.decode_context = (int64_t)median_i64(dec_ctx, n_dec);
    out->kv_bytes_per_token = 0;

    st->window_s = win_hi > win_lo ? (win_hi - win_lo) * 1e-6 : 0;
    st->busy_s = busy * 1e-6;
    st->idle_s = st->window_s > st->busy_s ? st->window_s - st->busy_s : 0;
    st->unattributed_s = unattributed * 1e-6;
    st->matrix_flops = matrix_flops;
    st->n_events = t->n_read;
    st->n_ops = n_ops;
    st->n_kernels = n_kers;
    st->n_unknown = n_unknown;
    st->unknown_s = unknown_s;
    st->n_steps[0] = b.n_phase_steps[0];
    st->n_steps[1] = b.n_phase_steps[1];
    st->have_modules = have_modules;
    st->pattern_layers = pattern_layers;
    snprintf(st->time_level, sizeof st->time_level, "%s",
             gpu ? "kernel (GPU kernels, joined to the cpu_op that launched them)" : "cpu_op (outermost op of each thread)");
    (void)n_unattr;
done:
    for (int64_t k = 0; k < b.n_groups; k++) free(b.g[k].samples);
    free(b.g);
    free(b.slot);
    free(ops), free(mods), free(kers), free(rts), free(mi), free(mstack), free(ostack), free(top), free(first_child);
    free(next_sib), free(sub), free(own_time), free(step_of), free(ext_pairs), free(rt_pairs), free(step_start);
    free(step_q), free(step_kv), free(step_b), free(step_phase), free(step_phase_idx), free(dec_ctx);
    free(pat_layer), free(pat_kind), free(seq), free(pos);
    return s;
}
