#include "sweep_store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyzers/advice.h"
#include "core/cleanup.h"
#include "reports/record_json.h"

static int group_of(const sweep_store *st, const sweep_param *p) { return p->model * st->n_devices + p->device; }

xf_status sweep_store_init(sweep_store *st, const sweep_param *ps, int64_t n, int n_devices, int full, const char *tmpdir,
                           const char *out_path) {
    memset(st, 0, sizeof *st);
    st->out_path = out_path && strcmp(out_path, "-") ? out_path : "the record";
    st->spool = -1;
    st->n = n;
    st->n_devices = n_devices;
    st->full = full;
    int max_group = 0;
    for (int64_t i = 0; i < n; i++) max_group = group_of(st, &ps[i]) > max_group ? group_of(st, &ps[i]) : max_group;
    st->n_groups = max_group + 1;
    st->heads = calloc((size_t)st->n_groups, sizeof *st->heads);
    st->have = calloc((size_t)st->n_groups, 1);
    st->latest = calloc((size_t)st->n_groups, sizeof *st->latest);
    st->rank = calloc((size_t)(n > 0 ? n : 1), sizeof *st->rank);
    st->pts = calloc((size_t)(n > 0 ? n : 1), sizeof *st->pts);
    st->off = malloc((size_t)(n > 0 ? n : 1) * sizeof *st->off);
    st->len = calloc((size_t)(n > 0 ? n : 1), sizeof *st->len);
    int64_t *count = calloc((size_t)st->n_groups, sizeof *count);
    if (!st->heads || !st->have || !st->latest || !st->rank || !st->pts || !st->off || !st->len || !count) {
        free(count);
        return xf_errorf(XF_ENOMEM, "out of memory for %lld points", (long long)n);
    }
    for (int64_t i = 0; i < n; i++) {
        st->rank[i] = count[group_of(st, &ps[i])]++;
        st->off[i] = -1;
    }
    free(count);
    if (full) return XF_OK;
    snprintf(st->spool_path, sizeof st->spool_path, "%.4000s/xfprof-sweep-points-XXXXXX", tmpdir);
    st->spool = mkstemp(st->spool_path);
    if (st->spool < 0) return xf_errorf(XF_EIO, "cannot make a temporary file in %s: %s", tmpdir, strerror(errno));
    if (cleanup_add(st->spool_path, 0) != XF_OK) xf_error_clear(); /* a signal removes it too */
    return XF_OK;
}

xf_status sweep_store_put(sweep_store *st, const sweep_param *ps, int64_t i, record *r) {
    if (r->n_points != 1) return xf_errorf(XF_EINVAL, "a sweep point's record holds %d points, not 1", r->n_points);
    int g = group_of(st, &ps[i]);
    record_point *p = &r->points[0];
    if (!st->full) {
        char *text = NULL;
        xf_status s = record_point_json_text(p, &text);
        if (s) return s;
        size_t len = strlen(text), done = 0;
        while (done < len) {
            ssize_t w = pwrite(st->spool, text + done, len - done, (off_t)(st->spool_end + (int64_t)done));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) {
                int e = errno;
                free(text);
                return xf_errorf(XF_EIO, "cannot write %s: its points go through %s first: %s", st->out_path, st->spool_path,
                                 strerror(e));
            }
            done += (size_t)w;
        }
        free(text);
        st->off[i] = st->spool_end;
        st->len[i] = (int64_t)len;
        st->spool_end += (int64_t)len;
        if (st->rank[i] >= ADVICE_MAX_POINTS) { /* on disk now; memory keeps what the summary needs */
            for (int64_t k = 0; k < p->n_ops; k++) free(p->ops[k].samples_s);
            free(p->ops);
            free(p->tokens);
            p->ops = NULL;
            p->n_ops = 0;
            p->tokens = NULL;
            p->n_seqs = p->n_tokens_per_seq = 0;
        }
    }
    if (strcmp(r->created, st->latest[g]) > 0) snprintf(st->latest[g], sizeof st->latest[g], "%s", r->created); /* ISO 8601 */
    st->pts[i] = *p;
    memset(p, 0, sizeof *p);
    record_free(r); /* frees the emptied point array and any kv section */
    if (!st->have[g]) {
        st->heads[g] = *r; /* header only: record_free left no owned pointer in it */
        st->have[g] = 1;
    }
    return XF_OK;
}

