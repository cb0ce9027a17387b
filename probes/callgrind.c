#include "callgrind.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probes/range_table.h"
#include "probes/timer.h"

#ifdef XFPROF_HAVE_VALGRIND
#include <valgrind/callgrind.h>
#include <valgrind/valgrind.h>
#endif

#define CG_MAX_EVENTS 64
#define CG_LABEL "xfprof "

void callgrind_label(const probe_range *r, char *buf, size_t len) {
    snprintf(buf, len, CG_LABEL "%d %d %d %" PRId64, (int)r->phase, r->layer, (int)r->kind, r->step);
}

/* ---- the dump parser (pure) ---- */

typedef struct cg_state {
    int in_part;
    callgrind_part part;
    int n_events;
    int ev[CG_MAX_EVENTS]; /* the value an event adds to, -1 none */
} cg_state;

static int event_slot(const char *name, size_t n) {
    static const struct {
        const char *name;
        int slot;
    } map[] = {{"Ir", CALLGRIND_IR},         {"I1mr", CALLGRIND_L1_MISSES}, {"D1mr", CALLGRIND_L1_MISSES},
               {"D1mw", CALLGRIND_L1_MISSES}, {"ILmr", CALLGRIND_LL_MISSES}, {"DLmr", CALLGRIND_LL_MISSES},
               {"DLmw", CALLGRIND_LL_MISSES}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strlen(map[i].name) == n && !memcmp(map[i].name, name, n)) return map[i].slot;
    return -1;
}

/* Parses the label after "Client Request: " (NUL-terminated copy). 1: ours, 0: another's, -1 ours
 * but out of range. */
static int parse_label(const char *s, probe_range *r) {
    if (strncmp(s, CG_LABEL, strlen(CG_LABEL)) != 0) return 0;
    int ph, layer, kind, n = 0;
    long long step;
    if (sscanf(s + strlen(CG_LABEL), "%d %d %d %lld%n", &ph, &layer, &kind, &step, &n) != 4) return -1;
    if (s[strlen(CG_LABEL) + (size_t)n] != '\0') return -1;
    if (ph < 0 || ph >= XF_PHASE_COUNT || layer < -1 || layer > 100000 || kind < 0 || kind >= OP_KIND_COUNT || step < 0)
        return -1;
    r->phase = (xf_phase)ph;
    r->layer = layer;
    r->kind = (op_kind)kind;
    r->step = step;
    return 1;
}

/* One line (without its newline, NUL-terminated). */
static xf_status parse_line(cg_state *st, char *line, int64_t lineno, callgrind_part_fn fn, void *ctx) {
    if (!strncmp(line, "part:", 5)) {
        memset(st, 0, sizeof *st);
        st->in_part = 1;
        return XF_OK;
    }
    if (!st->in_part) return XF_OK; /* the file header */
    static const char trig[] = "desc: Trigger: Client Request: ";
    if (!strncmp(line, trig, sizeof trig - 1)) {
        int k = parse_label(line + sizeof trig - 1, &st->part.range);
        if (k < 0) return xf_errorf(XF_EPARSE, "callgrind dump line %" PRId64 ": label '%.80s' is not a valid xfprof range", lineno, line + sizeof trig - 1);
        st->part.has_range = k;
        return XF_OK;
    }
    if (!strncmp(line, "events:", 7)) {
        st->n_events = 0;
        char *p = line + 7;
        while (*p) {
            while (*p == ' ' || *p == '\t') p++;
            if (!*p) break;
            char *e = p;
            while (*e && *e != ' ' && *e != '\t') e++;
            if (st->n_events == CG_MAX_EVENTS) return xf_errorf(XF_EPARSE, "callgrind dump line %" PRId64 ": more than %d events", lineno, CG_MAX_EVENTS);
            int slot = event_slot(p, (size_t)(e - p));
            if (slot == CALLGRIND_L1_MISSES || slot == CALLGRIND_LL_MISSES) st->part.has_cache = 1;
            st->ev[st->n_events++] = slot;
            p = e;
        }
        return XF_OK;
    }
    if (!strncmp(line, "totals:", 7)) {
        if (st->n_events == 0) return xf_errorf(XF_EPARSE, "callgrind dump line %" PRId64 ": totals before any events line", lineno);
        char *p = line + 7;
        for (int i = 0; i < st->n_events; i++) { /* callgrind leaves out trailing zeros */
            while (*p == ' ' || *p == '\t') p++;
            if (!*p) break;
            if (*p < '0' || *p > '9') return xf_errorf(XF_EPARSE, "callgrind dump line %" PRId64 ": totals value %d is not a count", lineno, i + 1);
            errno = 0;
            char *e;
            unsigned long long v = strtoull(p, &e, 10);
            if (errno || (*e && *e != ' ' && *e != '\t')) return xf_errorf(XF_EPARSE, "callgrind dump line %" PRId64 ": totals value %d is not a count", lineno, i + 1);
            if (st->ev[i] >= 0) st->part.v[st->ev[i]] += (double)v;
            p = e;
        }
        while (*p == ' ' || *p == '\t') p++;
        if (*p) return xf_errorf(XF_EPARSE, "callgrind dump line %" PRId64 ": more totals than events", lineno);
        st->in_part = 0;
        return fn(ctx, &st->part);
    }
    return XF_OK;
}

