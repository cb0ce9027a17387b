/* Nsight Systems SQLite exports -> records (importer.h). Read with SQLite's own library, read-only.
 * Tables and columns as the Nsight Systems SQLite schema reference names them: StringIds(id,
 * value); CUPTI_ACTIVITY_KIND_KERNEL(start, end, correlationId, shortName); CUPTI_ACTIVITY_KIND_
 * RUNTIME(start, correlationId, globalTid); NVTX_EVENTS(start, end, eventType, text, textId,
 * globalTid), eventType 59 a push/pop range and 60 a start/end range. Times are nanoseconds. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importer.h"

#define MAX_ROWS ((int64_t)1 << 26)

typedef struct ns_range {
    int64_t start, end, tid;
    int32_t op;   /* op index of its name */
    int64_t slot; /* the op's sample this instance sums into, -1 before its first kernel */
} ns_range;

typedef struct ns_launch {
    int64_t corr, tid, start;
} ns_launch;

typedef struct ns_op {
    char name[96];
    op_kind kind;
    int64_t n, cap;
    double *t;         /* (n) seconds per instance */
} ns_op;

typedef struct ns_ctx {
    const char *path;
    sqlite3 *db;
    ns_op *ops;
    int64_t n_ops, cap_ops;
} ns_ctx;

static int cmp_range(const void *a, const void *b) {
    const ns_range *x = a, *y = b;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->end > y->end ? -1 : x->end < y->end;
}

static int cmp_launch(const void *a, const void *b) {
    const ns_launch *x = a, *y = b;
    return x->corr < y->corr ? -1 : x->corr > y->corr;
}

/* Room for one more element in *arr (n used of *cap): 0, or -1 on OOM or past MAX_ROWS. */
static int grow(void **arr, int64_t n, int64_t *cap, size_t elem) {
    if (n < *cap) return 0;
    int64_t c = *cap ? *cap * 2 : 1024;
    void *x = c <= MAX_ROWS ? realloc(*arr, (size_t)c * elem) : NULL;
    if (!x) return -1;
    *arr = x;
    *cap = c;
    return 0;
}

static int table_exists(sqlite3 *db, const char *name) {
    sqlite3_stmt *st;
    int found = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?1", -1, &st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) found = 1;
    else if (rc != SQLITE_DONE) found = -1;
    sqlite3_finalize(st);
    return found;
}

static xf_status sql_error(ns_ctx *c, const char *what) {
    return xf_errorf(XF_EINVAL, "%s: %s: %s (is this an nsys export --type sqlite file?)", c->path, what, sqlite3_errmsg(c->db));
}

/* The op called `name` (added on first use). */
static int32_t op_of(ns_ctx *c, const char *name, const import_kernel_map *m) {
    char nm[96];
    if (strlen(name) < sizeof nm) snprintf(nm, sizeof nm, "%s", name);
    else snprintf(nm, sizeof nm, "%.*s~", (int)sizeof nm - 2, name);
    for (int64_t i = 0; i < c->n_ops; i++)
        if (strcmp(c->ops[i].name, nm) == 0) return (int32_t)i;
    if (c->n_ops == 100000) return -1;
    if (c->n_ops == c->cap_ops) {
        int64_t cap = c->cap_ops ? c->cap_ops * 2 : 64;
        ns_op *o = realloc(c->ops, (size_t)cap * sizeof *o);
        if (!o) return -1;
        c->ops = o;
        c->cap_ops = cap;
    }
    ns_op *o = &c->ops[c->n_ops];
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", nm);
    o->kind = import_kernel_map_find(m, name);
    return (int32_t)c->n_ops++;
}

/* Adds `secs` to sample *slot of op o, a new sample when *slot is -1. */
static int op_add(ns_op *o, int64_t *slot, double secs) {
    if (*slot >= 0) {
        o->t[*slot] += secs;
        return 0;
    }
    if (o->n == 1000000) return -1;
    if (o->n == o->cap) {
        int64_t cap = o->cap ? o->cap * 2 : 16;
        double *t = realloc(o->t, (size_t)cap * sizeof *t);
        if (!t) return -1;
        o->t = t;
        o->cap = cap;
    }
    *slot = o->n;
    o->t[o->n++] = secs;
    return 0;
}

