/* The sweep's files: the JSONL checkpoint (one fsync'ed line per finished point, --resume), the
 * final records (one per model and device), and the test-only slow-op hook. */
#include "sweep_file.h"
#include "sweep_store.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analyzers/advice.h"
#include "cli.h"
#include "core/fileio.h"
#include "sweep_line.h"

static const char *CMD = "sweep";

#define MAX_JSONL_BYTES ((size_t)4 << 30)

/* ---------- the test-only hook: XFPROF_TEST_SLOW_OP=[phase/]op:factor ---------- */

/* See sweep_file.h. Test only: tests/cli_gate.sh, tests/cli_ab.sh and bench/ci_ab.sh set it. */
xf_status sweep_test_slow_op(record *r) {
    const char *spec = getenv("XFPROF_TEST_SLOW_OP");
    if (!spec || !*spec) return XF_OK;
    for (int i = 0; i < r->n_env; i++)
        if (strcmp(r->env[i].key, "test_slow_op") == 0) return XF_OK;
    char name[32];
    const char *colon = strrchr(spec, ':');
    double f = 0;
    char extra;
    if (!colon || (size_t)(colon - spec) >= sizeof name || sscanf(colon + 1, "%lf%c", &f, &extra) != 1 || !(f > 0) || !isfinite(f))
        return xf_errorf(XF_EINVAL, "XFPROF_TEST_SLOW_OP must be [phase/]op:factor, e.g. gate_up:1.3 or decode/*:1.1 (got '%.40s')",
                         spec);
    memcpy(name, spec, (size_t)(colon - spec));
    name[colon - spec] = '\0';
    int phase = -1; /* every phase */
    char *op_name = name, *slash = strchr(name, '/');
    if (slash) {
        *slash = '\0';
        op_name = slash + 1;
        for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
            if (strcmp(name, phase_name((xf_phase)ph)) == 0) phase = ph;
        if (phase < 0) return xf_errorf(XF_EINVAL, "XFPROF_TEST_SLOW_OP: unknown phase '%s' (prefill or decode)", name);
    }
    int every = strcmp(op_name, "*") == 0;
    op_kind kind = 0;
    if (!every) {
        xf_status s = op_kind_parse(op_name, &kind);
        if (s) return xf_error_prefix(s, "XFPROF_TEST_SLOW_OP: ");
    }
    for (int i = 0; i < r->n_points; i++) {
        record_point *p = &r->points[i];
        double added[XF_PHASE_COUNT] = {0, 0};
        /* the CPU step times (compare --ab) grow by the slowed ops' share of each repetition's step */
        double all_r[XF_PHASE_COUNT][RECORD_MAX_CPU_REPS] = {{0}}, sel_r[XF_PHASE_COUNT][RECORD_MAX_CPU_REPS] = {{0}};
        for (int64_t k = 0; k < p->n_ops; k++) {
            record_op *op = &p->ops[k];
            int sel = !((!every && op->cost.kind != kind) || (phase >= 0 && (int)op->cost.phase != phase));
            for (int j = 0; j < op->n_samples && j < p->n_cpu; j++) {
                all_r[op->cost.phase][j] += op->samples_s[j];
                if (sel) sel_r[op->cost.phase][j] += op->samples_s[j];
            }
        }
        for (int j = 0; j < p->n_cpu; j++) {
            if (all_r[XF_PREFILL][j] > 0) p->cpu_prefill_s[j] *= 1 + (f - 1) * sel_r[XF_PREFILL][j] / all_r[XF_PREFILL][j];
            if (all_r[XF_DECODE][j] > 0) p->cpu_decode_s[j] *= 1 + (f - 1) * sel_r[XF_DECODE][j] / all_r[XF_DECODE][j];
        }
        for (int64_t k = 0; k < p->n_ops; k++) {
            record_op *op = &p->ops[k];
            if ((!every && op->cost.kind != kind) || (phase >= 0 && (int)op->cost.phase != phase)) continue;
            added[op->cost.phase] += op->time_s * (f - 1);
            op->time_s *= f;
            if (!op->measured) op->predicted_time_s *= f;
            for (int j = 0; j < op->n_samples; j++) op->samples_s[j] *= f;
        }
        record_summary *sm = &p->summary;
        sm->prefill_time_s += added[XF_PREFILL];
        sm->decode_time_s += added[XF_DECODE];
        sm->ttft_s += added[XF_PREFILL];
        sm->tpot_s += added[XF_DECODE];
        double req = sm->ttft_s + (double)workload_decode_steps(&p->wl) * sm->tpot_s;
        sm->tokens_per_s = req > 0 ? (double)(p->wl.batch * p->wl.gen) / req : 0;
    }
    record_set_env(r, "test_slow_op", spec);
    return XF_OK;
}