xf_status callgrind_parse(const char *buf, size_t len, callgrind_part_fn fn, void *ctx, size_t *used) {
    *used = 0;
    cg_state st;
    memset(&st, 0, sizeof st);
    char line[1024];
    size_t pos = 0;
    int64_t lineno = 0;
    while (pos < len) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        if (!nl) break; /* a line still being written */
        size_t n = (size_t)(nl - (buf + pos));
        lineno++;
        int is_part = n >= 5 && !memcmp(buf + pos, "part:", 5);
        /* only the lines the parser reads matter; a long cost line is skipped whole */
        size_t keep = n < sizeof line - 1 ? n : sizeof line - 1;
        memcpy(line, buf + pos, keep);
        line[keep] = '\0';
        if (memchr(line, '\0', keep)) return xf_errorf(XF_EPARSE, "callgrind dump line %" PRId64 ": a NUL byte", lineno);
        int was_in = st.in_part;
        xf_status s = parse_line(&st, line, lineno, fn, ctx);
        if (s) return s;
        pos += n + 1;
        if (was_in && !st.in_part) *used = pos; /* a part completed */
        else if (!st.in_part && !is_part) *used = pos;
    }
    return XF_OK;
}

/* ---- the test hook ---- */

xf_status callgrind_test_extra_parse(const char *s, callgrind_test_extra *out) {
    memset(out, 0, sizeof *out);
    const char *slash = s ? strchr(s, '/') : NULL, *colon = s ? strrchr(s, ':') : NULL;
    if (!slash || !colon || colon < slash)
        return xf_errorf(XF_EINVAL, "XFPROF_TEST_EXTRA_INSTR: '%s' is not phase/op:iterations (decode/down:5000)", s ? s : "");
    char ph[16], op[32];
    size_t np = (size_t)(slash - s), no = (size_t)(colon - slash - 1);
    if (np >= sizeof ph || no >= sizeof op) return xf_errorf(XF_EINVAL, "XFPROF_TEST_EXTRA_INSTR: '%s': phase or op too long", s);
    memcpy(ph, s, np);
    ph[np] = '\0';
    memcpy(op, slash + 1, no);
    op[no] = '\0';
    if (!strcmp(ph, "prefill")) out->phase = XF_PREFILL;
    else if (!strcmp(ph, "decode")) out->phase = XF_DECODE;
    else return xf_errorf(XF_EINVAL, "XFPROF_TEST_EXTRA_INSTR: phase '%s' is not prefill or decode", ph);
    if (op_kind_parse(op, &out->kind) != XF_OK) return xf_errorf(XF_EINVAL, "XFPROF_TEST_EXTRA_INSTR: '%s' is not an op name", op);
    char *e;
    errno = 0;
    long long n = strtoll(colon + 1, &e, 10);
    if (errno || *e || e == colon + 1 || n < 1 || n > 1000000000LL)
        return xf_errorf(XF_EINVAL, "XFPROF_TEST_EXTRA_INSTR: iterations '%s' not in 1..1000000000", colon + 1);
    out->iters = n;
    out->on = 1;
    return XF_OK;
}

