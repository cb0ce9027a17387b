/* The read side of `xfprof merge` (sweep_merge.h): scan, check, read back in grid order. */
#include "sweep_merge.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "args.h"
#include "sweep_line.h"
#include "sweep_shard.h"

#define MERGE_MAX_LINE ((size_t)1 << 30) /* one point's line; a sweep point is far smaller */
#define MERGE_LIST 6                     /* points or axes named in a message */

/* "batch: 1,2 (a.jsonl) vs 1,2,4 (b.jsonl); ..." for the axes that differ, into buf. */
static void axes_diff(const char *a, const char *pa, const char *b, const char *pb, char *buf, size_t len) {
    cJSON *ja = cJSON_Parse(a), *jb = cJSON_Parse(b);
    size_t n = 0;
    buf[0] = '\0';
    for (int pass = 0; pass < 2 && ja && jb; pass++) {
        const cJSON *x = pass ? jb : ja, *y = pass ? ja : jb;
        for (const cJSON *f = x->child; f && n + 1 < len; f = f->next) {
            const cJSON *g = cJSON_GetObjectItemCaseSensitive(y, f->string);
            if (pass && g) continue; /* named in the first pass */
            char *ta = cJSON_PrintUnformatted(pass ? g : f), *tb = cJSON_PrintUnformatted(pass ? f : g);
            if (!ta || !tb || strcmp(ta, tb) != 0)
                n += (size_t)snprintf(buf + n, len - n, "%s%s: %.120s (%s) vs %.120s (%s)", n ? "; " : "", f->string,
                                      ta ? ta : "absent", pa, tb ? tb : "absent", pb);
            free(ta);
            free(tb);
            if (n >= len) n = len - 1;
        }
    }
    if (!buf[0]) snprintf(buf, len, "the same axes, other points (another order or combination of them)");
    cJSON_Delete(ja);
    cJSON_Delete(jb);
}

/* One line of file f (path p, line ln at offset off) into the merge. */
static xf_status take_line(sweep_merge *m, int f, int64_t ln, int64_t off, const char *text, size_t len) {
    const char *p = m->paths[f];
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%.120s line %lld", p, (long long)ln);
    sweep_line_meta mt;
    xf_status s = sweep_line_parse_meta(text, len, ctx, &mt);
    if (s == XF_OK && !mt.has_place)
        s = xf_errorf(XF_EINVAL, "%s carries no grid index (written by an xfprof before 'sweep --shard'): run that sweep again to "
                      "merge it", ctx);
    if (s == XF_OK && !m->pts) { /* the first line sets the grid */
        m->ref = p;
        m->n_points = mt.n_points;
        m->hash = mt.hash;
        snprintf(m->tool_version, sizeof m->tool_version, "%s", mt.tool_version);
        m->axes = mt.axes;
        mt.axes = NULL;
        m->pts = calloc((size_t)m->n_points, sizeof *m->pts);
        if (!m->pts) s = xf_errorf(XF_ENOMEM, "out of memory for %lld points", (long long)m->n_points);
        for (int64_t k = 0; m->pts && k < m->n_points; k++) m->pts[k].file = -1;
    } else if (s == XF_OK && strcmp(mt.tool_version, m->tool_version) != 0) {
        s = xf_errorf(XF_EINVAL, "%s was made by xfprof %s, %.120s by xfprof %s: merge the shards of one build", ctx,
                      mt.tool_version, m->ref, m->tool_version);
    } else if (s == XF_OK && (mt.n_points != m->n_points || mt.hash != m->hash)) {
        char diff[900];
        axes_diff(m->axes, m->ref, mt.axes, p, diff, sizeof diff);
        s = xf_errorf(XF_EINVAL, "%s is a point of another sweep (%lld points) than %.120s's (%lld points): %s", ctx,
                      (long long)mt.n_points, m->ref, (long long)m->n_points, diff);
    }
    if (s == XF_OK) {
        merge_point *pt = &m->pts[mt.index];
        if (pt->file >= 0) { /* given before: the same bytes are the same point, other bytes an overlap */
            const char *prev; /* m->buf, not text (getline's) */
            size_t plen;
            if ((s = sweep_merge_line(m, mt.index, &prev, &plen)) == XF_OK) {
                if (plen == len + 1 && memcmp(prev, text, len) == 0) m->n_twice++;
                else
                    s = xf_errorf(XF_EINVAL, "point %lld (%.300s) is in %.120s line %lld and in %s with other contents: the "
                                  "shards overlap (a point run twice); merge one of the two", (long long)mt.index + 1, mt.key,
                                  m->paths[pt->file], (long long)pt->line, ctx);
            }
        } else if (!(pt->key = strdup(mt.key))) {
            s = xf_errorf(XF_ENOMEM, "out of memory");
        } else {
            pt->file = f;
            pt->line = ln;
            pt->off = off;
            pt->len = (int64_t)len + 1; /* with its newline */
            pt->setup = mt.setup_hash;
        }
    }
    sweep_line_meta_free(&mt);
    return s;
}