/* ---------- the JSONL ---------- */

/* Writes the whole line and fsyncs. On failure the file is cut back to `good` bytes so that no
 * half line stays behind. XFPROF_TEST_SWEEP_SPLIT_MS (test only): writes the first half, syncs,
 * sleeps that long, then the rest -- so a test can kill the sweep in the middle of a line. */
xf_status sweep_append_line(int fd, const char *path, const char *line, size_t len, off_t *good) {
    const char *split = getenv("XFPROF_TEST_SWEEP_SPLIT_MS");
    long split_ms = split ? strtol(split, NULL, 10) : 0;
    size_t done = 0;
    while (done < len) {
        size_t chunk = len - done;
        if (split_ms > 0 && done == 0) chunk = len / 2;
        ssize_t w = write(fd, line + done, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            if (ftruncate(fd, *good) != 0) { /* best effort; the reader drops a truncated last line anyway */
            }
            return xf_errorf(XF_EIO, "cannot append to %s: %s (the points before are kept)", path, strerror(e));
        }
        done += (size_t)w;
        if (split_ms > 0 && done < len) {
            fsync(fd);
            struct timespec ts = {split_ms / 1000, (split_ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
            }
        }
    }
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
        int e = errno;
        if (ftruncate(fd, *good) != 0) {
        }
        return xf_errorf(XF_EIO, "cannot sync %s: %s", path, strerror(e));
    }
    *good += (off_t)len;
    return XF_OK;
}

/* Reads the JSONL for --resume: every complete line must be valid (else XF_EINVAL naming it); a
 * last line without its newline is an interrupted write, dropped (the file is cut back to the end
 * of the last complete line). Points whose key is in the grid go into the store (done[i]=1). */
xf_status sweep_resume_load(int fd, const char *path, const sweep_param *ps, int64_t n, sweep_store *store, unsigned char *done,
                            int64_t *n_resumed, off_t *good) {
    *n_resumed = 0;
    *good = 0;
    char *text = NULL;
    size_t len = 0;
    xf_status s = file_read_all(path, MAX_JSONL_BYTES, &text, &len);
    if (s) return s;
    size_t pos = 0;
    int64_t lineno = 0, foreign = 0, dups = 0;
    char key[SWEEP_KEY_LEN];
    while (pos < len) {
        char *nl = memchr(text + pos, '\n', len - pos);
        lineno++;
        if (!nl) {
            fprintf(stderr, "xfprof %s: %s: line %lld is incomplete (an interrupted write): dropped, its point runs again\n", CMD,
                    path, (long long)lineno);
            break;
        }
        size_t ll = (size_t)(nl - (text + pos));
        char ctx[64 + 32];
        snprintf(ctx, sizeof ctx, "%.60s line %lld", path, (long long)lineno);
        record r;
        s = sweep_line_parse(text + pos, ll, ctx, key, sizeof key, &r);
        if (s) {
            record_free(&r);
            free(text);
            return xf_error_prefix(s, "cannot resume: ");
        }
        int64_t i = 0;
        while (i < n && strcmp(ps[i].key, key) != 0) i++;
        if (i == n) {
            foreign++;
            record_free(&r);
        } else if (done[i]) {
            dups++;
            record_free(&r);
        } else {
            if ((s = sweep_store_put(store, ps, i, &r)) != XF_OK) {
                record_free(&r);
                free(text);
                return s;
            }
            done[i] = 1;
            (*n_resumed)++;
        }
        pos += ll + 1;
    }
    free(text);
    *good = (off_t)pos;
    if (ftruncate(fd, *good) != 0) return xf_errorf(XF_EIO, "cannot cut the incomplete line off %s: %s", path, strerror(errno));
    if (foreign)
        fprintf(stderr, "xfprof %s: note: %s has %lld points of other parameters: kept in the file, not in this sweep\n", CMD,
                path, (long long)foreign);
    if (dups) fprintf(stderr, "xfprof %s: note: %s repeats %lld points: the first of each is used\n", CMD, path, (long long)dups);
    return XF_OK;
}