/* ---- the probe ---- */

struct callgrind_probe {
    char path[4096];
    long offset;       /* bytes of the dump file consumed */
    int cache;
    callgrind_test_extra extra;
    range_table rt;    /* CALLGRIND_VALUE_COUNT values per range */
    int keep;          /* the repetition being parsed is kept (not a warm-up) */
    char *buf;         /* read buffer (cap bytes) */
    size_t cap;
};

int callgrind_probe_built(void) {
#ifdef XFPROF_HAVE_VALGRIND
    return 1;
#else
    return 0;
#endif
}

int callgrind_running(void) {
#ifdef XFPROF_HAVE_VALGRIND
    return RUNNING_ON_VALGRIND ? 1 : 0;
#else
    return 0;
#endif
}

void callgrind_probe_free(callgrind_probe *p) {
    if (!p) return;
    range_table_free(&p->rt);
    free(p->buf);
    free(p);
}

static xf_status add_part(void *ctx, const callgrind_part *part) {
    callgrind_probe *p = ctx;
    if (!part->has_range || !p->keep) return XF_OK;
    int64_t k = range_table_key(&p->rt, part->range.phase, part->range.layer, part->range.kind);
    if (k < 0) return xf_errorf(XF_EPARSE, "callgrind dump: range layer %d outside the model's layers", part->range.layer);
    range_table_add(&p->rt, k, part->range.step, part->v);
    return XF_OK;
}