static xf_status scan_file(sweep_merge *m, int f) {
    FILE *fp = m->files[f];
    char *line = NULL;
    size_t cap = 0;
    int64_t off = 0, ln = 0;
    xf_status s = XF_OK;
    ssize_t got;
    errno = 0;
    while (s == XF_OK && (got = getline(&line, &cap, fp)) > 0) {
        ln++;
        if ((size_t)got > MERGE_MAX_LINE)
            s = xf_errorf(XF_EINVAL, "%s line %lld is over 1 GiB: not a sweep line", m->paths[f], (long long)ln);
        else if (line[got - 1] != '\n')
            s = xf_errorf(XF_EINVAL, "%s line %lld is incomplete (an interrupted write): finish that shard first "
                          "(the same 'xfprof sweep' command with --resume), then merge", m->paths[f], (long long)ln);
        else s = take_line(m, f, ln, off, line, (size_t)got - 1);
        off += got;
    }
    if (s == XF_OK && ferror(fp)) s = xf_errorf(XF_EIO, "cannot read %s: %s", m->paths[f], strerror(errno));
    free(line);
    return s;
}

/* Every point present, their keys the grid's, one model and device per group. */
static xf_status check_whole(sweep_merge *m) {
    if (!m->pts) return xf_errorf(XF_EINVAL, "the inputs hold no points (empty shards only): nothing to merge");
    int64_t missing = 0;
    char list[400] = "";
    size_t n = 0;
    for (int64_t k = 0; k < m->n_points; k++) {
        if (m->pts[k].file >= 0) continue;
        if (missing++ < MERGE_LIST && n < sizeof list)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%lld", n ? ", " : "", (long long)k + 1);
    }
    if (missing) {
        /* the shards a complete set would have: those of the first input's shard count */
        const merge_point *any = NULL;
        for (int64_t k = 0; k < m->n_points && !any; k++) any = m->pts[k].file >= 0 ? &m->pts[k] : NULL;
        sweep_line_meta mt;
        const char *text;
        size_t len;
        int64_t cnt = 0;
        xf_status s = sweep_merge_line(m, any - m->pts, &text, &len);
        if (s == XF_OK && (s = sweep_line_parse_meta(text, len, "merge", &mt)) == XF_OK) cnt = mt.shard.count;
        sweep_line_meta_free(&mt);
        if (s) return s;
        char shards[200] = "";
        size_t sn = 0;
        int named = 0;
        for (int64_t i = 0; i < cnt && named < MERGE_LIST; i++) {
            int lack = 0;
            for (int64_t k = i; k < m->n_points && !lack; k += cnt) lack = m->pts[k].file < 0;
            if (lack && sn < sizeof shards) {
                sn += (size_t)snprintf(shards + sn, sizeof shards - sn, "%s%lld/%lld", sn ? ", " : "", (long long)i + 1, (long long)cnt);
                named++;
            }
        }
        return xf_errorf(XF_EINVAL, "%lld of the grid's %lld points are missing: point %s%s (of shard %s): merge needs every "
                         "shard's JSONL; run or finish the missing shards (sweep ... --shard i/n --jsonl F --resume)",
                         (long long)missing, (long long)m->n_points, list, missing > MERGE_LIST ? ", ..." : "", shards);
    }
    const char **keys = malloc((size_t)m->n_points * sizeof *keys);
    if (!keys) return xf_errorf(XF_ENOMEM, "out of memory");
    for (int64_t k = 0; k < m->n_points; k++) keys[k] = m->pts[k].key;
    uint64_t h = sweep_keys_hash(keys, m->n_points);
    free(keys);
    if (h != m->hash)
        return xf_errorf(XF_EINVAL, "the points' keys do not make up the grid their lines name (hash %016" PRIx64 ", the lines say %016" PRIx64
                         "): a line was edited or comes from another build", h, m->hash);
    return XF_OK;
}

xf_status sweep_merge_scan(sweep_merge *m, const char *const *paths, int n) {
    memset(m, 0, sizeof *m);
    m->paths = paths;
    m->n_files = n;
    if (!(m->files = calloc((size_t)(n > 0 ? n : 1), sizeof *m->files))) return xf_errorf(XF_ENOMEM, "out of memory");
    for (int f = 0; f < n; f++) {
        if (!(m->files[f] = fopen(paths[f], "rb")))
            return xf_errorf(errno == EMFILE ? XF_EIO : XF_EINVAL, "cannot open %s: %s%s", paths[f], strerror(errno),
                             errno == EMFILE ? " (too many inputs open at once: concatenate the shards first, cat a b > ab)" : "");
        xf_status s = scan_file(m, f);
        if (s) return s;
    }
    xf_status s = check_whole(m);
    if (s) return s;
    /* one model config and device per (model, device) group: the first point of each sets them */
    sweep_param *ps;
    char **models, **devices;
    int nm, nd;
    if ((s = sweep_merge_params(m, &ps, &models, &nm, &devices, &nd))) return s;
    int64_t *first = malloc((size_t)nm * (size_t)nd * sizeof *first); /* (n_models * n_devices) */
    if (!first) s = xf_errorf(XF_ENOMEM, "out of memory");
    for (int64_t g = 0; first && g < (int64_t)nm * nd; g++) first[g] = -1;
    for (int64_t k = 0; first && k < m->n_points && s == XF_OK; k++) {
        int64_t g = (int64_t)ps[k].model * nd + ps[k].device, j = first[g];
        if (j < 0) first[g] = k;
        else if (m->pts[j].setup != m->pts[k].setup)
                s = xf_errorf(XF_EINVAL, "%s line %lld and %s line %lld ran %s on %s with another model config or device "
                              "(a config.json, device file or measured ceilings that differ between the shards' machines): merge shards of "
                              "one setup",
                              m->paths[m->pts[j].file], (long long)m->pts[j].line, m->paths[m->pts[k].file],
                              (long long)m->pts[k].line, models[ps[k].model], devices[ps[k].device]);
    }
    free(first);
    free(ps);
    args_str_list_free(models, nm);
    args_str_list_free(devices, nd);
    return s;
}