xf_status import_nsys_sqlite_file(const char *path, const import_kernel_map *m, record *out, import_stats *st) {
    record_init(out, "import");
    import_stats local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    ns_ctx c = {path, NULL, NULL, 0, 0};
    ns_range *rg = NULL;
    ns_launch *ln = NULL;
    int64_t n_rg = 0, n_ln = 0, cap;
    sqlite3_stmt *q = NULL;
    xf_status s = XF_OK;
    if (sqlite3_open_v2(path, &c.db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        s = xf_errorf(XF_EIO, "%s: cannot open: %s", path, c.db ? sqlite3_errmsg(c.db) : "out of memory");
        goto done;
    }
    int have_k = table_exists(c.db, "CUPTI_ACTIVITY_KIND_KERNEL");
    if (have_k < 0) {
        s = xf_errorf(XF_EINVAL, "%s: not an SQLite database (%s): export the report with nsys export --type sqlite", path,
                      sqlite3_errmsg(c.db));
        goto done;
    }
    if (!have_k) {
        s = xf_errorf(XF_EINVAL, "%s: no table CUPTI_ACTIVITY_KIND_KERNEL: the report has no GPU kernels (profile with "
                                 "nsys profile --trace cuda,nvtx)", path);
        goto done;
    }
    /* Launches: correlationId -> the thread and time of the runtime call. */
    if (table_exists(c.db, "CUPTI_ACTIVITY_KIND_RUNTIME") == 1) {
        if (sqlite3_prepare_v2(c.db, "SELECT correlationId, globalTid, start FROM CUPTI_ACTIVITY_KIND_RUNTIME", -1, &q, NULL) != SQLITE_OK) {
            s = sql_error(&c, "reading CUPTI_ACTIVITY_KIND_RUNTIME");
            goto done;
        }
        cap = 0;
        int rc;
        while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
            if (grow((void **)&ln, n_ln, &cap, sizeof *ln)) {
                s = xf_errorf(XF_ENOMEM, "%s: out of memory (or more than %lld runtime calls)", path, (long long)MAX_ROWS);
                goto done;
            }
            ln[n_ln++] = (ns_launch){sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 1), sqlite3_column_int64(q, 2)};
        }
        if (rc != SQLITE_DONE) {
            s = sql_error(&c, "reading CUPTI_ACTIVITY_KIND_RUNTIME");
            goto done;
        }
        sqlite3_finalize(q);
        q = NULL;
        if (n_ln > 0) qsort(ln, (size_t)n_ln, sizeof *ln, cmp_launch);
    }
    /* NVTX ranges, nested per thread. */
    if (table_exists(c.db, "NVTX_EVENTS") == 1) {
        const char *sql = table_exists(c.db, "StringIds") == 1
                              ? "SELECT n.start, n.end, n.globalTid, COALESCE(n.text, s.value, '') FROM NVTX_EVENTS n "
                                "LEFT JOIN StringIds s ON s.id = n.textId WHERE n.end IS NOT NULL AND n.eventType IN (59, 60)"
                              : "SELECT start, end, globalTid, COALESCE(text, '') FROM NVTX_EVENTS "
                                "WHERE end IS NOT NULL AND eventType IN (59, 60)";
        if (sqlite3_prepare_v2(c.db, sql, -1, &q, NULL) != SQLITE_OK) {
            s = sql_error(&c, "reading NVTX_EVENTS");
            goto done;
        }
        cap = 0;
        int rc;
        while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
            if (grow((void **)&rg, n_rg, &cap, sizeof *rg)) {
                s = xf_errorf(XF_ENOMEM, "%s: out of memory (or more than %lld NVTX ranges)", path, (long long)MAX_ROWS);
                goto done;
            }
            const unsigned char *txt = sqlite3_column_text(q, 3);
            int64_t a = sqlite3_column_int64(q, 0), b = sqlite3_column_int64(q, 1);
            if (b < a) {
                s = xf_errorf(XF_EINVAL, "%s: an NVTX range ('%.60s') ends before it starts: the export is damaged", path,
                              txt ? (const char *)txt : "");
                goto done;
            }
            int32_t op = op_of(&c, txt && *txt ? (const char *)txt : "(unnamed NVTX range)", m);
            if (op < 0) {
                s = xf_errorf(XF_ENOMEM, "%s: out of memory (or more than 100000 distinct names)", path);
                goto done;
            }
            rg[n_rg++] = (ns_range){a, b, sqlite3_column_int64(q, 2), op, -1};
        }
        if (rc != SQLITE_DONE) {
            s = sql_error(&c, "reading NVTX_EVENTS");
            goto done;
        }
        sqlite3_finalize(q);
        q = NULL;
        if (n_rg > 0) qsort(rg, (size_t)n_rg, sizeof *rg, cmp_range);
    }
    /* Kernels, in time order: each to the innermost range around its launch, else its own name. */
    const char *ksql = table_exists(c.db, "StringIds") == 1
                           ? "SELECT k.start, k.end, k.correlationId, COALESCE(s.value, '') FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                             "LEFT JOIN StringIds s ON s.id = k.shortName ORDER BY k.start"
                           : "SELECT start, end, correlationId, '' FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start";
    if (sqlite3_prepare_v2(c.db, ksql, -1, &q, NULL) != SQLITE_OK) {
        s = sql_error(&c, "reading CUPTI_ACTIVITY_KIND_KERNEL");
        goto done;
    }
    int rc;
    int64_t kidx = 0, lo_t = INT64_MAX, hi_t = INT64_MIN, in_range = 0;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        int64_t a = sqlite3_column_int64(q, 0), b = sqlite3_column_int64(q, 1), corr = sqlite3_column_int64(q, 2);
        const unsigned char *kn = sqlite3_column_text(q, 3);
        if (b < a) {
            s = xf_errorf(XF_EINVAL, "%s: kernel '%.60s' ends before it starts (negative duration): the export is damaged", path,
                          kn ? (const char *)kn : "");
            goto done;
        }
        if (kidx == MAX_ROWS) {
            s = xf_errorf(XF_EINVAL, "%s: more than %lld kernels", path, (long long)MAX_ROWS);
            goto done;
        }
        int64_t own_slot = -1, *slot = &own_slot;
        int32_t op = -1;
        /* the launch, then the innermost range of its thread around it */
        int64_t l0 = 0, l1 = n_ln;
        while (l0 < l1) {
            int64_t mid = (l0 + l1) / 2;
            if (ln[mid].corr < corr) l0 = mid + 1;
            else l1 = mid;
        }
        if (l0 < n_ln && ln[l0].corr == corr && n_rg > 0) {
            ns_range key = {ln[l0].start, INT64_MIN, ln[l0].tid, 0, -1};
            int64_t r0 = 0, r1 = n_rg; /* last range with (tid, start) <= (tid, t) */
            while (r0 < r1) {
                int64_t mid = (r0 + r1) / 2;
                const ns_range *x = &rg[mid];
                if (x->tid < key.tid || (x->tid == key.tid && x->start <= key.start)) r0 = mid + 1;
                else r1 = mid;
            }
            for (int64_t r = r0 - 1, steps = 0; r >= 0 && rg[r].tid == key.tid && steps < 100000; r--, steps++)
                if (rg[r].end >= key.start) {
                    op = rg[r].op;
                    slot = &rg[r].slot;
                    break;
                }
        }
        if (op >= 0) in_range++;
        else {
            op = op_of(&c, kn && *kn ? (const char *)kn : "(unnamed kernel)", m);
        }
        if (op < 0 || op_add(&c.ops[op], slot, (double)(b - a) * 1e-9)) {
            s = xf_errorf(XF_ENOMEM, "%s: out of memory (or more than a million instances of one op)", path);
            goto done;
        }
        st->busy_s += (double)(b - a) * 1e-9;
        if (a < lo_t) lo_t = a;
        if (b > hi_t) hi_t = b;
        kidx++;
    }
    if (rc != SQLITE_DONE) {
        s = sql_error(&c, "reading CUPTI_ACTIVITY_KIND_KERNEL");
        goto done;
    }
    if (kidx == 0) {
        s = xf_errorf(XF_EINVAL, "%s: the kernel table is empty: nothing ran on the GPU while profiling", path);
        goto done;
    }
    record_point *pt = record_add_point(out);
    if (!pt || !(pt->ops = calloc((size_t)c.n_ops, sizeof *pt->ops))) {
        s = xf_errorf(XF_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    for (int64_t i = 0; i < c.n_ops; i++) {
        ns_op *o = &c.ops[i];
        if (o->n == 0) continue; /* a range with no kernel in it */
        record_op *r = &pt->ops[pt->n_ops++];
        r->cost.phase = XF_DECODE;
        r->cost.layer = -1;
        r->cost.kind = o->kind;
        r->cost.compute = XF_COMPUTE_FP32;
        r->measured = 1;
        r->n_samples = (int)o->n;
        r->samples_s = o->t;
        o->t = NULL;
        r->bound = XF_BOUND_UNKNOWN; /* an export has no FLOPs or bytes */
        snprintf(r->source, sizeof r->source, "%s", o->name);
        st->n_unknown++;
    }
    snprintf(out->model.name, sizeof out->model.name, "nsys");
    snprintf(out->model.arch, sizeof out->model.arch, "import");
    out->model.n_layers = out->model.d_model = out->model.n_heads = out->model.n_kv_heads = out->model.head_dim = 1;
    out->model.d_ff = out->model.vocab = out->model.max_ctx = 1;
    pt->wl.batch = pt->wl.prompt = 1;
    pt->wl.gen = 2;
    pt->wl.wdtype = pt->wl.adtype = pt->wl.kvdtype = XF_BF16;
    st->window_s = (double)(hi_t - lo_t) * 1e-9;
    st->idle_s = st->window_s > st->busy_s ? st->window_s - st->busy_s : 0;
    st->unknown_s = st->busy_s;
    st->n_kernels = kidx;
    st->n_events = kidx + n_rg + n_ln;
    st->n_steps[XF_DECODE] = 1;
    snprintf(st->time_level, sizeof st->time_level, "kernel (GPU kernels, to the innermost NVTX range around their launch)");
    (void)in_range;
done:
    if (q) sqlite3_finalize(q);
    if (c.db) sqlite3_close(c.db);
    for (int64_t i = 0; i < c.n_ops; i++) free(c.ops[i].t);
    free(c.ops);
    free(rg);
    free(ln);
    if (s) {
        record_free(out);
        record_init(out, "import");
    }
    return s;
}