/* Reads what the dumps appended since the last call and adds the complete parts. */
static xf_status read_dumps(callgrind_probe *p) {
    FILE *f = fopen(p->path, "rb");
    if (!f) return xf_errorf(XF_EIO, "callgrind probe: cannot read the dump file %s: %s", p->path, strerror(errno));
    xf_status s = XF_OK;
    if (fseek(f, p->offset, SEEK_SET) != 0) {
        fclose(f);
        return xf_errorf(XF_EIO, "callgrind probe: cannot seek in %s: %s", p->path, strerror(errno));
    }
    size_t n = 0;
    for (;;) {
        if (n == p->cap) {
            size_t nc = p->cap ? p->cap * 2 : (size_t)1 << 20;
            char *nb = realloc(p->buf, nc);
            if (!nb) {
                fclose(f);
                return xf_errorf(XF_ENOMEM, "callgrind probe: out of memory reading %s", p->path);
            }
            p->buf = nb;
            p->cap = nc;
        }
        size_t got = fread(p->buf + n, 1, p->cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) s = xf_errorf(XF_EIO, "callgrind probe: error reading %s", p->path);
    fclose(f);
    if (s) return s;
    size_t used = 0;
    s = callgrind_parse(p->buf, n, add_part, p, &used);
    if (s) return xf_error_prefix(s, "%s: ", p->path);
    p->offset += (long)used;
    return XF_OK;
}

static volatile uint64_t cg_sink;

/* The test hook's work: on x86-64 exactly 2 instructions per iteration (dec, jnz), elsewhere a
 * loop of a few. */
static void extra_work(int64_t iters) {
#if defined(__x86_64__)
    uint64_t n = (uint64_t)iters;
    __asm__ volatile("1: dec %0\n\tjnz 1b" : "+r"(n) : : "cc");
#else
    for (int64_t i = 0; i < iters; i++) cg_sink = cg_sink + (uint64_t)i;
#endif
}

static void cg_begin(void *ctx, const probe_range *r) {
    callgrind_probe *p = ctx;
    int extra = p->extra.on && r->phase == p->extra.phase && r->kind == p->extra.kind; /* decided before counting */
#ifdef XFPROF_HAVE_VALGRIND
    CALLGRIND_TOGGLE_COLLECT;
#endif
    if (extra) extra_work(p->extra.iters);
}

static void cg_end(void *ctx, const probe_range *r) {
    (void)ctx;
    (void)r;
#ifdef XFPROF_HAVE_VALGRIND
    CALLGRIND_TOGGLE_COLLECT;
    char label[96];
    callgrind_label(r, label, sizeof label);
    CALLGRIND_DUMP_STATS_AT(label);
#endif
}

static void cg_free_ctx(void *ctx) { callgrind_probe_free(ctx); }

static xf_status cg_point_begin(void *ctx, const struct record_point *pt) {
    (void)pt;
    callgrind_probe *p = ctx;
    p->keep = 0;
    xf_status s = read_dumps(p); /* skip whatever was dumped before the point */
    range_table_clear(&p->rt);
    return s;
}

static void cg_rep_begin(void *ctx) {
    callgrind_probe *p = ctx;
    range_table_rep_begin(&p->rt);
}

static xf_status cg_rep_end(void *ctx, int rep) {
    callgrind_probe *p = ctx;
    p->keep = rep >= 0;
    xf_status s = read_dumps(p);
    p->keep = 0;
    if (s || rep < 0) return s;
    s = range_table_rep_end(&p->rt, 0);
    return s ? xf_error_prefix(s, "callgrind: ") : XF_OK;
}

xf_status callgrind_probe_init(int64_t n_layers, int max_reps, const char *out_path, int cache,
                               const callgrind_test_extra *extra, callgrind_probe **out) {
    *out = NULL;
    if (!callgrind_probe_built())
        return xf_errorf(XF_EUNSUPPORTED, "this build has no callgrind probe (valgrind/callgrind.h was not found when it was "
                                          "built, or a sanitizer build): install valgrind (apt-get install valgrind) and rebuild");
    if (!callgrind_running()) return xf_errorf(XF_EUNSUPPORTED, "the callgrind probe needs the process to run under valgrind --tool=callgrind");
    if (!out_path || !*out_path || strlen(out_path) >= sizeof ((callgrind_probe *)0)->path)
        return xf_errorf(XF_EINVAL, "callgrind probe: no (or too long a) dump file path");
    callgrind_probe *p = calloc(1, sizeof *p);
    if (!p) return xf_errorf(XF_ENOMEM, "callgrind probe: out of memory");
    snprintf(p->path, sizeof p->path, "%s", out_path);
    p->cache = cache;
    if (extra) p->extra = *extra;
    xf_status s = range_table_init(&p->rt, n_layers, CALLGRIND_VALUE_COUNT, max_reps);
    if (s) {
        callgrind_probe_free(p);
        return xf_error_prefix(s, "callgrind: ");
    }
    FILE *f = fopen(out_path, "rb");
    if (f) { /* start at its end: the parts so far are the program's start */
        if (fseek(f, 0, SEEK_END) == 0) p->offset = ftell(f);
        fclose(f);
    }
    if (p->offset < 0) p->offset = 0;
    *out = p;
    return XF_OK;
}

probe callgrind_probe_as_probe(callgrind_probe *p) {
    probe pr = {"callgrind", p, cg_begin, cg_end, cg_free_ctx, cg_point_begin, cg_rep_begin, cg_rep_end, NULL, NULL};
    return pr;
}

static void set_counter(record_op *op, const char *name, double value) {
    int i = 0;
    while (i < op->n_counters && strcmp(op->counters[i].name, name) != 0) i++;
    if (i == op->n_counters) {
        if (op->n_counters >= RECORD_MAX_COUNTERS) return;
        op->n_counters++;
    }
    record_counter *c = &op->counters[i];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->supported = 1;
    c->value = value;
}

void callgrind_probe_fill(const callgrind_probe *p, record_op *op) {
    if (!p) return;
    int64_t k = range_table_key(&p->rt, op->cost.phase, op->cost.layer, op->cost.kind);
    static const char *names[CALLGRIND_VALUE_COUNT] = {"instructions", "sim_l1_misses", "sim_ll_misses"};
    for (int v = 0; v < (p->cache ? CALLGRIND_VALUE_COUNT : 1); v++) {
        const double *smp;
        int n = range_table_samples(&p->rt, k, v, &smp);
        if (n <= 0) return;
        double med, iqr;
        timer_stats(smp, n, &med, &iqr);
        set_counter(op, names[v], med);
    }
}