xf_status sweep_merge_line(sweep_merge *m, int64_t k, const char **text, size_t *len) {
    const merge_point *pt = &m->pts[k];
    size_t n = (size_t)pt->len;
    if (n + 1 > m->cap) {
        char *nb = realloc(m->buf, n + 1);
        if (!nb) return xf_errorf(XF_ENOMEM, "out of memory for a line of %zu bytes", n);
        m->buf = nb;
        m->cap = n + 1;
    }
    int fd = fileno(m->files[pt->file]);
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, m->buf + got, n - got, (off_t)(pt->off + (int64_t)got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return xf_errorf(XF_EIO, "cannot read %s line %lld back: %s", m->paths[pt->file], (long long)pt->line,
                             r < 0 ? strerror(errno) : "the file got shorter while merging");
        got += (size_t)r;
    }
    m->buf[n] = '\0';
    *text = m->buf;
    *len = n;
    return XF_OK;
}

/* The names of axis `name` (a JSON array of strings in the axes object). */
static xf_status axis_names(const cJSON *axes, const char *name, char ***out, int *n) {
    *out = NULL;
    *n = 0;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(axes, name);
    int k = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
    if (k <= 0) return xf_errorf(XF_EINVAL, "the grid's axes lack '%s'", name);
    if (!(*out = calloc((size_t)k, sizeof **out))) return xf_errorf(XF_ENOMEM, "out of memory");
    for (const cJSON *e = a->child; e; e = e->next) {
        if (!cJSON_IsString(e)) return xf_errorf(XF_EINVAL, "the grid's axis '%s' holds a non-string", name);
        if (!((*out)[(*n)++] = strdup(e->valuestring))) return xf_errorf(XF_ENOMEM, "out of memory");
    }
    return XF_OK;
}

static int find_name(char **names, int n, const char *key, const char *field) {
    char v[SWEEP_KEY_LEN];
    if (sweep_key_field(key, field, v, sizeof v) != 0) return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], v) == 0) return i;
    return -1;
}

xf_status sweep_merge_params(const sweep_merge *m, sweep_param **ps, char ***models, int *n_models, char ***devices,
                             int *n_devices) {
    *ps = NULL;
    *models = *devices = NULL;
    *n_models = *n_devices = 0;
    cJSON *axes = cJSON_Parse(m->axes);
    xf_status s = axes ? XF_OK : xf_errorf(XF_ENOMEM, "out of memory");
    if (s == XF_OK && !(s = axis_names(axes, "model", models, n_models))) s = axis_names(axes, "device", devices, n_devices);
    cJSON_Delete(axes);
    if (s == XF_OK && !(*ps = calloc((size_t)m->n_points, sizeof **ps))) s = xf_errorf(XF_ENOMEM, "out of memory");
    for (int64_t k = 0; s == XF_OK && k < m->n_points; k++) {
        sweep_param *p = &(*ps)[k];
        p->model = find_name(*models, *n_models, m->pts[k].key, "model");
        p->device = find_name(*devices, *n_devices, m->pts[k].key, "device");
        snprintf(p->key, sizeof p->key, "%s", m->pts[k].key);
        if (p->model < 0 || p->device < 0)
            s = xf_errorf(XF_EINVAL, "point %lld (%.300s): its model or device is not among the grid's axes", (long long)k + 1,
                          m->pts[k].key);
    }
    if (s) {
        free(*ps);
        *ps = NULL;
        args_str_list_free(*models, *n_models);
        args_str_list_free(*devices, *n_devices);
        *models = *devices = NULL;
        *n_models = *n_devices = 0;
    }
    return s;
}

void sweep_merge_free(sweep_merge *m) {
    if (!m) return;
    for (int f = 0; m->files && f < m->n_files; f++)
        if (m->files[f]) fclose(m->files[f]);
    for (int64_t k = 0; m->pts && k < m->n_points; k++) free(m->pts[k].key);
    free(m->files);
    free(m->pts);
    free(m->axes);
    free(m->buf);
    memset(m, 0, sizeof *m);
}