/* ---------- the final record(s) ---------- */

static void sanitize(const char *s, char *out, size_t len) {
    const char *base = strrchr(s, '/');
    base = base && base[1] ? base + 1 : s;
    size_t j = 0;
    for (const char *c = base; *c && j + 1 < len; c++)
        out[j++] = ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' ||
                    *c == '-')
                       ? *c
                       : '_';
    out[j] = '\0';
}

const char *sweep_group_path(const char *path, const char *model, const char *dev, char *buf, size_t len) {
    char m[96], d[96];
    sanitize(model, m, sizeof m);
    sanitize(dev, d, sizeof d);
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(path, '.');
    if (dot && (!slash || dot > slash) && dot != path)
        snprintf(buf, len, "%.*s-%s-%s%s", (int)(dot - path), path, m, d, dot);
    else snprintf(buf, len, "%s-%s-%s", path, m, d);
    return buf;
}

int sweep_write_records(sweep_writer *w, const sweep_param *ps, const unsigned char *done, char *const *models, int nm,
                        char *const *devices, int nd, const sweep_shard *shard) {
    int rc = CLI_EXIT_OK;
    for (int im = 0; im < nm && rc == CLI_EXIT_OK; im++)
        for (int id = 0; id < nd && rc == CLI_EXIT_OK; id++) {
            record rec;
            int64_t *idx = NULL;
            xf_status s = sweep_store_assemble(w->store, ps, done, im, id, &rec, &idx);
            if (s == XF_OK && rec.n_points > 0) s = advice_record(&rec);
            if (s) {
                rc = cli_fail(w->cmd, s);
            } else if (rec.n_points == 0 && shard->count > 1) { /* nothing of this group in this shard */
                fprintf(stderr, "xfprof %s: note: shard %lld/%lld holds no point of %s on %s: no record for them\n", w->cmd,
                        (long long)shard->index, (long long)shard->count, models[im], devices[id]);
            } else {
                if (shard->count > 1) { /* a shard's record says which it is */
                    char sh[48];
                    sweep_shard_name(shard, sh, sizeof sh);
                    record_set_env(&rec, "shard", sh);
                }
                cli_output o = w->out;
                char path[4096];
                if (o.path && strcmp(o.path, "-") != 0 && nm * nd > 1)
                    o.path = sweep_group_path(w->out.path, models[im], devices[id], path, sizeof path);
                if (w->full) rc = cli_output_write(w->cmd, &rec, &o);
                else if ((s = sweep_store_save(w->store, &rec, idx, o.path)) != XF_OK) rc = cli_fail(w->cmd, s);
                else if (o.path && strcmp(o.path, "-") != 0)
                    fprintf(stderr, "xfprof %s: wrote the record of %d points to %s\n", w->cmd, rec.n_points, o.path);
            }
            record_free(&rec);
            free(idx);
        }
    return rc;
}

void sweep_progress(int64_t i, int64_t n, double el, int64_t finished, int64_t todo) {
    double eta = finished > 0 ? el / (double)finished * (double)(todo - finished) : NAN;
    char e1[32], e2[32];
    snprintf(e1, sizeof e1, "%.1f s", el);
    if (isfinite(eta)) snprintf(e2, sizeof e2, "%.1f s", eta);
    else snprintf(e2, sizeof e2, "?");
    fprintf(stderr, "\r\033[Kxfprof sweep: point %lld of %lld | elapsed %s | ETA %s", (long long)i, (long long)n, e1, e2);
    fflush(stderr);
}