xf_status sweep_store_assemble(sweep_store *st, const sweep_param *ps, const unsigned char *done, int model, int dev,
                               record *out, int64_t **idx) {
    record_init(out, "sweep");
    *idx = NULL;
    int g = model * st->n_devices + dev;
    if (g < st->n_groups && st->have[g]) {
        *out = st->heads[g];
        out->points = NULL;
        out->n_points = 0;
        out->kv = NULL;
    }
    snprintf(out->kind, sizeof out->kind, "sweep");
    int64_t m = 0;
    for (int64_t i = 0; i < st->n; i++) m += done[i] && ps[i].model == model && ps[i].device == dev;
    *idx = malloc((size_t)(m > 0 ? m : 1) * sizeof **idx);
    if (!*idx) return xf_errorf(XF_ENOMEM, "out of memory assembling the sweep record");
    for (int64_t i = 0; i < st->n; i++) {
        if (!done[i] || ps[i].model != model || ps[i].device != dev) continue;
        record_point *p = record_add_point(out);
        if (!p) return xf_errorf(XF_ENOMEM, "out of memory assembling the sweep record");
        (*idx)[out->n_points - 1] = i;
        *p = st->pts[i];
        memset(&st->pts[i], 0, sizeof st->pts[i]); /* ownership moved */
    }
    if (g < st->n_groups && st->latest[g][0]) snprintf(out->created, sizeof out->created, "%s", st->latest[g]);
    else record_stamp_time(out);
    return XF_OK;
}

typedef struct spool_reader {
    sweep_store *st;
    const int64_t *idx;
} spool_reader;

static xf_status spool_point(void *ctx, int64_t j, const char **text, size_t *len) {
    spool_reader *r = ctx;
    sweep_store *st = r->st;
    int64_t i = r->idx[j];
    if (st->off[i] < 0) return xf_errorf(XF_EINVAL, "sweep point %lld is not in the spool", (long long)i + 1);
    size_t n = (size_t)st->len[i];
    if (n + 1 > st->buf_cap) {
        char *nb = realloc(st->buf, n + 1);
        if (!nb) return xf_errorf(XF_ENOMEM, "out of memory writing the sweep record");
        st->buf = nb;
        st->buf_cap = n + 1;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(st->spool, st->buf + got, n - got, (off_t)(st->off[i] + (int64_t)got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return xf_errorf(XF_EIO, "cannot read the sweep's points back from %s: %s", st->spool_path, k < 0 ? strerror(errno) : "short read");
        got += (size_t)k;
    }
    *text = st->buf;
    *len = n;
    return XF_OK;
}

xf_status sweep_store_save(sweep_store *st, const record *rec, const int64_t *idx, const char *path) {
    if (st->full) return record_save(rec, path);
    spool_reader r = {st, idx};
    return record_save_stream(rec, rec->n_points, spool_point, &r, path);
}

void sweep_store_free(sweep_store *st) {
    if (!st) return;
    for (int64_t i = 0; st->pts && i < st->n; i++) {
        for (int64_t k = 0; k < st->pts[i].n_ops; k++) free(st->pts[i].ops[k].samples_s);
        free(st->pts[i].ops);
        free(st->pts[i].tokens);
    }
    if (st->spool >= 0) {
        close(st->spool);
        unlink(st->spool_path);
        cleanup_forget(st->spool_path);
    }
    free(st->heads);
    free(st->have);
    free(st->latest);
    free(st->rank);
    free(st->pts);
    free(st->off);
    free(st->len);
    free(st->buf);
    memset(st, 0, sizeof *st);
    st->spool = -1;
}
